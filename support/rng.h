/* The one random generator of tools, tests, bench and fuzzers: splitmix64, small, seedable, the same
 * sequence on every platform (a failing test's printed seed reproduces it anywhere). */
#ifndef RQS_RNG_H
#define RQS_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The next 64 random bits; *state advances. Any seed, 0 included, is fine. */
uint64_t rqs_rand(uint64_t *state);
/* Uniform in [-1, 1) (53 random bits). */
double rqs_uniform(uint64_t *state);
/* Uniform in [0, 1). */
double rqs_unit(uint64_t *state);
/* Uniform integer in [0, n) (n >= 1). */
uint64_t rqs_below(uint64_t *state, uint64_t n);
/* Uniform integer in [lo, hi], any range (hi <= lo: lo, and no number is drawn). */
int64_t rqs_range(uint64_t *state, int64_t lo, int64_t hi);
/* Standard normal N(0, 1): Box-Muller over two rqs_unit draws (test inputs shaped like activations). */
double rqs_normal(uint64_t *state);
/* n floats uniform in [-1, 1). */
void rqs_fill_f32(float *p, size_t n, uint64_t *state);

#endif
