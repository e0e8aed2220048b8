#version 450
/* Paged decode, pass 2: the splits of each (sequence, query head) row joined, as cl/paged.cl does:
 * M = max m_i, L = sum l_i e^(m_i - M), O = sum o_i e^(m_i - M) / L, LSE = M + ln L, over the splits
 * with something unmasked (l_i > 0; paged.comp writes m = -FLT_MAX, l = 0, o = 0 for the others, so
 * exp() never sees a sentinel); a row with nothing unmasked gives O = 0, LSE = -inf. A split whose l is
 * NaN (a non-finite key seen, docs/conventions.md section 9) takes part too (tests are l == 0, which
 * NaN fails, never l > 0): O and LSE end NaN. An invocation per (V dim, row); splits from
 * ceil(len / kps) on were not written by pass 1 and are not read.
 * Attention sinks (pc.use_sinks): the head's logit s_h joins once, here, after every split: M takes it
 * into the max, L adds e^(s_h - M) and carries no value; a row with nothing unmasked gives O = 0 and
 * LSE = s_h exactly. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x = RQ_VK_PC_WG) in;
layout(constant_id = RQ_VK_SC_DT_O) const int ODT = 0;

layout(std430, binding = RQ_VK_PC_PART) readonly buffer Part { float part[]; };
layout(std430, binding = RQ_VK_PC_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_PC_OUT) buffer Out { uint outv[]; };
layout(std430, binding = RQ_VK_PC_LSE) writeonly buffer Lse { float lsev[]; };
layout(std430, binding = RQ_VK_PC_SINK) readonly buffer Sinks { float sinkv[]; }; /* [Hq] */
RQ_VK_PC_BLOCK(RQ_VK_PC_PC)

#include "common.glsl"

void main()
{
    const int dv = int(gl_GlobalInvocationID.x);
    if (dv >= pc.Dv)
        return; /* no barriers here */
    for (int row = int(gl_WorkGroupID.y); row < pc.rows; row += int(gl_NumWorkGroups.y)) {
        int s = row / pc.Hq, h = row % pc.Hq;
        int len = meta[pc.lens_off + uint(s)];
        int nsp = (len + pc.kps - 1) / pc.kps;
        uint r0 = uint(row) * uint(pc.nsplit);
        /* a split with nothing unmasked has l = 0 (and m = -FLT_MAX, o = 0): it takes no part */
        float M = 0.0;
        bool none = true;
        for (int i = 0; i < nsp; i++) {
            uint r = r0 + uint(i);
            if (!(part[pc.ml_off + 2u * r + 1u] == 0.0)) {
                float mi = part[pc.ml_off + 2u * r];
                M = none ? mi : max(M, mi);
                none = false;
            }
        }
        float L = 0.0, o = 0.0;
        if (!none)
            for (int i = 0; i < nsp; i++) {
                uint r = r0 + uint(i);
                float li = part[pc.ml_off + 2u * r + 1u];
                if (!(li == 0.0)) {
                    float mi = part[pc.ml_off + 2u * r];
                    float w = mi == M ? 1.0 : exp(mi - M);
                    L = fma(li, w, L);
                    o = fma(part[r * uint(pc.Dv) + uint(dv)], w, o);
                }
            }
        float lse = none ? uintBitsToFloat(0xFF800000u) : M + log(L);
        if (pc.use_sinks != 0) { /* the sink: once, after the splits */
            const float sk = sinkv[h];
            const float mx = none ? sk : max(M, sk);
            const float a = none ? 0.0 : (M == mx ? 1.0 : exp(M - mx));
            const float lt = L * a + (sk == mx ? 1.0 : exp(sk - mx));
            o *= a; /* 0 for a row with nothing unmasked */
            L = lt;
            lse = none ? sk : mx + log(lt);
            none = false; /* O = o / L: 0 where nothing was unmasked */
        }
        float res = none ? 0.0 : o / L;
        /* nbat: the dense decode's sequence s = i * nbat + b is row i of batch entry b (vk_dense.c);
         * the paged decode passes nbat = n */
        const uint sb = uint(s % pc.nbat), si = uint(s / pc.nbat);
        uint oi = pc.out_off + sb * pc.onb0 + si * pc.onb2 + uint(h) * pc.onb1 + uint(dv) * pc.onb3;
        RQ_STORE(outv, oi, ODT, res)
        if (pc.use_lse != 0 && dv == 0)
            lsev[pc.lse_off + sb * pc.lnb0 + si * pc.lnb2 + uint(h) * pc.lnb1] = lse;
    }
}
