/* The neutral run API's objects (ropeqk.h: ropeqk_buffer, ropeqk_event) as the core and every backend
 * see them. The core (run.c) checks a call's NULLs, ownership, ranges and events, turns each
 * {buffer, offset} into the neutral {id, offset, end} record of call.h, and calls the backend's table
 * entry (backend.h); the backend turns the records back into its native handles and runs the call
 * through the same code as its interop entry points (which run the core's view checks: call.c,
 * paged_call.c). Not installed. */
#ifndef ROPEQK_CORE_RUN_H
#define ROPEQK_CORE_RUN_H

#include "call.h"

struct ropeqk_buffer {
    ropeqk_ctx *ctx;
    uint64_t size;   /* bytes usable (ropeqk_buffer_size) */
    uint32_t flags;  /* ROPEQK_BUFFER_* */
    bool borrowed;   /* a caller's native object (ropeqk_opencl_buffer_wrap, ropeqk_vulkan_buffer_wrap) */
    uintptr_t id;    /* the native object's identity, which the view and overlap checks compare (cl_mem,
                      * VkBuffer) */
    uint64_t base;   /* where the buffer starts in that object (a wrapped Vulkan range; else 0) */
    void *impl;      /* the backend's (its memory, a mapping); NULL for a borrowed object */
};

struct ropeqk_event {
    ropeqk_ctx *ctx;
    const char *what;  /* the operation that signals it, for timeout messages (static storage) */
    uintptr_t handle;  /* a cl_event (a reference the event owns), or a VkSemaphore (timeline) */
    uint64_t value;    /* Vulkan: the timeline value that completes it */
    bool borrowed;     /* a caller's object (ropeqk_*_event_wrap) */
};

/* The events a call waits for, checked by the core: each of the call's backend and device. */
typedef struct rq_waits {
    uint32_t n;
    ropeqk_event *const *ev;
} rq_waits;

/* A zeroed buffer of ctx (NULL: out of memory); the backend fills id, base, impl. */
ropeqk_buffer *rq_buffer_new(ropeqk_ctx *ctx, uint64_t size, uint32_t flags);
/* An event of ctx (NULL: out of memory). */
ropeqk_event *rq_event_new(ropeqk_ctx *ctx, const char *what, uintptr_t handle, uint64_t value, bool borrowed);
/* The bound of the library's blocking waits: $ROPEQK_WAIT_TIMEOUT_MS milliseconds (>= 1), else
 * RQ_WAIT_DEFAULT_MS; ROPEQK_ERR_BAD_CONFIG (message set) when the variable is malformed. */
#define RQ_WAIT_DEFAULT_MS 300000ull
ropeqk_status rq_wait_bound(uint64_t *ns);
/* A call's wait list on ctx: present when n > 0, no NULL entry (ROPEQK_ERR_NULL_POINTER), each
 * event of ctx or of a context sharing its device (ROPEQK_ERR_BAD_PARAM); fills *w. */
ropeqk_status rq_check_waits(ropeqk_ctx *ctx, uint32_t n, ropeqk_event *const *wait, const char *fn, rq_waits *w);
/* signal NULL: *shell NULL. Else *signal = NULL and *shell a new event of ctx signalled by `what`
 * (ROPEQK_ERR_OUT_OF_HOST_MEMORY), which the caller frees (free()) if the call fails. */
ropeqk_status rq_signal_shell(ropeqk_ctx *ctx, ropeqk_event **signal, const char *what, ropeqk_event **shell);
/* Sets "fn: <what> did not complete within N ms" and returns ROPEQK_ERR_TIMEOUT. */
ropeqk_status rq_timeout(const char *fn, const char *what, uint64_t ns);

#endif
