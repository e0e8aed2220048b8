/* The scores implementations (scores_impl.h), all on the same inputs:
 *   fused            a scores plan made, run (ropeqk_plan_run on the cl_mems wrapped once) and destroyed
 *                    per evaluation, as the one-shot ropeqk_opencl_enqueue did (f32 and f16 storage).
 *   unfused-clblast  what users write today: a RoPE-only OpenCL kernel writing rotated Q and K, then
 *                    CLBlast's SgemmStridedBatched for Q K^T (baseline.c).
 *   cblas            host RoPE (fp32 cos/sin table per call, single thread) + cblas_sgemm per KV head
 *                    group through OpenBLAS (all cores) (baseline.c).
 *   ref              ropeqk_scores_ref (fp64, scalar).
 *   copy-buffer/kernel  decode rows: clEnqueueCopyBuffer and a float16 copy kernel over a buffer the
 *                    size of K in f32, the memory bandwidth yardstick for the same run. */
#include "scores_impl.h"

#include "baseline.h"
#include "values.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int bcase_init(benv *e, bcase *c, const bshape *s, bool want_copy)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    ropeqk_default_params(&c->p);
    c->p.q_pos_offset = s->q_off;
    c->p.k_pos_offset = s->k_off;
    c->p.scale = 1.0 / sqrt((double)s->D); /* explicit: the baselines use it as the GEMM alpha */
    c->tq = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->D);
    c->tk = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hkv, s->Sk, s->D);
    c->tq16 = ropeqk_tensor_bhsd(ROPEQK_F16, s->B, s->Hq, s->Sq, s->D);
    c->tk16 = ropeqk_tensor_bhsd(ROPEQK_F16, s->B, s->Hkv, s->Sk, s->D);
    c->to = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->Sk);
    size_t nq = (size_t)s->B * s->Hq * s->Sq * s->D, nk = (size_t)s->B * s->Hkv * s->Sk * s->D;
    size_t no = (size_t)s->B * s->Hq * s->Sq * s->Sk;
    c->hq = malloc(nq * 4);
    c->hk = malloc(nk * 4);
    c->hq16 = malloc(nq * 2);
    c->hk16 = malloc(nk * 2);
    if (!c->hq || !c->hk || !c->hq16 || !c->hk16)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    uint64_t rng = BENCH_SEED;
    bench_fill(&rng, c->hq, c->hq16, nq);
    bench_fill(&rng, c->hk, c->hk16, nk);
    cl_int err = CL_SUCCESS;
    c->q32 = bench_mkbuf(e, nq * 4, c->hq, &err);
    c->k32 = bench_mkbuf(e, nk * 4, c->hk, &err);
    c->q16 = bench_mkbuf(e, nq * 2, c->hq16, &err);
    c->k16 = bench_mkbuf(e, nk * 2, c->hk16, &err);
    c->out = bench_mkbuf(e, no * 4, NULL, &err);
    c->wq32 = bench_wrap(e->rq, c->q32, &err), c->wk32 = bench_wrap(e->rq, c->k32, &err);
    c->wq16 = bench_wrap(e->rq, c->q16, &err), c->wk16 = bench_wrap(e->rq, c->k16, &err);
    c->wout = bench_wrap(e->rq, c->out, &err);
    if (err)
        return err;
    if (bimpl_available(IMPL_UNFUSED_CLBLAST)) {
        float *inv = baseline_inv_freq(c->p.base, s->D);
        if (!inv)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        c->qr = bench_mkbuf(e, nq * 4, NULL, &err);
        c->kr = bench_mkbuf(e, nk * 4, NULL, &err);
        c->inv = bench_mkbuf(e, (size_t)s->D / 2 * 4, inv, &err);
        free(inv);
        if (err)
            return err;
        c->has_unfused = true;
    }
    if (bimpl_available(IMPL_CBLAS)) {
        c->hqr = malloc(nq * 4);
        c->hkr = malloc(nk * 4);
        c->hout = malloc(no * 4);
        c->cs_q = malloc((size_t)s->Sq * s->D * 4);
        c->cs_k = malloc((size_t)s->Sk * s->D * 4);
        if (!c->hqr || !c->hkr || !c->hout || !c->cs_q || !c->cs_k)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        c->has_cblas = true;
    }
    if (want_copy) {
        c->cpy_bytes = nk * 4;
        c->cpy_src = bench_mkbuf(e, c->cpy_bytes, c->hk, &err);
        c->cpy_dst = bench_mkbuf(e, c->cpy_bytes, NULL, &err);
        if (err)
            return err;
        c->has_copy = true;
    }
    return 0;
}

void bcase_free(bcase *c)
{
    cl_mem m[] = {c->q32, c->k32, c->q16, c->k16, c->out, c->qr, c->kr, c->inv, c->cpy_src, c->cpy_dst};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i])
            clReleaseMemObject(m[i]);
    free(c->hq); free(c->hk); free(c->hq16); free(c->hk16);
    free(c->hqr); free(c->hkr); free(c->hout); free(c->cs_q); free(c->cs_k);
    free(c->ref_out);
    ropeqk_buffer *w[] = {c->wq32, c->wk32, c->wq16, c->wk16, c->wout};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        ropeqk_buffer_destroy(w[i]);
    ropeqk_event_release(c->last_ev);
    memset(c, 0, sizeof *c);
}

static bqk problem(const bcase *c)
{
    const bshape *s = &c->s;
    return (bqk){s->B, s->Hq, s->Hkv, s->Sq, s->Sk, s->D, s->q_off, s->k_off, c->p.base, c->p.scale};
}

int bimpl_run(benv *e, bcase *c, bimpl i)
{
    bqk p = problem(c);
    switch (i) {
    case IMPL_FUSED_F32:
    case IMPL_FUSED_F16: {
        bool h = i == IMPL_FUSED_F16;
        ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = c->p, .q = h ? c->tq16 : c->tq,
                              .k = h ? c->tk16 : c->tk, .out = c->to};
        ropeqk_args a = {.q = {h ? c->wq16 : c->wq32, 0}, .k = {h ? c->wk16 : c->wk32, 0}, .out = {c->wout, 0}};
        ropeqk_event_release(c->last_ev);
        c->last_ev = NULL; /* the score kernel's event: lets the table split rope pass / score kernel */
        ropeqk_plan *pl;
        int err = ropeqk_plan_create(e->rq, &d, &pl);
        if (!err) /* on the context's queue, e->queue; the plan may go while the run is queued */
            err = ropeqk_plan_run(pl, &a, NULL, 0, NULL, &c->last_ev);
        ropeqk_plan_destroy(pl);
        return err;
    }
    case IMPL_UNFUSED_CLBLAST:
        return baseline_device_scores(e, &p, c->q32, c->k32, c->inv, c->qr, c->kr, c->out);
    case IMPL_CBLAS:
        return baseline_host_scores(&p, c->hq, c->hk, c->hqr, c->hkr, c->cs_q, c->cs_k, c->hout);
    case IMPL_REF: {
        if (!c->ref_out && !(c->ref_out = malloc((size_t)c->s.B * c->s.Hq * c->s.Sq * c->s.Sk * sizeof(double))))
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->s.B, c->s.Hq, c->s.Sq, c->s.Sk);
        return ropeqk_scores_ref(&c->p, &c->tq, c->hq, &c->tk, c->hk, NULL, NULL, &o64, c->ref_out);
    }
    case IMPL_COPY_BUFFER:
        return clEnqueueCopyBuffer(e->queue, c->cpy_src, c->cpy_dst, 0, 0, c->cpy_bytes, 0, NULL, NULL);
    case IMPL_COPY_KERNEL:
        return baseline_copy(e, c->cpy_src, c->cpy_dst, c->cpy_bytes);
    default:
        return -1;
    }
}

size_t bimpl_copy_bytes(const bcase *c, bimpl i)
{
    return (i == IMPL_COPY_BUFFER || i == IMPL_COPY_KERNEL) ? 2 * c->cpy_bytes : 0;
}

int bimpl_fetch(benv *e, bcase *c, bimpl i, float *out)
{
    size_t n = (size_t)c->s.B * c->s.Hq * c->s.Sq * c->s.Sk;
    if (i == IMPL_CBLAS) {
        memcpy(out, c->hout, n * 4);
        return 0;
    }
    if (i == IMPL_REF) {
        for (size_t j = 0; j < n; j++)
            out[j] = (float)c->ref_out[j];
        return 0;
    }
    return clEnqueueReadBuffer(e->queue, c->out, CL_TRUE, 0, n * 4, out, 0, NULL, NULL);
}
