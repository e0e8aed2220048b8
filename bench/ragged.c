/* `ropeqk-bench --ragged`: ragged query rows over a paged cache (ropeqk_paged_batch.q_indptr), Hq 32 /
 * Hkv 8 / D = Dv = 128, f16 K/V caches in pages of 16 tokens (shuffled), f32 Q and output, causal,
 * base 500000. Two comparisons, each timed in the same run (median of RUNS after WARMUP):
 *   step:    one ragged call serving 4 sequences decoding at 4k, 8k, 16k and 32k tokens, 2 prefill
 *            chunks of 512 rows (over 1024 and 2048 cached tokens) and a speculative step of 4 rows
 *            (at 8k), against what an engine without paged prefill does: per sequence, copy its K
 *            and V out of the pages into dense tensors and run a dense attention plan. The copies are
 *            the bench's copy kernel over the sequence's K+V bytes in one piece (the least a gather
 *            could cost: no per-page calls), so the baseline is a lower bound.
 *   prefill: one chunk of 512 rows over 4096 cached tokens (4608 keys) through the ragged call,
 *            against the dense attention plan on the same shape (dense K/V, no copy); then the same
 *            chunk over int8 and fp8 e4m3 caches (scales per row; the chunk path's gather decodes
 *            them to f32) against that dense plan on f16 K/V, the 16-bit data an engine without
 *            8-bit caches would hold.
 * Issue 21's targets: step >= 1.5x, prefill >= 0.8x. */
#include "ragged.h"

#include "baseline.h"
#include "timed.h"
#include "cpu.h"
#include "values.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 32, HKV = 8, D = 128, PS = 16, RUNS = 7, WARMUP = 2, MAXS = 8 };

typedef struct {
    int n;
    int64_t len[MAXS], qlen[MAXS]; /* tokens cached (the rows' own included), query rows */
} scenario;

typedef struct {
    const scenario *sc;
    ropeqk_plan *paged, *dense[MAXS];
    cl_mem q, out, kc, vc, ks, vs, kd[MAXS], vd[MAXS]; /* ks, vs: an 8-bit cache's scales */
    ropeqk_buffer *w[6], *wkd[MAXS], *wvd[MAXS]; /* the cl_mems wrapped for the neutral runs (w: as m[6]) */
    ropeqk_dtype cdt;                                  /* the caches' dtype */
    size_t dense_bytes[MAXS];
    int32_t *table, lens[MAXS], qpos[MAXS], ind[MAXS + 1];
    int64_t rows, maxp;
    ropeqk_paged_batch batch;
    bool with_copies;
} rstate;

static int run_ragged(benv *e, void *v)
{
    const rstate *s = v;
    ropeqk_buffer *const *w = s->w;
    ropeqk_paged_args a = {.q = {w[0], 0},   .k_cache = {w[2], 0}, .v_cache = {w[3], 0},
                           .out = {w[1], 0}, .k_scale = {w[4], 0}, .v_scale = {w[5], 0}};
    (void)e; /* the run goes to the context's queue, e->queue */
    return ropeqk_paged_run(s->paged, &a, &s->batch, 0, NULL, NULL);
}

static int run_dense(benv *e, void *v)
{
    const rstate *s = v;
    int err = 0;
    for (int i = 0; i < s->sc->n && !err; i++) {
        if (s->with_copies) /* an engine's gather of the sequence's K and V out of the pages */
            err = baseline_copy(e, s->kc, s->kd[i], s->dense_bytes[i]) ||
                  baseline_copy(e, s->vc, s->vd[i], s->dense_bytes[i]);
        size_t row = (size_t)s->ind[i] * HQ * D * sizeof(float);
        ropeqk_args a = {.q = {s->w[0], row}, .k = {s->wkd[i], 0}, .v = {s->wvd[i], 0}, .out = {s->w[1], row}};
        if (!err)
            err = ropeqk_plan_run(s->dense[i], &a, NULL, 0, NULL, NULL);
    }
    return err;
}

static void free_state(rstate *s)
{
    ropeqk_plan_destroy(s->paged);
    cl_mem m[6] = {s->q, s->out, s->kc, s->vc, s->ks, s->vs};
    for (int i = 0; i < 6; i++)
        ropeqk_buffer_destroy(s->w[i]);
    for (int i = 0; i < MAXS; i++)
        ropeqk_buffer_destroy(s->wkd[i]), ropeqk_buffer_destroy(s->wvd[i]);
    for (int i = 0; i < 6; i++)
        if (m[i])
            clReleaseMemObject(m[i]);
    for (int i = 0; i < MAXS; i++) {
        ropeqk_plan_destroy(s->dense[i]);
        if (s->kd[i])
            clReleaseMemObject(s->kd[i]);
        if (s->vd[i])
            clReleaseMemObject(s->vd[i]);
    }
    free(s->table);
}

static ropeqk_params params(void)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.base = 500000;
    return p;
}

/* The pool holding every sequence's pages (shuffled) in dtype cdt (f16, or 8-bit with scales), the
 * packed Q, the plans and dense f16 buffers. */
static int make_state(benv *e, const scenario *sc, ropeqk_dtype cdt, rstate *s)
{
    memset(s, 0, sizeof *s);
    s->sc = sc;
    s->cdt = cdt;
    const bool q8 = cdt != ROPEQK_F16;
    int64_t np = 0;
    for (int i = 0; i < sc->n; i++) {
        int64_t p = (sc->len[i] + PS - 1) / PS;
        np += p;
        s->maxp = p > s->maxp ? p : s->maxp;
        s->ind[i] = (int32_t)s->rows;
        s->rows += sc->qlen[i];
    }
    s->ind[sc->n] = (int32_t)s->rows;
    uint64_t rng = BENCH_SEED;
    int32_t *perm = malloc((size_t)np * sizeof *perm);
    s->table = malloc((size_t)(sc->n * s->maxp) * sizeof *s->table);
    size_t kv = (size_t)np * HKV * PS * D * 2, qn = (size_t)s->rows * HQ * D, nsc = (size_t)np * HKV * PS;
    float *hq = malloc(qn * sizeof *hq), *f = malloc(kv / 2 * sizeof *f);
    uint16_t *h16 = malloc(kv);
    int err = 0;
    if (!perm || !s->table || !hq || !f || !h16) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    bench_shuffle_pages(&rng, perm, np);
    for (int i = 0, at = 0; i < sc->n; i++) {
        for (int64_t j = 0; j < (sc->len[i] + PS - 1) / PS; j++)
            s->table[i * s->maxp + j] = perm[at++];
        s->lens[i] = (int32_t)sc->len[i];
        s->qpos[i] = (int32_t)(sc->len[i] - sc->qlen[i]); /* the rows are the last qlen cached tokens */
    }
    bench_fill(&rng, f, h16, kv / 2);
    bench_fill(&rng, hq, NULL, qn);
    cl_int cerr = CL_SUCCESS;
    s->q = bench_mkbuf(e, qn * sizeof(float), hq, &cerr);
    s->out = bench_mkbuf(e, qn * sizeof(float), NULL, &cerr);
    if (q8) {
        /* codes from h16's bytes, fp8 magnitudes kept below 0x70 (finite, at most 120 in e4m3: no NaN
         * code), one scale 1/64 per row: the timing does not depend on the values beyond that */
        unsigned char *c8 = (unsigned char *)h16;
        for (size_t i = 0; i < kv / 2; i++)
            c8[i] = cdt == ROPEQK_I8 ? c8[i] : (unsigned char)((c8[i] & 0x80) | (c8[i] & 0x7F) % 0x70);
        for (size_t i = 0; i < nsc; i++)
            f[i] = 1.0f / 64;
        s->kc = bench_mkbuf(e, kv / 2, h16, &cerr);
        s->vc = bench_mkbuf(e, kv / 2, h16, &cerr);
        s->ks = bench_mkbuf(e, nsc * sizeof(float), f, &cerr);
        s->vs = bench_mkbuf(e, nsc * sizeof(float), f, &cerr);
        bench_fill(&rng, f, h16, kv / 2); /* f16 data again for the dense plans' K/V */
    } else {
        s->kc = bench_mkbuf(e, kv, h16, &cerr);
        s->vc = bench_mkbuf(e, kv, h16, &cerr);
    }
    if ((err = cerr))
        goto done;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE, .params = params()};
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, s->rows, HQ, 1, D);
    d.k = ropeqk_tensor_bhsd(cdt, np, HKV, PS, D);
    d.v = d.k;
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, s->rows, HQ, 1, D);
    d.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = s->maxp, .max_seqs = sc->n,
                                  .max_q_rows = s->rows};
    if ((err = ropeqk_plan_create(e->rq, &d, &s->paged))) {
        fprintf(stderr, "ragged plan: %s\n", ropeqk_last_error());
        goto done;
    }
    s->batch = (ropeqk_paged_batch){.n_seqs = sc->n, .page_table = s->table, .seq_lens = s->lens, .q_pos = s->qpos,
                                    .q_indptr = s->ind};
    for (int i = 0; i < sc->n; i++) {
        /* the sequence's rows of the packed Q and out as [1, Hq, qlen, D] views (BSHD memory) */
        ropeqk_plan_desc a = {.op = ROPEQK_OP_ATTENTION, .params = params()};
        a.params.q_pos_offset = sc->len[i] - sc->qlen[i];
        a.q = ropeqk_tensor_bshd(ROPEQK_F32, 1, sc->qlen[i], HQ, D);
        a.k = ropeqk_tensor_bhsd(ROPEQK_F16, 1, HKV, sc->len[i], D);
        a.v = a.k;
        a.out = ropeqk_tensor_bshd(ROPEQK_F32, 1, sc->qlen[i], HQ, D);
        s->dense_bytes[i] = (size_t)sc->len[i] * HKV * D * 2;
        s->dense_bytes[i] = (s->dense_bytes[i] + 63) / 64 * 64;
        s->kd[i] = bench_mkbuf(e, s->dense_bytes[i], h16, &cerr);
        s->vd[i] = bench_mkbuf(e, s->dense_bytes[i], h16, &cerr);
        if ((err = cerr) || (err = ropeqk_plan_create(e->rq, &a, &s->dense[i]))) {
            fprintf(stderr, "dense plan %d: %s\n", i, ropeqk_last_error());
            goto done;
        }
        s->wkd[i] = bench_wrap(e->rq, s->kd[i], &err);
        s->wvd[i] = bench_wrap(e->rq, s->vd[i], &err);
    }
    const cl_mem m[6] = {s->q, s->out, s->kc, s->vc, s->ks, s->vs};
    for (int i = 0; i < 6; i++)
        s->w[i] = bench_wrap(e->rq, m[i], &err);
done:
    free(perm), free(hq), free(f), free(h16);
    return err;
}

static int compare(benv *e, const char *name, const scenario *sc, ropeqk_dtype cdt, bool copies, double target)
{
    rstate s;
    int err = make_state(e, sc, cdt, &s);
    s.with_copies = copies;
    double tr = 0, td = 0;
    if (!err)
        err = bench_time_ms(e, run_ragged, &s, RUNS, WARMUP, &tr, NULL) ||
              bench_time_ms(e, run_dense, &s, RUNS, WARMUP, &td, NULL);
    if (err)
        fprintf(stderr, "ragged bench (%s): error %d\n", name, err);
    else
        printf("%-12s ragged paged call: median %.2f ms; per-sequence dense attention%s: median %.2f ms; "
               "speed-up %.2fx", name, tr, copies ? " on copies (copy kernel + plan)" : "", td, td / tr);
    if (!err && target > 0)
        printf(" (target >= %.1fx)\n", target);
    else if (!err)
        printf(cdt != ROPEQK_F16 ? " (dense on f16 K/V)\n" : " (the step's part)\n");
    free_state(&s);
    return err;
}

int bench_ragged(benv *e)
{
    bench_print_cpu();
    printf("ragged paged attention: Hq %d, Hkv %d, D = Dv = %d, f16 caches in pages of %d (shuffled), f32 Q/out, "
           "causal, %d runs after %d warm-ups\n", HQ, HKV, D, PS, RUNS, WARMUP);
    /* decode at 4k, 8k, 16k, 32k; chunks of 512 over 1024 and 2048 cached; a speculative step of 4 at 8k */
    static const scenario step = {7, {4096, 8192, 16384, 32768, 1536, 2560, 8196}, {1, 1, 1, 1, 512, 512, 4}};
    static const scenario prefill = {1, {4608}, {512}};
    /* the step's parts alone: where its time goes */
    static const scenario decodes = {5, {4096, 8192, 16384, 32768, 8196}, {1, 1, 1, 1, 4}};
    static const scenario chunks = {2, {1536, 2560}, {512, 512}};
    int err = compare(e, "step", &step, ROPEQK_F16, true, 1.5);
    if (!err)
        err = compare(e, " decodes", &decodes, ROPEQK_F16, true, 0);
    if (!err)
        err = compare(e, " chunks", &chunks, ROPEQK_F16, true, 0);
    if (!err)
        err = compare(e, "prefill", &prefill, ROPEQK_F16, false, 0.8);
    /* the same chunk over 8-bit caches (the chunk path's 8-bit gather) against dense f16 */
    if (!err)
        err = compare(e, "prefill int8", &prefill, ROPEQK_I8, false, 0);
    if (!err)
        err = compare(e, "prefill e4m3", &prefill, ROPEQK_FP8_E4M3, false, 0);
    return err;
}
