/* Writes the exact program text the library builds, and the build options of every configuration
 * it can choose (each profile, with and without the pocl vendor switch, each allowed vector width,
 * tiled score kernel shapes and the tiled kernel off, GPU attention kernel shapes),
 * as DIR/<variant>.cl and DIR/<variant>.options, for check_clc.sh to compile with a strict
 * compiler. Needs no OpenCL device: it uses the library's own option formatter (src/opencl/cl_tune.c). */
#include "ocl.h"

#include <stdio.h>
#include <string.h>

static int write_file(const char *dir, const char *name, const char *ext, const char *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "clc_variants: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: clc_variants DIR\n");
        return 2;
    }
    size_t len = 0;
    const char *src = ropeqk_opencl_program_source(&len);
    static const struct {
        const char *name;
        ropeqk_profile prof;
        bool pocl;
        int vk;   /* 0: the profile's */
        int ops;  /* -DRQ_OPS: the kernels of some operations only (0: all) */
        int tile, rb, tk; /* the tiled score kernel's shape (tile 0: the profile's; -1: off) */
    } v[] = {
        {"cpu", ROPEQK_PROFILE_CPU, false, 0, 0, 0, 0, 0},     {"cpu-pocl", ROPEQK_PROFILE_CPU, true, 0, 0, 0, 0, 0},
        {"gpu", ROPEQK_PROFILE_GPU, false, 0, 0, 0, 0, 0},     {"gpu-pocl", ROPEQK_PROFILE_GPU, true, 0, 0, 0, 0, 0},
        {"cpu-vk1", ROPEQK_PROFILE_CPU, false, 1, 0, 0, 0, 0}, {"cpu-vk4", ROPEQK_PROFILE_CPU, false, 4, 0, 0, 0, 0},
        {"cpu-vk8", ROPEQK_PROFILE_CPU, true, 8, 0, 0, 0, 0},  {"gpu-vk16", ROPEQK_PROFILE_GPU, false, 16, 0, 0, 0, 0},
        {"cpu-scores", ROPEQK_PROFILE_CPU, false, 0, RQ_OPS_SCORES, 0, 0, 0},
        {"gpu-attn", ROPEQK_PROFILE_GPU, false, 0, RQ_OPS_ATTN, 0, 0, 0},
        {"cpu-paged", ROPEQK_PROFILE_CPU, true, 0, RQ_OPS_PAGED, 0, 0, 0},
        /* few-row attention plans carry the paged kernels too (src/opencl/cl_dense.c) */
        {"cpu-attn-paged", ROPEQK_PROFILE_CPU, true, 0, RQ_OPS_ATTN | RQ_OPS_PAGED, 0, 0, 0},
        {"gpu-attn-paged", ROPEQK_PROFILE_GPU, false, 0, RQ_OPS_ATTN | RQ_OPS_PAGED, 0, 0, 0},
        {"gpu-untiled", ROPEQK_PROFILE_GPU, false, 0, 0, -1, 0, 0},
        {"gpu-t128", ROPEQK_PROFILE_GPU, false, 4, RQ_OPS_SCORES, 128, 8, 8},
        {"gpu-t16", ROPEQK_PROFILE_GPU, false, 0, RQ_OPS_SCORES, 16, 4, 4},
        {"cpu-t32", ROPEQK_PROFILE_CPU, true, 0, 0, 32, 8, 12},
        {"gpu-decode", ROPEQK_PROFILE_GPU, false, 0, 0, 0, 0, 0},
        {"gpu-decode-scores", ROPEQK_PROFILE_GPU, false, 0, RQ_OPS_SCORES, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        rq_tuning t;
        rq_tuning_defaults(v[i].prof, &t);
        t.vendor_ext = v[i].pocl; /* the vendor switch as on pocl (src/opencl/cl_knobs.c) */
        if (v[i].vk)
            t.vk = v[i].vk;
        if (strncmp(v[i].name, "gpu-decode", 10) == 0)
            t.decode = 1; /* the GPU profile's decode kernel (cl/decode_gpu.cl) */
        if (v[i].tile) {
            t.tile = v[i].tile > 0 ? v[i].tile : 0;
            t.rb = v[i].rb ? v[i].rb : t.rb;
            t.tk = v[i].tk ? v[i].tk : t.tk;
        }
        char opts[512];
        int n = rq_tuning_options(&t, opts, sizeof opts);
        if (n < 0 || (size_t)n >= sizeof opts - 16)
            return 1;
        if (v[i].ops)
            n += snprintf(opts + n, sizeof opts - (size_t)n, " -DRQ_OPS=%d", v[i].ops);
        opts[n++] = '\n';
        if (write_file(argv[1], v[i].name, "cl", src, len) || write_file(argv[1], v[i].name, "options", opts, (size_t)n))
            return 1;
    }
    /* the GPU attention kernel's shapes (cl/attention_gpu.cl): the tuner's extremes, the smallest and
     * largest of each knob, off, and on in the CPU profile (set by hand) */
    static const struct {
        const char *name;
        ropeqk_profile prof;
        int ops, bm, bn, tk, rb, dv;
    } ga[] = {
        {"gpu-ga-off", ROPEQK_PROFILE_GPU, RQ_OPS_ATTN, 0, 64, 16, 2, 128},
        {"gpu-ga64", ROPEQK_PROFILE_GPU, RQ_OPS_ATTN, 64, 64, 8, 4, 128},
        {"gpu-ga16", ROPEQK_PROFILE_GPU, RQ_OPS_ATTN, 16, 16, 4, 1, 16},
        {"gpu-ga128", ROPEQK_PROFILE_GPU, 0, 128, 128, 64, 8, 256},
        {"cpu-ga", ROPEQK_PROFILE_CPU, 0, 32, 64, 16, 2, 128},
    };
    for (size_t i = 0; i < sizeof ga / sizeof ga[0]; i++) {
        rq_tuning t;
        rq_tuning_defaults(ga[i].prof, &t);
        t.attn_tile = ga[i].bm, t.attn_keys = ga[i].bn, t.attn_tk = ga[i].tk, t.attn_rb = ga[i].rb, t.attn_dv = ga[i].dv;
        char opts[512];
        int n = rq_tuning_options(&t, opts, sizeof opts);
        if (n < 0 || (size_t)n >= sizeof opts - 16)
            return 1;
        if (ga[i].ops)
            n += snprintf(opts + n, sizeof opts - (size_t)n, " -DRQ_OPS=%d", ga[i].ops);
        opts[n++] = '\n';
        if (write_file(argv[1], ga[i].name, "cl", src, len) || write_file(argv[1], ga[i].name, "options", opts, (size_t)n))
            return 1;
    }
    return 0;
}
