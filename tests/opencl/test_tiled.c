/* The GPU profile's tiled score kernel (cl/scores_tiled.cl): its knobs through the API and the
 * environment, the host's fallback to qk_scores (local memory too large), and tile shapes against
 * the fp64 path on the cases that exercise its edges: partial tiles of rows, keys and head dims (D
 * not a multiple of the step, odd D), fully masked tiles (causal, sliding window), per-token
 * positions, GQA and MQA, strided inputs and outputs, device buffers with canaries. Also the GPU
 * profile's decode kernel (cl/decode_gpu.cl) on decode shapes. On pocl the kernels run on the CPU:
 * this checks what they compute, not how fast. Each Criterion test runs in its own process, so
 * setenv() here touches no other test. */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void no_platform_skip(void)
{
    th_skip_without_device("the tiled kernel is OpenCL's");
    unsetenv("ROPEQK_PROFILE"); /* the profile is chosen per test through the API */
}

TestSuite(tiled, .init = no_platform_skip, .fini = th_leak_check);

static ropeqk_ctx *gpu_ctx(int32_t tile, int32_t rb, int32_t tk)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.tuning.profile = ROPEQK_PROFILE_GPU;
    cp.tuning.tile = tile;
    cp.tuning.rb = rb;
    cp.tuning.tk = tk;
    ropeqk_ctx *x = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &x);
    cr_assert_eq(st, ROPEQK_SUCCESS, "ropeqk_ctx_create: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    return x;
}

static void expect_tiled(ropeqk_ctx *x, int tile, int rb, int tk)
{
    ropeqk_tuning got;
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    char want[96];
    snprintf(want, sizeof want, "-DRQ_TILE=%d -DRQ_RB=%d -DRQ_TK=%d", tile, rb, tk);
    const char *o = ropeqk_ctx_build_options(x);
    if (tile > 0) {
        cr_expect(strstr(o, want) != NULL, "want %s in %s", want, o);
        cr_expect(got.tile == tile && got.rb == rb && got.tk == tk, "tile %d rb %d tk %d", got.tile, got.rb, got.tk);
    } else {
        cr_expect(strstr(o, "RQ_TILE") == NULL, "the tiled kernel is off: %s", o);
        cr_expect_eq(got.tile, -1, "off reads back as -1, got %d", got.tile);
    }
}

Test(tiled, profile_defaults_and_switching_off)
{
    ropeqk_ctx *x = gpu_ctx(0, 0, 0);
    expect_tiled(x, 64, 4, 16); /* the GPU profile's defaults (src/core/tuning.c) */
    ropeqk_ctx_destroy(x);

    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.tuning.profile = ROPEQK_PROFILE_CPU; /* the CPU profile's options are as before: no tiled kernel */
    cr_assert_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_SUCCESS);
    expect_tiled(x, 0, 0, 0);
    ropeqk_ctx_destroy(x);

    x = gpu_ctx(-1, 0, 0);
    expect_tiled(x, 0, 0, 0);
    ropeqk_ctx_destroy(x);

    setenv("ROPEQK_TILE", "0", 1); /* the environment wins over the API */
    x = gpu_ctx(32, 8, 8);
    expect_tiled(x, 0, 0, 0);
    ropeqk_ctx_destroy(x);
    setenv("ROPEQK_TILE", "128", 1);
    setenv("ROPEQK_RB", "8", 1);
    setenv("ROPEQK_TK", "12", 1);
    x = gpu_ctx(32, 8, 8);
    expect_tiled(x, 128, 8, 12);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "ROPEQK_TILE") != NULL, "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
}

Test(tiled, malformed_values_are_errors)
{
    static const int32_t api[][3] = {{24, 0, 0}, {256, 0, 0}, {-2, 0, 0}, {0, 2, 0},
                                     {0, 16, 0}, {0, 0, 68}, {0, 0, 6},  {0, 0, -1}};
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++) {
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.tuning.profile = ROPEQK_PROFILE_GPU;
        cp.tuning.tile = api[i][0];
        cp.tuning.rb = api[i][1];
        cp.tuning.tk = api[i][2];
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        cr_expect_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_ERR_BAD_CONFIG, "case %zu", i);
        cr_expect_null(x, "case %zu", i);
    }
    static const char *const env[][2] = {{"ROPEQK_TILE", "48"}, {"ROPEQK_TILE", "-1"}, {"ROPEQK_RB", "6"},
                                         {"ROPEQK_RB", "1"},    {"ROPEQK_TK", "0"},    {"ROPEQK_TK", "10"},
                                         {"ROPEQK_TK", "x"}};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        setenv(env[i][0], env[i][1], 1);
        ropeqk_ctx *x = (ropeqk_ctx *)1;
        cr_expect_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_ERR_BAD_CONFIG, "%s='%s'", env[i][0], env[i][1]);
        cr_expect_null(x);
        cr_expect(strstr(ropeqk_last_error(), env[i][0]) != NULL, "message '%s'", ropeqk_last_error());
        unsetenv(env[i][0]);
    }
}

/* A GQA causal prefill whose scores match the fp64 path on ctx (the fallback's result too). */
static void expect_scores_ok(ropeqk_ctx *x, uint64_t seed)
{
    th_case c;
    memset(&c, 0, sizeof c);
    ropeqk_default_params(&c.p);
    c.B = 1, c.Hq = 4, c.Hkv = 2, c.Sq = 70, c.Sk = 90, c.D = 64, c.dtype = ROPEQK_F32;
    c.p.causal = 1;
    c.p.q_pos_offset = 20;
    th_result r = th_run(x, &c, seed);
    cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(r.status), ropeqk_last_error());
    cr_expect(r.max_err <= 1e-5 && r.mismatch == 0, "max error %.3g, %lld mismatches", r.max_err,
              (long long)r.mismatch);
}

/* A shape the device cannot run is turned off at context creation, with the reason in the
 * configuration source, and the scores still come (from qk_scores). The work-group limit is
 * checked by test_tiled_fit (a device limit cannot be lowered here). */
Test(tiled, too_large_shapes_fall_back_to_qk_scores)
{
    /* local memory: 4 * (2 * 128 * 64 + 2 * 128 + 4) = 66576 bytes > 48 KiB */
    ropeqk_ctx *x = gpu_ctx(128, 8, 64);
    expect_tiled(x, 0, 0, 0);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "tiled kernel off") != NULL, "%s", ropeqk_ctx_config_source(x));
    expect_scores_ok(x, 5);
    ropeqk_ctx_destroy(x);
}

/* Each shape on cases that cut tiles everywhere: the default, the smallest tile (4 work-items
 * per side), 8x8 blocks with a step that divides no head dim here but 72, the largest tile, and a
 * step longer than some head dims. (Each shape is a program build: about 20 s on pocl.) */
Test(tiled, shapes_match_fp64)
{
    static const int shapes[][3] = {{64, 4, 16}, {16, 4, 4}, {32, 8, 12}, {128, 8, 8}, {32, 4, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        ropeqk_ctx *x = gpu_ctx(shapes[s][0], shapes[s][1], shapes[s][2]);
        for (int k = 0; k < 4; k++) {
            if ((s + (size_t)k) % (size_t)th_stride()) /* each case on every N-th shape (harness.h) */
                continue;
            th_case c;
            memset(&c, 0, sizeof c);
            ropeqk_default_params(&c.p);
            c.dtype = ROPEQK_F32;
            switch (k) {
            case 0: /* causal GQA prefill, queries at the end of the keys: tiles above the diagonal skip */
                c.B = 2, c.Hq = 8, c.Hkv = 2, c.Sq = 77, c.Sk = 150, c.D = 72;
                c.p.causal = 1;
                c.p.k_pos_offset = 5;
                c.p.q_pos_offset = 5 + 150 - 77;
                c.in_layout = TH_BSHD;
                c.out_layout = TH_PADDED;
                break;
            case 1: /* sliding window with per-token positions (drawn small so that masks bite) */
                c.B = 1, c.Hq = 4, c.Hkv = 1, c.Sq = 40, c.Sk = 133, c.D = 64;
                c.p.causal = 1;
                c.p.window = 33;
                c.per_token_pos = true;
                c.pos_max = 200;
                c.p.layout = ROPEQK_HALF_SPLIT;
                break;
            case 2: /* f16 MQA through device buffers with NaN canaries, no mask, partial rotary, an
                     * odd head dim (the last group of 4 dims is partial) */
                c.B = 1, c.Hq = 8, c.Hkv = 1, c.Sq = 65, c.Sk = 130, c.D = 67;
                c.dtype = ROPEQK_F16;
                c.p.rotary_dim = 32;
                c.enqueue = true;
                c.in_layout = TH_PADDED;
                break;
            default: /* window with offsets far out: whole tiles masked on both sides of the band */
                c.B = 1, c.Hq = 2, c.Hkv = 2, c.Sq = 200, c.Sk = 200, c.D = 32;
                c.p.causal = 1;
                c.p.window = 50;
                c.p.k_pos_offset = ((int64_t)1 << 20) - 200;
                c.p.q_pos_offset = c.p.k_pos_offset;
                c.enqueue = true;
                break;
            }
            th_result r = th_run(x, &c, 900 + (uint64_t)(s * 4 + (size_t)k));
            char d[512];
            th_describe(&c, d, sizeof d);
            cr_expect_eq(r.status, ROPEQK_SUCCESS, "shape %zu: %s: %s", s, ropeqk_status_string(r.status), d);
            cr_expect(r.max_err <= 1e-5, "shape %zu: max error %.3g: %s", s, r.max_err, d);
            cr_expect_eq(r.mismatch, 0, "shape %zu: %s", s, d);
            cr_expect(r.guards_ok, "shape %zu: bytes outside the views changed: %s", s, d);
            if (k == 0 || k == 3)
                cr_expect_gt(r.masked, 0, "the case masks something: %s", d);
        }
        ropeqk_ctx_destroy(x);
    }
}

/* The GPU decode kernel (decode on in the GPU profile) on decode-shaped cases: few rows per KV
 * head, long keys, both layouts and storage types, masks, per-token positions, strided views. */
Test(tiled, gpu_decode_matches_fp64)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.tuning.profile = ROPEQK_PROFILE_GPU;
    cp.tuning.decode = 1;
    ropeqk_ctx *x = NULL;
    cr_assert_eq(ropeqk_ctx_create(&cp, &x), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    const char *o = ropeqk_ctx_build_options(x);
    cr_expect(strstr(o, "-DRQ_DECODE=1") && strstr(o, "-DRQ_DECODE_GPU=1"), "%s", o);
    for (int k = 0; k < 6; k++) {
        th_case c;
        memset(&c, 0, sizeof c);
        ropeqk_default_params(&c.p);
        c.dtype = (ropeqk_dtype)(k % 3);
        c.p.layout = k % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
        c.B = 2, c.Hq = 8, c.Hkv = 1, c.Sq = 1, c.Sk = 1000, c.D = 128; /* GQA decode, 8 rows */
        c.p.causal = 1;
        c.p.k_pos_offset = ((int64_t)1 << 20) - 1000;
        c.p.q_pos_offset = c.p.k_pos_offset + 999;
        switch (k) {
        case 1: /* 2 KV heads x 2 query heads x 2 rows, a window, per-token positions */
            c.Hq = 4, c.Hkv = 2, c.Sq = 2, c.Sk = 333;
            c.p.window = 100;
            c.per_token_pos = true;
            c.pos_max = 500;
            break;
        case 2: /* odd D with partial rotary (pass-through dims), strided views, canaries */
            c.D = 67;
            c.p.rotary_dim = 32;
            c.in_layout = TH_BSHD;
            c.out_layout = TH_PADDED;
            c.enqueue = true;
            break;
        case 3: /* MHA decode: one row per KV head, the largest head dim */
            c.Hq = 4, c.Hkv = 4, c.D = 256, c.Sk = 70;
            c.enqueue = true;
            break;
        case 4: /* keys not a multiple of the block, no mask */
            c.Sk = 65;
            c.p.causal = 0;
            c.in_layout = TH_PADDED;
            break;
        default:
            break;
        }
        th_result r = th_run(x, &c, 700 + (uint64_t)k);
        char d[512];
        th_describe(&c, d, sizeof d);
        cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(r.status), d);
        cr_expect(r.max_err <= 1e-5, "max error %.3g: %s", r.max_err, d);
        cr_expect_eq(r.mismatch, 0, "%s", d);
        cr_expect(r.guards_ok, "bytes outside the views changed: %s", d);
    }
    ropeqk_ctx_destroy(x);
}
