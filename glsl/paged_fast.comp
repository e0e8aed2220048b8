#version 450
/* Paged decode pass 1 at memory speed: cl/paged_fast.cl's design in GLSL (that file has the
 * argument; docs/paged-decode-gpu.md the measurements). One module per FM (RQ_FAST_FM 4 or 8: the
 * query vectors, heads x rows of one sequence, a work-group holds), like paged.comp / paged_sg.comp.
 * A work-group of RQ_VK_PF_WG (128) invocations per (row group, split, KV head + head chunk + V chunk);
 * per tile of 128 keys two barriers: B0 (the tile's anchors in shared memory), the scores (invocation
 * t owns key t: its row read straight from the cache in 16-byte loads, rotated by R(p) = A_w R(delta)
 * from the host's table and the tile's anchors, dotted with the staged Q into FM registers), P against
 * the running max of each query vector (the flagged path where a score passes it by RQ_VK_PF_THR),
 * B1, P.V (an invocation owns 4 query vectors x 4 V dims for the keys of its key lane). The key lanes
 * are summed through shared memory once at the end. Masks as cl/paged_fast.cl: keys past the row group's
 * lengths and keys every row masks are never read; a key some rows of the group mask ("mixed" tiles)
 * is selected away for them, never multiplied by P = 0.
 * Buffers: the K cache as uvec4[] (16-byte units: the host checks that K and V rows sit at 16-byte
 * multiples), the V cache as uvec2[] (8-byte units); 16-bit elements unpacked from their words
 * (unpackHalf2x16, exact), 8-bit codes too (e5m2 is an f16's upper byte, e4m3 shifted into an f16 is
 * its value times 2^-8; int8 by bitfieldExtract).
 * llvmpipe's loop limit: the host counts this shader's loop trips (vk_paged_fast.c, pf_tile_trips) and
 * bounds a split's keys; keep it in step with the loops below (spirv_val checks their number). */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_contract.h"

#define FM RQ_FAST_FM
#define WG RQ_VK_PF_WG
#define NMB (FM / 4)               /* float4 blocks of query vectors */
#define PQ4 (NMB % 2 == 0 ? NMB + 1 : NMB) /* vec4s a key's row of P (odd: the writers' banks differ) */

layout(local_size_x = WG) in;
layout(constant_id = RQ_VK_SC_DT_A) const int KDT = 0;
layout(constant_id = RQ_VK_SC_DT_B) const int VDT = 0;
layout(constant_id = RQ_VK_SC_QS) const int QF4 = 64;  /* vec4s of the staged Q: NMB * D */
layout(constant_id = RQ_VK_SC_K1) const int DR = 32;   /* the table's delta range (keys an anchor) */
layout(constant_id = RQ_VK_SC_K2) const int TA4 = 640; /* vec4s of the table + anchors (and the end's sums) */

layout(std430, binding = RQ_VK_PF_K) readonly buffer Kc { uvec4 kc[]; };
layout(std430, binding = RQ_VK_PF_V) readonly buffer Vc { uvec2 vc[]; };
layout(std430, binding = RQ_VK_PF_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_PF_FREQ) readonly buffer Freq { vec4 vfreq[]; };
layout(std430, binding = RQ_VK_PF_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_PF_PART) writeonly buffer Part { float part[]; };
layout(std430, binding = RQ_VK_PF_KS) readonly buffer Ksc { float kscale[]; };
layout(std430, binding = RQ_VK_PF_VS) readonly buffer Vsc { float vscale[]; };
layout(std430, binding = RQ_VK_PF_TAB) readonly buffer Tab { vec4 ftab[]; };
RQ_VK_PC_BLOCK(RQ_VK_PF_PC)

#include "common.glsl"
#include "angle.glsl"
#include "tanh.glsl"

const bool KQ = KDT >= RQ_VK_DT_I8, VQ = VDT >= RQ_VK_DT_I8;
const uint NOROW = 0xFFFFFFFFu;

/* RQ_VK_PF_SHARED (vk_contract.h) counts exactly these arrays */
shared vec4 qs[QF4];          /* Q [m / 4][D slots] (slot order: pair i's dims at 2i, 2i + 1, then the rest) */
shared vec4 ta[TA4];          /* the R(delta) table [DR][R/4 + 1], then the anchors [WG / DR][R/4] */
shared vec4 pt[WG * PQ4];     /* the tile's P (or its scores, in the flagged path) [key][PQ4] */
shared uint vrow[WG];         /* each tile key's V row in 8-byte units; NOROW: not read */
shared float vsl[WG];         /* its V scale (8-bit V) */
shared vec4 mbuf[2][NMB];     /* the running max per query vector, two buffers (cur swaps) */
shared int pqs[FM];           /* the rows' positions */
shared int flag[2];           /* a score above the max + RQ_VK_PF_THR in the tile (by tile parity) */

/* 4 codes of a word as (float)q */
vec4 q8x4(uint w, int dt)
{
    if (dt == RQ_VK_DT_I8) {
        int x = int(w);
        return vec4(bitfieldExtract(x, 0, 8), bitfieldExtract(x, 8, 8), bitfieldExtract(x, 16, 8), bitfieldExtract(x, 24, 8));
    }
    uint e = w & 0x00FF00FFu, o = (w >> 8) & 0x00FF00FFu; /* codes 0, 2 and 1, 3 in the words' halves */
    vec2 a, b;
    if (dt == RQ_VK_DT_E5M2) {
        a = unpackHalf2x16(e << 8);
        b = unpackHalf2x16(o << 8);
    } else {
        a = unpackHalf2x16(((e & 0x007F007Fu) << 7) | ((e & 0x00800080u) << 8)) * 256.0;
        b = unpackHalf2x16(((o & 0x007F007Fu) << 7) | ((o & 0x00800080u) << 8)) * 256.0;
        const float nan = uintBitsToFloat(0x7FC00000u);
        a.x = (e & 0x7Fu) == 0x7Fu ? nan : a.x;
        a.y = ((e >> 16) & 0x7Fu) == 0x7Fu ? nan : a.y;
        b.x = (o & 0x7Fu) == 0x7Fu ? nan : b.x;
        b.y = ((o >> 16) & 0x7Fu) == 0x7Fu ? nan : b.y;
    }
    return vec4(a.x, b.x, a.y, b.y);
}

vec4 h4(uvec2 w, int dt) /* 4 elements of a 16-bit row in two words */
{
    if (dt == RQ_VK_DT_F16)
        return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u));
}

/* elements 8c .. 8c + 7 of the K row at ru (16-byte units), as floats ((float)q for 8-bit) */
void ldk(uint ru, int c, out vec4 lo, out vec4 hi)
{
    if (KDT == RQ_VK_DT_F32) {
        lo = uintBitsToFloat(kc[ru + uint(2 * c)]);
        hi = uintBitsToFloat(kc[ru + uint(2 * c + 1)]);
    } else if (KQ) {
        uvec4 w = kc[ru + uint(c >> 1)];
        uvec2 h = (c & 1) != 0 ? w.zw : w.xy;
        lo = q8x4(h.x, KDT);
        hi = q8x4(h.y, KDT);
    } else {
        uvec4 w = kc[ru + uint(c)];
        lo = h4(w.xy, KDT);
        hi = h4(w.zw, KDT);
    }
}

/* elements 4c .. 4c + 3 of the V row at rv (8-byte units) */
vec4 ldv(uint rv, int c)
{
    if (VDT == RQ_VK_DT_F32)
        return uintBitsToFloat(uvec4(vc[rv + uint(2 * c)], vc[rv + uint(2 * c + 1)]));
    if (VQ) {
        uvec2 w = vc[rv + uint(c >> 1)];
        return q8x4((c & 1) != 0 ? w.y : w.x, VDT);
    }
    return h4(vc[rv + uint(c)], VDT);
}

float s[FM];

/* s += Q's dim slots j0 .. j0 + 3 times x */
void dot4(vec4 x, int j0, int nmb)
{
    [[unroll]] for (int mb = 0; mb < NMB; mb++) {
        if (mb < nmb) {
            vec4 a = vec4(s[4 * mb], s[4 * mb + 1], s[4 * mb + 2], s[4 * mb + 3]);
            int q0 = mb * pc.D + j0;
            a = fma(qs[q0], vec4(x.x), a);
            a = fma(qs[q0 + 1], vec4(x.y), a);
            a = fma(qs[q0 + 2], vec4(x.z), a);
            a = fma(qs[q0 + 3], vec4(x.w), a);
            s[4 * mb] = a.x, s[4 * mb + 1] = a.y, s[4 * mb + 2] = a.z, s[4 * mb + 3] = a.w;
        }
    }
}

bool key_ok(int pk, int pq)
{
    return !(((pc.flags & RQ_VK_PG_F_CAUSAL) != 0 && pk > pq) ||
             (pc.window != 0u && pq >= pk && uint(pq) - uint(pk) >= pc.window));
}

void main()
{
    const int lid = int(gl_LocalInvocationID.x), grp = int(gl_WorkGroupID.x), sp = int(gl_WorkGroupID.y);
    const int gd = int(gl_WorkGroupID.z), ndvc = (pc.Dv + pc.dvch - 1) / pc.dvch;
    const int gi = gd / ndvc, dvc = gd % ndvc, ngc = (pc.G + pc.gpg - 1) / pc.gpg;
    const int hk = gi / ngc, g0 = (gi % ngc) * pc.gpg, ng = min(pc.gpg, pc.G - g0);
    const int r0 = meta[pc.rg_off + uint(grp)], nr = meta[pc.rg_off + uint(grp) + 1u] - r0;
    int len = 0, pqmin = 0x7FFFFFFF, pqmax = -0x7FFFFFFF - 1;
    for (int ri = 0; ri < nr; ri++) {
        len = max(len, meta[pc.lens_off + uint(r0 + ri)]);
        int pq = meta[pc.qpos_off + uint(r0 + ri)];
        pqmin = min(pqmin, pq);
        pqmax = max(pqmax, pq);
    }
    const int jbeg = sp * pc.kps;
    if (jbeg >= len)
        return; /* the whole work-group */
    const int jend = min(len, jbeg + pc.kps), kp0 = meta[pc.kpos_off + uint(r0)];
    const uint pbase = pc.pages_off + uint(meta[r0]);
    const int D = pc.D, R = pc.R, r4 = R / 4, nru = R / 16, npt = (D - R) / 8, hr = R / 2;
    const bool causal = (pc.flags & RQ_VK_PG_F_CAUSAL) != 0, half_split = (pc.flags & RQ_VK_PG_F_HALF) != 0;
    const int M = nr * ng, nmb = (M + 3) / 4, Hkv = pc.Hq / pc.G;
    const uint kstep = uint(pc.knb0), vstep = uint(pc.vnb0);
    /* P.V: cells of 4 query vectors x 4 V dims of the chunk [dvb, dvb + dvn) */
    const int dvb = dvc * pc.dvch, dvn = min(pc.dvch, pc.Dv - dvb), ndc = dvn / 4;
    const int cells = NMB * ndc, KL = WG / cells, kl = lid / cells, cell = lid % cells, hb = cell / ndc, dc = cell % ndc;
    for (int e = lid; e < NMB * D * 4; e += WG) {
        int j = (e / 4) % D, m = (e / (4 * D)) * 4 + (e % 4), ri = m / ng, g = m % ng;
        float x = 0.0;
        if (m < M) {
            int dim = j >= R ? (j - R < pc.rot_off ? j - R : j) : pc.rot_off + (half_split ? (j >> 1) + (j & 1) * hr : j);
            x = qr[(uint(hk * pc.G + g0 + g) * uint(pc.n) + uint(r0 + ri)) * uint(D) + uint(dim)];
        }
        qs[e / 4][e % 4] = x;
    }
    for (int e = lid; e < (r4 + 1) * DR; e += WG)
        ta[e] = ftab[e];
    if (lid < FM) {
        mbuf[0][lid / 4][lid % 4] = -1.0 / 0.0;
        pqs[lid] = lid < nr ? meta[pc.qpos_off + uint(r0 + lid)] : 0;
    }
    if (lid < 2)
        flag[lid] = 0;
    vec4 acc[4];
    vec4 lsum = vec4(0.0);
    [[unroll]] for (int i = 0; i < 4; i++)
        acc[i] = vec4(0.0);
    const int tb4 = (r4 + 1) * DR, w = lid / DR, delta = lid % DR;
    int par = 0, cur = 0;
    for (int t0 = jbeg; t0 < jend; t0 += WG) {
        const int nt = min(WG, jend - t0), pfirst = kp0 + t0, plast = pfirst + nt - 1;
        if ((causal && pfirst > pqmax) || (pc.window != 0u && pqmin >= plast && uint(pqmin) - uint(plast) >= pc.window))
            continue; /* uniform: every key of the tile masked for every row */
        /* some key masked for some rows, not others (a window with rows at different positions: every
         * tile, conservatively) */
        const bool mixed = (causal && plast > pqmin && pfirst <= pqmax) || (pc.window != 0u && pqmin != pqmax);
        if (lid < hr) { /* anchors A_w = R(pfirst) R(w DR), times the attention factor */
            vec2 a = rq_rope_cossin(pfirst, vfreq[lid].xyz) * pc.rot_mul;
            for (int ww = 0; ww < WG / DR; ww++) {
                vec4 t2 = ftab[tb4 + (ww * hr + lid) / 2];
                vec2 tw = (lid & 1) != 0 ? t2.zw : t2.xy;
                vec2 c = vec2(a.x * tw.x - a.y * tw.y, a.y * tw.x + a.x * tw.y);
                if ((lid & 1) != 0)
                    ta[tb4 + ww * r4 + lid / 2].zw = c;
                else
                    ta[tb4 + ww * r4 + lid / 2].xy = c;
            }
        }
        barrier(); /* B0 */
        /* ---- scores: key t = lid ---- */
        const int t = lid, pk = pfirst + t;
        uint mm = 0u;
        if (t < nt)
            for (int ri = 0; ri < nr; ri++)
                if (key_ok(pk, pqs[ri]))
                    mm |= ((1u << ng) - 1u) << (ri * ng);
        [[unroll]] for (int m = 0; m < FM; m++)
            s[m] = 0.0;
        uint vr = NOROW;
        float vs = 1.0;
        if (mm != 0u) {
            const int j = t0 + t;
            const uint page = uint(meta[pbase + uint(j / pc.ps)]), slot = uint(j % pc.ps);
            const uint kr = pc.k_off + page * kstep + uint(hk) * pc.knb1 + slot * pc.knb2;
            vr = pc.v_off + page * vstep + uint(hk) * pc.vnb1 + slot * pc.vnb2;
            const uint si = (page * uint(Hkv) + uint(hk)) * uint(pc.ps) + slot;
            const float ks = KQ ? kscale[pc.ks_off + si] : 1.0;
            vs = VQ ? vscale[pc.vs_off + si] : 1.0;
            const int c0 = pc.rot_off / 8, cstep = half_split ? nru : 1, cmul = half_split ? 1 : 2;
            const int aw = tb4 + w * r4, tw = delta * (r4 + 1);
            for (int u = 0; u < nru; u++) {
                vec4 a0, a1, b0, b1; /* chunks A (a0 a1) and B (b0 b1) */
                ldk(kr, c0 + cmul * u, a0, a1);
                ldk(kr, c0 + cmul * u + cstep, b0, b1);
                /* pairs 8u + c: x0 the first dims, x1 the second */
                vec4 x0l = half_split ? a0 : vec4(a0.xz, a1.xz), x0h = half_split ? a1 : vec4(b0.xz, b1.xz);
                vec4 x1l = half_split ? b0 : vec4(a0.yw, a1.yw), x1h = half_split ? b1 : vec4(b0.yw, b1.yw);
                [[unroll]] for (int q = 0; q < 4; q++) { /* pairs 8u + 2q, 8u + 2q + 1 */
                    vec4 tq = ta[tw + 4 * u + q], aq = ta[aw + 4 * u + q];
                    vec2 ra = vec2(aq.x * tq.x - aq.y * tq.y, aq.y * tq.x + aq.x * tq.y);
                    vec2 rb = vec2(aq.z * tq.z - aq.w * tq.w, aq.w * tq.z + aq.z * tq.w);
                    vec4 x0 = q < 2 ? x0l : x0h, x1 = q < 2 ? x1l : x1h;
                    float e0 = x0[2 * (q & 1)], e1 = x1[2 * (q & 1)], f0 = x0[2 * (q & 1) + 1], f1 = x1[2 * (q & 1) + 1];
                    dot4(vec4(e0 * ra.x - e1 * ra.y, e0 * ra.y + e1 * ra.x, f0 * rb.x - f1 * rb.y, f0 * rb.y + f1 * rb.x),
                         16 * u + 4 * q, nmb);
                }
            }
            for (int c = 0; c < npt; c++) { /* pass-through dims: [0, rot_off), then [rot_off + R, D) */
                int d0 = c * 8 < pc.rot_off ? c * 8 : c * 8 + R;
                vec4 lo, hi;
                ldk(kr, d0 / 8, lo, hi);
                dot4(lo, R + 8 * c, nmb);
                dot4(hi, R + 8 * c + 4, nmb);
            }
            [[unroll]] for (int m = 0; m < FM; m++) { /* 8-bit K: the row's scale; a score that is not
                                                       * finite is NaN (docs/conventions.md section 9:
                                                       * -inf means masked only) */
                s[m] *= ks;
                s[m] = isinf(s[m]) ? uintBitsToFloat(0x7FC00000u) : s[m];
            }
        }
        vrow[t] = vr == NOROW ? NOROW : 2u * vr;
        vsl[t] = vs;
        /* the scores (masked: -inf) into P's rows, soft-capped; P against the running max */
        [[unroll]] for (int mb = 0; mb < NMB; mb++)
            if (mb < nmb)
                pt[t * PQ4 + mb] = vec4(((mm >> (4 * mb)) & 1u) != 0u ? s[4 * mb] : -1.0 / 0.0,
                                        ((mm >> (4 * mb + 1)) & 1u) != 0u ? s[4 * mb + 1] : -1.0 / 0.0,
                                        ((mm >> (4 * mb + 2)) & 1u) != 0u ? s[4 * mb + 2] : -1.0 / 0.0,
                                        ((mm >> (4 * mb + 3)) & 1u) != 0u ? s[4 * mb + 3] : -1.0 / 0.0);
        if (pc.softcap > 0.0) { /* uniform: the capped scores into P's rows and s (the flagged path's) */
            for (int m = 0; m < M; m++)
                if (((mm >> m) & 1u) != 0u)
                    pt[t * PQ4 + m / 4][m % 4] = rq_softcap(pt[t * PQ4 + m / 4][m % 4], pc.softcap);
            [[unroll]] for (int m = 0; m < FM; m++)
                s[m] = m < M ? pt[t * PQ4 + m / 4][m % 4] : 0.0;
        }
        bool up = false;
        for (int m = 0; m < M; m++) {
            const bool ok = ((mm >> m) & 1u) != 0u;
            const float e = pt[t * PQ4 + m / 4][m % 4] - mbuf[cur][m / 4][m % 4];
            up = up || (ok && e > RQ_VK_PF_THR);
            pt[t * PQ4 + m / 4][m % 4] = ok ? exp(e) : -0.0;
        }
        if (up || lid == 0) {
            if (up)
                atomicOr(flag[par], 1);
            if (lid == 0)
                flag[par ^ 1] = 0; /* the next tile's flag: its readers passed this tile's B0 */
        }
        barrier(); /* B1 */
        if (flag[par] != 0) { /* uniform: the flagged path */
            [[unroll]] for (int mb = 0; mb < NMB; mb++)
                if (mb < nmb)
                    pt[t * PQ4 + mb] = vec4(((mm >> (4 * mb)) & 1u) != 0u ? s[4 * mb] : -1.0 / 0.0,
                                            ((mm >> (4 * mb + 1)) & 1u) != 0u ? s[4 * mb + 1] : -1.0 / 0.0,
                                            ((mm >> (4 * mb + 2)) & 1u) != 0u ? s[4 * mb + 2] : -1.0 / 0.0,
                                            ((mm >> (4 * mb + 3)) & 1u) != 0u ? s[4 * mb + 3] : -1.0 / 0.0);
            barrier();
            if (lid < M) {
                float mx = -1.0 / 0.0;
                for (int tt = 0; tt < WG; tt++)
                    mx = max(mx, pt[tt * PQ4 + lid / 4][lid % 4]);
                mbuf[cur ^ 1][lid / 4][lid % 4] = max(mbuf[cur][lid / 4][lid % 4], mx);
            }
            barrier();
            for (int m = 0; m < M; m++)
                pt[t * PQ4 + m / 4][m % 4] =
                    ((mm >> m) & 1u) != 0u ? exp(pt[t * PQ4 + m / 4][m % 4] - mbuf[cur ^ 1][m / 4][m % 4]) : -0.0;
            if (kl < KL) {
                vec4 mo = mbuf[cur][hb], mn = mbuf[cur ^ 1][hb];
                vec4 al = vec4(mo.x == mn.x ? 1.0 : exp(mo.x - mn.x), mo.y == mn.y ? 1.0 : exp(mo.y - mn.y),
                               mo.z == mn.z ? 1.0 : exp(mo.z - mn.z), mo.w == mn.w ? 1.0 : exp(mo.w - mn.w));
                lsum *= al;
                [[unroll]] for (int i = 0; i < 4; i++)
                    acc[i] *= al[i];
            }
            barrier(); /* P complete; the old max's last readers done */
            cur ^= 1;
        }
        par ^= 1;
        /* ---- P.V over this key lane's keys, 4 at a time ---- */
        if (kl < KL) {
            const int cv = dvb / 4 + dc;
            for (int tt = kl; tt < nt; tt += 4 * KL) {
                vec4 v[4], p[4];
                [[unroll]] for (int q = 0; q < 4; q++) {
                    const int k = tt + q * KL;
                    const uint r = k < nt ? vrow[k] : NOROW;
                    v[q] = vec4(0.0);
                    p[q] = vec4(-0.0);
                    if (r != NOROW) {
                        v[q] = ldv(r, cv);
                        if (VQ)
                            v[q] *= vsl[k];
                        p[q] = pt[k * PQ4 + hb];
                    }
                }
                [[unroll]] for (int q = 0; q < 4; q++) {
                    lsum += p[q];
                    [[unroll]] for (int i = 0; i < 4; i++) {
                        vec4 x = fma(vec4(p[q][i]), v[q], acc[i]);
                        /* a masked (vector, key) is -0: selected away where the rows' masks differ */
                        acc[i] = mixed && floatBitsToUint(p[q][i]) == 0x80000000u ? acc[i] : x;
                    }
                }
            }
        }
    }
    /* ---- the key lanes' partial sums into lane 0 (the table and anchors are free), then written ---- */
    barrier();
    if (kl > 0 && kl < KL) {
        int o = ((kl - 1) * cells + cell) * 5;
        [[unroll]] for (int i = 0; i < 4; i++)
            ta[o + i] = acc[i];
        ta[o + 4] = lsum;
    }
    barrier();
    if (kl == 0) {
        for (int k = 1; k < KL; k++) {
            int o = ((k - 1) * cells + cell) * 5;
            [[unroll]] for (int i = 0; i < 4; i++)
                acc[i] += ta[o + i];
            lsum += ta[o + 4];
        }
        [[unroll]] for (int i = 0; i < 4; i++) {
            const int m = hb * 4 + i;
            if (m < M) {
                const int ri = m / ng, g = m % ng;
                const uint row = (uint(r0 + ri) * uint(pc.Hq) + uint(hk * pc.G + g0 + g)) * uint(pc.nsplit) + uint(sp);
                const uint o = row * uint(pc.Dv) + uint(dvb + 4 * dc);
                part[o] = acc[i].x, part[o + 1u] = acc[i].y, part[o + 2u] = acc[i].z, part[o + 3u] = acc[i].w;
                if (dc == 0 && dvc == 0) {
                    part[pc.ml_off + 2u * row] = mbuf[cur][m / 4][m % 4];
                    part[pc.ml_off + 2u * row + 1u] = lsum[i];
                }
            }
        }
    }
}
