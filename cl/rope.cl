/* RoPE pass: rotates every row of Q or K once and writes it, as f32, into a packed scratch layout
 * chosen by the caller through element strides (Q: [bh][row][d], pre-multiplied by the score scale;
 * K: [bh][d][row], transposed so that the score kernel's loads along keys are contiguous).
 *
 * One work-item per (row, unit): a unit is a rotary pair (u < R/2) or a pass-through dim. The
 * work-item loops over all B*H heads, so each (position, frequency) cos/sin pair is computed once
 * and reused by every head: RoPE costs O(S*R) angle evaluations, never one per score.
 * Needs angle.cl and load.cl before it. */

#define RQ_ROTATE_KERNEL(NAME, LOAD)                                                               \
__kernel void NAME(__global const uchar *src, long src_off, long nb0, long nb1, long nb2, long nb3,  \
                   int H, int BH, int S, int D, int R, int layout,                                 \
                   __global const int *pos, long pos_off, int use_pos, int pos_base,                             \
                   __global const float4 *vfreq, float rot_mul, float out_mul,                     \
                   __global float *dst, long d_bh, long d_row, long d_dim)                         \
{                                                                                                  \
    int row = get_global_id(0);                                                                    \
    int unit = get_global_id(1);                                                                   \
    if (row >= S)                                                                                  \
        return;                                                                                    \
    int half_r = R / 2;                                                                            \
    long rbase = src_off + (long)row * nb2;                                                        \
    __global float *o = dst + (long)row * d_row;                                                   \
    if (unit >= half_r) { /* pass-through dim: copy (times the scale for Q) */                     \
        int d = R + (unit - half_r);                                                               \
        for (int bh = 0; bh < BH; bh++) {                                                          \
            long off = rbase + (long)(bh / H) * nb0 + (long)(bh % H) * nb1 + (long)d * nb3;        \
            o[bh * d_bh + d * d_dim] = LOAD(src, off) * out_mul;                                   \
        }                                                                                          \
        return;                                                                                    \
    }                                                                                              \
    int p = use_pos ? pos[pos_off + row] : pos_base + row;                                                   \
    float2 cs = rq_cossin(p, vfreq[unit], rot_mul);                                                \
    int i0 = layout ? unit : 2 * unit;                                                             \
    int i1 = layout ? unit + half_r : 2 * unit + 1;                                                \
    for (int bh = 0; bh < BH; bh++) {                                                              \
        long hb = rbase + (long)(bh / H) * nb0 + (long)(bh % H) * nb1;                             \
        float x0 = LOAD(src, hb + (long)i0 * nb3);                                                 \
        float x1 = LOAD(src, hb + (long)i1 * nb3);                                                 \
        o[bh * d_bh + i0 * d_dim] = (x0 * cs.x - x1 * cs.y) * out_mul;                             \
        o[bh * d_bh + i1 * d_dim] = (x0 * cs.y + x1 * cs.x) * out_mul;                             \
    }                                                                                              \
}

RQ_ROTATE_KERNEL(rope_rotate_f32, rq_load_f32)
RQ_ROTATE_KERNEL(rope_rotate_f16, rq_load_f16)
RQ_ROTATE_KERNEL(rope_rotate_bf16, rq_load_bf16)
