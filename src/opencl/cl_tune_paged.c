/* The tuner's two crossover families on OpenCL (backend.h's tune_measure; src/core/tune.c drives
 * them, src/opencl/cl_tune.c lists the candidates). Both knobs are decided on the host per call, so a
 * candidate changes which path each call takes, never a kernel:
 *   chunk (chunk_rows): checked on a small ragged paged batch with one sequence at the threshold
 *     (chunk path) and one a row short of it (decode kernels) against fp64 per sequence; timed on a
 *     ragged paged call whose sequences have 2, 6, 12, 24 and 48 rows over 3072 cached tokens each,
 *     so that each step between two candidates (4, 8, 16, 32, 64) moves exactly one sequence from
 *     one path to the other and the total says which side of the step is faster.
 *   dense (dense_rows): checked on few-row dense attention at the threshold (paged decode kernels)
 *     and a row above it (the old path) against fp64; timed as the sum of dense attention calls of
 *     1, 3, 6, 12 and 24 rows over 8192 keys (between the candidates 0, 4, 8, 16, 32 likewise).
 * Timed shapes: Hq 32, Hkv 8, D 128 (Llama-style GQA), f16 K/V, f32 Q and O, causal, the shapes of
 * the measurements that chose the defaults (src/core/tuning.c); each call the median of 3 runs after
 * a warm-up. */
#include "ocl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(seed >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
}

static double median3(const double *t)
{
    return fmax(fmin(t[0], t[1]), fmin(fmax(t[0], t[1]), t[2]));
}

static ropeqk_status off_fp64(double err, int64_t mism, const char *what, int rows)
{
    if (err <= 1e-5 && mism == 0)
        return ROPEQK_SUCCESS;
    rq_set_error("tuner: %s of %d rows off the fp64 path (error %.3g, %lld mismatches)", what, rows, err,
                 (long long)mism);
    return ROPEQK_ERR_BAD_CONFIG;
}

/* ---- chunk_rows: ragged paged calls ---------------------------------------------------------- */

#define NSEQ_MAX 5
typedef struct {
    int64_t Hq, Hkv, D, ps, n;           /* heads, head dim, page size, sequences */
    int64_t rows[NSEQ_MAX], lens[NSEQ_MAX];
    ropeqk_dtype kdt;
} pshape;

/* The plan, its device buffers (q, k cache, v cache, out) and the batch's host arrays of shape s:
 * sequence i's pages in reverse order (not contiguous), its last row at its last key. Host data
 * (f32 only) uploaded where given, else the buffers filled with small values. */
typedef struct {
    ropeqk_plan *pl;
    cl_mem m[4];
    int32_t table[NSEQ_MAX * 256], lens[NSEQ_MAX], qpos[NSEQ_MAX], ind[NSEQ_MAX + 1];
    int64_t maxp, num_pages, total;
    ropeqk_paged_batch b;
} prun;

static void prun_free(prun *r)
{
    ropeqk_plan_destroy(r->pl);
    for (int i = 0; i < 4; i++)
        if (r->m[i])
            clReleaseMemObject(r->m[i]);
}

static ropeqk_status prun_make(ropeqk_ctx *c, const pshape *s, const float *q, const float *kc, const float *vc,
                               prun *r)
{
    memset(r, 0, sizeof *r);
    for (int64_t i = 0; i < s->n; i++)
        if ((s->lens[i] + s->ps - 1) / s->ps > r->maxp)
            r->maxp = (s->lens[i] + s->ps - 1) / s->ps;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t np = (s->lens[i] + s->ps - 1) / s->ps;
        for (int64_t p = 0; p < np; p++)
            r->table[i * r->maxp + p] = (int32_t)(r->num_pages + np - 1 - p);
        r->num_pages += np;
        r->lens[i] = (int32_t)s->lens[i];
        r->qpos[i] = (int32_t)(s->lens[i] - s->rows[i]);
        r->ind[i] = (int32_t)r->total;
        r->total += s->rows[i];
    }
    r->ind[s->n] = (int32_t)r->total;
    r->b = (ropeqk_paged_batch){.n_seqs = s->n, .page_table = r->table, .seq_lens = r->lens, .q_pos = r->qpos,
                                .q_indptr = r->ind};
    ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.q = d.out = ropeqk_tensor_bhsd(ROPEQK_F32, r->total, s->Hq, 1, s->D);
    d.k = d.v = ropeqk_tensor_bhsd(s->kdt, r->num_pages, s->Hkv, s->ps, s->D);
    d.paged = (ropeqk_paged_desc){.page_size = s->ps, .max_pages_per_seq = r->maxp, .max_seqs = s->n,
                                  .max_q_rows = r->total};
    ropeqk_status st = ropeqk_plan_create(c, &d, &r->pl);
    const void *host[4] = {q, kc, vc, NULL};
    size_t bytes[4] = {ropeqk_tensor_extent(&d.q), ropeqk_tensor_extent(&d.k), ropeqk_tensor_extent(&d.k),
                       ropeqk_tensor_extent(&d.q)};
    cl_int e = CL_SUCCESS;
    for (int i = 0; i < 4 && !st && !e; i++) {
        r->m[i] = clCreateBuffer(rq_cl(c)->context, CL_MEM_READ_WRITE | (host[i] ? CL_MEM_COPY_HOST_PTR : 0), bytes[i],
                                 (void *)host[i], &e);
        /* small normal values (no denormal slow paths): 0.01f, or 0.0078 in f16 */
        float z = 0.01f;
        uint16_t h = 0x2000;
        bool half = s->kdt == ROPEQK_F16 && (i == 1 || i == 2);
        if (!e && !host[i] && i != 3)
            e = clEnqueueFillBuffer(rq_cl(c)->queue, r->m[i], half ? (void *)&h : (void *)&z, half ? 2 : 4, 0,
                                    bytes[i], 0, NULL, NULL);
    }
    return st ? st : e ? rq_cl_fail(c, e) : ROPEQK_SUCCESS;
}

static ropeqk_status prun_run(ropeqk_ctx *c, prun *r, double *sec)
{
    ropeqk_opencl_paged_args a = {.q = {r->m[0], 0}, .k_cache = {r->m[1], 0}, .v_cache = {r->m[2], 0},
                                  .out = {r->m[3], 0}};
    double t0 = now_s();
    ropeqk_status st = ropeqk_opencl_paged_enqueue(r->pl, rq_cl(c)->queue, &a, &r->b, 0, NULL, NULL);
    cl_int e = clFinish(rq_cl(c)->queue);
    if (sec)
        *sec = now_s() - t0;
    return st ? st : e ? rq_cl_fail(c, e) : ROPEQK_SUCCESS;
}

/* Sequence i of a checked batch against ropeqk_attention_ref over its keys gathered from the pages. */
static ropeqk_status check_seq(const pshape *s, const prun *r, int64_t i, const float *q, const float *kc,
                               const float *vc, const float *out, double *err, int64_t *mism)
{
    const int64_t len = s->lens[i], n = s->rows[i], Hq = s->Hq, Hkv = s->Hkv, D = s->D, ps = s->ps;
    ropeqk_tensor kd = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hkv, len, D);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, n, D);
    /* its rows of the packed [rows, Hq, 1, D] q and out as a [1, Hq, n, D] view */
    ropeqk_tensor qv = {ROPEQK_F32, {1, Hq, n, D}, {Hq * n * D * 4, D * 4, Hq * D * 4, 4}};
    float *k = malloc((size_t)(Hkv * len * D) * 4), *v = malloc((size_t)(Hkv * len * D) * 4);
    double *rd = malloc((size_t)(Hq * n * D) * 8), lerr = 0;
    ropeqk_status st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (k && v && rd) {
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t j = 0; j < len; j++) {
                size_t src = (size_t)(((r->table[i * r->maxp + j / ps] * Hkv + h) * ps + j % ps) * D);
                memcpy(k + (h * len + j) * D, kc + src, (size_t)D * 4);
                memcpy(v + (h * len + j) * D, vc + src, (size_t)D * 4);
            }
        ropeqk_params p;
        ropeqk_default_params(&p);
        p.causal = 1;
        p.q_pos_offset = r->qpos[i];
        size_t r0 = (size_t)(r->ind[i] * Hq * D);
        st = ropeqk_attention_ref(&p, &qv, q + r0, &kd, k, &kd, v, NULL, NULL, &o64, rd, NULL, NULL);
        if (!st)
            st = ropeqk_attention_max_error(&kd, v, &qv, out + r0, &o64, rd, NULL, NULL, NULL, NULL, err, &lerr, mism);
    }
    free(k);
    free(v);
    free(rd);
    return st;
}

/* A ragged batch of Hq 4 / Hkv 2 / D 64, pages of 16, f32: t rows (the chunk path), t - 1 rows (the
 * decode kernels; absent at t = 1) and one decode row, over a few pages each. */
static ropeqk_status chunk_check(ropeqk_ctx *c)
{
    const int64_t t = c->tune.chunk_rows;
    pshape s = {.Hq = 4, .Hkv = 2, .D = 64, .ps = 16, .kdt = ROPEQK_F32, .n = 0};
    int64_t rows[3] = {t, t - 1, 1}, lens[3] = {t + 37, t + 20, 300};
    for (int i = 0; i < 3; i++)
        if (rows[i] >= 1 && rows[i] <= 256)
            s.rows[s.n] = rows[i], s.lens[s.n++] = lens[i];
    int64_t total = 0, kv = 0;
    for (int64_t i = 0; i < s.n; i++)
        total += s.rows[i], kv += (s.lens[i] + s.ps - 1) / s.ps * s.ps;
    size_t nq = (size_t)(total * s.Hq * s.D), nk = (size_t)(kv * s.Hkv * s.D);
    float *q = malloc(nq * 4), *kc = malloc(nk * 4), *vc = malloc(nk * 4), *out = malloc(nq * 4);
    ropeqk_status st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    prun r;
    memset(&r, 0, sizeof r);
    if (q && kc && vc && out) {
        fill(q, nq, 11);
        fill(kc, nk, 12);
        fill(vc, nk, 13);
        st = prun_make(c, &s, q, kc, vc, &r);
        if (!st)
            st = prun_run(c, &r, NULL);
        cl_int e = CL_SUCCESS;
        if (!st && (e = clEnqueueReadBuffer(rq_cl(c)->queue, r.m[3], CL_TRUE, 0, nq * 4, out, 0, NULL, NULL)))
            st = rq_cl_fail(c, e);
        for (int64_t i = 0; i < s.n && !st; i++) {
            double err = INFINITY;
            int64_t mism = 1;
            st = check_seq(&s, &r, i, q, kc, vc, out, &err, &mism);
            if (!st)
                st = off_fp64(err, mism, s.rows[i] >= t ? "a paged chunk" : "a paged sequence", (int)s.rows[i]);
        }
    }
    prun_free(&r);
    free(q);
    free(kc);
    free(vc);
    free(out);
    return st;
}

static ropeqk_status chunk_time(ropeqk_ctx *c, double *ms)
{
    pshape s = {.Hq = 32, .Hkv = 8, .D = 128, .ps = 16, .kdt = ROPEQK_F16, .n = 5,
                .rows = {2, 6, 12, 24, 48}, .lens = {3072, 3072, 3072, 3072, 3072}};
    prun r;
    double t[4];
    ropeqk_status st = prun_make(c, &s, NULL, NULL, NULL, &r);
    for (int i = 0; i < 4 && !st; i++)
        st = prun_run(c, &r, &t[i]);
    prun_free(&r);
    if (!st)
        *ms = 1e3 * median3(t + 1);
    return st;
}

/* ---- dense_rows: few-row dense attention ----------------------------------------------------- */

/* Sq rows of Hq 4 / Hkv 2 / D 64 over 300 keys, causal, through the host path (its plan takes the
 * paged kernels when Sq <= dense_rows). */
static ropeqk_status dense_check_rows(ropeqk_ctx *c, int64_t Sq)
{
    const int64_t Hq = 4, Hkv = 2, Sk = 300, D = 64;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.q_pos_offset = Sk - Sq;
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, D), k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hkv, Sk, D);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, D);
    size_t nq = (size_t)(Hq * Sq * D), nk = (size_t)(Hkv * Sk * D);
    float *qd = malloc(nq * 4), *kd = malloc(nk * 4), *vd = malloc(nk * 4), *od = malloc(nq * 4);
    double *rd = malloc(nq * 8), err = INFINITY, lerr = 0;
    int64_t mism = 1;
    ropeqk_status st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (qd && kd && vd && od && rd) {
        fill(qd, nq, 21);
        fill(kd, nk, 22);
        fill(vd, nk, 23);
        if (!(st = ropeqk_attention(c, &p, &q, qd, &k, kd, &k, vd, NULL, NULL, &q, od, NULL, NULL)) &&
            !(st = ropeqk_attention_ref(&p, &q, qd, &k, kd, &k, vd, NULL, NULL, &o64, rd, NULL, NULL)) &&
            !(st = ropeqk_attention_max_error(&k, vd, &q, od, &o64, rd, NULL, NULL, NULL, NULL, &err, &lerr, &mism)))
            st = off_fp64(err, mism, Sq <= c->tune.dense_rows ? "dense decode" : "dense attention", (int)Sq);
    }
    free(qd);
    free(kd);
    free(vd);
    free(od);
    free(rd);
    return st;
}

static ropeqk_status dense_check(ropeqk_ctx *c)
{
    const int64_t t = c->tune.dense_rows;
    ropeqk_status st = dense_check_rows(c, t > 0 ? t : 1);
    return st || t == 0 ? st : dense_check_rows(c, t + 1);
}

static ropeqk_status dense_time(ropeqk_ctx *c, double *ms)
{
    static const int64_t rows[] = {1, 3, 6, 12, 24};
    const int64_t Hq = 32, Hkv = 8, Sk = 8192, D = 128;
    ropeqk_status st = ROPEQK_SUCCESS;
    *ms = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0] && !st; i++) {
        ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION};
        ropeqk_default_params(&d.params);
        d.params.causal = 1;
        d.params.q_pos_offset = Sk - rows[i];
        d.q = d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, rows[i], D);
        d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_F16, 1, Hkv, Sk, D);
        ropeqk_plan *pl = NULL;
        double t[4];
        if (!(st = ropeqk_plan_create(c, &d, &pl)) && !(st = rq_cl_time_plan(pl, 4, t)))
            *ms += 1e3 * median3(t + 1);
        ropeqk_plan_destroy(pl);
    }
    return st;
}

ropeqk_status rq_cl_tune_check(ropeqk_ctx *c, rq_family f)
{
    return f == RQ_FAM_CHUNK ? chunk_check(c) : dense_check(c);
}

ropeqk_status rq_cl_tune_time(ropeqk_ctx *c, rq_family f, double *ms)
{
    return f == RQ_FAM_CHUNK ? chunk_time(c, ms) : dense_time(c, ms);
}

ropeqk_status rq_cl_tune_measure(ropeqk_ctx *c, rq_family f, double *ms)
{
    ropeqk_status st = rq_cl_tune_check(c, f);
    return st || !ms ? st : rq_cl_tune_time(c, f, ms);
}
