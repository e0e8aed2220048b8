/* Fault injection at the OpenCL call sites the library uses to allocate, build and enqueue: the n-th
 * call fails with the error a driver returns when out of resources (see shim.h). Linked into the
 * fault tests with the OpenCL backend only (tests/fault/meson.build). */
#include "shim.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

cl_mem __real_clCreateBuffer(cl_context, cl_mem_flags, size_t, void *, cl_int *);
cl_mem __wrap_clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void *p, cl_int *err)
{
    if (fault_hit(F_CREATE_BUFFER)) {
        if (err)
            *err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
        return NULL;
    }
    return __real_clCreateBuffer(c, f, n, p, err);
}

cl_int __real_clBuildProgram(cl_program, cl_uint, const cl_device_id *, const char *,
                             void(CL_CALLBACK *)(cl_program, void *), void *);
cl_int __wrap_clBuildProgram(cl_program p, cl_uint n, const cl_device_id *d, const char *o,
                             void(CL_CALLBACK *cb)(cl_program, void *), void *u)
{
    return fault_hit(F_BUILD_PROGRAM) ? CL_OUT_OF_HOST_MEMORY : __real_clBuildProgram(p, n, d, o, cb, u);
}

cl_kernel __real_clCreateKernel(cl_program, const char *, cl_int *);
cl_kernel __wrap_clCreateKernel(cl_program p, const char *name, cl_int *err)
{
    if (fault_hit(F_CREATE_KERNEL)) {
        if (err)
            *err = CL_OUT_OF_RESOURCES;
        return NULL;
    }
    return __real_clCreateKernel(p, name, err);
}

cl_int __real_clEnqueueNDRangeKernel(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                     const size_t *, cl_uint, const cl_event *, cl_event *);
cl_int __wrap_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g,
                                     const size_t *l, cl_uint n, const cl_event *w, cl_event *e)
{
    return fault_hit(F_ENQUEUE_NDRANGE) ? CL_OUT_OF_RESOURCES : __real_clEnqueueNDRangeKernel(q, k, d, o, g, l, n, w, e);
}

cl_int __real_clEnqueueReadBuffer(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                                  const cl_event *, cl_event *);
cl_int __wrap_clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, void *p, cl_uint nw,
                                  const cl_event *w, cl_event *e)
{
    return fault_hit(F_ENQUEUE_READ) ? CL_OUT_OF_RESOURCES : __real_clEnqueueReadBuffer(q, m, b, o, n, p, nw, w, e);
}

cl_int __real_clEnqueueWriteBuffer(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint,
                                   const cl_event *, cl_event *);
cl_int __wrap_clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t n, const void *p,
                                   cl_uint nw, const cl_event *w, cl_event *e)
{
    return fault_hit(F_ENQUEUE_WRITE) ? CL_OUT_OF_RESOURCES : __real_clEnqueueWriteBuffer(q, m, b, o, n, p, nw, w, e);
}
