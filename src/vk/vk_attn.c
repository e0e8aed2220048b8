/* Fused attention (ROPEQK_OP_ATTENTION) on Vulkan: the plan's attention pipeline, and the recording
 * (the shared RoPE pass of vk_plan.c into the Qr/Kr scratch, then attention.comp reading V from the
 * caller's buffer; S is never written). The buffers were checked by ropeqk_vulkan_plan_record. */
#include "vk.h"

typedef struct {
    RQ_VK_AT_PC(RQ_VK_FIELD)
} at_pc;

void rq_vk_attn_spec(int64_t Dv, int32_t v_dtype, int32_t o_dtype, int32_t spec[4])
{
    /* one pipeline per 16 accumulators: registers sized for this Dv, not for the largest */
    int32_t dvmax = (int32_t)((Dv + RQ_VK_AT_DVQ - 1) / RQ_VK_AT_DVQ * RQ_VK_AT_DVQ);
    spec[RQ_VK_SC_DVMAX] = dvmax;
    spec[RQ_VK_SC_DT_B] = v_dtype;
    spec[RQ_VK_SC_DT_O] = o_dtype;
    spec[RQ_VK_SC_WG] = RQ_VK_AT_ROWS;
}

ropeqk_status rq_vk_attn_plan_init(ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    if (pb->Dv > RQ_VK_AT_DVMAX) {
        rq_set_error("attention: Dv %lld exceeds %d, the Vulkan shader's accumulator size", (long long)pb->Dv,
                     RQ_VK_AT_DVMAX);
        return ROPEQK_ERR_TOO_LARGE;
    }
    /* rows m = g*Sq + i of one KV head, and Qr/Kr element indices, are 32-bit in the shader (the
     * scratch itself is checked against the storage-buffer range by rq_vk_rope_init) */
    if (pb->G * pb->Sq > INT32_MAX) {
        rq_set_error("attention: G * Sq = %lld query rows per KV head exceed 2^31", (long long)(pb->G * pb->Sq));
        return ROPEQK_ERR_TOO_LARGE;
    }
    const VkPhysicalDeviceLimits *lim = &pl->ctx->vk->props.limits;
    int64_t gx = (pb->G * pb->Sq + RQ_VK_AT_ROWS - 1) / RQ_VK_AT_ROWS, gy = pb->B * pb->Hkv;
    if (gx > lim->maxComputeWorkGroupCount[0] || gy > lim->maxComputeWorkGroupCount[1]) {
        rq_set_error("attention: a grid of %lld x %lld work-groups exceeds this Vulkan device's limits (%u x %u)",
                     (long long)gx, (long long)gy, lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1]);
        return ROPEQK_ERR_TOO_LARGE;
    }
    int32_t spec[4];
    rq_vk_attn_spec(pb->Dv, pl->v.dtype, pl->out.dtype, spec);
    return rq_vk_pipe_get(pl->ctx, RQ_VK_SH_ATTENTION, spec, &pl->vkp->main);
}

ropeqk_status rq_vk_record_attention(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sk,
                                     int64_t q_off, int64_t k_off)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = pl->vkp;
    ropeqk_tensor vt = pl->v;
    vt.ne[2] = Sk; /* a decode plan uses the first Sk keys of its V descriptor */
    uint32_t ves = (uint32_t)ropeqk_dtype_size(pl->v.dtype), oes = (uint32_t)ropeqk_dtype_size(pl->out.dtype);
    rq_vk_bind b[7] = {
        {vp->qr.buf, 0, vp->qr.size, 4},
        {vp->kr.buf, 0, vp->kr.size, 4},
        {a->v.buf, a->v.offset, rq_vk_word_bytes(a->v, ves, ropeqk_tensor_extent(&vt)), ves},
        {a->q_pos.buf, a->q_pos.offset, (VkDeviceSize)pb->Sq * 4, 4},
        {a->k_pos.buf, a->k_pos.offset, (VkDeviceSize)Sk * 4, 4},
        {a->out.buf, a->out.offset, rq_vk_word_bytes(a->out, oes, pb->o_extent), oes},
        {pl->with_lse ? a->lse.buf : VK_NULL_HANDLE, a->lse.offset, pb->lse_extent, 4},
    };
    uint32_t eo[7];
    /* every binding is checked before the first command is recorded */
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, 7, eo);
    if (!st)
        st = rq_vk_record_rope(pl, cmd, a, Sk, q_off, k_off);
    if (st)
        return st;
    /* W >= 2^32 masks nothing among int32 positions (their difference is below 2^32) */
    uint32_t window = pb->window > 0 && pb->window < ((int64_t)1 << 32) ? (uint32_t)pb->window : 0u;
    int64_t M = pb->G * pb->Sq;
    at_pc pc = {
        .v_off = eo[2], .vnb0 = (uint32_t)(pl->v.nb[0] / ves), .vnb1 = (uint32_t)(pl->v.nb[1] / ves),
        .vnb2 = (uint32_t)(pl->v.nb[2] / ves), .o_off = eo[5], .onb0 = (uint32_t)(pl->out.nb[0] / oes),
        .onb1 = (uint32_t)(pl->out.nb[1] / oes), .onb2 = (uint32_t)(pl->out.nb[2] / oes), .l_off = eo[6],
        .lnb0 = (uint32_t)(pl->lse.nb[0] / 4), .lnb1 = (uint32_t)(pl->lse.nb[1] / 4),
        .lnb2 = (uint32_t)(pl->lse.nb[2] / 4), .qpos_off = eo[3], .kpos_off = eo[4], .window = window,
        .M = (int32_t)M, .Sq = (int32_t)pb->Sq, .Sk = (int32_t)Sk, .D = (int32_t)pb->D, .Dv = (int32_t)pb->Dv,
        .G = (int32_t)pb->G, .Hkv = (int32_t)pb->Hkv, .use_qpos = a->q_pos.buf != VK_NULL_HANDLE,
        .q_base = (int32_t)q_off, .use_kpos = a->k_pos.buf != VK_NULL_HANDLE, .k_base = (int32_t)k_off,
        .causal = pb->causal, .with_lse = pl->with_lse,
    };
    uint32_t gx = (uint32_t)((M + RQ_VK_AT_ROWS - 1) / RQ_VK_AT_ROWS);
    rq_vk_dispatch(pl->ctx, cmd, vp->main, b, 7, &pc, sizeof pc, gx, (uint32_t)(pb->B * pb->Hkv), 1);
    return ROPEQK_SUCCESS;
}
