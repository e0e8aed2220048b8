/* Paged KV cache (ROPEQK_OP_PAGED_DECODE): decode over shuffled pages and ragged lengths against an
 * fp64 reference written here (keys gathered from the pages, rotated with fp64 angles from
 * ropeqk_inv_freq, softmax . V in double); append then decode equals decode of a cache written
 * directly; every invalid description, batch and append is refused with its status and nothing
 * written; one plan enqueued from four threads gives a lone run's bits; the paged kernels' arguments
 * follow contract.h.
 *
 * Metric (docs/conventions.md): per row max_d |O - O64| / max_j ||V_j||_inf, and
 * |LSE - LSE64| / max(|LSE64|, 1). Cache slots that no sequence uses hold NaN, so a stray read shows.
 * The seed is ROPEQK_TEST_SEED (default 20261201), named in every failure message. */
#include "harness.h"
#include "../cl/contract.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ropeqk_ctx *ctx;

static void setup(void)
{
    char why[256];
    ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
}
static void teardown(void)
{
    ropeqk_ctx_destroy(ctx);
    th_leak_check();
}

TestSuite(paged, .init = setup, .fini = teardown);

static uint64_t test_seed(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20261201ull;
}

/* ---- storage helpers ------------------------------------------------------------------------- */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15), e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), (int)e - 25);
    return sign ? -f : f;
}

static float bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double load(const void *base, size_t off, ropeqk_dtype t)
{
    const unsigned char *p = (const unsigned char *)base + off;
    uint16_t h;
    float f;
    switch (t) {
    case ROPEQK_F16: memcpy(&h, p, 2); return half_to_float(h);
    case ROPEQK_BF16: memcpy(&h, p, 2); return bf16_to_float(h);
    default: memcpy(&f, p, 4); return f;
    }
}

/* A random value in (-1, 1) exactly representable in t, stored at p. */
static void put_random(void *p, ropeqk_dtype t, uint64_t *rng)
{
    uint64_t r = th_rand(rng);
    if (t == ROPEQK_F16) { /* sign, exponent 2^-6..2^-1, mantissa */
        uint16_t h = (uint16_t)(((r & 1) << 15) | ((9 + (r >> 1) % 6) << 10) | ((r >> 8) & 0x3ff));
        memcpy(p, &h, 2);
    } else if (t == ROPEQK_BF16) {
        uint16_t h = (uint16_t)(((r & 1) << 15) | ((121 + (r >> 1) % 6) << 7) | ((r >> 8) & 0x7f));
        memcpy(p, &h, 2);
    } else {
        float f = (float)th_uniform(rng);
        memcpy(p, &f, 4);
    }
}

static size_t off4(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (size_t)(a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3]);
}

static cl_mem make_buffer(size_t bytes, const void *init)
{
    cl_int e;
    cl_mem m = clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0),
                              bytes, (void *)init, &e);
    cr_assert(m && e == CL_SUCCESS, "clCreateBuffer(%zu): %d", bytes, e);
    return m;
}

static void fill_bytes(cl_mem m, size_t bytes, unsigned char byte)
{
    unsigned char pat[4] = {byte, byte, byte, byte};
    cr_assert_eq(clEnqueueFillBuffer(ropeqk_opencl_queue(ctx), m, pat, 4, 0, bytes, 0, NULL, NULL), CL_SUCCESS);
    clFinish(ropeqk_opencl_queue(ctx));
}

static void read_buffer(cl_mem m, size_t bytes, void *dst)
{
    cr_assert_eq(clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), m, CL_TRUE, 0, bytes, dst, 0, NULL, NULL), CL_SUCCESS);
}

/* ---- a paged problem ------------------------------------------------------------------------- */
#define MAXS 8

typedef struct {
    const char *name;
    int64_t Hq, Hkv, D, Dv, ps, n_seqs, max_seqs, maxp, spare_pages;
    int64_t lens[MAXS];        /* 0: drawn from [1, len_max] */
    int64_t len_max;
    ropeqk_dtype qdt, kdt, vdt, odt;
    bool bshd_cache, with_lse;
    ropeqk_params p;
    /* positions: k_pos0 from [kpos_lo, kpos_lo + kpos_span]; q_pos = last key + q_ahead (may be < 0) */
    int64_t kpos_lo, kpos_span, q_ahead;
    double tol;                /* 0: 1e-5 */
} pcase;

typedef struct {
    ropeqk_tensor tq, tk, tv, to, tl;
    unsigned char *q, *k, *v;
    size_t qb, kb, vb, ob, lb;
    int64_t num_pages;
    int32_t *table, lens[MAXS], qpos[MAXS], kpos0[MAXS];
} pdata;

static ropeqk_tensor cache_view(const pcase *c, ropeqk_dtype dt, int64_t num_pages, int64_t dim)
{
    return c->bshd_cache ? ropeqk_tensor_bshd(dt, num_pages, c->ps, c->Hkv, dim)
                         : ropeqk_tensor_bhsd(dt, num_pages, c->Hkv, c->ps, dim);
}

/* Lengths, shuffled pages (every sequence's pages distinct, spare pages unused), positions, data.
 * Every cache byte outside the sequences' tokens is 0xFF (NaN in every dtype). */
static void pdata_make(const pcase *c, pdata *d, uint64_t *rng)
{
    memset(d, 0, sizeof *d);
    int64_t total = 0;
    for (int64_t s = 0; s < c->n_seqs; s++) {
        int64_t len = c->lens[s] ? c->lens[s] : 1 + (int64_t)(th_rand(rng) % (uint64_t)c->len_max);
        cr_assert(len <= c->maxp * c->ps);
        d->lens[s] = (int32_t)len;
        total += (len + c->ps - 1) / c->ps;
    }
    d->num_pages = total + c->spare_pages;
    int32_t *perm = malloc((size_t)d->num_pages * sizeof *perm);
    for (int64_t i = 0; i < d->num_pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = d->num_pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(th_rand(rng) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    d->table = malloc((size_t)(c->max_seqs * c->maxp) * sizeof *d->table);
    for (int64_t i = 0; i < c->max_seqs * c->maxp; i++)
        d->table[i] = -12345; /* entries past a sequence's pages: ignored, whatever they hold */
    int64_t at = 0;
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t i = 0; i < (d->lens[s] + c->ps - 1) / c->ps; i++)
            d->table[s * c->maxp + i] = perm[at++];
    free(perm);
    for (int64_t s = 0; s < c->n_seqs; s++) {
        int64_t k0 = c->kpos_lo + (c->kpos_span ? (int64_t)(th_rand(rng) % (uint64_t)(c->kpos_span + 1)) : 0);
        d->kpos0[s] = (int32_t)k0;
        d->qpos[s] = (int32_t)(k0 + d->lens[s] - 1 + c->q_ahead);
    }
    d->tq = ropeqk_tensor_bhsd(c->qdt, c->max_seqs, c->Hq, 1, c->D);
    d->tk = cache_view(c, c->kdt, d->num_pages, c->D);
    d->tv = cache_view(c, c->vdt, d->num_pages, c->Dv);
    d->to = ropeqk_tensor_bhsd(c->odt, c->max_seqs, c->Hq, 1, c->Dv);
    d->tl = ropeqk_tensor_bhsd(ROPEQK_F32, c->max_seqs, c->Hq, 1, 1);
    d->qb = ropeqk_tensor_extent(&d->tq);
    d->kb = ropeqk_tensor_extent(&d->tk);
    d->vb = ropeqk_tensor_extent(&d->tv);
    d->ob = ropeqk_tensor_extent(&d->to);
    d->lb = ropeqk_tensor_extent(&d->tl);
    d->q = malloc(d->qb);
    d->k = malloc(d->kb);
    d->v = malloc(d->vb);
    memset(d->k, 0xFF, d->kb);
    memset(d->v, 0xFF, d->vb);
    size_t qes = ropeqk_dtype_size(c->qdt), kes = ropeqk_dtype_size(c->kdt), ves = ropeqk_dtype_size(c->vdt);
    for (size_t i = 0; i < d->qb / qes; i++)
        put_random(d->q + i * qes, c->qdt, rng);
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t j = 0; j < d->lens[s]; j++) {
            int64_t page = d->table[s * c->maxp + j / c->ps], slot = j % c->ps;
            for (int64_t h = 0; h < c->Hkv; h++) {
                for (int64_t i = 0; i < c->D; i++)
                    put_random(d->k + off4(&d->tk, page, h, slot, i), c->kdt, rng);
                for (int64_t i = 0; i < c->Dv; i++)
                    put_random(d->v + off4(&d->tv, page, h, slot, i), c->vdt, rng);
            }
        }
    (void)kes, (void)ves;
}

static void pdata_free(pdata *d)
{
    free(d->q), free(d->k), free(d->v), free(d->table);
}

static ropeqk_paged_batch batch_of(const pcase *c, pdata *d)
{
    return (ropeqk_paged_batch){.n_seqs = c->n_seqs, .page_table = d->table, .seq_lens = d->lens, .q_pos = d->qpos,
                                .k_pos0 = d->kpos0};
}

static ropeqk_plan_desc desc_of(const pcase *c, const pdata *d)
{
    return (ropeqk_plan_desc){.op = ROPEQK_OP_PAGED_DECODE, .params = c->p, .q = d->tq, .k = d->tk, .v = d->tv,
                              .out = d->to, .lse = d->tl, .with_lse = c->with_lse,
                              .paged = {.page_size = c->ps, .max_pages_per_seq = c->maxp, .max_seqs = c->max_seqs}};
}

/* ---- the fp64 reference ------------------------------------------------------------------------ */
static void rotate(const ropeqk_params *p, int64_t D, const double *inv, double attn, int64_t pos, double *x)
{
    int64_t R = p->rotary_dim ? p->rotary_dim : D;
    for (int64_t u = 0; u < R / 2; u++) {
        int64_t i0 = p->layout == ROPEQK_INTERLEAVED ? 2 * u : u;
        int64_t i1 = p->layout == ROPEQK_INTERLEAVED ? 2 * u + 1 : u + R / 2;
        double a = (double)pos * inv[u];
        double cs = cos(a) * attn, sn = (p->conjugate ? -sin(a) : sin(a)) * attn;
        double x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * cs - x1 * sn;
        x[i1] = x0 * sn + x1 * cs;
    }
}

/* o64 [n_seqs][Hq][Dv], lse64 [n_seqs][Hq], vmax [n_seqs][Hkv] (max_j ||V_j||_inf over the sequence) */
static void reference(const pcase *c, const pdata *d, double *o64, double *lse64, double *vmax)
{
    const ropeqk_params *p = &c->p;
    int64_t R = p->rotary_dim ? p->rotary_dim : c->D, G = c->Hq / c->Hkv;
    double *inv = malloc((size_t)(R / 2) * sizeof *inv), attn = 1.0;
    cr_assert_eq(ropeqk_inv_freq(p, c->D, inv, &attn), ROPEQK_SUCCESS);
    double scale = p->scale != 0.0 ? p->scale : 1.0 / sqrt((double)c->D);
    int64_t maxlen = 1;
    for (int64_t s = 0; s < c->n_seqs; s++)
        maxlen = d->lens[s] > maxlen ? d->lens[s] : maxlen;
    double *kr = malloc((size_t)(maxlen * c->D) * sizeof *kr), *vv = malloc((size_t)(maxlen * c->Dv) * sizeof *vv);
    double *sc = malloc((size_t)maxlen * sizeof *sc), *qr = malloc((size_t)c->D * sizeof *qr);
    for (int64_t s = 0; s < c->n_seqs; s++) {
        int64_t len = d->lens[s], pq = d->qpos[s];
        for (int64_t hk = 0; hk < c->Hkv; hk++) {
            double vm = 0.0;
            for (int64_t j = 0; j < len; j++) {
                int64_t page = d->table[s * c->maxp + j / c->ps], slot = j % c->ps;
                for (int64_t i = 0; i < c->D; i++)
                    kr[j * c->D + i] = load(d->k, off4(&d->tk, page, hk, slot, i), c->kdt);
                rotate(p, c->D, inv, attn, (int64_t)d->kpos0[s] + j, kr + j * c->D);
                for (int64_t i = 0; i < c->Dv; i++) {
                    vv[j * c->Dv + i] = load(d->v, off4(&d->tv, page, hk, slot, i), c->vdt);
                    vm = fmax(vm, fabs(vv[j * c->Dv + i]));
                }
            }
            vmax[s * c->Hkv + hk] = vm;
            for (int64_t g = 0; g < G; g++) {
                int64_t h = hk * G + g;
                for (int64_t i = 0; i < c->D; i++)
                    qr[i] = load(d->q, off4(&d->tq, s, h, 0, i), c->qdt);
                rotate(p, c->D, inv, attn, pq, qr);
                double m = -INFINITY;
                for (int64_t j = 0; j < len; j++) {
                    int64_t pk = (int64_t)d->kpos0[s] + j;
                    bool masked = (p->causal && pk > pq) || (p->window > 0 && pq - pk >= p->window);
                    double dot = 0.0;
                    for (int64_t i = 0; i < c->D; i++)
                        dot += qr[i] * kr[j * c->D + i];
                    sc[j] = masked ? -INFINITY : scale * dot;
                    m = fmax(m, sc[j]);
                }
                double *o = o64 + (s * c->Hq + h) * c->Dv;
                for (int64_t i = 0; i < c->Dv; i++)
                    o[i] = 0.0;
                if (m == -INFINITY) {
                    lse64[s * c->Hq + h] = -INFINITY;
                    continue;
                }
                double l = 0.0;
                for (int64_t j = 0; j < len; j++) {
                    double w = exp(sc[j] - m);
                    l += w;
                    for (int64_t i = 0; i < c->Dv; i++)
                        o[i] += w * vv[j * c->Dv + i];
                }
                for (int64_t i = 0; i < c->Dv; i++)
                    o[i] /= l;
                lse64[s * c->Hq + h] = m + log(l);
            }
        }
    }
    free(inv), free(kr), free(vv), free(sc), free(qr);
}

/* ---- running a case ---------------------------------------------------------------------------- */
typedef struct {
    cl_mem q, k, v, o, l;
} pbufs;

static void pbufs_make(const pdata *d, pbufs *b)
{
    b->q = make_buffer(d->qb, d->q);
    b->k = make_buffer(d->kb, d->k);
    b->v = make_buffer(d->vb, d->v);
    b->o = make_buffer(d->ob, NULL);
    b->l = make_buffer(d->lb, NULL);
}

static void pbufs_free(pbufs *b)
{
    clReleaseMemObject(b->q), clReleaseMemObject(b->k), clReleaseMemObject(b->v);
    clReleaseMemObject(b->o), clReleaseMemObject(b->l);
}

static ropeqk_opencl_paged_args args_of(const pcase *c, const pbufs *b)
{
    return (ropeqk_opencl_paged_args){.q = {b->q, 0}, .k_cache = {b->k, 0}, .v_cache = {b->v, 0}, .out = {b->o, 0},
                                      .lse = {c->with_lse ? b->l : NULL, 0}};
}

static void run_case(const pcase *c, uint64_t seed)
{
    uint64_t rng = seed;
    static pdata d;
    pdata_make(c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(c, &d);
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &desc, &pl);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): plan: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    pbufs b;
    pbufs_make(&d, &b);
    fill_bytes(b.o, d.ob, 0x5A);
    fill_bytes(b.l, d.lb, 0x5A);
    ropeqk_paged_batch batch = batch_of(c, &d);
    ropeqk_opencl_paged_args a = args_of(c, &b);
    cl_event ev = NULL;
    st = ropeqk_opencl_paged_enqueue(pl, NULL, &a, &batch, 0, NULL, &ev);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): enqueue: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    cr_assert(ev);
    unsigned char *out = malloc(d.ob);
    float *lse = malloc(d.lb);
    cl_command_queue qu = ropeqk_opencl_queue(ctx);
    cr_assert_eq(clEnqueueReadBuffer(qu, b.o, CL_TRUE, 0, d.ob, out, 1, &ev, NULL), CL_SUCCESS);
    read_buffer(b.l, d.lb, lse);
    clReleaseEvent(ev);

    double *o64 = malloc((size_t)(c->n_seqs * c->Hq * c->Dv) * sizeof *o64);
    double *l64 = malloc((size_t)(c->n_seqs * c->Hq) * sizeof *l64);
    double *vmax = malloc((size_t)(c->n_seqs * c->Hkv) * sizeof *vmax);
    reference(c, &d, o64, l64, vmax);
    double tol = c->tol > 0 ? c->tol : 1e-5, worst = 0.0, worst_lse = 0.0;
    int64_t G = c->Hq / c->Hkv, mismatch = 0;
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t h = 0; h < c->Hq; h++) {
            double vm = vmax[s * c->Hkv + h / G], e = 0.0;
            for (int64_t i = 0; i < c->Dv; i++) {
                double x = load(out, off4(&d.to, s, h, 0, i), c->odt), y = o64[(s * c->Hq + h) * c->Dv + i];
                if (isnan(x))
                    mismatch++;
                e = fmax(e, fabs(x - y) / (vm > 0 ? vm : 1.0));
            }
            worst = fmax(worst, e);
            if (c->with_lse) {
                double x = lse[s * c->Hq + h], y = l64[s * c->Hq + h];
                if (isinf(y) || isinf(x)) {
                    if (!(isinf(x) && isinf(y) && x < 0 && y < 0))
                        mismatch++;
                } else if (isnan(x)) {
                    mismatch++;
                } else {
                    worst_lse = fmax(worst_lse, fabs(x - y) / fmax(fabs(y), 1.0));
                }
            }
        }
    cr_log_info("%s (seed %llu): max error %.3g, LSE %.3g", c->name, (unsigned long long)seed, worst, worst_lse);
    cr_expect(worst <= tol, "%s (seed %llu): max |O - O64| / max ||V||_inf = %.3g > %g", c->name,
              (unsigned long long)seed, worst, tol);
    cr_expect(worst_lse <= 1e-5, "%s (seed %llu): LSE relative error %.3g", c->name, (unsigned long long)seed,
              worst_lse);
    cr_expect_eq(mismatch, 0, "%s (seed %llu): %lld NaN or -inf mismatches", c->name, (unsigned long long)seed,
                 (long long)mismatch);
    /* rows past n_seqs, and the LSE without with_lse, are never written */
    size_t row_bytes = (size_t)d.to.nb[0];
    for (size_t i = (size_t)c->n_seqs * row_bytes; i < d.ob; i++)
        cr_assert_eq(out[i], 0x5A, "%s: output byte %zu past the batch written", c->name, i);
    if (!c->with_lse)
        for (size_t i = 0; i < d.lb; i++)
            cr_assert_eq(((unsigned char *)lse)[i], 0x5A, "%s: LSE written without with_lse", c->name);
    free(out), free(lse), free(o64), free(l64), free(vmax);
    pbufs_free(&b);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}

static pcase base_case(const char *name)
{
    pcase c;
    memset(&c, 0, sizeof c);
    c.name = name;
    ropeqk_default_params(&c.p);
    c.Hq = 8, c.Hkv = 2, c.D = 64, c.Dv = 64, c.ps = 16, c.n_seqs = 5, c.max_seqs = 6, c.maxp = 320;
    c.spare_pages = 7, c.len_max = 5000, c.with_lse = true, c.qdt = c.kdt = c.vdt = c.odt = ROPEQK_F32;
    c.kpos_span = 100;
    return c;
}

/* f32 caches, interleaved, GQA 8/2, pages of 16, ragged lengths 1..5000, causal */
Test(paged, f32_interleaved_gqa_causal_pages16)
{
    pcase c = base_case("f32 interleaved GQA causal ps16");
    int64_t lens[] = {1, 17, 5000, 300, 1023};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    c.q_ahead = 3;
    run_case(&c, test_seed());
}

/* half-split, MHA, pages of 64, Dv != D with a tail of dims, partial rotary (the attention factor on
 * rotated dims only), BSHD cache, no mask */
Test(paged, f32_half_split_partial_rotary_bshd_pages64)
{
    pcase c = base_case("f32 half-split R=96 YaRN Dv=40 bshd ps64");
    c.Hq = 4, c.Hkv = 4, c.D = 128, c.Dv = 40, c.ps = 64, c.maxp = 80, c.bshd_cache = true;
    int64_t lens[] = {5000, 1, 64, 65, 2500};
    memcpy(c.lens, lens, sizeof lens);
    c.p.layout = ROPEQK_HALF_SPLIT;
    c.p.rotary_dim = 96;
    c.p.base = 500000;
    c.p.scaling.type = ROPEQK_SCALING_YARN;
    c.p.scaling.factor = 8;
    c.p.scaling.original_max_position = 2048;
    run_case(&c, test_seed() + 1);
}

/* one sequence (many splits), pages of 256, f16 K / bf16 V / f16 Q, sliding window + causal, positions
 * near 2^20, YaRN (attention factor on cos and sin) */
Test(paged, f16_bf16_window_near_2p20_pages256)
{
    pcase c = base_case("f16 K bf16 V window 2^20 YaRN ps256");
    c.Hq = 12, c.Hkv = 3, c.D = 80, c.Dv = 96, c.ps = 256, c.n_seqs = 1, c.max_seqs = 2, c.maxp = 20;
    c.lens[0] = 5000;
    c.qdt = ROPEQK_F16, c.kdt = ROPEQK_F16, c.vdt = ROPEQK_BF16;
    c.p.causal = 1;
    c.p.window = 700;
    c.kpos_lo = (1 << 20) - 2600, c.kpos_span = 0;
    c.p.scaling.type = ROPEQK_SCALING_YARN;
    c.p.scaling.factor = 4;
    c.p.scaling.original_max_position = 4096;
    run_case(&c, test_seed() + 2);
}

/* bf16 K / f16 V, conjugate rotation, Llama 3 scaling, f16 and bf16 outputs (their rounding bounds) */
Test(paged, bf16_f16_caches_half_outputs)
{
    ropeqk_dtype outs[] = {ROPEQK_F16, ROPEQK_BF16};
    double tols[] = {1e-3, 5e-3};
    for (int i = 0; i < 2; i++) {
        pcase c = base_case(i ? "bf16 K f16 V, bf16 out" : "bf16 K f16 V, f16 out");
        c.Hq = 6, c.Hkv = 2, c.D = 64, c.Dv = 32, c.ps = 32, c.maxp = 100, c.len_max = 3000, c.n_seqs = 4;
        c.kdt = ROPEQK_BF16, c.vdt = ROPEQK_F16, c.qdt = ROPEQK_BF16, c.odt = outs[i], c.tol = tols[i];
        c.p.conjugate = 1;
        c.p.causal = 1;
        c.p.scaling.type = ROPEQK_SCALING_LLAMA3;
        c.p.base = 500000;
        run_case(&c, test_seed() + 3 + (uint64_t)i);
    }
}

/* MQA with 40 query heads (head chunks of both kernel shapes), Dv 300 (the GPU shape's V chunks) */
Test(paged, mqa_40_heads_dv300)
{
    pcase c = base_case("MQA Hq=40 D=32 Dv=300 ps32");
    c.Hq = 40, c.Hkv = 1, c.D = 32, c.Dv = 300, c.ps = 32, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 40;
    int64_t lens[] = {700, 3};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    run_case(&c, test_seed() + 5);
    /* the same heads as MHA: several task groups of whole KV heads */
    c.name = "MHA Hq=Hkv=40 D=32 Dv=24";
    c.Hkv = 40, c.Dv = 24;
    run_case(&c, test_seed() + 6);
}

/* DYNAMIC scaling with an explicit seq_len, no LSE, a batch smaller than max_seqs */
Test(paged, dynamic_scaling_without_lse)
{
    pcase c = base_case("DYNAMIC seq_len 8192, no LSE");
    c.n_seqs = 3, c.max_seqs = 7, c.len_max = 2000, c.with_lse = false;
    c.p.scaling.type = ROPEQK_SCALING_DYNAMIC;
    c.p.scaling.factor = 2;
    c.p.scaling.original_max_position = 2048;
    c.p.scaling.seq_len = 8192;
    c.kpos_lo = 4000;
    run_case(&c, test_seed() + 7);
}

/* rows whose every key is masked: O = 0, LSE = -inf (causal with all keys after the query; a window
 * that ends before the first key) */
Test(paged, fully_masked_rows)
{
    pcase c = base_case("all keys in the future (causal)");
    c.n_seqs = 3, c.len_max = 400;
    c.p.causal = 1;
    c.q_ahead = -1000; /* the query sits before the first key of every sequence */
    run_case(&c, test_seed() + 8);
    c.name = "all keys outside the window";
    c.p.causal = 0;
    c.p.window = 5;
    c.q_ahead = 600;
    run_case(&c, test_seed() + 9);
}

/* ---- append ------------------------------------------------------------------------------------ */
/* Appending rows chunk by chunk (a prefill chunk, single tokens, another chunk) into shuffled pages
 * leaves the cache byte for byte as writing it directly, and decode on it gives the same bits. */
static void append_case(ropeqk_dtype kdt, ropeqk_dtype vdt, bool bshd, uint64_t seed)
{
    pcase c = base_case("append");
    c.n_seqs = 3, c.max_seqs = 3, c.ps = 16, c.maxp = 8, c.spare_pages = 3, c.kdt = kdt, c.vdt = vdt;
    c.bshd_cache = bshd, c.Dv = 48;
    c.p.causal = 1;
    int64_t lens[] = {37 + 5 + 20, 37 + 5 + 20, 37 + 5 + 20};
    memcpy(c.lens, lens, sizeof lens);
    uint64_t rng = seed;
    static pdata d;
    pdata_make(&c, &d, &rng); /* d.k, d.v: the cache written directly */
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs direct, app;
    pbufs_make(&d, &direct);
    pbufs_make(&d, &app);
    fill_bytes(app.k, d.kb, 0xFF);
    fill_bytes(app.v, d.vb, 0xFF);
    static const int64_t chunks[] = {37, 1, 1, 1, 1, 1, 20};
    int32_t cur[3] = {0, 0, 0};
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        int64_t nn = chunks[ci];
        /* k_new [3, Hkv, nn, D] (BSHD memory when bshd), rows copied from the direct cache */
        ropeqk_tensor tkn = bshd ? ropeqk_tensor_bshd(kdt, 3, nn, c.Hkv, c.D) : ropeqk_tensor_bhsd(kdt, 3, c.Hkv, nn, c.D);
        ropeqk_tensor tvn = ropeqk_tensor_bhsd(vdt, 3, c.Hkv, nn, c.Dv);
        size_t kbn = ropeqk_tensor_extent(&tkn), vbn = ropeqk_tensor_extent(&tvn);
        unsigned char *kn = malloc(kbn), *vn = malloc(vbn);
        size_t kes = ropeqk_dtype_size(kdt), ves = ropeqk_dtype_size(vdt);
        for (int64_t s = 0; s < 3; s++)
            for (int64_t h = 0; h < c.Hkv; h++)
                for (int64_t t = 0; t < nn; t++) {
                    int64_t j = cur[s] + t, page = d.table[s * c.maxp + j / c.ps], slot = j % c.ps;
                    memcpy(kn + off4(&tkn, s, h, t, 0), d.k + off4(&d.tk, page, h, slot, 0), (size_t)c.D * kes);
                    memcpy(vn + off4(&tvn, s, h, t, 0), d.v + off4(&d.tv, page, h, slot, 0), (size_t)c.Dv * ves);
                }
        cl_mem bkn = make_buffer(kbn, kn), bvn = make_buffer(vbn, vn);
        ropeqk_paged_batch b = {.n_seqs = 3, .page_table = d.table, .seq_lens = cur};
        cl_event ev = NULL;
        ropeqk_status st = ropeqk_opencl_paged_append(pl, NULL, &tkn, (ropeqk_opencl_mem){bkn, 0}, &tvn,
                                                      (ropeqk_opencl_mem){bvn, 0}, (ropeqk_opencl_mem){app.k, 0},
                                                      (ropeqk_opencl_mem){app.v, 0}, &b, 0, NULL, &ev);
        cr_assert_eq(st, ROPEQK_SUCCESS, "append chunk %zu: %s: %s", ci, ropeqk_status_string(st), ropeqk_last_error());
        cr_assert(ev);
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
        clReleaseMemObject(bkn), clReleaseMemObject(bvn);
        free(kn), free(vn);
        for (int s = 0; s < 3; s++)
            cur[s] += (int32_t)nn;
    }
    unsigned char *kc = malloc(d.kb), *vc = malloc(d.vb);
    read_buffer(app.k, d.kb, kc);
    read_buffer(app.v, d.vb, vc);
    cr_expect(memcmp(kc, d.k, d.kb) == 0, "appended K cache differs from the directly written one (seed %llu)",
              (unsigned long long)seed);
    cr_expect(memcmp(vc, d.v, d.vb) == 0, "appended V cache differs from the directly written one (seed %llu)",
              (unsigned long long)seed);
    free(kc), free(vc);
    ropeqk_paged_batch batch = batch_of(&c, &d);
    unsigned char *o1 = malloc(d.ob), *o2 = malloc(d.ob);
    pbufs *bs[2] = {&direct, &app};
    unsigned char *os[2] = {o1, o2};
    for (int i = 0; i < 2; i++) {
        fill_bytes(bs[i]->o, d.ob, 0);
        ropeqk_opencl_paged_args a = args_of(&c, bs[i]);
        cr_assert_eq(ropeqk_opencl_paged_enqueue(pl, NULL, &a, &batch, 0, NULL, NULL), ROPEQK_SUCCESS, "%s",
                     ropeqk_last_error());
        read_buffer(bs[i]->o, d.ob, os[i]);
    }
    cr_expect(memcmp(o1, o2, d.ob) == 0, "decode after append differs from decode of the direct cache");
    free(o1), free(o2);
    pbufs_free(&direct);
    pbufs_free(&app);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}

Test(paged, append_then_decode_equals_direct_cache)
{
    append_case(ROPEQK_F32, ROPEQK_F32, false, test_seed() + 20);
    append_case(ROPEQK_F16, ROPEQK_BF16, true, test_seed() + 21);
}

/* ---- refusals ---------------------------------------------------------------------------------- */
enum { IS = 3, IHQ = 4, IHKV = 2, ID = 32, IPS = 16, IMAXP = 4, INP = 12 };

Test(paged, invalid_descriptions)
{
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, ID);
    ropeqk_tensor k = ropeqk_tensor_bhsd(ROPEQK_F16, INP, IHKV, IPS, ID);
    ropeqk_tensor v = ropeqk_tensor_bhsd(ROPEQK_F32, INP, IHKV, IPS, ID);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, ID);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, 1);
    ropeqk_plan_desc good = {.op = ROPEQK_OP_PAGED_DECODE, .q = q, .k = k, .v = v, .out = o, .lse = l,
                             .with_lse = 1, .paged = {IPS, IMAXP, IS}};
    ropeqk_default_params(&good.params);
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &good, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    ropeqk_plan_destroy(pl);
    struct {
        ropeqk_plan_desc d;
        ropeqk_status want;
        const char *what;
    } cases[24];
    int n = 0;
#define CASE(WANT, WHAT, EDIT)                                                                     \
    do {                                                                                           \
        cases[n].d = good;                                                                         \
        ropeqk_plan_desc *d = &cases[n].d;                                                         \
        EDIT;                                                                                      \
        cases[n].want = (WANT);                                                                    \
        cases[n++].what = (WHAT);                                                                  \
    } while (0)
    CASE(ROPEQK_ERR_BAD_PARAM, "page_size 8", (d->paged.page_size = 8, d->k.ne[2] = d->v.ne[2] = 8));
    CASE(ROPEQK_ERR_BAD_PARAM, "page_size 512", (d->paged.page_size = 512));
    CASE(ROPEQK_ERR_BAD_SHAPE, "page_size != k.ne[2]", (d->paged.page_size = 32));
    CASE(ROPEQK_ERR_BAD_SHAPE, "v.ne[2] != page_size", (d->v = ropeqk_tensor_bhsd(ROPEQK_F32, INP, IHKV, 32, ID)));
    CASE(ROPEQK_ERR_BAD_PARAM, "max_pages_per_seq 0", (d->paged.max_pages_per_seq = 0));
    CASE(ROPEQK_ERR_BAD_SHAPE, "max_seqs != q.ne[0]", (d->paged.max_seqs = IS + 1));
    CASE(ROPEQK_ERR_BAD_SHAPE, "two query rows", (d->q.ne[2] = 2));
    CASE(ROPEQK_ERR_BAD_PARAM, "per-token position arrays", (d->positions = ROPEQK_POS_ARRAYS));
    CASE(ROPEQK_ERR_BAD_PARAM, "max_keys", (d->max_keys = 5));
    CASE(ROPEQK_ERR_BAD_PARAM, "a position offset", (d->params.q_pos_offset = 3));
    CASE(ROPEQK_ERR_BAD_SCALING, "DYNAMIC without seq_len",
         (d->params.scaling.type = ROPEQK_SCALING_DYNAMIC, d->params.scaling.factor = 2,
          d->params.scaling.original_max_position = 64));
    CASE(ROPEQK_ERR_BAD_SHAPE, "V with other heads", (d->v = ropeqk_tensor_bhsd(ROPEQK_F32, INP, 1, IPS, ID)));
    CASE(ROPEQK_ERR_BAD_SHAPE, "K with another head dim", (d->k = ropeqk_tensor_bhsd(ROPEQK_F16, INP, IHKV, IPS, 16)));
    CASE(ROPEQK_ERR_BAD_STRIDES, "K cache rows not contiguous", (d->k.nb[3] = 4, d->k.nb[2] = 4 * ID * 2));
    CASE(ROPEQK_ERR_BAD_DTYPE, "f64 output", (d->out = ropeqk_tensor_bhsd(ROPEQK_F64, IS, IHQ, 1, ID)));
    CASE(ROPEQK_ERR_BAD_SHAPE, "LSE of the wrong shape", (d->lse = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, 2)));
#undef CASE
    for (int i = 0; i < n; i++) {
        pl = (ropeqk_plan *)1;
        ropeqk_status st = ropeqk_plan_create(ctx, &cases[i].d, &pl);
        cr_expect_eq(st, cases[i].want, "%s: got %s", cases[i].what, ropeqk_status_string(st));
        cr_expect_null(pl, "%s: a plan for a refused description", cases[i].what);
        cr_expect(st == ROPEQK_SUCCESS || ropeqk_last_error()[0], "%s: no message", cases[i].what);
        if (st == ROPEQK_SUCCESS)
            ropeqk_plan_destroy(pl);
    }
    ropeqk_plan_desc d = good;
    d.params.scaling.type = ROPEQK_SCALING_DYNAMIC;
    d.params.scaling.factor = 2;
    d.params.scaling.original_max_position = 64;
    d.params.scaling.seq_len = 1000;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS, "DYNAMIC with seq_len: %s", ropeqk_last_error());
    ropeqk_plan_destroy(pl);
}

/* A plan, its buffers (out and lse holding a canary) and a good batch for the refusal tests. */
typedef struct {
    pcase c;
    pdata d;
    pbufs b;
    ropeqk_plan *pl;
} pfix;

static void pfix_make(pfix *f)
{
    f->c = base_case("refusals");
    f->c.Hq = IHQ, f->c.Hkv = IHKV, f->c.D = ID, f->c.Dv = ID, f->c.ps = IPS, f->c.maxp = IMAXP;
    f->c.n_seqs = IS, f->c.max_seqs = IS, f->c.spare_pages = 2, f->c.len_max = IPS * IMAXP;
    f->c.kdt = ROPEQK_F16;
    int64_t lens[] = {IPS * IMAXP, 2 * IPS + 1, 3 * IPS + 1}; /* 4, 3 and 4 pages */
    memcpy(f->c.lens, lens, sizeof lens);
    uint64_t rng = 3;
    pdata_make(&f->c, &f->d, &rng);
    ropeqk_plan_desc desc = desc_of(&f->c, &f->d);
    cr_assert_eq(ropeqk_plan_create(ctx, &desc, &f->pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs_make(&f->d, &f->b);
    fill_bytes(f->b.o, f->d.ob, 0x5A);
    fill_bytes(f->b.l, f->d.lb, 0x5A);
}

static void pfix_free(pfix *f)
{
    pbufs_free(&f->b);
    ropeqk_plan_destroy(f->pl);
    pdata_free(&f->d);
}

static void expect_untouched(cl_mem m, size_t bytes, unsigned char byte, const char *what)
{
    unsigned char *h = malloc(bytes);
    read_buffer(m, bytes, h);
    for (size_t i = 0; i < bytes; i++)
        if (h[i] != byte) {
            cr_expect_fail("%s: byte %zu changed by a refused call", what, i);
            break;
        }
    free(h);
}

Test(paged, invalid_batches_write_nothing)
{
    static pfix f;
    pfix_make(&f);
    pdata *d = &f.d;
    ropeqk_paged_batch good = batch_of(&f.c, d);
    ropeqk_opencl_paged_args ga = args_of(&f.c, &f.b);
    cl_mem small = make_buffer(16, NULL);
    int32_t tab[IS * IMAXP], lens[IS], qpos[IS], kpos[IS];
    enum { N = 32 };
    struct {
        ropeqk_paged_batch b;
        ropeqk_opencl_paged_args a;
        ropeqk_status want;
        char what[80];
        int32_t tab[IS * IMAXP], lens[IS], kpos[IS];
    } *cs = calloc(N, sizeof *cs);
    int n = 0;
    /* each case edits its own copies of the arrays */
#define CASE(WANT, WHAT, EDIT)                                                                     \
    do {                                                                                           \
        memcpy(cs[n].tab, d->table, sizeof tab);                                                   \
        memcpy(cs[n].lens, d->lens, sizeof lens);                                                  \
        memcpy(cs[n].kpos, d->kpos0, sizeof kpos);                                                 \
        cs[n].b = good;                                                                            \
        cs[n].b.page_table = cs[n].tab;                                                            \
        cs[n].b.seq_lens = cs[n].lens;                                                             \
        cs[n].b.k_pos0 = cs[n].kpos;                                                               \
        cs[n].a = ga;                                                                              \
        int32_t *T = cs[n].tab, *L = cs[n].lens, *K = cs[n].kpos;                                  \
        ropeqk_paged_batch *B = &cs[n].b;                                                          \
        ropeqk_opencl_paged_args *A = &cs[n].a;                                                    \
        (void)T, (void)L, (void)K, (void)B, (void)A;                                               \
        EDIT;                                                                                      \
        cs[n].want = (WANT);                                                                       \
        snprintf(cs[n++].what, 80, "%s", (WHAT));                                                  \
    } while (0)
    CASE(ROPEQK_ERR_BAD_PARAM, "n_seqs 0", B->n_seqs = 0);
    CASE(ROPEQK_ERR_BAD_PARAM, "n_seqs past max_seqs", B->n_seqs = IS + 1);
    CASE(ROPEQK_ERR_NULL_POINTER, "no page table", B->page_table = NULL);
    CASE(ROPEQK_ERR_NULL_POINTER, "no lengths", B->seq_lens = NULL);
    CASE(ROPEQK_ERR_NULL_POINTER, "no q_pos", B->q_pos = NULL);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length 0", L[1] = 0);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length -3", L[0] = -3);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length past capacity", L[2] = IPS * IMAXP + 1);
    CASE(ROPEQK_ERR_PAGE_RANGE, "page -1", (L[1] = IPS + 1, T[IMAXP + 1] = -1));
    CASE(ROPEQK_ERR_PAGE_RANGE, "page num_pages", (L[0] = 1, T[0] = (int32_t)d->num_pages));
    CASE(ROPEQK_ERR_PAGE_DUPLICATE, "a page twice in a sequence", (L[2] = 2 * IPS + 1, T[2 * IMAXP + 2] = T[2 * IMAXP]));
    CASE(ROPEQK_ERR_POSITION_RANGE, "last key position past INT32_MAX", (K[1] = INT32_MAX - L[1] + 2));
    CASE(ROPEQK_ERR_NULL_POINTER, "no q buffer", A->q.buf = NULL);
    CASE(ROPEQK_ERR_NULL_POINTER, "no lse buffer with with_lse", A->lse.buf = NULL);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "q buffer too small", A->q.buf = small);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "K cache too small", A->k_cache.buf = small);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "V cache too small", A->v_cache.buf = small);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "lse too small", A->lse.buf = small);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "V cache at an offset", A->v_cache.offset = 64);
    CASE(ROPEQK_ERR_BAD_STRIDES, "misaligned q offset", A->q.offset = 2);
    CASE(ROPEQK_ERR_OVERLAP, "out over Q", (A->out.buf = f.b.q));
    CASE(ROPEQK_ERR_OVERLAP, "lse over the V cache", (A->lse.buf = f.b.v));
#undef CASE
    cl_event ev = (cl_event)1;
    for (int i = 0; i < n; i++) {
        ev = (cl_event)1;
        ropeqk_status st = ropeqk_opencl_paged_enqueue(f.pl, NULL, &cs[i].a, &cs[i].b, 0, NULL, &ev);
        cr_expect_eq(st, cs[i].want, "%s: got %s (%s)", cs[i].what, ropeqk_status_string(st), ropeqk_last_error());
        cr_expect_null(ev, "%s: an event for a refused call", cs[i].what);
    }
    /* n_seqs past max_seqs, where the output buffer is big enough only for the plan: covered above;
     * the output too small for the batch */
    ropeqk_opencl_paged_args a = ga;
    a.out.buf = small;
    cr_expect_eq(ropeqk_opencl_paged_enqueue(f.pl, NULL, &a, &good, 0, NULL, NULL), ROPEQK_ERR_BUFFER_TOO_SMALL);
    cr_expect_eq(ropeqk_opencl_paged_enqueue(NULL, NULL, &ga, &good, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_opencl_paged_enqueue(f.pl, NULL, NULL, &good, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_opencl_paged_enqueue(f.pl, NULL, &ga, NULL, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_opencl_paged_enqueue(f.pl, NULL, &ga, &good, 1, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    /* a paged plan through the generic enqueue, and a scores plan through the paged one */
    ropeqk_opencl_args sa = {.q = {f.b.q, 0}, .k = {f.b.k, 0}, .out = {f.b.o, 0}};
    cr_expect_eq(ropeqk_opencl_plan_enqueue(f.pl, NULL, &sa, NULL, 0, NULL, NULL), ROPEQK_ERR_BAD_PARAM);
    ropeqk_plan_desc sd = {.op = ROPEQK_OP_SCORES, .q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, ID),
                           .k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 4, ID),
                           .out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, 4)};
    ropeqk_default_params(&sd.params);
    ropeqk_plan *scores = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &sd, &scores), ROPEQK_SUCCESS);
    cr_expect_eq(ropeqk_opencl_paged_enqueue(scores, NULL, &ga, &good, 0, NULL, NULL), ROPEQK_ERR_BAD_PARAM);
    ropeqk_plan_destroy(scores);
    expect_untouched(f.b.o, d->ob, 0x5A, "out");
    expect_untouched(f.b.l, d->lb, 0x5A, "lse");

    /* the legal edges: the last key exactly at INT32_MAX, garbage past the used page-table entries,
     * a page shared by two sequences (a common prefix) */
    memcpy(tab, d->table, sizeof tab);
    memcpy(lens, d->lens, sizeof lens);
    memcpy(qpos, d->qpos, sizeof qpos);
    memcpy(kpos, d->kpos0, sizeof kpos);
    kpos[0] = INT32_MAX - lens[0] + 1;
    qpos[0] = INT32_MAX;
    lens[1] = 1;
    tab[IMAXP + 1] = -99;
    tab[IMAXP + 2] = INT32_MAX;
    tab[2 * IMAXP] = tab[IMAXP];
    ropeqk_paged_batch edge = {.n_seqs = IS, .page_table = tab, .seq_lens = lens, .q_pos = qpos, .k_pos0 = kpos};
    ropeqk_status st = ropeqk_opencl_paged_enqueue(f.pl, NULL, &ga, &edge, 0, NULL, NULL);
    cr_expect_eq(st, ROPEQK_SUCCESS, "legal edges: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    edge.k_pos0 = NULL; /* NULL k_pos0: every sequence starts at position 0 */
    cr_expect_eq(ropeqk_opencl_paged_enqueue(f.pl, NULL, &ga, &edge, 0, NULL, NULL), ROPEQK_SUCCESS);
    clFinish(ropeqk_opencl_queue(ctx));
    free(cs);
    clReleaseMemObject(small);
    pfix_free(&f);
}

Test(paged, invalid_appends_write_nothing)
{
    static pfix f;
    pfix_make(&f);
    pdata *d = &f.d;
    const pcase *c = &f.c;
    fill_bytes(f.b.k, d->kb, 0xA5);
    fill_bytes(f.b.v, d->vb, 0xA5);
    int64_t nn = 3;
    ropeqk_tensor tkn = ropeqk_tensor_bhsd(c->kdt, IS, IHKV, nn, ID), tvn = ropeqk_tensor_bhsd(c->vdt, IS, IHKV, nn, ID);
    cl_mem bkn = make_buffer(ropeqk_tensor_extent(&tkn), NULL), bvn = make_buffer(ropeqk_tensor_extent(&tvn), NULL);
    cl_mem small = make_buffer(16, NULL);
    int32_t lens[IS] = {0, IPS - 1, 5}, tab[IS * IMAXP];
    memcpy(tab, d->table, sizeof tab);
    ropeqk_paged_batch good = {.n_seqs = IS, .page_table = tab, .seq_lens = lens};
    ropeqk_opencl_mem kn = {bkn, 0}, vn = {bvn, 0}, kc = {f.b.k, 0}, vc = {f.b.v, 0};
    struct {
        ropeqk_status want;
        const char *what;
        int32_t l[IS], t[IS * IMAXP];
        ropeqk_tensor tk, tv;
        ropeqk_opencl_mem kn, vn, kc, vc;
        int64_t n_seqs;
    } cs[16];
    int n = 0;
#define CASE(WANT, WHAT, EDIT)                                                                     \
    do {                                                                                           \
        cs[n].want = (WANT), cs[n].what = (WHAT);                                                  \
        memcpy(cs[n].l, lens, sizeof lens), memcpy(cs[n].t, tab, sizeof tab);                      \
        cs[n].tk = tkn, cs[n].tv = tvn, cs[n].kn = kn, cs[n].vn = vn, cs[n].kc = kc, cs[n].vc = vc; \
        cs[n].n_seqs = IS;                                                                         \
        EDIT;                                                                                      \
        n++;                                                                                       \
    } while (0)
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length + n_new past capacity", cs[n].l[0] = IPS * IMAXP - 2);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "negative length", cs[n].l[2] = -1);
    CASE(ROPEQK_ERR_PAGE_RANGE, "written page out of range", cs[n].t[IMAXP + 1] = 99);
    CASE(ROPEQK_ERR_PAGE_DUPLICATE, "a page twice in a sequence", (cs[n].l[0] = IPS - 1, cs[n].t[1] = cs[n].t[0]));
    CASE(ROPEQK_ERR_PAGE_DUPLICATE, "a page written for two sequences", cs[n].t[2 * IMAXP] = cs[n].t[0]);
    CASE(ROPEQK_ERR_BAD_DTYPE, "k_new of another dtype", cs[n].tk.dtype = ROPEQK_F32);
    CASE(ROPEQK_ERR_BAD_SHAPE, "k_new for another batch size", cs[n].n_seqs = 2);
    CASE(ROPEQK_ERR_BAD_SHAPE, "v_new with another n_new", cs[n].tv = ropeqk_tensor_bhsd(c->vdt, IS, IHKV, 2, ID));
    CASE(ROPEQK_ERR_BAD_SHAPE, "k_new with another head dim", cs[n].tk = ropeqk_tensor_bhsd(c->kdt, IS, IHKV, nn, 16));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "k_new buffer too small", cs[n].kn.buf = small);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "V cache too small", cs[n].vc.buf = small);
    CASE(ROPEQK_ERR_OVERLAP, "K cache over the V cache", cs[n].kc.buf = f.b.v);
    CASE(ROPEQK_ERR_OVERLAP, "new rows inside the K cache", (cs[n].kn.buf = f.b.k, cs[n].vn.buf = f.b.k));
    CASE(ROPEQK_ERR_NULL_POINTER, "no v_new buffer", cs[n].vn.buf = NULL);
#undef CASE
    for (int i = 0; i < n; i++) {
        ropeqk_paged_batch b = good;
        b.page_table = cs[i].t;
        b.seq_lens = cs[i].l;
        b.n_seqs = cs[i].n_seqs;
        cl_event ev = (cl_event)1;
        ropeqk_status st = ropeqk_opencl_paged_append(f.pl, NULL, &cs[i].tk, cs[i].kn, &cs[i].tv, cs[i].vn,
                                                      cs[i].kc, cs[i].vc, &b, 0, NULL, &ev);
        cr_expect_eq(st, cs[i].want, "%s: got %s (%s)", cs[i].what, ropeqk_status_string(st), ropeqk_last_error());
        cr_expect_null(ev, "%s: an event for a refused call", cs[i].what);
    }
    cr_expect_eq(ropeqk_opencl_paged_append(f.pl, NULL, &tkn, kn, &tvn, vn, kc, vc, NULL, 0, NULL, NULL),
                 ROPEQK_ERR_NULL_POINTER);
    expect_untouched(f.b.k, d->kb, 0xA5, "K cache");
    expect_untouched(f.b.v, d->vb, 0xA5, "V cache");
    /* and the good one goes through */
    cr_expect_eq(ropeqk_opencl_paged_append(f.pl, NULL, &tkn, kn, &tvn, vn, kc, vc, &good, 0, NULL, NULL),
                 ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    clFinish(ropeqk_opencl_queue(ctx));
    clReleaseMemObject(bkn), clReleaseMemObject(bvn), clReleaseMemObject(small);
    pfix_free(&f);
}

/* ---- one plan, several threads ----------------------------------------------------------------- */
typedef struct {
    pfix *f;
    cl_mem out;
    int iters;
    ropeqk_status st;
} pthr;

/* Enqueues the plan on its own queue with batches of 1..IS sequences (the kernels' arguments change
 * every call), the full batch last. */
static void *paged_loop(void *v)
{
    pthr *t = v;
    cl_int e;
    cl_command_queue qu = clCreateCommandQueue(ropeqk_opencl_context(ctx), ropeqk_opencl_device(ctx), 0, &e);
    t->st = e ? ROPEQK_ERR_BACKEND : ROPEQK_SUCCESS;
    ropeqk_paged_batch b = batch_of(&t->f->c, &t->f->d);
    ropeqk_opencl_paged_args a = args_of(&t->f->c, &t->f->b); /* a plan without LSE: lse NULL */
    a.out.buf = t->out;
    for (int i = 0; i < t->iters && !t->st; i++) {
        b.n_seqs = i == t->iters - 1 ? IS : 1 + i % IS;
        t->st = ropeqk_opencl_paged_enqueue(t->f->pl, qu, &a, &b, 0, NULL, NULL);
    }
    if (qu) {
        clFinish(qu);
        clReleaseCommandQueue(qu);
    }
    return NULL;
}

Test(paged, one_plan_enqueued_from_four_threads)
{
    static pfix f;
    pfix_make(&f);
    /* pfix_make makes an LSE plan: remake it without, so each thread needs only its own output */
    ropeqk_plan_destroy(f.pl);
    f.c.with_lse = false;
    ropeqk_plan_desc desc = desc_of(&f.c, &f.d);
    cr_assert_eq(ropeqk_plan_create(ctx, &desc, &f.pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    size_t bytes = f.d.ob;
    unsigned char *expect = malloc(bytes), *got = malloc(bytes);
    pthr one = {&f, make_buffer(bytes, NULL), 1, 0};
    paged_loop(&one);
    cr_assert_eq(one.st, ROPEQK_SUCCESS, "%s", ropeqk_status_string(one.st));
    read_buffer(one.out, bytes, expect);
    pthread_t th[4];
    pthr args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (pthr){&f, make_buffer(bytes, NULL), 40, 0};
        pthread_create(&th[i], NULL, paged_loop, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(args[i].st, ROPEQK_SUCCESS, "thread %d: %s", i, ropeqk_status_string(args[i].st));
        read_buffer(args[i].out, bytes, got);
        cr_expect(memcmp(got, expect, bytes) == 0, "thread %d: last result differs from a lone run", i);
        clReleaseMemObject(args[i].out);
    }
    clReleaseMemObject(one.out);
    free(expect), free(got);
    pfix_free(&f);
}

/* The paged kernels' arguments against cl/contract.h: tests/test_plan.c (one test for every kernel). */

