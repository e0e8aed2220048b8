/* Paged decode pass 1 for GPUs at memory speed (paged_attn_fast), included by cl/paged.cl after its
 * helpers. GPU profile only (the host creates it there, src/opencl/cl_paged_fast.c); paged_attn_gpu stays
 * the fallback for the shapes this kernel does not take, paged_attn_cpu the CPU profile's kernel.
 * docs/paged-decode-gpu.md has the design, the SASS counts and the measurements behind the constants.
 *
 * A work-group of RQ_FWG (128) work-items per task: (split of a sequence's keys, KV head and a chunk of
 * its query heads, group of consecutive rows of one sequence that share its page list: a decode row,
 * a speculative step, the Sq rows of a dense decode; src/core/paged_call.c rq_paged_meta_groups) and
 * chunk of V dims. Its M = rows x heads query vectors (at most RQ_FM) read each K and V element of the
 * split once. Per tile of RQ_FWG keys, two barriers:
 *   B0  the tile's anchors are in local memory (and the previous tile's P.V is done with P);
 *   1.  scores: work-item t owns key t of the tile. It reads the key's row straight from the cache
 *       (16 bytes a load: 8 elements of a 16-bit row, the next 16 dims' loads issued before this 16's
 *       arithmetic), rotates each pair with R(p) = A_w R(delta) (A_w: an anchor per 32 or 16 keys of
 *       the tile in local memory; R(delta): the plan's host fp64 table, copied to local memory once) and
 *       adds its products with the M rotated query vectors (local memory, float4 broadcasts) into M
 *       registers. The key's scores become P = e^(S - m) against the running max m of each query
 *       vector, into the tile's P (local); a score above m + RQ_FTHR raises a flag instead;
 *   B1  P is complete. Rarely (the first tile, or a score above m + RQ_FTHR) the flagged path: the
 *       scores themselves through local memory, the tile max per query vector, m raised, P recomputed
 *       and the accumulators rescaled (three more barriers);
 *   2.  P.V: a work-item owns RQ_FMH query vectors x RQ_FVD V dims of the output for the keys of its
 *       key lane (every KL-th key of the tile; KL = 128 / cells): one 8-byte load of a 16-bit V row per
 *       key (coalesced along the row), one float4 of P from local memory, 16 FMAs; RQ_FPU keys a round. Its partial sums stay in
 *       registers for the whole split; the key lanes are summed once at the end.
 * Anchors: A = R(first key of the tile) accurate (angle.cl, one sincos per pair), times the host's
 * R(w dr) per sub-tile w; every key then costs one complex product per pair more than a table lookup.
 * Error: each factor is the correctly rounded f32 of its fp64 value (the host's) or the accurate angle
 * (a few 1e-7 half-turns, ~1 ulp for sinpi/cospi); each complex product adds at most ~2 ulp. So a key's
 * (cos, sin) is within ~5e-7 of fp64 at every int32 position: the angle is never formed as p * f,
 * only reduced exactly at the tile's first position (docs/conventions.md section 7).
 * Masks: keys past the split or the row's length, and keys masked by position for every row of the
 * group, are never read (V) and weigh nothing; a key masked for some rows only (the causal diagonal of
 * a speculative step or a dense decode's rows, a window's edge) takes a select per product in the
 * tiles where that happens (the `mixed` tiles), so that a masked (row, key) never multiplies P = 0 by a
 * possibly non-finite V. A non-finite K or V that a row sees gives NaN, as the reference.
 * Host preconditions (src/opencl/cl_paged_fast.c): D % 8 == 0, Dv % 4 == 0, R % 16 == 0 and R <= 256,
 * rot_off % 8 == 0, the rows' M times D within RQ_FQF, K and V rows at 16-byte multiples,
 * their extents under 2^32 units of 16 bytes. */
#if !RQ_CPU_KERNELS || (defined(RQ_PAGED_FAST) && RQ_PAGED_FAST)

#define RQ_FAST_NOROW 0xFFFFFFFFu /* a tile key whose V row is not read */

/* 4 consecutive codes of an 8-bit cache (a uint) as (float)q. int8: 2^23 + 128 + q built in the
 * mantissa and the constant subtracted (exact); e5m2 is the upper byte of an f16, and e4m3 shifted
 * into one is its value times 2^-8 (subnormals included), so both go through the hardware's f16
 * conversion (vload_half of a private array: no cl_khr_fp16), e4m3's NaN codes (mag 0x7F) set apart. */
static inline float4 rq_fast_q8(uint w, int dt)
{
    uint4 b = (uint4)(w, w >> 8, w >> 16, w >> 24) & (uint4)(0xFFu);
    if (dt == RQ_DT_I8)
        return as_float4((b ^ (uint4)(0x80u)) | (uint4)(0x4B000000u)) - 8388736.0f;
    uint4 h = dt == RQ_DT_E5M2 ? b << 8 : ((b & (uint4)(0x7Fu)) << 7) | ((b & (uint4)(0x80u)) << 8);
    ushort hs[4];
    vstore4(convert_ushort4(h), 0, hs);
    float4 v = vload_half4(0, (__private const half *)hs);
    if (dt == RQ_DT_E4M3)
        v = select(v * 256.0f, (float4)(as_float(0x7FC00000u)), as_int4((b & (uint4)(0x7Fu)) == (uint4)(0x7Fu)));
    return v;
}

/* Elements 8c .. 8c + 7 of the row at ru 16-byte units as floats ((float)q for 8-bit caches). The
 * caches are uint4 arrays here so that the compilers know the 16-byte alignment: one 128-bit load per
 * 16 bytes (clang/NVPTX turned a vload_half8 of a uchar pointer into eight 16-bit loads). Offsets are
 * 32-bit counts of 16-byte units (the host checks that the caches' extents fit): 64-bit byte offsets
 * held sm_90 registers across the whole tile loop. */
static inline float8 rq_fast_ld(__global const uint4 *base, uint ru, int c, int dt)
{
    if (dt == RQ_DT_F16)
        return vload_half8(0, (__global const half *)(base + ru + c));
    if (dt == RQ_DT_BF16) {
        uint4 w = base[ru + c];
        return as_float8((uint8)(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u, w.z << 16,
                                 w.z & 0xFFFF0000u, w.w << 16, w.w & 0xFFFF0000u));
    }
    if (dt == RQ_DT_F32)
        return (float8)(as_float4(base[ru + 2 * c]), as_float4(base[ru + 2 * c + 1]));
    uint2 w = ((__global const uint2 *)base)[2 * ru + c];
    return (float8)(rq_fast_q8(w.x, dt), rq_fast_q8(w.y, dt));
}

/* Elements 4c .. 4c + 3 of a V row at ru 16-byte units, as rq_fast_ld. */
static inline float4 rq_fast_ld4(__global const uint4 *base, uint ru, int c, int dt)
{
    if (dt == RQ_DT_F16)
        return vload_half4(0, (__global const half *)((__global const uint2 *)base + 2 * ru + c));
    if (dt == RQ_DT_BF16) {
        uint2 w = ((__global const uint2 *)base)[2 * ru + c];
        return as_float4((uint4)(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u));
    }
    if (dt == RQ_DT_F32)
        return as_float4(base[ru + c]);
    return rq_fast_q8(((__global const uint *)base)[4 * ru + c], dt);
}

/* Q's head dim at slot j (the score loop's order: rotation pair i's two dims at slots 2i, 2i + 1, then
 * the pass-through dims in order). */
static inline int rq_fast_qdim(int j, int R, int layout, int rot_off)
{
    if (j >= R) {
        int k = j - R;
        return k < rot_off ? k : k + R;
    }
    return rot_off + (layout ? (j >> 1) + (j & 1) * (R >> 1) : j);
}

/* s[0..FM) += Q's dim slots J0_ .. J0_ + N_ - 1 (float4 blocks of query vectors, nmb of them, each
 * block its slots in a row: one base address a block, the slots at constant offsets) times X_ */
#define RQ_FAST_DOT(X_, J0_, N_)                                                                   \
    do {                                                                                           \
        _Pragma("unroll") for (int mb = 0; mb < FM / 4; mb++) {                                    \
            if (mb < nmb) {                                                                        \
                float4 acc_ = (float4)(s[4 * mb], s[4 * mb + 1], s[4 * mb + 2], s[4 * mb + 3]);    \
                __local const float4 *qb_ = qs4 + mb * D + (J0_);                                  \
                _Pragma("unroll") for (int c_ = 0; c_ < (N_); c_++)                                \
                    acc_ = fma(qb_[c_], (float4)((X_)[c_]), acc_);                                 \
                s[4 * mb] = acc_.x, s[4 * mb + 1] = acc_.y, s[4 * mb + 2] = acc_.z, s[4 * mb + 3] = acc_.w; \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* P.V of one key lane over the tile (inside paged_attn_fast): RQ_FPU keys a round, their V loads first.
 * MIXED (the tile's rows' masks differ): a masked (vector, key) is -0 in P; with the key seen by another
 * row of the group its V is read and may be non-finite, so the product is selected away, not
 * multiplied by 0. 8-bit V: V times the row's scale, P's sum unscaled. */
#define RQ_FAST_PV(MIXED)                                                                          \
    do {                                                                                           \
        const int cv = (dvb >> 2) + dc;                                                            \
        for (int tt = kl; tt < nt; tt += RQ_FPU * KL) {                                            \
            float4 v[RQ_FPU], p[RQ_FPU];                                                           \
            _Pragma("unroll") for (int q = 0; q < RQ_FPU; q++) {                                   \
                const int k = tt + q * KL;                                                         \
                const uint r = k < nt ? vrow[k] : RQ_FAST_NOROW;                                   \
                v[q] = (float4)(0.0f);                                                             \
                p[q] = (float4)(-0.0f);                                                            \
                if (r != RQ_FAST_NOROW) {                                                          \
                    v[q] = rq_fast_ld4(vc, r, cv, vdt);                                            \
                    if (vdt >= RQ_DT_I8)                                                           \
                        v[q] *= vsl[k];                                                            \
                    p[q] = pt4[k * pq4 + hb];                                                      \
                }                                                                                  \
            }                                                                                      \
            _Pragma("unroll") for (int q = 0; q < RQ_FPU; q++) {                                   \
                _Pragma("unroll") for (int i = 0; i < RQ_FMH; i++) {                               \
                    const float pi = ((float *)&p[q])[i];                                          \
                    lsum[i] += pi;                                                                 \
                    _Pragma("unroll") for (int d = 0; d < RQ_FVD; d++) {                           \
                        float x = fma(pi, ((float *)&v[q])[d], acc[i][d]);                         \
                        acc[i][d] = MIXED && as_uint(pi) == 0x80000000u ? acc[i][d] : x;           \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* One rotated unit of the score loop (inside paged_attn_fast): pairs 8U .. 8U + 7 of the key, XA and
 * XB its two loaded chunks (interleaved: the unit's 16 dims; half-split: the pairs' first and second
 * dims), rotated by R(p) = A_w R(delta) (anchor and table: two pairs a float4) and dotted with Q. */
#define RQ_FAST_UNIT(U, XA, XB)                                                                    \
    do {                                                                                           \
        float8 x0_ = a.layout ? (XA) : (float8)((XA).even, (XB).even);                             \
        float8 x1_ = a.layout ? (XB) : (float8)((XA).odd, (XB).odd);                               \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; q_++) { /* pairs 8U + 2q_, 8U + 2q_ + 1 */      \
            float4 tq = tw[4 * (U) + q_], aq = aw[4 * (U) + q_];                                   \
            float2 ra = (float2)(aq.x * tq.x - aq.y * tq.y, aq.y * tq.x + aq.x * tq.y);            \
            float2 rb = (float2)(aq.z * tq.z - aq.w * tq.w, aq.w * tq.z + aq.z * tq.w);            \
            float e0 = ((float *)&x0_)[2 * q_], e1 = ((float *)&x1_)[2 * q_];                      \
            float f0 = ((float *)&x0_)[2 * q_ + 1], f1 = ((float *)&x1_)[2 * q_ + 1];              \
            float y_[4] = {e0 * ra.x - e1 * ra.y, e0 * ra.y + e1 * ra.x, f0 * rb.x - f1 * rb.y,    \
                           f0 * rb.y + f1 * rb.x};                                                 \
            RQ_FAST_DOT(y_, 16 * (U) + 4 * q_, 4);                                                 \
        }                                                                                          \
    } while (0)

/* the kernels: paged_attn_fast4 for up to 4 query vectors (a decode row of up to 4 query heads a KV
 * head), paged_attn_fast8 for up to 8 */
#define RQ_FAST_FM 4
#define RQ_FAST_NAME paged_attn_fast4
#include "paged_fast_task.tpl.cl"
#undef RQ_FAST_FM
#undef RQ_FAST_NAME
#define RQ_FAST_FM 8
#define RQ_FAST_NAME paged_attn_fast8
#include "paged_fast_task.tpl.cl"
#undef RQ_FAST_FM
#undef RQ_FAST_NAME
#endif
