/* The OpenCL side of the kernel configuration and of the tuner: the -D build options, the fit of the
 * knobs to the device, the profile heuristics of its kernels, and the tuner's candidates (their
 * measured reasons are in cl_knobs.c's header and next to each list), candidate contexts and timed
 * runs. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rq_tuning_options(const rq_tuning *t, char *buf, size_t len)
{
    /* the tiled kernel's knobs only where it is on: without RQ_TILE the program does not contain it
     * (cl/program.cl), and the CPU profile's options stay as they were */
    char tiled[192] = "";
    int n = 0;
    if (t->tile > 0)
        n = snprintf(tiled, sizeof tiled, " -DRQ_TILE=%d -DRQ_RB=%d -DRQ_TK=%d", t->tile, t->rb, t->tk);
    if (t->decode && t->profile == ROPEQK_PROFILE_GPU) /* cl/decode_gpu.cl, likewise */
        n += snprintf(tiled + n, sizeof tiled - (size_t)n, " -DRQ_DECODE_GPU=1");
    if (t->attn_tile > 0) /* cl/attention_gpu.cl or cl/attention_fa2.cl, likewise */
        snprintf(tiled + n, sizeof tiled - (size_t)n, " -DRQ_GA_BM=%d -DRQ_GA_BN=%d -DRQ_GA_TK=%d -DRQ_GA_RB=%d -DRQ_GA_DV=%d%s",
                 t->attn_tile, t->attn_keys, t->attn_tk, t->attn_rb, t->attn_dv, rq_ga_fa2(t) ? " -DRQ_GA_FA2=1" : "");
    /* RQ_CPU_KERNELS: whether the program contains the CPU profile's own kernels (cl/program.cl) */
    return snprintf(buf, len,
                    "-cl-std=CL1.2 -DRQ_TQ=%d -DRQ_WG=%d -DRQ_VK=%d -DRQ_DKB=%d -DRQ_DWG=%d -DRQ_DECODE=%d "
                    "-DRQ_ATQ=%d -DRQ_AVK=%d -DRQ_AWG=%d -DRQ_KP=%d -DRQ_RUB=%d -DRQ_NV=%d -DRQ_CPU_KERNELS=%d%s%s",
                    t->tq, t->wg, t->vk, t->dkb, t->dwg, t->decode, t->atq, t->avk, t->awg, rq_kt_panel(t),
                    rq_rot_units(t), t->nv, t->profile == ROPEQK_PROFILE_CPU, tiled,
                    t->vendor_ext ? " -DRQ_POCL_EXT=1 -w" : "" /* cl_knobs.c: the vendor switch */);
}

ropeqk_status rq_cl_build_options(const ropeqk_ctx *ctx, char *buf, size_t len)
{
    rq_tuning_options(&ctx->tune, buf, len);
    /* NVIDIA's compiler (cl_nv_compiler_options): at most 128 registers a work-item on the GPU
     * profile, so that two work-groups of 256 share an SM (65536 registers). Without a cap ptxas
     * spends registers freely: qk_attention_fa2_f32 took 134 on sm_90 (clang-15 + ptxas 13), one
     * work-group an SM; with it, 128 and no spill. Every GPU-profile kernel is within 128 without
     * it (tests/gpucc compiles its NVIDIA leg with the same cap) */
    if (ctx->dev.nv_opts && ctx->tune.profile == ROPEQK_PROFILE_GPU) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, " -cl-nv-maxrregcount=%d", RQ_NV_MAXREG);
    }
    /* extra build options, for debugging and tuning (and for testing the build-failure path) */
    const char *extra = getenv("ROPEQK_BUILD_OPTIONS");
    if (extra && *extra) {
        size_t used = strlen(buf);
        if (used + 1 + strlen(extra) >= len) {
            rq_set_error("ROPEQK_BUILD_OPTIONS: longer than %zu bytes", len - used - 2);
            return ROPEQK_ERR_BAD_CONFIG;
        }
        snprintf(buf + used, len - used, " %s", extra);
    }
    return ROPEQK_SUCCESS;
}

/* AMD's and Intel's OpenCL platforms: qk_attention_fa2_* is over their compilers' budgets. */
static bool gattn_vendor_limited(const rq_devinfo *dev)
{
    return !rq_cl_pocl(dev) && (strstr(dev->platform, "AMD") || strstr(dev->platform, "Intel"));
}

void rq_cl_tuning_base(const rq_devinfo *dev, rq_tuning *t)
{
    bool cpu = t->profile == ROPEQK_PROFILE_CPU;
    int nv = dev->native_vec;
    /* CPUs: one float vector per key block. Where it is 8 lanes (AVX2), 16 rows per work-item spill:
     * an AVX2 host (pocl "haswell") ran prefill S=1024 D=128 at 52.6 GFLOP/s with TQ 16/VK 16 and at
     * 102 with TQ 4 (best of TQ 2..16, VK 8/16). */
    if (cpu && nv > 0 && nv < 16) {
        t->vk = t->avk = nv >= 8 ? 8 : 4;
        t->tq = 4;
        t->nv = 1;
    }
    snprintf(t->config_source, sizeof t->config_source, "heuristic (%s profile, native float vector width %d)",
             cpu ? "CPU" : "GPU", nv);
    /* The register-blocked attention kernel's default shape is over the budgets of AMD's and Intel's
     * compilers (tests/gpucc: gfx90a 150 VGPRs, dg2 224 B of private memory): their GPUs keep
     * qk_attention_gpu_* in its own default shape (the tuner does not offer them the other either,
     * rq_cl_tune_fits) */
    if (!cpu && t->attn_tile > 0 && rq_ga_fa2(t) && gattn_vendor_limited(dev)) {
        t->attn_tile = RQ_GA_FB_BM, t->attn_keys = RQ_GA_FB_BN, t->attn_tk = RQ_GA_FB_TK, t->attn_rb = RQ_GA_FB_RB;
        t->attn_dv = RQ_GA_FB_DV;
        rq_tuning_note(t, "GPU attention shape %d/%d/%d/%d/%d (qk_attention_gpu_*: %s's compiler)", t->attn_tile,
                       t->attn_keys, t->attn_tk, t->attn_rb, t->attn_dv, dev->platform);
    }
    rq_cl_tuning_shipped(dev, t); /* measured entries over the heuristic, and the vendor switch */
}

/* Turns the tiled kernel off (the plan then runs qk_scores) on the CPU profile (set by hand there:
 * its scratch layouts differ) and where the device cannot run its shape: more work-items than CL_DEVICE_MAX_WORK_GROUP_SIZE, or local arrays beyond 48 KiB (RQ_LOCAL_CAP)
 * or CL_DEVICE_LOCAL_MEM_SIZE. Says why in the configuration source. */
static void fit_tiled(const rq_devinfo *dev, rq_tuning *t)
{
    if (t->tile <= 0)
        return;
    size_t tw = (size_t)(t->tile / t->rb), nt = tw * tw, local = RQ_TILED_LOCAL_BYTES((size_t)t->tile, (size_t)t->tk);
    size_t cap = dev->local_mem > 0 && dev->local_mem < RQ_LOCAL_CAP ? dev->local_mem : RQ_LOCAL_CAP;
    char why[128] = "";
    if (t->profile == ROPEQK_PROFILE_CPU) /* it reads Qr rows and Kt as [d][key]: the GPU layouts */
        snprintf(why, sizeof why, "GPU profile only: the CPU profile keeps Qr and Kt in panels");
    else if (dev->max_wg > 0 && nt > dev->max_wg)
        snprintf(why, sizeof why, "%zu work-items > device limit %zu", nt, dev->max_wg);
    else if (local > cap)
        snprintf(why, sizeof why, "%zu local bytes > %zu", local, cap);
    if (!why[0])
        return;
    rq_tuning_note(t, "tiled kernel off (tile %d, rb %d, tk %d: %s)", t->tile, t->rb, t->tk, why);
    t->tile = 0;
}

/* The GPU attention kernel's shapes {rows, keys, tk, rb, dv}: the tuner's GPU candidates, and the
 * ladder a device without room for the configured shape steps down (fit_gattn), largest first.
 * The first two run the register-blocked qk_attention_fa2_* (rb 4, rq_ga_fa2; tests/gpucc: 128 and
 * 119 registers, no spill on sm_90 and sm_80 under -cl-nv-maxrregcount=128; not offered on AMD's
 * and Intel's platforms, whose compilers it is over budget for: rq_cl_tune_fits, fit_gattn): the
 * default and 64-dim V blocks (16 floats of O a work-item). 8-dim steps (52 B of spill) and 32-row
 * tiles of 128 work-items (84 B) spilled at the cap: not candidates. The others run
 * qk_attention_gpu_*, each within the budgets of cl/attention_gpu.cl,
 * compiled by clang-15 (+ libclc + ptxas for sm_90; ROCm device libraries for gfx90a): no stack,
 * scratch or spill, at most 128 registers / VGPRs.
 * Registers sm_90 / VGPRs gfx90a: the default 32x64 tile with 2 rows per work-item (96 / 114), with
 * 8- and 32-dim steps (99, 102 / 114), 64-row tiles of 512 work-items (96, 99 / 114; more than
 * gfx90a's 256 allows), 4 rows of 4 keys per work-item with 64-dim V blocks (128 / 122), a 64x32
 * tile (96 / 114), a 32x32 tile of 128 work-items (96 / 114), and 16-row tiles for few rows per KV
 * head (80 / 96). Dv 256 in one block (dv 256) took 128 / 152 VGPRs and spilled scalar registers on
 * gfx90a: not a candidate. qk_attention_* (the CPU profile's kernel: Dv accumulators per work-item,
 * over a kilobyte of stack on GPUs) is no candidate either. Since the full-tile path and the exp by
 * fma (cl/attention_gpu.cl) the figures are 116-120 / 122-126 for 2 rows, 126 / 128 for 4 rows,
 * 96 / 108 for 16 rows. The 32x64 tile with 32-dim steps ({32, 64, 32, 2, 128}) is no candidate any
 * more: its P.V step unrolled (sm_90 122 registers, gfx90a 126 VGPRs) puts qk_attention_gpu_f16/_bf16
 * in 128 B of private memory on dg2 (ocloc 22.43), and rolled (no private memory, 118 VGPRs) it
 * takes sm_90 134 registers (132 with 2 of its 8 steps unrolled, 134 with 4). */
static const int gshape[][5] = {{64, 64, 16, 4, 128}, {64, 64, 16, 4, 64}, {64, 64, 16, 2, 128},
                                {64, 64, 8, 2, 128},  {32, 64, 16, 2, 128}, {32, 64, 8, 2, 128},
                                {64, 32, 16, 2, 64},  {32, 32, 16, 2, 64},  {16, 64, 16, 1, 128}};
#define NGSHAPE ((int)(sizeof gshape / sizeof gshape[0]))

static void set_gshape(rq_tuning *t, int k)
{
    t->attn_tile = gshape[k][0];
    t->attn_keys = gshape[k][1];
    t->attn_tk = gshape[k][2];
    t->attn_rb = gshape[k][3];
    t->attn_dv = gshape[k][4];
}

/* Why the device cannot run the GPU attention kernel's shape (more work-items than
 * CL_DEVICE_MAX_WORK_GROUP_SIZE, local memory beyond 48 KiB or CL_DEVICE_LOCAL_MEM_SIZE) into why,
 * "" when it can. Plan creation checks the compiled kernel too (src/opencl/cl_attn.c). */
static void gattn_misfit(const rq_devinfo *dev, const rq_tuning *t, char *why, size_t len)
{
    size_t nt = rq_gattn_items(t), local = rq_ga_local_bytes(t);
    size_t cap = dev->local_mem > 0 && dev->local_mem < RQ_LOCAL_CAP ? dev->local_mem : RQ_LOCAL_CAP;
    why[0] = '\0';
    if (dev->max_wg > 0 && nt > dev->max_wg)
        snprintf(why, len, "%zu work-items > device limit %zu", nt, dev->max_wg);
    else if (local > cap)
        snprintf(why, len, "%zu local bytes > %zu", local, cap);
}

/* Where the device cannot run the GPU attention kernel's shape: the first of the ladder (gshape)
 * that it can, else the kernel off (plans then run qk_attention_*), saying why in the configuration
 * source. */
static void fit_gattn(const rq_devinfo *dev, rq_tuning *t)
{
    if (t->attn_tile <= 0)
        return;
    char why[128];
    gattn_misfit(dev, t, why, sizeof why);
    if (!why[0])
        return;
    rq_tuning c = *t;
    for (int k = 0; k < NGSHAPE; k++) {
        char w2[128];
        set_gshape(&c, k);
        if (rq_ga_fa2(&c) && gattn_vendor_limited(dev)) /* over those compilers' budgets (tuning_base) */
            continue;
        gattn_misfit(dev, &c, w2, sizeof w2);
        if (!w2[0]) {
            rq_tuning_note(t, "GPU attention shape %d/%d/%d/%d/%d instead of %d/%d/%d/%d/%d (%s)", c.attn_tile, c.attn_keys,
                           c.attn_tk, c.attn_rb, c.attn_dv, t->attn_tile, t->attn_keys, t->attn_tk, t->attn_rb, t->attn_dv, why);
            set_gshape(t, k);
            return;
        }
    }
    rq_tuning_note(t, "GPU attention kernel off (rows %d, keys %d, tk %d, rb %d, dv %d: %s; no smaller shape fits)",
                   t->attn_tile, t->attn_keys, t->attn_tk, t->attn_rb, t->attn_dv, why);
    t->attn_tile = 0;
}


void rq_cl_tuning_fit(const rq_devinfo *dev, rq_tuning *t)
{
    /* work-group sizes never beyond the device's limit */
    if (dev->max_wg > 0) {
        if ((size_t)t->wg > dev->max_wg)
            t->wg = (int)dev->max_wg;
        if ((size_t)t->dwg > dev->max_wg)
            t->dwg = (int)dev->max_wg;
        if ((size_t)t->rot_uwg > dev->max_wg)
            t->rot_uwg = (int)dev->max_wg;
        if ((size_t)t->awg > dev->max_wg)
            t->awg = (int)dev->max_wg;
    }
    fit_tiled(dev, t);
    fit_gattn(dev, t);
}

/* ---- the tuner's hooks (src/core/tune.c drives them) ---- */

/* The k-th (from 0) of n values that differs from cur: a crossover's candidates without the one in
 * effect (candidate 0) again; -1 past the last. */
static int other_value(const int *v, int n, int cur, int k)
{
    for (int i = 0; i < n; i++)
        if (v[i] != cur && k-- == 0)
            return v[i];
    return -1;
}

bool rq_cl_tune_candidate(rq_family f, bool cpu, int k, rq_tuning *t)
{
    k--; /* k = 0 is the configuration in effect: the core never asks for it */
    if (f == RQ_FAM_CHUNK || f == RQ_FAM_DENSE) {
        /* the crossovers, the same on both profiles: around the default of 16 by factors of 2 (the
         * timed shapes have a sequence or call between each two: src/opencl/cl_tune_paged.c); dense 0
         * is the old path for every row count */
        static const int chunk[] = {4, 8, 16, 32, 64}, dense[] = {0, 4, 8, 16, 32};
        int v = f == RQ_FAM_CHUNK ? other_value(chunk, 5, t->chunk_rows, k) : other_value(dense, 5, t->dense_rows, k);
        if (v < 0)
            return false;
        *(f == RQ_FAM_CHUNK ? &t->chunk_rows : &t->dense_rows) = v;
        return true;
    }
    if (f == RQ_FAM_SCORES) {
        /* CPU: (tq, nv) pairs; 16 rows of two vectors would not fit 32 zmm registers */
        static const int ctq[] = {8, 12, 16}, cnv[] = {2, 2, 1}, cvk[] = {8, 16}, cwg[] = {8, 16};
        static const int gtq[] = {1, 2, 4, 8}, gvk[] = {1, 4}, gwg[] = {32, 64, 128};
        /* GPU: qk_scores_tiled shapes {tile, rb, tk} first (the prefill kernel: they come first
         * under a short budget), then qk_scores alone (tiled kernel off). The shapes are from
         * the range of CLBlast's NVIDIA XGEMM configurations: 64x64 tiles of 16x16 work-items with
         * 4x4 blocks (the default), deeper or shallower steps, and 32x32 tiles for shapes with few
         * tiles per compute unit. 8x8 blocks (64 accumulators and 8 float4 of Q a work-item) were
         * candidates once: gfx90a 138-152 VGPRs, sm_90 125 registers, dg2 spilling around 93, over
         * the GPU budgets of tests/gpucc, so no longer searched (ROPEQK_RB=8 still sets them) */
        static const int gtiled[][3] = {{64, 4, 16}, {64, 4, 8}, {64, 4, 32}, {32, 4, 16}};
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
    } else if (f == RQ_FAM_DECODE) {
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
        if (!cpu) { /* qk_attention_gpu_* shapes only: qk_attention_* is over the GPU budgets */
            if (k >= NGSHAPE)
                return false;
            set_gshape(t, k);
            return true;
        }
        if (k >= 6)
            return false;
        t->atq = catq[k % 3];
        t->avk = cavk[k / 3];
    }
    return true;
}

bool rq_cl_tune_fits(const ropeqk_ctx *ctx, rq_family f, const rq_tuning *t, int64_t D)
{
    (void)D; /* plans fall back by themselves (rq_kernel_fits: cl_plan.c, cl_attn.c) */
    if (f != RQ_FAM_ATTN || t->attn_tile <= 0)
        return true;
    if (rq_ga_fa2(t) && gattn_vendor_limited(&ctx->dev)) /* over those compilers' budgets (tuning_base) */
        return false;
    /* a GPU attention shape the device cannot run would time its fallback again */
    char why[128];
    gattn_misfit(&ctx->dev, t, why, sizeof why);
    return !why[0];
}

void rq_cl_tune_finish(rq_family f, rq_tuning *best, const rq_tuning *ok, const double *ms, int n)
{
    /* a tiled winner keeps the best qk_scores knobs for what it falls back to (plans with few rows,
     * devices where the tiled shape does not fit) */
    if (f != RQ_FAM_SCORES || best->tile <= 0)
        return;
    int plain = -1;
    for (int i = 0; i < n; i++)
        if (ok[i].tile == 0 && (plain < 0 || ms[i] < ms[plain]))
            plain = i;
    if (plain >= 0) {
        best->tq = ok[plain].tq;
        best->vk = ok[plain].vk;
        best->wg = ok[plain].wg;
    }
}

ropeqk_status rq_cl_tune_clone(const ropeqk_ctx *ctx, const rq_tuning *t, ropeqk_ctx **out)
{
    ropeqk_opencl_ctx_params cp = {.context = rq_cl(ctx)->context, .queue = rq_cl(ctx)->queue};
    rq_tuning_to_api(t, &cp.tuning);
    return ropeqk_opencl_ctx_create(&cp, out);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ropeqk_status rq_cl_time_plan(ropeqk_plan *pl, int runs, double *seconds)
{
    ropeqk_ctx *c = pl->ctx;
    const rq_problem *pb = &pl->pb;
    bool attn = pl->op == ROPEQK_OP_ATTENTION;
    cl_int e = CL_SUCCESS;
    ropeqk_status st = ROPEQK_SUCCESS;
    cl_mem b[4] = {NULL, NULL, NULL, NULL};
    size_t bytes[4] = {pb->q_extent, pb->k_extent, attn ? pb->o_extent : pb->out_extent, attn ? pb->v_extent : 0};
    for (int i = 0; i < 4 && !e; i++) {
        if (!bytes[i])
            continue;
        b[i] = clCreateBuffer(rq_cl(c)->context, CL_MEM_READ_WRITE, bytes[i], NULL, &e);
        float z = 0.01f; /* a normal value: no denormal slow paths */
        if (!e && i != 2)
            e = clEnqueueFillBuffer(rq_cl(c)->queue, b[i], &z, 4, 0, bytes[i], 0, NULL, NULL);
    }
    ropeqk_opencl_args a = {.q = {b[0], 0}, .k = {b[1], 0}, .out = {b[2], 0}, .v = {b[3], 0}};
    for (int r = 0; r < runs && !e && !st; r++) {
        double t0 = now_s();
        st = ropeqk_opencl_plan_enqueue(pl, rq_cl(c)->queue, &a, NULL, 0, NULL, NULL);
        e = clFinish(rq_cl(c)->queue);
        seconds[r] = now_s() - t0;
    }
    if (!st && e)
        st = rq_cl_fail(c, e);
    for (int i = 0; i < 4; i++)
        if (b[i])
            clReleaseMemObject(b[i]);
    return st;
}
