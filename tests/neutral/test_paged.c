/* Paged KV cache (ROPEQK_OP_PAGED_DECODE), on either backend: decode over shuffled pages and ragged
 * lengths against the fp64 reference (paged_fixture.c: ropeqk_attention_ref on each sequence's keys
 * and values gathered from its pages), device buffers between NaN canaries; append then decode equals
 * decode of a cache written directly (new rows also at a byte offset of 2: 16-bit rows that are not
 * word-aligned). Refusals and threads: test_paged_invalid.c.
 * Metric (docs/conventions.md): per row max_d |O - O64| / max_j ||V_j||_inf, and
 * |LSE - LSE64| / max(|LSE64|, 1). Cache slots that no sequence uses hold NaN, so a stray read shows.
 * The seed is ROPEQK_TEST_SEED (default 20261201), named in every failure message. */
#include "paged_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged, .init = th_ctx_init, .fini = th_ctx_fini);

/* f32 caches, interleaved, GQA 8/2, pages of 16, ragged lengths 1..5000, causal */
Test(paged, f32_interleaved_gqa_causal_pages16)
{
    pcase c = base_case("f32 interleaved GQA causal ps16");
    int64_t lens[] = {1, 17, 5000, 300, 1023};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    c.q_ahead = 3;
    run_case(&c, pf_seed());
}

/* half-split, MHA, pages of 64, Dv != D with a tail of dims, partial rotary (the attention factor on
 * rotated dims only), BSHD cache, no mask */
Test(paged, f32_half_split_partial_rotary_bshd_pages64)
{
    pcase c = base_case("f32 half-split R=96 YaRN Dv=40 bshd ps64");
    c.Hq = 4, c.Hkv = 4, c.D = 128, c.Dv = 40, c.ps = 64, c.maxp = 80, c.bshd_cache = true;
    int64_t lens[] = {5000, 1, 64, 65, 2500};
    memcpy(c.lens, lens, sizeof lens);
    c.p.layout = ROPEQK_HALF_SPLIT;
    c.p.rotary_dim = 96;
    c.p.base = 500000;
    c.p.scaling.type = ROPEQK_SCALING_YARN;
    c.p.scaling.factor = 8;
    c.p.scaling.original_max_position = 2048;
    run_case(&c, pf_seed() + 1);
}

/* one sequence (many splits), pages of 256, f16 K / bf16 V / f16 Q, sliding window + causal, positions
 * near 2^20, YaRN (attention factor on cos and sin) */
Test(paged, f16_bf16_window_near_2p20_pages256)
{
    pcase c = base_case("f16 K bf16 V window 2^20 YaRN ps256");
    c.Hq = 12, c.Hkv = 3, c.D = 80, c.Dv = 96, c.ps = 256, c.n_seqs = 1, c.max_seqs = 2, c.maxp = 20;
    c.lens[0] = 5000;
    c.qdt = ROPEQK_F16, c.kdt = ROPEQK_F16, c.vdt = ROPEQK_BF16;
    c.p.causal = 1;
    c.p.window = 700;
    c.kpos_lo = (1 << 20) - 2600, c.kpos_span = 0;
    c.p.scaling.type = ROPEQK_SCALING_YARN;
    c.p.scaling.factor = 4;
    c.p.scaling.original_max_position = 4096;
    run_case(&c, pf_seed() + 2);
}

/* positions anywhere in int32 (negative ones too), then one sequence whose last key and query sit at
 * INT32_MAX, with a window: the accurate angle and the masks at the ends of the range */
Test(paged, positions_across_int32)
{
    pcase c = base_case("f32 positions anywhere in int32");
    int64_t lens[] = {700, 33, 2000, 65, 1};
    memcpy(c.lens, lens, sizeof lens);
    c.kpos_lo = INT32_MIN, c.kpos_span = (int64_t)UINT32_MAX - 2100;
    c.p.causal = 1;
    c.p.layout = ROPEQK_HALF_SPLIT;
    run_case(&c, pf_seed() + 10);
    c.name = "f16 caches, last key and query at INT32_MAX, window 300";
    c.n_seqs = 1, c.lens[0] = 1500, c.kpos_lo = INT32_MAX - 1499, c.kpos_span = 0;
    c.p.window = 300;
    c.kdt = c.vdt = ROPEQK_F16;
    run_case(&c, pf_seed() + 11);
}

/* bf16 K / f16 V, conjugate rotation, Llama 3 scaling, f16 and bf16 outputs (their rounding bounds) */
Test(paged, bf16_f16_caches_half_outputs)
{
    ropeqk_dtype outs[] = {ROPEQK_F16, ROPEQK_BF16};
    double tols[] = {1e-3, 5e-3};
    for (int i = 0; i < 2; i++) {
        pcase c = base_case(i ? "bf16 K f16 V, bf16 out" : "bf16 K f16 V, f16 out");
        c.Hq = 6, c.Hkv = 2, c.D = 64, c.Dv = 32, c.ps = 32, c.maxp = 100, c.len_max = 3000, c.n_seqs = 4;
        c.kdt = ROPEQK_BF16, c.vdt = ROPEQK_F16, c.qdt = ROPEQK_BF16, c.odt = outs[i], c.tol = tols[i];
        c.p.conjugate = 1;
        c.p.causal = 1;
        c.p.scaling.type = ROPEQK_SCALING_LLAMA3;
        c.p.base = 500000;
        run_case(&c, pf_seed() + 3 + (uint64_t)i);
    }
}

/* MQA with 40 query heads (head chunks of both kernel shapes), Dv 300 (the GPU shape's V chunks) */
Test(paged, mqa_40_heads_dv300)
{
    pcase c = base_case("MQA Hq=40 D=32 Dv=300 ps32");
    c.Hq = 40, c.Hkv = 1, c.D = 32, c.Dv = 300, c.ps = 32, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 40;
    int64_t lens[] = {700, 3};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    run_case(&c, pf_seed() + 5);
    /* the same heads as MHA: several task groups of whole KV heads */
    c.name = "MHA Hq=Hkv=40 D=32 Dv=24";
    c.Hkv = 40, c.Dv = 24;
    run_case(&c, pf_seed() + 6);
}

/* a head dim past what the GPU kernel keeps of Q in local memory (D 336: 5 stages of rotation pairs
 * and one of pass-through dims, restaged for every tile), partial rotary, bf16 caches */
Test(paged, large_head_dim)
{
    pcase c = base_case("D=336 R=320 Dv=72 bf16 caches");
    c.Hq = 6, c.Hkv = 2, c.D = 336, c.Dv = 72, c.n_seqs = 3, c.max_seqs = 3, c.len_max = 600, c.maxp = 40;
    c.kdt = c.vdt = ROPEQK_BF16;
    c.p.rotary_dim = 320;
    c.p.causal = 1;
    c.q_ahead = 2;
    run_case(&c, pf_seed() + 12);
}

/* DYNAMIC scaling with an explicit seq_len, no LSE, a batch smaller than max_seqs */
Test(paged, dynamic_scaling_without_lse)
{
    pcase c = base_case("DYNAMIC seq_len 8192, no LSE");
    c.n_seqs = 3, c.max_seqs = 7, c.len_max = 2000, c.with_lse = false;
    c.p.scaling.type = ROPEQK_SCALING_DYNAMIC;
    c.p.scaling.factor = 2;
    c.p.scaling.original_max_position = 2048;
    c.p.scaling.seq_len = 8192;
    c.kpos_lo = 4000;
    run_case(&c, pf_seed() + 7);
}

/* rows whose every key is masked: O = 0, LSE = -inf (causal with all keys after the query; a window
 * that ends before the first key) */
Test(paged, fully_masked_rows)
{
    pcase c = base_case("all keys in the future (causal)");
    c.n_seqs = 3, c.len_max = 400;
    c.p.causal = 1;
    c.q_ahead = -1000; /* the query sits before the first key of every sequence */
    run_case(&c, pf_seed() + 8);
    c.name = "all keys outside the window";
    c.p.causal = 0;
    c.p.window = 5;
    c.q_ahead = 600;
    run_case(&c, pf_seed() + 9);
}

/* ---- append ------------------------------------------------------------------------------------ */
/* Appending rows chunk by chunk (a prefill chunk, single tokens, another chunk) into shuffled pages
 * leaves the cache byte for byte as writing it directly, and decode on it gives the same bits.
 * new_off: byte offset of k_new / v_new in their buffers. */
static void append_case(ropeqk_dtype kdt, ropeqk_dtype vdt, bool bshd, int64_t dv, size_t new_off, uint64_t seed)
{
    pcase c = base_case("append");
    c.n_seqs = 3, c.max_seqs = 3, c.ps = 16, c.maxp = 8, c.spare_pages = 3, c.kdt = kdt, c.vdt = vdt;
    c.bshd_cache = bshd, c.Dv = dv;
    c.p.causal = 1;
    int64_t lens[] = {37 + 5 + 20, 37 + 5 + 20, 37 + 5 + 20};
    memcpy(c.lens, lens, sizeof lens);
    uint64_t rng = seed;
    static pdata d;
    pdata_make(&c, &d, &rng); /* d.k, d.v: the cache written directly */
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs direct, app;
    pbufs_make(&d, &direct, true);
    pbufs_make(&d, &app, true);
    cr_assert_eq(dm_fill(app.k, 0xFF), ROPEQK_SUCCESS);
    cr_assert_eq(dm_fill(app.v, 0xFF), ROPEQK_SUCCESS);
    static const int64_t chunks[] = {37, 1, 1, 1, 1, 1, 20};
    int32_t cur[3] = {0, 0, 0};
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        int64_t nn = chunks[ci];
        /* k_new [3, Hkv, nn, D] (BSHD memory when bshd), rows copied from the direct cache */
        ropeqk_tensor tkn = bshd ? ropeqk_tensor_bshd(kdt, 3, nn, c.Hkv, c.D) : ropeqk_tensor_bhsd(kdt, 3, c.Hkv, nn, c.D);
        ropeqk_tensor tvn = ropeqk_tensor_bhsd(vdt, 3, c.Hkv, nn, c.Dv);
        size_t kbn = ropeqk_tensor_extent(&tkn), vbn = ropeqk_tensor_extent(&tvn);
        unsigned char *kn = calloc(1, new_off + kbn), *vn = calloc(1, new_off + vbn);
        cr_assert(kn && vn);
        size_t kes = ropeqk_dtype_size(kdt), ves = ropeqk_dtype_size(vdt);
        for (int64_t s = 0; s < 3; s++)
            for (int64_t h = 0; h < c.Hkv; h++)
                for (int64_t t = 0; t < nn; t++) {
                    int64_t j = cur[s] + t, page = d.table[s * c.maxp + j / c.ps], slot = j % c.ps;
                    memcpy(kn + new_off + off4(&tkn, s, h, t, 0), d.k + off4(&d.tk, page, h, slot, 0), (size_t)c.D * kes);
                    memcpy(vn + new_off + off4(&tvn, s, h, t, 0), d.v + off4(&d.tv, page, h, slot, 0), (size_t)c.Dv * ves);
                }
        dm_buf *bkn = NULL, *bvn = NULL;
        cr_assert_eq(dm_create(th_ctx, new_off + kbn, kn, true, &bkn), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, new_off + vbn, vn, true, &bvn), ROPEQK_SUCCESS);
        ropeqk_paged_batch b = {.n_seqs = 3, .page_table = d.table, .seq_lens = cur};
        ropeqk_mem knv = dm_at(bkn, new_off), vnv = dm_at(bvn, new_off);
        ropeqk_paged_cache cache = {dm_whole(app.k), dm_whole(app.v), {0}, {0}};
        ropeqk_status st = rqs_paged_append_wait(pl, &tkn, knv, &tvn, vnv, &cache, &b);
        cr_assert_eq(st, ROPEQK_SUCCESS, "append chunk %zu (seed %llu): %s: %s", ci, (unsigned long long)seed,
                     ropeqk_status_string(st), ropeqk_last_error());
        bool ki = false, vi = false;
        cr_assert_eq(dm_check(bkn, kn, &ki), ROPEQK_SUCCESS);
        cr_assert_eq(dm_check(bvn, vn, &vi), ROPEQK_SUCCESS);
        cr_expect(ki && vi, "append chunk %zu: the new rows or their canaries changed", ci);
        dm_free(bkn), dm_free(bvn);
        free(kn), free(vn);
        for (int s = 0; s < 3; s++)
            cur[s] += (int32_t)nn;
    }
    unsigned char *kc = malloc(d.kb), *vc = malloc(d.vb);
    cr_assert(kc && vc);
    cr_assert_eq(dm_read(app.k, kc), ROPEQK_SUCCESS);
    cr_assert_eq(dm_read(app.v, vc), ROPEQK_SUCCESS);
    cr_expect(memcmp(kc, d.k, d.kb) == 0, "appended K cache differs from the directly written one (seed %llu)",
              (unsigned long long)seed);
    cr_expect(memcmp(vc, d.v, d.vb) == 0, "appended V cache differs from the directly written one (seed %llu)",
              (unsigned long long)seed);
    bool ki = false, vi = false;
    cr_expect(dm_check(app.k, NULL, &ki) == ROPEQK_SUCCESS && ki && dm_check(app.v, NULL, &vi) == 0 &&
                  vi,
              "a canary around a cache changed (seed %llu)", (unsigned long long)seed);
    free(kc), free(vc);
    ropeqk_paged_batch batch = batch_of(&c, &d);
    unsigned char *o1 = malloc(d.ob), *o2 = malloc(d.ob);
    cr_assert(o1 && o2);
    pbufs *bs[2] = {&direct, &app};
    unsigned char *os[2] = {o1, o2};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(dm_fill(bs[i]->o, 0), ROPEQK_SUCCESS);
        ropeqk_paged_args a = args_of(&c, bs[i]);
        cr_assert_eq(rqs_paged_run_wait(pl, &a, &batch), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        cr_assert_eq(dm_read(bs[i]->o, os[i]), ROPEQK_SUCCESS);
    }
    cr_expect(memcmp(o1, o2, d.ob) == 0, "decode after append differs from decode of the direct cache (seed %llu)",
              (unsigned long long)seed);
    free(o1), free(o2);
    pbufs_free(&direct);
    pbufs_free(&app);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}

Test(paged, append_then_decode_equals_direct_cache)
{
    append_case(ROPEQK_F32, ROPEQK_F32, false, 48, 0, pf_seed() + 20);
    append_case(ROPEQK_F16, ROPEQK_BF16, true, 48, 0, pf_seed() + 21);
    /* 16-bit rows of an odd number of words, and new rows at byte offset 2 (not word-aligned) */
    append_case(ROPEQK_F16, ROPEQK_BF16, false, 30, 0, pf_seed() + 22);
    append_case(ROPEQK_F16, ROPEQK_BF16, true, 30, 2, pf_seed() + 23);
}
