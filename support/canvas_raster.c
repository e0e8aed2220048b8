/* The pixel form of the canvas (canvas.h): an RGB raster with rectangles, lines of a square brush
 * and the 5x7 bitmap font of font.c (scaled, any angle), encoded as PNG by png.c. Only rotated text
 * is smoothed: the pictures are charts of flat colours, and this keeps the code short. */
#include "canvas_format.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ADV 6 /* glyph advance in font pixels: 5 columns and a gap */

typedef struct {
    int W, H;
    uint8_t *px; /* RGB, row-major */
} raster;

void *rqs_raster_new(int W, int H)
{
    raster *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    r->W = W;
    r->H = H;
    r->px = malloc((size_t)W * H * 3);
    if (!r->px) {
        free(r);
        return NULL;
    }
    memset(r->px, 255, (size_t)W * H * 3); /* white */
    return r;
}

static void dot(raster *r, int x, int y, rqs_rgb c)
{
    if (x >= 0 && y >= 0 && x < r->W && y < r->H) {
        uint8_t *p = r->px + 3 * ((size_t)y * r->W + x);
        p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
}

/* pixels [x0, x1) x [y0, y1) */
static void box(raster *r, int x0, int y0, int x1, int y1, rqs_rgb c)
{
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            dot(r, x, y, c);
}

static int px(double v) { return (int)lround(v); }

static void ras_rect(void *impl, double x, double y, double w, double h, const rqs_rgb *fill, const rqs_rgb *stroke,
                     const char *tip)
{
    raster *r = impl;
    (void)tip;
    int x0 = px(x), y0 = px(y), x1 = px(x + w), y1 = px(y + h);
    if (fill)
        box(r, x0, y0, x1, y1, *fill);
    if (stroke) { /* just outside the box, so that a frame never covers what it frames */
        box(r, x0 - 1, y0 - 1, x1 + 1, y0, *stroke);
        box(r, x0 - 1, y1, x1 + 1, y1 + 1, *stroke);
        box(r, x0 - 1, y0, x0, y1, *stroke);
        box(r, x1, y0, x1 + 1, y1, *stroke);
    }
}

/* Bresenham with a t x t brush. */
static void ras_line(void *impl, double fx0, double fy0, double fx1, double fy1, rqs_rgb c, double width)
{
    raster *r = impl;
    int x0 = px(fx0), y0 = px(fy0), x1 = px(fx1), y1 = px(fy1), t = width < 1.5 ? 1 : px(width);
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        box(r, x0 - t / 2, y0 - t / 2, x0 - t / 2 + t, y0 - t / 2 + t, c);
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

static void ras_polyline(void *impl, const double *x, const double *y, size_t n, rqs_rgb c, double width)
{
    for (size_t i = 1; i < n; i++)
        ras_line(impl, x[i - 1], y[i - 1], x[i], y[i], c, width);
    if (n == 1)
        ras_line(impl, x[0], y[0], x[0], y[0], c, width);
}

/* 1 when the text's own point (fx, fy) (font pixels scaled by s, from the top-left of its first
 * glyph) is on a lit glyph pixel. */
static int lit(const char *t, size_t n, int s, double fx, double fy)
{
    if (fx < 0 || fy < 0)
        return 0;
    int gx = (int)(fx / s), gy = (int)(fy / s), k = gx / ADV, col = gx % ADV;
    if (gy >= 9 || (size_t)k >= n || col >= 5)
        return 0;
    return (rqs_glyph(t[k])[gy] & (0x10 >> col)) != 0;
}

/* Each destination pixel of the rotated text's bounding box is mapped back into the unrotated text
 * at 3 x 3 points and takes the text's colour in proportion to the points that land on the font:
 * no gaps at any angle, and crisp glyphs at multiples of 90 degrees (the origin is snapped to whole
 * pixels, so that all 9 points of a pixel then fall on one font pixel). */
static void ras_text(void *impl, double x, double y, double size, rqs_anchor anchor, double angle, rqs_rgb c,
                     const char *t)
{
    raster *r = impl;
    int s = size >= 13.0 ? 2 : 1; /* screen pixels per font pixel: titles and axis labels 2, ticks 1 */
    size_t n = strlen(t);
    double w = (double)((int)n * ADV - 1) * s;
    double off = round(anchor == RQS_ANCHOR_MIDDLE ? w / 2 : anchor == RQS_ANCHOR_END ? w : 0);
    double a = angle * 3.14159265358979323846 / 180.0, ca = cos(a), sa = sin(a);
    x = round(x), y = round(y);
    /* the text's box in its own frame (baseline at 0; rows 0-6 above it, 7-8 below), rotated */
    double lx[2] = {-off, w - off}, ly[2] = {-7.0 * s, 2.0 * s}, bx0 = INFINITY, by0 = INFINITY, bx1 = -INFINITY,
           by1 = -INFINITY;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double X = x + lx[i] * ca - ly[j] * sa, Y = y + lx[i] * sa + ly[j] * ca;
            bx0 = fmin(bx0, X), bx1 = fmax(bx1, X), by0 = fmin(by0, Y), by1 = fmax(by1, Y);
        }
    for (int py = (int)floor(by0); py <= (int)ceil(by1); py++)
        for (int qx = (int)floor(bx0); qx <= (int)ceil(bx1); qx++) {
            if (qx < 0 || py < 0 || qx >= r->W || py >= r->H)
                continue;
            int hits = 0;
            for (int sy = 0; sy < 3; sy++)
                for (int sx = 0; sx < 3; sx++) {
                    double ux = qx + (sx + 0.5) / 3 - x, uy = py + (sy + 0.5) / 3 - y;
                    hits += lit(t, n, s, ux * ca + uy * sa + off, -ux * sa + uy * ca + 7.0 * s);
                }
            if (!hits)
                continue;
            uint8_t *p = r->px + 3 * ((size_t)py * r->W + qx);
            p[0] = (uint8_t)((p[0] * (9 - hits) + c.r * hits) / 9);
            p[1] = (uint8_t)((p[1] * (9 - hits) + c.g * hits) / 9);
            p[2] = (uint8_t)((p[2] * (9 - hits) + c.b * hits) / 9);
        }
}

static void ras_cells(void *impl, double x, double y, double w, double h, int rows, int cols, const float *t)
{
    raster *r = impl;
    int x0 = px(x), y0 = px(y), x1 = px(x + w), y1 = px(y + h);
    for (int py = y0; py < y1; py++) {
        int a = (int)((int64_t)(py - y0) * rows / (y1 - y0));
        for (int qx = x0; qx < x1; qx++)
            dot(r, qx, py, rqs_color_of(t[(size_t)a * cols + (int)((int64_t)(qx - x0) * cols / (x1 - x0))]));
    }
}

static int ras_encode(void *impl, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    raster *r = impl;
    return rqs_png_encode(r->px, r->W, r->H, data, len, err, errlen);
}

static void ras_destroy(void *impl)
{
    raster *r = impl;
    free(r->px);
    free(r);
}

const rqs_canvas_ops rqs_raster_ops = {ras_rect,  ras_line,   ras_polyline, ras_text,
                                       ras_cells, ras_encode, ras_destroy,  512};
