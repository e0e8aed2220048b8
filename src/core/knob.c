/* The backends' knob tables (knob.h) seen as one list, their API values, and the public key/value
 * view of the tuning (ropeqk.h: ropeqk_knob_count, ropeqk_knob_get_info, ropeqk_tuning_get,
 * ropeqk_tuning_set, ropeqk_ctx_knob): names instead of ropeqk_tuning's fields, so that a caller
 * can list which knobs a backend has. */
#include "backend.h"

#include <string.h>
#include <strings.h>

const char *rq_profile_name(ropeqk_profile p)
{
    return p == ROPEQK_PROFILE_CPU ? "cpu" : p == ROPEQK_PROFILE_GPU ? "gpu" : "auto";
}

const rq_knob *rq_knob_find(const rq_knob *const *all, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}

size_t rq_knobs_all(const rq_knob **out)
{
    size_t n = 0;
    for (size_t b = 0; b < rq_backend_count; b++)
        for (size_t i = 0; i < rq_backends[b]->n_knobs && n < RQ_KNOBS_MAX; i++)
            if (!rq_knob_find(out, n, rq_backends[b]->knobs[i].name))
                out[n++] = &rq_backends[b]->knobs[i];
    return n;
}

ropeqk_status rq_knob_check_api(const rq_knob *k, int32_t v)
{
    bool good;
    switch (k->kind) {
    case RQ_KNOB_OFF: good = v == -1 || (v >= k->lo && v <= k->hi && (!k->ok || k->ok(v))); break;
    case RQ_KNOB_ONOFF: good = v == 1 || v == -1; break;
    case RQ_KNOB_VENDOR: good = v == -1; break;
    default: good = v >= k->lo && v <= k->hi && (!k->ok || k->ok(v)); break;
    }
    if (v == 0 || good)
        return ROPEQK_SUCCESS;
    if (k->kind == RQ_KNOB_INT || k->kind == RQ_KNOB_OFF)
        rq_set_error("tuning: %s-equivalent value %d is out of range", k->env ? k->env : k->name, (int)v);
    else
        rq_set_error("tuning: %s must be %s", k->name, k->allowed);
    return ROPEQK_ERR_BAD_CONFIG;
}

int32_t rq_knob_report(const rq_knob *k, int stored)
{
    switch (k->kind) {
    case RQ_KNOB_OFF: return stored ? stored : -1;
    case RQ_KNOB_ONOFF: return stored ? 1 : -1;
    case RQ_KNOB_VENDOR: return stored ? 0 : -1;
    default: return stored;
    }
}

bool rq_tuning_consistent(const rq_tuning *t, char *why, size_t len)
{
    for (size_t b = 0; b < rq_backend_count; b++)
        if (rq_backends[b]->tuning_check && !rq_backends[b]->tuning_check(t, why, len))
            return false;
    return true;
}

/* ---- the public key/value view ---- */

/* The backend called `backend`: its prefix ("opencl") or name ("OpenCL"), either case. */
static const rq_backend *backend_named(const char *backend)
{
    for (size_t b = 0; backend && b < rq_backend_count; b++)
        if (!strcasecmp(backend, rq_backends[b]->prefix) || !strcasecmp(backend, rq_backends[b]->name))
            return rq_backends[b];
    return NULL;
}

int32_t ropeqk_knob_count(const char *backend)
{
    const rq_backend *be = backend_named(backend);
    return be ? (int32_t)be->n_knobs : -1;
}

ropeqk_status ropeqk_knob_get_info(const char *backend, int32_t index, ropeqk_knob *info)
{
    if (!backend || !info)
        return ROPEQK_ERR_NULL_POINTER;
    const rq_backend *be = backend_named(backend);
    if (!be) {
        rq_set_error("knobs: no backend '%s' in this build", backend);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (index < 0 || (size_t)index >= be->n_knobs) {
        rq_set_error("knobs: %s has %zu knobs, not index %d", be->name, be->n_knobs, (int)index);
        return ROPEQK_ERR_BAD_PARAM;
    }
    const rq_knob *k = &be->knobs[index];
    *info = (ropeqk_knob){.name = k->name, .env = k->env, .min = k->lo, .max = k->hi, .allowed = k->allowed,
                          .default_cpu = k->def_cpu, .default_gpu = k->def_gpu,
                          .in_struct = k->api_off != RQ_KNOB_NO_API, .doc = k->doc};
    return ROPEQK_SUCCESS;
}

/* The knob called name with a ropeqk_tuning field (message set when there is none). */
static const rq_knob *field_knob(const char *name)
{
    const rq_knob *all[RQ_KNOBS_MAX];
    const rq_knob *k = rq_knob_find(all, rq_knobs_all(all), name);
    if (!k)
        rq_set_error("tuning: no knob '%s' in this build (ropeqk_knob_get_info lists them)", name);
    else if (k->api_off == RQ_KNOB_NO_API)
        rq_set_error("tuning: knob '%s' has no ropeqk_tuning field (environment only: %s)", name, k->env);
    return k && k->api_off != RQ_KNOB_NO_API ? k : NULL;
}

ropeqk_status ropeqk_tuning_get(const ropeqk_tuning *t, const char *name, int32_t *value)
{
    if (!t || !name || !value)
        return ROPEQK_ERR_NULL_POINTER;
    const rq_knob *k = field_knob(name);
    if (!k)
        return ROPEQK_ERR_BAD_PARAM;
    *value = RQ_KNOB_API_AT(t, k);
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_tuning_set(ropeqk_tuning *t, const char *name, int32_t value)
{
    if (!t || !name)
        return ROPEQK_ERR_NULL_POINTER;
    const rq_knob *k = field_knob(name);
    if (!k)
        return ROPEQK_ERR_BAD_PARAM;
    ropeqk_status st = rq_knob_check_api(k, value);
    if (!st)
        RQ_KNOB_API_AT(t, k) = value;
    return st;
}

ropeqk_status ropeqk_ctx_knob(const ropeqk_ctx *ctx, const char *name, int32_t *value)
{
    if (!ctx || !name || !value)
        return ROPEQK_ERR_NULL_POINTER;
    for (size_t i = 0; i < ctx->be->n_knobs; i++)
        if (!strcmp(ctx->be->knobs[i].name, name)) {
            *value = rq_knob_report(&ctx->be->knobs[i], RQ_KNOB_AT(&ctx->tune, &ctx->be->knobs[i]));
            return ROPEQK_SUCCESS;
        }
    rq_set_error("tuning: the %s backend has no knob '%s' (ropeqk_knob_get_info lists them)", ctx->be->name, name);
    return ROPEQK_ERR_BAD_PARAM;
}
