/* ropeqk-bench: shared declarations of the benchmark program (bench.c drives, impl.c holds the
 * implementations being compared, plot.c draws the chart). Not part of the library. */
#ifndef ROPEQK_BENCH_H
#define ROPEQK_BENCH_H

#include "ropeqk_opencl.h"

#include <stdbool.h>
#include <stdint.h>

/* One problem: Q [B,Hq,Sq,D], K [B,Hkv,Sk,D], BHSD contiguous; positions are offset + row. */
typedef struct {
    char name[48];
    int B, Hq, Hkv, Sq, Sk, D;
    int64_t q_off, k_off;
} bshape;

/* The implementations, in table order. */
typedef enum {
    IMPL_FUSED_F32,
    IMPL_FUSED_F16,
    IMPL_UNFUSED_CLBLAST,
    IMPL_CBLAS,
    IMPL_REF,
    IMPL_COPY_BUFFER, /* decode rows only: bandwidth yardsticks, not implementations of the op */
    IMPL_COPY_KERNEL,
    IMPL_COUNT
} bimpl;

extern const char *const bimpl_name[IMPL_COUNT];
extern const char *const bimpl_dtype[IMPL_COUNT];

/* The OpenCL objects every implementation shares (one context, one in-order profiling queue). */
typedef struct {
    cl_context cl;
    cl_command_queue queue;
    cl_device_id dev;
    ropeqk_ctx *rq;
    cl_program base_prog; /* baseline RoPE kernel + copy kernel */
    cl_kernel rope_plain, copy16;
} benv;

/* Per-shape state: host inputs, device buffers, scratch of the baselines. */
typedef struct {
    bshape s;
    ropeqk_params p;
    ropeqk_tensor tq, tk, tq16, tk16, to;
    float *hq, *hk;        /* host inputs, f32 */
    uint16_t *hq16, *hk16; /* the same values rounded to f16 */
    cl_mem q32, k32, q16, k16, out;
    cl_mem qr, kr, inv;    /* unfused: rotated Q, K (f32) and fp32 inverse frequencies */
    cl_mem cpy_src, cpy_dst;
    size_t cpy_bytes;
    float *hqr, *hkr, *hout, *cs_q, *cs_k; /* cblas: rotated copies, output, cos/sin tables */
    double *ref_out;
    cl_event last_ev;      /* fused: event of the last score kernel (NULL for other impls) */
    bool has_unfused, has_cblas, has_copy;
} bcase;

bool bimpl_available(bimpl i);
/* Builds the baseline OpenCL program on env. 0 on success. */
int benv_build_baselines(benv *e);
/* Allocates and fills the inputs of a shape (deterministic pseudo-random values in [-0.5, 0.5)). */
int bcase_init(benv *e, bcase *c, const bshape *s, bool want_copy);
void bcase_free(bcase *c);
/* Enqueues (device impls) or runs (host impls) one complete evaluation; does not wait for device
 * work. 0 on success, else a status/error code (printed by the caller). */
int bimpl_run(benv *e, bcase *c, bimpl i);
/* Bytes a copy yardstick moves per run (read + write), 0 for other impls. */
size_t bimpl_copy_bytes(const bcase *c, bimpl i);
/* Reads the scores of the last run into host memory (f32 [B,Hq,Sq,Sk]). */
int bimpl_fetch(benv *e, bcase *c, bimpl i, float *out);

/* --host-cost: host time per decode-shaped enqueue over n calls (host_cost.c). 0 on success. */
int bench_host_cost(benv *e, int n);
/* --paged: paged-KV decode over one sequence of len tokens, f32 and f16 caches (paged.c). 0 on success. */
int bench_paged(benv *e, int64_t len);

/* Minimal SVG bar chart: values[shape][impl] (<= 0: no bar), log-scale GFLOP/s. */
int plot_svg(const char *path, int nshapes, const char *const *shape_names, int nimpl,
             const char *const *impl_names, const double *values);

#endif
