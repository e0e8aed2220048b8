/* Accurate RoPE angles in single precision, without cl_khr_fp64.
 *
 * The host hands each frequency as v = inv_freq / pi in fp64, split into three floats
 * (v.x + v.y + v.z, ~72 bits). The angle in half-turns, t = p * v, is formed as a sum of parts that
 * are each reduced modulo 2 *exactly* before they are added:
 *   - p is split into ph (a multiple of 4096, 19 significant bits) and pl (< 4096): both exact floats;
 *   - ph*v.x, pl*v.x, ph*v.y are formed exactly as head + tail with fma();
 *   - x - 2*rint(x/2) is exact for every float x, so reducing a part loses nothing.
 * The few remaining roundings act on values of magnitude <= ~1, so the reduced angle is good to a
 * few 1e-7 half-turns for every int32 position, where a plain fp32 p*inv_freq is off by up to
 * p * 2^-24 radians (0.03 rad at 2^20). sinpi/cospi on [-1, 1] then add ~1 ulp.
 * No native_/half_ trig and no relaxed math here: this is the correctness path. */

/* x - 2*rint(x/2): exact for every float x (any vector width). */
#define RQ_RED2(x) ((x) - 2.0f * rint(0.5f * (x)))

/* The reduced angle in half-turns, t = (ph + pl) * (vx + vy + vz) mod 2 in [-1, 1], for any float
 * vector type FT (lanes may differ in positions, frequencies or both). One definition serves the
 * row-vector RoPE pass (rope.cl) and the frequency-vector decode kernel (scores.cl), so the accuracy
 * argument above holds for both; instantiate it for another width where a kernel needs one. */
#define RQ_DEFINE_HALF_TURNS(NAME, FT)                                                             \
    static inline FT NAME(FT ph, FT pl, FT vx, FT vy, FT vz)                                       \
    {                                                                                              \
        FT a = ph * vx, ae = fma(ph, vx, -a);                                                      \
        FT b = pl * vx, be = fma(pl, vx, -b);                                                      \
        FT c = ph * vy, ce = fma(ph, vy, -c);                                                      \
        FT t = RQ_RED2(a) + RQ_RED2(b) + RQ_RED2(c);                                               \
        t = RQ_RED2(t) + (RQ_RED2(ae) + RQ_RED2(be) + ce + pl * vy + ph * vz);                     \
        return RQ_RED2(t);                                                                         \
    }
/* Instances: rq_half_turns16 (16 lanes: rope.cl's vector form, scores.cl's CPU decode kernels) and
 * rq_half_turns1 (one lane: rope.cl's GPU form, decode_gpu.cl, paged.cl), each defined by the first
 * file of the program that needs it, under #ifndef RQ_HALF_TURNS16 / RQ_HALF_TURNS1 (an unused
 * static function is a warning, and the clc test makes warnings errors). */
