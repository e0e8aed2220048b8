/* Fused attention (ROPEQK_OP_ATTENTION) on Vulkan: the plan's attention pipeline, and the recording
 * (the shared RoPE pass of vk_plan.c into the Qr/Kr scratch, then attention.comp reading V from the
 * caller's buffer; S is never written). The buffers were checked by ropeqk_vulkan_plan_record. */
#include "vk.h"

#include <string.h>

typedef struct {
    RQ_VK_AT_PC(RQ_VK_FIELD)
} at_pc;

/* The whole shape from rows per work-group BM and keys per tile BN (attention.comp's header). */
static void shape_of(int32_t bm, int32_t bn, int64_t Dv, rq_vk_attn_shape *s)
{
    s->bm = bm;
    s->bn = bn;
    s->tx = bn / RQ_VK_AT_RN;
    s->ty = bm / RQ_VK_AT_RM;
    s->nt = s->tx * s->ty;
    int64_t cols4 = (Dv + 3) / 4, cv = (cols4 + s->tx - 1) / s->tx; /* vec4 columns per invocation */
    s->cv = (int32_t)(cv < RQ_VK_AT_CVMAX ? cv : RQ_VK_AT_CVMAX);
    s->ncb = (int32_t)((Dv + 4 * s->tx * s->cv - 1) / (4 * s->tx * s->cv));
}

static bool shape_fits(const VkPhysicalDeviceLimits *lim, const rq_vk_attn_shape *s)
{
    return (uint64_t)RQ_VK_AT_SHARED(s->bm, s->bn, s->cv) <= lim->maxComputeSharedMemorySize &&
           (uint32_t)s->nt <= lim->maxComputeWorkGroupSize[0] && (uint32_t)s->nt <= lim->maxComputeWorkGroupInvocations;
}

/* BM rows a work-group with the widest key tile (64, else 32) the device has room for. */
static bool shape_for_rows(const VkPhysicalDeviceLimits *lim, int32_t rows, int64_t Dv, rq_vk_attn_shape *s)
{
    static const int32_t bns[] = {64, 32};
    for (int i = 0; i < 2; i++) {
        shape_of(rows, bns[i], Dv, s);
        if (shape_fits(lim, s))
            return true;
    }
    return false;
}

bool rq_vk_attn_rows_fit(const ropeqk_ctx *ctx, int32_t rows, int64_t Dv)
{
    rq_vk_attn_shape s;
    return shape_for_rows(&rq_vk(ctx)->props.limits, rows, Dv, &s);
}

bool rq_vk_attn_pick(const ropeqk_ctx *ctx, int64_t Dv, rq_vk_attn_shape *s)
{
    /* the tuned rows, else the default, else the smallest (Vulkan's minimum of 16 KiB of shared
     * memory takes 64 rows by 32 keys, 15.4 KiB; 32 by 32 need 10.6 KiB) */
    const VkPhysicalDeviceLimits *lim = &rq_vk(ctx)->props.limits;
    return shape_for_rows(lim, ctx->tune.vk_rows, Dv, s) || shape_for_rows(lim, RQ_VK_AT_BM_DEF, Dv, s) ||
           shape_for_rows(lim, 32, Dv, s);
}

void rq_vk_attn_spec(const rq_vk_attn_shape *s, int32_t v_dtype, int32_t o_dtype, int32_t spec[RQ_VK_NSPEC])
{
    memset(spec, 0, RQ_VK_NSPEC * sizeof spec[0]);
    spec[RQ_VK_SC_AT_CV] = s->cv;
    spec[RQ_VK_SC_DT_B] = v_dtype;
    spec[RQ_VK_SC_DT_O] = o_dtype;
    spec[RQ_VK_SC_WG] = s->nt;
    spec[RQ_VK_SC_AT_BM] = s->bm;
    spec[RQ_VK_SC_AT_BN] = s->bn;
}

/* Loop trips of one attention.comp invocation, counted as the loops that glslc leaves in the SPIR-V
 * are written (the [[unroll]]ed register loops are gone: 12 loops in all, checked against the
 * embedded module by the suite's spirv_val test), a loop entered once with n trips counting n + 1:
 * an upper bound of what llvmpipe's limiter counts whatever its own compiler unrolls. Per tile of BN
 * keys, and per dispatch outside the tiles. Keep in step with glsl/attention.comp. */
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int64_t attn_tile_trips(int64_t D, const rq_vk_attn_shape *s)
{
    const int64_t TK = RQ_VK_AT_TK, TK4 = TK / 4, nt = s->nt, nd = cdiv(D, TK), nu = cdiv(s->bn, TK);
    int64_t t = 1;                                                       /* the tile loop's own trip */
    t += cdiv(s->bn, nt) + 1 + s->bn / 4 + 1;                            /* key positions, their range */
    t += nd + 1 + nd * (cdiv(s->bm * TK4, nt) + 1 + cdiv(s->bn * TK4, nt) + 1); /* Q and K steps */
    t += s->tx / 4 + 1;                                                  /* the row max partials */
    t += nu + 1 + nu * (cdiv(TK * s->tx * s->cv, nt) + 1);               /* V steps */
    return t;
}

static int64_t attn_fixed_trips(const rq_vk_attn_shape *s)
{
    return cdiv(s->bm, s->nt) + 1 /* row positions */ + s->bm / 4 + 1 /* their range */ + 1 /* tile loop exit */ +
           s->tx / 4 + 1 /* row sums */;
}

int64_t rq_vk_attn_chunk_keys(int64_t D, const rq_vk_attn_shape *s)
{
    /* llvmpipe stops every loop of an invocation after 65535 trips in all (LP_MAX_TGSI_LOOP_ITERATIONS)
     * and says nothing: a dispatch runs at most RQ_VK_AT_TRIPS (half of that) by this bound. E.g. the
     * default shape (64 rows, 64 keys, 256 invocations) at D 128: 83 trips a tile of 64 keys, 25 fixed,
     * 394 tiles = 25216 keys a chunk; D 256, Dv 256: 123 a tile, 17024 keys. Measured on lavapipe
     * (Mesa 22.3) with the budget raised so that one dispatch takes every key, D 128: 60000 keys
     * right, 70000 wrong (about 60-65 real trips a tile, under this count). */
    int64_t tiles = (RQ_VK_AT_TRIPS - attn_fixed_trips(s)) / attn_tile_trips(D, s);
    return (tiles < 1 ? 1 : tiles) * s->bn;
}

ropeqk_status rq_vk_attn_plan_init(ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    if (pb->Dv > RQ_VK_AT_DVMAX) {
        rq_set_error("attention: Dv %lld exceeds %d, the Vulkan shader's limit", (long long)pb->Dv, RQ_VK_AT_DVMAX);
        return ROPEQK_ERR_TOO_LARGE;
    }
    rq_vk_attn_shape *sh = &vp->at;
    if (!rq_vk_attn_pick(pl->ctx, pb->Dv, sh)) {
        rq_set_error("attention: this Vulkan device has no room for the attention shader's smallest tile (%d bytes "
                     "of shared memory, %d invocations)", RQ_VK_AT_SHARED(32, 32, RQ_VK_AT_CVMAX), 64);
        return ROPEQK_ERR_TOO_LARGE;
    }
    vp->tile = sh->bm;
    /* one key tile must stay within the loop budget (llvmpipe's limit, above): head dims beyond that
     * would come out wrong without an error there */
    int64_t trips = attn_fixed_trips(sh) + attn_tile_trips(pb->D, sh);
    if (trips > RQ_VK_AT_TRIPS) {
        rq_set_error("attention: head dim D %lld is too large for the Vulkan shader's loop budget (one key tile "
                     "needs %lld loop trips, at most %d)", (long long)pb->D, (long long)trips, RQ_VK_AT_TRIPS);
        return ROPEQK_ERR_TOO_LARGE;
    }
    /* rows m = g*Sq + i of one KV head, and Qr/Kr element indices, are 32-bit in the shader (the
     * scratch itself is checked against the storage-buffer range by rq_vk_rope_init) */
    if (pb->G * pb->Sq > INT32_MAX) {
        rq_set_error("attention: G * Sq = %lld query rows per KV head exceed 2^31", (long long)(pb->G * pb->Sq));
        return ROPEQK_ERR_TOO_LARGE;
    }
    const VkPhysicalDeviceLimits *lim = &rq_vk(pl->ctx)->props.limits;
    int64_t gx = (pb->G * pb->Sq + sh->bm - 1) / sh->bm, gy = pb->B * pb->Hkv * sh->ncb;
    if (gx > lim->maxComputeWorkGroupCount[0] || gy > lim->maxComputeWorkGroupCount[1]) {
        rq_set_error("attention: a grid of %lld x %lld work-groups exceeds this Vulkan device's limits (%u x %u)",
                     (long long)gx, (long long)gy, lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1]);
        return ROPEQK_ERR_TOO_LARGE;
    }
    int32_t spec[RQ_VK_NSPEC];
    rq_vk_attn_spec(sh, pl->v.dtype, pl->out.dtype, spec);
    ropeqk_status st = rq_vk_pipe_get(pl->ctx, RQ_VK_SH_ATTENTION, spec, &vp->main);
    if (st)
        return st;
    /* the rows' state between key chunks, when the plan's largest Sk (max_keys for a decode plan)
     * takes more than one chunk: B*Hq*Sq rows of Dv accumulators and a (max, sum) pair per column
     * block */
    if (pb->Sk <= rq_vk_attn_chunk_keys(pb->D, sh))
        return ROPEQK_SUCCESS;
    uint64_t bytes = (uint64_t)(pb->B * pb->Hq * pb->Sq) * (uint64_t)(pb->Dv + 2 * sh->ncb) * 4;
    if (bytes > lim->maxStorageBufferRange) {
        rq_set_error("attention: the state of %lld query rows between key chunks (%llu bytes) exceeds this Vulkan "
                     "device's storage-buffer range limit (%u bytes)", (long long)(pb->B * pb->Hq * pb->Sq),
                     (unsigned long long)bytes, lim->maxStorageBufferRange);
        return ROPEQK_ERR_TOO_LARGE;
    }
    return rq_vk_buf_create(pl->ctx, bytes, false, 0, &vp->st);
}

ropeqk_status rq_vk_record_attention(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sq,
                                     int64_t Sk, int64_t q_off, int64_t k_off)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    if (vp->cm) /* the tensor-core path (vk_cm.c), also for the paged chunks' companion plan */
        return rq_vk_cm_record(pl, cmd, a, Sq, Sk, q_off, k_off);
    const rq_vk_attn_shape *sh = &vp->at;
    ropeqk_tensor vt = pl->v, ot = pl->out, lt = pl->lse;
    vt.ne[2] = Sk; /* a decode plan uses the first Sk keys of its V descriptor */
    ot.ne[2] = lt.ne[2] = Sq; /* the paged chunks' companion plan: the chunk's first Sq rows */
    size_t o_ext = ropeqk_tensor_extent(&ot), l_ext = pl->with_lse ? ropeqk_tensor_extent(&lt) : 0;
    uint32_t ves = (uint32_t)ropeqk_dtype_size(pl->v.dtype), oes = (uint32_t)ropeqk_dtype_size(pl->out.dtype);
    bool v4 = pb->D % 4 == 0; /* Qr and Kr rows start on vec4 boundaries */
    rq_vk_bind b[RQ_VK_AT_NBIND] = {
        [RQ_VK_AT_QR] = {vp->qr.buf, 0, vp->qr.size, 4},
        [RQ_VK_AT_KR] = {vp->kr.buf, 0, vp->kr.size, 4},
        [RQ_VK_AT_V] = {a->v.buf, a->v.offset, rq_vk_word_bytes(a->v, ves, ropeqk_tensor_extent(&vt)), ves},
        [RQ_VK_AT_QPOS] = {a->q_pos.buf, a->q_pos.offset, (VkDeviceSize)Sq * 4, 4},
        [RQ_VK_AT_KPOS] = {a->k_pos.buf, a->k_pos.offset, (VkDeviceSize)Sk * 4, 4},
        [RQ_VK_AT_OUT] = {a->out.buf, a->out.offset, rq_vk_word_bytes(a->out, oes, o_ext), oes},
        [RQ_VK_AT_LSE] = {pl->with_lse ? a->lse.buf : VK_NULL_HANDLE, a->lse.offset, l_ext, 4},
        [RQ_VK_AT_ST] = {vp->st.buf, 0, vp->st.size, 4}, /* VK_NULL_HANDLE (the dummy) when one chunk is enough */
        /* the vec4 views: 16-byte multiples of the same scratch (the dummy where D % 4 != 0) */
        [RQ_VK_AT_QR4] = {v4 ? vp->qr.buf : VK_NULL_HANDLE, 0, vp->qr.size / 16 * 16, 16},
        [RQ_VK_AT_KR4] = {v4 ? vp->kr.buf : VK_NULL_HANDLE, 0, vp->kr.size / 16 * 16, 16},
        [RQ_VK_AT_SINK] = {vp->sinks.buf, 0, vp->sinks.size, 4}, /* the dummy without sinks */
    };
    uint32_t eo[RQ_VK_AT_NBIND];
    /* every binding is checked before the first command is recorded */
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, RQ_VK_AT_NBIND, eo);
    if (!st)
        st = rq_vk_record_rope(pl, cmd, a, Sq, Sk, q_off, k_off);
    if (st || !cmd)
        return st;
    /* W >= 2^32 masks nothing among int32 positions (their difference is below 2^32) */
    uint32_t window = pb->window > 0 && pb->window < ((int64_t)1 << 32) ? (uint32_t)pb->window : 0u;
    int64_t M = pb->G * Sq;
    /* positions only decide the masks here: under M-RoPE they follow token order (the offsets) */
    bool qpos = a->q_pos.buf != VK_NULL_HANDLE && !pb->mrope, kpos = a->k_pos.buf != VK_NULL_HANDLE && !pb->mrope;
    int32_t flags = (pl->with_lse ? RQ_VK_AT_F_LSE : 0) | (v4 ? RQ_VK_AT_F_VEC4 : 0) |
                    (vp->sinks.buf ? RQ_VK_AT_F_SINKS : 0);
    at_pc pc = {
        .v_off = eo[RQ_VK_AT_V], .vnb0 = (uint32_t)(pl->v.nb[0] / ves), .vnb1 = (uint32_t)(pl->v.nb[1] / ves),
        .vnb2 = (uint32_t)(pl->v.nb[2] / ves), .o_off = eo[RQ_VK_AT_OUT], .onb0 = (uint32_t)(pl->out.nb[0] / oes),
        .onb1 = (uint32_t)(pl->out.nb[1] / oes), .onb2 = (uint32_t)(pl->out.nb[2] / oes), .l_off = eo[RQ_VK_AT_LSE],
        .lnb0 = (uint32_t)(pl->lse.nb[0] / 4), .lnb1 = (uint32_t)(pl->lse.nb[1] / 4),
        .lnb2 = (uint32_t)(pl->lse.nb[2] / 4), .qpos_off = eo[RQ_VK_AT_QPOS], .kpos_off = eo[RQ_VK_AT_KPOS],
        .window = window, .M = (int32_t)M, .Sq = (int32_t)Sq, .Sk = (int32_t)Sk, .D = (int32_t)pb->D,
        .Dv = (int32_t)pb->Dv, .G = (int32_t)pb->G, .Hkv = (int32_t)pb->Hkv,
        .use_qpos = qpos, .q_base = (int32_t)q_off, .use_kpos = kpos, .k_base = (int32_t)k_off,
        .causal = pb->causal, .flags = flags, .softcap = rq_vk_softcap(pb),
    };
    uint32_t gx = (uint32_t)((M + sh->bm - 1) / sh->bm), gy = (uint32_t)(pb->B * pb->Hkv * sh->ncb);
    /* key chunks in order, each after the previous one's state writes (Sk <= the plan's Sk, so the
     * state buffer exists whenever there is more than one) */
    int64_t kc = rq_vk_attn_chunk_keys(pb->D, sh);
    for (int64_t c0 = 0; c0 < Sk || c0 == 0; c0 += kc) {
        if (c0 > 0)
            rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        pc.kc0 = (int32_t)c0;
        pc.kc1 = (int32_t)(Sk - c0 < kc ? Sk : c0 + kc);
        rq_vk_dispatch(pl->ctx, cmd, vp->main, b, RQ_VK_AT_NBIND, &pc, sizeof pc, gx, gy, 1);
    }
    return ROPEQK_SUCCESS;
}
