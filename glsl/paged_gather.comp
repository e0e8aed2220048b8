#version 450
/* Prefill chunks over the paged cache (src/vulkan/vk_paged_chunk.c): a sequence's cached K or V rows
 * [t][hk] gathered from its pages (token t at slot t % ps of page pages[t / ps]) into dense BSHD
 * scratch [t][hk][dim], unrotated, in the cache's dtype, for the attention shader of the paged plan's
 * companion plan (which rotates each key once for all the chunk's rows). A unit (32-bit word, or
 * 16-bit half when a view is not word-aligned) per invocation; halves go through common.glsl's
 * two-atomic store, since two rows of an odd head dim share a word of the scratch. An 8-bit cache (QDT)
 * is gathered as its values instead, (float)code * its row's scale in f32, the values paged.comp
 * reads (common.glsl's rq_q8_value; the code taken out of its word), since the companion's attention
 * takes no 8-bit dtype: a value (an f32 word of the scratch) per invocation. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x = RQ_VK_PA_WG) in;
layout(constant_id = RQ_VK_SC_DT_B) const int QDT = RQ_VK_DT_F32; /* an 8-bit cache's dtype, else 0 */

layout(std430, binding = RQ_VK_GA_SRC) readonly buffer Src { uint src[]; };
layout(std430, binding = RQ_VK_GA_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_GA_DST) buffer Dst { uint dst[]; };
layout(std430, binding = RQ_VK_GA_SCALE) readonly buffer Scale { float scale[]; }; /* 8-bit caches only */
RQ_VK_PC_BLOCK(RQ_VK_GA_PC)

#include "common.glsl"

void main()
{
    const uint u = gl_GlobalInvocationID.x;
    if (u >= uint(pc.units))
        return;
    const uint pbase = pc.pages_off + uint(meta[pc.row]);
    for (int t = int(gl_WorkGroupID.y); t < pc.len; t += int(gl_NumWorkGroups.y))
        for (int hk = int(gl_WorkGroupID.z); hk < pc.Hkv; hk += int(gl_NumWorkGroups.z)) {
            const uint page = uint(meta[pbase + uint(t / pc.ps)]), slot = uint(t % pc.ps);
            const uint si = pc.src_off + page * pc.snb0 + uint(hk) * pc.snb1 + slot * pc.snb2 + u;
            const uint di = uint(t) * pc.dnb2 + uint(hk) * pc.dnb1 + u;
            if (QDT >= RQ_VK_DT_I8) { /* si: a byte */
                const float sc = scale[pc.scale_off + (page * uint(pc.Hkv) + uint(hk)) * uint(pc.ps) + slot];
                dst[di] = floatBitsToUint(rq_q8_value((src[si >> 2] >> ((si & 3u) * 8u)) & 0xFFu, QDT) * sc);
            } else if (pc.words != 0) {
                dst[di] = src[si];
            } else {
                const uint v = (src[si >> 1] >> ((si & 1u) * 16u)) & 0xFFFFu, sh = (di & 1u) * 16u;
                atomicAnd(dst[di >> 1], ~(0xFFFFu << sh));
                atomicOr(dst[di >> 1], v << sh);
            }
        }
}
