/* The RoPE pass every Vulkan operation starts with: a plan's rotate pipelines, its frequency table
 * (and sink logits), its rotated Qr/Kr scratch, and the recording of Q's and K's rotations into that
 * scratch (rotate.comp). Scores (vk_plan.c), attention (vk_attn.c) and the tensor-core path (vk_cm.c)
 * record it; the paged decode uploads its tables here. Below every operation. */
#include "vk.h"

#include <stdlib.h>

typedef struct {
    RQ_VK_ROT_PC(RQ_VK_FIELD)
} rot_pc;

ropeqk_status rq_vk_rope_init(ropeqk_plan *pl, const float *vfreq4)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    int32_t wg = RQ_VK_ROT_UNITS;
    int32_t sq[RQ_VK_NSPEC] = {pl->q.dtype, 0, 0, wg}, sk[RQ_VK_NSPEC] = {pl->k.dtype, 0, 0, wg};
    ropeqk_status st;
    if ((st = rq_vk_pipe_get(ctx, RQ_VK_SH_ROTATE, sq, &vp->rot_q)) ||
        (st = rq_vk_pipe_get(ctx, RQ_VK_SH_ROTATE, sk, &vp->rot_k)))
        return st;
    /* scratch: rotated f32 rows, sized for the descriptors (max_keys keys for a decode plan) */
    uint64_t qn = (uint64_t)(pb->B * pb->Hq * pb->Sq * pb->D), kn = (uint64_t)(pb->B * pb->Hkv * pb->Sk * pb->D);
    uint64_t lim = rq_vk(ctx)->props.limits.maxStorageBufferRange;
    if (qn * 4 > lim || kn * 4 > lim) {
        rq_set_error("ropeqk_plan_create: rotated scratch of %llu bytes exceeds this Vulkan device's storage-buffer "
                     "range limit (%llu bytes)", (unsigned long long)((qn > kn ? qn : kn) * 4),
                     (unsigned long long)lim);
        return ROPEQK_ERR_TOO_LARGE;
    }
    if ((st = rq_vk_tables_upload(pl, vfreq4)) || (st = rq_vk_buf_create(ctx, qn * 4, false, 0, &vp->qr)) ||
        (st = rq_vk_buf_create(ctx, kn * 4, false, 0, &vp->kr)))
        return st;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_tables_upload(ropeqk_plan *pl, const float *vfreq4)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    size_t nf = (size_t)(pb->R / 2);
    float *t = malloc(nf * 4 * sizeof *t);
    if (!t)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (size_t u = 0; u < nf; u++) { /* the core's (hi, mid, lo, 0), the 4th lane the stream */
        t[4 * u + 0] = vfreq4[4 * u + 0];
        t[4 * u + 1] = vfreq4[4 * u + 1];
        t[4 * u + 2] = vfreq4[4 * u + 2];
        t[4 * u + 3] = (float)rq_mrope_stream(pb, (int64_t)u);
    }
    ropeqk_status st = rq_vk_buf_upload(pl->ctx, t, (VkDeviceSize)nf * 16, &vp->freq);
    free(t);
    if (!st && pl->sinks) /* the plan's own copy (plan.c): Hq logits */
        st = rq_vk_buf_upload(pl->ctx, pl->sinks, (VkDeviceSize)pb->Hq * 4, &vp->sinks);
    return st;
}

/* Rows [0, S) of view t in m rotated into dst (f32 [BH][S][D], times out_mul). */
static ropeqk_status record_rotate(ropeqk_plan *pl, VkCommandBuffer cmd, rq_vk_pipe *pipe, const ropeqk_tensor *t,
                                   ropeqk_vulkan_mem m, size_t extent, ropeqk_vulkan_mem pos, int64_t S,
                                   int64_t off, float out_mul, const rq_vk_buf *dst)
{
    const rq_problem *pb = &pl->pb;
    uint32_t es = (uint32_t)ropeqk_dtype_size(t->dtype);
    rq_vk_bind b[5] = {
        {m.buf, m.offset, extent, es},
        {pos.buf, pos.offset, (VkDeviceSize)(rq_pos_streams(pb) * S) * 4, 4}, /* [3][S] under M-RoPE */
        {rq_vkp(pl)->freq.buf, 0, rq_vkp(pl)->freq.size, 16},
        {dst->buf, 0, dst->size, 4},
        {VK_NULL_HANDLE, 0, 0, 4}, /* no positions out (the dense decode's: vk_dense.c) */
    };
    /* 16-bit views are read a 32-bit word at a time: round the bound bytes up to whole words */
    if (es == 2)
        b[0].bytes = (b[0].offset % 4 + extent + 3) / 4 * 4 - b[0].offset % 4;
    uint32_t eo[5];
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, 5, eo);
    if (st || !cmd)
        return st;
    rot_pc pc = {
        .src_off = eo[0], .nb0 = (uint32_t)(t->nb[0] / es), .nb1 = (uint32_t)(t->nb[1] / es),
        .nb2 = (uint32_t)(t->nb[2] / es), .pos_off = eo[1], .dst_off = 0, .H = (int32_t)t->ne[1],
        .BH = (int32_t)(t->ne[0] * t->ne[1]), .S = (int32_t)S, .D = (int32_t)pb->D, .R = (int32_t)pb->R,
        .lay = pb->layout, .use_pos = pos.buf != VK_NULL_HANDLE, .pos_base = (int32_t)off,
        .rot_mul = (float)pb->attn, .out_mul = out_mul, .rot_off = (int32_t)pb->rot_off,
        .d_b = (uint32_t)(t->ne[1] * S * pb->D), .d_h = (uint32_t)(S * pb->D), .d_row = (uint32_t)pb->D, .pd_nbat = 0,
    };
    uint32_t units = (uint32_t)(pb->R / 2 + (pb->D - pb->R));
    uint32_t gy = S < 65535 ? (uint32_t)S : 65535u; /* the shader strides over rows past the grid */
    rq_vk_dispatch(pl->ctx, cmd, pipe, b, 5, &pc, sizeof pc, (units + RQ_VK_ROT_UNITS - 1) / RQ_VK_ROT_UNITS, gy, 1);
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_record_rope(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sq,
                                int64_t Sk, int64_t q_off, int64_t k_off)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    ropeqk_tensor kt = pl->k, qt = pl->q;
    kt.ne[2] = Sk;
    qt.ne[2] = Sq;
    /* everything earlier in the queue (the caller's writes of Q, K, positions; earlier runs of this
     * plan reading its scratch) before the shaders */
    if (cmd)
        rq_vk_barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_MEMORY_READ_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    ropeqk_status st = record_rotate(pl, cmd, vp->rot_q, &pl->q, a->q, ropeqk_tensor_extent(&qt), a->q_pos, Sq, q_off,
                                     (float)pb->scale, &vp->qr);
    if (!st)
        st = record_rotate(pl, cmd, vp->rot_k, &pl->k, a->k, ropeqk_tensor_extent(&kt), a->k_pos, Sk, k_off, 1.0f,
                           &vp->kr);
    if (st || !cmd)
        return st;
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    return ROPEQK_SUCCESS;
}
