/* Device memory and events of the neutral run API (ropeqk.h; run.h): the checks every backend
 * shares (NULLs, flags, byte ranges, alignment, overlaps, ownership), then the backend's table entry. */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>

ropeqk_buffer *rq_buffer_new(ropeqk_ctx *ctx, uint64_t size, uint32_t flags)
{
    ropeqk_buffer *b = calloc(1, sizeof *b);
    if (b) {
        b->ctx = ctx;
        b->size = size;
        b->flags = flags;
    }
    return b;
}

ropeqk_event *rq_event_new(ropeqk_ctx *ctx, const char *what, uintptr_t handle, uint64_t value, bool borrowed)
{
    ropeqk_event *e = calloc(1, sizeof *e);
    if (e) {
        e->ctx = ctx;
        e->what = what;
        e->handle = handle;
        e->value = value;
        e->borrowed = borrowed;
    }
    return e;
}

ropeqk_status rq_wait_bound(uint64_t *ns)
{
    unsigned long long ms = RQ_WAIT_DEFAULT_MS;
    int r = rq_env_u64("ROPEQK_WAIT_TIMEOUT_MS", &ms);
    if (r < 0 || (r > 0 && (ms < 1 || ms > UINT64_MAX / 1000000))) {
        rq_set_error("ROPEQK_WAIT_TIMEOUT_MS: expected milliseconds, 1 to %llu",
                     (unsigned long long)(UINT64_MAX / 1000000));
        return ROPEQK_ERR_BAD_CONFIG;
    }
    *ns = (uint64_t)ms * 1000000u;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_timeout(const char *fn, const char *what, uint64_t ns)
{
    rq_set_error("%s: %s did not complete within %.3f ms", fn, what ? what : "the operation", (double)ns / 1e6);
    return ROPEQK_ERR_TIMEOUT;
}

/* The context's backend runs on device memory (Vulkan: only on a device with timeline semaphores,
 * which its entries check). */
static ropeqk_status has_api(const ropeqk_ctx *ctx, const char *fn)
{
    if (!ctx->be->run) {
        rq_set_error("%s: the %s backend has no runs on device memory", fn, ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

/* [off, off + n) inside a buffer of `size` bytes (no overflow). */
static bool in_range(uint64_t off, uint64_t n, uint64_t size) { return off <= size && n <= size - off; }

static ropeqk_status range_ok(const ropeqk_buffer *b, uint64_t off, uint64_t n, const char *fn)
{
    if (!in_range(off, n, b->size)) {
        rq_set_error("%s: bytes [%llu, +%llu) past the buffer's %llu", fn, (unsigned long long)off,
                     (unsigned long long)n, (unsigned long long)b->size);
        return ROPEQK_ERR_BUFFER_TOO_SMALL;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_buffer_create(ropeqk_ctx *ctx, uint64_t bytes, uint32_t flags, ropeqk_buffer **out)
{
    const char *fn = "ropeqk_buffer_create";
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = has_api(ctx, fn);
    if (st)
        return st;
    if (bytes < 1 || bytes > UINT64_MAX - 3 || (flags & ~(uint32_t)ROPEQK_BUFFER_HOST_VISIBLE)) {
        rq_set_error("%s: %s", fn, bytes < 1 ? "0 bytes" : bytes > UINT64_MAX - 3 ? "a size past 2^64" : "unknown flags");
        return bytes > UINT64_MAX - 3 ? ROPEQK_ERR_OVERFLOW : ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_buffer *b = rq_buffer_new(ctx, (bytes + 3) / 4 * 4, flags);
    if (!b)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if ((st = ctx->be->run->buffer_alloc(b))) {
        free(b);
        return st;
    }
    *out = b;
    return ROPEQK_SUCCESS;
}

void ropeqk_buffer_destroy(ropeqk_buffer *buf)
{
    if (!buf)
        return;
    buf->ctx->be->run->buffer_free(buf);
    free(buf);
}

uint64_t ropeqk_buffer_size(const ropeqk_buffer *buf) { return buf ? buf->size : 0; }

ropeqk_status ropeqk_buffer_write(ropeqk_buffer *buf, uint64_t offset, const void *src, uint64_t bytes)
{
    if (!buf || (!src && bytes))
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = range_ok(buf, offset, bytes, "ropeqk_buffer_write");
    if (st || !bytes)
        return st;
    return buf->ctx->be->run->buffer_write(buf, offset, src, bytes);
}

ropeqk_status ropeqk_buffer_read(const ropeqk_buffer *buf, uint64_t offset, void *dst, uint64_t bytes)
{
    if (!buf || (!dst && bytes))
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = range_ok(buf, offset, bytes, "ropeqk_buffer_read");
    if (st || !bytes)
        return st;
    return buf->ctx->be->run->buffer_read(buf, offset, dst, bytes);
}

ropeqk_status ropeqk_buffer_fill(ropeqk_buffer *buf, uint64_t offset, uint64_t bytes, uint32_t pattern)
{
    const char *fn = "ropeqk_buffer_fill";
    if (!buf)
        return ROPEQK_ERR_NULL_POINTER;
    if (offset % 4 || bytes % 4) {
        rq_set_error("%s: offset %llu and bytes %llu must be multiples of 4", fn, (unsigned long long)offset,
                     (unsigned long long)bytes);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_status st = range_ok(buf, offset, bytes, fn);
    if (st || !bytes)
        return st;
    return buf->ctx->be->run->buffer_fill(buf, offset, bytes, pattern);
}

ropeqk_status rq_check_waits(ropeqk_ctx *ctx, uint32_t n, ropeqk_event *const *wait, const char *fn, rq_waits *w)
{
    w->n = n;
    w->ev = wait;
    if (n && !wait) {
        rq_set_error("%s: %u events to wait for, but no list", fn, n);
        return ROPEQK_ERR_NULL_POINTER;
    }
    for (uint32_t i = 0; i < n; i++) {
        const ropeqk_event *e = wait[i];
        if (!e) {
            rq_set_error("%s: wait[%u] is NULL", fn, i);
            return ROPEQK_ERR_NULL_POINTER;
        }
        if (e->ctx != ctx && (e->ctx->be != ctx->be || !ctx->be->run->same_device(e->ctx, ctx))) {
            rq_set_error("%s: wait[%u] is an event of another device (a %s context)", fn, i, e->ctx->be->name);
            return ROPEQK_ERR_BAD_PARAM;
        }
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_signal_shell(ropeqk_ctx *ctx, ropeqk_event **signal, const char *what, ropeqk_event **shell)
{
    *shell = NULL;
    if (!signal)
        return ROPEQK_SUCCESS;
    *signal = NULL;
    if (!(*shell = rq_event_new(ctx, what, 0, 0, false)))
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    return ROPEQK_SUCCESS;
}

/* Two regions of the same native object sharing a byte. */
static bool regions_overlap(const ropeqk_buffer *a, uint64_t ao, const ropeqk_buffer *b, uint64_t bo, uint64_t n,
                            uint64_t m)
{
    uint64_t x = a->base + ao, y = b->base + bo;
    return a->id == b->id && x < y + m && y < x + n;
}

ropeqk_status ropeqk_buffer_copy(const ropeqk_copy *regions, uint32_t n, uint32_t num_wait, ropeqk_event *const *wait,
                                 ropeqk_event **signal)
{
    const char *fn = "ropeqk_buffer_copy";
    if (signal)
        *signal = NULL;
    if (regions && !n) {
        rq_set_error("%s: no regions", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (!regions || !regions[0].dst)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_ctx *ctx = regions[0].dst->ctx;
    ropeqk_status st = has_api(ctx, fn);
    if (st)
        return st;
    for (uint32_t i = 0; i < n; i++) {
        const ropeqk_copy *c = &regions[i];
        if (!c->dst || !c->src)
            return ROPEQK_ERR_NULL_POINTER;
        if (c->dst->ctx != ctx || c->src->ctx != ctx) {
            rq_set_error("%s: region %u: buffers of two contexts", fn, i);
            return ROPEQK_ERR_BAD_PARAM;
        }
        if (!c->bytes) {
            rq_set_error("%s: region %u: 0 bytes", fn, i);
            return ROPEQK_ERR_BAD_PARAM;
        }
        if (!in_range(c->dst_offset, c->bytes, c->dst->size) || !in_range(c->src_offset, c->bytes, c->src->size)) {
            rq_set_error("%s: region %u: %llu bytes from %llu (source) to %llu (destination) pass a buffer's end", fn,
                         i, (unsigned long long)c->bytes, (unsigned long long)c->src_offset,
                         (unsigned long long)c->dst_offset);
            return ROPEQK_ERR_BUFFER_TOO_SMALL;
        }
        bool ov = regions_overlap(c->dst, c->dst_offset, c->src, c->src_offset, c->bytes, c->bytes);
        for (uint32_t j = 0; j < i && !ov; j++)
            ov = regions_overlap(c->dst, c->dst_offset, regions[j].dst, regions[j].dst_offset, c->bytes,
                                 regions[j].bytes);
        if (ov) {
            rq_set_error("%s: region %u's destination overlaps its source or an earlier destination", fn, i);
            return ROPEQK_ERR_OVERLAP;
        }
    }
    rq_waits w;
    ropeqk_event *sig;
    if ((st = rq_check_waits(ctx, num_wait, wait, fn, &w)) || (st = rq_signal_shell(ctx, signal, fn, &sig)))
        return st;
    if ((st = ctx->be->run->buffer_copy(ctx, regions, n, &w, sig))) {
        free(sig);
        return st;
    }
    if (signal)
        *signal = sig;
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_event_wait(ropeqk_event *ev, uint64_t timeout_ns)
{
    if (!ev)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st;
    if (timeout_ns == UINT64_MAX && (st = rq_wait_bound(&timeout_ns)))
        return st;
    st = ev->ctx->be->run->event_wait(ev, timeout_ns);
    return st == ROPEQK_ERR_TIMEOUT ? rq_timeout("ropeqk_event_wait", ev->what, timeout_ns) : st;
}

void ropeqk_event_release(ropeqk_event *ev)
{
    if (!ev)
        return;
    ev->ctx->be->run->event_free(ev);
    free(ev);
}

ropeqk_status ropeqk_ctx_finish(ropeqk_ctx *ctx)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    uint64_t ns;
    ropeqk_status st = has_api(ctx, "ropeqk_ctx_finish");
    if (st || (st = rq_wait_bound(&ns)))
        return st;
    return ctx->be->run->finish(ctx, ns);
}
