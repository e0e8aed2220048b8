/* The bench's OpenCL environment (benv.h) and the baselines' OpenCL program. */
#include "benv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The baseline RoPE kernel, written the way RoPE kernels usually are (ggml, HF-style ports): one
 * work-item per (pair, row, head), fp32 angle pos * inv_freq, fp32 cos/sin (accurate, not native_).
 * Interleaved pairs, BHSD contiguous in and out. copy16 is the bandwidth yardstick. */
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

static int build_baselines(benv *e)
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

void benv_close(benv *e)
{
    if (e->rope_plain) clReleaseKernel(e->rope_plain);
    if (e->copy16) clReleaseKernel(e->copy16);
    if (e->softmax) clReleaseKernel(e->softmax);
    if (e->base_prog) clReleaseProgram(e->base_prog);
    ropeqk_ctx_destroy(e->rq);
    if (e->queue) clReleaseCommandQueue(e->queue);
    if (e->cl) clReleaseContext(e->cl);
    memset(e, 0, sizeof *e);
}

int benv_open(benv *e, const char *spec, char *why, size_t why_len, const char **what)
{
    memset(e, 0, sizeof *e);
    cl_platform_id plat;
    int err = ropeqk_opencl_select_device(spec, &plat, &e->dev, why, why_len);
    *what = "selecting a device";
    if (!err) {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
        e->cl = clCreateContext(props, 1, &e->dev, NULL, NULL, &err);
        if (!err)
            e->queue = clCreateCommandQueue(e->cl, e->dev, CL_QUEUE_PROFILING_ENABLE, &err);
        *what = "creating the OpenCL context";
    }
    if (!err) { /* the library borrows the context and queue: every impl shares one timeline */
        ropeqk_opencl_ctx_params cp = {.context = e->cl, .queue = e->queue};
        if (!(err = ropeqk_opencl_ctx_create(&cp, &e->rq)))
            err = ropeqk_ctx_warmup(e->rq);
        *what = "ropeqk_ctx_create";
    }
    if (!err) {
        err = build_baselines(e);
        *what = "building the baseline kernels";
    }
    if (err)
        benv_close(e);
    return err;
}

cl_mem bench_mkbuf(benv *e, size_t bytes, const void *host, cl_int *err)
{
    if (*err || !e->cl)
        return NULL;
    return clCreateBuffer(e->cl, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes, (void *)host, err);
}

int bench_fail(const char *what, int err)
{
    fprintf(stderr, "ropeqk-bench: %s: %d (%s)\n", what, err, ropeqk_status_string(err));
    return 1;
}

int bench_ctx_with_env(benv *e, const char *name, const char *value, ropeqk_ctx **out)
{
    const char *was = getenv(name);
    char keep[64] = "";
    if (was)
        snprintf(keep, sizeof keep, "%s", was);
    setenv(name, value, 1);
    ropeqk_opencl_ctx_params cp = {.context = e->cl, .queue = e->queue};
    int err = ropeqk_opencl_ctx_create(&cp, out);
    if (was)
        setenv(name, keep, 1);
    else
        unsetenv(name);
    return err;
}

ropeqk_buffer *bench_wrap(ropeqk_ctx *ctx, cl_mem m, int *err)
{
    ropeqk_buffer *b = NULL;
    if (!*err && m && (*err = ropeqk_opencl_buffer_wrap(ctx, m, &b)) != 0)
        fprintf(stderr, "ropeqk-bench: ropeqk_opencl_buffer_wrap: %s\n", ropeqk_last_error());
    return b;
}
