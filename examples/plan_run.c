/* An attention plan run on device memory, the same code on every backend (ropeqk.h only), checked
 * against the library's fp64 path. Device: $ROPEQK_DEVICE (an OpenCL device, "vulkan", ...) or the
 * first. Exit 0 within 1e-5, 1 otherwise, 77 (a skip) without a device. */
#include <ropeqk.h>
#include <stdio.h>

enum { B = 1, HQ = 8, HKV = 2, SQ = 16, SK = 80, D = 64 }; /* GQA: 8 query heads share 2 K/V heads */
static float q[B * HQ * SQ * D], k[B * HKV * SK * D], v[B * HKV * SK * D], o[B * HQ * SQ * D], lse[B * HQ * SQ];
static double o64[B * HQ * SQ * D], lse64[B * HQ * SQ];

#define TRY(call)                                                                                     \
    do {                                                                                              \
        ropeqk_status st_ = (call);                                                                   \
        if (st_) {                                                                                    \
            fprintf(stderr, "%s: %s: %s\n", #call, ropeqk_status_string(st_), ropeqk_last_error());    \
            return st_ == ROPEQK_ERR_NO_DEVICE ? 77 : 1;                                              \
        }                                                                                             \
    } while (0)

static ropeqk_status upload(ropeqk_ctx *ctx, float *x, size_t n, ropeqk_buffer **b)
{
    static unsigned long long s = 88172645463325252ull; /* xorshift values in [-1, 1) */
    for (size_t i = 0; i < n / sizeof *x; i++)
        s ^= s << 13, s ^= s >> 7, s ^= s << 17, x[i] = (float)((double)(s >> 11) * 0x1p-52 - 1.0);
    ropeqk_status st = ropeqk_buffer_create(ctx, n, 0, b); /* device-local memory */
    return st ? st : ropeqk_buffer_write(*b, 0, x, n);
}

int main(void)
{
    ropeqk_ctx *ctx;
    TRY(ropeqk_ctx_create(NULL, &ctx));
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .with_lse = 1,
                          .q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D), /* [B, H, S, D] views */
                          .k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D),
                          .v = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D),
                          .out = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D),
                          .lse = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, 1)};
    ropeqk_default_params(&d.params);
    d.params.layout = ROPEQK_HALF_SPLIT, d.params.base = 500000; /* Llama: half-split pairs */
    d.params.causal = 1, d.params.q_pos_offset = SK - SQ;         /* queries: the last 16 tokens */
    ropeqk_plan *plan;
    TRY(ropeqk_plan_create(ctx, &d, &plan)); /* validated once, kernels built once */

    ropeqk_buffer *bq, *bk, *bv, *bo, *bl;
    TRY(upload(ctx, q, sizeof q, &bq));
    TRY(upload(ctx, k, sizeof k, &bk));
    TRY(upload(ctx, v, sizeof v, &bv));
    TRY(ropeqk_buffer_create(ctx, sizeof o, 0, &bo));
    TRY(ropeqk_buffer_create(ctx, sizeof lse, 0, &bl));
    ropeqk_args a = {.q = {bq, 0}, .k = {bk, 0}, .v = {bv, 0}, .out = {bo, 0}, .lse = {bl, 0}};
    ropeqk_event *done;
    TRY(ropeqk_plan_run(plan, &a, NULL, 0, NULL, &done)); /* asynchronous, on the context's queue */
    TRY(ropeqk_event_wait(done, UINT64_MAX));             /* bounded: ROPEQK_ERR_TIMEOUT names it */
    ropeqk_event_release(done);
    TRY(ropeqk_buffer_read(bo, 0, o, sizeof o));
    TRY(ropeqk_buffer_read(bl, 0, lse, sizeof lse));

    ropeqk_tensor t64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, D), l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, 1);
    TRY(ropeqk_attention_ref(&d.params, &d.q, q, &d.k, k, &d.v, v, NULL, NULL, &t64, o64, &l64, lse64));
    double err, lerr;
    int64_t bad;
    TRY(ropeqk_attention_max_error(&d.v, v, &d.out, o, &t64, o64, &d.lse, lse, &l64, lse64, &err, &lerr, &bad));
    printf("%s: attention vs fp64: error %.3g, LSE %.3g\n", ropeqk_ctx_device_description(ctx), err, lerr);
    ropeqk_buffer_destroy(bq), ropeqk_buffer_destroy(bk), ropeqk_buffer_destroy(bv);
    ropeqk_buffer_destroy(bo), ropeqk_buffer_destroy(bl);
    ropeqk_plan_destroy(plan);
    ropeqk_ctx_destroy(ctx);
    return err <= 1e-5 && lerr <= 1e-5 && bad == 0 ? 0 : 1;
}
