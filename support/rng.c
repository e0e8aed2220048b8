#include "rng.h"

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

void rqs_fill_f32(float *p, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rqs_uniform(s);
}
