/*
 * ropeqk — Rotary Positional Embedding fused with attention, on any GPU API.
 *
 *   S[b,h,i,j] = scale * < rope(q[b,h,i], pq[i]), rope(k[b,h/g,j], pk[j]) >     (g = Hq / Hkv)
 *
 * with optional causal and sliding-window masks. Every definition (shapes, positions, layouts,
 * frequency scaling, masks, the attention-factor convention, the error metric) is in
 * docs/conventions.md; docs/api.md is the reference.
 *
 * This header is backend-neutral: tensors, parameters, statuses, the fp64 scalar reference path,
 * every backend's devices (ropeqk_list_devices), contexts, plans, and running plans on device
 * memory (ropeqk_buffer, ropeqk_event, ropeqk_plan_run: the same code on every backend). The
 * backends' headers (ropeqk_opencl.h, ropeqk_vulkan.h) hold only
 * interop: contexts on a caller's own objects, wrapping a caller's buffers and events, native handles
 * out, and enqueueing on a caller's queue or recording into a caller's command buffer.
 *
 * Objects (VkFFT/cuFFT style): a context (ropeqk_ctx) holds a device, its compiled kernels and a
 * scratch pool; a plan (ropeqk_plan) is one operation on described tensors, validated once, with its
 * frequencies, tables and kernels made once, then enqueued as often as wanted.
 *
 * Errors: every function returns a ropeqk_status, the library's own codes in [-4099, -4000]. A
 * failure inside the backend is ROPEQK_ERR_BACKEND; the raw backend code (a cl_int) and the backend's
 * name are kept in the context (ropeqk_ctx_backend_error). ropeqk_last_error() gives the calling
 * thread's last message. The library never aborts or exits.
 *
 * Thread safety:
 *   - a context may be shared by threads: plans may be created, enqueued and destroyed on it
 *     concurrently; ropeqk_scores() and the one-shot enqueue calls too. The program cache and the
 *     scratch pool are guarded by mutexes; OpenCL command queues are thread-safe.
 *   - a plan may be enqueued from several threads at once (each on its own queue or the same one):
 *     setting its kernels' arguments and enqueueing them happens under the plan's own mutex.
 *     ropeqk_plan_destroy() must not race with enqueues of the same plan.
 *   - ropeqk_ctx_destroy() must not race with any call on the context or its plans, and every plan
 *     must be destroyed first. It finishes the context's own queue; work on other queues keeps
 *     its buffers alive through the backend's reference counts.
 *   - ropeqk_ctx_backend_error() and ropeqk_ctx_build_log() report the latest failure of any thread;
 *     the log is copied out under the context's lock, so another thread's failure cannot free it
 *     under the reader.
 */
#ifndef ROPEQK_H
#define ROPEQK_H

#include <stddef.h>
#include <stdint.h>

#include "ropeqk_version.h"

/* Exported symbols: everything else in the shared library is hidden. */
#if defined(_WIN32) && defined(ROPEQK_BUILDING)
#define ROPEQK_API __declspec(dllexport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#define ROPEQK_API __attribute__((visibility("default")))
#else
#define ROPEQK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" of the library actually linked (ROPEQK_VERSION_STRING is the header's). */
ROPEQK_API const char *ropeqk_version(void);

/* ---- status codes ------------------------------------------------------------------------- */
typedef enum {
    ROPEQK_SUCCESS = 0,
    ROPEQK_ERR_NULL_POINTER = -4000,    /* a required pointer argument is NULL */
    ROPEQK_ERR_BAD_SHAPE = -4001,       /* zero/negative sizes, B or D mismatch between tensors */
    ROPEQK_ERR_BAD_ROTARY_DIM = -4002,  /* rotary dim odd, < 2 or > D */
    ROPEQK_ERR_BAD_HEADS = -4003,       /* Hq % Hkv != 0 */
    ROPEQK_ERR_BAD_STRIDES = -4004,     /* negative/misaligned strides, D not contiguous */
    ROPEQK_ERR_OVERLAP = -4005,         /* strides make elements alias, or output overlaps an input */
    ROPEQK_ERR_BUFFER_TOO_SMALL = -4006,/* a view reaches past the end of its buffer */
    ROPEQK_ERR_OVERFLOW = -4007,        /* a size or byte count does not fit */
    ROPEQK_ERR_BAD_DTYPE = -4008,       /* unknown dtype, or a dtype not allowed for this tensor */
    ROPEQK_ERR_BAD_PARAM = -4009,       /* a parameter out of range (base, scale, layout, window, variants), a bad plan, step or call */
    ROPEQK_ERR_POSITION_RANGE = -4010,  /* offset + row does not fit int32 */
    ROPEQK_ERR_NO_DEVICE = -4011,       /* no platform/device, or the spec matches none */
    ROPEQK_ERR_BUILD = -4012,           /* program build failed: ropeqk_last_error(), ropeqk_ctx_build_log() */
    ROPEQK_ERR_OUT_OF_HOST_MEMORY = -4013,
    ROPEQK_ERR_BAD_SCALING = -4014,     /* scaling parameters missing, contradictory, or giving non-finite frequencies */
    ROPEQK_ERR_TOO_LARGE = -4015,       /* a buffer the call needs exceeds the device's limits */
    ROPEQK_ERR_BAD_CONFIG = -4016,      /* malformed tuning value or ROPEQK_* environment variable: ropeqk_last_error() */
    ROPEQK_ERR_BACKEND = -4017,         /* the backend failed: ropeqk_ctx_backend_error() has its code */
    ROPEQK_ERR_PAGE_RANGE = -4018,      /* a page-table entry outside [0, num_pages) */
    ROPEQK_ERR_PAGE_DUPLICATE = -4019,  /* a page used twice by one sequence */
    ROPEQK_ERR_SEQ_LENGTH = -4020,      /* a sequence length < 0 (or 0 where keys are needed), or beyond its pages' capacity */
    ROPEQK_ERR_QUERY_ROWS = -4021,      /* q_indptr: not from 0, not increasing (q_len 0), total beyond max_q_rows, or q_len > the sequence's length */
    ROPEQK_ERR_TIMEOUT = -4022,         /* a bounded wait ran out: ropeqk_last_error() names the operation waited for */
} ropeqk_status;

/* A fixed English description of a status ("unknown status" for other values). */
ROPEQK_API const char *ropeqk_status_string(int status);

/* The message of the last failure in the calling thread ("" if none yet): what a status alone
 * cannot say, e.g. which environment variable was malformed, the device, driver and first log
 * lines of a failed program build, or which backend call failed with which code. Like errno,
 * successful calls leave it as it was. Valid until the thread's next failing call. */
ROPEQK_API const char *ropeqk_last_error(void);

/* ---- tensors ------------------------------------------------------------------------------ */
typedef enum {
    ROPEQK_F32 = 0,
    ROPEQK_F16 = 1,   /* IEEE half storage, f32 math (vload_half; no cl_khr_fp16 needed) */
    ROPEQK_BF16 = 2,  /* bfloat16 storage (upper 16 bits of an f32), f32 math */
    ROPEQK_F64 = 3,   /* only for outputs of the scalar reference path */
    /* 8-bit quantized storage: ONLY for the K and V caches of a paged plan (ROPEQK_OP_PAGED_DECODE),
     * refused with ROPEQK_ERR_BAD_DTYPE everywhere else. Each (page, KV head, token) row of D (or Dv)
     * values carries an f32 scale in a buffer beside the cache; the value read is (float)q * scale,
     * f32 math (docs/conventions.md section 12: layout, rounding, the append's quantization). */
    ROPEQK_I8 = 4,        /* int8, symmetric: q in [-127, 127] (the append never writes -128) */
    ROPEQK_FP8_E4M3 = 5,  /* OCP FP8 E4M3FN: bias 7, no infinities, max 448, NaN 0x7F / 0xFF */
    ROPEQK_FP8_E5M2 = 6,  /* OCP FP8 E5M2: bias 15, IEEE-like (inf, NaN), max finite 57344 */
} ropeqk_dtype;

ROPEQK_API size_t ropeqk_dtype_size(ropeqk_dtype t); /* 0 for an unknown dtype; 1 for the 8-bit ones */

/*
 * A strided view, ggml style: element counts and byte strides per dimension, in the math order
 * [B, H, S, D] (batch, heads, rows, head dim) for Q and K, and [B, Hq, Sq, Sk] for scores.
 * Any stride order works (BHSD, BSHD, padded rows...), as long as strides are non-negative
 * multiples of the element size, elements do not alias, and the innermost dimension of Q/K
 * (D) is contiguous (nb[3] == element size).
 */
typedef struct {
    ropeqk_dtype dtype;
    int64_t ne[4];
    int64_t nb[4];
} ropeqk_tensor;

/* Contiguous [B,H,S,D] (BHSD) memory. */
ROPEQK_API ropeqk_tensor ropeqk_tensor_bhsd(ropeqk_dtype t, int64_t B, int64_t H, int64_t S, int64_t D);
/* Contiguous [B,S,H,D] (BSHD) memory, described in [B,H,S,D] order. */
ROPEQK_API ropeqk_tensor ropeqk_tensor_bshd(ropeqk_dtype t, int64_t B, int64_t S, int64_t H, int64_t D);
/* Bytes spanned by the view (1 + max offset), 0 on overflow or a bad view. */
ROPEQK_API size_t ropeqk_tensor_extent(const ropeqk_tensor *t);

/* ---- RoPE parameters ---------------------------------------------------------------------- */
typedef enum {
    ROPEQK_INTERLEAVED = 0, /* pairs (x[2i], x[2i+1]): RoFormer, Meta Llama, GPT-J, ggml mode 0 */
    ROPEQK_HALF_SPLIT = 1,  /* pairs (x[i], x[i+R/2]): GPT-NeoX, HF rotate_half, ggml NEOX */
} ropeqk_layout;

/*
 * Frequency scaling for long context, with the Hugging Face `rope_scaling` names and defaults
 * (fields left 0 take the default; a field the chosen type does not use must stay 0/NULL, so a
 * typo'd configuration is an error, not silently ignored). All frequencies are computed once on
 * the host in fp64 and handed to the kernel: no variant costs kernel speed or accuracy.
 *
 *   LINEAR    inv /= factor                                   (factor required)
 *   DYNAMIC   NTK: for L = seq_len > L0, base' = base * (factor*L/L0 - (factor-1))^(R/(R-2))
 *                                                              (factor, original_max_position)
 *   YARN      ramp between interpolated (inv/factor) and extrapolated frequencies over the
 *             correction range [beta_fast (32), beta_slow (1)]; cos and sin are multiplied by
 *             attention_factor (default 0.1 ln(factor) + 1), so scores carry it squared.
 *                                                              (factor, original_max_position)
 *   LLAMA3    wavelengths past L0/low_freq_factor (1) divide by factor (8), below L0/high (4)
 *             keep, smooth in between.                         (L0 default 8192)
 *   LONGROPE  inv = 1 / (ext[i] * base^(2i/R)), ext = long_factor when seq_len > L0, else
 *             short_factor (R/2 entries each); attention_factor default
 *             sqrt(1 + ln(factor)/ln(L0)) when factor > 1, else 1.  (original_max_position)
 * freq_factors (any type, ggml's per-frequency divisors): inv[i] /= freq_factors[i] afterwards.
 *
 * seq_len (DYNAMIC, LONGROPE): the current length L; 0 = max(q_pos_offset + Sq, k_pos_offset + Sk),
 * which needs offsets: with per-token positions seq_len must be given.
 *
 * attention_factor convention: this is Hugging Face's (cos and sin both multiplied, rotated dims
 * only). ggml/llama.cpp's `attn_factor` argument is the same multiplier, but llama.cpp computes
 * YaRN's default itself from `ext_factor` and folds `mscale` differently for DeepSeek
 * (mscale/mscale_all_dim); pass the final multiplier here when mapping a ggml model.
 */
typedef enum {
    ROPEQK_SCALING_NONE = 0,
    ROPEQK_SCALING_LINEAR,
    ROPEQK_SCALING_DYNAMIC,
    ROPEQK_SCALING_YARN,
    ROPEQK_SCALING_LLAMA3,
    ROPEQK_SCALING_LONGROPE,
} ropeqk_scaling_type;

typedef struct {
    ropeqk_scaling_type type;
    double factor;                 /* s */
    int64_t original_max_position; /* L0 (HF original_max_position_embeddings) */
    int64_t seq_len;               /* L, for DYNAMIC and LONGROPE */
    double beta_fast, beta_slow;   /* YARN: 32, 1 */
    double attention_factor;       /* YARN, LONGROPE: 0 = the default formula */
    double low_freq_factor, high_freq_factor; /* LLAMA3: 1, 4 */
    const double *long_factor;     /* LONGROPE: n_long_factor == R/2 entries */
    int32_t n_long_factor;
    const double *short_factor;    /* LONGROPE: n_short_factor == R/2 entries */
    int32_t n_short_factor;
    const double *freq_factors;    /* any type: n_freq_factors == R/2 divisors, or NULL */
    int32_t n_freq_factors;
    int32_t yarn_no_truncate;      /* YARN: 1 = the correction range is not rounded to whole dims (Hugging
                                    * Face "truncate": false, gpt-oss); 0 = floor/ceil (the default) */
} ropeqk_scaling;

/*
 * How the Vulkan backend's tensor-core path (cooperative matrices, docs/tensor-cores.md) makes its
 * matrix products; every other path computes in f32 whatever this says (OpenCL, Vulkan devices without
 * cooperative matrices, the fp64 reference). Q and K are rotated in f32 either way.
 *   ACCURATE (default): every rotated value of Q, K and V, and each softmax weight, is scaled by a
 *     power of two and split into two f16 parts (hi + lo, 22 bits), and each product is
 *     hi*hi + hi*lo + lo*hi with f32 accumulation: the 1e-5 promise of the attention metric holds
 *     (docs/conventions.md section 9), at about a third of the fast mode's tensor-core rate.
 *   FAST: one f16 part and one product (Q, K, V and P rounded to f16, after the same power-of-two row
 *     scales, f32 accumulation). Measured on unit-normal Q, K, V at D 128, S 256 to 4096
 *     (docs/tensor-cores.md): attention O error up to 2.2e-4 of max |V|, LSE up to 9.1e-4 relative
 *     (causal rows with few keys), scores up to 1.4e-4 of scale |q| |k|; the tests hold fast mode to
 *     2e-3 on inputs of unit scale. Larger scores grow the absolute score error with them.
 * A plan takes the tensor-core path when it is made, on a device the library opened that lists
 * 16x16x16 f16 cooperative matrices, with a build that has their shaders (`ropeqk devices` says);
 * tuning vk_coopmat turns it off or forces the emulated shaders.
 */
typedef enum {
    ROPEQK_MATH_ACCURATE = 0,
    ROPEQK_MATH_FAST = 1,
} ropeqk_math;

typedef struct {
    ropeqk_layout layout;
    int32_t rotary_dim;   /* R: even, 2..D; 0 = D. Dims R..D-1 pass through unrotated. */
    double base;          /* theta base; 0 = 10000 */
    double scale;         /* 0 = 1/sqrt(D) */
    int causal;           /* S = -inf where pk[j] > pq[i] */
    int conjugate;        /* rotate by -angle (inverse rotation) */
    int64_t q_pos_offset; /* pq[i] = q_pos_offset + i when no per-token positions are given */
    int64_t k_pos_offset; /* pk[j] = k_pos_offset + j likewise */
    int64_t window;       /* sliding window (Mistral, Gemma): also S = -inf where pq[i] - pk[j] >= window; 0 = off */
    ropeqk_scaling scaling;
    /* ---- model-family variants (docs/conventions.md section 11); zero = off ---- */
    double softcap;       /* > 0: S' = softcap * tanh(S / softcap) on unmasked scores, after scale (Gemma 2: 50) */
    int32_t rotary_offset;/* N: the rotated dims are [N, N + R), the others pass through (DeepSeek MLA's
                           * [nope | rope]: N = D - R); rotary_dim 0 then means D - N */
    int32_t mrope_section[3]; /* M-RoPE (Qwen2-VL and later): T, H, W frequencies taken by the temporal,
                               * height and width position streams, T + H + W = R/2; all 0 = off. With
                               * position arrays each is then [3, S] (rows t, h, w); masks still use
                               * token order, q_pos_offset + i and k_pos_offset + j */
    int32_t mrope_interleaved; /* Qwen3-VL's assignment of the streams to frequencies (see section 11) */
    const float *sinks;   /* attention only: one logit s_h per query head joining the softmax's denominator
                           * and carrying no value (gpt-oss); n_sinks == Hq; copied by plan creation */
    int32_t n_sinks;
    ropeqk_math math;     /* the tensor-core path's products (above); another value is ROPEQK_ERR_BAD_PARAM */
} ropeqk_params;

/* Fills the defaults (interleaved, R = D, base 10000, scale 1/sqrt(D), no mask, offsets 0, no
 * frequency scaling). A zeroed struct means the same. */
ROPEQK_API void ropeqk_default_params(ropeqk_params *p);

/*
 * Inverse frequencies the library uses, in fp64 (base^(-2i/R), i < R/2, after frequency scaling),
 * and the attention factor that multiplies cos and sin (1 unless YARN/LONGROPE). `inv` must hold
 * R/2 doubles; head_dim resolves rotary_dim == 0; attention_factor may be NULL. With seq_len 0,
 * DYNAMIC/LONGROPE take L = max(q_pos_offset, k_pos_offset) + 1.
 */
ROPEQK_API ropeqk_status ropeqk_inv_freq(const ropeqk_params *p, int64_t head_dim, double *inv, double *attention_factor);

/* ---- scalar reference path (host memory, fp64 angles and sums) ---------------------------- */
/*
 * Same validation as the device path. q_pos / k_pos: per-row int32 positions (Sq resp. Sk
 * entries) or NULL for offset + row. out: dtype ROPEQK_F32 or ROPEQK_F64, [B,Hq,Sq,Sk].
 * Sizes of the host buffers are taken from the descriptors' extents.
 */
ROPEQK_API ropeqk_status ropeqk_scores_ref(const ropeqk_params *p,
                                const ropeqk_tensor *q, const void *q_data,
                                const ropeqk_tensor *k, const void *k_data,
                                const int32_t *q_pos, const int32_t *k_pos,
                                const ropeqk_tensor *out, void *out_data);

/*
 * The error metric of docs/conventions.md: max |S - S64| / (scale * |q_i| * |k_j|) over unmasked entries.
 * s and s64 are [B,Hq,Sq,Sk] views (f32 and f64). *mask_mismatch counts entries where exactly one
 * of the two is -inf, or where either is NaN. Norms are of the unrotated inputs.
 */
ROPEQK_API ropeqk_status ropeqk_max_error(const ropeqk_params *p,
                               const ropeqk_tensor *q, const void *q_data,
                               const ropeqk_tensor *k, const void *k_data,
                               const ropeqk_tensor *s, const void *s_data,
                               const ropeqk_tensor *s64, const void *s64_data,
                               double *max_err, int64_t *mask_mismatch);

/* ---- attention: scalar reference path and metric --------------------------------------------- */
/*
 * O = softmax(S) V in fp64 (S exactly as ropeqk_scores_ref computes it), with the same validation as
 * the device path. v [B,Hkv,Sk,Dv] f32/f16/bf16; out [B,Hq,Sq,Dv] F32 or F64; lse NULL or
 * [B,Hq,Sq,1] F32 or F64 (then lse_data is required). A fully masked row gives O = 0, LSE = -inf.
 * Non-finite K/V data as the device path (ropeqk_plan_desc below, docs/conventions.md section 9).
 */
ROPEQK_API ropeqk_status ropeqk_attention_ref(const ropeqk_params *p,
                                              const ropeqk_tensor *q, const void *q_data,
                                              const ropeqk_tensor *k, const void *k_data,
                                              const ropeqk_tensor *v, const void *v_data,
                                              const int32_t *q_pos, const int32_t *k_pos,
                                              const ropeqk_tensor *out, void *out_data,
                                              const ropeqk_tensor *lse, void *lse_data);

/*
 * The attention metric of docs/conventions.md: per row (b, h, i),
 *   max_d |O - O64| / max_j ||V[b, h/g, j, :]||_inf     (j over all Sk keys; a zero V counts as 1)
 * and the largest |LSE - LSE64| / max(|LSE64|, 1). *mismatch counts rows with a NaN (in O, O64, LSE
 * or LSE64) or where exactly one LSE is -inf; such rows are left out of both errors. lse / lse64 may
 * both be NULL (then *max_lse_rel = 0). Every view may be F32, F64, F16 or BF16.
 */
ROPEQK_API ropeqk_status ropeqk_attention_max_error(const ropeqk_tensor *v, const void *v_data,
                                                    const ropeqk_tensor *out, const void *out_data,
                                                    const ropeqk_tensor *out64, const void *out64_data,
                                                    const ropeqk_tensor *lse, const void *lse_data,
                                                    const ropeqk_tensor *lse64, const void *lse64_data,
                                                    double *max_err, double *max_lse_rel, int64_t *mismatch);

/* ---- kernel configuration ---------------------------------------------------------------- */
/* The class of device the kernels are shaped for. AUTO (default) picks CPU for CPU devices, GPU for
 * every other; $ROPEQK_PROFILE=cpu|gpu|auto overrides the parameter. Forcing GPU on pocl runs the
 * GPU kernel configuration on a CPU: that is how CI checks the GPU code path. */
typedef enum {
    ROPEQK_PROFILE_AUTO = 0,
    ROPEQK_PROFILE_CPU = 1,
    ROPEQK_PROFILE_GPU = 2,
} ropeqk_profile;
ROPEQK_API const char *ropeqk_profile_name(ropeqk_profile p); /* "auto", "cpu", "gpu" */

/*
 * Kernel configuration. This struct stays as it is for existing callers; which knobs a backend has,
 * their ranges, environment variables and defaults, is the key/value view below it
 * (ropeqk_knob_count, ropeqk_knob_get_info), which also gets and sets the fields by name. Zero
 * fields take the profile's default. Each knob has an environment
 * override that wins over this struct (ROPEQK_PROFILE, ROPEQK_TQ, ROPEQK_WG, ROPEQK_VK, ROPEQK_DKB,
 * ROPEQK_DWG, ROPEQK_DECODE, ROPEQK_ROT_UWG, ROPEQK_ATQ, ROPEQK_AVK, ROPEQK_AWG, ROPEQK_NV, ROPEQK_TILE, ROPEQK_RB,
 * ROPEQK_TK, ROPEQK_VK_BLOCK, ROPEQK_VK_TK, ROPEQK_VK_ROWS, ROPEQK_ATTN_TILE, ROPEQK_ATTN_KEYS, ROPEQK_ATTN_TK,
 * ROPEQK_ATTN_RB, ROPEQK_ATTN_DV, ROPEQK_CHUNK_ROWS, ROPEQK_DENSE_DECODE; ROPEQK_TILE=0,
 * ROPEQK_ATTN_TILE=0 and ROPEQK_DENSE_DECODE=0 turn those kernels or paths off); a
 * malformed value, here or in the environment, makes ropeqk_ctx_create() fail with
 * ROPEQK_ERR_BAD_CONFIG and a ropeqk_last_error() message. The OpenCL kernels read the knobs up to
 * tk and the attn_* ones, the Vulkan shaders the vk_* ones; both backends' hosts read chunk_rows and
 * dense_rows. Two knobs have no field, only their environment variable: the paged and dense decode's
 * fast pass 1 (docs/paged-decode-gpu.md) runs where the shape allows on OpenCL's GPU profile and on
 * Vulkan GPUs, ROPEQK_PAGED_FAST=0 never, ROPEQK_PAGED_FAST=1 also on Vulkan CPU devices (lavapipe);
 * ROPEQK_PAGED_WGS=N (1..64) sets the work-groups per compute unit its split aims at (OpenCL;
 * default 8).
 */
typedef struct {
    ropeqk_profile profile;
    int32_t tq;        /* qk_scores: query rows per work-item, 1..32 */
    int32_t wg;        /* qk_scores: work-group size along keys, 1..1024 */
    int32_t vk;        /* qk_scores: keys per work-item (vector width): 1, 4, 8 or 16 */
    int32_t dkb;       /* decode kernel: keys per work-item, even, 2..1024 */
    int32_t dwg;       /* decode kernel: work-group size, 1..256 */
    int32_t decode;    /* decode kernel for few query rows: 0 = profile default, 1 = on, -1 = off */
    int32_t rot_uwg;   /* RoPE pass: units per work-group, 1..256 */
    int32_t vendor_ext;/* vendor builtins where the device is identified (pocl): 0 = auto, -1 = off */
    int32_t atq;       /* attention: query rows per work-item, 1..16 */
    int32_t avk;       /* attention: keys per block (vector width): 1, 4, 8 or 16 */
    int32_t awg;       /* attention: work-group size, 1..1024 */
    int32_t nv;        /* qk_scores: vectors of keys per work-item, 1 or 2 */
    /* the tiled score kernel (GPU profile default; qk_scores stays the fallback and the kernel for
     * few query rows): a work-group computes tile x tile scores, each work-item rb x rb of them, over
     * tk head dims per local-memory step */
    int32_t tile;      /* 16, 32, 64 or 128; -1 = off (qk_scores only) */
    int32_t rb;        /* 4 or 8 (tile/rb squared is the work-group size) */
    int32_t tk;        /* a multiple of 4, 4..64 */
    int32_t vk_block;  /* Vulkan scores: scores per invocation along each side, 2, 4 or 8 (tile 16x) */
    int32_t vk_tk;     /* Vulkan scores: head dims staged in shared memory per step, 8, 16 or 32 */
    int32_t vk_rows;   /* Vulkan attention: query rows (invocations) per work-group, 32, 64 or 128 */
    /* the GPU attention kernel (GPU profile default; the attention knobs above are its fallback's):
     * a work-group owns attn_tile query rows of a KV head and attn_dv dims of V, walks the keys in
     * tiles of attn_keys, attn_tk head dims (and keys of V) per local-memory step, attn_rb rows per
     * work-item; (attn_tile / attn_rb) * (attn_keys / 4) work-items */
    int32_t attn_tile; /* 16, 32, 64 or 128; -1 = off (the attention knobs above only) */
    int32_t attn_keys; /* 16, 32, 64 or 128 */
    int32_t attn_tk;   /* a multiple of 4, 4..64, dividing attn_keys */
    int32_t attn_rb;   /* 1, 2, 4 or 8, dividing attn_tile */
    int32_t attn_dv;   /* a multiple of attn_keys, 16..256 */
    /* two crossovers, decided per call on the host (no kernel reads them), on both backends:
     * chunk_rows: a sequence of a ragged paged call with at least this many query rows has its K/V
     *   gathered from the pages and its rows run through the attention kernel; fewer rows run through
     *   the split-K decode kernels row by row. 1..1048576 (more than any chunk: never); default 16.
     *   $ROPEQK_CHUNK_ROWS. */
    int32_t chunk_rows;
    /* dense_rows: dense attention calls with at most this many query rows run the paged decode
     *   kernels (Vulkan: shaders) on the dense K/V (no K pre-pass). 1..1024, -1 = off; default 16
     *   (2 on a Vulkan CPU device such as lavapipe, where each row costs a full pass over K).
     *   $ROPEQK_DENSE_DECODE (0 = off). */
    int32_t dense_rows;
    /* the Vulkan tensor-core path (cooperative matrices; docs/tensor-cores.md), for prefill attention and
     * scores plans:
     * vk_coopmat: 0 = where the device has cooperative matrices and the library was built with their
     *   shaders (else today's shaders), -1 = never, 1 = the emulated shaders (the same tiling with the
     *   products as loops: the suite's check of the path on any device, e.g. lavapipe; slow).
     *   $ROPEQK_VK_COOPMAT (-1, 0, 1).
     * vk_cm_rows: query rows per work-group (16 per subgroup), 32, 64 or 128; vk_cm_keys: keys per tile,
     *   32, 64 or 128 (the tuner searches the pairs the device's shared memory takes; default 64 x 64).
     *   $ROPEQK_VK_CM_ROWS, $ROPEQK_VK_CM_KEYS. */
    int32_t vk_coopmat;
    int32_t vk_cm_rows;
    int32_t vk_cm_keys;
} ropeqk_tuning;

/*
 * The knobs as keys and values: each backend publishes a table of the knobs its kernels
 * and host read. `backend` is a backend's name or device-spec prefix, either case ("opencl",
 * "OpenCL", "vulkan"; ropeqk_ctx_backend_error gives a context's); a backend not in this build has
 * count -1 and get_info ROPEQK_ERR_BAD_PARAM. Knobs two backends read (chunk_rows, dense_rows,
 * paged_fast) are in both tables, alike. The pointers are static strings of the library.
 */
typedef struct {
    const char *name;      /* "tq": the ropeqk_tuning field's name (when in_struct), the cache file's key */
    const char *env;       /* "ROPEQK_TQ"; NULL when it has none */
    int32_t min, max;      /* the range of the environment variable and of the field's non-zero values
                            * (but for -1 where allowed says it turns something off) */
    const char *allowed;   /* the allowed values within it in words, "" when every one is */
    int32_t default_cpu;   /* the CPU and GPU profiles' values before the device's heuristics,
                            * shipped entries and the tuning cache (ropeqk_ctx_knob: in effect) */
    int32_t default_gpu;
    int32_t in_struct;     /* 1: a ropeqk_tuning field; 0: environment only */
    const char *doc;       /* one line */
} ropeqk_knob;
ROPEQK_API int32_t ropeqk_knob_count(const char *backend);
ROPEQK_API ropeqk_status ropeqk_knob_get_info(const char *backend, int32_t index, ropeqk_knob *info);
/* Reads or writes t's field of knob `name` (ROPEQK_ERR_BAD_PARAM with a ropeqk_last_error() message
 * when no backend built in has it or it has no field). Set checks the value as context creation
 * does (0 = the default; ROPEQK_ERR_BAD_CONFIG with the same message) and leaves t as it was when it
 * refuses it. */
ROPEQK_API ropeqk_status ropeqk_tuning_get(const ropeqk_tuning *t, const char *name, int32_t *value);
ROPEQK_API ropeqk_status ropeqk_tuning_set(ropeqk_tuning *t, const char *name, int32_t value);

/* ---- contexts ----------------------------------------------------------------------------- */
typedef struct ropeqk_ctx ropeqk_ctx;

typedef struct {
    /* Device: a backend and its device ("opencl:P:D" with OpenCL platform and device indices,
     * "vulkan:N"; "opencl" / "vulkan" alone: that backend's first usable device), "P:D", or a
     * case-insensitive substring of the device name (tried on each backend in turn, OpenCL first).
     * ropeqk_list_devices() gives each device's exact string. NULL/"" = $ROPEQK_DEVICE, else the
     * first device of the first backend that has one. */
    const char *device;
    /* Kernel configuration; zeroed = the profile's defaults. */
    ropeqk_tuning tuning;
} ropeqk_ctx_params;

/* A context on a device the library opens itself (params NULL = all defaults). On failure *out is
 * NULL. To use the caller's own backend objects, see ropeqk_opencl_ctx_create(). */
ROPEQK_API ropeqk_status ropeqk_ctx_create(const ropeqk_ctx_params *params, ropeqk_ctx **out);
ROPEQK_API void ropeqk_ctx_destroy(ropeqk_ctx *ctx); /* NULL-safe */

/* The raw code of the context's latest backend failure (0 if none) and, if `backend` is non-NULL,
 * the backend's name ("OpenCL"). */
ROPEQK_API int32_t ropeqk_ctx_backend_error(const ropeqk_ctx *ctx, const char **backend);
/* Copies the log of the latest failed program build ("" if none) into buf (len bytes, always
 * NUL-terminated when len > 0) and returns its full length: call with len 0 to size a buffer. */
ROPEQK_API size_t ropeqk_ctx_build_log(const ropeqk_ctx *ctx, char *buf, size_t len);
/* The backend a context runs on: for code that must tell them apart without a backend header (a
 * test's expectation, a bench's row label). NONE for NULL. */
typedef enum { ROPEQK_BACKEND_NONE = 0, ROPEQK_BACKEND_OPENCL = 1, ROPEQK_BACKEND_VULKAN = 2 } ropeqk_backend;
ROPEQK_API ropeqk_backend ropeqk_ctx_backend(const ropeqk_ctx *ctx);

/* What a backend's debugging layers reported (Vulkan: the Khronos validation layer, see
 * ropeqk_vulkan_validation_messages for ROPEQK_VULKAN_VALIDATION; OpenCL: none, always OFF and 0). */
typedef enum {
    ROPEQK_VALIDATION_OFF = 0,         /* not asked for (or the backend has none) */
    ROPEQK_VALIDATION_ON = 1,          /* enabled: messages are counted */
    ROPEQK_VALIDATION_UNAVAILABLE = 2, /* asked for where installed ("auto"), and not installed */
} ropeqk_validation;
typedef struct {
    ropeqk_validation validation;
    uint32_t messages; /* validation messages (warnings, errors) seen so far */
    char first[512];   /* the first of them ("" if none) */
} ropeqk_diagnostics;
/* Fills *out for ctx, or (ctx NULL) for the whole process: every context made so far, destroyed
 * ones included, and the validation a new context would get from the environment.
 * ROPEQK_ERR_NULL_POINTER when out is NULL. */
ROPEQK_API ropeqk_status ropeqk_ctx_diagnostics(const ropeqk_ctx *ctx, ropeqk_diagnostics *out);
/* The device, its platform and driver version, e.g. "NVIDIA H100 (NVIDIA CUDA, driver 580.159)".
 * Lives as long as the context. */
ROPEQK_API const char *ropeqk_ctx_device_description(const ropeqk_ctx *ctx);
/* Build options the library uses on this context's device (tuning -D values); lives as long as
 * the context. */
ROPEQK_API const char *ropeqk_ctx_build_options(const ropeqk_ctx *ctx);
/* The configuration in effect (every field resolved; decode and vendor_ext as 1/-1 and 0/-1), and
 * where the profile came from ("ROPEQK_PROFILE=gpu", "parameter", "auto: CPU device"); the string
 * lives as long as the context. */
ROPEQK_API ropeqk_status ropeqk_ctx_tuning(const ropeqk_ctx *ctx, ropeqk_tuning *out, const char **profile_source);
/* The value in effect on ctx of its backend's knob `name`, as ropeqk_ctx_tuning reports the field
 * (off as -1), environment-only knobs included (ROPEQK_ERR_BAD_PARAM when its backend has none). */
ROPEQK_API ropeqk_status ropeqk_ctx_knob(const ropeqk_ctx *ctx, const char *name, int32_t *value);
/* Where the kernel configuration came from: "cache (<file>)", "shipped (<entry>)" or "heuristic
 * (...)", then "; overrides: ..." for caller or environment values, and a note on a cache file
 * that was ignored (corrupt, stale, foreign). Lives as long as the context. */
ROPEQK_API const char *ropeqk_ctx_config_source(const ropeqk_ctx *ctx);

/* ---- devices -------------------------------------------------------------------------------- */
typedef enum {
    ROPEQK_DEVICE_OTHER = 0,
    ROPEQK_DEVICE_CPU = 1,
    ROPEQK_DEVICE_GPU = 2,         /* discrete, integrated or virtual */
    ROPEQK_DEVICE_ACCELERATOR = 3,
} ropeqk_device_type;

/* One device of one backend, as `ropeqk devices` prints it. Strings are NUL-terminated, "" where the
 * backend does not say; numbers 0 where it does not say. */
typedef struct {
    char backend[16];   /* "OpenCL", "Vulkan" (ropeqk_ctx_backend_error's name) */
    /* what ropeqk_ctx_params.device and $ROPEQK_DEVICE take to open exactly this device:
     * "opencl:P:D", "vulkan:N" */
    char device[64];
    char name[256];
    char vendor[128];   /* OpenCL: CL_DEVICE_VENDOR; Vulkan: the PCI vendor, e.g. "NVIDIA (0x10de)" */
    /* what the backend groups its devices under: OpenCL "<platform> (<vendor>), <version>";
     * Vulkan "Vulkan loader, instance version 1.3.275" */
    char platform[256];
    char version[128];  /* API version of the device: "OpenCL 3.0 CUDA", "Vulkan 1.4.312" */
    char driver[128];   /* OpenCL: CL_DRIVER_VERSION; Vulkan: driver name and info */
    ropeqk_device_type type;
    uint32_t compute_units;  /* OpenCL: CL_DEVICE_MAX_COMPUTE_UNITS; Vulkan: 0 (not reported) */
    uint64_t global_mem;     /* bytes: OpenCL global memory; Vulkan: the largest device-local heap */
    uint64_t max_alloc;      /* bytes: the largest single allocation (Vulkan 1.1's maxMemoryAllocationSize) */
    /* 1: the library can open a context on it; 0: `unusable` says why (Vulkan: no compute queue or
     * no VK_KHR_push_descriptor) */
    int32_t usable;
    char unusable[128];
    /* 1 on the device ropeqk_ctx_create() opens without a device parameter ($ROPEQK_DEVICE, else the
     * first device of the first backend that has one): at most one device of a listing */
    int32_t is_default;
    /* the backend's own facts, one per line ('\n'-separated, no trailing newline): OpenCL "fp16
     * (cl_khr_fp16): no, fp64 (cl_khr_fp64): yes"; Vulkan the cooperative matrices (tensor cores,
     * docs/tensor-cores.md): whether the device has them, its shapes, whether this build has their
     * shaders */
    char details[768];
} ropeqk_device_info;

/*
 * Lists the devices of every backend built, in the order a device name or no device parameter tries
 * them (OpenCL, then Vulkan; within a backend, its index order). Writes up to `cap` entries into
 * infos (may be NULL when cap is 0) and the total into *count, so a call with cap 0 sizes the array.
 * Opens no context. ROPEQK_ERR_NO_DEVICE (*count 0) when no backend finds a device, with
 * ropeqk_last_error() saying why for each (no OpenCL platform, no Vulkan driver); a backend that
 * fails is otherwise left out of the listing. ROPEQK_ERR_NULL_POINTER: count NULL, or infos NULL
 * with cap > 0.
 */
ROPEQK_API ropeqk_status ropeqk_list_devices(ropeqk_device_info *infos, uint32_t cap, uint32_t *count);
/* The context's device, as ropeqk_list_devices() describes it (device: the string that opens it,
 * "" when not found among the backend's devices, e.g. a borrowed device of another instance;
 * is_default 0). Also for contexts on borrowed objects. */
ROPEQK_API ropeqk_status ropeqk_ctx_device_info(const ropeqk_ctx *ctx, ropeqk_device_info *out);
/* The program text the context's kernels are built from, for bug reports (`ropeqk devices
 * --dump-program`): on OpenCL the OpenCL C program (the same text for every device; the build
 * options, ropeqk_ctx_build_options(), make the variants); NULL and *len 0 on Vulkan, whose shaders
 * are embedded SPIR-V, and for a NULL context. Static storage. len may be NULL. */
ROPEQK_API const char *ropeqk_ctx_program_source(const ropeqk_ctx *ctx, size_t *len);

/* ---- tuner ---------------------------------------------------------------------------------- */
typedef struct {
    double budget_seconds;  /* wall-clock budget of the search; 0 = 120. A family reached after
                             * it is spent only checks the configuration in effect (not timed) */
    int32_t no_write;       /* 1: search only, leave the cache alone */
    /* optional: called with one line per candidate ("scores tq=8 vk=16 wg=16: 1.23 ms ok") */
    void (*progress)(void *user, const char *line);
    void *user;
} ropeqk_tune_params;

/*
 * Searches kernel configurations for the context's device and profile: prefill scores (TQ, VK,
 * WG; on the GPU profile also the tiled kernel's TILE, RB, TK), the decode kernel (DKB, DWG; CPU profile) and attention (ATQ, AVK, AWG;
 * on the GPU profile first the GPU attention kernel's shapes, attn_*); on OpenCL also the two
 * crossovers, chunk_rows (4, 8, 16, 32, 64: a ragged paged call with sequences of 2 to 48 rows over
 * ~3k cached tokens) and dense_rows (off, 4, 8, 16, 32: dense attention of 1 to 24 rows over 8k
 * keys; ROPEQK_CHUNK_ROWS and ROPEQK_DENSE_DECODE count as knob overrides below). Every candidate
 * is first checked against the fp64 path on a small case (a candidate that fails is dropped), then
 * timed (median of 3). The winners go to the per-user cache ($XDG_CACHE_HOME/ropeqk/, else
 * ~/.cache/ropeqk/), keyed by device, driver and library version and written atomically; contexts
 * created afterwards load them. *best (optional) receives them, path (optional) the cache file.
 * The library never tunes by itself. ROPEQK_ERR_BAD_CONFIG when a ROPEQK_<knob> environment
 * override is set (it would override every candidate) or the cache cannot be written.
 */
ROPEQK_API ropeqk_status ropeqk_tune(ropeqk_ctx *ctx, const ropeqk_tune_params *params, ropeqk_tuning *best,
                                     char *path, size_t path_len);

/* Builds (or finds in the cache) the program for the context's device now. Optional: plan creation
 * builds it otherwise. */
ROPEQK_API ropeqk_status ropeqk_ctx_warmup(ropeqk_ctx *ctx);

/* ---- plans -------------------------------------------------------------------------------- */
typedef enum {
    ROPEQK_OP_SCORES = 1,    /* S = scale * RoPE(Q) RoPE(K)^T, masked; out [B,Hq,Sq,Sk] f32 */
    ROPEQK_OP_ATTENTION = 2, /* O = softmax(S) V, S as above but never written; out [B,Hq,Sq,Dv] */
    ROPEQK_OP_PAGED_DECODE = 3, /* attention of a ragged batch of sequences (1..n query rows each:
                                 * decode, speculative steps, prefill chunks) over a paged KV cache */
} ropeqk_op;

/*
 * A paged KV cache (ROPEQK_OP_PAGED_DECODE). Keys and values are stored unrotated, in pages of
 * page_size tokens: the plan's k describes the K cache as [num_pages, Hkv, page_size, D] and v the
 * V cache as [num_pages, Hkv, page_size, Dv] (any strides, last dim contiguous, f32/f16/bf16, or
 * 8-bit: ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2, K and V independently). q is
 * [max_q_rows, Hq, 1, D] (the query rows of all sequences, packed), out [max_q_rows, Hq, 1, Dv], lse
 * [max_q_rows, Hq, 1, 1]. Per enqueue, host arrays say for each sequence s: its pages (a row of the
 * page table), its length (tokens cached, the new tokens' K/V appended first), its query rows
 * (q_indptr: FlashInfer's qo_indptr) and their positions, and the position of its first cached token
 * (key j sits at k_pos0[s] + j). Causal masking (params.causal) is by position within each sequence:
 * a row at position p sees the keys at positions <= p (and > p - window with a sliding window).
 * Keys are rotated with their own positions at read time, so shifting or trimming a context, or
 * changing the scaling, needs no cache rewrite.
 *
 * How it runs: every query row is a task of the decode kernels (split over pages, flash-decoding,
 * then a reduction of the splits), with its own position and the length it can see; the split is
 * computed per call on the host from the rows' lengths and the device's compute units
 * (docs/conventions.md section 10). A sequence's prefill chunk of chunk_rows rows or more (a tuning
 * knob, default 16, ROPEQK_CHUNK_ROWS) runs instead through the attention kernel of a companion plan
 * over its K/V gathered from the pages (both backends; an 8-bit cache is gathered as its f32
 * values): same results, each key rotated once for all the chunk's rows. The companion is made with
 * the plan (its scratch is allocated per call on OpenCL, at the first chunk on Vulkan).
 *
 * Quantized caches (docs/conventions.md section 12): an 8-bit cache comes with an f32 scale buffer,
 * k_scale resp. v_scale, contiguous [num_pages, Hkv, page_size] (scale of token slot t of head h of
 * page p at element (p * Hkv + h) * page_size + t), given with the cache at every call (decode and
 * append) in the backend's arguments; a 16/32-bit cache takes none. The value of element d of a row
 * is (float)q[d] * scale (symmetric, f32 math). The append quantizes its f32/f16/bf16 rows: per
 * (token, KV head) row, a = max |x|, scale = a / QMAX (QMAX 127 int8, 448 e4m3, 57344 e5m2),
 * q = x / scale rounded to nearest even (int8 clamped to [-127, 127]; fp8 saturating to +-QMAX),
 * both divisions rounded as IEEE f32 division is on every device (computed in integers, not with
 * the device's `/`): the same bytes and scales as the host rule of support/quant.c everywhere;
 * a row of zeros gets scale 0 and q 0; a row holding a NaN or an infinity gets scale NaN (its keys
 * then read as NaN, as an unquantized cache would propagate them). A cache the caller quantized
 * itself in this layout is read the same way.
 */
typedef struct {
    int64_t page_size;          /* tokens per page, 16..256 */
    int64_t max_pages_per_seq;  /* length of a page-table row */
    int64_t max_seqs;           /* sequences per enqueue, at most */
    int64_t max_q_rows;         /* query rows per enqueue, at most (q.ne[0]); 0: max_seqs (one each) */
} ropeqk_paged_desc;

/*
 * The per-enqueue description of a ragged batch: n_seqs (1..max_seqs) sequences; host int32 arrays,
 * validated on the host (specific statuses, nothing enqueued or recorded on error) and copied
 * by the call (any backend):
 *   page_table [n_seqs][max_pages_per_seq]  pages of each sequence in order (entries past a
 *                                           sequence's last page are ignored)
 *   seq_lens   [n_seqs]  tokens cached per sequence (>= 1, <= max_pages_per_seq * page_size)
 *   q_pos      [n_seqs]  position of each sequence's first query row (its rows: q_pos[s],
 *                        q_pos[s] + 1, ...)
 *   k_pos0     [n_seqs]  position of each sequence's first cached token (NULL: 0)
 *   q_indptr   [n_seqs + 1]  NULL: one query row per sequence (row s). Else sequence s has the rows
 *                        q_indptr[s] .. q_indptr[s+1] - 1 of q, out and lse: q_indptr[0] == 0,
 *                        q_len[s] = q_indptr[s+1] - q_indptr[s] in [1, seq_lens[s]] (a row's own
 *                        token is cached), q_indptr[n_seqs] <= max_q_rows; else
 *                        ROPEQK_ERR_QUERY_ROWS. Appends ignore it.
 * Rows past q_indptr[n_seqs] (or n_seqs) of out and lse are not written.
 */
typedef struct {
    int64_t n_seqs;
    const int32_t *page_table, *seq_lens, *q_pos, *k_pos0;
    const int32_t *q_indptr;
} ropeqk_paged_batch;

typedef enum {
    ROPEQK_POS_OFFSETS = 0, /* pq[i] = q_pos_offset + i, pk[j] = k_pos_offset + j */
    ROPEQK_POS_ARRAYS = 1,  /* int32 arrays given at enqueue (either may be left out: offsets) */
} ropeqk_positions;

/*
 * What a plan computes. The descriptors fix shapes, strides and dtypes; buffers come at enqueue.
 * max_keys = 0: a fixed plan, Sk = k.ne[2]. max_keys > 0: a decode plan for a generation loop:
 * k and out describe max_keys keys (k.ne[2] == out.ne[3] == max_keys), and every enqueue says how
 * many keys it uses (1..max_keys) and the position offsets (a ropeqk_step); frequencies are fixed
 * at creation, so DYNAMIC and LONGROPE scaling need an explicit scaling.seq_len there.
 */
typedef struct {
    ropeqk_op op;
    ropeqk_params params;
    ropeqk_tensor q, k, out;
    ropeqk_positions positions;
    int64_t max_keys;
    /* ROPEQK_OP_ATTENTION only (leave zeroed for SCORES):
     *   v   [B,Hkv,Sk,Dv] f32/f16/bf16, never rotated, Dv contiguous (Dv may differ from D);
     *       out is then [B,Hq,Sq,Dv] in f32, f16 or bf16;
     *   lse [B,Hq,Sq,1] f32, the natural log of each row's sum of exp(S), when with_lse is set.
     * Accumulation is f32; a fully masked row gives O = 0 and LSE = -inf (sinks: LSE = s_h), and
     * LSE = -inf means nothing else. Non-finite K or V data (NaN, +-inf; docs/conventions.md
     * section 9): a masked key weighs exactly 0 whatever its slots hold (rows that do not see it are
     * bit-identical to finite data there; paged caches: also slots past a sequence's length and
     * unused pages); a row that sees a key with a non-finite K element is NaN in O and LSE; one that
     * sees a non-finite V element has a non-finite O in that dim only (LSE unchanged; Vulkan's
     * tensor-core path: NaN in all of O and LSE). On Vulkan the NaN propagation is the driver's (not
     * required without SignedZeroInfNanPreserve). */
    ropeqk_tensor v, lse;
    int32_t with_lse;
    /* ROPEQK_OP_PAGED_DECODE only (also uses v, lse, with_lse; k and v describe the caches) */
    ropeqk_paged_desc paged;
} ropeqk_plan_desc;

/* One enqueue of a decode plan: keys used (1..max_keys) and the offsets that replace
 * params.q_pos_offset / k_pos_offset. Fixed plans take no step (NULL). */
typedef struct {
    int64_t n_keys;
    int64_t q_pos_offset;
    int64_t k_pos_offset;
} ropeqk_step;

typedef struct ropeqk_plan ropeqk_plan;

/* Validates the description, computes the frequencies, builds the program if needed, uploads the
 * tables and creates the kernels. The plan copies what it needs: desc and the arrays it points to
 * (scaling factor lists) may be freed afterwards. On failure *out is NULL. */
ROPEQK_API ropeqk_status ropeqk_plan_create(ropeqk_ctx *ctx, const ropeqk_plan_desc *desc, ropeqk_plan **out);
/* NULL-safe. Work already enqueued completes: the backend keeps what it uses alive. */
ROPEQK_API void ropeqk_plan_destroy(ropeqk_plan *plan);

/* Convenience over a plan: host memory in and out (upload, run, download, blocking) on the
 * context's queue. Positions may be NULL (offsets). Host buffer sizes follow the descriptors'
 * extents; a strided output's gaps keep their bytes. */
ROPEQK_API ropeqk_status ropeqk_scores(ropeqk_ctx *ctx, const ropeqk_params *p,
                                       const ropeqk_tensor *q, const void *q_data,
                                       const ropeqk_tensor *k, const void *k_data,
                                       const int32_t *q_pos, const int32_t *k_pos,
                                       const ropeqk_tensor *out, float *out_data);

/* Convenience over an attention plan: host memory in and out (blocking) on the context's queue.
 * out f32/f16/bf16; lse NULL (no LSE) or f32. Positions may be NULL (offsets). */
ROPEQK_API ropeqk_status ropeqk_attention(ropeqk_ctx *ctx, const ropeqk_params *p,
                                          const ropeqk_tensor *q, const void *q_data,
                                          const ropeqk_tensor *k, const void *k_data,
                                          const ropeqk_tensor *v, const void *v_data,
                                          const int32_t *q_pos, const int32_t *k_pos,
                                          const ropeqk_tensor *out, void *out_data,
                                          const ropeqk_tensor *lse, float *lse_data);

/* ---- device memory, events and runs (every backend) ----------------------------------------- */
/*
 * Plans run on device memory the context allocates (ropeqk_buffer_create) or that a caller lends
 * through a backend header (ropeqk_opencl_buffer_wrap, ropeqk_vulkan_buffer_wrap). Runs and copies
 * are asynchronous and execute in submission order on the context's queue (OpenCL: its command
 * queue; Vulkan: command buffers of the library's own, submitted to the context's queue under its
 * lock, each starting with a barrier after every earlier write in the queue and ending with one
 * before every later access, host reads included). Each can wait for events (ropeqk_event: an
 * OpenCL cl_event, or a Vulkan timeline-semaphore value) and hand back one that completes with it.
 * Buffer reads, writes and fills are blocking and ordered after everything submitted before them
 * on the context's queue.
 *
 * Every wait these calls make is bounded: ROPEQK_ERR_TIMEOUT with a message naming what was
 * waited for, after the time given (ropeqk_event_wait) or, for the blocking calls, 300 s or
 * $ROPEQK_WAIT_TIMEOUT_MS milliseconds. A timed-out operation may still complete later.
 *
 * Checked before anything is submitted (nothing runs on error, *signal is NULL): NULLs
 * (ROPEQK_ERR_NULL_POINTER), buffers and events of another context or device (ROPEQK_ERR_BAD_PARAM),
 * then everything the plan checks: views aligned and inside their buffers, outputs overlapping no
 * input, steps, paged batches, with the statuses of the backend calls.
 *
 * Objects: buffers and events belong to their context, which must outlive them (destroy them
 * first); a buffer must not be destroyed while a run that uses it is pending. Vulkan contexts on
 * a caller's VkDevice need Vulkan 1.2's timelineSemaphore feature enabled and declared
 * (ropeqk_vulkan_ctx_params.timeline_semaphore) to use these calls.
 */
typedef struct ropeqk_buffer ropeqk_buffer;
typedef struct ropeqk_event ropeqk_event;

enum {
    /* Host-visible memory (Vulkan: host-visible, coherent, mapped; reads and writes are memcpy after
     * waiting for the queue): for tests and small host-written data. Without it: device-local
     * memory, read and written through a staging buffer (the placement the kernels read at full
     * speed). OpenCL: CL_MEM_ALLOC_HOST_PTR (a hint; the driver places it). */
    ROPEQK_BUFFER_HOST_VISIBLE = 1u << 0,
};

/* A buffer of at least `bytes` (>= 1) bytes on the context's device: its size is bytes rounded up to
 * a multiple of 4 (fills are in 32-bit words; 16-bit views are read as whole words on Vulkan); the
 * contents are undefined until written. flags: ROPEQK_BUFFER_* (others: ROPEQK_ERR_BAD_PARAM).
 * ROPEQK_ERR_TOO_LARGE past the device's allocation limit. On failure *out is NULL. */
ROPEQK_API ropeqk_status ropeqk_buffer_create(ropeqk_ctx *ctx, uint64_t bytes, uint32_t flags, ropeqk_buffer **out);
/* NULL-safe. A wrapped native object is released (its reference dropped), not destroyed. */
ROPEQK_API void ropeqk_buffer_destroy(ropeqk_buffer *buf);
/* Bytes usable (0 for NULL): a created buffer's rounded size, a wrapped one's size or range. */
ROPEQK_API uint64_t ropeqk_buffer_size(const ropeqk_buffer *buf);
/* Blocking copies between host memory and bytes [offset, offset + bytes) of buf, after everything
 * submitted before on the context's queue. ROPEQK_ERR_BUFFER_TOO_SMALL past the buffer's size;
 * 0 bytes: nothing. */
ROPEQK_API ropeqk_status ropeqk_buffer_write(ropeqk_buffer *buf, uint64_t offset, const void *src, uint64_t bytes);
ROPEQK_API ropeqk_status ropeqk_buffer_read(const ropeqk_buffer *buf, uint64_t offset, void *dst, uint64_t bytes);
/* Sets bytes [offset, offset + bytes) to the 32-bit word `pattern` repeated (blocking, ordered as
 * above): offset and bytes multiples of 4 (else ROPEQK_ERR_BAD_PARAM). A byte b: b * 0x01010101u. */
ROPEQK_API ropeqk_status ropeqk_buffer_fill(ropeqk_buffer *buf, uint64_t offset, uint64_t bytes, uint32_t pattern);

/* One region of a copy between buffers (the same context). */
typedef struct {
    ropeqk_buffer *dst;
    uint64_t dst_offset;
    const ropeqk_buffer *src;
    uint64_t src_offset;
    uint64_t bytes; /* >= 1 */
} ropeqk_copy;
/* Copies n regions on the device, asynchronously (one submission; the bench's bandwidth
 * yardstick), after the num_wait events of wait. Refused before anything runs: a region past its
 * buffers (ROPEQK_ERR_BUFFER_TOO_SMALL), 0 bytes (ROPEQK_ERR_BAD_PARAM), a region's source and
 * destination, or two destinations, sharing a byte (ROPEQK_ERR_OVERLAP). *signal (signal may be
 * NULL) receives an event that completes with the copies. */
ROPEQK_API ropeqk_status ropeqk_buffer_copy(const ropeqk_copy *regions, uint32_t n, uint32_t num_wait,
                                            ropeqk_event *const *wait, ropeqk_event **signal);

/* Waits at most timeout_ns nanoseconds (0: only polls; UINT64_MAX: the blocking calls' bound) for
 * the event: ROPEQK_SUCCESS once it completed, ROPEQK_ERR_TIMEOUT (ropeqk_last_error names the
 * operation that signals it) if not yet, ROPEQK_ERR_BACKEND if its commands failed. */
ROPEQK_API ropeqk_status ropeqk_event_wait(ropeqk_event *ev, uint64_t timeout_ns);
/* NULL-safe. The operation goes on; only the handle is released. */
ROPEQK_API void ropeqk_event_release(ropeqk_event *ev);
/* Waits (bounded, as the blocking calls) until everything submitted through this API on the
 * context's queue has completed. */
ROPEQK_API ropeqk_status ropeqk_ctx_finish(ropeqk_ctx *ctx);

/* A view's buffer and byte offset; {NULL, 0}: absent (positions: use the offsets). */
typedef struct {
    ropeqk_buffer *buf;
    uint64_t offset;
} ropeqk_mem;

/* The buffers of a scores or attention run (the plan's descriptors say what each view holds). */
typedef struct {
    ropeqk_mem q, k;
    ropeqk_mem q_pos, k_pos; /* int32, Sq resp. Sk entries ([3][S] under M-RoPE); {NULL, 0}: offsets */
    ropeqk_mem out;
    ropeqk_mem v, lse;       /* ROPEQK_OP_ATTENTION: V, and LSE when the plan has with_lse */
} ropeqk_args;

/*
 * Runs a scores or attention plan (fixed, or a decode plan with its step: keys and offsets; the
 * dense decode's few-row path where the context takes it) after the num_wait events of wait (any of
 * the context's device); *signal (signal may be NULL) receives an event that completes when the
 * outputs are written, which the caller releases. A paged plan runs with ropeqk_paged_run.
 */
ROPEQK_API ropeqk_status ropeqk_plan_run(ropeqk_plan *plan, const ropeqk_args *args, const ropeqk_step *step,
                                         uint32_t num_wait, ropeqk_event *const *wait, ropeqk_event **signal);

/* The buffers of a paged decode (ROPEQK_OP_PAGED_DECODE plans; the caches as the plan describes). */
typedef struct {
    ropeqk_mem q, k_cache, v_cache, out, lse; /* lse only with with_lse */
    ropeqk_mem k_scale, v_scale;              /* 8-bit caches' f32 scales: exactly for an 8-bit cache */
} ropeqk_paged_args;
/* The caches an append writes, and their scales (8-bit caches only). */
typedef struct {
    ropeqk_mem k_cache, v_cache, k_scale, v_scale;
} ropeqk_paged_cache;

/* Decode over the paged cache for a ragged batch (ropeqk_paged_batch: validated and copied by the
 * call, so its arrays may go as soon as it returns). Waits and signal as ropeqk_plan_run. */
ROPEQK_API ropeqk_status ropeqk_paged_run(ropeqk_plan *plan, const ropeqk_paged_args *args,
                                          const ropeqk_paged_batch *batch, uint32_t num_wait,
                                          ropeqk_event *const *wait, ropeqk_event **signal);
/* Appends n_new unrotated K/V rows per sequence (k_new [n_seqs, Hkv, n_new, D], v_new
 * [n_seqs, Hkv, n_new, Dv]: the caches' dtypes, or f32/f16/bf16 for an 8-bit cache, quantized) at
 * tokens seq_lens[s] .. seq_lens[s] + n_new - 1 of each sequence's pages (seq_lens: the lengths
 * before the append; q_pos, k_pos0, q_indptr unused). Waits and signal as ropeqk_plan_run. */
ROPEQK_API ropeqk_status ropeqk_paged_append(ropeqk_plan *plan, const ropeqk_tensor *k_new, ropeqk_mem k_new_mem,
                                             const ropeqk_tensor *v_new, ropeqk_mem v_new_mem,
                                             const ropeqk_paged_cache *cache, const ropeqk_paged_batch *batch,
                                             uint32_t num_wait, ropeqk_event *const *wait, ropeqk_event **signal);

#ifdef __cplusplus
}
#endif
#endif /* ROPEQK_H */
