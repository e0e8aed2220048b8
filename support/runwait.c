/* Runs waited for and buffers made holding data (runwait.h): ropeqk.h only. */
#include "runwait.h"

#include <stdint.h>

/* Set before a run: a refusal must set *signal to NULL, not leave it nor hand an event back. */
#define UNSET ((ropeqk_event *)(uintptr_t)0x10)

/* A run's status and event: the event waited for and released. */
static ropeqk_status waited(ropeqk_status st, ropeqk_event *ev)
{
    if (st) {
        if (!ev)
            return st;
        if (ev != UNSET) {
            ropeqk_event_wait(ev, UINT64_MAX);
            ropeqk_event_release(ev);
        }
        return RQS_ERR_STRAY_EVENT;
    }
    if (!ev || ev == UNSET)
        return RQS_ERR_STRAY_EVENT; /* success without its event: the same broken promise */
    st = ropeqk_event_wait(ev, UINT64_MAX);
    ropeqk_event_release(ev);
    return st;
}

ropeqk_status rqs_plan_run_wait(ropeqk_plan *plan, const ropeqk_args *a, const ropeqk_step *step)
{
    ropeqk_event *ev = UNSET;
    ropeqk_status st = ropeqk_plan_run(plan, a, step, 0, NULL, &ev);
    return waited(st, ev);
}

ropeqk_status rqs_paged_run_wait(ropeqk_plan *plan, const ropeqk_paged_args *a, const ropeqk_paged_batch *batch)
{
    ropeqk_event *ev = UNSET;
    ropeqk_status st = ropeqk_paged_run(plan, a, batch, 0, NULL, &ev);
    return waited(st, ev);
}

ropeqk_status rqs_paged_append_wait(ropeqk_plan *plan, const ropeqk_tensor *k_new, ropeqk_mem k_new_mem,
                                    const ropeqk_tensor *v_new, ropeqk_mem v_new_mem,
                                    const ropeqk_paged_cache *cache, const ropeqk_paged_batch *batch)
{
    ropeqk_event *ev = UNSET;
    ropeqk_status st = ropeqk_paged_append(plan, k_new, k_new_mem, v_new, v_new_mem, cache, batch, 0, NULL, &ev);
    return waited(st, ev);
}

ropeqk_status rqs_copy_wait(const ropeqk_copy *regions, uint32_t n)
{
    ropeqk_event *ev = UNSET;
    ropeqk_status st = ropeqk_buffer_copy(regions, n, 0, NULL, &ev);
    return waited(st, ev);
}

ropeqk_status rqs_buffer_make(ropeqk_ctx *ctx, uint64_t bytes, const void *init, uint32_t flags, ropeqk_buffer **out)
{
    ropeqk_status st = ropeqk_buffer_create(ctx, bytes, flags, out);
    if (st)
        return st;
    st = init ? ropeqk_buffer_write(*out, 0, init, bytes)
              : ropeqk_buffer_fill(*out, 0, ropeqk_buffer_size(*out), RQS_NAN_WORD);
    if (st) {
        ropeqk_buffer_destroy(*out);
        *out = NULL;
    }
    return st;
}
