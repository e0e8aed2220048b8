/* The scores mode of ropeqk-bench (scores_bench.h). Per shape and implementation: warm-up runs, then
 * the median of the timed runs. Wall time is from the first enqueue to the return of clFinish (host
 * impls: the call); device time is the span between profiling markers enqueued before and after the
 * op (OpenCL impls). The CSV's median_ms, and every GFLOP/s and GB/s figure, use wall time: it is the
 * only clock all impls share, and it includes what a user pays per call (scratch allocation, kernel
 * setup, launches). The table's scores_ms column is the fused op's last kernel alone (profiling
 * event): device_ms - scores_ms is its RoPE pass (and, on the decode path, only the Q rotation).
 * gflops counts 2*B*Hq*Sq*Sk*D; gbs counts bytes of Q and K (storage dtype) and S (f32), once each. */
#include "scores_bench.h"

#include "clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 1000

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

void scores_describe(void)
{
    printf("shapes: prefill B=1 H=32 (Hq = Hkv); gqa B=1 Hq=32 Hkv=8; decode B=1 Hq=32 Hkv=4 (G=8) Sq=1 at\n"
           "  position Sk-1; BHSD, interleaved RoPE, base 10000, scale 1/sqrt(D), no mask\n"
           "unfused-clblast: RoPE kernel (fp32 sin/cos per element) on Q and K, then CLBlastSgemmStridedBatched\n"
           "  with one batch entry per KV head (its G*Sq query rows are contiguous in BHSD: no K expansion)\n"
           "cblas: host RoPE (fp32 table, 1 thread) + cblas_sgemm per KV head group (OpenBLAS threads)\n");
}

/* ---- correctness gate ---------------------------------------------------------------------- */

/* Checks every implementation on one small shape against the fp64 reference. Tolerance: 1e-6 for the
 * fused path (the library's contract); 1e-4 for the fp32-angle baselines at these small positions
 * (fp32 angles are the known weakness of the unfused path, docs/conventions.md). */
static int check_shape(benv *e, const bshape *s, bool *enabled, bool *failed)
{
    bcase c;
    int err = bcase_init(e, &c, s, false);
    if (err)
        return bench_fail("allocating the check shape", err);
    size_t n = (size_t)s->B * s->Hq * s->Sq * s->Sk;
    float *got = malloc(n * 4);
    double *r32 = malloc(n * 8), *r16 = malloc(n * 8);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, s->B, s->Hq, s->Sq, s->Sk);
    if (!got || !r32 || !r16)
        return bench_fail("allocating the check shape", ROPEQK_ERR_OUT_OF_HOST_MEMORY);
    if ((err = ropeqk_scores_ref(&c.p, &c.tq, c.hq, &c.tk, c.hk, NULL, NULL, &o64, r32)) ||
        (err = ropeqk_scores_ref(&c.p, &c.tq16, c.hq16, &c.tk16, c.hk16, NULL, NULL, &o64, r16)))
        return bench_fail("ropeqk_scores_ref", err);
    for (int i = 0; i < IMPL_REF; i++) {
        if (!enabled[i])
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
            enabled[i] = false;
            *failed = true;
        }
    }
    free(got); free(r32); free(r16);
    bcase_free(&c);
    return 0;
}

int scores_check(benv *e, bool *enabled, bool *failed)
{
    bshape cs[2] = {mkshape("check-q4-kv2-s33x65-d64", 1, 4, 2, 33, 65, 64, 32, 0),
                    mkshape("check-decode-q8-kv1-d128", 1, 8, 1, 1, 300, 128, 299, 0)};
    for (int i = 0; i < 2; i++)
        if (check_shape(e, &cs[i], enabled, failed))
            return 1;
    return 0;
}

/* ---- timing ---------------------------------------------------------------------------------- */

static int time_impl(benv *e, bcase *c, bimpl i, int warmup, int runs, sresult *res)
{
    static double wall[MAX_RUNS], dev[MAX_RUNS], sc[MAX_RUNS];
    bool host = i == IMPL_CBLAS || i == IMPL_REF;
    int ndev = 0, nsc = 0, err;
    if (runs > MAX_RUNS)
        runs = MAX_RUNS;
    ropeqk_event_release(c->last_ev); /* only fused runs set it */
    c->last_ev = NULL;
    for (int r = 0; r < warmup; r++)
        if ((err = bimpl_run(e, c, i)) || (err = clFinish(e->queue)))
            return err;
    for (int r = 0; r < runs; r++) {
        cl_event m0 = NULL, m1 = NULL;
        double t0 = rqs_now();
        if (!host)
            clEnqueueMarkerWithWaitList(e->queue, 0, NULL, &m0);
        err = bimpl_run(e, c, i);
        if (!host && !err)
            clEnqueueMarkerWithWaitList(e->queue, 0, NULL, &m1);
        if (!err)
            err = clFinish(e->queue);
        wall[r] = (rqs_now() - t0) * 1e3;
        cl_ulong a = 0, b = 0;
        if (m0 && m1 && !clGetEventProfilingInfo(m0, CL_PROFILING_COMMAND_END, sizeof a, &a, NULL) &&
            !clGetEventProfilingInfo(m1, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) && b >= a)
            dev[ndev++] = (double)(b - a) * 1e-6;
        cl_event ke = ropeqk_opencl_event_handle(c->last_ev); /* not retained */
        if (ke && !clGetEventProfilingInfo(ke, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) &&
            !clGetEventProfilingInfo(ke, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) && b >= a)
            sc[nsc++] = (double)(b - a) * 1e-6;
        if (m0) clReleaseEvent(m0);
        if (m1) clReleaseEvent(m1);
        if (err)
            return err;
    }
    res->wall_ms = rqs_median(wall, (size_t)runs);
    res->dev_ms = ndev == runs ? rqs_median(dev, (size_t)ndev) : NAN;
    res->score_ms = nsc == runs ? rqs_median(sc, (size_t)nsc) : NAN;
    size_t cb = bimpl_copy_bytes(c, i);
    res->gflops = cb ? 0.0 : flops_of(&c->s) / (res->wall_ms * 1e6);
    res->gbs = (cb ? (double)cb : bytes_of(&c->s, i)) / (res->wall_ms * 1e6);
    res->valid = true;
    return 0;
}

void scores_time(benv *e, const sopts *o, const bool *enabled, FILE *csv, sfigures *f)
{
    memset(f, 0, sizeof *f);
    f->n = make_shapes(f->shapes, o->quick);
    printf("\n%-26s %-16s %-5s %10s %10s %9s %8s %10s\n", "shape", "impl", "dtype", "wall_ms", "device_ms",
           "GFLOP/s", "GB/s", "scores_ms");
    for (int s = 0; s < f->n; s++) {
        if (o->shape_filter && !strstr(f->shapes[s].name, o->shape_filter))
            continue;
        bcase c;
        int err = bcase_init(e, &c, &f->shapes[s], is_decode(&f->shapes[s]));
        if (err) {
            printf("%-26s cannot allocate the inputs (%d): skipped\n", f->shapes[s].name, err);
            bcase_free(&c);
            continue;
        }
        for (int i = 0; i < IMPL_COUNT; i++) {
            if (!enabled[i] || ((i == IMPL_COPY_BUFFER || i == IMPL_COPY_KERNEL) && !c.has_copy))
                continue;
            if (i == IMPL_REF && flops_of(&c.s) > o->ref_max_gflop * 1e9)
                continue;
            int r = i == IMPL_REF ? (o->runs < 3 ? o->runs : 3) : o->runs, w = i == IMPL_REF ? 0 : o->warmup;
            sresult *res = &f->res[s][i];
            if ((err = time_impl(e, &c, (bimpl)i, w, r, res))) {
                printf("%-26s %-16s %-5s failed: %d (%s)\n", c.s.name, bimpl_name[i], bimpl_dtype[i], err,
                       ropeqk_status_string(err));
                continue;
            }
            printf("%-26s %-16s %-5s %10.3f %10.3f %9.2f %8.2f %10.3f\n", c.s.name, bimpl_name[i], bimpl_dtype[i],
                   res->wall_ms, res->dev_ms, res->gflops, res->gbs, res->score_ms);
            if (csv)
                fprintf(csv, "%s,%s,%s,%.4f,%.3f,%.3f,scores,,\n", c.s.name, bimpl_name[i], bimpl_dtype[i],
                        res->wall_ms, res->gflops, res->gbs);
        }
        bcase_free(&c);
    }
}

void scores_print_targets(const sfigures *f)
{
    for (int s = 0; s < f->n; s++) {
        const sresult *r = f->res[s];
        if (!strcmp(f->shapes[s].name, "prefill-bh32-s1024-d128") && r[IMPL_FUSED_F32].valid) {
            if (r[IMPL_UNFUSED_CLBLAST].valid)
                printf("target prefill s1024 d128 f32: fused / unfused-clblast = %.2fx (>= 3)\n",
                       r[IMPL_FUSED_F32].gflops / r[IMPL_UNFUSED_CLBLAST].gflops);
            if (r[IMPL_CBLAS].valid)
                printf("target prefill s1024 d128 f32: fused / cblas = %.2fx (>= 1.0 on pocl)\n",
                       r[IMPL_FUSED_F32].gflops / r[IMPL_CBLAS].gflops);
        }
        if (is_decode(&f->shapes[s]) && r[IMPL_FUSED_F32].valid) {
            double cb = fmax(r[IMPL_COPY_BUFFER].valid ? r[IMPL_COPY_BUFFER].gbs : 0,
                             r[IMPL_COPY_KERNEL].valid ? r[IMPL_COPY_KERNEL].gbs : 0);
            if (cb > 0)
                printf("target %s: fused bandwidth / best copy = f32 %.2fx, f16 %.2fx (>= 0.5)\n", f->shapes[s].name,
                       r[IMPL_FUSED_F32].gbs / cb, r[IMPL_FUSED_F16].valid ? r[IMPL_FUSED_F16].gbs / cb : NAN);
        }
    }
}

int scores_chart_rows(const sfigures *f, brow *rows, int max)
{
    int n = 0;
    for (int s = 0; s < f->n && n < max; s++) {
        bool any = false; /* shapes left out by --shape (or failed everywhere) get no empty group */
        for (int i = 0; i < IMPL_COUNT; i++)
            any |= f->res[s][i].valid;
        if (!any)
            continue;
        memset(&rows[n], 0, sizeof rows[n]);
        snprintf(rows[n].name, sizeof rows[n].name, "%s", f->shapes[s].name);
        for (int i = 0; i < IMPL_COUNT; i++)
            rows[n].gflops[i] = f->res[s][i].valid ? f->res[s][i].gflops : 0.0;
        n++;
    }
    return n;
}
