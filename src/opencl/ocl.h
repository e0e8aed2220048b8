/* The OpenCL backend's internals (src/opencl/): its context and plan objects behind the core's
 * `impl` pointers, and what its files share. The only part of the library, with src/opencl's .c
 * files, that includes <CL/cl.h>. Not installed. */
#ifndef ROPEQK_OCL_H
#define ROPEQK_OCL_H

#include "../core/call.h"
#include "ropeqk_opencl.h"
#include "contract.h"

extern const rq_backend rq_opencl_backend;
extern const struct rq_run_ops rq_cl_run_ops; /* cl_run.c: the neutral run API's entries */

typedef struct rq_program {
    cl_device_id device;
    char options[640];
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

/* Attention rotates and consumes the query rows in passes of at most this many bytes of Qr (B*Hq
 * rows of D floats per query row; and at most the allocation limit), so its scratch stays bounded
 * whatever Sq: at 16k tokens (Llama-3-8B shapes) one pass would need 256 MiB of Qr, four passes need
 * 64 MiB each, and Kt (rotated once) serves every pass. 64 MiB is one pass up to S = 4096 at
 * Hq = 32, D = 128, so the bench's prefill shapes run as before. */
#define RQ_ATTN_PASS_BYTES ((size_t)64 << 20)


/* ctx->impl of an OpenCL context. */
typedef struct rq_cl_ctx {
    cl_context context;
    cl_command_queue queue;
    cl_device_id device;
    rq_program *programs;      /* cache keyed by (device, options), guarded by the context's lock */
    cl_ulong max_alloc;        /* the device's largest buffer (or ROPEQK_MAX_ALLOC): the library's scratch */
    cl_ulong dev_max_alloc;    /* the device's own largest buffer: ropeqk_buffer_create's bound */
    pthread_mutex_t pool_lock; /* guards the scratch pool and the deferred releases below */
    bool pool_lock_ok;
    rq_scratch *pool_free;     /* most recently returned first */
    rq_scratch *pool_busy;     /* returned, their commands maybe still running */
    size_t pool_free_bytes;
    size_t pool_budget;        /* most bytes the free list keeps (ROPEQK_POOL_BYTES, default 256 MiB) */
    size_t attn_pass_bytes;    /* most Qr bytes per attention pass (ROPEQK_ATTN_PASS_BYTES, RQ_ATTN_PASS_BYTES) */
    struct { cl_event ev; uint64_t ticket; } *pend; /* cl_retire.c: calls maybe still running (events retained) */
    size_t npend;
    uint64_t tickets;          /* cl_retire.c: calls recorded so far */
    struct rq_grave *graves;   /* cl_retire.c: objects released once their commands have completed */
} rq_cl_ctx;

/* pl->impl of a plan on an OpenCL context. */
typedef struct rq_cl_plan {
    bool dec;                  /* the one-pass decode kernel (qk_decode_*) instead of rotate K + qk_scores */
    bool tiled;                /* ks is qk_scores_tiled (same arguments as qk_scores, its own launch) */
    bool dec_gpu;              /* with dec: ks is qk_decode_gpu_* (same arguments, its own launch) */
    bool gattn;                /* attention: kx[0] is qk_attention_gpu_* or _fa2_* (same arguments, their
                                * own launch: ga_bm rows and ga_dv dims of V a work-group of ga_nt) */
    int ga_bm, ga_dv, ga_nt;
    bool dense;                /* attention: few-row calls may run the paged kernels kx[1], kx[2] (cl_dense.c) */
    int acb;                   /* attention with qk_attention_*: V dims per work-item (its column block) */
    cl_mem vfreq;              /* inv_freq/pi as three floats per frequency, then its M-RoPE position
                                * stream (float4: x, y, z, stream; the stream 0 without M-RoPE) */
    cl_mem sinks;              /* attention and paged decode with sinks: the plan's Hq logits */
    cl_mem ctab;               /* decode kernel's R(t) table, dec only */
    cl_kernel krq, krk, ks;    /* rotate Q, rotate K (not dec), scores or decode */
    cl_kernel kx[7];           /* attention and paged decode kernels (paged: rotate Q, pass 1, combine,
                                * append, the 8-bit append, gather, the 8-bit gather) */
    cl_uint cus;               /* paged decode: the device's compute units (sizes the split) */
    cl_uint pwg;               /* paged decode: paged_attn_gpu's work-group size (cl_paged_run.c) */
    bool fast;                 /* paged and dense decode: kfast and ftab made (cl_paged_fast.c) */
    cl_kernel kfast[2];        /* paged_attn_fast4, paged_attn_fast8 */
    cl_mem ftab;               /* their R(delta) table */
    pthread_mutex_t lock;      /* clSetKernelArg + enqueue on the kernels above are one step */
    bool lock_ok;
    struct rq_grave *grave;    /* cl_retire.c: where its objects wait for its calls once destroyed */
} rq_cl_plan;

static inline rq_cl_ctx *rq_cl(const ropeqk_ctx *ctx) { return (rq_cl_ctx *)ctx->impl; }
static inline rq_cl_plan *rq_clp(const ropeqk_plan *pl) { return (rq_cl_plan *)pl->impl; }

/* cl_ctx.c: the table's open (a device the spec names, a context and queue of the library's own)
 * and close (waits for the queue, then releases everything the context holds). */
ropeqk_status rq_cl_open(ropeqk_ctx *ctx, const char *spec, bool explicit_spec, const ropeqk_tuning *tuning);
void rq_cl_close(ropeqk_ctx *ctx);
/* cl_err.c: records a failing cl_int in ctx (may be NULL) and the thread's message; ROPEQK_ERR_BACKEND. */
ropeqk_status rq_cl_fail(ropeqk_ctx *ctx, cl_int err);
/* The context's (ropeqk_opencl_*'s check that the context is OpenCL's, by identity). */
static inline bool rq_is_cl(const ropeqk_ctx *ctx) { return ctx && ctx->be == &rq_opencl_backend; }

/* cl_program.c: the device's properties into ctx->dev, ctx->device_desc and max_alloc, then the core's
 * configuration; the program for the device built with the context's options, from the cache or
 * built now (ops: 0 = the whole program, else RQ_OPS_* bits of the kernels needed; a cached whole
 * program serves too). */
ropeqk_status rq_cl_describe_device(ropeqk_ctx *ctx);

/* cl_devices.c: the backend's entries of the neutral device listing (backend.h's list_devices and
 * ctx_device_info). */
ropeqk_status rq_cl_list_devices(ropeqk_device_info *infos, uint32_t cap, uint32_t *count, const char *spec,
                                 bool explicit_spec, int32_t *pick);
ropeqk_status rq_cl_ctx_device_info(const ropeqk_ctx *ctx, ropeqk_device_info *out);
ropeqk_status rq_get_program(ropeqk_ctx *ctx, cl_device_id device, unsigned ops, cl_program *out);
/* The same with `extra` appended to the options (a program the whole one does not serve: e.g. the
 * GPU profile's attention fallback, -DRQ_ATTN_FALLBACK=1). */
ropeqk_status rq_get_program_ex(ropeqk_ctx *ctx, cl_device_id device, unsigned ops, const char *extra,
                                cl_program *out);
void rq_free_programs(ropeqk_ctx *ctx);

/* cl_knobs.c: the knobs' table (knob.h), the rule the GPU attention kernel's hold together
 * (tuning_check), whether a device is pocl's, and the base's shipped entries and vendor switch
 * (rq_cl_tuning_base calls it last). */
#define RQ_CL_N_KNOBS 24
extern const rq_knob rq_cl_knobs[];
bool rq_cl_tuning_check(const rq_tuning *t, char *why, size_t len);
bool rq_cl_pocl(const rq_devinfo *dev);
void rq_cl_tuning_shipped(const rq_devinfo *dev, rq_tuning *t);
/* cl_tune.c: the OpenCL side of the configuration (the -D options of a configuration, snprintf's
 * convention; the backend table's tuning_base, tuning_fit, build_options) and the tuner's hooks;
 * cl_program.c: warmup. */
int rq_tuning_options(const rq_tuning *t, char *buf, size_t len);
void rq_cl_tuning_fit(const rq_devinfo *dev, rq_tuning *t);
ropeqk_status rq_cl_warmup(ropeqk_ctx *ctx);
void rq_cl_tuning_base(const rq_devinfo *dev, rq_tuning *t);
ropeqk_status rq_cl_build_options(const ropeqk_ctx *ctx, char *buf, size_t len);
bool rq_cl_tune_candidate(rq_family f, bool cpu, int k, rq_tuning *t);
bool rq_cl_tune_fits(const ropeqk_ctx *ctx, rq_family f, const rq_tuning *t, int64_t D);
ropeqk_status rq_cl_tune_clone(const ropeqk_ctx *ctx, const rq_tuning *t, ropeqk_ctx **out);
ropeqk_status rq_cl_time_plan(ropeqk_plan *pl, int runs, double *seconds);
void rq_cl_tune_finish(rq_family f, rq_tuning *best, const rq_tuning *ok, const double *ms, int n);
/* cl_tune_paged.c: the crossover families' check and timed shape (backend.h's tune_measure: both;
 * apart for the tests). */
ropeqk_status rq_cl_tune_measure(ropeqk_ctx *c, rq_family f, double *ms);
ropeqk_status rq_cl_tune_check(ropeqk_ctx *c, rq_family f);
ropeqk_status rq_cl_tune_time(ropeqk_ctx *c, rq_family f, double *ms);

/* cl_pool.c: a scratch buffer of at least `bytes` (CL_MEM_READ_WRITE, contents undefined) from the pool
 * or new. On failure returns the status (recorded as the backend error for CL errors) and *out is
 * NULL. rq_scratch_put hands `s` back; it is reused once the nev events (retained here; nev may be
 * 0 when nothing was enqueued on it) have completed; NULL s: nothing. rq_scratch_free_all releases
 * every pooled buffer and event (context teardown); commands still running keep their buffers
 * alive through OpenCL's own reference counting. */
ropeqk_status rq_scratch_get(ropeqk_ctx *ctx, size_t bytes, rq_scratch **out);
void rq_scratch_put(ropeqk_ctx *ctx, rq_scratch *s, cl_uint nev, const cl_event *ev);
void rq_scratch_free_all(ropeqk_ctx *ctx);

/* cl_retire.c: the library's own objects are released only once the commands that may use them have
 * completed (a command may wait for a caller's user event long after its call returned; NVIDIA's
 * OpenCL crashed there, issue 30). rq_cl_track records a call's last event (the public enqueue entry
 * points). A call's temporary buffer goes into a grave made before anything is enqueued
 * (rq_cl_grave_new: NULL is the call's ROPEQK_ERR_OUT_OF_HOST_MEMORY) and is buried with the call's
 * events (rq_cl_bury_mem: released once they have completed; none: at once); a plan's objects are
 * buried in the grave inside its rq_cl_plan (rq_cl_bury_plan: released, and the plan freed, once
 * every call recorded before has completed). Later calls check without blocking;
 * rq_cl_graves_free_all releases the rest (context teardown, after clFinish). Never waits. */
#define RQ_GRAVE_MAX 13 /* objects: a plan's 7 + 3 + 2 kernels and 4 buffers share 13 slots (cl_plan.c) */
#define RQ_GRAVE_EV 2   /* a temporary's events */
#define RQ_PEND_MAX 256 /* calls recorded at once; more go unrecorded (cl_retire.c) */
typedef struct {
    cl_kernel kernel;
    cl_mem mem;
} rq_cl_obj;
typedef struct rq_grave {
    struct rq_grave *next;
    uint64_t ticket;          /* plans: the last call recorded before; temporaries: 0 */
    cl_uint nobj, nev;
    rq_cl_obj obj[RQ_GRAVE_MAX];
    cl_event ev[RQ_GRAVE_EV];
    void *owner;              /* freed with the grave: the grave itself, or its plan */
} rq_grave;
ropeqk_status rq_cl_retire_init(ropeqk_ctx *ctx);
void rq_cl_track(ropeqk_ctx *ctx, cl_event ev);
rq_grave *rq_cl_grave_new(void);
void rq_cl_bury_mem(ropeqk_ctx *ctx, rq_grave *g, cl_mem m, cl_uint nev, const cl_event *ev);
void rq_cl_bury_plan(ropeqk_ctx *ctx, rq_grave *g);
void rq_cl_graves_free_all(ropeqk_ctx *ctx);

/* cl_paged_run.c: the paged decode's three kernels (Q rotation, pass 1, the reduction of the splits) over
 * sequences described by a metadata buffer (contract.h), shared by the paged decode and the dense
 * decode (cl_dense.c). K and V are addressed as pages: page * knb[0] + head * knb[1] + slot * knb[2];
 * out and lse rows of sequence s at (s % nbat) * onb[0] + (s / nbat) * onb[2] (rq_pcomb_args). The
 * Q rotation (ra, with q and qpos its source and position buffers) writes Qr [s][Hq][D]. Pass 1
 * also waits for meta_wait (commands writing into the metadata). */
#define RQ_CL_PAGED_MAX_META_WAIT 4
typedef struct {
    const char *fn;                  /* the entry point, for messages */
    cl_mem meta;
    int32_t lens_off, qpos_off, kpos_off, pages_off;
    int64_t n, max_pages, page_size, nbat;
    int32_t rg_off;                  /* the CPU shape's row groups in meta (rq_cl_paged_cpu_groups) */
    int64_t ngroups, group_rows;
    rq_rotate_args ra;
    ropeqk_opencl_mem q, k, v, out, lse;
    ropeqk_opencl_mem ks, vs;        /* 8-bit caches' scales ({NULL, 0} otherwise) */
    cl_mem qpos;
    int64_t knb[3], vnb[3], onb[4], lnb[3];
    cl_uint meta_nwait;
    const cl_event *meta_wait;
    int fast;                        /* pass 1 in paged_attn_fast<fast> (4 or 8; cl_paged_fast.c), its row
                                      * groups at rg_off; 0: paged_attn_gpu or paged_attn_cpu */
} rq_cl_paged_launch;
/* The CPU shape (rq_cl_paged_cpu_shape) serves a sequence's consecutive rows in one task: their row
 * groups appended to m (rq_paged_meta_groups, as many rows as RQ_PCH query heads hold); nothing for
 * the GPU shape. *fast nonzero (a call rq_cl_pfast_call_ok takes): paged_attn_fast's groups instead,
 * *fast then the kernel (4 or 8). */
ropeqk_status rq_cl_paged_cpu_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fast);
ropeqk_status rq_cl_paged_run(ropeqk_plan *pl, cl_command_queue queue, const rq_cl_paged_launch *L, cl_kernel krot,
                              cl_kernel kp1, cl_kernel kcomb, cl_uint num_wait, const cl_event *wait, cl_event *event);
/* Pass 1 in the CPU shape (paged_attn_cpu) for this plan, else paged_attn_gpu; the GPU shape's
 * work-group size into cp->pwg (ROPEQK_ERR_TOO_LARGE where the device cannot run it); a metadata
 * array as a device buffer (copied: the host array may go at once). */
bool rq_cl_paged_cpu_shape(const ropeqk_plan *pl);
ropeqk_status rq_cl_paged_gpu_fit(ropeqk_ctx *ctx, const rq_problem *pb, rq_cl_plan *cp);
cl_mem rq_cl_paged_meta_upload(ropeqk_ctx *ctx, const rq_paged_meta *meta, cl_int *err);

/* cl_paged_fast.c: the GPU profile's fast pass 1 (cl/paged_fast.cl). rq_cl_pfast_shape_ok: whether the
 * plan's shape fits it; rq_cl_pfast_plan_init: its kernels and R(delta) table where it does and the device
 * runs them (cp->fast; freq4: the plan's frequencies as the kernels get them); rq_cl_pfast_call_ok:
 * whether a call's cache views do (16-byte offsets and strides, extents within 2^32 16-byte units); rq_cl_pfast_rows: rows per group
 * for a call whose sequences have at most most_rows rows, and the kernel (*fm 4 or 8); rq_cl_pfast_groups:
 * a metadata's row groups for it (rq_paged_meta_groups; *fm set); rq_cl_pfast_geometry: its arguments'
 * head chunks, V chunks and table range, the split and the launch. */
bool rq_cl_pfast_shape_ok(const ropeqk_plan *pl);
ropeqk_status rq_cl_pfast_plan_init(ropeqk_plan *pl, cl_program prog, const float *freq4);
bool rq_cl_pfast_call_ok(const ropeqk_plan *pl, size_t k_off, const int64_t knb[3], size_t v_off, const int64_t vnb[3],
                      size_t k_extent, size_t v_extent);
int64_t rq_cl_pfast_rows(const ropeqk_plan *pl, int64_t most_rows, int *fm);
ropeqk_status rq_cl_pfast_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fm);
void rq_cl_pfast_geometry(const ropeqk_plan *pl, int fm, int64_t ngroups, int64_t cus, int64_t max_pages,
                       int64_t page_size, rq_paged_args *a, int64_t *nsplit, int64_t *kps, size_t g[3], size_t l[3]);

/* cl_dense.c: few-row dense attention through the paged decode's kernels, reading and rotating K as it
 * goes (no K pre-pass). rq_cl_dense_plan_wants: whether a plan may take it (op, M-RoPE, query rows
 * against the context's dense_rows: ROPEQK_DENSE_DECODE, its default and measurement in
 * src/core/tuning.c), decided before its program is built (the program then holds the
 * paged kernels too); rq_cl_dense_plan_init: its kernels (cp->dense false where the device cannot run
 * them); rq_cl_dense_enqueue: runs a call that way and sets *taken, or leaves *taken false (and
 * enqueues nothing) where the call needs the old path (per-token key positions, views whose pages
 * cannot be numbered, sizes). */
bool rq_cl_dense_plan_wants(const ropeqk_plan *pl);
ropeqk_status rq_cl_dense_plan_init(ropeqk_plan *pl, cl_program prog);
ropeqk_status rq_cl_dense_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *m, int64_t Sk,
                               int64_t q_off, int64_t k_off, cl_uint num_wait, const cl_event *wait, cl_event *event,
                               bool *taken);

/* cl_plan.c, cl_attn.c, cl_paged.c: the op-specific parts of plan creation (the program, scratch-free). */
ropeqk_status rq_cl_plan_init(ropeqk_plan *pl, const float *freq4, const double *inv);
void rq_cl_plan_free(ropeqk_plan *pl);
ropeqk_status rq_attn_plan_init(ropeqk_plan *pl, cl_program prog);
ropeqk_status rq_cl_paged_plan_init(ropeqk_plan *pl, cl_program prog);

/* cl_launch.c: the buffers of one run as the call checks see them: CL_MEM_SIZE is each buffer's end (a failing
 * query is the status). */
ropeqk_status rq_cl_mem(ropeqk_ctx *ctx, ropeqk_opencl_mem m, rq_mem *r);

/* cl_launch.c, shared by the scores, attention and paged enqueues: the arguments of a rope_rotate_* kernel
 * for S rows of view t in m, rotated into dst with element strides per head, row and dim (times
 * out_mul), heads in blocks of G, rows grouped in panels of `panel` rows d_panel elements apart (0:
 * no panels; see rq_rotate_args); its launch over S rows. pos_stride: the position array's entries
 * per stream (M-RoPE's [3][pos_stride]: the whole call's rows, not this part's). */
cl_int rq_set_rotate(cl_kernel k, const ropeqk_plan *pl, const ropeqk_tensor *t, ropeqk_opencl_mem m,
                     ropeqk_opencl_mem pos, int64_t S, int64_t pos_stride, int64_t off, float out_mul, cl_mem dst,
                     int64_t d_bh, int64_t d_row, int64_t d_dim, int32_t panel, int64_t d_panel, int32_t G);
void rq_rotate_grid(const rq_tuning *t, int64_t S, int64_t units, int64_t BH, size_t g[3], size_t l[3]);
cl_int rq_enqueue_rotate(cl_command_queue queue, cl_kernel k, const ropeqk_plan *pl, const ropeqk_tensor *t,
                         int64_t S, cl_uint num_wait, const cl_event *wait, cl_event *ev);

/* One enqueue (or one part of a split one): the counts and offsets that vary per call. */
typedef struct {
    int64_t Sq, Sk;         /* query rows and keys of this part */
    int64_t q_off, k_off;   /* position offsets (used where no array is given; the masks' under M-RoPE) */
    int64_t q_stride, k_stride; /* entries per stream of the position arrays (M-RoPE's [3][S]: the whole
                                 * call's Sq and Sk, which a part's halves keep) */
    ropeqk_opencl_args m;   /* buffers with their byte offsets, shifted for a part */
} rq_run;
/* Enqueues a checked run of a scores plan (cl_enqueue.c): scratch, arguments, kernels; splits a run
 * whose scratch exceeds the allocation limit. */
ropeqk_status rq_plan_run(ropeqk_plan *pl, cl_command_queue queue, const rq_run *r, cl_uint num_wait,
                          const cl_event *wait, cl_event *event);
/* A checked run of an attention plan (cl_attn.c). */
ropeqk_status rq_attn_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *args,
                              int64_t Sq, int64_t Sk, int64_t q_off, int64_t k_off, cl_uint num_wait,
                              const cl_event *wait, cl_event *event);
/* cl_paged_chunk.c: a ragged batch's long chunks of query rows, marked by the core's rq_paged_chunk_mark
 * (src/core/call.h): rq_cl_paged_chunks_enqueue gathers each one's K/V and runs its rows through
 * plan->chunk's attention kernel, after `after` (the combine); *last: the chain's last event
 * (retained). */
ropeqk_status rq_cl_paged_chunks_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_paged_args *args,
                                         const ropeqk_paged_batch *b, const rq_paged_meta *meta, cl_mem mbuf,
                                         cl_event after, cl_event *last);
/* The host-memory path (cl_host.c; backend.h's host_run). */
ropeqk_status rq_cl_host_run(ropeqk_plan *pl, const rq_host_io *io);

/* Work-items of a GPU attention work-group (cl/attention_gpu.cl, cl/attention_fa2.cl): rows / rows
 * per work-item times keys / 4. */
static inline size_t rq_gattn_items(const rq_tuning *t)
{
    return (size_t)(t->attn_tile / t->attn_rb) * (size_t)(t->attn_keys / 4);
}
/* Whether the GPU attention shape runs the register-blocked kernel (qk_attention_fa2_*,
 * cl/attention_fa2.cl: 4 or 8 rows per work-item, its work-items a whole number of V tile rows:
 * (rows / rb) a multiple of dv / keys) rather than qk_attention_gpu_* (1 or 2 rows: at 4 that
 * kernel took 165 registers on sm_90, tests/gpucc), and its local memory in bytes. */
static inline bool rq_ga_fa2(const rq_tuning *t)
{
    return t->attn_rb % 4 == 0 && (t->attn_tile / t->attn_rb) % (t->attn_dv / t->attn_keys) == 0;
}
static inline size_t rq_ga_local_bytes(const rq_tuning *t)
{
    size_t bm = (size_t)t->attn_tile, bn = (size_t)t->attn_keys, tk = (size_t)t->attn_tk, dv = (size_t)t->attn_dv;
    return rq_ga_fa2(t) ? RQ_FA_LOCAL_BYTES(bm, bn, tk, dv) : RQ_GA_LOCAL_BYTES(bm, bn, tk, dv);
}

/* cl_launch.c: whether a compiled kernel runs nt work-items with `local` bytes of local memory on the
 * context's device (its CL_KERNEL_WORK_GROUP_SIZE, 48 KiB, the device's local memory). */
bool rq_kernel_fits(const ropeqk_ctx *ctx, cl_kernel k, size_t nt, size_t local);

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

/* After the kernels of a run were enqueued (or failed at err): hands the scratch back to the pool
 * with the events that use it, gives the last kernel's event (ev[2]) to *event on success, releases
 * the rest, and returns the status. */
ropeqk_status rq_run_finish(ropeqk_ctx *ctx, rq_scratch *sq, rq_scratch *sk, cl_event ev[3], cl_int err,
                            cl_event *event);

#endif
