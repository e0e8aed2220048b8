/* The tuner (ropeqk_tune): a coordinate search over the kernel knobs of the context's profile, one
 * kernel family at a time (prefill scores, with the tiled kernel's shapes on the GPU profile; the
 * decode kernel; attention). Each candidate is a
 * library context on the same OpenCL context and queue with that configuration: it is built,
 * checked against the fp64 path on a small case (dropped if it fails), then timed as the median of
 * 3 runs after a warm-up on a representative shape. The first candidate of each family is the
 * configuration in effect, so the result is never worse than what the device had, and a budget
 * that runs out keeps the best found so far. Compiling dominates on pocl (~1 s a candidate).
 * On a Vulkan context the candidates are contexts on the same VkDevice and queue, and the knobs are
 * specialization constants: the prefill scores shader's tile (vk_block x vk_tk) and the attention
 * shader's rows per work-group (vk_rows, timed at Dv 128); the decode-shaped scores and the paged
 * shaders have fixed shapes so far. */
#include "ctx.h"
#include "vk/vk.h"

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
    double t[4];
    if (c->vk) {
        st = rq_vk_time_plan(pl, 4, t);
        if (!st) /* median of runs 1..3 (run 0 warms up) */
            *ms = 1e3 * fmax(fmin(t[1], t[2]), fmin(fmax(t[1], t[2]), t[3]));
        ropeqk_plan_destroy(pl);
        return st;
    }
    cl_int e = CL_SUCCESS;
    cl_mem b[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {ropeqk_tensor_extent(&d.q), ropeqk_tensor_extent(&d.k), ropeqk_tensor_extent(&d.out)};
    for (int i = 0; i < 3 && !e; i++) {
        b[i] = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes[i], NULL, &e);
        float z = 0.01f;
        if (!e && i < 2)
            e = clEnqueueFillBuffer(c->queue, b[i], &z, 4, 0, bytes[i], 0, NULL, NULL);
    }
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
static bool candidate(family f, bool cpu, bool vk, int k, rq_tuning *t)
{
    if (k == 0)
        return true;
    k--;
    if (vk) { /* scores.comp: T x TK; attention.comp: rows (the tuner skips what the device lacks) */
        static const int vb[] = {2, 4, 8}, vtk[] = {8, 16, 32}, vrows[] = {32, 64, 128};
        if (f == FAM_SCORES && k < 9) {
            t->vk_block = vb[k % 3];
            t->vk_tk = vtk[k / 3];
            return true;
        }
        if (f == FAM_ATTN && k < 3) {
            t->vk_rows = vrows[k];
            return true;
        }
        return false;
    }
    if (f == FAM_SCORES) {
        /* CPU: (tq, nv) pairs; 16 rows of two vectors would not fit 32 zmm registers */
        static const int ctq[] = {8, 12, 16}, cnv[] = {2, 2, 1}, cvk[] = {8, 16}, cwg[] = {8, 16};
        static const int gtq[] = {1, 2, 4, 8}, gvk[] = {1, 4}, gwg[] = {32, 64, 128};
        /* GPU: qk_scores_tiled shapes {tile, rb, tk} first (the prefill kernel: they come first
         * under a short budget), then qk_scores alone (tiled kernel off). The shapes are from
         * the range of CLBlast's NVIDIA XGEMM configurations: 64x64 tiles of 16x16 work-items with
         * 4x4 blocks (the default), deeper or shallower steps, 8x8 blocks (fewer, busier work-items:
         * 64 or 256), 128x128 tiles, and 32x32 tiles for shapes with few tiles per compute unit */
        static const int gtiled[][3] = {{64, 4, 16}, {64, 4, 8}, {64, 4, 32}, {64, 8, 16},
                                        {64, 8, 32}, {128, 8, 16}, {128, 8, 8}, {32, 4, 16}};
        int ntiled = (int)(sizeof gtiled / sizeof gtiled[0]);
        if (cpu ? k >= 12 : k >= 24 + ntiled)
            return false;
        if (!cpu && k < ntiled) { /* qk_scores' knobs stay those in effect: its fallback configuration */
            t->tile = gtiled[k][0];
            t->rb = gtiled[k][1];
            t->tk = gtiled[k][2];
            return true;
        }
        if (!cpu)
            k -= ntiled;
        t->tq = cpu ? ctq[k % 3] : gtq[k % 4];
        t->nv = cpu ? cnv[k % 3] : 1;
        t->vk = cpu ? cvk[(k / 3) % 2] : gvk[(k / 4) % 2];
        t->wg = cpu ? cwg[k / 6] : gwg[k / 8];
        if (!cpu)
            t->tile = 0;
    } else if (f == FAM_DECODE) {
        static const int dkb[] = {32, 64, 128}, dwg[] = {1, 2};
        if (!cpu) { /* GPU: the decode kernel (cl/decode_gpu.cl) against the two-pass path */
            if (k >= 1)
                return false;
            t->decode = !t->decode;
            return true;
        }
        if (k >= 6)
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

/* A context on ctx's device, queue and (OpenCL) context with configuration t. */
static ropeqk_status make_candidate(const ropeqk_ctx *ctx, const rq_tuning *t, ropeqk_ctx **c)
{
    if (ctx->vk) {
        ropeqk_vulkan_ctx_params vp = {.instance = ctx->vk->instance, .physical_device = ctx->vk->phys,
                                       .device = ctx->vk->device, .queue_family = ctx->vk->qfam,
                                       .queue = ctx->vk->queue};
        rq_tuning_to_api(t, &vp.tuning);
        return ropeqk_vulkan_ctx_create(&vp, c);
    }
    ropeqk_opencl_ctx_params cp = {.context = ctx->context, .queue = ctx->queue};
    rq_tuning_to_api(t, &cp.tuning);
    return ropeqk_opencl_ctx_create(&cp, c);
}

static void say(const ropeqk_tune_params *p, bool vk, const char *fam, const rq_tuning *t, const char *res)
{
    if (!p->progress)
        return;
    char line[256];
    if (vk)
        snprintf(line, sizeof line, "%s vk_block=%d vk_tk=%d vk_rows=%d: %s", fam, t->vk_block, t->vk_tk, t->vk_rows,
                 res);
    else
        snprintf(line, sizeof line, "%s tq=%d vk=%d nv=%d wg=%d tile=%d rb=%d tk=%d dkb=%d dwg=%d atq=%d avk=%d awg=%d: %s",
                 fam, t->tq, t->vk, t->nv, t->wg, t->tile, t->rb, t->tk, t->dkb, t->dwg, t->atq, t->avk, t->awg, res);
    p->progress(p->user, line);
}

/* The search: one family at a time, each starting from the winners so far; *out = the winners. */
static ropeqk_status search(const ropeqk_ctx *ctx, const ropeqk_tune_params *p, double budget, rq_tuning *out)
{
    double t0 = now_s();
    bool cpu = ctx->tune.profile == ROPEQK_PROFILE_CPU;
    rq_tuning win = ctx->tune;
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int f = FAM_SCORES; f <= FAM_ATTN; f++) {
        if (ctx->vk && f == FAM_DECODE) /* scores_few.comp has a fixed shape */
            continue;
        double best_ms = INFINITY, plain_ms = INFINITY;
        rq_tuning fam_best = win, plain_best = win; /* plain: the best run on qk_scores (tile off) */
        for (int k = 0;; k++) {
            rq_tuning t = win;
            if (!candidate((family)f, cpu, ctx->vk != NULL, k, &t))
                break;
            if (k > 0 && now_s() - t0 > budget)
                break; /* out of budget: the best so far stands (the first candidate always runs) */
            /* the plans' own test (vk_plan.c, vk_attn.c) at the timed head dims: a shape the device
             * does not take would run as the default and be timed under the wrong name */
            if (ctx->vk && (!rq_vk_scores_fits(ctx, t.vk_block, t.vk_tk, time_shape[FAM_SCORES].D) ||
                            !rq_vk_attn_rows_fit(ctx, t.vk_rows, time_shape[FAM_ATTN].D))) {
                say(p, true, fam_name[f], &t, "skipped (the device does not take this shape)");
                continue;
            }
            ropeqk_ctx *c = NULL;
            double ms = 0;
            st = make_candidate(ctx, &t, &c);
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
            say(p, ctx->vk != NULL, fam_name[f], &t, res);
            if (st == ROPEQK_ERR_OUT_OF_HOST_MEMORY)
                return st;
            if (!st && ms < best_ms) {
                best_ms = ms;
                fam_best = t;
            }
            if (!st && t.tile == 0 && ms < plain_ms) {
                plain_ms = ms;
                plain_best = t;
            }
            st = ROPEQK_SUCCESS;
        }
        /* a tiled winner keeps the best qk_scores knobs for what it falls back to (plans with few
         * rows, devices where the tiled shape does not fit) */
        if (f == FAM_SCORES && fam_best.tile > 0 && plain_ms < INFINITY) {
            fam_best.tq = plain_best.tq;
            fam_best.vk = plain_best.vk;
            fam_best.wg = plain_best.wg;
        }
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
    static const char *const env[] = {"ROPEQK_TQ",  "ROPEQK_WG",  "ROPEQK_VK",       "ROPEQK_DKB",
                                      "ROPEQK_DWG", "ROPEQK_DECODE", "ROPEQK_ROT_UWG", "ROPEQK_ATQ",
                                      "ROPEQK_AVK", "ROPEQK_AWG", "ROPEQK_NV", "ROPEQK_TILE",   "ROPEQK_RB",
                                      "ROPEQK_TK",  "ROPEQK_VK_BLOCK", "ROPEQK_VK_TK", "ROPEQK_VK_ROWS"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        if (getenv(env[i])) {
            rq_set_error("tuner: %s is set and would override every candidate; unset it to tune", env[i]);
            return ROPEQK_ERR_BAD_CONFIG;
        }
    ropeqk_tune_params dflt;
    memset(&dflt, 0, sizeof dflt);
    const ropeqk_tune_params *p = params ? params : &dflt;
    double budget = p->budget_seconds > 0 ? p->budget_seconds : 120.0;
    /* Vulkan: the candidates submit to this context's queue, so hold the context's queue lock for the
     * search, as its own host calls do (another thread's calls on ctx wait) */
    rq_tuning win;
    if (ctx->vk)
        pthread_mutex_lock(&ctx->vk->qlock);
    ropeqk_status st = search(ctx, p, budget, &win);
    if (ctx->vk)
        pthread_mutex_unlock(&ctx->vk->qlock);
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
