/* ropeqk-bench's own Vulkan helpers (vk.c) for --vulkan (vk_bench.c): device-local buffers filled
 * and read back through a staging buffer, reusable command buffers, submit + fence wait. The
 * context is the library's (ropeqk_ctx_create with "vulkan"); the pool and fence are the bench's. */
#ifndef ROPEQK_BENCH_VK_H
#define ROPEQK_BENCH_VK_H

#include "ropeqk_vulkan.h"

typedef struct {
    ropeqk_ctx *rq;
    VkDevice dev;
    VkQueue queue;
    VkCommandPool pool;
    VkFence fence;
    VkPhysicalDeviceMemoryProperties mp;
} bvk;

typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
} bvk_buf;

/* Opens a Vulkan context on device spec ("vulkan", "vulkan:N") and the bench's pool and fence.
 * Returns a ropeqk status (ROPEQK_ERR_BACKEND for the bench's own Vulkan calls). */
int bvk_open(bvk *v, const char *spec);
void bvk_close(bvk *v);

/* A device-local storage buffer (transfer source and destination too) of size bytes; filled from
 * host when non-NULL, else with the byte fill (0xFF: NaN in f32, so a kernel that writes nothing
 * shows). */
int bvk_buf_make(bvk *v, VkDeviceSize size, const void *host, int fill, bvk_buf *b);
int bvk_buf_read(bvk *v, const bvk_buf *b, void *out);
void bvk_buf_free(bvk *v, bvk_buf *b);
static inline ropeqk_vulkan_mem bvk_mem(const bvk_buf *b) { return (ropeqk_vulkan_mem){b->buf, 0, b->size}; }

/* A reusable primary command buffer (no ONE_TIME_SUBMIT: the bench submits it once per run). */
int bvk_cmd_begin(bvk *v, VkCommandBuffer *cmd);
/* The caller's barrier after the library's commands (shader or transfer writes -> transfer and
 * host reads), then vkEndCommandBuffer. */
int bvk_cmd_end(VkCommandBuffer cmd);
/* vkQueueSubmit + vkWaitForFences (+ fence reset): the Vulkan side's "clFinish". */
int bvk_submit_wait(bvk *v, VkCommandBuffer cmd);
void bvk_cmd_free(bvk *v, VkCommandBuffer cmd);

#endif
