/* The ropeqk command: declarations shared by its source files.
 *
 *   main.c     dispatch, top-level help and version
 *   opts.c     the table-driven option parser and strict number parsing
 *   common.c   messages, number formatting, the default seed (random numbers, clock, f16/bf16
 *              conversion, .npy files, plots, atomic writes: the support library, support/)
 *   devices.c  the `devices` subcommand (ropeqk_list_devices; diag.c: each device's configuration,
 *              program dump and test build)
 *   device.c   opening a device (or the scalar path) by spec, on any backend
 *   qk_inputs.c  what scores and attention share: options, Q/K/V and position files (qk_inputs.h)
 *   scores.c   the `scores` subcommand (inputs from .npy files, output to .npy)
 *   attention.c  the `attention` subcommand (O = softmax(S) V, and LSE, to .npy)
 *   scaling_opts.c  the frequency-scaling flags of `scores` (--scaling, --factor, ...): table rows,
 *              validation (usage errors naming the flag), factor lists from .npy files
 *   config.c   the `config` subcommand: a Hugging Face config.json to `scores` flags (cJSON)
 *   verify.c   scalar-path verification (threaded), shared by scores/attention --check, check and demo
 *   check.c    the `check` subcommand (randomized sweep)
 *   demo.c     the `demo` subcommand (demo_attn.c: its attention part)
 */
#ifndef ROPEQK_CLI_H
#define ROPEQK_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "npy.h"
#include "ropeqk.h"

/* ---- exit codes ----------------------------------------------------------------------------- */
enum {
    CLI_OK = 0,
    CLI_RUNTIME = 1,      /* device, I/O, bad input file */
    CLI_USAGE = 2,        /* bad command line */
    CLI_CHECK_FAILED = 3, /* the device result disagrees with the scalar path */
};

/* Error threshold of every check (conventions metric, docs/conventions.md). */
#define CLI_TOLERANCE 1e-5
/* --math fast's bound on a device whose plans take the tensor-core path (docs/tensor-cores.md: the
 * tests hold fast mode to it on unit-scale inputs); elsewhere fast mode computes in f32 anyway */
#define CLI_FAST_TOLERANCE 2e-3

/* ---- options (opts.c) ----------------------------------------------------------------------- */
typedef enum {
    OPT_FLAG,   /* no value; dest: int*, set to 1 */
    OPT_STR,    /* dest: const char ** (points into argv) */
    OPT_F64,    /* dest: double *, finite */
    OPT_I64,    /* dest: int64_t *, within [lo, hi] */
    OPT_CHOICE, /* dest: int *, index into choices (NULL-terminated) */
} cli_opt_kind;

/* Extra constraints on numbers. */
enum {
    OPT_POSITIVE = 1 << 0, /* > 0 */
    OPT_NONZERO = 1 << 1,  /* != 0 */
    OPT_EVEN = 1 << 2,     /* integer multiple of 2 */
};

typedef struct {
    const char *name;    /* "--base" */
    cli_opt_kind kind;
    void *dest;
    const char *metavar; /* "F", "FILE", ... (NULL for flags and choices) */
    const char *help;    /* one line; mention the default */
    int flags;           /* OPT_POSITIVE | ... */
    int64_t lo, hi;      /* OPT_I64 range; lo == hi == 0 means the whole int64 range */
    const char *const *choices;
    int *seen;           /* optional: set to 1 when the option is given */
} cli_opt;

/* Parses argv[1..argc) (argv[0] is the subcommand name) against the table. Returns CLI_OK, or
 * CLI_USAGE after printing a message naming the flag. *help is set when -h/--help was given. */
int cli_parse(const char *cmd, const cli_opt *opts, size_t n, int argc, char **argv, bool *help);
/* Removes the one positional argument (an argument not starting with "--" that is not the value
 * of a value-taking option of the table) from argv, compacting it; *pos receives it (NULL if none).
 * Returns CLI_OK, or CLI_USAGE after a message when there are several. */
int cli_take_positional(const char *cmd, const cli_opt *opts, size_t n, int *argc, char **argv, const char **pos);
/* Prints "usage" then the option table (name, metavar, help) to f. */
void cli_print_help(FILE *f, const char *usage, const char *about, const cli_opt *opts, size_t n);

/* Strict number parsing: the whole string, no leading space, in range. 0 ok, -1 not a number,
 * -2 out of range. */
int cli_parse_i64(const char *s, int64_t *out);
int cli_parse_f64(const char *s, double *out);

/* ---- common.c ------------------------------------------------------------------------------- */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "what: <status string>" (+ the build log on ROPEQK_ERR_BUILD) on stderr. */
/* Remembers the library's current message: cli_lib_err prints a later one that differs (the
 * reason of the failure it reports) whatever the status. */
void cli_error_mark(void);
void cli_lib_err(const char *what, int status, const ropeqk_ctx *ctx);
/* Shortest "%.Ng" (N = 1..17) that reads back as v; integers up to 2^53 without exponent. */
void cli_fmt_double(char *buf, size_t len, double v);
/* Default seed: time and pid mixed. */
uint64_t cli_default_seed(void);
/* npy_load, and on failure "<cmd>: <flag>: <why, naming the file>" on stderr: CLI_OK or CLI_RUNTIME. */
int cli_load_npy(const char *cmd, const char *flag, const char *path, npy_array *a);

/* ---- device.c ------------------------------------------------------------------------------- */
typedef struct {
    bool ref;        /* the scalar C path (ropeqk_scores_ref) */
    ropeqk_ctx *ctx; /* otherwise */
    char name[640];  /* "opencl:0:0 <device description>" or "scalar reference path (host C, fp64)" */
    char why[160];   /* why this device was chosen */
} cli_device;

#define CLI_DEVICE_HELP "P:D (opencl:P:D), vulkan[:N], name substring, or ref = scalar C path (default: $ROPEQK_DEVICE, else the first device: `ropeqk devices`)"

int cmd_devices(int argc, char **argv);
/* diag.c: prints the profile (and why) and build options of a listed device (d->usable); with
 * dump_dir writes its program text and options there (or says it has none); with build,
 * test-builds its kernels. 0 on success, -1 after printing a failure. */
int cli_device_diag(const ropeqk_device_info *d, const char *dump_dir, bool build);
/* Opens the device named by spec (NULL: $ROPEQK_DEVICE, else the first; "ref": the scalar path).
 * Returns CLI_OK, or CLI_RUNTIME after printing why; with allow_ref false, "ref" is a usage error
 * (CLI_USAGE). */
int cli_device_open(const char *cmd, const char *spec, bool allow_ref, cli_device *dev);
void cli_device_close(cli_device *dev);
/* Runs the scores on the device (ropeqk_scores) or the scalar path, f32 output. */
ropeqk_status cli_device_scores(cli_device *dev, const ropeqk_params *p,
                                const ropeqk_tensor *q, const void *qd, const ropeqk_tensor *k, const void *kd,
                                const int32_t *qpos, const int32_t *kpos,
                                const ropeqk_tensor *out, float *outd);
/* Runs attention on the device (ropeqk_attention) or the scalar path (ropeqk_attention_ref), f32
 * O and LSE (lse NULL: none). */
ropeqk_status cli_device_attention(cli_device *dev, const ropeqk_params *p, const ropeqk_tensor *q, const void *qd,
                                   const ropeqk_tensor *k, const void *kd, const ropeqk_tensor *v, const void *vd,
                                   const int32_t *qpos, const int32_t *kpos, const ropeqk_tensor *out, float *outd,
                                   const ropeqk_tensor *lse, float *lsed);

/* ---- verify.c ------------------------------------------------------------------------------- */
/* Runs the scalar path (fp64) on all of Q/K and compares with `s` by ropeqk_max_error, split into
 * (batch, key head) groups over a few threads. Returns a library status. */
ropeqk_status cli_verify(const ropeqk_params *p,
                         const ropeqk_tensor *q, const void *qd, const ropeqk_tensor *k, const void *kd,
                         const int32_t *qpos, const int32_t *kpos,
                         const ropeqk_tensor *s, const float *sd, double *max_err, int64_t *mismatch);

/* The same for attention: ropeqk_attention_ref (fp64) against O (and LSE, when lse is non-NULL) by
 * ropeqk_attention_max_error: *max_err is O's error, *max_lse_rel LSE's, *mismatch the rows that
 * disagree on being fully masked or hold a NaN. */
ropeqk_status cli_verify_attention(const ropeqk_params *p, const ropeqk_tensor *q, const void *qd,
                                   const ropeqk_tensor *k, const void *kd, const ropeqk_tensor *v, const void *vd,
                                   const int32_t *qpos, const int32_t *kpos, const ropeqk_tensor *o, const void *od,
                                   const ropeqk_tensor *lse, const void *lsed, double *max_err, double *max_lse_rel,
                                   int64_t *mismatch);

/* ---- scaling_opts.c ------------------------------------------------------------------------- */
/* --scaling choices, in ropeqk_scaling_type order, NULL-terminated. */
extern const char *const cli_scaling_names[];

/* The raw scaling flags of `scores` (0 / NULL = not given; all numbers must be > 0). */
typedef struct {
    int type; /* index into cli_scaling_names == ropeqk_scaling_type */
    double factor, beta_fast, beta_slow, attention_factor, low_freq_factor, high_freq_factor;
    int64_t original_max_pos, seq_len;
    const char *long_factors, *short_factors, *freq_factors; /* .npy paths */
    int yarn_no_truncate;
} cli_scaling_args;

#define CLI_SCALING_ROWS 14
/* Writes the CLI_SCALING_ROWS option rows of the scaling flags (and --window into *window) to rows. */
void cli_scaling_rows(cli_scaling_args *s, int64_t *window, cli_opt *rows);

/* Factor lists loaded from the .npy files (owned). */
typedef struct {
    double *long_f, *short_f, *freq;
} cli_scaling_lists;

/* The checks of cli_scaling_build that need no file (run them before reading any). */
int cli_scaling_check(const char *cmd, const cli_scaling_args *s, bool per_token);
/* Checks the flags against --scaling (CLI_USAGE, naming the flag: "--scaling yarn needs --factor",
 * "--beta-fast only applies to --scaling yarn"), loads the factor lists (R/2 entries each: a length
 * mismatch is CLI_USAGE naming the file and both lengths, an unreadable or bad file CLI_RUNTIME) and
 * fills *out. per_token: positions come from files (dynamic/longrope then need --seq-len). */
int cli_scaling_build(const char *cmd, const cli_scaling_args *s, int64_t R, bool rotary_dim_given, bool per_token,
                      ropeqk_scaling *out, cli_scaling_lists *lists);
void cli_scaling_free(cli_scaling_lists *l);
/* "yarn(s=4,L0=32768)"-style summary of a scaling (for check and messages); "" for none. */
void cli_scaling_describe(const ropeqk_scaling *s, char *buf, size_t len);

/* ---- subcommands ---------------------------------------------------------------------------- */
int cmd_scores(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_tune(int argc, char **argv);
/* demo_attn.c: the attention part of `demo` on an open device (T tokens, `rows` query rows checked).
 * Returns CLI_OK, CLI_CHECK_FAILED or CLI_RUNTIME. */
int cli_demo_attention(cli_device *dev, int64_t T, int64_t rows, int64_t seed);

#endif
