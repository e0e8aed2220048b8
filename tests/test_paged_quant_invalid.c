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

/* Whether the suite's backend reads 8-bit caches (OpenCL; Vulkan's shaders not yet). */
static bool backend_reads_q8(void) { return rqs_ctx_backend(th_ctx) == RQS_BACKEND_OPENCL; }

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
