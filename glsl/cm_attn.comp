#version 450
/* Fused attention on cooperative matrices (RQ_CM_REAL 1) or their emulation (0), FlashAttention-2
 * shaped: S = Q K^T and O += P V as 16 x 16 x 16 products, the softmax in f32 per row between them.
 * Operands: the split pass's planes (cm_split.comp: Q and K rotated in f32 by rotate.comp, each row
 * scaled by a power of two and split into f16 hi + lo; V likewise), glsl/vk_cm.h; the products
 * (cm_ops.glsl) are the only part that differs between the two builds.
 *
 * Work: a work-group owns BM query rows of one (batch, KV head) (rows m = g * Sq + i over the G query
 * heads of the KV head: GQA packed, as attention.comp) and a column block of NOB * 16 dims of V; its
 * BM / 16 subgroups own 16 rows each. Per tile of BN keys:
 *   1. S: each subgroup multiplies its 16 rows of Q by the tile's K (BN / 16 accumulators, steps of
 *      16 head dims; accurate: hi hi + hi lo + lo hi, fast: hi hi) and stores them into sS;
 *   2. each row's TPR = NT / BM invocations read their keys of the row: the undo factors
 *      (S = S' qf kf, exact powers of two), masks (keys past Sk, causal, window: select, never
 *      arithmetic), soft-capping, the masking rule's NaN (an unmasked key whose score or V row is not
 *      finite marks the row), the row max m_t through shared memory;
 *   3. lazy rescaling: the row keeps its reference max m until a tile's max exceeds it by more than
 *      TAU = 8 ln 2, so P = exp(S - m) <= 2^8; only then are the row's O accumulators multiplied by
 *      exp(m_old - m_new), through shared memory (accumulators have no row layout in
 *      GL_KHR_cooperative_matrix) and only when some row of the block needs it (rare after the first
 *      tiles); a row with no key so far has O = 0 and simply takes m_t;
 *   4. P'' = P 2^7 vf_j / VS (vf_j: V row j's undo factor, VS: the largest so far, so the O
 *      accumulators hold O 2^7 / VS and grow by a uniform factor when VS does) is split into f16
 *      hi + lo (P'' <= 2^15) and written into the shared P tile; the row sums l add P in f32;
 *   5. O += P V: each subgroup multiplies its 16 rows of P by the tile's V for its NOB column
 *      accumulators (accurate: Ph Vh + Ph Vl + Pl Vh, with Vl only for f32/bf16 V).
 * Tiles that the causal mask or the window hides from every row of the block are skipped (uniform);
 * row blocks run in reverse order, the longest (causal) first. At the end: O = acc VS 2^-7 / l, LSE =
 * m + ln l (sinks: as attention.comp's finish_row), a marked row NaN in O and LSE, a fully masked row
 * O = 0 and LSE = -inf (or the sink). Error bounds: docs/tensor-cores.md. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_contract.h"
#include "vk_cm.h"
#include "cm_ops.glsl"

layout(local_size_x_id = RQ_VK_SC_WG) in;
layout(constant_id = RQ_VK_SC_WG) const int NT = 128;  /* BM / 16 subgroups */
layout(constant_id = RQ_VK_SC_K1) const int BM = 64;   /* query rows per work-group */
layout(constant_id = RQ_VK_SC_K2) const int BN = 64;   /* keys per tile */
layout(constant_id = RQ_VK_SC_DT_A) const int NOB = 8; /* O accumulators (16 dims each) per subgroup */
layout(constant_id = RQ_VK_SC_DT_O) const int DTO = 0;

const int NSG = BM / 16, SG = NT / NSG, TPR = NT / BM, NSA = BN / 16;
const int SSTR = BN + 8;      /* floats per row of the S tile */
const int PSTR = BN / 4 + 2;  /* 4-half groups per row of a P plane */
const int G4 = BN / (4 * TPR); /* groups of 4 keys per invocation in the softmax */
const int KPI = 4 * G4;        /* keys per invocation */
const float NEGBIG = -3.4028234663852886e38;
const float TAU = 5.545177444479562; /* 8 ln 2: P = exp(S - m) <= 2^8 */

#include "common.glsl"
#include "tanh.glsl"

layout(std430, binding = RQ_CM_AT_QP) readonly buffer QP { CM_H4 qp[]; };
layout(std430, binding = RQ_CM_AT_KP) readonly buffer KP { CM_H4 kp[]; };
layout(std430, binding = RQ_CM_AT_VP) readonly buffer VP { CM_H4 vp[]; };
layout(std430, binding = RQ_CM_AT_SC) readonly buffer SC { float scv[]; };
layout(std430, binding = RQ_CM_AT_QPOS) readonly buffer QPos { int qpos[]; };
layout(std430, binding = RQ_CM_AT_KPOS) readonly buffer KPos { int kpos[]; };
layout(std430, binding = RQ_CM_AT_OUT) buffer Out { uint outv[]; };
layout(std430, binding = RQ_CM_AT_LSE) writeonly buffer Lse { float lse[]; };
layout(std430, binding = RQ_CM_AT_SINK) readonly buffer Sinks { float sinkv[]; };
RQ_VK_PC_BLOCK(RQ_CM_AT_PC)

/* RQ_CM_SHARED (vk_cm.h) counts exactly these */
shared float sS[BM * SSTR];       /* the S tile; the O accumulators' scratch (rescaling, output) */
shared CM_H4 sP[2 * BM * PSTR];   /* the P tile: hi plane, then lo plane */
shared float red[BM * TPR];       /* per row and invocation: max, then sums */
shared float red2[BM * TPR];      /* the tile's largest V factor; the row marks at the end */
shared float rfin[2 * BM];        /* per row: the O accumulators' factor (rescaling, output), LSE */
shared int rflag[2];              /* per tile parity: some row's O accumulators need rescaling */
shared int rpos[BM];
shared int cpos[BN];
shared float kfac[BN], vfac[BN];

int cm_lane; /* the lane in its subgroup (cm_ops.glsl's emulated products) */

bool nonfinite(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) >= 0x7F800000u; }

void main()
{
    const int lid = int(gl_LocalInvocationID.x);
#if RQ_CM_REAL
    const int sg = int(gl_SubgroupID);
    cm_lane = int(gl_SubgroupInvocationID);
#else
    const int sg = lid / SG;
    cm_lane = lid - sg * SG;
#endif
    const int r = lid / TPR, p = lid - r * TPR; /* the softmax's row and part */
    const int M = pc.M;
    const int ncb = (pc.dvp / 16 + NOB - 1) / NOB;
    const int gy = int(gl_WorkGroupID.y), bk = gy / ncb, cb = gy - bk * ncb, c0 = cb * NOB * 16;
    const int b = bk / pc.Hkv, hk = bk - b * pc.Hkv;
    const int m0 = (int(gl_NumWorkGroups.x) - 1 - int(gl_WorkGroupID.x)) * BM; /* longest blocks first */
    const bool causal = pc.causal != 0, masks = causal || pc.window != 0u;
    const bool accurate = (pc.flags & RQ_CM_F_ACCURATE) != 0, vlo = (pc.flags & RQ_CM_F_VLO) != 0;
    const uint dp4 = uint(pc.dp / 4), dvp4 = uint(pc.dvp / 4);
    /* the planes' fragments: the subgroup's 16 Q rows; K and V rows of the head */
    const uint qo4 = (uint(bk) * uint(pc.Mp) + uint(m0 + 16 * sg)) * dp4;
    const uint kh4 = uint(bk) * uint(pc.Skp) * dp4, vh4 = uint(bk) * uint(pc.Skp) * dvp4 + uint(c0 / 4);
    /* nbk = B * Hkv heads (the grid's y / ncb): where the factors of K and V and the lo planes start */
    const uint nbk = gl_NumWorkGroups.y / uint(ncb);
    const uint ks_off = nbk * uint(pc.Mp), vs_off = ks_off + nbk * uint(pc.Skp);
    const uint qlo4 = nbk * uint(pc.Mp) * dp4, klo4 = nbk * uint(pc.Skp) * dp4, vlo4 = nbk * uint(pc.Skp) * dvp4;

    /* the rows' positions (rows past M repeat row M-1: computed, never stored) */
    for (int t = lid; t < BM; t += NT) {
        int i = min(m0 + t, M - 1) % pc.Sq;
        rpos[t] = pc.use_qpos != 0 ? qpos[pc.qpos_off + uint(i)] : pc.q_base + i;
    }
    if (lid < 2)
        rflag[lid] = 0;
    barrier();
    const int pi = rpos[r];
    int pq_lo = 0x7FFFFFFF, pq_hi = int(0x80000000u);
    if (masks)
        for (int t = 0; t < BM; t++) {
            pq_lo = min(pq_lo, rpos[t]);
            pq_hi = max(pq_hi, rpos[t]);
        }
    const float qf = scv[uint(bk) * uint(pc.Mp) + uint(m0 + r)];

    CM_ACC oacc[NOB];
    CM_UNROLL for (int c = 0; c < NOB; c++)
        CM_ZERO(oacc[c]);
    float mref = NEGBIG, lpart = 0.0, VS = 0.0;
    bool pois = false;
    const bool kpa = masks && pc.use_kpos != 0;
    int tile = 0; /* tiles computed (not skipped): the parity of rflag */
    for (int j0 = 0; j0 < pc.Sk; j0 += BN) {
        const int nk = min(BN, pc.Sk - j0);
        /* the tile's key factors and positions (the previous tile's readers are past its last barrier) */
        for (int t = lid; t < BN; t += NT) {
            uint j = uint(bk) * uint(pc.Skp) + uint(j0 + t); /* rows past Sk: padding, factor 1 */
            kfac[t] = scv[ks_off + j];
            vfac[t] = scv[vs_off + j];
            cpos[t] = kpa ? kpos[pc.kpos_off + uint(j0 + min(t, nk - 1))] : pc.k_base + j0 + min(t, nk - 1);
        }
        barrier();
        if (masks) { /* a tile masked for every row of the block is skipped: uniform */
            int pk_lo = pc.k_base + j0, pk_hi = pc.k_base + j0 + nk - 1;
            if (kpa) {
                pk_lo = 0x7FFFFFFF;
                pk_hi = int(0x80000000u);
                for (int t = 0; t < BN; t++) {
                    pk_lo = min(pk_lo, cpos[t]);
                    pk_hi = max(pk_hi, cpos[t]);
                }
            }
            if ((causal && pk_lo > pq_hi) ||
                (pc.window != 0u && pq_lo >= pk_hi && uint(pq_lo) - uint(pk_hi) >= pc.window)) {
                barrier(); /* the next tile's factor stores wait for this tile's readers */
                continue;
            }
        }

        /* 1. S = Q K^T, the subgroup's 16 rows */
        {
            CM_ACC sacc[NSA];
            CM_UNROLL for (int j = 0; j < NSA; j++)
                CM_ZERO(sacc[j]);
            CM_QK_TILE(sacc, qo4, kh4 + uint(j0) * dp4, dp4, pc.dp / 16, qlo4, klo4, accurate)
            CM_UNROLL for (int j = 0; j < NSA; j++)
                CM_STORE_S(sacc[j], (16 * sg) * SSTR + 16 * j, SSTR);
        }
        barrier();

        /* 2. the row's keys (groups w * TPR + p): factors, masks, soft-cap, marks, the row max */
        float sv[KPI];
        float mloc = NEGBIG, vloc = 0.0;
        const bool cap = pc.softcap > 0.0;
        for (int w = 0; w < G4; w++)
            [[unroll]] for (int e = 0; e < 4; e++) {
                const int u = 4 * (w * TPR + p) + e;
                float s = sS[r * SSTR + u] * qf * kfac[u];
                const bool msk = u >= nk || (masks && rq_masked(pi, cpos[u], causal, pc.window));
                if (u < nk && !nonfinite(vfac[u]))
                    vloc = max(vloc, vfac[u]);
                if (!msk && cap)
                    s = rq_softcap(s, pc.softcap);
                const bool bad = !msk && (nonfinite(s) || nonfinite(vfac[u]));
                pois = pois || bad;
                s = msk || bad ? NEGBIG : s;
                sv[4 * w + e] = s;
                mloc = max(mloc, s);
            }
        red[r * TPR + p] = mloc;
        red2[r * TPR + p] = vloc;
        if (mref != NEGBIG && mloc > mref + TAU) /* the row's O needs rescaling (its max is past m + TAU) */
            atomicOr(rflag[tile & 1], 1);
        barrier();

        /* 3. the reference max, the rescaling */
        float mt = NEGBIG, vt = 0.0;
        for (int q = 0; q < TPR; q++) {
            mt = max(mt, red[r * TPR + q]);
            vt = max(vt, red2[r * TPR + q]);
        }
        float corr = 1.0;
        if (mref == NEGBIG) {
            mref = mt; /* no key so far: O = 0 */
        } else if (mt > mref + TAU) {
            corr = exp(mref - mt);
            mref = mt;
        }
        lpart *= corr;
        const float vsn = max(VS, vt), uf = VS > 0.0 ? VS / vsn : 1.0; /* uniform */
        if (rflag[tile & 1] != 0) { /* uniform: through shared memory, row by row */
            if (p == 0)
                rfin[r] = corr * uf;
            barrier();
            for (int c = 0; c < NOB; c++) {
                CM_STORE_S(oacc[c], 256 * sg, 16);
                barrier();
#if RQ_CM_REAL
                for (int e = cm_lane; e < 256; e += SG)
                    sS[256 * sg + e] *= rfin[16 * sg + e / 16];
#else /* no loop trips in the emulation (llvmpipe's budget): its subgroups have 32 invocations */
                [[unroll]] for (int i = 0; i < 256 / RQ_CM_EMU_SG; i++) {
                    const int e = cm_lane + RQ_CM_EMU_SG * i;
                    sS[256 * sg + e] *= rfin[16 * sg + e / 16];
                }
#endif
                barrier();
                CM_LOAD_S(oacc[c], 256 * sg, 16);
                barrier();
            }
        } else if (uf != 1.0) {
            CM_UNROLL for (int c = 0; c < NOB; c++)
                CM_SCALE(oacc[c], uf);
        }
        VS = vsn;
        if (lid == 0)
            rflag[(tile + 1) & 1] = 0;

        /* 4. P'' = exp(S - m) 2^7 vf / VS, split into f16 hi + lo, into the P tile */
        for (int w = 0; w < G4; w++) {
            vec4 ph, pl;
            [[unroll]] for (int e = 0; e < 4; e++) {
                const int u = 4 * (w * TPR + p) + e;
                const float s = sv[4 * w + e];
                const float pr = s == NEGBIG ? 0.0 : exp(s - mref);
                lpart += pr;
                const float x = pr == 0.0 ? 0.0 : pr * (RQ_CM_PSCALE * vfac[u] / VS);
                ph[e] = CM_F16(x);
                pl[e] = x - ph[e];
            }
            const int g = r * PSTR + w * TPR + p;
            sP[g] = CM_PACK4(ph);
            sP[BM * PSTR + g] = CM_PACK4(pl);
        }
        barrier();

        /* 5. O += P V, the subgroup's rows and column block */
        for (int ks = 0; ks < NSA; ks++) {
            CM_A pah; /* one declarator per declaration: glslang 13.1 gives the second of a list no use */
            CM_A pal;
            CM_LOAD_PA(pah, (16 * sg) * PSTR + 4 * ks, PSTR);
            if (accurate)
                CM_LOAD_PA(pal, BM * PSTR + (16 * sg) * PSTR + 4 * ks, PSTR);
            const uint vr4 = vh4 + uint(j0 + 16 * ks) * dvp4;
            CM_UNROLL for (int c = 0; c < NOB; c++) {
                CM_B vbh;
                CM_B vbl;
                CM_LOAD_VB(vbh, vr4 + uint(4 * c), dvp4);
                if (accurate && vlo)
                    CM_LOAD_VB(vbl, vr4 + uint(4 * c) + vlo4, dvp4);
                CM_STEP(CM_MMA_PV, oacc[c], pah, pal, vbh, vbl, accurate, accurate && vlo, PSTR, dvp4)
            }
        }
        barrier(); /* the P tile and sS are free for the next tile */
        tile++;
    }

    /* the rows' sums and marks, then each row's output factor and LSE */
    red[r * TPR + p] = lpart;
    red2[r * TPR + p] = pois ? 1.0 : 0.0;
    barrier();
    if (p == 0) {
        float l = 0.0;
        bool bad = false;
        for (int q = 0; q < TPR; q++) {
            l += red[r * TPR + q];
            bad = bad || red2[r * TPR + q] != 0.0;
        }
        const int m = m0 + r, g = min(m, M - 1) / pc.Sq, h = hk * pc.G + g;
        float f = l > 0.0 ? VS / (RQ_CM_PSCALE * l) : 0.0; /* l >= 1 once a key was unmasked */
        float lsev = l > 0.0 ? mref + log(l) : uintBitsToFloat(0xFF800000u);
        if ((pc.flags & RQ_CM_F_SINKS) != 0) { /* the sink s_h: in the denominator, no value */
            const float sk = sinkv[h];
            const float mx = l > 0.0 ? max(mref, sk) : sk;
            const float a = l > 0.0 ? (mref == mx ? 1.0 : exp(mref - mx)) : 0.0;
            const float lt = l * a + (sk == mx ? 1.0 : exp(sk - mx));
            f = l > 0.0 ? VS * a / (RQ_CM_PSCALE * lt) : 0.0;
            lsev = l > 0.0 ? mx + log(lt) : sk;
        }
        if (bad) {
            f = uintBitsToFloat(0x7FC00000u);
            lsev = f;
        }
        rfin[r] = f;
        rfin[BM + r] = lsev;
        if ((pc.flags & RQ_CM_F_LSE) != 0 && cb == 0 && m < M) {
            const int ii = m - g * pc.Sq;
            lse[pc.l_off + uint(b) * pc.lnb0 + uint(h) * pc.lnb1 + uint(ii) * pc.lnb2] = lsev;
        }
    }
    barrier();
    /* O: each accumulator through the subgroup's scratch; a lane writes CPL columns of one row */
    const int LPR = SG / 16, CPL = 16 / LPR;
    const int orow = cm_lane / LPR, ocol = (cm_lane - orow * LPR) * CPL;
    const int m = m0 + 16 * sg + orow, g = min(m, M - 1) / pc.Sq, ii = min(m, M - 1) - g * pc.Sq;
    const float f = rfin[16 * sg + orow];
    const uint ob = pc.o_off + uint(b) * pc.onb0 + uint(hk * pc.G + g) * pc.onb1 + uint(ii) * pc.onb2;
    for (int c = 0; c < NOB; c++) {
        CM_STORE_S(oacc[c], 256 * sg, 16);
        barrier();
        const int col = c0 + 16 * c + ocol;
        if (m < M && col < pc.Dv) {
            const int n = min(CPL, pc.Dv - col);
            const uint idx = ob + uint(col);
            for (int e = 0; e < n; e++) {
                const float x = sS[256 * sg + 16 * orow + ocol + e] * f;
                const uint o = idx + uint(e);
                if (DTO == RQ_VK_DT_F32) {
                    outv[o] = floatBitsToUint(x);
                } else if ((o & 1u) == 0u && e + 1 < n) { /* a whole word of this invocation's */
                    const float x1 = sS[256 * sg + 16 * orow + ocol + e + 1] * f;
                    outv[o >> 1] = rq_to_bits16(x, DTO) | (rq_to_bits16(x1, DTO) << 16);
                    e++;
                } else { /* the word's other half is another invocation's (or the view's padding) */
                    RQ_STORE(outv, o, DTO, x)
                }
            }
        }
        barrier();
    }
}
