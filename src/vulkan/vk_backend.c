/* The Vulkan backend's table (src/core/backend.h): how the core reaches everything in src/vulkan. */
#include "vk.h"

static const char *vk_error_name(int32_t code) { return rq_vk_result_name((VkResult)code); }

const rq_backend rq_vulkan_backend = {
    .name = "Vulkan",
    .prefix = "vulkan",
    .id = ROPEQK_BACKEND_VULKAN,
    .access_unit = 4, /* 16-bit views are read and written as 32-bit words (no 16-bit storage needed) */
    /* docs/conventions.md section 11, in the shaders: soft-capping (scores, scores_few, attention,
     * paged), the rotary offset (rotate, paged), M-RoPE (rotate; the masks by token order), sinks
     * (attention, paged_combine) */
    .variants = RQ_VAR_SOFTCAP | RQ_VAR_ROT_OFFSET | RQ_VAR_MROPE | RQ_VAR_SINKS,
    .kv_quant = RQ_KV_I8 | RQ_KV_FP8_E4M3 | RQ_KV_FP8_E5M2, /* paged.comp reads them, paged_append_q8.comp writes them */
    .paged_chunks = true, /* long chunks of ragged rows: gathered K/V through plan->chunk (vk_paged_chunk.c) */
    .open = rq_vk_open,
    .close = rq_vk_close,
    .error_name = vk_error_name,
    .warmup = rq_vk_warmup,
    .knobs = rq_vk_knobs,
    .n_knobs = RQ_VK_N_KNOBS,
    .list_devices = rq_vk_list_devices, /* vk_devices.c */
    .ctx_device_info = rq_vk_ctx_device_info,
    .program_source = NULL, /* embedded SPIR-V, no program text */
    .diagnostics = rq_vk_diagnostics, /* vk_ctx.c: the validation layer */
    .tuning_base = rq_vk_tuning_base,
    .tuning_fit = rq_vk_tuning_fit,
    .build_options = rq_vk_build_options,
    .plan_init = rq_vk_plan_init,
    .plan_free = rq_vk_plan_free,
    .host_run = rq_vk_host_run,
    .tune_families = (1u << RQ_FAM_SCORES) | (1u << RQ_FAM_ATTN), /* scores_few.comp has a fixed shape */
    .tune_candidate = rq_vk_tune_candidate,
    .tune_fits = rq_vk_tune_fits,
    .tune_clone = rq_vk_tune_clone,
    .time_plan = rq_vk_time_plan,
    .tune_lock = rq_vk_tune_lock,
    .tune_finish = NULL,
    .run = &rq_vk_run_ops, /* vk_run.c, vk_submit.c */
};
