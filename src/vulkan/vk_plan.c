/* Plans on a Vulkan context: pipelines, frequency table and scratch made at creation; recording
 * into the caller's command buffer (ropeqk_vulkan_plan_record) checks the buffers and records a
 * leading barrier and the dispatches. */
#include "vk.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    RQ_VK_SC_PC(RQ_VK_FIELD)
} sc_pc;

ropeqk_status rq_vk_plan_init(ropeqk_plan *pl, const float *vfreq4, const double *inv)
{
    (void)inv; /* the shaders form every angle from vfreq4 */
    if (pl->op == ROPEQK_OP_PAGED_DECODE)
        return rq_vk_paged_init(pl, vfreq4);
    if (pl->op != ROPEQK_OP_SCORES && pl->op != ROPEQK_OP_ATTENTION) {
        rq_set_error("ropeqk_plan_create: unknown operation on Vulkan");
        return ROPEQK_ERR_BAD_PARAM;
    }
    struct rq_vk_plan *vp = calloc(1, sizeof *vp);
    if (!vp)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    pl->impl = vp;
    ropeqk_status st;
    if (pl->op == ROPEQK_OP_ATTENTION) { /* checks Dv before any scratch is made */
        st = rq_vk_attn_plan_init(pl);
    } else {
        int32_t ss[RQ_VK_NSPEC] = {0, 0, 0, 256};
        vp->few = rq_vk_scores_few(&pl->pb);
        rq_vk_scores_shape(pl->ctx, pl->pb.D, &ss[RQ_VK_SC_K1], &ss[RQ_VK_SC_K2]);
        vp->tile = RQ_VK_SC_SIDE * ss[RQ_VK_SC_K1];
        st = rq_vk_pipe_get(pl->ctx, vp->few ? RQ_VK_SH_SCORES_FEW : RQ_VK_SH_SCORES, ss, &vp->main);
    }
    if (!st)
        st = rq_vk_rope_init(pl, vfreq4);
    if (!st) /* after the Qr, frequencies and sinks they share */
        st = rq_vk_dense_init(pl, vfreq4);
    return st ? st : rq_vk_cm_init(pl); /* the tensor-core path where the context takes it (vk_cm.c) */
}

/* Loop trips of one scores.comp invocation at head dim D, counted as the shader's loops are written
 * with none unrolled (a loop entered once with n trips counts n + 1): an upper bound of what
 * llvmpipe's silent limit counts (vk_attn.c). */
static int64_t scores_trips(int64_t D, int64_t T, int64_t TK)
{
    int64_t steps = (D + TK - 1) / TK, stage = (RQ_VK_SC_SIDE * T * TK + 255) / 256 + 1;
    int64_t inner = TK + 1 + TK * (3 * (T + 1) + T * (T + 2)), tail = T + 1 + T * (T + 1);
    return steps + 1 + steps * (stage + inner) + tail;
}

bool rq_vk_scores_fits(const ropeqk_ctx *ctx, int32_t T, int32_t TK, int64_t D)
{
    /* the device's shared memory and, on a CPU device (llvmpipe), no nearer the loop limit than the
     * default shape, which the suite passes with */
    int64_t lim = rq_vk(ctx)->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU
                      ? scores_trips(D, RQ_VK_SC_T_DEF, RQ_VK_SC_TK_DEF)
                      : INT64_MAX;
    if (lim < RQ_VK_AT_TRIPS)
        lim = RQ_VK_AT_TRIPS;
    return (uint64_t)RQ_VK_SC_SHARED(T, TK) <= rq_vk(ctx)->props.limits.maxComputeSharedMemorySize &&
           scores_trips(D, T, TK) <= lim;
}

void rq_vk_scores_shape(const ropeqk_ctx *ctx, int64_t D, int32_t *t, int32_t *tk)
{
    bool tuned = rq_vk_scores_fits(ctx, ctx->tune.vk_block, ctx->tune.vk_tk, D);
    *t = tuned ? ctx->tune.vk_block : RQ_VK_SC_T_DEF;
    *tk = tuned ? ctx->tune.vk_tk : RQ_VK_SC_TK_DEF;
}

void rq_vk_plan_free(ropeqk_plan *pl)
{
    struct rq_vk_plan *vp = rq_vkp(pl);
    if (!vp)
        return;
    rq_vk_paged_free(pl);
    rq_vk_cm_free(pl);
    rq_vk_buf_free(pl->ctx, &vp->freq);
    rq_vk_buf_free(pl->ctx, &vp->qr);
    rq_vk_buf_free(pl->ctx, &vp->kr);
    rq_vk_buf_free(pl->ctx, &vp->st);
    rq_vk_buf_free(pl->ctx, &vp->sinks);
    free(vp);
    pl->impl = NULL;
}

bool rq_vk_scores_few(const rq_problem *pb)
{
    return pb->G * pb->Sq <= RQ_VK_FEW_M && pb->D <= RQ_VK_FEW_DMAX;
}

ropeqk_status rq_vk_record_scores(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sk,
                                  int64_t q_off, int64_t k_off)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    if (vp->cm) /* the tensor-core path (vk_cm.c) */
        return rq_vk_cm_record(pl, cmd, a, pb->Sq, Sk, q_off, k_off);
    ropeqk_tensor ot = pl->out;
    ot.ne[3] = Sk;
    size_t o_ext = ropeqk_tensor_extent(&ot);
    ropeqk_status st = rq_vk_record_rope(pl, cmd, a, pb->Sq, Sk, q_off, k_off);
    if (st)
        return st;
    rq_vk_bind b[5] = {
        {vp->qr.buf, 0, vp->qr.size, 4},
        {vp->kr.buf, 0, vp->kr.size, 4},
        {a->q_pos.buf, a->q_pos.offset, (VkDeviceSize)pb->Sq * 4, 4},
        {a->k_pos.buf, a->k_pos.offset, (VkDeviceSize)Sk * 4, 4},
        {a->out.buf, a->out.offset, o_ext, 4},
    };
    uint32_t eo[5];
    if ((st = rq_vk_bind_offsets(pl->ctx, b, 5, eo)))
        return st;
    /* W >= 2^32 masks nothing among int32 positions (their difference is below 2^32) */
    uint32_t window = pb->window > 0 && pb->window < ((int64_t)1 << 32) ? (uint32_t)pb->window : 0u;
    /* positions only decide the masks here; under M-RoPE the masks follow token order (the offsets),
     * whatever the rotary positions the arrays gave rotate.comp */
    bool qpos = a->q_pos.buf != VK_NULL_HANDLE && !pb->mrope, kpos = a->k_pos.buf != VK_NULL_HANDLE && !pb->mrope;
    sc_pc pc = {
        .qpos_off = eo[2], .kpos_off = eo[3], .out_off = eo[4], .onb0 = (uint32_t)(pl->out.nb[0] / 4),
        .onb1 = (uint32_t)(pl->out.nb[1] / 4), .onb2 = (uint32_t)(pl->out.nb[2] / 4),
        .onb3 = (uint32_t)(pl->out.nb[3] / 4), .window = window, .Sq = (int32_t)pb->Sq, .Sk = (int32_t)Sk,
        .D = (int32_t)pb->D, .G = (int32_t)pb->G, .Hq = (int32_t)pb->Hq, .use_qpos = qpos, .q_base = (int32_t)q_off,
        .use_kpos = kpos, .k_base = (int32_t)k_off, .causal = pb->causal, .qr_off = 0, .kr_off = 0,
        .softcap = rq_vk_softcap(pb),
    };
    if (vp->few) { /* 64 keys per work-group, one (batch, KV head) per row of the grid */
        uint64_t gx = ((uint64_t)Sk + 63) / 64;
        rq_vk_dispatch(pl->ctx, cmd, vp->main, b, 5, &pc, sizeof pc, (uint32_t)(gx < 65535 ? gx : 65535),
                       (uint32_t)(pb->B * pb->Hkv), 1);
        return ROPEQK_SUCCESS;
    }
    uint32_t gx = (uint32_t)((Sk + vp->tile - 1) / vp->tile);
    uint32_t gy = (uint32_t)((pb->Sq + vp->tile - 1) / vp->tile);
    rq_vk_dispatch(pl->ctx, cmd, vp->main, b, 5, &pc, sizeof pc, gx, gy, (uint32_t)(pb->B * pb->Hq));
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_vulkan_plan_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *args,
                                        const ropeqk_step *step)
{
    const char *fn = "ropeqk_vulkan_plan_record";
    if (!pl || !args || !cmd)
        return ROPEQK_ERR_NULL_POINTER;
    if (!rq_is_vk(pl->ctx)) {
        rq_set_error("%s: the plan belongs to a %s context, not a Vulkan one", fn, pl->ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    rq_call_mems m = {rq_vk_mem(args->q),   rq_vk_mem(args->k), rq_vk_mem(args->q_pos), rq_vk_mem(args->k_pos),
                      rq_vk_mem(args->out), rq_vk_mem(args->v), rq_vk_mem(args->lse)};
    rq_extents x;
    ropeqk_status st = rq_call_check(pl, step, &m, fn, "ropeqk_vulkan_paged_record", &x);
    if (st)
        return st;
    if (pl->op == ROPEQK_OP_ATTENTION) {
        bool taken = false; /* few query rows: the paged decode's shaders where the call allows (vk_dense.c) */
        if ((st = rq_vk_dense_record(pl, cmd, args, x.Sk, x.q_off, x.k_off, &taken)) || taken)
            return st;
        return rq_vk_record_attention(pl, cmd, args, pl->pb.Sq, x.Sk, x.q_off, x.k_off);
    }
    return rq_vk_record_scores(pl, cmd, args, x.Sk, x.q_off, x.k_off);
}
