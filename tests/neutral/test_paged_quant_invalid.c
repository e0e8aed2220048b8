/* Quantized paged caches (docs/conventions.md section 12): what is refused, on either backend. The
 * 8-bit dtypes anywhere but a paged plan's caches; the scale buffers missing, too small, misaligned,
 * overlapping an output, or given for a 16/32-bit cache; a backend whose kernels cannot read 8-bit
 * caches refusing the plan by name. Refused calls write nothing. Fixture: paged_fixture.c. */
#include "paged_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged_quant, .init = th_ctx_init, .fini = th_ctx_fini);

static const ropeqk_dtype q8[3] = {ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2};

enum { IS = 3, IHQ = 4, IHKV = 2, ID = 32, IPS = 16, IMAXP = 4, INP = 12 };

/* Whether the suite's backend reads 8-bit caches (OpenCL and Vulkan do; a backend added without them
 * must refuse the plan by name, which the other branch below checks). */
static bool backend_reads_q8(void)
{
    return ropeqk_ctx_backend(th_ctx) == ROPEQK_BACKEND_OPENCL || ropeqk_ctx_backend(th_ctx) == ROPEQK_BACKEND_VULKAN;
}

Test(paged_quant, dtype_size_and_dense_refusals)
{
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(ropeqk_dtype_size(q8[i]), 1);
        ropeqk_tensor t8 = ropeqk_tensor_bhsd(q8[i], 1, 2, 8, 16), t32 = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 8, 16);
        ropeqk_tensor s = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 8, 8), l = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 8, 1);
        cr_expect_eq(ropeqk_tensor_extent(&t8), 2 * 8 * 16);
        /* scores and attention plans: Q, K, V, out */
        ropeqk_plan_desc sc = {.op = ROPEQK_OP_SCORES, .q = t8, .k = t32, .out = s};
        ropeqk_plan_desc at = {.op = ROPEQK_OP_ATTENTION, .q = t32, .k = t32, .v = t32, .out = t32, .lse = l};
        ropeqk_plan_desc d[5] = {sc, sc, at, at, at};
        d[1].q = t32, d[1].k = t8;
        d[2].k = t8;
        d[3].v = t8;
        d[4].out = t8;
        for (int j = 0; j < 5; j++) {
            ropeqk_default_params(&d[j].params);
            ropeqk_plan *pl = (ropeqk_plan *)1;
            ropeqk_status st = ropeqk_plan_create(th_ctx, &d[j], &pl);
            cr_expect_eq(st, ROPEQK_ERR_BAD_DTYPE, "dtype %d, dense case %d: got %s", q8[i], j, ropeqk_status_string(st));
            cr_expect_null(pl);
        }
        /* the reference path and the metrics: an 8-bit view means nothing without its scales */
        ropeqk_params p;
        ropeqk_default_params(&p);
        unsigned char buf[4096] = {0};
        double o64[256];
        ropeqk_tensor s64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 2, 8, 8);
        cr_expect_eq(ropeqk_scores_ref(&p, &t32, buf, &t8, buf, NULL, NULL, &s64, o64), ROPEQK_ERR_BAD_DTYPE);
        double e, el;
        int64_t mm;
        ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 1, 16), oo = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 2, 1, 16);
        cr_expect_eq(ropeqk_attention_max_error(&t8, buf, &o, buf, &oo, o64, NULL, NULL, NULL, NULL, &e, &el, &mm),
                     ROPEQK_ERR_BAD_DTYPE);
    }
}

Test(paged_quant, paged_descriptions)
{
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, ID);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, ID);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, 1);
    for (int i = 0; i < 3; i++) {
        ropeqk_tensor k8 = ropeqk_tensor_bshd(q8[i], INP, IPS, IHKV, ID);
        ropeqk_tensor v8 = ropeqk_tensor_bhsd(q8[(i + 1) % 3], INP, IHKV, IPS, ID);
        ropeqk_plan_desc good = {.op = ROPEQK_OP_PAGED_DECODE, .q = q, .k = k8, .v = v8, .out = o, .lse = l,
                                 .with_lse = 1, .paged = {IPS, IMAXP, IS}};
        ropeqk_default_params(&good.params);
        ropeqk_plan *pl = NULL;
        ropeqk_status st = ropeqk_plan_create(th_ctx, &good, &pl);
        if (backend_reads_q8()) {
            cr_expect_eq(st, ROPEQK_SUCCESS, "8-bit caches %d/%d: %s", q8[i], q8[(i + 1) % 3], ropeqk_last_error());
        } else { /* refused by name, not computed wrong */
            cr_expect_eq(st, ROPEQK_ERR_BAD_DTYPE, "got %s", ropeqk_status_string(st));
            const char *be = NULL;
            (void)ropeqk_ctx_backend_error(th_ctx, &be);
            cr_expect(be && strstr(ropeqk_last_error(), be) != NULL, "message: %s", ropeqk_last_error());
            cr_expect_null(pl);
        }
        ropeqk_plan_destroy(pl);
        struct {
            ropeqk_plan_desc d;
            ropeqk_status want;
            const char *what;
        } cs[5];
        for (int j = 0; j < 5; j++)
            cs[j].d = good, cs[j].want = ROPEQK_ERR_BAD_DTYPE;
        cs[0].d.q = ropeqk_tensor_bhsd(q8[i], IS, IHQ, 1, ID), cs[0].what = "8-bit Q";
        cs[1].d.out = ropeqk_tensor_bhsd(q8[i], IS, IHQ, 1, ID), cs[1].what = "8-bit out";
        cs[2].d.lse = ropeqk_tensor_bhsd(q8[i], IS, IHQ, 1, 1), cs[2].what = "8-bit LSE";
        /* the layout rules hold for 1-byte elements too */
        cs[3].d.k.nb[3] = 2, cs[3].d.k.nb[2] = 2 * ID * IHKV, cs[3].d.k.nb[1] = 2 * ID;
        cs[3].want = ROPEQK_ERR_BAD_STRIDES, cs[3].what = "K rows not contiguous";
        cs[4].d.v.nb[2] = ID / 2, cs[4].want = ROPEQK_ERR_OVERLAP, cs[4].what = "V rows aliasing";
        for (int j = 0; j < 5; j++) {
            pl = (ropeqk_plan *)1;
            st = ropeqk_plan_create(th_ctx, &cs[j].d, &pl);
            cr_expect_eq(st, cs[j].want, "dtype %d: %s: got %s (%s)", q8[i], cs[j].what, ropeqk_status_string(st),
                         ropeqk_last_error());
            cr_expect_null(pl, "%s", cs[j].what);
        }
    }
}

/* ---- the scale buffers at the calls ------------------------------------------------------------- */
static void expect_canary(const dm_buf *m, unsigned char byte, const char *what)
{
    size_t bytes = dm_bytes(m);
    unsigned char *h = malloc(bytes);
    cr_assert(h);
    cr_assert_eq(dm_read(m, h), ROPEQK_SUCCESS);
    size_t i = 0;
    while (i < bytes && h[i] == byte)
        i++;
    cr_expect_eq(i, bytes, "%s: byte %zu changed by a refused call", what, i);
    free(h);
}

Test(paged_quant, scale_buffers_checked_and_nothing_written)
{
    pcase c = base_case("scale refusals");
    c.Hq = IHQ, c.Hkv = IHKV, c.D = ID, c.Dv = ID, c.ps = IPS, c.maxp = IMAXP;
    c.n_seqs = IS, c.max_seqs = IS, c.spare_pages = 2, c.len_max = IPS * IMAXP;
    c.kdt = ROPEQK_I8, c.vdt = ROPEQK_FP8_E4M3;
    uint64_t rng = 5;
    static pdata d;
    pdata_make(&c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs b;
    pbufs_make(&d, &b, false);
    dm_buf *small = NULL, *big = NULL;
    cr_assert_eq(dm_create(th_ctx, d.ksb - 4, NULL, false, &small), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, 4 * (d.ksb + d.ob), NULL, false, &big), ROPEQK_SUCCESS);
    cr_assert_eq(dm_fill(big, 0x5A), ROPEQK_SUCCESS);
    ropeqk_paged_batch batch = batch_of(&c, &d);
    const ropeqk_paged_args good = args_of(&c, &b);
    struct {
        ropeqk_paged_args a;
        ropeqk_status want;
        const char *what;
    } cs[6];
    for (int i = 0; i < 6; i++)
        cs[i].a = good;
    cs[0].a.k_scale.buf = NULL, cs[0].want = ROPEQK_ERR_NULL_POINTER, cs[0].what = "no k_scale";
    cs[1].a.v_scale.buf = NULL, cs[1].want = ROPEQK_ERR_NULL_POINTER, cs[1].what = "no v_scale";
    cs[2].a.v_scale.buf = dm_buffer(small), cs[2].want = ROPEQK_ERR_BUFFER_TOO_SMALL, cs[2].what = "v_scale too small";
    cs[3].a.k_scale = dm_at(big, 2), cs[3].want = ROPEQK_ERR_BAD_STRIDES, cs[3].what = "k_scale offset 2";
    cs[4].a.k_scale = dm_at(big, 0), cs[4].a.out = dm_at(big, 8);
    cs[4].want = ROPEQK_ERR_OVERLAP, cs[4].what = "out over k_scale";
    cs[5].a.lse = dm_at(b.vs, 0), cs[5].want = ROPEQK_ERR_OVERLAP, cs[5].what = "lse over v_scale";
    for (int i = 0; i < 6; i++) {
        ropeqk_status st = rqs_paged_run_wait(pl, &cs[i].a, &batch);
        cr_expect_eq(st, cs[i].want, "%s: got %s (%s)", cs[i].what, ropeqk_status_string(st), ropeqk_last_error());
    }
    expect_canary(b.o, 0x5A, "out");
    expect_canary(b.l, 0x5A, "lse");
    expect_canary(big, 0x5A, "the overlapping buffer");
    /* the append: scales required, sized, apart from the caches; new rows unquantized */
    ropeqk_tensor tkn = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHKV, 1, ID), tvn = ropeqk_tensor_bhsd(ROPEQK_BF16, IS, IHKV, 1, ID);
    ropeqk_tensor tkn8 = ropeqk_tensor_bhsd(ROPEQK_I8, IS, IHKV, 1, ID);
    dm_buf *kn = NULL;
    cr_assert_eq(dm_create(th_ctx, ropeqk_tensor_extent(&tkn), NULL, false, &kn), ROPEQK_SUCCESS);
    int32_t lens[IS] = {0, 0, 0};
    ropeqk_paged_batch ab = {.n_seqs = IS, .page_table = d.table, .seq_lens = lens};
    ropeqk_paged_cache gc = {dm_whole(b.k), dm_whole(b.v), dm_whole(b.ks), dm_whole(b.vs)}, cc[4];
    for (int i = 0; i < 4; i++)
        cc[i] = gc;
    cc[0].k_scale.buf = NULL;
    cc[1].v_scale.buf = dm_buffer(small);
    cc[2].k_scale = dm_whole(b.v); /* K's scales over the V cache */
    const ropeqk_status want[4] = {ROPEQK_ERR_NULL_POINTER, ROPEQK_ERR_BUFFER_TOO_SMALL, ROPEQK_ERR_OVERLAP,
                                   ROPEQK_ERR_BAD_DTYPE};
    for (int i = 0; i < 4; i++) {
        ropeqk_status st = rqs_paged_append_wait(pl, i == 3 ? &tkn8 : &tkn, dm_whole(kn), &tvn,
                                                dm_whole(kn), &cc[i], &ab);
        cr_expect_eq(st, want[i], "append case %d: got %s (%s)", i, ropeqk_status_string(st), ropeqk_last_error());
    }
    bool intact = false;
    cr_expect(dm_check(b.k, d.k, &intact) == ROPEQK_SUCCESS && intact, "K cache written by a refused append");
    cr_expect(dm_check(b.ks, d.ks, &intact) == ROPEQK_SUCCESS && intact, "K scales written by a refused append");
    cr_expect(dm_check(b.vs, d.vs, &intact) == ROPEQK_SUCCESS && intact, "V scales written by a refused append");
    dm_free(kn), dm_free(small), dm_free(big);
    pbufs_free(&b);
    ropeqk_plan_destroy(pl);
    /* a scale buffer beside a 16-bit cache */
    c.vdt = ROPEQK_F16;
    pdata d2;
    rng = 6;
    pdata_make(&c, &d2, &rng);
    desc = desc_of(&c, &d2);
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs_make(&d2, &b, false);
    ropeqk_paged_args a = args_of(&c, &b);
    a.v_scale = a.k_scale;
    ropeqk_paged_batch b2 = batch_of(&c, &d2);
    ropeqk_status st = rqs_paged_run_wait(pl, &a, &b2);
    cr_expect_eq(st, ROPEQK_ERR_BAD_PARAM, "v_scale for an f16 V cache: got %s", ropeqk_status_string(st));
    pbufs_free(&b);
    ropeqk_plan_destroy(pl);
    pdata_free(&d2);
    pdata_free(&d);
}
