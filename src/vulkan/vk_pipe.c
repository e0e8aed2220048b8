/* The shader table (ggml-vulkan style: one row per shader, its bindings and push-constant block) and
 * the pipelines made from it, once per (shader, specialization constants) and context. */
#include "vk.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    RQ_VK_ROT_PC(RQ_VK_FIELD)
} rq_vk_rot_pc;
typedef struct {
    RQ_VK_SC_PC(RQ_VK_FIELD)
} rq_vk_sc_pc;
/* Vulkan guarantees 128 bytes of push constants on every device */
_Static_assert(sizeof(rq_vk_rot_pc) <= 128 && sizeof(rq_vk_rot_pc) == 22 * 4, "rotate push constants");
_Static_assert(sizeof(rq_vk_sc_pc) <= 128 && sizeof(rq_vk_sc_pc) == 21 * 4, "scores push constants");
/* the default scores.comp shape fits the 32 KiB of shared memory every Vulkan device has */
_Static_assert(RQ_VK_SC_SHARED(RQ_VK_SC_T_DEF, RQ_VK_SC_TK_DEF) <= 32768, "scores shared memory");
/* attention.comp: the default rows (with 64 keys) and every tuned row count (with 32 keys where
 * needed) fit 32 KiB; 32 rows by 32 keys fit Vulkan's minimum of 16 KiB */
_Static_assert(RQ_VK_AT_SHARED(RQ_VK_AT_BM_DEF, 64, RQ_VK_AT_CVMAX) <= 32768 &&
                   RQ_VK_AT_SHARED(128, 32, RQ_VK_AT_CVMAX) <= 32768 && RQ_VK_AT_SHARED(32, 32, RQ_VK_AT_CVMAX) <= 16384,
               "attention shared memory");
typedef struct {
    RQ_VK_PG_PC(RQ_VK_FIELD)
} rq_vk_pg_pc;
typedef struct {
    RQ_VK_PC_PC(RQ_VK_FIELD)
} rq_vk_pcomb_pc;
typedef struct {
    RQ_VK_PA_PC(RQ_VK_FIELD)
} rq_vk_papp_pc;
_Static_assert(sizeof(rq_vk_pg_pc) <= 128 && sizeof(rq_vk_pg_pc) == 31 * 4, "paged push constants");
_Static_assert(sizeof(rq_vk_pcomb_pc) <= 128 && sizeof(rq_vk_pcomb_pc) == 19 * 4, "paged combine push constants");
_Static_assert(sizeof(rq_vk_papp_pc) <= 128 && sizeof(rq_vk_papp_pc) == 16 * 4, "paged append push constants");
typedef struct {
    RQ_VK_PQ_PC(RQ_VK_FIELD)
} rq_vk_pq_pc;
_Static_assert(sizeof(rq_vk_pq_pc) <= 128 && sizeof(rq_vk_pq_pc) == 17 * 4, "8-bit append push constants");
typedef struct {
    RQ_VK_GA_PC(RQ_VK_FIELD)
} rq_vk_ga_pc;
_Static_assert(sizeof(rq_vk_ga_pc) <= 128 && sizeof(rq_vk_ga_pc) == 14 * 4, "gather push constants");
typedef struct {
    RQ_VK_PF_PC(RQ_VK_FIELD)
} rq_vk_pf_pc;
_Static_assert(sizeof(rq_vk_pf_pc) == 128, "paged_fast push constants: the 32 words every device has");
_Static_assert(RQ_VK_PF_WG == RQ_PFAST_TILE, "paged_fast: the table's tile (src/core/call.h) is the shader's");
extern const uint32_t rq_spv_paged_fast4[], rq_spv_paged_fast8[];
extern const size_t rq_spv_paged_fast4_size, rq_spv_paged_fast8_size;
extern const uint32_t rq_spv_paged[], rq_spv_paged_sg[], rq_spv_paged_combine[], rq_spv_paged_append[],
    rq_spv_paged_append_q8[], rq_spv_paged_gather[];
extern const size_t rq_spv_paged_size, rq_spv_paged_sg_size, rq_spv_paged_combine_size, rq_spv_paged_append_size,
    rq_spv_paged_append_q8_size, rq_spv_paged_gather_size;
/* paged.comp: the default key chunk and all eight query heads at D 256 fit 32 KiB */
_Static_assert(RQ_VK_PG_SHARED(RQ_VK_PG_GH * 256, RQ_VK_PG_UC_DEF) <= 32768, "paged shared memory");
typedef struct {
    RQ_VK_AT_PC(RQ_VK_FIELD)
} rq_vk_at_pc;
_Static_assert(sizeof(rq_vk_at_pc) <= 128 && sizeof(rq_vk_at_pc) == 31 * 4, "attention push constants");
extern const uint32_t rq_spv_attention[];
extern const size_t rq_spv_attention_size;

extern const uint32_t rq_spv_rotate[], rq_spv_scores[], rq_spv_scores_few[];
extern const size_t rq_spv_rotate_size, rq_spv_scores_size, rq_spv_scores_few_size;
/* the tensor-core path (vk_cm.c; glsl/vk_cm.h): the _cm modules are empty (size 0) in a build without
 * a compiler that takes GL_KHR_cooperative_matrix */
extern const uint32_t rq_spv_cm_split[], rq_spv_cm_attn_cm[], rq_spv_cm_attn_emu[], rq_spv_cm_scores_cm[],
    rq_spv_cm_scores_emu[];
extern const size_t rq_spv_cm_split_size, rq_spv_cm_attn_cm_size, rq_spv_cm_attn_emu_size, rq_spv_cm_scores_cm_size,
    rq_spv_cm_scores_emu_size;
typedef struct {
    RQ_CM_SP_PC(RQ_VK_FIELD)
} rq_vk_cm_sp_pc;
typedef struct {
    RQ_CM_AT_PC(RQ_VK_FIELD)
} rq_vk_cm_at_pc;
typedef struct {
    RQ_CM_SC_PC(RQ_VK_FIELD)
} rq_vk_cm_sc_pc;
_Static_assert(sizeof(rq_vk_cm_sp_pc) <= 128 && sizeof(rq_vk_cm_at_pc) <= 128 && sizeof(rq_vk_cm_sc_pc) <= 128,
               "tensor-core path push constants");

#define RQ_VK_MAX_BIND 11 /* bindings of a shader, at most (attention.comp) */
_Static_assert(RQ_VK_AT_NBIND <= RQ_VK_MAX_BIND, "bindings");

static const struct {
    const char *name;
    const uint32_t *code;
    const size_t *size;
    uint32_t bindings, pc_size;
} shaders[RQ_VK_SH_COUNT] = {
    [RQ_VK_SH_ROTATE] = {"rotate", rq_spv_rotate, &rq_spv_rotate_size, 5, sizeof(rq_vk_rot_pc)},
    [RQ_VK_SH_SCORES] = {"scores", rq_spv_scores, &rq_spv_scores_size, 5, sizeof(rq_vk_sc_pc)},
    [RQ_VK_SH_SCORES_FEW] = {"scores_few", rq_spv_scores_few, &rq_spv_scores_few_size, 5, sizeof(rq_vk_sc_pc)},
    [RQ_VK_SH_PAGED] = {"paged", rq_spv_paged, &rq_spv_paged_size, RQ_VK_PG_NBIND, sizeof(rq_vk_pg_pc)},
    [RQ_VK_SH_PAGED_SG] = {"paged_sg", rq_spv_paged_sg, &rq_spv_paged_sg_size, RQ_VK_PG_NBIND, sizeof(rq_vk_pg_pc)},
    [RQ_VK_SH_PAGED_COMBINE] = {"paged_combine", rq_spv_paged_combine, &rq_spv_paged_combine_size, 5,
                                sizeof(rq_vk_pcomb_pc)},
    [RQ_VK_SH_PAGED_APPEND] = {"paged_append", rq_spv_paged_append, &rq_spv_paged_append_size, 3,
                               sizeof(rq_vk_papp_pc)},
    [RQ_VK_SH_PAGED_APPEND_Q8] = {"paged_append_q8", rq_spv_paged_append_q8, &rq_spv_paged_append_q8_size, 4,
                                  sizeof(rq_vk_pq_pc)},
    [RQ_VK_SH_PAGED_GATHER] = {"paged_gather", rq_spv_paged_gather, &rq_spv_paged_gather_size, 4, sizeof(rq_vk_ga_pc)},
    [RQ_VK_SH_PAGED_FAST4] = {"paged_fast4", rq_spv_paged_fast4, &rq_spv_paged_fast4_size, RQ_VK_PF_NBIND,
                              sizeof(rq_vk_pf_pc)},
    [RQ_VK_SH_PAGED_FAST8] = {"paged_fast8", rq_spv_paged_fast8, &rq_spv_paged_fast8_size, RQ_VK_PF_NBIND,
                              sizeof(rq_vk_pf_pc)},
    [RQ_VK_SH_ATTENTION] = {"attention", rq_spv_attention, &rq_spv_attention_size, RQ_VK_AT_NBIND,
                            sizeof(rq_vk_at_pc)},
    [RQ_VK_SH_CM_SPLIT] = {"cm_split", rq_spv_cm_split, &rq_spv_cm_split_size, RQ_CM_SP_NBIND, sizeof(rq_vk_cm_sp_pc)},
    [RQ_VK_SH_CM_ATTN] = {"cm_attn_cm", rq_spv_cm_attn_cm, &rq_spv_cm_attn_cm_size, RQ_CM_AT_NBIND,
                          sizeof(rq_vk_cm_at_pc)},
    [RQ_VK_SH_CM_ATTN_EMU] = {"cm_attn_emu", rq_spv_cm_attn_emu, &rq_spv_cm_attn_emu_size, RQ_CM_AT_NBIND,
                              sizeof(rq_vk_cm_at_pc)},
    [RQ_VK_SH_CM_SCORES] = {"cm_scores_cm", rq_spv_cm_scores_cm, &rq_spv_cm_scores_cm_size, RQ_CM_SC_NBIND,
                            sizeof(rq_vk_cm_sc_pc)},
    [RQ_VK_SH_CM_SCORES_EMU] = {"cm_scores_emu", rq_spv_cm_scores_emu, &rq_spv_cm_scores_emu_size, RQ_CM_SC_NBIND,
                                sizeof(rq_vk_cm_sc_pc)},
};

static void pipe_free(ropeqk_ctx *ctx, rq_vk_pipe *p)
{
    VkDevice d = rq_vk(ctx)->device;
    if (p->pipeline)
        vkDestroyPipeline(d, p->pipeline, NULL);
    if (p->layout)
        vkDestroyPipelineLayout(d, p->layout, NULL);
    if (p->dsl)
        vkDestroyDescriptorSetLayout(d, p->dsl, NULL);
    free(p);
}

static ropeqk_status pipe_make(ropeqk_ctx *ctx, rq_vk_shader sh, const int32_t spec[RQ_VK_NSPEC], rq_vk_pipe **out)
{
    VkDevice d = rq_vk(ctx)->device;
    if (*shaders[sh].size == 0) { /* a module this build could not compile (the cooperative-matrix ones) */
        rq_set_error("Vulkan shader '%s' is not in this build", shaders[sh].name);
        return ROPEQK_ERR_BAD_PARAM;
    }
    rq_vk_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    p->shader = sh;
    memcpy(p->spec, spec, sizeof p->spec);
    VkDescriptorSetLayoutBinding b[RQ_VK_MAX_BIND];
    for (uint32_t i = 0; i < shaders[sh].bindings; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
                                           .bindingCount = shaders[sh].bindings, .pBindings = b};
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, shaders[sh].pc_size};
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = *shaders[sh].size, .pCode = shaders[sh].code};
    VkShaderModule mod = VK_NULL_HANDLE;
    VkResult r = vkCreateDescriptorSetLayout(d, &dci, NULL, &p->dsl);
    const char *what = "vkCreateDescriptorSetLayout";
    if (r == VK_SUCCESS) {
        VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                          .setLayoutCount = 1, .pSetLayouts = &p->dsl,
                                          .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
        what = "vkCreatePipelineLayout";
        r = vkCreatePipelineLayout(d, &lci, NULL, &p->layout);
    }
    if (r == VK_SUCCESS) {
        what = "vkCreateShaderModule";
        r = vkCreateShaderModule(d, &mci, NULL, &mod);
    }
    if (r == VK_SUCCESS) {
        VkSpecializationMapEntry me[RQ_VK_NSPEC];
        for (uint32_t i = 0; i < RQ_VK_NSPEC; i++)
            me[i] = (VkSpecializationMapEntry){i, i * 4, 4};
        VkSpecializationInfo si = {RQ_VK_NSPEC, me, sizeof p->spec, p->spec};
        /* the cooperative-matrix shaders' work-groups are sized for a subgroup size (vk_cm_dev.c) */
        uint32_t sg = rq_vk_cm_pipe_sg(ctx, sh);
        VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rss = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT,
            .requiredSubgroupSize = sg};
        VkComputePipelineCreateInfo cci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .pNext = sg ? &rss : NULL,
                      .flags = sg ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT : 0,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod, .pName = "main", .pSpecializationInfo = &si},
            .layout = p->layout};
        what = "vkCreateComputePipelines";
        r = vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &cci, NULL, &p->pipeline);
        vkDestroyShaderModule(d, mod, NULL);
    }
    if (r != VK_SUCCESS) {
        ropeqk_status st = rq_vk_fail(ctx, r, what);
        rq_set_error("Vulkan pipeline for shader '%s' failed: %s (%d) in %s", shaders[sh].name,
                     rq_vk_result_name(r) ? rq_vk_result_name(r) : "?", (int)r, what);
        pipe_free(ctx, p);
        return st;
    }
    *out = p;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_pipe_get(ropeqk_ctx *ctx, rq_vk_shader sh, const int32_t spec[RQ_VK_NSPEC], rq_vk_pipe **out)
{
    *out = NULL;
    pthread_mutex_lock(&ctx->lock);
    for (rq_vk_pipe *p = rq_vk(ctx)->pipes; p; p = p->next)
        if (p->shader == sh && memcmp(p->spec, spec, sizeof p->spec) == 0) {
            *out = p;
            pthread_mutex_unlock(&ctx->lock);
            return ROPEQK_SUCCESS;
        }
    /* made under the lock: two plans asking for the same pipeline get one */
    rq_vk_pipe *p = NULL;
    ropeqk_status st = pipe_make(ctx, sh, spec, &p);
    if (!st) {
        p->next = rq_vk(ctx)->pipes;
        rq_vk(ctx)->pipes = p;
        *out = p;
    }
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

void rq_vk_pipes_free(ropeqk_ctx *ctx)
{
    rq_vk_pipe *p = rq_vk(ctx)->pipes;
    while (p) {
        rq_vk_pipe *n = p->next;
        pipe_free(ctx, p);
        p = n;
    }
    rq_vk(ctx)->pipes = NULL;
}

ropeqk_status rq_vk_bind_offsets(ropeqk_ctx *ctx, const rq_vk_bind *b, uint32_t n, uint32_t *elem_off)
{
    const VkPhysicalDeviceLimits *lim = &rq_vk(ctx)->props.limits;
    VkDeviceSize align = lim->minStorageBufferOffsetAlignment ? lim->minStorageBufferOffsetAlignment : 1;
    for (uint32_t i = 0; i < n; i++) {
        if (!b[i].buf) {
            elem_off[i] = 0;
            continue;
        }
        VkDeviceSize base = b[i].offset / align * align, rem = b[i].offset - base;
        /* 32-bit element indices in the shaders, and the device's descriptor range limit */
        if (rem + b[i].bytes > lim->maxStorageBufferRange || rem + b[i].bytes > UINT32_MAX) {
            rq_set_error("a buffer view of %llu bytes exceeds this Vulkan device's storage-buffer range limit (%u bytes)",
                         (unsigned long long)(rem + b[i].bytes), lim->maxStorageBufferRange);
            return ROPEQK_ERR_TOO_LARGE;
        }
        elem_off[i] = (uint32_t)(rem / b[i].elem_size);
    }
    return ROPEQK_SUCCESS;
}

void rq_vk_dispatch(ropeqk_ctx *ctx, VkCommandBuffer cmd, const rq_vk_pipe *p, const rq_vk_bind *b, uint32_t n,
                    const void *pc, uint32_t pc_size, uint32_t gx, uint32_t gy, uint32_t gz)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    VkDeviceSize align = vk->props.limits.minStorageBufferOffsetAlignment;
    if (!align)
        align = 1;
    VkDescriptorBufferInfo bi[RQ_VK_MAX_BIND];
    VkWriteDescriptorSet w[RQ_VK_MAX_BIND];
    for (uint32_t i = 0; i < n; i++) {
        if (b[i].buf) {
            VkDeviceSize base = b[i].offset / align * align;
            VkDeviceSize range = b[i].offset - base + b[i].bytes;
            bi[i] = (VkDescriptorBufferInfo){b[i].buf, base, range ? range : 4};
        } else {
            bi[i] = (VkDescriptorBufferInfo){vk->dummy.buf, 0, vk->dummy.size};
        }
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = i,
                                      .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    vk->push_desc(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, n, w);
    vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_size, pc);
    vkCmdDispatch(cmd, gx, gy, gz);
}
