/* `ropeqk-bench --paged [LEN]`: paged-KV decode (ROPEQK_OP_PAGED_DECODE) over one sequence of LEN
 * tokens (default 32768), Hq 32 / Hkv 8, D = Dv = 128, pages of 16 tokens in shuffled order, causal,
 * f32 output; K and V caches in f32, f16, bf16, int8, fp8 e4m3 and fp8 e5m2 (8-bit caches quantized
 * on the host by support/quant.c, with their f32 scales); then f16 and int8 again as 8 sequences of
 * LEN / 8 tokens (the same bytes: issue 29's "the same total"). Reported per case: median and best wall
 * time (enqueue .. clFinish) over the runs, the bandwidth of the bytes the call must read (K + V, and
 * the scales of an 8-bit cache), tokens per second against the f16 cache's; next to it, in the same
 * run and on the same buffers, the copy kernel (float16 per work-item) moving the caches' bytes (read
 * + write), the yardstick of the decode rows in docs/performance.md. On the GPU profile also pass 1
 * before the fast kernel (paged_attn_gpu: a second context with ROPEQK_PAGED_FAST=0 on the same OpenCL
 * context), timed in the same run, and the ratio. Runs go through ropeqk_paged_run on the cl_mems wrapped
 * once per context (bench_wrap), on the context's queue, the bench's. */
#include "paged.h"

#include "baseline.h"
#include "timed.h"
#include "half.h"
#include "quant.h"
#include "values.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 32, HKV = 8, D = 128, PS = 16, RUNS = 9, WARMUP = 2 };

typedef struct {
    ropeqk_plan *plan, *old; /* old: the plan on the ROPEQK_PAGED_FAST=0 context (NULL: none) */
    ropeqk_paged_args args[2]; /* for plan, old: each context runs on its own wrappers of the cl_mems */
    ropeqk_buffer *w[2][6];    /* q, K, V, out, K scales, V scales wrapped for each context */
    ropeqk_paged_batch batch;
    cl_mem src[2], dst[2], scale[2];
    size_t bytes[2];
} pstate;

static int run_paged(benv *e, void *v)
{
    pstate *s = v;
    (void)e; /* the run goes to the context's queue, e->queue */
    return ropeqk_paged_run(s->plan, &s->args[0], &s->batch, 0, NULL, NULL);
}

static int run_old(benv *e, void *v)
{
    pstate *s = v;
    (void)e;
    return ropeqk_paged_run(s->old, &s->args[1], &s->batch, 0, NULL, NULL);
}

static int run_copy(benv *e, void *v)
{
    pstate *s = v;
    int err = 0;
    for (int i = 0; i < 2 && !err; i++)
        err = baseline_copy(e, s->src[i], s->dst[i], s->bytes[i]);
    return err;
}

static const char *dt_name(ropeqk_dtype dt)
{
    switch (dt) {
    case ROPEQK_F32: return "f32";
    case ROPEQK_F16: return "f16";
    case ROPEQK_BF16: return "bf16";
    case ROPEQK_I8: return "int8";
    case ROPEQK_FP8_E4M3: return "e4m3";
    case ROPEQK_FP8_E5M2: return "e5m2";
    default: return "?";
    }
}

/* The cache's bytes (and scales, 8-bit) from the f32 values f of n elements (rows of D). */
static void to_storage(ropeqk_dtype dt, const float *f, size_t n, unsigned char *out, float *scales)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == ROPEQK_F16 || dt == ROPEQK_BF16) {
            uint16_t h = dt == ROPEQK_F16 ? rqs_float_to_half(f[i]) : rqs_float_to_bf16(f[i]);
            memcpy(out + 2 * i, &h, 2);
        } else if (dt == ROPEQK_F32) {
            memcpy(out + 4 * i, &f[i], 4);
        }
    }
    if (scales) /* rows of the BHSD cache [np][HKV][PS][D]: scale index = row index */
        for (size_t r = 0; r < n / D; r++)
            scales[r] = rqs_q8_quantize(f + r * D, D, dt, out + r * D);
}

/* One dtype over ns sequences of len / ns tokens (old: the ROPEQK_PAGED_FAST=0 context, or NULL):
 * *ms gets the median decode time. */
static int one_dtype(benv *e, ropeqk_ctx *old, ropeqk_dtype dt, int64_t len, int ns, double *ms)
{
    const int64_t per = len / ns, pps = (per + PS - 1) / PS, np = pps * ns;
    const bool q8 = ropeqk_dtype_size(dt) == 1;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.params.base = 500000;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, ns, HQ, 1, D);
    d.k = ropeqk_tensor_bhsd(dt, np, HKV, PS, D);
    d.v = ropeqk_tensor_bhsd(dt, np, HKV, PS, D);
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, ns, HQ, 1, D);
    d.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = pps, .max_seqs = ns};
    pstate s;
    memset(&s, 0, sizeof s);
    int err = ropeqk_plan_create(e->rq, &d, &s.plan);
    if (!err && old)
        err = ropeqk_plan_create(old, &d, &s.old);
    if (err) {
        fprintf(stderr, "paged plan: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
        return err;
    }
    size_t kv = ropeqk_tensor_extent(&d.k), n = kv / ropeqk_dtype_size(dt), sb = q8 ? n / D * sizeof(float) : 0;
    float *f = malloc(n * sizeof *f), *hq = malloc((size_t)ns * HQ * D * sizeof *hq), *sc = q8 ? malloc(sb) : NULL;
    unsigned char *h = malloc(kv);
    int32_t *table = malloc((size_t)np * sizeof *table);
    cl_mem q = NULL, o = NULL;
    if (!f || !hq || !table || !h || (q8 && !sc)) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    uint64_t rng = BENCH_SEED; /* the cache values (stored as dt), Q, the page order */
    bench_fill(&rng, f, NULL, n);
    bench_fill(&rng, hq, NULL, (size_t)ns * HQ * D);
    bench_shuffle_pages(&rng, table, np);
    to_storage(dt, f, n, h, sc); /* K and V hold the same values: the timing does not care */
    cl_int cerr = CL_SUCCESS;
    q = bench_mkbuf(e, (size_t)ns * HQ * D * sizeof *hq, hq, &cerr);
    if (!cerr)
        o = bench_mkbuf(e, (size_t)ns * HQ * D * sizeof(float), NULL, &cerr);
    for (int i = 0; i < 2 && !cerr; i++) {
        s.bytes[i] = kv;
        s.src[i] = bench_mkbuf(e, kv, h, &cerr);
        if (!cerr)
            s.dst[i] = bench_mkbuf(e, kv, NULL, &cerr);
        if (!cerr && q8)
            s.scale[i] = bench_mkbuf(e, sb, sc, &cerr);
    }
    if (cerr) {
        err = cerr;
        goto done;
    }
    static int32_t lens[8], qpos[8];
    for (int i = 0; i < ns; i++)
        lens[i] = (int32_t)per, qpos[i] = (int32_t)per - 1;
    s.batch = (ropeqk_paged_batch){.n_seqs = ns, .page_table = table, .seq_lens = lens, .q_pos = qpos};
    for (int c = 0; c < 2 && !err; c++) {
        ropeqk_ctx *cx = c ? old : e->rq;
        if (!cx)
            break;
        const cl_mem m[6] = {q, s.src[0], s.src[1], o, s.scale[0], s.scale[1]};
        for (int i = 0; i < 6; i++)
            s.w[c][i] = bench_wrap(cx, m[i], &err);
        ropeqk_buffer *const *w = s.w[c];
        s.args[c] = (ropeqk_paged_args){.q = {w[0], 0}, .k_cache = {w[1], 0}, .v_cache = {w[2], 0},
                                        .out = {w[3], 0}, .k_scale = {w[4], 0}, .v_scale = {w[5], 0}};
    }
    if (err)
        goto done;
    double pm, pb, cm, cb, om = 0, ob = 0;
    if ((err = bench_time_ms(e, run_paged, &s, RUNS, WARMUP, &pm, &pb)) ||
        (err = bench_time_ms(e, run_copy, &s, RUNS, WARMUP, &cm, &cb)) ||
        (s.old && (err = bench_time_ms(e, run_old, &s, RUNS, WARMUP, &om, &ob))))
        goto done;
    double mb = 2.0 * (double)(kv + sb) / 1e6, cmb = 2.0 * (double)kv / 1e6; /* K + V (+ scales) */
    char seqs[48] = "";
    if (ns > 1)
        snprintf(seqs, sizeof seqs, " (%d sequences of %lld)", ns, (long long)per);
    printf("paged decode %s caches, %lld tokens%s (K+V%s %.0f MB): median %.3f ms (best %.3f): %.1f GB/s (best %.1f); "
           "copy kernel over the caches: median %.3f ms: %.1f GB/s moved (read + write); "
           "paged read / copy moved: %.2fx\n",
           dt_name(dt), (long long)(per * ns), seqs, q8 ? " + scales" : "", mb, pm, pb, mb / pm, mb / pb, cm,
           2 * cmb / cm, (mb / pm) / (2 * cmb / cm));
    if (s.old)
        printf("  pass 1 before the fast kernel (ROPEQK_PAGED_FAST=0): median %.3f ms (best %.3f): %.1f GB/s; "
               "fast / before: %.2fx faster\n", om, ob, mb / om, om / pm);
    *ms = pm;
done:
    if (err)
        fprintf(stderr, "paged bench (%s): error %d\n", dt_name(dt), err);
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 6; i++)
            ropeqk_buffer_destroy(s.w[c][i]);
    for (int i = 0; i < 2; i++) {
        if (s.src[i]) clReleaseMemObject(s.src[i]);
        if (s.dst[i]) clReleaseMemObject(s.dst[i]);
        if (s.scale[i]) clReleaseMemObject(s.scale[i]);
    }
    if (q) clReleaseMemObject(q);
    if (o) clReleaseMemObject(o);
    ropeqk_plan_destroy(s.plan);
    ropeqk_plan_destroy(s.old);
    free(f), free(h), free(hq), free(table), free(sc);
    return err;
}

int bench_paged(benv *e, int64_t len)
{
    printf("paged decode: Hq %d, Hkv %d, D = Dv = %d, pages of %d (shuffled), causal, %d runs after %d warm-ups\n",
           HQ, HKV, D, PS, RUNS, WARMUP);
    /* on the GPU profile, a second library context on the same OpenCL context with the fast pass 1 off */
    ropeqk_tuning t;
    ropeqk_ctx *old = NULL;
    if (ropeqk_ctx_tuning(e->rq, &t, NULL) == ROPEQK_SUCCESS && t.profile == ROPEQK_PROFILE_GPU) {
        int err = bench_ctx_with_env(e, "ROPEQK_PAGED_FAST", "0", &old);
        if (err) {
            fprintf(stderr, "paged bench: second context: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
            return err;
        }
    }
    const ropeqk_dtype dts[6] = {ROPEQK_F32, ROPEQK_F16, ROPEQK_BF16, ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2};
    double ms[6] = {0}, ms8[2] = {0};
    int err = 0;
    for (int i = 0; i < 6 && !err; i++)
        err = one_dtype(e, old, dts[i], len, 1, &ms[i]);
    /* the same bytes as 8 sequences of len / 8 tokens (f16, int8) */
    for (int i = 0; i < 2 && !err; i++)
        err = one_dtype(e, old, i ? ROPEQK_I8 : ROPEQK_F16, len, 8, &ms8[i]);
    ropeqk_ctx_destroy(old);
    if (err)
        return err;
    /* one query token per call and sequence: tokens per second is sequences / time */
    printf("tokens/s against the f16 cache:");
    for (int i = 0; i < 6; i++)
        printf(" %s %.2fx,", dt_name(dts[i]), ms[1] / ms[i]);
    printf(" 8 sequences f16 %.2fx, int8 %.2fx\n", 8 * ms[1] / ms8[0], 8 * ms[1] / ms8[1]);
    return 0;
}
