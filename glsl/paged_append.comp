#version 450
/* Paged append: row [s][hk][t] of k_new or v_new -> token lens[s] + t of sequence s, unrotated, a unit
 * (32-bit word, or 16-bit half when the views are not word-aligned) per invocation. Halves are
 * written with common.glsl's two atomics: the other half of the word may be another invocation's. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x = RQ_VK_PA_WG) in;

layout(std430, binding = RQ_VK_PA_SRC) readonly buffer Src { uint src[]; };
layout(std430, binding = RQ_VK_PA_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_PA_DST) buffer Dst { uint dst[]; };
RQ_VK_PC_BLOCK(RQ_VK_PA_PC)

void main()
{
    const uint u = gl_GlobalInvocationID.x;
    if (u >= uint(pc.units))
        return;
    for (int t = int(gl_WorkGroupID.y); t < pc.n_new; t += int(gl_NumWorkGroups.y))
        for (int sh = int(gl_WorkGroupID.z); sh < pc.rows; sh += int(gl_NumWorkGroups.z)) {
            int s = sh / pc.Hkv, hk = sh % pc.Hkv;
            int tok = meta[pc.lens_off + uint(s)] + t;
            uint page = uint(meta[pc.pages_off + uint(meta[s]) + uint(tok / pc.ps)]), slot = uint(tok % pc.ps);
            uint si = pc.src_off + uint(s) * pc.snb0 + uint(hk) * pc.snb1 + uint(t) * pc.snb2 + u;
            uint di = pc.dst_off + page * pc.dnb0 + uint(hk) * pc.dnb1 + slot * pc.dnb2 + u;
            if (pc.words != 0) {
                dst[di] = src[si];
            } else {
                uint v = (src[si >> 1] >> ((si & 1u) * 16u)) & 0xFFFFu, sh_ = (di & 1u) * 16u;
                atomicAnd(dst[di >> 1], ~(0xFFFFu << sh_));
                atomicOr(dst[di >> 1], v << sh_);
            }
        }
}
