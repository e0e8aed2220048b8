/* `ropeqk-bench --dense-decode [LEN]`: dense attention decode (ROPEQK_OP_ATTENTION, B 1, Hq 32, Hkv 8,
 * D = Dv = 128, f16 Q/K/V, f32 out, causal, the query rows at the last positions) over LEN keys
 * (default 32768), three ways in the same run on the same K and V values:
 *   - dense: the library's default, which runs few-row calls through the paged decode's kernels on
 *     the dense K and V (src/opencl/cl_dense.c: keys rotated as they are read);
 *   - dense-old: the same plan on a second context over the same OpenCL context and queue created
 *     with ROPEQK_DENSE_DECODE=0 (all of K rotated into scratch, then the attention kernel);
 *   - paged: ROPEQK_OP_PAGED_DECODE over a cache of the same values in pages of 16 in order, one
 *     sequence per query row sharing the pages (the yardstick of issue 21's target).
 * For Sq = 1, 2, 4, 8, 16 query rows, then Hq 8 (no GQA) with Sq 1, 2, 4, 8 (the threshold,
 * rq_cl_dense_plan_wants, is chosen from these). The outputs are
 * compared first (max |a - b| over O; a difference over 1e-3 stops the mode, exit 3); then rounds
 * of one timed call of each in turn (enqueue .. clFinish), medians and best over RUNS rounds after
 * WARMUP. The host CPU line comes first (bench_print_cpu). */
#include "dense_decode.h"

#include "clock.h"
#include "cpu.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQMAX = 32, HKV = 8, D = 128, PS = 16, RUNS = 11, WARMUP = 2, NIMPL = 3 };
enum { W_Q, W_K, W_V, W_OUT, W_QP = W_OUT + NIMPL, W_KP, W_VP, NW }; /* out: one per implementation */

typedef struct {
    cl_command_queue queue;
    ropeqk_plan *dense[2];  /* new path, old path (a context with ROPEQK_DENSE_DECODE=0) */
    ropeqk_args da[2];      /* for dense[0], dense[1]: each context runs on its own wrappers */
    ropeqk_plan *paged;     /* on the first context */
    ropeqk_paged_args pa;
    ropeqk_paged_batch batch;
    ropeqk_buffer *w[2][NW]; /* the cl_mems of one_shape wrapped for each context (W_* order) */
} dstate;

static int run_impl(dstate *s, int i)
{
    if (i < 2) /* the neutral runs go to the contexts' queue: s->queue */
        return ropeqk_plan_run(s->dense[i], &s->da[i], NULL, 0, NULL, NULL);
    return ropeqk_paged_run(s->paged, &s->pa, &s->batch, 0, NULL, NULL);
}

static int read_out(dstate *s, cl_mem o, float *host, size_t bytes)
{
    return clEnqueueReadBuffer(s->queue, o, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
}

/* [Hkv][len][D] (dense) into [len/PS][Hkv][PS][D] (paged, pages in order) */
static void to_pages(const uint16_t *dense, uint16_t *paged, int64_t len)
{
    for (int64_t h = 0; h < HKV; h++)
        for (int64_t t = 0; t < len; t++)
            memcpy(paged + (((t / PS) * HKV + h) * PS + t % PS) * D, dense + (h * len + t) * D, D * 2);
}

static int one_shape(cl_context cx, ropeqk_ctx *rq[2], cl_command_queue queue, int64_t len, int64_t HQ,
                     int64_t Sq, cl_mem kd, cl_mem vd, cl_mem kp, cl_mem vp, const uint16_t *qh)
{
    int64_t np = (len + PS - 1) / PS;
    dstate s;
    memset(&s, 0, sizeof s);
    s.queue = queue;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.params.base = 500000;
    d.params.q_pos_offset = len - Sq;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F16, 1, HQ, Sq, D);
    d.k = ropeqk_tensor_bhsd(ROPEQK_F16, 1, HKV, len, D);
    d.v = ropeqk_tensor_bhsd(ROPEQK_F16, 1, HKV, len, D);
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, Sq, D);
    ropeqk_plan_desc p = {.op = ROPEQK_OP_PAGED_DECODE, .params = d.params};
    p.params.q_pos_offset = 0;
    /* the paged query rows: sequence i is query row i ([Sq][Hq][1][D] is [1][Hq][Sq][D] for Sq = 1 only;
     * the Q buffer below is laid out per sequence, the same values) */
    p.q = ropeqk_tensor_bhsd(ROPEQK_F16, Sq, HQ, 1, D);
    p.k = ropeqk_tensor_bhsd(ROPEQK_F16, np, HKV, PS, D);
    p.v = p.k;
    p.out = ropeqk_tensor_bhsd(ROPEQK_F32, Sq, HQ, 1, D);
    p.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = np, .max_seqs = Sq};
    int err = 0;
    for (int i = 0; i < 2 && !err; i++)
        err = ropeqk_plan_create(rq[i], &d, &s.dense[i]);
    if (!err)
        err = ropeqk_plan_create(rq[0], &p, &s.paged);
    size_t qn = (size_t)(HQ * Sq * D), ob = qn * sizeof(float);
    uint16_t *qp = malloc(qn * 2); /* Q per sequence: [i][h][d] from [h][i][d] */
    int32_t *table = malloc((size_t)(np * Sq) * sizeof *table), lens[16], qpos[16];
    float *out[NIMPL] = {malloc(ob), malloc(ob), malloc(ob)};
    cl_mem qd = NULL, qpb = NULL, od[NIMPL] = {NULL};
    if (!qp || !table || !out[0] || !out[1] || !out[2]) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    if (err) {
        fprintf(stderr, "dense decode plans: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
        goto done;
    }
    for (int64_t h = 0; h < HQ; h++)
        for (int64_t i = 0; i < Sq; i++)
            memcpy(qp + (i * HQ + h) * D, qh + (h * Sq + i) * D, D * 2);
    for (int64_t i = 0; i < Sq; i++) {
        for (int64_t j = 0; j < np; j++)
            table[i * np + j] = (int32_t)j;
        lens[i] = (int32_t)len;
        qpos[i] = (int32_t)(len - Sq + i);
    }
    cl_int cerr = CL_SUCCESS;
    qd = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, qn * 2, (void *)qh, &cerr);
    if (!cerr)
        qpb = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, qn * 2, qp, &cerr);
    for (int i = 0; i < NIMPL && !cerr; i++)
        od[i] = clCreateBuffer(cx, CL_MEM_READ_WRITE, ob, NULL, &cerr);
    if (cerr) {
        err = cerr;
        goto done;
    }
    const cl_mem m[NW] = {qd, kd, vd, od[0], od[1], od[2], qpb, kp, vp};
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < NW; j++)
            s.w[c][j] = bench_wrap(rq[c], m[j], &err);
    if (err)
        goto done;
    s.batch = (ropeqk_paged_batch){.n_seqs = Sq, .page_table = table, .seq_lens = lens, .q_pos = qpos};
    ropeqk_buffer **w = s.w[0];
    s.pa = (ropeqk_paged_args){.q = {w[W_QP], 0}, .k_cache = {w[W_KP], 0}, .v_cache = {w[W_VP], 0},
                               .out = {w[W_OUT + 2], 0}};
    /* each implementation into its own output, compared before timing */
    for (int i = 0; i < NIMPL && !err; i++) {
        for (int c = 0; c < 2; c++)
            s.da[c] = (ropeqk_args){.q = {s.w[c][W_Q], 0}, .k = {s.w[c][W_K], 0}, .v = {s.w[c][W_V], 0},
                                    .out = {s.w[c][W_OUT + i], 0}};
        err = run_impl(&s, i);
        if (!err)
            err = read_out(&s, od[i], out[i], ob);
    }
    if (err) {
        fprintf(stderr, "dense decode Sq %lld: %s: %s\n", (long long)Sq, ropeqk_status_string(err), ropeqk_last_error());
        goto done;
    }
    double d01 = bench_max_abs_diff(out[0], out[1], qn), d02 = 0;
    for (int64_t h = 0; h < HQ; h++) /* paged out is [i][h][d] */
        for (int64_t i = 0; i < Sq; i++) {
            double x = bench_max_abs_diff(out[0] + (h * Sq + i) * D, out[2] + (i * HQ + h) * D, D);
            d02 = x > d02 ? x : d02;
        }
    if (!(d01 <= 1e-3) || !(d02 <= 1e-3)) {
        fprintf(stderr, "dense decode Sq %lld: outputs differ: dense/dense-old %.3g, dense/paged %.3g\n",
                (long long)Sq, d01, d02);
        err = 3;
        goto done;
    }
    for (int c = 0; c < 2; c++)
        s.da[c].out.buf = s.w[c][W_OUT];
    double t[NIMPL][RUNS];
    for (int r = 0; r < WARMUP + RUNS && !err; r++)
        for (int i = 0; i < NIMPL && !err; i++) {
            double t0 = rqs_now();
            err = run_impl(&s, i);
            if (!err)
                err = clFinish(queue);
            if (r >= WARMUP)
                t[i][r - WARMUP] = (rqs_now() - t0) * 1e3;
        }
    if (err)
        goto done;
    double med[NIMPL], best[NIMPL];
    for (int i = 0; i < NIMPL; i++) {
        rqs_sort(t[i], RUNS);
        med[i] = t[i][RUNS / 2];
        best[i] = t[i][0];
    }
    printf("Hq %lld Sq %lld: dense %.2f ms (best %.2f) | dense-old (K pre-pass) %.2f ms (best %.2f) | paged %.2f ms "
           "(best %.2f) | dense / paged %.2fx, dense-old / dense %.2fx | max |diff| vs old %.2g, vs paged %.2g\n",
           (long long)HQ, (long long)Sq, med[0], best[0], med[1], best[1], med[2], best[2], med[0] / med[2], med[1] / med[0], d01,
           d02);
done:
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < NW; j++)
            ropeqk_buffer_destroy(s.w[c][j]);
    for (int i = 0; i < NIMPL; i++) {
        if (od[i])
            clReleaseMemObject(od[i]);
        free(out[i]);
    }
    if (qd)
        clReleaseMemObject(qd);
    if (qpb)
        clReleaseMemObject(qpb);
    for (int i = 0; i < 2; i++)
        ropeqk_plan_destroy(s.dense[i]);
    ropeqk_plan_destroy(s.paged);
    free(qp), free(table);
    return err;
}

int bench_dense_decode(benv *e, int64_t len)
{
    len = (len + PS - 1) / PS * PS; /* whole pages: the paged copy holds the same keys */
    bench_print_cpu();
    printf("dense attention decode: B 1, Hq 32 (then 8), Hkv %d, D = Dv = %d, f16 Q/K/V, f32 out, causal, %lld keys; "
           "dense (default), dense-old (ROPEQK_DENSE_DECODE=0: K rotated into scratch first), paged decode over the "
           "same values in pages of %d in order; medians of %d interleaved rounds after %d warm-ups\n",
           HKV, D, (long long)len, PS, RUNS, WARMUP);
    /* a second library context on the same OpenCL context and queue, with the dense decode off */
    ropeqk_ctx *rq[2] = {e->rq, NULL};
    int err = bench_ctx_with_env(e, "ROPEQK_DENSE_DECODE", "0", &rq[1]);
    if (err) {
        fprintf(stderr, "dense decode: second context: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
        return err;
    }
    size_t n = (size_t)(HKV * len * D), qn = (size_t)(HQMAX * 16 * D);
    float *f = malloc(n * sizeof *f);
    uint16_t *kh = malloc(n * 2), *vh = malloc(n * 2), *kpg = malloc(n * 2), *vpg = malloc(n * 2), *qh = malloc(qn * 2);
    float *qf = malloc(qn * sizeof *qf);
    cl_mem b[4] = {NULL};
    if (!f || !kh || !vh || !kpg || !vpg || !qh || !qf) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    uint64_t rng = BENCH_SEED;
    bench_fill(&rng, f, kh, n);
    bench_fill(&rng, f, vh, n);
    bench_fill(&rng, qf, qh, qn);
    to_pages(kh, kpg, len);
    to_pages(vh, vpg, len);
    const void *src[4] = {kh, vh, kpg, vpg};
    cl_int cerr = CL_SUCCESS;
    for (int i = 0; i < 4 && !cerr; i++)
        b[i] = clCreateBuffer(e->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 2, (void *)src[i], &cerr);
    if (cerr) {
        err = cerr;
        goto done;
    }
    /* the target shape (GQA 4), then plain multi-head attention (Hq = Hkv: the old path's kernel reads K
     * once per 8 rows of a KV head, so its cost per row is lower there and the crossover earlier) */
    static const int64_t shapes[][2] = {{32, 1}, {32, 2}, {32, 4}, {32, 8}, {32, 16}, {8, 1}, {8, 2}, {8, 4}, {8, 8}};
    for (int i = 0; i < 9 && !err; i++)
        err = one_shape(e->cl, rq, e->queue, len, shapes[i][0], shapes[i][1], b[0], b[1], b[2], b[3], qh);
done:
    for (int i = 0; i < 4; i++)
        if (b[i])
            clReleaseMemObject(b[i]);
    free(f), free(kh), free(vh), free(kpg), free(vpg), free(qh), free(qf);
    ropeqk_ctx_destroy(rq[1]);
    return err;
}
