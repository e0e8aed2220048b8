/* The OpenCL program of ropeqk: every kernel, one text. cl/embed.py resolves the #include lines at
 * build time (each file once, where first included) into the text the library carries and builds;
 * `ropeqk devices --dump-program` writes that text out. -DRQ_OPS (contract.h's RQ_OPS_* bits) keeps
 * the kernels of some operations only, so that a first call compiles less; the paged kernels use
 * scores.cl's helpers. */
#include "contract.h"
/* macros only (no code unless used), and first here: a file's text goes where it is first included,
 * and the kernel files below sit inside #if blocks (attention_gpu.cl and attention_fa2.cl both use
 * softmax_exp.cl, in two branches of one #if) */
#include "variants.cl"
#include "softmax_exp.cl"
/* The kernels of one profile only: the host creates the CPU profile's one-pass decode kernels
 * (qk_decode_f32/f16/bf16, scores.cl) and paged pass 1 in the CPU shape (paged_attn_cpu, paged.cl)
 * on the CPU profile only, and the GPU profile's qk_scores_tiled and qk_decode_gpu_* on the GPU
 * profile only (src/opencl/cl_plan.c, src/opencl/cl_paged.c). The latter are built only where their options are set
 * (-DRQ_TILE, -DRQ_DECODE_GPU: never on the CPU profile, src/core/tuning.c); the former are left out of
 * GPU-profile programs: wide-vector code written for CPUs, which GPU compilers turn into hundreds
 * of registers and kilobytes of stack (tests/gpucc), and a longer first build on a GPU.
 * The host says which (-DRQ_CPU_KERNELS=1 on the CPU profile, 0 on the GPU profile, src/opencl/cl_tune.c);
 * without it (a program built by hand) every kernel is in. */
#ifndef RQ_CPU_KERNELS
#define RQ_CPU_KERNELS 1
#endif
#include "rope.cl"
#if !defined(RQ_OPS) || (RQ_OPS & (RQ_OPS_SCORES | RQ_OPS_PAGED))
#include "scores.cl"
#endif
/* the GPU profile's tiled score kernel, built only where the host chose it (-DRQ_TILE > 0): the CPU
 * profile's program, and so its first-call compile time, stays as it was */
#if defined(RQ_TILE) && RQ_TILE > 0 && (!defined(RQ_OPS) || (RQ_OPS & RQ_OPS_SCORES))
#include "scores_tiled.cl"
#endif
/* the GPU profile's decode kernel, likewise only where chosen (-DRQ_DECODE_GPU=1) */
#if defined(RQ_DECODE_GPU) && RQ_DECODE_GPU && (!defined(RQ_OPS) || (RQ_OPS & RQ_OPS_SCORES))
#include "decode_gpu.cl"
#endif
/* qk_attention_*: the CPU profile's attention, and the GPU profile's where its own kernel is off or
 * a plan's compiled kernel does not fit the device (the host then builds an attention-only program
 * with -DRQ_ATTN_FALLBACK=1, src/opencl/cl_attn.c): it keeps Dv accumulators per work-item in private
 * memory, over the GPU budgets (tests/gpucc), so a GPU program does not carry it otherwise */
#if (!defined(RQ_OPS) || (RQ_OPS & RQ_OPS_ATTN)) && \
    (!(defined(RQ_GA_BM) && RQ_GA_BM > 0) || (defined(RQ_ATTN_FALLBACK) && RQ_ATTN_FALLBACK))
#include "attention.cl"
#endif
/* the GPU profile's attention kernel, only where chosen (-DRQ_GA_BM > 0): the register-blocked form
 * qk_attention_fa2_* where the host chose it (-DRQ_GA_FA2=1: shapes of 4 or 8 rows per work-item),
 * else qk_attention_gpu_*. A plan whose head dims the former does not take (D or Dv not a multiple
 * of 4) builds an attention-only program with -DRQ_GA_FALLBACK=1: qk_attention_gpu_* in its own
 * default shape (contract.h's RQ_GA_FB_*), not the configured one (src/opencl/cl_attn.c) */
#if defined(RQ_GA_BM) && RQ_GA_BM > 0 && (!defined(RQ_OPS) || (RQ_OPS & RQ_OPS_ATTN))
#if defined(RQ_GA_FALLBACK) && RQ_GA_FALLBACK
#undef RQ_GA_BM
#undef RQ_GA_BN
#undef RQ_GA_TK
#undef RQ_GA_RB
#undef RQ_GA_DV
#undef RQ_GA_FA2
#define RQ_GA_BM RQ_GA_FB_BM
#define RQ_GA_BN RQ_GA_FB_BN
#define RQ_GA_TK RQ_GA_FB_TK
#define RQ_GA_RB RQ_GA_FB_RB
#define RQ_GA_DV RQ_GA_FB_DV
#endif
/* each file included once (cl/embed.py keeps a file's text where it is first included): the store
 * both kernels use comes first, outside the branch */
#include "attention_store.cl"
#if defined(RQ_GA_FA2) && RQ_GA_FA2
#include "attention_fa2.cl"
#else
#include "attention_gpu.cl"
#endif
#endif
#if !defined(RQ_OPS) || (RQ_OPS & RQ_OPS_PAGED)
#include "paged.cl"
#endif
