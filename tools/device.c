/* Opening the device a subcommand runs on (or the scalar path), on any backend, and running the
 * scores and attention there. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
            cli_err("%s: %s=ref: this command compares a device with the scalar path; name a device (`ropeqk devices`)",
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
    /* "<device string> <description>": "opencl:0:0 NVIDIA H200 (NVIDIA CUDA, driver 580.95)" */
    ropeqk_device_info info;
    const char *desc = ropeqk_ctx_device_description(dev->ctx);
    if (ropeqk_ctx_device_info(dev->ctx, &info) == ROPEQK_SUCCESS && info.device[0])
        snprintf(dev->name, sizeof dev->name, "%s %s", info.device, desc);
    else
        snprintf(dev->name, sizeof dev->name, "%s", desc);
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
