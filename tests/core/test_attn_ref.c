/* The fp64 attention reference (ropeqk_attention_ref) against hand-computed cases, an independent
 * long double computation at large score magnitudes, softmax of ropeqk_scores_ref's output times V
 * over a random sweep, and every invalid input. Needs no OpenCL device. The metric is tested in
 * test_attn_metric.c. */
#include "harness.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(attn_ref, .fini = th_leak_check);

/* The test's own decoder (support/half.h, not the library's rq_load_elem), so V enters the expected
 * values by a separate path. */
static double elem(const th_buf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const unsigned char *p = b->data + i0 * b->t.nb[0] + i1 * b->t.nb[1] + i2 * b->t.nb[2] + i3 * b->t.nb[3];
    uint16_t h;
    float f;
    double d;
    switch (b->t.dtype) {
    case ROPEQK_F32: memcpy(&f, p, 4); return f;
    case ROPEQK_F64: memcpy(&d, p, 8); return d;
    case ROPEQK_BF16: memcpy(&h, p, 2); return rqs_bf16_to_float(h);
    case ROPEQK_F16: memcpy(&h, p, 2); return rqs_half_to_float(h);
    default: break; /* the 8-bit cache dtypes: not attention views */
    }
    return NAN;
}

static void put(th_buf *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v)
{
    unsigned char *p = b->data + i0 * b->t.nb[0] + i1 * b->t.nb[1] + i2 * b->t.nb[2] + i3 * b->t.nb[3];
    float f = (float)v;
    if (b->t.dtype == ROPEQK_F64)
        memcpy(p, &v, 8);
    else
        memcpy(p, &f, 4);
}

static th_buf mk(ropeqk_dtype dt, int64_t n0, int64_t n1, int64_t n2, int64_t n3, th_layout lay)
{
    th_buf b;
    const int64_t ne[4] = {n0, n1, n2, n3};
    cr_assert(th_alloc(&b, dt, ne, lay));
    return b;
}

static ropeqk_status attn(const ropeqk_params *p, th_buf *q, th_buf *k, th_buf *v, const int32_t *qp,
                          const int32_t *kp, th_buf *o, th_buf *l)
{
    return ropeqk_attention_ref(p, &q->t, q->data, &k->t, k->data, &v->t, v->data, qp, kp, &o->t, o->data,
                                l ? &l->t : NULL, l ? l->data : NULL);
}

/* Scale 1 and every position 0 (no rotation): S = q . k exactly, for the hand cases. */
static ropeqk_params plain(void)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.scale = 1.0;
    return p;
}

Test(attn_ref, one_key_gives_that_v_row_and_lse_equal_to_the_score)
{
    uint64_t rng = 11;
    th_buf q = mk(ROPEQK_F32, 1, 2, 2, 4, TH_BHSD), k = mk(ROPEQK_F32, 1, 1, 1, 4, TH_BHSD);
    th_buf v = mk(ROPEQK_F32, 1, 1, 1, 3, TH_BHSD), s = mk(ROPEQK_F64, 1, 2, 2, 1, TH_BHSD);
    th_fill_random(&q, &rng);
    th_fill_random(&k, &rng);
    const double vv[3] = {0.3f, -1.7f, 2.5f};
    for (int d = 0; d < 3; d++)
        put(&v, 0, 0, 0, d, vv[d]);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.q_pos_offset = 7;
    cr_assert_eq(ropeqk_scores_ref(&p, &q.t, q.data, &k.t, k.data, NULL, NULL, &s.t, s.data), 0);
    for (int dt = 0; dt < 2; dt++) {
        ropeqk_dtype odt = dt ? ROPEQK_F32 : ROPEQK_F64;
        th_buf o = mk(odt, 1, 2, 2, 3, TH_PADDED), l = mk(odt, 1, 2, 2, 1, TH_PADDED);
        cr_assert_eq(attn(&p, &q, &k, &v, NULL, NULL, &o, &l), 0);
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 2; i++) {
                for (int d = 0; d < 3; d++) /* weight exp(0) / 1 = 1: exact */
                    cr_expect_eq(elem(&o, 0, h, i, d), vv[d], "h%d i%d d%d: %.17g", h, i, d, elem(&o, 0, h, i, d));
                double want = dt ? (double)(float)elem(&s, 0, h, i, 0) : elem(&s, 0, h, i, 0);
                cr_expect_eq(elem(&l, 0, h, i, 0), want, "lse h%d i%d", h, i);
            }
        cr_expect(th_guards_intact(&o) && th_guards_intact(&l));
        th_free(&o);
        th_free(&l);
    }
    th_free(&q); th_free(&k); th_free(&v); th_free(&s);
}

Test(attn_ref, two_keys_weigh_by_exp_of_their_scores)
{
    /* q = (1, 0), k0 = (1, 0), k1 = (3, 0) at position 0: scores 1 and 3 */
    th_buf q = mk(ROPEQK_F32, 1, 1, 1, 2, TH_BHSD), k = mk(ROPEQK_F32, 1, 1, 2, 2, TH_BHSD);
    th_buf v = mk(ROPEQK_F32, 1, 1, 2, 2, TH_BHSD);
    th_buf o = mk(ROPEQK_F64, 1, 1, 1, 2, TH_BHSD), l = mk(ROPEQK_F64, 1, 1, 1, 1, TH_BHSD);
    put(&q, 0, 0, 0, 0, 1); put(&q, 0, 0, 0, 1, 0);
    put(&k, 0, 0, 0, 0, 1); put(&k, 0, 0, 0, 1, 0);
    put(&k, 0, 0, 1, 0, 3); put(&k, 0, 0, 1, 1, 0);
    put(&v, 0, 0, 0, 0, 2); put(&v, 0, 0, 0, 1, -1); /* v0 = (2, -1), v1 = (0.5, 4) */
    put(&v, 0, 0, 1, 0, 0.5); put(&v, 0, 0, 1, 1, 4);
    const int32_t zero[2] = {0, 0};
    ropeqk_params p = plain();
    cr_assert_eq(attn(&p, &q, &k, &v, zero, zero, &o, &l), 0);
    double w0 = exp(1.0) / (exp(1.0) + exp(3.0)), w1 = exp(3.0) / (exp(1.0) + exp(3.0));
    cr_expect_float_eq(elem(&o, 0, 0, 0, 0), 2 * w0 + 0.5 * w1, 1e-14);
    cr_expect_float_eq(elem(&o, 0, 0, 0, 1), -w0 + 4 * w1, 1e-14);
    cr_expect_float_eq(elem(&l, 0, 0, 0, 0), log(exp(1.0) + exp(3.0)), 1e-14);
    th_free(&q); th_free(&k); th_free(&v); th_free(&o); th_free(&l);
}

Test(attn_ref, uniform_v_gives_v_whatever_the_scores)
{
    uint64_t rng = 12;
    th_buf q = mk(ROPEQK_F32, 1, 2, 5, 8, TH_BHSD), k = mk(ROPEQK_F32, 1, 1, 7, 8, TH_BHSD);
    th_buf v = mk(ROPEQK_BF16, 1, 1, 7, 5, TH_BSHD), o = mk(ROPEQK_F64, 1, 2, 5, 5, TH_BHSD);
    th_fill_random(&q, &rng);
    th_fill_random(&k, &rng);
    const uint16_t row[5] = {0x3f80, 0xc040, 0x3e00, 0x0000, 0x4120}; /* 1, -3, 0.125, 0, 10 in bf16 */
    for (int j = 0; j < 7; j++)
        for (int d = 0; d < 5; d++)
            memcpy(v.data + j * v.t.nb[2] + d * v.t.nb[3], &row[d], 2);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.q_pos_offset = 2; /* rows see 3..7 keys */
    p.scale = 3.0;      /* spread the weights */
    cr_assert_eq(attn(&p, &q, &k, &v, NULL, NULL, &o, NULL), 0);
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 5; i++)
            for (int d = 0; d < 5; d++) {
                double want = elem(&v, 0, 0, 0, d);
                cr_expect(fabs(elem(&o, 0, h, i, d) - want) <= 1e-14 * fabs(want), "h%d i%d d%d: %.17g vs %g", h, i,
                          d, elem(&o, 0, h, i, d), want);
            }
    th_free(&q); th_free(&k); th_free(&v); th_free(&o);
}

Test(attn_ref, fully_masked_rows_give_exact_zero_and_minus_inf)
{
    uint64_t rng = 13;
    /* causal, queries at 0, 1, 2, keys at 2..5: rows 0 and 1 see nothing, row 2 sees key 0 only */
    th_buf q = mk(ROPEQK_F16, 1, 1, 3, 4, TH_BHSD), k = mk(ROPEQK_F32, 1, 1, 4, 4, TH_BHSD);
    th_buf v = mk(ROPEQK_F32, 1, 1, 4, 3, TH_PADDED), s = mk(ROPEQK_F64, 1, 1, 3, 4, TH_BHSD);
    th_fill_random(&q, &rng);
    th_fill_random(&k, &rng);
    th_fill_random(&v, &rng);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.k_pos_offset = 2;
    cr_assert_eq(ropeqk_scores_ref(&p, &q.t, q.data, &k.t, k.data, NULL, NULL, &s.t, s.data), 0);
    for (int dt = 0; dt < 2; dt++) {
        ropeqk_dtype odt = dt ? ROPEQK_F32 : ROPEQK_F64;
        /* th_alloc fills the views with NaN bytes: anything left unwritten shows */
        th_buf o = mk(odt, 1, 1, 3, 3, TH_BHSD), l = mk(odt, 1, 1, 3, 1, TH_BHSD);
        cr_assert_eq(attn(&p, &q, &k, &v, NULL, NULL, &o, &l), 0);
        for (int i = 0; i < 2; i++) {
            for (int d = 0; d < 3; d++)
                cr_expect(elem(&o, 0, 0, i, d) == 0.0 && !signbit(elem(&o, 0, 0, i, d)), "row %d d%d: %g", i, d,
                          elem(&o, 0, 0, i, d));
            cr_expect(isinf(elem(&l, 0, 0, i, 0)) && elem(&l, 0, 0, i, 0) < 0, "row %d lse %g", i, elem(&l, 0, 0, i, 0));
        }
        for (int d = 0; d < 3; d++)
            cr_expect_eq(elem(&o, 0, 0, 2, d), elem(&v, 0, 0, 0, d));
        cr_expect_eq(elem(&l, 0, 0, 2, 0), dt ? (double)(float)elem(&s, 0, 0, 2, 0) : elem(&s, 0, 0, 2, 0));
        th_free(&o); th_free(&l);
    }
    /* the window alone (no causal): query at 10, keys at 0, 5, 9 are all >= 1 behind it */
    const int32_t qp[3] = {10, 10, 10}, kp[4] = {0, 5, 9, -3};
    p.causal = 0;
    p.window = 1;
    th_buf o = mk(ROPEQK_F64, 1, 1, 3, 3, TH_BHSD), l = mk(ROPEQK_F32, 1, 1, 3, 1, TH_BHSD);
    cr_assert_eq(attn(&p, &q, &k, &v, qp, kp, &o, &l), 0);
    for (int i = 0; i < 3; i++) {
        cr_expect(elem(&o, 0, 0, i, 0) == 0.0 && elem(&o, 0, 0, i, 2) == 0.0);
        cr_expect(isinf(elem(&l, 0, 0, i, 0)) && elem(&l, 0, 0, i, 0) < 0);
    }
    th_free(&o); th_free(&l); th_free(&q); th_free(&k); th_free(&v); th_free(&s);
}

Test(attn_ref, large_scores_stay_finite_and_match_long_double)
{
    /* exp(1000) overflows a double and exp(-1000) underflows to 0: only a max-subtracted softmax
     * survives both. The expected values take exp directly in long double, without the shift. */
    if (LDBL_MAX_10_EXP < 1000 || LDBL_MIN_10_EXP > -1000)
        cr_skip_test("long double has no wider range than double here");
    static const double sets[][4] = {{100.5, 99, 97.25, 100}, {1000, 998.5, 1001, 990}, {-1000, -1003, -999.5, -1010}};
    uint64_t rng = 14;
    th_buf q = mk(ROPEQK_F32, 1, 1, 1, 2, TH_BHSD), k = mk(ROPEQK_F32, 1, 1, 4, 2, TH_BHSD);
    th_buf v = mk(ROPEQK_F32, 1, 1, 4, 3, TH_BHSD);
    th_buf o = mk(ROPEQK_F64, 1, 1, 1, 3, TH_BHSD), l = mk(ROPEQK_F64, 1, 1, 1, 1, TH_BHSD);
    th_fill_random(&v, &rng);
    put(&q, 0, 0, 0, 0, 1); put(&q, 0, 0, 0, 1, 0);
    const int32_t zero[4] = {0};
    ropeqk_params p = plain();
    for (int s = 0; s < 3; s++) {
        for (int j = 0; j < 4; j++) {
            put(&k, 0, 0, j, 0, sets[s][j]);
            put(&k, 0, 0, j, 1, 0);
        }
        cr_assert_eq(attn(&p, &q, &k, &v, zero, zero, &o, &l), 0);
        long double sum = 0, num[3] = {0};
        for (int j = 0; j < 4; j++) {
            long double e = expl((long double)sets[s][j]);
            sum += e;
            for (int d = 0; d < 3; d++)
                num[d] += e * (long double)elem(&v, 0, 0, j, d);
        }
        double lse = elem(&l, 0, 0, 0, 0), want = (double)logl(sum);
        cr_expect(isfinite(lse) && fabs(lse - want) <= 1e-15 * fabs(want), "set %d: lse %.17g vs %.17g", s, lse, want);
        for (int d = 0; d < 3; d++) {
            double got = elem(&o, 0, 0, 0, d), w = (double)(num[d] / sum);
            cr_expect(isfinite(got) && fabs(got - w) <= 1e-14, "set %d d%d: %.17g vs %.17g", s, d, got, w);
        }
    }
    th_free(&q); th_free(&k); th_free(&v); th_free(&o); th_free(&l);
}

static uint64_t sweep_seed(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20260301ull;
}

/* O and LSE against softmax(S) V computed here in long double, with S from ropeqk_scores_ref and V
 * read by the test's decoder; also the metric on the same pair, which must see no error. */
Test(attn_ref, equals_softmax_of_scores_ref_times_v_random_sweep)
{
    enum { N = 300 };
    static const ropeqk_dtype dts[3] = {ROPEQK_F32, ROPEQK_F16, ROPEQK_BF16};
    uint64_t seed = sweep_seed();
    cr_log_info("attention sweep seed %llu (ROPEQK_TEST_SEED overrides)", (unsigned long long)seed);
    /* what the sweep covered: each must have happened, or the sweep proves less than it claims */
    int64_t masked_rows = 0, open_rows = 0, n_pos = 0, n_scaled = 0, n_gqa = 0, n_dv = 0, n_half = 0, n_win = 0;
    for (int c = 0; c < N; c++) {
        uint64_t rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(c + 1));
#define R(n) ((int64_t)(rqs_rand(&rng) % (uint64_t)(n)))
        int64_t B = 1 + R(2), Hkv = 1 + R(2), G = 1 + R(3), Hq = Hkv * G, Sq = 1 + R(6), Sk = 1 + R(9);
        int64_t D = 2 * (1 + R(8)), Dv = 1 + R(7);
        ropeqk_params p;
        ropeqk_default_params(&p);
        p.layout = (ropeqk_layout)R(2);
        p.rotary_dim = R(2) ? 0 : (int32_t)(2 * (1 + R(D / 2)));
        p.causal = (int)R(2);
        p.conjugate = R(4) == 0;
        p.window = R(3) == 0 ? 1 + R(4) : 0;
        p.scale = R(2) ? 0.0 : 1.5;
        bool pt = R(3) == 0;
        int32_t qp[6], kp[9];
        for (int i = 0; i < 6; i++) qp[i] = (int32_t)R(21);
        for (int j = 0; j < 9; j++) kp[j] = (int32_t)R(21);
        p.q_pos_offset = pt ? 0 : R(12);
        p.k_pos_offset = pt ? 0 : R(12);
        int sc = (int)R(3);
        if (sc == 1) {
            p.scaling.type = ROPEQK_SCALING_LINEAR;
            p.scaling.factor = 2.0;
        } else if (sc == 2) {
            p.scaling.type = ROPEQK_SCALING_YARN; /* attention factor != 1: scores carry its square */
            p.scaling.factor = 4.0;
            p.scaling.original_max_position = 16;
        }
        ropeqk_dtype vdt = dts[R(3)], odt = R(2) ? ROPEQK_F32 : ROPEQK_F64, ldt = R(2) ? ROPEQK_F32 : ROPEQK_F64;
        bool with_lse = R(4) != 0;
        th_buf q = mk(dts[R(3)], B, Hq, Sq, D, (th_layout)R(3)), k = mk(dts[R(3)], B, Hkv, Sk, D, (th_layout)R(3));
        th_buf v = mk(vdt, B, Hkv, Sk, Dv, (th_layout)R(3)), o = mk(odt, B, Hq, Sq, Dv, (th_layout)R(3));
        th_buf l = mk(ldt, B, Hq, Sq, 1, (th_layout)R(3));
        th_buf s = mk(ROPEQK_F64, B, Hq, Sq, Sk, TH_BHSD), e = mk(ROPEQK_F64, B, Hq, Sq, Dv, TH_BHSD);
        th_buf le = mk(ROPEQK_F64, B, Hq, Sq, 1, TH_BHSD);
#undef R
        th_fill_random(&q, &rng);
        th_fill_random(&k, &rng);
        th_fill_random(&v, &rng);
        n_pos += pt; n_scaled += sc != 0; n_gqa += G > 1; n_dv += Dv != D; n_half += vdt != ROPEQK_F32;
        n_win += p.window > 0;
        const int32_t *qpp = pt ? qp : NULL, *kpp = pt ? kp : NULL;
        cr_assert_eq(attn(&p, &q, &k, &v, qpp, kpp, &o, with_lse ? &l : NULL), 0, "case %d seed %llu", c,
                     (unsigned long long)seed);
        cr_assert_eq(ropeqk_scores_ref(&p, &q.t, q.data, &k.t, k.data, qpp, kpp, &s.t, s.data), 0);
        double of = odt == ROPEQK_F32 ? 0x1p-24 : 0.0, lf = ldt == ROPEQK_F32 ? 0x1p-24 : 0.0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < Sq; i++) {
                    long double m = -INFINITY, sum = 0, num[7] = {0};
                    double vmax = 0;
                    for (int64_t j = 0; j < Sk; j++) {
                        m = fmaxl(m, elem(&s, b, h, i, j));
                        for (int64_t d = 0; d < Dv; d++)
                            vmax = fmax(vmax, fabs(elem(&v, b, h / G, j, d)));
                    }
                    for (int64_t j = 0; m != -INFINITY && j < Sk; j++) {
                        long double w = expl(elem(&s, b, h, i, j) - m);
                        sum += w;
                        for (int64_t d = 0; d < Dv; d++)
                            num[d] += w * elem(&v, b, h / G, j, d);
                    }
                    masked_rows += m == -INFINITY;
                    open_rows += m != -INFINITY;
                    double lw = m == -INFINITY ? -INFINITY : (double)(m + logl(sum)), lg = elem(&l, b, h, i, 0);
                    put(&le, b, h, i, 0, lw);
                    for (int64_t d = 0; d < Dv; d++) {
                        double want = m == -INFINITY ? 0.0 : (double)(num[d] / sum), got = elem(&o, b, h, i, d);
                        put(&e, b, h, i, d, want);
                        cr_expect(fabs(got - want) <= of * fabs(want) + 1e-13 * vmax, /* exact 0 when masked */
                                  "case %d seed %llu (b%lld h%lld i%lld d%lld): %.17g vs %.17g", c,
                                  (unsigned long long)seed, (long long)b, (long long)h, (long long)i, (long long)d,
                                  got, want);
                    }
                    if (with_lse)
                        cr_expect(lg == lw || fabs(lg - lw) <= lf * fabs(lw) + 1e-13 * fmax(1.0, fabs(lw)),
                                  "case %d seed %llu lse (b%lld h%lld i%lld): %.17g vs %.17g", c,
                                  (unsigned long long)seed, (long long)b, (long long)h, (long long)i, lg, lw);
                }
        cr_expect(th_guards_intact(&o) && th_guards_intact(&l), "case %d seed %llu: wrote outside a view", c,
                  (unsigned long long)seed);
        double err = 1, lerr = 1;
        int64_t mm = -1;
        cr_assert_eq(ropeqk_attention_max_error(&v.t, v.data, &o.t, o.data, &e.t, e.data, with_lse ? &l.t : NULL,
                                                l.data, with_lse ? &le.t : NULL, le.data, &err, &lerr, &mm), 0);
        cr_expect(err <= (odt == ROPEQK_F32 ? 1e-7 : 1e-13) && lerr <= (ldt == ROPEQK_F32 ? 1e-7 : 1e-13) && mm == 0,
                  "case %d seed %llu: metric %g, lse %g, mismatches %lld", c, (unsigned long long)seed, err, lerr,
                  (long long)mm);
        th_free(&q); th_free(&k); th_free(&v); th_free(&o); th_free(&l); th_free(&s); th_free(&e); th_free(&le);
    }
    cr_log_info("sweep: %lld open rows, %lld fully masked", (long long)open_rows, (long long)masked_rows);
    cr_expect(masked_rows > 0 && open_rows > 0 && n_pos > 0 && n_scaled > 0 && n_gqa > 0 && n_dv > 0 && n_half > 0 &&
              n_win > 0, "the sweep missed a feature");
}

/* ---- invalid inputs: the right status, and the outputs untouched ------------------------------ */
typedef struct {
    ropeqk_params p, *pp;
    ropeqk_tensor q, k, v, o, l;
    ropeqk_tensor *qt, *kt, *vt, *ot, *lt;
    const void *qd, *kd, *vd;
    void *od, *ld;
} acall;

static float qbuf[64], kbuf[64], vbuf[64];
static unsigned char obuf[512], lbuf[128];

static void valid(acall *c)
{
    ropeqk_default_params(&c->p);
    c->pp = &c->p;
    c->q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 2, 4);
    c->k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 3, 4);
    c->v = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 3, 5);
    c->o = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 2, 2, 5);
    c->l = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 2, 2, 1);
    c->qt = &c->q; c->kt = &c->k; c->vt = &c->v; c->ot = &c->o; c->lt = &c->l;
    c->qd = qbuf; c->kd = kbuf; c->vd = vbuf; c->od = obuf; c->ld = lbuf;
}

static ropeqk_tensor T(ropeqk_dtype t, int64_t a, int64_t b, int64_t c, int64_t d) { return ropeqk_tensor_bhsd(t, a, b, c, d); }

Test(attn_ref, invalid_inputs_return_their_status_and_touch_nothing)
{
#define BAD(what, mutate, want)                                                                                     \
    do {                                                                                                          \
        acall c;                                                                                                  \
        valid(&c);                                                                                                \
        mutate;                                                                                                   \
        memset(obuf, 0xA5, sizeof obuf);                                                                          \
        memset(lbuf, 0x5A, sizeof lbuf);                                                                          \
        ropeqk_status st = ropeqk_attention_ref(c.pp, c.qt, c.qd, c.kt, c.kd, c.vt, c.vd, NULL, NULL, c.ot, c.od, \
                                                c.lt, c.ld);                                                      \
        cr_expect_eq(st, want, "%s: status %d, want %d", what, st, want);                                        \
        bool same = true;                                                                                         \
        for (size_t i = 0; i < sizeof obuf; i++) same = same && obuf[i] == 0xA5;                                  \
        for (size_t i = 0; i < sizeof lbuf; i++) same = same && lbuf[i] == 0x5A;                                  \
        cr_expect(same, "%s: an output was written", what);                                                       \
    } while (0)
    BAD("V batch", c.v = T(ROPEQK_F32, 2, 1, 3, 5), ROPEQK_ERR_BAD_SHAPE);
    BAD("V heads != K heads", c.v = T(ROPEQK_F32, 1, 2, 3, 5), ROPEQK_ERR_BAD_SHAPE);
    BAD("V keys != K keys", c.v = T(ROPEQK_F32, 1, 1, 4, 5), ROPEQK_ERR_BAD_SHAPE);
    BAD("out Dv != V Dv", c.o = T(ROPEQK_F64, 1, 2, 2, 4), ROPEQK_ERR_BAD_SHAPE);
    BAD("out rows", c.o = T(ROPEQK_F64, 1, 2, 3, 5), ROPEQK_ERR_BAD_SHAPE);
    BAD("out heads", c.o = T(ROPEQK_F64, 1, 1, 2, 5), ROPEQK_ERR_BAD_SHAPE);
    BAD("lse last dim 2", c.l = T(ROPEQK_F64, 1, 2, 2, 2), ROPEQK_ERR_BAD_SHAPE);
    BAD("lse rows", c.l = T(ROPEQK_F32, 1, 2, 1, 1), ROPEQK_ERR_BAD_SHAPE);
    BAD("V f64", c.v = T(ROPEQK_F64, 1, 1, 3, 5), ROPEQK_ERR_BAD_DTYPE);
    BAD("V unknown dtype", c.v.dtype = (ropeqk_dtype)9, ROPEQK_ERR_BAD_DTYPE);
    BAD("out f16", c.o = T(ROPEQK_F16, 1, 2, 2, 5), ROPEQK_ERR_BAD_DTYPE);
    BAD("out bf16", c.o = T(ROPEQK_BF16, 1, 2, 2, 5), ROPEQK_ERR_BAD_DTYPE);
    BAD("out unknown dtype", c.o.dtype = (ropeqk_dtype)7, ROPEQK_ERR_BAD_DTYPE);
    BAD("lse f16", c.l = T(ROPEQK_F16, 1, 2, 2, 1), ROPEQK_ERR_BAD_DTYPE);
    BAD("lse bf16", c.l = T(ROPEQK_BF16, 1, 2, 2, 1), ROPEQK_ERR_BAD_DTYPE);
    BAD("V Dv not contiguous", (c.v.nb[3] = 8, c.v.nb[2] = 40, c.v.nb[1] = c.v.nb[0] = 120), ROPEQK_ERR_BAD_STRIDES);
    BAD("V rows overlap", c.v.nb[2] = 8, ROPEQK_ERR_OVERLAP);
    BAD("Hq % Hkv", (c.q = T(ROPEQK_F32, 1, 3, 2, 4), c.k = T(ROPEQK_F32, 1, 2, 3, 4), c.v = T(ROPEQK_F32, 1, 2, 3, 5),
                     c.o = T(ROPEQK_F64, 1, 3, 2, 5), c.l = T(ROPEQK_F64, 1, 3, 2, 1)),
        ROPEQK_ERR_BAD_HEADS);
    BAD("odd rotary dim", c.p.rotary_dim = 3, ROPEQK_ERR_BAD_ROTARY_DIM);
    BAD("window < 0", c.p.window = -1, ROPEQK_ERR_BAD_PARAM);
    BAD("NULL params", c.pp = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL q", c.qt = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL k", c.kt = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL v", c.vt = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL out", c.ot = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL q data", c.qd = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL k data", c.kd = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL v data", c.vd = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL out data", c.od = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("lse without lse data", c.ld = NULL, ROPEQK_ERR_NULL_POINTER);
    /* descriptors are judged before data pointers, as in ropeqk_scores_ref */
    BAD("bad V shape and NULL V data", (c.v = T(ROPEQK_F32, 1, 1, 4, 5), c.vd = NULL), ROPEQK_ERR_BAD_SHAPE);
    BAD("out f16 and NULL out data", (c.o = T(ROPEQK_F16, 1, 2, 2, 5), c.od = NULL), ROPEQK_ERR_BAD_DTYPE);
#undef BAD
    /* no lse descriptor: lse_data is ignored, not written */
    acall c;
    valid(&c);
    memset(obuf, 0xA5, sizeof obuf);
    memset(lbuf, 0x5A, sizeof lbuf);
    cr_expect_eq(ropeqk_attention_ref(c.pp, c.qt, c.qd, c.kt, c.kd, c.vt, c.vd, NULL, NULL, c.ot, c.od, NULL, lbuf), 0);
    cr_expect(obuf[0] != 0xA5 || obuf[1] != 0xA5, "out not written");
    for (size_t i = 0; i < sizeof lbuf; i++)
        cr_expect(lbuf[i] == 0x5A, "lse byte %zu written with no lse descriptor", i);
}
