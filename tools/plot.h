/* The demo's picture: a heat map of one head's scores and a curve of score against relative
 * distance, written as PNG (libpng, when built with it) or SVG, chosen by the file's extension. */
#ifndef ROPEQK_PLOT_H
#define ROPEQK_PLOT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *title;        /* top line */
    /* left panel: a rows x cols matrix, row-major; -inf entries are drawn as "masked" */
    const float *heat;
    int64_t rows, cols;
    const char *heat_title;
    const char *heat_xlabel, *heat_ylabel;
    /* right panel: y[x] for x = 0 .. npts-1 */
    const double *curve;
    int64_t npts;
    const char *curve_title, *curve_xlabel, *curve_ylabel;
    const char *note;         /* optional line under the curve panel */
} plot_data;

/* 1 when this build writes PNG. */
int plot_have_png(void);
/* 0: FILE ends in .png or .svg (case-insensitive) and that format is available; otherwise -1 with
 * a message in err. */
int plot_check_path(const char *path, char *err, size_t errlen);
/* Writes the picture (temporary file + rename: nothing at path on error). 0 ok, -1 with err. */
int plot_write(const char *path, const plot_data *pd, char *err, size_t errlen);

/* ---- shared by plot.c (layout, SVG) and png.c (raster) ---------------------------------------- */
typedef struct {
    int W, H;
    int hx, hy, hs;            /* heat map box: top-left and side, px */
    int cbx, cby, cbw, cbh;    /* colour bar */
    int cx, cy, cw, ch;        /* curve axes box */
    float *cells;              /* gr x gc downsampled scores, NaN = masked */
    int gr, gc;
    double vmax;               /* colour scale is [-vmax, vmax] */
    double xlo, xhi, xstep;    /* curve axes: data range and tick step */
    double ylo, yhi, ystep;
} plot_layout;

/* Downsamples the heat map to at most `grid` cells per side and lays out the panels for a
 * W x H picture. Returns -1 on out of memory. plot_layout_free() releases cells. */
int plot_layout_make(const plot_data *pd, int grid, int W, int H, plot_layout *L);
void plot_layout_free(plot_layout *L);
/* Diverging colour map over [-1, 1] (t < -1 and > 1 clamp); masked colour for NaN. */
void plot_color(double t, uint8_t rgb[3]);
extern const uint8_t plot_masked_rgb[3];
/* Formats a tick value compactly. */
void plot_tick_label(double v, double step, char *buf, size_t len);
/* Writes the raster picture as PNG (png.c). */
int plot_write_png(const char *path, const plot_data *pd, char *err, size_t errlen);

/* font.c: 9 glyph rows of 5 columns (bit 4 = leftmost; rows 0-6 cap height, 7-8 descenders) for
 * printable ASCII; '?' for the rest. */
const uint8_t *plot_glyph(char c);

#endif
