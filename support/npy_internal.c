/* What npy.c (the file format, loading, saving) and npy_header.c (the header dict parser) share
 * (npy_internal.h): the dtype table, with npy.h's npy_dtype_size and npy_dtype_descr over it, and
 * the error messages. Below both: it calls neither. */
#include "npy_internal.h"

#include <stdarg.h>
#include <stdio.h>

const npyi_dtype_info npyi_dtypes[NPYI_N_DTYPES] = {
    [NPY_F32] = {"<f4", 4}, [NPY_F16] = {"<f2", 2}, [NPY_F64] = {"<f8", 8},
    [NPY_I32] = {"<i4", 4}, [NPY_I64] = {"<i8", 8}, [NPY_U16] = {"<u2", 2},
};
_Static_assert(NPY_U16 + 1 == NPYI_N_DTYPES, "npyi_dtypes must list every npy_dtype");

size_t npy_dtype_size(npy_dtype t) { return (unsigned)t < NPYI_N_DTYPES ? npyi_dtypes[t].size : 0; }

const char *npy_dtype_descr(npy_dtype t) { return (unsigned)t < NPYI_N_DTYPES ? npyi_dtypes[t].descr : NULL; }

/* ---- errors ---------------------------------------------------------------------------- */

int npyi_vfail(const npyi_ectx *e, const char *fmt, va_list ap)
{
    if (!e->err || e->errlen == 0)
        return -1;
    int n = snprintf(e->err, e->errlen, "%s: ", e->name);
    if (n >= 0 && (size_t)n < e->errlen)
        vsnprintf(e->err + n, e->errlen - (size_t)n, fmt, ap);
    /* Callers print this as one log line; a path may contain anything. */
    for (char *p = e->err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return -1;
}

int npyi_fail(const npyi_ectx *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    npyi_vfail(e, fmt, ap);
    va_end(ap);
    return -1;
}
