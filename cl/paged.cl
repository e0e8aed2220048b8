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
 *   - GPU (paged_attn_gpu: the GPU profile, and the CPU profile's other shapes): a work-group of
 *     RQ_PWG work-items per (split, KV head, up to RQ_PGH of its query heads, chunk of RQ_PWG*RQ_PVT
 *     V dims): a work-item scores one key of a tile of RQ_PWG keys (its angles shared by the group's
 *     query heads), the tile's max is a tree in local memory, then the work-items run along V's dims
 *     (coalesced) over the tile's keys. */

#include "contract.h"
#include "angle.cl"
#include "load.cl"
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
    return dt == RQ_DT_F32 ? 4 : 2;
}

/* One element of any storage type at a byte offset. */
static inline float rq_load_dt(__global const uchar *base, long off, int dt)
{
    return dt == RQ_DT_F16 ? rq_load_f16(base, off) : dt == RQ_DT_BF16 ? rq_load_bf16(base, off)
                                                                       : rq_load_f32(base, off);
}

/* The head group of task gi (see contract.h): KV heads [*hk0, *hk0 + *nkv), query heads [*g0, *g0 + *ng)
 * of each. */
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
                    __global const float4 *vfreq, __global const float *qr, __global float *part, rq_paged_args a)
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
        long kro[RQ_PKB], vro[RQ_PKB];
        for (int t = 0; t < nb; t++) {
            int j = jb + t;
            long page = pages[j / ps], slot = j % ps;
            kro[t] = a.k_off + page * a.knb0 + slot * a.knb2;
            vro[t] = a.v_off + page * a.vnb0 + slot * a.vnb2;
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
                else
                    for (int c = 0; c < nc; c++)
                        xk[c] = RQ_LD16_BF16(row, c);
                if (layout == 0) {
                    for (int c = 0; c < nr; c++)
                        xk[c] = fma(xk[c], C[c], RQ_SWAP2(xk[c]) * S[c]);
                } else {
                    for (int c = 0; c < nr; c++) {
                        float16 x0 = xk[c], x1 = xk[c + hw];
                        xk[c] = x0 * C[c] - x1 * S[c];
                        xk[c + hw] = fma(x0, S[c], x1 * C[c]);
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
            float16 v = select(vload16(0, scs + x * RQ_PKB), (float16)(-INFINITY), masked);
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
            long hb = (long)(hk0 + y) * a.vnb1;
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
                else
                    for (int t = 0; t < nb; t++)
                        vv[t] = RQ_LD16_BF16(vc + vro[t] + hb, d / 16);
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
                    vs[t] = rq_load_dt(vc, vro[t] + hb + (long)d * esv, vdt);
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

/* ---- pass 1, GPU shape --------------------------------------------------------------------------- */
__kernel __attribute__((reqd_work_group_size(RQ_PWG, 1, 1)))
void paged_attn_gpu(__global const uchar *kc, __global const uchar *vc, __global const int *meta,
                    __global const float4 *vfreq, __global const float *qr, __global float *part, rq_paged_args a)
{
    __local float red[RQ_PGH][RQ_PWG]; /* the tile's scores, then their max (tree) */
    __local float pt[RQ_PGH][RQ_PWG];  /* e^(S - m) of the tile */
    __local long vrow[RQ_PWG];         /* byte offset of each tile key's V row (head included) */
    __local float ml[2][RQ_PGH];       /* running max and sum of each query head (work-item 0's) */
    const int lid = get_local_id(0), sp = get_group_id(0);
    const int gd = get_global_id(1), s = get_global_id(2);
    const int gi = gd / a.ndvc, dvc = gd % a.ndvc;
    const int len = meta[a.lens_off + s];
    const int jbeg = sp * a.kps;
    if (jbeg >= len)
        return; /* the whole work-group: no barrier is skipped by part of it */
    const int jend = (int)min((long)len, (long)jbeg + a.kps);
    const int pq = meta[a.qpos_off + s], kp0 = meta[a.kpos_off + s];
    __global const int *pages = meta + a.pages_off + meta[s];
    const int Hq = a.Hq, G = a.G, D = a.D, Dv = a.Dv, R = a.R, ps = a.ps, layout = a.layout;
    const int causal = a.causal, kdt = a.kdt, vdt = a.vdt, esk = rq_dt_size(kdt), esv = rq_dt_size(vdt);
    const long window = a.window;
    const float rot_mul = a.rot_mul;
    int hk0, nkv, g0, ng;
    rq_paged_group(gi, a.Hkv, G, a.kvpg, a.ngc, a.gpg, &hk0, &nkv, &g0, &ng); /* nkv is 1 here */
    const long hk_k = (long)hk0 * a.knb1, hk_v = (long)hk0 * a.vnb1;
    __global const float *q = qr + ((long)s * Hq + (long)hk0 * G + g0) * D;
    const int dv0 = dvc * RQ_PWG * RQ_PVT + lid;
    /* The running max and sum live in local memory, written by work-item 0 only: in registers
     * they were 16 more for every work-item over the whole kernel (tests/gpucc) */
    float acc[RQ_PGH][RQ_PVT];
    if (lid == 0)
        for (int g = 0; g < RQ_PGH; g++) {
            ml[0][g] = -INFINITY;
            ml[1][g] = 0.0f;
        }
#pragma unroll
    for (int g = 0; g < RQ_PGH; g++) {
#pragma unroll
        for (int i = 0; i < RQ_PVT; i++)
            acc[g][i] = 0.0f;
    }
    for (int t0 = jbeg; t0 < jend; t0 += RQ_PWG) {
        int nt = min(RQ_PWG, jend - t0);
        int pfirst = kp0 + t0, plast = kp0 + t0 + nt - 1;
        if ((causal && pfirst > pq) || (window > 0 && (long)pq - plast >= window))
            continue; /* uniform: every work-item skips the tile */
        int j = t0 + min(lid, nt - 1);
        long page = pages[j / ps], slot = j % ps;
        long krow = a.k_off + page * a.knb0 + slot * a.knb2 + hk_k;
        vrow[lid] = a.v_off + page * a.vnb0 + slot * a.vnb2 + hk_v;
        int pk = kp0 + j;
        bool msk = lid >= nt || (causal && pk > pq) || (window > 0 && (long)pq - pk >= window);
        float sg[RQ_PGH];
        for (int g = 0; g < RQ_PGH; g++)
            sg[g] = 0.0f;
        if (!msk) {
            int plo = pk & 0xFFF;
            float fph = (float)(pk - plo), fpl = (float)plo;
            for (int u = 0; u < R / 2; u++) {
                float4 f = vfreq[u];
                float t = rq_half_turns1(fph, fpl, f.x, f.y, f.z);
                float c = cospi(t) * rot_mul, sn = sinpi(t) * rot_mul;
                int i0 = layout ? u : 2 * u, i1 = layout ? u + R / 2 : 2 * u + 1;
                float x0 = rq_load_dt(kc, krow + (long)i0 * esk, kdt);
                float x1 = rq_load_dt(kc, krow + (long)i1 * esk, kdt);
                float y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
                for (int g = 0; g < RQ_PGH; g++)
                    if (g < ng)
                        sg[g] = fma(q[g * D + i0], y0, fma(q[g * D + i1], y1, sg[g]));
            }
            for (int i = R; i < D; i++) { /* pass-through dims */
                float x0 = rq_load_dt(kc, krow + (long)i * esk, kdt);
                for (int g = 0; g < RQ_PGH; g++)
                    if (g < ng)
                        sg[g] = fma(q[g * D + i], x0, sg[g]);
            }
        }
        for (int g = 0; g < RQ_PGH; g++)
            red[g][lid] = msk ? -INFINITY : sg[g];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int st = RQ_PWG / 2; st > 0; st >>= 1) {
            if (lid < st) {
                for (int g = 0; g < RQ_PGH; g++)
                    red[g][lid] = fmax(red[g][lid], red[g][lid + st]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        /* Every index into acc is a constant (the loops over g and i are unrolled), so it stays in
         * registers: with the V loop outside the loop over keys, acc was indexed at run time and
         * lived on the stack (192 bytes on sm_90, tests/gpucc). */
#pragma unroll
        for (int g = 0; g < RQ_PGH; g++) {
            float mo = ml[0][g], mn = fmax(mo, red[g][0]);
            bool none = mn == -INFINITY; /* nothing unmasked yet */
            float alpha = none ? 1.0f : exp(mo - mn);
            pt[g][lid] = none || msk ? 0.0f : exp(sg[g] - mn);
#pragma unroll
            for (int i = 0; i < RQ_PVT; i++)
                acc[g][i] *= alpha;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* pt written, ml read by every work-item */
        for (int tt = 0; tt < nt; tt++) { /* per (g, i), the same chain of fma over the keys as before */
            float v[RQ_PVT]; /* dims past Dv: 0, never stored */
#pragma unroll
            for (int i = 0; i < RQ_PVT; i++) {
                int dv = dv0 + i * RQ_PWG;
                v[i] = dv < Dv ? rq_load_dt(vc, vrow[tt] + (long)dv * esv, vdt) : 0.0f;
            }
#pragma unroll
            for (int g = 0; g < RQ_PGH; g++) {
                float pv = pt[g][tt];
#pragma unroll
                for (int i = 0; i < RQ_PVT; i++)
                    acc[g][i] = fma(pv, v[i], acc[g][i]);
            }
        }
        if (lid == 0) /* the running max and sum, with the same alpha as above */
            for (int g = 0; g < RQ_PGH; g++) {
                float mo = ml[0][g], mn = fmax(mo, red[g][0]), psum = 0.0f;
                float alpha = mn == -INFINITY ? 1.0f : exp(mo - mn);
                for (int tt = 0; tt < nt; tt++)
                    psum += pt[g][tt];
                ml[1][g] = ml[1][g] * alpha + psum;
                ml[0][g] = mn;
            }
        barrier(CLK_LOCAL_MEM_FENCE); /* before the next tile rewrites red, pt and vrow */
    }
    long row0 = ((long)s * Hq + (long)hk0 * G + g0) * a.nsplit + sp;
#pragma unroll
    for (int g = 0; g < RQ_PGH; g++) {
        if (g < ng) {
            long row = row0 + (long)g * a.nsplit;
#pragma unroll
            for (int i = 0; i < RQ_PVT; i++) {
                int dv = dv0 + i * RQ_PWG;
                if (dv < Dv)
                    part[row * Dv + dv] = acc[g][i];
            }
            if (lid == 0 && dvc == 0) {
                part[a.ml_off + 2 * row] = ml[0][g];
                part[a.ml_off + 2 * row + 1] = ml[1][g];
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
                   rq_pcomb_args a)
{
    const int dv = get_global_id(0), row = get_global_id(1);
    if (dv >= a.Dv || row >= a.rows)
        return;
    const int s = row / a.Hq, h = row % a.Hq;
    const int nsp = (int)(((long)meta[a.lens_off + s] + a.kps - 1) / a.kps);
    const long r0 = (long)row * a.nsplit;
    __global const float *ml = part + a.ml_off + 2 * r0;
    float M = -INFINITY;
    for (int i = 0; i < nsp; i++)
        M = fmax(M, ml[2 * i]);
    float L = 0.0f, o = 0.0f;
    if (M != -INFINITY)
        for (int i = 0; i < nsp; i++) {
            float w = exp(ml[2 * i] - M); /* 0 for a split with nothing unmasked */
            L = fma(ml[2 * i + 1], w, L);
            o = fma(part[(r0 + i) * a.Dv + dv], w, o);
        }
    rq_store_dt(out, a.out_off + (long)s * a.onb0 + (long)h * a.onb1 + (long)dv * a.onb3, a.odt,
                M == -INFINITY ? 0.0f : o / L);
    if (a.use_lse && dv == 0)
        *(__global float *)(lse + a.lse_off + (long)s * a.lnb0 + (long)h * a.lnb1) =
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
