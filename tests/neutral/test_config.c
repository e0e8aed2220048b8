/* Kernel configuration of a context, on either backend: profiles and where they come from, tuning
 * through the API and the environment (strictly parsed, the same rules for both backends: the OpenCL
 * knobs and the Vulkan ones), out-of-range values, the vendor switch's portable decode kernel (it
 * skips on Vulkan). The OpenCL backend's own (the CPU profile's vector width against the device, the
 * message and log of a failed program build): tests/opencl/test_config.c. Each Criterion test runs in
 * its own process, so setenv() here touches no other test. */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void no_platform_skip(void)
{
    th_skip_without_device(NULL);
}

TestSuite(config, .init = no_platform_skip, .fini = th_leak_check);

/* Whether a backend of this build has the knob with ropeqk_tuning field `name` or environment
 * variable `env` (either may be NULL), from the knob tables: a build without OpenCL
 * (-Dopencl=disabled) has none of OpenCL's knobs, and its contexts neither read nor refuse their
 * fields and variables (src/core/tuning.c walks the built backends' tables). */
static bool knob_built(const char *name, const char *env)
{
    static const char *const backends[] = {"opencl", "vulkan"};
    for (size_t b = 0; b < sizeof backends / sizeof backends[0]; b++)
        for (int32_t i = 0, n = ropeqk_knob_count(backends[b]); i < n; i++) {
            ropeqk_knob k;
            cr_assert_eq(ropeqk_knob_get_info(backends[b], i, &k), ROPEQK_SUCCESS, "%s knob %d", backends[b], (int)i);
            if ((name && !strcmp(k.name, name)) || (env && k.env && !strcmp(k.env, env)))
                return true;
        }
    return false;
}

/* The knob tables answer at all: chunk_rows is every backend's */
static void assert_knob_tables(void)
{
    cr_assert(knob_built("chunk_rows", NULL) && knob_built(NULL, "ROPEQK_CHUNK_ROWS"), "no knob table has chunk_rows");
}

Test(config, profile_from_env_param_and_device)
{
    ropeqk_tuning t, got;
    const char *why = NULL;
    char dir[256];
    cr_assert(th_cache_home_make(dir, sizeof dir), "cannot make %s", dir); /* no tuner cache */
    unsetenv("ROPEQK_PROFILE");
    ropeqk_ctx *x = th_ctx_tuned(NULL);
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, &why), ROPEQK_SUCCESS);
    cr_expect_neq(got.profile, ROPEQK_PROFILE_AUTO, "auto must resolve to cpu or gpu");
    cr_expect(strncmp(why, "auto: ", 6) == 0, "source '%s'", why);
    ropeqk_ctx_destroy(x);

    memset(&t, 0, sizeof t);
    t.profile = ROPEQK_PROFILE_GPU;
    x = th_ctx_tuned(&t);
    ropeqk_ctx_tuning(x, &got, &why);
    cr_expect_eq(got.profile, ROPEQK_PROFILE_GPU);
    cr_expect_str_eq(why, "parameter");
    bool vk = th_is_vulkan(x); /* the Vulkan shaders take specialization constants, not -D options */
    /* the GPU profile's default, where no entry measured on this device replaces it (src/core/tuning.c) */
    cr_expect(vk || strncmp(ropeqk_ctx_config_source(x), "heuristic", 9) != 0 ||
                  strstr(ropeqk_ctx_build_options(x), "-DRQ_VK=1 ") != NULL,
              "%s: %s", ropeqk_ctx_config_source(x), ropeqk_ctx_build_options(x));
    assert_knob_tables();
    if (knob_built("decode", NULL)) /* OpenCL's */
        cr_expect_eq(got.decode, -1, "the GPU profile's decode kernel is off by default");
    ropeqk_ctx_destroy(x);

    setenv("ROPEQK_PROFILE", "cpu", 1); /* the environment wins over the parameter */
    x = th_ctx_tuned(&t);
    ropeqk_ctx_tuning(x, &got, &why);
    cr_expect_eq(got.profile, ROPEQK_PROFILE_CPU);
    cr_expect_str_eq(why, "ROPEQK_PROFILE=cpu");
    /* the CPU profile's vector width against the OpenCL device's: opencl_config/profile_cpu_* */
    ropeqk_ctx_destroy(x);
    th_cache_home_remove(dir);
}

Test(config, knobs_from_api_with_env_override)
{
    assert_knob_tables();
    if (!knob_built("tq", NULL))
        cr_skip_test("no backend of this build has the knobs tq, vk, nv and decode (OpenCL's)");
    ropeqk_tuning t, got;
    memset(&t, 0, sizeof t);
    t.profile = ROPEQK_PROFILE_CPU;
    t.tq = 8;
    t.vk = 4;
    t.nv = 2;
    t.decode = -1;
    setenv("ROPEQK_TQ", "3", 1);
    setenv("ROPEQK_NV", "1", 1);
    ropeqk_ctx *x = th_ctx_tuned(&t);
    ropeqk_ctx_tuning(x, &got, NULL);
    cr_expect_eq(got.tq, 3);
    cr_expect_eq(got.vk, 4);
    cr_expect_eq(got.nv, 1);
    cr_expect_eq(got.decode, -1);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "overrides:") && strstr(ropeqk_ctx_config_source(x), "ROPEQK_TQ"),
              "%s", ropeqk_ctx_config_source(x));
    const char *o = ropeqk_ctx_build_options(x);
    cr_expect(th_is_vulkan(x) || (strstr(o, "-DRQ_TQ=3 ") && strstr(o, "-DRQ_VK=4 ") && strstr(o, "-DRQ_DECODE=0") &&
                                  strstr(o, "-DRQ_NV=1")),
              "%s", o);
    ropeqk_ctx_destroy(x);
}

/* Every malformed value is refused with a message naming the variable; nothing is created. The
 * knobs' variables on every backend (the crossovers ROPEQK_CHUNK_ROWS and ROPEQK_DENSE_DECODE
 * included: knobs, though only OpenCL has those paths); the OpenCL context's limits (scratch pool,
 * attention pass, the allocation limit that forces split runs) only where a context reads them: a
 * Vulkan context does not read ROPEQK_POOL_BYTES, ROPEQK_ATTN_PASS_BYTES or ROPEQK_MAX_ALLOC at all. */
Test(config, malformed_environment_is_an_error)
{
    static const struct {
        const char *name, *value;
        bool opencl_only;
    } cases[] = {
        {"ROPEQK_PROFILE", "GPU", 0}, {"ROPEQK_PROFILE", "", 0},   {"ROPEQK_TQ", "abc", 0},     {"ROPEQK_TQ", "12x", 0},
        {"ROPEQK_TQ", "0", 0},        {"ROPEQK_TQ", "33", 0},      {"ROPEQK_TQ", "", 0},        {"ROPEQK_WG", "-4", 0},
        {"ROPEQK_VK", "3", 0},        {"ROPEQK_NV", "3", 0},       {"ROPEQK_DKB", "7", 0},      {"ROPEQK_DWG", "1e2", 0},
        {"ROPEQK_DECODE", "yes", 0},  {"ROPEQK_ROT_UWG", " 8", 0}, {"ROPEQK_VK_BLOCK", "x", 0}, {"ROPEQK_VK_ROWS", "-32", 0},
        {"ROPEQK_POOL_BYTES", "lots", 1}, {"ROPEQK_ATTN_PASS_BYTES", "-5", 1}, {"ROPEQK_MAX_ALLOC", "-1", 1},
        {"ROPEQK_MAX_ALLOC", "99999999999999999999999", 1}, {"ROPEQK_DENSE_DECODE", "on", 0},
        {"ROPEQK_DENSE_DECODE", "100000", 0}, {"ROPEQK_DENSE_DECODE", "-1", 0}, {"ROPEQK_CHUNK_ROWS", "0", 0},
        {"ROPEQK_CHUNK_ROWS", "-16", 0}, {"ROPEQK_CHUNK_ROWS", "16 rows", 0}, {"ROPEQK_CHUNK_ROWS", "", 0},
        {"ROPEQK_CHUNK_ROWS", "1048577", 0}, {"ROPEQK_CHUNK_ROWS", "99999999999999999999", 0},
    };
    ropeqk_ctx *probe = th_ctx_tuned(NULL);
    bool vk = th_is_vulkan(probe);
    ropeqk_ctx_destroy(probe);
    assert_knob_tables();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (vk && cases[i].opencl_only)
            continue;
        /* a knob's variable where a backend of this build has that knob (ROPEQK_PROFILE: the core's) */
        if (!cases[i].opencl_only && strcmp(cases[i].name, "ROPEQK_PROFILE") && !knob_built(NULL, cases[i].name))
            continue;
        setenv(cases[i].name, cases[i].value, 1);
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        ropeqk_status st = ropeqk_ctx_create(NULL, &x);
        cr_expect_eq(st, ROPEQK_ERR_BAD_CONFIG, "%s='%s': status %d", cases[i].name, cases[i].value, st);
        cr_expect_null(x, "%s='%s'", cases[i].name, cases[i].value);
        cr_expect(strstr(ropeqk_last_error(), cases[i].name) != NULL, "%s='%s': message '%s'", cases[i].name,
                  cases[i].value, ropeqk_last_error());
        if (st == ROPEQK_SUCCESS)
            ropeqk_ctx_destroy(x);
        unsetenv(cases[i].name);
    }
}

Test(config, out_of_range_api_values_are_errors)
{
    ropeqk_tuning bad[10];
    memset(bad, 0, sizeof bad);
    bad[0].vk = 2;
    bad[1].tq = 33;
    bad[2].dkb = 5;
    bad[3].profile = (ropeqk_profile)7;
    bad[4].decode = 2;
    bad[5].nv = 3;
    bad[6].chunk_rows = -1;
    bad[7].chunk_rows = (1 << 20) + 1;
    bad[8].dense_rows = -2;
    bad[9].dense_rows = 1025;
    /* the knob each case sets (profile: the core's), checked where a backend of this build has it */
    static const char *const knob[10] = {"vk", "tq", "dkb", NULL, "decode", "nv", "chunk_rows", "chunk_rows",
                                         "dense_rows", "dense_rows"};
    assert_knob_tables();
    for (int i = 0; i < 10; i++) {
        if (knob[i] && !knob_built(knob[i], NULL))
            continue;
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
    ropeqk_ctx *x = th_ctx_tuned(&t);
    if (th_is_vulkan(x)) {
        ropeqk_ctx_destroy(x);
        cr_skip_test("OpenCL only: the decode kernel's portable forms (vendor_ext) are OpenCL C");
    }
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

/* The Vulkan knobs are checked by the same rules on every backend of a build that has them (the
 * OpenCL kernels ignore them, a malformed value is still an error; a -Dvulkan=disabled build has no
 * such knob): out-of-range API values, environment values, an override noted in the configuration
 * source, and the tuner refusing to run under an override. */
Test(config, vulkan_knobs_refused_and_overridden)
{
    assert_knob_tables();
    if (!knob_built("vk_block", NULL))
        cr_skip_test("no backend of this build has the knobs vk_block, vk_tk and vk_rows (Vulkan's)");
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    static const struct {
        int block, tk, rows;
        const char *name;
    } bad[] = {{3, 0, 0, "ROPEQK_VK_BLOCK"}, {16, 0, 0, "ROPEQK_VK_BLOCK"}, {0, 12, 0, "ROPEQK_VK_TK"},
               {0, 64, 0, "ROPEQK_VK_TK"},   {0, 0, 48, "ROPEQK_VK_ROWS"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.tuning.vk_block = bad[i].block, cp.tuning.vk_tk = bad[i].tk, cp.tuning.vk_rows = bad[i].rows;
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        cr_expect_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_ERR_BAD_CONFIG, "case %zu", i);
        cr_expect_null(x, "case %zu", i);
        cr_expect(strstr(ropeqk_last_error(), bad[i].name), "case %zu: %s", i, ropeqk_last_error());
    }
    setenv("ROPEQK_VK_BLOCK", "16", 1);
    ropeqk_ctx *x = (ropeqk_ctx *)1;
    cr_expect_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_ERR_BAD_CONFIG);
    cr_expect_null(x);
    cr_expect(strstr(ropeqk_last_error(), "ROPEQK_VK_BLOCK"), "%s", ropeqk_last_error());
    setenv("ROPEQK_VK_BLOCK", "2", 1);
    x = th_ctx_tuned(NULL);
    ropeqk_tuning got;
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    cr_expect_eq(got.vk_block, 2);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "overrides: ROPEQK_VK_BLOCK"), "%s", ropeqk_ctx_config_source(x));
    if (th_is_vulkan(x))
        cr_expect(strstr(ropeqk_ctx_build_options(x), "scores block 2 "), "%s", ropeqk_ctx_build_options(x));
    /* the tuner refuses to run under an override that would win over every candidate */
    ropeqk_tune_params p = {.budget_seconds = 0.01, .no_write = 1};
    cr_expect_eq(ropeqk_tune(x, &p, NULL, NULL, 0), ROPEQK_ERR_BAD_CONFIG);
    cr_expect(strstr(ropeqk_last_error(), "ROPEQK_VK_BLOCK"), "%s", ropeqk_last_error());
    ropeqk_ctx_destroy(x);
    unsetenv("ROPEQK_VK_BLOCK");
}

/* The crossovers (chunk_rows, dense_rows): API values and environment values in range are taken, the
 * environment winning and noted in the configuration source; ROPEQK_DENSE_DECODE=0 and API -1 turn
 * the dense decode off (reported as -1); the tuner refuses to run under either variable. Which path
 * a call then takes: tests/opencl/test_tune_paths.c. */
Test(config, crossover_knobs_from_api_and_env)
{
    ropeqk_tuning t, got;
    ropeqk_ctx *x = th_ctx_tuned(NULL);
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    /* dense_rows: 16, or 2 on a Vulkan CPU device (src/vulkan/vk_tune.c; lavapipe in CI) */
    bool vk_cpu = th_is_vulkan(x) && strstr(ropeqk_ctx_config_source(x), "Vulkan CPU device");
    cr_expect(got.chunk_rows == 16 && got.dense_rows == (vk_cpu ? 2 : 16), "defaults %d %d (%s)", got.chunk_rows,
              got.dense_rows, ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
    memset(&t, 0, sizeof t);
    t.chunk_rows = 9;
    t.dense_rows = -1;
    x = th_ctx_tuned(&t);
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    cr_expect(got.chunk_rows == 9 && got.dense_rows == -1, "%d %d", got.chunk_rows, got.dense_rows);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "CHUNK_ROWS") && strstr(ropeqk_ctx_config_source(x), "DENSE_DECODE"),
              "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
    static const struct {
        const char *chunk, *dense;
        int32_t want_chunk, want_dense;
    } env[] = {{"1", "0", 1, -1}, {"48", "1024", 48, 1024}, {"1048576", "3", 1 << 20, 3}};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        setenv("ROPEQK_CHUNK_ROWS", env[i].chunk, 1);
        setenv("ROPEQK_DENSE_DECODE", env[i].dense, 1);
        t.dense_rows = 5;
        x = th_ctx_tuned(&t); /* API 9 and 5, overridden */
        cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
        cr_expect(got.chunk_rows == env[i].want_chunk && got.dense_rows == env[i].want_dense,
                  "ROPEQK_CHUNK_ROWS=%s ROPEQK_DENSE_DECODE=%s: %d %d", env[i].chunk, env[i].dense, got.chunk_rows,
                  got.dense_rows);
        const char *src = ropeqk_ctx_config_source(x);
        cr_expect(strstr(src, "ROPEQK_CHUNK_ROWS") && strstr(src, "ROPEQK_DENSE_DECODE"), "%s", src);
        ropeqk_tune_params p = {.budget_seconds = 0.01, .no_write = 1};
        cr_expect_eq(ropeqk_tune(x, &p, NULL, NULL, 0), ROPEQK_ERR_BAD_CONFIG);
        cr_expect(strstr(ropeqk_last_error(), "ROPEQK_CHUNK_ROWS"), "%s", ropeqk_last_error());
        unsetenv("ROPEQK_CHUNK_ROWS");
        cr_expect_eq(ropeqk_tune(x, &p, NULL, NULL, 0), ROPEQK_ERR_BAD_CONFIG);
        cr_expect(strstr(ropeqk_last_error(), "ROPEQK_DENSE_DECODE"), "%s", ropeqk_last_error());
        unsetenv("ROPEQK_DENSE_DECODE");
        ropeqk_ctx_destroy(x);
    }
}
