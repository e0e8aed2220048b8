/* The attention metric (ropeqk_attention_max_error) on crafted inputs: known error values, the
 * query-head to KV-head mapping of the V norm, -inf and NaN mismatches, zero V, half-precision
 * outputs, and every invalid argument. Needs no OpenCL device. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

TestSuite(attn_metric, .fini = th_leak_check);

enum { B = 1, HKV = 2, HQ = 4, SQ = 2, SK = 3, DV = 2 };

/* V: KV head 0 has inf-norm 2 (reached at key 2, negative), head 1 has 4 (key 0). */
static const float vdata[HKV][SK][DV] = {{{0.5f, 0.125f}, {0.25f, -0.75f}, {1.0f, -2.0f}},
                                         {{-4.0f, 1.0f}, {0.5f, 0.5f}, {0.0f, 0.0f}}};

typedef struct {
    float o[HQ][SQ][DV], l[HQ][SQ];
    double o64[HQ][SQ][DV], l64[HQ][SQ];
} pair;

/* out equal to out64 everywhere: every error 0 until a test sets one */
static void base(pair *x)
{
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < SQ; i++) {
            for (int d = 0; d < DV; d++)
                x->o[h][i][d] = (float)(x->o64[h][i][d] = 0.25 * (h + 1) - 0.5 * i + d);
            x->l[h][i] = (float)(x->l64[h][i] = 1.5 + h - i);
        }
}

typedef struct {
    ropeqk_tensor v, o, o64, l, l64;
} descs;

static descs D(void)
{
    descs t = {ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, DV), ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, DV),
               ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, DV), ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, 1),
               ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, 1)};
    return t;
}

static void measure(const pair *x, bool with_lse, double *err, double *lerr, int64_t *mm)
{
    descs t = D();
    *err = *lerr = -1;
    *mm = -1;
    cr_assert_eq(ropeqk_attention_max_error(&t.v, vdata, &t.o, x->o, &t.o64, x->o64, with_lse ? &t.l : NULL, x->l,
                                            with_lse ? &t.l64 : NULL, x->l64, err, lerr, mm),
                 0);
}

Test(attn_metric, equal_outputs_give_zero)
{
    pair x;
    base(&x);
    double e, le;
    int64_t mm;
    measure(&x, true, &e, &le, &mm);
    cr_expect(e == 0 && le == 0 && mm == 0, "%g %g %lld", e, le, (long long)mm);
}

Test(attn_metric, o_error_is_divided_by_the_inf_norm_of_the_right_kv_head)
{
    double e, le;
    int64_t mm;
    pair x;
    /* query head 1 reads KV head 1 / 2 = 0 (norm 2, reached at key 2: the norm spans all Sk keys,
     * not the first Sq); h % Hkv would pick head 1 (norm 4) */
    base(&x);
    x.o[1][0][1] += 0.5f;
    measure(&x, true, &e, &le, &mm);
    cr_expect(e == 0.25 && le == 0 && mm == 0, "head 1: %.17g", e);
    /* query head 2 reads KV head 1 (norm 4); h % Hkv would pick head 0 (norm 2) */
    base(&x);
    x.o[2][1][0] -= 0.75f;
    measure(&x, true, &e, &le, &mm);
    cr_expect(e == 0.1875 && mm == 0, "head 2: %.17g", e);
    /* the maximum over rows, not a sum or the last one */
    base(&x);
    x.o[1][0][1] += 0.5f;
    x.o[3][1][0] += 0.5f;
    measure(&x, false, &e, &le, &mm);
    cr_expect(e == 0.25, "two rows: %.17g", e);
}

Test(attn_metric, lse_error_is_relative_to_max_of_abs_lse64_and_one)
{
    double e, le;
    int64_t mm;
    pair x;
    base(&x);
    x.l64[0][0] = 10; x.l[0][0] = 10.5f; /* 0.05 */
    x.l64[1][1] = 0.25; x.l[1][1] = 0.75f; /* |0.25| < 1: 0.5 absolute */
    x.l64[2][0] = -8; x.l[2][0] = -6; /* 0.25 */
    measure(&x, true, &e, &le, &mm);
    cr_expect(le == 0.5 && e == 0 && mm == 0, "lse %.17g", le);
    x.l[1][1] = 0.25f;
    measure(&x, true, &e, &le, &mm);
    cr_expect(le == 0.25, "lse %.17g", le);
    /* without LSE views the LSE error is 0 whatever the arrays hold */
    measure(&x, false, &e, &le, &mm);
    cr_expect(le == 0 && mm == 0);
}

Test(attn_metric, minus_inf_and_nan_rows_are_mismatches_not_errors)
{
    double e, le;
    int64_t mm;
    pair x;
    base(&x);
    /* both -inf (a fully masked row on both sides, O = 0): agreement */
    x.l[0][0] = -INFINITY; x.l64[0][0] = -INFINITY;
    x.o[0][0][0] = x.o[0][0][1] = 0.0f; x.o64[0][0][0] = x.o64[0][0][1] = 0.0;
    measure(&x, true, &e, &le, &mm);
    cr_expect(e == 0 && le == 0 && mm == 0, "both -inf: %g %g %lld", e, le, (long long)mm);
    /* five rows wrong in kind; each also carries a large O or LSE difference that must not count */
    x.l[0][1] = -INFINITY; x.o[0][1][0] += 100;          /* only the tested LSE masked */
    x.l64[1][0] = -INFINITY; x.l[1][0] = 1e6f;           /* only the reference LSE masked */
    x.o[1][1][1] = NAN; x.o[1][1][0] += 100;             /* NaN in O */
    x.o64[2][0][0] = NAN; x.l[2][0] += 1000;             /* NaN in O64 */
    x.l64[3][1] = NAN; x.o[3][1][1] += 100;              /* NaN in LSE64 */
    measure(&x, true, &e, &le, &mm);
    cr_expect(mm == 5 && e == 0 && le == 0, "mismatches %lld, err %g, lse %g", (long long)mm, e, le);
    x.l[3][0] = NAN; /* NaN in the tested LSE: a sixth row */
    measure(&x, true, &e, &le, &mm);
    cr_expect(mm == 6, "mismatches %lld", (long long)mm);
    /* without LSE only the NaNs in O count (rows 1,1 and 2,0); the others' O errors now do count */
    measure(&x, false, &e, &le, &mm);
    cr_expect(mm == 2 && e == 100.0 / 2, "no lse: mismatches %lld, err %g", (long long)mm, e);
}

Test(attn_metric, zero_v_means_absolute_error_and_half_outputs_decode)
{
    static const float zero[HKV][SK][DV] = {{{0}}};
    descs t = D();
    pair x;
    base(&x);
    x.o[3][0][1] += 0.375f;
    double e = -1, le = -1;
    int64_t mm = -1;
    cr_assert_eq(ropeqk_attention_max_error(&t.v, zero, &t.o, x.o, &t.o64, x.o64, NULL, NULL, NULL, NULL, &e, &le, &mm), 0);
    cr_expect(e == 0.375 && le == 0 && mm == 0, "zero V: %.17g", e);
    /* an f16 and a bf16 output one ulp above 1.0 against an f64 1.0, V of norm 1 */
    static const float one[1][1][1][1] = {{{{1.0f}}}};
    static const double ref = 1.0;
    const uint16_t h16 = 0x3C01, b16 = 0x3F81;
    ropeqk_tensor v1 = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, 1), r1 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 1, 1, 1);
    ropeqk_tensor f16 = ropeqk_tensor_bhsd(ROPEQK_F16, 1, 1, 1, 1), bf = ropeqk_tensor_bhsd(ROPEQK_BF16, 1, 1, 1, 1);
    cr_assert_eq(ropeqk_attention_max_error(&v1, one, &f16, &h16, &r1, &ref, NULL, NULL, NULL, NULL, &e, &le, &mm), 0);
    cr_expect(e == 0x1p-10, "f16: %.17g", e);
    cr_assert_eq(ropeqk_attention_max_error(&v1, one, &bf, &b16, &r1, &ref, &bf, &b16, &r1, &ref, &e, &le, &mm), 0);
    cr_expect(e == 0x1p-7 && le == 0x1p-7, "bf16: %.17g %.17g", e, le);
}

Test(attn_metric, invalid_arguments_return_their_status_and_leave_results)
{
    pair x;
    base(&x);
    double e, le;
    int64_t mm;
#define BAD(what, mutate, want)                                                                                   \
    do {                                                                                                        \
        descs t = D();                                                                                          \
        ropeqk_tensor *v = &t.v, *o = &t.o, *o64 = &t.o64, *l = &t.l, *l64 = &t.l64;                            \
        const void *vd = vdata, *od = x.o, *o64d = x.o64, *ld = x.l, *l64d = x.l64;                             \
        double *pe = &e, *ple = &le;                                                                            \
        int64_t *pmm = &mm;                                                                                     \
        e = le = 42;                                                                                            \
        mm = 42;                                                                                                \
        mutate;                                                                                                 \
        ropeqk_status st = ropeqk_attention_max_error(v, vd, o, od, o64, o64d, l, ld, l64, l64d, pe, ple, pmm); \
        cr_expect_eq(st, want, "%s: status %d, want %d", what, st, want);                                      \
        cr_expect(e == 42 && le == 42 && mm == 42, "%s: a result was written", what);                          \
    } while (0)
    BAD("out64 Dv", t.o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, 1), ROPEQK_ERR_BAD_SHAPE);
    BAD("out64 rows", t.o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, 1, DV), ROPEQK_ERR_BAD_SHAPE);
    BAD("out64 heads", t.o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, 2, SQ, DV), ROPEQK_ERR_BAD_SHAPE);
    BAD("V Dv", t.v = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, 1), ROPEQK_ERR_BAD_SHAPE);
    BAD("V batch", t.v = ropeqk_tensor_bhsd(ROPEQK_F32, 2, HKV, SK, DV), ROPEQK_ERR_BAD_SHAPE);
    BAD("lse vs lse64", t.l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, 1, 1), ROPEQK_ERR_BAD_SHAPE);
    BAD("lse vs out", (t.l = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, 2), t.l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, 2)),
        ROPEQK_ERR_BAD_SHAPE);
    BAD("Hq % Hkv", t.v = ropeqk_tensor_bhsd(ROPEQK_F32, B, 3, 1, DV), ROPEQK_ERR_BAD_HEADS);
    BAD("zero Sk", t.v.ne[2] = 0, ROPEQK_ERR_BAD_SHAPE);
    BAD("unknown dtype", t.o.dtype = (ropeqk_dtype)5, ROPEQK_ERR_BAD_DTYPE);
    BAD("negative stride", t.o64.nb[2] = -16, ROPEQK_ERR_BAD_STRIDES);
    BAD("lse without lse64", l64 = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("lse64 without lse", l = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL v", v = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL out", o = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL out64", o64 = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL v data", vd = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL out data", od = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL out64 data", o64d = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL lse data", ld = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL lse64 data", l64d = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL max_err", pe = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL max_lse_rel", ple = NULL, ROPEQK_ERR_NULL_POINTER);
    BAD("NULL mismatch", pmm = NULL, ROPEQK_ERR_NULL_POINTER);
#undef BAD
}
