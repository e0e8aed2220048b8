/* The model-family variant flags of `ropeqk scores` / `ropeqk attention` (docs/conventions.md
 * section 11), each by an identity that pins its meaning without a second implementation:
 * - --softcap C: the scores are C tanh(S / C) of the uncapped scores, masked ones stay -inf;
 * - --rotary-offset N: the same as moving dims [N, N+R) to the front of q and k (a common permutation
 *   of the dims leaves q.k unchanged) with offset 0; without --rotary-dim, R = D - N;
 * - --mrope-section: [3,S] positions with three equal rows are plain RoPE at that row; with all
 *   frequencies temporal, the h and w rows do not matter; interleaved and contiguous differ;
 * - --sinks: O and LSE follow from the sink-free run: O' = O / (1 + e^(s - LSE)), LSE' = LSE +
 *   ln(1 + e^(s - LSE)); a row with every key masked has O' = 0 and LSE' = s exactly;
 * - --v-from-k --dv N: the same as --v holding K's first N dims.
 * Each runs on the scalar path (--device ref), the default device and the Vulkan device, the device
 * runs with --check too (exit 3 when it leaves the fp64 tolerance); then the usage and runtime errors. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "npy.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

#include "cli_fixture.h"
#include "cli_files.h"

TestSuite(variants, .init = setup, .fini = teardown, .timeout = 300);

/* Where a case runs: NULL = the scalar path (--device ref), else a device spec ("" = the default) */
typedef const char *where;

/* Runs `cmd` (scores / attention) with the given arguments (NULL-terminated), then --device ref, or
 * the device and --check. */
static void run_ok(where device, const char *const *args)
{
    const char *argv[64];
    int n = 0;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    if (!device)
        argv[n++] = "--device", argv[n++] = "ref";
    else
        argv[n++] = "--check";
    if (device && *device)
        argv[n++] = "--device", argv[n++] = device;
    argv[n] = NULL;
    cli_result r = run(argv);
    cr_assert_eq(r.status, 0, "%s exit %d (%s)\nstdout: %s\nstderr: %s", args[0], r.status,
                 !device ? "ref" : *device ? device : "default device", r.out, r.err);
    cli_result_free(&r);
}

static void skip_without_device(where device)
{
    if (device && no_device_for(*device ? device : NULL))
        cr_skip_test("no device %s", device);
}

/* |a - b| <= tol (1 + |b|) everywhere, and -inf exactly where b is -inf. */
static void expect_close(const npy_array *a, const float *b, int64_t n, double tol, const char *what)
{
    cr_assert_eq(npy_numel(a), n, "%s: %lld elements, want %lld", what, (long long)npy_numel(a), (long long)n);
    const float *x = a->data;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        bool ok = isinf(b[i]) ? x[i] == b[i] : fabs((double)x[i] - b[i]) <= tol * (1.0 + fabs(b[i]));
        if (!ok && bad++ == 0)
            first = i;
    }
    cr_expect_eq(bad, 0, "%s: %lld of %lld differ, first [%lld]: %.9g vs %.9g", what, (long long)bad, (long long)n,
                 (long long)first, first >= 0 ? x[first] : 0.0, first >= 0 ? b[first] : 0.0);
}

static void check_softcap(where device)
{
    skip_without_device(device);
    /* GQA 4:2, 9 x 11 with offsets so the causal mask cuts rows; |S| up to ~8: tanh(S/3) bends */
    save_rand(ipath("q.npy"), NPY_F32, 1, 4, 9, 24, 11);
    save_rand(ipath("k.npy"), NPY_F32, 1, 2, 11, 24, 12);
    const char *base[] = {"scores", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--causal", "--q-pos-offset", "2",
                          "--layout", "half-split", "--scale", "1"};
#define WITH(...) ((const char *const[]){base[0], base[1], base[2], base[3], base[4], base[5], base[6], base[7],   \
                                         base[8], base[9], base[10], base[11], __VA_ARGS__, NULL})
    run_ok(device, WITH("--out", tpath("s.npy")));
    run_ok(device, WITH("--out", tpath("c.npy"), "--softcap", "3"));
    npy_array s = {0}, c = {0};
    load(tpath("s.npy"), &s);
    load(tpath("c.npy"), &c);
    int64_t n = npy_numel(&s), masked = 0;
    float *want = malloc((size_t)n * sizeof *want);
    cr_assert(want);
    double big = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)s.data)[i];
        masked += isinf(v) != 0;
        big = isinf(v) ? big : fmax(big, fabs(v));
        want[i] = isinf(v) ? v : (float)(3.0 * tanh(v / 3.0));
    }
    cr_assert(masked > 0 && big > 3.0, "the case masks nothing (%lld) or never bends tanh (max %g)", (long long)masked,
              big);
    expect_close(&c, want, n, 2e-6, "--softcap 3 vs 3 tanh(S / 3)");
    free(want);
    npy_free(&s);
    npy_free(&c);
}

/* q [1,H,S,16]: dims [10,16) moved to the front */
static void save_permuted(const char *from, const char *to)
{
    npy_array a = {0};
    load(from, &a);
    float *x = a.data, row[16];
    for (int64_t r = 0; r < npy_numel(&a) / 16; r++) {
        memcpy(row, x + 16 * r + 10, 6 * sizeof(float));
        memcpy(row + 6, x + 16 * r, 10 * sizeof(float));
        memcpy(x + 16 * r, row, sizeof row);
    }
    save_array(to, NPY_F32, x, a.ndim, a.shape);
    npy_free(&a);
}

static void check_rotary_offset(where device)
{
    skip_without_device(device);
    save_rand(ipath("q.npy"), NPY_F32, 2, 3, 5, 16, 21);
    save_rand(ipath("k.npy"), NPY_F32, 2, 3, 7, 16, 22);
    save_permuted(ipath("q.npy"), ipath("qp.npy"));
    save_permuted(ipath("k.npy"), ipath("kp.npy"));
    static const char *const layouts[] = {"interleaved", "half-split"};
    for (int l = 0; l < 2; l++) {
        const char *lay = layouts[l];
        /* large positions: the rotation matters in every pair */
        run_ok(device, ARGS("scores", "--q", ipath("qp.npy"), "--k", ipath("kp.npy"), "--out", tpath("a.npy"),
                            "--layout", lay, "--rotary-dim", "6", "--q-pos-offset", "100000", "--causal"));
        run_ok(device, ARGS("scores", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--out", tpath("b.npy"),
                            "--layout", lay, "--rotary-dim", "6", "--rotary-offset", "10", "--q-pos-offset", "100000",
                            "--causal"));
        run_ok(device, ARGS("scores", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--out", tpath("c.npy"),
                            "--layout", lay, "--rotary-offset", "10", "--q-pos-offset", "100000", "--causal"));
        npy_array a = {0}, b = {0}, c = {0};
        load(tpath("a.npy"), &a);
        load(tpath("b.npy"), &b);
        load(tpath("c.npy"), &c);
        char what[96];
        snprintf(what, sizeof what, "%s: --rotary-offset 10 vs dims moved to the front", lay);
        expect_close(&b, a.data, npy_numel(&a), 1e-5, what);
        snprintf(what, sizeof what, "%s: --rotary-offset 10 alone (R = D - N = 6)", lay);
        expect_close(&c, a.data, npy_numel(&a), 1e-5, what);
        npy_free(&a);
        npy_free(&b);
        npy_free(&c);
    }
}

static void check_mrope(where device)
{
    skip_without_device(device);
    enum { SQ = 6, SK = 9 };
    save_rand(ipath("q.npy"), NPY_F32, 1, 2, SQ, 32, 31);
    save_rand(ipath("k.npy"), NPY_F32, 1, 2, SK, 32, 32);
    int32_t qp[SQ], kp[SK], q3[3 * SQ], k3[3 * SK], qh[3 * SQ], kh[3 * SK];
    for (int i = 0; i < SQ; i++) {
        qp[i] = 5000 + 7 * i;
        q3[i] = q3[SQ + i] = q3[2 * SQ + i] = qh[i] = qp[i];
        qh[SQ + i] = 3 * i, qh[2 * SQ + i] = 40 - i; /* image-like h, w rows */
    }
    for (int j = 0; j < SK; j++) {
        kp[j] = 4990 + 5 * j;
        k3[j] = k3[SK + j] = k3[2 * SK + j] = kh[j] = kp[j];
        kh[SK + j] = j / 3, kh[2 * SK + j] = j % 3;
    }
    const int64_t s1q[] = {SQ}, s1k[] = {SK}, s3q[] = {3, SQ}, s3k[] = {3, SK};
    save_array(ipath("qp.npy"), NPY_I32, qp, 1, s1q);
    save_array(ipath("kp.npy"), NPY_I32, kp, 1, s1k);
    save_array(ipath("q3.npy"), NPY_I32, q3, 2, s3q);
    save_array(ipath("k3.npy"), NPY_I32, k3, 2, s3k);
    save_array(ipath("qh.npy"), NPY_I32, qh, 2, s3q);
    save_array(ipath("kh.npy"), NPY_I32, kh, 2, s3k);
#define SC(out, qf, kf, ...)                                                                                      \
    run_ok(device, ARGS("scores", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--out", tpath(out),            \
                        "--layout", "half-split", "--q-positions", ipath(qf), "--k-positions", ipath(kf), __VA_ARGS__))
    SC("plain.npy", "qp.npy", "kp.npy", "--scale", "0.25");
    SC("same.npy", "q3.npy", "k3.npy", "--scale", "0.25", "--mrope-section", "4,6,6");
    SC("same_i.npy", "q3.npy", "k3.npy", "--scale", "0.25", "--mrope-section", "4,6,6", "--mrope-interleaved");
    SC("temporal.npy", "qh.npy", "kh.npy", "--scale", "0.25", "--mrope-section", "16,0,0");
    /* the causal mask follows token order (offset + row), not the rotary positions */
    SC("causal.npy", "qh.npy", "kh.npy", "--scale", "0.25", "--mrope-section", "16,0,0", "--causal",
       "--q-pos-offset", "2");
    SC("cont.npy", "qh.npy", "kh.npy", "--mrope-section", "4,6,6");
    SC("inter.npy", "qh.npy", "kh.npy", "--mrope-section", "4,6,6", "--mrope-interleaved");
#undef SC
    npy_array plain = {0}, x = {0}, y = {0};
    load(tpath("plain.npy"), &plain);
    const int64_t n = npy_numel(&plain);
    static const char *const same[] = {"same.npy", "same_i.npy", "temporal.npy"};
    for (int i = 0; i < 3; i++) {
        load(tpath(same[i]), &x);
        expect_close(&x, plain.data, n, 1e-5, same[i]);
        npy_free(&x);
    }
    float *masked = malloc((size_t)n * sizeof *masked);
    cr_assert(masked);
    for (int64_t i = 0; i < n; i++) { /* [1,2,SQ,SK]: key j is masked for query i when j > 2 + i */
        const int64_t qi = (i / SK) % SQ, kj = i % SK;
        masked[i] = kj > 2 + qi ? -INFINITY : ((const float *)plain.data)[i];
    }
    load(tpath("causal.npy"), &x);
    expect_close(&x, masked, n, 1e-5, "M-RoPE --causal: masked by token order");
    npy_free(&x);
    free(masked);
    /* the h and w rows matter once sections give them frequencies, differently by assignment */
    load(tpath("cont.npy"), &x);
    load(tpath("inter.npy"), &y);
    double d_plain = 0.0, d_ci = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float p = ((const float *)plain.data)[i], c = ((const float *)x.data)[i], v = ((const float *)y.data)[i];
        if (!isinf(p))
            d_plain = fmax(d_plain, fabs(c - p));
        d_ci = fmax(d_ci, fabs(c - v));
    }
    cr_expect(d_plain > 1e-2 && d_ci > 1e-2, "sections without effect: |cont - plain| %g, |cont - inter| %g", d_plain,
              d_ci);
    npy_free(&x);
    npy_free(&y);
    npy_free(&plain);
}

static void check_sinks(where device)
{
    skip_without_device(device);
    enum { HQ = 4, SQ = 7, DV = 8 };
    save_rand(ipath("q.npy"), NPY_F32, 1, HQ, SQ, 16, 41);
    save_rand(ipath("k.npy"), NPY_F32, 1, 2, 10, 16, 42);
    save_rand(ipath("v.npy"), NPY_F32, 1, 2, 10, DV, 43);
    const float sinks[HQ] = {-1.5f, 0.0f, 2.25f, 0.5f};
    const int64_t hs[] = {HQ};
    save_array(ipath("s.npy"), NPY_F32, sinks, 1, hs);
    /* keys at 3..12, queries at 0..6: rows 0..2 see no key */
    const char *base[] = {"attention", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--v", ipath("v.npy"),
                          "--causal", "--k-pos-offset", "3"};
#define ATT(...) ((const char *const[]){base[0], base[1], base[2], base[3], base[4], base[5], base[6], base[7],     \
                                        base[8], base[9], __VA_ARGS__, NULL})
    run_ok(device, ATT("--out", tpath("o.npy"), "--lse", tpath("l.npy")));
    run_ok(device, ATT("--out", tpath("os.npy"), "--lse", tpath("ls.npy"), "--sinks", ipath("s.npy")));
#undef ATT
    npy_array o = {0}, l = {0}, os = {0}, ls = {0};
    load(tpath("o.npy"), &o);
    load(tpath("l.npy"), &l);
    load(tpath("os.npy"), &os);
    load(tpath("ls.npy"), &ls);
    cr_assert_eq(npy_numel(&o), HQ * SQ * DV);
    float wo[HQ * SQ * DV], wl[HQ * SQ];
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < SQ; i++) {
            const int r = h * SQ + i;
            const float lse = ((const float *)l.data)[r];
            const bool empty = i < 3;
            cr_expect_eq(empty, isinf(lse) && lse < 0, "row h %d i %d: LSE %g", h, i, lse);
            const double e = empty ? 0.0 : exp((double)sinks[h] - lse);
            wl[r] = empty ? sinks[h] : (float)(lse + log1p(e));
            for (int d = 0; d < DV; d++)
                wo[r * DV + d] = empty ? 0.0f : (float)(((const float *)o.data)[r * DV + d] / (1.0 + e));
        }
    expect_close(&os, wo, HQ * SQ * DV, 2e-6, "O with sinks vs O / (1 + e^(s - LSE))");
    expect_close(&ls, wl, HQ * SQ, 2e-6, "LSE with sinks vs LSE + ln(1 + e^(s - LSE))");
    for (int r = 0; r < HQ * SQ; r++) /* all-masked rows: exactly 0 and s */
        if (r % SQ < 3) {
            cr_expect_eq(((const float *)ls.data)[r], sinks[r / SQ], "empty row %d: LSE %g", r,
                         ((const float *)ls.data)[r]);
            for (int d = 0; d < DV; d++)
                cr_expect_eq(((const float *)os.data)[r * DV + d], 0.0f, "empty row %d: O %g", r,
                             ((const float *)os.data)[r * DV + d]);
        }
    npy_free(&o);
    npy_free(&l);
    npy_free(&os);
    npy_free(&ls);
}

static void check_v_from_k(where device)
{
    skip_without_device(device);
    /* MLA-shaped: one key head, D 20 = 12 latent + 8 rotated at the end, V = the latent */
    save_rand(ipath("q.npy"), NPY_F32, 1, 4, 5, 20, 51);
    save_rand(ipath("k.npy"), NPY_F32, 1, 1, 13, 20, 52);
    npy_array k = {0};
    load(ipath("k.npy"), &k);
    float v[13 * 12];
    for (int j = 0; j < 13; j++)
        memcpy(v + 12 * j, (const float *)k.data + 20 * j, 12 * sizeof(float));
    const int64_t vs[] = {1, 1, 13, 12};
    save_array(ipath("v.npy"), NPY_F32, v, 4, vs);
    npy_free(&k);
    run_ok(device, ARGS("attention", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--v", ipath("v.npy"), "--out",
                        tpath("a.npy"), "--rotary-offset", "12", "--layout", "interleaved", "--causal",
                        "--q-pos-offset", "8"));
    run_ok(device, ARGS("attention", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--v-from-k", "--dv", "12",
                        "--out", tpath("b.npy"), "--rotary-offset", "12", "--layout", "interleaved", "--causal",
                        "--q-pos-offset", "8"));
    npy_array a = {0}, b = {0};
    load(tpath("a.npy"), &a);
    load(tpath("b.npy"), &b);
    cr_expect(b.ndim == 4 && b.shape[3] == 12, "O [..., %lld]", (long long)b.shape[3]);
    expect_close(&b, a.data, npy_numel(&a), 1e-6, "--v-from-k --dv 12 vs --v K[..., :12]");
    npy_free(&a);
    npy_free(&b);
}

#define CASE(name)                                                                                            \
    Test(variants, name##_ref) { check_##name(NULL); }                                                        \
    Test(variants, name##_device) { check_##name(""); }                                                       \
    Test(variants, name##_vulkan) { check_##name("vulkan"); }

CASE(softcap)
CASE(rotary_offset)
CASE(mrope)
CASE(sinks)
CASE(v_from_k)

Test(variants, errors)
{
    save_rand(ipath("q.npy"), NPY_F32, 1, 2, 3, 8, 61);
    save_rand(ipath("k.npy"), NPY_F32, 1, 1, 3, 8, 62);
    const float s3[3] = {0, 0, 0};
    const int64_t n3[] = {3};
    save_array(ipath("s3.npy"), NPY_F32, s3, 1, n3);
    const int32_t p2[4] = {0, 1, 2, 3};
    const int64_t n22[] = {2, 2};
    save_array(ipath("p2.npy"), NPY_I32, p2, 2, n22);
    const char *q = ipath("q.npy"), *k = ipath("k.npy"), *o = tpath("o.npy");
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--softcap", "-1"), 2, "--softcap", NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--rotary-offset", "7"), 1, "rotary", NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--rotary-dim", "4", "--rotary-offset", "6"), 1,
                 "rotary", NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--mrope-section", "1,1"), 2, "--mrope-section",
                 NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--mrope-section", "1,1,1"), 1, "section", NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--mrope-interleaved"), 2, "--mrope-section", NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--mrope-section", "2,1,1", "--q-positions",
                      ipath("p2.npy")),
                 1, "--q-positions", NULL);
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--sinks", ipath("s3.npy")), 2, "--sinks", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v-from-k", "--dv", "4", "--out", o, "--sinks",
                      ipath("s3.npy")), 1,
                 "sinks", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v-from-k", "--dv", "9", "--out", o), 2, "--dv 9", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", k, "--dv", "4", "--out", o), 2, "--dv", NULL);
}
