/* Running scores plans on OpenCL buffers: ropeqk_opencl_plan_enqueue (the core's call checks, then
 * scratch, kernel arguments (the structs of cl/contract.h) and the two or three enqueues: rotate Q,
 * rotate K, scores; or rotate Q, decode), and the one-shot ropeqk_opencl_enqueue. Everything is
 * checked before anything is enqueued. */
#include "ocl.h"

#include <stdlib.h>
#include <string.h>

/* Splits a run in two halves along the keys (along_k) or the query rows, each a sub-view of the same
 * buffers with its positions shifted, and joins them with a marker event. */
static ropeqk_status run_halves(ropeqk_plan *pl, cl_command_queue queue, const rq_run *r, bool along_k,
                                cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    int64_t n = along_k ? r->Sk : r->Sq, half = n / 2;
    cl_event ev[2] = {NULL, NULL};
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int part = 0; part < 2 && !st; part++) {
        int64_t first = part ? half : 0;
        rq_run s = *r;
        if (along_k) {
            s.Sk = part ? n - half : half;
            s.m.k.offset += (size_t)(first * pl->k.nb[2]);
            s.m.out.offset += (size_t)(first * pl->out.nb[3]);
            if (s.m.k_pos.buf)
                s.m.k_pos.offset += (size_t)first * sizeof(cl_int);
            s.k_off += first;
        } else {
            s.Sq = part ? n - half : half;
            s.m.q.offset += (size_t)(first * pl->q.nb[2]);
            s.m.out.offset += (size_t)(first * pl->out.nb[2]);
            if (s.m.q_pos.buf)
                s.m.q_pos.offset += (size_t)first * sizeof(cl_int);
            s.q_off += first;
        }
        st = rq_plan_run(pl, queue, &s, num_wait, wait, &ev[part]);
    }
    if (!st && event) {
        cl_int err = clEnqueueMarkerWithWaitList(queue, 2, ev, event);
        if (err)
            st = rq_cl_fail(pl->ctx, err);
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    return st;
}

ropeqk_status rq_plan_run(ropeqk_plan *pl, cl_command_queue queue, const rq_run *r, cl_uint num_wait,
                          const cl_event *wait, cl_event *event)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    const rq_tuning *tn = &ctx->tune;
    /* qk_scores: one work-item per RQ_TQ rows x RQ_VK keys, RQ_WG work-items per group along keys */
    size_t wg = (size_t)tn->wg, tq = (size_t)tn->tq, kw = (size_t)(tn->vk * tn->nv), kpw = (size_t)rq_kt_panel(tn);
    /* Kt: panels of kpw keys (CPU profile), else rows ldk floats apart */
    size_t nblk = ((size_t)r->Sk + kw - 1) / kw, sk_pad = kpw ? rq_round_up((size_t)r->Sk, kpw) : rq_kt_stride((size_t)r->Sk, kw);
    int64_t M = pb->G * r->Sq;
    bool dec = rq_clp(pl)->dec;
    /* Qr rows: D floats apart, or RQ_DMAXD on the decode path, plus spare rows at the end (the last
     * tile reads past M without a branch) */
    size_t qr_n, kt_n, tmp, qrow = dec ? RQ_DMAXD : (size_t)pb->D, qspare = dec && tq < RQ_DM ? RQ_DM : tq;
    /* CPU profile: Qr in panels of qpw rows, [B*Hkv][Mp / qpw][D][qpw] with M rounded up to Mp (a
     * tile's broadcasts are then one contiguous run, from one base address), Kt in panels of kp
     * keys (see cl/scores.cl). qpw: a multiple of both tq and 16 where one is small (rope writes 16
     * rows with one store), else tq. Row-major where the padded panels would not fit one allocation
     * (so that splitting still ends at one query row). */
    size_t qpw = tq % 16 == 0 ? tq : 16 % tq == 0 ? 16 : tq % 4 == 0 ? tq * 4 : tq % 2 == 0 && tq <= 8 ? tq * 8 : tq;
    size_t Mp = !dec && tn->profile == ROPEQK_PROFILE_CPU ? rq_round_up((size_t)M, qpw) : 0;
    if (Mp && (__builtin_mul_overflow((size_t)(pb->B * pb->Hkv), Mp, &tmp) || __builtin_add_overflow(tmp, qspare, &tmp) ||
               __builtin_mul_overflow(tmp, qrow * sizeof(float), &tmp) || tmp > rq_cl(ctx)->max_alloc))
        Mp = 0;
    bool ovf = (Mp ? __builtin_mul_overflow((size_t)(pb->B * pb->Hkv), Mp, &qr_n)
                   : __builtin_mul_overflow((size_t)(pb->B * pb->Hq), (size_t)r->Sq, &qr_n)) ||
               __builtin_add_overflow(qr_n, qspare, &qr_n) || __builtin_mul_overflow(qr_n, qrow, &qr_n) ||
               __builtin_mul_overflow(qr_n, sizeof(float), &tmp) ||
               __builtin_mul_overflow((size_t)(pb->B * pb->Hkv), sk_pad, &kt_n) ||
               __builtin_mul_overflow(kt_n, (size_t)pb->D, &kt_n) || __builtin_mul_overflow(kt_n, sizeof(float), &tmp);
    if (ovf)
        return ROPEQK_ERR_OVERFLOW;
    /* Scratch past the device's allocation limit: split the keys (Kt) or the query rows (Qr). */
    if (!dec && kt_n * sizeof(float) > rq_cl(ctx)->max_alloc && r->Sk > 1)
        return run_halves(pl, queue, r, true, num_wait, wait, event);
    if (qr_n * sizeof(float) > rq_cl(ctx)->max_alloc && r->Sq > 1)
        return run_halves(pl, queue, r, false, num_wait, wait, event);
    if (qr_n * sizeof(float) > rq_cl(ctx)->max_alloc || (!dec && kt_n * sizeof(float) > rq_cl(ctx)->max_alloc))
        return ROPEQK_ERR_TOO_LARGE;
    if (M > INT32_MAX - 512 || (int64_t)sk_pad > INT32_MAX || pb->B * pb->Hq > INT32_MAX || r->Sk > INT32_MAX)
        return ROPEQK_ERR_TOO_LARGE;

    ropeqk_status st = ROPEQK_SUCCESS;
    rq_scratch *sq = NULL, *sk = NULL; /* pooled Qr and Kt (cl_pool.c) */
    if ((st = rq_scratch_get(ctx, qr_n * sizeof(float), &sq)) ||
        (!dec && (st = rq_scratch_get(ctx, kt_n * sizeof(float), &sk)))) {
        rq_scratch_put(ctx, sq, 0, NULL);
        return st;
    }
    cl_mem qr = sq->buf, kt = sk ? sk->buf : NULL;
    const ropeqk_opencl_args *m = &r->m;
    cl_event ev[3] = {NULL, NULL, NULL};
    cl_mem qpos = m->q_pos.buf ? m->q_pos.buf : rq_clp(pl)->vfreq, kpos = m->k_pos.buf ? m->k_pos.buf : rq_clp(pl)->vfreq;
    rq_i64 qpos_off = (rq_i64)(m->q_pos.offset / sizeof(cl_int)), kpos_off = (rq_i64)(m->k_pos.offset / sizeof(cl_int));
    const int64_t *onb = pl->out.nb;
    /* the masks' positions: the arrays', except under M-RoPE (token order: the offsets) */
    bool qmask = m->q_pos.buf && !pb->mrope, kmask = m->k_pos.buf && !pb->mrope;

    int32_t kp = (int32_t)kpw;

    pthread_mutex_lock(&rq_clp(pl)->lock); /* the kernels' arguments are the plan's: set and enqueue as one step */
    /* Q -> Qr [B*Hq][Sq][qrow] (or panels, above) times the scale */
    cl_int err = Mp ? rq_set_rotate(rq_clp(pl)->krq, pl, &pl->q, m->q, m->q_pos, r->Sq, r->q_stride, r->q_off,
                                    (float)pb->scale, qr, (int64_t)(Mp * qrow), 1, (int64_t)qpw, (int32_t)qpw,
                                    (int64_t)(qpw * qrow), (int32_t)pb->G)
                    : rq_set_rotate(rq_clp(pl)->krq, pl, &pl->q, m->q, m->q_pos, r->Sq, r->q_stride, r->q_off,
                                    (float)pb->scale, qr, r->Sq * (int64_t)qrow, (int64_t)qrow, 1, 0, 0, 1);
    if (!err)
        err = rq_enqueue_rotate(queue, rq_clp(pl)->krq, pl, &pl->q, r->Sq, num_wait, wait, &ev[0]);
    if (dec) { /* qk_decode_*: reads K itself; waits for Qr (whose kernel waited for `wait`) */
        rq_decode_args a = {
            .k_off = (rq_i64)m->k.offset, .knb0 = pl->k.nb[0], .knb1 = pl->k.nb[1], .knb2 = pl->k.nb[2],
            .kpos_off = kpos_off, .qpos_off = qpos_off, .window = pb->window, .out_off = (rq_i64)m->out.offset,
            .onb0 = onb[0], .onb1 = onb[1], .onb2 = onb[2], .onb3 = onb[3], .Hkv = (rq_i32)pb->Hkv,
            .Sk = (rq_i32)r->Sk, .D = (rq_i32)pb->D, .R = (rq_i32)pb->R, .layout = pb->layout,
            .use_kpos = m->k_pos.buf != NULL, .k_base = (rq_i32)r->k_off, .M = (rq_i32)M, .Sq = (rq_i32)r->Sq,
            .G = (rq_i32)pb->G, .use_qpos = qmask, .q_base = (rq_i32)r->q_off,
            .causal = pb->causal, .rot_mul = (float)pb->attn, .softcap = (float)pb->softcap,
            .rot_off = (rq_i32)pb->rot_off, .mrope = pb->mrope, .kpos_stride = (rq_i32)r->k_stride,
        };
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_K, m->k.buf);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_KPOS, kpos);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_FREQ, rq_clp(pl)->vfreq);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_CTAB, rq_clp(pl)->ctab);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_QR, qr);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_QPOS, qpos);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_OUT, m->out.buf);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_DEC_A, a);
        size_t dkb = (size_t)tn->dkb, dwg = (size_t)tn->dwg;
        size_t g[2] = {rq_round_up(((size_t)r->Sk + dkb - 1) / dkb, dwg), (size_t)pb->B}, l[2] = {dwg, 1};
        if (rq_clp(pl)->dec_gpu) { /* qk_decode_gpu_*: a work-group per RQ_GDKB keys of one (batch, KV head) */
            g[0] = ((size_t)r->Sk + RQ_GDKB - 1) / RQ_GDKB * RQ_GDWG;
            g[1] = (size_t)(pb->B * pb->Hkv);
            l[0] = RQ_GDWG;
        }
        if (!err)
            err = clEnqueueNDRangeKernel(queue, rq_clp(pl)->ks, 2, NULL, g, l, 1, ev, &ev[2]);
    } else {
        /* K -> Kt [B*Hkv][D][sk_pad] (or [B*Hkv][sk_pad / kp][D][kp]) */
        if (!err)
            err = rq_set_rotate(rq_clp(pl)->krk, pl, &pl->k, m->k, m->k_pos, r->Sk, r->k_stride, r->k_off, 1.0f, kt,
                                (int64_t)(pb->D * sk_pad), 1, kp ? kp : (int64_t)sk_pad, kp, (int64_t)kp * pb->D, 1);
        if (!err)
            err = rq_enqueue_rotate(queue, rq_clp(pl)->krk, pl, &pl->k, r->Sk, num_wait, wait, &ev[1]);
        rq_scores_args a = {
            .qpos_off = qpos_off, .kpos_off = kpos_off, .out_off = (rq_i64)m->out.offset, .onb0 = onb[0],
            .onb1 = onb[1], .onb2 = onb[2], .onb3 = onb[3], .window = pb->window, .M = (rq_i32)M,
            .Sq = (rq_i32)r->Sq, .Sk = (rq_i32)r->Sk, .ldk = (rq_i32)sk_pad, .D = (rq_i32)pb->D, .G = (rq_i32)pb->G,
            .Hkv = (rq_i32)pb->Hkv, .use_qpos = qmask, .q_base = (rq_i32)r->q_off,
            .use_kpos = kmask, .k_base = (rq_i32)r->k_off, .causal = pb->causal,
            .qpanel = (rq_i32)Mp, .qpw = (rq_i32)qpw, .softcap = (float)pb->softcap,
        };
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_SC_QR, qr);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_SC_KT, kt);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_SC_QPOS, qpos);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_SC_KPOS, kpos);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_SC_OUT, m->out.buf);
        RQ_SET_ARG(rq_clp(pl)->ks, RQ_SC_A, a);
        size_t g[3] = {rq_round_up(nblk, wg), (size_t)((M + (int64_t)tq - 1) / (int64_t)tq), (size_t)(pb->B * pb->Hkv)};
        size_t l[3] = {wg, 1, 1};
        if (rq_clp(pl)->tiled) { /* qk_scores_tiled: a work-group of tw x tw work-items per tile x tile scores */
            size_t tile = (size_t)tn->tile, tw = tile / (size_t)tn->rb;
            g[0] = ((size_t)r->Sk + tile - 1) / tile * tw;
            g[1] = ((size_t)M + tile - 1) / tile * tw;
            l[0] = l[1] = tw;
        }
        if (!err)
            err = clEnqueueNDRangeKernel(queue, rq_clp(pl)->ks, 3, NULL, g, l, 2, ev, &ev[2]);
    }
    pthread_mutex_unlock(&rq_clp(pl)->lock);
    return rq_run_finish(ctx, sq, sk, ev, err, event);
}

ropeqk_status rq_run_finish(ropeqk_ctx *ctx, rq_scratch *sq, rq_scratch *sk, cl_event ev[3], cl_int err,
                            cl_event *event)
{
    ropeqk_status st = err ? rq_cl_fail(ctx, err) : ROPEQK_SUCCESS;
    /* the scratch goes back to the pool, reusable once the commands that use it have completed:
     * the last kernel's event when it was enqueued (it waits for the rotations), else those of
     * whatever was enqueued before the failure (none: free at once) */
    cl_event used[2];
    cl_uint nused = 0;
    if (ev[2])
        used[nused++] = ev[2];
    else
        for (int i = 0; i < 2; i++)
            if (ev[i])
                used[nused++] = ev[i];
    rq_scratch_put(ctx, sk, nused, used);
    rq_scratch_put(ctx, sq, nused, used);
    if (!err && event) {
        *event = ev[2];
        ev[2] = NULL;
    }
    for (int i = 0; i < 3; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    return st;
}

/* The plan belongs to an OpenCL context (entry points of ropeqk_opencl.h check by identity). */
static ropeqk_status plan_is_cl(const ropeqk_plan *pl, const char *fn)
{
    if (!rq_is_cl(pl->ctx)) {
        rq_set_error("%s: the plan belongs to a %s context, not an OpenCL one", fn, pl->ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_opencl_plan_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *args,
                                         const ropeqk_step *step, cl_uint num_wait, const cl_event *wait,
                                         cl_event *event)
{
    const char *fn = "ropeqk_opencl_plan_enqueue";
    if (!pl || !args)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_status st = plan_is_cl(pl, fn);
    if (st)
        return st;
    if (num_wait > 0 && !wait)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_ctx *ctx = pl->ctx;
    rq_call_mems m;
    if ((st = rq_cl_mem(ctx, args->q, &m.q)) || (st = rq_cl_mem(ctx, args->k, &m.k)) ||
        (st = rq_cl_mem(ctx, args->q_pos, &m.q_pos)) || (st = rq_cl_mem(ctx, args->k_pos, &m.k_pos)) ||
        (st = rq_cl_mem(ctx, args->out, &m.out)) || (st = rq_cl_mem(ctx, args->v, &m.v)) ||
        (st = rq_cl_mem(ctx, args->lse, &m.lse)))
        return st;
    rq_extents x;
    if ((st = rq_call_check(pl, step, &m, fn, "ropeqk_opencl_paged_enqueue", &x)))
        return st;
    if (!queue)
        queue = rq_cl(ctx)->queue;
    /* the call's last event, also when the caller takes none: the plan's objects outlive it (cl_retire.c) */
    cl_event own = NULL, *evp = event ? event : &own;
    if (pl->op == ROPEQK_OP_ATTENTION) {
        st = rq_attn_enqueue(pl, queue, args, pl->pb.Sq, x.Sk, x.q_off, x.k_off, num_wait, wait, evp);
    } else {
        rq_run r = {.Sq = pl->pb.Sq, .Sk = x.Sk, .q_off = x.q_off, .k_off = x.k_off, .q_stride = pl->pb.Sq,
                    .k_stride = x.Sk, .m = *args};
        st = rq_plan_run(pl, queue, &r, num_wait, wait, evp);
    }
    if (!st)
        rq_cl_track(ctx, *evp);
    if (own)
        clReleaseEvent(own);
    return st;
}

ropeqk_status ropeqk_opencl_enqueue(ropeqk_ctx *ctx, cl_command_queue queue, const ropeqk_params *p,
                                    const ropeqk_tensor *q, ropeqk_opencl_mem q_mem, const ropeqk_tensor *k,
                                    ropeqk_opencl_mem k_mem, ropeqk_opencl_mem q_pos, ropeqk_opencl_mem k_pos,
                                    const ropeqk_tensor *out, ropeqk_opencl_mem out_mem, cl_uint num_wait,
                                    const cl_event *wait, cl_event *event)
{
    if (!ctx || !p || !q || !k || !out)
        return ROPEQK_ERR_NULL_POINTER;
    if (!rq_is_cl(ctx)) {
        rq_set_error("ropeqk_opencl_enqueue: a %s context, not an OpenCL one", ctx->be->name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = *p, .q = *q, .k = *k, .out = *out,
                          .positions = q_pos.buf || k_pos.buf ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    ropeqk_plan *pl;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
    if (st)
        return st;
    ropeqk_opencl_args a = {.q = q_mem, .k = k_mem, .q_pos = q_pos, .k_pos = k_pos, .out = out_mem};
    st = ropeqk_opencl_plan_enqueue(pl, queue, &a, NULL, num_wait, wait, event);
    ropeqk_plan_destroy(pl);
    return st;
}
