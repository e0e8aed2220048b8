/* The Vulkan backend's part of the neutral device listing (ropeqk_list_devices,
 * ropeqk_ctx_device_info; src/core/devices.c): every physical device as "vulkan:N" in the loader's
 * order (the N of rq_vk_open), described from its properties, and the device a spec selects by
 * rq_vk_open's rule. */
#include "vk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 16 /* as vk_ctx.c: the same indices */

static const char *vendor_name(uint32_t id)
{
    switch (id) {
    case 0x1002: return "AMD";
    case 0x10de: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13b5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "Imagination";
    case 0x106b: return "Apple";
    case 0x10005: return "Mesa"; /* VK_VENDOR_ID_MESA: llvmpipe (lavapipe) */
    default: return "";
    }
}

/* Physical device pd (index i, -1: no string) of inst into *o. */
static ropeqk_status describe(VkInstance inst, VkPhysicalDevice pd, int i, ropeqk_device_info *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->backend, sizeof o->backend, "Vulkan");
    if (i >= 0)
        snprintf(o->device, sizeof o->device, "vulkan:%d", i);
    uint32_t iv = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion(&iv) != VK_SUCCESS)
        iv = VK_API_VERSION_1_0;
    snprintf(o->platform, sizeof o->platform, "Vulkan loader, instance version %u.%u.%u", VK_API_VERSION_MAJOR(iv),
             VK_API_VERSION_MINOR(iv), VK_API_VERSION_PATCH(iv));
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    /* driver name (1.2) and allocation limit (1.1) where the device has them */
    uint32_t minor = VK_API_VERSION_MINOR(p.apiVersion), major = VK_API_VERSION_MAJOR(p.apiVersion);
    bool v11 = major > 1 || minor >= 1, v12 = major > 1 || minor >= 2;
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
                                                 .pNext = v12 ? &drv : NULL};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    if (v11)
        vkGetPhysicalDeviceProperties2(pd, &p2);
    snprintf(o->name, sizeof o->name, "%s", p.deviceName);
    const char *vn = vendor_name(p.vendorID);
    snprintf(o->vendor, sizeof o->vendor, "%s%s0x%x%s", vn, *vn ? " (" : "", p.vendorID, *vn ? ")" : "");
    snprintf(o->version, sizeof o->version, "Vulkan %u.%u.%u", major, minor, VK_API_VERSION_PATCH(p.apiVersion));
    if (v12)
        snprintf(o->driver, sizeof o->driver, "%.60s (%.60s)", drv.driverName, drv.driverInfo);
    else
        snprintf(o->driver, sizeof o->driver, "driver %u", p.driverVersion);
    o->type = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? ROPEQK_DEVICE_CPU
              : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU || p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                      p.deviceType == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU
                  ? ROPEQK_DEVICE_GPU
                  : ROPEQK_DEVICE_OTHER;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
        if ((mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mp.memoryHeaps[h].size > o->global_mem)
            o->global_mem = mp.memoryHeaps[h].size;
    o->max_alloc = v11 ? m3.maxMemoryAllocationSize : 0;
    if (o->max_alloc > o->global_mem && o->global_mem)
        o->max_alloc = o->global_mem;
    int push = rq_vk_has_device_ext(pd, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    int coop = rq_vk_has_device_ext(pd, "VK_KHR_cooperative_matrix");
    if (push < 0 || coop < 0) {
        rq_set_error("out of host memory reading the extensions of Vulkan device %s", p.deviceName);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    bool compute = rq_vk_compute_family(pd) >= 0;
    o->usable = push && compute;
    if (!o->usable)
        snprintf(o->unusable, sizeof o->unusable, "%s", !compute ? "no compute queue" : "no " VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    char shapes[256];
    rq_vk_cm_describe(inst, pd, shapes, sizeof shapes); /* the tensor-core path (vk_cm_dev.c) */
    snprintf(o->details, sizeof o->details,
             "cooperative matrices (VK_KHR_cooperative_matrix): %s\nmatrix shapes: %s\ncooperative-matrix shaders: %s",
             coop ? "yes" : "no", shapes,
             rq_vk_cm_built() ? "built" : "not built (no GLSL compiler with GL_KHR_cooperative_matrix at configure time)");
    return ROPEQK_SUCCESS;
}

static VkResult physical_devices(VkInstance inst, VkPhysicalDevice *pd, uint32_t *n)
{
    *n = MAX_DEVICES;
    VkResult r = vkEnumeratePhysicalDevices(inst, n, pd);
    return r == VK_INCOMPLETE ? VK_SUCCESS : r;
}

/* The index rq_vk_open picks for (spec, explicit_spec) among the n described devices, or -1. */
static int32_t pick_of(const ropeqk_device_info *d, uint32_t n, const char *spec, bool explicit_spec)
{
    int32_t pick = -1;
    if (explicit_spec && spec) { /* "vulkan:N": that device, usable or not (then none) */
        char *end = NULL;
        long v = strtol(spec, &end, 10);
        if (end != spec && !*end && v >= 0 && v < (long)n)
            pick = (int32_t)v;
    } else {
        for (uint32_t i = 0; i < n && pick < 0; i++) /* a name: its first match; none: the first usable */
            if (!explicit_spec && spec ? rq_name_contains(d[i].name, spec) : d[i].usable != 0)
                pick = (int32_t)i;
    }
    return pick >= 0 && d[pick].usable ? pick : -1;
}

ropeqk_status rq_vk_list_devices(ropeqk_device_info *infos, uint32_t cap, uint32_t *count, const char *spec,
                                 bool explicit_spec, int32_t *pick)
{
    *count = 0;
    *pick = -1;
    VkInstance inst;
    ropeqk_status st = rq_vk_plain_instance(&inst);
    if (st)
        return st;
    VkPhysicalDevice pd[MAX_DEVICES];
    uint32_t n = 0;
    VkResult r = physical_devices(inst, pd, &n);
    if (r != VK_SUCCESS)
        st = rq_vk_fail(NULL, r, "vkEnumeratePhysicalDevices");
    else if (n == 0) {
        rq_set_error("no Vulkan device found (the drivers list none)");
        st = ROPEQK_ERR_NO_DEVICE;
    }
    /* every device is described (the pick needs names and usability), then copied up to cap */
    ropeqk_device_info *all = st ? NULL : calloc(n, sizeof *all);
    if (!st && !all)
        st = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (uint32_t i = 0; !st && i < n; i++)
        st = describe(inst, pd[i], (int)i, &all[i]);
    if (!st) {
        *pick = pick_of(all, n, spec, explicit_spec);
        if (infos && cap)
            memcpy(infos, all, (n < cap ? n : cap) * sizeof *all);
        *count = n;
    }
    free(all);
    vkDestroyInstance(inst, NULL);
    return st;
}

ropeqk_status rq_vk_ctx_device_info(const ropeqk_ctx *ctx, ropeqk_device_info *out)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    int index = -1;
    VkPhysicalDevice pd[MAX_DEVICES];
    uint32_t n = 0;
    /* "vulkan:N" counts the devices of an instance of the library's own: a borrowed instance's
     * order may differ, so its devices get no string */
    if (vk->own && physical_devices(vk->instance, pd, &n) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && index < 0; i++)
            if (pd[i] == vk->phys)
                index = (int)i;
    return describe(vk->instance, vk->phys, index, out);
}
