/* The paged cache's append on Vulkan (ropeqk_vulkan_paged_append): the batch checked by the core
 * (paged.c), the metadata recorded into the caller's command buffer, then paged_append.comp (a copy in
 * 32-bit words or 16-bit halves) or paged_append_q8.comp (quantizing into an 8-bit cache) for K and
 * for V (the plan check and the metadata's recording: vk_paged_run.c). */
#include "vk_pg.h"

#include <stdlib.h>

/* ---- append ------------------------------------------------------------------------------------ */

/* The copy of one tensor (k_new -> K cache or v_new -> V cache): whole words when every offset and
 * stride of both views and the row are word-aligned, else halves. */
static ropeqk_status append_one(ropeqk_plan *pl, const ropeqk_tensor *src, ropeqk_vulkan_mem sm, size_t sx,
                                const ropeqk_tensor *dst, ropeqk_vulkan_mem dm, size_t dx,
                                const rq_paged_meta *meta, int64_t n, rq_vk_bind b[3], app_pc *pc)
{
    const rq_problem *pb = &pl->pb;
    size_t es = ropeqk_dtype_size(src->dtype);
    int64_t row = src->ne[3] * (int64_t)es;
    bool words = row % 4 == 0 && sm.offset % 4 == 0 && dm.offset % 4 == 0;
    for (int i = 0; i < 3; i++)
        words = words && src->nb[i] % 4 == 0 && dst->nb[i] % 4 == 0;
    uint32_t ub = words ? 4 : 2;
    b[0] = (rq_vk_bind){sm.buf, sm.offset, rq_vkpg_bytes(sm.offset, es, sx), ub};
    b[1] = (rq_vk_bind){rq_vkp(pl)->pg->meta.buf, 0, (VkDeviceSize)meta->n * 4, 4};
    b[2] = (rq_vk_bind){dm.buf, dm.offset, rq_vkpg_bytes(dm.offset, es, dx), ub};
    uint32_t e[3];
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, 3, e);
    if (st)
        return st;
    *pc = (app_pc){
        .src_off = e[0], .snb0 = (uint32_t)(src->nb[0] / ub), .snb1 = (uint32_t)(src->nb[1] / ub),
        .snb2 = (uint32_t)(src->nb[2] / ub), .dst_off = e[2], .dnb0 = (uint32_t)(dst->nb[0] / ub),
        .dnb1 = (uint32_t)(dst->nb[1] / ub), .dnb2 = (uint32_t)(dst->nb[2] / ub), .rows = (int32_t)(n * pb->Hkv),
        .Hkv = (int32_t)pb->Hkv, .n_new = (int32_t)src->ne[2], .ps = (int32_t)pl->paged.page_size,
        .units = (int32_t)(row / ub), .lens_off = (uint32_t)meta->lens_off, .pages_off = (uint32_t)meta->pages_off,
        .words = words,
    };
    return ROPEQK_SUCCESS;
}

/* The quantizing append into an 8-bit cache (paged_append_q8.comp): a row per invocation, the cache
 * in bytes, the scales in floats. */
static ropeqk_status append_q8(ropeqk_plan *pl, const ropeqk_tensor *src, ropeqk_vulkan_mem sm, size_t sx,
                               const ropeqk_tensor *dst, ropeqk_vulkan_mem dm, size_t dx, ropeqk_vulkan_mem scm,
                               const rq_paged_meta *meta, int64_t n, rq_vk_bind b[4], q8_pc *pc)
{
    const rq_problem *pb = &pl->pb;
    size_t es = ropeqk_dtype_size(src->dtype);
    VkDeviceSize sbytes = (VkDeviceSize)(dst->ne[0] * pb->Hkv * pl->paged.page_size) * 4;
    b[0] = (rq_vk_bind){sm.buf, sm.offset, rq_vkpg_bytes(sm.offset, es, sx), (uint32_t)es};
    b[1] = (rq_vk_bind){rq_vkp(pl)->pg->meta.buf, 0, (VkDeviceSize)meta->n * 4, 4};
    b[2] = (rq_vk_bind){dm.buf, dm.offset, rq_vkpg_bytes(dm.offset, 1, dx), 1};
    b[3] = (rq_vk_bind){scm.buf, scm.offset, sbytes, 4};
    uint32_t e[4];
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, 4, e);
    if (st)
        return st;
    *pc = (q8_pc){
        .src_off = e[0], .snb0 = (uint32_t)(src->nb[0] / es), .snb1 = (uint32_t)(src->nb[1] / es),
        .snb2 = (uint32_t)(src->nb[2] / es), .dst_off = e[2], .dnb0 = (uint32_t)dst->nb[0],
        .dnb1 = (uint32_t)dst->nb[1], .dnb2 = (uint32_t)dst->nb[2], .scale_off = e[3],
        .rows = (int32_t)(n * pb->Hkv * src->ne[2]), .Hkv = (int32_t)pb->Hkv, .n_new = (int32_t)src->ne[2],
        .ps = (int32_t)pl->paged.page_size, .dim = (int32_t)src->ne[3], .lens_off = (uint32_t)meta->lens_off,
        .pages_off = (uint32_t)meta->pages_off, .sdt = src->dtype,
    };
    return ROPEQK_SUCCESS;
}

/* Records one tensor's append: the copy (units over x, tokens over y, rows over z) or, into an 8-bit
 * cache, the quantizer (rows over x and y, at most 65535 work-groups each). */
static void append_dispatch(ropeqk_plan *pl, VkCommandBuffer cmd, int i, const rq_vk_bind *b, const void *pcv)
{
    struct rq_vk_paged *pg = rq_vkp(pl)->pg;
    if (pg->append_q8[i]) {
        const q8_pc *pc = pcv;
        int64_t groups = ((int64_t)pc->rows + RQ_VK_PA_WG - 1) / RQ_VK_PA_WG, gx = groups < 65535 ? groups : 65535;
        rq_vk_dispatch(pl->ctx, cmd, pg->append_q8[i], b, 4, pc, sizeof *pc, (uint32_t)gx,
                       (uint32_t)((groups + gx - 1) / gx), 1);
    } else {
        const app_pc *pc = pcv;
        rq_vk_dispatch(pl->ctx, cmd, pg->append, b, 3, pc, sizeof *pc,
                       (uint32_t)((pc->units + RQ_VK_PA_WG - 1) / RQ_VK_PA_WG), rq_vkpg_grid(pc->n_new), rq_vkpg_grid(pc->rows));
    }
}

ropeqk_status ropeqk_vulkan_paged_append(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_tensor *k_new,
                                         ropeqk_vulkan_mem k_new_mem, const ropeqk_tensor *v_new,
                                         ropeqk_vulkan_mem v_new_mem, const ropeqk_vulkan_paged_cache *cache,
                                         const ropeqk_paged_batch *batch)
{
    const char *fn = "ropeqk_vulkan_paged_append";
    if (!pl || !cmd || !k_new || !v_new || !cache || !batch)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = rq_vkpg_plan_ok(pl, fn);
    if (st)
        return st;
    const rq_problem *pb = &pl->pb;
    const ropeqk_vulkan_mem k_cache = cache->k_cache, v_cache = cache->v_cache;
    rq_append_mems am = {rq_vk_mem(k_new_mem), rq_vk_mem(v_new_mem), rq_vk_mem(k_cache),
                         rq_vk_mem(v_cache),   rq_vk_mem(cache->k_scale), rq_vk_mem(cache->v_scale)};
    rq_paged_meta meta;
    if ((st = rq_append_call_check(pl, k_new, v_new, &am, batch, fn, &meta)))
        return st;
    const int64_t n = batch->n_seqs;
    size_t kx = ropeqk_tensor_extent(k_new), vx = ropeqk_tensor_extent(v_new); /* valid: checked */
    if ((st = rq_vkpg_meta_fits(pl, &meta, fn)))
        goto done;
    rq_vk_bind b[2][4];
    union {
        app_pc a;
        q8_pc q;
    } pc[2];
    const ropeqk_tensor *src[2] = {k_new, v_new}, *dst[2] = {&pl->k, &pl->v};
    const ropeqk_vulkan_mem sm[2] = {k_new_mem, v_new_mem}, dm[2] = {k_cache, v_cache};
    const ropeqk_vulkan_mem scm[2] = {cache->k_scale, cache->v_scale};
    const size_t sx[2] = {kx, vx}, dx[2] = {pb->k_extent, pb->v_extent};
    for (int i = 0; i < 2; i++)
        if ((st = rq_vkp(pl)->pg->append_q8[i]
                      ? append_q8(pl, src[i], sm[i], sx[i], dst[i], dm[i], dx[i], scm[i], &meta, n, b[i], &pc[i].q)
                      : append_one(pl, src[i], sm[i], sx[i], dst[i], dm[i], dx[i], &meta, n, b[i], &pc[i].a)))
            goto done;
    rq_vkpg_record_meta(pl, cmd, &meta);
    /* the two appends write disjoint ranges (the caches and the scales do not overlap, word-padded
     * on Vulkan): no barrier between them */
    append_dispatch(pl, cmd, 0, b[0], &pc[0]);
    append_dispatch(pl, cmd, 1, b[1], &pc[1]);
done:
    free(meta.v);
    return st;
}
