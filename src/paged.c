/* Decode attention over a paged, unrotated KV cache (ROPEQK_OP_PAGED_DECODE), and the cache append.
 *
 * Plan creation (plan.c) validates the description here (rq_paged_validate: the paged rules, then
 * the shared attention validation on stand-in descriptors), computes the frequencies, and calls
 * rq_paged_plan_init for the kernels. Each enqueue validates the host batch (lengths, page-table rows,
 * positions) while packing it into one int32 metadata buffer, checks the device buffers, picks the
 * split of the pages, then enqueues three kernels (cl/paged.cl): Q rotation (rope.cl's kernel, the
 * sequences as rows), pass 1 over the pages, the reduction of the splits. Nothing is enqueued when a
 * check fails. */
#include "ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest sequence a plan may describe (max_pages_per_seq * page_size): keeps every key index and
 * block bound of the kernels far inside int32. */
#define RQ_PAGED_MAX_CAPACITY (INT64_C(1) << 30)

_Static_assert(RQ_DT_F32 == ROPEQK_F32 && RQ_DT_F16 == ROPEQK_F16 && RQ_DT_BF16 == ROPEQK_BF16,
               "contract.h's storage-type codes are ropeqk_dtype's");

ropeqk_status rq_paged_validate(const ropeqk_plan_desc *d, rq_problem *pb)
{
    const ropeqk_paged_desc *pg = &d->paged;
    const char *fn = "ropeqk_plan_create (paged decode)";
    if (d->positions != ROPEQK_POS_OFFSETS) {
        rq_set_error("%s: positions come from the batch at enqueue; desc.positions must be ROPEQK_POS_OFFSETS", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->params.q_pos_offset != 0 || d->params.k_pos_offset != 0) {
        rq_set_error("%s: params.q_pos_offset and k_pos_offset must be 0 (positions come from the batch)", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->page_size < 16 || pg->page_size > 256) {
        rq_set_error("%s: page_size %lld outside [16, 256]", fn, (long long)pg->page_size);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->max_pages_per_seq < 1 || pg->max_pages_per_seq > RQ_PAGED_MAX_CAPACITY / pg->page_size) {
        rq_set_error("%s: max_pages_per_seq %lld outside [1, %lld] (at most 2^30 tokens per sequence)", fn,
                     (long long)pg->max_pages_per_seq, (long long)(RQ_PAGED_MAX_CAPACITY / pg->page_size));
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->max_seqs < 1 || pg->max_seqs > INT32_MAX) {
        rq_set_error("%s: max_seqs %lld outside [1, INT32_MAX]", fn, (long long)pg->max_seqs);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->q.ne[0] != pg->max_seqs || d->q.ne[2] != 1) {
        rq_set_error("%s: q must be [max_seqs, Hq, 1, D] (max_seqs %lld; q.ne[0] %lld, q.ne[2] %lld)", fn,
                     (long long)pg->max_seqs, (long long)d->q.ne[0], (long long)d->q.ne[2]);
        return ROPEQK_ERR_BAD_SHAPE;
    }
    if (d->k.ne[2] != pg->page_size || d->v.ne[2] != pg->page_size) {
        rq_set_error("%s: the caches must be [num_pages, Hkv, page_size, D or Dv]: k.ne[2] %lld, v.ne[2] %lld, "
                     "page_size %lld", fn, (long long)d->k.ne[2], (long long)d->v.ne[2], (long long)pg->page_size);
        return ROPEQK_ERR_BAD_SHAPE;
    }
    /* Q, out, lse and every parameter through the attention validation, against stand-in caches of
     * one sequence's capacity per batch entry. Per-token positions: DYNAMIC and LONGROPE need an
     * explicit seq_len (positions vary per enqueue). */
    int64_t cap = pg->max_pages_per_seq * pg->page_size;
    ropeqk_tensor ks = ropeqk_tensor_bhsd(d->k.dtype, pg->max_seqs, d->k.ne[1], cap, d->k.ne[3]);
    ropeqk_tensor vs = ropeqk_tensor_bhsd(d->v.dtype, pg->max_seqs, d->v.ne[1], cap, d->v.ne[3]);
    rq_problem r;
    ropeqk_status st = rq_validate_attention(&d->params, &d->q, &ks, &vs, &d->out, d->with_lse ? &d->lse : NULL,
                                             false, true, &r);
    if (st) {
        ropeqk_scaling_type t = d->params.scaling.type;
        if (st == ROPEQK_ERR_BAD_SCALING && (t == ROPEQK_SCALING_DYNAMIC || t == ROPEQK_SCALING_LONGROPE) &&
            d->params.scaling.seq_len == 0)
            rq_set_error("%s: DYNAMIC and LONGROPE scaling need scaling.seq_len (positions vary per enqueue)", fn);
        else
            rq_set_error("%s: q, out, lse, the caches' dtypes or head counts, or the parameters: %s", fn,
                         ropeqk_status_string(st));
        return st;
    }
    /* the caches' own views (dtype, strides, aliasing, extent, heads, dims) against a stand-in Q of
     * one row per page */
    ropeqk_tensor qs = ropeqk_tensor_bhsd(d->q.dtype, d->k.ne[0], d->q.ne[1], 1, d->q.ne[3]);
    ropeqk_tensor os = ropeqk_tensor_bhsd(ROPEQK_F32, d->k.ne[0], d->q.ne[1], 1, d->v.ne[3]);
    rq_problem c;
    if ((st = rq_validate_attention(&d->params, &qs, &d->k, &d->v, &os, NULL, false, true, &c))) {
        rq_set_error("%s: the K or V cache view: %s", fn, ropeqk_status_string(st));
        return st;
    }
    r.k_extent = c.k_extent;
    r.v_extent = c.v_extent;
    *pb = r;
    return ROPEQK_SUCCESS;
}

/* Pass 1 in the CPU shape (cl/paged.cl): the CPU profile, for the head dims its vectors cover. */
static bool cpu_shape(const ropeqk_plan *pl)
{
    const rq_problem *pb = &pl->pb;
    return pl->ctx->tune.profile != ROPEQK_PROFILE_GPU && pb->D % 16 == 0 && pb->R % 32 == 0 && pb->D <= RQ_DMAXD;
}

ropeqk_status rq_paged_plan_init(ropeqk_plan *pl, cl_program prog)
{
    ropeqk_ctx *ctx = pl->ctx;
    const char *rot = pl->q.dtype == ROPEQK_F16    ? "rope_rotate_f16"
                      : pl->q.dtype == ROPEQK_BF16 ? "rope_rotate_bf16"
                                                   : "rope_rotate_f32";
    const char *names[4] = {rot, cpu_shape(pl) ? "paged_attn_cpu" : "paged_attn_gpu", "paged_combine",
                            "paged_append"};
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < 4 && !err; i++)
        pl->kx[i] = clCreateKernel(prog, names[i], &err);
    if (!err)
        err = clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof pl->cus, &pl->cus, NULL);
    if (err)
        return rq_cl_fail(ctx, err); /* kernels made so far: ropeqk_plan_destroy */
    if (pl->cus < 1)
        pl->cus = 1;
    return ROPEQK_SUCCESS;
}

/* ---- the host batch ---------------------------------------------------------------------------- */

/* The call's metadata as a device buffer (copied at creation: the host array may go at once). */
static cl_mem meta_upload(ropeqk_ctx *ctx, const rq_paged_meta *meta, cl_int *err)
{
    return clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, meta->n * sizeof(int32_t), meta->v,
                          err);
}

static bool bit_test_set(unsigned char *bits, int32_t i)
{
    unsigned char m = (unsigned char)(1u << (i & 7));
    bool was = (bits[i >> 3] & m) != 0;
    bits[i >> 3] |= m;
    return was;
}

ropeqk_status rq_paged_build_meta(const ropeqk_plan *pl, const ropeqk_paged_batch *b, int64_t n_new,
                                 const char *fn, rq_paged_meta *m)
{
    memset(m, 0, sizeof *m);
    const ropeqk_paged_desc *pg = &pl->paged;
    const int64_t ps = pg->page_size, cap = pg->max_pages_per_seq * ps, num_pages = pl->k.ne[0];
    const bool decode = n_new < 0;
    if (b->n_seqs < 1 || b->n_seqs > pg->max_seqs) {
        rq_set_error("%s: n_seqs %lld outside [1, %lld]", fn, (long long)b->n_seqs, (long long)pg->max_seqs);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (!b->page_table || !b->seq_lens || (decode && !b->q_pos)) {
        rq_set_error("%s: batch->page_table, seq_lens%s are required", fn, decode ? " and q_pos" : "");
        return ROPEQK_ERR_NULL_POINTER;
    }
    const int64_t n = b->n_seqs;
    int64_t total = 0;
    for (int64_t s = 0; s < n; s++) {
        int64_t len = b->seq_lens[s];
        if (decode ? len < 1 || len > cap : len < 0 || len > cap - n_new) {
            if (decode)
                rq_set_error("%s: sequence %lld: length %lld outside [1, %lld]", fn, (long long)s, (long long)len,
                             (long long)cap);
            else
                rq_set_error("%s: sequence %lld: length %lld + %lld new tokens outside [0, %lld]", fn, (long long)s,
                             (long long)len, (long long)n_new, (long long)cap);
            return ROPEQK_ERR_SEQ_LENGTH;
        }
        if (decode && (b->k_pos0 ? b->k_pos0[s] : 0) + len - 1 > INT32_MAX) {
            rq_set_error("%s: sequence %lld: last key position k_pos0 + %lld - 1 beyond INT32_MAX", fn, (long long)s,
                         (long long)len);
            return ROPEQK_ERR_POSITION_RANGE;
        }
        int64_t np = (len + (decode ? 0 : n_new) + ps - 1) / ps;
        total += np;
        if (np > m->max_pages)
            m->max_pages = np;
    }
    size_t nints = (size_t)(4 * n + 1) + (size_t)total;
    if (nints > INT32_MAX) {
        rq_set_error("%s: the batch's page lists exceed 2^31 entries", fn);
        return ROPEQK_ERR_TOO_LARGE;
    }
    size_t nbytes = (size_t)(num_pages + 7) / 8;
    m->v = malloc(nints * sizeof *m->v);
    unsigned char *seen = calloc(nbytes, 1), *written = decode ? NULL : calloc(nbytes, 1);
    if (!m->v || !seen || (!decode && !written)) {
        free(m->v), free(seen), free(written);
        m->v = NULL;
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    m->n = nints;
    m->lens_off = (int32_t)(n + 1);
    m->qpos_off = (int32_t)(2 * n + 1);
    m->kpos_off = (int32_t)(3 * n + 1);
    m->pages_off = (int32_t)(4 * n + 1);
    ropeqk_status st = ROPEQK_SUCCESS;
    int32_t *pages = m->v + m->pages_off;
    int32_t at = 0;
    for (int64_t s = 0; s < n && !st; s++) {
        int64_t len = b->seq_lens[s], np = (len + (decode ? 0 : n_new) + ps - 1) / ps;
        /* pages the append writes: from the one holding token len on */
        int64_t first_written = decode ? np : len / ps;
        const int32_t *row = b->page_table + s * pg->max_pages_per_seq;
        m->v[s] = at;
        m->v[m->lens_off + s] = (int32_t)len;
        m->v[m->qpos_off + s] = decode ? b->q_pos[s] : 0;
        m->v[m->kpos_off + s] = decode && b->k_pos0 ? b->k_pos0[s] : 0;
        int64_t i = 0;
        for (; i < np; i++) {
            int32_t e = row[i];
            if (e < 0 || e >= num_pages) {
                rq_set_error("%s: sequence %lld: page-table entry %lld is %d, outside [0, %lld)", fn, (long long)s,
                             (long long)i, (int)e, (long long)num_pages);
                st = ROPEQK_ERR_PAGE_RANGE;
                break;
            }
            if (bit_test_set(seen, e)) {
                rq_set_error("%s: sequence %lld: page %d appears twice in its page-table row", fn, (long long)s,
                             (int)e);
                st = ROPEQK_ERR_PAGE_DUPLICATE;
                break;
            }
            if (i >= first_written && bit_test_set(written, e)) {
                rq_set_error("%s: page %d is written for two sequences", fn, (int)e);
                st = ROPEQK_ERR_PAGE_DUPLICATE;
                break;
            }
            pages[at++] = e;
        }
        for (int64_t k = 0; k < i; k++) /* clear this row's marks for the next sequence */
            seen[row[k] >> 3] &= (unsigned char)~(1u << (row[k] & 7));
    }
    m->v[n] = at;
    free(seen);
    free(written);
    if (st) {
        free(m->v);
        m->v = NULL;
    }
    return st;
}

/* ---- decode ------------------------------------------------------------------------------------ */

/* A view's extent with its first dim cut to n rows (the batch's sequences). */
static size_t rows_extent(const ropeqk_tensor *t, int64_t n)
{
    ropeqk_tensor c = *t;
    c.ne[0] = n;
    return ropeqk_tensor_extent(&c);
}

#define SET(k, i, v)                                                                               \
    do {                                                                                           \
        if (!err)                                                                                  \
            err = clSetKernelArg((k), (i), sizeof(v), &(v));                                       \
    } while (0)

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* Head groups of pass 1 (contract.h's rq_paged_args): *groups tasks per (split, sequence). */
static void head_groups(const rq_problem *pb, bool gpu, rq_paged_args *a, int64_t *groups)
{
    int64_t cap = gpu ? RQ_PGH : RQ_PCH;
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
    a->ndvc = gpu ? (rq_i32)((pb->Dv + RQ_PWG * RQ_PVT - 1) / (RQ_PWG * RQ_PVT)) : 1;
}

/* Pages per split: enough tasks to fill the device (a few per compute unit) even for one long
 * sequence, but no split shorter than a few hundred keys, whose partial results would cost more to
 * write and join than they save. */
static int64_t pages_per_split(const ropeqk_plan *pl, bool gpu, int64_t tasks_per_split, int64_t max_pages)
{
    int64_t target = (int64_t)pl->cus * (gpu ? 8 : 4);
    int64_t want = (target + tasks_per_split - 1) / tasks_per_split;
    int64_t ps = pl->paged.page_size, min_pages = ((gpu ? 256 : 512) + ps - 1) / ps;
    int64_t pps = (max_pages + want - 1) / want;
    return pps < min_pages ? min_pages : pps;
}

ropeqk_status ropeqk_opencl_paged_enqueue(ropeqk_plan *pl, cl_command_queue queue,
                                          const ropeqk_opencl_paged_args *args, const ropeqk_paged_batch *batch,
                                          cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    const char *fn = "ropeqk_opencl_paged_enqueue";
    if (event)
        *event = NULL;
    if (!pl || !args || !batch || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    if (pl->ctx->vk) {
        rq_set_error("%s: the plan belongs to a Vulkan context", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pl->op != ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("%s: the plan is not a paged-decode plan", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    if (!args->q.buf || !args->k_cache.buf || !args->v_cache.buf || !args->out.buf ||
        (pl->with_lse && !args->lse.buf)) {
        rq_set_error("%s: q, k_cache, v_cache, out%s buffers are required", fn, pl->with_lse ? " and lse" : "");
        return ROPEQK_ERR_NULL_POINTER;
    }
    if (!pl->with_lse && args->lse.buf) {
        rq_set_error("%s: an lse buffer given to a plan made without with_lse", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    rq_paged_meta meta;
    ropeqk_status st = rq_paged_build_meta(pl, batch, -1, fn, &meta);
    if (st)
        return st;
    const int64_t n = batch->n_seqs;
    rq_range rq = {0, 0, NULL}, rk = rq, rv = rq, ro = rq, rl = rq;
    if ((st = rq_check_mem(ctx, args->q, ropeqk_dtype_size(pl->q.dtype), rows_extent(&pl->q, n), &rq)) ||
        (st = rq_check_mem(ctx, args->k_cache, ropeqk_dtype_size(pl->k.dtype), pb->k_extent, &rk)) ||
        (st = rq_check_mem(ctx, args->v_cache, ropeqk_dtype_size(pl->v.dtype), pb->v_extent, &rv)) ||
        (st = rq_check_mem(ctx, args->out, ropeqk_dtype_size(pl->out.dtype), rows_extent(&pl->out, n), &ro)) ||
        (pl->with_lse && (st = rq_check_mem(ctx, args->lse, sizeof(float), rows_extent(&pl->lse, n), &rl)))) {
        if (st != ROPEQK_ERR_BACKEND) /* a backend failure keeps rq_cl_fail's message */
            rq_set_error("%s: a device buffer is misaligned or too small for its view: %s", fn,
                         ropeqk_status_string(st));
        goto done;
    }
    const rq_range *outs[2] = {&ro, &rl}, *ins[3] = {&rq, &rk, &rv};
    if (rq_outputs_overlap(outs, 2, ins, 3))
        st = ROPEQK_ERR_OVERLAP;
    if (st) {
        rq_set_error("%s: out or lse overlaps an input or each other in the same buffer", fn);
        goto done;
    }

    /* the split, the scratch: Qr [n][Hq][D], part [n*Hq][nsplit][Dv] then (m, l) per row */
    bool gpu = !cpu_shape(pl);
    rq_paged_args a = {0};
    int64_t groups;
    head_groups(pb, gpu, &a, &groups);
    int64_t pps = pages_per_split(pl, gpu, n * groups * a.ndvc, meta.max_pages);
    int64_t nsplit = (meta.max_pages + pps - 1) / pps, kps = pps * pl->paged.page_size;
    int64_t rows = n * pb->Hq;
    size_t qr_bytes, part_n, part_bytes;
    if (__builtin_mul_overflow((size_t)rows, (size_t)pb->D * sizeof(float), &qr_bytes) ||
        __builtin_mul_overflow((size_t)(rows * nsplit), (size_t)pb->Dv + 2, &part_n) ||
        __builtin_mul_overflow(part_n, sizeof(float), &part_bytes) || qr_bytes > ctx->max_alloc ||
        part_bytes > ctx->max_alloc || rows > INT32_MAX) {
        rq_set_error("%s: the scratch for this batch exceeds the device's allocation limit", fn);
        st = ROPEQK_ERR_TOO_LARGE;
        goto done;
    }

    cl_int err = CL_SUCCESS;
    cl_mem mbuf = meta_upload(ctx, &meta, &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    rq_scratch *sq = NULL, *sp = NULL;
    if ((st = rq_scratch_get(ctx, qr_bytes, &sq)) || (st = rq_scratch_get(ctx, part_bytes, &sp))) {
        rq_scratch_put(ctx, sq, 0, NULL);
        clReleaseMemObject(mbuf);
        goto done;
    }
    if (!queue)
        queue = ctx->queue;
    const ropeqk_tensor *q = &pl->q, *k = &pl->k, *v = &pl->v, *o = &pl->out, *ls = &pl->lse;
    /* Q: the sequences are the rows of one batch of Hq heads; positions from the metadata */
    rq_rotate_args ra = {
        .src_off = (rq_i64)args->q.offset, .nb0 = 0, .nb1 = q->nb[1], .nb2 = q->nb[0], .nb3 = q->nb[3],
        .pos_off = meta.qpos_off, .d_bh = pb->D, .d_row = pb->Hq * pb->D, .d_dim = 1, .H = (rq_i32)pb->Hq,
        .BH = (rq_i32)pb->Hq, .S = (rq_i32)n, .D = (rq_i32)pb->D, .R = (rq_i32)pb->R, .layout = pb->layout,
        .use_pos = 1, .pos_base = 0, .G = 1, .rot_mul = (float)pb->attn, .out_mul = (float)pb->scale,
    };
    a.k_off = (rq_i64)args->k_cache.offset, a.knb0 = k->nb[0], a.knb1 = k->nb[1], a.knb2 = k->nb[2];
    a.v_off = (rq_i64)args->v_cache.offset, a.vnb0 = v->nb[0], a.vnb1 = v->nb[1], a.vnb2 = v->nb[2];
    a.window = pb->window;
    a.ml_off = (rq_i64)(rows * nsplit * pb->Dv);
    a.Hq = (rq_i32)pb->Hq, a.Hkv = (rq_i32)pb->Hkv, a.G = (rq_i32)pb->G, a.D = (rq_i32)pb->D;
    a.Dv = (rq_i32)pb->Dv, a.R = (rq_i32)pb->R, a.layout = pb->layout, a.causal = pb->causal;
    a.ps = (rq_i32)pl->paged.page_size, a.kps = (rq_i32)kps, a.nsplit = (rq_i32)nsplit;
    a.lens_off = meta.lens_off, a.qpos_off = meta.qpos_off, a.kpos_off = meta.kpos_off;
    a.pages_off = meta.pages_off, a.rot_mul = (float)pb->attn;
    a.kdt = (rq_i32)pl->k.dtype, a.vdt = (rq_i32)pl->v.dtype;
    rq_pcomb_args ca = {
        .out_off = (rq_i64)args->out.offset, .onb0 = o->nb[0], .onb1 = o->nb[1], .onb3 = o->nb[3],
        .lse_off = (rq_i64)args->lse.offset, .lnb0 = ls->nb[0], .lnb1 = ls->nb[1], .ml_off = a.ml_off,
        .Hq = (rq_i32)pb->Hq, .Dv = (rq_i32)pb->Dv, .nsplit = (rq_i32)nsplit, .kps = (rq_i32)kps,
        .lens_off = meta.lens_off, .use_lse = pl->with_lse, .rows = (rq_i32)rows, .odt = (rq_i32)pl->out.dtype,
    };
    cl_mem lse_buf = pl->with_lse ? args->lse.buf : pl->vfreq; /* never written without LSE: any buffer */
    cl_event ev[3] = {NULL, NULL, NULL};
    size_t rg[2], rl_[2];
    rq_rotate_grid(&ctx->tune, n, pb->R / 2 + (pb->D - pb->R), rg, rl_);
    size_t g1[3], l1[3];
    if (gpu) {
        g1[0] = (size_t)nsplit * RQ_PWG, g1[1] = (size_t)(groups * a.ndvc), g1[2] = (size_t)n;
        l1[0] = RQ_PWG, l1[1] = 1, l1[2] = 1;
    } else {
        g1[0] = (size_t)nsplit, g1[1] = (size_t)groups, g1[2] = (size_t)n;
        l1[0] = 1, l1[1] = 1, l1[2] = 1;
    }
    size_t g2[2] = {round_up((size_t)pb->Dv, RQ_PCWG), (size_t)rows}, l2[2] = {RQ_PCWG, 1};

    pthread_mutex_lock(&pl->lock); /* the kernels' arguments are the plan's: set and enqueue as one step */
    SET(pl->kx[0], RQ_ROT_SRC, args->q.buf);
    SET(pl->kx[0], RQ_ROT_POS, mbuf);
    SET(pl->kx[0], RQ_ROT_FREQ, pl->vfreq);
    SET(pl->kx[0], RQ_ROT_DST, sq->buf);
    SET(pl->kx[0], RQ_ROT_A, ra);
    if (!err)
        err = clEnqueueNDRangeKernel(queue, pl->kx[0], 2, NULL, rg, rl_, num_wait, wait, &ev[0]);
    SET(pl->kx[1], RQ_PG_K, args->k_cache.buf);
    SET(pl->kx[1], RQ_PG_V, args->v_cache.buf);
    SET(pl->kx[1], RQ_PG_META, mbuf);
    SET(pl->kx[1], RQ_PG_FREQ, pl->vfreq);
    SET(pl->kx[1], RQ_PG_QR, sq->buf);
    SET(pl->kx[1], RQ_PG_PART, sp->buf);
    SET(pl->kx[1], RQ_PG_A, a);
    if (!err)
        err = clEnqueueNDRangeKernel(queue, pl->kx[1], 3, NULL, g1, l1, 1, ev, &ev[1]);
    SET(pl->kx[2], RQ_PC_PART, sp->buf);
    SET(pl->kx[2], RQ_PC_META, mbuf);
    SET(pl->kx[2], RQ_PC_OUT, args->out.buf);
    SET(pl->kx[2], RQ_PC_LSE, lse_buf);
    SET(pl->kx[2], RQ_PC_A, ca);
    if (!err)
        err = clEnqueueNDRangeKernel(queue, pl->kx[2], 2, NULL, g2, l2, 1, &ev[1], &ev[2]);
    pthread_mutex_unlock(&pl->lock);
    if (err)
        st = rq_cl_fail(ctx, err);
    /* scratch reusable once the last enqueued command has completed (each waits for the one before) */
    cl_event last = ev[2] ? ev[2] : ev[1] ? ev[1] : ev[0];
    rq_scratch_put(ctx, sq, last ? 1 : 0, &last);
    rq_scratch_put(ctx, sp, last ? 1 : 0, &last);
    clReleaseMemObject(mbuf); /* freed by OpenCL once the kernels using it have completed */
    if (!err && event) {
        *event = ev[2];
        ev[2] = NULL;
    }
    for (int i = 0; i < 3; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
done:
    free(meta.v);
    return st;
}

/* ---- append ------------------------------------------------------------------------------------ */

ropeqk_status rq_paged_append_check(const ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                   const ropeqk_paged_batch *batch, const char *fn, rq_problem *c,
                                   rq_paged_meta *meta)
{
    const rq_problem *pb = &pl->pb;
    /* k_new [n_seqs, Hkv, n_new, D], v_new [n_seqs, Hkv, n_new, Dv], of the caches' dtypes: their view
     * rules through the attention validation, with a stand-in Q (one row per entry) and output */
    if (k_new->dtype != pl->k.dtype || v_new->dtype != pl->v.dtype) {
        rq_set_error("%s: k_new and v_new must have the caches' dtypes", fn);
        return ROPEQK_ERR_BAD_DTYPE;
    }
    ropeqk_tensor qs = ropeqk_tensor_bhsd(ROPEQK_F32, k_new->ne[0], k_new->ne[1], 1, k_new->ne[3]);
    ropeqk_tensor os = ropeqk_tensor_bhsd(ROPEQK_F32, k_new->ne[0], k_new->ne[1], 1, v_new->ne[3]);
    ropeqk_params p;
    ropeqk_default_params(&p);
    ropeqk_status st = rq_validate_attention(&p, &qs, k_new, v_new, &os, NULL, false, false, c);
    if (st) {
        rq_set_error("%s: the k_new or v_new view: %s", fn, ropeqk_status_string(st));
        return st;
    }
    if (k_new->ne[0] != batch->n_seqs || k_new->ne[1] != pb->Hkv || k_new->ne[3] != pb->D || v_new->ne[3] != pb->Dv) {
        rq_set_error("%s: k_new must be [n_seqs, Hkv, n_new, D] and v_new [n_seqs, Hkv, n_new, Dv]", fn);
        return ROPEQK_ERR_BAD_SHAPE;
    }
    return rq_paged_build_meta(pl, batch, k_new->ne[2], fn, meta);
}

ropeqk_status rq_paged_append_ranges(const char *fn, const rq_range *rk, const rq_range *rv, const rq_range *rkn,
                                     const rq_range *rvn, int64_t rows, int64_t n_new)
{
    const rq_range *caches[] = {rk, rv}, *news[] = {rkn, rvn};
    if (rq_outputs_overlap(caches, 2, news, 2)) {
        rq_set_error("%s: the caches overlap each other or the new rows in the same buffer", fn);
        return ROPEQK_ERR_OVERLAP;
    }
    if (rows > INT32_MAX || n_new > INT32_MAX) {
        rq_set_error("%s: n_seqs * Hkv or n_new beyond INT32_MAX", fn);
        return ROPEQK_ERR_TOO_LARGE;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_opencl_paged_append(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_tensor *k_new,
                                         ropeqk_opencl_mem k_new_mem, const ropeqk_tensor *v_new,
                                         ropeqk_opencl_mem v_new_mem, ropeqk_opencl_mem k_cache,
                                         ropeqk_opencl_mem v_cache, const ropeqk_paged_batch *batch,
                                         cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    const char *fn = "ropeqk_opencl_paged_append";
    if (event)
        *event = NULL;
    if (!pl || !k_new || !v_new || !batch || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    if (pl->ctx->vk) {
        rq_set_error("%s: the plan belongs to a Vulkan context", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pl->op != ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("%s: the plan is not a paged-decode plan", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (!k_new_mem.buf || !v_new_mem.buf || !k_cache.buf || !v_cache.buf) {
        rq_set_error("%s: k_new, v_new, k_cache and v_cache buffers are required", fn);
        return ROPEQK_ERR_NULL_POINTER;
    }
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    rq_problem c;
    rq_paged_meta meta;
    ropeqk_status st = rq_paged_append_check(pl, k_new, v_new, batch, fn, &c, &meta);
    if (st)
        return st;
    const int64_t n = batch->n_seqs, n_new = k_new->ne[2];
    rq_range rkn = {0, 0, NULL}, rvn = rkn, rk = rkn, rv = rkn;
    if ((st = rq_check_mem(ctx, k_new_mem, ropeqk_dtype_size(k_new->dtype), c.k_extent, &rkn)) ||
        (st = rq_check_mem(ctx, v_new_mem, ropeqk_dtype_size(v_new->dtype), c.v_extent, &rvn)) ||
        (st = rq_check_mem(ctx, k_cache, ropeqk_dtype_size(pl->k.dtype), pb->k_extent, &rk)) ||
        (st = rq_check_mem(ctx, v_cache, ropeqk_dtype_size(pl->v.dtype), pb->v_extent, &rv))) {
        if (st != ROPEQK_ERR_BACKEND)
            rq_set_error("%s: a device buffer is misaligned or too small for its view: %s", fn,
                         ropeqk_status_string(st));
        goto done;
    }
    if ((st = rq_paged_append_ranges(fn, &rk, &rv, &rkn, &rvn, n * pb->Hkv, n_new)))
        goto done;
    cl_int err = CL_SUCCESS;
    cl_mem mbuf = meta_upload(ctx, &meta, &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    if (!queue)
        queue = ctx->queue;
    const ropeqk_tensor *src[2] = {k_new, v_new}, *dst[2] = {&pl->k, &pl->v};
    const ropeqk_opencl_mem smem[2] = {k_new_mem, v_new_mem}, dmem[2] = {k_cache, v_cache};
    cl_event ev[2] = {NULL, NULL};
    pthread_mutex_lock(&pl->lock);
    for (int i = 0; i < 2 && !err; i++) {
        int64_t units = src[i]->ne[3] * (int64_t)ropeqk_dtype_size(src[i]->dtype) / 2;
        rq_papp_args a = {
            .src_off = (rq_i64)smem[i].offset, .snb0 = src[i]->nb[0], .snb1 = src[i]->nb[1], .snb2 = src[i]->nb[2],
            .dst_off = (rq_i64)dmem[i].offset, .dnb0 = dst[i]->nb[0], .dnb1 = dst[i]->nb[1], .dnb2 = dst[i]->nb[2],
            .Hkv = (rq_i32)pb->Hkv, .n_new = (rq_i32)n_new, .ps = (rq_i32)pl->paged.page_size,
            .units = (rq_i32)units, .lens_off = meta.lens_off, .pages_off = meta.pages_off,
        };
        SET(pl->kx[3], RQ_PA_SRC, smem[i].buf);
        SET(pl->kx[3], RQ_PA_META, mbuf);
        SET(pl->kx[3], RQ_PA_DST, dmem[i].buf);
        SET(pl->kx[3], RQ_PA_A, a);
        size_t g[3] = {round_up((size_t)units, RQ_PCWG), (size_t)n_new, (size_t)(n * pb->Hkv)}, l[3] = {RQ_PCWG, 1, 1};
        if (!err)
            err = clEnqueueNDRangeKernel(queue, pl->kx[3], 3, NULL, g, l, num_wait, wait, &ev[i]);
    }
    pthread_mutex_unlock(&pl->lock);
    if (!err && event)
        err = clEnqueueMarkerWithWaitList(queue, 2, ev, event);
    if (err)
        st = rq_cl_fail(ctx, err);
    for (int i = 0; i < 2; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    clReleaseMemObject(mbuf);
done:
    free(meta.v);
    return st;
}
