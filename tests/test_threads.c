/* Concurrency (issue 6): one context shared by 2, 4 and 8 threads, each with its own command queue,
 * mixed shapes and layouts, 1,000 calls per thread, every result bitwise equal to the
 * single-threaded one; concurrent first-time program builds; destroy after the threads are done. */
#include "harness.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

TestSuite(threads, .fini = th_leak_check);

#define N_PROBLEMS 6
#define CALLS_PER_THREAD 1000

typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o;
    cl_mem bq, bk;
    size_t out_bytes;
    float *expect;
} problem;

static problem probs[N_PROBLEMS];
static ropeqk_ctx *ctx;

static void make_problems(void)
{
    static const struct { int Hq, Hkv, Sq, Sk, D, lay, causal, f16; } shapes[N_PROBLEMS] = {
        {4, 2, 7, 33, 64, 0, 1, 0}, {8, 1, 1, 127, 128, 1, 1, 0}, {2, 2, 33, 7, 8, 0, 0, 1},
        {4, 4, 16, 16, 80, 1, 0, 0}, {8, 2, 5, 64, 96, 1, 1, 1}, {1, 1, 1, 1, 2, 0, 0, 0}};
    cl_context cx = ropeqk_opencl_context(ctx);
    for (int i = 0; i < N_PROBLEMS; i++) {
        problem *pr = &probs[i];
        ropeqk_default_params(&pr->p);
        pr->p.layout = (ropeqk_layout)shapes[i].lay;
        pr->p.causal = shapes[i].causal;
        pr->p.q_pos_offset = 1000 + shapes[i].Sk - shapes[i].Sq;
        pr->p.k_pos_offset = 1000;
        ropeqk_dtype dt = shapes[i].f16 ? ROPEQK_F16 : ROPEQK_F32;
        int64_t qe[4] = {1, shapes[i].Hq, shapes[i].Sq, shapes[i].D}, ke[4] = {1, shapes[i].Hkv, shapes[i].Sk, shapes[i].D};
        th_buf q, k;
        cr_assert(th_alloc(&q, dt, qe, i % 2 ? TH_BSHD : TH_BHSD) && th_alloc(&k, dt, ke, i % 2 ? TH_BSHD : TH_BHSD));
        uint64_t rng = 1000 + (uint64_t)i;
        th_fill_random(&q, &rng);
        th_fill_random(&k, &rng);
        pr->q = q.t;
        pr->k = k.t;
        pr->o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, shapes[i].Hq, shapes[i].Sq, shapes[i].Sk);
        pr->out_bytes = ropeqk_tensor_extent(&pr->o);
        cl_int e1, e2;
        pr->bq = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, q.bytes, q.data, &e1);
        pr->bk = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, k.bytes, k.data, &e2);
        cr_assert(!e1 && !e2);
        pr->expect = malloc(pr->out_bytes);
        cr_assert_eq(ropeqk_scores(ctx, &pr->p, &q.t, q.data, &k.t, k.data, NULL, NULL, &pr->o, pr->expect), 0);
        th_free(&q);
        th_free(&k);
    }
}

static void free_problems(void)
{
    for (int i = 0; i < N_PROBLEMS; i++) {
        clReleaseMemObject(probs[i].bq);
        clReleaseMemObject(probs[i].bk);
        free(probs[i].expect);
    }
}

typedef struct {
    int tid, calls;
    pthread_barrier_t *start;
    int failures;
    ropeqk_status first_error;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    cl_int err;
    cl_command_queue qu = clCreateCommandQueue(ropeqk_opencl_context(ctx), ropeqk_opencl_device(ctx), 0, &err);
    cl_mem out = clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
    float *host = malloc(1 << 20);
    pthread_barrier_wait(w->start);
    for (int i = 0; i < w->calls && qu && out && host; i++) {
        problem *pr = &probs[(w->tid * 7 + i) % N_PROBLEMS];
        ropeqk_opencl_mem none = {NULL, 0};
        cl_event ev = NULL;
        ropeqk_status st = ropeqk_opencl_enqueue(ctx, qu, &pr->p, &pr->q, (ropeqk_opencl_mem){pr->bq, 0}, &pr->k,
                                          (ropeqk_opencl_mem){pr->bk, 0}, none, none, &pr->o, (ropeqk_opencl_mem){out, 0}, 0, NULL, &ev);
        if (!st)
            st = (ropeqk_status)clEnqueueReadBuffer(qu, out, CL_TRUE, 0, pr->out_bytes, host, 1, &ev, NULL);
        if (ev)
            clReleaseEvent(ev);
        if (st || memcmp(host, pr->expect, pr->out_bytes) != 0) {
            if (!w->failures)
                w->first_error = st;
            w->failures++;
        }
    }
    if (!qu || !out || !host)
        w->failures = -1;
    free(host);
    if (out)
        clReleaseMemObject(out);
    if (qu)
        clReleaseCommandQueue(qu);
    return NULL;
}

static void run_threads(int n, int calls_each)
{
    pthread_t th[8];
    worker w[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.tid = i, .calls = calls_each, .start = &start};
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(w[i].failures, 0, "%d threads: thread %d had %d failures (first status %d: %s)", n, i,
                     w[i].failures, w[i].first_error, ropeqk_status_string(w[i].first_error));
    }
    pthread_barrier_destroy(&start);
}

static void shared_context(int n)
{
    char why[256];
    ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    make_problems();
    run_threads(n, CALLS_PER_THREAD);
    free_problems();
    ropeqk_ctx_destroy(ctx);
}

Test(threads, shared_context_2) { shared_context(2); }
Test(threads, shared_context_4) { shared_context(4); }
Test(threads, shared_context_8) { shared_context(8); }

Test(threads, concurrent_first_builds)
{
    char why[256];
    ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    make_problems(); /* builds on this context: expectations */
    ropeqk_ctx *built = ctx;
    /* a second library context on the same OpenCL context: its program cache is empty, so 8
     * threads race to build the program */
    ropeqk_opencl_ctx_params cp = {.context = ropeqk_opencl_context(built), .queue = ropeqk_opencl_queue(built)};
    cr_assert_eq(ropeqk_opencl_ctx_create(&cp, &ctx), 0);
    ropeqk_ctx *fresh = ctx;
    run_threads(8, 3);
    ctx = built;
    free_problems();
    ropeqk_ctx_destroy(fresh);
    ropeqk_ctx_destroy(built);
}
