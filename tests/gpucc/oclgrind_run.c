/* The GPU-profile kernels on small shapes, for oclgrind (tests/gpucc/oclgrind.sh runs this under
 * `oclgrind --data-races --check-api`): pocl runs a work-group's items in lock-step loops and hides
 * exactly the local-memory races a GPU would show; oclgrind simulates every work-item and reports
 * data races, invalid accesses and barrier divergence. Public API only, one context with the GPU
 * profile on the first OpenCL device (oclgrind's), and every result checked against the fp64 paths:
 *   1. scores with enough query rows per KV head that the tiled kernel runs (rope_rotate_f32,
 *      qk_scores_tiled), causal, GQA, half-split, partial rotary;
 *   2. attention, f16 Q/K/V (rope_rotate_f16, qk_attention_fa2_f16 at D 16; qk_attention_gpu_f16 at
 *      D 20, the fa2 kernel's fallback for head dims it does not take; qk_attention_f16 with the GPU
 *      kernel off), causal, sliding window, Dv != D;
 *   3. the paged KV cache, bf16 caches: appends (paged_append) into shuffled pages, then paged decode
 *      of a ragged batch (rope_rotate_f32, paged_attn_gpu, paged_combine): 72 and 71 tokens (three
 *      key tiles), D 80 with rotary width 72 (two stages of rotation pairs and one of pass-through
 *      dims), Dv 16 (four key lanes); then D 64 (rotary 64, or 48 at offset 8) over 142 and 141
 *      tokens (two tiles) with Hq 4 (paged_attn_fast4, eight key lanes) and Hq 16 (paged_attn_fast8,
 *      two head chunks).
 * Each again with the model-family variants (docs/conventions.md section 11): soft-capping, a rotary
 * offset, M-RoPE position arrays (scores, attention), attention sinks (attention, paged decode); and
 * attention with a NaN in V of a key that the causal mask hides from the earlier rows (a tile some
 * row sees only in part: the GPU kernel's non-finite flag and fix-up, docs/conventions.md section 9).
 * Output: TAP lines without a plan (oclgrind.sh adds its own and the plan). */
#include <ropeqk_opencl.h>

#include "half.h"
#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_test, n_fail;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", ok ? "ok" : "not ok", ++n_test);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    n_fail += !ok;
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        printf("Bail out! out of memory\n");
        exit(1);
    }
    return p;
}

/* n values of dtype t, uniform in [-1, 1) and exactly representable, at p (f32 copies in f if non-NULL) */
static void fill(void *p, ropeqk_dtype t, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++) {
        float x = (float)rqs_uniform(rng);
        if (t == ROPEQK_F16)
            ((uint16_t *)p)[i] = rqs_float_to_half(x);
        else if (t == ROPEQK_BF16)
            ((uint16_t *)p)[i] = rqs_float_to_bf16(x);
        else
            ((float *)p)[i] = x;
    }
}

/* Scores of one shape against fp64; positions: per-token arrays (shuffled around 5000) if pos;
 * variants: soft-capping, rotary dims [8, 24), M-RoPE with [3][S] arrays if pos. */
static void scores(ropeqk_ctx *ctx, const char *what, ropeqk_dtype dt, int64_t Hq, int64_t Sq, int64_t Sk, int pos,
                   int64_t window, int variants, uint64_t *rng)
{
    const int64_t B = 1, Hkv = 1, D = 24;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = ROPEQK_HALF_SPLIT;
    p.rotary_dim = 16;
    p.causal = 1;
    p.window = window;
    p.q_pos_offset = 1000;
    p.k_pos_offset = 996;
    int64_t ns = 1; /* position streams */
    if (variants) {
        p.softcap = 2.0, p.rotary_offset = 8;
        if (pos)
            p.mrope_section[0] = 2, p.mrope_section[1] = 3, p.mrope_section[2] = 3, p.mrope_interleaved = 1, ns = 3;
    }
    int32_t *qp = NULL, *kp = NULL;
    if (pos) {
        qp = xmalloc((size_t)(ns * Sq) * 4), kp = xmalloc((size_t)(ns * Sk) * 4);
        for (int64_t i = 0; i < ns * Sq; i++)
            qp[i] = 5000 + (int32_t)rqs_below(rng, 64);
        for (int64_t j = 0; j < ns * Sk; j++)
            kp[j] = 4990 + (int32_t)rqs_below(rng, 64);
    }
    ropeqk_tensor q = ropeqk_tensor_bhsd(dt, B, Hq, Sq, D), k = ropeqk_tensor_bhsd(dt, B, Hkv, Sk, D);
    ropeqk_tensor s = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Sk), s64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, Sk);
    void *qd = xmalloc(ropeqk_tensor_extent(&q)), *kd = xmalloc(ropeqk_tensor_extent(&k));
    float *sd = xmalloc(ropeqk_tensor_extent(&s));
    double *rd = xmalloc(ropeqk_tensor_extent(&s64));
    fill(qd, dt, (size_t)(B * Hq * Sq * D), rng);
    fill(kd, dt, (size_t)(B * Hkv * Sk * D), rng);
    ropeqk_status st = ropeqk_scores(ctx, &p, &q, qd, &k, kd, qp, kp, &s, sd);
    check(st == ROPEQK_SUCCESS, "scores (%s): %s %s", what, ropeqk_status_string(st), st ? ropeqk_last_error() : "");
    if (!st) {
        double err = 0;
        int64_t mism = 0;
        st = ropeqk_scores_ref(&p, &q, qd, &k, kd, qp, kp, &s64, rd);
        if (!st)
            st = ropeqk_max_error(&p, &q, qd, &k, kd, &s, sd, &s64, rd, &err, &mism);
        check(!st && err <= 1e-5 && mism == 0, "scores (%s) against fp64: error %.3g, mask mismatches %lld", what, err,
              (long long)mism);
    }
    free(qd), free(kd), free(sd), free(rd), free(qp), free(kp);
}

/* variants: soft-capping, sinks (row 0 of head 0 sees no key), rotary dims [8, 16), M-RoPE arrays */
/* mode 0: plain; 1: the variants; 2: plain with V[key 20][dim 3] NaN (rows at positions 20..23 see
 * it: O NaN there, the others as fp64); 3: plain with every key after every row (keys from position
 * 100): a block whose rows see no key runs no key tile (O = 0, LSE = -inf; qk_attention_fa2_* read
 * its sums' partials without a barrier there) */
static void attention(ropeqk_ctx *ctx, int mode, int64_t D, uint64_t *rng)
{
    const int variants = mode == 1;
    const int64_t B = 1, Hq = 2, Hkv = 1, Sq = 20, Sk = 24, Dv = 8;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.window = 9;
    p.q_pos_offset = 4;
    if (mode == 3)
        p.k_pos_offset = 100;
    const float sinks[2] = {0.5f, -1.0f};
    int32_t *qp = NULL, *kp = NULL;
    if (variants) {
        p.softcap = 3.0, p.sinks = sinks, p.n_sinks = 2, p.rotary_dim = 8, p.rotary_offset = 8, p.k_pos_offset = 5;
        p.mrope_section[0] = 1, p.mrope_section[1] = 2, p.mrope_section[2] = 1;
        qp = xmalloc(3 * Sq * 4), kp = xmalloc(3 * Sk * 4);
        for (int64_t i = 0; i < 3 * Sq; i++)
            qp[i] = (int32_t)rqs_below(rng, 1000);
        for (int64_t j = 0; j < 3 * Sk; j++)
            kp[j] = (int32_t)rqs_below(rng, 1000);
    }
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F16, B, Hq, Sq, D), k = ropeqk_tensor_bhsd(ROPEQK_F16, B, Hkv, Sk, D);
    ropeqk_tensor v = ropeqk_tensor_bhsd(ROPEQK_F16, B, Hkv, Sk, Dv);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Dv), o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, Dv);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, 1), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, 1);
    void *qd = xmalloc(ropeqk_tensor_extent(&q)), *kd = xmalloc(ropeqk_tensor_extent(&k));
    void *vd = xmalloc(ropeqk_tensor_extent(&v));
    float *od = xmalloc(ropeqk_tensor_extent(&o)), *ld = xmalloc(ropeqk_tensor_extent(&l));
    double *o64d = xmalloc(ropeqk_tensor_extent(&o64)), *l64d = xmalloc(ropeqk_tensor_extent(&l64));
    fill(qd, ROPEQK_F16, (size_t)(B * Hq * Sq * D), rng);
    fill(kd, ROPEQK_F16, (size_t)(B * Hkv * Sk * D), rng);
    fill(vd, ROPEQK_F16, (size_t)(B * Hkv * Sk * Dv), rng);
    if (mode == 2)
        ((uint16_t *)vd)[20 * Dv + 3] = 0x7E00; /* f16 NaN */
    ropeqk_status st = ropeqk_attention(ctx, &p, &q, qd, &k, kd, &v, vd, qp, kp, &o, od, &l, ld);
    check(st == ROPEQK_SUCCESS, "attention D %d%s: %s %s", (int)D, variants ? " (variants)" : "",
          ropeqk_status_string(st), st ? ropeqk_last_error() : "");
    if (!st) {
        double err = 0, lerr = 0;
        int64_t mism = 0;
        st = ropeqk_attention_ref(&p, &q, qd, &k, kd, &v, vd, qp, kp, &o64, o64d, &l64, l64d);
        if (!st)
            st = ropeqk_attention_max_error(&v, vd, &o, od, &o64, o64d, &l, ld, &l64, l64d, &err, &lerr, &mism);
        check(!st && err <= 1e-5 && lerr <= 1e-5 && mism == (mode == 2 ? 4 * Hq : 0),
              "attention D %d%s against fp64: O error %.3g, LSE error %.3g, mismatches %lld", (int)D,
              mode == 1 ? " (variants)" : mode == 2 ? " (NaN in a masked V)" : mode == 3 ? " (no key seen)" : "", err, lerr,
              (long long)mism);
    }
    free(qd), free(kd), free(vd), free(od), free(ld), free(o64d), free(l64d), free(qp), free(kp);
}

static cl_mem buffer(ropeqk_ctx *ctx, size_t n, const void *data)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0), n,
                              (void *)data, &err);
    if (err) {
        printf("Bail out! clCreateBuffer: %s\n", ropeqk_opencl_error_name(err));
        exit(1);
    }
    return m;
}

/* variants: soft-capping, sinks, rotary dims [8, 80) */
/* fast: D 64 (rotary 48 at offset 8 with the variants) and hq query heads: paged_attn_fast4 (hq 4) or
 * paged_attn_fast8 (hq 16, two chunks of 8 heads); else D 80, rotary 72 (paged_attn_gpu) */
static void paged(ropeqk_ctx *ctx, int variants, int fast, int hq, uint64_t *rng)
{
    enum { NS = 2, PS = 16, MAXP = 10, NP = 21, HQM = 16, HKV = 2, DM = 80, DV = 16, CAP = MAXP * PS };
    const int HQ = hq, D = fast ? 64 : 80;
    const ropeqk_dtype ct = ROPEQK_BF16;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = ROPEQK_HALF_SPLIT;
    p.causal = 1;
    p.rotary_dim = fast ? (variants ? 48 : 64) : 72;
    float sinks[HQM];
    for (int h = 0; h < HQM; h++)
        sinks[h] = 0.5f * (float)(h % 4) - 0.5f;
    if (variants)
        p.softcap = 4.0, p.sinks = sinks, p.n_sinks = HQ, p.rotary_offset = 8;
    ropeqk_plan_desc d;
    memset(&d, 0, sizeof d);
    d.op = ROPEQK_OP_PAGED_DECODE;
    d.params = p;
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, NS, HQ, 1, D);
    d.k = ropeqk_tensor_bhsd(ct, NP, HKV, PS, D);
    d.v = ropeqk_tensor_bhsd(ct, NP, HKV, PS, DV);
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, NS, HQ, 1, DV);
    d.lse = ropeqk_tensor_bhsd(ROPEQK_F32, NS, HQ, 1, 1);
    d.with_lse = 1;
    d.paged = (ropeqk_paged_desc){.page_size = PS, .max_pages_per_seq = MAXP, .max_seqs = NS};
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
    check(st == ROPEQK_SUCCESS, "paged plan: %s %s", ropeqk_status_string(st), st ? ropeqk_last_error() : "");
    if (st)
        return;
    cl_command_queue queue = ropeqk_opencl_queue(ctx);
    /* the tokens of each sequence in order (host copies), appended in three steps: 70 (fast: 140, two
     * tiles of the fast kernel) to both, 1 to both, 1 to sequence 0 only: lengths 72 and 71 (142 and
     * 141), pages shuffled */
    const int32_t table[NS * MAXP] = {4, 1, 9, 0, 7, 13, 17, 11, 19, 15, 3, 10, 2, 6, 8, 12, 20, 14, 16, 18};
    const int first = fast ? 140 : 70, lens_final[NS] = {first + 2, first + 1};
    size_t es = ropeqk_dtype_size(ct);
    uint16_t *kh = xmalloc((size_t)NS * HKV * CAP * D * es), *vh = xmalloc((size_t)NS * HKV * CAP * DV * es);
    fill(kh, ct, (size_t)NS * HKV * CAP * D, rng); /* [s][hk][token][d] */
    fill(vh, ct, (size_t)NS * HKV * CAP * DV, rng);
    cl_mem kc = buffer(ctx, ropeqk_tensor_extent(&d.k), NULL), vc = buffer(ctx, ropeqk_tensor_extent(&d.v), NULL);
    int32_t lens[NS] = {0, 0};
    const int steps[3][2] = {{first, 2}, {1, 2}, {1, 1}}; /* tokens, sequences */
    for (int i = 0; i < 3 && !st; i++) {
        int n_new = steps[i][0], ns = steps[i][1];
        ropeqk_tensor kn = ropeqk_tensor_bhsd(ct, ns, HKV, n_new, D), vn = ropeqk_tensor_bhsd(ct, ns, HKV, n_new, DV);
        uint16_t *kb = xmalloc(ropeqk_tensor_extent(&kn)), *vb = xmalloc(ropeqk_tensor_extent(&vn));
        for (int s = 0; s < ns; s++)
            for (int h = 0; h < HKV; h++)
                for (int t = 0; t < n_new; t++) {
                    memcpy(kb + ((s * HKV + h) * n_new + t) * D, kh + ((s * HKV + h) * CAP + lens[s] + t) * D, D * es);
                    memcpy(vb + ((s * HKV + h) * n_new + t) * DV, vh + ((s * HKV + h) * CAP + lens[s] + t) * DV, DV * es);
                }
        cl_mem knb = buffer(ctx, ropeqk_tensor_extent(&kn), kb), vnb = buffer(ctx, ropeqk_tensor_extent(&vn), vb);
        ropeqk_paged_batch b = {.n_seqs = ns, .page_table = table, .seq_lens = lens};
        ropeqk_opencl_paged_cache cache = {.k_cache = {kc, 0}, .v_cache = {vc, 0}};
        st = ropeqk_opencl_paged_append(pl, queue, &kn, (ropeqk_opencl_mem){knb, 0}, &vn, (ropeqk_opencl_mem){vnb, 0},
                                        &cache, &b, 0, NULL, NULL);
        clFinish(queue);
        check(st == ROPEQK_SUCCESS, "paged append %d: %d tokens to %d sequences: %s %s", i + 1, n_new, ns,
              ropeqk_status_string(st), st ? ropeqk_last_error() : "");
        for (int s = 0; s < ns; s++)
            lens[s] += n_new;
        clReleaseMemObject(knb), clReleaseMemObject(vnb);
        free(kb), free(vb);
    }
    if (!st) {
        float *qh = xmalloc((size_t)NS * HQ * D * 4), *oh = xmalloc((size_t)NS * HQ * DV * 4), *lh = xmalloc(NS * HQ * 4);
        fill(qh, ROPEQK_F32, (size_t)NS * HQ * D, rng);
        int32_t qpos[NS] = {lens[0] - 1, lens[1] - 1 + 7}; /* a plain decode step, and one 7 ahead */
        cl_mem qb = buffer(ctx, (size_t)NS * HQ * D * 4, qh), ob = buffer(ctx, (size_t)NS * HQ * DV * 4, NULL);
        cl_mem lb = buffer(ctx, NS * HQ * 4, NULL);
        ropeqk_paged_batch b = {.n_seqs = NS, .page_table = table, .seq_lens = lens, .q_pos = qpos};
        ropeqk_opencl_paged_args a = {.q = {qb, 0}, .k_cache = {kc, 0}, .v_cache = {vc, 0}, .out = {ob, 0}, .lse = {lb, 0}};
        st = ropeqk_opencl_paged_enqueue(pl, queue, &a, &b, 0, NULL, NULL);
        if (!st) {
            clEnqueueReadBuffer(queue, ob, CL_TRUE, 0, (size_t)NS * HQ * DV * 4, oh, 0, NULL, NULL);
            clEnqueueReadBuffer(queue, lb, CL_TRUE, 0, NS * HQ * 4, lh, 0, NULL, NULL);
        }
        check(st == ROPEQK_SUCCESS, "paged decode: %s %s", ropeqk_status_string(st), st ? ropeqk_last_error() : "");
        for (int s = 0; s < NS && !st; s++) { /* each sequence against the fp64 attention of its tokens */
            ropeqk_params ps = p;
            ps.q_pos_offset = qpos[s];
            ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, D);
            ropeqk_tensor k = {ct, {1, HKV, lens[s], D}, {(int64_t)(HKV * CAP * D * es), (int64_t)(CAP * D * es), (int64_t)(D * es), (int64_t)es}};
            ropeqk_tensor v = {ct, {1, HKV, lens[s], DV}, {(int64_t)(HKV * CAP * DV * es), (int64_t)(CAP * DV * es), (int64_t)(DV * es), (int64_t)es}};
            ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, DV), o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, HQ, 1, DV);
            ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, 1), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, HQ, 1, 1);
            double o64d[HQM * DV], l64d[HQM], err = 0, lerr = 0;
            int64_t mism = 0;
            const uint16_t *ks = kh + (size_t)s * HKV * CAP * D, *vs = vh + (size_t)s * HKV * CAP * DV;
            ropeqk_status r = ropeqk_attention_ref(&ps, &q, qh + s * HQ * D, &k, ks, &v, vs, NULL, NULL, &o64, o64d, &l64, l64d);
            if (!r)
                r = ropeqk_attention_max_error(&v, vs, &o, oh + s * HQ * DV, &o64, o64d, &l, lh + s * HQ, &l64, l64d, &err,
                                               &lerr, &mism);
            check(!r && err <= 1e-5 && lerr <= 1e-5 && mism == 0 && lens[s] == lens_final[s],
                  "paged decode%s, Hq %d, sequence %d (%d tokens) against fp64: O error %.3g, LSE error %.3g, "
                  "mismatches %lld", fast ? " (fast pass 1)" : "", HQ, s, lens[s], err, lerr, (long long)mism);
        }
        clReleaseMemObject(qb), clReleaseMemObject(ob), clReleaseMemObject(lb);
        free(qh), free(oh), free(lh);
    }
    clReleaseMemObject(kc), clReleaseMemObject(vc);
    free(kh), free(vh);
    ropeqk_plan_destroy(pl);
}

int main(void)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.tuning.profile = ROPEQK_PROFILE_GPU;
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (st) {
        printf("Bail out! ropeqk_ctx_create: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        return 1;
    }
    printf("# device: %s\n# options: %s\n", ropeqk_ctx_device_description(ctx), ropeqk_ctx_build_options(ctx));
    uint64_t rng = 20261207;
    /* Hq 2, Hkv 1: 2 x 40 = 80 rows per KV head, at least half of the 64-row tile: qk_scores_tiled */
    scores(ctx, "tiled kernel, offsets", ROPEQK_F32, 2, 40, 44, 0, 0, 0, &rng);
    scores(ctx, "tiled kernel, positions and window", ROPEQK_F32, 2, 40, 70, 1, 12, 0, &rng);
    scores(ctx, "decode shape, qk_scores", ROPEQK_F32, 4, 1, 70, 0, 0, 0, &rng); /* 4 rows: below half a tile */
    scores(ctx, "tiled kernel, variants, M-RoPE arrays", ROPEQK_F32, 2, 40, 70, 1, 12, 1, &rng);
    scores(ctx, "decode shape, qk_scores, variants", ROPEQK_F32, 4, 1, 70, 0, 0, 1, &rng);
    attention(ctx, 0, 16, &rng); /* qk_attention_fa2_f16 */
    attention(ctx, 1, 16, &rng);
    attention(ctx, 2, 16, &rng);
    attention(ctx, 3, 16, &rng);
    attention(ctx, 0, 20, &rng); /* D not a multiple of its step: qk_attention_gpu_f16 (-DRQ_GA_FALLBACK) */
    attention(ctx, 1, 20, &rng);
    attention(ctx, 2, 20, &rng);
    paged(ctx, 0, 0, 4, &rng);
    paged(ctx, 1, 0, 4, &rng);
    paged(ctx, 0, 1, 4, &rng);  /* paged_attn_fast4 */
    paged(ctx, 1, 1, 16, &rng); /* paged_attn_fast8, two head chunks, variants */
    ropeqk_ctx_destroy(ctx);
    /* the GPU profile's decode kernel (cl/decode_gpu.cl), off by default, and its attention with the
     * GPU attention kernel off: the fallback qk_attention_* of devices without room for it */
    cp.tuning.decode = 1;
    cp.tuning.attn_tile = -1;
    st = ropeqk_ctx_create(&cp, &ctx);
    if (st) {
        printf("Bail out! ropeqk_ctx_create (decode on): %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        return 1;
    }
    scores(ctx, "decode kernel, f16", ROPEQK_F16, 4, 1, 70, 0, 0, 0, &rng);
    scores(ctx, "decode kernel, f16, positions and window", ROPEQK_F16, 4, 2, 50, 1, 20, 0, &rng);
    scores(ctx, "decode kernel, f16, variants, M-RoPE arrays", ROPEQK_F16, 4, 2, 50, 1, 20, 1, &rng);
    attention(ctx, 0, 16, &rng);
    attention(ctx, 1, 16, &rng);
    ropeqk_ctx_destroy(ctx);
    return n_fail != 0;
}
