/* The backend-neutral run API (ropeqk.h: ropeqk_buffer, ropeqk_event, ropeqk_plan_run,
 * ropeqk_paged_run, ropeqk_paged_append, ropeqk_buffer_copy, ropeqk_ctx_finish), written once and run
 * on every backend present (suite 'run' on the default device, 'run_vulkan' on lavapipe with the
 * validation layer): buffers, every run against the fp64 path (small shapes, every dtype, both pair
 * layouts, partial rotary, GQA, offsets, strides, int32-edge positions), event chains, and every
 * refusal with its status and nothing run. The caller's native objects (wraps, user events,
 * semaphores, timeouts) are in test_run_interop.c. */
#include "paged_fixture.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

TestSuite(run, .init = th_ctx_init, .fini = th_ctx_fini);

/* A buffer of n bytes holding data (NULL: every byte 0x5A). */
static ropeqk_buffer *buf_of(const void *data, size_t n, uint32_t flags)
{
    ropeqk_buffer *b = NULL;
    TH_OK(ropeqk_buffer_create(th_ctx, n, flags, &b));
    if (data)
        TH_OK(ropeqk_buffer_write(b, 0, data, n));
    else
        TH_OK(ropeqk_buffer_fill(b, 0, ropeqk_buffer_size(b), 0x5A5A5A5Au));
    return b;
}

static void wait_release(ropeqk_event *e)
{
    cr_assert(e, "no event handed back");
    TH_OK(ropeqk_event_wait(e, UINT64_MAX));
    ropeqk_event_release(e);
}

Test(run, buffers)
{
    for (uint32_t flags = 0; flags <= ROPEQK_BUFFER_HOST_VISIBLE; flags++) {
        ropeqk_buffer *b = NULL;
        TH_OK(ropeqk_buffer_create(th_ctx, 10, flags, &b));
        cr_assert_eq(ropeqk_buffer_size(b), 12, "10 bytes round up to 12");
        unsigned char w[12], r[12];
        for (int i = 0; i < 12; i++)
            w[i] = (unsigned char)(3 * i + 1);
        TH_OK(ropeqk_buffer_write(b, 0, w, 12));
        TH_OK(ropeqk_buffer_write(b, 5, "xyz", 3));
        memcpy(w + 5, "xyz", 3);
        TH_OK(ropeqk_buffer_read(b, 0, r, 12));
        cr_assert_arr_eq(r, w, 12);
        TH_OK(ropeqk_buffer_fill(b, 4, 8, 0xA1B2C3D4u));
        uint32_t word = 0xA1B2C3D4u;
        memcpy(w + 4, &word, 4), memcpy(w + 8, &word, 4);
        TH_OK(ropeqk_buffer_read(b, 2, r, 10));
        cr_assert_arr_eq(r, w + 2, 10);
        /* refusals change nothing */
        cr_assert_eq(ropeqk_buffer_fill(b, 2, 4, 0), ROPEQK_ERR_BAD_PARAM);
        cr_assert_eq(ropeqk_buffer_fill(b, 0, 6, 0), ROPEQK_ERR_BAD_PARAM);
        cr_assert_eq(ropeqk_buffer_fill(b, 8, 8, 0), ROPEQK_ERR_BUFFER_TOO_SMALL);
        cr_assert_eq(ropeqk_buffer_write(b, 10, w, 4), ROPEQK_ERR_BUFFER_TOO_SMALL);
        cr_assert_eq(ropeqk_buffer_write(b, UINT64_MAX, w, 2), ROPEQK_ERR_BUFFER_TOO_SMALL);
        cr_assert_eq(ropeqk_buffer_read(b, 13, r, 0), ROPEQK_ERR_BUFFER_TOO_SMALL);
        cr_assert_eq(ropeqk_buffer_read(b, 0, NULL, 4), ROPEQK_ERR_NULL_POINTER);
        cr_assert_eq(ropeqk_buffer_write(b, 0, NULL, 4), ROPEQK_ERR_NULL_POINTER);
        TH_OK(ropeqk_buffer_write(b, 12, NULL, 0)); /* 0 bytes at the end: nothing */
        TH_OK(ropeqk_buffer_read(b, 0, r, 12));
        cr_assert_arr_eq(r, w, 12);
        ropeqk_buffer_destroy(b);
    }
    /* a buffer past what fits the staging path's one copy in a small one: 1 MiB and 3 bytes */
    size_t n = (1u << 20) + 3;
    unsigned char *w = malloc(n + 1), *r = malloc(n + 1);
    cr_assert(w && r);
    for (size_t i = 0; i < n; i++)
        w[i] = (unsigned char)(i * 7 + (i >> 9));
    ropeqk_buffer *b = buf_of(w, n, 0);
    TH_OK(ropeqk_buffer_read(b, 0, r, n));
    cr_assert(memcmp(r, w, n) == 0);
    ropeqk_buffer_destroy(b);
    free(w), free(r);
    /* creation refusals: *out NULL */
    ropeqk_buffer *x = (ropeqk_buffer *)1;
    cr_assert_eq(ropeqk_buffer_create(th_ctx, 0, 0, &x), ROPEQK_ERR_BAD_PARAM);
    cr_assert_null(x);
    x = (ropeqk_buffer *)1;
    cr_assert_eq(ropeqk_buffer_create(th_ctx, 4, 1u << 7, &x), ROPEQK_ERR_BAD_PARAM);
    cr_assert_null(x);
    cr_assert_eq(ropeqk_buffer_create(NULL, 4, 0, &x), ROPEQK_ERR_NULL_POINTER);
    cr_assert_eq(ropeqk_buffer_create(th_ctx, 4, 0, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_assert_eq(ropeqk_buffer_create(th_ctx, UINT64_MAX, 0, &x), ROPEQK_ERR_OVERFLOW);
    cr_assert_eq(ropeqk_buffer_create(th_ctx, UINT64_MAX / 2, 0, &x), ROPEQK_ERR_TOO_LARGE, "%s", ropeqk_last_error());
    cr_assert_eq(ropeqk_buffer_size(NULL), 0);
    ropeqk_buffer_destroy(NULL);
    ropeqk_event_release(NULL);
    cr_assert_eq(ropeqk_event_wait(NULL, 0), ROPEQK_ERR_NULL_POINTER);
    cr_assert_eq(ropeqk_ctx_finish(NULL), ROPEQK_ERR_NULL_POINTER);
    TH_OK(ropeqk_ctx_finish(th_ctx));
}

Test(run, copy)
{
    unsigned char a0[256], b0[256], want[256], got[256];
    for (int i = 0; i < 256; i++)
        a0[i] = (unsigned char)i, b0[i] = (unsigned char)(255 - i);
    ropeqk_buffer *a = buf_of(a0, 256, 0), *b = buf_of(b0, 256, ROPEQK_BUFFER_HOST_VISIBLE);
    ropeqk_copy c[3] = {{b, 128, a, 0, 64}, {b, 0, a, 64, 32}, {a, 200, a, 10, 30}};
    ropeqk_event *e = NULL;
    TH_OK(ropeqk_buffer_copy(c, 3, 0, NULL, &e));
    wait_release(e);
    memcpy(want, b0, 256), memcpy(want + 128, a0, 64), memcpy(want, a0 + 64, 32);
    TH_OK(ropeqk_buffer_read(b, 0, got, 256));
    cr_assert_arr_eq(got, want, 256);
    TH_OK(ropeqk_buffer_read(a, 200, got, 30));
    cr_assert_arr_eq(got, a0 + 10, 30);
    /* refusals: nothing copied, no event */
    ropeqk_ctx *other = NULL;
    TH_OK(ropeqk_ctx_create(NULL, &other));
    ropeqk_buffer *o = NULL;
    TH_OK(ropeqk_buffer_create(other, 64, 0, &o));
    const struct {
        ropeqk_copy c[2];
        uint32_t n;
        ropeqk_status st;
    } bad[] = {
        {{{a, 0, a, 32, 64}}, 1, ROPEQK_ERR_OVERLAP},
        {{{b, 0, a, 0, 16}, {b, 8, a, 100, 16}}, 2, ROPEQK_ERR_OVERLAP},
        {{{b, 0, a, 0, 0}}, 1, ROPEQK_ERR_BAD_PARAM},
        {{{b, 250, a, 0, 8}}, 1, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {{{b, 0, a, UINT64_MAX - 2, 8}}, 1, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {{{b, 0, o, 0, 8}}, 1, ROPEQK_ERR_BAD_PARAM},
        {{{b, 0, a, 0, 8}}, 0, ROPEQK_ERR_BAD_PARAM},
        {{{NULL, 0, a, 0, 8}}, 1, ROPEQK_ERR_NULL_POINTER},
    };
    TH_OK(ropeqk_buffer_read(b, 0, want, 256));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (ropeqk_event *)1;
        cr_expect_eq(ropeqk_buffer_copy(bad[i].c, bad[i].n, 0, NULL, &e), bad[i].st, "case %zu: %s", i,
                     ropeqk_last_error());
        cr_expect_null(e, "case %zu: an event for a refused copy", i);
    }
    TH_OK(ropeqk_ctx_finish(th_ctx));
    TH_OK(ropeqk_buffer_read(b, 0, got, 256));
    cr_assert_arr_eq(got, want, 256, "a refused copy wrote");
    ropeqk_buffer_destroy(o);
    ropeqk_ctx_destroy(other);
    ropeqk_buffer_destroy(a), ropeqk_buffer_destroy(b);
}

/* ---- scores and attention against fp64 ------------------------------------------------------------ */

/* Host data of a view's extent, random in the view's dtype (every element written; gaps 0xFF). */
static unsigned char *host_of(const ropeqk_tensor *t, uint64_t *rng)
{
    size_t n = ropeqk_tensor_extent(t), es = ropeqk_dtype_size(t->dtype);
    unsigned char *h = malloc(n);
    cr_assert(h);
    memset(h, 0xFF, n);
    for (int64_t a = 0; a < t->ne[0]; a++)
        for (int64_t b = 0; b < t->ne[1]; b++)
            for (int64_t c = 0; c < t->ne[2]; c++)
                for (int64_t d = 0; d < t->ne[3]; d++)
                    th_put_random(h + off4(t, a, b, c, d), t->dtype, rng);
    (void)es;
    return h;
}

typedef struct {
    ropeqk_dtype dt;
    ropeqk_layout layout;
    int64_t R;       /* rotary dims (0: D) */
    bool arrays;     /* per-token positions near INT32_MAX */
    bool bshd;       /* K in BSHD memory */
} scase;

/* One scores plan on device buffers (views at byte offsets into larger buffers), checked. */
static void scores_case(const scase *sc, uint64_t seed)
{
    enum { B = 2, HQ = 4, HKV = 2, SQ = 5, SK = 9, D = 16, OFF = 64 };
    uint64_t rng = seed;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = sc->layout, p.rotary_dim = sc->R, p.causal = 1, p.q_pos_offset = SK - SQ;
    ropeqk_tensor q = ropeqk_tensor_bhsd(sc->dt, B, HQ, SQ, D);
    ropeqk_tensor k = sc->bshd ? ropeqk_tensor_bshd(sc->dt, B, SK, HKV, D) : ropeqk_tensor_bhsd(sc->dt, B, HKV, SK, D);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK), o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, SK);
    unsigned char *qh = host_of(&q, &rng), *kh = host_of(&k, &rng);
    int32_t qp[SQ], kp[SK];
    for (int i = 0; i < SK; i++)
        kp[i] = INT32_MAX - 40 + 3 * i;
    for (int i = 0; i < SQ; i++)
        qp[i] = kp[SK - SQ + i];
    size_t qb = ropeqk_tensor_extent(&q), kb = ropeqk_tensor_extent(&k), ob = ropeqk_tensor_extent(&o);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = p, .q = q, .k = k, .out = o,
                          .positions = sc->arrays ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    ropeqk_plan *pl = NULL;
    TH_OK(ropeqk_plan_create(th_ctx, &d, &pl));
    /* one buffer for Q, K and the positions, one for the output: views at offsets */
    ropeqk_buffer *in = buf_of(NULL, OFF + qb + kb + 2 * sizeof qp + 2 * sizeof kp, 0), *out = buf_of(NULL, OFF + ob, 0);
    uint64_t qo = OFF, ko = OFF + qb, po = (ko + kb + 7) / 8 * 8, kpo = po + sizeof qp;
    TH_OK(ropeqk_buffer_write(in, qo, qh, qb));
    TH_OK(ropeqk_buffer_write(in, ko, kh, kb));
    TH_OK(ropeqk_buffer_write(in, po, qp, sizeof qp));
    TH_OK(ropeqk_buffer_write(in, kpo, kp, sizeof kp));
    ropeqk_args a = {.q = {in, qo}, .k = {in, ko}, .out = {out, OFF}};
    if (sc->arrays)
        a.q_pos = (ropeqk_mem){in, po}, a.k_pos = (ropeqk_mem){in, kpo};
    ropeqk_event *e = NULL;
    TH_OK(ropeqk_plan_run(pl, &a, NULL, 0, NULL, &e));
    wait_release(e);
    float *s = malloc(ob);
    double *s64 = malloc(ropeqk_tensor_extent(&o64));
    cr_assert(s && s64);
    TH_OK(ropeqk_buffer_read(out, OFF, s, ob));
    TH_OK(ropeqk_scores_ref(&p, &q, qh, &k, kh, sc->arrays ? qp : NULL, sc->arrays ? kp : NULL, &o64, s64));
    double err = 0;
    int64_t mism = 0;
    TH_OK(ropeqk_max_error(&p, &q, qh, &k, kh, &o, s, &o64, s64, &err, &mism));
    cr_expect(err <= 1e-5 && mism == 0, "dtype %d layout %d R %lld arrays %d bshd %d (seed %llu): error %.3g, %lld -inf "
              "mismatches", sc->dt, sc->layout, (long long)sc->R, sc->arrays, sc->bshd, (unsigned long long)seed, err,
              (long long)mism);
    unsigned char lead[OFF];
    TH_OK(ropeqk_buffer_read(out, 0, lead, OFF));
    for (int i = 0; i < OFF; i++)
        cr_assert_eq(lead[i], 0x5A, "a byte before the output view was written");
    free(s), free(s64), free(qh), free(kh);
    ropeqk_buffer_destroy(in), ropeqk_buffer_destroy(out);
    ropeqk_plan_destroy(pl);
}

Test(run, scores)
{
    uint64_t seed = th_seed(2701);
    const scase cases[] = {
        {ROPEQK_F32, ROPEQK_INTERLEAVED, 0, false, false}, {ROPEQK_F16, ROPEQK_HALF_SPLIT, 8, true, true},
        {ROPEQK_BF16, ROPEQK_INTERLEAVED, 12, true, false}, {ROPEQK_F32, ROPEQK_HALF_SPLIT, 0, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        scores_case(&cases[i], seed + i);
}

/* An attention plan (a decode plan when `step`: max_keys keys, n_keys of them used, the step's
 * offsets) with LSE on device buffers, checked against fp64 over the keys used. */
static void attention_case(ropeqk_dtype dt, ropeqk_dtype odt, int64_t sq, bool step, uint64_t seed)
{
    enum { B = 1, HQ = 6, HKV = 2, SK = 40, D = 32, DV = 24 };
    const int64_t nk = step ? 29 : SK;
    uint64_t rng = seed;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = ROPEQK_HALF_SPLIT, p.causal = 1, p.q_pos_offset = SK - sq, p.base = 500000;
    ropeqk_tensor q = ropeqk_tensor_bhsd(dt, B, HQ, sq, D), k = ropeqk_tensor_bhsd(dt, B, HKV, SK, D);
    ropeqk_tensor v = ropeqk_tensor_bhsd(dt, B, HKV, SK, DV), o = ropeqk_tensor_bhsd(odt, B, HQ, sq, DV);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, sq, 1);
    unsigned char *qh = host_of(&q, &rng), *kh = host_of(&k, &rng), *vh = host_of(&v, &rng);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .params = p, .q = q, .k = k, .out = o, .v = v, .lse = l,
                          .with_lse = 1, .max_keys = step ? SK : 0};
    ropeqk_plan *pl = NULL;
    TH_OK(ropeqk_plan_create(th_ctx, &d, &pl));
    size_t qb = ropeqk_tensor_extent(&q), kb = ropeqk_tensor_extent(&k), vb = ropeqk_tensor_extent(&v);
    size_t ob = ropeqk_tensor_extent(&o), lb = ropeqk_tensor_extent(&l);
    ropeqk_buffer *bq = buf_of(qh, qb, 0), *bk = buf_of(kh, kb, ROPEQK_BUFFER_HOST_VISIBLE), *bv = buf_of(vh, vb, 0);
    ropeqk_buffer *bo = buf_of(NULL, ob + lb + 4, 0);
    uint64_t lo = (ob + 3) / 4 * 4;
    ropeqk_args a = {.q = {bq, 0}, .k = {bk, 0}, .v = {bv, 0}, .out = {bo, 0}, .lse = {bo, lo}};
    ropeqk_step st = {.n_keys = nk, .q_pos_offset = nk - sq + 1000, .k_pos_offset = 1000};
    TH_OK(ropeqk_plan_run(pl, &a, step ? &st : NULL, 0, NULL, NULL));
    unsigned char *oh = malloc(ob);
    float *lh = malloc(lb);
    cr_assert(oh && lh);
    TH_OK(ropeqk_buffer_read(bo, 0, oh, ob)); /* ordered after the run: no event needed */
    TH_OK(ropeqk_buffer_read(bo, lo, lh, lb));
    /* the reference over the keys used: K and V cut to nk keys, the step's offsets */
    ropeqk_tensor kr = k, vr = v;
    kr.ne[2] = vr.ne[2] = nk;
    ropeqk_params pr = p;
    if (step)
        pr.q_pos_offset = st.q_pos_offset, pr.k_pos_offset = st.k_pos_offset;
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, sq, DV), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, sq, 1);
    double *r = malloc(ropeqk_tensor_extent(&o64)), *rl = malloc(ropeqk_tensor_extent(&l64)), err = 0, el = 0;
    int64_t mism = 0;
    cr_assert(r && rl);
    TH_OK(ropeqk_attention_ref(&pr, &q, qh, &kr, kh, &vr, vh, NULL, NULL, &o64, r, &l64, rl));
    TH_OK(ropeqk_attention_max_error(&vr, vh, &o, oh, &o64, r, &l, lh, &l64, rl, &err, &el, &mism));
    /* a 16-bit output adds its rounding (half an ulp of |O| <= max |V|), as in test_attn_sweep.c */
    double bound = 1e-5 + (odt == ROPEQK_F16 ? 0x1p-11 : odt == ROPEQK_BF16 ? 0x1p-8 : 0.0);
    cr_expect(err <= bound && el <= 1e-5 && mism == 0, "attention dtype %d out %d Sq %lld step %d (seed %llu): O %.3g, "
              "LSE %.3g, %lld mismatches", dt, odt, (long long)sq, step, (unsigned long long)seed, err, el,
              (long long)mism);
    free(qh), free(kh), free(vh), free(oh), free(lh), free(r), free(rl);
    ropeqk_buffer_destroy(bq), ropeqk_buffer_destroy(bk), ropeqk_buffer_destroy(bv), ropeqk_buffer_destroy(bo);
    ropeqk_plan_destroy(pl);
}

Test(run, attention)
{
    uint64_t seed = th_seed(2702);
    /* two cases (each dtype pair builds its own pipelines: lavapipe with validation takes seconds) */
    attention_case(ROPEQK_F16, ROPEQK_BF16, 7, false, seed);     /* prefill shape */
    attention_case(ROPEQK_BF16, ROPEQK_F16, 2, true, seed + 1);  /* a decode step of two rows (dense decode) */
}

/* ---- the paged cache: append, then decode ------------------------------------------------------ */

Test(run, paged_append_decode)
{
    uint64_t seed = th_seed(2703), rng = seed;
    enum { NEW = 2 };
    pcase c = base_case("run: append + decode");
    c.Hq = 4, c.Hkv = 2, c.D = 32, c.Dv = 16, c.n_seqs = 3, c.max_seqs = 4, c.maxp = 12, c.spare_pages = 2;
    c.lens[0] = 37, c.lens[1] = 3, c.lens[2] = 150, c.qdt = ROPEQK_F16, c.kdt = ROPEQK_F16, c.vdt = ROPEQK_F32;
    c.ragged = true, c.qlens[0] = 2, c.qlens[1] = 1, c.qlens[2] = 20; /* the 20 rows: a prefill chunk */
    c.p.causal = 1, c.p.layout = ROPEQK_INTERLEAVED;
    pdata d;
    pdata_make(&c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    TH_OK(ropeqk_plan_create(th_ctx, &desc, &pl));
    /* the caches on the device without each sequence's last NEW tokens (0xFF), which the append
     * writes from k_new [n_seqs, Hkv, NEW, D] and v_new */
    ropeqk_tensor tkn = ropeqk_tensor_bhsd(c.kdt, c.n_seqs, c.Hkv, NEW, c.D);
    ropeqk_tensor tvn = ropeqk_tensor_bhsd(c.vdt, c.n_seqs, c.Hkv, NEW, c.Dv);
    unsigned char *k0 = malloc(d.kb), *v0 = malloc(d.vb);
    unsigned char *kn = malloc(ropeqk_tensor_extent(&tkn)), *vn = malloc(ropeqk_tensor_extent(&tvn));
    cr_assert(k0 && v0 && kn && vn);
    memcpy(k0, d.k, d.kb), memcpy(v0, d.v, d.vb);
    int32_t before[MAXS];
    size_t kr = (size_t)c.D * ropeqk_dtype_size(c.kdt), vr = (size_t)c.Dv * ropeqk_dtype_size(c.vdt);
    for (int64_t s = 0; s < c.n_seqs; s++) {
        before[s] = d.lens[s] - NEW;
        for (int64_t t = 0; t < NEW; t++) {
            int64_t j = before[s] + t, page = d.table[s * c.maxp + j / c.ps], slot = j % c.ps;
            for (int64_t h = 0; h < c.Hkv; h++) {
                memcpy(kn + off4(&tkn, s, h, t, 0), d.k + off4(&d.tk, page, h, slot, 0), kr);
                memcpy(vn + off4(&tvn, s, h, t, 0), d.v + off4(&d.tv, page, h, slot, 0), vr);
                memset(k0 + off4(&d.tk, page, h, slot, 0), 0xFF, kr);
                memset(v0 + off4(&d.tv, page, h, slot, 0), 0xFF, vr);
            }
        }
    }
    ropeqk_buffer *bq = buf_of(d.q, d.qb, 0), *bk = buf_of(k0, d.kb, 0), *bv = buf_of(v0, d.vb, 0);
    ropeqk_buffer *bkn = buf_of(kn, ropeqk_tensor_extent(&tkn), 0), *bvn = buf_of(vn, ropeqk_tensor_extent(&tvn), 0);
    ropeqk_buffer *bo = buf_of(NULL, d.ob, 0), *bl = buf_of(NULL, d.lb, 0);
    ropeqk_paged_batch ab = batch_of(&c, &d), db = ab;
    ab.seq_lens = before;
    ropeqk_paged_cache cache = {.k_cache = {bk, 0}, .v_cache = {bv, 0}};
    ropeqk_event *appended = NULL, *decoded = NULL;
    TH_OK(ropeqk_paged_append(pl, &tkn, (ropeqk_mem){bkn, 0}, &tvn, (ropeqk_mem){bvn, 0}, &cache, &ab, 0, NULL, &appended));
    ropeqk_paged_args pa = {.q = {bq, 0}, .k_cache = {bk, 0}, .v_cache = {bv, 0}, .out = {bo, 0}, .lse = {bl, 0}};
    TH_OK(ropeqk_paged_run(pl, &pa, &db, 1, &appended, &decoded));
    ropeqk_event_release(appended); /* released while pending: the run goes on */
    wait_release(decoded);
    unsigned char *out = malloc(d.ob);
    float *lse = malloc(d.lb);
    cr_assert(out && lse);
    TH_OK(ropeqk_buffer_read(bo, 0, out, d.ob));
    TH_OK(ropeqk_buffer_read(bl, 0, lse, d.lb));
    pf_check(&c, &d, out, lse, seed);
    /* the caches now hold what the fixture's do, byte for byte (the append's rows included) */
    TH_OK(ropeqk_buffer_read(bk, 0, k0, d.kb));
    TH_OK(ropeqk_buffer_read(bv, 0, v0, d.vb));
    cr_expect(memcmp(k0, d.k, d.kb) == 0 && memcmp(v0, d.v, d.vb) == 0, "the appended caches differ (seed %llu)",
              (unsigned long long)seed);
    free(out), free(lse), free(k0), free(v0), free(kn), free(vn);
    ropeqk_buffer *all[] = {bq, bk, bv, bkn, bvn, bo, bl};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ropeqk_buffer_destroy(all[i]);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}

/* ---- events ---------------------------------------------------------------------------------- */

/* Inputs copied in by two copies, the run waiting for both, its output copied out after it: only
 * the last event is waited for. */
Test(run, event_chain)
{
    enum { B = 1, HQ = 2, HKV = 1, SQ = 3, SK = 6, D = 8 };
    uint64_t seed = th_seed(2704), rng = seed;
    ropeqk_params p;
    ropeqk_default_params(&p);
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D), k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK), o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, SK);
    unsigned char *qh = host_of(&q, &rng), *kh = host_of(&k, &rng);
    size_t qb = ropeqk_tensor_extent(&q), kb = ropeqk_tensor_extent(&k), ob = ropeqk_tensor_extent(&o);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = p, .q = q, .k = k, .out = o};
    ropeqk_plan *pl = NULL;
    TH_OK(ropeqk_plan_create(th_ctx, &d, &pl));
    ropeqk_buffer *stage = buf_of(NULL, qb + kb, ROPEQK_BUFFER_HOST_VISIBLE), *bq = buf_of(NULL, qb, 0);
    ropeqk_buffer *bk = buf_of(NULL, kb, 0), *bo = buf_of(NULL, ob, 0), *back = buf_of(NULL, ob, ROPEQK_BUFFER_HOST_VISIBLE);
    TH_OK(ropeqk_buffer_write(stage, 0, qh, qb));
    TH_OK(ropeqk_buffer_write(stage, qb, kh, kb));
    ropeqk_event *e[4] = {NULL, NULL, NULL, NULL};
    ropeqk_copy cq = {bq, 0, stage, 0, qb}, ck = {bk, 0, stage, qb, kb}, co = {back, 0, bo, 0, ob};
    TH_OK(ropeqk_buffer_copy(&cq, 1, 0, NULL, &e[0]));
    TH_OK(ropeqk_buffer_copy(&ck, 1, 1, &e[0], &e[1]));
    ropeqk_args a = {.q = {bq, 0}, .k = {bk, 0}, .out = {bo, 0}};
    TH_OK(ropeqk_plan_run(pl, &a, NULL, 2, e, &e[2]));
    TH_OK(ropeqk_buffer_copy(&co, 1, 1, &e[2], &e[3]));
    TH_OK(ropeqk_event_wait(e[3], UINT64_MAX));
    for (int i = 0; i < 4; i++) { /* every earlier one has completed too: a poll says so */
        TH_OK(ropeqk_event_wait(e[i], 0));
        ropeqk_event_release(e[i]);
    }
    float *s = malloc(ob);
    double *s64 = malloc(ropeqk_tensor_extent(&o64)), err = 0;
    int64_t mism = 0;
    cr_assert(s && s64);
    TH_OK(ropeqk_buffer_read(back, 0, s, ob));
    TH_OK(ropeqk_scores_ref(&p, &q, qh, &k, kh, NULL, NULL, &o64, s64));
    TH_OK(ropeqk_max_error(&p, &q, qh, &k, kh, &o, s, &o64, s64, &err, &mism));
    cr_expect(err <= 1e-5 && mism == 0, "chained run (seed %llu): error %.3g, %lld mismatches", (unsigned long long)seed,
              err, (long long)mism);
    TH_OK(ropeqk_ctx_finish(th_ctx));
    free(s), free(s64), free(qh), free(kh);
    ropeqk_buffer_destroy(stage), ropeqk_buffer_destroy(bq), ropeqk_buffer_destroy(bk);
    ropeqk_buffer_destroy(bo), ropeqk_buffer_destroy(back);
    ropeqk_plan_destroy(pl);
}

Test(run, wait_bound_env)
{
    cr_assert_eq(setenv("ROPEQK_WAIT_TIMEOUT_MS", "soon", 1), 0);
    cr_expect_eq(ropeqk_ctx_finish(th_ctx), ROPEQK_ERR_BAD_CONFIG);
    cr_expect(strstr(ropeqk_last_error(), "ROPEQK_WAIT_TIMEOUT_MS"), "%s", ropeqk_last_error());
    cr_assert_eq(setenv("ROPEQK_WAIT_TIMEOUT_MS", "0", 1), 0);
    cr_expect_eq(ropeqk_ctx_finish(th_ctx), ROPEQK_ERR_BAD_CONFIG);
    cr_assert_eq(setenv("ROPEQK_WAIT_TIMEOUT_MS", "5000", 1), 0);
    TH_OK(ropeqk_ctx_finish(th_ctx));
    unsetenv("ROPEQK_WAIT_TIMEOUT_MS");
}

/* ---- threads: one context, one plan, four threads running it (each into its own output, events
 * waited for by each thread), against a lone run, bit for bit ------------------------------------ */
typedef struct {
    ropeqk_plan *pl;
    ropeqk_buffer *q, *k, *o;
    ropeqk_status st;
} thread_arg;

static void *thread_run(void *user)
{
    thread_arg *t = user;
    ropeqk_args a = {.q = {t->q, 0}, .k = {t->k, 0}, .out = {t->o, 0}};
    for (int i = 0; i < 25 && !t->st; i++) {
        ropeqk_event *e = NULL;
        t->st = ropeqk_plan_run(t->pl, &a, NULL, 0, NULL, i % 5 == 4 ? &e : NULL);
        if (!t->st && e)
            t->st = ropeqk_event_wait(e, UINT64_MAX);
        ropeqk_event_release(e);
    }
    return NULL;
}

Test(run, threads)
{
    enum { B = 1, HQ = 4, HKV = 2, SQ = 6, SK = 11, D = 16, T = 4 };
    uint64_t seed = th_seed(2707), rng = seed;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D),
                          .k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D),
                          .out = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK)};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    unsigned char *qh = host_of(&d.q, &rng), *kh = host_of(&d.k, &rng);
    size_t ob = ropeqk_tensor_extent(&d.out);
    thread_arg t[T + 1];
    TH_OK(ropeqk_plan_create(th_ctx, &d, &t[0].pl));
    ropeqk_buffer *q = buf_of(qh, ropeqk_tensor_extent(&d.q), 0), *k = buf_of(kh, ropeqk_tensor_extent(&d.k), 0);
    for (int i = 0; i <= T; i++)
        t[i] = (thread_arg){t[0].pl, q, k, buf_of(NULL, ob, 0), ROPEQK_SUCCESS};
    ropeqk_args lone = {.q = {q, 0}, .k = {k, 0}, .out = {t[T].o, 0}};
    TH_OK(ropeqk_plan_run(t[0].pl, &lone, NULL, 0, NULL, NULL));
    pthread_t th[T];
    for (int i = 0; i < T; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, thread_run, &t[i]), 0);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    unsigned char *want = malloc(ob), *got = malloc(ob);
    cr_assert(want && got);
    TH_OK(ropeqk_buffer_read(t[T].o, 0, want, ob));
    for (int i = 0; i < T; i++) {
        cr_expect_eq(t[i].st, ROPEQK_SUCCESS, "thread %d: %s", i, ropeqk_status_string(t[i].st));
        TH_OK(ropeqk_buffer_read(t[i].o, 0, got, ob));
        cr_expect(memcmp(got, want, ob) == 0, "thread %d's output differs from a lone run's (seed %llu)", i,
                  (unsigned long long)seed);
    }
    for (int i = 0; i <= T; i++)
        ropeqk_buffer_destroy(t[i].o);
    ropeqk_buffer_destroy(q), ropeqk_buffer_destroy(k);
    ropeqk_plan_destroy(t[0].pl);
    free(want), free(got), free(qh), free(kh);
}
