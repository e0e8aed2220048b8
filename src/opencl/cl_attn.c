/* Fused attention (ROPEQK_OP_ATTENTION) on OpenCL: the plan's kernel and the enqueue (rotate Q,
 * rotate K, then qk_attention_gpu_* (cl/attention_gpu.cl, GPU profile) or qk_attention_* reading V
 * from the caller's buffer; S never written). Calls with few query rows go to cl_dense.c instead (the
 * paged decode's kernels, keys rotated as they are read) where it takes them. Shares the RoPE pass and the scratch pool with the
 * scores path; both kernels read the same scratch layouts (Qr [bk][M][D], Kt [bk][D][ldk]). */
#include "ocl.h"

#include <stdlib.h>
#include <string.h>

static const char *attn_kernel_name(ropeqk_dtype v, bool gpu, bool fa2)
{
    if (fa2)
        return v == ROPEQK_F16 ? "qk_attention_fa2_f16" : v == ROPEQK_BF16 ? "qk_attention_fa2_bf16" : "qk_attention_fa2_f32";
    if (gpu)
        return v == ROPEQK_F16 ? "qk_attention_gpu_f16" : v == ROPEQK_BF16 ? "qk_attention_gpu_bf16" : "qk_attention_gpu_f32";
    return v == ROPEQK_F16 ? "qk_attention_f16" : v == ROPEQK_BF16 ? "qk_attention_bf16" : "qk_attention_f32";
}

/* The GPU attention kernel of a plan: the configured shape's (qk_attention_fa2_* or _gpu_*, in the
 * context's program), or where an fa2 shape's kernel does not take the plan's head dims (D not a
 * multiple of its step, Dv not a multiple of 4),
 * qk_attention_gpu_* in its own shape (an attention-only program, -DRQ_GA_FALLBACK=1). Sets kx[0]
 * and the launch shape when the compiled kernel runs its work-group on the device; false
 * otherwise (*kp NULL, or an error in *st). */
static bool gattn_kernel(ropeqk_plan *pl, cl_program prog, ropeqk_status *st)
{
    const rq_tuning *tn = &pl->ctx->tune;
    rq_tuning t = *tn;
    bool fa2 = rq_ga_fa2(tn);
    *st = ROPEQK_SUCCESS;
    if (fa2 && (pl->pb.D % t.attn_tk || pl->pb.Dv % 4)) {
        t.attn_tile = RQ_GA_FB_BM, t.attn_keys = RQ_GA_FB_BN, t.attn_tk = RQ_GA_FB_TK, t.attn_rb = RQ_GA_FB_RB, t.attn_dv = RQ_GA_FB_DV;
        fa2 = false;
        if ((*st = rq_get_program_ex(pl->ctx, rq_cl(pl->ctx)->device, RQ_OPS_ATTN, " -DRQ_GA_FALLBACK=1", &prog)))
            return false;
    }
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(prog, attn_kernel_name(pl->v.dtype, true, fa2), &err);
    if (err) {
        *st = rq_cl_fail(pl->ctx, err);
        return false;
    }
    if (!rq_kernel_fits(pl->ctx, k, rq_gattn_items(&t), rq_ga_local_bytes(&t))) {
        clReleaseKernel(k);
        return false;
    }
    rq_clp(pl)->kx[0] = k;
    rq_clp(pl)->gattn = true;
    rq_clp(pl)->ga_bm = t.attn_tile;
    rq_clp(pl)->ga_dv = t.attn_dv;
    rq_clp(pl)->ga_nt = (int)rq_gattn_items(&t);
    return true;
}

ropeqk_status rq_attn_plan_init(ropeqk_plan *pl, cl_program prog)
{
    cl_int err = CL_SUCCESS;
    const rq_tuning *tn = &pl->ctx->tune;
    /* qk_attention_*'s column block of V (cl/attention.cl): larger Dv runs several */
    rq_clp(pl)->acb = tn->profile == ROPEQK_PROFILE_CPU ? RQ_ADVMAX : RQ_ADVMAX_GPU;
    /* the GPU attention kernel where the context built it (-DRQ_GA_BM, src/opencl/cl_tune.c) and the
     * compiled kernel runs its work-group with its local memory, else qk_attention_* */
    if (tn->attn_tile > 0) {
        ropeqk_status st;
        if (gattn_kernel(pl, prog, &st) || st)
            return st;
        /* the context's program holds no qk_attention_* then (cl/program.cl): an attention-only one */
        st = rq_get_program_ex(pl->ctx, rq_cl(pl->ctx)->device, RQ_OPS_ATTN, " -DRQ_ATTN_FALLBACK=1", &prog);
        if (st)
            return st;
    }
    rq_clp(pl)->kx[0] = clCreateKernel(prog, attn_kernel_name(pl->v.dtype, false, false), &err);
    return err ? rq_cl_fail(pl->ctx, err) : ROPEQK_SUCCESS;
}

/* Query rows per pass (ctx.h, RQ_ATTN_PASS_BYTES), in equal passes: 16385 rows at 4096 per pass
 * are 5 x 3277, not 4 x 4096 + 1. The cap counts the rows; the few spare rows past the last tile
 * come on top (within the allocation limit): counted against the cap, they made S 4096 at Hq 32,
 * D 128 (exactly 64 MiB of rows) two passes, the first one's attention kernel then inside the
 * bench's "RoPE" time (device_ms - kernel_ms). */
static int64_t attn_pass_rows(const ropeqk_ctx *ctx, const rq_problem *pb, int64_t Sq)
{
    size_t row = (size_t)(pb->B * pb->Hq) * (size_t)pb->D * sizeof(float), cap = rq_cl(ctx)->attn_pass_bytes;
    size_t spare = (size_t)ctx->tune.atq * (size_t)pb->D * sizeof(float); /* rows past the last tile */
    size_t lim = (size_t)rq_cl(ctx)->max_alloc > spare ? (size_t)rq_cl(ctx)->max_alloc - spare : 0;
    if (cap > lim)
        cap = lim;
    int64_t per = (int64_t)(cap / row), passes;
    if (per < 1)
        per = 1;
    passes = (Sq + per - 1) / per;
    return (Sq + passes - 1) / passes;
}

ropeqk_status rq_attn_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *m, int64_t Sq,
                              int64_t Sk, int64_t q_off, int64_t k_off, cl_uint num_wait, const cl_event *wait,
                              cl_event *event)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    const rq_tuning *tn = &ctx->tune;
    /* few query rows: the paged decode's kernels on the dense K and V, no K pre-pass (cl_dense.c); a call
     * on fewer rows than the plan's (a paged plan's chunk, cl_paged_chunk.c) takes the kernel below */
    bool taken = false;
    ropeqk_status dst = ROPEQK_SUCCESS;
    if (Sq == pb->Sq)
        dst = rq_cl_dense_enqueue(pl, queue, m, Sk, q_off, k_off, num_wait, wait, event, &taken);
    if (dst || taken)
        return dst;
    /* Sq: the plan's rows, or fewer (a paged plan's chunk of one sequence, src/opencl/cl_paged_chunk.c) */
    int64_t rows = attn_pass_rows(ctx, pb, Sq), M = pb->G * rows;
    size_t avk = (size_t)tn->avk, atq = (size_t)tn->atq, sk_pad = rq_kt_stride((size_t)Sk, avk);
    size_t qr_n, kt_n, tmp;
    bool ovf = __builtin_mul_overflow((size_t)(pb->B * pb->Hq), (size_t)rows, &qr_n) ||
               __builtin_add_overflow(qr_n, atq, &qr_n) || __builtin_mul_overflow(qr_n, (size_t)pb->D, &qr_n) ||
               __builtin_mul_overflow(qr_n, sizeof(float), &tmp) ||
               __builtin_mul_overflow((size_t)(pb->B * pb->Hkv), sk_pad, &kt_n) ||
               __builtin_mul_overflow(kt_n, (size_t)pb->D, &kt_n) || __builtin_mul_overflow(kt_n, sizeof(float), &tmp);
    if (ovf)
        return ROPEQK_ERR_OVERFLOW;
    /* softmax spans every key of a row, so the keys cannot be split like the scores' */
    /* qk_attention_gpu_*: a work-group per tile of rows, KV head and column block of V */
    bool gattn = rq_clp(pl)->gattn;
    int64_t cbw = gattn ? rq_clp(pl)->ga_dv : rq_clp(pl)->acb, ncb = (pb->Dv + cbw - 1) / cbw;
    if (qr_n * sizeof(float) > rq_cl(ctx)->max_alloc || kt_n * sizeof(float) > rq_cl(ctx)->max_alloc || M > INT32_MAX ||
        (int64_t)sk_pad > INT32_MAX || pb->B * pb->Hkv * ncb > INT32_MAX) {
        rq_set_error("attention: scratch of %zu + %zu bytes exceeds the device's allocation limit %llu",
                     qr_n * sizeof(float), kt_n * sizeof(float), (unsigned long long)rq_cl(ctx)->max_alloc);
        return ROPEQK_ERR_TOO_LARGE;
    }
    ropeqk_status st;
    rq_scratch *sq = NULL, *sk = NULL; /* pooled Qr and Kt */
    if ((st = rq_scratch_get(ctx, qr_n * sizeof(float), &sq)) ||
        (st = rq_scratch_get(ctx, kt_n * sizeof(float), &sk))) {
        rq_scratch_put(ctx, sq, 0, NULL);
        return st;
    }
    /* Events: K's rotation (kev), and the chain of passes, each a Q rotation into the shared Qr that
     * waits for the previous pass's kernel, then that pass's kernel: `last` is the chain's newest
     * command, whose completion implies every earlier one's (and K's: every kernel waits for it). */
    cl_event kev = NULL, last = NULL, qev = NULL;
    cl_mem qpos = m->q_pos.buf ? m->q_pos.buf : rq_clp(pl)->vfreq, kpos = m->k_pos.buf ? m->k_pos.buf : rq_clp(pl)->vfreq;
    cl_mem lse = pl->with_lse ? m->lse.buf : rq_clp(pl)->vfreq; /* unwritten without with_lse */
    cl_mem sinks = rq_clp(pl)->sinks ? rq_clp(pl)->sinks : rq_clp(pl)->vfreq; /* unread without sinks */
    /* the masks' positions: the arrays', except under M-RoPE (token order: the offsets) */
    bool qmask = m->q_pos.buf && !pb->mrope, kmask = m->k_pos.buf && !pb->mrope;
    cl_kernel ka = rq_clp(pl)->kx[0];
    size_t awg = (size_t)tn->awg;
    pthread_mutex_lock(&rq_clp(pl)->lock);
    cl_int err = rq_set_rotate(rq_clp(pl)->krk, pl, &pl->k, m->k, m->k_pos, Sk, Sk, k_off, 1.0f, sk->buf,
                               (int64_t)(pb->D * sk_pad), 1, (int64_t)sk_pad, 0, 0, 1);
    if (!err)
        err = rq_enqueue_rotate(queue, rq_clp(pl)->krk, pl, &pl->k, Sk, num_wait, wait, &kev);
    for (int64_t r0 = 0; r0 < Sq && !err; r0 += rows) {
        int64_t n = Sq - r0 < rows ? Sq - r0 : rows, Mp = pb->G * n;
        ropeqk_opencl_mem qm = m->q, qp = m->q_pos;
        qm.offset += (size_t)(r0 * pl->q.nb[2]);
        if (qp.buf)
            qp.offset += (size_t)r0 * sizeof(cl_int);
        err = rq_set_rotate(rq_clp(pl)->krq, pl, &pl->q, qm, qp, n, Sq, q_off + r0, (float)pb->scale, sq->buf,
                            n * pb->D, pb->D, 1, 0, 0, 1);
        if (!err)
            err = rq_enqueue_rotate(queue, rq_clp(pl)->krq, pl, &pl->q, n, last ? 1 : num_wait, last ? &last : wait, &qev);
        if (err)
            break;
        if (last)
            clReleaseEvent(last);
        last = qev;
        qev = NULL;
        rq_attn_args a = {
            .v_off = (rq_i64)m->v.offset, .vnb0 = pl->v.nb[0], .vnb1 = pl->v.nb[1], .vnb2 = pl->v.nb[2],
            .o_off = (rq_i64)(m->out.offset + (size_t)(r0 * pl->out.nb[2])), .onb0 = pl->out.nb[0],
            .onb1 = pl->out.nb[1], .onb2 = pl->out.nb[2],
            .l_off = pl->with_lse ? (rq_i64)(m->lse.offset + (size_t)(r0 * pl->lse.nb[2])) : 0,
            .lnb0 = pl->lse.nb[0], .lnb1 = pl->lse.nb[1], .lnb2 = pl->lse.nb[2],
            .qpos_off = (rq_i64)(m->q_pos.offset / sizeof(cl_int) + (size_t)r0),
            .kpos_off = (rq_i64)(m->k_pos.offset / sizeof(cl_int)), .window = pb->window, .M = (rq_i32)Mp,
            .Sq = (rq_i32)n, .Sk = (rq_i32)Sk, .ldk = (rq_i32)sk_pad, .D = (rq_i32)pb->D, .Dv = (rq_i32)pb->Dv,
            .G = (rq_i32)pb->G, .Hkv = (rq_i32)pb->Hkv, .use_qpos = qmask,
            .q_base = (rq_i32)(q_off + r0), .use_kpos = kmask, .k_base = (rq_i32)k_off,
            .causal = pb->causal, .o_dtype = (rq_i32)pl->out.dtype, .with_lse = pl->with_lse,
            .use_sinks = rq_clp(pl)->sinks != NULL, .softcap = (float)pb->softcap,
        };
        RQ_SET_ARG(ka, RQ_AT_QR, sq->buf);
        RQ_SET_ARG(ka, RQ_AT_KT, sk->buf);
        RQ_SET_ARG(ka, RQ_AT_V, m->v.buf);
        RQ_SET_ARG(ka, RQ_AT_QPOS, qpos);
        RQ_SET_ARG(ka, RQ_AT_KPOS, kpos);
        RQ_SET_ARG(ka, RQ_AT_OUT, m->out.buf);
        RQ_SET_ARG(ka, RQ_AT_LSE, lse);
        RQ_SET_ARG(ka, RQ_AT_SINK, sinks);
        RQ_SET_ARG(ka, RQ_AT_A, a);
        size_t g[2] = {rq_round_up(((size_t)Mp + atq - 1) / atq, awg), (size_t)(pb->B * pb->Hkv * ncb)},
               l[2] = {awg, 1};
        if (gattn) {
            size_t bm = (size_t)rq_clp(pl)->ga_bm, nt = (size_t)rq_clp(pl)->ga_nt;
            g[0] = ((size_t)Mp + bm - 1) / bm * nt;
            g[1] = (size_t)(pb->B * pb->Hkv * ncb);
            l[0] = nt;
        }
        cl_event dep[2] = {last, kev}, kk = NULL;
        if (!err)
            err = clEnqueueNDRangeKernel(queue, ka, 2, NULL, g, l, 2, dep, &kk);
        if (!err) {
            clReleaseEvent(last);
            last = kk;
        }
    }
    pthread_mutex_unlock(&rq_clp(pl)->lock);
    /* the scratch is reusable once the chain's newest command and K's rotation have completed */
    cl_event used[2] = {last, kev};
    cl_uint nused = 0;
    for (int i = 0; i < 2; i++)
        if (used[i])
            used[nused++] = used[i];
    rq_scratch_put(ctx, sk, nused, used);
    rq_scratch_put(ctx, sq, nused, used);
    if (!err && event) {
        *event = last;
        last = NULL;
    }
    if (last)
        clReleaseEvent(last);
    if (kev)
        clReleaseEvent(kev);
    return err ? rq_cl_fail(ctx, err) : ROPEQK_SUCCESS;
}
