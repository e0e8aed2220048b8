#version 450
/* S = Qr . Kr^T with the masks, into the caller's output view. Qr [B*Hq][Sq][D] (already times the
 * scale) and Kr [B*Hkv][Sk][D] are the rotated f32 scratch rows of rotate.comp.
 * The tiled shape of every GPU GEMM (CLBlast's XGEMM): a work-group of 16 x 16 invocations owns a
 * TILE x TILE tile of scores (TILE = 16 T), stages TK head dims of its TILE query rows and TILE keys
 * in shared memory per step, and each invocation accumulates a T x T register block from them (2T
 * loads per T^2 FMAs from shared memory instead of 2 per 1 from global). T and TK are
 * specialization constants chosen by the tuner (vk_contract.h). Rows and keys are interleaved across
 * invocations (row ty + 16*r) so neighbouring invocations read neighbouring shared words.
 * Soft-capping (pc.softcap > 0: C tanh(S / C), tanh.glsl) is applied as each score is stored: no
 * pass of its own. Positions only decide the masks (M-RoPE: the host passes offsets). */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = RQ_VK_SC_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_SC_KR) readonly buffer Kr { float kr[]; };
layout(std430, binding = RQ_VK_SC_QPOS) readonly buffer QPos { int qpos[]; };
layout(std430, binding = RQ_VK_SC_KPOS) readonly buffer KPos { int kpos[]; };
layout(std430, binding = RQ_VK_SC_OUT) writeonly buffer Out { float outv[]; };
RQ_VK_PC_BLOCK(RQ_VK_SC_PC)

#include "common.glsl"
#include "tanh.glsl"

layout(constant_id = RQ_VK_SC_K1) const int T = RQ_VK_SC_T_DEF;
layout(constant_id = RQ_VK_SC_K2) const int TK = RQ_VK_SC_TK_DEF;
const int TILE = RQ_VK_SC_SIDE * T;
shared float qs[TK][TILE + 1]; /* [d][row]: +1 keeps the transposed stores off one bank */
shared float ks[TK][TILE + 1];

void main()
{
    int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
    int lid = ty * 16 + tx;
    int bhq = int(gl_WorkGroupID.z);
    int bkv = (bhq / pc.Hq) * (pc.Hq / pc.G) + (bhq % pc.Hq) / pc.G;
    int j0 = int(gl_WorkGroupID.x) * TILE, i0 = int(gl_WorkGroupID.y) * TILE;
    uint qbase = pc.qr_off + uint(bhq) * uint(pc.Sq) * uint(pc.D);
    uint kbase = pc.kr_off + uint(bkv) * uint(pc.Sk) * uint(pc.D);

    /* a tile whose every score is masked skips the loads and the products (causal prefill: half) */
    bool skip = false;
    if ((pc.causal != 0 || pc.window != 0u) && pc.use_qpos == 0 && pc.use_kpos == 0) {
        int imax = min(i0 + TILE, pc.Sq) - 1, jmax = min(j0 + TILE, pc.Sk) - 1;
        int pq_lo = pc.q_base + i0, pq_hi = pc.q_base + imax, pk_lo = pc.k_base + j0, pk_hi = pc.k_base + jmax;
        skip = (pc.causal != 0 && pk_lo > pq_hi) ||
               (pc.window != 0u && pq_lo >= pk_hi && uint(pq_lo) - uint(pk_hi) >= pc.window);
    }

    float acc[T][T];
    for (int r = 0; r < T; r++)
        for (int c = 0; c < T; c++)
            acc[r][c] = 0.0;
    if (!skip) {
        for (int d0 = 0; d0 < pc.D; d0 += TK) {
            /* 256 invocations stage TILE x TK values of each side, consecutive d per row */
            for (int e = lid; e < TILE * TK; e += 256) {
                int row = e / TK, d = e % TK;
                int gi = i0 + row, gj = j0 + row, gd = d0 + d;
                qs[d][row] = gi < pc.Sq && gd < pc.D ? qr[qbase + uint(gi) * uint(pc.D) + uint(gd)] : 0.0;
                ks[d][row] = gj < pc.Sk && gd < pc.D ? kr[kbase + uint(gj) * uint(pc.D) + uint(gd)] : 0.0;
            }
            barrier();
            for (int d = 0; d < TK; d++) {
                float a[T], b[T];
                for (int r = 0; r < T; r++)
                    a[r] = qs[d][ty + 16 * r];
                for (int c = 0; c < T; c++)
                    b[c] = ks[d][tx + 16 * c];
                for (int r = 0; r < T; r++)
                    for (int c = 0; c < T; c++)
                        acc[r][c] += a[r] * b[c];
            }
            barrier();
        }
    }

    for (int r = 0; r < T; r++) {
        int i = i0 + ty + 16 * r;
        if (i >= pc.Sq)
            continue;
        int pq = pc.use_qpos != 0 ? qpos[pc.qpos_off + uint(i)] : pc.q_base + i;
        for (int c = 0; c < T; c++) {
            int j = j0 + tx + 16 * c;
            if (j >= pc.Sk)
                continue;
            int pk = pc.use_kpos != 0 ? kpos[pc.kpos_off + uint(j)] : pc.k_base + j;
            float sc = pc.softcap > 0.0 ? rq_softcap(acc[r][c], pc.softcap) : acc[r][c];
            float v = rq_masked(pq, pk, pc.causal != 0, pc.window) ? uintBitsToFloat(0xFF800000u) : sc;
            uint o = pc.out_off + uint(bhq / pc.Hq) * pc.onb0 + uint(bhq % pc.Hq) * pc.onb1 + uint(i) * pc.onb2 +
                     uint(j) * pc.onb3;
            outv[o] = v;
        }
    }
}
