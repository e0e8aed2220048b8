/* The knobs as keys and values (ropeqk.h: ropeqk_knob_count, ropeqk_knob_get_info,
 * ropeqk_tuning_get / _set, ropeqk_ctx_knob), on the default device (again on Vulkan as
 * knobs_vulkan): every ropeqk_tuning field is some backend's knob, get and set by name are the
 * fields and refuse what context creation refuses, the context's values are ropeqk_ctx_tuning's,
 * and every environment variable of the context's backend's table is parsed strictly. No kernel is
 * built: about a second on pocl. */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(knobs, .init = th_ctx_init, .fini = th_ctx_fini);

static const char *const backends[] = {"opencl", "vulkan"};

/* ropeqk_tuning's knob fields, in struct order (profile is not a knob: ROPEQK_PROFILE picks it). */
static const char *const fields[] = {"tq", "wg", "vk", "dkb", "dwg", "decode", "rot_uwg", "vendor_ext", "atq",
                                     "avk", "awg", "nv", "tile", "rb", "tk", "vk_block", "vk_tk", "vk_rows",
                                     "attn_tile", "attn_keys", "attn_tk", "attn_rb", "attn_dv", "chunk_rows",
                                     "dense_rows", "vk_coopmat", "vk_cm_rows", "vk_cm_keys"};
#define NFIELDS (sizeof fields / sizeof fields[0])

static int32_t *field_of(ropeqk_tuning *t, size_t i)
{
    return &t->tq + i; /* the knob fields are consecutive int32_t from tq (ropeqk.h) */
}

/* Whether a backend of this build has a knob of that name. */
static bool built(const char *name)
{
    for (size_t b = 0; b < 2; b++)
        for (int32_t i = 0, n = ropeqk_knob_count(backends[b]); i < n; i++) {
            ropeqk_knob k;
            if (ropeqk_knob_get_info(backends[b], i, &k) == ROPEQK_SUCCESS && !strcmp(k.name, name))
                return true;
        }
    return false;
}

Test(knobs, every_field_is_a_backends_knob_and_the_tables_are_well_formed)
{
    _Static_assert(sizeof(ropeqk_tuning) == sizeof(ropeqk_profile) + NFIELDS * sizeof(int32_t),
                   "a new ropeqk_tuning field: add it here and to its backend's knob table");
    bool covered[NFIELDS] = {false};
    int tables = 0;
    for (size_t b = 0; b < 2; b++) {
        int32_t n = ropeqk_knob_count(backends[b]);
        if (n < 0)
            continue; /* not in this build */
        tables++;
        cr_expect_gt(n, 0, "%s", backends[b]);
        for (int32_t i = 0; i < n; i++) {
            ropeqk_knob k;
            cr_assert_eq(ropeqk_knob_get_info(backends[b], i, &k), ROPEQK_SUCCESS, "%s %d", backends[b], i);
            cr_expect(k.name && *k.name && k.allowed && k.doc && *k.doc, "%s %d", backends[b], i);
            cr_expect(k.min <= k.max, "%s %s: [%d, %d]", backends[b], k.name, k.min, k.max);
            cr_expect(k.env || k.in_struct, "%s %s: neither a variable nor a field", backends[b], k.name);
            if (k.env)
                cr_expect(strncmp(k.env, "ROPEQK_", 7) == 0, "%s %s: %s", backends[b], k.name, k.env);
            for (int32_t j = 0; j < i; j++) {
                ropeqk_knob o;
                ropeqk_knob_get_info(backends[b], j, &o);
                cr_expect(strcmp(o.name, k.name) != 0, "%s: %s twice", backends[b], k.name);
            }
            for (size_t f = 0; f < NFIELDS; f++)
                if (!strcmp(fields[f], k.name)) {
                    cr_expect(k.in_struct, "%s %s is a field", backends[b], k.name);
                    covered[f] = true;
                }
        }
        ropeqk_knob k;
        cr_expect_eq(ropeqk_knob_get_info(backends[b], n, &k), ROPEQK_ERR_BAD_PARAM);
        cr_expect_eq(ropeqk_knob_get_info(backends[b], -1, &k), ROPEQK_ERR_BAD_PARAM);
    }
    cr_assert_gt(tables, 0);
    if (tables == 2) /* one backend alone has only its own fields */
        for (size_t f = 0; f < NFIELDS; f++)
            cr_expect(covered[f], "ropeqk_tuning.%s is no backend's knob", fields[f]);
    cr_expect_eq(ropeqk_knob_count("OpenCL"), ropeqk_knob_count("opencl"));
    cr_expect_eq(ropeqk_knob_count("cuda"), -1);
    cr_expect_eq(ropeqk_knob_count(NULL), -1);
    ropeqk_knob k;
    cr_expect_eq(ropeqk_knob_get_info("cuda", 0, &k), ROPEQK_ERR_BAD_PARAM);
}

Test(knobs, get_and_set_by_name_are_the_fields_and_refuse_bad_values)
{
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    for (size_t f = 0; f < NFIELDS; f++) {
        *field_of(&t, f) = (int32_t)(100 + f);
        int32_t v = 0;
        if (!built(fields[f])) { /* a field of a backend this build lacks: no knob by that name here */
            cr_expect_eq(ropeqk_tuning_get(&t, fields[f], &v), ROPEQK_ERR_BAD_PARAM, "%s", fields[f]);
            continue;
        }
        cr_expect_eq(ropeqk_tuning_get(&t, fields[f], &v), ROPEQK_SUCCESS, "%s: %s", fields[f], ropeqk_last_error());
        cr_expect_eq(v, (int32_t)(100 + f), "%s", fields[f]);
    }
    memset(&t, 0, sizeof t);
    static const struct {
        const char *name;
        int32_t v;
        ropeqk_status st;
        const char *msg; /* in ropeqk_last_error() when refused */
    } cases[] = {
        {"tq", 5, ROPEQK_SUCCESS, NULL},           {"tq", 33, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_TQ"},
        {"vk", 3, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_VK"}, {"dkb", 7, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_DKB"},
        {"tile", -1, ROPEQK_SUCCESS, NULL},        {"tile", 48, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_TILE"},
        {"decode", -1, ROPEQK_SUCCESS, NULL},      {"decode", 2, ROPEQK_ERR_BAD_CONFIG, "decode must be"},
        {"vendor_ext", 1, ROPEQK_ERR_BAD_CONFIG, "vendor_ext must be"}, {"vendor_ext", -1, ROPEQK_SUCCESS, NULL},
        {"vk_block", 3, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_VK_BLOCK"}, {"vk_coopmat", 1, ROPEQK_SUCCESS, NULL},
        {"vk_coopmat", 2, ROPEQK_ERR_BAD_CONFIG, "vk_coopmat must be"},
        {"dense_rows", -1, ROPEQK_SUCCESS, NULL},  {"dense_rows", 1025, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_DENSE_DECODE"},
        {"attn_rb", 3, ROPEQK_ERR_BAD_CONFIG, "ROPEQK_ATTN_RB"}, {"chunk_rows", 0, ROPEQK_SUCCESS, NULL},
        {"paged_fast", 1, ROPEQK_ERR_BAD_PARAM, "environment only"}, {"no_such", 1, ROPEQK_ERR_BAD_PARAM, "no_such"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t cur; /* knobs of a backend not built in are unknown there */
        if (ropeqk_tuning_get(&t, cases[i].name, &cur) != ROPEQK_SUCCESS && cases[i].st != ROPEQK_ERR_BAD_PARAM)
            continue;
        ropeqk_tuning before = t;
        ropeqk_status st = ropeqk_tuning_set(&t, cases[i].name, cases[i].v);
        cr_expect_eq(st, cases[i].st, "%s = %d: %d", cases[i].name, cases[i].v, st);
        if (st == ROPEQK_SUCCESS) {
            int32_t v = 0;
            cr_expect_eq(ropeqk_tuning_get(&t, cases[i].name, &v), ROPEQK_SUCCESS);
            cr_expect_eq(v, cases[i].v, "%s", cases[i].name);
        } else {
            cr_expect(memcmp(&before, &t, sizeof t) == 0, "%s = %d changed the struct", cases[i].name, cases[i].v);
            cr_expect(strstr(ropeqk_last_error(), cases[i].msg), "%s = %d: '%s'", cases[i].name, cases[i].v,
                      ropeqk_last_error());
        }
    }
    int32_t v;
    cr_expect_eq(ropeqk_tuning_get(NULL, "tq", &v), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_tuning_set(&t, NULL, 1), ROPEQK_ERR_NULL_POINTER);
}

/* A context made with knobs set by name has what ropeqk_ctx_tuning reports field by field, and
 * ropeqk_ctx_knob gives the same values, environment-only knobs included. */
Test(knobs, context_values_by_name_are_its_tuning)
{
    const char *be = "";
    ropeqk_ctx_backend_error(th_ctx, &be);
    bool vk = th_is_vulkan(th_ctx);
    ropeqk_tuning req;
    memset(&req, 0, sizeof req);
    cr_assert_eq(ropeqk_tuning_set(&req, vk ? "vk_rows" : "tq", vk ? 32 : 3), ROPEQK_SUCCESS);
    cr_assert_eq(ropeqk_tuning_set(&req, "chunk_rows", 7), ROPEQK_SUCCESS);
    setenv("ROPEQK_PAGED_FAST", "0", 1);
    ropeqk_ctx *x = th_ctx_tuned(&req);
    unsetenv("ROPEQK_PAGED_FAST");
    ropeqk_tuning got;
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    cr_expect_eq(vk ? got.vk_rows : got.tq, vk ? 32 : 3);
    int32_t n = ropeqk_knob_count(be), fielded = 0;
    cr_assert_gt(n, 0, "backend '%s'", be);
    for (int32_t i = 0; i < n; i++) {
        ropeqk_knob k;
        int32_t v = -99, w = -98;
        cr_assert_eq(ropeqk_knob_get_info(be, i, &k), ROPEQK_SUCCESS);
        cr_expect_eq(ropeqk_ctx_knob(x, k.name, &v), ROPEQK_SUCCESS, "%s: %s", k.name, ropeqk_last_error());
        if (k.in_struct) {
            cr_expect_eq(ropeqk_tuning_get(&got, k.name, &w), ROPEQK_SUCCESS);
            cr_expect_eq(v, w, "%s: ctx_knob %d, ctx_tuning %d", k.name, v, w);
            fielded++;
        }
    }
    cr_expect_gt(fielded, 0);
    int32_t v = -1;
    cr_expect_eq(ropeqk_ctx_knob(x, "chunk_rows", &v), ROPEQK_SUCCESS);
    cr_expect_eq(v, 7);
    cr_expect_eq(ropeqk_ctx_knob(x, "paged_fast", &v), ROPEQK_SUCCESS);
    cr_expect_eq(v, 0, "ROPEQK_PAGED_FAST=0 in effect: %d", v);
    cr_expect_eq(ropeqk_ctx_knob(x, vk ? "tq" : "vk_block", &v), ROPEQK_ERR_BAD_PARAM, "the other backend's knob");
    cr_expect_eq(ropeqk_ctx_knob(x, "no_such", &v), ROPEQK_ERR_BAD_PARAM);
    ropeqk_ctx_destroy(x);
}

/* Every variable of the context's backend's table, malformed, fails context creation naming it. */
Test(knobs, every_variable_of_the_table_is_parsed_strictly)
{
    const char *be = "";
    ropeqk_ctx_backend_error(th_ctx, &be);
    int32_t n = ropeqk_knob_count(be), tried = 0;
    for (int32_t i = 0; i < n; i++) {
        ropeqk_knob k;
        cr_assert_eq(ropeqk_knob_get_info(be, i, &k), ROPEQK_SUCCESS);
        if (!k.env)
            continue;
        static const char *const bad[] = {"x", "1e2"};
        for (size_t j = 0; j < 2; j++) {
            setenv(k.env, bad[j], 1);
            ropeqk_ctx *x = (ropeqk_ctx *)1;
            ropeqk_status st = ropeqk_ctx_create(NULL, &x);
            unsetenv(k.env);
            cr_expect_eq(st, ROPEQK_ERR_BAD_CONFIG, "%s='%s': %d", k.env, bad[j], st);
            cr_expect_null(x, "%s", k.env);
            cr_expect(strstr(ropeqk_last_error(), k.env), "%s: '%s'", k.env, ropeqk_last_error());
            if (st == ROPEQK_SUCCESS)
                ropeqk_ctx_destroy(x);
        }
        tried++;
    }
    cr_expect_gt(tried, 0);
}
