/* Paged decode (ROPEQK_OP_PAGED_DECODE) on Vulkan (the append: vk_paged_append.c; the run both this
 * and the dense decode record: vk_paged_run.c): the OpenCL path's semantics, checks and statuses
 * (paged.c validates the batch and packs the metadata for both backends), recorded into the caller's
 * command buffer; a ragged batch's long chunks through vk_paged_chunk.c.
 *
 * A recording is: the leading barrier; the packed batch written into the plan's metadata buffer with
 * vkCmdUpdateBuffer (the data lives in the command buffer, so nothing allocated per call outlives
 * the call); a transfer -> compute barrier; then rotate.comp (Q, the sequences as rows, positions
 * from the metadata), paged.comp (pass 1 per split), paged_combine.comp; or paged_append.comp (or
 * paged_append_q8.comp, an 8-bit cache) twice.
 * Everything that can fail is checked before the first command is recorded. */
#include "vk_pg.h"

#include <stdlib.h>

ropeqk_status rq_vk_paged_init(ropeqk_plan *pl, const float *vfreq4)
{
    const char *fn = "ropeqk_plan_create (paged decode, Vulkan)";
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = calloc(1, sizeof *vp);
    if (!vp)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    pl->impl = vp;
    struct rq_vk_paged *pg = calloc(1, sizeof *pg);
    if (!pg)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    vp->pg = pg;
    int64_t ps = pl->paged.page_size, maxp = pl->paged.max_pages_per_seq;
    int64_t max_seqs = pl->q.ne[0]; /* query rows, at most: the kernels' sequences (src/core/paged_rows.c) */
    /* the packed batch: 4 rows + 1 ints and the page lists (a sequence uses each page once) */
    int64_t num_pages = pl->k.ne[0], per_seq = maxp < num_pages ? maxp : num_pages;
    ropeqk_status st =
        rq_vkpg_setup(pl, pg, ps, maxp, max_seqs, 4 * max_seqs + 1 + pl->paged.max_seqs * per_seq, vfreq4, fn);
    if (st)
        return st;
    uint64_t range = rq_vk(ctx)->props.limits.maxStorageBufferRange;
    uint64_t qr_bytes = (uint64_t)(max_seqs * pb->Hq * pb->D) * 4;
    if (qr_bytes > range)
        return rq_vkpg_too_large(fn, "the rotated Q scratch", qr_bytes, range);
    int32_t sq[RQ_VK_NSPEC] = {pl->q.dtype, 0, 0, RQ_VK_ROT_UNITS}, sa[RQ_VK_NSPEC] = {0, 0, 0, RQ_VK_PA_WG};
    /* 8-bit caches: the quantizing append, a row per invocation (its loops within the budget) */
    const ropeqk_tensor *kv[2] = {&pl->k, &pl->v};
    for (int i = 0; i < 2; i++) {
        if (!rq_dtype_q8(kv[i]->dtype))
            continue;
        if (RQ_VK_PQ_TRIPS(kv[i]->ne[3]) > RQ_VK_AT_TRIPS) {
            rq_set_error("%s: the append's rows of %lld 8-bit values exceed the shader's loop budget (%d trips an "
                         "invocation)", fn, (long long)kv[i]->ne[3], RQ_VK_AT_TRIPS);
            return ROPEQK_ERR_TOO_LARGE;
        }
        int32_t s8[RQ_VK_NSPEC] = {0, kv[i]->dtype, 0, RQ_VK_PA_WG};
        if ((st = rq_vk_pipe_get(ctx, RQ_VK_SH_PAGED_APPEND_Q8, s8, &pg->append_q8[i])))
            return st;
    }
    /* prefill chunks (vk_paged_chunk.c): the gathers of K and V, an 8-bit cache's decoding its codes
     * (its dtype a specialization constant, 0 for a 16/32-bit cache's plain copy) */
    for (int i = 0; i < 2; i++) {
        int32_t sg[RQ_VK_NSPEC] = {0, rq_dtype_q8(kv[i]->dtype) ? kv[i]->dtype : 0, 0, RQ_VK_PA_WG};
        if ((st = rq_vk_pipe_get(ctx, RQ_VK_SH_PAGED_GATHER, sg, &pg->gather[i])))
            return st;
    }
    if ((st = rq_vk_pipe_get(ctx, RQ_VK_SH_ROTATE, sq, &vp->rot_q)) ||
        (st = rq_vk_pipe_get(ctx, RQ_VK_SH_PAGED_APPEND, sa, &pg->append)) ||
        (st = rq_vk_tables_upload(pl, vfreq4)) || /* the frequencies, and the sinks */
        (st = rq_vk_buf_create(ctx, qr_bytes, false, 0, &vp->qr)))
        return st;
    return ROPEQK_SUCCESS;
}

/* ---- decode ------------------------------------------------------------------------------------ */

ropeqk_status ropeqk_vulkan_paged_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_paged_args *args,
                                         const ropeqk_paged_batch *batch)
{
    const char *fn = "ropeqk_vulkan_paged_record";
    if (!pl || !cmd || !args || !batch)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = rq_vkpg_plan_ok(pl, fn);
    if (st)
        return st;
    const rq_problem *pb = &pl->pb;
    rq_paged_mems pm = {rq_vk_mem(args->q),   rq_vk_mem(args->k_cache), rq_vk_mem(args->v_cache),
                        rq_vk_mem(args->out), rq_vk_mem(args->lse),     rq_vk_mem(args->k_scale),
                        rq_vk_mem(args->v_scale)};
    rq_paged_meta meta;
    if ((st = rq_paged_call_check(pl, &pm, batch, fn, &meta)))
        return st;
    const int64_t n = meta.rows;
    size_t qes = ropeqk_dtype_size(pl->q.dtype), kes = ropeqk_dtype_size(pl->k.dtype);
    size_t ves = ropeqk_dtype_size(pl->v.dtype), oes = ropeqk_dtype_size(pl->out.dtype);
    int64_t nchunks = 0; /* long chunks of rows: through the companion attention plan (vk_paged_chunk.c) */
    if ((st = rq_vkpg_meta_fits(pl, &meta, fn)) || (st = rq_vkpg_chunks_mark(pl, args, batch, &meta, &nchunks)))
        goto done;
    const ropeqk_tensor *q = &pl->q, *k = &pl->k, *v = &pl->v, *o = &pl->out, *ls = &pl->lse;
    ropeqk_vulkan_mem none = {0};
    rq_vkpg_launch L = {
        .q = args->q, .q_extent = rq_rows_extent(&pl->q, n),
        /* Q: the sequences are the rows (stride nb[0]) of one batch of Hq heads; Qr [h][s][D]; the
         * positions from the metadata (bound as the position buffer) */
        .rot = {
            .nb0 = 0, .nb1 = (uint32_t)(q->nb[1] / qes), .nb2 = (uint32_t)(q->nb[0] / qes),
            .pos_off = (uint32_t)meta.qpos_off, .H = (int32_t)pb->Hq, .BH = (int32_t)pb->Hq, .S = (int32_t)n,
            .D = (int32_t)pb->D, .R = (int32_t)pb->R, .lay = pb->layout, .use_pos = 1, .pos_base = 0,
            .rot_mul = (float)pb->attn, .out_mul = (float)pb->scale, .rot_off = (int32_t)pb->rot_off, .d_b = 0,
            .d_h = (uint32_t)(n * pb->D), .d_row = (uint32_t)pb->D, .pd_nbat = 0,
        },
        .pos = {rq_vkp(pl)->pg->meta.buf, 0, VK_WHOLE_SIZE}, .pos_bytes = (VkDeviceSize)meta.n * 4,
        .k = args->k_cache, .v = args->v_cache, .k_extent = pb->k_extent, .v_extent = pb->v_extent,
        .knb = {(uint32_t)(k->nb[0] / kes), (uint32_t)(k->nb[1] / kes), (uint32_t)(k->nb[2] / kes)},
        .vnb = {(uint32_t)(v->nb[0] / ves), (uint32_t)(v->nb[1] / ves), (uint32_t)(v->nb[2] / ves)},
        /* the scale views of 8-bit caches (checked; VK_NULL_HANDLE otherwise: the dummy buffer) */
        .k_scale = rq_dtype_q8(pl->k.dtype) ? args->k_scale : none,
        .v_scale = rq_dtype_q8(pl->v.dtype) ? args->v_scale : none,
        .scale_bytes = (size_t)(pl->k.ne[0] * pb->Hkv * pl->paged.page_size) * 4,
        .out = args->out, .lse = args->lse, .out_extent = rq_rows_extent(&pl->out, n),
        .lse_extent = rq_rows_extent(&pl->lse, n),
        .onb = {(uint32_t)(o->nb[0] / oes), (uint32_t)(o->nb[1] / oes), 0, (uint32_t)(o->nb[3] / oes)},
        .lnb = {(uint32_t)(ls->nb[0] / 4), (uint32_t)(ls->nb[1] / 4), 0}, .nbat = n > 0 ? n : 1, /* s % nbat = s */
        .page_size = pl->paged.page_size,
    };
    /* the fast pass 1 where the caches' views allow it: its row groups appended to the metadata */
    if (rq_vkpf_call_ok(pl, args->k_cache.offset, L.knb, args->v_cache.offset, L.vnb) &&
        ((st = rq_vkpf_groups(pl, &meta, &L.fast)) || (st = rq_vkpg_meta_fits(pl, &meta, fn))))
        goto done;
    if ((st = rq_vkpg_record_run(pl, cmd, &L, &meta, fn)))
        goto done;
    if (nchunks > 0)
        rq_vkpg_chunks_record(pl, cmd, args, batch, &meta);
done:
    free(meta.v);
    return st;
}
