#version 450
/* Paged append into an 8-bit cache (docs/conventions.md section 12): new row [s][hk][t] of k_new or
 * v_new (f32, f16 or bf16) quantized into token lens[s] + t of sequence s, as cl/quant.cl's
 * paged_append_q8: one invocation per row, two passes over its dims (the absmax, with whether the
 * row holds a NaN or an infinity; then the codes), the row's scale written beside the cache.
 *
 * The cache is bound as uint words (no 8-bit storage feature): a row's bytes start at any byte
 * offset, so the invocation stores the words that lie wholly inside its row plainly (no other row has
 * a byte there) and the at most two words it shares with its neighbours byte by byte with two atomics
 * on disjoint bits (clear ours, set ours), the 16-bit stores' way in common.glsl: no alignment beyond
 * the dtype's is asked of the caller. Loop trips per invocation: vk_contract.h's RQ_VK_PQ_TRIPS. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_contract.h"

layout(local_size_x = RQ_VK_PA_WG) in;
layout(constant_id = RQ_VK_SC_DT_B) const int QDT = RQ_VK_DT_I8; /* the cache's */

layout(std430, binding = RQ_VK_PQ_SRC) readonly buffer Src { uint src[]; };
layout(std430, binding = RQ_VK_PQ_META) readonly buffer Meta { int meta[]; };
layout(std430, binding = RQ_VK_PQ_DST) buffer Dst { uint dst[]; };
layout(std430, binding = RQ_VK_PQ_SCALE) writeonly buffer Scale { uint scale[]; }; /* f32 bits */
RQ_VK_PC_BLOCK(RQ_VK_PQ_PC)

#include "common.glsl"
#include "quant.glsl"

/* Element i of the new rows as the bits of an f32 (exact: f16 and bf16 widen without rounding). */
uint src_bits(uint i)
{
    if (pc.sdt == RQ_VK_DT_F32)
        return src[i];
    const uint h = (src[i >> 1] >> ((i & 1u) * 16u)) & 0xFFFFu;
    return pc.sdt == RQ_VK_DT_F16 ? rq_f16_to_f32_bits(h) : h << 16;
}

void main()
{
    const int row = int((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
                        gl_LocalInvocationID.x);
    if (row >= pc.rows)
        return;
    const int t = row % pc.n_new, sh = row / pc.n_new, s = sh / pc.Hkv, hk = sh % pc.Hkv;
    const int tok = meta[pc.lens_off + uint(s)] + t;
    const uint page = uint(meta[pc.pages_off + uint(meta[s]) + uint(tok / pc.ps)]), slot = uint(tok % pc.ps);
    const uint x0 = pc.src_off + uint(s) * pc.snb0 + uint(hk) * pc.snb1 + uint(t) * pc.snb2;
    const uint b0 = pc.dst_off + page * pc.dnb0 + uint(hk) * pc.dnb1 + slot * pc.dnb2, b1 = b0 + uint(pc.dim);
    /* the absmax as the largest magnitude's bits (an unsigned compare orders non-negative floats) */
    uint amax = 0u;
    bool finite = true;
    for (int d = 0; d < pc.dim; d++) {
        const uint mag = src_bits(x0 + uint(d)) & 0x7FFFFFFFu;
        finite = finite && mag < 0x7F800000u;
        amax = max(amax, mag);
    }
    /* a NaN or an infinity in the row: scale NaN; absmax below 2^-90 (zeros included): scale 0; both
     * with every code 0 */
    const bool zero = !finite || amax < (37u << 23);
    const float qmax = QDT == RQ_VK_DT_I8 ? 127.0 : QDT == RQ_VK_DT_E4M3 ? 448.0 : 57344.0;
    const uint sc = !finite ? 0x7FC00000u : zero ? 0u : rq_div_rn_bits(amax, floatBitsToUint(qmax));
    /* the codes, a word at a time: bytes [b, e) of word w belong to this row */
    for (uint b = b0; b < b1;) {
        const uint w = b >> 2, e = min(b1, (w + 1u) << 2);
        uint word = 0u, mask = 0u;
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            const uint bi = (w << 2) + k;
            if (bi >= b && bi < e) {
                const uint code = zero ? 0u : rq_q8_code(rq_div_rn_bits(src_bits(x0 + (bi - b0)), sc), QDT);
                word |= code << (8u * k);
                mask |= 0xFFu << (8u * k);
            }
        }
        if (mask == 0xFFFFFFFFu) {
            dst[w] = word;
        } else { /* a word shared with a neighbouring row (or bytes outside any row) */
            atomicAnd(dst[w], ~mask);
            atomicOr(dst[w], word);
        }
        b = e;
    }
    scale[pc.scale_off + (page * uint(pc.Hkv) + uint(hk)) * uint(pc.ps) + slot] = sc;
}
