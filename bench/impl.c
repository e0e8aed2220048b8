/* The implementations ropeqk-bench compares, all on the same inputs:
 *   fused            ropeqk_opencl_enqueue (f32 and f16 storage).
 *   unfused-clblast  what users write today: a RoPE-only OpenCL kernel (one work-item per rotary pair,
 *                    plain fp32 angle and cos/sin) writing rotated Q and K, then CLBlast's
 *                    SgemmStridedBatched for Q K^T. GQA needs no K expansion: in BHSD the G query heads
 *                    that share a KV head are G*Sq consecutive rows, so one batch entry per KV head is
 *                    a (G*Sq x D) . (D x Sk) GEMM whose output is exactly those heads' [G][Sq][Sk]
 *                    scores. The score scale rides on alpha.
 *   cblas            host RoPE (fp32 cos/sin table per call, single thread) + cblas_sgemm per KV head
 *                    group (same batching as above) through OpenBLAS (all cores).
 *   ref              ropeqk_scores_ref (fp64, scalar).
 *   copy-buffer/kernel  decode rows: clEnqueueCopyBuffer and a float16 copy kernel over a buffer the
 *                    size of K in f32, the memory bandwidth yardstick for the same run. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CLBLAST
#include <clblast_c.h>
#endif
#ifdef HAVE_CBLAS
#include <cblas.h>
#endif

const char *const bimpl_name[IMPL_COUNT] = {"fused", "fused", "unfused-clblast", "cblas", "ref",
                                            "copy-buffer", "copy-kernel"};
const char *const bimpl_dtype[IMPL_COUNT] = {"f32", "f16", "f32", "f32", "f32", "f32", "f32"};

bool bimpl_available(bimpl i)
{
#ifndef HAVE_CLBLAST
    if (i == IMPL_UNFUSED_CLBLAST)
        return false;
#endif
#ifndef HAVE_CBLAS
    if (i == IMPL_CBLAS)
        return false;
#endif
    (void)i;
    return true;
}

/* The baseline RoPE kernel, written the way RoPE kernels usually are (ggml, HF-style ports): one
 * work-item per (pair, row, head), fp32 angle pos * inv_freq, fp32 cos/sin (accurate, not native_).
 * Interleaved pairs, BHSD contiguous in and out. */
static const char baseline_src[] =
    "__kernel void rope_plain(__global const float *x, __global float *y, __global const float *inv_freq,\n"
    "                         int S, int D, int pos_off)\n"
    "{\n"
    "    int i = get_global_id(0), s = get_global_id(1), bh = get_global_id(2);\n"
    "    float a = (float)(pos_off + s) * inv_freq[i];\n"
    "    float c = cos(a), sn = sin(a);\n"
    "    long o = ((long)bh * S + s) * D + 2 * i;\n"
    "    float x0 = x[o], x1 = x[o + 1];\n"
    "    y[o] = x0 * c - x1 * sn;\n"
    "    y[o + 1] = x0 * sn + x1 * c;\n"
    "}\n"
    "__kernel void copy16(__global const float16 *a, __global float16 *b)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    b[i] = a[i];\n"
    "}\n"
    /* Attention baseline: in-place masked row softmax of S [rows][Sk] (rows = B*Hq*Sq, row r has query
     * position q_off + r % Sq), numerically stable (max subtracted), accurate exp. The unmasked keys
     * of a row are one range [lo, hi) (causal: k_off + j <= pq; window w > 0: pq - (k_off + j) < w);
     * masked entries get P = 0 and a fully masked row is all 0 (the library's O = 0). */
    "__kernel void softmax_rows(__global float *s, int Sq, int Sk, int q_off, int k_off, int causal, int window)\n"
    "{\n"
    "    size_t r = get_global_id(0);\n"
    "    long pq = (long)q_off + (long)(r % (size_t)Sq);\n"
    "    long lo = 0, hi = Sk;\n"
    "    if (causal) hi = min(hi, pq - k_off + 1);\n"
    "    if (window > 0) lo = max(lo, pq - k_off - window + 1);\n"
    "    if (hi < lo) hi = lo;\n"
    "    __global float *row = s + r * (size_t)Sk;\n"
    "    float m = -INFINITY, l = 0.0f;\n"
    "    for (long j = lo; j < hi; j++) m = fmax(m, row[j]);\n"
    "    for (long j = lo; j < hi; j++) { float e = exp(row[j] - m); row[j] = e; l += e; }\n"
    "    float inv = hi > lo ? 1.0f / l : 0.0f;\n"
    "    for (long j = 0; j < lo; j++) row[j] = 0.0f;\n"
    "    for (long j = lo; j < hi; j++) row[j] *= inv;\n"
    "    for (long j = hi; j < Sk; j++) row[j] = 0.0f;\n"
    "}\n";

int benv_build_baselines(benv *e)
{
    cl_int err;
    const char *src = baseline_src;
    e->base_prog = clCreateProgramWithSource(e->cl, 1, &src, NULL, &err);
    if (err)
        return err;
    if ((err = clBuildProgram(e->base_prog, 1, &e->dev, "-cl-std=CL1.2", NULL, NULL)))
        return err;
    e->rope_plain = clCreateKernel(e->base_prog, "rope_plain", &err);
    if (!err)
        e->copy16 = clCreateKernel(e->base_prog, "copy16", &err);
    if (!err)
        e->softmax = clCreateKernel(e->base_prog, "softmax_rows", &err);
    return err;
}

/* f32 -> IEEE half, round to nearest even (inputs here are small normal numbers or zero). */
uint16_t bench_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int e = (int)((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffffu;
    if (e <= 0) { /* subnormal half (or zero) */
        if (e < -10)
            return (uint16_t)sign;
        m |= 0x800000u;
        int sh = 14 - e;
        uint32_t h = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is the correct rounding */
    return (uint16_t)(sign | h);
}

static uint32_t rng_state = 12345u;

void bench_rng_seed(uint32_t seed) { rng_state = seed; }

float bench_frand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 16777216.0f - 0.5f;
}

cl_mem bench_mkbuf(benv *e, size_t bytes, const void *host, cl_int *err)
{
    if (*err || !e->cl)
        return NULL;
    return clCreateBuffer(e->cl, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes, (void *)host, err);
}

int bcase_init(benv *e, bcase *c, const bshape *s, bool want_copy)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    ropeqk_default_params(&c->p);
    c->p.q_pos_offset = s->q_off;
    c->p.k_pos_offset = s->k_off;
    c->p.scale = 1.0 / sqrt((double)s->D); /* explicit: the baselines use it as the GEMM alpha */
    c->tq = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->D);
    c->tk = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hkv, s->Sk, s->D);
    c->tq16 = ropeqk_tensor_bhsd(ROPEQK_F16, s->B, s->Hq, s->Sq, s->D);
    c->tk16 = ropeqk_tensor_bhsd(ROPEQK_F16, s->B, s->Hkv, s->Sk, s->D);
    c->to = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->Sk);
    size_t nq = (size_t)s->B * s->Hq * s->Sq * s->D, nk = (size_t)s->B * s->Hkv * s->Sk * s->D;
    size_t no = (size_t)s->B * s->Hq * s->Sq * s->Sk;
    c->hq = malloc(nq * 4);
    c->hk = malloc(nk * 4);
    c->hq16 = malloc(nq * 2);
    c->hk16 = malloc(nk * 2);
    if (!c->hq || !c->hk || !c->hq16 || !c->hk16)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    bench_rng_seed(12345u);
    for (size_t i = 0; i < nq; i++)
        c->hq16[i] = bench_f2h(c->hq[i] = bench_frand());
    for (size_t i = 0; i < nk; i++)
        c->hk16[i] = bench_f2h(c->hk[i] = bench_frand());
    cl_int err = CL_SUCCESS;
    c->q32 = bench_mkbuf(e, nq * 4, c->hq, &err);
    c->k32 = bench_mkbuf(e, nk * 4, c->hk, &err);
    c->q16 = bench_mkbuf(e, nq * 2, c->hq16, &err);
    c->k16 = bench_mkbuf(e, nk * 2, c->hk16, &err);
    c->out = bench_mkbuf(e, no * 4, NULL, &err);
    if (err)
        return err;
    if (bimpl_available(IMPL_UNFUSED_CLBLAST)) {
        float *inv = malloc((size_t)s->D / 2 * sizeof *inv);
        if (!inv)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        for (int i = 0; i < s->D / 2; i++) /* HF style: inv_freq = 1 / base^(2i/D), then fp32 */
            inv[i] = (float)(1.0 / pow(c->p.base, 2.0 * i / s->D));
        c->qr = bench_mkbuf(e, nq * 4, NULL, &err);
        c->kr = bench_mkbuf(e, nk * 4, NULL, &err);
        c->inv = bench_mkbuf(e, (size_t)s->D / 2 * 4, inv, &err);
        free(inv);
        if (err)
            return err;
        c->has_unfused = true;
    }
    if (bimpl_available(IMPL_CBLAS)) {
        c->hqr = malloc(nq * 4);
        c->hkr = malloc(nk * 4);
        c->hout = malloc(no * 4);
        c->cs_q = malloc((size_t)s->Sq * s->D * 4);
        c->cs_k = malloc((size_t)s->Sk * s->D * 4);
        if (!c->hqr || !c->hkr || !c->hout || !c->cs_q || !c->cs_k)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        c->has_cblas = true;
    }
    if (want_copy) {
        c->cpy_bytes = nk * 4;
        c->cpy_src = bench_mkbuf(e, c->cpy_bytes, c->hk, &err);
        c->cpy_dst = bench_mkbuf(e, c->cpy_bytes, NULL, &err);
        if (err)
            return err;
        c->has_copy = true;
    }
    return 0;
}

void bcase_free(bcase *c)
{
    cl_mem m[] = {c->q32, c->k32, c->q16, c->k16, c->out, c->qr, c->kr, c->inv, c->cpy_src, c->cpy_dst};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i])
            clReleaseMemObject(m[i]);
    free(c->hq); free(c->hk); free(c->hq16); free(c->hk16);
    free(c->hqr); free(c->hkr); free(c->hout); free(c->cs_q); free(c->cs_k);
    free(c->ref_out);
    if (c->last_ev)
        clReleaseEvent(c->last_ev);
    memset(c, 0, sizeof *c);
}

#ifdef HAVE_CLBLAST
int run_rope_plain(benv *e, cl_mem x, cl_mem y, cl_mem inv, int BH, int S, int D, int pos_off)
{
    cl_int err = 0;
    err |= clSetKernelArg(e->rope_plain, 0, sizeof(cl_mem), &x);
    err |= clSetKernelArg(e->rope_plain, 1, sizeof(cl_mem), &y);
    err |= clSetKernelArg(e->rope_plain, 2, sizeof(cl_mem), &inv);
    err |= clSetKernelArg(e->rope_plain, 3, sizeof(int), &S);
    err |= clSetKernelArg(e->rope_plain, 4, sizeof(int), &D);
    err |= clSetKernelArg(e->rope_plain, 5, sizeof(int), &pos_off);
    if (err)
        return CL_INVALID_KERNEL_ARGS;
    size_t g[3] = {(size_t)D / 2, (size_t)S, (size_t)BH};
    return clEnqueueNDRangeKernel(e->queue, e->rope_plain, 3, NULL, g, NULL, 0, NULL, NULL);
}

static int run_unfused(benv *e, bcase *c)
{
    const bshape *s = &c->s;
    int err = run_rope_plain(e, c->q32, c->qr, c->inv, s->B * s->Hq, s->Sq, s->D, (int)s->q_off);
    if (!err)
        err = run_rope_plain(e, c->k32, c->kr, c->inv, s->B * s->Hkv, s->Sk, s->D, (int)s->k_off);
    if (err)
        return err;
    size_t G = (size_t)(s->Hq / s->Hkv), m = G * s->Sq;
    return CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                      m, (size_t)s->Sk, (size_t)s->D, (float)c->p.scale,
                                      c->qr, 0, (size_t)s->D, m * s->D,
                                      c->kr, 0, (size_t)s->D, (size_t)s->Sk * s->D, 0.0f,
                                      c->out, 0, (size_t)s->Sk, m * s->Sk,
                                      (size_t)(s->B * s->Hkv), &e->queue, NULL);
}
#endif

#ifdef HAVE_CBLAS
/* Host RoPE the common way: fp32 angle table for the rows' positions, interleaved pairs. */
void host_rope(const float *x, float *y, float *cs, int BH, int S, int D, int64_t pos_off, double base)
{
    float inv[512]; /* D <= 1024 in the bench shapes */
    for (int i = 0; i < D / 2; i++)
        inv[i] = (float)(1.0 / pow(base, 2.0 * i / D));
    for (int s = 0; s < S; s++)
        for (int i = 0; i < D / 2; i++) {
            float a = (float)(pos_off + s) * inv[i];
            cs[(size_t)s * D + 2 * i] = cosf(a);
            cs[(size_t)s * D + 2 * i + 1] = sinf(a);
        }
    for (int bh = 0; bh < BH; bh++)
        for (int s = 0; s < S; s++) {
            const float *xr = x + ((size_t)bh * S + s) * D, *t = cs + (size_t)s * D;
            float *yr = y + ((size_t)bh * S + s) * D;
            for (int i = 0; i < D; i += 2) {
                yr[i] = xr[i] * t[i] - xr[i + 1] * t[i + 1];
                yr[i + 1] = xr[i] * t[i + 1] + xr[i + 1] * t[i];
            }
        }
}

static int run_cblas(bcase *c)
{
    const bshape *s = &c->s;
    host_rope(c->hq, c->hqr, c->cs_q, s->B * s->Hq, s->Sq, s->D, s->q_off, c->p.base);
    host_rope(c->hk, c->hkr, c->cs_k, s->B * s->Hkv, s->Sk, s->D, s->k_off, c->p.base);
    int G = s->Hq / s->Hkv, m = G * s->Sq;
    for (int bk = 0; bk < s->B * s->Hkv; bk++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, s->Sk, s->D, (float)c->p.scale,
                    c->hqr + (size_t)bk * m * s->D, s->D, c->hkr + (size_t)bk * s->Sk * s->D, s->D, 0.0f,
                    c->hout + (size_t)bk * m * s->Sk, s->Sk);
    return 0;
}
#endif

int bimpl_run(benv *e, bcase *c, bimpl i)
{
    ropeqk_opencl_mem none = {NULL, 0}, out = {c->out, 0};
    switch (i) {
    case IMPL_FUSED_F32:
    case IMPL_FUSED_F16: {
        bool h = i == IMPL_FUSED_F16;
        ropeqk_opencl_mem q = {h ? c->q16 : c->q32, 0}, k = {h ? c->k16 : c->k32, 0};
        if (c->last_ev)
            clReleaseEvent(c->last_ev);
        c->last_ev = NULL; /* the score kernel's event: lets the table split rope pass / score kernel */
        return ropeqk_opencl_enqueue(e->rq, e->queue, &c->p, h ? &c->tq16 : &c->tq, q, h ? &c->tk16 : &c->tk, k,
                              none, none, &c->to, out, 0, NULL, &c->last_ev);
    }
    case IMPL_UNFUSED_CLBLAST:
#ifdef HAVE_CLBLAST
        return run_unfused(e, c);
#else
        return -1;
#endif
    case IMPL_CBLAS:
#ifdef HAVE_CBLAS
        return run_cblas(c);
#else
        return -1;
#endif
    case IMPL_REF: {
        if (!c->ref_out && !(c->ref_out = malloc((size_t)c->s.B * c->s.Hq * c->s.Sq * c->s.Sk * sizeof(double))))
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->s.B, c->s.Hq, c->s.Sq, c->s.Sk);
        return ropeqk_scores_ref(&c->p, &c->tq, c->hq, &c->tk, c->hk, NULL, NULL, &o64, c->ref_out);
    }
    case IMPL_COPY_BUFFER:
        return clEnqueueCopyBuffer(e->queue, c->cpy_src, c->cpy_dst, 0, 0, c->cpy_bytes, 0, NULL, NULL);
    case IMPL_COPY_KERNEL: {
        cl_int err = clSetKernelArg(e->copy16, 0, sizeof(cl_mem), &c->cpy_src);
        err |= clSetKernelArg(e->copy16, 1, sizeof(cl_mem), &c->cpy_dst);
        size_t g = c->cpy_bytes / 64;
        return err ? CL_INVALID_KERNEL_ARGS : clEnqueueNDRangeKernel(e->queue, e->copy16, 1, NULL, &g, NULL, 0, NULL, NULL);
    }
    default:
        return -1;
    }
}

size_t bimpl_copy_bytes(const bcase *c, bimpl i)
{
    return (i == IMPL_COPY_BUFFER || i == IMPL_COPY_KERNEL) ? 2 * c->cpy_bytes : 0;
}

int bimpl_fetch(benv *e, bcase *c, bimpl i, float *out)
{
    size_t n = (size_t)c->s.B * c->s.Hq * c->s.Sq * c->s.Sk;
    if (i == IMPL_CBLAS) {
        memcpy(out, c->hout, n * 4);
        return 0;
    }
    if (i == IMPL_REF) {
        for (size_t j = 0; j < n; j++)
            out[j] = (float)c->ref_out[j];
        return 0;
    }
    return clEnqueueReadBuffer(e->queue, c->out, CL_TRUE, 0, n * 4, out, 0, NULL, NULL);
}
