/* ropeqk-bench: shared declarations of the benchmark program (bench.c drives, impl.c holds the
 * implementations being compared, plot.c draws the chart). Not part of the library. */
#ifndef ROPEQK_BENCH_H
#define ROPEQK_BENCH_H

#include "ropeqk_opencl.h"

#include <stdbool.h>
#include <stdio.h>
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
    cl_program base_prog; /* baseline RoPE kernel, copy kernel, softmax kernel (attention baseline) */
    cl_kernel rope_plain, copy16, softmax;
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

/* Helpers impl.c shares with the attention bench (attn_impl.c). */
uint16_t bench_f2h(float f); /* f32 -> IEEE half, round to nearest even */
/* The baseline RoPE kernel on BH heads of S rows (BHSD f32 in and out), positions pos_off + row. */
int run_rope_plain(benv *e, cl_mem x, cl_mem y, cl_mem inv, int BH, int S, int D, int pos_off);
/* Host RoPE (fp32 angle table cs [S][D], one thread), BHSD f32 in and out. */
void host_rope(const float *x, float *y, float *cs, int BH, int S, int D, int64_t pos_off, double base);
/* bench.c's clock (seconds) and median (sorts v). */
double bench_now(void);
double bench_median(double *v, int n);

/* ---- attention mode (--attention): attn_impl.c implementations, attn_bench.c driver ---------- */

/* One attention problem: Q [B,Hq,Sq,D], K [B,Hkv,Sk,D], V [B,Hkv,Sk,Dv], O [B,Hq,Sq,Dv], BHSD. */
typedef struct {
    char name[48];
    int B, Hq, Hkv, Sq, Sk, D, Dv;
    int64_t q_off, k_off;
    int causal, window;
} ashape;

/* Per-shape state; index [0] f32, [1] f16 (the same values rounded). Impls are bimpl values:
 * IMPL_FUSED_F32, IMPL_FUSED_F16, IMPL_UNFUSED_CLBLAST, IMPL_CBLAS. */
typedef struct {
    ashape s;
    ropeqk_params p;
    ropeqk_tensor tq[2], tk[2], tv[2], to;
    ropeqk_plan *plan[2];
    float *hq, *hk, *hv;
    uint16_t *hq16, *hk16, *hv16;
    cl_mem q[2], k[2], v[2], out;
    cl_mem qr, kr, inv, sp;                      /* unfused: rotated Q, K; S, then P in place */
    float *hqr, *hkr, *hsp, *hout, *cs_q, *cs_k; /* cblas: the same on the host, output, tables */
    size_t extra_bytes[IMPL_COUNT]; /* allocated beyond inputs and output (fused: estimated scratch) */
    cl_event last_ev;                /* fused: the attention kernel's event */
    bool has[IMPL_COUNT];
    const char *why_not[IMPL_COUNT];
} acase;

/* Allocates inputs (deterministic values in [-0.5, 0.5)) and what the impls in want[] need. */
int acase_init(benv *e, acase *c, const ashape *s, const bool *want);
void acase_free(acase *c);
int aimpl_run(benv *e, acase *c, bimpl i); /* enqueues (device) or runs (host) one evaluation */
int aimpl_fetch(benv *e, acase *c, bimpl i, float *out); /* O of the last run, f32 [B,Hq,Sq,Dv] */
int aref_run(acase *c, bool f16, double *out);          /* fp64 O of the f32 (or f16-rounded) inputs */

typedef struct {
    int runs, warmup;
    double budget_s;     /* per impl and shape: stop timing after this many seconds (>= 3 runs) */
    double max_run_s;    /* skip an impl whose predicted time per run exceeds this */
    bool quick;          /* the S=1024 prefill and decode shapes only */
    bool checks_only;    /* the fp64 checks, no timed shapes */
    const char *shape_filter;
    const bool *enabled; /* [IMPL_COUNT] */
} aopts;

typedef struct {
    char name[48];
    double gflops[IMPL_COUNT]; /* 0: not timed */
} arow;

/* Runs the attention checks and shapes; CSV rows to csv (may be NULL), plot values to rows.
 * 0 on success, 3 when an implementation disagreed, 1 on a fatal error. */
int bench_attention(benv *e, const aopts *o, FILE *csv, arow *rows, int max_rows, int *nrows);

/* First-call latency (first_call.c): the child mode's body, and the parent's measurement.
 * out[0]: cold, prefill first; out[1]: warm, prefill first; out[2]: cold, decode first. */
int first_call_child(bool decode_first);
void first_call_latency(const char *self, double out[3][3]);

/* --host-cost: host time per decode-shaped enqueue over n calls (host_cost.c). 0 on success. */
int bench_host_cost(benv *e, int n);
/* --paged: paged-KV decode over one sequence of len tokens, f32 and f16 caches (paged.c). 0 on success. */
int bench_paged(benv *e, int64_t len);

/* --vulkan: the same plans on the Vulkan and the OpenCL backend, in one run (vk_bench.c). e->rq NULL:
 * no OpenCL backend (its rows are skipped). vk_spec: the Vulkan device ("vulkan", "vulkan:N").
 * cl_setup_ms: OpenCL context creation + program build, measured by main (NAN if unknown).
 * 0 on success (a backend missing is not a failure), 3 when the backends disagreed, 1 on errors. */
int bench_vulkan(benv *e, const char *vk_spec, int runs, int warmup, const char *shape_filter, FILE *csv,
                 double cl_setup_ms);
/* "host CPU: <model>; <n> online; flags: <avx*>" (attn_bench.c). */
void bench_print_cpu(void);

/* The bench's input values: a fixed LCG in [-0.5, 0.5) (impl.c), reseeded per shape so that every
 * implementation and mode sees the same numbers. */
void bench_rng_seed(uint32_t seed);
float bench_frand(void);
/* A read-write buffer, initialised from host (when non-NULL); NULL without trying when *err is set,
 * or when e has no OpenCL context (--vulkan without OpenCL: bcase/acase then hold host data only). */
cl_mem bench_mkbuf(benv *e, size_t bytes, const void *host, cl_int *err);

#endif
