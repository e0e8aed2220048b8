/* ropeqk-bench --vulkan --dense-decode [LEN] (vk_dense_decode.c): few-row dense attention on Vulkan,
 * the dense decode (src/vulkan/vk_dense.c) against the old K pre-pass and the paged decode. */
#ifndef ROPEQK_BENCH_VK_DENSE_DECODE_H
#define ROPEQK_BENCH_VK_DENSE_DECODE_H

/* vk_spec: the Vulkan device ("vulkan", "vulkan:N"); len: keys. 0 on success, 3 when the outputs
 * differ, 1 on other errors. */
int bench_vk_dense_decode(const char *vk_spec, long long len);

#endif
