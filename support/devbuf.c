/* Device buffers and plan runs on either backend (devbuf.h), through libropeqk's public API only. */
#include "devbuf.h"

#if RQS_HAVE_OPENCL
#include "ropeqk_opencl.h"
#endif
#if RQS_HAVE_VULKAN
#include "ropeqk_vulkan.h"
#endif

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char err_msg[256];

static ropeqk_status fail(ropeqk_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return st;
}

const char *rqs_devbuf_error(void) { return err_msg; }

rqs_backend rqs_ctx_backend(const ropeqk_ctx *ctx)
{
    const char *name = NULL;
    if (!ctx)
        return RQS_BACKEND_NONE;
    ropeqk_ctx_backend_error(ctx, &name);
#if RQS_HAVE_OPENCL
    if (name && !strcmp(name, "OpenCL"))
        return RQS_BACKEND_OPENCL;
#endif
#if RQS_HAVE_VULKAN
    if (name && !strcmp(name, "Vulkan"))
        return RQS_BACKEND_VULKAN;
#endif
    return RQS_BACKEND_NONE;
}

const char *rqs_backend_name(rqs_backend b)
{
    return b == RQS_BACKEND_OPENCL ? "OpenCL" : b == RQS_BACKEND_VULKAN ? "Vulkan" : "none";
}

struct rqs_devbuf {
    ropeqk_ctx *ctx;
    rqs_backend be;
    size_t bytes;  /* payload */
    size_t padded; /* payload rounded up to whole words */
    size_t lead;   /* canary bytes before (and after) the payload: 0 or RQS_CANARY_BYTES */
    size_t total;  /* the backend buffer: lead + padded + lead */
    bool device_local; /* RQS_DEVBUF_DEVICE_LOCAL (Vulkan: no map; staged transfers) */
#if RQS_HAVE_OPENCL
    cl_mem mem;
#endif
#if RQS_HAVE_VULKAN
    VkBuffer buf;
    VkDeviceMemory dm;
    unsigned char *map;
#endif
};

struct rqs_stream {
    ropeqk_ctx *ctx;
    rqs_backend be;
#if RQS_HAVE_OPENCL
    cl_command_queue queue;
#endif
#if RQS_HAVE_VULKAN
    VkCommandPool pool;
    VkFence fence;
#endif
};

static ropeqk_status no_backend(const char *what)
{
    return fail(ROPEQK_ERR_BAD_PARAM, "%s: the context's backend is not built into the support library", what);
}

/* ---- Vulkan ------------------------------------------------------------------------------------ */
#if RQS_HAVE_VULKAN
/* Every submission of this module (and rqs_plan_create) holds it: one VkQueue, many threads. */
static pthread_mutex_t vk_lock = PTHREAD_MUTEX_INITIALIZER;

static ropeqk_status vk_fail(VkResult r, const char *what)
{
    return fail(ROPEQK_ERR_BACKEND, "%s: VkResult %d", what, (int)r);
}

/* A VkBuffer of `size` bytes with its own memory: the first memory type the buffer allows that has
 * every flag of `want`; when none has them and `fallback` is set, the first type it allows. Nothing is
 * left allocated on failure. */
static ropeqk_status vk_raw_buf(ropeqk_ctx *ctx, VkDeviceSize size, VkBufferUsageFlags usage,
                               VkMemoryPropertyFlags want, bool fallback, VkBuffer *buf, VkDeviceMemory *dm)
{
    VkDevice dev = ropeqk_vulkan_device(ctx);
    *buf = VK_NULL_HANDLE, *dm = VK_NULL_HANDLE;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(dev, &bci, NULL, buf);
    if (r != VK_SUCCESS) {
        *buf = VK_NULL_HANDLE;
        return vk_fail(r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, *buf, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(ropeqk_vulkan_physical_device(ctx), &mp);
    uint32_t t = 0, any = UINT32_MAX;
    for (; t < mp.memoryTypeCount; t++) {
        if (!(req.memoryTypeBits & (1u << t)))
            continue;
        if (any == UINT32_MAX)
            any = t;
        if ((mp.memoryTypes[t].propertyFlags & want) == want)
            break;
    }
    if (t == mp.memoryTypeCount) {
        if (!fallback || any == UINT32_MAX) {
            vkDestroyBuffer(dev, *buf, NULL);
            *buf = VK_NULL_HANDLE;
            return fail(ROPEQK_ERR_BACKEND, "no Vulkan memory type with property flags 0x%x for a buffer",
                        (unsigned)want);
        }
        t = any;
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = t};
    const char *what = "vkAllocateMemory";
    if ((r = vkAllocateMemory(dev, &ai, NULL, dm)) != VK_SUCCESS)
        *dm = VK_NULL_HANDLE;
    else
        what = "vkBindBufferMemory", r = vkBindBufferMemory(dev, *buf, *dm, 0);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(dev, *buf, NULL);
        if (*dm)
            vkFreeMemory(dev, *dm, NULL);
        *buf = VK_NULL_HANDLE, *dm = VK_NULL_HANDLE;
        return vk_fail(r, what);
    }
    return ROPEQK_SUCCESS;
}

static void vk_buf_free(rqs_devbuf *b)
{
    VkDevice dev = ropeqk_vulkan_device(b->ctx);
    if (b->map)
        vkUnmapMemory(dev, b->dm);
    if (b->buf)
        vkDestroyBuffer(dev, b->buf, NULL);
    if (b->dm)
        vkFreeMemory(dev, b->dm, NULL);
    b->map = NULL, b->buf = VK_NULL_HANDLE, b->dm = VK_NULL_HANDLE;
}

static ropeqk_status vk_staged(const rqs_devbuf *b, size_t at, size_t n, const void *in, void *out);
static ropeqk_status vk_fill_canary(const rqs_devbuf *b);

/* The buffer (b->total bytes), holding `image` (NULL: the canary word everywhere): host-visible and
 * mapped, or (RQS_DEVBUF_DEVICE_LOCAL) device-local and filled through a staging buffer (the canary
 * word: vkCmdFillBuffer). */
static ropeqk_status vk_buf_make(rqs_devbuf *b, const unsigned char *image)
{
    const VkBufferUsageFlags usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    ropeqk_status st;
    if (b->device_local) {
        if (!(st = vk_raw_buf(b->ctx, b->total, usage, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, true, &b->buf, &b->dm)) &&
            (st = image ? vk_staged(b, 0, b->total, image, NULL) : vk_fill_canary(b)))
            vk_buf_free(b);
        return st;
    }
    if ((st = vk_raw_buf(b->ctx, b->total, usage,
                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, false, &b->buf,
                         &b->dm)))
        return st;
    VkResult r = vkMapMemory(ropeqk_vulkan_device(b->ctx), b->dm, 0, VK_WHOLE_SIZE, 0, (void **)&b->map);
    if (r != VK_SUCCESS) {
        b->map = NULL;
        vk_buf_free(b);
        return vk_fail(r, "vkMapMemory");
    }
    if (image) {
        memcpy(b->map, image, b->total);
    } else {
        const uint32_t word = RQS_CANARY_WORD;
        for (size_t i = 0; i < b->total; i += 4)
            memcpy(b->map + i, &word, 4);
    }
    return ROPEQK_SUCCESS;
}

static ropeqk_vulkan_mem vk_view(rqs_view v)
{
    ropeqk_vulkan_mem m = {VK_NULL_HANDLE, 0, 0};
    if (v.buf) {
        m.buf = v.buf->buf;
        m.offset = v.buf->lead + v.offset;
        m.range = v.range ? v.range : v.buf->padded > v.offset ? v.buf->padded - v.offset : 0;
    }
    return m;
}

static ropeqk_status vk_pool_make(ropeqk_ctx *ctx, VkCommandPool *pool, VkFence *fence)
{
    VkDevice dev = ropeqk_vulkan_device(ctx);
    uint32_t fam = 0;
    ropeqk_vulkan_queue(ctx, &fam);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    *pool = VK_NULL_HANDLE, *fence = VK_NULL_HANDLE;
    VkResult r = vkCreateCommandPool(dev, &pci, NULL, pool);
    if (r != VK_SUCCESS) {
        *pool = VK_NULL_HANDLE;
        return vk_fail(r, "vkCreateCommandPool");
    }
    if ((r = vkCreateFence(dev, &fci, NULL, fence)) != VK_SUCCESS) {
        vkDestroyCommandPool(dev, *pool, NULL);
        *pool = VK_NULL_HANDLE, *fence = VK_NULL_HANDLE;
        return vk_fail(r, "vkCreateFence");
    }
    return ROPEQK_SUCCESS;
}

/* The library's fence-wait limit (src/vulkan/vk_mem.c): ROPEQK_WAIT_TIMEOUT_MS, else 300 s (src/core/buffer.c). */
static uint64_t fence_timeout_ns(void)
{
    const char *e = getenv("ROPEQK_WAIT_TIMEOUT_MS");
    long long ms = e ? atoll(e) : 0;
    return (uint64_t)(ms > 0 ? ms : 300000) * 1000000u;
}

typedef ropeqk_status (*vk_record_fn)(VkCommandBuffer cmd, const void *user);

/* Records with `rec` into a new command buffer, adds the caller's barrier (compute and transfer
 * writes -> host reads), submits under vk_lock and waits. A refused recording is submitted too. */
static ropeqk_status vk_run(ropeqk_ctx *ctx, rqs_stream *s, vk_record_fn rec, const void *user)
{
    VkDevice dev = ropeqk_vulkan_device(ctx);
    uint32_t fam = 0;
    VkQueue queue = ropeqk_vulkan_queue(ctx, &fam);
    VkCommandPool pool = s ? s->pool : VK_NULL_HANDLE;
    VkFence fence = s ? s->fence : VK_NULL_HANDLE;
    ropeqk_status st;
    if (!s && (st = vk_pool_make(ctx, &pool, &fence)))
        return st;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkResult r = vkAllocateCommandBuffers(dev, &ai, &cmd);
    if (r != VK_SUCCESS) {
        cmd = VK_NULL_HANDLE;
        st = vk_fail(r, "vkAllocateCommandBuffers");
    } else if ((r = vkBeginCommandBuffer(cmd, &bi)) != VK_SUCCESS) {
        st = vk_fail(r, "vkBeginCommandBuffer");
    } else {
        st = rec(cmd, user);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        ropeqk_status sub = ROPEQK_SUCCESS;
        if ((r = vkEndCommandBuffer(cmd)) != VK_SUCCESS) {
            sub = vk_fail(r, "vkEndCommandBuffer");
        } else {
            VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                               .pCommandBuffers = &cmd};
            pthread_mutex_lock(&vk_lock);
            r = vkQueueSubmit(queue, 1, &si, fence);
            pthread_mutex_unlock(&vk_lock);
            if (r != VK_SUCCESS)
                sub = vk_fail(r, "vkQueueSubmit");
            else if ((r = vkWaitForFences(dev, 1, &fence, VK_TRUE, fence_timeout_ns())) != VK_SUCCESS)
                sub = vk_fail(r, r == VK_TIMEOUT ? "vkWaitForFences (a recorded plan or copy of the test support: not "
                                                   "complete within ROPEQK_WAIT_TIMEOUT_MS)" : "vkWaitForFences");
            else if ((r = vkResetFences(dev, 1, &fence)) != VK_SUCCESS)
                sub = vk_fail(r, "vkResetFences");
        }
        if (!st)
            st = sub;
    }
    if (r == VK_TIMEOUT) /* still running: its command buffer, pool and fence are leaked, not freed in use */
        return st;
    if (cmd)
        vkFreeCommandBuffers(dev, pool, 1, &cmd);
    if (!s) {
        vkDestroyFence(dev, fence, NULL);
        vkDestroyCommandPool(dev, pool, NULL);
    }
    return st;
}

typedef struct {
    ropeqk_plan *plan;
    ropeqk_vulkan_args a;
    const ropeqk_step *step;
} vk_plan_rec;

static ropeqk_status rec_plan(VkCommandBuffer cmd, const void *u)
{
    const vk_plan_rec *r = u;
    return ropeqk_vulkan_plan_record(r->plan, cmd, &r->a, r->step);
}

typedef struct {
    ropeqk_plan *plan;
    ropeqk_vulkan_paged_args a;
    const ropeqk_paged_batch *batch;
} vk_paged_rec;

static ropeqk_status rec_paged(VkCommandBuffer cmd, const void *u)
{
    const vk_paged_rec *r = u;
    return ropeqk_vulkan_paged_record(r->plan, cmd, &r->a, r->batch);
}

typedef struct {
    ropeqk_plan *plan;
    const ropeqk_tensor *k_new, *v_new;
    ropeqk_vulkan_mem kn, vn;
    const ropeqk_vulkan_paged_cache *cache;
    const ropeqk_paged_batch *batch;
} vk_append_rec;

static ropeqk_status rec_append(VkCommandBuffer cmd, const void *u)
{
    const vk_append_rec *r = u;
    return ropeqk_vulkan_paged_append(r->plan, cmd, r->k_new, r->kn, r->v_new, r->vn, r->cache, r->batch);
}

static ropeqk_vulkan_args vk_args(const rqs_args *a)
{
    ropeqk_vulkan_args v = {.q = vk_view(a->q), .k = vk_view(a->k), .q_pos = vk_view(a->q_pos),
                            .k_pos = vk_view(a->k_pos), .out = vk_view(a->out), .v = vk_view(a->v),
                            .lse = vk_view(a->lse)};
    return v;
}

/* Buffer-to-buffer copies in one command buffer, between two barriers: earlier compute and transfer
 * writes -> the copies' reads and writes (and earlier reads -> their writes); the copies' writes ->
 * later shaders and transfers (vk_run adds the host's). */
typedef struct {
    VkBuffer src, dst;
    VkBufferCopy r;
} vk_copy1;

typedef struct {
    const vk_copy1 *c;
    size_t n;
} vk_copy_rec;

/* Transfer writes -> later shaders and transfers. */
static void vk_after_transfer(VkCommandBuffer cmd)
{
    VkMemoryBarrier post = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                             VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &post, 0, NULL,
                         0, NULL);
}

static ropeqk_status rec_copies(VkCommandBuffer cmd, const void *u)
{
    const vk_copy_rec *r = u;
    VkMemoryBarrier pre = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &pre, 0, NULL, 0, NULL);
    for (size_t i = 0; i < r->n; i++)
        vkCmdCopyBuffer(cmd, r->c[i].src, r->c[i].dst, 1, &r->c[i].r);
    vk_after_transfer(cmd);
    return ROPEQK_SUCCESS;
}

/* A new device-local buffer: the canary word everywhere (b->total is a whole number of words). */
static ropeqk_status rec_fill(VkCommandBuffer cmd, const void *u)
{
    const rqs_devbuf *b = u;
    vkCmdFillBuffer(cmd, b->buf, 0, b->total, RQS_CANARY_WORD);
    vk_after_transfer(cmd);
    return ROPEQK_SUCCESS;
}

static ropeqk_status vk_fill_canary(const rqs_devbuf *b) { return vk_run(b->ctx, NULL, rec_fill, b); }

/* A device-local buffer's bytes [at, at + n) of the whole backend buffer: written from `in`, or (in
 * NULL) read into `out`, through a host-visible staging buffer of n bytes, one submission waited for. */
static ropeqk_status vk_staged(const rqs_devbuf *b, size_t at, size_t n, const void *in, void *out)
{
    VkDevice dev = ropeqk_vulkan_device(b->ctx);
    VkBuffer sb;
    VkDeviceMemory sm;
    void *map = NULL;
    ropeqk_status st = vk_raw_buf(b->ctx, n, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, false, &sb,
                                  &sm);
    if (st)
        return st;
    VkResult r = vkMapMemory(dev, sm, 0, VK_WHOLE_SIZE, 0, &map);
    if (r != VK_SUCCESS) {
        map = NULL;
        st = vk_fail(r, "vkMapMemory (staging)");
    } else {
        if (in)
            memcpy(map, in, n);
        vk_copy1 c = {in ? sb : b->buf, in ? b->buf : sb, {in ? 0 : at, in ? at : 0, n}};
        vk_copy_rec rc = {&c, 1};
        if (!(st = vk_run(b->ctx, NULL, rec_copies, &rc)) && !in)
            memcpy(out, map, n);
        vkUnmapMemory(dev, sm);
    }
    vkDestroyBuffer(dev, sb, NULL);
    vkFreeMemory(dev, sm, NULL);
    return st;
}
#endif

/* ---- OpenCL ------------------------------------------------------------------------------------ */
#if RQS_HAVE_OPENCL
static ropeqk_status cl_fail(cl_int e, const char *what)
{
    const char *name = ropeqk_opencl_error_name(e);
    return fail(ROPEQK_ERR_BACKEND, "%s: %s (%d)", what, name ? name : "unknown OpenCL error", (int)e);
}

static ropeqk_opencl_mem cl_view(rqs_view v)
{
    ropeqk_opencl_mem m = {NULL, 0};
    if (v.buf) {
        m.buf = v.buf->mem;
        m.offset = v.buf->lead + v.offset;
    }
    return m;
}

static cl_command_queue cl_queue(ropeqk_ctx *ctx, rqs_stream *s) { return s ? s->queue : ropeqk_opencl_queue(ctx); }

/* The paged calls clear *event when they refuse: start from a value that is no event. */
#define CL_NO_EVENT_YET ((cl_event)(uintptr_t)1)

/* After an enqueue: waits for its event on success; on a refusal finishes the queue (anything
 * enqueued before the refusal runs) and checks that no event came back. */
static ropeqk_status cl_after(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_status st, cl_event ev, cl_event start,
                              const char *what)
{
    cl_command_queue q = cl_queue(ctx, s);
    if (st) {
        clFinish(q);
        if (ev != NULL) {
            if (ev != start)
                clReleaseEvent(ev);
            return fail(RQS_ERR_STRAY_EVENT, "%s refused the call (%s) but %s an event", what,
                        ropeqk_status_string(st), ev == start ? "did not clear" : "returned");
        }
        return st;
    }
    if (ev == NULL || ev == start)
        return fail(RQS_ERR_STRAY_EVENT, "%s succeeded without an event", what);
    cl_int e = clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
    return e ? cl_fail(e, "clWaitForEvents") : ROPEQK_SUCCESS;
}

static ropeqk_opencl_args cl_args(const rqs_args *a)
{
    ropeqk_opencl_args c = {.q = cl_view(a->q), .k = cl_view(a->k), .q_pos = cl_view(a->q_pos),
                            .k_pos = cl_view(a->k_pos), .out = cl_view(a->out), .v = cl_view(a->v),
                            .lse = cl_view(a->lse)};
    return c;
}
#endif

/* ---- buffers ----------------------------------------------------------------------------------- */
ropeqk_status rqs_devbuf_create(ropeqk_ctx *ctx, size_t bytes, const void *init, bool canaries, rqs_devbuf **out)
{
    return rqs_devbuf_create_ex(ctx, bytes, init, canaries ? RQS_DEVBUF_CANARIES : 0u, out);
}

ropeqk_status rqs_devbuf_create_ex(ropeqk_ctx *ctx, size_t bytes, const void *init, unsigned flags, rqs_devbuf **out)
{
    if (!out)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_devbuf_create: out is NULL");
    *out = NULL;
    if (!ctx)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_devbuf_create: ctx is NULL");
    if (bytes == 0)
        return fail(ROPEQK_ERR_BAD_SHAPE, "rqs_devbuf_create: 0 bytes");
    if (flags & ~(unsigned)(RQS_DEVBUF_CANARIES | RQS_DEVBUF_DEVICE_LOCAL))
        return fail(ROPEQK_ERR_BAD_PARAM, "rqs_devbuf_create: unknown flags 0x%x", flags);
    if (bytes > SIZE_MAX / 2 - 2 * RQS_CANARY_BYTES)
        return fail(ROPEQK_ERR_OVERFLOW, "rqs_devbuf_create: %zu bytes", bytes);
    rqs_backend be = rqs_ctx_backend(ctx);
    if (be == RQS_BACKEND_NONE)
        return no_backend("rqs_devbuf_create");
    rqs_devbuf *b = calloc(1, sizeof *b);
    if (!b)
        return fail(ROPEQK_ERR_OUT_OF_HOST_MEMORY, "rqs_devbuf_create: out of host memory");
    b->ctx = ctx;
    b->be = be;
    b->bytes = bytes;
    b->padded = (bytes + 3) / 4 * 4;
    b->lead = flags & RQS_DEVBUF_CANARIES ? RQS_CANARY_BYTES : 0;
    b->device_local = (flags & RQS_DEVBUF_DEVICE_LOCAL) != 0;
    b->total = b->padded + 2 * b->lead;
    /* the buffer's first contents: the canary word everywhere, the payload over it; without init
     * no host image (the word is filled in on the device) */
    const uint32_t word = RQS_CANARY_WORD;
    unsigned char *image = NULL;
    if (init) {
        if (!(image = malloc(b->total))) {
            free(b);
            return fail(ROPEQK_ERR_OUT_OF_HOST_MEMORY, "rqs_devbuf_create: out of host memory");
        }
        for (size_t i = 0; i < b->total; i += 4)
            memcpy(image + i, &word, 4);
        memcpy(image + b->lead, init, bytes);
    }
    ropeqk_status st = ROPEQK_SUCCESS;
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        cl_int e = CL_SUCCESS;
        const char *what = "clCreateBuffer";
        b->mem = clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE | (image ? CL_MEM_COPY_HOST_PTR : 0),
                                b->total, image, &e);
        if (e == CL_SUCCESS && b->mem && !image) {
            cl_event ev = NULL;
            what = "clEnqueueFillBuffer";
            e = clEnqueueFillBuffer(ropeqk_opencl_queue(ctx), b->mem, &word, sizeof word, 0, b->total, 0, NULL, &ev);
            if (e == CL_SUCCESS)
                what = "clWaitForEvents", e = clWaitForEvents(1, &ev);
            if (ev)
                clReleaseEvent(ev);
        }
        if (e != CL_SUCCESS || !b->mem) {
            if (b->mem)
                clReleaseMemObject(b->mem);
            st = cl_fail(e ? e : CL_OUT_OF_RESOURCES, what);
        }
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN)
        st = vk_buf_make(b, image);
#endif
    free(image);
    if (st) {
        free(b);
        return st;
    }
    *out = b;
    return ROPEQK_SUCCESS;
}

void rqs_devbuf_free(rqs_devbuf *b)
{
    if (!b)
        return;
#if RQS_HAVE_OPENCL
    if (b->be == RQS_BACKEND_OPENCL && b->mem)
        clReleaseMemObject(b->mem);
#endif
#if RQS_HAVE_VULKAN
    if (b->be == RQS_BACKEND_VULKAN)
        vk_buf_free(b);
#endif
    free(b);
}

size_t rqs_devbuf_bytes(const rqs_devbuf *b) { return b ? b->bytes : 0; }

/* Bytes [at, at + n) of the whole backend buffer (canaries included), n >= 1: written from host
 * (write), or read into it; blocking. */
static ropeqk_status raw_io(const rqs_devbuf *b, size_t at, size_t n, void *host, bool write)
{
#if RQS_HAVE_OPENCL
    if (b->be == RQS_BACKEND_OPENCL) {
        cl_command_queue q = ropeqk_opencl_queue(b->ctx);
        cl_int e = write ? clEnqueueWriteBuffer(q, b->mem, CL_TRUE, at, n, host, 0, NULL, NULL)
                         : clEnqueueReadBuffer(q, b->mem, CL_TRUE, at, n, host, 0, NULL, NULL);
        return e ? cl_fail(e, write ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer") : ROPEQK_SUCCESS;
    }
#endif
#if RQS_HAVE_VULKAN
    if (b->be == RQS_BACKEND_VULKAN) {
        if (!b->map)
            return write ? vk_staged(b, at, n, host, NULL) : vk_staged(b, at, n, NULL, host);
        if (write)
            memcpy(b->map + at, host, n);
        else
            memcpy(host, b->map + at, n);
        return ROPEQK_SUCCESS;
    }
#endif
    (void)at, (void)n, (void)host;
    return no_backend(write ? "rqs_devbuf_write" : "rqs_devbuf_read");
}

ropeqk_status rqs_devbuf_write(rqs_devbuf *b, size_t offset, const void *src, size_t n)
{
    if (!b || (!src && n))
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_devbuf_write: NULL buffer or source");
    if (offset > b->bytes || n > b->bytes - offset)
        return fail(ROPEQK_ERR_BUFFER_TOO_SMALL, "rqs_devbuf_write: %zu bytes at %zu past a payload of %zu", n,
                    offset, b->bytes);
    return n ? raw_io(b, b->lead + offset, n, (void *)src, true) : ROPEQK_SUCCESS;
}

ropeqk_status rqs_devbuf_fill(rqs_devbuf *b, unsigned char byte)
{
    if (!b)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_devbuf_fill: NULL buffer");
    unsigned char *h = malloc(b->bytes);
    if (!h)
        return fail(ROPEQK_ERR_OUT_OF_HOST_MEMORY, "rqs_devbuf_fill: out of host memory");
    memset(h, byte, b->bytes);
    ropeqk_status st = rqs_devbuf_write(b, 0, h, b->bytes);
    free(h);
    return st;
}

/* The whole backend buffer, canaries included, into dst (b->total bytes). */
static ropeqk_status read_all(const rqs_devbuf *b, unsigned char *dst) { return raw_io(b, 0, b->total, dst, false); }

ropeqk_status rqs_devbuf_read_part(const rqs_devbuf *b, size_t offset, size_t n, void *dst)
{
    if (!b || (!dst && n))
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_devbuf_read: NULL buffer or destination");
    if (offset > b->bytes || n > b->bytes - offset)
        return fail(ROPEQK_ERR_BUFFER_TOO_SMALL, "rqs_devbuf_read: %zu bytes at %zu past a payload of %zu", n,
                    offset, b->bytes);
    return n ? raw_io(b, b->lead + offset, n, dst, false) : ROPEQK_SUCCESS;
}

ropeqk_status rqs_devbuf_read(const rqs_devbuf *b, void *dst)
{
    return rqs_devbuf_read_part(b, 0, b ? b->bytes : 0, dst);
}

ropeqk_status rqs_devbuf_check(const rqs_devbuf *b, const void *expect, bool *intact)
{
    if (!b || !intact)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_devbuf_check: NULL buffer or result");
    *intact = false;
    unsigned char *all = malloc(b->total);
    if (!all)
        return fail(ROPEQK_ERR_OUT_OF_HOST_MEMORY, "rqs_devbuf_check: out of host memory");
    ropeqk_status st = read_all(b, all);
    if (!st) {
        const uint32_t word = RQS_CANARY_WORD;
        bool ok = true;
        for (size_t i = 0; i < b->lead && ok; i += 4)
            ok = memcmp(all + i, &word, 4) == 0 && memcmp(all + b->lead + b->padded + i, &word, 4) == 0;
        if (ok && expect)
            ok = memcmp(all + b->lead, expect, b->bytes) == 0;
        *intact = ok;
    }
    free(all);
    return st;
}

/* ---- streams ----------------------------------------------------------------------------------- */
ropeqk_status rqs_stream_create(ropeqk_ctx *ctx, rqs_stream **out)
{
    if (!out || !ctx)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_stream_create: NULL context or out");
    *out = NULL;
    rqs_stream *s = calloc(1, sizeof *s);
    if (!s)
        return fail(ROPEQK_ERR_OUT_OF_HOST_MEMORY, "rqs_stream_create: out of host memory");
    s->ctx = ctx;
    s->be = rqs_ctx_backend(ctx);
    ropeqk_status st = no_backend("rqs_stream_create");
#if RQS_HAVE_OPENCL
    if (s->be == RQS_BACKEND_OPENCL) {
        cl_int e = CL_SUCCESS;
        s->queue = clCreateCommandQueue(ropeqk_opencl_context(ctx), ropeqk_opencl_device(ctx), 0, &e);
        st = e || !s->queue ? cl_fail(e ? e : CL_OUT_OF_RESOURCES, "clCreateCommandQueue") : ROPEQK_SUCCESS;
        if (st && s->queue)
            clReleaseCommandQueue(s->queue);
    }
#endif
#if RQS_HAVE_VULKAN
    if (s->be == RQS_BACKEND_VULKAN)
        st = vk_pool_make(ctx, &s->pool, &s->fence);
#endif
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return ROPEQK_SUCCESS;
}

void rqs_stream_destroy(rqs_stream *s)
{
    if (!s)
        return;
#if RQS_HAVE_OPENCL
    if (s->be == RQS_BACKEND_OPENCL) {
        clFinish(s->queue);
        clReleaseCommandQueue(s->queue);
    }
#endif
#if RQS_HAVE_VULKAN
    if (s->be == RQS_BACKEND_VULKAN) { /* every run waited for its fence: nothing is in flight */
        VkDevice dev = ropeqk_vulkan_device(s->ctx);
        vkDestroyFence(dev, s->fence, NULL);
        vkDestroyCommandPool(dev, s->pool, NULL);
    }
#endif
    free(s);
}

/* ---- runs -------------------------------------------------------------------------------------- */
ropeqk_status rqs_plan_create(ropeqk_ctx *ctx, const ropeqk_plan_desc *desc, ropeqk_plan **out)
{
#if RQS_HAVE_VULKAN
    if (rqs_ctx_backend(ctx) == RQS_BACKEND_VULKAN) {
        pthread_mutex_lock(&vk_lock);
        ropeqk_status st = ropeqk_plan_create(ctx, desc, out);
        pthread_mutex_unlock(&vk_lock);
        return st;
    }
#endif
    return ropeqk_plan_create(ctx, desc, out);
}

ropeqk_status rqs_plan_run(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_plan *plan, const rqs_args *a,
                           const ropeqk_step *step)
{
    if (!ctx || !a)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_plan_run: NULL context or arguments");
    rqs_backend be = rqs_ctx_backend(ctx);
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        ropeqk_opencl_args c = cl_args(a);
        cl_event ev = NULL;
        ropeqk_status st = ropeqk_opencl_plan_enqueue(plan, s ? s->queue : NULL, &c, step, 0, NULL, &ev);
        return cl_after(ctx, s, st, ev, NULL, "ropeqk_opencl_plan_enqueue");
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN) {
        vk_plan_rec r = {plan, vk_args(a), step};
        return vk_run(ctx, s, rec_plan, &r);
    }
#endif
    (void)be, (void)s, (void)plan, (void)step;
    return no_backend("rqs_plan_run");
}

ropeqk_status rqs_scores_oneshot(ropeqk_ctx *ctx, rqs_stream *s, const ropeqk_params *p, const ropeqk_tensor *q,
                                 const ropeqk_tensor *k, const ropeqk_tensor *out, const rqs_args *a)
{
    if (!ctx || !a)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_scores_oneshot: NULL context or arguments");
    rqs_backend be = rqs_ctx_backend(ctx);
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        cl_event ev = NULL;
        ropeqk_status st = ropeqk_opencl_enqueue(ctx, s ? s->queue : NULL, p, q, cl_view(a->q), k, cl_view(a->k),
                                                 cl_view(a->q_pos), cl_view(a->k_pos), out, cl_view(a->out), 0, NULL,
                                                 &ev);
        return cl_after(ctx, s, st, ev, NULL, "ropeqk_opencl_enqueue");
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN) {
        if (!p || !q || !k || !out)
            return fail(ROPEQK_ERR_NULL_POINTER, "rqs_scores_oneshot: NULL parameters or view");
        ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = *p, .q = *q, .k = *k, .out = *out,
                              .positions = a->q_pos.buf || a->k_pos.buf ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
        ropeqk_plan *plan = NULL;
        ropeqk_status st = rqs_plan_create(ctx, &d, &plan);
        if (!st)
            st = rqs_plan_run(ctx, s, plan, a, NULL);
        ropeqk_plan_destroy(plan);
        return st;
    }
#endif
    (void)be, (void)s, (void)p, (void)q, (void)k, (void)out;
    return no_backend("rqs_scores_oneshot");
}

ropeqk_status rqs_paged_run(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_plan *plan, const rqs_paged_args *a,
                            const ropeqk_paged_batch *batch)
{
    if (!ctx || !a)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_paged_run: NULL context or arguments");
    rqs_backend be = rqs_ctx_backend(ctx);
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        ropeqk_opencl_paged_args c = {.q = cl_view(a->q),         .k_cache = cl_view(a->k_cache),
                                      .v_cache = cl_view(a->v_cache), .out = cl_view(a->out),
                                      .lse = cl_view(a->lse),         .k_scale = cl_view(a->k_scale),
                                      .v_scale = cl_view(a->v_scale)};
        cl_event ev = CL_NO_EVENT_YET;
        ropeqk_status st = ropeqk_opencl_paged_enqueue(plan, s ? s->queue : NULL, &c, batch, 0, NULL, &ev);
        return cl_after(ctx, s, st, ev, CL_NO_EVENT_YET, "ropeqk_opencl_paged_enqueue");
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN) {
        vk_paged_rec r = {plan,
                          {.q = vk_view(a->q), .k_cache = vk_view(a->k_cache), .v_cache = vk_view(a->v_cache),
                           .out = vk_view(a->out), .lse = vk_view(a->lse), .k_scale = vk_view(a->k_scale),
                           .v_scale = vk_view(a->v_scale)},
                          batch};
        return vk_run(ctx, s, rec_paged, &r);
    }
#endif
    (void)be, (void)s, (void)plan, (void)batch;
    return no_backend("rqs_paged_run");
}

ropeqk_status rqs_paged_append_run(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_plan *plan, const ropeqk_tensor *k_new,
                                   rqs_view k_new_mem, const ropeqk_tensor *v_new, rqs_view v_new_mem,
                                   const rqs_paged_cache *cache, const ropeqk_paged_batch *batch)
{
    if (!ctx)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_paged_append_run: NULL context");
    rqs_backend be = rqs_ctx_backend(ctx);
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        cl_event ev = CL_NO_EVENT_YET;
        ropeqk_opencl_paged_cache c, *cp = NULL; /* NULL stays NULL: the library's own check */
        if (cache) {
            c = (ropeqk_opencl_paged_cache){cl_view(cache->k_cache), cl_view(cache->v_cache),
                                            cl_view(cache->k_scale), cl_view(cache->v_scale)};
            cp = &c;
        }
        ropeqk_status st = ropeqk_opencl_paged_append(plan, s ? s->queue : NULL, k_new, cl_view(k_new_mem), v_new,
                                                      cl_view(v_new_mem), cp, batch, 0, NULL, &ev);
        return cl_after(ctx, s, st, ev, CL_NO_EVENT_YET, "ropeqk_opencl_paged_append");
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN) {
        ropeqk_vulkan_paged_cache c, *cp = NULL;
        if (cache) {
            c = (ropeqk_vulkan_paged_cache){vk_view(cache->k_cache), vk_view(cache->v_cache),
                                            vk_view(cache->k_scale), vk_view(cache->v_scale)};
            cp = &c;
        }
        vk_append_rec r = {plan, k_new, v_new, vk_view(k_new_mem), vk_view(v_new_mem), cp, batch};
        return vk_run(ctx, s, rec_append, &r);
    }
#endif
    (void)be, (void)s, (void)plan, (void)k_new, (void)k_new_mem, (void)v_new, (void)v_new_mem, (void)cache,
        (void)batch;
    return no_backend("rqs_paged_append_run");
}

ropeqk_status rqs_copy_run(ropeqk_ctx *ctx, rqs_stream *s, const rqs_copy *c, size_t n)
{
    if (!ctx || (!c && n))
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_copy_run: NULL context or copies");
    rqs_backend be = rqs_ctx_backend(ctx);
    for (size_t i = 0; i < n; i++) {
        const rqs_copy *x = &c[i];
        if (!x->dst || !x->src)
            return fail(ROPEQK_ERR_NULL_POINTER, "rqs_copy_run: copy %zu: NULL buffer", i);
        if (x->dst->be != be || x->src->be != be)
            return fail(ROPEQK_ERR_BAD_PARAM, "rqs_copy_run: copy %zu: a buffer of another backend", i);
        if (x->bytes == 0 || x->src_offset > x->src->bytes || x->bytes > x->src->bytes - x->src_offset ||
            x->dst_offset > x->dst->bytes || x->bytes > x->dst->bytes - x->dst_offset)
            return fail(ROPEQK_ERR_BUFFER_TOO_SMALL, "rqs_copy_run: copy %zu: %zu bytes from %zu of %zu to %zu of %zu",
                        i, x->bytes, x->src_offset, x->src->bytes, x->dst_offset, x->dst->bytes);
        if (x->dst == x->src && x->src_offset < x->dst_offset + x->bytes && x->dst_offset < x->src_offset + x->bytes)
            return fail(ROPEQK_ERR_BAD_PARAM, "rqs_copy_run: copy %zu: source and destination overlap", i);
    }
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        cl_command_queue q = cl_queue(ctx, s);
        for (size_t i = 0; i < n; i++) {
            cl_int e = clEnqueueCopyBuffer(q, c[i].src->mem, c[i].dst->mem, c[i].src->lead + c[i].src_offset,
                                           c[i].dst->lead + c[i].dst_offset, c[i].bytes, 0, NULL, NULL);
            if (e) {
                clFinish(q);
                return cl_fail(e, "clEnqueueCopyBuffer");
            }
        }
        cl_int e = clFinish(q);
        return e ? cl_fail(e, "clFinish") : ROPEQK_SUCCESS;
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN) {
        vk_copy1 *v = malloc((n ? n : 1) * sizeof *v);
        if (!v)
            return fail(ROPEQK_ERR_OUT_OF_HOST_MEMORY, "rqs_copy_run: out of host memory");
        for (size_t i = 0; i < n; i++)
            v[i] = (vk_copy1){c[i].src->buf, c[i].dst->buf,
                              {c[i].src->lead + c[i].src_offset, c[i].dst->lead + c[i].dst_offset, c[i].bytes}};
        vk_copy_rec r = {v, n};
        ropeqk_status st = vk_run(ctx, s, rec_copies, &r);
        free(v);
        return st;
    }
#endif
    (void)be, (void)s;
    return no_backend("rqs_copy_run");
}

/* ---- raw views --------------------------------------------------------------------------------- */
#if RQS_HAVE_OPENCL
ropeqk_opencl_mem rqs_view_opencl(rqs_view v) { return cl_view(v); }
#endif
#if RQS_HAVE_VULKAN
ropeqk_vulkan_mem rqs_view_vulkan(rqs_view v) { return vk_view(v); }
#endif

/* ---- contexts ---------------------------------------------------------------------------------- */
ropeqk_status rqs_ctx_borrow(const ropeqk_ctx *ctx, const ropeqk_tuning *tuning, ropeqk_ctx **out)
{
    if (!ctx || !out)
        return fail(ROPEQK_ERR_NULL_POINTER, "rqs_ctx_borrow: NULL context or out");
    *out = NULL;
    ropeqk_tuning none;
    memset(&none, 0, sizeof none);
    if (!tuning)
        tuning = &none;
    rqs_backend be = rqs_ctx_backend(ctx);
#if RQS_HAVE_OPENCL
    if (be == RQS_BACKEND_OPENCL) {
        ropeqk_opencl_ctx_params p = {.context = ropeqk_opencl_context(ctx), .queue = ropeqk_opencl_queue(ctx),
                                      .tuning = *tuning};
        return ropeqk_opencl_ctx_create(&p, out);
    }
#endif
#if RQS_HAVE_VULKAN
    if (be == RQS_BACKEND_VULKAN) {
        ropeqk_vulkan_ctx_params p = {.instance = ropeqk_vulkan_instance(ctx),
                                      .physical_device = ropeqk_vulkan_physical_device(ctx),
                                      .device = ropeqk_vulkan_device(ctx),
                                      .tuning = *tuning};
        p.queue = ropeqk_vulkan_queue(ctx, &p.queue_family);
        return ropeqk_vulkan_ctx_create(&p, out);
    }
#endif
    (void)be;
    return no_backend("rqs_ctx_borrow");
}

bool rqs_validation_unavailable(char *why, size_t len)
{
    const char *v = getenv("ROPEQK_VULKAN_VALIDATION");
    if (!v || strcmp(v, "auto") != 0)
        return false;
#if RQS_HAVE_VULKAN
    uint32_t n = 0;
    bool found = false;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) == VK_SUCCESS && n > 0) {
        VkLayerProperties *l = calloc(n, sizeof *l);
        if (l && vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
            for (uint32_t i = 0; i < n && !found; i++)
                found = strcmp(l[i].layerName, "VK_LAYER_KHRONOS_validation") == 0;
        free(l);
    }
    if (found)
        return false;
#else
    return false; /* no Vulkan in this build: nothing to validate */
#endif
    snprintf(why, len, "ROPEQK_VULKAN_VALIDATION=auto and VK_LAYER_KHRONOS_validation is not installed: this suite "
                       "runs under the validation layer only (Debian: vulkan-validationlayers)");
    return true;
}

uint32_t rqs_validation_messages(char *first, size_t len)
{
#if RQS_HAVE_VULKAN
    return ropeqk_vulkan_validation_messages(NULL, first, len);
#else
    if (first && len)
        first[0] = '\0';
    return 0;
#endif
}
