/* `ropeqk-bench --vulkan`: one plan description per shape, made into a plan on the OpenCL context
 * and one on a Vulkan context ("vulkan", or $ROPEQK_DEVICE when it names a Vulkan device), run on
 * device-resident buffers holding the same inputs, in one process:
 *   opencl   ropeqk_opencl_plan_enqueue / _paged_enqueue, then clFinish;
 *   vulkan   one command buffer per shape, recorded ONCE (plan record + the caller's barrier) and
 *            submitted per run, then a fence wait; its recording time is reported separately, as
 *            are plan creation (Vulkan: pipeline creation on the first shape) and the first call;
 *   cblas    the existing host baseline (host RoPE + OpenBLAS, attention: + host softmax), on the
 *            scores and attention shapes;
 *   *-copy   clEnqueueCopyBuffer / vkCmdCopyBuffer over K (paged: K and V), each backend's own
 *            bandwidth yardstick, on the decode shapes.
 * Before timing, both backends' outputs (initialised to NaN) are read back and compared: a
 * max |vulkan - opencl| above TOL leaves the shape untimed and the exit status 3, so a broken backend
 * is never reported as fast. Timing: warm-ups, then rounds of one run of each impl (load drift on a
 * shared machine hits all alike); the median per impl. Wall time, first submit/enqueue to the end of
 * the wait: the same clock for both APIs. GFLOP/s and GB/s as the other modes define them: scores
 * 2*Hq*Sq*Sk*D and Q + K + S bytes; attention 4*Hq*Sq*Sk*D (halved causal) and Q + K + V + O bytes;
 * paged decode 4*Hq*len*D and the K + V bytes read (--paged's figure). */
#include "vk_bench.h"

#include "attn_impl.h"
#include "clock.h"
#include "cpu.h"
#include "scores_impl.h"
#include "values.h"
#include "vk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4 /* max |vulkan - opencl|: both use the exact-angle RoPE, seen differences are ~1e-7 */
#define MAXR 1000

enum { V_CL, V_VK, V_CBLAS, V_CLCOPY, V_VKCOPY, V_N };
static const char *const vname[V_N] = {"opencl", "vulkan", "cblas", "opencl-copy", "vulkan-copy"};

typedef enum { K_SCORES, K_ATTN, K_PAGED } vkind;
typedef struct {
    const char *name;
    vkind kind;
    int Hq, Hkv, Sq, Sk, D; /* B = 1; paged: Sk = tokens of the one sequence */
    int causal;
    ropeqk_dtype dt;        /* of Q/K/V (paged: of the caches; q stays f32) */
} vshape;

/* Sizes that finish in seconds per run on a 2-core lavapipe. */
static const vshape shapes[] = {
    {"prefill-bh8-s512-d128", K_SCORES, 8, 8, 512, 512, 128, 0, ROPEQK_F32},
    {"decode-q32-kv8-sk8192-d128", K_SCORES, 32, 8, 1, 8192, 128, 0, ROPEQK_F32},
    {"attn-h8-s1024-d128-causal", K_ATTN, 8, 8, 1024, 1024, 128, 1, ROPEQK_F32},
    {"paged-q32-kv8-8k-d128-f16", K_PAGED, 32, 8, 1, 8192, 128, 1, ROPEQK_F16},
};
enum { PS = 16 }; /* paged: tokens per page */

typedef struct {
    const vshape *s;
    ropeqk_plan_desc d;
    bcase bc; /* scores: host inputs (the scores mode's values) and the cblas baseline */
    acase ac; /* attention: the same for the attention mode */
    const void *host[3]; /* Q, K, V (V NULL for scores) */
    size_t bytes[4];     /* Q, K, V, out */
    float *pq;           /* paged: host Q */
    uint16_t *pk, *pv;   /* paged: f16 caches */
    int32_t *table, len[1], qpos[1];
    ropeqk_paged_batch batch;
    ropeqk_plan *plan[2];
    cl_mem cm[4], cdst[2];
    bvk_buf vm[4], vdst[2];
    VkCommandBuffer cmd, cmd_copy;
    int ncopy;
    bool has[V_N];
    double plan_ms[2], first_ms[2], rec_ms;
} vstate;

static double t_ms(void) { return rqs_now() * 1e3; }

static double flops(const vshape *s)
{
    double f = 2.0 * s->Hq * s->Sq * (double)s->Sk * s->D; /* Q K^T; attention adds P V, causal halves */
    if (s->kind == K_SCORES)
        return f;
    return s->kind == K_ATTN && s->causal && s->Sq == s->Sk ? f : 2 * f;
}

static double bytes_moved(const vstate *v)
{
    if (v->s->kind == K_PAGED)
        return (double)(v->bytes[1] + v->bytes[2]);
    return (double)(v->bytes[0] + v->bytes[1] + v->bytes[2] + v->bytes[3]);
}

/* Host data and the plan description (the same desc makes both backends' plans). */
static int host_init(benv *e, vstate *v, const vshape *s)
{
    memset(v, 0, sizeof *v);
    v->s = s;
    ropeqk_plan_desc *d = &v->d;
    if (s->kind == K_SCORES) {
        bshape b = {"", 1, s->Hq, s->Hkv, s->Sq, s->Sk, s->D, s->Sk - s->Sq, 0}; /* last rows' positions */
        int err = bcase_init(e, &v->bc, &b, false);
        if (err)
            return err;
        *d = (ropeqk_plan_desc){.op = ROPEQK_OP_SCORES, .params = v->bc.p, .q = v->bc.tq, .k = v->bc.tk, .out = v->bc.to};
        v->host[0] = v->bc.hq, v->host[1] = v->bc.hk;
        v->has[V_CBLAS] = v->bc.has_cblas;
    } else if (s->kind == K_ATTN) {
        ashape a = {"", 1, s->Hq, s->Hkv, s->Sq, s->Sk, s->D, s->D, s->Sk - s->Sq, 0, s->causal, 0};
        bool want[IMPL_COUNT] = {[IMPL_CBLAS] = true};
        int err = acase_init(e, &v->ac, &a, want);
        if (err)
            return err;
        *d = (ropeqk_plan_desc){.op = ROPEQK_OP_ATTENTION, .params = v->ac.p, .q = v->ac.tq[0], .k = v->ac.tk[0],
                                .v = v->ac.tv[0], .out = v->ac.to};
        v->host[0] = v->ac.hq, v->host[1] = v->ac.hk, v->host[2] = v->ac.hv;
        v->has[V_CBLAS] = v->ac.has[IMPL_CBLAS];
    } else { /* --paged's layout: shuffled pages of PS tokens, one sequence, query at the last token */
        int64_t np = (s->Sk + PS - 1) / PS;
        *d = (ropeqk_plan_desc){.op = ROPEQK_OP_PAGED_DECODE};
        ropeqk_default_params(&d->params);
        d->params.causal = s->causal;
        d->params.base = 500000;
        d->q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, s->Hq, 1, s->D);
        d->k = d->v = ropeqk_tensor_bhsd(s->dt, np, s->Hkv, PS, s->D);
        d->out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, s->Hq, 1, s->D);
        d->paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = np, .max_seqs = 1};
        size_t nq = (size_t)s->Hq * s->D, nkv = ropeqk_tensor_extent(&d->k) / 2;
        v->pq = malloc(nq * 4), v->pk = malloc(nkv * 2), v->pv = malloc(nkv * 2);
        v->table = malloc((size_t)np * sizeof *v->table);
        if (!v->pq || !v->pk || !v->pv || !v->table)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        float *f = malloc(nkv * sizeof *f); /* the f32 values the f16 caches are rounded from */
        if (!f)
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        uint64_t rng = BENCH_SEED;
        bench_fill(&rng, v->pq, NULL, nq);
        bench_fill(&rng, f, v->pk, nkv);
        bench_fill(&rng, f, v->pv, nkv);
        free(f);
        bench_shuffle_pages(&rng, v->table, np);
        v->len[0] = s->Sk, v->qpos[0] = s->Sk - 1;
        v->batch = (ropeqk_paged_batch){.n_seqs = 1, .page_table = v->table, .seq_lens = v->len, .q_pos = v->qpos};
        v->host[0] = v->pq, v->host[1] = v->pk, v->host[2] = v->pv;
    }
    v->bytes[0] = ropeqk_tensor_extent(&d->q);
    v->bytes[1] = ropeqk_tensor_extent(&d->k);
    v->bytes[2] = v->host[2] ? ropeqk_tensor_extent(&d->v) : 0;
    v->bytes[3] = ropeqk_tensor_extent(&d->out);
    /* the bandwidth yardsticks on decode shapes: copy K (paged: K and V) */
    v->ncopy = s->kind == K_PAGED ? 2 : s->Sq == 1 ? 1 : 0;
    return 0;
}

/* bytes a copy yardstick moves per run: read + write of K (paged: and V) */
static double copy_bytes(const vstate *v)
{
    return 2.0 * (double)(v->bytes[1] + (v->ncopy > 1 ? v->bytes[2] : 0));
}

static int run_impl(benv *e, bvk *vk, vstate *v, int i)
{
    int err = 0;
    switch (i) {
    case V_CL:
        if (v->s->kind == K_PAGED) {
            ropeqk_opencl_paged_args a = {.q = {v->cm[0], 0}, .k_cache = {v->cm[1], 0}, .v_cache = {v->cm[2], 0},
                                          .out = {v->cm[3], 0}};
            err = ropeqk_opencl_paged_enqueue(v->plan[0], e->queue, &a, &v->batch, 0, NULL, NULL);
        } else {
            ropeqk_opencl_args a = {.q = {v->cm[0], 0}, .k = {v->cm[1], 0}, .v = {v->cm[2], 0}, .out = {v->cm[3], 0}};
            err = ropeqk_opencl_plan_enqueue(v->plan[0], e->queue, &a, NULL, 0, NULL, NULL);
        }
        return err ? err : clFinish(e->queue);
    case V_VK:
        return bvk_submit_wait(vk, v->cmd);
    case V_CBLAS:
        return v->s->kind == K_ATTN ? aimpl_run(e, &v->ac, IMPL_CBLAS) : bimpl_run(e, &v->bc, IMPL_CBLAS);
    case V_CLCOPY:
        for (int j = 0; j < v->ncopy && !err; j++)
            err = clEnqueueCopyBuffer(e->queue, v->cm[1 + j], v->cdst[j], 0, 0, v->bytes[1 + j], 0, NULL, NULL);
        return err ? err : clFinish(e->queue);
    case V_VKCOPY:
        return bvk_submit_wait(vk, v->cmd_copy);
    }
    return -1;
}

/* Plan, buffers (out = NaN), first call; Vulkan: the command buffers, recorded once. */
static int setup_cl(benv *e, vstate *v)
{
    double t0 = t_ms();
    int err = ropeqk_plan_create(e->rq, &v->d, &v->plan[0]);
    if (err)
        return err;
    v->plan_ms[0] = t_ms() - t0;
    cl_int ce = CL_SUCCESS;
    for (int j = 0; j < 3; j++)
        if (v->host[j])
            v->cm[j] = bench_mkbuf(e, v->bytes[j], v->host[j], &ce);
    void *nan = malloc(v->bytes[3]);
    if (!nan)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    memset(nan, 0xff, v->bytes[3]);
    v->cm[3] = bench_mkbuf(e, v->bytes[3], nan, &ce);
    free(nan);
    for (int j = 0; j < v->ncopy; j++)
        v->cdst[j] = bench_mkbuf(e, v->bytes[1 + j], NULL, &ce);
    if (ce)
        return ce;
    t0 = t_ms();
    if ((err = run_impl(e, NULL, v, V_CL)))
        return err;
    v->first_ms[0] = t_ms() - t0;
    v->has[V_CL] = true;
    v->has[V_CLCOPY] = v->ncopy > 0;
    return 0;
}

static int setup_vk(bvk *vk, vstate *v)
{
    double t0 = t_ms();
    int err = ropeqk_plan_create(vk->rq, &v->d, &v->plan[1]);
    if (err)
        return err;
    v->plan_ms[1] = t_ms() - t0;
    for (int j = 0; j < 4 && !err; j++) /* out (j = 3) starts as NaN */
        if (j == 3 || v->host[j])
            err = bvk_buf_make(vk, v->bytes[j], j < 3 ? v->host[j] : NULL, 0xff, &v->vm[j]);
    for (int j = 0; j < v->ncopy && !err; j++)
        err = bvk_buf_make(vk, v->bytes[1 + j], NULL, 0, &v->vdst[j]);
    if (err)
        return err;
    t0 = t_ms();
    if ((err = bvk_cmd_begin(vk, &v->cmd)))
        return err;
    if (v->s->kind == K_PAGED) {
        ropeqk_vulkan_paged_args a = {.q = bvk_mem(&v->vm[0]), .k_cache = bvk_mem(&v->vm[1]),
                                      .v_cache = bvk_mem(&v->vm[2]), .out = bvk_mem(&v->vm[3])};
        err = ropeqk_vulkan_paged_record(v->plan[1], v->cmd, &a, &v->batch);
    } else {
        ropeqk_vulkan_args a = {.q = bvk_mem(&v->vm[0]), .k = bvk_mem(&v->vm[1]), .v = bvk_mem(&v->vm[2]),
                                .out = bvk_mem(&v->vm[3])};
        err = ropeqk_vulkan_plan_record(v->plan[1], v->cmd, &a, NULL);
    }
    if (err || (err = bvk_cmd_end(v->cmd)))
        return err;
    v->rec_ms = t_ms() - t0;
    t0 = t_ms();
    if ((err = bvk_submit_wait(vk, v->cmd)))
        return err;
    v->first_ms[1] = t_ms() - t0;
    v->has[V_VK] = true;
    if (v->ncopy) {
        if ((err = bvk_cmd_begin(vk, &v->cmd_copy)))
            return err;
        for (int j = 0; j < v->ncopy; j++)
            vkCmdCopyBuffer(v->cmd_copy, v->vm[1 + j].buf, v->vdst[j].buf, 1, &(VkBufferCopy){0, 0, v->bytes[1 + j]});
        if ((err = bvk_cmd_end(v->cmd_copy)))
            return err;
        v->has[V_VKCOPY] = true;
    }
    return 0;
}

static void state_free(benv *e, bvk *vk, vstate *v)
{
    if (vk && vk->rq) {
        bvk_cmd_free(vk, v->cmd);
        bvk_cmd_free(vk, v->cmd_copy);
        for (int j = 0; j < 4; j++)
            bvk_buf_free(vk, &v->vm[j]);
        for (int j = 0; j < 2; j++)
            bvk_buf_free(vk, &v->vdst[j]);
    }
    for (int j = 0; j < 4; j++)
        if (v->cm[j])
            clReleaseMemObject(v->cm[j]);
    for (int j = 0; j < 2; j++)
        if (v->cdst[j])
            clReleaseMemObject(v->cdst[j]);
    ropeqk_plan_destroy(v->plan[0]);
    ropeqk_plan_destroy(v->plan[1]);
    if (v->s && v->s->kind == K_SCORES)
        bcase_free(&v->bc);
    if (v->s && v->s->kind == K_ATTN)
        acase_free(&v->ac);
    free(v->pq), free(v->pk), free(v->pv), free(v->table);
    (void)e;
}

/* "a/b x" for two median times (a ratio of throughputs), "-" when either is missing */
static const char *ratio(char *buf, double a_ms, double b_ms)
{
    if (a_ms > 0 && b_ms > 0)
        snprintf(buf, 16, "%.3gx", a_ms / b_ms);
    else
        snprintf(buf, 16, "-");
    return buf;
}

/* A device description up to its first space or parenthesis, for the table's device column (the
 * full descriptions are in the header). */
static void short_tag(char *out, size_t n, const char *desc)
{
    snprintf(out, n, "%s", desc);
    out[strcspn(out, " (")] = '\0';
}

int bench_vulkan(benv *e, const char *vk_spec, int runs, int warmup, const char *filter, FILE *csv,
                 double cl_setup_ms)
{
    static double tm[V_N][MAXR];
    bool have_cl = e->rq != NULL, bad = false, failed = false; /* exit 3, exit 1 */
    char tag[V_N][32] = {"", "", "host", "", ""}, cl_why[256];
    snprintf(cl_why, sizeof cl_why, "%s", ropeqk_last_error()); /* before Vulkan's failures replace it */
    bvk vk;
    double t0 = t_ms(), vk_ctx_ms, vk_warm_ms = NAN;
    int st = bvk_open(&vk, vk_spec);
    vk_ctx_ms = t_ms() - t0;
    if (!st) {
        t0 = t_ms();
        st = ropeqk_ctx_warmup(vk.rq); /* the common pipelines, as main's OpenCL warm-up builds the program */
        vk_warm_ms = t_ms() - t0;
    }
    bool have_vk = st == 0;
    printf("ropeqk-bench --vulkan: the same plan on both backends, device-resident buffers; median of %d runs after "
           "%d warm-ups, in rounds; wall time = enqueue/submit .. clFinish/fence\n", runs, warmup);
    bench_print_cpu();
    if (have_cl) {
        printf("opencl: %s (context + program: %.0f ms)\n", ropeqk_ctx_device_description(e->rq), cl_setup_ms);
        printf("  config: %s\n  options: %s\n", ropeqk_ctx_config_source(e->rq), ropeqk_ctx_build_options(e->rq));
        short_tag(tag[V_CL], sizeof tag[V_CL], ropeqk_ctx_device_description(e->rq));
    } else {
        printf("opencl: none (%s): its rows are skipped\n", cl_why);
    }
    if (have_vk) {
        printf("vulkan: %s (context: %.0f ms, pipelines: %.0f ms); command buffer recorded once per shape, "
               "submitted per run\n", ropeqk_ctx_device_description(vk.rq), vk_ctx_ms, vk_warm_ms);
        printf("  config: %s\n  options: %s\n", ropeqk_ctx_config_source(vk.rq), ropeqk_ctx_build_options(vk.rq));
        short_tag(tag[V_VK], sizeof tag[V_VK], ropeqk_ctx_device_description(vk.rq));
    } else {
        printf("vulkan: none on '%s' (%s: %s): its rows are skipped\n", vk_spec, ropeqk_status_string(st),
               ropeqk_last_error());
        bvk_close(&vk);
    }
    memcpy(tag[V_CLCOPY], tag[V_CL], sizeof tag[V_CL]);
    memcpy(tag[V_VKCOPY], tag[V_VK], sizeof tag[V_VK]);
    if (csv)
        fprintf(csv, "shape,impl,dtype,median_ms,gflops,gbs,op,extra_bytes,max_abs_diff\n");
    printf("\n%-28s %-12s %-28s %10s %10s %9s %8s %9s %9s %8s\n", "shape", "impl", "device", "median_ms", "min_ms",
           "GFLOP/s", "GB/s", "plan_ms", "first_ms", "rec_ms");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const vshape *s = &shapes[si];
        if (filter && !strstr(s->name, filter))
            continue;
        vstate v;
        int err = host_init(e, &v, s);
        if (!err && have_cl && (err = setup_cl(e, &v)))
            printf("%-28s opencl failed: %d (%s) %s\n", s->name, err, ropeqk_status_string(err), ropeqk_last_error());
        if (!err && have_vk && (err = setup_vk(&vk, &v)))
            printf("%-28s vulkan failed: %d (%s) %s\n", s->name, err, ropeqk_status_string(err), ropeqk_last_error());
        if (err) {
            failed = true;
            state_free(e, have_vk ? &vk : NULL, &v);
            continue;
        }
        /* the check: each backend against the other; cblas (fp32 angles) against either, for information */
        size_t n = v.bytes[3] / 4;
        float *out[3] = {malloc(n * 4), malloc(n * 4), malloc(n * 4)};
        double diff = NAN, cdiff = NAN;
        if (!out[0] || !out[1] || !out[2]) {
            fprintf(stderr, "ropeqk-bench: out of host memory\n");
            return 1;
        }
        if (v.has[V_CL] && clEnqueueReadBuffer(e->queue, v.cm[3], CL_TRUE, 0, n * 4, out[0], 0, NULL, NULL))
            v.has[V_CL] = false;
        if (v.has[V_VK] && bvk_buf_read(&vk, &v.vm[3], out[1]))
            v.has[V_VK] = false;
        if (v.has[V_CL] && v.has[V_VK] && !((diff = bench_max_abs_diff(out[0], out[1], n)) <= TOL)) {
            printf("%-28s MISMATCH: max |vulkan - opencl| = %.3g > %.0e: neither is timed\n", s->name, diff, TOL);
            v.has[V_CL] = v.has[V_VK] = false;
            bad = true;
        }
        if (v.has[V_CBLAS] && (v.has[V_CL] || v.has[V_VK])) {
            if (run_impl(e, NULL, &v, V_CBLAS) || (s->kind == K_ATTN ? aimpl_fetch(e, &v.ac, IMPL_CBLAS, out[2])
                                                                     : bimpl_fetch(e, &v.bc, IMPL_CBLAS, out[2])))
                v.has[V_CBLAS] = false;
            else
                cdiff = bench_max_abs_diff(out[2], out[v.has[V_CL] ? 0 : 1], n);
        }
        free(out[0]), free(out[1]), free(out[2]);

        int nt[V_N] = {0};
        for (int r = 0; r < warmup + runs; r++)
            for (int i = 0; i < V_N; i++) {
                if (!v.has[i])
                    continue;
                t0 = t_ms();
                if ((err = run_impl(e, have_vk ? &vk : NULL, &v, i))) {
                    printf("%-28s %-12s failed: %d\n", s->name, vname[i], err);
                    v.has[i] = false;
                    failed = true;
                } else if (r >= warmup) {
                    tm[i][nt[i]++] = t_ms() - t0;
                }
            }
        double med[V_N] = {0};
        for (int i = 0; i < V_N; i++) {
            if (!v.has[i] || !nt[i])
                continue;
            med[i] = rqs_median(tm[i], (size_t)nt[i]);
            bool copy = i == V_CLCOPY || i == V_VKCOPY;
            double gb = copy ? copy_bytes(&v) : bytes_moved(&v);
            double gf = copy ? NAN : flops(s) / (med[i] * 1e6), gbs = gb / (med[i] * 1e6);
            char gfs[16] = "-", pl[16] = "", fc[16] = "", rc[16] = "";
            if (!copy)
                snprintf(gfs, sizeof gfs, "%.2f", gf);
            if (i <= V_VK) {
                snprintf(pl, sizeof pl, "%.1f", v.plan_ms[i]);
                snprintf(fc, sizeof fc, "%.1f", v.first_ms[i]);
            }
            if (i == V_VK)
                snprintf(rc, sizeof rc, "%.3f", v.rec_ms);
            printf("%-28s %-12s %-28s %10.3f %10.3f %9s %8.2f %9s %9s %8s\n", s->name, vname[i], tag[i], med[i],
                   tm[i][0], gfs, gbs, pl, fc, rc);
            if (csv) { /* max_abs_diff: vulkan against opencl, cblas against the first backend */
                char md[24] = "";
                if ((i == V_VK && !isnan(diff)) || (i == V_CBLAS && !isnan(cdiff)))
                    snprintf(md, sizeof md, "%.3g", i == V_VK ? diff : cdiff);
                fprintf(csv, "%s,%s,%s,%.4f,%.3f,%.3f,%s,,%s\n", s->name, vname[i],
                        s->dt == ROPEQK_F16 ? "f16" : "f32", med[i], copy ? 0.0 : gf, gbs,
                        s->kind == K_SCORES ? "scores" : s->kind == K_ATTN ? "attention" : "paged", md);
            }
        }
        char r1[16], r2[16];
        if (med[V_CL] > 0 && med[V_VK] > 0)
            printf("  %s: vulkan / opencl = %s (throughput; > 1: Vulkan faster); max |vulkan - opencl| = %.2g\n",
                   s->name, ratio(r1, med[V_CL], med[V_VK]), diff);
        if (med[V_CBLAS] > 0 && (med[V_CL] > 0 || med[V_VK] > 0))
            printf("  %s: vs cblas (throughput): opencl %s, vulkan %s; max |cblas - %s| = %.2g (fp32 angles)\n",
                   s->name, ratio(r1, med[V_CBLAS], med[V_CL]), ratio(r2, med[V_CBLAS], med[V_VK]),
                   v.has[V_CL] ? "opencl" : "vulkan", cdiff);
        if (med[V_CLCOPY] > 0 || med[V_VKCOPY] > 0) /* bytes the op reads per ms over bytes its copy moves per ms */
            printf("  %s: bandwidth / own copy's: opencl %s, vulkan %s\n", s->name,
                   ratio(r1, med[V_CLCOPY] * bytes_moved(&v) / copy_bytes(&v), med[V_CL]),
                   ratio(r2, med[V_VKCOPY] * bytes_moved(&v) / copy_bytes(&v), med[V_VK]));
        state_free(e, have_vk ? &vk : NULL, &v);
    }
    if (have_vk) {
        char msg[256] = "";
        if (ropeqk_vulkan_validation_messages(vk.rq, msg, sizeof msg))
            printf("Vulkan validation messages; the first: %s\n", msg);
        bvk_close(&vk);
    }
    return failed ? 1 : bad ? 3 : 0;
}
