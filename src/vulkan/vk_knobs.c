/* The Vulkan backend's knobs (knob.h): what its shaders get as specialization constants and its
 * host reads, with their ranges, environment variables and defaults (the same on both profiles:
 * the device's limits decide, src/vulkan/vk_tune.c's base adjusts dense_rows on CPU devices). The
 * core resolves, caches and lists them from this table (src/core/tuning.c, tune_cache.c). */
#include "vk.h"

static bool vk_block_ok(long v) { return v == 2 || v == 4 || v == 8; }
static bool vk_tk_ok(long v) { return v == 8 || v == 16 || v == 32; }
static bool vk_rows_ok(long v) { return v == 32 || v == 64 || v == 128; }

/* name, environment variable (ROPEQK_ENV), range, allowed values, kind, flags, rq_tuning field (the
 * same name as ropeqk_tuning's), defaults (CPU, GPU), doc */
#define KNOB(name, ENV, lo, hi, ok, allowed, kind, flags, d_cpu, d_gpu, doc)                                     \
    {#name, "ROPEQK_" #ENV, lo, hi, ok, allowed, kind, flags, offsetof(rq_tuning, name),                        \
     offsetof(ropeqk_tuning, name), d_cpu, d_gpu, doc}
#define C RQ_KNOB_CACHED
#define S RQ_KNOB_SHOWN
#define I RQ_KNOB_INT

const rq_knob rq_vk_knobs[] = {
    /* scores.comp: a 64 x 64 tile, 16 dims a stage (the shape the suite first passed with; the tuner
     * searches 2/4/8 x 8/16/32, vk_plan.c checks shared memory and loop trips) */
    KNOB(vk_block, VK_BLOCK, 2, 8, vk_block_ok, "2, 4 or 8", I, C | S, 4, 4,
         "scores: scores per invocation along each side (tile 16x)"),
    KNOB(vk_tk, VK_TK, 8, 32, vk_tk_ok, "8, 16 or 32", I, C | S, 16, 16, "scores: head dims staged per step"),
    /* attention.comp: 64 rows a work-group (fits 32 KiB of shared memory to Dv 256) */
    KNOB(vk_rows, VK_ROWS, 32, 128, vk_rows_ok, "32, 64 or 128", I, C | S, 64, 64,
         "attention: query rows (invocations) per work-group"),
    /* the tensor-core path: on where the device has it; its tile 64 rows (4 subgroups of 16) x 64
     * keys, 39 KiB of shared memory (vk_cm.h); unmeasured on a GPU (docs/tensor-cores.md has the
     * static estimate), the tuner searches the others */
    KNOB(vk_coopmat, VK_COOPMAT, -1, 1, NULL, "0 (auto), -1 (off) or 1 (emulated)", RQ_KNOB_MODE, 0, 0, 0,
         "tensor-core path: 0 where the device has it, -1 never, 1 emulated"),
    KNOB(vk_cm_rows, VK_CM_ROWS, 32, 128, vk_rows_ok, "32, 64 or 128", I, C | RQ_KNOB_CACHE_OPT | S, 64, 64,
         "tensor-core path: query rows per work-group"),
    KNOB(vk_cm_keys, VK_CM_KEYS, 32, 128, vk_rows_ok, "32, 64 or 128", I, C | RQ_KNOB_CACHE_OPT | S, 64, 64,
         "tensor-core path: keys per tile"),
    /* the host-side crossovers, read as on OpenCL (the same range, variable and default; unmeasured
     * on Vulkan GPUs; CPU devices take dense_rows 2, vk_tune.c) and its paged decode's fast pass 1
     * (glsl/paged_fast.comp): -1 = on Vulkan GPUs only (on lavapipe it costs more than paged.comp
     * saves, and each pipeline compiled per context lengthens the suite's fault sweeps) */
    KNOB(chunk_rows, CHUNK_ROWS, 1, RQ_CHUNK_ROWS_MAX, NULL, "", I, C | RQ_KNOB_CACHE_V4, 16, 16,
         "paged ragged calls: query rows from which a sequence takes the chunk path"),
    {"dense_rows", "ROPEQK_DENSE_DECODE", 0, RQ_DENSE_ROWS_MAX, NULL, "1..1024; 0 (environment) or -1 (API) off",
     RQ_KNOB_OFF, C | RQ_KNOB_CACHE_V4, offsetof(rq_tuning, dense_rows), offsetof(ropeqk_tuning, dense_rows), 16, 16,
     "dense attention: most query rows run through the paged decode shaders"},
    {"paged_fast", "ROPEQK_PAGED_FAST", 0, 1, NULL, "0 (never) or 1 (CPU devices too); default -1: GPUs", I, 0,
     offsetof(rq_tuning, paged_fast), RQ_KNOB_NO_API, -1, -1, "paged and dense decode: the fast pass 1"},
};
_Static_assert(sizeof rq_vk_knobs / sizeof rq_vk_knobs[0] == RQ_VK_N_KNOBS, "vk.h's RQ_VK_N_KNOBS");
