/* Helpers of the `ropeqk` command tests: run the command, temporary folders, .npy comparisons. */
#ifndef ROPEQK_TEST_CLI_UTIL_H
#define ROPEQK_TEST_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npy.h"
#include "ropeqk.h"

typedef struct {
    int status;   /* exit status, or -N when killed by signal N (a crash or the timeout) */
    char *out;    /* stdout, NUL-terminated */
    char *err;    /* stderr, NUL-terminated */
} cli_result;

/* Runs ROPEQK_EXE with args (NULL-terminated) in cwd (NULL: unchanged), with the "NAME=VALUE"
 * strings of env (NULL-terminated, or NULL) added, killed after timeout_s. Returns false if it
 * could not be started. */
bool cli_run(cli_result *r, const char *cwd, const char *const *env, int timeout_s, const char *const *args);
void cli_result_free(cli_result *r);

/* mkdtemp under $TMPDIR or /tmp; rm_tree removes it and the files in it (one level). */
bool tmpdir_make(char *buf, size_t len);
void tmpdir_remove(const char *dir);
bool file_exists(const char *path);
/* Number of entries in dir other than . and .. (to see that no temporary file was left). */
int dir_entries(const char *dir);
bool write_bytes(const char *path, const void *data, size_t len);

/* True when ropeqk_list_devices() lists no device of that backend ("OpenCL", "Vulkan"): none
 * found, or the build has no such backend. */
bool no_backend_device(const char *backend);
/* no_backend_device("OpenCL"). */
bool no_opencl_platform(void);
/* Whether the library finds no device at all (the default device of `ropeqk_ctx_create`: OpenCL
 * first, else Vulkan): the CLI's device runs skip then. */
bool no_device(void);
/* The same for a device spec ("vulkan", "opencl:0:1", ...). */
bool no_device_for(const char *spec);

/* Splits args.txt into tokens (whitespace separated). Returns the count, tokens malloc'd in *out
 * (NULL-terminated); -1 on error. */
int read_args(const char *path, char ***out);
void free_args(char **args);

/* A [B,H,S,D] descriptor of a loaded input file (f32, f16, or '<u2' = bf16 bits), which is [B,S,H,D]
 * when bshd. */
ropeqk_tensor input_view(const npy_array *a, bool bshd);

/* Compares out.npy (f32) with expected.npy (f64) of a case folder by the docs/conventions.md metric
 * (ropeqk_max_error: max |S - E| / (scale |q_i| |k_j|) over unmasked entries; -inf exactly where
 * expected is -inf, no NaN). scale and the memory order come from the case's flags. Returns false (with msg) on a load or shape
 * problem. */
bool compare_case(const char *case_dir, char *const *flags, const char *out_path, double *max_err,
                  int64_t *mask_mismatch, char *msg, size_t msglen);

#endif
