/* Frequency scaling (issue 5): the library's inverse frequencies and attention factors against
 * fixtures computed independently in NumPy (scripts/gen_scaling_fixtures.py), device vs scalar path
 * for every variant at positions near 2^20, the sliding window, and invalid combinations. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(scaling, .fini = th_leak_check);
TestSuite(scaling_freqs, .fini = th_leak_check);
TestSuite(scaling_device, .fini = th_leak_check);

#define MAXF 256

typedef struct {
    ropeqk_params p;
    int64_t head_dim;
    double longf[MAXF], shortf[MAXF], ff[MAXF], inv[MAXF], attn;
    int n_inv;
} fixture;

static int read_list(char *rest, double *out)
{
    int n = 0;
    for (char *t = strtok(rest, " \n"); t && n < MAXF; t = strtok(NULL, " \n"))
        out[n++] = strtod(t, NULL);
    return n;
}

static void load_fixture(const char *name, fixture *f)
{
    char path[512], line[16384];
    snprintf(path, sizeof path, "%s/%s.txt", SCALING_DIR, name);
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp, "cannot open %s", path);
    memset(f, 0, sizeof *f);
    ropeqk_default_params(&f->p);
    ropeqk_scaling *s = &f->p.scaling;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#')
            continue;
        char *sp = strchr(line, ' ');
        cr_assert_not_null(sp, "%s: bad line %s", path, line);
        *sp = '\0';
        char *v = sp + 1;
        static const char *types[] = {"none", "linear", "dynamic", "yarn", "llama3", "longrope"};
        if (!strcmp(line, "type")) {
            for (int i = 0; i < 6; i++)
                if (!strncmp(v, types[i], strlen(types[i])) && v[strlen(types[i])] == '\n')
                    s->type = (ropeqk_scaling_type)i;
        } else if (!strcmp(line, "head_dim")) f->head_dim = atoll(v);
        else if (!strcmp(line, "rotary_dim")) f->p.rotary_dim = atoi(v);
        else if (!strcmp(line, "base")) f->p.base = strtod(v, NULL);
        else if (!strcmp(line, "factor")) s->factor = strtod(v, NULL);
        else if (!strcmp(line, "original_max_position")) s->original_max_position = atoll(v);
        else if (!strcmp(line, "seq_len")) s->seq_len = atoll(v);
        else if (!strcmp(line, "beta_fast")) s->beta_fast = strtod(v, NULL);
        else if (!strcmp(line, "beta_slow")) s->beta_slow = strtod(v, NULL);
        else if (!strcmp(line, "attention_factor")) s->attention_factor = strtod(v, NULL);
        else if (!strcmp(line, "low_freq_factor")) s->low_freq_factor = strtod(v, NULL);
        else if (!strcmp(line, "high_freq_factor")) s->high_freq_factor = strtod(v, NULL);
        else if (!strcmp(line, "long_factor")) { s->n_long_factor = read_list(v, f->longf); s->long_factor = f->longf; }
        else if (!strcmp(line, "short_factor")) { s->n_short_factor = read_list(v, f->shortf); s->short_factor = f->shortf; }
        else if (!strcmp(line, "freq_factors")) { s->n_freq_factors = read_list(v, f->ff); s->freq_factors = f->ff; }
        else if (!strcmp(line, "expect_attention_factor")) f->attn = strtod(v, NULL);
        else if (!strcmp(line, "expect_inv")) f->n_inv = read_list(v, f->inv);
        else cr_assert_fail("%s: unknown key %s", path, line);
    }
    fclose(fp);
    cr_assert(f->n_inv > 0 && f->head_dim > 0, "%s: incomplete fixture", path);
}

static void check_freqs(const char *name)
{
    fixture f;
    load_fixture(name, &f);
    double inv[MAXF], attn = 0;
    ropeqk_status st = ropeqk_inv_freq(&f.p, f.head_dim, inv, &attn);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", name, ropeqk_status_string(st));
    for (int i = 0; i < f.n_inv; i++)
        cr_expect(fabs(inv[i] - f.inv[i]) <= 1e-12 * f.inv[i], "%s: inv[%d] = %.17g, expected %.17g", name, i, inv[i],
                  f.inv[i]);
    cr_expect(fabs(attn - f.attn) <= 1e-14, "%s: attention factor %.17g, expected %.17g", name, attn, f.attn);
}

/* Device vs scalar path with the fixture's scaling, both layouts, positions around 2^20. */
static void check_device(const char *name)
{
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    fixture f;
    load_fixture(name, &f);
    for (int lay = 0; lay < 2; lay++) {
        th_case c;
        memset(&c, 0, sizeof c);
        c.p = f.p;
        c.p.layout = (ropeqk_layout)lay;
        c.p.causal = 1;
        c.B = 1; c.Hq = 4; c.Hkv = 2; c.Sq = 33; c.Sk = 127; c.D = f.head_dim;
        c.dtype = lay ? ROPEQK_BF16 : ROPEQK_F32;
        c.p.k_pos_offset = (1 << 20) - c.Sk;
        c.p.q_pos_offset = (1 << 20) - c.Sq;
        th_result r = th_run(ctx, &c, 99);
        cr_expect_eq(r.status, ROPEQK_SUCCESS, "%s: %s", name, ropeqk_status_string(r.status));
        cr_expect(r.max_err <= 1e-5, "%s layout %d: error %.3g", name, lay, r.max_err);
        cr_expect_eq(r.mismatch, 0, "%s", name);
        cr_log_info("%s layout %d: max error %.3g", name, lay, r.max_err);
    }
    ropeqk_ctx_destroy(ctx);
}

#define FIXTURE(n)                                                                                 \
    Test(scaling_freqs, n) { check_freqs(#n); }                                                    \
    Test(scaling_device, n) { check_device(#n); }
FIXTURE(linear_llama2_32k)
FIXTURE(dynamic_ntk_long)
FIXTURE(dynamic_ntk_short)
FIXTURE(yarn_qwen25)
FIXTURE(yarn_partial_betas)
FIXTURE(llama3_llama31_8b)
FIXTURE(longrope_phi35_long)
FIXTURE(longrope_phi35_short)
FIXTURE(freq_factors_none)

Test(scaling, attention_factor_squared_on_rotated_dims_only)
{
    /* q = k = unit vector in a rotated pair at equal positions: score = attn^2 * scale;
     * in a pass-through dim: score = scale */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.rotary_dim = 2;
    p.scale = 1.0;
    p.scaling.type = ROPEQK_SCALING_YARN;
    p.scaling.factor = 4;
    p.scaling.original_max_position = 4096;
    p.scaling.attention_factor = 1.5;
    ropeqk_tensor t = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, 4), o = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 1, 1, 1);
    float rot[4] = {1, 0, 0, 0}, pass[4] = {0, 0, 1, 0};
    double s;
    cr_assert_eq(ropeqk_scores_ref(&p, &t, rot, &t, rot, NULL, NULL, &o, &s), 0);
    cr_expect_float_eq(s, 2.25, 1e-14);
    cr_assert_eq(ropeqk_scores_ref(&p, &t, pass, &t, pass, NULL, NULL, &o, &s), 0);
    cr_expect_float_eq(s, 1.0, 1e-14);
}

Test(scaling, sliding_window_masks_exactly)
{
    enum { S = 20, D = 8, W = 5 };
    float q[S * D], k[S * D];
    uint64_t rng = 5;
    for (int i = 0; i < S * D; i++) {
        q[i] = (float)rqs_uniform(&rng);
        k[i] = (float)rqs_uniform(&rng);
    }
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.window = W;
    ropeqk_tensor t = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, S, D);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 1, S, S), o32 = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, S, S);
    double ref[S * S];
    float dev[S * S];
    cr_assert_eq(ropeqk_scores_ref(&p, &t, q, &t, k, NULL, NULL, &o64, ref), 0);
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) {
            bool masked = j > i || i - j >= W;
            cr_expect_eq(isinf(ref[i * S + j]) && ref[i * S + j] < 0, masked, "ref (%d,%d)", i, j);
        }
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    cr_assert_eq(ropeqk_scores(ctx, &p, &t, q, &t, k, NULL, NULL, &o32, dev), 0);
    for (int i = 0; i < S * S; i++)
        cr_expect_eq(isinf(dev[i]) && dev[i] < 0, isinf(ref[i]) && ref[i] < 0, "device entry %d", i);
    /* window without causal masks the far past only */
    p.causal = 0;
    cr_assert_eq(ropeqk_scores(ctx, &p, &t, q, &t, k, NULL, NULL, &o32, dev), 0);
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++)
            cr_expect_eq(isinf(dev[i * S + j]) != 0, i - j >= W, "no-causal (%d,%d)", i, j);
    ropeqk_ctx_destroy(ctx);
}

static ropeqk_params yarn_ok(void)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.scaling.type = ROPEQK_SCALING_YARN;
    p.scaling.factor = 4;
    p.scaling.original_max_position = 4096;
    return p;
}

Test(scaling, invalid_combinations)
{
    static const double ones[4] = {1, 1, 1, 1};
    double inv[8];
    ropeqk_params p = yarn_ok();
    cr_assert_eq(ropeqk_inv_freq(&p, 8, inv, NULL), ROPEQK_SUCCESS);
    struct {
        const char *what;
        ropeqk_params p;
    } bad[24];
    int n = 0;
#define BAD(desc, stmt) do { bad[n].what = desc; bad[n].p = yarn_ok(); { ropeqk_params *q = &bad[n].p; stmt; } n++; } while (0)
    BAD("unknown type", q->scaling.type = (ropeqk_scaling_type)17);
    BAD("yarn without factor", q->scaling.factor = 0);
    BAD("negative factor", q->scaling.factor = -2);
    BAD("NaN factor", q->scaling.factor = NAN);
    BAD("yarn without L0", q->scaling.original_max_position = 0);
    BAD("negative beta", q->scaling.beta_fast = -1);
    BAD("negative attention factor", q->scaling.attention_factor = -1);
    BAD("llama3 field on yarn", q->scaling.low_freq_factor = 2);
    BAD("longrope list on yarn", (q->scaling.long_factor = ones, q->scaling.n_long_factor = 4));
    BAD("seq_len on yarn", q->scaling.seq_len = 10);
    BAD("factor on none", (q->scaling = (ropeqk_scaling){0}, q->scaling.factor = 2));
    BAD("beta on linear", (q->scaling.type = ROPEQK_SCALING_LINEAR, q->scaling.original_max_position = 0,
                           q->scaling.beta_slow = 2));
    BAD("llama3 low == high", (q->scaling = (ropeqk_scaling){0}, q->scaling.type = ROPEQK_SCALING_LLAMA3,
                               q->scaling.low_freq_factor = 4, q->scaling.high_freq_factor = 4));
    BAD("longrope without lists", (q->scaling = (ropeqk_scaling){0}, q->scaling.type = ROPEQK_SCALING_LONGROPE,
                                   q->scaling.original_max_position = 4096));
    BAD("longrope list too short", (q->scaling = (ropeqk_scaling){0}, q->scaling.type = ROPEQK_SCALING_LONGROPE,
                                    q->scaling.original_max_position = 4096, q->scaling.long_factor = ones,
                                    q->scaling.n_long_factor = 3, q->scaling.short_factor = ones,
                                    q->scaling.n_short_factor = 4));
    BAD("freq_factors wrong length", (q->scaling.freq_factors = ones, q->scaling.n_freq_factors = 2));
    BAD("freq_factors count without list", q->scaling.n_freq_factors = 4);
    BAD("subnormal linear factor", (q->scaling.type = ROPEQK_SCALING_LINEAR, q->scaling.original_max_position = 0,
                                    q->scaling.factor = 1e-320));
    BAD("subnormal yarn factor", q->scaling.factor = 1e-320);
    BAD("longrope default attention with L0 = 1",
        (q->scaling = (ropeqk_scaling){0}, q->scaling.type = ROPEQK_SCALING_LONGROPE, q->scaling.factor = 4,
         q->scaling.original_max_position = 1, q->scaling.long_factor = ones, q->scaling.n_long_factor = 4,
         q->scaling.short_factor = ones, q->scaling.n_short_factor = 4));
    BAD("dynamic with R = 2", (q->scaling = (ropeqk_scaling){0}, q->scaling.type = ROPEQK_SCALING_DYNAMIC,
                               q->scaling.factor = 2, q->scaling.original_max_position = 16, q->rotary_dim = 2));
    for (int i = 0; i < n; i++)
        cr_expect_eq(ropeqk_inv_freq(&bad[i].p, 8, inv, NULL), ROPEQK_ERR_BAD_SCALING, "%s", bad[i].what);
    p = yarn_ok();
    p.window = -1;
    cr_expect_eq(ropeqk_inv_freq(&p, 8, inv, NULL), ROPEQK_ERR_BAD_PARAM, "negative window");

    /* per-token positions hide L from the host: dynamic needs an explicit seq_len */
    ropeqk_params d;
    ropeqk_default_params(&d);
    d.scaling.type = ROPEQK_SCALING_DYNAMIC;
    d.scaling.factor = 2;
    d.scaling.original_max_position = 16;
    ropeqk_tensor t = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 2, 8), o = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 1, 2, 2);
    float x[16] = {0};
    double out[4];
    int32_t pos[2] = {0, 40};
    cr_expect_eq(ropeqk_scores_ref(&d, &t, x, &t, x, pos, pos, &o, out), ROPEQK_ERR_BAD_SCALING);
    d.scaling.seq_len = 41;
    cr_expect_eq(ropeqk_scores_ref(&d, &t, x, &t, x, pos, pos, &o, out), ROPEQK_SUCCESS);
}

/* YaRN with Hugging Face's "truncate": false (gpt-oss: rope_theta 150000, factor 32, L0 4096, betas 32
 * and 1, head dim 64): the correction range keeps its fractional ends. Expected values from the
 * transformers formula written out here (_compute_yarn_parameters: find_correction_range without
 * floor/ceil, linear_ramp_factor, inv = interpolation * (1 - mask) + extrapolation * mask). */
Test(scaling, yarn_without_truncation_keeps_the_fractional_range)
{
    const double base = 150000.0, factor = 32.0, l0 = 4096.0, R = 64.0;
    const double pi = 3.14159265358979323846;
    double lo = R * log(l0 / (32.0 * 2.0 * pi)) / (2.0 * log(base));
    double hi = R * log(l0 / (1.0 * 2.0 * pi)) / (2.0 * log(base));
    lo = fmax(lo, 0.0), hi = fmin(hi, R - 1.0);
    cr_assert(lo != floor(lo) && hi != ceil(hi), "the case must have fractional ends: %g %g", lo, hi);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = ROPEQK_HALF_SPLIT;
    p.base = base;
    p.scaling.type = ROPEQK_SCALING_YARN;
    p.scaling.factor = factor;
    p.scaling.original_max_position = 4096;
    p.scaling.yarn_no_truncate = 1;
    double inv[32], inv_t[32], attn = 0.0;
    cr_assert_eq(ropeqk_inv_freq(&p, 64, inv, &attn), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    cr_expect_float_eq(attn, 0.1 * log(factor) + 1.0, 1e-15);
    int differs = 0;
    p.scaling.yarn_no_truncate = 0;
    cr_assert_eq(ropeqk_inv_freq(&p, 64, inv_t, NULL), ROPEQK_SUCCESS);
    for (int i = 0; i < 32; i++) {
        double pos = pow(base, 2.0 * i / R), extra = 1.0 / pos, inter = 1.0 / (factor * pos);
        double ramp = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0), mask = 1.0 - ramp;
        double want = inter * (1.0 - mask) + extra * mask;
        cr_expect(fabs(inv[i] - want) <= 1e-15 * want, "frequency %d: %.17g vs %.17g", i, inv[i], want);
        differs += inv[i] != inv_t[i];
    }
    cr_expect(differs > 0, "rounding the range changed no frequency: the case does not tell them apart");
    /* a YaRN-only field elsewhere is an error, like every other */
    p.scaling.type = ROPEQK_SCALING_LINEAR;
    p.scaling.original_max_position = 0;
    p.scaling.yarn_no_truncate = 1;
    cr_expect_eq(ropeqk_inv_freq(&p, 64, inv, NULL), ROPEQK_ERR_BAD_SCALING);
}
