/* ropeqk-bench --vulkan --tensor-cores (vk_cm_bench.c): the tensor-core path in both modes against
 * today's shaders on one Vulkan device. */
#ifndef ROPEQK_BENCH_VK_CM_BENCH_H
#define ROPEQK_BENCH_VK_CM_BENCH_H

#include <stdio.h>

/* vk_spec: "vulkan", "vulkan:N" or a name. 0 ok, 3 an output disagreed (not timed), 1 errors. */
int bench_tensor_cores(const char *vk_spec, int runs, int warmup, const char *shape_filter, FILE *csv);

#endif
