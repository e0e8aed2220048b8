#version 450
/* Configure-time probe (glsl/find_coopmat.py): a compiler that builds this takes the cooperative-matrix
 * shaders (cm_*.comp with RQ_CM_REAL 1), and a spirv-val that accepts its module validates them. */
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer A { f16vec4 a[]; };
layout(std430, binding = 1) writeonly buffer C { float c[]; };
void main()
{
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopMatLoad(ma, a, 0, 4, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, a, 0, 4, gl_CooperativeMatrixLayoutColumnMajor);
    acc = coopMatMulAdd(ma, mb, acc);
    coopMatStore(acc, c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
