/* ropeqk-bench's attention mode (attn_bench.c): the fp64 checks of every attention impl on small
 * shapes, and (--attention) the timed shapes. */
#ifndef ROPEQK_BENCH_ATTN_BENCH_H
#define ROPEQK_BENCH_ATTN_BENCH_H

#include "benv.h"
#include "impls.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct {
    int runs, warmup;
    double budget_s;     /* per impl and shape: stop timing after this many seconds (>= 3 runs) */
    double max_run_s;    /* skip an impl whose predicted time per run exceeds this */
    bool quick;          /* the S=1024 prefill and decode shapes only */
    bool checks_only;    /* the fp64 checks, no timed shapes */
    const char *shape_filter;
    const bool *enabled; /* [IMPL_COUNT] */
} aopts;

/* Runs the attention checks and shapes; CSV rows to csv (may be NULL), chart rows to rows.
 * 0 on success, 3 when an implementation disagreed, 1 on a fatal error. */
int bench_attention(benv *e, const aopts *o, FILE *csv, brow *rows, int max_rows, int *nrows);

#endif
