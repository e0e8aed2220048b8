/* The `demo` subcommand: a Llama-sized problem (Llama 3 8B attention shapes) on the default device,
 * timed, checked against the scalar fp64 path, optionally drawn; then its attention part at 16k
 * tokens (demo_attn.c). */
#include "cli.h"
#include "plot.h"
#include "clock.h"
#include "runwait.h"
#include "rng.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEMO_HQ 32
#define DEMO_HKV 8
#define DEMO_D 128
#define DEMO_BASE 500000.0

typedef struct {
    const char *plot, *device;
    int64_t tokens, runs, seed, attn_tokens, check_rows;
} demo_args;

/* Median wall time of `runs` device-resident calls on either backend (ropeqk.h's run API): one scores
 * plan made once, inputs uploaded once to device-local buffers, then per call ropeqk_plan_run and a
 * wait for its event (support/runwait.h), no host transfers. */
static ropeqk_status time_resident(cli_device *dev, const ropeqk_params *p, const ropeqk_tensor *qt, const float *q,
                                   const ropeqk_tensor *kt, const float *k, const ropeqk_tensor *ot, int64_t runs,
                                   double *median)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = *p, .q = *qt, .k = *kt, .out = *ot};
    ropeqk_plan *plan = NULL;
    ropeqk_buffer *qm = NULL, *km = NULL, *om = NULL;
    double *t = calloc((size_t)runs, sizeof *t);
    ropeqk_status st = t ? ROPEQK_SUCCESS : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (!st)
        st = ropeqk_plan_create(dev->ctx, &d, &plan);
    if (!st)
        st = rqs_buffer_make(dev->ctx, ropeqk_tensor_extent(qt), q, 0, &qm);
    if (!st)
        st = rqs_buffer_make(dev->ctx, ropeqk_tensor_extent(kt), k, 0, &km);
    if (!st)
        st = rqs_buffer_make(dev->ctx, ropeqk_tensor_extent(ot), NULL, 0, &om);
    ropeqk_args a = {.q = {qm, 0}, .k = {km, 0}, .out = {om, 0}};
    for (int64_t r = 0; r < runs && st == ROPEQK_SUCCESS; r++) {
        double t0 = rqs_now();
        st = rqs_plan_run_wait(plan, &a, NULL);
        t[r] = rqs_now() - t0;
    }
    if (st == ROPEQK_SUCCESS)
        *median = rqs_median(t, (size_t)runs);
    if (st == RQS_ERR_STRAY_EVENT) { /* a refused run handed back an event: the library's contract broken */
        cli_err("demo: on device: a refused run handed back an event (%s)", ropeqk_last_error());
        st = ROPEQK_ERR_BACKEND;
    }
    ropeqk_buffer_destroy(qm);
    ropeqk_buffer_destroy(km);
    ropeqk_buffer_destroy(om);
    ropeqk_plan_destroy(plan);
    free(t);
    return st;
}

/* Mean score against relative distance i - j for all-ones q and k (score depends on i - j only),
 * on the same device: RoPE's long-range decay. */
static ropeqk_status decay_curve(cli_device *dev, const ropeqk_params *p, int64_t T, double *curve)
{
    ropeqk_tensor qt = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, T, DEMO_D);
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, T, T);
    float *ones = malloc((size_t)T * DEMO_D * sizeof *ones);
    float *s = malloc((size_t)T * (size_t)T * sizeof *s);
    double *cnt = calloc((size_t)T, sizeof *cnt);
    ropeqk_status st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (ones && s && cnt) {
        for (int64_t x = 0; x < T * DEMO_D; x++)
            ones[x] = 1.0f;
        st = cli_device_scores(dev, p, &qt, ones, &qt, ones, NULL, NULL, &ot, s);
    }
    if (st == ROPEQK_SUCCESS) {
        for (int64_t d = 0; d < T; d++)
            curve[d] = 0.0;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j <= i; j++) {
                curve[i - j] += s[i * T + j];
                cnt[i - j] += 1.0;
            }
        for (int64_t d = 0; d < T; d++)
            curve[d] = cnt[d] > 0 ? curve[d] / cnt[d] : NAN;
    }
    free(ones);
    free(s);
    free(cnt);
    return st;
}

static int write_plot(cli_device *dev, const demo_args *a, const ropeqk_params *p, const float *scores)
{
    int64_t T = a->tokens;
    double *curve = malloc((size_t)T * sizeof *curve);
    if (!curve) {
        cli_err("demo: --plot: out of memory");
        return CLI_RUNTIME;
    }
    ropeqk_status st = decay_curve(dev, p, T, curve);
    if (st != ROPEQK_SUCCESS) {
        cli_lib_err("demo: --plot: decay curve", st, dev->ctx);
        free(curve);
        return CLI_RUNTIME;
    }
    char title[256], heat_title[128], note[768];
    snprintf(title, sizeof title, "ropeqk %s: RoPE + attention scores, half-split, base %g, causal", ropeqk_version(),
             DEMO_BASE);
    snprintf(heat_title, sizeof heat_title, "scores of head 0 (random q, k; seed %" PRId64 ")", a->seed);
    snprintf(note, sizeof note, "%" PRId64 " tokens, head dim %d, scale 1/sqrt(%d); computed on %s", T, DEMO_D,
             DEMO_D, dev->name);
    rqs_heat_plot pd = {
        .title = title,
        .heat = scores, /* head 0 of batch 0: the first T x T block */
        .rows = T,
        .cols = T,
        .heat_title = heat_title,
        .heat_xlabel = "key position j",
        .heat_ylabel = "query position i",
        .curve = curve,
        .npts = T,
        .curve_title = "score vs distance (q = k = all ones)",
        .curve_xlabel = "relative distance i - j",
        .curve_ylabel = "mean score",
        .note = note,
    };
    char err[512];
    int rc = CLI_OK;
    if (rqs_plot_heat(a->plot, &pd, err, sizeof err) != 0) {
        cli_err("demo: --plot: %s", err);
        rc = CLI_RUNTIME;
    } else {
        printf("plot        : %s\n", a->plot);
    }
    free(curve);
    return rc;
}

int cmd_demo(int argc, char **argv)
{
    demo_args a = {NULL, NULL, 1024, 5, 1234, 16384, 8};
    int attn_given = 0;
    const cli_opt opts[] = {
        {"--plot", OPT_STR, &a.plot, "FILE", "also draw head 0 and the decay curve (.png or .svg; default none)", 0,
         0, 0, NULL, NULL},
        {"--device", OPT_STR, &a.device, "SPEC", CLI_DEVICE_HELP, 0, 0, 0, NULL, NULL},
        {"--tokens", OPT_I64, &a.tokens, "N", "sequence length Sq = Sk (default 1024)", 0, 1, 8192, NULL, NULL},
        {"--runs", OPT_I64, &a.runs, "N", "timed warm runs (default 5)", 0, 1, 1000, NULL, NULL},
        {"--seed", OPT_I64, &a.seed, "N", "seed of the random inputs (default 1234)", 0, 0, INT64_MAX, NULL, NULL},
        {"--attention-tokens", OPT_I64, &a.attn_tokens, "N",
         "tokens of the attention part, 0 = skip it (default 16384; with --device ref: skipped unless given)", 0, 0,
         131072, NULL, &attn_given},
        {"--check-rows", OPT_I64, &a.check_rows, "N",
         "query rows of the attention part checked against fp64, per head (default 8)", 0, 1, 4096, NULL, NULL},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    bool help = false;
    int rc = cli_parse("demo", opts, nopts, argc, argv, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        cli_print_help(stdout, "ropeqk demo [--plot FILE] [--device SPEC] [--tokens N] [--attention-tokens N]",
                       "Llama-3-8B-sized attention scores: B=1, 32 query heads on 8 key/value heads, head dim\n"
                       "128, 1024 tokens, base 500000, half-split, causal, random inputs. Times the first call\n"
                       "(program build) and the median warm call, checks against the scalar fp64 path (exit\n"
                       "status 3 if the max error exceeds 1e-5 or a mask differs).\n"
                       "Then fused attention O = softmax(S) V on the same shapes at 16384 tokens (f16 Q, K, V):\n"
                       "its time, the process's peak memory beside the 32 GiB the f32 scores would need, and\n"
                       "--check-rows query rows of every head checked against the fp64 path (O and LSE within\n"
                       "1e-5, attention metric). About 5 minutes on 2 CPU cores (pocl); --attention-tokens N.",
                       opts, nopts);
        return CLI_OK;
    }
    if (a.plot) {
        char err[512];
        if (rqs_plot_check_path(a.plot, err, sizeof err) != 0) {
            cli_err("demo: --plot: %s", err);
            return rqs_plot_have_png() || !strstr(err, "libpng") ? CLI_USAGE : CLI_RUNTIME;
        }
    }
    const int64_t T = a.tokens;
    ropeqk_tensor qt = ropeqk_tensor_bhsd(ROPEQK_F32, 1, DEMO_HQ, T, DEMO_D);
    ropeqk_tensor kt = ropeqk_tensor_bhsd(ROPEQK_F32, 1, DEMO_HKV, T, DEMO_D);
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, 1, DEMO_HQ, T, T);
    size_t nq = (size_t)DEMO_HQ * T * DEMO_D, nk = (size_t)DEMO_HKV * T * DEMO_D;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *s = malloc(ropeqk_tensor_extent(&ot));
    cli_device dev;
    memset(&dev, 0, sizeof dev);
    if (!q || !k || !s) {
        cli_err("demo: out of memory");
        rc = CLI_RUNTIME;
        goto done;
    }
    uint64_t r = (uint64_t)a.seed;
    for (size_t x = 0; x < nq; x++)
        q[x] = (float)rqs_normal(&r);
    for (size_t x = 0; x < nk; x++)
        k[x] = (float)rqs_normal(&r);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = ROPEQK_HALF_SPLIT;
    p.base = DEMO_BASE;
    p.causal = 1;

    double t0 = rqs_now();
    rc = cli_device_open("demo", a.device, true, &dev);
    if (rc != CLI_OK)
        goto done;
    double t_ctx = rqs_now() - t0;
    printf("ropeqk %s demo: RoPE fused with attention scores\n", ropeqk_version());
    printf("device      : %s [%s]\n", dev.name, dev.why);
    printf("shapes      : Q [1,%d,%" PRId64 ",%d] f32, K [1,%d,%" PRId64 ",%d] f32 (GQA %d:1) -> scores [1,%d,%" PRId64
           ",%" PRId64 "] f32\n",
           DEMO_HQ, T, DEMO_D, DEMO_HKV, T, DEMO_D, DEMO_HQ / DEMO_HKV, DEMO_HQ, T, T);
    printf("rope        : half-split, rotary dim %d, base %g, scale 1/sqrt(%d), causal, positions 0..%" PRId64 "\n",
           DEMO_D, DEMO_BASE, DEMO_D, T - 1);
    printf("inputs      : N(0,1), seed %" PRId64 "\n", a.seed);
    if (!dev.ref)
        printf("context     : %.1f ms\n", 1e3 * t_ctx);
    fflush(stdout);

    double flop = 2.0 * DEMO_HQ * (double)T * (double)T * DEMO_D;
    t0 = rqs_now();
    ropeqk_status st = cli_device_scores(&dev, &p, &qt, q, &kt, k, NULL, NULL, &ot, s);
    double t_first = rqs_now() - t0;
    if (st != ROPEQK_SUCCESS) {
        cli_lib_err("demo: first call", st, dev.ctx);
        rc = CLI_RUNTIME;
        goto done;
    }
    printf("first call  : %.1f ms (includes program build)\n", 1e3 * t_first);
    double *t = calloc((size_t)a.runs, sizeof *t);
    if (!t) {
        cli_err("demo: out of memory");
        rc = CLI_RUNTIME;
        goto done;
    }
    for (int64_t i = 0; i < a.runs && st == ROPEQK_SUCCESS; i++) {
        t0 = rqs_now();
        st = cli_device_scores(&dev, &p, &qt, q, &kt, k, NULL, NULL, &ot, s);
        t[i] = rqs_now() - t0;
    }
    double t_warm = rqs_median(t, (size_t)a.runs);
    free(t);
    double t_res = 0.0;
    ropeqk_backend be = dev.ref ? ROPEQK_BACKEND_NONE : ropeqk_ctx_backend(dev.ctx);
    bool resident = be != ROPEQK_BACKEND_NONE; /* device-resident timing: either backend */
    if (st == ROPEQK_SUCCESS && resident)
        st = time_resident(&dev, &p, &qt, q, &kt, k, &ot, a.runs, &t_res);
    if (st != ROPEQK_SUCCESS) {
        cli_lib_err("demo: timed runs", st, dev.ctx);
        rc = CLI_RUNTIME;
        goto done;
    }
    printf("warm call   : %.1f ms median of %" PRId64 " (host in/out included), %.1f GFLOP/s\n", 1e3 * t_warm, a.runs,
           flop / t_warm * 1e-9);
    if (resident)
        printf("on device   : %.1f ms median of %" PRId64 " (data resident, a plan run per call, %s), %.1f GFLOP/s\n",
               1e3 * t_res, a.runs, be == ROPEQK_BACKEND_VULKAN ? "Vulkan" : "OpenCL", flop / t_res * 1e-9);
    printf("              (GFLOP/s = 2*B*Hq*Sq*Sk*D / time, masked half included)\n");
    fflush(stdout);

    double err = 0.0;
    int64_t mism = 0;
    t0 = rqs_now();
    st = cli_verify(&p, &qt, q, &kt, k, NULL, NULL, &ot, s, &err, &mism);
    if (st != ROPEQK_SUCCESS) {
        cli_lib_err("demo: scalar path", st, NULL);
        rc = CLI_RUNTIME;
        goto done;
    }
    bool pass = err <= CLI_TOLERANCE && mism == 0;
    printf("check       : max error %.3g (conventions metric, tolerance %g), mask mismatches %" PRId64
           " vs the scalar fp64 path (%.1f s)\n",
           err, CLI_TOLERANCE, mism, rqs_now() - t0);
    if (a.plot) {
        rc = write_plot(&dev, &a, &p, s);
        if (rc != CLI_OK)
            goto done;
    }
    if (dev.ref && !attn_given)
        printf("attention   : skipped on the scalar path (%" PRId64
               " tokens would take hours; pass --attention-tokens N)\n",
               a.attn_tokens);
    else if (a.attn_tokens == 0)
        printf("attention   : skipped (--attention-tokens 0)\n");
    else {
        fflush(stdout);
        free(q), free(k), free(s); /* the scores part's buffers: not part of the attention's footprint */
        q = k = s = NULL;
        rc = cli_demo_attention(&dev, a.attn_tokens, a.check_rows, a.seed);
        if (rc == CLI_RUNTIME)
            goto done;
        pass = pass && rc == CLI_OK;
    }
    printf("result      : %s\n", pass ? "PASS" : "FAIL");
    rc = pass ? CLI_OK : CLI_CHECK_FAILED;
done:
    cli_device_close(&dev);
    free(q);
    free(k);
    free(s);
    return rc;
}
