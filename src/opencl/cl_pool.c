/* The scratch pool of a context (declared in ocl.h).
 * Grow-only reuse of the Qr/Kt scratch across calls: at prefill sizes a fresh buffer is a fresh mmap
 * that the rotate pass page-faults in on every call. A call takes the smallest free buffer that is big
 * enough (or creates one) and hands it back with the events of the commands that use it; it becomes
 * free again when they have all completed, which the next call checks without blocking
 * (CL_EVENT_COMMAND_EXECUTION_STATUS; a failed command counts as done). The free list keeps at most
 * pool_budget bytes and RQ_POOL_MAX buffers, dropping the least recently returned, so a one-off huge
 * call does not pin its scratch for the life of the context. */
#include "ocl.h"

#include <stdlib.h>

#define RQ_POOL_MAX 16

static void scratch_release(rq_scratch *s)
{
    for (cl_uint i = 0; i < s->nev; i++)
        clReleaseEvent(s->ev[i]);
    if (s->buf)
        clReleaseMemObject(s->buf);
    free(s);
}

static bool scratch_idle(const rq_scratch *s)
{
    for (cl_uint i = 0; i < s->nev; i++) {
        cl_int status = CL_QUEUED;
        if (clGetEventInfo(s->ev[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
            return false;
        if (status > CL_COMPLETE) /* CL_COMPLETE is 0; negative: terminated with an error */
            return false;
    }
    return true;
}

/* Puts an idle buffer at the front of the free list and trims the list (pool_lock held). What
 * is dropped goes onto *dropped, to be released outside the lock. */
static void pool_push_free(ropeqk_ctx *ctx, rq_scratch *s, rq_scratch **dropped)
{
    for (cl_uint i = 0; i < s->nev; i++)
        clReleaseEvent(s->ev[i]);
    s->nev = 0;
    if (s->size > rq_cl(ctx)->pool_budget) { /* never kept */
        s->next = *dropped;
        *dropped = s;
        return;
    }
    s->next = rq_cl(ctx)->pool_free;
    rq_cl(ctx)->pool_free = s;
    rq_cl(ctx)->pool_free_bytes += s->size;
    for (;;) {
        size_t n = 0;
        rq_scratch **last = NULL;
        for (rq_scratch **pp = &rq_cl(ctx)->pool_free; *pp; pp = &(*pp)->next, n++)
            last = pp;
        if (!last || (n <= RQ_POOL_MAX && rq_cl(ctx)->pool_free_bytes <= rq_cl(ctx)->pool_budget))
            break;
        rq_scratch *t = *last;
        *last = NULL;
        rq_cl(ctx)->pool_free_bytes -= t->size;
        t->next = *dropped;
        *dropped = t;
    }
}

static void release_list(rq_scratch *s)
{
    while (s) {
        rq_scratch *n = s->next;
        scratch_release(s);
        s = n;
    }
}

ropeqk_status rq_scratch_get(ropeqk_ctx *ctx, size_t bytes, rq_scratch **out)
{
    *out = NULL;
    rq_scratch *dropped = NULL, *best = NULL, **best_pp = NULL;
    pthread_mutex_lock(&rq_cl(ctx)->pool_lock);
    /* reclaim what has completed */
    for (rq_scratch **pp = &rq_cl(ctx)->pool_busy; *pp;) {
        rq_scratch *s = *pp;
        if (scratch_idle(s)) {
            *pp = s->next;
            pool_push_free(ctx, s, &dropped);
        } else {
            pp = &s->next;
        }
    }
    for (rq_scratch **pp = &rq_cl(ctx)->pool_free; *pp; pp = &(*pp)->next)
        if ((*pp)->size >= bytes && (!best || (*pp)->size < best->size)) {
            best = *pp;
            best_pp = pp;
        }
    if (best) {
        *best_pp = best->next;
        best->next = NULL;
        rq_cl(ctx)->pool_free_bytes -= best->size;
    }
    pthread_mutex_unlock(&rq_cl(ctx)->pool_lock);
    release_list(dropped);
    if (best) {
        *out = best;
        return ROPEQK_SUCCESS;
    }
    rq_scratch *s = calloc(1, sizeof *s);
    if (!s)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    cl_int err = CL_SUCCESS;
    s->buf = clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS || !s->buf) {
        if (s->buf)
            clReleaseMemObject(s->buf);
        free(s);
        return rq_cl_fail(ctx, err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE);
    }
    s->size = bytes;
    *out = s;
    return ROPEQK_SUCCESS;
}

void rq_scratch_put(ropeqk_ctx *ctx, rq_scratch *s, cl_uint nev, const cl_event *ev)
{
    if (!s)
        return;
    s->nev = 0;
    for (cl_uint i = 0; i < nev && i < 3; i++)
        if (ev[i] && clRetainEvent(ev[i]) == CL_SUCCESS)
            s->ev[s->nev++] = ev[i];
    rq_scratch *dropped = NULL;
    pthread_mutex_lock(&rq_cl(ctx)->pool_lock);
    if (s->nev == 0) {
        pool_push_free(ctx, s, &dropped);
    } else {
        s->next = rq_cl(ctx)->pool_busy;
        rq_cl(ctx)->pool_busy = s;
    }
    pthread_mutex_unlock(&rq_cl(ctx)->pool_lock);
    release_list(dropped);
}

void rq_scratch_free_all(ropeqk_ctx *ctx)
{
    if (!rq_cl(ctx)->pool_lock_ok)
        return;
    pthread_mutex_lock(&rq_cl(ctx)->pool_lock);
    rq_scratch *f = rq_cl(ctx)->pool_free, *b = rq_cl(ctx)->pool_busy;
    rq_cl(ctx)->pool_free = rq_cl(ctx)->pool_busy = NULL;
    rq_cl(ctx)->pool_free_bytes = 0;
    pthread_mutex_unlock(&rq_cl(ctx)->pool_lock);
    release_list(f);
    release_list(b);
}
