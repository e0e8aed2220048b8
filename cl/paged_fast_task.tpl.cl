/* rq template (cl/embed.py: included once per kernel): pass 1 of the paged decode at memory speed for at
 * most FM = RQ_FAST_FM query vectors, as kernel RQ_FAST_NAME; cl/paged_fast.cl has the design and the
 * helpers. The scores of a key live in FM registers, so a kernel for fewer of them holds fewer (sm_90:
 * 102 registers at FM 4, 121 at 8, 133 at 16; tests/gpucc). */
#define FM RQ_FAST_FM
/* block mb of this key's scores into its row of P, -inf for a masked (vector, key) */
#define RQ_FAST_STORE_SCORES(mb)                                                                   \
    pt4[t * pq4 + (mb)] = (float4)((mm >> (4 * (mb))) & 1u ? s[4 * (mb)] : -INFINITY,              \
                                   (mm >> (4 * (mb) + 1)) & 1u ? s[4 * (mb) + 1] : -INFINITY,      \
                                   (mm >> (4 * (mb) + 2)) & 1u ? s[4 * (mb) + 2] : -INFINITY,      \
                                   (mm >> (4 * (mb) + 3)) & 1u ? s[4 * (mb) + 3] : -INFINITY)
__kernel __attribute__((reqd_work_group_size(RQ_FWG, 1, 1)))
void RQ_FAST_NAME(__global const uint4 *kc, __global const uint4 *vc, __global const int *meta,
                  __global const float4 *vfreq, __global const float *qr, __global float *part,
                  __global const float *ksc, __global const float *vsc, __global const float4 *ftab,
                  rq_paged_args a)
{
    /* one float4 array, carved (RQ_FAST_LOCAL_F4): Q [M / 4][D slots] float4, the R(delta) table
     * [dr][R/4 + 1] float4 (two pairs each; rows padded by one float4, so that the lanes' reads of a
     * column fall in distinct banks), the anchors [RQ_FWG/dr][R/4] float4, P [key][RQ_FPT]; the table
     * and anchors hold the key lanes' partial outputs at the end */
    __local float4 lm4[RQ_FAST_LOCAL_F4];
    __local uint vrow[RQ_FWG];        /* each tile key's V row in 16-byte units; RQ_FAST_NOROW: not read */
    __local float vsl[RQ_FWG];        /* each tile key's V scale (8-bit V; else 1) */
    /* the running max per query vector, two buffers: the flagged path writes the new one into the
     * other and the two swap (cur), so no work-item writes it after the path's last barrier (pocl 3.1
     * ran a branch on the work-item id placed between a barrier and other code for every work-item:
     * see cl/paged_gpu.cl) */
    __local float4 mbuf4[2][RQ_FM / 4];
    int cur = 0;
    __local int pqs[RQ_FM];           /* the group's rows' positions */
    __local int flag[2];              /* a score above mref + RQ_FTHR in the tile (by tile parity) */
    __local int tci[RQ_FTC_N];        /* the task's values from the metadata (RQ_FTC_*) */
    __local float4 *qs4 = lm4, *tab4 = lm4 + RQ_FQF / 4, *anc4 = tab4 + RQ_FTB / 2;
    __local float4 *pt4 = anc4 + RQ_FAN / 2;
    __local float *red = (__local float *)tab4; /* the key lanes' partial outputs at the end */

    const int lid = get_local_id(0), sp = get_group_id(1);
    const int grp = get_group_id(0), gd = get_group_id(2);
    const int gi = gd / a.ndvc, dvc = gd % a.ndvc;
    const int hk = gi / a.ngc, g0 = (gi % a.ngc) * a.gpg, ng = min(a.gpg, a.G - g0);
    const int r0 = meta[a.rg_off + grp], nr = meta[a.rg_off + grp + 1] - r0;
    /* the group's longest row decides whether this split has keys (rows share the page list and k_pos0) */
    int len = 0, pqmin = INT_MAX, pqmax = INT_MIN;
#pragma unroll 1
    for (int ri = 0; ri < nr; ri++) {
        len = max(len, meta[a.lens_off + r0 + ri]);
        int pq = meta[a.qpos_off + r0 + ri];
        pqmin = min(pqmin, pq);
        pqmax = max(pqmax, pq);
    }
    const int jbeg = sp * a.kps;
    if (jbeg >= len)
        return; /* the whole work-group */
    const int Hq = a.Hq, G = a.G, D = a.D, R = a.R, ps = a.ps, kdt = a.kdt, vdt = a.vdt;
    const int causal = a.causal;
    const long window = a.window;
    const int r4 = R / 4, nru = R / 16, npt = (D - R) / 8;
    /* The task's values that come from the metadata, in local memory: read where a phase needs them
     * (a barrier ends every phase, so they are not held in registers across the tile loop; held, they
     * and what the compiler derived from them took sm_90 past 128 registers) */
    if (lid == 0) {
        tci[RQ_FTC_JEND] = (int)min((long)len, (long)jbeg + a.kps);
        tci[RQ_FTC_KP0] = meta[a.kpos_off + r0];
        tci[RQ_FTC_PQMIN] = pqmin;
        tci[RQ_FTC_PQMAX] = pqmax;
        tci[RQ_FTC_NR] = nr;
        tci[RQ_FTC_PAGES] = a.pages_off + meta[r0];
    }
    const int M0 = nr * ng, nmb0 = (M0 + 3) / 4;
    /* ---- once per work-group: Q, the table, the state ---- */
    for (int e = lid; e < D * 4 * nmb0; e += RQ_FWG) { /* [m / 4][slot][m % 4] */
        int j = e / 4 % D, m = e / (4 * D) * 4 + e % 4, ri = m / ng, g = m % ng;
        float x = 0.0f;
        if (m < M0)
            x = qr[((long)(r0 + ri) * Hq + (long)hk * G + g0 + g) * D + rq_fast_qdim(j, R, a.layout, a.rot_off)];
        ((__local float *)qs4)[e] = x;
    }
    for (int e = lid; e < (r4 + 1) * a.dr; e += RQ_FWG)
        tab4[e] = ftab[e];
    for (int m = lid; m < RQ_FM; m += RQ_FWG) {
        ((__local float *)mbuf4[0])[m] = -INFINITY;
        pqs[m] = m < nr ? meta[a.qpos_off + r0 + m] : 0;
    }
    if (lid < 2)
        flag[lid] = 0;
    float acc[RQ_FMH][RQ_FVD], lsum[RQ_FMH];
#pragma unroll
    for (int i = 0; i < RQ_FMH; i++) {
        lsum[i] = 0.0f;
#pragma unroll
        for (int d = 0; d < RQ_FVD; d++)
            acc[i][d] = 0.0f;
    }
    /* P.V: cells of RQ_FMH query vectors x RQ_FVD dims of the chunk [dvb, dvb + dvn); key lanes */
    const int dvb = dvc * a.dvch, dvn = min(a.dvch, a.Dv - dvb), ndc = dvn / RQ_FVD;
    if (lid == 0)
        tci[RQ_FTC_CELLS] = nmb0 * ndc;
/* This work-item's P.V cell (query vectors 4 hb.., V dims dvb + 4 dc..) and key lane kl of KL, made
 * anew after each barrier from a value in local memory (which no compiler may carry across it):
 * computed once and carried across barriers, pocl 3.1 gave every work-item work-item 0's key lane, and
 * every work-item ran the final kl == 0 branch (oclgrind was clean) */
#define RQ_FAST_CELL                                                                               \
    const int cells = tci[RQ_FTC_CELLS], KL = RQ_FWG / cells, kl = lid / cells, cell = lid % cells;      \
    const int hb = cell / ndc, dc = cell % ndc;                                                      \
    (void)hb, (void)dc /* not every use reads both; clang -Werror (tests/clc) */
    barrier(CLK_LOCAL_MEM_FENCE); /* the task's values */
    int par = 0;
    for (int t0 = jbeg; t0 < tci[RQ_FTC_JEND]; t0 += RQ_FWG) {
        const int nt = min(RQ_FWG, tci[RQ_FTC_JEND] - t0), kp0 = tci[RQ_FTC_KP0];
        const int pqmin = tci[RQ_FTC_PQMIN], pqmax = tci[RQ_FTC_PQMAX];
        const int pfirst = kp0 + t0, plast = pfirst + nt - 1; /* no overflow: kp0 + len - 1 <= INT32_MAX */
        if ((causal && pfirst > pqmax) || (window > 0 && (long)pqmin - plast >= window))
            continue; /* uniform: every key of the tile masked for every row */
        /* some key masked for some rows and not others: per-product selects in P.V */
        const bool mixed = (causal && plast > pqmin && pfirst <= pqmax) ||
                           (window > 0 && (long)pfirst <= (long)pqmax - window && (long)plast > (long)pqmin - window);
        /* B0's work: the anchors A_w = R(pfirst) R(w dr) (times the attention factor), a work-item per pair */
        if (lid < R / 2) {
            int plo = pfirst & 0xFFF;
            float4 f = vfreq[lid];
            float th = rq_half_turns1((float)(pfirst - plo), (float)plo, f.x, f.y, f.z);
            float ca = cospi(th) * a.rot_mul, sa = sinpi(th) * a.rot_mul;
            __local float2 *anc2 = (__local float2 *)anc4;
            const int dr = a.dr;
            __global const float2 *t2 = (__global const float2 *)(ftab + (r4 + 1) * dr);
            for (int ww = 0; ww < RQ_FWG / dr; ww++) {
                float2 tw = t2[ww * (R / 2) + lid];
                anc2[ww * (R / 2) + lid] = (float2)(ca * tw.x - sa * tw.y, sa * tw.x + ca * tw.y);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* B0 */

        /* ---- 1. scores: key t = lid ---- */
        const int t = lid, pk = pfirst + t, nr = tci[RQ_FTC_NR], M = nr * ng, nmb = (M + 3) / 4;
        const int pq4 = (4 * nmb) % 8 ? nmb : nmb + 1;
        const int dsh = 31 - clz(a.dr), w = lid >> dsh, delta = lid & (a.dr - 1); /* anchor w, offset delta */
        uint mm = 0; /* bit m: query vector m sees this key */
        if (t < nt)
            for (int ri = 0; ri < nr; ri++)
                if (rq_paged_key_ok(pk, pqs[ri], causal, window))
                    mm |= ((1u << ng) - 1u) << (ri * ng);
        float s[RQ_FM];  /* FM of them used */
#pragma unroll
        for (int m = 0; m < FM; m++)
            s[m] = 0.0f;
        uint vr = RQ_FAST_NOROW;
        float vs = 1.0f;
        if (mm) {
            const int j = t0 + t;
            const uint page = (uint)meta[tci[RQ_FTC_PAGES] + j / ps], slot = (uint)(j % ps);
            /* 16-byte units (uniform: from the arguments) */
            const uint kr = (uint)((a.k_off + (long)hk * a.knb1) >> 4) + page * (uint)(a.knb0 >> 4) +
                            slot * (uint)(a.knb2 >> 4);
            vr = (uint)((a.v_off + (long)hk * a.vnb1) >> 4) + page * (uint)(a.vnb0 >> 4) + slot * (uint)(a.vnb2 >> 4);
            const uint si = (page * (uint)a.Hkv + (uint)hk) * (uint)ps + slot; /* < the cache's rows */
            const float ks = kdt >= RQ_DT_I8 ? ksc[a.ks_off + (long)si] : 1.0f;
            vs = vdt >= RQ_DT_I8 ? vsc[a.vs_off + (long)si] : 1.0f;
            /* rotated units of 8 pairs: chunks (interleaved) 2u, 2u + 1 or (half-split) u, u + R/16 (two
             * units a round took sm_90 from 137 to 171 registers) */
            const int c0 = a.rot_off / 8, cstep = a.layout ? nru : 1, cmul = a.layout ? 1 : 2;
            __local const float4 *aw = anc4 + w * r4, *tw = tab4 + delta * (r4 + 1);
#pragma unroll 1
            for (int u = 0; u < nru; u++) {
                float8 xa = rq_fast_ld(kc, kr, c0 + cmul * u, kdt);
                float8 xb = rq_fast_ld(kc, kr, c0 + cmul * u + cstep, kdt);
                RQ_FAST_UNIT(u, xa, xb);
            }
            /* pass-through dims: [0, rot_off) then [rot_off + R, D), 8 at a time */
#pragma unroll 1
            for (int c = 0; c < npt; c++) {
                int d0 = c * 8 < a.rot_off ? c * 8 : c * 8 + R;
                float8 x = rq_fast_ld(kc, kr, d0 / 8, kdt);
                float xs[8];
                vstore8(x, 0, xs);
                RQ_FAST_DOT(xs, R + 8 * c, 8);
            }
#pragma unroll
            for (int m = 0; m < FM; m++) { /* 8-bit K: the row's scale, once per score; a score that is
                                            * not finite is NaN (docs/conventions.md section 9: -inf
                                            * means masked only, and soft-capping would make +-inf +-C) */
                s[m] *= ks;
                s[m] = isinf(s[m]) ? NAN : s[m];
            }
        }
        vrow[t] = vr;
        vsl[t] = vs;
        /* the scores (masked: -inf) into P's rows, then per vector in loops that are not unrolled (16
         * exps or soft-caps side by side took sm_90 past 200 registers): soft-capping, and P against
         * the running max (-0 marks a masked vector and key); the capped scores stay in s for the
         * flagged path */
        __local float *prow = (__local float *)(pt4 + t * pq4);
#pragma unroll
        for (int mb = 0; mb < FM / 4; mb++)
            if (mb < nmb)
                RQ_FAST_STORE_SCORES(mb);
        if (a.softcap > 0.0f) { /* uniform */
#pragma unroll 1
            for (int m = 0; m < M; m++)
                if ((mm >> m) & 1u)
                    prow[m] = RQ_SOFTCAP(prow[m], a.softcap, 1.0f / a.softcap);
#pragma unroll
            for (int m = 0; m < FM; m++)
                s[m] = m < M ? prow[m] : 0.0f;
        }
        bool up = false;
#pragma unroll 1
        for (int m = 0; m < M; m++) {
            const float e = prow[m] - ((__local float *)mbuf4[cur])[m];
            const bool ok = (mm >> m) & 1u;
            up = up || (ok && e > RQ_FTHR);
            prow[m] = ok ? exp(e) : -0.0f;
        }
        /* this tile's flag; and the next tile's cleared (its last readers passed this tile's B0, its
         * next writers come after the next B0), in one branch right before the barrier (pocl: see mbuf4) */
        if (up || lid == 0) {
            if (up)
                atomic_or(&flag[par], 1);
            if (lid == 0)
                flag[par ^ 1] = 0;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* B1 */
        if (flag[par]) { /* uniform: the flagged path */
#pragma unroll
            for (int mb = 0; mb < FM / 4; mb++)
                if (mb < nmb)
                    RQ_FAST_STORE_SCORES(mb);
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lid < M) {
                __local const float *pc = (__local const float *)pt4 + lid;
                float x0 = -INFINITY, x1 = -INFINITY, x2 = -INFINITY, x3 = -INFINITY;
#pragma unroll 2
                for (int tt = 0; tt < RQ_FWG; tt += 4) { /* not unrolled whole: 128 loads in flight */
                    x0 = fmax(x0, pc[(tt + 0) * 4 * pq4]);
                    x1 = fmax(x1, pc[(tt + 1) * 4 * pq4]);
                    x2 = fmax(x2, pc[(tt + 2) * 4 * pq4]);
                    x3 = fmax(x3, pc[(tt + 3) * 4 * pq4]);
                }
                __local float *mo = (__local float *)mbuf4[cur], *mn = (__local float *)mbuf4[cur ^ 1];
                mn[lid] = fmax(mo[lid], fmax(fmax(x0, x1), fmax(x2, x3)));
            }
            barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll 1
            for (int m = 0; m < M; m++)
                prow[m] = (mm >> m) & 1u ? exp(prow[m] - ((__local float *)mbuf4[cur ^ 1])[m]) : -0.0f;
            RQ_FAST_CELL;
            if (kl < KL) {
                float4 mo = mbuf4[cur][hb], mn = mbuf4[cur ^ 1][hb];
#pragma unroll
                for (int i = 0; i < RQ_FMH; i++) {
                    float o = ((float *)&mo)[i], n = ((float *)&mn)[i];
                    float al = o == n ? 1.0f : exp(o - n); /* m = -inf before: 0 */
                    lsum[i] *= al;
#pragma unroll
                    for (int d = 0; d < RQ_FVD; d++)
                        acc[i][d] *= al;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE); /* P complete; the old max's last readers done */
            cur ^= 1;
        }
        par ^= 1;

        /* ---- 2. P.V over this key lane's keys, 4 at a time (their loads together) ---- */
        RQ_FAST_CELL;
        if (kl < KL) {
            /* one instance with the tile's `mixed` a run-time value (two instances, selects only where
             * mixed, took gfx90a from 124 to 147 VGPRs, tests/gpucc; sm_90: 178 -> 218 instructions a
             * round of 4 keys) */
            RQ_FAST_PV(mixed);
        }
    }

    /* ---- the key lanes' partial outputs summed into lane 0, then written ---- */
    barrier(CLK_LOCAL_MEM_FENCE); /* the table and anchors are free */
    const int nred = RQ_FMH * RQ_FVD + RQ_FMH;
    {
        RQ_FAST_CELL;
        if (kl > 0 && kl < KL) {
            __local float *o = red + ((kl - 1) * cells + cell) * nred;
#pragma unroll
            for (int i = 0; i < RQ_FMH; i++) {
                o[RQ_FMH * RQ_FVD + i] = lsum[i];
#pragma unroll
                for (int d = 0; d < RQ_FVD; d++)
                    o[i * RQ_FVD + d] = acc[i][d];
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    RQ_FAST_CELL;
    if (kl == 0) {
        for (int k = 1; k < KL; k++) {
            __local const float *o = red + ((k - 1) * cells + cell) * nred;
#pragma unroll
            for (int i = 0; i < RQ_FMH; i++) {
                lsum[i] += o[RQ_FMH * RQ_FVD + i];
#pragma unroll
                for (int d = 0; d < RQ_FVD; d++)
                    acc[i][d] += o[i * RQ_FVD + d];
            }
        }
#pragma unroll
        for (int i = 0; i < RQ_FMH; i++) {
            const int m = hb * RQ_FMH + i;
            if (m < M0) {
                const int ri = m / ng, g = m % ng;
                const long row = ((long)(r0 + ri) * Hq + (long)hk * G + g0 + g) * a.nsplit + sp;
                vstore4((float4)(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), 0,
                        part + row * a.Dv + dvb + dc * RQ_FVD);
                if (dc == 0 && dvc == 0) {
                    part[a.ml_off + 2 * row] = ((__local float *)mbuf4[cur])[m];
                    part[a.ml_off + 2 * row + 1] = lsum[i];
                }
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* pocl 3.1: the kl == 0 branch right before a barrier (see RQ_FAST_CELL) */
}
#undef RQ_FAST_CELL
#undef RQ_FAST_STORE_SCORES
#undef FM
