#version 450
/* RoPE pass: every row of Q or K is rotated once and written as f32 into packed scratch
 * [bh][row][D] (Q times the score scale), which scores.comp and attention.comp read. One invocation
 * per (row, unit), a unit being a rotary pair (u < R/2) or a pass-through dim; it loops over all B*H
 * heads, so each (position, frequency) angle is computed once and reused by every head: RoPE costs
 * O(S*R) angle evaluations, never one per score. Consecutive invocations take consecutive units of a
 * row, so a work-group reads and writes whole runs of each row.
 * Variants (docs/conventions.md section 11): the rotated pairs lie inside [rot_off, rot_off + R), the
 * pass-through dims are [0, rot_off) and [rot_off + R, D) (rotary_offset; MLA: rot_off = D - R); under
 * M-RoPE a pair turns by the position of its stream (the freq table's 4th lane), read from the
 * [3][S] position array, stream-major. */
#extension GL_GOOGLE_include_directive : require
#include "vk_contract.h"

layout(local_size_x_id = RQ_VK_SC_WG) in;
layout(constant_id = RQ_VK_SC_DT_A) const int DT = 0;

layout(std430, binding = RQ_VK_ROT_SRC) readonly buffer Src { uint src[]; };
layout(std430, binding = RQ_VK_ROT_POS) readonly buffer Pos { int pos[]; };
layout(std430, binding = RQ_VK_ROT_FREQ) readonly buffer Freq { vec4 vfreq[]; };
layout(std430, binding = RQ_VK_ROT_DST) writeonly buffer Dst { float dst[]; };
layout(std430, binding = RQ_VK_ROT_PDST) writeonly buffer Pdst { int pdst[]; };
RQ_VK_PC_BLOCK(RQ_VK_ROT_PC)

#include "common.glsl"
#include "angle.glsl"

void main()
{
    int half_r = pc.R / 2;
    int unit = int(gl_GlobalInvocationID.x);
    if (unit >= half_r + (pc.D - pc.R))
        return;
    bool pt = unit >= half_r; /* pass-through dim: copied (times the scale for Q) */
    int ptd = unit - half_r;  /* the pass-through dims: [0, rot_off), then [rot_off + R, D) */
    int i0 = pt ? (ptd < pc.rot_off ? ptd : ptd + pc.R) : pc.rot_off + (pc.lay != 0 ? unit : 2 * unit);
    int i1 = pt ? i0 : pc.rot_off + (pc.lay != 0 ? unit + half_r : 2 * unit + 1);
    vec4 f = vfreq[min(unit, half_r - 1)]; /* in range for pass-through units too (unused there) */
    uint stream = pt ? 0u : uint(f.w) * uint(pc.S); /* M-RoPE: this frequency's row of the [3][S] positions */
    for (int row = int(gl_WorkGroupID.y); row < pc.S; row += int(gl_NumWorkGroups.y)) {
        /* the dense decode (src/vulkan/vk_dense.c): a q position array into the decode's metadata,
         * a copy per batch entry, by the one invocation of unit 0 (no transfer usage is asked of the
         * caller's position buffer) */
        if (pc.pd_nbat > 0 && unit == 0)
            for (int b = 0; b < pc.pd_nbat; b++)
                pdst[pc.pd_off + uint(row) * uint(pc.pd_nbat) + uint(b)] =
                    pc.use_pos != 0 ? pos[pc.pos_off + uint(row)] : pc.pos_base + row;
        float c = 1.0, s = 0.0;
        if (!pt) {
            int p = pc.use_pos != 0 ? pos[pc.pos_off + stream + uint(row)] : pc.pos_base + row;
            vec2 cs = rq_rope_cossin(p, f.xyz) * pc.rot_mul;
            c = cs.x;
            s = cs.y;
        }
        for (int bh = 0; bh < pc.BH; bh++) {
            uint base = pc.src_off + uint(bh / pc.H) * pc.nb0 + uint(bh % pc.H) * pc.nb1 + uint(row) * pc.nb2;
            float x0 = RQ_LOAD(src, base + uint(i0), DT);
            float x1 = RQ_LOAD(src, base + uint(i1), DT);
            uint o = pc.dst_off + uint(bh / pc.H) * pc.d_b + uint(bh % pc.H) * pc.d_h + uint(row) * pc.d_row;
            if (pt) {
                dst[o + uint(i0)] = x0 * pc.out_mul;
            } else {
                dst[o + uint(i0)] = (x0 * c - x1 * s) * pc.out_mul;
                dst[o + uint(i1)] = (x0 * s + x1 * c) * pc.out_mul;
            }
        }
    }
}
