/* Shared by the compute shaders: typed loads from 32-bit words, 16-bit stores, the mask.
 *
 * Every typed buffer is bound as uint[]: f32 elements are whole words, f16 and bf16 elements are
 * half-words (element i lives in word i/2, low half for even i). No 16-bit storage feature is
 * needed, so one SPIR-V module serves every dtype, chosen by a specialization constant. */
#ifndef RQ_COMMON_GLSL
#define RQ_COMMON_GLSL

/* An 8-bit code of a quantized cache as (float)q (the value is that times its row's scale): cl/quant.cl's
 * rq_q8_value, by bit manipulation (exponent and mantissa moved into an f32, the bias added as an
 * integer; a subnormal is its mantissa times a power of two): exact, and no f32 denormal is made, so
 * a device that flushes them decodes the same. NaN codes give NaN, e5m2's infinities infinity. */
float rq_q8_value(uint u, int dt)
{
    if (dt == RQ_VK_DT_I8)
        return float(int(u << 24) >> 24);
    const uint sign = (u & 0x80u) << 24, mag = u & 0x7Fu;
    float v;
    if (dt == RQ_VK_DT_E4M3) { /* bias 7, 3 mantissa bits: 127 - 7 = 120 added to the exponent */
        v = (mag & 0x78u) == 0u ? float(mag & 7u) * (1.0 / 512.0) : uintBitsToFloat((mag << 20) + (120u << 23));
        if (mag == 0x7Fu)
            v = uintBitsToFloat(0x7FC00000u);
    } else { /* e5m2: bias 15, 2 mantissa bits: 127 - 15 = 112 */
        v = (mag & 0x7Cu) == 0u ? float(mag & 3u) * (1.0 / 65536.0) : uintBitsToFloat((mag << 21) + (112u << 23));
        if ((mag & 0x7Cu) == 0x7Cu)
            v = uintBitsToFloat((mag & 3u) != 0u ? 0x7FC00000u : 0x7F800000u);
    }
    return uintBitsToFloat(floatBitsToUint(v) | sign);
}

float rq_from_word(uint w, uint idx, int dt)
{
    if (dt == RQ_VK_DT_F32)
        return uintBitsToFloat(w);
    if (dt >= RQ_VK_DT_I8) /* byte idx % 4 of the word (little-endian, as the host wrote it) */
        return rq_q8_value((w >> ((idx & 3u) * 8u)) & 0xFFu, dt);
    uint h = (idx & 1u) != 0u ? (w >> 16) : (w & 0xFFFFu);
    if (dt == RQ_VK_DT_F16)
        return unpackHalf2x16(h).x; /* exact: every half is a float */
    return uintBitsToFloat(h << 16);
}

/* Element idx of a uint[] buffer holding dtype dt (an 8-bit dtype: the raw code as a float, without
 * its row's scale). No 8-bit storage feature: a byte is taken out of its word. */
#define RQ_WORD_OF(idx, dt) ((dt) == RQ_VK_DT_F32 ? (idx) : (dt) >= RQ_VK_DT_I8 ? ((idx) >> 2) : ((idx) >> 1))
#define RQ_LOAD(buf, idx, dt) rq_from_word(buf[RQ_WORD_OF(idx, dt)], (idx), (dt))

/* f32 -> bf16 / f16 bits, round to nearest even (what the OpenCL path's conversions do), NaN kept
 * quiet. packHalf2x16's rounding is not specified by GLSL, so f16 is converted here by hand. */
uint rq_to_bf16(float f)
{
    uint b = floatBitsToUint(f);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (b >> 16) | 0x40u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

uint rq_to_f16(float f)
{
    uint b = floatBitsToUint(f);
    uint sign = (b >> 16) & 0x8000u;
    uint a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return sign | 0x7E00u; /* NaN */
    if (a >= 0x477FF000u)      /* rounds to >= 65520: infinity */
        return sign | 0x7C00u;
    if (a >= 0x38800000u) {    /* normal half: drop 13 bits, nearest even */
        uint r = a - 0x38000000u;
        return sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
    }
    if (a < 0x33000000u)       /* below half the smallest subnormal: zero */
        return sign;
    /* subnormal half: the value in units of 2^-24, nearest even */
    uint e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
    uint sh = 126u - e; /* 14..24 */
    uint q = m >> sh, rem = m & ((1u << sh) - 1u), halfway = 1u << (sh - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u) != 0u))
        q++;
    return sign | q;
}

uint rq_to_bits16(float f, int dt) { return dt == RQ_VK_DT_F16 ? rq_to_f16(f) : rq_to_bf16(f); }

/* Stores value f as element idx of a uint[] buffer of dtype dt. A 16-bit element shares its word
 * with a neighbour that another invocation may be writing: two atomics on disjoint bits (clear
 * ours, set ours) give the right word in any order. */
#define RQ_STORE(buf, idx, dt, f)                                                                  \
    {                                                                                              \
        if ((dt) == RQ_VK_DT_F32) {                                                                \
            buf[idx] = floatBitsToUint(f);                                                         \
        } else {                                                                                   \
            uint sh_ = ((idx) & 1u) * 16u;                                                         \
            atomicAnd(buf[(idx) >> 1], ~(0xFFFFu << sh_));                                         \
            atomicOr(buf[(idx) >> 1], rq_to_bits16(f, dt) << sh_);                                 \
        }                                                                                          \
    }

/* The mask of docs/conventions.md: causal (pk > pq), sliding window (pq - pk >= W, W > 0). W < 2^32
 * and pq - pk < 2^32 for int32 positions, so the difference is exact as a uint when pq >= pk. */
bool rq_masked(int pq, int pk, bool causal, uint window)
{
    if (causal && pk > pq)
        return true;
    return window != 0u && pq >= pk && uint(pq) - uint(pk) >= window;
}

#endif
