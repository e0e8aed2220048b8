/* The GPU profile's attention kernel (cl/attention_gpu.cl, qk_attention_gpu_*): its knobs through
 * the API and the environment, the fallback to qk_attention_* (a shape the device cannot take), and
 * five kernel shapes against the fp64 path on cases cut to hit its edges on purpose: Sq, Sk and the
 * G*Sq rows of a KV head not multiples of the tile, GQA 1/4/8 and MQA, causal with offsets (rows
 * before the first key fully masked: O = 0, LSE = -inf), sliding windows with and without causal,
 * per-token positions with repeats, f16/bf16 inputs and outputs, strided views (BSHD, padded rows
 * and heads), Dv != D, Dv not a multiple of 4, Dv 256 (several column blocks: S recomputed per
 * block), head dims not a multiple of the step or of 4, decode-shaped rows, and every key masked.
 * Half of the runs go through a plan on device buffers whose bytes outside the views are checked
 * afterwards (canaries), half through ropeqk_attention(). On pocl the kernels run on the CPU, one
 * work-group in lock-step: this checks what they compute (local-memory races are oclgrind's job,
 * see docs/api.md, Tuning), not how fast. Each Criterion test runs in its own process, so
 * setenv() here touches no other test. */
#include "harness.h"
#include "ropeqk_opencl.h"
#include "rng.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void no_platform_skip(void)
{
    th_skip_without_device("the GPU attention kernel is OpenCL's");
    unsetenv("ROPEQK_PROFILE"); /* the profile is chosen per test through the API */
}

TestSuite(attn_gpu, .init = no_platform_skip, .fini = th_leak_check, .timeout = 900);

static ropeqk_ctx *ga_ctx(int32_t bm, int32_t bn, int32_t tk, int32_t rb, int32_t dv)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.tuning.profile = ROPEQK_PROFILE_GPU;
    cp.tuning.attn_tile = bm;
    cp.tuning.attn_keys = bn;
    cp.tuning.attn_tk = tk;
    cp.tuning.attn_rb = rb;
    cp.tuning.attn_dv = dv;
    ropeqk_ctx *x = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &x);
    cr_assert_eq(st, ROPEQK_SUCCESS, "ropeqk_ctx_create: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    return x;
}

/* The context builds the kernel with this shape (bm 0: it is off), and reads it back. */
static void expect_ga(ropeqk_ctx *x, int bm, int bn, int tk, int rb, int dv)
{
    ropeqk_tuning got;
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    const char *o = ropeqk_ctx_build_options(x);
    if (bm > 0) {
        char want[128];
        snprintf(want, sizeof want, "-DRQ_GA_BM=%d -DRQ_GA_BN=%d -DRQ_GA_TK=%d -DRQ_GA_RB=%d -DRQ_GA_DV=%d", bm, bn, tk,
                 rb, dv);
        cr_expect(strstr(o, want) != NULL, "want %s in %s", want, o);
        cr_expect(got.attn_tile == bm && got.attn_keys == bn && got.attn_tk == tk && got.attn_rb == rb &&
                      got.attn_dv == dv,
                  "%d %d %d %d %d", got.attn_tile, got.attn_keys, got.attn_tk, got.attn_rb, got.attn_dv);
    } else {
        cr_expect(strstr(o, "RQ_GA_") == NULL, "the GPU attention kernel is off: %s", o);
        cr_expect_eq(got.attn_tile, -1, "off reads back as -1, got %d", got.attn_tile);
    }
}

Test(attn_gpu, profile_defaults_and_switching_off)
{
    ropeqk_ctx *x = ga_ctx(0, 0, 0, 0, 0);
    expect_ga(x, 64, 64, 16, 4, 128); /* the GPU profile's defaults (src/core/tuning.c): qk_attention_fa2_* */
    ropeqk_ctx_destroy(x);

    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.tuning.profile = ROPEQK_PROFILE_CPU; /* the CPU profile keeps qk_attention_* alone */
    cr_assert_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_SUCCESS);
    expect_ga(x, 0, 0, 0, 0, 0);
    ropeqk_ctx_destroy(x);

    x = ga_ctx(-1, 0, 0, 0, 0);
    expect_ga(x, 0, 0, 0, 0, 0);
    ropeqk_ctx_destroy(x);

    setenv("ROPEQK_ATTN_TILE", "0", 1); /* the environment wins over the API */
    x = ga_ctx(64, 0, 0, 0, 0);
    expect_ga(x, 0, 0, 0, 0, 0);
    ropeqk_ctx_destroy(x);
    setenv("ROPEQK_ATTN_TILE", "64", 1);
    setenv("ROPEQK_ATTN_KEYS", "32", 1);
    setenv("ROPEQK_ATTN_TK", "8", 1);
    setenv("ROPEQK_ATTN_RB", "4", 1);
    setenv("ROPEQK_ATTN_DV", "64", 1);
    x = ga_ctx(16, 16, 4, 1, 16);
    expect_ga(x, 64, 32, 8, 4, 64);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "ROPEQK_ATTN_TILE") != NULL, "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
}

Test(attn_gpu, malformed_values_and_shapes_are_errors)
{
    /* {tile, keys, tk, rb, dv}: single values out of their sets, then combinations the kernel's
     * #error refuses (a step not dividing the keys, rows per work-item not dividing the rows, V dims
     * not a multiple of the keys) */
    static const int32_t api[][5] = {{24, 0, 0, 0, 0},  {256, 0, 0, 0, 0}, {-2, 0, 0, 0, 0},  {0, 48, 0, 0, 0},
                                     {0, 8, 0, 0, 0},   {0, 0, 6, 0, 0},   {0, 0, 68, 0, 0},  {0, 0, 0, 3, 0},
                                     {0, 0, 0, 16, 0},  {0, 0, 0, 0, 24},  {0, 0, 0, 0, 272}, {0, 32, 64, 0, 0},
                                     {0, 0, 0, 0, 96},  {0, 64, 24, 0, 0}};
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++) {
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.tuning.profile = ROPEQK_PROFILE_GPU;
        cp.tuning.attn_tile = api[i][0];
        cp.tuning.attn_keys = api[i][1];
        cp.tuning.attn_tk = api[i][2];
        cp.tuning.attn_rb = api[i][3];
        cp.tuning.attn_dv = api[i][4];
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        cr_expect_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_ERR_BAD_CONFIG, "case %zu", i);
        cr_expect_null(x, "case %zu", i);
    }
    static const char *const env[][2] = {{"ROPEQK_ATTN_TILE", "48"}, {"ROPEQK_ATTN_TILE", "-1"}, {"ROPEQK_ATTN_KEYS", "8"},
                                         {"ROPEQK_ATTN_TK", "10"},   {"ROPEQK_ATTN_TK", "x"},     {"ROPEQK_ATTN_RB", "5"},
                                         {"ROPEQK_ATTN_DV", "40"},   {"ROPEQK_ATTN_DV", "512"},   {"ROPEQK_ATTN_TK", "128"}};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        setenv(env[i][0], env[i][1], 1);
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        cr_expect_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_ERR_BAD_CONFIG, "%s='%s'", env[i][0], env[i][1]);
        cr_expect_null(x);
        cr_expect(strstr(ropeqk_last_error(), env[i][0]) != NULL, "message '%s'", ropeqk_last_error());
        unsetenv(env[i][0]);
    }
    /* a combination set through the environment names the variables */
    setenv("ROPEQK_ATTN_KEYS", "16", 1);
    setenv("ROPEQK_ATTN_TK", "32", 1);
    ropeqk_ctx *x = (ropeqk_ctx *)1;
    cr_expect_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_ERR_BAD_CONFIG);
    cr_expect(strstr(ropeqk_last_error(), "ROPEQK_ATTN_TK") && strstr(ropeqk_last_error(), "ROPEQK_ATTN_KEYS"), "%s",
              ropeqk_last_error());
    unsetenv("ROPEQK_ATTN_KEYS");
    unsetenv("ROPEQK_ATTN_TK");
}

/* ---- attention cases against the fp64 path ---------------------------------------------------- */

typedef struct {
    const char *what;
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    int32_t R;                    /* rotary dims, 0: D */
    ropeqk_layout layout;
    int causal;
    int64_t q_off, k_off, window;
    int32_t pos_max;              /* > 0: per-token positions drawn from [0, pos_max] */
    ropeqk_dtype in_dt, out_dt;   /* Q, K, V; O */
    th_layout in_lay, out_lay;
    bool plan;                    /* device buffers through a plan (else ropeqk_attention) */
} gcase;

static const gcase cases[] = {
    {"causal GQA 4, queries at the end of the keys: diagonal tiles, rows not a multiple of the tile", 1, 4, 1, 37, 70,
     64, 64, 0, ROPEQK_HALF_SPLIT, 1, 33, 0, 0, 0, ROPEQK_F32, ROPEQK_F32, TH_BHSD, TH_BHSD, true},
    {"GQA 8, rows before the first key fully masked (O 0, LSE -inf), the rest partly", 1, 8, 1, 40, 133, 32, 32, 0,
     ROPEQK_INTERLEAVED, 1, 20, 50, 0, 0, ROPEQK_F32, ROPEQK_F32, TH_BHSD, TH_BHSD, false},
    {"GQA 1, B 2, causal window, D 128, Dv 256 (column blocks), f16 output", 2, 2, 2, 70, 70, 128, 256, 0,
     ROPEQK_HALF_SPLIT, 1, 0, 0, 17, 0, ROPEQK_F32, ROPEQK_F16, TH_BHSD, TH_BHSD, true},
    {"per-token positions with repeats, causal + window, Dv 48 != D 80, bf16 in and out", 1, 4, 2, 33, 200, 80, 48, 0,
     ROPEQK_INTERLEAVED, 1, 0, 0, 50, 300, ROPEQK_BF16, ROPEQK_BF16, TH_BHSD, TH_BHSD, true},
    {"strided: BSHD inputs, padded output; D 18 and Dv 20 (not multiples of 4), partial rotary, f16 in, bf16 out", 1,
     8, 8, 9, 65, 18, 20, 10, ROPEQK_HALF_SPLIT, 0, 0, 0, 0, 0, ROPEQK_F16, ROPEQK_BF16, TH_BSHD, TH_PADDED, true},
    {"D 256, Dv 256, GQA 8, causal at the end of 300 keys, padded inputs", 1, 8, 1, 17, 300, 256, 256, 0,
     ROPEQK_HALF_SPLIT, 1, 283, 0, 0, 0, ROPEQK_F32, ROPEQK_F32, TH_PADDED, TH_BHSD, false},
    {"decode-shaped: one row of 32 query heads per 4 KV heads (G 8), 1000 keys, f16", 1, 32, 4, 1, 1000, 128, 128, 0,
     ROPEQK_HALF_SPLIT, 1, 999, 0, 0, 0, ROPEQK_F16, ROPEQK_F32, TH_BHSD, TH_BHSD, true},
    {"every key masked: keys after every query", 1, 4, 2, 12, 40, 64, 64, 0, ROPEQK_INTERLEAVED, 1, 0, 100, 0, 0,
     ROPEQK_F32, ROPEQK_F32, TH_BHSD, TH_BHSD, true},
    {"sliding window without causal: keys after a query count, whole tiles masked far before", 1, 2, 1, 64, 200, 64,
     96, 0, ROPEQK_HALF_SPLIT, 0, 130, 0, 5, 0, ROPEQK_F32, ROPEQK_F32, TH_BHSD, TH_PADDED, false},
    {"MQA, odd D 67 with partial rotary, 2049 keys, no mask, positions near 2^20", 1, 4, 1, 6, 2049, 67, 64, 32,
     ROPEQK_INTERLEAVED, 0, (1 << 20) - 6, (1 << 20) - 2049, 0, 0, ROPEQK_F32, ROPEQK_F32, TH_BHSD, TH_BHSD, true},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* One case's inputs, positions and fp64 reference, made once and run on every kernel shape. */
typedef struct {
    th_buf q, k, v;
    int32_t *qp, *kp;
    ropeqk_tensor o, l, o64, l64;
    double *o64d, *l64d;
    ropeqk_params p;
} gdata;

static void make_data(const gcase *c, uint64_t seed, gdata *g)
{
    memset(g, 0, sizeof *g);
    uint64_t rng = seed;
    int64_t nq[4] = {c->B, c->Hq, c->Sq, c->D}, nk[4] = {c->B, c->Hkv, c->Sk, c->D}, nv[4] = {c->B, c->Hkv, c->Sk, c->Dv};
    cr_assert(th_alloc(&g->q, c->in_dt, nq, c->in_lay) && th_alloc(&g->k, c->in_dt, nk, c->in_lay) &&
              th_alloc(&g->v, c->in_dt, nv, c->in_lay));
    th_fill_random(&g->q, &rng);
    th_fill_random(&g->k, &rng);
    th_fill_random(&g->v, &rng);
    ropeqk_default_params(&g->p);
    g->p.layout = c->layout;
    g->p.rotary_dim = c->R;
    g->p.causal = c->causal;
    g->p.window = c->window;
    g->p.q_pos_offset = c->q_off;
    g->p.k_pos_offset = c->k_off;
    g->p.base = 10000.0;
    if (c->pos_max > 0) {
        g->qp = malloc((size_t)c->Sq * 4);
        g->kp = malloc((size_t)c->Sk * 4);
        for (int64_t i = 0; i < c->Sq; i++)
            g->qp[i] = (int32_t)(rqs_rand(&rng) % (uint64_t)(c->pos_max + 1));
        for (int64_t j = 0; j < c->Sk; j++)
            g->kp[j] = (int32_t)(rqs_rand(&rng) % (uint64_t)(c->pos_max + 1));
    }
    g->o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Dv);
    g->l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1);
    g->l = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, 1);
    g->o64d = malloc(ropeqk_tensor_extent(&g->o64));
    g->l64d = malloc(ropeqk_tensor_extent(&g->l64));
    ropeqk_status st = ropeqk_attention_ref(&g->p, &g->q.t, g->q.data, &g->k.t, g->k.data, &g->v.t, g->v.data, g->qp,
                                            g->kp, &g->o64, g->o64d, &g->l64, g->l64d);
    cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_last_error(), c->what);
}

static void free_data(gdata *g)
{
    th_free(&g->q);
    th_free(&g->k);
    th_free(&g->v);
    free(g->qp);
    free(g->kp);
    free(g->o64d);
    free(g->l64d);
}

/* A device buffer holding the whole host buffer (the view and its guard bytes). */
static cl_mem upload(ropeqk_ctx *x, const void *data, size_t bytes)
{
    cl_int e;
    cl_mem m = clCreateBuffer(ropeqk_opencl_context(x), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)data, &e);
    cr_assert_eq(e, CL_SUCCESS);
    return m;
}

/* Runs case c on x and checks O, LSE and the bytes around the output view against the reference. */
static void run_case(ropeqk_ctx *x, const char *shape, const gcase *c, gdata *g)
{
    int64_t no[4] = {c->B, c->Hq, c->Sq, c->Dv};
    th_buf o;
    cr_assert(th_alloc(&o, c->out_dt, no, c->out_lay));
    size_t lb = ropeqk_tensor_extent(&g->l) + 64; /* 16 guard floats after the LSE view */
    float *ld = malloc(lb);
    for (size_t i = 0; i < lb / 4; i++)
        ld[i] = NAN;
    ropeqk_status st;
    if (!c->plan) {
        st = ropeqk_attention(x, &g->p, &g->q.t, g->q.data, &g->k.t, g->k.data, &g->v.t, g->v.data, g->qp, g->kp, &o.t,
                              o.data, &g->l, ld);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s: %s", shape, ropeqk_status_string(st), ropeqk_last_error(), c->what);
    } else {
        ropeqk_plan_desc pd = {.op = ROPEQK_OP_ATTENTION, .params = g->p, .q = g->q.t, .k = g->k.t, .v = g->v.t,
                               .out = o.t, .lse = g->l, .with_lse = 1,
                               .positions = g->qp ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
        ropeqk_plan *pl = NULL;
        st = ropeqk_plan_create(x, &pd, &pl);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: plan: %s: %s: %s", shape, ropeqk_status_string(st), ropeqk_last_error(),
                     c->what);
        cl_mem m[7] = {upload(x, g->q.data, g->q.bytes), upload(x, g->k.data, g->k.bytes), upload(x, g->v.data, g->v.bytes),
                       upload(x, o.data, o.bytes), upload(x, ld, lb), NULL, NULL};
        if (g->qp) {
            m[5] = upload(x, g->qp, (size_t)c->Sq * 4);
            m[6] = upload(x, g->kp, (size_t)c->Sk * 4);
        }
        ropeqk_opencl_args a = {.q = {m[0], 0}, .k = {m[1], 0}, .v = {m[2], 0}, .out = {m[3], 0}, .lse = {m[4], 0},
                                .q_pos = {m[5], 0}, .k_pos = {m[6], 0}};
        cl_command_queue qu = ropeqk_opencl_queue(x);
        st = ropeqk_opencl_plan_enqueue(pl, qu, &a, NULL, 0, NULL, NULL);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: enqueue: %s: %s", shape, ropeqk_last_error(), c->what);
        cr_assert_eq(clEnqueueReadBuffer(qu, m[3], CL_TRUE, 0, o.bytes, o.data, 0, NULL, NULL), CL_SUCCESS);
        cr_assert_eq(clEnqueueReadBuffer(qu, m[4], CL_TRUE, 0, lb, ld, 0, NULL, NULL), CL_SUCCESS);
        ropeqk_plan_destroy(pl);
        for (int i = 0; i < 7; i++)
            if (m[i])
                clReleaseMemObject(m[i]);
    }
    cr_expect(th_guards_intact(&o), "%s: bytes outside the output view changed: %s", shape, c->what);
    for (size_t i = ropeqk_tensor_extent(&g->l) / 4; i < lb / 4; i++)
        cr_expect(isnan(ld[i]), "%s: LSE written past its view: %s", shape, c->what);
    double err = 0, lerr = 0;
    int64_t mism = 0;
    st = ropeqk_attention_max_error(&g->v.t, g->v.data, &o.t, o.data, &g->o64, g->o64d, &g->l, ld, &g->l64, g->l64d,
                                    &err, &lerr, &mism);
    cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s", c->what);
    /* an f16/bf16 output adds its own rounding: half an ulp of values up to max |V| */
    double bound = 1e-5 + (c->out_dt == ROPEQK_F16 ? 0x1p-11 : c->out_dt == ROPEQK_BF16 ? 0x1p-8 : 0.0);
    cr_expect(err <= bound, "%s: O error %.3g > %.3g: %s", shape, err, bound, c->what);
    cr_expect(lerr <= 1e-5, "%s: LSE error %.3g: %s", shape, lerr, c->what);
    cr_expect_eq(mism, 0, "%s: %lld NaN or -inf mismatches: %s", shape, (long long)mism, c->what);
    th_free(&o);
    free(ld);
}

/* The kernel shapes {rows, keys, step, rows per work-item, V dims}: three of the register-blocked
 * qk_attention_fa2_* (4 or 8 rows a work-item): the default; the smallest (16 work-items, 4-dim
 * steps, 16-dim column blocks: 16 blocks at Dv 256); 8 rows a work-item (two row quads) of 128-key
 * tiles (32 key float4s a row of work-items) with 8-dim steps (16-dim ones take 49228 bytes, over
 * 48 KiB). Two of qk_attention_gpu_*: its old default (also the
 * fa2 shapes' kernel for head dims they do not take: D 18 or 67, Dv 20 here, D not a multiple of
 * their step, src/opencl/cl_attn.c) and the smallest of everything (64 work-items, 16-dim column
 * blocks). Each is a program build (seconds on pocl; the fa2 kernel's work-group compile there is
 * about as long as the older kernel's since every barrier is unconditional). */
static const int shapes[][5] = {{64, 64, 16, 4, 128}, {16, 16, 4, 4, 16}, {32, 128, 8, 8, 128},
                                {32, 64, 16, 2, 128}, {16, 16, 4, 1, 16}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void run_shapes(size_t c0, size_t c1)
{
    gdata g[NCASES];
    for (size_t c = c0; c < c1; c++)
        make_data(&cases[c], 4242 + c, &g[c]);
    for (size_t s = 0; s < NSHAPES; s++) {
        ropeqk_ctx *x = ga_ctx(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4]);
        char name[128];
        snprintf(name, sizeof name, "shape %d/%d/%d/%d/%d", shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                 shapes[s][4]);
        /* a device with less local memory or smaller work-groups than pocl (oclgrind: 32 KiB, 256
         * work-items by default) turns a shape off: its cases then check the fallback */
        if (strstr(ropeqk_ctx_config_source(x), "GPU attention kernel off")) {
            cr_log_warn("%s: %s", name, ropeqk_ctx_config_source(x));
            strcat(name, " (off: fallback)");
        } else {
            expect_ga(x, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4]);
        }
        for (size_t c = c0; c < c1; c++) /* every case on every shape, or each on every N-th (harness.h) */
            if ((s + c) % (size_t)th_stride() == 0)
                run_case(x, name, &cases[c], &g[c]);
        ropeqk_ctx_destroy(x);
    }
    for (size_t c = c0; c < c1; c++)
        free_data(&g[c]);
}

Test(attn_gpu, shapes_match_fp64_part1) { run_shapes(0, NCASES / 2); }
Test(attn_gpu, shapes_match_fp64_part2) { run_shapes(NCASES / 2, NCASES); }

/* A shape the device cannot take steps down at context creation to the largest of the kernel's own
 * shapes that fits (src/opencl/cl_tune.c, gshape), with the reason in the configuration source, and
 * attention comes from the GPU kernel still; the kernel switched off (attn_tile -1) runs the
 * fallback qk_attention_*, which a GPU-profile program carries only then (cl/program.cl). Made-up
 * work-group and local-memory limits are checked by test_tiled_fit. */
Test(attn_gpu, too_large_shapes_step_down_and_off_falls_back)
{
    /* the fa2 kernel's 128 x 128 tile of 8 rows a work-item with 64-dim steps: 236624 bytes */
    ropeqk_ctx *x = ga_ctx(128, 128, 64, 8, 256);
    expect_ga(x, 64, 64, 16, 4, 128);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "instead of 128/128/64/8/256") &&
                  strstr(ropeqk_ctx_config_source(x), "local bytes > "),
              "%s", ropeqk_ctx_config_source(x));
    gdata g;
    make_data(&cases[0], 77, &g);
    run_case(x, "stepped down", &cases[0], &g);
    ropeqk_ctx_destroy(x);
    x = ga_ctx(-1, 0, 0, 0, 0);
    expect_ga(x, 0, 0, 0, 0, 0);
    run_case(x, "off: qk_attention_*", &cases[0], &g);
    ropeqk_ctx_destroy(x);
    free_data(&g);
}

/* The fp64 reference really is what the cases claim: the fully masked rows exist. */
Test(attn_gpu, cases_cover_fully_masked_rows)
{
    int masked_cases = 0;
    for (size_t c = 0; c < NCASES; c++) {
        gdata g;
        make_data(&cases[c], 4242 + c, &g);
        size_t n = ropeqk_tensor_extent(&g.l64) / 8;
        int64_t inf = 0;
        for (size_t i = 0; i < n; i++)
            inf += isinf(g.l64d[i]) && g.l64d[i] < 0;
        masked_cases += inf > 0;
        if (c == 7)
            cr_expect_eq(inf, (int64_t)n, "every row of '%s' is masked", cases[c].what);
        free_data(&g);
    }
    cr_expect_geq(masked_cases, 2);
}
