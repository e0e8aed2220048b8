/* Paged decode pass 1 in the CPU shape (paged_attn_cpu), included by cl/paged.cl after its helpers. */
/* ---- pass 1, CPU shape ---------------------------------------------------------------------------
 * Vectors run along the head dim (K and V rows are contiguous there): 16 dims per float16. For each
 * key of a block, the rotation vectors of its position (scores.cl's rq_rot_vectors: accurate angles of
 * 16 frequencies at a time, in lane form) are made once and applied to the key's row in every KV head
 * of the task; each (key, query head) dot product is one float16 of products, summed by halving. The
 * block's 16 scores of a head then form one float16 across keys for the softmax.
 * Row groups: the query rows of one sequence (a speculative step, a short ragged run) that share its
 * page list are one task's rows (meta[rg_off + grp] .. meta[rg_off + grp + 1], at most RQ_PCH
 * (row, head) pairs with the head group): each key is read, converted and rotated once for all of
 * them, each row keeping its own position, key count, masks, softmax state and output.
 * Non-finite data (docs/conventions.md section 9): a masked (row, key)'s weight is -0.0 (exp never gives
 * -0), and in a block where some row masks some key (a row group's causal cuts, a window's edge: the
 * flag `mixed`) P.V selects those products away (0 * NaN is NaN: a masked key's V may hold anything);
 * other blocks keep the plain fma. An unmasked score that is not finite becomes NaN before
 * soft-capping: a row that sees such a key ends with l = NaN (O and LSE NaN after the reduction).
 * Host preconditions: D % 16 == 0, R % 32 == 0, D <= RQ_DMAXD, Dv <= RQ_DMAXD (else the host runs the
 * GPU shape).
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

/* fma(p, v, acc) unless p is -0.0, a masked key's weight (its V may be NaN, and 0 * NaN is NaN) */
#define RQ_PSEL_FMA(p, v, acc) (as_uint(p) == 0x80000000u ? (acc) : fma((float16)(p), (v), (acc)))

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
    const int sp = get_global_id(0), gi = get_global_id(1), grp = get_global_id(2);
    const int r0 = meta[a.rg_off + grp], nrw = meta[a.rg_off + grp + 1] - r0;
    /* the group's rows: their key counts (the causal cut of each), positions; the longest decides
     * whether this split has keys at all */
    int rlen[RQ_PCH], rpq[RQ_PCH], len = 0, pqmax = INT_MIN, pqmin = INT_MAX;
    for (int w = 0; w < nrw; w++) {
        rlen[w] = meta[a.lens_off + r0 + w];
        rpq[w] = meta[a.qpos_off + r0 + w];
        len = max(len, rlen[w]);
        pqmax = max(pqmax, rpq[w]);
        pqmin = min(pqmin, rpq[w]);
    }
    const int jbeg = sp * a.kps;
    if (jbeg >= len)
        return; /* a split past every row's end: the reduction does not read it */
    const int jend = (int)min((long)len, (long)jbeg + a.kps);
    const int kp0 = meta[a.kpos_off + r0]; /* the sequence's: the same for the group's rows */
    __global const int *pages = meta + a.pages_off + meta[r0];
    const int Hq = a.Hq, G = a.G, D = a.D, Dv = a.Dv, R = a.R, ps = a.ps, layout = a.layout;
    const int causal = a.causal, nc = D / 16, hw = R / 32, nr = layout == 0 ? R / 16 : R / 32;
    const int c0 = a.rot_off / 16; /* the rotated chunks start at c0 (host: rot_off % 16 == 0) */
    const float softcap = a.softcap, inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
    const int kdt = a.kdt, vdt = a.vdt, esk = rq_dt_size(kdt), esv = rq_dt_size(vdt);
    const long window = a.window;
    int hk0, nkv, g0, ng;
    rq_paged_group(gi, a.Hkv, G, a.kvpg, a.ngc, a.gpg, &hk0, &nkv, &g0, &ng);
    const int nkh = nkv * ng; /* a row's heads: y * ng + g is query head (hk0 + y) * G + g0 + g */
    const int nh = nrw * nkh; /* task pair x = w * nkh + y * ng + g: row r0 + w */
    const long ostride = (long)a.nsplit * Dv; /* part rows of consecutive query heads */
    float fx[RQ_DMAXD / 2], fy[RQ_DMAXD / 2], fz[RQ_DMAXD / 2];
    for (int u = 0; u < R / 2; u++) {
        float4 f = vfreq[u];
        fx[u] = f.x, fy[u] = f.y, fz[u] = f.z;
    }
    /* R(t) for t = 0..RQ_PKB-1 (accurate angles, no attention factor): a key of a block gets
     * R(pfirst + t) = R(pfirst) R(t), one accurate R(pfirst) per block. Only the t a block of this
     * split uses: a split shorter than a block (a short row, a causal row's cut) makes fewer */
    float16 TC[RQ_PKB][RQ_DMAXD / 16], TS[RQ_PKB][RQ_DMAXD / 16];
    const int ntab = min(RQ_PKB, jend - jbeg);
    for (int t = 0; t < ntab; t++)
        rq_rot_vectors(t, fx, fy, fz, hw, layout, 1.0f, TC[t], TS[t]);
    float m[RQ_PCH], l[RQ_PCH], alpha[RQ_PCH], p[RQ_PCH * RQ_PKB], scs[RQ_PCH * RQ_PKB];
    /* O's first Dv / 16 * 16 dims per pair, written to part once at the end: kept in part across the
     * blocks, each vload16 / vstore16 of a float pointer compiled to 8 loads and 3 stores of parts of
     * the vector (pocl 3.1, LLVM 15), a sixth of pass 1's instructions (perf annotate of
     * ropeqk-bench --paged, f16 at 32k); private float16 elements are whole, aligned vectors */
    float16 oacc[RQ_PCH][RQ_DMAXD / 16];
    const int nvc = Dv / 16;
    for (int w = 0; w < nrw; w++)
        for (int y = 0; y < nkv; y++) {
            __global float *o = part + (((long)(r0 + w) * Hq + (long)(hk0 + y) * G + g0) * a.nsplit + sp) * Dv;
            for (int g = 0; g < ng; g++)
                for (int d = 0; d < Dv; d++)
                    o[g * ostride + d] = 0.0f;
        }
    for (int x = 0; x < nh; x++) {
        m[x] = -INFINITY;
        l[x] = 0.0f;
        for (int c = 0; c < nvc; c++)
            oacc[x][c] = (float16)(0.0f);
        vstore16((float16)(0.0f), 0, scs + x * RQ_PKB);
    }
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int jb = jbeg; jb < jend; jb += RQ_PKB) {
        int nb = min(RQ_PKB, jend - jb);
        int pfirst = kp0 + jb, plast = kp0 + jb + nb - 1;
        if ((causal && pfirst > pqmax) || (window > 0 && (long)pqmin - plast >= window))
            continue; /* every key of the block masked for every row (positions are consecutive) */
        long kro[RQ_PKB], vro[RQ_PKB], sro[RQ_PKB]; /* sro: the keys' scale index, KV head 0 */
        for (int t = 0; t < nb; t++) {
            int j = jb + t;
            long page = pages[j / ps], slot = j % ps;
            kro[t] = a.k_off + page * a.knb0 + slot * a.knb2;
            vro[t] = a.v_off + page * a.vnb0 + slot * a.vnb2;
            sro[t] = page * a.Hkv * ps + slot;
        }
        int16 pj = (int16)(pfirst) + lane;
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
                /* dot products two query heads at a time (each row's), even and odd chunks apart: four
                 * independent FMA chains (one chain is bound by the FMA latency) */
                for (int w = 0; w < nrw; w++) {
                    __global const float *q = qr + ((long)(r0 + w) * Hq + (long)(hk0 + y) * G + g0) * D;
                    const int xb = w * nkh + y * ng;
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
                        scs[(xb + g) * RQ_PKB + t] = rq_hsum16(a0 + b0);
                        if (g + 1 < ng)
                            scs[(xb + g + 1) * RQ_PKB + t] = rq_hsum16(a1 + b1);
                    }
                }
            }
        }
        /* online softmax: the block's max joins the running one; p = e^(S - m). Masks per row: lanes
         * past the block's end, keys past the row's own count (its causal cut) or position, outside
         * its window */
        int mixed = 0; /* some row masks some key of the block: P.V selects */
        for (int w = 0; w < nrw; w++) {
            const int pq = rpq[w];
            int16 masked = lane >= (int16)(nb) | (int16)(jb) + lane >= (int16)(rlen[w]);
            if (causal)
                masked |= pj > (int16)(pq);
            long lim = (long)pq - window; /* window: masked where pk <= pq - W */
            if (window > 0 && lim >= (long)INT_MIN)
                masked |= pj <= (int16)((int)lim);
            mixed |= any(masked & (lane < (int16)(nb)));
            for (int x = w * nkh; x < (w + 1) * nkh; x++) {
                float16 v = vload16(0, scs + x * RQ_PKB);
                v = select(v, (float16)(NAN), isinf(v)); /* -inf means masked only */
                if (softcap > 0.0f) /* soft-capping (Gemma 2), before the masks */
                    RQ_SOFTCAP_VEC(float16, v, softcap, inv_cap);
                v = select(v, (float16)(-INFINITY), masked);
                float mn = fmax(m[x], rq_hmax16(v));
                if (mn == -INFINITY) { /* nothing unmasked yet; a NaN score (fmax skips it) stays NaN */
                    float16 e = select((float16)(-0.0f), v, isnan(v));
                    alpha[x] = 1.0f;
                    l[x] += rq_hsum16(e);
                    vstore16(e, 0, p + x * RQ_PKB);
                    continue;
                }
                float16 e = select(exp(v - mn), (float16)(-0.0f), masked); /* -0.0: masked */
                alpha[x] = exp(m[x] - mn);
                l[x] = l[x] * alpha[x] + rq_hsum16(e);
                m[x] = mn;
                vstore16(e, 0, p + x * RQ_PKB);
            }
        }
        /* o = o * alpha + sum_t p[t] V[t], along V's dims: each V chunk loaded once for every row */
        for (int y = 0; y < nkv; y++) {
            long hb = (long)(hk0 + y) * a.vnb1, hs = (long)(hk0 + y) * ps; /* hs: the head's scales */
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
                for (int w = 0; w < nrw; w++)
                    for (int g = 0; g < ng; g += 2) {
                        int x0 = w * nkh + y * ng + g, x1 = w * nkh + y * ng + min(g + 1, ng - 1);
                        float16 a0 = oacc[x0][d / 16] * alpha[x0], a1 = oacc[x1][d / 16] * alpha[x1];
                        float16 b0 = (float16)(0.0f), b1 = b0;
                        if (mixed) {
#pragma unroll
                            for (int t = 0; t < RQ_PKB; t += 2) {
                                a0 = RQ_PSEL_FMA(p[x0 * RQ_PKB + t], vv[t], a0);
                                b0 = RQ_PSEL_FMA(p[x0 * RQ_PKB + t + 1], vv[t + 1], b0);
                                a1 = RQ_PSEL_FMA(p[x1 * RQ_PKB + t], vv[t], a1);
                                b1 = RQ_PSEL_FMA(p[x1 * RQ_PKB + t + 1], vv[t + 1], b1);
                            }
                        } else {
#pragma unroll
                            for (int t = 0; t < RQ_PKB; t += 2) {
                                a0 = fma((float16)(p[x0 * RQ_PKB + t]), vv[t], a0);
                                b0 = fma((float16)(p[x0 * RQ_PKB + t + 1]), vv[t + 1], b0);
                                a1 = fma((float16)(p[x1 * RQ_PKB + t]), vv[t], a1);
                                b1 = fma((float16)(p[x1 * RQ_PKB + t + 1]), vv[t + 1], b1);
                            }
                        }
                        oacc[x0][d / 16] = a0 + b0;
                        if (g + 1 < ng)
                            oacc[x1][d / 16] = a1 + b1;
                    }
            }
            for (; d < Dv; d++) { /* a tail of V dims, in part */
                float vs[RQ_PKB];
                for (int t = 0; t < nb; t++)
                    vs[t] = rq_load_dt(vc, vro[t] + hb + (long)d * esv, vdt) *
                            (vdt >= RQ_DT_I8 ? vsc[a.vs_off + sro[t] + hs] : 1.0f);
                for (int w = 0; w < nrw; w++) {
                    __global float *ob = part + (((long)(r0 + w) * Hq + (long)(hk0 + y) * G + g0) * a.nsplit + sp) * Dv;
                    for (int g = 0; g < ng; g++) {
                        int x = w * nkh + y * ng + g;
                        float acc = ob[g * ostride + d] * alpha[x];
                        for (int t = 0; t < nb; t++) /* -0.0: a masked key, not added */
                            acc = as_uint(p[x * RQ_PKB + t]) == 0x80000000u ? acc : fma(p[x * RQ_PKB + t], vs[t], acc);
                        ob[g * ostride + d] = acc;
                    }
                }
            }
        }
    }
    for (int w = 0; w < nrw; w++)
        for (int y = 0; y < nkv; y++)
            for (int g = 0; g < ng; g++) {
                const int x = w * nkh + y * ng + g;
                long row = ((long)(r0 + w) * Hq + (long)(hk0 + y) * G + g0 + g) * a.nsplit + sp;
                for (int c = 0; c < nvc; c++)
                    vstore16(oacc[x][c], c, part + row * Dv);
                part[a.ml_off + 2 * row] = m[x];
                part[a.ml_off + 2 * row + 1] = l[x];
            }
}
#endif
