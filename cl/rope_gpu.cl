/* The RoPE pass in the GPU form (RQ_RUB == 1, the GPU profile): rope.cl's rope_rotate_* at memory
 * speed. Included by rope.cl, which defines the unit-to-dim maps and the kernel names.
 *
 * The form it replaces gave a work-item RQ_RV rows of one unit and looped over every head: 16384
 * work-items for K at S 4096 D 128 (6% of an H200's 270k resident threads), each a serial chain of
 * 512 dependent load-rotate-store steps, and its stores into Kt ([d][key]) were one dim per lane, a
 * warp's store touching 32 rows of Kt 4*ldk bytes apart. On the H200 the pass over Q and K at
 * attention S 4096 H 32 D 128 f32 took about 1.6 ms (issue 29's 4.3 ms "RoPE" also held the
 * first of the two query passes' attention kernel: 64 MiB of Qr plus the spare rows was one row over
 * the pass limit) for 256 MB that a copy kernel moves in 0.06 ms.
 *
 * This form: a work-group of RQ_RGX x RQ_RGY work-items (contract.h) takes a tile of RQ_RGX units x
 * RQ_RTR rows for RQ_RHC heads (the G query heads of a KV head are heads like any other here).
 * Work-item (lx, ly) takes unit lx of the tile and rows ly + k*RQ_RGY (k < RQ_RTR / RQ_RGY): it
 * computes those rows' angles once (angle.cl's accurate reduction, then sinpi/cospi) and reuses them
 * for the RQ_RHC heads. Loads run along units: a warp reads 32 consecutive pairs of one row
 * (interleaved: 256 contiguous bytes; half-split: two runs of 128). Stores:
 *   - d_dim == 1 (Qr [row][d], the decode's Qr): along units, like the loads;
 *   - otherwise (Kt [d][key], rows along d_row): the rotated tile goes through local memory
 *     (RQ_RGX x (RQ_RTR + 1) floats twice: odd row stride, no bank conflicts) and comes out
 *     transposed, work-item (lx, ly) writing row lx of units ly + j*RQ_RGY: a warp stores 32
 *     consecutive keys of one dim (128 bytes).
 * Parallelism: S 4096, 64 units, 32 heads: 128 x 2 x 8 = 2048 work-groups of 256 (524k work-items).
 * The angle costs about 100 instructions per (row, unit), spread over RQ_RHC heads: about 10 us of
 * the H200's issue rate for the whole K, where moving K in and Kt out takes 30 us at 4.3 TB/s.
 * Positions, M-RoPE streams, partial rotary and its offset, the layouts, the scale (out_mul) and the
 * attention factor (rot_mul) are rope.cl's; pass-through dims are copied times out_mul. */

#ifndef RQ_HALF_TURNS1 /* one angle per work-item; also defined by decode_gpu.cl and paged.cl */
#define RQ_HALF_TURNS1
RQ_DEFINE_HALF_TURNS(rq_half_turns1, float)
#endif

#define RQ_RTK (RQ_RTR / RQ_RGY) /* rows per work-item */
#define RQ_RTS (RQ_RTR + 1)      /* row stride of the transpose tile, floats */

/* Element offset of row r of head bh in dst (rq_rotate_args: blocks of G heads, optional panels). */
static inline long rq_rg_doff(int bh, int r, int S, int G, int panel, long d_bh, long d_row, long d_panel)
{
    int m = (bh % G) * S + r;
    long o = panel > 0 ? (long)(m / panel) * d_panel + (long)(m % panel) * d_row : (long)m * d_row;
    return (long)(bh / G) * d_bh + o;
}

#define RQ_ROTATE_KERNEL(NAME, LOAD)                                                               \
__kernel __attribute__((reqd_work_group_size(RQ_RGX, RQ_RGY, 1)))                                  \
void NAME(__global const uchar *src, __global const int *pos, __global const float4 *vfreq,         \
          __global float *dst, rq_rotate_args a)                                                   \
{                                                                                                  \
    __local float tr[2 * RQ_RGX * RQ_RTS]; /* [i0 or i1][unit][row] */                             \
    const long nb0 = a.nb0, nb1 = a.nb1, nb2 = a.nb2, nb3 = a.nb3;                                 \
    const int H = a.H, BH = a.BH, S = a.S, D = a.D, R = a.R, G = a.G, half_r = R / 2;              \
    const int units = half_r + (D - R), lx = get_local_id(0), ly = get_local_id(1);                \
    const int ubase = get_group_id(0) * RQ_RGX, unit = ubase + lx;                                 \
    const long nhc = (BH + RQ_RHC - 1) / RQ_RHC, gy = get_group_id(1);                             \
    const int hc = (int)(gy % nhc), row0 = (int)(gy / nhc) * RQ_RTR, bh0 = hc * RQ_RHC;            \
    const bool uok = unit < units, pt = unit >= half_r;                                            \
    const bool tpose = a.d_dim != 1; /* uniform: Kt (transposed through local memory) or rows */   \
    const int i0 = uok ? rq_unit_dim0(unit, half_r, R, a.rot_off, a.layout) : 0;                   \
    const int i1 = uok && !pt ? rq_unit_dim1(unit, half_r, a.rot_off, a.layout) : i0;              \
    /* this work-item's rows' cos and sin (times the attention factor): once for every head */    \
    float cs[RQ_RTK], sn[RQ_RTK];                                                                  \
    {                                                                                              \
        const float4 v = vfreq[uok && !pt ? unit : 0];                                             \
        const long po = a.pos_off + (long)(int)v.w * a.pos_stride; /* M-RoPE stream, else 0 */    \
        _Pragma("unroll") for (int k = 0; k < RQ_RTK; k++) {                                       \
            int r = min(row0 + ly + k * RQ_RGY, S - 1);                                            \
            int p = a.use_pos ? pos[po + r] : a.pos_base + r, lo = p & 0xFFF;                      \
            float t = rq_half_turns1((float)(p - lo), (float)lo, v.x, v.y, v.z);                   \
            cs[k] = cospi(t) * a.rot_mul;                                                          \
            sn[k] = sinpi(t) * a.rot_mul;                                                          \
        }                                                                                          \
    }                                                                                              \
    const float out_mul = a.out_mul;                                                               \
    for (int h = 0; h < RQ_RHC; h++) {                                                             \
        const int bh = bh0 + h;                                                                    \
        if (bh >= BH) /* uniform */                                                                \
            break;                                                                                 \
        const long hb = a.src_off + (long)(bh / H) * nb0 + (long)(bh % H) * nb1;                   \
        _Pragma("unroll") for (int k = 0; k < RQ_RTK; k++) {                                       \
            const int rr = ly + k * RQ_RGY, r = row0 + rr;                                         \
            float y0 = 0.0f, y1 = 0.0f;                                                            \
            if (uok && r < S) {                                                                    \
                const long ro = hb + (long)r * nb2;                                                \
                float x0 = LOAD(src, ro + (long)i0 * nb3), x1 = LOAD(src, ro + (long)i1 * nb3);    \
                y0 = x0 * out_mul; /* pass-through: copied (i1 == i0, y1 == y0) */                 \
                y1 = y0;                                                                           \
                if (!pt) {                                                                         \
                    y0 = (x0 * cs[k] - x1 * sn[k]) * out_mul;                                      \
                    y1 = (x0 * sn[k] + x1 * cs[k]) * out_mul;                                      \
                }                                                                                  \
                if (!tpose) {                                                                      \
                    __global float *o = dst + rq_rg_doff(bh, r, S, G, a.panel, a.d_bh, a.d_row, a.d_panel); \
                    o[i0] = y0;                                                                    \
                    o[i1] = y1;                                                                    \
                }                                                                                  \
            }                                                                                      \
            if (tpose) {                                                                           \
                tr[lx * RQ_RTS + rr] = y0;                                                         \
                tr[(RQ_RGX + lx) * RQ_RTS + rr] = y1;                                              \
            }                                                                                      \
        }                                                                                          \
        if (!tpose)                                                                                \
            continue;                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        /* transposed: row lx of the tile, units ly + j*RQ_RGY, consecutive rows along a warp */   \
        const int r = row0 + lx;                                                                   \
        if (r < S) {                                                                               \
            __global float *o = dst + rq_rg_doff(bh, r, S, G, a.panel, a.d_bh, a.d_row, a.d_panel); \
            for (int u = ly; u < RQ_RGX; u += RQ_RGY) {                                            \
                const int uu = ubase + u;                                                          \
                if (uu >= units)                                                                   \
                    break;                                                                         \
                const int j0 = rq_unit_dim0(uu, half_r, R, a.rot_off, a.layout);                   \
                o[(long)j0 * a.d_dim] = tr[u * RQ_RTS + lx];                                       \
                if (uu < half_r)                                                                   \
                    o[(long)rq_unit_dim1(uu, half_r, a.rot_off, a.layout) * a.d_dim] = tr[(RQ_RGX + u) * RQ_RTS + lx]; \
            }                                                                                      \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE); /* the next head overwrites the tile */                      \
    }                                                                                              \
}
