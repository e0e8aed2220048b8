/* OpenCL's own calls refuse invalid arguments (suite opencl_invalid): ropeqk_opencl_enqueue on the
 * caller's cl_mem (buffers too small, misaligned offsets, overlaps, NULLs) with the output left
 * untouched, and OpenCL's codes named by ropeqk_opencl_error_name, never by ropeqk_status_string.
 * Built with the OpenCL backend only (tests/opencl/meson.build); the statuses on every backend are
 * tests/neutral/test_invalid.c's. */
#include "harness.h"
#include "ropeqk_opencl.h"

#include <criterion/criterion.h>
#include <string.h>

TestSuite(opencl_invalid, .fini = th_leak_check);

Test(opencl_invalid, enqueue_buffer_checks)
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
    th_call c = th_valid_call();
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

/* statuses are the library's own: a backend code is not one, and is named by the backend */
Test(opencl_invalid, backend_codes_are_not_statuses)
{
    cr_expect_str_eq(ropeqk_status_string(CL_OUT_OF_RESOURCES), "unknown status");
    cr_expect_str_eq(ropeqk_opencl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
    cr_expect_null(ropeqk_opencl_error_name(-4242));
}
