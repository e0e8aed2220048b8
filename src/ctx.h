/* The context object, shared by ctx.c, program.c and enqueue.c. Not installed. */
#ifndef ROPEQK_CTX_H
#define ROPEQK_CTX_H

#include "internal.h"
#include "ropeqk_opencl.h"
#include "contract.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct rq_program {
    cl_device_id device;
    char options[544];
    cl_program program;
    struct rq_program *next;
} rq_program;

/* A pooled scratch buffer (Qr, Kt). Free ones sit on the context's free list; a buffer handed back
 * by a call sits on the busy list with the events of the commands that use it until they have all
 * completed (checked, without blocking, by the next rq_scratch_get). No event callbacks: nothing
 * runs on a driver thread, so nothing can touch a destroyed context. */
typedef struct rq_scratch {
    cl_mem buf;
    size_t size;
    cl_uint nev;
    cl_event ev[3];
    struct rq_scratch *next;
} rq_scratch;

/* Kernel configuration of a context's device (tuning.c decides it; the kernels get it as -D options
 * built from these fields, and the host reads the same fields: one source for both). */
typedef struct {
    int tq, wg, vk;      /* qk_scores: query rows, work-group size, keys per vector (RQ_TQ/WG/VK) */
    int nv;              /* qk_scores: vectors of keys per work-item, 1 or 2 (RQ_NV) */
    int dkb, dwg;        /* qk_decode_*: keys per work-item, work-group size (RQ_DKB/DWG) */
    int decode;          /* whether the decode path is used (RQ_DECODE) */
    int rot_uwg;         /* rope_rotate_*: units per work-group (host only) */
    int atq, avk, awg;   /* qk_attention_*: rows per work-item, keys per block, work-group size */
    int tile, rb, tk;    /* qk_scores_tiled: tile edge (0 = off), register block edge, dims per step */
    int vk_block, vk_tk; /* Vulkan scores.comp: register block T (tile 16T), head dims per stage */
    int vk_rows;         /* Vulkan attention.comp: query rows (invocations) per work-group */
    int pocl_ext;        /* RQ_POCL_EXT: pocl's Clang builtins (and -w), set only for pocl */
    ropeqk_profile profile;     /* CPU or GPU, never AUTO once resolved */
    char profile_source[96];    /* why: "ROPEQK_PROFILE=gpu", "parameter", "auto: CPU device" */
    char config_source[512];    /* where the knobs came from: cache, shipped, heuristic, overrides */
} rq_tuning;

/* What the configuration depends on, read from the device once. */
typedef struct {
    bool cpu;       /* CL_DEVICE_TYPE_CPU */
    bool pocl;      /* platform name is pocl's */
    size_t max_wg;  /* CL_DEVICE_MAX_WORK_GROUP_SIZE, 0 if unknown */
    size_t local_mem; /* CL_DEVICE_LOCAL_MEM_SIZE, 0 if unknown */
    int native_vec; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, 0 if unknown */
    char name[128], platform[128], driver[64];
} rq_devinfo;

/* The tuning cache (tune_cache.c). */
typedef enum {
    RQ_CACHE_NONE, RQ_CACHE_OK, RQ_CACHE_CORRUPT, RQ_CACHE_FOREIGN, RQ_CACHE_STALE, RQ_CACHE_OTHER_PROFILE
} rq_cache_result;
int rq_tune_cache_dir(char *buf, size_t len);
int rq_tune_cache_path(const rq_devinfo *dev, char *buf, size_t len);
/* Applies the device's cached knobs to *t when the file is valid for this device, driver, library
 * and t->profile; note receives the path, or why the file was ignored ("" when there is none). */
rq_cache_result rq_tune_cache_load(const rq_devinfo *dev, ropeqk_profile prof, rq_tuning *t, char *note,
                                   size_t note_len);
/* Writes t's knobs for this device, atomically; path receives the file name. */
ropeqk_status rq_tune_cache_store(const rq_devinfo *dev, const rq_tuning *t, char *path, size_t path_len);

/* The profile's defaults (AUTO counts as CPU here: resolve picks the profile first). */
void rq_tuning_defaults(ropeqk_profile prof, bool pocl, rq_tuning *t);
/* Profile, knobs and vendor switch for a device: ROPEQK_* environment variables (strictly parsed:
 * a malformed one is ROPEQK_ERR_BAD_CONFIG with the thread's error message set), then req (may be
 * NULL), then the profile's defaults. */
ropeqk_status rq_tuning_resolve(const ropeqk_tuning *req, const rq_devinfo *dev, rq_tuning *t);
/* The public form of a resolved configuration (decode and vendor_ext as 1/-1 and 0/-1). */
void rq_tuning_to_api(const rq_tuning *t, ropeqk_tuning *o);
/* The build options of a configuration (snprintf's return convention). */
int rq_tuning_options(const rq_tuning *t, char *buf, size_t len);
const char *rq_profile_name(ropeqk_profile p);
/* An unsigned environment integer: 0 unset, 1 set (*v), -1 malformed (message set). */
int rq_env_u64(const char *name, unsigned long long *v);

/* A case-insensitive substring test of device names (ctx.c; "" matches everything). */
bool rq_name_contains(const char *name, const char *needle);

/* Sets this thread's message for ropeqk_last_error() (printf format). */
void rq_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Attention rotates and consumes the query rows in passes of at most this many bytes of Qr (B*Hq
 * rows of D floats per query row; and at most the allocation limit), so its scratch stays bounded
 * whatever Sq: at 16k tokens (Llama-3-8B shapes) one pass would need 256 MiB of Qr, four passes need
 * 64 MiB each, and Kt (rotated once) serves every pass. 64 MiB is one pass up to S = 4096 at
 * Hq = 32, D = 128, so the bench's prefill shapes run as before. */
#define RQ_ATTN_PASS_BYTES ((size_t)64 << 20)

struct rq_vk_ctx; /* src/vk/vk.h */
struct rq_vk_plan;

struct ropeqk_ctx {
    struct rq_vk_ctx *vk;     /* a Vulkan context (src/vk/) when non-NULL: the OpenCL fields are unused */
    cl_context context;
    cl_command_queue queue;
    cl_device_id device;
    atomic_int last_cl;       /* latest backend failure's cl_int (ropeqk_ctx_backend_error) */
    pthread_mutex_t lock;     /* guards programs and build_log */
    rq_program *programs;     /* cache keyed by (device, options) */
    char *build_log;
    char device_desc[256];    /* "name (platform, driver version)" for messages */
    rq_devinfo dev;           /* what the configuration was chosen from (the tuner reuses it) */
    rq_tuning tune;
    char options[512];
    cl_ulong max_alloc;
    pthread_mutex_t pool_lock; /* guards the scratch pool below */
    bool pool_lock_ok;
    rq_scratch *pool_free;     /* most recently returned first */
    rq_scratch *pool_busy;     /* returned, their commands maybe still running */
    size_t pool_free_bytes;
    size_t pool_budget;        /* most bytes the free list keeps (ROPEQK_POOL_BYTES, default 256 MiB) */
    size_t attn_pass_bytes;    /* most Qr bytes per attention pass (ROPEQK_ATTN_PASS_BYTES, RQ_ATTN_PASS_BYTES) */
};

/* Records a failing cl_int in the context (ropeqk_ctx_backend_error) and the thread's message, and
 * returns ROPEQK_ERR_BACKEND. */
ropeqk_status rq_cl_fail(ropeqk_ctx *ctx, cl_int err);

/* The program for `device` built with the context's options, from the cache or built now. */
/* ops: 0 = the whole program, else RQ_OPS_* bits of the kernels needed (a cached whole program
 * serves too). */
ropeqk_status rq_get_program(ropeqk_ctx *ctx, cl_device_id device, unsigned ops, cl_program *out);
void rq_free_programs(ropeqk_ctx *ctx);
/* Fills ctx->tune, ctx->options and ctx->max_alloc for ctx->device (program.c). */
ropeqk_status rq_tune_for_device(ropeqk_ctx *ctx, const ropeqk_tuning *req);

/* A scratch buffer of at least `bytes` (CL_MEM_READ_WRITE, contents undefined) from the pool or new.
 * On failure returns the status (recorded as last_cl for CL errors) and *out is NULL. */
ropeqk_status rq_scratch_get(ropeqk_ctx *ctx, size_t bytes, rq_scratch **out);
/* Hands `s` back; it is reused once the nev events (retained here; nev may be 0 when nothing was
 * enqueued on it) have completed. NULL s: nothing. */
void rq_scratch_put(ropeqk_ctx *ctx, rq_scratch *s, cl_uint nev, const cl_event *ev);
/* Releases every pooled buffer and event (ropeqk_ctx_destroy). Commands still running keep their
 * buffers alive through OpenCL's own reference counting. */
void rq_scratch_free_all(ropeqk_ctx *ctx);

/* ---- plans (plan.c, enqueue.c) ----------------------------------------------------------- */
struct ropeqk_plan {
    ropeqk_ctx *ctx;
    ropeqk_op op;
    rq_problem pb;             /* validated at creation; Sk = max_keys for decode plans; pb.scaling
                                * is cleared once the frequencies are computed (the caller's arrays
                                * need not outlive creation) */
    ropeqk_tensor q, k, out;   /* the descriptors (k, out: for max_keys keys in decode plans) */
    bool dynamic;              /* decode plan: keys and offsets per enqueue */
    bool arrays;               /* per-token positions allowed at enqueue */
    bool dec;                  /* the one-pass decode kernel (qk_decode_*) instead of rotate K + qk_scores */
    bool tiled;                /* ks is qk_scores_tiled (same arguments as qk_scores, its own launch) */
    bool dec_gpu;              /* with dec: ks is qk_decode_gpu_* (same arguments, its own launch) */
    cl_mem vfreq;              /* inv_freq/pi as three floats per frequency (float4) */
    cl_mem ctab;               /* decode kernel's R(t) table, dec only */
    cl_kernel krq, krk, ks;    /* rotate Q, rotate K (not dec), scores or decode */
    /* attention and paged decode (attn.c, paged.c): their descriptors and objects */
    ropeqk_tensor v, lse;
    bool with_lse;
    ropeqk_paged_desc paged;
    cl_kernel kx[4];           /* released by ropeqk_plan_destroy */
    cl_mem mx[2];
    cl_uint cus;               /* paged decode: the device's compute units (sizes the split) */
    struct rq_vk_plan *vkp;    /* a plan of a Vulkan context: its pipelines and buffers */
    pthread_mutex_t lock;      /* clSetKernelArg + enqueue on the kernels above are one step */
    bool lock_ok;
};

/* Op-specific parts of plan creation, after the shared ones (validated pb, frequencies in
 * pl->vfreq, the program). attn.c: the attention kernels. paged.c: validation of a paged-decode
 * description (into *pb), and its kernels. */
ropeqk_status rq_attn_plan_init(ropeqk_plan *pl, cl_program prog);
ropeqk_status rq_paged_validate(const ropeqk_plan_desc *d, rq_problem *pb);
ropeqk_status rq_paged_plan_init(ropeqk_plan *pl, cl_program prog);
/* The packed metadata of one paged call (contract.h): pstart[n+1], lens[n], q_pos[n], k_pos0[n],
 * pages; shared by the OpenCL and Vulkan paths. */
typedef struct {
    int32_t *v;
    size_t n;                 /* int32 elements */
    int32_t lens_off, qpos_off, kpos_off, pages_off;
    int64_t max_pages;        /* most pages any sequence uses */
} rq_paged_meta;
/* Validates a paged batch and packs it (paged.c; specific statuses, the thread's message set).
 * n_new < 0: a decode (lengths 1..capacity, positions needed); n_new >= 0: an append of n_new tokens
 * (lengths 0..capacity - n_new; a page written by the append may not be written for another
 * sequence). On success m->v is the caller's to free. */
ropeqk_status rq_paged_build_meta(const ropeqk_plan *pl, const ropeqk_paged_batch *b, int64_t n_new,
                                  const char *fn, rq_paged_meta *m);
/* An append's k_new / v_new views against the plan (*c gets their extents), then the batch packed
 * as rq_paged_build_meta does. */
ropeqk_status rq_paged_append_check(const ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                   const ropeqk_paged_batch *batch, const char *fn, rq_problem *c,
                                   rq_paged_meta *meta);
/* ropeqk_opencl_plan_enqueue for attention plans (attn.c), after the shared checks. */
ropeqk_status rq_attn_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *args,
                              int64_t Sk, int64_t q_off, int64_t k_off, cl_uint num_wait, const cl_event *wait,
                              cl_event *event);

/* Shared by the scores and attention enqueues (enqueue.c): the arguments of a rope_rotate_* kernel
 * for S rows of view t in m, rotated into dst with element strides per head, row and dim (times
 * out_mul), heads in blocks of G, rows grouped in panels of `panel` rows d_panel elements apart (0:
 * no panels; see rq_rotate_args); its launch over S rows; a blocking upload of host memory into a new buffer (NULL with
 * *err set on failure). */
cl_int rq_set_rotate(cl_kernel k, const ropeqk_plan *pl, const ropeqk_tensor *t, ropeqk_opencl_mem m,
                     ropeqk_opencl_mem pos, int64_t S, int64_t off, float out_mul, cl_mem dst, int64_t d_bh,
                     int64_t d_row, int64_t d_dim, int32_t panel, int64_t d_panel, int32_t G);
void rq_rotate_grid(const rq_tuning *t, int64_t S, int64_t units, size_t g[2], size_t l[2]);
cl_int rq_enqueue_rotate(cl_command_queue queue, cl_kernel k, const ropeqk_plan *pl, int64_t S, cl_uint num_wait,
                         const cl_event *wait, cl_event *ev);
cl_mem rq_upload(ropeqk_ctx *ctx, cl_mem_flags flags, const void *data, size_t bytes, cl_int *err);
/* The buffers of a host-convenience call (ropeqk_scores, ropeqk_attention): one per host range
 * (data NULL: none, b[i] NULL), made in order; on failure those made are released, every b[i] is
 * NULL and the cl_int is returned. On a CPU device a range of RQ_WRAP_MIN bytes or more that
 * overlaps no other range of the call is wrapped (CL_MEM_USE_HOST_PTR, *wrapped set): pocl runs the
 * kernels on the caller's memory, with no device copy (measured: a 256 MiB malloc'd buffer wrapped,
 * run and read back adds 0 MiB of RSS; the 16k-token demo's copies of Q, K, V, O and LSE were 450 MiB
 * of its 1.45 GiB peak). Other ranges are copied (rq_upload), or only created when `fresh` (a
 * dense output). Results come back with clEnqueueReadBuffer into the same host memory either way:
 * the OpenCL spec defines that for a USE_HOST_PTR buffer read into its own host_ptr once the
 * commands using it have finished (the read waits for them), and pocl then copies nothing. A
 * wrapped output starts as the caller's bytes, so a strided view's gaps come back unchanged. After
 * a failed enqueue the caller waits for the queue when *wrapped: nothing may run on the caller's
 * memory after the call returns. Small ranges are copied: there is nothing to save. */
#define RQ_WRAP_MIN ((size_t)64 << 10)
typedef struct {
    const void *data;
    size_t bytes;
    cl_mem_flags flags;
    bool fresh; /* not wrapped: a new buffer without an upload */
} rq_host_arg;
cl_int rq_host_buffers(ropeqk_ctx *ctx, int n, const rq_host_arg *a, cl_mem *b, bool *wrapped);
/* The end of a host-memory call over rq_host_buffers: after a failure with wrapped caller memory,
 * waits for the queue; then releases the event (may be NULL) and the n buffers (NULL entries skipped). */
void rq_host_buffers_release(ropeqk_ctx *ctx, ropeqk_status st, bool wrapped, cl_event ev, int n, cl_mem *b);

/* After the kernels of a run were enqueued (or failed at err): hands the scratch back to the pool
 * with the events that use it, gives the last kernel's event (ev[2]) to *event on success, releases
 * the rest, and returns the status. */
ropeqk_status rq_run_finish(ropeqk_ctx *ctx, rq_scratch *sq, rq_scratch *sk, cl_event ev[3], cl_int err,
                            cl_event *event);

static inline size_t rq_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* Width of Kt's key panels for qk_scores (RQ_KP): on the CPU profile 16, or a work-item's keys if
 * more (its tile of keys is then one contiguous run instead of D cache lines ldk apart, and rope
 * writes 16 keys with one store), 0 (no panels) on GPUs. */
static inline int rq_kt_panel(const rq_tuning *t)
{
    int kw = t->vk * t->nv; /* keys per work-item: 1..32, each a divisor of 16 or 32 */
    return t->profile != ROPEQK_PROFILE_CPU ? 0 : kw > 16 ? kw : 16;
}

/* Units (rotary pairs or pass-through dims) per rope_rotate work-item (RQ_RUB): 16 on the CPU
 * profile, so that the work-item that loads a source cache line uses all of it (one unit per
 * work-item reloaded each line 16 times, from L2, after the loop over heads), 1 on GPUs. */
static inline int rq_rot_units(const rq_tuning *t)
{
    return t->profile == ROPEQK_PROFILE_CPU ? 16 : 1;
}

/* Row stride (floats) of the transposed K scratch Kt for Sk keys read in blocks of vk: a multiple of
 * vk (aligned vector loads) covering every block, bumped so that its byte size is an odd multiple of
 * 64: a power-of-two stride (Sk = 1024: 4 KiB) maps all d of one work-item to the same L1 set and
 * thrashes it. Shared by qk_scores and qk_attention. */
static inline size_t rq_kt_stride(size_t Sk, size_t vk)
{
    size_t s = rq_round_up(rq_round_up(Sk, vk), 16);
    return (s / 16) % 2 == 0 ? s + 16 : s;
}

/* clSetKernelArg of an lvalue, skipped once `err` (a cl_int in scope) is set. */
#define RQ_SET_ARG(k, i, v)                                                                        \
    do {                                                                                           \
        if (!err)                                                                                  \
            err = clSetKernelArg((k), (i), sizeof(v), &(v));                                       \
    } while (0)
/* A view's byte range inside its buffer (buf NULL: none). */
typedef struct {
    size_t off, len;
    cl_mem buf;
} rq_range;
/* Checks a view against its buffer: aligned offset (ROPEQK_ERR_BAD_STRIDES), extent inside the buffer
 * (ROPEQK_ERR_BUFFER_TOO_SMALL); fills *r. */
ropeqk_status rq_check_mem(ropeqk_ctx *ctx, ropeqk_opencl_mem m, size_t align, size_t extent, rq_range *r);
/* Two ranges of the same buffer that share a byte. */
bool rq_ranges_overlap(const rq_range *a, const rq_range *b);
/* Whether an output range shares a byte with an input range or another output range. */
bool rq_outputs_overlap(const rq_range *const *outs, int n_out, const rq_range *const *ins, int n_in);
/* paged.c: the append's checks on its checked buffer ranges, shared by both backends: the caches overlapping
 * each other or the new rows (ROPEQK_ERR_OVERLAP), rows = n_seqs * Hkv or n_new past int32
 * (ROPEQK_ERR_TOO_LARGE); the message names fn. */
ropeqk_status rq_paged_append_ranges(const char *fn, const rq_range *rk, const rq_range *rv, const rq_range *rkn,
                                     const rq_range *rvn, int64_t rows, int64_t n_new);

/* One enqueue (or one part of a split one): the counts and offsets that vary per call. */
typedef struct {
    int64_t Sq, Sk;         /* query rows and keys of this part */
    int64_t q_off, k_off;   /* position offsets (used where no array is given) */
    ropeqk_opencl_args m;   /* buffers with their byte offsets, shifted for a part */
} rq_run;

/* A plan's per-call counts: keys, offsets (the step's for a decode plan) and the extents of the K,
 * output and V views for that many keys. */
typedef struct {
    int64_t Sk, q_off, k_off;
    size_t k, o, v;
} rq_extents;
/* Checks a call's step against the plan (fn names the call in messages) and fills *x. */
ropeqk_status rq_plan_step(const ropeqk_plan *pl, const ropeqk_step *step, bool pos_arrays, const char *fn,
                           rq_extents *x);

/* Enqueues a checked run of a plan (enqueue.c): scratch, arguments, kernels; splits a run whose
 * scratch exceeds the allocation limit. */
ropeqk_status rq_plan_run(ropeqk_plan *pl, cl_command_queue queue, const rq_run *r, cl_uint num_wait,
                          const cl_event *wait, cl_event *event);

#endif
