/* The OpenCL backend's kernel configuration (suite opencl_config): the CPU profile's vector width
 * against the device's CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, and the message and log of a failed
 * program build (ROPEQK_BUILD_OPTIONS). Built with the OpenCL backend only (tests/opencl/meson.build);
 * what both backends share is tests/neutral/test_config.c's. Each Criterion test runs in its own process,
 * so setenv() here touches no other test. */
#include "harness.h"
#include "ropeqk_opencl.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void no_platform_skip(void)
{
    th_skip_without_device(NULL);
}

TestSuite(opencl_config, .init = no_platform_skip, .fini = th_leak_check);

/* The CPU profile's heuristic (src/opencl/cl_tune.c, rq_cl_tuning_base): one float vector of keys per
 * block, so RQ_VK follows the device's CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: 16 where it is 16 or
 * unknown (AVX-512 pocl), 8 where it is 8..15 (AVX2 pocl, "pthread-haswell"), 4 below 8 (an NVIDIA
 * GPU reports 1), with 4 query rows and one vector per work-item below 16. The rule, not one
 * host's number: the suite runs on AVX-512 and AVX2 CI hosts and on GPUs. A tuner cache or a
 * shipped entry would replace the heuristic, so the context reads an empty cache directory. */
static void expect_cpu_vector_rule(ropeqk_ctx *x, const ropeqk_tuning *got)
{
    cl_uint nv = 0;
    cl_int err = clGetDeviceInfo(ropeqk_opencl_device(x), CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof nv, &nv, NULL);
    cr_assert_eq(err, CL_SUCCESS, "CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: %d", (int)err);
    /* tests/avx2 runs this under a shim that makes pocl an AVX2 device: check that it took effect */
    const char *want_width = getenv("ROPEQK_TEST_POCL_NATIVE_FLOAT_WIDTH");
    char plat_name[128] = "";
    cl_platform_id plat = NULL;
    if (clGetDeviceInfo(ropeqk_opencl_device(x), CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL) != CL_SUCCESS ||
        clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof plat_name - 1, plat_name, NULL) != CL_SUCCESS)
        plat_name[0] = '\0';
    if (want_width && strstr(plat_name, "Portable Computing Language"))
        cr_expect_eq(nv, (cl_uint)atoi(want_width), "%s: native float width %u, the shim should give %s",
                     ropeqk_ctx_device_description(x), (unsigned)nv, want_width);
    int want_vk = nv > 0 && nv < 16 ? (nv >= 8 ? 8 : 4) : 16, want_tq = nv > 0 && nv < 16 ? 4 : 12;
    int want_nv = nv > 0 && nv < 16 ? 1 : 2;
    const char *src = ropeqk_ctx_config_source(x), *o = ropeqk_ctx_build_options(x);
    char note[64], opt[64];
    snprintf(note, sizeof note, "native float vector width %u", (unsigned)nv);
    cr_expect(strncmp(src, "heuristic", 9) == 0 && strstr(src, note), "device %s: source '%s', want the heuristic with '%s'",
              ropeqk_ctx_device_description(x), src, note);
    cr_expect(got->vk == want_vk && got->avk == want_vk && got->tq == want_tq && got->nv == want_nv,
              "device %s, native float width %u: vk %d avk %d tq %d nv %d, want %d %d %d %d", ropeqk_ctx_device_description(x),
              (unsigned)nv, got->vk, got->avk, got->tq, got->nv, want_vk, want_vk, want_tq, want_nv);
    snprintf(opt, sizeof opt, "-DRQ_VK=%d ", want_vk);
    cr_expect(strstr(o, opt) != NULL, "device %s: want '%s' in %s", ropeqk_ctx_device_description(x), opt, o);
}

/* The CPU profile from the environment over a GPU parameter, as config/profile_from_env_param_and_device
 * sets it (which checks the profile and its source on every backend), then the vector rule. The name
 * starts with "profile": tests/avx2 runs opencl_config/profile* under its AVX2 shim. */
Test(opencl_config, profile_cpu_vector_width_follows_the_device)
{
    ropeqk_tuning t, got;
    const char *why = NULL;
    char dir[256];
    cr_assert(th_cache_home_make(dir, sizeof dir), "cannot make %s", dir); /* no tuner cache */
    memset(&t, 0, sizeof t);
    t.profile = ROPEQK_PROFILE_GPU;
    setenv("ROPEQK_PROFILE", "cpu", 1);
    ropeqk_ctx *x = th_ctx_tuned(&t);
    TH_SKIP_IF_VULKAN(x);
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, &why), ROPEQK_SUCCESS);
    cr_expect_eq(got.profile, ROPEQK_PROFILE_CPU);
    cr_expect_str_eq(why, "ROPEQK_PROFILE=cpu");
    expect_cpu_vector_rule(x, &got);
    ropeqk_ctx_destroy(x);
    th_cache_home_remove(dir);
}

/* A context whose program build fails (ROPEQK_BUILD_OPTIONS); skips on a Vulkan device
 * (ROPEQK_DEVICE=vulkan), whose SPIR-V is built with the library. */
static ropeqk_ctx *failing_build_ctx(void)
{
    setenv("ROPEQK_BUILD_OPTIONS", "-DRQ_TQ=(", 1);
    ropeqk_ctx *x = th_ctx_tuned(NULL);
    if (th_is_vulkan(x)) {
        ropeqk_ctx_destroy(x);
        cr_skip_test("OpenCL only: a program build failure (ROPEQK_BUILD_OPTIONS)");
    }
    return x;
}

/* A failed build names the device and its driver and quotes the log's first lines; the whole log
 * stays in ropeqk_ctx_build_log(). */
Test(opencl_config, build_failure_message_names_device_driver_and_log)
{
    ropeqk_ctx *x = failing_build_ctx();
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

Test(opencl_config, build_log_read_during_failing_builds)
{
    ropeqk_ctx *x = failing_build_ctx();
    log_reader r = {x, 20000, 0};
    pthread_t th;
    pthread_create(&th, NULL, read_logs, &r);
    for (int i = 0; i < 30; i++)
        cr_expect_eq(ropeqk_ctx_warmup(x), ROPEQK_ERR_BUILD);
    pthread_join(th, NULL);
    cr_expect_eq(r.bad, 0, "%d torn reads", r.bad);
    ropeqk_ctx_destroy(x);
}
