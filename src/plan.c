/* Plans: one operation on described tensors, validated once, with its frequencies, decode table and
 * kernels made once (VkFFT/cuFFT style). Enqueueing (enqueue.c) then only checks buffers, takes
 * scratch, sets arguments and enqueues. */
#include "ctx.h"
#include "vk/vk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* inv_freq / pi in fp64, split into three floats per frequency (see cl/angle.cl). */
static void split_freqs(const rq_problem *pb, const double *inv, cl_float4 *v)
{
    for (int64_t i = 0; i < pb->R / 2; i++) {
        double x = inv[i] / 3.14159265358979323846;
        if (pb->conjugate)
            x = -x; /* the inverse rotation is the rotation by -angle */
        float hi = (float)x;
        float mid = (float)(x - hi);
        float lo = (float)(x - hi - mid);
        v[i].s[0] = hi;
        v[i].s[1] = mid;
        v[i].s[2] = lo;
        v[i].s[3] = 0.0f;
    }
}

/* The decode path's rotation table R(t), t < dkb, from the fp64 frequencies, in qk_decode's lane form:
 * [t][cos, sin][lane], lanes = R (interleaved: pair u on lanes 2u, 2u+1, sin negated on the even one)
 * or R/2 (half-split). tab holds dkb * 2 * decode_lanes(pb) floats. */
static size_t decode_lanes(const rq_problem *pb)
{
    return pb->layout == ROPEQK_INTERLEAVED ? (size_t)pb->R : (size_t)pb->R / 2;
}

static void decode_table(const rq_problem *pb, const double *inv, size_t dkb, float *tab)
{
    bool il = pb->layout == ROPEQK_INTERLEAVED;
    size_t wt = decode_lanes(pb);
    for (size_t t = 0; t < dkb; t++)
        for (size_t l = 0; l < wt; l++) {
            double a = (double)t * inv[il ? l / 2 : l] * (pb->conjugate ? -1.0 : 1.0);
            tab[t * 2 * wt + l] = (float)cos(a);
            tab[t * 2 * wt + wt + l] = (float)(sin(a) * (il && l % 2 == 0 ? -1.0 : 1.0));
        }
}

static const char *rotate_kernel_name(ropeqk_dtype t)
{
    return t == ROPEQK_F16 ? "rope_rotate_f16" : t == ROPEQK_BF16 ? "rope_rotate_bf16" : "rope_rotate_f32";
}

static const char *decode_kernel_name(ropeqk_dtype t, bool gpu)
{
    if (gpu)
        return t == ROPEQK_F16 ? "qk_decode_gpu_f16" : t == ROPEQK_BF16 ? "qk_decode_gpu_bf16" : "qk_decode_gpu_f32";
    return t == ROPEQK_F16 ? "qk_decode_f16" : t == ROPEQK_BF16 ? "qk_decode_bf16" : "qk_decode_f32";
}

/* Whether a compiled kernel runs nt work-items with `local` bytes of local memory on the device:
 * the kernel's own limit (CL_KERNEL_WORK_GROUP_SIZE: registers per work-item can lower it below the
 * device's), and its local memory against 48 KiB and the device's. A failed query counts as no: the
 * caller then uses a kernel that always works. */
static bool kernel_fits(const ropeqk_ctx *ctx, cl_kernel k, size_t nt, size_t local)
{
    size_t wg = 0;
    cl_ulong lm = 0;
    if (clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS ||
        clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL) != CL_SUCCESS)
        return false;
    size_t cap = ctx->dev.local_mem > 0 && ctx->dev.local_mem < RQ_LOCAL_CAP ? ctx->dev.local_mem : RQ_LOCAL_CAP;
    return wg >= nt && local <= cap && (ctx->dev.local_mem == 0 || lm <= ctx->dev.local_mem);
}

/* The description's own checks, before the shared validation. */
static ropeqk_status check_desc(const ropeqk_plan_desc *d)
{
    if (d->op != ROPEQK_OP_SCORES && d->op != ROPEQK_OP_ATTENTION && d->op != ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("ropeqk_plan_create: unknown operation %d", (int)d->op);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->positions != ROPEQK_POS_OFFSETS && d->positions != ROPEQK_POS_ARRAYS) {
        rq_set_error("ropeqk_plan_create: positions must be ROPEQK_POS_OFFSETS or ROPEQK_POS_ARRAYS");
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->max_keys < 0) {
        rq_set_error("ropeqk_plan_create: max_keys %lld < 0", (long long)d->max_keys);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->op == ROPEQK_OP_PAGED_DECODE && d->max_keys != 0) {
        rq_set_error("ropeqk_plan_create: a paged-decode plan takes its lengths per enqueue, not max_keys");
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->max_keys > 0 && (d->k.ne[2] != d->max_keys ||
                            (d->op == ROPEQK_OP_SCORES ? d->out.ne[3] : d->v.ne[2]) != d->max_keys)) {
        rq_set_error("ropeqk_plan_create: a decode plan's key count (k.ne[2], and out.ne[3] or v.ne[2]) must equal max_keys");
        return ROPEQK_ERR_BAD_SHAPE;
    }
    /* a decode plan fixes its frequencies: a length derived from per-call offsets cannot apply */
    ropeqk_scaling_type st = d->params.scaling.type;
    if (d->max_keys > 0 && (st == ROPEQK_SCALING_DYNAMIC || st == ROPEQK_SCALING_LONGROPE) &&
        d->params.scaling.seq_len == 0) {
        rq_set_error("ropeqk_plan_create: a decode plan with DYNAMIC or LONGROPE scaling needs scaling.seq_len");
        return ROPEQK_ERR_BAD_SCALING;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_plan_create(ropeqk_ctx *ctx, const ropeqk_plan_desc *desc, ropeqk_plan **out)
{
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!ctx || !desc)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = check_desc(desc);
    rq_problem pb;
    bool arrays = desc->positions == ROPEQK_POS_ARRAYS;
    if (st)
        return st;
    if (desc->op == ROPEQK_OP_SCORES)
        st = rq_validate(&desc->params, &desc->q, &desc->k, &desc->out, false, arrays, &pb);
    else if (desc->op == ROPEQK_OP_ATTENTION)
        st = rq_validate_attention(&desc->params, &desc->q, &desc->k, &desc->v, &desc->out,
                                   desc->with_lse ? &desc->lse : NULL, false, arrays, &pb);
    else
        st = rq_paged_validate(desc, &pb);
    if (st)
        return st;
    const rq_tuning *tn = &ctx->tune;
    int64_t M = pb.G * pb.Sq;
    /* the decode kernels' preconditions (cl/scores.cl; cl/decode_gpu.cl on the GPU profile, which
     * needs no 16-lane chunks); scores only */
    bool gpu = tn->profile == ROPEQK_PROFILE_GPU;
    bool dec = desc->op == ROPEQK_OP_SCORES && M <= RQ_DM && pb.D <= RQ_DMAXD && tn->decode && !ctx->vk &&
               (gpu || (pb.D % RQ_DCHUNK == 0 && pb.R % (2 * RQ_DCHUNK) == 0));

    ropeqk_plan *pl = calloc(1, sizeof *pl);
    double *inv = malloc((size_t)(pb.R / 2) * sizeof *inv);
    cl_float4 *v = malloc((size_t)(pb.R / 2) * sizeof *v);
    size_t tab_n = dec ? (size_t)tn->dkb * 2 * decode_lanes(&pb) : 0;
    float *tab = dec ? malloc(tab_n * sizeof *tab) : NULL;
    cl_int err = CL_SUCCESS;
    if (!pl || !inv || !v || (dec && !tab) || pthread_mutex_init(&pl->lock, NULL) != 0) {
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto fail;
    }
    pl->lock_ok = true;
    pl->ctx = ctx;
    pl->op = desc->op;
    pl->v = desc->v;
    pl->lse = desc->lse;
    pl->with_lse = desc->with_lse != 0;
    pl->paged = desc->paged;
    pl->q = desc->q;
    pl->k = desc->k;
    pl->out = desc->out;
    pl->dynamic = desc->max_keys > 0;
    pl->arrays = arrays;
    pl->dec = dec;
    rq_inv_freq(&pb, inv);
    pb.scaling = NULL; /* the caller's factor arrays are not needed past this point */
    pl->pb = pb;
    split_freqs(&pb, inv, v);
    if (dec)
        decode_table(&pb, inv, (size_t)tn->dkb, tab);
    if (ctx->vk) { /* the Vulkan backend: pipelines, tables and scratch (src/vk/vk_plan.c) */
        if ((st = rq_vk_plan_init(pl, (const float *)v)))
            goto fail;
        goto done;
    }
    cl_program prog;
    unsigned ops = desc->op == ROPEQK_OP_SCORES ? RQ_OPS_SCORES : desc->op == ROPEQK_OP_ATTENTION ? RQ_OPS_ATTN
                                                                                                  : RQ_OPS_PAGED;
    if ((st = rq_get_program(ctx, ctx->device, ops, &prog)))
        goto fail;
    /* the GPU decode kernel where the compiled kernel runs its work-group, else the two-pass path */
    if (dec && gpu) {
        pl->ks = clCreateKernel(prog, decode_kernel_name(desc->k.dtype, true), &err);
        if (err) {
            st = rq_cl_fail(ctx, err);
            goto fail;
        }
        pl->dec_gpu = kernel_fits(ctx, pl->ks, RQ_GDWG, RQ_GDECODE_LOCAL_BYTES);
        if (!pl->dec_gpu) {
            clReleaseKernel(pl->ks);
            pl->ks = NULL;
            dec = pl->dec = false;
        }
    }
    pl->vfreq = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)(pb.R / 2) * sizeof *v,
                               v, &err);
    if (!err && dec)
        pl->ctab = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, tab_n * sizeof *tab, tab, &err);
    if (!err && desc->op != ROPEQK_OP_PAGED_DECODE)
        pl->krq = clCreateKernel(prog, rotate_kernel_name(desc->q.dtype), &err);
    if (!err && !dec && desc->op != ROPEQK_OP_PAGED_DECODE)
        pl->krk = clCreateKernel(prog, rotate_kernel_name(desc->k.dtype), &err);
    /* qk_scores_tiled where the context built it and the plan fills at least half of a tile's rows:
     * with fewer, most of its multiply-adds would be on zero rows (qk_scores' RQ_TQ-row tiles waste
     * less there, e.g. GQA decode, 8 rows per KV head); and only if the compiled kernel runs its
     * work-group (kernel_fits), else qk_scores */
    if (!err && desc->op == ROPEQK_OP_SCORES && !dec && tn->tile > 0 && 2 * M >= tn->tile) {
        pl->ks = clCreateKernel(prog, "qk_scores_tiled", &err);
        size_t tw = (size_t)(tn->tile / tn->rb);
        pl->tiled = !err && kernel_fits(ctx, pl->ks, tw * tw, RQ_TILED_LOCAL_BYTES((size_t)tn->tile, (size_t)tn->tk));
        if (!err && !pl->tiled) {
            clReleaseKernel(pl->ks);
            pl->ks = NULL;
        }
    }
    if (!err && desc->op == ROPEQK_OP_SCORES && !pl->ks)
        pl->ks = clCreateKernel(prog, dec ? decode_kernel_name(desc->k.dtype, false) : "qk_scores", &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        goto fail;
    }
    if (desc->op == ROPEQK_OP_ATTENTION && (st = rq_attn_plan_init(pl, prog)))
        goto fail;
    if (desc->op == ROPEQK_OP_PAGED_DECODE && (st = rq_paged_plan_init(pl, prog)))
        goto fail;
done:
    free(inv);
    free(v);
    free(tab);
    *out = pl;
    return ROPEQK_SUCCESS;
fail:
    free(inv);
    free(v);
    free(tab);
    ropeqk_plan_destroy(pl);
    return st;
}

void ropeqk_plan_destroy(ropeqk_plan *pl)
{
    if (!pl)
        return;
    rq_vk_plan_free(pl);
    /* releasing is safe with work in flight: OpenCL keeps what enqueued commands use alive */
    for (int i = 0; i < 4; i++)
        if (pl->kx[i])
            clReleaseKernel(pl->kx[i]);
    for (int i = 0; i < 2; i++)
        if (pl->mx[i])
            clReleaseMemObject(pl->mx[i]);
    if (pl->ks) clReleaseKernel(pl->ks);
    if (pl->krk) clReleaseKernel(pl->krk);
    if (pl->krq) clReleaseKernel(pl->krq);
    if (pl->ctab) clReleaseMemObject(pl->ctab);
    if (pl->vfreq) clReleaseMemObject(pl->vfreq);
    if (pl->lock_ok)
        pthread_mutex_destroy(&pl->lock);
    free(pl);
}
