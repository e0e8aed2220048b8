/* Score pass: S = Qr . Kt over the head dim, from the rotated scratch written by rope.cl.
 *
 * Shape of the work, chosen for pocl (which vectorises a work-group across work-items, dimension 0)
 * and fine on GPUs (coalesced along keys):
 *   - dimension 0 is the key j; Kt is [bk][d][Sk_pad], so the load of Kt[d][j] is contiguous across
 *     work-items (one vector load on a CPU, one coalesced transaction on a GPU);
 *   - each work-item keeps RQ_TQ query rows in registers and reuses each loaded key value RQ_TQ
 *     times; the query value Qr[m][d] is the same for the whole work-group (a broadcast);
 *   - rows are the G query heads sharing a KV head times Sq ([bk][G*Sq][D] is exactly the [B][Hq][Sq][D]
 *     order), so GQA decode (Sq = 1, G = 8) still fills a tile and K is read once for the group.
 * Tuning knobs (-D, chosen per device type on the host): RQ_TQ rows per work-item, RQ_WG work-items
 * per group along keys (the host pads Sk to a multiple of it). */

#ifndef RQ_TQ
#define RQ_TQ 8
#endif
#ifndef RQ_WG
#define RQ_WG 64
#endif

__kernel __attribute__((reqd_work_group_size(RQ_WG, 1, 1)))
void qk_scores(__global const float *qr, __global const float *kt,
                        int M, int Sq, int Sk, int Sk_pad, int D, int G, int Hkv,
                        __global const int *qpos, long qpos_off, int use_qpos, int q_base,
                        __global const int *kpos, long kpos_off, int use_kpos, int k_base, int causal,
                        __global uchar *out, long out_off, long onb0, long onb1, long onb2, long onb3,
                        long window)
{
    int j = get_global_id(0);
    int m0 = get_global_id(1) * RQ_TQ;
    int bk = get_global_id(2);
    __global const float *kp = kt + (long)bk * D * Sk_pad + j;
    /* Qr has RQ_TQ spare rows at the end, so the last tile may read past M without a branch */
    __global const float *qp = qr + ((long)bk * M + m0) * D;

    float acc[RQ_TQ];
#pragma unroll
    for (int r = 0; r < RQ_TQ; r++)
        acc[r] = 0.0f;
    for (int d = 0; d < D; d++) {
        float kv = kp[(long)d * Sk_pad];
#pragma unroll
        for (int r = 0; r < RQ_TQ; r++)
            acc[r] = fma(qp[r * D + d], kv, acc[r]);
    }
    if (j >= Sk)
        return;

    int pj = use_kpos ? kpos[kpos_off + j] : k_base + j;
    int b = bk / Hkv, hk = bk % Hkv;
#pragma unroll
    for (int r = 0; r < RQ_TQ; r++) {
        int m = m0 + r;
        if (m < M) {
            int g = m / Sq, i = m - g * Sq;
            int pi = use_qpos ? qpos[qpos_off + i] : q_base + i;
            long o = out_off + (long)b * onb0 + (long)(hk * G + g) * onb1 + (long)i * onb2 + (long)j * onb3;
            bool masked = (causal && pj > pi) || (window > 0 && (long)pi - pj >= window);
            *(__global float *)(out + o) = masked ? -INFINITY : acc[r];
        }
    }
}
