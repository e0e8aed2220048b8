/* The drawing surface behind the plots (plot.h): a few primitives that both output formats render,
 * so that each figure is laid out once. Not for callers outside support/: they use plot.h.
 *
 *   canvas.c         choosing the format by extension, dispatch, the colour map, writing the file
 *   canvas_svg.c     SVG: each primitive becomes an element (text stays text)
 *   canvas_raster.c  RGB pixels (font.c: the bitmap font of its labels); png.c encodes them
 *
 * Coordinates are pixels from the top-left corner, y down. */
#ifndef RQS_CANVAS_H
#define RQS_CANVAS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t r, g, b;
} rqs_rgb;

typedef enum { RQS_ANCHOR_START, RQS_ANCHOR_MIDDLE, RQS_ANCHOR_END } rqs_anchor;

typedef struct rqs_canvas rqs_canvas;

/* A W x H white canvas for path's format (.svg, or .png with libpng). NULL with a message in err
 * for another extension, a missing libpng, or out of memory. */
rqs_canvas *rqs_canvas_open(const char *path, int W, int H, char *err, size_t errlen);
/* Encodes the picture and writes it to path whole or not at all (atomic_file.h); frees c (also on
 * error). 0 or -1 with a message in err. */
int rqs_canvas_finish(rqs_canvas *c, const char *path, char *err, size_t errlen);
/* Frees c without writing anything (a figure that could not be drawn). */
void rqs_canvas_discard(rqs_canvas *c);
/* How many cells a colour-mapped grid should have per side at most: more than the format can show
 * usefully only makes the file larger (SVG: one element per run of equal colour). */
int rqs_canvas_max_cells(const rqs_canvas *c);

/* Rectangle; fill and stroke (1 px) may each be NULL. tip: a tooltip (SVG), or NULL. */
void rqs_rect(rqs_canvas *c, double x, double y, double w, double h, const rqs_rgb *fill, const rqs_rgb *stroke,
              const char *tip);
void rqs_line(rqs_canvas *c, double x0, double y0, double x1, double y1, rqs_rgb color, double width);
/* Connected segments through (x[i], y[i]); a non-finite point breaks the line. */
void rqs_polyline(rqs_canvas *c, const double *x, const double *y, size_t n, rqs_rgb color, double width);
/* One line of text with its baseline through (x, y), anchored there by its start, middle or end,
 * rotated by angle degrees clockwise around (x, y). size: the font size in pixels. */
void rqs_text(rqs_canvas *c, double x, double y, double size, rqs_anchor anchor, double angle, rqs_rgb color,
              const char *s);
/* A rows x cols grid of colour-mapped values t (row-major, rqs_color_of) filling the box. */
void rqs_cells(rqs_canvas *c, double x, double y, double w, double h, int rows, int cols, const float *t);

/* The diverging colour map of rqs_cells: blue (-1), light grey (0), red (+1); t outside [-1, 1]
 * clamps; NaN is "masked" (rqs_masked_rgb). */
rqs_rgb rqs_color_of(double t);
extern const rqs_rgb rqs_masked_rgb;

/* ---- the formats (canvas_svg.c, canvas_raster.c), called through canvas.c ------------------ */
typedef struct {
    void (*rect)(void *impl, double x, double y, double w, double h, const rqs_rgb *fill, const rqs_rgb *stroke,
                 const char *tip);
    void (*line)(void *impl, double x0, double y0, double x1, double y1, rqs_rgb color, double width);
    /* one unbroken run of finite points (canvas.c splits at the others) */
    void (*polyline)(void *impl, const double *x, const double *y, size_t n, rqs_rgb color, double width);
    void (*text)(void *impl, double x, double y, double size, rqs_anchor anchor, double angle, rqs_rgb color,
                 const char *s);
    void (*cells)(void *impl, double x, double y, double w, double h, int rows, int cols, const float *t);
    /* The file's bytes in *data (malloc'd, the caller frees) and *len; -1 on failure, with err. */
    int (*encode)(void *impl, unsigned char **data, size_t *len, char *err, size_t errlen);
    void (*destroy)(void *impl);
    int max_cells;
} rqs_canvas_ops;

extern const rqs_canvas_ops rqs_svg_ops, rqs_raster_ops;
/* The backends' constructors (NULL: out of memory). */
void *rqs_svg_new(int W, int H);
void *rqs_raster_new(int W, int H);
/* png.c: RGB pixels (W x H, row-major) as a PNG file in memory; -1 with err when it cannot (no
 * libpng in this build, or libpng failed). */
int rqs_png_encode(const uint8_t *rgb, int W, int H, unsigned char **data, size_t *len, char *err, size_t errlen);
/* font.c: 9 rows of 5 columns (bit 4 = leftmost; rows 0-6 above the baseline, 7-8 descenders) for
 * printable ASCII; '?' for the rest. */
const uint8_t *rqs_glyph(char c);

#endif
