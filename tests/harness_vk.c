/* The harness's Vulkan record path: the case's buffers as VkBuffers between NaN canaries at an
 * unaligned-to-the-descriptor offset, a plan recorded into the test's own command buffer,
 * submitted and waited for with a fence, then the canaries and inputs checked. */
#include "harness.h"
#include "harness_vk.h"
#include "ropeqk_vulkan.h"

#include <stdlib.h>
#include <string.h>

#define CANARY 256 /* bytes before and after each payload */
static const uint32_t canary_word = 0x7FC0DEADu;

bool th_is_vulkan(const ropeqk_ctx *ctx) { return ropeqk_vulkan_device(ctx) != VK_NULL_HANDLE; }

typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    unsigned char *map;
    size_t bytes, total;
} vbuf;

static VkResult vbuf_make(ropeqk_ctx *ctx, const void *data, size_t bytes, vbuf *b)
{
    VkDevice dev = ropeqk_vulkan_device(ctx);
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    b->total = (bytes + 3) / 4 * 4 + 2 * CANARY;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = b->total,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(dev, &bci, NULL, &b->buf);
    if (r)
        return r;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b->buf, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(ropeqk_vulkan_physical_device(ctx), &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t t = 0;
    while (t < mp.memoryTypeCount &&
           !((req.memoryTypeBits & (1u << t)) && (mp.memoryTypes[t].propertyFlags & want) == want))
        t++;
    if (t == mp.memoryTypeCount)
        return VK_ERROR_FEATURE_NOT_PRESENT;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = t};
    if ((r = vkAllocateMemory(dev, &ai, NULL, &b->mem)) || (r = vkBindBufferMemory(dev, b->buf, b->mem, 0)) ||
        (r = vkMapMemory(dev, b->mem, 0, VK_WHOLE_SIZE, 0, (void **)&b->map)))
        return r;
    for (size_t i = 0; i + 4 <= b->total; i += 4)
        memcpy(b->map + i, &canary_word, 4);
    if (data)
        memcpy(b->map + CANARY, data, bytes);
    return VK_SUCCESS;
}

/* Canaries intact (and the payload equal to expect, when given); copies the payload to out. */
static bool vbuf_check(ropeqk_ctx *ctx, vbuf *b, void *out, const void *expect)
{
    bool ok = b->map != NULL;
    size_t pad = (b->bytes + 3) / 4 * 4;
    for (size_t i = 0; ok && i < CANARY; i += 4)
        ok = memcmp(b->map + i, &canary_word, 4) == 0 && memcmp(b->map + CANARY + pad + i, &canary_word, 4) == 0;
    if (ok && expect)
        ok = memcmp(b->map + CANARY, expect, b->bytes) == 0;
    if (ok && out)
        memcpy(out, b->map + CANARY, b->bytes);
    VkDevice dev = ropeqk_vulkan_device(ctx);
    if (b->map)
        vkUnmapMemory(dev, b->mem);
    vkDestroyBuffer(dev, b->buf, NULL);
    vkFreeMemory(dev, b->mem, NULL);
    memset(b, 0, sizeof *b);
    return ok;
}

ropeqk_status th_vk_submit(ropeqk_ctx *ctx, th_vk_record_fn record, void *user)
{
    VkDevice dev = ropeqk_vulkan_device(ctx);
    uint32_t fam = 0;
    VkQueue queue = ropeqk_vulkan_queue(ctx, &fam);
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    ropeqk_status st = ROPEQK_ERR_BACKEND;
    if (vkCreateCommandPool(dev, &pci, NULL, &pool) || vkCreateFence(dev, &fci, NULL, &fence))
        goto done;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (vkAllocateCommandBuffers(dev, &ai, &cmd) || vkBeginCommandBuffer(cmd, &bi))
        goto done;
    st = record(cmd, user);
    /* the library leaves the output to the caller's barrier: make it visible to the host */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
    if (vkEndCommandBuffer(cmd)) {
        st = st ? st : ROPEQK_ERR_BACKEND;
        goto done;
    }
    if (st == ROPEQK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        if (vkQueueSubmit(queue, 1, &si, fence) || vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX))
            st = ROPEQK_ERR_BACKEND;
    }
done:
    if (fence)
        vkDestroyFence(dev, fence, NULL);
    if (pool)
        vkDestroyCommandPool(dev, pool, NULL); /* frees cmd */
    return st;
}

typedef struct {
    ropeqk_plan *plan;
    ropeqk_vulkan_args args;
} rec_scores;

static ropeqk_status rec(VkCommandBuffer cmd, void *user)
{
    rec_scores *r = user;
    return ropeqk_vulkan_plan_record(r->plan, cmd, &r->args, NULL);
}

static ropeqk_vulkan_mem mem(const vbuf *b)
{
    return (ropeqk_vulkan_mem){b->buf, b->buf ? CANARY : 0, b->buf ? (b->bytes + 3) / 4 * 4 : 0};
}

ropeqk_status th_vk_run_scores(ropeqk_ctx *ctx, const th_case *c, th_buf *q, th_buf *k, const int32_t *qp,
                               const int32_t *kp, th_buf *o, bool *guards_ok)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = c->p, .q = q->t, .k = k->t, .out = o->t,
                          .positions = qp || kp ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    rec_scores r = {0};
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &r.plan);
    *guards_ok = true;
    if (st)
        return st;
    vbuf g[5];
    memset(g, 0, sizeof g);
    const void *src[5] = {q->data, k->data, o->data, qp, kp};
    size_t n[5] = {q->bytes, k->bytes, o->bytes, qp ? (size_t)c->Sq * 4 : 0, kp ? (size_t)c->Sk * 4 : 0};
    for (int i = 0; i < 5 && !st; i++)
        if (src[i] && vbuf_make(ctx, src[i], n[i], &g[i]))
            st = ROPEQK_ERR_BACKEND;
    if (!st) {
        r.args = (ropeqk_vulkan_args){.q = mem(&g[0]), .k = mem(&g[1]), .out = mem(&g[2]), .q_pos = mem(&g[3]),
                                      .k_pos = mem(&g[4])};
        st = th_vk_submit(ctx, rec, &r);
    }
    const void *expect[5] = {q->data, k->data, NULL, qp, kp};
    for (int i = 0; i < 5; i++)
        if (g[i].buf)
            *guards_ok &= vbuf_check(ctx, &g[i], i == 2 ? o->data : NULL, expect[i]);
    ropeqk_plan_destroy(r.plan);
    return st;
}
