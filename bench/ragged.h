/* ropeqk-bench --ragged (ragged.c): a serving engine's step over a paged cache (decode rows,
 * speculative rows, prefill chunks in one ragged call) against per-sequence dense attention on
 * copies, and a prefill chunk against dense attention on the same shape. */
#ifndef ROPEQK_BENCH_RAGGED_H
#define ROPEQK_BENCH_RAGGED_H

#include "benv.h"

/* 0 on success. */
int bench_ragged(benv *e);

#endif
