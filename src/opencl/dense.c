/* Dense attention with few query rows (decode, a few draft tokens) without the K pre-pass: the paged
 * decode's kernels (cl/paged.cl: Q rotation, pass 1 split over the keys, the reduction of the splits)
 * run on the caller's dense K and V, which rotate each key as they read it. The old path (attn.c)
 * rotates all of K into scratch Kt first: at Sk = 32768 (Hq 32, Hkv 8, D 128, f16, one query row) that
 * pass alone took 36 ms of a 52 ms call on the 2-core Xeon (pocl 3.1), and the kernel after it ran
 * one work-item per KV head, where the paged decode splits the keys over every core.
 *
 * The dense [B, Hkv, Sk, D] K is described as pages of RQ_DENSE_PAGE keys: page (b, c) holds keys
 * c * P .. c * P + P - 1 of batch entry b, numbered p = b * X + c * Y, so that the kernels' address
 * page * knb0 + head * knb1 + slot * knb2 is b * nb[0] + (c * P + slot) * nb[2] + head * nb[1] with
 * knb0 = nb[0] / X = P * nb[2] / Y (the gcd of the two; page_numbering). V shares the page numbers,
 * so V's strides must keep the same ratio, which contiguous BHSD and BSHD views of K and V always do
 * (any D and Dv); a view that does not (B > 1 with unrelated paddings of K and V) runs the old path.
 * Query row i of batch entry b is sequence s = i * B + b of the decode (so that the rotation kernel's
 * [bh][row] destination strides give Qr [s][Hq][D], and out's rows follow from nbat = B), with its
 * own position, the keys' first position k_off, and its own page list: the pages the masks leave
 * (causal: keys up to the row's position; a window: from its start), so that a row's splits cover
 * only keys it sees. With a q position array the host does not know the positions (device memory):
 * every row gets all pages, and the array is copied into the metadata on the device; the kernels mask
 * by position as ever.
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

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Keys per page of the dense view. Any size works in the kernels (pass 1 finds each key's page by
 * j / page_size); larger pages make the metadata shorter (32k keys: 512 entries per row) and coarsen
 * the causal and window cuts to P keys, whose masked keys the kernels skip block by block. The split
 * is a whole number of pages: 64 keeps it below pass 1's own minimum split (256 or 512 keys). */
#define RQ_DENSE_PAGE 64

/* Calls run this way, for the tests (tests/test_dense_decode.c links the library statically). */
static atomic_llong dense_runs;

long long rq_dense_decode_runs(void);
long long rq_dense_decode_runs(void)
{
    return atomic_load(&dense_runs);
}

bool rq_dense_plan_wants(const ropeqk_plan *pl)
{
    return pl->op == ROPEQK_OP_ATTENTION && !pl->pb.mrope && pl->pb.Sq <= pl->ctx->tune.dense_rows;
}

ropeqk_status rq_dense_plan_init(ropeqk_plan *pl, cl_program prog)
{
    ropeqk_ctx *ctx = pl->ctx;
    rq_cl_plan *cp = rq_clp(pl);
    cl_int err = CL_SUCCESS;
    cp->kx[1] = clCreateKernel(prog, rq_paged_cpu_shape(pl) ? "paged_attn_cpu" : "paged_attn_gpu", &err);
    if (!err)
        cp->kx[2] = clCreateKernel(prog, "paged_combine", &err);
    if (!err)
        err = clGetDeviceInfo(rq_cl(ctx)->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cp->cus, &cp->cus, NULL);
    if (err)
        return rq_cl_fail(ctx, err); /* kernels made so far: ropeqk_plan_destroy */
    if (cp->cus < 1)
        cp->cus = 1;
    ropeqk_status st = rq_paged_cpu_shape(pl) ? ROPEQK_SUCCESS : rq_paged_gpu_fit(ctx, &pl->pb, cp);
    if (st == ROPEQK_ERR_TOO_LARGE) /* the device cannot run paged_attn_gpu: the old path serves */
        return ROPEQK_SUCCESS;
    cp->dense = st == ROPEQK_SUCCESS;
    return st;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Page numbers p = b * X + c * Y with p * ks = b * kb + c * kc in K and p * vs = b * vb + c * vc in V
 * (kb, vb: the batch strides, kc, vc: a page's worth of keys; 0 where there is one batch entry or one
 * page). False where no such numbering exists. */
static bool page_numbering(int64_t kb, int64_t kc, int64_t vb, int64_t vc, int64_t *X, int64_t *Y, int64_t *ks,
                           int64_t *vs)
{
    int64_t g = gcd64(kb, kc);
    bool from_k = g > 0;
    if (!from_k)
        g = gcd64(vb, vc);
    if (g == 0) { /* one page of one batch entry */
        *X = *Y = *ks = *vs = 0;
        return true;
    }
    int64_t x = (from_k ? kb : vb) / g, y = (from_k ? kc : vc) / g;
    int64_t ob = from_k ? vb : kb, oc = from_k ? vc : kc, o; /* the other tensor's strides */
    if (x > 0 && ob % x == 0)
        o = ob / x;
    else if (x == 0 && oc % y == 0)
        o = oc / y;
    else
        return false;
    if (x * o != ob || y * o != oc)
        return false;
    *X = x, *Y = y;
    *ks = from_k ? g : o;
    *vs = from_k ? o : g;
    return true;
}

/* The metadata of a call (contract.h): sequence s = i * B + b, its position, first key position and
 * the pages of the keys it may see. */
static ropeqk_status build_meta(const ropeqk_plan *pl, int64_t Sk, int64_t q_off, int64_t k_off, bool qarr,
                                int64_t X, int64_t Y, rq_paged_meta *m)
{
    const rq_problem *pb = &pl->pb;
    const int64_t B = pb->B, Sq = pb->Sq, n = B * Sq, P = RQ_DENSE_PAGE;
    memset(m, 0, sizeof *m);
    /* per query row: its first and one-past-last page */
    int64_t *c0 = malloc((size_t)Sq * 2 * sizeof *c0), *c1 = c0 ? c0 + Sq : NULL, total = 0;
    if (!c0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (int64_t i = 0; i < Sq; i++) {
        int64_t lo = 0, hi = Sk, pq = q_off + i; /* keys [lo, hi) are the row's unmasked ones */
        if (!qarr && pb->causal && pq - k_off + 1 < hi)
            hi = pq - k_off + 1;
        if (!qarr && pb->window > 0 && pq - pb->window - k_off + 1 > lo)
            lo = pq - pb->window - k_off + 1;
        if (hi <= lo) /* fully masked: no pages (O = 0, LSE = -inf or the sink, paged_combine) */
            c0[i] = c1[i] = 0;
        else
            c0[i] = lo / P, c1[i] = (hi + P - 1) / P;
        total += c1[i] - c0[i];
        if (c1[i] - c0[i] > m->max_pages)
            m->max_pages = c1[i] - c0[i];
    }
    size_t nints = (size_t)(4 * n + 1) + (size_t)(total * B);
    if (nints > INT32_MAX || !(m->v = malloc(nints * sizeof *m->v))) {
        free(c0);
        return nints > INT32_MAX ? ROPEQK_ERR_TOO_LARGE : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    m->n = nints;
    m->rows = n;
    m->lens_off = (int32_t)(n + 1);
    m->qpos_off = (int32_t)(2 * n + 1);
    m->kpos_off = (int32_t)(3 * n + 1);
    m->pages_off = (int32_t)(4 * n + 1);
    if (m->max_pages < 1)
        m->max_pages = 1; /* every row masked: one split that returns at once */
    int32_t at = 0, *pages = m->v + m->pages_off;
    for (int64_t i = 0; i < Sq; i++)
        for (int64_t b = 0; b < B; b++) {
            int64_t s = i * B + b, first = c0[i] * P;
            m->v[s] = at;
            m->v[m->lens_off + s] = c1[i] > c0[i] ? (int32_t)((Sk < c1[i] * P ? Sk : c1[i] * P) - first) : 0;
            m->v[m->qpos_off + s] = qarr ? 0 : (int32_t)(q_off + i); /* arrays: copied on the device */
            m->v[m->kpos_off + s] = (int32_t)(k_off + first);
            for (int64_t c = c0[i]; c < c1[i]; c++)
                pages[at++] = (int32_t)(b * X + c * Y);
        }
    m->v[n] = at;
    free(c0);
    return ROPEQK_SUCCESS;
}

/* The q position array into the metadata's q_pos (entry i * B + b gets q_pos[i]): one rectangular copy
 * per batch entry (rows of 4 bytes, B entries apart), joined by a marker. */
static cl_int copy_qpos(ropeqk_plan *pl, cl_command_queue queue, ropeqk_opencl_mem qp, cl_mem meta,
                        int32_t qpos_off, cl_uint num_wait, const cl_event *wait, cl_event *done)
{
    const int64_t B = pl->pb.B, Sq = pl->pb.Sq;
    cl_event *ev = calloc((size_t)B, sizeof *ev);
    if (!ev)
        return CL_OUT_OF_HOST_MEMORY;
    cl_int err = CL_SUCCESS;
    int64_t b = 0;
    for (; b < B && !err; b++) {
        size_t src[3] = {qp.offset, 0, 0}, dst[3] = {(size_t)(qpos_off + b) * 4, 0, 0}, reg[3] = {4, (size_t)Sq, 1};
        err = clEnqueueCopyBufferRect(queue, qp.buf, meta, src, dst, reg, 4, 0, (size_t)B * 4, 0, num_wait, wait,
                                      &ev[b]);
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

ropeqk_status rq_dense_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *m, int64_t Sk,
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
    const int64_t B = pb->B, P = RQ_DENSE_PAGE, nch = (Sk + P - 1) / P;
    int64_t X, Y, ks, vs;
    if (!page_numbering(B > 1 ? k->nb[0] : 0, nch > 1 ? P * k->nb[2] : 0, B > 1 ? v->nb[0] : 0,
                        nch > 1 ? P * v->nb[2] : 0, &X, &Y, &ks, &vs) ||
        (B - 1) * X + (nch - 1) * Y > INT32_MAX || B * pb->Sq * pb->Hq > INT32_MAX)
        return ROPEQK_SUCCESS;
    bool qarr = m->q_pos.buf != NULL;
    rq_paged_meta meta;
    ropeqk_status st = build_meta(pl, Sk, q_off, k_off, qarr, X, Y, &meta);
    /* pass 1's CPU shape reads row groups: one row each here (every row has its own page list, an empty
     * one for a masked row, which the grouping by shared lists would take for its neighbour's) */
    if (!st && rq_paged_cpu_shape(pl) && (st = rq_paged_meta_groups(&meta, 1)))
        free(meta.v);
    if (st == ROPEQK_ERR_TOO_LARGE)
        return ROPEQK_SUCCESS;
    if (st)
        return st;
    cl_int err = CL_SUCCESS;
    cl_mem mbuf = rq_paged_meta_upload(ctx, &meta, &err);
    cl_event qcopy = NULL;
    if (!err && qarr)
        err = copy_qpos(pl, queue, m->q_pos, mbuf, meta.qpos_off, num_wait, wait, &qcopy);
    if (err) {
        if (mbuf)
            clReleaseMemObject(mbuf);
        free(meta.v);
        return rq_cl_fail(ctx, err);
    }
    rq_paged_launch L = {
        .fn = "ropeqk_opencl_plan_enqueue (dense decode)", .meta = mbuf, .lens_off = meta.lens_off,
        .qpos_off = meta.qpos_off, .kpos_off = meta.kpos_off, .pages_off = meta.pages_off, .n = B * pb->Sq,
        .max_pages = meta.max_pages, .page_size = P, .nbat = B,
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
        .onb = {o->nb[0], o->nb[1], o->nb[2], o->nb[3]}, .lnb = {ls->nb[0], ls->nb[1], ls->nb[2]},
        .meta_nwait = qcopy ? 1 : 0, .meta_wait = qcopy ? &qcopy : NULL,
    };
    st = rq_paged_run(pl, queue, &L, cp->krq, cp->kx[1], cp->kx[2], num_wait, wait, event);
    if (qcopy)
        clReleaseEvent(qcopy);
    clReleaseMemObject(mbuf); /* freed by OpenCL once the kernels using it have completed */
    free(meta.v);
    if (st == ROPEQK_ERR_TOO_LARGE) /* scratch past the allocation limit: nothing enqueued but the copy */
        return ROPEQK_SUCCESS;
    if (!st) {
        *taken = true;
        atomic_fetch_add(&dense_runs, 1);
    }
    return st;
}
