/* Score pass for GPUs: S = Qr . Kt from the rotated scratch written by rope.cl, tiled through local
 * memory as in CLBlast's XGEMM. qk_scores (scores.cl) reads Q and K straight from global memory in
 * every work-item, which left an H100 at 10-16 TFLOP/s on prefill B*H=32 S=2048 D=128 f32: each
 * value was fetched once per work-item that uses it, not once per work-group.
 *
 * Shape of the work:
 *   - a work-group of RQ_TW x RQ_TW work-items owns a square tile of RQ_TILE query rows x RQ_TILE keys
 *     of one KV head (rows are the G query heads x Sq, as in qk_scores, so GQA fills tiles too);
 *   - per step it stages RQ_TK head dims of the tile's Q rows (qs) and of its keys (ks) in local
 *     memory, every value loaded from global memory once per work-group;
 *   - each work-item accumulates a register block of RQ_RB rows x RQ_RB keys: rows ty + i*RQ_TW,
 *     keys in float4 groups 4*(tx + q*RQ_TW) + 0..3. Local memory is read as float4, one
 *     instruction per 4 values: per 4 dims a work-item reads RQ_RB float4 of Q (broadcast across
 *     tx) and RQ_RB float4 of K (the work-items of a warp read consecutive float4: no bank
 *     conflicts) for 4*RQ_RB*RQ_RB fma. Scalar reads of a 4x4 block spend 8 loads per 16 fma, which
 *     by instruction counts caps an NVIDIA SM near half its fma rate (an estimate, not measured);
 *     float4 reads spend 8 per 64. Stores: consecutive work-items write consecutive key groups;
 *   - loads: Kt is [bk][d][ldk], so a K tile's rows are RQ_TILE consecutive floats, read as aligned
 *     float4 (ldk is a multiple of 16, rq_kt_stride); Qr is [bk][row][d], read RQ_TK consecutive
 *     dims per row. Both are staged as they lie (qs [row][dim], ks [dim][key]): consecutive
 *     work-items write consecutive float4, and the reads above need no padding either;
 *   - the epilogue is qk_scores': causal and sliding-window masks write -inf exactly, positions come
 *     from the arrays or the bases, the output view is strided (bytes), and a tile whose every score
 *     is masked skips the dim loop (the whole work-group agrees, so the barriers stay uniform).
 * Each score is the same chain of fma over d = 0..D-1 as in qk_scores (padding dims and keys are
 * zeros, which add nothing), so both kernels agree to the last bit where the compiler keeps fma.
 * Knobs (-D, chosen by src/core/tuning.c and src/opencl/cl_tune.c; the host checks the work-group size and local memory against
 * the device and the compiled kernel and falls back to qk_scores, see src/opencl/cl_plan.c): RQ_TILE, RQ_RB,
 * RQ_TK. Portable OpenCL C 1.2: no subgroups, no fp16, no Clang builtins (NVIDIA rejects them). */

#include "contract.h"
#include "variants.cl" /* RQ_SOFTCAP */

#ifndef RQ_TILE
#define RQ_TILE 64 /* rows and keys of a work-group's tile (the GPU profile's default, tuning.c) */
#endif
#ifndef RQ_RB
#define RQ_RB 4    /* rows and keys per work-item: 16 accumulators, 64/4 = 16x16 = 256 work-items */
#endif
#ifndef RQ_TK
#define RQ_TK 16   /* head dims per local-memory step (D = 128: 8 steps, 2 barriers each) */
#endif
#define RQ_TW (RQ_TILE / RQ_RB) /* work-items along each side of the tile */
#define RQ_NT (RQ_TW * RQ_TW)   /* work-items per group */
#define RQ_KV (RQ_RB / 4)       /* float4 groups of keys per work-item */
#if RQ_RB % 4 != 0 || RQ_TK % 4 != 0 || RQ_TILE % RQ_RB != 0
#error "RQ_RB and RQ_TK must be multiples of 4 (float4 local reads), RQ_TILE a multiple of RQ_RB"
#endif

/* The fma of dim e (0..3) of a group of 4: q[i].comp is that dim of row i, ks row 4*c4 + e holds it
 * for the keys. Spelled out per component (a constant lane), not indexed at run time. */
#define RQ_TILED_DIM(e, comp)                                                                      \
    {                                                                                              \
        float4 k[RQ_KV];                                                                           \
        _Pragma("unroll") for (int jq = 0; jq < RQ_KV; jq++)                                       \
            k[jq] = ks[4 * c4 + (e)][tx + jq * RQ_TW];                                             \
        _Pragma("unroll") for (int i = 0; i < RQ_RB; i++)                                          \
            _Pragma("unroll") for (int jq = 0; jq < RQ_KV; jq++)                                   \
                acc[i][jq] = fma((float4)(q[i].comp), k[jq], acc[i][jq]);                          \
    }

__kernel __attribute__((reqd_work_group_size(RQ_TW, RQ_TW, 1)))
void qk_scores_tiled(__global const float *qr, __global const float *kt, __global const int *qpos,
                     __global const int *kpos, __global uchar *out, rq_scores_args a)
{
    /* RQ_TILED_LOCAL_BYTES (contract.h) counts exactly these arrays, for the host's checks */
    __local float4 qs[RQ_TILE][RQ_TK / 4];    /* Q tile, [row][dim] */
    __local float4 ks[RQ_TK][RQ_TILE / 4];    /* K tile, [dim][key] */
    __local int rpos[RQ_TILE], cpos[RQ_TILE]; /* positions of the tile's rows and keys (masks) */
    __local int lim[4];                       /* min, max of those: rows, then keys */

    const int M = a.M, Sq = a.Sq, Sk = a.Sk, ldk = a.ldk, D = a.D, G = a.G, Hkv = a.Hkv;
    const int use_qpos = a.use_qpos, q_base = a.q_base, use_kpos = a.use_kpos, k_base = a.k_base;
    const int causal = a.causal;
    const long qpos_off = a.qpos_off, kpos_off = a.kpos_off, window = a.window;
    const long out_off = a.out_off, onb0 = a.onb0, onb1 = a.onb1, onb2 = a.onb2, onb3 = a.onb3;
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * RQ_TW + tx;
    const int j0 = get_group_id(0) * RQ_TILE, m0 = get_group_id(1) * RQ_TILE, bk = get_group_id(2);
    const int b = bk / Hkv, hk = bk % Hkv;
    const bool masked = causal || window > 0; /* uniform: the work-group takes one branch */
    const float softcap = a.softcap;

    bool skip = false;
    if (masked) {
        if (lid == 0) {
            lim[0] = INT_MAX;
            lim[1] = INT_MIN;
            lim[2] = INT_MAX;
            lim[3] = INT_MIN;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* every tile has at least one row < M and one key < Sk (the grid is rounded up, not over) */
        for (int t = lid; t < 2 * RQ_TILE; t += RQ_NT) {
            bool row = t < RQ_TILE;
            int u = row ? t : t - RQ_TILE, p = 0;
            if (row && m0 + u < M) {
                int i = (m0 + u) % Sq;
                p = use_qpos ? qpos[qpos_off + i] : q_base + i;
                rpos[u] = p;
            } else if (!row && j0 + u < Sk) {
                int j = j0 + u;
                p = use_kpos ? kpos[kpos_off + j] : k_base + j;
                cpos[u] = p;
            } else {
                continue;
            }
            atomic_min(&lim[row ? 0 : 2], p);
            atomic_max(&lim[row ? 1 : 3], p);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        int pi_min = lim[0], pi_max = lim[1], pj_min = lim[2], pj_max = lim[3];
        skip = (causal && pj_min > pi_max) || (window > 0 && (long)pi_min - pj_max >= window);
    }

    float4 acc[RQ_RB][RQ_KV];
#pragma unroll
    for (int i = 0; i < RQ_RB; i++)
#pragma unroll
        for (int jq = 0; jq < RQ_KV; jq++)
            acc[i][jq] = (float4)(0.0f);

    if (!skip) {
        __global const float *qb = qr + (long)bk * M * D; /* the G*Sq rows of this KV head */
        __global const float *kb = kt + (long)bk * D * ldk;
        const int4 iota = (int4)(0, 1, 2, 3);
        for (int d0 = 0; d0 < D; d0 += RQ_TK) {
            /* rows past M, keys past Sk and dims past D load as 0: they add nothing to a score, and
             * no score of them is stored */
            for (int e = lid; e < RQ_TILE * (RQ_TK / 4); e += RQ_NT) {
                int r = e / (RQ_TK / 4), v = e % (RQ_TK / 4), m = m0 + r, d = d0 + 4 * v;
                float4 x = (float4)(0.0f);
                if (m < M && d < D) {
                    __global const float *p = qb + (long)m * D + d;
                    if (d + 4 <= D) /* rows are D floats apart: no alignment to rely on, vload4 */
                        x = vload4(0, p);
                    else
                        x = (float4)(p[0], d + 1 < D ? p[1] : 0.0f, d + 2 < D ? p[2] : 0.0f, 0.0f);
                }
                qs[r][v] = x;
            }
            for (int e = lid; e < RQ_TK * (RQ_TILE / 4); e += RQ_NT) {
                int c = e / (RQ_TILE / 4), v = e % (RQ_TILE / 4), j = j0 + 4 * v, d = d0 + c;
                float4 x = (float4)(0.0f);
                if (d < D && j < Sk) {
                    /* aligned (ldk and j multiples of 4) and inside the row (ldk >= Sk rounded up
                     * to 16); the lanes past Sk are the scratch's padding: zeroed */
                    x = *(__global const float4 *)(kb + (long)d * ldk + j);
                    if (j + 4 > Sk)
                        x = select(x, (float4)(0.0f), (int4)(j) + iota >= (int4)(Sk));
                }
                ks[c][v] = x;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int c4 = 0; c4 < RQ_TK / 4; c4++) {
                float4 q[RQ_RB];
#pragma unroll
                for (int i = 0; i < RQ_RB; i++)
                    q[i] = qs[ty + i * RQ_TW][c4];
                /* dims in order, so each score is the same fma chain over d as in qk_scores */
                RQ_TILED_DIM(0, s0)
                RQ_TILED_DIM(1, s1)
                RQ_TILED_DIM(2, s2)
                RQ_TILED_DIM(3, s3)
            }
            barrier(CLK_LOCAL_MEM_FENCE); /* the next step overwrites qs and ks */
        }
    }

    /* epilogue: qk_scores' masks and strided stores, 4 keys at a time (consecutive tx store
     * consecutive groups: coalesced when the output's keys are contiguous) */
#pragma unroll
    for (int i = 0; i < RQ_RB; i++) {
        int r = ty + i * RQ_TW, m = m0 + r;
        if (m >= M)
            continue;
        int g = m / Sq, ii = m - g * Sq;
        int pi = masked ? rpos[r] : 0;
        /* window: masked where pi - pj >= window, i.e. pj <= pi - window, in int without overflow */
        long lim_w = (long)pi - window;
        bool win = window > 0 && lim_w >= (long)INT_MIN;
        int wcut = (int)min(lim_w, (long)INT_MAX);
        long o = out_off + (long)b * onb0 + (long)(hk * G + g) * onb1 + (long)ii * onb2;
#pragma unroll
        for (int jq = 0; jq < RQ_KV; jq++) {
            int c = 4 * (tx + jq * RQ_TW), jj = j0 + c;
            if (jj >= Sk)
                continue;
            float4 v = acc[i][jq];
            if (softcap > 0.0f && !skip) /* soft-capping (Gemma 2), before the masks */
                v = RQ_SOFTCAP(v, softcap, 1.0f / softcap);
            if (masked) { /* cpos past Sk is unset: those lanes are not stored */
                int4 pj = (int4)(cpos[c], cpos[c + 1], cpos[c + 2], cpos[c + 3]);
                if (causal)
                    v = select(v, (float4)(-INFINITY), pj > (int4)(pi));
                if (win)
                    v = select(v, (float4)(-INFINITY), pj <= (int4)(wcut));
            }
            if (onb3 == (long)sizeof(float) && jj + 4 <= Sk) {
                vstore4(v, 0, (__global float *)(out + o + (long)jj * onb3));
            } else {
                float t[4];
                vstore4(v, 0, t);
                for (int l = 0; l < 4 && jj + l < Sk; l++)
                    *(__global float *)(out + o + (long)(jj + l) * onb3) = t[l];
            }
        }
    }
}
