/* The Vulkan backend's tuning knobs: every shape of the prefill scores shader (vk_block x vk_tk, its
 * specialization constants) against fp64 on awkward cases. Runs on the first Vulkan device (lavapipe
 * in CI) with the validation layer (th_leak_check); XDG_CACHE_HOME is a fresh folder, so no cache file
 * changes the knobs. The tuner's search and cache on Vulkan are test_tune.c's (tune_vulkan), the
 * knobs' refusals test_config.c's (config_vulkan). */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define BOUND 1e-5 /* docs/conventions.md: the device-vs-fp64 metric */

static char dir[256];

static void setup(void)
{
    th_skip_without_validation();
    cr_assert(th_cache_home_make(dir, sizeof dir), "cannot make %s", dir);
}

static void teardown(void)
{
    th_cache_home_remove(dir);
    th_leak_check();
}

TestSuite(vk_tune, .init = setup, .fini = teardown, .timeout = 900);

static ropeqk_status make(int block, int tk, ropeqk_ctx **ctx)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = "vulkan";
    cp.tuning.vk_block = block;
    cp.tuning.vk_tk = tk;
    *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, ctx);
    if (st == ROPEQK_ERR_NO_DEVICE)
        cr_skip_test("no Vulkan device: %s", ropeqk_last_error());
    return st;
}

/* Tiles cut by Sq and Sk (133 = 128 + 5 rows, 70 keys), head dims not a multiple of the stage (72,
 * 40 against 16/32), GQA, both layouts, partial rotary, masks, per-token positions near 2^20,
 * padded views, 16-bit storage and the device-buffer path with canaries. */
static th_case shape_case(int i)
{
    th_case c;
    memset(&c, 0, sizeof c);
    ropeqk_default_params(&c.p);
    c.dtype = ROPEQK_F32;
    c.pos_max = (int64_t)1 << 20;
    switch (i) {
    case 0:
        c.B = 1, c.Hq = 4, c.Hkv = 2, c.Sq = 133, c.Sk = 70, c.D = 72;
        c.p.causal = 1;
        c.p.q_pos_offset = 70 - 133 + 90, c.p.k_pos_offset = 0;
        c.enqueue = true;
        break;
    case 1:
        c.B = 2, c.Hq = 2, c.Hkv = 1, c.Sq = 17, c.Sk = 300, c.D = 40;
        c.p.layout = ROPEQK_HALF_SPLIT;
        c.p.rotary_dim = 24;
        c.p.window = 50;
        c.p.causal = 1;
        c.p.q_pos_offset = 283, c.p.k_pos_offset = 0;
        c.dtype = ROPEQK_BF16;
        c.in_layout = TH_PADDED, c.out_layout = TH_PADDED;
        break;
    default:
        c.B = 1, c.Hq = 3, c.Hkv = 3, c.Sq = 129, c.Sk = 131, c.D = 136;
        c.dtype = ROPEQK_F16;
        c.per_token_pos = true;
        c.enqueue = true;
        break;
    }
    return c;
}

Test(vk_tune, every_scores_shape_matches_fp64)
{
    static const int blocks[] = {2, 4, 8}, tks[] = {8, 16, 32};
    uint64_t seed = th_seed(20261123ull);
    cr_log_info("seed %llu", (unsigned long long)seed);
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 3; t++) {
            ropeqk_ctx *ctx;
            ropeqk_status st = make(blocks[b], tks[t], &ctx);
            cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
            ropeqk_tuning in;
            cr_assert_eq(ropeqk_ctx_tuning(ctx, &in, NULL), ROPEQK_SUCCESS);
            cr_expect(in.vk_block == blocks[b] && in.vk_tk == tks[t], "tuning read back %d/%d", in.vk_block,
                      in.vk_tk);
            char want[64];
            snprintf(want, sizeof want, "scores block %d (tile %d), %d dims", blocks[b], 16 * blocks[b], tks[t]);
            cr_expect(strstr(ropeqk_ctx_build_options(ctx), want), "%s", ropeqk_ctx_build_options(ctx));
            for (int i = 0; i < 3; i++) {
                th_case c = shape_case(i);
                th_result r = th_run(ctx, &c, seed + (uint64_t)i);
                char d[512];
                th_describe(&c, d, sizeof d);
                cr_expect_eq(r.status, ROPEQK_SUCCESS, "block %d tk %d: %s: %s", blocks[b], tks[t],
                             ropeqk_status_string(r.status), d);
                if (r.status)
                    continue;
                cr_expect(r.max_err <= BOUND && r.mismatch == 0 && r.guards_ok,
                          "block %d tk %d: error %.3g, %lld mismatches, guards %d: %s", blocks[b], tks[t], r.max_err,
                          (long long)r.mismatch, r.guards_ok, d);
            }
            ropeqk_ctx_destroy(ctx);
        }
}
