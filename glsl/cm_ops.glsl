/* The one switch between the cooperative-matrix shaders and their emulation (glsl/vk_cm.h):
 * RQ_CM_REAL 1 makes the 16 x 16 x 16 products with GL_KHR_cooperative_matrix (subgroup scope, f16
 * inputs, f32 accumulators); RQ_CM_REAL 0 makes the same products with loops, each invocation of an
 * emulated subgroup of RQ_CM_EMU_SG (32) owning 8 accumulator elements (element e = lane + 32 i is
 * row e / 16, column e % 16), reading the f16 operands from the same planes and shared tiles as
 * exact floats (unpackHalf2x16) and adding their products in f32. Everything else of the shaders
 * (tiling, masks, softmax, the splits and their rounding, rescaling, output) is the same source.
 *
 * Operands: A and B fragments come from 8-byte groups of 4 halves (f16vec4 in the real shaders,
 * uvec2 in the emulated ones: the same bits), in these places only:
 *   Q plane (A, row-major) and K plane (B, column-major: K^T), for S = Q K^T;
 *   the shared P tile (A, row-major) and the V plane (B, row-major), for O += P V.
 * In the emulation a fragment is the half index of its first element (the product reads the
 * elements from memory itself); in the real shaders it is a cooperative matrix. Accumulators are
 * stored to and loaded from the shared f32 array sS (the S tile, and the scratch of the O rescaling).
 * Requires, before the include: `int cm_lane` (the invocation's lane in its subgroup) and the
 * buffers qp, kp (and vp) and shared arrays sS, sP of the shader. */
#ifndef RQ_CM_OPS_GLSL
#define RQ_CM_OPS_GLSL
#ifndef RQ_CM_REAL
#error "build with -DRQ_CM_REAL=1 (cooperative matrices) or -DRQ_CM_REAL=0 (emulated)"
#endif

#if RQ_CM_REAL
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#define CM_H4 f16vec4 /* the type of a plane's and the P tile's 4-half groups */
/* loops over the tile's accumulators (bounds: specialization constants): unrolled by the driver here,
 * kept as loops in the emulation (unrolled, llvmpipe took 74 s to compile the emulated module) */
#define CM_UNROLL [[unroll]]
#define CM_ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_ZERO(acc) acc = CM_ACC(0.0)
#define CM_SCALE(acc, f) acc = acc * (f)
#define CM_ADD(acc, t) acc = acc + (t)
/* row-major f32 tiles of sS, offsets and strides in floats */
#define CM_STORE_S(acc, off, stride) coopMatStore(acc, sS, off, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_S(acc, off, stride) coopMatLoad(acc, sS, off, stride, gl_CooperativeMatrixLayoutRowMajor)
/* plane fragments: offsets and strides in 4-half groups */
#define CM_LOAD_QA(a, off4, s4) coopMatLoad(a, qp, off4, s4, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_KB(b, off4, s4) coopMatLoad(b, kp, off4, s4, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_LOAD_PA(a, off4, s4) coopMatLoad(a, sP, off4, s4, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_VB(b, off4, s4) coopMatLoad(b, vp, off4, s4, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MMA_QK(acc, a, b, qs4, ks4) acc = coopMatMulAdd(a, b, acc)
#define CM_MMA_PV(acc, a, b, ps4, vs4) acc = coopMatMulAdd(a, b, acc)
/* acc += (ah + al)(bh + bl) without al bl: the correction products (where asked) before the main one */
#define CM_PRODUCTS(MMA, acc, ah, al, bh, bl, use_al, use_bl, as4, bs4)                            \
    {                                                                                              \
        if (use_bl)                                                                                \
            MMA(acc, ah, bl, as4, bs4);                                                            \
        if (use_al)                                                                                \
            MMA(acc, al, bh, as4, bs4);                                                            \
        MMA(acc, ah, bh, as4, bs4);                                                                \
    }
/* f32 -> f16 (the hardware's conversion) and a group of 4 halves for the P tile */
#define CM_F16(x) float(float16_t(x))
#define CM_PACK4(v) f16vec4(v)
#else
#define CM_H4 uvec2
#define CM_UNROLL
struct cm_acc_emu {
    float e[8];
};
#define CM_ACC cm_acc_emu
#define CM_A uint
#define CM_B uint
#define CM_ZERO(acc)                                                                               \
    {                                                                                              \
        [[unroll]] for (int i_ = 0; i_ < 8; i_++)                                                  \
            acc.e[i_] = 0.0;                                                                       \
    }
#define CM_SCALE(acc, f)                                                                           \
    {                                                                                              \
        [[unroll]] for (int i_ = 0; i_ < 8; i_++)                                                  \
            acc.e[i_] *= (f);                                                                      \
    }
#define CM_ADD(acc, t)                                                                             \
    {                                                                                              \
        [[unroll]] for (int i_ = 0; i_ < 8; i_++)                                                  \
            acc.e[i_] += (t).e[i_];                                                                \
    }
#define CM_EMU_R(i_) ((cm_lane >> 4) + 2 * (i_))
#define CM_EMU_C (cm_lane & 15)
#define CM_STORE_S(acc, off, stride)                                                               \
    {                                                                                              \
        [[unroll]] for (int i_ = 0; i_ < 8; i_++)                                                  \
            sS[uint(off) + uint(CM_EMU_R(i_)) * uint(stride) + uint(CM_EMU_C)] = acc.e[i_];          \
    }
#define CM_LOAD_S(acc, off, stride)                                                                \
    {                                                                                              \
        [[unroll]] for (int i_ = 0; i_ < 8; i_++)                                                  \
            acc.e[i_] = sS[uint(off) + uint(CM_EMU_R(i_)) * uint(stride) + uint(CM_EMU_C)];          \
    }
#define CM_LOAD_QA(a, off4, s4) a = 4u * uint(off4)
#define CM_LOAD_KB(b, off4, s4) b = 4u * uint(off4)
#define CM_LOAD_PA(a, off4, s4) a = 4u * uint(off4)
#define CM_LOAD_VB(b, off4, s4) b = 4u * uint(off4)
/* half h of an array of 4-half groups (uvec2), and group g as a vec4 */
#define CM_EMU_H(buf, h) unpackHalf2x16(buf[(h) >> 2u][((h) >> 1u) & 1u])[(h) & 1u]
#define CM_EMU_G4(buf, g) vec4(unpackHalf2x16(buf[g].x), unpackHalf2x16(buf[g].y))
/* acc += A B for the lane's 8 elements (rows r_i, its column c): B's column c first (16 floats, filled
 * by BCOL(b_) from c_), then per row the 16 halves of A's row from ABUF (4 groups from group ga_ + r *
 * as_) against it, added in order k = 0..15 in f32 (each f16 x f16 product is exact in f32). */
#define CM_EMU_MMA(acc, ABUF, BCOL)                                                                \
    {                                                                                              \
        const uint c_ = uint(CM_EMU_C);                                                            \
        float b_[16];                                                                              \
        BCOL(b_)                                                                                   \
        [[unroll]] for (int i_ = 0; i_ < 8; i_++) {                                                \
            uint g_ = ga_ + uint(CM_EMU_R(i_)) * as_;                                              \
            float s_ = acc.e[i_];                                                                  \
            [[unroll]] for (uint q_ = 0u; q_ < 4u; q_++) {                                         \
                vec4 x_ = CM_EMU_G4(ABUF, g_ + q_);                                                \
                [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++)                                       \
                    s_ += x_[e_] * b_[4u * q_ + e_];                                               \
            }                                                                                      \
            acc.e[i_] = s_;                                                                        \
        }                                                                                          \
    }
/* Q (row-major, stride qs4 groups) times K^T: B's column c is K's row c (stride ks4 groups) */
#define CM_EMU_KCOL(b_)                                                                            \
    {                                                                                              \
        uint kg_ = cm_b_ / 4u + c_ * cm_bs_;                                                       \
        [[unroll]] for (uint q_ = 0u; q_ < 4u; q_++) {                                             \
            vec4 y_ = CM_EMU_G4(kp, kg_ + q_);                                                     \
            [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++)                                           \
                b_[4u * q_ + e_] = y_[e_];                                                         \
        }                                                                                          \
    }
#define CM_MMA_QK(acc, a, b, qs4, ks4)                                                             \
    {                                                                                              \
        uint ga_ = (a) / 4u, as_ = uint(qs4), cm_b_ = (b), cm_bs_ = uint(ks4);                     \
        CM_EMU_MMA(acc, qp, CM_EMU_KCOL)                                                           \
    }
/* P from the shared tile (row-major, stride ps4 groups) times V (row-major, stride vs4 groups):
 * B's column c is element c of V's 16 rows */
#define CM_EMU_VCOL(b_)                                                                            \
    {                                                                                              \
        [[unroll]] for (uint k_ = 0u; k_ < 16u; k_++)                                              \
            b_[k_] = CM_EMU_H(vp, cm_b_ + k_ * 4u * cm_bs_ + c_);                                  \
    }
#define CM_MMA_PV(acc, a, b, ps4, vs4)                                                             \
    {                                                                                              \
        uint ga_ = (a) / 4u, as_ = uint(ps4), cm_b_ = (b), cm_bs_ = uint(vs4);                     \
        CM_EMU_MMA(acc, sP, CM_EMU_VCOL)                                                           \
    }
/* the same products in the same order as one loop over them: each emulated product is a large
 * unrolled block, and llvmpipe's compile time grows quickly with their number (six of them: 74 s for
 * cm_attn_emu at load 10, two: a few seconds) */
#define CM_PRODUCTS(MMA, acc, ah, al, bh, bl, use_al, use_bl, as4, bs4)                            \
    {                                                                                              \
        for (int t_ = 0; t_ < 3; t_++) {                                                           \
            if ((t_ == 0 && !(use_bl)) || (t_ == 1 && !(use_al)))                                  \
                continue;                                                                          \
            uint pa_ = t_ == 1 ? (al) : (ah), pb_ = t_ == 0 ? (bl) : (bh);                         \
            MMA(acc, pa_, pb_, as4, bs4);                                                          \
        }                                                                                          \
    }
/* f32 -> f16 rounded to nearest even by hand (common.glsl), back as the exact float */
#define CM_F16(x) unpackHalf2x16(rq_to_f16(x)).x
#define CM_PACK4(v) uvec2(rq_to_f16(v.x) | (rq_to_f16(v.y) << 16), rq_to_f16(v.z) | (rq_to_f16(v.w) << 16))
#endif

/* acc += (ah + al)(bh + bl) through a zeroed accumulator of its own, added to acc elementwise (f32,
 * rounded to nearest): NVIDIA's tensor cores truncate each sum toward zero (Fasi, Higham, Mikaitis,
 * Pranesh, "Numerical behavior of NVIDIA tensor cores", 2021), a bias of up to an ulp of the
 * accumulator per product, which over a long accumulation (a row's 4096 keys: hundreds of products
 * into O) would reach 1e-5 of |O|; this way each truncation is an ulp of one step's 16 terms, and
 * the steps add up unbiased. One accumulator more, and one elementwise add per step. */
#define CM_STEP(MMA, acc, ah, al, bh, bl, use_al, use_bl, as4, bs4)                                \
    {                                                                                              \
        CM_ACC st_;                                                                                \
        CM_ZERO(st_);                                                                              \
        CM_PRODUCTS(MMA, st_, ah, al, bh, bl, use_al, use_bl, as4, bs4)                            \
        CM_ADD(acc, st_);                                                                          \
    }

/* (Fragments are declared one per declaration: glslang 13.1 gives the second declarator of a list of
 * cooperative matrices no matrix use, which spirv-val rejects.)
 * S = Q K^T for the subgroup's 16 rows and the tile's NSA blocks of 16 keys, over nd steps of 16
 * head dims: qo4, ko4 the fragments' origins (groups), s4 the planes' row stride (dp / 4), lo the
 * offsets of the lo planes (groups), acc: three products (hi hi + hi lo + lo hi) instead of one. The
 * small products first: each step adds its correction terms before its main term. */
#define CM_QK_TILE(sacc, qo4, ko4, s4, nd, qlo4, klo4, acc)                                        \
    {                                                                                              \
        for (int ds_ = 0; ds_ < (nd); ds_++) {                                                     \
            CM_A qh_;                                                                              \
            CM_A ql_;                                                                         \
            CM_LOAD_QA(qh_, (qo4) + uint(4 * ds_), s4);                                            \
            if (acc)                                                                               \
                CM_LOAD_QA(ql_, (qo4) + (qlo4) + uint(4 * ds_), s4);                               \
            CM_UNROLL for (int j_ = 0; j_ < NSA; j_++) {                                           \
                uint kb_ = (ko4) + uint(j_ * 16) * uint(s4) + uint(4 * ds_);                       \
                CM_B kh_;                                                                      \
                CM_B kl_;                                                                     \
                CM_LOAD_KB(kh_, kb_, s4);                                                          \
                if (acc)                                                                           \
                    CM_LOAD_KB(kl_, kb_ + (klo4), s4);                                             \
                CM_STEP(CM_MMA_QK, sacc[j_], qh_, ql_, kh_, kl_, acc, acc, s4, s4)                 \
            }                                                                                      \
        }                                                                                          \
    }

#endif
