/* The unfused baselines' shared halves (baseline.h). */
#include "baseline.h"

#include <math.h>
#include <stdlib.h>

#ifdef HAVE_CLBLAST
#include <clblast_c.h>
#endif
#ifdef HAVE_CBLAS
#include <cblas.h>
#endif

static void inv_freq(float *inv, double base, int D)
{
    for (int i = 0; i < D / 2; i++)
        inv[i] = (float)(1.0 / pow(base, 2.0 * i / D));
}

float *baseline_inv_freq(double base, int D)
{
    float *inv = malloc((size_t)D / 2 * sizeof *inv);
    if (inv)
        inv_freq(inv, base, D);
    return inv;
}

#ifdef HAVE_CLBLAST
/* The baseline RoPE kernel (benv.c) on BH heads of S rows, positions pos_off + row. */
static int rope_plain(benv *e, cl_mem x, cl_mem y, cl_mem inv, int BH, int S, int D, int pos_off)
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
#endif

int baseline_device_scores(benv *e, const bqk *p, cl_mem q, cl_mem k, cl_mem inv, cl_mem qr, cl_mem kr, cl_mem s)
{
#ifdef HAVE_CLBLAST
    int err = rope_plain(e, q, qr, inv, p->B * p->Hq, p->Sq, p->D, (int)p->q_off);
    if (!err)
        err = rope_plain(e, k, kr, inv, p->B * p->Hkv, p->Sk, p->D, (int)p->k_off);
    if (err)
        return err;
    size_t m = (size_t)(p->Hq / p->Hkv) * p->Sq, Sk = (size_t)p->Sk, D = (size_t)p->D;
    return CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, Sk, D,
                                      (float)p->scale, qr, 0, D, m * D, kr, 0, D, Sk * D, 0.0f, s, 0, Sk, m * Sk,
                                      (size_t)p->B * p->Hkv, &e->queue, NULL);
#else
    (void)e, (void)p, (void)q, (void)k, (void)inv, (void)qr, (void)kr, (void)s;
    return -1;
#endif
}

#ifdef HAVE_CBLAS
/* Host RoPE the common way: an fp32 angle table for the rows' positions, interleaved pairs. */
static void host_rope(const float *x, float *y, float *cs, int BH, int S, int D, int64_t pos_off, double base)
{
    float inv[512]; /* D <= 1024 in the bench shapes */
    inv_freq(inv, base, D);
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
#endif

int baseline_host_scores(const bqk *p, const float *q, const float *k, float *qr, float *kr, float *cs_q, float *cs_k,
                         float *s)
{
#ifdef HAVE_CBLAS
    host_rope(q, qr, cs_q, p->B * p->Hq, p->Sq, p->D, p->q_off, p->base);
    host_rope(k, kr, cs_k, p->B * p->Hkv, p->Sk, p->D, p->k_off, p->base);
    int m = p->Hq / p->Hkv * p->Sq;
    for (int bk = 0; bk < p->B * p->Hkv; bk++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, p->Sk, p->D, (float)p->scale,
                    qr + (size_t)bk * m * p->D, p->D, kr + (size_t)bk * p->Sk * p->D, p->D, 0.0f,
                    s + (size_t)bk * m * p->Sk, p->Sk);
    return 0;
#else
    (void)p, (void)q, (void)k, (void)qr, (void)kr, (void)cs_q, (void)cs_k, (void)s;
    return -1;
#endif
}

int baseline_copy(benv *e, cl_mem src, cl_mem dst, size_t bytes)
{
    cl_int err = clSetKernelArg(e->copy16, 0, sizeof(cl_mem), &src);
    err |= clSetKernelArg(e->copy16, 1, sizeof(cl_mem), &dst);
    size_t g = bytes / 64;
    return err ? CL_INVALID_KERNEL_ARGS : clEnqueueNDRangeKernel(e->queue, e->copy16, 1, NULL, &g, NULL, 0, NULL, NULL);
}
