/* Program building and the per-context cache. The kernels are compiled once per (device, options)
 * and kept for the life of the context; a failed build keeps its log for ropeqk_ctx_build_log(). */
#include "ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char rq_cl_source[];
extern const size_t rq_cl_source_len;

/*
 * Tuning knobs, measured (bench/) rather than guessed:
 *   RQ_TQ  query rows per work-item in qk_scores: each key value loaded is reused RQ_TQ times.
 *   RQ_WG  work-items per group along keys: pocl vectorises across them (16 lanes on AVX-512),
 *          a GPU wants a multiple of its warp/wavefront.
 * ROPEQK_TQ / ROPEQK_WG in the environment override them (for tuning sweeps).
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
    ctx->tq = cpu ? 8 : 4;
    ctx->wg = cpu ? 64 : 64;
    const char *e;
    if ((e = getenv("ROPEQK_TQ")) && atoi(e) >= 1 && atoi(e) <= 32)
        ctx->tq = atoi(e);
    if ((e = getenv("ROPEQK_WG")) && atoi(e) >= 1 && atoi(e) <= 1024)
        ctx->wg = atoi(e);
    size_t max_wg = 0;
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL) == CL_SUCCESS &&
        max_wg > 0 && (size_t)ctx->wg > max_wg)
        ctx->wg = (int)max_wg;
    snprintf(ctx->options, sizeof ctx->options, "-cl-std=CL1.2 -DRQ_TQ=%d -DRQ_WG=%d", ctx->tq, ctx->wg);
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
