/* Minimal, strict reader/writer for NumPy .npy files (format versions 1.0, 2.0, 3.0).
 *
 * Only little-endian, C-order arrays of a handful of numeric dtypes are supported;
 * anything else is rejected with a message rather than guessed at, because these
 * files come from outside the process (and the parser is fuzzed). */
#ifndef RQ_NPY_H
#define RQ_NPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* little-endian only: '<f4' '<f2' '<f8' '<i4' '<i8' '<u2'
   ('|' byte-order marker is not valid for these) */
typedef enum { NPY_F32 = 0, NPY_F16, NPY_F64, NPY_I32, NPY_I64, NPY_U16 } npy_dtype;

#define NPY_MAX_DIMS 8

typedef struct {
    npy_dtype dtype;
    int ndim;                       /* 0..NPY_MAX_DIMS */
    int64_t shape[NPY_MAX_DIMS];
    void *data;                     /* malloc'd, C order, nbytes long (NULL allowed when nbytes == 0) */
    size_t nbytes;
} npy_array;

/* Element size in bytes; 0 for an out-of-range value. */
size_t npy_dtype_size(npy_dtype t);
/* "<f4" ...; NULL for an out-of-range value. */
const char *npy_dtype_descr(npy_dtype t);
/* Product of shape[0..ndim) (1 for ndim == 0); -1 if ndim is out of range,
   a dimension is negative, or the product overflows int64. */
int64_t npy_numel(const npy_array *a);

/* Element i (C order; 0 <= i < npy_numel(a)) of an integer array (i32, i64, u16) as int64, or of a
   float array (f32, f64) as double; 0 for another dtype. Unaligned data is fine. */
int64_t npy_int_at(const npy_array *a, int64_t i);
double npy_real_at(const npy_array *a, int64_t i);

/* All return 0 on success, non-zero on error with a one-line message in err (if err != NULL)
   that names the file (or "<memory>") and what is wrong, e.g.
   "q.npy: unsupported dtype '>f4' (big-endian)". On error *out is left zeroed and nothing leaks. */
int npy_load(const char *path, npy_array *out, char *err, size_t errlen);
/* name may be NULL, in which case messages say "<memory>". */
int npy_load_mem(const void *buf, size_t len, const char *name, npy_array *out, char *err, size_t errlen);

/* Writes a version 1.0 header (2.0 if the header would exceed 65535 bytes), little-endian, C order.
   Writes to "<path>.tmp.<pid>" then rename()s, so a failure never leaves a partial file at path;
   on error the temp file is removed. */
int npy_save(const char *path, const npy_array *a, char *err, size_t errlen);

/* NULL-safe, leaves *a zeroed. */
void npy_free(npy_array *a);

#ifdef __cplusplus
}
#endif

#endif /* RQ_NPY_H */
