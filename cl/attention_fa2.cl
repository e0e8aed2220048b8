/* Fused attention for GPUs, register-blocked FlashAttention-2 (issue 29): O = softmax(Qr . Kt) . V
 * with an online softmax, on the same rotated scratch, views, masks and variants as
 * qk_attention_gpu_* (attention_gpu.cl: its header has the contract), in the same shape space
 * (RQ_GA_BM rows, RQ_GA_BN keys per tile, RQ_GA_TK dims per step, RQ_GA_RB rows per work-item,
 * RQ_GA_DV dims of V per work-group). Kernels qk_attention_fa2_f32/f16/bf16 (the storage type of V).
 *
 * What differs from attention_gpu.cl, and why (sm_90, clang-15 + libclc + ptxas, nvdisasm; the
 * figures are in docs/prefill-gpu.md): that kernel took 165 registers at 4 rows per work-item, so
 * its default keeps 2 (8 floats of S and 16 of O a work-item, 57% FFMA in its key-tile loop). The
 * FFMA share needs the larger block: a work-item here holds RB x 4 scores and RB x 4CV dims of O
 * (default 4 x 4 and 4 x 8: per 4 head dims RB + 4 float4 local reads for 16 RB fma, per 4 keys of
 * V RB + 4 CV reads for 16 RB CV fma), and everything else is kept out of registers and out of the
 * loop:
 *   - the Q and K tiles of a step are double-buffered in local memory: the next step's global loads
 *     are issued (into RQ_FA_QREP + RQ_FA_KREP float4 registers) before the fma of this one and
 *     stored after them, one barrier a step; the V tile likewise (RQ_FA_VREP float4), and V's first
 *     step is loaded before the softmax, whose work covers its latency;
 *   - the row statistics are reduced once per tile by one work-item per row (the "owner": work-item
 *     r for row r): the others write their max over 4 keys, the owner reads the row's RQ_GA_BN / 4
 *     partials, keeps the running max m and publishes m and the correction exp(m_old - m); the sum
 *     l stays a per-work-item partial (RB registers) added up by the owners at the end;
 *   - the masks (exact -inf: keys past Sk, causal, sliding window) run only on tiles that some row
 *     sees in part (`mixed`, uniform: from the tile's key positions and the rows' limits), whole
 *     masked tiles are skipped, full tiles take no bounds checks;
 *   - Qr [bk][M][D] and Kt [bk][D][ldk] are read as float4 through row pointers set up once.
 * Local memory (RQ_FA_LOCAL_BYTES, contract.h): the two stage buffers (Q and K, or aliased V), the P
 * tile [row][key] (rows padded by 4 floats), the max partials [row][tx] (the sum partials at the
 * end), m and the correction per row (1 / l at the end), the output strides, the positions.
 *
 * Non-finite data (docs/conventions.md section 9): a masked key weighs exactly 0 whatever its K and
 * V hold: its score is selected to -inf, its weight stored as -0.0 (exp never gives -0) and, in a
 * mixed tile, P.V selects the products of -0.0 weights away (0 * NaN is NaN); keys past Sk are
 * staged with V = 0 (the scratch's K padding is zero). An unmasked score that is not finite becomes
 * NaN before soft-capping, so a row that sees such a key ends with l = NaN: O and LSE NaN. A fully
 * masked row ends with l = 0: O = 0 and LSE = -inf (sinks: the running max starts at s_h, tx 0's
 * sum at 1).
 *
 * Shapes (the host checks them, src/opencl/attn_fa2.c): RQ_GA_BN a multiple of 16, RQ_GA_TK of 4
 * dividing RQ_GA_BN, RQ_GA_RB dividing RQ_GA_BM, RQ_GA_DV a multiple of RQ_GA_BN; (BM / RB) * (BN / 4)
 * work-items. Portable OpenCL C 1.2: no subgroups, no fp16 arithmetic, no Clang builtins, no
 * variadic macros. */

#include "contract.h"
#include "load.cl"
#include "variants.cl" /* RQ_SOFTCAP */
#include "softmax_exp.cl"

RQ_DEFINE_SOFTMAX_EXP(rq_fa_exp, float, int, convert_int)
RQ_DEFINE_SOFTMAX_EXP(rq_fa_exp4, float4, int4, convert_int4)

#ifndef RQ_GA_BM
#define RQ_GA_BM 64
#endif
#ifndef RQ_GA_BN
#define RQ_GA_BN 64
#endif
#ifndef RQ_GA_TK
#define RQ_GA_TK 16
#endif
#ifndef RQ_GA_RB
#define RQ_GA_RB 4
#endif
#ifndef RQ_GA_DV
#define RQ_GA_DV 128
#endif
#if RQ_GA_BN % 16 != 0 || RQ_GA_TK % 4 != 0 || RQ_GA_BN % RQ_GA_TK != 0 || RQ_GA_BM % RQ_GA_RB != 0 || \
    RQ_GA_DV % RQ_GA_BN != 0 || RQ_GA_RB % 4 != 0 || (RQ_GA_BM / RQ_GA_RB) % (RQ_GA_DV / RQ_GA_BN) != 0
#error "RQ_GA_BN: a multiple of 16; RQ_GA_TK: of 4, dividing RQ_GA_BN; RQ_GA_RB: a multiple of 4 dividing RQ_GA_BM; RQ_GA_DV: of RQ_GA_BN, (BM / RB) a multiple of DV / BN"
#endif
#define RQ_FA_TX (RQ_GA_BN / 4)           /* work-items along keys (4 keys each), and along V's float4 */
#define RQ_FA_TY (RQ_GA_BM / RQ_GA_RB)    /* work-items along rows */
#define RQ_FA_NT (RQ_FA_TX * RQ_FA_TY)    /* work-group size */
#define RQ_FA_CV (RQ_GA_DV / RQ_GA_BN)    /* float4 column groups of O per work-item */
#define RQ_FA_PT4 ((RQ_GA_BM + 4) / 4)    /* row stride of the P tile [key][row], float4 */
#define RQ_FA_Q4 (RQ_GA_TK / 4)           /* float4 per Q row of a step */
#define RQ_FA_V4 (RQ_GA_DV / 4)           /* float4 per V row of the column block */
#define RQ_FA_QP (RQ_GA_BM + 4)          /* row stride of the transposed Q tile [dim][row], floats */
#define RQ_FA_QT4 (RQ_GA_TK * RQ_FA_QP / 4) /* float4 of the Q tile of a stage buffer */
#define RQ_FA_QK4 (RQ_FA_QT4 + RQ_GA_TK * RQ_FA_TX) /* float4 of one Q + K stage buffer */
#define RQ_FA_ST4 RQ_FA_STAGE4(RQ_GA_BM, RQ_GA_BN, RQ_GA_TK, RQ_GA_DV)
#define RQ_FA_QREP ((RQ_GA_BM * RQ_FA_Q4 + RQ_FA_NT - 1) / RQ_FA_NT) /* Q float4 a work-item stages */
#define RQ_FA_KREP ((RQ_GA_TK * RQ_FA_TX + RQ_FA_NT - 1) / RQ_FA_NT) /* K float4 likewise */
#define RQ_FA_VREP ((RQ_GA_TK * RQ_FA_V4 + RQ_FA_NT - 1) / RQ_FA_NT) /* V float4 likewise */

typedef struct {
    float4 stage[RQ_FA_ST4];              /* two Q + K stage buffers, or two V stage buffers */
    float4 pt4[RQ_GA_BN * RQ_FA_PT4];     /* P tile [key][row]: the scores, then their weights */
    long ostr[6];                         /* O and LSE: the batch's offset, head and row strides */
    int gid[3];                           /* the tile's first row, KV head and column block */
    float red[RQ_GA_BM * RQ_FA_TX];       /* per row and tx: the max over its 4 keys of the tile */
    float lsum[RQ_FA_TX * RQ_GA_BM];      /* per tx and row: the sum of exp over its keys so far */
    float mstat[RQ_GA_BM];                /* running row max (the owners') */
    float cstat[RQ_GA_BM];                /* the tile's correction exp(m_old - m); 1 / l at the end */
    int rlo[RQ_GA_BM], rhi[RQ_GA_BM];     /* per row: the key positions it sees, rlo..rhi */
    int cpos[2 * RQ_GA_BN];               /* positions of a tile's keys (arrays only), by tile parity */
    int rlim[4];                          /* min and max of rhi, min and max of rlo */
} rq_fa_local;
RQ_STATIC_ASSERT(sizeof(rq_fa_local) == RQ_FA_LOCAL_BYTES(RQ_GA_BM, RQ_GA_BN, RQ_GA_TK, RQ_GA_DV), fa_local_size);

/* 4 elements of a V row from element col as f32 (Dv is a multiple of 4: the host runs
 * qk_attention_gpu_* for other Dv; element loads with clamped offsets, as that kernel has, were 8
 * loop-invariant registers here). vload4: V's view need not be 16-byte aligned. */
#define RQ_FA_DEFINE_LD4(NAME, T, VLOAD4)                                                          \
    static inline float4 NAME(__global const uchar *row, int col)                                  \
    {                                                                                              \
        return VLOAD4(0, (__global const T *)(row + (long)col * (long)sizeof(T)));                 \
    }
#define RQ_FA_VLOAD4_BF16(o, p) as_float4(convert_uint4(vload4((o), (p))) << 16)
RQ_FA_DEFINE_LD4(rq_fa_ld4_f32, float, vload4)
RQ_FA_DEFINE_LD4(rq_fa_ld4_f16, half, vload_half4)
RQ_FA_DEFINE_LD4(rq_fa_ld4_bf16, ushort, RQ_FA_VLOAD4_BF16)

/* ---- the S steps: Q [BM][TK] and K [TK][BN] of dims d0.. into registers, then a stage buffer ---- */

/* Global loads of step d0 of key tile j0 into qv[], kv[]. Element e = lid + k*NT of the Q tile is
 * row e / Q4, float4 e % Q4; of the K tile dim e / TX, keys 4 (e % TX)... Rows past M repeat the
 * last (never stored), dims past D and keys past Sk load as 0 (the scratch's padding past Sk is zero
 * too). One path for full and edge steps: its tests are a few integer instructions a step, against
 * 16 RB TK fma; a second path for full steps kept two sets of hoisted addresses in registers. */
#define RQ_FA_Q_LOAD(d0)                                                                           \
    {                                                                                              \
        _Pragma("unroll") for (int k = 0; k < RQ_FA_QREP; k++) {                                   \
            /* D is a multiple of TK (the host runs qk_attention_gpu_* for others): every step is \
             * whole along the dims, and Qr's rows are float4-aligned */                           \
            if (RQ_GA_BM * RQ_FA_Q4 % RQ_FA_NT == 0 || lid + k * RQ_FA_NT < RQ_GA_BM * RQ_FA_Q4)   \
                qv[k] = *(__global const float4 *)(qp[k] + (d0));                                  \
        }                                                                                          \
    }
/* K of step d0 of key tile j0 into kv[]: EDGE (a tile reaching past Sk): keys past Sk are 0, read
 * from inside the row (ldk, a multiple of 16, is at least Sk) and selected away; else plain loads.
 * The caller branches on the tile (uniform), where the speed model sees the two parts. */
#define RQ_FA_K_LOAD(d0, EDGE)                                                                     \
    {                                                                                              \
        _Pragma("unroll") for (int k = 0; k < RQ_FA_KREP; k++) {                                   \
            if (RQ_GA_TK * RQ_FA_TX % RQ_FA_NT == 0 || lid + k * RQ_FA_NT < RQ_GA_TK * RQ_FA_TX) {  \
                const float4 x = *(__global const float4 *)(kp[k] + (long)(d0) * ldk +             \
                                                            ((EDGE) ? min(j0, ldk - 4 - kj[k]) : j0)); \
                kv[k] = !(EDGE) || j0 + kj[k] < Sk ? x : (float4)(0.0f);                           \
            }                                                                                      \
        }                                                                                          \
    }
#define RQ_FA_QK_STORE(buf)                                                                        \
    {                                                                                              \
        __local float4 *sb = L.stage + (buf) * RQ_FA_QK4;                                          \
        __local float *qt = (__local float *)sb; /* [dim][row], transposed as stored */             \
        _Pragma("unroll") for (int k = 0; k < RQ_FA_QREP; k++) {                                   \
            const int e = lid + k * RQ_FA_NT;                                                      \
            if (RQ_GA_BM * RQ_FA_Q4 % RQ_FA_NT == 0 || e < RQ_GA_BM * RQ_FA_Q4) {                  \
                /* one address, the 4 dims at constant offsets (as 4 addresses: 5 registers) */    \
                __local float *qw = qt + 4 * (e % RQ_FA_Q4) * RQ_FA_QP + e / RQ_FA_Q4;             \
                qw[0] = qv[k].x;                                                                   \
                qw[RQ_FA_QP] = qv[k].y;                                                            \
                qw[2 * RQ_FA_QP] = qv[k].z;                                                        \
                qw[3 * RQ_FA_QP] = qv[k].w;                                                        \
            }                                                                                      \
        }                                                                                          \
        _Pragma("unroll") for (int k = 0; k < RQ_FA_KREP; k++)                                     \
            if (RQ_GA_TK * RQ_FA_TX % RQ_FA_NT == 0 || lid + k * RQ_FA_NT < RQ_GA_TK * RQ_FA_TX)   \
                sb[RQ_FA_QT4 + lid + k * RQ_FA_NT] = kv[k];                                        \
    }
/* The fma of head dim d of a stage buffer (qs, ks) into the S block: rows RB*ty.., keys 4tx..4tx+3;
 * RB / 4 + 1 float4 local reads (the Q reads are broadcasts within a row of work-items) for 4 RB fma,
 * with RB / 4 + 1 float4 of operands in registers. (The loops around it are in the kernel, where
 * the speed model sees their lines: tests/gpucc/srcloops.py.) */
#define RQ_FA_S_DIM(d)                                                                             \
    {                                                                                              \
        const float4 k = ks[(d) * RQ_FA_TX];                                                       \
        _Pragma("unroll") for (int i4 = 0; i4 < RQ_GA_RB / 4; i4++) {                              \
            const float4 q = qs[(d) * (RQ_FA_QP / 4) + i4];                                        \
            s[4 * i4] = fma((float4)(q.x), k, s[4 * i4]);                                          \
            s[4 * i4 + 1] = fma((float4)(q.y), k, s[4 * i4 + 1]);                                  \
            s[4 * i4 + 2] = fma((float4)(q.z), k, s[4 * i4 + 2]);                                  \
            s[4 * i4 + 3] = fma((float4)(q.w), k, s[4 * i4 + 3]);                                  \
        }                                                                                          \
    }

/* ---- the P.V steps: TK keys of V's column block into registers, then a stage buffer ---- */

/* Element e = lid + k*NT of the V tile is key u0 + e / V4 (of the tile), float4 e % V4 of the block.
 * EDGE (a step reaching past Sk, or a column block past Dv): keys past Sk stage as 0 (their weights
 * are -0.0 or 0, and 0 * V must stay 0), read from the last row, column groups past Dv too (never
 * stored), read from the last float4 (vp's column); else plain loads. The caller branches. */
#define RQ_FA_V_LOAD(u0, LD4, EDGE)                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int k = 0; k < RQ_FA_VREP; k++) {                                   \
            if (RQ_GA_TK * RQ_FA_V4 % RQ_FA_NT == 0 || lid + k * RQ_FA_NT < RQ_GA_TK * RQ_FA_V4) {  \
                const int j = j0 + (u0) + k * (RQ_FA_NT / RQ_FA_V4);                               \
                const float4 x = LD4(vp + (long)((EDGE) ? min(j + vrow, Sk - 1) - vrow : j) * a.vnb2, 0); \
                vv[k] = !(EDGE) || (vin && j + vrow < Sk) ? x : (float4)(0.0f);                    \
            }                                                                                      \
        }                                                                                          \
    }
#define RQ_FA_V_STORE(buf)                                                                         \
    {                                                                                              \
        __local float4 *sb = L.stage + (buf) * (RQ_GA_TK * RQ_FA_V4);                              \
        _Pragma("unroll") for (int k = 0; k < RQ_FA_VREP; k++)                                     \
            if (RQ_GA_TK * RQ_FA_V4 % RQ_FA_NT == 0 || lid + k * RQ_FA_NT < RQ_GA_TK * RQ_FA_V4)   \
                sb[lid + k * RQ_FA_NT] = vv[k];                                                    \
    }
/* The fma of key u of a V stage buffer (vs; its weights pp) into the O block: RB / 4 + CV float4
 * local reads (the weights of 4 rows of one key, a broadcast within a row of work-items; V's column
 * groups) for RB CV 4 fma, with RB + 4 CV floats of operands. SEL (a mixed tile): a weight of -0.0
 * is a masked key, whose product is not added. */
#define RQ_FA_PV_KEY(u, SEL)                                                                       \
    {                                                                                              \
        float4 x[RQ_FA_CV];                                                                        \
        _Pragma("unroll") for (int c = 0; c < RQ_FA_CV; c++)                                       \
            x[c] = vs[(u) * RQ_FA_V4 + c * RQ_FA_TX];                                              \
        _Pragma("unroll") for (int q = 0; q < RQ_GA_RB / 4; q++) {                                 \
            const float4 p = pp[(u) * RQ_FA_PT4 + q];                                              \
            _Pragma("unroll") for (int c = 0; c < RQ_FA_CV; c++) {                                 \
                RQ_FA_VFMA(o[4 * q][c], p.x, x[c], SEL)                                            \
                RQ_FA_VFMA(o[4 * q + 1][c], p.y, x[c], SEL)                                        \
                RQ_FA_VFMA(o[4 * q + 2][c], p.z, x[c], SEL)                                        \
                RQ_FA_VFMA(o[4 * q + 3][c], p.w, x[c], SEL)                                        \
            }                                                                                      \
        }                                                                                          \
    }
#define RQ_FA_VFMA(acc, w, x, SEL) acc = (SEL) && as_uint(w) == 0x80000000u ? acc : fma((float4)(w), x, acc);

#define RQ_FA_KERNEL(NAME, LD4, ES)                                                                \
__kernel __attribute__((reqd_work_group_size(RQ_FA_NT, 1, 1)))                                     \
void NAME(__global const float *qr, __global const float *kt, __global const uchar *v,               \
          __global const int *qpos, __global const int *kpos, __global uchar *out,                 \
          __global uchar *lse, __global const float *sinks, rq_attn_args a)                        \
{                                                                                                  \
    __local rq_fa_local L;                                                                         \
    const int M = a.M, Sq = a.Sq, Sk = a.Sk, ldk = a.ldk, D = a.D, Dv = a.Dv, G = a.G;             \
    const int use_kpos = a.use_kpos, k_base = a.k_base, causal = a.causal;                         \
    const long window = a.window;                                                                  \
    const int lid = get_local_id(0), tx = lid % RQ_FA_TX, ty = lid / RQ_FA_TX;                    \
    const int m0 = get_group_id(0) * RQ_GA_BM;                                                     \
    const int ncb = (Dv + RQ_GA_DV - 1) / RQ_GA_DV, gb = get_group_id(1);                          \
    const int bk = gb / ncb, cb = gb - bk * ncb, c0 = cb * RQ_GA_DV; /* KV head, column block */   \
    const int b = bk / a.Hkv, hk = bk % a.Hkv;                                                     \
    const int nrow = min(RQ_GA_BM, M - m0); /* rows of the tile below M (>= 1) */                  \
    const bool masked = causal || window > 0; /* uniform */                                        \
                                                                                                   \
    for (int t = lid; t < RQ_GA_BM; t += RQ_FA_NT) {                                               \
        int mm = min(m0 + t, M - 1), i = mm % Sq; /* rows past M repeat the last: not stored */    \
        const int pi = a.use_qpos ? qpos[a.qpos_off + i] : a.q_base + i;                           \
        /* causal: keys up to pi; a window: keys above pi - window (pi - window + 1 <= pi) */      \
        L.rhi[t] = causal ? pi : INT_MAX;                                                          \
        L.rlo[t] = window > 0 ? (int)max((long)pi - window + 1, (long)INT_MIN) : INT_MIN;          \
        /* a sink (gpt-oss): a key of logit sinks[h] and value 0: the running max starts at it     \
         * and tx 0's sum at e^0 = 1 (below): a fully masked row ends with O = 0, LSE = s_h */     \
        L.mstat[t] = a.use_sinks ? sinks[hk * G + mm / Sq] : -INFINITY;                            \
    }                                                                                              \
    if (lid == 0) {                                                                                \
        L.gid[0] = m0; /* for the end, read back: not kept in registers through the key loop */    \
        L.gid[1] = hk;                                                                             \
        L.gid[2] = cb;                                                                             \
        L.ostr[0] = a.o_off + (long)b * a.onb0;                                                    \
        L.ostr[1] = a.onb1;                                                                        \
        L.ostr[2] = a.onb2;                                                                        \
        L.ostr[3] = a.l_off + (long)b * a.lnb0;                                                    \
        L.ostr[4] = a.lnb1;                                                                        \
        L.ostr[5] = a.lnb2;                                                                        \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    if (lid == 0) {                                                                                \
        int h0 = INT_MAX, h1 = INT_MIN, l0 = INT_MAX, l1 = INT_MIN;                                \
        for (int t = 0; t < nrow; t++) {                                                           \
            h0 = min(h0, L.rhi[t]);                                                                \
            h1 = max(h1, L.rhi[t]);                                                                \
            l0 = min(l0, L.rlo[t]);                                                                \
            l1 = max(l1, L.rlo[t]);                                                                \
        }                                                                                          \
        L.rlim[0] = h0;                                                                            \
        L.rlim[1] = h1;                                                                            \
        L.rlim[2] = l0;                                                                            \
        L.rlim[3] = l1;                                                                            \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
                                                                                                   \
    /* local memory through a few per-work-item pointers (its rows ty*RB + i at constant offsets): \
     * indexed from L each time, every row's address took a register of its own (sm_90) */        \
    __local const float4 *q_me = L.stage + ty * (RQ_GA_RB / 4); /* Q tile, its rows (S steps) */  \
    __local const float4 *k_me = L.stage + RQ_FA_QT4 + tx;      /* K tile, its keys */             \
    __local const float4 *v_me = L.stage + tx;                  /* V tile, its column group */     \
    __local const float4 *pr_me = L.pt4 + ty * (RQ_GA_RB / 4); /* P tile, its rows (P.V) */       \
    __local float4 *pw_me = L.pt4 + 4 * tx * RQ_FA_PT4 + ty * (RQ_GA_RB / 4); /* its block of P */ \
    __local float *red_me = L.red + ty * RQ_GA_RB * RQ_FA_TX + tx;                                 \
    __local float *ls_me = L.lsum + tx * RQ_GA_BM + ty * RQ_GA_RB;                                 \
    __local const float *mst_me = L.mstat + ty * RQ_GA_RB, *cst_me = L.cstat + ty * RQ_GA_RB;     \
    __local const int *rhi_me = L.rhi + ty * RQ_GA_RB, *rlo_me = L.rlo + ty * RQ_GA_RB;           \
    float4 o[RQ_GA_RB][RQ_FA_CV];                                                                  \
    _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                         \
        ls_me[i] = a.use_sinks && tx == 0 ? 1.0f : 0.0f;                                           \
        _Pragma("unroll") for (int c = 0; c < RQ_FA_CV; c++)                                       \
            o[i][c] = (float4)(0.0f);                                                              \
    }                                                                                              \
    __global const float *qb = qr + ((long)bk * M + m0) * D; /* the tile's rows */                 \
    __global const float *kb = kt + (long)bk * D * ldk;                                            \
    /* per-work-item pointers of the loads (computed once; a step adds its offset): its Q rows'     \
     * float4, its K dims' keys, its V float4 in row e / V4 of a step (vin: inside Dv; e % V4 is   \
     * the same for every k) */                                                                    \
    __global const float *qp[RQ_FA_QREP], *kp[RQ_FA_KREP];                                         \
    _Pragma("unroll") for (int k = 0; k < RQ_FA_QREP; k++) {                                       \
        const int e = lid + k * RQ_FA_NT;                                                          \
        qp[k] = qb + (long)min(e / RQ_FA_Q4, nrow - 1) * D + 4 * (e % RQ_FA_Q4);                   \
    }                                                                                              \
    float4 qv[RQ_FA_QREP], kv[RQ_FA_KREP], vv[RQ_FA_VREP];                                         \
    int kj[RQ_FA_KREP];                                                                            \
    _Pragma("unroll") for (int k = 0; k < RQ_FA_KREP; k++) {                                       \
        const int e = lid + k * RQ_FA_NT;                                                          \
        kj[k] = 4 * (e % RQ_FA_TX);                                                                \
        kp[k] = kb + (long)(e / RQ_FA_TX) * ldk + kj[k];                                           \
        kv[k] = (float4)(0.0f);                                                                    \
    }                                                                                              \
    const int vcol = c0 + 4 * (lid % RQ_FA_V4), vrow = lid / RQ_FA_V4;                             \
    const bool vin = vcol < Dv, vall = c0 + RQ_GA_DV <= Dv; /* vall: uniform */                   \
    __global const uchar *vp = v + a.v_off + (long)b * a.vnb0 + (long)hk * a.vnb1 + (long)vrow * a.vnb2 + \
                               (long)(vin ? vcol : Dv - 4) * ES;                                   \
    const int nst = (D + RQ_GA_TK - 1) / RQ_GA_TK; /* S steps */                                   \
                                                                                                   \
    /* the keys any row sees, by position (no key array): the tiles before and after them are not \
     * visited at all (causal prefill: half the tiles, each a barrier and its checks otherwise) */ \
    int jbeg = 0, jend = Sk;                                                                       \
    if (masked && !use_kpos) {                                                                     \
        if (causal) /* keys up to the largest row position */                                      \
            jend = (int)clamp((long)L.rlim[1] - k_base + 1, 0L, (long)Sk);                          \
        if (window > 0) /* keys from the smallest rlo, whole tiles */                              \
            jbeg = (int)clamp((long)L.rlim[2] - k_base, 0L, (long)jend) / RQ_GA_BN * RQ_GA_BN;      \
    }                                                                                              \
    for (int j0 = jbeg; j0 < jend; j0 += RQ_GA_BN) {                                               \
        const int nk = min(RQ_GA_BN, Sk - j0);                                                     \
        bool mixed = nk < RQ_GA_BN; /* some key of the tile masked for some row (uniform) */      \
        /* the keys' positions (arrays), in two halves by the tile's parity: a tile writes one while \
         * the previous tile's readers may still read the other; the barrier is every tile's (no    \
         * barrier under a condition: see the S steps) */                                          \
        __local int *cp = L.cpos + ((j0 / RQ_GA_BN) & 1) * RQ_GA_BN;                                \
        if (masked && use_kpos)                                                                    \
            for (int t = lid; t < RQ_GA_BN; t += RQ_FA_NT)                                         \
                cp[t] = kpos[a.kpos_off + j0 + min(t, nk - 1)];                                    \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        if (masked) {                                                                              \
            int pj_min = k_base + j0, pj_max = k_base + j0 + nk - 1;                               \
            if (use_kpos) {                                                                        \
                pj_min = INT_MAX;                                                                  \
                pj_max = INT_MIN;                                                                  \
                for (int t = 0; t < nk; t++) {                                                     \
                    pj_min = min(pj_min, cp[t]);                                                   \
                    pj_max = max(pj_max, cp[t]);                                                   \
                }                                                                                  \
            }                                                                                      \
            /* every row masks every key: skipped; some row masks some key: mixed */               \
            if (pj_min > L.rlim[1] || pj_max < L.rlim[2])                                          \
                continue;                                                                          \
            mixed = mixed || pj_max > L.rlim[0] || pj_min < L.rlim[3];                             \
        }                                                                                          \
                                                                                                   \
        /* S = Q K^T over the head dims, a step of TK at a time, double-buffered */                \
        float4 s[RQ_GA_RB];                                                                        \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            s[i] = (float4)(0.0f);                                                                 \
        const bool kfull = j0 + RQ_GA_BN <= Sk; /* uniform */                                      \
        RQ_FA_Q_LOAD(0);                                                                           \
        if (kfull) { /* K loads of step 0, a whole tile */                                         \
            RQ_FA_K_LOAD(0, 0);                                                                    \
        } else {                                                                                   \
            RQ_FA_K_LOAD(0, 1);                                                                    \
        }                                                                                          \
        RQ_FA_QK_STORE(0);                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (int st = 0; st < nst; st++) {                                                         \
            const int d1 = (st + 1) * RQ_GA_TK;                                                    \
            if (st + 1 < nst) { /* the next step's loads, in flight during this step's fma */      \
                RQ_FA_Q_LOAD(d1);                                                                  \
                if (kfull) { /* K loads of a whole tile */                                         \
                    RQ_FA_K_LOAD(d1, 0);                                                           \
                } else {                                                                           \
                    RQ_FA_K_LOAD(d1, 1);                                                           \
                }                                                                                  \
            }                                                                                      \
            {                                                                                      \
                __local const float4 *qs = q_me + (st & 1) * RQ_FA_QK4, *ks = k_me + (st & 1) * RQ_FA_QK4; \
                _Pragma("unroll 8") for (int d = 0; d < RQ_GA_TK; d++) {                           \
                    RQ_FA_S_DIM(d);                                                                \
                }                                                                                  \
            }                                                                                      \
            if (st + 1 < nst)                                                                      \
                RQ_FA_QK_STORE((st + 1) & 1);                                                      \
            /* every step (the last one's is spare: a barrier under a condition made pocl's       \
             * kernel compiler replicate the code after it, minutes of compile) */                 \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        }                                                                                          \
                                                                                                   \
        /* a non-finite score is NaN (-inf means masked only), before soft-capping */              \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            s[i] = select(s[i], (float4)(NAN), isinf(s[i]));                                       \
        if (a.softcap > 0.0f) { /* soft-capping (Gemma 2), before the masks */                     \
            const float cap = a.softcap, inv_cap = 1.0f / cap;                                     \
            _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                   \
                s[i] = RQ_SOFTCAP(s[i], cap, inv_cap);                                             \
        }                                                                                          \
        if (mixed) { /* masks: exact -inf */                                                       \
            const int4 iota = (int4)(0, 1, 2, 3);                                                  \
            const int jb = j0 + 4 * tx;                                                            \
            const int4 past = iota >= (int4)(Sk - jb);                                             \
            int4 pj = (int4)(0);                                                                   \
            if (masked) /* lanes past Sk: the last key's position (masked by `past` anyway) */     \
                pj = use_kpos ? vload4(tx, cp) : (int4)(k_base + jb) + min(iota, (int4)(Sk - 1 - jb)); \
            _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                 \
                const int4 msk = past | (pj > (int4)(rhi_me[i])) | (pj < (int4)(rlo_me[i]));       \
                s[i] = select(s[i], (float4)(-INFINITY), msk);                                     \
            }                                                                                      \
        }                                                                                          \
        /* the scores into the P tile, each row's max over 4 keys into red; then the owners        \
         * (work-item r for row r) make the row's statistics */                                    \
        _Pragma("unroll") for (int q = 0; q < RQ_GA_RB / 4; q++) {                                 \
            __local float4 *pw = pw_me + q;                                                        \
            pw[0] = (float4)(s[4 * q].x, s[4 * q + 1].x, s[4 * q + 2].x, s[4 * q + 3].x);          \
            pw[RQ_FA_PT4] = (float4)(s[4 * q].y, s[4 * q + 1].y, s[4 * q + 2].y, s[4 * q + 3].y);  \
            pw[2 * RQ_FA_PT4] = (float4)(s[4 * q].z, s[4 * q + 1].z, s[4 * q + 2].z, s[4 * q + 3].z); \
            pw[3 * RQ_FA_PT4] = (float4)(s[4 * q].w, s[4 * q + 1].w, s[4 * q + 2].w, s[4 * q + 3].w); \
        }                                                                                          \
        _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++)                                       \
            red_me[i * RQ_FA_TX] = fmax(fmax(s[i].x, s[i].y), fmax(s[i].z, s[i].w));              \
        if (j0 + RQ_GA_TK <= Sk && vall) { /* V's first step, in flight during the statistics */   \
            RQ_FA_V_LOAD(0, LD4, 0);                                                               \
        } else {                                                                                   \
            RQ_FA_V_LOAD(0, LD4, 1);                                                               \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (int r = lid; r < RQ_GA_BM; r += RQ_FA_NT) {                                           \
            float bm = -INFINITY;                                                                  \
            _Pragma("unroll") for (int t = 0; t < RQ_FA_TX / 4; t++) {                             \
                float4 r4 = vload4(t, L.red + r * RQ_FA_TX);                                       \
                bm = fmax(bm, fmax(fmax(r4.x, r4.y), fmax(r4.z, r4.w)));                           \
            }                                                                                      \
            float mo = L.mstat[r], mn = fmax(mo, bm);                                              \
            /* nothing unmasked yet (mn = -inf): the correction is 1, the weights 0 */             \
            L.cstat[r] = mn == -INFINITY ? 1.0f : rq_fa_exp(mo - mn); /* 0 while mo is -inf */     \
            L.mstat[r] = mn;                                                                       \
        }                                                                                          \
        RQ_FA_V_STORE(0); /* the stage is free: every S fma is done (the barrier above) */         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        /* O rescaled by the rows' corrections */                                                  \
        _Pragma("unroll") for (int i4 = 0; i4 < RQ_GA_RB / 4; i4++) {                              \
            const float4 c4 = vload4(i4, cst_me);                                                  \
            _Pragma("unroll") for (int c = 0; c < RQ_FA_CV; c++) {                                 \
                o[4 * i4][c] *= c4.x;                                                              \
                o[4 * i4 + 1][c] *= c4.y;                                                          \
                o[4 * i4 + 2][c] *= c4.z;                                                          \
                o[4 * i4 + 3][c] *= c4.w;                                                          \
            }                                                                                      \
        }                                                                                          \
        /* the weights e^(S - m) in place of the scores (4 rows of a key in a float4), and the      \
         * sums; a key at a time (not unrolled: the score block is dead, and the exp's temporaries   \
         * are one key's). A row with no key unmasked yet (m = -inf) takes m = 0: its scores are     \
         * -inf (weight 0) or NaN (which stays NaN), and -inf - -inf would be NaN. A mixed tile's    \
         * masked keys get -0.0, the marker RQ_FA_VFMA's SEL skips (a loop of their own: the        \
         * select costs 8 instructions a key) */                                                   \
        {                                                                                          \
            float4 mn[RQ_GA_RB / 4], ls[RQ_GA_RB / 4];                                             \
            _Pragma("unroll") for (int q = 0; q < RQ_GA_RB / 4; q++) {                             \
                mn[q] = vload4(q, mst_me);                                                         \
                mn[q] = select(mn[q], (float4)(0.0f), mn[q] == (float4)(-INFINITY));               \
                ls[q] = vload4(q, ls_me) * vload4(q, cst_me);                                      \
            }                                                                                      \
            if (mixed) { /* weights of a mixed tile */                                             \
                _Pragma("unroll 1") for (int t = 0; t < 4; t++) {                                  \
                    _Pragma("unroll") for (int q = 0; q < RQ_GA_RB / 4; q++) {                     \
                        const float4 sc = pw_me[t * RQ_FA_PT4 + q];                                \
                        const float4 e = select(rq_fa_exp4(sc - mn[q]), (float4)(-0.0f), sc == (float4)(-INFINITY)); \
                        pw_me[t * RQ_FA_PT4 + q] = e;                                              \
                        ls[q] += e;                                                                \
                    }                                                                              \
                }                                                                                  \
            } else {                                                                               \
                _Pragma("unroll 1") for (int t = 0; t < 4; t++) {                                  \
                    _Pragma("unroll") for (int q = 0; q < RQ_GA_RB / 4; q++) {                     \
                        const float4 e = rq_fa_exp4(pw_me[t * RQ_FA_PT4 + q] - mn[q]);             \
                        pw_me[t * RQ_FA_PT4 + q] = e;                                              \
                        ls[q] += e;                                                                \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            _Pragma("unroll") for (int q = 0; q < RQ_GA_RB / 4; q++)                               \
                vstore4(ls[q], q, ls_me);                                                          \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE); /* publishes the P tile */                                   \
                                                                                                   \
        /* O += P V, TK keys a step, double-buffered (keys past nk are zeros with weight 0) */     \
        const int nv = (nk + RQ_GA_TK - 1) / RQ_GA_TK;                                             \
        for (int vt = 0; vt < nv; vt++) {                                                          \
            if (vt + 1 < nv) {                                                                     \
                if (j0 + (vt + 2) * RQ_GA_TK <= Sk && vall) { /* V loads of a whole step */        \
                    RQ_FA_V_LOAD((vt + 1) * RQ_GA_TK, LD4, 0);                                     \
                } else {                                                                           \
                    RQ_FA_V_LOAD((vt + 1) * RQ_GA_TK, LD4, 1);                                     \
                }                                                                                  \
            }                                                                                      \
            __local const float4 *vs = v_me + (vt & 1) * (RQ_GA_TK * RQ_FA_V4);                    \
            __local const float4 *pp = pr_me + vt * RQ_GA_TK * RQ_FA_PT4;                          \
            if (mixed) { /* P.V selecting masked keys away */                                      \
                _Pragma("unroll 8") for (int u = 0; u < RQ_GA_TK; u++) {                           \
                    RQ_FA_PV_KEY(u, 1);                                                            \
                }                                                                                  \
            } else {                                                                               \
                _Pragma("unroll 8") for (int u = 0; u < RQ_GA_TK; u++) {                           \
                    RQ_FA_PV_KEY(u, 0);                                                            \
                }                                                                                  \
            }                                                                                      \
            if (vt + 1 < nv)                                                                       \
                RQ_FA_V_STORE((vt + 1) & 1);                                                       \
            barrier(CLK_LOCAL_MEM_FENCE); /* the last: the next tile's S steps reuse the stage */  \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* the rows' sums: every work-item's partials, added by the owners. A barrier of its own: a    \
     * block whose rows see no key runs no key tile, and without it the owners read partials the    \
     * others had not yet set (stale local memory: NaN or a wrong LSE on fully masked rows, found   \
     * by the GPU-profile suite on pocl) */                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    for (int r = lid; r < RQ_GA_BM; r += RQ_FA_NT) {                                               \
        float sum = 0.0f;                                                                          \
        for (int t = 0; t < RQ_FA_TX; t++)                                                         \
            sum += L.lsum[t * RQ_GA_BM + r];                                                       \
        /* fully masked: l = 0, O = 0, LSE = -inf; l NaN (a non-finite key seen): both NaN */     \
        L.cstat[r] = sum == 0.0f ? 0.0f : 1.0f / sum;                                              \
        const int m = L.gid[0] + r;                                                                \
        if (a.with_lse && L.gid[2] == 0 && m < M) {                                                \
            const int g = m / Sq, ii = m - g * Sq, h = L.gid[1] * G + g;                           \
            *(__global float *)(lse + L.ostr[3] + (long)h * L.ostr[4] + (long)ii * L.ostr[5]) =    \
                sum == 0.0f ? -INFINITY : L.mstat[r] + log(sum);                                   \
        }                                                                                          \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    const int es = a.o_dtype == 0 ? 4 : 2;                                                         \
    _Pragma("unroll") for (int i = 0; i < RQ_GA_RB; i++) {                                         \
        const int r = ty * RQ_GA_RB + i, m = L.gid[0] + r;                                         \
        if (m >= M)                                                                                \
            continue;                                                                              \
        const int g = m / Sq, ii = m - g * Sq, h = L.gid[1] * G + g;                               \
        const float inv = cst_me[i];                                                               \
        const long ob = L.ostr[0] + (long)h * L.ostr[1] + (long)ii * L.ostr[2];                    \
        _Pragma("unroll") for (int c = 0; c < RQ_FA_CV; c++) {                                     \
            const int col = L.gid[2] * RQ_GA_DV + 4 * (tx + c * RQ_FA_TX);                         \
            if (col < Dv)                                                                          \
                rq_as_store4(out, ob + (long)col * es, a.o_dtype, o[i][c] * inv, min(4, Dv - col)); \
        }                                                                                          \
    }                                                                                              \
}

RQ_FA_KERNEL(qk_attention_fa2_f32, rq_fa_ld4_f32, 4)
RQ_FA_KERNEL(qk_attention_fa2_f16, rq_fa_ld4_f16, 2)
RQ_FA_KERNEL(qk_attention_fa2_bf16, rq_fa_ld4_bf16, 2)
