/* Program building and the per-context cache. The kernels are compiled once per (device, options)
 * and kept for the life of the context; a failed build keeps its log for ropeqk_ctx_build_log(),
 * and the thread's message (ropeqk_last_error) names the device, its driver and the log's start. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char rq_cl_source[];
extern const size_t rq_cl_source_len;

const char *ropeqk_opencl_program_source(size_t *len)
{
    if (len)
        *len = rq_cl_source_len;
    return (const char *)rq_cl_source;
}

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t len)
{
    buf[0] = '\0';
    if (clGetDeviceInfo(d, what, len - 1, buf, NULL) != CL_SUCCESS)
        snprintf(buf, len, "?");
    buf[len - 1] = '\0';
}

ropeqk_status rq_cl_describe_device(ropeqk_ctx *ctx)
{
    rq_cl_ctx *c = rq_cl(ctx);
    cl_device_type type = 0;
    cl_platform_id plat = NULL;
    rq_devinfo dev;
    memset(&dev, 0, sizeof dev);
    cl_int err = clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(c->device, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    if (err != CL_SUCCESS)
        return rq_cl_fail(ctx, err);
    if (clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof dev.platform - 1, dev.platform, NULL) != CL_SUCCESS)
        dev.platform[0] = '\0';
    dev.platform[sizeof dev.platform - 1] = '\0';
    dev_str(c->device, CL_DEVICE_NAME, dev.name, sizeof dev.name);
    dev_str(c->device, CL_DRIVER_VERSION, dev.driver, sizeof dev.driver);
    snprintf(ctx->device_desc, sizeof ctx->device_desc, "%s (%s, driver %s)", dev.name, dev.platform, dev.driver);
    dev.cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    if (clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev.max_wg, &dev.max_wg, NULL) !=
        CL_SUCCESS)
        dev.max_wg = 0;
    cl_ulong lm = 0;
    if (clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL) == CL_SUCCESS)
        dev.local_mem = (size_t)lm;
    cl_uint nv = 0;
    if (clGetDeviceInfo(c->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof nv, &nv, NULL) == CL_SUCCESS)
        dev.native_vec = (int)nv;
    size_t xl = 0;
    if (clGetDeviceInfo(c->device, CL_DEVICE_EXTENSIONS, 0, NULL, &xl) == CL_SUCCESS && xl > 0) {
        char *x = malloc(xl + 1);
        if (!x) { /* not "no extension": NVIDIA would lose its register cap (qk_attention_fa2_*) */
            rq_set_error("out of host memory reading the device's extensions");
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        }
        if (clGetDeviceInfo(c->device, CL_DEVICE_EXTENSIONS, xl, x, NULL) == CL_SUCCESS) {
            x[xl] = '\0';
            dev.nv_opts = strstr(x, "cl_nv_compiler_options") != NULL;
        }
        free(x);
    }
    ctx->dev = dev;
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

/* The thread's error message for a failed build: the device, its driver and the first lines of the
 * log (the whole log stays in ropeqk_ctx_build_log). Called with ctx->lock held. */
static void build_failure_message(ropeqk_ctx *ctx, cl_int err)
{
    char head[512] = "";
    const char *log = ctx->build_log ? ctx->build_log : "";
    size_t n = 0;
    int lines = 0;
    while (log[n] && lines < 4 && n < sizeof head - 1) {
        if (log[n] == '\n')
            lines++;
        n++;
    }
    memcpy(head, log, n);
    head[n] = '\0';
    while (n > 0 && (head[n - 1] == '\n' || head[n - 1] == ' '))
        head[--n] = '\0';
    rq_set_error("OpenCL program build failed on %s: %s (%d), options \"%s\"%s%s", ctx->device_desc,
                 err == CL_INVALID_BUILD_OPTIONS ? "invalid build options" : "compile error", (int)err,
                 ctx->options, *head ? "; log:\n" : "; empty build log", head);
}

/* The cached program built with these options, or NULL (ctx->lock held). */
static cl_program cached(const ropeqk_ctx *ctx, cl_device_id device, const char *options)
{
    for (rq_program *p = rq_cl(ctx)->programs; p; p = p->next)
        if (p->device == device && strcmp(p->options, options) == 0)
            return p->program;
    return NULL;
}

ropeqk_status rq_get_program(ropeqk_ctx *ctx, cl_device_id device, unsigned ops, cl_program *out)
{
    return rq_get_program_ex(ctx, device, ops, "", out);
}

ropeqk_status rq_get_program_ex(ropeqk_ctx *ctx, cl_device_id device, unsigned ops, const char *extra,
                                cl_program *out)
{
    ropeqk_status st = ROPEQK_SUCCESS;
    /* The whole program serves every operation; an operation alone builds only its kernels
     * (cl/program.cl, RQ_OPS): pocl's first build of the whole text took 2.2 s of a 4.4 s cold first
     * scores call, the scores kernels alone about as long as before attention existed. */
    char options[sizeof ctx->options + 96];
    snprintf(options, sizeof options, ops ? "%s%s -DRQ_OPS=%u" : "%s%s", ctx->options, extra, ops);
    pthread_mutex_lock(&ctx->lock);
    cl_program have = *extra ? NULL : cached(ctx, device, ctx->options); /* extra kernels: not in the whole */
    if (!have)
        have = cached(ctx, device, options);
    if (have) {
        *out = have;
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
    prog = clCreateProgramWithSource(rq_cl(ctx)->context, 1, &src, &len, &err);
    if (err != CL_SUCCESS) {
        st = rq_cl_fail(ctx, err);
        goto done;
    }
    err = clBuildProgram(prog, 1, &device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        keep_log(ctx, prog, device);
        st = rq_cl_fail(ctx, err);
        if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS) {
            build_failure_message(ctx, err);
            st = ROPEQK_ERR_BUILD;
        }
        goto done;
    }
    entry->device = device;
    snprintf(entry->options, sizeof entry->options, "%s", options);
    entry->program = prog;
    entry->next = rq_cl(ctx)->programs;
    rq_cl(ctx)->programs = entry;
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
    rq_program *p = rq_cl(ctx)->programs;
    while (p) {
        rq_program *n = p->next;
        clReleaseProgram(p->program);
        free(p);
        p = n;
    }
    rq_cl(ctx)->programs = NULL;
}

ropeqk_status rq_cl_warmup(ropeqk_ctx *ctx)
{
    cl_program prog;
    return rq_get_program(ctx, rq_cl(ctx)->device, 0, &prog); /* the whole program: every operation */
}
