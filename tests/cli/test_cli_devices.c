/* `ropeqk devices` as a first diagnostic on a new machine: the profile in effect and where it came
 * from, the build options, --dump-program (exact text + options per device), --build (OK / FAILED
 * with the log), and a quiet first build (no compiler chatter on the user's terminal). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

#include "cli_fixture.h"

static void need_platform(void)
{
    setup();
    if (no_opencl_platform()) /* these are the OpenCL program's diagnostics */
        cr_skip_test("no OpenCL platform (or no OpenCL backend in this build)");
}

TestSuite(devices, .init = need_platform, .fini = teardown, .timeout = 300);

static cli_result run_env(const char *const *env, const char *const *args)
{
    cli_result r;
    cr_assert(cli_run(&r, NULL, env, 300, args), "cannot run " ROPEQK_EXE);
    return r;
}

Test(devices, profile_and_options_lines)
{
    cli_result r = run_env(ENV("ROPEQK_PROFILE=gpu"), ARGS("devices"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "profile: gpu (ROPEQK_PROFILE=gpu)"), "%s", r.out);
    /* the GPU profile's heuristic, or an entry shipped for this device (src/core/tuning.c: H100) */
    bool shipped = strstr(r.out, "\n         config: shipped (") != NULL;
    cr_expect(strstr(r.out, "\n         options: -cl-std=CL1.2 ") && (shipped || strstr(r.out, "-DRQ_VK=1 ")), "%s", r.out);
    cr_expect(shipped || strstr(r.out, "\n         config: heuristic (GPU profile"), "%s", r.out);
    cli_result_free(&r);
    r = run_env(ENV("ROPEQK_PROFILE=auto"), ARGS("devices"));
    cr_expect(strstr(r.out, "profile: cpu (auto: CPU device)") || strstr(r.out, "(auto: non-CPU device)"), "%s",
              r.out);
    cli_result_free(&r);
    r = run_env(ENV("ROPEQK_PROFILE=fast"), ARGS("devices"));
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "ROPEQK_PROFILE='fast'"), "%s", r.out);
    cli_result_free(&r);
}

/* `devices --build` builds on every backend's devices; these tests are about the OpenCL program, so
 * they hide the Vulkan drivers: lavapipe's pipelines cost each --build run 3.2 s of the 3.6 s
 * (`ropeqk devices --build`, 3 runs each against the OpenCL-only listing, 2-core dev host). */
#define NO_VULKAN "VK_ICD_FILENAMES=/nonexistent-ropeqk-test.json", "VK_DRIVER_FILES=/nonexistent-ropeqk-test.json"

Test(devices, dump_program_and_build)
{
    cli_result r = run_env(ENV(NO_VULKAN), ARGS("devices", "--dump-program", tmp, "--build"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "build: OK"), "%s", r.out);
    cli_result_free(&r);
    /* the program text of opencl:0:0's context (ropeqk_ctx_program_source), named by its string */
    ropeqk_ctx *ctx = NULL;
    ropeqk_ctx_params cp = {.device = "opencl:0:0"};
    cr_assert_eq(ropeqk_ctx_create(&cp, &ctx), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    size_t len = 0;
    const char *src = ropeqk_ctx_program_source(ctx, &len);
    cr_assert(src && len > 0);
    FILE *f = fopen(tpath("opencl-0-0.cl"), "rb");
    cr_assert(f, "no opencl-0-0.cl written");
    char *buf = malloc(len + 1);
    size_t got = fread(buf, 1, len + 1, f);
    fclose(f);
    cr_expect(got == len && memcmp(buf, src, len) == 0, "opencl-0-0.cl is not the library's program text");
    free(buf);
    f = fopen(tpath("opencl-0-0.options"), "r");
    cr_assert(f, "no opencl-0-0.options written");
    char opts[1024] = "";
    cr_expect(fgets(opts, sizeof opts, f) && strncmp(opts, "-cl-std=CL1.2 -DRQ_TQ=", 22) == 0, "%s", opts);
    cr_expect(strncmp(opts, ropeqk_ctx_build_options(ctx), strlen(ropeqk_ctx_build_options(ctx))) == 0,
              "%s is not the context's options %s", opts, ropeqk_ctx_build_options(ctx));
    fclose(f);
    ropeqk_ctx_destroy(ctx);
}

Test(devices, build_failure_is_reported_with_log)
{
    cli_result r = run_env(ENV("ROPEQK_BUILD_OPTIONS=-DRQ_TQ=(", NO_VULKAN), ARGS("devices", "--build"));
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "build: FAILED") && strstr(r.out, "           | "), "%s", r.out);
    cli_result_free(&r);
}

/* A first build with an empty pocl cache prints nothing on stderr (pocl's Clang used to print
 * "143 warnings generated." there on hosts without AVX-512; see src/core/tuning.c). */
Test(devices, first_build_is_quiet)
{
    char env[600];
    snprintf(env, sizeof env, "POCL_CACHE_DIR=%s", tmp);
    cli_result r = run_env(ENV(env), ARGS("check", "--cases", "4", "--seed", "3"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "warning") == NULL, "stderr: %s", r.err);
    cli_result_free(&r);
}

/* `ropeqk tune --dry-run` searches, prints every candidate and the winners, and writes nothing. */
Test(devices, tune_dry_run)
{
    char env[600];
    snprintf(env, sizeof env, "XDG_CACHE_HOME=%s", tmp);
    cli_result r = run_env(ENV(env), ARGS("tune", "--budget", "0.01", "--dry-run"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "  scores tq=") && strstr(r.out, "best: tq=") && strstr(r.out, "cache not written"),
              "%s", r.out);
    cr_expect_eq(dir_entries(tmp), 0, "the dry run wrote into %s", tmp);
    cli_result_free(&r);
    r = run_env(NULL, ARGS("tune", "--budget", "-1"));
    cr_expect_eq(r.status, 2, "%s", r.err);
    cli_result_free(&r);
}
