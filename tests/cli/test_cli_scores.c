/* `ropeqk scores` on the fixtures: tests/data/cli/<case> (written by scripts/gen_cli_fixtures.py,
 * an independent NumPy fp64 evaluation of docs/conventions.md) and tests/data/vectors/<case> (public
 * reference code). Each case runs on the scalar path (--device ref, always) and on the default OpenCL
 * device (skipped when there is no platform); the output must match expected.npy within 1e-5
 * (conventions metric, docs/conventions.md) with -inf exactly where expected. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "cli_util.h"

static void run_case(const char *set, const char *name, bool device)
{
    if (device && no_device())
        cr_skip_test("no device");
    char dir[1024], args_path[1100], tmp[512], out[640];
    snprintf(dir, sizeof dir, "%s/%s/%s", DATA_DIR, set, name);
    snprintf(args_path, sizeof args_path, "%s/args.txt", dir);
    char **flags = NULL;
    int nf = read_args(args_path, &flags);
    cr_assert(nf >= 0, "cannot read %s", args_path);
    cr_assert(tmpdir_make(tmp, sizeof tmp));
    snprintf(out, sizeof out, "%s/scores.npy", tmp);
    const char *argv[96];
    int n = 0;
    argv[n++] = "scores";
    argv[n++] = "--q";
    argv[n++] = "q.npy";
    argv[n++] = "--k";
    argv[n++] = "k.npy";
    argv[n++] = "--out";
    argv[n++] = out;
    for (int i = 0; i < nf && n < 90; i++)
        argv[n++] = flags[i];
    if (!device) {
        argv[n++] = "--device";
        argv[n++] = "ref";
    }
    argv[n] = NULL;
    cli_result r;
    cr_assert(cli_run(&r, dir, NULL, 300, argv), "cannot run " ROPEQK_EXE);
    cr_assert_eq(r.status, 0, "%s/%s: exit status %d\nstderr: %s", set, name, r.status, r.err);
    double err = 0.0;
    int64_t mism = 0;
    char msg[512] = "";
    bool ok = compare_case(dir, flags, out, &err, &mism, msg, sizeof msg);
    cr_assert(ok, "%s/%s: %s", set, name, msg);
    cr_expect_eq(mism, 0, "%s/%s: %lld mask mismatches", set, name, (long long)mism);
    cr_expect(err <= 1e-5, "%s/%s: max error %.3g > 1e-5 (%s)", set, name, err, device ? "device" : "ref");
    cli_result_free(&r);
    free_args(flags);
    tmpdir_remove(tmp);
}

#define CASE(set, name)                                                                                       \
    Test(scores_ref_##set, name) { run_case(#set, #name, false); }                                           \
    Test(scores_device_##set, name, .timeout = 300) { run_case(#set, #name, true); }

CASE(cli, interleaved)
CASE(cli, half_split_gqa_causal_partial)
CASE(cli, bshd)
CASE(cli, f16_input)
CASE(cli, positions_int64)
CASE(cli, conjugate)
CASE(cli, decode_large_pos)
CASE(cli, bf16_input)
CASE(cli, window_causal)
CASE(cli, yarn_betas_attention)
CASE(cli, dynamic_ntk_seq_len)
CASE(cli, llama3_defaults)
CASE(cli, longrope_positions)
CASE(cli, freq_factors_partial)
CASE(vectors, llama_interleaved)
CASE(vectors, hf_half_split_gqa_causal)
CASE(vectors, dense_matrix_1based)
