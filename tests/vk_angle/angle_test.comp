#version 450
/* Evaluates glsl/angle.glsl and glsl/tanh.glsl for the vk_angle test (vk_angle.c).
 * mode 0: in[i] = (p, v.x, v.y, v.z) as bits -> out[2i] = (t, cos, sin, 0) from
 *         rq_half_turns + rq_cossinpi, out[2i+1] = (cos, sin, 0, 0) from rq_rope_cossin.
 * mode 1: in[i].x = t as bits -> out[2i] = (t, cos, sin, 0) from rq_cossinpi(t), out[2i+1] = 0.
 * mode 2: in[i].x = x as bits -> out[2i] = (x, rq_tanh(x), 0, 0), out[2i+1] = 0. */
#extension GL_GOOGLE_include_directive : require
#include "angle.glsl"
#include "tanh.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer In { uvec4 items[]; } src;
layout(std430, set = 0, binding = 1) writeonly buffer Out { vec4 res[]; } dst;
layout(push_constant) uniform Args { uint n; uint mode; } args;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= args.n)
        return;
    uvec4 w = src.items[i];
    if (args.mode == 0u) {
        int p = int(w.x);
        vec3 v = uintBitsToFloat(w.yzw);
        float t = rq_half_turns(p, v);
        vec2 cs = rq_cossinpi(t);
        dst.res[2u * i] = vec4(t, cs, 0.0);
        dst.res[2u * i + 1u] = vec4(rq_rope_cossin(p, v), 0.0, 0.0);
    } else if (args.mode == 2u) {
        float x = uintBitsToFloat(w.x);
        dst.res[2u * i] = vec4(x, rq_tanh(x), 0.0, 0.0);
        dst.res[2u * i + 1u] = vec4(0.0);
    } else {
        float t = uintBitsToFloat(w.x);
        dst.res[2u * i] = vec4(t, rq_cossinpi(t), 0.0);
        dst.res[2u * i + 1u] = vec4(0.0);
    }
}
