#version 450
/* The split pass of the cooperative-matrix path (glsl/vk_cm.h, docs/tensor-cores.md): one row of a
 * typed strided view (Q or K after the RoPE pass: rotate.comp's f32 scratch; V: the caller's view)
 * into f16 planes. Per row:
 *   - a = 14 - e, e the exponent of the row's largest magnitude (its bits: an unsigned max over the
 *     work-group), clamped to [-113, 126]: y = x 2^a puts the largest in [2^14, 2^15) (exact: a power
 *     of two; rows whose largest magnitude is below 2^-112 are scaled by 2^126 only);
 *   - hi = f16(y), lo = f16(y - hi), rounded to nearest even by hand (common.glsl's rq_to_f16: no
 *     f16 type here, so the same module runs on every device); y - hi is exact in f32, and
 *     y = hi + lo + r with |r| <= 2^-11 |y - hi| <= 2^-22 |y| (or an f16 subnormal's half spacing,
 *     2^-25, far below 2^14);
 *   - the undo factor 2^-a to the factor array; a row holding a NaN or an infinity gets NaN there and
 *     zeros in its planes (the shaders make the rows that see it NaN: docs/tensor-cores.md);
 *   - f16 rows (V stored as f16, RQ_CM_SP_F_NOSCALE): a = 0, hi = x exactly, lo = 0;
 *   - padding rows (s >= rows) and columns (c >= n): zeros, factor 1.
 * One work-group per row, an invocation per 32-bit word of it (two halves): rows of up to
 * 2 * RQ_CM_SPLIT_WG values take one word each, longer ones loop. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_contract.h"
#include "vk_cm.h"

layout(local_size_x_id = RQ_VK_SC_WG) in;
layout(constant_id = RQ_VK_SC_WG) const int NT = RQ_CM_SPLIT_WG;

layout(std430, binding = RQ_CM_SP_SRC) readonly buffer Src { uint src[]; };
layout(std430, binding = RQ_CM_SP_DST) writeonly buffer Dst { uint dst[]; };
layout(std430, binding = RQ_CM_SP_SC) writeonly buffer Sc { float scv[]; };
RQ_VK_PC_BLOCK(RQ_CM_SP_PC)

#include "common.glsl"

shared uint red[NT];

void main()
{
    const int lid = int(gl_LocalInvocationID.x);
    const int row = int(gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u);
    if (row >= pc.nrows)
        return; /* uniform: the whole work-group */
    const int bh = row / pc.rows_p, s = row - bh * pc.rows_p;
    const bool valid = s < pc.rows;
    const uint base = pc.src_off + uint(bh / pc.H) * pc.nb0 + uint(bh % pc.H) * pc.nb1 + uint(s) * pc.nb2;
    const int nw = pc.np / 2;

    /* the row's largest magnitude, as bits (a NaN's bits are above every finite value's) */
    uint mx = 0u;
    for (int w = lid; w < nw; w += NT)
        [[unroll]] for (int e = 0; e < 2; e++) {
            int c = 2 * w + e;
            if (valid && c < pc.n)
                mx = max(mx, floatBitsToUint(RQ_LOAD(src, base + uint(c), pc.dt)) & 0x7FFFFFFFu);
        }
    red[lid] = mx;
    barrier();
    for (int h = NT / 2; h > 0; h /= 2) {
        if (lid < h)
            red[lid] = max(red[lid], red[lid + h]);
        barrier();
    }
    mx = red[0];
    const bool bad = mx >= 0x7F800000u; /* an infinity or a NaN */
    int a = 0;
    if (mx != 0u && !bad && (pc.flags & RQ_CM_SP_F_NOSCALE) == 0)
        a = clamp(14 - (int(mx >> 23) - 127), -113, 126);
    const float up = uintBitsToFloat(uint(a + 127) << 23); /* 2^a, a normal float */
    if (lid == 0)
        scv[pc.sc_off + uint(row)] = bad ? uintBitsToFloat(0x7FC00000u) : uintBitsToFloat(uint(127 - a) << 23);

    const uint drow = pc.dst_off + uint(row) * uint(nw);
    for (int w = lid; w < nw; w += NT) {
        uint hw = 0u, lw = 0u;
        [[unroll]] for (int e = 0; e < 2; e++) {
            int c = 2 * w + e;
            if (valid && !bad && c < pc.n) {
                float y = RQ_LOAD(src, base + uint(c), pc.dt) * up;
                uint hb = rq_to_f16(y);
                uint lb = rq_to_f16(y - unpackHalf2x16(hb).x);
                hw |= hb << (16 * e);
                lw |= lb << (16 * e);
            }
        }
        dst[drow + uint(w)] = hw;
        if ((pc.flags & RQ_CM_SP_F_LO) != 0)
            dst[pc.lo_words + drow + uint(w)] = lw;
    }
}
