/* The drawing surface behind the plots (plot.h): a few primitives that both output formats render,
 * so that each figure is laid out once. Not for callers outside support/: they use plot.h.
 *
 *   canvas.c         choosing the format by extension, dispatch, writing the file
 *   canvas_svg.c     SVG: each primitive becomes an element (text stays text)
 *   canvas_raster.c  RGB pixels (font.c: the bitmap font of its labels); png.c encodes them
 *   canvas_format.c  what the formats share with the front (canvas_format.h): the colour map
 *
 * Coordinates are pixels from the top-left corner, y down. */
#ifndef RQS_CANVAS_H
#define RQS_CANVAS_H

#include "canvas_format.h"

#include <stddef.h>
#include <stdint.h>

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
/* A rows x cols grid of colour-mapped values t (row-major, rqs_color_of: canvas_format.h) filling the box. */
void rqs_cells(rqs_canvas *c, double x, double y, double w, double h, int rows, int cols, const float *t);

#endif
