/* Fault injection at the neutral run API's call sites (src/core/buffer.c, run.c; src/opencl/cl_run.c;
 * src/vulkan/vk_run.c, vk_submit.c): on one context and plan (made before anything is armed), a
 * sequence of buffer creations, writes (direct and staged), a run, a copy waiting for it, a read and a
 * fill; the n-th call of a wrapped entry point or allocator fails, for n = 1, 2, ... while the failure
 * is reached (command buffers and scratch are reused after the first sequence, so later sequences
 * reach fewer calls). Each failing sequence returns the injected status, nothing leaks (the ASan
 * build's th_leak_check), no validation message appears, and the next sequence on the same context
 * succeeds with bit-identical results. Runs on the default device ('fault_run') and on Vulkan
 * ('fault_run_vulkan'); the other backend's entry points are skipped. */
#include "harness.h"
#include "shim.h"

#include <criterion/criterion.h>
#include <string.h>

TestSuite(fault_run, .init = th_ctx_init, .fini = th_ctx_fini);

enum { B = 1, HQ = 2, HKV = 1, SQ = 4, SK = 9, D = 16 };
#define QB (B * HQ * SQ * D)
#define KB (B * HKV * SK * D)
#define OB (B * HQ * SQ * SK)

typedef struct {
    float q[QB], k[KB], out[OB];
} problem;

/* The sequence (no allocation of its own, so that only the library's are counted): the first failing
 * status, or success with out read back. Everything made is released either way. */
static ropeqk_status sequence(ropeqk_plan *pl, problem *pr)
{
    ropeqk_buffer *q = NULL, *k = NULL, *o = NULL, *back = NULL;
    ropeqk_event *ran = NULL, *copied = NULL;
    ropeqk_status st = ropeqk_buffer_create(th_ctx, sizeof pr->q, ROPEQK_BUFFER_HOST_VISIBLE, &q);
    if (!st)
        st = ropeqk_buffer_create(th_ctx, sizeof pr->k, 0, &k);
    if (!st)
        st = ropeqk_buffer_create(th_ctx, sizeof pr->out, 0, &o);
    if (!st)
        st = ropeqk_buffer_create(th_ctx, sizeof pr->out, 0, &back);
    if (!st)
        st = ropeqk_buffer_write(q, 0, pr->q, sizeof pr->q);
    if (!st)
        st = ropeqk_buffer_write(k, 0, pr->k, sizeof pr->k);
    ropeqk_args a = {.q = {q, 0}, .k = {k, 0}, .out = {o, 0}};
    if (!st)
        st = ropeqk_plan_run(pl, &a, NULL, 0, NULL, &ran);
    ropeqk_copy c = {back, 0, o, 0, sizeof pr->out};
    if (!st)
        st = ropeqk_buffer_copy(&c, 1, 1, &ran, &copied);
    if (!st)
        st = ropeqk_event_wait(copied, UINT64_MAX);
    if (!st)
        st = ropeqk_buffer_read(back, 0, pr->out, sizeof pr->out);
    if (!st)
        st = ropeqk_buffer_fill(o, 0, sizeof pr->out, 0);
    ropeqk_status fin = ropeqk_ctx_finish(th_ctx); /* nothing may still run on the buffers */
    if (!st)
        st = fin;
    ropeqk_event_release(ran), ropeqk_event_release(copied);
    ropeqk_buffer_destroy(q), ropeqk_buffer_destroy(k), ropeqk_buffer_destroy(o), ropeqk_buffer_destroy(back);
    return st;
}

static void sweep(fault_fn f, bool vulkan_fn)
{
    if (f != F_MALLOC && th_is_vulkan(th_ctx) != vulkan_fn) {
        ropeqk_ctx_destroy(th_ctx);
        th_ctx = NULL;
        cr_skip_test("%s: another backend's entry point", fault_names[f]);
    }
    static problem pr;
    uint64_t rng = 2706;
    for (int i = 0; i < QB; i++)
        pr.q[i] = (float)rqs_uniform(&rng);
    for (int i = 0; i < KB; i++)
        pr.k[i] = (float)rqs_uniform(&rng);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D),
                          .k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D),
                          .out = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK)};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    /* armed from the context's first neutral call on (its command pool, the first command buffers);
     * `want`: the first unfaulted sequence's scores, which every later one must equal */
    float want[OB];
    bool have_want = false;
    long n = 1;
    for (;; n++) {
        fault_arm(f, n);
        ropeqk_status st = sequence(pl, &pr);
        bool fired = fault_fired();
        fault_disarm();
        if (fired) {
            cr_expect(st == ROPEQK_ERR_BACKEND || st == ROPEQK_ERR_OUT_OF_HOST_MEMORY,
                      "%s call %ld: status %d (%s: %s)", fault_names[f], n, st, ropeqk_status_string(st),
                      ropeqk_last_error());
            memset(pr.out, 0, sizeof pr.out);
            st = sequence(pl, &pr);
        }
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s call %ld%s: %s", fault_names[f], n, fired ? ", the sequence after" : "",
                     ropeqk_last_error());
        if (!have_want)
            memcpy(want, pr.out, sizeof want), have_want = true;
        cr_expect(memcmp(pr.out, want, sizeof want) == 0, "%s call %ld: scores differ", fault_names[f], n);
        if (!fired)
            break;
    }
    cr_expect_gt(n, 1, "%s is never called", fault_names[f]);
    cr_log_info("%s: %ld failing calls swept", fault_names[f], n - 1);
    ropeqk_plan_destroy(pl);
}

Test(fault_run, malloc) { sweep(F_MALLOC, false); }
Test(fault_run, cl_create_buffer) { sweep(F_CREATE_BUFFER, false); }
Test(fault_run, cl_enqueue_ndrange) { sweep(F_ENQUEUE_NDRANGE, false); }
Test(fault_run, cl_enqueue_read) { sweep(F_ENQUEUE_READ, false); }
Test(fault_run, cl_enqueue_write) { sweep(F_ENQUEUE_WRITE, false); }
Test(fault_run, vk_create_buffer) { sweep(F_VK_CREATE_BUFFER, true); }
Test(fault_run, vk_allocate_memory) { sweep(F_VK_ALLOCATE_MEMORY, true); }
Test(fault_run, vk_map_memory) { sweep(F_VK_MAP_MEMORY, true); }
Test(fault_run, vk_queue_submit) { sweep(F_VK_QUEUE_SUBMIT, true); }
Test(fault_run, vk_allocate_command_buffers) { sweep(F_VK_ALLOCATE_COMMAND_BUFFERS, true); }
