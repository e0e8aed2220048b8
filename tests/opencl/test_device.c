/* OpenCL's own entry points on the device path (suite opencl_device): ropeqk_opencl_enqueue on the
 * caller's cl_mem with offsets, positions and a user event to wait for, a borrowed cl_context and
 * queue, device specs through ropeqk_opencl_select_device, and a failed program build's status and
 * backend code. Built with the OpenCL backend only (tests/opencl/meson.build); the device path on
 * either backend is tests/neutral/test_device.c's. Also run under tests/strictcl's release shim. */
#include "harness.h"
#include "ropeqk_opencl.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(opencl_device, .init = th_ctx_init, .fini = th_ctx_fini);

/* tests/neutral/test_device.c's base case */
/* ---- the enqueue API with device buffers, offsets, positions and events -------------------- */

typedef struct {
    ropeqk_tensor q, k, o;
    cl_mem bq, bk, bo, bqp, bkp;
    size_t qoff, koff, ooff;
} dev_setup;

static void make_dev(dev_setup *s, cl_context cx, const float *qd, const float *kd, const int32_t *qp,
                     const int32_t *kp)
{
    cl_int err;
    s->q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 5, 8);
    s->k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 6, 8);
    s->o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 5, 6);
    s->qoff = 64; s->koff = 128; s->ooff = 256;
    s->bq = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    s->bk = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    s->bo = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    s->bqp = clCreateBuffer(cx, CL_MEM_READ_WRITE, 64, NULL, &err);
    s->bkp = clCreateBuffer(cx, CL_MEM_READ_WRITE, 64, NULL, &err);
    cl_command_queue qu = ropeqk_opencl_queue(th_ctx);
    float fill = -7.0f;
    clEnqueueFillBuffer(qu, s->bo, &fill, sizeof fill, 0, 4096, 0, NULL, NULL);
    clEnqueueWriteBuffer(qu, s->bq, CL_TRUE, s->qoff, 80 * 4, qd, 0, NULL, NULL);
    clEnqueueWriteBuffer(qu, s->bk, CL_TRUE, s->koff, 48 * 4, kd, 0, NULL, NULL);
    clEnqueueWriteBuffer(qu, s->bqp, CL_TRUE, 8, 5 * 4, qp, 0, NULL, NULL);
    clEnqueueWriteBuffer(qu, s->bkp, CL_TRUE, 4, 6 * 4, kp, 0, NULL, NULL);
}

static void free_dev(dev_setup *s)
{
    clReleaseMemObject(s->bq); clReleaseMemObject(s->bk); clReleaseMemObject(s->bo);
    clReleaseMemObject(s->bqp); clReleaseMemObject(s->bkp);
}

Test(opencl_device, enqueue_with_offsets_positions_and_events)
{
    TH_SKIP_ON_VULKAN(th_ctx, "ropeqk_opencl_enqueue with cl_event wait lists");
    float qd[80], kd[48];
    int32_t qp[5] = {900, 3, 77, 5, 1 << 20}, kp[6] = {0, 5, 77, 1 << 20, 2, 901};
    uint64_t rng = 11;
    for (int i = 0; i < 80; i++) qd[i] = (float)rqs_uniform(&rng);
    for (int i = 0; i < 48; i++) kd[i] = (float)rqs_uniform(&rng);
    dev_setup s;
    make_dev(&s, ropeqk_opencl_context(th_ctx), qd, kd, qp, kp);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1;
    p.layout = ROPEQK_HALF_SPLIT;
    cl_int err;
    cl_event gate = clCreateUserEvent(ropeqk_opencl_context(th_ctx), &err), done = NULL;
    ropeqk_status st = ropeqk_opencl_enqueue(th_ctx, NULL, &p, &s.q, (ropeqk_opencl_mem){s.bq, s.qoff}, &s.k, (ropeqk_opencl_mem){s.bk, s.koff},
                                      (ropeqk_opencl_mem){s.bqp, 8}, (ropeqk_opencl_mem){s.bkp, 4}, &s.o,
                                      (ropeqk_opencl_mem){s.bo, s.ooff}, 1, &gate, &done);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_status_string(st));
    cr_assert_not_null(done);
    clSetUserEventStatus(gate, CL_COMPLETE);
    float out[1024];
    clEnqueueReadBuffer(ropeqk_opencl_queue(th_ctx), s.bo, CL_TRUE, 0, 4096, out, 1, &done, NULL);
    double ref[60];
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, 2, 5, 6);
    cr_assert_eq(ropeqk_scores_ref(&p, &s.q, qd, &s.k, kd, qp, kp, &o64, ref), ROPEQK_SUCCESS);
    double e;
    int64_t mm;
    cr_assert_eq(ropeqk_max_error(&p, &s.q, qd, &s.k, kd, &s.o, out + s.ooff / 4, &o64, ref, &e, &mm), 0);
    cr_expect(e <= 1e-5, "error %g", e);
    cr_expect_eq(mm, 0);
    for (size_t i = 0; i < 1024; i++)
        if (i < s.ooff / 4 || i >= s.ooff / 4 + 60)
            cr_expect_eq(out[i], -7.0f, "byte %zu outside the output view changed", i * 4);
    clReleaseEvent(done);
    clReleaseEvent(gate);
    free_dev(&s);
}

Test(opencl_device, borrowed_context_and_queue_survive_destroy)
{
    TH_SKIP_ON_VULKAN(th_ctx, "a borrowed cl_context and queue (test_vulkan.c borrows Vulkan objects)");
    cl_platform_id pl;
    cl_device_id dev;
    cr_assert_eq(ropeqk_opencl_select_device(NULL, &pl, &dev, NULL, 0), ROPEQK_SUCCESS);
    cl_int err;
    cl_context cx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_command_queue qu = clCreateCommandQueue(cx, dev, 0, &err);
    ropeqk_opencl_ctx_params cp = {.context = cx, .queue = qu};
    ropeqk_ctx *b = NULL;
    cr_assert_eq(ropeqk_opencl_ctx_create(&cp, &b), ROPEQK_SUCCESS);
    cr_expect_eq(ropeqk_opencl_context(b), cx);
    th_case c = th_case_gqa();
    th_result r = th_run(b, &c, 12);
    cr_expect_eq(r.status, 0);
    cr_expect(r.max_err <= 1e-5);
    ropeqk_ctx_destroy(b);
    /* still ours and usable */
    cl_mem m = clCreateBuffer(cx, CL_MEM_READ_WRITE, 16, NULL, &err);
    cr_expect_eq(err, CL_SUCCESS);
    cr_expect_eq(clFinish(qu), CL_SUCCESS);
    clReleaseMemObject(m);
    clReleaseCommandQueue(qu);
    clReleaseContext(cx);
    /* half a borrow is an error */
    ropeqk_opencl_ctx_params half = {.context = cx};
    cr_expect_eq(ropeqk_opencl_ctx_create(&half, &b), ROPEQK_ERR_NULL_POINTER);
    cr_expect_null(b);
}

Test(opencl_device, device_spec_selection)
{
    cl_platform_id pl;
    cl_device_id d0, d1;
    char why[128];
    cr_assert_eq(ropeqk_opencl_select_device("0:0", &pl, &d0, why, sizeof why), ROPEQK_SUCCESS);
    cr_expect(strstr(why, "0:0") != NULL, "%s", why);
    char name[256];
    clGetDeviceInfo(d0, CL_DEVICE_NAME, sizeof name, name, NULL);
    name[3] = '\0';
    cr_expect_eq(ropeqk_opencl_select_device(name, &pl, &d1, NULL, 0), ROPEQK_SUCCESS);
    cr_expect_eq(ropeqk_opencl_select_device("99:0", &pl, &d1, NULL, 0), ROPEQK_ERR_NO_DEVICE);
    cr_expect_eq(ropeqk_opencl_select_device("no such device name", &pl, &d1, NULL, 0), ROPEQK_ERR_NO_DEVICE);
    setenv("ROPEQK_DEVICE", "42:42", 1);
    ropeqk_ctx *x = NULL;
    cr_expect_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_ERR_NO_DEVICE);
    cr_expect_null(x);
}

Test(opencl_device, build_failure_returns_status_and_log)
{
    TH_SKIP_ON_VULKAN(th_ctx, "OpenCL program build failures (ROPEQK_BUILD_OPTIONS)");
    setenv("ROPEQK_BUILD_OPTIONS", "-DRQ_TQ=(", 1);
    ropeqk_ctx *x = NULL;
    cr_assert_eq(ropeqk_ctx_create(NULL, &x), ROPEQK_SUCCESS);
    cr_expect_eq(ropeqk_ctx_warmup(x), ROPEQK_ERR_BUILD);
    const char *backend = NULL;
    cr_expect_eq(ropeqk_ctx_backend_error(x, &backend), CL_BUILD_PROGRAM_FAILURE);
    cr_expect_str_eq(backend, "OpenCL");
    cr_expect(ropeqk_ctx_build_log(x, NULL, 0) > 0, "build log is empty");
    th_case c = th_case_gqa();
    th_result r = th_run(x, &c, 13);
    cr_expect_eq(r.status, ROPEQK_ERR_BUILD);
    ropeqk_ctx_destroy(x);
}
