/* ropeqk-bench: times the fused op against the unfused baselines, in one run, on the same inputs.
 *
 *   ropeqk-bench [--quick] [--runs N] [--warmup N] [--shape SUBSTR] [--impl NAME[,NAME]]
 *                [--csv FILE] [--plot FILE.svg|.png] [--no-first-call] [--ref-max-gflop X]
 *                [--attention | --no-attention] [--attn-budget S] [--attn-max-run S] [--vulkan]
 *                [--variants [RUNS]] [--dense-decode [LEN]]
 *
 * This file is the top of the program: options, the OpenCL environment (benv.c), and which modes run
 * in which order; each mode is a module of its own, and the modules share only what lies below them
 * (implementations, baselines, values, the environment) and the support library:
 *
 *   bench_main.c ─┬─ scores_bench.c ── scores_impl.c ─┬─ baseline.c ── benv.c
 *                 ├─ attn_bench.c ──── attn_impl.c ───┤   values.c, impls.c, cpu.c
 *                 ├─ vk_bench.c (ropeqk.h's runs) ────┘
 *                 ├─ vk_serving.c, vk_dense_decode.c, vk_cm_bench.c (Vulkan alone, ropeqk.h's runs)
 *                 ├─ first_call.c, host_cost.c, paged.c, variants.c, dense_decode.c
 *                 └─ support/plot.h (the chart)
 *
 * Default run: every scores implementation is checked against ropeqk_scores_ref on small shapes (an
 * implementation that fails is not timed, and the exit status is 3), first-call latency is measured
 * in child processes, the scores shapes are timed, and the attention implementations get their fp64
 * checks. --attention times the attention shapes instead (the unfused baseline alone takes minutes
 * per shape on a 2-core pocl device). --vulkan, --host-cost, --paged, --variants and --dense-decode run
 * their mode alone. */
#include "attn_bench.h"
#include "benv.h"
#include "dense_decode.h"
#include "first_call.h"
#include "host_cost.h"
#include "impls.h"
#include "paged.h"
#include "ragged.h"
#include "scores_bench.h"
#include "variants.h"
#include "vk_bench.h"
#include "vk_cm_bench.h"
#include "vk_dense_decode.h"
#include "vk_serving.h"

#include "clock.h"
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ROWS (2 * SCORES_MAX_SHAPES) /* chart rows: scores shapes, then attention shapes */

typedef struct {
    int runs, warmup;
    bool quick, first_call, attn_only, attn, vulkan;
    double attn_budget, attn_max_run, ref_max_gflop;
    int host_cost;   /* --host-cost [N]: only the per-call host cost, N calls */
    long long paged; /* --paged [LEN]: only the paged-KV decode, one sequence of LEN tokens */
    bool ragged;     /* --ragged: only the ragged paged step and prefill chunk (ragged.c) */
    int variants;    /* --variants [RUNS]: only the model-family variants against plain attention */
    long long dense; /* --dense-decode [LEN]: only the dense attention decode against the paged one */
    bool tensor_cores; /* --vulkan --tensor-cores: the tensor-core path against today's shaders */
    const char *csv, *plot, *shape_filter, *impl_filter;
} bopts;

static void usage(void)
{
    puts("usage: ropeqk-bench [--quick] [--runs N] [--warmup N] [--shape SUBSTR] [--impl NAME[,NAME...]]\n"
         "                    [--csv FILE] [--plot FILE.svg|.png] [--no-first-call] [--ref-max-gflop X]\n"
         "                    [--host-cost [N]] [--paged [LEN]] [--ragged] [--attention | --no-attention]\n"
         "                    [--attn-budget S] [--attn-max-run S] [--vulkan] [--variants [RUNS]]\n"
         "                    [--dense-decode [LEN]] [--vulkan --tensor-cores]\n"
         "  --host-cost: host time per decode-shaped enqueue over N calls (default 10000), one-shot vs plan\n"
         "  --ragged: a serving step over a paged cache (4 decodes at 4k-32k, 2 prefill chunks of 512, a\n"
         "           speculative step of 4) in one ragged call vs per-sequence dense attention on copies;\n"
         "           a prefill chunk of 512 over 4k cached tokens vs dense attention\n"
         "  --paged: paged-KV decode, Hq 32 / Hkv 8 / D 128, one sequence of LEN tokens (default 32768),\n"
         "           f32 and f16 caches, against a copy kernel over the same bytes\n"
         "  --dense-decode: dense attention decode over LEN keys (default 32768), Hq 32 / Hkv 8 / D 128, f16,\n"
         "           Sq 1, 2, 4, 8: the default path, the old one (K rotated into scratch first) and the paged\n"
         "           decode on the same values, in interleaved rounds\n"
         "  --variants: soft-capping, rotary offset, M-RoPE, sinks, all together, and MLA, each against plain\n"
         "           attention on the same shape (attention, scores, paged; dense and paged MLA), RUNS rounds\n"
         "           (default 9) of every variant in turn, medians; honours --shape\n"
         "  --vulkan: the same plans on the Vulkan and the OpenCL backend (scores prefill and decode, causal\n"
         "           attention, paged decode f16), outputs cross-checked, with cblas and copy yardsticks;\n"
         "           Vulkan device: $ROPEQK_DEVICE if it names one (\"vulkan:N\"), else \"vulkan\"; honours\n"
         "           --runs, --warmup, --shape, --csv; a missing backend is reported and skipped\n"
         "  --vulkan --ragged, --vulkan --paged [LEN]: Vulkan alone: a prefill chunk of 512 rows over 4096\n"
         "           cached tokens, ragged paged call vs dense attention; decode over LEN tokens (default\n"
         "           32768) per cache dtype (f16, int8, fp8 e4m3, e5m2), GB/s, tokens/s vs f16, copy\n"
         "  --vulkan --tensor-cores: Vulkan alone: the tensor-core path (accurate, fast) against today's shaders,\n"
         "           attention f16 causal H 32 S 4096 D 128 and scores f16 H 32 S 2048 (small shapes on a CPU device)\n"
         "  --vulkan --dense-decode [LEN]: Vulkan alone: dense attention decode over LEN keys (default 32768),\n"
         "           Sq 1, 2, 4, 16: the default path, the old one (K pre-pass) and the paged decode\n"
         "  impls: fused, unfused-clblast, cblas, ref, copy-buffer, copy-kernel\n"
         "  --quick: 2 prefill shapes + decode Sk=4096, 5 runs, 1 warm-up (CI smoke)\n"
         "  --plot: a bar chart of the GFLOP/s, SVG or (when built with libpng) PNG by the extension\n"
         "  --attention: the attention shapes instead of the scores shapes (prefill S=1024 and S=4096, GQA\n"
         "    S=2048, decode Sk=32768; with --quick S=1024 and decode); other runs do the attention fp64\n"
         "    checks only (seconds), --no-attention not even those\n"
         "  --attn-budget S: stop timing an attention impl after S seconds (>= 3 runs; default 30)\n"
         "  --attn-max-run S: skip an attention impl predicted to need more than S seconds a run (default 120)");
}

/* -1: run; otherwise the exit status (after --help, a usage error, or a first-call child's run). */
static int parse_args(int argc, char **argv, bopts *o)
{
    *o = (bopts){.runs = 7, .warmup = 2, .first_call = true, .attn = true, .attn_budget = 30.0,
                 .attn_max_run = 120.0, .ref_max_gflop = 0.3 /* the fp64 reference does ~1 GFLOP/s */};
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        bool num = v && v[0] >= '0' && v[0] <= '9'; /* an optional count follows */
        if (!strcmp(s, "--first-call-child") || !strcmp(s, "--first-call-child-decode"))
            return first_call_child(!strcmp(s, "--first-call-child-decode"));
        else if (!strcmp(s, "--quick")) { o->quick = true; o->runs = 5; o->warmup = 1; }
        else if (!strcmp(s, "--no-first-call")) o->first_call = false;
        else if (!strcmp(s, "--vulkan")) o->vulkan = true;
        else if (!strcmp(s, "--tensor-cores")) o->tensor_cores = o->vulkan = true;
        else if (!strcmp(s, "--attention")) { o->attn_only = o->attn = true; o->first_call = false; }
        else if (!strcmp(s, "--no-attention")) o->attn = false;
        else if (!strcmp(s, "--attn-budget") && v) { o->attn_budget = atof(v); a++; }
        else if (!strcmp(s, "--attn-max-run") && v) { o->attn_max_run = atof(v); a++; }
        else if (!strcmp(s, "--runs") && v) { o->runs = atoi(v); a++; }
        else if (!strcmp(s, "--warmup") && v) { o->warmup = atoi(v); a++; }
        else if (!strcmp(s, "--csv") && v) { o->csv = v; a++; }
        else if (!strcmp(s, "--plot") && v) { o->plot = v; a++; }
        else if (!strcmp(s, "--shape") && v) { o->shape_filter = v; a++; }
        else if (!strcmp(s, "--impl") && v) { o->impl_filter = v; a++; }
        else if (!strcmp(s, "--ref-max-gflop") && v) { o->ref_max_gflop = atof(v); a++; }
        else if (!strcmp(s, "--host-cost")) { o->host_cost = num ? atoi(v) : 10000; a += num; }
        else if (!strcmp(s, "--ragged")) o->ragged = true;
        else if (!strcmp(s, "--paged")) { o->paged = num ? atoll(v) : 32768; a += num; }
        else if (!strcmp(s, "--dense-decode")) { o->dense = num ? atoll(v) : 32768; a += num; }
        else if (!strcmp(s, "--variants")) { o->variants = num ? atoi(v) : 9; a += num; }
        else { usage(); return strcmp(s, "--help") && strcmp(s, "-h") ? 2 : 0; }
    }
    if (o->runs < 1 || o->runs > 1000 || o->warmup < 0) {
        usage();
        return 2;
    }
    char err[512];
    if (o->plot && rqs_plot_check_path(o->plot, err, sizeof err)) { /* now, not after the whole run */
        fprintf(stderr, "ropeqk-bench: --plot: %s\n", err);
        return 2;
    }
    return -1;
}

/* name is one of the comma-separated entries of list */
static bool in_list(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

static void write_chart(const char *path, const brow *rows, int n)
{
    const char *groups[MAX_ROWS], *series[IMPL_COUNT];
    char sbuf[IMPL_COUNT][32], err[512];
    static double vals[MAX_ROWS * IMPL_COUNT];
    int ni = IMPL_COPY_BUFFER; /* copy yardsticks have no GFLOP/s */
    for (int i = 0; i < ni; i++) {
        snprintf(sbuf[i], sizeof sbuf[i], "%s %s", bimpl_name[i], bimpl_dtype[i]);
        series[i] = sbuf[i];
    }
    for (int s = 0; s < n; s++) {
        groups[s] = rows[s].name;
        for (int i = 0; i < ni; i++)
            vals[s * ni + i] = rows[s].gflops[i];
    }
    rqs_bar_plot bp = {.title = "ropeqk-bench: GFLOP/s (log scale, higher is better)", .unit = "GFLOP/s",
                       .ngroups = n, .nseries = ni, .groups = groups, .series = series, .values = vals};
    if (rqs_plot_bars(path, &bp, err, sizeof err))
        fprintf(stderr, "ropeqk-bench: --plot: %s\n", err);
}

/* The default run (and --attention): checks, first-call latency, scores shapes, attention. */
static int run_scores_and_attention(benv *e, const bopts *o)
{
    printf("runs %d (median), warm-up %d; wall time = enqueue..clFinish\n", o->runs, o->warmup);
    if (!o->attn_only)
        scores_describe();
    bool enabled[IMPL_COUNT], user_enabled[IMPL_COUNT], failed = false;
    for (int i = 0; i < IMPL_COUNT; i++) { /* the attention checks are its own: not the scores checks' verdict */
        enabled[i] = user_enabled[i] =
            bimpl_available((bimpl)i) && (!o->impl_filter || in_list(bimpl_name[i], o->impl_filter));
        if (!bimpl_available((bimpl)i))
            printf("note: %s not built (%s missing at configure time): skipped\n", bimpl_name[i],
                   i == IMPL_CBLAS ? "OpenBLAS/CBLAS" : "CLBlast");
    }
    if (!o->attn_only && scores_check(e, enabled, &failed))
        return 1;
    double fc[3][3] = {{NAN}, {NAN}, {NAN}};
    if (o->first_call)
        first_call_latency("/proc/self/exe", fc); /* Linux: this very binary */

    FILE *csv = o->csv ? fopen(o->csv, "w") : NULL;
    if (o->csv && !csv)
        return bench_fail("opening the CSV file", errno);
    if (csv)
        fprintf(csv, "shape,impl,dtype,median_ms,gflops,gbs,op,extra_bytes,max_abs_diff\n");
    static sfigures sf;
    static brow rows[MAX_ROWS];
    int nrows = 0, nattn = 0, arc = 0;
    if (!o->attn_only) {
        sopts so = {.runs = o->runs, .warmup = o->warmup, .quick = o->quick, .shape_filter = o->shape_filter,
                    .ref_max_gflop = o->ref_max_gflop};
        scores_time(e, &so, enabled, csv, &sf);
        nrows = scores_chart_rows(&sf, rows, MAX_ROWS);
    }
    if (o->attn) {
        aopts ao = {.runs = o->runs, .warmup = o->warmup, .budget_s = o->attn_budget, .max_run_s = o->attn_max_run,
                    .quick = o->quick, .checks_only = !o->attn_only, .shape_filter = o->shape_filter,
                    .enabled = user_enabled};
        if ((arc = bench_attention(e, &ao, csv, rows + nrows, MAX_ROWS - nrows, &nattn)) == 1)
            return 1;
    }
    if (csv)
        fclose(csv);

    printf("\n"); /* targets: ratios within this run */
    scores_print_targets(&sf);
    if (o->first_call && !isnan(fc[0][0]))
        printf("target first call: cold %.3f s (decode first: %.3f s) (<= 3), warm %.3f s (<= 0.2)\n",
               fc[0][0] + fc[0][1], fc[2][0] + fc[2][2], fc[1][0] + fc[1][1]);
    if (o->plot)
        write_chart(o->plot, rows, nrows + nattn);
    return failed || arc == 3 ? 3 : 0;
}

int main(int argc, char **argv)
{
    bopts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* --vulkan: $ROPEQK_DEVICE may name the Vulkan device; OpenCL then takes its first device ("0:0"). */
    const char *env_dev = getenv("ROPEQK_DEVICE"), *cl_spec = NULL, *vk_spec = "vulkan";
    if (o.vulkan && env_dev && !strncasecmp(env_dev, "vulkan", 6)) {
        vk_spec = env_dev;
        cl_spec = "0:0";
    }
    benv e;
    char why[128] = "", devname[256] = "";
    const char *what = NULL;
    double t_cl = rqs_now();
    int err = benv_open(&e, cl_spec, why, sizeof why, &what);
    t_cl = (rqs_now() - t_cl) * 1e3;
    /* without OpenCL, the Vulkan rows still run: e.rq stays NULL; without a Vulkan backend in the
     * build (or a device), the modes say so when their context cannot be made */
    if (o.vulkan) {
        if (o.dense > 0) { /* few-row dense attention on Vulkan alone (vk_dense_decode.c) */
            rc = bench_vk_dense_decode(vk_spec, o.dense);
            benv_close(&e);
            return rc;
        }
        if (o.tensor_cores) { /* cooperative matrices against today's shaders (vk_cm_bench.c) */
            FILE *tf = o.csv ? fopen(o.csv, "w") : NULL;
            rc = bench_tensor_cores(vk_spec, o.runs, o.warmup, o.shape_filter, tf);
            if (tf)
                fclose(tf);
            benv_close(&e);
            return rc;
        }
        if (o.ragged || o.paged > 0) { /* the serving paths on Vulkan alone (vk_serving.c) */
            rc = bench_vk_serving(vk_spec, o.ragged, o.paged);
            benv_close(&e);
            return rc;
        }
        FILE *vf = o.csv ? fopen(o.csv, "w") : NULL;
        if (o.csv && !vf)
            return bench_fail("opening the CSV file", errno);
        rc = bench_vulkan(&e, vk_spec, o.runs, o.warmup, o.shape_filter, vf, t_cl);
        if (vf)
            fclose(vf);
        benv_close(&e);
        return rc;
    }
    if (err)
        return bench_fail(what, err);
    clGetDeviceInfo(e.dev, CL_DEVICE_NAME, sizeof devname, devname, NULL);
    printf("ropeqk-bench %s on %s (%s); library options: %s\nkernel configuration: %s\n", ropeqk_version(),
           devname, why, ropeqk_ctx_build_options(e.rq), ropeqk_ctx_config_source(e.rq));
    if (o.host_cost > 0)
        rc = bench_host_cost(&e, o.host_cost) ? 1 : 0;
    else if (o.paged > 0)
        rc = bench_paged(&e, o.paged) ? 1 : 0;
    else if (o.ragged)
        rc = bench_ragged(&e) ? 1 : 0;
    else if (o.dense > 0)
        rc = (rc = bench_dense_decode(&e, o.dense)) == 3 ? 3 : rc ? 1 : 0;
    else if (o.variants > 0)
        rc = bench_variants(&e, o.variants, o.shape_filter) ? 1 : 0;
    else
        rc = run_scores_and_attention(&e, &o);
    benv_close(&e);
    return rc;
}
