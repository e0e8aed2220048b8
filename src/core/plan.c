/* Plans, for every backend: one operation on described tensors, validated once, with its
 * frequencies computed once (VkFFT/cuFFT style); the backend then makes its kernels or pipelines,
 * tables and scratch (its plan_init). Running a plan is each backend's own entry point
 * (ropeqk_opencl_plan_enqueue, ropeqk_vulkan_plan_record), after the checks of call.c. */
#include "call.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* inv_freq / pi in fp64, split into three floats per frequency (hi, mid, lo, 0: see cl/angle.cl and
 * glsl/angle.glsl, which form the angle from them exactly). */
static void split_freqs(const rq_problem *pb, const double *inv, float *v)
{
    for (int64_t i = 0; i < pb->R / 2; i++) {
        double x = inv[i] / 3.14159265358979323846;
        if (pb->conjugate)
            x = -x; /* the inverse rotation is the rotation by -angle */
        float hi = (float)x;
        float mid = (float)(x - hi);
        float lo = (float)(x - hi - mid);
        v[4 * i + 0] = hi;
        v[4 * i + 1] = mid;
        v[4 * i + 2] = lo;
        v[4 * i + 3] = 0.0f;
    }
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

/* A paged plan's companion attention plan: one sequence's rows of the packed q, out and lse as
 * [1, Hq, max_q_rows, *] views, dense K/V of a sequence's capacity in the caches' dtypes (f32 for an
 * 8-bit cache), BSHD (the
 * backend gathers the pages into them), the same parameters; positions by offsets (the chunk's
 * q_pos and k_pos0 at enqueue). A description the attention path refuses (a dtype or extent it does
 * not take) leaves *out NULL and succeeds: the paged plan then serves every row through its decode
 * kernels. A failure to make it (memory, the backend) is the paged plan's failure. */
static ropeqk_status chunk_plan(ropeqk_ctx *ctx, const ropeqk_plan_desc *desc, ropeqk_plan **out)
{
    ropeqk_plan_desc a = {.op = ROPEQK_OP_ATTENTION, .params = desc->params, .positions = ROPEQK_POS_OFFSETS,
                          .with_lse = desc->with_lse};
    int64_t rows = desc->q.ne[0], cap = desc->paged.max_pages_per_seq * desc->paged.page_size;
    const ropeqk_tensor *src[3] = {&desc->q, &desc->out, &desc->lse};
    ropeqk_tensor *dst[3] = {&a.q, &a.out, &a.lse};
    for (int i = 0; i < 3; i++) {
        *dst[i] = *src[i];
        dst[i]->ne[0] = 1, dst[i]->ne[2] = rows, dst[i]->nb[2] = src[i]->nb[0];
    }
    /* BSHD memory: a token's heads together, so the strides do not depend on the capacity and a
     * sequence's gathered keys fill a prefix of the view (the description validated here; OpenCL
     * gathers BHSD rows and runs the companion with views to match, src/opencl/cl_paged_chunk.c). An 8-bit cache is gathered as its values,
     * (float)code * scale in f32 (dense attention takes no 8-bit dtype, and f32 holds every value
     * exactly as the decode kernels compute it) */
    ropeqk_dtype kd = rq_dtype_q8(desc->k.dtype) ? ROPEQK_F32 : desc->k.dtype;
    ropeqk_dtype vd = rq_dtype_q8(desc->v.dtype) ? ROPEQK_F32 : desc->v.dtype;
    a.k = ropeqk_tensor_bshd(kd, 1, cap, desc->k.ne[1], desc->k.ne[3]);
    a.v = ropeqk_tensor_bshd(vd, 1, cap, desc->v.ne[1], desc->v.ne[3]);
    ropeqk_status st = ropeqk_plan_create(ctx, &a, out);
    return st == ROPEQK_ERR_OUT_OF_HOST_MEMORY || st == ROPEQK_ERR_BACKEND || st == ROPEQK_ERR_BUILD ? st
                                                                                                      : ROPEQK_SUCCESS;
}

/* A paged plan's 8-bit caches against what the backend's kernels read (backend.h's kv_quant). */
static ropeqk_status kv_quant_supported(const ropeqk_ctx *ctx, const ropeqk_plan_desc *desc)
{
    static const struct {
        ropeqk_dtype dt;
        unsigned bit;
        const char *name;
    } q8[] = {{ROPEQK_I8, RQ_KV_I8, "int8"}, {ROPEQK_FP8_E4M3, RQ_KV_FP8_E4M3, "fp8 e4m3"},
              {ROPEQK_FP8_E5M2, RQ_KV_FP8_E5M2, "fp8 e5m2"}};
    for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++)
        if ((desc->k.dtype == q8[i].dt || desc->v.dtype == q8[i].dt) && !(ctx->be->kv_quant & q8[i].bit)) {
            rq_set_error("ropeqk_plan_create: %s paged caches are not implemented by the %s backend's kernels yet",
                         q8[i].name, ctx->be->name);
            return ROPEQK_ERR_BAD_DTYPE;
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
    /* the variants this backend's kernels implement */
    static const struct {
        unsigned bit;
        const char *what;
    } vars[] = {{RQ_VAR_SOFTCAP, "logit soft-capping (softcap)"}, {RQ_VAR_ROT_OFFSET, "rotary_offset"},
                {RQ_VAR_MROPE, "M-RoPE (mrope_section)"}, {RQ_VAR_SINKS, "attention sinks"}};
    unsigned want = (pb.softcap > 0.0 ? RQ_VAR_SOFTCAP : 0) | (pb.rot_off ? RQ_VAR_ROT_OFFSET : 0) |
                    (pb.mrope ? RQ_VAR_MROPE : 0) | (pb.sinks ? RQ_VAR_SINKS : 0);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if ((want & vars[i].bit) && !(ctx->be->variants & vars[i].bit)) {
            rq_set_error("ropeqk_plan_create: %s is not implemented by the %s backend's kernels yet (the fp64 "
                         "reference path has it)", vars[i].what, ctx->be->name);
            return ROPEQK_ERR_BAD_PARAM;
        }
    if (desc->op == ROPEQK_OP_PAGED_DECODE && (st = kv_quant_supported(ctx, desc)))
        return st;
    ropeqk_plan *pl = calloc(1, sizeof *pl);
    double *inv = malloc((size_t)(pb.R / 2) * sizeof *inv);
    float *freq4 = malloc((size_t)(pb.R / 2) * 4 * sizeof *freq4);
    if (!pl || !inv || !freq4) {
        free(pl);
        pl = NULL;
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    pl->ctx = ctx;
    pl->op = desc->op;
    pl->q = desc->q;
    pl->k = desc->k;
    pl->out = desc->out;
    pl->v = desc->v;
    pl->lse = desc->lse;
    pl->with_lse = desc->with_lse != 0;
    pl->paged = desc->paged;
    pl->dynamic = desc->max_keys > 0;
    pl->arrays = arrays;
    if (pb.sinks) { /* the caller's array need not outlive creation */
        if (!(pl->sinks = malloc((size_t)pb.Hq * sizeof *pl->sinks))) {
            st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
            goto done;
        }
        memcpy(pl->sinks, pb.sinks, (size_t)pb.Hq * sizeof *pl->sinks);
        pb.sinks = pl->sinks;
    }
    rq_inv_freq(&pb, inv);
    pb.scaling = NULL; /* the caller's factor arrays are not needed past this point */
    pl->pb = pb;
    split_freqs(&pb, inv, freq4);
    st = ctx->be->plan_init(pl, freq4, inv);
    if (!st && desc->op == ROPEQK_OP_PAGED_DECODE && ctx->be->paged_chunks)
        st = chunk_plan(ctx, desc, &pl->chunk);
done:
    free(inv);
    free(freq4);
    if (st) {
        ropeqk_plan_destroy(pl);
        return st;
    }
    *out = pl;
    return ROPEQK_SUCCESS;
}

void ropeqk_plan_destroy(ropeqk_plan *pl)
{
    if (!pl)
        return;
    /* safe with work in flight: each backend keeps what its enqueued or recorded commands use alive
     * (OpenCL's reference counts), or documents that the caller waits (Vulkan) */
    pl->ctx->be->plan_free(pl);
    ropeqk_plan_destroy(pl->chunk);
    free(pl->sinks);
    free(pl);
}
