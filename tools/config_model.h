/* What `ropeqk config` resolves from a Hugging Face config.json, shared by config.c (shapes and
 * frequency scaling) and config_variants.c (model-family variants: soft-capping, M-RoPE, MLA, sinks). */
#ifndef ROPEQK_CONFIG_MODEL_H
#define ROPEQK_CONFIG_MODEL_H

#include "config_json.h"
#include "ropeqk.h"

#include <stddef.h>

typedef struct {
    char buf[8192];
    size_t len;
} strbuf;

/* config_strbuf.c: appends to b (truncating at its end) */
void sb_add(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* " --flag value" with the value as the shortest round-tripping number */
void flag_num(strbuf *b, const char *flag, double v);

/* The model's RoPE, resolved from the JSON. */
typedef struct {
    cj_obj lm, rs;           /* the language-model object; rope_scaling (or rope_parameters), may be empty */
    int64_t Hq, Hkv, D, R, max_pos, l0;
    double theta, prf;
    bool has_theta, has_max_pos, has_l0, interleaved;
    const char *model_type, *type_name;
    ropeqk_scaling sc;
    double *long_f, *short_f;
    /* variants (config_variants.c) */
    bool mrope, mrope_interleaved, mla;
    int32_t mrope_section[3];
    int64_t rotary_offset, dv, qk_head_dim; /* MLA: rope dims after the latent; V = the latent (dv dims of K) */
    double scale;              /* != 0: the model's score scale when it is not 1/sqrt(D) */
} model_rope;

/* Before read_scaling: DeepSeek's MLA shapes (absorbed form) replace D, R and Hkv. */
int config_mla_shapes(const cj_file *f, model_rope *m);
/* After read_scaling: the variant flags go on `line`, explanations on `notes` ('#' lines). */
int config_variants(const cj_file *f, model_rope *m, strbuf *line, strbuf *notes);

#endif
