/* Shared between npy.c (file format, loading, saving) and npy_header.c (the header dict parser);
 * the dtype table and the error functions are npy_internal.c's. Not part of the npy.h API: names
 * carry the npyi_ prefix. */
#ifndef RQ_NPY_INTERNAL_H
#define RQ_NPY_INTERNAL_H

#include "npy.h"

#include <stdarg.h>
#include <stddef.h>

#if defined(__GNUC__)
#define NPY_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NPY_PRINTF(f, a)
#endif

/* The supported dtypes, indexed by npy_dtype. */
typedef struct {
    const char *descr;
    size_t size;
} npyi_dtype_info;

#define NPYI_N_DTYPES 6
extern const npyi_dtype_info npyi_dtypes[NPYI_N_DTYPES];

/* Where error messages go: "<name>: <message>", one line, into err[0..errlen). */
typedef struct {
    const char *name;
    char *err;
    size_t errlen;
} npyi_ectx;

/* Both always return -1, so error paths can be `return npyi_fail(e, ...)`. */
int npyi_vfail(const npyi_ectx *e, const char *fmt, va_list ap);
NPY_PRINTF(2, 3)
int npyi_fail(const npyi_ectx *e, const char *fmt, ...);

/* Parses the header dict. hdr[0..len) is the whole header region, including padding and the
   final newline; base is its file offset (for messages). Fills h->dtype, h->ndim and h->shape;
   0 on success, -1 with a message on error. */
int npyi_parse_header(const unsigned char *hdr, size_t len, size_t base, const npyi_ectx *e, npy_array *h);

#endif /* RQ_NPY_INTERNAL_H */
