/* Every invalid argument gets its own status, from the scalar path, the host convenience call and
 * the enqueue call alike, and leaves the output untouched. */
#include "harness.h"
#if RQ_HAVE_OPENCL
#include "ropeqk_opencl.h"
#endif

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

TestSuite(invalid, .fini = th_leak_check);

typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o;
} call;

static call valid(void)
{
    call c;
    ropeqk_default_params(&c.p);
    c.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 4, 3, 8);
    c.k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 5, 8);
    c.o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 4, 3, 5);
    return c;
}

typedef void (*mutator)(call *);
#define M(name, body) static void name(call *c) { body; }
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
        call c = valid();
        cases[i].m(&c);
        fill();
        ropeqk_status st = ropeqk_scores_ref(&c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf);
        cr_expect_eq(st, cases[i].want, "%s: got %d (%s), want %d", cases[i].name, st, ropeqk_status_string(st),
                     cases[i].want);
        expect_untouched(cases[i].name);
    }
    call c = valid();
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
        call c = valid();
        cases[i].m(&c);
        fill();
        ropeqk_status st = ropeqk_scores(ctx, &c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf);
        cr_expect_eq(st, cases[i].want, "%s: got %d (%s)", cases[i].name, st, ropeqk_status_string(st));
        expect_untouched(cases[i].name);
    }
    call c = valid();
    cr_expect_eq(ropeqk_scores(NULL, &c.p, &c.q, qbuf, &c.k, kbuf, NULL, NULL, &c.o, obuf), ROPEQK_ERR_NULL_POINTER);
    ropeqk_ctx_destroy(ctx);
}

#if RQ_HAVE_OPENCL
Test(invalid, enqueue_buffer_checks)
{
    char why[256];
    ropeqk_ctx *ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!ctx)
        cr_skip_test("%s", why);
    TH_SKIP_IF_VULKAN(ctx);
    cl_context cx = ropeqk_opencl_context(ctx);
    cl_int err;
    cl_mem big = clCreateBuffer(cx, CL_MEM_READ_WRITE, 8192, NULL, &err);
    cl_mem small = clCreateBuffer(cx, CL_MEM_READ_WRITE, 64, NULL, &err);
    cl_mem out = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    float canary = 12345.0f;
    clEnqueueFillBuffer(ropeqk_opencl_queue(ctx), out, &canary, 4, 0, 4096, 0, NULL, NULL);
    call c = valid();
    ropeqk_opencl_mem q = {big, 0}, k = {big, 4096}, o = {out, 0}, none = {NULL, 0};
    /* q: 96 floats = 384 bytes; k: 80 floats = 320 bytes; out: 60 floats = 240 bytes */
    struct {
        const char *name;
        ropeqk_opencl_mem q, k, qp, kp, o;
        ropeqk_status want;
    } t[] = {
        {"q past the end", {small, 0}, k, none, none, o, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"k offset past the end", q, {big, 8000}, none, none, o, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"offset beyond size", q, {big, 9000}, none, none, o, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"out too small", q, k, none, none, {small, 0}, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"misaligned offset", {big, 2}, k, none, none, o, ROPEQK_ERR_BAD_STRIDES},
        {"q positions too short", q, k, {small, 56}, none, o, ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"k positions misaligned", q, k, none, {small, 1}, o, ROPEQK_ERR_BAD_STRIDES},
        {"output overlaps q", q, k, none, none, {big, 200}, ROPEQK_ERR_OVERLAP},
        {"output overlaps k", q, k, none, none, {big, 4096 + 300}, ROPEQK_ERR_OVERLAP},
        {"output overlaps positions", q, k, {out, 0}, none, o, ROPEQK_ERR_OVERLAP},
        {"NULL q buffer", {NULL, 0}, k, none, none, o, ROPEQK_ERR_NULL_POINTER},
        {"NULL out buffer", q, k, none, none, {NULL, 0}, ROPEQK_ERR_NULL_POINTER},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ropeqk_status st = ropeqk_opencl_enqueue(ctx, NULL, &c.p, &c.q, t[i].q, &c.k, t[i].k, t[i].qp, t[i].kp, &c.o, t[i].o,
                                          0, NULL, NULL);
        cr_expect_eq(st, t[i].want, "%s: got %d (%s)", t[i].name, st, ropeqk_status_string(st));
    }
    cr_expect_eq(ropeqk_opencl_enqueue(ctx, NULL, &c.p, &c.q, q, &c.k, k, none, none, &c.o, o, 1, NULL, NULL),
                 ROPEQK_ERR_NULL_POINTER);
    float host[1024];
    clEnqueueReadBuffer(ropeqk_opencl_queue(ctx), out, CL_TRUE, 0, 4096, host, 0, NULL, NULL);
    for (int i = 0; i < 1024; i++)
        cr_expect_eq(host[i], canary, "output changed at %d", i);
    cr_expect_eq(ropeqk_opencl_enqueue(ctx, NULL, &c.p, &c.q, q, &c.k, k, none, none, &c.o, o, 0, NULL, NULL), 0);
    clFinish(ropeqk_opencl_queue(ctx));
    clReleaseMemObject(big);
    clReleaseMemObject(small);
    clReleaseMemObject(out);
    ropeqk_ctx_destroy(ctx);
}

#endif

Test(invalid, status_strings_are_distinct_and_named)
{
    for (int s = ROPEQK_ERR_SEQ_LENGTH; s <= ROPEQK_ERR_NULL_POINTER; s++) {
        const char *a = ropeqk_status_string(s);
        cr_expect(strcmp(a, "unknown status") != 0, "status %d has no string", s);
        for (int t = s + 1; t <= ROPEQK_ERR_NULL_POINTER; t++)
            cr_expect(strcmp(a, ropeqk_status_string(t)) != 0, "%d and %d share a string", s, t);
    }
    cr_expect_str_eq(ropeqk_status_string(0), "success");
#if RQ_HAVE_OPENCL
    /* statuses are the library's own: a backend code is not one, and is named by the backend */
    cr_expect_str_eq(ropeqk_status_string(CL_OUT_OF_RESOURCES), "unknown status");
    cr_expect_str_eq(ropeqk_opencl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
    cr_expect_null(ropeqk_opencl_error_name(-4242));
#endif
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
#if RQ_HAVE_OPENCL
    TH_SKIP_IF_VULKAN(ctx);
    cl_int err;
    cl_mem m = clCreateBuffer(ropeqk_opencl_context(ctx), CL_MEM_READ_WRITE, 4096, NULL, &err);
    ropeqk_opencl_mem none = {NULL, 0};
    cr_expect_eq(ropeqk_opencl_enqueue(ctx, NULL, &p, &q, (ropeqk_opencl_mem){m, 0}, &k, (ropeqk_opencl_mem){m, 0}, none, none, &o,
                                (ropeqk_opencl_mem){m, 1024}, 0, NULL, NULL),
                 ROPEQK_ERR_BUFFER_TOO_SMALL);
    clReleaseMemObject(m);
    ropeqk_ctx_destroy(ctx);
#else
    ropeqk_ctx_destroy(ctx);
    cr_skip_test("OpenCL API (ropeqk_opencl_enqueue): nothing to test without OpenCL");
#endif
}
