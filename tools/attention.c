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
    const char *v_path = NULL, *out_path = NULL, *lse_path = NULL, *sinks_path = NULL;
    int v_from_k = 0;
    int64_t dv_arg = 0;
    const cli_opt io[] = {
        {"--v", OPT_STR, &v_path, "FILE",
         "values, .npy <f4/<f2 [B,Hkv,Sk,Dv] (Dv may differ from D) (required unless --v-from-k)", 0, 0, 0, NULL,
         NULL},
        {"--v-from-k", OPT_FLAG, &v_from_k, NULL,
         "V is K's first --dv dims, read from K's data (MLA's absorbed decode) (default off)", 0, 0, 0, NULL, NULL},
        {"--dv", OPT_I64, &dv_arg, "N", "with --v-from-k: V's head dim, <= D", 0, 1, 65536, NULL, NULL},
        {"--sinks", OPT_STR, &sinks_path, "FILE",
         "attention sinks: one logit per query head, .npy <f4 [Hq], in the softmax's denominator (gpt-oss) "
         "(default none)", 0, 0, 0, NULL, NULL},
        {"--out", OPT_STR, &out_path, "FILE", "O = softmax(S) V, .npy <f4 [B,Hq,Sq,Dv] (required)", 0, 0, 0, NULL,
         NULL},
        {"--lse", OPT_STR, &lse_path, "FILE",
         "also the rows' log-sum-exp ln sum_j exp(S), .npy <f4 [B,Hq,Sq]; -inf = fully masked (default none)", 0,
         0, 0, NULL, NULL},
    };
    cli_opt opts[CLI_QK_MAX_OPTS];
    const size_t nopts = cli_qk_opts(&a, io, sizeof io / sizeof io[0],
                                     "also run the scalar fp64 path; print the O and LSE errors; exit 3 if > 1e-5 (2e-3 with --math fast)",
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
    const char *missing = !a.q ? "--q" : !a.k ? "--k" : !v_path && !v_from_k ? "--v" : !out_path ? "--out" : NULL;
    if (missing) {
        cli_err("attention: %s is required (see ropeqk attention --help)", missing);
        return CLI_USAGE;
    }
    if (v_path && v_from_k) {
        cli_err("attention: --v and --v-from-k name V twice: give one");
        return CLI_USAGE;
    }
    if (v_from_k != (dv_arg != 0)) {
        cli_err(v_from_k ? "attention: --v-from-k needs --dv (V's head dim)" : "attention: --dv goes with --v-from-k");
        return CLI_USAGE;
    }
    if (lse_path && strcmp(lse_path, out_path) == 0) {
        cli_err("attention: --lse and --out name the same file '%s'", out_path);
        return CLI_USAGE;
    }

    cli_qk_inputs in;
    npy_array va;
    memset(&va, 0, sizeof va);
    float *o = NULL, *lse = NULL, *sinks = NULL;
    cli_device dev;
    memset(&dev, 0, sizeof dev);
    rc = cli_qk_load("attention", &a, &in);
    ropeqk_tensor vt;
    const void *vdata = NULL;
    if (rc == CLI_OK && v_from_k) { /* K's view cut to its first Dv dims: the same bytes, read-only */
        if (dv_arg > in.kt.ne[3]) {
            cli_err("attention: --dv %" PRId64 " exceeds K's head dim %" PRId64 " (--v-from-k reads K's first Dv dims)",
                    dv_arg, in.kt.ne[3]);
            rc = CLI_USAGE;
        }
        vt = in.kt;
        vt.ne[3] = dv_arg;
        vdata = in.ka.data;
    } else if (rc == CLI_OK) {
        rc = cli_load_tensor("attention", "--v", v_path, in.bshd, in.bf16, &va, &vt);
        vdata = va.data;
    }
    if (rc == CLI_OK && sinks_path) {
        npy_array sa;
        memset(&sa, 0, sizeof sa);
        rc = cli_load_npy("attention", "--sinks", sinks_path, &sa) == CLI_OK ? CLI_OK : CLI_RUNTIME;
        if (rc == CLI_OK && (sa.dtype != NPY_F32 || sa.ndim != 1 || sa.shape[0] != in.qt.ne[1])) {
            char shp[160];
            cli_shape_str(&sa, shp, sizeof shp);
            cli_err("attention: --sinks: %s: expected <f4 (%" PRId64 ",) (one logit per query head), got %s (%s)",
                    sinks_path, in.qt.ne[1], npy_dtype_descr(sa.dtype), shp);
            rc = CLI_RUNTIME;
        }
        if (rc == CLI_OK && !(sinks = malloc((size_t)in.qt.ne[1] * sizeof *sinks))) {
            cli_err("attention: --sinks: out of memory");
            rc = CLI_RUNTIME;
        }
        if (rc == CLI_OK) {
            memcpy(sinks, sa.data, (size_t)in.qt.ne[1] * sizeof *sinks);
            in.p.sinks = sinks;
            in.p.n_sinks = (int32_t)in.qt.ne[1];
        }
        npy_free(&sa);
    }
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
    if (v_from_k)
        snprintf(vs, sizeof vs, "K's first %" PRId64 " dims", dv_arg);
    else
        dims_str(&va, vs, sizeof vs);
    snprintf(vdesc, sizeof vdesc, " and V %s (%s)", v_from_k ? "--v-from-k" : v_path, vs);
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
    ropeqk_status st = cli_device_attention(&dev, p, &in.qt, in.qa.data, &in.kt, in.ka.data, &vt, vdata, in.qpos,
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
        st = cli_verify_attention(p, &in.qt, in.qa.data, &in.kt, in.ka.data, &vt, vdata, in.qpos, in.kpos, &ot, o,
                                  &lt, lse, &err, &lerr, &mism);
        if (st != ROPEQK_SUCCESS) {
            cli_lib_err("attention: --check: scalar path", st, NULL);
            rc = CLI_RUNTIME;
            goto done;
        }
        const double tol = in.p.math == ROPEQK_MATH_FAST ? CLI_FAST_TOLERANCE : CLI_TOLERANCE;
        check_failed = !(err <= tol) || !(lerr <= tol) || mism != 0;
        snprintf(check_line, sizeof check_line,
                 "check: O max error %.3g (attention metric, tolerance %g), LSE max relative error %.3g (tolerance "
                 "%g), row mismatches %" PRId64 ": %s\n",
                 err, tol, lerr, tol, mism, check_failed ? "FAIL" : "PASS");
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
    free(sinks);
    free(o);
    free(lse);
    return rc;
}
