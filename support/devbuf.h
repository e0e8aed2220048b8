/* Device buffers and plan runs on either backend, through libropeqk's public API only: for tests,
 * examples and tools that want "upload, run this plan, wait, read back" without caring whether the
 * context is OpenCL or Vulkan.
 *
 * A buffer (rqs_devbuf) may have NaN canaries: RQS_CANARY_BYTES of the quiet-NaN word
 * RQS_CANARY_WORD before and after the payload, so a stray read that reaches a result shows as NaN
 * and a stray write shows as a changed canary (rqs_devbuf_check). OpenCL: a cl_mem on the context's
 * cl_context; Vulkan: a host-visible, host-coherent VkBuffer (storage, transfer src/dst), mapped, or
 * with RQS_DEVBUF_DEVICE_LOCAL one in device-local memory, filled and read through a staging buffer.
 *
 * Runs (rqs_plan_run, rqs_paged_run, rqs_paged_append_run, rqs_scores_oneshot) dispatch to
 * ropeqk_opencl_plan_enqueue / _paged_enqueue / _paged_append / ropeqk_opencl_enqueue and wait for the
 * returned event, or record with ropeqk_vulkan_plan_record / _paged_record / _paged_append into a
 * command buffer of their own, add the caller's barrier (shader writes -> host reads), submit and
 * wait with a fence. A refused call still submits its command buffer (OpenCL: finishes the queue),
 * so anything the library recorded before refusing would run and show in the output.
 *
 * Vulkan queues need external synchronisation: every submission made here holds one process-wide
 * lock, and so does rqs_plan_create (plan creation submits its table uploads). Threads may run
 * these calls at once; they must not at the same time call the library's own submitting calls on the
 * same VkQueue (ropeqk_scores, ropeqk_attention, ropeqk_plan_create, ropeqk_tune, ...).
 *
 * Every call returns a status (the library's, ROPEQK_ERR_BACKEND for a failed backend call with
 * rqs_devbuf_error() naming it, or RQS_ERR_STRAY_EVENT); nothing aborts, and a failed call leaves
 * nothing allocated. */
#ifndef RQS_DEVBUF_H
#define RQS_DEVBUF_H

#include "ropeqk.h"
#if RQS_HAVE_OPENCL
#include "ropeqk_opencl.h"
#endif
#if RQS_HAVE_VULKAN
#include "ropeqk_vulkan.h"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RQS_BACKEND_NONE = 0, RQS_BACKEND_OPENCL = 1, RQS_BACKEND_VULKAN = 2 } rqs_backend;

/* The backend of a context (ropeqk_ctx_backend_error's name): NONE for NULL or one this build of the
 * support library was not compiled for. */
rqs_backend rqs_ctx_backend(const ropeqk_ctx *ctx);
const char *rqs_backend_name(rqs_backend b); /* "OpenCL", "Vulkan", "none" */

/* A refused OpenCL call handed back an event (the library's contract is: nothing enqueued, no
 * event). Outside the library's status range. */
#define RQS_ERR_STRAY_EVENT ((ropeqk_status)1)

/* The calling thread's message for the last failure of this module ("" if none). */
const char *rqs_devbuf_error(void);

#define RQS_CANARY_BYTES 256
#define RQS_CANARY_WORD 0x7FC0DEADu /* a quiet NaN as f32 (a score or output read from it is NaN) */

typedef struct rqs_devbuf rqs_devbuf;

/* A buffer of `bytes` payload bytes (>= 1) on ctx's device, with canaries before and after when
 * `canaries` is set. The payload starts as a copy of init, or (init NULL) holds the canary word. */
ropeqk_status rqs_devbuf_create(ropeqk_ctx *ctx, size_t bytes, const void *init, bool canaries, rqs_devbuf **out);
/* rqs_devbuf_create with flags: */
enum {
    RQS_DEVBUF_CANARIES = 1u << 0, /* canaries before and after the payload (rqs_devbuf_create's bool) */
    /* Vulkan: device-local memory (the first memory type with DEVICE_LOCAL that the buffer allows, else
     * the first it allows), never mapped: creation from init, writes, fills, reads and checks copy
     * through a host-visible staging buffer of their size (vkCmdCopyBuffer; creation without init:
     * vkCmdFillBuffer), one submission under the lock, waited for. The placement a GPU's kernels read at full speed; on lavapipe every type is host memory.
     * OpenCL: no difference (clCreateBuffer's placement is the driver's). */
    RQS_DEVBUF_DEVICE_LOCAL = 1u << 1,
};
ropeqk_status rqs_devbuf_create_ex(ropeqk_ctx *ctx, size_t bytes, const void *init, unsigned flags,
                                   rqs_devbuf **out);
void rqs_devbuf_free(rqs_devbuf *b); /* NULL-safe; no run may be using it */
size_t rqs_devbuf_bytes(const rqs_devbuf *b);
/* Writes n bytes at byte `offset` of the payload (blocking). */
ropeqk_status rqs_devbuf_write(rqs_devbuf *b, size_t offset, const void *src, size_t n);
/* Sets every payload byte to `byte`. */
ropeqk_status rqs_devbuf_fill(rqs_devbuf *b, unsigned char byte);
/* Copies the whole payload to dst (blocking). */
ropeqk_status rqs_devbuf_read(const rqs_devbuf *b, void *dst);
/* Copies n payload bytes from byte `offset` to dst (blocking). */
ropeqk_status rqs_devbuf_read_part(const rqs_devbuf *b, size_t offset, size_t n, void *dst);
/* *intact: the canaries still hold RQS_CANARY_WORD (true for a buffer without canaries) and, when
 * expect is non-NULL, the payload equals expect byte for byte. */
ropeqk_status rqs_devbuf_check(const rqs_devbuf *b, const void *expect, bool *intact);

/* A range of a buffer for a run: `offset` bytes past the payload's start; `range` bytes from there
 * (0: to the payload's end rounded up to whole 4-byte words). Only Vulkan sees the range (OpenCL
 * checks views against the cl_mem's size, canaries included): refusal tests of "too small" use
 * buffers without canaries. buf NULL: no buffer (positions: use the offsets). */
typedef struct {
    const rqs_devbuf *buf;
    size_t offset;
    size_t range;
} rqs_view;

static inline rqs_view rqs_whole(const rqs_devbuf *b)
{
    rqs_view v = {b, 0, 0};
    return v;
}

/* Where runs are submitted: OpenCL, a command queue of its own on the context's device; Vulkan, a
 * command pool and fence of its own on the context's queue. One thread at a time per stream.
 * NULL in the run calls: the context's queue (OpenCL), a one-time pool and fence (Vulkan). */
typedef struct rqs_stream rqs_stream;
ropeqk_status rqs_stream_create(ropeqk_ctx *ctx, rqs_stream **out);
void rqs_stream_destroy(rqs_stream *s); /* NULL-safe; finishes its work first */

/* ropeqk_plan_create, holding the Vulkan submission lock (see above) on a Vulkan context. */
ropeqk_status rqs_plan_create(ropeqk_ctx *ctx, const ropeqk_plan_desc *desc, ropeqk_plan **out);

/* A scores or attention plan: ropeqk_opencl_args / ropeqk_vulkan_args (v and lse for attention). */
typedef struct {
    rqs_view q, k, q_pos, k_pos, out, v, lse;
} rqs_args;
ropeqk_status rqs_plan_run(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_plan *plan, const rqs_args *a,
                           const ropeqk_step *step);

/* A fixed scores plan made, run once and destroyed: OpenCL's one-shot ropeqk_opencl_enqueue; on
 * Vulkan the plan is made under the submission lock. Positions present in `a` make it a
 * ROPEQK_POS_ARRAYS plan. */
ropeqk_status rqs_scores_oneshot(ropeqk_ctx *ctx, rqs_stream *s, const ropeqk_params *p, const ropeqk_tensor *q,
                                 const ropeqk_tensor *k, const ropeqk_tensor *out, const rqs_args *a);

/* Paged decode (ROPEQK_OP_PAGED_DECODE plans) and the append of new K/V rows into the caches. */
typedef struct {
    rqs_view q, k_cache, v_cache, out, lse;
    rqs_view k_scale, v_scale; /* 8-bit caches only */
} rqs_paged_args;
/* The caches an append writes (ropeqk_opencl_paged_cache / ropeqk_vulkan_paged_cache). */
typedef struct {
    rqs_view k_cache, v_cache, k_scale, v_scale;
} rqs_paged_cache;
ropeqk_status rqs_paged_run(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_plan *plan, const rqs_paged_args *a,
                            const ropeqk_paged_batch *batch);
ropeqk_status rqs_paged_append_run(ropeqk_ctx *ctx, rqs_stream *s, ropeqk_plan *plan, const ropeqk_tensor *k_new,
                                   rqs_view k_new_mem, const ropeqk_tensor *v_new, rqs_view v_new_mem,
                                   const rqs_paged_cache *cache, const ropeqk_paged_batch *batch);

/* n buffer-to-buffer copies on the device (bytes from src_offset of src's payload to dst_offset of
 * dst's), in one submission, waited for: OpenCL clEnqueueCopyBuffer each, then clFinish; Vulkan one
 * command buffer of vkCmdCopyBuffer between barriers (earlier writes -> the copies; the copies ->
 * later shader, transfer and host access). A bandwidth yardstick for the runs above. Refused before
 * anything is enqueued: a range past a payload, 0 bytes, overlap within one buffer. */
typedef struct {
    rqs_devbuf *dst;
    size_t dst_offset;
    const rqs_devbuf *src;
    size_t src_offset;
    size_t bytes;
} rqs_copy;
ropeqk_status rqs_copy_run(ropeqk_ctx *ctx, rqs_stream *s, const rqs_copy *c, size_t n);

/* A second context on the same backend objects as ctx (OpenCL: its cl_context and queue; Vulkan:
 * its instance, device and queue), borrowed: destroying it leaves them to ctx. tuning may be NULL. */
ropeqk_status rqs_ctx_borrow(const ropeqk_ctx *ctx, const ropeqk_tuning *tuning, ropeqk_ctx **out);

/* The backend buffer range of a view, for tests of a backend's own entry points. */
#if RQS_HAVE_OPENCL
ropeqk_opencl_mem rqs_view_opencl(rqs_view v);
#endif
#if RQS_HAVE_VULKAN
ropeqk_vulkan_mem rqs_view_vulkan(rqs_view v);
#endif

/* Khronos validation-layer messages seen by every Vulkan context of the process so far
 * (ropeqk_vulkan_validation_messages(NULL, ...)); 0 without Vulkan. */
uint32_t rqs_validation_messages(char *first, size_t len);

/* True when ROPEQK_VULKAN_VALIDATION=auto asks for the Khronos validation layer only if present and
 * it is not installed (a Vulkan context is then made without it); why receives the reason. The
 * suites that run under validation skip then, saying so (tests/harness.c). */
bool rqs_validation_unavailable(char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RQS_DEVBUF_H */
