/* The tuner (ropeqk_tune): a coordinate search over the kernel knobs of the context's profile, one
 * kernel family at a time (prefill scores, the decode kernel, attention). Each candidate is a
 * library context on the same OpenCL context and queue with that configuration: it is built,
 * checked against the fp64 path on a small case (dropped if it fails), then timed as the median of
 * 3 runs after a warm-up on a representative shape. The first candidate of each family is the
 * configuration in effect, so the result is never worse than what the device had, and a budget
 * that runs out keeps the best found so far. Compiling dominates on pocl (~1 s a candidate). */
#include "ctx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef enum { FAM_SCORES, FAM_DECODE, FAM_ATTN } family;
static const char *const fam_name[] = {"scores", "decode", "attention"};

/* Shapes: the check case is small (fp64 reference in milliseconds); the timed one is what the
 * family is for, kept small enough that a candidate costs well under a second on pocl. */
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
    cl_int e = CL_SUCCESS;
    cl_mem b[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {ropeqk_tensor_extent(&d.q), ropeqk_tensor_extent(&d.k), ropeqk_tensor_extent(&d.out)};
    for (int i = 0; i < 3 && !e; i++) {
        b[i] = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes[i], NULL, &e);
        float z = 0.01f;
        if (!e && i < 2)
            e = clEnqueueFillBuffer(c->queue, b[i], &z, 4, 0, bytes[i], 0, NULL, NULL);
    }
    double t[4];
    ropeqk_opencl_args a = {.q = {b[0], 0}, .k = {b[1], 0}, .v = {b[1], 0}, .out = {b[2], 0}};
    for (int r = 0; r < 4 && !e && !st; r++) {
        double t0 = now_s();
        st = ropeqk_opencl_plan_enqueue(pl, c->queue, &a, NULL, 0, NULL, NULL);
        e = clFinish(c->queue);
        t[r] = now_s() - t0;
    }
    if (!st && e)
        st = rq_cl_fail(c, e);
    if (!st) { /* median of runs 1..3 (run 0 warms up) */
        double x = t[1], y = t[2], z = t[3];
        *ms = 1e3 * fmax(fmin(x, y), fmin(fmax(x, y), z));
    }
    for (int i = 0; i < 3; i++)
        if (b[i])
            clReleaseMemObject(b[i]);
    ropeqk_plan_destroy(pl);
    return st;
}

/* Candidate k of family f for the profile, written over t's knobs; false past the last. The first
 * candidate (k = 0) is t itself. */
static bool candidate(family f, bool cpu, int k, rq_tuning *t)
{
    if (k == 0)
        return true;
    k--;
    if (f == FAM_SCORES) {
        /* CPU: (tq, nv) pairs; 16 rows of two vectors would not fit 32 zmm registers */
        static const int ctq[] = {8, 12, 16}, cnv[] = {2, 2, 1}, cvk[] = {8, 16}, cwg[] = {8, 16};
        static const int gtq[] = {1, 2, 4, 8}, gvk[] = {1, 4}, gwg[] = {32, 64, 128};
        if (cpu ? k >= 12 : k >= 24)
            return false;
        t->tq = cpu ? ctq[k % 3] : gtq[k % 4];
        t->nv = cpu ? cnv[k % 3] : 1;
        t->vk = cpu ? cvk[(k / 3) % 2] : gvk[(k / 4) % 2];
        t->wg = cpu ? cwg[k / 6] : gwg[k / 8];
    } else if (f == FAM_DECODE) {
        static const int dkb[] = {32, 64, 128}, dwg[] = {1, 2};
        if (!cpu || k >= 6)
            return false;
        t->dkb = dkb[k % 3];
        t->dwg = dwg[k / 3];
    } else {
        static const int catq[] = {2, 4, 8}, cavk[] = {8, 16};
        static const int gatq[] = {1, 2}, gavk[] = {1, 4}, gawg[] = {32, 64};
        if (cpu ? k >= 6 : k >= 8)
            return false;
        t->atq = cpu ? catq[k % 3] : gatq[k % 2];
        t->avk = cpu ? cavk[k / 3] : gavk[(k / 2) % 2];
        if (!cpu)
            t->awg = gawg[k / 4];
    }
    return true;
}

static void to_api(const rq_tuning *t, ropeqk_tuning *o)
{
    memset(o, 0, sizeof *o);
    o->profile = t->profile;
    o->tq = t->tq, o->wg = t->wg, o->vk = t->vk, o->dkb = t->dkb, o->dwg = t->dwg;
    o->decode = t->decode ? 1 : -1;
    o->rot_uwg = t->rot_uwg, o->atq = t->atq, o->avk = t->avk, o->awg = t->awg, o->nv = t->nv;
    o->vendor_ext = t->pocl_ext ? 0 : -1;
}

static void say(const ropeqk_tune_params *p, const char *fmt, const char *fam, const rq_tuning *t, const char *res)
{
    if (!p->progress)
        return;
    char line[256];
    snprintf(line, sizeof line, fmt, fam, t->tq, t->vk, t->nv, t->wg, t->dkb, t->dwg, t->atq, t->avk, t->awg, res);
    p->progress(p->user, line);
}

ropeqk_status ropeqk_tune(ropeqk_ctx *ctx, const ropeqk_tune_params *params, ropeqk_tuning *best, char *path,
                          size_t path_len)
{
    if (!ctx)
        return ROPEQK_ERR_NULL_POINTER;
    if (ctx->vk) {
        rq_set_error("tuner: the Vulkan backend has fixed shader shapes so far; nothing to tune");
        return ROPEQK_ERR_BAD_PARAM;
    }
    static const char *const env[] = {"ROPEQK_TQ", "ROPEQK_WG", "ROPEQK_VK", "ROPEQK_DKB", "ROPEQK_DWG",
                                      "ROPEQK_DECODE", "ROPEQK_ROT_UWG", "ROPEQK_ATQ", "ROPEQK_AVK", "ROPEQK_AWG",
                                      "ROPEQK_NV"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        if (getenv(env[i])) {
            rq_set_error("tuner: %s is set and would override every candidate; unset it to tune", env[i]);
            return ROPEQK_ERR_BAD_CONFIG;
        }
    ropeqk_tune_params dflt;
    memset(&dflt, 0, sizeof dflt);
    const ropeqk_tune_params *p = params ? params : &dflt;
    double budget = p->budget_seconds > 0 ? p->budget_seconds : 120.0, t0 = now_s();
    bool cpu = ctx->tune.profile == ROPEQK_PROFILE_CPU;
    rq_tuning win = ctx->tune;
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int f = FAM_SCORES; f <= FAM_ATTN; f++) {
        double best_ms = INFINITY;
        rq_tuning fam_best = win;
        for (int k = 0;; k++) {
            rq_tuning t = win;
            if (!candidate((family)f, cpu, k, &t))
                break;
            if (k > 0 && now_s() - t0 > budget)
                break; /* out of budget: the best so far stands (the first candidate always runs) */
            ropeqk_opencl_ctx_params cp = {.context = ctx->context, .queue = ctx->queue};
            to_api(&t, &cp.tuning);
            ropeqk_ctx *c = NULL;
            double ms = 0;
            st = ropeqk_opencl_ctx_create(&cp, &c);
            if (!st)
                st = check_candidate(c, (family)f);
            if (!st)
                st = time_candidate(c, (family)f, &ms);
            ropeqk_ctx_destroy(c);
            char res[96];
            if (st)
                snprintf(res, sizeof res, "dropped (%s)", ropeqk_status_string(st));
            else
                snprintf(res, sizeof res, "%.3f ms", ms);
            say(p, "%s tq=%d vk=%d nv=%d wg=%d dkb=%d dwg=%d atq=%d avk=%d awg=%d: %s", fam_name[f], &t, res);
            if (st == ROPEQK_ERR_OUT_OF_HOST_MEMORY)
                return st;
            if (!st && ms < best_ms) {
                best_ms = ms;
                fam_best = t;
            }
            st = ROPEQK_SUCCESS;
        }
        win = fam_best;
    }
    win.profile = ctx->tune.profile;
    if (best)
        to_api(&win, best);
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
