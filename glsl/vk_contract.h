/* The host-shader contract of the Vulkan backend: included by the GLSL compute shaders (the .comp files here)
 * and by the C host (src/vk/), so every push-constant block, binding number and specialization
 * constant id exists once.
 *
 * Push constants are lists of 4-byte fields (F(type, name)), expanded into a GLSL push_constant
 * block and into a C struct: with 4-byte fields only, std430 and C lay them out identically, and
 * the host checks each struct against the 128 bytes every Vulkan device guarantees. Offsets and
 * strides are in elements of the buffer's own type (the host converts byte strides, which the
 * validation has already checked to be multiples of the element size), so 32-bit indices address
 * a whole storage-buffer range (at most 4 GiB). */
#ifndef ROPEQK_VK_CONTRACT_H
#define ROPEQK_VK_CONTRACT_H

#ifdef GL_core_profile /* GLSL */
#define rq_vk_u32 uint
#define rq_vk_i32 int
#define rq_vk_f32 float
#define RQ_VK_PC_BLOCK(LIST) layout(push_constant) uniform rq_pc_block { LIST(RQ_VK_FIELD) } pc;
#else
#define rq_vk_u32 uint32_t
#define rq_vk_i32 int32_t
#define rq_vk_f32 float
#endif
#define RQ_VK_FIELD(t, n) rq_vk_##t n;

/* Specialization constant ids (all shaders): the storage type of the bound inputs, the work-group
 * size and the tile shape knobs. */
#define RQ_VK_SC_DT_A 0   /* dtype of the first typed input (Q for rotate; K for paged...) */
#define RQ_VK_SC_DT_B 1   /* dtype of the second typed input (V) */
#define RQ_VK_SC_DT_O 2   /* dtype of the output where it may be 16-bit */
#define RQ_VK_SC_WG 3     /* work-group size (x) */
#define RQ_VK_SC_K1 4     /* shape knobs of the shader (scores.comp: register block; tuned) */
#define RQ_VK_SC_K2 5     /* (scores.comp: head dims staged per step; tuned) */
#define RQ_VK_NSPEC 6     /* every pipeline is made with all six ids (unused ones are ignored) */

#define RQ_VK_DT_F32 0    /* the values of ropeqk_dtype */
#define RQ_VK_DT_F16 1
#define RQ_VK_DT_BF16 2
#define RQ_VK_DT_I8 4     /* 8-bit paged caches (docs/conventions.md section 12): bytes of uint words */
#define RQ_VK_DT_E4M3 5
#define RQ_VK_DT_E5M2 6

/* The frequency table of every shader that rotates (binding *_FREQ): a vec4 per rotary frequency u,
 * (hi, mid, lo, stream): inv_freq/pi as three floats (src/core/plan.c, angle.glsl), and the position
 * stream u rotates by under M-RoPE (0 temporal, 1 height, 2 width: rq_mrope_stream; 0 without it),
 * written by the host (vk_rope.c) so that no shader needs the sections. */

/* ---- rotate.comp: rows of Q or K rotated once into packed f32 scratch [bh][row][D] ---------- */
#define RQ_VK_ROT_SRC 0   /* bindings */
#define RQ_VK_ROT_POS 1   /* positions: [S], or [3][S] under M-RoPE (stream-major) */
#define RQ_VK_ROT_FREQ 2
#define RQ_VK_ROT_DST 3
#define RQ_VK_ROT_PDST 4  /* positions out (pd_nbat > 0; else the dummy): the dense decode's metadata */
/* rot_off: the first rotated dim (rotary_offset): pairs inside [rot_off, rot_off + R), every other
 * dim passes through */
#define RQ_VK_ROT_PC(F)                                                                            \
    F(u32, src_off) F(u32, nb0) F(u32, nb1) F(u32, nb2) /* source view, elements */                \
    F(u32, pos_off) F(u32, dst_off)                                                                \
    F(i32, H) F(i32, BH) F(i32, S) F(i32, D) F(i32, R) F(i32, lay)                              \
    F(i32, use_pos) F(i32, pos_base) F(f32, rot_mul) F(f32, out_mul) F(i32, rot_off)              \
    F(u32, d_b) F(u32, d_h) F(u32, d_row) /* dst of (bh, row): (bh / H) d_b + (bh % H) d_h + row d_row */ \
    F(u32, pd_off) F(i32, pd_nbat) /* pd_nbat > 0: row's position to pdst[pd_off + row * pd_nbat + b], b < pd_nbat */
#define RQ_VK_ROT_UNITS 64 /* work-group: 64 units (pairs or pass-through dims) of one row */

/* ---- scores.comp: S = Qr . Kr^T, masked, into the output view -------------------------------- */
#define RQ_VK_SC_QR 0
#define RQ_VK_SC_KR 1
#define RQ_VK_SC_QPOS 2
#define RQ_VK_SC_KPOS 3
#define RQ_VK_SC_OUT 4
/* Positions here only decide the masks: under M-RoPE the host passes use_qpos = use_kpos = 0 and the
 * offsets (masks follow token order whatever the rotary positions). softcap: C > 0 applies
 * C tanh(S / C) to unmasked scores (tanh.glsl), 0 = off. */
#define RQ_VK_SC_PC(F)                                                                             \
    F(u32, qpos_off) F(u32, kpos_off) F(u32, out_off) F(u32, onb0) F(u32, onb1) F(u32, onb2)       \
    F(u32, onb3) F(u32, window) /* window: 0 = off, else W (< 2^32; the host turns larger W off) */ \
    F(i32, Sq) F(i32, Sk) F(i32, D) F(i32, G) F(i32, Hq) F(i32, use_qpos) F(i32, q_base)           \
    F(i32, use_kpos) F(i32, k_base) F(i32, causal) F(u32, qr_off) F(u32, kr_off) F(f32, softcap)
/* The tile shape is tuned (ropeqk_tuning vk_block, vk_tk): each of the 16 x 16 invocations computes
 * T x T scores (spec constant RQ_VK_SC_K1: 2, 4 or 8), so a work-group owns a 16T x 16T tile, and
 * TK head dims (RQ_VK_SC_K2: 8, 16 or 32) are staged in shared memory per step, RQ_VK_SC_SHARED
 * bytes (8 x 32: 33 KiB, over the 32 KiB every device has: the host checks the device's limit). */
#define RQ_VK_SC_SIDE 16   /* invocations per side of the work-group */
#define RQ_VK_SC_T_DEF 4   /* defaults: the shape the suite first passed with (64 x 64, 16 dims) */
#define RQ_VK_SC_TK_DEF 16
#define RQ_VK_SC_SHARED(t, tk) (2 * (tk) * (RQ_VK_SC_SIDE * (t) + 1) * 4)
/* scores_few.comp (same bindings and push constants): at most this many query rows per KV head
 * (G * Sq, decode) and head dims (its staged Q rows: 8 x 256 floats = 8 KiB of shared memory) */
#define RQ_VK_FEW_M 8
#define RQ_VK_FEW_DMAX 256

/* ---- paged decode (ROPEQK_OP_PAGED_DECODE): paged.comp, paged_combine.comp, paged_append.comp ---
 * The per-call metadata (one int32 buffer, the OpenCL path's layout, written by vkCmdUpdateBuffer):
 * pstart[n+1] at 0 (sequence s uses pages[pstart[s] .. pstart[s+1])), lens, q_pos, k_pos0 (n each),
 * then the packed page lists. Qr (rotate.comp, the sequences as rows): [h][s][D], times the scale.
 * part: the unnormalised output of each (row = s*Hq + h, split) at (row*nsplit + sp)*Dv, then (max,
 * sum) pairs from ml_off. */
#define RQ_VK_PG_K 0      /* paged.comp bindings */
#define RQ_VK_PG_V 1
#define RQ_VK_PG_META 2
#define RQ_VK_PG_FREQ 3
#define RQ_VK_PG_QR 4
#define RQ_VK_PG_PART 5
#define RQ_VK_PG_KS 6     /* the f32 scales of an 8-bit K cache (the dummy buffer otherwise) */
#define RQ_VK_PG_VS 7     /* and of an 8-bit V cache */
#define RQ_VK_PG_NBIND 8
/* Offsets and strides in elements of the cache's dtype (bytes for an 8-bit cache). A task
 * (work-group) is (split, gi, s): gi = (kv head * ngc + query chunk) * ndvc + V chunk, ngc =
 * ceil(G / gpg); query heads [chunk*gpg, +gpg) of the KV head. flags: RQ_VK_PG_F_*. rot_off: the
 * first rotated dim (rotary_offset); softcap: C > 0, or 0 = off. K and V may be views of one buffer
 * (MLA: V is the first Dv dims of each cached key), bound twice, read-only both times. ks_off,
 * vs_off: the scale views' offsets in floats (8-bit caches; the scale of (page, KV head, slot) is
 * element (page * Hkv + head) * ps + slot from there, Hkv = Hq / G). Push constants are full (31 of
 * the 32 words every device has): fields that can be derived are not sent. */
#define RQ_VK_PG_PC(F)                                                                             \
    F(u32, k_off) F(u32, knb0) F(u32, knb1) F(u32, knb2)                                           \
    F(u32, v_off) F(u32, vnb0) F(u32, vnb1) F(u32, vnb2)                                           \
    F(u32, window) F(u32, ml_off) F(u32, lens_off) F(u32, qpos_off) F(u32, kpos_off)               \
    F(u32, pages_off) F(i32, n) F(i32, Hq) F(i32, G) F(i32, D) F(i32, Dv) F(i32, R) F(i32, flags)  \
    F(i32, ps) F(i32, kps) F(i32, nsplit) F(i32, gpg) F(i32, ndvc)                                 \
    F(f32, rot_mul) F(i32, rot_off) F(f32, softcap) F(u32, ks_off) F(u32, vs_off)
#define RQ_VK_PG_F_HALF 1   /* half-split pairs (else interleaved) */
#define RQ_VK_PG_F_CAUSAL 2
#define RQ_VK_PG_WG 64    /* work-group: keys per tile, V dims per pass */
/* Keys per split, at most: a work-group walks its split's keys in one invocation's loops, and
 * llvmpipe (lavapipe, CI) silently stops an invocation's loops after 65535 iterations in total; the
 * host counts paged.comp's loop trips per tile (vk_paged_run.c) against RQ_VK_AT_TRIPS and never lets a
 * split run longer than this. On a GPU more splits only add parallelism (the combine pass is cheap). */
#define RQ_VK_PG_MAX_KEYS 8192
#define RQ_VK_PG_GH 8     /* query heads per task, at most */
#define RQ_VK_PG_VT 4     /* V dims per invocation (a task covers RQ_VK_PG_WG * RQ_VK_PG_VT dims) */
#define RQ_VK_SC_QS 2     /* paged.comp: spec constant 2 = floats of the staged Q (gpg * D) */
#define RQ_VK_SC_PG_UC RQ_VK_SC_K2 /* paged.comp: rotary units of K staged per chunk (32, 16 or 8) */
#define RQ_VK_PG_UC_DEF 32
/* paged.comp's shared memory in bytes, exactly its arrays: Q, a chunk of rotated keys, the max
 * partials, P, the tile's row indices and row scales */
#define RQ_VK_PG_SHARED(qs, uc)                                                                    \
    (4 * ((qs) + RQ_VK_PG_WG * (2 * (uc) + 1) + 2 * RQ_VK_PG_GH * RQ_VK_PG_WG + 4 * RQ_VK_PG_WG))

/* ---- paged_fast.comp (paged_fast4.spv, paged_fast8.spv): pass 1 at memory speed ---------------
 * cl/paged_fast.cl's design (src/vulkan/vk_paged_fast.c takes it where the shape and views allow).
 * A work-group per (row group, split, gi): gi = (kv head * ngc + query chunk) * ndvc + V chunk, ndvc =
 * ceil(Dv / dvch); row group g's rows meta[rg_off + g] .. meta[rg_off + g + 1] (a sequence's rows,
 * sharing its page list). K offsets and strides in 16-byte units (the cache bound as uvec4[]), V's too
 * (bound as uvec2[]: the shader doubles them); n: the rows (Qr [h][n][D]). Spec constants: the dtypes,
 * RQ_VK_SC_QS (vec4s of Q: FM/4 * D), RQ_VK_SC_K1 (the table's delta range), RQ_VK_SC_K2 (vec4s of the
 * table and anchors, at least the end's key-lane sums). Push constants: all 32 words. */
#define RQ_VK_PF_K 0
#define RQ_VK_PF_V 1
#define RQ_VK_PF_META 2
#define RQ_VK_PF_FREQ 3
#define RQ_VK_PF_QR 4
#define RQ_VK_PF_PART 5
#define RQ_VK_PF_KS 6
#define RQ_VK_PF_VS 7
#define RQ_VK_PF_TAB 8    /* the R(delta) table (src/core/paged_fast_table.c) */
#define RQ_VK_PF_NBIND 9
#define RQ_VK_PF_PC(F)                                                                             \
    F(u32, k_off) F(u32, knb0) F(u32, knb1) F(u32, knb2)                                           \
    F(u32, v_off) F(u32, vnb0) F(u32, vnb1) F(u32, vnb2)                                           \
    F(u32, window) F(u32, ml_off) F(u32, lens_off) F(u32, qpos_off) F(u32, kpos_off)               \
    F(u32, pages_off) F(u32, rg_off) F(i32, n) F(i32, Hq) F(i32, G) F(i32, D) F(i32, Dv) F(i32, R)  \
    F(i32, flags) F(i32, ps) F(i32, kps) F(i32, nsplit) F(i32, gpg) F(i32, dvch)                   \
    F(f32, rot_mul) F(i32, rot_off) F(f32, softcap) F(u32, ks_off) F(u32, vs_off)
#define RQ_VK_PF_WG 128   /* work-group size and keys per tile (src/core/call.h RQ_PFAST_TILE) */
#define RQ_VK_PF_THR 8.0  /* P = e^(S - m) against a max that may lag by this (cl/contract.h RQ_FTHR) */
/* its shared memory in bytes, exactly its arrays: Q, the table and anchors, P (fm/4 float4s a key,
 * plus one where that is even), V rows and scales, two maxima per query vector, the rows' positions,
 * two flags */
#define RQ_VK_PF_SHARED(qf4, ta4, fm)                                                              \
    (16 * ((qf4) + (ta4) + RQ_VK_PF_WG * ((fm) / 4 % 2 == 0 ? (fm) / 4 + 1 : (fm) / 4)) +         \
     8 * RQ_VK_PF_WG + 8 * (fm) + 4 * (fm) + 8)
/* the trip count of the end's key-lane sums: (KL - 1) * cells * 5 vec4s, at most */
#define RQ_VK_PF_RED4 (5 * (RQ_VK_PF_WG - 1))

#define RQ_VK_PC_PART 0   /* paged_combine.comp bindings */
#define RQ_VK_PC_META 1
#define RQ_VK_PC_OUT 2
#define RQ_VK_PC_LSE 3
#define RQ_VK_PC_SINK 4   /* the plan's attention sinks (Hq f32), with use_sinks */
#define RQ_VK_PC_PC(F)                                                                             \
    F(u32, out_off) F(u32, onb0) F(u32, onb1) F(u32, onb3) /* elements of out's dtype */           \
    F(u32, lse_off) F(u32, lnb0) F(u32, lnb1) F(u32, ml_off) F(u32, lens_off)                       \
    F(i32, Hq) F(i32, Dv) F(i32, nsplit) F(i32, kps) F(i32, use_lse) F(i32, rows) F(i32, use_sinks)   \
    F(u32, onb2) F(u32, lnb2) F(i32, nbat) /* sequence s's row: (s % nbat) onb0 + (s / nbat) onb2 */
#define RQ_VK_PC_WG 64

#define RQ_VK_PA_SRC 0    /* paged_append.comp bindings */
#define RQ_VK_PA_META 1
#define RQ_VK_PA_DST 2
/* In units: 32-bit words when every offset, stride and row is word-aligned (words = 1), else
 * 16-bit halves (written with the two-atomic store of common.glsl). */
#define RQ_VK_PA_PC(F)                                                                             \
    F(u32, src_off) F(u32, snb0) F(u32, snb1) F(u32, snb2)                                         \
    F(u32, dst_off) F(u32, dnb0) F(u32, dnb1) F(u32, dnb2)                                         \
    F(i32, rows) F(i32, Hkv) F(i32, n_new) F(i32, ps) F(i32, units) F(u32, lens_off)               \
    F(u32, pages_off) F(i32, words)
#define RQ_VK_PA_WG 64

/* paged_gather.comp: prefill chunks (vk_paged_chunk.c) gather a sequence's first len cached rows of K
 * or V from its pages into dense BSHD scratch [len][Hkv][dim] in the cache's dtype (the companion
 * attention plan's view): the inverse of paged_append.comp, a unit (32-bit word, or 16-bit half when
 * the cache's offsets and strides or the rows are not word-aligned: words = 0) per invocation, units
 * over x, tokens over y and heads over z (each strided past 65535). Offsets and strides in units; row:
 * the metadata row (the chunk's first query row) whose page list it reads. */
/* An 8-bit cache (spec constant RQ_VK_SC_DT_B its dtype; 0 for a 16/32-bit cache): its values,
 * (float)code * the row's scale (binding SCALE, from scale_off floats), as f32 words [len][Hkv][dim],
 * a value per invocation (units = dim), the source in bytes, the destination in words. */
#define RQ_VK_GA_SRC 0
#define RQ_VK_GA_META 1
#define RQ_VK_GA_DST 2
#define RQ_VK_GA_SCALE 3
#define RQ_VK_GA_PC(F)                                                                             \
    F(u32, src_off) F(u32, snb0) F(u32, snb1) F(u32, snb2) F(u32, dnb1) F(u32, dnb2)              \
    F(i32, len) F(i32, Hkv) F(i32, ps) F(i32, units) F(i32, row) F(u32, pages_off) F(i32, words)   \
    F(u32, scale_off)
/* loop trips of one invocation (the token and head loops, each strided past the grid's 65535) */
#define RQ_VK_GA_TRIPS(len, hkv) (((int64_t)(len) / 65535 + 2) * ((int64_t)(hkv) / 65535 + 2))

/* paged_append_q8.comp: the append into an 8-bit cache, a new row (sequence, KV head, token) per
 * invocation (x + y * 65535 * RQ_VK_PA_WG: no grid-stride loop), quantizing as cl/quant.cl's
 * paged_append_q8 (docs/conventions.md section 12). Source in elements of its dtype (push constant
 * sdt: f32, f16, bf16), destination in bytes, scales in floats; the cache's dtype is spec constant
 * RQ_VK_SC_DT_B (known when the plan is made). A row's whole words are stored plainly (no other row has a byte in them),
 * the words it shares with a neighbour at its ends are written byte by byte with atomics, so any
 * byte offset and stride is taken. */
#define RQ_VK_PQ_SRC 0
#define RQ_VK_PQ_META 1
#define RQ_VK_PQ_DST 2
#define RQ_VK_PQ_SCALE 3
#define RQ_VK_PQ_PC(F)                                                                             \
    F(u32, src_off) F(u32, snb0) F(u32, snb1) F(u32, snb2)                                         \
    F(u32, dst_off) F(u32, dnb0) F(u32, dnb1) F(u32, dnb2) F(u32, scale_off)                       \
    F(i32, rows) F(i32, Hkv) F(i32, n_new) F(i32, ps) F(i32, dim) F(u32, lens_off) F(u32, pages_off) \
    F(i32, sdt) /* the new rows' dtype (per call; the cache's is a specialization constant) */
/* loop trips of one invocation for a row of `dim` values (the absmax pass, the word pass with its
 * edge bytes; the division's 25 steps are unrolled): the host refuses rows past RQ_VK_AT_TRIPS */
#define RQ_VK_PQ_TRIPS(dim) (2 * (int64_t)(dim) + 8)

/* ---- attention.comp: O = softmax(Qr . Kr^T) V, FlashAttention-2 shaped (S never stored) ------- */
#define RQ_VK_AT_QR 0
#define RQ_VK_AT_KR 1
#define RQ_VK_AT_V 2
#define RQ_VK_AT_QPOS 3
#define RQ_VK_AT_KPOS 4
#define RQ_VK_AT_OUT 5
#define RQ_VK_AT_LSE 6
#define RQ_VK_AT_ST 7  /* the plan's chunk state: f32 rows [B*Hkv][M][Dv + 2*ncb] */
#define RQ_VK_AT_QR4 8 /* Qr and Kr again, read as vec4 where D is a multiple of 4 */
#define RQ_VK_AT_KR4 9
#define RQ_VK_AT_SINK 10 /* the plan's attention sinks (Hq f32), with RQ_VK_AT_F_SINKS */
#define RQ_VK_AT_NBIND 11
/* flags: */
#define RQ_VK_AT_F_LSE 1   /* write the LSE view */
#define RQ_VK_AT_F_VEC4 2  /* D % 4 == 0: Q and K steps load vec4 (bindings RQ_VK_AT_QR4/KR4) */
#define RQ_VK_AT_F_SINKS 4 /* a sink logit per query head joins each row's denominator (last chunk) */
/* Positions only decide the masks (M-RoPE: the host passes the offsets, use_qpos = use_kpos = 0);
 * softcap: C > 0 applies C tanh(S / C) to unmasked scores, 0 = off. */
#define RQ_VK_AT_PC(F)                                                                             \
    F(u32, v_off) F(u32, vnb0) F(u32, vnb1) F(u32, vnb2) /* V view, elements of V's dtype */       \
    F(u32, o_off) F(u32, onb0) F(u32, onb1) F(u32, onb2) /* O view, elements of O's dtype */       \
    F(u32, l_off) F(u32, lnb0) F(u32, lnb1) F(u32, lnb2) /* LSE view (f32), with_lse only */       \
    F(u32, qpos_off) F(u32, kpos_off) F(u32, window) F(i32, M) F(i32, Sq) F(i32, Sk) F(i32, D)    \
    F(i32, Dv) F(i32, G) F(i32, Hkv) F(i32, use_qpos) F(i32, q_base) F(i32, use_kpos)            \
    F(i32, k_base) F(i32, causal) F(i32, flags)                                                  \
    F(i32, kc0) F(i32, kc1) /* this dispatch's keys: [kc0, kc1) of [0, Sk) */                    \
    F(f32, softcap)
/* The tile shape (specialization constants; the host's rq_vk_attn_shape, vk_attn.c):
 *   BM query rows per work-group (RQ_VK_SC_AT_BM; the tuned vk_rows: 32, 64 or 128),
 *   BN keys per tile (RQ_VK_SC_AT_BN: 64, or 32 where the device's shared memory needs it),
 *   RM x RN scores per invocation (fixed 4 x 4): TX = BN/4 by TY = BM/4 invocations,
 *   CV vec4 columns of O per invocation (RQ_VK_SC_AT_CV, 1..RQ_VK_AT_CVMAX): a work-group covers a
 *   column block of 4*TX*CV dims of V; wider Dv runs ncb = ceil(Dv / (4 TX CV)) column blocks,
 *   TK head dims per step of S, and keys per step of P V. */
#define RQ_VK_SC_AT_CV RQ_VK_SC_DT_A /* no typed first input: Q and K come from the f32 scratch */
#define RQ_VK_SC_AT_BM RQ_VK_SC_K1
#define RQ_VK_SC_AT_BN RQ_VK_SC_K2
#define RQ_VK_AT_RM 4
#define RQ_VK_AT_RN 4
#define RQ_VK_AT_TK 16
#define RQ_VK_AT_CVMAX 2   /* O: RM * 4 * CV <= 32 f32 accumulators per invocation, next to 16 of S */
#define RQ_VK_AT_BM_DEF 64 /* the default rows per work-group (vk_rows) */
#define RQ_VK_AT_DVMAX 512 /* largest Dv (MLA's 512 latent dims; column blocks of 4*TX*CV) */
/* attention.comp's shared memory in bytes, exactly its arrays: the Q/K step tile or (aliased) the P
 * tile, the V step tile, the row partials, the row and key positions */
#define RQ_VK_AT_QK4(bm, bn) (((bm) + (bn)) * (RQ_VK_AT_TK / 4 + 1))
#define RQ_VK_AT_PT4(bm, bn) ((bm) * ((bn) / 4 + 1))
#define RQ_VK_AT_SHARED(bm, bn, cv)                                                                \
    (16 * ((RQ_VK_AT_QK4(bm, bn) > RQ_VK_AT_PT4(bm, bn) ? RQ_VK_AT_QK4(bm, bn) : RQ_VK_AT_PT4(bm, bn)) + \
           RQ_VK_AT_TK * ((bn) / RQ_VK_AT_RN) * (cv)) +                                            \
     (bm) * (bn) + 4 * ((bm) + (bn)))
/* loop trips an invocation may run per dispatch, by vk_attn.c's count (an upper bound): half of
 * llvmpipe's 65535, which ends every loop beyond it silently; sets the keys per dispatch */
#define RQ_VK_AT_TRIPS 32768

#endif
