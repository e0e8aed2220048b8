/* The append's quantizer for 8-bit paged caches (docs/conventions.md section 12), bit for bit the rule
 * of cl/quant.cl (paged_append_q8) and support/quant.c, which the tests compare byte by byte.
 *
 * Vulkan allows 2.5 ulp for f32 division (OpenCL on pocl rounds it correctly), and a driver may flush
 * f32 denormals, so the two divisions of the rule (scale = absmax / QMAX, x / scale) are done here in
 * integers, rounded to nearest even as IEEE division is; everything else works on the f32 bits (the
 * absmax as an unsigned compare of magnitudes, the NaN of a non-finite row stored as its bits). */
#ifndef RQ_QUANT_GLSL
#define RQ_QUANT_GLSL

/* a / b rounded to nearest even, as bits, for finite a and a positive normal b (a scale), with a
 * quotient below 2^-126 flushed to a signed zero, and a subnormal or zero a giving a signed zero
 * (a / b < 2^-126 / 2^-106 then: the smallest scale is 2^-90 / 57344): either way the IEEE quotient
 * is far below half the smallest fp8 code (2^-17) and half int8's, so it quantizes to a's sign and a
 * zero code as the rule does. Restoring division of the 24-bit mantissas: 25 quotient bits (24 and a guard
 * bit) and the remainder as the sticky bit; the loop has a constant trip count and is unrolled (no
 * loop left in the SPIR-V: llvmpipe's loop budget is not spent on it). */
uint rq_div_rn_bits(uint ua, uint ub)
{
    const uint sign = ua & 0x80000000u;
    const int ea = int((ua >> 23) & 0xFFu), eb = int((ub >> 23) & 0xFFu);
    if (ea == 0)
        return sign;
    uint ma = (ua & 0x7FFFFFu) | 0x800000u, mb = (ub & 0x7FFFFFu) | 0x800000u;
    int e = ea - eb + 127;
    if (ma < mb) { /* the quotient's leading bit at 2^0: ma / mb in [1, 2) */
        ma <<= 1;
        e -= 1;
    }
    uint q = 0u, r = ma; /* r < 2 mb < 2^25 throughout */
    [[unroll]] for (int i = 0; i < 25; i++) {
        q <<= 1;
        if (r >= mb) {
            r -= mb;
            q |= 1u;
        }
        r <<= 1;
    }
    uint m = q >> 1;
    if ((q & 1u) != 0u && (r != 0u || (m & 1u) != 0u))
        m++; /* above halfway, or a tie to even */
    if (m == 0x1000000u) {
        m >>= 1;
        e++;
    }
    if (e <= 0)
        return sign;
    if (e >= 255) /* cannot happen for the append's quotients (|x / scale| <= QMAX, about) */
        return sign | 0x7F800000u;
    return sign | (uint(e) << 23) | (m & 0x7FFFFFu);
}

/* v = x / scale (its bits; |v| <= QMAX up to the division's rounding) to an 8-bit code: cl/quant.cl's
 * rq_q8_code. int8: rint, clamped to [-127, 127]; fp8: the f32 mantissa rounded to 3 (e4m3) or 2
 * (e5m2) bits by the add-half-minus-one-plus-lsb trick, rebiased, clamped to the largest finite code;
 * below the smallest normal the subnormal code rint(|v| * 2^(bias - 1 + mbits)); the sign kept. */
uint rq_q8_code(uint vb, int dt)
{
    if (dt == RQ_VK_DT_I8)
        return uint(int(clamp(roundEven(uintBitsToFloat(vb)), -127.0, 127.0))) & 0xFFu;
    const bool e4 = dt == RQ_VK_DT_E4M3;
    const uint sign = (vb >> 24) & 0x80u, mag = vb & 0x7FFFFFFFu;
    const uint mbits = e4 ? 3u : 2u, bias = e4 ? 7u : 15u, maxcode = e4 ? 0x7Eu : 0x7Bu;
    const float av = uintBitsToFloat(mag);
    if (av >= (e4 ? 448.0 : 57344.0))
        return sign | maxcode;
    if (av < (e4 ? 1.0 / 64.0 : 1.0 / 16384.0)) /* below the smallest normal: a subnormal (or 0) */
        return sign | uint(roundEven(av * (e4 ? 512.0 : 65536.0)));
    const uint shift = 23u - mbits;
    uint r = (mag + ((1u << (shift - 1u)) - 1u) + ((mag >> shift) & 1u)) >> shift;
    r -= (127u - bias) << mbits;
    return sign | min(r, maxcode);
}

/* An f16 as the bits of the equal f32, in integers (a driver may flush f16 denormals in conversions;
 * f16 subnormals are normal f32s and must keep their value). */
uint rq_f16_to_f32_bits(uint h)
{
    const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 31u)
        return sign | 0x7F800000u | (m << 13);
    if (e != 0u)
        return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u)
        return sign;
    const int top = findMSB(m); /* m * 2^-24 = 1.f * 2^(top - 24) */
    return sign | (uint(top + 103) << 23) | ((m << uint(23 - top)) & 0x7FFFFFu);
}

#endif
