/* Prefill chunks over the paged cache on OpenCL: a sequence with many query rows in a ragged batch
 * (the context's chunk_rows or more) does not go through the decode kernels row by row, each row reading
 * and rotating every key again; its K and V are gathered from the pages into dense scratch
 * (paged_gather, cl/paged.cl) and its rows run through the attention kernel of the plan's companion
 * (plan->chunk, src/core/plan.c), which rotates the keys once and tiles the rows. */
#include "ocl.h"
#include "../core/path_runs.h"

#include <stdlib.h>

/* One gather of K or V (the cache view c, its buffer m; an 8-bit cache's scales sm) of sequence row
 * r0's pages into dst, as BHSD rows [hk][t] (dense_view): paged_gather copies a 16/32-bit cache's bytes, paged_gather_q8 writes an 8-bit
 * cache's values as f32 (the companion's view of it, src/core/plan.c). */
static cl_int gather(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_tensor *c, ropeqk_opencl_mem m,
                     ropeqk_opencl_mem sm, const rq_paged_meta *meta, int64_t r0, int64_t len, cl_mem dst, cl_uint nw,
                     const cl_event *w, cl_event *ev)
{
    cl_int err = CL_SUCCESS; /* the META argument: set by the caller */
    size_t g, l = RQ_PCWG;
    cl_kernel k;
    if (rq_dtype_q8(c->dtype)) {
        k = rq_clp(pl)->kx[6];
        rq_pgatq_args a = {
            .src_off = (rq_i64)m.offset, .snb0 = c->nb[0], .snb1 = c->nb[1], .snb2 = c->nb[2],
            .scale_off = (rq_i64)(sm.offset / 4), .dnb1 = len * c->ne[3], .dnb2 = c->ne[3],
            .Hkv = (rq_i32)c->ne[1], .len = (rq_i32)len, .ps = (rq_i32)pl->paged.page_size, .dim = (rq_i32)c->ne[3],
            .row = (rq_i32)r0, .pages_off = meta->pages_off, .qdt = (rq_i32)c->dtype,
        };
        RQ_SET_ARG(k, RQ_PGQ_SRC, m.buf);
        RQ_SET_ARG(k, RQ_PGQ_SCALE, sm.buf);
        RQ_SET_ARG(k, RQ_PGQ_DST, dst);
        RQ_SET_ARG(k, RQ_PGQ_A, a);
        g = rq_round_up((size_t)(len * c->ne[1] * ((a.dim + 7) / 8)), RQ_PCWG);
    } else {
        k = rq_clp(pl)->kx[5];
        int64_t es = (int64_t)ropeqk_dtype_size(c->dtype), row = c->ne[3] * es;
        rq_pgat_args a = {
            .src_off = (rq_i64)m.offset, .snb0 = c->nb[0], .snb1 = c->nb[1], .snb2 = c->nb[2],
            .dnb1 = len * row, .dnb2 = row, .Hkv = (rq_i32)c->ne[1], .len = (rq_i32)len,
            .ps = (rq_i32)pl->paged.page_size, .units = (rq_i32)(row / 2), .row = (rq_i32)r0,
            .pages_off = meta->pages_off,
        };
        RQ_SET_ARG(k, RQ_PT_SRC, m.buf);
        RQ_SET_ARG(k, RQ_PT_DST, dst);
        RQ_SET_ARG(k, RQ_PT_A, a);
        g = rq_round_up((size_t)(len * c->ne[1] * ((a.units + 7) / 8)), RQ_PCWG);
    }
    if (!err)
        err = clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, &l, nw, w, ev);
    return err;
}

/* The companion's K or V view as a gather of len tokens wrote it: BHSD [1, Hkv, len, dim]. The
 * companion describes BSHD rows of the sequence capacity (strides that do not depend on len, for
 * its validation at creation); the gathered rows of one head together are what the attention kernel
 * reads fastest: the same kernel on BSHD K/V took 12% longer (pocl, 2 EPYC cores, a 512-row chunk
 * over 4608 keys, Hq 32 / Hkv 8 / D 128, f16: 153.8 against 137.2 ms, `ropeqk-bench --ragged`). */
static void dense_view(ropeqk_tensor *t, int64_t len)
{
    int64_t es = (int64_t)ropeqk_dtype_size(t->dtype);
    t->ne[2] = len;
    t->nb[3] = es, t->nb[2] = t->ne[3] * es, t->nb[1] = len * t->nb[2], t->nb[0] = t->ne[1] * t->nb[1];
}

ropeqk_status rq_cl_paged_chunks_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_paged_args *args,
                                         const ropeqk_paged_batch *b, const rq_paged_meta *meta, cl_mem mbuf,
                                         cl_event after, cl_event *last)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    ropeqk_status st = ROPEQK_SUCCESS;
    cl_event prev = after; /* the chain: each chunk's gathers wait for the command before */
    clRetainEvent(prev);
    for (int64_t s = 0; s < b->n_seqs && !st; s++) {
        int64_t ql = rq_paged_seq_rows(b, s), len = b->seq_lens[s], r0 = b->q_indptr[s];
        if (ql < rq_paged_chunk_rows(pl))
            continue;
        /* the companion's dtypes: f32 where a cache is 8-bit (4x its bytes) */
        size_t kb = (size_t)(len * pb->Hkv * pb->D) * ropeqk_dtype_size(pl->chunk->k.dtype);
        size_t vb = (size_t)(len * pb->Hkv * pb->Dv) * ropeqk_dtype_size(pl->chunk->v.dtype);
        rq_scratch *sk = NULL, *sv = NULL;
        if ((st = rq_scratch_get(ctx, kb, &sk)) || (st = rq_scratch_get(ctx, vb, &sv))) {
            rq_scratch_put(ctx, sk, 0, NULL);
            break;
        }
        cl_event ev[3] = {NULL, NULL, NULL};
        cl_int err = CL_SUCCESS;
        pthread_mutex_lock(&rq_clp(pl)->lock);
        RQ_SET_ARG(rq_clp(pl)->kx[5], RQ_PT_META, mbuf);
        RQ_SET_ARG(rq_clp(pl)->kx[6], RQ_PGQ_META, mbuf);
        if (!err)
            err = gather(pl, queue, &pl->k, args->k_cache, args->k_scale, meta, r0, len, sk->buf, 1, &prev, &ev[0]);
        if (!err)
            err = gather(pl, queue, &pl->v, args->v_cache, args->v_scale, meta, r0, len, sv->buf, 1, &prev, &ev[1]);
        pthread_mutex_unlock(&rq_clp(pl)->lock);
        if (err) {
            st = rq_cl_fail(ctx, err);
        } else {
            /* the sequence's rows of q, out and lse (the companion's views start at row 0) */
            ropeqk_opencl_args a = {
                .q = {args->q.buf, args->q.offset + (size_t)(r0 * pl->q.nb[0])},
                .k = {sk->buf, 0}, .v = {sv->buf, 0},
                .out = {args->out.buf, args->out.offset + (size_t)(r0 * pl->out.nb[0])},
                .lse = {args->lse.buf, pl->with_lse ? args->lse.offset + (size_t)(r0 * pl->lse.nb[0]) : 0},
            };
            /* after both gathers and the decode kernels' placeholder rows (prev); the companion run
             * through a copy of its plan object whose K/V views are the gathered rows' (the kernels,
             * tables and lock are its own: the copy shares them) */
            cl_event dep[3] = {ev[0], ev[1], prev};
            ropeqk_plan cv = *pl->chunk;
            dense_view(&cv.k, len);
            dense_view(&cv.v, len);
            st = rq_attn_enqueue(&cv, queue, &a, ql, len, b->q_pos[s], b->k_pos0 ? b->k_pos0[s] : 0, 3, dep,
                                 &ev[2]);
        }
        cl_event used = ev[2] ? ev[2] : ev[1] ? ev[1] : ev[0];
        rq_scratch_put(ctx, sk, used ? 1 : 0, &used);
        rq_scratch_put(ctx, sv, used ? 1 : 0, &used);
        if (ev[2]) {
            rq_path_hit(RQ_PATH_PAGED_CHUNK);
            clReleaseEvent(prev);
            prev = ev[2];
            ev[2] = NULL;
        }
        for (int i = 0; i < 3; i++)
            if (ev[i])
                clReleaseEvent(ev[i]);
    }
    *last = prev;
    return st;
}
