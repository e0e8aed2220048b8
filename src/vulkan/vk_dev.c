/* Physical devices the backend can use: the extensions it requires, a device's extension list and
 * compute queue family, and the instance's devices. Below the context (vk_ctx.c) and the
 * tensor-core path's device setup (vk_cm_dev.c), which both ask whether a device has an extension. */
#include "vk.h"

#include <stdlib.h>
#include <string.h>

const char *const rq_vk_required_ext[RQ_VK_N_REQUIRED] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};

const char *const *ropeqk_vulkan_device_extensions(uint32_t *count)
{
    if (count)
        *count = RQ_VK_N_REQUIRED;
    return rq_vk_required_ext;
}

/* 1 when the device has the extension, 0 when not, -1 out of host memory. */
int rq_vk_has_device_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS)
        return 0;
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return -1;
    int found = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

/* The first queue family with compute, or -1. */
int rq_vk_compute_family(VkPhysicalDevice pd)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[32];
    if (n > 32)
        n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            return (int)i;
    return -1;
}

/* 1: a compute queue and the required extensions; 0: not; -1: out of host memory. */
int rq_vk_usable(VkPhysicalDevice pd)
{
    for (uint32_t i = 0; i < RQ_VK_N_REQUIRED; i++) {
        int h = rq_vk_has_device_ext(pd, rq_vk_required_ext[i]);
        if (h <= 0)
            return h;
    }
    return rq_vk_compute_family(pd) >= 0;
}

/* The instance's first RQ_VK_MAX_DEVICES physical devices into pd, their count into *n. */
VkResult rq_vk_physical_devices(VkInstance inst, VkPhysicalDevice *pd, uint32_t *n)
{
    *n = RQ_VK_MAX_DEVICES;
    VkResult r = vkEnumeratePhysicalDevices(inst, n, pd);
    return r == VK_INCOMPLETE ? VK_SUCCESS : r;
}
