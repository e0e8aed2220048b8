/* Recording into your own Vulkan command buffer.
 *
 * The application owns the VkInstance, VkDevice (created with the extensions
 * ropeqk_vulkan_device_extensions() lists), queue, buffers and command buffer; ropeqk borrows them
 * (ropeqk_vulkan_ctx_create). ropeqk_vulkan_plan_record() only records: a leading barrier (earlier
 * writes in the queue become visible to its shaders) and compute dispatches. The output is the
 * application's to synchronise: its own barrier from the compute shader writes to where it reads
 * them (here the host), then its own submit and fence.
 *
 * Buffers are host-visible here to keep the example short; a real application would keep them
 * device-local and copy through staging buffers. The result is checked against the fp64 reference
 * path (ropeqk_attention_ref). Exit status: 0 within 1e-5, 1 otherwise, 77 (skip) without a Vulkan
 * device. */
#include <ropeqk_vulkan.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 8, HKV = 2, S = 64, D = 64, DV = 64 };

typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    float *map;
    VkDeviceSize size;
} buffer;

/* A host-visible, coherent storage buffer, mapped (0 on success). */
static int buffer_make(VkPhysicalDevice pd, VkDevice dev, VkDeviceSize size, buffer *b)
{
    b->size = size;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    if (vkCreateBuffer(dev, &bci, NULL, &b->buf))
        return -1;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b->buf, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t t = 0;
    while (t < mp.memoryTypeCount && !((req.memoryTypeBits >> t & 1) && (mp.memoryTypes[t].propertyFlags & want) == want))
        t++;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = t};
    if (t == mp.memoryTypeCount || vkAllocateMemory(dev, &ai, NULL, &b->mem))
        return -1;
    if (vkBindBufferMemory(dev, b->buf, b->mem, 0) || vkMapMemory(dev, b->mem, 0, size, 0, (void **)&b->map))
        return -1;
    return 0;
}

static void buffer_free(VkDevice dev, buffer *b)
{
    if (b->map)
        vkUnmapMemory(dev, b->mem);
    vkDestroyBuffer(dev, b->buf, NULL); /* VK_NULL_HANDLE is allowed */
    vkFreeMemory(dev, b->mem, NULL);
}

static void fill(float *x, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        x[i] = (float)((double)(*s >> 11) * 0x1.0p-52 - 1.0);
    }
}

int main(void)
{
    /* the application's instance and device: the first device with a compute queue and the
     * extensions ropeqk needs */
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst = VK_NULL_HANDLE;
    if (vkCreateInstance(&ici, NULL, &inst) != VK_SUCCESS) {
        printf("no Vulkan driver: skipped\n");
        return 77;
    }
    uint32_t next = 0, n = 8, fam = UINT32_MAX;
    const char *const *ext = ropeqk_vulkan_device_extensions(&next);
    VkPhysicalDevice pds[8], pd = VK_NULL_HANDLE;
    if (vkEnumeratePhysicalDevices(inst, &n, pds) < 0)
        n = 0;
    for (uint32_t i = 0; i < n && !pd; i++) {
        VkQueueFamilyProperties qf[16];
        uint32_t nq = 16, ne = 0, have = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, qf);
        VkExtensionProperties *ep = NULL;
        if (vkEnumerateDeviceExtensionProperties(pds[i], NULL, &ne, NULL) == VK_SUCCESS && (ep = calloc(ne + 1, sizeof *ep)) &&
            vkEnumerateDeviceExtensionProperties(pds[i], NULL, &ne, ep) == VK_SUCCESS)
            for (uint32_t e = 0; e < next; e++)
                for (uint32_t j = 0; j < ne; j++)
                    have += !strcmp(ep[j].extensionName, ext[e]);
        free(ep);
        for (uint32_t f = 0; f < nq && have == next && !pd; f++)
            if (qf[f].queueFlags & VK_QUEUE_COMPUTE_BIT)
                pd = pds[i], fam = f;
    }
    if (!pd) {
        printf("no Vulkan device with a compute queue and %s: skipped\n", next ? ext[0] : "");
        vkDestroyInstance(inst, NULL);
        return 77;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = fam,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = next, .ppEnabledExtensionNames = ext};
    VkDevice dev = VK_NULL_HANDLE;
    if (vkCreateDevice(pd, &dci, NULL, &dev) != VK_SUCCESS) {
        fprintf(stderr, "vkCreateDevice failed\n");
        vkDestroyInstance(inst, NULL);
        return 1;
    }
    VkQueue queue;
    vkGetDeviceQueue(dev, fam, 0, &queue);

    int rc = 1;
    ropeqk_ctx *ctx = NULL;
    ropeqk_plan *plan = NULL;
    buffer b[5] = {{0}};
    VkCommandPool pool = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    ropeqk_vulkan_ctx_params cp = {.instance = inst, .physical_device = pd, .device = dev, .queue_family = fam,
                                   .queue = queue};
    ropeqk_status st = ropeqk_vulkan_ctx_create(&cp, &ctx);
    if (st) {
        fprintf(stderr, "ropeqk_vulkan_ctx_create: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        goto done;
    }
    printf("device: %s\n", ropeqk_ctx_device_description(ctx));

    /* prefill attention, GQA 8/2, causal, with the log-sum-exp; one plan, made once */
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .with_lse = 1};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, S, D);
    d.k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HKV, S, D);
    d.v = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HKV, S, DV);
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, S, DV);
    d.lse = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, S, 1);
    if ((st = ropeqk_plan_create(ctx, &d, &plan))) {
        fprintf(stderr, "ropeqk_plan_create: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        goto done;
    }
    const ropeqk_tensor *views[5] = {&d.q, &d.k, &d.v, &d.out, &d.lse};
    for (int i = 0; i < 5; i++)
        if (buffer_make(pd, dev, ropeqk_tensor_extent(views[i]), &b[i])) {
            fprintf(stderr, "buffer %d: Vulkan allocation failed\n", i);
            goto done;
        }
    uint64_t seed = 20261125;
    for (int i = 0; i < 3; i++)
        fill(b[i].map, b[i].size / 4, &seed);

    /* the application's command buffer: ropeqk's commands, then the application's barrier */
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = VK_NULL_HANDLE,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (vkCreateCommandPool(dev, &pci, NULL, &pool) || vkCreateFence(dev, &fci, NULL, &fence) ||
        (cai.commandPool = pool, vkAllocateCommandBuffers(dev, &cai, &cmd)) || vkBeginCommandBuffer(cmd, &cbi))
        goto done;
    ropeqk_vulkan_args a = {.q = {b[0].buf, 0, b[0].size}, .k = {b[1].buf, 0, b[1].size}, .v = {b[2].buf, 0, b[2].size},
                            .out = {b[3].buf, 0, b[3].size}, .lse = {b[4].buf, 0, b[4].size}};
    if ((st = ropeqk_vulkan_plan_record(plan, cmd, &a, NULL))) {
        fprintf(stderr, "ropeqk_vulkan_plan_record: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        goto done;
    }
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    if (vkEndCommandBuffer(cmd) || vkQueueSubmit(queue, 1, &si, fence) ||
        vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX)) {
        fprintf(stderr, "submit failed\n");
        goto done;
    }

    /* the fp64 reference and the metric, on the host copies the mapped buffers are */
    static double o64[HQ * S * DV], l64[HQ * S];
    ropeqk_tensor to64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, HQ, S, DV), tl64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, HQ, S, 1);
    double err = 0, lse_err = 0;
    int64_t mism = 0;
    st = ropeqk_attention_ref(&d.params, &d.q, b[0].map, &d.k, b[1].map, &d.v, b[2].map, NULL, NULL, &to64, o64, &tl64,
                              l64);
    if (!st)
        st = ropeqk_attention_max_error(&d.v, b[2].map, &d.out, b[3].map, &to64, o64, &d.lse, b[4].map, &tl64, l64,
                                        &err, &lse_err, &mism);
    printf("recorded attention Hq=%d Hkv=%d S=%d D=%d: max error %.3g, LSE %.3g, %lld mismatched rows\n", HQ, HKV, S, D,
           err, lse_err, (long long)mism);
    rc = !st && err <= 1e-5 && lse_err <= 1e-5 && mism == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "FAILED (seed 20261125): %s\n", ropeqk_status_string(st));
done:
    ropeqk_plan_destroy(plan);
    ropeqk_ctx_destroy(ctx); /* leaves the instance, device and queue alone */
    if (fence)
        vkDestroyFence(dev, fence, NULL);
    if (pool)
        vkDestroyCommandPool(dev, pool, NULL);
    for (int i = 0; i < 5; i++)
        buffer_free(dev, &b[i]);
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    return rc;
}
