/* Fused attention pass: O = softmax(Qr . Kt) . V with an online (flash-style) softmax, from the
 * rotated scratch written by rope.cl (Qr pre-scaled, Kt transposed, as for qk_scores). The scores
 * never leave registers: per block of RQ_AVK keys a work-item computes its RQ_ATQ rows' scores, masks
 * them, rescales its running max m, sum l and output accumulators o[Dv], and adds p . V[j].
 *   - rows are the G query heads sharing a KV head times Sq (as in qk_scores), so GQA reads K and
 *     V once per group of rows;
 *   - V is read from the caller's buffer in its storage type, one row per key, reused by the RQ_ATQ
 *     rows of the work-item;
 *   - a key block whose every score is masked for the tile is skipped (causal prefill: half);
 *   - a fully masked row ends with l = 0: O = 0 and LSE = -inf (no 0/0);
 *   - non-finite data (docs/conventions.md section 9): a masked key weighs exactly 0 whatever its K
 *     and V hold: its score is selected to -inf (never computed into), and in a block where some
 *     row masks some key (causal diagonal, window edge: the flag `mixed`, uniform per work-item) P.V
 *     selects the masked (row, key) products away, since 0 * NaN is NaN; blocks without one keep the
 *     plain fma loop. An unmasked score that is not finite becomes NaN (before soft-capping), so a
 *     row that sees such a key ends with l = NaN: O and LSE NaN, never the fully masked -inf;
 *   - everything accumulates in f32; exp() and log() are the accurate built-ins;
 *   - a work-item keeps RQ_ACB dims of V (RQ_ADVMAX 512 on the CPU profile: MLA's Dv in one block;
 *     RQ_ADVMAX_GPU 256 in GPU programs, where this is the fallback); larger Dv runs column blocks
 *     (get_global_id(1) = KV head x block), each computing the scores again, LSE from block 0.
 * The model-family variants (docs/conventions.md section 11): soft-capping on a key block's scores
 * before its masks (variants.cl); sinks: a row's running max starts at s_h with a sum of 1 (a key of
 * logit s_h and value 0), so a fully masked row ends with O = 0 and LSE = s_h; the rotary offset and
 * M-RoPE are the RoPE pass's (the masks then follow token order: the host passes the offsets).
 * Tuning (-D from the host's profile, src/tuning.c): RQ_ATQ rows per work-item, RQ_AVK keys per
 * block (a floatRQ_AVK vector along keys: explicit SIMD for CPU drivers, 1 on GPUs), RQ_AWG
 * work-items per group. */

#include "contract.h"
#include "load.cl"
#include "variants.cl" /* RQ_SOFTCAP */

#ifndef RQ_ATQ
#define RQ_ATQ 8
#endif
#ifndef RQ_AVK
#define RQ_AVK 16
#endif
#ifndef RQ_AWG
#define RQ_AWG 1
#endif
/* V dims per work-item (a column block; contract.h): 512 on the CPU profile, 256 in GPU programs */
#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS
#define RQ_ACB RQ_ADVMAX
#else
#define RQ_ACB RQ_ADVMAX_GPU
#endif

#define RQ_ACAT_(a, b) a##b
#define RQ_ACAT(a, b) RQ_ACAT_(a, b)
#if RQ_AVK == 1
#define RQ_AVT float
#define RQ_AIT int
#define RQ_AVLOAD(p) (*(p))
#define RQ_AVSTORE(v, p) ((p)[0] = (v))
#define RQ_AIOTA 0
#define RQ_AANY(m) ((m) != 0) /* scalar compares give 1, not -1 */
#define RQ_AISTORE(v, p) ((p)[0] = (v))
#elif RQ_AVK == 4 || RQ_AVK == 8 || RQ_AVK == 16
#define RQ_AVT RQ_ACAT(float, RQ_AVK)
#define RQ_AIT RQ_ACAT(int, RQ_AVK)
#define RQ_AVLOAD(p) RQ_ACAT(vload, RQ_AVK)(0, (p))
#define RQ_AVSTORE(v, p) RQ_ACAT(vstore, RQ_AVK)((v), 0, (p))
#if RQ_AVK == 4
#define RQ_AIOTA ((int4)(0, 1, 2, 3))
#elif RQ_AVK == 8
#define RQ_AIOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define RQ_AIOTA ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif
#define RQ_AANY(m) any(m)
#define RQ_AISTORE(v, p) RQ_ACAT(vstore, RQ_AVK)((v), 0, (p))
#else
#error "RQ_AVK must be 1, 4, 8 or 16"
#endif

/* Soft-capping in place: vectors take the exp path only where a lane needs it (variants.cl) */
#if RQ_AVK == 1
#define RQ_ACAP(x, c, ic) ((x) = RQ_SOFTCAP((x), (c), (ic)))
#else
#define RQ_ACAP(x, c, ic) RQ_SOFTCAP_VEC(RQ_AVT, x, c, ic)
#endif

/* Largest lane and sum of lanes of a vector of scores, as trees of halves (.lo/.hi), not a scalar
 * loop over a stored copy: the reductions run once per row and key block. */
#if RQ_AVK == 1
#define rq_amax(v) (v)
#define rq_asum(v) (v)
#else
static inline float rq_amax(RQ_AVT v)
{
#if RQ_AVK == 16
    float8 v8 = fmax(v.lo, v.hi);
#elif RQ_AVK == 8
    float8 v8 = v;
#endif
#if RQ_AVK >= 8
    float4 v4 = fmax(v8.lo, v8.hi);
#else
    float4 v4 = v;
#endif
    float2 v2 = fmax(v4.lo, v4.hi);
    return fmax(v2.x, v2.y);
}

static inline float rq_asum(RQ_AVT v)
{
#if RQ_AVK == 16
    float8 v8 = v.lo + v.hi;
#elif RQ_AVK == 8
    float8 v8 = v;
#endif
#if RQ_AVK >= 8
    float4 v4 = v8.lo + v8.hi;
#else
    float4 v4 = v;
#endif
    float2 v2 = v4.lo + v4.hi;
    return v2.x + v2.y;
}
#endif

/* Stores one output element in the output's storage type (0 f32, 1 f16, 2 bf16). */
static inline void rq_store_out(__global uchar *out, long off, int dtype, float x)
{
    if (dtype == 0) {
        *(__global float *)(out + off) = x;
    } else if (dtype == 1) {
        vstore_half_rte(x, 0, (__global half *)(out + off)); /* round to nearest even */
    } else {
        uint u = as_uint(x); /* bf16: round to nearest even; NaN stays NaN */
        ushort h = isnan(x) ? (ushort)((u >> 16) | 0x40u) : (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        *(__global ushort *)(out + off) = h;
    }
}

#define RQ_ATTN_KERNEL(NAME, LD16, ES)                                                             \
__kernel __attribute__((reqd_work_group_size(RQ_AWG, 1, 1)))                                       \
void NAME(__global const float *qr, __global const float *kt, __global const uchar *v,               \
          __global const int *qpos, __global const int *kpos, __global uchar *out,                 \
          __global uchar *lse, __global const float *sinks, rq_attn_args a)                        \
{                                                                                                  \
    const int M = a.M, Sq = a.Sq, Sk = a.Sk, ldk = a.ldk, D = a.D, Dv = a.Dv, G = a.G;             \
    const int m0 = get_global_id(0) * RQ_ATQ;                                                      \
    /* the KV head and the column block of V: dims [cv0, cv0 + dvn) */                             \
    const int ncb = (Dv + RQ_ACB - 1) / RQ_ACB, gb = get_global_id(1), bk = gb / ncb, cb = gb - bk * ncb; \
    const int cv0 = cb * RQ_ACB, dvn = min(RQ_ACB, Dv - cv0);                                      \
    const float softcap = a.softcap, inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;             \
    if (m0 >= M)                                                                                   \
        return;                                                                                    \
    const int b = bk / a.Hkv, hk = bk % a.Hkv;                                                     \
    int pi[RQ_ATQ];                                                                                \
    int pi_min = INT_MAX, pi_max = INT_MIN;                                                        \
    for (int r = 0; r < RQ_ATQ; r++) {                                                             \
        int i = min(m0 + r, M - 1) % Sq; /* rows past M repeat the last and are not stored */      \
        pi[r] = a.use_qpos ? qpos[a.qpos_off + i] : a.q_base + i;                                  \
        pi_min = min(pi_min, pi[r]);                                                               \
        pi_max = max(pi_max, pi[r]);                                                               \
    }                                                                                              \
    const int nvc = (dvn + 15) / 16; /* 16-lane chunks of the block of a V row; the last may be partial */ \
    float mx[RQ_ATQ], l[RQ_ATQ];                                                                   \
    float16 o[RQ_ATQ][RQ_ACB / 16];                                                                \
    for (int r = 0; r < RQ_ATQ; r++) {                                                             \
        /* a sink (gpt-oss) is a key of logit sinks[h] and value 0: the running max starts at it,  \
         * with a sum of e^0 = 1; a fully masked row then ends with O = 0, LSE = sinks[h] */       \
        mx[r] = a.use_sinks ? sinks[hk * G + min(m0 + r, M - 1) / Sq] : -INFINITY;                 \
        l[r] = a.use_sinks ? 1.0f : 0.0f;                                                          \
        for (int c = 0; c < nvc; c++)                                                              \
            o[r][c] = (float16)(0.0f);                                                             \
    }                                                                                              \
    __global const float *qp = qr + ((long)bk * M + m0) * D; /* spare rows follow the last tile */ \
    __global const uchar *vb = v + a.v_off + (long)b * a.vnb0 + (long)hk * a.vnb1 + (long)cv0 * (ES); \
    for (int j0 = 0; j0 < Sk; j0 += RQ_AVK) {                                                      \
        RQ_AIT pj;                                                                                 \
        int pj_min = INT_MAX, pj_max = INT_MIN;                                                    \
        {                                                                                          \
            int t[RQ_AVK];                                                                         \
            for (int u = 0; u < RQ_AVK; u++) {                                                     \
                int j = min(j0 + u, Sk - 1); /* lanes past Sk repeat the last key (masked below) */ \
                t[u] = a.use_kpos ? kpos[a.kpos_off + j] : a.k_base + j;                           \
                pj_min = min(pj_min, t[u]);                                                        \
                pj_max = max(pj_max, t[u]);                                                        \
            }                                                                                      \
            pj = RQ_AVLOAD(t);                                                                     \
        }                                                                                          \
        if ((a.causal && pj_min > pi_max) || (a.window > 0 && (long)pi_min - pj_max >= a.window))  \
            continue; /* every score of the tile is masked */                                      \
        RQ_AVT s[RQ_ATQ];                                                                          \
        _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                                         \
            s[r] = (RQ_AVT)(0.0f);                                                                 \
        __global const float *kp = kt + (long)bk * D * ldk + j0;                                   \
        for (int d = 0; d < D; d++) {                                                              \
            RQ_AVT kv = RQ_AVLOAD(kp + (long)d * ldk);                                             \
            _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                                     \
                s[r] = fma((RQ_AVT)(qp[r * D + d]), kv, s[r]);                                     \
        }                                                                                          \
        /* a non-finite score is NaN (-inf means masked only), before soft-capping (which would make \
         * an infinity +-C) */                                                                     \
        _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                                         \
            s[r] = select(s[r], (RQ_AVT)(NAN), isinf(s[r]));                                       \
        if (softcap > 0.0f) { /* soft-capping (Gemma 2), before the masks */                       \
            _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                                     \
                RQ_ACAP(s[r], softcap, inv_cap);                                                   \
        }                                                                                          \
        RQ_AIT past = (RQ_AIT)(j0) + RQ_AIOTA >= (RQ_AIT)(Sk);                                     \
        int nk = min(RQ_AVK, Sk - j0);                                                             \
        int mixed = 0; /* some row masks some key below nk: P.V selects */                        \
        int mk[RQ_ATQ][RQ_AVK];                                                                    \
        _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++) {                                       \
            RQ_AIT msk = past;                                                                     \
            if (a.causal)                                                                          \
                msk = msk | (pj > (RQ_AIT)(pi[r]));                                                \
            long lim = (long)pi[r] - a.window; /* window: masked where pj <= pi - window */        \
            if (a.window > 0 && lim >= (long)INT_MIN)                                              \
                msk = msk | (pj <= (RQ_AIT)((int)min(lim, (long)INT_MAX)));                        \
            s[r] = select(s[r], (RQ_AVT)(-INFINITY), msk);                                         \
            mixed |= RQ_AANY(msk & ~past);                                                         \
            RQ_AISTORE(msk, mk[r]);                                                                \
        }                                                                                          \
        float p[RQ_ATQ][RQ_AVK], corr[RQ_ATQ];                                                     \
        _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++) {                                       \
            float bm = rq_amax(s[r]);                                                              \
            float mn = fmax(mx[r], bm);                                                            \
            /* nothing unmasked yet (mn = -inf): weights 0, accumulators untouched; but a NaN     \
             * score (fmax skips it) stays NaN in its weight */                                    \
            bool none = mn == -INFINITY;                                                           \
            corr[r] = none ? 1.0f : exp(mx[r] - mn); /* 0 while mx is -inf */                      \
            RQ_AVT e = none ? select((RQ_AVT)(0.0f), s[r], isnan(s[r])) : exp(s[r] - (RQ_AVT)(mn)); \
            l[r] = l[r] * corr[r] + rq_asum(e);                                                    \
            mx[r] = none ? mx[r] : mn;                                                             \
            RQ_AVSTORE(e, p[r]);                                                                   \
        }                                                                                          \
        /* o = o * corr + p . V: per 16-lane chunk of V rows, the RQ_ATQ accumulators stay in      \
         * registers over the block's keys; each V chunk is loaded once for all rows */            \
        for (int c = 0; c < nvc; c++) {                                                            \
            float16 acc[RQ_ATQ];                                                                   \
            _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                                     \
                acc[r] = o[r][c] * corr[r];                                                        \
            if (mixed) { /* a masked key's V may be NaN: its products are selected away */         \
                for (int u = 0; u < nk; u++) {                                                     \
                    float16 x = LD16(vb + (long)(j0 + u) * a.vnb2, c, dvn);                        \
                    _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                             \
                        acc[r] = mk[r][u] ? acc[r] : fma((float16)(p[r][u]), x, acc[r]);           \
                }                                                                                  \
            } else {                                                                               \
                for (int u = 0; u < nk; u++) {                                                     \
                    float16 x = LD16(vb + (long)(j0 + u) * a.vnb2, c, dvn);                        \
                    _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                             \
                        acc[r] = fma((float16)(p[r][u]), x, acc[r]);                               \
                }                                                                                  \
            }                                                                                      \
            _Pragma("unroll") for (int r = 0; r < RQ_ATQ; r++)                                     \
                o[r][c] = acc[r];                                                                  \
        }                                                                                          \
    }                                                                                              \
    for (int r = 0; r < RQ_ATQ && m0 + r < M; r++) {                                               \
        int m = m0 + r, g = m / Sq, i = m - g * Sq, h = hk * G + g;                                \
        /* fully masked: l = 0, O = 0, LSE = -inf; l NaN (a non-finite key seen): both NaN */     \
        float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];                                             \
        int es = a.o_dtype == 0 ? 4 : 2;                                                           \
        long ob = a.o_off + (long)b * a.onb0 + (long)h * a.onb1 + (long)i * a.onb2 + (long)cv0 * es; \
        for (int c = 0; c < nvc; c++) {                                                            \
            float t[16];                                                                           \
            vstore16(o[r][c] * inv, 0, t);                                                         \
            for (int d = c * 16; d < min(dvn, c * 16 + 16); d++)                                   \
                rq_store_out(out, ob + (long)d * es, a.o_dtype, t[d - c * 16]);                    \
        }                                                                                          \
        if (a.with_lse && cb == 0)                                                                 \
            *(__global float *)(lse + a.l_off + (long)b * a.lnb0 + (long)h * a.lnb1 + (long)i * a.lnb2) = \
                l[r] == 0.0f ? -INFINITY : mx[r] + log(l[r]);                                      \
    }                                                                                              \
}

/* 16 elements of a V row from element 16c, as f32; lanes at or past Dv are 0 (a partial last chunk
 * is read element by element: nothing past the row is touched). */
#define RQ_DEFINE_LD16(NAME, T, VLOAD, LOAD1)                                                      \
    static inline float16 NAME(__global const uchar *row, int c, int Dv)                           \
    {                                                                                              \
        if (c * 16 + 16 <= Dv)                                                                     \
            return VLOAD(c, (__global const T *)row);                                              \
        float t[16];                                                                               \
        for (int i = 0; i < 16; i++)                                                               \
            t[i] = c * 16 + i < Dv ? LOAD1(row, (long)(c * 16 + i) * (long)sizeof(T)) : 0.0f;      \
        return vload16(0, t);                                                                      \
    }
#define RQ_VLOAD16_BF16(c, p) as_float16(convert_uint16(vload16((c), (p))) << 16)
RQ_DEFINE_LD16(rq_vrow16_f32, float, vload16, rq_load_f32)
RQ_DEFINE_LD16(rq_vrow16_f16, half, vload_half16, rq_load_f16)
RQ_DEFINE_LD16(rq_vrow16_bf16, ushort, RQ_VLOAD16_BF16, rq_load_bf16)

RQ_ATTN_KERNEL(qk_attention_f32, rq_vrow16_f32, 4)
RQ_ATTN_KERNEL(qk_attention_f16, rq_vrow16_f16, 2)
RQ_ATTN_KERNEL(qk_attention_bf16, rq_vrow16_bf16, 2)
