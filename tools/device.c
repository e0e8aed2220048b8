/* The `devices` subcommand, and opening the device a subcommand runs on (or the scalar path). */
#include "cli.h"
#include "ropeqk_vulkan.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

bool cli_no_platform(void)
{
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    return err != CL_SUCCESS || np == 0;
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

/* The Vulkan devices ("vulkan:N" for --device), printed first; returns how many. */
static unsigned list_vulkan(void)
{
    ropeqk_vulkan_device_info info[16];
    uint32_t n = 0;
    ropeqk_status st = ropeqk_vulkan_list_devices(info, 16, &n);
    if (st != ROPEQK_SUCCESS) {
        printf("vulkan: none (%s)\n", ropeqk_last_error());
        return 0;
    }
    printf("vulkan: %u device%s\n", n, n == 1 ? "" : "s");
    for (uint32_t i = 0; i < n && i < 16; i++) {
        printf("    vulkan:%u  %s\n", i, info[i].name);
        printf("         type %s, Vulkan %u.%u.%u, %s\n", info[i].cpu ? "CPU" : "GPU/other",
               VK_API_VERSION_MAJOR(info[i].api_version), VK_API_VERSION_MINOR(info[i].api_version),
               VK_API_VERSION_PATCH(info[i].api_version), info[i].driver);
        printf("         usable: %s, cooperative matrices (VK_KHR_cooperative_matrix): %s\n",
               info[i].usable ? "yes" : "no (no compute queue or no VK_KHR_push_descriptor)",
               info[i].cooperative_matrix ? "yes (not used yet)" : "no");
        char spec[32];
        snprintf(spec, sizeof spec, "vulkan:%u", i);
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.device = spec;
        ropeqk_ctx *ctx = NULL;
        if (info[i].usable && ropeqk_ctx_create(&cp, &ctx) == ROPEQK_SUCCESS) {
            printf("         config: %s\n", ropeqk_ctx_config_source(ctx));
            printf("         options: %s\n", ropeqk_ctx_build_options(ctx));
        } else if (info[i].usable) {
            printf("         config: unavailable: %s\n", ropeqk_last_error());
        }
        ropeqk_ctx_destroy(ctx);
    }
    return n;
}

int cmd_devices(int argc, char **argv)
{
    const char *dump_dir = NULL;
    int build = 0;
    const cli_opt opts[] = {
        {"--dump-program", OPT_STR, &dump_dir, "DIR",
         "write each device's exact program text and build options to DIR/<P>-<D>.cl and .options", 0, 0, 0,
         NULL, NULL},
        {"--build", OPT_FLAG, &build, NULL, "test-build the program on every device: OK or FAILED with the log",
         0, 0, 0, NULL, NULL},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    bool help = false;
    int r = cli_parse("devices", opts, nopts, argc, argv, &help);
    if (r != CLI_OK)
        return r;
    if (help) {
        cli_print_help(stdout, "ropeqk devices",
                       "Lists the Vulkan devices (vulkan:N for --device and $ROPEQK_DEVICE; `vulkan` = the\n"
                       "first usable one), then every OpenCL platform and device (P:D, or opencl:P:D), and\n"
                       "marks with '*' the default OpenCL device: $ROPEQK_DEVICE if set, else the first\n"
                       "device of the first platform. A name substring selects the first OpenCL device\n"
                       "with that name, else the first Vulkan one. For each device it prints the kernel profile in\n"
                       "effect and where it came from ($ROPEQK_PROFILE=cpu|gpu|auto, else the device type)\n"
                       "and the build options on a line starting with `options:`. Exit status 1 when there\n"
                       "is no OpenCL platform, or when a --build or --dump-program step failed.",
                       opts, nopts);
        return CLI_OK;
    }
    unsigned nvk = list_vulkan();
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

int cli_device_open(const char *cmd, const char *spec, bool allow_ref, cli_device *dev)
{
    memset(dev, 0, sizeof *dev);
    const char *source = "--device";
    if (!spec || !*spec) {
        spec = getenv("ROPEQK_DEVICE");
        source = "ROPEQK_DEVICE";
        if (spec && !*spec)
            spec = NULL;
    }
    if (spec && strcasecmp(spec, "ref") == 0) {
        if (!allow_ref) {
            cli_err("%s: %s=ref: this command compares a device with the scalar path; name an OpenCL device",
                    cmd, source);
            return CLI_USAGE;
        }
        dev->ref = true;
        snprintf(dev->name, sizeof dev->name, "scalar reference path (host C, fp64)");
        snprintf(dev->why, sizeof dev->why, "%s=ref", source);
        return CLI_OK;
    }
    bool want_vk = spec && strncasecmp(spec, "vulkan", 6) == 0 && (spec[6] == '\0' || spec[6] == ':');
    cl_platform_id plat = NULL;
    cl_device_id d = NULL;
    ropeqk_status st = ROPEQK_ERR_NO_DEVICE;
    if (!want_vk && !cli_no_platform())
        st = ropeqk_opencl_select_device(spec, &plat, &d, dev->why, sizeof dev->why);
    if (st != ROPEQK_SUCCESS && !want_vk && !spec) {
        cli_err("%s: no OpenCL device found; use --device vulkan for a Vulkan device or --device ref for the "
                "scalar C path", cmd);
        return CLI_RUNTIME;
    }
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = spec;
    /* the library resolves the spec across backends (an unknown name may be a Vulkan device's) */
    st = ropeqk_ctx_create(&cp, &dev->ctx);
    if (st != ROPEQK_SUCCESS) {
        if (st == ROPEQK_ERR_NO_DEVICE && spec)
            cli_err("%s: %s '%s': %s (%s); see `ropeqk devices`", cmd, source, spec, ropeqk_status_string(st),
                    ropeqk_last_error());
        else
            cli_lib_err(cmd, st, NULL);
        return CLI_RUNTIME;
    }
    if (ropeqk_vulkan_device(dev->ctx)) {
        snprintf(dev->name, sizeof dev->name, "%s", ropeqk_ctx_device_description(dev->ctx));
        snprintf(dev->why, sizeof dev->why, "%s=%s", source, spec);
        return CLI_OK;
    }
    char name[256], pname[256];
    int pi, di;
    dev_str(ropeqk_opencl_device(dev->ctx), CL_DEVICE_NAME, name, sizeof name);
    clGetDeviceInfo(ropeqk_opencl_device(dev->ctx), CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    plat_str(plat, CL_PLATFORM_NAME, pname, sizeof pname);
    device_index(ropeqk_opencl_device(dev->ctx), &pi, &di);
    snprintf(dev->name, sizeof dev->name, "%d:%d %s (%s)", pi, di, name, pname);
    return CLI_OK;
}

void cli_device_close(cli_device *dev)
{
    if (!dev)
        return;
    ropeqk_ctx_destroy(dev->ctx);
    dev->ctx = NULL;
}

ropeqk_status cli_device_scores(cli_device *dev, const ropeqk_params *p, const ropeqk_tensor *q, const void *qd,
                                const ropeqk_tensor *k, const void *kd, const int32_t *qpos, const int32_t *kpos,
                                const ropeqk_tensor *out, float *outd)
{
    if (dev->ref)
        return ropeqk_scores_ref(p, q, qd, k, kd, qpos, kpos, out, outd);
    return ropeqk_scores(dev->ctx, p, q, qd, k, kd, qpos, kpos, out, outd);
}

ropeqk_status cli_device_attention(cli_device *dev, const ropeqk_params *p, const ropeqk_tensor *q, const void *qd,
                                   const ropeqk_tensor *k, const void *kd, const ropeqk_tensor *v, const void *vd,
                                   const int32_t *qpos, const int32_t *kpos, const ropeqk_tensor *out, float *outd,
                                   const ropeqk_tensor *lse, float *lsed)
{
    if (dev->ref)
        return ropeqk_attention_ref(p, q, qd, k, kd, v, vd, qpos, kpos, out, outd, lse, lsed);
    return ropeqk_attention(dev->ctx, p, q, qd, k, kd, v, vd, qpos, kpos, out, outd, lse, lsed);
}
