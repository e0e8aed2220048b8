/* The paged decode's run on Vulkan, shared by the paged decode (vk_paged.c) and the dense decode
 * (vk_dense.c): the split shape and loop budget of a plan (rq_vkpg_setup), and a recording of
 * rotate.comp (Q, the sequences as rows), pass 1 per split (paged.comp, or vk_paged_fast.c's
 * shaders) and paged_combine.comp over a batch's metadata (rq_vkpg_record_run); and what every
 * paged recording shares (the plan check, the metadata's upload and size check). Below the paged
 * operations; it calls only vk_paged_fast.c and the helpers below every operation. */
#include "vk_pg.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef rq_vk_rot_args rot_pc;
typedef struct {
    RQ_VK_PG_PC(RQ_VK_FIELD)
} pg_pc;
typedef struct {
    RQ_VK_PC_PC(RQ_VK_FIELD)
} comb_pc;

/* Whether paged.comp may use subgroup reductions on this device: subgroupMax and subgroupElect in
 * compute shaders (VkPhysicalDeviceSubgroupProperties, Vulkan 1.1), unless ROPEQK_VK_SUBGROUPS=0 (the
 * suite runs the shared-memory path on lavapipe that way). *size receives the subgroup size. */
static ropeqk_status subgroups_ok(const ropeqk_ctx *ctx, bool *ok, uint32_t *size)
{
    *ok = false;
    *size = 1;
    const char *e = getenv("ROPEQK_VK_SUBGROUPS");
    if (e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0) {
        rq_set_error("ROPEQK_VK_SUBGROUPS='%s': expected 0 (shared-memory reductions) or 1 (subgroups where the "
                     "device has them)", e);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    const struct rq_vk_ctx *vk = rq_vk(ctx);
    if ((e && !strcmp(e, "0")) || VK_API_VERSION_MINOR(vk->props.apiVersion) + 10 * VK_API_VERSION_MAJOR(vk->props.apiVersion) < 11)
        return ROPEQK_SUCCESS;
    VkPhysicalDeviceSubgroupProperties sp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sp};
    vkGetPhysicalDeviceProperties2(vk->phys, &p2);
    const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    *ok = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (sp.supportedOperations & need) == need &&
          sp.subgroupSize >= 1;
    *size = sp.subgroupSize ? sp.subgroupSize : 1;
    return ROPEQK_SUCCESS;
}

/* Loop trips of one paged.comp invocation, counted as the loops glslc leaves in the SPIR-V are
 * written (8 loops; the register loops are [[unroll]]ed, angle.glsl has none; the suite's spirv_val
 * test checks the count), a loop entered once with n trips counting n + 1: per tile of
 * RQ_VK_PG_WG keys and per (split, sequence) outside the tiles. Keep in step with glsl/paged.comp.
 * Measured on lavapipe (Mesa 22.3), D 128, f16, with the budget raised: a split of 20096 keys (314
 * tiles of 210 counted trips: 66000) comes out wrong, one of 18240 keys right, so this count is about
 * llvmpipe's own, and RQ_VK_AT_TRIPS (half the limit) keeps a 2x margin. */
static int64_t pg_tile_trips(int64_t D, int64_t R, int64_t uc, int64_t nsg)
{
    const int64_t WG = RQ_VK_PG_WG, nu = R / 2 + (D - R), nch = (nu + uc - 1) / uc;
    int64_t t = 1;                                  /* the tile loop's own trip */
    t += nch + 1 + nch * ((WG * uc + WG - 1) / WG + 1 /* stage and rotate a chunk */ + uc + 1 /* dot */);
    t += nsg + 1;                                   /* the max partials: per subgroup or per 4 invocations */
    t += WG + 1;                                    /* P V over the tile's keys */
    return t;
}

static int64_t pg_fixed_trips(int64_t qfloats)
{
    return 1 /* the sequence loop */ + (qfloats + RQ_VK_PG_WG - 1) / RQ_VK_PG_WG + 1 /* stage Q */ + 1 /* tile exit */;
}

/* The device's SM count where it reports one (VK_NV_shader_sm_builtins: NVIDIA's GPUs), else 0. */
static int64_t nv_sm_count(const ropeqk_ctx *ctx)
{
    VkPhysicalDevice pd = rq_vk(ctx)->phys;
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME) == 0;
    free(e);
    if (!found)
        return 0;
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sm};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    return sm.shaderSMCount;
}

/* Vulkan has no portable compute-unit count: a CPU device (lavapipe) runs one work-group per core
 * thread; a GPU has its SM count where it reports one (NVIDIA: 132 on an H200), else is taken to have
 * 64 units (a few tasks per unit either way). */
static int64_t device_units(const ropeqk_ctx *ctx, bool *gpu)
{
    *gpu = rq_vk(ctx)->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (*gpu) {
        int64_t sms = nv_sm_count(ctx);
        return sms > 0 ? sms : 64;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

ropeqk_status rq_vkpg_too_large(const char *fn, const char *what, uint64_t bytes, uint64_t lim)
{
    rq_set_error("%s: %s of %llu bytes exceeds this device's limit (%llu)", fn, what, (unsigned long long)bytes,
                 (unsigned long long)lim);
    return ROPEQK_ERR_TOO_LARGE;
}

ropeqk_status rq_vkpg_setup(ropeqk_plan *pl, struct rq_vk_paged *pg, int64_t ps, int64_t maxp, int64_t max_seqs,
                            int64_t meta_ints, const float *vfreq4, const char *fn)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    const VkPhysicalDeviceLimits *lim = &rq_vk(ctx)->props.limits;
    bool gpu;
    int64_t units = device_units(ctx, &gpu);
    pg->target = units * (gpu ? 8 : 4);
    pg->min_pages = ((gpu ? 256 : 512) + ps - 1) / ps; /* no split shorter than a few hundred keys */
    /* query heads per task: up to RQ_VK_PG_GH, as many as shared memory has room for next to the key
     * chunks, with the widest chunk (32, 16 or 8 rotary units) that still takes them all */
    static const int32_t ucs[] = {32, 16, 8};
    int64_t want = pb->G < RQ_VK_PG_GH ? pb->G : RQ_VK_PG_GH, gpg = 0;
    for (int i = 0; i < 3 && gpg < want; i++) {
        int64_t room = ((int64_t)lim->maxComputeSharedMemorySize - RQ_VK_PG_SHARED(0, ucs[i])) / 4 / pb->D;
        if (room > gpg) {
            gpg = room < want ? room : want;
            pg->uc = ucs[i];
        }
    }
    if (gpg < 1)
        return rq_vkpg_too_large(fn, "shared memory for one query head", (uint64_t)RQ_VK_PG_SHARED(pb->D, 8),
                         lim->maxComputeSharedMemorySize);
    uint32_t sg_size;
    ropeqk_status sst = subgroups_ok(ctx, &pg->sg, &sg_size);
    if (sst)
        return sst;
    pg->gpg = (int32_t)gpg;
    pg->ngc = (int32_t)((pb->G + gpg - 1) / gpg);
    pg->ndvc = (int32_t)((pb->Dv + RQ_VK_PG_WG * RQ_VK_PG_VT - 1) / (RQ_VK_PG_WG * RQ_VK_PG_VT));
    int64_t groups = pb->Hkv * pg->ngc * pg->ndvc;
    if (groups > (int64_t)lim->maxComputeWorkGroupCount[1])
        return rq_vkpg_too_large(fn, "work-groups per split", (uint64_t)groups, lim->maxComputeWorkGroupCount[1]);
    /* n sequences get at most min(ceil(maxp / min_pages), ceil(target / (n * groups))) splits each:
     * n * splits <= min(n * cap, target / groups + n), largest at n = max_seqs */
    int64_t cap = (maxp + pg->min_pages - 1) / pg->min_pages, byload = (pg->target + groups - 1) / groups + max_seqs;
    pg->slots = max_seqs * cap < byload ? max_seqs * cap : byload;
    /* and at least ceil(maxp / max_pps) splits each, whatever the load: a split's keys stay within the
     * loop budget (llvmpipe's limit: RQ_VK_AT_TRIPS by pg_tile_trips' count, every sequence an
     * invocation may walk when the batch exceeds the grid's 65535) and RQ_VK_PG_MAX_KEYS */
    int64_t nsg = pg->sg ? (RQ_VK_PG_WG + sg_size - 1) / sg_size : RQ_VK_PG_WG / 4;
    int64_t rounds = (max_seqs + 65534) / 65535, budget = RQ_VK_AT_TRIPS / rounds - pg_fixed_trips(gpg * pb->D);
    int64_t keys = budget / pg_tile_trips(pb->D, pb->R, pg->uc, nsg) * RQ_VK_PG_WG;
    if (keys > RQ_VK_PG_MAX_KEYS)
        keys = RQ_VK_PG_MAX_KEYS;
    if (keys < ps) {
        rq_set_error("%s: one page of %lld keys at head dim %lld exceeds the shader's loop budget (%lld keys a split)",
                     fn, (long long)ps, (long long)pb->D, (long long)keys);
        return ROPEQK_ERR_TOO_LARGE;
    }
    pg->max_pps = keys / ps;
    int64_t forced = (maxp + pg->max_pps - 1) / pg->max_pps;
    if (max_seqs * forced > pg->slots)
        pg->slots = max_seqs * forced;
    uint64_t range = lim->maxStorageBufferRange;
    uint64_t part_bytes = (uint64_t)pg->slots * (uint64_t)(pb->Hq * (pb->Dv + 2)) * 4;
    if (rq_vkpf_shape_ok(pl)) /* the fast pass 1's row groups: ngroups + 1 <= max_seqs + 1 starts */
        meta_ints += max_seqs + 1;
    uint64_t meta_bytes = (uint64_t)meta_ints * 4;
    if (part_bytes > range)
        return rq_vkpg_too_large(fn, "the split scratch", part_bytes, range);
    if (meta_bytes > range) /* batches that fit still run; a larger one is refused at record */
        meta_bytes = range / 4 * 4;
    int32_t s1[RQ_VK_NSPEC] = {pl->k.dtype, pl->v.dtype, (int32_t)(gpg * pb->D), RQ_VK_PG_WG};
    s1[RQ_VK_SC_PG_UC] = pg->uc;
    int32_t sc[RQ_VK_NSPEC] = {0, 0, pl->out.dtype, RQ_VK_PC_WG};
    ropeqk_status st;
    if ((st = rq_vk_pipe_get(ctx, pg->sg ? RQ_VK_SH_PAGED_SG : RQ_VK_SH_PAGED, s1, &pg->pass1)) ||
        (st = rq_vk_pipe_get(ctx, RQ_VK_SH_PAGED_COMBINE, sc, &pg->combine)) ||
        (st = rq_vk_buf_create(ctx, part_bytes, false, 0, &pg->part)) ||
        (st = rq_vk_buf_create(ctx, meta_bytes, false, 0, &pg->meta)))
        return st;
    return rq_vkpf_setup(pl, pg, vfreq4);
}

void rq_vk_paged_free(ropeqk_plan *pl)
{
    struct rq_vk_paged *pg = rq_vkp(pl) ? rq_vkp(pl)->pg : NULL;
    if (!pg)
        return;
    rq_vk_buf_free(pl->ctx, &pg->meta);
    rq_vk_buf_free(pl->ctx, &pg->part);
    rq_vk_buf_free(pl->ctx, &pg->gk);
    rq_vk_buf_free(pl->ctx, &pg->gv);
    rq_vk_buf_free(pl->ctx, &pg->ftab);
    free(pg);
    rq_vkp(pl)->pg = NULL;
}

ropeqk_status rq_vkpg_plan_ok(const ropeqk_plan *pl, const char *fn)
{
    if (!rq_is_vk(pl->ctx)) {
        rq_set_error("%s: the plan belongs to a %s context, not a Vulkan one", fn, pl->ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

/* The leading barrier, the metadata (vkCmdUpdateBuffer takes at most 65536 bytes a call), and the
 * barrier that makes it visible to the shaders. */
void rq_vkpg_record_meta(ropeqk_plan *pl, VkCommandBuffer cmd, const rq_paged_meta *meta)
{
    /* every earlier write in the queue (inputs), and earlier runs of this plan reading its metadata
     * and scratch, before the transfer and the shaders */
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_MEMORY_READ_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    VkDeviceSize bytes = (VkDeviceSize)meta->n * 4;
    for (VkDeviceSize o = 0; o < bytes; o += 65536) {
        VkDeviceSize c = bytes - o < 65536 ? bytes - o : 65536;
        vkCmdUpdateBuffer(cmd, rq_vkp(pl)->pg->meta.buf, o, c, (const char *)meta->v + o);
    }
    /* (and written: the dense decode's rotate.comp copies a q position array in, vk_dense.c) */
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

ropeqk_status rq_vkpg_meta_fits(const ropeqk_plan *pl, const rq_paged_meta *meta, const char *fn)
{
    if ((VkDeviceSize)meta->n * 4 > rq_vkp(pl)->pg->meta.size) {
        rq_set_error("%s: the batch's metadata (%zu bytes) exceeds the plan's buffer (%llu bytes)", fn, meta->n * 4,
                     (unsigned long long)rq_vkp(pl)->pg->meta.size);
        return ROPEQK_ERR_TOO_LARGE;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vkpg_record_run(ropeqk_plan *pl, VkCommandBuffer cmd, const rq_vkpg_launch *L,
                                 const rq_paged_meta *meta, const char *fn)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    struct rq_vk_plan *vp = rq_vkp(pl);
    struct rq_vk_paged *pg = vp->pg;
    const int64_t n = meta->rows, rows = n * pb->Hq; /* the query rows are the kernels' sequences */
    size_t qes = ropeqk_dtype_size(pl->q.dtype), kes = ropeqk_dtype_size(pl->k.dtype);
    size_t ves = ropeqk_dtype_size(pl->v.dtype), oes = ropeqk_dtype_size(pl->out.dtype);
    /* the split, by the rule every backend shares (src/core/paged_call.c); no split longer than the
     * loop budget's max_pps */
    int64_t groups = pb->Hkv * pg->ngc * pg->ndvc, tasks = n * groups;
    int64_t pps = rq_paged_pages_per_split(pg->target, tasks, meta->max_pages, L->page_size,
                                           pg->min_pages * L->page_size, pg->max_pps);
    int64_t nsplit = (meta->max_pages + pps - 1) / pps, kps = pps * L->page_size;
    /* the fast pass 1 where the call takes it (its own split; paged.comp where that does not fit) */
    rq_vkpf_run fr;
    ropeqk_status fst = L->fast ? rq_vkpf_prepare(pl, L, meta, &fr) : ROPEQK_ERR_TOO_LARGE;
    if (fst && fst != ROPEQK_ERR_TOO_LARGE)
        return fst;
    const bool fast = fst == ROPEQK_SUCCESS;
    if (fast)
        nsplit = fr.nsplit, kps = fr.kps;
    if (n * nsplit > pg->slots) { /* cannot happen (the plan's bound); refused rather than overrun */
        rq_set_error("%s: internal: %lld splits exceed the plan's scratch", fn, (long long)(n * nsplit));
        return ROPEQK_ERR_TOO_LARGE;
    }
    const VkDeviceSize meta_bytes = (VkDeviceSize)meta->n * 4;
    rq_vk_bind br[5] = {
        {L->q.buf, L->q.offset, rq_vkpg_bytes(L->q.offset, qes, L->q_extent), (uint32_t)qes},
        {L->pos.buf, L->pos.offset, L->pos_bytes, 4},
        {vp->freq.buf, 0, vp->freq.size, 16},
        {vp->qr.buf, 0, vp->qr.size, 4},
        {L->rot.pd_nbat > 0 ? pg->meta.buf : VK_NULL_HANDLE, 0, meta_bytes, 4}, /* the dummy: no copy */
    };
    rq_vk_bind b1[RQ_VK_PG_NBIND] = {
        {L->k.buf, L->k.offset, rq_vkpg_bytes(L->k.offset, kes, L->k_extent), (uint32_t)kes},
        {L->v.buf, L->v.offset, rq_vkpg_bytes(L->v.offset, ves, L->v_extent), (uint32_t)ves},
        {pg->meta.buf, 0, meta_bytes, 4},
        {vp->freq.buf, 0, vp->freq.size, 16},
        {vp->qr.buf, 0, vp->qr.size, 4},
        {pg->part.buf, 0, pg->part.size, 4},
        {L->k_scale.buf, L->k_scale.offset, L->scale_bytes, 4}, /* VK_NULL_HANDLE: the dummy */
        {L->v_scale.buf, L->v_scale.offset, L->scale_bytes, 4},
    };
    rq_vk_bind bc[5] = {
        {pg->part.buf, 0, pg->part.size, 4},
        {pg->meta.buf, 0, meta_bytes, 4},
        {L->out.buf, L->out.offset, rq_vkpg_bytes(L->out.offset, oes, L->out_extent), (uint32_t)oes},
        {pl->with_lse ? L->lse.buf : VK_NULL_HANDLE, L->lse.offset, L->lse_extent, 4}, /* NULL: the dummy */
        {vp->sinks.buf, 0, vp->sinks.size, 4},                                        /* the dummy without sinks */
    };
    uint32_t er[5], e1[RQ_VK_PG_NBIND], ec[5];
    ropeqk_status st;
    if ((st = rq_vk_bind_offsets(ctx, br, 5, er)) || (st = rq_vk_bind_offsets(ctx, b1, RQ_VK_PG_NBIND, e1)) ||
        (st = rq_vk_bind_offsets(ctx, bc, 5, ec)))
        return st;
    rot_pc rp = L->rot;
    rp.src_off = er[0];
    rp.pos_off += er[1];
    rp.pd_off = er[4] + (uint32_t)meta->qpos_off;
    rp.dst_off = 0;
    /* W >= 2^32 masks nothing among int32 positions */
    uint32_t window = pb->window > 0 && pb->window < ((int64_t)1 << 32) ? (uint32_t)pb->window : 0u;
    uint32_t ml_off = (uint32_t)(rows * nsplit * pb->Dv);
    pg_pc p1 = {
        .k_off = e1[0], .knb0 = L->knb[0], .knb1 = L->knb[1], .knb2 = L->knb[2], .v_off = e1[1], .vnb0 = L->vnb[0],
        .vnb1 = L->vnb[1], .vnb2 = L->vnb[2], .window = window, .ml_off = ml_off,
        .lens_off = (uint32_t)meta->lens_off, .qpos_off = (uint32_t)meta->qpos_off,
        .kpos_off = (uint32_t)meta->kpos_off, .pages_off = (uint32_t)meta->pages_off, .n = (int32_t)n,
        .Hq = (int32_t)pb->Hq, .G = (int32_t)pb->G, .D = (int32_t)pb->D, .Dv = (int32_t)pb->Dv, .R = (int32_t)pb->R,
        .flags = (pb->layout ? RQ_VK_PG_F_HALF : 0) | (pb->causal ? RQ_VK_PG_F_CAUSAL : 0),
        .ps = (int32_t)L->page_size, .kps = (int32_t)kps, .nsplit = (int32_t)nsplit, .gpg = pg->gpg,
        .ndvc = pg->ndvc, .rot_mul = (float)pb->attn, .rot_off = (int32_t)pb->rot_off, .softcap = rq_vk_softcap(pb),
        .ks_off = e1[6], .vs_off = e1[7],
    };
    comb_pc pc = {
        .out_off = ec[2], .onb0 = L->onb[0], .onb1 = L->onb[1], .onb2 = L->onb[2], .onb3 = L->onb[3],
        .lse_off = ec[3], .lnb0 = L->lnb[0], .lnb1 = L->lnb[1], .lnb2 = L->lnb[2], .nbat = (int32_t)L->nbat,
        .ml_off = ml_off, .lens_off = (uint32_t)meta->lens_off, .Hq = (int32_t)pb->Hq, .Dv = (int32_t)pb->Dv,
        .nsplit = (int32_t)nsplit, .kps = (int32_t)kps, .use_lse = pl->with_lse, .rows = (int32_t)rows,
        .use_sinks = vp->sinks.buf != VK_NULL_HANDLE,
    };

    rq_vkpg_record_meta(pl, cmd, meta);
    uint32_t units = (uint32_t)(pb->R / 2 + (pb->D - pb->R));
    rq_vk_dispatch(ctx, cmd, vp->rot_q, br, 5, &rp, sizeof rp, (units + RQ_VK_ROT_UNITS - 1) / RQ_VK_ROT_UNITS,
                   rq_vkpg_grid(rp.S), 1);
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    if (fast)
        rq_vk_dispatch(ctx, cmd, fr.pipe, fr.b, RQ_VK_PF_NBIND, &fr.pc, sizeof fr.pc, fr.grid[0], fr.grid[1],
                       fr.grid[2]);
    else
        rq_vk_dispatch(ctx, cmd, pg->pass1, b1, RQ_VK_PG_NBIND, &p1, sizeof p1, (uint32_t)nsplit, (uint32_t)groups,
                       rq_vkpg_grid(n));
    rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    rq_vk_dispatch(ctx, cmd, pg->combine, bc, 5, &pc, sizeof pc,
                   (uint32_t)((pb->Dv + RQ_VK_PC_WG - 1) / RQ_VK_PC_WG), rq_vkpg_grid(rows), 1);
    return ROPEQK_SUCCESS;
}
