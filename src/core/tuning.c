/* Kernel configuration of a context: the profile (the class of device the kernels are shaped for),
 * the tuning knobs the kernels get as -D options, and the vendor switch. One place decides them, in
 * this order of precedence: environment variable (validated strictly), then the caller's
 * ropeqk_tuning, then the profile's defaults. The host reads the same rq_tuning fields it formats
 * into the options, so host and kernels cannot disagree on them.
 *
 * Defaults, measured with bench/ (ropeqk-bench) rather than guessed, on pocl 3.1 / LLVM 15, 2-core
 * AMD EPYC (Zen 5, AVX-512), score kernel alone, medians of 5 with the variants alternating:
 *   qk_scores (two-pass path):
 *   RQ_VK  keys per work-item, one floatN vector along keys. pocl does not vectorise a work-item loop
 *          that contains the d loop, so RQ_VK = 1 ran scalar: 5.5 GFLOP/s at prefill S=1024 D=128;
 *          RQ_VK = 16 (one zmm) 290-320 GFLOP/s; 8 (TQ 16, WG 4): 82 GFLOP/s. GPUs: 1 (coalesced).
 *   RQ_TQ  query rows per work-item (RQ_TQ accumulators): S=1024 D=128: 8 -> 292, 12 -> 304, 16 -> 309-322,
 *          20 -> 315, 24 -> 322 GFLOP/s; D=64: 8 -> 268, 16 -> 289, 24 -> 290; GQA kv8: 305 / 327 / 337.
 *          16 leaves registers for the K vector and wastes fewer rows on short tiles than 24.
 *   RQ_WG  work-items per group along keys: 4 -> 312, 8 -> 309, 16 -> 322, 32 -> 321 (TQ 16).
 *   Since then, on the 2-core Intel Xeon AVX-512 (Ice Lake, 48 KiB L1d, 1.25 MiB L2 a core), with Kt
 *   and Qr in panels (cl/scores.cl), prefill S=1024 D=128 f32, interleaved runs, score pass median
 *   (min) in ms:
 *   RQ_NV  vectors of keys per work-item, 2 with RQ_TQ 12: 47.6 (43.1); TQ 16 NV 1: 66.8 (62.6);
 *          TQ 8 NV 2: 53.2 (51.1); TQ 14 NV 2 (30 of 32 zmm) slower than 12 in every run.
 *   RQ_WG  (TQ 12 NV 2) 4 -> 57.3, 8 -> 54.6, 16 -> 47.6, 32 -> 55.9.
 *   Hosts with narrower vectors keep NV 1 (unmeasured there).
 *   qk_decode_* (decode path, M = G*Sq <= 8 rows per KV head; CPU profile only, it is written for wide
 *   SIMD registers and private tables; the GPU profile runs qk_scores with RQ_VK = 1, or with
 *   decode on (API decode = 1, ROPEQK_DECODE=1; off by default until measured on a GPU, the tuner
 *   compares both) its own qk_decode_gpu_*, cl/decode_gpu.cl):
 *   RQ_DKB keys per work-item (setup per work-item vs parallel slack): Sk=32768 D=128 f32, 2 threads:
 *          16 -> 2.45 ms, 32 -> 2.23-2.31, 64 -> 2.06-2.21, 128 -> 2.03-2.16; f16: 32 -> 1.85, 64 -> 1.74.
 *   RQ_DWG work-items per group: 1 or 2 within noise; 4 +3% (DKB 16 -> 4: +5%).
 *   rope_rotate_* work-groups span rot_uwg units (16: whole cache lines; 8 within noise, 32 worse);
 *          on the CPU profile one work-item takes 16 units (rq_rot_units), so a group is one item.
 * GPU profile: TQ 4, WG 64, VK 1 (an H100 sweep found TQ 4, WG 32, VK 4 faster: issue 11 ships a
 * tuner and GPU-shaped kernels; these are the constants the H100 suite passed with).
 *   qk_scores_tiled (cl/scores_tiled.cl, GPU profile; ROPEQK_TILE=0 or tile = -1 turns it off):
 *   RQ_TILE 64, RQ_RB 4, RQ_TK 16: within the range of CLBlast's tuned f32 XGEMM configurations for
 *          NVIDIA GPUs (its database: tiles of 64-128, 16-32 dims per step, 128-256 work-items, 4-8
 *          results per work-item along each side), at its small end: 256 work-items, 8.5 KiB of
 *          local memory, 16 accumulators. RB is 4 or 8 and TK a multiple of 4 (float4 local reads). Not yet measured on a GPU: the tuner's GPU candidates
 *          sweep tile, block and step (src/opencl/tune.c). The host turns it off when the work-group exceeds
 *          the device's limit or the local arrays exceed 48 KiB or the device's local memory (below),
 *          and plan creation falls back to qk_scores when the compiled kernel allows fewer
 *          work-items (src/opencl/plan.c).
 *
 * Vendor switch: on pocl (identified by its platform name) the program is built with
 * -DRQ_POCL_EXT=1, which enables Clang builtins in cl/scores.cl, and with -w: on hosts without
 * AVX-512, pocl's Clang notes at every call with a 16-wide vector argument that the x86 calling
 * convention differs (-Wpsabi, 143 notes on an AVX2 host, printed as "143 warnings generated." on
 * stderr at the first build). These notes concern pocl's own internal calls; real errors still fail
 * the build and keep their log, and the source itself is held to -pedantic -Werror by the clc test. */
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

const char *rq_profile_name(ropeqk_profile p)
{
    return p == ROPEQK_PROFILE_CPU ? "cpu" : p == ROPEQK_PROFILE_GPU ? "gpu" : "auto";
}

void rq_tuning_defaults(ropeqk_profile prof, bool pocl, rq_tuning *t)
{
    bool cpu = prof != ROPEQK_PROFILE_GPU;
    memset(t, 0, sizeof *t);
    t->profile = cpu ? ROPEQK_PROFILE_CPU : ROPEQK_PROFILE_GPU;
    t->tq = cpu ? 12 : 4;
    t->wg = cpu ? 16 : 64;
    t->vk = cpu ? 16 : 1;
    t->nv = cpu ? 2 : 1;
    t->dkb = 64;
    t->dwg = 2;
    t->decode = cpu;
    t->rot_uwg = 16;
    /* attention: 8 rows x 16 keys per work-item on CPUs (one zmm of scores per row, o[8][Dv] in
     * private memory); one row, one key at a time on GPUs until the GPU-shaped kernel exists */
    t->atq = cpu ? 8 : 1;
    t->avk = cpu ? 16 : 1;
    t->awg = cpu ? 1 : 64;
    /* Vulkan scores.comp: a 64 x 64 tile, 16 dims a stage (the shape the suite first passed with;
     * the tuner searches 2/4/8 x 8/16/32, vk_plan.c checks shared memory and loop trips) */
    t->vk_block = 4;
    t->vk_tk = 16;
    t->vk_rows = 64; /* attention.comp: 64 rows a work-group (fits 32 KiB of shared memory to Dv 256) */
    t->pocl_ext = pocl;
    t->tile = cpu ? 0 : 64; /* the tiled score kernel: GPU profile only (see the header comment) */
    t->rb = 4;
    t->tk = 16;
    /* the GPU attention kernel: 64 rows x 64 keys, 4 rows x 4 keys of S and 4 rows x 8 dims of O per
     * work-item, 256 work-items: the register-blocked qk_attention_fa2_* (cl/attention_fa2.cl;
     * docs/prefill-gpu.md has its registers, instruction mix and predicted H200 time, the kernel's
     * header and src/opencl/tune.c's candidates the other shapes). 1 or 2 rows per work-item run
     * qk_attention_gpu_* (cl/attention_gpu.cl), whose default was 32/64/16/2/128 */
    t->ga_bm = cpu ? 0 : 64;
    t->ga_bn = 64;
    t->ga_tk = 16;
    t->ga_rb = 4;
    t->ga_dv = 128;
    /* The OpenCL backend's two host-side crossovers (the tuner's "chunk" and "dense" families search
     * them per device: src/opencl/tune_paged.c). Both profiles: not yet measured on a GPU.
     * chunk_rows: rows from which a sequence of a ragged paged call takes the chunk path
     * (src/opencl/paged_chunk.c). Measured on pocl (2 AMD EPYC cores, Hq 32 / Hkv 8 / D 128, f16
     * cache, `ropeqk-bench --ragged`): a row through the decode kernels costs ~0.4 us per key (it
     * rotates every key), the attention kernel ~0.12 us per key and row plus the gather and the
     * rotation of K once (~1.6 us per key): even at about 6 rows; 16 keeps speculative steps (2-8
     * rows), whose keys the decode kernels read in one split-K pass, on them. */
    t->chunk_rows = 16;
    /* dense_rows: attention calls with at most this many query rows run through the paged decode's
     * kernels (src/opencl/dense.c; Vulkan: src/vulkan/vk_dense.c, whose CPU devices take 2, measured
     * in src/vulkan/vk_tune.c): each row is a sequence of the decode, which reads K and V once
     * per row where the old path rotates K once for all rows. Measured (`ropeqk-bench
     * --dense-decode`, 32768 keys, Hkv 8, D 128, f16, causal, 2-core AMD EPYC AVX-512, pocl, shared
     * machine at load 1 to 4: medians of 11 interleaved rounds, three runs), old path time / new
     * path time: Hq 32 (GQA 4) Sq 1, 2, 4, 8, 16: 4.3-4.5x, 4.0-4.7x, 2.6-2.9x, 1.9-2.0x, 1.45-2.1x
     * (Sq 32: 1.29x, Sq 64: 1.15x in an earlier run); Hq 8 (no GQA) Sq 1, 2, 4, 8: 12-13x,
     * 5.3-6.8x, 2.9-3.5x, 1.4-1.8x. The new path's time grows by one K+V read per row, the old
     * one's more slowly: 16 rows keep it ahead on both shapes. */
    t->dense_rows = 16;
    /* the paged decode's fast pass 1 (cl/paged_fast.cl, glsl/paged_fast.comp): -1 = where it is meant to
     * run (OpenCL's GPU profile; Vulkan GPUs: on lavapipe it costs more than paged.comp saves, and
     * each pipeline compiled per context lengthens the suite's fault sweeps), and its split aiming at
     * the kernel's own default of work-groups per compute unit (0: RQ_FSPLITS in cl/contract.h;
     * docs/paged-decode-gpu.md) */
    t->paged_fast = -1;
    t->paged_wgs = 0;
    /* the Vulkan tensor-core path: on where the device has it; its tile 64 rows (4 subgroups of 16) x
     * 64 keys, 39 KiB of shared memory (vk_cm.h); unmeasured on a GPU (docs/tensor-cores.md has the
     * static estimate), the tuner searches the others */
    t->vk_coopmat = 0;
    t->vk_cm_rows = 64;
    t->vk_cm_keys = 64;
}

static void note_override(rq_tuning *t, const char *name);

/* A knob from the caller (0 = default) or the environment (overrides), checked against [lo, hi]
 * and, for VK and DKB, their allowed values. */
static ropeqk_status apply(rq_tuning *t, int *field, int32_t api, const char *env, long lo, long hi,
                           bool (*ok)(long))
{
    long v = 0;
    if (api != 0) {
        if (api < lo || api > hi || (ok && !ok(api))) {
            rq_set_error("tuning: %s-equivalent value %d is out of range", env, (int)api);
            return ROPEQK_ERR_BAD_CONFIG;
        }
        *field = api;
        note_override(t, env + 7); /* "TQ" of "ROPEQK_TQ": the parameter's name */
    }
    int r = env_int(env, lo, hi, &v);
    if (r < 0)
        return ROPEQK_ERR_BAD_CONFIG;
    if (r > 0) {
        if (ok && !ok(v)) {
            rq_set_error("%s='%s': value not allowed", env, getenv(env));
            return ROPEQK_ERR_BAD_CONFIG;
        }
        *field = (int)v;
        note_override(t, env);
    }
    return ROPEQK_SUCCESS;
}

static bool vk_ok(long v) { return v == 1 || v == 4 || v == 8 || v == 16; }
static bool even_ok(long v) { return v % 2 == 0; }
static bool vk_block_ok(long v) { return v == 2 || v == 4 || v == 8; }
static bool vk_tk_ok(long v) { return v == 8 || v == 16 || v == 32; }
static bool vk_rows_ok(long v) { return v == 32 || v == 64 || v == 128; }
static bool vk_coopmat_ok(long v) { return v >= -1 && v <= 1 && v != 0; } /* API: 0 is the default */
static bool tile_ok(long v) { return v == 0 || v == 16 || v == 32 || v == 64 || v == 128; }
static bool rb_ok(long v) { return v == 4 || v == 8; }   /* float4 groups of keys per work-item */
static bool tk_ok(long v) { return v % 4 == 0; }         /* float4 groups of dims per step */
static bool ga_bn_ok(long v) { return v == 16 || v == 32 || v == 64 || v == 128; }
static bool ga_rb_ok(long v) { return v == 1 || v == 2 || v == 4 || v == 8; }
static bool ga_dv_ok(long v) { return v % 16 == 0; }

/* Configurations measured on a device, shipped with the library (the tuner's cache overrides them).
 * Matched by platform and device name substrings and the profile. */
static const struct {
    const char *platform, *device;
    ropeqk_profile profile;
    int tq, wg, vk;
    const char *note;
} shipped[] = {
    /* H100 80GB HBM3, NVIDIA CUDA OpenCL 3.0, driver 580.159: best of a TQ x WG x VK sweep of qk_scores
     * at prefill B*H=32 S=2048 D=128 f32, 16.3 TFLOP/s against 10.2 with the GPU defaults */
    {"NVIDIA", "H100", ROPEQK_PROFILE_GPU, 4, 32, 4, "NVIDIA H100, qk_scores sweep (16.3 vs 10.2 TFLOP/s)"},
};

/* The knobs before caller and environment overrides: the tuner's cache for this device, else a
 * shipped entry, else the backend's heuristic from the device's properties. Records where they came
 * from. */
static void pick_base(const rq_backend *be, const rq_devinfo *dev, rq_tuning *t)
{
    be->tuning_base(dev, t); /* the backend's device heuristics, and the source note */
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++)
        if (strstr(dev->platform, shipped[i].platform) && strstr(dev->name, shipped[i].device) &&
            shipped[i].profile == t->profile) {
            t->tq = shipped[i].tq;
            t->wg = shipped[i].wg;
            t->vk = shipped[i].vk;
            snprintf(t->config_source, sizeof t->config_source, "shipped (%s)", shipped[i].note);
        }
    char note[400];
    rq_cache_result c = rq_tune_cache_load(dev, t->profile, t, note, sizeof note);
    size_t n = strlen(t->config_source);
    if (c == RQ_CACHE_OK)
        snprintf(t->config_source, sizeof t->config_source, "cache (%s)", note);
    else if (c != RQ_CACHE_NONE)
        snprintf(t->config_source + n, sizeof t->config_source - n, "; %s", note);
}

/* Appends " name" to the override list of the source string. */
static void note_override(rq_tuning *t, const char *name)
{
    size_t n = strlen(t->config_source);
    snprintf(t->config_source + n, sizeof t->config_source - n, "%s%s", strstr(t->config_source, "; overrides:") ? " " : "; overrides: ", name);
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
    if (req->vendor_ext < -1 || req->vendor_ext > 0) {
        rq_set_error("tuning: vendor_ext must be 0 (auto) or -1 (off)");
        return ROPEQK_ERR_BAD_CONFIG;
    }
    rq_tuning_defaults(prof, dev->pocl && req->vendor_ext == 0, t);
    snprintf(t->profile_source, sizeof t->profile_source, "%s", src);
    pick_base(be, dev, t);
    ropeqk_status st;
    if ((st = apply(t, &t->tq, req->tq, "ROPEQK_TQ", 1, 32, NULL)) ||
        (st = apply(t, &t->wg, req->wg, "ROPEQK_WG", 1, 1024, NULL)) ||
        (st = apply(t, &t->vk, req->vk, "ROPEQK_VK", 1, 16, vk_ok)) ||
        (st = apply(t, &t->nv, req->nv, "ROPEQK_NV", 1, 2, NULL)) ||
        (st = apply(t, &t->dkb, req->dkb, "ROPEQK_DKB", 2, 1024, even_ok)) ||
        (st = apply(t, &t->dwg, req->dwg, "ROPEQK_DWG", 1, 256, NULL)) ||
        (st = apply(t, &t->rot_uwg, req->rot_uwg, "ROPEQK_ROT_UWG", 1, 256, NULL)) ||
        (st = apply(t, &t->atq, req->atq, "ROPEQK_ATQ", 1, 16, NULL)) ||
        (st = apply(t, &t->avk, req->avk, "ROPEQK_AVK", 1, 16, vk_ok)) ||
        (st = apply(t, &t->awg, req->awg, "ROPEQK_AWG", 1, 1024, NULL)) ||
        (st = apply(t, &t->vk_block, req->vk_block, "ROPEQK_VK_BLOCK", 2, 8, vk_block_ok)) ||
        (st = apply(t, &t->vk_tk, req->vk_tk, "ROPEQK_VK_TK", 8, 32, vk_tk_ok)) ||
        (st = apply(t, &t->vk_rows, req->vk_rows, "ROPEQK_VK_ROWS", 32, 128, vk_rows_ok)) ||
        (st = apply(t, &t->vk_cm_rows, req->vk_cm_rows, "ROPEQK_VK_CM_ROWS", 32, 128, vk_rows_ok)) ||
        (st = apply(t, &t->vk_cm_keys, req->vk_cm_keys, "ROPEQK_VK_CM_KEYS", 32, 128, vk_rows_ok)))
        return st;
    /* the tensor-core path's switch: API 0 = auto, -1 off, 1 emulated; ROPEQK_VK_COOPMAT -1, 0, 1 */
    if (req->vk_coopmat && !vk_coopmat_ok(req->vk_coopmat)) {
        rq_set_error("tuning: vk_coopmat must be 0 (auto), -1 (off) or 1 (emulated)");
        return ROPEQK_ERR_BAD_CONFIG;
    }
    if (req->vk_coopmat) {
        t->vk_coopmat = req->vk_coopmat;
        note_override(t, "VK_COOPMAT");
    }
    {
        long cmv = 0;
        int r = env_int("ROPEQK_VK_COOPMAT", -1, 1, &cmv);
        if (r < 0)
            return ROPEQK_ERR_BAD_CONFIG;
        if (r > 0) {
            t->vk_coopmat = (int)cmv;
            note_override(t, "ROPEQK_VK_COOPMAT");
        }
    }
    /* tiled kernel: API -1 = off, 0 = default; ROPEQK_TILE=0 = off */
    if (req->tile == -1) {
        t->tile = 0;
        note_override(t, "TILE");
    }
    if ((st = apply(t, &t->tile, req->tile == -1 ? 0 : req->tile, "ROPEQK_TILE", 0, 128, tile_ok)) ||
        (st = apply(t, &t->rb, req->rb, "ROPEQK_RB", 4, 8, rb_ok)) ||
        (st = apply(t, &t->tk, req->tk, "ROPEQK_TK", 4, 64, tk_ok)))
        return st;
    /* the GPU attention kernel: API attn_tile -1 = off, 0 = default; ROPEQK_ATTN_TILE=0 = off */
    if (req->attn_tile == -1) {
        t->ga_bm = 0;
        note_override(t, "ATTN_TILE");
    }
    if ((st = apply(t, &t->ga_bm, req->attn_tile == -1 ? 0 : req->attn_tile, "ROPEQK_ATTN_TILE", 0, 128, tile_ok)) ||
        (st = apply(t, &t->ga_bn, req->attn_keys, "ROPEQK_ATTN_KEYS", 16, 128, ga_bn_ok)) ||
        (st = apply(t, &t->ga_tk, req->attn_tk, "ROPEQK_ATTN_TK", 4, 64, tk_ok)) ||
        (st = apply(t, &t->ga_rb, req->attn_rb, "ROPEQK_ATTN_RB", 1, 8, ga_rb_ok)) ||
        (st = apply(t, &t->ga_dv, req->attn_dv, "ROPEQK_ATTN_DV", 16, 256, ga_dv_ok)))
        return st;
    /* its knobs together (cl/attention_gpu.cl's #error): checked whether or not it is on, so that a
     * configuration is valid or not whatever else is set */
    if (t->ga_bn % t->ga_tk || t->ga_bm % t->ga_rb || t->ga_dv % t->ga_bn) {
        rq_set_error("tuning: GPU attention shape rows %d (ROPEQK_ATTN_TILE), keys %d (ROPEQK_ATTN_KEYS), step %d "
                     "(ROPEQK_ATTN_TK), rows per work-item %d (ROPEQK_ATTN_RB), V dims %d (ROPEQK_ATTN_DV): the step "
                     "must divide the keys, the rows per work-item the rows, and the V dims be a multiple of the keys",
                     t->ga_bm, t->ga_bn, t->ga_tk, t->ga_rb, t->ga_dv);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    /* the crossovers: chunk_rows 1..RQ_CHUNK_ROWS_MAX; dense_rows API -1 = off, 0 = default,
     * ROPEQK_DENSE_DECODE=0 = off (its meaning since it was an environment limit only) */
    if ((st = apply(t, &t->chunk_rows, req->chunk_rows, "ROPEQK_CHUNK_ROWS", 1, RQ_CHUNK_ROWS_MAX, NULL)))
        return st;
    if (req->dense_rows == -1) {
        t->dense_rows = 0;
        note_override(t, "DENSE_DECODE");
    }
    if ((st = apply(t, &t->dense_rows, req->dense_rows == -1 ? 0 : req->dense_rows, "ROPEQK_DENSE_DECODE", 0,
                    RQ_DENSE_ROWS_MAX, NULL)))
        return st;
    /* environment only: the paged decode's fast pass 1 (0 = off; 1 = on, Vulkan CPU devices included)
     * and its split's work-groups per unit */
    if ((st = apply(t, &t->paged_fast, 0, "ROPEQK_PAGED_FAST", 0, 1, NULL)) ||
        (st = apply(t, &t->paged_wgs, 0, "ROPEQK_PAGED_WGS", 1, 64, NULL)))
        return st;
    /* decode: API 0 = profile default, 1 = on, -1 = off; ROPEQK_DECODE 0/1 */
    if (req->decode < -1 || req->decode > 1) {
        rq_set_error("tuning: decode must be 0 (default), 1 (on) or -1 (off)");
        return ROPEQK_ERR_BAD_CONFIG;
    }
    if (req->decode) {
        t->decode = req->decode > 0;
        note_override(t, "decode");
    }
    long v = 0;
    int r = env_int("ROPEQK_DECODE", 0, 1, &v);
    if (r < 0)
        return ROPEQK_ERR_BAD_CONFIG;
    if (r > 0) {
        t->decode = (int)v;
        note_override(t, "ROPEQK_DECODE");
    }
    be->tuning_fit(dev, t);
    return ROPEQK_SUCCESS;
}

void rq_tuning_to_api(const rq_tuning *t, ropeqk_tuning *o)
{
    memset(o, 0, sizeof *o);
    o->profile = t->profile;
    o->tq = t->tq, o->wg = t->wg, o->vk = t->vk, o->dkb = t->dkb, o->dwg = t->dwg;
    o->decode = t->decode ? 1 : -1;
    o->rot_uwg = t->rot_uwg, o->atq = t->atq, o->avk = t->avk, o->awg = t->awg;
    o->vendor_ext = t->pocl_ext ? 0 : -1;
    o->nv = t->nv;
    o->tile = t->tile ? t->tile : -1;
    o->rb = t->rb, o->tk = t->tk;
    o->vk_block = t->vk_block, o->vk_tk = t->vk_tk, o->vk_rows = t->vk_rows;
    o->attn_tile = t->ga_bm ? t->ga_bm : -1;
    o->attn_keys = t->ga_bn, o->attn_tk = t->ga_tk, o->attn_rb = t->ga_rb, o->attn_dv = t->ga_dv;
    o->chunk_rows = t->chunk_rows;
    o->dense_rows = t->dense_rows ? t->dense_rows : -1;
    o->vk_coopmat = t->vk_coopmat, o->vk_cm_rows = t->vk_cm_rows, o->vk_cm_keys = t->vk_cm_keys;
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
