/* Helpers shared by the .npy tests (test_npy.c: fixtures, saving, API; test_npy_malformed.c:
 * hostile input). Include after <criterion/criterion.h>. */
#ifndef RQ_NPY_TEST_H
#define RQ_NPY_TEST_H

#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NPY_FIXTURES
#define NPY_FIXTURES "tests/data/npy"
#endif
#define FIX(name) NPY_FIXTURES "/" name

static inline int is_zeroed(const npy_array *a)
{
    static const npy_array z;
    return memcmp(a, &z, sizeof z) == 0;
}

/* Reads up to 4096 bytes of a file (the fixtures are smaller) into a malloc'd buffer. */
static inline void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    void *buf = malloc(4096);
    *len = fread(buf, 1, 4096, f);
    fclose(f);
    return buf;
}

#endif /* RQ_NPY_TEST_H */
