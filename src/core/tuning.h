/* Kernel configuration: what a device is (rq_devinfo, filled by its backend), the knobs in effect
 * (rq_tuning, resolved by tuning.c from environment, caller and defaults), and the per-user tuning
 * cache (tune_cache.c). Backend-neutral: which knobs exist, their ranges, variables and defaults are
 * the backends' tables (knob.h); each backend reads the knobs of its own kernels. */
#ifndef ROPEQK_CORE_TUNING_H
#define ROPEQK_CORE_TUNING_H

#include "knob.h"

struct rq_backend;

/* Kernel configuration of a context's device (tuning.c decides it; the OpenCL kernels get their
 * knobs as -D options, the Vulkan shaders as specialization constants, and the host reads the same
 * fields: one source for both). The fields are storage: each is named, ranged and defaulted by the
 * table of the backend that reads it (src/opencl/cl_knobs.c, src/vulkan/vk_knobs.c). */
typedef struct rq_tuning_s {
    int tq, wg, vk;      /* qk_scores: query rows, work-group size, keys per vector (RQ_TQ/WG/VK) */
    int nv;              /* qk_scores: vectors of keys per work-item, 1 or 2 (RQ_NV) */
    int dkb, dwg;        /* qk_decode_*: keys per work-item, work-group size (RQ_DKB/DWG) */
    int decode;          /* whether the decode path is used (RQ_DECODE) */
    int rot_uwg;         /* rope_rotate_*: units per work-group (host only) */
    int atq, avk, awg;   /* qk_attention_*: rows per work-item, keys per block, work-group size */
    int tile, rb, tk;    /* qk_scores_tiled: tile edge (0 = off), register block edge, dims per step */
    int vk_block, vk_tk; /* Vulkan scores.comp: register block T (tile 16T), head dims per stage */
    int vk_rows;         /* Vulkan attention.comp: query rows (invocations) per work-group */
    int attn_tile, attn_keys, attn_tk, attn_rb, attn_dv; /* qk_attention_gpu_* / _fa2_*: rows per work-group (0 = off),
                          * keys per tile, dims per step, rows per work-item, V dims per work-group */
    int chunk_rows;      /* paged ragged calls: query rows from which a sequence takes the chunk path
                          * (K/V gathered, attention kernel) instead of the decode kernels (host only) */
    int dense_rows;      /* dense attention: most query rows run through the paged decode kernels on
                          * the dense K/V, no K pre-pass (host only; 0 = never) */
    int paged_fast;      /* the paged decode's fast pass 1 where the shape allows: -1 (default) on OpenCL's
                          * GPU profile and Vulkan GPUs, 1 also on Vulkan CPU devices, 0 never (host
                          * only; ROPEQK_PAGED_FAST) */
    int paged_wgs;       /* paged_attn_fast: work-groups per compute unit its split aims at (host only;
                          * ROPEQK_PAGED_WGS; 0 = the kernel's default) */
    int vk_coopmat;      /* Vulkan tensor-core path: 0 auto, -1 off, 1 emulated (src/vulkan/vk_cm.c) */
    int vk_cm_rows, vk_cm_keys; /* its tile: query rows per work-group, keys per tile */
    int vendor_ext;      /* 1: the backend's vendor builtins are in use (its tuning_base decides which
                          * devices have them; API vendor_ext -1 turns them off) */
    ropeqk_profile profile;     /* CPU or GPU, never AUTO once resolved */
    char profile_source[96];    /* why: "ROPEQK_PROFILE=gpu", "parameter", "auto: CPU device" */
    char config_source[512];    /* where the knobs came from: cache, shipped, heuristic, overrides */
} rq_tuning;

/* The crossovers' ranges (API, environment, cache file): chunk_rows beyond any chunk means never */
#define RQ_CHUNK_ROWS_MAX (1 << 20)
#define RQ_DENSE_ROWS_MAX 1024

/* What the configuration depends on, read from the device once by its backend. */
typedef struct {
    bool cpu;       /* a CPU device (OpenCL CL_DEVICE_TYPE_CPU, Vulkan VK_PHYSICAL_DEVICE_TYPE_CPU) */
    bool nv_opts;   /* OpenCL: the device reports cl_nv_compiler_options (-cl-nv-maxrregcount) */
    size_t max_wg;  /* most work-items per work-group, 0 if unknown */
    size_t local_mem; /* local (shared) memory per work-group, 0 if unknown */
    int native_vec; /* native float vector width, 0 if unknown */
    char name[128], platform[128], driver[64];
} rq_devinfo;

/* The tuning cache (tune_cache.c). */
typedef enum {
    RQ_CACHE_NONE, RQ_CACHE_OK, RQ_CACHE_CORRUPT, RQ_CACHE_FOREIGN, RQ_CACHE_STALE, RQ_CACHE_OTHER_PROFILE
} rq_cache_result;
int rq_tune_cache_dir(char *buf, size_t len);
int rq_tune_cache_path(const rq_devinfo *dev, char *buf, size_t len);
/* Applies the device's cached knobs to *t when the file is valid for this device, driver, library
 * and t->profile and holds the knobs `own` of the device's backend; note receives the path, or why the file was ignored ("" when there is none). */
rq_cache_result rq_tune_cache_load(const rq_devinfo *dev, const rq_knob *own, size_t n_own, ropeqk_profile prof,
                                   rq_tuning *t, char *note, size_t note_len);
/* Writes t's knobs for this device, atomically; path receives the file name. */
ropeqk_status rq_tune_cache_store(const rq_devinfo *dev, const rq_tuning *t, char *path, size_t path_len);

/* The profile's defaults of every knob of the backends built in (their tables' def_cpu / def_gpu;
 * AUTO counts as CPU here: resolve picks the profile first). */
void rq_tuning_defaults(ropeqk_profile prof, rq_tuning *t);
/* Profile and knobs for a device of backend `be`: ROPEQK_* environment variables (strictly parsed:
 * a malformed one is ROPEQK_ERR_BAD_CONFIG with the thread's error message set), then req (may be
 * NULL), then the cache, the backend's base (be->tuning_base: heuristics, shipped entries, vendor
 * switch) and the profile's defaults; last the backend fits the knobs to the device
 * (be->tuning_fit). Every backend's knobs are resolved and checked (knob.h: rq_knobs_all). */
ropeqk_status rq_tuning_resolve(const struct rq_backend *be, const ropeqk_tuning *req, const rq_devinfo *dev,
                                rq_tuning *t);
/* The public form of a resolved configuration (each knob as rq_knob_report gives it). */
void rq_tuning_to_api(const rq_tuning *t, ropeqk_tuning *o);
/* Appends "; <fmt...>" to t->config_source. */
void rq_tuning_note(rq_tuning *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
