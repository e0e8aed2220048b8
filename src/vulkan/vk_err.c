/* The Vulkan backend's errors: VkResult names (the table's error_name, messages) and a failing
 * VkResult recorded as the backend error (rq_vk_fail, which the files below the context call). The
 * bottom of the backend: it calls nothing in src/vulkan. */
#include "vk.h"

const char *rq_vk_result_name(VkResult r)
{
    switch (r) {
#define N(x) case x: return #x;
    N(VK_SUCCESS) N(VK_NOT_READY) N(VK_TIMEOUT) N(VK_INCOMPLETE) N(VK_ERROR_OUT_OF_HOST_MEMORY)
    N(VK_ERROR_OUT_OF_DEVICE_MEMORY) N(VK_ERROR_INITIALIZATION_FAILED) N(VK_ERROR_DEVICE_LOST)
    N(VK_ERROR_MEMORY_MAP_FAILED) N(VK_ERROR_LAYER_NOT_PRESENT) N(VK_ERROR_EXTENSION_NOT_PRESENT)
    N(VK_ERROR_FEATURE_NOT_PRESENT) N(VK_ERROR_INCOMPATIBLE_DRIVER) N(VK_ERROR_TOO_MANY_OBJECTS)
    N(VK_ERROR_FORMAT_NOT_SUPPORTED) N(VK_ERROR_FRAGMENTED_POOL) N(VK_ERROR_UNKNOWN)
    N(VK_ERROR_OUT_OF_POOL_MEMORY) N(VK_ERROR_INVALID_SHADER_NV)
#undef N
    default: return NULL;
    }
}

ropeqk_status rq_vk_fail(ropeqk_ctx *ctx, VkResult r, const char *what)
{
    return rq_backend_fail(&rq_vulkan_backend, ctx, (int32_t)r, what);
}
