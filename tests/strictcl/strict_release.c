/* LD_PRELOAD shim over the OpenCL API for the suite: a device that does NOT keep a released object
 * alive for the commands that still use it. OpenCL says a kernel or buffer whose last reference the
 * application drops lives on until the enqueued commands using it complete, and pocl does so; the
 * test enqueue_with_offsets_positions_and_events, whose commands wait for a user event after the
 * call returned, died with a signal on NVIDIA's OpenCL (driver 580, H200; issue 30) at the point
 * where ropeqk had dropped the last reference to the plan's kernels and buffers. This shim makes
 * pocl strict about it: it counts the application's references to kernels and buffers (creates,
 * retains and releases through the API, not the driver's own), remembers which kernels and buffers
 * each enqueued command uses and its event, and aborts with a message when the application drops the
 * last reference to one of them while such a command has not completed. Test-only (tests/meson.build
 * runs some suites under it); never linked into anything.
 *
 * It also reports NVIDIA's CL_DEVICE_MEM_BASE_ADDR_ALIGN (4096 bits) and refuses sub-buffers at
 * offsets that are not multiples of it (CL_MISALIGNED_SUB_BUFFER_OFFSET), as that driver does: the
 * library makes no sub-buffers (user offsets are kernel arguments), and a suite run under this shim
 * would show it if one came back.
 *
 * Tracked commands: clEnqueueNDRangeKernel (the kernel and the buffers set as its arguments),
 * clEnqueueCopyBuffer, clEnqueueFillBuffer, clEnqueueReadBuffer and clEnqueueWriteBuffer (their
 * buffers). Objects are keyed by handle in small tables; a handle's entries are dropped when its
 * count reaches zero (a later object may reuse the address). */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXOBJ 4096
#define MAXARG 16
#define MAXCMD 8192

typedef struct {
    void *h;
    int refs;
    int kernel;             /* 1: a cl_kernel, 0: a cl_mem */
    cl_mem args[MAXARG];    /* kernels: the buffers set as arguments */
} obj;

typedef struct {
    cl_event ev;            /* retained here */
    void *uses[MAXARG + 1];
    int n;
} cmd;

static obj objs[MAXOBJ];
static cmd cmds[MAXCMD];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define REAL(name) ((__typeof__(&name))real_sym(#name))
static void *real_sym(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "strict_release: no %s\n", name);
        abort();
    }
    return p;
}

static obj *find(const void *h)
{
    for (int i = 0; i < MAXOBJ; i++)
        if (objs[i].refs > 0 && objs[i].h == h)
            return &objs[i];
    return NULL;
}

static void add(void *h, int kernel)
{
    if (!h)
        return;
    pthread_mutex_lock(&lock);
    obj *o = find(h);
    for (int i = 0; !o && i < MAXOBJ; i++)
        if (objs[i].refs <= 0)
            o = &objs[i];
    if (o) {
        memset(o, 0, sizeof *o);
        o->h = h, o->refs = 1, o->kernel = kernel;
    }
    pthread_mutex_unlock(&lock);
}

static int pending(cl_event e)
{
    cl_int st = CL_COMPLETE;
    if (REAL(clGetEventInfo)(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) != CL_SUCCESS)
        return 0;
    return st > CL_COMPLETE;
}

/* Drops completed commands (lock held). */
static void prune(void)
{
    for (int i = 0; i < MAXCMD; i++)
        if (cmds[i].ev && !pending(cmds[i].ev)) {
            REAL(clReleaseEvent)(cmds[i].ev);
            memset(&cmds[i], 0, sizeof cmds[i]);
        }
}

static void record(cl_event ev, void *const *uses, int n)
{
    pthread_mutex_lock(&lock);
    prune();
    for (int i = 0; i < MAXCMD; i++)
        if (!cmds[i].ev) {
            REAL(clRetainEvent)(ev);
            cmds[i].ev = ev;
            memcpy(cmds[i].uses, uses, (size_t)n * sizeof *uses);
            cmds[i].n = n;
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* The application drops a reference to h; aborts if it was the last and a command using h pends. */
static void drop(const void *h, const char *what)
{
    pthread_mutex_lock(&lock);
    obj *o = find(h);
    if (o && --o->refs == 0) {
        prune();
        for (int i = 0; i < MAXCMD; i++)
            for (int j = 0; cmds[i].ev && j < cmds[i].n; j++)
                if (cmds[i].uses[j] == h) {
                    fprintf(stderr, "strict_release: the last reference to %s %p dropped while a command using it "
                                    "has not completed (it may wait for a user event); a driver that does not keep "
                                    "the object alive crashes here\n", what, h);
                    abort();
                }
        memset(o, 0, sizeof *o);
    }
    pthread_mutex_unlock(&lock);
}

static void retain(const void *h)
{
    pthread_mutex_lock(&lock);
    obj *o = find(h);
    if (o)
        o->refs++;
    pthread_mutex_unlock(&lock);
}

cl_mem clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void *p, cl_int *e)
{
    cl_mem m = REAL(clCreateBuffer)(c, f, n, p, e);
    add(m, 0);
    return m;
}

cl_kernel clCreateKernel(cl_program p, const char *name, cl_int *e)
{
    cl_kernel k = REAL(clCreateKernel)(p, name, e);
    add(k, 1);
    return k;
}

cl_int clRetainMemObject(cl_mem m)
{
    cl_int r = REAL(clRetainMemObject)(m);
    if (r == CL_SUCCESS)
        retain(m);
    return r;
}

cl_int clRetainKernel(cl_kernel k)
{
    cl_int r = REAL(clRetainKernel)(k);
    if (r == CL_SUCCESS)
        retain(k);
    return r;
}

cl_int clReleaseMemObject(cl_mem m)
{
    drop(m, "buffer");
    return REAL(clReleaseMemObject)(m);
}

cl_int clReleaseKernel(cl_kernel k)
{
    drop(k, "kernel");
    return REAL(clReleaseKernel)(k);
}

cl_int clSetKernelArg(cl_kernel k, cl_uint i, size_t size, const void *v)
{
    cl_int r = REAL(clSetKernelArg)(k, i, size, v);
    pthread_mutex_lock(&lock);
    obj *o = find(k);
    if (r == CL_SUCCESS && o && i < MAXARG) {
        cl_mem m = size == sizeof(cl_mem) && v ? *(const cl_mem *)v : NULL;
        obj *mo = m ? find(m) : NULL;
        o->args[i] = mo && !mo->kernel ? m : NULL;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Runs the real call with an event of our own where the caller takes none, records it. */
#define TRACKED(call_with_ev, uses, n)                                                                     \
    do {                                                                                                   \
        cl_event own = NULL, *evp = event ? event : &own;                                                  \
        cl_int r = call_with_ev;                                                                           \
        if (r == CL_SUCCESS && *evp)                                                                       \
            record(*evp, uses, n);                                                                         \
        if (own)                                                                                           \
            REAL(clReleaseEvent)(own);                                                                     \
        return r;                                                                                          \
    } while (0)

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off, const size_t *g,
                              const size_t *l, cl_uint nw, const cl_event *w, cl_event *event)
{
    void *uses[MAXARG + 1];
    int n = 0;
    uses[n++] = k;
    pthread_mutex_lock(&lock);
    obj *o = find(k);
    for (int i = 0; o && i < MAXARG; i++)
        if (o->args[i])
            uses[n++] = o->args[i];
    pthread_mutex_unlock(&lock);
    TRACKED(REAL(clEnqueueNDRangeKernel)(q, k, dim, off, g, l, nw, w, evp), uses, n);
}

cl_int clEnqueueCopyBuffer(cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t n, cl_uint nw,
                           const cl_event *w, cl_event *event)
{
    void *uses[2] = {s, d};
    TRACKED(REAL(clEnqueueCopyBuffer)(q, s, d, so, dof, n, nw, w, evp), uses, 2);
}

cl_int clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void *p, size_t ps, size_t off, size_t n, cl_uint nw,
                           const cl_event *w, cl_event *event)
{
    void *uses[1] = {m};
    TRACKED(REAL(clEnqueueFillBuffer)(q, m, p, ps, off, n, nw, w, evp), uses, 1);
}

cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t n, void *p, cl_uint nw,
                           const cl_event *w, cl_event *event)
{
    void *uses[1] = {m};
    TRACKED(REAL(clEnqueueReadBuffer)(q, m, b, off, n, p, nw, w, evp), uses, 1);
}

cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool b, size_t off, size_t n, const void *p,
                            cl_uint nw, const cl_event *w, cl_event *event)
{
    void *uses[1] = {m};
    TRACKED(REAL(clEnqueueWriteBuffer)(q, m, b, off, n, p, nw, w, evp), uses, 1);
}

/* NVIDIA's base address alignment (driver 580, H100/H200): 4096 bits */
#define NV_BASE_ALIGN_BITS 4096u

cl_int clGetDeviceInfo(cl_device_id d, cl_device_info what, size_t size, void *value, size_t *ret)
{
    if (what == CL_DEVICE_MEM_BASE_ADDR_ALIGN) {
        if (ret)
            *ret = sizeof(cl_uint);
        if (value) {
            if (size < sizeof(cl_uint))
                return CL_INVALID_VALUE;
            *(cl_uint *)value = NV_BASE_ALIGN_BITS;
        }
        return CL_SUCCESS;
    }
    return REAL(clGetDeviceInfo)(d, what, size, value, ret);
}

cl_mem clCreateSubBuffer(cl_mem m, cl_mem_flags f, cl_buffer_create_type t, const void *info, cl_int *err)
{
    if (t == CL_BUFFER_CREATE_TYPE_REGION && info &&
        ((const cl_buffer_region *)info)->origin % (NV_BASE_ALIGN_BITS / 8) != 0) {
        if (err)
            *err = CL_MISALIGNED_SUB_BUFFER_OFFSET;
        return NULL;
    }
    cl_mem s = REAL(clCreateSubBuffer)(m, f, t, info, err);
    add(s, 0);
    return s;
}
