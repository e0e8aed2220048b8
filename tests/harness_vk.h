/* The harness's Vulkan helpers (harness_vk.c). */
#ifndef ROPEQK_TEST_HARNESS_VK_H
#define ROPEQK_TEST_HARNESS_VK_H

#include "harness.h"
#include "ropeqk_vulkan.h"

/* Records with `record` into a new command buffer on the context's queue, submits, waits. */
typedef ropeqk_status (*th_vk_record_fn)(VkCommandBuffer cmd, void *user);
ropeqk_status th_vk_submit(ropeqk_ctx *ctx, th_vk_record_fn record, void *user);

/* th_run's record path on a Vulkan context: buffers between canaries, ropeqk_vulkan_plan_record. */
ropeqk_status th_vk_run_scores(ropeqk_ctx *ctx, const th_case *c, th_buf *q, th_buf *k, const int32_t *qp,
                               const int32_t *kp, th_buf *o, bool *guards_ok);

#endif
