/* ropeqk-bench --attention: fused attention (ROPEQK_OP_ATTENTION plans) against the unfused OpenCL
 * path (RoPE kernel + CLBlast GEMM + softmax kernel + CLBlast GEMM) and the host path (host RoPE +
 * OpenBLAS + host softmax + OpenBLAS), in one run on the same inputs (attn_impl.c has the impls).
 *
 * Order per run: the fp64 checks on small shapes (every impl, masks included), then per shape and
 * impl: one run whose output is compared with fused f32's (max |dO|; an impl that disagrees is
 * reported and not timed, exit status 3); then warm-ups, and timed runs in rounds (one run of each
 * impl per round, so load drift on a shared machine hits all alike; median; an impl stops at --runs,
 * or once its runs add up to --attn-budget seconds, with at least 3 unless one run exceeds it).
 * An impl predicted (from its rate on an earlier shape of this run) to need more than --attn-max-run
 * seconds per run is skipped, and says so.
 * GFLOP/s count 4*B*Hq*Sq*Sk*D (Dv = D), halved for causal Sq = Sk: the useful work, whatever an
 * implementation computes (the unfused paths compute all of S). GB/s count K and V bytes in the
 * storage dtype, read once: the decode figure. */
#include "attn_bench.h"

#include "attn_impl.h"
#include "clock.h"
#include "cpu.h"
#include "values.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARUNS 1000
#define TOL_FP64 1e-4 /* max |O - O64| on the check shapes (|V| < 0.5) */
#define TOL_F32 1e-3  /* max |O - O_fused_f32| on the timed shapes, f32 impls */
#define TOL_F16 4e-3  /* the same for fused f16 (its inputs are rounded to f16) */

static const bimpl order[] = {IMPL_FUSED_F32, IMPL_FUSED_F16, IMPL_UNFUSED_CLBLAST, IMPL_CBLAS};
#define NORDER (int)(sizeof order / sizeof order[0])

static ashape mk(const char *name, int B, int Hq, int Hkv, int Sq, int Sk, int D, int64_t qo, int causal, int window)
{
    ashape s = {{0}, B, Hq, Hkv, Sq, Sk, D, D, qo, 0, causal, window};
    snprintf(s.name, sizeof s.name, "%s", name);
    return s;
}

static bool causal_square(const ashape *s) { return s->causal && s->Sq == s->Sk && s->q_off == s->k_off; }

static double useful_flops(const ashape *s)
{
    double f = 2.0 * s->B * s->Hq * s->Sq * (double)s->Sk * (s->D + s->Dv);
    return causal_square(s) ? f / 2 : f;
}

/* what an impl computes: the unfused paths do all of S and P V, masked or not */
static double work_flops(const ashape *s, bimpl i)
{
    return i == IMPL_UNFUSED_CLBLAST || i == IMPL_CBLAS ? 2.0 * s->B * s->Hq * s->Sq * (double)s->Sk * (s->D + s->Dv)
                                                        : useful_flops(s);
}

static double kv_bytes(const ashape *s, bimpl i)
{
    return (i == IMPL_FUSED_F16 ? 2.0 : 4.0) * s->B * s->Hkv * (double)s->Sk * (s->D + s->Dv);
}

/* fp64 check of every enabled impl on one small shape; disables the impls that fail. */
static int check_shape(benv *e, const ashape *s, bool *on, bool *failed)
{
    acase c;
    int err = acase_init(e, &c, s, on);
    size_t n = (size_t)s->B * s->Hq * s->Sq * s->Dv;
    double *r[2] = {malloc(n * 8), malloc(n * 8)};
    float *got = malloc(n * 4), *ref = malloc(n * 4);
    if (err || !r[0] || !r[1] || !got || !ref || (err = aref_run(&c, false, r[0])) || (err = aref_run(&c, true, r[1]))) {
        printf("attention check %s: setup failed: %d (%s)\n", s->name, err, ropeqk_status_string(err));
        acase_free(&c);
        free(r[0]); free(r[1]); free(got); free(ref);
        return 1;
    }
    for (int k = 0; k < NORDER; k++) {
        bimpl i = order[k];
        if (!on[i] || !c.has[i])
            continue;
        int h = i == IMPL_FUSED_F16;
        for (size_t j = 0; j < n; j++)
            ref[j] = (float)r[h][j];
        memset(got, 0xff, n * 4); /* NaN: an impl that writes nothing cannot pass */
        if (!(err = aimpl_run(e, &c, i)) && !(err = clFinish(e->queue)))
            err = aimpl_fetch(e, &c, i, got);
        double d = err ? INFINITY : bench_max_abs_diff(got, ref, n);
        bool ok = d <= TOL_FP64;
        printf("  check %-30s %-16s %s  max|O - O64| %.3g  %s\n", s->name, bimpl_name[i], bimpl_dtype[i], d,
               ok ? "ok" : "FAILED: not timed");
        if (err)
            printf("    error %d (%s)\n", err, ropeqk_status_string(err));
        if (!ok)
            on[i] = false, *failed = true;
    }
    acase_free(&c);
    free(r[0]); free(r[1]); free(got); free(ref);
    return 0;
}

typedef struct {
    double wall_ms, dev_ms, kern_ms, diff;
    int runs;
    bool valid;
} ares;

static double ev_span(cl_event a, int qa, cl_event b, int qb)
{
    cl_ulong x = 0, y = 0;
    if (!a || !b || clGetEventProfilingInfo(a, qa, sizeof x, &x, NULL) || clGetEventProfilingInfo(b, qb, sizeof y, &y, NULL) ||
        y < x)
        return NAN;
    return (double)(y - x) * 1e-6;
}

/* One timed evaluation: wall ms, device ms (markers around it; NaN for host impls), and for fused
 * the attention kernel's ms (NaN otherwise). */
static int one_run(benv *e, acase *c, bimpl i, double *wall, double *dev, double *kern)
{
    bool host = i == IMPL_CBLAS;
    ropeqk_event_release(c->last_ev); /* only fused runs set it */
    c->last_ev = NULL;
    cl_event m0 = NULL, m1 = NULL;
    double t0 = rqs_now();
    if (!host)
        clEnqueueMarkerWithWaitList(e->queue, 0, NULL, &m0);
    int err = aimpl_run(e, c, i);
    if (!host && !err)
        clEnqueueMarkerWithWaitList(e->queue, 0, NULL, &m1);
    if (!err)
        err = clFinish(e->queue);
    *wall = (rqs_now() - t0) * 1e3;
    *dev = ev_span(m0, CL_PROFILING_COMMAND_END, m1, CL_PROFILING_COMMAND_END);
    cl_event ke = ropeqk_opencl_event_handle(c->last_ev); /* the kernel's cl_event, not retained */
    *kern = ke ? ev_span(ke, CL_PROFILING_COMMAND_START, ke, CL_PROFILING_COMMAND_END) : NAN;
    if (m0) clReleaseEvent(m0);
    if (m1) clReleaseEvent(m1);
    return err;
}

static double median_or_nan(double *v, int n) /* NaN if any entry is */
{
    for (int j = 0; j < n; j++)
        if (isnan(v[j]))
            return NAN;
    return n ? rqs_median(v, (size_t)n) : NAN;
}

int bench_attention(benv *e, const aopts *o, FILE *csv, brow *rows, int max_rows, int *nrows)
{
    bool on[IMPL_COUNT], failed = false;
    for (int i = 0; i < IMPL_COUNT; i++)
        on[i] = o->enabled[i] && i <= IMPL_CBLAS && i != IMPL_REF;
    on[IMPL_FUSED_F32] = true; /* the reference every timed output is compared with */
    printf("\n%s O = softmax(S) V, S = scale RoPE(Q) RoPE(K)^T (masked), f32 out\n",
           o->checks_only ? "attention checks (timing: --attention):" : "== attention ==");
    ashape cs[3] = {mk("check-attn-q4-kv2-s33x65-d64-causal", 1, 4, 2, 33, 65, 64, 32, 1, 0),
                    mk("check-attn-b2-q4-kv1-s40-d32-window9", 2, 4, 1, 40, 40, 32, 0, 1, 9),
                    mk("check-attn-decode-q8-kv2-sk300-d128", 1, 8, 2, 1, 300, 128, 299, 1, 0)};
    for (int k = 0; k < 3; k++)
        if (check_shape(e, &cs[k], on, &failed))
            return 1;

    *nrows = 0;
    if (o->checks_only)
        return failed ? 3 : 0;
    bench_print_cpu();
    printf("fused: one ROPEQK_OP_ATTENTION plan per dtype (f16: Q, K, V in f16)\n"
           "unfused-clblast: RoPE kernel on Q, K; CLBlastSgemmStridedBatched S = scale Q K^T (one batch entry per\n"
           "  KV head); softmax_rows kernel (masked, max-subtracted, in place: S -> P); CLBlast P V, same batching\n"
           "cblas: host RoPE (1 thread) + cblas_sgemm per KV head + host softmax (1 thread per core) + cblas_sgemm\n"
           "GFLOP/s: 4*B*Hq*Sq*Sk*D, halved for causal Sq = Sk; GB/s: K + V bytes read once; extra_MiB: memory\n"
           "  an impl allocates beyond inputs and output (S/P for the unfused paths; fused: library scratch, est.)\n"
           "max|dO|: against fused f32 on the same inputs (tolerance %g, f16 %g); checks against fp64 first\n"
           "kernel_ms: fused, the attention kernel alone; rope%%: (device_ms - kernel_ms) / device_ms, the RoPE pass\n"
           "  over Q and K (exact where Q takes one pass: B*Hq*Sq*D*4 <= 64 MiB, ROPEQK_ATTN_PASS_BYTES; with\n"
           "  more passes it also holds the earlier passes' attention kernels)\n"
           "runs 0: the checked first run alone (one-time setup included), as it took over --attn-max-run\n",
           TOL_F32, TOL_F16);
    ashape sh[4];
    int ns = 0;
    sh[ns++] = mk("attn-prefill-h32-s1024-d128-causal", 1, 32, 32, 1024, 1024, 128, 0, 1, 0);
    if (!o->quick)
        sh[ns++] = mk("attn-prefill-h32-s4096-d128-causal", 1, 32, 32, 4096, 4096, 128, 0, 1, 0);
    if (!o->quick)
        sh[ns++] = mk("attn-gqa-q32-kv8-s2048-d128-causal", 1, 32, 8, 2048, 2048, 128, 0, 1, 0);
    sh[ns++] = mk("attn-decode-q32-kv8-sk32768-d128", 1, 32, 8, 1, 32768, 128, 32767, 1, 0);
    printf("shapes: BHSD, interleaved RoPE, base 10000, scale 1/sqrt(D), causal (decode: one query row at\n"
           "  position Sk-1, the mask covers nothing); inputs in [-0.5, 0.5), f16 runs use the same values rounded\n");

    double rate[IMPL_COUNT] = {0}; /* work flops per second seen on an earlier shape, for predictions */
    printf("\n%-36s %-16s %-4s %4s %10s %10s %10s %8s %7s %9s %9s %6s\n", "shape", "impl", "dt", "runs", "wall_ms",
           "device_ms", "kernel_ms", "GFLOP/s", "GB/s", "extra_MiB", "max|dO|", "rope%");
    *nrows = 0;
    for (int si = 0; si < ns; si++) {
        const ashape *s = &sh[si];
        if (o->shape_filter && !strstr(s->name, o->shape_filter))
            continue;
        brow *row = *nrows < max_rows ? &rows[(*nrows)++] : NULL;
        if (row) {
            memset(row, 0, sizeof *row);
            memcpy(row->name, s->name, sizeof row->name);
        }
        acase c;
        int err = acase_init(e, &c, s, on);
        size_t n = (size_t)s->B * s->Hq * s->Sq * s->Dv;
        float *outs[IMPL_COUNT] = {0};
        ares res[IMPL_COUNT] = {{0}};
        if (err) {
            printf("%-36s cannot allocate the inputs or plans: %d (%s): skipped\n", s->name, err, ropeqk_status_string(err));
            acase_free(&c);
            continue;
        }
        char note[IMPL_COUNT][192] = {{0}}; /* why an impl has no figure, printed in table order */
#define NOTE(i, ...) snprintf(note[i], sizeof note[i], __VA_ARGS__)
        /* 1. per impl: the checked first run (also a warm-up: CLBlast compiles its kernels here) */
        bool ready[IMPL_COUNT] = {false};
        double first_s[IMPL_COUNT] = {0};
        for (int k = 0; k < NORDER; k++) {
            bimpl i = order[k];
            if (!on[i])
                continue;
            if (!c.has[i]) {
                NOTE(i, "skipped: %s", c.why_not[i]);
                continue;
            }
            if (i != IMPL_FUSED_F32 && !outs[IMPL_FUSED_F32]) {
                NOTE(i, "skipped: no fused f32 output to compare with");
                continue;
            }
            double pred = rate[i] > 0 ? work_flops(s, i) / rate[i] : 0;
            if (pred > o->max_run_s) {
                NOTE(i, "skipped: predicted %.0f s per run (its rate on an earlier shape) > --attn-max-run %.0f s",
                     pred, o->max_run_s);
                continue;
            }
            if (!(outs[i] = malloc(n * 4)))
                return 1;
            memset(outs[i], 0xff, n * 4);
            double t0 = rqs_now();
            if (!(err = aimpl_run(e, &c, i)) && !(err = clFinish(e->queue)))
                err = aimpl_fetch(e, &c, i, outs[i]);
            first_s[i] = rqs_now() - t0;
            if (err) {
                NOTE(i, "failed: %d (%s)", err, ropeqk_status_string(err));
                free(outs[i]), outs[i] = NULL;
                continue;
            }
            res[i].diff = i == IMPL_FUSED_F32 ? 0.0 : bench_max_abs_diff(outs[i], outs[IMPL_FUSED_F32], n);
            if (res[i].diff > (i == IMPL_FUSED_F16 ? TOL_F16 : TOL_F32)) {
                NOTE(i, "DISAGREES with fused f32: max|dO| %.3g: not timed", res[i].diff);
                failed = true;
                continue;
            }
            ready[i] = true;
        }
        /* 2. warm-ups (none after a first run over 2 s), then rounds: one run of every impl still
         * timing per round, so that the machine's load drifts over all impls alike */
        static double wall[IMPL_COUNT][MAX_ARUNS], dev[IMPL_COUNT][MAX_ARUNS], kern[IMPL_COUNT][MAX_ARUNS];
        bool active[IMPL_COUNT] = {false}, any = false;
        double spent[IMPL_COUNT] = {0};
        for (int k = 0; k < NORDER; k++) {
            bimpl i = order[k];
            if (!ready[i])
                continue;
            if (first_s[i] > o->max_run_s) { /* too slow to repeat: the checked run is the figure */
                res[i] = (ares){.wall_ms = first_s[i] * 1e3, .dev_ms = NAN, .kern_ms = NAN, .diff = res[i].diff,
                                .valid = true};
                continue;
            }
            err = 0;
            for (int w = 0; w < (first_s[i] > 2.0 ? 0 : o->warmup) && !err; w++)
                if (!(err = aimpl_run(e, &c, i)))
                    err = clFinish(e->queue);
            if (err) {
                NOTE(i, "failed: %d (%s)", err, ropeqk_status_string(err));
                err = 0;
                continue;
            }
            active[i] = any = o->runs > 0;
        }
        while (any) {
            any = false;
            for (int k = 0; k < NORDER; k++) {
                bimpl i = order[k];
                if (!active[i])
                    continue;
                int r = res[i].runs;
                if ((err = one_run(e, &c, i, &wall[i][r], &dev[i][r], &kern[i][r]))) {
                    NOTE(i, "failed: %d (%s)", err, ropeqk_status_string(err));
                    active[i] = false, res[i].runs = 0, err = 0;
                    continue;
                }
                spent[i] += wall[i][r] * 1e-3;
                res[i].runs = ++r;
                int min_runs = first_s[i] > o->budget_s ? 1 : 3;
                active[i] = r < o->runs && (r < min_runs || spent[i] < o->budget_s);
                any |= active[i];
            }
        }
        for (int k = 0; k < NORDER; k++) {
            bimpl i = order[k];
            ares *r = &res[i];
            if (r->runs > 0) {
                r->wall_ms = rqs_median(wall[i], (size_t)r->runs);
                r->dev_ms = median_or_nan(dev[i], r->runs);
                r->kern_ms = median_or_nan(kern[i], r->runs);
                r->valid = true;
            }
            if (!r->valid) {
                if (note[i][0])
                    printf("%-36s %-16s %-4s %s\n", s->name, bimpl_name[i], bimpl_dtype[i], note[i]);
                continue;
            }
            double gf = useful_flops(s) / (r->wall_ms * 1e6), gbs = kv_bytes(s, i) / (r->wall_ms * 1e6);
            rate[i] = work_flops(s, i) / (r->wall_ms * 1e-3);
            printf("%-36s %-16s %-4s %4d %10.2f %10.2f %10.2f %8.2f %7.2f %9.1f %9.2g %6.1f\n", s->name, bimpl_name[i],
                   bimpl_dtype[i], r->runs, r->wall_ms, r->dev_ms, r->kern_ms, gf, gbs,
                   (double)c.extra_bytes[i] / 1048576.0, r->diff, 100.0 * (r->dev_ms - r->kern_ms) / r->dev_ms);
            if (row)
                row->gflops[i] = gf;
            if (csv)
                fprintf(csv, "%s,%s,%s,%.4f,%.3f,%.3f,attention,%zu,%.3g\n", s->name, bimpl_name[i], bimpl_dtype[i],
                        r->wall_ms, gf, gbs, c.extra_bytes[i], r->diff);
        }
        /* an impl that disagreed: is it fused or the impl? the two baselines against each other */
        if (outs[IMPL_UNFUSED_CLBLAST] && outs[IMPL_CBLAS] &&
            (!res[IMPL_UNFUSED_CLBLAST].valid || !res[IMPL_CBLAS].valid))
            printf("%-36s unfused-clblast vs cblas: max|dO| %.3g\n", s->name,
                   bench_max_abs_diff(outs[IMPL_UNFUSED_CLBLAST], outs[IMPL_CBLAS], n));
        if (c.has[IMPL_UNFUSED_CLBLAST] || c.has[IMPL_CBLAS])
            printf("%-36s S/P materialised by the unfused paths: %.1f MiB f32\n", s->name,
                   (double)s->B * s->Hq * s->Sq * (double)s->Sk * 4.0 / 1048576.0);
        const ares *f = &res[IMPL_FUSED_F32], *h = &res[IMPL_FUSED_F16];
        for (int b = IMPL_UNFUSED_CLBLAST; b <= IMPL_CBLAS; b++) {
            if (!f->valid || !res[b].valid)
                continue;
            printf("%-36s ratio fused f32 / %s = %.2fx", s->name, bimpl_name[b], res[b].wall_ms / f->wall_ms);
            if (h->valid)
                printf("  (fused f16 / %s = %.2fx)", bimpl_name[b], res[b].wall_ms / h->wall_ms);
            printf("\n");
        }
        for (int i = 0; i < IMPL_COUNT; i++)
            free(outs[i]);
        acase_free(&c);
    }
    return failed ? 3 : 0;
}
