/* Plans, on either backend: a decode plan serving a whole generation loop (keys and offsets per run)
 * against the fp64 path, device buffers between NaN canaries; every invalid description and step
 * (nothing run, output untouched); a plan that outlives the arrays its description pointed to; one
 * plan run from four threads (on the context's queue) bitwise equal to a lone run. The OpenCL
 * program's host-kernel contract is tests/opencl/test_plan.c's. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


TestSuite(plan, .init = th_ctx_init, .fini = th_ctx_fini);

enum { B = 2, HQ = 8, HKV = 2, D = 64, MAXK = 300 };

/* Host data of a decode problem: Q [B,HQ,1,D], a K cache [B,HKV,MAXK,D] (both f32, BHSD), their
 * device buffers (between canaries) and the output's. */
typedef struct {
    float q[B * HQ * D], k[B * HKV * MAXK * D];
    ropeqk_tensor tq, tk, to;
    dm_buf *bq, *bk, *bo;
} dproblem;

static void dproblem_make(dproblem *p, uint64_t seed)
{
    cr_log_info("decode problem seed %llu", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof p->q / 4; i++) p->q[i] = (float)rqs_uniform(&seed);
    for (size_t i = 0; i < sizeof p->k / 4; i++) p->k[i] = (float)rqs_uniform(&seed);
    p->tq = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, 1, D);
    p->tk = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, MAXK, D);
    p->to = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, 1, MAXK);
    cr_assert_eq(dm_create(th_ctx, sizeof p->q, p->q, true, &p->bq), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    cr_assert_eq(dm_create(th_ctx, sizeof p->k, p->k, true, &p->bk), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    cr_assert_eq(dm_create(th_ctx, (size_t)B * HQ * MAXK * 4, NULL, true, &p->bo), ROPEQK_SUCCESS, "%s",
                 ropeqk_last_error());
}

static void dproblem_free(dproblem *p)
{
    dm_free(p->bq);
    dm_free(p->bk);
    dm_free(p->bo);
}

static ropeqk_args dargs(const dproblem *p) { return (ropeqk_args){.q = dm_whole(p->bq), .k = dm_whole(p->bk), .out = dm_whole(p->bo)}; }

/* Runs one step and checks its n keys against the fp64 path on views of the same memory; keys past
 * n stay NaN, the inputs and every canary unchanged. */
static void check_step(ropeqk_plan *pl, dproblem *p, const ropeqk_params *par, int64_t n, int64_t qoff, int64_t koff)
{
    cr_assert_eq(dm_fill(p->bo, 0xFF), ROPEQK_SUCCESS); /* NaN */
    ropeqk_args a = dargs(p);
    ropeqk_step s = {.n_keys = n, .q_pos_offset = qoff, .k_pos_offset = koff};
    ropeqk_status st = rqs_plan_run_wait(pl, &a, &s);
    cr_assert_eq(st, ROPEQK_SUCCESS, "n %lld: %s: %s", (long long)n, ropeqk_status_string(st),
                 ropeqk_last_error());
    static float out[B * HQ * MAXK];
    static double ref[B * HQ * MAXK];
    cr_assert_eq(dm_read(p->bo, out), ROPEQK_SUCCESS);
    bool intact = false;
    cr_assert_eq(dm_check(p->bq, p->q, &intact), ROPEQK_SUCCESS);
    cr_expect(intact, "n %lld: Q or its canaries changed", (long long)n);
    cr_assert_eq(dm_check(p->bk, p->k, &intact), ROPEQK_SUCCESS);
    cr_expect(intact, "n %lld: K or its canaries changed", (long long)n);
    cr_assert_eq(dm_check(p->bo, NULL, &intact), ROPEQK_SUCCESS);
    cr_expect(intact, "n %lld: a canary around the output changed", (long long)n);
    ropeqk_params rp = *par;
    rp.q_pos_offset = qoff;
    rp.k_pos_offset = koff;
    ropeqk_tensor k = p->tk, o = p->to, o64 = p->to;
    k.ne[2] = o.ne[3] = o64.ne[3] = n;
    o64.dtype = ROPEQK_F64;
    for (int i = 0; i < 4; i++)
        o64.nb[i] = o.nb[i] * 2;
    cr_assert_eq(ropeqk_scores_ref(&rp, &p->tq, p->q, &k, p->k, NULL, NULL, &o64, ref), ROPEQK_SUCCESS);
    double err = 0;
    int64_t mism = 0;
    cr_assert_eq(ropeqk_max_error(&rp, &p->tq, p->q, &k, p->k, &o, out, &o64, ref, &err, &mism), ROPEQK_SUCCESS);
    cr_expect(err <= 1e-5, "n %lld, offsets %lld/%lld: max error %.3g", (long long)n, (long long)qoff,
              (long long)koff, err);
    cr_expect_eq(mism, 0, "n %lld: mask mismatches", (long long)n);
    for (int64_t r = 0; r < B * HQ; r++) /* keys past n untouched */
        for (int64_t j = n; j < MAXK; j++)
            cr_assert(isnan(out[r * MAXK + j]), "n %lld: key %lld of row %lld written", (long long)n, (long long)j,
                      (long long)r);
}

/* One plan for a whole generation loop, with both pair layouts, under the context's profile (the
 * CPU decode kernel, or the GPU profile's score kernel). */
Test(plan, decode_plan_serves_a_generation_loop)
{
    static dproblem p;
    dproblem_make(&p, 20261123);
    for (int lay = 0; lay < 2; lay++) {
        ropeqk_params par;
        ropeqk_default_params(&par);
        par.layout = (ropeqk_layout)lay;
        par.causal = 1;
        par.window = lay ? 200 : 0;
        par.scaling.type = ROPEQK_SCALING_YARN;
        par.scaling.factor = 4;
        par.scaling.original_max_position = 4096;
        ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = par, .q = p.tq, .k = p.tk, .out = p.to,
                              .max_keys = MAXK};
        ropeqk_plan *pl = NULL;
        cr_assert_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        /* tokens appended one by one at large positions; a shifted context (offsets change) too */
        static const int64_t steps[][3] = {{1, 1000000, 1000000}, {2, 1000001, 1000000}, {37, 1000036, 1000000},
                                           {255, 1000254, 1000000}, {300, 1000299, 1000000}, {300, 299, 0},
                                           {129, 500, 400}};
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
            check_step(pl, &p, &par, steps[i][0], steps[i][1], steps[i][2]);
        ropeqk_plan_destroy(pl);
    }
    dproblem_free(&p);
}

/* Every bad description or step: a specific status, nothing created, nothing written. */
Test(plan, invalid_descriptions_and_steps)
{
    static dproblem p;
    dproblem_make(&p, 5);
    ropeqk_plan_desc good = {.op = ROPEQK_OP_SCORES, .q = p.tq, .k = p.tk, .out = p.to, .max_keys = MAXK};
    ropeqk_default_params(&good.params);
    ropeqk_plan *pl = (ropeqk_plan *)1;
    ropeqk_plan_desc d = good;
    d.op = (ropeqk_op)9;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(pl);
    d = good;
    d.positions = (ropeqk_positions)3;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    d = good;
    d.max_keys = MAXK - 1;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_ERR_BAD_SHAPE);
    d = good;
    d.max_keys = -1;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    d = good;
    d.params.scaling.type = ROPEQK_SCALING_DYNAMIC;
    d.params.scaling.factor = 2;
    d.params.scaling.original_max_position = 64;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_ERR_BAD_SCALING, "decode plan, DYNAMIC, no seq_len");
    d.params.scaling.seq_len = 1000;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    ropeqk_plan_destroy(pl);
    d = good;
    d.params.rotary_dim = 3;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_ERR_BAD_ROTARY_DIM);
    cr_expect_eq(ropeqk_plan_create(NULL, &good, &pl), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_plan_create(th_ctx, NULL, &pl), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_plan_create(th_ctx, &good, NULL), ROPEQK_ERR_NULL_POINTER);

    cr_assert_eq(ropeqk_plan_create(th_ctx, &good, &pl), ROPEQK_SUCCESS);
    ropeqk_plan_desc fixed_d = good;
    fixed_d.max_keys = 0;
    ropeqk_plan *fixed = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &fixed_d, &fixed), ROPEQK_SUCCESS);
    static float canary[B * HQ * MAXK];
    for (size_t i = 0; i < sizeof canary / 4; i++)
        canary[i] = 12345.0f;
    cr_assert_eq(dm_write(p.bo, 0, canary, sizeof canary), ROPEQK_SUCCESS);
    dm_buf *small = NULL, *pos = NULL;
    cr_assert_eq(dm_create(th_ctx, (size_t)B * HKV * 100 * D * 4, NULL, false, &small), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, 4 * MAXK, NULL, false, &pos), ROPEQK_SUCCESS);
    ropeqk_args a = dargs(&p);
    ropeqk_step s = {.n_keys = 10, .q_pos_offset = 9, .k_pos_offset = 0};
    struct {
        ropeqk_plan *pl;
        ropeqk_args a;
        ropeqk_step s;
        bool has_step;
        ropeqk_status want;
        const char *what;
    } cases[] = {
        {pl, a, s, false, ROPEQK_ERR_NULL_POINTER, "decode plan without a step"},
        {fixed, a, s, true, ROPEQK_ERR_BAD_PARAM, "fixed plan with a step"},
        {pl, a, {0, 9, 0}, true, ROPEQK_ERR_BAD_PARAM, "n_keys 0"},
        {pl, a, {MAXK + 1, 9, 0}, true, ROPEQK_ERR_BAD_PARAM, "n_keys past max_keys"},
        {pl, a, {10, INT32_MAX, 0}, true, ROPEQK_SUCCESS, "q offset at INT32_MAX (legal)"},
        {pl, a, {10, (int64_t)INT32_MAX + 1, 0}, true, ROPEQK_ERR_POSITION_RANGE, "q offset past int32"},
        {pl, a, {10, 0, (int64_t)INT32_MAX - 8}, true, ROPEQK_ERR_POSITION_RANGE, "last key position past int32"},
        {pl, {.q = a.q, .k = dm_whole(small), .out = a.out}, {101, 200, 100}, true, ROPEQK_ERR_BUFFER_TOO_SMALL,
         "K cache shorter than n_keys"},
        {pl, {.q = a.q, .k = a.k, .k_pos = dm_whole(pos), .out = a.out}, s, true, ROPEQK_ERR_BAD_PARAM,
         "positions to an offsets plan"},
        {pl, {.q = a.q, .k = a.k}, s, true, ROPEQK_ERR_NULL_POINTER, "no output buffer"},
        {pl, {.q = a.q, .k = a.k, .out = dm_whole(p.bk)}, s, true, ROPEQK_ERR_OVERLAP, "output over K"},
        {NULL, a, s, true, ROPEQK_ERR_NULL_POINTER, "no plan"},
    };
    /* a refused call still submits (OpenCL: finishes the queue), and on OpenCL hands back no event */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ropeqk_status st = rqs_plan_run_wait(cases[i].pl, &cases[i].a, cases[i].has_step ? &cases[i].s : NULL);
        cr_expect_eq(st, cases[i].want, "%s: %d (%s) %s", cases[i].what, st, ropeqk_status_string(st),
                     ropeqk_last_error());
        if (st == ROPEQK_SUCCESS) /* rewrite the canary the legal call overwrote */
            cr_assert_eq(dm_write(p.bo, 0, canary, sizeof canary), ROPEQK_SUCCESS);
    }
    static float out[B * HQ * MAXK];
    cr_assert_eq(dm_read(p.bo, out), ROPEQK_SUCCESS);
    for (size_t i = 0; i < sizeof out / 4; i++)
        cr_assert_eq(out[i], canary[i], "output element %zu changed by a refused call", i);
    ropeqk_plan_destroy(NULL);
    ropeqk_plan_destroy(pl);
    ropeqk_plan_destroy(fixed);
    dm_free(small);
    dm_free(pos);
    dproblem_free(&p);
}

/* The description's factor arrays may be freed once the plan exists. */
Test(plan, plan_outlives_its_description)
{
    static dproblem p;
    dproblem_make(&p, 9);
    ropeqk_params par;
    ropeqk_default_params(&par);
    par.layout = ROPEQK_HALF_SPLIT;
    par.scaling.type = ROPEQK_SCALING_LONGROPE;
    par.scaling.original_max_position = 4096;
    par.scaling.seq_len = 8192;
    double *lf = malloc(D / 2 * sizeof *lf), *sf = malloc(D / 2 * sizeof *sf);
    for (int i = 0; i < D / 2; i++) {
        lf[i] = 1.0 + 0.25 * i;
        sf[i] = 1.0 + 0.01 * i;
    }
    par.scaling.long_factor = lf;
    par.scaling.short_factor = sf;
    par.scaling.n_long_factor = par.scaling.n_short_factor = D / 2;
    ropeqk_plan_desc *d = malloc(sizeof *d);
    *d = (ropeqk_plan_desc){.op = ROPEQK_OP_SCORES, .params = par, .q = p.tq, .k = p.tk, .out = p.to,
                            .max_keys = MAXK};
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    memset(d, 0xff, sizeof *d);
    free(d);
    double *keep_l = malloc(D / 2 * sizeof *keep_l), *keep_s = malloc(D / 2 * sizeof *keep_s);
    memcpy(keep_l, lf, D / 2 * sizeof *lf);
    memcpy(keep_s, sf, D / 2 * sizeof *sf);
    for (int i = 0; i < D / 2; i++)
        lf[i] = sf[i] = -7.0; /* garbage, then gone */
    free(lf);
    free(sf);
    par.scaling.long_factor = keep_l;
    par.scaling.short_factor = keep_s;
    check_step(pl, &p, &par, 77, 6000, 5924);
    ropeqk_plan_destroy(pl);
    free(keep_l);
    free(keep_s);
    dproblem_free(&p);
}

/* ---- one plan, several threads ---------------------------------------------------------------- */
typedef struct {
    ropeqk_plan *pl;
    dproblem *p;
} tharg;

/* Runs the plan (on the context's queue, from the calling thread) with key counts changing every
 * call, the full MAXK last. */
static ropeqk_status enqueue_loop(dm_buf *out, int iters, void *user)
{
    tharg *t = user;
    ropeqk_args a = dargs(t->p);
    a.out = dm_whole(out);
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < iters && !st; i++) {
        ropeqk_step s = {.n_keys = 1 + (i * 37) % MAXK, .q_pos_offset = 5000, .k_pos_offset = 4800};
        if (i == iters - 1)
            s.n_keys = MAXK;
        st = rqs_plan_run_wait(t->pl, &a, &s);
    }
    return st;
}

Test(plan, one_plan_enqueued_from_four_threads)
{
    static dproblem p;
    dproblem_make(&p, 44);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .q = p.tq, .k = p.tk, .out = p.to, .max_keys = MAXK};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    tharg t = {NULL, &p};
    cr_assert_eq(ropeqk_plan_create(th_ctx, &d, &t.pl), ROPEQK_SUCCESS);
    th_expect_threads_match_lone_run(th_ctx, (size_t)B * HQ * MAXK * 4, 150, enqueue_loop, &t);
    ropeqk_plan_destroy(t.pl);
    dproblem_free(&p);
}
