/* `ropeqk devices`' Vulkan part: every Vulkan device (vulkan:N), usable or not, with the
 * configuration the library picks for it. Built only with the Vulkan backend. */
#include "cli.h"
#include "ropeqk_vulkan.h"

#include <stdio.h>
#include <string.h>

/* The Vulkan devices ("vulkan:N" for --device), printed first; returns how many. */
unsigned cli_list_vulkan(void)
{
    ropeqk_vulkan_device_info info[16];
    uint32_t n = 0;
    ropeqk_status st = ropeqk_vulkan_list_devices(info, 16, &n);
    if (st != ROPEQK_SUCCESS) {
        printf("vulkan: none (%s)\n", ropeqk_last_error());
        return 0;
    }
    printf("vulkan: %u device%s\n", n, n == 1 ? "" : "s");
    for (uint32_t i = 0; i < n && i < 16; i++) {
        printf("    vulkan:%u  %s\n", i, info[i].name);
        printf("         type %s, Vulkan %u.%u.%u, %s\n", info[i].cpu ? "CPU" : "GPU/other",
               VK_API_VERSION_MAJOR(info[i].api_version), VK_API_VERSION_MINOR(info[i].api_version),
               VK_API_VERSION_PATCH(info[i].api_version), info[i].driver);
        printf("         usable: %s, cooperative matrices (VK_KHR_cooperative_matrix): %s\n",
               info[i].usable ? "yes" : "no (no compute queue or no VK_KHR_push_descriptor)",
               info[i].cooperative_matrix ? "yes" : "no");
        /* the tensor-core path (docs/tensor-cores.md): the device's shapes, this build's shaders; the
         * options line below says whether plans take it */
        printf("         matrix shapes: %s\n", info[i].cooperative_matrix_shapes);
        printf("         cooperative-matrix shaders: %s\n",
               info[i].coopmat_shaders ? "built" : "not built (no GLSL compiler with GL_KHR_cooperative_matrix at configure time)");
        char spec[32];
        snprintf(spec, sizeof spec, "vulkan:%u", i);
        ropeqk_ctx_params cp;
        memset(&cp, 0, sizeof cp);
        cp.device = spec;
        ropeqk_ctx *ctx = NULL;
        if (info[i].usable && ropeqk_ctx_create(&cp, &ctx) == ROPEQK_SUCCESS) {
            printf("         config: %s\n", ropeqk_ctx_config_source(ctx));
            printf("         options: %s\n", ropeqk_ctx_build_options(ctx));
        } else if (info[i].usable) {
            printf("         config: unavailable: %s\n", ropeqk_last_error());
        }
        ropeqk_ctx_destroy(ctx);
    }
    return n;
}

