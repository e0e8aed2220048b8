/* Small helpers shared by the subcommands: messages, number formatting, the default seed, loading
 * an input file with a message that names the flag. */
#include "cli.h"
#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ropeqk: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ropeqk_last_error() when cli_error_mark() ran: like errno, a successful call leaves the message as
 * it was, so only a message that changed since belongs to the failure being reported */
static _Thread_local char error_mark[1024];

void cli_error_mark(void) { snprintf(error_mark, sizeof error_mark, "%s", ropeqk_last_error()); }

void cli_lib_err(const char *what, int status, const ropeqk_ctx *ctx)
{
    cli_err("%s: %s (status %d)", what, ropeqk_status_string(status), status);
    /* what the status alone cannot say: the variable, the device and driver, the backend's code, the
     * parameter the library refused */
    const char *msg = ropeqk_last_error();
    if (*msg && (status == ROPEQK_ERR_BUILD || status == ROPEQK_ERR_BAD_CONFIG || status == ROPEQK_ERR_BACKEND ||
                 strcmp(msg, error_mark) != 0))
        fprintf(stderr, "ropeqk: %s\n", msg);
    if (status == ROPEQK_ERR_BUILD && ctx) {
        size_t n = ropeqk_ctx_build_log(ctx, NULL, 0);
        char *log = malloc(n + 1);
        if (log)
            ropeqk_ctx_build_log(ctx, log, n + 1);
        fprintf(stderr, "--- OpenCL build log ---\n%s\n--- end of build log ---\n", log && *log ? log : "(empty)");
        free(log);
    }
}

void cli_fmt_double(char *buf, size_t len, double v)
{
    if (v == floor(v) && fabs(v) <= 9007199254740992.0) {
        snprintf(buf, len, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

uint64_t cli_default_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* mixed through the generator so that runs a nanosecond apart get unrelated seeds */
    uint64_t r = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    return rqs_rand(&r) % 1000000000ull; /* short enough to retype */
}

int cli_load_npy(const char *cmd, const char *flag, const char *path, npy_array *a)
{
    char err[512];
    if (npy_load(path, a, err, sizeof err) == 0)
        return CLI_OK;
    cli_err("%s: %s: %s", cmd, flag, err);
    return CLI_RUNTIME;
}
