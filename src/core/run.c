/* Running plans on device memory (ropeqk.h: ropeqk_plan_run, ropeqk_paged_run, ropeqk_paged_append),
 * for every backend: the core checks the plan's operation, NULLs, buffer ownership and the events,
 * turns each {ropeqk_buffer, offset} into the neutral {id, offset, end} record (call.h), and calls the
 * backend's run entry, whose view checks are the core's too (call.c, paged_call.c). */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One view of a call as the checks see it: absent (id 0) without a buffer; the buffer's native
 * object, the view's offset in it and the buffer's end in it. */
static ropeqk_status view(const ropeqk_ctx *ctx, const ropeqk_mem *m, const char *fn, const char *what, rq_mem *r)
{
    *r = (rq_mem){0, 0, 0};
    if (!m->buf)
        return ROPEQK_SUCCESS;
    if (m->buf->ctx != ctx) {
        rq_set_error("%s: %s: a buffer of another context", fn, what);
        return ROPEQK_ERR_BAD_PARAM;
    }
    const ropeqk_buffer *b = m->buf;
    r->id = b->id;
    r->end = b->base + b->size;
    r->off = m->offset > UINT64_MAX - b->base ? UINT64_MAX : b->base + m->offset; /* past end: refused */
    return ROPEQK_SUCCESS;
}

static ropeqk_status views(const ropeqk_ctx *ctx, const ropeqk_mem *m, const char *const *names, int n, const char *fn,
                           rq_mem *r)
{
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < n && !st; i++)
        st = view(ctx, &m[i], fn, names[i], &r[i]);
    return st;
}

/* The backends' run entries reach the core's view checks through their interop entry points, whose
 * messages name those ("ropeqk_opencl_plan_enqueue: q: ..."): a failure's message is prefixed with the
 * neutral call's name (the path the call took stays visible), a success leaves the thread's previous
 * message as it was (ropeqk_last_error's contract). */
typedef struct {
    char saved[1024];
} msg_guard;

static void guard_begin(msg_guard *g)
{
    snprintf(g->saved, sizeof g->saved, "%s", ropeqk_last_error());
    rq_set_error("%s", "");
}

static ropeqk_status guard_end(msg_guard *g, ropeqk_status st, const char *fn)
{
    const char *m = ropeqk_last_error();
    if (!st) {
        rq_set_error("%s", g->saved);
    } else if (!*m) {
        rq_set_error("%s: %s", fn, ropeqk_status_string(st));
    } else if (strncmp(m, fn, strlen(fn)) != 0) {
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", m);
        rq_set_error("%s: %s", fn, inner);
    }
    return st;
}

/* Everything a run shares before its backend entry: the context's API, the waits, the signal shell. */
static ropeqk_status begin(ropeqk_plan *pl, uint32_t num_wait, ropeqk_event *const *wait, ropeqk_event **signal,
                           const char *fn, const char *what, rq_waits *w, ropeqk_event **sig)
{
    *sig = NULL;
    if (!pl->ctx->be->run) {
        rq_set_error("%s: the %s backend has no runs on device memory", fn, pl->ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_status st = rq_check_waits(pl->ctx, num_wait, wait, fn, w);
    return st ? st : rq_signal_shell(pl->ctx, signal, what, sig);
}

static ropeqk_status finish(ropeqk_status st, ropeqk_event *sig, ropeqk_event **signal)
{
    if (st)
        free(sig); /* never filled: the backend submitted nothing */
    else if (signal)
        *signal = sig;
    return st;
}

ropeqk_status ropeqk_plan_run(ropeqk_plan *plan, const ropeqk_args *args, const ropeqk_step *step, uint32_t num_wait,
                              ropeqk_event *const *wait, ropeqk_event **signal)
{
    const char *fn = "ropeqk_plan_run";
    if (signal)
        *signal = NULL;
    if (!plan || !args)
        return ROPEQK_ERR_NULL_POINTER;
    if (plan->op == ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("%s: a paged-decode plan runs with ropeqk_paged_run", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    static const char *const names[7] = {"q", "k", "q_pos", "k_pos", "out", "v", "lse"};
    const ropeqk_mem in[7] = {args->q, args->k, args->q_pos, args->k_pos, args->out, args->v, args->lse};
    rq_mem r[7];
    rq_waits w;
    ropeqk_event *sig = NULL;
    const char *what = plan->op == ROPEQK_OP_ATTENTION ? "ropeqk_plan_run (attention)" : "ropeqk_plan_run (scores)";
    ropeqk_status st = views(plan->ctx, in, names, 7, fn, r);
    if (st || (st = begin(plan, num_wait, wait, signal, fn, what, &w, &sig)))
        return st;
    rq_call_mems m = {r[0], r[1], r[2], r[3], r[4], r[5], r[6]};
    msg_guard g;
    guard_begin(&g);
    st = guard_end(&g, plan->ctx->be->run->run_plan(plan, &m, step, &w, sig), fn);
    return finish(st, sig, signal);
}

/* A paged plan (the interop calls say so too; checked here so that the message names this call). */
static ropeqk_status paged_only(const ropeqk_plan *pl, const char *fn)
{
    if (pl->op != ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("%s: the plan is not a paged-decode plan", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_paged_run(ropeqk_plan *plan, const ropeqk_paged_args *args, const ropeqk_paged_batch *batch,
                               uint32_t num_wait, ropeqk_event *const *wait, ropeqk_event **signal)
{
    const char *fn = "ropeqk_paged_run";
    if (signal)
        *signal = NULL;
    if (!plan || !args || !batch)
        return ROPEQK_ERR_NULL_POINTER;
    static const char *const names[7] = {"q", "k_cache", "v_cache", "out", "lse", "k_scale", "v_scale"};
    const ropeqk_mem in[7] = {args->q, args->k_cache, args->v_cache, args->out, args->lse, args->k_scale, args->v_scale};
    rq_mem r[7];
    rq_waits w;
    ropeqk_event *sig = NULL;
    ropeqk_status st = paged_only(plan, fn);
    if (st || (st = views(plan->ctx, in, names, 7, fn, r)) ||
        (st = begin(plan, num_wait, wait, signal, fn, fn, &w, &sig)))
        return st;
    rq_paged_mems m = {r[0], r[1], r[2], r[3], r[4], r[5], r[6]};
    msg_guard g;
    guard_begin(&g);
    st = guard_end(&g, plan->ctx->be->run->run_paged(plan, &m, batch, &w, sig), fn);
    return finish(st, sig, signal);
}

ropeqk_status ropeqk_paged_append(ropeqk_plan *plan, const ropeqk_tensor *k_new, ropeqk_mem k_new_mem,
                                  const ropeqk_tensor *v_new, ropeqk_mem v_new_mem, const ropeqk_paged_cache *cache,
                                  const ropeqk_paged_batch *batch, uint32_t num_wait, ropeqk_event *const *wait,
                                  ropeqk_event **signal)
{
    const char *fn = "ropeqk_paged_append";
    if (signal)
        *signal = NULL;
    if (!plan || !k_new || !v_new || !cache || !batch)
        return ROPEQK_ERR_NULL_POINTER;
    static const char *const names[6] = {"k_new", "v_new", "k_cache", "v_cache", "k_scale", "v_scale"};
    const ropeqk_mem in[6] = {k_new_mem, v_new_mem, cache->k_cache, cache->v_cache, cache->k_scale, cache->v_scale};
    rq_mem r[6];
    rq_waits w;
    ropeqk_event *sig = NULL;
    ropeqk_status st = paged_only(plan, fn);
    if (st || (st = views(plan->ctx, in, names, 6, fn, r)) ||
        (st = begin(plan, num_wait, wait, signal, fn, fn, &w, &sig)))
        return st;
    rq_append_mems m = {r[0], r[1], r[2], r[3], r[4], r[5]};
    msg_guard g;
    guard_begin(&g);
    st = guard_end(&g, plan->ctx->be->run->run_append(plan, k_new, v_new, &m, batch, &w, sig), fn);
    return finish(st, sig, signal);
}
