/* ropeqk-bench: times the fused op against the unfused baselines, in one run, on the same inputs.
 *
 *   ropeqk-bench [--quick] [--runs N] [--warmup N] [--shape SUBSTR] [--impl NAME[,NAME]]
 *                [--csv FILE] [--plot FILE.svg|.png] [--no-first-call] [--ref-max-gflop X]
 *                [--attention | --no-attention] [--attn-budget S] [--attn-max-run S] [--vulkan]
 *
 * Per shape and implementation: warm-up runs, then the median of the timed runs. Wall time is from
 * the first enqueue to the return of clFinish (host impls: the call); device time is the span
 * between profiling markers enqueued before and after the op (OpenCL impls). The CSV's median_ms,
 * and every GFLOP/s and GB/s figure, use wall time: it is the only clock all impls share, and
 * it includes what a user pays per call (scratch allocation, kernel setup, launches). The table's
 * scores_ms column is the fused op's last kernel alone (profiling event): device_ms - scores_ms is its
 * RoPE pass (and, on the decode path, only the Q rotation).
 * gflops counts 2*B*Hq*Sq*Sk*D; gbs counts bytes of Q and K (storage dtype) and S (f32), once each.
 * Before timing, every implementation is checked against ropeqk_scores_ref on small shapes; an
 * implementation that fails is not timed (and the exit status is 3). First-call latency (context
 * creation + first op) is measured in child processes (first_call.c).
 * Attention (attn_bench.c): fused attention plans vs RoPE + CLBlast + softmax kernel + CLBlast vs
 * host RoPE + OpenBLAS + host softmax + OpenBLAS: --attention times it instead of the scores shapes
 * (the unfused baseline alone takes minutes per shape on a 2-core pocl device); every other run does
 * its fp64 checks only.
 * Vulkan (vk_bench.c): --vulkan times the same plans on the Vulkan and the OpenCL backend instead
 * (and cblas / copy yardsticks), outputs cross-checked; it runs without OpenCL too. */
#define _XOPEN_SOURCE 700
#include "bench.h"
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_SHAPES 16
#define MAX_RUNS 1000

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_now(void) { return now(); }
double bench_median(double *v, int n) { return median(v, n); }

static int die(const char *what, int err)
{
    fprintf(stderr, "ropeqk-bench: %s: %d (%s)\n", what, err, ropeqk_status_string(err));
    return 1;
}

static bshape mkshape(const char *name, int B, int Hq, int Hkv, int Sq, int Sk, int D, int64_t qo, int64_t ko)
{
    bshape s = {{0}, B, Hq, Hkv, Sq, Sk, D, qo, ko};
    snprintf(s.name, sizeof s.name, "%s", name);
    return s;
}

/* The bench shapes. Decode: Hq = 32 query heads over Hkv = 4 KV heads (group of 8), one query row at
 * position Sk - 1, as in a Llama-style GQA decode step. */
static int make_shapes(bshape *out, bool quick)
{
    int n = 0;
    char name[48];
    static const int S_full[] = {256, 1024, 2048}, D_full[] = {64, 128};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++) {
            if (quick && !(S_full[a] == 256 && D_full[b] == 64) && !(S_full[a] == 1024 && D_full[b] == 128))
                continue;
            snprintf(name, sizeof name, "prefill-bh32-s%d-d%d", S_full[a], D_full[b]);
            out[n++] = mkshape(name, 1, 32, 32, S_full[a], S_full[a], D_full[b], 0, 0);
        }
    if (!quick)
        out[n++] = mkshape("gqa-q32-kv8-s1024-d128", 1, 32, 8, 1024, 1024, 128, 0, 0);
    static const int Sk_dec[] = {4096, 32768};
    for (int a = 0; a < 2; a++) {
        if (quick && a == 1)
            continue;
        snprintf(name, sizeof name, "decode-g8-sk%d-d128", Sk_dec[a]);
        out[n++] = mkshape(name, 1, 32, 4, 1, Sk_dec[a], 128, Sk_dec[a] - 1, 0);
    }
    return n;
}

static bool is_decode(const bshape *s) { return s->Sq == 1; }

static double flops_of(const bshape *s) { return 2.0 * s->B * s->Hq * s->Sq * (double)s->Sk * s->D; }

static double bytes_of(const bshape *s, bimpl i)
{
    double el = i == IMPL_FUSED_F16 ? 2.0 : 4.0;
    return el * s->B * (double)s->D * ((double)s->Hq * s->Sq + (double)s->Hkv * s->Sk) +
           4.0 * s->B * s->Hq * s->Sq * (double)s->Sk;
}

/* ---- correctness gate ---------------------------------------------------------------------- */

static bool impl_enabled[IMPL_COUNT];
static bool check_failed; /* exit status 3: a kernel disagreed with the reference */

/* Checks every implementation on one small shape against the fp64 reference. Tolerance: 1e-6 for the
 * fused path (the library's contract); 1e-4 for the fp32-angle baselines at these small positions
 * (fp32 angles are the known weakness of the unfused path, docs/conventions.md). */
static int check_shape(benv *e, const bshape *s)
{
    bcase c;
    int err = bcase_init(e, &c, s, false);
    if (err)
        return die("allocating the check shape", err);
    size_t n = (size_t)s->B * s->Hq * s->Sq * s->Sk;
    float *got = malloc(n * 4);
    double *r32 = malloc(n * 8), *r16 = malloc(n * 8);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, s->B, s->Hq, s->Sq, s->Sk);
    if (!got || !r32 || !r16)
        return die("allocating the check shape", ROPEQK_ERR_OUT_OF_HOST_MEMORY);
    if ((err = ropeqk_scores_ref(&c.p, &c.tq, c.hq, &c.tk, c.hk, NULL, NULL, &o64, r32)) ||
        (err = ropeqk_scores_ref(&c.p, &c.tq16, c.hq16, &c.tk16, c.hk16, NULL, NULL, &o64, r16)))
        return die("ropeqk_scores_ref", err);
    for (int i = 0; i < IMPL_REF; i++) {
        if (!impl_enabled[i])
            continue;
        bool h = i == IMPL_FUSED_F16;
        double tol = i <= IMPL_FUSED_F16 ? 1e-6 : 1e-4, me = INFINITY;
        int64_t mism = -1;
        memset(got, 0xff, n * 4); /* NaN: a kernel that writes nothing cannot pass */
        err = bimpl_run(e, &c, (bimpl)i);
        if (!err)
            err = clFinish(e->queue);
        if (!err)
            err = bimpl_fetch(e, &c, (bimpl)i, got);
        if (!err)
            err = ropeqk_max_error(&c.p, h ? &c.tq16 : &c.tq, h ? (void *)c.hq16 : c.hq, h ? &c.tk16 : &c.tk,
                                   h ? (void *)c.hk16 : c.hk, &c.to, got, &o64, h ? r16 : r32, &me, &mism);
        bool ok = !err && me < tol && mism == 0;
        printf("  check %-22s %-16s %s  max_error %.3g  mask_mismatch %lld  %s\n", s->name, bimpl_name[i],
               bimpl_dtype[i], me, (long long)mism, ok ? "ok" : "FAILED: not timed");
        if (err)
            printf("    error %d (%s)\n", err, ropeqk_status_string(err));
        if (!ok) {
            impl_enabled[i] = false;
            check_failed = true;
        }
    }
    free(got); free(r32); free(r16);
    bcase_free(&c);
    return 0;
}

/* ---- timing ---------------------------------------------------------------------------------- */

typedef struct {
    double wall_ms, dev_ms, score_ms, gflops, gbs;
    bool valid;
} result;

static int time_impl(benv *e, bcase *c, bimpl i, int warmup, int runs, result *res)
{
    static double wall[MAX_RUNS], dev[MAX_RUNS], sc[MAX_RUNS];
    bool host = i == IMPL_CBLAS || i == IMPL_REF;
    int ndev = 0, nsc = 0, err;
    if (c->last_ev) /* only fused runs set it */
        clReleaseEvent(c->last_ev);
    c->last_ev = NULL;
    for (int r = 0; r < warmup; r++)
        if ((err = bimpl_run(e, c, i)) || (err = clFinish(e->queue)))
            return err;
    for (int r = 0; r < runs; r++) {
        cl_event m0 = NULL, m1 = NULL;
        double t0 = now();
        if (!host)
            clEnqueueMarkerWithWaitList(e->queue, 0, NULL, &m0);
        err = bimpl_run(e, c, i);
        if (!host && !err)
            clEnqueueMarkerWithWaitList(e->queue, 0, NULL, &m1);
        if (!err)
            err = clFinish(e->queue);
        wall[r] = (now() - t0) * 1e3;
        cl_ulong a = 0, b = 0;
        if (m0 && m1 && !clGetEventProfilingInfo(m0, CL_PROFILING_COMMAND_END, sizeof a, &a, NULL) &&
            !clGetEventProfilingInfo(m1, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) && b >= a)
            dev[ndev++] = (double)(b - a) * 1e-6;
        if (c->last_ev && !clGetEventProfilingInfo(c->last_ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) &&
            !clGetEventProfilingInfo(c->last_ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) && b >= a)
            sc[nsc++] = (double)(b - a) * 1e-6;
        if (m0) clReleaseEvent(m0);
        if (m1) clReleaseEvent(m1);
        if (err)
            return err;
    }
    res->wall_ms = median(wall, runs);
    res->dev_ms = ndev == runs ? median(dev, ndev) : NAN;
    res->score_ms = nsc == runs ? median(sc, nsc) : NAN;
    size_t cb = bimpl_copy_bytes(c, i);
    res->gflops = cb ? 0.0 : flops_of(&c->s) / (res->wall_ms * 1e6);
    res->gbs = (cb ? (double)cb : bytes_of(&c->s, i)) / (res->wall_ms * 1e6);
    res->valid = true;
    return 0;
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

/* The bench's OpenCL context, profiling queue, ropeqk context (program built) and baseline kernels.
 * On failure *what names the step and e is left empty (close_opencl done). */
static void close_opencl(benv *e)
{
    if (e->rope_plain) clReleaseKernel(e->rope_plain);
    if (e->copy16) clReleaseKernel(e->copy16);
    if (e->softmax) clReleaseKernel(e->softmax);
    if (e->base_prog) clReleaseProgram(e->base_prog);
    ropeqk_ctx_destroy(e->rq);
    if (e->queue) clReleaseCommandQueue(e->queue);
    if (e->cl) clReleaseContext(e->cl);
    memset(e, 0, sizeof *e);
}

static int open_opencl(benv *e, const char *spec, char *why, size_t why_len, const char **what)
{
    cl_platform_id plat;
    int err = ropeqk_opencl_select_device(spec, &plat, &e->dev, why, why_len);
    *what = "selecting a device";
    if (!err) {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
        e->cl = clCreateContext(props, 1, &e->dev, NULL, NULL, &err);
        if (!err)
            e->queue = clCreateCommandQueue(e->cl, e->dev, CL_QUEUE_PROFILING_ENABLE, &err);
        *what = "creating the OpenCL context";
    }
    if (!err) {
        ropeqk_opencl_ctx_params cp = {.context = e->cl, .queue = e->queue};
        if (!(err = ropeqk_opencl_ctx_create(&cp, &e->rq)))
            err = ropeqk_ctx_warmup(e->rq);
        *what = "ropeqk_ctx_create";
    }
    if (!err) {
        err = benv_build_baselines(e);
        *what = "building the baseline kernels";
    }
    if (err)
        close_opencl(e);
    return err;
}

static void usage(void)
{
    puts("usage: ropeqk-bench [--quick] [--runs N] [--warmup N] [--shape SUBSTR] [--impl NAME[,NAME...]]\n"
         "                    [--csv FILE] [--plot FILE.svg|.png] [--no-first-call] [--ref-max-gflop X]\n"
         "                    [--host-cost [N]] [--paged [LEN]] [--attention | --no-attention]\n"
         "                    [--attn-budget S] [--attn-max-run S] [--vulkan]\n"
         "  --host-cost: host time per decode-shaped enqueue over N calls (default 10000), one-shot vs plan\n"
         "  --paged: paged-KV decode, Hq 32 / Hkv 8 / D 128, one sequence of LEN tokens (default 32768),\n"
         "           f32 and f16 caches, against a copy kernel over the same bytes\n"
         "  --vulkan: the same plans on the Vulkan and the OpenCL backend (scores prefill and decode, causal\n"
         "           attention, paged decode f16), outputs cross-checked, with cblas and copy yardsticks;\n"
         "           Vulkan device: $ROPEQK_DEVICE if it names one (\"vulkan:N\"), else \"vulkan\"; honours\n"
         "           --runs, --warmup, --shape, --csv; a missing backend is reported and skipped\n"
         "  impls: fused, unfused-clblast, cblas, ref, copy-buffer, copy-kernel\n"
         "  --quick: 2 prefill shapes + decode Sk=4096, 5 runs, 1 warm-up (CI smoke)\n"
         "  --attention: the attention shapes instead of the scores shapes (prefill S=1024 and S=4096, GQA\n"
         "    S=2048, decode Sk=32768; with --quick S=1024 and decode); other runs do the attention fp64\n"
         "    checks only (seconds), --no-attention not even those\n"
         "  --attn-budget S: stop timing an attention impl after S seconds (>= 3 runs; default 30)\n"
         "  --attn-max-run S: skip an attention impl predicted to need more than S seconds a run (default 120)");
}

int main(int argc, char **argv)
{
    int runs = 7, warmup = 2;
    bool quick = false, first_call = true, attn_only = false, attn = true;
    double attn_budget = 30.0, attn_max_run = 120.0;
    int host_cost = 0; /* --host-cost [N]: only the per-call host cost, N calls */
    long long paged = 0; /* --paged [LEN]: only the paged-KV decode, one sequence of LEN tokens */
    bool vulkan = false; /* --vulkan: only the Vulkan-vs-OpenCL comparison (vk_bench.c) */
    const char *csv = NULL, *plot = NULL, *shape_filter = NULL, *impl_filter = NULL;
    double ref_max_gflop = 0.3; /* the fp64 scalar reference does ~1 GFLOP/s: small shapes only */
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(o, "--first-call-child") || !strcmp(o, "--first-call-child-decode"))
            return first_call_child(!strcmp(o, "--first-call-child-decode"));
        else if (!strcmp(o, "--quick")) { quick = true; runs = 5; warmup = 1; }
        else if (!strcmp(o, "--no-first-call")) first_call = false;
        else if (!strcmp(o, "--vulkan")) vulkan = true;
        else if (!strcmp(o, "--attention")) { attn_only = attn = true; first_call = false; }
        else if (!strcmp(o, "--no-attention")) attn = false;
        else if (!strcmp(o, "--attn-budget") && v) { attn_budget = atof(v); a++; }
        else if (!strcmp(o, "--attn-max-run") && v) { attn_max_run = atof(v); a++; }
        else if (!strcmp(o, "--runs") && v) { runs = atoi(v); a++; }
        else if (!strcmp(o, "--warmup") && v) { warmup = atoi(v); a++; }
        else if (!strcmp(o, "--csv") && v) { csv = v; a++; }
        else if (!strcmp(o, "--plot") && v) { plot = v; a++; }
        else if (!strcmp(o, "--shape") && v) { shape_filter = v; a++; }
        else if (!strcmp(o, "--impl") && v) { impl_filter = v; a++; }
        else if (!strcmp(o, "--ref-max-gflop") && v) { ref_max_gflop = atof(v); a++; }
        else if (!strcmp(o, "--host-cost")) {
            host_cost = 10000;
            if (v && v[0] >= '0' && v[0] <= '9') { host_cost = atoi(v); a++; }
        }
        else if (!strcmp(o, "--paged")) {
            paged = 32768;
            if (v && v[0] >= '0' && v[0] <= '9') { paged = atoll(v); a++; }
        }
        else { usage(); return strcmp(o, "--help") && strcmp(o, "-h") ? 2 : 0; }
    }
    if (runs < 1 || runs > MAX_RUNS || warmup < 0) {
        usage();
        return 2;
    }
    char perr[512];
    if (plot && rqs_plot_check_path(plot, perr, sizeof perr)) { /* now, not after the whole run */
        fprintf(stderr, "ropeqk-bench: --plot: %s\n", perr);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* --vulkan: $ROPEQK_DEVICE may name the Vulkan device; OpenCL then takes its first device ("0:0"). */
    const char *env_dev = getenv("ROPEQK_DEVICE"), *cl_spec = NULL, *vk_spec = "vulkan";
    if (vulkan && env_dev && !strncasecmp(env_dev, "vulkan", 6)) {
        vk_spec = env_dev;
        cl_spec = "0:0";
    }
    /* One context and profiling queue for everything; the library borrows them. */
    benv e = {0};
    char why[128] = "", devname[256] = "";
    const char *what = NULL;
    double t_cl = now();
    int err = open_opencl(&e, cl_spec, why, sizeof why, &what);
    t_cl = (now() - t_cl) * 1e3;
    if (vulkan) { /* without OpenCL, the Vulkan rows still run: e.rq stays NULL */
        FILE *vf = csv ? fopen(csv, "w") : NULL;
        if (csv && !vf)
            return die("opening the CSV file", errno);
        int rc = bench_vulkan(&e, vk_spec, runs, warmup, shape_filter, vf, t_cl);
        if (vf)
            fclose(vf);
        close_opencl(&e);
        return rc;
    }
    if (err)
        return die(what, err);
    clGetDeviceInfo(e.dev, CL_DEVICE_NAME, sizeof devname, devname, NULL);
    printf("ropeqk-bench %s on %s (%s); library options: %s\nkernel configuration: %s\n", ropeqk_version(),
           devname, why, ropeqk_ctx_build_options(e.rq), ropeqk_ctx_config_source(e.rq));
    if (host_cost > 0)
        return bench_host_cost(&e, host_cost) ? 1 : 0;
    if (paged > 0)
        return bench_paged(&e, paged) ? 1 : 0;
    printf("runs %d (median), warm-up %d; wall time = enqueue..clFinish\n", runs, warmup);
    if (!attn_only)
        printf("shapes: prefill B=1 H=32 (Hq = Hkv); gqa B=1 Hq=32 Hkv=8; decode B=1 Hq=32 Hkv=4 (G=8) Sq=1 at\n"
           "  position Sk-1; BHSD, interleaved RoPE, base 10000, scale 1/sqrt(D), no mask\n"
           "unfused-clblast: RoPE kernel (fp32 sin/cos per element) on Q and K, then CLBlastSgemmStridedBatched\n"
           "  with one batch entry per KV head (its G*Sq query rows are contiguous in BHSD: no K expansion)\n"
           "cblas: host RoPE (fp32 table, 1 thread) + cblas_sgemm per KV head group (OpenBLAS threads)\n");

    bool user_enabled[IMPL_COUNT]; /* the attention checks are its own: not the scores checks' verdict */
    for (int i = 0; i < IMPL_COUNT; i++) {
        impl_enabled[i] = user_enabled[i] =
            bimpl_available((bimpl)i) && (!impl_filter || in_list(bimpl_name[i], impl_filter));
        if (!bimpl_available((bimpl)i))
            printf("note: %s not built (%s missing at configure time): skipped\n", bimpl_name[i],
                   i == IMPL_CBLAS ? "OpenBLAS/CBLAS" : "CLBlast");
    }
    bshape cs[2] = {mkshape("check-q4-kv2-s33x65-d64", 1, 4, 2, 33, 65, 64, 32, 0),
                    mkshape("check-decode-q8-kv1-d128", 1, 8, 1, 1, 300, 128, 299, 0)};
    for (int i = 0; i < 2 && !attn_only; i++)
        if (check_shape(&e, &cs[i]))
            return 1;

    double fc[3][3] = {{NAN}, {NAN}, {NAN}};
    if (first_call)
        first_call_latency("/proc/self/exe", fc); /* Linux: this very binary */

    bshape shapes[MAX_SHAPES];
    int ns = attn_only ? 0 : make_shapes(shapes, quick);
    static result res[MAX_SHAPES][IMPL_COUNT];
    FILE *cf = csv ? fopen(csv, "w") : NULL;
    if (csv && !cf)
        return die("opening the CSV file", errno);
    if (cf)
        fprintf(cf, "shape,impl,dtype,median_ms,gflops,gbs,op,extra_bytes,max_abs_diff\n");
    if (ns)
        printf("\n%-26s %-16s %-5s %10s %10s %9s %8s %10s\n", "shape", "impl", "dtype", "wall_ms", "device_ms",
           "GFLOP/s", "GB/s", "scores_ms");
    for (int s = 0; s < ns; s++) {
        if (shape_filter && !strstr(shapes[s].name, shape_filter))
            continue;
        bcase c;
        if ((err = bcase_init(&e, &c, &shapes[s], is_decode(&shapes[s])))) {
            printf("%-26s cannot allocate the inputs (%d): skipped\n", shapes[s].name, err);
            bcase_free(&c);
            continue;
        }
        for (int i = 0; i < IMPL_COUNT; i++) {
            if (!impl_enabled[i] || ((i == IMPL_COPY_BUFFER || i == IMPL_COPY_KERNEL) && !c.has_copy))
                continue;
            if (i == IMPL_REF && flops_of(&c.s) > ref_max_gflop * 1e9)
                continue;
            int r = i == IMPL_REF ? (runs < 3 ? runs : 3) : runs, w = i == IMPL_REF ? 0 : warmup;
            result *o = &res[s][i];
            if ((err = time_impl(&e, &c, (bimpl)i, w, r, o))) {
                printf("%-26s %-16s %-5s failed: %d (%s)\n", c.s.name, bimpl_name[i], bimpl_dtype[i], err,
                       ropeqk_status_string(err));
                continue;
            }
            printf("%-26s %-16s %-5s %10.3f %10.3f %9.2f %8.2f %10.3f\n", c.s.name, bimpl_name[i], bimpl_dtype[i],
                   o->wall_ms, o->dev_ms, o->gflops, o->gbs, o->score_ms);
            if (cf)
                fprintf(cf, "%s,%s,%s,%.4f,%.3f,%.3f,scores,,\n", c.s.name, bimpl_name[i], bimpl_dtype[i], o->wall_ms,
                        o->gflops, o->gbs);
        }
        bcase_free(&c);
    }
    static arow arows[MAX_SHAPES];
    int nar = 0, arc = 0;
    if (attn) {
        aopts ao = {.runs = runs, .warmup = warmup, .budget_s = attn_budget, .max_run_s = attn_max_run,
                    .quick = quick, .checks_only = !attn_only, .shape_filter = shape_filter, .enabled = user_enabled};
        if ((arc = bench_attention(&e, &ao, cf, arows, MAX_SHAPES, &nar)) == 1)
            return 1;
    }
    if (cf)
        fclose(cf);

    /* Targets (ratios within this run). */
    printf("\n");
    for (int s = 0; s < ns; s++) {
        result *r = res[s];
        if (!strcmp(shapes[s].name, "prefill-bh32-s1024-d128") && r[IMPL_FUSED_F32].valid) {
            if (r[IMPL_UNFUSED_CLBLAST].valid)
                printf("target prefill s1024 d128 f32: fused / unfused-clblast = %.2fx (>= 3)\n",
                       r[IMPL_FUSED_F32].gflops / r[IMPL_UNFUSED_CLBLAST].gflops);
            if (r[IMPL_CBLAS].valid)
                printf("target prefill s1024 d128 f32: fused / cblas = %.2fx (>= 1.0 on pocl)\n",
                       r[IMPL_FUSED_F32].gflops / r[IMPL_CBLAS].gflops);
        }
        if (is_decode(&shapes[s]) && r[IMPL_FUSED_F32].valid) {
            double cb = fmax(r[IMPL_COPY_BUFFER].valid ? r[IMPL_COPY_BUFFER].gbs : 0,
                             r[IMPL_COPY_KERNEL].valid ? r[IMPL_COPY_KERNEL].gbs : 0);
            if (cb > 0)
                printf("target %s: fused bandwidth / best copy = f32 %.2fx, f16 %.2fx (>= 0.5)\n", shapes[s].name,
                       r[IMPL_FUSED_F32].gbs / cb, r[IMPL_FUSED_F16].valid ? r[IMPL_FUSED_F16].gbs / cb : NAN);
        }
    }
    if (first_call && !isnan(fc[0][0]))
        printf("target first call: cold %.3f s (decode first: %.3f s) (<= 3), warm %.3f s (<= 0.2)\n",
               fc[0][0] + fc[0][1], fc[2][0] + fc[2][2], fc[1][0] + fc[1][1]);

    if (plot) {
        const char *snames[2 * MAX_SHAPES], *inames[IMPL_COUNT];
        char ibuf[IMPL_COUNT][32];
        static double vals[2 * MAX_SHAPES * IMPL_COUNT];
        int ni = IMPL_COPY_BUFFER; /* copy yardsticks have no GFLOP/s */
        for (int i = 0; i < ni; i++) {
            snprintf(ibuf[i], sizeof ibuf[i], "%s %s", bimpl_name[i], bimpl_dtype[i]);
            inames[i] = ibuf[i];
        }
        for (int s = 0; s < ns; s++) {
            snames[s] = shapes[s].name;
            for (int i = 0; i < ni; i++)
                vals[s * ni + i] = res[s][i].valid ? res[s][i].gflops : 0.0;
        }
        for (int s = 0; s < nar; s++) { /* attention rows after the scores rows, same impl columns */
            snames[ns + s] = arows[s].name;
            for (int i = 0; i < ni; i++)
                vals[(ns + s) * ni + i] = arows[s].gflops[i];
        }
        rqs_bar_plot bp = {.title = "ropeqk-bench: GFLOP/s (log scale, higher is better)", .unit = "GFLOP/s",
                           .ngroups = ns + nar, .nseries = ni, .groups = snames, .series = inames, .values = vals};
        if (rqs_plot_bars(plot, &bp, perr, sizeof perr))
            fprintf(stderr, "ropeqk-bench: --plot: %s\n", perr);
    }
    close_opencl(&e);
    return check_failed || arc == 3 ? 3 : 0;
}
