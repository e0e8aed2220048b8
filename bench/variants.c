/* `ropeqk-bench --variants [RUNS]`: what each model-family variant (docs/conventions.md section 11)
 * costs over plain attention on the same shape, in the same run, on the same device buffers: logit
 * soft-capping, the rotary offset, M-RoPE with [3][S] position arrays, attention sinks, all of them
 * together, and MLA (576-dim latent keys, the last 64 rotated, V read from K's buffer). Per shape,
 * every variant is a plan of its own; after two warm-up rounds each round runs every variant once
 * (enqueue .. clFinish, wall time), so that a noisy moment of the machine hits them all alike; the
 * figure is the median over the rounds of each variant's time over its baseline's in the same round:
 *   - softcap, sinks, all: against plain (positions from offsets, full rotary width); softcap 50 keeps
 *     these inputs' scores below C/2 (the polynomial; the CPU kernels skip the exp path for a vector
 *     with no lane beyond), softcap 0.05 sends nearly every score through the exp path;
 *   - rotary offset N = D/2 with R = D/2: against plain and against partial rotary R = D/2 at 0;
 *   - M-RoPE ([3][S] arrays): against per-token positions ([S] arrays), the same position source;
 *   - MLA: against plain attention of the same sizes (D 576, Dv 512, one KV head, V its own buffer)
 *     and against partial rotary R 64 at 0 (the same rotary work: what the offset and V = K cost).
 * Shapes: attention prefill and decode, scores prefill and decode, paged decode, MLA decode (dense
 * and paged). The kernels are the context's (ROPEQK_PROFILE and the tuning in effect). */
#include "variants.h"

#include "clock.h"
#include "values.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WARMUP = 2, MAXV = 10, MAXRUNS = 200 };

typedef enum { K_SCORES, K_ATTN, K_PAGED } bkind;

typedef struct {
    const char *name;
    bkind kind;
    int64_t Hq, Hkv, Sq, Sk, D, Dv; /* paged: Sq 1, Sk the sequence's length */
    ropeqk_dtype dt;                /* Q, K, V storage */
    bool mla;                       /* the variants are MLA's */
} bshape;

typedef struct {
    const char *name;
    int base;        /* index of the variant it is compared with (-1: none, it is a baseline) */
    int base2;       /* a second baseline (-1: none) */
    ropeqk_params p;
    int pos;         /* 0 offsets, 1 per-token arrays [S], 3 M-RoPE arrays [3][S] */
    bool alias;      /* V = K's first Dv dims, K's buffer */
    ropeqk_plan *plan;
    double t[MAXRUNS];
} bvar;

static const float *sinks_of(int64_t Hq)
{
    static float s[256];
    for (int64_t h = 0; h < Hq && h < 256; h++)
        s[h] = (float)(h % 5) - 2.0f;
    return s;
}

/* Appends a variant with parameters *p0; returns its parameters, to be changed. */
static ropeqk_params *add(bvar *v, int *n, const ropeqk_params *p0, const char *name, int base, int base2, int pos,
                          bool alias)
{
    v[*n] = (bvar){.name = name, .base = base, .base2 = base2, .p = *p0, .pos = pos, .alias = alias};
    return &v[(*n)++].p;
}

/* The variants of a shape: (name, baseline, parameters). */
static int make_variants(const bshape *sh, bvar *v)
{
    int n = 0;
    ropeqk_params base;
    ropeqk_default_params(&base);
    base.causal = 1;
    base.base = 500000;
    base.layout = ROPEQK_HALF_SPLIT;
    if (sh->kind == K_ATTN || sh->kind == K_SCORES)
        base.q_pos_offset = sh->Sk - sh->Sq;
    int R = (int)sh->D / 2;
#define ADD(NAME, BASE, BASE2, POS, ALIAS) add(v, &n, &base, (NAME), (BASE), (BASE2), (POS), (ALIAS))
    if (sh->mla) {
        (void)ADD("plain (R 576, V its own buffer)", -1, -1, 0, false);
        ropeqk_params *p = ADD("partial R 64 at 0, V its own buffer", -1, -1, 0, false);
        p->rotary_dim = 64;
        p = ADD("MLA (R 64 at 512, V = K)", 0, 1, 0, true);
        p->rotary_dim = 64, p->rotary_offset = 512;
        p = ADD("MLA + softcap 50 + sinks", 0, 1, 0, true);
        p->rotary_dim = 64, p->rotary_offset = 512, p->softcap = 50.0;
        if (sh->kind != K_SCORES)
            p->sinks = sinks_of(sh->Hq), p->n_sinks = (int32_t)sh->Hq;
        return n;
    }
    (void)ADD("plain", -1, -1, 0, false);
    ropeqk_params *p = ADD("softcap 50", 0, -1, 0, false);
    p->softcap = 50.0;
    p = ADD("softcap 0.05 (|S| >= C/2: the exp path)", 0, -1, 0, false);
    p->softcap = 0.05;
    p = ADD("partial R = D/2 at 0", -1, -1, 0, false);
    p->rotary_dim = R;
    p = ADD("rotary offset D/2, R = D/2", 0, 3, 0, false);
    p->rotary_dim = R, p->rotary_offset = R;
    if (sh->kind != K_PAGED) { /* the core refuses M-RoPE in paged decode */
        (void)ADD("per-token positions [S]", -1, -1, 1, false);
        p = ADD("M-RoPE [3][S] (sections 1/4, 3/8, 3/8)", 5, -1, 3, false);
        p->mrope_section[0] = (int32_t)sh->D / 8, p->mrope_section[1] = (int32_t)(sh->D / 2 - sh->D / 8) / 2;
        p->mrope_section[2] = (int32_t)(sh->D / 2) - p->mrope_section[0] - p->mrope_section[1];
    }
    if (sh->kind != K_SCORES) {
        p = ADD("sinks", 0, -1, 0, false);
        p->sinks = sinks_of(sh->Hq), p->n_sinks = (int32_t)sh->Hq;
    }
    p = ADD(sh->kind == K_PAGED ? "all: softcap + sinks + offset" : "all: softcap + offset + M-RoPE + sinks", 0, 3,
            sh->kind == K_PAGED ? 0 : 3, false);
    p->softcap = 50.0, p->rotary_dim = R, p->rotary_offset = R;
    if (sh->kind != K_PAGED) {
        p->mrope_section[0] = (int32_t)sh->D / 16, p->mrope_section[1] = (int32_t)(sh->D / 4 - sh->D / 16) / 2;
        p->mrope_section[2] = (int32_t)(sh->D / 4) - p->mrope_section[0] - p->mrope_section[1];
    }
    if (sh->kind != K_SCORES)
        p->sinks = sinks_of(sh->Hq), p->n_sinks = (int32_t)sh->Hq;
#undef ADD
    return n;
}

/* positions of n rows in `streams` streams: t = the row, h = row / 32, w = row % 32 (a 32-wide image) */
static int32_t *positions(int64_t n, int streams, int64_t off)
{
    int32_t *a = malloc((size_t)(3 * n) * sizeof *a);
    if (!a)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        a[i] = (int32_t)(off + i);
        if (streams == 3) {
            a[n + i] = (int32_t)((off + i) / 32);
            a[2 * n + i] = (int32_t)((off + i) % 32);
        }
    }
    return a;
}

enum { W_Q, W_K, W_V, W_OUT, W_QP1, W_KP1, W_QP3, W_KP3 };

typedef struct {
    cl_mem q, k, v, out, qp1, kp1, qp3, kp3;
    ropeqk_buffer *w[8]; /* the cl_mems above wrapped for the neutral runs, in that order (W_*) */
    /* paged */
    ropeqk_paged_batch batch;
    int32_t *table, lens[1], qpos[1];
} bbufs;

static int run_once(benv *e, const bshape *sh, bvar *v, bbufs *b)
{
    (void)e; /* the neutral runs go to the context's queue, e->queue */
    ropeqk_buffer *const *w = b->w, *vb = w[v->alias ? W_K : W_V];
    if (sh->kind == K_PAGED) {
        ropeqk_paged_args a = {.q = {w[W_Q], 0}, .k_cache = {w[W_K], 0}, .v_cache = {vb, 0}, .out = {w[W_OUT], 0}};
        return ropeqk_paged_run(v->plan, &a, &b->batch, 0, NULL, NULL);
    }
    ropeqk_args a = {.q = {w[W_Q], 0}, .k = {w[W_K], 0}, .v = {vb, 0}, .out = {w[W_OUT], 0}};
    if (v->pos == 1)
        a.q_pos = (ropeqk_mem){w[W_QP1], 0}, a.k_pos = (ropeqk_mem){w[W_KP1], 0};
    else if (v->pos == 3)
        a.q_pos = (ropeqk_mem){w[W_QP3], 0}, a.k_pos = (ropeqk_mem){w[W_KP3], 0};
    return ropeqk_plan_run(v->plan, &a, NULL, 0, NULL, NULL);
}

static int one_shape(benv *e, const bshape *sh, int runs)
{
    bvar v[MAXV];
    int nv = make_variants(sh, v), err = 0;
    bbufs b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < nv; i++)
        v[i].plan = NULL;
    size_t es = ropeqk_dtype_size(sh->dt);
    bool paged = sh->kind == K_PAGED;
    const int64_t PS = 16, np = (sh->Sk + PS - 1) / PS;
    ropeqk_tensor tq = ropeqk_tensor_bhsd(sh->dt, 1, sh->Hq, sh->Sq, sh->D);
    ropeqk_tensor tk = paged ? ropeqk_tensor_bhsd(sh->dt, np, sh->Hkv, PS, sh->D)
                             : ropeqk_tensor_bhsd(sh->dt, 1, sh->Hkv, sh->Sk, sh->D);
    ropeqk_tensor tv = paged ? ropeqk_tensor_bhsd(sh->dt, np, sh->Hkv, PS, sh->Dv)
                             : ropeqk_tensor_bhsd(sh->dt, 1, sh->Hkv, sh->Sk, sh->Dv);
    ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F32, 1, sh->Hq, sh->Sq, sh->kind == K_SCORES ? sh->Sk : sh->Dv);
    size_t nq = (size_t)(sh->Hq * sh->Sq * sh->D), nk = ropeqk_tensor_extent(&tk) / es,
           nvv = ropeqk_tensor_extent(&tv) / es, no = ropeqk_tensor_extent(&to) / 4;
    size_t nmax = nk > nvv ? nk : nvv;
    float *f = malloc((nq > nmax ? nq : nmax) * sizeof *f);
    uint16_t *h = malloc((nq > nmax ? nq : nmax) * sizeof *h);
    int32_t *qp1 = positions(sh->Sq, 1, sh->Sk - sh->Sq), *kp1 = positions(sh->Sk, 1, 0);
    int32_t *qp3 = positions(sh->Sq, 3, sh->Sk - sh->Sq), *kp3 = positions(sh->Sk, 3, 0);
    if (!f || !h || !qp1 || !kp1 || !qp3 || !kp3) {
        err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    uint64_t rng = BENCH_SEED;
    cl_int cerr = CL_SUCCESS;
    const size_t counts[3] = {nq, nk, nvv};
    cl_mem *dst[3] = {&b.q, &b.k, &b.v};
    for (int i = 0; i < 3 && !cerr; i++) {
        bench_fill(&rng, f, h, counts[i]);
        if (sh->dt == ROPEQK_BF16) /* the bf16 bits of the f32 values */
            for (size_t j = 0; j < counts[i]; j++) {
                uint32_t u;
                memcpy(&u, &f[j], 4);
                h[j] = (uint16_t)(u >> 16);
            }
        *dst[i] = bench_mkbuf(e, counts[i] * es, sh->dt == ROPEQK_F32 ? (const void *)f : (const void *)h, &cerr);
    }
    if (!cerr)
        b.out = bench_mkbuf(e, no * 4, NULL, &cerr);
    if (!cerr && !paged) {
        b.qp1 = bench_mkbuf(e, (size_t)sh->Sq * 4, qp1, &cerr);
        if (!cerr)
            b.kp1 = bench_mkbuf(e, (size_t)sh->Sk * 4, kp1, &cerr);
        if (!cerr)
            b.qp3 = bench_mkbuf(e, (size_t)(3 * sh->Sq) * 4, qp3, &cerr);
        if (!cerr)
            b.kp3 = bench_mkbuf(e, (size_t)(3 * sh->Sk) * 4, kp3, &cerr);
    }
    const cl_mem m[8] = {b.q, b.k, b.v, b.out, b.qp1, b.kp1, b.qp3, b.kp3};
    for (int i = 0; i < 8; i++)
        b.w[i] = bench_wrap(e->rq, m[i], &cerr);
    if (cerr) {
        err = cerr;
        goto done;
    }
    if (paged) {
        b.table = malloc((size_t)np * sizeof *b.table);
        if (!b.table) {
            err = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
            goto done;
        }
        bench_shuffle_pages(&rng, b.table, np);
        b.lens[0] = (int32_t)sh->Sk, b.qpos[0] = (int32_t)sh->Sk - 1;
        b.batch = (ropeqk_paged_batch){.n_seqs = 1, .page_table = b.table, .seq_lens = b.lens, .q_pos = b.qpos};
    }
    for (int i = 0; i < nv && !err; i++) {
        ropeqk_plan_desc d = {.op = sh->kind == K_SCORES ? ROPEQK_OP_SCORES
                                    : sh->kind == K_ATTN ? ROPEQK_OP_ATTENTION
                                                         : ROPEQK_OP_PAGED_DECODE,
                              .params = v[i].p, .q = tq, .k = tk, .v = tv, .out = to,
                              .positions = v[i].pos ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
        if (v[i].alias) { /* V: K's first Dv dims, K's strides */
            d.v = tk;
            d.v.ne[3] = sh->Dv;
        }
        if (paged) {
            d.q = ropeqk_tensor_bhsd(sh->dt, 1, sh->Hq, 1, sh->D);
            d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, sh->Hq, 1, sh->Dv);
            d.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = np, .max_seqs = 1};
            d.params.q_pos_offset = 0;
        }
        if ((err = ropeqk_plan_create(e->rq, &d, &v[i].plan)))
            fprintf(stderr, "%s / %s: plan: %s: %s\n", sh->name, v[i].name, ropeqk_status_string(err),
                    ropeqk_last_error());
    }
    for (int r = 0; r < WARMUP + runs && !err; r++)
        for (int i = 0; i < nv && !err; i++) {
            double t0 = rqs_now();
            err = run_once(e, sh, &v[i], &b);
            clFinish(e->queue);
            if (r >= WARMUP)
                v[i].t[r - WARMUP] = (rqs_now() - t0) * 1e3;
        }
    if (err) {
        fprintf(stderr, "%s: run: %s: %s\n", sh->name, ropeqk_status_string(err), ropeqk_last_error());
        goto done;
    }
    /* the overhead: the median over the rounds of the variant's time over its baseline's in the same
     * round (a slow stretch of the machine hits both), next to the plain medians */
    double med[MAXV], ratio[2][MAXV], r[MAXRUNS];
    for (int i = 0; i < nv; i++)
        for (int k = 0; k < 2; k++) {
            int bi = k ? v[i].base2 : v[i].base;
            ratio[k][i] = NAN;
            if (bi < 0)
                continue;
            for (int j = 0; j < runs; j++)
                r[j] = v[i].t[j] / v[bi].t[j];
            rqs_sort(r, (size_t)runs);
            ratio[k][i] = r[runs / 2];
        }
    for (int i = 0; i < nv; i++) {
        rqs_sort(v[i].t, (size_t)runs);
        med[i] = v[i].t[runs / 2];
    }
    printf("\n%s\n", sh->name);
    for (int i = 0; i < nv; i++) {
        printf("  %-42s %9.3f ms (best %8.3f)", v[i].name, med[i], v[i].t[0]);
        for (int k = 0; k < 2; k++)
            if (!isnan(ratio[k][i]))
                printf("%s %+6.1f%% vs %s", k ? "," : " ", 100.0 * (ratio[k][i] - 1.0),
                       v[k ? v[i].base2 : v[i].base].name);
        printf("\n");
    }
done:
    for (int i = 0; i < nv; i++)
        ropeqk_plan_destroy(v[i].plan);
    cl_mem all[8] = {b.q, b.k, b.v, b.out, b.qp1, b.kp1, b.qp3, b.kp3};
    for (int i = 0; i < 8; i++)
        ropeqk_buffer_destroy(b.w[i]);
    for (int i = 0; i < 8; i++)
        if (all[i])
            clReleaseMemObject(all[i]);
    free(f), free(h), free(qp1), free(kp1), free(qp3), free(kp3), free(b.table);
    return err;
}

int bench_variants(benv *e, int runs, const char *shape_filter)
{
    if (runs > MAXRUNS)
        runs = MAXRUNS;
    static const bshape shapes[] = {
        {"attention prefill: Hq 16 / Hkv 4, S 1024, D = Dv = 128, causal, f32", K_ATTN, 16, 4, 1024, 1024, 128, 128,
         ROPEQK_F32, false},
        {"attention decode: Hq 32 / Hkv 8, Sq 1, Sk 8192, D = Dv = 128, f16", K_ATTN, 32, 8, 1, 8192, 128, 128,
         ROPEQK_F16, false},
        {"scores prefill: Hq 16 / Hkv 4, S 1024, D 128, causal, f32", K_SCORES, 16, 4, 1024, 1024, 128, 128, ROPEQK_F32,
         false},
        {"scores decode: Hq 32 / Hkv 4, Sq 1, Sk 16384, D 128, f32", K_SCORES, 32, 4, 1, 16384, 128, 128, ROPEQK_F32,
         false},
        {"paged decode: Hq 32 / Hkv 8, 16384 tokens, D = Dv = 128, f16 caches", K_PAGED, 32, 8, 1, 16384, 128, 128,
         ROPEQK_F16, false},
        {"MLA decode (dense): Hq 16 / Hkv 1, Sq 1, Sk 4096, D 576, Dv 512, bf16", K_ATTN, 16, 1, 1, 4096, 576, 512,
         ROPEQK_BF16, true},
        {"MLA prefill chunk (dense): Hq 16 / Hkv 1, Sq 64, Sk 2048, D 576, Dv 512, bf16", K_ATTN, 16, 1, 64, 2048, 576,
         512, ROPEQK_BF16, true},
        {"MLA decode (paged): Hq 16 / Hkv 1, 4096 tokens, D 576, Dv 512, bf16", K_PAGED, 16, 1, 1, 4096, 576, 512,
         ROPEQK_BF16, true},
    };
    printf("variants: each model-family variant against plain attention on the same shape; %d rounds after %d "
           "warm-ups, every variant once per round (wall time enqueue .. clFinish), medians\n", runs, WARMUP);
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!shape_filter || strstr(shapes[i].name, shape_filter))
            rc |= one_shape(e, &shapes[i], runs) != 0;
    return rc;
}
