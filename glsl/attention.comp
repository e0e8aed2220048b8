#version 450
/* Fused attention: O = softmax(Qr . Kr^T) . V with an online (flash-style) softmax; the scores never
 * leave registers. Qr [B*Hq][Sq][D] (times the scale) and Kr [B*Hkv][Sk][D] are the rotated f32
 * scratch of rotate.comp; V is read from the caller's buffer in its own dtype.
 *   - A work-group owns ROWS query rows of one (batch, KV head): rows m = g*Sq + i over the
 *     G query heads sharing the KV head (their Qr rows are contiguous), so GQA stages K and V once
 *     per group. Each invocation is one row: running max, sum and Dv accumulators in registers.
 *   - Per tile of TK keys: key positions, then Kr and Qr in chunks of RQ_VK_AT_DC dims, then V (as
 *     f32) go through shared memory; every invocation reads the K and V entries of the tile at the
 *     same address (broadcasts) and its own Q column (consecutive words across invocations).
 *   - A tile whose every score is masked for all rows of the group is skipped (causal: about half
 *     of a prefill); the test is uniform, made from shared data after a barrier.
 *   - Masks are tracked as bits, never as -inf arithmetic: a row with no unmasked key yet keeps
 *     l = 0 and o = 0, so nothing depends on how a driver treats infinities, and a fully masked row
 *     ends with O = 0 and LSE = -inf (stored as bits).
 * Shared memory: Qs 32 x ROWS + Ks 32 x TK + Vs TK x DVMAX floats, <= 29 KiB at ROWS 64 (TK = 32 up
 * to Dv 128, 16 up to 256), inside the 32 KiB every Vulkan device has; ROWS (tuned: 32, 64, 128) is
 * a specialization constant, and the host keeps a larger one off a device without room for it.
 * Key chunks: a dispatch walks keys [pc.kc0, pc.kc1) only. The host records ceil(Sk / KC) dispatches
 * (vk_attn.c, rq_vk_attn_chunk_keys) with barriers between them; the running state of each row
 * (Dv f32 accumulators, then max and sum) waits between them in the plan's f32 scratch `st`
 * ([B*Hkv][M][Dv + 2], i.e. [B][Hq][Sq]): a first chunk starts from zero, a later one loads it, every
 * chunk but the last stores it, the last normalises and writes O and LSE. l = 0 stands for "no key
 * unmasked yet" (l >= 1 once one was: the max key weighs exp(0)). This bounds the loop iterations of
 * an invocation whatever Sk: llvmpipe (lavapipe) ends every loop of an invocation once 65535
 * iterations have run in total (all loops together, gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), silently:
 * without chunks, Sk 768 with D 128 and Dv 256 gave wrong output. The host's count of this shader's loop
 * trips per tile (rq_vk_attn_chunk_keys) must follow any change of the loops below. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

#define DC RQ_VK_AT_DC
layout(local_size_x_id = RQ_VK_SC_WG) in;
layout(constant_id = RQ_VK_SC_WG) const int ROWS = RQ_VK_AT_ROWS_DEF; /* the same id: rows = invocations */
layout(constant_id = RQ_VK_SC_DVMAX) const int DVMAX = 128;
layout(constant_id = RQ_VK_SC_DT_B) const int DTV = 0;
layout(constant_id = RQ_VK_SC_DT_O) const int DTO = 0;
const int TK = RQ_VK_AT_TK(DVMAX);

layout(std430, binding = RQ_VK_AT_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_AT_KR) readonly buffer Kr { float kr[]; };
layout(std430, binding = RQ_VK_AT_V) readonly buffer V { uint vbuf[]; };
layout(std430, binding = RQ_VK_AT_QPOS) readonly buffer QPos { int qpos[]; };
layout(std430, binding = RQ_VK_AT_KPOS) readonly buffer KPos { int kpos[]; };
layout(std430, binding = RQ_VK_AT_OUT) buffer Out { uint outv[]; };
layout(std430, binding = RQ_VK_AT_LSE) writeonly buffer Lse { float lse[]; };
layout(std430, binding = RQ_VK_AT_ST) buffer St { float st[]; }; /* chunk state, see above */
RQ_VK_PC_BLOCK(RQ_VK_AT_PC)

#include "common.glsl"

shared vec4 qs[DC / 4][ROWS]; /* [d / 4][row]: each invocation reads its own column */
/* vec4 along keys and along Dv: every inner loop runs a quarter of the trips. Besides fewer loads,
 * this matters on llvmpipe, which ends every loop of an invocation once 65535 iterations have run in
 * total (all loops together, gallivm's LP_MAX_TGSI_LOOP_ITERATIONS). */
const int TK4 = TK / 4, DV4 = DVMAX / 4;
shared vec4 ks[DC][TK4];       /* [d][key / 4] */
shared vec4 vs[TK][DV4];       /* [key][d / 4], zero past Dv */
shared int kps[TK];            /* key positions of the tile */
shared int pq_lo, pq_hi;       /* query positions of the group's rows */

void main()
{
    int lid = int(gl_LocalInvocationID.x);
    int bk = int(gl_WorkGroupID.y), b = bk / pc.Hkv, hk = bk % pc.Hkv;
    int m0 = int(gl_WorkGroupID.x) * ROWS;
    int m = m0 + lid, mc = min(m, pc.M - 1); /* rows past M compute row M-1 and store nothing */
    int g = mc / pc.Sq, i = mc - g * pc.Sq;
    int pi = pc.use_qpos != 0 ? qpos[pc.qpos_off + uint(i)] : pc.q_base + i;
    uint qbase = uint(bk) * uint(pc.M) * uint(pc.D); /* row m of this KV head's group */
    uint kbase = uint(bk) * uint(pc.Sk) * uint(pc.D);
    uint vbase = pc.v_off + uint(b) * pc.vnb0 + uint(hk) * pc.vnb1;
    bool masks = pc.causal != 0 || pc.window != 0u;

    if (lid == 0) {
        pq_lo = 0x7FFFFFFF;
        pq_hi = int(0x80000000u);
    }
    barrier();
    atomicMin(pq_lo, pi);
    atomicMax(pq_hi, pi);

    /* the row's state: rows past M (which store nothing) start from zero and read no state, so no
     * invocation reads a word another one of this dispatch writes */
    uint sb = (uint(bk) * uint(pc.M) + uint(mc)) * uint(pc.Dv + 2);
    bool load = pc.kc0 != 0 && m < pc.M, keep = pc.kc1 != pc.Sk;
    vec4 o[DV4];
    for (int d = 0; d < DV4; d++) {
        vec4 x = vec4(0.0);
        if (load)
            for (int c = 0; c < 4; c++)
                if (4 * d + c < pc.Dv)
                    x[c] = st[sb + uint(4 * d + c)];
        o[d] = x;
    }
    float mx = load ? st[sb + uint(pc.Dv)] : 0.0, l = load ? st[sb + uint(pc.Dv) + 1u] : 0.0;
    bool seen = l != 0.0; /* some key of this row was unmasked (mx valid) */

    for (int j0 = pc.kc0; j0 < pc.kc1; j0 += TK) {
        barrier(); /* the previous tile's readers are done with kps/ks/vs (and pq_lo/hi are final) */
        if (lid < TK) {
            int j = min(j0 + lid, pc.kc1 - 1); /* keys past the chunk repeat its last (masked below) */
            kps[lid] = pc.use_kpos != 0 ? kpos[pc.kpos_off + uint(j)] : pc.k_base + j;
        }
        barrier();
        int nk = min(TK, pc.kc1 - j0);
        if (masks) {
            int pk_lo = kps[0], pk_hi = kps[0];
            for (int u = 1; u < nk; u++) {
                pk_lo = min(pk_lo, kps[u]);
                pk_hi = max(pk_hi, kps[u]);
            }
            bool skip = (pc.causal != 0 && pk_lo > pq_hi) ||
                        (pc.window != 0u && pq_lo >= pk_hi && uint(pq_lo) - uint(pk_hi) >= pc.window);
            if (skip) /* uniform: shared data only */
                continue;
        }

        vec4 s[TK4]; /* key u is s[u / 4][u % 4] */
        for (int u = 0; u < TK4; u++)
            s[u] = vec4(0.0);
        for (int d0 = 0; d0 < pc.D; d0 += DC) {
            for (int e = lid; e < ROWS * DC; e += ROWS) { /* 64 rows x 32 dims, dims fastest */
                int r = e / DC, d = e % DC, gd = d0 + d, gm = m0 + r;
                qs[d / 4][r][d % 4] = gm < pc.M && gd < pc.D ? qr[qbase + uint(gm) * uint(pc.D) + uint(gd)] : 0.0;
            }
            for (int e = lid; e < TK * DC; e += ROWS) {
                int u = e / DC, d = e % DC, gd = d0 + d, gj = j0 + u;
                ks[d][u / 4][u % 4] = gj < pc.kc1 && gd < pc.D ? kr[kbase + uint(gj) * uint(pc.D) + uint(gd)] : 0.0;
            }
            barrier();
            for (int d4 = 0; d4 < DC / 4; d4++) { /* four dims per trip */
                vec4 qv = qs[d4][lid];
                int d = 4 * d4;
                for (int u = 0; u < TK4; u++)
                    s[u] += qv.x * ks[d][u] + qv.y * ks[d + 1][u] + qv.z * ks[d + 2][u] + qv.w * ks[d + 3][u];
            }
            barrier();
        }
        for (int e = lid; e < TK * DV4; e += ROWS) {
            int u = e / DV4, d4 = e % DV4, gj = j0 + u;
            vec4 x = vec4(0.0);
            for (int c = 0; c < 4; c++) {
                int d = 4 * d4 + c;
                if (gj < pc.kc1 && d < pc.Dv)
                    x[c] = RQ_LOAD(vbuf, vbase + uint(gj) * pc.vnb2 + uint(d), DTV);
            }
            vs[u][d4] = x;
        }
        barrier();

        /* online softmax over the tile's unmasked keys */
        uint live = 0u;
        float bm = 0.0;
        for (int u = 0; u < TK; u++) {
            bool ok = u < nk && !rq_masked(pi, kps[u], pc.causal != 0, pc.window);
            if (ok) {
                float su = s[u / 4][u % 4];
                bm = live == 0u ? su : max(bm, su);
                live |= 1u << u;
            }
        }
        if (live != 0u) {
            float mn = seen ? max(mx, bm) : bm;
            float corr = seen ? exp(mx - mn) : 0.0; /* o and l are still 0 when !seen */
            vec4 p[TK4];
            float ps = 0.0;
            for (int u4 = 0; u4 < TK4; u4++) {
                bvec4 on = notEqual((uvec4(live) >> uvec4(4 * u4) >> uvec4(0, 1, 2, 3)) & 1u, uvec4(0u));
                vec4 e = exp(s[u4] - mn); /* finite arguments; masked lanes dropped below */
                p[u4] = mix(vec4(0.0), e, on);
                ps += dot(p[u4], vec4(1.0));
            }
            l = l * corr + ps;
            for (int d = 0; d < DV4; d++)
                o[d] *= corr;
            for (int u = 0; u < TK; u++) {
                float pu = p[u / 4][u % 4];
                for (int d = 0; d < DV4; d++)
                    o[d] += pu * vs[u][d];
            }
            mx = mn;
            seen = true;
        }
    }

    if (m >= pc.M)
        return;
    if (keep) { /* more chunks follow: the state waits in st */
        for (int d = 0; d < DVMAX; d++)
            if (d < pc.Dv)
                st[sb + uint(d)] = o[d / 4][d % 4];
        st[sb + uint(pc.Dv)] = mx;
        st[sb + uint(pc.Dv) + 1u] = l;
        return;
    }
    int h = hk * pc.G + g;
    float inv = seen ? 1.0 / l : 0.0; /* l >= 1 once seen (the max key weighs exp(0)) */
    uint ob = pc.o_off + uint(b) * pc.onb0 + uint(h) * pc.onb1 + uint(i) * pc.onb2;
    if (DTO == RQ_VK_DT_F32) {
        for (int d = 0; d < DVMAX; d++)
            if (d < pc.Dv)
                outv[ob + uint(d)] = floatBitsToUint(o[d / 4][d % 4] * inv);
    } else {
        /* the row is this invocation's: a word holding two of its elements is stored whole; only a
         * word shared with a neighbour row or a gap of the view takes the atomic 16-bit store. With
         * an odd start, element d-1 (carried) and d share a word. */
        bool odd = (ob & 1u) != 0u;
        float prev = 0.0;
        for (int d = 0; d < DVMAX; d += 2) {
            float x0 = o[d / 4][d % 4] * inv, x1 = o[d / 4][d % 4 + 1] * inv;
            uint idx = ob + uint(d);
            if (!odd) {
                if (d + 1 < pc.Dv)
                    outv[idx >> 1] = rq_to_bits16(x0, DTO) | (rq_to_bits16(x1, DTO) << 16);
                else if (d < pc.Dv)
                    RQ_STORE(outv, idx, DTO, x0);
            } else if (d == 0) {
                RQ_STORE(outv, idx, DTO, x0);
            } else if (d < pc.Dv) {
                outv[idx >> 1] = rq_to_bits16(prev, DTO) | (rq_to_bits16(x0, DTO) << 16);
            } else if (d - 1 < pc.Dv) {
                RQ_STORE(outv, idx - 1u, DTO, prev);
            }
            prev = x1;
        }
        if (odd && DVMAX - 1 < pc.Dv)
            RQ_STORE(outv, ob + uint(DVMAX - 1), DTO, prev);
    }
    if (pc.with_lse != 0)
        lse[pc.l_off + uint(b) * pc.lnb0 + uint(h) * pc.lnb1 + uint(i) * pc.lnb2] =
            seen ? mx + log(l) : uintBitsToFloat(0xFF800000u);
}
