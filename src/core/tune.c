/* The tuner's driver (ropeqk_tune), for every backend: a coordinate search over the kernel knobs of
 * the context's profile, one kernel family at a time (prefill scores, decode, attention; the
 * backend's host-side crossovers: chunk rows of ragged paged calls, dense decode rows). Each
 * candidate is a library context on the same device and queue with that configuration (the
 * backend's tune_clone): it is built, checked against the fp64 path on a small case (dropped if it
 * fails), then timed as the median of 3 runs after a warm-up on a representative shape (the
 * backend's time_plan; for the crossovers the backend's tune_measure does both). The first
 * candidate of each family is the configuration in effect, so the result is never worse than what
 * the device had, and a budget that runs out keeps the best found so far (a family reached after
 * it ran out only checks the knobs in effect). Compiling dominates on CPU OpenCL drivers (~1 s a
 * candidate).
 * Which knobs each family searches, and which shapes a device takes, is each backend's
 * (tune_candidate, tune_fits: src/opencl/cl_tune.c, src/vulkan/vk_tune.c); which knobs exist, its
 * table (knob.h): the progress lines show the RQ_KNOB_SHOWN ones, and a set environment variable of
 * any cached knob stops the search. */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RQ_TUNE_MAX 64 /* candidates kept per family: more than any backend lists */

static double rqt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef rq_family family;
#define FAM_SCORES RQ_FAM_SCORES
#define FAM_DECODE RQ_FAM_DECODE
#define FAM_ATTN RQ_FAM_ATTN
static const char *const fam_name[] = {"scores", "decode", "attention", "chunk", "dense"};

/* Shapes: the check case is small (fp64 reference in milliseconds); the timed one is what the
 * family is for, kept small enough that a candidate costs well under a second on a CPU device. */
typedef struct {
    int64_t B, Hq, Hkv, Sq, Sk, D;
    bool causal;
} shape;
static const shape check_shape[] = {{1, 4, 2, 33, 70, 64, true}, {1, 8, 2, 1, 300, 128, true}, {1, 4, 2, 40, 70, 64, true}};
static const shape time_shape[] = {{1, 8, 8, 512, 512, 128, false}, {1, 32, 8, 1, 8192, 128, false},
                                   {1, 8, 8, 512, 512, 128, true}};

static void fill(float *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(seed >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
}

/* One run of the family on ctx (host convenience for the check, device buffers for timing). */
static ropeqk_status check_candidate(ropeqk_ctx *c, family f)
{
    const shape *s = &check_shape[f];
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = s->causal;
    p.q_pos_offset = s->Sk - s->Sq;
    p.layout = ROPEQK_HALF_SPLIT;
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->D);
    ropeqk_tensor k = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hkv, s->Sk, s->D);
    size_t nq = (size_t)(s->B * s->Hq * s->Sq * s->D), nk = (size_t)(s->B * s->Hkv * s->Sk * s->D);
    size_t no = (size_t)(s->B * s->Hq * s->Sq) * (size_t)(f == FAM_ATTN ? s->D : s->Sk);
    float *qd = malloc(nq * 4), *kd = malloc(nk * 4), *vd = malloc(nk * 4), *od = malloc(no * 4);
    double *rd = malloc(no * 8);
    ropeqk_status st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (qd && kd && vd && od && rd) {
        fill(qd, nq, 1);
        fill(kd, nk, 2);
        fill(vd, nk, 3);
        double err = INFINITY, lerr = 0;
        int64_t mism = 1;
        if (f == FAM_ATTN) {
            ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->D), o64 = o;
            o64 = ropeqk_tensor_bhsd(ROPEQK_F64, s->B, s->Hq, s->Sq, s->D);
            if (!(st = ropeqk_attention(c, &p, &q, qd, &k, kd, &k, vd, NULL, NULL, &o, od, NULL, NULL)) &&
                !(st = ropeqk_attention_ref(&p, &q, qd, &k, kd, &k, vd, NULL, NULL, &o64, rd, NULL, NULL)))
                st = ropeqk_attention_max_error(&k, vd, &o, od, &o64, rd, NULL, NULL, NULL, NULL, &err, &lerr, &mism);
        } else {
            ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->Sk);
            ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, s->B, s->Hq, s->Sq, s->Sk);
            if (!(st = ropeqk_scores(c, &p, &q, qd, &k, kd, NULL, NULL, &o, od)) &&
                !(st = ropeqk_scores_ref(&p, &q, qd, &k, kd, NULL, NULL, &o64, rd)))
                st = ropeqk_max_error(&p, &q, qd, &k, kd, &o, od, &o64, rd, &err, &mism);
        }
        if (!st && (err > 1e-5 || mism != 0)) {
            rq_set_error("tuner: candidate off the fp64 path (error %.3g, %lld mismatches)", err, (long long)mism);
            st = ROPEQK_ERR_BAD_CONFIG;
        }
    }
    free(qd);
    free(kd);
    free(vd);
    free(od);
    free(rd);
    return st;
}

static ropeqk_status time_candidate(ropeqk_ctx *c, family f, double *ms)
{
    const shape *s = &time_shape[f];
    ropeqk_plan_desc d = {.op = f == FAM_ATTN ? ROPEQK_OP_ATTENTION : ROPEQK_OP_SCORES};
    ropeqk_default_params(&d.params);
    d.params.causal = s->causal;
    d.params.q_pos_offset = s->Sk - s->Sq;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->D);
    d.k = ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hkv, s->Sk, s->D);
    d.v = f == FAM_ATTN ? d.k : (ropeqk_tensor){0};
    d.out = f == FAM_ATTN ? d.q : ropeqk_tensor_bhsd(ROPEQK_F32, s->B, s->Hq, s->Sq, s->Sk);
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(c, &d, &pl);
    if (st)
        return st;
    double t[4];
    st = c->be->time_plan(pl, 4, t);
    if (!st) /* median of runs 1..3 (run 0 warms up) */
        *ms = 1e3 * fmax(fmin(t[1], t[2]), fmin(fmax(t[1], t[2]), t[3]));
    ropeqk_plan_destroy(pl);
    return st;
}

/* The backend's shown knobs, "tq=12 wg=16 ...". */
static void describe(const rq_backend *be, const rq_tuning *t, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < be->n_knobs && n < len; i++)
        if (be->knobs[i].flags & RQ_KNOB_SHOWN)
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%d", n ? " " : "", be->knobs[i].name,
                                  RQ_KNOB_AT(t, &be->knobs[i]));
}

static void say(const ropeqk_ctx *ctx, const ropeqk_tune_params *p, const char *fam, const rq_tuning *t,
                const char *res)
{
    if (!p->progress)
        return;
    char knobs[400], line[520];
    describe(ctx->be, t, knobs, sizeof knobs);
    snprintf(line, sizeof line, "%s %s: %s", fam, knobs, res);
    p->progress(p->user, line);
}

/* The search: one family at a time, each starting from the winners so far; *out = the winners. */
static ropeqk_status search(const ropeqk_ctx *ctx, const ropeqk_tune_params *p, double budget, rq_tuning *out)
{
    const rq_backend *be = ctx->be;
    double t0 = rqt_now();
    bool cpu = ctx->tune.profile == ROPEQK_PROFILE_CPU;
    rq_tuning win = ctx->tune;
    for (int f = 0; f < RQ_FAM_COUNT; f++) {
        if (!(be->tune_families & (1u << f)))
            continue;
        rq_tuning ok[RQ_TUNE_MAX]; /* the candidates that passed, and their times */
        double ok_ms[RQ_TUNE_MAX];
        int n_ok = 0, best = -1;
        /* a family reached with the budget spent runs its first candidate (the knobs in effect) through
         * the check only: one candidate has nothing to be compared with, and timing it can cost more
         * than the whole budget (the dense crossover's shape: ~15 s under the GPU profile on a CPU) */
        const bool spent = rqt_now() - t0 > budget;
        for (int k = 0; n_ok < RQ_TUNE_MAX; k++) {
            rq_tuning t = win;
            if (k > 0 && !be->tune_candidate((rq_family)f, cpu, k, &t))
                break;
            if (k > 0 && (spent || rqt_now() - t0 > budget))
                break; /* out of budget: the best so far stands (the first candidate always runs) */
            /* the plans' own fit test at the timed head dims: a shape the device does not take
             * would run as the plan's fallback and be timed under the wrong name */
            if (f <= FAM_ATTN && !be->tune_fits(ctx, (rq_family)f, &t, time_shape[f].D)) {
                say(ctx, p, fam_name[f], &t, "skipped (the device does not take this shape)");
                continue;
            }
            ropeqk_ctx *c = NULL;
            double ms = 0;
            ropeqk_status st = be->tune_clone(ctx, &t, &c);
            if (!st && f > FAM_ATTN) /* the backend's own check and shape (host-side crossovers) */
                st = be->tune_measure(c, (family)f, spent ? NULL : &ms);
            else if (!st)
                st = check_candidate(c, (family)f);
            if (!st && f <= FAM_ATTN && !spent)
                st = time_candidate(c, (family)f, &ms);
            ropeqk_ctx_destroy(c);
            char res[96];
            if (st)
                snprintf(res, sizeof res, "dropped (%s)", ropeqk_status_string(st));
            else if (spent)
                snprintf(res, sizeof res, "checked, not timed (budget spent)");
            else
                snprintf(res, sizeof res, "%.3f ms", ms);
            say(ctx, p, fam_name[f], &t, res);
            if (st == ROPEQK_ERR_OUT_OF_HOST_MEMORY)
                return st;
            if (st)
                continue;
            ok[n_ok] = t;
            ok_ms[n_ok] = ms;
            if (best < 0 || ms < ok_ms[best])
                best = n_ok;
            n_ok++;
        }
        if (best < 0)
            continue; /* nothing ran: the family keeps the knobs in effect */
        rq_tuning fam_best = ok[best];
        if (be->tune_finish)
            be->tune_finish((rq_family)f, &fam_best, ok, ok_ms, n_ok);
        win = fam_best;
    }
    *out = win;
    return ROPEQK_SUCCESS;
}

ropeqk_status ropeqk_tune(ropeqk_ctx *ctx, const ropeqk_tune_params *params, ropeqk_tuning *best, char *path,
                          size_t path_len)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    /* the knobs the cache holds: an environment override of one would win over every candidate */
    const rq_knob *all[RQ_KNOBS_MAX];
    for (size_t i = 0, n = rq_knobs_all(all); i < n; i++)
        if ((all[i]->flags & RQ_KNOB_CACHED) && all[i]->env && getenv(all[i]->env)) {
            rq_set_error("tuner: %s is set and would override every candidate; unset it to tune", all[i]->env);
            return ROPEQK_ERR_BAD_CONFIG;
        }
    ropeqk_tune_params dflt;
    memset(&dflt, 0, sizeof dflt);
    const ropeqk_tune_params *p = params ? params : &dflt;
    double budget = p->budget_seconds > 0 ? p->budget_seconds : 120.0;
    /* a backend whose candidates share the context's queue holds its lock for the search, as its own
     * host calls do (another thread's calls on ctx wait) */
    rq_tuning win;
    if (ctx->be->tune_lock)
        ctx->be->tune_lock(ctx, true);
    ropeqk_status st = search(ctx, p, budget, &win);
    if (ctx->be->tune_lock)
        ctx->be->tune_lock(ctx, false);
    if (st)
        return st;
    win.profile = ctx->tune.profile;
    if (best)
        rq_tuning_to_api(&win, best);
    if (path && path_len)
        path[0] = '\0';
    if (p->no_write)
        return ROPEQK_SUCCESS;
    char file[3200];
    st = rq_tune_cache_store(&ctx->dev, &win, file, sizeof file);
    if (!st && path && path_len)
        snprintf(path, path_len, "%s", file);
    return st;
}
