/* Accurate RoPE angles and cos/sin in single precision for Vulkan compute (GLSL 4.50, no extensions,
 * no fp64). The GLSL counterpart of cl/angle.cl; include it with GL_GOOGLE_include_directive.
 *
 * The host hands each frequency as v = inv_freq / pi in fp64, split into three floats
 * v = (hi, mid, lo) = (float(x), float(x - hi), float(x - hi - mid)), the same split as the OpenCL
 * path (src/core/plan.c, split_freqs), negated for the conjugate rotation. The angle is in half-turns,
 * t = p * v mod 2, so cos(p * inv_freq) = cos(pi * t).
 *
 * What Vulkan guarantees ("Precision and Operation of SPIR-V Instructions") and how this file uses it:
 *  - OpFAdd/OpFSub/OpFMul are correctly rounded, but a*b+c may be contracted into a fused multiply-add
 *    unless the result is decorated NoContraction (GLSL `precise`); fma() need not be fused at all.
 *    So there is no fma(a, b, -a*b) product tail here. Instead every partial product that matters is
 *    made *exact* by construction (<= 24 significant bits in total), and an exact product gives the
 *    same value whether or not it is contracted. The variables whose exactness the argument relies on
 *    are `precise` anyway, so that no compiler transformation may alter them (on lavapipe the measured
 *    errors are identical without them, as the argument predicts).
 *  - roundEven, floatBitsToUint/uintBitsToFloat, int <-> float conversion of integral values that
 *    fit, and scaling by powers of two are exact.
 *  - Denormals may be flushed to zero. Every value that can become denormal here is an absolute
 *    quantity below 2^-126 half-turns (a partial product or a tail of a tiny frequency), so
 *    flushing it changes the angle by less than 2^-126: it does not matter.
 *  - GLSL sin/cos have only 2^-11 absolute error: never used; rq_cossinpi has its own reduction and
 *    polynomials.
 *
 * API
 *   float rq_half_turns(int p, vec3 v)   p * (v.x + v.y + v.z) mod 2, in [-1, 1); every int32 p.
 *   vec2  rq_cossinpi(float t)           (cos(pi t), sin(pi t)), t in [-1, 1] (any |t| < 2^30 works).
 *   vec2  rq_rope_cossin(int p, vec3 v)  (cos, sin) of the angle p * v half-turns: the two above fused,
 *                                        skipping the rounding of t to float (slightly more accurate).
 * Measured on lavapipe against an exact reference (tests/vk_angle), max abs error over int32 positions
 * and RoPE/tiny/large frequencies: t 3.2e-8 half-turns; cos/sin 1.5e-7 via rq_cossinpi(rq_half_turns()),
 * 9e-8 via rq_rope_cossin; rq_cossinpi alone 8.6e-8 (~1.4 ulp at 0.7).
 */
#ifndef RQ_ANGLE_GLSL
#define RQ_ANGLE_GLSL

/* The angle is accumulated in fixed point: units of 2^-30 half-turns in a uint, where wrap-around
 * modulo 2^32 is exact and the low 31 bits are the angle modulo 2 half-turns (2^31 units). */
const float RQ_FX_ONE = 1073741824.0; /* 2^30: fixed-point units per half-turn */

/* (x mod 2) in fixed-point units, for a float x that is exact (the caller's partial product).
 * r = x - 2*roundEven(x/2) is exact for every float x: x/2 and 2*k are power-of-two scalings, k is
 * integral, and r is a multiple of ulp(x) with |r| <= 1, so it is representable (if ulp(x) >= 2, x is
 * an even integer and r = 0). r * 2^30 is exact and lies in [-2^30, 2^30], so its conversion to int
 * fits; roundEven makes the only rounding of this term, <= 2^-31 half-turns (none when r is a
 * multiple of 2^-30, which every large term is). */
uint rq_fx_mod2(float x)
{
    precise float k = roundEven(0.5 * x);
    precise float r = x - 2.0 * k;
    return uint(int(roundEven(r * RQ_FX_ONE)));
}

/* Split a float into a head of its 12 leading significand bits (the implicit bit and the 11 top
 * stored bits: clear the 12 low stored bits) and the exact remainder x - head, which is the value of
 * those 12 low bits (same sign, <= 12 significant bits, representable). Both are exact. */
vec2 rq_split12(float x)
{
    precise float h = uintBitsToFloat(floatBitsToUint(x) & 0xFFFFF000u);
    precise float l = x - h;
    return vec2(h, l);
}

/* p * (v.x + v.y + v.z) mod 2 in fixed point (the low 31 bits of the result, units 2^-30).
 * p = p2 + p1 + p0 with p0 = p & 0xFFF (12 bits), p1 = p & 0xFFF000 (12 significant bits) and
 * p2 = p - p0 - p1 (a multiple of 2^24 in [-2^31, 2^31 - 2^24]: 8 significant bits): all exact floats,
 * for every int32 p including INT32_MIN and negatives. v.x and v.y are split into 12-bit heads and tails
 * (rq_split12), so each of the 12 products p_i * (head or tail) has <= 24 significant bits and is
 * exact in float; each is reduced mod 2 exactly (rq_fx_mod2) and the reduced parts are summed in
 * integers, exactly, modulo 2. Only p * v.z is rounded: |v.z| <= 2^-48 |v.x| (about), so
 * |p * v.z| <= 2^-17 |v.x| and its rounding error is below 2^-41 |v.x| half-turns: negligible for any
 * frequency below ~2^14 half-turns per position (RoPE frequencies are <= 1/pi). Total error: <= 13
 * roundings of 2^-31 (6e-9 half-turns) plus the split's own error (v.x + v.y + v.z represents an fp64
 * inv_freq/pi exactly, or to ~2^-72 relative). */
/* The three exact products p0 h, p1 h, p2 h reduced mod 2 (rq_half_turns_fx's terms of one head or
 * tail h): a function called four times rather than a loop, so that no shader carries a loop here
 * (llvmpipe counts every loop trip of an invocation against its silent limit, vk_paged_run.c). */
uint rq_fx_mod2_3(float p0, float p1, float p2, float h)
{
    precise float a = p0 * h;
    precise float b = p1 * h;
    precise float c = p2 * h;
    return rq_fx_mod2(a) + rq_fx_mod2(b) + rq_fx_mod2(c);
}

uint rq_half_turns_fx(int p, vec3 v)
{
    precise float p0 = float(p & 0xFFF);
    precise float p1 = float(p & 0xFFF000);
    precise float p2 = float(p - (p & 0xFFFFFF)); /* no overflow: subtracts a value in [0, 2^24) */
    vec2 x = rq_split12(v.x), y = rq_split12(v.y);
    uint acc = rq_fx_mod2_3(p0, p1, p2, x.x) + rq_fx_mod2_3(p0, p1, p2, x.y) + rq_fx_mod2_3(p0, p1, p2, y.x) +
               rq_fx_mod2_3(p0, p1, p2, y.y);
    precise float z = float(p) * v.z; /* the one inexact product, tiny: see above */
    acc += rq_fx_mod2(z);
    return acc;
}

/* The fixed-point angle as a float in [-1, 1): acc << 1 keeps the angle mod 2 as a signed int in units
 * of 2^-31 (two's complement maps [1, 2) to [-1, 0)); the conversion to float rounds once
 * (<= 2^-25 half-turns for |t| >= 1/2), the scaling is exact. */
float rq_fx_to_float(uint acc)
{
    return float(int(acc << 1u)) * (1.0 / 2147483648.0);
}

float rq_half_turns(int p, vec3 v)
{
    return rq_fx_to_float(rq_half_turns_fx(p, v));
}

/* cos(pi r), sin(pi r) for |r| <= 1/4, rotated by q quarter turns (q taken mod 4).
 * Polynomials in s = r^2: near-minimax (Chebyshev fit, coefficients rounded to float, checked in
 * extended precision): sin(pi r) = r * (pi + s * S(s)), with pi as a float pair (PI_HI + PI_LO) so the
 * leading term keeps full accuracy; cos(pi r) = 1 + s * C(s). Approximation error of the rounded
 * coefficients: 1.4e-9 (sin) and 9.1e-9 (cos) on |r| <= 1/4; the float evaluation adds about one
 * rounding of the result (<= 6e-8 absolute). Contraction into fma here only changes roundings
 * (by less than an ulp of the result), so these variables need not be precise. */
vec2 rq_cossin_quadrant(float r, int q)
{
    const float PI_HI = 3.1415927410125732;     /* float(pi) */
    const float PI_LO = -8.742277657347586e-08; /* float(pi - PI_HI) */
    float s = r * r;
    float ps = 0.08122957497835159; /* S(s), Horner from s^3 down to s^0 */
    ps = ps * s - 0.5992287993431091;
    ps = ps * s + 2.550163507461548;
    ps = ps * s - 5.167712688446045;
    float sn = r * PI_HI + r * (PI_LO + s * ps);
    float pc = 0.2321254163980484; /* C(s) from s^3 down to s^1; s^0 is the float of -pi^2/2 */
    pc = pc * s - 1.3351378440856934;
    pc = pc * s + 4.05871057510376;
    float cs = 1.0 + s * (-4.934802055358887 + s * pc);
    /* rotate by q quarter turns: cos(a + q pi/2), sin(a + q pi/2) */
    vec2 cs2 = vec2(cs, sn);
    if ((q & 1) != 0)
        cs2 = vec2(-sn, cs);
    if ((q & 2) != 0)
        cs2 = -cs2;
    return cs2;
}

/* (cos(pi t), sin(pi t)). Quarter-turn reduction, exact in float: q = roundEven(2t) is integral and
 * 2t, 0.5*q are exact; for |t| < 1/4, q = 0 and r = t; otherwise ulp(t) >= 2^-25 and r = t - 0.5*q is
 * a multiple of min(ulp(t), 1/2) with |r| <= 1/4, i.e. at most 2^23 ulps: representable, no rounding.
 * Valid for every |t| < 2^30 (int(q) must fit); the RoPE caller passes t in [-1, 1]. */
vec2 rq_cossinpi(float t)
{
    precise float q = roundEven(2.0 * t);
    precise float r = t - 0.5 * q;
    return rq_cossin_quadrant(r, int(q));
}

/* cos/sin of p * v half-turns, reducing to a quarter turn in fixed point before converting to float:
 * the angle mod 2 in units of 2^-31 (signed int a), q = nearest quarter (2^30 units), residual
 * a - q*2^30 in [-2^29, 2^29]: converted to float with <= 2^-27 half-turns of rounding (instead of
 * 2^-25 for t itself). All uint arithmetic wraps modulo 2^32 units = 2 half-turns = 4 quarter turns, so
 * q comes out mod 4, which is all rq_cossin_quadrant uses. */
vec2 rq_rope_cossin(int p, vec3 v)
{
    uint a = rq_half_turns_fx(p, v) << 1u;   /* units of 2^-31 half-turns, mod 2^32 */
    uint q = (a + 0x20000000u) >> 30u;       /* nearest quarter turn, mod 4 */
    int res = int(a - (q << 30u));           /* in [-2^29, 2^29) */
    float r = float(res) * (1.0 / 2147483648.0);
    return rq_cossin_quadrant(r, int(q));
}

#endif /* RQ_ANGLE_GLSL */
