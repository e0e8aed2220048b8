/* Buffers, one-time command buffers and barriers of the Vulkan backend. */
#include "vk.h"

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
    VkDevice d = rq_vk(ctx)->device;
    if (b->map)
        vkUnmapMemory(d, b->mem);
    if (b->buf)
        vkDestroyBuffer(d, b->buf, NULL);
    if (b->mem)
        vkFreeMemory(d, b->mem, NULL);
    memset(b, 0, sizeof *b);
}

ropeqk_status rq_vk_cmd_begin(ropeqk_ctx *ctx, VkCommandBuffer *cmd)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    *cmd = VK_NULL_HANDLE;
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

ropeqk_status rq_vk_cmd_submit(ropeqk_ctx *ctx, VkCommandBuffer cmd)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    VkResult r = vkEndCommandBuffer(cmd);
    const char *what = "vkEndCommandBuffer";
    if (r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        what = "vkQueueSubmit";
        r = vkQueueSubmit(vk->queue, 1, &si, vk->fence);
        if (r == VK_SUCCESS) {
            what = "vkWaitForFences";
            r = vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
            VkResult r2 = vkResetFences(vk->device, 1, &vk->fence);
            if (r == VK_SUCCESS)
                r = r2;
        }
    }
    vkFreeCommandBuffers(vk->device, vk->pool, 1, &cmd);
    return r == VK_SUCCESS ? ROPEQK_SUCCESS : rq_vk_fail(ctx, r, what);
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
        st = rq_vk_cmd_submit(ctx, cmd);
    }
    pthread_mutex_unlock(&rq_vk(ctx)->qlock);
    rq_vk_buf_free(ctx, &stage);
    if (st)
        rq_vk_buf_free(ctx, b);
    return st;
}
