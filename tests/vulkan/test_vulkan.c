/* The Vulkan backend's own API (include/ropeqk_vulkan.h): device list and specs, borrowed objects,
 * the record path's buffer checks, backends not mixed up; attention and scores over long rows
 * (lavapipe's loop limit, see attention_long_rows_wide_heads); the OpenCL calls refusing Vulkan
 * objects and the other way round: tests/interop/test_backends_apart.c. Runs on the first Vulkan device
 * (lavapipe in CI) with the Khronos validation layer: th_leak_check fails a test that made the layer
 * say anything. The backend-neutral suites (sweep, device, invalid, scaling, attn_sweep, plan,
 * threads, config, tune, paged, paged_invalid) also run on Vulkan (tests/meson.build): decode plans
 * over a generation loop and their refused steps are test_plan.c's, one context from several threads
 * test_threads.c's. */
#include "harness.h"
#include "ropeqk_vulkan.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

TestSuite(vulkan, .init = th_skip_without_validation, .fini = th_leak_check);

static ropeqk_ctx *vk_ctx(const char *spec)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = spec;
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (st == ROPEQK_ERR_NO_DEVICE)
        cr_skip_test("no Vulkan device: %s", ropeqk_last_error());
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(st), ropeqk_last_error());
    return ctx;
}

Test(vulkan, device_list_and_specs)
{
    uint32_t n = 0;
    ropeqk_status st = ropeqk_vulkan_list_devices(NULL, 0, &n);
    if (st == ROPEQK_ERR_NO_DEVICE)
        cr_skip_test("no Vulkan driver");
    cr_assert_eq(st, ROPEQK_SUCCESS);
    cr_assert_gt(n, 0);
    ropeqk_vulkan_device_info info[4];
    cr_assert_eq(ropeqk_vulkan_list_devices(info, 4, &n), ROPEQK_SUCCESS);
    cr_expect_gt(strlen(info[0].name), 0);
    cr_expect_eq(ropeqk_vulkan_list_devices(NULL, 1, &n), ROPEQK_ERR_NULL_POINTER);

    ropeqk_ctx *ctx = vk_ctx("vulkan:0");
    cr_expect(strstr(ropeqk_ctx_device_description(ctx), info[0].name) != NULL, "%s",
              ropeqk_ctx_device_description(ctx));
    const char *backend = NULL;
    cr_expect_eq(ropeqk_ctx_backend_error(ctx, &backend), 0);
    cr_expect_str_eq(backend, "Vulkan");
    ropeqk_ctx_destroy(ctx);
    /* a name substring reaches a Vulkan device when no OpenCL device has that name */
    char needle[16];
    snprintf(needle, sizeof needle, "%.6s", info[0].name);
    ropeqk_ctx_params cp = {.device = needle};
    ropeqk_ctx *x = NULL;
    cr_expect_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_SUCCESS, "%s: %s", needle, ropeqk_last_error());
    ropeqk_ctx_destroy(x);
    const char *bad[] = {"vulkan:99", "vulkan:x", "vulkan:", "vulkan:-1", "opencl:vulkan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        x = NULL;
        cp.device = bad[i];
        cr_expect_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_ERR_NO_DEVICE, "%s", bad[i]);
        cr_expect_null(x);
    }
}

Test(vulkan, record_path_buffer_checks)
{
    ropeqk_ctx *ctx = vk_ctx("vulkan");
    th_case c = th_case_small();
    th_buf q, k, o;
    const int64_t qe[4] = {1, 2, 6, 8}, ke[4] = {1, 1, 5, 8}, oe[4] = {1, 2, 6, 5};
    cr_assert(th_alloc(&q, ROPEQK_F32, qe, TH_BHSD) && th_alloc(&k, ROPEQK_F32, ke, TH_BHSD) &&
              th_alloc(&o, ROPEQK_F32, oe, TH_BHSD));
    uint64_t rng = 7;
    th_fill_random(&q, &rng);
    th_fill_random(&k, &rng);
    /* the valid case through the harness's canaried record path first */
    c.enqueue = true;
    th_result r = th_run(ctx, &c, 11);
    cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    cr_expect(r.guards_ok);
    cr_expect_leq(r.max_err, 1e-5);

    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = c.p, .q = q.t, .k = k.t, .out = o.t,
                          .positions = ROPEQK_POS_ARRAYS};
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS);
    /* buffers are never touched by a refused record: fake handles are enough for the checks */
    VkBuffer a = (VkBuffer)(uintptr_t)0x1000, b = (VkBuffer)(uintptr_t)0x2000;
    /* q: 96 floats = 384 bytes; k: 40 floats = 160 bytes; out: 60 floats = 240 bytes */
    ropeqk_vulkan_mem mq = {a, 0, 384}, mk = {a, 4096, 160}, mo = {b, 0, 240}, none = {0};
    struct {
        const char *name;
        ropeqk_vulkan_mem q, k, qp, kp, o;
        ropeqk_status want;
    } t[] = {
        {"q range too small", {a, 0, 380}, mk, none, none, mo, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"k range too small", mq, {a, 4096, 100}, none, none, mo, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"out range too small", mq, mk, none, none, {b, 0, 200}, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"misaligned offset", {a, 2, 384}, mk, none, none, mo, ROPEQK_ERR_BAD_STRIDES},
        {"q positions too short", mq, mk, {b, 1024, 20}, none, mo, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"k positions misaligned", mq, mk, none, {b, 1025, 64}, mo, ROPEQK_ERR_BAD_STRIDES},
        {"output overlaps q", mq, mk, none, none, {a, 200, 240}, ROPEQK_ERR_OVERLAP},
        {"output overlaps k", mq, mk, none, none, {a, 4096 + 100, 240}, ROPEQK_ERR_OVERLAP},
        {"output overlaps positions", mq, mk, {b, 100, 24}, none, mo, ROPEQK_ERR_OVERLAP},
        {"NULL q buffer", {0, 0, 384}, mk, none, none, mo, ROPEQK_ERR_NULL_POINTER},
        {"NULL out buffer", mq, mk, none, none, {0, 0, 240}, ROPEQK_ERR_NULL_POINTER},
    };
    VkCommandBuffer fake_cmd = (VkCommandBuffer)(uintptr_t)0x3000;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ropeqk_vulkan_args args = {.q = t[i].q, .k = t[i].k, .q_pos = t[i].qp, .k_pos = t[i].kp, .out = t[i].o};
        ropeqk_status st = ropeqk_vulkan_plan_record(pl, fake_cmd, &args, NULL);
        cr_expect_eq(st, t[i].want, "%s: got %d (%s)", t[i].name, st, ropeqk_status_string(st));
    }
    ropeqk_vulkan_args ok = {.q = mq, .k = mk, .out = mo};
    ropeqk_step step = {5, 0, 0};
    cr_expect_eq(ropeqk_vulkan_plan_record(pl, fake_cmd, &ok, &step), ROPEQK_ERR_BAD_PARAM, "fixed plan, step");
    cr_expect_eq(ropeqk_vulkan_plan_record(pl, VK_NULL_HANDLE, &ok, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_vulkan_plan_record(NULL, fake_cmd, &ok, NULL), ROPEQK_ERR_NULL_POINTER);
    ropeqk_plan_destroy(pl);
    th_free(&q);
    th_free(&k);
    th_free(&o);
    ropeqk_ctx_destroy(ctx);
}

Test(vulkan, borrowed_objects_outlive_the_borrowing_context)
{
    ropeqk_ctx *owner = vk_ctx("vulkan");
    ropeqk_vulkan_ctx_params bp;
    memset(&bp, 0, sizeof bp);
    bp.instance = ropeqk_vulkan_instance(owner);
    bp.physical_device = ropeqk_vulkan_physical_device(owner);
    bp.device = ropeqk_vulkan_device(owner);
    bp.queue = ropeqk_vulkan_queue(owner, &bp.queue_family);
    ropeqk_ctx *b = NULL;
    cr_assert_eq(ropeqk_vulkan_ctx_create(&bp, &b), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    th_case c = th_case_small();
    c.p.causal = 1;
    th_result r = th_run(b, &c, 3);
    cr_expect_eq(r.status, ROPEQK_SUCCESS);
    cr_expect_leq(r.max_err, 1e-5);
    ropeqk_ctx_destroy(b); /* leaves the device and queue alone */
    r = th_run(owner, &c, 4);
    cr_expect_eq(r.status, ROPEQK_SUCCESS);
    bp.device = VK_NULL_HANDLE;
    cr_expect_eq(ropeqk_vulkan_ctx_create(&bp, &b), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_vulkan_ctx_create(NULL, &b), ROPEQK_ERR_NULL_POINTER);
    ropeqk_ctx_destroy(owner);
}

/* Long rows with wide heads, against fp64. lavapipe (llvmpipe) ends every loop of a shader
 * invocation once it has run 65535 iterations in total, silently: before attention.comp split the
 * keys into chunks (one dispatch each, the row state kept between them), Sk 768 with D 128 and
 * Dv 256 already came out wrong with no error. 8192 keys are 27 chunks of 304 keys at Dv 256. */
static void long_attention(ropeqk_ctx *ctx, int64_t Sk, int64_t D, int64_t Dv, int causal, int64_t q_off,
                           int64_t k_off)
{
    const int64_t B = 1, Hq = 2, Hkv = 1, Sq = 40;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = causal;
    p.q_pos_offset = q_off;
    p.k_pos_offset = k_off;
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, D), k = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hkv, Sk, D);
    ropeqk_tensor v = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hkv, Sk, Dv), o = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Dv);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, Dv);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, 1), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, 1);
    float *qd = malloc(sizeof(float) * (size_t)(B * Hq * Sq * D)), *kd = malloc(sizeof(float) * (size_t)(B * Hkv * Sk * D));
    float *vd = malloc(sizeof(float) * (size_t)(B * Hkv * Sk * Dv)), *od = malloc(sizeof(float) * (size_t)(B * Hq * Sq * Dv));
    float *ld = malloc(sizeof(float) * (size_t)(B * Hq * Sq));
    double *o64d = malloc(sizeof(double) * (size_t)(B * Hq * Sq * Dv)), *l64d = malloc(sizeof(double) * (size_t)(B * Hq * Sq));
    cr_assert(qd && kd && vd && od && ld && o64d && l64d);
    uint64_t rng = (uint64_t)(Sk * 1000 + Dv + causal);
    /* scores of magnitude ~10: the running max moves across chunks */
    for (int64_t i = 0; i < B * Hq * Sq * D; i++)
        qd[i] = (float)(rqs_uniform(&rng) * 2.0);
    for (int64_t i = 0; i < B * Hkv * Sk * D; i++)
        kd[i] = (float)(rqs_uniform(&rng) * 2.0);
    for (int64_t i = 0; i < B * Hkv * Sk * Dv; i++)
        vd[i] = (float)rqs_uniform(&rng);
    ropeqk_status st = ropeqk_attention(ctx, &p, &q, qd, &k, kd, &v, vd, NULL, NULL, &o, od, &l, ld);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(st), ropeqk_last_error());
    cr_assert_eq(ropeqk_attention_ref(&p, &q, qd, &k, kd, &v, vd, NULL, NULL, &o64, o64d, &l64, l64d), ROPEQK_SUCCESS);
    double err = 0, lerr = 0;
    int64_t mm = 0;
    cr_assert_eq(ropeqk_attention_max_error(&v, vd, &o, od, &o64, o64d, &l, ld, &l64, l64d, &err, &lerr, &mm),
                 ROPEQK_SUCCESS);
    cr_expect_eq(mm, 0, "Sk %lld D %lld Dv %lld causal %d: %lld mismatched rows", (long long)Sk, (long long)D,
                 (long long)Dv, causal, (long long)mm);
    cr_expect_leq(err, 1e-5, "Sk %lld D %lld Dv %lld causal %d: O error %g", (long long)Sk, (long long)D,
                  (long long)Dv, causal, err);
    cr_expect_leq(lerr, 1e-5, "Sk %lld D %lld Dv %lld causal %d: LSE error %g", (long long)Sk, (long long)D,
                  (long long)Dv, causal, lerr);
    /* rows whose query position precedes every key: O = 0, LSE = -inf, after all the chunks */
    for (int64_t r = 0; r < B * Hq * Sq; r++) {
        int64_t i = r % Sq;
        if (causal && q_off + i < k_off) {
            cr_expect(ld[r] < 0 && isinf(ld[r]), "row %lld: LSE %g", (long long)r, ld[r]);
            for (int64_t d = 0; d < Dv; d++)
                cr_expect_eq(od[r * Dv + d], 0.0f);
        }
    }
    free(qd), free(kd), free(vd), free(od), free(ld), free(o64d), free(l64d);
}

Test(vulkan, attention_long_rows_wide_heads)
{
    ropeqk_ctx *ctx = vk_ctx("vulkan");
    long_attention(ctx, 8192, 128, 256, 0, 0, 0);
    long_attention(ctx, 8192, 128, 256, 1, 8192 - 40, 0);   /* the last row sees every key */
    long_attention(ctx, 8195, 128, 128, 1, 8195 - 40, 0);   /* a chunk cut short at the end */
    long_attention(ctx, 8192, 256, 256, 1, 4000, 4010);     /* 10 rows see no key, the others ~8192 down to 30 */
    ropeqk_ctx_destroy(ctx);
}

Test(vulkan, scores_long_rows)
{
    ropeqk_ctx *ctx = vk_ctx("vulkan");
    th_case c = th_case_small();
    c.Hq = 4, c.Hkv = 2, c.Sq = 33, c.Sk = 8195, c.D = 256;
    for (int causal = 0; causal < 2; causal++) {
        c.p.causal = causal;
        c.p.q_pos_offset = causal ? c.Sk - c.Sq : 0;
        th_result r = th_run(ctx, &c, 77u + (uint64_t)causal);
        cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        cr_expect(r.guards_ok);
        cr_expect_eq(r.mismatch, 0);
        cr_expect_leq(r.max_err, 1e-5, "causal %d: %g", causal, r.max_err);
    }
    ropeqk_ctx_destroy(ctx);
}

/* A dispatch that outlives ROPEQK_WAIT_TIMEOUT_MS: the host call fails, named, instead of waiting
 * forever (issue 30: on an H200 the Vulkan suites had not finished after 228 s and no one could tell
 * whether a dispatch hung). Emulated with a 1 ms limit and an attention call that takes longer (tens
 * of ms on lavapipe; a GPU that finishes it within the millisecond skips, saying so): the status is
 * ROPEQK_ERR_TIMEOUT with VK_TIMEOUT kept as the backend error, the message names the dispatch and
 * the variable, the context refuses further work, and its destruction returns (it waits for the dispatch once more,
 * at least 10 s, so the validation layer sees nothing destroyed in use). Malformed limits are
 * refused. */
static double timed_attention(ropeqk_ctx *ctx, ropeqk_status *st)
{
    const int64_t B = 1, Hq = 4, Hkv = 2, Sq = 128, Sk = 1024, D = 64;
    ropeqk_params p;
    ropeqk_default_params(&p);
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, D), k = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hkv, Sk, D);
    ropeqk_tensor v = k, o = q;
    float *qd = calloc((size_t)(B * Hq * Sq * D), sizeof(float)), *kd = calloc((size_t)(B * Hkv * Sk * D), sizeof(float));
    float *od = calloc((size_t)(B * Hq * Sq * D), sizeof(float));
    cr_assert(qd && kd && od);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *st = ropeqk_attention(ctx, &p, &q, qd, &k, kd, &v, kd, NULL, NULL, &o, od, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(qd), free(kd), free(od);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

Test(vulkan, dispatch_past_the_time_limit_fails_named)
{
    static const char *bad[] = {"0", "-5", "abc", "10ms", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ROPEQK_WAIT_TIMEOUT_MS", bad[i], 1);
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.device = "vulkan";
        ropeqk_ctx *x = NULL;
        ropeqk_status st = ropeqk_ctx_create(&cp, &x);
        if (st == ROPEQK_ERR_NO_DEVICE)
            cr_skip_test("no Vulkan device: %s", ropeqk_last_error());
        cr_expect_eq(st, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_WAIT_TIMEOUT_MS='%s': %s", bad[i], ropeqk_status_string(st));
        cr_expect(strstr(ropeqk_last_error(), "ROPEQK_WAIT_TIMEOUT_MS"), "%s", ropeqk_last_error());
        ropeqk_ctx_destroy(x);
    }
    unsetenv("ROPEQK_WAIT_TIMEOUT_MS");
    const char *validation = getenv("ROPEQK_VULKAN_VALIDATION"); /* the suite's, restored below */
    char keep[32];
    snprintf(keep, sizeof keep, "%s", validation ? validation : "");
    setenv("ROPEQK_VULKAN_VALIDATION", "yes", 1); /* 0, 1, required or auto */
    ropeqk_ctx_params vp = {.device = "vulkan"};
    ropeqk_ctx *vx = NULL;
    cr_expect_eq(ropeqk_ctx_create(&vp, &vx), ROPEQK_ERR_BAD_CONFIG);
    cr_expect(strstr(ropeqk_last_error(), "ROPEQK_VULKAN_VALIDATION='yes'"), "%s", ropeqk_last_error());
    ropeqk_ctx_destroy(vx);
    if (validation)
        setenv("ROPEQK_VULKAN_VALIDATION", keep, 1);
    else
        unsetenv("ROPEQK_VULKAN_VALIDATION");
    setenv("ROPEQK_WAIT_TIMEOUT_MS", "1", 1);
    ropeqk_ctx *ctx = vk_ctx("vulkan");
    ropeqk_status st;
    double t = timed_attention(ctx, &st);
    /* a GPU may finish it within the millisecond; lavapipe (llvmpipe) never does */
    if (st == ROPEQK_SUCCESS && !strstr(ropeqk_ctx_device_description(ctx), "llvmpipe")) {
        char d[256];
        snprintf(d, sizeof d, "%s", ropeqk_ctx_device_description(ctx));
        ropeqk_ctx_destroy(ctx);
        cr_skip_test("%s ran the call in %.2f ms, within the 1 ms limit: no timeout to see", d, t * 1e3);
    }
    const char *backend = NULL;
    cr_expect_eq(st, ROPEQK_ERR_TIMEOUT, "%s", ropeqk_status_string(st));
    cr_expect_eq(ropeqk_ctx_backend_error(ctx, &backend), 2 /* VK_TIMEOUT */, "%s", ropeqk_last_error());
    /* the dispatch named: the call's own, or the upload of its plan's constants (1 ms catches either) */
    const char *e = ropeqk_last_error();
    cr_expect((strstr(e, "Vulkan host call of a attention plan") || strstr(e, "Vulkan buffer upload")) &&
                  strstr(e, "ROPEQK_WAIT_TIMEOUT_MS") && strstr(e, "did not complete within 1.000 ms"),
              "%s", e);
    timed_attention(ctx, &st);
    cr_expect_eq(st, ROPEQK_ERR_TIMEOUT);
    cr_expect(strstr(ropeqk_last_error(), "unusable"), "%s", ropeqk_last_error());
    ropeqk_ctx_destroy(ctx);
    unsetenv("ROPEQK_WAIT_TIMEOUT_MS");
}
