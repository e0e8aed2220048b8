#include "clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double rqs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void rqs_sort(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

double rqs_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    double copy[64], *s = v;
    if (n <= 64) {
        memcpy(copy, v, n * sizeof *v);
        s = copy;
    }
    rqs_sort(s, n);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}
