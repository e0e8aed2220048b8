/* exp() for softmax weights: Cody-Waite reduction and a degree-7 polynomial, all fma, no built-in.
 *
 * The weights of an online softmax are exp(x) with x = S - m <= 0 (or the correction m_old - m <= 0),
 * one per score: at D = Dv = 128 the attention kernel spends 256 fma per score, so the exp is a
 * visible share of the work. The built-in is a library call whose cost is the compiler's: libclc's
 * (clang-15 NVPTX, the gpucc leg) is about 150 SASS instructions with branches, which put the S
 * block's softmax at about 140 instructions per score in qk_attention_gpu_f32 (nvdisasm of the
 * ptxas cubin); this one is 17 instructions, 10 of them fma, the same on every compiler.
 *
 * exp(x) = 2^n * e^r, n = rint(x * log2(e)), r = x - n*ln2 (ln2 in two parts, the head's 16 bits
 * times n exact for |n| < 2^8), |r| <= 0.347; e^r by its Taylor polynomial of degree 7 (truncation
 * 0.347^8 / 8! = 5e-9 relative), Horner in fma: a few ulp in all. 2^n is built in the exponent
 * bits, for x >= -87 (n >= -126: normal). Below that the result is 0: such a weight is < 2^-125
 * of the row's largest (which is 1), nothing at f32 resolution of O or of the row's sum. -inf gives
 * 0 exactly (a masked key weighs exactly 0), NaN stays NaN (a NaN score poisons its row, as the
 * masking rule wants). Inputs above 88 would overflow the exponent: the softmax never passes one.
 * Any float vector type: FT, its int type IT and convert_IT. */
#define RQ_DEFINE_SOFTMAX_EXP(NAME, FT, IT, CONVERT)                                               \
    static inline FT NAME(FT x)                                                                    \
    {                                                                                              \
        FT n = rint(x * 1.44269504088896341f);                                                     \
        FT r = fma(n, (FT)(-0.693145751953125f), x);   /* ln2 head: 0xB17200 >> 24 */              \
        r = fma(n, (FT)(-1.42860682030941723e-06f), r); /* ln2 - head */                           \
        FT p = fma(r, (FT)(1.98412698412698413e-04f), (FT)(1.38888888888888889e-03f));             \
        p = fma(p, r, (FT)(8.33333333333333333e-03f));                                             \
        p = fma(p, r, (FT)(4.16666666666666667e-02f));                                             \
        p = fma(p, r, (FT)(1.66666666666666667e-01f));                                             \
        p = fma(p, r, (FT)(0.5f));                                                                 \
        p = fma(p, r, (FT)(1.0f));                                                                 \
        p = fma(p, r, (FT)(1.0f));                                                                 \
        FT s = as_##FT((CONVERT(n) + (IT)(127)) << 23); /* 2^n */                                  \
        return select(p * s, (FT)(0.0f), x < (FT)(-87.0f));                                        \
    }
