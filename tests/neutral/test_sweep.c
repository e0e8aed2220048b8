/* Device vs scalar path over a sweep of awkward cases (issue 2): both layouts, D in
 * {2,8,64,80,96,128,256}, partial rotary, Sq/Sk in {1,7,33,127,512}, GQA ratios, causal with
 * offsets, positions up to 2^20, BSHD and padded views, f16/bf16 storage. Every case must be within
 * 1e-5 of the fp64 reference (conventions metric), with identical -inf masks and untouched guards.
 * Seed: ROPEQK_TEST_SEED or the fixed default below (20261122); every failure message names it and
 * the case's parameters, and --verbose logs it per chunk. */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

TestSuite(sweep, .fini = th_leak_check);

#define N_CASES 256
#define N_CHUNKS 8
#define BOUND 1e-5

static uint64_t sweep_seed(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20261122ull;
}

static int64_t pick(uint64_t *rng, const int64_t *v, int n) { return v[rqs_rand(rng) % (uint64_t)n]; }

/* Case idx of the sweep: the systematic parts cycle with idx, the rest is drawn from the seed. */
static th_case make_case(int idx, uint64_t seed)
{
    static const int64_t Ds[] = {2, 8, 64, 80, 96, 128, 256};
    static const int64_t Ss[] = {1, 7, 33, 127, 512};
    static const int64_t Gs[] = {1, 2, 4, 8};
    static const double bases[] = {10000.0, 500000.0, 1e6};
    uint64_t rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(idx + 1));
    th_case c;
    ropeqk_default_params(&c.p);
    c.D = Ds[idx % 7];
    c.p.layout = (idx / 7) % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    c.dtype = idx % 5 == 1 ? ROPEQK_F16 : idx % 11 == 3 ? ROPEQK_BF16 : ROPEQK_F32;
    if (idx % 3 == 2 && c.D > 2)
        c.p.rotary_dim = (int32_t)(2 + 2 * (rqs_rand(&rng) % (uint64_t)(c.D / 2)));
    c.Sq = pick(&rng, Ss, 5);
    c.Sk = pick(&rng, Ss, 5);
    /* keep the fp64 reference quick: shrink the larger side of very big cases */
    while (c.Sq * c.Sk * c.D > (1 << 23) && c.Sq > 1)
        c.Sq = c.Sq > 33 ? 33 : 7;
    int64_t G = pick(&rng, Gs, 4);
    c.Hkv = 1 + (int64_t)(rqs_rand(&rng) % 2);
    c.Hq = G * c.Hkv;
    c.B = c.Sq * c.Sk * c.D * c.Hq > (1 << 22) ? 1 : 1 + (int64_t)(rqs_rand(&rng) % 2);
    c.p.base = bases[rqs_rand(&rng) % 3];
    c.p.causal = rqs_rand(&rng) % 2;
    c.p.conjugate = idx % 10 == 7;
    if (idx % 4 == 0)
        c.p.scale = 0.5 + rqs_uniform(&rng) * 0.25;
    /* positions: small, decode-aligned, or near 2^20; sometimes per-token arrays */
    int64_t far = (int64_t)1 << 20;
    switch (rqs_rand(&rng) % 4) {
    case 0: c.p.k_pos_offset = 0; break;
    case 1: c.p.k_pos_offset = (int64_t)(rqs_rand(&rng) % 4096); break;
    default: c.p.k_pos_offset = far - c.Sk; break;
    }
    c.p.q_pos_offset = c.p.k_pos_offset + c.Sk - c.Sq + (int64_t)(rqs_rand(&rng) % 3) - 1;
    if (c.p.q_pos_offset < 0)
        c.p.q_pos_offset = 0;
    c.per_token_pos = idx % 6 == 5;
    c.pos_max = far;
    c.in_layout = (th_layout)(idx % 3);
    c.enqueue = idx % 2 == 0; /* half through device buffers with canaries */
    c.out_layout = rqs_rand(&rng) % 3 == 0 ? TH_PADDED : TH_BHSD;
    return c;
}

static void run_chunk(int chunk)
{
    uint64_t seed = sweep_seed();
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    cr_log_info("sweep seed %llu, cases %d..%d", (unsigned long long)seed, chunk * N_CASES / N_CHUNKS,
                (chunk + 1) * N_CASES / N_CHUNKS - 1);
    double worst = 0.0;
    for (int i = chunk * N_CASES / N_CHUNKS; i < (chunk + 1) * N_CASES / N_CHUNKS; i += th_stride()) {
        th_case c = make_case(i, seed);
        th_result r = th_run(ctx, &c, seed + (uint64_t)i);
        char d[512];
        th_describe(&c, d, sizeof d);
        cr_expect_eq(r.status, ROPEQK_SUCCESS, "case %d: %s: %s", i, ropeqk_status_string(r.status), d);
        if (r.status)
            continue;
        cr_expect(r.max_err <= BOUND, "case %d (seed %llu): max error %.3g > %g: %s", i, (unsigned long long)seed,
                  r.max_err, BOUND, d);
        cr_expect_eq(r.mismatch, 0, "case %d: %lld mask/NaN mismatches: %s", i, (long long)r.mismatch, d);
        cr_expect(r.guards_ok, "case %d: output padding or inputs changed: %s", i, d);
        if (r.max_err > worst)
            worst = r.max_err;
    }
    cr_log_info("chunk %d: max error %.3g", chunk, worst);
    ropeqk_ctx_destroy(ctx);
}

Test(sweep, chunk0) { run_chunk(0); }
Test(sweep, chunk1) { run_chunk(1); }
Test(sweep, chunk2) { run_chunk(2); }
Test(sweep, chunk3) { run_chunk(3); }
Test(sweep, chunk4) { run_chunk(4); }
Test(sweep, chunk5) { run_chunk(5); }
Test(sweep, chunk6) { run_chunk(6); }
Test(sweep, chunk7) { run_chunk(7); }

/* The sweep really covers what it claims (a sweep that silently shrank would pass vacuously). */
Test(sweep, coverage)
{
    uint64_t seed = sweep_seed();
    int D[257] = {0}, S[513] = {0}, half = 0, inter = 0, partial = 0, f16 = 0, bf16 = 0, causal = 0,
        far = 0, gqa = 0, bshd = 0, padded = 0, pertok = 0, enq = 0;
    for (int i = 0; i < N_CASES; i++) {
        th_case c = make_case(i, seed);
        D[c.D]++;
        S[c.Sq]++;
        S[c.Sk]++;
        half += c.p.layout == ROPEQK_HALF_SPLIT;
        inter += c.p.layout == ROPEQK_INTERLEAVED;
        partial += c.p.rotary_dim != 0 && c.p.rotary_dim < c.D;
        f16 += c.dtype == ROPEQK_F16;
        bf16 += c.dtype == ROPEQK_BF16;
        causal += c.p.causal;
        far += c.p.k_pos_offset + c.Sk >= (1 << 20) || c.per_token_pos;
        gqa += c.Hq > c.Hkv;
        bshd += c.in_layout == TH_BSHD;
        padded += c.in_layout == TH_PADDED || c.out_layout == TH_PADDED;
        pertok += c.per_token_pos;
        enq += c.enqueue;
    }
    const int ds[] = {2, 8, 64, 80, 96, 128, 256}, ss[] = {1, 7, 33, 127, 512};
    for (int i = 0; i < 7; i++)
        cr_expect(D[ds[i]] >= 10, "D=%d only %d cases", ds[i], D[ds[i]]);
    for (int i = 0; i < 5; i++)
        cr_expect(S[ss[i]] >= 10, "S=%d only %d uses", ss[i], S[ss[i]]);
    cr_expect(half >= 50 && inter >= 50 && partial >= 30 && f16 >= 30 && bf16 >= 10 && causal >= 50);
    cr_expect(far >= 50 && gqa >= 50 && bshd >= 50 && padded >= 50 && pertok >= 20 && enq >= 100);
}
