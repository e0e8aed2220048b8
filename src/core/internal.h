/* The backend-neutral core's helpers: validated problems, scaling, the fp64 reference path, errors.
 * Shared by src/core and every backend. Includes no backend header. Not installed. */
#ifndef ROPEQK_INTERNAL_H
#define ROPEQK_INTERNAL_H

#include "ropeqk.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sets this thread's message for ropeqk_last_error() (printf format). */
void rq_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* An unsigned environment integer: 0 unset, 1 set (*v), -1 malformed (message set). */
int rq_env_u64(const char *name, unsigned long long *v);

/* A case-insensitive substring test of device names ("" matches everything). */
bool rq_name_contains(const char *name, const char *needle);

static inline size_t rq_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* A validated problem: every size resolved, every default filled. */
typedef struct {
    int64_t B, Hq, Hkv, G, Sq, Sk, D, R;
    double base, scale;
    int layout, causal, conjugate;
    int64_t q_off, k_off; /* position offsets, checked so that offset + row fits int32 */
    size_t q_extent, k_extent, out_extent; /* bytes spanned by each view */
    int64_t window;                        /* 0 = no sliding window */
    /* frequency scaling, resolved (scaling.c) */
    const ropeqk_scaling *scaling;
    double factor, beta_fast, beta_slow, low_ff, high_ff;
    double attn; /* attention factor on cos and sin */
    int64_t l0, seq_len;
    /* model-family variants (docs/conventions.md section 11) */
    double softcap;                        /* 0 = off */
    int64_t rot_off;                       /* first rotated dim: dims [rot_off, rot_off + R) rotate */
    bool mrope, mrope_inter;               /* three position streams (t, h, w) per token */
    int32_t msec[3];                       /* frequencies per stream (T, H, W) */
    const float *sinks;                    /* attention: Hq logits or NULL (the caller's memory) */
    int math;                              /* ropeqk_math: the tensor-core path's products */
    /* attention only (rq_validate_attention) */
    int64_t Dv;
    size_t v_extent, o_extent, lse_extent; /* lse_extent 0: no LSE */
} rq_problem;

/* Validates parameters and descriptors (not data pointers). out_f64 allows an f64 output (the
 * reference path only); per_token_pos says positions come from arrays, not offsets. Touches
 * nothing but *pb. */
ropeqk_status rq_validate(const ropeqk_params *p, const ropeqk_tensor *q, const ropeqk_tensor *k,
                          const ropeqk_tensor *out, bool out_f64, bool per_token_pos, rq_problem *pb);

/* The same for attention: Q, K as for scores; v [B,Hkv,Sk,Dv] f32/f16/bf16 (Dv contiguous);
 * out [B,Hq,Sq,Dv] f32/f16/bf16 (or f64 with out_f64); lse NULL or [B,Hq,Sq,1] f32 (f64 with
 * out_f64). The scores-shaped out_extent is left 0. Touches nothing but *pb. */
ropeqk_status rq_validate_attention(const ropeqk_params *p, const ropeqk_tensor *q, const ropeqk_tensor *k,
                                    const ropeqk_tensor *v, const ropeqk_tensor *out, const ropeqk_tensor *lse,
                                    bool out_f64, bool per_token_pos, rq_problem *pb);

/* Resolves and checks p->scaling into pb (scaling.c); pb's sizes and offsets must be set. */
ropeqk_status rq_check_scaling(const ropeqk_scaling *s, rq_problem *pb, bool per_token_pos);
/* fp64 inverse frequencies for a validated problem, scaling applied; inv holds R/2 doubles. */
void rq_inv_freq(const rq_problem *pb, double *inv);
/* Every inverse frequency finite, positive and <= 1e30, and the attention factor finite. */
bool rq_freqs_usable(const rq_problem *pb);

/* The structural rules every view obeys whatever its role (sizes >= 1, aligned non-negative strides,
 * innermost dim contiguous when asked, no aliasing, extent fits); the dtype must be a known one and
 * is not otherwise judged. Used where a caller has its own dtype rules (the attention metric). */
ropeqk_status rq_check_layout(const ropeqk_tensor *t, bool inner_contiguous, size_t *extent);

/* The 8-bit cache dtypes (ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2): paged caches only (paged.c),
 * refused by every other view check. */
static inline bool rq_dtype_q8(ropeqk_dtype t)
{
    return t == ROPEQK_I8 || t == ROPEQK_FP8_E4M3 || t == ROPEQK_FP8_E5M2;
}

/* Storage conversions, host side. rq_store_elem writes F32 or F64 only (the reference outputs). */
float rq_half_to_float(uint16_t h);
float rq_bf16_to_float(uint16_t b);
double rq_load_elem(const void *base, size_t byte_off, ropeqk_dtype t);
void rq_store_elem(void *base, size_t byte_off, ropeqk_dtype t, double v);

/* The fp64 scores of the reference path (ref.c), one query row at a time, shared by
 * ropeqk_scores_ref and ropeqk_attention_ref so that attention sees exactly the S that the scores
 * reference stores. init rotates every key once (B*Hkv*Sk*D doubles); row writes S[b,h,i,0..Sk-1]
 * (masked entries -inf) into `row`. pb and the position arrays must outlive the scorer. With
 * `nan_nonfinite` (attention; init clears it) an unmasked score that is not finite (non-finite K or Q
 * data, or an overflow) is NaN, before soft-capping: a row that sees such a key is NaN in O and LSE,
 * and -inf keeps meaning "masked" (docs/conventions.md section 9). */
typedef struct {
    const rq_problem *pb;
    const int32_t *q_pos, *k_pos;
    double *kr, *qr, *inv;
    bool nan_nonfinite;
} rq_scorer;
ropeqk_status rq_scorer_init(rq_scorer *sc, const rq_problem *pb, const ropeqk_tensor *k, const void *k_data,
                             const int32_t *q_pos, const int32_t *k_pos);
void rq_scorer_row(const rq_scorer *sc, const ropeqk_tensor *q, const void *q_data, int64_t b, int64_t h, int64_t i,
                   double *row);
void rq_scorer_free(rq_scorer *sc);

/* Which position stream (0 temporal, 1 height, 2 width) frequency u uses under M-RoPE
 * (docs/conventions.md section 11); 0 without it. */
static inline int rq_mrope_stream(const rq_problem *pb, int64_t u)
{
    if (!pb->mrope)
        return 0;
    if (pb->mrope_inter) /* Qwen3-VL: h at u % 3 == 1 below 3H, w at u % 3 == 2 below 3W, else t */
        return u % 3 == 1 && u < 3 * (int64_t)pb->msec[1] ? 1 : u % 3 == 2 && u < 3 * (int64_t)pb->msec[2] ? 2 : 0;
    return u < pb->msec[0] ? 0 : u < pb->msec[0] + pb->msec[1] ? 1 : 2; /* Qwen2-VL: contiguous sections */
}

/* int32 entries a position array holds per row: 3 (t, h, w) under M-RoPE, else 1. */
static inline int64_t rq_pos_streams(const rq_problem *pb) { return pb->mrope ? 3 : 1; }

/* The mask of docs/conventions.md: causal (pk > pq) and the sliding window (pq - pk >= W). */
static inline bool rq_masked(const rq_problem *pb, int64_t pq, int64_t pk)
{
    return (pb->causal && pk > pq) || (pb->window > 0 && pq - pk >= pb->window);
}

/* Byte offset of element (i0,i1,i2,i3) of a view. */
static inline size_t rq_off(const ropeqk_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (size_t)(i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

#endif
