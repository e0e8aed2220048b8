/* The `scores` subcommand: Q and K from .npy files, scores to a .npy file. */
#include "cli.h"
#include "npy.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const layout_names[] = {"interleaved", "half-split", NULL};
static const char *const format_names[] = {"bhsd", "bshd", NULL};
static const char *const dtype_names[] = {"auto", "bf16", NULL};

typedef struct {
    const char *q, *k, *out, *q_pos, *k_pos, *device;
    int layout, format, causal, conjugate, check, dtype;
    double base, scale;
    int64_t rotary_dim, q_off, k_off, window;
    cli_scaling_args sc;
} scores_args;

static void shape_str(const npy_array *a, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < a->ndim; i++) {
        int w = snprintf(buf + used, len - used, "%s%" PRId64, i ? "," : "", a->shape[i]);
        if (w < 0 || (size_t)w >= len - used)
            return;
        used += (size_t)w;
    }
}

/* Loads Q or K: 4-D, f32 or f16 (or raw bf16 bits in '<u2' with --dtype bf16), C order (the npy
 * module rejects Fortran order). */
static int load_qk(const char *flag, const char *path, bool bshd, bool bf16, npy_array *a, ropeqk_tensor *t)
{
    char err[512];
    if (npy_load(path, a, err, sizeof err) != 0) {
        cli_err("scores: %s: %s", flag, err);
        return CLI_RUNTIME;
    }
    char shp[160];
    shape_str(a, shp, sizeof shp);
    if (bf16 && a->dtype != NPY_U16) {
        cli_err("scores: %s: %s: dtype '%s', but --dtype bf16 reads raw bfloat16 bits stored as '<u2'", flag, path,
                npy_dtype_descr(a->dtype));
        return CLI_RUNTIME;
    }
    if (!bf16 && a->dtype == NPY_U16) {
        cli_err("scores: %s: %s: dtype '<u2': if these are raw bfloat16 bits, pass --dtype bf16", flag, path);
        return CLI_RUNTIME;
    }
    if (a->dtype != NPY_F32 && a->dtype != NPY_F16 && a->dtype != NPY_U16) {
        cli_err("scores: %s: %s: dtype '%s' is not supported (need '<f4' or '<f2', or '<u2' with --dtype bf16)", flag,
                path, npy_dtype_descr(a->dtype));
        return CLI_RUNTIME;
    }
    if (a->ndim != 4) {
        cli_err("scores: %s: %s: expected 4 dimensions %s, got shape (%s)", flag, path,
                bshd ? "[B,S,H,D] (--format bshd)" : "[B,H,S,D] (--format bhsd)", shp);
        return CLI_RUNTIME;
    }
    for (int i = 0; i < 4; i++)
        if (a->shape[i] < 1) {
            cli_err("scores: %s: %s: empty dimension in shape (%s)", flag, path, shp);
            return CLI_RUNTIME;
        }
    ropeqk_dtype dt = a->dtype == NPY_F32 ? ROPEQK_F32 : a->dtype == NPY_F16 ? ROPEQK_F16 : ROPEQK_BF16;
    const int64_t *s = a->shape;
    *t = bshd ? ropeqk_tensor_bshd(dt, s[0], s[1], s[2], s[3]) : ropeqk_tensor_bhsd(dt, s[0], s[1], s[2], s[3]);
    size_t ext = ropeqk_tensor_extent(t);
    if (ext == 0 || ext != a->nbytes) {
        cli_err("scores: %s: %s: shape (%s) is too large", flag, path, shp);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* Loads a per-token position file: 1-D int32 or int64 of n entries, values within int32. */
static int load_positions(const char *flag, const char *path, int64_t n, const char *what, int32_t **out)
{
    char err[512];
    npy_array a;
    if (npy_load(path, &a, err, sizeof err) != 0) {
        cli_err("scores: %s: %s", flag, err);
        return CLI_RUNTIME;
    }
    int rc = CLI_RUNTIME;
    char shp[160];
    shape_str(&a, shp, sizeof shp);
    if (a.dtype != NPY_I32 && a.dtype != NPY_I64) {
        cli_err("scores: %s: %s: dtype '%s' is not supported (need '<i4' or '<i8')", flag, path,
                npy_dtype_descr(a.dtype));
    } else if (a.ndim != 1 || a.shape[0] != n) {
        cli_err("scores: %s: %s: expected shape (%" PRId64 ",) (one position per %s row), got (%s)", flag, path,
                n, what, shp);
    } else if (!(*out = malloc((size_t)n * sizeof(int32_t)))) {
        cli_err("scores: %s: %s: out of memory", flag, path);
    } else {
        rc = CLI_OK;
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            if (a.dtype == NPY_I32) {
                int32_t x;
                memcpy(&x, (const char *)a.data + 4 * i, 4);
                v = x;
            } else {
                memcpy(&v, (const char *)a.data + 8 * i, 8);
            }
            if (v < INT32_MIN || v > INT32_MAX) {
                cli_err("scores: %s: %s: position %" PRId64 " at index %" PRId64 " does not fit int32", flag,
                        path, v, i);
                free(*out);
                *out = NULL;
                rc = CLI_RUNTIME;
                break;
            }
            (*out)[i] = (int32_t)v;
        }
    }
    npy_free(&a);
    return rc;
}

/* The options of `scores`: the inputs and RoPE parameters, the scaling flags, then device and check. */
static size_t scores_opts(scores_args *a, cli_opt *opts)
{
    const cli_opt first[] = {
        {"--q", OPT_STR, &a->q, "FILE", "queries, .npy <f4/<f2 [B,Hq,Sq,D] (required)", 0, 0, 0, NULL, NULL},
        {"--k", OPT_STR, &a->k, "FILE", "keys, .npy <f4/<f2 [B,Hkv,Sk,D] (required)", 0, 0, 0, NULL, NULL},
        {"--out", OPT_STR, &a->out, "FILE", "scores, .npy <f4 [B,Hq,Sq,Sk], masked = -inf (required)", 0, 0, 0,
         NULL, NULL},
        {"--format", OPT_CHOICE, &a->format, NULL, "memory order of Q and K files (default bhsd)", 0, 0, 0,
         format_names, NULL},
        {"--dtype", OPT_CHOICE, &a->dtype, NULL,
         "Q/K storage: auto = from the files (<f4, <f2); bf16 = raw bfloat16 bits in <u2 files (default auto)", 0, 0,
         0, dtype_names, NULL},
        {"--layout", OPT_CHOICE, &a->layout, NULL, "rotary pairs: (2i,2i+1) or (i,i+R/2) (default interleaved)", 0,
         0, 0, layout_names, NULL},
        {"--base", OPT_F64, &a->base, "F", "theta base (default 10000)", OPT_POSITIVE, 0, 0, NULL, NULL},
        {"--rotary-dim", OPT_I64, &a->rotary_dim, "N", "rotated dims R, even, <= D (default D)", OPT_EVEN, 2, 65536,
         NULL, NULL},
        {"--q-pos-offset", OPT_I64, &a->q_off, "N", "query positions are N + row (default 0)", 0, INT32_MIN,
         INT32_MAX, NULL, NULL},
        {"--k-pos-offset", OPT_I64, &a->k_off, "N", "key positions are N + row (default 0)", 0, INT32_MIN,
         INT32_MAX, NULL, NULL},
        {"--q-positions", OPT_STR, &a->q_pos, "FILE",
         "per-row query positions, .npy <i4/<i8 [Sq] (overrides offset)", 0, 0, 0, NULL, NULL},
        {"--k-positions", OPT_STR, &a->k_pos, "FILE", "per-row key positions, .npy <i4/<i8 [Sk] (overrides offset)",
         0, 0, 0, NULL, NULL},
        {"--scale", OPT_F64, &a->scale, "F", "score scale (default 1/sqrt(D))", OPT_NONZERO, 0, 0, NULL, NULL},
        {"--causal", OPT_FLAG, &a->causal, NULL, "mask (-inf) where key position > query position (default off)", 0,
         0, 0, NULL, NULL},
        {"--conjugate", OPT_FLAG, &a->conjugate, NULL, "rotate by -angle (inverse rotation) (default off)", 0, 0, 0,
         NULL, NULL},
    };
    const cli_opt last[] = {
        {"--device", OPT_STR, &a->device, "SPEC", CLI_DEVICE_HELP, 0, 0, 0, NULL, NULL},
        {"--check", OPT_FLAG, &a->check, NULL, "also run the scalar path; print the max error; exit 3 if > 1e-5", 0,
         0, 0, NULL, NULL},
    };
    size_t n = sizeof first / sizeof first[0];
    memcpy(opts, first, sizeof first);
    cli_scaling_rows(&a->sc, &a->window, opts + n);
    n += CLI_SCALING_ROWS;
    memcpy(opts + n, last, sizeof last);
    return n + sizeof last / sizeof last[0];
}

#define SCORES_MAX_OPTS 40

static const char *dtype_str(const npy_array *a)
{
    return a->dtype == NPY_U16 ? "bf16" : npy_dtype_descr(a->dtype);
}

int cmd_scores(int argc, char **argv)
{
    scores_args a;
    memset(&a, 0, sizeof a);
    a.base = 10000.0;
    cli_opt opts[SCORES_MAX_OPTS];
    const size_t nopts = scores_opts(&a, opts);
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
    const char *missing = !a.q ? "--q" : !a.k ? "--k" : !a.out ? "--out" : NULL;
    if (missing) {
        cli_err("scores: %s is required (see ropeqk scores --help)", missing);
        return CLI_USAGE;
    }

    rc = cli_scaling_check("scores", &a.sc, a.q_pos || a.k_pos); /* usage errors before any file */
    if (rc != CLI_OK)
        return rc;

    bool bshd = a.format == 1, bf16 = a.dtype == 1;
    npy_array qa, ka;
    memset(&qa, 0, sizeof qa);
    memset(&ka, 0, sizeof ka);
    int32_t *qpos = NULL, *kpos = NULL;
    float *out = NULL;
    cli_device dev;
    memset(&dev, 0, sizeof dev);
    cli_scaling_lists lists;
    memset(&lists, 0, sizeof lists);
    ropeqk_params p;
    ropeqk_default_params(&p);
    ropeqk_tensor qt, kt;
    rc = load_qk("--q", a.q, bshd, bf16, &qa, &qt);
    if (rc == CLI_OK)
        rc = load_qk("--k", a.k, bshd, bf16, &ka, &kt);
    /* the scaling flags are checked once R is known (from --rotary-dim or D), before position files */
    if (rc == CLI_OK)
        rc = cli_scaling_build("scores", &a.sc, a.rotary_dim ? a.rotary_dim : qt.ne[3], a.rotary_dim != 0,
                               a.q_pos || a.k_pos, &p.scaling, &lists);
    if (rc == CLI_OK && a.q_pos)
        rc = load_positions("--q-positions", a.q_pos, qt.ne[2], "query", &qpos);
    if (rc == CLI_OK && a.k_pos)
        rc = load_positions("--k-positions", a.k_pos, kt.ne[2], "key", &kpos);
    if (rc != CLI_OK)
        goto done;

    p.layout = a.layout == 1 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    p.rotary_dim = (int32_t)a.rotary_dim;
    p.base = a.base;
    p.scale = a.scale;
    p.causal = a.causal;
    p.conjugate = a.conjugate;
    p.q_pos_offset = a.q_pos ? 0 : a.q_off;
    p.k_pos_offset = a.k_pos ? 0 : a.k_off;
    p.window = a.window;

    int64_t B = qt.ne[0], Hq = qt.ne[1], Sq = qt.ne[2], Sk = kt.ne[2];
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Sk);
    size_t obytes = ropeqk_tensor_extent(&ot);
    if (obytes == 0 || Sq > INT64_MAX / (Sk > 0 ? Sk : 1)) {
        cli_err("scores: the scores [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] are too large", B, Hq, Sq, Sk);
        rc = CLI_RUNTIME;
        goto done;
    }
    /* Validate everything (shapes, rotary dim, positions, scaling) before opening a device. */
    ropeqk_status st = ropeqk_scores_ref(&p, &qt, NULL, &kt, NULL, NULL, NULL, &ot, NULL);
    if (st == ROPEQK_ERR_BAD_SCALING) { /* the checks above should have caught it: name the scaling anyway */
        char what[256];
        snprintf(what, sizeof what, "scores: --scaling %s: parameters rejected", cli_scaling_names[a.sc.type]);
        cli_lib_err(what, st, NULL);
        rc = CLI_USAGE;
        goto done;
    }
    if (st != ROPEQK_SUCCESS && st != ROPEQK_ERR_NULL_POINTER) {
        char what[1024], qs[160], ks[160];
        shape_str(&qa, qs, sizeof qs);
        shape_str(&ka, ks, sizeof ks);
        snprintf(what, sizeof what, "scores: Q %s (%s) with K %s (%s) as %s", a.q, qs, a.k, ks,
                 bshd ? "[B,S,H,D]" : "[B,H,S,D]");
        cli_lib_err(what, st, NULL);
        rc = CLI_RUNTIME;
        goto done;
    }
    out = malloc(obytes);
    if (!out) {
        cli_err("scores: out of memory for the scores (%zu bytes)", obytes);
        rc = CLI_RUNTIME;
        goto done;
    }
    rc = cli_device_open("scores", a.device, true, &dev);
    if (rc != CLI_OK)
        goto done;
    double t0 = cli_now();
    st = cli_device_scores(&dev, &p, &qt, qa.data, &kt, ka.data, qpos, kpos, &ot, out);
    double t1 = cli_now();
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
        st = cli_verify(&p, &qt, qa.data, &kt, ka.data, qpos, kpos, &ot, out, &err, &mism);
        if (st != ROPEQK_SUCCESS) {
            cli_lib_err("scores: --check: scalar path", st, NULL);
            rc = CLI_RUNTIME;
            goto done;
        }
        check_failed = !(err <= CLI_TOLERANCE) || mism != 0;
        snprintf(check_line, sizeof check_line,
                 "check: max error %.3g (conventions metric, tolerance %g), mask mismatches %" PRId64 ": %s\n", err,
                 CLI_TOLERANCE, mism, check_failed ? "FAIL" : "PASS");
    }
    npy_array oa;
    memset(&oa, 0, sizeof oa);
    oa.dtype = NPY_F32;
    oa.ndim = 4;
    oa.shape[0] = B;
    oa.shape[1] = Hq;
    oa.shape[2] = Sq;
    oa.shape[3] = Sk;
    oa.data = out;
    oa.nbytes = obytes;
    char err[512];
    if (npy_save(a.out, &oa, err, sizeof err) != 0) {
        cli_err("scores: --out: %s", err);
        rc = CLI_RUNTIME;
        goto done;
    }
    printf("scores: Q [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] %s, K [%" PRId64 ",%" PRId64 ",%" PRId64
           ",%" PRId64 "] %s (%s) -> %s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "] f32 on %s, %.3f ms\n",
           qa.shape[0], qa.shape[1], qa.shape[2], qa.shape[3], dtype_str(&qa), ka.shape[0], ka.shape[1],
           ka.shape[2], ka.shape[3], dtype_str(&ka), bshd ? "bshd" : "bhsd", a.out, B, Hq, Sq, Sk, dev.name,
           1e3 * (t1 - t0));
    if (p.scaling.type != ROPEQK_SCALING_NONE || p.scaling.freq_factors || p.window) {
        char d[320] = "";
        double attn = 1.0;
        int64_t R = a.rotary_dim ? a.rotary_dim : qt.ne[3];
        double *inv = malloc((size_t)(R / 2) * sizeof *inv);
        cli_scaling_describe(&p.scaling, d, sizeof d);
        if (inv && ropeqk_inv_freq(&p, qt.ne[3], inv, &attn) == ROPEQK_SUCCESS)
            snprintf(d + strlen(d), sizeof d - strlen(d), ", attention factor %.6g", attn);
        free(inv);
        printf("rope:%s%s", p.scaling.type == ROPEQK_SCALING_NONE && !p.scaling.freq_factors ? " no scaling" : "", d);
        if (p.window)
            printf(", sliding window %" PRId64, p.window);
        printf("\n");
    }
    fputs(check_line, stdout);
    rc = check_failed ? CLI_CHECK_FAILED : CLI_OK;
    if (check_failed)
        cli_err("scores: --check failed: the result (written to %s) disagrees with the scalar path", a.out);
done:
    cli_device_close(&dev);
    cli_scaling_free(&lists);
    free(out);
    free(qpos);
    free(kpos);
    npy_free(&qa);
    npy_free(&ka);
    return rc;
}
