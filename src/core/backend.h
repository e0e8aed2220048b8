/* The backend interface: one table of function pointers per backend (ggml's backend interface,
 * dav1d's DSP tables), the only way src/core reaches a backend. A backend fills ctx->impl and
 * plan->impl with its own objects; the core never looks inside them and names no backend.
 *
 * Adding a backend (CUDA, Metal, WebGPU, ...): a folder src/<name>/ with its table, one line in the
 * registry (registry.c) and in src/meson.build, and its public header include/ropeqk_<name>.h for
 * what only it has (borrowed device objects, running a plan on its buffers). Everything in ropeqk.h
 * then works on its contexts. */
#ifndef ROPEQK_CORE_BACKEND_H
#define ROPEQK_CORE_BACKEND_H

#include "object.h"

/* The neutral run API's records (call.h, run.h), which the run entries below take. */
struct rq_call_mems;
struct rq_paged_mems;
struct rq_append_mems;
struct rq_waits;

/* The model-family variants of docs/conventions.md section 11, as a backend's capability bits. */
enum { RQ_VAR_SOFTCAP = 1, RQ_VAR_ROT_OFFSET = 2, RQ_VAR_MROPE = 4, RQ_VAR_SINKS = 8 };

/* The 8-bit paged-cache dtypes (docs/conventions.md section 12) as a backend's capability bits. */
enum { RQ_KV_I8 = 1, RQ_KV_FP8_E4M3 = 2, RQ_KV_FP8_E5M2 = 4 };

/* The tuner's kernel families (src/core/tune.c), searched in this order. The core checks and times
 * the first three on its own shapes; RQ_FAM_CHUNK (the ragged paged call's chunk_rows) and
 * RQ_FAM_DENSE (dense attention's dense_rows) are host-side crossovers whose check and timing the
 * backend does itself (tune_measure). */
typedef enum { RQ_FAM_SCORES, RQ_FAM_DECODE, RQ_FAM_ATTN, RQ_FAM_CHUNK, RQ_FAM_DENSE, RQ_FAM_COUNT } rq_family;


/* Runs on device memory (ropeqk.h's ropeqk_buffer_*, ropeqk_plan_run, ...; run.h): a backend's
 * table of one entry per operation. src/core/buffer.c and run.c check NULLs, ownership, byte ranges
 * and the events (each of this backend and, by same_device, of the call's device), make the
 * ropeqk_buffer and ropeqk_event shells and the {id, offset, end} records, then call the entry. Waits
 * are bounded by `ns`. `sig` (NULL: not wanted) is an event of the call's context that the entry
 * fills (handle, value) on success. Runs are refused before anything is submitted. */
typedef struct rq_run_ops {
    /* A buffer of b->size bytes with b->flags: fills id, base, impl (ROPEQK_ERR_TOO_LARGE past the
     * device's allocation limit). buffer_free releases it (a wrapped object: the reference). */
    ropeqk_status (*buffer_alloc)(ropeqk_buffer *b);
    void (*buffer_free)(ropeqk_buffer *b);
    /* Blocking, after everything submitted before on the context's queue (the range is checked). */
    ropeqk_status (*buffer_write)(ropeqk_buffer *b, uint64_t off, const void *src, uint64_t n);
    ropeqk_status (*buffer_read)(const ropeqk_buffer *b, uint64_t off, void *dst, uint64_t n);
    ropeqk_status (*buffer_fill)(ropeqk_buffer *b, uint64_t off, uint64_t n, uint32_t word);
    /* n checked regions of ctx's buffers, asynchronously. */
    ropeqk_status (*buffer_copy)(ropeqk_ctx *ctx, const ropeqk_copy *c, uint32_t n, const struct rq_waits *w,
                                 ropeqk_event *sig);
    /* A scores or attention run, a paged decode and an append: the core's view checks (call.c,
     * paged_call.c) on the records, then the same code as the backend's interop entry points. */
    ropeqk_status (*run_plan)(ropeqk_plan *pl, const struct rq_call_mems *m, const ropeqk_step *step,
                              const struct rq_waits *w, ropeqk_event *sig);
    ropeqk_status (*run_paged)(ropeqk_plan *pl, const struct rq_paged_mems *m, const ropeqk_paged_batch *b,
                               const struct rq_waits *w, ropeqk_event *sig);
    ropeqk_status (*run_append)(ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                const struct rq_append_mems *m, const ropeqk_paged_batch *b,
                                const struct rq_waits *w, ropeqk_event *sig);
    /* ROPEQK_SUCCESS once complete, ROPEQK_ERR_TIMEOUT (no message: the core names the event) after
     * ns, ROPEQK_ERR_BACKEND when its commands failed. event_free drops the native reference. */
    ropeqk_status (*event_wait)(ropeqk_event *e, uint64_t ns);
    void (*event_free)(ropeqk_event *e);
    /* Everything submitted through these entries on ctx's queue, waited for (message set on timeout). */
    ropeqk_status (*finish)(ropeqk_ctx *ctx, uint64_t ns);
    /* Whether two contexts of this backend share the device objects events live in (OpenCL: the
     * cl_context; Vulkan: the VkDevice). */
    bool (*same_device)(const ropeqk_ctx *a, const ropeqk_ctx *b);
} rq_run_ops;

typedef struct rq_backend {
    const char *name;   /* "OpenCL": ropeqk_ctx_backend_error's name, and messages */
    const char *prefix; /* "opencl": device specs "opencl" and "opencl:<rest>" name this backend */
    ropeqk_backend id;  /* ropeqk_ctx_backend's answer */
    /* Bytes the kernels read and write at a time: a 16-bit view's last element is touched as a whole
     * unit (Vulkan reads 32-bit words: 4; OpenCL: 1), so a view needs that much of its buffer. */
    uint32_t access_unit;
    /* The model-family variants its kernels implement (RQ_VAR_* bits); plans asking for others are
     * refused at creation with ROPEQK_ERR_BAD_PARAM and a message naming the variant. */
    unsigned variants;
    /* Whether its paged decode runs a sequence's long chunk of query rows through the attention
     * kernel over K/V gathered from the pages (plan->chunk, made by the core for paged plans). */
    bool paged_chunks;
    /* The 8-bit paged-cache dtypes its kernels read and its append writes (RQ_KV_* bits); a paged plan
     * with another 8-bit cache is refused at creation with ROPEQK_ERR_BAD_DTYPE and a message naming
     * the backend. */
    unsigned kv_quant;

    /* ---- devices and contexts ---- */
    /* Opens a device into ctx (zeroed, locks made): `spec` is the part after "<prefix>:" when
     * `explicit_spec` (NULL when the spec was the bare prefix), else a spec that names no backend
     * (NULL: the backend's default device). Fills ctx->impl, dev, device_desc, then calls
     * rq_ctx_configure. ROPEQK_ERR_NO_DEVICE (message set) when nothing matches: a bare spec is then
     * tried on the next backend. On failure everything made is released by close. */
    ropeqk_status (*open)(ropeqk_ctx *ctx, const char *spec, bool explicit_spec, const ropeqk_tuning *tuning);
    /* Releases ctx->impl (may be NULL or half made); waits for the context's own queue. */
    void (*close)(ropeqk_ctx *ctx);
    /* The name of a raw backend code ("CL_OUT_OF_RESOURCES"), NULL if unknown. */
    const char *(*error_name)(int32_t code);
    /* Builds every kernel of the context's configuration now (ropeqk_ctx_warmup). */
    ropeqk_status (*warmup)(ropeqk_ctx *ctx);
    /* Lists the backend's devices into infos[0..cap) (cap may be 0, infos then NULL) in the order of
     * its device strings ("<prefix>:..."), the total into *count, and into *pick the index of the
     * device open(spec, explicit_spec) would take (-1: open would find none), all without opening
     * one. ROPEQK_ERR_NO_DEVICE (message set) when it finds no driver or platform; the core
     * (devices.c) leaves a backend that fails out of the listing. NULL: the backend lists nothing. */
    ropeqk_status (*list_devices)(ropeqk_device_info *infos, uint32_t cap, uint32_t *count, const char *spec,
                                  bool explicit_spec, int32_t *pick);
    /* The context's device as list_devices describes it (device "" when it is not among them). */
    ropeqk_status (*ctx_device_info)(const ropeqk_ctx *ctx, ropeqk_device_info *out);
    /* The program text its kernels are built from (ropeqk_ctx_program_source); NULL: none (SPIR-V). */
    const char *(*program_source)(size_t *len);
    /* ropeqk_ctx_diagnostics for ctx, or (ctx NULL) for the process; out arrives zeroed. NULL: the
     * backend has no debugging layers (OFF, 0). */
    void (*diagnostics)(const ropeqk_ctx *ctx, ropeqk_diagnostics *out);

    /* ---- configuration (src/core/tuning.c) ---- */
    /* Its knobs (knob.h): name, range, environment variable, defaults per profile, rq_tuning field.
     * The core resolves, caches, lists and describes knobs through these tables only. */
    const rq_knob *knobs;
    size_t n_knobs;
    /* Whether knobs that hold together are consistent (e.g. a tile's step divides it); NULL: no
     * such rule. On false, why (len bytes) says which knobs and what they must satisfy; checked on
     * every context's resolved knobs and on a cache file's. */
    bool (*tuning_check)(const rq_tuning *t, char *why, size_t len);
    /* Adjusts the profile's default knobs to the device (vector widths, shipped measured entries,
     * the vendor switch) and writes where they came from into t->config_source ("heuristic (...)");
     * a cache entry may override the knobs after it. */
    void (*tuning_base)(const rq_devinfo *dev, rq_tuning *t);
    /* Fits resolved knobs to the device's limits (work-group sizes, local memory), noting what it
     * turned off in t->config_source. */
    void (*tuning_fit)(const rq_devinfo *dev, rq_tuning *t);
    /* ctx->options: what the kernels are built with (snprintf's convention); may read the
     * environment (ROPEQK_ERR_BAD_CONFIG with a message on a malformed value). */
    ropeqk_status (*build_options)(const ropeqk_ctx *ctx, char *buf, size_t len);

    /* ---- plans ---- */
    /* After the core validated the description into pl (pl->pb, descriptors) and computed the
     * frequencies (freq4: inv_freq/pi as hi, mid, lo, 0 floats per frequency; inv: fp64): makes
     * pl->impl (set before anything can fail: plan_free releases a half-made one). */
    ropeqk_status (*plan_init)(ropeqk_plan *pl, const float *freq4, const double *inv);
    void (*plan_free)(ropeqk_plan *pl);
    /* The host-memory path of ropeqk_scores / ropeqk_attention: io[RQ_IO_COUNT] host ranges by role
     * (bytes 0: absent), uploaded, the plan run on the context's queue, outputs read back, blocking. */
    ropeqk_status (*host_run)(ropeqk_plan *pl, const rq_host_io *io);

    /* ---- the tuner (src/core/tune.c drives; the candidates and fit checks live with the kernels) ---- */
    unsigned tune_families; /* bit (1 << rq_family) for each family this backend tunes */
    /* Candidate k >= 1 of family f for the profile, written over t's knobs (k = 0 is t itself);
     * false past the last. */
    bool (*tune_candidate)(rq_family f, bool cpu, int k, rq_tuning *t);
    /* Whether the device takes t's shape for family f at the tuner's timed head dim D. */
    bool (*tune_fits)(const ropeqk_ctx *ctx, rq_family f, const rq_tuning *t, int64_t D);
    /* A context on ctx's device and queue with configuration t (borrowing them). */
    ropeqk_status (*tune_clone)(const ropeqk_ctx *ctx, const rq_tuning *t, ropeqk_ctx **out);
    /* Seconds of each of `runs` runs of a scores or attention plan (fixed positions, no step) on
     * device buffers of its extents filled with 0.01, each run waited for. */
    ropeqk_status (*time_plan)(ropeqk_plan *pl, int runs, double *seconds);
    /* Taken for the whole search, NULL when not needed (Vulkan: the queue's lock, as the candidates
     * submit to the same VkQueue). */
    void (*tune_lock)(ropeqk_ctx *ctx, bool lock);
    /* After family f's search, NULL when not needed: may adjust the winner *best from the n
     * candidates that passed (their times in ms), e.g. keep the best knobs of a fallback kernel. */
    void (*tune_finish)(rq_family f, rq_tuning *best, const rq_tuning *ok, const double *ms, int n);
    /* Families past RQ_FAM_ATTN, NULL when tune_families has none: checks candidate context c
     * against the fp64 path on a small case (ROPEQK_ERR_BAD_CONFIG with a message when it is off),
     * then times the family's representative shape into *ms (median of 3 after a warm-up; ms NULL:
     * the check only). */
    ropeqk_status (*tune_measure)(ropeqk_ctx *c, rq_family f, double *ms);

    /* Runs on device memory (ropeqk_buffer_*, ropeqk_plan_run, ...): one entry per operation, in a
     * table of their own (below); NULL: the backend has none (the calls return ROPEQK_ERR_BAD_PARAM). */
    const struct rq_run_ops *run;
} rq_backend;

/* The backends compiled in, in the order a bare device spec tries them (registry.c). */
extern const rq_backend *const rq_backends[];
extern const size_t rq_backend_count;

/* ---- what the core offers backends (ctx.c) ---- */
/* A zeroed context of backend be with its lock (NULL: out of memory): the backends' contexts on a
 * caller's own objects start here, then fill it as open would. */
ropeqk_ctx *rq_ctx_alloc(const rq_backend *be);
/* Closes (be->close) and frees a context, NULL-safe. */
void rq_ctx_free(ropeqk_ctx *ctx);
/* After a backend filled ctx->dev: resolves ctx->tune and builds ctx->options. */
ropeqk_status rq_ctx_configure(ropeqk_ctx *ctx, const ropeqk_tuning *tuning);
/* Records a failing raw backend code in ctx (may be NULL) for ropeqk_ctx_backend_error and sets the
 * thread's message "<backend> error NAME (code) in WHAT" (what may be NULL); returns
 * ROPEQK_ERR_BACKEND. */
ropeqk_status rq_backend_fail(const rq_backend *be, ropeqk_ctx *ctx, int32_t code, const char *what);
/* The registered backend whose prefix starts spec ("vulkan", "vulkan:1"), or NULL. */
const rq_backend *rq_spec_backend(const char *spec);

#endif
