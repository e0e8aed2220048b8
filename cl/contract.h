/* The host-kernel contract: included by the OpenCL C program (cl/program.cl) and by the C host
 * (src/), so that every constant, argument position and argument struct exists once.
 *
 * Kernel arguments: the buffers, by position (the RQ_*_ARGS lists give position and name; tests
 * compare the names with the compiled kernels' argument info), then one struct of scalars passed by
 * value. Struct fields are ordered 8-byte, then 4-byte, so both compilers lay them out without
 * padding; the sizes are checked at compile time on both sides (RQ_STATIC_ASSERT). */
#ifndef ROPEQK_CONTRACT_H
#define ROPEQK_CONTRACT_H

#if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__)
typedef long rq_i64;
typedef int rq_i32;
typedef float rq_f32;
/* OpenCL C 1.2 has no _Static_assert: a negative array size stops the build instead */
#define RQ_STATIC_ASSERT(cond, name) typedef char rq_static_assert_##name[(cond) ? 1 : -1]
#else /* the host: <stdint.h> is included before this header (no #include <...> here: the program
       * text is assembled from "" includes only) */
typedef int64_t rq_i64;
typedef int32_t rq_i32;
typedef float rq_f32;
#define RQ_STATIC_ASSERT(cond, name) _Static_assert(cond, #name)
#endif

/* ---- constants ------------------------------------------------------------------------------ */
/* -DRQ_OPS=<bits>: the kernels of these operations only (cl/program.cl); unset: all */
#define RQ_OPS_SCORES 1
#define RQ_OPS_ATTN 2
#define RQ_OPS_PAGED 4
#define RQ_RV 16     /* rope_rotate_*: rows per work-item (one float16 across rows), CPU profile */
#define RQ_RGX 32    /* rope_rotate_*, GPU profile (cl/rope_gpu.cl): units per work-group (one warp) */
#define RQ_RGY 8     /* ... work-items along rows (a work-group of RQ_RGX x RQ_RGY) */
#define RQ_RTR 32    /* ... rows per work-group (a tile of RQ_RGX units x RQ_RTR rows, a multiple of RQ_RGY) */
#define RQ_RHC 4     /* ... heads per work-group (each row's angles reused RQ_RHC times) */
#define RQ_DM 8      /* qk_decode_*: query rows per KV head (2 keys x 8 rows = one 16-lane sum tree) */
#define RQ_DMAXD 256 /* qk_decode_*: largest head dim, and Qr's row stride on the decode path */
#define RQ_DCHUNK 16 /* qk_decode_*: D and R/2 are processed in chunks of this many lanes */
#define RQ_ADVMAX 512 /* qk_attention_*: V dims per work-item (a column block of V; the f32 accumulators live
                       * in private memory), CPU-profile programs: Dv 512 (MLA) in one block. Larger Dv
                       * runs ceil(Dv / RQ_ADVMAX) column blocks, each computing the scores again */
#define RQ_ADVMAX_GPU 256 /* the same in GPU-profile programs (qk_attention_* is the GPU kernel's fallback
                           * there, whose private memory is a stack: tests/gpucc) */
#define RQ_PKB 16    /* paged_attn_cpu_*: keys per block (one float16 across keys) */
#define RQ_PCH 32    /* paged_attn_cpu_*: query heads per work-item, at most */
#define RQ_PWG 256   /* paged_attn_gpu: largest work-group size; the host runs 128 work-items, 256 where Dv >
                      * 128, fewer where the device takes fewer for the kernel (src/opencl/cl_paged_run.c) */
#define RQ_PTK 32    /* paged_attn_gpu: keys per tile */
#define RQ_PDC 64    /* paged_attn_gpu: head dims per stage of the K tile (32 rotation pairs, or 64
                      * pass-through dims), whatever D */
#define RQ_PQD 256   /* paged_attn_gpu: query dims kept in local memory for every tile (D <= 256: staged
                      * once; larger D: stage by stage) */
#define RQ_PKS (RQ_PDC + 1) /* paged_attn_gpu: row stride of the K tile in local memory, floats (odd:
                             * the scorers' reads of one column fall in distinct banks) */
#define RQ_PGH 8     /* paged_attn_gpu: query heads per work-group, at most */
#define RQ_PSQ 4     /* paged_attn_gpu: scorer slots per key (each scores RQ_PGH / RQ_PSQ = 2 heads) */
#define RQ_PVT 1     /* paged_attn_gpu: V dims per work-item and query head (private accumulators:
                      * RQ_PGH * RQ_PVT; 2 took sm_90 to 132 registers, tests/gpucc) */
#define RQ_PUN 4     /* paged_attn_gpu: V rows a work-item reads together in P.V (their loads in flight
                      * at once) */
#define RQ_PKQ 4     /* paged_attn_gpu: key lanes per work-group, at most (small Dv: the work-items
                      * split the tile's keys, partial outputs summed at the end) */
/* paged_attn_gpu's local memory in bytes, as cl/paged.cl declares it: the K tile stage (also the key
 * lanes' partial outputs at the end), the query heads' stage, the tile's scores and e^(S - m), the
 * keys' biases (0 or -inf) and K and V scales (8-bit caches), K and V row offsets, four per-head
 * values, and the 8-bit caches' code tables (256 floats each) */
#define RQ_PAGED_LOCAL_BYTES                                                                       \
    (4 * (RQ_PTK * RQ_PKS + RQ_PGH * RQ_PQD + 2 * RQ_PGH * RQ_PTK + 3 * RQ_PTK + 4 * RQ_PGH + 2 * 256) + 8 * 2 * RQ_PTK)
#define RQ_PCWG 64   /* paged_combine and paged_append: work-group size */
#define RQ_NV_MAXREG 128 /* registers a work-item at most on NVIDIA's OpenCL (-cl-nv-maxrregcount, GPU profile:
                          * two work-groups of 256 an SM; src/opencl/cl_tune.c) */
/* paged_attn_fast (cl/paged_fast.cl, GPU profile; docs/paged-decode-gpu.md has the measurements
 * behind each constant): a work-group of RQ_FWG work-items per (split, KV head + query-head chunk,
 * group of a sequence's rows), tiles of RQ_FWG keys (one per work-item when scoring) */
#define RQ_FWG 128   /* paged_attn_fast: work-group size and keys per tile */
#define RQ_FM 8      /* paged_attn_fast8: query vectors (query head x row) per work-group, at most
                      * (paged_attn_fast4: 4) */
#define RQ_FQF 2048  /* paged_attn_fast: floats of staged Q (M rounded up to 4, times D) */
#define RQ_FTB 2112  /* paged_attn_fast: (cos, sin) entries of the R(delta) table, delta < dr, R/2 + 2 a row */
#define RQ_FAN 1024  /* paged_attn_fast: (cos, sin) anchors per tile, (RQ_FWG / dr) x R/2 */
#define RQ_FMH 4     /* paged_attn_fast: query vectors per work-item in P.V (one float4 of P) */
#define RQ_FVD 4     /* paged_attn_fast: V dims per work-item in P.V (an 8-byte load of a 16-bit row) */
#define RQ_FPU 4     /* paged_attn_fast: keys a P.V round (their V loads in flight together) */
#define RQ_FTHR 8.0f /* paged_attn_fast: P = e^(S - m) against a running max m that may lag the true one
                      * by up to this (P <= e^8 = 2981): the max is raised only when a score passes it */
/* the R(delta) table and the anchors at dr 32 (R <= 128) or 16 (R <= 256); larger R: paged_attn_gpu */
#define RQ_FR_MAX 256
#define RQ_FPT (RQ_FM + 4) /* floats per key of the tile's P (row stride: M rounded up to 4, plus 4 when that
                            * is a multiple of 8, so that the score owners' float4 stores hit distinct banks) */
/* paged_attn_fast's local memory in bytes, as cl/paged_fast_task.tpl.cl declares it: Q, the R(delta)
 * table, the anchors and P in one float4 array (the table and anchors reused for the key lanes' partial
 * outputs at the end), the tile's V rows and scales, per query vector two running maxima and a row
 * position, two flags, the task's values */
#define RQ_FAST_LOCAL_F4 ((RQ_FQF + 2 * RQ_FTB + 2 * RQ_FAN + RQ_FWG * RQ_FPT) / 4)
#define RQ_FAST_LOCAL_BYTES (16 * RQ_FAST_LOCAL_F4 + 8 * RQ_FWG + 12 * RQ_FM + 8 + 4 * RQ_FTC_N)
/* paged_attn_fast: the task's values it keeps in local memory (tci): the keys' end, the first key's
 * position, the rows' positions' range, the rows, where the page list starts in the metadata */
#define RQ_FTC_JEND 0
#define RQ_FTC_KP0 1
#define RQ_FTC_PQMIN 2
#define RQ_FTC_PQMAX 3
#define RQ_FTC_NR 4
#define RQ_FTC_PAGES 5
#define RQ_FTC_CELLS 6 /* and the P.V cells (query-vector blocks x 4-dim V chunks) */
#define RQ_FTC_N 7
#define RQ_FSPLITS 8 /* paged_attn_fast: work-groups per compute unit the split aims at */
#define RQ_LOCAL_CAP 49152 /* qk_scores_tiled: most local bytes per work-group it may use: 48 KiB, what
                            * NVIDIA's OpenCL allows for static __local arrays (measured on an H100) */
/* qk_scores_tiled's local memory in bytes, for a tile edge and a step of tk dims: the Q and K tiles,
 * the row and key positions and the four limits (cl/scores_tiled.cl declares exactly these arrays) */
#define RQ_TILED_LOCAL_BYTES(tile, tk) (4 * (2 * (tile) * (tk) + 2 * (tile) + 4))
#define RQ_GDKB 32   /* qk_decode_gpu_*: keys per work-group (32 rows of RQ_DMAXD + 1 floats: 32.1 KiB of
                      * local memory, under NVIDIA's 48 KiB) */
#define RQ_GDWG 64   /* qk_decode_gpu_*: work-group size (32 keys x RQ_DM rows = 4 dot products each) */
#define RQ_GDECODE_LOCAL_BYTES (4 * RQ_GDKB * (RQ_DMAXD + 1)) /* its tile, as cl/decode_gpu.cl declares it */
/* qk_attention_gpu_* (cl/attention_gpu.cl): the float4 elements of its step tile (the Q and K tiles
 * of an S step, or aliased, the V tile of a P.V step) and its local memory in bytes for a shape
 * (rows bm, keys bn, step tk, column block dv): that tile, the P tile (rows padded by 4 floats), the
 * row max partials, the row sum partials, the running row max (two halves), six output offsets and
 * strides, the positions of the rows and keys and their limits, a flag, rounded up to 16 (the kernel's
 * struct of them, rq_ga_local) */
#define RQ_GA_STAGE4(bm, bn, tk, dv)                                                               \
    ((bm) * (tk) / 4 + (tk) * (bn) / 4 > (tk) * (dv) / 4 ? (bm) * (tk) / 4 + (tk) * (bn) / 4 : (tk) * (dv) / 4)
#define RQ_GA_LOCAL_BYTES(bm, bn, tk, dv)                                                          \
    ((16 * RQ_GA_STAGE4(bm, bn, tk, dv) + 4 * (bm) * ((bn) + 4) + 2 * (bm) * (bn) + 12 * (bm) + 4 * (bn) + 60 + 15) / 16 * 16)
/* qk_attention_gpu_*'s shape where a plan cannot run qk_attention_fa2_* (D not a multiple of its step, Dv not of 4):
 * rows, keys, step, rows per work-item, V dims (the shape it was the default in; cl/program.cl,
 * src/opencl/cl_attn.c) */
#define RQ_GA_FB_BM 32
#define RQ_GA_FB_BN 64
#define RQ_GA_FB_TK 16
#define RQ_GA_FB_RB 2
#define RQ_GA_FB_DV 128
/* qk_attention_fa2_* (cl/attention_fa2.cl, the register-blocked form of the same shapes): two stage
 * buffers (each the Q and K tiles of an S step, or aliased the V tile of a P.V step), in float4, and
 * its local memory in bytes: those, the P tile [key][row] (rows of BM + 4 floats), six output offsets and
 * strides, the max and the sum partials (BM x BN/4 each), the running max and the correction per row, the range of
 * key positions each row sees, the keys' positions, four limits, rounded up to 16 (rq_fa_local) */
#define RQ_FA_STAGE4(bm, bn, tk, dv)                                                               \
    (2 * ((tk) * ((bm) + 4) / 4 + (tk) * (bn) / 4 > (tk) * (dv) / 4 ? (tk) * ((bm) + 4) / 4 + (tk) * (bn) / 4 : (tk) * (dv) / 4))
#define RQ_FA_LOCAL_BYTES(bm, bn, tk, dv)                                                          \
    ((16 * RQ_FA_STAGE4(bm, bn, tk, dv) + 4 * (bn) * ((bm) + 4) + 48 + 2 * (bm) * (bn) + 16 * (bm) + 8 * (bn) + 28 + 15) / 16 * 16)
#define RQ_DT_F32 0  /* storage types as kernel arguments (the values of ropeqk_dtype) */
#define RQ_DT_F16 1
#define RQ_DT_BF16 2
#define RQ_DT_I8 4   /* the 8-bit paged-cache types (cl/quant.cl; docs/conventions.md section 12) */
#define RQ_DT_E4M3 5
#define RQ_DT_E5M2 6
#define RQ_Q8_MIN_ABSMAX 0x1p-90f /* the append stores a row whose absmax is below this as zeros (scale 0):
                                   * its scale or quotients would be f32 denormals, which devices that
                                   * flush them would quantize differently */

/* ---- argument positions ------------------------------------------------------------------------
 * X(kernel, ID, name): RQ_<kernel>_<ID> is the position of argument `name`. */
#define RQ_ARG_ENUM(kern, id, name) RQ_##kern##_##id,

#define RQ_ROTATE_ARGS(X) X(ROT, SRC, src) X(ROT, POS, pos) X(ROT, FREQ, vfreq) X(ROT, DST, dst) X(ROT, A, a)
#define RQ_SCORES_ARGS(X)                                                                          \
    X(SC, QR, qr) X(SC, KT, kt) X(SC, QPOS, qpos) X(SC, KPOS, kpos) X(SC, OUT, out) X(SC, A, a)
#define RQ_DECODE_ARGS(X)                                                                          \
    X(DEC, K, k) X(DEC, KPOS, kpos) X(DEC, FREQ, vfreq) X(DEC, CTAB, ctab) X(DEC, QR, qr)          \
    X(DEC, QPOS, qpos) X(DEC, OUT, out) X(DEC, A, a)

#define RQ_ATTN_ARGS(X)                                                                            \
    X(AT, QR, qr) X(AT, KT, kt) X(AT, V, v) X(AT, QPOS, qpos) X(AT, KPOS, kpos) X(AT, OUT, out)     \
    X(AT, LSE, lse) X(AT, SINK, sinks) X(AT, A, a)
/* paged decode (cl/paged.cl): pass 1 over the pages, the reduction of the splits, the cache append */
#define RQ_PAGED_ARGS(X)                                                                           \
    X(PG, K, kc) X(PG, V, vc) X(PG, META, meta) X(PG, FREQ, vfreq) X(PG, QR, qr) X(PG, PART, part) \
    X(PG, KS, ksc) X(PG, VS, vsc) X(PG, A, a)
#define RQ_PCOMB_ARGS(X)                                                                           \
    X(PC, PART, part) X(PC, META, meta) X(PC, OUT, out) X(PC, LSE, lse) X(PC, SINK, sinks) X(PC, A, a)
#define RQ_PAPP_ARGS(X) X(PA, SRC, src) X(PA, META, meta) X(PA, DST, dst) X(PA, A, a)
#define RQ_PGAT_ARGS(X) X(PT, SRC, src) X(PT, META, meta) X(PT, DST, dst) X(PT, A, a)
#define RQ_PAPPQ_ARGS(X) X(PQ, SRC, src) X(PQ, META, meta) X(PQ, DST, dst) X(PQ, SCALE, scale) X(PQ, A, a)
#define RQ_PGATQ_ARGS(X) X(PGQ, SRC, src) X(PGQ, META, meta) X(PGQ, SCALE, scale) X(PGQ, DST, dst) X(PGQ, A, a)
/* paged_attn_fast: paged_attn_gpu's buffers, then its R(delta) table (host fp64), then the struct */
#define RQ_PFAST_ARGS(X)                                                                           \
    X(PF, K, kc) X(PF, V, vc) X(PF, META, meta) X(PF, FREQ, vfreq) X(PF, QR, qr) X(PF, PART, part) \
    X(PF, KS, ksc) X(PF, VS, vsc) X(PF, TAB, ftab) X(PF, A, a)

enum { RQ_ROTATE_ARGS(RQ_ARG_ENUM) RQ_ROT_NARGS };
enum { RQ_ATTN_ARGS(RQ_ARG_ENUM) RQ_AT_NARGS };
enum { RQ_SCORES_ARGS(RQ_ARG_ENUM) RQ_SC_NARGS };
enum { RQ_DECODE_ARGS(RQ_ARG_ENUM) RQ_DEC_NARGS };
enum { RQ_PAGED_ARGS(RQ_ARG_ENUM) RQ_PG_NARGS };
enum { RQ_PCOMB_ARGS(RQ_ARG_ENUM) RQ_PC_NARGS };
enum { RQ_PAPP_ARGS(RQ_ARG_ENUM) RQ_PA_NARGS };
enum { RQ_PGAT_ARGS(RQ_ARG_ENUM) RQ_PT_NARGS };
enum { RQ_PAPPQ_ARGS(RQ_ARG_ENUM) RQ_PQ_NARGS };
enum { RQ_PGATQ_ARGS(RQ_ARG_ENUM) RQ_PGQ_NARGS };
enum { RQ_PFAST_ARGS(RQ_ARG_ENUM) RQ_PF_NARGS };

/* ---- scalar argument structs ------------------------------------------------------------------ */

/* rope_rotate_*: rotates rows of Q or K (src view: byte offset and strides) into f32 scratch (dst,
 * element strides per head, row and dim). Heads come in blocks of G (the query heads of a KV head;
 * 1 for K): row r of head bh is row m = (bh % G) * S + r of block bh / G, blocks d_bh apart.
 * panel > 0: the rows of a block are grouped in panels of that many rows, d_panel elements apart
 * (m at (m / panel) * d_panel + (m % panel) * d_row); 0: no panels (m * d_row).
 * The rotated dims are [rot_off, rot_off + R) (docs/conventions.md section 11), the others pass
 * through. Positions: pos[pos_off + st * pos_stride + r] for frequency u's stream st (the .w of
 * vfreq[u]: 0, or M-RoPE's 0/1/2, the position arrays then [3][pos_stride]), else pos_base + r. */
typedef struct {
    rq_i64 src_off, nb0, nb1, nb2, nb3; /* bytes */
    rq_i64 pos_off;                     /* elements into pos */
    rq_i64 d_bh, d_row, d_dim, d_panel; /* elements */
    rq_i32 H, BH, S, D, R, layout, use_pos, pos_base, panel, G;
    rq_f32 rot_mul; /* attention factor on cos and sin */
    rq_f32 out_mul; /* score scale for Q, 1 for K */
    rq_i32 pos_stride, rot_off;
} rq_rotate_args;
RQ_STATIC_ASSERT(sizeof(rq_rotate_args) == 10 * 8 + 12 * 4 + 2 * 4, rotate_args_size);

/* qk_scores: S = Qr . Kt with the masks, into the output view (byte offset and strides). */
typedef struct {
    rq_i64 qpos_off, kpos_off;             /* elements */
    rq_i64 out_off, onb0, onb1, onb2, onb3; /* bytes */
    rq_i64 window;
    rq_i32 M, Sq, Sk, ldk, D, G, Hkv, use_qpos, q_base, use_kpos, k_base, causal;
    rq_i32 qpanel; /* > 0: Qr in panels of qpw rows (a multiple of RQ_TQ), [bk][qpanel / qpw][D][qpw]
                    * (qpanel: M rounded up to qpw); 0: [bk][M][D] */
    rq_i32 qpw;
    rq_f32 softcap; /* > 0: S' = softcap * tanh(S / softcap) on unmasked scores */
    rq_i32 pad_;
} rq_scores_args;
RQ_STATIC_ASSERT(sizeof(rq_scores_args) == 8 * 8 + 16 * 4, scores_args_size);

/* qk_decode_*: one pass over K (caller's view) for few query rows per KV head. Keys rotate with
 * kpos (per frequency stream, kpos_stride apart: see rq_rotate_args) or k_base + j; masks use kpos
 * only without M-RoPE (mrope: token order, k_base + j; the host sets use_qpos likewise). */
typedef struct {
    rq_i64 k_off, knb0, knb1, knb2;         /* bytes */
    rq_i64 kpos_off, qpos_off;              /* elements */
    rq_i64 window;
    rq_i64 out_off, onb0, onb1, onb2, onb3; /* bytes */
    rq_i32 Hkv, Sk, D, R, layout, use_kpos, k_base, M, Sq, G, use_qpos, q_base, causal;
    rq_f32 rot_mul;
    rq_f32 softcap;                         /* > 0: S' = softcap * tanh(S / softcap) */
    rq_i32 rot_off, mrope, kpos_stride;
} rq_decode_args;
RQ_STATIC_ASSERT(sizeof(rq_decode_args) == 12 * 8 + 13 * 4 + 4 + 4 * 4, decode_args_size);

/* qk_attention_*: online softmax(Qr . Kt) . V for RQ_ATQ query rows per work-item; V is the
 * caller's view (byte offset and strides), out and lse too. o_dtype: ropeqk_dtype of out.
 * use_sinks: query head h's logit sinks[h] joins every row's softmax (the running max starts at it
 * with a sum of 1: an extra key of value 0). */
typedef struct {
    rq_i64 v_off, vnb0, vnb1, vnb2;         /* bytes */
    rq_i64 o_off, onb0, onb1, onb2;         /* bytes */
    rq_i64 l_off, lnb0, lnb1, lnb2;         /* bytes */
    rq_i64 qpos_off, kpos_off, window;
    rq_i32 M, Sq, Sk, ldk, D, Dv, G, Hkv, use_qpos, q_base, use_kpos, k_base, causal, o_dtype, with_lse;
    rq_i32 use_sinks;
    rq_f32 softcap;                         /* > 0: S' = softcap * tanh(S / softcap) on unmasked scores */
    rq_i32 pad_;
} rq_attn_args;
RQ_STATIC_ASSERT(sizeof(rq_attn_args) == 15 * 8 + 18 * 4, attn_args_size);
/* The per-call metadata of a paged enqueue (one int32 buffer, offsets in elements): pstart[n_seqs + 1]
 * at 0 (sequence s uses pages[pstart[s] .. pstart[s+1])), then lens, q_pos and k_pos0 (n_seqs each;
 * q_pos and k_pos0 unused by the append) and the packed page lists. */

/* paged_attn_cpu, paged_attn_gpu: pass 1. A task is (split, head group, sequence; on the CPU a group of
 * a sequence's rows, see rg_off): keys [sp*kps, min(len, (sp+1)*kps))
 * against the query heads of the group, Q read rotated and scaled from qr [s][Hq][D]; it writes its
 * unnormalised output part[(s*Hq + h)*nsplit + sp][Dv] and (max, sum) at part[ml_off + 2*that row].
 * Head groups: ngc == 1: kv heads [gi*kvpg, +kvpg) with all G query heads each; ngc > 1: kv head
 * gi/ngc, query heads [(gi%ngc)*gpg, +gpg) of it. ndvc: chunks of Dv (GPU kernel; 1 on the CPU). */
typedef struct {
    rq_i64 k_off, knb0, knb1, knb2;   /* bytes: K cache view [page][hk][slot][d] */
    rq_i64 v_off, vnb0, vnb1, vnb2;   /* bytes: V cache view */
    rq_i64 window;
    rq_i64 ml_off;                    /* floats into part */
    rq_i64 ks_off, vs_off;            /* floats: the scales of 8-bit caches (ksc, vsc), element
                                       * (page * Hkv + hk) * ps + slot from there */
    rq_i32 Hq, Hkv, G, D, Dv, R, layout, causal, ps, kps, nsplit;
    rq_i32 lens_off, qpos_off, kpos_off, pages_off; /* int32 elements into meta */
    rq_i32 kvpg, ngc, gpg, ndvc;
    rq_i32 kdt, vdt;                  /* RQ_DT_* of the caches (8-bit: value = q * its row's scale) */
    rq_i32 kq, dvch;                  /* GPU kernel: key lanes (1, 2 or 4) and V dims per chunk, dvch =
                                       * (work-group size / kq) * RQ_PVT; ndvc = ceil(Dv / dvch) */
    rq_f32 rot_mul;                   /* attention factor on cos and sin */
    rq_f32 softcap;                   /* > 0: S' = softcap * tanh(S / softcap) on unmasked scores */
    rq_i32 rot_off;                   /* first rotated dim: [rot_off, rot_off + R) rotate */
    rq_i32 rg_off;                    /* paged_attn_cpu and paged_attn_fast: their tasks' row groups,
                                       * meta[rg_off + grp] .. meta[rg_off + grp + 1] (paged_attn_gpu:
                                       * one row a task) */
    rq_i32 dr;                        /* paged_attn_fast: its R(delta) table's delta range (32 or 16) */
} rq_paged_args;
RQ_STATIC_ASSERT(sizeof(rq_paged_args) == 12 * 8 + 28 * 4, paged_args_size);
/* paged_attn_gpu: the K tile's buffer holds the key lanes' partial outputs at the end; a key's heads
 * are split evenly over its scorer slots (two each: the scorer is written for two) */
RQ_STATIC_ASSERT(RQ_PTK * RQ_PKS >= RQ_PWG * RQ_PGH * RQ_PVT, paged_reduce_fits);
RQ_STATIC_ASSERT(RQ_PGH == 2 * RQ_PSQ && RQ_PDC % 2 == 0 && RQ_PQD % RQ_PDC == 0, paged_scorers);
RQ_STATIC_ASSERT(RQ_FVD == 4 && RQ_FMH == 4 && RQ_FM % 4 == 0 && RQ_FWG % 32 == 0, paged_fast_shape);
#ifdef RQ_PFAST_TILE /* the host: the table's tile and rotary bound (src/core/call.h) are the kernel's */
RQ_STATIC_ASSERT(RQ_PFAST_TILE == RQ_FWG && RQ_PFAST_R_MAX == RQ_FR_MAX, paged_fast_tile);
#endif

/* paged_combine: joins the splits of each (sequence, query head) row into out (and lse); with
 * use_sinks, query head h's sinks[h] joins the denominator once, here. Sequence s's rows of out and
 * lse are at (s % nbat) * onb0 + (s / nbat) * onb2: the paged decode sets nbat = n_seqs (s * onb0),
 * the dense decode (src/opencl/cl_dense.c) numbers its sequences s = i * B + b for query row i of batch
 * entry b, so nbat = B. */
typedef struct {
    rq_i64 out_off, onb0, onb1, onb2, onb3; /* bytes */
    rq_i64 lse_off, lnb0, lnb1, lnb2;       /* bytes */
    rq_i64 ml_off;                          /* floats into part */
    rq_i32 Hq, Dv, nsplit, kps, lens_off, use_lse, rows, odt; /* odt: RQ_DT_* of out */
    rq_i32 use_sinks, nbat;
} rq_pcomb_args;
RQ_STATIC_ASSERT(sizeof(rq_pcomb_args) == 10 * 8 + 10 * 4, pcomb_args_size);

/* paged_append: copies rows [s][hk][t] of src into token lens[s] + t of sequence s, 2-byte units. */
typedef struct {
    rq_i64 src_off, snb0, snb1, snb2; /* bytes: k_new or v_new */
    rq_i64 dst_off, dnb0, dnb1, dnb2; /* bytes: the cache */
    rq_i32 Hkv, n_new, ps, units, lens_off, pages_off;
} rq_papp_args;
RQ_STATIC_ASSERT(sizeof(rq_papp_args) == 8 * 8 + 6 * 4, papp_args_size);

/* paged_gather: copies tokens 0 .. len-1 of the sequence whose page list metadata row `row` points
 * at into dense rows of dst at hk * dnb1 + t * dnb2 (the host: BHSD; a prefill chunk's K or V for the
 * attention kernel), 2-byte units. */
typedef struct {
    rq_i64 src_off, snb0, snb1, snb2; /* bytes: the cache */
    rq_i64 dnb1, dnb2;                /* bytes: the dense rows (offset 0) */
    rq_i32 Hkv, len, ps, units, row, pages_off;
} rq_pgat_args;
RQ_STATIC_ASSERT(sizeof(rq_pgat_args) == 6 * 8 + 6 * 4, pgat_args_size);
/* paged_append_q8 (cl/quant.cl): quantizes rows [s][hk][t] of src (f32/f16/bf16, sdt) into token
 * lens[s] + t of sequence s of an 8-bit cache (qdt), a work-item per row: its scale at element
 * (page * Hkv + hk) * ps + slot of scale, from scale_off floats. */
typedef struct {
    rq_i64 src_off, snb0, snb1, snb2; /* bytes: k_new or v_new */
    rq_i64 dst_off, dnb0, dnb1, dnb2; /* bytes: the cache */
    rq_i64 scale_off;                 /* floats */
    rq_i32 Hkv, n_new, ps, dim, lens_off, pages_off, rows, sdt, qdt, pad_;
} rq_pappq_args;
RQ_STATIC_ASSERT(sizeof(rq_pappq_args) == 9 * 8 + 10 * 4, pappq_args_size);

/* paged_gather_q8 (cl/quant.cl): paged_gather for an 8-bit cache (qdt): token t of the sequence of
 * metadata row `row`, head hk, into dense f32 row [t][hk] of dst as (float)code * its scale (element
 * (page * Hkv + hk) * ps + slot of scale, from scale_off floats): the decode kernels' values, so
 * the companion attention plan reads f32 K/V. */
typedef struct {
    rq_i64 src_off, snb0, snb1, snb2; /* bytes: the cache */
    rq_i64 scale_off;                 /* floats */
    rq_i64 dnb1, dnb2;                /* floats: the dense f32 rows (offset 0) */
    rq_i32 Hkv, len, ps, dim, row, pages_off, qdt, pad_;
} rq_pgatq_args;
RQ_STATIC_ASSERT(sizeof(rq_pgatq_args) == 7 * 8 + 8 * 4, pgatq_args_size);

#endif
