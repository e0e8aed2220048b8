/* vk_angle: glsl/angle.glsl (accurate RoPE angles and cos/sin) and glsl/tanh.glsl (the soft-cap's
 * tanh) measured against an exact reference on the first Vulkan device (lavapipe in CI), with the
 * Khronos validation layer on.
 *
 * usage: test_vk_angle SHADER.spv   (env RQ_SEED=n fixes the random inputs; the seed is printed)
 *
 * The shader (angle_test.comp) gets (p, v.x, v.y, v.z): an int32 position and a frequency
 * v = inv_freq / pi split into three floats exactly as the host does (src/core/plan.c, split_freqs), and
 * returns t = rq_half_turns(p, v), rq_cossinpi(t) and rq_rope_cossin(p, v). The reference reduces
 * p * (v.x + v.y + v.z) mod 2 exactly in integers (each float is m * 2^e with a 24-bit m, so p*m fits
 * int64) and evaluates cosl/sinl(pi * t) in long double, so its error (~1e-19) is nothing next to
 * float's. Inputs: positions 0..2^20 (every one for a few frequencies, random for the rest), near
 * INT32_MAX, near INT32_MIN, random negatives and random over all of int32; frequencies of head dims
 * 64 and 128 at bases 10000 and 500000, plus tiny and large ones; and rq_cossinpi alone on a dense grid
 * and random floats of [-1, 1].
 *
 * Bounds: |cos - ref|, |sin - ref| <= 5e-7 for every input, |t - ref| <= 2e-7 half-turns, and
 * rq_cossinpi alone <= 1.5e-7. Measured on lavapipe (llvmpipe, LLVM 15, Vulkan 1.3.230; x86-64), max
 * over all categories and a few seeds: cos/sin via rq_half_turns + rq_cossinpi 1.53e-7,
 * rq_rope_cossin 9.0e-8, t 3.2e-8 half-turns, rq_cossinpi alone 8.6e-8. Bumping one sine coefficient
 * by 1e-4 relative (2.5502 -> 2.5505) already fails the rq_cossinpi bound (4.0e-7).
 *
 * rq_tanh (mode 2) against tanhl: a dense grid of [-12, 12], every float of a few thousand ulps
 * around the branch point 0.75 and the clamp at 10, random bit patterns of every normal exponent up to
 * 2^7, and large, infinite and tiny arguments. Bound: 2.5e-7 relative (the implementation's own
 * analysis gives ~1e-7 with a correctly rounded division; Vulkan allows the division 2.5 ulp).
 *
 * Exit status: 0 pass, 1 fail (an error over its bound or any validation message), 77 skip (no Vulkan
 * loader/device or no validation layer installed). */
#include "rng.h"
#include <vulkan/vulkan.h>

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SKIP 77
#define CHUNK (1u << 20) /* items per dispatch */

static const long double PI_L = 3.141592653589793238462643383279502884L;

/* ---------------------------------------------------------------- validation messages */

static unsigned n_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)type;
    (void)user;
    n_messages++;
    fprintf(stderr, "vulkan %s: %s\n", sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "ERROR" : "WARNING",
            data && data->pMessage ? data->pMessage : "(no text)");
    return VK_FALSE;
}

/* ---------------------------------------------------------------- a minimal compute harness */

typedef struct {
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    VkBuffer buf[2];
    VkDeviceMemory mem[2];
    void *map[2];
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkShaderModule module;
    VkPipeline pipe;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkCommandPool cpool;
    VkCommandBuffer cmd;
    VkFence fence;
} vk;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        VkResult r_ = (call);                                                                      \
        if (r_ != VK_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_);         \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int read_file(const char *path, uint32_t **out, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 1;
    long n = (fseek(f, 0, SEEK_END) == 0) ? ftell(f) : -1;
    if (n <= 0 || n % 4 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return 1;
    }
    *out = malloc((size_t)n);
    int bad = !*out || fread(*out, 1, (size_t)n, f) != (size_t)n;
    fclose(f);
    *size = (size_t)n;
    return bad;
}

static int has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS)
        return 0;
    VkLayerProperties *p = calloc(n ? n : 1, sizeof *p);
    int found = 0;
    if (p && vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            found |= strcmp(p[i].layerName, name) == 0;
    free(p);
    return found;
}

/* 0 ok, SKIP no instance/device/layer, 1 error */
static int vk_init(vk *v, const char *spv_path, VkDeviceSize bytes_in, VkDeviceSize bytes_out)
{
    static const char *layer = "VK_LAYER_KHRONOS_validation";
    static const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (!has_layer(layer)) {
        fprintf(stderr, "SKIP: %s is not installed (no loader, or no vulkan-validationlayers)\n", layer);
        return SKIP;
    }
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message,
    };
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "ropeqk vk_angle",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pNext = &mci, /* also reports on vkCreateInstance/vkDestroyInstance */
                                .pApplicationInfo = &app,
                                .enabledLayerCount = 1,
                                .ppEnabledLayerNames = &layer,
                                .enabledExtensionCount = 1,
                                .ppEnabledExtensionNames = &ext};
    VkResult r = vkCreateInstance(&ici, NULL, &v->inst);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED) {
        fprintf(stderr, "SKIP: no Vulkan driver (vkCreateInstance: %d)\n", (int)r);
        return SKIP;
    }
    CHECK(r);
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(v->inst, "vkCreateDebugUtilsMessengerEXT");
    v->destroy_messenger =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(v->inst, "vkDestroyDebugUtilsMessengerEXT");
    if (!create_messenger || !v->destroy_messenger) {
        fprintf(stderr, "no vkCreateDebugUtilsMessengerEXT\n");
        return 1;
    }
    CHECK(create_messenger(v->inst, &mci, NULL, &v->messenger));

    uint32_t n = 1;
    r = vkEnumeratePhysicalDevices(v->inst, &n, &v->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        fprintf(stderr, "SKIP: no Vulkan physical device\n");
        return SKIP;
    }
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(v->phys, &props);
    printf("device: %s (Vulkan %u.%u.%u, driver 0x%x)\n", props.deviceName, VK_API_VERSION_MAJOR(props.apiVersion),
           VK_API_VERSION_MINOR(props.apiVersion), VK_API_VERSION_PATCH(props.apiVersion), props.driverVersion);

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf)
        return 1;
    vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &nq, qf);
    v->qfam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && v->qfam == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            v->qfam = i;
    free(qf);
    if (v->qfam == UINT32_MAX) {
        fprintf(stderr, "SKIP: the first device has no compute queue\n");
        return SKIP;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = v->qfam,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    CHECK(vkCreateDevice(v->phys, &dci, NULL, &v->dev));
    vkGetDeviceQueue(v->dev, v->qfam, 0, &v->queue);

    /* two storage buffers in host-visible, host-coherent memory */
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(v->phys, &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkDeviceSize sizes[2] = {bytes_in, bytes_out};
    for (int b = 0; b < 2; b++) {
        VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                  .size = sizes[b],
                                  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                  .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
        CHECK(vkCreateBuffer(v->dev, &bci, NULL, &v->buf[b]));
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(v->dev, v->buf[b], &req);
        uint32_t type = UINT32_MAX;
        for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
            if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
                type = i;
        if (type == UINT32_MAX) {
            fprintf(stderr, "no host-visible coherent memory type\n");
            return 1;
        }
        VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = type};
        CHECK(vkAllocateMemory(v->dev, &mai, NULL, &v->mem[b]));
        CHECK(vkBindBufferMemory(v->dev, v->buf[b], v->mem[b], 0));
        CHECK(vkMapMemory(v->dev, v->mem[b], 0, VK_WHOLE_SIZE, 0, &v->map[b]));
    }

    VkDescriptorSetLayoutBinding bind[2];
    for (uint32_t b = 0; b < 2; b++)
        bind[b] = (VkDescriptorSetLayoutBinding){.binding = b,
                                                 .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                 .descriptorCount = 1,
                                                 .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dslci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 2, .pBindings = bind};
    CHECK(vkCreateDescriptorSetLayout(v->dev, &dslci, NULL, &v->dsl));
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 2 * sizeof(uint32_t)};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1,
                                       .pSetLayouts = &v->dsl,
                                       .pushConstantRangeCount = 1,
                                       .pPushConstantRanges = &pcr};
    CHECK(vkCreatePipelineLayout(v->dev, &plci, NULL, &v->layout));

    uint32_t *code = NULL;
    size_t code_size = 0;
    if (read_file(spv_path, &code, &code_size)) {
        fprintf(stderr, "cannot read %s\n", spv_path);
        free(code);
        return 1;
    }
    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = code_size, .pCode = code};
    r = vkCreateShaderModule(v->dev, &smci, NULL, &v->module);
    free(code);
    CHECK(r);
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = v->module,
                  .pName = "main"},
        .layout = v->layout,
    };
    CHECK(vkCreateComputePipelines(v->dev, VK_NULL_HANDLE, 1, &cpci, NULL, &v->pipe));

    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 2};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    CHECK(vkCreateDescriptorPool(v->dev, &dpci, NULL, &v->pool));
    VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                        .descriptorPool = v->pool,
                                        .descriptorSetCount = 1,
                                        .pSetLayouts = &v->dsl};
    CHECK(vkAllocateDescriptorSets(v->dev, &dsai, &v->set));
    VkDescriptorBufferInfo dbi[2] = {{v->buf[0], 0, VK_WHOLE_SIZE}, {v->buf[1], 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet wds[2];
    for (uint32_t b = 0; b < 2; b++)
        wds[b] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                        .dstSet = v->set,
                                        .dstBinding = b,
                                        .descriptorCount = 1,
                                        .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                        .pBufferInfo = &dbi[b]};
    vkUpdateDescriptorSets(v->dev, 2, wds, 0, NULL);

    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = v->qfam};
    CHECK(vkCreateCommandPool(v->dev, &cpi, NULL, &v->cpool));
    VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = v->cpool,
                                        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1};
    CHECK(vkAllocateCommandBuffers(v->dev, &cbai, &v->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(v->dev, &fci, NULL, &v->fence));
    return 0;
}

/* run the shader on n items already in buffer 0; results land in buffer 1 */
static int vk_run(vk *v, uint32_t n, uint32_t mode)
{
    uint32_t pc[2] = {n, mode};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK(vkResetCommandBuffer(v->cmd, 0));
    CHECK(vkBeginCommandBuffer(v->cmd, &bi));
    vkCmdBindPipeline(v->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, v->pipe);
    vkCmdBindDescriptorSets(v->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, v->layout, 0, 1, &v->set, 0, NULL);
    vkCmdPushConstants(v->cmd, v->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, pc);
    vkCmdDispatch(v->cmd, (n + 63) / 64, 1, 1);
    /* make the shader's writes visible to the host reads after the fence */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(v->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
    CHECK(vkEndCommandBuffer(v->cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &v->cmd};
    CHECK(vkResetFences(v->dev, 1, &v->fence));
    CHECK(vkQueueSubmit(v->queue, 1, &si, v->fence));
    CHECK(vkWaitForFences(v->dev, 1, &v->fence, VK_TRUE, UINT64_MAX));
    return 0;
}

static void vk_destroy(vk *v)
{
    if (v->dev) {
        vkDeviceWaitIdle(v->dev);
        vkDestroyFence(v->dev, v->fence, NULL);
        vkDestroyCommandPool(v->dev, v->cpool, NULL);
        vkDestroyDescriptorPool(v->dev, v->pool, NULL);
        vkDestroyPipeline(v->dev, v->pipe, NULL);
        vkDestroyShaderModule(v->dev, v->module, NULL);
        vkDestroyPipelineLayout(v->dev, v->layout, NULL);
        vkDestroyDescriptorSetLayout(v->dev, v->dsl, NULL);
        for (int b = 0; b < 2; b++) {
            vkDestroyBuffer(v->dev, v->buf[b], NULL);
            if (v->map[b])
                vkUnmapMemory(v->dev, v->mem[b]);
            vkFreeMemory(v->dev, v->mem[b], NULL);
        }
        vkDestroyDevice(v->dev, NULL);
    }
    if (v->inst) {
        if (v->messenger)
            v->destroy_messenger(v->inst, v->messenger, NULL);
        vkDestroyInstance(v->inst, NULL);
    }
}

/* ---------------------------------------------------------------- reference */

/* x mod 2 for x = p * f exactly (f a float, p an int32), as a long double in [0, 2). f = m * 2^e with
 * an integer |m| < 2^24, so p*m is an exact int64 (|p*m| < 2^55); for e >= 1 the product is even, else
 * its residue mod 2^(1-e) (two's complement & gives the non-negative residue) times 2^e is exact in
 * long double (< 2^62 fits its 64-bit significand). */
static long double mod2_product(int32_t p, float f)
{
    if (f == 0.0f)
        return 0.0L;
    int e;
    float fr = frexpf(f, &e); /* f = fr * 2^e, 0.5 <= |fr| < 1 */
    int64_t m = (int64_t)ldexpf(fr, 24);
    e -= 24;
    int64_t pm = (int64_t)p * m;
    if (e >= 1)
        return 0.0L;
    int k = 1 - e;
    if (k <= 62)
        pm = (int64_t)((uint64_t)pm & ((UINT64_C(1) << k) - 1));
    return ldexpl((long double)pm, e);
}

/* t = p * (v0 + v1 + v2) mod 2 in [-1, 1), error ~1e-19 */
static long double ref_half_turns(int32_t p, const float v[3])
{
    long double s = mod2_product(p, v[0]) + mod2_product(p, v[1]) + mod2_product(p, v[2]);
    s -= 2.0L * floorl(0.5L * s + 0.5L);
    return s;
}

/* the host's split of inv_freq / pi (src/core/plan.c) */
static void split3(double inv_freq, float v[3])
{
    double x = inv_freq / 3.14159265358979323846;
    v[0] = (float)x;
    v[1] = (float)(x - v[0]);
    v[2] = (float)(x - v[0] - v[1]);
}

/* ---------------------------------------------------------------- inputs */

static uint64_t rng_state;
static uint64_t rng(void) { return rqs_rand(&rng_state); } /* splitmix64 (support/rng.h) */

enum { CAT_DENSE, CAT_RAND, CAT_NEAR_MAX, CAT_NEAR_MIN, CAT_NEG, CAT_FULL, CAT_TINY, CAT_LARGE, NCAT };
static const char *cat_name[NCAT] = {"every p in 0..2^20",  "random p in 0..2^20", "p near INT32_MAX",
                                     "p near INT32_MIN",    "random p < 0",        "random p, all int32",
                                     "tiny freqs, all p",   "large freqs, all p"};

typedef struct {
    int32_t p;
    float v[3];
    uint8_t cat;
} item;

typedef struct {
    item *it;
    size_t n, cap;
} items;

static int push(items *s, int32_t p, const float v[3], int cat)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1u << 16;
        item *it = realloc(s->it, cap * sizeof *it);
        if (!it)
            return 1;
        s->it = it;
        s->cap = cap;
    }
    item *x = &s->it[s->n++];
    x->p = p;
    memcpy(x->v, v, sizeof x->v);
    x->cat = (uint8_t)cat;
    return 0;
}

/* a spread of positions for one frequency (everything but the dense sweep) */
static int push_spread(items *s, const float v[3], int cat_override)
{
    int bad = 0;
    for (int i = 0; i < 1024; i++) {
        int32_t r = (int32_t)(rng() & 0xFFFFF);
        bad |= push(s, r + (int32_t)(rng() & 1), v, cat_override >= 0 ? cat_override : CAT_RAND); /* 2^20 itself too */
        bad |= push(s, INT32_MAX - i, v, cat_override >= 0 ? cat_override : CAT_NEAR_MAX);
        bad |= push(s, INT32_MIN + i, v, cat_override >= 0 ? cat_override : CAT_NEAR_MIN);
        bad |= push(s, -(int32_t)(rng() & 0x7FFFFFFF), v, cat_override >= 0 ? cat_override : CAT_NEG);
        bad |= push(s, (int32_t)(uint32_t)rng(), v, cat_override >= 0 ? cat_override : CAT_FULL);
    }
    return bad;
}

/* ---------------------------------------------------------------- main */

typedef struct {
    double t, c, s, c2, s2;
} errs;

static void upd(double *m, double e)
{
    if (!(e <= *m)) /* NaN counts as the worst */
        *m = isnan(e) ? INFINITY : e;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SHADER.spv\n", argv[0]);
        return 2;
    }
    const char *seed_env = getenv("RQ_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("seed: %" PRIu64 " (set RQ_SEED to repeat)\n", seed);

    /* frequencies: head dims 64 and 128, bases 10000 and 500000 */
    items in = {0};
    int bad = 0;
    static const double bases[2] = {10000.0, 500000.0};
    static const int dims[2] = {64, 128};
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < dims[d] / 2; i++) {
                float v[3];
                split3(pow(bases[b], -2.0 * i / dims[d]), v);
                bad |= push_spread(&in, v, -1);
                /* every position 0..2^20 for the fastest, a middle and the slowest frequency of D=128, base 10000,
                 * and the slowest of base 500000 */
                if (d == 1 && ((b == 0 && (i == 0 || i == 17 || i == 63)) || (b == 1 && i == 63)))
                    for (int32_t p = 0; p <= (1 << 20); p++)
                        bad |= push(&in, p, v, CAT_DENSE);
            }
    static const double tiny[] = {1e-30, 3e-20, 1e-12, 7.7e-9, 1e-7};
    static const double large[] = {1.0, 2.0, 3.0, 10.0, 100.0, 1000.0, 12345.678};
    for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) {
        float v[3];
        split3(tiny[i], v);
        bad |= push_spread(&in, v, CAT_TINY);
    }
    for (size_t i = 0; i < sizeof large / sizeof *large; i++) {
        float v[3];
        split3(large[i], v);
        bad |= push_spread(&in, v, CAT_LARGE);
    }
    /* rq_cossinpi alone: a grid of 2^20 + 1 points on [-1, 1], the ends, and random floats of [-1, 1] */
    size_t n_grid = (1u << 20) + 1, n_rand = 1u << 18, n_t = n_grid + n_rand;
    float *tin = malloc(n_t * sizeof *tin);
    if (bad || !tin) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n_grid; i++)
        tin[i] = (float)(-1.0 + (double)i / (double)(1u << 19));
    for (size_t i = 0; i < n_rand; i++) {
        float x;
        do { /* random bit patterns, so every exponent (tiny ones too) is tried */
            uint32_t u = (uint32_t)rng() & 0xBFFFFFFFu;
            memcpy(&x, &u, sizeof x);
        } while (!(fabsf(x) <= 1.0f));
        tin[n_grid + i] = x;
    }

    vk v = {0};
    int st = vk_init(&v, argv[1], (VkDeviceSize)CHUNK * 16, (VkDeviceSize)CHUNK * 32);
    if (st) {
        vk_destroy(&v);
        free(in.it);
        free(tin);
        return st == SKIP ? SKIP : 1;
    }
    printf("items: %zu angles, %zu cossinpi arguments\n", in.n, n_t);

    errs e[NCAT];
    memset(e, 0, sizeof e);
    for (size_t base = 0; base < in.n && !st; base += CHUNK) {
        uint32_t n = (uint32_t)(in.n - base < CHUNK ? in.n - base : CHUNK);
        uint32_t *w = v.map[0];
        for (uint32_t i = 0; i < n; i++) {
            const item *x = &in.it[base + i];
            w[4 * i] = (uint32_t)x->p;
            memcpy(&w[4 * i + 1], x->v, sizeof x->v);
        }
        if ((st = vk_run(&v, n, 0)))
            break;
        const float *o = v.map[1];
        for (uint32_t i = 0; i < n; i++) {
            const item *x = &in.it[base + i];
            const float *r = &o[8 * i];
            long double t = ref_half_turns(x->p, x->v);
            long double c = cosl(PI_L * t), s = sinl(PI_L * t);
            double dt = fabs((double)((long double)r[0] - t));
            if (dt > 1.0)
                dt = 2.0 - dt; /* -1 and 1 are the same angle */
            errs *E = &e[x->cat];
            upd(&E->t, dt);
            upd(&E->c, fabs((double)((long double)r[1] - c)));
            upd(&E->s, fabs((double)((long double)r[2] - s)));
            upd(&E->c2, fabs((double)((long double)r[4] - c)));
            upd(&E->s2, fabs((double)((long double)r[5] - s)));
        }
    }
    double ec = 0, es = 0;
    for (size_t base = 0; base < n_t && !st; base += CHUNK) {
        uint32_t n = (uint32_t)(n_t - base < CHUNK ? n_t - base : CHUNK);
        uint32_t *w = v.map[0];
        for (uint32_t i = 0; i < n; i++) {
            memcpy(&w[4 * i], &tin[base + i], sizeof(float));
            w[4 * i + 1] = w[4 * i + 2] = w[4 * i + 3] = 0;
        }
        if ((st = vk_run(&v, n, 1)))
            break;
        const float *o = v.map[1];
        for (uint32_t i = 0; i < n; i++) {
            long double t = tin[base + i];
            upd(&ec, fabs((double)((long double)o[8 * i + 1] - cosl(PI_L * t))));
            upd(&es, fabs((double)((long double)o[8 * i + 2] - sinl(PI_L * t))));
        }
    }
    /* rq_tanh (mode 2): relative error against tanhl, over the arguments below */
    size_t n_th = 0, cap_th = (1u << 20) + 1 + 4 * 8192 + (1u << 18) + 64;
    float *xin = malloc(cap_th * sizeof *xin);
    if (!xin) {
        fprintf(stderr, "out of memory\n");
        st = 1;
    }
    for (size_t i = 0; xin && i <= (1u << 20); i++)
        xin[n_th++] = (float)(-12.0 + 24.0 * (double)i / (double)(1u << 20));
    static const float edges[] = {0.75f, -0.75f, 10.0f, -10.0f};
    for (size_t k = 0; xin && k < 4; k++) { /* every float of 8192 ulps around each edge */
        uint32_t u;
        memcpy(&u, &edges[k], 4);
        for (uint32_t d = 0; d < 8192; d++) {
            uint32_t w = u - 4096u + d;
            memcpy(&xin[n_th++], &w, 4);
        }
    }
    for (size_t i = 0; xin && i < (1u << 18); i++) { /* random normal floats of |x| < 2^7 */
        uint32_t u;
        do
            u = (uint32_t)rng();
        while (((u >> 23) & 0xFFu) == 0 || ((u >> 23) & 0xFFu) > 133u);
        memcpy(&xin[n_th++], &u, 4);
    }
    static const float special[] = {1e3f, -1e3f, 1e30f, -3e38f, INFINITY, -INFINITY, 1e-30f, -1e-20f, 1e-10f,
                                    0x1p-126f, 0.0f, -0.0f, 9.0f, 20.0f, 0.5f, 1.0f};
    for (size_t k = 0; xin && k < sizeof special / sizeof special[0]; k++)
        xin[n_th++] = special[k];
    double eth = 0;
    float eth_at = 0;
    for (size_t base = 0; xin && base < n_th && !st; base += CHUNK) {
        uint32_t n = (uint32_t)(n_th - base < CHUNK ? n_th - base : CHUNK);
        uint32_t *w = v.map[0];
        for (uint32_t i = 0; i < n; i++) {
            memcpy(&w[4 * i], &xin[base + i], sizeof(float));
            w[4 * i + 1] = w[4 * i + 2] = w[4 * i + 3] = 0;
        }
        if ((st = vk_run(&v, n, 2)))
            break;
        const float *o = v.map[1];
        for (uint32_t i = 0; i < n; i++) {
            long double x = xin[base + i], ref = tanhl(x);
            double e = ref == 0.0L ? fabs((double)o[8 * i + 1]) : fabs((double)(((long double)o[8 * i + 1] - ref) / ref));
            if (!(e <= eth)) {
                eth = isnan(e) ? INFINITY : e;
                eth_at = xin[base + i];
            }
        }
    }
    free(xin);
    vk_destroy(&v);
    free(in.it);
    free(tin);
    if (st)
        return 1;

    const double tol_cs = 5e-7, tol_t = 2e-7, tol_pi = 1.5e-7;
    int fail = 0;
    printf("%-22s %10s %10s %10s %10s %10s\n", "max abs error", "t (h-t)", "cos", "sin", "cos fused", "sin fused");
    for (int c = 0; c < NCAT; c++) {
        printf("%-22s %10.3g %10.3g %10.3g %10.3g %10.3g\n", cat_name[c], e[c].t, e[c].c, e[c].s, e[c].c2, e[c].s2);
        fail |= !(e[c].t <= tol_t) || !(e[c].c <= tol_cs) || !(e[c].s <= tol_cs) || !(e[c].c2 <= tol_cs) ||
                !(e[c].s2 <= tol_cs);
    }
    printf("%-22s %10s %10.3g %10.3g\n", "rq_cossinpi alone", "", ec, es);
    fail |= !(ec <= tol_pi) || !(es <= tol_pi);
    const double tol_tanh = 2.5e-7;
    printf("%-22s %10.3g relative (worst at x = %.9g; %zu arguments)\n", "rq_tanh", eth, (double)eth_at, n_th);
    fail |= !(eth <= tol_tanh);
    printf("bounds: t %.1g half-turns, cos/sin %.1g (rq_cossinpi alone %.2g), tanh %.2g relative; validation "
           "messages: %u\n", tol_t, tol_cs, tol_pi, tol_tanh, n_messages);
    if (n_messages)
        fail = 1;
    printf("%s\n", fail ? "FAIL" : "PASS");
    return fail;
}
