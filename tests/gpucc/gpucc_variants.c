/* Writes the exact program text the library builds and the build options of the configurations it
 * can choose, for gpucc.py to compile with the compilers of GPU drivers (tests/gpucc):
 *   DIR/<variant>.cl, DIR/<variant>.options (one line) and DIR/<variant>.profile ("gpu" or "cpu").
 * As tests/clc/clc_variants.c does (same program text, same option formatter: src/opencl/cl_tune.c),
 * but every GPU-profile configuration the library itself can pick:
 *   - the profile's defaults (the heuristic), as the whole program and per operation (-DRQ_OPS: a
 *     plan builds the kernels of its operation only, ropeqk_ctx_warmup the whole program);
 *   - the decode kernel on (ROPEQK_DECODE=1 or the tuner's choice: -DRQ_DECODE_GPU=1) and the tiled
 *     kernel off;
 *   - the shipped H100 entry of src/core/tuning.c, resolved for a made-up NVIDIA H100;
 *   - every GPU candidate of the tuner (src/opencl/cl_tune.c, rq_cl_tune_candidate, called here): the
 *     tiled kernel's shapes, the qk_scores knobs with the tiled kernel off, the attention knobs;
 *   - the shapes tests/clc also checks that only an environment override picks (VK 16, tile 16);
 * and the CPU-profile configurations (defaults per operation, decode off, the narrower vectors of
 * the AVX2 / SSE heuristic, the pocl vendor switch), for the check that no GPU-profile kernel is
 * compiled into a CPU-profile program. Every list is the library's own (resolution on made-up
 * devices, the tuner's candidate function): nothing here to keep in step. Needs no OpenCL device. */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *src;
static size_t src_len;
static const char *dir;

static int write_file(const char *name, const char *ext, const char *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "gpucc_variants: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* One variant: t's options (plus `extra`, and -DRQ_OPS=ops where ops != 0), the program text and the
 * profile. */
static int emit_ex(const char *name, const rq_tuning *t, const char *extra, int ops)
{
    char opts[800];
    int n = rq_tuning_options(t, opts, sizeof opts);
    if (n < 0 || (size_t)n >= sizeof opts - 64)
        return 1;
    n += snprintf(opts + n, sizeof opts - (size_t)n, "%s", extra);
    if (ops)
        n += snprintf(opts + n, sizeof opts - (size_t)n, " -DRQ_OPS=%d", ops);
    opts[n++] = '\n';
    const char *prof = t->profile == ROPEQK_PROFILE_GPU ? "gpu\n" : "cpu\n";
    return write_file(name, "cl", src, src_len) || write_file(name, "options", opts, (size_t)n) ||
           write_file(name, "profile", prof, strlen(prof));
}

static int emit(const char *name, const rq_tuning *t, int ops) { return emit_ex(name, t, "", ops); }

/* The configuration the library resolves for a made-up OpenCL device (no environment, no cache). */
static rq_tuning resolved(ropeqk_profile prof, const char *platform, const char *device, int native_vec)
{
    rq_devinfo dev;
    memset(&dev, 0, sizeof dev);
    dev.cpu = prof == ROPEQK_PROFILE_CPU;
    dev.max_wg = 1024;
    dev.local_mem = 48 << 10;
    dev.native_vec = native_vec;
    snprintf(dev.platform, sizeof dev.platform, "%s", platform);
    snprintf(dev.name, sizeof dev.name, "%s", device);
    ropeqk_tuning req;
    memset(&req, 0, sizeof req);
    req.profile = prof;
    rq_tuning t;
    if (rq_tuning_resolve(&rq_opencl_backend, &req, &dev, &t) != ROPEQK_SUCCESS) {
        fprintf(stderr, "gpucc_variants: resolution failed: %s\n", ropeqk_last_error());
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpucc_variants DIR\n");
        return 2;
    }
    dir = argv[1];
    src = ropeqk_opencl_program_source(&src_len);
    /* only the made-up devices decide: no ROPEQK_* override, no tuning cache */
    setenv("XDG_CACHE_HOME", "/nonexistent-ropeqk-gpucc", 1);
    static const char *const env[] = {"ROPEQK_PROFILE", "ROPEQK_TQ", "ROPEQK_WG", "ROPEQK_VK", "ROPEQK_NV",
                                      "ROPEQK_DKB", "ROPEQK_DWG", "ROPEQK_DECODE", "ROPEQK_ROT_UWG", "ROPEQK_ATQ",
                                      "ROPEQK_AVK", "ROPEQK_AWG", "ROPEQK_TILE", "ROPEQK_RB", "ROPEQK_TK"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        unsetenv(env[i]);
    static const struct {
        const char *suffix;
        int ops;
    } opsv[] = {{"", 0}, {"-scores", RQ_OPS_SCORES}, {"-attn", RQ_OPS_ATTN}, {"-paged", RQ_OPS_PAGED},
                {"-attn-paged", RQ_OPS_ATTN | RQ_OPS_PAGED}}; /* few-row attention plans: src/opencl/cl_dense.c */
    char name[128];
    rq_tuning t;
    int err = 0;

    /* ---- GPU profile ---- */
    for (size_t i = 0; i < sizeof opsv / sizeof opsv[0]; i++) {
        rq_tuning_defaults(ROPEQK_PROFILE_GPU, &t);
        snprintf(name, sizeof name, "gpu%s", opsv[i].suffix);
        err |= emit(name, &t, opsv[i].ops);
        t.decode = 1; /* cl/decode_gpu.cl */
        snprintf(name, sizeof name, "gpu-decode%s", opsv[i].suffix);
        err |= emit(name, &t, opsv[i].ops);
    }
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, &t);
    t.tile = 0;
    err |= emit("gpu-untiled", &t, 0);
    t = resolved(ROPEQK_PROFILE_GPU, "NVIDIA CUDA", "NVIDIA H100 80GB HBM3", 1); /* the shipped entry */
    err |= emit("gpu-shipped-h100", &t, 0);
    /* AMD's and Intel's GPUs: qk_attention_gpu_* in its own shape (src/opencl/cl_tune.c rq_cl_tuning_base) */
    t = resolved(ROPEQK_PROFILE_GPU, "AMD Accelerated Parallel Processing", "gfx90a:sramecc+:xnack-", 1);
    err |= emit("gpu-amd", &t, RQ_OPS_ATTN);
    t = resolved(ROPEQK_PROFILE_GPU, "Intel(R) OpenCL Graphics", "Intel(R) Arc(TM) A770 Graphics", 1);
    err |= emit("gpu-intel", &t, RQ_OPS_ATTN);
    /* the tuner's GPU candidates, from the defaults (each family starts from the winners so far:
     * the defaults are the first of them) */
    static const struct {
        rq_family f;
        const char *name;
        int ops;
    } fams[] = {{RQ_FAM_SCORES, "scores", RQ_OPS_SCORES}, {RQ_FAM_DECODE, "decode", RQ_OPS_SCORES},
                {RQ_FAM_ATTN, "attn", RQ_OPS_ATTN}};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
        for (int k = 1;; k++) {
            rq_tuning_defaults(ROPEQK_PROFILE_GPU, &t);
            if (!rq_cl_tune_candidate(fams[f].f, false, k, &t))
                break;
            snprintf(name, sizeof name, "gpu-tune-%s-%d", fams[f].name, k);
            err |= emit(name, &t, fams[f].ops);
        }
    /* the attention-only program a plan builds when the compiled GPU attention kernel does not fit
     * the device (src/opencl/cl_attn.c): qk_attention_* as the fallback */
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, &t);
    err |= emit_ex("gpu-attn-fallback", &t, " -DRQ_ATTN_FALLBACK=1", RQ_OPS_ATTN);
    /* the program a plan builds when the register-blocked kernel's shape is configured but its head
     * dims are not multiples of 4: qk_attention_gpu_* in its own shape (src/opencl/cl_attn.c) */
    err |= emit_ex("gpu-attn-dims-fallback", &t, " -DRQ_GA_FALLBACK=1", RQ_OPS_ATTN);
    /* environment-only shapes that tests/clc checks too */
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, &t);
    t.vk = 16;
    err |= emit("gpu-env-vk16", &t, RQ_OPS_SCORES);
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, &t);
    t.tile = 16, t.rb = 4, t.tk = 4;
    err |= emit("gpu-env-tile16-rb4-tk4", &t, RQ_OPS_SCORES);

    /* ---- CPU profile (the reverse check only) ---- */
    for (size_t i = 0; i < sizeof opsv / sizeof opsv[0]; i++) {
        rq_tuning_defaults(ROPEQK_PROFILE_CPU, &t);
        snprintf(name, sizeof name, "cpu%s", opsv[i].suffix);
        err |= emit(name, &t, opsv[i].ops);
    }
    rq_tuning_defaults(ROPEQK_PROFILE_CPU, &t);
    t.vendor_ext = 1; /* pocl's switch (src/opencl/cl_knobs.c) */
    err |= emit("cpu-pocl", &t, 0);
    rq_tuning_defaults(ROPEQK_PROFILE_CPU, &t);
    t.decode = 0;
    err |= emit("cpu-nodecode", &t, 0);
    for (int vk = 4; vk <= 8; vk += 4) { /* the heuristic on AVX2 (8 lanes) and narrower */
        t = resolved(ROPEQK_PROFILE_CPU, "made-up CPU platform", "made-up CPU", vk);
        snprintf(name, sizeof name, "cpu-vk%d", vk);
        err |= emit(name, &t, 0);
    }
    return err;
}
