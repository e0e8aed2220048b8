/* Plans: a decode plan serving a whole generation loop (keys and offsets per enqueue) against the
 * fp64 path, every invalid description and step (nothing enqueued, output untouched), a plan that
 * outlives the arrays its description pointed to, one plan enqueued from several threads, and the
 * host-kernel contract (argument names of the compiled kernels). */
#include "harness.h"
#include "../cl/contract.h"

#include <criterion/criterion.h>
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

TestSuite(plan, .init = setup, .fini = teardown);

enum { B = 2, HQ = 8, HKV = 2, D = 64, MAXK = 300 };

/* Host data of a decode problem: Q [B,HQ,1,D], a K cache [B,HKV,MAXK,D] (both f32, BHSD). */
typedef struct {
    float q[B * HQ * D], k[B * HKV * MAXK * D];
    ropeqk_tensor tq, tk, to;
    cl_mem bq, bk, bo;
} dproblem;

static void dproblem_make(dproblem *p, uint64_t seed)
{
    for (size_t i = 0; i < sizeof p->q / 4; i++) p->q[i] = (float)th_uniform(&seed);
    for (size_t i = 0; i < sizeof p->k / 4; i++) p->k[i] = (float)th_uniform(&seed);
    p->tq = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, 1, D);
    p->tk = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, MAXK, D);
    p->to = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, 1, MAXK);
    cl_context cx = ropeqk_opencl_context(ctx);
    cl_int e;
    p->bq = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof p->q, p->q, &e);
    p->bk = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof p->k, p->k, &e);
    p->bo = clCreateBuffer(cx, CL_MEM_READ_WRITE, (size_t)B * HQ * MAXK * 4, NULL, &e);
    cr_assert(p->bq && p->bk && p->bo);
}

static void dproblem_free(dproblem *p)
{
    clReleaseMemObject(p->bq);
    clReleaseMemObject(p->bk);
    clReleaseMemObject(p->bo);
}

/* Enqueues one step and checks its n keys against the fp64 path on views of the same memory. */
static void check_step(ropeqk_plan *pl, dproblem *p, const ropeqk_params *par, int64_t n, int64_t qoff, int64_t koff)
{
    cl_command_queue qu = ropeqk_opencl_queue(ctx);
    float nan = NAN;
    clEnqueueFillBuffer(qu, p->bo, &nan, 4, 0, (size_t)B * HQ * MAXK * 4, 0, NULL, NULL);
    ropeqk_opencl_args a = {.q = {p->bq, 0}, .k = {p->bk, 0}, .out = {p->bo, 0}};
    ropeqk_step s = {.n_keys = n, .q_pos_offset = qoff, .k_pos_offset = koff};
    cl_event ev = NULL;
    ropeqk_status st = ropeqk_opencl_plan_enqueue(pl, NULL, &a, &s, 0, NULL, &ev);
    cr_assert_eq(st, ROPEQK_SUCCESS, "n %lld: %s: %s", (long long)n, ropeqk_status_string(st), ropeqk_last_error());
    static float out[B * HQ * MAXK];
    static double ref[B * HQ * MAXK];
    cr_assert_eq(clEnqueueReadBuffer(qu, p->bo, CL_TRUE, 0, sizeof out, out, 1, &ev, NULL), CL_SUCCESS);
    clReleaseEvent(ev);
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
        cr_assert_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
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
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(pl);
    d = good;
    d.positions = (ropeqk_positions)3;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    d = good;
    d.max_keys = MAXK - 1;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_SHAPE);
    d = good;
    d.max_keys = -1;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    d = good;
    d.params.scaling.type = ROPEQK_SCALING_DYNAMIC;
    d.params.scaling.factor = 2;
    d.params.scaling.original_max_position = 64;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_SCALING, "decode plan, DYNAMIC, no seq_len");
    d.params.scaling.seq_len = 1000;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    ropeqk_plan_destroy(pl);
    d = good;
    d.params.rotary_dim = 3;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_ROTARY_DIM);
    cr_expect_eq(ropeqk_plan_create(NULL, &good, &pl), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_plan_create(ctx, NULL, &pl), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_plan_create(ctx, &good, NULL), ROPEQK_ERR_NULL_POINTER);

    cr_assert_eq(ropeqk_plan_create(ctx, &good, &pl), ROPEQK_SUCCESS);
    ropeqk_plan_desc fixed_d = good;
    fixed_d.max_keys = 0;
    ropeqk_plan *fixed = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &fixed_d, &fixed), ROPEQK_SUCCESS);
    cl_command_queue qu = ropeqk_opencl_queue(ctx);
    float canary = 12345.0f;
    clEnqueueFillBuffer(qu, p.bo, &canary, 4, 0, (size_t)B * HQ * MAXK * 4, 0, NULL, NULL);
    cl_context cx = ropeqk_opencl_context(ctx);
    cl_int e;
    cl_mem small = clCreateBuffer(cx, CL_MEM_READ_WRITE, (size_t)B * HKV * 100 * D * 4, NULL, &e);
    cl_mem pos = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4 * MAXK, NULL, &e);
    ropeqk_opencl_args a = {.q = {p.bq, 0}, .k = {p.bk, 0}, .out = {p.bo, 0}};
    ropeqk_step s = {.n_keys = 10, .q_pos_offset = 9, .k_pos_offset = 0};
    struct {
        ropeqk_plan *pl;
        ropeqk_opencl_args a;
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
        {pl, {.q = a.q, .k = {small, 0}, .out = a.out}, {101, 200, 100}, true, ROPEQK_ERR_BUFFER_TOO_SMALL,
         "K cache shorter than n_keys"},
        {pl, {.q = a.q, .k = a.k, .k_pos = {pos, 0}, .out = a.out}, s, true, ROPEQK_ERR_BAD_PARAM,
         "positions to an offsets plan"},
        {pl, {.q = a.q, .k = a.k, .out = {NULL, 0}}, s, true, ROPEQK_ERR_NULL_POINTER, "no output buffer"},
        {pl, {.q = a.q, .k = a.k, .out = {p.bk, 0}}, s, true, ROPEQK_ERR_OVERLAP, "output over K"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cl_event ev = NULL;
        ropeqk_status st = ropeqk_opencl_plan_enqueue(cases[i].pl, NULL, &cases[i].a,
                                                      cases[i].has_step ? &cases[i].s : NULL, 0, NULL, &ev);
        cr_expect_eq(st, cases[i].want, "%s: %s", cases[i].what, ropeqk_status_string(st));
        if (st == ROPEQK_SUCCESS) { /* rewrite the canary the legal call overwrote */
            clWaitForEvents(1, &ev);
            clEnqueueFillBuffer(qu, p.bo, &canary, 4, 0, (size_t)B * HQ * MAXK * 4, 0, NULL, NULL);
        } else {
            cr_expect_null(ev, "%s: an event for a refused call", cases[i].what);
        }
        if (ev)
            clReleaseEvent(ev);
    }
    static float out[B * HQ * MAXK];
    clEnqueueReadBuffer(qu, p.bo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    for (size_t i = 0; i < sizeof out / 4; i++)
        cr_assert_eq(out[i], canary, "output element %zu changed by a refused call", i);
    cr_expect_eq(ropeqk_opencl_plan_enqueue(NULL, NULL, &a, &s, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    ropeqk_plan_destroy(NULL);
    ropeqk_plan_destroy(pl);
    ropeqk_plan_destroy(fixed);
    clReleaseMemObject(small);
    clReleaseMemObject(pos);
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
    cr_assert_eq(ropeqk_plan_create(ctx, d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
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
    cl_mem out;
    int iters;
    ropeqk_status st;
} tharg;

static void *enqueue_loop(void *v)
{
    tharg *t = v;
    cl_int e;
    cl_command_queue qu = clCreateCommandQueue(ropeqk_opencl_context(ctx), ropeqk_opencl_device(ctx), 0, &e);
    t->st = e ? ROPEQK_ERR_BACKEND : ROPEQK_SUCCESS;
    ropeqk_opencl_args a = {.q = {t->p->bq, 0}, .k = {t->p->bk, 0}, .out = {t->out, 0}};
    for (int i = 0; i < t->iters && !t->st; i++) {
        ropeqk_step s = {.n_keys = 1 + (i * 37) % MAXK, .q_pos_offset = 5000, .k_pos_offset = 4800};
        if (i == t->iters - 1)
            s.n_keys = MAXK;
        t->st = ropeqk_opencl_plan_enqueue(t->pl, qu, &a, &s, 0, NULL, NULL);
    }
    if (qu) {
        clFinish(qu);
        clReleaseCommandQueue(qu);
    }
    return NULL;
}

Test(plan, one_plan_enqueued_from_four_threads)
{
    static dproblem p;
    dproblem_make(&p, 44);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .q = p.tq, .k = p.tk, .out = p.to, .max_keys = MAXK};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS);
    size_t bytes = (size_t)B * HQ * MAXK * 4;
    static float expect[B * HQ * MAXK], got[B * HQ * MAXK];
    tharg one = {pl, &p, p.bo, 1, 0};
    enqueue_loop(&one);
    cr_assert_eq(one.st, ROPEQK_SUCCESS);
    clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), p.bo, CL_TRUE, 0, bytes, expect, 0, NULL, NULL);
    pthread_t th[4];
    tharg args[4];
    for (int i = 0; i < 4; i++) {
        cl_int e;
        args[i] = (tharg){pl, &p, clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, &e), 150, 0};
        cr_assert(args[i].out);
        pthread_create(&th[i], NULL, enqueue_loop, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(args[i].st, ROPEQK_SUCCESS, "thread %d: %s", i, ropeqk_status_string(args[i].st));
        clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), args[i].out, CL_TRUE, 0, bytes, got, 0, NULL, NULL);
        cr_expect(memcmp(got, expect, bytes) == 0, "thread %d: last result differs from a lone run", i);
        clReleaseMemObject(args[i].out);
    }
    ropeqk_plan_destroy(pl);
    dproblem_free(&p);
}

/* ---- the host-kernel contract ----------------------------------------------------------------- */
#define ARG_NAME(kern, id, name) #name,
static const char *const rotate_names[] = {RQ_ROTATE_ARGS(ARG_NAME)};
static const char *const scores_names[] = {RQ_SCORES_ARGS(ARG_NAME)};
static const char *const decode_names[] = {RQ_DECODE_ARGS(ARG_NAME)};
static const char *const attn_names[] = {RQ_ATTN_ARGS(ARG_NAME)};
static const char *const paged_names[] = {RQ_PAGED_ARGS(ARG_NAME)};
static const char *const comb_names[] = {RQ_PCOMB_ARGS(ARG_NAME)};
static const char *const app_names[] = {RQ_PAPP_ARGS(ARG_NAME)};

/* Every compiled kernel's argument names (-cl-kernel-arg-info) in the order contract.h gives them. */
Test(plan, kernel_arguments_follow_the_contract)
{
    size_t len = 0;
    const char *src = ropeqk_opencl_program_source(&len);
    cl_int e;
    cl_program prog = clCreateProgramWithSource(ropeqk_opencl_context(ctx), 1, &src, &len, &e);
    cr_assert_eq(e, CL_SUCCESS);
    char opts[700];
    /* the GPU profile's tiled score, decode and attention kernels are in the program only where a
     * context chose them: ask for them here */
    const char *o = ropeqk_ctx_build_options(ctx);
    snprintf(opts, sizeof opts, "%s%s%s%s -cl-kernel-arg-info", o,
             strstr(o, "-DRQ_TILE=") ? "" : " -DRQ_TILE=16 -DRQ_RB=4 -DRQ_TK=4",
             strstr(o, "-DRQ_DECODE_GPU=") ? "" : " -DRQ_DECODE_GPU=1",
             strstr(o, "-DRQ_GA_BM=") ? "" : " -DRQ_GA_BM=16 -DRQ_GA_BN=16 -DRQ_GA_TK=4 -DRQ_GA_RB=1 -DRQ_GA_DV=16");
    cl_device_id dev = ropeqk_opencl_device(ctx);
    cr_assert_eq(clBuildProgram(prog, 1, &dev, opts, NULL, NULL), CL_SUCCESS);
    static const struct {
        const char *kernel;
        const char *const *names;
        cl_uint n;
    } ks[] = {
        {"rope_rotate_f32", rotate_names, RQ_ROT_NARGS},  {"rope_rotate_f16", rotate_names, RQ_ROT_NARGS},
        {"rope_rotate_bf16", rotate_names, RQ_ROT_NARGS}, {"qk_scores", scores_names, RQ_SC_NARGS},
        {"qk_scores_tiled", scores_names, RQ_SC_NARGS},
        {"qk_decode_gpu_f32", decode_names, RQ_DEC_NARGS}, {"qk_decode_gpu_f16", decode_names, RQ_DEC_NARGS},
        {"qk_decode_gpu_bf16", decode_names, RQ_DEC_NARGS},
        {"qk_decode_f32", decode_names, RQ_DEC_NARGS},    {"qk_decode_f16", decode_names, RQ_DEC_NARGS},
        {"qk_decode_bf16", decode_names, RQ_DEC_NARGS},
        {"qk_attention_f32", attn_names, RQ_AT_NARGS},    {"qk_attention_f16", attn_names, RQ_AT_NARGS},
        {"qk_attention_bf16", attn_names, RQ_AT_NARGS},   {"qk_attention_gpu_f32", attn_names, RQ_AT_NARGS},
        {"qk_attention_gpu_f16", attn_names, RQ_AT_NARGS}, {"qk_attention_gpu_bf16", attn_names, RQ_AT_NARGS},
        {"paged_attn_cpu", paged_names, RQ_PG_NARGS},
        {"paged_attn_gpu", paged_names, RQ_PG_NARGS},     {"paged_combine", comb_names, RQ_PC_NARGS},
        {"paged_append", app_names, RQ_PA_NARGS},
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        cl_kernel k = clCreateKernel(prog, ks[i].kernel, &e);
        cr_assert_eq(e, CL_SUCCESS, "%s", ks[i].kernel);
        cl_uint n = 0;
        clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof n, &n, NULL);
        cr_expect_eq(n, ks[i].n, "%s: %u arguments, contract.h says %u", ks[i].kernel, n, ks[i].n);
        for (cl_uint a = 0; a < n && a < ks[i].n; a++) {
            char name[64] = "";
            cr_assert_eq(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_NAME, sizeof name, name, NULL), CL_SUCCESS);
            cr_expect_str_eq(name, ks[i].names[a], "%s argument %u", ks[i].kernel, a);
        }
        clReleaseKernel(k);
    }
    clReleaseProgram(prog);
}
