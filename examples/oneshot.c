/* One-shot attention with host memory: the shortest way in.
 *
 *   ropeqk_ctx_create()   opens a device ($ROPEQK_DEVICE, else the first OpenCL device; "vulkan" for
 *                          the first Vulkan device) and builds nothing yet;
 *   ropeqk_attention()    uploads Q, K, V, rotates Q and K (RoPE), computes softmax(S) V, downloads
 *                          O and the log-sum-exp, blocking.
 *
 * The result is checked against the library's fp64 reference path (ropeqk_attention_ref) with the
 * attention metric of docs/conventions.md. Exit status: 0 when within 1e-5, 1 otherwise, 77 (skip)
 * when there is no device. */
#include <ropeqk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, HQ = 8, HKV = 2, SQ = 16, SK = 80, D = 64, DV = 64 };

/* inputs in [-1, 1): any generator does; this one is xorshift64 */
static void fill(float *x, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        x[i] = (float)((double)(*s >> 11) * 0x1.0p-52 - 1.0);
    }
}

int main(void)
{
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(NULL, &ctx);
    if (st == ROPEQK_ERR_NO_DEVICE) {
        printf("no device (%s): skipped\n", ropeqk_last_error());
        return 77;
    }
    if (st) {
        fprintf(stderr, "ropeqk_ctx_create: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        return 1;
    }
    printf("device: %s\n", ropeqk_ctx_device_description(ctx));

    /* Llama-style: half-split pairs, theta 500000, causal; the 16 queries are the last 16 tokens */
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = ROPEQK_HALF_SPLIT;
    p.base = 500000;
    p.causal = 1;
    p.q_pos_offset = SK - SQ;

    /* contiguous [B, H, S, D] views; GQA: 8 query heads share 2 key/value heads */
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D);
    ropeqk_tensor k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D);
    ropeqk_tensor v = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, DV);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, DV);
    ropeqk_tensor lse = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, 1);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, DV);
    ropeqk_tensor lse64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, HQ, SQ, 1);

    float *qd = malloc(sizeof(float) * B * HQ * SQ * D), *kd = malloc(sizeof(float) * B * HKV * SK * D);
    float *vd = malloc(sizeof(float) * B * HKV * SK * DV), *od = malloc(sizeof(float) * B * HQ * SQ * DV);
    float *ld = malloc(sizeof(float) * B * HQ * SQ);
    double *o64d = malloc(sizeof(double) * B * HQ * SQ * DV), *l64d = malloc(sizeof(double) * B * HQ * SQ);
    int rc = 1;
    if (!qd || !kd || !vd || !od || !ld || !o64d || !l64d) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    uint64_t seed = 20261123;
    fill(qd, (size_t)B * HQ * SQ * D, &seed);
    fill(kd, (size_t)B * HKV * SK * D, &seed);
    fill(vd, (size_t)B * HKV * SK * DV, &seed);

    /* the device: one call, positions from the offsets (NULL arrays) */
    st = ropeqk_attention(ctx, &p, &q, qd, &k, kd, &v, vd, NULL, NULL, &o, od, &lse, ld);
    if (st) {
        fprintf(stderr, "ropeqk_attention: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        goto done;
    }

    /* the same in fp64 on the host, and the metric */
    st = ropeqk_attention_ref(&p, &q, qd, &k, kd, &v, vd, NULL, NULL, &o64, o64d, &lse64, l64d);
    double err = 0, lse_err = 0;
    int64_t mismatch = 0;
    if (!st)
        st = ropeqk_attention_max_error(&v, vd, &o, od, &o64, o64d, &lse, ld, &lse64, l64d, &err, &lse_err,
                                        &mismatch);
    if (st) {
        fprintf(stderr, "reference: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        goto done;
    }
    printf("attention B=%d Hq=%d Hkv=%d Sq=%d Sk=%d D=%d: max error %.3g, LSE %.3g, %lld mismatched rows\n", B, HQ,
           HKV, SQ, SK, D, err, lse_err, (long long)mismatch);
    rc = err <= 1e-5 && lse_err <= 1e-5 && mismatch == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "FAILED: the device result is off the fp64 reference (seed 20261123)\n");
done:
    free(qd), free(kd), free(vd), free(od), free(ld), free(o64d), free(l64d);
    ropeqk_ctx_destroy(ctx);
    return rc;
}
