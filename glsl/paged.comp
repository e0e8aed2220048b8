#version 450
/* Paged decode, pass 1: split-K flash-decoding. A work-group per task (split of a sequence's pages,
 * KV head + chunk of its query heads + chunk of V dims, sequence); paged_combine.comp joins the
 * splits. Keys are read unrotated from their pages in the cache's dtype and rotated with their own
 * position k_pos0[s] + j (the accurate angle of angle.glsl); Q comes rotated and scaled from
 * rotate.comp ([h][s][D]) and is staged in shared memory once per task.
 *
 * Per tile of KT = RQ_VK_PG_WG keys (one per invocation in the score phase):
 *   - the tile's K rows go through shared memory in chunks of UC rotary units (a unit: a rotary pair,
 *     or a pass-through dim): invocation e of a chunk takes unit e % UC of key e / UC, so a
 *     work-group reads whole runs of each key row (coalesced), evaluates each (key, unit) angle once,
 *     and stores the rotated pair as f32 into ks[key][2*unit + 0/1] (rows padded to an odd stride);
 *   - then each invocation scores its own key (its row of ks, conflict-free) against the task's
 *     query heads (broadcast reads of the staged Q): gpg scores in registers;
 *   - the tile max of each head over the work-group: subgroupMax per subgroup and one partial per
 *     subgroup through shared memory where the host found subgroup arithmetic in compute shaders
 *     (this source compiled with RQ_PG_SUBGROUP=1: paged_sg.spv; a module declaring the capability
 *     must not reach a device without it, so it is a second module, not a specialization
 *     constant), else one partial per invocation through shared memory (paged.spv);
 *   - P = exp(S - m) into shared memory; then the invocations run along V's dims (dims lid + WG*c:
 *     consecutive dims on consecutive invocations, so each key's V row is read coalesced, straight
 *     into registers: every V element is used by exactly one invocation, for all the task's heads,
 *     so a trip through shared memory would buy no reuse) over the tile's keys, every invocation
 *     adding the same row sums from the shared P.
 * Masks are the finite sentinel NEGBIG (exp never sees a masked score); a task with nothing unmasked
 * writes m = NEGBIG, l = 0, o = 0.
 * Non-finite data (docs/conventions.md section 9): a masked key weighs exactly 0 whatever its K and V
 * hold: its score is the sentinel, and P.V neither reads its V nor multiplies (0 * NaN is NaN). An
 * unmasked score that is not finite becomes NaN before soft-capping, the tile max skips it (GLSL's
 * max and subgroupMax are undefined for NaN), and its weight stays NaN: l = NaN reaches
 * paged_combine.comp, which makes O and LSE NaN (NaN propagation is the driver's: Vulkan does not
 * require it without SignedZeroInfNanPreserve; lavapipe keeps it). Branches on tile masks, lengths and splits depend only on
 * work-group-uniform values, so no barrier is skipped by part of a work-group.
 * Variants (docs/conventions.md section 11): the rotary offset moves the rotated pairs to
 * [rot_off, rot_off + R) (MLA: the last R dims; the pass-through dims are [0, rot_off) and
 * [rot_off + R, D)), soft-capping (pc.softcap > 0) turns each unmasked score into C tanh(S / C)
 * (tanh.glsl) before the tile max; sinks join in paged_combine.comp; MLA's V may be a view of the K
 * cache's buffer (bound twice, read-only). No loop is added by any of them.
 * 8-bit caches (docs/conventions.md section 12; KDT / VDT int8, e4m3, e5m2): a code is a byte of a
 * uint word (common.glsl's RQ_LOAD), its value (float)q times the row's f32 scale, which is read once
 * per tile key next to the row index (kscl, vscl) and applied as K is staged (before the rotation)
 * and as V is accumulated; no loop is added (the host's trip count holds for every dtype).
 * llvmpipe's loop limit: the host bounds a split's keys by its count of this shader's loop trips
 * (vk_paged_run.c, pg_tile_trips); keep it in step with the loops below. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if RQ_PG_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "vk_contract.h"

layout(local_size_x = RQ_VK_PG_WG) in;
layout(constant_id = RQ_VK_SC_DT_A) const int KDT = 0;
layout(constant_id = RQ_VK_SC_DT_B) const int VDT = 0;
layout(constant_id = RQ_VK_SC_QS) const int QS = 64;      /* floats of the staged Q: gpg * D */
layout(constant_id = RQ_VK_SC_PG_UC) const int UC = RQ_VK_PG_UC_DEF; /* rotary units per K chunk */

layout(std430, binding = RQ_VK_PG_K) readonly buffer Kc { uint kc[]; };
layout(std430, binding = RQ_VK_PG_V) readonly buffer Vc { uint vc[]; };
layout(std430, binding = RQ_VK_PG_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_PG_FREQ) readonly buffer Freq { vec4 vfreq[]; };
layout(std430, binding = RQ_VK_PG_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_PG_PART) writeonly buffer Part { float part[]; };
layout(std430, binding = RQ_VK_PG_KS) readonly buffer Ksc { float kscale[]; };
layout(std430, binding = RQ_VK_PG_VS) readonly buffer Vsc { float vscale[]; };
RQ_VK_PC_BLOCK(RQ_VK_PG_PC)

#include "common.glsl"
#include "angle.glsl"
#include "tanh.glsl"

#define WG RQ_VK_PG_WG
#define GH RQ_VK_PG_GH
#define VT RQ_VK_PG_VT
const bool KQ = KDT >= RQ_VK_DT_I8, VQ = VDT >= RQ_VK_DT_I8; /* 8-bit caches: rows scaled */
const int KS = 2 * UC + 1; /* floats per staged key row: odd, so invocations' rows hit distinct banks */
const float NEGBIG = -3.4028234663852886e38; /* -FLT_MAX: a masked score */

/* RQ_VK_PG_SHARED (vk_contract.h) counts exactly these arrays, for the host's fit checks */
shared float qs[QS];        /* the task's query heads, [g][D] */
shared float ks[WG * KS];   /* a chunk of the tile's rotated keys, [key][2 * unit + 0/1] */
shared float red[GH * WG];  /* the tile max partials: [g][invocation] or [g][subgroup] */
shared float pt[GH * WG];   /* P of the tile, [g][key] */
shared uint krow[WG], vrow[WG]; /* element index of each tile key's K and V row (head included) */
shared float kscl[WG], vscl[WG]; /* each tile key's K and V row scale (8-bit caches; else unused) */

void main()
{
    const int lid = int(gl_LocalInvocationID.x), sp = int(gl_WorkGroupID.x), gd = int(gl_WorkGroupID.y);
    const int gi = gd / pc.ndvc, dvc = gd % pc.ndvc, ngc = (pc.G + pc.gpg - 1) / pc.gpg;
    const int hk = gi / ngc, g0 = (gi % ngc) * pc.gpg, ng = min(pc.gpg, pc.G - g0);
    const bool half_split = (pc.flags & RQ_VK_PG_F_HALF) != 0;
    const int h0 = hk * pc.G + g0, half_r = pc.R / 2, D = pc.D, Dv = pc.Dv, nu = half_r + (D - pc.R);
    const int dv0 = dvc * WG * VT + lid;
    const bool causal = (pc.flags & RQ_VK_PG_F_CAUSAL) != 0;
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
        float m[GH], l[GH], acc[GH][VT];
        [[unroll]] for (int g = 0; g < GH; g++) {
            m[g] = NEGBIG;
            l[g] = 0.0;
            [[unroll]] for (int c = 0; c < VT; c++)
                acc[g][c] = 0.0;
        }
        for (int t0 = jbeg; t0 < jend; t0 += WG) {
            const int nt = min(WG, jend - t0);
            const int pfirst = kp0 + t0, plast = kp0 + t0 + nt - 1; /* <= INT32_MAX: checked on the host */
            if ((causal && pfirst > pq) || (pc.window != 0u && pq >= plast && uint(pq) - uint(plast) >= pc.window))
                continue; /* every key of the tile masked (positions are consecutive): uniform */
            barrier(); /* the previous tile's readers of krow, vrow, ks, red and pt are done (and qs is staged) */
            {
                const int j = t0 + min(lid, nt - 1);
                const uint page = uint(meta[pbase + uint(j / pc.ps)]), slot = uint(j % pc.ps);
                krow[lid] = pc.k_off + page * pc.knb0 + uint(hk) * pc.knb1 + slot * pc.knb2;
                vrow[lid] = pc.v_off + page * pc.vnb0 + uint(hk) * pc.vnb1 + slot * pc.vnb2;
                const uint si = (page * uint(pc.Hq / pc.G) + uint(hk)) * uint(pc.ps) + slot;
                if (KQ)
                    kscl[lid] = kscale[pc.ks_off + si];
                if (VQ)
                    vscl[lid] = vscale[pc.vs_off + si];
            }
            float sg[GH];
            [[unroll]] for (int g = 0; g < GH; g++)
                sg[g] = 0.0;
            for (int u0 = 0; u0 < nu; u0 += UC) {
                barrier(); /* krow is written (first chunk); the previous chunk's readers of ks are done */
                for (int e = lid; e < WG * UC; e += WG) {
                    const int t = e / UC, uu = e - t * UC, u = u0 + uu;
                    float y0 = 0.0, y1 = 0.0;
                    if (t < nt && u < nu) {
                        const uint kr = krow[t];
                        const float ksc = KQ ? kscl[t] : 1.0;
                        if (u < half_r) {
                            int i0 = pc.rot_off + (half_split ? u : 2 * u);
                            int i1 = pc.rot_off + (half_split ? u + half_r : 2 * u + 1);
                            vec2 cs = rq_rope_cossin(kp0 + t0 + t, vfreq[u].xyz) * pc.rot_mul;
                            float x0 = RQ_LOAD(kc, kr + uint(i0), KDT);
                            float x1 = RQ_LOAD(kc, kr + uint(i1), KDT);
                            if (KQ) { /* the stored value, (float)q * scale, then rotated as any key */
                                x0 *= ksc;
                                x1 *= ksc;
                            }
                            y0 = x0 * cs.x - x1 * cs.y;
                            y1 = x0 * cs.y + x1 * cs.x;
                        } else { /* pass-through dim: [0, rot_off), then [rot_off + R, D) */
                            const int pd = u - half_r;
                            y0 = RQ_LOAD(kc, kr + uint(pd < pc.rot_off ? pd : pd + pc.R), KDT);
                            if (KQ)
                                y0 *= ksc;
                        }
                    }
                    ks[t * KS + 2 * uu] = y0;
                    ks[t * KS + 2 * uu + 1] = y1;
                }
                barrier();
                const int nuu = min(UC, nu - u0);
                for (int uu = 0; uu < nuu; uu++) {
                    const int u = u0 + uu;
                    const bool rot = u < half_r;
                    const int pd = u - half_r;
                    const int i0 = rot ? pc.rot_off + (half_split ? u : 2 * u) : (pd < pc.rot_off ? pd : pd + pc.R);
                    const int i1 = rot ? pc.rot_off + (half_split ? u + half_r : 2 * u + 1) : i0; /* y1 = 0 there */
                    const float y0 = ks[lid * KS + 2 * uu], y1 = ks[lid * KS + 2 * uu + 1];
                    [[unroll]] for (int g = 0; g < GH; g++)
                        if (g < ng)
                            sg[g] = fma(qs[g * D + i0], y0, fma(qs[g * D + i1], y1, sg[g]));
                }
            }
            const bool msk = lid >= nt || rq_masked(pq, kp0 + t0 + lid, causal, pc.window);
            const bool cap = pc.softcap > 0.0;
            float sm[GH]; /* the scores for the max: NaN made the sentinel (max() is undefined for it) */
            [[unroll]] for (int g = 0; g < GH; g++) {
                /* a non-finite score is NaN (-inf means masked only), before soft-capping; heads past
                 * ng: their scores stay 0 (never stored), no tanh spent on them */
                const float sn = isinf(sg[g]) ? uintBitsToFloat(0x7FC00000u) : sg[g];
                const float sv = cap && g < ng ? rq_softcap(sn, pc.softcap) : sn;
                sg[g] = msk ? NEGBIG : sv;
                sm[g] = isnan(sg[g]) ? NEGBIG : sg[g];
            }
            /* the tile max of each head */
            float bm[GH];
#if RQ_PG_SUBGROUP
            [[unroll]] for (int g = 0; g < GH; g++) {
                float x = subgroupMax(sm[g]);
                if (subgroupElect())
                    red[g * WG + int(gl_SubgroupID)] = x;
                bm[g] = NEGBIG;
            }
            barrier();
            for (int i = 0; i < int(gl_NumSubgroups); i++)
                [[unroll]] for (int g = 0; g < GH; g++)
                    bm[g] = max(bm[g], red[g * WG + i]);
#else
            [[unroll]] for (int g = 0; g < GH; g++) {
                red[g * WG + lid] = sm[g];
                bm[g] = NEGBIG;
            }
            barrier();
            for (int i = 0; i < WG; i += 4)
                [[unroll]] for (int g = 0; g < GH; g++) {
                    vec4 r4 = vec4(red[g * WG + i], red[g * WG + i + 1], red[g * WG + i + 2], red[g * WG + i + 3]);
                    bm[g] = max(bm[g], max(max(r4.x, r4.y), max(r4.z, r4.w)));
                }
#endif
            [[unroll]] for (int g = 0; g < GH; g++) {
                float mn = max(m[g], bm[g]);
                /* nothing unmasked so far: acc and l are 0, whatever alpha; P of masked keys is 0 */
                float alpha = m[g] == mn ? 1.0 : m[g] == NEGBIG ? 0.0 : exp(m[g] - mn);
                pt[g * WG + lid] = sg[g] == NEGBIG ? 0.0 : exp(sg[g] - mn);
                m[g] = mn;
                l[g] *= alpha;
                [[unroll]] for (int c = 0; c < VT; c++)
                    acc[g][c] *= alpha;
            }
            barrier(); /* P and vrow are visible */
            for (int tt = 0; tt < nt; tt++) {
                const uint vr = vrow[tt];
                const float vsc = VQ ? vscl[tt] : 1.0;
                /* a masked key (p = 0): V not read, 0 (it may hold NaN; uniform) */
                const bool ok = !rq_masked(pq, kp0 + t0 + tt, causal, pc.window);
                float v[VT];
                [[unroll]] for (int c = 0; c < VT; c++) {
                    const int dv = dv0 + c * WG;
                    v[c] = ok && dv < Dv ? RQ_LOAD(vc, vr + uint(dv), VDT) : 0.0;
                    if (VQ && ok)
                        v[c] *= vsc;
                }
                [[unroll]] for (int g = 0; g < GH; g++) { /* heads past ng: computed, never stored */
                    const float p = pt[g * WG + tt];
                    l[g] += p;
                    [[unroll]] for (int c = 0; c < VT; c++)
                        acc[g][c] = fma(p, v[c], acc[g][c]);
                }
            }
        }
        uint row0 = (uint(s) * uint(pc.Hq) + uint(h0)) * uint(pc.nsplit) + uint(sp);
        /* (no loop below holds a nested loop under a condition: glslc would not unroll it) */
        [[unroll]] for (int g = 0; g < GH; g++) {
            uint row = row0 + uint(g) * uint(pc.nsplit);
            [[unroll]] for (int c = 0; c < VT; c++) {
                const int dv = dv0 + c * WG;
                if (g < ng && dv < Dv)
                    part[row * uint(Dv) + uint(dv)] = acc[g][c];
            }
            if (g < ng && lid == 0 && dvc == 0) {
                part[pc.ml_off + 2u * row] = m[g];
                part[pc.ml_off + 2u * row + 1u] = l[g];
            }
        }
    }
}
