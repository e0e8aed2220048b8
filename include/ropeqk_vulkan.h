/*
 * ropeqk on Vulkan, interop only: contexts on a Vulkan device (opened by the library, or the
 * caller's own VkInstance / VkPhysicalDevice / VkDevice / queue), the caller's VkBuffer ranges and
 * timeline semaphores as ropeqk_buffer and ropeqk_event (and their handles out), and plans recorded
 * into the caller's command buffers on VkBuffer ranges. Everything backend-neutral is in ropeqk.h
 * (included here), and works unchanged on a Vulkan context: ropeqk_ctx_create() with the device
 * "vulkan" or "vulkan:N", ropeqk_scores(), ropeqk_attention(), plans, ropeqk_ctx_warmup(), and the
 * runs on device memory (ropeqk_plan_run, ...: the library's own command buffers, submitted to the
 * context's queue, signalling a timeline semaphore of the context).
 *
 * Synchronisation is the caller's command buffer: ropeqk_vulkan_plan_record() only records commands
 * (a leading barrier, compute dispatches); the caller submits them and waits the Vulkan way.
 *   - The recorded commands start with a barrier that makes every earlier write in the queue's
 *     submission order (compute, transfer, host) visible to the library's shaders, and waits for
 *     earlier work that used the plan's scratch.
 *   - The output is written by compute shaders: before reading it, the caller records a barrier from
 *     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT / VK_ACCESS_SHADER_WRITE_BIT to its own stage and access.
 *   - A plan owns its scratch: commands recorded from one plan must execute in one queue's order
 *     (not on two queues at once). Recording itself is thread-safe.
 * Shaders reach buffers through push descriptors (VK_KHR_push_descriptor, core in Vulkan 1.4):
 * a device the caller creates must enable the extensions ropeqk_vulkan_device_extensions() lists.
 * Buffers need VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (and TRANSFER_DST for paged-decode metadata,
 * which the library keeps itself).
 *
 * The host-memory calls (ropeqk_scores(), ropeqk_attention(), warm-up, the tuner) submit to the
 * context's queue and wait on a fence for at most the library's wait bound (ropeqk.h: 300 s or
 * ROPEQK_WAIT_TIMEOUT_MS milliseconds, read at context creation; malformed: ROPEQK_ERR_BAD_CONFIG).
 * A dispatch still running then (a hung device) fails the call with ROPEQK_ERR_TIMEOUT, backend
 * error VK_TIMEOUT kept, a message naming the dispatch; the context then refuses every further
 * call (its command buffer may still run), and ropeqk_ctx_destroy() waits once more, as long and
 * at least 10 s (for the neutral run API's submissions too), then destroys the context's Vulkan
 * objects, or leaks them if the work still has not completed, rather than destroy them in use or
 * wait forever.
 */
#ifndef ROPEQK_VULKAN_H
#define ROPEQK_VULKAN_H

#include "ropeqk.h"
#include <vulkan/vulkan.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The device extensions a borrowed VkDevice must have enabled (static storage). */
ROPEQK_API const char *const *ropeqk_vulkan_device_extensions(uint32_t *count);

/* One Vulkan device (index = the N of "vulkan:N"). ropeqk_list_devices() (ropeqk.h) lists the same
 * devices backend-neutrally, as `ropeqk devices` prints them. */
typedef struct {
    char name[256];
    char driver[128];        /* driver name and info, e.g. "llvmpipe (Mesa 22.3.6)" */
    uint32_t api_version;    /* VK_MAKE_API_VERSION form */
    int32_t cpu;             /* VK_PHYSICAL_DEVICE_TYPE_CPU */
    int32_t usable;          /* has a compute queue and the required extensions */
    int32_t cooperative_matrix; /* VK_KHR_cooperative_matrix present */
    /* its listed shapes and types ("16x16x16 f16*f16+f32->f32, 16x8x16 ...", or why none), from
     * vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR */
    char cooperative_matrix_shapes[256];
    int32_t coopmat_shaders; /* this library was built with the cooperative-matrix shaders */
} ropeqk_vulkan_device_info;

/* Lists up to `cap` devices into infos (may be NULL with cap 0) and the total into *count.
 * ROPEQK_ERR_NO_DEVICE when there is no Vulkan loader or driver (ropeqk_last_error() says which). */
ROPEQK_API ropeqk_status ropeqk_vulkan_list_devices(ropeqk_vulkan_device_info *infos, uint32_t cap,
                                                    uint32_t *count);

/* Borrowed objects (all required): the library never destroys them. `queue` belongs to
 * `queue_family`, which must support compute. The host-memory calls (ropeqk_scores, ...) and plan
 * creation submit to `queue`: Vulkan requires the caller not to use it from another thread during
 * those calls. Plans on a borrowed device never take the tensor-core path (docs/tensor-cores.md:
 * the library cannot know which of its features the device was created with). */
typedef struct {
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    uint32_t queue_family;
    VkQueue queue;
    ropeqk_tuning tuning; /* zeroed = the profile's defaults */
    /* 1: `device` was created with Vulkan 1.2's timelineSemaphore feature enabled (an API version of
     * 1.2 or later on the instance and device), which the runs on device memory of ropeqk.h need
     * (ropeqk_plan_run, ropeqk_buffer_*, events); 0: those calls return ROPEQK_ERR_BAD_PARAM on this
     * context, and everything else works. */
    int32_t timeline_semaphore;
} ropeqk_vulkan_ctx_params;

ROPEQK_API ropeqk_status ropeqk_vulkan_ctx_create(const ropeqk_vulkan_ctx_params *params, ropeqk_ctx **out);

/* The context's Vulkan objects (VK_NULL_HANDLE for NULL or a context of another backend). */
ROPEQK_API VkInstance ropeqk_vulkan_instance(const ropeqk_ctx *ctx);
ROPEQK_API VkPhysicalDevice ropeqk_vulkan_physical_device(const ropeqk_ctx *ctx);
ROPEQK_API VkDevice ropeqk_vulkan_device(const ropeqk_ctx *ctx);
ROPEQK_API VkQueue ropeqk_vulkan_queue(const ropeqk_ctx *ctx, uint32_t *queue_family);

/* Messages (warnings and errors) of the Khronos validation layer seen by a context the library
 * opened with ROPEQK_VULKAN_VALIDATION in the environment: "1" (or "required"): the layer is
 * enabled, and without it installed context creation fails with ROPEQK_ERR_BAD_CONFIG (the suite
 * on lavapipe); "auto": enabled where installed, otherwise the context is made without it (the
 * suite's tests then skip, saying why: meson -Dvulkan_validation=auto); unset, "" or "0": off;
 * any other value: ROPEQK_ERR_BAD_CONFIG. Returns their count, and the first
 * one copied into buf (len bytes, NUL-terminated when len > 0). ctx NULL: every context of the
 * process so far, destroyed ones included. 0 when validation is off. Each message is also printed
 * to stderr as "ropeqk: Vulkan validation: ...". */
ROPEQK_API uint32_t ropeqk_vulkan_validation_messages(const ropeqk_ctx *ctx, char *buf, size_t len);

/* A buffer range: `range` bytes usable from `offset` (VK_WHOLE_SIZE is not accepted: the library
 * checks every view against it). */
typedef struct {
    VkBuffer buf;        /* VK_NULL_HANDLE allowed only for positions (meaning: use the offsets) */
    VkDeviceSize offset; /* byte offset into buf */
    VkDeviceSize range;  /* bytes from offset */
} ropeqk_vulkan_mem;

typedef struct {
    ropeqk_vulkan_mem q, k;
    ropeqk_vulkan_mem q_pos, k_pos; /* int32, Sq resp. Sk entries; {0}: offsets */
    ropeqk_vulkan_mem out;
    ropeqk_vulkan_mem v, lse;       /* ROPEQK_OP_ATTENTION: V, and LSE when the plan has with_lse */
} ropeqk_vulkan_args;

/*
 * Records a plan into `cmd` (in the recording state, on a queue of the context's queue family).
 * `step` is NULL for fixed plans, required for decode plans. Checked before anything is recorded:
 * buffers present, offsets aligned to the element size, ranges large enough for the views and no
 * larger than the device's storage-buffer range limit (ROPEQK_ERR_TOO_LARGE), the output
 * overlapping no input, positions only where the plan allows arrays.
 */
ROPEQK_API ropeqk_status ropeqk_vulkan_plan_record(ropeqk_plan *plan, VkCommandBuffer cmd,
                                                   const ropeqk_vulkan_args *args, const ropeqk_step *step);

/* ---- paged KV cache (ROPEQK_OP_PAGED_DECODE plans; docs/conventions.md section 10) ------------ */
typedef struct {
    ropeqk_vulkan_mem q, k_cache, v_cache, out, lse; /* lse only with with_lse ({0} otherwise) */
    /* the f32 scales of 8-bit caches (ropeqk.h, docs/conventions.md section 12): required exactly
     * when that cache is 8-bit, {0} otherwise. An 8-bit cache needs no alignment beyond a byte (codes
     * are taken out of 32-bit words; the range must hold the word of the last byte) */
    ropeqk_vulkan_mem k_scale, v_scale;
} ropeqk_vulkan_paged_args;

/* The caches an append writes: K and V, and their scales (8-bit caches only: the append quantizes its
 * rows into them with the bytes and scales of the OpenCL append and support/quant.c, on any device). */
typedef struct {
    ropeqk_vulkan_mem k_cache, v_cache, k_scale, v_scale;
} ropeqk_vulkan_paged_cache;

/*
 * Records decode over the paged cache into `cmd` (split over pages, then a reduction pass), as
 * ropeqk_opencl_paged_enqueue computes it. The batch's host arrays are validated first (specific
 * statuses: ROPEQK_ERR_SEQ_LENGTH, ROPEQK_ERR_PAGE_RANGE, ROPEQK_ERR_PAGE_DUPLICATE, ...; nothing is
 * recorded on error) and then recorded into the command buffer itself (vkCmdUpdateBuffer into the
 * plan's metadata buffer): the arrays may be freed as soon as the call returns. The plan's metadata
 * and scratch buffers are reused by its next recording, so the usual rule holds: commands recorded
 * from one plan execute in one queue's order. A prefill chunk (16+ rows of one sequence) is recorded
 * as a gather of its pages into plan-owned scratch (made at the first such recording: the plan's
 * capacity of K and V in the caches' dtypes; ROPEQK_ERR_BACKEND if the device refuses it, nothing
 * recorded) and the attention shader over it, after the decode's commands. The commands start with the same leading barrier as
 * ropeqk_vulkan_plan_record; the caller's barrier after them makes out and lse visible.
 */
ROPEQK_API ropeqk_status ropeqk_vulkan_paged_record(ropeqk_plan *plan, VkCommandBuffer cmd,
                                                    const ropeqk_vulkan_paged_args *args,
                                                    const ropeqk_paged_batch *batch);

/* Records the append of n_new unrotated K/V rows per sequence (k_new [n_seqs, Hkv, n_new, D],
 * v_new [n_seqs, Hkv, n_new, Dv], the caches' dtypes; for an 8-bit cache f32/f16/bf16) at tokens
 * seq_lens[s] .. seq_lens[s]+n_new-1 of each sequence's pages (batch->seq_lens: the lengths before
 * the append; q_pos and k_pos0 are not used), as ropeqk_opencl_paged_append does. Same checks, barrier and metadata rules as above. */
ROPEQK_API ropeqk_status ropeqk_vulkan_paged_append(ropeqk_plan *plan, VkCommandBuffer cmd,
                                                   const ropeqk_tensor *k_new, ropeqk_vulkan_mem k_new_mem,
                                                   const ropeqk_tensor *v_new, ropeqk_vulkan_mem v_new_mem,
                                                   const ropeqk_vulkan_paged_cache *cache,
                                                   const ropeqk_paged_batch *batch);

/* ---- the neutral run API's objects (ropeqk.h) on Vulkan objects ------------------------------ */
/* `range` bytes of the caller's VkBuffer from `offset` as a ropeqk_buffer (borrowed: never
 * destroyed; its size is range). The buffer needs VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, and
 * TRANSFER_SRC / TRANSFER_DST for reads, writes, fills and copies (staged: vkCmdCopyBuffer,
 * vkCmdFillBuffer); offset a multiple of 4. ROPEQK_ERR_BAD_PARAM on a non-Vulkan ctx. */
ROPEQK_API ropeqk_status ropeqk_vulkan_buffer_wrap(ropeqk_ctx *ctx, VkBuffer buffer, VkDeviceSize offset,
                                                   VkDeviceSize range, ropeqk_buffer **out);
/* The buffer's VkBuffer and the range it spans (offset, range: optional); VK_NULL_HANDLE for NULL
 * or a buffer of another backend. */
ROPEQK_API VkBuffer ropeqk_vulkan_buffer_handle(const ropeqk_buffer *buf, VkDeviceSize *offset, VkDeviceSize *range);
/* The caller's timeline semaphore (VK_SEMAPHORE_TYPE_TIMELINE, of the context's VkDevice) reaching
 * `value`, as a wait condition for the neutral calls (borrowed: never destroyed). */
ROPEQK_API ropeqk_status ropeqk_vulkan_event_wrap(ropeqk_ctx *ctx, VkSemaphore timeline, uint64_t value,
                                                  ropeqk_event **out);
/* The timeline semaphore and value an event stands for (value optional; the library's own
 * semaphore for its events: wait on it, never signal it); VK_NULL_HANDLE for NULL or another
 * backend's event. */
ROPEQK_API VkSemaphore ropeqk_vulkan_event_semaphore(const ropeqk_event *ev, uint64_t *value);

#ifdef __cplusplus
}
#endif
#endif /* ROPEQK_VULKAN_H */
