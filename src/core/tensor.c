/* Descriptors, parameter defaults and the validation shared by the reference and device paths.
 * Validation is the single gate: both paths call rq_validate() before touching any memory. */
#include "internal.h"

#include <math.h>
#include <string.h>

size_t ropeqk_dtype_size(ropeqk_dtype t)
{
    switch (t) {
    case ROPEQK_F32: return 4;
    case ROPEQK_F16: return 2;
    case ROPEQK_BF16: return 2;
    case ROPEQK_F64: return 8;
    case ROPEQK_I8: return 1;
    case ROPEQK_FP8_E4M3: return 1;
    case ROPEQK_FP8_E5M2: return 1;
    }
    return 0;
}

static ropeqk_tensor make(ropeqk_dtype t, const int64_t ne[4], const int order[4])
{
    /* order lists the dims from innermost to outermost memory position */
    ropeqk_tensor d;
    memset(&d, 0, sizeof d);
    d.dtype = t;
    memcpy(d.ne, ne, sizeof d.ne);
    /* a stride past INT64_MAX saturates: validation then reports ROPEQK_ERR_OVERFLOW */
    int64_t stride = (int64_t)ropeqk_dtype_size(t);
    for (int i = 0; i < 4; i++) {
        d.nb[order[i]] = stride;
        if (__builtin_mul_overflow(stride, ne[order[i]] > 0 ? ne[order[i]] : 1, &stride))
            stride = INT64_MAX & ~INT64_C(7); /* still a multiple of every element size */
    }
    return d;
}

ropeqk_tensor ropeqk_tensor_bhsd(ropeqk_dtype t, int64_t B, int64_t H, int64_t S, int64_t D)
{
    const int64_t ne[4] = {B, H, S, D};
    const int order[4] = {3, 2, 1, 0};
    return make(t, ne, order);
}

ropeqk_tensor ropeqk_tensor_bshd(ropeqk_dtype t, int64_t B, int64_t S, int64_t H, int64_t D)
{
    const int64_t ne[4] = {B, H, S, D};
    const int order[4] = {3, 1, 2, 0};
    return make(t, ne, order);
}

size_t ropeqk_tensor_extent(const ropeqk_tensor *t)
{
    if (!t)
        return 0;
    size_t es = ropeqk_dtype_size(t->dtype);
    if (es == 0)
        return 0;
    size_t ext = es;
    for (int i = 0; i < 4; i++) {
        if (t->ne[i] < 1 || t->nb[i] < 0)
            return 0;
        size_t span;
        if (__builtin_mul_overflow((size_t)(t->ne[i] - 1), (size_t)t->nb[i], &span) ||
            __builtin_add_overflow(ext, span, &ext))
            return 0;
    }
    /* kernels index with signed 64-bit arithmetic */
    return ext > (size_t)INT64_MAX ? 0 : ext;
}

/* Checks one view: dtype allowed, sizes >= 1, strides aligned and non-aliasing. */
static ropeqk_status check_view(const ropeqk_tensor *t, bool qk, bool f64_ok, size_t *extent)
{
    /* 8-bit storage is for paged caches only, whose validation (paged.c) checks them itself */
    if ((t->dtype == ROPEQK_F64 && !f64_ok) || (!qk && t->dtype != ROPEQK_F32 && t->dtype != ROPEQK_F64) ||
        rq_dtype_q8(t->dtype))
        return ROPEQK_ERR_BAD_DTYPE;
    return rq_check_layout(t, qk, extent);
}

ropeqk_status rq_check_layout(const ropeqk_tensor *t, bool inner_contiguous, size_t *extent)
{
    size_t es = ropeqk_dtype_size(t->dtype);
    if (es == 0)
        return ROPEQK_ERR_BAD_DTYPE;
    for (int i = 0; i < 4; i++)
        if (t->ne[i] < 1)
            return ROPEQK_ERR_BAD_SHAPE;
    for (int i = 0; i < 4; i++)
        if (t->nb[i] < 0 || t->nb[i] % (int64_t)es != 0)
            return ROPEQK_ERR_BAD_STRIDES;
    if (inner_contiguous && t->nb[3] != (int64_t)es && t->ne[3] > 1)
        return ROPEQK_ERR_BAD_STRIDES;
    int64_t n;
    if (__builtin_mul_overflow(t->ne[0], t->ne[1], &n) || __builtin_mul_overflow(n, t->ne[2], &n) ||
        __builtin_mul_overflow(n, t->ne[3], &n))
        return ROPEQK_ERR_OVERFLOW;
    *extent = ropeqk_tensor_extent(t);
    if (*extent == 0)
        return ROPEQK_ERR_OVERFLOW;
    /* Non-aliasing: sorted by stride, each dim must step over the whole previous block. */
    int idx[4], m = 0;
    for (int i = 0; i < 4; i++)
        if (t->ne[i] > 1)
            idx[m++] = i;
    for (int a = 1; a < m; a++)
        for (int b = a; b > 0 && t->nb[idx[b]] < t->nb[idx[b - 1]]; b--) {
            int tmp = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = tmp;
        }
    int64_t block = (int64_t)es;
    for (int a = 0; a < m; a++) {
        if (t->nb[idx[a]] < block)
            return ROPEQK_ERR_OVERLAP;
        /* the block of the outermost dim is never compared, and may exceed int64 (extent only
         * bounds nb * (ne - 1)); every inner one is bounded by the next stride */
        if (a + 1 < m)
            block = t->nb[idx[a]] * t->ne[idx[a]];
    }
    return ROPEQK_SUCCESS;
}

void ropeqk_default_params(ropeqk_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->layout = ROPEQK_INTERLEAVED;
    p->base = 10000.0;
}

/* The variants' parameters (docs/conventions.md section 11) into r, after R and D are known. */
static ropeqk_status check_variants(const ropeqk_params *p, bool attention, rq_problem *r)
{
    if (!isfinite(p->softcap) || p->softcap < 0.0) {
        rq_set_error("softcap %g: must be finite and > 0 (0 = off)", p->softcap);
        return ROPEQK_ERR_BAD_PARAM;
    }
    r->softcap = p->softcap;
    const int32_t *ms = p->mrope_section;
    if (ms[0] < 0 || ms[1] < 0 || ms[2] < 0) {
        rq_set_error("mrope_section {%d, %d, %d}: sections must be >= 0", ms[0], ms[1], ms[2]);
        return ROPEQK_ERR_BAD_PARAM;
    }
    r->mrope = ms[0] || ms[1] || ms[2];
    if (r->mrope && (int64_t)ms[0] + ms[1] + ms[2] != r->R / 2) {
        rq_set_error("mrope_section {%d, %d, %d}: the sections sum to %lld, the rotary width has R/2 = %lld "
                     "frequencies", ms[0], ms[1], ms[2], (long long)((int64_t)ms[0] + ms[1] + ms[2]),
                     (long long)(r->R / 2));
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (p->mrope_interleaved && !r->mrope) {
        rq_set_error("mrope_interleaved without mrope_section");
        return ROPEQK_ERR_BAD_PARAM;
    }
    r->mrope_inter = p->mrope_interleaved != 0;
    for (int i = 0; i < 3; i++)
        r->msec[i] = ms[i];
    if (!attention && (p->sinks || p->n_sinks)) {
        rq_set_error("sinks: attention only (the scores carry no softmax)");
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (p->n_sinks != (p->sinks ? r->Hq : 0)) {
        rq_set_error(p->sinks ? "sinks: n_sinks %d, expected Hq = %lld" : "sinks: n_sinks %d without sinks",
                     (int)p->n_sinks, (long long)r->Hq);
        return p->sinks ? ROPEQK_ERR_BAD_SHAPE : ROPEQK_ERR_BAD_PARAM;
    }
    for (int64_t h = 0; p->sinks && h < r->Hq; h++)
        if (!isfinite(p->sinks[h])) {
            rq_set_error("sinks[%lld] is not finite", (long long)h);
            return ROPEQK_ERR_BAD_PARAM;
        }
    r->sinks = p->sinks;
    if (p->math != ROPEQK_MATH_ACCURATE && p->math != ROPEQK_MATH_FAST) {
        rq_set_error("math %d: expected ROPEQK_MATH_ACCURATE (0) or ROPEQK_MATH_FAST (1)", (int)p->math);
        return ROPEQK_ERR_BAD_PARAM;
    }
    r->math = p->math;
    return ROPEQK_SUCCESS;
}

static ropeqk_status validate(const ropeqk_params *p, const ropeqk_tensor *q, const ropeqk_tensor *k,
                              const ropeqk_tensor *out, bool out_f64, bool per_token_pos, bool attention,
                              rq_problem *pb)
{
    if (!p || !q || !k || !out || !pb)
        return ROPEQK_ERR_NULL_POINTER;
    rq_problem r;
    memset(&r, 0, sizeof r);
    ropeqk_status st;
    if ((st = check_view(q, true, false, &r.q_extent)) || (st = check_view(k, true, false, &r.k_extent)) ||
        (st = check_view(out, false, out_f64, &r.out_extent)))
        return st;
    r.B = q->ne[0]; r.Hq = q->ne[1]; r.Sq = q->ne[2]; r.D = q->ne[3];
    r.Hkv = k->ne[1]; r.Sk = k->ne[2];
    if (k->ne[0] != r.B || k->ne[3] != r.D || out->ne[0] != r.B || out->ne[1] != r.Hq ||
        out->ne[2] != r.Sq || out->ne[3] != r.Sk)
        return ROPEQK_ERR_BAD_SHAPE;
    if (r.Hq % r.Hkv != 0)
        return ROPEQK_ERR_BAD_HEADS;
    r.G = r.Hq / r.Hkv;
    /* 2^16 keeps every per-row index product in kernels far from 32-bit limits */
    if (r.D > 65536)
        return ROPEQK_ERR_BAD_SHAPE;
    /* the rotated dims are [rot_off, rot_off + R); R = 0 means the rest of the head */
    if (p->rotary_offset < 0 || p->rotary_offset > r.D - 2) {
        rq_set_error("rotary_offset %d outside [0, D - 2 = %lld]", (int)p->rotary_offset, (long long)(r.D - 2));
        return ROPEQK_ERR_BAD_ROTARY_DIM;
    }
    r.rot_off = p->rotary_offset;
    r.R = p->rotary_dim == 0 ? r.D - r.rot_off : p->rotary_dim;
    if (r.R < 2 || r.rot_off + r.R > r.D || r.R % 2 != 0) {
        rq_set_error("rotary dims [%lld, %lld): R must be even, >= 2, and the range inside D = %lld",
                     (long long)r.rot_off, (long long)(r.rot_off + r.R), (long long)r.D);
        return ROPEQK_ERR_BAD_ROTARY_DIM;
    }
    if (p->layout != ROPEQK_INTERLEAVED && p->layout != ROPEQK_HALF_SPLIT)
        return ROPEQK_ERR_BAD_PARAM;
    r.base = p->base == 0.0 ? 10000.0 : p->base;
    if (!isfinite(r.base) || r.base <= 0.0)
        return ROPEQK_ERR_BAD_PARAM;
    r.scale = p->scale == 0.0 ? 1.0 / sqrt((double)r.D) : p->scale;
    if (!isfinite(r.scale))
        return ROPEQK_ERR_BAD_PARAM;
    r.layout = p->layout;
    r.causal = p->causal != 0;
    r.conjugate = p->conjugate != 0;
    /* offset + row must be an int32 position (what the kernels and per-token arrays carry) */
    if (p->q_pos_offset < INT32_MIN || p->q_pos_offset > (int64_t)INT32_MAX - (r.Sq - 1) ||
        p->k_pos_offset < INT32_MIN || p->k_pos_offset > (int64_t)INT32_MAX - (r.Sk - 1))
        return ROPEQK_ERR_POSITION_RANGE;
    r.q_off = p->q_pos_offset;
    r.k_off = p->k_pos_offset;
    if (p->window < 0)
        return ROPEQK_ERR_BAD_PARAM;
    r.window = p->window;
    if ((st = check_variants(p, attention, &r)))
        return st;
    if ((st = rq_check_scaling(&p->scaling, &r, per_token_pos)))
        return st;
    r.scaling = &p->scaling;
    if (!rq_freqs_usable(&r))
        return p->scaling.type == ROPEQK_SCALING_NONE && !p->scaling.freq_factors ? ROPEQK_ERR_BAD_PARAM
                                                                                   : ROPEQK_ERR_BAD_SCALING;
    *pb = r;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_validate(const ropeqk_params *p, const ropeqk_tensor *q, const ropeqk_tensor *k,
                          const ropeqk_tensor *out, bool out_f64, bool per_token_pos, rq_problem *pb)
{
    return validate(p, q, k, out, out_f64, per_token_pos, false, pb);
}

/* A view of f32/f16/bf16 (or f64 where allowed) data: the element rules of check_view for Q/K-like
 * tensors (innermost dim contiguous), with the dtype list of attention outputs and V. */
static ropeqk_status check_attn_view(const ropeqk_tensor *t, bool storage_types, bool f64_ok, size_t *extent)
{
    bool f32 = t->dtype == ROPEQK_F32, half = t->dtype == ROPEQK_F16 || t->dtype == ROPEQK_BF16;
    if (!(f32 || (half && storage_types) || (t->dtype == ROPEQK_F64 && f64_ok)))
        return ROPEQK_ERR_BAD_DTYPE;
    return check_view(t, true, f64_ok, extent);
}

ropeqk_status rq_validate_attention(const ropeqk_params *p, const ropeqk_tensor *q, const ropeqk_tensor *k,
                                    const ropeqk_tensor *v, const ropeqk_tensor *out, const ropeqk_tensor *lse,
                                    bool out_f64, bool per_token_pos, rq_problem *pb)
{
    if (!p || !q || !k || !v || !out || !pb)
        return ROPEQK_ERR_NULL_POINTER;
    /* Q, K and the parameters exactly as for scores, through a scores-shaped stand-in (never used) */
    ropeqk_tensor s = ropeqk_tensor_bhsd(ROPEQK_F32, q->ne[0], q->ne[1], q->ne[2], k->ne[2]);
    rq_problem r;
    ropeqk_status st = validate(p, q, k, &s, false, per_token_pos, true, &r);
    if (st)
        return st;
    r.out_extent = 0;
    size_t ext;
    if ((st = check_attn_view(v, true, false, &r.v_extent)) || (st = check_attn_view(out, true, out_f64, &r.o_extent)))
        return st;
    r.Dv = v->ne[3];
    if (v->ne[0] != r.B || v->ne[1] != r.Hkv || v->ne[2] != r.Sk || r.Dv > 65536 || out->ne[0] != r.B ||
        out->ne[1] != r.Hq || out->ne[2] != r.Sq || out->ne[3] != r.Dv)
        return ROPEQK_ERR_BAD_SHAPE;
    r.lse_extent = 0;
    if (lse) {
        if (lse->dtype != ROPEQK_F32 && !(lse->dtype == ROPEQK_F64 && out_f64))
            return ROPEQK_ERR_BAD_DTYPE;
        if ((st = check_view(lse, false, out_f64, &ext)))
            return st;
        if (lse->ne[0] != r.B || lse->ne[1] != r.Hq || lse->ne[2] != r.Sq || lse->ne[3] != 1)
            return ROPEQK_ERR_BAD_SHAPE;
        r.lse_extent = ext;
    }
    *pb = r;
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_inv_freq(const ropeqk_params *p, int64_t head_dim, double *inv, double *attention_factor)
{
    if (!p || !inv)
        return ROPEQK_ERR_NULL_POINTER;
    if (head_dim < 1 || head_dim > 65536)
        return ROPEQK_ERR_BAD_SHAPE;
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, head_dim);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, 1);
    rq_problem pb;
    ropeqk_params c = *p; /* the frequencies do not depend on attention sinks (per query head) */
    c.sinks = NULL;
    c.n_sinks = 0;
    ropeqk_status st = rq_validate(&c, &q, &q, &o, false, false, &pb);
    if (st == ROPEQK_SUCCESS) {
        rq_inv_freq(&pb, inv);
        if (attention_factor)
            *attention_factor = pb.attn;
    }
    return st;
}

float rq_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0x1f) {
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else if (m == 0) {
        bits = sign;
    } else { /* subnormal: value = m * 2^-24, exact in float */
        float f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float rq_bf16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

double rq_load_elem(const void *base, size_t off, ropeqk_dtype t)
{
    const unsigned char *p = (const unsigned char *)base + off;
    switch (t) {
    case ROPEQK_F32: { float f; memcpy(&f, p, 4); return f; }
    case ROPEQK_F16: { uint16_t h; memcpy(&h, p, 2); return rq_half_to_float(h); }
    case ROPEQK_BF16: { uint16_t h; memcpy(&h, p, 2); return rq_bf16_to_float(h); }
    case ROPEQK_F64: { double d; memcpy(&d, p, 8); return d; }
    case ROPEQK_I8: case ROPEQK_FP8_E4M3: case ROPEQK_FP8_E5M2: break; /* refused before any load */
    }
    return 0.0;
}

void rq_store_elem(void *base, size_t off, ropeqk_dtype t, double v)
{
    unsigned char *p = (unsigned char *)base + off;
    if (t == ROPEQK_F64) {
        memcpy(p, &v, 8);
    } else {
        float f = (float)v;
        memcpy(p, &f, 4);
    }
}
