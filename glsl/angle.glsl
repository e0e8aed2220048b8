/* PLACEHOLDER until the accurate version lands: fp32 angle with GLSL sin/cos (inaccurate). */
#ifndef RQ_ANGLE_GLSL
#define RQ_ANGLE_GLSL
float rq_half_turns(int p, vec3 v)
{
    float t = float(p) * v.x;
    return t - 2.0 * roundEven(0.5 * t);
}
vec2 rq_cossinpi(float t) { return vec2(cos(3.14159265 * t), sin(3.14159265 * t)); }
#endif
