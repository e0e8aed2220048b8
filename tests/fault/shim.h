/* Test-only fault injection: link-time wrappers (-Wl,--wrap=...) around the OpenCL and Vulkan entry points and
 * allocators the library calls. Only the library's objects and this test are wrapped; pocl's own
 * allocations are not affected. */
#ifndef ROPEQK_FAULT_SHIM_H
#define ROPEQK_FAULT_SHIM_H

#include <stdbool.h>

typedef enum {
    F_CREATE_BUFFER, F_BUILD_PROGRAM, F_CREATE_KERNEL, F_ENQUEUE_NDRANGE, F_ENQUEUE_READ, F_ENQUEUE_WRITE,
    F_MALLOC,
    /* Vulkan (shim_vk.c) */
    F_VK_CREATE_BUFFER, F_VK_ALLOCATE_MEMORY, F_VK_MAP_MEMORY, F_VK_CREATE_PIPELINES, F_VK_QUEUE_SUBMIT,
    F_VK_ALLOCATE_COMMAND_BUFFERS, F_COUNT
} fault_fn;

extern const char *const fault_names[F_COUNT];

/* Start counting calls; the n-th call (1-based) of fn fails (n = 0: count only). */
void fault_arm(fault_fn fn, long n);
/* Stop counting and failing. */
void fault_disarm(void);
/* Calls of fn since the last fault_arm(). */
long fault_calls(fault_fn fn);
/* Whether the armed fault was hit. */
bool fault_fired(void);
/* After a counting run (fault_arm(fn, 0)): the calls (1-based indices, ascending) that are the first
 * or the last of their call site, into first[0..max); returns how many. A site is the call's return
 * address and its caller's: a loop's calls and a helper's repeated calls from one place are one site,
 * whose first call fails with nothing made yet and whose last with everything before it made (the
 * cleanup of a partial loop), so a sweep fails each site at most twice instead of at every call
 * (issue 30: fault_vulkan took 447 s, over 10 min under ASan). ROPEQK_FAULT_ALL=1: every call. */
long fault_first_sites(long *first, long max);
#define FAULT_MAX_POINTS 65536
/* True when this call of fn is the one to fail (counts it). For the wrappers. */
bool fault_hit(fault_fn fn);

#endif
