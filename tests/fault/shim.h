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
/* True when this call of fn is the one to fail (counts it). For the wrappers. */
bool fault_hit(fault_fn fn);

#endif
