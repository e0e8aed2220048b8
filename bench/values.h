/* The values ropeqk-bench feeds the implementations and how it compares what they return. Inputs
 * come from the support library's generator with a fixed seed, restarted per shape, so that every
 * implementation, mode and run sees the same numbers. */
#ifndef ROPEQK_BENCH_VALUES_H
#define ROPEQK_BENCH_VALUES_H

#include <stddef.h>
#include <stdint.h>

/* The generator state every shape starts from. */
#define BENCH_SEED 12345u

/* n values uniform in [-0.5, 0.5) into f32, and the same values rounded to f16 into f16 (when
 * non-NULL); *state advances, so Q, K and V drawn in turn differ. */
void bench_fill(uint64_t *state, float *f32, uint16_t *f16, size_t n);
/* A paged cache's page table: pages 0 .. np-1 in shuffled order (no two sequences' pages are
 * neighbours in memory, as after a server has run a while). */
void bench_shuffle_pages(uint64_t *state, int32_t *table, int64_t np);
/* max |a - b| over n values; equal values (infinities: masked scores) count 0, a NaN infinity. */
double bench_max_abs_diff(const float *a, const float *b, size_t n);

#endif
