/* `ropeqk scores` frequency-scaling flags, --window and --dtype bf16: usage errors (exit 2, naming
 * the flag), factor-list files (length mismatches name the file and both lengths), bf16 and window
 * runs on the scalar path and the device, the help texts, and `ropeqk check` drawing scaling
 * variants, windows and bf16 inputs. (The numeric fixtures are in tests/data/cli, run by
 * test_cli_scores.c.) */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "npy.h"

#define VEC DATA_DIR "/vectors/llama_interleaved" /* q [1,4,6,32], k [1,4,6,32] f32 */
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define SC "scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy")

#include "cli_fixture.h"

static void save_list(const char *path, npy_dtype dt, int64_t n, double first)
{
    npy_array a = {.dtype = dt, .ndim = 1, .shape = {n}};
    a.nbytes = (size_t)n * npy_dtype_size(dt);
    unsigned char *b = malloc(a.nbytes);
    for (int64_t i = 0; i < n; i++) {
        double v = i == 0 ? first : 1.0 + 0.5 * (double)i;
        if (dt == NPY_F32) {
            float f = (float)v;
            memcpy(b + 4 * i, &f, 4);
        } else if (dt == NPY_F64) {
            memcpy(b + 8 * i, &v, 8);
        } else { /* I64 */
            int64_t x = (int64_t)v;
            memcpy(b + 8 * i, &x, 8);
        }
    }
    a.data = b;
    char err[256];
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    free(b);
}

TestSuite(scaling_flags, .init = setup, .fini = teardown, .timeout = 300);

Test(scaling_flags, usage_errors)
{
    expect_error(ARGS(SC, "--scaling", "yarn"), 2, "--scaling yarn needs --factor", NULL);
    expect_error(ARGS(SC, "--scaling", "yarn", "--factor", "4"), 2, "--scaling yarn needs --original-max-pos", NULL);
    expect_error(ARGS(SC, "--scaling", "linear"), 2, "--scaling linear needs --factor", NULL);
    expect_error(ARGS(SC, "--scaling", "dynamic", "--factor", "2"), 2, "--scaling dynamic needs --original-max-pos",
                NULL);
    expect_error(ARGS(SC, "--scaling", "longrope", "--original-max-pos", "4096"), 2,
                "--scaling longrope needs --long-factors", NULL);
    expect_error(ARGS(SC, "--scaling", "linear", "--factor", "2", "--beta-fast", "16"), 2,
                "--beta-fast only applies to --scaling yarn", NULL);
    expect_error(ARGS(SC, "--factor", "2"), 2, "--factor only applies to --scaling", "no --scaling given");
    expect_error(ARGS(SC, "--scaling", "yarn", "--factor", "2", "--original-max-pos", "64", "--seq-len", "9"), 2,
                "--seq-len only applies to --scaling dynamic or longrope", NULL);
    expect_error(ARGS(SC, "--scaling", "llama3", "--long-factors", "x.npy"), 2,
                "--long-factors only applies to --scaling longrope", NULL);
    expect_error(ARGS(SC, "--scaling", "linear", "--factor", "2", "--low-freq-factor", "2"), 2,
                "--low-freq-factor only applies to --scaling llama3", NULL);
    expect_error(ARGS(SC, "--scaling", "llama3", "--attention-factor", "2"), 2,
                "--attention-factor only applies to --scaling yarn or longrope", NULL);
    expect_error(ARGS(SC, "--scaling", "llama3", "--low-freq-factor", "4", "--high-freq-factor", "2"), 2,
                "--low-freq-factor", "--high-freq-factor");
    expect_error(ARGS(SC, "--scaling", "dynamic", "--factor", "2", "--original-max-pos", "64", "--q-positions",
                     ipath("p.npy")),
                2, "--seq-len", NULL);
    expect_error(ARGS(SC, "--scaling", "ntk"), 2, "--scaling", "yarn");
    expect_error(ARGS(SC, "--scaling", "linear", "--factor", "0"), 2, "--factor", "> 0");
    expect_error(ARGS(SC, "--scaling", "linear", "--factor", "-1"), 2, "--factor", NULL);
    expect_error(ARGS(SC, "--scaling", "yarn", "--factor", "2", "--original-max-pos", "1.5"), 2, "--original-max-pos",
                NULL);
    expect_error(ARGS(SC, "--scaling", "yarn", "--factor", "2", "--original-max-pos", "64", "--beta-slow", "nan"), 2,
                "--beta-slow", NULL);
    expect_error(ARGS(SC, "--window", "-1"), 2, "--window", NULL);
    expect_error(ARGS(SC, "--window", "3x"), 2, "--window", NULL);
    expect_error(ARGS(SC, "--dtype", "f64"), 2, "--dtype", "bf16");
    /* usage errors come before any file is read */
    expect_error(ARGS("scores", "--q", ipath("none.npy"), "--k", ipath("none.npy"), "--out", tpath("o.npy"),
                     "--scaling", "yarn"),
                2, "--scaling yarn needs --factor", NULL);
}

Test(scaling_flags, factor_files)
{
    const char *l16 = ipath("l16.npy"), *s16 = ipath("s16.npy"), *l12 = ipath("l12.npy"), *bad = ipath("bad.npy"),
               *ints = ipath("ints.npy"), *f8 = ipath("f8.npy");
    save_list(l16, NPY_F64, 16, 4.0);
    save_list(s16, NPY_F32, 16, 1.0);
    save_list(l12, NPY_F64, 12, 1.0);
    save_list(f8, NPY_F32, 8, 1.0);
    save_list(bad, NPY_F64, 16, -1.0);
    save_list(ints, NPY_I64, 16, 1.0);
    /* D = 32 -> R/2 = 16; with --rotary-dim 16, 8 */
    expect_error(ARGS(SC, "--scaling", "longrope", "--original-max-pos", "64", "--long-factors", l12,
                     "--short-factors", s16, "--device", "ref"),
                2, "l12.npy has 12 factors", "R/2 = 16");
    expect_error(ARGS(SC, "--scaling", "longrope", "--original-max-pos", "64", "--long-factors", l16,
                     "--short-factors", s16, "--rotary-dim", "16", "--device", "ref"),
                2, "l16.npy has 16 factors", "--rotary-dim) needs R/2 = 8");
    expect_error(ARGS(SC, "--freq-factors", f8, "--device", "ref"), 2, "f8.npy has 8 factors", "R/2 = 16");
    expect_error(ARGS(SC, "--freq-factors", bad, "--device", "ref"), 1, "bad.npy", "index 0");
    expect_error(ARGS(SC, "--freq-factors", ints, "--device", "ref"), 1, "ints.npy", "'<i8'");
    expect_error(ARGS(SC, "--freq-factors", ipath("missing.npy"), "--device", "ref"), 1, "missing.npy", NULL);
    expect_error(ARGS(SC, "--freq-factors", VEC "/q.npy", "--device", "ref"), 1, "q.npy", "1-D");
    /* the good files: longrope with f64 long / f32 short lists, freq_factors with --rotary-dim */
    cli_result r = run(ARGS(SC, "--scaling", "longrope", "--original-max-pos", "4", "--long-factors", l16,
                            "--short-factors", s16, "--factor", "8", "--device", "ref", "--check"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "longrope(s=8,L0=4)") && strstr(r.out, "attention factor 1.")
                  && strstr(r.out, "PASS"), "%s", r.out);
    cli_result_free(&r);
    r = run(ARGS(SC, "--rotary-dim", "16", "--freq-factors", f8, "--scaling", "yarn", "--factor", "4",
                 "--original-max-pos", "16", "--device", "ref", "--check"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "freq_factors") && strstr(r.out, "PASS"), "%s", r.out);
    cli_result_free(&r);
}

/* f32 [1,H,S,D] values -> raw bf16 bits file */
static void save_bf16(const char *path, int64_t H, int64_t S, int64_t D)
{
    npy_array a = {.dtype = NPY_U16, .ndim = 4, .shape = {1, H, S, D}};
    size_t n = (size_t)(H * S * D);
    a.nbytes = n * 2;
    uint16_t *b = malloc(a.nbytes);
    for (size_t i = 0; i < n; i++) {
        float f = (float)sin(0.37 * (double)i + 0.1) * 3.0f;
        uint32_t x;
        memcpy(&x, &f, 4);
        b[i] = (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    }
    a.data = b;
    char err[256];
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    free(b);
}

Test(scaling_flags, bf16_and_window)
{
    const char *q = ipath("q.npy"), *k = ipath("k.npy"), *o = tpath("o.npy");
    save_bf16(q, 4, 5, 64);
    save_bf16(k, 2, 7, 64);
    /* '<u2' needs --dtype bf16; --dtype bf16 needs '<u2' */
    expect_error(ARGS("scores", "--q", q, "--k", k, "--out", o, "--device", "ref"), 1, "--dtype bf16", "q.npy");
    expect_error(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", o, "--dtype", "bf16", "--device",
                     "ref"),
                1, "--dtype bf16", "'<f4'");
    expect_error(ARGS("scores", "--q", q, "--k", VEC "/k.npy", "--out", o, "--dtype", "bf16", "--device", "ref"), 1,
                "--dtype bf16", "k.npy");
    bool dev = !no_device();
    for (int d = 0; d < (dev ? 2 : 1); d++) {
        /* the scalar path (ROPEQK_DEVICE=ref), then the default device */
        const char *env[] = {d ? "ROPEQK_DEVICE=" : "ROPEQK_DEVICE=ref", NULL};
        cli_result r;
        cr_assert(cli_run(&r, NULL, env, 300,
                          ARGS("scores", "--q", q, "--k", k, "--out", o, "--dtype", "bf16", "--layout", "half-split",
                               "--causal", "--window", "3", "--q-pos-offset", "2", "--scaling", "yarn", "--factor",
                               "8", "--original-max-pos", "2048", "--check")));
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect(d ? !strstr(r.out, "scalar reference path (host") : strstr(r.out, "scalar reference path") != NULL,
                  "%s", r.out);
        cr_expect(strstr(r.out, "bf16") && strstr(r.out, "sliding window 3") && strstr(r.out, "mask mismatches 0") &&
                      strstr(r.out, "PASS"),
                  "%s", r.out);
        cli_result_free(&r);
        /* query i at position 2 + i sees keys j with 0 <= (2 + i) - j < 3 */
        npy_array s = {0};
        char err[256];
        cr_assert_eq(npy_load(o, &s, err, sizeof err), 0, "%s", err);
        const float *v = s.data;
        for (int h = 0; h < 4; h++)
            for (int i = 0; i < 5; i++)
                for (int j = 0; j < 7; j++) {
                    int diff = 2 + i - j;
                    bool masked = diff < 0 || diff >= 3;
                    float x = v[(h * 5 + i) * 7 + j];
                    cr_expect(masked ? isinf(x) && x < 0 : isfinite(x), "h%d i%d j%d: %g", h, i, j, (double)x);
                }
        npy_free(&s);
        remove(o);
    }
}

Test(scaling_flags, help_texts)
{
    cli_result r = run(ARGS("scores", "--help"));
    cr_expect_eq(r.status, 0);
    const char *want[] = {"--scaling none|linear|dynamic|yarn|llama3|longrope", "(default none)", "--factor S",
                          "--original-max-pos L0", "--seq-len L", "--beta-fast B", "(default 32)", "--beta-slow B",
                          "(default 1)", "--attention-factor A", "0.1 ln s + 1", "--low-freq-factor F",
                          "--high-freq-factor F", "(default 4)", "--long-factors FILE", "--short-factors FILE",
                          "--freq-factors FILE", "--window W", "(default 0 = off)", "--dtype auto|bf16",
                          "(default auto)", "ropeqk config"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(r.out, want[i]), "scores --help lacks '%s':\n%s", want[i], r.out);
    cli_result_free(&r);
    r = run(ARGS("check", "--help"));
    cr_expect(strstr(r.out, "bf16") && strstr(r.out, "longrope") && strstr(r.out, "window"), "%s", r.out);
    cli_result_free(&r);
    r = run(ARGS("--help"));
    cr_expect(strstr(r.out, "config"), "%s", r.out);
    cli_result_free(&r);
}

Test(scaling_flags, check_draws_scaling_windows_bf16)
{
    if (no_device())
        cr_skip_test("no device");
    cli_result r = run(ARGS("check", "--cases", "18", "--seed", "7", "--verbose"));
    cr_expect_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    const char *want[] = {" linear(", " dynamic(", " yarn(", " llama3", " longrope(", "freq_factors", "window=",
                          " bf16 ", "PASS"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(r.out, want[i]), "check output lacks '%s':\n%s", want[i], r.out);
    cli_result_free(&r);
}
