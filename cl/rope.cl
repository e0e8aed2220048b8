/* RoPE pass: rotates every row of Q or K once and writes it, as f32, into a packed scratch layout
 * chosen by the caller through element strides and panels (Q: [bh][row][d] or panels of rows,
 * pre-multiplied by the score scale; K: [bh][d][row] or panels of keys [bh][row/P][d][P],
 * transposed so that the score kernel's loads along keys are contiguous).
 *
 * One work-item per (RQ_RV rows, RQ_RUB units): a unit is a rotary pair (u < R/2) or a pass-through
 * dim. The work-item loops over all B*H heads, so each (position, frequency) cos/sin pair is computed
 * once and reused by every head: RoPE costs O(S*R) angle evaluations, never one per score. With
 * RQ_RUB = 16 (CPU profile) the work-item that brings a source line into L1 uses all of it; with one
 * unit per work-item each line came back 16 times, after the whole loop over heads. Prefill S=1024
 * D=128 f32 on the 2-core Xeon AVX-512, pocl 3.1: the pass took ~21 ms before, 11-14 ms with 16
 * units, the gather in registers, the prefetch below and one store per 16 rows of Q (panels).
 * Explicit SIMD across rows (floatRQ_RV): pocl does not vectorise across work-items when the kernel
 * holds a loop (the head loop), and its implicit vectorisation of a loop-free form (a work-item per
 * (row, unit, 8 heads), 8x the angles) also came out scalar. Work-groups span 16 units, so a group
 * uses whole cache lines of the source rows and of the scratch rows it writes.
 * Prefill S=2048 D=128 BH=32 f32 (bench/, device_ms - scores_ms, the 2-core EPYC dev machine): RoPE pass 224 ms
 * with fresh scratch per call, 74 ms with pooled scratch (ctx.c), 15 ms in this form (f16: 9 ms);
 * the loop-free form with 8 heads per work-item, 38 ms.
 * RQ_RV (rows per work-item, one zmm of floats) and the argument layout are in contract.h.
 * Model-family variants (docs/conventions.md section 11): the rotated dims are [rot_off, rot_off + R)
 * (rq_unit_dim0/1 map units to dims, the pass-through units to the dims around them), and under
 * M-RoPE each frequency rotates by the position of its stream (the .w of its vfreq entry), the arrays
 * then [3][pos_stride]. */

#include "contract.h"
#include "angle.cl"
#include "load.cl"

#ifndef RQ_RUB
#define RQ_RUB 1 /* units per work-item (the host's rq_rot_units) */
#endif

/* The 16 rows' elements at byte offset k from base b (row offsets o[]) as one vector, built in
 * registers: filling a private array and loading it as a vector stalled on store forwarding (38%
 * of the kernel's samples, 2-core Xeon AVX-512, pocl 3.1). With int offsets (o, k) LLVM emits one
 * 16-lane gather instead of four 8-lane gathers of 64-bit addresses. */
#define RQ_GATHER16(LOAD, b, o, k)                                                                 \
    (float16)(LOAD(b, o[0] + (k)), LOAD(b, o[1] + (k)), LOAD(b, o[2] + (k)), LOAD(b, o[3] + (k)),   \
              LOAD(b, o[4] + (k)), LOAD(b, o[5] + (k)), LOAD(b, o[6] + (k)), LOAD(b, o[7] + (k)),   \
              LOAD(b, o[8] + (k)), LOAD(b, o[9] + (k)), LOAD(b, o[10] + (k)), LOAD(b, o[11] + (k)), \
              LOAD(b, o[12] + (k)), LOAD(b, o[13] + (k)), LOAD(b, o[14] + (k)), LOAD(b, o[15] + (k)))

/* Software prefetch (pocl only, see RQ_POCL_EXT in scores.cl): the source lines of head bh + RQ_RPF
 * while head bh is rotated. The lines of one head (16 rows 512 B apart, heads 512 KiB apart at
 * S=1024 D=128) defeat the hardware prefetchers: without it, 60% of the kernel's samples sat on the
 * first gather of each head (2-core Xeon AVX-512, pocl 3.1). */
#if defined(RQ_POCL_EXT) && RQ_POCL_EXT
#define RQ_RPREFETCH(p) __builtin_prefetch(p)
#else
#define RQ_RPREFETCH(p) ((void)(p)) /* evaluated, so the offsets are used everywhere */
#endif
#define RQ_RPF 2

/* The dims of unit u (rq_rotate_args): a rotary pair u < R/2 at [rot_off, rot_off + R) (interleaved
 * (2u, 2u+1), half-split (u, u + R/2), shifted by rot_off), else pass-through dim k = u - R/2 of the
 * dims outside that range, in order (k < rot_off: k, else k + R). */
static inline int rq_unit_dim0(int u, int hr, int R, int rot_off, int layout)
{
    int k = u - hr;
    return u >= hr ? (k < rot_off ? k : k + R) : rot_off + (layout ? u : 2 * u);
}

static inline int rq_unit_dim1(int u, int hr, int rot_off, int layout) /* rotary units only */
{
    return rot_off + (layout ? u + hr : 2 * u + 1);
}

#if RQ_RUB == 1
/* One unit per work-item (the GPU profile, src/opencl/ocl.h rq_rot_units): the GPU form, tiles of
 * rows and units through local memory (rope_gpu.cl). */
#include "rope_gpu.cl"
#else
/* Several units per work-item (the CPU profile): explicit SIMD across RQ_RV rows. */
#ifndef RQ_HALF_TURNS16
#define RQ_HALF_TURNS16
RQ_DEFINE_HALF_TURNS(rq_half_turns16, float16)
#endif

/* cos and sin (times mul) of RQ_RV positions at one frequency (angle.cl's accurate angle). */
static inline void rq_cossin_rows(int16 p, float4 v, float mul, float16 *c, float16 *s)
{
    int16 lo = p & 0xFFF;
    float16 t = rq_half_turns16(convert_float16(p - lo), convert_float16(lo), (float16)(v.x), (float16)(v.y),
                                (float16)(v.z));
    *c = cospi(t) * mul;
    *s = sinpi(t) * mul;
}

#define RQ_ROTATE_KERNEL(NAME, LOAD)                                                               \
__kernel void NAME(__global const uchar *src, __global const int *pos, __global const float4 *vfreq, \
                   __global float *dst, rq_rotate_args a)                                          \
{                                                                                                  \
    const long src_off = a.src_off, nb0 = a.nb0, nb1 = a.nb1, nb2 = a.nb2, nb3 = a.nb3;            \
    const long pos_off = a.pos_off, d_bh = a.d_bh, d_row = a.d_row, d_dim = a.d_dim;               \
    const long d_panel = a.d_panel;                                                                \
    const int H = a.H, BH = a.BH, S = a.S, D = a.D, R = a.R, layout = a.layout, panel = a.panel;   \
    const int G = a.G;                                                                             \
    const int use_pos = a.use_pos, pos_base = a.pos_base, rot_off = a.rot_off;                     \
    const float rot_mul = a.rot_mul, out_mul = a.out_mul;                                          \
    int row0 = get_global_id(0) * RQ_RV;                                                           \
    int unit0 = get_global_id(1) * RQ_RUB;                                                         \
    int half_r = R / 2, nunit = min(RQ_RUB, half_r + (D - R) - unit0);                             \
    if (row0 >= S || nunit <= 0) /* units are padded to the group size */                          \
        return;                                                                                    \
    int nrow = min(RQ_RV, S - row0); /* lanes past S repeat the last row and store nothing */      \
    int pa[RQ_RV];                                                                                 \
    long roff[RQ_RV];                                                                              \
    int ioff[RQ_RV]; /* the same within a head, where a head's elements lie within 2 GiB */        \
    bool i32 = nb2 >= 0 && nb3 >= 0 && (long)(S - 1) * nb2 + (long)(D - 1) * nb3 + 4 <= (long)INT_MAX; \
    _Pragma("unroll") for (int l = 0; l < RQ_RV; l++) {                                            \
        int r = min(row0 + l, S - 1);                                                              \
        pa[l] = use_pos ? pos[pos_off + r] : pos_base + r;                                         \
        roff[l] = src_off + (long)r * nb2;                                                         \
        ioff[l] = i32 ? (int)((long)r * nb2) : 0;                                                  \
    }                                                                                              \
    float16 c[RQ_RUB], s[RQ_RUB]; /* of the rotary pairs; pass-through dims (unit >= R/2) are copied */ \
    for (int u = 0; u < nunit; u++) {                                                              \
        c[u] = (float16)(1.0f), s[u] = (float16)(0.0f);                                            \
        if (unit0 + u < half_r) {                                                                  \
            float4 v = vfreq[unit0 + u];                                                           \
            int16 p = vload16(0, pa);                                                              \
            if (use_pos && v.w != 0.0f) { /* M-RoPE: this frequency's stream of [3][pos_stride] */ \
                int t[RQ_RV];                                                                      \
                long so = pos_off + (long)(int)v.w * a.pos_stride;                                 \
                for (int l = 0; l < RQ_RV; l++)                                                    \
                    t[l] = pos[so + min(row0 + l, S - 1)];                                         \
                p = vload16(0, t);                                                                 \
            }                                                                                      \
            rq_cossin_rows(p, v, rot_mul, &c[u], &s[u]);                                           \
        }                                                                                          \
    }                                                                                              \
    /* RQ_RV consecutive elements: rows along d_row == 1, all in one panel (S, row0 multiples of RQ_RV) */ \
    bool vec_store = nrow == RQ_RV && d_row == 1 && panel % RQ_RV == 0 && (G == 1 || S % RQ_RV == 0); \
    /* first and last elements of the block: its rotary pairs span [e0, e1] and [e2, e3] (bytes) */ \
    int ul = unit0 + nunit - 1;                                                                    \
    long e0 = (long)rq_unit_dim0(unit0, half_r, R, rot_off, layout) * nb3;                         \
    long e1 = (long)(ul >= half_r ? rq_unit_dim0(ul, half_r, R, rot_off, layout)                   \
                                  : rq_unit_dim1(ul, half_r, rot_off, layout)) * nb3;              \
    long e2 = layout && unit0 < half_r ? e0 + (long)half_r * nb3 : e0;                             \
    long e3 = layout && ul < half_r ? (long)(rot_off + ul + half_r) * nb3 : e1;                    \
    for (int bh = 0; bh < BH; bh++) {                                                              \
        long hb = (long)(bh / H) * nb0 + (long)(bh % H) * nb1;                                     \
        __global float *o = dst + (long)(bh / G) * d_bh;                                           \
        if (bh + RQ_RPF < BH) {                                                                    \
            int bp = bh + RQ_RPF;                                                                  \
            long hp = (long)(bp / H) * nb0 + (long)(bp % H) * nb1;                                 \
            for (int l = 0; l < nrow; l++) {                                                       \
                RQ_RPREFETCH(src + roff[l] + hp + e0);                                             \
                RQ_RPREFETCH(src + roff[l] + hp + e1);                                             \
                RQ_RPREFETCH(src + roff[l] + hp + e2);                                             \
                RQ_RPREFETCH(src + roff[l] + hp + e3);                                             \
            }                                                                                      \
        }                                                                                          \
        long doff[RQ_RV]; /* destination rows (elements) */                                        \
        _Pragma("unroll") for (int l = 0; l < RQ_RV; l++) {                                        \
            int m = (bh % G) * S + min(row0 + l, S - 1);                                           \
            doff[l] = panel > 0 ? (long)(m / panel) * d_panel + (long)(m % panel) * d_row : (long)m * d_row; \
        }                                                                                          \
        for (int u = 0; u < nunit; u++) {                                                          \
            int unit = unit0 + u;                                                                  \
            bool pt = unit >= half_r;                                                              \
            int i0 = rq_unit_dim0(unit, half_r, R, rot_off, layout);                               \
            int i1 = pt ? i0 : rq_unit_dim1(unit, half_r, rot_off, layout);                        \
            float16 x0, x1;                                                                        \
            if (i32) {                                                                             \
                __global const uchar *hs = src + src_off + hb;                                     \
                x0 = RQ_GATHER16(LOAD, hs, ioff, (int)(i0 * nb3));                                 \
                x1 = RQ_GATHER16(LOAD, hs, ioff, (int)(i1 * nb3));                                 \
            } else { /* a head past 2 GiB: a plain loop (small code; pocl compiles it cold) */      \
                float a0[RQ_RV], a1[RQ_RV];                                                        \
                for (int l = 0; l < RQ_RV; l++) {                                                  \
                    a0[l] = LOAD(src, roff[l] + hb + (long)i0 * nb3);                              \
                    a1[l] = LOAD(src, roff[l] + hb + (long)i1 * nb3);                              \
                }                                                                                  \
                x0 = vload16(0, a0);                                                               \
                x1 = vload16(0, a1);                                                               \
            }                                                                                      \
            float16 y0 = x0 * out_mul, y1 = x1 * out_mul;                                          \
            if (!pt) {                                                                             \
                y0 = (x0 * c[u] - x1 * s[u]) * out_mul;                                            \
                y1 = (x0 * s[u] + x1 * c[u]) * out_mul;                                            \
            }                                                                                      \
            if (vec_store) { /* RQ_RV consecutive rows (keys into Kt, query rows into panels) */   \
                vstore16(y0, 0, o + doff[0] + (long)i0 * d_dim);                                   \
                vstore16(y1, 0, o + doff[0] + (long)i1 * d_dim); /* pass-through: i1 == i0, y1 == y0 */ \
            } else {                                                                               \
                float a0[RQ_RV], a1[RQ_RV];                                                        \
                vstore16(y0, 0, a0);                                                               \
                vstore16(y1, 0, a1);                                                               \
                for (int l = 0; l < nrow; l++) {                                                   \
                    o[doff[l] + (long)i0 * d_dim] = a0[l];                                         \
                    o[doff[l] + (long)i1 * d_dim] = a1[l];                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}

#endif

RQ_ROTATE_KERNEL(rope_rotate_f32, rq_load_f32)
RQ_ROTATE_KERNEL(rope_rotate_f16, rq_load_f16)
RQ_ROTATE_KERNEL(rope_rotate_bf16, rq_load_bf16)
