/* The OpenCL backend's part of the neutral device listing (ropeqk_list_devices,
 * ropeqk_ctx_device_info; src/core/devices.c): every platform's devices as "opencl:P:D", described
 * from clGetDeviceInfo, and the device a spec selects (ropeqk_opencl_select_device's rule). */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLATFORMS 16 /* as cl_backend.c's selection: the same indices */
#define MAX_DEVICES 64

static void plat_str(cl_platform_id p, cl_platform_info what, char *buf, size_t len)
{
    buf[0] = '\0';
    if (clGetPlatformInfo(p, what, len - 1, buf, NULL) != CL_SUCCESS)
        snprintf(buf, len, "?");
    buf[len - 1] = '\0';
}

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t len)
{
    buf[0] = '\0';
    if (clGetDeviceInfo(d, what, len - 1, buf, NULL) != CL_SUCCESS)
        snprintf(buf, len, "?");
    buf[len - 1] = '\0';
}

/* Whole-word search in a space-separated extension list. */
static bool has_ext(const char *exts, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = exts; (p = strstr(p, name)) != NULL; p += n)
        if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

/* Device d (index di) of platform plat (index pi) into *o. ROPEQK_ERR_OUT_OF_HOST_MEMORY when its
 * extension list cannot be read into memory. */
static ropeqk_status describe(cl_platform_id plat, int pi, cl_device_id d, int di, ropeqk_device_info *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->backend, sizeof o->backend, "OpenCL");
    snprintf(o->device, sizeof o->device, "opencl:%d:%d", pi, di);
    char pname[256], pvendor[256], pversion[256];
    plat_str(plat, CL_PLATFORM_NAME, pname, sizeof pname);
    plat_str(plat, CL_PLATFORM_VENDOR, pvendor, sizeof pvendor);
    plat_str(plat, CL_PLATFORM_VERSION, pversion, sizeof pversion);
    snprintf(o->platform, sizeof o->platform, "%.90s (%.50s), %.110s", pname, pvendor, pversion);
    dev_str(d, CL_DEVICE_NAME, o->name, sizeof o->name);
    dev_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof o->vendor);
    dev_str(d, CL_DEVICE_VERSION, o->version, sizeof o->version);
    dev_str(d, CL_DRIVER_VERSION, o->driver, sizeof o->driver);
    cl_uint cu = 0;
    cl_ulong gmem = 0, maxalloc = 0;
    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    o->compute_units = cu;
    o->global_mem = gmem;
    o->max_alloc = maxalloc;
    o->type = type & CL_DEVICE_TYPE_GPU           ? ROPEQK_DEVICE_GPU
              : type & CL_DEVICE_TYPE_CPU         ? ROPEQK_DEVICE_CPU
              : type & CL_DEVICE_TYPE_ACCELERATOR ? ROPEQK_DEVICE_ACCELERATOR
                                                  : ROPEQK_DEVICE_OTHER;
    o->usable = 1; /* the library opens any device the platform lists (cl_backend.c) */
    size_t elen = 0;
    char *exts = NULL;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &elen) == CL_SUCCESS && elen > 0) {
        if (!(exts = calloc(1, elen + 1))) {
            rq_set_error("out of host memory reading the extensions of OpenCL device %d:%d", pi, di);
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        }
        if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, elen, exts, NULL) != CL_SUCCESS)
            exts[0] = '\0';
    }
    snprintf(o->details, sizeof o->details, "fp16 (cl_khr_fp16): %s, fp64 (cl_khr_fp64): %s",
             exts && has_ext(exts, "cl_khr_fp16") ? "yes" : "no", exts && has_ext(exts, "cl_khr_fp64") ? "yes" : "no");
    free(exts);
    return ROPEQK_SUCCESS;
}

static ropeqk_status platforms(cl_platform_id *plats, cl_uint *np)
{
    *np = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, plats, np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && *np == 0)) {
        *np = 0;
        rq_set_error("no OpenCL platform found (is an ICD such as pocl-opencl-icd installed?)");
        return ROPEQK_ERR_NO_DEVICE;
    }
    if (err != CL_SUCCESS)
        return rq_cl_fail(NULL, err);
    if (*np > MAX_PLATFORMS)
        *np = MAX_PLATFORMS;
    return ROPEQK_SUCCESS;
}

static cl_uint devices(cl_platform_id p, cl_device_id *devs)
{
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS)
        return 0;
    return nd > MAX_DEVICES ? MAX_DEVICES : nd;
}

ropeqk_status rq_cl_list_devices(ropeqk_device_info *infos, uint32_t cap, uint32_t *count, const char *spec,
                                 bool explicit_spec, int32_t *pick)
{
    *count = 0;
    *pick = -1;
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    ropeqk_status st = platforms(plats, &np);
    if (st)
        return st;
    /* the device open() would take: the same selection, as a spec that names this backend (never
     * NULL, so $ROPEQK_DEVICE is not read again) */
    char full[512];
    if (explicit_spec || !spec)
        snprintf(full, sizeof full, spec ? "opencl:%s" : "opencl", spec ? spec : "");
    else
        snprintf(full, sizeof full, "%s", spec);
    cl_platform_id sp = NULL;
    cl_device_id sd = NULL;
    bool selected = ropeqk_opencl_select_device(full, &sp, &sd, NULL, 0) == ROPEQK_SUCCESS;
    uint32_t n = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = devices(plats[p], devs);
        for (cl_uint d = 0; d < nd; d++, n++) {
            if (selected && devs[d] == sd)
                *pick = (int32_t)n;
            if (n < cap && (st = describe(plats[p], (int)p, devs[d], (int)d, &infos[n])))
                return st;
        }
    }
    if (n == 0) {
        rq_set_error("the OpenCL platforms have no devices");
        return ROPEQK_ERR_NO_DEVICE;
    }
    *count = n;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_cl_ctx_device_info(const ropeqk_ctx *ctx, ropeqk_device_info *out)
{
    cl_device_id dev = rq_cl(ctx)->device;
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (platforms(plats, &np) == ROPEQK_SUCCESS)
        for (cl_uint p = 0; p < np; p++) {
            cl_device_id devs[MAX_DEVICES];
            cl_uint nd = devices(plats[p], devs);
            for (cl_uint d = 0; d < nd; d++)
                if (devs[d] == dev)
                    return describe(plats[p], (int)p, dev, (int)d, out);
        }
    /* not among the platforms' devices (a sub-device of the caller's): described, without a string */
    cl_platform_id plat = NULL;
    cl_int err = clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    if (err != CL_SUCCESS)
        return rq_cl_fail((ropeqk_ctx *)ctx, err);
    ropeqk_status st = describe(plat, -1, dev, -1, out);
    out->device[0] = '\0';
    return st;
}
