/* `ropeqk-bench --paged [LEN]`: paged-KV decode (ROPEQK_OP_PAGED_DECODE) over one sequence of LEN
 * tokens (default 32768), Hq 32 / Hkv 8, D = Dv = 128, pages of 16 tokens in shuffled order, causal,
 * f32 output; K and V caches in f32, then f16. Reported: median and best wall time (enqueue ..
 * clFinish) over the runs, and the bandwidth of the K+V bytes the call must read; next to it, in the
 * same run and on the same buffers, the copy kernel (float16 per work-item) moving the same K+V bytes
 * (read + write), the yardstick the README's decode row uses. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { HQ = 32, HKV = 8, D = 128, PS = 16, RUNS = 9, WARMUP = 2 };

/* median and best of RUNS timed calls of fn after WARMUP untimed ones */
typedef int (*timed_fn)(benv *e, void *ctx);

static int time_it(benv *e, timed_fn fn, void *ctx, double *median, double *best)
{
    double t[RUNS];
    for (int i = 0; i < WARMUP + RUNS; i++) {
        double t0 = now_ms();
        int err = fn(e, ctx);
        if (err)
            return err;
        clFinish(e->queue);
        if (i >= WARMUP)
            t[i - WARMUP] = now_ms() - t0;
    }
    qsort(t, RUNS, sizeof t[0], cmp_d);
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
    for (int i = 0; i < 2; i++) {
        cl_int err = clSetKernelArg(e->copy16, 0, sizeof(cl_mem), &s->src[i]);
        err |= clSetKernelArg(e->copy16, 1, sizeof(cl_mem), &s->dst[i]);
        size_t g = s->bytes[i] / 64;
        if (err || (err = clEnqueueNDRangeKernel(e->queue, e->copy16, 1, NULL, &g, NULL, 0, NULL, NULL)))
            return err;
    }
    return 0;
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
    size_t kv = ropeqk_tensor_extent(&d.k), es = ropeqk_dtype_size(dt);
    unsigned char *h = malloc(kv);
    float *hq = malloc(HQ * D * sizeof *hq);
    int32_t *table = malloc((size_t)np * sizeof *table);
    cl_mem q = NULL, o = NULL;
    if (!h || !hq || !table) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    uint64_t r = 12345;
    for (size_t i = 0; i < kv / es; i++) { /* sign, exponent 2^-6..2^-1, mantissa: exact in f16 */
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t b = (uint32_t)(r >> 33);
        uint16_t hb = (uint16_t)(((b & 1) << 15) | ((9 + (b >> 1) % 6) << 10) | ((b >> 8) & 0x3ff));
        float f = (float)((b >> 8) & 0xFFFF) / 65536.0f - 0.5f;
        if (dt == ROPEQK_F16)
            memcpy(h + i * 2, &hb, 2);
        else
            memcpy(h + i * 4, &f, 4);
    }
    for (int i = 0; i < HQ * D; i++)
        hq[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int64_t i = 0; i < np; i++)
        table[i] = (int32_t)i;
    for (int64_t i = np - 1; i > 0; i--) { /* shuffled pages */
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int64_t j = (int64_t)((r >> 33) % (uint64_t)(i + 1));
        int32_t t = table[i];
        table[i] = table[j];
        table[j] = t;
    }
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
    free(h), free(hq), free(table);
    return err;
}

int bench_paged(benv *e, int64_t len)
{
    printf("paged decode: Hq %d, Hkv %d, D = Dv = %d, one sequence, pages of %d (shuffled), causal, %d runs "
           "after %d warm-ups\n", HQ, HKV, D, PS, RUNS, WARMUP);
    return one_dtype(e, ROPEQK_F32, len) || one_dtype(e, ROPEQK_F16, len);
}
