/* Ragged query rows over the paged cache (ropeqk_paged_batch.q_indptr), on either backend: batches
 * that mix decode rows, speculative steps and prefill chunks, each sequence's rows checked against
 * the fp64 reference of dense attention over that sequence's keys (paged_fixture.c: its rows as one
 * [1, Hq, q_len, D] query at positions q_pos .. q_pos + q_len - 1, causal by position); the refusals
 * of malformed offsets, with nothing written. Metric and seed: test_paged.c's (ROPEQK_TEST_SEED,
 * default 20261201, named in every failure message). */
#include "paged_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged_ragged, .init = th_ctx_init, .fini = th_ctx_fini);

/* decode rows, a speculative step of 4, chunks of 37 and 130 (the second over a one-page sequence
 * that the chunk fills), GQA, f16 caches, causal */
Test(paged_ragged, mixed_step_f16_causal_gqa)
{
    pcase c = base_case("ragged f16 causal GQA: 1, 4, 37, 1, 130 rows");
    c.ragged = true;
    int64_t lens[] = {900, 301, 37, 1, 130}, ql[] = {1, 4, 37, 1, 130};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.kdt = c.vdt = ROPEQK_F16;
    c.p.causal = 1;
    run_case(&c, pf_seed() + 100);
}

/* a chunk first, then decode rows and a speculative step, another chunk, a last decode row: the
 * decode kernels run once per run of sequences between the chunks (OpenCL: over those rows alone,
 * their Q, O and LSE rows moved to the run's first), f16 output and LSE, causal + sliding window */
Test(paged_ragged, chunks_between_decode_runs)
{
    pcase c = base_case("ragged runs: 40, 1, 3, 20, 1 rows");
    c.ragged = true;
    int64_t lens[] = {600, 700, 300, 200, 50}, ql[] = {40, 1, 3, 20, 1};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.kdt = c.vdt = ROPEQK_F16;
    c.odt = ROPEQK_F16;
    c.tol = 1e-3; /* the f16 output's rounding (test_paged.c's bound) */
    c.p.causal = 1;
    c.p.window = 256;
    run_case(&c, pf_seed() + 108);
}

/* speculative steps of 2, 5 and 3 rows, half-split, partial rotary, YaRN, BSHD caches, Dv != D,
 * sliding window + causal, pages of 64 */
Test(paged_ragged, speculative_window_partial_rotary_bshd)
{
    pcase c = base_case("ragged speculative window R=48 YaRN bshd ps64");
    c.ragged = true;
    c.Hq = 6, c.Hkv = 3, c.D = 64, c.Dv = 40, c.ps = 64, c.maxp = 40, c.n_seqs = 3, c.bshd_cache = true;
    int64_t lens[] = {2000, 66, 700}, ql[] = {2, 5, 3};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.p.layout = ROPEQK_HALF_SPLIT;
    c.p.rotary_dim = 48;
    c.p.causal = 1;
    c.p.window = 64;
    c.p.scaling.type = ROPEQK_SCALING_YARN;
    c.p.scaling.factor = 4;
    c.p.scaling.original_max_position = 1024;
    run_case(&c, pf_seed() + 101);
}

/* no mask: every row sees all of its sequence's keys, its chunk's later tokens too; bf16 K, f32 V,
 * f16 Q and output */
Test(paged_ragged, chunk_unmasked_mixed_dtypes)
{
    pcase c = base_case("ragged unmasked bf16 K f16 Q/out");
    c.ragged = true;
    c.n_seqs = 2;
    int64_t lens[] = {600, 70}, ql[] = {64, 70};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.qdt = ROPEQK_F16, c.kdt = ROPEQK_BF16, c.odt = ROPEQK_F16;
    c.tol = 1e-3; /* the f16 output's rounding (test_paged.c's bound) */
    run_case(&c, pf_seed() + 102);
}

/* Prefill chunks over 8-bit caches: the gather writes each code's value, (float)q * its row's
 * scale, as f32 for the companion attention plan, so the fp64 reference from the stored values
 * (cache_elem) holds at 1e-5 as for a 16/32-bit cache. int8 K and V, causal, GQA: decode rows, a
 * speculative step and chunks of 37 and 130 rows (the last filling its one-page sequence). The
 * counter test of the chunk path taken is tests/opencl/test_tune_paths.c's chunk_path_8bit_caches (OpenCL). */
Test(paged_ragged, chunk_int8_causal_gqa)
{
    pcase c = base_case("ragged int8 causal GQA: 1, 4, 37, 130 rows");
    c.ragged = true;
    c.n_seqs = 4;
    int64_t lens[] = {900, 301, 37, 130}, ql[] = {1, 4, 37, 130};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.kdt = c.vdt = ROPEQK_I8;
    c.p.causal = 1;
    run_case(&c, pf_seed() + 110);
}

/* fp8 e4m3 and e5m2 caches in BSHD memory, Dv 44 (not a multiple of the OpenCL gather's eight codes:
 * its tail), sliding window + causal, f16 Q and output, chunks of 64 and 200 rows */
Test(paged_ragged, chunk_fp8_window_bshd)
{
    static const ropeqk_dtype dts[] = {ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2};
    static const char *const names[] = {"ragged fp8 e4m3 window bshd Dv 44: 2, 64, 200 rows",
                                        "ragged fp8 e5m2 window bshd Dv 44: 2, 64, 200 rows"};
    for (int i = 0; i < 2; i++) {
        pcase c = base_case(names[i]);
        c.ragged = true;
        c.Hq = 6, c.Hkv = 3, c.Dv = 44, c.n_seqs = 3, c.bshd_cache = true;
        int64_t lens[] = {700, 64, 450}, ql[] = {2, 64, 200};
        memcpy(c.lens, lens, sizeof lens);
        memcpy(c.qlens, ql, sizeof ql);
        c.kdt = c.vdt = dts[i];
        c.qdt = c.odt = ROPEQK_F16;
        c.tol = 1e-3; /* the f16 output's rounding */
        c.p.causal = 1;
        c.p.window = 100;
        run_case(&c, pf_seed() + 111 + (uint64_t)i);
    }
}

/* one cache 8-bit, the other not: K fp8 e4m3 with V f16, unmasked (every row sees its chunk's later
 * tokens); K f16 with V int8, causal */
Test(paged_ragged, chunk_mixed_8bit_and_16bit)
{
    pcase c = base_case("ragged K e4m3 / V f16 unmasked: 48, 3 rows");
    c.ragged = true;
    c.n_seqs = 2;
    int64_t lens[] = {500, 90}, ql[] = {48, 3};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.kdt = ROPEQK_FP8_E4M3, c.vdt = ROPEQK_F16;
    run_case(&c, pf_seed() + 113);
    c.name = "ragged K f16 / V int8 causal: 48, 3 rows";
    c.kdt = ROPEQK_F16, c.vdt = ROPEQK_I8;
    c.p.causal = 1;
    run_case(&c, pf_seed() + 114);
}

/* rows ahead of the cache and rows behind its first key (causal: the latter see no key, O = 0 and
 * LSE = -inf exactly), positions near INT32_MAX, one row per sequence through q_indptr */
Test(paged_ragged, rows_before_keys_and_int32_edges)
{
    pcase c = base_case("ragged rows ahead of the keys");
    c.ragged = true;
    c.p.causal = 1;
    int64_t lens[] = {40, 300, 17, 5, 100}, ql[] = {3, 8, 17, 5, 2};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.q_ahead = 7;
    run_case(&c, pf_seed() + 103);
    c.name = "ragged rows before the first key (fully masked)";
    c.q_ahead = -20; /* sequence 2's rows sit at k_pos0 - 20 .. k_pos0 - 4: no key */
    run_case(&c, pf_seed() + 104);
    c.name = "ragged one row each at INT32_MAX";
    memset(c.qlens, 0, sizeof c.qlens);
    c.q_ahead = 0;
    c.kpos_lo = INT32_MAX - 400, c.kpos_span = 0;
    run_case(&c, pf_seed() + 105);
}

/* ---- refusals ---------------------------------------------------------------------------------- */
Test(paged_ragged, invalid_offsets_write_nothing)
{
    static pdata d;
    pcase c = base_case("ragged refusals");
    c.ragged = true;
    c.n_seqs = 3, c.max_seqs = 3, c.maxp = 8, c.len_max = 100, c.max_rows = 6;
    int64_t lens[] = {50, 3, 20}, ql[] = {3, 1, 2};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    uint64_t rng = 7;
    pdata_make(&c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs b;
    pbufs_make(&d, &b, false);
    ropeqk_paged_args a = args_of(&c, &b);
    ropeqk_paged_batch good = batch_of(&c, &d);
    struct {
        int32_t ind[4], lens[3], qpos[3];
        ropeqk_status want;
        const char *what;
    } cs[] = {
        {{1, 3, 4, 6}, {50, 3, 20}, {0, 0, 0}, ROPEQK_ERR_QUERY_ROWS, "q_indptr[0] not 0"},
        {{0, 3, 3, 5}, {50, 3, 20}, {0, 0, 0}, ROPEQK_ERR_QUERY_ROWS, "q_len 0"},
        {{0, 3, 2, 5}, {50, 3, 20}, {0, 0, 0}, ROPEQK_ERR_QUERY_ROWS, "offsets decreasing"},
        {{0, 3, 4, 7}, {50, 3, 20}, {0, 0, 0}, ROPEQK_ERR_QUERY_ROWS, "rows beyond max_q_rows"},
        {{0, 3, 4, 6}, {2, 3, 20}, {0, 0, 0}, ROPEQK_ERR_QUERY_ROWS, "more rows than cached tokens"},
        {{0, 3, 4, 6}, {50, 3, 20}, {INT32_MAX - 1, 0, 0}, ROPEQK_ERR_POSITION_RANGE, "last row past INT32_MAX"},
        {{0, 3, 4, 6}, {0, 3, 20}, {0, 0, 0}, ROPEQK_ERR_SEQ_LENGTH, "length 0 (checked before the rows)"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        ropeqk_paged_batch bt = good;
        for (int s = 0; s < 3; s++)
            cs[i].qpos[s] = cs[i].qpos[s] ? cs[i].qpos[s] : d.qpos[s];
        bt.q_indptr = cs[i].ind, bt.seq_lens = cs[i].lens, bt.q_pos = cs[i].qpos;
        ropeqk_status st = rqs_paged_run_wait(pl, &a, &bt);
        cr_expect_eq(st, cs[i].want, "%s: got %d %s (%s)", cs[i].what, st, ropeqk_status_string(st),
                     ropeqk_last_error());
    }
    /* out and lse hold the fill of pbufs_make: nothing was written */
    size_t nb[2] = {d.ob, d.lb};
    const dm_buf *outs[2] = {b.o, b.l};
    for (int i = 0; i < 2; i++) {
        unsigned char *h = malloc(nb[i]);
        cr_assert(h);
        cr_assert_eq(dm_read(outs[i], h), ROPEQK_SUCCESS);
        for (size_t j = 0; j < nb[i]; j++)
            if (h[j] != 0x5A) {
                cr_expect_fail("%s: byte %zu changed by a refused call", i ? "lse" : "out", j);
                break;
            }
        free(h);
    }
    /* the output buffer sized for the plan's rows but the view asks for them all: a smaller buffer
     * than the batch's rows need is refused */
    dm_buf *small = NULL;
    cr_assert_eq(dm_create(th_ctx, (size_t)d.to.nb[0] * 5, NULL, false, &small), ROPEQK_SUCCESS);
    ropeqk_paged_args sa = a;
    sa.out.buf = dm_buffer(small);
    cr_expect_eq(rqs_paged_run_wait(pl, &sa, &good), ROPEQK_ERR_BUFFER_TOO_SMALL, "%s", ropeqk_last_error());
    dm_free(small);
    pbufs_free(&b);
    ropeqk_plan_destroy(pl);

    /* plan creation: max_q_rows below max_seqs, and q not [max_q_rows, ...] */
    ropeqk_plan_desc bad = desc;
    bad.paged.max_q_rows = 2;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &bad, &pl), ROPEQK_ERR_BAD_PARAM, "%s", ropeqk_last_error());
    cr_expect_null(pl);
    bad = desc;
    bad.paged.max_q_rows = 7;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &bad, &pl), ROPEQK_ERR_BAD_SHAPE, "%s", ropeqk_last_error());
    cr_expect_null(pl);
    pdata_free(&d);
}
