/* The host's checks of the tiled score kernel's and the GPU attention kernel's shapes against a
 * device (src/opencl/cl_tune.c, src/core/tuning.c), on made-up device limits: no real device needs to
 * have them, so the work-group and local-memory fallbacks are checked whatever this machine's
 * OpenCL reports (pocl allows 4096 work-items, more than any allowed shape uses). Links the
 * library's objects, as tests/clc/clc_variants does. */
#include "ocl.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rq_tuning resolve(size_t max_wg, size_t local_mem, int32_t tile, int32_t rb, int32_t tk)
{
    rq_devinfo dev;
    memset(&dev, 0, sizeof dev);
    dev.max_wg = max_wg;
    dev.local_mem = local_mem;
    snprintf(dev.name, sizeof dev.name, "made-up GPU");
    snprintf(dev.platform, sizeof dev.platform, "made-up platform");
    ropeqk_tuning req;
    memset(&req, 0, sizeof req);
    req.profile = ROPEQK_PROFILE_GPU;
    req.tile = tile, req.rb = rb, req.tk = tk;
    rq_tuning t;
    cr_assert_eq(rq_tuning_resolve(&rq_opencl_backend, &req, &dev, &t), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    return t;
}

static void setup(void)
{
    /* only the made-up device decides here: no profile or knob from the environment, no tuning cache */
    static const char *const env[] = {"ROPEQK_PROFILE", "ROPEQK_TILE", "ROPEQK_RB", "ROPEQK_TK"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        unsetenv(env[i]);
    setenv("XDG_CACHE_HOME", "/nonexistent-ropeqk-test", 1);
}

TestSuite(tiled_fit, .init = setup);

Test(tiled_fit, defaults_fit_an_nvidia_like_device)
{
    rq_tuning t = resolve(1024, 48 << 10, 0, 0, 0); /* what an H100 reports through NVIDIA's OpenCL */
    cr_expect(t.tile == 64 && t.rb == 4 && t.tk == 16, "tile %d rb %d tk %d", t.tile, t.rb, t.tk);
    cr_expect_null(strstr(t.config_source, "tiled kernel off"), "%s", t.config_source);
    t = resolve(0, 0, 0, 0, 0); /* limits unknown: the 48 KiB cap still applies, the shape fits it */
    cr_expect_eq(t.tile, 64);
}

Test(tiled_fit, work_group_beyond_the_device_limit_turns_it_off)
{
    rq_tuning t = resolve(1024, 48 << 10, 128, 4, 16); /* 32 x 32 = 1024 work-items: fits */
    cr_expect_eq(t.tile, 128, "%s", t.config_source);
    t = resolve(256, 48 << 10, 128, 4, 16); /* 1024 > 256 */
    cr_expect_eq(t.tile, 0);
    cr_expect(strstr(t.config_source, "tiled kernel off") && strstr(t.config_source, "1024 work-items > device limit 256"),
              "%s", t.config_source);
    char opts[600];
    rq_tuning_options(&t, opts, sizeof opts);
    cr_expect_null(strstr(opts, "RQ_TILE"), "%s", opts);
}

Test(tiled_fit, local_memory_beyond_48k_or_the_device_turns_it_off)
{
    /* 4 * (2 * 64 * 64 + 2 * 64 + 4) = 33296 bytes: under 48 KiB, over a 32 KiB device */
    rq_tuning t = resolve(1024, 48 << 10, 64, 4, 64);
    cr_expect_eq(t.tile, 64, "%s", t.config_source);
    t = resolve(1024, 32 << 10, 64, 4, 64);
    cr_expect_eq(t.tile, 0);
    cr_expect(strstr(t.config_source, "33296 local bytes > 32768"), "%s", t.config_source);
    /* 4 * (2 * 128 * 64 + 2 * 128 + 4) = 66576 bytes: over 48 KiB even where the device has more */
    t = resolve(1024, 1 << 20, 128, 8, 64);
    cr_expect_eq(t.tile, 0);
    cr_expect(strstr(t.config_source, "66576 local bytes > 49152"), "%s", t.config_source);
}

/* The GPU attention kernel's shape against made-up devices (src/opencl/cl_tune.c's rq_cl_tuning_base
 * and fit_gattn): the default, the register-blocked qk_attention_fa2_* (256 work-items, 44112
 * bytes), fits an H100; AMD's and Intel's platforms get qk_attention_gpu_* in its old default shape
 * (21696 bytes) and never an fa2 shape from the ladder; a 512-work-item shape steps down on a device
 * that allows 256; a shape over the device's local memory, or over 48 KiB, too; the tuner skips
 * such candidates (tune_fits). */
static rq_tuning resolve_attn_on(const char *platform, size_t max_wg, size_t local_mem, int32_t bm, int32_t bn,
                                 int32_t tk, int32_t rb, int32_t dv)
{
    rq_devinfo dev;
    memset(&dev, 0, sizeof dev);
    dev.max_wg = max_wg;
    dev.local_mem = local_mem;
    snprintf(dev.name, sizeof dev.name, "made-up GPU");
    snprintf(dev.platform, sizeof dev.platform, "%s", platform);
    ropeqk_tuning req;
    memset(&req, 0, sizeof req);
    req.profile = ROPEQK_PROFILE_GPU;
    req.attn_tile = bm, req.attn_keys = bn, req.attn_tk = tk, req.attn_rb = rb, req.attn_dv = dv;
    rq_tuning t;
    cr_assert_eq(rq_tuning_resolve(&rq_opencl_backend, &req, &dev, &t), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    return t;
}

static rq_tuning resolve_attn(size_t max_wg, size_t local_mem, int32_t bm, int32_t bn, int32_t tk, int32_t rb,
                              int32_t dv)
{
    return resolve_attn_on("made-up platform", max_wg, local_mem, bm, bn, tk, rb, dv);
}

Test(tiled_fit, gpu_attention_shapes_against_the_device)
{
    static const char *const env[] = {"ROPEQK_ATTN_TILE", "ROPEQK_ATTN_KEYS", "ROPEQK_ATTN_TK", "ROPEQK_ATTN_RB",
                                      "ROPEQK_ATTN_DV"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        unsetenv(env[i]);
    rq_tuning t = resolve_attn(1024, 48 << 10, 0, 0, 0, 0, 0);
    cr_expect(t.attn_tile == 64 && t.attn_keys == 64 && t.attn_tk == 16 && t.attn_rb == 4 && t.attn_dv == 128 && rq_ga_fa2(&t), "%s",
              t.config_source);
    cr_expect_eq(rq_gattn_items(&t), 256);
    cr_expect_eq(rq_ga_local_bytes(&t), 44112);
    /* 2 * 16*(16*68/4 + 16*64/4) + 4*64*68 + 48 + 2*64*64 + 16*64 + 8*64 + 28 = 44108, rounded */
    cr_expect_eq(RQ_FA_LOCAL_BYTES(64, 64, 16, 128), 44112);
    char opts[700];
    rq_tuning_options(&t, opts, sizeof opts);
    cr_expect(strstr(opts, "-DRQ_GA_BM=64 -DRQ_GA_BN=64 -DRQ_GA_TK=16 -DRQ_GA_RB=4 -DRQ_GA_DV=128 -DRQ_GA_FA2=1"), "%s", opts);
    /* AMD and Intel: qk_attention_gpu_* in its own default shape, noted; no -DRQ_GA_FA2 */
    static const char *const vendors[] = {"AMD Accelerated Parallel Processing", "Intel(R) OpenCL Graphics"};
    for (int v = 0; v < 2; v++) {
        t = resolve_attn_on(vendors[v], 256, 64 << 10, 0, 0, 0, 0, 0);
        cr_expect(t.attn_tile == RQ_GA_FB_BM && t.attn_keys == RQ_GA_FB_BN && t.attn_tk == RQ_GA_FB_TK && t.attn_rb == RQ_GA_FB_RB &&
                      t.attn_dv == RQ_GA_FB_DV && !rq_ga_fa2(&t),
                  "%s: %s", vendors[v], t.config_source);
        cr_expect(strstr(t.config_source, "qk_attention_gpu_*"), "%s", t.config_source);
        rq_tuning_options(&t, opts, sizeof opts);
        cr_expect_null(strstr(opts, "RQ_GA_FA2"), "%s", opts);
        cr_expect_eq(RQ_GA_LOCAL_BYTES(32, 64, 16, 128), 21696);
        /* a shape it cannot take steps down past the fa2 shapes of the ladder */
        t = resolve_attn_on(vendors[v], 256, 64 << 10, 64, 64, 16, 2, 128);
        cr_expect(t.attn_tile == 32 && t.attn_rb == 2 && !rq_ga_fa2(&t), "%s: %s", vendors[v], t.config_source);
    }
    /* 64 rows, 2 a work-item, 64 keys: 32 x 16 = 512 work-items, the older kernel */
    t = resolve_attn(1024, 48 << 10, 64, 64, 16, 2, 128);
    cr_expect(t.attn_tile == 64 && t.attn_rb == 2 && !rq_ga_fa2(&t), "%s", t.config_source);
    /* a shape the device cannot take steps down to the largest of the kernels' shapes that fits:
     * the fa2 default, 16 x 16 = 256 work-items */
    t = resolve_attn(256, 48 << 10, 64, 64, 16, 2, 128);
    cr_expect(t.attn_tile == 64 && t.attn_keys == 64 && t.attn_rb == 4 && t.attn_dv == 128 && rq_gattn_items(&t) == 256, "%s",
              t.config_source);
    cr_expect(strstr(t.config_source, "instead of 64/64/16/2/128") &&
                  strstr(t.config_source, "512 work-items > device limit 256"),
              "%s", t.config_source);
    /* no shape fits 32 work-items: the kernel is off (qk_attention_*), without RQ_GA_ options */
    t = resolve_attn(32, 48 << 10, 0, 0, 0, 0, 0);
    cr_expect_eq(t.attn_tile, 0, "%s", t.config_source);
    cr_expect(strstr(t.config_source, "GPU attention kernel off") && strstr(t.config_source, "no smaller shape fits"),
              "%s", t.config_source);
    rq_tuning_options(&t, opts, sizeof opts);
    cr_expect_null(strstr(opts, "RQ_GA_"), "%s", opts);
    /* 64 rows of 64 keys, 16-dim steps, V blocks of 256 (the older kernel): 16*1024 + 4*64*68 +
     * 2*64*64 + 12*64 + 4*64 + 56 = 43064 bytes, 43072 rounded: under 48 KiB, over a 32 KiB device */
    cr_expect_eq(RQ_GA_LOCAL_BYTES(64, 64, 16, 256), 43072);
    t = resolve_attn(1024, 48 << 10, 64, 64, 16, 2, 256);
    cr_expect_eq(t.attn_tile, 64, "%s", t.config_source);
    /* over a 32 KiB device: the fa2 shapes take 44112 bytes (64- or 128-dim V blocks alike: the Q and
     * K stage is the larger), the first of the ladder within 32 KiB is 64 x 64 of 2 rows with 8-dim
     * steps (16*256 + 4*64*68 + 2*64*64 + 12*64 + 4*64 + 56 = 30776 bytes) */
    t = resolve_attn(1024, 32 << 10, 64, 64, 16, 2, 256);
    cr_expect(t.attn_tile == 64 && t.attn_tk == 8 && t.attn_dv == 128 && !rq_ga_fa2(&t), "%s", t.config_source);
    cr_expect_eq(RQ_GA_LOCAL_BYTES(64, 64, 8, 128), 30784);
    cr_expect(strstr(t.config_source, "43072 local bytes > 32768"), "%s", t.config_source);
    t = resolve_attn(1024, 1 << 20, 128, 128, 64, 8, 256); /* over 48 KiB anywhere */
    cr_expect(t.attn_tile == 64 && t.attn_tk == 16 && t.attn_dv == 128 && t.attn_rb == 4, "%s", t.config_source);
    cr_expect(strstr(t.config_source, "local bytes > 49152"), "%s", t.config_source);
}
