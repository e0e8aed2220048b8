#include "rng.h"

#include <math.h>

uint64_t rqs_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rqs_unit(uint64_t *s) { return (double)(rqs_rand(s) >> 11) * 0x1.0p-53; }

double rqs_uniform(uint64_t *s) { return (double)(rqs_rand(s) >> 11) * 0x1.0p-52 - 1.0; }

uint64_t rqs_below(uint64_t *s, uint64_t n) { return n <= 1 ? 0 : rqs_rand(s) % n; }

int64_t rqs_range(uint64_t *s, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    /* unsigned arithmetic: the span of the whole int64 range wraps to 0, which means "any value" */
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1u, r = rqs_rand(s);
    return (int64_t)((uint64_t)lo + (span ? r % span : r));
}

double rqs_normal(uint64_t *s)
{
    double u1 = rqs_unit(s), u2 = rqs_unit(s);
    if (u1 < 1e-300) /* log(0) */
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void rqs_fill_f32(float *p, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rqs_uniform(s);
}
