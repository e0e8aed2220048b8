/* The OpenCL program's host-kernel contract (suite opencl_plan): every compiled kernel's argument
 * names against cl/contract.h, the names the host sets arguments by. Built with the OpenCL backend
 * only (tests/opencl/meson.build); plans on either backend are tests/neutral/test_plan.c's. Run in both
 * profiles (scripts/test.sh's stages 1 and 2), which build different GPU attention kernels. */
#include "harness.h"
#include "ropeqk_opencl.h"
#include "../../cl/contract.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

TestSuite(opencl_plan, .init = th_ctx_init, .fini = th_ctx_fini);

/* ---- the host-kernel contract ----------------------------------------------------------------- */
#define ARG_NAME(kern, id, name) #name,
static const char *const rotate_names[] = {RQ_ROTATE_ARGS(ARG_NAME)};
static const char *const scores_names[] = {RQ_SCORES_ARGS(ARG_NAME)};
static const char *const decode_names[] = {RQ_DECODE_ARGS(ARG_NAME)};
static const char *const attn_names[] = {RQ_ATTN_ARGS(ARG_NAME)};
static const char *const paged_names[] = {RQ_PAGED_ARGS(ARG_NAME)};
static const char *const comb_names[] = {RQ_PCOMB_ARGS(ARG_NAME)};
static const char *const app_names[] = {RQ_PAPP_ARGS(ARG_NAME)};
static const char *const gat_names[] = {RQ_PGAT_ARGS(ARG_NAME)};
static const char *const appq_names[] = {RQ_PAPPQ_ARGS(ARG_NAME)};
static const char *const gatq_names[] = {RQ_PGATQ_ARGS(ARG_NAME)};
static const char *const fast_names[] = {RQ_PFAST_ARGS(ARG_NAME)};

/* Every compiled kernel's argument names (-cl-kernel-arg-info) in the order contract.h gives them. */
Test(opencl_plan, kernel_arguments_follow_the_contract)
{
    size_t len = 0;
    const char *src = ropeqk_opencl_program_source(&len);
    cl_int e;
    cl_program prog = clCreateProgramWithSource(ropeqk_opencl_context(th_ctx), 1, &src, &len, &e);
    cr_assert_eq(e, CL_SUCCESS);
    char opts[700];
    /* the GPU profile's tiled score, decode and attention kernels are in the program only where a
     * context chose them: ask for them here */
    const char *o = ropeqk_ctx_build_options(th_ctx);
    snprintf(opts, sizeof opts, "%s%s%s%s -cl-kernel-arg-info", o,
             strstr(o, "-DRQ_TILE=") ? "" : " -DRQ_TILE=16 -DRQ_RB=4 -DRQ_TK=4",
             strstr(o, "-DRQ_DECODE_GPU=") ? "" : " -DRQ_DECODE_GPU=1",
             strstr(o, "-DRQ_GA_BM=") ? "" : " -DRQ_GA_BM=16 -DRQ_GA_BN=16 -DRQ_GA_TK=4 -DRQ_GA_RB=1 -DRQ_GA_DV=16");
    /* qk_attention_* too, which a program with the GPU attention kernel holds only as its fallback */
    strncat(opts, " -DRQ_ATTN_FALLBACK=1", sizeof opts - strlen(opts) - 1);
    /* the GPU profile's fast paged pass 1, which a CPU-profile program leaves out */
    strncat(opts, " -DRQ_PAGED_FAST=1", sizeof opts - strlen(opts) - 1);
    /* and the CPU profile's own kernels, which a GPU-profile program leaves out (-DRQ_CPU_KERNELS=0) */
    char *cpu = strstr(opts, "-DRQ_CPU_KERNELS=0");
    if (cpu)
        cpu[strlen("-DRQ_CPU_KERNELS=")] = '1';
    cl_device_id dev = ropeqk_opencl_device(th_ctx);
    cr_assert_eq(clBuildProgram(prog, 1, &dev, opts, NULL, NULL), CL_SUCCESS);
    static const struct {
        const char *kernel;
        const char *const *names;
        cl_uint n;
    } ks[] = {
        {"rope_rotate_f32", rotate_names, RQ_ROT_NARGS},  {"rope_rotate_f16", rotate_names, RQ_ROT_NARGS},
        {"rope_rotate_bf16", rotate_names, RQ_ROT_NARGS}, {"qk_scores", scores_names, RQ_SC_NARGS},
        {"qk_scores_tiled", scores_names, RQ_SC_NARGS},
        {"qk_decode_gpu_f32", decode_names, RQ_DEC_NARGS}, {"qk_decode_gpu_f16", decode_names, RQ_DEC_NARGS},
        {"qk_decode_gpu_bf16", decode_names, RQ_DEC_NARGS},
        {"qk_decode_f32", decode_names, RQ_DEC_NARGS},    {"qk_decode_f16", decode_names, RQ_DEC_NARGS},
        {"qk_decode_bf16", decode_names, RQ_DEC_NARGS},
        {"qk_attention_f32", attn_names, RQ_AT_NARGS},    {"qk_attention_f16", attn_names, RQ_AT_NARGS},
        {"qk_attention_bf16", attn_names, RQ_AT_NARGS},
        /* the GPU attention kernel of the program's shape: the register-blocked form where the
         * options say so (-DRQ_GA_FA2=1: the GPU profile's default), else qk_attention_gpu_* (the
         * options above); the other stage of scripts/test.sh checks the other */
        {"qk_attention_GA_f32", attn_names, RQ_AT_NARGS},
        {"qk_attention_GA_f16", attn_names, RQ_AT_NARGS}, {"qk_attention_GA_bf16", attn_names, RQ_AT_NARGS},
        {"paged_attn_cpu", paged_names, RQ_PG_NARGS},
        {"paged_attn_gpu", paged_names, RQ_PG_NARGS},     {"paged_combine", comb_names, RQ_PC_NARGS},
        {"paged_append", app_names, RQ_PA_NARGS},         {"paged_gather", gat_names, RQ_PT_NARGS},
        {"paged_append_q8", appq_names, RQ_PQ_NARGS},    {"paged_gather_q8", gatq_names, RQ_PGQ_NARGS},
        {"paged_attn_fast4", fast_names, RQ_PF_NARGS},   {"paged_attn_fast8", fast_names, RQ_PF_NARGS},
    };
    const bool fa2 = strstr(opts, "-DRQ_GA_FA2=1") != NULL;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char kname[64];
        const char *ga = strstr(ks[i].kernel, "_GA_");
        if (ga)
            snprintf(kname, sizeof kname, "qk_attention_%s_%s", fa2 ? "fa2" : "gpu", ga + 4);
        else
            snprintf(kname, sizeof kname, "%s", ks[i].kernel);
        cl_kernel k = clCreateKernel(prog, kname, &e);
        cr_assert_eq(e, CL_SUCCESS, "%s", kname);
        cl_uint n = 0;
        clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof n, &n, NULL);
        cr_expect_eq(n, ks[i].n, "%s: %u arguments, contract.h says %u", kname, n, ks[i].n);
        for (cl_uint a = 0; a < n && a < ks[i].n; a++) {
            char name[64] = "";
            cr_assert_eq(clGetKernelArgInfo(k, a, CL_KERNEL_ARG_NAME, sizeof name, name, NULL), CL_SUCCESS);
            cr_expect_str_eq(name, ks[i].names[a], "%s argument %u", kname, a);
        }
        clReleaseKernel(k);
    }
    clReleaseProgram(prog);
}
