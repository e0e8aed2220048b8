/* Program building and the per-context cache. The kernels are compiled once per (device, options)
 * and kept for the life of the context; a failed build keeps its log for ropeqk_ctx_build_log(). */
#include "ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char rq_cl_source[];
extern const size_t rq_cl_source_len;

/*
 * Tuning knobs (-D options of the program, cl/scores.cl), measured with bench/ (ropeqk-bench) rather
 * than guessed. Measured on pocl 3.1 / LLVM 15, 2-core AMD EPYC (Zen 5, AVX-512), score kernel alone,
 * medians of 5 with the variants alternating in one process:
 *   qk_scores (two-pass path):
 *   RQ_VK  keys per work-item, one floatN vector along keys. pocl does not vectorise a work-item loop
 *          that contains the d loop, so RQ_VK = 1 ran scalar: 5.5 GFLOP/s at prefill S=1024 D=128;
 *          RQ_VK = 16 (one zmm) 290-320 GFLOP/s; 8 (TQ 16, WG 4): 82 GFLOP/s. GPUs: 1 (coalesced).
 *   RQ_TQ  query rows per work-item (RQ_TQ accumulators): S=1024 D=128: 8 -> 292, 12 -> 304, 16 -> 309-322,
 *          20 -> 315, 24 -> 322 GFLOP/s; D=64: 8 -> 268, 16 -> 289, 24 -> 290; GQA kv8: 305 / 327 / 337.
 *          16 leaves registers for the K vector and wastes fewer rows on short tiles than 24.
 *   RQ_WG  work-items per group along keys: 4 -> 312, 8 -> 309, 16 -> 322, 32 -> 321 (TQ 16).
 *   qk_decode_* (decode path, M = G*Sq <= 8 rows per KV head; CPU only, it is written for wide SIMD
 *   registers and private tables, and is off on GPUs, which run qk_scores with RQ_VK = 1):
 *   RQ_DKB keys per work-item (setup per work-item vs parallel slack): Sk=32768 D=128 f32, 2 threads:
 *          16 -> 2.45 ms, 32 -> 2.23-2.31, 64 -> 2.06-2.21, 128 -> 2.03-2.16; f16: 32 -> 1.85, 64 -> 1.74.
 *   RQ_DWG work-items per group: 1 or 2 within noise; 4 +3% (DKB 16 -> 4: +5%).
 *   RQ_DECODE=0 (ROPEQK_DECODE=0) disables the decode path (comparisons, or a driver that miscompiles it).
 *   rope_rotate_* work-groups span ROPEQK_ROT_UWG units (16: whole cache lines; 8 within noise, 32 worse).
 * ROPEQK_TQ / ROPEQK_WG / ROPEQK_VK / ROPEQK_DKB / ROPEQK_DWG / ROPEQK_DECODE / ROPEQK_ROT_UWG in the
 * environment override them (tuning sweeps; bench/ and tools read the options back with ropeqk_ctx_build_options).
 */
ropeqk_status rq_tune_for_device(ropeqk_ctx *ctx)
{
    cl_device_type type = 0;
    cl_int err = clGetDeviceInfo(ctx->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ctx->max_alloc,
                              &ctx->max_alloc, NULL);
    if (err != CL_SUCCESS)
        return rq_cl_fail(ctx, err);
    bool cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    rq_tuning *t = &ctx->tune;
    t->tq = cpu ? 16 : 4;
    t->wg = cpu ? 16 : 64;
    t->vk = cpu ? 16 : 1;
    t->dkb = 64;
    t->dwg = 2;
    t->decode = cpu;
    t->rot_uwg = 16;
    const char *e;
    if ((e = getenv("ROPEQK_TQ")) && atoi(e) >= 1 && atoi(e) <= 32)
        t->tq = atoi(e);
    if ((e = getenv("ROPEQK_WG")) && atoi(e) >= 1 && atoi(e) <= 1024)
        t->wg = atoi(e);
    if ((e = getenv("ROPEQK_VK")) && (atoi(e) == 1 || atoi(e) == 4 || atoi(e) == 8 || atoi(e) == 16))
        t->vk = atoi(e);
    if ((e = getenv("ROPEQK_DKB")) && atoi(e) >= 2 && atoi(e) <= 1024 && atoi(e) % 2 == 0)
        t->dkb = atoi(e);
    if ((e = getenv("ROPEQK_DWG")) && atoi(e) >= 1 && atoi(e) <= 256)
        t->dwg = atoi(e);
    if ((e = getenv("ROPEQK_DECODE")))
        t->decode = atoi(e) != 0;
    if ((e = getenv("ROPEQK_ROT_UWG")) && atoi(e) >= 1 && atoi(e) <= 256)
        t->rot_uwg = atoi(e);
    size_t max_wg = 0;
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL) == CL_SUCCESS &&
        max_wg > 0) {
        if ((size_t)t->wg > max_wg)
            t->wg = (int)max_wg;
        if ((size_t)t->dwg > max_wg)
            t->dwg = (int)max_wg;
        if ((size_t)t->rot_uwg > max_wg)
            t->rot_uwg = (int)max_wg;
    }
    snprintf(ctx->options, sizeof ctx->options,
             "-cl-std=CL1.2 -DRQ_TQ=%d -DRQ_WG=%d -DRQ_VK=%d -DRQ_DKB=%d -DRQ_DWG=%d -DRQ_DECODE=%d", t->tq, t->wg,
             t->vk, t->dkb, t->dwg, t->decode);
    return ROPEQK_SUCCESS;
}

static void keep_log(ropeqk_ctx *ctx, cl_program prog, cl_device_id device)
{
    size_t len = 0;
    free(ctx->build_log);
    ctx->build_log = NULL;
    if (clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return;
    ctx->build_log = malloc(len + 1);
    if (ctx->build_log &&
        clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, len, ctx->build_log, NULL) != CL_SUCCESS)
        ctx->build_log[0] = '\0';
    if (ctx->build_log)
        ctx->build_log[len] = '\0';
}

ropeqk_status rq_get_program(ropeqk_ctx *ctx, cl_device_id device, cl_program *out)
{
    ropeqk_status st = ROPEQK_SUCCESS;
    pthread_mutex_lock(&ctx->lock);
    for (rq_program *p = ctx->programs; p; p = p->next)
        if (p->device == device && strcmp(p->options, ctx->options) == 0) {
            *out = p->program;
            pthread_mutex_unlock(&ctx->lock);
            return ROPEQK_SUCCESS;
        }
    /* Built under the lock: concurrent first calls wait for one build instead of racing. */
    rq_program *entry = calloc(1, sizeof *entry);
    cl_int err = CL_SUCCESS;
    cl_program prog = NULL;
    if (!entry) {
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    const char *src = (const char *)rq_cl_source;
    size_t len = rq_cl_source_len;
    prog = clCreateProgramWithSource(ctx->context, 1, &src, &len, &err);
    if (err != CL_SUCCESS) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    err = clBuildProgram(prog, 1, &device, ctx->options, NULL, NULL);
    if (err != CL_SUCCESS) {
        keep_log(ctx, prog, device);
        rq_cl_fail(ctx, err);
        st = err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS ? ROPEQK_ERR_BUILD
                                                                                  : (ropeqk_status)err;
        goto done;
    }
    entry->device = device;
    snprintf(entry->options, sizeof entry->options, "%s", ctx->options);
    entry->program = prog;
    entry->next = ctx->programs;
    ctx->programs = entry;
    *out = prog;
    prog = NULL;
    entry = NULL;
done:
    if (prog)
        clReleaseProgram(prog);
    free(entry);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

void rq_free_programs(ropeqk_ctx *ctx)
{
    rq_program *p = ctx->programs;
    while (p) {
        rq_program *n = p->next;
        clReleaseProgram(p->program);
        free(p);
        p = n;
    }
    ctx->programs = NULL;
}

ropeqk_status ropeqk_ctx_warmup(ropeqk_ctx *ctx)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    cl_program prog;
    return rq_get_program(ctx, ctx->device, &prog);
}
