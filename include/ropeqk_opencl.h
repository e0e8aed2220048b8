/*
 * ropeqk on OpenCL, interop only: contexts on the caller's OpenCL objects, the caller's cl_mem and
 * cl_event as ropeqk_buffer and ropeqk_event (and their handles out), and plans enqueued on the
 * caller's queue with cl_event wait lists. Everything backend-neutral is in ropeqk.h (included
 * here), running plans on device memory included (ropeqk_plan_run and the calls around it).
 *
 * Buffers are (cl_mem, byte offset) pairs. Q, K: f32, f16 or bf16; out: f32; positions: int32.
 * Enqueues are asynchronous: they return once the kernels are enqueued on `queue` (NULL = the
 * context's), after the `num_wait` events in `wait`; *event (if non-NULL) receives an event that
 * completes when the output is written, which the caller releases. A call never waits for the
 * events of `wait` (a user event may complete long after the call returns), and the library keeps
 * its own kernels and buffers (a plan's, a call's metadata) until the commands that use them have
 * completed, also past ropeqk_plan_destroy() and the one-shot calls: it does not rely on the driver
 * keeping released objects alive for pending commands (NVIDIA's OpenCL crashed there). They are
 * released by later calls on the context once complete, or by ropeqk_ctx_destroy(), which finishes
 * the context's queue first, so every user event in a wait list must have been completed (or set to
 * an error) before it. Buffer offsets need only their element's alignment: the library makes no
 * sub-buffers (CL_DEVICE_MEM_BASE_ADDR_ALIGN does not apply).
 */
#ifndef ROPEQK_OPENCL_H
#define ROPEQK_OPENCL_H

#include "ropeqk.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Borrowed objects (both required): the library retains them and never destroys them. */
typedef struct {
    cl_context context;
    cl_command_queue queue; /* on a device of `context`: the context's device is the queue's */
    ropeqk_tuning tuning;   /* zeroed = the profile's defaults */
} ropeqk_opencl_ctx_params;

ROPEQK_API ropeqk_status ropeqk_opencl_ctx_create(const ropeqk_opencl_ctx_params *params, ropeqk_ctx **out);

/* Resolves a device spec as ropeqk_ctx_create() would ("P:D", a name substring, NULL/"" =
 * $ROPEQK_DEVICE, else the first device). `why` (optional) receives a short reason. */
ROPEQK_API ropeqk_status ropeqk_opencl_select_device(const char *spec, cl_platform_id *platform,
                                                     cl_device_id *device, char *why, size_t why_len);

/* The context's OpenCL objects (NULL for a NULL context). */
ROPEQK_API cl_context ropeqk_opencl_context(const ropeqk_ctx *ctx);
ROPEQK_API cl_command_queue ropeqk_opencl_queue(const ropeqk_ctx *ctx);
ROPEQK_API cl_device_id ropeqk_opencl_device(const ropeqk_ctx *ctx);

/* The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or NULL for an unknown code. */
ROPEQK_API const char *ropeqk_opencl_error_name(int32_t code);

/* The OpenCL C program the library builds (the same text for every device; the build options make
 * the variants). Static storage. For bug reports: `ropeqk devices --dump-program DIR`. */
ROPEQK_API const char *ropeqk_opencl_program_source(size_t *len);

typedef struct {
    cl_mem buf;    /* NULL allowed only for positions (meaning: use the offsets) */
    size_t offset; /* byte offset into buf */
} ropeqk_opencl_mem;

typedef struct {
    ropeqk_opencl_mem q, k;
    ropeqk_opencl_mem q_pos, k_pos; /* int32, Sq resp. Sk entries; {NULL, 0}: offsets */
    ropeqk_opencl_mem out;
    ropeqk_opencl_mem v, lse;       /* ROPEQK_OP_ATTENTION: V, and LSE when the plan has with_lse */
} ropeqk_opencl_args;

/*
 * Enqueues a plan. `step` is NULL for fixed plans, required for decode plans. Checked before
 * anything is enqueued: buffers present, aligned, large enough for their views, the output
 * overlapping no input, positions only where the plan allows arrays. A request whose scratch
 * exceeds the device's allocation limit is split into parts along the keys or query rows (joined
 * by a marker event); a failure in a later part leaves earlier parts enqueued.
 * ROPEQK_ERR_TOO_LARGE when even one key and one query row do not fit.
 */
ROPEQK_API ropeqk_status ropeqk_opencl_plan_enqueue(ropeqk_plan *plan, cl_command_queue queue,
                                                    const ropeqk_opencl_args *args, const ropeqk_step *step,
                                                    cl_uint num_wait, const cl_event *wait, cl_event *event);

/* One-shot convenience: a fixed plan created, enqueued once and destroyed. A loop should keep a
 * plan instead (the bench's --host-cost shows the difference). */
ROPEQK_API ropeqk_status ropeqk_opencl_enqueue(ropeqk_ctx *ctx, cl_command_queue queue, const ropeqk_params *p,
                                               const ropeqk_tensor *q, ropeqk_opencl_mem q_mem,
                                               const ropeqk_tensor *k, ropeqk_opencl_mem k_mem,
                                               ropeqk_opencl_mem q_pos, ropeqk_opencl_mem k_pos,
                                               const ropeqk_tensor *out, ropeqk_opencl_mem out_mem,
                                               cl_uint num_wait, const cl_event *wait, cl_event *event);

/* ---- paged KV cache (ROPEQK_OP_PAGED_DECODE plans) ------------------------------------------- */
/* ropeqk_paged_batch (the host arrays of a call) is declared in ropeqk.h. */
typedef struct {
    ropeqk_opencl_mem q, k_cache, v_cache, out, lse; /* lse only with with_lse */
    /* the f32 scales of 8-bit caches, [num_pages, Hkv, page_size] contiguous (ropeqk.h, docs/
     * conventions.md section 12): required exactly when that cache is 8-bit, {NULL, 0} otherwise */
    ropeqk_opencl_mem k_scale, v_scale;
} ropeqk_opencl_paged_args;

/* The caches an append writes: K and V, and their scales (8-bit caches only, as above). */
typedef struct {
    ropeqk_opencl_mem k_cache, v_cache, k_scale, v_scale;
} ropeqk_opencl_paged_cache;

/* Decode over the paged cache: split over pages (flash-decoding) with a reduction pass. */
ROPEQK_API ropeqk_status ropeqk_opencl_paged_enqueue(ropeqk_plan *plan, cl_command_queue queue,
                                                     const ropeqk_opencl_paged_args *args,
                                                     const ropeqk_paged_batch *batch, cl_uint num_wait,
                                                     const cl_event *wait, cl_event *event);

/* Appends n_new unrotated K/V rows per sequence (k_new [n_seqs, Hkv, n_new, D], v_new
 * [n_seqs, Hkv, n_new, Dv]: the caches' dtypes, or for an 8-bit cache any of f32/f16/bf16, which the
 * append quantizes, writing q and the row's scale) at token indices seq_lens[s] .. seq_lens[s]+n_new-1
 * of each sequence's pages (batch->seq_lens are the lengths before the append; q_pos and k_pos0 are
 * not used). Pages must already be in the page table. */
ROPEQK_API ropeqk_status ropeqk_opencl_paged_append(ropeqk_plan *plan, cl_command_queue queue,
                                                    const ropeqk_tensor *k_new, ropeqk_opencl_mem k_new_mem,
                                                    const ropeqk_tensor *v_new, ropeqk_opencl_mem v_new_mem,
                                                    const ropeqk_opencl_paged_cache *cache,
                                                    const ropeqk_paged_batch *batch, cl_uint num_wait,
                                                    const cl_event *wait, cl_event *event);

/* ---- the neutral run API's objects (ropeqk.h) on OpenCL objects ------------------------------ */
/* The caller's buffer as a ropeqk_buffer (retained; released by ropeqk_buffer_destroy): its size is
 * CL_MEM_SIZE. ROPEQK_ERR_BAD_PARAM for a buffer of another cl_context or a non-OpenCL ctx. */
ROPEQK_API ropeqk_status ropeqk_opencl_buffer_wrap(ropeqk_ctx *ctx, cl_mem mem, ropeqk_buffer **out);
/* The buffer's cl_mem (not retained; NULL for NULL or a buffer of another backend). */
ROPEQK_API cl_mem ropeqk_opencl_buffer_mem(const ropeqk_buffer *buf);
/* The caller's event (a command's or a user event of the context's cl_context) as a wait condition
 * for the neutral calls: retained, released by ropeqk_event_release. */
ROPEQK_API ropeqk_status ropeqk_opencl_event_wrap(ropeqk_ctx *ctx, cl_event event, ropeqk_event **out);
/* The event's cl_event (not retained; NULL for NULL or an event of another backend). */
ROPEQK_API cl_event ropeqk_opencl_event_handle(const ropeqk_event *ev);

#ifdef __cplusplus
}
#endif
#endif /* ROPEQK_OPENCL_H */
