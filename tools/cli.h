/* The ropeqk command: declarations shared by its source files.
 *
 *   main.c     dispatch, top-level help and version
 *   opts.c     the table-driven option parser and strict number parsing
 *   common.c   messages, random numbers, timing, half-precision conversion, small file helpers
 *   device.c   the `devices` subcommand, opening a device (or the scalar path) by spec
 *   scores.c   the `scores` subcommand (inputs from .npy files, output to .npy)
 *   verify.c   scalar-path verification (threaded), shared by scores --check, check and demo
 *   check.c    the `check` subcommand (randomized sweep)
 *   demo.c     the `demo` subcommand
 *   plot.c     PNG/SVG plot writer (font.c: the bitmap font it uses)
 */
#ifndef ROPEQK_CLI_H
#define ROPEQK_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ropeqk.h"

/* ---- exit codes ----------------------------------------------------------------------------- */
enum {
    CLI_OK = 0,
    CLI_RUNTIME = 1,      /* device, I/O, bad input file */
    CLI_USAGE = 2,        /* bad command line */
    CLI_CHECK_FAILED = 3, /* the device result disagrees with the scalar path */
};

/* Error threshold of every check (ROPE.md metric). */
#define CLI_TOLERANCE 1e-5

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
/* Prints "usage" then the option table (name, metavar, help) to f. */
void cli_print_help(FILE *f, const char *usage, const char *about, const cli_opt *opts, size_t n);

/* Strict number parsing: the whole string, no leading space, in range. 0 ok, -1 not a number,
 * -2 out of range. */
int cli_parse_i64(const char *s, int64_t *out);
int cli_parse_f64(const char *s, double *out);

/* ---- common.c ------------------------------------------------------------------------------- */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "what: <status string>" (+ the build log on ROPEQK_ERR_BUILD) on stderr. */
void cli_lib_err(const char *what, int status, const ropeqk_ctx *ctx);
double cli_now(void); /* monotonic seconds */

typedef struct { uint64_t s; } cli_rng;
void cli_rng_seed(cli_rng *r, uint64_t seed);
uint64_t cli_rng_next(cli_rng *r);
double cli_rng_uniform(cli_rng *r);          /* [0, 1) */
double cli_rng_normal(cli_rng *r);           /* N(0, 1) */
int64_t cli_rng_range(cli_rng *r, int64_t lo, int64_t hi); /* [lo, hi] */
uint16_t cli_float_to_half(float f);         /* round to nearest even */
/* Default seed: time and pid mixed. */
uint64_t cli_default_seed(void);
/* Median of n doubles (sorts v). */
double cli_median(double *v, size_t n);
/* Writes `len` bytes to path through "<path>.tmp.<pid>" + rename; nothing at path on error. */
int cli_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* ---- device.c ------------------------------------------------------------------------------- */
typedef struct {
    bool ref;        /* the scalar C path (ropeqk_scores_ref) */
    ropeqk_ctx *ctx; /* otherwise */
    char name[640];  /* "0:0 <device name> (<platform>)" or "scalar reference path (host, fp64)" */
    char why[160];   /* why this device was chosen */
} cli_device;

#define CLI_DEVICE_HELP "P:D, name substring, or ref = scalar C path (default: $ROPEQK_DEVICE, else first)"

int cmd_devices(int argc, char **argv);
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
/* True when no OpenCL platform exists (the ICD loader finds none). */
bool cli_no_platform(void);

/* ---- verify.c ------------------------------------------------------------------------------- */
/* Runs the scalar path (fp64) on all of Q/K and compares with `s` by ropeqk_max_error, split into
 * (batch, key head) groups over a few threads. Returns a library status. */
ropeqk_status cli_verify(const ropeqk_params *p,
                         const ropeqk_tensor *q, const void *qd, const ropeqk_tensor *k, const void *kd,
                         const int32_t *qpos, const int32_t *kpos,
                         const ropeqk_tensor *s, const float *sd, double *max_err, int64_t *mismatch);

/* ---- subcommands ---------------------------------------------------------------------------- */
int cmd_scores(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_demo(int argc, char **argv);

#endif
