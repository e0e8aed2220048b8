/* Device path on either backend: named edge cases, a second call on the built program, and requests
 * split to fit the allocation limit (OpenCL; skips on Vulkan). OpenCL's own API (ropeqk_opencl_enqueue
 * with offsets and events, borrowed objects, device specs, a failed build): tests/opencl/test_device.c. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(device, .init = th_ctx_init, .fini = th_ctx_fini);

static void expect_ok(const th_case *c, uint64_t seed)
{
    th_result r = th_run(th_ctx, c, seed);
    char d[512];
    th_describe(c, d, sizeof d);
    cr_assert_eq(r.status, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(r.status), d);
    cr_expect(r.max_err <= 1e-5, "max error %.3g: %s", r.max_err, d);
    cr_expect_eq(r.mismatch, 0, "%s", d);
    cr_expect(r.guards_ok, "%s", d);
}

Test(device, decode_gqa_llama_shape)
{
    th_case c = th_case_gqa();
    c.Hq = 32; c.Hkv = 4; c.Sq = 1; c.Sk = 1000; c.D = 128;
    c.p.layout = ROPEQK_HALF_SPLIT; c.p.base = 500000; c.p.causal = 1;
    c.p.q_pos_offset = c.Sk - 1;
    expect_ok(&c, 1);
}

Test(device, positions_2_pow_20_both_layouts_f32_f16)
{
    for (int lay = 0; lay < 2; lay++)
        for (int f16 = 0; f16 < 2; f16++) {
            th_case c = th_case_gqa();
            c.D = 128; c.Sq = 33; c.Sk = 127; c.p.base = 1e6; c.p.layout = (ropeqk_layout)lay;
            c.dtype = f16 ? ROPEQK_F16 : ROPEQK_F32;
            c.p.k_pos_offset = (1 << 20) - c.Sk;
            c.p.q_pos_offset = (1 << 20) - c.Sq;
            c.p.causal = 1;
            expect_ok(&c, 2);
        }
}

Test(device, positions_near_int32_max)
{
    th_case c = th_case_gqa();
    c.D = 64; c.p.base = 1e6;
    c.p.k_pos_offset = INT32_MAX - c.Sk + 1;
    c.p.q_pos_offset = INT32_MAX - c.Sq + 1;
    expect_ok(&c, 3);
    c.p.k_pos_offset = INT32_MIN;
    c.p.q_pos_offset = INT32_MIN;
    expect_ok(&c, 3);
}

Test(device, fully_masked_rows_are_all_minus_inf)
{
    th_case c = th_case_gqa();
    c.p.causal = 1;
    c.p.q_pos_offset = 0;
    c.p.k_pos_offset = 100; /* every key is in every query's future */
    th_result r = th_run(th_ctx, &c, 4);
    cr_assert_eq(r.status, ROPEQK_SUCCESS);
    cr_expect_eq(r.mismatch, 0);
    cr_expect_eq(r.masked, c.B * c.Hq * c.Sq * c.Sk);
}

Test(device, mqa_and_one_by_one)
{
    th_case c = th_case_gqa();
    c.Hq = 8; c.Hkv = 1;
    expect_ok(&c, 5);
    c = th_case_gqa();
    c.Sq = 1; c.Sk = 1; c.D = 2; c.Hq = 1; c.Hkv = 1;
    expect_ok(&c, 6);
}

Test(device, odd_head_dim_with_partial_rotary)
{
    th_case c = th_case_gqa();
    c.D = 7; c.p.rotary_dim = 4;
    expect_ok(&c, 7);
    c.p.layout = ROPEQK_HALF_SPLIT;
    expect_ok(&c, 7);
}

Test(device, second_call_reuses_the_program)
{
    /* a warm-up builds; enqueueing afterwards must not need the compiler: the program count in the
     * cache is internal, so check the observable part: both calls succeed with equal results */
    cr_assert_eq(ropeqk_ctx_warmup(th_ctx), ROPEQK_SUCCESS);
    th_case c = th_case_gqa();
    th_result a = th_run(th_ctx, &c, 8), b = th_run(th_ctx, &c, 8);
    cr_expect_eq(a.status, 0);
    cr_expect_eq(b.status, 0);
    cr_expect_eq(a.max_err, b.max_err);
}

/* ---- device limits: scratch past CL_DEVICE_MAX_MEM_ALLOC_SIZE is split, not refused ------- */

static ropeqk_ctx *small_ctx(const char *limit)
{
    setenv("ROPEQK_MAX_ALLOC", limit, 1);
    ropeqk_ctx *x = NULL;
    cr_assert_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_SUCCESS);
    unsetenv("ROPEQK_MAX_ALLOC");
    return x;
}

Test(device, huge_requests_are_split_to_fit_the_allocation_limit)
{
    TH_SKIP_ON_VULKAN(th_ctx, "the split of requests past CL_DEVICE_MAX_MEM_ALLOC_SIZE (ROPEQK_MAX_ALLOC)");
    ropeqk_ctx *x = small_ctx("16384"); /* 4096 floats of scratch at most */
    th_case c = th_case_gqa();
    c.Sq = 127; c.Sk = 512; c.D = 64; c.Hq = 4; c.Hkv = 2; c.p.causal = 1;
    c.p.q_pos_offset = (1 << 20) - 127; c.p.k_pos_offset = (1 << 20) - 512;
    for (int enq = 0; enq < 2; enq++) {
        c.enqueue = enq;
        th_result r = th_run(x, &c, 21);
        char d[512];
        th_describe(&c, d, sizeof d);
        cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(r.status), d);
        cr_expect(r.max_err <= 1e-5 && r.mismatch == 0 && r.guards_ok, "split run: err %g mismatch %lld: %s",
                  r.max_err, (long long)r.mismatch, d);
    }
    /* per-token positions, a window and dynamic NTK with the length derived from the offsets */
    c.per_token_pos = true; c.pos_max = 5000; c.enqueue = true;
    th_result r = th_run(x, &c, 22);
    cr_expect(r.status == 0 && r.max_err <= 1e-5 && r.mismatch == 0, "per-token split: %d %g", r.status, r.max_err);
    c.per_token_pos = false; c.p.window = 100;
    c.p.scaling.type = ROPEQK_SCALING_DYNAMIC; c.p.scaling.factor = 2; c.p.scaling.original_max_position = 4096;
    r = th_run(x, &c, 23);
    cr_expect(r.status == 0 && r.max_err <= 1e-5 && r.mismatch == 0, "dynamic split: %d %g", r.status, r.max_err);
    ropeqk_ctx_destroy(x);

    /* one query row and one key of D = 256 need more than 64 bytes: refused, output untouched */
    x = small_ctx("64");
    c = th_case_gqa();
    c.D = 256;
    r = th_run(x, &c, 24);
    cr_expect_eq(r.status, ROPEQK_ERR_TOO_LARGE);
    ropeqk_ctx_destroy(x);
}
