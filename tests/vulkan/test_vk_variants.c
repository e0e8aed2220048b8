/* The model-family variants of docs/conventions.md section 11 on Vulkan (lavapipe in CI, with the
 * Khronos validation layer: any message fails), against the fp64 reference paths with the documented
 * metrics: soft-capping, the rotary offset, M-RoPE (contiguous and interleaved streams, [3, S]
 * position arrays, masks by token order), attention sinks, MLA (D 576 with the rotated 64 dims at the
 * end, Dv 512, one KV head, V read from K's own buffer), and their combinations with GQA/MQA, causal
 * masks with offsets (rows that see no key), sliding windows, partial rotary, f16/bf16 inputs and
 * outputs, prefill and decode (a decode plan's step), long rows over several key chunks, and the paged
 * decode (several splits, fully masked sequences, the V cache aliasing the K cache).
 *
 * Every plan runs on device buffers with NaN canaries (tests/devmem.h: ropeqk_plan_run),
 * inputs must come back unchanged. Bounds: scores 1e-5 by ropeqk_max_error with no mask mismatch;
 * attention O 1e-5 of max |V| (plus half an ulp of an f16/bf16 output) and LSE 1e-5 relative by
 * ropeqk_attention_max_error; a row that sees no key gives O = 0 exactly and LSE = -inf, or exactly
 * s_h with a sink. The seed (ROPEQK_TEST_SEED, default 20261127) is printed with every case.
 * One context for the suite: pipelines are made once per shape (lavapipe compiles them slowly). */
#include "paged_fixture.h"
#include "rng.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    th_ctx_init();
    if (!th_is_vulkan(th_ctx)) {
        ropeqk_ctx_destroy(th_ctx);
        th_ctx = NULL;
        cr_skip_test("not a Vulkan context: run with ROPEQK_DEVICE=vulkan");
    }
}

TestSuite(vk_variants, .init = setup, .fini = th_ctx_fini, .timeout = 900);

static uint64_t seed0(void) { return th_seed(20261127ull); }

/* ---- dense cases (scores and attention) -------------------------------------------------------- */

enum { POS_OFFSETS, POS_ARRAYS, POS_Q_ARRAY /* Q from arrays, K from the offsets */ };

typedef struct {
    const char *name;
    ropeqk_op op;
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    ropeqk_dtype qk, v, o;
    ropeqk_layout layout;
    int32_t R, rot_off;
    int causal;
    int64_t window, q_off, k_off;
    double scale, softcap;
    int32_t msec[3], inter; /* M-RoPE sections, interleaved (Qwen3-VL) */
    int pos;                /* POS_ARRAYS: per-token int32 arrays ([3, S] under M-RoPE); POS_Q_ARRAY: Q only */
    bool sinks;
    double sink_lo, sink_hi; /* sink logits drawn from [lo, hi] */
    bool mla;               /* V = the first Dv dims of K: one device buffer, a view of K's memory */
    int64_t max_keys;       /* > 0: a decode plan of this many keys, run with a step of Sk keys */
    double yarn;            /* > 0: YaRN scaling of this factor (DeepSeek: 40, original 4096; its
                             * attention factor multiplies cos and sin of the rotated dims only) */
    bool host;              /* host memory through ropeqk_scores / ropeqk_attention, not a plan of our own */
} vcase;

static void describe(const vcase *c, uint64_t seed, char *buf, size_t len)
{
    static const char *dt[] = {"f32", "f16", "bf16", "f64"};
    snprintf(buf, len,
             "%s [%s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld R%d@%d %s %s/%s/%s causal %d window %lld offs "
             "%lld/%lld scale %g softcap %g mrope {%d,%d,%d}%s%s%s%s max_keys %lld yarn %g] seed %llu",
             c->name, c->op == ROPEQK_OP_SCORES ? "scores" : "attention", (long long)c->B, (long long)c->Hq,
             (long long)c->Hkv, (long long)c->Sq, (long long)c->Sk, (long long)c->D, (long long)c->Dv, c->R, c->rot_off,
             c->layout == ROPEQK_HALF_SPLIT ? "half-split" : "interleaved", dt[c->qk], dt[c->v], dt[c->o], c->causal,
             (long long)c->window, (long long)c->q_off, (long long)c->k_off, c->scale, c->softcap, c->msec[0],
             c->msec[1], c->msec[2], c->inter ? " interleaved" : "",
             c->pos == POS_ARRAYS ? " arrays" : c->pos == POS_Q_ARRAY ? " Q array" : "", c->sinks ? " sinks" : "",
             c->mla ? " MLA (V aliases K)" : "", (long long)c->max_keys, c->yarn, (unsigned long long)seed);
}

static void fill_view(const ropeqk_tensor *t, unsigned char *data, uint64_t *rng)
{
    for (int64_t a = 0; a < t->ne[0]; a++)
        for (int64_t b = 0; b < t->ne[1]; b++)
            for (int64_t s = 0; s < t->ne[2]; s++)
                for (int64_t d = 0; d < t->ne[3]; d++)
                    th_put_random(data + off4(t, a, b, s, d), t->dtype, rng);
}

static double load_elem(const unsigned char *p, ropeqk_dtype t)
{
    uint16_t h;
    float f;
    switch (t) {
    case ROPEQK_F16: memcpy(&h, p, 2); return rqs_half_to_float(h);
    case ROPEQK_BF16: memcpy(&h, p, 2); return rqs_bf16_to_float(h);
    default: memcpy(&f, p, 4); return f;
    }
}

/* The mask of docs/conventions.md section 5 */
static bool masked(const vcase *c, int64_t pq, int64_t pk)
{
    return (c->causal && pk > pq) || (c->window > 0 && pq - pk >= c->window);
}

static dm_buf *upload(const void *data, size_t bytes)
{
    dm_buf *b = NULL;
    ropeqk_status st = dm_create(th_ctx, bytes, data, true, &b);
    cr_assert_eq(st, ROPEQK_SUCCESS, "device buffer of %zu bytes: %s: %s", bytes, ropeqk_status_string(st),
                 ropeqk_last_error());
    return b;
}

static void run_dense(const vcase *c, uint64_t seed)
{
    char d[700];
    describe(c, seed, d, sizeof d);
    const bool attn = c->op == ROPEQK_OP_ATTENTION, mrope = c->msec[0] || c->msec[1] || c->msec[2];
    const int64_t Skp = c->max_keys > 0 ? c->max_keys : c->Sk; /* the plan's keys */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = c->layout;
    p.rotary_dim = c->R;
    p.rotary_offset = c->rot_off;
    p.causal = c->causal;
    p.window = c->window;
    p.scale = c->scale;
    p.softcap = c->softcap;
    memcpy(p.mrope_section, c->msec, sizeof p.mrope_section);
    p.mrope_interleaved = c->inter;
    if (c->yarn > 0) {
        p.scaling.type = ROPEQK_SCALING_YARN;
        p.scaling.factor = c->yarn;
        p.scaling.original_max_position = 4096;
    }
    if (c->max_keys == 0) {
        p.q_pos_offset = c->q_off;
        p.k_pos_offset = c->k_off;
    }
    uint64_t rng = seed;
    float *sinks = NULL;
    if (c->sinks) {
        sinks = malloc((size_t)c->Hq * sizeof *sinks);
        cr_assert(sinks);
        for (int64_t h = 0; h < c->Hq; h++)
            sinks[h] = (float)(c->sink_lo + (c->sink_hi - c->sink_lo) * (0.5 + 0.5 * rqs_uniform(&rng)));
        p.sinks = sinks;
        p.n_sinks = (int32_t)c->Hq;
    }
    /* the plan's views (Skp keys), and this run's (Sk keys: a decode step uses the first Sk) */
    ropeqk_tensor tq = ropeqk_tensor_bhsd(c->qk, c->B, c->Hq, c->Sq, c->D);
    ropeqk_tensor tk = ropeqk_tensor_bhsd(c->qk, c->B, c->Hkv, Skp, c->D), tv = {0}, to, tl = {0};
    if (c->mla) { /* V: the first Dv dims of each key row, in K's own memory */
        tv = tk;
        tv.ne[3] = c->Dv;
    } else if (attn) {
        tv = ropeqk_tensor_bhsd(c->v, c->B, c->Hkv, Skp, c->Dv);
    }
    if (attn) {
        to = ropeqk_tensor_bhsd(c->o, c->B, c->Hq, c->Sq, c->Dv);
        tl = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, 1);
    } else {
        to = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, Skp);
    }
    size_t qb = ropeqk_tensor_extent(&tq), kb = ropeqk_tensor_extent(&tk), vb = attn ? ropeqk_tensor_extent(&tv) : 0;
    size_t ob = ropeqk_tensor_extent(&to), lb = attn ? ropeqk_tensor_extent(&tl) : 0;
    unsigned char *q = calloc(1, qb), *k = calloc(1, kb), *v = c->mla ? k : attn ? calloc(1, vb) : NULL;
    unsigned char *o = malloc(ob);
    float *l = attn ? malloc(lb) : NULL;
    cr_assert(q && k && o && (!attn || (v && l)));
    fill_view(&tq, q, &rng);
    fill_view(&tk, k, &rng);
    if (attn && !c->mla)
        fill_view(&tv, v, &rng);
    int64_t ns = mrope ? 3 : 1;
    int32_t *qp = NULL, *kp = NULL;
    if (c->pos != POS_OFFSETS) { /* unsorted positions; under M-RoPE three independent streams */
        qp = malloc((size_t)(ns * c->Sq) * sizeof *qp);
        cr_assert(qp);
        for (int64_t i = 0; i < ns * c->Sq; i++)
            qp[i] = (int32_t)(rqs_rand(&rng) % 5000u);
    }
    if (c->pos == POS_ARRAYS) {
        kp = malloc((size_t)(ns * c->Sk) * sizeof *kp);
        cr_assert(kp);
        for (int64_t j = 0; j < ns * c->Sk; j++)
            kp[j] = (int32_t)(rqs_rand(&rng) % 5000u);
    }

    /* the device: a plan on device buffers with canaries */
    ropeqk_plan_desc desc = {.op = c->op, .params = p, .q = tq, .k = tk, .out = to, .max_keys = c->max_keys,
                             .positions = c->pos != POS_OFFSETS ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    if (attn) {
        desc.v = tv;
        desc.lse = tl;
        desc.with_lse = 1;
    }
    ropeqk_plan *pl = NULL;
    ropeqk_status st;
    dm_buf *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL, *bqp = NULL, *bkp = NULL;
    if (c->host) { /* the host-memory calls (a plan made and run inside) */
        cr_assert(c->max_keys == 0 && !c->mla);
        st = attn ? ropeqk_attention(th_ctx, &p, &tq, q, &tk, k, &tv, v, qp, kp, &to, o, &tl, l)
                  : ropeqk_scores(th_ctx, &p, &tq, q, &tk, k, qp, kp, &to, (float *)(void *)o);
        cr_assert_eq(st, ROPEQK_SUCCESS, "host call: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
        goto reference;
    }
    st = ropeqk_plan_create(th_ctx, &desc, &pl);
    cr_assert_eq(st, ROPEQK_SUCCESS, "plan: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
    float keep0 = sinks ? sinks[0] : 0.0f;
    if (sinks) /* the plan keeps its own copy: the caller's array may change after creation */
        sinks[0] = 1e30f;
    bq = upload(q, qb), bk = upload(k, kb), bv = attn && !c->mla ? upload(v, vb) : NULL;
    bo = upload(NULL, ob), bl = attn ? upload(NULL, lb) : NULL;
    if (qp)
        bqp = upload(qp, (size_t)(ns * c->Sq) * 4);
    if (kp)
        bkp = upload(kp, (size_t)(ns * c->Sk) * 4);
    ropeqk_args a = {.q = dm_whole(bq), .k = dm_whole(bk), .out = dm_whole(bo), .q_pos = dm_whole(bqp),
                  .k_pos = dm_whole(bkp)};
    if (attn) {
        a.v = dm_whole(c->mla ? bk : bv);
        a.lse = dm_whole(bl);
    }
    ropeqk_step step = {.n_keys = c->Sk, .q_pos_offset = c->q_off, .k_pos_offset = c->k_off};
    st = rqs_plan_run_wait(pl, &a, c->max_keys > 0 ? &step : NULL);
    cr_assert_eq(st, ROPEQK_SUCCESS, "run: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(),
                 d);
    if (sinks)
        sinks[0] = keep0;
    cr_assert_eq(dm_read(bo, o), ROPEQK_SUCCESS);
    if (attn)
        cr_assert_eq(dm_read(bl, l), ROPEQK_SUCCESS);
    const dm_buf *ins[5] = {bq, bk, bv, bqp, bkp}, *outs[2] = {bo, bl};
    const void *want[5] = {q, k, v, qp, kp};
    for (int i = 0; i < 5; i++) {
        bool intact = false;
        if (ins[i])
            cr_expect(dm_check(ins[i], want[i], &intact) == ROPEQK_SUCCESS && intact,
                      "input %d or a canary around it changed: %s", i, d);
    }
    for (int i = 0; i < 2; i++) {
        bool intact = false;
        if (outs[i])
            cr_expect(dm_check(outs[i], NULL, &intact) == ROPEQK_SUCCESS && intact,
                      "a canary around output %d changed: %s", i, d);
    }

reference:
    /* the reference, on this run's keys and offsets */
    ropeqk_params pr = p;
    pr.q_pos_offset = c->q_off;
    pr.k_pos_offset = c->k_off;
    ropeqk_tensor rk = tk, rv = tv, ro = to;
    rk.ne[2] = rv.ne[2] = c->Sk;
    if (!attn)
        ro.ne[3] = c->Sk;
    double err = 0, lerr = 0;
    int64_t mism = 0, dead_rows = 0, bad_dead = 0;
    if (!attn) {
        ropeqk_tensor s64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Sk);
        double *r = malloc(ropeqk_tensor_extent(&s64));
        cr_assert(r);
        st = ropeqk_scores_ref(&pr, &tq, q, &rk, k, qp, kp, &s64, r);
        cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_last_error(), d);
        st = ropeqk_max_error(&pr, &tq, q, &rk, k, &ro, o, &s64, r, &err, &mism);
        cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s: %s", ropeqk_last_error(), d);
        free(r);
        cr_expect(err <= 1e-5, "scores error %.3g > 1e-5: %s", err, d);
        cr_expect_eq(mism, 0, "%lld mask mismatches or NaN: %s", (long long)mism, d);
        cr_log_info("%s: error %.3g", d, err);
    } else {
        ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Dv);
        ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1);
        double *ro64 = malloc(ropeqk_tensor_extent(&o64)), *rl64 = malloc(ropeqk_tensor_extent(&l64));
        cr_assert(ro64 && rl64);
        st = ropeqk_attention_ref(&pr, &tq, q, &rk, k, &rv, v, qp, kp, &o64, ro64, &l64, rl64);
        cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_last_error(), d);
        st = ropeqk_attention_max_error(&rv, v, &to, o, &o64, ro64, &tl, l, &l64, rl64, &err, &lerr, &mism);
        cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s: %s", ropeqk_last_error(), d);
        double bound = 1e-5 + (c->o == ROPEQK_F16 ? 0x1p-11 : c->o == ROPEQK_BF16 ? 0x1p-8 : 0.0);
        cr_expect(err <= bound, "O error %.3g > %.3g: %s", err, bound, d);
        cr_expect(lerr <= 1e-5, "LSE error %.3g > 1e-5: %s", lerr, d);
        cr_expect_eq(mism, 0, "%lld rows with NaN or a -inf LSE mismatch: %s", (long long)mism, d);
        /* rows that see no key (masks by token order under M-RoPE, else by the positions): O = 0
         * exactly, LSE = -inf, or exactly the head's sink */
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t i = 0; i < c->Sq; i++) {
                    int64_t pq = qp && !mrope ? qp[i] : c->q_off + i;
                    bool dead = true;
                    for (int64_t j = 0; j < c->Sk && dead; j++)
                        dead = masked(c, pq, kp && !mrope ? kp[j] : c->k_off + j);
                    if (!dead)
                        continue;
                    dead_rows++;
                    float lv = l[(b * c->Hq + h) * c->Sq + i];
                    bool ok = c->sinks ? lv == sinks[h] : (isinf(lv) && lv < 0);
                    for (int64_t x = 0; x < c->Dv; x++)
                        ok = ok && load_elem(o + off4(&to, b, h, i, x), c->o) == 0.0;
                    bad_dead += !ok;
                }
        cr_expect_eq(bad_dead, 0, "%lld of %lld rows that see no key: O not 0 or LSE not %s: %s", (long long)bad_dead,
                     (long long)dead_rows, c->sinks ? "the sink" : "-inf", d);
        cr_log_info("%s: O error %.3g, LSE %.3g, %lld rows see no key", d, err, lerr, (long long)dead_rows);
        free(ro64), free(rl64);
    }
    ropeqk_plan_destroy(pl);
    dm_free(bq), dm_free(bk), dm_free(bv), dm_free(bo), dm_free(bl);
    dm_free(bqp), dm_free(bkp);
    if (v != k)
        free(v);
    free(q), free(k), free(o), free(l), free(qp), free(kp), free(sinks);
}

/* shorthands: f32 everywhere, default scale, R = D, no mask */
#define F32S ROPEQK_F32, ROPEQK_F32, ROPEQK_F32
#define SC ROPEQK_OP_SCORES
#define AT ROPEQK_OP_ATTENTION
#define IL ROPEQK_INTERLEAVED
#define HS ROPEQK_HALF_SPLIT

static const vcase scores_cases[] = {
    /* name, op, B Hq Hkv Sq Sk D Dv, dtypes, layout, R, off, causal, window, q_off, k_off, scale, softcap, msec,
     * inter, pos, sinks, sink range, mla, max_keys */
    {"softcap 5 on scores of tens, GQA 4, causal with offsets (tiled)", SC, 1, 8, 2, 37, 70, 64, 0, F32S, IL, 0, 0,
     1, 0, 40, 0, 2.0, 5.0, {0}, 0, POS_OFFSETS, false, 0, 0, false, 0, 0, false},
    {"softcap 30, decode-shaped (few rows), window, f16", SC, 2, 8, 1, 1, 300, 128, 0, ROPEQK_F16, ROPEQK_F32,
     ROPEQK_F32, HS, 0, 0, 1, 100, 299, 0, 4.0, 30.0, {0}, 0, POS_OFFSETS, false, 0, 0, false, 0, 0, false},
    {"rotary offset 24 (R 32 of D 80), bf16, per-token positions", SC, 1, 4, 4, 20, 33, 80, 0, ROPEQK_BF16,
     ROPEQK_F32, ROPEQK_F32, HS, 32, 24, 1, 0, 0, 0, 0, 0, {0}, 0, POS_ARRAYS, false, 0, 0, false, 0, 0, false},
    {"MLA scores: D 576, R 64 at 512, MQA", SC, 1, 4, 1, 5, 40, 576, 0, F32S, IL, 64, 512, 0, 0, 0, 0, 0, 0, {0},
     0, POS_OFFSETS, false, 0, 0, false, 0, 0, false},
    {"M-RoPE {16,8,8} (Qwen2-VL), [3,S] arrays, causal by token order", SC, 1, 4, 2, 20, 50, 64, 0, F32S, HS, 0, 0,
     1, 0, 30, 0, 0, 0, {16, 8, 8}, 0, POS_ARRAYS, false, 0, 0, false, 0, 0, false},
    {"M-RoPE interleaved {12,10,10} (Qwen3-VL), arrays, window, decode-shaped", SC, 1, 8, 2, 2, 90, 64, 0, F32S,
     HS, 0, 0, 1, 30, 88, 0, 0, 0, {12, 10, 10}, 1, POS_ARRAYS, false, 0, 0, false, 0, 0, false},
    {"M-RoPE {8,12,12} with offsets only (plain RoPE), causal", SC, 1, 2, 1, 12, 30, 64, 0, F32S, HS, 0, 0, 1, 0,
     18, 0, 0, 0, {8, 12, 12}, 0, POS_OFFSETS, false, 0, 0, false, 0, 0, false},
    {"M-RoPE interleaved {12,10,10}: Q [3,Sq] array, K offsets, causal by token order", SC, 1, 4, 1, 6, 25, 64, 0,
     F32S, IL, 0, 0, 1, 0, 19, 0, 0, 0, {12, 10, 10}, 1, POS_Q_ARRAY, false, 0, 0, false, 0, 0, false},
    {"M-RoPE {6,5,5} + rotary offset 16 (R 32 of D 96) + softcap, f16", SC, 1, 2, 1, 9, 41, 96, 0, ROPEQK_F16,
     ROPEQK_F32, ROPEQK_F32, IL, 32, 16, 0, 0, 0, 0, 3.0, 8.0, {6, 5, 5}, 0, POS_ARRAYS, false, 0, 0, false, 0, 0, false},
};

static const vcase attn_cases[] = {
    {"softcap 5, GQA 4, causal with rows before every key, window", AT, 1, 8, 2, 40, 90, 64, 64, F32S, IL, 0, 0, 1,
     30, 0, 20, 1.5, 5.0, {0}, 0, POS_OFFSETS, false, 0, 0, false, 0, 0, false},
    {"sinks, MQA 8/1, causal with rows that see no key", AT, 2, 8, 1, 30, 50, 64, 64, F32S, HS, 0, 0, 1, 0, 0, 10,
     0, 0, {0}, 0, POS_OFFSETS, true, -3, 3, false, 0, 0, false},
    {"sinks dominating (logit 12) + softcap 4, f16 in, bf16 out, per-token positions", AT, 1, 4, 2, 17, 40, 64, 64,
     ROPEQK_F16, ROPEQK_F16, ROPEQK_BF16, IL, 0, 0, 1, 0, 0, 0, 1.0, 4.0, {0}, 0, POS_ARRAYS, true, 10, 12, false, 0, 0, false},
    {"decode step (12 of 64 keys): sinks + softcap + rotary offset 8 (R 16 of D 64), bf16 in, f16 out", AT, 1, 8, 2,
     1, 12, 64, 64, ROPEQK_BF16, ROPEQK_BF16, ROPEQK_F16, HS, 16, 8, 1, 0, 11, 0, 2.0, 6.0, {0}, 0, POS_OFFSETS,
     true, -1, 1, false, 64, 0, false},
    {"M-RoPE interleaved {12,10,10} + sinks + window, arrays, causal by token order", AT, 1, 4, 2, 24, 60, 64, 64,
     F32S, HS, 0, 0, 1, 20, 30, 0, 0, 0, {12, 10, 10}, 1, POS_ARRAYS, true, -2, 2, false, 0, 0, false},
    {"M-RoPE {6,5,5} + rotary offset 16 + softcap, Dv 48, no mask", AT, 1, 2, 1, 7, 33, 96, 48, F32S, IL, 32, 16,
     0, 0, 0, 0, 3.0, 8.0, {6, 5, 5}, 0, POS_ARRAYS, false, 0, 0, false, 0, 0, false},
    {"MLA prefill: D 576, R 64 at 512, Dv 512 = K's first dims (one buffer), Hkv 1, causal", AT, 1, 4, 1, 33, 70,
     576, 512, F32S, IL, 64, 512, 1, 0, 37, 0, 0, 0, {0}, 0, POS_OFFSETS, false, 0, 0, true, 0, 0, false},
    {"MLA decode, f16 latent cache, Hq 16, sinks, YaRN 40 (DeepSeek)", AT, 1, 16, 1, 1, 500, 576, 512, ROPEQK_F16,
     ROPEQK_F16, ROPEQK_F32, IL, 64, 512, 1, 0, 499, 0, 0, 0, {0}, 0, POS_OFFSETS, true, -1, 1, true, 0, 40, false},
};

/* several key chunks (llvmpipe's loop limit, vk_attn.c): the sink joins once, after the last; a row
 * before every key keeps O = 0 across the chunks and gets LSE = s_h */
static const vcase long_cases[] = {
    {"Sk 40000 in two key chunks: sinks + softcap 3, causal, rows that see almost every key", AT, 1, 4, 1, 3, 40000,
     64, 64, F32S, IL, 0, 0, 1, 0, 39997, 0, 1.0, 3.0, {0}, 0, POS_OFFSETS, true, -1, 1, false, 0, 0, false},
    {"Sk 40000 in two key chunks: sinks, every row before every key", AT, 1, 4, 1, 3, 40000, 64, 64, F32S, HS, 0, 0,
     1, 0, -3, 0, 0, 0, {0}, 0, POS_OFFSETS, true, -1, 1, false, 0, 0, false},
};

/* the host-memory calls: the same shaders through ropeqk_scores / ropeqk_attention */
static const vcase host_cases[] = {
    {"host ropeqk_scores: softcap 6 + M-RoPE {6,5,5} + rotary offset 8 (R 32 of D 48), arrays, causal", SC, 1, 4, 2,
     11, 29, 48, 0, F32S, HS, 32, 8, 1, 0, 18, 0, 2.0, 6.0, {6, 5, 5}, 0, POS_ARRAYS, false, 0, 0, false, 0, 0, true},
    {"host ropeqk_attention: sinks + softcap 7 + M-RoPE interleaved {12,10,10}, arrays, window, GQA 2, f16 V/O", AT,
     1, 4, 2, 13, 45, 64, 32, ROPEQK_F32, ROPEQK_F16, ROPEQK_F16, IL, 0, 0, 1, 16, 32, 0, 2.0, 7.0, {12, 10, 10}, 1,
     POS_ARRAYS, true, -2, 2, false, 0, 0, true},
};

static void run_all(const vcase *cs, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        run_dense(&cs[i], seed + i);
}

Test(vk_variants, scores) { run_all(scores_cases, sizeof scores_cases / sizeof scores_cases[0], seed0()); }
Test(vk_variants, attention) { run_all(attn_cases, sizeof attn_cases / sizeof attn_cases[0], seed0() + 100); }
Test(vk_variants, host_memory_calls) { run_all(host_cases, sizeof host_cases / sizeof host_cases[0], seed0() + 250); }
Test(vk_variants, attention_key_chunks) { run_all(long_cases, sizeof long_cases / sizeof long_cases[0], seed0() + 200); }

/* ---- paged decode ------------------------------------------------------------------------------ */

/* run_case (paged_fixture.c) plus, with sinks, the rows whose keys are all masked: LSE = s_h exactly,
 * O = 0; with `alias`, V is the first Dv dims of the K cache, one device buffer bound as both. */
static void run_paged(const pcase *c0, uint64_t seed, bool alias)
{
    if (!alias && !c0->p.sinks) {
        run_case(c0, seed);
        return;
    }
    pcase c = *c0;
    uint64_t rng = seed;
    static pdata d;
    pdata_make(&c, &d, &rng);
    if (alias) { /* the V cache: a view of the K cache's memory (MLA's latent c_KV) */
        free(d.v);
        d.v = d.k;
        d.tv = d.tk;
        d.tv.ne[3] = c.Dv;
        d.vb = d.kb;
    }
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(th_ctx, &desc, &pl);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): plan: %s: %s", c.name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    pbufs b;
    memset(&b, 0, sizeof b);
    b.q = upload(d.q, d.qb);
    b.k = upload(d.k, d.kb);
    b.v = alias ? NULL : upload(d.v, d.vb);
    b.o = upload(NULL, d.ob);
    b.l = upload(NULL, d.lb);
    ropeqk_paged_batch batch = batch_of(&c, &d);
    ropeqk_paged_args a = args_of(&c, &b);
    if (alias)
        a.v_cache = dm_whole(b.k);
    st = rqs_paged_run_wait(pl, &a, &batch);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): run: %s: %s", c.name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    unsigned char *out = malloc(d.ob);
    float *lse = malloc(d.lb);
    cr_assert(out && lse);
    cr_assert_eq(dm_read(b.o, out), ROPEQK_SUCCESS);
    cr_assert_eq(dm_read(b.l, lse), ROPEQK_SUCCESS);
    pf_check(&c, &d, out, c.with_lse ? lse : NULL, seed);
    int64_t dead = 0, bad = 0;
    for (int64_t s = 0; s < c.n_seqs && c.p.sinks; s++) {
        int64_t q = d.qpos[s], first = d.kpos0[s], last = first + d.lens[s] - 1;
        bool all = (c.p.causal && first > q) || (c.p.window > 0 && q - last >= c.p.window);
        for (int64_t h = 0; all && h < c.Hq; h++) {
            dead++;
            bool ok = lse[(s * c.Hq + h)] == c.p.sinks[h];
            for (int64_t x = 0; x < c.Dv; x++)
                ok = ok && load_elem(out + off4(&d.to, s, h, 0, x), c.odt) == 0.0;
            bad += !ok;
        }
    }
    cr_expect_eq(bad, 0, "%s (seed %llu): %lld of %lld rows that see no key: O not 0 or LSE not the sink", c.name,
                 (unsigned long long)seed, (long long)bad, (long long)dead);
    if (c.p.sinks)
        cr_log_info("%s (seed %llu): %lld rows see no key", c.name, (unsigned long long)seed, (long long)dead);
    const dm_buf *ins[3] = {b.q, b.k, b.v};
    const void *want[3] = {d.q, d.k, d.v};
    for (int i = 0; i < 3; i++) {
        bool intact = false;
        if (ins[i])
            cr_expect(dm_check(ins[i], want[i], &intact) == ROPEQK_SUCCESS && intact,
                      "%s: input %d or a canary changed", c.name, i);
    }
    free(out), free(lse);
    pbufs_free(&b);
    ropeqk_plan_destroy(pl);
    if (alias)
        d.v = NULL;
    pdata_free(&d);
}

Test(vk_variants, paged_softcap_and_rotary_offset)
{
    uint64_t seed = seed0() + 300;
    pcase c = base_case("paged softcap 5, scale 2, GQA 4, causal");
    int64_t lens[] = {1200, 33, 2600, 700};
    memcpy(c.lens, lens, sizeof lens);
    c.n_seqs = 4, c.max_seqs = 4, c.p.causal = 1, c.p.scale = 2.0, c.p.softcap = 5.0;
    run_paged(&c, seed, false);
    c.name = "paged rotary offset 40 (R 16 of D 64), half-split, bf16 cache, f16 out, window";
    c.p.softcap = 0, c.p.scale = 0, c.p.rotary_dim = 16, c.p.rotary_offset = 40, c.p.layout = ROPEQK_HALF_SPLIT;
    c.p.window = 900, c.kdt = c.vdt = ROPEQK_BF16, c.odt = ROPEQK_F16, c.tol = 1e-3;
    run_paged(&c, seed + 1, false);
}

Test(vk_variants, paged_sinks_fully_masked_sequences_and_splits)
{
    uint64_t seed = seed0() + 400;
    float sinks[8];
    uint64_t rng = seed;
    for (int h = 0; h < 8; h++)
        sinks[h] = (float)(2.0 * rqs_uniform(&rng));
    /* the query 100 positions before its last key: sequences of at most 100 keys see none (O = 0, LSE =
     * the sink), the long ones run over several splits (the combine adds the sink once): MQA, 4
     * sequences, so 4 tasks and splits of at most half the longest sequence for a device of 2 or more
     * cores (vk_paged.c: 4 tasks per core on a CPU device) */
    pcase c = base_case("paged sinks, MQA 8/1, causal, query 100 before the last key, splits");
    int64_t lens[] = {3000, 60, 4500, 100};
    memcpy(c.lens, lens, sizeof lens);
    c.Hkv = 1, c.n_seqs = 4, c.max_seqs = 4, c.p.causal = 1, c.q_ahead = -100;
    c.p.sinks = sinks, c.p.n_sinks = 8;
    run_paged(&c, seed, false);
    c.name = "paged sinks + softcap 8, window 64 past the query, f16 cache";
    c.q_ahead = 30, c.p.causal = 0, c.p.window = 64, c.p.softcap = 8.0, c.p.scale = 1.5;
    c.kdt = c.vdt = c.qdt = ROPEQK_F16, c.tol = 1e-3;
    run_paged(&c, seed + 1, false);
}

/* DeepSeek V2/V3 and Kimi K2 MLA decode over the latent cache: D 576 = 512 latent + 64 rope dims at
 * the end (rotary_offset 512), one KV head, V = the first 512 dims of each cached key, read from the
 * K cache's own buffer */
Test(vk_variants, paged_mla_v_aliases_the_k_cache)
{
    uint64_t seed = seed0() + 500;
    pcase c = base_case("paged MLA: D 576, R 64 at 512, Dv 512 in the K cache, Hq 16 / Hkv 1, causal, YaRN 40");
    int64_t lens[] = {2500, 40, 700}; /* 2500 keys: two splits (the loop budget's 1600 keys at D 576) */
    memcpy(c.lens, lens, sizeof lens);
    c.Hq = 16, c.Hkv = 1, c.D = 576, c.Dv = 512, c.ps = 64, c.n_seqs = 3, c.max_seqs = 3, c.maxp = 40;
    c.spare_pages = 2, c.p.causal = 1, c.p.rotary_dim = 64, c.p.rotary_offset = 512;
    c.p.scaling.type = ROPEQK_SCALING_YARN, c.p.scaling.factor = 40, c.p.scaling.original_max_position = 4096;
    c.kpos_span = 200000; /* positions past YaRN's original context */
    run_paged(&c, seed, true);
    c.name = "paged MLA, bf16 latent cache in BSHD pages, half-split, sinks, YaRN 40";
    float sinks[16];
    for (int h = 0; h < 16; h++)
        sinks[h] = (float)(h % 5) - 2.0f;
    c.p.sinks = sinks, c.p.n_sinks = 16, c.p.layout = ROPEQK_HALF_SPLIT, c.bshd_cache = true;
    c.qdt = c.kdt = c.vdt = ROPEQK_BF16, c.tol = 1e-3;
    run_paged(&c, seed + 1, true);
}
