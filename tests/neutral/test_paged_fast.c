/* The fast paged decode pass 1 (OpenCL's GPU profile: cl/paged_fast.cl, src/opencl/cl_paged_fast.c; Vulkan:
 * glsl/paged_fast.comp, src/vulkan/vk_paged_fast.c) at its edges,
 * against the fp64 reference (paged_fixture.c: the attention metric, 1e-5): every cache dtype (8-bit
 * codes decoded in registers), both layouts, partial rotary with an offset, R 16 and 256 (the table's
 * two delta ranges), GQA 1..8 and odd (both kernels, fast4 and fast8, and head chunks), speculative
 * rows (a work-group per sequence's rows, masks differing inside a tile), lengths at tile and split
 * edges, positions near INT32_MAX and negative, soft-capping and sinks. The shapes it does not take
 * (D % 8, Dv % 4, R % 16, cache rows off 16-byte multiples) run paged_attn_gpu instead. And
 * the masking rule of issue 28: a key that one row of a speculative step sees and another does not
 * (its tile is "mixed") weighs exactly 0 for the latter whatever its K and V hold: a NaN there leaves
 * the latter's output bit for bit unchanged and makes the former's NaN.
 * On OpenCL's CPU profile the cases still run (on whatever kernel serves them) and the kernel checks
 * are skipped. Links the library statically (the fault build's archive) for the launch counters. About
 * 2.5 s on pocl (2 cores, GPU profile, warm kernel cache); on lavapipe TBD. Seed: ROPEQK_TEST_SEED
 * or 20261201, named in every failure message. */
#include "paged_fixture.h"
#include "../../src/core/path_runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged_fast, .init = th_ctx_init, .fini = th_ctx_fini, .timeout = 600);

/* launches of the fast pass 1, counted by either backend (src/core/path_runs.h; a test runs on one) */
static long long fast_runs(void) { return rq_path_runs(RQ_PATH_PAGED_FAST); }

/* Whether the suite's context runs the fast pass 1: the GPU profile (OpenCL: ROPEQK_PROFILE=gpu on
 * pocl; Vulkan: a GPU), and on a Vulkan CPU device with ROPEQK_PAGED_FAST=1 (the suite's
 * paged_fast_vulkan on lavapipe) */
static bool fast_ctx(void)
{
    ropeqk_tuning t;
    const char *e = getenv("ROPEQK_PAGED_FAST");
    if (e && !strcmp(e, "0"))
        return false;
    if (th_is_vulkan(th_ctx) && e && !strcmp(e, "1"))
        return true;
    return ropeqk_ctx_tuning(th_ctx, &t, NULL) == ROPEQK_SUCCESS && t.profile == ROPEQK_PROFILE_GPU;
}

/* run_case, and whether the fast kernel ran (want 1) or not (want 0) where the context has it (-1:
 * either: a shape whose shared memory a Vulkan device may not have, lavapipe's 32 KiB) */
static void run_fast(const pcase *c, uint64_t seed, int want)
{
    long long before = fast_runs();
    run_case(c, seed);
    if (fast_ctx() && want >= 0)
        cr_expect_eq(fast_runs() > before, want != 0, "%s (seed %llu): the fast kernel %s", c->name,
                     (unsigned long long)seed, want ? "did not run" : "ran on a shape it does not take");
}

static pcase small_case(const char *name)
{
    pcase c = base_case(name);
    c.n_seqs = 3, c.max_seqs = 3, c.len_max = 700, c.maxp = 64;
    return c;
}

/* every cache dtype as K and as V (pairs crossing the 8-bit and the 16/32-bit ones), f16 Q */
Test(paged_fast, cache_dtypes)
{
    static const ropeqk_dtype kd[] = {ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2, ROPEQK_F16, ROPEQK_BF16, ROPEQK_F32};
    static const ropeqk_dtype vd[] = {ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2, ROPEQK_I8, ROPEQK_BF16, ROPEQK_F32, ROPEQK_F16};
    for (int i = 0; i < 6; i++) {
        char name[64];
        snprintf(name, sizeof name, "K dtype %d V dtype %d", kd[i], vd[i]);
        pcase c = small_case(name);
        c.kdt = kd[i], c.vdt = vd[i], c.qdt = ROPEQK_F16;
        c.p.causal = 1;
        run_fast(&c, pf_seed() + 300 + (uint64_t)i, 1);
    }
}

/* GQA 1, 3, 5, 7 and 8 (fast4, fast8), 16 (two head chunks), with speculative steps of 2..9 rows
 * (fast8 for up to 8 query vectors: several row groups a sequence) */
Test(paged_fast, gqa_ratios_and_speculative_rows)
{
    static const int64_t hq[] = {2, 6, 5, 7, 8, 16}, hkv[] = {2, 2, 1, 1, 1, 1};
    for (int i = 0; i < 6; i++) {
        char name[64];
        snprintf(name, sizeof name, "Hq %lld Hkv %lld, steps of 1, 2, 9 rows", (long long)hq[i], (long long)hkv[i]);
        pcase c = small_case(name);
        c.Hq = hq[i], c.Hkv = hkv[i], c.ragged = true;
        int64_t lens[] = {300, 129, 500}, ql[] = {1, 2, 9};
        memcpy(c.lens, lens, sizeof lens);
        memcpy(c.qlens, ql, sizeof ql);
        c.p.causal = 1;
        c.kdt = c.vdt = ROPEQK_F16;
        run_fast(&c, pf_seed() + 310 + (uint64_t)i, 1);
    }
}

/* lengths at the edges of tiles (128 keys) and splits (the host's kps: whole tiles), one page of
 * 256 keys and pages of 48 (no whole tiles), a window */
Test(paged_fast, tile_and_split_edges)
{
    static const int64_t L[][3] = {{127, 128, 129}, {255, 256, 257}, {1023, 1024, 1025}, {1, 2, 3000}};
    for (int i = 0; i < 4; i++) {
        pcase c = small_case("tile and split edges");
        memcpy(c.lens, L[i], sizeof L[i]);
        c.ps = i == 3 ? 48 : 16, c.maxp = i == 3 ? 64 : 80;
        c.p.causal = 1;
        c.p.window = i == 2 ? 300 : 0;
        run_fast(&c, pf_seed() + 320 + (uint64_t)i, 1);
    }
}

/* half-split and interleaved with partial rotary and an offset (MLA-like [nope | rope]), R 16, R 256
 * (the table's 16-key range), YaRN's attention factor on the anchors */
Test(paged_fast, rotary_shapes)
{
    struct {
        int64_t D, R, off;
        int layout;
    } r[] = {{96, 32, 64, ROPEQK_HALF_SPLIT}, {64, 16, 8, ROPEQK_INTERLEAVED}, {256, 256, 0, ROPEQK_HALF_SPLIT},
             {128, 64, 0, ROPEQK_INTERLEAVED}};
    for (int i = 0; i < 4; i++) {
        pcase c = small_case("rotary shapes");
        c.D = r[i].D, c.Dv = 40 + 8 * i, c.len_max = 400;
        c.p.rotary_dim = (int32_t)r[i].R, c.p.rotary_offset = (int32_t)r[i].off, c.p.layout = r[i].layout;
        c.p.scaling.type = ROPEQK_SCALING_YARN;
        c.p.scaling.factor = 4;
        c.p.scaling.original_max_position = 4096;
        c.p.causal = 1;
        c.bshd_cache = i % 2;
        run_fast(&c, pf_seed() + 330 + (uint64_t)i, r[i].D == 256 && th_is_vulkan(th_ctx) ? -1 : 1);
    }
}

/* keys whose positions run up to INT32_MAX (the anchors' accurate angle there), negative positions,
 * a window, soft-capping and sinks */
Test(paged_fast, far_positions_softcap_sinks)
{
    pcase c = small_case("last key at INT32_MAX, window 500, softcap 20");
    c.n_seqs = 1, c.lens[0] = 2000, c.maxp = 130, c.kpos_lo = INT32_MAX - 1999, c.kpos_span = 0;
    c.p.causal = 1, c.p.window = 500, c.p.softcap = 20;
    c.kdt = c.vdt = ROPEQK_BF16;
    run_fast(&c, pf_seed() + 340, 1);
    pcase n = small_case("negative positions, sinks");
    n.kpos_lo = -100000, n.kpos_span = 50000;
    float sinks[8];
    for (int h = 0; h < 8; h++)
        sinks[h] = 0.25f * (float)h - 1.0f;
    n.p.sinks = sinks, n.p.n_sinks = 8;
    run_fast(&n, pf_seed() + 341, 1);
}

/* the shapes the fast kernel does not take run paged_attn_gpu: D % 8 (36), Dv % 4 (30), R % 16 (24),
 * 8-bit K rows of 72 bytes (not 16-byte multiples) */
Test(paged_fast, fallback_shapes)
{
    pcase c = small_case("D 36");
    c.D = 36, c.Dv = 36;
    run_fast(&c, pf_seed() + 350, 0);
    c.name = "Dv 30", c.D = 64, c.Dv = 30;
    run_fast(&c, pf_seed() + 351, 0);
    c.name = "R 24", c.Dv = 64, c.p.rotary_dim = 24;
    run_fast(&c, pf_seed() + 352, 0);
    c.name = "int8 K rows of 72 bytes", c.D = 72, c.p.rotary_dim = 0, c.kdt = ROPEQK_I8;
    run_fast(&c, pf_seed() + 353, 0);
}

/* A speculative step of 3 rows at positions p-2, p-1, p of the last 3 keys (G 4: rows 0 and 1 share a
 * work-group, row 2 has its own): the key at position p-1 is seen by rows 1 and 2, not by row 0. With
 * NaN written into that key's V (then K) row, row 0 keeps its output bit for bit and row 1 turns NaN. */
Test(paged_fast, masked_keys_weigh_nothing_in_mixed_tiles)
{
    if (!fast_ctx())
        cr_skip_test("the fast pass 1's masking (issue 28): where it runs (GPU profile, ROPEQK_PAGED_FAST=1)");
    pcase c = small_case("speculative step over a NaN key");
    c.n_seqs = 1, c.max_seqs = 1, c.lens[0] = 200, c.ragged = true, c.qlens[0] = 3;
    c.kdt = c.vdt = ROPEQK_F16;
    c.p.causal = 1;
    for (int which = 0; which < 2; which++) {
        uint64_t rng = pf_seed() + 360;
        static pdata d;
        pdata_make(&c, &d, &rng);
        ropeqk_plan_desc desc = desc_of(&c, &d);
        ropeqk_plan *pl = NULL;
        cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        ropeqk_paged_batch batch = batch_of(&c, &d);
        unsigned char *out[2] = {malloc(d.ob), malloc(d.ob)};
        cr_assert(out[0] && out[1]);
        for (int run = 0; run < 2; run++) {
            if (run == 1) { /* the next-to-last key's rows (every KV head) to NaN (f16 0xFFFF) */
                int64_t j = d.lens[0] - 2, page = d.table[j / c.ps], slot = j % c.ps;
                const ropeqk_tensor *t = which ? &d.tk : &d.tv;
                unsigned char *base = which ? d.k : d.v;
                for (int64_t h = 0; h < c.Hkv; h++)
                    memset(base + off4(t, page, h, slot, 0), 0xFF, (size_t)t->ne[3] * 2);
            }
            pbufs b;
            pbufs_make(&d, &b, false);
            ropeqk_paged_args a = args_of(&c, &b);
            long long before = fast_runs();
            cr_assert_eq(rqs_paged_run_wait(pl, &a, &batch), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
            cr_expect(fast_runs() > before, "the fast kernel did not run");
            cr_assert_eq(dm_read(b.o, out[run]), ROPEQK_SUCCESS);
            pbufs_free(&b);
        }
        size_t row = (size_t)d.to.nb[0];
        cr_expect(memcmp(out[0], out[1], row) == 0,
                  "NaN %s of a key the first row does not see changed its output (seed %llu)",
                  which ? "K" : "V", (unsigned long long)pf_seed() + 360);
        bool nan = false;
        for (size_t i = row; i < 2 * row; i += 4) {
            float x;
            memcpy(&x, out[1] + i, 4);
            nan = nan || isnan(x);
        }
        /* (Vulkan promises no NaN through comparisons and max() without its float controls: lavapipe
         * turns a NaN score into a finite weight; the masking above is what this test is for there) */
        if (!which || !th_is_vulkan(th_ctx))
            cr_expect(nan, "NaN %s of a key the second row sees left its output finite", which ? "K" : "V");
        free(out[0]), free(out[1]);
        ropeqk_plan_destroy(pl);
        pdata_free(&d);
    }
}
