/* The scalar reference path against hand-computed cases, identities, and the three PyTorch
 * reference vectors (tests/data/vectors, copied from the project's shared vectors); the device
 * path is checked against the same vectors. */
#include "harness.h"
#include "npy.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(ref, .fini = th_leak_check);
TestSuite(vectors, .fini = th_leak_check);

static double one_score(const ropeqk_params *p, int64_t D, const float *q, const float *k)
{
    ropeqk_tensor tq = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, D), tk = tq;
    ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 1, 1, 1);
    double s = NAN;
    cr_assert_eq(ropeqk_scores_ref(p, &tq, q, &tk, k, NULL, NULL, &to, &s), ROPEQK_SUCCESS);
    return s;
}

Test(ref, d2_rotation_by_hand)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.scale = 1.0;
    p.q_pos_offset = 1;
    float q[2] = {1, 0}, k[2] = {1, 0};
    /* inv_freq[0] = 1: q rotates by 1 rad, k stays: <(cos 1, sin 1), (1, 0)> */
    cr_expect_float_eq(one_score(&p, 2, q, k), cos(1.0), 1e-15);
    p.q_pos_offset = 3;
    p.k_pos_offset = 1;
    float k2[2] = {0, 1}; /* k rotated by 1: (-sin 1, cos 1); q by 3: (cos 3, sin 3) */
    cr_expect_float_eq(one_score(&p, 2, q, k2), -cos(3.0) * sin(1.0) + sin(3.0) * cos(1.0), 1e-15);
    p.conjugate = 1; /* angles negate: (cos 3, -sin 3) . (sin 1, cos 1) */
    cr_expect_float_eq(one_score(&p, 2, q, k2), cos(3.0) * sin(1.0) - sin(3.0) * cos(1.0), 1e-15);
}

Test(ref, layouts_pick_different_pairs)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.scale = 1.0;
    p.q_pos_offset = 2;
    float q[4] = {1, 0, 0, 0}, k[4] = {0, 1, 0, 0};
    /* interleaved: pair (x0, x1) at inv 1 -> q = (cos 2, sin 2, 0, 0): score = sin 2 */
    cr_expect_float_eq(one_score(&p, 4, q, k), sin(2.0), 1e-15);
    /* half-split: pair (x0, x2) -> q = (cos 2, 0, sin 2, 0): orthogonal to k */
    p.layout = ROPEQK_HALF_SPLIT;
    cr_expect_float_eq(one_score(&p, 4, q, k), 0.0, 1e-15);
    /* half-split pair (x1, x3) turns at base^(-2/4) = 0.01 rad per position */
    float q1[4] = {0, 1, 0, 0};
    cr_expect_float_eq(one_score(&p, 4, q1, k), cos(0.02), 1e-15);
}

Test(ref, partial_rotary_passes_tail_through_and_scale_default)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.rotary_dim = 2;
    p.q_pos_offset = 12345;
    float q[4] = {0, 0, 1, 2}, k[4] = {0, 0, 3, -1};
    cr_expect_float_eq(one_score(&p, 4, q, k), (3.0 - 2.0) / 2.0, 1e-15); /* scale 1/sqrt(4) */
    /* the exponent divides by R, not D: with R = 4 of D = 6, pair 1 turns at base^(-2/4) */
    p.rotary_dim = 4;
    p.layout = ROPEQK_INTERLEAVED;
    p.scale = 1.0;
    p.q_pos_offset = 1;
    float a[6] = {0, 0, 1, 0, 0, 0}, b[6] = {0, 0, 1, 0, 0, 0};
    cr_expect_float_eq(one_score(&p, 6, a, b), cos(0.01), 1e-15);
}

Test(ref, causal_mask_is_exact_minus_inf)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.q_pos_offset = 4;
    p.k_pos_offset = 5;
    float q[2] = {1, 1}, k[2] = {1, 1};
    double s = one_score(&p, 2, q, k);
    cr_expect(isinf(s) && s < 0);
    p.k_pos_offset = 4; /* equal positions are visible */
    cr_expect(isfinite(one_score(&p, 2, q, k)));
}

/* Random inputs for the identity tests. */
static void rnd(float *x, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)rqs_uniform(&seed);
}

Test(ref, shifting_all_positions_keeps_scores)
{
    enum { H = 2, S = 9, D = 16 };
    float q[H * S * D], k[H * S * D];
    rnd(q, H * S * D, 1);
    rnd(k, H * S * D, 2);
    ropeqk_tensor t = ropeqk_tensor_bhsd(ROPEQK_F32, 1, H, S, D), o = ropeqk_tensor_bhsd(ROPEQK_F64, 1, H, S, S);
    double a[H * S * S], b[H * S * S];
    for (int lay = 0; lay < 2; lay++) {
        ropeqk_params p;
        ropeqk_default_params(&p);
        p.layout = (ropeqk_layout)lay;
        p.rotary_dim = 12;
        cr_assert_eq(ropeqk_scores_ref(&p, &t, q, &t, k, NULL, NULL, &o, a), 0);
        p.q_pos_offset = p.k_pos_offset = 1000;
        cr_assert_eq(ropeqk_scores_ref(&p, &t, q, &t, k, NULL, NULL, &o, b), 0);
        for (int i = 0; i < H * S * S; i++)
            cr_expect_float_eq(a[i], b[i], 1e-9, "entry %d", i);
    }
}

Test(ref, position_zero_is_plain_qkt_and_gqa_maps_heads)
{
    enum { Hq = 4, Hkv = 2, Sq = 3, Sk = 5, D = 8 };
    float q[Hq * Sq * D], k[Hkv * Sk * D];
    rnd(q, Hq * Sq * D, 3);
    rnd(k, Hkv * Sk * D, 4);
    ropeqk_tensor tq = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, D), tk = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hkv, Sk, D);
    ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, Sk);
    /* every row at position 0 */
    int32_t zq[Sq] = {0}, zk[Sk] = {0};
    double s[Hq * Sq * Sk];
    ropeqk_params p;
    ropeqk_default_params(&p);
    cr_assert_eq(ropeqk_scores_ref(&p, &tq, q, &tk, k, zq, zk, &to, s), 0);
    for (int h = 0; h < Hq; h++)
        for (int i = 0; i < Sq; i++)
            for (int j = 0; j < Sk; j++) {
                double dot = 0;
                for (int d = 0; d < D; d++)
                    dot += (double)q[(h * Sq + i) * D + d] * k[((h / 2) * Sk + j) * D + d];
                cr_expect_float_eq(s[(h * Sq + i) * Sk + j], dot / sqrt(8.0), 1e-12, "h%d i%d j%d", h, i, j);
            }
}

/* ---- the PyTorch reference vectors ------------------------------------------------------- */

/* Parses the flags of args.txt (the `ropeqk scores` flags) into params. */
static void parse_args(const char *path, ropeqk_params *p)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char tok[128], val[128];
    ropeqk_default_params(p);
    while (fscanf(f, "%127s", tok) == 1) {
        if (!strcmp(tok, "--causal")) { p->causal = 1; continue; }
        if (!strcmp(tok, "--conjugate")) { p->conjugate = 1; continue; }
        cr_assert_eq(fscanf(f, "%127s", val), 1, "%s: %s needs a value", path, tok);
        if (!strcmp(tok, "--layout")) p->layout = strcmp(val, "half-split") ? ROPEQK_INTERLEAVED : ROPEQK_HALF_SPLIT;
        else if (!strcmp(tok, "--base")) p->base = atof(val);
        else if (!strcmp(tok, "--rotary-dim")) p->rotary_dim = atoi(val);
        else if (!strcmp(tok, "--q-pos-offset")) p->q_pos_offset = atoll(val);
        else if (!strcmp(tok, "--k-pos-offset")) p->k_pos_offset = atoll(val);
        else if (!strcmp(tok, "--scale")) p->scale = atof(val);
        else cr_assert_fail("%s: unknown flag %s", path, tok);
    }
    fclose(f);
}

static ropeqk_tensor desc(const npy_array *a, ropeqk_dtype t)
{
    cr_assert_eq(a->ndim, 4);
    return ropeqk_tensor_bhsd(t, a->shape[0], a->shape[1], a->shape[2], a->shape[3]);
}

static void check_vector(const char *name)
{
    char path[512], err[256];
    npy_array q, k, e;
    snprintf(path, sizeof path, "%s/%s/q.npy", VECTORS_DIR, name);
    cr_assert_eq(npy_load(path, &q, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/%s/k.npy", VECTORS_DIR, name);
    cr_assert_eq(npy_load(path, &k, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/%s/expected.npy", VECTORS_DIR, name);
    cr_assert_eq(npy_load(path, &e, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/%s/args.txt", VECTORS_DIR, name);
    ropeqk_params p;
    parse_args(path, &p);
    ropeqk_tensor tq = desc(&q, ROPEQK_F32), tk = desc(&k, ROPEQK_F32), te = desc(&e, ROPEQK_F64);
    ropeqk_tensor to = te;
    to.dtype = ROPEQK_F64;
    double *mine = malloc(e.nbytes);
    cr_assert_eq(ropeqk_scores_ref(&p, &tq, q.data, &tk, k.data, NULL, NULL, &to, mine), 0);
    double err_ref;
    int64_t mm;
    cr_assert_eq(ropeqk_max_error(&p, &tq, q.data, &tk, k.data, &to, mine, &te, e.data, &err_ref, &mm), 0);
    cr_log_info("%s: scalar path vs expected: %.3g", name, err_ref);
    cr_expect(err_ref < 1e-12, "%s: scalar path error %g", name, err_ref);
    cr_expect_eq(mm, 0, "%s: mask mismatch", name);

    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (ctx) {
        ropeqk_tensor tf = ropeqk_tensor_bhsd(ROPEQK_F32, e.shape[0], e.shape[1], e.shape[2], e.shape[3]);
        float *dev = malloc(e.nbytes / 2);
        cr_assert_eq(ropeqk_scores(ctx, &p, &tq, q.data, &tk, k.data, NULL, NULL, &tf, dev), 0);
        double err_dev;
        cr_assert_eq(ropeqk_max_error(&p, &tq, q.data, &tk, k.data, &tf, dev, &te, e.data, &err_dev, &mm), 0);
        cr_log_info("%s: device vs expected: %.3g", name, err_dev);
        cr_expect(err_dev <= 1e-5, "%s: device error %g", name, err_dev);
        cr_expect_eq(mm, 0, "%s: device mask mismatch", name);
        free(dev);
        ropeqk_ctx_destroy(ctx);
    } else {
        cr_log_info("%s: device part skipped: %s", name, why);
    }
    free(mine);
    npy_free(&q);
    npy_free(&k);
    npy_free(&e);
}

Test(vectors, llama_interleaved) { check_vector("llama_interleaved"); }
Test(vectors, hf_half_split_gqa_causal) { check_vector("hf_half_split_gqa_causal"); }
Test(vectors, dense_matrix_1based) { check_vector("dense_matrix_1based"); }
