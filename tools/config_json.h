/* Typed access to a Hugging Face config.json through cJSON, for the `config` subcommand: every
 * failure prints "config: FILE: ..." naming the key (as "rope_scaling.factor" inside an object)
 * and returns CLI_RUNTIME. A key whose value is null counts as absent (HF writes "head_dim": null). */
#ifndef ROPEQK_CONFIG_JSON_H
#define ROPEQK_CONFIG_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

typedef struct {
    const char *path;
    char *text;
    cJSON *root;
} cj_file;

/* An object of the file: the language model (the top level, or text_config of a multimodal config)
 * or its rope_scaling block; item NULL = absent (then every key is absent). */
typedef struct {
    const cJSON *item;
    const char *name;    /* "" for the top level */
    bool is_params;      /* transformers v5 rope_parameters rather than rope_scaling */
    bool is_text_config;
} cj_obj;

/* Reads and parses path (CLI_RUNTIME with the line of a syntax error); the top level must be an object. */
int cj_open(cj_file *f, const char *path);
void cj_close(cj_file *f);
/* Picks the language-model object and its rope_scaling (else rope_parameters) object. */
int cj_model_objects(const cj_file *f, cj_obj *lm, cj_obj *rs);
int cj_fail(const cj_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Each: CLI_OK with *present telling whether the key was there (required and absent: CLI_RUNTIME). */
int cj_num(const cj_file *f, const cj_obj *o, const char *key, bool required, double *out, bool *present);
int cj_num_pos(const cj_file *f, const cj_obj *o, const char *key, bool required, double *out, bool *present);
int cj_int(const cj_file *f, const cj_obj *o, const char *key, bool required, int64_t lo, int64_t hi, int64_t *out,
           bool *present, const char *why);
int cj_str(const cj_file *f, const cj_obj *o, const char *key, bool required, const char **out);
int cj_bool(const cj_file *f, const cj_obj *o, const char *key, bool *out); /* optional; unchanged if absent */
/* A required list of `want` positive finite numbers (malloc'd); a length mismatch names both lengths. */
int cj_list(const cj_file *f, const cj_obj *o, const char *key, int64_t want, int64_t R, double **out);

#endif
