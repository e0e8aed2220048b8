/* 8-bit paged caches (docs/conventions.md section 12): reading int8, fp8 e4m3 and fp8 e5m2 elements
 * as f32, and the append's quantizer. The value of an element is (float)q * its row's scale; the
 * helpers here return (float)q, the callers multiply by the scale.
 *
 * FP8 decode is bit manipulation, not a 256-entry table: the exponent and mantissa bits move into an
 * f32 and the exponent bias is added as an integer (exact, no multiply), a subnormal is its mantissa
 * converted to float times a power of two (exact, and no f32 denormal is ever made: a device that
 * flushes denormals decodes the same). In float16 lanes that is a dozen vector integer operations per
 * 16 elements, against 16 scalar table loads a vector (pocl: gathers); on a GPU the branches on the
 * dtype are uniform. NaN codes (e4m3 0x7F/0xFF, e5m2 exponent 31 with a mantissa) decode to NaN and
 * e5m2 infinities to infinities, so a caller-made cache holding them propagates them as an
 * unquantized one would.
 *
 * Portable OpenCL C 1.2: no half arithmetic, no variadic macros. */

/* One 8-bit element as (float)q. */
static inline float rq_q8_value(uint u, int dt)
{
    if (dt == RQ_DT_I8)
        return (float)(char)u;
    const uint sign = (u & 0x80u) << 24, mag = u & 0x7Fu;
    float v;
    if (dt == RQ_DT_E4M3) { /* bias 7, 3 mantissa bits: 127 - 7 = 120 added to the exponent */
        v = (mag & 0x78u) == 0 ? (float)(mag & 7u) * 0x1p-9f : as_float((mag << 20) + (120u << 23));
        if (mag == 0x7Fu)
            v = as_float(0x7FC00000u);
    } else { /* e5m2: bias 15, 2 mantissa bits: 127 - 15 = 112 */
        v = (mag & 0x7Cu) == 0 ? (float)(mag & 3u) * 0x1p-16f : as_float((mag << 21) + (112u << 23));
        if ((mag & 0x7Cu) == 0x7Cu)
            v = (mag & 3u) ? as_float(0x7FC00000u) : INFINITY;
    }
    return as_float(as_uint(v) | sign);
}

#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS /* paged_attn_cpu's */
static inline float rq_load_q8(__global const uchar *base, long off, int dt)
{
    return rq_q8_value(base[off], dt);
}
#endif

#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS /* paged_attn_cpu's */
/* 16 consecutive 8-bit elements (element c * 16 of a row) as (float)q: the vector form of
 * rq_q8_value. */
static inline float16 rq_ld16_q8(__global const uchar *row, int c, int dt)
{
    uchar16 b = vload16(c, row);
    if (dt == RQ_DT_I8)
        return convert_float16(as_char16(b));
    const uint16 u = convert_uint16(b), mag = u & (uint16)(0x7Fu), sign = (u & (uint16)(0x80u)) << 24;
    float16 v;
    if (dt == RQ_DT_E4M3) {
        float16 nrm = as_float16((mag << 20) + (uint16)(120u << 23));
        float16 sub = convert_float16(mag & (uint16)(7u)) * 0x1p-9f;
        v = select(nrm, sub, as_int16((mag & (uint16)(0x78u)) == (uint16)(0)));
        v = select(v, (float16)(as_float(0x7FC00000u)), as_int16(mag == (uint16)(0x7Fu)));
    } else {
        float16 nrm = as_float16((mag << 21) + (uint16)(112u << 23));
        float16 sub = convert_float16(mag & (uint16)(3u)) * 0x1p-16f;
        int16 top = as_int16((mag & (uint16)(0x7Cu)) == (uint16)(0x7Cu));
        v = select(nrm, sub, as_int16((mag & (uint16)(0x7Cu)) == (uint16)(0)));
        float16 spec = select((float16)(INFINITY), (float16)(as_float(0x7FC00000u)),
                              as_int16((mag & (uint16)(3u)) != (uint16)(0)));
        v = select(v, spec, top);
    }
    return as_float16(as_uint16(v) | sign);
}
#endif

/* ---- the append's quantizer ----------------------------------------------------------------------
 * v = x / scale (|v| <= QMAX up to the division's rounding) to an 8-bit code, round to nearest even,
 * saturating: int8 rint and clamp to [-127, 127]; fp8 rounds the f32 bits' mantissa to 3 (e4m3) or 2
 * (e5m2) bits (RNE by the add-half-minus-one-plus-lsb trick, a carry moving into the exponent as it
 * should), rebiases the exponent, and clamps to the largest finite code (a value rounding past QMAX
 * would otherwise become e4m3's NaN or e5m2's infinity); below the smallest normal, the subnormal
 * code is rint(|v| * 2^(bias - 1 + mbits)), whose carry to 2^mbits is the smallest normal's code.
 * The sign bit is kept (a negative value that rounds to zero is fp8's -0). support/quant.c is the
 * host's copy of these exact steps (the tests compare the bytes). v is x / scale rounded as IEEE
 * division rounds (rq_div_rn_bits below), so every step is exact on any conformant device. */
static inline uint rq_q8_code(float v, int dt)
{
    if (dt == RQ_DT_I8)
        return (uint)(uchar)(char)(int)clamp(rint(v), -127.0f, 127.0f);
    const bool e4 = dt == RQ_DT_E4M3;
    const uint u = as_uint(v), sign = (u >> 24) & 0x80u, mag = u & 0x7FFFFFFFu;
    const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
    const uint maxcode = e4 ? 0x7Eu : 0x7Bu;
    const float maxv = e4 ? 448.0f : 57344.0f, av = as_float(mag);
    if (av >= maxv)
        return sign | maxcode;
    if (av < (e4 ? 0x1p-6f : 0x1p-14f)) /* below the smallest normal: a subnormal (or 0) */
        return sign | (uint)rint(av * (e4 ? 0x1p9f : 0x1p16f));
    const uint shift = 23u - (uint)mbits;
    uint r = (mag + ((1u << (shift - 1u)) - 1u) + ((mag >> shift) & 1u)) >> shift;
    r -= (uint)(127 - bias) << mbits;
    return sign | min(r, maxcode);
}

static inline float rq_q8_qmax(int dt)
{
    return dt == RQ_DT_I8 ? 127.0f : dt == RQ_DT_E4M3 ? 448.0f : 57344.0f;
}

/* a / b rounded to nearest even (IEEE division's result), as bits, in integer operations only: for
 * finite a and a positive normal b (a scale). Why not `/`: OpenCL C 1.2 allows f32 division 2.5 ulp
 * (section 7.4) unless the program is built with -cl-fp32-correctly-rounded-divide-sqrt, which only
 * devices with CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT accept; NVIDIA's driver uses that freedom, and
 * its append's scales and a few codes differed from support/quant.c (issue 30). Integer operations
 * are exact on every device, so the bytes follow on any conformant one; the rest of the quantizer
 * uses only operations whose results the specification fixes: comparisons, fabs/fmax (exact),
 * rint (correctly rounded: an integer), products by powers of two of normal values (exact), and
 * as_uint/as_float. glsl/quant.glsl's rq_div_rn_bits is the same algorithm.
 * A quotient below 2^-126 becomes a signed zero, and a subnormal or zero a gives one (a / b is then
 * below 2^-126 / 2^-106, the smallest scale being 2^-90 / 57344): the IEEE quotient is then far
 * below half the smallest fp8 code (2^-17) and half int8's, so either quantizes to a's sign with a
 * zero code, and no f32 denormal is made (a device flushing them gives the same bytes). Restoring
 * division of the 24-bit mantissas: 25 quotient bits (24 and a guard bit) and the remainder as the
 * sticky bit; a constant trip count (unrolled by the compilers). */
static inline uint rq_div_rn_bits(uint ua, uint ub)
{
    const uint sign = ua & 0x80000000u;
    const int ea = (int)((ua >> 23) & 0xFFu), eb = (int)((ub >> 23) & 0xFFu);
    if (ea == 0)
        return sign;
    uint ma = (ua & 0x7FFFFFu) | 0x800000u, mb = (ub & 0x7FFFFFu) | 0x800000u;
    int e = ea - eb + 127;
    if (ma < mb) { /* the quotient's leading bit at 2^0: ma / mb in [1, 2) */
        ma <<= 1;
        e -= 1;
    }
    uint q = 0u, r = ma; /* r < 2 mb < 2^25 throughout */
    for (int i = 0; i < 25; i++) {
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
    return sign | ((uint)e << 23) | (m & 0x7FFFFFu);
}

/* An unquantized element (f32, f16 or bf16: the append's new rows). */
static inline float rq_load_src(__global const uchar *base, long off, int dt)
{
    return dt == RQ_DT_F16 ? rq_load_f16(base, off) : dt == RQ_DT_BF16 ? rq_load_bf16(base, off)
                                                                       : rq_load_f32(base, off);
}

/* paged_append_q8: a work-item per new row (sequence, KV head, token): two passes over the row's dims,
 * the absmax (and whether it holds a NaN or an infinity), then the codes. A row is at most 64 KiB of
 * f32 (D <= 65536) read twice from the cache hierarchy; a work-group reduction would only pay for
 * itself on rows far longer than a head's. */
__kernel __attribute__((reqd_work_group_size(RQ_PCWG, 1, 1)))
void paged_append_q8(__global const uchar *src, __global const int *meta, __global uchar *dst,
                     __global float *scale, rq_pappq_args a)
{
    const int row = get_global_id(0);
    if (row >= a.rows)
        return;
    const int t = row % a.n_new, sh = row / a.n_new, s = sh / a.Hkv, hk = sh % a.Hkv;
    const int tok = meta[a.lens_off + s] + t;
    const long page = meta[a.pages_off + meta[s] + tok / a.ps], slot = tok % a.ps;
    __global const uchar *x = src + a.src_off + (long)s * a.snb0 + (long)hk * a.snb1 + (long)t * a.snb2;
    __global uchar *q = dst + a.dst_off + page * a.dnb0 + (long)hk * a.dnb1 + slot * a.dnb2;
    const int es = a.sdt == RQ_DT_F32 ? 4 : 2, dim = a.dim, qdt = a.qdt;
    float amax = 0.0f;
    bool finite = true;
    for (int d = 0; d < dim; d++) {
        float v = rq_load_src(x, (long)d * es, a.sdt);
        finite = finite && isfinite(v);
        amax = fmax(amax, fabs(v));
    }
    float sc;
    if (!finite || amax < RQ_Q8_MIN_ABSMAX) { /* NaN scale (a NaN or infinity in the row), or a zero row */
        sc = finite ? 0.0f : as_float(0x7FC00000u);
        for (int d = 0; d < dim; d++)
            q[d] = 0;
    } else {
        const uint scb = rq_div_rn_bits(as_uint(amax), as_uint(rq_q8_qmax(qdt))); /* amax / QMAX */
        sc = as_float(scb);
        for (int d = 0; d < dim; d++) /* x / sc */
            q[d] = (uchar)rq_q8_code(as_float(rq_div_rn_bits(as_uint(rq_load_src(x, (long)d * es, a.sdt)), scb)), qdt);
    }
    scale[a.scale_off + (page * a.Hkv + hk) * a.ps + slot] = sc;
}

/* paged_gather_q8: paged_gather (cl/paged.cl) for an 8-bit cache: a prefill chunk's K or V as dense
 * f32 rows (BHSD on OpenCL, src/opencl/cl_paged_chunk.c) for the companion attention plan, which takes no 8-bit dtype. Each value is
 * (float)code * its row's scale, one f32 multiply: the value the decode kernels use (section 12), so
 * a chunk and its rows on the decode path read the same cache. Eight codes per work-item (vload8 of
 * the codes, vstore8 of the floats: 40 bytes in flight), as paged_gather's eight units. */
__kernel __attribute__((reqd_work_group_size(RQ_PCWG, 1, 1)))
void paged_gather_q8(__global const uchar *src, __global const int *meta, __global const float *scale,
                     __global float *dst, rq_pgatq_args a)
{
    const int per = (a.dim + 7) / 8;
    const long i = get_global_id(0), rowi = i / per;
    if (rowi >= (long)a.len * a.Hkv)
        return;
    const int t = (int)(rowi / a.Hkv), hk = (int)(rowi % a.Hkv), d0 = (int)(i % per) * 8, qdt = a.qdt;
    const long page = meta[a.pages_off + meta[a.row] + t / a.ps], slot = t % a.ps;
    const float sc = scale[a.scale_off + (page * a.Hkv + hk) * a.ps + slot];
    __global const uchar *s = src + a.src_off + page * a.snb0 + (long)hk * a.snb1 + slot * a.snb2 + d0;
    __global float *d = dst + (long)hk * a.dnb1 + (long)t * a.dnb2 + d0;
    if (d0 + 8 <= a.dim) {
        const uchar8 b = vload8(0, s);
        const float8 v = (float8)(rq_q8_value(b.s0, qdt), rq_q8_value(b.s1, qdt), rq_q8_value(b.s2, qdt),
                                  rq_q8_value(b.s3, qdt), rq_q8_value(b.s4, qdt), rq_q8_value(b.s5, qdt),
                                  rq_q8_value(b.s6, qdt), rq_q8_value(b.s7, qdt));
        vstore8(v * sc, 0, d);
    } else {
        for (int u = 0; u < a.dim - d0; u++)
            d[u] = rq_q8_value(s[u], qdt) * sc;
    }
}
