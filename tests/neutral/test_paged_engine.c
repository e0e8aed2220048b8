/* A test that plays a serving engine over the paged cache, on either backend, for each cache dtype:
 * sequences arrive (prompts of 20..1000 tokens, some reusing a live sequence's cached prefix pages),
 * are prefilled in chunks of 32..256 tokens, decode one token a step or verify 2..5 draft tokens
 * (speculative: the cache keeps the accepted ones, the rejected slots are written again later),
 * finish, and their pages go back to the pool for later sequences. Every step appends the new
 * tokens' K/V (the library's append, which quantizes for 8-bit caches), runs ONE ragged call over
 * every active sequence's new rows, reads the caches back and checks each sequence's rows against
 * the fp64 reference over that sequence's whole cached history (paged_fixture.c's pf_check: dense
 * attention over the keys gathered from its pages, as stored: 8-bit values times their scales),
 * after checking that what the caches hold is what the engine appended: the bytes of every token
 * of the step's sequences against a host mirror written with each append (8-bit caches: the host
 * quantizer's codes and scales, support/quant.c, bit for bit).
 * Seed: ROPEQK_TEST_SEED (default 20261201), in every failure message. */
#include "paged_fixture.h"

#include "quant.h"

#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged_engine, .init = th_ctx_init, .fini = th_ctx_fini);

enum { EH = 4, EHKV = 2, ED = 64, EPS = 16, ENP = 160, EMAXP = 80, ESEQ = 6, EROWS = 640, ESTEPS = 64 };

typedef struct {
    bool live;
    int64_t len, prompt, target, kpos0; /* cached tokens, prompt length, length at which it finishes */
    int32_t pages[EMAXP];
    int64_t npages;
} eseq;

typedef struct {
    pcase c;
    pdata d;              /* the step's batch over the caches read back (pf_check's input) */
    dm_buf *kc, *vc, *ks, *vs, *q, *o, *l;
    ropeqk_plan *pl;
    int refs[ENP];        /* sequences holding each page (a shared prefix: several) */
    unsigned char *mk, *mv; /* the host mirror of the caches (d's layouts) */
    float *mks, *mvs;       /* and of their scales (8-bit caches) */
    eseq s[ESEQ];
    uint64_t rng;
    int64_t finished, shared, spec_steps, chunk_rows, rows_checked;
} engine;

static bool q8(ropeqk_dtype dt) { return dt == ROPEQK_I8 || dt == ROPEQK_FP8_E4M3 || dt == ROPEQK_FP8_E5M2; }

static int64_t rnd(engine *e, int64_t lo, int64_t hi) { return lo + (int64_t)(rqs_rand(&e->rng) % (uint64_t)(hi - lo + 1)); }

static int32_t page_alloc(engine *e)
{
    for (int32_t p = 0; p < ENP; p++)
        if (!e->refs[p]) {
            e->refs[p] = 1;
            return p;
        }
    return -1;
}

/* Pages for tokens up to `len`; false (nothing kept) when the pool is short: the sequence waits. */
static bool pages_for(engine *e, eseq *q, int64_t len)
{
    int64_t need = (len + EPS - 1) / EPS, had = q->npages;
    while (q->npages < need) {
        int32_t p = page_alloc(e);
        if (p < 0) {
            while (q->npages > had)
                e->refs[q->pages[--q->npages]] = 0;
            return false;
        }
        q->pages[q->npages++] = p;
    }
    return true;
}

static void finish(engine *e, eseq *q)
{
    for (int64_t i = 0; i < q->npages; i++)
        e->refs[q->pages[i]]--;
    memset(q, 0, sizeof *q);
    e->finished++;
}

/* A new sequence in a free slot: sometimes on a live sequence's cached prefix (its full pages that
 * no later write can touch: speculative rejection never trims below a step's starting length). It is
 * admitted with the pages of its whole length (+5 for a last speculative step) or not at all, so the
 * pool never deadlocks with every sequence waiting for a page another holds. */
static void arrive(engine *e, eseq *q)
{
    memset(q, 0, sizeof *q);
    q->live = true;
    q->prompt = rnd(e, 20, 1000);
    q->target = q->prompt + rnd(e, 3, 40); /* + 5 <= EMAXP * EPS */
    q->kpos0 = rnd(e, 0, 3) == 0 ? rnd(e, 1, 100000) : 0; /* a shifted context now and then */
    for (int i = 0; i < ESEQ && rnd(e, 0, 1); i++) {
        eseq *o = &e->s[i];
        int64_t full = o->live && o != q ? (o->len - 8) / EPS : 0;
        if (full < 1 || full * EPS >= q->prompt)
            continue;
        int64_t m = rnd(e, 1, full);
        for (int64_t j = 0; j < m; j++)
            e->refs[q->pages[j] = o->pages[j]]++;
        q->npages = m;
        q->len = m * EPS; /* the prefix is cached already: only the rest is prefilled */
        q->kpos0 = o->kpos0;
        e->shared++;
        break;
    }
    if (!pages_for(e, q, q->target + 5)) { /* not admitted: drop the shared pages again */
        for (int64_t j = 0; j < q->npages; j++)
            e->refs[q->pages[j]]--;
        e->shared -= q->npages > 0;
        memset(q, 0, sizeof *q);
    }
}

/* The host mirror of an append: rows [0][h][t] of src (view ts) to tokens len + t of q's pages in
 * the cache view tc (dst), 8-bit caches through the host quantizer (scales into sc). */
static void mirror(engine *e, const eseq *q, int64_t n, const ropeqk_tensor *ts, const unsigned char *src,
                   const ropeqk_tensor *tc, unsigned char *dst, float *sc)
{
    size_t es = ropeqk_dtype_size(ts->dtype), dim = (size_t)ts->ne[3];
    for (int64_t h = 0; h < EHKV; h++)
        for (int64_t t = 0; t < n; t++) {
            int64_t tok = q->len + t, page = q->pages[tok / EPS], slot = tok % EPS;
            const unsigned char *row = src + off4(ts, 0, h, t, 0);
            unsigned char *out = dst + off4(tc, page, h, slot, 0);
            if (q8(tc->dtype)) /* k_new is f32 for an 8-bit cache */
                sc[(page * EHKV + h) * EPS + slot] = rqs_q8_quantize((const float *)row, (int64_t)dim, tc->dtype, out);
            else
                memcpy(out, row, dim * es);
        }
    (void)e;
}

/* Appends n new tokens' K/V to sequence q (one append call: its own n_new). */
static void append(engine *e, eseq *q, int64_t n)
{
    const pcase *c = &e->c;
    ropeqk_dtype kin = q8(c->kdt) ? ROPEQK_F32 : c->kdt, vin = q8(c->vdt) ? ROPEQK_F32 : c->vdt;
    ropeqk_tensor tk = ropeqk_tensor_bhsd(kin, 1, EHKV, n, ED), tv = ropeqk_tensor_bhsd(vin, 1, EHKV, n, ED);
    size_t kb = ropeqk_tensor_extent(&tk), vb = ropeqk_tensor_extent(&tv);
    unsigned char *hk = malloc(kb), *hv = malloc(vb);
    cr_assert(hk && hv);
    for (size_t i = 0; i < kb / ropeqk_dtype_size(kin); i++)
        th_put_random(hk + i * ropeqk_dtype_size(kin), kin, &e->rng);
    for (size_t i = 0; i < vb / ropeqk_dtype_size(vin); i++)
        th_put_random(hv + i * ropeqk_dtype_size(vin), vin, &e->rng);
    mirror(e, q, n, &tk, hk, &e->d.tk, e->mk, e->mks);
    mirror(e, q, n, &tv, hv, &e->d.tv, e->mv, e->mvs);
    dm_buf *bk = NULL, *bv = NULL;
    cr_assert_eq(dm_create(th_ctx, kb, hk, false, &bk), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, vb, hv, false, &bv), ROPEQK_SUCCESS);
    int32_t len = (int32_t)q->len, zero = 0;
    ropeqk_paged_batch b = {.n_seqs = 1, .page_table = q->pages, .seq_lens = &len, .q_pos = &zero};
    ropeqk_paged_cache cache = {dm_whole(e->kc), dm_whole(e->vc), dm_whole(e->ks), dm_whole(e->vs)};
    ropeqk_status st = rqs_paged_append_wait(e->pl, &tk, dm_whole(bk), &tv, dm_whole(bv), &cache, &b);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: append of %lld tokens at %lld: %s", c->name, (long long)n,
                 (long long)q->len, ropeqk_last_error());
    dm_free(bk), dm_free(bv);
    free(hk), free(hv);
}

static void read_back(dm_buf *b, void *dst)
{
    if (b)
        cr_assert_eq(dm_read(b, dst), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
}

/* One step: new tokens for every active sequence that has pages for them, one ragged call, the
 * check of every row; then lengths, phases, finishing and arrivals. */
static void step(engine *e, int t, uint64_t seed)
{
    pcase *c = &e->c;
    pdata *d = &e->d;
    int idx[ESEQ], n = 0;
    int64_t news[ESEQ], rows = 0, accept[ESEQ];
    for (int i = 0; i < ESEQ; i++) {
        eseq *q = &e->s[i];
        if (!q->live)
            continue;
        bool prefill = q->len < q->prompt;
        int64_t k = prefill ? rnd(e, 32, 256) : rnd(e, 0, 2) == 0 ? rnd(e, 2, 5) : 1;
        if (prefill && k > q->prompt - q->len)
            k = q->prompt - q->len;
        if (rows + k > EROWS)
            continue; /* waits for room in the step */
        cr_assert(pages_for(e, q, q->len + k)); /* reserved at admission */
        append(e, q, k);
        idx[n] = i, news[n] = k, accept[n] = prefill || k == 1 ? k : rnd(e, 1, k);
        e->spec_steps += !prefill && k > 1;
        e->chunk_rows += prefill ? k : 0;
        rows += k;
        n++;
    }
    if (n == 0)
        return;
    /* the batch: each sequence's rows are its new tokens, at their positions */
    c->n_seqs = n;
    d->rows = rows;
    for (int j = 0, r = 0; j < n; j++) {
        eseq *q = &e->s[idx[j]];
        memset(d->table + j * EMAXP, 0xFF, EMAXP * sizeof *d->table);
        memcpy(d->table + j * EMAXP, q->pages, (size_t)q->npages * sizeof *d->table);
        d->lens[j] = (int32_t)(q->len + news[j]);
        d->kpos0[j] = (int32_t)q->kpos0;
        d->qpos[j] = (int32_t)(q->kpos0 + q->len);
        d->qind[j] = r;
        r += (int)news[j];
        d->qind[j + 1] = r;
    }
    size_t qes = ropeqk_dtype_size(c->qdt);
    for (size_t i = 0; i < (size_t)rows * EH * ED; i++)
        th_put_random(d->q + i * qes, c->qdt, &e->rng);
    cr_assert_eq(dm_write(e->q, 0, d->q, (size_t)rows * EH * ED * qes), ROPEQK_SUCCESS);
    ropeqk_paged_batch b = batch_of(c, d);
    ropeqk_paged_args a = {.q = dm_whole(e->q), .k_cache = dm_whole(e->kc), .v_cache = dm_whole(e->vc),
                        .out = dm_whole(e->o), .lse = dm_whole(e->l), .k_scale = dm_whole(e->ks),
                        .v_scale = dm_whole(e->vs)};
    ropeqk_status st = rqs_paged_run_wait(e->pl, &a, &b);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu) step %d: %s", c->name, (unsigned long long)seed, t,
                 ropeqk_last_error());
    /* the truth from what the caches hold now */
    read_back(e->kc, d->k), read_back(e->vc, d->v), read_back(e->ks, d->ks), read_back(e->vs, d->vs);
    int64_t bad = 0;
    for (int j = 0; j < n; j++)
        for (int64_t tok = 0; tok < d->lens[j]; tok++)
            for (int64_t h = 0; h < EHKV; h++) {
                int64_t page = d->table[j * EMAXP + tok / EPS], slot = tok % EPS, si = (page * EHKV + h) * EPS + slot;
                size_t ko = off4(&d->tk, page, h, slot, 0), vo = off4(&d->tv, page, h, slot, 0);
                bad += memcmp(d->k + ko, e->mk + ko, (size_t)ED * ropeqk_dtype_size(c->kdt)) != 0 ||
                       memcmp(d->v + vo, e->mv + vo, (size_t)ED * ropeqk_dtype_size(c->vdt)) != 0 ||
                       (d->ks && memcmp(&d->ks[si], &e->mks[si], 4) != 0) ||
                       (d->vs && memcmp(&d->vs[si], &e->mvs[si], 4) != 0);
            }
    cr_expect_eq(bad, 0, "%s (seed %llu) step %d: %lld cached rows differ from what the engine appended", c->name,
                 (unsigned long long)seed, t, (long long)bad);
    unsigned char *out = malloc(d->ob);
    float *lse = malloc(d->lb);
    cr_assert(out && lse);
    read_back(e->o, out), read_back(e->l, lse);
    /* the fp64 check of every step, or of every N-th and the last (harness.h th_stride: the
     * sanitizer stage, where the host's fp64 reference over each sequence's history dominates);
     * the engine loop and the cache bytes above are checked at every step either way */
    if (t % th_stride() == 0 || t == ESTEPS - 1) {
        pf_check(c, d, out, lse, seed + (uint64_t)t);
        e->rows_checked += rows;
    }
    free(out), free(lse);
    for (int j = 0; j < n; j++) {
        eseq *q = &e->s[idx[j]];
        q->len += accept[j]; /* speculative: the rejected drafts' slots are written again later */
        if (q->len >= q->target)
            finish(e, q);
    }
}

static void run_engine(ropeqk_dtype kdt, ropeqk_dtype vdt, const char *name, uint64_t seed)
{
    static engine e;
    memset(&e, 0, sizeof e);
    e.rng = seed;
    pcase *c = &e.c;
    *c = base_case(name);
    c->Hq = EH, c->Hkv = EHKV, c->D = c->Dv = ED, c->ps = EPS, c->maxp = EMAXP, c->max_seqs = ESEQ;
    c->max_rows = EROWS, c->ragged = true, c->kdt = kdt, c->vdt = vdt;
    c->p.causal = 1;
    c->p.layout = ROPEQK_HALF_SPLIT;
    c->p.base = 500000;
    /* the fixture's buffers and views for an empty pool: pdata_make with no sequence */
    c->n_seqs = 0, c->spare_pages = ENP;
    uint64_t r0 = seed;
    pdata_make(c, &e.d, &r0);
    cr_assert_eq(e.d.num_pages, ENP);
    e.mk = malloc(e.d.kb), e.mv = malloc(e.d.vb);
    e.mks = e.d.ksb ? malloc(e.d.ksb) : NULL, e.mvs = e.d.vsb ? malloc(e.d.vsb) : NULL;
    cr_assert(e.mk && e.mv && (!e.d.ksb || e.mks) && (!e.d.vsb || e.mvs));
    ropeqk_plan_desc desc = desc_of(c, &e.d);
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &e.pl), ROPEQK_SUCCESS, "%s: plan: %s", name, ropeqk_last_error());
    struct {
        dm_buf **b;
        size_t n;
        const void *init;
    } bufs[] = {{&e.kc, e.d.kb, e.d.k}, {&e.vc, e.d.vb, e.d.v}, {&e.ks, e.d.ksb, e.d.ks}, {&e.vs, e.d.vsb, e.d.vs},
                {&e.q, e.d.qb, NULL},   {&e.o, e.d.ob, NULL},   {&e.l, e.d.lb, NULL}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i].n)
            cr_assert_eq(dm_create(th_ctx, bufs[i].n, bufs[i].init, false, bufs[i].b), ROPEQK_SUCCESS, "%s",
                         ropeqk_last_error());
    for (int t = 0; t < ESTEPS; t++) {
        for (int i = 0; i < ESEQ; i++) /* arrivals: a free slot fills now and then */
            if (!e.s[i].live && rnd(&e, 0, 2) == 0)
                arrive(&e, &e.s[i]);
        step(&e, t, seed);
    }
    cr_log_info("%s (seed %llu): %lld rows checked, %lld chunk rows, %lld speculative steps, %lld finished, "
                "%lld prefixes shared", name, (unsigned long long)seed, (long long)e.rows_checked,
                (long long)e.chunk_rows, (long long)e.spec_steps, (long long)e.finished, (long long)e.shared);
    /* the loop did what it claims: chunks, speculative steps, finished sequences, shared prefixes */
    cr_expect(e.chunk_rows > 0 && e.spec_steps > 0 && e.finished > 0 && e.shared > 0,
              "%s (seed %llu): the run lacked a phase (chunk rows %lld, speculative %lld, finished %lld, shared %lld)",
              name, (unsigned long long)seed, (long long)e.chunk_rows, (long long)e.spec_steps,
              (long long)e.finished, (long long)e.shared);
    dm_buf *all[] = {e.kc, e.vc, e.ks, e.vs, e.q, e.o, e.l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dm_free(all[i]);
    ropeqk_plan_destroy(e.pl);
    pdata_free(&e.d);
    free(e.mk), free(e.mv), free(e.mks), free(e.mvs);
}

Test(paged_engine, f32) { run_engine(ROPEQK_F32, ROPEQK_F32, "engine f32", pf_seed() + 200); }
Test(paged_engine, f16) { run_engine(ROPEQK_F16, ROPEQK_F16, "engine f16", pf_seed() + 201); }
Test(paged_engine, bf16) { run_engine(ROPEQK_BF16, ROPEQK_BF16, "engine bf16", pf_seed() + 202); }
Test(paged_engine, int8) { run_engine(ROPEQK_I8, ROPEQK_I8, "engine int8", pf_seed() + 203); }
Test(paged_engine, fp8_e4m3) { run_engine(ROPEQK_FP8_E4M3, ROPEQK_FP8_E4M3, "engine fp8 e4m3", pf_seed() + 204); }
Test(paged_engine, fp8_e5m2) { run_engine(ROPEQK_FP8_E5M2, ROPEQK_FP8_E5M2, "engine fp8 e5m2", pf_seed() + 205); }
