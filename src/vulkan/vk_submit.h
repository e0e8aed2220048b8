/* The Vulkan backend's submissions of the neutral run API (vk_submit.c), shared with vk_run.c: a
 * per-context command pool on the context's queue, and a timeline semaphore that every submission
 * signals with the next value. A submission's command buffer is recycled once the timeline reaches
 * its value. Not installed. */
#ifndef ROPEQK_VK_SUBMIT_H
#define ROPEQK_VK_SUBMIT_H

#include "../core/run.h"
#include "vk.h"

/* Records a submission's commands between the leading barrier (everything earlier in the queue's
 * order, host writes included, before them) and the trailing one (their writes before every later
 * access, host reads included); nothing is submitted when it fails. */
typedef ropeqk_status (*rq_vk_record_fn)(VkCommandBuffer cmd, void *user);

/* The context's submission queue, made at the first call (ROPEQK_ERR_BAD_PARAM, message naming fn,
 * on a device without timeline semaphores enabled). */
ropeqk_status rq_vk_runq_ready(ropeqk_ctx *ctx, const char *fn);
/* Records with `rec` into a command buffer of the context's pool and submits it to the context's
 * queue (under its lock) after the events of w, signalling the context's timeline with the next
 * value, returned in *value. */
ropeqk_status rq_vk_submit(ropeqk_ctx *ctx, const rq_waits *w, rq_vk_record_fn rec, void *user, uint64_t *value);
/* The context's timeline, and the last value submitted (0 before the first submission). */
VkSemaphore rq_vk_timeline(const ropeqk_ctx *ctx, uint64_t *last);
/* Waits at most ns for semaphore s to reach v: ROPEQK_ERR_TIMEOUT without a message. */
ropeqk_status rq_vk_wait_value(ropeqk_ctx *ctx, VkSemaphore s, uint64_t v, uint64_t ns);
/* A staging buffer whose commands may still run (a wait that timed out): freed once the timeline
 * reaches `value`, or now if it already has. */
void rq_vk_adopt_stage(ropeqk_ctx *ctx, uint64_t value, rq_vk_buf *stage);

#endif
