/* Dense attention with few query rows (decode, a few draft tokens) on Vulkan without the K pre-pass:
 * the paged decode's shaders (rotate.comp for Q, paged.comp's pass 1 split over the keys,
 * paged_combine.comp) run on the caller's dense K and V and rotate each key as they read it. The old
 * path (vk_plan.c, vk_attn.c) rotates all of K into f32 scratch first and then runs attention.comp,
 * whose work-groups cover query rows: one query row leaves most of a device idle, where the paged
 * decode splits the keys over every core (lavapipe, 32k keys, Hq 32, Hkv 8, D 128, f16, one row:
 * 1.42 s against 0.59 s; `ropeqk-bench --vulkan --dense-decode`). But each row of the decode reads
 * and rotates all of K again, so on lavapipe 4 rows already take longer than the old path, hence
 * a Vulkan CPU device's default limit of 2 rows (vk_tune.c). The OpenCL backend's src/opencl/cl_dense.c
 * is the model; both describe the dense K as pages and cut each row's page list by its masks in
 * src/core/dense_pages.c.
 *
 * Query row i of batch entry b is sequence s = i * B + b of the decode: rotate.comp's destination
 * strides (d_b = D, d_h = n D, d_row = B D) put row (b, h, i) of Q at Qr [h][s][D], the layout
 * paged.comp reads, and paged_combine.comp writes sequence s to out's row (s % B, s / B) (nbat = B).
 * A q position array lives in device memory: rotate.comp reads it for the angles and copies it into
 * the metadata's q positions (a copy per batch entry), for pass 1's masks; the caller's buffer needs
 * no transfer usage.
 *
 * Taken on the same calls as on OpenCL: attention plans without M-RoPE whose Sq is at most the
 * context's dense_rows (ROPEQK_DENSE_DECODE; src/core/tuning.c, vk_tune.c), calls without per-token key
 * positions (each key would need its own position, which the pages do not carry), views whose pages
 * can be numbered. The plan makes the decode's scratch at creation for its own capacity (B * Sq
 * sequences of up to Sk keys: the split scratch and the metadata buffer; Qr, the frequencies and the
 * sinks are the old path's, shared); where the device cannot run the decode shaders at this shape
 * (the loop budget, shared memory, the storage-buffer range) the old path serves every call. */
#include "vk_pg.h"
#include "../core/path_runs.h"

#include <stdlib.h>


ropeqk_status rq_vk_dense_init(ropeqk_plan *pl, const float *vfreq4)
{
    const rq_problem *pb = &pl->pb;
    if (pl->op != ROPEQK_OP_ATTENTION || pb->mrope || pb->Sq > pl->ctx->tune.dense_rows)
        return ROPEQK_SUCCESS;
    struct rq_vk_plan *vp = rq_vkp(pl);
    struct rq_vk_paged *pg = calloc(1, sizeof *pg);
    if (!pg)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    vp->pg = pg; /* freed by rq_vk_paged_free with the plan, whatever happens below */
    const int64_t P = RQ_DENSE_PAGE, n = pb->B * pb->Sq, maxp = (pb->Sk + P - 1) / P;
    /* the metadata: 4 n + 1 ints and every row's pages at most */
    ropeqk_status st =
        rq_vkpg_setup(pl, pg, P, maxp, n, 4 * n + 1 + n * maxp, vfreq4, "ropeqk_plan_create (dense decode, Vulkan)");
    if (st == ROPEQK_ERR_TOO_LARGE) { /* the decode shaders cannot run this shape: the old path serves */
        rq_vk_paged_free(pl);
        return ROPEQK_SUCCESS;
    }
    return st;
}

ropeqk_status rq_vk_dense_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sk,
                                 int64_t q_off, int64_t k_off, bool *taken)
{
    *taken = false;
    struct rq_vk_plan *vp = rq_vkp(pl);
    if (!vp->pg || a->k_pos.buf != VK_NULL_HANDLE)
        return ROPEQK_SUCCESS;
    const rq_problem *pb = &pl->pb;
    const ropeqk_tensor *q = &pl->q, *k = &pl->k, *v = &pl->v, *o = &pl->out, *ls = &pl->lse;
    const int64_t B = pb->B, n = B * pb->Sq;
    int64_t X, Y, ks, vs;
    if (!rq_dense_view_pages(pl, Sk, &X, &Y, &ks, &vs))
        return ROPEQK_SUCCESS;
    bool qarr = a->q_pos.buf != VK_NULL_HANDLE;
    size_t qes = ropeqk_dtype_size(q->dtype), kes = ropeqk_dtype_size(k->dtype);
    size_t ves = ropeqk_dtype_size(v->dtype), oes = ropeqk_dtype_size(o->dtype);
    const uint32_t knb[3] = {(uint32_t)(ks / (int64_t)kes), (uint32_t)(k->nb[1] / kes), (uint32_t)(k->nb[2] / kes)};
    const uint32_t vnb[3] = {(uint32_t)(vs / (int64_t)ves), (uint32_t)(v->nb[1] / ves), (uint32_t)(v->nb[2] / ves)};
    /* the fast pass 1 serves a batch entry's rows together: rows b * Sq + i sharing one page list
     * (src/core/dense_pages.c); not with a q position array (rotate.comp copies it into the metadata
     * in the other order) */
    int fast = 0;
    bool grouped = !qarr && rq_vkpf_call_ok(pl, a->k.offset, knb, a->v.offset, vnb);
    rq_paged_meta meta;
    ropeqk_status st = grouped ? rq_dense_meta_grouped(pl, Sk, q_off, k_off, qarr, X, Y, &meta)
                               : rq_dense_meta(pl, Sk, q_off, k_off, qarr, X, Y, &meta);
    if (!st && grouped && (st = rq_vkpf_groups(pl, &meta, &fast)))
        free(meta.v);
    if (st == ROPEQK_ERR_TOO_LARGE)
        return ROPEQK_SUCCESS;
    if (st)
        return st;
    if ((VkDeviceSize)meta.n * 4 > vp->pg->meta.size) { /* cannot happen (the plan's bound): the old path */
        free(meta.v);
        return ROPEQK_SUCCESS;
    }
    ropeqk_tensor kt = *k, vt = *v; /* a decode plan uses the first Sk keys of its K and V */
    kt.ne[2] = vt.ne[2] = Sk;
    ropeqk_vulkan_mem none = {0};
    rq_vkpg_launch L = {
        .q = a->q, .q_extent = ropeqk_tensor_extent(q),
        /* Q [B][Hq][Sq][D] -> Qr [h][i * B + b][D] */
        .rot = {
            .nb0 = (uint32_t)(q->nb[0] / qes), .nb1 = (uint32_t)(q->nb[1] / qes), .nb2 = (uint32_t)(q->nb[2] / qes),
            .pos_off = 0, .H = (int32_t)pb->Hq, .BH = (int32_t)(B * pb->Hq), .S = (int32_t)pb->Sq,
            .D = (int32_t)pb->D, .R = (int32_t)pb->R, .lay = pb->layout, .use_pos = qarr, .pos_base = (int32_t)q_off,
            .rot_mul = (float)pb->attn, .out_mul = (float)pb->scale, .rot_off = (int32_t)pb->rot_off,
            .d_b = (uint32_t)(grouped ? pb->Sq * pb->D : pb->D), .d_h = (uint32_t)(n * pb->D),
            .d_row = (uint32_t)(grouped ? pb->D : B * pb->D),
            .pd_nbat = qarr ? (int32_t)B : 0,
        },
        .pos = qarr ? a->q_pos : none, .pos_bytes = (VkDeviceSize)pb->Sq * 4,
        .k = a->k, .v = a->v, .k_scale = none, .v_scale = none,
        .k_extent = ropeqk_tensor_extent(&kt), .v_extent = ropeqk_tensor_extent(&vt),
        .knb = {knb[0], knb[1], knb[2]}, .vnb = {vnb[0], vnb[1], vnb[2]},
        .out = a->out, .lse = a->lse, .out_extent = ropeqk_tensor_extent(o),
        .lse_extent = pl->with_lse ? ropeqk_tensor_extent(ls) : 0,
        /* sequence s's out row: (s % nbat) onb[0] + (s / nbat) onb[2]; grouped: s = b * Sq + i */
        .onb = {(uint32_t)(o->nb[grouped ? 2 : 0] / oes), (uint32_t)(o->nb[1] / oes),
                (uint32_t)(o->nb[grouped ? 0 : 2] / oes), (uint32_t)(o->nb[3] / oes)},
        .lnb = {(uint32_t)(ls->nb[grouped ? 2 : 0] / 4), (uint32_t)(ls->nb[1] / 4), (uint32_t)(ls->nb[grouped ? 0 : 2] / 4)},
        .nbat = grouped ? pb->Sq : B, .page_size = RQ_DENSE_PAGE, .fast = fast,
    };
    st = rq_vkpg_record_run(pl, cmd, &L, &meta, "ropeqk_vulkan_plan_record (dense decode)");
    free(meta.v);
    if (st == ROPEQK_ERR_TOO_LARGE) /* a view past the device's range: nothing recorded, the old path */
        return ROPEQK_SUCCESS;
    if (!st) {
        *taken = true;
        rq_path_hit(RQ_PATH_DENSE_DECODE);
    }
    return st;
}
