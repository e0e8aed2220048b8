/* Strict .npy reader/writer: the file format around the header (magic, version, header length,
 * exact data size), loading from memory or a file, and saving (whole or not at all: atomic_file.c).
 * See npy.h for the contract; the header dict itself is parsed in npy_header.c.
 *
 * The reader treats every byte of input as hostile: all lengths are checked against what
 * is actually present before anything is allocated, all arithmetic on header values is
 * overflow-checked, and every failure returns an error instead of aborting. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* pread, O_CLOEXEC */
#endif

#include "atomic_file.h"
#include "npy_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Array data is copied verbatim between file and memory, which is only correct when the
   host byte order matches the little-endian dtypes we accept. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host"
#endif

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static const char *fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, ndim == 1 ? ",)" : ")");
    return buf;
}

/* ---- sizes ----------------------------------------------------------------------------- */

/* Any zero dimension makes the product 0 regardless of the others, so it is checked first:
   otherwise (huge, huge, 0) would be rejected as an overflow. */
static int numel_checked(const int64_t *shape, int ndim, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] == 0)
            n = 0;
    }
    for (int i = 0; i < ndim && n != 0; i++)
        if (__builtin_mul_overflow(n, shape[i], &n))
            return -1;
    *out = n;
    return 0;
}

int64_t npy_numel(const npy_array *a)
{
    int64_t n;
    if (!a || a->ndim < 0 || a->ndim > NPY_MAX_DIMS || numel_checked(a->shape, a->ndim, &n))
        return -1;
    return n;
}

static int byte_count(npy_dtype dt, const int64_t *shape, int ndim, const npyi_ectx *e, size_t *nbytes)
{
    char sb[256];
    int64_t n;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return npyi_fail(e, "negative dimension %lld at axis %d", (long long)shape[i], i);
    if (numel_checked(shape, ndim, &n))
        return npyi_fail(e, "shape %s: element count overflows int64", fmt_shape(sb, sizeof sb, shape, ndim));
    if (__builtin_mul_overflow(n, (int64_t)npyi_dtypes[dt].size, nbytes))
        return npyi_fail(e, "shape %s of '%s': byte count overflows size_t",
                         fmt_shape(sb, sizeof sb, shape, ndim), npyi_dtypes[dt].descr);
    return 0;
}

/* ---- file layout: prefix, header, data ------------------------------------------------- */

/* b[0..have) is the start of a file that is total bytes long. On success *hoff and *hlen give
   the header region, which is guaranteed to lie within the file. */
static int parse_prefix(const unsigned char *b, size_t have, uint64_t total, const npyi_ectx *e,
                        size_t *hoff, size_t *hlen)
{
    if (have == 0)
        return npyi_fail(e, "empty file, not a .npy file");
    if (memcmp(b, MAGIC, have < 6 ? have : 6) != 0)
        return npyi_fail(e, "bad magic, not a .npy file");
    if (have < 8)
        return npyi_fail(e, "file truncated (%zu bytes) before the format version", have);
    unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return npyi_fail(e, "unsupported .npy format version %u.%u (expected 1.0, 2.0 or 3.0)", major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (have < pre)
        return npyi_fail(e, "file truncated (%zu bytes) before the header length", have);
    uint32_t len = (uint32_t)b[8] | (uint32_t)b[9] << 8;
    if (major > 1)
        len |= (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
    if (len > total - pre)
        return npyi_fail(e, "header length %lu extends past the end of the file (%llu bytes)",
                         (unsigned long)len, (unsigned long long)total);
    *hoff = pre;
    *hlen = len;
    return 0;
}

/* Everything after the prefix: header dict, byte count, and the exact-size check that must
   pass before anything is allocated for the data. Fills all of *h except data. */
static int parse_rest(const unsigned char *hdr, size_t hoff, size_t hlen, uint64_t total, const npyi_ectx *e,
                      npy_array *h)
{
    if (npyi_parse_header(hdr, hlen, hoff, e, h) || byte_count(h->dtype, h->shape, h->ndim, e, &h->nbytes))
        return -1;
    uint64_t avail = total - hoff - hlen;
    if (h->nbytes > avail)
        return npyi_fail(e, "header says %zu bytes of data, file has %llu", h->nbytes, (unsigned long long)avail);
    if (h->nbytes < avail)
        return npyi_fail(e, "file has %llu bytes after the data (expected %zu bytes of data)",
                         (unsigned long long)(avail - h->nbytes), h->nbytes);
    return 0;
}

/* ---- loading --------------------------------------------------------------------------- */

int npy_load_mem(const void *buf, size_t len, const char *name, npy_array *out, char *err, size_t errlen)
{
    npyi_ectx e = {name ? name : "<memory>", err, errlen};
    if (out)
        memset(out, 0, sizeof *out);
    if (!out || (!buf && len))
        return npyi_fail(&e, "invalid argument (NULL %s)", out ? "buffer" : "output");
    const unsigned char *b = buf;
    size_t hoff, hlen;
    npy_array h = {0};
    if (parse_prefix(b, len, len, &e, &hoff, &hlen) || parse_rest(b + hoff, hoff, hlen, len, &e, &h))
        return -1;
    if (h.nbytes && !(h.data = malloc(h.nbytes)))
        return npyi_fail(&e, "out of memory allocating %zu bytes", h.nbytes);
    if (h.nbytes)
        memcpy(h.data, b + hoff + hlen, h.nbytes);
    *out = h;
    return 0;
}

/* 0 when all n bytes were read; short reads only happen if the file shrank under us. */
static int pread_full(int fd, void *buf, size_t n, uint64_t off, const npyi_ectx *e)
{
    unsigned char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return npyi_fail(e, "read error: %s", strerror(errno));
        if (r == 0)
            return npyi_fail(e, "file shrank while reading");
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int load_fd(int fd, const npyi_ectx *e, npy_array *out)
{
    unsigned char pre[12], *hdr;
    size_t hoff, hlen;
    npy_array h = {0};
    struct stat st;
    if (fstat(fd, &st) != 0)
        return npyi_fail(e, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return npyi_fail(e, "not a regular file");
    uint64_t total = (uint64_t)st.st_size;
    size_t want = total < sizeof pre ? (size_t)total : sizeof pre;
    if (pread_full(fd, pre, want, 0, e) || parse_prefix(pre, want, total, e, &hoff, &hlen))
        return -1;
    /* hlen <= total was checked, so this allocation is bounded by the real file size. */
    if (!(hdr = malloc(hlen ? hlen : 1)))
        return npyi_fail(e, "out of memory allocating %zu bytes", hlen);
    int rc = pread_full(fd, hdr, hlen, hoff, e) || parse_rest(hdr, hoff, hlen, total, e, &h);
    free(hdr);
    if (rc)
        return -1;
    if (h.nbytes && !(h.data = malloc(h.nbytes)))
        return npyi_fail(e, "out of memory allocating %zu bytes", h.nbytes);
    if (pread_full(fd, h.data, h.nbytes, hoff + hlen, e)) {
        free(h.data);
        return -1;
    }
    *out = h;
    return 0;
}

int npy_load(const char *path, npy_array *out, char *err, size_t errlen)
{
    npyi_ectx e = {path ? path : "<null>", err, errlen};
    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return npyi_fail(&e, "invalid argument (NULL %s)", out ? "path" : "output");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return npyi_fail(&e, "cannot open: %s", strerror(errno));
    int rc = load_fd(fd, &e, out);
    close(fd);
    return rc;
}

/* ---- saving ---------------------------------------------------------------------------- */

/* Header length as NumPy writes it: dict, space padding so the data starts 64-byte aligned, '\n'. */
static size_t padded_hlen(size_t pre, size_t dict_len)
{
    size_t h = dict_len + 1;
    return h + (64 - (pre + h) % 64) % 64;
}

int npy_save(const char *path, const npy_array *a, char *err, size_t errlen)
{
    npyi_ectx e = {path ? path : "<null>", err, errlen};
    char sb[256];
    size_t nbytes;
    if (!path || !*path || !a)
        return npyi_fail(&e, "invalid argument (%s)", a ? "empty path" : "NULL array");
    if ((unsigned)a->dtype >= NPYI_N_DTYPES)
        return npyi_fail(&e, "invalid dtype %d", (int)a->dtype);
    if (a->ndim < 0 || a->ndim > NPY_MAX_DIMS)
        return npyi_fail(&e, "invalid ndim %d (must be 0..%d)", a->ndim, NPY_MAX_DIMS);
    if (byte_count(a->dtype, a->shape, a->ndim, &e, &nbytes))
        return -1;
    fmt_shape(sb, sizeof sb, a->shape, a->ndim);
    if (nbytes != a->nbytes)
        return npyi_fail(&e, "nbytes is %zu but shape %s of '%s' needs %zu", a->nbytes, sb,
                         npyi_dtypes[a->dtype].descr, nbytes);
    if (nbytes && !a->data)
        return npyi_fail(&e, "invalid argument (NULL data with %zu bytes)", nbytes);

    char dict[512];
    int dn = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      npyi_dtypes[a->dtype].descr, sb);
    if (dn < 0 || (size_t)dn >= sizeof dict)
        return npyi_fail(&e, "internal error: header too long");
    /* Version 2.0 only when a 1.0 header cannot hold it; unreachable with NPY_MAX_DIMS == 8. */
    size_t pre = padded_hlen(10, (size_t)dn) > 65535 ? 12 : 10, hlen = padded_hlen(pre, (size_t)dn);
    unsigned char hdr[12 + sizeof dict + 64];
    memcpy(hdr, MAGIC, 6);
    hdr[6] = pre == 10 ? 1 : 2;
    hdr[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        hdr[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(hdr + pre, dict, (size_t)dn);
    memset(hdr + pre + dn, ' ', hlen - (size_t)dn - 1);
    hdr[pre + hlen - 1] = '\n';

    /* the header, then the data, through a temporary file (never a partial .npy at path) */
    rqs_span parts[2] = {{hdr, pre + hlen}, {a->data, nbytes}};
    return rqs_write_atomic(path, parts, 2, err, errlen);
}

int64_t npy_int_at(const npy_array *a, int64_t i)
{
    const unsigned char *p = (const unsigned char *)a->data + (size_t)i * npy_dtype_size(a->dtype);
    int32_t i32;
    int64_t i64;
    uint16_t u16;
    switch (a->dtype) { /* memcpy: the data of an array loaded from memory need not be aligned */
    case NPY_I32: memcpy(&i32, p, 4); return i32;
    case NPY_I64: memcpy(&i64, p, 8); return i64;
    case NPY_U16: memcpy(&u16, p, 2); return u16;
    default: return 0;
    }
}

double npy_real_at(const npy_array *a, int64_t i)
{
    const unsigned char *p = (const unsigned char *)a->data + (size_t)i * npy_dtype_size(a->dtype);
    float f;
    double d;
    switch (a->dtype) {
    case NPY_F32: memcpy(&f, p, 4); return f;
    case NPY_F64: memcpy(&d, p, 8); return d;
    default: return 0.0;
    }
}

void npy_free(npy_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
