/* What the canvas's formats (canvas_svg.c, canvas_raster.c) share with its front (canvas.c, canvas.h):
 * the primitives' colour and text anchor, the colour map (canvas_format.c), and the operations each
 * format implements, which canvas.c calls. Below the front and the formats alike: the formats include
 * this, never canvas.h. Not for callers outside support/. */
#ifndef RQS_CANVAS_FORMAT_H
#define RQS_CANVAS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t r, g, b;
} rqs_rgb;

typedef enum { RQS_ANCHOR_START, RQS_ANCHOR_MIDDLE, RQS_ANCHOR_END } rqs_anchor;

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
