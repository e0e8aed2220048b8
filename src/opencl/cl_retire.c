/* Deferred release of the library's own OpenCL objects (declared in ocl.h).
 *
 * Why: a call may enqueue commands that wait for the caller's events, a user event among them that
 * completes long after the call returned (tests/neutral/test_device.c enqueues behind one). The library
 * then released what it made for the call (the metadata buffer of a paged call) or, in the one-shot
 * ropeqk_opencl_enqueue and in ropeqk_plan_destroy, the plan's kernels and constant buffers, while
 * those commands had not run yet. OpenCL says the objects live on until the commands that use them
 * complete, and pocl keeps them, but on NVIDIA's OpenCL (driver 580, H200) exactly that test died
 * with a signal (issue 30), the only test whose commands were still waiting for a user event when
 * the library released the objects they use (tests/strictcl/strict_release.c reproduces it on pocl).
 * So the library never drops its last reference to an object that a command it enqueued may still
 * use: the object is buried and released once those commands have completed, which later calls
 * check without blocking (CL_EVENT_COMMAND_EXECUTION_STATUS, a failed command counting as done) and
 * the context's teardown does after its clFinish. No event callbacks: nothing runs on a driver
 * thread; nothing here ever waits, so a user event that the caller completes later never blocks a
 * call; and nothing allocates after the commands are enqueued (a grave is made before, so that an
 * allocation failure is the call's reported status, with nothing enqueued).
 *
 * Two kinds of graves. A call's temporary buffer waits for that call's own events. A plan's kernels
 * and buffers wait for every call of the context enqueued before the plan was destroyed: each call
 * of ropeqk_opencl_plan_enqueue, ropeqk_opencl_paged_enqueue and ropeqk_opencl_paged_append records
 * its last command's event with a ticket (every command of a call comes before that one), and the
 * plan's grave holds the last ticket given out; it is freed once no recorded call with a ticket up
 * to it is still pending. */
#include "ocl.h"

#include <stdlib.h>
#include <string.h>

static bool done(cl_event e)
{
    cl_int status = CL_QUEUED;
    if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
        return true; /* not a valid event any more: nothing to wait for */
    return status <= CL_COMPLETE; /* CL_COMPLETE is 0; negative: terminated with an error */
}

static void grave_release(rq_grave *g)
{
    for (cl_uint i = 0; i < g->nobj; i++) {
        if (g->obj[i].kernel)
            clReleaseKernel(g->obj[i].kernel);
        if (g->obj[i].mem)
            clReleaseMemObject(g->obj[i].mem);
    }
    for (cl_uint i = 0; i < g->nev; i++)
        clReleaseEvent(g->ev[i]);
    free(g->owner); /* the grave itself, or the plan that holds it */
}

/* Drops the completed calls of the pending list and unlinks the graves that may go onto *out
 * (pool_lock held; the releases happen outside it). */
static void reap_locked(rq_cl_ctx *c, rq_grave **out)
{
    size_t k = 0;
    uint64_t oldest = UINT64_MAX; /* the smallest ticket still pending */
    for (size_t i = 0; i < c->npend; i++) {
        if (done(c->pend[i].ev)) {
            clReleaseEvent(c->pend[i].ev);
        } else {
            oldest = c->pend[i].ticket < oldest ? c->pend[i].ticket : oldest;
            c->pend[k++] = c->pend[i];
        }
    }
    c->npend = k;
    for (rq_grave **pp = &c->graves; *pp;) {
        rq_grave *g = *pp;
        bool ready = g->ticket < oldest;
        for (cl_uint i = 0; i < g->nev && ready; i++)
            ready = done(g->ev[i]);
        if (ready) {
            *pp = g->next;
            g->next = *out;
            *out = g;
        } else {
            pp = &g->next;
        }
    }
}

static void release_list(rq_grave *g)
{
    while (g) {
        rq_grave *n = g->next;
        grave_release(g);
        g = n;
    }
}

ropeqk_status rq_cl_retire_init(ropeqk_ctx *ctx)
{
    rq_cl_ctx *c = rq_cl(ctx);
    c->pend = calloc(RQ_PEND_MAX, sizeof *c->pend);
    return c->pend ? ROPEQK_SUCCESS : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
}

void rq_cl_track(ropeqk_ctx *ctx, cl_event ev)
{
    rq_cl_ctx *c = rq_cl(ctx);
    rq_grave *free_now = NULL;
    pthread_mutex_lock(&c->pool_lock);
    uint64_t ticket = ++c->tickets;
    reap_locked(c, &free_now);
    /* a full list (RQ_PEND_MAX calls still pending): this call goes unrecorded, and a plan destroyed
     * meanwhile relies on OpenCL's reference counts alone, as before this file existed */
    if (ev && c->pend && c->npend < RQ_PEND_MAX && !done(ev) && clRetainEvent(ev) == CL_SUCCESS) {
        c->pend[c->npend].ev = ev;
        c->pend[c->npend].ticket = ticket;
        c->npend++;
    }
    pthread_mutex_unlock(&c->pool_lock);
    release_list(free_now);
}

static void bury(rq_cl_ctx *c, rq_grave *g)
{
    rq_grave *free_now = NULL;
    pthread_mutex_lock(&c->pool_lock);
    g->next = c->graves;
    c->graves = g;
    reap_locked(c, &free_now); /* frees g at once when nothing it waits for is pending */
    pthread_mutex_unlock(&c->pool_lock);
    release_list(free_now);
}

rq_grave *rq_cl_grave_new(void)
{
    rq_grave *g = calloc(1, sizeof *g);
    if (g)
        g->owner = g;
    return g;
}

void rq_cl_bury_mem(ropeqk_ctx *ctx, rq_grave *g, cl_mem m, cl_uint nev, const cl_event *ev)
{
    g->nobj = 0;
    if (m)
        g->obj[g->nobj++] = (rq_cl_obj){NULL, m};
    g->nev = 0;
    for (cl_uint i = 0; i < nev && i < RQ_GRAVE_EV; i++)
        if (ev[i] && clRetainEvent(ev[i]) == CL_SUCCESS)
            g->ev[g->nev++] = ev[i];
    g->ticket = 0; /* its own events only */
    bury(rq_cl(ctx), g);
}

void rq_cl_bury_plan(ropeqk_ctx *ctx, rq_grave *g)
{
    rq_cl_ctx *c = rq_cl(ctx);
    pthread_mutex_lock(&c->pool_lock);
    g->ticket = c->tickets; /* every call recorded so far */
    pthread_mutex_unlock(&c->pool_lock);
    g->nev = 0;
    bury(c, g);
}

void rq_cl_graves_free_all(ropeqk_ctx *ctx)
{
    rq_cl_ctx *c = rq_cl(ctx);
    if (!c->pool_lock_ok)
        return;
    pthread_mutex_lock(&c->pool_lock);
    rq_grave *g = c->graves;
    c->graves = NULL;
    for (size_t i = 0; i < c->npend; i++)
        clReleaseEvent(c->pend[i].ev);
    c->npend = 0;
    free(c->pend);
    c->pend = NULL;
    pthread_mutex_unlock(&c->pool_lock);
    release_list(g);
}
