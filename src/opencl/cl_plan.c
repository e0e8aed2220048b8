/* Plans on an OpenCL context: after the core validated the description and computed the
 * frequencies, the plan's program, kernels and tables (the frequency table, the decode kernel's
 * R(t) table). Enqueueing (cl_enqueue.c, cl_attn.c, cl_paged.c) then only checks buffers, takes scratch, sets
 * arguments and enqueues. */
#include "ocl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The description's own checks, before the shared validation. */

ropeqk_status rq_cl_plan_init(ropeqk_plan *pl, const float *freq4, const double *inv)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    const rq_tuning *tn = &ctx->tune;
    rq_cl_plan *cp = calloc(1, sizeof *cp);
    if (!cp)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    pl->impl = cp;
    if (pthread_mutex_init(&cp->lock, NULL) != 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    cp->lock_ok = true;
    if (!(cp->grave = rq_cl_grave_new())) /* made now: destroying the plan allocates nothing (cl_retire.c) */
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_op op = pl->op;
    int64_t M = pb->G * pb->Sq;
    /* the decode kernels' preconditions (cl/scores.cl; cl/decode_gpu.cl on the GPU profile, which
     * needs no 16-lane chunks); scores only */
    bool gpu = tn->profile == ROPEQK_PROFILE_GPU;
    bool dec = op == ROPEQK_OP_SCORES && M <= RQ_DM && pb->D <= RQ_DMAXD && tn->decode &&
               (gpu || (pb->D % RQ_DCHUNK == 0 && pb->R % (2 * RQ_DCHUNK) == 0 && pb->rot_off % RQ_DCHUNK == 0));
    size_t tab_n = dec ? (size_t)tn->dkb * 2 * decode_lanes(pb) : 0;
    float *tab = dec ? malloc(tab_n * sizeof *tab) : NULL;
    if (dec && !tab)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    cp->dec = dec;
    if (dec)
        decode_table(pb, inv, (size_t)tn->dkb, tab);
    ropeqk_status st = ROPEQK_SUCCESS;
    cl_int err = CL_SUCCESS;
    cl_program prog;
    unsigned ops = op == ROPEQK_OP_SCORES ? RQ_OPS_SCORES : op == ROPEQK_OP_ATTENTION ? RQ_OPS_ATTN : RQ_OPS_PAGED;
    /* few-row attention plans may run the paged kernels (cl_dense.c): their program holds both */
    bool dense = rq_cl_dense_plan_wants(pl);
    if (dense)
        ops |= RQ_OPS_PAGED;
    if ((st = rq_get_program(ctx, rq_cl(ctx)->device, ops, &prog)))
        goto done;
    /* the GPU decode kernel where the compiled kernel runs its work-group, else the two-pass path */
    if (dec && gpu) {
        cp->ks = clCreateKernel(prog, decode_kernel_name(pl->k.dtype, true), &err);
        if (err) {
            st = rq_cl_fail(ctx, err);
            goto done;
        }
        cp->dec_gpu = rq_kernel_fits(ctx, cp->ks, RQ_GDWG, RQ_GDECODE_LOCAL_BYTES);
        if (!cp->dec_gpu) {
            clReleaseKernel(cp->ks);
            cp->ks = NULL;
            dec = cp->dec = false;
        }
    }
    /* the frequencies, each with its M-RoPE position stream in the spare fourth float (contract.h's
     * rq_rotate_args; 0 without M-RoPE) */
    size_t nf = (size_t)(pb->R / 2) * 4;
    float *f4 = malloc(nf * sizeof *f4);
    if (!f4) {
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    memcpy(f4, freq4, nf * sizeof *f4);
    for (int64_t u = 0; u < pb->R / 2; u++)
        f4[4 * u + 3] = (float)rq_mrope_stream(pb, u);
    cp->vfreq = clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nf * sizeof *f4, f4, &err);
    free(f4);
    /* attention sinks: the plan's copy (pl->sinks, Hq logits) on the device */
    if (!err && pl->sinks)
        cp->sinks = clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                   (size_t)pb->Hq * sizeof *pl->sinks, pl->sinks, &err);
    if (!err && dec)
        cp->ctab = clCreateBuffer(rq_cl(ctx)->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, tab_n * sizeof *tab,
                                  tab, &err);
    if (!err && op != ROPEQK_OP_PAGED_DECODE)
        cp->krq = clCreateKernel(prog, rotate_kernel_name(pl->q.dtype), &err);
    if (!err && !dec && op != ROPEQK_OP_PAGED_DECODE)
        cp->krk = clCreateKernel(prog, rotate_kernel_name(pl->k.dtype), &err);
    /* qk_scores_tiled where the context built it and the plan fills at least half of a tile's rows:
     * with fewer, most of its multiply-adds would be on zero rows (qk_scores' RQ_TQ-row tiles waste
     * less there, e.g. GQA decode, 8 rows per KV head); and only if the compiled kernel runs its
     * work-group (rq_kernel_fits), else qk_scores */
    if (!err && op == ROPEQK_OP_SCORES && !dec && tn->tile > 0 && 2 * M >= tn->tile) {
        cp->ks = clCreateKernel(prog, "qk_scores_tiled", &err);
        size_t tw = (size_t)(tn->tile / tn->rb);
        cp->tiled = !err && rq_kernel_fits(ctx, cp->ks, tw * tw, RQ_TILED_LOCAL_BYTES((size_t)tn->tile, (size_t)tn->tk));
        if (!err && !cp->tiled) {
            clReleaseKernel(cp->ks);
            cp->ks = NULL;
        }
    }
    if (!err && op == ROPEQK_OP_SCORES && !cp->ks)
        cp->ks = clCreateKernel(prog, dec ? decode_kernel_name(pl->k.dtype, false) : "qk_scores", &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    if (op == ROPEQK_OP_ATTENTION)
        st = rq_attn_plan_init(pl, prog);
    if (!st && dense) /* from the same program: rq_attn_plan_init may take an attention-only one */
        st = rq_cl_dense_plan_init(pl, prog);
    else if (op == ROPEQK_OP_PAGED_DECODE)
        st = rq_cl_paged_plan_init(pl, prog);
    /* the GPU profile's fast pass 1 beside them (cl_paged_fast.c; its table from the frequencies) */
    if (!st && (op == ROPEQK_OP_PAGED_DECODE || cp->dense))
        st = rq_cl_pfast_plan_init(pl, prog, freq4);
done:
    free(tab);
    return st; /* on failure the core calls rq_cl_plan_free */
}

void rq_cl_plan_free(ropeqk_plan *pl)
{
    rq_cl_plan *cp = rq_clp(pl);
    if (!cp)
        return;
    /* with work in flight: the kernels and buffers go once every call of the context recorded so far
     * has completed (cl_retire.c: a command may still wait for a caller's user event) */
    rq_grave *g = cp->grave, own;
    if (!g) { /* its creation failed before the grave was made: nothing was enqueued */
        memset(&own, 0, sizeof own);
        g = &own;
    }
    cl_uint n = 0;
    for (int i = 0; i < (int)(sizeof cp->kx / sizeof cp->kx[0]); i++)
        g->obj[n++] = (rq_cl_obj){cp->kx[i], NULL};
    g->obj[n++] = (rq_cl_obj){cp->ks, NULL};
    g->obj[n++] = (rq_cl_obj){cp->krk, cp->sinks};
    g->obj[n++] = (rq_cl_obj){cp->krq, cp->ctab};
    g->obj[n++] = (rq_cl_obj){NULL, cp->vfreq};
    g->obj[n++] = (rq_cl_obj){cp->kfast[0], cp->ftab}; /* the fast paged pass 1 and its table */
    g->obj[n++] = (rq_cl_obj){cp->kfast[1], NULL};
    g->nobj = n;
    if (g != &own && pl->ctx && rq_cl(pl->ctx)) {
        rq_cl_bury_plan(pl->ctx, g);
    } else {
        for (cl_uint i = 0; i < n; i++) {
            if (g->obj[i].kernel)
                clReleaseKernel(g->obj[i].kernel);
            if (g->obj[i].mem)
                clReleaseMemObject(g->obj[i].mem);
        }
        if (g != &own)
            free(g);
    }
    if (cp->lock_ok)
        pthread_mutex_destroy(&cp->lock);
    free(cp);
    pl->impl = NULL;
}
