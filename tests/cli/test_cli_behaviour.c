/* Behaviour of the `ropeqk` command: help and version, exit codes (0 ok, 1 runtime, 2 usage,
 * 3 check failed), messages naming the flag or file, no output file on any error, and the check
 * and demo subcommands. Tests that need OpenCL skip when there is no platform; the scalar path
 * (--device ref) always runs. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "npy.h"
#include "ropeqk.h"

#define VEC DATA_DIR "/vectors/llama_interleaved"
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

#include "cli_fixture.h"
#include "cli_files.h"

/* Expects exit status `want`, `needle` in stderr, and no file left in the temporary folder. */
static void expect_fail(const char *const *args, int want, const char *needle)
{
    expect_error(args, want, needle, NULL);
}

static void save_f32(const char *path, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    npy_array a = {.dtype = NPY_F32, .ndim = 4, .shape = {d0, d1, d2, d3}};
    a.nbytes = (size_t)(d0 * d1 * d2 * d3) * 4;
    float *f = malloc(a.nbytes);
    for (size_t i = 0; i < a.nbytes / 4; i++)
        f[i] = (float)((i * 37) % 11) - 5.0f;
    a.data = f;
    char err[256];
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    free(f);
}

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 300);

Test(cli, help_and_version)
{
    cli_result r = run(ARGS("--help"));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: ropeqk"), "%s", r.out);
    cli_result_free(&r);
    r = run(ARGS("--version"));
    cr_expect_eq(r.status, 0);
    char want[64];
    snprintf(want, sizeof want, "ropeqk %s", ropeqk_version());
    cr_expect(strstr(r.out, want), "version output '%s' lacks '%s'", r.out, want);
    cli_result_free(&r);
    const char *subs[] = {"devices", "scores", "attention", "check", "demo", "config"};
    for (int i = 0; i < 6; i++) {
        r = run(ARGS(subs[i], "--help"));
        cr_expect_eq(r.status, 0, "%s --help: %d", subs[i], r.status);
        char u[64];
        snprintf(u, sizeof u, "usage: ropeqk %s", subs[i]);
        cr_expect(strstr(r.out, u), "%s --help: %s", subs[i], r.out);
        cr_expect(strstr(r.out, "--help"), "%s --help lists no options", subs[i]);
        cli_result_free(&r);
    }
    r = run(ARGS("scores", "--help"));
    cr_expect(strstr(r.out, "(default 10000)") && strstr(r.out, "(default interleaved)") &&
                  strstr(r.out, "1/sqrt(D)"),
              "scores --help lacks defaults: %s", r.out);
    cli_result_free(&r);
}

Test(cli, usage_errors)
{
    expect_fail(ARGS(NULL), 2, "usage");
    expect_fail(ARGS("frobnicate"), 2, "frobnicate");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--bogus"), 2,
                "--bogus");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy"), 2, "--out");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--rotary-dim",
                     "12abc"),
                2, "--rotary-dim");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--rotary-dim",
                     "7"),
                2, "--rotary-dim");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--base", "1e999"),
                2, "--base");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--base", " 5"),
                2, "--base");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--scale", "x"), 2,
                "--scale");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--q-pos-offset",
                     "99999999999999999999"),
                2, "--q-pos-offset");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--layout", "neox"),
                2, "--layout");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("o.npy"), "--causal=yes"), 2,
                "--causal");
    expect_fail(ARGS("scores", "--q", "--k", VEC "/k.npy", "--out", tpath("o.npy")), 2, "--q");
    expect_fail(ARGS("check", "--cases", "-3"), 2, "--cases");
    expect_fail(ARGS("check", "--device", "ref"), 2, "ref");
    expect_fail(ARGS("demo", "--plot", tpath("picture.gif")), 2, "picture.gif");
    expect_fail(ARGS("demo", "--tokens", "0"), 2, "--tokens");
    expect_fail(ARGS("demo", "--attention-tokens", "-1"), 2, "--attention-tokens");
    expect_fail(ARGS("demo", "--check-rows", "0"), 2, "--check-rows");
}

Test(cli, file_errors)
{
    const char *o = tpath("o.npy");
    expect_fail(ARGS("scores", "--q", ipath("missing.npy"), "--k", VEC "/k.npy", "--out", o, "--device", "ref"), 1,
                "missing.npy");
    /* not a .npy file at all, an empty file, a truncated one */
    cr_assert(write_bytes(ipath("garbage.npy"), "hello, world\n", 13));
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", ipath("garbage.npy"), "--out", o, "--device", "ref"), 1,
                "garbage.npy");
    cr_assert(write_bytes(ipath("empty.npy"), "", 0));
    expect_fail(ARGS("scores", "--q", ipath("empty.npy"), "--k", VEC "/k.npy", "--out", o, "--device", "ref"), 1,
                "empty.npy");
    static const char head[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': "
                               "(1, 4, 6, 32), }";
    char trunc[128 + 40];
    memset(trunc, ' ', sizeof trunc);
    memcpy(trunc, head, sizeof head - 1);
    trunc[127] = '\n';
    cr_assert(write_bytes(ipath("trunc.npy"), trunc, sizeof trunc));
    expect_fail(ARGS("scores", "--q", ipath("trunc.npy"), "--k", VEC "/k.npy", "--out", o, "--device", "ref"), 1,
                "trunc.npy");
    /* Fortran order */
    char fort[128 + 16];
    static const char fhead[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': True, 'shape': "
                                "(1, 1, 2, 2), }";
    memset(fort, 0, sizeof fort);
    memset(fort, ' ', 128);
    memcpy(fort, fhead, sizeof fhead - 1);
    fort[127] = '\n';
    cr_assert(write_bytes(ipath("fortran.npy"), fort, sizeof fort));
    expect_fail(ARGS("scores", "--q", ipath("fortran.npy"), "--k", ipath("fortran.npy"), "--out", o, "--device",
                     "ref"),
                1, "fortran.npy");
    /* wrong dtype (the f64 expected scores), wrong rank */
    expect_fail(ARGS("scores", "--q", VEC "/expected.npy", "--k", VEC "/k.npy", "--out", o, "--device", "ref"), 1,
                "expected.npy");
    /* shapes that do not fit together: the library's message, the files named */
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", DATA_DIR "/vectors/hf_half_split_gqa_causal/k.npy",
                     "--out", o, "--device", "ref"),
                1, "q.npy");
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", o, "--rotary-dim", "64", "--device",
                     "ref"),
                1, "rotary");
    /* output folder missing: nothing written anywhere */
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", tpath("no/such/dir/o.npy"),
                     "--device", "ref"),
                1, "no/such/dir/o.npy");
}

Test(cli, position_files)
{
    const char *q = ipath("q.npy"), *k = ipath("k.npy"), *o = tpath("o.npy"), *pq = ipath("pq.npy"),
               *pk = ipath("pk.npy");
    save_f32(q, 1, 2, 3, 8);
    save_f32(k, 1, 1, 4, 8);
    int64_t good_q[3] = {7, 1, 1 << 20}, good_k[4] = {0, 7, 8, 1};
    save_i64(pq, good_q, 3);
    save_i64(pk, good_k, 4);
    cli_result r = run(ARGS("scores", "--q", q, "--k", k, "--out", o, "--q-positions", pq, "--k-positions", pk,
                            "--causal", "--device", "ref", "--check"));
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "max error"), "--check prints no error: %s", r.out);
    cli_result_free(&r);
    npy_array s = {0};
    char err[256];
    cr_assert_eq(npy_load(o, &s, err, sizeof err), 0, "%s", err);
    const float *v = s.data; /* query 1 at position 1 sees keys at 0 and 1 only */
    cr_expect(v[4 + 0] > -INFINITY && v[4 + 1] == -INFINITY && v[4 + 2] == -INFINITY && v[4 + 3] > -INFINITY);
    npy_free(&s);
    remove(o);
    int64_t bad[3] = {0, (int64_t)1 << 40, 2};
    save_i64(ipath("bad.npy"), bad, 3);
    save_i64(ipath("short.npy"), good_q, 2);
    cli_result r2 = run(ARGS("scores", "--q", q, "--k", k, "--out", o, "--q-positions", ipath("bad.npy"), "--device",
                             "ref"));
    cr_expect_eq(r2.status, 1);
    cr_expect(strstr(r2.err, "bad.npy") && strstr(r2.err, "int32"), "%s", r2.err);
    cli_result_free(&r2);
    r2 = run(ARGS("scores", "--q", q, "--k", k, "--out", o, "--k-positions", ipath("short.npy"), "--device", "ref"));
    cr_expect_eq(r2.status, 1);
    cr_expect(strstr(r2.err, "short.npy"), "%s", r2.err);
    cli_result_free(&r2);
    cr_expect(!file_exists(o), "output written on error");
    cr_expect_eq(dir_entries(tmp), 0, "a temporary file was left");
}

Test(cli, device_selection)
{
    const char *o = tpath("o.npy");
    /* no such device: runtime error whether or not OpenCL exists */
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", o, "--device", "no-such-device-xyz"),
                1, NULL);
    expect_fail(ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", o, "--device", "97:3"), 1, NULL);
    /* ROPEQK_DEVICE=ref selects the scalar path too */
    cli_result r;
    const char *env[] = {"ROPEQK_DEVICE=ref", NULL};
    cr_assert(cli_run(&r, NULL, env, 120,
                      ARGS("scores", "--q", VEC "/q.npy", "--k", VEC "/k.npy", "--out", o, "--check")));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "scalar reference path"), "%s", r.out);
    cr_expect(file_exists(o));
    cli_result_free(&r);
    remove(o);
}

Test(cli, devices)
{
    cli_result r = run(ARGS("devices"));
    if (no_device()) {
        cr_expect_eq(r.status, 1);
        cr_expect(strstr(r.err, "no OpenCL platform") || strstr(r.err, "no Vulkan device"), "%s", r.err);
    } else if (no_opencl_platform()) { /* Vulkan devices only (or a build without OpenCL) */
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect(strstr(r.out, "vulkan:0"), "%s", r.out);
    } else {
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect(strstr(r.out, "0:0") && strstr(r.out, "default:") && strstr(r.out, "compute units") &&
                      strstr(r.out, "fp64"),
                  "%s", r.out);
    }
    cli_result_free(&r);
}

Test(cli, scores_check_on_device)
{
    if (no_device())
        cr_skip_test("no device");
    const char *o = tpath("o.npy");
    cli_result r = run(ARGS("scores", "--q", DATA_DIR "/cli/f16_input/q.npy", "--k", DATA_DIR "/cli/f16_input/k.npy",
                            "--out", o, "--layout", "half-split", "--causal", "--check"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "max error") && strstr(r.out, "mask mismatches 0") && strstr(r.out, "PASS"), "%s", r.out);
    cli_result_free(&r);
    remove(o);
}

Test(cli, check_sweep)
{
    if (no_device())
        cr_skip_test("no device");
    cli_result r = run(ARGS("check", "--cases", "20", "--seed", "12345"));
    cr_expect_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.out, "seed 12345") && strstr(r.out, "half-split") && strstr(r.out, "PASS"), "%s", r.out);
    cli_result_free(&r);
}

Test(cli, demo_small_with_png)
{
    if (no_device())
        cr_skip_test("no device");
    const char *png = tpath("demo.png");
    cli_result r = run(ARGS("demo", "--tokens", "96", "--runs", "2", "--attention-tokens", "128", "--plot", png));
    if (r.status == 1 && strstr(r.err, "libpng")) {
        cli_result_free(&r);
        cr_skip_test("built without libpng");
    }
    cr_expect_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.out, "first call") && strstr(r.out, "GFLOP/s") && strstr(r.out, "max error") &&
                  strstr(r.out, "PASS"),
              "%s", r.out);
    FILE *f = fopen(png, "rb");
    unsigned char sig[8] = {0};
    cr_assert(f, "no picture written");
    cr_expect_eq(fread(sig, 1, 8, f), 8u);
    fclose(f);
    cr_expect(memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0, "not a PNG");
    cli_result_free(&r);
    remove(png);
}

Test(cli, demo_ref_with_svg)
{
    const char *svg = tpath("demo.svg");
    cli_result r = run(ARGS("demo", "--device", "ref", "--tokens", "24", "--runs", "1", "--plot", svg));
    cr_expect_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.out, "scalar reference path") && strstr(r.out, "PASS"), "%s", r.out);
    FILE *f = fopen(svg, "rb");
    cr_assert(f, "no picture written");
    char head[64] = "";
    cr_expect(fread(head, 1, sizeof head - 1, f) > 0);
    fclose(f);
    cr_expect(strncmp(head, "<?xml", 5) == 0 && strstr(head, "<svg"), "%s", head);
    cli_result_free(&r);
    remove(svg);
}
