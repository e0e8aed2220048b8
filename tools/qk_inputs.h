/* What `scores` and `attention` share: their common options (Q and K files, memory order, dtype,
 * RoPE parameters, positions, scaling, mask, device, check), loading Q/K/V and position files from
 * .npy, and the parameters built from the flags. qk_inputs.c. */
#ifndef ROPEQK_CLI_QK_INPUTS_H
#define ROPEQK_CLI_QK_INPUTS_H

#include "cli.h"
#include "npy.h"

/* The common flags (0 / NULL = not given). */
typedef struct {
    const char *q, *k, *q_pos, *k_pos, *device;
    int layout, format, causal, conjugate, check, dtype;
    double base, scale;
    int64_t rotary_dim, q_off, k_off, window;
    cli_scaling_args sc;
    /* model-family variants (docs/conventions.md section 11) */
    double softcap;
    int64_t rotary_offset;
    const char *mrope;    /* "T,H,W" */
    int mrope_interleaved;
    int math;             /* --math: 0 accurate, 1 fast (ropeqk_math) */
} cli_qk_args;

#define CLI_QK_MAX_OPTS 48

/* Sets the defaults (base 10000) and writes the option table: --q, --k, then the command's own
 * `nio` rows (its other files), the RoPE and mask flags, the scaling flags, --device and --check
 * (described by check_help). Returns the row count (<= CLI_QK_MAX_OPTS). */
size_t cli_qk_opts(cli_qk_args *a, const cli_opt *io, size_t nio, const char *check_help, cli_opt *opts);

/* Loaded inputs and the parameters built from the flags. */
typedef struct {
    bool bshd, bf16;
    npy_array qa, ka;
    ropeqk_tensor qt, kt;
    int32_t *qpos, *kpos; /* NULL: offsets */
    cli_scaling_lists lists;
    ropeqk_params p;      /* points into lists */
} cli_qk_inputs;

/* Checks the scaling flags (usage errors before any file is read), loads Q and K, builds the
 * scaling once R is known, loads the position files and fills in->p. Returns CLI_OK, CLI_USAGE or
 * CLI_RUNTIME (message printed, naming the flag or file). Call cli_qk_free in every case. */
int cli_qk_load(const char *cmd, const cli_qk_args *a, cli_qk_inputs *in);
void cli_qk_free(cli_qk_inputs *in);

/* Loads a 4-D Q/K/V tensor: f32 or f16 (or raw bf16 bits in '<u2' with bf16), C order, in
 * [B,H,S,D] (or [B,S,H,D] with bshd) order, and describes it in *t. CLI_OK or CLI_RUNTIME. */
int cli_load_tensor(const char *cmd, const char *flag, const char *path, bool bshd, bool bf16, npy_array *a,
                    ropeqk_tensor *t);

/* "1,32,1024,128" */
void cli_shape_str(const npy_array *a, char *buf, size_t len);
/* "<f4", "<f2", or "bf16" for '<u2' */
const char *cli_npy_dtype_str(const npy_array *a);

/* The library's verdict on the shapes, printed as "<cmd>: <what the files are>: <status>".
 * st is the result of a validation call with NULL data (NULL_POINTER = valid). Returns CLI_OK,
 * CLI_USAGE for scaling parameters, else CLI_RUNTIME. */
int cli_qk_validation(const char *cmd, const cli_qk_args *a, const cli_qk_inputs *in, const char *extra,
                      ropeqk_status st);

/* After a run: the "rope: ..." line (scaling, attention factor, window) when any is set. */
void cli_qk_print_rope(const cli_qk_inputs *in, const cli_qk_args *a);

/* Saves a float array of ndim dims as '<f4' .npy (atomically). CLI_OK or CLI_RUNTIME (message names flag). */
int cli_save_f32(const char *cmd, const char *flag, const char *path, const float *data, int ndim,
                 const int64_t *shape);

#endif
