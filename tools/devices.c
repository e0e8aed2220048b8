/* The `devices` subcommand: every backend's devices through the library's neutral listing
 * (ropeqk_list_devices), each with its configuration lines (diag.c), then the default device. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void fmt_bytes(uint64_t b, char *buf, size_t len)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
}

static const char *type_name(ropeqk_device_type t)
{
    switch (t) {
    case ROPEQK_DEVICE_GPU: return "GPU";
    case ROPEQK_DEVICE_CPU: return "CPU";
    case ROPEQK_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

/* Prints the indented lines of s ('\n'-separated). */
static void print_lines(const char *s)
{
    while (*s) {
        const char *nl = strchr(s, '\n');
        int len = nl ? (int)(nl - s) : (int)strlen(s);
        printf("         %.*s\n", len, s);
        s += len + (nl ? 1 : 0);
    }
}

static void print_device(const ropeqk_device_info *d)
{
    printf("  %c %s  %s\n", d->is_default ? '*' : ' ', d->device, d->name);
    printf("         type %s, vendor %s\n", type_name(d->type), d->vendor);
    printf("         %s, driver %s\n", d->version, d->driver);
    char mem[32], alloc[32];
    fmt_bytes(d->global_mem, mem, sizeof mem);
    fmt_bytes(d->max_alloc, alloc, sizeof alloc);
    if (d->compute_units) /* Vulkan does not report them */
        printf("         %u compute units, %s global memory (max allocation %s)\n", d->compute_units, mem, alloc);
    else
        printf("         %s global memory (max allocation %s)\n", mem, alloc);
    print_lines(d->details);
    if (!d->usable)
        printf("         usable: no (%s)\n", d->unusable);
}

int cmd_devices(int argc, char **argv)
{
    const char *dump_dir = NULL;
    int build = 0;
    const cli_opt opts[] = {
        {"--dump-program", OPT_STR, &dump_dir, "DIR",
         "write each device's exact program text and build options to DIR/<device>.cl and .options "
         "(<device> its string with '-' for ':', e.g. opencl-0-0; devices whose kernels are embedded "
         "binaries, Vulkan's SPIR-V, have none)", 0, 0, 0, NULL, NULL},
        {"--build", OPT_FLAG, &build, NULL, "test-build the kernels on every device: OK or FAILED with the log",
         0, 0, 0, NULL, NULL},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    bool help = false;
    int r = cli_parse("devices", opts, nopts, argc, argv, &help);
    if (r != CLI_OK)
        return r;
    if (help) {
        cli_print_help(stdout, "ropeqk devices",
                       "Lists every backend's devices (ropeqk_list_devices), grouped by platform, each with\n"
                       "the string that selects it for --device and $ROPEQK_DEVICE (opencl:P:D, vulkan:N),\n"
                       "and marks with '*' the default device: $ROPEQK_DEVICE if set, else the first device\n"
                       "of the first backend (OpenCL before Vulkan). A name substring selects the first\n"
                       "device with that name, OpenCL's first. For each usable device it prints the kernel\n"
                       "profile in effect and where it came from ($ROPEQK_PROFILE=cpu|gpu|auto, else the\n"
                       "device type), the configuration's source, and the build options on a line starting\n"
                       "with `options:`. Exit status 1 when no device is found, when there is no default\n"
                       "device, or when a device's configuration, --build or --dump-program step failed.",
                       opts, nopts);
        return CLI_OK;
    }
    uint32_t n = 0;
    ropeqk_status st = ropeqk_list_devices(NULL, 0, &n);
    if (st != ROPEQK_SUCCESS) {
        cli_err("devices: %s (is an OpenCL ICD such as pocl-opencl-icd, or mesa-vulkan-drivers, installed?); "
                "`--device ref` runs the scalar C path", ropeqk_last_error());
        return CLI_RUNTIME;
    }
    ropeqk_device_info *info = calloc(n, sizeof *info);
    if (!info) {
        cli_err("devices: out of memory");
        return CLI_RUNTIME;
    }
    uint32_t got = 0;
    st = ropeqk_list_devices(info, n, &got);
    if (st != ROPEQK_SUCCESS) {
        cli_lib_err("devices", st, NULL);
        free(info);
        return CLI_RUNTIME;
    }
    if (got < n) /* a device went away between the calls */
        n = got;
    unsigned failed = 0;
    const ropeqk_device_info *def = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const ropeqk_device_info *d = &info[i];
        if (i == 0 || strcmp(d->backend, d[-1].backend) != 0 || strcmp(d->platform, d[-1].platform) != 0)
            printf("%s: %s\n", d->backend, d->platform);
        print_device(d);
        if (d->usable && cli_device_diag(d, dump_dir, build != 0) != 0)
            failed++;
        if (d->is_default)
            def = d;
    }
    const char *env = getenv("ROPEQK_DEVICE");
    if (env && !*env)
        env = NULL;
    if (def && env)
        printf("default: %s (ROPEQK_DEVICE=%s)\n", def->device, env);
    else if (def)
        printf("default: %s (the first device of the first backend)\n", def->device);
    else if (env)
        printf("default: none: ROPEQK_DEVICE=%s matches no usable device\n", env);
    else
        printf("default: none (no usable device)\n");
    free(info);
    if (failed) {
        cli_err("devices: %u device(s) failed (configuration%s)", failed,
                build ? ", test build" : dump_dir ? ", program dump" : "");
        return CLI_RUNTIME;
    }
    return def ? CLI_OK : CLI_RUNTIME;
}
