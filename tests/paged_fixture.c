/* The paged-KV-cache tests' problem and reference (paged_fixture.h). */
#include "paged_fixture.h"
#include "quant.h"

#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t pf_seed(void) { return th_seed(20261201ull); }

size_t off4(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (size_t)(a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3]);
}

ropeqk_tensor cache_view(const pcase *c, ropeqk_dtype dt, int64_t num_pages, int64_t dim)
{
    return c->bshd_cache ? ropeqk_tensor_bshd(dt, num_pages, c->ps, c->Hkv, dim)
                         : ropeqk_tensor_bhsd(dt, num_pages, c->Hkv, c->ps, dim);
}

static bool q8(ropeqk_dtype dt) { return dt == ROPEQK_I8 || dt == ROPEQK_FP8_E4M3 || dt == ROPEQK_FP8_E5M2; }

static double load(const unsigned char *p, ropeqk_dtype t);

double cache_elem(const unsigned char *cache, size_t row, int64_t i, ropeqk_dtype dt, const float *scales, size_t si)
{
    if (q8(dt)) /* (float)q * scale, in f32 as the definition says */
        return (double)(rqs_q8_value(cache[row + (size_t)i], dt) * scales[si]);
    return load(cache + row + (size_t)i * ropeqk_dtype_size(dt), dt);
}

/* One cache row (token `slot` of head h of `page`): random, quantized for an 8-bit cache. */
static void put_row(const pcase *c, const ropeqk_tensor *t, unsigned char *cache, float *scales, int64_t page,
                    int64_t h, int64_t slot, int64_t dim, uint64_t *rng)
{
    if (!q8(t->dtype)) {
        for (int64_t i = 0; i < dim; i++)
            th_put_random(cache + off4(t, page, h, slot, i), t->dtype, rng);
        return;
    }
    float x[1024];
    cr_assert(dim <= 1024);
    for (int64_t i = 0; i < dim; i++)
        x[i] = (float)rqs_uniform(rng);
    scales[(page * c->Hkv + h) * c->ps + slot] = rqs_q8_quantize(x, dim, t->dtype, cache + off4(t, page, h, slot, 0));
}

/* ---- a paged problem ------------------------------------------------------------------------- */
void pdata_make(const pcase *c, pdata *d, uint64_t *rng)
{
    memset(d, 0, sizeof *d);
    int64_t total = 0;
    for (int64_t s = 0; s < c->n_seqs; s++) {
        int64_t len = c->lens[s] ? c->lens[s] : 1 + (int64_t)(rqs_rand(rng) % (uint64_t)c->len_max);
        cr_assert(len <= c->maxp * c->ps);
        d->lens[s] = (int32_t)len;
        total += (len + c->ps - 1) / c->ps;
    }
    d->num_pages = total + c->spare_pages;
    int32_t *perm = malloc((size_t)d->num_pages * sizeof *perm);
    cr_assert(perm);
    for (int64_t i = 0; i < d->num_pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = d->num_pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(rqs_rand(rng) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    d->table = malloc((size_t)(c->max_seqs * c->maxp) * sizeof *d->table);
    cr_assert(d->table);
    for (int64_t i = 0; i < c->max_seqs * c->maxp; i++)
        d->table[i] = -12345; /* entries past a sequence's pages: ignored, whatever they hold */
    int64_t at = 0;
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t i = 0; i < (d->lens[s] + c->ps - 1) / c->ps; i++)
            d->table[s * c->maxp + i] = perm[at++];
    free(perm);
    d->rows = 0;
    for (int64_t s = 0; s < c->n_seqs; s++) {
        int64_t k0 = c->kpos_lo + (c->kpos_span ? (int64_t)(rqs_rand(rng) % (uint64_t)(c->kpos_span + 1)) : 0);
        int64_t ql = c->qlens[s] ? c->qlens[s] : 1;
        d->kpos0[s] = (int32_t)k0;
        d->qpos[s] = (int32_t)(k0 + d->lens[s] - ql + c->q_ahead); /* the last row at the last key + q_ahead */
        d->qind[s] = (int32_t)d->rows;
        d->rows += ql;
    }
    d->qind[c->n_seqs] = (int32_t)d->rows;
    d->max_rows = c->max_rows ? c->max_rows : c->ragged ? d->rows + 3 : c->max_seqs;
    d->tq = ropeqk_tensor_bhsd(c->qdt, d->max_rows, c->Hq, 1, c->D);
    d->tk = cache_view(c, c->kdt, d->num_pages, c->D);
    d->tv = cache_view(c, c->vdt, d->num_pages, c->Dv);
    d->to = ropeqk_tensor_bhsd(c->odt, d->max_rows, c->Hq, 1, c->Dv);
    d->tl = ropeqk_tensor_bhsd(ROPEQK_F32, d->max_rows, c->Hq, 1, 1);
    d->qb = ropeqk_tensor_extent(&d->tq);
    d->kb = ropeqk_tensor_extent(&d->tk);
    d->vb = ropeqk_tensor_extent(&d->tv);
    d->ob = ropeqk_tensor_extent(&d->to);
    d->lb = ropeqk_tensor_extent(&d->tl);
    d->q = malloc(d->qb);
    d->k = malloc(d->kb);
    d->v = malloc(d->vb);
    cr_assert(d->q && d->k && d->v);
    memset(d->k, 0xFF, d->kb);
    memset(d->v, 0xFF, d->vb);
    size_t nsc = (size_t)(d->num_pages * c->Hkv * c->ps);
    d->ksb = q8(c->kdt) ? nsc * sizeof(float) : 0;
    d->vsb = q8(c->vdt) ? nsc * sizeof(float) : 0;
    d->ks = d->ksb ? malloc(d->ksb) : NULL;
    d->vs = d->vsb ? malloc(d->vsb) : NULL;
    cr_assert((!d->ksb || d->ks) && (!d->vsb || d->vs));
    if (d->ks)
        memset(d->ks, 0xFF, d->ksb);
    if (d->vs)
        memset(d->vs, 0xFF, d->vsb);
    size_t qes = ropeqk_dtype_size(c->qdt);
    for (size_t i = 0; i < d->qb / qes; i++)
        th_put_random(d->q + i * qes, c->qdt, rng);
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t j = 0; j < d->lens[s]; j++) {
            int64_t page = d->table[s * c->maxp + j / c->ps], slot = j % c->ps;
            for (int64_t h = 0; h < c->Hkv; h++) {
                put_row(c, &d->tk, d->k, d->ks, page, h, slot, c->D, rng);
                put_row(c, &d->tv, d->v, d->vs, page, h, slot, c->Dv, rng);
            }
        }
}

void pdata_free(pdata *d)
{
    free(d->q), free(d->k), free(d->v), free(d->table), free(d->ks), free(d->vs);
}

ropeqk_paged_batch batch_of(const pcase *c, pdata *d)
{
    return (ropeqk_paged_batch){.n_seqs = c->n_seqs, .page_table = d->table, .seq_lens = d->lens, .q_pos = d->qpos,
                                .k_pos0 = d->kpos0, .q_indptr = c->ragged ? d->qind : NULL};
}

ropeqk_plan_desc desc_of(const pcase *c, const pdata *d)
{
    return (ropeqk_plan_desc){.op = ROPEQK_OP_PAGED_DECODE, .params = c->p, .q = d->tq, .k = d->tk, .v = d->tv,
                              .out = d->to, .lse = d->tl, .with_lse = c->with_lse,
                              .paged = {.page_size = c->ps, .max_pages_per_seq = c->maxp, .max_seqs = c->max_seqs,
                                        .max_q_rows = c->ragged ? d->max_rows : 0}};
}

/* ---- device buffers -------------------------------------------------------------------------- */
void pbufs_make(const pdata *d, pbufs *b, bool canaries)
{
    memset(b, 0, sizeof *b);
    const void *init[5] = {d->q, d->k, d->v, NULL, NULL};
    const size_t bytes[5] = {d->qb, d->kb, d->vb, d->ob, d->lb};
    dm_buf **out[5] = {&b->q, &b->k, &b->v, &b->o, &b->l};
    for (int i = 0; i < 5; i++) {
        ropeqk_status st = dm_create(th_ctx, bytes[i], init[i], canaries, out[i]);
        cr_assert_eq(st, ROPEQK_SUCCESS, "device buffer of %zu bytes: %s: %s", bytes[i], ropeqk_status_string(st),
                     ropeqk_last_error());
    }
    cr_assert_eq(dm_fill(b->o, 0x5A), ROPEQK_SUCCESS);
    cr_assert_eq(dm_fill(b->l, 0x5A), ROPEQK_SUCCESS);
    if (d->ks)
        cr_assert_eq(dm_create(th_ctx, d->ksb, d->ks, canaries, &b->ks), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    if (d->vs)
        cr_assert_eq(dm_create(th_ctx, d->vsb, d->vs, canaries, &b->vs), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
}

void pbufs_free(pbufs *b)
{
    dm_free(b->q), dm_free(b->k), dm_free(b->v);
    dm_free(b->o), dm_free(b->l), dm_free(b->ks), dm_free(b->vs);
    memset(b, 0, sizeof *b);
}

ropeqk_paged_args args_of(const pcase *c, const pbufs *b)
{
    return (ropeqk_paged_args){.q = dm_whole(b->q), .k_cache = dm_whole(b->k), .v_cache = dm_whole(b->v),
                            .out = dm_whole(b->o), .lse = dm_whole(c->with_lse ? b->l : NULL),
                            .k_scale = dm_whole(b->ks), .v_scale = dm_whole(b->vs)};
}

/* ---- the fp64 reference ------------------------------------------------------------------------ */
static double load(const unsigned char *p, ropeqk_dtype t)
{
    uint16_t h;
    float f;
    switch (t) {
    case ROPEQK_F16: memcpy(&h, p, 2); return rqs_half_to_float(h);
    case ROPEQK_BF16: memcpy(&h, p, 2); return rqs_bf16_to_float(h);
    default: memcpy(&f, p, 4); return f;
    }
}

void pf_seq_reference(const pcase *c, const pdata *d, int64_t s, pf_seqref *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    /* 8-bit caches are gathered as f32 q * scale (cache_elem), the values the kernels read */
    const ropeqk_dtype gk = q8(c->kdt) ? ROPEQK_F32 : c->kdt, gv = q8(c->vdt) ? ROPEQK_F32 : c->vdt;
    size_t kes = ropeqk_dtype_size(gk), ves = ropeqk_dtype_size(gv);
    int64_t len = d->lens[s];
    ropeqk_tensor tk = ropeqk_tensor_bhsd(gk, 1, c->Hkv, len, c->D);
    r->tv = ropeqk_tensor_bhsd(gv, 1, c->Hkv, len, c->Dv);
    /* the sequence's query rows as [1, Hq, q_len, D] views of the packed rows */
    r->r0 = d->qind[s], r->ql = d->qind[s + 1] - r->r0;
    int64_t ql = r->ql;
    ropeqk_tensor tq = d->tq;
    r->to = d->to, r->tl = d->tl;
    tq.ne[0] = r->to.ne[0] = r->tl.ne[0] = 1;
    tq.ne[2] = r->to.ne[2] = r->tl.ne[2] = ql;
    tq.nb[2] = d->tq.nb[0], r->to.nb[2] = d->to.nb[0], r->tl.nb[2] = d->tl.nb[0];
    r->o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, c->Hq, ql, c->Dv);
    r->l64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, c->Hq, ql, 1);
    unsigned char *k = malloc((size_t)(c->Hkv * len * c->D) * kes);
    r->v = malloc((size_t)(c->Hkv * len * c->Dv) * ves);
    int32_t *kpos = malloc((size_t)len * sizeof *kpos), *qpos = malloc((size_t)ql * sizeof *qpos);
    r->ro = malloc((size_t)(c->Hq * ql * c->Dv) * sizeof *r->ro);
    r->rl = malloc((size_t)(c->Hq * ql) * sizeof *r->rl);
    unsigned char *v = r->v;
    cr_assert(k && v && kpos && qpos && r->ro && r->rl);
    for (int64_t i = 0; i < ql; i++)
        qpos[i] = d->qpos[s] + (int32_t)i;
    for (int64_t j = 0; j < len; j++) {
        int64_t page = d->table[s * c->maxp + j / c->ps], slot = j % c->ps;
        kpos[j] = d->kpos0[s] + (int32_t)j;
        for (int64_t h = 0; h < c->Hkv; h++) {
            size_t si = (size_t)((page * c->Hkv + h) * c->ps + slot);
            if (q8(c->kdt))
                for (int64_t i = 0; i < c->D; i++)
                    ((float *)k)[(h * len + j) * c->D + i] =
                        (float)cache_elem(d->k, off4(&d->tk, page, h, slot, 0), i, c->kdt, d->ks, si);
            else
                memcpy(k + off4(&tk, 0, h, j, 0), d->k + off4(&d->tk, page, h, slot, 0), (size_t)c->D * kes);
            if (q8(c->vdt))
                for (int64_t i = 0; i < c->Dv; i++)
                    ((float *)v)[(h * len + j) * c->Dv + i] =
                        (float)cache_elem(d->v, off4(&d->tv, page, h, slot, 0), i, c->vdt, d->vs, si);
            else
                memcpy(v + off4(&r->tv, 0, h, j, 0), d->v + off4(&d->tv, page, h, slot, 0), (size_t)c->Dv * ves);
        }
    }
    ropeqk_status st = ropeqk_attention_ref(&c->p, &tq, d->q + r->r0 * d->tq.nb[0], &tk, k, &r->tv, v, qpos, kpos,
                                            &r->o64, r->ro, &r->l64, r->rl);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): reference: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    free(k), free(kpos), free(qpos);
}

void pf_seqref_free(pf_seqref *r)
{
    free(r->v), free(r->ro), free(r->rl);
    memset(r, 0, sizeof *r);
}

void pf_check(const pcase *c, const pdata *d, const unsigned char *out, const float *lse, uint64_t seed)
{
    double worst = 0, worst_lse = 0;
    int64_t mism = 0, masked_rows = 0, nonzero = 0;
    for (int64_t s = 0; s < c->n_seqs; s++) {
        pf_seqref r;
        pf_seq_reference(c, d, s, &r, seed);
        const int64_t r0 = r.r0, ql = r.ql;
        const double *rl = r.rl;
        const ropeqk_tensor to = r.to, tl = r.tl;
        double e = 0, el = 0;
        int64_t mm = 0;
        const unsigned char *os = out + r0 * d->to.nb[0];
        ropeqk_status st = ropeqk_attention_max_error(&r.tv, r.v, &to, os, &r.o64, r.ro, lse ? &tl : NULL,
                                                      lse ? (const unsigned char *)lse + r0 * d->tl.nb[0] : NULL,
                                                      lse ? &r.l64 : NULL, lse ? rl : NULL, &e, &el, &mm);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: metric: %s", c->name, ropeqk_last_error());
        worst = fmax(worst, e), worst_lse = fmax(worst_lse, el), mism += mm;
        /* a row whose every key is masked: O exactly 0 */
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t r = 0; r < ql; r++)
                if (isinf(rl[h * ql + r]) && rl[h * ql + r] < 0) {
                    masked_rows++;
                    for (int64_t i = 0; i < c->Dv; i++)
                        nonzero += load(os + off4(&to, 0, h, r, i), c->odt) != 0.0;
                }
        pf_seqref_free(&r);
    }
    double tol = c->tol > 0 ? c->tol : 1e-5;
    cr_log_info("%s (seed %llu): max error %.3g, LSE %.3g, %lld fully masked rows", c->name,
                (unsigned long long)seed, worst, worst_lse, (long long)masked_rows);
    cr_expect(worst <= tol, "%s (seed %llu): max |O - O64| / max ||V||_inf = %.3g > %g", c->name,
              (unsigned long long)seed, worst, tol);
    cr_expect(worst_lse <= 1e-5, "%s (seed %llu): LSE relative error %.3g", c->name, (unsigned long long)seed,
              worst_lse);
    cr_expect_eq(mism, 0, "%s (seed %llu): %lld rows with NaN or a -inf LSE mismatch", c->name,
                 (unsigned long long)seed, (long long)mism);
    cr_expect_eq(nonzero, 0, "%s (seed %llu): %lld output elements of fully masked rows are not 0", c->name,
                 (unsigned long long)seed, (long long)nonzero);
}

/* ---- running a case ---------------------------------------------------------------------------- */
void run_case(const pcase *c, uint64_t seed)
{
    uint64_t rng = seed;
    static pdata d;
    pdata_make(c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(c, &d);
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(th_ctx, &desc, &pl);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): plan: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    pbufs b;
    pbufs_make(&d, &b, true);
    ropeqk_paged_batch batch = batch_of(c, &d);
    ropeqk_paged_args a = args_of(c, &b);
    st = rqs_paged_run_wait(pl, &a, &batch);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): run: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    unsigned char *out = malloc(d.ob);
    float *lse = malloc(d.lb);
    cr_assert(out && lse);
    cr_assert_eq(dm_read(b.o, out), ROPEQK_SUCCESS);
    cr_assert_eq(dm_read(b.l, lse), ROPEQK_SUCCESS);
    pf_check(c, &d, out, c->with_lse ? lse : NULL, seed);
    /* rows past the batch's, and the LSE without with_lse, are never written */
    size_t row_bytes = (size_t)d.to.nb[0];
    for (size_t i = (size_t)d.rows * row_bytes; i < d.ob; i++)
        cr_assert_eq(out[i], 0x5A, "%s: output byte %zu past the batch written", c->name, i);
    if (!c->with_lse)
        for (size_t i = 0; i < d.lb; i++)
            cr_assert_eq(((unsigned char *)lse)[i], 0x5A, "%s: LSE written without with_lse", c->name);
    const dm_buf *bufs[7] = {b.q, b.k, b.v, b.o, b.l, b.ks, b.vs};
    const void *expect[7] = {d.q, d.k, d.v, NULL, NULL, d.ks, d.vs};
    static const char *const names[7] = {"Q", "K cache", "V cache", "output", "LSE", "K scales", "V scales"};
    for (int i = 0; i < 7; i++) {
        if (!bufs[i])
            continue;
        bool intact = false;
        cr_expect(dm_check(bufs[i], expect[i], &intact) == ROPEQK_SUCCESS && intact,
                  "%s (seed %llu): %s: a canary%s changed", c->name, (unsigned long long)seed, names[i],
                  expect[i] ? " or the input" : "");
    }
    free(out), free(lse);
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
