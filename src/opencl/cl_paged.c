/* Decode attention over a paged, unrotated KV cache (ROPEQK_OP_PAGED_DECODE) on OpenCL, and the cache
 * append. The core validated the description at plan creation (src/core/paged.c); each call's batch
 * and buffers go through the core's paged call checks (src/core/paged_call.c), which pack the batch
 * into one int32 metadata array, then the three kernels of cl_paged_run.c are enqueued (Q rotation,
 * pass 1 over the pages, the reduction of the splits), and a ragged batch's long chunks go through
 * cl_paged_chunk.c. Nothing is enqueued when a check fails. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(RQ_DT_F32 == ROPEQK_F32 && RQ_DT_F16 == ROPEQK_F16 && RQ_DT_BF16 == ROPEQK_BF16 &&
                   RQ_DT_I8 == ROPEQK_I8 && RQ_DT_E4M3 == ROPEQK_FP8_E4M3 && RQ_DT_E5M2 == ROPEQK_FP8_E5M2,
               "contract.h's storage-type codes are ropeqk_dtype's");

ropeqk_status rq_cl_paged_plan_init(ropeqk_plan *pl, cl_program prog)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    const char *rot = pl->q.dtype == ROPEQK_F16    ? "rope_rotate_f16"
                      : pl->q.dtype == ROPEQK_BF16 ? "rope_rotate_bf16"
                                                   : "rope_rotate_f32";
    const char *names[7] = {rot, rq_cl_paged_cpu_shape(pl) ? "paged_attn_cpu" : "paged_attn_gpu", "paged_combine",
                            "paged_append", "paged_append_q8", "paged_gather", "paged_gather_q8"};
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < 7 && !err; i++)
        cp->kx[i] = clCreateKernel(prog, names[i], &err);
    if (!err)
        err = clGetDeviceInfo(rq_cl(ctx)->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cp->cus, &cp->cus, NULL);
    if (err)
        return rq_cl_fail(ctx, err); /* kernels made so far: ropeqk_plan_destroy */
    if (cp->cus < 1)
        cp->cus = 1;
    return rq_cl_paged_cpu_shape(pl) ? ROPEQK_SUCCESS : rq_cl_paged_gpu_fit(ctx, &pl->pb, cp);
}

/* The buffers of a call as the core's checks see them. */
static ropeqk_status mems(ropeqk_ctx *ctx, const ropeqk_opencl_mem *in, rq_mem *out, int n)
{
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < n && !st; i++)
        st = rq_cl_mem(ctx, in[i], &out[i]);
    return st;
}

static ropeqk_status plan_is_cl(const ropeqk_plan *pl, const char *fn)
{
    if (!rq_is_cl(pl->ctx)) {
        rq_set_error("%s: the plan belongs to a %s context, not an OpenCL one", fn, pl->ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

/* The decode kernels of a batch with chunks: once per run of consecutive non-chunk sequences
 * (rq_paged_decode_run), over that run's rows alone (their own metadata, Q, O and LSE views moved to
 * the run's first row), each run after the one before (the scratch). A chunk's rows never reach the
 * kernels: as placeholders they cost a mixed step (ropeqk-bench --ragged: 4 decodes, 2 chunks of
 * 512 rows, a speculative step of 4; AMD EPYC, 2 cores, pocl) 20 ms of its 176, mostly the Q
 * rotation of 1024 rows x 32 heads with accurate angles. *event: the last run's last command. */
static ropeqk_status decode_runs(ropeqk_plan *pl, cl_command_queue queue, const rq_cl_paged_launch *L,
                                 const rq_paged_meta *meta, const ropeqk_paged_batch *batch, cl_uint num_wait,
                                 const cl_event *wait, cl_event *event)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    ropeqk_status st = ROPEQK_SUCCESS;
    cl_event prev = NULL;
    int64_t s = 0, r0, r1;
    while (!st && rq_paged_decode_run(pl, batch, &s, &r0, &r1)) {
        rq_paged_meta sub;
        if ((st = rq_paged_meta_rows(meta, r0, r1, pl->paged.page_size, &sub)))
            break;
        int fast = L->fast;
        if ((st = rq_cl_paged_cpu_groups(pl, &sub, &fast))) {
            free(sub.v);
            break;
        }
        rq_grave *grave = rq_cl_grave_new(); /* the run's metadata outlives its kernels (cl_retire.c) */
        if (!grave) {
            free(sub.v);
            st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
            break;
        }
        cl_int err = CL_SUCCESS;
        cl_mem mbuf = rq_cl_paged_meta_upload(ctx, &sub, &err);
        if (err) {
            free(grave);
            free(sub.v);
            st = rq_cl_fail(ctx, err);
            break;
        }
        rq_cl_paged_launch R = *L;
        R.meta = R.qpos = mbuf;
        R.lens_off = sub.lens_off, R.qpos_off = sub.qpos_off, R.kpos_off = sub.kpos_off, R.pages_off = sub.pages_off;
        R.n = R.nbat = r1 - r0;
        R.max_pages = sub.max_pages;
        R.rg_off = sub.groups_off, R.ngroups = sub.ngroups, R.group_rows = sub.group_rows, R.fast = fast;
        R.ra.S = (rq_i32)(r1 - r0), R.ra.pos_off = sub.qpos_off;
        R.ra.src_off += (rq_i64)(r0 * pl->q.nb[0]);
        R.out.offset += (size_t)(r0 * pl->out.nb[0]);
        if (pl->with_lse)
            R.lse.offset += (size_t)(r0 * pl->lse.nb[0]);
        cl_event ran = NULL;
        st = rq_cl_paged_run(pl, queue, &R, cp->kx[0], cp->kx[1], cp->kx[2], prev ? 1 : num_wait, prev ? &prev : wait,
                             &ran);
        rq_cl_bury_mem(ctx, grave, mbuf, ran ? 1 : 0, &ran); /* once the run's kernels have completed */
        free(sub.v);
        if (prev)
            clReleaseEvent(prev);
        prev = ran;
    }
    if (!st && event) {
        *event = prev;
        prev = NULL;
    }
    if (prev)
        clReleaseEvent(prev);
    return st;
}

static ropeqk_status paged_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_paged_args *args,
                                   const ropeqk_paged_batch *batch, cl_uint num_wait, const cl_event *wait,
                                   cl_event *event)
{
    const char *fn = "ropeqk_opencl_paged_enqueue";
    ropeqk_status st = plan_is_cl(pl, fn);
    if (st)
        return st;
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_cl_plan *cp = rq_clp(pl);
    const ropeqk_opencl_mem in[7] = {args->q,   args->k_cache, args->v_cache, args->out,
                                     args->lse, args->k_scale, args->v_scale};
    rq_mem mm[7];
    if ((st = mems(ctx, in, mm, 7)))
        return st;
    rq_paged_mems pm = {mm[0], mm[1], mm[2], mm[3], mm[4], mm[5], mm[6]};
    rq_paged_meta meta;
    if ((st = rq_paged_call_check(pl, &pm, batch, fn, &meta)))
        return st;
    const int64_t n = meta.rows; /* the query rows are the kernels' sequences (src/core/paged_rows.c) */
    /* long chunks take the attention kernel after the decode kernels (src/opencl/cl_paged_chunk.c) */
    const int64_t nchunks = rq_paged_chunk_mark(pl, batch, &meta);
    const ropeqk_tensor *k = &pl->k, *v = &pl->v;
    const int64_t knb[3] = {k->nb[0], k->nb[1], k->nb[2]}, vnb[3] = {v->nb[0], v->nb[1], v->nb[2]};
    int fast =
        rq_cl_pfast_call_ok(pl, args->k_cache.offset, knb, args->v_cache.offset, vnb, pb->k_extent, pb->v_extent);
    if (nchunks == 0 && (st = rq_cl_paged_cpu_groups(pl, &meta, &fast))) { /* with chunks: decode_runs' own */
        free(meta.v);
        return st;
    }
    rq_grave *grave = rq_cl_grave_new(); /* the metadata outlives the kernels using it (cl_retire.c) */
    if (!grave) {
        free(meta.v);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    cl_int err = CL_SUCCESS;
    cl_mem mbuf = rq_cl_paged_meta_upload(ctx, &meta, &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        free(grave);
        free(meta.v);
        return st;
    }
    if (!queue)
        queue = rq_cl(ctx)->queue;
    const ropeqk_tensor *q = &pl->q, *o = &pl->out, *ls = &pl->lse;
    rq_cl_paged_launch L = {
        .fn = fn, .meta = mbuf, .lens_off = meta.lens_off, .qpos_off = meta.qpos_off, .kpos_off = meta.kpos_off,
        .pages_off = meta.pages_off, .n = n, .max_pages = meta.max_pages, .page_size = pl->paged.page_size,
        .rg_off = meta.groups_off, .ngroups = meta.ngroups, .group_rows = meta.group_rows,
        .nbat = n,
        /* Q: the query rows are the rows of one batch of Hq heads; positions from the metadata */
        .ra = {
            .src_off = (rq_i64)args->q.offset, .nb0 = 0, .nb1 = q->nb[1], .nb2 = q->nb[0], .nb3 = q->nb[3],
            .pos_off = meta.qpos_off, .d_bh = pb->D, .d_row = pb->Hq * pb->D, .d_dim = 1, .H = (rq_i32)pb->Hq,
            .BH = (rq_i32)pb->Hq, .S = (rq_i32)n, .D = (rq_i32)pb->D, .R = (rq_i32)pb->R, .layout = pb->layout,
            .use_pos = 1, .pos_base = 0, .G = 1, .rot_mul = (float)pb->attn, .out_mul = (float)pb->scale,
            .pos_stride = 0, .rot_off = (rq_i32)pb->rot_off, /* one stream: the core refuses M-RoPE here */
        },
        .q = args->q, .qpos = mbuf, .k = args->k_cache, .v = args->v_cache, .out = args->out, .lse = args->lse,
        .knb = {k->nb[0], k->nb[1], k->nb[2]}, .vnb = {v->nb[0], v->nb[1], v->nb[2]},
        .onb = {o->nb[0], o->nb[1], 0, o->nb[3]}, .lnb = {ls->nb[0], ls->nb[1], 0},
        .ks = args->k_scale, .vs = args->v_scale, .fast = fast,
    };
    cl_event ran = NULL, chained = NULL; /* the combine's event; the chunks' last command after it */
    if (nchunks == batch->n_seqs) { /* every row is a chunk's: no decode kernels, no placeholder rows */
        cl_int merr = clEnqueueMarkerWithWaitList(queue, num_wait, wait, &ran);
        st = merr ? rq_cl_fail(ctx, merr) : ROPEQK_SUCCESS;
    } else if (nchunks > 0)
        st = decode_runs(pl, queue, &L, &meta, batch, num_wait, wait, &ran);
    else
        st = rq_cl_paged_run(pl, queue, &L, cp->kx[0], cp->kx[1], cp->kx[2], num_wait, wait, &ran);
    if (!st && nchunks > 0)
        st = rq_cl_paged_chunks_enqueue(pl, queue, args, batch, &meta, mbuf, ran, &chained);
    if (chained) {
        clReleaseEvent(ran);
        ran = chained;
    }
    rq_cl_bury_mem(ctx, grave, mbuf, ran ? 1 : 0, &ran); /* once the kernels using it have completed */
    if (!st && event) {
        *event = ran;
        ran = NULL;
    }
    if (ran)
        clReleaseEvent(ran);
    free(meta.v);
    return st;
}

/* ---- append ------------------------------------------------------------------------------------ */

static ropeqk_status paged_append(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_tensor *k_new,
                                  ropeqk_opencl_mem k_new_mem, const ropeqk_tensor *v_new, ropeqk_opencl_mem v_new_mem,
                                  const ropeqk_opencl_paged_cache *cache, const ropeqk_paged_batch *batch,
                                  cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    const char *fn = "ropeqk_opencl_paged_append";
    ropeqk_status st = plan_is_cl(pl, fn);
    if (st)
        return st;
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_cl_plan *cp = rq_clp(pl);
    const ropeqk_opencl_mem k_cache = cache->k_cache, v_cache = cache->v_cache;
    const ropeqk_opencl_mem in[6] = {k_new_mem, v_new_mem, k_cache, v_cache, cache->k_scale, cache->v_scale};
    rq_mem mm[6];
    if ((st = mems(ctx, in, mm, 6)))
        return st;
    rq_append_mems am = {mm[0], mm[1], mm[2], mm[3], mm[4], mm[5]};
    rq_paged_meta meta;
    if ((st = rq_append_call_check(pl, k_new, v_new, &am, batch, fn, &meta)))
        return st;
    const int64_t n = batch->n_seqs, n_new = k_new->ne[2];
    cl_int err = CL_SUCCESS;
    rq_grave *grave = rq_cl_grave_new(); /* the metadata outlives the kernels using it (cl_retire.c) */
    if (!grave) {
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    cl_mem mbuf = rq_cl_paged_meta_upload(ctx, &meta, &err);
    if (err) {
        free(grave);
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    if (!queue)
        queue = rq_cl(ctx)->queue;
    const ropeqk_tensor *src[2] = {k_new, v_new}, *dst[2] = {&pl->k, &pl->v};
    const ropeqk_opencl_mem smem[2] = {k_new_mem, v_new_mem}, dmem[2] = {k_cache, v_cache};
    const ropeqk_opencl_mem qmem[2] = {cache->k_scale, cache->v_scale};
    cl_event ev[2] = {NULL, NULL};
    pthread_mutex_lock(&cp->lock);
    for (int i = 0; i < 2 && !err; i++) {
        if (rq_dtype_q8(dst[i]->dtype)) { /* quantized: a work-item per row (cl/quant.cl) */
            int64_t rows = n * pb->Hkv * n_new;
            rq_pappq_args qa = {
                .src_off = (rq_i64)smem[i].offset, .snb0 = src[i]->nb[0], .snb1 = src[i]->nb[1],
                .snb2 = src[i]->nb[2], .dst_off = (rq_i64)dmem[i].offset, .dnb0 = dst[i]->nb[0],
                .dnb1 = dst[i]->nb[1], .dnb2 = dst[i]->nb[2], .scale_off = (rq_i64)(qmem[i].offset / sizeof(float)),
                .Hkv = (rq_i32)pb->Hkv, .n_new = (rq_i32)n_new, .ps = (rq_i32)pl->paged.page_size,
                .dim = (rq_i32)src[i]->ne[3], .lens_off = meta.lens_off, .pages_off = meta.pages_off,
                .rows = (rq_i32)rows, .sdt = (rq_i32)src[i]->dtype, .qdt = (rq_i32)dst[i]->dtype,
            };
            RQ_SET_ARG(cp->kx[4], RQ_PQ_SRC, smem[i].buf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_META, mbuf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_DST, dmem[i].buf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_SCALE, qmem[i].buf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_A, qa);
            size_t g = rq_round_up((size_t)rows, RQ_PCWG), l = RQ_PCWG;
            if (!err)
                err = clEnqueueNDRangeKernel(queue, cp->kx[4], 1, NULL, &g, &l, num_wait, wait, &ev[i]);
            continue;
        }
        int64_t units = src[i]->ne[3] * (int64_t)ropeqk_dtype_size(src[i]->dtype) / 2;
        rq_papp_args a = {
            .src_off = (rq_i64)smem[i].offset, .snb0 = src[i]->nb[0], .snb1 = src[i]->nb[1], .snb2 = src[i]->nb[2],
            .dst_off = (rq_i64)dmem[i].offset, .dnb0 = dst[i]->nb[0], .dnb1 = dst[i]->nb[1], .dnb2 = dst[i]->nb[2],
            .Hkv = (rq_i32)pb->Hkv, .n_new = (rq_i32)n_new, .ps = (rq_i32)pl->paged.page_size,
            .units = (rq_i32)units, .lens_off = meta.lens_off, .pages_off = meta.pages_off,
        };
        RQ_SET_ARG(cp->kx[3], RQ_PA_SRC, smem[i].buf);
        RQ_SET_ARG(cp->kx[3], RQ_PA_META, mbuf);
        RQ_SET_ARG(cp->kx[3], RQ_PA_DST, dmem[i].buf);
        RQ_SET_ARG(cp->kx[3], RQ_PA_A, a);
        size_t g[3] = {rq_round_up((size_t)units, RQ_PCWG), (size_t)n_new, (size_t)(n * pb->Hkv)}, l[3] = {RQ_PCWG, 1, 1};
        if (!err)
            err = clEnqueueNDRangeKernel(queue, cp->kx[3], 3, NULL, g, l, num_wait, wait, &ev[i]);
    }
    pthread_mutex_unlock(&cp->lock);
    if (!err && event)
        err = clEnqueueMarkerWithWaitList(queue, 2, ev, event);
    if (err)
        st = rq_cl_fail(ctx, err);
    cl_uint nev = ev[0] ? (ev[1] ? 2 : 1) : 0; /* ev[1] is set only after ev[0] */
    rq_cl_bury_mem(ctx, grave, mbuf, nev, ev); /* once the kernels using it have completed */
    for (int i = 0; i < 2; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
done:
    free(meta.v);
    return st;
}

/* The public entry points: the call's last event is recorded (also when the caller takes none), so
 * that the plan's kernels and buffers outlive its commands (cl_retire.c). */
ropeqk_status ropeqk_opencl_paged_enqueue(ropeqk_plan *pl, cl_command_queue queue,
                                          const ropeqk_opencl_paged_args *args, const ropeqk_paged_batch *batch,
                                          cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    if (event)
        *event = NULL;
    if (!pl || !args || !batch || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    cl_event own = NULL, *evp = event ? event : &own;
    ropeqk_status st = paged_enqueue(pl, queue, args, batch, num_wait, wait, evp);
    if (!st && rq_is_cl(pl->ctx))
        rq_cl_track(pl->ctx, *evp);
    if (own)
        clReleaseEvent(own);
    return st;
}

ropeqk_status ropeqk_opencl_paged_append(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_tensor *k_new,
                                         ropeqk_opencl_mem k_new_mem, const ropeqk_tensor *v_new,
                                         ropeqk_opencl_mem v_new_mem, const ropeqk_opencl_paged_cache *cache,
                                         const ropeqk_paged_batch *batch, cl_uint num_wait, const cl_event *wait,
                                         cl_event *event)
{
    if (event)
        *event = NULL;
    if (!pl || !k_new || !v_new || !cache || !batch || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    cl_event own = NULL, *evp = event ? event : &own;
    ropeqk_status st =
        paged_append(pl, queue, k_new, k_new_mem, v_new, v_new_mem, cache, batch, num_wait, wait, evp);
    if (!st && rq_is_cl(pl->ctx))
        rq_cl_track(pl->ctx, *evp);
    if (own)
        clReleaseEvent(own);
    return st;
}
