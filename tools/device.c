/* The `devices` subcommand (each backend's listing: devices_opencl.c, devices_vulkan.c), and
 * opening the device a subcommand runs on (or the scalar path). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
    unsigned nvk = 0;
#if RQ_HAVE_VULKAN
    nvk = cli_list_vulkan();
#endif
#if RQ_HAVE_OPENCL
    return cli_list_opencl(dump_dir, build != 0, nvk);
#else
    if (dump_dir || build) {
        cli_err("devices: --dump-program and --build concern the OpenCL program; this build has no OpenCL backend");
        return CLI_USAGE;
    }
    if (!nvk) {
        cli_err("devices: no Vulkan device found (is mesa-vulkan-drivers installed?); `--device ref` runs the "
                "scalar C path");
        return CLI_RUNTIME;
    }
    return CLI_OK;
#endif
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
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = spec;
    /* the library resolves the spec across backends (an unknown name may be a Vulkan device's) */
    ropeqk_status st = ropeqk_ctx_create(&cp, &dev->ctx);
    if (st != ROPEQK_SUCCESS) {
        if (st == ROPEQK_ERR_NO_DEVICE && spec)
            cli_err("%s: %s '%s': %s (%s); see `ropeqk devices`", cmd, source, spec, ropeqk_status_string(st),
                    ropeqk_last_error());
        else
            cli_lib_err(cmd, st, NULL);
        return CLI_RUNTIME;
    }
    if (spec)
        snprintf(dev->why, sizeof dev->why, "%s=%s", source, spec);
    else {
        const char *be = "";
        ropeqk_ctx_backend_error(dev->ctx, &be);
        snprintf(dev->why, sizeof dev->why, "the first %s device", be);
    }
#if RQ_HAVE_OPENCL
    if (cli_opencl_name(dev->ctx, dev->name, sizeof dev->name))
        return CLI_OK;
#endif
    snprintf(dev->name, sizeof dev->name, "%s", ropeqk_ctx_device_description(dev->ctx));
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
    cli_error_mark();
    if (dev->ref)
        return ropeqk_scores_ref(p, q, qd, k, kd, qpos, kpos, out, outd);
    return ropeqk_scores(dev->ctx, p, q, qd, k, kd, qpos, kpos, out, outd);
}

ropeqk_status cli_device_attention(cli_device *dev, const ropeqk_params *p, const ropeqk_tensor *q, const void *qd,
                                   const ropeqk_tensor *k, const void *kd, const ropeqk_tensor *v, const void *vd,
                                   const int32_t *qpos, const int32_t *kpos, const ropeqk_tensor *out, float *outd,
                                   const ropeqk_tensor *lse, float *lsed)
{
    cli_error_mark();
    if (dev->ref)
        return ropeqk_attention_ref(p, q, qd, k, kd, v, vd, qpos, kpos, out, outd, lse, lsed);
    return ropeqk_attention(dev->ctx, p, q, qd, k, kd, v, vd, qpos, kpos, out, outd, lse, lsed);
}
