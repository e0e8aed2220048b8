/* Small helpers shared by the subcommands: messages, random numbers, timing, conversions. */
#include "cli.h"

#include <errno.h>
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

void cli_lib_err(const char *what, int status, const ropeqk_ctx *ctx)
{
    cli_err("%s: %s (status %d)", what, ropeqk_status_string(status), status);
    /* what the status alone cannot say: the variable, the device and driver, the backend's code */
    if ((status == ROPEQK_ERR_BUILD || status == ROPEQK_ERR_BAD_CONFIG || status == ROPEQK_ERR_BACKEND) &&
        *ropeqk_last_error())
        fprintf(stderr, "ropeqk: %s\n", ropeqk_last_error());
    if (status == ROPEQK_ERR_BUILD && ctx) {
        size_t n = ropeqk_ctx_build_log(ctx, NULL, 0);
        char *log = malloc(n + 1);
        if (log)
            ropeqk_ctx_build_log(ctx, log, n + 1);
        fprintf(stderr, "--- OpenCL build log ---\n%s\n--- end of build log ---\n", log && *log ? log : "(empty)");
        free(log);
    }
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* splitmix64: small, fast, good enough for test inputs, identical everywhere. */
void cli_rng_seed(cli_rng *r, uint64_t seed) { r->s = seed; }

uint64_t cli_rng_next(cli_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double cli_rng_uniform(cli_rng *r) { return (double)(cli_rng_next(r) >> 11) * 0x1.0p-53; }

double cli_rng_normal(cli_rng *r)
{
    double u1 = cli_rng_uniform(r), u2 = cli_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int64_t cli_rng_range(cli_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    return lo + (int64_t)(span ? cli_rng_next(r) % span : cli_rng_next(r));
}

uint16_t cli_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0u));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 0x1f)
        return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (he <= 0) {                         /* subnormal or zero */
        if (he < -10)
            return sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - he);
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1u)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fffu;
    uint32_t h = ((uint32_t)he << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u)))
        h++; /* may carry into the exponent: still correct (up to inf) */
    return (uint16_t)(sign | h);
}

uint16_t cli_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) /* NaN: keep it quiet and a NaN */
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; overflow rounds to inf */
    return (uint16_t)(x >> 16);
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
    cli_rng r;
    cli_rng_seed(&r, (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32));
    return cli_rng_next(&r) % 1000000000ull; /* short enough to retype */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int cli_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    if (!tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(saved));
        remove(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}
