/* The `scores` subcommand: Q and K from .npy files, scores to a .npy file. */
#include "qk_inputs.h"
#include "clock.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int cmd_scores(int argc, char **argv)
{
    cli_qk_args a;
    const char *out_path = NULL;
    const cli_opt io[] = {
        {"--out", OPT_STR, &out_path, "FILE", "scores, .npy <f4 [B,Hq,Sq,Sk], masked = -inf (required)", 0, 0, 0,
         NULL, NULL},
    };
    cli_opt opts[CLI_QK_MAX_OPTS];
    const size_t nopts =
        cli_qk_opts(&a, io, 1, "also run the scalar path; print the max error; exit 3 if > 1e-5 (2e-3 with --math fast)", opts);
    bool help = false;
    int rc = cli_parse("scores", opts, nopts, argc, argv, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        cli_print_help(stdout, "ropeqk scores --q Q.npy --k K.npy --out S.npy [options]",
                       "S[b,h,i,j] = scale * <rope(q[b,h,i], pq[i]), rope(k[b,h/(Hq/Hkv),j], pk[j])>, in fp32\n"
                       "with fp64-accurate angles (conventions: docs/conventions.md). Frequency scaling\n"
                       "follows Hugging Face rope_scaling (yarn/longrope scores carry attention_factor^2);\n"
                       "`ropeqk config MODEL.json` prints these flags for a model. Exit status: 0 ok,\n"
                       "1 runtime error (device, file), 2 usage error, 3 --check failed.",
                       opts, nopts);
        return CLI_OK;
    }
    const char *missing = !a.q ? "--q" : !a.k ? "--k" : !out_path ? "--out" : NULL;
    if (missing) {
        cli_err("scores: %s is required (see ropeqk scores --help)", missing);
        return CLI_USAGE;
    }

    cli_qk_inputs in;
    float *out = NULL;
    cli_device dev;
    memset(&dev, 0, sizeof dev);
    rc = cli_qk_load("scores", &a, &in);
    if (rc != CLI_OK)
        goto done;
    const ropeqk_params *p = &in.p;
    int64_t B = in.qt.ne[0], Hq = in.qt.ne[1], Sq = in.qt.ne[2], Sk = in.kt.ne[2];
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Sk);
    size_t obytes = ropeqk_tensor_extent(&ot);
    if (obytes == 0 || Sq > INT64_MAX / (Sk > 0 ? Sk : 1)) {
        cli_err("scores: the scores [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] are too large", B, Hq, Sq, Sk);
        rc = CLI_RUNTIME;
        goto done;
    }
    /* Validate everything (shapes, rotary dim, positions, scaling) before opening a device. */
    rc = cli_qk_validation("scores", &a, &in, NULL,
                           ropeqk_scores_ref(p, &in.qt, NULL, &in.kt, NULL, NULL, NULL, &ot, NULL));
    if (rc != CLI_OK)
        goto done;
    out = malloc(obytes);
    if (!out) {
        cli_err("scores: out of memory for the scores (%zu bytes)", obytes);
        rc = CLI_RUNTIME;
        goto done;
    }
    rc = cli_device_open("scores", a.device, true, &dev);
    if (rc != CLI_OK)
        goto done;
    double t0 = rqs_now();
    ropeqk_status st = cli_device_scores(&dev, p, &in.qt, in.qa.data, &in.kt, in.ka.data, in.qpos, in.kpos, &ot, out);
    double t1 = rqs_now();
    if (st != ROPEQK_SUCCESS) {
        char what[800];
        snprintf(what, sizeof what, "scores: on %s", dev.name);
        cli_lib_err(what, st, dev.ctx);
        rc = CLI_RUNTIME;
        goto done;
    }
    bool check_failed = false;
    char check_line[256] = "";
    if (a.check) {
        double err = 0.0;
        int64_t mism = 0;
        st = cli_verify(p, &in.qt, in.qa.data, &in.kt, in.ka.data, in.qpos, in.kpos, &ot, out, &err, &mism);
        if (st != ROPEQK_SUCCESS) {
            cli_lib_err("scores: --check: scalar path", st, NULL);
            rc = CLI_RUNTIME;
            goto done;
        }
        const double tol = in.p.math == ROPEQK_MATH_FAST ? CLI_FAST_TOLERANCE : CLI_TOLERANCE;
        check_failed = !(err <= tol) || mism != 0;
        snprintf(check_line, sizeof check_line,
                 "check: max error %.3g (conventions metric, tolerance %g), mask mismatches %" PRId64 ": %s\n", err,
                 tol, mism, check_failed ? "FAIL" : "PASS");
    }
    const int64_t oshape[4] = {B, Hq, Sq, Sk};
    rc = cli_save_f32("scores", "--out", out_path, out, 4, oshape);
    if (rc != CLI_OK)
        goto done;
    const int64_t *qs = in.qa.shape, *ks = in.ka.shape;
    printf("scores: Q [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] %s, K [%" PRId64 ",%" PRId64 ",%" PRId64
           ",%" PRId64 "] %s (%s) -> %s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] f32 on %s, %.3f ms\n",
           qs[0], qs[1], qs[2], qs[3], cli_npy_dtype_str(&in.qa), ks[0], ks[1], ks[2], ks[3],
           cli_npy_dtype_str(&in.ka), in.bshd ? "bshd" : "bhsd", out_path, B, Hq, Sq, Sk, dev.name, 1e3 * (t1 - t0));
    cli_qk_print_rope(&in, &a);
    fputs(check_line, stdout);
    rc = check_failed ? CLI_CHECK_FAILED : CLI_OK;
    if (check_failed)
        cli_err("scores: --check failed: the result (written to %s) disagrees with the scalar path", out_path);
done:
    cli_device_close(&dev);
    cli_qk_free(&in);
    free(out);
    return rc;
}
