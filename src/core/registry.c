/* The backends compiled into this build (meson's -Dopencl / -Dvulkan), in the order a bare device
 * spec (a name, or none) tries them: OpenCL first, as before the Vulkan backend existed. */
#include "backend.h"

#if RQ_HAVE_OPENCL
extern const rq_backend rq_opencl_backend;
#endif
#if RQ_HAVE_VULKAN
extern const rq_backend rq_vulkan_backend;
#endif

const rq_backend *const rq_backends[] = {
#if RQ_HAVE_OPENCL
    &rq_opencl_backend,
#endif
#if RQ_HAVE_VULKAN
    &rq_vulkan_backend,
#endif
};
const size_t rq_backend_count = sizeof rq_backends / sizeof rq_backends[0];
