/* The OpenCL path: argument checks against the buffers, scratch, and the three enqueues
 * (rotate Q, rotate K, scores). Everything is checked before anything is enqueued. */
#include "ctx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t off, len; /* byte range inside buf */
    cl_mem buf;
} rq_range;

static bool ranges_overlap(const rq_range *a, const rq_range *b)
{
    return a->buf && a->buf == b->buf && a->off < b->off + b->len && b->off < a->off + a->len;
}

/* Checks a view against its buffer: alignment, fits inside. */
static ropeqk_status check_mem(ropeqk_ctx *ctx, ropeqk_mem m, size_t align, size_t extent, rq_range *r)
{
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(m.buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return rq_cl_fail(ctx, err);
    if (m.offset % align != 0)
        return ROPEQK_ERR_BAD_STRIDES;
    if (m.offset > size || extent > size - m.offset)
        return ROPEQK_ERR_BUFFER_TOO_SMALL;
    r->buf = m.buf;
    r->off = m.offset;
    r->len = extent;
    return ROPEQK_SUCCESS;
}

/* inv_freq / pi in fp64, split into three floats per frequency (see cl/angle.cl). */
static void split_freqs(const rq_problem *pb, const double *inv, cl_float4 *v)
{
    for (int64_t i = 0; i < pb->R / 2; i++) {
        double x = inv[i] / 3.14159265358979323846;
        if (pb->conjugate)
            x = -x; /* the inverse rotation is the rotation by -angle */
        float hi = (float)x;
        float mid = (float)(x - hi);
        float lo = (float)(x - hi - mid);
        v[i].s[0] = hi;
        v[i].s[1] = mid;
        v[i].s[2] = lo;
        v[i].s[3] = 0.0f;
    }
}

#define SET(k, i, T, v)                                                                            \
    do {                                                                                           \
        T tmp_ = (v);                                                                              \
        if (!err)                                                                                  \
            err = clSetKernelArg((k), (i), sizeof(T), &tmp_);                                      \
    } while (0)

static const char *rotate_kernel_name(ropeqk_dtype t)
{
    return t == ROPEQK_F16 ? "rope_rotate_f16" : t == ROPEQK_BF16 ? "rope_rotate_bf16" : "rope_rotate_f32";
}

/* The 4 arguments of a positions input at index i: buffer, element offset, use flag, base. With no
 * per-token positions any valid buffer will do (`dummy`): the flag keeps the kernel from reading it. */
static cl_int set_pos_args(cl_kernel k, cl_uint i, ropeqk_mem pos, int base, cl_mem dummy)
{
    cl_int err = CL_SUCCESS;
    SET(k, i, cl_mem, pos.buf ? pos.buf : dummy);
    SET(k, i + 1, cl_long, (cl_long)(pos.offset / sizeof(cl_int)));
    SET(k, i + 2, cl_int, pos.buf != NULL);
    SET(k, i + 3, cl_int, base);
    return err;
}

/* The 6 arguments of the output view at index i: buffer, byte offset, the 4 byte strides. */
static cl_int set_out_args(cl_kernel k, cl_uint i, ropeqk_mem m, const ropeqk_tensor *t)
{
    cl_int err = CL_SUCCESS;
    SET(k, i, cl_mem, m.buf);
    SET(k, i + 1, cl_long, (cl_long)m.offset);
    for (cl_uint d = 0; d < 4; d++)
        SET(k, i + 2 + d, cl_long, t->nb[d]);
    return err;
}

/* Sets the arguments of a rope_rotate_* kernel for one tensor. */
static cl_int set_rotate_args(cl_kernel k, const ropeqk_tensor *t, ropeqk_mem m, int64_t S, const rq_problem *pb,
                              ropeqk_mem pos, int pos_base, cl_mem vfreq, float out_mul, cl_mem dst,
                              int64_t d_bh, int64_t d_row, int64_t d_dim)
{
    cl_int err = CL_SUCCESS;
    SET(k, 0, cl_mem, m.buf);
    SET(k, 1, cl_long, (cl_long)m.offset);
    for (int i = 0; i < 4; i++)
        SET(k, 2 + i, cl_long, t->nb[i]);
    SET(k, 6, cl_int, (cl_int)t->ne[1]);
    SET(k, 7, cl_int, (cl_int)(t->ne[0] * t->ne[1]));
    SET(k, 8, cl_int, (cl_int)S);
    SET(k, 9, cl_int, (cl_int)pb->D);
    SET(k, 10, cl_int, (cl_int)pb->R);
    SET(k, 11, cl_int, pb->layout);
    if (!err)
        err = set_pos_args(k, 12, pos, pos_base, vfreq);
    SET(k, 16, cl_mem, vfreq);
    SET(k, 17, cl_float, (cl_float)pb->attn); /* attention factor on cos and sin */
    SET(k, 18, cl_float, out_mul);
    SET(k, 19, cl_mem, dst);
    SET(k, 20, cl_long, d_bh);
    SET(k, 21, cl_long, d_row);
    SET(k, 22, cl_long, d_dim);
    return err;
}

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* Rows per work-item of the rotate kernels (RQ_RV in cl/rope.cl). Their work-groups are 1 x
 * ctx->tune.rot_uwg units (16 by default: whole cache lines; the size only needs to be
 * fixed, so that pocl compiles the kernel once, not once per new sequence length). */
#define RQ_ROT_RV 16

static const char *decode_kernel_name(ropeqk_dtype t)
{
    return t == ROPEQK_F16 ? "qk_decode_f16" : t == ROPEQK_BF16 ? "qk_decode_bf16" : "qk_decode_f32";
}

/* The decode path's rotation table R(t), t < dkb, from the fp64 frequencies, in qk_decode's lane form:
 * [t][cos, sin][lane], lanes = R (interleaved: pair u on lanes 2u, 2u+1, sin negated on the even one)
 * or R/2 (half-split). */
static cl_mem decode_table(ropeqk_ctx *ctx, const rq_problem *pb, const double *inv, size_t dkb, cl_int *err)
{
    bool il = pb->layout == ROPEQK_INTERLEAVED;
    size_t wt = il ? (size_t)pb->R : (size_t)pb->R / 2;
    float *tab = malloc(dkb * 2 * wt * sizeof *tab);
    if (!tab) {
        *err = CL_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    for (size_t t = 0; t < dkb; t++)
        for (size_t l = 0; l < wt; l++) {
            double a = (double)t * inv[il ? l / 2 : l] * (pb->conjugate ? -1.0 : 1.0);
            tab[t * 2 * wt + l] = (float)cos(a);
            tab[t * 2 * wt + wt + l] = (float)(sin(a) * (il && l % 2 == 0 ? -1.0 : 1.0));
        }
    cl_mem m = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, dkb * 2 * wt * sizeof *tab, tab,
                              err);
    free(tab);
    return m;
}

/* Enqueues the problem as two halves along the keys (along_k) or the query rows, each a sub-view of
 * the same buffers with its positions shifted, and joins them with a marker event. */
static ropeqk_status enqueue_halves(ropeqk_ctx *ctx, cl_command_queue queue, const ropeqk_params *p,
                                    const rq_problem *pb, const ropeqk_tensor *q, ropeqk_mem q_mem,
                                    const ropeqk_tensor *k, ropeqk_mem k_mem, ropeqk_mem q_pos, ropeqk_mem k_pos,
                                    const ropeqk_tensor *out, ropeqk_mem out_mem, cl_uint num_wait,
                                    const cl_event *wait, cl_event *event, bool along_k)
{
    ropeqk_params base = *p;
    /* a length derived from the offsets must stay the whole problem's, not a half's */
    if (base.scaling.type == ROPEQK_SCALING_DYNAMIC || base.scaling.type == ROPEQK_SCALING_LONGROPE)
        base.scaling.seq_len = pb->seq_len;
    int64_t n = along_k ? pb->Sk : pb->Sq, half = n / 2;
    cl_event ev[2] = {NULL, NULL};
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int part = 0; part < 2 && !st; part++) {
        int64_t first = part ? half : 0, len = part ? n - half : half;
        ropeqk_params pp = base;
        ropeqk_tensor q2 = *q, k2 = *k, o2 = *out;
        ropeqk_mem qm = q_mem, km = k_mem, qp = q_pos, kp = k_pos, om = out_mem;
        if (along_k) {
            k2.ne[2] = o2.ne[3] = len;
            km.offset += (size_t)(first * k->nb[2]);
            om.offset += (size_t)(first * out->nb[3]);
            if (kp.buf)
                kp.offset += (size_t)first * sizeof(cl_int);
            else
                pp.k_pos_offset += first;
        } else {
            q2.ne[2] = o2.ne[2] = len;
            qm.offset += (size_t)(first * q->nb[2]);
            om.offset += (size_t)(first * out->nb[2]);
            if (qp.buf)
                qp.offset += (size_t)first * sizeof(cl_int);
            else
                pp.q_pos_offset += first;
        }
        st = ropeqk_enqueue(ctx, queue, &pp, &q2, qm, &k2, km, qp, kp, &o2, om, num_wait, wait, &ev[part]);
    }
    if (!st && event) {
        cl_int err = clEnqueueMarkerWithWaitList(queue, 2, ev, event);
        if (err)
            st = rq_cl_fail(ctx, err);
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    return st;
}

ropeqk_status ropeqk_enqueue(ropeqk_ctx *ctx, cl_command_queue queue, const ropeqk_params *p,
                             const ropeqk_tensor *q, ropeqk_mem q_mem, const ropeqk_tensor *k, ropeqk_mem k_mem,
                             ropeqk_mem q_pos, ropeqk_mem k_pos, const ropeqk_tensor *out, ropeqk_mem out_mem,
                             cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    rq_problem pb;
    ropeqk_status st = rq_validate(p, q, k, out, false, q_pos.buf || k_pos.buf, &pb);
    if (st)
        return st;
    if (!q_mem.buf || !k_mem.buf || !out_mem.buf || (num_wait > 0 && !wait))
        return ROPEQK_ERR_NULL_POINTER;
    if (!queue)
        queue = ctx->queue;

    rq_range rq, rk, ro, rqp = {0, 0, NULL}, rkp = {0, 0, NULL};
    if ((st = check_mem(ctx, q_mem, ropeqk_dtype_size(q->dtype), pb.q_extent, &rq)) ||
        (st = check_mem(ctx, k_mem, ropeqk_dtype_size(k->dtype), pb.k_extent, &rk)) ||
        (st = check_mem(ctx, out_mem, sizeof(float), pb.out_extent, &ro)))
        return st;
    if (q_pos.buf && (st = check_mem(ctx, q_pos, sizeof(cl_int), (size_t)pb.Sq * sizeof(cl_int), &rqp)))
        return st;
    if (k_pos.buf && (st = check_mem(ctx, k_pos, sizeof(cl_int), (size_t)pb.Sk * sizeof(cl_int), &rkp)))
        return st;
    if (ranges_overlap(&ro, &rq) || ranges_overlap(&ro, &rk) || ranges_overlap(&ro, &rqp) ||
        ranges_overlap(&ro, &rkp))
        return ROPEQK_ERR_OVERLAP;

    /* Scratch sizes and kernel index ranges (kernels carry rows, heads and dims as int). */
    /* qk_scores: one work-item per RQ_TQ rows x RQ_VK keys, RQ_WG work-items per group along keys.
     * sk_pad is the row stride of Kt: a multiple of RQ_VK (aligned vector loads) that covers every key
     * block a work-item loads, bumped so that its byte size is an odd multiple of 64: a power-of-two
     * stride (Sk = 1024: 4 KiB) maps all d of one work-item to the same L1 set and thrashes it. */
    const rq_tuning *tn = &ctx->tune;
    size_t wg = (size_t)tn->wg, tq = (size_t)tn->tq, vk = (size_t)tn->vk;
    size_t nblk = ((size_t)pb.Sk + vk - 1) / vk, sk_pad = round_up(nblk * vk, 16);
    if ((sk_pad / 16) % 2 == 0)
        sk_pad += 16;
    int64_t M = pb.G * pb.Sq;
    /* Decode path (cl/scores.cl, qk_decode_*): few rows per KV head, K rotated in registers, no Kt.
     * Its preconditions are the kernel's; ROPEQK_DECODE=0 turns it off. */
    bool dec = M <= 8 && pb.D % 16 == 0 && pb.D <= 256 && pb.R % 32 == 0 &&
               tn->decode;
    /* Qr rows: D floats apart, or 256 (RQ_DMAXD) on the decode path, plus spare rows at the end */
    size_t qr_n, kt_n, tmp, qrow = dec ? 256 : (size_t)pb.D, qspare = dec && tq < 8 ? 8 : tq;
    bool ovf = __builtin_mul_overflow((size_t)(pb.B * pb.Hq), (size_t)pb.Sq, &qr_n) ||
               __builtin_add_overflow(qr_n, qspare, &qr_n) || __builtin_mul_overflow(qr_n, qrow, &qr_n) ||
               __builtin_mul_overflow(qr_n, sizeof(float), &tmp) ||
               __builtin_mul_overflow((size_t)(pb.B * pb.Hkv), sk_pad, &kt_n) ||
               __builtin_mul_overflow(kt_n, (size_t)pb.D, &kt_n) || __builtin_mul_overflow(kt_n, sizeof(float), &tmp);
    if (ovf)
        return ROPEQK_ERR_OVERFLOW;
    /* Scratch past the device's allocation limit: split the keys (Kt) or the query rows (Qr) in
     * halves, each a view of the same buffers, until every part fits. */
    if (!dec && kt_n * sizeof(float) > ctx->max_alloc && pb.Sk > 1)
        return enqueue_halves(ctx, queue, p, &pb, q, q_mem, k, k_mem, q_pos, k_pos, out, out_mem, num_wait, wait,
                              event, true);
    if (qr_n * sizeof(float) > ctx->max_alloc && pb.Sq > 1)
        return enqueue_halves(ctx, queue, p, &pb, q, q_mem, k, k_mem, q_pos, k_pos, out, out_mem, num_wait, wait,
                              event, false);
    if (qr_n * sizeof(float) > ctx->max_alloc || (!dec && kt_n * sizeof(float) > ctx->max_alloc))
        return ROPEQK_ERR_TOO_LARGE;
    if (M > INT32_MAX || (int64_t)sk_pad > INT32_MAX || pb.B * pb.Hq > INT32_MAX || pb.Sk > INT32_MAX)
        return ROPEQK_ERR_TOO_LARGE;

    cl_program prog;
    if ((st = rq_get_program(ctx, ctx->device, &prog)))
        return st;

    cl_int err = CL_SUCCESS;
    cl_mem vfreq = NULL, qr = NULL, kt = NULL, ctab = NULL;
    rq_scratch *sq = NULL, *sk = NULL; /* pooled Qr and Kt (ctx.c) */
    cl_event last = NULL;              /* the score kernel's event (in ev[2] or *event) */
    cl_kernel krq = NULL, krk = NULL, ks = NULL;
    cl_event ev[3] = {NULL, NULL, NULL};
    cl_float4 *v = malloc((size_t)(pb.R / 2) * sizeof *v);
    double *inv = malloc((size_t)(pb.R / 2) * sizeof *inv);
    if (!v || !inv) {
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    rq_inv_freq(&pb, inv);
    split_freqs(&pb, inv, v);
    vfreq = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)(pb.R / 2) * sizeof *v, v, &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    if ((st = rq_scratch_get(ctx, qr_n * sizeof(float), &sq)) ||
        (!dec && (st = rq_scratch_get(ctx, kt_n * sizeof(float), &sk))))
        goto done;
    qr = sq->buf;
    kt = sk ? sk->buf : NULL;
    size_t dkb = (size_t)tn->dkb, dwg = (size_t)tn->dwg;
    if (!err && dec)
        ctab = decode_table(ctx, &pb, inv, dkb, &err);
    if (!err)
        krq = clCreateKernel(prog, rotate_kernel_name(q->dtype), &err);
    if (!err && !dec)
        krk = clCreateKernel(prog, rotate_kernel_name(k->dtype), &err);
    if (!err)
        ks = clCreateKernel(prog, dec ? decode_kernel_name(k->dtype) : "qk_scores", &err);
    if (err)
        goto done;

    /* Q -> Qr [B*Hq][Sq][D] times the scale; K -> Kt [B*Hkv][D][Sk_pad] */
    size_t units = (size_t)(pb.R / 2 + (pb.D - pb.R));
    /* rope_rotate_*: a work-item per (RQ_ROT_RV rows, unit), tune.rot_uwg units per group */
    size_t rot_uwg = (size_t)tn->rot_uwg;
    err = set_rotate_args(krq, q, q_mem, pb.Sq, &pb, q_pos, (int)pb.q_off, vfreq, (float)pb.scale, qr,
                          pb.Sq * (int64_t)qrow, (int64_t)qrow, 1);
    if (!err) {
        /* a fixed local size (units rounded up; the kernel skips units past the last, and stores no
         * lane past S) so that pocl compiles the rotate kernel once, not once per new shape */
        size_t g[2] = {((size_t)pb.Sq + RQ_ROT_RV - 1) / RQ_ROT_RV, round_up(units, rot_uwg)};
        size_t l[2] = {1, rot_uwg};
        err = clEnqueueNDRangeKernel(queue, krq, 2, NULL, g, l, num_wait, wait, &ev[0]);
    }
    if (!err && !dec)
        err = set_rotate_args(krk, k, k_mem, pb.Sk, &pb, k_pos, (int)pb.k_off, vfreq, 1.0f, kt,
                              (int64_t)(pb.D * sk_pad), 1, (int64_t)sk_pad);
    if (!err && !dec) {
        size_t g[2] = {((size_t)pb.Sk + RQ_ROT_RV - 1) / RQ_ROT_RV, round_up(units, rot_uwg)};
        size_t l[2] = {1, rot_uwg};
        err = clEnqueueNDRangeKernel(queue, krk, 2, NULL, g, l, num_wait, wait, &ev[1]);
    }
    if (err)
        goto done;
    if (dec) { /* qk_decode_*: reads K itself; waits for Qr (whose kernel waited for `wait`) */
        SET(ks, 0, cl_mem, k_mem.buf);
        SET(ks, 1, cl_long, (cl_long)k_mem.offset);
        for (int i = 0; i < 3; i++)
            SET(ks, 2 + i, cl_long, k->nb[i]);
        SET(ks, 5, cl_int, (cl_int)pb.Hkv);
        SET(ks, 6, cl_int, (cl_int)pb.Sk);
        SET(ks, 7, cl_int, (cl_int)pb.D);
        SET(ks, 8, cl_int, (cl_int)pb.R);
        SET(ks, 9, cl_int, pb.layout);
        if (!err)
            err = set_pos_args(ks, 10, k_pos, (int)pb.k_off, vfreq);
        SET(ks, 14, cl_mem, vfreq);
        SET(ks, 15, cl_float, (cl_float)pb.attn); /* as rope_rotate's rot_mul */
        SET(ks, 16, cl_mem, ctab);
        SET(ks, 17, cl_mem, qr);
        SET(ks, 18, cl_int, (cl_int)M);
        SET(ks, 19, cl_int, (cl_int)pb.Sq);
        SET(ks, 20, cl_int, (cl_int)pb.G);
        if (!err)
            err = set_pos_args(ks, 21, q_pos, (int)pb.q_off, vfreq);
        SET(ks, 25, cl_int, pb.causal);
        SET(ks, 26, cl_long, pb.window);
        if (!err)
            err = set_out_args(ks, 27, out_mem, out);
        size_t g[2] = {round_up(((size_t)pb.Sk + dkb - 1) / dkb, dwg), (size_t)pb.B}, l[2] = {dwg, 1};
        if (!err)
            err = clEnqueueNDRangeKernel(queue, ks, 2, NULL, g, l, 1, ev, &ev[2]);
        goto enqueued;
    }
    SET(ks, 0, cl_mem, qr);
    SET(ks, 1, cl_mem, kt);
    SET(ks, 2, cl_int, (cl_int)M);
    SET(ks, 3, cl_int, (cl_int)pb.Sq);
    SET(ks, 4, cl_int, (cl_int)pb.Sk);
    SET(ks, 5, cl_int, (cl_int)sk_pad);
    SET(ks, 6, cl_int, (cl_int)pb.D);
    SET(ks, 7, cl_int, (cl_int)pb.G);
    SET(ks, 8, cl_int, (cl_int)pb.Hkv);
    if (!err)
        err = set_pos_args(ks, 9, q_pos, (int)pb.q_off, vfreq);
    if (!err)
        err = set_pos_args(ks, 13, k_pos, (int)pb.k_off, vfreq);
    SET(ks, 17, cl_int, pb.causal);
    if (!err)
        err = set_out_args(ks, 18, out_mem, out);
    SET(ks, 24, cl_long, pb.window);
    if (!err) {
        size_t g[3] = {round_up(nblk, wg), (size_t)((M + (int64_t)tq - 1) / (int64_t)tq), (size_t)(pb.B * pb.Hkv)};
        size_t l[3] = {wg, 1, 1};
        err = clEnqueueNDRangeKernel(queue, ks, 3, NULL, g, l, 2, ev, &ev[2]);
    }
enqueued:
    last = ev[2];
    if (!err && event) {
        *event = ev[2];
        ev[2] = NULL;
    }
done:
    if (err)
        st = rq_cl_fail(ctx, err);
    /* the scratch goes back to the pool, reusable once the commands that use it have completed:
     * the score kernel's event when it was enqueued (it waits for both rotations), else those of
     * whatever was enqueued before the failure (none: free at once) */
    {
        cl_event used[3];
        cl_uint nused = 0;
        if (last)
            used[nused++] = last;
        else
            for (int i = 0; i < 2; i++)
                if (ev[i])
                    used[nused++] = ev[i];
        rq_scratch_put(ctx, sk, nused, used);
        rq_scratch_put(ctx, sq, nused, used);
    }
    /* Releasing here is safe: OpenCL keeps objects alive until the enqueued commands finish. */
    for (int i = 0; i < 3; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    if (ks) clReleaseKernel(ks);
    if (krk) clReleaseKernel(krk);
    if (krq) clReleaseKernel(krq);
    if (ctab) clReleaseMemObject(ctab);
    if (vfreq) clReleaseMemObject(vfreq);
    free(v);
    free(inv);
    return st;
}

/* A device copy of host memory; NULL with *err set on failure. */
static cl_mem upload(ropeqk_ctx *ctx, cl_mem_flags flags, const void *data, size_t bytes, cl_int *err)
{
    cl_mem m = clCreateBuffer(ctx->context, flags, bytes, NULL, err);
    if (*err)
        return NULL;
    *err = clEnqueueWriteBuffer(ctx->queue, m, CL_TRUE, 0, bytes, data, 0, NULL, NULL);
    if (*err) {
        clReleaseMemObject(m);
        return NULL;
    }
    return m;
}

ropeqk_status ropeqk_scores(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                            const ropeqk_tensor *k, const void *k_data, const int32_t *q_pos,
                            const int32_t *k_pos, const ropeqk_tensor *out, float *out_data)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    rq_problem pb;
    ropeqk_status st = rq_validate(p, q, k, out, false, q_pos || k_pos, &pb);
    if (st)
        return st;
    if (!q_data || !k_data || !out_data)
        return ROPEQK_ERR_NULL_POINTER;
    cl_int err = CL_SUCCESS;
    cl_mem bq = NULL, bk = NULL, bo = NULL, bqp = NULL, bkp = NULL;
    cl_event ev = NULL;
    /* blocking writes: on any early return no command may still read the caller's memory */
    bq = upload(ctx, CL_MEM_READ_ONLY, q_data, pb.q_extent, &err);
    if (!err)
        bk = upload(ctx, CL_MEM_READ_ONLY, k_data, pb.k_extent, &err);
    if (!err && q_pos)
        bqp = upload(ctx, CL_MEM_READ_ONLY, q_pos, (size_t)pb.Sq * sizeof(cl_int), &err);
    if (!err && k_pos)
        bkp = upload(ctx, CL_MEM_READ_ONLY, k_pos, (size_t)pb.Sk * sizeof(cl_int), &err);
    /* a strided output has gaps the download would overwrite: upload the caller's bytes first so
     * the gaps come back as they were. A dense one (every byte a score) needs no upload. */
    bool dense = pb.out_extent == (size_t)(pb.B * pb.Hq * pb.Sq * pb.Sk) * sizeof(float);
    if (!err && dense)
        bo = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, pb.out_extent, NULL, &err);
    else if (!err)
        bo = upload(ctx, CL_MEM_READ_WRITE, out_data, pb.out_extent, &err);
    if (err) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    ropeqk_mem mq = {bq, 0}, mk = {bk, 0}, mo = {bo, 0}, mqp = {bqp, 0}, mkp = {bkp, 0};
    st = ropeqk_enqueue(ctx, ctx->queue, p, q, mq, k, mk, mqp, mkp, out, mo, 0, NULL, &ev);
    if (st)
        goto done;
    err = clEnqueueReadBuffer(ctx->queue, bo, CL_TRUE, 0, pb.out_extent, out_data, 1, &ev, NULL);
    if (err)
        st = rq_cl_fail(ctx, err);
done:
    if (ev) clReleaseEvent(ev);
    if (bo) clReleaseMemObject(bo);
    if (bkp) clReleaseMemObject(bkp);
    if (bqp) clReleaseMemObject(bqp);
    if (bk) clReleaseMemObject(bk);
    if (bq) clReleaseMemObject(bq);
    return st;
}
