/* ropeqk-bench --vulkan (vk_bench.c): the same plans on the Vulkan and the OpenCL backend, in one
 * run, outputs cross-checked, with the host and copy yardsticks. */
#ifndef ROPEQK_BENCH_VK_BENCH_H
#define ROPEQK_BENCH_VK_BENCH_H

#include "benv.h"

#include <stdio.h>

/* e->rq NULL: no OpenCL backend (its rows are skipped). vk_spec: the Vulkan device ("vulkan",
 * "vulkan:N"). cl_setup_ms: OpenCL context creation + program build, measured by main (NAN if
 * unknown). 0 on success (a backend missing is not a failure), 3 when the backends disagreed, 1 on
 * errors. */
int bench_vulkan(benv *e, const char *vk_spec, int runs, int warmup, const char *shape_filter, FILE *csv,
                 double cl_setup_ms);

#endif
