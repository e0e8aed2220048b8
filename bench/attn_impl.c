/* The attention implementations (attn_impl.h), all on the same inputs
 * (O = softmax(S) V, S = scale * RoPE(Q) RoPE(K)^T with the causal / window masks):
 *   fused            one ROPEQK_OP_ATTENTION plan per dtype (f32, and f16 Q/K/V), made once per shape,
 *                    run per run (ropeqk_plan_run on the cl_mems wrapped once); S never leaves the kernel.
 *   unfused-clblast  the scores baseline's RoPE kernel on Q and K, CLBlastSgemmStridedBatched for
 *                    S = scale Q K^T (one batch entry per KV head: its G query heads are G*Sq
 *                    contiguous rows in BHSD), the softmax_rows kernel of the baseline program
 *                    (masked, max-subtracted, in place: S becomes P), then a second strided-batched
 *                    GEMM O = P V with the same batching. S/P is materialised in full: B*Hq*Sq*Sk f32.
 *   cblas            host RoPE (fp32 table, one thread) + cblas_sgemm per KV head (OpenBLAS threads)
 *                    + host softmax (same algorithm, expf, one thread per core) + cblas_sgemm P V.
 *   ref              fp64: ropeqk_scores_ref for S, then softmax and P V in double (check shapes only).
 * Both unfused paths compute every entry of S, masked or not, as unfused code does; their softmax
 * finds a row's unmasked keys as one range (no mask tensor is materialised). */
#define _POSIX_C_SOURCE 200809L
#include "attn_impl.h"

#include "baseline.h"
#include "half.h"
#include "values.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_CLBLAST
#include <clblast_c.h>
#endif
#ifdef HAVE_CBLAS
#include <cblas.h>
#endif

/* n_* element counts of Q, K, V, O and S */
static void counts(const ashape *s, size_t *nq, size_t *nk, size_t *nv, size_t *no, size_t *ns)
{
    *nq = (size_t)s->B * s->Hq * s->Sq * s->D;
    *nk = (size_t)s->B * s->Hkv * s->Sk * s->D;
    *nv = (size_t)s->B * s->Hkv * s->Sk * s->Dv;
    *no = (size_t)s->B * s->Hq * s->Sq * s->Dv;
    *ns = (size_t)s->B * s->Hq * s->Sq * s->Sk;
}

int acase_init(benv *e, acase *c, const ashape *s, const bool *want)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    ropeqk_default_params(&c->p);
    c->p.q_pos_offset = s->q_off;
    c->p.k_pos_offset = s->k_off;
    c->p.causal = s->causal;
    c->p.window = s->window;
    c->p.scale = 1.0 / sqrt((double)s->D); /* explicit: the baselines use it as the GEMM alpha */
    ropeqk_dtype dt[2] = {ROPEQK_F32, ROPEQK_F16};
    for (int h = 0; h < 2; h++) {
        c->tq[h] = ropeqk_tensor_bhsd(dt[h], s->B, s->Hq, s->Sq, s->D);
        c->tk[h] = ropeqk_tensor_bhsd(dt[h], s->B, s->Hkv, s->Sk, s->D);
        c->tv[h] = ropeqk_tensor_bhsd(dt[h], s->B, s->Hkv, s->Sk, s->Dv);
    }
    c->to = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->Dv);
    size_t nq, nk, nv, no, ns;
    counts(s, &nq, &nk, &nv, &no, &ns);
    c->hq = malloc(nq * 4), c->hk = malloc(nk * 4), c->hv = malloc(nv * 4);
    c->hq16 = malloc(nq * 2), c->hk16 = malloc(nk * 2), c->hv16 = malloc(nv * 2);
    if (!c->hq || !c->hk || !c->hv || !c->hq16 || !c->hk16 || !c->hv16)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    uint64_t rng = BENCH_SEED; /* the scores bench's Q and K values, then V */
    bench_fill(&rng, c->hq, c->hq16, nq);
    bench_fill(&rng, c->hk, c->hk16, nk);
    bench_fill(&rng, c->hv, c->hv16, nv);
    cl_int err = CL_SUCCESS;
    c->q[0] = bench_mkbuf(e, nq * 4, c->hq, &err), c->k[0] = bench_mkbuf(e, nk * 4, c->hk, &err);
    c->v[0] = bench_mkbuf(e, nv * 4, c->hv, &err), c->q[1] = bench_mkbuf(e, nq * 2, c->hq16, &err);
    c->k[1] = bench_mkbuf(e, nk * 2, c->hk16, &err), c->v[1] = bench_mkbuf(e, nv * 2, c->hv16, &err);
    c->out = bench_mkbuf(e, no * 4, NULL, &err);
    for (int h = 0; h < 2; h++) {
        c->wq[h] = bench_wrap(e->rq, c->q[h], &err), c->wk[h] = bench_wrap(e->rq, c->k[h], &err);
        c->wv[h] = bench_wrap(e->rq, c->v[h], &err);
    }
    c->wout = bench_wrap(e->rq, c->out, &err);
    if (err)
        return err;
    for (int h = 0; h < 2; h++) {
        c->why_not[IMPL_FUSED_F32 + h] = "plan creation failed";
        if (!want[IMPL_FUSED_F32 + h])
            continue;
        ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .params = c->p, .q = c->tq[h], .k = c->tk[h],
                              .v = c->tv[h], .out = c->to};
        if ((err = ropeqk_plan_create(e->rq, &d, &c->plan[h])))
            return err;
        /* the library's scratch (src/opencl/cl_attn.c): rotated Q (+ one row tile) and transposed rotated K, f32,
         * K rows padded to a multiple of 16 keys; an estimate of the design, not a measurement */
        c->extra_bytes[IMPL_FUSED_F32 + h] =
            4 * ((size_t)s->B * s->Hq * (s->Sq + 8) * s->D + (size_t)s->B * s->Hkv * ((s->Sk + 31) / 16 * 16) * s->D);
        c->has[IMPL_FUSED_F32 + h] = true;
    }
    c->why_not[IMPL_UNFUSED_CLBLAST] = bimpl_available(IMPL_UNFUSED_CLBLAST) ? "" : "CLBlast missing at configure time";
    if (want[IMPL_UNFUSED_CLBLAST] && bimpl_available(IMPL_UNFUSED_CLBLAST)) {
        cl_ulong max_alloc = 0;
        clGetDeviceInfo(e->dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
        if (ns * 4 > max_alloc) {
            c->why_not[IMPL_UNFUSED_CLBLAST] = "S exceeds the device's allocation limit";
        } else {
            float *inv = baseline_inv_freq(c->p.base, s->D);
            if (!inv)
                return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
            c->qr = bench_mkbuf(e, nq * 4, NULL, &err), c->kr = bench_mkbuf(e, nk * 4, NULL, &err);
            c->inv = bench_mkbuf(e, (size_t)s->D / 2 * 4, inv, &err), c->sp = bench_mkbuf(e, ns * 4, NULL, &err);
            free(inv);
            if (err)
                return err;
            c->extra_bytes[IMPL_UNFUSED_CLBLAST] = (nq + nk + ns) * 4 + (size_t)s->D / 2 * 4;
            c->has[IMPL_UNFUSED_CLBLAST] = true;
        }
    }
    c->why_not[IMPL_CBLAS] = bimpl_available(IMPL_CBLAS) ? "" : "OpenBLAS/CBLAS missing at configure time";
    if (want[IMPL_CBLAS] && bimpl_available(IMPL_CBLAS)) {
        c->hqr = malloc(nq * 4), c->hkr = malloc(nk * 4), c->hsp = malloc(ns * 4), c->hout = malloc(no * 4);
        c->cs_q = malloc((size_t)s->Sq * s->D * 4), c->cs_k = malloc((size_t)s->Sk * s->D * 4);
        if (!c->hqr || !c->hkr || !c->hsp || !c->hout || !c->cs_q || !c->cs_k)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        c->extra_bytes[IMPL_CBLAS] = (nq + nk + ns + (size_t)(s->Sq + s->Sk) * s->D) * 4;
        c->has[IMPL_CBLAS] = true;
    }
    return 0;
}

void acase_free(acase *c)
{
    cl_mem m[] = {c->q[0], c->k[0], c->v[0], c->q[1], c->k[1], c->v[1], c->out, c->qr, c->kr, c->inv, c->sp};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i])
            clReleaseMemObject(m[i]);
    ropeqk_buffer *w[] = {c->wq[0], c->wk[0], c->wv[0], c->wq[1], c->wk[1], c->wv[1], c->wout};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        ropeqk_buffer_destroy(w[i]);
    ropeqk_plan_destroy(c->plan[0]);
    ropeqk_plan_destroy(c->plan[1]);
    free(c->hq); free(c->hk); free(c->hv); free(c->hq16); free(c->hk16); free(c->hv16);
    free(c->hqr); free(c->hkr); free(c->hsp); free(c->hout); free(c->cs_q); free(c->cs_k);
    ropeqk_event_release(c->last_ev);
    memset(c, 0, sizeof *c);
}

#if defined(HAVE_CLBLAST) || defined(HAVE_CBLAS)
static bqk problem(const acase *c)
{
    const ashape *s = &c->s;
    return (bqk){s->B, s->Hq, s->Hkv, s->Sq, s->Sk, s->D, s->q_off, s->k_off, c->p.base, c->p.scale};
}
#endif

#ifdef HAVE_CLBLAST
/* S on the device (baseline.c), the softmax_rows kernel in place (S -> P), then O = P V. */
static int run_unfused(benv *e, acase *c)
{
    const ashape *s = &c->s;
    bqk qk = problem(c);
    int err = baseline_device_scores(e, &qk, c->q[0], c->k[0], c->inv, c->qr, c->kr, c->sp);
    if (err)
        return err;
    size_t G = (size_t)(s->Hq / s->Hkv), m = G * s->Sq, Sk = (size_t)s->Sk, Dv = (size_t)s->Dv;
    size_t nb = (size_t)s->B * s->Hkv;
    int a[6] = {s->Sq, s->Sk, (int)s->q_off, (int)s->k_off, s->causal, (int)s->window};
    err = clSetKernelArg(e->softmax, 0, sizeof(cl_mem), &c->sp);
    for (int i = 0; i < 6; i++)
        err |= clSetKernelArg(e->softmax, (cl_uint)i + 1, sizeof(int), &a[i]);
    if (err)
        return CL_INVALID_KERNEL_ARGS;
    size_t rows = (size_t)s->B * s->Hq * s->Sq;
    if ((err = clEnqueueNDRangeKernel(e->queue, e->softmax, 1, NULL, &rows, NULL, 0, NULL, NULL)))
        return err;
    return CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, Dv, Sk, 1.0f,
                                      c->sp, 0, Sk, m * Sk, c->v[0], 0, Dv, Sk * Dv, 0.0f, c->out, 0, Dv, m * Dv, nb,
                                      &e->queue, NULL);
}
#endif

#ifdef HAVE_CBLAS
/* The unmasked keys of query row i: [lo, hi) (offset positions make the mask one range). */
static void row_range(const ashape *s, int i, int64_t *lo, int64_t *hi)
{
    int64_t pq = s->q_off + i;
    *lo = 0, *hi = s->Sk;
    if (s->causal && pq - s->k_off + 1 < *hi)
        *hi = pq - s->k_off + 1;
    if (s->window > 0 && pq - s->k_off - s->window + 1 > *lo)
        *lo = pq - s->k_off - s->window + 1;
    if (*hi < *lo)
        *hi = *lo;
}

typedef struct {
    const acase *c;
    size_t r0, r1;
} sm_job;

/* In-place masked row softmax of rows [r0, r1) of the host S, the kernel's algorithm in C. */
static void *host_softmax_rows(void *arg)
{
    const sm_job *j = arg;
    const ashape *s = &j->c->s;
    for (size_t r = j->r0; r < j->r1; r++) {
        float *row = j->c->hsp + r * (size_t)s->Sk;
        int64_t lo, hi;
        row_range(s, (int)(r % (size_t)s->Sq), &lo, &hi);
        float m = -INFINITY, l = 0.0f;
        for (int64_t k = lo; k < hi; k++)
            m = fmaxf(m, row[k]);
        for (int64_t k = lo; k < hi; k++)
            l += row[k] = expf(row[k] - m);
        float inv = hi > lo ? 1.0f / l : 0.0f;
        memset(row, 0, (size_t)lo * 4);
        for (int64_t k = lo; k < hi; k++)
            row[k] *= inv;
        memset(row + hi, 0, (size_t)(s->Sk - hi) * 4);
    }
    return NULL;
}

/* S on the host (baseline.c), the softmax over row ranges on all cores, then O = P V. */
static int run_cblas(acase *c)
{
    const ashape *s = &c->s;
    bqk qk = problem(c);
    baseline_host_scores(&qk, c->hq, c->hk, c->hqr, c->hkr, c->cs_q, c->cs_k, c->hsp);
    int m = s->Hq / s->Hkv * s->Sq;
    /* softmax: one thread per online CPU (at most 16), contiguous row ranges */
    long nt = sysconf(_SC_NPROCESSORS_ONLN);
    size_t rows = (size_t)s->B * s->Hq * s->Sq;
    nt = nt < 1 ? 1 : nt > 16 ? 16 : nt;
    if ((size_t)nt > rows)
        nt = (long)rows;
    pthread_t th[16];
    sm_job jb[16];
    int started = 0;
    for (long t = 0; t < nt; t++) {
        jb[t] = (sm_job){c, rows * (size_t)t / (size_t)nt, rows * (size_t)(t + 1) / (size_t)nt};
        if (t > 0 && !pthread_create(&th[t], NULL, host_softmax_rows, &jb[t]))
            started |= 1 << t;
        else if (t > 0)
            host_softmax_rows(&jb[t]); /* no thread: do it here */
    }
    host_softmax_rows(&jb[0]);
    for (long t = 1; t < nt; t++)
        if (started & (1 << t))
            pthread_join(th[t], NULL);
    for (int bk = 0; bk < s->B * s->Hkv; bk++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, s->Dv, s->Sk, 1.0f,
                    c->hsp + (size_t)bk * m * s->Sk, s->Sk, c->hv + (size_t)bk * s->Sk * s->Dv, s->Dv, 0.0f,
                    c->hout + (size_t)bk * m * s->Dv, s->Dv);
    return 0;
}
#endif

int aimpl_run(benv *e, acase *c, bimpl i)
{
    switch (i) {
    case IMPL_FUSED_F32:
    case IMPL_FUSED_F16: {
        int h = i == IMPL_FUSED_F16;
        ropeqk_args a = {.q = {c->wq[h], 0}, .k = {c->wk[h], 0}, .v = {c->wv[h], 0}, .out = {c->wout, 0}};
        ropeqk_event_release(c->last_ev);
        c->last_ev = NULL; /* the attention kernel's event: the table splits RoPE pass / attention kernel */
        return ropeqk_plan_run(c->plan[h], &a, NULL, 0, NULL, &c->last_ev); /* on e->queue, the context's */
    }
#ifdef HAVE_CLBLAST
    case IMPL_UNFUSED_CLBLAST:
        return run_unfused(e, c);
#endif
#ifdef HAVE_CBLAS
    case IMPL_CBLAS:
        return run_cblas(c);
#endif
    default:
        return -1;
    }
}

int aimpl_fetch(benv *e, acase *c, bimpl i, float *out)
{
    size_t n = (size_t)c->s.B * c->s.Hq * c->s.Sq * c->s.Dv;
    if (i == IMPL_CBLAS) {
        memcpy(out, c->hout, n * 4);
        return 0;
    }
    return clEnqueueReadBuffer(e->queue, c->out, CL_TRUE, 0, n * 4, out, 0, NULL, NULL);
}

int aref_run(acase *c, bool f16, double *out)
{
    const ashape *s = &c->s;
    size_t nq, nk, nv, no, ns;
    counts(s, &nq, &nk, &nv, &no, &ns);
    double *S = malloc(ns * sizeof *S);
    if (!S)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_tensor s64 = ropeqk_tensor_bhsd(ROPEQK_F64, s->B, s->Hq, s->Sq, s->Sk);
    int h = f16, err = ropeqk_scores_ref(&c->p, &c->tq[h], h ? (void *)c->hq16 : c->hq, &c->tk[h],
                                         h ? (void *)c->hk16 : c->hk, NULL, NULL, &s64, S);
    int G = s->Hq / s->Hkv;
    for (size_t r = 0; !err && r < (size_t)s->B * s->Hq * s->Sq; r++) {
        const double *row = S + r * (size_t)s->Sk;
        size_t b = r / ((size_t)s->Hq * s->Sq), hq = r / (size_t)s->Sq % (size_t)s->Hq;
        size_t vb = (b * (size_t)s->Hkv + hq / (size_t)G) * (size_t)s->Sk * (size_t)s->Dv;
        double m = -INFINITY, l = 0.0;
        for (int k = 0; k < s->Sk; k++)
            m = fmax(m, row[k]);
        for (int d = 0; d < s->Dv; d++)
            out[r * (size_t)s->Dv + d] = 0.0;
        if (m == -INFINITY)
            continue; /* fully masked: O = 0 */
        for (int k = 0; k < s->Sk; k++) {
            if (row[k] == -INFINITY)
                continue;
            double p = exp(row[k] - m);
            l += p;
            for (int d = 0; d < s->Dv; d++) {
                size_t vi = vb + (size_t)k * s->Dv + d;
                out[r * (size_t)s->Dv + d] += p * (f16 ? (double)rqs_half_to_float(c->hv16[vi]) : (double)c->hv[vi]);
            }
        }
        for (int d = 0; d < s->Dv; d++)
            out[r * (size_t)s->Dv + d] /= l;
    }
    free(S);
    return err;
}
