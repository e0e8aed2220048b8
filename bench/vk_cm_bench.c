/* `ropeqk-bench --vulkan --tensor-cores`: the tensor-core path (docs/tensor-cores.md) on one Vulkan
 * device, against today's shaders on the same device:
 *   tc-accurate, tc-fast  plans on a context with vk_coopmat 0 (cooperative matrices where the device
 *                         has them: the line "tensor cores: on" of the options says it), ROPEQK_MATH_*
 *   simt                  the same plans on a context with vk_coopmat -1 (today's f32 shaders)
 * on the shapes of issue 26 (GPU: attention f16 causal B 1 H 32 S 4096 D 128 with f32 O, scores f16
 * B 1 H 32 S 2048 D 128; a CPU device gets small ones, its emulated path only with
 * ROPEQK_VK_COOPMAT=1, which the simt context does not see). Device-local buffers, each run
 * ropeqk_plan_run and a wait for its event. Before timing each output is read back and
 * compared with simt's (attention: max |O - O_simt| over max |V|; scores: max |S - S_simt| over
 * max |S_simt|): above 5e-5 (accurate) or 5e-3 (fast) the shape is reported and not timed, exit 3.
 * Timing: warm-ups, then rounds of one run of each impl; medians. TFLOP/s count 4 H S^2 D / 2
 * (causal attention) and 2 H S^2 D (scores), as PyTorch's SDPA figures do. */
#include "vk_cm_bench.h"

#include "clock.h"
#include "runwait.h"
#include "values.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { I_ACC, I_FAST, I_SIMT, I_N };
static const char *const iname[I_N] = {"tc-accurate", "tc-fast", "simt"};

typedef struct {
    const char *name;
    bool attn;
    int64_t H, S, D;
} tshape;

static const tshape gpu_shapes[] = {{"attn-f16-causal-h32-s4096-d128", true, 32, 4096, 128},
                                    {"scores-f16-h32-s2048-d128", false, 32, 2048, 128}};
static const tshape cpu_shapes[] = {{"attn-f16-causal-h4-s256-d128", true, 4, 256, 128},
                                    {"scores-f16-h4-s256-d128", false, 4, 256, 128}};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static ropeqk_ctx *open_ctx(const char *spec, int mode)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = spec;
    cp.tuning.vk_coopmat = mode;
    ropeqk_ctx *c = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &c);
    if (st)
        fprintf(stderr, "ropeqk-bench: --tensor-cores: context: %s (%s)\n", ropeqk_status_string(st), ropeqk_last_error());
    return c;
}

/* One shape: plans, buffers, the check, the timed rounds. 0 ok, 3 disagreement, 1 error. */
static int one_shape(ropeqk_ctx *ctx[2], const tshape *s, int runs, int warmup, FILE *csv)
{
    ropeqk_plan_desc d = {.op = s->attn ? ROPEQK_OP_ATTENTION : ROPEQK_OP_SCORES};
    ropeqk_default_params(&d.params);
    d.params.causal = s->attn;
    d.q = d.k = ropeqk_tensor_bhsd(ROPEQK_F16, 1, s->H, s->S, s->D);
    d.v = s->attn ? d.q : (ropeqk_tensor){0};
    d.out = s->attn ? ropeqk_tensor_bhsd(ROPEQK_F32, 1, s->H, s->S, s->D) : ropeqk_tensor_bhsd(ROPEQK_F32, 1, s->H, s->S, s->S);
    size_t n = (size_t)(s->H * s->S * s->D), no = ropeqk_tensor_extent(&d.out) / 4;
    uint16_t *h[3];
    float *f = malloc(n * 4), *out[I_N] = {NULL};
    uint64_t rng = BENCH_SEED;
    for (int i = 0; i < 3; i++) {
        h[i] = malloc(n * 2);
        bench_fill(&rng, f, h[i], n);
    }
    ropeqk_buffer *buf[2][4] = {{NULL}};
    ropeqk_plan *pl[I_N] = {NULL};
    int rc = 0;
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int b = 0; b < 2 && !st; b++)
        for (int i = 0; i < 4 && !st; i++)
            if (i != 2 || s->attn)
                st = rqs_buffer_make(ctx[b], i == 3 ? no * 4 : n * 2, i == 3 ? NULL : h[i], 0, &buf[b][i]);
    for (int i = 0; i < I_N && !st; i++) {
        ropeqk_plan_desc di = d;
        di.params.math = i == I_FAST ? ROPEQK_MATH_FAST : ROPEQK_MATH_ACCURATE;
        st = ropeqk_plan_create(ctx[i == I_SIMT], &di, &pl[i]);
    }
    double ms[I_N][64];
    int nt = runs < 64 ? runs : 64;
    for (int i = 0; i < I_N && !st; i++) { /* the check run */
        int b = i == I_SIMT;
        ropeqk_args a = {.q = {buf[b][0], 0}, .k = {buf[b][1], 0}, .out = {buf[b][3], 0}};
        if (s->attn)
            a.v = (ropeqk_mem){buf[b][2], 0};
        if (!(out[i] = malloc(no * 4)))
            st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        if (!st)
            st = rqs_plan_run_wait(pl[i], &a, NULL);
        if (!st)
            st = ropeqk_buffer_read(buf[b][3], 0, out[i], no * 4);
    }
    if (st) {
        printf("%-34s failed: %s (%s)\n", s->name, ropeqk_status_string(st), ropeqk_last_error());
        rc = 1;
        goto done;
    }
    double ref = 0; /* max |V| (values in [-1, 1)) or max |S| of simt */
    for (size_t j = 0; j < (s->attn ? n : no); j++)
        ref = fmax(ref, s->attn ? fabs((double)f[j]) : fabs((double)out[I_SIMT][j]));
    double diff[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        for (size_t j = 0; j < no; j++) {
            double x = out[i][j], y = out[I_SIMT][j];
            if (!(isinf(x) && isinf(y) && x == y))
                diff[i] = fmax(diff[i], isnan(x) != isnan(y) ? INFINITY : fabs(x - y) / fmax(ref, 1e-30));
        }
    printf("%-34s check against simt: tc-accurate %.3g, tc-fast %.3g (relative to max |%s|)\n", s->name, diff[0],
           diff[1], s->attn ? "V" : "S");
    if (!(diff[0] <= 5e-5) || !(diff[1] <= 5e-3)) {
        printf("%-34s NOT TIMED: the tensor-core outputs disagree with today's shaders\n", s->name);
        rc = 3;
        goto done;
    }
    for (int r = -warmup; r < nt; r++)
        for (int i = 0; i < I_N; i++) {
            int b = i == I_SIMT;
            ropeqk_args a = {.q = {buf[b][0], 0}, .k = {buf[b][1], 0}, .out = {buf[b][3], 0}};
            if (s->attn)
                a.v = (ropeqk_mem){buf[b][2], 0};
            double t0 = rqs_now();
            if ((st = rqs_plan_run_wait(pl[i], &a, NULL))) {
                printf("%-34s %s failed: %s (%s)\n", s->name, iname[i], ropeqk_status_string(st), ropeqk_last_error());
                rc = 1;
                goto done;
            }
            if (r >= 0)
                ms[i][r] = (rqs_now() - t0) * 1e3;
        }
    double fl = 2.0 * (double)s->H * (double)s->S * (double)s->S * (double)s->D; /* causal attention: 4 H S^2 D / 2 */
    double med[I_N];
    for (int i = 0; i < I_N; i++) {
        qsort(ms[i], (size_t)nt, sizeof ms[i][0], cmp_d);
        med[i] = ms[i][nt / 2];
    }
    for (int i = 0; i < I_N; i++) {
        printf("%-34s %-12s %9.3f ms %9.3f TFLOP/s  %.2fx simt\n", s->name, iname[i], med[i], fl / med[i] * 1e-9,
               med[I_SIMT] / med[i]);
        if (csv)
            fprintf(csv, "%s,%s,%.4f,%.3f\n", s->name, iname[i], med[i], fl / med[i] * 1e-9);
    }
done:
    for (int i = 0; i < I_N; i++) {
        ropeqk_plan_destroy(pl[i]);
        free(out[i]);
    }
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++)
            ropeqk_buffer_destroy(buf[b][i]);
    for (int i = 0; i < 3; i++)
        free(h[i]);
    free(f);
    return rc;
}

int bench_tensor_cores(const char *vk_spec, int runs, int warmup, const char *shape_filter, FILE *csv)
{
    /* the simt context must not see ROPEQK_VK_COOPMAT (the environment wins over the parameter) */
    const char *env = getenv("ROPEQK_VK_COOPMAT");
    char saved[16] = "";
    if (env)
        snprintf(saved, sizeof saved, "%s", env);
    ropeqk_ctx *ctx[2] = {open_ctx(vk_spec, 0), NULL};
    unsetenv("ROPEQK_VK_COOPMAT");
    ctx[1] = open_ctx(vk_spec, -1);
    if (env)
        setenv("ROPEQK_VK_COOPMAT", saved, 1);
    int rc = 0;
    if (!ctx[0] || !ctx[1]) {
        rc = 1;
        goto done;
    }
    const char *opts = ropeqk_ctx_build_options(ctx[0]);
    const char *tc = strstr(opts, "tensor cores:");
    printf("ropeqk-bench --tensor-cores %s on %s\n%s\n", ropeqk_version(), ropeqk_ctx_device_description(ctx[0]),
           tc ? tc : opts);
    bool cpu = strstr(ropeqk_ctx_device_description(ctx[0]), "llvmpipe") != NULL;
    const tshape *sh = cpu ? cpu_shapes : gpu_shapes;
    if (csv)
        fprintf(csv, "shape,impl,median_ms,tflops\n");
    for (int i = 0; i < 2; i++) {
        if (shape_filter && !strstr(sh[i].name, shape_filter))
            continue;
        int r = one_shape(ctx, &sh[i], runs, warmup, csv);
        rc = r > rc ? r : rc;
    }
done:
    ropeqk_ctx_destroy(ctx[0]);
    ropeqk_ctx_destroy(ctx[1]);
    return rc;
}
