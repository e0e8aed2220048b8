#version 450
/* Prefill scores on cooperative matrices (RQ_CM_REAL 1) or their emulation (0): S = Q K^T from the
 * split pass's planes (cm_split.comp; glsl/vk_cm.h), one BM x BN tile of one (batch, KV head) per
 * work-group, rows m = g * Sq + i over its G query heads (GQA packed: K is loaded once for them).
 * Its BM / 16 subgroups each multiply 16 rows of Q by the tile's K (accurate: hi hi + hi lo + lo hi;
 * fast: hi hi) and store the accumulators into sS; then every invocation writes scores along keys
 * (consecutive invocations, consecutive keys): S = S' qf kf (the rows' undo factors, exact powers of
 * two), -inf where masked (select), soft-capped, NaN where a row of Q or K is not finite (its factor;
 * the planes hold zeros there). A tile the mask hides from every row skips the products and writes
 * -inf. Error bounds: docs/tensor-cores.md. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_contract.h"
#include "vk_cm.h"
#include "cm_ops.glsl"

layout(local_size_x_id = RQ_VK_SC_WG) in;
layout(constant_id = RQ_VK_SC_WG) const int NT = 128;
layout(constant_id = RQ_VK_SC_K1) const int BM = 64;
layout(constant_id = RQ_VK_SC_K2) const int BN = 64;

const int NSG = BM / 16, SG = NT / NSG, NSA = BN / 16;
const int SSTR = BN + 8;

#include "common.glsl"
#include "tanh.glsl"

layout(std430, binding = RQ_CM_SC_QP) readonly buffer QP { CM_H4 qp[]; };
layout(std430, binding = RQ_CM_SC_KP) readonly buffer KP { CM_H4 kp[]; };
layout(std430, binding = RQ_CM_SC_SC) readonly buffer SC { float scv[]; };
layout(std430, binding = RQ_CM_SC_QPOS) readonly buffer QPos { int qpos[]; };
layout(std430, binding = RQ_CM_SC_KPOS) readonly buffer KPos { int kpos[]; };
layout(std430, binding = RQ_CM_SC_OUT) writeonly buffer Out { float outv[]; };
RQ_VK_PC_BLOCK(RQ_CM_SC_PC)

shared float sS[BM * SSTR];
shared int rpos[BM];
shared int cpos[BN];
shared float kfac[BN];

int cm_lane;

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
    const int M = pc.M, bk = int(gl_WorkGroupID.z), b = bk / pc.Hkv, hk = bk - b * pc.Hkv;
    const int j0 = int(gl_WorkGroupID.x) * BN, m0 = int(gl_WorkGroupID.y) * BM;
    const int nk = min(BN, pc.Sk - j0);
    const bool causal = pc.causal != 0, masks = causal || pc.window != 0u;
    const bool accurate = (pc.flags & RQ_CM_F_ACCURATE) != 0;
    const uint dp4 = uint(pc.dp / 4), nbk = gl_NumWorkGroups.z;
    const uint ks_off = nbk * uint(pc.Mp);
    const uint qlo4 = nbk * uint(pc.Mp) * dp4, klo4 = nbk * uint(pc.Skp) * dp4;

    for (int t = lid; t < BM; t += NT) {
        int i = min(m0 + t, M - 1) % pc.Sq;
        rpos[t] = pc.use_qpos != 0 ? qpos[pc.qpos_off + uint(i)] : pc.q_base + i;
    }
    for (int t = lid; t < BN; t += NT) {
        int j = j0 + min(t, nk - 1);
        cpos[t] = pc.use_kpos != 0 ? kpos[pc.kpos_off + uint(j)] : pc.k_base + j;
        kfac[t] = scv[ks_off + uint(bk) * uint(pc.Skp) + uint(j0 + t)];
    }
    barrier();
    bool skip = false;
    if (masks) { /* uniform */
        int pq_lo = 0x7FFFFFFF, pq_hi = int(0x80000000u), pk_lo = 0x7FFFFFFF, pk_hi = int(0x80000000u);
        for (int t = 0; t < BM; t++) {
            pq_lo = min(pq_lo, rpos[t]);
            pq_hi = max(pq_hi, rpos[t]);
        }
        for (int t = 0; t < BN; t++) {
            pk_lo = min(pk_lo, cpos[t]);
            pk_hi = max(pk_hi, cpos[t]);
        }
        skip = (causal && pk_lo > pq_hi) || (pc.window != 0u && pq_lo >= pk_hi && uint(pq_lo) - uint(pk_hi) >= pc.window);
    }
    if (!skip) {
        CM_ACC sacc[NSA];
        CM_UNROLL for (int j = 0; j < NSA; j++)
            CM_ZERO(sacc[j]);
        const uint qo4 = (uint(bk) * uint(pc.Mp) + uint(m0 + 16 * sg)) * dp4;
        const uint ko4 = (uint(bk) * uint(pc.Skp) + uint(j0)) * dp4;
        CM_QK_TILE(sacc, qo4, ko4, dp4, pc.dp / 16, qlo4, klo4, accurate)
        CM_UNROLL for (int j = 0; j < NSA; j++)
            CM_STORE_S(sacc[j], (16 * sg) * SSTR + 16 * j, SSTR);
    }
    barrier();

    const bool cap = pc.softcap > 0.0;
    const float NEGINF = uintBitsToFloat(0xFF800000u);
    for (int e = lid; e < BM * BN; e += NT) {
        const int r = e / BN, u = e - r * BN, m = m0 + r;
        if (m >= M || u >= nk)
            continue;
        float s = NEGINF;
        if (!rq_masked(rpos[r], cpos[u], causal, pc.window)) {
            s = sS[r * SSTR + u] * scv[uint(bk) * uint(pc.Mp) + uint(m)] * kfac[u];
            if (cap)
                s = rq_softcap(s, pc.softcap);
        }
        const int g = m / pc.Sq, i = m - g * pc.Sq;
        outv[pc.out_off + uint(b) * pc.onb0 + uint(hk * pc.G + g) * pc.onb1 + uint(i) * pc.onb2 +
             uint(j0 + u) * pc.onb3] = s;
    }
}
