/* libFuzzer target: the .npy reader (support/npy.c, support/npy_header.c) on arbitrary bytes.
 *
 * The input is the file image itself. Whatever it is, npy_load_mem() must either load something
 * self-consistent or fail with a one-line message naming the input and leave *out zeroed; ASan,
 * UBSan and LSan catch the rest (out-of-bounds reads in the header lexer, huge allocations from
 * a lying header, leaks on error paths). A second call with a small error buffer must agree with
 * the first and truncate the same message. The same bytes written to a file must give npy_load()
 * the same verdict, message and array (a differential check of the file path's partial reads;
 * every loadable input, one failing input in eight).
 * Seeds: fuzz/corpus/npy/; dictionary: fuzz/npy.dict. */
#include "npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_npy: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int is_zeroed(const npy_array *a)
{
    static const npy_array z;
    return memcmp(a, &z, sizeof z) == 0;
}

/* NUL-terminated within cap bytes, one line, and "fuzz: <what>" cut short only by the buffer. */
static void check_message(const char *err, size_t cap)
{
    static const char prefix[] = "fuzz: ";
    size_t n = strnlen(err, cap), pn = sizeof prefix - 1;
    CHECK(n < cap);
    CHECK(!strchr(err, '\n') && !strchr(err, '\r'));
    CHECK(strncmp(err, prefix, n < pn ? n : pn) == 0);
    CHECK(n > pn || n == cap - 1);
}

/* One scratch file per process, rewritten for every input. Where /proc is mounted the file is
   unlinked at once and opened again through /proc/self/fd, so a crash leaves nothing behind. */
static char g_path[64];
static int g_fd = -1;

static void remove_scratch(void) { unlink(g_path); }

static const char *scratch(const uint8_t *data, size_t size)
{
    if (g_fd < 0) {
        /* tmpfs when there is one: a disk-backed file costs most of the throughput */
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        snprintf(g_path, sizeof g_path, "%s/fuzz_npy.XXXXXX", dir && strlen(dir) < 40 ? dir : "/tmp");
        g_fd = mkstemp(g_path);
        CHECK(g_fd >= 0);
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", g_fd);
        if (access(proc, R_OK) == 0 && unlink(g_path) == 0)
            memcpy(g_path, proc, sizeof proc);
        else
            atexit(remove_scratch);
    }
    CHECK(ftruncate(g_fd, 0) == 0);
    CHECK(size == 0 || pwrite(g_fd, data, size, 0) == (ssize_t)size);
    return g_path;
}

/* npy_load() on the same bytes: same verdict, same message after the name, same array. Done for
   every input that loads and for one failing input in eight (chosen by content, so a run is
   reproducible): the file round trip costs more than the parse. */
static void check_file_path(const uint8_t *data, size_t size, int rc, const npy_array *mem, const char *mem_err)
{
    if (rc != 0 && (size + (size ? data[size / 2] : 0u)) % 8 != 0)
        return;
    const char *path = scratch(data, size);
    npy_array f;
    char err[256];
    memset(&f, 0x5a, sizeof f);
    int frc = npy_load(path, &f, err, sizeof err);
    CHECK((frc == 0) == (rc == 0));
    if (frc != 0) {
        CHECK(is_zeroed(&f));
        size_t pn = strlen(path);
        CHECK(strncmp(err, path, pn) == 0 && strncmp(err + pn, ": ", 2) == 0);
        /* both messages are cut at 255 bytes, so compare what both hold */
        const char *a = err + pn + 2, *b = mem_err + strlen("fuzz: ");
        size_t n = strlen(a) < strlen(b) ? strlen(a) : strlen(b);
        CHECK(strncmp(a, b, n) == 0);
        return;
    }
    CHECK(f.dtype == mem->dtype && f.ndim == mem->ndim && f.nbytes == mem->nbytes);
    CHECK(memcmp(f.shape, mem->shape, sizeof f.shape) == 0);
    CHECK(f.nbytes == 0 || memcmp(f.data, mem->data, f.nbytes) == 0);
    npy_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    char err[256];
    memset(&a, 0x5a, sizeof a); /* the reader must zero it whatever happens */
    memset(err, 0x5a, sizeof err);
    int rc = npy_load_mem(data, size, "fuzz", &a, err, sizeof err);
    if (rc == 0) {
        CHECK(a.dtype >= NPY_F32 && a.dtype <= NPY_U16);
        CHECK(a.ndim >= 0 && a.ndim <= NPY_MAX_DIMS);
        for (int i = 0; i < a.ndim; i++)
            CHECK(a.shape[i] >= 0);
        int64_t n = npy_numel(&a);
        CHECK(n >= 0);
        size_t es = npy_dtype_size(a.dtype);
        CHECK(es > 0 && a.nbytes == (size_t)n * es);
        CHECK(a.nbytes <= size);
        CHECK(a.nbytes == 0 || a.data != NULL);
        /* the data is the tail of the image, copied verbatim */
        if (a.nbytes)
            CHECK(memcmp(a.data, data + size - a.nbytes, a.nbytes) == 0);
        check_file_path(data, size, rc, &a, err);
        npy_free(&a);
        CHECK(is_zeroed(&a));
    } else {
        CHECK(is_zeroed(&a));
        check_message(err, sizeof err);
        check_file_path(data, size, rc, &a, err);
    }

    /* Small error buffers: same verdict, the message a prefix of the full one. */
    char small[24];
    size_t cap = 1 + size % sizeof small;
    npy_array b;
    int rc2 = npy_load_mem(data, size, "fuzz", &b, small, cap);
    CHECK((rc2 == 0) == (rc == 0));
    if (rc2 == 0) {
        npy_free(&b);
    } else {
        CHECK(is_zeroed(&b));
        check_message(small, cap);
        CHECK(strncmp(small, err, strlen(small)) == 0);
    }
    /* No error buffer at all. */
    CHECK((npy_load_mem(data, size, NULL, &b, NULL, 0) == 0) == (rc == 0));
    npy_free(&b);
    return 0;
}
