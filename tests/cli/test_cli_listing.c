/* `ropeqk devices` on every backend the build has, against the library's neutral listing
 * (ropeqk_list_devices): each device under its string with its backend's header, '*' and the
 * default line on the device the listing marks (for $ROPEQK_DEVICE unset, each device's string, each
 * backend's name, a name that matches nothing), --dump-program's files per backend, and the device
 * string in what `check` prints. Builds with OpenCL, Vulkan or both. */
#include <criterion/criterion.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "ropeqk.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MAXDEV 64

#include "cli_fixture.h"

TestSuite(listing, .init = setup, .fini = teardown, .timeout = 300);

/* The listing with $ROPEQK_DEVICE unset, here and in the commands run (skips without a device). */
static uint32_t listing(ropeqk_device_info *l)
{
    unsetenv("ROPEQK_DEVICE");
    uint32_t n = 0;
    if (ropeqk_list_devices(l, MAXDEV, &n) != ROPEQK_SUCCESS)
        cr_skip_test("no device: %s", ropeqk_last_error());
    cr_assert(n <= MAXDEV);
    return n;
}

static cli_result run_env(const char *const *env, const char *const *args)
{
    cli_result r;
    cr_assert(cli_run(&r, NULL, env, 300, args), "cannot run " ROPEQK_EXE);
    return r;
}

/* "  * <device>  <name>" (default) or "    <device>  <name>" at the start of a line of out. */
static bool has_device_line(const char *out, const ropeqk_device_info *d, bool star)
{
    char want[400];
    snprintf(want, sizeof want, "\n  %c %s  %s\n", star ? '*' : ' ', d->device, d->name);
    return strstr(out, want) != NULL || strncmp(out, want + 1, strlen(want + 1)) == 0;
}

Test(listing, every_device_under_its_string)
{
    ropeqk_device_info l[MAXDEV];
    uint32_t n = listing(l);
    cli_result r = run_env(ENV("ROPEQK_DEVICE="), ARGS("devices"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    const ropeqk_device_info *def = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const ropeqk_device_info *d = &l[i];
        cr_expect(has_device_line(r.out, d, d->is_default != 0), "no line for %s (%s):\n%s", d->device, d->name, r.out);
        char want[512];
        snprintf(want, sizeof want, "%.15s: %.255s\n", d->backend, d->platform);
        cr_expect(strstr(r.out, want), "no header '%s':\n%s", want, r.out);
        if (d->compute_units) {
            snprintf(want, sizeof want, "         %u compute units, ", d->compute_units);
            cr_expect(strstr(r.out, want), "%s: no '%s':\n%s", d->device, want, r.out);
        }
        /* the backend's own lines, each indented */
        char det[sizeof d->details];
        snprintf(det, sizeof det, "%s", d->details);
        for (char *line = strtok(det, "\n"); line; line = strtok(NULL, "\n")) {
            snprintf(want, sizeof want, "\n         %s\n", line);
            cr_expect(strstr(r.out, want), "%s: no line '%s':\n%s", d->device, line, r.out);
        }
        if (d->is_default)
            def = d;
    }
    cr_assert(def, "the listing has no default device");
    char want[128];
    snprintf(want, sizeof want, "\ndefault: %s (the first device of the first backend)\n", def->device);
    cr_expect(strstr(r.out, want), "no '%s':\n%s", want + 1, r.out);
    cli_result_free(&r);
}

/* $ROPEQK_DEVICE moves the default (and '*') to the device it selects, on any backend; a spec that
 * selects nothing leaves none (exit status 1). Before the neutral listing, ROPEQK_DEVICE=vulkan on
 * a build with both backends printed "default: none" and exited 1. */
Test(listing, default_follows_env)
{
    ropeqk_device_info l[MAXDEV];
    uint32_t n = listing(l);
    for (uint32_t i = 0; i < n; i++) {
        if (!l[i].usable)
            continue;
        char env[128], want[256];
        snprintf(env, sizeof env, "ROPEQK_DEVICE=%s", l[i].device);
        cli_result r = run_env(ENV(env), ARGS("devices"));
        cr_expect_eq(r.status, 0, "%s: %s", env, r.err);
        cr_expect(has_device_line(r.out, &l[i], true), "%s: no '*' on it:\n%s", env, r.out);
        snprintf(want, sizeof want, "\ndefault: %s (%s)\n", l[i].device, env);
        cr_expect(strstr(r.out, want), "%s: no '%s':\n%s", env, want + 1, r.out);
        cli_result_free(&r);
        /* the backend's name alone: its first usable device */
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%.15s", l[i].backend);
        for (char *c = prefix; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        uint32_t first = 0;
        while (first < n && (strcmp(l[first].backend, l[i].backend) != 0 || !l[first].usable))
            first++;
        snprintf(env, sizeof env, "ROPEQK_DEVICE=%s", prefix);
        r = run_env(ENV(env), ARGS("devices"));
        cr_expect_eq(r.status, 0, "%s: %s", env, r.err);
        snprintf(want, sizeof want, "\ndefault: %s (%s)\n", l[first].device, env);
        cr_expect(strstr(r.out, want), "%s: no '%s':\n%s", env, want + 1, r.out);
        cli_result_free(&r);
    }
    cli_result r = run_env(ENV("ROPEQK_DEVICE=no-such-device-xyz"), ARGS("devices"));
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "\ndefault: none: ROPEQK_DEVICE=no-such-device-xyz matches no usable device\n"), "%s",
              r.out);
    cr_expect(strstr(r.out, "\n  * ") == NULL, "a device is marked default:\n%s", r.out);
    cli_result_free(&r);
}

/* --dump-program: DIR/<string with '-'>.cl and .options for each device with a program text (OpenCL),
 * "program: none" for the others (Vulkan's SPIR-V); nothing else in DIR. */
Test(listing, dump_program_per_backend)
{
    ropeqk_device_info l[MAXDEV];
    uint32_t n = listing(l);
    cli_result r = run_env(ENV("ROPEQK_DEVICE="), ARGS("devices", "--dump-program", tmp));
    cr_expect_eq(r.status, 0, "%s", r.err);
    int files = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!l[i].usable)
            continue;
        ropeqk_ctx_params cp = {.device = l[i].device};
        ropeqk_ctx *ctx = NULL;
        cr_assert_eq(ropeqk_ctx_create(&cp, &ctx), ROPEQK_SUCCESS, "%s: %s", l[i].device, ropeqk_last_error());
        size_t len = 0;
        const char *src = ropeqk_ctx_program_source(ctx, &len);
        char base[80];
        snprintf(base, sizeof base, "%s", l[i].device);
        for (char *c = base; *c; c++)
            *c = *c == ':' ? '-' : *c;
        char name[96];
        snprintf(name, sizeof name, "%s.cl", base);
        if (src) {
            files += 2;
            FILE *f = fopen(tpath(name), "rb");
            cr_assert(f, "%s: no %s", l[i].device, name);
            char *buf = malloc(len + 1);
            size_t got = fread(buf, 1, len + 1, f);
            fclose(f);
            cr_expect(got == len && memcmp(buf, src, len) == 0, "%s is not %s's program text", name, l[i].device);
            free(buf);
            snprintf(name, sizeof name, "%s.options", base);
            cr_expect(file_exists(tpath(name)), "%s: no %s", l[i].device, name);
        } else {
            char want[128];
            snprintf(want, sizeof want, "program: none (the %.15s backend's kernels are embedded binaries)", l[i].backend);
            cr_expect(strstr(r.out, want), "%s: no '%s':\n%s", l[i].device, want, r.out);
            cr_expect(!file_exists(tpath(name)), "%s: %s written", l[i].device, name);
        }
        ropeqk_ctx_destroy(ctx);
    }
    cr_expect_eq(dir_entries(tmp), files, "%d files in %s, expected %d", dir_entries(tmp), tmp, files);
    cli_result_free(&r);
}

/* The device a command runs on is named by its string: "on opencl:0:0 <description>". */
Test(listing, check_names_the_device_string)
{
    ropeqk_device_info l[MAXDEV];
    uint32_t n = listing(l);
    for (uint32_t i = 0; i < n; i++) {
        if (!l[i].usable)
            continue;
        cli_result r = run_env(ENV("ROPEQK_DEVICE="), ARGS("check", "--cases", "1", "--seed", "1", "--device", l[i].device));
        cr_expect_eq(r.status, 0, "%s: %s", l[i].device, r.err);
        char want[400];
        snprintf(want, sizeof want, " cases on %s %s", l[i].device, l[i].name);
        cr_expect(strstr(r.out, want), "%s: no '%s':\n%s", l[i].device, want, r.out);
        cli_result_free(&r);
    }
}
