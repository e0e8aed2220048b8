/* LD_PRELOAD shim that makes pocl 3.x (LLVM 15) present an AVX-512 host as an AVX2 one: device
 * "pthread-haswell-...", CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT 8, kernels compiled for -mcpu=haswell
 * with the avx2 kernel library. The suite uses it to run its host-dependent tests (the CPU profile's
 * heuristic follows the native width: src/opencl/cl_tune.c) as a fresh AVX2 CI host would, on the
 * AVX-512 development machine. Test-only: never linked into anything.
 *
 * How (pocl 3.1, lib/CL/pocl_llvm_utils.cc): the device's vector widths come from
 * llvm::sys::getHostCPUFeatures() (512-bit lanes when "avx512f" is set, 256 with "avx"), its LLVM
 * CPU and name from llvm::sys::getHostCPUName(). libpocl calls both through its PLT into
 * libLLVM-15, so definitions here win: the CPU name is "haswell", and the features are LLVM's with
 * every avx512*, evex512 and amx* entry cleared. pocl loads libLLVM with the ICD (dlopen, local
 * scope), so the real function is found in that already loaded library, not through RTLD_NEXT.
 *
 * The feature map is an llvm::StringMap<bool>; it is walked without LLVM's headers (Debian ships
 * none with llvm-15), by its layout in LLVM 15 (llvm/ADT/StringMap.h): StringMapImpl holds
 * {StringMapEntryBase **TheTable; unsigned NumBuckets, NumItems, NumTombstones, ItemSize}; a bucket
 * is empty (NULL), a tombstone (-1 << 3), or an entry {size_t keyLength; bool value;} followed by the
 * key at offset 16 (the entry's size, 8-aligned). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const char *data;
    size_t len;
} llvm_stringref; /* returned in rax:rdx like llvm::StringRef on x86-64 System V */

typedef struct {
    void **table;
    unsigned buckets, items, tombstones, item_size;
} llvm_stringmap;

#define FEATURES_SYM "_ZN4llvm3sys18getHostCPUFeaturesERNS_9StringMapIbNS_15MallocAllocatorEEE"

/* llvm::sys::getHostCPUName() */
llvm_stringref _ZN4llvm3sys14getHostCPUNameEv(void);
llvm_stringref _ZN4llvm3sys14getHostCPUNameEv(void)
{
    llvm_stringref r = {"haswell", 7};
    return r;
}

static bool avx512_only(const char *key, size_t len)
{
    return (len >= 6 && !strncmp(key, "avx512", 6)) || (len >= 7 && !strncmp(key, "evex512", 7)) ||
           (len >= 3 && !strncmp(key, "amx", 3));
}

/* bool llvm::sys::getHostCPUFeatures(llvm::StringMap<bool> &) */
bool _ZN4llvm3sys18getHostCPUFeaturesERNS_9StringMapIbNS_15MallocAllocatorEEE(llvm_stringmap *m);
bool _ZN4llvm3sys18getHostCPUFeaturesERNS_9StringMapIbNS_15MallocAllocatorEEE(llvm_stringmap *m)
{
    static bool (*real)(llvm_stringmap *);
    if (!real) {
        void *llvm = dlopen("libLLVM-15.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (llvm)
            *(void **)&real = dlvsym(llvm, FEATURES_SYM, "LLVM_15");
    }
    if (!real || !real(m))
        return false; /* pocl then assumes no SIMD at all: the test that checks the width fails */
    for (unsigned i = 0; i < m->buckets; i++) {
        char *e = (char *)m->table[i];
        if (!e || (uintptr_t)e == ((uintptr_t)-1 << 3))
            continue;
        if (avx512_only(e + 16, *(size_t *)e))
            *(bool *)(e + 8) = false;
    }
    return true;
}
