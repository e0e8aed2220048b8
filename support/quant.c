/* The 8-bit quantization rule on the host (quant.h): cl/quant.cl's steps in C, f32 arithmetic
 * throughout (FLT_EVAL_METHOD 0 on the targets: SSE, NEON), so the bytes match the device's. */
#include "quant.h"

#include <math.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float rqs_q8_qmax(ropeqk_dtype dt)
{
    return dt == ROPEQK_I8 ? 127.0f : dt == ROPEQK_FP8_E4M3 ? 448.0f : 57344.0f;
}

float rqs_q8_value(uint8_t q, ropeqk_dtype dt)
{
    if (dt == ROPEQK_I8)
        return (float)(int8_t)q;
    uint32_t sign = (uint32_t)(q & 0x80u) << 24, mag = q & 0x7Fu;
    float v;
    if (dt == ROPEQK_FP8_E4M3) {
        v = (mag & 0x78u) == 0 ? (float)(mag & 7u) * 0x1p-9f : from_bits((mag << 20) + (120u << 23));
        if (mag == 0x7Fu)
            v = NAN;
    } else {
        v = (mag & 0x7Cu) == 0 ? (float)(mag & 3u) * 0x1p-16f : from_bits((mag << 21) + (112u << 23));
        if ((mag & 0x7Cu) == 0x7Cu)
            v = (mag & 3u) ? NAN : INFINITY;
    }
    return from_bits(bits(v) | sign);
}

uint8_t rqs_q8_code(float v, ropeqk_dtype dt)
{
    if (dt == ROPEQK_I8) {
        float r = rintf(v); /* the default rounding mode: to nearest even */
        r = r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r;
        return (uint8_t)(int8_t)(int)r;
    }
    const int e4 = dt == ROPEQK_FP8_E4M3;
    const uint32_t u = bits(v), sign = (u >> 24) & 0x80u, mag = u & 0x7FFFFFFFu;
    const uint32_t mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15, maxcode = e4 ? 0x7Eu : 0x7Bu;
    const float av = from_bits(mag);
    if (av >= (e4 ? 448.0f : 57344.0f))
        return (uint8_t)(sign | maxcode);
    if (av < (e4 ? 0x1p-6f : 0x1p-14f))
        return (uint8_t)(sign | (uint32_t)rintf(av * (e4 ? 0x1p9f : 0x1p16f)));
    const uint32_t shift = 23 - mbits;
    uint32_t r = (mag + ((1u << (shift - 1)) - 1) + ((mag >> shift) & 1u)) >> shift;
    r -= (127 - bias) << mbits;
    return (uint8_t)(sign | (r < maxcode ? r : maxcode));
}

float rqs_q8_quantize(const float *x, int64_t n, ropeqk_dtype dt, uint8_t *q)
{
    float amax = 0.0f;
    int finite = 1;
    for (int64_t i = 0; i < n; i++) {
        finite = finite && isfinite(x[i]);
        amax = fmaxf(amax, fabsf(x[i]));
    }
    if (!finite || amax < 0x1p-90f) {
        memset(q, 0, (size_t)n);
        return finite ? 0.0f : from_bits(0x7FC00000u);
    }
    const float sc = amax / rqs_q8_qmax(dt);
    for (int64_t i = 0; i < n; i++)
        q[i] = rqs_q8_code(x[i] / sc, dt);
    return sc;
}
