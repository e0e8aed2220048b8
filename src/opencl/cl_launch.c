/* What the OpenCL operations share to launch their kernels: whether a compiled kernel runs its
 * work-group on the device, the buffers of a call as the core's checks see them, and the RoPE pass
 * (rope_rotate_*: its arguments, its grid, its enqueue) that the scores, attention and paged decode
 * paths all start with. Below every operation: it calls only cl_err.c. */
#include "ocl.h"

/* Whether a compiled kernel runs nt work-items with `local` bytes of local memory on the device:
 * the kernel's own limit (CL_KERNEL_WORK_GROUP_SIZE: registers per work-item can lower it below the
 * device's), and its local memory against 48 KiB and the device's. A failed query counts as no: the
 * caller then uses a kernel that always works. */
bool rq_kernel_fits(const ropeqk_ctx *ctx, cl_kernel k, size_t nt, size_t local)
{
    size_t wg = 0;
    cl_ulong lm = 0;
    if (clGetKernelWorkGroupInfo(k, rq_cl(ctx)->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS ||
        clGetKernelWorkGroupInfo(k, rq_cl(ctx)->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL) != CL_SUCCESS)
        return false;
    size_t cap = ctx->dev.local_mem > 0 && ctx->dev.local_mem < RQ_LOCAL_CAP ? ctx->dev.local_mem : RQ_LOCAL_CAP;
    return wg >= nt && local <= cap && (ctx->dev.local_mem == 0 || lm <= ctx->dev.local_mem);
}

ropeqk_status rq_cl_mem(ropeqk_ctx *ctx, ropeqk_opencl_mem m, rq_mem *r)
{
    r->id = (uintptr_t)m.buf;
    r->off = m.offset;
    r->end = 0;
    if (!m.buf)
        return ROPEQK_SUCCESS;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(m.buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return rq_cl_fail(ctx, err);
    r->end = size;
    return ROPEQK_SUCCESS;
}

/* Arguments of a rope_rotate_* kernel for one tensor (rows S of view t in m) into dst. */
cl_int rq_set_rotate(cl_kernel k, const ropeqk_plan *pl, const ropeqk_tensor *t, ropeqk_opencl_mem m,
                     ropeqk_opencl_mem pos, int64_t S, int64_t pos_stride, int64_t off, float out_mul, cl_mem dst,
                     int64_t d_bh, int64_t d_row, int64_t d_dim, int32_t panel, int64_t d_panel, int32_t G)
{
    const rq_problem *pb = &pl->pb;
    rq_rotate_args a = {
        .src_off = (rq_i64)m.offset, .nb0 = t->nb[0], .nb1 = t->nb[1], .nb2 = t->nb[2], .nb3 = t->nb[3],
        .pos_off = (rq_i64)(pos.offset / sizeof(cl_int)), .d_bh = d_bh, .d_row = d_row, .d_dim = d_dim,
        .d_panel = d_panel, .panel = panel, .G = G,
        .H = (rq_i32)t->ne[1], .BH = (rq_i32)(t->ne[0] * t->ne[1]), .S = (rq_i32)S, .D = (rq_i32)pb->D,
        .R = (rq_i32)pb->R, .layout = pb->layout, .use_pos = pos.buf != NULL, .pos_base = (rq_i32)off,
        .rot_mul = (float)pb->attn, .out_mul = out_mul, .pos_stride = (rq_i32)pos_stride,
        .rot_off = (rq_i32)pb->rot_off,
    };
    cl_mem pbuf = pos.buf ? pos.buf : rq_clp(pl)->vfreq; /* unread when use_pos is 0: any valid buffer */
    cl_int err = CL_SUCCESS;
    RQ_SET_ARG(k, RQ_ROT_SRC, m.buf);
    RQ_SET_ARG(k, RQ_ROT_POS, pbuf);
    RQ_SET_ARG(k, RQ_ROT_FREQ, rq_clp(pl)->vfreq);
    RQ_SET_ARG(k, RQ_ROT_DST, dst);
    RQ_SET_ARG(k, RQ_ROT_A, a);
    return err;
}

/* The launch of rope_rotate over S rows of BH heads. CPU profile: a work-item per (RQ_RV rows,
 * rq_rot_units units), groups spanning rot_uwg units; the local size is fixed (units rounded up; the
 * kernel skips units past the last, and stores no lane past S) so that pocl compiles the kernel once,
 * not once per shape. GPU profile (cl/rope_gpu.cl): a work-group of RQ_RGX x RQ_RGY work-items per
 * tile of RQ_RGX units x RQ_RTR rows x RQ_RHC heads, the tiles of rows and of heads along dim 1. */
void rq_rotate_grid(const rq_tuning *t, int64_t S, int64_t units, int64_t BH, size_t g[3], size_t l[3])
{
    g[2] = l[2] = 1;
    if (rq_rot_units(t) == 1) {
        size_t nhc = ((size_t)BH + RQ_RHC - 1) / RQ_RHC, nrt = ((size_t)S + RQ_RTR - 1) / RQ_RTR;
        g[0] = rq_round_up((size_t)units, RQ_RGX), l[0] = RQ_RGX;
        g[1] = nrt * nhc * RQ_RGY, l[1] = RQ_RGY;
        return;
    }
    size_t ub = (size_t)rq_rot_units(t), uwg = (size_t)t->rot_uwg / ub;
    size_t items = ((size_t)units + ub - 1) / ub;
    uwg = uwg < 1 ? 1 : uwg;
    g[0] = ((size_t)S + RQ_RV - 1) / RQ_RV, g[1] = rq_round_up(items, uwg);
    l[0] = 1, l[1] = uwg;
}

cl_int rq_enqueue_rotate(cl_command_queue queue, cl_kernel k, const ropeqk_plan *pl, const ropeqk_tensor *t,
                         int64_t S, cl_uint num_wait, const cl_event *wait, cl_event *ev)
{
    size_t g[3], l[3];
    rq_rotate_grid(&pl->ctx->tune, S, pl->pb.R / 2 + (pl->pb.D - pl->pb.R), t->ne[0] * t->ne[1], g, l);
    return clEnqueueNDRangeKernel(queue, k, 3, NULL, g, l, num_wait, wait, ev);
}
