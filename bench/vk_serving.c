/* `ropeqk-bench --vulkan --ragged` and `ropeqk-bench --vulkan --paged [LEN]`: the paged cache's
 * serving paths on the Vulkan backend alone (vk_bench.c compares the backends on fixed shapes), Hq 32
 * / Hkv 8 / D = Dv = 128, pages of 16 tokens (shuffled), f32 Q and output, causal, base 500000,
 * device-local buffers, through ropeqk.h's runs (ropeqk_paged_run / ropeqk_plan_run /
 * ropeqk_buffer_copy, each waited for: the wall time of each call). Median of RUNS after WARMUP.
 *   --ragged  a prefill chunk of 512 query rows over 4096 cached tokens (4608 keys, f16 caches)
 *             through the ragged paged call (q_indptr: vk_paged_chunk.c gathers the pages and runs the
 *             companion attention plan), against the dense Vulkan attention plan on the same shape
 *             (dense f16 K/V, no copy): issue 21's prefill target is >= 0.8x.
 *   --paged   decode of one query row over LEN tokens (default 32768) with f16, int8, fp8 e4m3 and
 *             fp8 e5m2 caches (8-bit: quantized on the host by support/quant.c, with their scales):
 *             GB/s of the bytes read (K + V, and the scales), tokens/s against f16, and the Vulkan
 *             copy (vkCmdCopyBuffer of the f16 K + V) as the yardstick, all timed in the same rounds.
 * On lavapipe decode is compute-bound (each key rotated as read: ~1 s at 32k against 7 ms for the
 * copy), so the GB/s say little there; they are the figure for a GPU. */
#include "vk_serving.h"

#include "clock.h"
#include "cpu.h"
#include "quant.h"
#include "runwait.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 32, HKV = 8, D = 128, PS = 16, RUNS = 5, WARMUP = 1 };

typedef struct {
    ropeqk_ctx *ctx;
} vks;

static ropeqk_params params(void)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.base = 500000;
    return p;
}

/* median of RUNS calls of one of the three run kinds after WARMUP */
typedef struct {
    int kind; /* 0 paged, 1 dense plan, 2 copy */
    ropeqk_plan *plan;
    ropeqk_paged_args pa;
    ropeqk_paged_batch batch;
    ropeqk_args da;
    ropeqk_copy cp[2];
} vrun;

/* n runs timed in rounds (one of each per round: load drift on a shared machine hits all alike) */
static int time_all(vrun *r, int n, double *median)
{
    double t[5][RUNS];
    for (int i = 0; i < WARMUP + RUNS; i++)
        for (int k = 0; k < n; k++) {
            double t0 = rqs_now();
            int err = r[k].kind == 0   ? rqs_paged_run_wait(r[k].plan, &r[k].pa, &r[k].batch)
                      : r[k].kind == 1 ? rqs_plan_run_wait(r[k].plan, &r[k].da, NULL)
                                       : rqs_copy_wait(r[k].cp, 2);
            if (err) {
                fprintf(stderr, "vulkan run: %s\n", ropeqk_last_error());
                return err;
            }
            if (i >= WARMUP)
                t[k][i - WARMUP] = (rqs_now() - t0) * 1e3;
        }
    for (int k = 0; k < n; k++) {
        rqs_sort(t[k], RUNS);
        median[k] = t[k][RUNS / 2];
    }
    return 0;
}

static ropeqk_buffer *mk(vks *v, size_t bytes, const void *init, int *err)
{
    ropeqk_buffer *b = NULL;
    if (!*err)
        *err = rqs_buffer_make(v->ctx, bytes, init, 0, &b);
    return b;
}

/* One sequence of `len` cached tokens in shuffled pages, its last `rows` tokens the query rows: a
 * paged plan over caches of dtype kdt (8-bit: quantized rows with scales) and its Vulkan buffers. */
typedef struct {
    ropeqk_plan *plan;
    ropeqk_buffer *q, *out, *kc, *vc, *ks, *vs;
    int32_t *table, len, qpos, ind[2];
    size_t cache_bytes; /* K + V + scales */
} pseq;

static int pseq_make(vks *v, int64_t len, int64_t rows, ropeqk_dtype kdt, const uint16_t *h16, const float *f,
                     pseq *s)
{
    memset(s, 0, sizeof *s);
    int64_t np = (len + PS - 1) / PS;
    uint64_t rng = BENCH_SEED;
    size_t n = (size_t)np * HKV * PS * D, es = ropeqk_dtype_size(kdt), ns = (size_t)np * HKV * PS;
    s->table = malloc((size_t)np * sizeof *s->table);
    float *hq = malloc((size_t)rows * HQ * D * sizeof *hq), *sc = malloc(ns * sizeof *sc);
    uint8_t *q8 = es == 1 ? malloc(n) : NULL;
    int err = !s->table || !hq || !sc || (es == 1 && !q8) ? ROPEQK_ERR_OUT_OF_HOST_MEMORY : 0;
    if (!err) {
        bench_shuffle_pages(&rng, s->table, np);
        bench_fill(&rng, hq, NULL, (size_t)rows * HQ * D);
        for (size_t r = 0; es == 1 && r < ns; r++) /* rows of D values (BHSD: consecutive) */
            sc[r] = rqs_q8_quantize(f + r * D, D, kdt, q8 + r * D);
        s->len = (int32_t)len, s->qpos = (int32_t)(len - rows), s->ind[0] = 0, s->ind[1] = (int32_t)rows;
        s->cache_bytes = 2 * n * es + (es == 1 ? 2 * ns * sizeof(float) : 0);
    }
    const void *cache = es == 1 ? (const void *)q8 : (const void *)h16;
    s->q = mk(v, (size_t)rows * HQ * D * 4, hq, &err);
    s->out = mk(v, (size_t)rows * HQ * D * 4, NULL, &err);
    s->kc = mk(v, n * es, cache, &err);
    s->vc = mk(v, n * es, cache, &err);
    if (es == 1) {
        s->ks = mk(v, ns * sizeof(float), sc, &err);
        s->vs = mk(v, ns * sizeof(float), sc, &err);
    }
    ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE, .params = params()};
    d.q = d.out = ropeqk_tensor_bhsd(ROPEQK_F32, rows, HQ, 1, D);
    d.k = d.v = ropeqk_tensor_bhsd(kdt, np, HKV, PS, D);
    d.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = np, .max_seqs = 1, .max_q_rows = rows};
    if (!err && (err = ropeqk_plan_create(v->ctx, &d, &s->plan)))
        fprintf(stderr, "paged plan: %s\n", ropeqk_last_error());
    free(hq), free(sc), free(q8);
    return err;
}

static void pseq_free(pseq *s)
{
    ropeqk_plan_destroy(s->plan);
    ropeqk_buffer *b[6] = {s->q, s->out, s->kc, s->vc, s->ks, s->vs};
    for (int i = 0; i < 6; i++)
        ropeqk_buffer_destroy(b[i]);
    free(s->table);
}

static vrun paged_run(pseq *s)
{
    vrun r = {.kind = 0, .plan = s->plan};
    r.pa = (ropeqk_paged_args){.q = {s->q, 0}, .k_cache = {s->kc, 0}, .v_cache = {s->vc, 0}, .out = {s->out, 0}};
    if (s->ks)
        r.pa.k_scale = (ropeqk_mem){s->ks, 0}, r.pa.v_scale = (ropeqk_mem){s->vs, 0};
    r.batch = (ropeqk_paged_batch){.n_seqs = 1, .page_table = s->table, .seq_lens = &s->len, .q_pos = &s->qpos,
                                   .q_indptr = s->ind};
    return r;
}

/* host values for n cache elements: f32 (quantized for 8-bit caches) and their f16 */
static int host_values(size_t n, float **f, uint16_t **h16)
{
    uint64_t rng = BENCH_SEED + 1;
    *f = malloc(n * sizeof **f), *h16 = malloc(n * sizeof **h16);
    if (!*f || !*h16)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    bench_fill(&rng, *f, *h16, n);
    return 0;
}

static int prefill(vks *v)
{
    const int64_t cached = 4096, rows = 512, len = cached + rows;
    size_t n = (size_t)((len + PS - 1) / PS) * HKV * PS * D;
    float *f = NULL;
    uint16_t *h16 = NULL;
    pseq s = {0};
    int err = host_values(n, &f, &h16);
    if (!err)
        err = pseq_make(v, len, rows, ROPEQK_F16, h16, f, &s);
    /* the dense plan: the chunk's rows as [1, Hq, 512, D] at positions 4096.., dense K/V [1, Hkv, len, D] */
    ropeqk_plan *dense = NULL;
    ropeqk_buffer *kd = NULL, *vd = NULL;
    ropeqk_plan_desc a = {.op = ROPEQK_OP_ATTENTION, .params = params()};
    a.params.q_pos_offset = cached;
    a.q = a.out = ropeqk_tensor_bshd(ROPEQK_F32, 1, rows, HQ, D);
    a.k = a.v = ropeqk_tensor_bhsd(ROPEQK_F16, 1, HKV, len, D);
    kd = mk(v, (size_t)len * HKV * D * 2, h16, &err);
    vd = mk(v, (size_t)len * HKV * D * 2, h16, &err);
    if (!err && (err = ropeqk_plan_create(v->ctx, &a, &dense)))
        fprintf(stderr, "dense plan: %s\n", ropeqk_last_error());
    double tm[2] = {0, 0}, tr, td;
    if (!err) {
        vrun r[2] = {paged_run(&s), {.kind = 1, .plan = dense}};
        r[1].da = (ropeqk_args){.q = {s.q, 0}, .k = {kd, 0}, .v = {vd, 0}, .out = {s.out, 0}};
        err = time_all(r, 2, tm);
    }
    tr = tm[0], td = tm[1];
    if (!err)
        printf("prefill   chunk of %lld rows over %lld cached tokens: ragged paged call median %.1f ms; dense "
               "attention plan median %.1f ms; ratio %.2fx (target >= 0.8x)\n",
               (long long)rows, (long long)cached, tr, td, td / tr);
    ropeqk_plan_destroy(dense);
    ropeqk_buffer_destroy(kd), ropeqk_buffer_destroy(vd);
    pseq_free(&s);
    free(f), free(h16);
    return err;
}

static int decode(vks *v, int64_t len)
{
    static const ropeqk_dtype dts[4] = {ROPEQK_F16, ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2};
    static const char *const names[4] = {"f16", "int8", "fp8 e4m3", "fp8 e5m2"};
    size_t n = (size_t)((len + PS - 1) / PS) * HKV * PS * D;
    float *f = NULL;
    uint16_t *h16 = NULL;
    pseq s[4] = {{0}};
    vrun r[5];
    double tm[5];
    ropeqk_buffer *dk = NULL, *dv = NULL;
    int err = host_values(n, &f, &h16);
    for (int i = 0; i < 4 && !err; i++)
        if (!(err = pseq_make(v, len, 1, dts[i], h16, f, &s[i])))
            r[i] = paged_run(&s[i]);
    /* the yardstick: the f16 caches' bytes copied; every dtype and the copy timed in the same rounds */
    dk = mk(v, n * 2, NULL, &err);
    dv = mk(v, n * 2, NULL, &err);
    if (!err) {
        r[4] = (vrun){.kind = 2};
        r[4].cp[0] = (ropeqk_copy){dk, 0, s[0].kc, 0, n * 2};
        r[4].cp[1] = (ropeqk_copy){dv, 0, s[0].vc, 0, n * 2};
        err = time_all(r, 5, tm);
    }
    if (!err)
        printf("decode    vulkan copy of the f16 K + V (%.1f MiB): median %.2f ms, %.2f GB/s (read + write)\n",
               (double)(4 * n) / 1048576.0, tm[4], 2.0 * (double)(4 * n) / (tm[4] * 1e6));
    for (int i = 0; i < 4 && !err; i++)
        printf("decode    %-8s cache, %lld tokens: median %.2f ms, %.2f GB/s read, %.0f tokens/s, %.2fx the f16 "
               "cache's tokens/s\n", names[i], (long long)len, tm[i], (double)s[i].cache_bytes / (tm[i] * 1e6),
               (double)len / (tm[i] * 1e-3), tm[0] / tm[i]);
    ropeqk_buffer_destroy(dk), ropeqk_buffer_destroy(dv);
    for (int i = 0; i < 4; i++)
        pseq_free(&s[i]);
    free(f), free(h16);
    return err;
}

int bench_vk_serving(const char *vk_spec, bool ragged, long long paged_len)
{
    vks v = {NULL};
    ropeqk_ctx_params cp = {.device = vk_spec};
    int err = ropeqk_ctx_create(&cp, &v.ctx);
    if (!err && ropeqk_ctx_backend(v.ctx) != ROPEQK_BACKEND_VULKAN)
        err = ROPEQK_ERR_NO_DEVICE;
    if (err) {
        fprintf(stderr, "ropeqk-bench --vulkan: no Vulkan context (%s)\n", ropeqk_last_error());
        ropeqk_ctx_destroy(v.ctx);
        return 1;
    }
    bench_print_cpu();
    printf("vulkan paged serving paths on %s: Hq %d, Hkv %d, D = Dv = %d, pages of %d (shuffled), f32 Q/out, causal, "
           "device-local buffers, median of %d runs after %d warm-ups (run + event wait)\n",
           ropeqk_ctx_device_description(v.ctx), HQ, HKV, D, PS, RUNS, WARMUP);
    if (ragged)
        err = prefill(&v);
    if (!err && paged_len > 0)
        err = decode(&v, paged_len);
    ropeqk_ctx_destroy(v.ctx);
    return err ? 1 : 0;
}
