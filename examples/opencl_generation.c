/* A generation loop on your own OpenCL context and queue.
 *
 * The application owns the cl_context, the queue and the KV cache buffers; ropeqk borrows the
 * context and queue (ropeqk_opencl_ctx_create) and never destroys them. One attention plan serves
 * the whole loop: it is a decode plan (max_keys = the cache's capacity), and each token's call says
 * how many keys are cached and where the positions start (a ropeqk_step). Per token the loop writes
 * that token's K and V rows into the cache, runs the plan on the queue, and reads O and the LSE.
 *
 * Every step is checked against the fp64 reference path (ropeqk_attention_ref on the first n cached
 * keys). Exit status: 0 when every step is within 1e-5, 1 otherwise, 77 (skip) without an OpenCL
 * device. */
#include <ropeqk_opencl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { HQ = 8, HKV = 2, D = 64, DV = 64, MAXK = 256, TOKENS = 200, WINDOW = 96 };

static void fill(float *x, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        x[i] = (float)((double)(*s >> 11) * 0x1.0p-52 - 1.0);
    }
}

int main(void)
{
    /* the application's own OpenCL objects: the first device of the first platform that has one */
    cl_platform_id plats[8];
    cl_uint np = 0;
    cl_device_id dev = NULL;
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS)
        np = 0;
    for (cl_uint i = 0; i < np && !dev; i++)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS)
            dev = NULL;
    if (!dev) {
        printf("no OpenCL device: skipped\n");
        return 77;
    }
    cl_int err;
    cl_context cx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue queue = cx ? clCreateCommandQueue(cx, dev, 0, &err) : NULL;
    ropeqk_opencl_ctx_params cp = {.context = cx, .queue = queue};
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = queue ? ropeqk_opencl_ctx_create(&cp, &ctx) : ROPEQK_ERR_NO_DEVICE;
    if (st) {
        fprintf(stderr, "OpenCL context: %d; ropeqk_opencl_ctx_create: %s: %s\n", err, ropeqk_status_string(st),
                ropeqk_last_error());
        if (queue)
            clReleaseCommandQueue(queue);
        if (cx)
            clReleaseContext(cx);
        return 1;
    }
    printf("device: %s\n", ropeqk_ctx_device_description(ctx));

    /* one new query token per step; the caches hold up to MAXK tokens ([1, Hkv, MAXK, D], BHSD) */
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .max_keys = MAXK, .with_lse = 1};
    ropeqk_default_params(&d.params);
    d.params.causal = 1;
    d.params.window = WINDOW; /* a sliding window: the oldest keys drop out of the softmax */
    d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, D);
    d.k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HKV, MAXK, D);
    d.v = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HKV, MAXK, DV);
    d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, DV);
    d.lse = ropeqk_tensor_bhsd(ROPEQK_F32, 1, HQ, 1, 1);
    ropeqk_plan *plan = NULL;
    if ((st = ropeqk_plan_create(ctx, &d, &plan))) {
        fprintf(stderr, "ropeqk_plan_create: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        ropeqk_ctx_destroy(ctx);
        clReleaseCommandQueue(queue);
        clReleaseContext(cx);
        return 1;
    }

    static float hq[HQ * D], hk[HKV * MAXK * D], hv[HKV * MAXK * DV], ho[HQ * DV], hl[HQ];
    static double o64[HQ * DV], l64[HQ];
    cl_mem bq = clCreateBuffer(cx, CL_MEM_READ_ONLY, sizeof hq, NULL, &err);
    cl_mem bk = clCreateBuffer(cx, CL_MEM_READ_ONLY, sizeof hk, NULL, &err);
    cl_mem bv = clCreateBuffer(cx, CL_MEM_READ_ONLY, sizeof hv, NULL, &err);
    cl_mem bo = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, sizeof ho, NULL, &err);
    cl_mem bl = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, sizeof hl, NULL, &err);
    ropeqk_opencl_args args = {.q = {bq, 0}, .k = {bk, 0}, .v = {bv, 0}, .out = {bo, 0}, .lse = {bl, 0}};
    uint64_t seed = 20261124;
    double worst = 0, worst_lse = 0;
    int bad = !(bq && bk && bv && bo && bl);
    for (int t = 0; t < TOKENS && !bad; t++) {
        /* this token's query, and its key and value rows appended to the caches at index t */
        fill(hq, HQ * D, &seed);
        for (int h = 0; h < HKV; h++) {
            fill(hk + ((size_t)h * MAXK + (size_t)t) * D, D, &seed);
            fill(hv + ((size_t)h * MAXK + (size_t)t) * DV, DV, &seed);
            size_t ko = ((size_t)h * MAXK + (size_t)t) * D * 4, vo = ((size_t)h * MAXK + (size_t)t) * DV * 4;
            bad |= clEnqueueWriteBuffer(queue, bk, CL_FALSE, ko, D * 4, (char *)hk + ko, 0, NULL, NULL) ||
                   clEnqueueWriteBuffer(queue, bv, CL_FALSE, vo, DV * 4, (char *)hv + vo, 0, NULL, NULL);
        }
        bad |= clEnqueueWriteBuffer(queue, bq, CL_FALSE, 0, sizeof hq, hq, 0, NULL, NULL);
        /* t + 1 keys at positions 0..t, the query at position t */
        ropeqk_step step = {.n_keys = t + 1, .q_pos_offset = t, .k_pos_offset = 0};
        cl_event done = NULL;
        st = ropeqk_opencl_plan_enqueue(plan, queue, &args, &step, 0, NULL, &done);
        if (st || bad) {
            fprintf(stderr, "token %d: %s: %s\n", t, ropeqk_status_string(st), ropeqk_last_error());
            bad = 1;
            break;
        }
        bad |= clEnqueueReadBuffer(queue, bo, CL_FALSE, 0, sizeof ho, ho, 1, &done, NULL) ||
               clEnqueueReadBuffer(queue, bl, CL_TRUE, 0, sizeof hl, hl, 1, &done, NULL);
        clReleaseEvent(done);

        /* the fp64 reference on views of the first t + 1 keys (the cache's strides, fewer rows) */
        ropeqk_params rp = d.params;
        rp.q_pos_offset = t;
        ropeqk_tensor k = d.k, v = d.v, to64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, HQ, 1, DV);
        ropeqk_tensor tl64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, HQ, 1, 1);
        k.ne[2] = v.ne[2] = t + 1;
        double e = 0, el = 0;
        int64_t mism = 0;
        st = ropeqk_attention_ref(&rp, &d.q, hq, &k, hk, &v, hv, NULL, NULL, &to64, o64, &tl64, l64);
        if (!st)
            st = ropeqk_attention_max_error(&v, hv, &d.out, ho, &to64, o64, &d.lse, hl, &tl64, l64, &e, &el, &mism);
        worst = e > worst ? e : worst;
        worst_lse = el > worst_lse ? el : worst_lse;
        if (st || bad || e > 1e-5 || el > 1e-5 || mism) {
            fprintf(stderr, "FAILED at token %d (seed 20261124): %s, error %.3g, LSE %.3g, %lld mismatched rows\n", t,
                    ropeqk_status_string(st), e, el, (long long)mism);
            bad = 1;
        }
    }
    printf("%d tokens, one decode plan: max error %.3g, LSE %.3g\n", TOKENS, worst, worst_lse);
    ropeqk_plan_destroy(plan);
    ropeqk_ctx_destroy(ctx); /* the context and queue stay the application's */
    cl_mem bufs[] = {bq, bk, bv, bo, bl};
    for (int i = 0; i < 5; i++)
        if (bufs[i])
            clReleaseMemObject(bufs[i]);
    clReleaseCommandQueue(queue);
    clReleaseContext(cx);
    return bad ? 1 : 0;
}
