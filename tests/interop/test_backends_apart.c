/* The two backends' own calls kept apart (suite backends_apart): OpenCL's calls on a Vulkan context
 * and plan, and Vulkan's record on an OpenCL plan, give nothing and refuse. Built only where both
 * backends are (tests/interop/meson.build), so it needs both headers and no #if; runs with the
 * Vulkan suites (the validation layer on). Moved from tests/vulkan/test_vulkan.c. */
#include "harness.h"
#include "ropeqk_opencl.h"
#include "ropeqk_vulkan.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

TestSuite(backends_apart, .init = th_skip_without_validation, .fini = th_leak_check);

/* A Vulkan context has no OpenCL objects, and OpenCL's enqueue refuses its plans (the plan of
 * vulkan/record_path_buffer_checks: scores with position arrays). */
Test(backends_apart, vulkan_ctx_and_plan_refused_by_opencl_calls)
{
    ropeqk_ctx_params cp = {.device = "vulkan"};
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (st == ROPEQK_ERR_NO_DEVICE)
        cr_skip_test("no Vulkan device: %s", ropeqk_last_error());
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(st), ropeqk_last_error());
    cr_expect_null(ropeqk_opencl_context(ctx));
    th_case c = th_case_small();
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = c.p, .q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 6, 8),
                          .k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 5, 8),
                          .out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 6, 5), .positions = ROPEQK_POS_ARRAYS};
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS);
    ropeqk_opencl_args oa;
    memset(&oa, 0, sizeof oa);
    cr_expect_eq(ropeqk_opencl_plan_enqueue(pl, NULL, &oa, NULL, 0, NULL, NULL), ROPEQK_ERR_BAD_PARAM);
    ropeqk_plan_destroy(pl);
    ropeqk_ctx_destroy(ctx);
}

Test(backends_apart, opencl_plan_refused_by_the_vulkan_record)
{
    ropeqk_ctx_params cp = {.device = "opencl:0:0"};
    ropeqk_ctx *ctx = NULL;
    if (ropeqk_ctx_create(&cp, &ctx) != ROPEQK_SUCCESS)
        cr_skip_test("no OpenCL device");
    cr_expect_null(ropeqk_vulkan_device(ctx));
    th_case c = th_case_small();
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 6, 8), k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 5, 8);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 6, 5);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = c.p, .q = q, .k = k, .out = o};
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_SUCCESS);
    ropeqk_vulkan_args a;
    memset(&a, 0, sizeof a);
    cr_expect_eq(ropeqk_vulkan_plan_record(pl, (VkCommandBuffer)(uintptr_t)0x3000, &a, NULL), ROPEQK_ERR_BAD_PARAM);
    ropeqk_plan_destroy(pl);
    ropeqk_ctx_destroy(ctx);
}
