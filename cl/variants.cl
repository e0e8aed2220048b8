/* Helpers of the model-family variants (docs/conventions.md section 11) shared by the kernels.
 *
 * Logit soft-capping (Gemma 2, Grok): S' = C tanh(S / C) on unmasked scores, after the scale.
 * RQ_SOFTCAP(x, C, IC), IC = 1 / C, for float or any float vector x: tanh(y) of y = |x| / C with x's
 * sign, as the Taylor polynomial to y^13 below y = 1/2 (truncation under 1e-7 relative there) and as
 * 1 - 2 / (e^(2y) + 1) above (no cancellation left there; an overflowing e^(2y) gives 1). Measured
 * against fp64 tanh in a float emulation of these operations: at most 1.7e-7 relative (about 3
 * ulp; OpenCL's exp adds up to its 3 ulp). The promise is 1e-5 on the documented metrics.
 * Only exp, a division and fma-able products: OpenCL's tanh and expm1 made Intel's dg2 compiler keep
 * 64 bytes per work-item in private memory (a table, it seems) in the register-tight GPU attention
 * shape 64x64/RB 4 (tests/gpucc), where exp alone does not. A macro, for every vector width (OpenCL
 * C has no overloading of user functions). Masked scores must stay -inf: the kernels apply it before
 * their masks, or to unmasked keys only (it maps -inf to -C). */
#ifndef RQ_VARIANTS_CL
#define RQ_VARIANTS_CL
/* tanh(y) for y >= 0 */
#define RQ_TANH_POLY(z)                                                                            \
    (1.0f + (z) * (-0x1.555556p-2f + (z) * (0x1.111112p-3f + (z) * (-0x1.ba1ba2p-5f +              \
     (z) * (0x1.664f48p-6f + (z) * (-0x1.226e36p-7f + (z) * 0x1.d6d3d0p-9f))))))
#define RQ_TANH_POS(y) select(1.0f - 2.0f / (exp(2.0f * (y)) + 1.0f), (y) * RQ_TANH_POLY((y) * (y)), (y) < 0.5f)
#define RQ_SOFTCAP(x, c, ic) ((c) * copysign(RQ_TANH_POS(fabs((x) * (ic))), (x)))
/* The same in place on x, a vector of type VT (CPU kernels: wide vectors per work-item): the exp and
 * the division only where a lane needs them, i.e. has |S| >= C/2; scores below that, the usual case
 * (Gemma 2's C is 50), take the polynomial alone. Causal prefill scores (Hq 16, S 1024, D 128) on
 * 2 cores of an AMD EPYC, pocl: +11% over plain with C 50 (polynomial), +19-21% with C 0.05 (nearly
 * every vector through the exp path); attention: +5-6% and +9-11% (ropeqk-bench --variants). */
#define RQ_SOFTCAP_VEC(VT, x, c, ic)                                                               \
    do {                                                                                           \
        VT y_ = fabs((x) * (ic)), t_ = y_ * RQ_TANH_POLY(y_ * y_);                                 \
        if (any(y_ >= (VT)(0.5f)))                                                                 \
            t_ = select(t_, 1.0f - 2.0f / (exp(2.0f * y_) + 1.0f), y_ >= (VT)(0.5f));              \
        (x) = (c) * copysign(t_, (x));                                                             \
    } while (0)
#endif
