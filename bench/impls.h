/* The implementations ropeqk-bench compares (scores and attention modes share the table), and a row
 * of the chart. Which baselines exist is decided at configure time (HAVE_CLBLAST, HAVE_CBLAS). */
#ifndef ROPEQK_BENCH_IMPLS_H
#define ROPEQK_BENCH_IMPLS_H

#include <stdbool.h>

/* In table order. */
typedef enum {
    IMPL_FUSED_F32,
    IMPL_FUSED_F16,
    IMPL_UNFUSED_CLBLAST,
    IMPL_CBLAS,
    IMPL_REF,
    IMPL_COPY_BUFFER, /* decode rows only: bandwidth yardsticks, not implementations of the op */
    IMPL_COPY_KERNEL,
    IMPL_COUNT
} bimpl;

extern const char *const bimpl_name[IMPL_COUNT];
extern const char *const bimpl_dtype[IMPL_COUNT];

/* false for a baseline whose library was missing at configure time */
bool bimpl_available(bimpl i);

/* One shape's figures for the chart: GFLOP/s per impl (0: not timed). */
typedef struct {
    char name[48];
    double gflops[IMPL_COUNT];
} brow;

#endif
