/* Concurrency (issue 6), on either backend: one context shared by 2, 4 and 8 threads, all running
 * on the context's queue through ropeqk.h's run calls (what users do; the library serialises
 * Vulkan submissions itself), mixed shapes and layouts, one-shot calls on device buffers (a plan
 * made, run with ropeqk_plan_run, waited for and destroyed per call), every result bitwise equal to
 * the single-threaded one; concurrent first-time program builds on a second, fresh context; host
 * calls (ropeqk_scores) from four threads against fp64; destroy after the threads are done. */
#include "harness.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(threads, .fini = th_leak_check);

#define N_PROBLEMS 6
#define CALLS_PER_THREAD 1000

typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o;
    dm_buf *bq, *bk;
    size_t out_bytes;
    float *expect;
} problem;

static problem probs[N_PROBLEMS];
static ropeqk_ctx *ctx;

/* The problems' expected scores computed on ctx (building its programs), their inputs uploaded to
 * buffers of `on` (ctx itself, or a fresh context whose programs are not built yet). */
static void make_problems_on(ropeqk_ctx *on)
{
    static const struct { int Hq, Hkv, Sq, Sk, D, lay, causal, f16; } shapes[N_PROBLEMS] = {
        {4, 2, 7, 33, 64, 0, 1, 0}, {8, 1, 1, 127, 128, 1, 1, 0}, {2, 2, 33, 7, 8, 0, 0, 1},
        {4, 4, 16, 16, 80, 1, 0, 0}, {8, 2, 5, 64, 96, 1, 1, 1}, {1, 1, 1, 1, 2, 0, 0, 0}};
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
        cr_assert_eq(dm_create(on, q.bytes, q.data, false, &pr->bq), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        cr_assert_eq(dm_create(on, k.bytes, k.data, false, &pr->bk), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        pr->expect = malloc(pr->out_bytes);
        cr_assert_eq(ropeqk_scores(ctx, &pr->p, &q.t, q.data, &k.t, k.data, NULL, NULL, &pr->o, pr->expect), 0);
        th_free(&q);
        th_free(&k);
    }
}

static void make_problems(void) { make_problems_on(ctx); }

static void free_problems(void)
{
    for (int i = 0; i < N_PROBLEMS; i++) {
        dm_free(probs[i].bq);
        dm_free(probs[i].bk);
        free(probs[i].expect);
    }
}

typedef struct {
    int tid, calls;
    pthread_barrier_t *start;
    int failures;
    ropeqk_status first_error;
    char message[256];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    dm_buf *out = NULL;
    ropeqk_status setup = dm_create(ctx, 1 << 20, NULL, true, &out);
    float *host = malloc(1 << 20);
    if (setup || !host) {
        w->failures = -1;
        w->first_error = setup;
        snprintf(w->message, sizeof w->message, "setup: %s", ropeqk_last_error());
    }
    pthread_barrier_wait(w->start);
    for (int i = 0; i < w->calls && w->failures >= 0; i++) {
        problem *pr = &probs[(w->tid * 7 + i) % N_PROBLEMS];
        ropeqk_args a = {.q = dm_whole(pr->bq), .k = dm_whole(pr->bk), .out = dm_whole(out)};
        ropeqk_status st = dm_scores_oneshot(ctx, &pr->p, &pr->q, &pr->k, &pr->o, &a);
        if (!st)
            st = dm_read_part(out, 0, pr->out_bytes, host);
        if (st || memcmp(host, pr->expect, pr->out_bytes) != 0) {
            if (!w->failures) {
                w->first_error = st;
                snprintf(w->message, sizeof w->message, "call %d: %s", i, ropeqk_last_error());
            }
            w->failures++;
        }
    }
    bool intact = false;
    if (out && w->failures == 0 && (dm_check(out, NULL, &intact) || !intact)) {
        w->failures++;
        snprintf(w->message, sizeof w->message, "the output buffer's canaries changed");
    }
    free(host);
    dm_free(out);
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
        cr_expect_eq(w[i].failures, 0, "%d threads: thread %d had %d failures (first status %d: %s; %s)", n, i,
                     w[i].failures, w[i].first_error, ropeqk_status_string(w[i].first_error), w[i].message);
    }
    pthread_barrier_destroy(&start);
}

/* lavapipe runs each call's plan creation, recording and submission on 2 shared cores, all
 * submissions through one VkQueue: a quarter of the calls keeps the suite near a minute */
static int calls_per_thread(void) { return th_is_vulkan(ctx) ? CALLS_PER_THREAD / 4 : CALLS_PER_THREAD; }

static void shared_context(int n)
{
    char why[256];
    ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    cr_log_info("%s context, %d threads, %d calls each", th_backend_name(ctx), n,
                calls_per_thread());
    make_problems();
    run_threads(n, calls_per_thread());
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
    ropeqk_ctx *built = ctx;
    /* a second context on the same device: its program (pipeline) cache is empty, so 8 threads race
     * to build it; the expectations come from the first (which builds there), the inputs live on the
     * second (buffers belong to their context) */
    ropeqk_ctx *fresh = NULL;
    ropeqk_status st = ropeqk_ctx_create(NULL, &fresh);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    make_problems_on(fresh);
    ctx = fresh;
    run_threads(8, 3);
    ctx = built;
    free_problems();
    ropeqk_ctx_destroy(fresh);
    ropeqk_ctx_destroy(built);
}

/* ---- host calls from several threads ------------------------------------------------------------ */
typedef struct {
    int id;
    int fails;
    char first[512];
} host_worker;

/* ropeqk_scores (host memory: upload, plan, run, download under the context's own locks) on mixed
 * dtypes and layouts, each against the fp64 path */
static void *host_work(void *arg)
{
    host_worker *w = arg;
    for (int i = 0; i < 6; i++) {
        th_case c = th_case_small();
        c.Sq = 17 + w->id;
        c.Sk = 33 + i;
        c.D = 32;
        c.dtype = (ropeqk_dtype)((w->id + i) % 3);
        c.p.layout = (ropeqk_layout)(i % 2);
        uint64_t seed = (uint64_t)(w->id * 100 + i);
        th_result r = th_run(ctx, &c, seed);
        if (r.status || r.max_err > 1e-5 || r.mismatch || !r.guards_ok) {
            if (!w->fails) {
                char d[400];
                th_describe(&c, d, sizeof d);
                snprintf(w->first, sizeof w->first, "seed %llu: %s, error %.3g, %lld mismatches: %s",
                         (unsigned long long)seed, ropeqk_status_string(r.status), r.max_err, (long long)r.mismatch, d);
            }
            w->fails++;
        }
    }
    return NULL;
}

Test(threads, host_calls_from_four_threads_match_fp64)
{
    char why[256];
    ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    pthread_t t[4];
    host_worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (host_worker){.id = i};
        cr_assert_eq(pthread_create(&t[i], NULL, host_work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_expect_eq(w[i].fails, 0, "thread %d: %d failed cases, the first: %s", i, w[i].fails, w[i].first);
    }
    ropeqk_ctx_destroy(ctx);
}
