/* OpenCL devices and contexts: device selection, contexts opened by the library or on the caller's
 * own cl_context and queue, teardown (the table's open and close), and the OpenCL-only accessors. */
#include "ocl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RQ_MAX_PLATFORMS 16
#define RQ_MAX_DEVICES 64

static bool all_digits(const char *s, const char *end)
{
    if (s == end)
        return false;
    for (; s < end; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* The device `spec` names (NULL: the first device of the first platform); `source` says where the
 * spec came from, for messages. */
static ropeqk_status select_device(const char *spec, const char *source, cl_platform_id *platform,
                                   cl_device_id *device, char *why, size_t why_len)
{
    /* one device list across backends: "opencl:P:D" / "opencl:<name>" are this backend's, another
     * backend's prefix is not */
    if (spec && strncasecmp(spec, "opencl:", 7) == 0)
        spec = spec + 7;
    else if (spec && strcasecmp(spec, "opencl") == 0)
        spec = NULL;
    else if (rq_spec_backend(spec) && rq_spec_backend(spec) != &rq_opencl_backend) {
        rq_set_error("%s '%s' names a %s device, not an OpenCL one", source, spec, rq_spec_backend(spec)->name);
        return ROPEQK_ERR_NO_DEVICE;
    }
    cl_platform_id plats[RQ_MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(RQ_MAX_PLATFORMS, plats, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0)) {
        rq_set_error("no OpenCL platform found (is an ICD such as pocl-opencl-icd installed?)");
        return ROPEQK_ERR_NO_DEVICE;
    }
    if (err != CL_SUCCESS)
        return rq_cl_fail(NULL, err);
    if (np > RQ_MAX_PLATFORMS)
        np = RQ_MAX_PLATFORMS;

    long want_p = -1, want_d = -1;
    const char *colon = spec ? strchr(spec, ':') : NULL;
    if (colon && all_digits(spec, colon) && all_digits(colon + 1, colon + strlen(colon))) {
        want_p = strtol(spec, NULL, 10);
        want_d = strtol(colon + 1, NULL, 10);
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[RQ_MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, RQ_MAX_DEVICES, devs, &nd) != CL_SUCCESS)
            continue;
        if (nd > RQ_MAX_DEVICES)
            nd = RQ_MAX_DEVICES;
        for (cl_uint d = 0; d < nd; d++) {
            bool match;
            if (!spec) {
                match = true;
            } else if (want_p >= 0) {
                match = (long)p == want_p && (long)d == want_d;
            } else {
                char name[256] = "";
                clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
                match = rq_name_contains(name, spec);
            }
            if (match) {
                *platform = plats[p];
                *device = devs[d];
                if (why && why_len)
                    snprintf(why, why_len, spec ? "%s=%s" : "first device of the first platform",
                             source, spec);
                return ROPEQK_SUCCESS;
            }
        }
    }
    rq_set_error("no OpenCL device matches %s '%s'", source, spec ? spec : "");
    return ROPEQK_ERR_NO_DEVICE;
}

ropeqk_status ropeqk_opencl_select_device(const char *spec, cl_platform_id *platform, cl_device_id *device,
                                          char *why, size_t why_len)
{
    if (!platform || !device)
        return ROPEQK_ERR_NULL_POINTER;
    const char *source = "argument";
    if (!spec || !*spec) {
        spec = getenv("ROPEQK_DEVICE");
        source = "ROPEQK_DEVICE";
        if (spec && !*spec)
            spec = NULL;
    }
    return select_device(spec, source, platform, device, why, why_len);
}

/* The impl of a new context, with its pool lock and the defaults of the environment's limits. */
static ropeqk_status impl_alloc(ropeqk_ctx *ctx)
{
    rq_cl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ctx->impl = c;
    if (pthread_mutex_init(&c->pool_lock, NULL) != 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    c->pool_lock_ok = true;
    if (rq_cl_retire_init(ctx))
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    c->pool_budget = (size_t)256 << 20;
    c->attn_pass_bytes = RQ_ATTN_PASS_BYTES;
    return ROPEQK_SUCCESS;
}

/* What every context does once it has a device, a context and a queue: the device's description and
 * configuration, then the environment's limits. */
static ropeqk_status finish(ropeqk_ctx *ctx, const ropeqk_tuning *tuning)
{
    rq_cl_ctx *c = rq_cl(ctx);
    ropeqk_status st = rq_cl_describe_device(ctx);
    if (!st)
        st = rq_ctx_configure(ctx, tuning);
    if (st)
        return st;
    /* ROPEQK_POOL_BYTES: most bytes of scratch the pool keeps (0 disables it). ROPEQK_MAX_ALLOC: a lower
     * allocation limit than the device's: exercises the split path on small devices' behalf (tests),
     * or keeps the library's scratch small next to an app's own buffers. ROPEQK_ATTN_PASS_BYTES: most
     * bytes of rotated Q per attention pass (cl_attn.c); small values make every query range run in many
     * passes (tests). (ROPEQK_DENSE_DECODE is a tuning knob now: src/core/tuning.c.) */
    unsigned long long v = 0;
    int r = rq_env_u64("ROPEQK_POOL_BYTES", &v);
    if (r > 0)
        c->pool_budget = (size_t)v;
    c->dev_max_alloc = c->max_alloc; /* the caller's buffers: the device's limit, not the knob's */
    if (r >= 0)
        r = rq_env_u64("ROPEQK_MAX_ALLOC", &v);
    if (r > 0 && v > 0 && v < c->max_alloc)
        c->max_alloc = (cl_ulong)v;
    if (r >= 0)
        r = rq_env_u64("ROPEQK_ATTN_PASS_BYTES", &v);
    if (r > 0)
        c->attn_pass_bytes = (size_t)v;
    return r < 0 ? ROPEQK_ERR_BAD_CONFIG : ROPEQK_SUCCESS;
}

ropeqk_status rq_cl_open(ropeqk_ctx *ctx, const char *spec, bool explicit_spec, const ropeqk_tuning *tuning)
{
    ropeqk_status st = impl_alloc(ctx);
    if (st)
        return st;
    rq_cl_ctx *c = rq_cl(ctx);
    cl_platform_id plat;
    st = select_device(spec, explicit_spec ? "device 'opencl:'" : "device", &plat, &c->device, NULL, 0);
    if (st)
        return st;
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    c->context = clCreateContext(props, 1, &c->device, NULL, NULL, &err);
    /* profiling is cheap and lets callers time the returned events */
    if (err == CL_SUCCESS)
        c->queue = clCreateCommandQueue(c->context, c->device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS)
        return rq_cl_fail(NULL, err);
    return finish(ctx, tuning);
}

ropeqk_status ropeqk_opencl_ctx_create(const ropeqk_opencl_ctx_params *params, ropeqk_ctx **out)
{
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!params || !params->context || !params->queue)
        return ROPEQK_ERR_NULL_POINTER; /* borrow both */
    ropeqk_ctx *ctx = rq_ctx_alloc(&rq_opencl_backend);
    if (!ctx)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_status st = impl_alloc(ctx);
    if (st) {
        rq_ctx_free(ctx);
        return st;
    }
    rq_cl_ctx *c = rq_cl(ctx);
    cl_int err = clGetCommandQueueInfo(params->queue, CL_QUEUE_DEVICE, sizeof c->device, &c->device, NULL);
    if (err == CL_SUCCESS)
        err = clRetainContext(params->context);
    if (err == CL_SUCCESS) {
        c->context = params->context;
        err = clRetainCommandQueue(params->queue);
        if (err == CL_SUCCESS)
            c->queue = params->queue;
    }
    st = err != CL_SUCCESS ? rq_cl_fail(NULL, err) : finish(ctx, &params->tuning);
    if (st) {
        rq_ctx_free(ctx);
        return st;
    }
    *out = ctx;
    return ROPEQK_SUCCESS;
}

void rq_cl_close(ropeqk_ctx *ctx)
{
    rq_cl_ctx *c = rq_cl(ctx);
    if (!c)
        return;
    if (c->queue)
        clFinish(c->queue);
    rq_cl_graves_free_all(ctx);
    rq_scratch_free_all(ctx);
    rq_free_programs(ctx);
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->context)
        clReleaseContext(c->context);
    if (c->pool_lock_ok)
        pthread_mutex_destroy(&c->pool_lock);
    free(c);
    ctx->impl = NULL;
}

cl_context ropeqk_opencl_context(const ropeqk_ctx *ctx) { return rq_is_cl(ctx) ? rq_cl(ctx)->context : NULL; }
cl_command_queue ropeqk_opencl_queue(const ropeqk_ctx *ctx) { return rq_is_cl(ctx) ? rq_cl(ctx)->queue : NULL; }
cl_device_id ropeqk_opencl_device(const ropeqk_ctx *ctx) { return rq_is_cl(ctx) ? rq_cl(ctx)->device : NULL; }
