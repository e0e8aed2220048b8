/* The model-family variants of docs/conventions.md section 11 on the device, against the fp64 path
 * (ropeqk_scores_ref, ropeqk_attention_ref) with the documented metrics: logit soft-capping, the rotary
 * offset, M-RoPE (contiguous sections and Qwen3-VL's interleaving, [3][S] position arrays, masks by
 * token order), attention sinks, their combinations, and MLA's shapes (D 576 with 64 rotary dims at
 * offset 512, Dv 512, one KV head, V read from K's buffer). Each variant's sweep crosses it with
 * GQA/MQA, causal masks with offsets (rows fully masked included), sliding windows, partial rotary,
 * both layouts, f16/bf16 inputs and outputs, decode (Sq 1, few rows per KV head) and prefill shapes,
 * strided views (BSHD, padded), per-token positions, decode plans (max_keys and a step), and half the
 * cases through plans on device buffers with NaN canaries around every view (tests/devmem.h: the
 * outputs' gaps and the inputs must come back unchanged), half through ropeqk_scores /
 * ropeqk_attention. The paged decode with soft-capping, sinks (fully masked sequences, several splits
 * joined) and rotary offsets, MLA's paged decode with V aliasing the K cache; the split paths (scratch
 * past the allocation limit, attention in query passes) with M-RoPE arrays; and every kernel form a
 * context can choose (decode kernel on and off, tiled scores off, the attention fallback).
 *
 * Exact where the masks define it: masked scores are -inf (mask mismatches 0), a fully masked
 * attention row is O = 0 exactly with LSE = -inf, or s_h with a sink.
 *
 * Neutral (tests/harness.h, tests/devmem.h): also runs on Vulkan (variants_vulkan), where a variant
 * the backend's kernels do not implement yet is refused at plan creation (ROPEQK_ERR_BAD_PARAM, a
 * message naming it): those cases are skipped with a message, and only there; everything else fails.
 * Seed: ROPEQK_TEST_SEED or 20261130, named in every failure message. */
#include "harness.h"
#include "rng.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(variants, .init = th_ctx_init, .fini = th_ctx_fini, .timeout = 900);

static uint64_t seed0(void) { return th_seed(20261130ull); }

/* ---- a refused variant: skipped on a backend that does not implement it yet, failed on OpenCL ---- */

static int n_run, n_skip;
static double worst_o, worst_lse, worst_s; /* the test's largest errors (f32 outputs), for the log */

static bool variant_refused(ropeqk_ctx *ctx, ropeqk_status st, const char *what)
{
    if (st != ROPEQK_ERR_BAD_PARAM || !strstr(ropeqk_last_error(), "is not implemented by") ||
        ropeqk_ctx_backend(ctx) == ROPEQK_BACKEND_OPENCL)
        return false;
    cr_log_info("%s: skipped (%s)", what, ropeqk_last_error()); /* info: a warning fails Criterion's exit status */
    n_skip++;
    return true;
}

/* At the end of a test: skipped as a whole when every case was refused as not implemented. */
static void finish_test(const char *what)
{
    cr_log_info("%s: %d cases run, %d skipped (variants the backend does not implement); largest errors: O %.3g, "
                "LSE %.3g, scores %.3g (f32 outputs)", what, n_run, n_skip, worst_o, worst_lse, worst_s);
    if (n_run == 0 && n_skip > 0) {
        const char *be = th_backend_name(th_ctx);
        ropeqk_ctx_destroy(th_ctx); /* a skipped test's .fini does not run (harness.h) */
        th_ctx = NULL;
        cr_skip_test("%s: every case asks for a variant the %s backend does not implement yet", what, be);
    }
}

/* ---- dense cases (scores and attention) ---------------------------------------------------------- */

enum { V_SOFTCAP = 1, V_ROTOFF = 2, V_MROPE = 4, V_SINKS = 8 };

typedef struct {
    bool attn;
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    ropeqk_params p;
    ropeqk_dtype in, out;  /* Q/K/V storage; O storage (attention) */
    th_layout lay, olay;   /* inputs; outputs */
    bool arrays;           /* per-token positions ([3][S] under M-RoPE) */
    bool plan;             /* a plan on device buffers (canaries); else the host-memory call */
    bool lse;
    bool v_alias;          /* V is K's first Dv dims, read from K's memory (MLA) */
    int64_t n_keys;        /* > 0: a decode plan over Sk keys (max_keys) run with a step of n_keys keys */
    double amp;            /* input amplitude (f32 inputs) */
    float sinks[64];
} vcase;

static void describe(const vcase *c, uint64_t seed, const char *what, char *buf, size_t len)
{
    static const char *dt[] = {"f32", "f16", "bf16", "f64"};
    static const char *lay[] = {"bhsd", "bshd", "padded"};
    const ropeqk_params *p = &c->p;
    snprintf(buf, len,
             "%s (seed %llu): %s B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld R%d off%d %s in %s out %s %s/%s "
             "causal %d window %lld offs %lld/%lld%s softcap %g mrope %d/%d/%d%s sinks %d%s%s%s n_keys %lld amp %g "
             "scaling %d%s",
             what, (unsigned long long)seed, c->attn ? "attention" : "scores", (long long)c->B, (long long)c->Hq,
             (long long)c->Hkv, (long long)c->Sq, (long long)c->Sk, (long long)c->D, (long long)c->Dv,
             p->rotary_dim, p->rotary_offset, p->layout ? "half-split" : "interleaved", dt[c->in], dt[c->out],
             lay[c->lay], lay[c->olay], p->causal, (long long)p->window, (long long)p->q_pos_offset,
             (long long)p->k_pos_offset, c->arrays ? " arrays" : "", p->softcap, p->mrope_section[0],
             p->mrope_section[1], p->mrope_section[2], p->mrope_interleaved ? " interleaved" : "", p->n_sinks,
             c->v_alias ? " V=K" : "", c->plan ? " plan" : " host call", c->lse ? " +lse" : "", (long long)c->n_keys,
             c->amp, p->scaling.type, p->conjugate ? " conjugate" : "");
}

/* A random case with the variants `vars` (V_* bits), the rest drawn from idx and the seed. */
/* The case is returned by value: p.sinks, which points at the case's own sinks array, is pointed at
 * the caller's copy by MAKE_CASE (C does not promise the copy is built in place). */
#define MAKE_CASE(c, idx, vars, seed)                                                              \
    do {                                                                                           \
        (c) = make_case((idx), (vars), (seed));                                                    \
        if ((c).p.sinks)                                                                           \
            (c).p.sinks = (c).sinks;                                                               \
    } while (0)
static vcase make_case(int idx, unsigned vars, uint64_t seed)
{
    uint64_t rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(idx + 1)) ^ ((uint64_t)vars << 48);
    vcase c;
    memset(&c, 0, sizeof c);
    ropeqk_params *p = &c.p;
    ropeqk_default_params(p);
    c.attn = (vars & V_SINKS) || idx % 3 != 0;
    static const int64_t Ds[] = {64, 16, 80, 128, 48, 32};
    c.D = Ds[idx % 6];
    c.Dv = idx % 4 == 1 ? 40 : idx % 4 == 2 ? 96 : idx % 8 == 3 ? 256 : c.D;
    c.Hkv = 1 + (int64_t)rqs_below(&rng, 2);
    c.Hq = c.Hkv * (int64_t[]){1, 2, 4, 8}[rqs_below(&rng, 4)];
    c.B = idx % 5 == 3 ? 2 : 1;
    switch (idx % 4) { /* decode, few rows, prefill, long keys */
    case 0: c.Sq = 1, c.Sk = rqs_below(&rng, 2) ? 300 : 77; break;
    case 1: c.Sq = 2, c.Sk = 33 + (int64_t)rqs_below(&rng, 40); break;
    case 2: c.Sq = 40 + (int64_t)rqs_below(&rng, 60), c.Sk = c.Sq + (int64_t)rqs_below(&rng, 40); break;
    default: c.Sq = 5, c.Sk = 1200; break;
    }
    p->layout = (idx / 2) % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    p->base = rqs_below(&rng, 2) ? 10000.0 : 1000000.0;
    p->conjugate = idx % 13 == 7;
    /* rotary width and offset: MLA-like tail, a block in the middle (a multiple of 16 or not) */
    int R = (int)c.D;
    if (vars & V_ROTOFF) {
        switch (rqs_below(&rng, 3)) {
        case 0: R = (int)c.D / 2 - (int)c.D / 2 % 2, p->rotary_offset = (int32_t)c.D - R; break;
        case 1: R = 2 * (int)(1 + rqs_below(&rng, (uint64_t)c.D / 4)), p->rotary_offset = 16 * (int32_t)rqs_below(&rng, (uint64_t)((c.D - R) / 16 + 1)); break;
        default: R = 2 * (int)(1 + rqs_below(&rng, (uint64_t)c.D / 4)), p->rotary_offset = 2 * (int32_t)rqs_below(&rng, (uint64_t)((c.D - R) / 2 + 1)); break;
        }
        p->rotary_dim = rqs_below(&rng, 4) == 0 && p->rotary_offset > 0 ? 0 : R; /* 0: the rest of the head */
        if (p->rotary_dim == 0)
            R = (int)c.D - p->rotary_offset;
    } else if (idx % 5 == 2) {
        R = 2 * (int)(1 + rqs_below(&rng, (uint64_t)c.D / 2));
        p->rotary_dim = R;
    }
    if (vars & V_MROPE) { /* sections summing to R/2 (Qwen2-VL 16/24/24 at R 128, scaled) */
        int h = R / 2, t = h / 4 + (int)rqs_below(&rng, (uint64_t)(h / 4 + 1)), hh = (h - t) / 2 + (int)rqs_below(&rng, 2);
        if (hh > h - t)
            hh = h - t;
        p->mrope_section[0] = t, p->mrope_section[1] = hh, p->mrope_section[2] = h - t - hh;
        p->mrope_interleaved = idx % 2;
    }
    p->causal = rqs_below(&rng, 4) != 0;
    int64_t far = (int64_t)1 << 20;
    switch (rqs_below(&rng, 4)) {
    case 0: p->k_pos_offset = 0, p->q_pos_offset = c.Sk - c.Sq; break;
    case 1: p->k_pos_offset = 50, p->q_pos_offset = 20; break; /* causal rows before position 50: fully masked */
    case 2: p->k_pos_offset = far - c.Sk, p->q_pos_offset = far - c.Sq; break;
    default: p->k_pos_offset = (int64_t)rqs_below(&rng, 1000), p->q_pos_offset = p->k_pos_offset + c.Sk / 2;
    }
    if (p->q_pos_offset < 0)
        p->q_pos_offset = 0;
    if (idx % 6 == 5)
        p->window = 1 + (int64_t)rqs_below(&rng, 40);
    c.arrays = (vars & V_MROPE) ? rqs_below(&rng, 4) != 0 : idx % 7 == 4;
    if (vars & V_SOFTCAP)
        p->softcap = (double[]){5.0, 30.0, 50.0}[rqs_below(&rng, 3)];
    if (vars & V_SINKS) {
        for (int64_t h = 0; h < c.Hq; h++) /* logits around the scores' size, now and then dominating */
            c.sinks[h] = (float)(rqs_below(&rng, 5) == 0 ? 12.0 + 4.0 * rqs_uniform(&rng) : 3.0 * rqs_uniform(&rng));
        p->sinks = c.sinks, p->n_sinks = (int32_t)c.Hq;
    }
    c.in = idx % 7 == 1 ? ROPEQK_F16 : idx % 7 == 5 ? ROPEQK_BF16 : ROPEQK_F32;
    c.out = c.attn && idx % 9 == 2 ? ROPEQK_F16 : c.attn && idx % 9 == 6 ? ROPEQK_BF16 : ROPEQK_F32;
    c.lay = (th_layout)(idx % 3);
    c.olay = (th_layout)((idx / 3) % 2 ? TH_PADDED : TH_BHSD);
    c.plan = idx % 2 == 1;
    c.lse = c.attn && idx % 5 != 4;
    c.amp = (vars & V_SOFTCAP) && c.in == ROPEQK_F32 && idx % 3 != 2 ? 3.0 : 1.0;
    if (c.plan && idx % 8 == 7) /* a decode plan: max_keys, then a step of fewer keys */
        c.n_keys = c.Sk - 1 - (int64_t)rqs_below(&rng, (uint64_t)(c.Sk / 2));
    if (idx % 11 == 10) { /* frequency scaling on top */
        p->scaling.type = ROPEQK_SCALING_YARN, p->scaling.factor = 4, p->scaling.original_max_position = 4096;
    }
    return c;
}

/* Positions for S rows: arrays of `streams` x S int32 (M-RoPE: t at the token's order, h and w
 * anywhere; else anywhere below 2^20, so that masks by position are exercised). */
static int32_t *positions(int64_t S, int64_t streams, int64_t off, uint64_t *rng)
{
    int32_t *a = malloc((size_t)(streams * S) * sizeof *a);
    cr_assert(a);
    for (int64_t i = 0; i < S; i++) {
        if (streams == 3) {
            a[i] = (int32_t)(off + i + (int64_t)rqs_below(rng, 3));
            a[S + i] = (int32_t)rqs_below(rng, 1u << 20);
            a[2 * S + i] = (int32_t)rqs_below(rng, 64);
        } else {
            a[i] = (int32_t)rqs_below(rng, 1u << 20);
        }
    }
    return a;
}

static void scale_f32(th_buf *b, double amp)
{
    if (amp == 1.0 || b->t.dtype != ROPEQK_F32)
        return;
    const ropeqk_tensor *t = &b->t;
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
        for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i3 = 0; i3 < t->ne[3]; i3++) {
                    float *x = (float *)(b->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
                    *x *= (float)amp;
                }
}

static double load_elem(const unsigned char *base, const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    const unsigned char *p = base + a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3];
    uint16_t h;
    float f;
    double x;
    switch (t->dtype) {
    case ROPEQK_F16: memcpy(&h, p, 2); return rqs_half_to_float(h);
    case ROPEQK_BF16: memcpy(&h, p, 2); return rqs_bf16_to_float(h);
    case ROPEQK_F64: memcpy(&x, p, 8); return x;
    default: memcpy(&f, p, 4); return f;
    }
}

/* Runs case c on ctx and checks it; false when the backend refused a variant it lacks (skipped). */
static bool run_dense(ropeqk_ctx *ctx, const vcase *c0, uint64_t seed, const char *what)
{
    vcase cx = *c0; /* scores have no V, LSE or sinks */
    if (!cx.attn)
        cx.lse = cx.v_alias = false, cx.p.sinks = NULL, cx.p.n_sinks = 0;
    const vcase *c = &cx;
    char d[900];
    describe(c, seed, what, d, sizeof d);
    uint64_t rng = seed * 0x2545F4914F6CDD1Dull + 17;
    const ropeqk_params *p = &c->p;
    int64_t streams = p->mrope_section[0] || p->mrope_section[1] || p->mrope_section[2] ? 3 : 1;
    th_buf q, k, v, o, l;
    memset(&v, 0, sizeof v);
    memset(&l, 0, sizeof l);
    cr_assert(th_alloc(&q, c->in, (int64_t[]){c->B, c->Hq, c->Sq, c->D}, c->lay));
    cr_assert(th_alloc(&k, c->in, (int64_t[]){c->B, c->Hkv, c->Sk, c->D}, c->lay));
    th_fill_random(&q, &rng);
    th_fill_random(&k, &rng);
    scale_f32(&q, c->amp);
    scale_f32(&k, c->amp);
    ropeqk_tensor tv;
    const unsigned char *vd = NULL;
    if (c->attn) {
        if (c->v_alias) { /* K's first Dv dims, K's strides and memory */
            tv = k.t;
            tv.ne[3] = c->Dv;
            vd = k.data;
        } else {
            cr_assert(th_alloc(&v, c->in, (int64_t[]){c->B, c->Hkv, c->Sk, c->Dv}, c->lay));
            th_fill_random(&v, &rng);
            tv = v.t, vd = v.data;
        }
        cr_assert(th_alloc(&o, c->out, (int64_t[]){c->B, c->Hq, c->Sq, c->Dv}, c->olay));
        if (c->lse)
            cr_assert(th_alloc(&l, ROPEQK_F32, (int64_t[]){c->B, c->Hq, c->Sq, 1}, c->olay));
    } else {
        cr_assert(th_alloc(&o, ROPEQK_F32, (int64_t[]){c->B, c->Hq, c->Sq, c->Sk}, c->olay));
    }
    /* the keys this call uses: a decode plan's step takes the first n_keys */
    int64_t nk = c->n_keys > 0 ? c->n_keys : c->Sk;
    ropeqk_tensor tk = k.t, tvn = tv, ton = o.t;
    tk.ne[2] = nk, tvn.ne[2] = nk;
    if (!c->attn)
        ton.ne[3] = nk;
    int32_t *qp = c->arrays ? positions(c->Sq, streams, p->q_pos_offset, &rng) : NULL;
    int32_t *kp = c->arrays ? positions(nk, streams, p->k_pos_offset, &rng) : NULL;
    size_t qpb = (size_t)(streams * c->Sq) * 4, kpb = (size_t)(streams * nk) * 4;

    /* the fp64 truth */
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->attn ? c->Dv : nk);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1);
    unsigned char *o64d = malloc(ropeqk_tensor_extent(&o64)), *l64d = malloc(ropeqk_tensor_extent(&l64));
    cr_assert(o64d && l64d);
    ropeqk_status st = c->attn ? ropeqk_attention_ref(p, &q.t, q.data, &tk, k.data, &tvn, vd, qp, kp, &o64, o64d,
                                                      c->lse ? &l64 : NULL, c->lse ? l64d : NULL)
                               : ropeqk_scores_ref(p, &q.t, q.data, &tk, k.data, qp, kp, &o64, o64d);
    cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);

    bool refused = false;
    if (c->plan) { /* device buffers, NaN canaries before and after each */
        const void *host[7] = {q.data, k.data, c->attn && !c->v_alias ? v.data : NULL, o.data, qp, kp, c->lse ? l.data : NULL};
        const size_t bytes[7] = {q.bytes, k.bytes, v.bytes, o.bytes, qpb, kpb, l.bytes};
        const bool used[7] = {true, true, c->attn && !c->v_alias, true, c->arrays, c->arrays, c->lse};
        dm_buf *m[7] = {NULL};
        for (int i = 0; i < 7; i++)
            if (used[i])
                cr_assert_eq(dm_create(ctx, bytes[i], host[i], true, &m[i]), ROPEQK_SUCCESS, "%s: %s",
                             ropeqk_last_error(), d);
        ropeqk_plan_desc pd = {.op = c->attn ? ROPEQK_OP_ATTENTION : ROPEQK_OP_SCORES, .params = *p, .q = q.t,
                               .k = k.t, .v = tv, .out = o.t, .lse = l.t, .with_lse = c->lse,
                               .positions = c->arrays ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS,
                               .max_keys = c->n_keys > 0 ? c->Sk : 0};
        ropeqk_plan *pl = NULL;
        st = ropeqk_plan_create(ctx, &pd, &pl);
        if (st && variant_refused(ctx, st, d)) {
            refused = true;
        } else {
            cr_assert_eq(st, ROPEQK_SUCCESS, "plan: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
            ropeqk_args a = {.q = dm_whole(m[0]), .k = dm_whole(m[1]), .v = dm_whole(c->v_alias ? m[1] : m[2]),
                          .out = dm_whole(m[3]), .q_pos = dm_whole(m[4]), .k_pos = dm_whole(m[5]),
                          .lse = dm_whole(m[6])};
            ropeqk_step step = {.n_keys = nk, .q_pos_offset = p->q_pos_offset, .k_pos_offset = p->k_pos_offset};
            st = rqs_plan_run_wait(pl, &a, c->n_keys > 0 ? &step : NULL);
            cr_assert_eq(st, ROPEQK_SUCCESS, "run: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(),
                         d);
            cr_assert_eq(dm_read(m[3], o.data), ROPEQK_SUCCESS);
            if (c->lse)
                cr_assert_eq(dm_read(m[6], l.data), ROPEQK_SUCCESS);
            static const char *const name[7] = {"Q", "K", "V", "output", "q positions", "k positions", "LSE"};
            for (int i = 0; i < 7; i++) {
                bool intact = false;
                if (m[i])
                    cr_expect(dm_check(m[i], i == 3 || i == 6 ? NULL : host[i], &intact) == ROPEQK_SUCCESS &&
                                  intact,
                              "%s: a canary%s changed: %s", name[i], i == 3 || i == 6 ? "" : " or the input", d);
            }
            ropeqk_plan_destroy(pl);
        }
        for (int i = 0; i < 7; i++)
            dm_free(m[i]);
    } else {
        st = c->attn ? ropeqk_attention(ctx, p, &q.t, q.data, &k.t, k.data, &tv, vd, qp, kp, &o.t, o.data,
                                        c->lse ? &l.t : NULL, c->lse ? (float *)l.data : NULL)
                     : ropeqk_scores(ctx, p, &q.t, q.data, &k.t, k.data, qp, kp, &o.t, (float *)o.data);
        if (st && variant_refused(ctx, st, d))
            refused = true;
        else
            cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
    }

    if (!refused) {
        n_run++;
        double err = 0, lerr = 0;
        int64_t mism = 0;
        if (c->attn) {
            st = ropeqk_attention_max_error(&tvn, vd, &o.t, o.data, &o64, o64d, c->lse ? &l.t : NULL,
                                            c->lse ? l.data : NULL, c->lse ? &l64 : NULL, c->lse ? l64d : NULL, &err,
                                            &lerr, &mism);
            cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s: %s", ropeqk_last_error(), d);
            double bound = 1e-5 + (c->out == ROPEQK_F16 ? 0x1p-11 : c->out == ROPEQK_BF16 ? 0x1p-8 : 0.0);
            cr_expect(err <= bound, "O error %.3g > %.3g: %s", err, bound, d);
            if (c->out == ROPEQK_F32)
                worst_o = fmax(worst_o, err);
            worst_lse = fmax(worst_lse, lerr);
            cr_expect(lerr <= 1e-5, "LSE error %.3g: %s", lerr, d);
            cr_expect_eq(mism, 0, "%lld rows with NaN or a -inf LSE mismatch: %s", (long long)mism, d);
            /* fully masked rows (reference O exactly 0 with LSE -inf, or s_h with a sink): O exactly 0 and
             * LSE exactly -inf or s_h (one f32 sum of e^0) */
            int64_t masked = 0, bad = 0;
            for (int64_t b = 0; b < c->B; b++)
                for (int64_t h = 0; h < c->Hq; h++)
                    for (int64_t i = 0; i < c->Sq; i++) {
                        double lw = load_elem(l64d, &l64, b, h, i, 0), sink = p->sinks ? p->sinks[h] : -INFINITY;
                        bool zero = true;
                        for (int64_t e = 0; e < c->Dv && zero; e++)
                            zero = load_elem(o64d, &o64, b, h, i, e) == 0.0;
                        if (!c->lse || !zero || lw != sink)
                            continue;
                        masked++;
                        for (int64_t e = 0; e < c->Dv; e++)
                            bad += load_elem(o.data, &o.t, b, h, i, e) != 0.0;
                        bad += load_elem(l.data, &l.t, b, h, i, 0) != lw;
                    }
            cr_expect_eq(bad, 0, "%lld values of %lld fully masked rows not exactly 0 / the LSE of no key: %s",
                         (long long)bad, (long long)masked, d);
        } else {
            st = ropeqk_max_error(p, &q.t, q.data, &tk, k.data, &ton, o.data, &o64, o64d, &err, &mism);
            cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s: %s", ropeqk_last_error(), d);
            cr_expect(err <= 1e-5, "score error %.3g: %s", err, d);
            worst_s = fmax(worst_s, err);
            cr_expect_eq(mism, 0, "%lld mask mismatches or NaN: %s", (long long)mism, d);
        }
        cr_expect(th_guards_intact(&o), "output padding written: %s", d);
        if (c->lse)
            cr_expect(th_guards_intact(&l), "LSE padding written: %s", d);
    }
    th_free(&q), th_free(&k), th_free(&v), th_free(&o), th_free(&l);
    free(o64d), free(l64d), free(qp), free(kp);
    return !refused;
}

static void sweep(const char *what, unsigned vars, int n, int first)
{
    uint64_t seed = seed0();
    cr_log_info("%s: seed %llu", what, (unsigned long long)seed);
    for (int i = first; i < first + n; i += th_stride()) { /* every case, or every N-th (harness.h) */
        vcase c;
        MAKE_CASE(c, i, vars, seed);
        run_dense(th_ctx, &c, seed + (uint64_t)i, what);
    }
    finish_test(what);
}

Test(variants, softcap) { sweep("softcap", V_SOFTCAP, 24, 0); }
Test(variants, rotary_offset) { sweep("rotary_offset", V_ROTOFF, 24, 0); }
Test(variants, mrope) { sweep("mrope", V_MROPE, 24, 0); }
Test(variants, sinks) { sweep("sinks", V_SINKS, 24, 0); }

Test(variants, combinations)
{
    /* every subset of two or more variants, three cases each */
    uint64_t seed = seed0();
    cr_log_info("combinations: seed %llu", (unsigned long long)seed);
    for (unsigned vars = 3; vars < 16; vars++) {
        if (!(vars & (vars - 1)))
            continue;
        for (int i = 0; i < 3; i++) {
            int idx = (int)vars * 3 + i;
            vcase c;
            MAKE_CASE(c, idx, vars, seed);
            run_dense(th_ctx, &c, seed + (uint64_t)idx, "combinations");
        }
    }
    finish_test("combinations");
}

/* DeepSeek V2/V3, Kimi K2 (MLA, weights absorbed): one KV head of 576 dims, the last 64 rotary
 * (half-split: HF's DeepSeek rotate_half after its de-interleave; interleaved too), V the first 512
 * dims of the same rows; YaRN's frequencies. Decode (Sq 1, 16 query heads) and prefill rows. */
static vcase mla_case(int64_t Hq, int64_t Sq, int64_t Sk, int layout, bool plan)
{
    vcase c;
    memset(&c, 0, sizeof c);
    c.attn = true;
    ropeqk_default_params(&c.p);
    c.B = 1, c.Hq = Hq, c.Hkv = 1, c.Sq = Sq, c.Sk = Sk, c.D = 576, c.Dv = 512;
    c.p.rotary_dim = 64, c.p.rotary_offset = 512, c.p.layout = layout;
    c.p.scale = 1.0 / sqrt(192.0); /* DeepSeek's softmax scale: qk_nope 128 + qk_rope 64 */
    c.p.causal = 1, c.p.q_pos_offset = Sk - Sq;
    c.p.scaling.type = ROPEQK_SCALING_YARN, c.p.scaling.factor = 40, c.p.scaling.original_max_position = 4096;
    c.in = ROPEQK_BF16, c.out = ROPEQK_F32;
    c.lay = TH_BHSD, c.olay = TH_BHSD;
    c.plan = plan, c.lse = true, c.v_alias = true, c.amp = 1.0;
    return c;
}

Test(variants, mla)
{
    uint64_t seed = seed0();
    cr_log_info("mla: seed %llu", (unsigned long long)seed);
    vcase cs[5] = {mla_case(16, 1, 700, ROPEQK_HALF_SPLIT, true), mla_case(16, 1, 129, ROPEQK_INTERLEAVED, false),
                   mla_case(8, 48, 96, ROPEQK_HALF_SPLIT, true), mla_case(4, 3, 300, ROPEQK_INTERLEAVED, true),
                   mla_case(16, 1, 333, ROPEQK_HALF_SPLIT, true)};
    cs[1].in = ROPEQK_F32, cs[1].out = ROPEQK_BF16;
    cs[3].in = ROPEQK_F16, cs[3].p.softcap = 30.0; /* with the other variants on top */
    cs[4].n_keys = 301;                            /* a decode plan: max_keys 333, a step of 301 keys */
    static float sk[16];
    for (int h = 0; h < 16; h++)
        sk[h] = (float)(h % 3) - 1.0f;
    cs[2].p.sinks = sk, cs[2].p.n_sinks = 8;
    for (int i = 0; i < 5; i++)
        run_dense(th_ctx, &cs[i], seed + 100u + (uint64_t)i, "mla");
    finish_test("mla");
}

/* Dv beyond one column block of every kernel (several blocks, scores computed again in each) */
Test(variants, wide_values)
{
    if (ropeqk_ctx_backend(th_ctx) != ROPEQK_BACKEND_OPENCL) { /* the promise is Dv <= 512 (MLA) */
        ropeqk_ctx_destroy(th_ctx);
        th_ctx = NULL;
        cr_skip_test("Dv 1040: the OpenCL kernels' column blocks of V");
    }
    uint64_t seed = seed0();
    vcase c = mla_case(4, 9, 70, ROPEQK_INTERLEAVED, true);
    c.v_alias = false, c.D = 64, c.Dv = 1040, c.p.rotary_dim = 16, c.p.rotary_offset = 8, c.in = ROPEQK_F32;
    c.p.causal = 1, c.p.scaling.type = ROPEQK_SCALING_NONE, c.p.scaling.factor = 0,
    c.p.scaling.original_max_position = 0;
    static float sk[4] = {0.5f, -1.0f, 2.0f, 0.0f};
    c.p.sinks = sk, c.p.n_sinks = 4, c.p.softcap = 20.0;
    run_dense(th_ctx, &c, seed + 200u, "wide_values");
    finish_test("wide_values");
}

/* Scratch past the allocation limit (scores split in halves along keys and rows, the position arrays'
 * streams staying [3][whole S] apart) and attention in many query passes, with M-RoPE arrays. */
Test(variants, splits_with_mrope_arrays)
{
    uint64_t seed = seed0();
    setenv("ROPEQK_MAX_ALLOC", "65536", 1);
    ropeqk_ctx *x = NULL;
    cr_assert_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    unsetenv("ROPEQK_MAX_ALLOC");
    vcase c;
    MAKE_CASE(c, 2, V_MROPE | V_SOFTCAP | V_ROTOFF, seed);
    c.attn = false, c.arrays = true, c.Sq = 127, c.Sk = 300, c.D = 64, c.Hq = 4, c.Hkv = 2, c.B = 1;
    c.p.rotary_dim = 32, c.p.rotary_offset = 16;
    c.p.mrope_section[0] = 6, c.p.mrope_section[1] = 5, c.p.mrope_section[2] = 5;
    c.p.causal = 1, c.p.window = 0, c.p.q_pos_offset = 500, c.p.k_pos_offset = 400;
    for (int plan = 0; plan < 2; plan++) {
        c.plan = plan;
        run_dense(x, &c, seed + 300u + (uint64_t)plan, "scores split at a 64 KiB allocation limit");
    }
    ropeqk_ctx_destroy(x);
    setenv("ROPEQK_ATTN_PASS_BYTES", "4096", 1);
    cr_assert_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    unsetenv("ROPEQK_ATTN_PASS_BYTES");
    c.attn = true, c.Dv = 48, c.lse = true, c.plan = true, c.out = ROPEQK_F32;
    static float sk[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    c.p.sinks = sk, c.p.n_sinks = 4;
    run_dense(x, &c, seed + 302u, "attention in query passes of 4 KiB");
    ropeqk_ctx_destroy(x);
    finish_test("splits_with_mrope_arrays");
}

/* Every kernel form a context can choose, each with the variants combined: the decode kernel on and
 * off, the tiled score kernel off, the GPU attention kernel off (its fallback); on the CPU and the GPU
 * profile (ROPEQK_PROFILE) alike. */
Test(variants, kernel_forms)
{
    uint64_t seed = seed0();
    ropeqk_tuning forms[4];
    memset(forms, 0, sizeof forms);
    forms[0].decode = 1, forms[1].decode = -1, forms[2].tile = -1, forms[3].attn_tile = -1;
    static const char *const fname[4] = {"decode on", "decode off", "tiled scores off", "GPU attention off"};
    for (int f = 0; f < 4; f++) {
        ropeqk_ctx *x = th_ctx_tuned(&forms[f]);
        for (int i = 0; i < 6; i++) {
            unsigned vars = V_SOFTCAP | V_ROTOFF | V_MROPE | (i % 2 ? V_SINKS : 0);
            vcase c;
            MAKE_CASE(c, 40 + i, vars, seed);
            c.attn = i >= 2;
            if (!c.attn)
                c.p.sinks = NULL, c.p.n_sinks = 0;
            if (i == 0 || i == 2) { /* decode shapes: 8 query heads of one KV head, D 64, R 32 at 32 */
                c.Sq = 1, c.Sk = 200, c.Hkv = 1, c.Hq = 8, c.D = 64, c.Dv = 64;
                c.p.rotary_dim = 32, c.p.rotary_offset = 32, c.p.mrope_section[0] = 6, c.p.mrope_section[1] = 5,
                c.p.mrope_section[2] = 5, c.p.layout = f % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
            } else { /* prefill: 64 rows per KV head (the tiled kernel's) */
                c.Sq = 64, c.Sk = 90, c.Hkv = 2, c.Hq = 4, c.D = 48, c.Dv = 32;
                c.p.rotary_dim = 16, c.p.rotary_offset = 10, c.p.mrope_section[0] = 2, c.p.mrope_section[1] = 3,
                c.p.mrope_section[2] = 3;
            }
            c.arrays = i != 3, c.plan = i % 3 != 1, c.n_keys = 0, c.B = 1;
            if (c.p.sinks) {
                for (int h = 0; h < c.Hq; h++)
                    c.sinks[h] = (float)(h % 4) - 1.5f;
                c.p.sinks = c.sinks, c.p.n_sinks = (int32_t)c.Hq;
            }
            char what[64];
            snprintf(what, sizeof what, "kernel_forms (%s)", fname[f]);
            run_dense(x, &c, seed + 400u + (uint64_t)(f * 8 + i), what);
        }
        ropeqk_ctx_destroy(x);
    }
    finish_test("kernel_forms");
}

/* ---- paged decode ------------------------------------------------------------------------------- */

#define PMAXS 5

typedef struct {
    const char *name;
    int64_t Hq, Hkv, D, Dv, ps, n, maxp;
    int64_t lens[PMAXS], kpos0[PMAXS], qahead[PMAXS]; /* q_pos = kpos0 + len - 1 + qahead */
    ropeqk_params p;
    ropeqk_dtype qdt, kdt, vdt, odt;
    bool alias, bshd;      /* V cache = the K cache's first Dv dims; caches [page, slot, head, dim] */
    float sinks[64];
} pvcase;

static size_t poff(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (size_t)(a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3]);
}

static void run_paged(const pvcase *c, uint64_t seed)
{
    char d[700];
    snprintf(d, sizeof d,
             "%s (seed %llu): Hq%lld Hkv%lld D%lld Dv%lld R%d off%d %s ps%lld n%lld softcap %g sinks %d%s%s causal %d "
             "window %lld",
             c->name, (unsigned long long)seed, (long long)c->Hq, (long long)c->Hkv, (long long)c->D, (long long)c->Dv,
             c->p.rotary_dim, c->p.rotary_offset, c->p.layout ? "half-split" : "interleaved", (long long)c->ps,
             (long long)c->n, c->p.softcap, c->p.n_sinks, c->alias ? " V=K" : "", c->bshd ? " bshd" : "",
             c->p.causal, (long long)c->p.window);
    uint64_t rng = seed;
    const int64_t ms = c->n + 1; /* max_seqs: the last row is never written */
    int64_t total = 0;
    for (int64_t s = 0; s < c->n; s++)
        total += (c->lens[s] + c->ps - 1) / c->ps;
    const int64_t np = total + 3;
    int32_t *perm = malloc((size_t)np * sizeof *perm), *table = malloc((size_t)(ms * c->maxp) * sizeof *table);
    cr_assert(perm && table);
    for (int64_t i = 0; i < np; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = np - 1; i > 0; i--) {
        int64_t j = (int64_t)rqs_below(&rng, (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int64_t i = 0; i < ms * c->maxp; i++)
        table[i] = -1;
    int64_t at = 0;
    int32_t lens[PMAXS], qpos[PMAXS], kpos0[PMAXS];
    for (int64_t s = 0; s < c->n; s++) {
        cr_assert(c->lens[s] <= c->maxp * c->ps);
        for (int64_t i = 0; i < (c->lens[s] + c->ps - 1) / c->ps; i++)
            table[s * c->maxp + i] = perm[at++];
        lens[s] = (int32_t)c->lens[s], kpos0[s] = (int32_t)c->kpos0[s];
        qpos[s] = (int32_t)(c->kpos0[s] + c->lens[s] - 1 + c->qahead[s]);
    }
    ropeqk_tensor tq = ropeqk_tensor_bhsd(c->qdt, ms, c->Hq, 1, c->D);
    ropeqk_tensor tk = c->bshd ? ropeqk_tensor_bshd(c->kdt, np, c->ps, c->Hkv, c->D)
                               : ropeqk_tensor_bhsd(c->kdt, np, c->Hkv, c->ps, c->D);
    ropeqk_tensor tv = tk;
    if (c->alias)
        tv.ne[3] = c->Dv;
    else
        tv = c->bshd ? ropeqk_tensor_bshd(c->vdt, np, c->ps, c->Hkv, c->Dv)
                     : ropeqk_tensor_bhsd(c->vdt, np, c->Hkv, c->ps, c->Dv);
    ropeqk_tensor to = ropeqk_tensor_bhsd(c->odt, ms, c->Hq, 1, c->Dv);
    ropeqk_tensor tl = ropeqk_tensor_bhsd(ROPEQK_F32, ms, c->Hq, 1, 1);
    size_t qb = ropeqk_tensor_extent(&tq), kb = ropeqk_tensor_extent(&tk), vb = ropeqk_tensor_extent(&tv);
    size_t ob = ropeqk_tensor_extent(&to), lb = ropeqk_tensor_extent(&tl);
    unsigned char *q = malloc(qb), *k = malloc(kb), *v = c->alias ? k : malloc(vb), *out = malloc(ob);
    float *lse = malloc(lb);
    cr_assert(q && k && v && out && lse);
    memset(k, 0xFF, kb); /* slots past a sequence's length: NaN in every dtype, never read */
    if (!c->alias)
        memset(v, 0xFF, vb);
    size_t qes = ropeqk_dtype_size(c->qdt);
    for (size_t i = 0; i < qb / qes; i++)
        th_put_random(q + i * qes, c->qdt, &rng);
    for (int64_t s = 0; s < c->n; s++)
        for (int64_t j = 0; j < c->lens[s]; j++) {
            int64_t page = table[s * c->maxp + j / c->ps], slot = j % c->ps;
            for (int64_t h = 0; h < c->Hkv; h++) {
                for (int64_t i = 0; i < c->D; i++)
                    th_put_random(k + poff(&tk, page, h, slot, i), c->kdt, &rng);
                if (!c->alias)
                    for (int64_t i = 0; i < c->Dv; i++)
                        th_put_random(v + poff(&tv, page, h, slot, i), c->vdt, &rng);
            }
        }
    ropeqk_plan_desc pd = {.op = ROPEQK_OP_PAGED_DECODE, .params = c->p, .q = tq, .k = tk, .v = tv, .out = to,
                           .lse = tl, .with_lse = 1,
                           .paged = {.page_size = c->ps, .max_pages_per_seq = c->maxp, .max_seqs = ms}};
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(th_ctx, &pd, &pl);
    if (st && variant_refused(th_ctx, st, d))
        goto done;
    cr_assert_eq(st, ROPEQK_SUCCESS, "plan: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
    n_run++;
    dm_buf *bq, *bk, *bv = NULL, *bo, *bl;
    cr_assert_eq(dm_create(th_ctx, qb, q, true, &bq), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, kb, k, true, &bk), ROPEQK_SUCCESS);
    if (!c->alias)
        cr_assert_eq(dm_create(th_ctx, vb, v, true, &bv), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, ob, NULL, true, &bo), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, lb, NULL, true, &bl), ROPEQK_SUCCESS);
    cr_assert_eq(dm_fill(bo, 0x5A), ROPEQK_SUCCESS);
    cr_assert_eq(dm_fill(bl, 0x5A), ROPEQK_SUCCESS);
    ropeqk_paged_batch batch = {.n_seqs = c->n, .page_table = table, .seq_lens = lens, .q_pos = qpos, .k_pos0 = kpos0};
    ropeqk_paged_args a = {.q = dm_whole(bq), .k_cache = dm_whole(bk), .v_cache = dm_whole(c->alias ? bk : bv),
                        .out = dm_whole(bo), .lse = dm_whole(bl)};
    st = rqs_paged_run_wait(pl, &a, &batch);
    cr_assert_eq(st, ROPEQK_SUCCESS, "run: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(),
                 d);
    cr_assert_eq(dm_read(bo, out), ROPEQK_SUCCESS);
    cr_assert_eq(dm_read(bl, lse), ROPEQK_SUCCESS);
    const dm_buf *bufs[3] = {bq, bk, bv};
    const void *expect[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        bool intact = false;
        if (bufs[i])
            cr_expect(dm_check(bufs[i], expect[i], &intact) == ROPEQK_SUCCESS && intact,
                      "input %d or its canaries changed: %s", i, d);
    }
    for (size_t i = (size_t)c->n * (size_t)to.nb[0]; i < ob; i++)
        cr_assert_eq(out[i], 0x5A, "output byte %zu past the batch written: %s", i, d);
    dm_free(bq), dm_free(bk), dm_free(bv), dm_free(bo), dm_free(bl);
    ropeqk_plan_destroy(pl);

    /* per sequence against ropeqk_attention_ref on its pages gathered into dense K and V */
    double worst = 0, worst_lse = 0;
    int64_t mism = 0, masked = 0, bad = 0;
    size_t kes = ropeqk_dtype_size(c->kdt), ves = ropeqk_dtype_size(c->vdt);
    for (int64_t s = 0; s < c->n; s++) {
        int64_t len = c->lens[s];
        ropeqk_tensor dk = ropeqk_tensor_bhsd(c->kdt, 1, c->Hkv, len, c->D), dv;
        unsigned char *kd = malloc((size_t)(c->Hkv * len * c->D) * kes), *vd;
        cr_assert(kd);
        if (c->alias) {
            dv = dk, dv.ne[3] = c->Dv, vd = kd;
        } else {
            dv = ropeqk_tensor_bhsd(c->vdt, 1, c->Hkv, len, c->Dv);
            vd = malloc((size_t)(c->Hkv * len * c->Dv) * ves);
            cr_assert(vd);
        }
        int32_t *kp = malloc((size_t)len * sizeof *kp);
        cr_assert(kp);
        for (int64_t j = 0; j < len; j++) {
            int64_t page = table[s * c->maxp + j / c->ps], slot = j % c->ps;
            kp[j] = kpos0[s] + (int32_t)j;
            for (int64_t h = 0; h < c->Hkv; h++) {
                memcpy(kd + poff(&dk, 0, h, j, 0), k + poff(&tk, page, h, slot, 0), (size_t)c->D * kes);
                if (!c->alias)
                    memcpy(vd + poff(&dv, 0, h, j, 0), v + poff(&tv, page, h, slot, 0), (size_t)c->Dv * ves);
            }
        }
        ropeqk_tensor sq = tq, so = to, sl = tl;
        sq.ne[0] = so.ne[0] = sl.ne[0] = 1;
        ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, c->Hq, 1, c->Dv), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, c->Hq, 1, 1);
        double *ro = malloc((size_t)(c->Hq * c->Dv) * sizeof *ro), *rl = malloc((size_t)c->Hq * sizeof *rl);
        cr_assert(ro && rl);
        st = ropeqk_attention_ref(&c->p, &sq, q + s * tq.nb[0], &dk, kd, &dv, vd, &qpos[s], kp, &o64, ro, &l64, rl);
        cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_last_error(), d);
        double e = 0, el = 0;
        int64_t mm = 0;
        const unsigned char *os = out + s * to.nb[0];
        const float *ls = (const float *)((const unsigned char *)lse + s * tl.nb[0]);
        st = ropeqk_attention_max_error(&dv, vd, &so, os, &o64, ro, &sl, ls, &l64, rl, &e, &el, &mm);
        cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s: %s", ropeqk_last_error(), d);
        worst = fmax(worst, e), worst_lse = fmax(worst_lse, el), mism += mm;
        for (int64_t h = 0; h < c->Hq; h++) { /* every key masked: O exactly 0, LSE -inf or s_h */
            double sink = c->p.sinks ? c->p.sinks[h] : -INFINITY;
            bool zero = true;
            for (int64_t i = 0; i < c->Dv && zero; i++)
                zero = ro[h * c->Dv + i] == 0.0;
            if (!zero || rl[h] != sink)
                continue;
            masked++;
            for (int64_t i = 0; i < c->Dv; i++)
                bad += load_elem(os, &so, 0, h, 0, i) != 0.0;
            bad += (double)ls[h * (tl.nb[1] / 4)] != sink;
        }
        free(kd), free(kp), free(ro), free(rl);
        if (!c->alias)
            free(vd);
    }
    double tol = 1e-5 + (c->odt == ROPEQK_F16 ? 0x1p-11 : c->odt == ROPEQK_BF16 ? 0x1p-8 : 0.0);
    cr_log_info("%s: max error %.3g, LSE %.3g, %lld fully masked rows", d, worst, worst_lse, (long long)masked);
    cr_expect(worst <= tol, "O error %.3g > %g: %s", worst, tol, d);
    cr_expect(worst_lse <= 1e-5, "LSE error %.3g: %s", worst_lse, d);
    cr_expect_eq(mism, 0, "%lld rows with NaN or a -inf LSE mismatch: %s", (long long)mism, d);
    cr_expect_eq(bad, 0, "%lld values of %lld fully masked rows not exactly 0 / the LSE of no key: %s",
                 (long long)bad, (long long)masked, d);
done:
    free(perm), free(table), free(q), free(k), free(out), free(lse);
    if (!c->alias)
        free(v);
}

static pvcase paged_base(const char *name)
{
    pvcase c;
    memset(&c, 0, sizeof c);
    c.name = name;
    ropeqk_default_params(&c.p);
    c.Hq = 8, c.Hkv = 2, c.D = 64, c.Dv = 64, c.ps = 16, c.n = 4, c.maxp = 200;
    int64_t lens[4] = {3000, 1, 700, 257}, kpos0[4] = {0, 1000, 77, 1 << 20}, ahead[4] = {0, 0, -300, 0};
    memcpy(c.lens, lens, sizeof lens), memcpy(c.kpos0, kpos0, sizeof kpos0), memcpy(c.qahead, ahead, sizeof ahead);
    c.p.causal = 1;
    c.qdt = c.kdt = c.vdt = c.odt = ROPEQK_F32;
    return c;
}

/* sequence 0: 3000 keys, several splits; 1: one key; 2: its query 300 keys before its last (the later
 * splits fully masked); 3: positions near 2^20 */
Test(variants, paged_softcap)
{
    uint64_t seed = seed0();
    pvcase c = paged_base("paged softcap 0.3 (scores up to ~5 C: both sides of C/2)");
    c.p.softcap = 0.3;
    c.p.layout = ROPEQK_HALF_SPLIT;
    run_paged(&c, seed + 500);
    c.name = "paged softcap, window, GQA 8, f16 caches, bf16 out, D 80";
    c.Hq = 16, c.D = 80, c.Dv = 48, c.p.window = 600, c.p.softcap = 30.0, c.p.layout = ROPEQK_INTERLEAVED;
    c.kdt = c.vdt = ROPEQK_F16, c.odt = ROPEQK_BF16, c.bshd = true;
    run_paged(&c, seed + 501);
    finish_test("paged_softcap");
}

Test(variants, paged_sinks)
{
    uint64_t seed = seed0();
    pvcase c = paged_base("paged sinks");
    for (int h = 0; h < 16; h++)
        c.sinks[h] = h % 4 == 3 ? 14.0f : (float)(h % 5) - 2.0f;
    c.p.sinks = c.sinks, c.p.n_sinks = (int32_t)c.Hq;
    c.qahead[1] = -5; /* sequence 1: its only key after its query: every key masked */
    run_paged(&c, seed + 510);
    c.name = "paged sinks, MQA, window, softcap";
    c.Hkv = 1, c.p.window = 100, c.p.softcap = 50.0, c.Dv = 40;
    run_paged(&c, seed + 511);
    finish_test("paged_sinks");
}

Test(variants, paged_rotary_offset)
{
    uint64_t seed = seed0();
    pvcase c = paged_base("paged rotary offset 32 (CPU shape)");
    c.p.rotary_dim = 32, c.p.rotary_offset = 32, c.p.layout = ROPEQK_HALF_SPLIT;
    run_paged(&c, seed + 520);
    c.name = "paged rotary offset 16, interleaved, bf16 out (CPU shape)";
    c.p.rotary_offset = 16, c.p.layout = ROPEQK_INTERLEAVED, c.odt = ROPEQK_BF16;
    run_paged(&c, seed + 523);
    c.odt = ROPEQK_F32;
    c.name = "paged rotary offset 6 of D 40 (GPU shape)";
    c.D = 40, c.p.rotary_dim = 18, c.p.rotary_offset = 6, c.p.layout = ROPEQK_INTERLEAVED, c.kdt = ROPEQK_BF16;
    run_paged(&c, seed + 521);
    c.name = "paged rotary offset, D 200 (query stages), softcap, sinks";
    c.D = 200, c.p.rotary_dim = 0, c.p.rotary_offset = 136, c.p.softcap = 30.0, c.Hq = 4, c.Hkv = 1;
    for (int h = 0; h < 4; h++)
        c.sinks[h] = (float)h - 1.0f;
    c.p.sinks = c.sinks, c.p.n_sinks = 4;
    run_paged(&c, seed + 522);
    finish_test("paged_rotary_offset");
}

/* MLA's paged decode: a latent cache of 576 dims per token (one KV head), the last 64 rotated, V its
 * first 512 dims read from the same cache */
Test(variants, paged_mla)
{
    uint64_t seed = seed0();
    pvcase c = paged_base("paged MLA");
    c.Hq = 16, c.Hkv = 1, c.D = 576, c.Dv = 512, c.alias = true, c.n = 3, c.maxp = 128;
    int64_t lens[3] = {1500, 40, 600}, ahead[3] = {0, 0, -100};
    memcpy(c.lens, lens, sizeof lens), memcpy(c.qahead, ahead, sizeof ahead);
    c.p.rotary_dim = 64, c.p.rotary_offset = 512, c.p.layout = ROPEQK_HALF_SPLIT, c.p.scale = 1.0 / sqrt(192.0);
    c.p.scaling.type = ROPEQK_SCALING_YARN, c.p.scaling.factor = 40, c.p.scaling.original_max_position = 4096;
    c.qdt = c.kdt = c.vdt = ROPEQK_BF16, c.ps = 64;
    run_paged(&c, seed + 530);
    c.name = "paged MLA, f32 cache, bshd, sinks, softcap";
    c.qdt = c.kdt = c.vdt = ROPEQK_F32, c.ps = 16, c.bshd = true, c.p.softcap = 30.0;
    c.maxp = 100;
    for (int h = 0; h < 16; h++)
        c.sinks[h] = (float)(h % 3);
    c.p.sinks = c.sinks, c.p.n_sinks = 16;
    run_paged(&c, seed + 531);
    finish_test("paged_mla");
}
