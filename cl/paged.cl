/* Decode attention over a paged, unrotated KV cache (ROPEQK_OP_PAGED_DECODE): split-K
 * flash-decoding in three kernels, plus the cache append.
 *
 *   rope_rotate_* (rope.cl)  Q [s][h][D] -> qr, rotated with q_pos[s] and multiplied by the scale
 *                            (the host describes the sequences as the rows of one head batch).
 *   paged_attn_{cpu,gpu}     pass 1: a task per (split of the pages, head group, sequence). Each key
 *                            is read unrotated from its page, rotated with its own position
 *                            k_pos0[s] + j (angle.cl's accurate angle: half-turns from the three-float
 *                            frequency split, exact mod-2 reductions, sinpi/cospi), scored against the
 *                            group's query heads, and folded into a running softmax (max m, sum l) and
 *                            an f32 output accumulator. The task writes its unnormalised output and
 *                            (m, l) into the scratch `part`.
 *   paged_combine            pass 2: per (sequence, query head) row, the splits are joined:
 *                            M = max m_i, L = sum l_i e^(m_i - M), O = sum o_i e^(m_i - M) / L,
 *                            LSE = M + ln L; a fully masked row gives O = 0, LSE = -inf, and a row
 *                            whose splits carry a NaN sum (a non-finite key seen) NaN in both.
 *   paged_append             copies new K or V rows into their pages (no rotation).
 *
 * The argument structs and constants are in contract.h; the per-call metadata buffer (page lists,
 * lengths, positions) is described there too. Masks are by position: causal where pk > pq, window
 * where pq - pk >= W. Cache slots past a sequence's length are never read (they may hold anything).
 * Model-family variants (docs/conventions.md section 11): soft-capping of each unmasked score before
 * the softmax (pass 1), the rotary offset (pass 1's rotated dims [rot_off, rot_off + R): the CPU shape
 * for offsets that are multiples of 16, chunks shifted; the GPU shape maps its stages' dims), sinks
 * joined once, in pass 2 (a split of logit s_h and value 0 with a sum of 1: a fully masked row gives
 * O = 0, LSE = s_h). M-RoPE is refused at plan creation (a cached key carries one position).
 * Storage types are kernel arguments (RQ_DT_*), not build variants: every branch on them is uniform,
 * and hoisted out of the inner loops by hand where it matters; one kernel per shape keeps the program
 * small and pocl's first-call compilation short.
 *
 * Two shapes of pass 1 (the host picks):
 *   - CPU (paged_attn_cpu: the CPU profile, D % 16 == 0, R % 32 == 0, D and Dv <= RQ_DMAXD): a work-item per
 *     task; explicit SIMD along the head dim (float16 row loads); the rotation vectors of a key are
 *     made once and serve every KV head and query head of the task (a task spans several KV heads, up
 *     to RQ_PCH query heads): R(pfirst) R(t) for key t of a block starting at position pfirst, one
 *     accurate angle per block and a per-task table of R(0..RQ_PKB-1) (accurate angles too; the
 *     product adds a few ulp, as in the decode kernel's R(p0) R(t)); a block of RQ_PKB = 16 keys is scored, then folded into the softmax as
 *     one float16 per head; the output accumulator lives in the task's own rows of `part`
 *     (cache-resident), so Dv has no limit.
 *   - GPU (paged_attn_gpu: the GPU profile, and the CPU profile's other shapes): a work-group per
 *     (split, KV head and up to RQ_PGH of its query heads, sequence[, chunk of V dims where Dv > 256]);
 *     tiles of RQ_PTK keys staged through local memory (K read coalesced and rotated on its way in,
 *     in stages of RQ_PDC dims), the scores of all the group's heads from the staged tile, the online
 *     softmax state per head in local memory, and P.V with V's dims spread over the work-items
 *     (read straight from the cache, coalesced, once per work-group). See the kernel.
 *   - fast (paged_attn_fast, cl/paged_fast.cl: the GPU profile, for the shapes it takes, see there):
 *     tiles of 128 keys with two barriers each, a work-item per key scoring all the group's query
 *     vectors (query heads x a sequence's rows) in registers, keys rotated from a table and per-tile
 *     anchors, P.V with work-items owning 4 vectors x 8 dims. */

#include "contract.h"
#include "angle.cl"
#include "load.cl"
#include "quant.cl" /* 8-bit caches: element decode, the append's quantizer */
#include "variants.cl" /* RQ_SOFTCAP */
#include "scores.cl" /* rq_rot_vectors, the 16-lane permutes and row loads of the decode kernel */

/* one angle per work-item; also defined by rope.cl (GPU form), decode_gpu.cl and paged.cl, whichever comes first in the
 * program (both may be in it, or either alone) */
#ifndef RQ_HALF_TURNS1
#define RQ_HALF_TURNS1
RQ_DEFINE_HALF_TURNS(rq_half_turns1, float)
#endif

/* ---- helpers ----------------------------------------------------------------------------------- */

static inline int rq_dt_size(int dt)
{
    return dt == RQ_DT_F32 ? 4 : dt >= RQ_DT_I8 ? 1 : 2;
}

#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS /* paged_attn_cpu's (the GPU shape has rq_paged_ld) */
/* One element of any storage type at a byte offset (8-bit: (float)q, the caller applies the scale). */
static inline float rq_load_dt(__global const uchar *base, long off, int dt)
{
    return dt >= RQ_DT_I8 ? rq_load_q8(base, off, dt) : rq_load_src(base, off, dt);
}
#endif

/* Software prefetch of a row's cache lines: pocl only (RQ_POCL_EXT, see scores.cl); elsewhere the
 * loop that would issue them is compiled out (RQ_PAGED_PF 0). */
#if defined(RQ_POCL_EXT) && RQ_POCL_EXT
#define RQ_PAGED_PF 1
#define RQ_PAGED_PREFETCH_ROW(row, bytes)                                                          \
    for (int o_ = 0; o_ < (bytes); o_ += 64)                                                       \
    RQ_PREFETCH((row) + o_)
#else
#define RQ_PAGED_PF 0
#define RQ_PAGED_PREFETCH_ROW(row, bytes) ((void)(row), (void)(bytes))
#endif

/* pass 1: the CPU shape (CPU-profile programs only) and the GPU shape, a file each */
#include "paged_cpu.cl"
#include "paged_gpu.cl"
#include "paged_fast.cl" /* the GPU profile's pass 1 at memory speed (GPU-profile programs only) */

/* ---- pass 2: the reduction of the splits ----------------------------------------------------------
 * A work-item per (V dim, row = s * Hq + h). Splits from ceil(len / kps) on were not written. */

/* out in f32, f16 (round to nearest even) or bf16 (round to nearest even; NaN stays a quiet NaN) */
static inline void rq_store_dt(__global uchar *base, long off, int dt, float x)
{
    if (dt == RQ_DT_F16) {
        vstore_half_rte(x, 0, (__global half *)(base + off));
    } else if (dt == RQ_DT_BF16) {
        uint u = as_uint(x);
        ushort b = isnan(x) ? (ushort)((u >> 16) | 0x40u) : (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        *(__global ushort *)(base + off) = b;
    } else {
        *(__global float *)(base + off) = x;
    }
}

__kernel __attribute__((reqd_work_group_size(RQ_PCWG, 1, 1)))
void paged_combine(__global const float *part, __global const int *meta, __global uchar *out, __global uchar *lse,
                   __global const float *sinks, rq_pcomb_args a)
{
    const int dv = get_global_id(0), row = get_global_id(1);
    if (dv >= a.Dv || row >= a.rows)
        return;
    const int s = row / a.Hq, h = row % a.Hq;
    const long ob = (long)(s % a.nbat) * a.onb0 + (long)(s / a.nbat) * a.onb2;
    const long lb = (long)(s % a.nbat) * a.lnb0 + (long)(s / a.nbat) * a.lnb2;
    const int nsp = (int)(((long)meta[a.lens_off + s] + a.kps - 1) / a.kps);
    const long r0 = (long)row * a.nsplit;
    __global const float *ml = part + a.ml_off + 2 * r0;
    /* a sink (gpt-oss) joins the denominator once, here: a split of logit s_h and value 0 with a sum
     * of 1 (so a fully masked row gives O = 0, LSE = s_h) */
    const float sink = a.use_sinks ? sinks[h] : -INFINITY;
    float M = sink;
    for (int i = 0; i < nsp; i++)
        M = fmax(M, ml[2 * i]);
    float L = a.use_sinks ? exp(sink - M) : 0.0f, o = 0.0f;
    for (int i = 0; i < nsp; i++) {
        /* 0 for a split with nothing unmasked; where no split has (M = -inf) every l and o is 0, or
         * NaN from a non-finite key seen (its weight skipped by the max): summed as they are */
        float w = M == -INFINITY ? 1.0f : exp(ml[2 * i] - M);
        L = fma(ml[2 * i + 1], w, L);
        o = fma(part[(r0 + i) * a.Dv + dv], w, o);
    }
    /* L = 0: fully masked (O = 0, LSE = -inf); NaN: a non-finite key seen (both NaN) */
    rq_store_dt(out, a.out_off + ob + (long)h * a.onb1 + (long)dv * a.onb3, a.odt, L == 0.0f ? 0.0f : o / L);
    if (a.use_lse && dv == 0)
        *(__global float *)(lse + a.lse_off + lb + (long)h * a.lnb1) = L == 0.0f ? -INFINITY : M + log(L);
}

/* ---- append: row [s][hk][t] of src -> token lens[s] + t of sequence s, in 2-byte units --------- */
__kernel __attribute__((reqd_work_group_size(RQ_PCWG, 1, 1)))
void paged_append(__global const uchar *src, __global const int *meta, __global uchar *dst, rq_papp_args a)
{
    const int u = get_global_id(0), t = get_global_id(1), sh = get_global_id(2);
    if (u >= a.units)
        return;
    const int s = sh / a.Hkv, hk = sh % a.Hkv;
    const int tok = meta[a.lens_off + s] + t;
    const long page = meta[a.pages_off + meta[s] + tok / a.ps], slot = tok % a.ps;
    ushort v = *(__global const ushort *)(src + a.src_off + (long)s * a.snb0 + (long)hk * a.snb1 +
                                          (long)t * a.snb2 + 2L * u);
    *(__global ushort *)(dst + a.dst_off + page * a.dnb0 + (long)hk * a.dnb1 + slot * a.dnb2 + 2L * u) = v;
}

/* ---- gather: token t of the sequence of metadata row a.row -> dense row (hk, t) at hk * dnb1 + t * dnb2
 * (the host writes BHSD rows, src/opencl/cl_paged_chunk.c), 2-byte
 * units, eight per work-item (vload8: 16 bytes in flight; a work-item per unit made pocl launch a
 * work-group per 64 units, and the gather of a 2.5k-token chunk cost more than its attention) ---- */
__kernel __attribute__((reqd_work_group_size(RQ_PCWG, 1, 1)))
void paged_gather(__global const uchar *src, __global const int *meta, __global uchar *dst, rq_pgat_args a)
{
    const int per = (a.units + 7) / 8;
    const long i = get_global_id(0), rowi = i / per;
    if (rowi >= (long)a.len * a.Hkv)
        return;
    const int t = (int)(rowi / a.Hkv), hk = (int)(rowi % a.Hkv), u0 = (int)(i % per) * 8;
    const long page = meta[a.pages_off + meta[a.row] + t / a.ps], slot = t % a.ps;
    __global const ushort *s = (__global const ushort *)(src + a.src_off + page * a.snb0 + (long)hk * a.snb1 +
                                                          slot * a.snb2) + u0;
    __global ushort *d = (__global ushort *)(dst + (long)hk * a.dnb1 + (long)t * a.dnb2) + u0;
    if (u0 + 8 <= a.units)
        vstore8(vload8(0, s), 0, d);
    else
        for (int u = 0; u < a.units - u0; u++)
            d[u] = s[u];
}
