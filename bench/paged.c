/* `ropeqk-bench --paged [LEN]`: paged-KV decode (ROPEQK_OP_PAGED_DECODE) over one sequence of LEN
 * tokens (default 32768), Hq 32 / Hkv 8, D = Dv = 128, pages of 16 tokens in shuffled order, causal,
 * f32 output; K and V caches in f32, then f16. Reported: median and best wall time (enqueue ..
 * clFinish) over the runs, and the bandwidth of the K+V bytes the call must read; next to it, in the
 * same run and on the same buffers, the copy kernel (float16 per work-item) moving the same K+V bytes
 * (read + write), the yardstick the README's decode row uses. */
#include "paged.h"

#include "baseline.h"
#include "clock.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 32, HKV = 8, D = 128, PS = 16, RUNS = 9, WARMUP = 2 };

/* median and best of RUNS timed calls of fn after WARMUP untimed ones */
typedef int (*timed_fn)(benv *e, void *ctx);

static int time_it(benv *e, timed_fn fn, void *ctx, double *median, double *best)
{
    double t[RUNS];
    for (int i = 0; i < WARMUP + RUNS; i++) {
        double t0 = rqs_now();
        int err = fn(e, ctx);
        if (err)
            return err;
        clFinish(e->queue);
        if (i >= WARMUP)
            t[i - WARMUP] = (rqs_now() - t0) * 1e3;
    }
    rqs_sort(t, RUNS);
    *median = t[RUNS / 2];
    *best = t[0];
    return 0;
}

typedef struct {
    ropeqk_plan *plan;
    ropeqk_opencl_paged_args args;
    ropeqk_paged_batch batch;
    cl_mem src[2], dst[2];
    size_t bytes[2];
} pstate;

static int run_paged(benv *e, void *v)
{
    pstate *s = v;
    return ropeqk_opencl_paged_enqueue(s->plan, e->queue, &s->args, &s->batch, 0, NULL, NULL);
}

static int run_copy(benv *e, void *v)
{
    pstate *s = v;
    int err = 0;
    for (int i = 0; i < 2 && !err; i++)
        err = baseline_copy(e, s->src[i], s->dst[i], s->bytes[i]);
    return err;
}

static int one_dtype(benv *e, ropeqk_dtype dt, int64_t len)
{
    int64_t np = (len + PS - 1) / PS;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.params.base = 500000;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, D);
    d.k = ropeqk_tensor_bhsd(dt, np, HKV, PS, D);
    d.v = ropeqk_tensor_bhsd(dt, np, HKV, PS, D);
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, D);
    d.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = np, .max_seqs = 1};
    pstate s;
    memset(&s, 0, sizeof s);
    int err = ropeqk_plan_create(e->rq, &d, &s.plan);
    if (err) {
        fprintf(stderr, "paged plan: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
        return err;
    }
    size_t kv = ropeqk_tensor_extent(&d.k), n = kv / ropeqk_dtype_size(dt);
    float *f = malloc(n * sizeof *f), *hq = malloc(HQ * D * sizeof *hq);
    uint16_t *h16 = dt == ROPEQK_F16 ? malloc(n * 2) : NULL;
    int32_t *table = malloc((size_t)np * sizeof *table);
    cl_mem q = NULL, o = NULL;
    if (!f || !hq || !table || (dt == ROPEQK_F16 && !h16)) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    uint64_t rng = BENCH_SEED; /* the cache values (f16: rounded), Q, the page order */
    bench_fill(&rng, f, h16, n);
    bench_fill(&rng, hq, NULL, HQ * D);
    bench_shuffle_pages(&rng, table, np);
    const void *h = h16 ? (const void *)h16 : f;
    cl_int cerr = CL_SUCCESS;
    q = bench_mkbuf(e, HQ * D * sizeof *hq, hq, &cerr);
    if (!cerr)
        o = bench_mkbuf(e, HQ * D * sizeof(float), NULL, &cerr);
    for (int i = 0; i < 2 && !cerr; i++) {
        s.bytes[i] = kv;
        s.src[i] = bench_mkbuf(e, kv, h, &cerr);
        if (!cerr)
            s.dst[i] = bench_mkbuf(e, kv, NULL, &cerr);
    }
    if (cerr) {
        err = cerr;
        goto done;
    }
    static int32_t lens[1], qpos[1];
    lens[0] = (int32_t)len;
    qpos[0] = (int32_t)len - 1;
    s.batch = (ropeqk_paged_batch){.n_seqs = 1, .page_table = table, .seq_lens = lens, .q_pos = qpos};
    s.args = (ropeqk_opencl_paged_args){.q = {q, 0}, .k_cache = {s.src[0], 0}, .v_cache = {s.src[1], 0},
                                        .out = {o, 0}};
    double pm, pb, cm, cb;
    if ((err = time_it(e, run_paged, &s, &pm, &pb)) || (err = time_it(e, run_copy, &s, &cm, &cb)))
        goto done;
    double mb = 2.0 * (double)kv / 1e6; /* K + V */
    printf("paged decode %s caches, %lld tokens (K+V %.0f MB): median %.2f ms (best %.2f): %.1f GB/s (best %.1f); "
           "copy kernel over the same bytes: median %.2f ms: %.1f GB/s moved (read + write); "
           "paged read / copy moved: %.2fx\n",
           dt == ROPEQK_F16 ? "f16" : "f32", (long long)len, mb, pm, pb, mb / pm, mb / pb, cm, 2 * mb / cm,
           (mb / pm) / (2 * mb / cm));
done:
    if (err)
        fprintf(stderr, "paged bench (%s): error %d\n", dt == ROPEQK_F16 ? "f16" : "f32", err);
    for (int i = 0; i < 2; i++) {
        if (s.src[i]) clReleaseMemObject(s.src[i]);
        if (s.dst[i]) clReleaseMemObject(s.dst[i]);
    }
    if (q) clReleaseMemObject(q);
    if (o) clReleaseMemObject(o);
    ropeqk_plan_destroy(s.plan);
    free(f), free(h16), free(hq), free(table);
    return err;
}

int bench_paged(benv *e, int64_t len)
{
    printf("paged decode: Hq %d, Hkv %d, D = Dv = %d, one sequence, pages of %d (shuffled), causal, %d runs "
           "after %d warm-ups\n", HQ, HKV, D, PS, RUNS, WARMUP);
    return one_dtype(e, ROPEQK_F32, len) || one_dtype(e, ROPEQK_F16, len);
}
