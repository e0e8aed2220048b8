/* ropeqk-bench's scores mode (scores_bench.c): every scores implementation checked against fp64 on
 * small shapes, then timed on the bench shapes (prefill, GQA, decode), and the ratios
 * the targets are stated in computed from the figures of the same run. */
#ifndef ROPEQK_BENCH_SCORES_BENCH_H
#define ROPEQK_BENCH_SCORES_BENCH_H

#include "benv.h"
#include "impls.h"
#include "scores_impl.h"

#include <stdbool.h>
#include <stdio.h>

#define SCORES_MAX_SHAPES 16

typedef struct {
    double wall_ms, dev_ms, score_ms, gflops, gbs;
    bool valid;
} sresult;

/* The figures of one run: shapes in table order, a result per impl. */
typedef struct {
    int n;
    bshape shapes[SCORES_MAX_SHAPES];
    sresult res[SCORES_MAX_SHAPES][IMPL_COUNT];
} sfigures;

typedef struct {
    int runs, warmup;
    bool quick;               /* two prefill shapes and the shorter decode shape */
    const char *shape_filter; /* substring of the shape names to time (NULL: all) */
    double ref_max_gflop;     /* the fp64 reference is timed on shapes up to this many GFLOP */
} sopts;

/* What the table's shapes and baselines are, on stdout. */
void scores_describe(void);
/* Checks every enabled impl on small shapes against ropeqk_scores_ref; an impl that fails is
 * reported, turned off in enabled[] and sets *failed. 0, or 1 on a setup error (printed). */
int scores_check(benv *e, bool *enabled, bool *failed);
/* Times the enabled impls on the shapes: the table on stdout, CSV rows to csv (may be NULL), the
 * figures in *f. */
void scores_time(benv *e, const sopts *o, const bool *enabled, FILE *csv, sfigures *f);
/* The targets (ratios within the run) that *f allows. */
void scores_print_targets(const sfigures *f);
/* Chart rows of the shapes *f has figures for (GFLOP/s per impl); returns how many (<= max). */
int scores_chart_rows(const sfigures *f, brow *rows, int max);

#endif
