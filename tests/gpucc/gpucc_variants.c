/* Writes the exact program text the library builds and the build options of the configurations it
 * can choose, for gpucc.py to compile with the compilers of GPU drivers (tests/gpucc):
 *   DIR/<variant>.cl, DIR/<variant>.options (one line) and DIR/<variant>.profile ("gpu" or "cpu").
 * As tests/clc/clc_variants.c does (same program text, same option formatter: src/tuning.c), but
 * every GPU-profile configuration the library itself can pick:
 *   - the profile's defaults (the heuristic), as the whole program and per operation (-DRQ_OPS: a
 *     plan builds the kernels of its operation only, ropeqk_ctx_warmup the whole program);
 *   - the decode kernel on (ROPEQK_DECODE=1 or the tuner's choice: -DRQ_DECODE_GPU=1) and the tiled
 *     kernel off;
 *   - the shipped H100 entry of src/tuning.c (TQ 4, WG 32, VK 4);
 *   - every GPU candidate of the tuner (src/tune.c, candidate()): the tiled kernel's shapes, the
 *     qk_scores knobs with the tiled kernel off, the attention knobs;
 *   - the shapes tests/clc also checks that only an environment override picks (VK 16, tile 16);
 * and the CPU-profile configurations (defaults per operation, decode off, the narrower vectors of
 * the AVX2 / SSE heuristic, the pocl vendor switch), for the check that no GPU-profile kernel is
 * compiled into a CPU-profile program. The tuner's and the shipped lists are copies: keep them in
 * step with src/tune.c and src/tuning.c. Needs no OpenCL device. */
#include "ctx.h"

#include <stdio.h>
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

/* One variant: t's options (plus -DRQ_OPS=ops where ops != 0), the program text and the profile. */
static int emit(const char *name, const rq_tuning *t, int ops)
{
    char opts[600];
    int n = rq_tuning_options(t, opts, sizeof opts);
    if (n < 0 || (size_t)n >= sizeof opts - 32)
        return 1;
    if (ops)
        n += snprintf(opts + n, sizeof opts - (size_t)n, " -DRQ_OPS=%d", ops);
    opts[n++] = '\n';
    const char *prof = t->profile == ROPEQK_PROFILE_GPU ? "gpu\n" : "cpu\n";
    return write_file(name, "cl", src, src_len) || write_file(name, "options", opts, (size_t)n) ||
           write_file(name, "profile", prof, strlen(prof));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpucc_variants DIR\n");
        return 2;
    }
    dir = argv[1];
    src = ropeqk_opencl_program_source(&src_len);
    static const struct {
        const char *suffix;
        int ops;
    } opsv[] = {{"", 0}, {"-scores", RQ_OPS_SCORES}, {"-attn", RQ_OPS_ATTN}, {"-paged", RQ_OPS_PAGED}};
    char name[128];
    rq_tuning t;
    int err = 0;

    /* ---- GPU profile ---- */
    for (size_t i = 0; i < sizeof opsv / sizeof opsv[0]; i++) {
        rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
        snprintf(name, sizeof name, "gpu%s", opsv[i].suffix);
        err |= emit(name, &t, opsv[i].ops);
        t.decode = 1; /* cl/decode_gpu.cl */
        snprintf(name, sizeof name, "gpu-decode%s", opsv[i].suffix);
        err |= emit(name, &t, opsv[i].ops);
    }
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
    t.tile = 0;
    err |= emit("gpu-untiled", &t, 0);
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t); /* src/tuning.c shipped[]: NVIDIA H100 */
    t.tq = 4, t.wg = 32, t.vk = 4;
    err |= emit("gpu-shipped-h100", &t, 0);
    /* src/tune.c candidate(), GPU: tiled shapes (qk_scores' knobs those in effect) */
    static const int gtiled[][3] = {{64, 4, 16}, {64, 4, 8}, {64, 4, 32}, {64, 8, 16},
                                    {64, 8, 32}, {128, 8, 16}, {128, 8, 8}, {32, 4, 16}};
    for (size_t i = 0; i < sizeof gtiled / sizeof gtiled[0]; i++) {
        rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
        t.tile = gtiled[i][0], t.rb = gtiled[i][1], t.tk = gtiled[i][2];
        snprintf(name, sizeof name, "gpu-tune-tile%d-rb%d-tk%d", t.tile, t.rb, t.tk);
        err |= emit(name, &t, RQ_OPS_SCORES);
    }
    /* then qk_scores alone (tiled kernel off) */
    static const int gtq[] = {1, 2, 4, 8}, gvk[] = {1, 4}, gwg[] = {32, 64, 128};
    for (int k = 0; k < 24; k++) {
        rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
        t.tq = gtq[k % 4], t.nv = 1, t.vk = gvk[(k / 4) % 2], t.wg = gwg[k / 8], t.tile = 0;
        snprintf(name, sizeof name, "gpu-tune-tq%d-vk%d-wg%d", t.tq, t.vk, t.wg);
        err |= emit(name, &t, RQ_OPS_SCORES);
    }
    /* attention */
    static const int gatq[] = {1, 2}, gavk[] = {1, 4}, gawg[] = {32, 64};
    for (int k = 0; k < 8; k++) {
        rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
        t.atq = gatq[k % 2], t.avk = gavk[(k / 2) % 2], t.awg = gawg[k / 4];
        snprintf(name, sizeof name, "gpu-tune-atq%d-avk%d-awg%d", t.atq, t.avk, t.awg);
        err |= emit(name, &t, RQ_OPS_ATTN);
    }
    /* environment-only shapes that tests/clc checks too */
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
    t.vk = 16;
    err |= emit("gpu-env-vk16", &t, RQ_OPS_SCORES);
    rq_tuning_defaults(ROPEQK_PROFILE_GPU, false, &t);
    t.tile = 16, t.rb = 4, t.tk = 4;
    err |= emit("gpu-env-tile16-rb4-tk4", &t, RQ_OPS_SCORES);

    /* ---- CPU profile (the reverse check only) ---- */
    for (size_t i = 0; i < sizeof opsv / sizeof opsv[0]; i++) {
        rq_tuning_defaults(ROPEQK_PROFILE_CPU, false, &t);
        snprintf(name, sizeof name, "cpu%s", opsv[i].suffix);
        err |= emit(name, &t, opsv[i].ops);
    }
    rq_tuning_defaults(ROPEQK_PROFILE_CPU, true, &t);
    err |= emit("cpu-pocl", &t, 0);
    rq_tuning_defaults(ROPEQK_PROFILE_CPU, false, &t);
    t.decode = 0;
    err |= emit("cpu-nodecode", &t, 0);
    for (int vk = 4; vk <= 8; vk += 4) { /* src/tuning.c pick_base: AVX2 (8 lanes) and narrower */
        rq_tuning_defaults(ROPEQK_PROFILE_CPU, false, &t);
        t.vk = t.avk = vk, t.tq = 4, t.nv = 1;
        snprintf(name, sizeof name, "cpu-vk%d", vk);
        err |= emit(name, &t, 0);
    }
    return err;
}
