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
 *                            LSE = M + ln L; a fully masked row gives O = 0, LSE = -inf.
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
 *   - CPU (paged_attn_cpu: the CPU profile, D % 16 == 0, R % 32 == 0, D <= RQ_DMAXD): a work-item per
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
 *     (read straight from the cache, coalesced, once per work-group). See the kernel. */

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

/* ---- pass 1, CPU shape ---------------------------------------------------------------------------
 * Vectors run along the head dim (K and V rows are contiguous there): 16 dims per float16. For each
 * key of a block, the rotation vectors of its position (scores.cl's rq_rot_vectors: accurate angles of
 * 16 frequencies at a time, in lane form) are made once and applied to the key's row in every KV head
 * of the task; each (key, query head) dot product is one float16 of products, summed by halving. The
 * block's 16 scores of a head then form one float16 across keys for the softmax.
 * Host preconditions: D % 16 == 0, R % 32 == 0, D <= RQ_DMAXD (else the host runs the GPU shape).
 * CPU profile only (program.cl: RQ_CPU_KERNELS). */
#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS
/* The head group of task gi (see contract.h): KV heads [*hk0, *hk0 + *nkv), query heads [*g0, *g0 + *ng)
 * of each (paged_attn_gpu has its own, kvpg 1 only). */
static inline void rq_paged_group(int gi, int Hkv, int G, int kvpg, int ngc, int gpg, int *hk0, int *nkv,
                                  int *g0, int *ng)
{
    if (ngc == 1) {
        *hk0 = gi * kvpg;
        *nkv = min(kvpg, Hkv - *hk0);
        *g0 = 0;
        *ng = G;
    } else {
        *hk0 = gi / ngc;
        *nkv = 1;
        *g0 = (gi % ngc) * gpg;
        *ng = min(gpg, G - *g0);
    }
}

static inline float rq_hmax16(float16 v)
{
    float8 a = fmax(v.lo, v.hi);
    float4 b = fmax(a.lo, a.hi);
    float2 c = fmax(b.lo, b.hi);
    return fmax(c.x, c.y);
}

static inline float rq_hsum16(float16 v)
{
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void paged_attn_cpu(__global const uchar *kc, __global const uchar *vc, __global const int *meta,
                    __global const float4 *vfreq, __global const float *qr, __global float *part,
                    __global const float *ksc, __global const float *vsc, rq_paged_args a)
{
    const int sp = get_global_id(0), gi = get_global_id(1), s = get_global_id(2);
    const int len = meta[a.lens_off + s];
    const int jbeg = sp * a.kps;
    if (jbeg >= len)
        return; /* a split past this sequence's end: the reduction does not read it */
    const int jend = (int)min((long)len, (long)jbeg + a.kps);
    const int pq = meta[a.qpos_off + s], kp0 = meta[a.kpos_off + s];
    __global const int *pages = meta + a.pages_off + meta[s];
    const int Hq = a.Hq, G = a.G, D = a.D, Dv = a.Dv, R = a.R, ps = a.ps, layout = a.layout;
    const int causal = a.causal, nc = D / 16, hw = R / 32, nr = layout == 0 ? R / 16 : R / 32;
    const int c0 = a.rot_off / 16; /* the rotated chunks start at c0 (host: rot_off % 16 == 0) */
    const float softcap = a.softcap, inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
    const int kdt = a.kdt, vdt = a.vdt, esk = rq_dt_size(kdt), esv = rq_dt_size(vdt);
    const long window = a.window;
    int hk0, nkv, g0, ng;
    rq_paged_group(gi, a.Hkv, G, a.kvpg, a.ngc, a.gpg, &hk0, &nkv, &g0, &ng);
    const int nh = nkv * ng;                  /* task head x = y * ng + g: query head (hk0 + y) * G + g0 + g */
    const long ostride = (long)a.nsplit * Dv; /* part rows of consecutive query heads */
    float fx[RQ_DMAXD / 2], fy[RQ_DMAXD / 2], fz[RQ_DMAXD / 2];
    for (int u = 0; u < R / 2; u++) {
        float4 f = vfreq[u];
        fx[u] = f.x, fy[u] = f.y, fz[u] = f.z;
    }
    /* R(t) for t = 0..RQ_PKB-1 (accurate angles, no attention factor): a key of a block gets
     * R(pfirst + t) = R(pfirst) R(t), one accurate R(pfirst) per block */
    float16 TC[RQ_PKB][RQ_DMAXD / 16], TS[RQ_PKB][RQ_DMAXD / 16];
    for (int t = 0; t < RQ_PKB; t++)
        rq_rot_vectors(t, fx, fy, fz, hw, layout, 1.0f, TC[t], TS[t]);
    float m[RQ_PCH], l[RQ_PCH], alpha[RQ_PCH], p[RQ_PCH * RQ_PKB], scs[RQ_PCH * RQ_PKB];
    for (int y = 0; y < nkv; y++) {
        __global float *o = part + (((long)s * Hq + (long)(hk0 + y) * G + g0) * a.nsplit + sp) * Dv;
        for (int g = 0; g < ng; g++)
            for (int d = 0; d < Dv; d++)
                o[g * ostride + d] = 0.0f;
    }
    for (int x = 0; x < nh; x++) {
        m[x] = -INFINITY;
        l[x] = 0.0f;
        vstore16((float16)(0.0f), 0, scs + x * RQ_PKB);
    }
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int jb = jbeg; jb < jend; jb += RQ_PKB) {
        int nb = min(RQ_PKB, jend - jb);
        int pfirst = kp0 + jb, plast = kp0 + jb + nb - 1;
        if ((causal && pfirst > pq) || (window > 0 && (long)pq - plast >= window))
            continue; /* every key of the block masked (positions are consecutive) */
        long kro[RQ_PKB], vro[RQ_PKB], sro[RQ_PKB]; /* sro: the keys' scale index, KV head 0 */
        for (int t = 0; t < nb; t++) {
            int j = jb + t;
            long page = pages[j / ps], slot = j % ps;
            kro[t] = a.k_off + page * a.knb0 + slot * a.knb2;
            vro[t] = a.v_off + page * a.vnb0 + slot * a.vnb2;
            sro[t] = page * a.Hkv * ps + slot;
        }
        int16 pj = (int16)(pfirst) + lane;
        int16 masked = lane >= (int16)(nb); /* lanes past the block's end: never counted */
        if (causal)
            masked |= pj > (int16)(pq);
        long lim = (long)pq - window; /* window: masked where pk <= pq - W */
        if (window > 0 && lim >= (long)INT_MIN)
            masked |= pj <= (int16)((int)lim);
        float16 PC[RQ_DMAXD / 16], PS[RQ_DMAXD / 16];
        rq_rot_vectors(pfirst, fx, fy, fz, hw, layout, a.rot_mul, PC, PS);
        for (int t = 0; t < nb; t++) {
            /* key t of the next block, K and V rows, into the caches while this block is computed
             * (pocl; the hardware prefetcher alone restarts at every page). Issued head by head in
             * the loop below, between the heads' arithmetic: one burst of all the task's rows per
             * key filled the line-fill buffers and stalled the core on the prefetches themselves
             * (a quarter of pass 1's samples), with no arithmetic overlapping them. */
            int jn = jb + RQ_PKB + t;
            const bool pf = RQ_PAGED_PF && jn < jend;
            __global const uchar *kpf = kc, *vpf = vc;
            if (pf) {
                long page = pages[jn / ps], slot = jn % ps;
                kpf = kc + a.k_off + page * a.knb0 + slot * a.knb2;
                vpf = vc + a.v_off + page * a.vnb0 + slot * a.vnb2;
            }
            float16 C[RQ_DMAXD / 16], S[RQ_DMAXD / 16], xk[RQ_DMAXD / 16];
            for (int c = 0; c < nr; c++) { /* R(pfirst) R(t) */
                float16 tc = TC[t][c], ts = TS[t][c];
                C[c] = PC[c] * tc - PS[c] * ts;
                S[c] = fma(PS[c], tc, PC[c] * ts);
            }
            for (int y = 0; y < nkv; y++) {
                if (pf) {
                    RQ_PAGED_PREFETCH_ROW(kpf + (long)(hk0 + y) * a.knb1, D * esk);
                    RQ_PAGED_PREFETCH_ROW(vpf + (long)(hk0 + y) * a.vnb1, Dv * esv);
                }
                __global const uchar *row = kc + kro[t] + (long)(hk0 + y) * a.knb1;
                if (kdt == RQ_DT_F32)
                    for (int c = 0; c < nc; c++)
                        xk[c] = RQ_LD16_F32(row, c);
                else if (kdt == RQ_DT_F16)
                    for (int c = 0; c < nc; c++)
                        xk[c] = RQ_LD16_F16(row, c);
                else if (kdt == RQ_DT_BF16)
                    for (int c = 0; c < nc; c++)
                        xk[c] = RQ_LD16_BF16(row, c);
                else { /* 8-bit: q * the row's scale, then rotated as any key */
                    float ks = ksc[a.ks_off + sro[t] + (long)(hk0 + y) * ps];
                    for (int c = 0; c < nc; c++)
                        xk[c] = rq_ld16_q8(row, c, kdt) * ks;
                }
                if (layout == 0) {
                    for (int c = 0; c < nr; c++)
                        xk[c0 + c] = fma(xk[c0 + c], C[c], RQ_SWAP2(xk[c0 + c]) * S[c]);
                } else {
                    for (int c = 0; c < nr; c++) {
                        float16 x0 = xk[c0 + c], x1 = xk[c0 + c + hw];
                        xk[c0 + c] = x0 * C[c] - x1 * S[c];
                        xk[c0 + c + hw] = fma(x0, S[c], x1 * C[c]);
                    }
                }
                /* dot products two query heads at a time, even and odd chunks apart: four independent
                 * FMA chains (one chain is bound by the FMA latency) */
                __global const float *q = qr + ((long)s * Hq + (long)(hk0 + y) * G + g0) * D;
                for (int g = 0; g < ng; g += 2) {
                    __global const float *q0 = q + g * D, *q1 = q + min(g + 1, ng - 1) * D;
                    float16 a0 = (float16)(0.0f), b0 = a0, a1 = a0, b1 = a0;
                    int c = 0;
                    for (; c + 2 <= nc; c += 2) {
                        a0 = fma(vload16(c, q0), xk[c], a0);
                        b0 = fma(vload16(c + 1, q0), xk[c + 1], b0);
                        a1 = fma(vload16(c, q1), xk[c], a1);
                        b1 = fma(vload16(c + 1, q1), xk[c + 1], b1);
                    }
                    if (c < nc) {
                        a0 = fma(vload16(c, q0), xk[c], a0);
                        a1 = fma(vload16(c, q1), xk[c], a1);
                    }
                    scs[(y * ng + g) * RQ_PKB + t] = rq_hsum16(a0 + b0);
                    if (g + 1 < ng)
                        scs[(y * ng + g + 1) * RQ_PKB + t] = rq_hsum16(a1 + b1);
                }
            }
        }
        /* online softmax: the block's max joins the running one; p = e^(S - m) */
        for (int x = 0; x < nh; x++) {
            float16 v = vload16(0, scs + x * RQ_PKB);
            if (softcap > 0.0f) /* soft-capping (Gemma 2), before the masks */
                RQ_SOFTCAP_VEC(float16, v, softcap, inv_cap);
            v = select(v, (float16)(-INFINITY), masked);
            float mn = fmax(m[x], rq_hmax16(v));
            if (mn == -INFINITY) { /* nothing unmasked yet */
                alpha[x] = 1.0f;
                vstore16((float16)(0.0f), 0, p + x * RQ_PKB);
                continue;
            }
            float16 e = exp(v - mn);
            alpha[x] = exp(m[x] - mn);
            l[x] = l[x] * alpha[x] + rq_hsum16(e);
            m[x] = mn;
            vstore16(e, 0, p + x * RQ_PKB);
        }
        /* o = o * alpha + sum_t p[t] V[t], along V's dims */
        for (int y = 0; y < nkv; y++) {
            long hb = (long)(hk0 + y) * a.vnb1, hs = (long)(hk0 + y) * ps; /* hs: the head's scales */
            __global float *ob = part + (((long)s * Hq + (long)(hk0 + y) * G + g0) * a.nsplit + sp) * Dv;
            int d = 0;
            for (; d + 16 <= Dv; d += 16) {
                float16 vv[RQ_PKB]; /* rows past the block's end: 0 (their p is 0 too) */
                if (vdt == RQ_DT_F32)
                    for (int t = 0; t < nb; t++)
                        vv[t] = RQ_LD16_F32(vc + vro[t] + hb, d / 16);
                else if (vdt == RQ_DT_F16)
                    for (int t = 0; t < nb; t++)
                        vv[t] = RQ_LD16_F16(vc + vro[t] + hb, d / 16);
                else if (vdt == RQ_DT_BF16)
                    for (int t = 0; t < nb; t++)
                        vv[t] = RQ_LD16_BF16(vc + vro[t] + hb, d / 16);
                else
                    for (int t = 0; t < nb; t++)
                        vv[t] = rq_ld16_q8(vc + vro[t] + hb, d / 16, vdt) * vsc[a.vs_off + sro[t] + hs];
                for (int t = nb; t < RQ_PKB; t++)
                    vv[t] = (float16)(0.0f);
                /* two query heads at a time, even and odd keys apart: four independent FMA chains */
                for (int g = 0; g < ng; g += 2) {
                    int x0 = y * ng + g, x1 = y * ng + min(g + 1, ng - 1);
                    __global float *o0 = ob + g * ostride + d, *o1 = ob + min(g + 1, ng - 1) * ostride + d;
                    float16 a0 = vload16(0, o0) * alpha[x0], a1 = vload16(0, o1) * alpha[x1];
                    float16 b0 = (float16)(0.0f), b1 = b0;
#pragma unroll
                    for (int t = 0; t < RQ_PKB; t += 2) {
                        a0 = fma((float16)(p[x0 * RQ_PKB + t]), vv[t], a0);
                        b0 = fma((float16)(p[x0 * RQ_PKB + t + 1]), vv[t + 1], b0);
                        a1 = fma((float16)(p[x1 * RQ_PKB + t]), vv[t], a1);
                        b1 = fma((float16)(p[x1 * RQ_PKB + t + 1]), vv[t + 1], b1);
                    }
                    vstore16(a0 + b0, 0, o0);
                    if (g + 1 < ng)
                        vstore16(a1 + b1, 0, o1);
                }
            }
            for (; d < Dv; d++) { /* a tail of V dims */
                float vs[RQ_PKB];
                for (int t = 0; t < nb; t++)
                    vs[t] = rq_load_dt(vc, vro[t] + hb + (long)d * esv, vdt) *
                            (vdt >= RQ_DT_I8 ? vsc[a.vs_off + sro[t] + hs] : 1.0f);
                for (int g = 0; g < ng; g++) {
                    int x = y * ng + g;
                    float acc = ob[g * ostride + d] * alpha[x];
                    for (int t = 0; t < nb; t++)
                        acc = fma(p[x * RQ_PKB + t], vs[t], acc);
                    ob[g * ostride + d] = acc;
                }
            }
        }
    }
    for (int y = 0; y < nkv; y++)
        for (int g = 0; g < ng; g++) {
            long row = ((long)s * Hq + (long)(hk0 + y) * G + g0 + g) * a.nsplit + sp;
            part[a.ml_off + 2 * row] = m[y * ng + g];
            part[a.ml_off + 2 * row + 1] = l[y * ng + g];
        }
}
#endif

/* ---- pass 1, GPU shape ---------------------------------------------------------------------------
 * A work-group of wg work-items (the host's choice, src/opencl/paged.c: 128, 256 where Dv > 128, fewer
 * where the device runs fewer; any power of two works) per task (split, KV head + chunk of up to
 * RQ_PGH of its query heads, sequence) and chunk of V dims (ndvc chunks of dvch dims; one chunk unless
 * Dv > wg * RQ_PVT). GQA: each K and V element of the split is read once for all the task's query
 * heads.
 * Per tile of RQ_PTK keys:
 *   1. the tile's K and V row offsets and the keys' biases (0, or -inf for a key masked or past the
 *      split's end: never read), the tile's scores set to the biases;
 *   2. per stage of at most RQ_PDC head dims (32 rotation pairs at a time, then the pass-through
 *      dims 64 at a time, whatever D): the K tile's stage is read coalesced (consecutive work-items,
 *      consecutive pairs of a key row), rotated with the key's own position k_pos0 + j (angle.cl's
 *      accurate angle) and stored as f32 in local memory; the query heads' dims are in local memory
 *      too (all of them, staged once, for D <= RQ_PQD; else the stage's, each time); then
 *      RQ_PTK * RQ_PSQ scorer slots (a key and two of its heads) add the stage's dot products to the
 *      tile's scores in local memory;
 *   3. the online softmax: per (key, head) p = e^(S - m_new) into local memory; the running max and
 *      sum of each head live in local memory (a work-item per head updates them);
 *   4. P.V: a work-item owns RQ_PVT dims (lane + i * W, W = wg / kq) of the chunk for every query
 *      head of the task, over the tile's keys of its key lane (every kq-th key; kq > 1 only where Dv
 *      leaves work-items idle): V is read straight from the cache, coalesced along its dims, each
 *      element once per work-group, by the one work-item that uses it (staging it through local
 *      memory would add a store, a barrier and a load with no reuse), RQ_PUN keys a round with
 *      their loads issued together; the key lanes' partial outputs are summed in local memory at
 *      the end.
 * Every index into a private array is a constant (unrolled loops over heads and dims), so nothing lives
 * on a stack; the scores of a key are in local memory between stages, not in registers (tests/gpucc:
 * sm_90 96 registers, gfx90a 78 VGPRs). Branches around barriers depend on work-group-uniform values
 * only. Local memory: RQ_PAGED_LOCAL_BYTES (19 KiB), whatever D, Dv and G. */

/* The K tile's stages (step 2 below): stage st < nrs holds rotation pairs st * RQ_PDC / 2 + c / 2
 * (slot c: the pair's first dim for even c, its second for odd c), the others the pass-through dims
 * R + (st - nrs) * RQ_PDC + c. rq_paged_stage_dims: the stage's slots in use; rq_paged_qdim: slot
 * c's head dim. */
static inline int rq_paged_stage_dims(int st, int nrs, int hr, int D, int R)
{
    return st < nrs ? 2 * min(RQ_PDC / 2, hr - st * (RQ_PDC / 2)) : min(RQ_PDC, D - R - (st - nrs) * RQ_PDC);
}

/* Pass-through dim k (0 .. D-R-1) of the dims outside [rot_off, rot_off + R), in order. */
static inline int rq_paged_ptdim(int k, int R, int rot_off)
{
    return k < rot_off ? k : k + R;
}

static inline int rq_paged_qdim(int st, int c, int nrs, int hr, int R, int layout, int rot_off)
{
    int u = st * (RQ_PDC / 2) + c / 2;
    return st >= nrs ? rq_paged_ptdim((st - nrs) * RQ_PDC + c, R, rot_off)
                     : rot_off + (layout ? u + (c & 1) * hr : 2 * u + (c & 1));
}

/* An element of a cache as (float)q or its value: 8-bit codes through the work-group's table. */
static inline float rq_paged_ld(__global const uchar *base, long off, int dt, __local const float *tab)
{
    return dt >= RQ_DT_I8 ? tab[base[off]] : rq_load_src(base, off, dt);
}

/* Whether key position pk is unmasked for query position pq: causal masks pk > pq, a window W > 0
 * masks pq - pk >= W. */
static inline bool rq_paged_key_ok(int pk, int pq, int causal, long window)
{
    return !((causal && pk > pq) || (window > 0 && (long)pq - pk >= window));
}

__kernel void paged_attn_gpu(__global const uchar *kc, __global const uchar *vc, __global const int *meta,
                             __global const float4 *vfreq, __global const float *qr, __global float *part,
                             __global const float *ksc, __global const float *vsc, rq_paged_args a)
{
    __local float kt[RQ_PTK * RQ_PKS];   /* the K tile's stage, rotated; at the end the key lanes' outputs */
    __local float qs[RQ_PGH * RQ_PQD];   /* the query heads' dims of every stage (or of the stage) */
    __local float sc[RQ_PGH * RQ_PTK];   /* the tile's scores */
    __local float pt[RQ_PGH * RQ_PTK];   /* e^(S - m) of the tile */
    __local float kb[RQ_PTK];            /* 0, or -inf for a key masked or past the end */
    __local float ksl[RQ_PTK], vsl[RQ_PTK]; /* the keys' K and V scales (8-bit caches; else 1) */
    /* 8-bit caches: (float)q of every code, one table per cache. A local load per element keeps the
     * decode's selects out of the unrolled P.V loads (inline, they took sm_90 from 96 to 132
     * registers, tests/gpucc) */
    __local float kq8[256], vq8[256];
    __local long krow[RQ_PTK], vrow[RQ_PTK]; /* byte offsets of the tile's K and V rows (head included) */
    __local float mrun[RQ_PGH], lrun[RQ_PGH], mnew[RQ_PGH], alph[RQ_PGH]; /* running max and sum */
    const int lid = get_local_id(0), wg = get_local_size(0), sp = get_group_id(0);
    const int gd = get_global_id(1), s = get_global_id(2);
    const int gi = gd / a.ndvc, dvc = gd % a.ndvc;
    const int len = meta[a.lens_off + s];
    const int jbeg = sp * a.kps;
    if (jbeg >= len)
        return; /* the whole work-group: no barrier is skipped by part of it */
    const int jend = (int)min((long)len, (long)jbeg + a.kps);
    const int pq = meta[a.qpos_off + s], kp0 = meta[a.kpos_off + s];
    __global const int *pages = meta + a.pages_off + meta[s];
    const int Hq = a.Hq, G = a.G, D = a.D, Dv = a.Dv, R = a.R, hr = a.R / 2, ps = a.ps, layout = a.layout;
    const int causal = a.causal, kdt = a.kdt, vdt = a.vdt, esk = rq_dt_size(kdt), esv = rq_dt_size(vdt);
    const long window = a.window;
    const float rot_mul = a.rot_mul, softcap = a.softcap;
    const int rot_off = a.rot_off; /* rotated dims [rot_off, rot_off + R) */
    /* the head group: rq_paged_group's (CPU kernels only) with kvpg 1, as the host sets it here */
    const int hk0 = gi / a.ngc, g0 = (gi % a.ngc) * a.gpg, ng = min(a.gpg, G - g0);
    const long hk_k = a.k_off + (long)hk0 * a.knb1, hk_v = a.v_off + (long)hk0 * a.vnb1;
    __global const float *q = qr + ((long)s * Hq + (long)hk0 * G + g0) * D;
    /* P.V: this work-item's dims lane + i * W of the chunk [dvb, dvb + dvn), keys klane + kq * n */
    const int kq = a.kq, W = wg / kq, lane = lid % W, klane = lid / W;
    const int dvb = dvc * a.dvch, dvn = min(a.dvch, Dv - dvb);
    /* stages of the K tile: nrs of rotation pairs, then the pass-through dims */
    const int nrs = (hr + RQ_PDC / 2 - 1) / (RQ_PDC / 2), nst = nrs + (D - R + RQ_PDC - 1) / RQ_PDC;
    float acc[RQ_PGH][RQ_PVT];
#pragma unroll
    for (int g = 0; g < RQ_PGH; g++) {
#pragma unroll
        for (int i = 0; i < RQ_PVT; i++)
            acc[g][i] = 0.0f;
    }
    /* Q's dims in stage order, stage st at slots st * RQ_PDC + c, once for every tile where they fit
     * (D <= 256); else each stage stages its own */
    const bool qonce = nst * RQ_PDC <= RQ_PQD;
    if (qonce)
        for (int e = lid; e < RQ_PGH * RQ_PQD; e += wg) {
            int g = e / RQ_PQD, st = e % RQ_PQD / RQ_PDC, c = e % RQ_PDC;
            if (g < ng && st < nst && c < rq_paged_stage_dims(st, nrs, hr, D, R))
                qs[e] = q[g * D + rq_paged_qdim(st, c, nrs, hr, R, layout, rot_off)];
        }
    for (int g = lid; g < RQ_PGH; g += wg) {
        mrun[g] = -INFINITY;
        lrun[g] = 0.0f;
    }
    if (kdt >= RQ_DT_I8 || vdt >= RQ_DT_I8) /* uniform */
        for (int c = lid; c < 256; c += wg) {
            kq8[c] = kdt >= RQ_DT_I8 ? rq_q8_value((uint)c, kdt) : 0.0f;
            vq8[c] = vdt >= RQ_DT_I8 ? rq_q8_value((uint)c, vdt) : 0.0f;
        }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t0 = jbeg; t0 < jend; t0 += RQ_PTK) {
        const int nt = min(RQ_PTK, jend - t0);
        const int pfirst = kp0 + t0, plast = pfirst + nt - 1; /* no overflow: kp0 + len - 1 <= INT32_MAX */
        if ((causal && pfirst > pq) || (window > 0 && (long)pq - plast >= window))
            continue; /* uniform: every key of the tile masked (positions are consecutive) */
        /* 1. the scores start at the keys' biases; rows (the loop over t right before the barrier: see
         * the running sums) */
        for (int e = lid; e < RQ_PGH * RQ_PTK; e += wg) {
            int t = e % RQ_PTK;
            sc[e] = t < nt && rq_paged_key_ok(pfirst + t, pq, causal, window) ? 0.0f : -INFINITY;
        }
        for (int t = lid; t < RQ_PTK; t += wg) {
            bool ok = t < nt;
            if (ok) {
                int j = t0 + t;
                long page = pages[j / ps], slot = j % ps;
                krow[t] = hk_k + page * a.knb0 + slot * a.knb2;
                vrow[t] = hk_v + page * a.vnb0 + slot * a.vnb2;
                ok = rq_paged_key_ok(pfirst + t, pq, causal, window);
                long si = (page * a.Hkv + hk0) * ps + slot;
                ksl[t] = kdt >= RQ_DT_I8 ? ksc[a.ks_off + si] : 1.0f;
                vsl[t] = vdt >= RQ_DT_I8 ? vsc[a.vs_off + si] : 1.0f;
            }
            kb[t] = ok ? 0.0f : -INFINITY;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* 2. the stages: the rotated dims RQ_PDC / 2 pairs at a time ((i0, i1) of pair u at stage
         * slots 2uu, 2uu + 1), then the pass-through dims R..D-1 RQ_PDC at a time */
        for (int st = 0; st < nst; st++) {
            const bool rot = st < nrs;
            const int u0 = st * (RQ_PDC / 2), k0 = (st - nrs) * RQ_PDC; /* pass-through dims from k0 */
            const int nc = rq_paged_stage_dims(st, nrs, hr, D, R);
            if (!qonce) /* Q's dims of this stage */
                for (int e = lid; e < RQ_PGH * RQ_PDC; e += wg) {
                    int g = e / RQ_PDC, c = e % RQ_PDC;
                    if (g < ng && c < nc)
                        qs[g * RQ_PQD + c] = q[g * D + rq_paged_qdim(st, c, nrs, hr, R, layout, rot_off)];
                }
            if (rot) {
                for (int e = lid; e < RQ_PTK * (RQ_PDC / 2); e += wg) {
                    const int t = e / (RQ_PDC / 2), uu = e % (RQ_PDC / 2), u = u0 + uu;
                    if (2 * uu >= nc)
                        continue;
                    float y0 = 0.0f, y1 = 0.0f;
                    if (kb[t] == 0.0f) {
                        int pk = pfirst + t, plo = pk & 0xFFF;
                        float4 f = vfreq[u];
                        float th = rq_half_turns1((float)(pk - plo), (float)plo, f.x, f.y, f.z);
                        float cs = cospi(th) * rot_mul, sn = sinpi(th) * rot_mul;
                        long kr = krow[t];
                        int i0 = rot_off + (layout ? u : 2 * u), i1 = rot_off + (layout ? u + hr : 2 * u + 1);
                        float ks = ksl[t]; /* 1 unless 8-bit */
                        float x0 = rq_paged_ld(kc, kr + (long)i0 * esk, kdt, kq8) * ks;
                        float x1 = rq_paged_ld(kc, kr + (long)i1 * esk, kdt, kq8) * ks;
                        y0 = x0 * cs - x1 * sn;
                        y1 = x0 * sn + x1 * cs;
                    }
                    kt[t * RQ_PKS + 2 * uu] = y0;
                    kt[t * RQ_PKS + 2 * uu + 1] = y1;
                }
            } else {
                for (int e = lid; e < RQ_PTK * RQ_PDC; e += wg) {
                    const int t = e / RQ_PDC, c = e % RQ_PDC;
                    if (c < nc)
                        kt[t * RQ_PKS + c] =
                            kb[t] == 0.0f
                                ? rq_paged_ld(kc, krow[t] + (long)rq_paged_ptdim(k0 + c, R, rot_off) * esk, kdt, kq8) *
                                      ksl[t]
                                : 0.0f;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            /* slot (t, gq) adds key t's dot products with heads gq and gq + RQ_PSQ */
            for (int sl = lid; sl < RQ_PTK * RQ_PSQ; sl += wg) {
                const int t = sl % RQ_PTK, gq = sl / RQ_PTK;
                if (gq >= ng)
                    continue;
                const int kr0 = t * RQ_PKS, q0 = gq * RQ_PQD + (qonce ? st * RQ_PDC : 0), q1 = q0 + RQ_PSQ * RQ_PQD;
                float s0 = 0.0f, s1 = 0.0f;
                if (gq + RQ_PSQ < ng) {
                    for (int c = 0; c < nc; c++) {
                        float x = kt[kr0 + c];
                        s0 = fma(qs[q0 + c], x, s0);
                        s1 = fma(qs[q1 + c], x, s1);
                    }
                    sc[(gq + RQ_PSQ) * RQ_PTK + t] += s1;
                } else {
                    for (int c = 0; c < nc; c++)
                        s0 = fma(qs[q0 + c], kt[kr0 + c], s0);
                }
                sc[gq * RQ_PTK + t] += s0;
            }
            barrier(CLK_LOCAL_MEM_FENCE); /* before the next stage rewrites kt and qs */
        }
        /* soft-capping (Gemma 2) of the tile's finished scores, unmasked keys only (the masked stay
         * -inf): a pass of its own over the local scores (in the scorer slots' loop it took sm_90 from
         * 96 to 127 registers, tests/gpucc) */
        if (softcap > 0.0f) { /* uniform */
            for (int e = lid; e < RQ_PGH * RQ_PTK; e += wg)
                if (e / RQ_PTK < ng && kb[e % RQ_PTK] == 0.0f)
                    sc[e] = RQ_SOFTCAP(sc[e], softcap, 1.0f / softcap);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        /* 3. the online softmax: every slot of head g finds the same tile max (the same reads in the
         * same order), so no further barrier is needed before its e^(S - m); four chains over the
         * tile's RQ_PTK scores (-inf for the masked keys and those past the end), not unrolled (a
         * loop unrolled over the keys took sm_90 from 80 to 104 registers, tests/gpucc) */
        for (int sl = lid; sl < RQ_PTK * RQ_PSQ; sl += wg) {
            const int t = sl % RQ_PTK, gq = sl / RQ_PTK;
#pragma unroll 1
            for (int k = 0; k < 2; k++) {
                const int g = gq + k * RQ_PSQ;
                if (g >= ng)
                    break;
                __local const float *sg = sc + g * RQ_PTK;
                float m0 = sg[0], m1 = sg[1], m2 = sg[2], m3 = sg[3];
#pragma unroll 1
                for (int tt = 4; tt < RQ_PTK; tt += 4) {
                    m0 = fmax(m0, sg[tt]);
                    m1 = fmax(m1, sg[tt + 1]);
                    m2 = fmax(m2, sg[tt + 2]);
                    m3 = fmax(m3, sg[tt + 3]);
                }
                float mo = mrun[g], mn = fmax(mo, fmax(fmax(m0, m1), fmax(m2, m3)));
                bool none = mn == -INFINITY; /* nothing unmasked yet */
                pt[g * RQ_PTK + t] = none ? 0.0f : exp(sg[t] - mn);
                if (t == 0) {
                    mnew[g] = mn;
                    alph[g] = none ? 1.0f : exp(mo - mn);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* pt, mnew, alph written; mrun read by every slot */
        /* 4. o = o * alpha + sum_t p[t] V[t] over this key lane's keys */
#pragma unroll
        for (int g = 0; g < RQ_PGH; g++) {
            if (g < ng) {
                float al = alph[g];
#pragma unroll
                for (int i = 0; i < RQ_PVT; i++)
                    acc[g][i] *= al;
            }
        }
        for (int tt0 = klane; tt0 < nt; tt0 += RQ_PUN * kq) { /* RQ_PUN keys a round, loads first */
            float v[RQ_PUN][RQ_PVT];
#pragma unroll
            for (int j = 0; j < RQ_PUN; j++) {
                const int tt = tt0 + j * kq;
                /* a masked key's p is 0 for every head: its row is not read */
                const bool ok = tt < nt && kb[tt] == 0.0f;
                const long vr = ok ? vrow[tt] + (long)dvb * esv : 0;
                const float vs = ok ? vsl[tt] : 0.0f; /* 1 unless 8-bit */
#pragma unroll
                for (int i = 0; i < RQ_PVT; i++) {
                    int d = lane + i * W;
                    v[j][i] = ok && d < dvn ? rq_paged_ld(vc, vr + (long)d * esv, vdt, vq8) * vs : 0.0f;
                }
            }
#pragma unroll
            for (int j = 0; j < RQ_PUN; j++) {
                const int tt = tt0 + j * kq;
                if (tt >= nt)
                    break;
#pragma unroll
                for (int g = 0; g < RQ_PGH; g++) {
                    if (g < ng) {
                        float p = pt[g * RQ_PTK + tt];
#pragma unroll
                        for (int i = 0; i < RQ_PVT; i++)
                            acc[g][i] = fma(p, v[j][i], acc[g][i]);
                    }
                }
            }
        }
        /* the running sums, a work-item per head. Right before the barrier: with code between a branch
         * on the work-item whose condition is the same in every tile (here lid < ng) and the next
         * barrier, pocl 3.1 ran the branch for every work-item of the group when work-item 0 took it
         * (lrun[lid] written by all 128; oclgrind was clean) */
        for (int g = lid; g < ng; g += wg) {
            __local const float *pg = pt + g * RQ_PTK; /* 0 past the tile's end */
            float s0 = pg[0], s1 = pg[1], s2 = pg[2], s3 = pg[3];
#pragma unroll 1
            for (int tt = 4; tt < RQ_PTK; tt += 4) {
                s0 += pg[tt];
                s1 += pg[tt + 1];
                s2 += pg[tt + 2];
                s3 += pg[tt + 3];
            }
            lrun[g] = lrun[g] * alph[g] + ((s0 + s1) + (s2 + s3));
            mrun[g] = mnew[g];
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* before the next tile rewrites the rows, biases, scores and pt */
    }
    /* the key lanes' partial outputs, summed into lane 0 (kt is free: its last readers passed a
     * barrier; kq is 1 for Dv > wg / 2 and nothing is stored or added then) */
    if (klane > 0) {
#pragma unroll
        for (int g = 0; g < RQ_PGH; g++) {
#pragma unroll
            for (int i = 0; i < RQ_PVT; i++)
                kt[(((klane - 1) * RQ_PGH + g) * RQ_PVT + i) * W + lane] = acc[g][i];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (klane == 0) {
        for (int r = 0; r < kq - 1; r++) {
#pragma unroll
            for (int g = 0; g < RQ_PGH; g++) {
#pragma unroll
                for (int i = 0; i < RQ_PVT; i++)
                    acc[g][i] += kt[((r * RQ_PGH + g) * RQ_PVT + i) * W + lane];
            }
        }
    }
    long row0 = ((long)s * Hq + (long)hk0 * G + g0) * a.nsplit + sp;
#pragma unroll
    for (int g = 0; g < RQ_PGH; g++) {
        if (g < ng) {
            long row = row0 + (long)g * a.nsplit;
            if (klane == 0) {
#pragma unroll
                for (int i = 0; i < RQ_PVT; i++) {
                    int d = lane + i * W;
                    if (d < dvn)
                        part[row * Dv + dvb + d] = acc[g][i];
                }
            }
            if (lid == 0 && dvc == 0) {
                part[a.ml_off + 2 * row] = mrun[g];
                part[a.ml_off + 2 * row + 1] = lrun[g];
            }
        }
    }
}

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
    if (M != -INFINITY)
        for (int i = 0; i < nsp; i++) {
            float w = exp(ml[2 * i] - M); /* 0 for a split with nothing unmasked */
            L = fma(ml[2 * i + 1], w, L);
            o = fma(part[(r0 + i) * a.Dv + dv], w, o);
        }
    rq_store_dt(out, a.out_off + ob + (long)h * a.onb1 + (long)dv * a.onb3, a.odt,
                M == -INFINITY ? 0.0f : o / L);
    if (a.use_lse && dv == 0)
        *(__global float *)(lse + a.lse_off + lb + (long)h * a.lnb1) =
            M == -INFINITY ? -INFINITY : M + log(L);
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

/* ---- gather: token t of the sequence of metadata row a.row -> dense row [t][hk] (BSHD), 2-byte
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
