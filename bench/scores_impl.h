/* The scores implementations ropeqk-bench compares (S = scale RoPE(Q) RoPE(K)^T), all on the same
 * inputs: a shape, its case (host inputs, device buffers, the baselines' scratch), one evaluation,
 * and reading its output back. The scores driver (scores_bench.c) and --vulkan use them. */
#ifndef ROPEQK_BENCH_SCORES_IMPL_H
#define ROPEQK_BENCH_SCORES_IMPL_H

#include "benv.h"
#include "impls.h"

#include <stdbool.h>
#include <stdint.h>

/* One problem: Q [B,Hq,Sq,D], K [B,Hkv,Sk,D], BHSD contiguous; positions are offset + row. */
typedef struct {
    char name[48];
    int B, Hq, Hkv, Sq, Sk, D;
    int64_t q_off, k_off;
} bshape;

/* Per-shape state: host inputs, device buffers, scratch of the baselines. */
typedef struct {
    bshape s;
    ropeqk_params p;
    ropeqk_tensor tq, tk, tq16, tk16, to;
    float *hq, *hk;        /* host inputs, f32 */
    uint16_t *hq16, *hk16; /* the same values rounded to f16 */
    cl_mem q32, k32, q16, k16, out;
    ropeqk_buffer *wq32, *wk32, *wq16, *wk16, *wout; /* fused: the same wrapped for ropeqk_plan_run */
    cl_mem qr, kr, inv;    /* unfused: rotated Q, K (f32) and fp32 inverse frequencies */
    cl_mem cpy_src, cpy_dst;
    size_t cpy_bytes;
    float *hqr, *hkr, *hout, *cs_q, *cs_k; /* cblas: rotated copies, output, cos/sin tables */
    double *ref_out;
    ropeqk_event *last_ev; /* fused: the last run's signal, the score kernel's event (NULL for other impls) */
    bool has_unfused, has_cblas, has_copy;
} bcase;

/* Allocates and fills the inputs of a shape (values.h); want_copy: the copy yardsticks' buffers. */
int bcase_init(benv *e, bcase *c, const bshape *s, bool want_copy);
void bcase_free(bcase *c);
/* Enqueues (device impls) or runs (host impls) one complete evaluation; does not wait for device
 * work. 0 on success, else a status/error code (printed by the caller). */
int bimpl_run(benv *e, bcase *c, bimpl i);
/* Bytes a copy yardstick moves per run (read + write), 0 for other impls. */
size_t bimpl_copy_bytes(const bcase *c, bimpl i);
/* Reads the scores of the last run into host memory (f32 [B,Hq,Sq,Sk]). */
int bimpl_fetch(benv *e, bcase *c, bimpl i, float *out);

#endif
