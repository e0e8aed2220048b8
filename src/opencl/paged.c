/* Decode attention over a paged, unrotated KV cache (ROPEQK_OP_PAGED_DECODE) on OpenCL, and the cache
 * append. The core validated the description at plan creation (src/core/paged.c); each call's batch
 * and buffers go through the core's paged call checks (src/core/paged_call.c), which pack the batch
 * into one int32 metadata array, then three kernels are enqueued (cl/paged.cl): Q rotation (rope.cl's
 * kernel, the sequences as rows), pass 1 over the pages, the reduction of the splits. Nothing is
 * enqueued when a check fails. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(RQ_DT_F32 == ROPEQK_F32 && RQ_DT_F16 == ROPEQK_F16 && RQ_DT_BF16 == ROPEQK_BF16 &&
                   RQ_DT_I8 == ROPEQK_I8 && RQ_DT_E4M3 == ROPEQK_FP8_E4M3 && RQ_DT_E5M2 == ROPEQK_FP8_E5M2,
               "contract.h's storage-type codes are ropeqk_dtype's");

/* Pass 1 in the CPU shape (cl/paged.cl): the CPU profile, for the head dims its vectors cover. */
bool rq_paged_cpu_shape(const ropeqk_plan *pl)
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
ropeqk_status rq_paged_gpu_fit(ropeqk_ctx *ctx, const rq_problem *pb, rq_cl_plan *cp)
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

ropeqk_status rq_paged_plan_init(ropeqk_plan *pl, cl_program prog)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    const char *rot = pl->q.dtype == ROPEQK_F16    ? "rope_rotate_f16"
                      : pl->q.dtype == ROPEQK_BF16 ? "rope_rotate_bf16"
                                                   : "rope_rotate_f32";
    const char *names[7] = {rot, rq_paged_cpu_shape(pl) ? "paged_attn_cpu" : "paged_attn_gpu", "paged_combine",
                            "paged_append", "paged_append_q8", "paged_gather", "paged_gather_q8"};
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < 7 && !err; i++)
        cp->kx[i] = clCreateKernel(prog, names[i], &err);
    if (!err)
        err = clGetDeviceInfo(rq_cl(ctx)->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cp->cus, &cp->cus, NULL);
    if (err)
        return rq_cl_fail(ctx, err); /* kernels made so far: ropeqk_plan_destroy */
    if (cp->cus < 1)
        cp->cus = 1;
    return rq_paged_cpu_shape(pl) ? ROPEQK_SUCCESS : rq_paged_gpu_fit(ctx, &pl->pb, cp);
}

/* The call's metadata as a device buffer (copied at creation: the host array may go at once). */
cl_mem rq_paged_meta_upload(ropeqk_ctx *ctx, const rq_paged_meta *meta, cl_int *err)
{
    return clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, meta->n * sizeof(int32_t), meta->v,
                          err);
}

ropeqk_status rq_paged_cpu_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fast)
{
    if (*fast)
        return rq_pfast_groups(pl, m, fast);
    if (!rq_paged_cpu_shape(pl))
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

/* The buffers of a call as the core's checks see them. */
static ropeqk_status mems(ropeqk_ctx *ctx, const ropeqk_opencl_mem *in, rq_mem *out, int n)
{
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < n && !st; i++)
        st = rq_cl_mem(ctx, in[i], &out[i]);
    return st;
}

static ropeqk_status plan_is_cl(const ropeqk_plan *pl, const char *fn)
{
    if (!rq_is_cl(pl->ctx)) {
        rq_set_error("%s: the plan belongs to a %s context, not an OpenCL one", fn, pl->ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_paged_run(ropeqk_plan *pl, cl_command_queue queue, const rq_paged_launch *L, cl_kernel krot,
                           cl_kernel kp1, cl_kernel kcomb, cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_cl_plan *cp = rq_clp(pl);
    const int64_t n = L->n;
    /* the split, the scratch: Qr [n][Hq][D], part [n*Hq][nsplit][Dv] then (m, l) per row */
    bool gpu = !rq_paged_cpu_shape(pl);
    rq_paged_args a = {0};
    int64_t groups, nsplit, kps;
    size_t g1[3], l1[3];
    if (L->fast) { /* paged_fast.c */
        kp1 = cp->kfast[L->fast == 8];
        rq_pfast_geometry(pl, L->fast, L->ngroups, cp->cus, L->max_pages, L->page_size, &a, &nsplit, &kps, g1, l1);
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
    cl_event w1[1 + RQ_PAGED_MAX_META_WAIT];
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

/* The decode kernels of a batch with chunks: once per run of consecutive non-chunk sequences
 * (rq_paged_decode_run), over that run's rows alone (their own metadata, Q, O and LSE views moved to
 * the run's first row), each run after the one before (the scratch). A chunk's rows never reach the
 * kernels: as placeholders they cost a mixed step (ropeqk-bench --ragged: 4 decodes, 2 chunks of
 * 512 rows, a speculative step of 4; AMD EPYC, 2 cores, pocl) 20 ms of its 176, mostly the Q
 * rotation of 1024 rows x 32 heads with accurate angles. *event: the last run's last command. */
static ropeqk_status decode_runs(ropeqk_plan *pl, cl_command_queue queue, const rq_paged_launch *L,
                                 const rq_paged_meta *meta, const ropeqk_paged_batch *batch, cl_uint num_wait,
                                 const cl_event *wait, cl_event *event)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    ropeqk_status st = ROPEQK_SUCCESS;
    cl_event prev = NULL;
    int64_t s = 0, r0, r1;
    while (!st && rq_paged_decode_run(pl, batch, &s, &r0, &r1)) {
        rq_paged_meta sub;
        if ((st = rq_paged_meta_rows(meta, r0, r1, pl->paged.page_size, &sub)))
            break;
        int fast = L->fast;
        if ((st = rq_paged_cpu_groups(pl, &sub, &fast))) {
            free(sub.v);
            break;
        }
        rq_grave *grave = rq_cl_grave_new(); /* the run's metadata outlives its kernels (retire.c) */
        if (!grave) {
            free(sub.v);
            st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
            break;
        }
        cl_int err = CL_SUCCESS;
        cl_mem mbuf = rq_paged_meta_upload(ctx, &sub, &err);
        if (err) {
            free(grave);
            free(sub.v);
            st = rq_cl_fail(ctx, err);
            break;
        }
        rq_paged_launch R = *L;
        R.meta = R.qpos = mbuf;
        R.lens_off = sub.lens_off, R.qpos_off = sub.qpos_off, R.kpos_off = sub.kpos_off, R.pages_off = sub.pages_off;
        R.n = R.nbat = r1 - r0;
        R.max_pages = sub.max_pages;
        R.rg_off = sub.groups_off, R.ngroups = sub.ngroups, R.group_rows = sub.group_rows, R.fast = fast;
        R.ra.S = (rq_i32)(r1 - r0), R.ra.pos_off = sub.qpos_off;
        R.ra.src_off += (rq_i64)(r0 * pl->q.nb[0]);
        R.out.offset += (size_t)(r0 * pl->out.nb[0]);
        if (pl->with_lse)
            R.lse.offset += (size_t)(r0 * pl->lse.nb[0]);
        cl_event ran = NULL;
        st = rq_paged_run(pl, queue, &R, cp->kx[0], cp->kx[1], cp->kx[2], prev ? 1 : num_wait, prev ? &prev : wait,
                          &ran);
        rq_cl_bury_mem(ctx, grave, mbuf, ran ? 1 : 0, &ran); /* once the run's kernels have completed */
        free(sub.v);
        if (prev)
            clReleaseEvent(prev);
        prev = ran;
    }
    if (!st && event) {
        *event = prev;
        prev = NULL;
    }
    if (prev)
        clReleaseEvent(prev);
    return st;
}

static ropeqk_status paged_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_paged_args *args,
                                   const ropeqk_paged_batch *batch, cl_uint num_wait, const cl_event *wait,
                                   cl_event *event)
{
    const char *fn = "ropeqk_opencl_paged_enqueue";
    ropeqk_status st = plan_is_cl(pl, fn);
    if (st)
        return st;
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_cl_plan *cp = rq_clp(pl);
    const ropeqk_opencl_mem in[7] = {args->q,   args->k_cache, args->v_cache, args->out,
                                     args->lse, args->k_scale, args->v_scale};
    rq_mem mm[7];
    if ((st = mems(ctx, in, mm, 7)))
        return st;
    rq_paged_mems pm = {mm[0], mm[1], mm[2], mm[3], mm[4], mm[5], mm[6]};
    rq_paged_meta meta;
    if ((st = rq_paged_call_check(pl, &pm, batch, fn, &meta)))
        return st;
    const int64_t n = meta.rows; /* the query rows are the kernels' sequences (src/core/paged_rows.c) */
    /* long chunks take the attention kernel after the decode kernels (src/opencl/paged_chunk.c) */
    const int64_t nchunks = rq_paged_chunk_mark(pl, batch, &meta);
    const ropeqk_tensor *k = &pl->k, *v = &pl->v;
    const int64_t knb[3] = {k->nb[0], k->nb[1], k->nb[2]}, vnb[3] = {v->nb[0], v->nb[1], v->nb[2]};
    int fast = rq_pfast_call_ok(pl, args->k_cache.offset, knb, args->v_cache.offset, vnb, pb->k_extent, pb->v_extent);
    if (nchunks == 0 && (st = rq_paged_cpu_groups(pl, &meta, &fast))) { /* with chunks: decode_runs' own */
        free(meta.v);
        return st;
    }
    rq_grave *grave = rq_cl_grave_new(); /* the metadata outlives the kernels using it (retire.c) */
    if (!grave) {
        free(meta.v);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    cl_int err = CL_SUCCESS;
    cl_mem mbuf = rq_paged_meta_upload(ctx, &meta, &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        free(grave);
        free(meta.v);
        return st;
    }
    if (!queue)
        queue = rq_cl(ctx)->queue;
    const ropeqk_tensor *q = &pl->q, *o = &pl->out, *ls = &pl->lse;
    rq_paged_launch L = {
        .fn = fn, .meta = mbuf, .lens_off = meta.lens_off, .qpos_off = meta.qpos_off, .kpos_off = meta.kpos_off,
        .pages_off = meta.pages_off, .n = n, .max_pages = meta.max_pages, .page_size = pl->paged.page_size,
        .rg_off = meta.groups_off, .ngroups = meta.ngroups, .group_rows = meta.group_rows,
        .nbat = n,
        /* Q: the query rows are the rows of one batch of Hq heads; positions from the metadata */
        .ra = {
            .src_off = (rq_i64)args->q.offset, .nb0 = 0, .nb1 = q->nb[1], .nb2 = q->nb[0], .nb3 = q->nb[3],
            .pos_off = meta.qpos_off, .d_bh = pb->D, .d_row = pb->Hq * pb->D, .d_dim = 1, .H = (rq_i32)pb->Hq,
            .BH = (rq_i32)pb->Hq, .S = (rq_i32)n, .D = (rq_i32)pb->D, .R = (rq_i32)pb->R, .layout = pb->layout,
            .use_pos = 1, .pos_base = 0, .G = 1, .rot_mul = (float)pb->attn, .out_mul = (float)pb->scale,
            .pos_stride = 0, .rot_off = (rq_i32)pb->rot_off, /* one stream: the core refuses M-RoPE here */
        },
        .q = args->q, .qpos = mbuf, .k = args->k_cache, .v = args->v_cache, .out = args->out, .lse = args->lse,
        .knb = {k->nb[0], k->nb[1], k->nb[2]}, .vnb = {v->nb[0], v->nb[1], v->nb[2]},
        .onb = {o->nb[0], o->nb[1], 0, o->nb[3]}, .lnb = {ls->nb[0], ls->nb[1], 0},
        .ks = args->k_scale, .vs = args->v_scale, .fast = fast,
    };
    cl_event ran = NULL, chained = NULL; /* the combine's event; the chunks' last command after it */
    if (nchunks == batch->n_seqs) { /* every row is a chunk's: no decode kernels, no placeholder rows */
        cl_int merr = clEnqueueMarkerWithWaitList(queue, num_wait, wait, &ran);
        st = merr ? rq_cl_fail(ctx, merr) : ROPEQK_SUCCESS;
    } else if (nchunks > 0)
        st = decode_runs(pl, queue, &L, &meta, batch, num_wait, wait, &ran);
    else
        st = rq_paged_run(pl, queue, &L, cp->kx[0], cp->kx[1], cp->kx[2], num_wait, wait, &ran);
    if (!st && nchunks > 0)
        st = rq_paged_chunks_enqueue(pl, queue, args, batch, &meta, mbuf, ran, &chained);
    if (chained) {
        clReleaseEvent(ran);
        ran = chained;
    }
    rq_cl_bury_mem(ctx, grave, mbuf, ran ? 1 : 0, &ran); /* once the kernels using it have completed */
    if (!st && event) {
        *event = ran;
        ran = NULL;
    }
    if (ran)
        clReleaseEvent(ran);
    free(meta.v);
    return st;
}

/* ---- append ------------------------------------------------------------------------------------ */

static ropeqk_status paged_append(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_tensor *k_new,
                                  ropeqk_opencl_mem k_new_mem, const ropeqk_tensor *v_new, ropeqk_opencl_mem v_new_mem,
                                  const ropeqk_opencl_paged_cache *cache, const ropeqk_paged_batch *batch,
                                  cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    const char *fn = "ropeqk_opencl_paged_append";
    ropeqk_status st = plan_is_cl(pl, fn);
    if (st)
        return st;
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_cl_plan *cp = rq_clp(pl);
    const ropeqk_opencl_mem k_cache = cache->k_cache, v_cache = cache->v_cache;
    const ropeqk_opencl_mem in[6] = {k_new_mem, v_new_mem, k_cache, v_cache, cache->k_scale, cache->v_scale};
    rq_mem mm[6];
    if ((st = mems(ctx, in, mm, 6)))
        return st;
    rq_append_mems am = {mm[0], mm[1], mm[2], mm[3], mm[4], mm[5]};
    rq_paged_meta meta;
    if ((st = rq_append_call_check(pl, k_new, v_new, &am, batch, fn, &meta)))
        return st;
    const int64_t n = batch->n_seqs, n_new = k_new->ne[2];
    cl_int err = CL_SUCCESS;
    rq_grave *grave = rq_cl_grave_new(); /* the metadata outlives the kernels using it (retire.c) */
    if (!grave) {
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    cl_mem mbuf = rq_paged_meta_upload(ctx, &meta, &err);
    if (err) {
        free(grave);
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    if (!queue)
        queue = rq_cl(ctx)->queue;
    const ropeqk_tensor *src[2] = {k_new, v_new}, *dst[2] = {&pl->k, &pl->v};
    const ropeqk_opencl_mem smem[2] = {k_new_mem, v_new_mem}, dmem[2] = {k_cache, v_cache};
    const ropeqk_opencl_mem qmem[2] = {cache->k_scale, cache->v_scale};
    cl_event ev[2] = {NULL, NULL};
    pthread_mutex_lock(&cp->lock);
    for (int i = 0; i < 2 && !err; i++) {
        if (rq_dtype_q8(dst[i]->dtype)) { /* quantized: a work-item per row (cl/quant.cl) */
            int64_t rows = n * pb->Hkv * n_new;
            rq_pappq_args qa = {
                .src_off = (rq_i64)smem[i].offset, .snb0 = src[i]->nb[0], .snb1 = src[i]->nb[1],
                .snb2 = src[i]->nb[2], .dst_off = (rq_i64)dmem[i].offset, .dnb0 = dst[i]->nb[0],
                .dnb1 = dst[i]->nb[1], .dnb2 = dst[i]->nb[2], .scale_off = (rq_i64)(qmem[i].offset / sizeof(float)),
                .Hkv = (rq_i32)pb->Hkv, .n_new = (rq_i32)n_new, .ps = (rq_i32)pl->paged.page_size,
                .dim = (rq_i32)src[i]->ne[3], .lens_off = meta.lens_off, .pages_off = meta.pages_off,
                .rows = (rq_i32)rows, .sdt = (rq_i32)src[i]->dtype, .qdt = (rq_i32)dst[i]->dtype,
            };
            RQ_SET_ARG(cp->kx[4], RQ_PQ_SRC, smem[i].buf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_META, mbuf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_DST, dmem[i].buf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_SCALE, qmem[i].buf);
            RQ_SET_ARG(cp->kx[4], RQ_PQ_A, qa);
            size_t g = rq_round_up((size_t)rows, RQ_PCWG), l = RQ_PCWG;
            if (!err)
                err = clEnqueueNDRangeKernel(queue, cp->kx[4], 1, NULL, &g, &l, num_wait, wait, &ev[i]);
            continue;
        }
        int64_t units = src[i]->ne[3] * (int64_t)ropeqk_dtype_size(src[i]->dtype) / 2;
        rq_papp_args a = {
            .src_off = (rq_i64)smem[i].offset, .snb0 = src[i]->nb[0], .snb1 = src[i]->nb[1], .snb2 = src[i]->nb[2],
            .dst_off = (rq_i64)dmem[i].offset, .dnb0 = dst[i]->nb[0], .dnb1 = dst[i]->nb[1], .dnb2 = dst[i]->nb[2],
            .Hkv = (rq_i32)pb->Hkv, .n_new = (rq_i32)n_new, .ps = (rq_i32)pl->paged.page_size,
            .units = (rq_i32)units, .lens_off = meta.lens_off, .pages_off = meta.pages_off,
        };
        RQ_SET_ARG(cp->kx[3], RQ_PA_SRC, smem[i].buf);
        RQ_SET_ARG(cp->kx[3], RQ_PA_META, mbuf);
        RQ_SET_ARG(cp->kx[3], RQ_PA_DST, dmem[i].buf);
        RQ_SET_ARG(cp->kx[3], RQ_PA_A, a);
        size_t g[3] = {rq_round_up((size_t)units, RQ_PCWG), (size_t)n_new, (size_t)(n * pb->Hkv)}, l[3] = {RQ_PCWG, 1, 1};
        if (!err)
            err = clEnqueueNDRangeKernel(queue, cp->kx[3], 3, NULL, g, l, num_wait, wait, &ev[i]);
    }
    pthread_mutex_unlock(&cp->lock);
    if (!err && event)
        err = clEnqueueMarkerWithWaitList(queue, 2, ev, event);
    if (err)
        st = rq_cl_fail(ctx, err);
    cl_uint nev = ev[0] ? (ev[1] ? 2 : 1) : 0; /* ev[1] is set only after ev[0] */
    rq_cl_bury_mem(ctx, grave, mbuf, nev, ev); /* once the kernels using it have completed */
    for (int i = 0; i < 2; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
done:
    free(meta.v);
    return st;
}


/* The public entry points: the call's last event is recorded (also when the caller takes none), so
 * that the plan's kernels and buffers outlive its commands (retire.c). */
ropeqk_status ropeqk_opencl_paged_enqueue(ropeqk_plan *pl, cl_command_queue queue,
                                          const ropeqk_opencl_paged_args *args, const ropeqk_paged_batch *batch,
                                          cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    if (event)
        *event = NULL;
    if (!pl || !args || !batch || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    cl_event own = NULL, *evp = event ? event : &own;
    ropeqk_status st = paged_enqueue(pl, queue, args, batch, num_wait, wait, evp);
    if (!st && rq_is_cl(pl->ctx))
        rq_cl_track(pl->ctx, *evp);
    if (own)
        clReleaseEvent(own);
    return st;
}

ropeqk_status ropeqk_opencl_paged_append(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_tensor *k_new,
                                         ropeqk_opencl_mem k_new_mem, const ropeqk_tensor *v_new,
                                         ropeqk_opencl_mem v_new_mem, const ropeqk_opencl_paged_cache *cache,
                                         const ropeqk_paged_batch *batch, cl_uint num_wait, const cl_event *wait,
                                         cl_event *event)
{
    if (event)
        *event = NULL;
    if (!pl || !k_new || !v_new || !cache || !batch || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    cl_event own = NULL, *evp = event ? event : &own;
    ropeqk_status st =
        paged_append(pl, queue, k_new, k_new_mem, v_new, v_new_mem, cache, batch, num_wait, wait, evp);
    if (!st && rq_is_cl(pl->ctx))
        rq_cl_track(pl->ctx, *evp);
    if (own)
        clReleaseEvent(own);
    return st;
}
