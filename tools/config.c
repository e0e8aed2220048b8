/* The `config` subcommand: reads a Hugging Face config.json (cJSON) and prints the `ropeqk scores`
 * flags of its RoPE on one line, then `#` lines on shapes, layout and how each value was derived.
 * LongRoPE factor lists are written as .npy files next to an output prefix.
 *
 * Hugging Face semantics (modeling_rope_utils): rope_scaling's `rope_type` (else legacy `type`;
 * "default" = none, "su" = longrope), rope_theta (default 10000), head_dim (else hidden_size /
 * num_attention_heads), partial_rotary_factor (R = int(D * factor)), num_key_value_heads (default
 * num_attention_heads), original_max_position_embeddings inside rope_scaling or at the top level
 * (yarn, dynamic and longrope fall back to max_position_embeddings), longrope's factor defaulting to
 * max_position_embeddings / original_max_position_embeddings. The v5 `rope_parameters` block and a
 * multimodal `text_config` are read too. Every model that uses HF's rotate_half is half-split. */
#include "cli.h"
#include "config_model.h"
#include "npy.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* " --flag path", single-quoted when the path has characters a shell would treat specially */
static void flag_path(strbuf *b, const char *flag, const char *path)
{
    bool plain = *path != '\0';
    for (const char *c = path; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-=:,@%", *c))
            plain = false;
    if (plain) {
        sb_add(b, " %s %s", flag, path);
        return;
    }
    sb_add(b, " %s '", flag);
    for (const char *c = path; *c; c++)
        sb_add(b, *c == '\'' ? "'\\''" : "%c", *c);
    sb_add(b, "'");
}

static const char *const rope_types[] = {"default", "linear", "dynamic", "yarn", "llama3", "longrope", "su", NULL};

typedef struct {
    const char *path, *prefix;
    int64_t seq_len; /* --seq-len, 0 = not given */
} config_args;

/* Writes one factor list as a 1-D f64 .npy file. */
static int save_list(const char *path, const double *v, int64_t n)
{
    npy_array a;
    memset(&a, 0, sizeof a);
    a.dtype = NPY_F64;
    a.ndim = 1;
    a.shape[0] = n;
    a.data = (void *)v;
    a.nbytes = (size_t)n * sizeof(double);
    char err[512];
    if (npy_save(path, &a, err, sizeof err) != 0) {
        cli_err("config: writing a factor list: %s", err);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* Head dim D (head_dim, else hidden_size / heads), layout and rotary dim R (partial_rotary_factor). */
static int read_dims(const cj_file *f, model_rope *m)
{
    int rc;
    bool got = false;
    if ((rc = cj_int(f, &m->lm, "head_dim", false, 1, 1 << 20, &m->D, &got, NULL)) != CLI_OK)
        return rc;
    if (!got) {
        int64_t hidden = 0;
        if ((rc = cj_int(f, &m->lm, "hidden_size", false, 1, INT32_MAX, &hidden, &got, NULL)) != CLI_OK)
            return rc;
        if (!got && (rc = cj_int(f, &m->lm, "n_embd", false, 1, INT32_MAX, &hidden, &got, NULL)) != CLI_OK)
            return rc;
        if (!got)
            return cj_fail(f, "missing key 'hidden_size' (D = hidden_size / num_attention_heads when head_dim is "
                              "absent)");
        if (hidden % m->Hq != 0)
            return cj_fail(f, "hidden_size %" PRId64 " is not a multiple of num_attention_heads %" PRId64
                              " (and there is no head_dim)", hidden, m->Hq);
        m->D = hidden / m->Hq;
    }
    /* GPT-J / CodeGen (rotate_every_two, rotary_dim) are the interleaved exceptions among HF models */
    m->interleaved = m->model_type && (strcmp(m->model_type, "gptj") == 0 || strcmp(m->model_type, "codegen") == 0);
    m->prf = 1.0;
    if ((rc = cj_num(f, &m->rs, "partial_rotary_factor", false, &m->prf, &got)) != CLI_OK)
        return rc;
    if (!got && (rc = cj_num(f, &m->lm, "partial_rotary_factor", false, &m->prf, &got)) != CLI_OK)
        return rc;
    if (!got && (rc = cj_num(f, &m->lm, "rotary_pct", false, &m->prf, &got)) != CLI_OK) /* GPT-NeoX */
        return rc;
    if (!(m->prf > 0.0 && m->prf <= 1.0))
        return cj_fail(f, "partial_rotary_factor %g is not in (0, 1]", m->prf);
    m->R = (int64_t)((double)m->D * m->prf);
    if ((rc = cj_int(f, &m->lm, "rotary_dim", false, 2, m->D, &m->R, &got, NULL)) != CLI_OK) /* GPT-J */
        return rc;
    if (m->R < 2 || m->R % 2 != 0)
        return cj_fail(f, "rotary dim %" PRId64 " (head dim %" PRId64 " x partial_rotary_factor %g) is not even and "
                          ">= 2",
                       m->R, m->D, m->prf);
    return CLI_OK;
}

/* Shapes and the plain RoPE: heads, head dim, rotary dim, base. */
static int read_shapes(const cj_file *f, model_rope *m)
{
    int rc;
    m->model_type = NULL;
    if ((rc = cj_str(f, &m->lm, "model_type", false, &m->model_type)) != CLI_OK)
        return rc;
    bool got = false;
    /* GPT-2-style names (n_head, n_embd, n_positions: GPT-J, CodeGen) are HF attribute aliases */
    if ((rc = cj_int(f, &m->lm, "num_attention_heads", false, 1, 1 << 20, &m->Hq, &got, NULL)) != CLI_OK)
        return rc;
    if (!got && (rc = cj_int(f, &m->lm, "n_head", false, 1, 1 << 20, &m->Hq, &got, NULL)) != CLI_OK)
        return rc;
    if (!got)
        return cj_fail(f, "missing key 'num_attention_heads' (the number of query heads)");
    if ((rc = cj_int(f, &m->lm, "num_key_value_heads", false, 1, 1 << 20, &m->Hkv, &got, NULL)) != CLI_OK)
        return rc;
    if (!got)
        m->Hkv = m->Hq;
    if (m->Hq % m->Hkv != 0)
        return cj_fail(f, "num_attention_heads %" PRId64 " is not a multiple of num_key_value_heads %" PRId64, m->Hq,
                       m->Hkv);
    if ((rc = config_mla_shapes(f, m)) != CLI_OK || (!m->mla && (rc = read_dims(f, m)) != CLI_OK))
        return rc;
    m->theta = 10000.0;
    if ((rc = cj_num(f, &m->lm, "rope_theta", false, &m->theta, &m->has_theta)) != CLI_OK)
        return rc;
    if (!m->has_theta && (rc = cj_num(f, &m->rs, "rope_theta", false, &m->theta, &m->has_theta)) != CLI_OK)
        return rc;
    if (!m->has_theta && (rc = cj_num(f, &m->lm, "rotary_emb_base", false, &m->theta, &m->has_theta)) != CLI_OK)
        return rc;
    if (!(m->theta > 0.0))
        return cj_fail(f, "rope_theta %g must be > 0", m->theta);
    if ((rc = cj_int(f, &m->lm, "max_position_embeddings", false, 1, INT32_MAX, &m->max_pos, &m->has_max_pos, NULL)))
        return rc;
    if (!m->has_max_pos &&
        (rc = cj_int(f, &m->lm, "n_positions", false, 1, INT32_MAX, &m->max_pos, &m->has_max_pos, NULL)))
        return rc;
    if ((rc = cj_int(f, &m->rs, "original_max_position_embeddings", false, 1, INT32_MAX, &m->l0, &m->has_l0, NULL)))
        return rc;
    if (!m->has_l0 && (rc = cj_int(f, &m->lm, "original_max_position_embeddings", false, 1, INT32_MAX, &m->l0,
                                   &m->has_l0, NULL)))
        return rc;
    return CLI_OK;
}

/* A factor list of R/2 positive numbers. */
static int read_list(const cj_file *f, const model_rope *m, const char *key, double **out)
{
    return cj_list(f, &m->rs, key, m->R / 2, m->R, out);
}

/* rope_scaling: type and parameters, into m->sc (HF names and fallbacks). */
static int read_scaling(const cj_file *f, model_rope *m)
{
    int rc;
    const char *t = NULL;
    m->type_name = "default";
    memset(&m->sc, 0, sizeof m->sc);
    if (!m->rs.item)
        return CLI_OK;
    if ((rc = cj_str(f, &m->rs, "rope_type", false, &t)) != CLI_OK)
        return rc;
    if (!t && (rc = cj_str(f, &m->rs, "type", false, &t)) != CLI_OK)
        return rc;
    if (!t) {
        if (m->rs.is_params) /* v5 rope_parameters without a type: default RoPE */
            return CLI_OK;
        return cj_fail(f, "%s has neither 'rope_type' nor 'type'", m->rs.name);
    }
    if (strcmp(t, "mrope") == 0) { /* Qwen2-VL: HF turns "mrope" into default RoPE plus mrope_section */
        m->type_name = "mrope";
        return CLI_OK;
    }
    int ti = -1;
    for (int i = 0; rope_types[i]; i++)
        if (strcmp(t, rope_types[i]) == 0)
            ti = i;
    if (ti < 0)
        return cj_fail(f, "%s: rope type '%s' is not supported (supported: default, linear, dynamic, yarn, llama3, "
                          "longrope, su)", m->rs.name, t);
    m->type_name = t;
    m->sc.type = ti == 6 ? ROPEQK_SCALING_LONGROPE : (ropeqk_scaling_type)ti;
    bool got = false;
    switch (m->sc.type) {
    case ROPEQK_SCALING_NONE:
        return CLI_OK;
    case ROPEQK_SCALING_LINEAR:
        return cj_num_pos(f, &m->rs, "factor", true, &m->sc.factor, &got);
    case ROPEQK_SCALING_DYNAMIC:
    case ROPEQK_SCALING_YARN:
        if ((rc = cj_num_pos(f, &m->rs, "factor", true, &m->sc.factor, &got)))
            return rc;
        if (!m->has_l0 && !m->has_max_pos)
            return cj_fail(f, "missing key 'max_position_embeddings' (the original context length of %s without "
                              "original_max_position_embeddings)", t);
        m->sc.original_max_position = m->has_l0 ? m->l0 : m->max_pos;
        if (m->sc.type == ROPEQK_SCALING_DYNAMIC)
            return CLI_OK;
        if ((rc = cj_num_pos(f, &m->rs, "beta_fast", false, &m->sc.beta_fast, &got)) ||
            (rc = cj_num_pos(f, &m->rs, "beta_slow", false, &m->sc.beta_slow, &got)) ||
            (rc = cj_num_pos(f, &m->rs, "attention_factor", false, &m->sc.attention_factor, &got)))
            return rc;
        bool trunc = true; /* gpt-oss: false, the correction range is not rounded to whole dims */
        if ((rc = cj_bool(f, &m->rs, "truncate", &trunc)))
            return rc;
        m->sc.yarn_no_truncate = !trunc;
        if (!got) { /* DeepSeek: mscale / mscale_all_dim */
            double ms = 0.0, msa = 0.0, s = m->sc.factor;
            if ((rc = cj_num(f, &m->rs, "mscale", false, &ms, &got)) ||
                (rc = cj_num(f, &m->rs, "mscale_all_dim", false, &msa, &got)))
                return rc;
            if (ms != 0.0 && msa != 0.0 && s > 1.0)
                m->sc.attention_factor = (0.1 * ms * log(s) + 1.0) / (0.1 * msa * log(s) + 1.0);
        }
        return CLI_OK;
    case ROPEQK_SCALING_LLAMA3:
        if ((rc = cj_num_pos(f, &m->rs, "factor", true, &m->sc.factor, &got)) ||
            (rc = cj_num_pos(f, &m->rs, "low_freq_factor", true, &m->sc.low_freq_factor, &got)) ||
            (rc = cj_num_pos(f, &m->rs, "high_freq_factor", true, &m->sc.high_freq_factor, &got)))
            return rc;
        if (!(m->sc.low_freq_factor < m->sc.high_freq_factor))
            return cj_fail(f, "%s: low_freq_factor %g must be < high_freq_factor %g", m->rs.name,
                           m->sc.low_freq_factor, m->sc.high_freq_factor);
        if (!m->has_l0)
            return cj_fail(f, "missing key '%s.original_max_position_embeddings' (llama3)", m->rs.name);
        m->sc.original_max_position = m->l0;
        return CLI_OK;
    case ROPEQK_SCALING_LONGROPE:
        if ((rc = read_list(f, m, "long_factor", &m->long_f)) || (rc = read_list(f, m, "short_factor", &m->short_f)))
            return rc;
        if ((rc = cj_num_pos(f, &m->rs, "attention_factor", false, &m->sc.attention_factor, &got)) ||
            (rc = cj_num_pos(f, &m->rs, "factor", false, &m->sc.factor, &got)))
            return rc;
        if (!m->has_l0 && !m->has_max_pos)
            return cj_fail(f, "missing key 'original_max_position_embeddings' (longrope) and no "
                              "max_position_embeddings to fall back to");
        m->sc.original_max_position = m->has_l0 ? m->l0 : m->max_pos;
        if (!got && m->has_l0 && m->has_max_pos) /* HF: the context extension ratio */
            m->sc.factor = (double)m->max_pos / (double)m->l0;
        m->sc.long_factor = m->long_f;
        m->sc.short_factor = m->short_f;
        m->sc.n_long_factor = m->sc.n_short_factor = (int32_t)(m->R / 2);
        return CLI_OK;
    }
    return CLI_OK;
}

/* Mistral-style sliding windows: a note only, as models differ in which layers use one. */
static int sliding_window_note(const cj_file *f, const cj_obj *lm)
{
    int64_t w = 0;
    bool got = false, use = true;
    int rc = cj_int(f, lm, "sliding_window", false, 1, INT64_MAX / 2, &w, &got, NULL);
    if (rc == CLI_OK)
        rc = cj_bool(f, lm, "use_sliding_window", &use);
    if (rc != CLI_OK || !got)
        return rc;
    if (!use)
        printf("# sliding_window %" PRId64 " is off (use_sliding_window false)\n", w);
    else
        printf("# sliding window: add --window %" PRId64 " --causal for the layers that use it (sliding_window)\n", w);
    return CLI_OK;
}

static void usage_help(const cli_opt *opts, size_t n)
{
    cli_print_help(stdout, "ropeqk config MODEL.json [--seq-len L] [--out-prefix DIR/NAME]",
                   "Reads a Hugging Face config.json and prints the `ropeqk scores` flags of its RoPE on the\n"
                   "first line (layout, base, rotary dim, frequency scaling), then lines starting with '#':\n"
                   "the shapes (Hq, Hkv, D), the layout, and how each value was derived. Hugging Face models\n"
                   "rotate halves (half-split); weights converted to GGUF or Meta's layout are interleaved.\n"
                   "Model-family variants go on the line too: Gemma's soft-capping and query_pre_attn_scalar\n"
                   "(--softcap, --scale), Qwen-VL's M-RoPE (--mrope-section), DeepSeek's MLA in absorbed form\n"
                   "(D = kv_lora_rank + qk_rope_head_dim, --rotary-offset, --scale), gpt-oss's YaRN\n"
                   "(--yarn-no-truncate); '#' lines say what is not in the config (M-RoPE positions, sinks).\n"
                   "LongRoPE factor lists are written as PREFIX.long_factors.npy and PREFIX.short_factors.npy\n"
                   "(f64), PREFIX defaulting to the config path without .json (models/x/config.json ->\n"
                   "models/x/config.long_factors.npy). Exit status: 0 ok, 1 unreadable file, bad JSON, a\n"
                   "missing or ill-typed key or an unsupported rope type, 2 usage error.",
                   opts, n);
}

int cmd_config(int argc, char **argv)
{
    config_args a;
    memset(&a, 0, sizeof a);
    const cli_opt opts[] = {
        {"--seq-len", OPT_I64, &a.seq_len, "L",
         "dynamic, longrope: the current length L, added to the flags (default: left to scores)", OPT_POSITIVE, 0, 0,
         NULL, NULL},
        {"--out-prefix", OPT_STR, &a.prefix, "PREFIX",
         "where factor lists go: PREFIX.long_factors.npy ... (default: the config path without .json)", 0, 0, 0,
         NULL, NULL},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    bool help = false;
    int rc = cli_take_positional("config", opts, nopts, &argc, argv, &a.path);
    if (rc == CLI_OK)
        rc = cli_parse("config", opts, nopts, argc, argv, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        usage_help(opts, nopts);
        return CLI_OK;
    }
    if (!a.path) {
        cli_err("config: a config.json file is required (see ropeqk config --help)");
        return CLI_USAGE;
    }
    cj_file f;
    if ((rc = cj_open(&f, a.path)) != CLI_OK)
        return rc;
    model_rope m;
    memset(&m, 0, sizeof m);
    char *prefix = NULL;
    if ((rc = cj_model_objects(&f, &m.lm, &m.rs)) != CLI_OK || (rc = read_shapes(&f, &m)) != CLI_OK ||
        (rc = read_scaling(&f, &m)) != CLI_OK)
        goto done;
    const bool uses_len = m.sc.type == ROPEQK_SCALING_DYNAMIC || m.sc.type == ROPEQK_SCALING_LONGROPE;
    if (uses_len)
        m.sc.seq_len = a.seq_len;
    /* the library validates the whole set and gives the attention factor */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = m.interleaved ? ROPEQK_INTERLEAVED : ROPEQK_HALF_SPLIT;
    p.rotary_dim = (int32_t)m.R;
    p.base = m.theta;
    p.scaling = m.sc;
    double *inv = malloc((size_t)(m.R / 2) * sizeof *inv), attn = 1.0;
    ropeqk_status st = inv ? ropeqk_inv_freq(&p, m.D, inv, &attn) : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    free(inv);
    if (st != ROPEQK_SUCCESS) {
        char what[600];
        snprintf(what, sizeof what, "config: %s: rope type '%s' with these parameters", a.path, m.type_name);
        cli_lib_err(what, st, NULL);
        rc = CLI_RUNTIME;
        goto done;
    }

    strbuf line, notes;
    line.len = notes.len = 0;
    line.buf[0] = notes.buf[0] = '\0';
    sb_add(&line, "--layout %s", m.interleaved ? "interleaved" : "half-split");
    flag_num(&line, "--base", m.theta);
    flag_num(&line, "--rotary-dim", (double)m.R);
    if (m.sc.type != ROPEQK_SCALING_NONE)
        sb_add(&line, " --scaling %s", cli_scaling_names[m.sc.type]);
    if (m.sc.factor != 0.0)
        flag_num(&line, "--factor", m.sc.factor);
    if (m.sc.original_max_position)
        flag_num(&line, "--original-max-pos", (double)m.sc.original_max_position);
    if (m.sc.seq_len)
        flag_num(&line, "--seq-len", (double)m.sc.seq_len);
    if (m.sc.beta_fast != 0.0)
        flag_num(&line, "--beta-fast", m.sc.beta_fast);
    if (m.sc.beta_slow != 0.0)
        flag_num(&line, "--beta-slow", m.sc.beta_slow);
    if (m.sc.yarn_no_truncate)
        sb_add(&line, " --yarn-no-truncate");
    if (m.sc.attention_factor != 0.0)
        flag_num(&line, "--attention-factor", m.sc.attention_factor);
    if (m.sc.low_freq_factor != 0.0)
        flag_num(&line, "--low-freq-factor", m.sc.low_freq_factor);
    if (m.sc.high_freq_factor != 0.0)
        flag_num(&line, "--high-freq-factor", m.sc.high_freq_factor);
    if ((rc = config_variants(&f, &m, &line, &notes)) != CLI_OK)
        goto done;
    if (m.sc.type == ROPEQK_SCALING_LONGROPE) {
        size_t plen = strlen(a.path);
        const char *pre = a.prefix;
        if (!pre) {
            if (!(prefix = malloc(plen + 1))) {
                cli_err("config: out of memory");
                rc = CLI_RUNTIME;
                goto done;
            }
            memcpy(prefix, a.path, plen + 1);
            if (plen > 5 && strcmp(prefix + plen - 5, ".json") == 0)
                prefix[plen - 5] = '\0';
            pre = prefix;
        }
        char lp[4096], sp[4096];
        snprintf(lp, sizeof lp, "%s.long_factors.npy", pre);
        snprintf(sp, sizeof sp, "%s.short_factors.npy", pre);
        if ((rc = save_list(lp, m.long_f, m.R / 2)) != CLI_OK || (rc = save_list(sp, m.short_f, m.R / 2)) != CLI_OK)
            goto done;
        flag_path(&line, "--long-factors", lp);
        flag_path(&line, "--short-factors", sp);
        sb_add(&notes, "# longrope: wrote %s and %s (%" PRId64 " factors each, f64); long factors apply when the "
                       "length L > %" PRId64 ", short ones otherwise\n", lp, sp, m.R / 2,
               m.sc.original_max_position);
    }
    char attn_s[64];
    snprintf(attn_s, sizeof attn_s, "%.6g", attn);
    printf("%s\n", line.buf);
    printf("# config: %s (model_type %s)%s\n", a.path, m.model_type ? m.model_type : "not given",
           m.lm.is_text_config ? ", language model from text_config" : "");
    printf("# shapes: Hq %" PRId64 ", Hkv %" PRId64 ", D %" PRId64 ": Q [B,%" PRId64 ",Sq,%" PRId64 "], K [B,%" PRId64
           ",Sk,%" PRId64 "] (%s, %" PRId64 " query head%s per key head); rotary dim %" PRId64 " of %" PRId64 "\n",
           m.Hq, m.Hkv, m.D, m.Hq, m.D, m.Hkv, m.D, m.Hkv == m.Hq ? "MHA" : m.Hkv == 1 ? "MQA" : "GQA",
           m.Hq / m.Hkv, m.Hq / m.Hkv == 1 ? "" : "s", m.R, m.D);
    if (m.interleaved)
        printf("# layout: interleaved: %s rotates pairs (x[2i], x[2i+1]) (rotate_every_two)\n", m.model_type);
    else
        printf("# layout: half-split: Hugging Face checkpoints rotate halves (rotate_half); weights converted to "
               "GGUF or Meta's layout (permuted q/k projections) are interleaved: use --layout interleaved for "
               "those\n");
    char theta_s[64];
    cli_fmt_double(theta_s, sizeof theta_s, m.theta);
    printf("# base: %s %s\n", m.has_theta ? "rope_theta" : "rope_theta absent: the Hugging Face default", theta_s);
    if (m.scale == 0.0)
        printf("# scale: 1/sqrt(D) = 1/sqrt(%" PRId64 "), the ropeqk default; add --causal for decoder "
               "self-attention\n", m.D);
    else
        printf("# scale: the model's, below; add --causal for decoder self-attention\n");
    printf("# rope type: %s%s; attention factor %s%s\n", m.type_name,
           strcmp(m.type_name, "su") == 0 ? " (legacy name of longrope)" : "", attn_s,
           attn != 1.0 ? " (cos and sin are multiplied: scores carry its square)" : "");
    if (m.sc.type == ROPEQK_SCALING_YARN)
        printf("# yarn: factor as given in the config (vLLM, TGI and llama.cpp do the same; some transformers "
               "releases replace it by max_position_embeddings / original_max_position_embeddings when the latter "
               "is set: transformers issue #38224)\n");
    if (m.sc.type == ROPEQK_SCALING_LONGROPE && m.sc.factor != 0.0 && m.has_l0 && m.has_max_pos &&
        m.sc.factor == (double)m.max_pos / (double)m.l0)
        printf("# longrope: factor = max_position_embeddings %" PRId64 " / original_max_position_embeddings %" PRId64
               " (the Hugging Face default)\n", m.max_pos, m.l0);
    fputs(notes.buf, stdout);
    if (uses_len && !a.seq_len)
        printf("# seq_len: not given: `ropeqk scores` takes L = max(q_pos_offset + Sq, k_pos_offset + Sk); with "
               "position files add --seq-len L (or run ropeqk config --seq-len L)\n");
    if (a.seq_len && !uses_len)
        printf("# --seq-len %" PRId64 " ignored: rope type %s does not depend on the length\n", a.seq_len,
               m.type_name);
    if (m.has_max_pos || m.has_l0) {
        printf("# context:");
        if (m.has_max_pos)
            printf(" max_position_embeddings %" PRId64 "%s", m.max_pos, m.has_l0 ? "," : "");
        if (m.has_l0)
            printf(" original_max_position_embeddings %" PRId64, m.l0);
        printf("\n");
    }
    if ((rc = sliding_window_note(&f, &m.lm)) != CLI_OK)
        goto done;
    rc = CLI_OK;
done:
    free(prefix);
    free(m.long_f);
    free(m.short_f);
    cj_close(&f);
    return rc;
}
