#version 450
/* Scores for few query rows per KV head (decode: M = G*Sq <= RQ_VK_FEW_M), the shape scores.comp
 * handles badly: its 64 x 64 tiles would compute 64 rows to keep one. Here a work-group of 64
 * invocations serves one (batch, KV head): it stages the M rotated query rows in shared memory once,
 * then each invocation takes a key, reads its rotated row once and accumulates all M dot products in
 * registers. Same bindings and push constants as scores.comp (the host picks one or the other).
 * Measured on lavapipe (ropeqk-bench --vulkan, decode Hq32/Hkv8 Sk=8192 D=128 f32): scores.comp
 * took 4.6-8.1 s per call, this shader (with the RoPE pass) 0.28-0.37 s (pocl: 19 ms). On a GPU the key rows are read
 * with a stride of D floats between neighbouring invocations; a transposed Kr would coalesce them.
 * Soft-capping (pc.softcap > 0) is applied as each score is stored, as in scores.comp. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x = 64) in;

layout(std430, binding = RQ_VK_SC_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_SC_KR) readonly buffer Kr { float kr[]; };
layout(std430, binding = RQ_VK_SC_QPOS) readonly buffer QPos { int qpos[]; };
layout(std430, binding = RQ_VK_SC_KPOS) readonly buffer KPos { int kpos[]; };
layout(std430, binding = RQ_VK_SC_OUT) writeonly buffer Out { float outv[]; };
RQ_VK_PC_BLOCK(RQ_VK_SC_PC)

#include "common.glsl"
#include "tanh.glsl"

#define FM RQ_VK_FEW_M
shared float qs[FM][RQ_VK_FEW_DMAX];

void main()
{
    int lid = int(gl_LocalInvocationID.x);
    int bkv = int(gl_WorkGroupID.y), Hkv = pc.Hq / pc.G;
    int b = bkv / Hkv, hkv = bkv % Hkv;
    int M = pc.G * pc.Sq;
    /* row r is query head hkv*G + r/Sq, query row r%Sq */
    for (int e = lid; e < M * pc.D; e += 64) {
        int r = e / pc.D, d = e % pc.D;
        int bhq = b * pc.Hq + hkv * pc.G + r / pc.Sq;
        qs[r][d] = qr[pc.qr_off + (uint(bhq) * uint(pc.Sq) + uint(r % pc.Sq)) * uint(pc.D) + uint(d)];
    }
    barrier();
    for (int j = int(gl_WorkGroupID.x) * 64 + lid; j < pc.Sk; j += 64 * int(gl_NumWorkGroups.x)) {
        float acc[FM];
        for (int r = 0; r < FM; r++)
            acc[r] = 0.0;
        uint kb = pc.kr_off + (uint(bkv) * uint(pc.Sk) + uint(j)) * uint(pc.D);
        for (int d = 0; d < pc.D; d++) {
            float k = kr[kb + uint(d)];
            for (int r = 0; r < FM; r++)
                acc[r] += qs[r][d] * k;
        }
        int pk = pc.use_kpos != 0 ? kpos[pc.kpos_off + uint(j)] : pc.k_base + j;
        for (int r = 0; r < FM; r++) {
            if (r >= M)
                break;
            int hq = hkv * pc.G + r / pc.Sq, i = r % pc.Sq;
            int pq = pc.use_qpos != 0 ? qpos[pc.qpos_off + uint(i)] : pc.q_base + i;
            float sc = pc.softcap > 0.0 ? rq_softcap(acc[r], pc.softcap) : acc[r];
            float v = rq_masked(pq, pk, pc.causal != 0, pc.window) ? uintBitsToFloat(0xFF800000u) : sc;
            outv[pc.out_off + uint(b) * pc.onb0 + uint(hq) * pc.onb1 + uint(i) * pc.onb2 + uint(j) * pc.onb3] = v;
        }
    }
}
