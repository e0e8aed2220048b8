/* The dense attention decode path (src/opencl/cl_dense.c, src/vulkan/vk_dense.c: few-row attention calls
 * through the paged decode's kernels or shaders on the caller's dense K and V, keys rotated as they
 * are read) against the fp64 path,
 * on awkward shapes: Sq 1..8, B 1..3, GQA/MQA, causal with the queries below, inside and above the
 * keys (fully masked rows), sliding windows, BSHD and padded views of Q, K, V and O, Dv != D, partial
 * rotary and rotary offsets, positions near 1e6, both layouts, LSE, soft-capping, sinks, f32/f16/bf16
 * in and out, scaling variants, q position arrays (copied into the decode's metadata on the device),
 * k position arrays (the old path), plans and host-memory calls, and decode plans stepped over
 * changing n_keys and offsets. Every case runs twice: on the suite's context (the path taken, which
 * an internal counter of the library confirms: this test links the library statically) and on a
 * context made with ROPEQK_DENSE_DECODE=0 (the old path: K rotated into scratch first, the counter
 * unchanged); both are held to the attention metric's 1e-5 (plus an f16/bf16 output's rounding).
 * Also: ROPEQK_DENSE_DECODE's validation. Runs on the default device (dense_decode: OpenCL) and again
 * on Vulkan (dense_decode_vulkan: lavapipe in CI, with the validation layer; about 15 s on 2 cores).
 * The sweep's contexts set the limit themselves (8, and 0 for the old path): a Vulkan CPU device's
 * default is 2 (src/vulkan/vk_tune.c).
 * Seed: ROPEQK_TEST_SEED or 20261201, named in every failure message. */
#include "harness.h"
#include "../../src/core/path_runs.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(dense_decode, .init = th_ctx_init, .fini = th_ctx_fini, .timeout = 900);

/* calls run through the paged kernels so far, counted by either backend (src/core/path_runs.h: not
 * exported, the tests link the library statically; a test runs on one backend) */
static long long dense_runs(void) { return rq_path_runs(RQ_PATH_DENSE_DECODE); }

static uint64_t seed0(void) { return th_seed(20261201ull); }

typedef struct {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    ropeqk_params p;
    ropeqk_dtype in, out;
    th_layout lay, olay;
    bool qarr, karr, lse, plan;
    float sinks[64];
} dcase;

static void describe(const dcase *c, uint64_t seed, int idx, char *buf, size_t len)
{
    const ropeqk_params *p = &c->p;
    snprintf(buf, len,
             "case %d seed %llu: B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld R%d off%d %s in %d out %d lay %d/%d "
             "causal %d window %lld offs %lld/%lld%s%s softcap %g sinks %d scaling %d%s %s",
             idx, (unsigned long long)seed, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Sk, (long long)c->D, (long long)c->Dv, p->rotary_dim, p->rotary_offset,
             p->layout ? "half-split" : "interleaved", c->in, c->out, c->lay, c->olay, p->causal, (long long)p->window,
             (long long)p->q_pos_offset, (long long)p->k_pos_offset, c->qarr ? " q-array" : "", c->karr ? " k-array" : "",
             p->softcap, p->n_sinks, p->scaling.type, c->lse ? " +lse" : "", c->plan ? "plan" : "host call");
}

static dcase make_case(int idx, uint64_t seed)
{
    uint64_t rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(idx + 1));
    dcase c;
    memset(&c, 0, sizeof c);
    ropeqk_params *p = &c.p;
    ropeqk_default_params(p);
    static const int64_t Ds[] = {64, 16, 128, 80, 8, 48, 32};
    static const int64_t Sks[] = {1, 5, 63, 64, 65, 300, 1000};
    c.D = Ds[idx % 7];
    c.Dv = idx % 3 == 1 ? 24 : idx % 3 == 2 ? 2 * c.D + 16 : c.D;
    c.Sq = 1 + (int64_t)rqs_below(&rng, 8);
    c.Sk = Sks[rqs_below(&rng, 7)];
    c.B = 1 + (int64_t)rqs_below(&rng, 3);
    c.Hkv = 1 + (int64_t)rqs_below(&rng, 2);
    c.Hq = c.Hkv * (int64_t[]){1, 2, 4, 8}[rqs_below(&rng, 4)];
    p->layout = (idx / 2) % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    p->base = rqs_below(&rng, 2) ? 10000.0 : 1000000.0;
    p->conjugate = idx % 13 == 7;
    switch (idx % 5) { /* partial rotary; a rotary offset (a multiple of 16 or not) */
    case 1: p->rotary_dim = (int32_t)(2 * (1 + rqs_below(&rng, (uint64_t)c.D / 2))); break;
    case 3:
        p->rotary_dim = (int32_t)(2 * (1 + rqs_below(&rng, (uint64_t)c.D / 4)));
        p->rotary_offset = (int32_t)(idx % 2 ? 2 : 16) * (int32_t)rqs_below(&rng, (uint64_t)((c.D - p->rotary_dim) / (idx % 2 ? 2 : 16) + 1));
        break;
    default: break;
    }
    p->causal = rqs_below(&rng, 4) != 0;
    int64_t far = 1000000;
    switch (rqs_below(&rng, 5)) {
    case 0: p->k_pos_offset = 0, p->q_pos_offset = c.Sk - c.Sq; break;           /* decode at the end */
    case 1: p->k_pos_offset = 50, p->q_pos_offset = 20; break;                   /* below the keys: masked */
    case 2: p->k_pos_offset = far - c.Sk, p->q_pos_offset = far - c.Sq; break;   /* near 1e6 */
    case 3: p->k_pos_offset = 7, p->q_pos_offset = 7 + c.Sk + 30; break;         /* above every key */
    default: p->k_pos_offset = (int64_t)rqs_below(&rng, 1000), p->q_pos_offset = p->k_pos_offset + c.Sk / 2;
    }
    if (p->q_pos_offset < 0)
        p->q_pos_offset = 0;
    if (idx % 4 == 2)
        p->window = 1 + (int64_t)rqs_below(&rng, idx % 8 == 2 ? 40 : 300);
    if (idx % 6 == 1)
        p->softcap = (double[]){5.0, 30.0}[rqs_below(&rng, 2)];
    if (idx % 5 == 4) {
        for (int64_t h = 0; h < c.Hq; h++)
            c.sinks[h] = (float)(rqs_below(&rng, 5) == 0 ? 12.0 : 3.0 * rqs_uniform(&rng));
        p->sinks = c.sinks, p->n_sinks = (int32_t)c.Hq;
    }
    switch (idx % 9) {
    case 3: p->scaling.type = ROPEQK_SCALING_YARN, p->scaling.factor = 4, p->scaling.original_max_position = 4096; break;
    case 5: p->scaling.type = ROPEQK_SCALING_LINEAR, p->scaling.factor = 2; break;
    case 7: p->scaling.type = ROPEQK_SCALING_LLAMA3; break;
    default: break;
    }
    c.in = idx % 3 == 1 ? ROPEQK_F16 : idx % 7 == 5 ? ROPEQK_BF16 : ROPEQK_F32;
    c.out = idx % 4 == 1 ? ROPEQK_F16 : idx % 7 == 2 ? ROPEQK_BF16 : ROPEQK_F32;
    c.lay = (th_layout)(idx % 3);
    c.olay = (idx / 3) % 2 ? TH_PADDED : TH_BHSD;
    c.qarr = idx % 7 == 3;
    c.karr = idx % 11 == 6;
    c.lse = idx % 4 != 3;
    c.plan = idx % 2 == 0 || c.qarr;
    return c;
}

static int32_t *positions(int64_t S, int64_t off, bool scattered, uint64_t *rng)
{
    int32_t *a = malloc((size_t)S * sizeof *a);
    cr_assert(a);
    for (int64_t i = 0; i < S; i++)
        a[i] = scattered ? (int32_t)rqs_below(rng, 1u << 20) : (int32_t)(off + i);
    return a;
}

/* Runs c on ctx over the first nk keys (a decode plan's step when max_keys > 0) and checks it against
 * fp64; returns the number of dense decode runs the call made. */
static long long run_case(ropeqk_ctx *ctx, const dcase *c, const th_buf *q, const th_buf *k, const th_buf *v,
                          int64_t nk, int64_t max_keys, ropeqk_plan *pl, const char *d)
{
    const ropeqk_params *p = &c->p;
    uint64_t rng = (uint64_t)nk * 977 + 3;
    th_buf o, l;
    memset(&l, 0, sizeof l);
    cr_assert(th_alloc(&o, c->out, (int64_t[]){c->B, c->Hq, c->Sq, c->Dv}, c->olay));
    if (c->lse)
        cr_assert(th_alloc(&l, ROPEQK_F32, (int64_t[]){c->B, c->Hq, c->Sq, 1}, c->olay));
    ropeqk_tensor tk = k->t, tv = v->t;
    tk.ne[2] = tv.ne[2] = nk;
    int32_t *qp = c->qarr ? positions(c->Sq, p->q_pos_offset, c->karr || c->Sk % 2, &rng) : NULL;
    int32_t *kp = c->karr ? positions(nk, p->k_pos_offset, true, &rng) : NULL;
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Dv);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1);
    double *o64d = malloc(ropeqk_tensor_extent(&o64)), *l64d = malloc(ropeqk_tensor_extent(&l64));
    cr_assert(o64d && l64d);
    ropeqk_status st = ropeqk_attention_ref(p, &q->t, q->data, &tk, k->data, &tv, v->data, qp, kp, &o64, o64d,
                                            c->lse ? &l64 : NULL, c->lse ? l64d : NULL);
    cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_last_error(), d);
    long long before = dense_runs();
    if (pl || c->plan) {
        const void *host[7] = {q->data, k->data, v->data, o.data, qp, kp, c->lse ? l.data : NULL};
        const size_t bytes[7] = {q->bytes, k->bytes, v->bytes, o.bytes, (size_t)c->Sq * 4, (size_t)nk * 4, l.bytes};
        const bool used[7] = {true, true, true, true, c->qarr, c->karr, c->lse};
        dm_buf *m[7] = {NULL};
        for (int i = 0; i < 7; i++)
            if (used[i])
                cr_assert_eq(dm_create(ctx, bytes[i], host[i], true, &m[i]), ROPEQK_SUCCESS, "%s", d);
        ropeqk_plan *own = NULL;
        if (!pl) {
            ropeqk_plan_desc pd = {.op = ROPEQK_OP_ATTENTION, .params = *p, .q = q->t, .k = k->t, .v = v->t,
                                   .out = o.t, .lse = l.t, .with_lse = c->lse,
                                   .positions = c->qarr || c->karr ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
            st = ropeqk_plan_create(ctx, &pd, &own);
            cr_assert_eq(st, ROPEQK_SUCCESS, "plan: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
            before = dense_runs();
        }
        ropeqk_args a = {.q = dm_whole(m[0]), .k = dm_whole(m[1]), .v = dm_whole(m[2]), .out = dm_whole(m[3]),
                      .q_pos = dm_whole(m[4]), .k_pos = dm_whole(m[5]), .lse = dm_whole(m[6])};
        ropeqk_step step = {.n_keys = nk, .q_pos_offset = p->q_pos_offset, .k_pos_offset = p->k_pos_offset};
        st = rqs_plan_run_wait(pl ? pl : own, &a, max_keys > 0 ? &step : NULL);
        cr_assert_eq(st, ROPEQK_SUCCESS, "run: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
        cr_assert_eq(dm_read(m[3], o.data), ROPEQK_SUCCESS);
        if (c->lse)
            cr_assert_eq(dm_read(m[6], l.data), ROPEQK_SUCCESS);
        for (int i = 0; i < 7; i++) {
            bool intact = false;
            if (m[i])
                cr_expect(dm_check(m[i], i == 3 || i == 6 ? NULL : host[i], &intact) == ROPEQK_SUCCESS && intact,
                          "buffer %d: a canary or an input changed: %s", i, d);
            dm_free(m[i]);
        }
        ropeqk_plan_destroy(own);
    } else {
        st = ropeqk_attention(ctx, p, &q->t, q->data, &k->t, k->data, &v->t, v->data, qp, kp, &o.t, o.data,
                              c->lse ? &l.t : NULL, c->lse ? (float *)l.data : NULL);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
    }
    long long runs = dense_runs() - before;
    double err = 0, lerr = 0;
    int64_t mism = 0;
    st = ropeqk_attention_max_error(&tv, v->data, &o.t, o.data, &o64, o64d, c->lse ? &l.t : NULL,
                                    c->lse ? l.data : NULL, c->lse ? &l64 : NULL, c->lse ? l64d : NULL, &err, &lerr,
                                    &mism);
    cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s", d);
    double bound = 1e-5 + (c->out == ROPEQK_F16 ? 0x1p-11 : c->out == ROPEQK_BF16 ? 0x1p-8 : 0.0);
    cr_expect(err <= bound, "O error %.3g > %.3g (%s path): %s", err, bound, runs ? "dense decode" : "old", d);
    cr_expect(lerr <= 1e-5, "LSE error %.3g (%s path): %s", lerr, runs ? "dense decode" : "old", d);
    cr_expect_eq(mism, 0, "%lld NaN or -inf mismatches (%s path): %s", (long long)mism, runs ? "dense decode" : "old", d);
    cr_expect(th_guards_intact(&o), "output padding written: %s", d);
    if (c->lse)
        cr_expect(th_guards_intact(&l), "LSE padding written: %s", d);
    th_free(&o), th_free(&l);
    free(o64d), free(l64d), free(qp), free(kp);
    return runs;
}

/* A context with ROPEQK_DENSE_DECODE set to value (NULL: unset) for its creation only. */
static ropeqk_ctx *ctx_with(const char *value)
{
    if (value)
        setenv("ROPEQK_DENSE_DECODE", value, 1);
    ropeqk_ctx *x = NULL;
    ropeqk_status st = ropeqk_ctx_create(NULL, &x);
    unsetenv("ROPEQK_DENSE_DECODE");
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    return x;
}

static void inputs(const dcase *c, uint64_t seed, th_buf *q, th_buf *k, th_buf *v)
{
    uint64_t rng = seed * 0x2545F4914F6CDD1Dull + 5;
    cr_assert(th_alloc(q, c->in, (int64_t[]){c->B, c->Hq, c->Sq, c->D}, c->lay));
    cr_assert(th_alloc(k, c->in, (int64_t[]){c->B, c->Hkv, c->Sk, c->D}, c->lay));
    cr_assert(th_alloc(v, c->in, (int64_t[]){c->B, c->Hkv, c->Sk, c->Dv}, c->lay));
    th_fill_random(q, &rng), th_fill_random(k, &rng), th_fill_random(v, &rng);
}

#define N_CASES 160

static void sweep(int first, int step)
{
    uint64_t seed = seed0();
    cr_log_info("dense decode sweep from %d, seed %llu", first, (unsigned long long)seed);
    ropeqk_ctx *old = ctx_with("0"), *on = ctx_with("8");
    int fast = 0;
    for (int i = first; i < N_CASES; i += step * th_stride()) { /* every case, or every N-th (harness.h) */
        dcase c = make_case(i, seed);
        if (c.p.n_sinks)
            c.p.sinks = c.sinks; /* this copy's */
        char d[700];
        describe(&c, seed, i, d, sizeof d);
        th_buf q, k, v;
        inputs(&c, seed + (uint64_t)i, &q, &k, &v);
        long long runs = run_case(on, &c, &q, &k, &v, c.Sk, 0, NULL, d);
        /* taken unless the keys have positions of their own, or padded views of K and V with batch
         * entries whose pages cannot share numbers (src/core/dense_pages.c) */
        if (c.karr)
            cr_expect_eq(runs, 0, "k position arrays took the dense decode: %s", d);
        else if (c.lay != TH_PADDED || c.B == 1)
            cr_expect_eq(runs, 1, "the dense decode was not taken: %s", d);
        fast += runs > 0;
        cr_expect_eq(run_case(old, &c, &q, &k, &v, c.Sk, 0, NULL, d), 0, "ROPEQK_DENSE_DECODE=0 took it: %s", d);
        th_free(&q), th_free(&k), th_free(&v);
    }
    cr_log_info("%d cases through the dense decode", fast);
    ropeqk_ctx_destroy(old);
    ropeqk_ctx_destroy(on);
}

Test(dense_decode, sweep0) { sweep(0, 2); }
Test(dense_decode, sweep1) { sweep(1, 2); }

/* The sweep holds what the header promises. */
Test(dense_decode, coverage)
{
    int n[16] = {0};
    for (int i = 0; i < N_CASES; i++) {
        dcase c = make_case(i, seed0());
        n[0] += c.B > 1, n[1] += c.Hq > c.Hkv, n[2] += c.p.causal && c.p.q_pos_offset < c.p.k_pos_offset;
        n[3] += c.p.window > 0, n[4] += c.lay == TH_BSHD, n[5] += c.lay == TH_PADDED, n[6] += c.Dv != c.D;
        n[7] += c.p.rotary_dim > 0, n[8] += c.p.rotary_offset > 0, n[9] += c.p.k_pos_offset > 900000;
        n[10] += c.lse, n[11] += c.p.softcap > 0, n[12] += c.p.n_sinks > 0, n[13] += c.qarr, n[14] += c.karr;
        n[15] += c.Sq == 8;
    }
    for (int i = 0; i < 16; i++)
        cr_expect(n[i] >= 3, "property %d in %d cases only", i, n[i]);
}

/* One decode plan (max_keys) stepped over changing key counts and offsets, GQA, B 2, f16/bf16, causal,
 * with a window in half the plans: each step's pages and cuts come from that step's n_keys and
 * offsets. */
Test(dense_decode, decode_plan_steps)
{
    uint64_t seed = seed0();
    ropeqk_ctx *old = ctx_with("0"), *on = ctx_with("8"); /* 8: above the Vulkan CPU default of 2 */
    for (int variant = 0; variant < 4; variant++) {
        dcase c;
        memset(&c, 0, sizeof c);
        ropeqk_default_params(&c.p);
        c.B = 2, c.Hq = 8, c.Hkv = 2, c.Sq = variant % 2 ? 3 : 1, c.Sk = 700, c.D = 64, c.Dv = variant == 3 ? 40 : 64;
        c.in = variant == 2 ? ROPEQK_BF16 : ROPEQK_F16, c.out = ROPEQK_F32, c.lay = variant == 1 ? TH_BSHD : TH_BHSD;
        c.olay = TH_BHSD, c.lse = true, c.plan = true, c.p.causal = 1, c.p.layout = (ropeqk_layout)(variant % 2);
        c.p.base = 500000;
        c.p.window = variant >= 2 ? 90 : 0; /* a step's window start cuts its rows' pages too */
        th_buf q, k, v;
        inputs(&c, seed + (uint64_t)variant, &q, &k, &v);
        ropeqk_plan_desc pd = {.op = ROPEQK_OP_ATTENTION, .params = c.p, .q = q.t, .k = k.t, .v = v.t,
                               .out = ropeqk_tensor_bhsd(c.out, c.B, c.Hq, c.Sq, c.Dv),
                               .lse = ropeqk_tensor_bhsd(ROPEQK_F32, c.B, c.Hq, c.Sq, 1), .with_lse = true,
                               .max_keys = c.Sk};
        ropeqk_plan *pl[2] = {NULL, NULL};
        ropeqk_ctx *ctxs[2] = {on, old};
        for (int j = 0; j < 2; j++)
            cr_assert_eq(ropeqk_plan_create(ctxs[j], &pd, &pl[j]), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        static const int64_t nks[] = {1, 16, 64, 65, 130, 333, 699, 700};
        for (int s = 0; s < 8; s++) {
            int64_t nk = nks[s];
            c.p.k_pos_offset = s % 3 == 1 ? 1000000 - nk : 5 * s;
            c.p.q_pos_offset = c.p.k_pos_offset + nk - c.Sq + (s == 5 ? -40 : 0); /* one step below the last keys */
            char d[700];
            describe(&c, seed, 1000 * variant + s, d, sizeof d);
            for (int j = 0; j < 2; j++) {
                long long runs = run_case(ctxs[j], &c, &q, &k, &v, nk, c.Sk, pl[j], d);
                cr_expect_eq(runs, j == 0 ? 1 : 0, "context %d: %lld dense decode runs: %s", j, runs, d);
            }
        }
        ropeqk_plan_destroy(pl[0]);
        ropeqk_plan_destroy(pl[1]);
        th_free(&q), th_free(&k), th_free(&v);
    }
    ropeqk_ctx_destroy(old);
    ropeqk_ctx_destroy(on);
}

/* Sq above the context's limit runs the old path; ROPEQK_DENSE_DECODE raises or lowers the limit. */
Test(dense_decode, row_limit)
{
    uint64_t seed = seed0();
    dcase c = make_case(0, seed);
    c.p.sinks = NULL, c.p.n_sinks = 0, c.karr = c.qarr = false, c.plan = true, c.Sq = 6;
    c.lay = TH_BHSD;
    th_buf q, k, v;
    inputs(&c, seed, &q, &k, &v);
    char d[700];
    describe(&c, seed, 0, d, sizeof d);
    static const char *const env[3] = {"5", "6", NULL};
    long long want[3] = {0, 1, 1}; /* the default limit is 16; 2 on a Vulkan CPU device (vk_tune.c) */
    for (int i = 0; i < 3; i++) {
        ropeqk_ctx *x = ctx_with(env[i]);
        ropeqk_tuning t;
        cr_assert_eq(ropeqk_ctx_tuning(x, &t, NULL), ROPEQK_SUCCESS);
        if (!env[i])
            want[i] = t.dense_rows >= c.Sq;
        cr_expect_eq(run_case(x, &c, &q, &k, &v, c.Sk, 0, NULL, d), want[i], "ROPEQK_DENSE_DECODE=%s: %s",
                     env[i] ? env[i] : "(unset)", d);
        ropeqk_ctx_destroy(x);
    }
    th_free(&q), th_free(&k), th_free(&v);
}

/* A malformed or out-of-range value is refused with a message naming the variable. */
Test(dense_decode, bad_environment)
{
    static const char *const bad[] = {"yes", "-1", "", "1025", "8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ROPEQK_DENSE_DECODE", bad[i], 1);
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        ropeqk_status st = ropeqk_ctx_create(NULL, &x);
        unsetenv("ROPEQK_DENSE_DECODE");
        cr_expect_eq(st, ROPEQK_ERR_BAD_CONFIG, "'%s': status %d", bad[i], st);
        cr_expect_null(x, "'%s'", bad[i]);
        cr_expect(strstr(ropeqk_last_error(), "ROPEQK_DENSE_DECODE") != NULL, "'%s': %s", bad[i], ropeqk_last_error());
        if (st == ROPEQK_SUCCESS)
            ropeqk_ctx_destroy(x);
    }
}
