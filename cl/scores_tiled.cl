/* Score pass for GPUs: S = Qr . Kt from the rotated scratch written by rope.cl, tiled through local
 * memory as in CLBlast's XGEMM. qk_scores (scores.cl) reads Q and K straight from global memory in
 * every work-item, which left an H100 at 10-16 TFLOP/s on prefill B*H=32 S=2048 D=128 f32: each
 * value was fetched once per work-item that uses it, not once per work-group.
 *
 * Shape of the work:
 *   - a work-group of RQ_TW x RQ_TW work-items owns a square tile of RQ_TILE query rows x RQ_TILE keys
 *     of one KV head (rows are the G query heads x Sq, as in qk_scores, so GQA fills tiles too);
 *   - per step it stages RQ_TK head dims of the tile's Q rows (qs, transposed to [dim][row]) and of
 *     its keys (ks, [dim][key], as Kt is) in local memory, every value loaded once per work-group;
 *   - each work-item accumulates a register block of RQ_RB rows x RQ_RB keys, strided by RQ_TW
 *     (rows ty + i*RQ_TW, keys tx + j*RQ_TW): the work-items of a warp then read consecutive local
 *     words of ks (no bank conflicts) and one broadcast word of qs, and store consecutive keys;
 *   - loads: Kt is [bk][d][ldk], so a K tile's rows are RQ_TILE consecutive floats (coalesced); Qr is
 *     [bk][row][d], so a Q tile is read RQ_TK consecutive dims per row (segments of 4*RQ_TK bytes);
 *   - the epilogue is qk_scores': causal and sliding-window masks write -inf exactly, positions come
 *     from the arrays or the bases, the output view is strided (bytes), and a tile whose every score
 *     is masked skips the dim loop (the whole work-group agrees, so the barriers stay uniform).
 * Each score is the same chain of fma over d = 0..D-1 as in qk_scores (padding dims and keys are
 * zeros, which add nothing), so both kernels agree to the last bit where the compiler keeps fma.
 * Knobs (-D, chosen by src/tuning.c; the host checks the work-group size and local memory against
 * the device and the compiled kernel and falls back to qk_scores, see src/plan.c): RQ_TILE, RQ_RB,
 * RQ_TK. Portable OpenCL C 1.2: no subgroups, no fp16, no Clang builtins (NVIDIA rejects them). */

#include "contract.h"

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
#if RQ_TILE % RQ_RB != 0
#error "RQ_TILE must be a multiple of RQ_RB"
#endif

__kernel __attribute__((reqd_work_group_size(RQ_TW, RQ_TW, 1)))
void qk_scores_tiled(__global const float *qr, __global const float *kt, __global const int *qpos,
                     __global const int *kpos, __global uchar *out, rq_scores_args a)
{
    /* Q is stored transposed: consecutive work-items load consecutive dims of one row (coalesced)
     * and write them to qs[c][r], one qs row apart; RQ_TQPAD (contract.h) makes that stride odd, so
     * the writes spread over the banks (16-way conflicts at RQ_TK 16 without it, at most 2-way with
     * it). ks is written along keys, as Kt is read: consecutive words, no padding needed. */
    __local float qs[RQ_TK][RQ_TILE + RQ_TQPAD];
    __local float ks[RQ_TK][RQ_TILE];
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

    float acc[RQ_RB][RQ_RB];
#pragma unroll
    for (int i = 0; i < RQ_RB; i++)
#pragma unroll
        for (int j = 0; j < RQ_RB; j++)
            acc[i][j] = 0.0f;

    if (!skip) {
        __global const float *qb = qr + (long)bk * M * D; /* the G*Sq rows of this KV head */
        __global const float *kb = kt + (long)bk * D * ldk;
        for (int d0 = 0; d0 < D; d0 += RQ_TK) {
            /* rows past M, keys past Sk and dims past D load as 0: they add nothing to a score, and
             * no score of them is stored */
            for (int e = lid; e < RQ_TILE * RQ_TK; e += RQ_NT) {
                int r = e / RQ_TK, c = e % RQ_TK, m = m0 + r, d = d0 + c;
                qs[c][r] = m < M && d < D ? qb[(long)m * D + d] : 0.0f;
            }
            for (int e = lid; e < RQ_TILE * RQ_TK; e += RQ_NT) {
                int c = e / RQ_TILE, r = e % RQ_TILE, j = j0 + r, d = d0 + c;
                ks[c][r] = j < Sk && d < D ? kb[(long)d * ldk + j] : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
            for (int c = 0; c < RQ_TK; c++) {
                float qv[RQ_RB], kv[RQ_RB];
#pragma unroll
                for (int i = 0; i < RQ_RB; i++)
                    qv[i] = qs[c][ty + i * RQ_TW];
#pragma unroll
                for (int j = 0; j < RQ_RB; j++)
                    kv[j] = ks[c][tx + j * RQ_TW];
#pragma unroll
                for (int i = 0; i < RQ_RB; i++)
#pragma unroll
                    for (int j = 0; j < RQ_RB; j++)
                        acc[i][j] = fma(qv[i], kv[j], acc[i][j]);
            }
            barrier(CLK_LOCAL_MEM_FENCE); /* the next step overwrites qs and ks */
        }
    }

    /* epilogue: qk_scores' masks and strided stores, one score at a time (consecutive tx store
     * consecutive keys: coalesced when the output's keys are contiguous) */
#pragma unroll
    for (int i = 0; i < RQ_RB; i++) {
        int r = ty + i * RQ_TW, m = m0 + r;
        if (m >= M)
            continue;
        int g = m / Sq, ii = m - g * Sq;
        int pi = masked ? rpos[r] : 0;
        /* window: masked where pi - pj >= window, i.e. pj <= pi - window (in long: no overflow) */
        long lim_w = (long)pi - window;
        long o = out_off + (long)b * onb0 + (long)(hk * G + g) * onb1 + (long)ii * onb2;
#pragma unroll
        for (int j = 0; j < RQ_RB; j++) {
            int c = tx + j * RQ_TW, jj = j0 + c;
            if (jj >= Sk)
                continue;
            float v = acc[i][j];
            if (masked) {
                int pj = cpos[c];
                if ((causal && pj > pi) || (window > 0 && (long)pj <= lim_w))
                    v = -INFINITY;
            }
            *(__global float *)(out + o + (long)jj * onb3) = v;
        }
    }
}
