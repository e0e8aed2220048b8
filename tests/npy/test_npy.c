/* Tests for support/npy: NumPy-written fixtures, save/load round trips, and the small API pieces.
 * Fixture values are regenerated here; keep them in sync with scripts/gen_npy_fixtures.py.
 * Hostile input is tested in test_npy_malformed.c. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#endif

#include "npy.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy_test.h"

/* ---- helpers --------------------------------------------------------------------------- */

/* The q() helper in gen_npy_fixtures.py: quarter steps centred on zero, exact in all float types. */
static double q(int i, int n) { return (i - n / 2) * 0.25; }

static void load_ok(const char *path, npy_array *a, npy_dtype dt, int ndim, const int64_t *shape)
{
    char err[256] = "";
    cr_assert_eq(npy_load(path, a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a->dtype, dt);
    cr_assert_eq(a->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        cr_assert_eq(a->shape[i], shape[i], "axis %d", i);
    cr_assert_eq((int64_t)a->nbytes, npy_numel(a) * (int64_t)npy_dtype_size(dt));
}

/* Load must fail, the message must name the file and contain needle, and *out must be zeroed. */
static void load_fails(const char *path, const char *needle)
{
    npy_array a;
    char err[256] = "";
    memset(&a, 0x5a, sizeof a);
    cr_assert_neq(npy_load(path, &a, err, sizeof err), 0, "%s loaded", path);
    cr_assert(strstr(err, path) && strstr(err, needle), "message '%s' lacks '%s'", err, needle);
    cr_assert(is_zeroed(&a));
}

/* ---- NumPy-written fixtures ------------------------------------------------------------ */

Test(fixtures, f32_2d)
{
    npy_array a;
    load_ok(FIX("f32_2d.npy"), &a, NPY_F32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)a.data)[i], (float)q(i, 6), "element %d", i);
    npy_free(&a);
    cr_assert(is_zeroed(&a));
}

Test(fixtures, f32_4d)
{
    npy_array a;
    load_ok(FIX("f32_4d.npy"), &a, NPY_F32, 4, (int64_t[]){2, 3, 2, 2});
    for (int i = 0; i < 24; i++)
        cr_assert_eq(((float *)a.data)[i], (float)q(i, 24), "element %d", i);
    npy_free(&a);
}

Test(fixtures, f16_bits)
{
    static const uint16_t want[8] = {0x0000, 0x3c00, 0xc000, 0x3800, 0x7bff, 0x0400, 0x0001, 0x7c00};
    npy_array a;
    load_ok(FIX("f16_1d.npy"), &a, NPY_F16, 1, (int64_t[]){8});
    cr_assert_arr_eq(a.data, want, sizeof want);
    npy_free(&a);
}

Test(fixtures, f64_2d)
{
    static const double want[6] = {0.0, 1.5, -2.25, 1e300, 5e-324, -0.0};
    npy_array a;
    load_ok(FIX("f64_2d.npy"), &a, NPY_F64, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((double *)a.data)[i], want[i], "element %d", i);
    cr_assert(signbit(((double *)a.data)[5]));
    npy_free(&a);
}

Test(fixtures, integers)
{
    static const int32_t w32[6] = {INT32_MIN, -1, 0, 1, INT32_MAX, 42};
    static const int64_t w64[6] = {INT64_MIN, -1, 0, 1, INT64_MAX, INT64_C(1) << 40};
    static const uint16_t w16[5] = {0, 1, 65535, 256, 0x1234};
    npy_array a;
    load_ok(FIX("i32_1d.npy"), &a, NPY_I32, 1, (int64_t[]){6});
    cr_assert_arr_eq(a.data, w32, sizeof w32);
    npy_free(&a);
    load_ok(FIX("i64_1d.npy"), &a, NPY_I64, 1, (int64_t[]){6});
    cr_assert_arr_eq(a.data, w64, sizeof w64);
    npy_free(&a);
    load_ok(FIX("u16_1d.npy"), &a, NPY_U16, 1, (int64_t[]){5});
    cr_assert_arr_eq(a.data, w16, sizeof w16);
    npy_free(&a);
}

Test(fixtures, scalar_0d)
{
    npy_array a;
    load_ok(FIX("scalar_0d.npy"), &a, NPY_F32, 0, NULL);
    cr_assert_eq(npy_numel(&a), 1);
    cr_assert_eq(*(float *)a.data, 3.5f);
    npy_free(&a);
}

Test(fixtures, empty)
{
    npy_array a;
    load_ok(FIX("empty_0x3.npy"), &a, NPY_F32, 2, (int64_t[]){0, 3});
    cr_assert_eq(a.nbytes, 0);
    npy_free(&a);
    load_ok(FIX("empty_2x0x3.npy"), &a, NPY_I64, 3, (int64_t[]){2, 0, 3});
    cr_assert_eq(npy_numel(&a), 0);
    npy_free(&a);
}

Test(fixtures, header_v2_and_v3)
{
    const char *files[2] = {FIX("v2_f32.npy"), FIX("v3_f32.npy")};
    for (int f = 0; f < 2; f++) {
        npy_array a;
        load_ok(files[f], &a, NPY_F32, 2, (int64_t[]){3, 2});
        for (int i = 0; i < 6; i++)
            cr_assert_eq(((float *)a.data)[i], (float)q(i, 6));
        npy_free(&a);
    }
}

Test(fixtures, numpy_files_we_reject)
{
    load_fails(FIX("bad_be_f4.npy"), "unsupported dtype '>f4' (big-endian");
    load_fails(FIX("bad_fortran.npy"), "Fortran order not supported; use np.ascontiguousarray");
    load_fails(FIX("bad_c8.npy"), "unsupported dtype '<c8'");
    load_fails(FIX("bad_bool.npy"), "unsupported dtype '|b1'");
}

Test(fixtures, load_mem_matches_load)
{
    size_t len;
    void *buf = slurp(FIX("f32_4d.npy"), &len);
    npy_array a, b;
    char err[256];
    cr_assert_eq(npy_load_mem(buf, len, NULL, &a, err, sizeof err), 0, "%s", err);
    load_ok(FIX("f32_4d.npy"), &b, NPY_F32, 4, (int64_t[]){2, 3, 2, 2});
    cr_assert_eq(a.nbytes, b.nbytes);
    cr_assert_arr_eq(a.data, b.data, a.nbytes);
    npy_free(&a);
    npy_free(&b);
    cr_assert_neq(npy_load_mem(buf, 5, NULL, &a, err, sizeof err), 0);
    cr_assert(strstr(err, "<memory>: "), "%s", err);
    free(buf);
}

Test(fixtures, not_a_file)
{
    load_fails(NPY_FIXTURES "/does-not-exist.npy", "cannot open");
    load_fails(NPY_FIXTURES, "not a regular file");
}

/* ---- save ------------------------------------------------------------------------------ */

static char g_dir[64];

static void mk_dir(void) { cr_assert(mkdtemp(strcpy(g_dir, "/tmp/npytest.XXXXXX"))); }

static void rm_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *de;
    char p[512];
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
            if (unlink(p))
                rmdir(p);
        }
    if (d)
        closedir(d);
    rmdir(g_dir);
}

TestSuite(save, .init = mk_dir, .fini = rm_dir);

static int dir_entries(void)
{
    DIR *d = opendir(g_dir);
    int n = -2; /* . and .. */
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static void roundtrip(npy_dtype dt, int ndim, const int64_t *shape)
{
    npy_array a = {.dtype = dt, .ndim = ndim}, b;
    char path[128], err[256] = "";
    if (ndim)
        memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    a.nbytes = (size_t)npy_numel(&a) * npy_dtype_size(dt);
    a.data = a.nbytes ? malloc(a.nbytes) : NULL;
    for (size_t i = 0; i < a.nbytes; i++)
        ((unsigned char *)a.data)[i] = (unsigned char)(i * 37 + 11);
    snprintf(path, sizeof path, "%s/rt_%d_%d.npy", g_dir, (int)dt, ndim);
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    load_ok(path, &b, dt, ndim, shape);
    cr_assert_eq(b.nbytes, a.nbytes);
    if (a.nbytes)
        cr_assert_arr_eq(b.data, a.data, a.nbytes);
    cr_assert_eq(dir_entries(), 1, "temporary file left behind");
    cr_assert_eq(unlink(path), 0);
    npy_free(&a);
    npy_free(&b);
}

Test(save, roundtrip_f32) { roundtrip(NPY_F32, 3, (int64_t[]){2, 3, 4}); }
Test(save, roundtrip_f16) { roundtrip(NPY_F16, 2, (int64_t[]){5, 7}); }
Test(save, roundtrip_f64) { roundtrip(NPY_F64, 1, (int64_t[]){9}); }
Test(save, roundtrip_i32) { roundtrip(NPY_I32, 4, (int64_t[]){1, 2, 3, 1}); }
Test(save, roundtrip_i64) { roundtrip(NPY_I64, 8, (int64_t[]){1, 2, 1, 2, 1, 2, 1, 3}); }
Test(save, roundtrip_u16) { roundtrip(NPY_U16, 2, (int64_t[]){3, 3}); }
Test(save, roundtrip_0d)
{
    for (int dt = NPY_F32; dt <= NPY_U16; dt++)
        roundtrip((npy_dtype)dt, 0, NULL);
}
Test(save, roundtrip_empty)
{
    roundtrip(NPY_F32, 1, (int64_t[]){0});
    roundtrip(NPY_I64, 3, (int64_t[]){4, 0, 2});
}

/* Our writer should produce NumPy's exact bytes for ordinary arrays (same dict text, padded
   with spaces so the data starts 64-byte aligned). */
Test(save, bytes_match_numpy)
{
    float v[6];
    for (int i = 0; i < 6; i++)
        v[i] = (float)q(i, 6);
    npy_array a = {.dtype = NPY_F32, .ndim = 2, .shape = {2, 3}, .data = v, .nbytes = sizeof v};
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/x.npy", g_dir);
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    size_t n1, n2;
    unsigned char *mine = slurp(path, &n1), *theirs = slurp(FIX("f32_2d.npy"), &n2);
    cr_assert_eq(n1, n2);
    cr_assert_arr_eq(mine, theirs, n1);
    cr_assert_eq(mine[6], 1);
    free(mine);
    free(theirs);
}

Test(save, overwrites_existing)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/x.npy", g_dir);
    int32_t v1[3] = {1, 2, 3}, v2 = 7;
    npy_array a = {.dtype = NPY_I32, .ndim = 1, .shape = {3}, .data = v1, .nbytes = sizeof v1};
    npy_array b = {.dtype = NPY_I32, .ndim = 0, .data = &v2, .nbytes = sizeof v2}, c;
    cr_assert_eq(npy_save(path, &a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(npy_save(path, &b, err, sizeof err), 0, "%s", err);
    load_ok(path, &c, NPY_I32, 0, NULL);
    cr_assert_eq(*(int32_t *)c.data, 7);
    npy_free(&c);
    cr_assert_eq(dir_entries(), 1);
}

Test(save, missing_directory)
{
    char path[128], err[256] = "";
    struct stat st;
    snprintf(path, sizeof path, "%s/nope/x.npy", g_dir);
    float v = 1;
    npy_array a = {.dtype = NPY_F32, .data = &v, .nbytes = 4};
    cr_assert_neq(npy_save(path, &a, err, sizeof err), 0);
    cr_assert(strstr(err, path) && strstr(err, "No such file"), "%s", err);
    cr_assert_neq(stat(path, &st), 0);
    cr_assert_eq(dir_entries(), 0);
}

/* rename() onto a directory fails after the temp file was fully written: it must be removed. */
Test(save, rename_failure_removes_temp)
{
    char path[128], err[256] = "";
    snprintf(path, sizeof path, "%s/d.npy", g_dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    float v = 1;
    npy_array a = {.dtype = NPY_F32, .data = &v, .nbytes = 4};
    cr_assert_neq(npy_save(path, &a, err, sizeof err), 0);
    cr_assert(strstr(err, "rename"), "%s", err);
    cr_assert_eq(dir_entries(), 1, "temporary file left behind");
}

/* A temp file we did not create (e.g. a concurrent save) must be neither used nor removed. */
Test(save, existing_temp_is_left_alone)
{
    char path[128], tmp[160], err[256] = "";
    struct stat st;
    snprintf(path, sizeof path, "%s/x.npy", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    cr_assert(f);
    fclose(f);
    float v = 1;
    npy_array a = {.dtype = NPY_F32, .data = &v, .nbytes = 4};
    cr_assert_neq(npy_save(path, &a, err, sizeof err), 0);
    cr_assert(strstr(err, "File exists"), "%s", err);
    cr_assert_eq(stat(tmp, &st), 0);
    cr_assert_neq(stat(path, &st), 0);
}

Test(save, validates_input)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/x.npy", g_dir);
    float v[6] = {0};
    npy_array ok = {.dtype = NPY_F32, .ndim = 2, .shape = {2, 3}, .data = v, .nbytes = sizeof v}, a;
#define CASE(mod, text)                                                                        \
    a = ok;                                                                                    \
    mod;                                                                                       \
    cr_assert_neq(npy_save(path, &a, err, sizeof err), 0, text);                               \
    cr_assert(strstr(err, text), "'%s' lacks '%s'", err, text)
    CASE(a.ndim = 9, "invalid ndim 9");
    CASE(a.ndim = -1, "invalid ndim -1");
    CASE(a.shape[1] = -3, "negative dimension -3");
    CASE(a.nbytes = 20, "nbytes is 20 but shape (2, 3) of '<f4' needs 24");
    CASE(a.data = NULL, "NULL data");
    CASE(a.dtype = (npy_dtype)17, "invalid dtype 17");
    CASE((a.shape[0] = INT64_C(1) << 62, a.shape[1] = 8), "overflow");
#undef CASE
    cr_assert_neq(npy_save(path, NULL, err, sizeof err), 0);
    cr_assert_neq(npy_save(NULL, &ok, err, sizeof err), 0);
    cr_assert_neq(npy_save("", &ok, NULL, 0), 0);
    cr_assert_eq(dir_entries(), 0);
}

/* ---- small API pieces ------------------------------------------------------------------ */

Test(api, dtype_table_and_numel)
{
    static const char *d[] = {"<f4", "<f2", "<f8", "<i4", "<i8", "<u2"};
    static const size_t s[] = {4, 2, 8, 4, 8, 2};
    for (int t = NPY_F32; t <= NPY_U16; t++) {
        cr_assert_str_eq(npy_dtype_descr((npy_dtype)t), d[t]);
        cr_assert_eq(npy_dtype_size((npy_dtype)t), s[t]);
    }
    cr_assert_null(npy_dtype_descr((npy_dtype)6));
    cr_assert_eq(npy_dtype_size((npy_dtype)-1), 0);
    npy_array a = {.ndim = 3, .shape = {2, 3, 4}};
    cr_assert_eq(npy_numel(&a), 24);
    a.ndim = 0;
    cr_assert_eq(npy_numel(&a), 1);
    a = (npy_array){.ndim = 2, .shape = {INT64_MAX, 2}};
    cr_assert_eq(npy_numel(&a), -1);
    a.ndim = 9;
    cr_assert_eq(npy_numel(&a), -1);
    cr_assert_eq(npy_numel(NULL), -1);
}

Test(api, error_buffer_handling)
{
    npy_array a;
    char small[8];
    cr_assert_neq(npy_load_mem("xx", 2, "name.npy", &a, NULL, 0), 0);
    cr_assert_neq(npy_load_mem("xx", 2, "name.npy", &a, small, sizeof small), 0);
    cr_assert_str_eq(small, "name.np");
    cr_assert_neq(npy_load_mem("xx", 2, "name.npy", NULL, small, sizeof small), 0);
    cr_assert_neq(npy_load_mem(NULL, 5, "name.npy", &a, small, 1), 0);
    cr_assert_str_eq(small, "");
    cr_assert(is_zeroed(&a));
    npy_free(NULL);
    npy_free(&a);
}

Test(api, element_access)
{
    int32_t i32[2] = {-7, INT32_MAX};
    int64_t i64[2] = {INT64_MIN, 3};
    uint16_t u16[2] = {1, 65535};
    float f32[2] = {0.5f, -2.0f};
    double f64[2] = {1e300, -0.25};
    npy_array a = {.ndim = 1, .shape = {2}};
    a.dtype = NPY_I32, a.data = i32;
    cr_assert(npy_int_at(&a, 0) == -7 && npy_int_at(&a, 1) == INT32_MAX);
    a.dtype = NPY_I64, a.data = i64;
    cr_assert(npy_int_at(&a, 0) == INT64_MIN && npy_int_at(&a, 1) == 3);
    a.dtype = NPY_U16, a.data = u16;
    cr_assert(npy_int_at(&a, 1) == 65535);
    cr_assert(npy_real_at(&a, 1) == 0.0); /* not a float dtype */
    a.dtype = NPY_F32, a.data = f32;
    cr_assert(npy_real_at(&a, 0) == 0.5 && npy_real_at(&a, 1) == -2.0);
    cr_assert(npy_int_at(&a, 0) == 0); /* not an integer dtype */
    a.dtype = NPY_F64, a.data = f64;
    cr_assert(npy_real_at(&a, 0) == 1e300 && npy_real_at(&a, 1) == -0.25);
}
