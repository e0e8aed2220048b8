/* The Vulkan tensor-core path (docs/tensor-cores.md) through its emulated shaders: tuning vk_coopmat 1
 * runs cm_split.comp, cm_attn.comp and cm_scores.comp with the 16 x 16 x 16 products as loops over
 * the same f16 operands (glsl/cm_ops.glsl), so the tiling, the masks, the power-of-two scales, the
 * hi/lo splits, the lazy rescaling and both modes' error bounds are checked on any Vulkan device
 * (lavapipe in CI), against the fp64 path with the metrics of docs/conventions.md:
 *   - attention, accurate: O within 1e-5 of max |V| (plus half an ulp of an f16/bf16 output), LSE
 *     within 1e-5 relative, -inf and 0 exactly where the reference has them; fast: the documented
 *     bounds (RQ_FAST_O, RQ_FAST_LSE), and above 1e-6 on f32 outputs, so a plan that silently fell
 *     back to today's f32 shaders fails;
 *   - scores the same way (accurate 1e-5, fast RQ_FAST_S);
 *   - shapes: D and Dv not multiples of 16, Dv over two column blocks, GQA 1..8, causal with offsets
 *     (fully masked rows), windows, per-token positions near INT32_MAX, both layouts, partial rotary,
 *     scaling, f32/f16/bf16, BSHD views, the variants (soft-cap, sinks, rotary offset, M-RoPE), rows
 *     of K and V scaled by 2^+-40 (f16 alone would overflow or flush them), scores near 100;
 *   - the masking rule: a key whose K or V row is not finite makes the rows that see it NaN (O and
 *     LSE) and leaves the others exact;
 *   - without vk_coopmat on a device without cooperative matrices, fast mode runs today's shaders.
 * On a device with cooperative matrices, ROPEQK_VK_COOPMAT=0 (the environment wins over the tests'
 * vk_coopmat 1) runs the same checks on the real cooperative-matrix shaders.
 * Seed: ROPEQK_TEST_SEED or 20261126, in every failure message. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fast mode's bounds on these tests' inputs (values in [-1, 1), docs/tensor-cores.md has the
 * measurements on unit-normal inputs) */
#define RQ_FAST_O 2e-3
#define RQ_FAST_LSE 2e-3
#define RQ_FAST_S 2e-3

static void teardown(void) { th_leak_check(); }
TestSuite(vk_cm, .fini = teardown, .timeout = 900);

/* the Vulkan device: $ROPEQK_DEVICE where it names one ("vulkan:1"), else the first */
static const char *vk_device(void)
{
    const char *e = getenv("ROPEQK_DEVICE");
    return e && !strncmp(e, "vulkan", 6) ? e : "vulkan";
}

static ropeqk_ctx *cm_ctx(int mode)
{
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    t.vk_coopmat = mode;
    return th_ctx_on(vk_device(), &t);
}

typedef struct {
    const char *name;
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    int causal, layout;
    int64_t window, q_off, k_off;
    int32_t R, rot_off;
    bool per_token, bshd, lse, plan, sinks, mrope;
    ropeqk_dtype in, v, out;
    double softcap, amp; /* amp: Q and K scaled so that scores reach about amp */
    int scale_rows;      /* Q times 2^-40, rows of K and V alternately times 2^40 and 2^-40 (f16 alone
                          * would flush Q, overflow K and V's large rows) */
    ropeqk_scaling_type scaling;
} acase;

static const acase cases[] = {
    {"GQA 4, D 128, causal, f32, plan", 1, 8, 2, 100, 300, 128, 128, 1, 0, 0, 200, 0, 0, 0, false, false, true, true,
     false, false, ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, 0, 0, 0, 0},
    {"D 80, Dv 40, half-split, R 32, f16 in/out", 1, 4, 4, 70, 133, 80, 40, 0, 1, 0, 0, 0, 32, 0, false, false, true,
     false, false, false, ROPEQK_F16, ROPEQK_F16, ROPEQK_F16, 0, 0, 0, ROPEQK_SCALING_YARN},
    {"G 8, Dv 256 (two blocks), window, per-token positions near INT32_MAX, bf16", 1, 8, 1, 9, 300, 64, 256, 1, 0, 100,
     0, 0, 0, 0, true, false, true, true, false, false, ROPEQK_BF16, ROPEQK_BF16, ROPEQK_BF16, 0, 0, 0, 0},
    {"rows before every key (O 0, LSE -inf), D 16, Dv 3", 2, 3, 1, 5, 33, 16, 3, 1, 0, 0, 48, 50, 0, 0, false, false,
     true, false, false, false, ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, 0, 0, 0, 0},
    {"BSHD, B 2, offsets near INT32_MAX, Dv 160 (two blocks of 5)", 2, 4, 2, 40, 90, 64, 160, 1, 1, 0,
     2147483647 - 39, 2147483647 - 89, 0, 0, false, true, true, true, false, false, ROPEQK_F32, ROPEQK_F16, ROPEQK_F32,
     0, 0, 0, ROPEQK_SCALING_LLAMA3},
    {"soft-cap 30, sinks, MLA-like rotary offset", 1, 4, 1, 33, 65, 96, 64, 1, 0, 0, 32, 0, 32, 64, false, false, true,
     true, true, false, ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, 30.0, 0, 0, 0},
    {"M-RoPE with [3, S] positions", 1, 2, 2, 20, 50, 64, 64, 1, 0, 0, 0, 0, 0, 0, true, false, true, false, false, true,
     ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, 0, 0, 0, 0},
    {"Q rows times 2^-40, K and V rows times 2^+-40", 1, 4, 2, 48, 96, 64, 64, 0, 0, 0, 0, 0, 0, 0, false, false, true, true, false, false,
     ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, 0, 0, 1, 0},
    {"scores near 100 (diagonal), D 128", 1, 2, 2, 64, 64, 128, 128, 1, 0, 0, 0, 0, 0, 0, false, false, true, false,
     false, false, ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, 0, 100.0, 0, 0},
};

static uint64_t seed0(void) { return th_seed(20261126ull); }

static void *fill(const ropeqk_tensor *t, uint64_t *rng, th_buf *b)
{
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    cr_assert(th_alloc(b, t->dtype, ne, TH_BHSD));
    th_fill_random(b, rng);
    return b->data;
}

/* rows of a [B,H,S,n] f32 buffer scaled by 2^40 and 2^-40 alternately (all: by f) */
static void scale_rows(float *x, int64_t rows, int64_t n, float f)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            x[r * n + i] *= f != 0.0f ? f : r % 2 ? 0x1p-40f : 0x1p40f;
}

/* One case in one mode: the device's O and LSE against the fp64 path. */
static void run_attn(ropeqk_ctx *ctx, const acase *c, ropeqk_math math, uint64_t seed, double *err, double *lerr,
                     int64_t *mism, int64_t *inf_rows)
{
    char d[400];
    snprintf(d, sizeof d, "%s, %s, seed %llu", c->name, math ? "fast" : "accurate", (unsigned long long)seed);
    uint64_t rng = seed;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = c->causal, p.layout = (ropeqk_layout)c->layout, p.window = c->window, p.rotary_dim = c->R;
    p.rotary_offset = c->rot_off, p.softcap = c->softcap, p.math = math;
    p.q_pos_offset = c->q_off, p.k_pos_offset = c->k_off;
    p.scaling.type = c->scaling;
    if (c->scaling == ROPEQK_SCALING_YARN || c->scaling == ROPEQK_SCALING_LLAMA3) {
        p.scaling.factor = 8;
        p.scaling.original_max_position = 4096;
    }
    float sinks[8] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f, 3.0f, 0.25f};
    if (c->sinks) {
        p.sinks = sinks;
        p.n_sinks = (int32_t)c->Hq;
    }
    if (c->mrope) { /* R/2 = 32 frequencies: 16 temporal, 8 height, 8 width */
        p.mrope_section[0] = 16, p.mrope_section[1] = 8, p.mrope_section[2] = 8;
    }
    ropeqk_tensor q = c->bshd ? ropeqk_tensor_bshd(c->in, c->B, c->Sq, c->Hq, c->D)
                              : ropeqk_tensor_bhsd(c->in, c->B, c->Hq, c->Sq, c->D);
    ropeqk_tensor k = c->bshd ? ropeqk_tensor_bshd(c->in, c->B, c->Sk, c->Hkv, c->D)
                              : ropeqk_tensor_bhsd(c->in, c->B, c->Hkv, c->Sk, c->D);
    ropeqk_tensor v = c->bshd ? ropeqk_tensor_bshd(c->v, c->B, c->Sk, c->Hkv, c->Dv)
                              : ropeqk_tensor_bhsd(c->v, c->B, c->Hkv, c->Sk, c->Dv);
    ropeqk_tensor o = ropeqk_tensor_bhsd(c->out, c->B, c->Hq, c->Sq, c->Dv);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Dv);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, 1);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1);
    th_buf qb, kb, vb;
    void *qd = fill(&q, &rng, &qb), *kd = fill(&k, &rng, &kb), *vd = fill(&v, &rng, &vb);
    if (c->amp > 0) { /* scale |q| |k| = amp, each query copied into the key at its position */
        float a = (float)sqrt(3.0 * c->amp / sqrt((double)c->D));
        for (size_t i = 0; i < ropeqk_tensor_extent(&q) / 4; i++)
            ((float *)qd)[i] *= a;
        for (int64_t h = 0; h < c->Hkv; h++)
            memcpy((float *)kd + h * c->Sk * c->D, (float *)qd + h * (c->Hq / c->Hkv) * c->Sq * c->D,
                   (size_t)(c->Sq * c->D) * 4);
    }
    if (c->scale_rows) {
        scale_rows(qd, c->B * c->Hq * c->Sq, c->D, 0x1p-40f);
        scale_rows(kd, c->B * c->Hkv * c->Sk, c->D, 0.0f);
        scale_rows(vd, c->B * c->Hkv * c->Sk, c->Dv, 0.0f);
    }
    int streams = c->mrope ? 3 : 1;
    int32_t *qp = NULL, *kp = NULL;
    if (c->per_token) { /* unsorted positions near INT32_MAX (M-RoPE: small ones, three streams) */
        qp = malloc((size_t)(streams * c->Sq) * 4);
        kp = malloc((size_t)(streams * c->Sk) * 4);
        int32_t top = c->mrope ? 5000 : 2147483647;
        for (int64_t j = 0; j < streams * c->Sk; j++)
            kp[j] = top - (int32_t)(rqs_rand(&rng) % 4000);
        for (int64_t i = 0; i < streams * c->Sq; i++)
            qp[i] = top - (int32_t)(rqs_rand(&rng) % 1000);
        if (c->mrope) /* masks by token order: offsets */
            p.q_pos_offset = c->Sk - c->Sq;
    }
    double *o64d = malloc(ropeqk_tensor_extent(&o64)), *l64d = malloc(ropeqk_tensor_extent(&l64));
    void *od = malloc(ropeqk_tensor_extent(&o));
    float *ld = malloc(ropeqk_tensor_extent(&l));
    ropeqk_status st = ropeqk_attention_ref(&p, &q, qd, &k, kd, &v, vd, qp, kp, &o64, o64d, &l64, l64d);
    cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_last_error(), d);
    if (!c->plan) {
        st = ropeqk_attention(ctx, &p, &q, qd, &k, kd, &v, vd, qp, kp, &o, od, &l, ld);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", ropeqk_last_error(), d);
    } else { /* a plan on device buffers with NaN canaries around every view */
        const void *host[7] = {qd, kd, vd, NULL, qp, kp, NULL};
        const size_t bytes[7] = {ropeqk_tensor_extent(&q), ropeqk_tensor_extent(&k), ropeqk_tensor_extent(&v),
                                 ropeqk_tensor_extent(&o), (size_t)(streams * c->Sq) * 4,
                                 (size_t)(streams * c->Sk) * 4, ropeqk_tensor_extent(&l)};
        dm_buf *m[7] = {NULL};
        for (int i = 0; i < 7; i++)
            if (i < 4 || i == 6 || c->per_token)
                cr_assert_eq(dm_create(ctx, bytes[i], host[i], true, &m[i]), ROPEQK_SUCCESS, "%s", d);
        ropeqk_plan_desc pd = {.op = ROPEQK_OP_ATTENTION, .params = p, .q = q, .k = k, .v = v, .out = o, .lse = l,
                               .with_lse = 1, .positions = c->per_token ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
        ropeqk_plan *pl = NULL;
        cr_assert_eq(ropeqk_plan_create(ctx, &pd, &pl), ROPEQK_SUCCESS, "plan: %s: %s", ropeqk_last_error(), d);
        ropeqk_args a = {.q = dm_whole(m[0]), .k = dm_whole(m[1]), .v = dm_whole(m[2]), .out = dm_whole(m[3]),
                      .q_pos = dm_whole(m[4]), .k_pos = dm_whole(m[5]), .lse = dm_whole(m[6])};
        cr_assert_eq(rqs_plan_run_wait(pl, &a, NULL), ROPEQK_SUCCESS, "run: %s: %s", ropeqk_last_error(), d);
        cr_assert_eq(dm_read(m[3], od), ROPEQK_SUCCESS);
        cr_assert_eq(dm_read(m[6], ld), ROPEQK_SUCCESS);
        for (int i = 0; i < 7; i++) {
            bool intact = false;
            if (m[i])
                cr_assert(dm_check(m[i], host[i], &intact) == ROPEQK_SUCCESS && intact,
                          "buffer %d: a canary or an input changed: %s", i, d);
            dm_free(m[i]);
        }
        ropeqk_plan_destroy(pl);
    }
    st = ropeqk_attention_max_error(&v, vd, &o, od, &o64, o64d, &l, ld, &l64, l64d, err, lerr, mism);
    cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s", d);
    *inf_rows = 0; /* fully masked rows: LSE -inf and O exactly 0 where the reference has them */
    for (int64_t r = 0; r < c->B * c->Hq * c->Sq; r++)
        if (isinf(l64d[r]) && l64d[r] < 0) {
            (*inf_rows)++;
            cr_expect(isinf(ld[r]) && ld[r] < 0, "row %lld: LSE %g, expected -inf: %s", (long long)r, ld[r], d);
            for (int64_t e = 0; e < c->Dv; e++) {
                size_t off = (size_t)(r * c->Dv + e) * ropeqk_dtype_size(c->out);
                cr_expect(c->out == ROPEQK_F32 ? ((float *)od)[off / 4] == 0.0f : ((uint16_t *)od)[off / 2] == 0,
                          "row %lld: O not 0 where every key is masked: %s", (long long)r, d);
            }
        }
    th_free(&qb);
    th_free(&kb);
    th_free(&vb);
    free(o64d), free(l64d), free(od), free(ld), free(qp), free(kp);
}

Test(vk_cm, attention_both_modes)
{
    ropeqk_ctx *ctx = cm_ctx(1);
    uint64_t seed = seed0();
    cr_log_info("seed %llu", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const acase *c = &cases[i];
        double out = c->out == ROPEQK_F16 ? 0x1p-11 : c->out == ROPEQK_BF16 ? 0x1p-8 : 0.0;
        double err, lerr;
        int64_t mism, inf_rows;
        run_attn(ctx, c, ROPEQK_MATH_ACCURATE, seed + i, &err, &lerr, &mism, &inf_rows);
        cr_expect(err <= 1e-5 + out && lerr <= 1e-5 && mism == 0, "%s, accurate, seed %llu: O %.3g LSE %.3g, %lld mismatches",
                  c->name, (unsigned long long)(seed + i), err, lerr, (long long)mism);
        double aerr = err;
        run_attn(ctx, c, ROPEQK_MATH_FAST, seed + i, &err, &lerr, &mism, &inf_rows);
        cr_expect(err <= RQ_FAST_O + out && lerr <= RQ_FAST_LSE && mism == 0,
                  "%s, fast, seed %llu: O %.3g LSE %.3g (bounds %g, %g), %lld mismatches", c->name,
                  (unsigned long long)(seed + i), err, lerr, RQ_FAST_O, RQ_FAST_LSE, (long long)mism);
        /* f16 products leave an error far above f32's: the path ran (no fallback) */
        if (c->out == ROPEQK_F32 && inf_rows < c->B * c->Hq * c->Sq)
            cr_expect(err > 1e-6, "%s, fast, seed %llu: O error %.3g (accurate %.3g): the f16 products did not run",
                      c->name, (unsigned long long)(seed + i), err, aerr);
        cr_log_info("%-70s accurate %.2e fast %.2e (LSE %.2e)", c->name, aerr, err, lerr);
    }
    ropeqk_ctx_destroy(ctx);
}

/* Scores: accurate within 1e-5 of scale |q| |k|, fast within RQ_FAST_S (and above 1e-6: the f16
 * products ran), -inf exactly where masked. */
Test(vk_cm, scores_both_modes)
{
    ropeqk_ctx *ctx = cm_ctx(1);
    uint64_t seed = seed0();
    static const struct {
        const char *name;
        int64_t Hq, Hkv, Sq, Sk, D;
        int causal, layout, per_token, scale_rows;
        int64_t window, q_off;
        ropeqk_dtype dt;
        double softcap;
    } sc[] = {
        {"GQA 4, D 128, causal", 8, 2, 70, 133, 128, 1, 0, 0, 0, 0, 63, ROPEQK_F32, 0},
        {"D 72, half-split, window, per-token positions, f16", 2, 1, 40, 90, 72, 0, 1, 1, 0, 25, 0, ROPEQK_F16, 0},
        {"Q times 2^-40, K rows 2^+-40, soft-cap", 2, 2, 33, 65, 64, 1, 0, 0, 1, 0, 32, ROPEQK_F32, 20.0},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        for (int math = 0; math < 2; math++) {
            uint64_t rng = seed + 100 + i;
            ropeqk_params p;
            ropeqk_default_params(&p);
            p.causal = sc[i].causal, p.layout = (ropeqk_layout)sc[i].layout, p.window = sc[i].window;
            p.q_pos_offset = sc[i].q_off, p.softcap = sc[i].softcap, p.math = (ropeqk_math)math;
            ropeqk_tensor q = ropeqk_tensor_bhsd(sc[i].dt, 1, sc[i].Hq, sc[i].Sq, sc[i].D);
            ropeqk_tensor k = ropeqk_tensor_bhsd(sc[i].dt, 1, sc[i].Hkv, sc[i].Sk, sc[i].D);
            ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, sc[i].Hq, sc[i].Sq, sc[i].Sk);
            ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, sc[i].Hq, sc[i].Sq, sc[i].Sk);
            th_buf qb, kb;
            void *qd = fill(&q, &rng, &qb), *kd = fill(&k, &rng, &kb);
            if (sc[i].scale_rows) {
                scale_rows(qd, sc[i].Hq * sc[i].Sq, sc[i].D, 0x1p-40f);
                scale_rows(kd, sc[i].Hkv * sc[i].Sk, sc[i].D, 0.0f);
            }
            int32_t *qp = NULL, *kp = NULL;
            if (sc[i].per_token) {
                qp = malloc((size_t)sc[i].Sq * 4), kp = malloc((size_t)sc[i].Sk * 4);
                for (int64_t j = 0; j < sc[i].Sk; j++)
                    kp[j] = 1000000 + (int32_t)(rqs_rand(&rng) % 200);
                for (int64_t j = 0; j < sc[i].Sq; j++)
                    qp[j] = 1000000 + (int32_t)(rqs_rand(&rng) % 200);
            }
            float *od = malloc(ropeqk_tensor_extent(&o));
            double *rd = malloc(ropeqk_tensor_extent(&o64)), err = 0;
            int64_t mism = 0;
            ropeqk_status st = ropeqk_scores(ctx, &p, &q, qd, &k, kd, qp, kp, &o, od);
            cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", sc[i].name, ropeqk_last_error());
            cr_assert_eq(ropeqk_scores_ref(&p, &q, qd, &k, kd, qp, kp, &o64, rd), ROPEQK_SUCCESS);
            cr_assert_eq(ropeqk_max_error(&p, &q, qd, &k, kd, &o, od, &o64, rd, &err, &mism), ROPEQK_SUCCESS);
            double bound = math ? RQ_FAST_S : 1e-5;
            cr_expect(err <= bound && mism == 0, "scores %s, %s, seed %llu: error %.3g (bound %g), %lld mask mismatches",
                      sc[i].name, math ? "fast" : "accurate", (unsigned long long)(seed + 100 + i), err, bound,
                      (long long)mism);
            if (math)
                cr_expect(err > 1e-6, "scores %s, fast: error %.3g: the f16 products did not run", sc[i].name, err);
            cr_log_info("scores %-50s %s %.2e", sc[i].name, math ? "fast" : "accurate", err);
            th_free(&qb);
            th_free(&kb);
            free(od), free(rd), free(qp), free(kp);
        }
    ropeqk_ctx_destroy(ctx);
}

/* The masking rule with matrix products: a key whose K or V row holds a NaN or an infinity weighs
 * nothing for the rows that mask it (their O and LSE as if the row were finite) and makes every row
 * that sees it NaN in O and LSE; the products never see the value (the split pass zeroes the row). */
Test(vk_cm, nonfinite_rows)
{
    ropeqk_ctx *ctx = cm_ctx(1);
    const int64_t Hq = 2, Sq = 40, Sk = 40, D = 64, bad = 20; /* causal, aligned: row i sees keys <= i */
    for (int which = 0; which < 3; which++) /* V NaN, V inf, K inf */
        for (int math = 0; math < 2; math++) {
            uint64_t rng = seed0() + 200 + (uint64_t)which;
            ropeqk_params p;
            ropeqk_default_params(&p);
            p.causal = 1, p.math = (ropeqk_math)math;
            ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, D), k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, Sk, D);
            ropeqk_tensor o = q, l = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, 1);
            ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, D), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, 1);
            th_buf qb, kb, vb;
            float *qd = fill(&q, &rng, &qb), *kd = fill(&k, &rng, &kb), *vd = fill(&k, &rng, &vb);
            float *od = malloc((size_t)(Hq * Sq * D) * 4), *ld = malloc((size_t)(Hq * Sq) * 4);
            double *o64d = malloc((size_t)(Hq * Sq * D) * 8), *l64d = malloc((size_t)(Hq * Sq) * 8), err, lerr;
            int64_t mism;
            /* the reference of the rows that mask key `bad`: the same inputs with a finite row there */
            cr_assert_eq(ropeqk_attention_ref(&p, &q, qd, &k, kd, &k, vd, NULL, NULL, &o64, o64d, &l64, l64d), 0);
            float *row = (which == 2 ? kd : vd) + bad * D;
            row[7] = which == 0 ? NAN : which == 1 ? -INFINITY : INFINITY;
            cr_assert_eq(ropeqk_attention(ctx, &p, &q, qd, &k, kd, &k, vd, NULL, NULL, &o, od, &l, ld), 0, "%s",
                         ropeqk_last_error());
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < Sq; i++) {
                    int64_t r = h * Sq + i;
                    if (i >= bad) { /* sees the key */
                        cr_expect(isnan(ld[r]), "case %d row %lld: LSE %g, expected NaN", which, (long long)r, ld[r]);
                        for (int64_t d = 0; d < D; d++)
                            cr_expect(isnan(od[r * D + d]), "case %d row %lld dim %lld: O %g, expected NaN", which,
                                      (long long)r, (long long)d, od[r * D + d]);
                    } else {
                        for (int64_t d = 0; d < D; d++)
                            cr_expect(fabs(od[r * D + d] - o64d[r * D + d]) <= (math ? RQ_FAST_O : 1e-5),
                                      "case %d row %lld (masks the key) dim %lld: O %g, reference %g", which,
                                      (long long)r, (long long)d, od[r * D + d], o64d[r * D + d]);
                        cr_expect(fabs(ld[r] - l64d[r]) <= (math ? RQ_FAST_LSE : 1e-5) * fmax(1.0, fabs(l64d[r])),
                                  "case %d row %lld: LSE %g, reference %g", which, (long long)r, ld[r], l64d[r]);
                    }
                }
            (void)err, (void)lerr, (void)mism;
            th_free(&qb), th_free(&kb), th_free(&vb);
            free(od), free(ld), free(o64d), free(l64d);
        }
    ropeqk_ctx_destroy(ctx);
}

/* Without vk_coopmat on a device without cooperative matrices (lavapipe), plans run today's f32
 * shaders whatever the mode: fast mode is then as accurate as accurate mode. */
Test(vk_cm, fallback_without_coopmat)
{
    ropeqk_ctx *ctx = cm_ctx(0);
    if (strstr(ropeqk_ctx_build_options(ctx), "tensor cores: on")) {
        ropeqk_ctx_destroy(ctx);
        cr_skip_test("this device takes the tensor-core path (nothing falls back)");
    }
    double err, lerr;
    int64_t mism, inf_rows;
    run_attn(ctx, &cases[0], ROPEQK_MATH_FAST, seed0(), &err, &lerr, &mism, &inf_rows);
    cr_expect(err <= 1e-5 && lerr <= 1e-5 && mism == 0, "fast mode on today's shaders: O %.3g LSE %.3g", err, lerr);
    ropeqk_ctx_destroy(ctx);
}

/* A mode outside the enum is refused before anything is made; so is a bad vk_coopmat. */
Test(vk_cm, bad_values)
{
    ropeqk_ctx *ctx = cm_ctx(1);
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES};
    ropeqk_default_params(&d.params);
    d.params.math = (ropeqk_math)2;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 4, 16);
    d.k = d.q;
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 4, 4);
    ropeqk_plan *pl = (ropeqk_plan *)&d;
    cr_expect_eq(ropeqk_plan_create(ctx, &d, &pl), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(pl);
    ropeqk_ctx_destroy(ctx);
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = vk_device();
    cp.tuning.vk_coopmat = 2;
    ropeqk_ctx *c2 = NULL;
    cr_expect_eq(ropeqk_ctx_create(&cp, &c2), ROPEQK_ERR_BAD_CONFIG);
    cr_expect_null(c2);
}
