/* The pictures of tools and bench: the demo's heat map + curve (plot_heat.c) and the bench's bar
 * chart (plot_bars.c), each laid out once on the canvas of canvas.h and written as SVG, or PNG when
 * built with libpng, chosen by the file's extension (case-insensitive). Files are written whole or
 * not at all (temporary file + rename). */
#ifndef RQS_PLOT_H
#define RQS_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this build writes PNG (libpng was found at configure time). */
int rqs_plot_have_png(void);
/* 0 when path ends in .svg or .png and that format is available; else -1 with a message in err
 * (one that names libpng when only libpng is missing). Check before long work, not after. */
int rqs_plot_check_path(const char *path, char *err, size_t errlen);

/* Left: a rows x cols matrix as a heat map (row-major; -inf and NaN entries are drawn as
 * "masked"), with a colour bar; right: the curve y[x] for x = 0 .. npts-1. */
typedef struct {
    const char *title; /* top line */
    const float *heat;
    int64_t rows, cols;
    const char *heat_title, *heat_xlabel, *heat_ylabel;
    const double *curve; /* non-finite points are left out */
    int64_t npts;
    const char *curve_title, *curve_xlabel, *curve_ylabel;
    const char *note; /* optional line at the bottom */
} rqs_heat_plot;

/* 0, or -1 with a message in err (nothing at path then). */
int rqs_plot_heat(const char *path, const rqs_heat_plot *pd, char *err, size_t errlen);

/* Groups of bars on a log10 axis: one group per name in groups, one bar per series in each. */
typedef struct {
    const char *title;
    const char *unit; /* of the values, in the bars' tooltips: "GFLOP/s" */
    int ngroups, nseries;
    const char *const *groups, *const *series;
    const double *values; /* [group][series]; <= 0 or NaN: no bar */
} rqs_bar_plot;

/* 0, or -1 with a message in err (nothing at path then). */
int rqs_plot_bars(const char *path, const rqs_bar_plot *bp, char *err, size_t errlen);

#endif
