/* Decode path for GPUs: scores of few query rows per KV head (M = G*Sq <= RQ_DM, e.g. GQA decode)
 * against K read straight from the caller's buffer. The two-pass path moves K three times (read K,
 * write Kt, read Kt) where the scores themselves are a small part of the work; here K is read once,
 * rotated on its way into local memory, and the only other traffic is Qr (small) and the scores.
 * The CPU profile's qk_decode_* (scores.cl) is written for wide SIMD registers and private tables;
 * this one is shaped for GPUs:
 *   - a work-group takes RQ_GDKB consecutive keys of one (batch, KV head);
 *   - staging: consecutive work-items take consecutive rotary pairs of a key (interleaved pairs are
 *     adjacent dims, half-split pairs two runs of adjacent dims), so the reads of K are coalesced;
 *     each computes its pair's angle (angle.cl's accurate reduction, as the RoPE pass does: a few
 *     tens of flops per pair and key, within the time the pair's 8 bytes (f32) take to arrive at an
 *     H100's ~18 flop per byte of bandwidth; an estimate, not measured) and writes the rotated pair
 *     into a [key][dim] tile padded to an odd stride;
 *   - scores: work-item t takes key t % RQ_GDKB and row t / RQ_GDKB: the work-items of a warp read
 *     different keys of the tile at the same dim (odd stride: no bank conflicts) and the same one
 *     or two Qr rows (broadcast), and store consecutive keys;
 *   - masks as in qk_scores: causal and sliding window write -inf exactly, a masked score skips its
 *     dot product.
 * Qr rows are RQ_DMAXD floats apart (the decode path's scratch layout, src/opencl/cl_enqueue.c). Host
 * preconditions: D <= RQ_DMAXD, M <= RQ_DM; the host checks the local memory and the work-group
 * size against the device and the compiled kernel (src/opencl/cl_plan.c). Portable OpenCL C 1.2.
 * Not measured on a GPU: the tuner compares it with the two-pass path (src/opencl/cl_tune.c).
 * Model-family variants: soft-capping of each unmasked score; the rotary offset (the staging maps
 * units to dims as rope.cl does); M-RoPE (a pair's key position from its frequency's stream of the
 * [3][kpos_stride] arrays; the masks by token order, k_base + j). */

#include "contract.h"
#include "angle.cl"
#include "load.cl"
#include "variants.cl" /* RQ_SOFTCAP */
#include "rope.cl" /* rq_unit_dim0, rq_unit_dim1: the dims of a rotary or pass-through unit */

/* one angle per work-item; also defined by rope.cl (GPU form), decode_gpu.cl and paged.cl, whichever comes first in the
 * program (both may be in it, or either alone) */
#ifndef RQ_HALF_TURNS1
#define RQ_HALF_TURNS1
RQ_DEFINE_HALF_TURNS(rq_half_turns1, float)
#endif

#define RQ_GDSTRIDE (RQ_DMAXD + 1) /* floats per key in the tile: odd, so keys fall in different banks */

/* The body of the three storage types' kernels; dt is a constant in each (the loads fold). */
static inline void rq_decode_gpu(__global const uchar *k, __global const int *kpos, __global const float4 *vfreq,
                                 __global const float *qr, __global const int *qpos, __global uchar *out,
                                 const rq_decode_args a, const int dt, __local float *ks)
{
    const long k_off = a.k_off, knb0 = a.knb0, knb1 = a.knb1, knb2 = a.knb2;
    const long kpos_off = a.kpos_off, qpos_off = a.qpos_off, window = a.window;
    const long out_off = a.out_off, onb0 = a.onb0, onb1 = a.onb1, onb2 = a.onb2, onb3 = a.onb3;
    const int Hkv = a.Hkv, Sk = a.Sk, D = a.D, R = a.R, layout = a.layout;
    const int use_kpos = a.use_kpos, k_base = a.k_base, M = a.M, Sq = a.Sq, G = a.G;
    const int use_qpos = a.use_qpos, q_base = a.q_base, causal = a.causal;
    const float rot_mul = a.rot_mul, softcap = a.softcap;
    const int rot_off = a.rot_off, mrope = a.mrope;
    const long kst = a.kpos_stride; /* M-RoPE: the arrays' streams [3][kst] */
    const int lid = get_local_id(0), j0 = get_group_id(0) * RQ_GDKB, bk = get_group_id(1);
    const int b = bk / Hkv, hk = bk % Hkv, hr = R / 2, units = hr + (D - R);
    const long es = dt == RQ_DT_F32 ? 4 : 2; /* bytes per element; K's dims are contiguous */
    const long kb = k_off + (long)b * knb0 + (long)hk * knb1;

    /* stage: rotated keys of the block into ks (keys past Sk are not staged and not stored) */
    for (int e = lid; e < RQ_GDKB * units; e += RQ_GDWG) {
        int jj = e / units, u = e - jj * units, j = j0 + jj;
        if (j >= Sk)
            continue;
        long ro = kb + (long)j * knb2;
        bool pt = u >= hr; /* pass-through dim: copied */
        int i0 = rq_unit_dim0(u, hr, R, rot_off, layout); /* rope.cl: dims [rot_off, rot_off + R) rotate */
        int i1 = pt ? i0 : rq_unit_dim1(u, hr, rot_off, layout);
        float x0 = dt == RQ_DT_F32 ? rq_load_f32(k, ro + i0 * es)
                   : dt == RQ_DT_F16 ? rq_load_f16(k, ro + i0 * es) : rq_load_bf16(k, ro + i0 * es);
        __local float *kr = ks + jj * RQ_GDSTRIDE;
        if (pt) {
            kr[i0] = x0;
            continue;
        }
        float x1 = dt == RQ_DT_F32 ? rq_load_f32(k, ro + i1 * es)
                   : dt == RQ_DT_F16 ? rq_load_f16(k, ro + i1 * es) : rq_load_bf16(k, ro + i1 * es);
        float4 v = vfreq[u]; /* .w: the frequency's position stream (M-RoPE; else 0) */
        int p = use_kpos ? kpos[kpos_off + (long)(int)v.w * kst + j] : k_base + j;
        int lo = p & 0xFFF; /* the split angle.cl expects: a multiple of 4096 and the rest, both exact */
        float t = rq_half_turns1((float)(p - lo), (float)lo, v.x, v.y, v.z);
        float c = cospi(t) * rot_mul, s = sinpi(t) * rot_mul;
        kr[i0] = x0 * c - x1 * s; /* rope.cl's rotation */
        kr[i1] = x0 * s + x1 * c;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* scores: RQ_GDKB keys x RQ_DM rows, rows past M idle */
    for (int t = lid; t < RQ_GDKB * RQ_DM; t += RQ_GDWG) {
        int jj = t % RQ_GDKB, m = t / RQ_GDKB, j = j0 + jj;
        if (m >= M || j >= Sk)
            continue;
        int g = m / Sq, i = m - g * Sq;
        int pj = use_kpos && !mrope ? kpos[kpos_off + j] : k_base + j; /* M-RoPE: token order */
        int pi = use_qpos ? qpos[qpos_off + i] : q_base + i;
        float s = -INFINITY;
        if (!((causal && pj > pi) || (window > 0 && (long)pi - pj >= window))) {
            __global const float *q = qr + ((long)bk * M + m) * RQ_DMAXD;
            __local const float *kr = ks + jj * RQ_GDSTRIDE;
            float acc = 0.0f;
            for (int d = 0; d < D; d++)
                acc = fma(q[d], kr[d], acc);
            /* soft-capping (Gemma 2) */
            s = softcap > 0.0f ? RQ_SOFTCAP(acc, softcap, 1.0f / softcap) : acc;
        }
        long o = out_off + (long)b * onb0 + (long)(hk * G + g) * onb1 + (long)i * onb2 + (long)j * onb3;
        *(__global float *)(out + o) = s;
    }
}

/* RQ_GDECODE_LOCAL_BYTES (contract.h) counts this array, for the host's checks */
#define RQ_GDECODE_KERNEL(NAME, DT)                                                                \
    __kernel __attribute__((reqd_work_group_size(RQ_GDWG, 1, 1)))                                  \
    void NAME(__global const uchar *k, __global const int *kpos, __global const float4 *vfreq,      \
              __global const float *ctab, __global const float *qr, __global const int *qpos,      \
              __global uchar *out, rq_decode_args a)                                               \
    {                                                                                              \
        __local float ks[RQ_GDKB * RQ_GDSTRIDE];                                                   \
        (void)ctab; /* the CPU kernel's rotation table: same arguments, unused here */             \
        rq_decode_gpu(k, kpos, vfreq, qr, qpos, out, a, (DT), ks);                                 \
    }

RQ_GDECODE_KERNEL(qk_decode_gpu_f32, RQ_DT_F32)
RQ_GDECODE_KERNEL(qk_decode_gpu_f16, RQ_DT_F16)
RQ_GDECODE_KERNEL(qk_decode_gpu_bf16, RQ_DT_BF16)
