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

TestSuite(fault_vk, .fini = th_leak_check);

enum { B = 1, HQ = 4, HKV = 2, SQ = 7, SK = 33, D = 16 };

typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o;
    float qd[B * HQ * SQ * D], kd[B * HKV * SK * D];
    int32_t kpos[SK];
    float out[B * HQ * SQ * SK];
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

/* Context, warm-up, two host-memory calls, destroy: the first failing status, or success. */
static ropeqk_status run(problem *pr)
{
    ropeqk_ctx_params cp = {.device = "vulkan"};
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (!st)
        st = ropeqk_scores(ctx, &pr->p, &pr->q, pr->qd, &pr->k, pr->kd, NULL, pr->kpos, &pr->o, pr->out);
    if (!st)
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
    for (long n = 1; n <= n_calls; n++) {
        fault_arm(f, n);
        st = run(pr);
        bool fired = fault_fired();
        fault_disarm();
        cr_expect(fired, "%s call %ld not reached", fault_names[f], n);
        cr_expect(st == ROPEQK_ERR_BACKEND || st == ROPEQK_ERR_OUT_OF_HOST_MEMORY,
                  "%s call %ld of %ld: status %d (%s)", fault_names[f], n, n_calls, st, ropeqk_status_string(st));
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
