/* The OpenCL backend's two crossovers as tuning knobs (src/core/tuning.c, src/opencl/cl_tune.c,
 * src/opencl/cl_tune_paged.c): a context with chunk_rows = N sends a sequence of N query rows of a
 * ragged paged call through the chunk path (K/V gathered, attention kernel) and one of N - 1 rows
 * through the decode kernels, and one with dense_rows = N runs dense attention of N rows through the
 * paged decode kernels and of N + 1 rows through the old path (-1: never), each call against fp64;
 * which path ran is read from the library's internal counters (this test links the library
 * statically, as test_dense_decode does). Then the tuner's two crossover families: their candidate
 * lists, and every candidate's own check against fp64 and its timed shape (src/opencl/cl_tune_paged.c),
 * which the tuner test's short budget does not reach. Seed: ROPEQK_TEST_SEED or 20261201 (paged cases:
 * pf_seed), named in every failure message. OpenCL only. */
#include "ocl.h"
#include "paged_fixture.h"
#include "../../src/core/path_runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tune_paths, .init = th_ctx_init, .fini = th_ctx_fini, .timeout = 900);

/* src/opencl/cl_paged_chunk.c, src/opencl/cl_dense.c: sequences and calls through each path so far */

/* Replaces the suite's context (run_case's) by one with these crossovers (0: default). */
static void use_ctx(int32_t chunk_rows, int32_t dense_rows)
{
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    t.chunk_rows = chunk_rows;
    t.dense_rows = dense_rows;
    ropeqk_ctx_destroy(th_ctx);
    th_ctx = th_ctx_tuned(&t);
}

Test(tune_paths, chunk_rows_route_sequences)
{
    TH_SKIP_ON_VULKAN(th_ctx, "the chunk path is the OpenCL backend's");
    static const int32_t ns[] = {3, 9, 16, 40};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const int32_t N = ns[i];
        use_ctx(N, 0);
        ropeqk_tuning got;
        cr_assert_eq(ropeqk_ctx_tuning(th_ctx, &got, NULL), ROPEQK_SUCCESS);
        cr_assert_eq(got.chunk_rows, N);
        char name[128];
        snprintf(name, sizeof name, "chunk_rows %d: sequences of %d, %d and 1 rows", N, N, N - 1);
        pcase c = base_case(name);
        c.ragged = true;
        c.n_seqs = 3;
        int64_t lens[] = {N + 200, N + 150, 700}, ql[] = {N, N - 1, 1};
        memcpy(c.lens, lens, sizeof lens);
        memcpy(c.qlens, ql, sizeof ql);
        c.kdt = c.vdt = ROPEQK_F16;
        c.p.causal = 1;
        long long before = rq_path_runs(RQ_PATH_PAGED_CHUNK);
        run_case(&c, pf_seed() + (uint64_t)N);
        cr_expect_eq(rq_path_runs(RQ_PATH_PAGED_CHUNK) - before, 1, "%s: %lld sequences took the chunk path, want 1 (seed %llu)",
                     name, rq_path_runs(RQ_PATH_PAGED_CHUNK) - before, (unsigned long long)(pf_seed() + (uint64_t)N));
    }
    /* the environment's value wins over the API's */
    setenv("ROPEQK_CHUNK_ROWS", "7", 1);
    use_ctx(30, 0);
    unsetenv("ROPEQK_CHUNK_ROWS");
    pcase c = base_case("ROPEQK_CHUNK_ROWS=7: sequences of 7 and 6 rows");
    c.ragged = true;
    c.n_seqs = 2;
    int64_t lens[] = {400, 90}, ql[] = {7, 6};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.p.causal = 1;
    long long before = rq_path_runs(RQ_PATH_PAGED_CHUNK);
    run_case(&c, pf_seed() + 1);
    cr_expect_eq(rq_path_runs(RQ_PATH_PAGED_CHUNK) - before, 1, "%s: %lld", c.name, rq_path_runs(RQ_PATH_PAGED_CHUNK) - before);
    cr_expect(strstr(ropeqk_ctx_config_source(th_ctx), "ROPEQK_CHUNK_ROWS"), "%s", ropeqk_ctx_config_source(th_ctx));
}

/* 8-bit caches take the chunk path too (the companion's K/V f32, paged_gather_q8): one sequence of 20
 * rows per call (the default chunk_rows, 16), each dtype and a mix, against fp64 from the stored
 * values; a 15-row sequence beside it stays on the decode kernels. */
Test(tune_paths, chunk_path_8bit_caches)
{
    TH_SKIP_ON_VULKAN(th_ctx, "the counter is the OpenCL backend's");
    static const struct {
        ropeqk_dtype k, v;
        const char *name;
    } cs[] = {{ROPEQK_I8, ROPEQK_I8, "int8 K/V"},
              {ROPEQK_FP8_E4M3, ROPEQK_FP8_E4M3, "fp8 e4m3 K/V"},
              {ROPEQK_FP8_E5M2, ROPEQK_FP8_E5M2, "fp8 e5m2 K/V"},
              {ROPEQK_FP8_E4M3, ROPEQK_F16, "fp8 e4m3 K, f16 V"},
              {ROPEQK_BF16, ROPEQK_I8, "bf16 K, int8 V"}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s: sequences of 20, 15 and 1 rows", cs[i].name);
        pcase c = base_case(name);
        c.ragged = true;
        c.n_seqs = 3;
        int64_t lens[] = {300, 200, 500}, ql[] = {20, 15, 1};
        memcpy(c.lens, lens, sizeof lens);
        memcpy(c.qlens, ql, sizeof ql);
        c.kdt = cs[i].k, c.vdt = cs[i].v;
        c.p.causal = 1;
        uint64_t seed = pf_seed() + 60 + (uint64_t)i;
        long long before = rq_path_runs(RQ_PATH_PAGED_CHUNK);
        run_case(&c, seed);
        cr_expect_eq(rq_path_runs(RQ_PATH_PAGED_CHUNK) - before, 1, "%s: %lld sequences took the chunk path, want 1 (seed %llu)",
                     name, rq_path_runs(RQ_PATH_PAGED_CHUNK) - before, (unsigned long long)seed);
    }
}

/* Dense attention of Sq rows (Hq 8 / Hkv 2, D 64, 500 keys, causal) on th_ctx against fp64; returns
 * how many calls took the dense decode path. */
static long long dense_call(int64_t Sq, uint64_t seed)
{
    const int64_t Hq = 8, Hkv = 2, Sk = 500, D = 64;
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.q_pos_offset = Sk - Sq;
    uint64_t rng = seed;
    th_buf q, k, v, o;
    cr_assert(th_alloc(&q, ROPEQK_F32, (int64_t[]){1, Hq, Sq, D}, TH_BHSD));
    cr_assert(th_alloc(&k, ROPEQK_F16, (int64_t[]){1, Hkv, Sk, D}, TH_BHSD));
    cr_assert(th_alloc(&v, ROPEQK_F16, (int64_t[]){1, Hkv, Sk, D}, TH_BHSD));
    cr_assert(th_alloc(&o, ROPEQK_F32, (int64_t[]){1, Hq, Sq, D}, TH_BHSD));
    th_fill_random(&q, &rng), th_fill_random(&k, &rng), th_fill_random(&v, &rng);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, Hq, Sq, D);
    double *r = malloc(ropeqk_tensor_extent(&o64)), err = INFINITY, lerr = 0;
    int64_t mism = 1;
    cr_assert(r);
    long long before = rq_path_runs(RQ_PATH_DENSE_DECODE);
    ropeqk_status st = ropeqk_attention(th_ctx, &p, &q.t, q.data, &k.t, k.data, &v.t, v.data, NULL, NULL, &o.t,
                                        o.data, NULL, NULL);
    cr_assert_eq(st, ROPEQK_SUCCESS, "Sq %lld: %s", (long long)Sq, ropeqk_last_error());
    long long runs = rq_path_runs(RQ_PATH_DENSE_DECODE) - before;
    cr_assert_eq(ropeqk_attention_ref(&p, &q.t, q.data, &k.t, k.data, &v.t, v.data, NULL, NULL, &o64, r, NULL, NULL),
                 ROPEQK_SUCCESS);
    cr_assert_eq(ropeqk_attention_max_error(&v.t, v.data, &o.t, o.data, &o64, r, NULL, NULL, NULL, NULL, &err, &lerr,
                                            &mism),
                 ROPEQK_SUCCESS);
    cr_expect(err <= 1e-5 && mism == 0, "Sq %lld (%s path, seed %llu): error %.3g, %lld mismatches", (long long)Sq,
              runs ? "dense decode" : "old", (unsigned long long)seed, err, (long long)mism);
    th_free(&q), th_free(&k), th_free(&v), th_free(&o);
    free(r);
    return runs;
}

Test(tune_paths, dense_rows_route_calls)
{
    TH_SKIP_ON_VULKAN(th_ctx, "the dense decode path is the OpenCL backend's");
    uint64_t seed = th_seed(20261201ull);
    static const int32_t ns[] = {1, 5, 12};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        use_ctx(0, ns[i]);
        cr_expect_eq(dense_call(ns[i], seed + (uint64_t)i), 1, "dense_rows %d: %d rows took the old path", ns[i], ns[i]);
        cr_expect_eq(dense_call(ns[i] + 1, seed + (uint64_t)i), 0, "dense_rows %d: %d rows took the dense decode", ns[i],
                     ns[i] + 1);
    }
    use_ctx(0, -1); /* off: the old path at any row count */
    ropeqk_tuning got;
    cr_assert_eq(ropeqk_ctx_tuning(th_ctx, &got, NULL), ROPEQK_SUCCESS);
    cr_expect_eq(got.dense_rows, -1);
    cr_expect_eq(dense_call(1, seed), 0, "dense_rows -1: one row took the dense decode");
}

/* The candidates of family f from base t (none repeats the value in effect), into v; how many. */
static int candidates(rq_family f, const rq_tuning *t, int *v)
{
    int n = 0;
    rq_tuning c = *t;
    for (int k = 1; rq_cl_tune_candidate(f, t->profile == ROPEQK_PROFILE_CPU, k, &c) && n < 8; k++, c = *t)
        v[n++] = f == RQ_FAM_CHUNK ? c.chunk_rows : c.dense_rows;
    return n;
}

Test(tune_paths, crossover_families_check_and_time_every_candidate)
{
    TH_SKIP_ON_VULKAN(th_ctx, "the crossover families are the OpenCL backend's");
    rq_tuning base = th_ctx->tune;
    int v[8];
    static const int want_chunk[] = {4, 8, 32, 64}, want_dense[] = {0, 4, 8, 32};
    cr_assert_eq(base.chunk_rows, 16, "the default");
    cr_assert_eq(candidates(RQ_FAM_CHUNK, &base, v), 4);
    cr_expect(!memcmp(v, want_chunk, sizeof want_chunk), "chunk candidates %d %d %d %d", v[0], v[1], v[2], v[3]);
    cr_assert_eq(base.dense_rows, 16, "the default");
    cr_assert_eq(candidates(RQ_FAM_DENSE, &base, v), 4);
    cr_expect(!memcmp(v, want_dense, sizeof want_dense), "dense candidates %d %d %d %d", v[0], v[1], v[2], v[3]);
    rq_tuning other = base;
    other.chunk_rows = 4; /* from another value in effect: the default is a candidate again */
    cr_assert_eq(candidates(RQ_FAM_CHUNK, &other, v), 4);
    cr_expect(v[0] == 8 && v[1] == 16, "%d %d", v[0], v[1]);
    for (int f = RQ_FAM_CHUNK; f <= RQ_FAM_DENSE; f++) {
        int n = candidates((rq_family)f, &base, v);
        for (int i = -1; i < n; i++) { /* -1: the value in effect */
            rq_tuning t = base;
            if (i >= 0)
                *(f == RQ_FAM_CHUNK ? &t.chunk_rows : &t.dense_rows) = v[i];
            ropeqk_ctx *c = NULL;
            ropeqk_status st = rq_opencl_backend.tune_clone(th_ctx, &t, &c);
            cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
            /* timed: every candidate on the CPU profile (~8 s in all on pocl), the one in effect on the
             * GPU profile (whose kernels pocl emulates: ~2 min for all) */
            double ms = -1;
            st = rq_cl_tune_check(c, (rq_family)f);
            if (!st && (i < 0 || t.profile == ROPEQK_PROFILE_CPU))
                st = rq_cl_tune_time(c, (rq_family)f, &ms);
            else if (!st)
                ms = 1;
            cr_expect(st == ROPEQK_SUCCESS && ms > 0, "%s family, %s %d: %s (%s), %.3f ms",
                      f == RQ_FAM_CHUNK ? "chunk" : "dense", f == RQ_FAM_CHUNK ? "chunk_rows" : "dense_rows",
                      f == RQ_FAM_CHUNK ? t.chunk_rows : t.dense_rows, ropeqk_status_string(st), ropeqk_last_error(), ms);
            cr_log_info("%s %d: %.3f ms", f == RQ_FAM_CHUNK ? "chunk_rows" : "dense_rows",
                        f == RQ_FAM_CHUNK ? t.chunk_rows : t.dense_rows, ms);
            ropeqk_ctx_destroy(c);
        }
    }
}
