/* The `attention` subcommand: Q, K and V from .npy files, O = softmax(S) V (and optionally the
 * row LSEs) to .npy files, S exactly as `scores` computes it but never materialised. */
#include "qk_inputs.h"
#include "clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void dims_str(const npy_array *a, char *buf, size_t len)
{
    char s[160];
    cli_shape_str(a, s, sizeof s);
    snprintf(buf, len, "[%s] %s", s, cli_npy_dtype_str(a));
}

int cmd_attention(int argc, char **argv)
{
    cli_qk_args a;
    const char *v_path = NULL, *out_path = NULL, *lse_path = NULL;
    const cli_opt io[] = {
        {"--v", OPT_STR, &v_path, "FILE", "values, .npy <f4/<f2 [B,Hkv,Sk,Dv] (Dv may differ from D) (required)", 0,
         0, 0, NULL, NULL},
        {"--out", OPT_STR, &out_path, "FILE", "O = softmax(S) V, .npy <f4 [B,Hq,Sq,Dv] (required)", 0, 0, 0, NULL,
         NULL},
        {"--lse", OPT_STR, &lse_path, "FILE",
         "also the rows' log-sum-exp ln sum_j exp(S), .npy <f4 [B,Hq,Sq]; -inf = fully masked (default none)", 0,
         0, 0, NULL, NULL},
    };
    cli_opt opts[CLI_QK_MAX_OPTS];
    const size_t nopts = cli_qk_opts(&a, io, sizeof io / sizeof io[0],
                                     "also run the scalar fp64 path; print the O and LSE errors; exit 3 if > 1e-5",
                                     opts);
    bool help = false;
    int rc = cli_parse("attention", opts, nopts, argc, argv, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        cli_print_help(stdout, "ropeqk attention --q Q.npy --k K.npy --v V.npy --out O.npy [--lse LSE.npy] [options]",
                       "O[b,h,i,:] = softmax_j(S[b,h,i,j]) V[b,h/(Hq/Hkv),j,:] with S exactly as `ropeqk scores`\n"
                       "computes it (RoPE, positions, scaling, scale, causal/window masks), fused: S is never\n"
                       "stored. Accumulation in f32; a fully masked row gives O = 0 and LSE = -inf. V follows\n"
                       "K's storage rules (and --format); O and LSE are f32 in [B,Hq,Sq,...] order whatever\n"
                       "--format. --check: attention metric of docs/conventions.md section 9 (O error over\n"
                       "max |V| of the key head, LSE error relative), tolerance 1e-5 each. Exit status: 0 ok,\n"
                       "1 runtime error (device, file), 2 usage error, 3 --check failed.",
                       opts, nopts);
        return CLI_OK;
    }
    const char *missing = !a.q ? "--q" : !a.k ? "--k" : !v_path ? "--v" : !out_path ? "--out" : NULL;
    if (missing) {
        cli_err("attention: %s is required (see ropeqk attention --help)", missing);
        return CLI_USAGE;
    }
    if (lse_path && strcmp(lse_path, out_path) == 0) {
        cli_err("attention: --lse and --out name the same file '%s'", out_path);
        return CLI_USAGE;
    }

    cli_qk_inputs in;
    npy_array va;
    memset(&va, 0, sizeof va);
    float *o = NULL, *lse = NULL;
    cli_device dev;
    memset(&dev, 0, sizeof dev);
    rc = cli_qk_load("attention", &a, &in);
    ropeqk_tensor vt;
    if (rc == CLI_OK)
        rc = cli_load_tensor("attention", "--v", v_path, in.bshd, in.bf16, &va, &vt);
    if (rc != CLI_OK)
        goto done;
    const ropeqk_params *p = &in.p;
    const int64_t B = in.qt.ne[0], Hq = in.qt.ne[1], Sq = in.qt.ne[2], Dv = vt.ne[3];
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Dv);
    ropeqk_tensor lt = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, 1);
    const bool want_lse = lse_path || a.check; /* --check compares the LSEs too */
    size_t obytes = ropeqk_tensor_extent(&ot), lbytes = ropeqk_tensor_extent(&lt);
    if (obytes == 0 || lbytes == 0) {
        cli_err("attention: O [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] is too large", B, Hq, Sq, Dv);
        rc = CLI_RUNTIME;
        goto done;
    }
    /* Validate everything (shapes of Q, K and V, rotary dim, positions, scaling) before opening a device. */
    char vdesc[640], vs[200];
    dims_str(&va, vs, sizeof vs);
    snprintf(vdesc, sizeof vdesc, " and V %s (%s)", v_path, vs);
    rc = cli_qk_validation("attention", &a, &in, vdesc,
                           ropeqk_attention_ref(p, &in.qt, NULL, &in.kt, NULL, &vt, NULL, in.qpos, in.kpos, &ot,
                                                NULL, want_lse ? &lt : NULL, NULL));
    if (rc != CLI_OK)
        goto done;
    o = malloc(obytes);
    lse = want_lse ? malloc(lbytes) : NULL;
    if (!o || (want_lse && !lse)) {
        cli_err("attention: out of memory for O (%zu bytes)", obytes);
        rc = CLI_RUNTIME;
        goto done;
    }
    rc = cli_device_open("attention", a.device, true, &dev);
    if (rc != CLI_OK)
        goto done;
    double t0 = rqs_now();
    ropeqk_status st = cli_device_attention(&dev, p, &in.qt, in.qa.data, &in.kt, in.ka.data, &vt, va.data, in.qpos,
                                            in.kpos, &ot, o, want_lse ? &lt : NULL, lse);
    double t1 = rqs_now();
    if (st != ROPEQK_SUCCESS) {
        char what[800];
        snprintf(what, sizeof what, "attention: on %s", dev.name);
        cli_lib_err(what, st, dev.ctx);
        rc = CLI_RUNTIME;
        goto done;
    }
    bool check_failed = false;
    char check_line[320] = "";
    if (a.check) {
        double err = 0.0, lerr = 0.0;
        int64_t mism = 0;
        st = cli_verify_attention(p, &in.qt, in.qa.data, &in.kt, in.ka.data, &vt, va.data, in.qpos, in.kpos, &ot, o,
                                  &lt, lse, &err, &lerr, &mism);
        if (st != ROPEQK_SUCCESS) {
            cli_lib_err("attention: --check: scalar path", st, NULL);
            rc = CLI_RUNTIME;
            goto done;
        }
        check_failed = !(err <= CLI_TOLERANCE) || !(lerr <= CLI_TOLERANCE) || mism != 0;
        snprintf(check_line, sizeof check_line,
                 "check: O max error %.3g (attention metric, tolerance %g), LSE max relative error %.3g (tolerance "
                 "%g), row mismatches %" PRId64 ": %s\n",
                 err, CLI_TOLERANCE, lerr, CLI_TOLERANCE, mism, check_failed ? "FAIL" : "PASS");
    }
    const int64_t oshape[4] = {B, Hq, Sq, Dv};
    rc = cli_save_f32("attention", "--out", out_path, o, 4, oshape);
    if (rc == CLI_OK && lse_path) {
        rc = cli_save_f32("attention", "--lse", lse_path, lse, 3, oshape);
        if (rc != CLI_OK)
            remove(out_path); /* both outputs or neither */
    }
    if (rc != CLI_OK)
        goto done;
    char qs[200], ks[200], lse_note[600] = "";
    dims_str(&in.qa, qs, sizeof qs);
    dims_str(&in.ka, ks, sizeof ks);
    if (lse_path)
        snprintf(lse_note, sizeof lse_note, " + %s [%" PRId64 ",%" PRId64 ",%" PRId64 "] f32", lse_path, B, Hq, Sq);
    printf("attention: Q %s, K %s, V %s (%s) -> %s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] f32%s on %s, "
           "%.3f ms\n",
           qs, ks, vs, in.bshd ? "bshd" : "bhsd", out_path, B, Hq, Sq, Dv, lse_note, dev.name, 1e3 * (t1 - t0));
    cli_qk_print_rope(&in, &a);
    fputs(check_line, stdout);
    rc = check_failed ? CLI_CHECK_FAILED : CLI_OK;
    if (check_failed)
        cli_err("attention: --check failed: the result (written to %s) disagrees with the scalar path", out_path);
done:
    cli_device_close(&dev);
    cli_qk_free(&in);
    npy_free(&va);
    free(o);
    free(lse);
    return rc;
}
