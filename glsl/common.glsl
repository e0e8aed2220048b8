/* Shared by the compute shaders: typed loads from 32-bit words, 16-bit stores, the mask.
 *
 * Every typed buffer is bound as uint[]: f32 elements are whole words, f16 and bf16 elements are
 * half-words (element i lives in word i/2, low half for even i). No 16-bit storage feature is
 * needed, so one SPIR-V module serves every dtype, chosen by a specialization constant. */
#ifndef RQ_COMMON_GLSL
#define RQ_COMMON_GLSL

float rq_from_word(uint w, uint idx, int dt)
{
    if (dt == RQ_VK_DT_F32)
        return uintBitsToFloat(w);
    uint h = (idx & 1u) != 0u ? (w >> 16) : (w & 0xFFFFu);
    if (dt == RQ_VK_DT_F16)
        return unpackHalf2x16(h).x; /* exact: every half is a float */
    return uintBitsToFloat(h << 16);
}

/* Element idx of a uint[] buffer holding dtype dt. */
#define RQ_LOAD(buf, idx, dt) rq_from_word(buf[(dt) == RQ_VK_DT_F32 ? (idx) : ((idx) >> 1)], (idx), (dt))

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
