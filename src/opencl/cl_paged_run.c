/* The paged decode's three kernels on OpenCL (cl/paged.cl): Q rotation (rope.cl's kernel, the
 * sequences as rows), pass 1 over the pages (paged_attn_cpu, paged_attn_gpu, or cl_paged_fast.c's
 * paged_attn_fast4/8), the reduction of the splits (paged_combine), over sequences a metadata buffer
 * describes: their shape on this device, the split, the scratch and the launches. Shared by the paged
 * decode (cl_paged.c) and the dense decode (cl_dense.c), which sit above it; it calls only cl_paged_fast.c
 * and the helpers below every operation (cl_launch.c, cl_pool.c, cl_err.c). */
#include "ocl.h"

/* Pass 1 in the CPU shape (cl/paged.cl): the CPU profile, for the head dims its vectors cover. */
bool rq_cl_paged_cpu_shape(const ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    return pl->ctx->tune.profile != ROPEQK_PROFILE_GPU && pb->D % 16 == 0 && pb->R % 32 == 0 && pb->rot_off % 16 == 0 &&
           pb->D <= RQ_DMAXD && pb->Dv <= RQ_DMAXD;
}

/* paged_attn_gpu's work-group size: 128 work-items, or as many as cover Dv with RQ_PVT dims each up to
 * RQ_PWG (so that one work-group reads and scores K once for all of V's dims), within what the device
 * runs the compiled kernel with (CL_KERNEL_WORK_GROUP_SIZE: registers per work-item can lower it
 * below CL_DEVICE_MAX_WORK_GROUP_SIZE): the largest power of two within all three. The kernel takes
 * any power of two (cl/paged.cl): a smaller work-group covers fewer V dims per chunk (more chunks,
 * each scoring the keys again) and runs each step of a tile in more rounds, so a device that cannot
 * run 128 still runs every shape. Its local memory (RQ_PAGED_LOCAL_BYTES, whatever D, Dv and the
 * heads) is checked against the device's: ROPEQK_ERR_TOO_LARGE at plan creation where it does not
 * fit (a full-profile OpenCL 1.2 device has at least 32 KiB). */
ropeqk_status rq_cl_paged_gpu_fit(ropeqk_ctx *ctx, const rq_problem *pb, rq_cl_plan *cp)
{
    size_t kwg = 0;
    cl_ulong lm = 0;
    cl_int err = clGetKernelWorkGroupInfo(cp->kx[1], rq_cl(ctx)->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg,
                                          NULL);
    if (!err)
        err = clGetKernelWorkGroupInfo(cp->kx[1], rq_cl(ctx)->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
    if (err)
        return rq_cl_fail(ctx, err);
    size_t cap = 128;
    while (cap < RQ_PWG && (int64_t)cap * RQ_PVT < pb->Dv)
        cap *= 2;
    if (kwg < cap)
        cap = kwg;
    if (ctx->dev.max_wg > 0 && ctx->dev.max_wg < cap)
        cap = ctx->dev.max_wg;
    cl_uint wg = 1;
    while ((size_t)wg * 2 <= cap)
        wg *= 2;
    if (cap < 1 || (ctx->dev.local_mem > 0 && (lm > ctx->dev.local_mem || RQ_PAGED_LOCAL_BYTES > ctx->dev.local_mem))) {
        rq_set_error("paged decode: the device cannot run paged_attn_gpu (kernel work-group limit %zu, %llu bytes "
                     "of local memory against the device's %zu)", kwg, (unsigned long long)lm, ctx->dev.local_mem);
        return ROPEQK_ERR_TOO_LARGE;
    }
    cp->pwg = wg;
    return ROPEQK_SUCCESS;
}

/* The call's metadata as a device buffer (copied at creation: the host array may go at once). */
cl_mem rq_cl_paged_meta_upload(ropeqk_ctx *ctx, const rq_paged_meta *meta, cl_int *err)
{
    return clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, meta->n * sizeof(int32_t), meta->v,
                          err);
}

ropeqk_status rq_cl_paged_cpu_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fast)
{
    if (*fast)
        return rq_cl_pfast_groups(pl, m, fast);
    if (!rq_cl_paged_cpu_shape(pl))
        return ROPEQK_SUCCESS;
    /* a task holds RQ_PCH (row, query head) pairs: all G heads of a KV head for as many rows as fit */
    return rq_paged_meta_groups(m, pl->pb.G <= RQ_PCH ? RQ_PCH / pl->pb.G : 1);
}

/* Head groups of pass 1 (contract.h's rq_paged_args): *groups tasks per (split, sequence or row group
 * of `rows` rows, the CPU shape's); on the GPU shape (work-groups of wg) the key lanes and the V
 * chunks: as many key lanes (up to RQ_PKQ) as leave the chunk covering Dv, so that a small Dv still
 * keeps every work-item busy. */
static void head_groups(const rq_problem *pb, bool gpu, int64_t wg, int64_t rows, rq_paged_args *a, int64_t *groups)
{
    int64_t cap = gpu ? RQ_PGH : RQ_PCH / (rows < 1 ? 1 : rows);
    if (!gpu && pb->G <= cap) { /* CPU: whole KV heads together, so their keys' angles are shared */
        a->kvpg = (rq_i32)(cap / pb->G < pb->Hkv ? cap / pb->G : pb->Hkv);
        a->ngc = 1;
        a->gpg = (rq_i32)pb->G;
        *groups = (pb->Hkv + a->kvpg - 1) / a->kvpg;
    } else { /* one KV head, its query heads in chunks of at most cap */
        a->kvpg = 1;
        a->ngc = (rq_i32)((pb->G + cap - 1) / cap);
        a->gpg = (rq_i32)(pb->G < cap ? pb->G : cap);
        *groups = pb->Hkv * a->ngc;
    }
    a->kq = 1;
    while (gpu && a->kq < RQ_PKQ && wg / (2 * a->kq) >= 1 && wg / (2 * a->kq) * RQ_PVT >= pb->Dv)
        a->kq *= 2;
    a->dvch = gpu ? (rq_i32)(wg / a->kq * RQ_PVT) : (rq_i32)pb->Dv;
    a->ndvc = gpu ? (rq_i32)((pb->Dv + a->dvch - 1) / a->dvch) : 1;
}

ropeqk_status rq_cl_paged_run(ropeqk_plan *pl, cl_command_queue queue, const rq_cl_paged_launch *L, cl_kernel krot,
                              cl_kernel kp1, cl_kernel kcomb, cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_cl_plan *cp = rq_clp(pl);
    const int64_t n = L->n;
    /* the split, the scratch: Qr [n][Hq][D], part [n*Hq][nsplit][Dv] then (m, l) per row */
    bool gpu = !rq_cl_paged_cpu_shape(pl);
    rq_paged_args a = {0};
    int64_t groups, nsplit, kps;
    size_t g1[3], l1[3];
    if (L->fast) { /* cl_paged_fast.c */
        kp1 = cp->kfast[L->fast == 8];
        rq_cl_pfast_geometry(pl, L->fast, L->ngroups, cp->cus, L->max_pages, L->page_size, &a, &nsplit, &kps, g1, l1);
    } else {
        head_groups(pb, gpu, cp->pwg, gpu ? 1 : L->group_rows, &a, &groups);
        const int64_t nt = gpu ? n : L->ngroups; /* pass 1's tasks per (split, head group) */
        int64_t pps = rq_paged_pages_per_split((int64_t)cp->cus * (gpu ? 8 : 4), nt * groups * a.ndvc, L->max_pages,
                                               L->page_size, gpu ? 256 : 512, 0);
        nsplit = (L->max_pages + pps - 1) / pps, kps = pps * L->page_size;
        g1[0] = gpu ? (size_t)nsplit * cp->pwg : (size_t)nsplit, g1[1] = (size_t)(groups * a.ndvc);
        g1[2] = (size_t)nt, l1[0] = gpu ? cp->pwg : 1, l1[1] = 1, l1[2] = 1;
    }
    int64_t rows = n * pb->Hq;
    size_t qr_bytes, part_n, part_bytes;
    if (__builtin_mul_overflow((size_t)rows, (size_t)pb->D * sizeof(float), &qr_bytes) ||
        __builtin_mul_overflow((size_t)(rows * nsplit), (size_t)pb->Dv + 2, &part_n) ||
        __builtin_mul_overflow(part_n, sizeof(float), &part_bytes) || qr_bytes > rq_cl(ctx)->max_alloc ||
        part_bytes > rq_cl(ctx)->max_alloc || rows > INT32_MAX || kps > INT32_MAX || nsplit > INT32_MAX) {
        rq_set_error("%s: the scratch for this batch exceeds the device's allocation limit", L->fn);
        return ROPEQK_ERR_TOO_LARGE;
    }
    ropeqk_status st;
    rq_scratch *sq = NULL, *sp = NULL;
    if ((st = rq_scratch_get(ctx, qr_bytes, &sq)) || (st = rq_scratch_get(ctx, part_bytes, &sp))) {
        rq_scratch_put(ctx, sq, 0, NULL);
        return st;
    }
    a.k_off = (rq_i64)L->k.offset, a.knb0 = L->knb[0], a.knb1 = L->knb[1], a.knb2 = L->knb[2];
    a.v_off = (rq_i64)L->v.offset, a.vnb0 = L->vnb[0], a.vnb1 = L->vnb[1], a.vnb2 = L->vnb[2];
    a.window = pb->window;
    a.ml_off = (rq_i64)(rows * nsplit * pb->Dv);
    a.Hq = (rq_i32)pb->Hq, a.Hkv = (rq_i32)pb->Hkv, a.G = (rq_i32)pb->G, a.D = (rq_i32)pb->D;
    a.Dv = (rq_i32)pb->Dv, a.R = (rq_i32)pb->R, a.layout = pb->layout, a.causal = pb->causal;
    a.ps = (rq_i32)L->page_size, a.kps = (rq_i32)kps, a.nsplit = (rq_i32)nsplit;
    a.lens_off = L->lens_off, a.qpos_off = L->qpos_off, a.kpos_off = L->kpos_off;
    a.pages_off = L->pages_off, a.rot_mul = (float)pb->attn;
    a.softcap = (float)pb->softcap, a.rot_off = (rq_i32)pb->rot_off;
    a.kdt = (rq_i32)pl->k.dtype, a.vdt = (rq_i32)pl->v.dtype;
    a.rg_off = L->rg_off;
    a.ks_off = (rq_i64)(L->ks.offset / sizeof(float)), a.vs_off = (rq_i64)(L->vs.offset / sizeof(float));
    rq_pcomb_args ca = {
        .out_off = (rq_i64)L->out.offset, .onb0 = L->onb[0], .onb1 = L->onb[1], .onb2 = L->onb[2],
        .onb3 = L->onb[3], .lse_off = (rq_i64)L->lse.offset, .lnb0 = L->lnb[0], .lnb1 = L->lnb[1],
        .lnb2 = L->lnb[2], .ml_off = a.ml_off, .Hq = (rq_i32)pb->Hq, .Dv = (rq_i32)pb->Dv,
        .nsplit = (rq_i32)nsplit, .kps = (rq_i32)kps, .lens_off = L->lens_off, .use_lse = pl->with_lse,
        .rows = (rq_i32)rows, .odt = (rq_i32)pl->out.dtype, .use_sinks = cp->sinks != NULL,
        .nbat = (rq_i32)L->nbat,
    };
    rq_rotate_args ra = L->ra;
    cl_mem lse_buf = pl->with_lse ? L->lse.buf : cp->vfreq; /* never written without LSE: any buffer */
    cl_mem sink_buf = cp->sinks ? cp->sinks : cp->vfreq;    /* never read without sinks */
    /* scales: read only for 8-bit caches (the core checked they are given exactly then) */
    cl_mem ks_buf = L->ks.buf ? L->ks.buf : cp->vfreq, vs_buf = L->vs.buf ? L->vs.buf : cp->vfreq;
    cl_event ev[3] = {NULL, NULL, NULL};
    size_t rg[3], rl_[3];
    rq_rotate_grid(&ctx->tune, ra.S, pb->R / 2 + (pb->D - pb->R), ra.BH, rg, rl_);
    size_t g2[2] = {rq_round_up((size_t)pb->Dv, RQ_PCWG), (size_t)rows}, l2[2] = {RQ_PCWG, 1};

    cl_int err = CL_SUCCESS;
    pthread_mutex_lock(&cp->lock); /* the kernels' arguments are the plan's: set and enqueue as one step */
    RQ_SET_ARG(krot, RQ_ROT_SRC, L->q.buf);
    RQ_SET_ARG(krot, RQ_ROT_POS, L->qpos);
    RQ_SET_ARG(krot, RQ_ROT_FREQ, cp->vfreq);
    RQ_SET_ARG(krot, RQ_ROT_DST, sq->buf);
    RQ_SET_ARG(krot, RQ_ROT_A, ra);
    if (!err)
        err = clEnqueueNDRangeKernel(queue, krot, 3, NULL, rg, rl_, num_wait, wait, &ev[0]);
    RQ_SET_ARG(kp1, RQ_PG_K, L->k.buf);
    RQ_SET_ARG(kp1, RQ_PG_V, L->v.buf);
    RQ_SET_ARG(kp1, RQ_PG_META, L->meta);
    RQ_SET_ARG(kp1, RQ_PG_FREQ, cp->vfreq);
    RQ_SET_ARG(kp1, RQ_PG_QR, sq->buf);
    RQ_SET_ARG(kp1, RQ_PG_PART, sp->buf);
    RQ_SET_ARG(kp1, RQ_PG_KS, ks_buf);
    RQ_SET_ARG(kp1, RQ_PG_VS, vs_buf);
    if (L->fast) { /* the same buffers, then its table (contract.h RQ_PFAST_ARGS) */
        RQ_SET_ARG(kp1, RQ_PF_TAB, cp->ftab);
        RQ_SET_ARG(kp1, RQ_PF_A, a);
    } else
        RQ_SET_ARG(kp1, RQ_PG_A, a);
    /* pass 1 waits for Q's rotation, and for the caller's list too: the metadata may be written by
     * commands of that list (the dense decode's position copies) that the rotation does not wait for */
    cl_uint n1 = 1 + L->meta_nwait;
    cl_event w1[1 + RQ_CL_PAGED_MAX_META_WAIT];
    w1[0] = ev[0];
    for (cl_uint i = 0; i < L->meta_nwait; i++)
        w1[1 + i] = L->meta_wait[i];
    if (!err)
        err = clEnqueueNDRangeKernel(queue, kp1, 3, NULL, g1, l1, n1, w1, &ev[1]);
    RQ_SET_ARG(kcomb, RQ_PC_PART, sp->buf);
    RQ_SET_ARG(kcomb, RQ_PC_META, L->meta);
    RQ_SET_ARG(kcomb, RQ_PC_OUT, L->out.buf);
    RQ_SET_ARG(kcomb, RQ_PC_LSE, lse_buf);
    RQ_SET_ARG(kcomb, RQ_PC_SINK, sink_buf);
    RQ_SET_ARG(kcomb, RQ_PC_A, ca);
    if (!err)
        err = clEnqueueNDRangeKernel(queue, kcomb, 2, NULL, g2, l2, 1, &ev[1], &ev[2]);
    pthread_mutex_unlock(&cp->lock);
    if (err)
        st = rq_cl_fail(ctx, err);
    /* scratch reusable once the last enqueued command has completed (each waits for the one before) */
    cl_event last = ev[2] ? ev[2] : ev[1] ? ev[1] : ev[0];
    rq_scratch_put(ctx, sq, last ? 1 : 0, &last);
    rq_scratch_put(ctx, sp, last ? 1 : 0, &last);
    if (!err && event) {
        *event = ev[2];
        ev[2] = NULL;
    }
    for (int i = 0; i < 3; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    return st;
}
