/* The OpenCL backend's table (src/core/backend.h): how the core reaches everything in src/opencl.
 * The top of the backend: contexts are cl_ctx.c's, plans cl_plan.c's, the tuner cl_tune.c's. */
#include "ocl.h"

static const char *cl_error_name(int32_t code) { return ropeqk_opencl_error_name(code); }

const rq_backend rq_opencl_backend = {
    .name = "OpenCL",
    .prefix = "opencl",
    .id = ROPEQK_BACKEND_OPENCL,
    .access_unit = 1,
    /* every variant of docs/conventions.md section 11, fused into the kernels (cl/contract.h) */
    .variants = RQ_VAR_SOFTCAP | RQ_VAR_ROT_OFFSET | RQ_VAR_MROPE | RQ_VAR_SINKS,
    .paged_chunks = true,
    .kv_quant = RQ_KV_I8 | RQ_KV_FP8_E4M3 | RQ_KV_FP8_E5M2,
    .open = rq_cl_open,
    .close = rq_cl_close,
    .error_name = cl_error_name,
    .warmup = rq_cl_warmup,
    .knobs = rq_cl_knobs,
    .n_knobs = RQ_CL_N_KNOBS,
    .tuning_check = rq_cl_tuning_check,
    .list_devices = rq_cl_list_devices, /* cl_devices.c */
    .ctx_device_info = rq_cl_ctx_device_info,
    .program_source = ropeqk_opencl_program_source,
    .tuning_base = rq_cl_tuning_base,
    .tuning_fit = rq_cl_tuning_fit,
    .build_options = rq_cl_build_options,
    .plan_init = rq_cl_plan_init,
    .plan_free = rq_cl_plan_free,
    .host_run = rq_cl_host_run,
    .tune_families = (1u << RQ_FAM_SCORES) | (1u << RQ_FAM_DECODE) | (1u << RQ_FAM_ATTN) | (1u << RQ_FAM_CHUNK) |
                     (1u << RQ_FAM_DENSE),
    .tune_candidate = rq_cl_tune_candidate,
    .tune_fits = rq_cl_tune_fits,
    .tune_clone = rq_cl_tune_clone,
    .time_plan = rq_cl_time_plan,
    .tune_lock = NULL,
    .tune_finish = rq_cl_tune_finish,
    .tune_measure = rq_cl_tune_measure,
    .run = &rq_cl_run_ops, /* cl_run.c */
};
