/* Fused attention for GPUs, FlashAttention-2 shaped: O = softmax(Qr . Kt) . V with an online
 * softmax, from the same rotated scratch as qk_attention_* (attention.cl: Qr [bk][M][D] pre-scaled,
 * Kt [bk][D][ldk] transposed) and V, O, LSE in the caller's views. The GPU profile's attention
 * kernel; qk_attention_* (one query row per work-item, o[Dv] in private memory: 1136 bytes of stack
 * on sm_90) stays the CPU profile's kernel and this one's fallback.
 *
 * Shape of the work:
 *   - a work-group owns RQ_GA_BM query rows of one KV head (rows m = g*Sq + i: the G query heads of
 *     a KV head packed together, so GQA reads K and V once per group of rows) and a column block
 *     of RQ_GA_DV dims of V, and walks the keys in tiles of RQ_GA_BN;
 *   - work-item (tx, ty), lid = ty*TX + tx, owns rows ty + i*TY (i < RQ_GA_RB) and keys 4tx..4tx+3
 *     of a tile (one float4) for S, and the same rows times the float4 column groups tx + c*TX
 *     (c < CV) of the block for O: register blocks of fixed size, indexed only by unrolled
 *     constants (no private array is indexed at run time: no stack);
 *   - S = Q K^T over head dims in steps of RQ_GA_TK: the Q rows and K columns of the step staged in
 *     local memory with coalesced vector loads (Kt rows are contiguous along keys: a K step is TK
 *     runs of BN floats, one float4 per work-item; Qr rows TK floats per row), read back as float4,
 *     as qk_scores_tiled does (per 4 dims RB + 4 local loads for 16 RB fma; the K loads of a warp
 *     are consecutive float4, the Q loads broadcasts);
 *   - the masks (exact -inf: keys past Sk, causal, sliding window; positions from the arrays or the
 *     bases), then the row max: each work-item's max over its 4 keys to local memory, every
 *     work-item of a row reads the TX partials (plain local memory: NVIDIA's OpenCL has no
 *     subgroups), the running max m (local memory, two halves: a tile reads one and writes the
 *     other, so no extra barrier), the correction exp(m_old - m) and P = exp(S - m) to local
 *     memory; each work-item keeps the sum of exp over its own keys of a row in local memory
 *     (rescaled by the same corrections), added up once at the end;
 *   - O = O * corr + P V with V staged in local memory RQ_GA_TK keys at a time (coalesced vector
 *     loads from the caller's view in its storage type: f32, f16 as halves, bf16 as bits);
 *   - a key tile whose every score is masked for the tile's rows (causal, window) is skipped whole;
 *     column float4 groups wholly past Dv skip their fma;
 *   - a fully masked row ends with l = 0: O = 0 and LSE = -inf;
 *   - non-finite data (docs/conventions.md section 9): a masked key weighs exactly 0 whatever its K
 *     and V hold. Its score is selected to -inf (weight 0), and since 0 * NaN is NaN the V staging
 *     zeroes non-finite values and notes them (L.vnf); where any was (rare), the end stores the sum
 *     of the non-finite V values each row sees over those dims of O (RQ_GA_NF_FIX): non-finite, as
 *     the rule says. The P.V step stays the plain fma. An unmasked score that is not finite becomes
 *     NaN before soft-capping, so a row that sees such a key ends with l = NaN: O and LSE NaN;
 *   - Dv > RQ_GA_DV runs ceil(Dv / RQ_GA_DV) column blocks as separate work-groups, each recomputing
 *     S. Registers decide it: a work-item holds RB * DV / TX floats of O, and the budget is 128
 *     registers on sm_90 and 128 VGPRs on gfx90a with no stack, scratch or spill (clang-15, libclc
 *     + ptxas, ROCm device libraries). The default shape (DV = 128, 16 floats of O) took 96
 *     registers / 114 VGPRs (120 / 126 since the full-tile path and the exp below, with the V
 *     loads' offsets as uint; RB 4, BM 64 with it: 164); DV = 256 (32 of O) took 128 / 152 and
 *     spilled scalar registers on gfx90a; RB 4 with 32 of O, 130 / 148. Dv = 256, D = 128 costs
 *     4/3 of the fma of one block that way. The row state lives in local memory for the same
 *     reason (in registers: 162 instead of 136 at RB 4), and so do the output's strides (see the
 *     prologue);
 *   - everything accumulates in f32; the weights and corrections use softmax_exp.cl's exp (fma
 *     only, a few ulp: libclc's built-in was about 150 SASS instructions a call, sm_90), the LSE
 *     the built-in log();
 *   - full tiles (d0 + TK <= D, j0 + BN <= Sk: uniform) stage Q and K without bounds checks from
 *     row pointers set up once, and the P.V step tests the column groups against Dv once per step
 *     (RQ_GA_PV_STEP). Static mix of one full key tile per work-item (default shape, f32, no
 *     soft-capping: ptxas 13 sm_90 via clang-15 + libclc, nvdisasm, counted per loop with the loops'
 *     trip counts): 4587 instructions, 47% FFMA before these three changes; 3771, 57% after;
 *     registers 102 -> 120 (96 -> 120 without the soft-capping code). docs/prefill-gpu.md;
 *   - the model-family variants (docs/conventions.md section 11): soft-capping on the S block before
 *     the masks (variants.cl: exp-based, as OpenCL's tanh put dg2 in private memory); sinks: the
 *     running max of a row starts at s_h, tx 0's sum partial at 1 (a key of logit s_h and value 0:
 *     a fully masked row ends with O = 0, LSE = s_h); the rotary offset and M-RoPE are the RoPE
 *     pass's. MLA (D 576, Dv 512) runs 4 column blocks of the default 128 dims.
 *
 * Tuning space (-D from the host, src/core/tuning.c; ROPEQK_ATTN_TILE, _KEYS, _TK, _RB, _DV):
 *   RQ_GA_BM  query rows per work-group:                  16, 32, 64, 128   (default 32)
 *   RQ_GA_BN  keys per tile (4 per work-item):            16, 32, 64, 128   (default 64)
 *   RQ_GA_TK  head dims per S step, keys per V step:      a multiple of 4 dividing BN, <= 64 (16)
 *   RQ_GA_RB  query rows per work-item:                   1, 2, 4, 8 dividing BM (default 2)
 *   RQ_GA_DV  V dims per work-group (column block):       a multiple of BN, <= 256 (default 128)
 * Constraints (src/opencl/cl_tune.c, src/opencl/cl_attn.c): the work-group size (BM / RB) * (BN / 4)
 * within CL_DEVICE_MAX_WORK_GROUP_SIZE and the compiled kernel's CL_KERNEL_WORK_GROUP_SIZE; the
 * local memory RQ_GA_LOCAL_BYTES (contract.h), bytes,
 *     16 * max(BM*TK/4 + TK*BN/4, TK*DV/4)   Q and K step tiles, or (aliased) the V step tile
 *   +  4 * BM * (BN + 4)                      P tile (rows padded by 4 floats: no bank conflicts)
 *   +  2 * BM * BN                            per row and tx: tile max partials, sum partials
 *   + 12 * BM + 4 * BN + 60                   running max (two halves), output strides, row and
 *                                             key positions, their limits, the non-finite V flag
 *                                             (rounded up to 16: the same bytes as without the flag)
 * within 48 KiB and CL_DEVICE_LOCAL_MEM_SIZE. Defaults: 256 work-items, 21696 bytes, 16 floats of O
 * and 8 of S per work-item. The host falls back to qk_attention_* where the device or the compiled
 * kernel does not take the shape.
 * Portable OpenCL C 1.2: no subgroups, no fp16 arithmetic, no Clang builtins, no variadic macros. */

#include "contract.h"
#include "load.cl"
#include "variants.cl" /* RQ_SOFTCAP */
#include "softmax_exp.cl"

RQ_DEFINE_SOFTMAX_EXP(rq_ga_exp, float, int, convert_int)
RQ_DEFINE_SOFTMAX_EXP(rq_ga_exp4, float4, int4, convert_int4)

#ifndef RQ_GA_BM
#define RQ_GA_BM 32
#endif
#ifndef RQ_GA_BN
#define RQ_GA_BN 64
#endif
#ifndef RQ_GA_TK
#define RQ_GA_TK 16
#endif
#ifndef RQ_GA_RB
#define RQ_GA_RB 2
#endif
#ifndef RQ_GA_DV
#define RQ_GA_DV 128
#endif
#if RQ_GA_BN % 16 != 0 || RQ_GA_TK % 4 != 0 || RQ_GA_BN % RQ_GA_TK != 0 || RQ_GA_BM % RQ_GA_RB != 0 || \
    RQ_GA_DV % RQ_GA_BN != 0
#error "RQ_GA_BN: a multiple of 16; RQ_GA_TK: of 4, dividing RQ_GA_BN; RQ_GA_RB: dividing RQ_GA_BM; RQ_GA_DV: of RQ_GA_BN"
#endif
#define RQ_GA_TX (RQ_GA_BN / 4)            /* work-items along keys (4 keys each) */
#define RQ_GA_TY (RQ_GA_BM / RQ_GA_RB)     /* work-items along rows */
#define RQ_GA_NT (RQ_GA_TX * RQ_GA_TY)     /* work-group size */
#define RQ_GA_CV (RQ_GA_DV / RQ_GA_BN)     /* float4 column groups of O per work-item: DV / (4 TX) */
#define RQ_GA_PS (RQ_GA_BN + 4)            /* row stride of the P tile, floats */
#define RQ_GA_Q4 (RQ_GA_TK / 4)            /* float4 per Q row of a step */
#define RQ_GA_K4 (RQ_GA_BN / 4)            /* float4 per K dim (or P row) of a tile */
#define RQ_GA_V4 (RQ_GA_DV / 4)            /* float4 per V row of the column block */
#define RQ_GA_ST4 RQ_GA_STAGE4(RQ_GA_BM, RQ_GA_BN, RQ_GA_TK, RQ_GA_DV)
#define RQ_GA_QREP ((RQ_GA_BM * RQ_GA_Q4 + RQ_GA_NT - 1) / RQ_GA_NT) /* Q float4 a work-item stages a step */
#define RQ_GA_KREP ((RQ_GA_TK + RQ_GA_TY - 1) / RQ_GA_TY)              /* K float4 likewise */

/* The work-group's local memory, one object (every array at a constant offset from one base);
 * RQ_GA_LOCAL_BYTES (contract.h) is its size, for the host's checks. */
typedef struct {
    float4 stage[RQ_GA_ST4];             /* Q and K tiles of an S step, or the V tile of a P.V step */
    float4 ps4[RQ_GA_BM * RQ_GA_PS / 4]; /* P tile [row][key], rows RQ_GA_PS floats apart */
    float red[RQ_GA_BM * RQ_GA_TX];      /* per row, each tx's max over its 4 keys of a tile */
    float lsum[RQ_GA_BM * RQ_GA_TX];     /* per row, each tx's sum of exp over its keys so far */
    float mstat[2 * RQ_GA_BM];           /* running row max: a tile reads one half, writes the other */
    long ostr[6];                        /* O and LSE: the batch's offset and the head and row strides */
    int rpos[RQ_GA_BM];                  /* positions of the rows */
    int cpos[RQ_GA_BN];                  /* positions of a tile's keys (arrays only) */
    int rlim[2];                         /* min and max of the rows' positions */
    int vnf;                             /* the V staging zeroed a non-finite value */
} rq_ga_local;
RQ_STATIC_ASSERT(sizeof(rq_ga_local) == RQ_GA_LOCAL_BYTES(RQ_GA_BM, RQ_GA_BN, RQ_GA_TK, RQ_GA_DV), ga_local_size);

/* 4 elements of a V row from element col, as f32: one vector load where the work-group's whole
 * column group lies inside the row (full, uniform), else 4 loads of elements col..col+3 clamped to
 * the last one, `last` (the columns past Dv get copies of it: their O is never stored). No per-lane
 * condition: compares of loop-invariant per-lane values are hoisted out of the key loop, and gfx90a
 * keeps each as a 64-bit lane mask in scalar registers (18 of them spilled). The clamped offsets are
 * uint (0 <= col <= last < Dv): they too are hoisted out of the key loop, 4 per column group, and as
 * long they held 2 VGPRs each on gfx90a through the loop (default shape 134 VGPRs, 126 as uint). */
#define RQ_GA_DEFINE_LD4(NAME, T, VLOAD4, LOAD1)                                                   \
    static inline float4 NAME(__global const uchar *row, int col, int last, bool full)             \
    {                                                                                              \
        if (full)                                                                                  \
            return VLOAD4(0, (__global const T *)(row + (long)col * (long)sizeof(T)));             \
        return (float4)(LOAD1(row, (uint)min(col, last) * (uint)sizeof(T)),                         \
                        LOAD1(row, (uint)min(col + 1, last) * (uint)sizeof(T)),                     \
                        LOAD1(row, (uint)min(col + 2, last) * (uint)sizeof(T)),                     \
                        LOAD1(row, (uint)min(col + 3, last) * (uint)sizeof(T)));                    \
    }
#define RQ_GA_VLOAD4_BF16(o, p) as_float4(convert_uint4(vload4((o), (p))) << 16)
RQ_GA_DEFINE_LD4(rq_ga_ld4_f32, float, vload4, rq_load_f32)
RQ_GA_DEFINE_LD4(rq_ga_ld4_f16, half, vload_half4, rq_load_f16)
RQ_GA_DEFINE_LD4(rq_ga_ld4_bf16, ushort, RQ_GA_VLOAD4_BF16, rq_load_bf16)

/* The fma of dim e (0..3) of a group of 4 into the S block: q[i].comp is that dim of row i, K's
 * row 4*c4 + e of the step holds it for the keys 4tx..4tx+3. */
#define RQ_GA_SDIM(e, comp)                                                                        \
    {                                                                                              \
        float4 k = st_tx[RQ_GA_BM * RQ_GA_Q4 + (4 * c4 + (e)) * RQ_GA_K4];                         \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            s[i] = fma((float4)(q[i].comp), k, s[i]);                                              \
    }

/* The fma of key u + e (e = 0..3) of a V step into the O block: p[i].comp is its weight in row i.
 * CHK: check each column group against Dv (the last column block of a Dv that DV does not divide). */
#define RQ_GA_VKEY(e, comp, CHK)                                                                   \
    {                                                                                              \
        _Pragma("unroll") for (int c = 0; c < RQ_GA_CV; c++) {                                     \
            if (!(CHK) || c0 + 4 * c * RQ_GA_TX < Dv) { /* uniform: a group past Dv does nothing */ \
                float4 x = st_tx[(u + (e)) * RQ_GA_V4 + c * RQ_GA_TX];                             \
                _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                               \
                    o[i][c] = fma((float4)(p[i].comp), x, o[i][c]);                                \
            }                                                                                      \
        }                                                                                          \
    }

/* A V step's fma: RQ_GA_TK keys, 4 at a time (their weights one float4 of the P tile per row). The
 * uniform test of the column groups against Dv is made once per step (RQ_GA_VKEY's CHK): inside
 * the key loop it compiled to a branch per group and key (34 of the loop's 346 SASS instructions,
 * sm_90). */
/* RB 4: rolled. Fully unrolled, gfx90a's scheduler hoists the P loads of every later 4 keys (RB*TK
 * floats) and the shape took 146 VGPRs (sm_90 128); rolled 128 VGPRs (sm_90 126, ptxas unrolls it
 * back: the same 1209 FFMA). RB 2 stays unrolled: rolled, TK 32 took sm_90 132-134 registers (unroll
 * 2 or 4 too), unrolled 122 (gfx90a 126). clang-15 + ROCm device libs 5.2, ptxas 13. */
#if RQ_GA_RB >= 4
#define RQ_GA_PV_UNROLL _Pragma("unroll 1")
#else
#define RQ_GA_PV_UNROLL _Pragma("unroll")
#endif
#define RQ_GA_PV_STEP(CHK)                                                                         \
    RQ_GA_PV_UNROLL for (int u = 0; u < RQ_GA_TK; u += 4) {                                        \
        float4 p[RQ_GA_RB];                                                                        \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            p[i] = p_me[i * RQ_GA_TY * (RQ_GA_PS / 4) + (u0 + u) / 4];                             \
        RQ_GA_VKEY(0, x, CHK)                                                                      \
        RQ_GA_VKEY(1, y, CHK)                                                                      \
        RQ_GA_VKEY(2, z, CHK)                                                                      \
        RQ_GA_VKEY(3, w, CHK)                                                                      \
    }

/* The end of a work-group whose V staging zeroed a non-finite value (L.vnf; rare): that zero is
 * right for the rows that mask the key (0 * NaN would be NaN) and leaves the value out of the rows
 * that see it. Here, after O is stored, each row's seen non-finite V values (its masks by position)
 * are summed per dim and stored over those dims of O: non-finite, as docs/conventions.md section 9
 * says (NaN for a NaN; an infinity or NaN for an infinity); the other dims keep their value. After
 * the stores and rolled: inside the key loop, or as a select copy of the unrolled P.V step, it took
 * the kernel past its 128 registers (sm_90 132-156, gfx90a 134-152) or doubled pocl's cold compile. */
#define RQ_GA_NF_STORE(comp, k)                                                                    \
    if (isnan(acc.comp) || isinf(acc.comp))                                                        \
        rq_as_store4(out, ob + (long)(col + (k)) * es, a.o_dtype, (float4)(acc.comp), 1);
#define RQ_GA_NF_FIX(LD4)                                                                          \
    _Pragma("unroll 1") for (int i = 0; i < RQ_GA_RB; i++) {                                       \
        const int m = m0 + ty + i * RQ_GA_TY, pi = L.rpos[ty + i * RQ_GA_TY];                      \
        if (m >= M)                                                                                \
            break;                                                                                 \
        const int g = m / Sq, h = hk * G + g;                                                      \
        const long ob = L.ostr[0] + (long)h * L.ostr[1] + (long)(m - g * Sq) * L.ostr[2];          \
        _Pragma("unroll 1") for (int c = 0; c < RQ_GA_CV; c++) {                                   \
            const int col = c0 + 4 * (tx + c * RQ_GA_TX);                                          \
            if (col >= Dv)                                                                         \
                break;                                                                             \
            float4 acc = (float4)(0.0f);                                                           \
            _Pragma("unroll 1") for (int j = 0; j < Sk; j++) {                                     \
                const int pj = use_kpos ? kpos[a.kpos_off + j] : k_base + j;                       \
                if ((causal && pj > pi) || (window > 0 && (long)pi - pj >= window))                \
                    continue;                                                                      \
                const float4 x = LD4(vb + (long)j * a.vnb2, col, Dv - 1, col + 4 <= Dv);          \
                acc = select(acc, acc + x, isnan(x) | isinf(x));                                   \
            }                                                                                      \
            RQ_GA_NF_STORE(x, 0)                                                                   \
            if (col + 1 < Dv)                                                                      \
                RQ_GA_NF_STORE(y, 1)                                                               \
            if (col + 2 < Dv)                                                                      \
                RQ_GA_NF_STORE(z, 2)                                                               \
            if (col + 3 < Dv)                                                                      \
                RQ_GA_NF_STORE(w, 3)                                                               \
        }                                                                                          \
    }

/* Local memory is addressed through a few per-work-item pointers (row ty, key or column group tx),
 * the rows ty + i*TY at constant offsets from them. */
#define RQ_GA_KERNEL(NAME, LD4)                                                                    \
__kernel __attribute__((reqd_work_group_size(RQ_GA_NT, 1, 1)))                                     \
void NAME(__global const float *qr, __global const float *kt, __global const uchar *v,               \
          __global const int *qpos, __global const int *kpos, __global uchar *out,                 \
          __global uchar *lse, __global const float *sinks, rq_attn_args a)                        \
{                                                                                                  \
    __local rq_ga_local L;                                                                         \
    const int M = a.M, Sq = a.Sq, Sk = a.Sk, ldk = a.ldk, D = a.D, Dv = a.Dv, G = a.G;             \
    const int use_kpos = a.use_kpos, k_base = a.k_base, causal = a.causal;                         \
    const long window = a.window;                                                                  \
    const int lid = get_local_id(0), tx = lid % RQ_GA_TX, ty = lid / RQ_GA_TX;                    \
    const int m0 = get_group_id(0) * RQ_GA_BM;                                                     \
    const int ncb = (Dv + RQ_GA_DV - 1) / RQ_GA_DV, gb = get_group_id(1);                          \
    const int bk = gb / ncb, cb = gb - bk * ncb, c0 = cb * RQ_GA_DV; /* KV head, column block */   \
    const int b = bk / a.Hkv, hk = bk % a.Hkv;                                                     \
    const int nrow = min(RQ_GA_BM, M - m0); /* rows of the tile below M (>= 1) */                  \
    const bool masked = causal || window > 0; /* uniform: the work-group takes one branch */       \
    const int4 iota = (int4)(0, 1, 2, 3);                                                          \
    __local float4 *st_tx = L.stage + tx;           /* K step tile (at BM*Q4) and V step tile, by tx */ \
    __local const float4 *q_me = L.stage + ty * RQ_GA_Q4; /* Q step tile, row ty */               \
    __local float4 *p_me = L.ps4 + ty * (RQ_GA_PS / 4);   /* P tile, row ty */                     \
    __local float *red_me = L.red + ty * RQ_GA_TX;         /* max partials, row ty */              \
    __local float *sum_me = L.lsum + ty * RQ_GA_TX;        /* sum partials, row ty */              \
    __local float *m_me = L.mstat + ty;                    /* running max, row ty */               \
                                                                                                   \
    for (int t = lid; t < RQ_GA_BM; t += RQ_GA_NT) {                                               \
        int mm = min(m0 + t, M - 1), i = mm % Sq; /* rows past M repeat the last: not stored */    \
        L.rpos[t] = a.use_qpos ? qpos[a.qpos_off + i] : a.q_base + i;                              \
        /* a sink (gpt-oss): a key of logit sinks[h] and value 0, so the running max starts at it and \
         * the row's sum at e^0 = 1 (tx 0's partial): a fully masked row ends with O = 0, LSE = s_h */ \
        L.mstat[t] = a.use_sinks ? sinks[hk * G + mm / Sq] : -INFINITY;                            \
    }                                                                                              \
    _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                           \
        sum_me[i * RQ_GA_TY * RQ_GA_TX + tx] = a.use_sinks && tx == 0 ? 1.0f : 0.0f;               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    if (lid == 0) { /* in local memory, not in two registers for the whole kernel */               \
        int lo = INT_MAX, hi = INT_MIN;                                                            \
        for (int t = 0; t < nrow; t++) {                                                           \
            lo = min(lo, L.rpos[t]);                                                               \
            hi = max(hi, L.rpos[t]);                                                               \
        }                                                                                          \
        L.rlim[0] = lo;                                                                            \
        L.rlim[1] = hi;                                                                            \
        L.vnf = 0;                                                                                 \
        /* the output's offsets and strides, for the end: on gfx90a the argument struct is read     \
         * into scalar registers on entry, and these kept 16 of them through the key loop (spilled) */ \
        L.ostr[0] = a.o_off + (long)b * a.onb0;                                                    \
        L.ostr[1] = a.onb1;                                                                        \
        L.ostr[2] = a.onb2;                                                                        \
        L.ostr[3] = a.l_off + (long)b * a.lnb0;                                                    \
        L.ostr[4] = a.lnb1;                                                                        \
        L.ostr[5] = a.lnb2;                                                                        \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
                                                                                                   \
    /* the row state is in local memory (mstat, lsum): registers hold O and S only */              \
    float4 o[RQ_GA_RB][RQ_GA_CV];                                                                  \
    int par = 0; /* the half of mstat that holds the running max (uniform) */                      \
    int vnf = 0; /* this work-item staged a non-finite V value (zeroed: RQ_GA_NF_FIX) */           \
    _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                         \
        _Pragma("unroll") for (int c = 0; c < RQ_GA_CV; c++)                                       \
            o[i][c] = (float4)(0.0f);                                                              \
    }                                                                                              \
    __global const float *qb = qr + (long)bk * M * D; /* the G*Sq rows of this KV head */          \
    __global const float *kb = kt + (long)bk * D * ldk + 4 * tx; /* keys 4tx.. of a tile */         \
    __global const uchar *vb = v + a.v_off + (long)b * a.vnb0 + (long)hk * a.vnb1;                 \
    const int qr0 = lid / RQ_GA_Q4, qw = lid % RQ_GA_Q4; /* Q staging: row and float4 of a step */ \
    /* the rows this work-item stages (rows past M repeat the last), and its K row at dim ty */   \
    __global const float *qrow[RQ_GA_QREP];                                                        \
    _Pragma("unroll") for (int k = 0; k < RQ_GA_QREP; k++)                                         \
        qrow[k] = qb + (long)(m0 + min(qr0 + k * (RQ_GA_NT / RQ_GA_Q4), nrow - 1)) * D + 4 * qw;    \
    __global const float *krow = kb + (long)ty * ldk;                                              \
                                                                                                   \
    for (int j0 = 0; j0 < Sk; j0 += RQ_GA_BN) {                                                    \
        const int nk = min(RQ_GA_BN, Sk - j0);                                                     \
        /* positions of the tile's keys: a whole tile masked for every row is skipped */           \
        if (masked) {                                                                              \
            int pj_min, pj_max;                                                                    \
            if (use_kpos) {                                                                        \
                barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's reads of cpos are done */     \
                for (int t = lid; t < RQ_GA_BN; t += RQ_GA_NT)                                     \
                    L.cpos[t] = kpos[a.kpos_off + j0 + min(t, nk - 1)];                            \
                barrier(CLK_LOCAL_MEM_FENCE);                                                      \
                pj_min = INT_MAX;                                                                  \
                pj_max = INT_MIN;                                                                  \
                for (int t = 0; t < nk; t++) {                                                     \
                    pj_min = min(pj_min, L.cpos[t]);                                               \
                    pj_max = max(pj_max, L.cpos[t]);                                               \
                }                                                                                  \
            } else {                                                                               \
                pj_min = k_base + j0;                                                              \
                pj_max = k_base + j0 + nk - 1;                                                     \
            }                                                                                      \
            if ((causal && pj_min > L.rlim[1]) || (window > 0 && (long)L.rlim[0] - pj_max >= window)) \
                continue;                                                                          \
        }                                                                                          \
                                                                                                   \
        /* S block: rows ty + i*TY, keys j0 + 4tx + 0..3 */                                        \
        float4 s[RQ_GA_RB];                                                                        \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            s[i] = (float4)(0.0f);                                                                 \
        for (int d0 = 0; d0 < D; d0 += RQ_GA_TK) {                                                 \
            if (d0 + RQ_GA_TK <= D && j0 + RQ_GA_BN <= Sk) { /* uniform: a whole step, no checks */ \
                _Pragma("unroll") for (int k = 0; k < RQ_GA_QREP; k++)                             \
                    if (qr0 + k * (RQ_GA_NT / RQ_GA_Q4) < RQ_GA_BM)                                \
                        L.stage[(qr0 + k * (RQ_GA_NT / RQ_GA_Q4)) * RQ_GA_Q4 + qw] = vload4(0, qrow[k] + d0); \
                _Pragma("unroll") for (int k = 0; k < RQ_GA_KREP; k++)                             \
                    if (ty + k * RQ_GA_TY < RQ_GA_TK)                                              \
                        st_tx[RQ_GA_BM * RQ_GA_Q4 + (ty + k * RQ_GA_TY) * RQ_GA_K4] =              \
                            *(__global const float4 *)(krow + (long)(d0 + k * RQ_GA_TY) * ldk + j0); \
            } else {                                                                               \
                /* rows past M, keys past Sk and dims past D load as 0: they add nothing */             \
                for (int r = qr0; r < RQ_GA_BM; r += RQ_GA_NT / RQ_GA_Q4) {                            \
                    int d = d0 + 4 * qw;                                                               \
                    float4 x = (float4)(0.0f);                                                         \
                    if (d < D) { /* rows past M repeat the last (their S is never stored) */           \
                        __global const float *p = qb + (long)(m0 + min(r, nrow - 1)) * D + d;          \
                        if (d + 4 <= D) /* rows are D floats apart: no alignment to rely on */        \
                            x = vload4(0, p);                                                          \
                        else                                                                           \
                            x = (float4)(p[0], d + 1 < D ? p[1] : 0.0f, d + 2 < D ? p[2] : 0.0f, 0.0f); \
                    }                                                                                  \
                    L.stage[r * RQ_GA_Q4 + qw] = x;                                                    \
                }                                                                                      \
                for (int c = ty; c < RQ_GA_TK; c += RQ_GA_TY) {                                        \
                    int j = j0 + 4 * tx, d = d0 + c;                                                   \
                    float4 x = (float4)(0.0f);                                                         \
                    if (d < D && j < Sk) {                                                             \
                        /* aligned (ldk and j multiples of 4) and inside the row (ldk >= Sk rounded   \
                         * up to 16); lanes past Sk are the scratch's padding: zeroed */               \
                        x = *(__global const float4 *)(kb + (long)d * ldk + j0);                       \
                        if (j + 4 > Sk)                                                                \
                            x = select(x, (float4)(0.0f), iota >= (int4)(Sk - j));                      \
                    }                                                                                  \
                    st_tx[RQ_GA_BM * RQ_GA_Q4 + c * RQ_GA_K4] = x;                                     \
                }                                                                                      \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
            _Pragma("unroll 1") for (int c4 = 0; c4 < RQ_GA_Q4; c4++) {                            \
                float4 q[RQ_GA_RB];                                                                \
                _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                               \
                    q[i] = q_me[i * RQ_GA_TY * RQ_GA_Q4 + c4];                                     \
                RQ_GA_SDIM(0, x)                                                                   \
                RQ_GA_SDIM(1, y)                                                                   \
                RQ_GA_SDIM(2, z)                                                                   \
                RQ_GA_SDIM(3, w)                                                                   \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE); /* the next step (or the V steps) overwrite the stage */ \
        }                                                                                          \
                                                                                                   \
        /* a non-finite score is NaN (-inf means masked only), before soft-capping (which would make \
         * an infinity +-C) */                                                                     \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            s[i] = select(s[i], (float4)(NAN), isinf(s[i]));                                       \
        if (a.softcap > 0.0f) { /* soft-capping (Gemma 2), before the masks */                     \
            const float cap = a.softcap, inv_cap = 1.0f / cap;                                     \
            _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                   \
                s[i] = RQ_SOFTCAP(s[i], cap, inv_cap);                                             \
        }                                                                                          \
        /* masks (exact -inf), then each row's max over the tile through local memory */          \
        const int jb = j0 + 4 * tx;                                                                \
        /* vectors splat only values that change per tile: a splat of a kernel-wide value is hoisted \
         * and held in 4 scalar registers on gfx90a */                                             \
        const int4 past = iota >= (int4)(Sk - jb);                                                 \
        int4 pj = (int4)(0);                                                                       \
        if (masked) /* lanes past Sk: the last key's position (masked by `past` anyway) */         \
            pj = use_kpos ? vload4(tx, L.cpos) : (int4)(k_base + jb) + min(iota, (int4)(Sk - 1 - jb)); \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                     \
            int4 msk = past;                                                                       \
            int pi = L.rpos[ty + i * RQ_GA_TY];                                                    \
            if (causal)                                                                            \
                msk = msk | (pj > (int4)(pi));                                                     \
            long lim = (long)pi - window; /* window: masked where pj <= pi - window */             \
            if (window > 0 && lim >= (long)INT_MIN)                                                \
                msk = msk | (pj <= (int4)((int)min(lim, (long)INT_MAX)));                          \
            s[i] = select(s[i], (float4)(-INFINITY), msk);                                         \
            red_me[i * RQ_GA_TY * RQ_GA_TX + tx] = fmax(fmax(s[i].x, s[i].y), fmax(s[i].z, s[i].w)); \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                     \
            float bm = -INFINITY;                                                                  \
            for (int t = 0; t < RQ_GA_TX / 4; t++) {                                               \
                float4 r4 = vload4(t, red_me + i * RQ_GA_TY * RQ_GA_TX);                           \
                bm = fmax(bm, fmax(fmax(r4.x, r4.y), fmax(r4.z, r4.w)));                           \
            }                                                                                      \
            float mo = m_me[par * RQ_GA_BM + i * RQ_GA_TY], mn = fmax(mo, bm);                     \
            /* nothing unmasked yet (mn = -inf): weights 0, accumulators untouched; but a NaN     \
             * score (fmax skips it) stays NaN in its weight */                                    \
            bool none = mn == -INFINITY;                                                           \
            float corr = none ? 1.0f : rq_ga_exp(mo - mn); /* 0 while mo is -inf */                \
            float4 e = none ? select((float4)(0.0f), s[i], isnan(s[i])) : rq_ga_exp4(s[i] - (float4)(mn)); \
            __local float *sp = sum_me + i * RQ_GA_TY * RQ_GA_TX + tx;                             \
            *sp = *sp * corr + ((e.x + e.y) + (e.z + e.w));                                        \
            if (tx == 0) /* every tx of the row computed the same mn */                            \
                m_me[(1 - par) * RQ_GA_BM + i * RQ_GA_TY] = none ? mo : mn;                        \
            p_me[i * RQ_GA_TY * (RQ_GA_PS / 4) + tx] = e;                                          \
            _Pragma("unroll") for (int c = 0; c < RQ_GA_CV; c++)                                   \
                o[i][c] *= corr;                                                                   \
        }                                                                                          \
        par = 1 - par;                                                                             \
                                                                                                   \
        /* O += P V over the tile's keys, RQ_GA_TK keys of the column block at a time */           \
        for (int u0 = 0; u0 < nk; u0 += RQ_GA_TK) {                                                \
            for (int u = ty; u < RQ_GA_TK; u += RQ_GA_TY) {                                        \
                int j = j0 + u0 + u;                                                               \
                __global const uchar *vrow = vb + (long)min(j, Sk - 1) * a.vnb2;                   \
                _Pragma("unroll") for (int c = 0; c < RQ_GA_CV; c++) {                             \
                    if (c0 + 4 * c * RQ_GA_TX >= Dv) /* uniform: a group wholly past Dv is unused */ \
                        continue;                                                                  \
                    float4 x = LD4(vrow, c0 + 4 * (tx + c * RQ_GA_TX), Dv - 1,                     \
                                   c0 + 4 * (c + 1) * RQ_GA_TX <= Dv);                             \
                    /* keys past Sk: zeros (their weights are 0, and 0 * V must stay 0); non-finite \
                     * values too (a masked key's V: 0 * NaN), noted for the end (RQ_GA_NF_FIX) */ \
                    const int4 nf = isnan(x) | isinf(x);                                           \
                    vnf |= any(nf);                                                                \
                    x = select(j < Sk ? x : (float4)(0.0f), (float4)(0.0f), nf);                   \
                    st_tx[u * RQ_GA_V4 + c * RQ_GA_TX] = x;                                        \
                }                                                                                  \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE); /* also publishes the P tile */                          \
            if (c0 + RQ_GA_DV <= Dv) { /* uniform: every column group inside Dv, no checks */       \
                RQ_GA_PV_STEP(0)                                                                   \
            } else {                                                                               \
                RQ_GA_PV_STEP(1)                                                                   \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE); /* the next step overwrites the stage */                 \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* the rows' sums: the partials of every tx of the row */                                      \
    atomic_or(&L.vnf, vnf);                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    const int es = a.o_dtype == 0 ? 4 : 2;                                                         \
    _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                         \
        int m = m0 + ty + i * RQ_GA_TY;                                                            \
        float l = 0.0f;                                                                            \
        for (int t = 0; t < RQ_GA_TX / 4; t++) {                                                   \
            float4 r4 = vload4(t, sum_me + i * RQ_GA_TY * RQ_GA_TX);                               \
            l += (r4.x + r4.y) + (r4.z + r4.w);                                                    \
        }                                                                                          \
        if (m >= M)                                                                                \
            continue;                                                                              \
        int g = m / Sq, ii = m - g * Sq, h = hk * G + g;                                           \
        /* fully masked: l = 0, O = 0, LSE = -inf; l NaN (a non-finite key seen): both NaN */     \
        float inv = l == 0.0f ? 0.0f : 1.0f / l;                                                   \
        long ob = L.ostr[0] + (long)h * L.ostr[1] + (long)ii * L.ostr[2];                          \
        _Pragma("unroll") for (int c = 0; c < RQ_GA_CV; c++) {                                     \
            int col = c0 + 4 * (tx + c * RQ_GA_TX);                                                \
            if (col < Dv)                                                                          \
                rq_as_store4(out, ob + (long)col * es, a.o_dtype, o[i][c] * inv, min(4, Dv - col)); \
        }                                                                                          \
        if (a.with_lse && cb == 0 && tx == 0)                                                      \
            *(__global float *)(lse + L.ostr[3] + (long)h * L.ostr[4] + (long)ii * L.ostr[5]) =    \
                l == 0.0f ? -INFINITY : m_me[par * RQ_GA_BM + i * RQ_GA_TY] + log(l);              \
    }                                                                                              \
    if (L.vnf) /* uniform (set before the barrier above); after O is stored: o is dead */          \
        RQ_GA_NF_FIX(LD4)                                                                          \
}

RQ_GA_KERNEL(qk_attention_gpu_f32, rq_ga_ld4_f32)
RQ_GA_KERNEL(qk_attention_gpu_f16, rq_ga_ld4_f16)
RQ_GA_KERNEL(qk_attention_gpu_bf16, rq_ga_ld4_bf16)
