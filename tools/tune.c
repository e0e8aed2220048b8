/* The `tune` subcommand: searches kernel configurations for a device (ropeqk_tune) and stores the
 * winners in the per-user cache that contexts load at creation. */
#include "cli.h"
#include "clock.h"

#include <string.h>

static void progress(void *user, const char *line)
{
    (void)user;
    printf("  %s\n", line);
    fflush(stdout);
}

int cmd_tune(int argc, char **argv)
{
    const char *device = NULL;
    double budget = 120.0;
    int dry = 0;
    const cli_opt opts[] = {
        {"--device", OPT_STR, &device, "SPEC", CLI_DEVICE_HELP, 0, 0, 0, NULL, NULL},
        {"--budget", OPT_F64, &budget, "SECONDS", "wall-clock budget of the search (default 120)", OPT_POSITIVE, 0, 0,
         NULL, NULL},
        {"--dry-run", OPT_FLAG, &dry, NULL, "search and print, but do not write the cache", 0, 0, 0, NULL, NULL},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    bool help = false;
    int r = cli_parse("tune", opts, nopts, argc, argv, &help);
    if (r != CLI_OK)
        return r;
    if (help) {
        cli_print_help(stdout, "ropeqk tune [--device SPEC] [--budget SECONDS] [--dry-run]",
                       "Searches kernel configurations for the device and its profile ($ROPEQK_PROFILE):\n"
                       "on OpenCL prefill scores, the decode kernel, attention and two crossovers:\n"
                       "the query rows from which a sequence of a ragged paged call takes the chunk\n"
                       "path (chunk_rows) and up to which dense attention runs the paged decode\n"
                       "kernels (dense_rows, 0 = off); on Vulkan the tile\n"
                       "shape of the prefill scores shader (vk_block x vk_tk) and the attention shader's\n"
                       "rows per work-group (vk_rows). Checks every candidate against the\n"
                       "fp64 path before timing it, and writes the winners to $XDG_CACHE_HOME/ropeqk/\n"
                       "(else ~/.cache/ropeqk/), keyed by device, driver and library version. Contexts\n"
                       "created afterwards use them; `ropeqk devices` shows the source in effect.",
                       opts, nopts);
        return CLI_OK;
    }
    cli_device dev;
    if ((r = cli_device_open("tune", device, false, &dev)) != CLI_OK)
        return r;
    ropeqk_tuning t;
    const char *why = "";
    ropeqk_ctx_tuning(dev.ctx, &t, &why);
    printf("tune: %s, profile %s (%s), budget %g s\n", dev.name, ropeqk_profile_name(t.profile), why, budget);
    printf("  in effect: %s\n  options: %s\n", ropeqk_ctx_config_source(dev.ctx), ropeqk_ctx_build_options(dev.ctx));
    ropeqk_tune_params p = {.budget_seconds = budget, .no_write = dry, .progress = progress};
    ropeqk_tuning best;
    char path[4096] = "";
    double t0 = rqs_now();
    ropeqk_status st = ropeqk_tune(dev.ctx, &p, &best, path, sizeof path);
    if (st) {
        cli_lib_err("tune", st, dev.ctx);
        cli_device_close(&dev);
        return CLI_RUNTIME;
    }
    /* the winners of every knob the backend has a ropeqk_tuning field for, from its table */
    const char *backend = "";
    ropeqk_ctx_backend_error(dev.ctx, &backend);
    printf("best:");
    for (int32_t i = 0, n = ropeqk_knob_count(backend); i < n; i++) {
        ropeqk_knob k;
        int32_t v = 0;
        if (ropeqk_knob_get_info(backend, i, &k) == ROPEQK_SUCCESS && k.in_struct &&
            ropeqk_tuning_get(&best, k.name, &v) == ROPEQK_SUCCESS)
            printf(" %s=%d", k.name, (int)v);
    }
    printf(" (%.1f s)\n", rqs_now() - t0);
    if (dry)
        printf("dry run: cache not written\n");
    else
        printf("written: %s\n", path);
    cli_device_close(&dev);
    return CLI_OK;
}
