/* Deferred release of the library's own OpenCL objects (declared in ocl.h).
 *
 * Why: a call may enqueue commands that wait for the caller's events, a user event among them that
 * completes long after the call returned (tests/test_device.c enqueues behind one). The library
 * then releases what it made for the call (the metadata buffer of a paged call) or, in the one-shot
 * ropeqk_opencl_enqueue and in ropeqk_plan_destroy, the plan's kernels and constant buffers, while
 * those commands have not run yet. OpenCL says the objects live on until the commands that use them
 * complete, and pocl keeps them, but on NVIDIA's OpenCL (driver 580, H200) exactly that test died
 * with a signal (issue 30), the only test whose commands were still waiting for a user event when
 * the library released the objects they use. So the library never drops its last reference to an
 * object that a command it enqueued may still use: the object is buried with the events of those
 * commands and released once they have completed, which later calls check without blocking
 * (CL_EVENT_COMMAND_EXECUTION_STATUS, a failed command counting as done) and the context's teardown
 * does after its clFinish. No event callbacks: nothing runs on a driver thread, and nothing here ever
 * waits, so a user event that the caller completes later cannot block a call.
 *
 * The events: each call of ropeqk_opencl_plan_enqueue, ropeqk_opencl_paged_enqueue and
 * ropeqk_opencl_paged_append records its last command's event (rq_cl_track; every command of a call
 * comes before it), so a plan's objects are buried with the events of every call of the context not
 * yet seen complete; a call's own temporaries are buried with that call's events. */
#include "ocl.h"

#include <stdlib.h>
#include <string.h>

typedef struct rq_grave {
    cl_uint nobj, nev;
    rq_cl_obj obj[RQ_GRAVE_MAX];
    cl_event *ev;
    struct rq_grave *next;
} rq_grave;

static bool done(cl_event e)
{
    cl_int status = CL_QUEUED;
    if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
        return true; /* not a valid event any more: nothing to wait for */
    return status <= CL_COMPLETE; /* CL_COMPLETE is 0; negative: terminated with an error */
}

static void release_objs(cl_uint n, const rq_cl_obj *o)
{
    for (cl_uint i = 0; i < n; i++) {
        if (o[i].kernel)
            clReleaseKernel(o[i].kernel);
        if (o[i].mem)
            clReleaseMemObject(o[i].mem);
    }
}

static void grave_free(rq_grave *g)
{
    release_objs(g->nobj, g->obj);
    for (cl_uint i = 0; i < g->nev; i++)
        clReleaseEvent(g->ev[i]);
    free(g->ev);
    free(g);
}

/* Drops the completed events of the pending list and unlinks the graves whose events have all
 * completed onto *out (pool_lock held; the releases happen outside it). */
static void reap_locked(rq_cl_ctx *c, rq_grave **out)
{
    size_t k = 0;
    for (size_t i = 0; i < c->npend; i++) {
        if (done(c->pend[i]))
            clReleaseEvent(c->pend[i]);
        else
            c->pend[k++] = c->pend[i];
    }
    c->npend = k;
    for (rq_grave **pp = &c->graves; *pp;) {
        rq_grave *g = *pp;
        cl_uint live = 0;
        for (cl_uint i = 0; i < g->nev; i++)
            live += !done(g->ev[i]);
        if (live == 0) {
            *pp = g->next;
            g->next = *out;
            *out = g;
        } else {
            pp = &g->next;
        }
    }
}

static void free_list(rq_grave *g)
{
    while (g) {
        rq_grave *n = g->next;
        grave_free(g);
        g = n;
    }
}

void rq_cl_track(ropeqk_ctx *ctx, cl_event ev)
{
    rq_cl_ctx *c = rq_cl(ctx);
    rq_grave *free_now = NULL;
    pthread_mutex_lock(&c->pool_lock);
    reap_locked(c, &free_now);
    if (ev && !done(ev)) {
        if (c->npend == c->cap_pend) {
            size_t cap = c->cap_pend ? 2 * c->cap_pend : 16;
            cl_event *p = realloc(c->pend, cap * sizeof *p);
            if (p) {
                c->pend = p;
                c->cap_pend = cap;
            }
        }
        /* without room (out of host memory) the call goes untracked: its plan's objects then rely on
         * OpenCL's reference counts alone, as before this file existed */
        if (c->npend < c->cap_pend && clRetainEvent(ev) == CL_SUCCESS)
            c->pend[c->npend++] = ev;
    }
    pthread_mutex_unlock(&c->pool_lock);
    free_list(free_now);
}

void rq_cl_release_after(ropeqk_ctx *ctx, cl_uint nobj, const rq_cl_obj *obj, cl_uint nev, const cl_event *ev)
{
    rq_cl_ctx *c = rq_cl(ctx);
    rq_grave *free_now = NULL, *g = NULL;
    if (nobj > RQ_GRAVE_MAX)
        nobj = RQ_GRAVE_MAX; /* callers pass at most that many (plan.c: 12) */
    pthread_mutex_lock(&c->pool_lock);
    reap_locked(c, &free_now);
    /* the given events, or those of every call not yet complete */
    const cl_event *src = nev ? ev : c->pend;
    cl_uint n = nev ? nev : (cl_uint)c->npend, live = 0;
    for (cl_uint i = 0; i < n; i++)
        live += src[i] && !done(src[i]);
    if (live) {
        g = calloc(1, sizeof *g);
        cl_event *e = g ? malloc(live * sizeof *e) : NULL;
        if (g && e) {
            for (cl_uint i = 0; i < n; i++)
                if (src[i] && !done(src[i]) && clRetainEvent(src[i]) == CL_SUCCESS)
                    e[g->nev++] = src[i];
            g->ev = e;
            g->nobj = nobj;
            memcpy(g->obj, obj, nobj * sizeof *obj);
            g->next = c->graves;
            c->graves = g;
        } else { /* out of host memory: release now, as before (OpenCL's reference counts) */
            free(g);
            g = NULL;
        }
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (!g)
        release_objs(nobj, obj);
    free_list(free_now);
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
        clReleaseEvent(c->pend[i]);
    free(c->pend);
    c->pend = NULL;
    c->npend = c->cap_pend = 0;
    pthread_mutex_unlock(&c->pool_lock);
    free_list(g);
}
