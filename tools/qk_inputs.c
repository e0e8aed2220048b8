/* The options and inputs `scores` and `attention` share (see qk_inputs.h). */
#include "qk_inputs.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const layout_names[] = {"interleaved", "half-split", NULL};
static const char *const format_names[] = {"bhsd", "bshd", NULL};
static const char *const dtype_names[] = {"auto", "bf16", NULL};
static const char *const math_names[] = {"accurate", "fast", NULL};

void cli_shape_str(const npy_array *a, char *buf, size_t len)
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

const char *cli_npy_dtype_str(const npy_array *a)
{
    return a->dtype == NPY_U16 ? "bf16" : npy_dtype_descr(a->dtype);
}

int cli_load_tensor(const char *cmd, const char *flag, const char *path, bool bshd, bool bf16, npy_array *a,
                    ropeqk_tensor *t)
{
    if (cli_load_npy(cmd, flag, path, a) != CLI_OK)
        return CLI_RUNTIME;
    char shp[160];
    cli_shape_str(a, shp, sizeof shp);
    if (bf16 && a->dtype != NPY_U16) {
        cli_err("%s: %s: %s: dtype '%s', but --dtype bf16 reads raw bfloat16 bits stored as '<u2'", cmd, flag, path,
                npy_dtype_descr(a->dtype));
        return CLI_RUNTIME;
    }
    if (!bf16 && a->dtype == NPY_U16) {
        cli_err("%s: %s: %s: dtype '<u2': if these are raw bfloat16 bits, pass --dtype bf16", cmd, flag, path);
        return CLI_RUNTIME;
    }
    if (a->dtype != NPY_F32 && a->dtype != NPY_F16 && a->dtype != NPY_U16) {
        cli_err("%s: %s: %s: dtype '%s' is not supported (need '<f4' or '<f2', or '<u2' with --dtype bf16)", cmd,
                flag, path, npy_dtype_descr(a->dtype));
        return CLI_RUNTIME;
    }
    if (a->ndim != 4) {
        cli_err("%s: %s: %s: expected 4 dimensions %s, got shape (%s)", cmd, flag, path,
                bshd ? "[B,S,H,D] (--format bshd)" : "[B,H,S,D] (--format bhsd)", shp);
        return CLI_RUNTIME;
    }
    for (int i = 0; i < 4; i++)
        if (a->shape[i] < 1) {
            cli_err("%s: %s: %s: empty dimension in shape (%s)", cmd, flag, path, shp);
            return CLI_RUNTIME;
        }
    ropeqk_dtype dt = a->dtype == NPY_F32 ? ROPEQK_F32 : a->dtype == NPY_F16 ? ROPEQK_F16 : ROPEQK_BF16;
    const int64_t *s = a->shape;
    *t = bshd ? ropeqk_tensor_bshd(dt, s[0], s[1], s[2], s[3]) : ropeqk_tensor_bhsd(dt, s[0], s[1], s[2], s[3]);
    size_t ext = ropeqk_tensor_extent(t);
    if (ext == 0 || ext != a->nbytes) {
        cli_err("%s: %s: %s: shape (%s) is too large", cmd, flag, path, shp);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* "T,H,W" of --mrope-section into sec (three integers >= 0). CLI_OK or CLI_USAGE (message printed). */
static int parse_mrope(const char *cmd, const char *text, int32_t sec[3])
{
    const char *s = text;
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 65536 || (i < 2 ? *end != ',' : *end != '\0')) {
            cli_err("%s: --mrope-section '%s': expected three integers >= 0, T,H,W (e.g. 16,24,24)", cmd, text);
            return CLI_USAGE;
        }
        sec[i] = (int32_t)v;
        s = end + 1;
    }
    return CLI_OK;
}

/* Loads a per-token position file: int32 or int64 of n entries (1-D), or of 3 x n entries ([3, n]:
 * rows t, h, w) when streams is 3 (M-RoPE), values within int32. */
static int load_positions(const char *cmd, const char *flag, const char *path, int64_t n, int streams,
                          const char *what, int32_t **out)
{
    npy_array a;
    if (cli_load_npy(cmd, flag, path, &a) != CLI_OK)
        return CLI_RUNTIME;
    int rc = CLI_RUNTIME;
    char shp[160];
    cli_shape_str(&a, shp, sizeof shp);
    if (a.dtype != NPY_I32 && a.dtype != NPY_I64) {
        cli_err("%s: %s: %s: dtype '%s' is not supported (need '<i4' or '<i8')", cmd, flag, path,
                npy_dtype_descr(a.dtype));
    } else if (streams == 1 && (a.ndim != 1 || a.shape[0] != n)) {
        cli_err("%s: %s: %s: expected shape (%" PRId64 ",) (one position per %s row), got (%s)", cmd, flag, path, n,
                what, shp);
    } else if (streams == 3 && (a.ndim != 2 || a.shape[0] != 3 || a.shape[1] != n)) {
        cli_err("%s: %s: %s: expected shape (3, %" PRId64 ") with --mrope-section (rows t, h, w; one column per %s "
                "row), got (%s)", cmd, flag, path, n, what, shp);
    } else if (!(*out = malloc((size_t)(streams * n) * sizeof(int32_t)))) {
        cli_err("%s: %s: %s: out of memory", cmd, flag, path);
    } else {
        rc = CLI_OK;
        n *= streams;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = npy_int_at(&a, i);
            if (v < INT32_MIN || v > INT32_MAX) {
                cli_err("%s: %s: %s: position %" PRId64 " at index %" PRId64 " does not fit int32", cmd, flag, path,
                        v, i);
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

size_t cli_qk_opts(cli_qk_args *a, const cli_opt *io, size_t nio, const char *check_help, cli_opt *opts)
{
    memset(a, 0, sizeof *a);
    a->base = 10000.0;
    const cli_opt files[] = {
        {"--q", OPT_STR, &a->q, "FILE", "queries, .npy <f4/<f2 [B,Hq,Sq,D] (required)", 0, 0, 0, NULL, NULL},
        {"--k", OPT_STR, &a->k, "FILE", "keys, .npy <f4/<f2 [B,Hkv,Sk,D] (required)", 0, 0, 0, NULL, NULL},
    };
    const cli_opt rope[] = {
        {"--format", OPT_CHOICE, &a->format, NULL, "memory order of the input files (default bhsd)", 0, 0, 0,
         format_names, NULL},
        {"--dtype", OPT_CHOICE, &a->dtype, NULL,
         "input storage: auto = from the files (<f4, <f2); bf16 = raw bfloat16 bits in <u2 files (default auto)", 0,
         0, 0, dtype_names, NULL},
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
        {"--softcap", OPT_F64, &a->softcap, "C", "logit soft-capping: C tanh(S / C) on unmasked scores (Gemma 2: 50) "
         "(default off)", OPT_POSITIVE, 0, 0, NULL, NULL},
        {"--rotary-offset", OPT_I64, &a->rotary_offset, "N",
         "the rotated dims are [N, N + R) (DeepSeek MLA's [nope | rope]: N = D - R) (default 0)", 0, 0, 65534, NULL,
         NULL},
        {"--mrope-section", OPT_STR, &a->mrope, "T,H,W",
         "M-RoPE (Qwen2-VL): frequencies of the temporal, height and width position streams, T + H + W = R/2; "
         "position files are then [3, S] (default off)", 0, 0, 0, NULL, NULL},
        {"--mrope-interleaved", OPT_FLAG, &a->mrope_interleaved, NULL,
         "M-RoPE streams interleaved over the frequencies (Qwen3-VL) (default contiguous sections)", 0, 0, 0, NULL,
         NULL},
        {"--math", OPT_CHOICE, &a->math, NULL,
         "products on a Vulkan device's tensor cores (docs/tensor-cores.md): accurate = f16 hi/lo splits, three "
         "products, the 1e-5 bound; fast = one f16 product (error ~1e-3); other devices compute in f32 "
         "either way (default accurate)", 0, 0, 0, math_names, NULL},
    };
    const cli_opt last[] = {
        {"--device", OPT_STR, &a->device, "SPEC", CLI_DEVICE_HELP, 0, 0, 0, NULL, NULL},
        {"--check", OPT_FLAG, &a->check, NULL, check_help, 0, 0, 0, NULL, NULL},
    };
    size_t n = 0;
#define ADD_ROWS(rows, count)                                                                                     \
    do {                                                                                                          \
        memcpy(opts + n, rows, (count) * sizeof(cli_opt));                                                        \
        n += (count);                                                                                             \
    } while (0)
    ADD_ROWS(files, sizeof files / sizeof files[0]);
    ADD_ROWS(io, nio);
    ADD_ROWS(rope, sizeof rope / sizeof rope[0]);
    cli_scaling_rows(&a->sc, &a->window, opts + n);
    n += CLI_SCALING_ROWS;
    ADD_ROWS(last, sizeof last / sizeof last[0]);
#undef ADD_ROWS
    return n;
}

int cli_qk_load(const char *cmd, const cli_qk_args *a, cli_qk_inputs *in)
{
    memset(in, 0, sizeof *in);
    ropeqk_default_params(&in->p);
    cli_error_mark(); /* the validation calls that follow report their own messages */
    int rc = cli_scaling_check(cmd, &a->sc, a->q_pos || a->k_pos); /* usage errors before any file */
    if (rc != CLI_OK)
        return rc;
    int32_t msec[3] = {0, 0, 0};
    if (a->mrope && (rc = parse_mrope(cmd, a->mrope, msec)) != CLI_OK)
        return rc;
    if (a->mrope_interleaved && !a->mrope) {
        cli_err("%s: --mrope-interleaved needs --mrope-section", cmd);
        return CLI_USAGE;
    }
    const int streams = a->mrope ? 3 : 1;
    in->bshd = a->format == 1;
    in->bf16 = a->dtype == 1;
    rc = cli_load_tensor(cmd, "--q", a->q, in->bshd, in->bf16, &in->qa, &in->qt);
    if (rc == CLI_OK)
        rc = cli_load_tensor(cmd, "--k", a->k, in->bshd, in->bf16, &in->ka, &in->kt);
    /* the scaling flags are checked once R is known (from --rotary-dim or D), before position files */
    if (rc == CLI_OK)
        rc = cli_scaling_build(cmd, &a->sc, a->rotary_dim ? a->rotary_dim : in->qt.ne[3] - a->rotary_offset,
                               a->rotary_dim != 0, a->q_pos || a->k_pos, &in->p.scaling, &in->lists);
    if (rc == CLI_OK && a->q_pos)
        rc = load_positions(cmd, "--q-positions", a->q_pos, in->qt.ne[2], streams, "query", &in->qpos);
    if (rc == CLI_OK && a->k_pos)
        rc = load_positions(cmd, "--k-positions", a->k_pos, in->kt.ne[2], streams, "key", &in->kpos);
    if (rc != CLI_OK)
        return rc;
    ropeqk_params *p = &in->p;
    p->layout = a->layout == 1 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    p->rotary_dim = (int32_t)a->rotary_dim;
    p->base = a->base;
    p->scale = a->scale;
    p->causal = a->causal;
    p->conjugate = a->conjugate;
    /* M-RoPE masks by token order (offset + row) even with position files: the offsets stay */
    p->q_pos_offset = a->q_pos && !a->mrope ? 0 : a->q_off;
    p->k_pos_offset = a->k_pos && !a->mrope ? 0 : a->k_off;
    p->window = a->window;
    p->softcap = a->softcap;
    p->rotary_offset = (int32_t)a->rotary_offset;
    for (int i = 0; i < 3; i++)
        p->mrope_section[i] = msec[i];
    p->mrope_interleaved = a->mrope_interleaved;
    p->math = a->math == 1 ? ROPEQK_MATH_FAST : ROPEQK_MATH_ACCURATE;
    return CLI_OK;
}

void cli_qk_free(cli_qk_inputs *in)
{
    cli_scaling_free(&in->lists);
    free(in->qpos);
    free(in->kpos);
    npy_free(&in->qa);
    npy_free(&in->ka);
    in->qpos = in->kpos = NULL;
}

int cli_qk_validation(const char *cmd, const cli_qk_args *a, const cli_qk_inputs *in, const char *extra,
                      ropeqk_status st)
{
    if (st == ROPEQK_SUCCESS || st == ROPEQK_ERR_NULL_POINTER)
        return CLI_OK;
    if (st == ROPEQK_ERR_BAD_SCALING) { /* cli_scaling_build should have caught it: name the scaling anyway */
        char what[256];
        snprintf(what, sizeof what, "%s: --scaling %s: parameters rejected", cmd, cli_scaling_names[a->sc.type]);
        cli_lib_err(what, st, NULL);
        return CLI_USAGE;
    }
    char what[1536], qs[160], ks[160];
    cli_shape_str(&in->qa, qs, sizeof qs);
    cli_shape_str(&in->ka, ks, sizeof ks);
    snprintf(what, sizeof what, "%s: Q %s (%s) with K %s (%s)%s as %s", cmd, a->q, qs, a->k, ks, extra ? extra : "",
             in->bshd ? "[B,S,H,D]" : "[B,H,S,D]");
    cli_lib_err(what, st, NULL);
    return CLI_RUNTIME;
}

void cli_qk_print_rope(const cli_qk_inputs *in, const cli_qk_args *a)
{
    const ropeqk_params *p = &in->p;
    bool variant = p->softcap > 0 || p->rotary_offset || p->mrope_section[0] || p->mrope_section[1] ||
                   p->mrope_section[2] || p->sinks;
    if (p->scaling.type == ROPEQK_SCALING_NONE && !p->scaling.freq_factors && !p->window && !variant)
        return;
    char d[320] = "";
    double attn = 1.0;
    int64_t R = a->rotary_dim ? a->rotary_dim : in->qt.ne[3] - p->rotary_offset;
    double *inv = malloc((size_t)(R / 2) * sizeof *inv);
    cli_scaling_describe(&p->scaling, d, sizeof d);
    if (inv && ropeqk_inv_freq(p, in->qt.ne[3], inv, &attn) == ROPEQK_SUCCESS)
        snprintf(d + strlen(d), sizeof d - strlen(d), ", attention factor %.6g", attn);
    free(inv);
    printf("rope:%s%s", p->scaling.type == ROPEQK_SCALING_NONE && !p->scaling.freq_factors ? " no scaling" : "", d);
    if (p->window)
        printf(", sliding window %" PRId64, p->window);
    if (p->rotary_offset)
        printf(", rotated dims [%d, %" PRId64 ")", (int)p->rotary_offset, p->rotary_offset + R);
    if (p->mrope_section[0] || p->mrope_section[1] || p->mrope_section[2])
        printf(", M-RoPE sections %d,%d,%d%s", (int)p->mrope_section[0], (int)p->mrope_section[1],
               (int)p->mrope_section[2], p->mrope_interleaved ? " interleaved" : "");
    if (p->softcap > 0)
        printf(", logits soft-capped at %g", p->softcap);
    if (p->sinks)
        printf(", attention sinks (%d heads)", (int)p->n_sinks);
    printf("\n");
}

int cli_save_f32(const char *cmd, const char *flag, const char *path, const float *data, int ndim,
                 const int64_t *shape)
{
    npy_array oa;
    memset(&oa, 0, sizeof oa);
    oa.dtype = NPY_F32;
    oa.ndim = ndim;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        oa.shape[i] = shape[i];
        n *= (size_t)shape[i];
    }
    oa.data = (void *)data;
    oa.nbytes = n * sizeof(float);
    char err[512];
    if (npy_save(path, &oa, err, sizeof err) != 0) {
        cli_err("%s: %s: %s", cmd, flag, err);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}
