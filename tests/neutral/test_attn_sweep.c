/* Fused attention against the fp64 path over a sweep of awkward cases: both layouts, partial
 * rotary, GQA/MQA, Dv != D, causal with offsets, sliding windows, fully masked rows, positions up to
 * 2^20 (offsets and per-token arrays), every frequency-scaling variant, f32/f16/bf16 inputs and
 * outputs, scores of magnitude near 100, Sk up to 4096. Half of it runs through an attention plan on
 * device buffers with NaN canaries around every view (tests/devmem.h: ropeqk_plan_run
 * on either backend), half through ropeqk_attention(). O within
 * 1e-5 of the fp64 path by the attention metric (plus the rounding of an f16/bf16 output), LSE within
 * 1e-5 relative, -inf LSE exactly where the reference has it.
 * Seed: ROPEQK_TEST_SEED or 20261123, named in every failure message. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(attn_sweep, .init = th_ctx_init, .fini = th_ctx_fini, .timeout = 600);

#define N_CASES 208
#define N_CHUNKS 4

static uint64_t seed0(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20261123ull;
}

typedef struct {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    ropeqk_params p;
    ropeqk_dtype in_dt, out_dt;
    bool per_token, plan, lse;
    double amp;   /* input amplitude: scores near 100 when large */
    double scaling_args[2];
} acase;

static void describe(const acase *c, uint64_t seed, int idx, char *buf, size_t len)
{
    snprintf(buf, len,
             "case %d seed %llu: B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld R%d %s in %d out %d causal %d "
             "window %lld offs %lld/%lld%s scaling %d amp %g %s%s",
             idx, (unsigned long long)seed, (long long)c->B, (long long)c->Hq, (long long)c->Hkv,
             (long long)c->Sq, (long long)c->Sk, (long long)c->D, (long long)c->Dv, c->p.rotary_dim,
             c->p.layout ? "half-split" : "interleaved", c->in_dt, c->out_dt, c->p.causal, (long long)c->p.window,
             (long long)c->p.q_pos_offset, (long long)c->p.k_pos_offset, c->per_token ? " per-token" : "",
             c->p.scaling.type, c->amp, c->plan ? "plan" : "host call", c->lse ? " +lse" : "");
}

static double lf[128], sf[128], ff[128]; /* factor lists (R/2 entries), filled by make_case */

static acase make_case(int idx, uint64_t seed)
{
    static const int64_t Ds[] = {16, 64, 80, 128};
    static const int64_t Dvs[] = {16, 48, 64, 96, 128, 256};
    static const int64_t Ss[] = {1, 5, 33, 100};
    uint64_t rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(idx + 1));
    acase c;
    memset(&c, 0, sizeof c);
    ropeqk_default_params(&c.p);
    c.D = Ds[idx % 4];
    c.Dv = idx % 3 == 0 ? c.D : Dvs[rqs_rand(&rng) % 6];
    c.p.layout = (idx / 4) % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    if (idx % 5 == 2)
        c.p.rotary_dim = (int32_t)(2 + 2 * (rqs_rand(&rng) % (uint64_t)(c.D / 2)));
    c.in_dt = idx % 7 == 1 ? ROPEQK_F16 : idx % 7 == 4 ? ROPEQK_BF16 : ROPEQK_F32;
    c.out_dt = idx % 9 == 2 ? ROPEQK_F16 : idx % 9 == 6 ? ROPEQK_BF16 : ROPEQK_F32;
    c.Sq = Ss[rqs_rand(&rng) % 4];
    c.Sk = Ss[rqs_rand(&rng) % 4];
    if (idx % 26 == 13) { /* long key ranges, few query rows */
        c.Sk = idx % 52 == 13 ? 4096 : 1500;
        c.Sq = 3;
    }
    c.Hkv = 1 + (int64_t)(rqs_rand(&rng) % 2);
    c.Hq = c.Hkv * (int64_t[]){1, 2, 4, 8}[rqs_rand(&rng) % 4];
    c.B = 1 + (int64_t)(rqs_rand(&rng) % 2);
    c.p.base = rqs_rand(&rng) % 2 ? 10000.0 : 500000.0;
    c.p.causal = rqs_rand(&rng) % 3 != 0;
    c.p.conjugate = idx % 17 == 5;
    /* positions: aligned (last query sees every key), early queries fully masked, near 2^20 */
    int64_t far = (int64_t)1 << 20;
    switch (rqs_rand(&rng) % 4) {
    case 0: c.p.k_pos_offset = 0; c.p.q_pos_offset = c.Sk - c.Sq; break;
    case 1: c.p.k_pos_offset = 50; c.p.q_pos_offset = 20; break; /* rows before position 50: all masked */
    case 2: c.p.k_pos_offset = far - c.Sk; c.p.q_pos_offset = far - c.Sq; break;
    default: c.p.k_pos_offset = (int64_t)(rqs_rand(&rng) % 1000); c.p.q_pos_offset = c.p.k_pos_offset + c.Sk / 2;
    }
    if (c.p.q_pos_offset < 0)
        c.p.q_pos_offset = 0;
    if (idx % 6 == 3)
        c.p.window = 1 + (int64_t)(rqs_rand(&rng) % 40);
    c.per_token = idx % 8 == 5;
    c.plan = idx % 2 == 1;
    c.lse = idx % 3 != 1;
    /* scores near 100: inputs scaled so that scale |q| |k| is about 100, and (run_case) each query
     * copied into the key at its own position, so the diagonal scores reach it. The f32 rounding of
     * the rotated rows alone is ~eps * scale |q| |k| per score: at 200 it is already 1.3e-5. */
    c.amp = idx % 10 == 9 ? sqrt(300.0 / sqrt((double)c.D)) : 1.0;
    if (c.amp > 1.0) {
        c.p.k_pos_offset = 0;
        c.p.q_pos_offset = c.Sk >= c.Sq ? c.Sk - c.Sq : 0;
        c.per_token = false;
        c.in_dt = ROPEQK_F32;
    }
    /* every scaling variant in turn */
    int R = c.p.rotary_dim ? c.p.rotary_dim : (int)c.D;
    ropeqk_scaling *s = &c.p.scaling;
    switch (idx % 7) {
    case 1: s->type = ROPEQK_SCALING_LINEAR; s->factor = 4; break;
    case 2: s->type = ROPEQK_SCALING_DYNAMIC; s->factor = 2; s->original_max_position = 64; s->seq_len = 5000; break;
    case 3: s->type = ROPEQK_SCALING_YARN; s->factor = 8; s->original_max_position = 4096; break;
    case 4: s->type = ROPEQK_SCALING_LLAMA3; s->factor = 8; s->original_max_position = 8192; break;
    case 5:
        s->type = ROPEQK_SCALING_LONGROPE;
        s->original_max_position = 4096;
        s->seq_len = 8192;
        for (int i = 0; i < R / 2; i++) {
            lf[i] = 1.0 + 0.1 * i;
            sf[i] = 1.0 + 0.01 * i;
        }
        s->long_factor = lf;
        s->short_factor = sf;
        s->n_long_factor = s->n_short_factor = R / 2;
        break;
    case 6:
        for (int i = 0; i < R / 2; i++)
            ff[i] = 1.0 + (i % 3);
        s->freq_factors = ff;
        s->n_freq_factors = R / 2;
        break;
    default: break;
    }
    return c;
}

/* host memory of a view, random in [-amp, amp] (storage-exact for f16/bf16) */
static void *alloc_fill(const ropeqk_tensor *t, uint64_t *rng, double amp)
{
    th_buf b;
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    cr_assert(th_alloc(&b, t->dtype, ne, TH_BHSD));
    th_fill_random(&b, rng);
    if (amp != 1.0 && t->dtype == ROPEQK_F32)
        for (size_t i = 0; i < b.bytes / 4; i++)
            ((float *)b.data)[i] *= (float)amp;
    return b.data;
}

static void run_case(int idx, uint64_t seed)
{
    acase c = make_case(idx, seed);
    char d[640];
    describe(&c, seed, idx, d, sizeof d);
    uint64_t rng = seed * 31 + (uint64_t)idx;
    ropeqk_tensor q = ropeqk_tensor_bhsd(c.in_dt, c.B, c.Hq, c.Sq, c.D);
    ropeqk_tensor k = ropeqk_tensor_bhsd(c.in_dt, c.B, c.Hkv, c.Sk, c.D);
    ropeqk_tensor v = ropeqk_tensor_bhsd(c.in_dt, c.B, c.Hkv, c.Sk, c.Dv);
    ropeqk_tensor o = ropeqk_tensor_bhsd(c.out_dt, c.B, c.Hq, c.Sq, c.Dv);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c.B, c.Hq, c.Sq, c.Dv);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, c.B, c.Hq, c.Sq, 1);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c.B, c.Hq, c.Sq, 1);
    double amp = c.amp;
    void *qd = alloc_fill(&q, &rng, amp), *kd = alloc_fill(&k, &rng, amp), *vd = alloc_fill(&v, &rng, 1.0);
    if (amp > 1.0 && c.Sk >= c.Sq) /* key i + Sk - Sq sits at query i's position: make it query i */
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t hk = 0; hk < c.Hkv; hk++)
                for (int64_t i = 0; i < c.Sq; i++)
                    memcpy((char *)kd + (size_t)(((b * c.Hkv + hk) * c.Sk + i + c.Sk - c.Sq) * c.D) * 4,
                           (char *)qd + (size_t)(((b * c.Hq + hk * (c.Hq / c.Hkv)) * c.Sq + i) * c.D) * 4,
                           (size_t)c.D * 4);
    size_t ob = ropeqk_tensor_extent(&o), lb = ropeqk_tensor_extent(&l);
    void *od = malloc(ob);
    float *ld = malloc(lb);
    double *o64d = malloc(ropeqk_tensor_extent(&o64)), *l64d = malloc(ropeqk_tensor_extent(&l64));
    int32_t *qp = NULL, *kp = NULL;
    if (c.per_token) { /* random distinct-ish positions up to 2^20 */
        qp = malloc((size_t)c.Sq * 4);
        kp = malloc((size_t)c.Sk * 4);
        for (int64_t j = 0; j < c.Sk; j++)
            kp[j] = (int32_t)(rqs_rand(&rng) % (1u << 20));
        for (int64_t i = 0; i < c.Sq; i++)
            qp[i] = (int32_t)(rqs_rand(&rng) % (1u << 20));
    }
    ropeqk_status st = ropeqk_attention_ref(&c.p, &q, qd, &k, kd, &v, vd, qp, kp, &o64, o64d, &l64, l64d);
    cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_status_string(st), d);
    if (!c.plan) {
        st = ropeqk_attention(th_ctx, &c.p, &q, qd, &k, kd, &v, vd, qp, kp, &o, od, c.lse ? &l : NULL, c.lse ? ld : NULL);
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
    } else { /* device buffers with NaN canaries before and after every view */
        const void *host[7] = {qd, kd, vd, NULL, qp, kp, NULL};
        const size_t bytes[7] = {ropeqk_tensor_extent(&q), ropeqk_tensor_extent(&k), ropeqk_tensor_extent(&v), ob,
                                 (size_t)c.Sq * 4, (size_t)c.Sk * 4, lb};
        const bool used[7] = {true, true, true, true, c.per_token, c.per_token, c.lse};
        dm_buf *m[7] = {NULL};
        for (int i = 0; i < 7; i++)
            if (used[i])
                cr_assert_eq(dm_create(th_ctx, bytes[i], host[i], true, &m[i]), ROPEQK_SUCCESS, "%s: %s",
                             ropeqk_last_error(), d);
        ropeqk_plan_desc pd = {.op = ROPEQK_OP_ATTENTION, .params = c.p, .q = q, .k = k, .v = v, .out = o,
                               .lse = l, .with_lse = c.lse,
                               .positions = c.per_token ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
        ropeqk_plan *pl = NULL;
        st = ropeqk_plan_create(th_ctx, &pd, &pl);
        cr_assert_eq(st, ROPEQK_SUCCESS, "plan: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
        ropeqk_args a = {.q = dm_whole(m[0]), .k = dm_whole(m[1]), .v = dm_whole(m[2]), .out = dm_whole(m[3]),
                      .q_pos = dm_whole(m[4]), .k_pos = dm_whole(m[5]), .lse = dm_whole(m[6])};
        st = rqs_plan_run_wait(pl, &a, NULL);
        cr_assert_eq(st, ROPEQK_SUCCESS, "run: %s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
        cr_assert_eq(dm_read(m[3], od), ROPEQK_SUCCESS);
        if (c.lse)
            cr_assert_eq(dm_read(m[6], ld), ROPEQK_SUCCESS);
        static const char *const name[7] = {"Q", "K", "V", "output", "q positions", "k positions", "LSE"};
        for (int i = 0; i < 7; i++) {
            bool intact = false;
            if (m[i])
                cr_assert(dm_check(m[i], host[i], &intact) == ROPEQK_SUCCESS && intact,
                          "%s: a canary%s changed: %s", name[i], host[i] ? " or the input" : "", d);
            dm_free(m[i]);
        }
        ropeqk_plan_destroy(pl);
    }
    double err = 0, lerr = 0;
    int64_t mism = 0;
    st = ropeqk_attention_max_error(&v, vd, &o, od, &o64, o64d, c.lse ? &l : NULL, c.lse ? ld : NULL,
                                    c.lse ? &l64 : NULL, c.lse ? l64d : NULL, &err, &lerr, &mism);
    cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s", d);
    /* an f16/bf16 output adds its own rounding: half an ulp of values up to max |V| */
    double bound = 1e-5 + (c.out_dt == ROPEQK_F16 ? 0x1p-11 : c.out_dt == ROPEQK_BF16 ? 0x1p-8 : 0.0);
    cr_expect(err <= bound, "O error %.3g > %.3g: %s", err, bound, d);
    cr_expect(lerr <= 1e-5, "LSE error %.3g: %s", lerr, d);
    cr_expect_eq(mism, 0, "%lld NaN or -inf mismatches: %s", (long long)mism, d);
    free(qd);
    free(kd);
    free(vd);
    free(od);
    free(ld);
    free(o64d);
    free(l64d);
    free(qp);
    free(kp);
}

static void run_chunk(int chunk)
{
    uint64_t seed = seed0();
    cr_log_info("attention sweep chunk %d, seed %llu", chunk, (unsigned long long)seed);
    for (int i = chunk; i < N_CASES; i += N_CHUNKS * th_stride()) /* every case, or every N-th (harness.h) */
        run_case(i, seed);
}

Test(attn_sweep, chunk0) { run_chunk(0); }
Test(attn_sweep, chunk1) { run_chunk(1); }
Test(attn_sweep, chunk2) { run_chunk(2); }
Test(attn_sweep, chunk3) { run_chunk(3); }

/* A third of the cases again with the query rows in many passes (src/opencl/cl_attn.c: at most
 * ROPEQK_ATTN_PASS_BYTES of rotated Q per pass, here 4 KiB: 1 to 64 rows), so each pass's Q
 * rotation reuses the scratch of the previous pass's kernel, and positions, masks, O and LSE rows
 * are offset per pass. */
Test(attn_sweep, query_passes)
{
    ropeqk_ctx *whole = th_ctx;
    setenv("ROPEQK_ATTN_PASS_BYTES", "4096", 1);
    ropeqk_status st = ropeqk_ctx_create(NULL, &th_ctx);
    unsetenv("ROPEQK_ATTN_PASS_BYTES");
    cr_assert_eq(st, ROPEQK_SUCCESS);
    uint64_t seed = seed0();
    for (int i = 0; i < N_CASES; i += 3 * th_stride())
        run_case(i, seed);
    ropeqk_ctx_destroy(th_ctx);
    th_ctx = whole;
}

/* The sweep really holds what its header promises. */
Test(attn_sweep, coverage)
{
    int fully_masked = 0, dv_ne_d = 0, big = 0, window = 0, scal[7] = {0}, dts[3] = {0}, outs[3] = {0}, far = 0;
    for (int i = 0; i < N_CASES; i++) {
        acase c = make_case(i, seed0());
        fully_masked += c.p.causal && c.p.q_pos_offset < c.p.k_pos_offset && !c.per_token;
        dv_ne_d += c.Dv != c.D;
        big += c.Sk >= 4096;
        window += c.p.window > 0;
        scal[i % 7]++;
        dts[c.in_dt]++;
        outs[c.out_dt]++;
        far += c.p.k_pos_offset >= (1 << 19) || c.per_token;
    }
    cr_expect(N_CASES >= 200);
    cr_expect(fully_masked > 5 && dv_ne_d > 20 && big >= 2 && window > 10 && far > 20, "%d %d %d %d %d",
              fully_masked, dv_ne_d, big, window, far);
    for (int i = 0; i < 7; i++)
        cr_expect(scal[i] > 10);
    for (int i = 0; i < 3; i++)
        cr_expect(dts[i] > 10 && outs[i] > 10, "dtype %d: %d in, %d out", i, dts[i], outs[i]);
}
