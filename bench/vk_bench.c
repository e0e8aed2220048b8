/* `ropeqk-bench --vulkan`: one plan description per shape, made into a plan on the OpenCL context
 * and one on a Vulkan context ("vulkan", or $ROPEQK_DEVICE when it names a Vulkan device), run on
 * device-resident buffers holding the same inputs, in one process. Both backends go through
 * ropeqk.h's run API on device-local buffers (ropeqk_buffer_create without
 * ROPEQK_BUFFER_HOST_VISIBLE: filled and read back through a staging buffer), the same calls for each
 * (support/runwait.h: ropeqk_plan_run / ropeqk_paged_run on the context's queue, then a wait for the
 * returned event):
 *   opencl   the OpenCL context's command queue;
 *   vulkan   the library's own command buffers, recorded per run and submitted to the context's
 *            queue. Recording per run costs ~1 us of host time on lavapipe (measured: allocate +
 *            record + end + free of the decode plan's command buffer; a 4-byte copy's
 *            submit-and-wait took 13.6 us recorded per run against 12.9 us recorded once), far
 *            below the runs' noise (rec_ms is "-");
 *            plan creation (Vulkan: pipeline creation on the first shape) and the first call are
 *            reported apart;
 *   cblas    the existing host baseline (host RoPE + OpenBLAS, attention: + host softmax), on the
 *            scores and attention shapes;
 *   *-copy   ropeqk_buffer_copy over K (paged: K and V): clEnqueueCopyBuffer / vkCmdCopyBuffer, each
 *            backend's own bandwidth yardstick, on the decode shapes.
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
#include "runwait.h"
#include "scores_impl.h"
#include "values.h"

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
    /* per backend (B_CL, B_VK): */
    ropeqk_plan *plan[2];
    ropeqk_buffer *buf[2][4]; /* Q, K, V (NULL for scores), out */
    ropeqk_buffer *dst[2][2]; /* the copy yardsticks' destinations */
    int ncopy;
    bool has[V_N];
    double plan_ms[2], first_ms[2];
} vstate;

enum { B_CL, B_VK };
/* The backends' contexts (each runs on its own queue). */
typedef struct {
    ropeqk_ctx *ctx[2];
} vbackends;

/* A failed call's message (RQS_ERR_STRAY_EVENT: a refused run handed back an event). */
static void print_fail(const char *shape, const char *what, int err)
{
    printf("%-28s %s failed: %d (%s) %s\n", shape, what, err,
           err == RQS_ERR_STRAY_EVENT ? "a refused run handed back an event" : ropeqk_status_string(err),
           ropeqk_last_error());
}

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

static int run_impl(benv *e, vstate *v, int i)
{
    int b = i == V_CL || i == V_CLCOPY ? B_CL : B_VK;
    switch (i) {
    case V_CL:
    case V_VK:
        if (v->s->kind == K_PAGED) {
            ropeqk_paged_args a = {.q = {v->buf[b][0], 0}, .k_cache = {v->buf[b][1], 0},
                                   .v_cache = {v->buf[b][2], 0}, .out = {v->buf[b][3], 0}};
            return rqs_paged_run_wait(v->plan[b], &a, &v->batch);
        } else {
            ropeqk_args a = {.q = {v->buf[b][0], 0}, .k = {v->buf[b][1], 0}, .out = {v->buf[b][3], 0}};
            if (v->buf[b][2])
                a.v = (ropeqk_mem){v->buf[b][2], 0};
            return rqs_plan_run_wait(v->plan[b], &a, NULL);
        }
    case V_CBLAS:
        return v->s->kind == K_ATTN ? aimpl_run(e, &v->ac, IMPL_CBLAS) : bimpl_run(e, &v->bc, IMPL_CBLAS);
    case V_CLCOPY:
    case V_VKCOPY: {
        ropeqk_copy c[2];
        for (int j = 0; j < v->ncopy; j++)
            c[j] = (ropeqk_copy){v->dst[b][j], 0, v->buf[b][1 + j], 0, v->bytes[1 + j]};
        return rqs_copy_wait(c, (uint32_t)v->ncopy);
    }
    }
    return -1;
}

/* One backend's plan, buffers (out = NaN: the canary word) and first call. */
static int setup(benv *e, const vbackends *bk, vstate *v, int b)
{
    double t0 = t_ms();
    int err = ropeqk_plan_create(bk->ctx[b], &v->d, &v->plan[b]);
    if (err)
        return err;
    v->plan_ms[b] = t_ms() - t0;
    for (int j = 0; j < 4 && !err; j++) /* out (j = 3) starts as NaN */
        if (j == 3 || v->host[j])
            err = rqs_buffer_make(bk->ctx[b], v->bytes[j], j < 3 ? v->host[j] : NULL, 0, &v->buf[b][j]);
    for (int j = 0; j < v->ncopy && !err; j++)
        err = rqs_buffer_make(bk->ctx[b], v->bytes[1 + j], NULL, 0, &v->dst[b][j]);
    if (err)
        return err;
    t0 = t_ms();
    if ((err = run_impl(e, v, b == B_CL ? V_CL : V_VK)))
        return err;
    v->first_ms[b] = t_ms() - t0;
    v->has[b == B_CL ? V_CL : V_VK] = true;
    v->has[b == B_CL ? V_CLCOPY : V_VKCOPY] = v->ncopy > 0;
    return 0;
}

static void state_free(vstate *v)
{
    for (int b = 0; b < 2; b++) {
        for (int j = 0; j < 4; j++)
            ropeqk_buffer_destroy(v->buf[b][j]);
        for (int j = 0; j < 2; j++)
            ropeqk_buffer_destroy(v->dst[b][j]);
        ropeqk_plan_destroy(v->plan[b]);
    }
    if (v->s && v->s->kind == K_SCORES)
        bcase_free(&v->bc);
    if (v->s && v->s->kind == K_ATTN)
        acase_free(&v->ac);
    free(v->pq), free(v->pk), free(v->pv), free(v->table);
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
    vbackends bk = {{e->rq, NULL}};
    double t0 = t_ms(), vk_ctx_ms, vk_warm_ms = NAN;
    ropeqk_ctx_params cp = {.device = vk_spec};
    int st = ropeqk_ctx_create(&cp, &bk.ctx[B_VK]);
    vk_ctx_ms = t_ms() - t0;
    const char *vk_why = NULL; /* the failure's message, when not the library's */
    if (!st && ropeqk_ctx_backend(bk.ctx[B_VK]) != ROPEQK_BACKEND_VULKAN) {
        st = ROPEQK_ERR_NO_DEVICE;
        vk_why = "not a Vulkan context";
    }
    if (!st) {
        t0 = t_ms();
        st = ropeqk_ctx_warmup(bk.ctx[B_VK]); /* the common pipelines, as main's OpenCL warm-up builds the program */
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
        printf("vulkan: %s (context: %.0f ms, pipelines: %.0f ms); device-local buffers; each run records, "
               "submits and waits (ropeqk_plan_run + ropeqk_event_wait)\n", ropeqk_ctx_device_description(bk.ctx[B_VK]), vk_ctx_ms,
               vk_warm_ms);
        printf("  config: %s\n  options: %s\n", ropeqk_ctx_config_source(bk.ctx[B_VK]),
               ropeqk_ctx_build_options(bk.ctx[B_VK]));
        short_tag(tag[V_VK], sizeof tag[V_VK], ropeqk_ctx_device_description(bk.ctx[B_VK]));
    } else {
        printf("vulkan: none on '%s' (%s: %s): its rows are skipped\n", vk_spec, ropeqk_status_string(st),
               vk_why ? vk_why : ropeqk_last_error());
        ropeqk_ctx_destroy(bk.ctx[B_VK]);
        bk.ctx[B_VK] = NULL;
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
        if (err)
            print_fail(s->name, "host data", err);
        if (!err && have_cl && (err = setup(e, &bk, &v, B_CL)))
            print_fail(s->name, "opencl", err);
        if (!err && have_vk && (err = setup(e, &bk, &v, B_VK)))
            print_fail(s->name, "vulkan", err);
        if (err) {
            failed = true;
            state_free(&v);
            continue;
        }
        /* the check: each backend against the other; cblas (fp32 angles) against either, for information */
        size_t n = v.bytes[3] / 4;
        float *out[3] = {malloc(n * 4), malloc(n * 4), malloc(n * 4)};
        double diff = NAN, cdiff = NAN;
        if (!out[0] || !out[1] || !out[2]) {
            fprintf(stderr, "ropeqk-bench: out of host memory\n");
            free(out[0]), free(out[1]), free(out[2]);
            state_free(&v);
            failed = true;
            break;
        }
        for (int b = B_CL; b <= B_VK; b++) /* V_CL == B_CL, V_VK == B_VK */
            if (v.has[b] && (err = ropeqk_buffer_read(v.buf[b][3], 0, out[b], n * 4))) {
                print_fail(s->name, b == B_CL ? "opencl read-back" : "vulkan read-back", err);
                v.has[b] = false;
                failed = true;
            }
        if (v.has[V_CL] && v.has[V_VK] && !((diff = bench_max_abs_diff(out[0], out[1], n)) <= TOL)) {
            printf("%-28s MISMATCH: max |vulkan - opencl| = %.3g > %.0e: neither is timed\n", s->name, diff, TOL);
            v.has[V_CL] = v.has[V_VK] = false;
            bad = true;
        }
        if (v.has[V_CBLAS] && (v.has[V_CL] || v.has[V_VK])) {
            if (run_impl(e, &v, V_CBLAS) || (s->kind == K_ATTN ? aimpl_fetch(e, &v.ac, IMPL_CBLAS, out[2])
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
                if ((err = run_impl(e, &v, i))) {
                    print_fail(s->name, vname[i], err);
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
            double mn = tm[i][0];
            for (int r = 1; r < nt[i]; r++)
                mn = tm[i][r] < mn ? tm[i][r] : mn;
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
            if (i == V_VK) /* recorded in every run (see the top of this file) */
                snprintf(rc, sizeof rc, "-");
            printf("%-28s %-12s %-28s %10.3f %10.3f %9s %8.2f %9s %9s %8s\n", s->name, vname[i], tag[i], med[i],
                   mn, gfs, gbs, pl, fc, rc);
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
        state_free(&v);
    }
    if (have_vk) {
        ropeqk_diagnostics d;
        if (!ropeqk_ctx_diagnostics(NULL, &d) && d.messages)
            printf("Vulkan validation messages: %u; the first: %s\n", d.messages, d.first);
    }
    ropeqk_ctx_destroy(bk.ctx[B_VK]);
    return failed ? 1 : bad ? 3 : 0;
}
