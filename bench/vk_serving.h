/* ropeqk-bench --vulkan --ragged / --vulkan --paged [LEN] (vk_serving.c): the paged cache's serving
 * paths on the Vulkan backend, a prefill chunk against dense attention and decode per cache dtype. */
#ifndef ROPEQK_BENCH_VK_SERVING_H
#define ROPEQK_BENCH_VK_SERVING_H

#include <stdbool.h>

/* vk_spec: the Vulkan device ("vulkan", "vulkan:N"). ragged: the prefill chunk; paged_len > 0: decode
 * over that many tokens per cache dtype. 0 on success, 1 on errors. */
int bench_vk_serving(const char *vk_spec, bool ragged, long long paged_len);

#endif
