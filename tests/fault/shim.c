/* The fault shim's core (shim.h): counting and failing the n-th call, the call sites of a counting
 * run, and the allocator wrappers; the backends' wrappers are shim_cl.c and shim_vk.c, each linked
 * where its backend is built (tests/fault/meson.build). */
#include "shim.h"

#include <execinfo.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *const fault_names[F_COUNT] = {"clCreateBuffer", "clBuildProgram", "clCreateKernel",
                                          "clEnqueueNDRangeKernel", "clEnqueueReadBuffer",
                                          "clEnqueueWriteBuffer", "malloc/calloc/realloc", "vkCreateBuffer",
                                          "vkAllocateMemory", "vkMapMemory", "vkCreateComputePipelines",
                                          "vkQueueSubmit", "vkAllocateCommandBuffers"};

static bool armed, fired;
static fault_fn target;
static long fail_at, calls[F_COUNT];

/* The counting run's call sites of the target: for call n (1-based), the return addresses of the
 * call and of its caller (the wrapper's caller and that one's caller: a call site in its calling
 * function; an inlined copy of a site is a site of its own). Recorded only while counting (n = 0),
 * with glibc's backtrace (its own allocations are not wrapped: only the library's objects are). */
#define MAX_SITES 65536
typedef struct {
    void *pc[2];
} site;
static site *sites;
static long nsites;

void fault_arm(fault_fn fn, long n)
{
    for (int i = 0; i < F_COUNT; i++)
        calls[i] = 0;
    target = fn;
    fail_at = n;
    fired = false;
    if (n == 0) {
        void *prime[4];
        backtrace(prime, 4); /* its first call loads libgcc_s: before counting */
        if (!sites)
            sites = calloc(MAX_SITES, sizeof *sites);
        nsites = 0;
    }
    armed = true;
}

static void record_site(void)
{
    void *bt[5] = {NULL};
    int n = backtrace(bt, 5); /* record_site, fault_hit, the wrapper, the call site, its caller */
    if (sites && nsites < MAX_SITES) {
        sites[nsites].pc[0] = n > 3 ? bt[3] : NULL;
        sites[nsites].pc[1] = n > 4 ? bt[4] : NULL;
    }
    nsites++;
}

long fault_first_sites(long *first, long max)
{
    const char *all = getenv("ROPEQK_FAULT_ALL");
    bool every = all && *all == '1';
    long n = nsites < MAX_SITES ? nsites : MAX_SITES, k = 0;
    for (long i = 0; i < n && k < max; i++) {
        bool earlier = false, later = false;
        for (long j = 0; j < i && !earlier; j++)
            earlier = memcmp(&sites[j], &sites[i], sizeof sites[i]) == 0;
        for (long j = i + 1; j < n && !later; j++)
            later = memcmp(&sites[j], &sites[i], sizeof sites[i]) == 0;
        if (every || !earlier || !later) /* a site's first call and its last */
            first[k++] = i + 1;
    }
    return k;
}

void fault_disarm(void) { armed = false; }
long fault_calls(fault_fn fn) { return calls[fn]; }
bool fault_fired(void) { return fired; }

bool fault_hit(fault_fn fn)
{
    if (!armed)
        return false;
    calls[fn]++;
    if (fn == target && fail_at == 0)
        record_site();
    if (fn == target && fail_at > 0 && calls[fn] == fail_at) {
        fired = true;
        return true;
    }
    return false;
}

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void *__wrap_malloc(size_t n) { return fault_hit(F_MALLOC) ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return fault_hit(F_MALLOC) ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return fault_hit(F_MALLOC) ? NULL : __real_realloc(p, n); }
