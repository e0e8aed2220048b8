/* Element loads for the storage types. Math is always f32; f16 and bf16 are storage only, so no
 * cl_khr_fp16 is needed (vload_half is core OpenCL). Offsets are in bytes, as in the descriptors. */

static inline float rq_load_f32(__global const uchar *base, long off)
{
    return *(__global const float *)(base + off);
}

static inline float rq_load_f16(__global const uchar *base, long off)
{
    return vload_half(0, (__global const half *)(base + off));
}

static inline float rq_load_bf16(__global const uchar *base, long off)
{
    return as_float((uint)(*(__global const ushort *)(base + off)) << 16);
}
