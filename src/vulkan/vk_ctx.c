/* Vulkan contexts: devices listed and opened by the library, or the caller's borrowed objects;
 * the validation-layer hook the tests use. */
#include "vk.h"
#include "vk_submit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation messages (ROPEQK_VULKAN_VALIDATION=1) ------------------------------------------ */
/* process-wide too, so a test can check every context it made, destroyed or not */
static atomic_uint total_msgs;
static char total_first[512];
static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)type;
    struct rq_vk_ctx *vk = user;
    if (!(sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    /* first message wins the buffer; the layer calls back from the thread that made the call */
    if (atomic_fetch_add(&vk->vmsg, 1) == 0 && data && data->pMessage)
        snprintf(vk->first_msg, sizeof vk->first_msg, "%s", data->pMessage);
    if (atomic_fetch_add(&total_msgs, 1) == 0 && data && data->pMessage)
        snprintf(total_first, sizeof total_first, "%s", data->pMessage);
    fprintf(stderr, "ropeqk: Vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "(no text)");
    return VK_FALSE;
}

/* ROPEQK_VULKAN_VALIDATION: unset, "" or "0": off; "1" or "required": on, and a context cannot be made
 * without the layer (a test that believes it checks must not silently not check: CI on lavapipe);
 * "auto": on where the layer is installed, off elsewhere (tests/harness.c then skips the suites that
 * ask for it, saying why). Anything else is refused. */
enum { VAL_OFF, VAL_REQUIRED, VAL_AUTO, VAL_BAD };
static int env_validation(void)
{
    const char *v = getenv("ROPEQK_VULKAN_VALIDATION");
    if (!v || !*v || !strcmp(v, "0"))
        return VAL_OFF;
    if (!strcmp(v, "1") || !strcmp(v, "required"))
        return VAL_REQUIRED;
    if (!strcmp(v, "auto"))
        return VAL_AUTO;
    rq_set_error("ROPEQK_VULKAN_VALIDATION='%s': expected 0, 1 (or required) or auto", v);
    return VAL_BAD;
}

/* 1 when the instance layer exists, 0 when not, -1 out of host memory. */
static int has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkLayerProperties *l = calloc(n, sizeof *l);
    if (!l)
        return -1;
    int found = 0;
    if (vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(l[i].layerName, name) == 0;
    free(l);
    return found;
}

/* An instance of our own; with validation when asked for and the layer is installed (asking for it
 * without the layer is an error: a test that believes it checks must not silently not check). */
static ropeqk_status make_instance(struct rq_vk_ctx *vk, int mode, VkInstance *out)
{
    *out = VK_NULL_HANDLE;
    if (mode == VAL_BAD)
        return ROPEQK_ERR_BAD_CONFIG;
    const char *layer = "VK_LAYER_KHRONOS_validation";
    int have = mode != VAL_OFF ? has_layer(layer) : 1;
    if (have < 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (!have && mode == VAL_REQUIRED) {
        rq_set_error("ROPEQK_VULKAN_VALIDATION=%s but %s is not installed (Debian: vulkan-validationlayers; "
                     "=auto runs without it)", getenv("ROPEQK_VULKAN_VALIDATION"), layer);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    bool validation = mode != VAL_OFF && have;
    vk->validation = validation ? ROPEQK_VALIDATION_ON
                     : mode == VAL_AUTO ? ROPEQK_VALIDATION_UNAVAILABLE : ROPEQK_VALIDATION_OFF;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "ropeqk",
                             .pEngineName = "ropeqk", .apiVersion = VK_API_VERSION_1_2};
    const char *ext[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message, .pUserData = vk};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                               .enabledLayerCount = validation ? 1 : 0, .ppEnabledLayerNames = &layer,
                               .enabledExtensionCount = validation ? 1 : 0, .ppEnabledExtensionNames = ext,
                               .pNext = validation ? &mci : NULL};
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED) {
        rq_set_error("no Vulkan driver found (vkCreateInstance: %s; Debian: mesa-vulkan-drivers)",
                     rq_vk_result_name(r));
        return ROPEQK_ERR_NO_DEVICE;
    }
    if (r != VK_SUCCESS)
        return rq_vk_fail(NULL, r, "vkCreateInstance");
    if (validation) {
        PFN_vkCreateDebugUtilsMessengerEXT f =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(*out, "vkCreateDebugUtilsMessengerEXT");
        if (!f || (r = f(*out, &mci, NULL, &vk->messenger)) != VK_SUCCESS) {
            vkDestroyInstance(*out, NULL);
            *out = VK_NULL_HANDLE;
            return rq_vk_fail(NULL, f ? r : VK_ERROR_EXTENSION_NOT_PRESENT, "vkCreateDebugUtilsMessengerEXT");
        }
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_plain_instance(VkInstance *out)
{
    struct rq_vk_ctx none; /* no messenger: no validation */
    memset(&none, 0, sizeof none);
    return make_instance(&none, VAL_OFF, out);
}

/* full: also the extension checks (usable, cooperative_matrix), which allocate */
static void fill_info(VkInstance inst, VkPhysicalDevice pd, ropeqk_vulkan_device_info *d, bool full)
{
    memset(d, 0, sizeof *d);
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    bool v12 = VK_API_VERSION_MINOR(p.apiVersion) >= 2 || VK_API_VERSION_MAJOR(p.apiVersion) > 1;
    if (v12)
        vkGetPhysicalDeviceProperties2(pd, &p2);
    snprintf(d->name, sizeof d->name, "%s", p.deviceName);
    if (v12)
        snprintf(d->driver, sizeof d->driver, "%.60s (%.60s)", drv.driverName, drv.driverInfo);
    else
        snprintf(d->driver, sizeof d->driver, "driver %u", p.driverVersion);
    d->api_version = p.apiVersion;
    d->cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    d->usable = full && rq_vk_usable(pd) > 0;
    d->cooperative_matrix = full && rq_vk_has_device_ext(pd, "VK_KHR_cooperative_matrix") > 0;
    if (full) /* the tensor-core path (vk_cm_dev.c) */
        rq_vk_cm_describe(inst, pd, d->cooperative_matrix_shapes, sizeof d->cooperative_matrix_shapes);
    d->coopmat_shaders = rq_vk_cm_built();
}

ropeqk_status ropeqk_vulkan_list_devices(ropeqk_vulkan_device_info *infos, uint32_t cap, uint32_t *count)
{
    if (!count || (!infos && cap))
        return ROPEQK_ERR_NULL_POINTER;
    *count = 0;
    struct rq_vk_ctx tmp;
    memset(&tmp, 0, sizeof tmp);
    VkInstance inst;
    ropeqk_status st = make_instance(&tmp, false, &inst);
    if (st)
        return st;
    VkPhysicalDevice pd[RQ_VK_MAX_DEVICES];
    uint32_t n = 0;
    VkResult r = rq_vk_physical_devices(inst, pd, &n);
    if (r != VK_SUCCESS)
        st = rq_vk_fail(NULL, r, "vkEnumeratePhysicalDevices");
    for (uint32_t i = 0; !st && i < n && i < cap; i++)
        fill_info(inst, pd[i], &infos[i], true);
    if (!st)
        *count = n;
    vkDestroyInstance(inst, NULL);
    return st;
}

/* What every Vulkan context does once it has a device and a queue: properties, the push-descriptor
 * entry point, a command pool and fence for the host-memory calls, the configuration. */
static ropeqk_status vk_finish(ropeqk_ctx *ctx, const ropeqk_tuning *tuning)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
    vkGetPhysicalDeviceMemoryProperties(vk->phys, &vk->memprops);
    vk->push_desc = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(vk->device, "vkCmdPushDescriptorSetKHR");
    if (!vk->push_desc) {
        rq_set_error("Vulkan device %s lacks %s (enable it on a borrowed VkDevice)", vk->props.deviceName,
                     VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
        return ROPEQK_ERR_NO_DEVICE;
    }
    ropeqk_vulkan_device_info info;
    fill_info(vk->instance, vk->phys, &info, false);
    snprintf(ctx->device_desc, sizeof ctx->device_desc, "%.100s (Vulkan %u.%u, %.120s)", info.name,
             VK_API_VERSION_MAJOR(info.api_version), VK_API_VERSION_MINOR(info.api_version), info.driver);
    snprintf(ctx->dev.name, sizeof ctx->dev.name, "%.127s", info.name);
    snprintf(ctx->dev.platform, sizeof ctx->dev.platform, "Vulkan");
    snprintf(ctx->dev.driver, sizeof ctx->dev.driver, "%u", vk->props.driverVersion);
    ctx->dev.cpu = info.cpu;
    ctx->dev.max_wg = vk->props.limits.maxComputeWorkGroupInvocations;
    ctx->dev.local_mem = vk->props.limits.maxComputeSharedMemorySize;
    ropeqk_status st = rq_ctx_configure(ctx, tuning);
    if (!st)
        st = rq_vk_timeout_from_env(&vk->timeout_ns);
    if (st)
        return st;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = vk->qfam};
    VkResult r = vkCreateCommandPool(vk->device, &pci, NULL, &vk->pool);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (r == VK_SUCCESS)
        r = vkCreateFence(vk->device, &fci, NULL, &vk->fence);
    if (r != VK_SUCCESS)
        return rq_vk_fail(ctx, r, "vkCreateCommandPool/vkCreateFence");
    return rq_vk_buf_create(ctx, 256, false, 0, &vk->dummy);
}

/* ctx->impl: the Vulkan context, with its queue lock. */
static ropeqk_status impl_alloc(ropeqk_ctx *ctx)
{
    struct rq_vk_ctx *vk = calloc(1, sizeof *vk);
    if (!vk)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ctx->impl = vk;
    atomic_init(&vk->vmsg, 0);
    if (pthread_mutex_init(&vk->qlock, NULL) != 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    vk->qlock_ok = true;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_open(ropeqk_ctx *ctx, const char *spec, bool explicit_spec, const ropeqk_tuning *tuning)
{
    /* "vulkan" (the first usable device) or "vulkan:N"; a bare spec is a device name */
    int index = -1;
    const char *name = NULL;
    if (explicit_spec && spec) {
        char *end = NULL;
        long v = strtol(spec, &end, 10);
        if (end == spec || *end || v < 0 || v > INT32_MAX) {
            rq_set_error("device 'vulkan:%s': expected 'vulkan' or 'vulkan:N'", spec);
            return ROPEQK_ERR_NO_DEVICE;
        }
        index = (int)v;
    } else {
        name = spec;
    }
    ropeqk_status st = impl_alloc(ctx);
    if (st)
        return st;
    struct rq_vk_ctx *vk = rq_vk(ctx);
    vk->own = true;
    if ((st = make_instance(vk, env_validation(), &vk->instance)))
        return st;
    VkPhysicalDevice pd[RQ_VK_MAX_DEVICES];
    uint32_t n = 0;
    VkResult r = rq_vk_physical_devices(vk->instance, pd, &n);
    if (r != VK_SUCCESS)
        return rq_vk_fail(NULL, r, "vkEnumeratePhysicalDevices");
    int pick = -1, ok = 0;
    bool oom = false;
    for (uint32_t i = 0; i < n && pick < 0 && !oom; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pd[i], &p);
        int u = index >= 0 || name ? 1 : rq_vk_usable(pd[i]);
        oom = u < 0;
        if (!oom && (index >= 0 ? (int)i == index : name ? rq_name_contains(p.deviceName, name) : u))
            pick = (int)i;
    }
    if (pick >= 0 && (ok = rq_vk_usable(pd[pick])) < 0)
        oom = true;
    if (oom)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (pick < 0 || !ok) {
        if (pick >= 0)
            rq_set_error("Vulkan device %d has no compute queue or lacks %s", pick, rq_vk_required_ext[0]);
        else if (index >= 0)
            rq_set_error("no Vulkan device vulkan:%d (%u found)", index, n);
        else
            rq_set_error(name ? "no Vulkan device matches '%s'" : "no usable Vulkan device%s", name ? name : "");
        return ROPEQK_ERR_NO_DEVICE;
    }
    vk->phys = pd[pick];
    vk->qfam = (uint32_t)rq_vk_compute_family(vk->phys);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = vk->qfam,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDeviceTimelineSemaphoreFeatures tl; /* the neutral run API's events (vk_submit.c) */
    void *chain = rq_vk_timeline_chain(vk->phys, &tl, NULL);
    vk->timeline = chain == &tl;
    /* the tensor-core path's extensions and features where the device has them all (vk_cm_dev.c; its
     * VkPhysicalDeviceVulkan12Features carries timelineSemaphore, as the promoted structure must not be
     * chained beside it); a device that refuses them is created again without */
    rq_vk_cm_setup cms;
    if ((st = rq_vk_cm_setup_device(vk->instance, vk->phys, &cms)))
        return st;
    if (cms.enable) {
        cms.f12.timelineSemaphore = vk->timeline ? VK_TRUE : VK_FALSE;
        chain = &cms.f11;
    }
    const char *ext[RQ_VK_N_REQUIRED + 2];
    memcpy(ext, rq_vk_required_ext, sizeof rq_vk_required_ext);
    for (uint32_t i = 0; cms.enable && i < cms.n_ext; i++)
        ext[RQ_VK_N_REQUIRED + i] = cms.ext[i];
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = chain,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = RQ_VK_N_REQUIRED + (cms.enable ? cms.n_ext : 0),
                              .ppEnabledExtensionNames = ext};
    r = vkCreateDevice(vk->phys, &dci, NULL, &vk->device);
    if (r != VK_SUCCESS && cms.enable) {
        snprintf(cms.why, sizeof cms.why, "vkCreateDevice with its features failed (%s)",
                 rq_vk_result_name(r) ? rq_vk_result_name(r) : "?");
        cms.enable = false;
        dci.pNext = vk->timeline ? (void *)&tl : NULL;
        dci.enabledExtensionCount = RQ_VK_N_REQUIRED;
        r = vkCreateDevice(vk->phys, &dci, NULL, &vk->device);
    }
    if (r != VK_SUCCESS)
        return rq_vk_fail(NULL, r, "vkCreateDevice");
    vkGetDeviceQueue(vk->device, vk->qfam, 0, &vk->queue);
    if ((st = rq_vk_cm_caps_fill(ctx, &cms)))
        return st;
    return vk_finish(ctx, tuning);
}

ropeqk_status ropeqk_vulkan_ctx_create(const ropeqk_vulkan_ctx_params *params, ropeqk_ctx **out)
{
    if (!out)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (!params || !params->instance || !params->physical_device || !params->device || !params->queue)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_ctx *ctx = rq_ctx_alloc(&rq_vulkan_backend);
    if (!ctx)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_status st = impl_alloc(ctx);
    if (!st) {
        struct rq_vk_ctx *vk = rq_vk(ctx);
        vk->instance = params->instance;
        vk->phys = params->physical_device;
        vk->device = params->device;
        vk->queue = params->queue;
        vk->qfam = params->queue_family;
        vk->timeline = params->timeline_semaphore == 1;
        st = rq_vk_cm_caps_fill(ctx, NULL); /* not taken: the device's features are the caller's */
        if (!st)
            st = vk_finish(ctx, &params->tuning);
    }
    if (st) {
        rq_ctx_free(ctx);
        return st;
    }
    *out = ctx;
    return ROPEQK_SUCCESS;
}

void rq_vk_close(ropeqk_ctx *ctx)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    if (vk) {
        /* our host calls are done, unless one timed out (rq_vk_settle waits for it, bounded: on a
         * hung device the objects are leaked, not destroyed in use, and nothing waits forever);
         * recorded plans are the caller's */
        bool idle = true;
        if (vk->device && vk->fence) {
            if (vk->qlock_ok)
                pthread_mutex_lock(&vk->qlock);
            idle = rq_vk_settle(ctx);
            if (vk->qlock_ok)
                pthread_mutex_unlock(&vk->qlock);
        }
        /* the neutral run API's submissions (vk_submit.c): waited for on its timeline, bounded the
         * same way, before its pool and semaphore go */
        if (idle && vk->device && vk->runq) {
            uint64_t last = 0;
            VkSemaphore tl = rq_vk_timeline(ctx, &last);
            uint64_t ns = vk->timeout_ns > 10000000000u ? vk->timeout_ns : 10000000000u;
            idle = rq_vk_wait_value(ctx, tl, last, ns) == ROPEQK_SUCCESS;
        }
        if (vk->device && idle) {
            rq_vk_runq_free(ctx);
            rq_vk_pipes_free(ctx);
            rq_vk_buf_free(ctx, &vk->dummy);
            if (vk->fence)
                vkDestroyFence(vk->device, vk->fence, NULL);
            if (vk->pool)
                vkDestroyCommandPool(vk->device, vk->pool, NULL);
            if (vk->own)
                vkDestroyDevice(vk->device, NULL);
        }
        if (vk->own && vk->instance && idle) {
            if (vk->messenger) {
                PFN_vkDestroyDebugUtilsMessengerEXT f = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                    vk->instance, "vkDestroyDebugUtilsMessengerEXT");
                if (f)
                    f(vk->instance, vk->messenger, NULL);
            }
            vkDestroyInstance(vk->instance, NULL);
        }
        if (vk->qlock_ok)
            pthread_mutex_destroy(&vk->qlock);
        free(vk->dead);
        free(vk);
        ctx->impl = NULL;
    }
}

VkInstance ropeqk_vulkan_instance(const ropeqk_ctx *ctx) { return rq_is_vk(ctx) ? rq_vk(ctx)->instance : VK_NULL_HANDLE; }
VkPhysicalDevice ropeqk_vulkan_physical_device(const ropeqk_ctx *ctx)
{
    return rq_is_vk(ctx) ? rq_vk(ctx)->phys : VK_NULL_HANDLE;
}
VkDevice ropeqk_vulkan_device(const ropeqk_ctx *ctx) { return rq_is_vk(ctx) ? rq_vk(ctx)->device : VK_NULL_HANDLE; }
VkQueue ropeqk_vulkan_queue(const ropeqk_ctx *ctx, uint32_t *queue_family)
{
    if (queue_family)
        *queue_family = rq_is_vk(ctx) ? rq_vk(ctx)->qfam : 0;
    return rq_is_vk(ctx) ? rq_vk(ctx)->queue : VK_NULL_HANDLE;
}

void rq_vk_diagnostics(const ropeqk_ctx *ctx, ropeqk_diagnostics *out)
{
    out->messages = ropeqk_vulkan_validation_messages(ctx, out->first, sizeof out->first);
    if (ctx) {
        out->validation = rq_vk(ctx)->validation;
        return;
    }
    /* what a new context would get: the environment's mode and whether the layer is installed */
    int mode = env_validation();
    if (mode == VAL_REQUIRED)
        out->validation = ROPEQK_VALIDATION_ON;
    else if (mode == VAL_AUTO)
        out->validation = has_layer("VK_LAYER_KHRONOS_validation") > 0 ? ROPEQK_VALIDATION_ON
                                                                        : ROPEQK_VALIDATION_UNAVAILABLE;
}

uint32_t ropeqk_vulkan_validation_messages(const ropeqk_ctx *ctx, char *buf, size_t len)
{
    if (buf && len)
        buf[0] = '\0';
    if (!ctx) {
        uint32_t n = atomic_load(&total_msgs);
        if (n && buf && len)
            snprintf(buf, len, "%s", total_first);
        return n;
    }
    if (!rq_is_vk(ctx))
        return 0;
    uint32_t n = atomic_load(&rq_vk(ctx)->vmsg);
    if (n && buf && len)
        snprintf(buf, len, "%s", rq_vk(ctx)->first_msg);
    return n;
}
