/* Tests for support/npy: malformed and hostile input (bad magic, versions, header syntax, dtypes,
 * dimensions, sizes), plus truncations and byte mutations of a real file. Every failure must give
 * a one-line message naming the file and leave the output zeroed. */
#include "npy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy_test.h"

/* ---- helpers --------------------------------------------------------------------------- */

static void mem_fails(const void *buf, size_t len, const char *needle)
{
    npy_array a;
    char err[256] = "";
    memset(&a, 0x5a, sizeof a);
    cr_assert_neq(npy_load_mem(buf, len, "t.npy", &a, err, sizeof err), 0, "expected '%s'", needle);
    cr_assert(strncmp(err, "t.npy: ", 7) == 0, "message '%s' does not name the file", err);
    cr_assert(strstr(err, needle), "message '%s' lacks '%s'", err, needle);
    cr_assert(!strchr(err, '\n'), "message is not one line");
    cr_assert(is_zeroed(&a));
}

static unsigned char g_buf[4096];

/* A .npy image in g_buf: format version major.0, header text used verbatim (so tests can
   break it), then dlen data bytes. */
static size_t mk(int major, const char *hdr, size_t dlen)
{
    size_t hl = strlen(hdr), pre = major == 1 ? 10 : 12;
    memcpy(g_buf, "\x93NUMPY", 6);
    g_buf[6] = (unsigned char)major;
    g_buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        g_buf[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(g_buf + pre, hdr, hl);
    memset(g_buf + pre + hl, 0xab, dlen);
    return pre + hl + dlen;
}

#define HDR(descr, fortran, shape) "{'descr': '" descr "', 'fortran_order': " fortran ", 'shape': " shape ", }\n"
#define F32_2x3 HDR("<f4", "False", "(2, 3)")
#define MEM_FAILS(hdr, dlen, needle) mem_fails(g_buf, mk(1, hdr, dlen), needle)

/* ---- malformed input ------------------------------------------------------------------- */

Test(malformed, magic_and_version)
{
    mem_fails("", 0, "empty");
    mem_fails("\x93NUMPX\x01\x00", 8, "bad magic");
    mem_fails("PK\x03\x04", 4, "bad magic");
    mem_fails("\x93NUM", 4, "truncated");
    mem_fails(g_buf, mk(4, F32_2x3, 24), "version 4.0");
    size_t n = mk(1, F32_2x3, 24);
    g_buf[7] = 1;
    mem_fails(g_buf, n, "version 1.1");
    g_buf[6] = 0, g_buf[7] = 0;
    mem_fails(g_buf, n, "version 0.0");
}

Test(malformed, truncated_before_header_length)
{
    mk(1, F32_2x3, 0);
    mem_fails(g_buf, 9, "before the header length");
    mem_fails(g_buf, 7, "before the format version");
    mk(2, F32_2x3, 0);
    mem_fails(g_buf, 11, "before the header length");
}

Test(malformed, header_len_past_end)
{
    size_t n = mk(1, F32_2x3, 0);
    mem_fails(g_buf, n - 1, "extends past the end");
    g_buf[8] = 0xff, g_buf[9] = 0xff;
    mem_fails(g_buf, n, "header length 65535");
    n = mk(3, F32_2x3, 24);
    g_buf[11] = 0x80;
    mem_fails(g_buf, n, "extends past the end");
}

Test(malformed, unterminated_header)
{
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0, "unterminated header");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),   \n", 24, "no closing '}'");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3\n", 24, "no closing '}'");
    MEM_FAILS("{'descr': '<f4\n", 24, "unterminated string");
    MEM_FAILS("\n", 0, "expected '{'");
    mem_fails(g_buf, mk(1, "", 0), "unterminated header");
}

Test(malformed, non_ascii_and_control_bytes)
{
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), '\xc3\xa9': 1}\n", 24,
              "non-ASCII byte 0xc3");
    size_t n = mk(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }  \xe2\x80\x83\n", 24);
    mem_fails(g_buf, n, "non-ASCII");
    n = mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } \n", 24);
    g_buf[10 + 59] = 0; /* strlen() in mk() would stop at a literal NUL */
    mem_fails(g_buf, n, "control byte 0x00 in header at offset 69");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\t\x1b\n", 24, "control byte 0x1b");
}

Test(malformed, missing_keys)
{
    MEM_FAILS("{'fortran_order': False, 'shape': (2, 3), }\n", 24, "missing key 'descr'");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False}\n", 24, "missing key 'shape'");
    MEM_FAILS("{'shape': (2, 3), 'descr': '<f4'}\n", 24, "missing key 'fortran_order'");
    MEM_FAILS("{}\n", 0, "missing key");
}

Test(malformed, unsupported_dtypes)
{
    MEM_FAILS(HDR("<c8", "False", "(3,)"), 24, "unsupported dtype '<c8'");
    MEM_FAILS(HDR("|b1", "False", "(3,)"), 3, "unsupported dtype '|b1'");
    MEM_FAILS(HDR("<U3", "False", "(2,)"), 24, "unsupported dtype '<U3'");
    MEM_FAILS(HDR("object", "False", "(2,)"), 16, "unsupported dtype 'object'");
    MEM_FAILS(HDR("|O", "False", "(2,)"), 16, "unsupported dtype '|O'");
    MEM_FAILS(HDR("|f4", "False", "(2,)"), 8, "unsupported dtype '|f4' (byte-order marker must be '<')");
    MEM_FAILS(HDR("=i8", "False", "(2,)"), 16, "'=i8'");
    MEM_FAILS("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", 8, "structured");
    MEM_FAILS("{'descr': 4, 'fortran_order': False, 'shape': (2,), }\n", 8, "string for 'descr'");
}

Test(malformed, big_endian)
{
    MEM_FAILS(HDR(">f4", "False", "(2, 3)"), 24, "unsupported dtype '>f4' (big-endian");
    MEM_FAILS(HDR(">i8", "False", "(1,)"), 8, "'>i8' (big-endian");
}

Test(malformed, fortran_order)
{
    MEM_FAILS(HDR("<f4", "True", "(2, 3)"), 24, "Fortran order not supported; use np.ascontiguousarray");
    MEM_FAILS(HDR("<f4", "1", "(2, 3)"), 24, "True or False");
}

Test(malformed, bad_dimensions)
{
    MEM_FAILS(HDR("<f4", "False", "(2, -3)"), 24, "negative dimension -3");
    MEM_FAILS(HDR("<f4", "False", "(99999999999999999999,)"), 0, "does not fit in int64");
    MEM_FAILS(HDR("<f4", "False", "(9223372036854775808,)"), 0, "does not fit in int64");
    MEM_FAILS(HDR("<f4", "False", "(4611686018427387904, 8)"), 0, "element count overflows");
    MEM_FAILS(HDR("<f4", "False", "(4611686018427387904,)"), 0, "byte count overflows size_t");
    MEM_FAILS(HDR("<f4", "False", "(1, 2, 3, 4, 5, 6, 7, 8, 9)"), 0, "more than 8 dimensions");
    MEM_FAILS(HDR("<f4", "False", "(5)"), 20, "trailing comma");
    MEM_FAILS(HDR("<f4", "False", "(05,)"), 20, "leading zero");
    MEM_FAILS(HDR("<f4", "False", "[2, 3]"), 24, "tuple");
    MEM_FAILS(HDR("<f4", "False", "(,)"), 0, "integer dimension");
}

/* A tiny file claiming a 4 TB array must fail on the size check, never reaching malloc
   (under ASan a 4 TB malloc would abort the test). */
Test(malformed, data_size_mismatch)
{
    MEM_FAILS(F32_2x3, 20, "header says 24 bytes of data, file has 20");
    MEM_FAILS(F32_2x3, 28, "file has 4 bytes after the data");
    MEM_FAILS(HDR("<f4", "False", "(1099511627776,)"), 16, "header says 4398046511104 bytes of data");
    MEM_FAILS(HDR("<f8", "False", "(9223372036854775807, 0, 9223372036854775807)"), 8, "after the data");
}

Test(malformed, header_syntax)
{
    MEM_FAILS("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24, "duplicate key");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}\n", 24, "unexpected key 'x'");
    MEM_FAILS("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3)}\n", 24, "escape");
    MEM_FAILS("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", 24, "':'");
    MEM_FAILS("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}\n", 24, "',' or '}'");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x\n", 24, "after the header dict");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),,}\n", 24, "quoted key");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}\n", 24, "',' or ')'");
    MEM_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} #\n", 24, "unexpected character '#'");
}

Test(malformed, tolerant_syntax_accepted)
{
    static const char *ok[] = {
        "{'shape':(2,3),'fortran_order':False,'descr':'<f4'}\n",
        "{ \"descr\" :\t\"<f4\" , 'fortran_order' : False ,\r\n 'shape' : ( 2 , 3 , ) , }    \n",
        "\n {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        npy_array a;
        char err[256] = "";
        cr_assert_eq(npy_load_mem(g_buf, mk(1 + (int)i, ok[i], 24), NULL, &a, err, sizeof err), 0, "%s", err);
        cr_assert(a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3 && a.nbytes == 24);
        npy_free(&a);
    }
}

/* Cheap in-tree fuzzing: every prefix and many single-byte mutations of a real file must
   either fail cleanly or load something self-consistent. ASan/LSan catch the rest. */
Test(malformed, truncations_and_mutations)
{
    static const unsigned char vals[] = {0x00, 0x01, 0x20, 0x7f, 0x80, 0xff, '(', ')', ',', '-', '0', '9',
                                         '\'', '{', '}', ':', '\n', 'T', '>'};
    size_t len;
    unsigned char *orig = slurp(FIX("f32_4d.npy"), &len);
    for (size_t cut = 0; cut < len; cut++)
        mem_fails(orig, cut, ": ");
    unsigned char *m = malloc(len);
    for (size_t i = 0; i < 128; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            npy_array a;
            char err[256] = "";
            memcpy(m, orig, len);
            m[i] = vals[v];
            if (npy_load_mem(m, len, "m", &a, err, sizeof err) == 0) {
                cr_assert_eq((int64_t)a.nbytes, npy_numel(&a) * (int64_t)npy_dtype_size(a.dtype));
                npy_free(&a);
            } else {
                cr_assert(is_zeroed(&a) && strncmp(err, "m: ", 3) == 0, "byte %zu=%u: %s", i, vals[v], err);
            }
        }
    free(m);
    free(orig);
}
