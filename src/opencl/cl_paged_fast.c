/* The GPU profile's pass 1 of the paged decode at memory speed (cl/paged_fast.cl: paged_attn_fast4 and
 * paged_attn_fast8), for the paged decode (cl_paged.c) and the dense decode (cl_dense.c): which plans and calls
 * take it, its R(delta) table, its launch geometry. paged_attn_gpu stays the fallback for everything
 * else (the CPU profile keeps paged_attn_cpu); docs/paged-decode-gpu.md has the design and figures.
 *
 * A plan takes it (rq_cl_pfast_plan_init) on the GPU profile where the shape fits the kernel: D % 8 == 0,
 * Dv % 4 == 0, R % 16 == 0 with 16 <= R <= RQ_FR_MAX, rot_off % 8 == 0, at least 4 query vectors of D
 * dims in RQ_FQF floats, and where the device runs its 128 work-items and local memory. A call takes it
 * (rq_cl_pfast_call_ok) where the caches' views sit at 16-byte multiples (offsets and strides) and their
 * extents stay below 2^32 units of 16 bytes (the kernel's 32-bit row offsets). */
#include "ocl.h"
#include "../core/path_runs.h"

#include <stdlib.h>
#include <string.h>


bool rq_cl_pfast_shape_ok(const ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    return pl->ctx->tune.profile == ROPEQK_PROFILE_GPU && !pb->mrope && pb->D % 8 == 0 && pb->Dv % 4 == 0 &&
           pb->R % 16 == 0 && pb->R >= 16 && pb->R <= RQ_FR_MAX && pb->rot_off % 8 == 0 && 4 * pb->D <= RQ_FQF;
}

ropeqk_status rq_cl_pfast_plan_init(ropeqk_plan *pl, cl_program prog, const float *freq4)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    if (!ctx->tune.paged_fast || !rq_cl_pfast_shape_ok(pl))
        return ROPEQK_SUCCESS;
    static const char *const names[2] = {"paged_attn_fast4", "paged_attn_fast8"};
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < 2 && !err; i++)
        cp->kfast[i] = clCreateKernel(prog, names[i], &err);
    if (err)
        return rq_cl_fail(ctx, err); /* kernels made so far: ropeqk_plan_destroy */
    for (int i = 0; i < 2; i++)
        if (!rq_kernel_fits(ctx, cp->kfast[i], RQ_FWG, RQ_FAST_LOCAL_BYTES))
            return ROPEQK_SUCCESS; /* paged_attn_gpu serves (cp->fast stays false) */
    size_t n = 0;
    float *t = rq_pfast_table(freq4, pl->pb.R, rq_pfast_dr(pl->pb.R, 0), &n);
    if (!t)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    cp->ftab = clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof *t, t, &err);
    free(t);
    if (err)
        return rq_cl_fail(ctx, err);
    cp->fast = true;
    return ROPEQK_SUCCESS;
}

bool rq_cl_pfast_call_ok(const ropeqk_plan *pl, size_t k_off, const int64_t knb[3], size_t v_off, const int64_t vnb[3],
                      size_t k_extent, size_t v_extent)
{
    if (!rq_clp(pl)->fast)
        return false;
    const uint64_t lim = (uint64_t)UINT32_MAX * 16;
    return (k_off | v_off) % 16 == 0 && (knb[0] | knb[1] | knb[2] | vnb[0] | vnb[1] | vnb[2]) % 16 == 0 &&
           (uint64_t)k_off + k_extent < lim && (uint64_t)v_off + v_extent < lim;
}

int64_t rq_cl_pfast_rows(const ropeqk_plan *pl, int64_t most_rows, int *fm)
{
    const rq_problem *pb = &pl->pb;
    /* query vectors a work-group holds: 4 or 8 (the two kernels), fewer where Q's D dims take more than
     * RQ_FQF floats for 8 */
    int cap = 8 * pb->D <= RQ_FQF ? 8 : 4;
    *fm = pb->G * most_rows <= 4 || cap == 4 ? 4 : 8;
    int64_t gpg = pb->G < *fm ? pb->G : *fm;
    return *fm / gpg;
}

void rq_cl_pfast_geometry(const ropeqk_plan *pl, int fm, int64_t ngroups, int64_t cus, int64_t max_pages,
                       int64_t page_size, rq_paged_args *a, int64_t *nsplit, int64_t *kps, size_t g[3], size_t l[3])
{
    const rq_problem *pb = &pl->pb;
    a->gpg = (rq_i32)(pb->G < fm ? pb->G : fm);
    a->ngc = (rq_i32)((pb->G + a->gpg - 1) / a->gpg);
    a->kvpg = 1;
    a->kq = 1;
    a->dr = (rq_i32)rq_pfast_dr(pb->R, 0);
    /* V dims a chunk: (the work-items' cells: 4 query vectors x 4 dims) x key lanes within 128 */
    int64_t nmb = (fm + 3) / 4, dvch = RQ_FWG / nmb * RQ_FVD;
    a->dvch = (rq_i32)(pb->Dv < dvch ? pb->Dv : dvch);
    a->ndvc = (rq_i32)((pb->Dv + a->dvch - 1) / a->dvch);
    /* the split: work-groups for every compute unit a few times over (the context's paged_wgs, default
     * RQ_FSPLITS), no split under a tile, whole tiles where the pages allow */
    int64_t tasks = ngroups * pb->Hkv * a->ngc * a->ndvc;
    int64_t per = pl->ctx->tune.paged_wgs > 0 ? pl->ctx->tune.paged_wgs : RQ_FSPLITS;
    int64_t pps = rq_paged_pages_per_split(cus * per, tasks, max_pages, page_size, RQ_FWG, 0);
    int64_t tile_pages = (RQ_FWG + page_size - 1) / page_size;
    if (RQ_FWG % page_size == 0)
        pps = (pps + tile_pages - 1) / tile_pages * tile_pages;
    *nsplit = (max_pages + pps - 1) / pps;
    *kps = pps * page_size;
    g[0] = (size_t)ngroups * RQ_FWG, g[1] = (size_t)*nsplit, g[2] = (size_t)(pb->Hkv * a->ngc * a->ndvc);
    l[0] = RQ_FWG, l[1] = 1, l[2] = 1;
    rq_path_hit(RQ_PATH_PAGED_FAST);
}

ropeqk_status rq_cl_pfast_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fm)
{
    /* the longest run of consecutive rows sharing a page list and first key position (a sequence's
     * rows: a speculative step, a dense decode's Sq rows), up to the kernels' 8 query vectors */
    int64_t most = 1, run = 1;
    for (int64_t r = 1; r < m->rows && most < RQ_FM; r++) {
        run = m->v[r] == m->v[r - 1] && m->v[m->kpos_off + r] == m->v[m->kpos_off + r - 1] ? run + 1 : 1;
        most = run > most ? run : most;
    }
    return rq_paged_meta_groups(m, rq_cl_pfast_rows(pl, most, fm));
}
