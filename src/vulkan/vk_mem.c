/* Buffers, one-time command buffers and barriers of the Vulkan backend. */
#include "../core/run.h"
#include "vk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A memory type allowed by `bits` with all of `want`, or -1. */
static int mem_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

ropeqk_status rq_vk_buf_create(ropeqk_ctx *ctx, VkDeviceSize size, bool host, VkBufferUsageFlags extra,
                               rq_vk_buf *b)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    memset(b, 0, sizeof *b);
    if (size == 0)
        size = 4;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT | extra,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(vk->device, &bci, NULL, &b->buf);
    if (r != VK_SUCCESS)
        return rq_vk_fail(ctx, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(vk->device, b->buf, &req);
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    /* host buffers: host-visible, cached when possible (read back); device buffers: device-local */
    int t = host ? mem_type(&vk->memprops, req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT) : -1;
    if (t < 0)
        t = mem_type(&vk->memprops, req.memoryTypeBits, host ? hv : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (t < 0)
        t = mem_type(&vk->memprops, req.memoryTypeBits, 0);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)t};
    r = vkAllocateMemory(vk->device, &ai, NULL, &b->mem);
    if (r == VK_SUCCESS)
        r = vkBindBufferMemory(vk->device, b->buf, b->mem, 0);
    if (r == VK_SUCCESS && host)
        r = vkMapMemory(vk->device, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
    if (r != VK_SUCCESS) {
        ropeqk_status st = rq_vk_fail(ctx, r, "vkAllocateMemory/vkBindBufferMemory/vkMapMemory");
        rq_vk_buf_free(ctx, b);
        return st;
    }
    b->size = size;
    return ROPEQK_SUCCESS;
}

void rq_vk_buf_free(ropeqk_ctx *ctx, rq_vk_buf *b)
{
    if (!ctx || !ctx->impl || !b)
        return;
    struct rq_vk_ctx *vk = rq_vk(ctx);
    if (vk->stuck) { /* a timed-out submit may still use it: destroyed once that completes */
        rq_vk_buf *d = b->buf ? realloc(vk->dead, (vk->ndead + 1) * sizeof *d) : NULL;
        if (d) { /* else leaked (out of host memory), never destroyed in use */
            vk->dead = d;
            d[vk->ndead++] = *b;
        }
        memset(b, 0, sizeof *b);
        return;
    }
    VkDevice d = rq_vk(ctx)->device;
    if (b->map)
        vkUnmapMemory(d, b->mem);
    if (b->buf)
        vkDestroyBuffer(d, b->buf, NULL);
    if (b->mem)
        vkFreeMemory(d, b->mem, NULL);
    memset(b, 0, sizeof *b);
}

/* Fence waits: the library's bound for its blocking waits, ROPEQK_WAIT_TIMEOUT_MS (default 300 s:
 * src/core/buffer.c's rq_wait_bound), read at context creation. A host call on a GPU takes
 * milliseconds; on lavapipe (a CPU) the longest single submit of the suite takes seconds. The suite
 * sets 120 s for Vulkan (tests/meson.build): a hung dispatch fails its test, named, instead of
 * hanging the suite (issue 30: on an H200 the Vulkan suites had not finished after 228 s, and no one
 * could tell whether one hung). */
ropeqk_status rq_vk_timeout_from_env(uint64_t *ns)
{
    return rq_wait_bound(ns);
}

/* A context whose earlier submit timed out takes no more work (its fence and pool are in use). */
static ropeqk_status refuse_stuck(ropeqk_ctx *ctx)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    atomic_store(&ctx->last_err, (int32_t)VK_TIMEOUT);
    rq_set_error("Vulkan context unusable: an earlier dispatch (%s) did not complete within %llu ms "
                 "(ROPEQK_WAIT_TIMEOUT_MS); destroy the context", vk->stuck_what,
                 (unsigned long long)(vk->timeout_ns / 1000000u));
    return ROPEQK_ERR_TIMEOUT;
}

ropeqk_status rq_vk_cmd_begin(ropeqk_ctx *ctx, VkCommandBuffer *cmd)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    *cmd = VK_NULL_HANDLE;
    if (vk->stuck)
        return refuse_stuck(ctx);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = vk->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult r = vkAllocateCommandBuffers(vk->device, &ai, cmd);
    if (r != VK_SUCCESS) {
        *cmd = VK_NULL_HANDLE;
        return rq_vk_fail(ctx, r, "vkAllocateCommandBuffers");
    }
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = vkBeginCommandBuffer(*cmd, &bi);
    if (r != VK_SUCCESS) {
        vkFreeCommandBuffers(vk->device, vk->pool, 1, cmd);
        *cmd = VK_NULL_HANDLE;
        return rq_vk_fail(ctx, r, "vkBeginCommandBuffer");
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_cmd_submit(ropeqk_ctx *ctx, VkCommandBuffer cmd, const char *dispatch)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    VkResult r = vkEndCommandBuffer(cmd);
    const char *what = "vkEndCommandBuffer";
    char msg[256];
    if (r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        what = "vkQueueSubmit";
        r = vkQueueSubmit(vk->queue, 1, &si, vk->fence);
        if (r == VK_SUCCESS) {
            r = vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, vk->timeout_ns);
            snprintf(msg, sizeof msg, "vkWaitForFences (%s)", dispatch);
            what = msg;
            if (r == VK_TIMEOUT) { /* still running: keep the buffer and the fence as they are */
                vk->stuck = cmd;
                snprintf(vk->stuck_what, sizeof vk->stuck_what, "%s", dispatch);
                atomic_store(&ctx->last_err, (int32_t)VK_TIMEOUT); /* the backend's code, kept */
                char head[160];
                snprintf(head, sizeof head, "Vulkan %s (ROPEQK_WAIT_TIMEOUT_MS)", dispatch);
                rq_timeout(head, "the dispatch", vk->timeout_ns);
                char full[400];
                snprintf(full, sizeof full, "%s; the context refuses further work", ropeqk_last_error());
                rq_set_error("%s", full);
                return ROPEQK_ERR_TIMEOUT;
            }
            VkResult r2 = vkResetFences(vk->device, 1, &vk->fence);
            if (r == VK_SUCCESS)
                r = r2;
        }
    }
    vkFreeCommandBuffers(vk->device, vk->pool, 1, &cmd);
    return r == VK_SUCCESS ? ROPEQK_SUCCESS : rq_vk_fail(ctx, r, what);
}

bool rq_vk_settle(ropeqk_ctx *ctx)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    /* at least 10 s: a dispatch that outlived a short limit (the suite's emulation) gets to finish */
    uint64_t ns = vk->timeout_ns > 10000000000u ? vk->timeout_ns : 10000000000u;
    if (vk->stuck) { /* the timed-out submit: once more */
        if (vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, ns) != VK_SUCCESS)
            return false;
        vkFreeCommandBuffers(vk->device, vk->pool, 1, &vk->stuck);
        vk->stuck = VK_NULL_HANDLE;
        vkResetFences(vk->device, 1, &vk->fence);
        for (size_t i = 0; i < vk->ndead; i++)
            rq_vk_buf_free(ctx, &vk->dead[i]);
        free(vk->dead);
        vk->dead = NULL;
        vk->ndead = 0;
    }
    /* every other host call waited for its own fence; commands the caller recorded are the caller's
     * to wait for before it destroys their plans (ropeqk_vulkan.h), so nothing else is waited for:
     * the former vkQueueWaitIdle here had no time limit */
    return true;
}

void rq_vk_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                   VkAccessFlags dst_access)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src_access,
                          .dstAccessMask = dst_access};
    vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

ropeqk_status rq_vk_buf_upload(ropeqk_ctx *ctx, const void *data, VkDeviceSize bytes, rq_vk_buf *b)
{
    ropeqk_status st = rq_vk_buf_create(ctx, bytes, false, 0, b);
    if (st)
        return st;
    rq_vk_buf stage;
    VkCommandBuffer cmd;
    if ((st = rq_vk_buf_create(ctx, bytes, true, 0, &stage))) {
        rq_vk_buf_free(ctx, b);
        return st;
    }
    memcpy(stage.map, data, (size_t)bytes);
    pthread_mutex_lock(&rq_vk(ctx)->qlock);
    st = rq_vk_cmd_begin(ctx, &cmd);
    if (!st) {
        VkBufferCopy c = {0, 0, bytes};
        vkCmdCopyBuffer(cmd, stage.buf, b->buf, 1, &c);
        st = rq_vk_cmd_submit(ctx, cmd, "buffer upload");
    }
    pthread_mutex_unlock(&rq_vk(ctx)->qlock);
    rq_vk_buf_free(ctx, &stage);
    if (st)
        rq_vk_buf_free(ctx, b);
    return st;
}

/* 16-bit views are read and written as whole 32-bit words: the bytes from m.offset to the end of
 * the word holding the last element (the core's rq_view_bytes with this backend's access unit) */
size_t rq_vk_word_bytes(ropeqk_vulkan_mem m, size_t es, size_t extent)
{
    return (size_t)rq_view_bytes(&rq_vulkan_backend, m.offset, es, extent);
}

rq_mem rq_vk_mem(ropeqk_vulkan_mem m)
{
    rq_mem r = {(uintptr_t)m.buf, m.offset, m.offset + m.range};
    if (r.end < m.offset) /* a range past 2^64: as large as can be */
        r.end = UINT64_MAX;
    return r;
}
