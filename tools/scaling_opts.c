/* The frequency-scaling flags of `ropeqk scores`: their option rows, their validation against
 * --scaling (before the library sees them, so that every message names a flag), and the factor
 * lists read from .npy files. The names and defaults are Hugging Face's `rope_scaling` ones (see
 * docs/conventions.md "Frequency scaling" and ropeqk.h). */
#include "cli.h"
#include "npy.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const cli_scaling_names[] = {"none", "linear", "dynamic", "yarn", "llama3", "longrope", NULL};

void cli_scaling_rows(cli_scaling_args *s, int64_t *window, cli_opt *rows)
{
    const cli_opt r[CLI_SCALING_ROWS] = {
        {"--scaling", OPT_CHOICE, &s->type, NULL, "frequency scaling, Hugging Face rope_type names (default none)", 0,
         0, 0, cli_scaling_names, NULL},
        {"--factor", OPT_F64, &s->factor, "S",
         "scaling factor s (required by linear, dynamic, yarn; llama3 default 8; longrope default 1)", OPT_POSITIVE,
         0, 0, NULL, NULL},
        {"--original-max-pos", OPT_I64, &s->original_max_pos, "L0",
         "original context length (required by dynamic, yarn, longrope; llama3 default 8192)", OPT_POSITIVE, 0, 0,
         NULL, NULL},
        {"--seq-len", OPT_I64, &s->seq_len, "L",
         "dynamic, longrope: current length L (default max(offset + rows); needed with position files)",
         OPT_POSITIVE, 0, 0, NULL, NULL},
        {"--beta-fast", OPT_F64, &s->beta_fast, "B", "yarn: fast correction bound (default 32)", OPT_POSITIVE, 0, 0,
         NULL, NULL},
        {"--beta-slow", OPT_F64, &s->beta_slow, "B", "yarn: slow correction bound (default 1)", OPT_POSITIVE, 0, 0,
         NULL, NULL},
        {"--yarn-no-truncate", OPT_FLAG, &s->yarn_no_truncate, NULL,
         "yarn: do not round the correction range to whole dims (Hugging Face \"truncate\": false, gpt-oss) "
         "(default rounded)", 0, 0, 0, NULL, NULL},
        {"--attention-factor", OPT_F64, &s->attention_factor, "A",
         "yarn, longrope: cos/sin multiplier (default yarn 0.1 ln s + 1, longrope sqrt(1 + ln s / ln L0))",
         OPT_POSITIVE, 0, 0, NULL, NULL},
        {"--low-freq-factor", OPT_F64, &s->low_freq_factor, "F", "llama3: low frequency factor (default 1)",
         OPT_POSITIVE, 0, 0, NULL, NULL},
        {"--high-freq-factor", OPT_F64, &s->high_freq_factor, "F", "llama3: high frequency factor (default 4)",
         OPT_POSITIVE, 0, 0, NULL, NULL},
        {"--long-factors", OPT_STR, &s->long_factors, "FILE",
         "longrope: per-frequency factors when L > L0, .npy <f4/<f8 [R/2] (required)", 0, 0, 0, NULL, NULL},
        {"--short-factors", OPT_STR, &s->short_factors, "FILE",
         "longrope: per-frequency factors when L <= L0, .npy <f4/<f8 [R/2] (required)", 0, 0, 0, NULL, NULL},
        {"--freq-factors", OPT_STR, &s->freq_factors, "FILE",
         "any scaling: divide inverse frequency i by F[i] (ggml), .npy <f4/<f8 [R/2] (default none)", 0, 0, 0, NULL,
         NULL},
        {"--window", OPT_I64, window, "W",
         "sliding window: also mask (-inf) where pq - pk >= W (default 0 = off)", 0, 0, INT64_MAX, NULL, NULL},
    };
    memcpy(rows, r, sizeof r);
}

#define T(x) (1u << ROPEQK_SCALING_##x)
#define ANY_SCALED (T(LINEAR) | T(DYNAMIC) | T(YARN) | T(LLAMA3) | T(LONGROPE))

/* "yarn", "dynamic or longrope", "linear, dynamic, yarn, llama3 or longrope" */
static void type_list(unsigned mask, char *buf, size_t len)
{
    int n = 0, total = 0;
    for (int t = 0; cli_scaling_names[t]; t++)
        total += (mask >> t) & 1u;
    size_t used = 0;
    buf[0] = '\0';
    for (int t = 0; cli_scaling_names[t]; t++) {
        if (!((mask >> t) & 1u))
            continue;
        n++;
        const char *sep = n == 1 ? "" : n == total ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, cli_scaling_names[t]);
        if (w < 0 || (size_t)w >= len - used)
            return;
        used += (size_t)w;
    }
}

/* Loads a 1-D f32/f64 list of positive finite factors; its length must be `want` (R/2). */
static int load_factors(const char *cmd, const char *flag, const char *path, int64_t want, int64_t R,
                        bool rotary_dim_given, double **out)
{
    npy_array a;
    if (cli_load_npy(cmd, flag, path, &a) != CLI_OK)
        return CLI_RUNTIME;
    int rc = CLI_RUNTIME;
    if (a.dtype != NPY_F32 && a.dtype != NPY_F64) {
        cli_err("%s: %s: %s: dtype '%s' is not supported (need '<f4' or '<f8')", cmd, flag, path,
                npy_dtype_descr(a.dtype));
    } else if (a.ndim != 1) {
        cli_err("%s: %s: %s: expected a 1-D list of R/2 = %" PRId64 " factors, got %d dimensions", cmd, flag, path,
                want, a.ndim);
    } else if (a.shape[0] != want) {
        cli_err("%s: %s: %s has %" PRId64 " factors, but rotary dim %" PRId64 "%s needs R/2 = %" PRId64, cmd, flag,
                path, a.shape[0], R, rotary_dim_given ? " (--rotary-dim)" : " (= D, the head dim of --q)", want);
        rc = CLI_USAGE;
    } else if (!(*out = malloc((size_t)want * sizeof(double)))) {
        cli_err("%s: %s: %s: out of memory", cmd, flag, path);
    } else {
        rc = CLI_OK;
        for (int64_t i = 0; i < want; i++) {
            double v = npy_real_at(&a, i);
            if (!(isfinite(v) && v > 0.0)) {
                cli_err("%s: %s: %s: factor %g at index %" PRId64 " is not a positive finite number", cmd, flag,
                        path, v, i);
                free(*out);
                *out = NULL;
                rc = CLI_RUNTIME;
                break;
            }
            (*out)[i] = v;
        }
    }
    npy_free(&a);
    return rc;
}

int cli_scaling_check(const char *cmd, const cli_scaling_args *s, bool per_token)
{
    const char *tname = cli_scaling_names[s->type];
    const unsigned me = 1u << s->type;
    const struct {
        const char *flag;
        bool given;
        unsigned applies, required;
    } rules[] = {
        {"--factor", s->factor != 0.0, ANY_SCALED, T(LINEAR) | T(DYNAMIC) | T(YARN)},
        {"--original-max-pos", s->original_max_pos != 0, T(DYNAMIC) | T(YARN) | T(LLAMA3) | T(LONGROPE),
         T(DYNAMIC) | T(YARN) | T(LONGROPE)},
        {"--seq-len", s->seq_len != 0, T(DYNAMIC) | T(LONGROPE), 0},
        {"--beta-fast", s->beta_fast != 0.0, T(YARN), 0},
        {"--beta-slow", s->beta_slow != 0.0, T(YARN), 0},
        {"--yarn-no-truncate", s->yarn_no_truncate != 0, T(YARN), 0},
        {"--attention-factor", s->attention_factor != 0.0, T(YARN) | T(LONGROPE), 0},
        {"--low-freq-factor", s->low_freq_factor != 0.0, T(LLAMA3), 0},
        {"--high-freq-factor", s->high_freq_factor != 0.0, T(LLAMA3), 0},
        {"--long-factors", s->long_factors != NULL, T(LONGROPE), T(LONGROPE)},
        {"--short-factors", s->short_factors != NULL, T(LONGROPE), T(LONGROPE)},
    };
    const size_t nrules = sizeof rules / sizeof rules[0];
    for (size_t i = 0; i < nrules; i++)
        if (rules[i].given && !(rules[i].applies & me)) {
            char list[128];
            type_list(rules[i].applies, list, sizeof list);
            cli_err("%s: %s only applies to --scaling %s%s", cmd, rules[i].flag, list,
                    s->type == ROPEQK_SCALING_NONE ? " (no --scaling given)" : "");
            return CLI_USAGE;
        }
    for (size_t i = 0; i < nrules; i++)
        if (!rules[i].given && (rules[i].required & me)) {
            cli_err("%s: --scaling %s needs %s", cmd, tname, rules[i].flag);
            return CLI_USAGE;
        }
    if (per_token && s->seq_len == 0 && (me & (T(DYNAMIC) | T(LONGROPE)))) {
        cli_err("%s: --scaling %s with --q-positions/--k-positions needs --seq-len (the current length; without "
                "position files it defaults to max(offset + rows))",
                cmd, tname);
        return CLI_USAGE;
    }
    if (s->type == ROPEQK_SCALING_LLAMA3) {
        double lo = s->low_freq_factor != 0.0 ? s->low_freq_factor : 1.0;
        double hi = s->high_freq_factor != 0.0 ? s->high_freq_factor : 4.0;
        if (!(lo < hi)) {
            cli_err("%s: --scaling llama3: --low-freq-factor (%g) must be < --high-freq-factor (%g)", cmd, lo, hi);
            return CLI_USAGE;
        }
    }
    return CLI_OK;
}

int cli_scaling_build(const char *cmd, const cli_scaling_args *s, int64_t R, bool rotary_dim_given, bool per_token,
                      ropeqk_scaling *out, cli_scaling_lists *lists)
{
    memset(out, 0, sizeof *out);
    memset(lists, 0, sizeof *lists);
    int rc = cli_scaling_check(cmd, s, per_token);
    if (rc != CLI_OK)
        return rc;
    if (s->type == ROPEQK_SCALING_DYNAMIC && R <= 2) {
        cli_err("%s: --scaling dynamic needs a rotary dim > 2 (its exponent is R/(R-2)), got %" PRId64, cmd, R);
        return CLI_USAGE;
    }
    out->type = (ropeqk_scaling_type)s->type;
    out->factor = s->factor;
    out->original_max_position = s->original_max_pos;
    out->seq_len = s->seq_len;
    out->beta_fast = s->beta_fast;
    out->beta_slow = s->beta_slow;
    out->yarn_no_truncate = s->yarn_no_truncate != 0;
    out->attention_factor = s->attention_factor;
    out->low_freq_factor = s->low_freq_factor;
    out->high_freq_factor = s->high_freq_factor;
    const int64_t half = R / 2;
    if (s->long_factors)
        rc = load_factors(cmd, "--long-factors", s->long_factors, half, R, rotary_dim_given, &lists->long_f);
    if (rc == CLI_OK && s->short_factors)
        rc = load_factors(cmd, "--short-factors", s->short_factors, half, R, rotary_dim_given, &lists->short_f);
    if (rc == CLI_OK && s->freq_factors)
        rc = load_factors(cmd, "--freq-factors", s->freq_factors, half, R, rotary_dim_given, &lists->freq);
    if (rc != CLI_OK) {
        cli_scaling_free(lists);
        return rc;
    }
    if (lists->long_f) {
        out->long_factor = lists->long_f;
        out->n_long_factor = (int32_t)half;
    }
    if (lists->short_f) {
        out->short_factor = lists->short_f;
        out->n_short_factor = (int32_t)half;
    }
    if (lists->freq) {
        out->freq_factors = lists->freq;
        out->n_freq_factors = (int32_t)half;
    }
    return CLI_OK;
}

void cli_scaling_free(cli_scaling_lists *l)
{
    free(l->long_f);
    free(l->short_f);
    free(l->freq);
    memset(l, 0, sizeof *l);
}

void cli_scaling_describe(const ropeqk_scaling *s, char *buf, size_t len)
{
    buf[0] = '\0';
    if (s->type < ROPEQK_SCALING_NONE || s->type > ROPEQK_SCALING_LONGROPE) {
        snprintf(buf, len, " scaling=%d", (int)s->type);
        return;
    }
    size_t used = 0;
#define ADD(...)                                                                                                  \
    do {                                                                                                          \
        int w_ = snprintf(buf + used, len - used, __VA_ARGS__);                                                   \
        if (w_ < 0 || (size_t)w_ >= len - used)                                                                   \
            return;                                                                                               \
        used += (size_t)w_;                                                                                       \
    } while (0)
    if (s->type != ROPEQK_SCALING_NONE) {
        ADD(" %s(", cli_scaling_names[s->type]);
        const size_t open = used;
        const char *sep = "";
        if (s->factor != 0.0) {
            ADD("s=%g", s->factor);
            sep = ",";
        }
        if (s->original_max_position) {
            ADD("%sL0=%" PRId64, sep, s->original_max_position);
            sep = ",";
        }
        if (s->seq_len) {
            ADD("%sL=%" PRId64, sep, s->seq_len);
            sep = ",";
        }
        if (s->beta_fast != 0.0 || s->beta_slow != 0.0) {
            ADD("%sbeta=%g/%g", sep, s->beta_fast, s->beta_slow);
            sep = ",";
        }
        if (s->yarn_no_truncate) {
            ADD("%suntruncated", sep);
            sep = ",";
        }
        if (s->low_freq_factor != 0.0 || s->high_freq_factor != 0.0) {
            ADD("%slow/high=%g/%g", sep, s->low_freq_factor, s->high_freq_factor);
            sep = ",";
        }
        if (s->attention_factor != 0.0)
            ADD("%sattn=%g", sep, s->attention_factor);
        if (used == open) /* all defaults: "llama3", not "llama3()" */
            buf[--used] = '\0';
        else
            ADD(")");
    }
    if (s->freq_factors)
        ADD(" freq_factors");
#undef ADD
}
