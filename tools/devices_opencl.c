/* `ropeqk devices`' OpenCL part: every platform and device (P:D), the default one, each device's
 * configuration, program dump and test build (diag.c); and the CLI's name of an OpenCL context's
 * device. Built only with the OpenCL backend. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PLATFORMS 16
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

/* Platform and device index of a device id ("P:D"), -1 if not found. */
static void device_index(cl_device_id dev, int *pi, int *di)
{
    *pi = *di = -1;
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS)
        return;
    if (np > MAX_PLATFORMS)
        np = MAX_PLATFORMS;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd && d < MAX_DEVICES; d++)
            if (devs[d] == dev) {
                *pi = (int)p;
                *di = (int)d;
                return;
            }
    }
}

static void fmt_bytes(cl_ulong b, char *buf, size_t len)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
}

static const char *type_name(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU)
        return "GPU";
    if (t & CL_DEVICE_TYPE_CPU)
        return "CPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    return "other";
}

static void print_device(cl_device_id dev, int p, int d, bool is_default)
{
    char name[256], vendor[256], version[256], driver[128], mem[32], alloc[32];
    dev_str(dev, CL_DEVICE_NAME, name, sizeof name);
    dev_str(dev, CL_DEVICE_VENDOR, vendor, sizeof vendor);
    dev_str(dev, CL_DEVICE_VERSION, version, sizeof version);
    dev_str(dev, CL_DRIVER_VERSION, driver, sizeof driver);
    cl_uint cu = 0;
    cl_ulong gmem = 0, maxalloc = 0;
    cl_device_type type = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    size_t elen = 0;
    char *exts = NULL;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &elen) == CL_SUCCESS && elen > 0 &&
        (exts = calloc(1, elen + 1)) != NULL &&
        clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, elen, exts, NULL) != CL_SUCCESS)
        exts[0] = '\0';
    fmt_bytes(gmem, mem, sizeof mem);
    fmt_bytes(maxalloc, alloc, sizeof alloc);
    printf("  %c %d:%d  %s\n", is_default ? '*' : ' ', p, d, name);
    printf("         type %s, vendor %s\n", type_name(type), vendor);
    printf("         %s, driver %s\n", version, driver);
    printf("         %u compute units, %s global memory (max allocation %s)\n", cu, mem, alloc);
    printf("         fp16 (cl_khr_fp16): %s, fp64 (cl_khr_fp64): %s\n",
           exts && has_ext(exts, "cl_khr_fp16") ? "yes" : "no",
           exts && has_ext(exts, "cl_khr_fp64") ? "yes" : "no");
    free(exts);
}

int cli_list_opencl(const char *dump_dir, bool build, unsigned nvk)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, plats, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0)) {
        if (nvk)
            return CLI_OK;
        cli_err("devices: no OpenCL platform or Vulkan device found (is an ICD such as pocl-opencl-icd or "
                "mesa-vulkan-drivers installed?); `--device ref` runs the scalar C path");
        return CLI_RUNTIME;
    }
    if (err != CL_SUCCESS) {
        cli_lib_err("devices: clGetPlatformIDs", err, NULL);
        return CLI_RUNTIME;
    }
    if (np > MAX_PLATFORMS)
        np = MAX_PLATFORMS;
    cl_platform_id defp = NULL;
    cl_device_id defd = NULL;
    char why[256] = "";
    ropeqk_status st = ropeqk_opencl_select_device(NULL, &defp, &defd, why, sizeof why);
    unsigned total = 0, failed = 0;
    for (cl_uint p = 0; p < np; p++) {
        char name[256], vendor[256], version[256];
        plat_str(plats[p], CL_PLATFORM_NAME, name, sizeof name);
        plat_str(plats[p], CL_PLATFORM_VENDOR, vendor, sizeof vendor);
        plat_str(plats[p], CL_PLATFORM_VERSION, version, sizeof version);
        printf("platform %u: %s (%s), %s\n", p, name, vendor, version);
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd);
        if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && nd == 0)) {
            printf("    (no devices)\n");
            continue;
        }
        if (err != CL_SUCCESS) {
            printf("    (cannot list devices: %s)\n", ropeqk_status_string(err));
            continue;
        }
        if (nd > MAX_DEVICES)
            nd = MAX_DEVICES;
        for (cl_uint d = 0; d < nd; d++, total++) {
            print_device(devs[d], (int)p, (int)d, st == ROPEQK_SUCCESS && devs[d] == defd);
            if (cli_device_diag((int)p, (int)d, dump_dir, build != 0) != 0)
                failed++;
        }
    }
    if (st == ROPEQK_SUCCESS) {
        int pi, di;
        device_index(defd, &pi, &di);
        printf("default: %d:%d (%s)\n", pi, di, why);
    } else {
        const char *env = getenv("ROPEQK_DEVICE");
        if (env && *env)
            printf("default: none: ROPEQK_DEVICE=%s matches no device (%s)\n", env, ropeqk_status_string(st));
        else
            printf("default: none (%s)\n", ropeqk_status_string(st));
    }
    if (total == 0) {
        cli_err("devices: the OpenCL platforms have no devices");
        return CLI_RUNTIME;
    }
    if (failed) {
        cli_err("devices: %u device(s) failed (configuration%s)", failed,
                build ? ", test build" : dump_dir ? ", program dump" : "");
        return CLI_RUNTIME;
    }
    return st == ROPEQK_SUCCESS ? CLI_OK : CLI_RUNTIME;
}

bool cli_opencl_name(const ropeqk_ctx *ctx, char *buf, size_t len)
{
    cl_device_id d = ropeqk_opencl_device(ctx);
    if (!d)
        return false;
    char name[256], pname[256];
    cl_platform_id plat = NULL;
    int pi, di;
    dev_str(d, CL_DEVICE_NAME, name, sizeof name);
    clGetDeviceInfo(d, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    plat_str(plat, CL_PLATFORM_NAME, pname, sizeof pname);
    device_index(d, &pi, &di);
    snprintf(buf, len, "%d:%d %s (%s)", pi, di, name, pname);
    return true;
}
