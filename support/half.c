#include "half.h"

#include <math.h>
#include <string.h>

float rqs_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 0x1f) {
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else if (m == 0) {
        bits = sign;
    } else { /* subnormal: m * 2^-24, exact in float */
        float f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t rqs_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0u));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 0x1f)
        return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (he <= 0) {                         /* subnormal or zero */
        if (he < -10)
            return sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - he);
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1u)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fffu;
    uint32_t h = ((uint32_t)he << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u)))
        h++; /* may carry into the exponent: still correct (up to inf) */
    return (uint16_t)(sign | h);
}

float rqs_bf16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t rqs_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) /* NaN: keep it a quiet NaN */
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; overflow rounds to inf */
    return (uint16_t)(x >> 16);
}
