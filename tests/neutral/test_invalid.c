/* Every invalid argument gets its own status, from the scalar path and the host convenience call
 * alike, and leaves the output untouched; a view whose outermost block passes int64 is refused at a
 * plan run on a buffer too small. OpenCL's enqueue call on the caller's cl_mem, and the names of
 * OpenCL's codes: tests/opencl/test_invalid.c. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

TestSuite(invalid, .fini = th_leak_check);

typedef void (*mutator)(th_call *);
#define M(name, body) static void name(th_call *c) { body; }
M(odd_rotary, c->p.rotary_dim = 5)
M(rotary_too_big, c->p.rotary_dim = 10)
M(rotary_negative, c->p.rotary_dim = -2)
M(heads_not_multiple, c->q.ne[1] = 3; c->o.ne[1] = 3)
M(zero_rows, c->q.ne[2] = 0)
M(negative_dim, c->k.ne[2] = -1)
M(batch_mismatch, c->k.ne[0] = 2)
M(headdim_mismatch, c->k.ne[3] = 6)
M(out_shape_mismatch, c->o.ne[3] = 4)
M(negative_stride, c->q.nb[2] = -32)
M(misaligned_stride, c->q.nb[2] = 33)
M(head_dim_not_contiguous, c->q.nb[3] = 8; c->q.nb[2] = 64; c->q.nb[1] = 192; c->q.nb[0] = 768)
M(rows_overlap, c->k.nb[2] = 16)
M(out_rows_overlap, c->o.nb[2] = 8)
M(huge_shape, c->q.ne[0] = INT64_C(1) << 40; c->k.ne[0] = INT64_C(1) << 40; c->o.ne[0] = INT64_C(1) << 40;
  c->q.nb[0] = INT64_C(1) << 30; c->k.nb[0] = INT64_C(1) << 30; c->o.nb[0] = INT64_C(1) << 30)
/* 3 * 2^62 + 2 * 2^62 bytes: past SIZE_MAX on 64-bit hosts */
M(stride_overflow, c->q.nb[1] = (INT64_MAX / 8) * 4; c->q.nb[2] = (INT64_MAX / 8) * 4 + 4 * 8)
M(bad_dtype, c->q.dtype = (ropeqk_dtype)9)
M(f16_output, c->o.dtype = ROPEQK_F16; c->o = ropeqk_tensor_bhsd(ROPEQK_F16, 1, 4, 3, 5))
M(f64_input, c->k = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 2, 5, 8))
M(negative_base, c->p.base = -1.0)
M(nan_base, c->p.base = NAN)
M(inf_scale, c->p.scale = INFINITY)
M(bad_layout, c->p.layout = (ropeqk_layout)7)
M(offset_past_int32, c->p.q_pos_offset = INT32_MAX - 1)
M(tiny_base, c->p.base = 1e-300)
M(helper_strides_past_int64, c->q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, INT64_MAX, 8);
  c->o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, INT64_MAX, 5))
M(offset_below_int32, c->p.k_pos_offset = (int64_t)INT32_MIN - 1)

static const struct {
    const char *name;
    mutator m;
    ropeqk_status want;
} cases[] = {
    {"odd rotary dim", odd_rotary, ROPEQK_ERR_BAD_ROTARY_DIM},
    {"rotary dim > D", rotary_too_big, ROPEQK_ERR_BAD_ROTARY_DIM},
    {"negative rotary dim", rotary_negative, ROPEQK_ERR_BAD_ROTARY_DIM},
    {"Hq % Hkv != 0", heads_not_multiple, ROPEQK_ERR_BAD_HEADS},
    {"zero rows", zero_rows, ROPEQK_ERR_BAD_SHAPE},
    {"negative size", negative_dim, ROPEQK_ERR_BAD_SHAPE},
    {"batch mismatch", batch_mismatch, ROPEQK_ERR_BAD_SHAPE},
    {"head dim mismatch", headdim_mismatch, ROPEQK_ERR_BAD_SHAPE},
    {"output shape mismatch", out_shape_mismatch, ROPEQK_ERR_BAD_SHAPE},
    {"negative stride", negative_stride, ROPEQK_ERR_BAD_STRIDES},
    {"misaligned stride", misaligned_stride, ROPEQK_ERR_BAD_STRIDES},
    {"head dim not contiguous", head_dim_not_contiguous, ROPEQK_ERR_BAD_STRIDES},
    {"rows overlap", rows_overlap, ROPEQK_ERR_OVERLAP},
    {"output rows overlap", out_rows_overlap, ROPEQK_ERR_OVERLAP},
    {"element count overflows", huge_shape, ROPEQK_ERR_OVERFLOW},
    {"byte extent overflows", stride_overflow, ROPEQK_ERR_OVERFLOW},
    {"unknown dtype", bad_dtype, ROPEQK_ERR_BAD_DTYPE},
    {"f16 output", f16_output, ROPEQK_ERR_BAD_DTYPE},
    {"f64 input", f64_input, ROPEQK_ERR_BAD_DTYPE},
    {"negative base", negative_base, ROPEQK_ERR_BAD_PARAM},
    {"NaN base", nan_base, ROPEQK_ERR_BAD_PARAM},
    {"infinite scale", inf_scale, ROPEQK_ERR_BAD_PARAM},
    {"unknown layout", bad_layout, ROPEQK_ERR_BAD_PARAM},
    {"offset + row past INT32_MAX", offset_past_int32, ROPEQK_ERR_POSITION_RANGE},
    {"offset below INT32_MIN", offset_below_int32, ROPEQK_ERR_POSITION_RANGE},
    {"base so small the frequencies overflow", tiny_base, ROPEQK_ERR_BAD_PARAM},
    {"descriptor helper strides past INT64_MAX", helper_strides_past_int64, ROPEQK_ERR_OVERFLOW},
};
#define N_INVALID (sizeof cases / sizeof cases[0])

/* Host buffers big enough for any valid mutation; the output is pre-filled with a canary. */
static float qbuf[4096], kbuf[4096], obuf[4096];

static void fill(void)
{
    for (int i = 0; i < 4096; i++) {
        qbuf[i] = (float)i * 1e-3f;
        kbuf[i] = (float)i * -1e-3f;
        obuf[i] = 12345.0f;
    }
}

static void expect_untouched(const char *what)
{
    for (int i = 0; i < 4096; i++)
        if (obuf[i] != 12345.0f) {
            cr_expect_fail("%s: output element %d changed", what, i);
            return;
        }
}

Test(invalid, scalar_path_statuses)
{
    for (size_t i = 0; i < N_INVALID; i++) {
        th_call c = th_valid_call();
        cases[i].m(&c);
        fill();
        ropeqk_status st = ropeqk_scores_ref(&c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf);
        cr_expect_eq(st, cases[i].want, "%s: got %d (%s), want %d", cases[i].name, st, ropeqk_status_string(st),
                     cases[i].want);
        expect_untouched(cases[i].name);
    }
    th_call c = th_valid_call();
    fill();
    cr_expect_eq(ropeqk_scores_ref(&c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf), ROPEQK_SUCCESS);
    cr_expect_eq(ropeqk_scores_ref(NULL, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_scores_ref(&c.p, NULL, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_scores_ref(&c.p, &c.q, NULL, &c.k, kbuf, NULL, NULL, &c.o, obuf), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_scores_ref(&c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, NULL), ROPEQK_ERR_NULL_POINTER);
}

Test(invalid, device_path_statuses)
{
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    for (size_t i = 0; i < N_INVALID; i++) {
        th_call c = th_valid_call();
        cases[i].m(&c);
        fill();
        ropeqk_status st = ropeqk_scores(ctx, &c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf);
        cr_expect_eq(st, cases[i].want, "%s: got %d (%s)", cases[i].name, st, ropeqk_status_string(st));
        expect_untouched(cases[i].name);
    }
    th_call c = th_valid_call();
    cr_expect_eq(ropeqk_scores(NULL, &c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf), ROPEQK_ERR_NULL_POINTER);
    ropeqk_ctx_destroy(ctx);
}

Test(invalid, status_strings_are_distinct_and_named)
{
    for (int s = ROPEQK_ERR_SEQ_LENGTH; s <= ROPEQK_ERR_NULL_POINTER; s++) {
        const char *a = ropeqk_status_string(s);
        cr_expect(strcmp(a, "unknown status") != 0, "status %d has no string", s);
        for (int t = s + 1; t <= ROPEQK_ERR_NULL_POINTER; t++)
            cr_expect(strcmp(a, ropeqk_status_string(t)) != 0, "%d and %d share a string", s, t);
    }
    cr_expect_str_eq(ropeqk_status_string(0), "success");
    /* a backend's own codes are not statuses: opencl_invalid/backend_codes_are_not_statuses */
}

/* Found by fuzz_validate: nb * ne of the outermost dim exceeds int64 although the extent fits. The
 * view is legal (validation passes, UBSan must stay quiet); a buffer that small is then refused. */
Test(invalid, outermost_block_past_int64)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    ropeqk_tensor q = {ROPEQK_F32, {1, 1, 2, 2}, {8, 8, INT64_C(1) << 62, 4}};
    ropeqk_tensor k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, 2), o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 2, 1);
    cr_expect_eq(ropeqk_scores_ref(&p, &q, NULL, &k, NULL, NULL, NULL, &o, NULL), ROPEQK_ERR_NULL_POINTER);
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    /* a plan takes the view (the backend's one-shot calls make the same plan); a 4096-byte buffer
     * is then too small for it, on every backend */
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = p, .q = q, .k = k, .out = o};
    ropeqk_plan *pl = NULL;
    ropeqk_buffer *m = NULL;
    TH_OK(ropeqk_plan_create(ctx, &d, &pl));
    TH_OK(ropeqk_buffer_create(ctx, 4096, 0, &m));
    ropeqk_args a = {.q = {m, 0}, .k = {m, 0}, .out = {m, 1024}};
    ropeqk_event *done = NULL;
    cr_expect_eq(ropeqk_plan_run(pl, &a, NULL, 0, NULL, &done), ROPEQK_ERR_BUFFER_TOO_SMALL, "%s", ropeqk_last_error());
    cr_expect_null(done);
    ropeqk_buffer_destroy(m);
    ropeqk_plan_destroy(pl);
    ropeqk_ctx_destroy(ctx);
}
