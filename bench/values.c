/* Inputs and output comparison of the bench (values.h). */
#include "values.h"

#include "half.h"
#include "rng.h"

#include <math.h>

void bench_fill(uint64_t *state, float *f32, uint16_t *f16, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        f32[i] = (float)(0.5 * rqs_uniform(state));
        if (f16)
            f16[i] = rqs_float_to_half(f32[i]);
    }
}

void bench_shuffle_pages(uint64_t *state, int32_t *table, int64_t np)
{
    for (int64_t i = 0; i < np; i++)
        table[i] = (int32_t)i;
    for (int64_t i = np - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)rqs_below(state, (uint64_t)i + 1);
        int32_t t = table[i];
        table[i] = table[j];
        table[j] = t;
    }
}

double bench_max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t j = 0; j < n; j++) {
        if (a[j] == b[j])
            continue;
        double d = fabs((double)a[j] - (double)b[j]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}
