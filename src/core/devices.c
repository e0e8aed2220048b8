/* The backend-neutral device listing (ropeqk_list_devices) and the context queries around it: each
 * backend lists its own devices (backend.h's list_devices), the core joins them in the registry's
 * order and marks the default device by ropeqk_ctx_create()'s own routing of $ROPEQK_DEVICE. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ropeqk_status ropeqk_list_devices(ropeqk_device_info *infos, uint32_t cap, uint32_t *count)
{
    if (!count || (!infos && cap))
        return ROPEQK_ERR_NULL_POINTER;
    *count = 0;
    /* the default as ropeqk_ctx_create(NULL) finds it: "<prefix>[:rest]" asks that backend alone,
     * a bare spec (a name, "P:D") or none each backend in turn until one has a match */
    const char *spec = getenv("ROPEQK_DEVICE");
    if (spec && !*spec)
        spec = NULL;
    const rq_backend *route = rq_spec_backend(spec);
    uint32_t total = 0;
    bool have_default = false;
    char why[768] = "";
    size_t used = 0;
    for (size_t i = 0; i < rq_backend_count; i++) {
        const rq_backend *be = rq_backends[i];
        if (!be->list_devices)
            continue;
        const char *bspec = spec;
        bool expl = false;
        if (route) {
            size_t n = strlen(route->prefix);
            bspec = be == route && spec[n] == ':' ? spec + n + 1 : NULL;
            expl = true;
        }
        uint32_t room = total < cap ? cap - total : 0;
        uint32_t n = 0;
        int32_t pick = -1;
        ropeqk_status st = be->list_devices(room ? infos + total : NULL, room, &n, bspec, expl, &pick);
        if (st == ROPEQK_ERR_OUT_OF_HOST_MEMORY)
            return st;
        if (st) {
            int w = snprintf(why + used, sizeof why - used, "%s%s: %s", used ? "; " : "", be->name,
                             ropeqk_last_error());
            if (w > 0)
                used = (size_t)w < sizeof why - used ? used + (size_t)w : sizeof why - 1;
            continue;
        }
        bool wanted = route ? be == route : !have_default;
        if (wanted && pick >= 0 && (uint32_t)pick < n) {
            have_default = true;
            if ((uint32_t)pick < room)
                infos[total + (uint32_t)pick].is_default = 1;
        }
        total += n;
    }
    if (total == 0) {
        rq_set_error("no device found (%s)", used ? why : "this build has no backend");
        return ROPEQK_ERR_NO_DEVICE;
    }
    *count = total;
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_ctx_device_info(const ropeqk_ctx *ctx, ropeqk_device_info *out)
{
    if (!ctx || !out)
        return ROPEQK_ERR_NULL_POINTER;
    memset(out, 0, sizeof *out);
    if (!ctx->be->ctx_device_info) {
        snprintf(out->backend, sizeof out->backend, "%s", ctx->be->name);
        snprintf(out->name, sizeof out->name, "%s", ctx->device_desc);
        out->usable = 1;
        return ROPEQK_SUCCESS;
    }
    return ctx->be->ctx_device_info(ctx, out);
}

const char *ropeqk_ctx_program_source(const ropeqk_ctx *ctx, size_t *len)
{
    const char *src = ctx && ctx->be->program_source ? ctx->be->program_source(len) : NULL;
    if (!src && len)
        *len = 0;
    return src;
}
