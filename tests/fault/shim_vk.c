/* Fault injection at the Vulkan call sites the library uses to allocate and submit: the n-th call
 * fails with the error a driver returns when out of memory (see shim.h). */
#include "shim.h"

#include <vulkan/vulkan.h>

VkResult __real_vkCreateBuffer(VkDevice, const VkBufferCreateInfo *, const VkAllocationCallbacks *, VkBuffer *);
VkResult __real_vkAllocateMemory(VkDevice, const VkMemoryAllocateInfo *, const VkAllocationCallbacks *,
                                 VkDeviceMemory *);
VkResult __real_vkMapMemory(VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkMemoryMapFlags, void **);
VkResult __real_vkCreateComputePipelines(VkDevice, VkPipelineCache, uint32_t, const VkComputePipelineCreateInfo *,
                                         const VkAllocationCallbacks *, VkPipeline *);
VkResult __real_vkQueueSubmit(VkQueue, uint32_t, const VkSubmitInfo *, VkFence);
VkResult __real_vkAllocateCommandBuffers(VkDevice, const VkCommandBufferAllocateInfo *, VkCommandBuffer *);

VkResult __wrap_vkCreateBuffer(VkDevice d, const VkBufferCreateInfo *ci, const VkAllocationCallbacks *a, VkBuffer *b)
{
    return fault_hit(F_VK_CREATE_BUFFER) ? VK_ERROR_OUT_OF_DEVICE_MEMORY : __real_vkCreateBuffer(d, ci, a, b);
}

VkResult __wrap_vkAllocateMemory(VkDevice d, const VkMemoryAllocateInfo *ai, const VkAllocationCallbacks *a,
                                 VkDeviceMemory *m)
{
    return fault_hit(F_VK_ALLOCATE_MEMORY) ? VK_ERROR_OUT_OF_DEVICE_MEMORY : __real_vkAllocateMemory(d, ai, a, m);
}

VkResult __wrap_vkMapMemory(VkDevice d, VkDeviceMemory m, VkDeviceSize o, VkDeviceSize n, VkMemoryMapFlags f,
                            void **p)
{
    return fault_hit(F_VK_MAP_MEMORY) ? VK_ERROR_MEMORY_MAP_FAILED : __real_vkMapMemory(d, m, o, n, f, p);
}

VkResult __wrap_vkCreateComputePipelines(VkDevice d, VkPipelineCache c, uint32_t n,
                                         const VkComputePipelineCreateInfo *ci, const VkAllocationCallbacks *a,
                                         VkPipeline *p)
{
    return fault_hit(F_VK_CREATE_PIPELINES) ? VK_ERROR_OUT_OF_HOST_MEMORY
                                            : __real_vkCreateComputePipelines(d, c, n, ci, a, p);
}

VkResult __wrap_vkQueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *s, VkFence f)
{
    return fault_hit(F_VK_QUEUE_SUBMIT) ? VK_ERROR_DEVICE_LOST : __real_vkQueueSubmit(q, n, s, f);
}

VkResult __wrap_vkAllocateCommandBuffers(VkDevice d, const VkCommandBufferAllocateInfo *ai, VkCommandBuffer *c)
{
    return fault_hit(F_VK_ALLOCATE_COMMAND_BUFFERS) ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                                                    : __real_vkAllocateCommandBuffers(d, ai, c);
}
