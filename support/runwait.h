/* Runs on device memory waited for, and buffers made holding data, through ropeqk.h's neutral run
 * API only (the same code on every backend): for the tests, the bench and the demo, which run a
 * plan and then want its output ("run, wait, read back").
 *
 * Each run call passes a signal, waits for the event (ropeqk_event_wait's bound) and releases it.
 * A refused call must hand back no event (ropeqk.h: *signal is NULL on error); one that does, or
 * leaves *signal unset, gives RQS_ERR_STRAY_EVENT. Messages: ropeqk_last_error(). */
#ifndef RQS_RUNWAIT_H
#define RQS_RUNWAIT_H

#include "ropeqk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A refused call handed back an event. Outside the library's status range. */
#define RQS_ERR_STRAY_EVENT ((ropeqk_status)1)

/* The word a buffer made without data holds: a quiet NaN as f32 (an output never written reads NaN). */
#define RQS_NAN_WORD 0x7FC0DEADu

ropeqk_status rqs_plan_run_wait(ropeqk_plan *plan, const ropeqk_args *a, const ropeqk_step *step);
ropeqk_status rqs_paged_run_wait(ropeqk_plan *plan, const ropeqk_paged_args *a, const ropeqk_paged_batch *batch);
ropeqk_status rqs_paged_append_wait(ropeqk_plan *plan, const ropeqk_tensor *k_new, ropeqk_mem k_new_mem,
                                    const ropeqk_tensor *v_new, ropeqk_mem v_new_mem,
                                    const ropeqk_paged_cache *cache, const ropeqk_paged_batch *batch);
ropeqk_status rqs_copy_wait(const ropeqk_copy *regions, uint32_t n);

/* ropeqk_buffer_create(ctx, bytes, flags) holding a copy of init, or (init NULL) RQS_NAN_WORD in
 * every word. On failure *out is NULL and nothing is left allocated. */
ropeqk_status rqs_buffer_make(ropeqk_ctx *ctx, uint64_t bytes, const void *init, uint32_t flags, ropeqk_buffer **out);

#ifdef __cplusplus
}
#endif
#endif
