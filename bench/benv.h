/* ropeqk-bench's OpenCL environment: one context and in-order profiling queue that the library
 * borrows (a ropeqk context on them, program built) and the baselines' kernels compiled on them.
 * Every OpenCL benchmark of the bench runs in it. */
#ifndef ROPEQK_BENCH_BENV_H
#define ROPEQK_BENCH_BENV_H

#include "ropeqk_opencl.h"

typedef struct {
    cl_context cl;
    cl_command_queue queue;
    cl_device_id dev;
    ropeqk_ctx *rq;
    cl_program base_prog; /* baseline RoPE kernel, copy kernel, softmax kernel (attention baseline) */
    cl_kernel rope_plain, copy16, softmax;
} benv;

/* Opens the device named by spec (NULL: $ROPEQK_DEVICE, else the first; see
 * ropeqk_opencl_select_device), why it was chosen in why. On failure *what names the step and e is
 * left empty. Returns an OpenCL or ropeqk status. */
int benv_open(benv *e, const char *spec, char *why, size_t why_len, const char **what);
/* Releases everything; e is left empty (closing an empty env is fine). */
void benv_close(benv *e);
/* A read-write buffer, initialised from host (when non-NULL); NULL without trying when *err is set,
 * or when e has no OpenCL context (--vulkan without OpenCL: cases then hold host data only). */
cl_mem bench_mkbuf(benv *e, size_t bytes, const void *host, cl_int *err);
/* "ropeqk-bench: what: err (status string)" on stderr; returns 1 (the exit status of a setup error). */
int bench_fail(const char *what, int err);
/* A second library context on e's OpenCL context and queue made with the environment variable name
 * set to value (the variable restored after): a path of the library's turned off for a baseline in the
 * same run. Returns a ropeqk status. */
int bench_ctx_with_env(benv *e, const char *name, const char *value, ropeqk_ctx **out);
/* m wrapped (ropeqk_opencl_buffer_wrap) as a buffer of ctx for the neutral runs (ropeqk_plan_run,
 * ropeqk_paged_run), which every timed run of the bench goes through; wrapping is the interop part,
 * done once at setup. NULL for a NULL m, or when *err is set (nothing tried); a failure sets *err.
 * The caller destroys it (ropeqk_buffer_destroy, NULL-safe). */
ropeqk_buffer *bench_wrap(ropeqk_ctx *ctx, cl_mem m, int *err);

#endif
