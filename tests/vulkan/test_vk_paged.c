/* Paged decode on Vulkan: what the backend-neutral paged suites (test_paged.c, test_paged_invalid.c,
 * registered again as paged_vulkan and paged_invalid_vulkan) do not reach on lavapipe. Same problem
 * and fp64 reference (paged_fixture.c: ropeqk_attention_ref on each sequence's pages gathered into a
 * dense K/V), run with ROPEQK_DEVICE=vulkan and ROPEQK_VULKAN_VALIDATION=1 (tests/meson.build). The
 * seed is ROPEQK_TEST_SEED (default 20261201), printed with every case. */
#include "paged_fixture.h"

#include <string.h>

static void setup(void)
{
    th_ctx_init();
    if (!th_is_vulkan(th_ctx)) {
        ropeqk_ctx_destroy(th_ctx);
        th_ctx = NULL;
        cr_skip_test("not a Vulkan context: run with ROPEQK_DEVICE=vulkan");
    }
}

TestSuite(vk_paged, .init = setup, .fini = th_ctx_fini);

/* One long sequence (the bench's shape, shortened to 32k): on a 2-core lavapipe it got one split of
 * 32768 keys, past llvmpipe's loop limit, and came out wrong with no error (LSE off by 0.1); splits
 * now stop at RQ_VK_PG_MAX_KEYS keys, or fewer where vk_paged_run.c's count of paged.comp's loop trips
 * says so (measured: the count is llvmpipe's own to within a trip a tile). */
Test(vk_paged, one_long_sequence_32k_keys)
{
    pcase c = base_case("f16 one sequence of 32768 keys, Hq 32 / Hkv 8, D 128, ps 16");
    c.Hq = 32, c.Hkv = 8, c.D = 128, c.Dv = 128, c.ps = 16, c.n_seqs = 1, c.max_seqs = 1, c.maxp = 2048;
    c.spare_pages = 3, c.lens[0] = 32768, c.p.causal = 1;
    c.qdt = c.kdt = c.vdt = ROPEQK_F16, c.tol = 1e-3;
    run_case(&c, pf_seed());
}

/* positions up to 2^20 and anywhere up to INT32_MAX (the accurate angle of glsl/angle.glsl): cached
 * keys start anywhere in [0, kpos_span] */
Test(vk_paged, positions_to_2_20_and_across_int32)
{
    pcase c = base_case("f32 positions near 2^20");
    int64_t lens[] = {700, 33, 2000};
    memcpy(c.lens, lens, sizeof lens);
    c.n_seqs = c.max_seqs = 3;
    c.kpos_span = 1 << 20;
    c.p.causal = 1;
    uint64_t seed = pf_seed();
    run_case(&c, seed);
    c.name = "f16 half-split positions anywhere up to INT32_MAX";
    c.kpos_span = INT32_MAX - 2100;
    c.qdt = c.kdt = c.vdt = ROPEQK_F16, c.p.layout = ROPEQK_HALF_SPLIT, c.tol = 1e-3;
    run_case(&c, seed + 1);
}

/* wide heads: paged.comp stages fewer rotary units of K per chunk (16, 8) so that the staged query
 * heads fit 32 KiB of shared memory, and at D 1000 takes 5 of the 8 heads per task (two head chunks);
 * partial rotary there, so chunks mix rotary pairs and pass-through dims */
Test(vk_paged, wide_heads_narrow_key_chunks)
{
    pcase c = base_case("GQA 8/1 D=512 ps16");
    c.Hq = 8, c.Hkv = 1, c.D = 512, c.Dv = 64, c.ps = 16, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 40;
    int64_t lens[] = {600, 77};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    uint64_t seed = pf_seed();
    run_case(&c, seed + 20);
    c.name = "GQA 8/1 D=1000 R=200 half-split ps16", c.D = 1000, c.Dv = 100;
    c.p.layout = ROPEQK_HALF_SPLIT, c.p.rotary_dim = 200;
    run_case(&c, seed + 21);
}

/* Prefill chunks (vk_paged_chunk.c: gathered K/V through the companion attention plan) at the sizes
 * where llvmpipe's loop limit could bite: a 512-row chunk over 4096 cached keys next to a decode row,
 * and a 20-row chunk over 30000 keys, more than one attention.comp dispatch takes at D 128 (25216
 * keys: the companion then runs its keys in two dispatches through its row state) */
Test(vk_paged, prefill_chunks_long)
{
    pcase c = base_case("f16 chunk of 512 rows over 4096 keys + a decode row, D 128");
    c.ragged = true;
    c.Hq = 4, c.Hkv = 2, c.D = 128, c.Dv = 128, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 260;
    int64_t lens[] = {4096, 700}, ql[] = {512, 1};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.qdt = c.kdt = c.vdt = ROPEQK_F16, c.tol = 1e-3;
    c.p.causal = 1;
    uint64_t seed = pf_seed();
    run_case(&c, seed + 30);
    pcase d = base_case("f32 chunk of 20 rows over 30000 keys, D 128");
    d.ragged = true;
    d.Hq = 2, d.Hkv = 1, d.D = 128, d.Dv = 128, d.n_seqs = 1, d.max_seqs = 1, d.maxp = 1900;
    d.lens[0] = 30000, d.qlens[0] = 20;
    d.p.causal = 1;
    run_case(&d, seed + 31);
}
