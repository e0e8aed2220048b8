/* Plans on a Vulkan context: pipelines, frequency table and scratch made at creation; recording
 * into the caller's command buffer (ropeqk_vulkan_plan_record) checks the buffers and records a
 * leading barrier and the dispatches. */
#include "vk.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    RQ_VK_ROT_PC(RQ_VK_FIELD)
} rot_pc;
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

/* 16-bit views are read and written as whole 32-bit words: the bytes from m.offset to the end of
 * the word holding the last element (the core's rq_view_bytes with this backend's access unit) */
size_t rq_vk_word_bytes(ropeqk_vulkan_mem m, size_t es, size_t extent)
{
    return (size_t)rq_view_bytes(&rq_vulkan_backend, m.offset, es, extent);
}

rq_mem rq_vk_mem(ropeqk_vulkan_mem m)
{
    rq_mem r = {(uintptr_t)m.buf, m.offset, m.offset + m.range};
    if (r.end < m.offset) /* a range past 2^64: as large as can be */
        r.end = UINT64_MAX;
    return r;
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
