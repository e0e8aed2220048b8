/* Fused attention (ROPEQK_OP_ATTENTION) on Vulkan: the plan's attention pipeline, and the recording
 * (the shared RoPE pass of vk_plan.c into the Qr/Kr scratch, then attention.comp reading V from the
 * caller's buffer; S is never written). The buffers were checked by ropeqk_vulkan_plan_record. */
#include "vk.h"

#include <string.h>

typedef struct {
    RQ_VK_AT_PC(RQ_VK_FIELD)
} at_pc;

bool rq_vk_attn_rows_fit(const ropeqk_ctx *ctx, int32_t rows, int64_t Dv)
{
    /* the device's shared memory and work-group size */
    int64_t dvmax = (Dv + RQ_VK_AT_DVQ - 1) / RQ_VK_AT_DVQ * RQ_VK_AT_DVQ;
    const VkPhysicalDeviceLimits *lim = &rq_vk(ctx)->props.limits;
    return (uint64_t)RQ_VK_AT_SHARED(rows, dvmax) <= lim->maxComputeSharedMemorySize &&
           (uint32_t)rows <= lim->maxComputeWorkGroupSize[0] && (uint32_t)rows <= lim->maxComputeWorkGroupInvocations;
}

int32_t rq_vk_attn_rows(const ropeqk_ctx *ctx, int64_t Dv)
{
    return rq_vk_attn_rows_fit(ctx, ctx->tune.vk_rows, Dv) ? ctx->tune.vk_rows : RQ_VK_AT_ROWS_DEF;
}

void rq_vk_attn_spec(int64_t Dv, int32_t rows, int32_t v_dtype, int32_t o_dtype, int32_t spec[RQ_VK_NSPEC])
{
    /* one pipeline per 16 accumulators: registers sized for this Dv, not for the largest */
    int32_t dvmax = (int32_t)((Dv + RQ_VK_AT_DVQ - 1) / RQ_VK_AT_DVQ * RQ_VK_AT_DVQ);
    memset(spec, 0, RQ_VK_NSPEC * sizeof spec[0]);
    spec[RQ_VK_SC_DVMAX] = dvmax;
    spec[RQ_VK_SC_DT_B] = v_dtype;
    spec[RQ_VK_SC_DT_O] = o_dtype;
    spec[RQ_VK_SC_WG] = rows;
}

/* Loop trips of one attention.comp invocation, counted as that shader's loops are written with no
 * loop unrolled (a loop entered once with n trips counts n + 1), so an upper bound of what llvmpipe's
 * limiter counts whatever its compiler unrolls: per tile of TK keys, and per dispatch outside the
 * tiles (state load and store, output). Keep in step with glsl/attention.comp. */
static int64_t tile_trips(int64_t D, int64_t dvmax, int64_t R)
{
    const int64_t TK = RQ_VK_AT_TK(dvmax), TK4 = TK / 4, DV4 = dvmax / 4, DC = RQ_VK_AT_DC;
    int64_t nd = (D + DC - 1) / DC;
    int64_t t = 1;                                          /* the tile loop's own trip */
    t += TK;                                                /* key-position range for the skip test */
    t += TK4 + 1;                                           /* s = 0 */
    t += nd + 1 + nd * ((DC + 1) + (TK * DC / R + 1)        /* stage Q and K ... */
                        + (DC / 4 + 1) + DC / 4 * (TK4 + 1)); /* ... the scores, 4 dims per trip */
    t += TK * DV4 / R + 1 + TK * DV4 / R * 5;               /* stage V, 4 elements each */
    t += TK + 1;                                            /* tile max */
    t += TK4 + 1;                                           /* p */
    t += DV4 + 1;                                           /* o *= corr */
    t += TK + 1 + TK * (DV4 + 1);                           /* o += p V */
    return t;
}

static int64_t fixed_trips(int64_t dvmax)
{
    return (dvmax / 4 + 1) + dvmax / 4 * 5 /* state load */ + (dvmax + 1) /* state store or O */ + 1 /* tile loop exit */;
}

int64_t rq_vk_attn_chunk_keys(int64_t D, int64_t Dv, int64_t rows)
{
    /* llvmpipe stops every loop of an invocation after 65535 trips in all (LP_MAX_TGSI_LOOP_ITERATIONS)
     * and says nothing: a dispatch runs at most RQ_VK_AT_TRIPS (half of that) by this bound. E.g.
     * D 128, Dv 256: TK 16, 1632 trips a tile, 643 fixed: 19 tiles = 304 keys (432 chunks at Sk 131072);
     * D 128, Dv 128: TK 32, 1832 a tile: 17 tiles = 544 keys; D 256, Dv 256: 256 keys.
     * Measured on lavapipe (Mesa 22.3) with this shader and one chunk: D 128, Dv 256 goes wrong
     * between Sk 720 and 800, i.e. ~86 real trips a key where this bound counts 102 (llvmpipe unrolls
     * some loops); 304 keys are then ~27k real trips, 2.4x below the limit. */
    int64_t dvmax = (Dv + RQ_VK_AT_DVQ - 1) / RQ_VK_AT_DVQ * RQ_VK_AT_DVQ;
    int64_t tiles = (RQ_VK_AT_TRIPS - fixed_trips(dvmax)) / tile_trips(D, dvmax, rows);
    return (tiles < 1 ? 1 : tiles) * RQ_VK_AT_TK(dvmax);
}

ropeqk_status rq_vk_attn_plan_init(ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    if (pb->Dv > RQ_VK_AT_DVMAX) {
        rq_set_error("attention: Dv %lld exceeds %d, the Vulkan shader's accumulator size", (long long)pb->Dv,
                     RQ_VK_AT_DVMAX);
        return ROPEQK_ERR_TOO_LARGE;
    }
    /* one key tile must stay within the loop budget (llvmpipe's limit, above): head dims beyond that
     * would come out wrong without an error there (measured: D 32768 right, 49152 wrong) */
    int64_t dvq = (pb->Dv + RQ_VK_AT_DVQ - 1) / RQ_VK_AT_DVQ * RQ_VK_AT_DVQ;
    int32_t rows = rq_vk_attn_rows(pl->ctx, pb->Dv);
    rq_vkp(pl)->tile = rows;
    if (fixed_trips(dvq) + tile_trips(pb->D, dvq, rows) > RQ_VK_AT_TRIPS) {
        rq_set_error("attention: head dim D %lld is too large for the Vulkan shader's loop budget (one key tile "
                     "needs %lld loop trips, at most %d)", (long long)pb->D,
                     (long long)(fixed_trips(dvq) + tile_trips(pb->D, dvq, rows)), RQ_VK_AT_TRIPS);
        return ROPEQK_ERR_TOO_LARGE;
    }
    /* rows m = g*Sq + i of one KV head, and Qr/Kr element indices, are 32-bit in the shader (the
     * scratch itself is checked against the storage-buffer range by rq_vk_rope_init) */
    if (pb->G * pb->Sq > INT32_MAX) {
        rq_set_error("attention: G * Sq = %lld query rows per KV head exceed 2^31", (long long)(pb->G * pb->Sq));
        return ROPEQK_ERR_TOO_LARGE;
    }
    const VkPhysicalDeviceLimits *lim = &rq_vk(pl->ctx)->props.limits;
    int64_t gx = (pb->G * pb->Sq + rows - 1) / rows, gy = pb->B * pb->Hkv;
    if (gx > lim->maxComputeWorkGroupCount[0] || gy > lim->maxComputeWorkGroupCount[1]) {
        rq_set_error("attention: a grid of %lld x %lld work-groups exceeds this Vulkan device's limits (%u x %u)",
                     (long long)gx, (long long)gy, lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1]);
        return ROPEQK_ERR_TOO_LARGE;
    }
    int32_t spec[RQ_VK_NSPEC];
    rq_vk_attn_spec(pb->Dv, rows, pl->v.dtype, pl->out.dtype, spec);
    ropeqk_status st = rq_vk_pipe_get(pl->ctx, RQ_VK_SH_ATTENTION, spec, &rq_vkp(pl)->main);
    if (st)
        return st;
    /* the rows' state between key chunks, when the plan's largest Sk (max_keys for a decode plan)
     * takes more than one chunk: B*Hq*Sq rows of Dv accumulators, max and sum */
    if (pb->Sk <= rq_vk_attn_chunk_keys(pb->D, pb->Dv, rows))
        return ROPEQK_SUCCESS;
    uint64_t bytes = (uint64_t)(pb->B * pb->Hq * pb->Sq) * (uint64_t)(pb->Dv + 2) * 4;
    if (bytes > lim->maxStorageBufferRange) {
        rq_set_error("attention: the state of %lld query rows between key chunks (%llu bytes) exceeds this Vulkan "
                     "device's storage-buffer range limit (%u bytes)", (long long)(pb->B * pb->Hq * pb->Sq),
                     (unsigned long long)bytes, lim->maxStorageBufferRange);
        return ROPEQK_ERR_TOO_LARGE;
    }
    return rq_vk_buf_create(pl->ctx, bytes, false, 0, &rq_vkp(pl)->st);
}

ropeqk_status rq_vk_record_attention(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sk,
                                     int64_t q_off, int64_t k_off)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    ropeqk_tensor vt = pl->v;
    vt.ne[2] = Sk; /* a decode plan uses the first Sk keys of its V descriptor */
    uint32_t ves = (uint32_t)ropeqk_dtype_size(pl->v.dtype), oes = (uint32_t)ropeqk_dtype_size(pl->out.dtype);
    rq_vk_bind b[8] = {
        {vp->qr.buf, 0, vp->qr.size, 4},
        {vp->kr.buf, 0, vp->kr.size, 4},
        {a->v.buf, a->v.offset, rq_vk_word_bytes(a->v, ves, ropeqk_tensor_extent(&vt)), ves},
        {a->q_pos.buf, a->q_pos.offset, (VkDeviceSize)pb->Sq * 4, 4},
        {a->k_pos.buf, a->k_pos.offset, (VkDeviceSize)Sk * 4, 4},
        {a->out.buf, a->out.offset, rq_vk_word_bytes(a->out, oes, pb->o_extent), oes},
        {pl->with_lse ? a->lse.buf : VK_NULL_HANDLE, a->lse.offset, pb->lse_extent, 4},
        {vp->st.buf, 0, vp->st.size, 4}, /* VK_NULL_HANDLE (the dummy) when one chunk is enough */
    };
    uint32_t eo[8];
    /* every binding is checked before the first command is recorded */
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, 8, eo);
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
    uint32_t gx = (uint32_t)((M + vp->tile - 1) / vp->tile);
    /* key chunks in order, each after the previous one's state writes (Sk <= the plan's Sk, so the
     * state buffer exists whenever there is more than one) */
    int64_t kc = rq_vk_attn_chunk_keys(pb->D, pb->Dv, vp->tile);
    for (int64_t c0 = 0; c0 < Sk || c0 == 0; c0 += kc) {
        if (c0 > 0)
            rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        pc.kc0 = (int32_t)c0;
        pc.kc1 = (int32_t)(Sk - c0 < kc ? Sk : c0 + kc);
        rq_vk_dispatch(pl->ctx, cmd, vp->main, b, 8, &pc, sizeof pc, gx, (uint32_t)(pb->B * pb->Hkv), 1);
    }
    return ROPEQK_SUCCESS;
}
