/* The tensor-core path's device side (docs/tensor-cores.md): which devices take the cooperative-matrix
 * shaders, what a device the library opens enables for them, and the listing of a device's matrix
 * shapes (`ropeqk devices`). The shaders use one shape, 16 x 16 x 16 with f16 A and B and f32 C and
 * result at subgroup scope (what NVIDIA lists from Turing on, AMD RDNA3, and Intel's Xe2), and need
 * Vulkan 1.2 with shaderFloat16, vulkanMemoryModel (every module with cooperative matrices uses the
 * Vulkan memory model), storageBuffer16BitAccess (the f16 planes are read as f16vec4) and
 * VK_KHR_cooperative_matrix's cooperativeMatrix; VK_EXT_subgroup_size_control, where present, pins
 * the pipelines to the subgroup size the work-group was sized for. */
#include "vk.h"

#include <stdio.h>
#include <string.h>

extern const size_t rq_spv_cm_attn_cm_size, rq_spv_cm_scores_cm_size;

bool rq_vk_cm_built(void) { return rq_spv_cm_attn_cm_size > 0 && rq_spv_cm_scores_cm_size > 0; }

static const char *ctype(int t)
{
    static const char *const n[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
    if (t >= 0 && t <= 10)
        return n[t];
    if (t == RQ_VK_COMPONENT_TYPE_BFLOAT16)
        return "bf16";
    return "other";
}

#define RQ_CM_MAXP 64

int rq_vk_cm_describe(VkInstance inst, VkPhysicalDevice pd, char *buf, size_t len)
{
    buf[0] = '\0';
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR f =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    int h = rq_vk_has_device_ext(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    if (h <= 0 || !f) {
        snprintf(buf, len, "%s", h < 0 ? "unknown (out of host memory)" : "none (no VK_KHR_cooperative_matrix)");
        return h < 0 ? -1 : 0;
    }
    VkCooperativeMatrixPropertiesKHR p[RQ_CM_MAXP];
    uint32_t n = RQ_CM_MAXP;
    for (uint32_t i = 0; i < n; i++)
        p[i] = (VkCooperativeMatrixPropertiesKHR){.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
    VkResult r = f(pd, &n, p);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        snprintf(buf, len, "unknown (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR: %d)", (int)r);
        return 0;
    }
    bool has16 = false;
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const VkCooperativeMatrixPropertiesKHR *q = &p[i];
        has16 = has16 || (q->MSize == 16 && q->NSize == 16 && q->KSize == 16 && q->AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                          q->BType == VK_COMPONENT_TYPE_FLOAT16_KHR && q->CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                          q->ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && q->scope == VK_SCOPE_SUBGROUP_KHR &&
                          !q->saturatingAccumulation);
        if (k + 1 >= len)
            continue; /* the text is full; the test above still sees every entry */
        int w = snprintf(buf + k, len - k, "%s%ux%ux%u %s*%s+%s->%s%s%s", i ? ", " : "", q->MSize, q->NSize, q->KSize,
                         ctype(q->AType), ctype(q->BType), ctype(q->CType), ctype(q->ResultType),
                         q->scope == VK_SCOPE_SUBGROUP_KHR ? "" : " (not subgroup scope)",
                         q->saturatingAccumulation ? " sat" : "");
        k = w < 0 ? len : k + (size_t)w;
    }
    if (n == 0)
        snprintf(buf, len, "none listed");
    return has16 ? 1 : 0;
}

ropeqk_status rq_vk_cm_setup_device(VkInstance inst, VkPhysicalDevice pd, rq_vk_cm_setup *s)
{
    memset(s, 0, sizeof *s);
    VkPhysicalDeviceProperties pr;
    vkGetPhysicalDeviceProperties(pd, &pr);
    int has16 = rq_vk_cm_describe(inst, pd, s->shapes, sizeof s->shapes);
    if (has16 < 0) /* a failed allocation fails the context, as every other one */
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (!rq_vk_cm_built()) {
        snprintf(s->why, sizeof s->why, "this build has no cooperative-matrix shaders (no GLSL compiler with "
                                        "GL_KHR_cooperative_matrix at configure time)");
        return ROPEQK_SUCCESS;
    }
    if (VK_API_VERSION_MAJOR(pr.apiVersion) == 1 && VK_API_VERSION_MINOR(pr.apiVersion) < 2) {
        snprintf(s->why, sizeof s->why, "Vulkan 1.2 needed");
        return ROPEQK_SUCCESS;
    }
    if (!has16) {
        snprintf(s->why, sizeof s->why, "%s", strncmp(s->shapes, "none (no VK_KHR", 15) == 0
                                                  ? "no VK_KHR_cooperative_matrix"
                                                  : "no 16x16x16 f16*f16+f32 subgroup shape listed");
        return ROPEQK_SUCCESS;
    }
    s->fcm = (VkPhysicalDeviceCooperativeMatrixFeaturesKHR){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    s->fsz = (VkPhysicalDeviceSubgroupSizeControlFeaturesEXT){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    s->f12 = (VkPhysicalDeviceVulkan12Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &s->fcm};
    s->f11 = (VkPhysicalDeviceVulkan11Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &s->f12};
    /* the library's instances ask for Vulkan 1.2 (vk_ctx.c): subgroup size control only through its
     * extension, whatever the device's version */
    int hsz = rq_vk_has_device_ext(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    if (hsz < 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (hsz > 0)
        s->fcm.pNext = &s->fsz;
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s->f11};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!s->fcm.cooperativeMatrix || !s->f12.shaderFloat16 || !s->f12.vulkanMemoryModel ||
        !s->f11.storageBuffer16BitAccess) {
        snprintf(s->why, sizeof s->why, "a feature is missing (cooperativeMatrix %d, shaderFloat16 %d, "
                 "vulkanMemoryModel %d, storageBuffer16BitAccess %d)", s->fcm.cooperativeMatrix, s->f12.shaderFloat16,
                 s->f12.vulkanMemoryModel, s->f11.storageBuffer16BitAccess);
        return ROPEQK_SUCCESS;
    }
    /* the subgroup size: the device's default for compute, pinned where the device allows */
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT szp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    /* VkPhysicalDeviceCooperativeMatrixPropertiesKHR: the stages that take cooperative matrices */
    struct {
        VkStructureType sType;
        void *pNext;
        VkShaderStageFlags stages;
    } cmp = {(VkStructureType)1000506002, hsz > 0 ? &szp : NULL, 0};
    VkPhysicalDeviceSubgroupProperties sgp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &cmp};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sgp};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    if (!(cmp.stages & VK_SHADER_STAGE_COMPUTE_BIT)) {
        snprintf(s->why, sizeof s->why, "cooperative matrices not supported in compute shaders");
        return ROPEQK_SUCCESS;
    }
    s->sg = sgp.subgroupSize;
    if (s->sg < 16 || s->sg > 128 || (s->sg & (s->sg - 1)) || !(sgp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
        snprintf(s->why, sizeof s->why, "subgroup size %u in compute (16..128 needed)", s->sg);
        return ROPEQK_SUCCESS;
    }
    s->size_ctl = hsz > 0 && s->fsz.subgroupSizeControl && s->fsz.computeFullSubgroups &&
                  (szp.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) && szp.minSubgroupSize <= s->sg &&
                  s->sg <= szp.maxSubgroupSize;
    /* enable exactly what the shaders use */
    VkPhysicalDeviceVulkan11Features f11 = {.sType = s->f11.sType, .pNext = &s->f12, .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = s->f12.sType, .pNext = &s->fcm, .shaderFloat16 = VK_TRUE,
                                            .vulkanMemoryModel = VK_TRUE};
    s->f11 = f11;
    s->f12 = f12;
    s->fcm = (VkPhysicalDeviceCooperativeMatrixFeaturesKHR){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
                                                            .pNext = s->size_ctl ? &s->fsz : NULL, .cooperativeMatrix = VK_TRUE};
    s->fsz = (VkPhysicalDeviceSubgroupSizeControlFeaturesEXT){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT,
                                                              .subgroupSizeControl = VK_TRUE, .computeFullSubgroups = VK_TRUE};
    s->ext[s->n_ext++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (s->size_ctl)
        s->ext[s->n_ext++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
    s->enable = true;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_cm_caps_fill(ropeqk_ctx *ctx, const rq_vk_cm_setup *s)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    rq_vk_cm_caps *c = &vk->cm;
    memset(c, 0, sizeof *c);
    char shapes[224];
    if (s)
        snprintf(shapes, sizeof shapes, "%s", s->shapes);
    else if (rq_vk_cm_describe(vk->instance, vk->phys, shapes, sizeof shapes) < 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    c->real = s && s->enable;
    c->size_ctl = c->real && s->size_ctl;
    c->sg = c->real ? s->sg : 0;
    const char *why = !s ? "a borrowed device: the library does not know which features its creator enabled"
                         : s->why;
    if (c->real)
        snprintf(c->desc, sizeof c->desc, "%s; used (16x16x16 f16, subgroup %u%s)", shapes, c->sg,
                 c->size_ctl ? ", pinned" : "");
    else
        snprintf(c->desc, sizeof c->desc, "%s; not used: %.150s", shapes, why);
    return ROPEQK_SUCCESS;
}

uint32_t rq_vk_cm_pipe_sg(const ropeqk_ctx *ctx, rq_vk_shader sh)
{
    const rq_vk_cm_caps *c = &rq_vk(ctx)->cm;
    return (sh == RQ_VK_SH_CM_ATTN || sh == RQ_VK_SH_CM_SCORES) && c->size_ctl ? c->sg : 0;
}
