/* Decoding of fuzz_validate's input (format in validate_input.h) and the FUZZ_VERBOSE description
 * of a decoded call. */
#include "validate_input.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n, pos;
} reader;

static uint8_t rd_u8(reader *r) { return r->pos < r->n ? r->p[r->pos++] : 0; }

static uint64_t rd_le(reader *r, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)rd_u8(r) << (8 * i);
    return v;
}

static int64_t pow2(int k) { return (int64_t)((uint64_t)1 << (k % 63)); }

/* es: the element size a stride would be a multiple of (1 for plain integers). */
static int64_t rd_i64(reader *r, int64_t es)
{
    uint8_t s = rd_u8(r);
    if (s < 0xC0)
        return s;
    switch ((s - 0xC0) % 19) {
    case 0: return -1;
    case 1: return INT64_MAX;
    case 2: return INT64_MIN;
    case 3: return pow2(rd_u8(r));
    case 4: return pow2(rd_u8(r)) - 1;
    case 5: return pow2(rd_u8(r)) + 1;
    case 6: return -pow2(rd_u8(r));
    case 7: return INT32_MAX;
    case 8: return INT32_MIN;
    case 9: return (int64_t)INT32_MAX + 1;
    case 10: return (int64_t)(uint64_t)(SIZE_MAX / (uint64_t)es); /* wraps to -1 when es == 1 */
    case 11: return INT64_MAX / es * es;
    case 12: return es * (int64_t)rd_le(r, 2);
    case 13: return (int64_t)rd_le(r, 8);
    case 14: return (int64_t)rd_le(r, 2);
    case 15: return -(int64_t)rd_u8(r);
    case 16: return (int64_t)((uint64_t)es << (rd_u8(r) % 63));
    case 17: return (INT64_MAX / es - rd_u8(r)) * es;
    default: return INT64_MAX / (rd_u8(r) + 1) / es * es; /* (ne - 1) * nb lands near the limit */
    }
}

static int32_t rd_i32(reader *r)
{
    uint8_t s = rd_u8(r);
    if (s < 0xC0)
        return s;
    switch ((s - 0xC0) % 8) {
    case 0: return -1;
    case 1: return INT32_MAX;
    case 2: return INT32_MIN;
    case 3: return (int32_t)(uint32_t)rd_le(r, 4);
    case 4: return (int32_t)rd_le(r, 2);
    case 5: return (int32_t)pow2(rd_u8(r) % 31);
    case 6: return -(int32_t)rd_u8(r);
    default: return 192 + rd_u8(r);
    }
}

static double rd_f64(reader *r)
{
    uint8_t s = rd_u8(r);
    if (s < 0x40)
        return s;
    if (s < 0x80)
        return (s - 0x40) / 16.0;
    switch ((s - 0x80) % 24) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return -0.0;
    case 4: return DBL_MIN;
    case 5: return 4.9406564584124654e-324;
    case 6: return DBL_MAX;
    case 7: return -1.0;
    case 8: return 1e-300;
    case 9: return 10000.0;
    case 10: return 500000.0;
    case 11: return 1e300;
    case 12: { uint64_t b = rd_le(r, 8); double d; memcpy(&d, &b, 8); return d; }
    case 13: { uint32_t b = (uint32_t)rd_le(r, 4); float f; memcpy(&f, &b, 4); return f; }
    case 14: return -(double)rd_u8(r);
    case 15: return (double)rd_le(r, 2);
    case 16: return nextafter(1.0, 2.0);
    case 17: return nextafter(1.0, 0.0);
    case 18: return ldexp(1.0, (int8_t)rd_u8(r));
    case 19: return 1.0 + rd_u8(r) / 256.0;
    case 20: return -(rd_u8(r) / 16.0);
    case 21: return (double)rd_le(r, 2) / 1000.0;
    case 22: return 32.0;
    default: return 1e-9;
    }
}

/* ---- descriptors and lists ------------------------------------------------------------- */

static ropeqk_tensor rd_tensor(reader *r)
{
    ropeqk_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = (ropeqk_dtype)rd_i32(r);
    size_t es0 = ropeqk_dtype_size(t.dtype);
    int64_t es = es0 ? (int64_t)es0 : 1;
    int64_t ne[4];
    for (int i = 0; i < 4; i++)
        ne[i] = rd_i64(r, 1);
    switch (rd_u8(r) % 4) {
    case 0:
        t = ropeqk_tensor_bhsd(t.dtype, ne[0], ne[1], ne[2], ne[3]);
        break;
    case 1:
        t = ropeqk_tensor_bshd(t.dtype, ne[0], ne[2], ne[1], ne[3]);
        break;
    case 2:
        memcpy(t.ne, ne, sizeof ne);
        for (int i = 0; i < 4; i++)
            t.nb[i] = rd_i64(r, es);
        break;
    default: {
        t = ropeqk_tensor_bhsd(t.dtype, ne[0], ne[1], ne[2], ne[3]);
        int d = rd_u8(r) % 4;
        t.nb[d] = rd_i64(r, es);
        break;
    }
    }
    return t;
}

/* A factor list: NULL, or a malloc'd array of exactly n doubles (one double when n is out of
   range, so that reading any entry of a list the library should have rejected is caught). */
static double *rd_list(reader *r, int64_t half, int32_t *n_out)
{
    int mode = rd_u8(r) % 4;
    int32_t n = mode == 0 ? 0 : mode == 3 ? (int32_t)(half >= 0 && half <= FV_MAX_LIST ? half : 0) : rd_i32(r);
    *n_out = n;
    if (mode < 2)
        return NULL;
    size_t len = n >= 1 && n <= FV_MAX_LIST ? (size_t)n : 1;
    double *a = malloc(len * sizeof *a), vals[255];
    CHECK(a);
    int m = rd_u8(r);
    for (int i = 0; i < m; i++)
        vals[i] = rd_f64(r);
    for (size_t i = 0; i < len; i++)
        a[i] = m ? vals[i % (size_t)m] : 1.0;
    return a;
}

void fv_decode(const uint8_t *data, size_t size, fv_call *c)
{
    reader r = {data, size, 0};
    memset(c, 0, sizeof *c);
    ropeqk_params *p = &c->p;
    uint8_t flags = rd_u8(&r);
    p->causal = flags & 1;
    p->conjugate = (flags >> 1) & 1;
    c->use_qpos = flags & 4;
    c->use_kpos = flags & 8;
    c->real = flags & 16;
    c->pos_mode = flags >> 5;
    p->layout = (ropeqk_layout)rd_i32(&r);
    p->rotary_dim = rd_i32(&r);
    p->base = rd_f64(&r);
    p->scale = rd_f64(&r);
    p->q_pos_offset = rd_i64(&r, 1);
    p->k_pos_offset = rd_i64(&r, 1);
    p->window = rd_i64(&r, 1);
    ropeqk_scaling *s = &p->scaling;
    s->type = (ropeqk_scaling_type)rd_i32(&r);
    s->factor = rd_f64(&r);
    s->original_max_position = rd_i64(&r, 1);
    s->seq_len = rd_i64(&r, 1);
    s->beta_fast = rd_f64(&r);
    s->beta_slow = rd_f64(&r);
    s->attention_factor = rd_f64(&r);
    s->low_freq_factor = rd_f64(&r);
    s->high_freq_factor = rd_f64(&r);
    c->q = rd_tensor(&r);
    c->k = rd_tensor(&r);
    c->o = rd_tensor(&r);
    int64_t half = (p->rotary_dim ? p->rotary_dim : c->q.ne[3]) / 2;
    s->long_factor = c->lists[0] = rd_list(&r, half, &s->n_long_factor);
    s->short_factor = c->lists[1] = rd_list(&r, half, &s->n_short_factor);
    s->freq_factors = c->lists[2] = rd_list(&r, half, &s->n_freq_factors);
    c->rest = r.p + r.pos;
    c->rest_len = r.n - r.pos;
}

void fv_free(fv_call *c)
{
    for (int i = 0; i < 3; i++)
        free(c->lists[i]);
    memset(c, 0, sizeof *c);
}

bool fv_env_flag(const char *name)
{
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

/* ---- FUZZ_VERBOSE ---------------------------------------------------------------------- */

static void print_tensor(const char *name, const ropeqk_tensor *t)
{
    fprintf(stderr, "  %s: dtype %d ne {%lld, %lld, %lld, %lld} nb {%lld, %lld, %lld, %lld} extent %zu\n", name,
            (int)t->dtype, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
            (long long)t->nb[0], (long long)t->nb[1], (long long)t->nb[2], (long long)t->nb[3],
            ropeqk_tensor_extent(t));
}

static void print_list(const char *name, const double *f, int32_t n)
{
    int32_t len = n >= 1 && n <= FV_MAX_LIST ? n : 1; /* what rd_list() allocated */
    fprintf(stderr, "  %s: %s n=%d", name, f ? "array" : "NULL", (int)n);
    for (int32_t i = 0; f && i < len && i < 8; i++)
        fprintf(stderr, " %.17g", f[i]);
    fprintf(stderr, "%s\n", f && len > 8 ? " ..." : "");
}

void fv_print(const fv_call *c)
{
    const ropeqk_params *p = &c->p;
    const ropeqk_scaling *s = &p->scaling;
    fprintf(stderr, "fuzz_validate input:\n  layout %d rotary_dim %d base %.17g scale %.17g causal %d conjugate %d\n",
            (int)p->layout, (int)p->rotary_dim, p->base, p->scale, p->causal, p->conjugate);
    fprintf(stderr, "  q_pos_offset %lld k_pos_offset %lld window %lld; positions: q %s k %s (fill mode %d); "
            "real run %s\n", (long long)p->q_pos_offset, (long long)p->k_pos_offset, (long long)p->window,
            c->use_qpos ? "array" : "NULL", c->use_kpos ? "array" : "NULL", c->pos_mode, c->real ? "if small" : "no");
    fprintf(stderr, "  scaling: type %d factor %.17g original_max_position %lld seq_len %lld\n"
            "    beta_fast %.17g beta_slow %.17g attention_factor %.17g low_freq_factor %.17g high_freq_factor %.17g\n",
            (int)s->type, s->factor, (long long)s->original_max_position, (long long)s->seq_len, s->beta_fast,
            s->beta_slow, s->attention_factor, s->low_freq_factor, s->high_freq_factor);
    print_list("long_factor", s->long_factor, s->n_long_factor);
    print_list("short_factor", s->short_factor, s->n_short_factor);
    print_list("freq_factors", s->freq_factors, s->n_freq_factors);
    print_tensor("q", &c->q);
    print_tensor("k", &c->k);
    print_tensor("out", &c->o);
}
