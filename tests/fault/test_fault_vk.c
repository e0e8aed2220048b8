/* Fault injection at the Vulkan call sites (shim_vk.c) and the allocators: for every n a
 * representative run reaches, the n-th call of each fails; the run returns a status (never a crash),
 * nothing leaks (the ASan build's th_leak_check), no validation message appears, and the next run
 * succeeds with bit-identical scores. Runs on the first Vulkan device (lavapipe in CI). */
#include "harness.h"
#include "ropeqk_vulkan.h"
#include "shim.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(fault_vk, .init = th_skip_without_validation, .fini = th_leak_check);

enum { B = 1, HQ = 4, HKV = 2, SQ = 7, SK = 33, D = 16 };

typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o;
    float qd[B * HQ * SQ * D], kd[B * HKV * SK * D];
    int32_t kpos[SK];
    float out[B * HQ * SQ * SK];
    bool warmup; /* the sweeps whose call sites the warm-up has (pipelines, malloc) */
} problem;

static void make(problem *pr)
{
    memset(pr, 0, sizeof *pr);
    ropeqk_default_params(&pr->p);
    pr->p.causal = 1;
    pr->p.q_pos_offset = SK - SQ;
    pr->q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D);
    pr->k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D);
    pr->o = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK);
    uint64_t rng = 78;
    for (size_t i = 0; i < sizeof pr->qd / 4; i++) pr->qd[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->kd / 4; i++) pr->kd[i] = (float)rqs_uniform(&rng);
    for (int j = 0; j < SK; j++) pr->kpos[j] = 3 * j;
}

/* Whether a clean run follows fault point i of n to show that the process is sound and gives the
 * fault-free bits (each run is a context of its own: 1-2.5 s of CPU on lavapipe with the validation
 * layer, most of it pipeline creation): after every point, or under ROPEQK_TEST_STRIDE (the sanitizer
 * stage, where ASan itself reports damaged memory and LeakSanitizer leaks) after every N-th and the
 * last. fault_vulkan took 1187 s wall / 324 s CPU under ASan on the shared dev host (load 9). */
static bool recovery_due(long i, long n) { return i % th_stride() == 0 || i == n - 1; }

/* Context, warm-up, two host-memory calls, destroy: the first failing status, or success. The warm-up
 * (every pipeline of the context: 4 of a run's 4.3 s on lavapipe with the validation layer, 2-core
 * host) calls only vkCreateComputePipelines and malloc of the wrapped functions (vk_pipe.c), so the
 * other sweeps run without it: the same call sites, a quarter of the time. */
static ropeqk_status run(problem *pr)
{
    ropeqk_ctx_params cp = {.device = "vulkan"};
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (!st)
        st = ropeqk_scores(ctx, &pr->p, &pr->q, pr->qd, &pr->k, pr->kd, NULL, pr->kpos, &pr->o, pr->out);
    if (!st && pr->warmup)
        st = ropeqk_ctx_warmup(ctx);
    if (!st)
        st = ropeqk_scores(ctx, &pr->p, &pr->q, pr->qd, &pr->k, pr->kd, NULL, NULL, &pr->o, pr->out);
    ropeqk_ctx_destroy(ctx);
    return st;
}

static void sweep(fault_fn f)
{
    problem *pr = calloc(1, sizeof *pr);
    float *want = malloc(sizeof pr->out);
    cr_assert(pr && want);
    make(pr);
    pr->warmup = f == F_VK_CREATE_PIPELINES || f == F_MALLOC;
    ropeqk_status st = run(pr);
    if (st == ROPEQK_ERR_NO_DEVICE) {
        free(pr);
        free(want);
        cr_skip_test("no Vulkan device");
    }
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    memcpy(want, pr->out, sizeof pr->out);
    fault_arm(f, 0);
    cr_assert_eq(run(pr), ROPEQK_SUCCESS);
    long n_calls = fault_calls(f);
    fault_disarm();
    cr_assert_gt(n_calls, 0, "%s is never called", fault_names[f]);
    static long pts[FAULT_MAX_POINTS]; /* each call site once (shim.h) */
    long npts = fault_first_sites(pts, FAULT_MAX_POINTS);
    cr_log_info("%s: %ld calls, %ld call sites failed in turn", fault_names[f], n_calls, npts);
    for (long i = 0; i < npts; i++) {
        long n = pts[i];
        fault_arm(f, n);
        st = run(pr);
        bool fired = fault_fired();
        fault_disarm();
        cr_expect(fired, "%s call %ld not reached", fault_names[f], n);
        cr_expect(st == ROPEQK_ERR_BACKEND || st == ROPEQK_ERR_OUT_OF_HOST_MEMORY,
                  "%s call %ld of %ld: status %d (%s)", fault_names[f], n, n_calls, st, ropeqk_status_string(st));
        if (!recovery_due(i, npts))
            continue;
        memset(pr->out, 0, sizeof pr->out);
        cr_expect_eq(run(pr), ROPEQK_SUCCESS, "after %s call %ld: %s", fault_names[f], n, ropeqk_last_error());
        cr_expect(memcmp(pr->out, want, sizeof pr->out) == 0, "after %s call %ld: scores differ", fault_names[f], n);
    }
    free(pr);
    free(want);
}

Test(fault_vk, create_buffer) { sweep(F_VK_CREATE_BUFFER); }
Test(fault_vk, allocate_memory) { sweep(F_VK_ALLOCATE_MEMORY); }
Test(fault_vk, map_memory) { sweep(F_VK_MAP_MEMORY); }
Test(fault_vk, create_pipelines) { sweep(F_VK_CREATE_PIPELINES); }
Test(fault_vk, queue_submit) { sweep(F_VK_QUEUE_SUBMIT); }
Test(fault_vk, allocate_command_buffers) { sweep(F_VK_ALLOCATE_COMMAND_BUFFERS); }
Test(fault_vk, malloc) { sweep(F_MALLOC); }

/* ---- paged decode with a prefill chunk (vk_paged_chunk.c: the companion plan, the gather scratch
 * made at the first chunk), an 8-bit append (paged_append_q8.comp) and the same chunk over the int8
 * caches (paged_gather.comp decoding them into f32 scratch) -------------------------------------- */
enum { PPS = 16, PMAXP = 4, PROWS = 21, PLEN0 = 40, PLEN1 = 9 };

typedef struct {
    float q[PROWS * HQ * D], kv[2 * PMAXP * HKV * PPS * D], out[2][PROWS * HQ * D];
    float sc[2 * 2 * PMAXP * HKV * PPS]; /* the int8 caches' scales */
} pproblem;

/* Context, a paged plan over f32 caches, a ragged decode whose first sequence's 20 rows are a chunk,
 * then an int8 plan's append and the same ragged decode over its caches (codes: kv's bytes): the
 * first failing status, or success (out: the two decodes' rows). */
static ropeqk_status run_paged(pproblem *pr)
{
    ropeqk_ctx_params cp = {.device = "vulkan"};
    ropeqk_ctx *ctx = NULL;
    ropeqk_plan *pl = NULL, *p8 = NULL;
    dm_buf *bq = NULL, *bk = NULL, *bo = NULL, *b8 = NULL, *bs = NULL, *bo8 = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE, .paged = {PPS, PMAXP, 2, PROWS}};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.q = d.out = ropeqk_tensor_bhsd(ROPEQK_F32, PROWS, HQ, 1, D);
    d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_F32, 2 * PMAXP, HKV, PPS, D);
    size_t cb = sizeof pr->kv;
    if (!st)
        st = ropeqk_plan_create(ctx, &d, &pl);
    if (!st)
        st = dm_create(ctx, sizeof pr->q, pr->q, false, &bq);
    if (!st)
        st = dm_create(ctx, cb, pr->kv, false, &bk);
    if (!st)
        st = dm_create(ctx, sizeof pr->out, NULL, false, &bo);
    int32_t table[2 * PMAXP] = {5, 1, 6, 0, 2, 7, 3, 4}, lens[2] = {PLEN0, PLEN1}, qpos[2] = {PLEN0 - 20, PLEN1 - 1};
    int32_t ind[3] = {0, 20, PROWS};
    ropeqk_paged_batch b = {.n_seqs = 2, .page_table = table, .seq_lens = lens, .q_pos = qpos, .q_indptr = ind};
    ropeqk_paged_args a = {.q = dm_whole(bq), .k_cache = dm_whole(bk), .v_cache = dm_whole(bk), .out = dm_whole(bo)};
    if (!st)
        st = rqs_paged_run_wait(pl, &a, &b);
    if (!st)
        st = dm_read(bo, pr->out[0]);
    /* the quantizing append: the plan's pipeline, its record */
    d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_I8, 2 * PMAXP, HKV, PPS, D);
    ropeqk_tensor kn = ropeqk_tensor_bhsd(ROPEQK_F32, 2, HKV, 1, D);
    if (!st)
        st = ropeqk_plan_create(ctx, &d, &p8);
    const size_t c8 = cb / 4, sb = 2 * PMAXP * HKV * PPS * 4; /* one int8 cache, one scale buffer */
    if (!st)
        st = dm_create(ctx, 2 * c8, pr->kv, false, &b8);
    if (!st)
        st = dm_create(ctx, 2 * sb, pr->sc, false, &bs);
    if (!st)
        st = dm_create(ctx, sizeof pr->out[1], NULL, false, &bo8);
    int32_t alens[2] = {3, 0};
    ropeqk_paged_batch ab = {.n_seqs = 2, .page_table = table, .seq_lens = alens};
    ropeqk_paged_cache c = {dm_at(b8, 0), dm_at(b8, c8), dm_at(bs, 0), dm_at(bs, sb)};
    if (!st)
        st = rqs_paged_append_wait(p8, &kn, dm_whole(bq), &kn, dm_whole(bq), &c, &ab);
    ropeqk_paged_args a8 = {.q = dm_whole(bq), .k_cache = c.k_cache, .v_cache = c.v_cache, .out = dm_whole(bo8),
                         .k_scale = c.k_scale, .v_scale = c.v_scale};
    if (!st)
        st = rqs_paged_run_wait(p8, &a8, &b);
    if (!st)
        st = dm_read(bo8, pr->out[1]);
    dm_buf *all[6] = {bq, bk, bo, b8, bs, bo8};
    for (int i = 0; i < 6; i++)
        dm_free(all[i]);
    ropeqk_plan_destroy(pl);
    ropeqk_plan_destroy(p8);
    ropeqk_ctx_destroy(ctx);
    return st;
}

/* Every call of fault f in a run of `run` on problem pr (its output `out`, `bytes`): each failing call
 * gives ROPEQK_ERR_BACKEND or OUT_OF_HOST_MEMORY, and the next clean run the fault-free output. False
 * when there is no Vulkan device (the caller frees pr and skips). */
static bool sweep_runs(fault_fn f, const char *what, ropeqk_status (*run)(void *), void *pr, void *out, size_t bytes)
{
    void *want = malloc(bytes);
    cr_assert(want);
    ropeqk_status st = run(pr);
    if (st == ROPEQK_ERR_NO_DEVICE) {
        free(want);
        return false;
    }
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    memcpy(want, out, bytes);
    fault_arm(f, 0);
    cr_assert_eq(run(pr), ROPEQK_SUCCESS);
    long n_calls = fault_calls(f);
    fault_disarm();
    cr_assert_gt(n_calls, 0, "%s is never called", fault_names[f]);
    static long pts[FAULT_MAX_POINTS]; /* each call site once (shim.h) */
    long npts = fault_first_sites(pts, FAULT_MAX_POINTS);
    cr_log_info("%s: %ld calls, %ld call sites failed in turn", fault_names[f], n_calls, npts);
    for (long i = 0; i < npts; i++) {
        long n = pts[i];
        fault_arm(f, n);
        st = run(pr);
        bool fired = fault_fired();
        fault_disarm();
        cr_expect(fired, "%s call %ld not reached", fault_names[f], n);
        cr_expect(st == ROPEQK_ERR_BACKEND || st == ROPEQK_ERR_OUT_OF_HOST_MEMORY,
                  "%s: %s call %ld of %ld: status %d (%s)", what, fault_names[f], n, n_calls, st, ropeqk_status_string(st));
        if (!recovery_due(i, npts))
            continue;
        memset(out, 0, bytes);
        cr_expect_eq(run(pr), ROPEQK_SUCCESS, "after %s call %ld: %s", fault_names[f], n, ropeqk_last_error());
        cr_expect(memcmp(out, want, bytes) == 0, "after %s call %ld: %s output differs", fault_names[f], n, what);
    }
    free(want);
    return true;
}

static ropeqk_status run_paged_v(void *pr) { return run_paged(pr); }

static void sweep_paged(fault_fn f)
{
    pproblem *pr = calloc(1, sizeof *pr);
    cr_assert(pr);
    uint64_t rng = 79;
    for (size_t i = 0; i < sizeof pr->q / 4; i++) pr->q[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->kv / 4; i++) pr->kv[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->sc / 4; i++) pr->sc[i] = (float)(0.01 + 0.01 * rqs_uniform(&rng));
    bool ran = sweep_runs(f, "paged", run_paged_v, pr, pr->out, sizeof pr->out);
    free(pr);
    if (!ran)
        cr_skip_test("no Vulkan device");
}

Test(fault_vk, paged_chunk_create_buffer) { sweep_paged(F_VK_CREATE_BUFFER); }
Test(fault_vk, paged_chunk_create_pipelines) { sweep_paged(F_VK_CREATE_PIPELINES); }

/* ---- few-row dense attention through the paged decode's shaders (vk_dense.c: the decode's scratch
 * and pipelines at plan creation, the metadata per call, a q position array copied on the device) --- */
enum { DB = 2, DSQ = 2, DSK = 150 };

typedef struct {
    float q[DB * HQ * DSQ * D], k[DB * HKV * DSK * D], out[DB * HQ * DSQ * D];
    int32_t qpos[DSQ];
} dproblem;

/* Context (dense_rows 8), an attention plan of DSQ rows with q positions, one run: the first failing
 * status, or success. */
static ropeqk_status run_dense(dproblem *pr)
{
    ropeqk_ctx_params cp = {.device = "vulkan", .tuning = {.dense_rows = 8}};
    ropeqk_ctx *ctx = NULL;
    ropeqk_plan *pl = NULL;
    dm_buf *bq = NULL, *bk = NULL, *bo = NULL, *bp = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .positions = ROPEQK_POS_ARRAYS};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.q = d.out = ropeqk_tensor_bhsd(ROPEQK_F32, DB, HQ, DSQ, D);
    d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_F32, DB, HKV, DSK, D);
    if (!st)
        st = ropeqk_plan_create(ctx, &d, &pl);
    if (!st)
        st = dm_create(ctx, sizeof pr->q, pr->q, false, &bq);
    if (!st)
        st = dm_create(ctx, sizeof pr->k, pr->k, false, &bk);
    if (!st)
        st = dm_create(ctx, sizeof pr->out, NULL, false, &bo);
    if (!st)
        st = dm_create(ctx, sizeof pr->qpos, pr->qpos, false, &bp);
    ropeqk_args a = {.q = dm_whole(bq), .k = dm_whole(bk), .v = dm_whole(bk), .out = dm_whole(bo),
                  .q_pos = dm_whole(bp)};
    if (!st)
        st = rqs_plan_run_wait(pl, &a, NULL);
    if (!st)
        st = dm_read(bo, pr->out);
    dm_buf *all[4] = {bq, bk, bo, bp};
    for (int i = 0; i < 4; i++)
        dm_free(all[i]);
    ropeqk_plan_destroy(pl);
    ropeqk_ctx_destroy(ctx);
    return st;
}

static ropeqk_status run_dense_v(void *pr) { return run_dense(pr); }

static void sweep_dense(fault_fn f)
{
    dproblem *pr = calloc(1, sizeof *pr);
    cr_assert(pr);
    uint64_t rng = 80;
    for (size_t i = 0; i < sizeof pr->q / 4; i++) pr->q[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < sizeof pr->k / 4; i++) pr->k[i] = (float)rqs_uniform(&rng);
    pr->qpos[0] = DSK - 90, pr->qpos[1] = DSK - 1; /* the first row sees part of the keys */
    bool ran = sweep_runs(f, "dense", run_dense_v, pr, pr->out, sizeof pr->out);
    free(pr);
    if (!ran)
        cr_skip_test("no Vulkan device");
}

Test(fault_vk, dense_decode_create_buffer) { sweep_dense(F_VK_CREATE_BUFFER); }
Test(fault_vk, dense_decode_create_pipelines) { sweep_dense(F_VK_CREATE_PIPELINES); }
Test(fault_vk, dense_decode_malloc) { sweep_dense(F_MALLOC); }
