/* The OpenCL backend's knobs (knob.h): what its kernels get as -D options (rq_tuning_options) and
 * its host reads, with their ranges, environment variables and defaults per profile; the shipped
 * measured entries; the vendor switch; and the rule the GPU attention kernel's knobs hold together.
 * The core resolves, caches and lists them from this table (src/core/tuning.c, tune_cache.c).
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
 *          sweep tile, block and step (src/opencl/cl_tune.c). The host turns it off when the work-group exceeds
 *          the device's limit or the local arrays exceed 48 KiB or the device's local memory (below),
 *          and plan creation falls back to qk_scores when the compiled kernel allows fewer
 *          work-items (src/opencl/cl_plan.c).
 *
 *
 * Vendor switch (vendor_ext): on pocl (identified by its platform name) the program is built with
 * -DRQ_POCL_EXT=1, which enables Clang builtins in cl/scores.cl, and with -w: on hosts without
 * AVX-512, pocl's Clang notes at every call with a 16-wide vector argument that the x86 calling
 * convention differs (-Wpsabi, 143 notes on an AVX2 host, printed as "143 warnings generated." on
 * stderr at the first build). These notes concern pocl's own internal calls; real errors still fail
 * the build and keep their log, and the source itself is held to -pedantic -Werror by the clc test. */
#include "ocl.h"

#include <stdio.h>
#include <string.h>

static bool vk_ok(long v) { return v == 1 || v == 4 || v == 8 || v == 16; }
static bool even_ok(long v) { return v % 2 == 0; }
static bool tile_ok(long v) { return v == 0 || v == 16 || v == 32 || v == 64 || v == 128; }
static bool rb_ok(long v) { return v == 4 || v == 8; }   /* float4 groups of keys per work-item */
static bool tk_ok(long v) { return v % 4 == 0; }         /* float4 groups of dims per step */
static bool ga_bn_ok(long v) { return v == 16 || v == 32 || v == 64 || v == 128; }
static bool ga_rb_ok(long v) { return v == 1 || v == 2 || v == 4 || v == 8; }
static bool ga_dv_ok(long v) { return v % 16 == 0; }

/* name (of the rq_tuning and ropeqk_tuning fields too), environment variable (ROPEQK_ENV), range,
 * allowed values, kind, flags */
#define KNOB(name, ENV, lo, hi, ok, allowed, kind, flags) \
    #name, "ROPEQK_" #ENV, lo, hi, ok, allowed, kind, flags, offsetof(rq_tuning, name), offsetof(ropeqk_tuning, name)
#define C RQ_KNOB_CACHED
#define S RQ_KNOB_SHOWN
#define I RQ_KNOB_INT
#define OFF RQ_KNOB_OFF

const rq_knob rq_cl_knobs[] = {
    {KNOB(tq, TQ, 1, 32, NULL, "", I, C | S), 12, 4, "qk_scores: query rows per work-item"},
    {KNOB(wg, WG, 1, 1024, NULL, "", I, C | S), 16, 64, "qk_scores: work-group size along keys"},
    {KNOB(vk, VK, 1, 16, vk_ok, "1, 4, 8 or 16", I, C | S), 16, 1, "qk_scores: keys per work-item (vector width)"},
    {KNOB(dkb, DKB, 2, 1024, even_ok, "even", I, C | S), 64, 64, "decode kernel (CPU profile): keys per work-item"},
    {KNOB(dwg, DWG, 1, 256, NULL, "", I, C | S), 2, 2, "decode kernel (CPU profile): work-group size"},
    /* the decode path: on for the CPU profile; on GPUs off until measured there (the tuner compares both) */
    {KNOB(decode, DECODE, 0, 1, NULL, "0 (default), 1 (on) or -1 (off)", RQ_KNOB_ONOFF, C), 1, 0,
     "the decode kernel for few query rows (API 1 on, -1 off; environment 1 / 0)"},
    {KNOB(rot_uwg, ROT_UWG, 1, 256, NULL, "", I, C), 16, 16, "RoPE pass: units per work-group"},
    /* attention: 8 rows x 16 keys per work-item on CPUs (one zmm of scores per row, o[8][Dv] in
     * private memory); one row, one key at a time on GPUs, the fallback of the GPU attention kernel */
    {KNOB(atq, ATQ, 1, 16, NULL, "", I, C | S), 8, 1, "attention: query rows per work-item"},
    {KNOB(avk, AVK, 1, 16, vk_ok, "1, 4, 8 or 16", I, C | S), 16, 1, "attention: keys per block (vector width)"},
    {KNOB(awg, AWG, 1, 1024, NULL, "", I, C | S), 1, 64, "attention: work-group size"},
    {KNOB(nv, NV, 1, 2, NULL, "", I, C | S), 2, 1, "qk_scores: vectors of keys per work-item"},
    /* the tiled score kernel: GPU profile only (the header comment) */
    {KNOB(tile, TILE, 0, 128, tile_ok, "16, 32, 64 or 128; 0 (environment) or -1 (API) off", OFF, C | S), 0, 64,
     "qk_scores_tiled: scores per work-group along each side"},
    {KNOB(rb, RB, 4, 8, rb_ok, "4 or 8", I, C | S), 4, 4, "qk_scores_tiled: scores per work-item along each side"},
    {KNOB(tk, TK, 4, 64, tk_ok, "a multiple of 4", I, C | S), 16, 16, "qk_scores_tiled: head dims per step"},
    /* the GPU attention kernel: 64 rows x 64 keys, 4 rows x 4 keys of S and 4 rows x 8 dims of O per
     * work-item, 256 work-items: the register-blocked qk_attention_fa2_* (cl/attention_fa2.cl;
     * docs/prefill-gpu.md has its registers, instruction mix and predicted H200 time, the kernel's
     * header and src/opencl/cl_tune.c's candidates the other shapes). 1 or 2 rows per work-item run
     * qk_attention_gpu_* (cl/attention_gpu.cl), whose default was 32/64/16/2/128 */
    {KNOB(attn_tile, ATTN_TILE, 0, 128, tile_ok, "16, 32, 64 or 128; 0 (environment) or -1 (API) off", OFF, C | S), 0,
     64, "GPU attention kernel: query rows per work-group"},
    {KNOB(attn_keys, ATTN_KEYS, 16, 128, ga_bn_ok, "16, 32, 64 or 128", I, C | S), 64, 64,
     "GPU attention kernel: keys per tile"},
    {KNOB(attn_tk, ATTN_TK, 4, 64, tk_ok, "a multiple of 4 dividing attn_keys", I, C | S), 16, 16,
     "GPU attention kernel: head dims per step"},
    {KNOB(attn_rb, ATTN_RB, 1, 8, ga_rb_ok, "1, 2, 4 or 8 dividing attn_tile", I, C | S), 4, 4,
     "GPU attention kernel: query rows per work-item"},
    {KNOB(attn_dv, ATTN_DV, 16, 256, ga_dv_ok, "a multiple of attn_keys", I, C | S), 128, 128,
     "GPU attention kernel: V dims per work-group"},
    /* The two host-side crossovers (the tuner's "chunk" and "dense" families search them per device:
     * src/opencl/cl_tune_paged.c). Both profiles: not yet measured on a GPU.
     * chunk_rows: rows from which a sequence of a ragged paged call takes the chunk path
     * (src/opencl/cl_paged_chunk.c). Measured on pocl (2 AMD EPYC cores, Hq 32 / Hkv 8 / D 128, f16
     * cache, `ropeqk-bench --ragged`): a row through the decode kernels costs ~0.4 us per key (it
     * rotates every key), the attention kernel ~0.12 us per key and row plus the gather and the
     * rotation of K once (~1.6 us per key): even at about 6 rows; 16 keeps speculative steps (2-8
     * rows), whose keys the decode kernels read in one split-K pass, on them. */
    {KNOB(chunk_rows, CHUNK_ROWS, 1, RQ_CHUNK_ROWS_MAX, NULL, "", I, C | RQ_KNOB_CACHE_V4 | S), 16, 16,
     "paged ragged calls: query rows from which a sequence takes the chunk path"},
    /* dense_rows: attention calls with at most this many query rows run through the paged decode's
     * kernels (src/opencl/cl_dense.c): each row is a sequence of the decode, which reads K and V once
     * per row where the old path rotates K once for all rows. Measured (`ropeqk-bench
     * --dense-decode`, 32768 keys, Hkv 8, D 128, f16, causal, 2-core AMD EPYC AVX-512, pocl, shared
     * machine at load 1 to 4: medians of 11 interleaved rounds, three runs), old path time / new
     * path time: Hq 32 (GQA 4) Sq 1, 2, 4, 8, 16: 4.3-4.5x, 4.0-4.7x, 2.6-2.9x, 1.9-2.0x, 1.45-2.1x
     * (Sq 32: 1.29x, Sq 64: 1.15x in an earlier run); Hq 8 (no GQA) Sq 1, 2, 4, 8: 12-13x,
     * 5.3-6.8x, 2.9-3.5x, 1.4-1.8x. The new path's time grows by one K+V read per row, the old
     * one's more slowly: 16 rows keep it ahead on both shapes. The environment variable keeps its
     * name from when it was a limit only. */
    {"dense_rows", "ROPEQK_DENSE_DECODE", 0, RQ_DENSE_ROWS_MAX, NULL, "1..1024; 0 (environment) or -1 (API) off", OFF,
     C | RQ_KNOB_CACHE_V4 | S, offsetof(rq_tuning, dense_rows), offsetof(ropeqk_tuning, dense_rows), 16, 16,
     "dense attention: most query rows run through the paged decode kernels"},
    /* the paged decode's fast pass 1 (cl/paged_fast.cl): -1 = where it is meant to run (the GPU
     * profile), and its split aiming at the kernel's own default of work-groups per compute unit
     * (0: RQ_FSPLITS in cl/contract.h; docs/paged-decode-gpu.md) */
    {"paged_fast", "ROPEQK_PAGED_FAST", 0, 1, NULL, "0 (never) or 1; default -1: where meant to run", I, 0,
     offsetof(rq_tuning, paged_fast), RQ_KNOB_NO_API, -1, -1, "paged and dense decode: the fast pass 1"},
    {"paged_wgs", "ROPEQK_PAGED_WGS", 1, 64, NULL, "1..64; default 0: the kernel's own (8)", I, 0,
     offsetof(rq_tuning, paged_wgs), RQ_KNOB_NO_API, 0, 0, "paged fast pass 1: work-groups per compute unit its split aims at"},
    /* the vendor switch: 1 only where rq_cl_tuning_shipped finds pocl (the header comment) */
    {"vendor_ext", NULL, -1, 0, NULL, "0 (auto) or -1 (off)", RQ_KNOB_VENDOR, 0, offsetof(rq_tuning, vendor_ext),
     offsetof(ropeqk_tuning, vendor_ext), 0, 0, "vendor builtins where the device is identified (pocl)"},
};
_Static_assert(sizeof rq_cl_knobs / sizeof rq_cl_knobs[0] == RQ_CL_N_KNOBS, "ocl.h's RQ_CL_N_KNOBS");

bool rq_cl_tuning_check(const rq_tuning *t, char *why, size_t len)
{
    /* the GPU attention kernel's knobs together (cl/attention_gpu.cl's #error) */
    if (!(t->attn_keys % t->attn_tk || t->attn_tile % t->attn_rb || t->attn_dv % t->attn_keys))
        return true;
    snprintf(why, len,
             "GPU attention shape rows %d (ROPEQK_ATTN_TILE), keys %d (ROPEQK_ATTN_KEYS), step %d (ROPEQK_ATTN_TK), "
             "rows per work-item %d (ROPEQK_ATTN_RB), V dims %d (ROPEQK_ATTN_DV): the step must divide the keys, the "
             "rows per work-item the rows, and the V dims be a multiple of the keys",
             t->attn_tile, t->attn_keys, t->attn_tk, t->attn_rb, t->attn_dv);
    return false;
}

bool rq_cl_pocl(const rq_devinfo *dev)
{
    /* pocl names its platform "Portable Computing Language"; its Clang builtins are safe there only */
    return strstr(dev->platform, "Portable Computing Language") != NULL;
}

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

void rq_cl_tuning_shipped(const rq_devinfo *dev, rq_tuning *t)
{
    t->vendor_ext = rq_cl_pocl(dev);
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++)
        if (strstr(dev->platform, shipped[i].platform) && strstr(dev->name, shipped[i].device) &&
            shipped[i].profile == t->profile) {
            t->tq = shipped[i].tq;
            t->wg = shipped[i].wg;
            t->vk = shipped[i].vk;
            snprintf(t->config_source, sizeof t->config_source, "shipped (%s)", shipped[i].note);
        }
}
