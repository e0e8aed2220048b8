/* Fault injection (issue 6): the n-th call of each wrapped OpenCL entry point or allocator fails,
 * for every n a representative run reaches. Each time the failing call returns the injected status
 * (nothing else), nothing leaks (run under ASan/LSan in the sanitizer build), and the next call on
 * the same context succeeds with bit-identical results. */
#include "harness.h"
#include "ropeqk_opencl.h"
#include "shim.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(fault, .fini = th_leak_check);

enum { B = 1, HQ = 4, HKV = 2, SQ = 7, SK = 33, D = 16 };

typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o, o64;
    float qd[B * HQ * SQ * D], kd[B * HKV * SK * D];
    int32_t kpos[SK];
    float dev[B * HQ * SQ * SK], enq[B * HQ * SQ * SK];
    ropeqk_tensor v, ao, al;
    float vd[B * HKV * SK * D], att[B * HQ * SQ * D], lse[B * HQ * SQ];
    double ref[B * HQ * SQ * SK];
} problem;

static void make(problem *pr)
{
    memset(pr, 0, sizeof *pr);
    ropeqk_default_params(&pr->p);
    pr->p.causal = 1;
    pr->p.layout = ROPEQK_HALF_SPLIT;
    pr->p.q_pos_offset = SK - SQ;
    pr->q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D);
    pr->k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D);
    pr->o = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK);
    pr->o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, SK);
    uint64_t rng = 77;
    for (size_t i = 0; i < sizeof pr->qd / 4; i++) pr->qd[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->kd / 4; i++) pr->kd[i] = (float)rqs_uniform(&rng);
    for (int j = 0; j < SK; j++) pr->kpos[j] = j;
    pr->v = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D);
    pr->ao = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D);
    pr->al = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, 1);
    for (size_t i = 0; i < sizeof pr->vd / 4; i++) pr->vd[i] = (float)rqs_uniform(&rng);
}

/* Device buffers for the enqueue step, made before any fault is armed. */
typedef struct {
    cl_mem q, k, kp, o;
} bufs;

static void make_bufs(ropeqk_ctx *ctx, const problem *pr, bufs *b)
{
    cl_context cx = ropeqk_opencl_context(ctx);
    cl_int e;
    b->q = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->qd, (void *)pr->qd, &e);
    b->k = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->kd, (void *)pr->kd, &e);
    b->kp = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->kpos, (void *)pr->kpos, &e);
    b->o = clCreateBuffer(cx, CL_MEM_READ_WRITE, sizeof pr->enq, NULL, &e);
    cr_assert(b->q && b->k && b->kp && b->o);
}

static void free_bufs(bufs *b)
{
    clReleaseMemObject(b->q); clReleaseMemObject(b->k); clReleaseMemObject(b->kp); clReleaseMemObject(b->o);
}

/* A decode plan (keys and offsets per enqueue) made, enqueued twice and destroyed: the output ends
 * as the one-shot enqueue writes it (all SK keys). The first failing status, or success. */
static ropeqk_status plan_steps(ropeqk_ctx *ctx, problem *pr, const bufs *b)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = pr->p, .q = pr->q, .k = pr->k, .out = pr->o,
                          .positions = ROPEQK_POS_ARRAYS, .max_keys = SK};
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
    ropeqk_opencl_args a = {.q = {b->q, 0}, .k = {b->k, 0}, .k_pos = {b->kp, 0}, .out = {b->o, 0}};
    for (int64_t n = SK - 5; n <= SK && !st; n += 5) {
        ropeqk_step s = {.n_keys = n, .q_pos_offset = pr->p.q_pos_offset, .k_pos_offset = 0};
        cl_event ev = NULL;
        st = ropeqk_opencl_plan_enqueue(pl, NULL, &a, &s, 0, NULL, &ev);
        if (ev) {
            clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
        }
    }
    ropeqk_plan_destroy(pl);
    return st;
}

/* The representative run: scalar path, host convenience call (first one builds), one-shot enqueue
 * call, decode plan, fused attention with LSE. */
static void run_all(ropeqk_ctx *ctx, problem *pr, const bufs *b, ropeqk_status st[5])
{
    st[0] = ropeqk_scores_ref(&pr->p, &pr->q, pr->qd, &pr->k, pr->kd, NULL, NULL, &pr->o64, pr->ref);
    st[1] = ropeqk_scores(ctx, &pr->p, &pr->q, pr->qd, &pr->k, pr->kd, NULL, pr->kpos, &pr->o, pr->dev);
    cl_event ev = NULL;
    st[2] = ropeqk_opencl_enqueue(ctx, NULL, &pr->p, &pr->q, (ropeqk_opencl_mem){b->q, 0}, &pr->k, (ropeqk_opencl_mem){b->k, 0},
                           (ropeqk_opencl_mem){NULL, 0}, (ropeqk_opencl_mem){b->kp, 0}, &pr->o, (ropeqk_opencl_mem){b->o, 0}, 0, NULL, &ev);
    if (ev) {
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
    }
    st[3] = plan_steps(ctx, pr, b);
    st[4] = ropeqk_attention(ctx, &pr->p, &pr->q, pr->qd, &pr->k, pr->kd, &pr->v, pr->vd, NULL, pr->kpos, &pr->ao,
                             pr->att, &pr->al, pr->lse);
}

/* What the shim injects, as the backend code the context must keep (0: not a backend call). */
static cl_int injected_code(fault_fn f)
{
    switch (f) {
    case F_CREATE_BUFFER: return CL_MEM_OBJECT_ALLOCATION_FAILURE;
    case F_BUILD_PROGRAM: return CL_OUT_OF_HOST_MEMORY;
    case F_MALLOC: return 0;
    default: return CL_OUT_OF_RESOURCES;
    }
}

static ropeqk_status expected_status(fault_fn f)
{
    return f == F_MALLOC ? ROPEQK_ERR_OUT_OF_HOST_MEMORY : ROPEQK_ERR_BACKEND;
}

static void sweep(fault_fn f)
{
    char why[256];
    ropeqk_ctx *probe = th_ctx_or_skip_reason(why, sizeof why);
    if (!probe)
        cr_skip_test("%s", why);
    ropeqk_ctx_destroy(probe);
    static problem base, pr;
    make(&base);
    ropeqk_status st[5];

    /* count the calls a representative run makes, on a fresh context (so the build is in it) */
    ropeqk_ctx *ctx = NULL;
    cr_assert_eq(ropeqk_ctx_create(NULL, &ctx), 0);
    bufs b;
    make_bufs(ctx, &base, &b);
    fault_arm(f, 0);
    run_all(ctx, &base, &b, st);
    fault_disarm();
    long n_calls = fault_calls(f);
    cr_assert(st[0] == 0 && st[1] == 0 && st[2] == 0 && st[3] == 0 && st[4] == 0, "baseline run failed");
    clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), b.o, CL_TRUE, 0, sizeof base.enq, base.enq, 0, NULL, NULL);
    free_bufs(&b);
    ropeqk_ctx_destroy(ctx);
    /* the library's own run reaches every entry point but the write path of the host call */
    cr_assert(n_calls > 0, "%s is never called by the representative run", fault_names[f]);

    static long pts[FAULT_MAX_POINTS]; /* each call site once (shim.h) */
    long npts = fault_first_sites(pts, FAULT_MAX_POINTS);
    for (long i = 0; i < npts; i++) {
        long n = pts[i];
        make(&pr);
        cr_assert_eq(ropeqk_ctx_create(NULL, &ctx), 0);
        make_bufs(ctx, &pr, &b);
        fault_arm(f, n);
        run_all(ctx, &pr, &b, st);
        fault_disarm();
        cr_expect(fault_fired(), "%s #%ld: fault not reached", fault_names[f], n);
        int failed = 0;
        for (int i = 0; i < 5; i++) {
            if (st[i] != ROPEQK_SUCCESS) {
                failed++;
                cr_expect_eq(st[i], expected_status(f), "%s #%ld: step %d returned %d (%s)", fault_names[f], n, i,
                             st[i], ropeqk_status_string(st[i]));
            }
        }
        cr_expect_eq(failed, 1, "%s #%ld: %d steps failed, expected exactly one", fault_names[f], n, failed);
        if (f != F_MALLOC && failed)
            cr_expect_eq(ropeqk_ctx_backend_error(ctx, NULL), injected_code(f), "%s #%ld: backend error",
                         fault_names[f], n);
        /* the same context works afterwards, with the same bits */
        memset(pr.dev, 0, sizeof pr.dev);
        memset(pr.att, 0, sizeof pr.att);
        memset(pr.lse, 0, sizeof pr.lse);
        run_all(ctx, &pr, &b, st);
        cr_expect(st[0] == 0 && st[1] == 0 && st[2] == 0 && st[3] == 0 && st[4] == 0,
                  "%s #%ld: recovery run failed (%d %d %d %d %d)", fault_names[f], n, st[0], st[1], st[2], st[3], st[4]);
        clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), b.o, CL_TRUE, 0, sizeof pr.enq, pr.enq, 0, NULL, NULL);
        cr_expect(memcmp(pr.dev, base.dev, sizeof pr.dev) == 0, "%s #%ld: host-call result differs", fault_names[f], n);
        cr_expect(memcmp(pr.enq, base.enq, sizeof pr.enq) == 0, "%s #%ld: enqueue result differs", fault_names[f], n);
        cr_expect(memcmp(pr.ref, base.ref, sizeof pr.ref) == 0, "%s #%ld: scalar result differs", fault_names[f], n);
        cr_expect(memcmp(pr.att, base.att, sizeof pr.att) == 0 && memcmp(pr.lse, base.lse, sizeof pr.lse) == 0,
                  "%s #%ld: attention result differs", fault_names[f], n);
        free_bufs(&b);
        ropeqk_ctx_destroy(ctx);
    }
    cr_log_info("%s: %ld calls, %ld call sites failed in turn", fault_names[f], n_calls, npts);
}

Test(fault, create_buffer) { sweep(F_CREATE_BUFFER); }
Test(fault, build_program) { sweep(F_BUILD_PROGRAM); }
Test(fault, create_kernel) { sweep(F_CREATE_KERNEL); }
Test(fault, enqueue_ndrange) { sweep(F_ENQUEUE_NDRANGE); }
Test(fault, enqueue_read) { sweep(F_ENQUEUE_READ); }
Test(fault, enqueue_write) { sweep(F_ENQUEUE_WRITE); }
Test(fault, malloc) { sweep(F_MALLOC); }

Test(fault, context_create_under_malloc_failure)
{
    char why[256];
    ropeqk_ctx *probe = th_ctx_or_skip_reason(why, sizeof why);
    if (!probe)
        cr_skip_test("%s", why);
    ropeqk_ctx_destroy(probe);
    ropeqk_ctx *ctx = NULL;
    fault_arm(F_MALLOC, 0);
    cr_assert_eq(ropeqk_ctx_create(NULL, &ctx), 0);
    fault_disarm();
    long n = fault_calls(F_MALLOC);
    ropeqk_ctx_destroy(ctx);
    cr_assert(n > 0);
    static long pts[FAULT_MAX_POINTS]; /* each call site once (shim.h) */
    long npts = fault_first_sites(pts, FAULT_MAX_POINTS);
    for (long k = 0; k < npts; k++) {
        long i = pts[k];
        ctx = (ropeqk_ctx *)1;
        fault_arm(F_MALLOC, i);
        ropeqk_status st = ropeqk_ctx_create(NULL, &ctx);
        fault_disarm();
        cr_expect_eq(st, ROPEQK_ERR_OUT_OF_HOST_MEMORY, "malloc #%ld in ctx_create: %d", i, st);
        cr_expect_null(ctx, "malloc #%ld: *out must be NULL on failure", i);
    }
}
