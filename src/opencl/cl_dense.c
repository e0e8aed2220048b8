/* Dense attention with few query rows (decode, a few draft tokens) without the K pre-pass: the paged
 * decode's kernels (cl/paged.cl: Q rotation, pass 1 split over the keys, the reduction of the splits)
 * run on the caller's dense K and V, which rotate each key as they read it. The old path (cl_attn.c)
 * rotates all of K into scratch Kt first: at Sk = 32768 (Hq 32, Hkv 8, D 128, f16, one query row) that
 * pass alone took 36 ms of a 52 ms call on the 2-core Xeon (pocl 3.1), and the kernel after it ran
 * one work-item per KV head, where the paged decode splits the keys over every core.
 *
 * The dense [B, Hkv, Sk, D] K is described as pages of RQ_DENSE_PAGE keys and each query row gets
 * the pages its masks leave: src/core/dense_pages.c (shared with the Vulkan backend's vk_dense.c).
 * Query row i of batch entry b is sequence s = i * B + b of the decode, so that the rotation kernel's
 * [bh][row] destination strides give Qr [s][Hq][D], and out's rows follow from nbat = B. With a q
 * position array the rows' positions are copied into the metadata on the device (copy_qpos).
 *
 * Taken (the host decides per call, cheap checks only): attention plans without M-RoPE whose Sq is at
 * most the context's dense_rows (ROPEQK_DENSE_DECODE; the default, measured, in src/core/tuning.c), calls with
 * offset key positions (per-token key positions: each key would need its own position, which the
 * pages do not carry: the old path), views whose pages can be numbered, scratch within the device's
 * allocation limit. Everything else the dense attention supports runs here too: layouts, partial
 * rotary and its offset, every scaling variant (the plan's frequencies), conjugate, GQA/MQA, causal,
 * windows, soft-capping, sinks, LSE, f32/f16/bf16 in and out, Dv != D, strided views, decode plans
 * (n_keys and offsets per step). */
#include "ocl.h"
#include "../core/path_runs.h"

#include <stdlib.h>
#include <string.h>


bool rq_cl_dense_plan_wants(const ropeqk_plan *pl)
{
    return pl->op == ROPEQK_OP_ATTENTION && !pl->pb.mrope && pl->pb.Sq <= pl->ctx->tune.dense_rows;
}

ropeqk_status rq_cl_dense_plan_init(ropeqk_plan *pl, cl_program prog)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    cl_int err = CL_SUCCESS;
    cp->kx[1] = clCreateKernel(prog, rq_cl_paged_cpu_shape(pl) ? "paged_attn_cpu" : "paged_attn_gpu", &err);
    if (!err)
        cp->kx[2] = clCreateKernel(prog, "paged_combine", &err);
    if (!err)
        err = clGetDeviceInfo(rq_cl(ctx)->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cp->cus, &cp->cus, NULL);
    if (err)
        return rq_cl_fail(ctx, err); /* kernels made so far: ropeqk_plan_destroy */
    if (cp->cus < 1)
        cp->cus = 1;
    ropeqk_status st = rq_cl_paged_cpu_shape(pl) ? ROPEQK_SUCCESS : rq_cl_paged_gpu_fit(ctx, &pl->pb, cp);
    if (st == ROPEQK_ERR_TOO_LARGE) /* the device cannot run paged_attn_gpu: the old path serves */
        return ROPEQK_SUCCESS;
    cp->dense = st == ROPEQK_SUCCESS;
    return st;
}

/* The q position array into the metadata's q_pos (entry i * B + b, or b * Sq + i where grouped, gets
 * q_pos[i]): one rectangular copy per batch entry (rows of 4 bytes, B entries apart or adjacent), joined
 * by a marker. */
static cl_int copy_qpos(ropeqk_plan *pl, cl_command_queue queue, ropeqk_opencl_mem qp, cl_mem meta,
                        int32_t qpos_off, bool grouped, cl_uint num_wait, const cl_event *wait, cl_event *done)
{
    const int64_t B = pl->pb.B, Sq = pl->pb.Sq;
    cl_event *ev = calloc((size_t)B, sizeof *ev);
    if (!ev)
        return CL_OUT_OF_HOST_MEMORY;
    cl_int err = CL_SUCCESS;
    int64_t b = 0;
    for (; b < B && !err; b++) {
        size_t src[3] = {qp.offset, 0, 0}, dst[3] = {(size_t)(qpos_off + (grouped ? b * Sq : b)) * 4, 0, 0};
        size_t reg[3] = {4, (size_t)Sq, 1};
        err = clEnqueueCopyBufferRect(queue, qp.buf, meta, src, dst, reg, 4, 0, (size_t)(grouped ? 1 : B) * 4, 0,
                                      num_wait, wait, &ev[b]);
    }
    if (!err)
        err = B == 1 ? clRetainEvent(ev[0]) : clEnqueueMarkerWithWaitList(queue, (cl_uint)B, ev, done);
    if (!err && B == 1)
        *done = ev[0];
    for (int64_t i = 0; i < B; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    free(ev);
    return err;
}

ropeqk_status rq_cl_dense_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *m, int64_t Sk,
                               int64_t q_off, int64_t k_off, cl_uint num_wait, const cl_event *wait, cl_event *event,
                               bool *taken)
{
    *taken = false;
    rq_cl_plan *cp = rq_clp(pl);
    if (!cp->dense || m->k_pos.buf)
        return ROPEQK_SUCCESS;
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    const ropeqk_tensor *q = &pl->q, *k = &pl->k, *v = &pl->v, *o = &pl->out, *ls = &pl->lse;
    const int64_t B = pb->B, P = RQ_DENSE_PAGE;
    int64_t X, Y, ks, vs;
    if (!rq_dense_view_pages(pl, Sk, &X, &Y, &ks, &vs))
        return ROPEQK_SUCCESS;
    bool qarr = m->q_pos.buf != NULL;
    /* the GPU profile's fast pass 1 serves a batch entry's rows together: rows b * Sq + i sharing one
     * page list (cl_paged_fast.c) */
    ropeqk_tensor kv[2] = {*k, *v};
    kv[0].ne[2] = kv[1].ne[2] = Sk;
    const int64_t knb[3] = {ks, k->nb[1], k->nb[2]}, vnb[3] = {vs, v->nb[1], v->nb[2]};
    int fast = rq_cl_pfast_call_ok(pl, m->k.offset, knb, m->v.offset, vnb, ropeqk_tensor_extent(&kv[0]),
                                ropeqk_tensor_extent(&kv[1]));
    rq_paged_meta meta;
    ropeqk_status st = fast ? rq_dense_meta_grouped(pl, Sk, q_off, k_off, qarr, X, Y, &meta)
                            : rq_dense_meta(pl, Sk, q_off, k_off, qarr, X, Y, &meta);
    /* pass 1's CPU shape reads row groups: one row each here (every row has its own page list, an empty
     * one for a masked row, which the grouping by shared lists would take for its neighbour's) */
    if (!st && (fast || rq_cl_paged_cpu_shape(pl)) &&
        (st = fast ? rq_cl_pfast_groups(pl, &meta, &fast) : rq_paged_meta_groups(&meta, 1)))
        free(meta.v);
    if (st == ROPEQK_ERR_TOO_LARGE)
        return ROPEQK_SUCCESS;
    if (st)
        return st;
    rq_grave *grave = rq_cl_grave_new(); /* the metadata outlives the commands using it (cl_retire.c) */
    if (!grave) {
        free(meta.v);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    cl_int err = CL_SUCCESS;
    cl_mem mbuf = rq_cl_paged_meta_upload(ctx, &meta, &err);
    cl_event qcopy = NULL;
    if (!err && qarr)
        err = copy_qpos(pl, queue, m->q_pos, mbuf, meta.qpos_off, fast, num_wait, wait, &qcopy);
    if (err) {
        rq_cl_bury_mem(ctx, grave, mbuf, qcopy ? 1 : 0, &qcopy);
        if (qcopy)
            clReleaseEvent(qcopy);
        free(meta.v);
        return rq_cl_fail(ctx, err);
    }
    const int64_t Sq = pb->Sq, HD = pb->Hq * pb->D;
    rq_cl_paged_launch L = {
        .fn = "ropeqk_opencl_plan_enqueue (dense decode)", .meta = mbuf, .lens_off = meta.lens_off,
        .qpos_off = meta.qpos_off, .kpos_off = meta.kpos_off, .pages_off = meta.pages_off, .n = B * pb->Sq,
        .max_pages = meta.max_pages, .page_size = P, .nbat = fast ? Sq : B, .fast = fast,
        .rg_off = meta.groups_off, .ngroups = meta.ngroups, .group_rows = meta.group_rows,
        /* Q [B][Hq][Sq][D] -> Qr [i * B + b][Hq][D]: head bh = b * Hq + h at bh * D, row i at i * B * Hq * D */
        .ra = {
            .src_off = (rq_i64)m->q.offset, .nb0 = q->nb[0], .nb1 = q->nb[1], .nb2 = q->nb[2], .nb3 = q->nb[3],
            .pos_off = (rq_i64)(m->q_pos.offset / sizeof(cl_int)), .d_bh = pb->D, .d_row = B * pb->Hq * pb->D,
            .d_dim = 1, .H = (rq_i32)pb->Hq, .BH = (rq_i32)(B * pb->Hq), .S = (rq_i32)pb->Sq, .D = (rq_i32)pb->D,
            .R = (rq_i32)pb->R, .layout = pb->layout, .use_pos = qarr, .pos_base = (rq_i32)q_off, .G = 1,
            .rot_mul = (float)pb->attn, .out_mul = (float)pb->scale, .pos_stride = (rq_i32)pb->Sq,
            .rot_off = (rq_i32)pb->rot_off,
        },
        .q = m->q, .qpos = qarr ? m->q_pos.buf : cp->vfreq, .k = m->k, .v = m->v, .out = m->out, .lse = m->lse,
        .knb = {ks, k->nb[1], k->nb[2]}, .vnb = {vs, v->nb[1], v->nb[2]},
        /* sequence s's out row: (s % nbat) onb[0] + (s / nbat) onb[2] (rq_pcomb_args) */
        .onb = {o->nb[fast ? 2 : 0], o->nb[1], o->nb[fast ? 0 : 2], o->nb[3]},
        .lnb = {ls->nb[fast ? 2 : 0], ls->nb[1], ls->nb[fast ? 0 : 2]},
        .meta_nwait = qcopy ? 1 : 0, .meta_wait = qcopy ? &qcopy : NULL,
    };
    if (fast) { /* Q [B][Hq][Sq][D] -> Qr [b * Sq + i][Hq][D]: blocks of Hq heads (a batch entry), its rows
                 * in panels of Sq (rope.cl's destination mapping) */
        L.ra.G = (rq_i32)pb->Hq, L.ra.panel = (rq_i32)Sq;
        L.ra.d_bh = Sq * HD, L.ra.d_panel = pb->D, L.ra.d_row = HD;
    }
    st = rq_cl_paged_run(pl, queue, &L, cp->krq, cp->kx[1], cp->kx[2], num_wait, wait, event);
    /* once the commands using it have completed (cl_retire.c): the last kernel's event, else the copy's */
    cl_event last = event && *event ? *event : qcopy;
    rq_cl_bury_mem(ctx, grave, mbuf, last ? 1 : 0, &last);
    if (qcopy)
        clReleaseEvent(qcopy);
    free(meta.v);
    if (st == ROPEQK_ERR_TOO_LARGE) /* scratch past the allocation limit: nothing enqueued but the copy */
        return ROPEQK_SUCCESS;
    if (!st) {
        *taken = true;
        rq_path_hit(RQ_PATH_DENSE_DECODE);
    }
    return st;
}
