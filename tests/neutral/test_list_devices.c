/* The backend-neutral device listing (ropeqk_list_devices) and the context queries beside it
 * (ropeqk_ctx_device_info, ropeqk_ctx_program_source): every listed device's string opens a context
 * on that device and backend, the count with cap 0, cap smaller than the count, NULL arguments, the
 * default device as ropeqk_ctx_create() picks it for $ROPEQK_DEVICE, and the no-device message.
 * Criterion forks per test: each test sets its own environment. Needs no kernel build (fast). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ropeqk.h"

#define MAXDEV 64

/* The whole listing into l (skips the test without any device); returns the count, which a call
 * with cap 0 must give too. */
static uint32_t list_all(ropeqk_device_info *l)
{
    uint32_t n = 12345;
    ropeqk_status st = ropeqk_list_devices(l, MAXDEV, &n);
    if (st == ROPEQK_ERR_NO_DEVICE)
        cr_skip_test("no device: %s", ropeqk_last_error());
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(st), ropeqk_last_error());
    cr_assert(n >= 1 && n <= MAXDEV, "count %u", n);
    uint32_t m = 0;
    st = ropeqk_list_devices(NULL, 0, &m);
    cr_assert_eq(st, ROPEQK_SUCCESS, "cap 0: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    cr_assert_eq(m, n, "cap 0 counted %u devices, the listing %u", m, n);
    return n;
}

/* Whether the fixed-size string field s (of size len) is NUL-terminated. */
static bool terminated(const char *s, size_t len) { return memchr(s, '\0', len) != NULL; }
#define TERMINATED(f) terminated(f, sizeof f)

/* The listed device (index) the default context opens: ropeqk_ctx_create without a device. */
static int default_of_ctx(const ropeqk_device_info *l, uint32_t n)
{
    ropeqk_ctx *ctx = NULL;
    if (ropeqk_ctx_create(NULL, &ctx) != ROPEQK_SUCCESS)
        return -1;
    ropeqk_device_info d;
    cr_assert_eq(ropeqk_ctx_device_info(ctx, &d), ROPEQK_SUCCESS);
    ropeqk_ctx_destroy(ctx);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(l[i].device, d.device) == 0)
            return (int)i;
    cr_assert_fail("the default context's device '%s' (%s) is not listed", d.device, d.name);
    return -1;
}

/* The index of the one entry with is_default, -1 when none (fails on two). */
static int default_of_list(const ropeqk_device_info *l, uint32_t n)
{
    int def = -1;
    for (uint32_t i = 0; i < n; i++)
        if (l[i].is_default) {
            cr_assert_eq(def, -1, "two default devices: %s and %s", l[def].device, l[i].device);
            def = (int)i;
        }
    return def;
}

Test(list_devices, fields_are_filled_and_strings_unique)
{
    unsetenv("ROPEQK_DEVICE");
    ropeqk_device_info l[MAXDEV];
    uint32_t n = list_all(l);
    for (uint32_t i = 0; i < n; i++) {
        const ropeqk_device_info *d = &l[i];
        cr_expect(TERMINATED(d->backend) && TERMINATED(d->device) && TERMINATED(d->name) && TERMINATED(d->vendor) &&
                      TERMINATED(d->platform) && TERMINATED(d->version) && TERMINATED(d->driver) &&
                      TERMINATED(d->unusable) && TERMINATED(d->details),
                  "device %u: a string is not terminated", i);
        /* "<backend in lower case>:<rest>" */
        size_t bl = strlen(d->backend);
        cr_expect(bl > 0 && strncasecmp(d->device, d->backend, bl) == 0 && d->device[bl] == ':' && d->device[bl + 1],
                  "device %u: backend '%s', string '%s'", i, d->backend, d->device);
        cr_expect(d->name[0] && d->version[0] && d->platform[0], "%s: empty name, version or platform", d->device);
        cr_expect(d->type >= ROPEQK_DEVICE_OTHER && d->type <= ROPEQK_DEVICE_ACCELERATOR, "%s: type %d", d->device,
                  (int)d->type);
        cr_expect(d->usable == 0 || d->usable == 1, "%s: usable %d", d->device, d->usable);
        cr_expect(d->usable || d->unusable[0], "%s: unusable without a reason", d->device);
        cr_expect(d->global_mem > 0 && d->max_alloc > 0 && d->max_alloc <= d->global_mem,
                  "%s: memory %llu, max allocation %llu", d->device, (unsigned long long)d->global_mem,
                  (unsigned long long)d->max_alloc);
        for (uint32_t j = 0; j < i; j++)
            cr_expect(strcmp(l[j].device, d->device) != 0, "'%s' listed twice", d->device);
        /* a backend's devices are listed together */
        for (uint32_t j = 0; j + 1 < i; j++)
            cr_expect(strcmp(l[j].backend, d->backend) != 0 || strcmp(l[j + 1].backend, d->backend) == 0,
                      "%s's devices are not together (%s)", d->backend, d->device);
    }
}

/* Every usable device's string opens a context on it and on its backend; an unusable one opens none. */
Test(list_devices, every_string_opens_its_device)
{
    unsetenv("ROPEQK_DEVICE");
    ropeqk_device_info l[MAXDEV];
    uint32_t n = list_all(l);
    for (uint32_t i = 0; i < n; i++) {
        ropeqk_ctx_params p;
        memset(&p, 0, sizeof p);
        p.device = l[i].device;
        ropeqk_ctx *ctx = NULL;
        ropeqk_status st = ropeqk_ctx_create(&p, &ctx);
        if (!l[i].usable) {
            cr_expect_eq(st, ROPEQK_ERR_NO_DEVICE, "unusable %s opened (%s)", l[i].device, l[i].unusable);
            ropeqk_ctx_destroy(ctx);
            continue;
        }
        cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s", l[i].device, ropeqk_status_string(st), ropeqk_last_error());
        const char *be = NULL;
        ropeqk_ctx_backend_error(ctx, &be);
        cr_expect_str_eq(be, l[i].backend, "%s", l[i].device);
        ropeqk_device_info d;
        memset(&d, 0x5a, sizeof d);
        cr_assert_eq(ropeqk_ctx_device_info(ctx, &d), ROPEQK_SUCCESS);
        cr_expect_str_eq(d.device, l[i].device);
        cr_expect_str_eq(d.name, l[i].name, "%s", l[i].device);
        cr_expect_str_eq(d.driver, l[i].driver, "%s", l[i].device);
        cr_expect_eq(d.type, l[i].type, "%s", l[i].device);
        cr_expect_eq(d.compute_units, l[i].compute_units, "%s", l[i].device);
        cr_expect_eq(d.global_mem, l[i].global_mem, "%s", l[i].device);
        cr_expect_eq(d.is_default, 0, "%s", l[i].device);
        /* the description names the same device */
        cr_expect(strstr(ropeqk_ctx_device_description(ctx), l[i].name) != NULL, "%s: '%s' vs '%s'", l[i].device,
                  ropeqk_ctx_device_description(ctx), l[i].name);
        size_t len = 99;
        const char *src = ropeqk_ctx_program_source(ctx, &len);
        if (strcmp(l[i].backend, "OpenCL") == 0)
            cr_expect(src && len > 1000 && strlen(src) == len, "%s: program text of %zu bytes", l[i].device, len);
        else
            cr_expect(!src && len == 0, "%s: %s has a program text", l[i].device, l[i].backend);
        ropeqk_ctx_destroy(ctx);
    }
}

Test(list_devices, cap_zero_and_cap_below_count)
{
    unsetenv("ROPEQK_DEVICE");
    ropeqk_device_info l[MAXDEV];
    uint32_t n = list_all(l);
    for (uint32_t cap = 0; cap < n; cap++) {
        ropeqk_device_info part[MAXDEV];
        memset(part, 0x5a, sizeof part);
        uint32_t m = 0;
        cr_assert_eq(ropeqk_list_devices(cap ? part : NULL, cap, &m), ROPEQK_SUCCESS);
        cr_expect_eq(m, n, "cap %u: count %u, not the total %u", cap, m, n);
        for (uint32_t i = 0; i < cap; i++)
            cr_expect(strcmp(part[i].device, l[i].device) == 0 && strcmp(part[i].name, l[i].name) == 0 &&
                          part[i].is_default == l[i].is_default,
                      "cap %u: entry %u is %s, not %s", cap, i, part[i].device, l[i].device);
        /* nothing past cap is written */
        const unsigned char *rest = (const unsigned char *)&part[cap];
        for (size_t b = 0; b < sizeof part[0] * (MAXDEV - cap); b++)
            if (rest[b] != 0x5a)
                cr_assert_fail("cap %u: byte %zu past the cap written", cap, b);
    }
}

Test(list_devices, null_arguments)
{
    ropeqk_device_info one;
    uint32_t n = 777;
    cr_expect_eq(ropeqk_list_devices(&one, 1, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_list_devices(NULL, 1, &n), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(n, 777, "the count changed on a refused call");
    cr_expect_eq(ropeqk_ctx_device_info(NULL, &one), ROPEQK_ERR_NULL_POINTER);
    size_t len = 5;
    cr_expect_null(ropeqk_ctx_program_source(NULL, &len));
    cr_expect_eq(len, 0);
    cr_expect_null(ropeqk_ctx_program_source(NULL, NULL));
    ropeqk_ctx *ctx = NULL;
    if (ropeqk_ctx_create(NULL, &ctx) == ROPEQK_SUCCESS) {
        cr_expect_eq(ropeqk_ctx_device_info(ctx, NULL), ROPEQK_ERR_NULL_POINTER);
        ropeqk_ctx_program_source(ctx, NULL); /* len may be NULL */
        ropeqk_ctx_destroy(ctx);
    }
}

/* Without $ROPEQK_DEVICE, with each device's string, a backend's name alone, a name substring and a
 * spec that matches nothing: the listing's default is the device ropeqk_ctx_create(NULL) opens. */
Test(list_devices, default_is_what_ctx_create_opens)
{
    unsetenv("ROPEQK_DEVICE");
    ropeqk_device_info l[MAXDEV];
    uint32_t n = list_all(l);
    char specs[MAXDEV * 3 + 4][80];
    size_t ns = 0;
    snprintf(specs[ns++], sizeof specs[0], "%s", "");
    snprintf(specs[ns++], sizeof specs[0], "%s", "no-such-device-xyz");
    snprintf(specs[ns++], sizeof specs[0], "%s", "vulkan:99");
    for (uint32_t i = 0; i < n; i++) {
        snprintf(specs[ns++], sizeof specs[0], "%s", l[i].device);
        snprintf(specs[ns++], sizeof specs[0], "%.*s", (int)(strchr(l[i].device, ':') - l[i].device), l[i].device);
        snprintf(specs[ns++], sizeof specs[0], "%.12s", l[i].name);
    }
    for (size_t s = 0; s < ns; s++) {
        if (specs[s][0])
            setenv("ROPEQK_DEVICE", specs[s], 1);
        else
            unsetenv("ROPEQK_DEVICE");
        ropeqk_device_info m[MAXDEV];
        uint32_t k = 0;
        cr_assert_eq(ropeqk_list_devices(m, MAXDEV, &k), ROPEQK_SUCCESS, "ROPEQK_DEVICE='%s'", specs[s]);
        cr_assert_eq(k, n, "ROPEQK_DEVICE='%s': the count changed", specs[s]);
        int want = default_of_ctx(m, k), got = default_of_list(m, k);
        cr_expect_eq(got, want, "ROPEQK_DEVICE='%s': listing's default %s, ropeqk_ctx_create opens %s", specs[s],
                     got >= 0 ? m[got].device : "none", want >= 0 ? m[want].device : "none");
    }
    unsetenv("ROPEQK_DEVICE");
    for (uint32_t i = 0; i < n; i++) /* a device's own string makes it the default (when usable) */
        if (l[i].usable) {
            setenv("ROPEQK_DEVICE", l[i].device, 1);
            ropeqk_device_info m[MAXDEV];
            uint32_t k = 0;
            cr_assert_eq(ropeqk_list_devices(m, MAXDEV, &k), ROPEQK_SUCCESS);
            cr_expect_eq(default_of_list(m, k), (int)i, "ROPEQK_DEVICE=%s", l[i].device);
        }
}

/* No driver anywhere: ROPEQK_ERR_NO_DEVICE, count 0, a message naming each backend's reason. */
Test(list_devices, no_driver_says_why)
{
    setenv("OCL_ICD_VENDORS", "/nonexistent-ropeqk-test", 1);
    setenv("OCL_ICD_FILENAMES", "", 1);
    setenv("VK_ICD_FILENAMES", "/nonexistent-ropeqk-test.json", 1);
    setenv("VK_DRIVER_FILES", "/nonexistent-ropeqk-test.json", 1);
    uint32_t n = 5;
    ropeqk_device_info one;
    ropeqk_status st = ropeqk_list_devices(&one, 1, &n);
    cr_assert_eq(st, ROPEQK_ERR_NO_DEVICE, "%s: %s", ropeqk_status_string(st), ropeqk_last_error());
    cr_expect_eq(n, 0);
    const char *why = ropeqk_last_error();
    /* each backend built says why: "no device found (OpenCL: no OpenCL platform found (...); Vulkan: no
     * Vulkan driver found (...))" */
    cr_expect(strstr(why, "no device found ("), "%s", why);
    cr_expect(strstr(why, "OpenCL: no OpenCL platform") || strstr(why, "Vulkan: no Vulkan driver"), "%s", why);
}
