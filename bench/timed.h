/* One OpenCL run timed whole (enqueue .. clFinish) over several repetitions: the loop the paged and
 * ragged benches share. */
#ifndef ROPEQK_BENCH_TIMED_H
#define ROPEQK_BENCH_TIMED_H

#include "benv.h"

/* Enqueues one run on e->queue; 0 or an error (OpenCL or ropeqk status). */
typedef int (*timed_fn)(benv *e, void *ctx);

/* Median and best (ms; best may be NULL) of `runs` (1..64) timed calls of fn, each waited for, after
 * `warmup` untimed ones; the first error is returned. */
int bench_time_ms(benv *e, timed_fn fn, void *ctx, int runs, int warmup, double *median, double *best);

#endif
