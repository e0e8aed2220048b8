/* Kernel configuration of a context: the profile (the class of device the kernels are shaped for)
 * and the tuning knobs. One place decides them, in this order of precedence: environment variable
 * (validated strictly), then the caller's ropeqk_tuning, then the tuning cache, the backend's base
 * (its device heuristics, shipped entries and vendor switch) and the profile's defaults. Which knobs
 * exist, their ranges, variables and defaults (with the measurements that chose them) are the
 * backends' tables (knob.h; src/opencl/cl_knobs.c, src/vulkan/vk_knobs.c): this file names none. The
 * host reads the same rq_tuning fields the backend formats into its kernels' options, so host and
 * kernels cannot disagree on them. */
#include "backend.h"

#include <stdarg.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses an environment integer strictly: unset -> 0, valid -> 1 (*v set), malformed -> -1 with the
 * thread's error message set. */
static int env_int(const char *name, long lo, long hi, long *v)
{
    const char *e = getenv(name);
    if (!e)
        return 0;
    char *end = NULL;
    errno = 0;
    long x = strtol(e, &end, 10);
    bool digits = (e[0] >= '0' && e[0] <= '9') || (e[0] == '-' && e[1] >= '0' && e[1] <= '9');
    if (!digits || *end || errno || x < lo || x > hi) {
        rq_set_error("%s='%s': expected an integer in [%ld, %ld]", name, e, lo, hi);
        return -1;
    }
    *v = x;
    return 1;
}

int rq_env_u64(const char *name, unsigned long long *v)
{
    const char *e = getenv(name);
    if (!e)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(e, &end, 10);
    if (e[0] < '0' || e[0] > '9' || *end || errno) {
        rq_set_error("%s='%s': expected a non-negative integer (bytes)", name, e);
        return -1;
    }
    *v = x;
    return 1;
}

void rq_tuning_defaults(ropeqk_profile prof, rq_tuning *t)
{
    bool cpu = prof != ROPEQK_PROFILE_GPU;
    memset(t, 0, sizeof *t);
    t->profile = cpu ? ROPEQK_PROFILE_CPU : ROPEQK_PROFILE_GPU;
    const rq_knob *all[RQ_KNOBS_MAX];
    for (size_t i = 0, n = rq_knobs_all(all); i < n; i++)
        RQ_KNOB_AT(t, all[i]) = cpu ? all[i]->def_cpu : all[i]->def_gpu;
}

/* Appends " name" to the override list of the source string. */
static void note_override(rq_tuning *t, const char *name)
{
    size_t n = strlen(t->config_source);
    snprintf(t->config_source + n, sizeof t->config_source - n, "%s%s", strstr(t->config_source, "; overrides:") ? " " : "; overrides: ", name);
}

/* Knob k from the caller (0 = default; its kind's meaning of -1) or the environment (overrides),
 * checked against its range and allowed values. */
static ropeqk_status apply(rq_tuning *t, const rq_knob *k, const ropeqk_tuning *req)
{
    int32_t api = k->api_off != RQ_KNOB_NO_API ? RQ_KNOB_API_AT(req, k) : 0;
    ropeqk_status st = rq_knob_check_api(k, api);
    if (st)
        return st;
    if (api != 0) {
        RQ_KNOB_AT(t, k) = k->kind == RQ_KNOB_ONOFF ? api > 0 : api == -1 && k->kind != RQ_KNOB_MODE ? 0 : api;
        if (k->kind == RQ_KNOB_ONOFF)
            note_override(t, k->name); /* "decode", as it always was */
        else if (k->kind != RQ_KNOB_VENDOR)
            note_override(t, k->env + 7); /* "TQ" of "ROPEQK_TQ": the parameter's name */
    }
    long v = 0;
    int r = k->env ? env_int(k->env, k->lo, k->hi, &v) : 0;
    if (r < 0)
        return ROPEQK_ERR_BAD_CONFIG;
    if (r > 0) {
        if (k->ok && !k->ok(v)) {
            rq_set_error("%s='%s': value not allowed", k->env, getenv(k->env));
            return ROPEQK_ERR_BAD_CONFIG;
        }
        RQ_KNOB_AT(t, k) = (int)v;
        note_override(t, k->env);
    }
    return ROPEQK_SUCCESS;
}

/* The knobs before caller and environment overrides: the tuner's cache for this device, else the
 * backend's base (heuristics from the device's properties, shipped entries). Records where they
 * came from. */
static void pick_base(const rq_backend *be, const rq_devinfo *dev, rq_tuning *t)
{
    be->tuning_base(dev, t); /* the backend's device heuristics, and the source note */
    char note[400];
    rq_cache_result c = rq_tune_cache_load(dev, be->knobs, be->n_knobs, t->profile, t, note, sizeof note);
    size_t n = strlen(t->config_source);
    if (c == RQ_CACHE_OK)
        snprintf(t->config_source, sizeof t->config_source, "cache (%s)", note);
    else if (c != RQ_CACHE_NONE)
        snprintf(t->config_source + n, sizeof t->config_source - n, "; %s", note);
}

ropeqk_status rq_tuning_resolve(const rq_backend *be, const ropeqk_tuning *req, const rq_devinfo *dev, rq_tuning *t)
{
    ropeqk_tuning none;
    memset(&none, 0, sizeof none);
    if (!req)
        req = &none;
    ropeqk_profile prof = req->profile;
    char src[96];
    if (prof != ROPEQK_PROFILE_AUTO && prof != ROPEQK_PROFILE_CPU && prof != ROPEQK_PROFILE_GPU) {
        rq_set_error("tuning: unknown profile %d", (int)prof);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    snprintf(src, sizeof src, "parameter");
    const char *e = getenv("ROPEQK_PROFILE");
    if (e) {
        if (!strcmp(e, "cpu"))
            prof = ROPEQK_PROFILE_CPU;
        else if (!strcmp(e, "gpu"))
            prof = ROPEQK_PROFILE_GPU;
        else if (!strcmp(e, "auto"))
            prof = ROPEQK_PROFILE_AUTO;
        else {
            rq_set_error("ROPEQK_PROFILE='%s': expected cpu, gpu or auto", e);
            return ROPEQK_ERR_BAD_CONFIG;
        }
        snprintf(src, sizeof src, "ROPEQK_PROFILE=%s", e);
    }
    if (prof == ROPEQK_PROFILE_AUTO) {
        prof = dev->cpu ? ROPEQK_PROFILE_CPU : ROPEQK_PROFILE_GPU;
        snprintf(src, sizeof src, "auto: %s device", dev->cpu ? "CPU" : "non-CPU");
    }
    rq_tuning_defaults(prof, t);
    snprintf(t->profile_source, sizeof t->profile_source, "%s", src);
    pick_base(be, dev, t);
    const rq_knob *all[RQ_KNOBS_MAX];
    ropeqk_status st;
    for (size_t i = 0, n = rq_knobs_all(all); i < n; i++)
        if ((st = apply(t, all[i], req)))
            return st;
    /* knobs that hold together (checked whether or not their kernel is on, so that a configuration
     * is valid or not whatever else is set) */
    char why[400];
    if (!rq_tuning_consistent(t, why, sizeof why)) {
        rq_set_error("tuning: %s", why);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    be->tuning_fit(dev, t);
    return ROPEQK_SUCCESS;
}

void rq_tuning_to_api(const rq_tuning *t, ropeqk_tuning *o)
{
    memset(o, 0, sizeof *o);
    o->profile = t->profile;
    const rq_knob *all[RQ_KNOBS_MAX];
    for (size_t i = 0, n = rq_knobs_all(all); i < n; i++)
        if (all[i]->api_off != RQ_KNOB_NO_API)
            RQ_KNOB_API_AT(o, all[i]) = rq_knob_report(all[i], RQ_KNOB_AT(t, all[i]));
}

void rq_tuning_note(rq_tuning *t, const char *fmt, ...)
{
    size_t n = strlen(t->config_source);
    if (n + 2 >= sizeof t->config_source)
        return;
    snprintf(t->config_source + n, sizeof t->config_source - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->config_source + n + 2, sizeof t->config_source - n - 2, fmt, ap);
    va_end(ap);
}
