/* Device selection and context lifetime. */
#include "ctx.h"
#include "vk/vk.h"

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

bool rq_name_contains(const char *name, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *h = name; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
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
    /* one device list across backends: "opencl:P:D" / "opencl:<name>" are this backend's */
    if (spec && strncasecmp(spec, "opencl:", 7) == 0)
        spec = spec + 7;
    else if (spec && strncasecmp(spec, "vulkan", 6) == 0 && (spec[6] == '\0' || spec[6] == ':')) {
        rq_set_error("%s '%s' names a Vulkan device, not an OpenCL one", source, spec);
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

ropeqk_status rq_cl_fail(ropeqk_ctx *ctx, cl_int err)
{
    if (ctx)
        atomic_store(&ctx->last_cl, err);
    const char *name = ropeqk_opencl_error_name(err);
    rq_set_error("OpenCL error %s (%d)", name ? name : "(unknown code)", (int)err);
    return ROPEQK_ERR_BACKEND;
}

/* A zeroed context with its locks, or NULL. */
static ropeqk_ctx *ctx_alloc(void)
{
    ropeqk_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        free(ctx);
        return NULL;
    }
    if (pthread_mutex_init(&ctx->pool_lock, NULL) != 0) {
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return NULL;
    }
    ctx->pool_lock_ok = true;
    ctx->pool_budget = (size_t)256 << 20;
    ctx->attn_pass_bytes = RQ_ATTN_PASS_BYTES;
    atomic_init(&ctx->last_cl, CL_SUCCESS);
    return ctx;
}

/* What every context does once it has a device, a context and a queue: configuration, the
 * environment's limits, extra build options. On failure destroys ctx. */
static ropeqk_status ctx_finish(ropeqk_ctx *ctx, const ropeqk_tuning *tuning, ropeqk_ctx **out)
{
    ropeqk_status st = rq_tune_for_device(ctx, tuning);
    /* ROPEQK_POOL_BYTES: most bytes of scratch the pool keeps (0 disables it). ROPEQK_MAX_ALLOC: a lower
     * allocation limit than the device's: exercises the split path on small devices' behalf (tests),
     * or keeps the library's scratch small next to an app's own buffers. */
    unsigned long long v = 0;
    int r = st ? 0 : rq_env_u64("ROPEQK_POOL_BYTES", &v);
    if (r > 0)
        ctx->pool_budget = (size_t)v;
    if (r >= 0 && !st)
        r = rq_env_u64("ROPEQK_MAX_ALLOC", &v);
    if (r > 0 && v > 0 && v < ctx->max_alloc)
        ctx->max_alloc = (cl_ulong)v;
    /* ROPEQK_ATTN_PASS_BYTES: most bytes of rotated Q per attention pass (src/attn.c); small values
     * make every query range run in many passes (tests) */
    if (r >= 0 && !st)
        r = rq_env_u64("ROPEQK_ATTN_PASS_BYTES", &v);
    if (r > 0)
        ctx->attn_pass_bytes = (size_t)v;
    if (r < 0)
        st = ROPEQK_ERR_BAD_CONFIG;
    /* extra build options, for debugging and tuning (and for testing the build-failure path) */
    const char *extra = getenv("ROPEQK_BUILD_OPTIONS");
    if (st == ROPEQK_SUCCESS && extra && *extra) {
        size_t used = strlen(ctx->options);
        if (used + 1 + strlen(extra) >= sizeof ctx->options) {
            rq_set_error("ROPEQK_BUILD_OPTIONS: longer than %zu bytes", sizeof ctx->options - used - 2);
            st = ROPEQK_ERR_BAD_CONFIG;
        } else {
            snprintf(ctx->options + used, sizeof ctx->options - used, " %s", extra);
        }
    }
    if (st != ROPEQK_SUCCESS) {
        ropeqk_ctx_destroy(ctx);
        return st;
    }
    *out = ctx;
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_ctx_create(const ropeqk_ctx_params *params, ropeqk_ctx **out)
{
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    ropeqk_ctx_params defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!params)
        params = &defaults;
    const char *spec = params->device && *params->device ? params->device : getenv("ROPEQK_DEVICE");
    int vk_index = -2;
    if (spec && strncasecmp(spec, "vulkan", 6) == 0 && (spec[6] == '\0' || spec[6] == ':')) {
        char *end = NULL;
        vk_index = spec[6] == '\0' ? -1 : (int)strtol(spec + 7, &end, 10);
        if (spec[6] == ':' && (end == spec + 7 || *end || vk_index < 0)) {
            rq_set_error("device '%s': expected 'vulkan' or 'vulkan:N'", spec);
            return ROPEQK_ERR_NO_DEVICE;
        }
        return rq_vk_ctx_open(vk_index, NULL, &params->tuning, out);
    }
    ropeqk_ctx *ctx = ctx_alloc();
    if (!ctx)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    cl_platform_id plat;
    ropeqk_status st = ropeqk_opencl_select_device(params->device, &plat, &ctx->device, NULL, 0);
    /* a name that no OpenCL device has may be a Vulkan device's */
    if (st == ROPEQK_ERR_NO_DEVICE && spec && *spec && strncasecmp(spec, "opencl:", 7) != 0 && !strchr(spec, ':')) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ropeqk_last_error());
        ropeqk_ctx_destroy(ctx);
        st = rq_vk_ctx_open(-1, spec, &params->tuning, out);
        if (st == ROPEQK_ERR_NO_DEVICE)
            rq_set_error("no OpenCL or Vulkan device matches '%s' (%s)", spec, msg);
        return st;
    }
    cl_int err = CL_SUCCESS;
    if (st == ROPEQK_SUCCESS) {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
        ctx->context = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
        /* profiling is cheap and lets callers time the returned events */
        if (err == CL_SUCCESS)
            ctx->queue = clCreateCommandQueue(ctx->context, ctx->device, CL_QUEUE_PROFILING_ENABLE, &err);
        if (err != CL_SUCCESS)
            st = rq_cl_fail(NULL, err);
    }
    if (st != ROPEQK_SUCCESS) {
        ropeqk_ctx_destroy(ctx);
        return st;
    }
    return ctx_finish(ctx, &params->tuning, out);
}

ropeqk_status ropeqk_opencl_ctx_create(const ropeqk_opencl_ctx_params *params, ropeqk_ctx **out)
{
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!params || !params->context || !params->queue)
        return ROPEQK_ERR_NULL_POINTER; /* borrow both */
    ropeqk_ctx *ctx = ctx_alloc();
    if (!ctx)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    cl_int err = clGetCommandQueueInfo(params->queue, CL_QUEUE_DEVICE, sizeof ctx->device, &ctx->device, NULL);
    if (err == CL_SUCCESS)
        err = clRetainContext(params->context);
    if (err == CL_SUCCESS) {
        ctx->context = params->context;
        err = clRetainCommandQueue(params->queue);
        if (err == CL_SUCCESS)
            ctx->queue = params->queue;
    }
    if (err != CL_SUCCESS) {
        ropeqk_ctx_destroy(ctx);
        return rq_cl_fail(NULL, err);
    }
    return ctx_finish(ctx, &params->tuning, out);
}

void ropeqk_ctx_destroy(ropeqk_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->vk) {
        rq_vk_ctx_free(ctx);
        return;
    }
    if (ctx->queue)
        clFinish(ctx->queue);
    rq_scratch_free_all(ctx);
    rq_free_programs(ctx);
    if (ctx->queue)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->context)
        clReleaseContext(ctx->context);
    free(ctx->build_log);
    if (ctx->pool_lock_ok)
        pthread_mutex_destroy(&ctx->pool_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

cl_context ropeqk_opencl_context(const ropeqk_ctx *ctx) { return ctx ? ctx->context : NULL; }
cl_command_queue ropeqk_opencl_queue(const ropeqk_ctx *ctx) { return ctx ? ctx->queue : NULL; }
cl_device_id ropeqk_opencl_device(const ropeqk_ctx *ctx) { return ctx ? ctx->device : NULL; }

int32_t ropeqk_ctx_backend_error(const ropeqk_ctx *ctx, const char **backend)
{
    if (backend)
        *backend = ctx && ctx->vk ? "Vulkan" : "OpenCL";
    return ctx ? atomic_load(&((ropeqk_ctx *)ctx)->last_cl) : 0;
}

size_t ropeqk_ctx_build_log(const ropeqk_ctx *cctx, char *buf, size_t len)
{
    if (buf && len)
        buf[0] = '\0';
    if (!cctx)
        return 0;
    ropeqk_ctx *ctx = (ropeqk_ctx *)cctx; /* the lock is not part of the logical state */
    pthread_mutex_lock(&ctx->lock);
    size_t n = ctx->build_log ? strlen(ctx->build_log) : 0;
    if (buf && len) {
        size_t c = n < len - 1 ? n : len - 1;
        if (c)
            memcpy(buf, ctx->build_log, c);
        buf[c] = '\0';
    }
    pthread_mutex_unlock(&ctx->lock);
    return n;
}

const char *ropeqk_ctx_device_description(const ropeqk_ctx *ctx) { return ctx ? ctx->device_desc : ""; }
const char *ropeqk_ctx_config_source(const ropeqk_ctx *ctx) { return ctx ? ctx->tune.config_source : ""; }

const char *ropeqk_ctx_build_options(const ropeqk_ctx *ctx)
{
    return ctx ? ctx->options : "";
}

ropeqk_status ropeqk_ctx_tuning(const ropeqk_ctx *ctx, ropeqk_tuning *out, const char **profile_source)
{
    if (!ctx || !out)
        return ROPEQK_ERR_NULL_POINTER;
    const rq_tuning *t = &ctx->tune;
    memset(out, 0, sizeof *out);
    out->profile = t->profile;
    out->tq = t->tq;
    out->wg = t->wg;
    out->vk = t->vk;
    out->dkb = t->dkb;
    out->dwg = t->dwg;
    out->decode = t->decode ? 1 : -1;
    out->rot_uwg = t->rot_uwg;
    out->vendor_ext = t->pocl_ext ? 0 : -1;
    out->atq = t->atq;
    out->avk = t->avk;
    out->awg = t->awg;
    out->nv = t->nv;
    if (profile_source)
        *profile_source = t->profile_source;
    return ROPEQK_SUCCESS;
}

const char *ropeqk_profile_name(ropeqk_profile p) { return rq_profile_name(p); }
