/* The paged decode's pass 1 at memory speed on Vulkan (glsl/paged_fast.comp: paged_fast4.spv and
 * paged_fast8.spv), for the paged decode (vk_paged.c) and the dense decode (vk_dense.c): which plans
 * and calls take it, its pipelines, R(delta) table (src/core/paged_fast_table.c) and loop budget, and
 * its dispatch. paged.comp stays the fallback for everything else. The OpenCL side is
 * src/opencl/cl_paged_fast.c; docs/paged-decode-gpu.md has the design and figures.
 *
 * A plan takes it on a GPU (on a CPU device such as lavapipe only with ROPEQK_PAGED_FAST=1: there it costs
 * more than paged.comp saves; the suite's paged_fast_vulkan sets it) unless ROPEQK_PAGED_FAST=0, where
 * the shape fits the shader: D % 8 == 0 (16 for
 * an 8-bit K: its rows are read 16 bytes at a time), Dv % 4 == 0 (8 for an 8-bit V), R % 16 == 0
 * with 16 <= R <= RQ_PFAST_R_MAX (the table's room), rot_off % 8 == 0, 8 query vectors
 * of D dims in the shared memory next to the table (whose delta range drops to 16 where 32 does not
 * fit), no M-RoPE. A call takes it where the caches' views sit at 16-byte multiples (offsets and
 * strides) and the row groups fit the grid's first dimension. */
#include "vk_pg.h"
#include "../core/path_runs.h"

#include <stdlib.h>
#include <string.h>


/* Loop trips of one paged_fast.comp invocation per tile of RQ_VK_PF_WG keys, counted as the shader's
 * 14 loops are written (a loop entered once with n trips counting n + 1; spirv_val checks the number):
 * the tile loop, the anchors' (WG / dr), the rows' masks (8 rows at most), the rotated units (R/16),
 * the pass-through chunks ((D - R) / 8), the soft-cap and P loops (8 vectors), the flagged path's max
 * (WG keys) and P, P.V (a key lane's keys 4 at a time: WG / 4 at most). And per (split, row group): the
 * rows' lengths, Q's staging, the table's copy, the end's sum over the key lanes. */
static int64_t pf_tile_trips(int64_t D, int64_t R, int dr)
{
    const int64_t WG = RQ_VK_PF_WG;
    return 1 + (WG / dr + 1) + 9 + (R / 16 + 1) + ((D - R) / 8 + 1) + 9 + 9 + (WG + 1) + 9 + (WG / 4 + 1);
}

static int64_t pf_fixed_trips(int64_t D, int64_t R, int dr)
{
    const int64_t WG = RQ_VK_PF_WG;
    return 9 + (8 * D + WG - 1) / WG + 1 + ((R / 4 + 1) * dr + WG - 1) / WG + 1 + WG + 1;
}

bool rq_vkpf_shape_ok(const ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    const bool kq = rq_dtype_q8(pl->k.dtype), vq = rq_dtype_q8(pl->v.dtype);
    const int on = pl->ctx->tune.paged_fast; /* -1: GPUs only (src/core/tuning.c) */
    if (on == 0 || (on < 0 && rq_vk(pl->ctx)->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU))
        return false;
    return !pb->mrope && pb->D % (kq ? 16 : 8) == 0 && pb->Dv % (vq ? 8 : 4) == 0 &&
           pb->R % 16 == 0 && pb->R >= 16 && pb->R <= RQ_PFAST_R_MAX && pb->rot_off % 8 == 0 && 8 * pb->D <= 4096;
}

ropeqk_status rq_vkpf_setup(ropeqk_plan *pl, struct rq_vk_paged *pg, const float *vfreq4)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    pg->fast = false;
    if (!rq_vkpf_shape_ok(pl))
        return ROPEQK_SUCCESS;
    const size_t room = rq_vk(ctx)->props.limits.maxComputeSharedMemorySize;
    /* the table's delta range: 32 where everything fits (R <= 128), else 16 */
    int dr = rq_pfast_dr(pb->R, 0);
    int64_t ta4 = 0;
    for (; dr >= 16; dr /= 2) {
        int64_t tb4 = (pb->R / 4 + 1) * dr, an4 = RQ_VK_PF_WG / dr * (pb->R / 4);
        ta4 = tb4 + an4 > RQ_VK_PF_RED4 ? tb4 + an4 : RQ_VK_PF_RED4;
        if ((size_t)RQ_VK_PF_SHARED(2 * pb->D, ta4, 8) <= room)
            break;
    }
    if (dr < 16)
        return ROPEQK_SUCCESS; /* paged.comp serves */
    /* keys a split may hold within the loop budget (llvmpipe's limit, see vk_paged.c) */
    int64_t keys = (RQ_VK_AT_TRIPS - pf_fixed_trips(pb->D, pb->R, dr)) / pf_tile_trips(pb->D, pb->R, dr) * RQ_VK_PF_WG;
    if (keys > RQ_VK_PG_MAX_KEYS)
        keys = RQ_VK_PG_MAX_KEYS;
    size_t n = 0;
    float *t = rq_pfast_table(vfreq4, pb->R, dr, &n);
    if (!t)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_status st = rq_vk_buf_upload(ctx, t, (VkDeviceSize)n * 4, &pg->ftab);
    free(t);
    for (int i = 0; i < 2 && !st; i++) {
        int32_t sc[RQ_VK_NSPEC] = {pl->k.dtype, pl->v.dtype, (int32_t)((i ? 2 : 1) * pb->D), RQ_VK_PF_WG, dr,
                                   (int32_t)ta4};
        st = rq_vk_pipe_get(ctx, i ? RQ_VK_SH_PAGED_FAST8 : RQ_VK_SH_PAGED_FAST4, sc, &pg->fast_pipe[i]);
    }
    if (st)
        return st;
    pg->fast = true;
    pg->fast_dr = dr;
    pg->fast_max_keys = keys;
    return ROPEQK_SUCCESS;
}

bool rq_vkpf_call_ok(const ropeqk_plan *pl, VkDeviceSize k_off, const uint32_t knb[3], VkDeviceSize v_off,
                     const uint32_t vnb[3])
{
    const struct rq_vk_paged *pg = rq_vkp(pl)->pg;
    if (!pg || !pg->fast)
        return false;
    /* strides in elements of the caches' dtypes: 16-byte multiples */
    const size_t kes = ropeqk_dtype_size(pl->k.dtype), ves = ropeqk_dtype_size(pl->v.dtype);
    bool ok = k_off % 16 == 0 && v_off % 16 == 0;
    for (int i = 0; i < 3; i++)
        ok = ok && (knb[i] * kes) % 16 == 0 && (vnb[i] * ves) % 16 == 0;
    return ok;
}

ropeqk_status rq_vkpf_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fm)
{
    const rq_problem *pb = &pl->pb;
    int64_t most = 1, run = 1;
    for (int64_t r = 1; r < m->rows && most < 8; r++) {
        run = m->v[r] == m->v[r - 1] && m->v[m->kpos_off + r] == m->v[m->kpos_off + r - 1] ? run + 1 : 1;
        most = run > most ? run : most;
    }
    *fm = pb->G * most <= 4 ? 4 : 8;
    int64_t gpg = pb->G < *fm ? pb->G : *fm;
    ropeqk_status st = rq_paged_meta_groups(m, *fm / gpg);
    if (!st && m->ngroups > 65535)
        *fm = 0; /* more row groups than the grid's first dimension: paged.comp */
    return st;
}

ropeqk_status rq_vkpf_prepare(ropeqk_plan *pl, const rq_vkpg_launch *L, const rq_paged_meta *meta, rq_vkpf_run *r)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    struct rq_vk_paged *pg = vp->pg;
    const int fm = L->fast, nmb = fm / 4;
    const int64_t n = meta->rows;
    const int32_t gpg = (int32_t)(pb->G < fm ? pb->G : fm), ngc = (int32_t)((pb->G + gpg - 1) / gpg);
    int64_t dvch = RQ_VK_PF_WG / nmb * 4;
    dvch = pb->Dv < dvch ? pb->Dv : dvch;
    const int64_t ndvc = (pb->Dv + dvch - 1) / dvch, heads = pb->Hkv * ngc * ndvc;
    /* the split: every unit of the device a few times over (vk_paged.c's target), no split under a tile,
     * whole tiles where the pages allow, within the loop budget and the plan's split scratch */
    const int64_t ps = L->page_size, tile_pages = (RQ_VK_PF_WG + ps - 1) / ps;
    int64_t pps = rq_paged_pages_per_split(pg->target, meta->ngroups * heads, meta->max_pages, ps, RQ_VK_PF_WG,
                                           pg->fast_max_keys / ps);
    if (RQ_VK_PF_WG % ps == 0 && (pps + tile_pages - 1) / tile_pages * tile_pages * ps <= pg->fast_max_keys)
        pps = (pps + tile_pages - 1) / tile_pages * tile_pages;
    if (n * ((meta->max_pages + pps - 1) / pps) > pg->slots) { /* fewer, longer splits */
        int64_t per = pg->slots / n;
        pps = per > 0 ? (meta->max_pages + per - 1) / per : meta->max_pages + 1;
    }
    r->nsplit = (meta->max_pages + pps - 1) / pps, r->kps = pps * ps;
    if (pps < 1 || pps * ps > pg->fast_max_keys || r->nsplit > 65535 || heads > 65535) {
        rq_set_error("paged decode: the fast pass 1's split exceeds its loop budget or grid");
        return ROPEQK_ERR_TOO_LARGE; /* the caller takes paged.comp */
    }
    const VkDeviceSize meta_bytes = (VkDeviceSize)meta->n * 4;
    const rq_vk_bind b[RQ_VK_PF_NBIND] = {
        {L->k.buf, L->k.offset, (L->k_extent + 15) / 16 * 16, 16},
        {L->v.buf, L->v.offset, (L->v_extent + 7) / 8 * 8, 16},
        {pg->meta.buf, 0, meta_bytes, 4},
        {vp->freq.buf, 0, vp->freq.size, 16},
        {vp->qr.buf, 0, vp->qr.size, 4},
        {pg->part.buf, 0, pg->part.size, 4},
        {L->k_scale.buf, L->k_scale.offset, L->scale_bytes, 4},
        {L->v_scale.buf, L->v_scale.offset, L->scale_bytes, 4},
        {pg->ftab.buf, 0, pg->ftab.size, 16},
    };
    memcpy(r->b, b, sizeof b);
    uint32_t e[RQ_VK_PF_NBIND];
    ropeqk_status st = rq_vk_bind_offsets(ctx, r->b, RQ_VK_PF_NBIND, e);
    if (st)
        return st;
    /* strides in 16-byte units (rq_vkpf_call_ok checked the multiples) */
    const uint32_t kb = (uint32_t)ropeqk_dtype_size(pl->k.dtype), vb = (uint32_t)ropeqk_dtype_size(pl->v.dtype);
    uint32_t window = pb->window > 0 && pb->window < ((int64_t)1 << 32) ? (uint32_t)pb->window : 0u;
    r->pc = (rq_vkpf_pc){
        .k_off = e[0], .knb0 = L->knb[0] * kb / 16, .knb1 = L->knb[1] * kb / 16, .knb2 = L->knb[2] * kb / 16,
        .v_off = e[1], .vnb0 = L->vnb[0] * vb / 16, .vnb1 = L->vnb[1] * vb / 16, .vnb2 = L->vnb[2] * vb / 16,
        .window = window, .ml_off = (uint32_t)(n * pb->Hq * r->nsplit * pb->Dv), .lens_off = (uint32_t)meta->lens_off,
        .qpos_off = (uint32_t)meta->qpos_off, .kpos_off = (uint32_t)meta->kpos_off,
        .pages_off = (uint32_t)meta->pages_off, .rg_off = (uint32_t)meta->groups_off, .n = (int32_t)n,
        .Hq = (int32_t)pb->Hq, .G = (int32_t)pb->G, .D = (int32_t)pb->D, .Dv = (int32_t)pb->Dv, .R = (int32_t)pb->R,
        .flags = (pb->layout ? RQ_VK_PG_F_HALF : 0) | (pb->causal ? RQ_VK_PG_F_CAUSAL : 0), .ps = (int32_t)ps,
        .kps = (int32_t)r->kps, .nsplit = (int32_t)r->nsplit, .gpg = gpg, .dvch = (int32_t)dvch,
        .rot_mul = (float)pb->attn, .rot_off = (int32_t)pb->rot_off, .softcap = rq_vk_softcap(pb),
        .ks_off = e[6], .vs_off = e[7],
    };
    r->pipe = pg->fast_pipe[fm == 8];
    r->grid[0] = (uint32_t)meta->ngroups, r->grid[1] = (uint32_t)r->nsplit, r->grid[2] = (uint32_t)heads;
    rq_path_hit(RQ_PATH_PAGED_FAST);
    return ROPEQK_SUCCESS;
}
