/* Input files of the CLI tests, written with the npy module (Criterion assertions on failure).
 * Include after criterion.h. */
#ifndef ROPEQK_TEST_CLI_FILES_H
#define ROPEQK_TEST_CLI_FILES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "npy.h"
#include "rng.h"

/* A random 4-D tensor file: values m/64, m in [-128, 128] (exact in f16 and bf16, so every dtype
 * holds the same numbers). dt NPY_U16 holds bf16 bits. */
static __attribute__((unused)) void save_rand(const char *path, npy_dtype dt, int64_t d0, int64_t d1, int64_t d2,
                                              int64_t d3, uint32_t seed)
{
    npy_array a = {.dtype = dt, .ndim = 4, .shape = {d0, d1, d2, d3}};
    size_t n = (size_t)(d0 * d1 * d2 * d3), es = npy_dtype_size(dt);
    a.nbytes = n * es;
    unsigned char *b = malloc(a.nbytes);
    cr_assert(b);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        float f = (float)rqs_range(&s, -128, 128) / 64.0f;
        if (dt == NPY_F32) {
            memcpy(b + 4 * i, &f, 4);
            continue;
        }
        uint16_t h = dt == NPY_U16 ? rqs_float_to_bf16(f) : rqs_float_to_half(f); /* both exact here */
        memcpy(b + 2 * i, &h, 2);
    }
    a.data = b;
    char err[256];
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    free(b);
}

/* An f32 or i32/i64 array of any shape (ndim entries of shape). */
static __attribute__((unused)) void save_array(const char *path, npy_dtype dt, const void *v, int ndim,
                                               const int64_t *shape)
{
    npy_array a = {.dtype = dt, .ndim = ndim, .data = (void *)v};
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= a.shape[i] = shape[i];
    a.nbytes = (size_t)n * npy_dtype_size(dt);
    char err[256];
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
}

static __attribute__((unused)) void save_i64(const char *path, const int64_t *v, int64_t n)
{
    save_array(path, NPY_I64, v, 1, &n);
}

static __attribute__((unused)) void load(const char *path, npy_array *a)
{
    char err[256];
    cr_assert_eq(npy_load(path, a, err, sizeof err), 0, "%s", err);
}

#endif
