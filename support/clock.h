/* Wall-clock time and medians for tools, tests and bench (the one copy of each). */
#ifndef RQS_CLOCK_H
#define RQS_CLOCK_H

#include <stddef.h>

/* CLOCK_MONOTONIC in seconds. */
double rqs_now(void);
/* Sorts v[0..n) ascending (percentiles, best of n). */
void rqs_sort(double *v, size_t n);
/* The median of n values (n >= 1; sorts a copy of at most 64 values, else v itself in place);
 * 0 for n == 0. */
double rqs_median(double *v, size_t n);

#endif
