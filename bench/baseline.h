/* What the unfused baselines of the scores and attention modes share: S = scale RoPE(Q) RoPE(K)^T
 * computed the way users write it today, on the device (RoPE kernel + CLBlast) and on the host
 * (host RoPE + OpenBLAS), and the copy kernel the decode rows measure bandwidth against.
 *
 * GQA needs no K expansion in either: in BHSD the G query heads that share a KV head are G*Sq
 * consecutive rows, so one GEMM per KV head, (G*Sq x D) . (D x Sk), writes exactly those heads'
 * [G][Sq][Sk] scores. The score scale rides on the GEMM's alpha. */
#ifndef ROPEQK_BENCH_BASELINE_H
#define ROPEQK_BENCH_BASELINE_H

#include "benv.h"

#include <stdint.h>

/* The Q K^T problem of a case: Q [B,Hq,Sq,D], K [B,Hkv,Sk,D], f32 BHSD, positions offset + row,
 * interleaved RoPE with the given base. */
typedef struct {
    int B, Hq, Hkv, Sq, Sk, D;
    int64_t q_off, k_off;
    double base, scale;
} bqk;

/* The inverse frequencies as HF-style code computes them: 1 / base^(2i/D) in double, then fp32
 * (D/2 values, malloc'd; NULL when out of memory). */
float *baseline_inv_freq(double base, int D);

/* The RoPE kernel (fp32 angle and cos/sin per element) on Q into qr and K into kr, then
 * CLBlastSgemmStridedBatched S = scale Qr Kr^T, one batch entry per KV head. Enqueued, not waited
 * for. -1 without CLBlast. */
int baseline_device_scores(benv *e, const bqk *p, cl_mem q, cl_mem k, cl_mem inv, cl_mem qr, cl_mem kr, cl_mem s);

/* Host RoPE (fp32 cos/sin tables cs_q [Sq][D] and cs_k [Sk][D], one thread) on q into qr and k into
 * kr, then cblas_sgemm per KV head (OpenBLAS threads): s = scale Qr Kr^T. -1 without CBLAS. */
int baseline_host_scores(const bqk *p, const float *q, const float *k, float *qr, float *kr, float *cs_q, float *cs_k,
                         float *s);

/* The float16-per-work-item copy kernel over bytes (a multiple of 64) from src to dst; enqueued. */
int baseline_copy(benv *e, cl_mem src, cl_mem dst, size_t bytes);

#endif
