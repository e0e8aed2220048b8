#version 450
/* Paged decode, pass 1 (split-K flash-decoding, the OpenCL GPU shape of cl/paged.cl): a work-group per
 * task (split of a sequence's pages, KV head + chunk of its query heads + chunk of V dims, sequence).
 * Keys are read unrotated from their pages in the cache's dtype and rotated with their own position
 * k_pos0[s] + j (angle.glsl), once per key for all the task's query heads; Q comes rotated and scaled
 * from rotate.comp ([h][s][D]) and is staged in shared memory (every invocation reads every element).
 * Per tile of RQ_VK_PG_WG keys: an invocation scores one key, the tile max is a tree in shared memory,
 * the running softmax (m, l) and the unnormalised output advance, and the invocations then run along
 * V's dims (consecutive dims, consecutive invocations) over the tile's keys. The task writes its
 * output and (m, l) to `part` for paged_combine.comp. Branches on tile masks, lengths and splits
 * depend only on work-group-uniform values, so no barrier is skipped by part of a work-group. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x = RQ_VK_PG_WG) in;
layout(constant_id = RQ_VK_SC_DT_A) const int KDT = 0;
layout(constant_id = RQ_VK_SC_DT_B) const int VDT = 0;
layout(constant_id = RQ_VK_SC_QS) const int QS = 64;

layout(std430, binding = RQ_VK_PG_K) readonly buffer Kc { uint kc[]; };
layout(std430, binding = RQ_VK_PG_V) readonly buffer Vc { uint vc[]; };
layout(std430, binding = RQ_VK_PG_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_PG_FREQ) readonly buffer Freq { vec4 vfreq[]; };
layout(std430, binding = RQ_VK_PG_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_PG_PART) writeonly buffer Part { float part[]; };
RQ_VK_PC_BLOCK(RQ_VK_PG_PC)

#include "common.glsl"
#include "angle.glsl"

#define WG RQ_VK_PG_WG
#define GH RQ_VK_PG_GH
#define VT RQ_VK_PG_VT
#define NEG_INF uintBitsToFloat(0xFF800000u)

shared float qs[QS];        /* the task's query heads, [g][D] */
shared float red[GH * WG];  /* the tile's scores, then their max (tree) */
shared float pt[GH * WG];   /* e^(S - m) of the tile */
shared uint vrow[WG];       /* element index of each tile key's V row (head included) */

void main()
{
    const int lid = int(gl_LocalInvocationID.x), sp = int(gl_WorkGroupID.x), gd = int(gl_WorkGroupID.y);
    const int gi = gd / pc.ndvc, dvc = gd % pc.ndvc;
    const int hk = gi / pc.ngc, g0 = (gi % pc.ngc) * pc.gpg, ng = min(pc.gpg, pc.G - g0);
    const int h0 = hk * pc.G + g0, half_r = pc.R / 2, D = pc.D, Dv = pc.Dv;
    const int dv0 = dvc * WG * VT + lid;
    const bool causal = pc.causal != 0;
    /* sequences past the grid's z extent (more than 65535): strided */
    for (int s = int(gl_WorkGroupID.z); s < pc.n; s += int(gl_NumWorkGroups.z)) {
        const int len = meta[pc.lens_off + uint(s)];
        const int jbeg = sp * pc.kps;
        if (jbeg >= len)
            continue; /* a split past this sequence's end: the combine does not read it */
        const int jend = min(len, jbeg + pc.kps);
        const int pq = meta[pc.qpos_off + uint(s)], kp0 = meta[pc.kpos_off + uint(s)];
        const uint pbase = pc.pages_off + uint(meta[s]);
        barrier(); /* the previous sequence's readers of qs are done */
        for (int e = lid; e < ng * D; e += WG)
            qs[e] = qr[(uint(h0 + e / D) * uint(pc.n) + uint(s)) * uint(D) + uint(e % D)];
        barrier();
        float m[GH], l[GH], acc[GH][VT];
        for (int g = 0; g < GH; g++) {
            m[g] = NEG_INF;
            l[g] = 0.0;
            for (int i = 0; i < VT; i++)
                acc[g][i] = 0.0;
        }
        for (int t0 = jbeg; t0 < jend; t0 += WG) {
            const int nt = min(WG, jend - t0);
            const int pfirst = kp0 + t0, plast = kp0 + t0 + nt - 1; /* <= INT32_MAX: checked on the host */
            if ((causal && pfirst > pq) || (pc.window != 0u && pq >= plast && uint(pq) - uint(plast) >= pc.window))
                continue; /* every key of the tile masked (positions are consecutive): uniform */
            const int j = t0 + min(lid, nt - 1);
            const uint page = uint(meta[pbase + uint(j / pc.ps)]), slot = uint(j % pc.ps);
            const uint krow = pc.k_off + page * pc.knb0 + uint(hk) * pc.knb1 + slot * pc.knb2;
            vrow[lid] = pc.v_off + page * pc.vnb0 + uint(hk) * pc.vnb1 + slot * pc.vnb2;
            const int pk = kp0 + j;
            const bool msk = lid >= nt || rq_masked(pq, pk, causal, pc.window);
            float sg[GH];
            for (int g = 0; g < GH; g++)
                sg[g] = 0.0;
            if (!msk) {
                for (int u = 0; u < half_r; u++) {
                    vec2 cs = rq_cossinpi(rq_half_turns(pk, vfreq[u].xyz)) * pc.rot_mul;
                    int i0 = pc.lay != 0 ? u : 2 * u, i1 = pc.lay != 0 ? u + half_r : 2 * u + 1;
                    float x0 = RQ_LOAD(kc, krow + uint(i0), KDT);
                    float x1 = RQ_LOAD(kc, krow + uint(i1), KDT);
                    float y0 = x0 * cs.x - x1 * cs.y, y1 = x0 * cs.y + x1 * cs.x;
                    for (int g = 0; g < GH; g++)
                        if (g < ng)
                            sg[g] = fma(qs[g * D + i0], y0, fma(qs[g * D + i1], y1, sg[g]));
                }
                for (int i = pc.R; i < D; i++) { /* pass-through dims */
                    float x0 = RQ_LOAD(kc, krow + uint(i), KDT);
                    for (int g = 0; g < GH; g++)
                        if (g < ng)
                            sg[g] = fma(qs[g * D + i], x0, sg[g]);
                }
            }
            for (int g = 0; g < GH; g++)
                red[g * WG + lid] = msk ? NEG_INF : sg[g];
            barrier();
            for (int st = WG / 2; st > 0; st >>= 1) {
                if (lid < st)
                    for (int g = 0; g < GH; g++)
                        red[g * WG + lid] = max(red[g * WG + lid], red[g * WG + lid + st]);
                barrier();
            }
            float alpha[GH], psum[GH];
            for (int g = 0; g < GH; g++) {
                float mn = max(m[g], red[g * WG]);
                bool none = mn == NEG_INF; /* nothing unmasked yet */
                alpha[g] = none ? 1.0 : exp(m[g] - mn);
                pt[g * WG + lid] = none || msk ? 0.0 : exp(sg[g] - mn);
                m[g] = mn;
                psum[g] = 0.0;
            }
            barrier();
            for (int i = 0; i < VT; i++) {
                int dv = dv0 + i * WG;
                for (int g = 0; g < GH; g++)
                    acc[g][i] *= alpha[g];
                if (dv < Dv)
                    for (int tt = 0; tt < nt; tt++) {
                        float v = RQ_LOAD(vc, vrow[tt] + uint(dv), VDT);
                        for (int g = 0; g < GH; g++) {
                            float pv = pt[g * WG + tt];
                            acc[g][i] = fma(pv, v, acc[g][i]);
                            if (i == 0)
                                psum[g] += pv; /* invocation 0 of V chunk 0 (the one that writes l) has dv < Dv */
                        }
                    }
            }
            for (int g = 0; g < GH; g++)
                l[g] = l[g] * alpha[g] + psum[g];
            barrier(); /* before the next tile rewrites red, pt and vrow */
        }
        uint row0 = (uint(s) * uint(pc.Hq) + uint(h0)) * uint(pc.nsplit) + uint(sp);
        for (int g = 0; g < GH; g++) {
            if (g < ng) {
                uint row = row0 + uint(g) * uint(pc.nsplit);
                for (int i = 0; i < VT; i++) {
                    int dv = dv0 + i * WG;
                    if (dv < Dv)
                        part[row * uint(Dv) + uint(dv)] = acc[g][i];
                }
                if (lid == 0 && dvc == 0) {
                    part[pc.ml_off + 2u * row] = m[g];
                    part[pc.ml_off + 2u * row + 1u] = l[g];
                }
            }
        }
    }
}
