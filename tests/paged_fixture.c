/* The paged-KV-cache tests' fixture (paged_fixture.h). */
#include "paged_fixture.h"

#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ropeqk_ctx *ctx;

void pf_setup(void)
{
    char why[256];
    ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
}

void pf_teardown(void)
{
    ropeqk_ctx_destroy(ctx);
    th_leak_check();
}

uint64_t test_seed(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20261201ull;
}

/* ---- storage helpers ------------------------------------------------------------------------- */
float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15), e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), (int)e - 25);
    return sign ? -f : f;
}

float bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

double load(const void *base, size_t off, ropeqk_dtype t)
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
void put_random(void *p, ropeqk_dtype t, uint64_t *rng)
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

size_t off4(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (size_t)(a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3]);
}

cl_mem make_buffer(size_t bytes, const void *init)
{
    cl_int e;
    cl_mem m = clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0),
                              bytes, (void *)init, &e);
    cr_assert(m && e == CL_SUCCESS, "clCreateBuffer(%zu): %d", bytes, e);
    return m;
}

void fill_bytes(cl_mem m, size_t bytes, unsigned char byte)
{
    unsigned char pat[4] = {byte, byte, byte, byte};
    cr_assert_eq(clEnqueueFillBuffer(ropeqk_opencl_queue(ctx), m, pat, 4, 0, bytes, 0, NULL, NULL), CL_SUCCESS);
    clFinish(ropeqk_opencl_queue(ctx));
}

void read_buffer(cl_mem m, size_t bytes, void *dst)
{
    cr_assert_eq(clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), m, CL_TRUE, 0, bytes, dst, 0, NULL, NULL), CL_SUCCESS);
}

/* ---- a paged problem ------------------------------------------------------------------------- */



ropeqk_tensor cache_view(const pcase *c, ropeqk_dtype dt, int64_t num_pages, int64_t dim)
{
    return c->bshd_cache ? ropeqk_tensor_bshd(dt, num_pages, c->ps, c->Hkv, dim)
                         : ropeqk_tensor_bhsd(dt, num_pages, c->Hkv, c->ps, dim);
}

/* Lengths, shuffled pages (every sequence's pages distinct, spare pages unused), positions, data.
 * Every cache byte outside the sequences' tokens is 0xFF (NaN in every dtype). */
void pdata_make(const pcase *c, pdata *d, uint64_t *rng)
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

void pdata_free(pdata *d)
{
    free(d->q), free(d->k), free(d->v), free(d->table);
}

ropeqk_paged_batch batch_of(const pcase *c, pdata *d)
{
    return (ropeqk_paged_batch){.n_seqs = c->n_seqs, .page_table = d->table, .seq_lens = d->lens, .q_pos = d->qpos,
                                .k_pos0 = d->kpos0};
}

ropeqk_plan_desc desc_of(const pcase *c, const pdata *d)
{
    return (ropeqk_plan_desc){.op = ROPEQK_OP_PAGED_DECODE, .params = c->p, .q = d->tq, .k = d->tk, .v = d->tv,
                              .out = d->to, .lse = d->tl, .with_lse = c->with_lse,
                              .paged = {.page_size = c->ps, .max_pages_per_seq = c->maxp, .max_seqs = c->max_seqs}};
}

/* ---- the fp64 reference ------------------------------------------------------------------------ */
void rotate(const ropeqk_params *p, int64_t D, const double *inv, double attn, int64_t pos, double *x)
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
void reference(const pcase *c, const pdata *d, double *o64, double *lse64, double *vmax)
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

void pbufs_make(const pdata *d, pbufs *b)
{
    b->q = make_buffer(d->qb, d->q);
    b->k = make_buffer(d->kb, d->k);
    b->v = make_buffer(d->vb, d->v);
    b->o = make_buffer(d->ob, NULL);
    b->l = make_buffer(d->lb, NULL);
}

void pbufs_free(pbufs *b)
{
    clReleaseMemObject(b->q), clReleaseMemObject(b->k), clReleaseMemObject(b->v);
    clReleaseMemObject(b->o), clReleaseMemObject(b->l);
}

ropeqk_opencl_paged_args args_of(const pcase *c, const pbufs *b)
{
    return (ropeqk_opencl_paged_args){.q = {b->q, 0}, .k_cache = {b->k, 0}, .v_cache = {b->v, 0}, .out = {b->o, 0},
                                      .lse = {c->with_lse ? b->l : NULL, 0}};
}

void run_case(const pcase *c, uint64_t seed)
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

pcase base_case(const char *name)
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
