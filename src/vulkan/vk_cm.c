/* The tensor-core path (docs/tensor-cores.md): prefill attention and scores plans whose products run
 * on cooperative matrices (glsl/cm_attn.comp, cm_scores.comp), or on their emulation (the same shaders
 * with loops: tuning vk_coopmat 1, the suite's check on lavapipe). A plan takes it when made, where
 * the context does (rq_vk_cm_active) and the plan's shape fits (head dims, tiles, buffer ranges; the
 * emulation also llvmpipe's loop budget); otherwise today's shaders serve it, with the same results
 * within their bound. The scratch of the old path (the RoPE pass's f32 Qr and Kr) is shared:
 *   rotate.comp (Q times the scale, K) -> cm_split.comp (Q, K, V into f16 hi/lo planes with per-row
 *   power-of-two factors) -> cm_attn.comp or cm_scores.comp,
 * with a barrier between the steps. The planes and factors belong to the plan (made with it, for its
 * largest call); a call with fewer rows or keys (a decode plan's step, the paged chunks' companion
 * plan) uses their first rows. */
#include "vk.h"
#include "../core/path_runs.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    RQ_CM_SP_PC(RQ_VK_FIELD)
} sp_pc;
typedef struct {
    RQ_CM_AT_PC(RQ_VK_FIELD)
} at_pc;
typedef struct {
    RQ_CM_SC_PC(RQ_VK_FIELD)
} sc_pc;

struct rq_vk_cm {
    bool emu, accurate;
    int32_t bm, bn, nt, nob, ncb;
    int64_t nbk, Mp, Skp, dp, dvp; /* heads (B * Hkv), plane rows per head and row lengths (halves) */
    rq_vk_pipe *split, *main;
    rq_vk_buf qp, kp, vp, sc; /* planes (hi, then lo in accurate mode) and the undo factors */
};

static int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

bool rq_vk_cm_active(const ropeqk_ctx *ctx, bool *emulated)
{
    int mode = ctx->tune.vk_coopmat;
    *emulated = mode == 1;
    return mode == 1 || (mode == 0 && rq_vk(ctx)->cm.real);
}

/* Invocations of a tile shape: 16 rows per subgroup (the emulation's subgroups have 32). */
static int32_t tile_nt(const ropeqk_ctx *ctx, int32_t rows, bool emu)
{
    return rows / RQ_CM_M * (int32_t)(emu ? RQ_CM_EMU_SG : rq_vk(ctx)->cm.sg);
}

/* Shared memory of cm_attn.comp's arrays (the larger of the two shaders) in bytes: S tile, P tile
 * (hi and lo), row partials (two arrays of NT), row state, flags, positions, key factors. */
static uint64_t tile_shared(int32_t bm, int32_t bn, int32_t nt)
{
    return 4ull * (uint64_t)bm * (uint64_t)(bn + 8) + 16ull * (uint64_t)bm * (uint64_t)(bn / 4 + 2) + 8ull * (uint64_t)nt +
           8ull * (uint64_t)bm + 8 + 4ull * (uint64_t)bm + 12ull * (uint64_t)bn;
}

bool rq_vk_cm_tile_fits(const ropeqk_ctx *ctx, int32_t rows, int32_t keys, bool emulated)
{
    const VkPhysicalDeviceLimits *lim = &rq_vk(ctx)->props.limits;
    int32_t nt = tile_nt(ctx, rows, emulated);
    return nt > 0 && nt >= rows && tile_shared(rows, keys, nt) <= lim->maxComputeSharedMemorySize &&
           (uint32_t)nt <= lim->maxComputeWorkGroupSize[0] && (uint32_t)nt <= lim->maxComputeWorkGroupInvocations &&
           keys % (4 * (nt / rows)) == 0;
}

/* Loop trips of one invocation of cm_attn_emu per dispatch, counted as the loops its SPIR-V keeps
 * (a loop entered once with n trips counts n + 1; the emulated products' own loops are unrolled, the
 * spirv_val test checks the count of loops): llvmpipe's silent limit (vk_attn.c). Per tile: the tile
 * loop, the factor loads, the key range of per-token positions, zeroing S, the steps of S (each with
 * its NSA key blocks of 3 products), storing S, the softmax's groups twice, the row partials, the
 * rescaling (NOB rounds, its worst case every tile), the P V steps (NOB columns of 3 products);
 * outside: positions, the block's range, zeroing O, the sums and the output (CPL columns a lane).
 * Keep in step with glsl/cm_attn.comp. */
static int64_t emu_trips(const struct rq_vk_cm *c, int64_t Sk, bool kpos)
{
    const int64_t nt = c->nt, tpr = nt / c->bm, nsa = c->bn / 16, g4 = c->bn / (4 * tpr), nd = c->dp / 16;
    const int64_t nob = c->nob, cpl = 16 / (RQ_CM_EMU_SG / 16);
    int64_t tile = 1 + (c->bn + nt - 1) / nt + 1 + (kpos ? c->bn + 1 : 0) + nsa + 1 + nd + 1 + nd * (nsa + 1) +
                   nd * nsa * 4 + nsa + 1 + 2 * (g4 + 1) + tpr + 1 + nob + 1 + nsa + 1 + nsa * (nob + 1) + nsa * nob * 4;
    int64_t fixed = (c->bm + nt - 1) / nt + 1 + c->bm + 1 + nob + 1 + 1 + tpr + 1 + nob + 1 + nob * (cpl + 1);
    return fixed + (Sk + c->bn - 1) / c->bn * tile;
}

/* The first tile shape that fits: the tuned one, the default, the smaller ones. */
static bool pick_tile(const ropeqk_ctx *ctx, bool emu, int32_t *bm, int32_t *bn)
{
    const int32_t c[][2] = {{ctx->tune.vk_cm_rows, ctx->tune.vk_cm_keys}, {64, 64}, {64, 32}, {32, 64}, {32, 32}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (rq_vk_cm_tile_fits(ctx, c[i][0], c[i][1], emu)) {
            *bm = c[i][0];
            *bn = c[i][1];
            return true;
        }
    return false;
}

void rq_vk_cm_free(ropeqk_plan *pl)
{
    struct rq_vk_plan *vp = rq_vkp(pl);
    struct rq_vk_cm *c = vp ? vp->cm : NULL;
    if (!c)
        return;
    rq_vk_buf_free(pl->ctx, &c->qp);
    rq_vk_buf_free(pl->ctx, &c->kp);
    rq_vk_buf_free(pl->ctx, &c->vp);
    rq_vk_buf_free(pl->ctx, &c->sc);
    free(c);
    vp->cm = NULL;
}

ropeqk_status rq_vk_cm_init(ropeqk_plan *pl)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    bool emu = false, attn = pl->op == ROPEQK_OP_ATTENTION;
    if (!rq_vk_cm_active(ctx, &emu) || (pl->op == ROPEQK_OP_SCORES && vp->few) || pb->D > 1024 ||
        (attn && pb->Dv > RQ_VK_AT_DVMAX))
        return ROPEQK_SUCCESS; /* today's shaders */
    struct rq_vk_cm c = {.emu = emu, .accurate = pb->math == ROPEQK_MATH_ACCURATE};
    if (!pick_tile(ctx, emu, &c.bm, &c.bn))
        return ROPEQK_SUCCESS;
    c.nt = tile_nt(ctx, c.bm, emu);
    c.nbk = pb->B * pb->Hkv;
    c.Mp = rup(pb->G * pb->Sq, RQ_CM_PAD_ROWS);
    c.Skp = rup(pb->Sk, RQ_CM_PAD_ROWS);
    c.dp = rup(pb->D, 16);
    if (attn) { /* V's column blocks: at most 8 accumulators of 16 dims per subgroup */
        int64_t n16 = rup(pb->Dv, 16) / 16;
        c.ncb = (int32_t)((n16 + 7) / 8);
        c.nob = (int32_t)((n16 + c.ncb - 1) / c.ncb);
        c.dvp = (int64_t)c.ncb * c.nob * 16;
    }
    /* the buffers' ranges, the grid, 32-bit indices: beyond them today's shaders serve the plan */
    const VkPhysicalDeviceLimits *lim = &rq_vk(ctx)->props.limits;
    int parts = c.accurate ? 2 : 1;
    uint64_t qb = (uint64_t)(c.nbk * c.Mp * c.dp) * 2 * (uint64_t)parts, kb = (uint64_t)(c.nbk * c.Skp * c.dp) * 2 * (uint64_t)parts;
    uint64_t vb = (uint64_t)(c.nbk * c.Skp * c.dvp) * 2 * (uint64_t)(c.accurate && pl->v.dtype != ROPEQK_F16 ? 2 : 1);
    uint64_t sb = (uint64_t)(c.nbk * (c.Mp + 2 * c.Skp)) * 4;
    uint64_t big = qb > kb ? qb : kb;
    big = big > vb ? big : vb;
    int64_t gx = (pb->G * pb->Sq + c.bm - 1) / c.bm, gy = c.nbk * (attn ? c.ncb : 1), gk = (pb->Sk + c.bn - 1) / c.bn;
    if (big > lim->maxStorageBufferRange || sb > lim->maxStorageBufferRange ||
        gx > lim->maxComputeWorkGroupCount[attn ? 0 : 1] || gy > lim->maxComputeWorkGroupCount[attn ? 1 : 2] ||
        (!attn && gk > lim->maxComputeWorkGroupCount[0]))
        return ROPEQK_SUCCESS;
    if (emu && attn && emu_trips(&c, pb->Sk, pl->arrays) > RQ_VK_AT_TRIPS) /* llvmpipe's loop budget (emulation only) */
        return ROPEQK_SUCCESS;
    int32_t spec[RQ_VK_NSPEC] = {0}, sspec[RQ_VK_NSPEC] = {0};
    spec[RQ_VK_SC_WG] = c.nt;
    spec[RQ_VK_SC_K1] = c.bm;
    spec[RQ_VK_SC_K2] = c.bn;
    spec[RQ_VK_SC_DT_A] = c.nob;
    spec[RQ_VK_SC_DT_O] = attn ? pl->out.dtype : 0;
    sspec[RQ_VK_SC_WG] = RQ_CM_SPLIT_WG;
    rq_vk_shader sh = attn ? (emu ? RQ_VK_SH_CM_ATTN_EMU : RQ_VK_SH_CM_ATTN) : (emu ? RQ_VK_SH_CM_SCORES_EMU : RQ_VK_SH_CM_SCORES);
    struct rq_vk_cm *cm = malloc(sizeof *cm);
    if (!cm)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    *cm = c;
    vp->cm = cm; /* freed by rq_vk_plan_free on any failure below */
    ropeqk_status st = rq_vk_pipe_get(ctx, RQ_VK_SH_CM_SPLIT, sspec, &cm->split);
    if (!st)
        st = rq_vk_pipe_get(ctx, sh, spec, &cm->main);
    if (st == ROPEQK_ERR_BACKEND) { /* a driver that refuses the module: today's shaders serve the plan (the
                                     * context keeps the driver's code: ropeqk_ctx_backend_error) */
        rq_vk_cm_free(pl);
        return ROPEQK_SUCCESS;
    }
    if (st || (st = rq_vk_buf_create(ctx, qb, false, 0, &cm->qp)) || (st = rq_vk_buf_create(ctx, kb, false, 0, &cm->kp)) ||
        (attn && (st = rq_vk_buf_create(ctx, vb, false, 0, &cm->vp))) || (st = rq_vk_buf_create(ctx, sb, false, 0, &cm->sc)))
        return st;
    return ROPEQK_SUCCESS;
}

/* Every plane row of nbh heads of `fill` rows each (the planes' stride: the first `rows` from the
 * source, the rest zeros) of row length np, hi at the buffer's start, lo lo_words further, the
 * factors from sc_off. Rows past a call's are written too (zeros): the shaders read whole tiles. */
typedef struct {
    VkBuffer src;
    VkDeviceSize src_offset, src_bytes;
    uint32_t es, nb0, nb1, nb2, H;
    int64_t nbh, rows, fill, n, np, dt;
    rq_vk_buf *dst;
    uint32_t lo_words, sc_off;
    bool lo, noscale;
} split_job;

static ropeqk_status record_split(ropeqk_plan *pl, VkCommandBuffer cmd, const split_job *j)
{
    struct rq_vk_cm *c = rq_vkp(pl)->cm;
    rq_vk_bind b[RQ_CM_SP_NBIND] = {
        [RQ_CM_SP_SRC] = {j->src, j->src_offset, j->src_bytes, j->es},
        [RQ_CM_SP_DST] = {j->dst->buf, 0, j->dst->size, 4},
        [RQ_CM_SP_SC] = {c->sc.buf, 0, c->sc.size, 4},
    };
    uint32_t eo[RQ_CM_SP_NBIND];
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, RQ_CM_SP_NBIND, eo);
    if (st || !cmd)
        return st;
    sp_pc pc = {.src_off = eo[RQ_CM_SP_SRC], .nb0 = j->nb0, .nb1 = j->nb1, .nb2 = j->nb2, .H = (int32_t)j->H,
                .rows = (int32_t)j->rows, .rows_p = (int32_t)j->fill, .nrows = (int32_t)(j->nbh * j->fill),
                .n = (int32_t)j->n, .np = (int32_t)j->np, .dst_off = 0, .lo_words = j->lo_words, .sc_off = j->sc_off,
                .dt = (int32_t)j->dt, .flags = (j->lo ? RQ_CM_SP_F_LO : 0) | (j->noscale ? RQ_CM_SP_F_NOSCALE : 0)};
    int64_t rows = j->nbh * j->fill, gx = rows < 65535 ? rows : 65535, gy = (rows + 65534) / 65535;
    rq_vk_dispatch(pl->ctx, cmd, c->split, b, RQ_CM_SP_NBIND, &pc, sizeof pc, (uint32_t)gx, (uint32_t)gy, 1);
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_cm_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sq,
                              int64_t Sk, int64_t q_off, int64_t k_off)
{
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    struct rq_vk_cm *c = vp->cm;
    bool attn = pl->op == ROPEQK_OP_ATTENTION;
    int64_t M = pb->G * Sq;
    /* the bindings of the last dispatch, checked with every other before anything is recorded */
    ropeqk_tensor ot = pl->out, lt = pl->lse, vt = pl->v;
    if (attn) {
        ot.ne[2] = lt.ne[2] = Sq;
        vt.ne[2] = Sk;
    } else {
        ot.ne[3] = Sk;
    }
    uint32_t oes = (uint32_t)ropeqk_dtype_size(pl->out.dtype), ves = attn ? (uint32_t)ropeqk_dtype_size(pl->v.dtype) : 4;
    size_t o_ext = ropeqk_tensor_extent(&ot), l_ext = attn && pl->with_lse ? ropeqk_tensor_extent(&lt) : 0;
    rq_vk_bind b[RQ_CM_AT_NBIND];
    uint32_t n = attn ? RQ_CM_AT_NBIND : RQ_CM_SC_NBIND;
    if (attn) {
        rq_vk_bind ab[RQ_CM_AT_NBIND] = {
            [RQ_CM_AT_QP] = {c->qp.buf, 0, c->qp.size, 8},
            [RQ_CM_AT_KP] = {c->kp.buf, 0, c->kp.size, 8},
            [RQ_CM_AT_VP] = {c->vp.buf, 0, c->vp.size, 8},
            [RQ_CM_AT_SC] = {c->sc.buf, 0, c->sc.size, 4},
            [RQ_CM_AT_QPOS] = {a->q_pos.buf, a->q_pos.offset, (VkDeviceSize)Sq * 4, 4},
            [RQ_CM_AT_KPOS] = {a->k_pos.buf, a->k_pos.offset, (VkDeviceSize)Sk * 4, 4},
            [RQ_CM_AT_OUT] = {a->out.buf, a->out.offset, rq_vk_word_bytes(a->out, oes, o_ext), oes},
            [RQ_CM_AT_LSE] = {pl->with_lse ? a->lse.buf : VK_NULL_HANDLE, a->lse.offset, l_ext, 4},
            [RQ_CM_AT_SINK] = {vp->sinks.buf, 0, vp->sinks.size, 4},
        };
        memcpy(b, ab, sizeof ab);
    } else {
        rq_vk_bind sb[RQ_CM_SC_NBIND] = {
            [RQ_CM_SC_QP] = {c->qp.buf, 0, c->qp.size, 8},
            [RQ_CM_SC_KP] = {c->kp.buf, 0, c->kp.size, 8},
            [RQ_CM_SC_SC] = {c->sc.buf, 0, c->sc.size, 4},
            [RQ_CM_SC_QPOS] = {a->q_pos.buf, a->q_pos.offset, (VkDeviceSize)Sq * 4, 4},
            [RQ_CM_SC_KPOS] = {a->k_pos.buf, a->k_pos.offset, (VkDeviceSize)Sk * 4, 4},
            [RQ_CM_SC_OUT] = {a->out.buf, a->out.offset, o_ext, 4},
        };
        memcpy(b, sb, sizeof sb);
    }
    uint32_t eo[RQ_CM_AT_NBIND];
    ropeqk_status st = rq_vk_bind_offsets(pl->ctx, b, n, eo);
    /* the splits: Q and K from the RoPE pass's f32 scratch ([nbk][M][D], [nbk][Sk][D]), V from the
     * caller's view; the lo planes in accurate mode (V's only for f32 and bf16: f16 is exact) */
    uint32_t dp2 = (uint32_t)(c->dp / 2);
    split_job sq = {.src = vp->qr.buf, .src_bytes = vp->qr.size, .es = 4, .nb0 = (uint32_t)(M * pb->D),
                    .nb2 = (uint32_t)pb->D, .H = 1, .nbh = c->nbk, .rows = M, .fill = c->Mp, .n = pb->D, .np = c->dp,
                    .dt = ROPEQK_F32, .dst = &c->qp, .lo_words = (uint32_t)(c->nbk * c->Mp) * dp2, .sc_off = 0,
                    .lo = c->accurate};
    split_job sk = sq;
    sk.src = vp->kr.buf, sk.src_bytes = vp->kr.size, sk.nb0 = (uint32_t)(Sk * pb->D), sk.rows = Sk, sk.fill = c->Skp;
    sk.dst = &c->kp, sk.lo_words = (uint32_t)(c->nbk * c->Skp) * dp2, sk.sc_off = (uint32_t)(c->nbk * c->Mp);
    split_job sv = {.src = a->v.buf, .src_offset = a->v.offset, .src_bytes = rq_vk_word_bytes(a->v, ves, ropeqk_tensor_extent(&vt)),
                    .es = ves, .nb0 = (uint32_t)(pl->v.nb[0] / ves), .nb1 = (uint32_t)(pl->v.nb[1] / ves),
                    .nb2 = (uint32_t)(pl->v.nb[2] / ves), .H = (uint32_t)pb->Hkv, .nbh = c->nbk, .rows = Sk,
                    .fill = c->Skp, .n = pb->Dv, .np = c->dvp, .dt = pl->v.dtype, .dst = &c->vp,
                    .lo_words = (uint32_t)(c->nbk * c->Skp * c->dvp / 2), .sc_off = (uint32_t)(c->nbk * (c->Mp + c->Skp)),
                    .lo = c->accurate && pl->v.dtype != ROPEQK_F16, .noscale = pl->v.dtype == ROPEQK_F16};
    if (!st)
        st = record_split(pl, VK_NULL_HANDLE, &sq);
    if (!st && attn)
        st = record_split(pl, VK_NULL_HANDLE, &sv);
    if (!st)
        st = rq_vk_record_rope(pl, cmd, a, Sq, Sk, q_off, k_off); /* leading barrier, rotations, barrier */
    if (st || !cmd)
        return st;
    record_split(pl, cmd, &sq);
    record_split(pl, cmd, &sk);
    if (attn)
        record_split(pl, cmd, &sv);
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    uint32_t window = pb->window > 0 && pb->window < ((int64_t)1 << 32) ? (uint32_t)pb->window : 0u;
    /* positions only decide the masks: under M-RoPE they follow token order (the offsets) */
    bool qpos = a->q_pos.buf != VK_NULL_HANDLE && !pb->mrope, kpos = a->k_pos.buf != VK_NULL_HANDLE && !pb->mrope;
    uint32_t gx = (uint32_t)((M + c->bm - 1) / c->bm);
    if (attn) {
        int32_t flags = (pl->with_lse ? RQ_CM_F_LSE : 0) | (vp->sinks.buf ? RQ_CM_F_SINKS : 0) |
                        (c->accurate ? RQ_CM_F_ACCURATE : 0) | (sv.lo ? RQ_CM_F_VLO : 0);
        at_pc pc = {
            .o_off = eo[RQ_CM_AT_OUT], .onb0 = (uint32_t)(pl->out.nb[0] / oes), .onb1 = (uint32_t)(pl->out.nb[1] / oes),
            .onb2 = (uint32_t)(pl->out.nb[2] / oes), .l_off = eo[RQ_CM_AT_LSE], .lnb0 = (uint32_t)(pl->lse.nb[0] / 4),
            .lnb1 = (uint32_t)(pl->lse.nb[1] / 4), .lnb2 = (uint32_t)(pl->lse.nb[2] / 4), .qpos_off = eo[RQ_CM_AT_QPOS],
            .kpos_off = eo[RQ_CM_AT_KPOS], .window = window, .M = (int32_t)M, .Mp = (int32_t)c->Mp, .Sq = (int32_t)Sq,
            .Sk = (int32_t)Sk, .Skp = (int32_t)c->Skp, .dp = (int32_t)c->dp, .Dv = (int32_t)pb->Dv,
            .dvp = (int32_t)c->dvp, .G = (int32_t)pb->G, .Hkv = (int32_t)pb->Hkv, .use_qpos = qpos,
            .q_base = (int32_t)q_off, .use_kpos = kpos, .k_base = (int32_t)k_off, .causal = pb->causal, .flags = flags,
            .softcap = rq_vk_softcap(pb)};
        rq_vk_dispatch(pl->ctx, cmd, c->main, b, n, &pc, sizeof pc, gx, (uint32_t)(c->nbk * c->ncb), 1);
    } else {
        sc_pc pc = {
            .out_off = eo[RQ_CM_SC_OUT], .onb0 = (uint32_t)(pl->out.nb[0] / 4), .onb1 = (uint32_t)(pl->out.nb[1] / 4),
            .onb2 = (uint32_t)(pl->out.nb[2] / 4), .onb3 = (uint32_t)(pl->out.nb[3] / 4), .qpos_off = eo[RQ_CM_SC_QPOS],
            .kpos_off = eo[RQ_CM_SC_KPOS], .window = window, .M = (int32_t)M, .Mp = (int32_t)c->Mp, .Sq = (int32_t)Sq,
            .Sk = (int32_t)Sk, .Skp = (int32_t)c->Skp, .dp = (int32_t)c->dp, .G = (int32_t)pb->G, .Hkv = (int32_t)pb->Hkv,
            .use_qpos = qpos, .q_base = (int32_t)q_off, .use_kpos = kpos, .k_base = (int32_t)k_off, .causal = pb->causal,
            .flags = c->accurate ? RQ_CM_F_ACCURATE : 0, .softcap = rq_vk_softcap(pb)};
        rq_vk_dispatch(pl->ctx, cmd, c->main, b, n, &pc, sizeof pc, (uint32_t)((Sk + c->bn - 1) / c->bn), gx,
                       (uint32_t)c->nbk);
    }
    rq_path_hit(c->emu ? RQ_PATH_VK_CM_EMU : RQ_PATH_VK_CM);
    return ROPEQK_SUCCESS;
}
