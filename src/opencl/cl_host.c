/* The host-memory path on OpenCL (ropeqk_scores, ropeqk_attention after the core made the plan): one
 * device buffer per host range, the plan enqueued on the context's queue, blocking reads back.
 *
 * On a CPU device a range of RQ_WRAP_MIN bytes or more that overlaps no other range of the call is
 * wrapped (CL_MEM_USE_HOST_PTR): pocl runs the kernels on the caller's memory, with no device copy
 * (measured: a 256 MiB malloc'd buffer wrapped, run and read back adds 0 MiB of RSS; the 16k-token
 * demo's copies of Q, K, V, O and LSE were 450 MiB of its 1.45 GiB peak). Other ranges are copied,
 * or only created when nothing needs uploading (a dense output). Results come back with
 * clEnqueueReadBuffer into the same host memory either way: the OpenCL spec defines that for a
 * USE_HOST_PTR buffer read into its own host_ptr once the commands using it have finished (the read
 * waits for them), and pocl then copies nothing. A wrapped output starts as the caller's bytes, so a
 * strided view's gaps come back unchanged. After a failed enqueue the queue is waited for when
 * anything was wrapped: nothing may run on the caller's memory after the call returns. Small ranges
 * are copied: there is nothing to save. */
#include "ocl.h"

#include <string.h>

#define RQ_WRAP_MIN ((size_t)64 << 10)

static bool host_overlap(const rq_host_io *x, const rq_host_io *y)
{
    uintptr_t a = (uintptr_t)(x->in ? x->in : x->out), b = (uintptr_t)(y->in ? y->in : y->out);
    return a < b + y->bytes && b < a + x->bytes;
}

/* A device copy of host memory; NULL with *err set on failure (blocking: on any early return no
 * command may still read the caller's memory). */
static cl_mem upload(ropeqk_ctx *ctx, cl_mem_flags flags, const void *data, size_t bytes, cl_int *err)
{
    cl_mem m = clCreateBuffer(rq_cl(ctx)->context, flags, bytes, NULL, err);
    if (*err)
        return NULL;
    *err = clEnqueueWriteBuffer(rq_cl(ctx)->queue, m, CL_TRUE, 0, bytes, data, 0, NULL, NULL);
    if (*err) {
        clReleaseMemObject(m);
        return NULL;
    }
    return m;
}

/* One buffer per present range, in order; on failure those made are released and the cl_int is
 * returned. */
static cl_int host_buffers(ropeqk_ctx *ctx, const rq_host_io *io, cl_mem *b, bool *wrapped)
{
    cl_int err = CL_SUCCESS;
    *wrapped = false;
    for (int i = 0; i < RQ_IO_COUNT; i++)
        b[i] = NULL;
    for (int i = 0; i < RQ_IO_COUNT && !err; i++) {
        if (!io[i].bytes)
            continue;
        void *data = io[i].in ? (void *)io[i].in : io[i].out;
        cl_mem_flags flags = io[i].out ? CL_MEM_READ_WRITE : CL_MEM_READ_ONLY;
        /* OpenCL leaves commands on buffers over overlapping host memory undefined (q = k in place,
         * say): such a range is copied */
        bool wrap = ctx->dev.cpu && io[i].bytes >= RQ_WRAP_MIN;
        for (int j = 0; j < RQ_IO_COUNT && wrap; j++)
            wrap = j == i || !io[j].bytes || !host_overlap(&io[i], &io[j]);
        if (wrap) /* the kernels only read a READ_ONLY buffer: const memory is never written */
            b[i] = clCreateBuffer(rq_cl(ctx)->context, flags | CL_MEM_USE_HOST_PTR, io[i].bytes, data, &err);
        else if (!io[i].in)
            b[i] = clCreateBuffer(rq_cl(ctx)->context, flags, io[i].bytes, NULL, &err);
        else
            b[i] = upload(ctx, flags, io[i].in, io[i].bytes, &err);
        *wrapped = *wrapped || (wrap && !err);
    }
    if (err)
        for (int i = 0; i < RQ_IO_COUNT; i++) {
            if (b[i])
                clReleaseMemObject(b[i]);
            b[i] = NULL;
        }
    return err;
}

ropeqk_status rq_cl_host_run(ropeqk_plan *pl, const rq_host_io *io)
{
    ropeqk_ctx *ctx = pl->ctx;
    cl_command_queue queue = rq_cl(ctx)->queue;
    cl_mem b[RQ_IO_COUNT];
    bool wrapped = false;
    cl_event ev = NULL;
    ropeqk_status st = ROPEQK_SUCCESS;
    cl_int err = host_buffers(ctx, io, b, &wrapped);
    if (err)
        return rq_cl_fail(ctx, err);
    ropeqk_opencl_args a = {.q = {b[RQ_IO_Q], 0}, .k = {b[RQ_IO_K], 0}, .v = {b[RQ_IO_V], 0},
                            .q_pos = {b[RQ_IO_QPOS], 0}, .k_pos = {b[RQ_IO_KPOS], 0}, .out = {b[RQ_IO_OUT], 0},
                            .lse = {b[RQ_IO_LSE], 0}};
    if (!(st = ropeqk_opencl_plan_enqueue(pl, queue, &a, NULL, 0, NULL, &ev)))
        for (int i = 0; i < RQ_IO_COUNT && !err; i++)
            if (io[i].out && io[i].bytes)
                err = clEnqueueReadBuffer(queue, b[i], CL_TRUE, 0, io[i].bytes, io[i].out, 1, &ev, NULL);
    if (err)
        st = rq_cl_fail(ctx, err);
    if (st && wrapped) /* commands enqueued before a failure may still use the caller's memory */
        clFinish(queue);
    if (ev)
        clReleaseEvent(ev);
    for (int i = 0; i < RQ_IO_COUNT; i++)
        if (b[i])
            clReleaseMemObject(b[i]);
    return st;
}
