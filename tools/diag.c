/* Per-device diagnostics of `ropeqk devices`: the kernel configuration the library picks for a
 * device and why, the exact program text and build options (--dump-program), and a test build
 * (--build), on every backend through ropeqk.h. What a user runs first on a new machine, and
 * attaches to a driver bug report. */
#include "atomic_file.h"
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* Writes DIR/<base>.cl and DIR/<base>.options, base the device's string with '-' for ':'
 * ("opencl-0-0"). 0 on success (else a message was printed). */
static int dump_program(const char *dir, const ropeqk_device_info *d, const char *src, size_t len,
                        const char *options)
{
    char base[sizeof d->device], path[4096], err[512];
    snprintf(base, sizeof base, "%s", d->device);
    for (char *c = base; *c; c++)
        if (*c == ':')
            *c = '-';
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        cli_err("devices: --dump-program: cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s.cl", dir, base);
    if (rqs_write_atomic(path, &(rqs_span){src, len}, 1, err, sizeof err) != 0) {
        cli_err("devices: --dump-program: %s", err);
        return -1;
    }
    printf("         program: %s (%zu bytes)\n", path, len);
    snprintf(path, sizeof path, "%s/%s.options", dir, base);
    char line[1024];
    int n = snprintf(line, sizeof line, "%s\n", options);
    if (rqs_write_atomic(path, &(rqs_span){line, (size_t)n}, 1, err, sizeof err) != 0) {
        cli_err("devices: --dump-program: %s", err);
        return -1;
    }
    return 0;
}

/* Prints the first `max` lines of s, indented. */
static void print_head(const char *s, int max)
{
    for (int n = 0; *s && n < max; n++) {
        const char *nl = strchr(s, '\n');
        int len = nl ? (int)(nl - s) : (int)strlen(s);
        printf("           | %.*s\n", len, s);
        s += len + (nl ? 1 : 0);
    }
}

int cli_device_diag(const ropeqk_device_info *d, const char *dump_dir, bool build)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = d->device;
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (st) {
        printf("         profile: unavailable: %s: %s\n", ropeqk_status_string(st), ropeqk_last_error());
        return -1;
    }
    ropeqk_tuning t;
    const char *why = "";
    ropeqk_ctx_tuning(ctx, &t, &why);
    printf("         profile: %s (%s)\n", ropeqk_profile_name(t.profile), why);
    printf("         config: %s\n", ropeqk_ctx_config_source(ctx));
    printf("         options: %s\n", ropeqk_ctx_build_options(ctx));
    int rc = 0;
    size_t len = 0;
    const char *src = ropeqk_ctx_program_source(ctx, &len);
    if (dump_dir && !src)
        printf("         program: none (the %s backend's kernels are embedded binaries)\n", d->backend);
    else if (dump_dir && dump_program(dump_dir, d, src, len, ropeqk_ctx_build_options(ctx)) != 0)
        rc = -1;
    if (build) {
        st = ropeqk_ctx_warmup(ctx);
        if (st == ROPEQK_SUCCESS) {
            printf("         build: OK\n");
        } else {
            printf("         build: FAILED: %s (status %d)\n", ropeqk_status_string(st), st);
            if (st == ROPEQK_ERR_BUILD) {
                char log[2048];
                ropeqk_ctx_build_log(ctx, log, sizeof log);
                print_head(log, 8);
            } else {
                print_head(ropeqk_last_error(), 8);
            }
            rc = -1;
        }
    }
    ropeqk_ctx_destroy(ctx);
    return rc;
}
