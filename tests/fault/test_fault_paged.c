/* Fault injection for the paged KV cache (ROPEQK_OP_PAGED_DECODE): the n-th call of each wrapped
 * OpenCL entry point or allocator fails, for every n that a representative run reaches (plan creation
 * with its program build and companion attention plan, two appends, one decode, one ragged batch
 * whose first sequence is a prefill chunk of CH rows; the K cache int8, quantized by the append, so
 * the quantizing append, the 8-bit decode and the chunk path's 8-bit gather are swept with the plain
 * append and gather of the f32 V, the companion's scratch and its attention enqueue). Each time
 * exactly one step fails, with the
 * injected status; nothing leaks (run under ASan/LSan in the sanitizer build); and a rerun on the same
 * context gives the baseline's bits. */
#include "harness.h"
#include "../../src/core/path_runs.h"
#include "ropeqk_opencl.h"
#include "shim.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(fault_paged, .fini = th_leak_check);

/* src/opencl/cl_paged_chunk.c: sequences through the chunk path (the library is linked statically) */

/* CH: the ragged step's chunk (>= the default chunk_rows, 16), beside one row of sequence 1; MAXQ
 * the plan's max_q_rows */
enum { S = 2, HQ = 4, HKV = 2, D = 32, DV = 16, PS = 16, MAXP = 3, NP = 7, NNEW = 20, CH = 17, MAXQ = CH + 1,
       NSTEPS = 5 };

typedef struct {
    ropeqk_plan_desc desc;
    ropeqk_tensor kn, vn;
    float qd[MAXQ * HQ * D], knd[S * HKV * NNEW * D], vnd[S * HKV * NNEW * DV];
    int32_t table[S * MAXP], qpos[S];
    float out[2][MAXQ * HQ * DV], lse[2][MAXQ * HQ]; /* the decode's, the ragged batch's */
} pproblem;

typedef struct {
    cl_mem q, k, v, o[2], l[2], kn, vn, ks; /* ks: the int8 K cache's scales */
} pbufs;

static void make(pproblem *pr)
{
    memset(pr, 0, sizeof *pr);
    ropeqk_plan_desc *d = &pr->desc;
    d->op = ROPEQK_OP_PAGED_DECODE;
    ropeqk_default_params(&d->params);
    d->params.causal = 1;
    d->params.layout = ROPEQK_HALF_SPLIT;
    d->q = ropeqk_tensor_bhsd(ROPEQK_F32, MAXQ, HQ, 1, D);
    d->k = ropeqk_tensor_bhsd(ROPEQK_I8, NP, HKV, PS, D);
    d->v = ropeqk_tensor_bhsd(ROPEQK_F32, NP, HKV, PS, DV);
    d->out = ropeqk_tensor_bhsd(ROPEQK_F32, MAXQ, HQ, 1, DV);
    d->lse = ropeqk_tensor_bhsd(ROPEQK_F32, MAXQ, HQ, 1, 1);
    d->with_lse = 1;
    d->paged = (ropeqk_paged_desc){PS, MAXP, S, MAXQ};
    pr->kn = ropeqk_tensor_bhsd(ROPEQK_F16, S, HKV, NNEW, D);
    pr->vn = ropeqk_tensor_bhsd(ROPEQK_F32, S, HKV, NNEW, DV);
    uint64_t rng = 99;
    for (size_t i = 0; i < sizeof pr->qd / 4; i++) pr->qd[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->knd / 4; i++) pr->knd[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->vnd / 4; i++) pr->vnd[i] = (float)rqs_uniform(&rng);
    static const int32_t table[S * MAXP] = {4, 0, 6, 2, 5, 1};
    memcpy(pr->table, table, sizeof table);
    pr->qpos[0] = 2 * NNEW - 1;
    pr->qpos[1] = 2 * NNEW + 7;
}

/* Buffers made before any fault is armed (k_new holds f16 bits: any 16-bit patterns will do). */
static void make_bufs(ropeqk_ctx *ctx, pproblem *pr, pbufs *b)
{
    cl_context cx = ropeqk_opencl_context(ctx);
    cl_int e;
    static unsigned char zero[NP * HKV * PS * DV * 4];
    memset(zero, 0, sizeof zero);
    b->q = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->qd, pr->qd, &e);
    b->k = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ropeqk_tensor_extent(&pr->desc.k), zero, &e);
    b->v = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ropeqk_tensor_extent(&pr->desc.v), zero, &e);
    for (int i = 0; i < 2; i++) {
        b->o[i] = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->out[i], zero, &e);
        b->l[i] = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->lse[i], zero, &e);
    }
    b->kn = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ropeqk_tensor_extent(&pr->kn), pr->knd, &e);
    b->vn = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof pr->vnd, pr->vnd, &e);
    b->ks = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, NP * HKV * PS * 4, zero, &e);
    cr_assert(b->q && b->k && b->v && b->o[0] && b->l[0] && b->o[1] && b->l[1] && b->kn && b->vn && b->ks);
}

static void free_bufs(pbufs *b)
{
    clReleaseMemObject(b->q), clReleaseMemObject(b->k), clReleaseMemObject(b->v), clReleaseMemObject(b->o[0]);
    clReleaseMemObject(b->l[0]), clReleaseMemObject(b->o[1]), clReleaseMemObject(b->l[1]);
    clReleaseMemObject(b->kn), clReleaseMemObject(b->vn), clReleaseMemObject(b->ks);
}

static void wait_release(cl_event ev)
{
    if (ev) {
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
    }
}

/* plan, append (lengths 0 -> NNEW), append (-> 2*NNEW), decode, ragged batch with a chunk of CH rows
 * (sequence 0's last CH tokens, causal) and one row of sequence 1; st[i] = 1: not run (an earlier step
 * failed). Calls only the library and unwrapped OpenCL functions. */
static void run_all(ropeqk_ctx *ctx, pproblem *pr, const pbufs *b, ropeqk_status st[NSTEPS])
{
    for (int i = 0; i < NSTEPS; i++)
        st[i] = (ropeqk_status)1;
    ropeqk_plan *pl = NULL;
    st[0] = ropeqk_plan_create(ctx, &pr->desc, &pl);
    if (st[0])
        return;
    int32_t lens[S];
    ropeqk_paged_batch batch = {.n_seqs = S, .page_table = pr->table, .seq_lens = lens, .q_pos = pr->qpos};
    for (int i = 0; i < 2; i++) {
        lens[0] = lens[1] = i * NNEW;
        cl_event ev = NULL;
        ropeqk_opencl_paged_cache cache = {.k_cache = {b->k, 0}, .v_cache = {b->v, 0}, .k_scale = {b->ks, 0}};
        st[1 + i] = ropeqk_opencl_paged_append(pl, NULL, &pr->kn, (ropeqk_opencl_mem){b->kn, 0}, &pr->vn,
                                               (ropeqk_opencl_mem){b->vn, 0}, &cache, &batch, 0, NULL, &ev);
        wait_release(ev);
        if (st[1 + i]) {
            ropeqk_plan_destroy(pl);
            return;
        }
    }
    lens[0] = lens[1] = 2 * NNEW;
    ropeqk_opencl_paged_args a = {.q = {b->q, 0},      .k_cache = {b->k, 0}, .v_cache = {b->v, 0},
                                  .out = {b->o[0], 0}, .lse = {b->l[0], 0}, .k_scale = {b->ks, 0}};
    cl_event ev = NULL;
    st[3] = ropeqk_opencl_paged_enqueue(pl, NULL, &a, &batch, 0, NULL, &ev);
    wait_release(ev);
    if (!st[3]) {
        int32_t qpos[S] = {2 * NNEW - CH, pr->qpos[1]}, ind[S + 1] = {0, CH, CH + 1};
        batch.q_pos = qpos, batch.q_indptr = ind;
        a.out.buf = b->o[1], a.lse.buf = b->l[1];
        ev = NULL;
        st[4] = ropeqk_opencl_paged_enqueue(pl, NULL, &a, &batch, 0, NULL, &ev);
        wait_release(ev);
    }
    ropeqk_plan_destroy(pl);
}

static void read_results(ropeqk_ctx *ctx, pproblem *pr, const pbufs *b)
{
    cl_command_queue qu = ropeqk_opencl_queue(ctx);
    clFinish(qu);
    for (int i = 0; i < 2; i++) {
        clEnqueueReadBuffer(qu, b->o[i], CL_TRUE, 0, sizeof pr->out[i], pr->out[i], 0, NULL, NULL);
        clEnqueueReadBuffer(qu, b->l[i], CL_TRUE, 0, sizeof pr->lse[i], pr->lse[i], 0, NULL, NULL);
    }
}

static ropeqk_status expected_status(fault_fn f)
{
    return f == F_MALLOC ? ROPEQK_ERR_OUT_OF_HOST_MEMORY : ROPEQK_ERR_BACKEND;
}

static void sweep(fault_fn f)
{
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    ropeqk_ctx_destroy(ctx);
    /* No scratch pool: the ragged step takes scratch twice in one call (the decode's, then the chunk's
     * gathers and attention), and whether the second finds the first's buffers idle for reuse depends
     * on timing, so the number of clCreateBuffer calls (the sweep's fault points) would too. */
    setenv("ROPEQK_POOL_BYTES", "0", 1);
    static pproblem base, pr;
    make(&base);
    ropeqk_status st[NSTEPS];
    pbufs b;
    cr_assert_eq(ropeqk_ctx_create(NULL, &ctx), 0);
    make_bufs(ctx, &base, &b);
    long long chunks = rq_path_runs(RQ_PATH_PAGED_CHUNK);
    fault_arm(f, 0);
    run_all(ctx, &base, &b, st);
    fault_disarm();
    cr_assert_eq(rq_path_runs(RQ_PATH_PAGED_CHUNK) - chunks, 1, "the ragged step's chunk did not take the chunk path");
    long n_calls = fault_calls(f);
    for (int i = 0; i < NSTEPS; i++)
        cr_assert_eq(st[i], ROPEQK_SUCCESS, "baseline step %d: %s", i, ropeqk_status_string(st[i]));
    read_results(ctx, &base, &b);
    free_bufs(&b);
    ropeqk_ctx_destroy(ctx);
    cr_assert(n_calls > 0, "%s is never called by the representative run", fault_names[f]);

    static long pts[FAULT_MAX_POINTS]; /* each call site once (shim.h) */
    long npts = fault_first_sites(pts, FAULT_MAX_POINTS);
    cr_log_info("%s: %ld calls, %ld call sites failed in turn", fault_names[f], n_calls, npts);
    for (long i = 0; i < npts; i++) {
        long n = pts[i];
        make(&pr);
        cr_assert_eq(ropeqk_ctx_create(NULL, &ctx), 0);
        make_bufs(ctx, &pr, &b);
        fault_arm(f, n);
        run_all(ctx, &pr, &b, st);
        fault_disarm();
        cr_expect(fault_fired(), "%s #%ld: fault not reached", fault_names[f], n);
        int failed = 0, i = 0;
        for (; i < NSTEPS && st[i] == ROPEQK_SUCCESS; i++)
            ;
        if (i < NSTEPS) {
            failed = 1;
            cr_expect_eq(st[i], expected_status(f), "%s #%ld: step %d returned %d (%s)", fault_names[f], n, i,
                         st[i], ropeqk_status_string(st[i]));
            for (int j = i + 1; j < NSTEPS; j++)
                cr_expect_eq(st[j], (ropeqk_status)1, "%s #%ld: step %d ran after a failure", fault_names[f], n, j);
        }
        cr_expect_eq(failed, 1, "%s #%ld: no step failed", fault_names[f], n);
        /* the same context works afterwards, with the same bits */
        run_all(ctx, &pr, &b, st);
        for (int j = 0; j < NSTEPS; j++)
            cr_expect_eq(st[j], ROPEQK_SUCCESS, "%s #%ld: recovery step %d: %s", fault_names[f], n, j,
                         ropeqk_status_string(st[j]));
        read_results(ctx, &pr, &b);
        cr_expect(memcmp(pr.out, base.out, sizeof pr.out) == 0, "%s #%ld: output differs", fault_names[f], n);
        cr_expect(memcmp(pr.lse, base.lse, sizeof pr.lse) == 0, "%s #%ld: LSE differs", fault_names[f], n);
        free_bufs(&b);
        ropeqk_ctx_destroy(ctx);
    }
    unsetenv("ROPEQK_POOL_BYTES");
    cr_log_info("%s: %ld fault points exercised", fault_names[f], n_calls);
}

Test(fault_paged, create_buffer) { sweep(F_CREATE_BUFFER); }
Test(fault_paged, build_program) { sweep(F_BUILD_PROGRAM); }
Test(fault_paged, create_kernel) { sweep(F_CREATE_KERNEL); }
Test(fault_paged, enqueue_ndrange) { sweep(F_ENQUEUE_NDRANGE); }
Test(fault_paged, malloc) { sweep(F_MALLOC); }
