/* The neutral run API with the caller's native objects (ropeqk_opencl.h, ropeqk_vulkan.h): buffers
 * wrapped in and handles out, runs waiting for a caller's OpenCL user event or Vulkan timeline
 * semaphore, bounded waits that time out with a message naming what was waited for (and succeed once
 * the caller signals), contexts on a caller's device with and without timeline semaphores, and the
 * backends' own paged entry points refusing missing arguments (writing nothing). Each
 * test runs on its backend's context ('run_interop' on the default device, 'run_interop_vulkan') and
 * skips on the other. */
#include "paged_fixture.h"
#if RQ_HAVE_OPENCL
#include "ropeqk_opencl.h"
#endif
#if RQ_HAVE_VULKAN
#include "ropeqk_vulkan.h"
#endif

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(run_interop, .init = th_ctx_init, .fini = th_ctx_fini);

enum { B = 1, HQ = 2, HKV = 1, SQ = 3, SK = 5, D = 8 };
#define QB ((size_t)(B * HQ * SQ * D * 4))
#define KB ((size_t)(B * HKV * SK * D * 4))
#define OB ((size_t)(B * HQ * SQ * SK * 4))

/* A scores plan, its inputs in buffers of the context, and the output of a plain run of it. */
typedef struct {
    ropeqk_plan *pl;
    ropeqk_buffer *q, *k, *o;
    float qh[QB / 4], kh[KB / 4], want[OB / 4];
} mini;

static void mini_make(ropeqk_ctx *ctx, mini *m)
{
    uint64_t rng = 2705;
    for (size_t i = 0; i < QB / 4; i++)
        m->qh[i] = (float)rqs_uniform(&rng);
    for (size_t i = 0; i < KB / 4; i++)
        m->kh[i] = (float)rqs_uniform(&rng);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D),
                          .k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D),
                          .out = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK)};
    ropeqk_default_params(&d.params);
    TH_OK(ropeqk_plan_create(ctx, &d, &m->pl));
    TH_OK(ropeqk_buffer_create(ctx, QB, 0, &m->q));
    TH_OK(ropeqk_buffer_create(ctx, KB, 0, &m->k));
    TH_OK(ropeqk_buffer_create(ctx, OB, 0, &m->o));
    TH_OK(ropeqk_buffer_write(m->q, 0, m->qh, QB));
    TH_OK(ropeqk_buffer_write(m->k, 0, m->kh, KB));
    ropeqk_args a = {.q = {m->q, 0}, .k = {m->k, 0}, .out = {m->o, 0}};
    TH_OK(ropeqk_plan_run(m->pl, &a, NULL, 0, NULL, NULL));
    TH_OK(ropeqk_buffer_read(m->o, 0, m->want, OB));
    TH_OK(ropeqk_buffer_fill(m->o, 0, OB, 0));
}

static void mini_expect(const mini *m, const char *what)
{
    float got[OB / 4];
    TH_OK(ropeqk_buffer_read(m->o, 0, got, OB));
    cr_expect(memcmp(got, m->want, OB) == 0, "%s: the output differs from a plain run's", what);
}

static void mini_free(mini *m)
{
    ropeqk_buffer_destroy(m->q), ropeqk_buffer_destroy(m->k), ropeqk_buffer_destroy(m->o);
    ropeqk_plan_destroy(m->pl);
}

/* A run of m waiting for `gate` (not yet signalled): its event and the blocking calls time out,
 * naming what they waited for; then signal() opens the gate and everything completes. */
static void gate_run(ropeqk_ctx *ctx, mini *m, ropeqk_event *gate, void (*signal)(void *), void *user)
{
    ropeqk_args a = {.q = {m->q, 0}, .k = {m->k, 0}, .out = {m->o, 0}};
    ropeqk_event *done = NULL;
    TH_OK(ropeqk_plan_run(m->pl, &a, NULL, 1, &gate, &done));
    cr_assert_eq(ropeqk_event_wait(done, 20 * 1000000ull), ROPEQK_ERR_TIMEOUT);
    cr_expect(strstr(ropeqk_last_error(), "ropeqk_event_wait: ropeqk_plan_run (scores) did not complete"), "%s",
              ropeqk_last_error());
    cr_assert_eq(ropeqk_event_wait(gate, 0), ROPEQK_ERR_TIMEOUT);
    cr_expect(strstr(ropeqk_last_error(), "the caller's"), "%s", ropeqk_last_error());
    cr_assert_eq(setenv("ROPEQK_WAIT_TIMEOUT_MS", "30", 1), 0);
    float got[OB / 4];
    cr_expect_eq(ropeqk_buffer_read(m->o, 0, got, OB), ROPEQK_ERR_TIMEOUT);
    cr_expect(strstr(ropeqk_last_error(), "ropeqk_buffer_read"), "%s", ropeqk_last_error());
    cr_expect_eq(ropeqk_ctx_finish(ctx), ROPEQK_ERR_TIMEOUT);
    cr_expect(strstr(ropeqk_last_error(), "ropeqk_ctx_finish"), "%s", ropeqk_last_error());
    unsetenv("ROPEQK_WAIT_TIMEOUT_MS");
    signal(user);
    TH_OK(ropeqk_event_wait(done, UINT64_MAX));
    TH_OK(ropeqk_event_wait(gate, 0));
    mini_expect(m, "a run after the caller's event");
    ropeqk_event_release(done);
    ropeqk_event_release(gate);
}

/* ---- OpenCL ---------------------------------------------------------------------------------- */
#if RQ_HAVE_OPENCL
static void cl_open(void *ue) { cr_assert_eq(clSetUserEventStatus((cl_event)ue, CL_COMPLETE), CL_SUCCESS); }

Test(run_interop, opencl_user_event)
{
    TH_SKIP_ON_VULKAN(th_ctx, "an OpenCL user event");
    mini m;
    mini_make(th_ctx, &m);
    cl_int err = CL_SUCCESS;
    cl_event ue = clCreateUserEvent(ropeqk_opencl_context(th_ctx), &err);
    cr_assert_eq(err, CL_SUCCESS);
    ropeqk_event *gate = NULL;
    TH_OK(ropeqk_opencl_event_wrap(th_ctx, ue, &gate));
    cr_expect_eq(ropeqk_opencl_event_handle(gate), ue);
    gate_run(th_ctx, &m, gate, cl_open, ue);
    clReleaseEvent(ue);
    /* an event handed back is a cl_event the caller can wait on */
    ropeqk_args a = {.q = {m.q, 0}, .k = {m.k, 0}, .out = {m.o, 0}};
    ropeqk_event *e = NULL;
    TH_OK(ropeqk_plan_run(m.pl, &a, NULL, 0, NULL, &e));
    cl_event h = ropeqk_opencl_event_handle(e);
    cr_assert(h);
    cr_expect_eq(clWaitForEvents(1, &h), CL_SUCCESS);
    ropeqk_event_release(e);
    mini_free(&m);
}

Test(run_interop, opencl_buffer_wrap)
{
    TH_SKIP_ON_VULKAN(th_ctx, "OpenCL buffers");
    mini m;
    mini_make(th_ctx, &m);
    cl_int err = CL_SUCCESS;
    cl_mem q = clCreateBuffer(ropeqk_opencl_context(th_ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, QB + 1, m.qh,
                              &err);
    cr_assert_eq(err, CL_SUCCESS);
    ropeqk_buffer *w = NULL;
    TH_OK(ropeqk_opencl_buffer_wrap(th_ctx, q, &w));
    cr_expect_eq(ropeqk_buffer_size(w), QB + 1);
    cr_expect_eq(ropeqk_opencl_buffer_mem(w), q);
    cr_expect_not_null(ropeqk_opencl_buffer_mem(m.q));
    ropeqk_args a = {.q = {w, 0}, .k = {m.k, 0}, .out = {m.o, 0}};
    TH_OK(ropeqk_plan_run(m.pl, &a, NULL, 0, NULL, NULL));
    mini_expect(&m, "q in the caller's cl_mem");
    ropeqk_buffer_destroy(w);
    cl_uint refs = 0;
    cr_assert_eq(clGetMemObjectInfo(q, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL), CL_SUCCESS);
    cr_expect_eq(refs, 1, "the wrap kept a reference");
    clReleaseMemObject(q);
    /* objects of another cl_context */
    cl_device_id dev = ropeqk_opencl_device(th_ctx);
    cl_context cx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_mem fm = clCreateBuffer(cx, CL_MEM_READ_WRITE, 64, NULL, &err);
    cl_event fe = clCreateUserEvent(cx, &err);
    ropeqk_event *e = NULL;
    cr_expect_eq(ropeqk_opencl_buffer_wrap(th_ctx, fm, &w), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(w);
    cr_expect_eq(ropeqk_opencl_event_wrap(th_ctx, fe, &e), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(e);
    cr_expect_eq(ropeqk_opencl_buffer_wrap(th_ctx, NULL, &w), ROPEQK_ERR_NULL_POINTER);
    clSetUserEventStatus(fe, CL_COMPLETE);
    clReleaseEvent(fe), clReleaseMemObject(fm), clReleaseContext(cx);
    cr_expect_null(ropeqk_opencl_buffer_mem(NULL));
    cr_expect_null(ropeqk_opencl_event_handle(NULL));
    mini_free(&m);
}
#endif

/* ---- Vulkan ----------------------------------------------------------------------------------- */
#if RQ_HAVE_VULKAN
static void skip_unless_vulkan(void)
{
    if (!th_is_vulkan(th_ctx)) {
        ropeqk_ctx_destroy(th_ctx);
        th_ctx = NULL;
        cr_skip_test("Vulkan only");
    }
}

typedef struct {
    VkDevice dev;
    VkSemaphore sem;
} vk_gate;

static void vk_open(void *user)
{
    vk_gate *g = user;
    VkSemaphoreSignalInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = g->sem, .value = 1};
    cr_assert_eq(vkSignalSemaphore(g->dev, &si), VK_SUCCESS);
}

Test(run_interop, vulkan_timeline_semaphore)
{
    skip_unless_vulkan();
    mini m;
    mini_make(th_ctx, &m);
    vk_gate g = {ropeqk_vulkan_device(th_ctx), VK_NULL_HANDLE};
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    cr_assert_eq(vkCreateSemaphore(g.dev, &sci, NULL, &g.sem), VK_SUCCESS);
    ropeqk_event *gate = NULL;
    TH_OK(ropeqk_vulkan_event_wrap(th_ctx, g.sem, 1, &gate));
    uint64_t v = 0;
    cr_expect_eq(ropeqk_vulkan_event_semaphore(gate, &v), g.sem);
    cr_expect_eq(v, 1);
    gate_run(th_ctx, &m, gate, vk_open, &g);
    /* an event handed back is the context's timeline at a value the caller can wait for */
    ropeqk_args a = {.q = {m.q, 0}, .k = {m.k, 0}, .out = {m.o, 0}};
    ropeqk_event *e = NULL;
    TH_OK(ropeqk_plan_run(m.pl, &a, NULL, 0, NULL, &e));
    VkSemaphore s = ropeqk_vulkan_event_semaphore(e, &v);
    cr_assert(s && v > 0);
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &s,
                              .pValues = &v};
    cr_expect_eq(vkWaitSemaphores(g.dev, &wi, 10ull * 1000000000ull), VK_SUCCESS);
    ropeqk_event_release(e);
    TH_OK(ropeqk_ctx_finish(th_ctx));
    vkDestroySemaphore(g.dev, g.sem, NULL);
    mini_free(&m);
}

Test(run_interop, vulkan_buffer_wrap)
{
    skip_unless_vulkan();
    mini m;
    mini_make(th_ctx, &m);
    ropeqk_buffer *big = NULL;
    TH_OK(ropeqk_buffer_create(th_ctx, 1024, 0, &big));
    unsigned char img[1024], got[64];
    for (int i = 0; i < 1024; i++)
        img[i] = (unsigned char)(i * 13);
    TH_OK(ropeqk_buffer_write(big, 0, img, 1024));
    VkDeviceSize off = 1, range = 1;
    VkBuffer h = ropeqk_vulkan_buffer_handle(big, &off, &range);
    cr_assert(h);
    cr_expect(off == 0 && range == 1024);
    ropeqk_buffer *w = NULL, *w2 = NULL;
    TH_OK(ropeqk_vulkan_buffer_wrap(th_ctx, h, 256, 512, &w));
    cr_expect_eq(ropeqk_buffer_size(w), 512);
    TH_OK(ropeqk_buffer_read(w, 4, got, 64));
    cr_expect_arr_eq(got, img + 260, 64, "a wrapped range reads its bytes of the buffer");
    TH_OK(ropeqk_buffer_write(w, 0, "wrapped!", 8));
    TH_OK(ropeqk_buffer_read(big, 256, got, 8));
    cr_expect_arr_eq(got, "wrapped!", 8);
    cr_expect_eq(ropeqk_buffer_read(w, 500, got, 16), ROPEQK_ERR_BUFFER_TOO_SMALL);
    /* runs on wrapped ranges: q in one, out in another of the same VkBuffer; overlaps seen across them */
    TH_OK(ropeqk_buffer_write(w, 0, m.qh, QB));
    TH_OK(ropeqk_vulkan_buffer_wrap(th_ctx, h, 512, 512, &w2));
    ropeqk_args a = {.q = {w, 0}, .k = {m.k, 0}, .out = {w2, 0}};
    TH_OK(ropeqk_plan_run(m.pl, &a, NULL, 0, NULL, NULL));
    float o[OB / 4];
    TH_OK(ropeqk_buffer_read(w2, 0, o, OB));
    cr_expect(memcmp(o, m.want, OB) == 0, "a run on wrapped ranges differs from a plain run's");
    ropeqk_args ov = {.q = {w, 256 - 8}, .k = {m.k, 0}, .out = {w2, 0}}; /* q's end reaches into out */
    cr_expect_eq(ropeqk_plan_run(m.pl, &ov, NULL, 0, NULL, NULL), ROPEQK_ERR_OVERLAP, "%s", ropeqk_last_error());
    ropeqk_buffer *x = (ropeqk_buffer *)1;
    cr_expect_eq(ropeqk_vulkan_buffer_wrap(th_ctx, h, 2, 16, &x), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(x);
    cr_expect_eq(ropeqk_vulkan_buffer_wrap(th_ctx, h, 0, VK_WHOLE_SIZE, &x), ROPEQK_ERR_BAD_PARAM);
    cr_expect_eq(ropeqk_vulkan_buffer_wrap(th_ctx, h, 0, 0, &x), ROPEQK_ERR_BAD_PARAM);
    cr_expect_eq(ropeqk_vulkan_buffer_wrap(th_ctx, VK_NULL_HANDLE, 0, 16, &x), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_vulkan_buffer_handle(NULL, &off, &range), VK_NULL_HANDLE);
#if RQ_HAVE_OPENCL
    cr_expect_null(ropeqk_opencl_buffer_mem(w));
    cr_expect_eq(ropeqk_opencl_buffer_wrap(th_ctx, (cl_mem)(uintptr_t)64, &x), ROPEQK_ERR_BAD_PARAM);
#endif
    ropeqk_buffer_destroy(w), ropeqk_buffer_destroy(w2), ropeqk_buffer_destroy(big);
    mini_free(&m);
}

/* A context on th_ctx's own Vulkan objects: without the timeline declaration the runs on device
 * memory are refused; with it they work, and accept events of th_ctx (the same VkDevice). */
Test(run_interop, vulkan_borrowed_device)
{
    skip_unless_vulkan();
    uint32_t fam = 0;
    ropeqk_vulkan_ctx_params p = {.instance = ropeqk_vulkan_instance(th_ctx),
                                  .physical_device = ropeqk_vulkan_physical_device(th_ctx),
                                  .device = ropeqk_vulkan_device(th_ctx)};
    p.queue = ropeqk_vulkan_queue(th_ctx, &fam);
    p.queue_family = fam;
    ropeqk_ctx *plain = NULL, *tl = NULL;
    TH_OK(ropeqk_vulkan_ctx_create(&p, &plain));
    ropeqk_buffer *b = (ropeqk_buffer *)1;
    cr_expect_eq(ropeqk_buffer_create(plain, 64, 0, &b), ROPEQK_ERR_BAD_PARAM);
    cr_expect(strstr(ropeqk_last_error(), "timeline_semaphore"), "%s", ropeqk_last_error());
    cr_expect_null(b);
    ropeqk_ctx_destroy(plain);
    p.timeline_semaphore = 1;
    TH_OK(ropeqk_vulkan_ctx_create(&p, &tl));
    mini m, n;
    mini_make(tl, &m);
    mini_make(th_ctx, &n);
    ropeqk_args a = {.q = {n.q, 0}, .k = {n.k, 0}, .out = {n.o, 0}};
    ropeqk_event *first = NULL, *second = NULL;
    TH_OK(ropeqk_plan_run(n.pl, &a, NULL, 0, NULL, &first));
    ropeqk_args b2 = {.q = {m.q, 0}, .k = {m.k, 0}, .out = {m.o, 0}};
    TH_OK(ropeqk_plan_run(m.pl, &b2, NULL, 1, &first, &second));
    TH_OK(ropeqk_event_wait(second, UINT64_MAX));
    mini_expect(&m, "the borrowed context's run");
    mini_expect(&n, "th_ctx's run");
    ropeqk_event_release(first), ropeqk_event_release(second);
    mini_free(&m), mini_free(&n);
    ropeqk_ctx_destroy(tl);
}
#endif

/* ---- the backends' own paged entry points ------------------------------------------------------ */
/* Each backend's paged call with no arguments at all (and OpenCL's with a wait list missing) is
 * refused, and writes nothing (moved from test_paged_invalid.c, which runs the neutral calls). */
Test(run_interop, paged_entry_points)
{
    pcase c = base_case("entry points");
    c.Hq = 4, c.Hkv = 2, c.D = 32, c.Dv = 32, c.ps = 16, c.maxp = 4, c.n_seqs = 3, c.max_seqs = 3;
    c.spare_pages = 2, c.len_max = 64, c.kdt = ROPEQK_F16;
    int64_t lens[] = {64, 33, 49};
    memcpy(c.lens, lens, sizeof lens);
    uint64_t rng = 3;
    pdata d;
    pdata_make(&c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    TH_OK(ropeqk_plan_create(th_ctx, &desc, &pl));
    pbufs b;
    pbufs_make(&d, &b, false);
    ropeqk_paged_batch good = batch_of(&c, &d);
    ropeqk_paged_args ga = args_of(&c, &b);
    bool checked = false;
#if RQ_HAVE_OPENCL
    if (!th_is_vulkan(th_ctx)) {
#define CLM(m) ((ropeqk_opencl_mem){ropeqk_opencl_buffer_mem((m).buf), (size_t)(m).offset})
        ropeqk_opencl_paged_args oa = {.q = CLM(ga.q), .k_cache = CLM(ga.k_cache), .v_cache = CLM(ga.v_cache),
                                       .out = CLM(ga.out), .lse = CLM(ga.lse)};
#undef CLM
        cr_expect_eq(ropeqk_opencl_paged_enqueue(pl, NULL, NULL, &good, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
        cr_expect_eq(ropeqk_opencl_paged_enqueue(pl, NULL, &oa, &good, 1, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
        cr_assert_eq(clFinish(ropeqk_opencl_queue(th_ctx)), CL_SUCCESS);
        checked = true;
    }
#endif
#if RQ_HAVE_VULKAN
    if (th_is_vulkan(th_ctx)) { /* refused before the command buffer is touched: a fake handle is enough */
        ropeqk_mem m[5] = {ga.q, ga.k_cache, ga.v_cache, ga.out, ga.lse};
        ropeqk_vulkan_mem v[5];
        for (int i = 0; i < 5; i++) {
            VkDeviceSize off = 0, range = 0;
            v[i].buf = ropeqk_vulkan_buffer_handle(m[i].buf, &off, &range);
            v[i].offset = off + m[i].offset, v[i].range = range - m[i].offset;
        }
        ropeqk_vulkan_paged_args va = {.q = v[0], .k_cache = v[1], .v_cache = v[2], .out = v[3], .lse = v[4]};
        VkCommandBuffer fake = (VkCommandBuffer)(uintptr_t)0x3000;
        cr_expect_eq(ropeqk_vulkan_paged_record(pl, fake, NULL, &good), ROPEQK_ERR_NULL_POINTER);
        cr_expect_eq(ropeqk_vulkan_paged_record(pl, VK_NULL_HANDLE, &va, &good), ROPEQK_ERR_NULL_POINTER);
        checked = true;
    }
#endif
    /* nothing written: out still holds pbufs_make's 0x5A */
    unsigned char *h = malloc(d.ob);
    cr_assert(h);
    cr_assert_eq(dm_read(b.o, h), ROPEQK_SUCCESS);
    for (size_t i = 0; i < d.ob; i++)
        if (h[i] != 0x5A) {
            cr_expect_fail("out: byte %zu changed by a refused call", i);
            break;
        }
    free(h);
    pbufs_free(&b);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
    if (!checked)
        cr_skip_test("no backend of this build runs the context");
}

/* ---- which backend, and its validation state, without a backend header ----------------------- */
/* ropeqk_ctx_backend and ropeqk_ctx_diagnostics against what the backend headers say. */
Test(run_interop, backend_and_diagnostics)
{
    cr_expect_eq(ropeqk_ctx_backend(NULL), ROPEQK_BACKEND_NONE);
    cr_expect_eq(ropeqk_ctx_diagnostics(th_ctx, NULL), ROPEQK_ERR_NULL_POINTER);
    ropeqk_diagnostics d, all;
    memset(&d, 0xAB, sizeof d);
    TH_OK(ropeqk_ctx_diagnostics(th_ctx, &d));
    TH_OK(ropeqk_ctx_diagnostics(NULL, &all));
    ropeqk_backend be = ropeqk_ctx_backend(th_ctx);
    cr_expect_eq(be, th_is_vulkan(th_ctx) ? ROPEQK_BACKEND_VULKAN : ROPEQK_BACKEND_OPENCL);
#if RQ_HAVE_OPENCL
    cr_expect_eq(ropeqk_opencl_context(th_ctx) != NULL, be == ROPEQK_BACKEND_OPENCL);
    if (be == ROPEQK_BACKEND_OPENCL) { /* OpenCL has no validation layer */
        cr_expect_eq(d.validation, ROPEQK_VALIDATION_OFF);
        cr_expect_eq(d.messages, 0u);
        cr_expect_str_empty(d.first);
    }
#endif
#if RQ_HAVE_VULKAN
    cr_expect_eq(ropeqk_vulkan_device(th_ctx) != VK_NULL_HANDLE, be == ROPEQK_BACKEND_VULKAN);
    char first[512];
    cr_expect_eq(all.messages, ropeqk_vulkan_validation_messages(NULL, first, sizeof first));
    if (be == ROPEQK_BACKEND_VULKAN) {
        const char *v = getenv("ROPEQK_VULKAN_VALIDATION");
        bool asked = v && (!strcmp(v, "1") || !strcmp(v, "required") || !strcmp(v, "auto"));
        /* the suite's context was made (th_ctx_init skips where "auto" found no layer): on when asked */
        cr_expect_eq(d.validation, asked ? ROPEQK_VALIDATION_ON : ROPEQK_VALIDATION_OFF, "%s: %d", v ? v : "unset",
                     (int)d.validation);
        cr_expect_eq(all.validation, d.validation);
        cr_expect_eq(d.messages, ropeqk_vulkan_validation_messages(th_ctx, first, sizeof first));
        /* a context on the caller's objects: the caller's instance, not validated by the library */
        uint32_t fam = 0;
        ropeqk_vulkan_ctx_params p = {.instance = ropeqk_vulkan_instance(th_ctx),
                                      .physical_device = ropeqk_vulkan_physical_device(th_ctx),
                                      .device = ropeqk_vulkan_device(th_ctx)};
        p.queue = ropeqk_vulkan_queue(th_ctx, &fam);
        p.queue_family = fam;
        ropeqk_ctx *b = NULL;
        TH_OK(ropeqk_vulkan_ctx_create(&p, &b));
        cr_expect_eq(ropeqk_ctx_backend(b), ROPEQK_BACKEND_VULKAN);
        TH_OK(ropeqk_ctx_diagnostics(b, &d));
        cr_expect_eq(d.validation, ROPEQK_VALIDATION_OFF);
        ropeqk_ctx_destroy(b);
    }
#endif
}
