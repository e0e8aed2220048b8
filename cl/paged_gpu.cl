/* Paged decode pass 1 in the GPU shape (paged_attn_gpu), included by cl/paged.cl after its helpers. */
/* ---- pass 1, GPU shape ---------------------------------------------------------------------------
 * A work-group of wg work-items (the host's choice, src/opencl/cl_paged_run.c: 128, 256 where Dv > 128, fewer
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
 * only. Local memory: RQ_PAGED_LOCAL_BYTES (19 KiB), whatever D, Dv and G.
 * Non-finite data (docs/conventions.md section 9): a masked key's K and V are never read (its bias is
 * -inf, its staged K and V 0), so it weighs exactly 0 whatever its slots hold; an unmasked score that
 * is not finite becomes NaN before soft-capping, and its weight stays NaN even while nothing else
 * is unmasked: the row ends with l = NaN (O and LSE NaN after the reduction). */

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
                if (e / RQ_PTK < ng && kb[e % RQ_PTK] == 0.0f) {
                    sc[e] = isinf(sc[e]) ? NAN : sc[e]; /* a non-finite score: NaN, not +-C */
                    sc[e] = RQ_SOFTCAP(sc[e], softcap, 1.0f / softcap);
                }
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
                /* an unmasked non-finite score is NaN (-inf means masked only), and stays NaN in its
                 * weight where fmax skipped it (none) */
                float st = kb[t] == 0.0f && isinf(sg[t]) ? NAN : sg[t];
                pt[g * RQ_PTK + t] = none ? (isnan(st) ? st : 0.0f) : exp(st - mn);
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

