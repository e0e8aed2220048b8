/* The attention implementations ropeqk-bench compares (O = softmax(S) V with S = scale RoPE(Q)
 * RoPE(K)^T and the causal / window masks), all on the same inputs: a shape, its case, one
 * evaluation, reading O back, and the fp64 reference. The attention driver (attn_bench.c) and
 * --vulkan use them. Impls are bimpl values: IMPL_FUSED_F32, IMPL_FUSED_F16, IMPL_UNFUSED_CLBLAST,
 * IMPL_CBLAS. */
#ifndef ROPEQK_BENCH_ATTN_IMPL_H
#define ROPEQK_BENCH_ATTN_IMPL_H

#include "benv.h"
#include "impls.h"

#include <stdbool.h>
#include <stdint.h>

/* One attention problem: Q [B,Hq,Sq,D], K [B,Hkv,Sk,D], V [B,Hkv,Sk,Dv], O [B,Hq,Sq,Dv], BHSD. */
typedef struct {
    char name[48];
    int B, Hq, Hkv, Sq, Sk, D, Dv;
    int64_t q_off, k_off;
    int causal, window;
} ashape;

/* Per-shape state; index [0] f32, [1] f16 (the same values rounded). */
typedef struct {
    ashape s;
    ropeqk_params p;
    ropeqk_tensor tq[2], tk[2], tv[2], to;
    ropeqk_plan *plan[2];
    float *hq, *hk, *hv;
    uint16_t *hq16, *hk16, *hv16;
    cl_mem q[2], k[2], v[2], out;
    ropeqk_buffer *wq[2], *wk[2], *wv[2], *wout; /* fused: the same wrapped for ropeqk_plan_run */
    cl_mem qr, kr, inv, sp;                      /* unfused: rotated Q, K; S, then P in place */
    float *hqr, *hkr, *hsp, *hout, *cs_q, *cs_k; /* cblas: the same on the host, output, tables */
    size_t extra_bytes[IMPL_COUNT]; /* allocated beyond inputs and output (fused: estimated scratch) */
    ropeqk_event *last_ev;           /* fused: the run's signal, the attention kernel's event */
    bool has[IMPL_COUNT];
    const char *why_not[IMPL_COUNT];
} acase;

/* Allocates inputs (values.h: the scores mode's Q and K, then V) and what the impls in want[] need. */
int acase_init(benv *e, acase *c, const ashape *s, const bool *want);
void acase_free(acase *c);
int aimpl_run(benv *e, acase *c, bimpl i);               /* enqueues (device) or runs (host) one evaluation */
int aimpl_fetch(benv *e, acase *c, bimpl i, float *out); /* O of the last run, f32 [B,Hq,Sq,Dv] */
int aref_run(acase *c, bool f16, double *out);           /* fp64 O of the f32 (or f16-rounded) inputs */

#endif
