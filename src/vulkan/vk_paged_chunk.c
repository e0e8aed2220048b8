/* Prefill chunks over the paged cache on Vulkan (src/opencl/cl_paged_chunk.c's design): a sequence with
 * rq_paged_chunk_rows (the context's chunk_rows) query rows or more in a ragged batch does not go through paged.comp row by
 * row, each row reading and rotating every key again; its K and V are gathered from the pages into
 * dense scratch (paged_gather.comp) and its rows run through attention.comp as the plan's companion
 * attention plan (plan->chunk, src/core/plan.c) records it, which rotates the keys once and tiles
 * the rows.
 *
 * Order in the command buffer: the decode's commands (its metadata giving the chunk rows one key:
 * placeholders, rq_paged_chunk_mark), then per chunk a barrier (the previous chunk's shaders have
 * read the gather scratch), the two gathers, and the companion's recording, whose leading barrier
 * (every earlier write visible to later compute) orders its writes of the chunk's out and lse rows
 * after the combine's placeholder writes and makes the gathered rows visible.
 *
 * The gather scratch belongs to the plan: made at the first recording that has a chunk, for the
 * plan's capacity (max_pages_per_seq * page_size tokens, in the companion's dtypes: the caches', f32
 * for an 8-bit cache, 4x its bytes), and never resized
 * (an earlier recording may still be pending when the next one is made: the record API's rule is
 * only that one plan's commands execute in one queue's order). */
#include "vk_pg.h"

#include <stdlib.h>

typedef struct {
    RQ_VK_GA_PC(RQ_VK_FIELD)
} ga_pc;

/* Whether the plan's gather scratch exists (made now if needed). *ok false: none can be made within
 * the device's range limit, and the chunks stay on paged.comp (never reached in practice: the
 * companion's own f32 scratch for the same keys is larger, and the core makes no companion whose
 * scratch the device refuses). */
static ropeqk_status scratch_ready(ropeqk_plan *pl, bool *ok)
{
    ropeqk_ctx *ctx = pl->ctx;
    struct rq_vk_paged *pg = rq_vkp(pl)->pg;
    uint64_t range = rq_vk(ctx)->props.limits.maxStorageBufferRange;
    uint64_t kb = (ropeqk_tensor_extent(&pl->chunk->k) + 3) / 4 * 4, vb = (ropeqk_tensor_extent(&pl->chunk->v) + 3) / 4 * 4;
    *ok = kb <= range && vb <= range && pg->gather[0] && pg->gather[1];
    if (!*ok)
        return ROPEQK_SUCCESS;
    ropeqk_status st = ROPEQK_SUCCESS;
    pthread_mutex_lock(&ctx->lock); /* two threads recording the plan's first chunks make one scratch */
    if (!pg->gk.buf && (st = rq_vk_buf_create(ctx, kb, false, 0, &pg->gk)) == ROPEQK_SUCCESS &&
        (st = rq_vk_buf_create(ctx, vb, false, 0, &pg->gv)) != ROPEQK_SUCCESS)
        rq_vk_buf_free(ctx, &pg->gk); /* both or neither */
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* The gather of K or V (cache view c in m, an 8-bit cache's scales in sm; companion view d over the
 * scratch) of the sequence whose first query row is r0: bindings and push constants. A 16/32-bit
 * cache is copied in units (words, or halves where a view is not word-aligned); an 8-bit cache is
 * read by the byte and written as f32 values, a word per value. */
static ropeqk_status gather_of(ropeqk_plan *pl, const ropeqk_tensor *c, ropeqk_vulkan_mem m, ropeqk_vulkan_mem sm,
                               size_t extent, const ropeqk_tensor *d, const rq_vk_buf *dst, const rq_paged_meta *meta,
                               int64_t r0, int64_t len, rq_vk_bind b[4], ga_pc *pc)
{
    size_t es = ropeqk_dtype_size(c->dtype);
    bool q8 = rq_dtype_q8(c->dtype);
    int64_t row = c->ne[3] * (int64_t)es;
    bool words = row % 4 == 0 && m.offset % 4 == 0;
    for (int i = 0; i < 3; i++)
        words = words && c->nb[i] % 4 == 0;
    uint32_t ub = q8 ? 1 : words ? 4 : 2, db = q8 ? 4 : ub; /* source and destination units, bytes */
    size_t sbytes = (size_t)(pl->k.ne[0] * pl->pb.Hkv * pl->paged.page_size) * 4;
    b[0] = (rq_vk_bind){m.buf, m.offset, rq_vkpg_bytes(m.offset, es, extent), ub};
    b[1] = (rq_vk_bind){rq_vkp(pl)->pg->meta.buf, 0, (VkDeviceSize)meta->n * 4, 4};
    b[2] = (rq_vk_bind){dst->buf, 0, dst->size, db};
    b[3] = (rq_vk_bind){q8 ? sm.buf : VK_NULL_HANDLE, sm.offset, sbytes, 4}; /* NULL: the dummy */
    uint32_t e[4];
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, 4, e);
    if (st)
        return st;
    *pc = (ga_pc){
        .src_off = e[0], .snb0 = (uint32_t)(c->nb[0] / ub), .snb1 = (uint32_t)(c->nb[1] / ub),
        .snb2 = (uint32_t)(c->nb[2] / ub), .dnb1 = (uint32_t)(d->nb[1] / db), .dnb2 = (uint32_t)(d->nb[2] / db),
        .len = (int32_t)len, .Hkv = (int32_t)c->ne[1], .ps = (int32_t)pl->paged.page_size,
        .units = (int32_t)(q8 ? c->ne[3] : row / ub), .row = (int32_t)r0, .pages_off = (uint32_t)meta->pages_off,
        .words = words, .scale_off = e[3],
    };
    return ROPEQK_SUCCESS;
}

/* The companion's arguments for sequence s: its rows of q, out and lse (the companion's views start
 * at row 0), the gathered K and V, positions by offsets. */
static ropeqk_vulkan_args chunk_args(const ropeqk_plan *pl, const ropeqk_vulkan_paged_args *a, int64_t r0)
{
    const struct rq_vk_paged *pg = rq_vkp(pl)->pg;
    VkDeviceSize qo = (VkDeviceSize)(r0 * pl->q.nb[0]), oo = (VkDeviceSize)(r0 * pl->out.nb[0]);
    VkDeviceSize lo = pl->with_lse ? (VkDeviceSize)(r0 * pl->lse.nb[0]) : 0;
    return (ropeqk_vulkan_args){
        .q = {a->q.buf, a->q.offset + qo, a->q.range - qo},
        .k = {pg->gk.buf, 0, pg->gk.size},
        .v = {pg->gv.buf, 0, pg->gv.size},
        .out = {a->out.buf, a->out.offset + oo, a->out.range - oo},
        .lse = {pl->with_lse ? a->lse.buf : VK_NULL_HANDLE, a->lse.offset + lo, pl->with_lse ? a->lse.range - lo : 0},
    };
}

ropeqk_status rq_vkpg_chunks_mark(ropeqk_plan *pl, const ropeqk_vulkan_paged_args *args, const ropeqk_paged_batch *b,
                                  rq_paged_meta *meta, int64_t *n)
{
    *n = 0;
    if (!pl->chunk || !b->q_indptr)
        return ROPEQK_SUCCESS;
    bool any = false, ok;
    for (int64_t s = 0; s < b->n_seqs && !any; s++)
        any = rq_paged_seq_rows(b, s) >= rq_paged_chunk_rows(pl);
    ropeqk_status st = any ? scratch_ready(pl, &ok) : ROPEQK_SUCCESS;
    if (!any || st || !ok)
        return st;
    /* everything the recording of the chunks could refuse, checked before anything is recorded */
    for (int64_t s = 0; s < b->n_seqs; s++) {
        int64_t ql = rq_paged_seq_rows(b, s), r0 = b->q_indptr[s], len = b->seq_lens[s];
        if (ql < rq_paged_chunk_rows(pl))
            continue;
        rq_vk_bind gb[4];
        ga_pc pc;
        ropeqk_vulkan_args a = chunk_args(pl, args, r0);
        if ((st = gather_of(pl, &pl->k, args->k_cache, args->k_scale, pl->pb.k_extent, &pl->chunk->k,
                            &rq_vkp(pl)->pg->gk, meta, r0, len, gb, &pc)) ||
            (st = gather_of(pl, &pl->v, args->v_cache, args->v_scale, pl->pb.v_extent, &pl->chunk->v,
                            &rq_vkp(pl)->pg->gv, meta, r0, len, gb, &pc)) ||
            (st = rq_vk_record_attention(pl->chunk, VK_NULL_HANDLE, &a, ql, len, b->q_pos[s],
                                         b->k_pos0 ? b->k_pos0[s] : 0)))
            return st;
    }
    *n = rq_paged_chunk_mark(pl, b, meta);
    return ROPEQK_SUCCESS;
}

void rq_vkpg_chunks_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_paged_args *args,
                           const ropeqk_paged_batch *b, const rq_paged_meta *meta)
{
    struct rq_vk_paged *pg = rq_vkp(pl)->pg;
    for (int64_t s = 0; s < b->n_seqs; s++) {
        int64_t ql = rq_paged_seq_rows(b, s), r0 = b->q_indptr[s], len = b->seq_lens[s];
        if (ql < rq_paged_chunk_rows(pl))
            continue;
        rq_vk_bind bk[4], bv[4];
        ga_pc pk, pv;
        /* checked by rq_vkpg_chunks_mark: these succeed */
        (void)gather_of(pl, &pl->k, args->k_cache, args->k_scale, pl->pb.k_extent, &pl->chunk->k, &pg->gk, meta, r0,
                        len, bk, &pk);
        (void)gather_of(pl, &pl->v, args->v_cache, args->v_scale, pl->pb.v_extent, &pl->chunk->v, &pg->gv, meta, r0,
                        len, bv, &pv);
        /* the decode's shaders, and the previous chunk's, are done before the scratch is written again */
        rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        rq_vk_dispatch(pl->ctx, cmd, pg->gather[0], bk, 4, &pk, sizeof pk,
                       (uint32_t)((pk.units + RQ_VK_PA_WG - 1) / RQ_VK_PA_WG), rq_vkpg_grid(len),
                       rq_vkpg_grid(pl->pb.Hkv));
        rq_vk_dispatch(pl->ctx, cmd, pg->gather[1], bv, 4, &pv, sizeof pv,
                       (uint32_t)((pv.units + RQ_VK_PA_WG - 1) / RQ_VK_PA_WG), rq_vkpg_grid(len),
                       rq_vkpg_grid(pl->pb.Hkv));
        ropeqk_vulkan_args a = chunk_args(pl, args, r0);
        (void)rq_vk_record_attention(pl->chunk, cmd, &a, ql, len, b->q_pos[s], b->k_pos0 ? b->k_pos0[s] : 0);
    }
}
