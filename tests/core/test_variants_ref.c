/* The model-family variants of docs/conventions.md section 11 on the fp64 reference path, against
 * hand-computed cases and exact identities: logit soft-capping, the rotary offset, M-RoPE (both
 * assignments of the position streams), attention sinks; every invalid parameter refused with its
 * status and a message; device plans accept every variant (the paged decode refuses M-RoPE by name).
 * Random inputs print their seed. */
#include "harness.h"
#include "rng.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(variants_ref, .fini = th_leak_check);

/* S [1, 1, Sq, Sk] (f64) of f32 q [1, 1, Sq, D], k [1, 1, Sk, D]. */
static ropeqk_status scores(const ropeqk_params *p, int64_t Sq, int64_t Sk, int64_t D, const float *q,
                            const float *k, const int32_t *qp, const int32_t *kp, double *s)
{
    ropeqk_tensor tq = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, Sq, D), tk = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, Sk, D);
    ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 1, Sq, Sk);
    return ropeqk_scores_ref(p, &tq, q, &tk, k, qp, kp, &to, s);
}

static void randomize(float *x, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rqs_uniform(rng);
}

Test(variants_ref, softcap_is_c_tanh_of_the_scaled_score_and_keeps_masks)
{
    enum { SQ = 5, SK = 7, D = 8 };
    uint64_t seed = th_seed(20261125), rng = seed;
    float q[SQ * D], k[SK * D];
    randomize(q, SQ * D, &rng);
    randomize(k, SK * D, &rng);
    for (size_t i = 0; i < SQ * D; i++)
        q[i] *= 40.0f; /* scores of tens: tanh's saturation matters */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.q_pos_offset = 2;
    double s[SQ * SK], c[SQ * SK];
    cr_assert_eq(scores(&p, SQ, SK, D, q, k, NULL, NULL, s), ROPEQK_SUCCESS);
    p.softcap = 5.0;
    cr_assert_eq(scores(&p, SQ, SK, D, q, k, NULL, NULL, c), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    int capped = 0;
    for (int i = 0; i < SQ * SK; i++) {
        if (isinf(s[i])) {
            cr_expect(isinf(c[i]) && c[i] < 0, "seed %llu: entry %d masked: want -inf, got %g",
                      (unsigned long long)seed, i, c[i]);
            continue;
        }
        cr_expect(fabs(c[i] - 5.0 * tanh(s[i] / 5.0)) <= 1e-14 * 5.0, "seed %llu: entry %d: %.17g vs C tanh(%.17g / C)",
                  (unsigned long long)seed, i, c[i], s[i]);
        capped += fabs(s[i]) > 5.0;
    }
    cr_expect(capped > 0, "seed %llu: no score beyond the cap: the test would not see saturation",
              (unsigned long long)seed);
}

Test(variants_ref, rotary_offset_rotates_the_last_dims)
{
    /* D 6, R 2 at offset 4 (MLA's [nope | rope]): only dims 4, 5 turn. q = e4 at position 1 against
     * k = e4 at 0: cos(1), and e5 against e4: sin(1); the first 4 dims pass through. */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.scale = 1.0, p.rotary_dim = 2, p.rotary_offset = 4, p.q_pos_offset = 1;
    float q[6] = {0, 0, 0, 0, 1, 0}, k[6] = {0, 0, 0, 0, 1, 0}, k5[6] = {0, 0, 0, 0, 0, 1};
    float q0[6] = {1, 2, 0, 0, 0, 0}, k0[6] = {3, 4, 0, 0, 0, 0};
    double s;
    cr_assert_eq(scores(&p, 1, 1, 6, q, k, NULL, NULL, &s), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    cr_expect_float_eq(s, cos(1.0), 1e-15);
    cr_assert_eq(scores(&p, 1, 1, 6, q, k5, NULL, NULL, &s), ROPEQK_SUCCESS);
    cr_expect_float_eq(s, sin(1.0), 1e-15);
    cr_assert_eq(scores(&p, 1, 1, 6, q0, k0, NULL, NULL, &s), ROPEQK_SUCCESS);
    cr_expect_float_eq(s, 11.0, 1e-15); /* 1*3 + 2*4, unrotated */
    /* rotary_dim 0 with an offset: the rest of the head */
    p.rotary_dim = 0, p.rotary_offset = 2;
    float q2[6] = {0, 0, 1, 0, 0, 0}, k2[6] = {0, 0, 0, 1, 0, 0};
    cr_assert_eq(scores(&p, 1, 1, 6, q2, k2, NULL, NULL, &s), ROPEQK_SUCCESS);
    cr_expect_float_eq(s, sin(1.0), 1e-15); /* pair (2, 3) at inv_freq 1 */
}

Test(variants_ref, rotary_offset_equals_moving_the_rotated_dims_first)
{
    /* <rope(q), rope(k)> is a sum over dims: with the rotated block moved to the front of both q and
     * k, offset N and R equal plain partial rotary R on the moved tensors */
    enum { S = 9, D = 12, R = 4, N = 6 };
    uint64_t seed = th_seed(20261126), rng = seed;
    float q[S * D], k[S * D], qm[S * D], km[S * D];
    randomize(q, S * D, &rng);
    randomize(k, S * D, &rng);
    for (int r = 0; r < S; r++)
        for (int d = 0; d < D; d++) {
            int from = d < R ? N + d : d < N + R ? d - R : d; /* [rot | 0..N) | tail] */
            qm[r * D + d] = q[r * D + from];
            km[r * D + d] = k[r * D + from];
        }
    for (int lay = 0; lay < 2; lay++) {
        ropeqk_params p;
        ropeqk_default_params(&p);
        p.layout = lay ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
        p.rotary_dim = R, p.q_pos_offset = 1000, p.causal = 1;
        double a[S * S], b[S * S];
        p.rotary_offset = N;
        cr_assert_eq(scores(&p, S, S, D, q, k, NULL, NULL, a), ROPEQK_SUCCESS);
        p.rotary_offset = 0;
        cr_assert_eq(scores(&p, S, S, D, qm, km, NULL, NULL, b), ROPEQK_SUCCESS);
        for (int i = 0; i < S * S; i++)
            cr_expect(a[i] == b[i] || fabs(a[i] - b[i]) <= 1e-13, "seed %llu layout %d entry %d: %.17g vs %.17g",
                      (unsigned long long)seed, lay, i, a[i], b[i]);
    }
}

/* The score of q = k = e(pair u's first dim) at rows with per-stream positions: cos((pq_s - pk_s)
 * inv_u) for the stream s the frequency uses. */
static int stream_of(const ropeqk_params *base, int u, int64_t D)
{
    ropeqk_params p = *base;
    p.scale = 1.0;
    float q[64] = {0}, k[64] = {0};
    q[2 * u] = k[2 * u] = 1.0f; /* interleaved pair u = (2u, 2u+1) */
    /* streams t, h, w at 1, 2, 3 for the query; the key at 0 in every stream */
    int32_t qp[3] = {1, 2, 3}, kp[3] = {0, 0, 0};
    double s;
    cr_assert_eq(scores(&p, 1, 1, D, q, k, qp, kp, &s), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    double inv = pow(p.base == 0 ? 10000.0 : p.base, -2.0 * u / (double)D);
    for (int st = 0; st < 3; st++)
        if (fabs(s - cos((st + 1) * inv)) < 1e-14)
            return st;
    return -1;
}

Test(variants_ref, mrope_streams_per_frequency_contiguous_and_interleaved)
{
    enum { D = 24 }; /* 12 frequencies */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.base = 2.0; /* angles per position that differ visibly between streams at every frequency */
    p.mrope_section[0] = 4, p.mrope_section[1] = 5, p.mrope_section[2] = 3;
    for (int u = 0; u < D / 2; u++) { /* Qwen2-VL: [0, T) t, [T, T+H) h, the rest w */
        int want = u < 4 ? 0 : u < 9 ? 1 : 2;
        cr_expect_eq(stream_of(&p, u, D), want, "contiguous: frequency %d", u);
    }
    p.mrope_interleaved = 1; /* Qwen3-VL: h at u%3 == 1 below 3H, w at u%3 == 2 below 3W, else t */
    for (int u = 0; u < D / 2; u++) {
        int want = u % 3 == 1 && u < 15 ? 1 : u % 3 == 2 && u < 9 ? 2 : 0;
        cr_expect_eq(stream_of(&p, u, D), want, "interleaved: frequency %d", u);
    }
}

Test(variants_ref, mrope_with_equal_streams_is_plain_rope_and_masks_by_token_order)
{
    enum { SQ = 6, SK = 10, D = 16 };
    uint64_t seed = th_seed(20261127), rng = seed;
    float q[SQ * D], k[SK * D];
    randomize(q, SQ * D, &rng);
    randomize(k, SK * D, &rng);
    int32_t qp[SQ], kp[SK], qp3[3 * SQ], kp3[3 * SK];
    for (int i = 0; i < SQ; i++)
        qp[i] = 100 + 3 * i;
    for (int j = 0; j < SK; j++)
        kp[j] = 90 + 2 * j;
    for (int s = 0; s < 3; s++) {
        memcpy(qp3 + s * SQ, qp, sizeof qp);
        memcpy(kp3 + s * SK, kp, sizeof kp);
    }
    ropeqk_params p;
    ropeqk_default_params(&p);
    double a[SQ * SK], b[SQ * SK];
    cr_assert_eq(scores(&p, SQ, SK, D, q, k, qp, kp, a), ROPEQK_SUCCESS);
    p.mrope_section[0] = 3, p.mrope_section[1] = 3, p.mrope_section[2] = 2;
    cr_assert_eq(scores(&p, SQ, SK, D, q, k, qp3, kp3, b), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    for (int i = 0; i < SQ * SK; i++)
        cr_expect(fabs(a[i] - b[i]) <= 1e-13, "seed %llu entry %d: %.17g vs %.17g", (unsigned long long)seed, i,
                  a[i], b[i]);
    /* causal masks follow token order (offset + row), not the rotary positions: with offsets 4 and 0
     * query row i sees keys j <= 4 + i whatever the arrays say */
    p.causal = 1, p.q_pos_offset = 4;
    cr_assert_eq(scores(&p, SQ, SK, D, q, k, qp3, kp3, b), ROPEQK_SUCCESS);
    for (int i = 0; i < SQ; i++)
        for (int j = 0; j < SK; j++)
            cr_expect((isinf(b[i * SK + j]) != 0) == (j > 4 + i), "row %d key %d: score %g", i, j, b[i * SK + j]);
}

/* O [1, Hq, Sq, Dv] and LSE of f32 inputs, Hkv 1, f64 outputs. */
static ropeqk_status attention(const ropeqk_params *p, int64_t Hq, int64_t Sq, int64_t Sk, int64_t D, int64_t Dv,
                               const float *q, const float *k, const float *v, double *o, double *l)
{
    ropeqk_tensor tq = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, D), tk = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, Sk, D);
    ropeqk_tensor tv = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, Sk, Dv), to = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, Dv);
    ropeqk_tensor tl = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, 1);
    return ropeqk_attention_ref(p, &tq, q, &tk, k, &tv, v, NULL, NULL, &to, o, &tl, l);
}

Test(variants_ref, sinks_join_the_denominator_only)
{
    enum { HQ = 3, SQ = 4, SK = 6, D = 8, DV = 5 };
    uint64_t seed = th_seed(20261128), rng = seed;
    float q[HQ * SQ * D], k[SK * D], v[SK * DV];
    randomize(q, sizeof q / 4, &rng);
    randomize(k, sizeof k / 4, &rng);
    randomize(v, sizeof v / 4, &rng);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.k_pos_offset = 2; /* query row 0 at position 0 sees no key: fully masked */
    const float sinks[HQ] = {-1.5f, 0.25f, 3.0f};
    double o[HQ * SQ * DV], l[HQ * SQ], os[HQ * SQ * DV], ls[HQ * SQ];
    cr_assert_eq(attention(&p, HQ, SQ, SK, D, DV, q, k, v, o, l), ROPEQK_SUCCESS);
    p.sinks = sinks, p.n_sinks = HQ;
    cr_assert_eq(attention(&p, HQ, SQ, SK, D, DV, q, k, v, os, ls), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < SQ; i++) {
            int r = h * SQ + i;
            if (isinf(l[r])) { /* every key masked: O = 0 exactly, LSE = s_h */
                for (int d = 0; d < DV; d++)
                    cr_expect(os[r * DV + d] == 0.0, "head %d row %d: O = %g, want 0", h, i, os[r * DV + d]);
                cr_expect(ls[r] == (double)sinks[h], "head %d row %d: LSE %.17g, want s_h %.17g", h, i, ls[r],
                          (double)sinks[h]);
                continue;
            }
            /* LSE' = ln(e^LSE + e^s), O' = O e^LSE / e^LSE' */
            double want_l = l[r] > sinks[h] ? l[r] + log1p(exp(sinks[h] - l[r])) : sinks[h] + log1p(exp(l[r] - sinks[h]));
            cr_expect(fabs(ls[r] - want_l) <= 1e-13 * fmax(1.0, fabs(want_l)), "seed %llu head %d row %d: LSE %.17g vs %.17g",
                      (unsigned long long)seed, h, i, ls[r], want_l);
            for (int d = 0; d < DV; d++) {
                double want = o[r * DV + d] * exp(l[r] - want_l);
                cr_expect(fabs(os[r * DV + d] - want) <= 1e-13, "seed %llu head %d row %d dim %d: %.17g vs %.17g",
                          (unsigned long long)seed, h, i, d, os[r * DV + d], want);
            }
        }
}

/* The status and a message naming `needle` for params p on a small scores or attention problem. */
static void expect_refused(const ropeqk_params *p, bool attn, ropeqk_status want, const char *needle)
{
    float q[2 * 8] = {0}, k[8] = {0}, v[8] = {0};
    double s[2], o[2 * 8], l[2];
    ropeqk_status st = attn ? attention(p, 2, 1, 1, 8, 8, q, k, v, o, l) : scores(p, 1, 1, 8, q, k, NULL, NULL, s);
    cr_expect_eq(st, want, "%s: got %s (%s)", needle, ropeqk_status_string(st), ropeqk_last_error());
    cr_expect(strstr(ropeqk_last_error(), needle) != NULL, "message '%s' lacks '%s'", ropeqk_last_error(), needle);
}

Test(variants_ref, invalid_parameters_are_refused_with_messages)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.softcap = -1.0;
    expect_refused(&p, false, ROPEQK_ERR_BAD_PARAM, "softcap");
    p.softcap = NAN;
    expect_refused(&p, true, ROPEQK_ERR_BAD_PARAM, "softcap");
    p.softcap = INFINITY;
    expect_refused(&p, false, ROPEQK_ERR_BAD_PARAM, "softcap");
    ropeqk_default_params(&p);
    p.mrope_section[0] = 1, p.mrope_section[1] = 1, p.mrope_section[2] = 1; /* R/2 = 4 */
    expect_refused(&p, false, ROPEQK_ERR_BAD_PARAM, "mrope_section");
    p.mrope_section[0] = 3, p.mrope_section[1] = 2, p.mrope_section[2] = -1;
    expect_refused(&p, false, ROPEQK_ERR_BAD_PARAM, "mrope_section");
    ropeqk_default_params(&p);
    p.mrope_interleaved = 1;
    expect_refused(&p, false, ROPEQK_ERR_BAD_PARAM, "mrope_interleaved");
    ropeqk_default_params(&p);
    p.rotary_dim = 4, p.rotary_offset = 6; /* [6, 10) past D = 8 */
    expect_refused(&p, false, ROPEQK_ERR_BAD_ROTARY_DIM, "rotary dims");
    p.rotary_dim = 0, p.rotary_offset = -2;
    expect_refused(&p, false, ROPEQK_ERR_BAD_ROTARY_DIM, "rotary_offset");
    p.rotary_offset = 7; /* fewer than 2 dims left */
    expect_refused(&p, true, ROPEQK_ERR_BAD_ROTARY_DIM, "rotary_offset");
    ropeqk_default_params(&p);
    const float sinks[3] = {0, 1, NAN};
    p.sinks = sinks, p.n_sinks = 2;
    expect_refused(&p, false, ROPEQK_ERR_BAD_PARAM, "attention only");
    p.n_sinks = 3; /* Hq is 2 */
    expect_refused(&p, true, ROPEQK_ERR_BAD_SHAPE, "n_sinks");
    p.sinks = sinks + 1, p.n_sinks = 2; /* {1, NaN} */
    expect_refused(&p, true, ROPEQK_ERR_BAD_PARAM, "not finite");
    p.sinks = NULL;
    expect_refused(&p, true, ROPEQK_ERR_BAD_PARAM, "n_sinks");
}

/* Every backend's kernels implement the four variants (rq_backend.variants): a plan asking for one is
 * made (a backend that lacked one would refuse it by name, never compute without it); tests/
 * test_variants.c holds the kernels to the reference above. The paged decode refuses M-RoPE. */
Test(variants_ref, device_plans_accept_every_variant)
{
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    ropeqk_plan_desc d;
    memset(&d, 0, sizeof d);
    d.op = ROPEQK_OP_ATTENTION;
    ropeqk_default_params(&d.params);
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 3, 8);
    d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 3, 8);
    d.out = d.q;
    const float sinks[2] = {0, 0};
    for (int variant = 0; variant < 4; variant++) {
        ropeqk_default_params(&d.params);
        const char *what = "";
        switch (variant) {
        case 0: d.params.softcap = 30.0, what = "softcap"; break;
        case 1: d.params.rotary_dim = 4, d.params.rotary_offset = 4, what = "rotary_offset"; break;
        case 2: d.params.mrope_section[0] = 4, what = "M-RoPE"; break;
        default: d.params.sinks = sinks, d.params.n_sinks = 2, what = "sinks"; break;
        }
        ropeqk_plan *pl = NULL;
        ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
        cr_expect_eq(st, ROPEQK_SUCCESS, "%s: %s (%s)", what, ropeqk_status_string(st), ropeqk_last_error());
        ropeqk_plan_destroy(pl);
    }
    /* the paged cache keeps one position per key: M-RoPE is refused by name */
    ropeqk_default_params(&d.params);
    d.params.mrope_section[0] = 4;
    d.op = ROPEQK_OP_PAGED_DECODE;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 2, 2, 1, 8);
    d.k = d.v = ropeqk_tensor_bhsd(ROPEQK_F32, 4, 1, 16, 8);
    d.out = d.q;
    d.paged.page_size = 16, d.paged.max_pages_per_seq = 2, d.paged.max_seqs = 2;
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
    cr_expect_eq(st, ROPEQK_ERR_BAD_PARAM, "paged M-RoPE: %s", ropeqk_status_string(st));
    cr_expect(strstr(ropeqk_last_error(), "M-RoPE"), "message '%s'", ropeqk_last_error());
    cr_expect_null(pl);
    ropeqk_ctx_destroy(ctx);
}
