/* The GPU attention kernels' output store (cl/attention_fa2.cl and cl/attention_gpu.cl; a program holds
 * one of them, cl/program.cl includes this file before either). */
#ifndef RQ_ATTN_STORE_CL
#define RQ_ATTN_STORE_CL

/* bf16 bits of x, rounded to nearest even; NaN stays NaN (attention.cl's rule) */
static inline ushort rq_as_bf16(float x)
{
    uint u = as_uint(x);
    return isnan(x) ? (ushort)((u >> 16) | 0x40u) : (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Stores n (1..4) elements of x at out + off in the output's storage type (0 f32, 1 f16, 2 bf16). */
static inline void rq_as_store4(__global uchar *out, long off, int dtype, float4 x, int n)
{
    if (dtype == 0) {
        __global float *p = (__global float *)(out + off);
        if (n == 4) {
            vstore4(x, 0, p);
        } else {
            p[0] = x.x;
            if (n > 1)
                p[1] = x.y;
            if (n > 2)
                p[2] = x.z;
        }
    } else if (dtype == 1) {
        __global half *p = (__global half *)(out + off);
        if (n == 4) {
            vstore_half4_rte(x, 0, p);
        } else {
            vstore_half_rte(x.x, 0, p);
            if (n > 1)
                vstore_half_rte(x.y, 1, p);
            if (n > 2)
                vstore_half_rte(x.z, 2, p);
        }
    } else {
        __global ushort *p = (__global ushort *)(out + off);
        ushort4 h = (ushort4)(rq_as_bf16(x.x), rq_as_bf16(x.y), rq_as_bf16(x.z), rq_as_bf16(x.w));
        if (n == 4) {
            vstore4(h, 0, p);
        } else {
            p[0] = h.x;
            if (n > 1)
                p[1] = h.y;
            if (n > 2)
                p[2] = h.z;
        }
    }
}

#endif
