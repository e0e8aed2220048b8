/* `ropeqk-bench --vulkan --dense-decode [LEN]`: the Vulkan twin of --dense-decode (dense_decode.c):
 * dense attention decode (ROPEQK_OP_ATTENTION, B 1, Hq 32, Hkv 8, D = Dv = 128, f16 Q/K/V, f32 out,
 * causal, the query rows at the last positions) over LEN keys (default 32768), three ways in the same
 * rounds on the same values, device-local buffers, each call run and waited for (ropeqk_plan_run /
 * ropeqk_paged_run and the event's wait):
 *   - dense: few-row calls through the paged decode's shaders on the dense K and V
 *     (src/vulkan/vk_dense.c: keys rotated as they are read), on a context with dense_rows 16 (the
 *     shared default; a Vulkan CPU device's own is 2, from these figures);
 *   - dense-old: the same plan on a second context on the same device spec with dense_rows off (the
 *     tuning's -1, ROPEQK_DENSE_DECODE=0: all of K rotated into f32 scratch, then attention.comp);
 *   - paged: ROPEQK_OP_PAGED_DECODE over a cache of the same values in pages of 16 in order, the
 *     query rows one sequence's (q_indptr).
 * Q and O are BSHD ([Sq][Hq][D]), the paged rows' layout, so one Q buffer serves all three and the
 * outputs compare directly (max |a - b| over 1e-3 stops the mode, exit 3). Sq 1, 2, 4, 16 (16: the
 * paged decode's ragged call sends a sequence of that many rows through its prefill chunk path). Medians of
 * RUNS interleaved rounds after WARMUP; the host CPU line comes first (bench_print_cpu). On lavapipe
 * every call is compute-bound on the 2-core host (a call takes about a second at 32k keys). */
#include "vk_dense_decode.h"

#include "clock.h"
#include "cpu.h"
#include "runwait.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HQ = 32, HKV = 8, D = 128, PS = 16, RUNS = 5, WARMUP = 1, NIMPL = 3 };

typedef struct {
    ropeqk_ctx *ctx[2]; /* default, ROPEQK_DENSE_DECODE=0 */
    ropeqk_buffer *q[2], *kd[2], *vd[2], *kp, *vp, *out[NIMPL]; /* q, kd, vd: a copy per context (device) */
} venv;

static int run_impl(venv *v, int i, ropeqk_plan *const pl[NIMPL], const ropeqk_paged_batch *batch)
{
    if (i < 2) {
        ropeqk_args a = {.q = {v->q[i], 0}, .k = {v->kd[i], 0}, .v = {v->vd[i], 0}, .out = {v->out[i], 0}};
        return rqs_plan_run_wait(pl[i], &a, NULL);
    }
    ropeqk_paged_args pa = {.q = {v->q[0], 0}, .k_cache = {v->kp, 0}, .v_cache = {v->vp, 0}, .out = {v->out[2], 0}};
    return rqs_paged_run_wait(pl[2], &pa, batch);
}

static int one_shape(venv *v, int64_t len, int64_t Sq)
{
    int64_t np = len / PS;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.params.base = 500000;
    d.params.q_pos_offset = len - Sq;
    d.q = ropeqk_tensor_bshd(ROPEQK_F16, 1, Sq, HQ, D);
    d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_F16, 1, HKV, len, D);
    d.out = ropeqk_tensor_bshd(ROPEQK_F32, 1, Sq, HQ, D);
    ropeqk_plan_desc p = {.op = ROPEQK_OP_PAGED_DECODE, .params = d.params};
    p.params.q_pos_offset = 0;
    p.q = ropeqk_tensor_bhsd(ROPEQK_F16, Sq, HQ, 1, D);
    p.k = p.v = ropeqk_tensor_bhsd(ROPEQK_F16, np, HKV, PS, D);
    p.out = ropeqk_tensor_bhsd(ROPEQK_F32, Sq, HQ, 1, D);
    p.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = np, .max_seqs = 1, .max_q_rows = Sq};
    ropeqk_plan *pl[NIMPL] = {NULL};
    size_t on = (size_t)(Sq * HQ * D);
    float *out[NIMPL] = {malloc(on * 4), malloc(on * 4), malloc(on * 4)};
    int32_t *table = malloc((size_t)np * sizeof *table), slen = (int32_t)len, qpos = (int32_t)(len - Sq);
    int32_t ind[2] = {0, (int32_t)Sq};
    int err = !out[0] || !out[1] || !out[2] || !table ? ROPEQK_ERR_OUT_OF_HOST_MEMORY : 0;
    for (int i = 0; i < 2 && !err; i++)
        err = ropeqk_plan_create(v->ctx[i], &d, &pl[i]);
    if (!err)
        err = ropeqk_plan_create(v->ctx[0], &p, &pl[2]);
    if (err) {
        fprintf(stderr, "vulkan dense decode plans: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
        goto done;
    }
    for (int64_t j = 0; j < np; j++)
        table[j] = (int32_t)j;
    ropeqk_paged_batch batch = {.n_seqs = 1, .page_table = table, .seq_lens = &slen, .q_pos = &qpos, .q_indptr = ind};
    for (int i = 0; i < NIMPL && !err; i++)
        if (!(err = run_impl(v, i, pl, &batch)))
            err = ropeqk_buffer_read(v->out[i], 0, out[i], on * 4); /* the buffers hold 16 rows */
    if (err) {
        fprintf(stderr, "vulkan dense decode Sq %lld: %s: %s\n", (long long)Sq, ropeqk_status_string(err),
                ropeqk_last_error());
        goto done;
    }
    double d01 = bench_max_abs_diff(out[0], out[1], on), d02 = bench_max_abs_diff(out[0], out[2], on);
    if (!(d01 <= 1e-3) || !(d02 <= 1e-3)) {
        fprintf(stderr, "vulkan dense decode Sq %lld: outputs differ: dense/dense-old %.3g, dense/paged %.3g\n",
                (long long)Sq, d01, d02);
        err = 3;
        goto done;
    }
    double t[NIMPL][RUNS], med[NIMPL], best[NIMPL];
    for (int r = 0; r < WARMUP + RUNS && !err; r++) /* one of each per round: load drift hits all alike */
        for (int i = 0; i < NIMPL && !err; i++) {
            double t0 = rqs_now();
            err = run_impl(v, i, pl, &batch);
            if (r >= WARMUP)
                t[i][r - WARMUP] = (rqs_now() - t0) * 1e3;
        }
    if (err)
        goto done;
    for (int i = 0; i < NIMPL; i++) {
        rqs_sort(t[i], RUNS);
        med[i] = t[i][RUNS / 2];
        best[i] = t[i][0];
    }
    printf("Hq %d Sq %lld: dense %.1f ms (best %.1f) | dense-old (K pre-pass) %.1f ms (best %.1f) | paged %.1f ms "
           "(best %.1f) | dense / paged %.2fx, dense-old / dense %.2fx | max |diff| vs old %.2g, vs paged %.2g\n",
           HQ, (long long)Sq, med[0], best[0], med[1], best[1], med[2], best[2], med[0] / med[2], med[1] / med[0], d01,
           d02);
done:
    for (int i = 0; i < NIMPL; i++) {
        ropeqk_plan_destroy(pl[i]);
        free(out[i]);
    }
    free(table);
    return err;
}

static ropeqk_buffer *mk(ropeqk_ctx *ctx, size_t bytes, const void *init, int *err)
{
    ropeqk_buffer *b = NULL;
    if (!*err)
        *err = rqs_buffer_make(ctx, bytes, init, 0, &b);
    return b;
}

/* [Hkv][len][D] (dense) into [len/PS][Hkv][PS][D] (paged, pages in order) */
static void to_pages(const uint16_t *dense, uint16_t *paged, int64_t len)
{
    for (int64_t h = 0; h < HKV; h++)
        for (int64_t t = 0; t < len; t++)
            memcpy(paged + (((t / PS) * HKV + h) * PS + t % PS) * D, dense + (h * len + t) * D, D * 2);
}

int bench_vk_dense_decode(const char *vk_spec, long long len_in)
{
    int64_t len = (len_in + PS - 1) / PS * PS; /* whole pages: the paged copy holds the same keys */
    venv v;
    memset(&v, 0, sizeof v);
    /* dense: the limit raised to 16 (a Vulkan CPU device's default is 2, src/vulkan/vk_tune.c, chosen
     * from this mode's figures), so that every Sq below runs the dense decode */
    ropeqk_ctx_params cp = {.device = vk_spec, .tuning = {.dense_rows = 16}};
    int err = 0;
    for (int i = 0; i < 2 && !err; i++) {
        /* the second: the same device spec with the dense decode off (dense_rows -1: ROPEQK_DENSE_DECODE=0);
         * a device of its own (its pipelines compile beside the first's: setup time, not timed) */
        if (i == 1)
            cp.tuning.dense_rows = -1;
        err = ropeqk_ctx_create(&cp, &v.ctx[i]);
        if (!err && ropeqk_ctx_backend(v.ctx[i]) != ROPEQK_BACKEND_VULKAN)
            err = ROPEQK_ERR_NO_DEVICE;
    }
    if (err) {
        fprintf(stderr, "ropeqk-bench --vulkan --dense-decode: no Vulkan context (%s)\n", ropeqk_last_error());
        goto done;
    }
    bench_print_cpu();
    printf("vulkan dense attention decode on %s: B 1, Hq %d, Hkv %d, D = Dv = %d, f16 Q/K/V, f32 out, causal, %lld "
           "keys; dense (dense_rows 16), dense-old (ROPEQK_DENSE_DECODE=0: K rotated into scratch first), paged decode over "
           "the same values in pages of %d in order; medians of %d interleaved rounds after %d warm-up (run + "
           "event wait)\n",
           ropeqk_ctx_device_description(v.ctx[0]), HQ, HKV, D, (long long)len, PS, RUNS, WARMUP);
    size_t n = (size_t)(HKV * len * D), qn = (size_t)(16 * HQ * D);
    float *f = malloc(n * sizeof *f);
    uint16_t *kh = malloc(n * 2), *vh = malloc(n * 2), *kpg = malloc(n * 2), *vpg = malloc(n * 2), *qh = malloc(qn * 2);
    if (!f || !kh || !vh || !kpg || !vpg || !qh)
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (!err) {
        uint64_t rng = BENCH_SEED;
        bench_fill(&rng, f, kh, n);
        bench_fill(&rng, f, vh, n);
        bench_fill(&rng, f, qh, qn);
        to_pages(kh, kpg, len);
        to_pages(vh, vpg, len);
    }
    /* the dense inputs once per context (each its own buffers), the same values */
    for (int i = 0; i < 2; i++) {
        v.q[i] = mk(v.ctx[i], qn * 2, qh, &err);
        v.kd[i] = mk(v.ctx[i], n * 2, kh, &err);
        v.vd[i] = mk(v.ctx[i], n * 2, vh, &err);
    }
    v.kp = mk(v.ctx[0], n * 2, kpg, &err);
    v.vp = mk(v.ctx[0], n * 2, vpg, &err);
    for (int i = 0; i < NIMPL; i++) /* host-visible: read back for the comparison */
        if (!err)
            err = rqs_buffer_make(v.ctx[i == 1], qn * 4, NULL, ROPEQK_BUFFER_HOST_VISIBLE, &v.out[i]);
    free(f), free(kh), free(vh), free(kpg), free(vpg), free(qh);
    static const int64_t rows[] = {1, 2, 4, 16};
    for (int i = 0; i < 4 && !err; i++)
        err = one_shape(&v, len, rows[i]);
    if (err && err != 3)
        fprintf(stderr, "vulkan dense decode: %s: %s\n", ropeqk_status_string(err), ropeqk_last_error());
done:;
    ropeqk_buffer *b[8] = {v.q[0], v.q[1], v.kd[0], v.kd[1], v.vd[0], v.vd[1], v.kp, v.vp};
    for (int i = 0; i < 8; i++)
        ropeqk_buffer_destroy(b[i]);
    for (int i = 0; i < NIMPL; i++)
        ropeqk_buffer_destroy(v.out[i]);
    for (int i = 1; i >= 0; i--)
        ropeqk_ctx_destroy(v.ctx[i]);
    return err == 3 ? 3 : err ? 1 : 0;
}
