/* The neutral run API on Vulkan (src/core/run.h; the table's run entries): buffers are VkBuffers of
 * the library's (device-local, or host-visible and mapped) or ranges of a caller's, events are
 * timeline-semaphore values, and every operation is recorded into a command buffer of the context's
 * pool and submitted by vk_submit.c. The runs translate the core's {id, offset, end} records back into
 * ropeqk_vulkan_mem and record through the interop entry points (vk_plan.c, vk_paged.c,
 * vk_paged_append.c), whose checks are the core's; nothing is submitted when they refuse. */
#include "vk_submit.h"

#include <stdlib.h>
#include <string.h>

static ropeqk_vulkan_mem vkm(rq_mem m)
{
    return (ropeqk_vulkan_mem){(VkBuffer)m.id, m.off, m.off <= m.end ? m.end - m.off : 0};
}

/* Everything earlier in the queue (runs, the caller's writes, host writes) before a transfer. */
static void lead_transfer(VkCommandBuffer cmd)
{
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                  VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_HOST_WRITE_BIT,
                  VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
}

static const rq_waits no_waits = {0, NULL};

/* ---- buffers ------------------------------------------------------------------------------------- */

static ropeqk_status vk_buffer_alloc(ropeqk_buffer *b)
{
    ropeqk_ctx *ctx = b->ctx;
    ropeqk_status st = rq_vk_runq_ready(ctx, "ropeqk_buffer_create");
    if (st)
        return st;
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(rq_vk(ctx)->phys, &p2);
    /* the allocation limit, and the largest heap (a driver may report no useful limit) */
    VkDeviceSize lim = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : UINT64_MAX, heap = 0;
    const VkPhysicalDeviceMemoryProperties *mp = &rq_vk(ctx)->memprops;
    for (uint32_t i = 0; i < mp->memoryHeapCount; i++)
        heap = mp->memoryHeaps[i].size > heap ? mp->memoryHeaps[i].size : heap;
    if (heap && heap < lim)
        lim = heap;
    if (b->size > lim) {
        rq_set_error("ropeqk_buffer_create: %llu bytes exceed the device's allocation limit (%llu)",
                     (unsigned long long)b->size, (unsigned long long)lim);
        return ROPEQK_ERR_TOO_LARGE;
    }
    rq_vk_buf *vb = calloc(1, sizeof *vb);
    if (!vb)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if ((st = rq_vk_buf_create(ctx, b->size, (b->flags & ROPEQK_BUFFER_HOST_VISIBLE) != 0, 0, vb))) {
        free(vb);
        return st;
    }
    b->impl = vb;
    b->id = (uintptr_t)vb->buf;
    return ROPEQK_SUCCESS;
}

static void vk_buffer_free(ropeqk_buffer *b)
{
    if (b->impl)
        rq_vk_buf_free(b->ctx, b->impl);
    free(b->impl);
}

/* The blocking calls' wait for everything submitted so far (fn names the call on timeout). */
static ropeqk_status wait_all(ropeqk_ctx *ctx, uint64_t ns, const char *fn)
{
    uint64_t last;
    VkSemaphore t = rq_vk_timeline(ctx, &last);
    ropeqk_status st = rq_vk_wait_value(ctx, t, last, ns);
    return st == ROPEQK_ERR_TIMEOUT ? rq_timeout(fn, "the work submitted before it", ns) : st;
}

static ropeqk_status vk_finish(ropeqk_ctx *ctx, uint64_t ns) { return wait_all(ctx, ns, "ropeqk_ctx_finish"); }

typedef struct {
    VkBuffer src, dst;
    VkBufferCopy c;
} copy_one;

static ropeqk_status rec_copy_one(VkCommandBuffer cmd, void *user)
{
    copy_one *c = user;
    lead_transfer(cmd);
    vkCmdCopyBuffer(cmd, c->src, c->dst, 1, &c->c);
    return ROPEQK_SUCCESS;
}

/* A copy between b and a staging buffer of n bytes (to_dev: stage -> b), submitted and waited for;
 * on a timeout the staging buffer is left to the submission (rq_vk_adopt_stage). */
static ropeqk_status staged(const ropeqk_buffer *b, uint64_t off, uint64_t n, const void *src, void *dst,
                            const char *fn)
{
    ropeqk_ctx *ctx = b->ctx;
    uint64_t ns, value = 0;
    rq_vk_buf stage;
    ropeqk_status st = rq_wait_bound(&ns);
    if (st || (st = rq_vk_buf_create(ctx, n, true, 0, &stage)))
        return st;
    if (src)
        memcpy(stage.map, src, (size_t)n);
    copy_one c = {.src = src ? stage.buf : (VkBuffer)b->id, .dst = src ? (VkBuffer)b->id : stage.buf,
                  .c = {src ? 0 : b->base + off, src ? b->base + off : 0, n}};
    if (!(st = rq_vk_submit(ctx, &no_waits, rec_copy_one, &c, &value)))
        st = rq_vk_wait_value(ctx, rq_vk_timeline(ctx, &(uint64_t){0}), value, ns);
    if (st == ROPEQK_ERR_TIMEOUT) {
        rq_vk_adopt_stage(ctx, value, &stage);
        return rq_timeout(fn, "the staged copy", ns);
    }
    if (!st && dst)
        memcpy(dst, stage.map, (size_t)n);
    rq_vk_buf_free(ctx, &stage);
    return st;
}

static ropeqk_status vk_buffer_write(ropeqk_buffer *b, uint64_t off, const void *src, uint64_t n)
{
    const char *fn = "ropeqk_buffer_write";
    rq_vk_buf *vb = b->impl;
    if (!vb || !vb->map)
        return staged(b, off, n, src, NULL, fn);
    uint64_t ns;
    ropeqk_status st = rq_wait_bound(&ns);
    if (st || (st = wait_all(b->ctx, ns, fn)))
        return st;
    memcpy((char *)vb->map + off, src, (size_t)n); /* host-coherent: the next submission sees it */
    return ROPEQK_SUCCESS;
}

static ropeqk_status vk_buffer_read(const ropeqk_buffer *b, uint64_t off, void *dst, uint64_t n)
{
    const char *fn = "ropeqk_buffer_read";
    const rq_vk_buf *vb = b->impl;
    if (!vb || !vb->map)
        return staged(b, off, n, NULL, dst, fn);
    uint64_t ns;
    ropeqk_status st = rq_wait_bound(&ns);
    if (st || (st = wait_all(b->ctx, ns, fn)))
        return st;
    memcpy(dst, (const char *)vb->map + off, (size_t)n); /* each submission ends with a host-read barrier */
    return ROPEQK_SUCCESS;
}

typedef struct {
    VkBuffer buf;
    VkDeviceSize off, n;
    uint32_t word;
} fill_one;

static ropeqk_status rec_fill(VkCommandBuffer cmd, void *user)
{
    fill_one *f = user;
    lead_transfer(cmd);
    vkCmdFillBuffer(cmd, f->buf, f->off, f->n, f->word);
    return ROPEQK_SUCCESS;
}

static ropeqk_status vk_buffer_fill(ropeqk_buffer *b, uint64_t off, uint64_t n, uint32_t word)
{
    uint64_t ns, value = 0;
    ropeqk_status st = rq_wait_bound(&ns);
    fill_one f = {(VkBuffer)b->id, b->base + off, n, word};
    if (st || (st = rq_vk_submit(b->ctx, &no_waits, rec_fill, &f, &value)))
        return st;
    st = rq_vk_wait_value(b->ctx, rq_vk_timeline(b->ctx, &(uint64_t){0}), value, ns);
    return st == ROPEQK_ERR_TIMEOUT ? rq_timeout("ropeqk_buffer_fill", "the fill", ns) : st;
}

typedef struct {
    const ropeqk_copy *c;
    uint32_t n;
} copy_many;

static ropeqk_status rec_copies(VkCommandBuffer cmd, void *user)
{
    copy_many *m = user;
    lead_transfer(cmd);
    for (uint32_t i = 0; i < m->n; i++) {
        const ropeqk_copy *c = &m->c[i];
        VkBufferCopy r = {c->src->base + c->src_offset, c->dst->base + c->dst_offset, c->bytes};
        vkCmdCopyBuffer(cmd, (VkBuffer)c->src->id, (VkBuffer)c->dst->id, 1, &r);
    }
    return ROPEQK_SUCCESS;
}

/* The signal event of a submission: the context's timeline at its value. */
static void set_signal(ropeqk_ctx *ctx, ropeqk_event *sig, uint64_t value)
{
    if (sig) {
        sig->handle = (uintptr_t)rq_vk_timeline(ctx, &(uint64_t){0});
        sig->value = value;
    }
}

static ropeqk_status vk_buffer_copy(ropeqk_ctx *ctx, const ropeqk_copy *c, uint32_t n, const rq_waits *w,
                                    ropeqk_event *sig)
{
    uint64_t value;
    copy_many m = {c, n};
    ropeqk_status st = rq_vk_runq_ready(ctx, "ropeqk_buffer_copy");
    if (st || (st = rq_vk_submit(ctx, w, rec_copies, &m, &value)))
        return st;
    set_signal(ctx, sig, value);
    return ROPEQK_SUCCESS;
}

/* ---- runs -------------------------------------------------------------------------------------- */

typedef struct {
    ropeqk_plan *pl;
    int kind; /* 0: plan, 1: paged decode, 2: append */
    ropeqk_vulkan_args a;
    const ropeqk_step *step;
    ropeqk_vulkan_paged_args pa;
    ropeqk_vulkan_paged_cache pc;
    ropeqk_vulkan_mem k_new, v_new;
    const ropeqk_tensor *kt, *vt;
    const ropeqk_paged_batch *batch;
} run_rec;

static ropeqk_status rec_run(VkCommandBuffer cmd, void *user)
{
    run_rec *r = user;
    if (r->kind == 0)
        return ropeqk_vulkan_plan_record(r->pl, cmd, &r->a, r->step);
    if (r->kind == 1)
        return ropeqk_vulkan_paged_record(r->pl, cmd, &r->pa, r->batch);
    return ropeqk_vulkan_paged_append(r->pl, cmd, r->kt, r->k_new, r->vt, r->v_new, &r->pc, r->batch);
}

static ropeqk_status run(run_rec *r, const rq_waits *w, ropeqk_event *sig, const char *fn)
{
    uint64_t value;
    ropeqk_ctx *ctx = r->pl->ctx;
    ropeqk_status st = rq_vk_runq_ready(ctx, fn);
    if (st || (st = rq_vk_submit(ctx, w, rec_run, r, &value)))
        return st;
    set_signal(ctx, sig, value);
    return ROPEQK_SUCCESS;
}

static ropeqk_status vk_run_plan(ropeqk_plan *pl, const rq_call_mems *m, const ropeqk_step *step, const rq_waits *w,
                                 ropeqk_event *sig)
{
    run_rec r = {.pl = pl, .kind = 0, .step = step,
                 .a = {.q = vkm(m->q), .k = vkm(m->k), .q_pos = vkm(m->q_pos), .k_pos = vkm(m->k_pos),
                       .out = vkm(m->out), .v = vkm(m->v), .lse = vkm(m->lse)}};
    return run(&r, w, sig, "ropeqk_plan_run");
}

static ropeqk_status vk_run_paged(ropeqk_plan *pl, const rq_paged_mems *m, const ropeqk_paged_batch *b,
                                  const rq_waits *w, ropeqk_event *sig)
{
    run_rec r = {.pl = pl, .kind = 1, .batch = b,
                 .pa = {.q = vkm(m->q), .k_cache = vkm(m->k_cache), .v_cache = vkm(m->v_cache), .out = vkm(m->out),
                        .lse = vkm(m->lse), .k_scale = vkm(m->k_scale), .v_scale = vkm(m->v_scale)}};
    return run(&r, w, sig, "ropeqk_paged_run");
}

static ropeqk_status vk_run_append(ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                   const rq_append_mems *m, const ropeqk_paged_batch *b, const rq_waits *w,
                                   ropeqk_event *sig)
{
    run_rec r = {.pl = pl, .kind = 2, .batch = b, .kt = k_new, .vt = v_new, .k_new = vkm(m->k_new),
                 .v_new = vkm(m->v_new),
                 .pc = {.k_cache = vkm(m->k_cache), .v_cache = vkm(m->v_cache), .k_scale = vkm(m->k_scale),
                        .v_scale = vkm(m->v_scale)}};
    return run(&r, w, sig, "ropeqk_paged_append");
}

/* ---- events ------------------------------------------------------------------------------------ */

static ropeqk_status vk_event_wait(ropeqk_event *e, uint64_t ns)
{
    return rq_vk_wait_value(e->ctx, (VkSemaphore)e->handle, e->value, ns);
}

static void vk_event_free(ropeqk_event *e) { (void)e; /* semaphores: the context's, or the caller's */ }

static bool vk_same_device(const ropeqk_ctx *a, const ropeqk_ctx *b) { return rq_vk(a)->device == rq_vk(b)->device; }

const struct rq_run_ops rq_vk_run_ops = {
    .buffer_alloc = vk_buffer_alloc, .buffer_free = vk_buffer_free, .buffer_write = vk_buffer_write,
    .buffer_read = vk_buffer_read, .buffer_fill = vk_buffer_fill, .buffer_copy = vk_buffer_copy,
    .run_plan = vk_run_plan, .run_paged = vk_run_paged, .run_append = vk_run_append,
    .event_wait = vk_event_wait, .event_free = vk_event_free, .finish = vk_finish, .same_device = vk_same_device,
};

/* ---- interop (ropeqk_vulkan.h) ------------------------------------------------------------------ */

static ropeqk_status vk_ctx_ok(const ropeqk_ctx *ctx, const char *fn)
{
    if (!rq_is_vk(ctx)) {
        rq_set_error("%s: a %s context, not a Vulkan one", fn, ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_vulkan_buffer_wrap(ropeqk_ctx *ctx, VkBuffer buffer, VkDeviceSize offset, VkDeviceSize range,
                                        ropeqk_buffer **out)
{
    const char *fn = "ropeqk_vulkan_buffer_wrap";
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!ctx || !buffer)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = vk_ctx_ok(ctx, fn);
    if (st || (st = rq_vk_runq_ready(ctx, fn)))
        return st;
    if (offset % 4 || range < 1 || range == VK_WHOLE_SIZE || offset > UINT64_MAX - range) {
        rq_set_error("%s: offset %llu must be a multiple of 4 and range %llu at least 1 (VK_WHOLE_SIZE is not "
                     "accepted)", fn, (unsigned long long)offset, (unsigned long long)range);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_buffer *b = rq_buffer_new(ctx, range, 0);
    if (!b)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    b->borrowed = true;
    b->id = (uintptr_t)buffer;
    b->base = offset;
    *out = b;
    return ROPEQK_SUCCESS;
}

VkBuffer ropeqk_vulkan_buffer_handle(const ropeqk_buffer *buf, VkDeviceSize *offset, VkDeviceSize *range)
{
    bool vk = buf && rq_is_vk(buf->ctx);
    if (offset)
        *offset = vk ? buf->base : 0;
    if (range)
        *range = vk ? buf->size : 0;
    return vk ? (VkBuffer)buf->id : VK_NULL_HANDLE;
}

ropeqk_status ropeqk_vulkan_event_wrap(ropeqk_ctx *ctx, VkSemaphore timeline, uint64_t value, ropeqk_event **out)
{
    const char *fn = "ropeqk_vulkan_event_wrap";
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!ctx || !timeline)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = vk_ctx_ok(ctx, fn);
    if (st || (st = rq_vk_runq_ready(ctx, fn)))
        return st;
    ropeqk_event *e = rq_event_new(ctx, "the caller's timeline semaphore", (uintptr_t)timeline, value, true);
    if (!e)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    *out = e;
    return ROPEQK_SUCCESS;
}

VkSemaphore ropeqk_vulkan_event_semaphore(const ropeqk_event *ev, uint64_t *value)
{
    bool vk = ev && rq_is_vk(ev->ctx);
    if (value)
        *value = vk ? ev->value : 0;
    return vk ? (VkSemaphore)ev->handle : VK_NULL_HANDLE;
}
