/* Kernel configuration of a context: profiles and where they come from, tuning through the API and
 * the environment (strictly parsed), the vendor switch, and the message of a failed build. Each
 * Criterion test runs in its own process, so setenv() here touches no other test. */
#include "harness.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void no_platform_skip(void)
{
    char why[256];
    ropeqk_ctx *x = th_ctx_or_skip_reason(why, sizeof why);
    if (!x)
        cr_skip_test("%s", why);
    ropeqk_ctx_destroy(x);
}

TestSuite(config, .init = no_platform_skip, .fini = th_leak_check);

static ropeqk_ctx *make(const ropeqk_tuning *t)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    if (t)
        cp.tuning = *t;
    ropeqk_ctx *x = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &x);
    cr_assert_eq(st, ROPEQK_SUCCESS, "ropeqk_ctx_create: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    return x;
}

Test(config, profile_from_env_param_and_device)
{
    ropeqk_tuning t, got;
    const char *why = NULL;
    unsetenv("ROPEQK_PROFILE");
    ropeqk_ctx *x = make(NULL);
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, &why), ROPEQK_SUCCESS);
    cr_expect_neq(got.profile, ROPEQK_PROFILE_AUTO, "auto must resolve to cpu or gpu");
    cr_expect(strncmp(why, "auto: ", 6) == 0, "source '%s'", why);
    ropeqk_ctx_destroy(x);

    memset(&t, 0, sizeof t);
    t.profile = ROPEQK_PROFILE_GPU;
    x = make(&t);
    ropeqk_ctx_tuning(x, &got, &why);
    cr_expect_eq(got.profile, ROPEQK_PROFILE_GPU);
    cr_expect_str_eq(why, "parameter");
    cr_expect(strstr(ropeqk_ctx_build_options(x), "-DRQ_VK=1 ") != NULL, "%s", ropeqk_ctx_build_options(x));
    cr_expect_eq(got.decode, -1, "the GPU profile's decode kernel is off by default");
    ropeqk_ctx_destroy(x);

    setenv("ROPEQK_PROFILE", "cpu", 1); /* the environment wins over the parameter */
    x = make(&t);
    ropeqk_ctx_tuning(x, &got, &why);
    cr_expect_eq(got.profile, ROPEQK_PROFILE_CPU);
    cr_expect_str_eq(why, "ROPEQK_PROFILE=cpu");
    cr_expect(strstr(ropeqk_ctx_build_options(x), "-DRQ_VK=16 ") != NULL, "%s", ropeqk_ctx_build_options(x));
    ropeqk_ctx_destroy(x);
}

Test(config, knobs_from_api_with_env_override)
{
    ropeqk_tuning t, got;
    memset(&t, 0, sizeof t);
    t.profile = ROPEQK_PROFILE_CPU;
    t.tq = 8;
    t.vk = 4;
    t.nv = 2;
    t.decode = -1;
    setenv("ROPEQK_TQ", "3", 1);
    setenv("ROPEQK_NV", "1", 1);
    ropeqk_ctx *x = make(&t);
    ropeqk_ctx_tuning(x, &got, NULL);
    cr_expect_eq(got.tq, 3);
    cr_expect_eq(got.vk, 4);
    cr_expect_eq(got.nv, 1);
    cr_expect_eq(got.decode, -1);
    const char *o = ropeqk_ctx_build_options(x);
    cr_expect(strstr(o, "-DRQ_TQ=3 ") && strstr(o, "-DRQ_VK=4 ") && strstr(o, "-DRQ_DECODE=0") && strstr(o, "-DRQ_NV=1"),
              "%s", o);
    ropeqk_ctx_destroy(x);
}

/* Every malformed value is refused with a message naming the variable; nothing is created. */
Test(config, malformed_environment_is_an_error)
{
    static const char *const cases[][2] = {
        {"ROPEQK_PROFILE", "GPU"}, {"ROPEQK_PROFILE", ""},   {"ROPEQK_TQ", "abc"},     {"ROPEQK_TQ", "12x"},
        {"ROPEQK_TQ", "0"},        {"ROPEQK_TQ", "33"},      {"ROPEQK_TQ", ""},        {"ROPEQK_WG", "-4"},
        {"ROPEQK_VK", "3"},        {"ROPEQK_NV", "3"},       {"ROPEQK_DKB", "7"},      {"ROPEQK_DWG", "1e2"},    {"ROPEQK_DECODE", "yes"},
        {"ROPEQK_ROT_UWG", " 8"},  {"ROPEQK_POOL_BYTES", "lots"}, {"ROPEQK_ATTN_PASS_BYTES", "-5"}, {"ROPEQK_MAX_ALLOC", "-1"},
        {"ROPEQK_MAX_ALLOC", "99999999999999999999999"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i][0], cases[i][1], 1);
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        ropeqk_status st = ropeqk_ctx_create(NULL, &x);
        cr_expect_eq(st, ROPEQK_ERR_BAD_CONFIG, "%s='%s': status %d", cases[i][0], cases[i][1], st);
        cr_expect_null(x, "%s='%s'", cases[i][0], cases[i][1]);
        cr_expect(strstr(ropeqk_last_error(), cases[i][0]) != NULL, "%s='%s': message '%s'", cases[i][0],
                  cases[i][1], ropeqk_last_error());
        unsetenv(cases[i][0]);
    }
}

Test(config, out_of_range_api_values_are_errors)
{
    ropeqk_tuning bad[6];
    memset(bad, 0, sizeof bad);
    bad[0].vk = 2;
    bad[1].tq = 33;
    bad[2].dkb = 5;
    bad[3].profile = (ropeqk_profile)7;
    bad[4].decode = 2;
    bad[5].nv = 3;
    for (int i = 0; i < 6; i++) {
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.tuning = bad[i];
        ropeqk_ctx *x = NULL;
        cr_expect_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_ERR_BAD_CONFIG, "case %d", i);
        cr_expect_null(x);
    }
}

/* The portable forms of the decode kernel (what NVIDIA and every non-pocl driver compile): with the
 * vendor switch off, pocl runs them, and they must match the fp64 path like the builtin forms. */
Test(config, decode_kernel_portable_forms_match_fp64)
{
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    t.profile = ROPEQK_PROFILE_CPU;
    t.decode = 1;
    t.vendor_ext = -1;
    ropeqk_ctx *x = make(&t);
    cr_expect(strstr(ropeqk_ctx_build_options(x), "RQ_POCL_EXT") == NULL, "%s", ropeqk_ctx_build_options(x));
    for (int lay = 0; lay < 2; lay++)
        for (int dt = 0; dt < 3; dt++) {
            th_case c;
            memset(&c, 0, sizeof c);
            ropeqk_default_params(&c.p);
            c.B = 2; c.Hq = 16; c.Hkv = 2; c.Sq = 1; c.Sk = 301; c.D = 128;
            c.dtype = (ropeqk_dtype)dt;
            c.p.layout = (ropeqk_layout)lay;
            c.p.causal = 1;
            c.p.q_pos_offset = 1000000;
            c.p.k_pos_offset = 1000000 - 300;
            c.per_token_pos = dt == 2;
            c.pos_max = 1 << 20;
            th_result r = th_run(x, &c, 77 + (uint64_t)(lay * 3 + dt));
            char d[512];
            th_describe(&c, d, sizeof d);
            cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(r.status), d);
            cr_expect(r.max_err <= 1e-5, "max error %.3g: %s", r.max_err, d);
            cr_expect_eq(r.mismatch, 0, "%s", d);
        }
    ropeqk_ctx_destroy(x);
}

/* A failed build names the device and its driver and quotes the log's first lines; the whole log
 * stays in ropeqk_ctx_build_log(). */
Test(config, build_failure_message_names_device_driver_and_log)
{
    setenv("ROPEQK_BUILD_OPTIONS", "-DRQ_TQ=(", 1);
    ropeqk_ctx *x = make(NULL);
    cr_assert_eq(ropeqk_ctx_warmup(x), ROPEQK_ERR_BUILD);
    char name[256] = "", driver[128] = "";
    clGetDeviceInfo(ropeqk_opencl_device(x), CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    clGetDeviceInfo(ropeqk_opencl_device(x), CL_DRIVER_VERSION, sizeof driver - 1, driver, NULL);
    const char *m = ropeqk_last_error();
    cr_expect(strstr(m, name) != NULL, "message does not name the device '%s': %s", name, m);
    cr_expect(strstr(m, driver) != NULL, "message does not name the driver '%s': %s", driver, m);
    cr_expect(strstr(m, "log:") != NULL, "message quotes no log: %s", m);
    size_t n = ropeqk_ctx_build_log(x, NULL, 0);
    cr_expect(n > 0, "full log is empty");
    char small[8];
    cr_expect_eq(ropeqk_ctx_build_log(x, small, sizeof small), n, "the full length whatever the buffer");
    cr_expect_eq(strlen(small), sizeof small - 1, "truncated and NUL-terminated");
    ropeqk_ctx_destroy(x);
}

/* One thread keeps failing builds (each failure replaces the context's log) while another reads
 * the log. With a pointer into the context's log, the reader could be handed freed memory (ASan's
 * heap-use-after-free in the sanitizer run); the copy-out under the lock cannot. */
typedef struct {
    ropeqk_ctx *x;
    int iters, bad;
} log_reader;

static void *read_logs(void *v)
{
    log_reader *r = v;
    char buf[4096];
    for (int i = 0; i < r->iters; i++) {
        size_t n = ropeqk_ctx_build_log(r->x, buf, sizeof buf);
        if (n > 0 && strlen(buf) != (n < sizeof buf ? n : sizeof buf - 1))
            r->bad++;
    }
    return NULL;
}

Test(config, build_log_read_during_failing_builds)
{
    setenv("ROPEQK_BUILD_OPTIONS", "-DRQ_TQ=(", 1);
    ropeqk_ctx *x = make(NULL);
    log_reader r = {x, 20000, 0};
    pthread_t th;
    pthread_create(&th, NULL, read_logs, &r);
    for (int i = 0; i < 30; i++)
        cr_expect_eq(ropeqk_ctx_warmup(x), ROPEQK_ERR_BUILD);
    pthread_join(th, NULL);
    cr_expect_eq(r.bad, 0, "%d torn reads", r.bad);
    ropeqk_ctx_destroy(x);
}
