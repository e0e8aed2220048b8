/* Accurate RoPE angles in single precision, without cl_khr_fp64.
 *
 * The host hands each frequency as v = inv_freq / pi in fp64, split into three floats
 * (v.x + v.y + v.z, ~72 bits). The angle in half-turns, t = p * v, is formed as a sum of parts that
 * are each reduced modulo 2 *exactly* before they are added:
 *   - p is split into ph (a multiple of 4096, 19 significant bits) and pl (< 4096): both exact floats;
 *   - ph*v.x, pl*v.x, ph*v.y are formed exactly as head + tail with fma();
 *   - x - 2*rint(x/2) is exact for every float x, so reducing a part loses nothing.
 * The few remaining roundings act on values of magnitude <= ~1, so the reduced angle is good to a
 * few 1e-7 half-turns for every int32 position, where a plain fp32 p*inv_freq is off by up to
 * p * 2^-24 radians (0.03 rad at 2^20). sinpi/cospi on [-1, 1] then add ~1 ulp.
 * No native_/half_ trig and no relaxed math here: this is the correctness path. */

static inline float rq_red2(float x)
{
    return x - 2.0f * rint(0.5f * x);
}

/* cos and sin of the angle p * pi * (v.x + v.y + v.z), each multiplied by `mul`. */
static inline float2 rq_cossin(int p, float4 v, float mul)
{
    int lo = p & 0xFFF;
    float ph = (float)(p - lo);
    float pl = (float)lo;
    float a = ph * v.x, ae = fma(ph, v.x, -a);
    float b = pl * v.x, be = fma(pl, v.x, -b);
    float c = ph * v.y, ce = fma(ph, v.y, -c);
    float t = rq_red2(a) + rq_red2(b) + rq_red2(c);
    t = rq_red2(t) + (rq_red2(ae) + rq_red2(be) + ce + pl * v.y + ph * v.z);
    t = rq_red2(t);
    return (float2)(cospi(t) * mul, sinpi(t) * mul);
}
