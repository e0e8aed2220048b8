/* Logit soft-capping (docs/conventions.md section 11): S' = C tanh(S / C), with a tanh of our own.
 *
 * Vulkan promises nothing useful for GLSL's tanh (its precision is "inherited from" sinh/cosh, i.e.
 * (e^x - e^-x) / (e^x + e^-x) with exp's 3 + 2|x| ulp: near 0 the difference cancels and the relative
 * error is unbounded), and exp itself only 3 + 2|x| ulp. So, as angle.glsl does for sin/cos, this file
 * evaluates everything with + - * / only (correctly rounded, or 2.5 ulp for the one division) and no
 * loop (llvmpipe counts every loop trip against its silent limit: vk_attn.c, vk_paged_run.c):
 *   - |x| < 0.75: tanh x = x + x s P(s), s = x^2, P of degree 6: a near-minimax fit (Chebyshev, mpmath,
 *     coefficients rounded to float) of (tanh(x)/x - 1)/s on [0, 0.75^2], fit error 6e-10; x s P(s) is
 *     at most 0.16 |x|, so its roundings count for little: the result is the float of x plus ~1 ulp;
 *   - |x| >= 0.75: tanh |x| = 1 - 2 / (e^{2|x|} + 1), e^y by our own exp (Cody-Waite reduction by ln 2,
 *     exact here, and a degree-7 Taylor polynomial on |r| <= ln2/2: 5e-9), |x| clamped to 10 (tanh
 *     rounds to 1 - 2^-24 or 1 from 9 on), the sign put back. 2 / (e + 1) <= 0.37 and 1 - it >= 0.63,
 *     so the error of e (1e-7 relative, at most) reaches the result scaled by 2e / (e + 1)^2 <= 0.3.
 * Float emulation of exactly these operations (correctly rounded division) gave 7.5e-8 relative error
 * at most below 0.75 and 8.9e-8 above; tests/vk_angle measures the shader against an exact reference
 * (bound 2.5e-7 relative, for Vulkan's 2.5-ulp division). NaN in gives NaN out (the polynomial branch).
 *
 * The soft-capped score C tanh(S / C) keeps tanh's relative accuracy: |C tanh(S/C)| <= |S|, so its
 * error is at most ~1e-7 |S|, and |S| <= |scale| ||q|| ||k||, the denominator of the scores metric
 * (section 7). */
#ifndef RQ_TANH_GLSL
#define RQ_TANH_GLSL

/* e^y for y in [0, 20] (the caller's range), relative error ~1e-7: k = round(y / ln 2) <= 29,
 * r = y - k ln2 with ln 2 = C1 + C2, C1 = 0.693359375 (9 significant bits: k C1 and y - k C1 are exact,
 * the latter a multiple of 2^-23 below 1), |r| <= 0.35; e^r = 1 + r + r^2 Q(r), Q the Taylor terms to
 * r^7 / 7! (truncation 5e-9 relative); 2^k is exact. */
float rq_exp_pos(float y)
{
    precise float k = roundEven(y * 1.4426950216293335);
    precise float r1 = y - k * 0.693359375;
    precise float r = r1 - k * -2.1219444e-4;
    float q = 1.9841270113829523e-4; /* 1/5040, then Horner down to 1/2 */
    q = q * r + 1.3888889225199819e-3;
    q = q * r + 8.3333337679505348e-3;
    q = q * r + 4.1666667908430099e-2;
    q = q * r + 0.16666667163372040;
    q = q * r + 0.5;
    float e = (1.0 + r) + (r * r) * q;
    return e * uintBitsToFloat(uint(int(k) + 127) << 23u);
}

/* tanh(x), relative error ~1e-7 for every float x (see above). */
float rq_tanh(float x)
{
    float a = abs(x);
    if (a >= 0.75) {
        float e = rq_exp_pos(2.0 * min(a, 10.0));
        float t = 1.0 - 2.0 / (e + 1.0);
        return x < 0.0 ? -t : t;
    }
    float s = x * x;
    float p = -6.965330103412271e-4; /* P(s), Horner from s^6 down to s^0 */
    p = p * s + 3.08992643840611e-3;
    p = p * s - 8.684717118740082e-3;
    p = p * s + 2.1835781633853912e-2;
    p = p * s - 5.3965166211128235e-2;
    p = p * s + 0.133333221077919;
    p = p * s - 0.3333333432674408;
    return x + (x * s) * p;
}

/* The soft-capped score: C tanh(S / C) (c > 0; the callers test it before calling). */
float rq_softcap(float s, float c)
{
    return c * rq_tanh(s / c);
}

#endif /* RQ_TANH_GLSL */
