/* ropeqk-bench's Vulkan helpers (vk.h). Buffers are device-local where the device has such memory
 * (the "device-resident" side of the comparison, like clCreateBuffer on OpenCL); data moves through
 * a host-visible staging buffer and vkCmdCopyBuffer, which works whether or not the device-local
 * type is also host-visible (on lavapipe every type is both). */
#include "vk.h"

#include <string.h>

#define VKTRY(x) do { if ((x) != VK_SUCCESS) return ROPEQK_ERR_BACKEND; } while (0)

int bvk_open(bvk *v, const char *spec)
{
    memset(v, 0, sizeof *v);
    ropeqk_ctx_params p = {.device = spec};
    int st = ropeqk_ctx_create(&p, &v->rq);
    if (st)
        return st;
    uint32_t fam = 0;
    v->dev = ropeqk_vulkan_device(v->rq);
    v->queue = ropeqk_vulkan_queue(v->rq, &fam);
    if (!v->dev)
        return ROPEQK_ERR_NO_DEVICE; /* a context, but not a Vulkan one */
    vkGetPhysicalDeviceMemoryProperties(ropeqk_vulkan_physical_device(v->rq), &v->mp);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VKTRY(vkCreateCommandPool(v->dev, &pci, NULL, &v->pool));
    VKTRY(vkCreateFence(v->dev, &fci, NULL, &v->fence));
    return 0;
}

void bvk_close(bvk *v)
{
    if (v->dev) {
        if (v->fence)
            vkDestroyFence(v->dev, v->fence, NULL);
        if (v->pool)
            vkDestroyCommandPool(v->dev, v->pool, NULL);
    }
    ropeqk_ctx_destroy(v->rq);
    memset(v, 0, sizeof *v);
}

/* A buffer with memory of the first type having all of `want` (then: any allowed type). */
static int raw_buf(bvk *v, VkDeviceSize size, VkBufferUsageFlags usage, VkMemoryPropertyFlags want, bvk_buf *b)
{
    memset(b, 0, sizeof *b);
    b->size = size;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VKTRY(vkCreateBuffer(v->dev, &bci, NULL, &b->buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(v->dev, b->buf, &req);
    uint32_t t = 0, any = UINT32_MAX;
    for (; t < v->mp.memoryTypeCount; t++) {
        if (!(req.memoryTypeBits & (1u << t)))
            continue;
        if (any == UINT32_MAX)
            any = t;
        if ((v->mp.memoryTypes[t].propertyFlags & want) == want)
            break;
    }
    if (t == v->mp.memoryTypeCount) {
        /* a staging buffer must be host-visible: no fallback for it */
        if (want & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT || any == UINT32_MAX)
            return ROPEQK_ERR_BACKEND;
        t = any;
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = t};
    VKTRY(vkAllocateMemory(v->dev, &ai, NULL, &b->mem));
    VKTRY(vkBindBufferMemory(v->dev, b->buf, b->mem, 0));
    return 0;
}

void bvk_buf_free(bvk *v, bvk_buf *b)
{
    if (b->buf)
        vkDestroyBuffer(v->dev, b->buf, NULL);
    if (b->mem)
        vkFreeMemory(v->dev, b->mem, NULL);
    memset(b, 0, sizeof *b);
}

int bvk_cmd_begin(bvk *v, VkCommandBuffer *cmd)
{
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = v->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    *cmd = VK_NULL_HANDLE;
    VKTRY(vkAllocateCommandBuffers(v->dev, &ai, cmd));
    VKTRY(vkBeginCommandBuffer(*cmd, &bi));
    return 0;
}

int bvk_cmd_end(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    VKTRY(vkEndCommandBuffer(cmd));
    return 0;
}

int bvk_submit_wait(bvk *v, VkCommandBuffer cmd)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    VKTRY(vkQueueSubmit(v->queue, 1, &si, v->fence));
    VKTRY(vkWaitForFences(v->dev, 1, &v->fence, VK_TRUE, UINT64_MAX));
    VKTRY(vkResetFences(v->dev, 1, &v->fence));
    return 0;
}

void bvk_cmd_free(bvk *v, VkCommandBuffer cmd)
{
    if (cmd)
        vkFreeCommandBuffers(v->dev, v->pool, 1, &cmd);
}

/* One staging transfer: host -> dst (to_dev) or src -> host, submitted and waited for. */
static int staged_copy(bvk *v, const bvk_buf *b, const void *in, void *out, int fill)
{
    bvk_buf s;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    void *map = NULL;
    int st = raw_buf(v, b->size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &s);
    if (!st && vkMapMemory(v->dev, s.mem, 0, VK_WHOLE_SIZE, 0, &map))
        st = ROPEQK_ERR_BACKEND;
    if (!st && !out) {
        if (in)
            memcpy(map, in, b->size);
        else
            memset(map, fill, b->size);
    }
    if (!st)
        st = bvk_cmd_begin(v, &cmd);
    if (!st) {
        VkBufferCopy r = {0, 0, b->size};
        vkCmdCopyBuffer(cmd, out ? b->buf : s.buf, out ? s.buf : b->buf, 1, &r);
        if (!(st = bvk_cmd_end(cmd)))
            st = bvk_submit_wait(v, cmd);
    }
    if (!st && out)
        memcpy(out, map, b->size);
    bvk_cmd_free(v, cmd);
    if (map)
        vkUnmapMemory(v->dev, s.mem);
    bvk_buf_free(v, &s);
    return st;
}

int bvk_buf_make(bvk *v, VkDeviceSize size, const void *host, int fill, bvk_buf *b)
{
    int st = raw_buf(v, size,
                     VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                         VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, b);
    return st ? st : staged_copy(v, b, host, NULL, fill);
}

int bvk_buf_read(bvk *v, const bvk_buf *b, void *out) { return staged_copy(v, b, NULL, out, 0); }
