/* The neutral run API on OpenCL (src/core/run.h; the table's buffer_*, run_*, event_*, finish):
 * buffers are cl_mem objects of the context's cl_context, events cl_events, and every call goes on
 * the context's command queue. The runs translate the core's {id, offset, end} records back into
 * ropeqk_opencl_mem and call the interop entry points (cl_enqueue.c, cl_paged.c), whose checks are the
 * core's. Waits are bounded: an event callback signals a condition variable the caller waits on
 * with a deadline (clWaitForEvents has none); no busy polling, so a timed run is not delayed. */
#include "../core/run.h"
#include "ocl.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

static ropeqk_status cl_fail(ropeqk_ctx *ctx, cl_int err, const char *what)
{
    return rq_backend_fail(&rq_opencl_backend, ctx, err, what);
}

/* ---- bounded waits ------------------------------------------------------------------------------ */

/* Shared by a waiting thread and the event's callback; the last of the two frees it (a wait that
 * timed out leaves the callback its half). */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
    cl_int status;
    atomic_int refs;
} waiter;

static void waiter_unref(waiter *w)
{
    if (atomic_fetch_sub(&w->refs, 1) == 1) {
        pthread_cond_destroy(&w->c);
        pthread_mutex_destroy(&w->m);
        free(w);
    }
}

static void CL_CALLBACK on_complete(cl_event e, cl_int status, void *user)
{
    (void)e;
    waiter *w = user;
    pthread_mutex_lock(&w->m);
    w->done = true;
    w->status = status;
    pthread_cond_broadcast(&w->c);
    pthread_mutex_unlock(&w->m);
    waiter_unref(w);
}

static waiter *waiter_new(void)
{
    waiter *w = calloc(1, sizeof *w);
    pthread_condattr_t ca;
    if (!w)
        return NULL;
    if (pthread_condattr_init(&ca) != 0) {
        free(w);
        return NULL;
    }
    bool ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&w->c, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_mutex_init(&w->m, NULL) != 0) {
        if (ok)
            pthread_cond_destroy(&w->c);
        free(w);
        return NULL;
    }
    atomic_init(&w->refs, 2);
    return w;
}

/* ROPEQK_SUCCESS once ev completed, ROPEQK_ERR_TIMEOUT (no message) after ns, ROPEQK_ERR_BACKEND when
 * its command failed. */
static ropeqk_status wait_event(ropeqk_ctx *ctx, cl_event ev, uint64_t ns)
{
    cl_int s = CL_QUEUED;
    cl_int err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL);
    if (err)
        return cl_fail(ctx, err, "clGetEventInfo");
    if (s <= CL_COMPLETE) /* 0, or a negative error code of a command that failed */
        return s < 0 ? cl_fail(ctx, s, "a waited-for command") : ROPEQK_SUCCESS;
    cl_command_queue q = NULL; /* NULL for a user event */
    if (!clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) && q)
        clFlush(q); /* a host wait needs the command submitted */
    if (ns == 0)
        return ROPEQK_ERR_TIMEOUT;
    waiter *w = waiter_new();
    if (!w)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if ((err = clSetEventCallback(ev, CL_COMPLETE, on_complete, w))) {
        waiter_unref(w);
        waiter_unref(w);
        return cl_fail(ctx, err, "clSetEventCallback");
    }
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    uint64_t cap = ns < (uint64_t)1e18 ? ns : (uint64_t)1e18; /* 31 years: no overflow below */
    dl.tv_sec += (time_t)(cap / 1000000000u);
    dl.tv_nsec += (long)(cap % 1000000000u);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->m);
    for (int r = 0; !w->done && r == 0;) /* 0: signalled or spurious; ETIMEDOUT (or an error): stop */
        r = pthread_cond_timedwait(&w->c, &w->m, &dl);
    bool done = w->done;
    cl_int status = w->status;
    pthread_mutex_unlock(&w->m);
    waiter_unref(w);
    if (!done)
        return ROPEQK_ERR_TIMEOUT;
    return status < 0 ? cl_fail(ctx, status, "a waited-for command") : ROPEQK_SUCCESS;
}

/* Everything enqueued on the context's queue so far, waited for (fn names the call on timeout). */
static ropeqk_status drain(ropeqk_ctx *ctx, uint64_t ns, const char *fn)
{
    cl_event ev = NULL;
    cl_int err = clEnqueueMarkerWithWaitList(rq_cl(ctx)->queue, 0, NULL, &ev);
    if (err)
        return cl_fail(ctx, err, "clEnqueueMarkerWithWaitList");
    ropeqk_status st = wait_event(ctx, ev, ns);
    clReleaseEvent(ev);
    return st == ROPEQK_ERR_TIMEOUT ? rq_timeout(fn, "the work queued before it", ns) : st;
}

static ropeqk_status cl_finish(ropeqk_ctx *ctx, uint64_t ns) { return drain(ctx, ns, "ropeqk_ctx_finish"); }

static ropeqk_status cl_event_wait(ropeqk_event *e, uint64_t ns) { return wait_event(e->ctx, (cl_event)e->handle, ns); }

static void cl_event_free(ropeqk_event *e)
{
    if (e->handle)
        clReleaseEvent((cl_event)e->handle);
}

static bool cl_same_device(const ropeqk_ctx *a, const ropeqk_ctx *b) { return rq_cl(a)->context == rq_cl(b)->context; }

/* The wait list as cl_events: `buf` (n <= cap), else *heap (freed by the caller). */
static const cl_event *wait_list(const rq_waits *w, cl_event *buf, size_t cap, cl_event **heap)
{
    *heap = NULL;
    if (!w->n)
        return NULL; /* OpenCL: an empty wait list is NULL */
    cl_event *l = buf;
    if (w->n > cap && !(l = *heap = malloc(w->n * sizeof *l)))
        return NULL;
    for (uint32_t i = 0; i < w->n; i++)
        l[i] = (cl_event)w->ev[i]->handle;
    return l;
}

/* ---- buffers ---------------------------------------------------------------------------------- */

static ropeqk_status cl_buffer_alloc(ropeqk_buffer *b)
{
    ropeqk_ctx *ctx = b->ctx;
    /* the device's own limit: ROPEQK_MAX_ALLOC bounds the library's scratch only (cl_ctx.c) */
    if (b->size > rq_cl(ctx)->dev_max_alloc) {
        rq_set_error("ropeqk_buffer_create: %llu bytes exceed the device's allocation limit (%llu)",
                     (unsigned long long)b->size, (unsigned long long)rq_cl(ctx)->dev_max_alloc);
        return ROPEQK_ERR_TOO_LARGE;
    }
    cl_mem_flags f = CL_MEM_READ_WRITE | (b->flags & ROPEQK_BUFFER_HOST_VISIBLE ? CL_MEM_ALLOC_HOST_PTR : 0);
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(rq_cl(ctx)->context, f, (size_t)b->size, NULL, &err);
    if (err || !m)
        return cl_fail(ctx, err ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer");
    b->id = (uintptr_t)m;
    return ROPEQK_SUCCESS;
}

static void cl_buffer_free(ropeqk_buffer *b)
{
    if (b->id)
        clReleaseMemObject((cl_mem)b->id);
}

static ropeqk_status cl_buffer_write(ropeqk_buffer *b, uint64_t off, const void *src, uint64_t n)
{
    uint64_t ns;
    ropeqk_status st = rq_wait_bound(&ns);
    if (st || (st = drain(b->ctx, ns, "ropeqk_buffer_write")))
        return st;
    cl_int err = clEnqueueWriteBuffer(rq_cl(b->ctx)->queue, (cl_mem)b->id, CL_TRUE, (size_t)off, (size_t)n, src, 0,
                                      NULL, NULL);
    return err ? cl_fail(b->ctx, err, "clEnqueueWriteBuffer") : ROPEQK_SUCCESS;
}

static ropeqk_status cl_buffer_read(const ropeqk_buffer *b, uint64_t off, void *dst, uint64_t n)
{
    uint64_t ns;
    ropeqk_status st = rq_wait_bound(&ns);
    if (st || (st = drain(b->ctx, ns, "ropeqk_buffer_read")))
        return st;
    cl_int err = clEnqueueReadBuffer(rq_cl(b->ctx)->queue, (cl_mem)b->id, CL_TRUE, (size_t)off, (size_t)n, dst, 0,
                                     NULL, NULL);
    return err ? cl_fail(b->ctx, err, "clEnqueueReadBuffer") : ROPEQK_SUCCESS;
}

static ropeqk_status cl_buffer_fill(ropeqk_buffer *b, uint64_t off, uint64_t n, uint32_t word)
{
    uint64_t ns;
    ropeqk_status st = rq_wait_bound(&ns);
    if (st)
        return st;
    cl_event ev = NULL;
    cl_int err = clEnqueueFillBuffer(rq_cl(b->ctx)->queue, (cl_mem)b->id, &word, sizeof word, (size_t)off, (size_t)n,
                                     0, NULL, &ev);
    if (err)
        return cl_fail(b->ctx, err, "clEnqueueFillBuffer");
    st = wait_event(b->ctx, ev, ns);
    clReleaseEvent(ev);
    return st == ROPEQK_ERR_TIMEOUT ? rq_timeout("ropeqk_buffer_fill", "the fill", ns) : st;
}

/* The copies, each after the wait list, joined by a marker into sig (when wanted). A failure leaves
 * the copies enqueued before it running (as the interop calls do). */
static ropeqk_status cl_buffer_copy(ropeqk_ctx *ctx, const ropeqk_copy *c, uint32_t n, const rq_waits *w,
                                    ropeqk_event *sig)
{
    cl_event wb[16], *wh, eb[16], *ev = eb;
    const cl_event *wl = wait_list(w, wb, 16, &wh);
    if ((!wl && w->n) || (n > 16 && !(ev = calloc(n, sizeof *ev)))) {
        free(wh);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    cl_int err = CL_SUCCESS;
    uint32_t made = 0;
    for (; made < n && !err; made++) {
        const ropeqk_copy *r = &c[made];
        err = clEnqueueCopyBuffer(rq_cl(ctx)->queue, (cl_mem)r->src->id, (cl_mem)r->dst->id, (size_t)r->src_offset,
                                  (size_t)r->dst_offset, (size_t)r->bytes, w->n, wl, &ev[made]);
        if (err)
            break;
    }
    ropeqk_status st = err ? cl_fail(ctx, err, "clEnqueueCopyBuffer") : ROPEQK_SUCCESS;
    if (!st && sig) {
        cl_event m = NULL;
        if ((err = clEnqueueMarkerWithWaitList(rq_cl(ctx)->queue, n, ev, &m)))
            st = cl_fail(ctx, err, "clEnqueueMarkerWithWaitList");
        sig->handle = (uintptr_t)m;
    }
    for (uint32_t i = 0; i < made; i++)
        clReleaseEvent(ev[i]);
    if (ev != eb)
        free(ev);
    free(wh);
    return st;
}

/* ---- runs ------------------------------------------------------------------------------------- */

static ropeqk_opencl_mem clm(rq_mem m) { return (ropeqk_opencl_mem){(cl_mem)m.id, (size_t)m.off}; }

/* What every run shares: the wait list, the event handed to sig. */
typedef struct {
    cl_event wb[16], *wh;
    const cl_event *wl;
    cl_event ev;
} run_ctx;

static ropeqk_status run_begin(const rq_waits *w, run_ctx *r)
{
    r->ev = NULL;
    r->wl = wait_list(w, r->wb, 16, &r->wh);
    return !r->wl && w->n ? ROPEQK_ERR_OUT_OF_HOST_MEMORY : ROPEQK_SUCCESS;
}

static ropeqk_status run_end(run_ctx *r, ropeqk_status st, ropeqk_event *sig)
{
    free(r->wh);
    if (!st && sig)
        sig->handle = (uintptr_t)r->ev;
    else if (r->ev)
        clReleaseEvent(r->ev);
    return st;
}

static ropeqk_status cl_run_plan(ropeqk_plan *pl, const rq_call_mems *m, const ropeqk_step *step, const rq_waits *w,
                                 ropeqk_event *sig)
{
    run_ctx r;
    ropeqk_status st = run_begin(w, &r);
    if (st)
        return st;
    ropeqk_opencl_args a = {.q = clm(m->q), .k = clm(m->k), .q_pos = clm(m->q_pos), .k_pos = clm(m->k_pos),
                            .out = clm(m->out), .v = clm(m->v), .lse = clm(m->lse)};
    st = ropeqk_opencl_plan_enqueue(pl, NULL, &a, step, w->n, r.wl, sig ? &r.ev : NULL);
    return run_end(&r, st, sig);
}

static ropeqk_status cl_run_paged(ropeqk_plan *pl, const rq_paged_mems *m, const ropeqk_paged_batch *b,
                                  const rq_waits *w, ropeqk_event *sig)
{
    run_ctx r;
    ropeqk_status st = run_begin(w, &r);
    if (st)
        return st;
    ropeqk_opencl_paged_args a = {.q = clm(m->q), .k_cache = clm(m->k_cache), .v_cache = clm(m->v_cache),
                                  .out = clm(m->out), .lse = clm(m->lse), .k_scale = clm(m->k_scale),
                                  .v_scale = clm(m->v_scale)};
    st = ropeqk_opencl_paged_enqueue(pl, NULL, &a, b, w->n, r.wl, sig ? &r.ev : NULL);
    return run_end(&r, st, sig);
}

static ropeqk_status cl_run_append(ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                   const rq_append_mems *m, const ropeqk_paged_batch *b, const rq_waits *w,
                                   ropeqk_event *sig)
{
    run_ctx r;
    ropeqk_status st = run_begin(w, &r);
    if (st)
        return st;
    ropeqk_opencl_paged_cache c = {.k_cache = clm(m->k_cache), .v_cache = clm(m->v_cache),
                                   .k_scale = clm(m->k_scale), .v_scale = clm(m->v_scale)};
    st = ropeqk_opencl_paged_append(pl, NULL, k_new, clm(m->k_new), v_new, clm(m->v_new), &c, b, w->n, r.wl,
                                    sig ? &r.ev : NULL);
    return run_end(&r, st, sig);
}

const struct rq_run_ops rq_cl_run_ops = {
    .buffer_alloc = cl_buffer_alloc, .buffer_free = cl_buffer_free, .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read, .buffer_fill = cl_buffer_fill, .buffer_copy = cl_buffer_copy,
    .run_plan = cl_run_plan, .run_paged = cl_run_paged, .run_append = cl_run_append,
    .event_wait = cl_event_wait, .event_free = cl_event_free, .finish = cl_finish, .same_device = cl_same_device,
};

/* ---- interop (ropeqk_opencl.h) -------------------------------------------------------------------- */

ropeqk_status ropeqk_opencl_buffer_wrap(ropeqk_ctx *ctx, cl_mem mem, ropeqk_buffer **out)
{
    const char *fn = "ropeqk_opencl_buffer_wrap";
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!ctx || !mem)
        return ROPEQK_ERR_NULL_POINTER;
    if (!rq_is_cl(ctx)) {
        rq_set_error("%s: a %s context, not an OpenCL one", fn, ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    cl_context owner = NULL;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (!err)
        err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err)
        return cl_fail(ctx, err, "clGetMemObjectInfo");
    if (owner != rq_cl(ctx)->context) {
        rq_set_error("%s: the buffer belongs to another cl_context", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_buffer *b = rq_buffer_new(ctx, size, 0);
    if (!b)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if ((err = clRetainMemObject(mem))) {
        free(b);
        return cl_fail(ctx, err, "clRetainMemObject");
    }
    b->borrowed = true;
    b->id = (uintptr_t)mem;
    *out = b;
    return ROPEQK_SUCCESS;
}

cl_mem ropeqk_opencl_buffer_mem(const ropeqk_buffer *buf)
{
    return buf && rq_is_cl(buf->ctx) ? (cl_mem)buf->id : NULL;
}

ropeqk_status ropeqk_opencl_event_wrap(ropeqk_ctx *ctx, cl_event event, ropeqk_event **out)
{
    const char *fn = "ropeqk_opencl_event_wrap";
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!ctx || !event)
        return ROPEQK_ERR_NULL_POINTER;
    if (!rq_is_cl(ctx)) {
        rq_set_error("%s: a %s context, not an OpenCL one", fn, ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    cl_context owner = NULL;
    cl_int err = clGetEventInfo(event, CL_EVENT_CONTEXT, sizeof owner, &owner, NULL);
    if (err)
        return cl_fail(ctx, err, "clGetEventInfo");
    if (owner != rq_cl(ctx)->context) {
        rq_set_error("%s: the event belongs to another cl_context", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_event *e = rq_event_new(ctx, "the caller's cl_event", (uintptr_t)event, 0, true);
    if (!e)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if ((err = clRetainEvent(event))) {
        free(e);
        return cl_fail(ctx, err, "clRetainEvent");
    }
    *out = e;
    return ROPEQK_SUCCESS;
}

cl_event ropeqk_opencl_event_handle(const ropeqk_event *ev)
{
    return ev && rq_is_cl(ev->ctx) ? (cl_event)ev->handle : NULL;
}
