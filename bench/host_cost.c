/* Host-side cost of one decode-shaped enqueue (Hq 32, Hkv 8, Sq 1, Sk 4096, D 128, f32): the time
 * the calling thread spends inside the library per call, which a generation loop pays per token.
 * `ropeqk-bench --host-cost [N]`: N calls (default 10,000) per variant, timed one by one around the
 * call alone; the queue is drained every 64 calls outside the timed region so it stays short.
 * Both variants are the backend-neutral run (ropeqk_plan_run) on the bench's cl_mems wrapped once as
 * ropeqk_buffers, on the context's queue (the bench's): the one-shot (ropeqk_plan_create + run +
 * ropeqk_plan_destroy per call, what every call cost before plans existed: validation, frequencies,
 * tables, kernels) and a decode plan made once (per call only the step and buffer checks, scratch,
 * arguments, enqueues). Before 2026-11-29 both went through the OpenCL interop entry points
 * (ropeqk_opencl_enqueue, ropeqk_opencl_plan_enqueue) and a third line, plan_run, timed the neutral run.
 * Measured on the 2-core dev machine (pocl 3.1, AVX-512), 10,000 calls, CPU profile: before plans
 * (ropeqk_enqueue at 284a5d7) median 197-204 us, mean 508-696 us; see docs/performance.md, "Host cost per call". */
#include "host_cost.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    benv *e;
    ropeqk_params p;
    ropeqk_tensor q, k, o;
    cl_mem bq, bk, bo;
    ropeqk_plan *plan;           /* a decode plan over the same shapes */
    ropeqk_buffer *nq, *nk, *no; /* bq, bk, bo wrapped for ropeqk_plan_run */
    int64_t step;      /* calls made, so the plan's key count moves like a generation loop's */
} hc_state;

typedef int (*hc_call)(hc_state *s);

static int call_oneshot(hc_state *s)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = s->p, .q = s->q, .k = s->k, .out = s->o};
    ropeqk_args a = {.q = {s->nq, 0}, .k = {s->nk, 0}, .out = {s->no, 0}};
    ropeqk_plan *pl;
    int err = ropeqk_plan_create(s->e->rq, &d, &pl);
    if (!err) /* the plan may go while its run is queued */
        err = ropeqk_plan_run(pl, &a, NULL, 0, NULL, NULL);
    ropeqk_plan_destroy(pl);
    return err;
}

static int call_plan(hc_state *s)
{
    ropeqk_args a = {.q = {s->nq, 0}, .k = {s->nk, 0}, .out = {s->no, 0}};
    int64_t n = s->k.ne[2] - 63 + (s->step++ % 64); /* the last 64 key counts up to Sk */
    ropeqk_step st = {.n_keys = n, .q_pos_offset = n - 1, .k_pos_offset = 0};
    return ropeqk_plan_run(s->plan, &a, &st, 0, NULL, NULL);
}

static int measure(hc_state *s, const char *name, hc_call call, int n)
{
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return 1;
    for (int w = 0; w < 16; w++) /* warm: program build, pool, caches */
        if (call(s))
            return free(t), 1;
    clFinish(s->e->queue);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double t0 = rqs_now();
        int st = call(s);
        t[i] = (rqs_now() - t0) * 1e6;
        if (st) {
            printf("host-cost %s: call %d failed: %s\n", name, i, ropeqk_status_string(st));
            free(t);
            return 1;
        }
        sum += t[i];
        if (i % 64 == 63)
            clFinish(s->e->queue);
    }
    clFinish(s->e->queue);
    rqs_sort(t, (size_t)n);
    printf("host-cost %-9s %6d calls: median %7.2f us, mean %7.2f us, p90 %7.2f us, p99 %7.2f us per call\n", name,
           n, t[n / 2], sum / n, t[n * 9 / 10], t[n * 99 / 100]);
    free(t);
    return 0;
}

int bench_host_cost(benv *e, int n)
{
    hc_state s = {.e = e};
    ropeqk_default_params(&s.p);
    const int Hq = 32, Hkv = 8, Sk = 4096, D = 128;
    s.p.q_pos_offset = Sk - 1;
    s.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, 1, D);
    s.k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hkv, Sk, D);
    s.o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, 1, Sk);
    int err = 0;
    s.bq = clCreateBuffer(e->cl, CL_MEM_READ_WRITE, (size_t)Hq * D * 4, NULL, &err);
    if (!err)
        s.bk = clCreateBuffer(e->cl, CL_MEM_READ_WRITE, (size_t)Hkv * Sk * D * 4, NULL, &err);
    if (!err)
        s.bo = clCreateBuffer(e->cl, CL_MEM_READ_WRITE, (size_t)Hq * Sk * 4, NULL, &err);
    if (!err) {
        float zero = 0.0f;
        clEnqueueFillBuffer(e->queue, s.bq, &zero, 4, 0, (size_t)Hq * D * 4, 0, NULL, NULL);
        clEnqueueFillBuffer(e->queue, s.bk, &zero, 4, 0, (size_t)Hkv * Sk * D * 4, 0, NULL, NULL);
    }
    printf("host-cost: decode Hq %d Hkv %d Sq 1 Sk %d D %d f32, host time inside the call\n", Hq, Hkv, Sk, D);
    s.nq = bench_wrap(e->rq, s.bq, &err), s.nk = bench_wrap(e->rq, s.bk, &err), s.no = bench_wrap(e->rq, s.bo, &err);
    int rc = err ? 1 : measure(&s, "one-shot", call_oneshot, n);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = s.p, .q = s.q, .k = s.k, .out = s.o, .max_keys = Sk};
    if (!rc && (err = ropeqk_plan_create(e->rq, &d, &s.plan)) != 0) {
        printf("host-cost: ropeqk_plan_create: %s\n", ropeqk_status_string(err));
        rc = 1;
    }
    if (!rc)
        rc = measure(&s, "plan", call_plan, n);
    ropeqk_buffer_destroy(s.nq), ropeqk_buffer_destroy(s.nk), ropeqk_buffer_destroy(s.no);
    ropeqk_plan_destroy(s.plan);
    if (s.bq) clReleaseMemObject(s.bq);
    if (s.bk) clReleaseMemObject(s.bk);
    if (s.bo) clReleaseMemObject(s.bo);
    return rc;
}
