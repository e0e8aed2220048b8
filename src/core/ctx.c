/* Context lifetime and accessors, for every backend: device specs are routed to a backend of the
 * registry (registry.c), which opens the device into the neutral context. */
#include "backend.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

const rq_backend *rq_spec_backend(const char *spec)
{
    for (size_t i = 0; spec && i < rq_backend_count; i++) {
        size_t n = strlen(rq_backends[i]->prefix);
        if (strncasecmp(spec, rq_backends[i]->prefix, n) == 0 && (spec[n] == '\0' || spec[n] == ':'))
            return rq_backends[i];
    }
    return NULL;
}

ropeqk_status rq_backend_fail(const rq_backend *be, ropeqk_ctx *ctx, int32_t code, const char *what)
{
    if (ctx)
        atomic_store(&ctx->last_err, code);
    const char *name = be->error_name(code);
    rq_set_error("%s error %s (%d)%s%s", be->name, name ? name : "(unknown code)", (int)code, what ? " in " : "",
                 what ? what : "");
    return ROPEQK_ERR_BACKEND;
}

void rq_ctx_free(ropeqk_ctx *ctx)
{
    if (!ctx)
        return;
    ctx->be->close(ctx);
    free(ctx->build_log);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

ropeqk_ctx *rq_ctx_alloc(const rq_backend *be)
{
    ropeqk_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        free(ctx);
        return NULL;
    }
    ctx->be = be;
    atomic_init(&ctx->last_err, 0);
    return ctx;
}

/* A context of backend be opened on spec (backend.h's open), or the status. */
static ropeqk_status ctx_open(const rq_backend *be, const char *spec, bool explicit_spec, const ropeqk_tuning *tuning,
                              ropeqk_ctx **out)
{
    ropeqk_ctx *ctx = rq_ctx_alloc(be);
    if (!ctx)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_status st = be->open(ctx, spec, explicit_spec, tuning);
    if (st) {
        rq_ctx_free(ctx);
        return st;
    }
    *out = ctx;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_ctx_configure(ropeqk_ctx *ctx, const ropeqk_tuning *tuning)
{
    ropeqk_status st = rq_tuning_resolve(ctx->be, tuning, &ctx->dev, &ctx->tune);
    if (!st)
        st = ctx->be->build_options(ctx, ctx->options, sizeof ctx->options);
    return st;
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
    if (spec && !*spec)
        spec = NULL;
    /* "<prefix>" or "<prefix>:<rest>": that backend alone */
    const rq_backend *be = rq_spec_backend(spec);
    if (be) {
        size_t n = strlen(be->prefix);
        return ctx_open(be, spec[n] == ':' ? spec + n + 1 : NULL, true, &params->tuning, out);
    }
    /* a bare spec (a name, "P:D") or none: each backend in turn, until one has a matching device */
    char why[768] = "";
    size_t used = 0;
    for (size_t i = 0; i < rq_backend_count; i++) {
        ropeqk_status st = ctx_open(rq_backends[i], spec, false, &params->tuning, out);
        if (st != ROPEQK_ERR_NO_DEVICE)
            return st;
        int w = snprintf(why + used, sizeof why - used, "%s%s", used ? "; " : "", ropeqk_last_error());
        if (w > 0)
            used = (size_t)w < sizeof why - used ? used + (size_t)w : sizeof why - 1;
    }
    if (spec)
        rq_set_error("no device matches '%s' (%s)", spec, why);
    else
        rq_set_error("no device found (%s)", why);
    return ROPEQK_ERR_NO_DEVICE;
}

void ropeqk_ctx_destroy(ropeqk_ctx *ctx) { rq_ctx_free(ctx); }

int32_t ropeqk_ctx_backend_error(const ropeqk_ctx *ctx, const char **backend)
{
    if (backend)
        *backend = ctx ? ctx->be->name : "";
    return ctx ? atomic_load(&((ropeqk_ctx *)ctx)->last_err) : 0;
}

ropeqk_backend ropeqk_ctx_backend(const ropeqk_ctx *ctx) { return ctx ? ctx->be->id : ROPEQK_BACKEND_NONE; }

ropeqk_status ropeqk_ctx_diagnostics(const ropeqk_ctx *ctx, ropeqk_diagnostics *out)
{
    if (!out) {
        rq_set_error("ropeqk_ctx_diagnostics: NULL out");
        return ROPEQK_ERR_NULL_POINTER;
    }
    memset(out, 0, sizeof *out);
    if (ctx) {
        if (ctx->be->diagnostics)
            ctx->be->diagnostics(ctx, out);
        return ROPEQK_SUCCESS;
    }
    /* the process: every backend's messages; the strongest validation state of any (UNAVAILABLE
     * outranks ON: a suite that asks for it must learn that one backend runs without it) */
    for (size_t i = 0; i < rq_backend_count; i++) {
        ropeqk_diagnostics d;
        memset(&d, 0, sizeof d);
        if (!rq_backends[i]->diagnostics)
            continue;
        rq_backends[i]->diagnostics(NULL, &d);
        if (d.messages && !out->messages)
            memcpy(out->first, d.first, sizeof out->first);
        out->messages += d.messages;
        if (d.validation > out->validation)
            out->validation = d.validation;
    }
    return ROPEQK_SUCCESS;
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
const char *ropeqk_ctx_build_options(const ropeqk_ctx *ctx) { return ctx ? ctx->options : ""; }

ropeqk_status ropeqk_ctx_tuning(const ropeqk_ctx *ctx, ropeqk_tuning *out, const char **profile_source)
{
    if (!ctx || !out)
        return ROPEQK_ERR_NULL_POINTER;
    rq_tuning_to_api(&ctx->tune, out);
    if (profile_source)
        *profile_source = ctx->tune.profile_source;
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_ctx_warmup(ropeqk_ctx *ctx)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    return ctx->be->warmup(ctx);
}

const char *ropeqk_profile_name(ropeqk_profile p) { return rq_profile_name(p); }
