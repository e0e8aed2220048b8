/* The SVG form of the canvas (canvas.h): one element per primitive, appended to a growing buffer;
 * text stays text (selectable, any font the viewer has). */
#include "canvas_format.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Colour-mapped cells are quantized to this many levels, so that a row's neighbours of one level
 * merge into one rectangle and each level into one path: files stay small at the 128-cell grid. */
#define LEVELS 64

typedef struct {
    int W, H;
    char *buf;
    size_t len, cap;
    int oom; /* sticky: encode reports it */
} svg;

__attribute__((format(printf, 2, 3)))
static void put(svg *s, const char *fmt, ...)
{
    if (s->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? s->cap - s->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            s->oom = 1;
            return;
        }
        if (s->buf && (size_t)w < s->cap - s->len) {
            s->len += (size_t)w;
            return;
        }
        size_t cap = (s->cap ? s->cap * 2 : 65536) + (size_t)w;
        char *nb = realloc(s->buf, cap);
        if (!nb) {
            s->oom = 1;
            return;
        }
        s->buf = nb;
        s->cap = cap;
    }
}

/* Text content: the XML specials escaped (titles carry device names, which may hold anything). */
static void put_escaped(svg *s, const char *t)
{
    for (; t && *t; t++) {
        if (*t == '<')
            put(s, "&lt;");
        else if (*t == '>')
            put(s, "&gt;");
        else if (*t == '&')
            put(s, "&amp;");
        else
            put(s, "%c", *t);
    }
}

static void rgb_attr(svg *s, const char *name, const rqs_rgb *c)
{
    if (c)
        put(s, " %s=\"#%02x%02x%02x\"", name, c->r, c->g, c->b);
    else
        put(s, " %s=\"none\"", name);
}

void *rqs_svg_new(int W, int H)
{
    svg *s = calloc(1, sizeof *s);
    if (s) {
        s->W = W;
        s->H = H;
    }
    return s;
}

static void svg_rect(void *impl, double x, double y, double w, double h, const rqs_rgb *fill, const rqs_rgb *stroke,
                     const char *tip)
{
    svg *s = impl;
    put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"", x, y, w, h);
    rgb_attr(s, "fill", fill);
    if (stroke)
        rgb_attr(s, "stroke", stroke);
    if (tip) {
        put(s, "><title>");
        put_escaped(s, tip);
        put(s, "</title></rect>\n");
    } else {
        put(s, "/>\n");
    }
}

static void svg_line(void *impl, double x0, double y0, double x1, double y1, rqs_rgb color, double width)
{
    svg *s = impl;
    put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"", x0, y0, x1, y1);
    rgb_attr(s, "stroke", &color);
    if (width != 1.0)
        put(s, " stroke-width=\"%g\"", width);
    put(s, "/>\n");
}

static void svg_polyline(void *impl, const double *x, const double *y, size_t n, rqs_rgb color, double width)
{
    svg *s = impl;
    put(s, "<polyline fill=\"none\"");
    rgb_attr(s, "stroke", &color);
    put(s, " stroke-width=\"%g\" points=\"", width);
    for (size_t i = 0; i < n; i++)
        put(s, "%.1f,%.1f ", x[i], y[i]);
    put(s, "\"/>\n");
}

static void svg_text(void *impl, double x, double y, double size, rqs_anchor anchor, double angle, rqs_rgb color,
                     const char *t)
{
    static const char *const anchors[] = {"start", "middle", "end"};
    svg *s = impl;
    put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"%s\"", x, y, size, anchors[anchor]);
    if (angle != 0.0)
        put(s, " transform=\"rotate(%g %.1f %.1f)\"", angle, x, y);
    if (color.r || color.g || color.b) /* black is SVG's default fill */
        rgb_attr(s, "fill", &color);
    put(s, ">");
    put_escaped(s, t);
    put(s, "</text>\n");
}

/* The quantized level of a value: -1 for masked (NaN). */
static int level(float t)
{
    if (isnan(t))
        return -1;
    int l = (int)floor((fmin(fmax(t, -1.0), 1.0) + 1.0) * 0.5 * LEVELS);
    return l >= LEVELS ? LEVELS - 1 : l;
}

static void svg_cells(void *impl, double x, double y, double w, double h, int rows, int cols, const float *t)
{
    svg *s = impl;
    /* in cell units, scaled to the box: one path per level, horizontal runs merged */
    put(s, "<g transform=\"translate(%.1f,%.1f) scale(%.6f,%.6f)\" shape-rendering=\"crispEdges\">\n", x, y, w / cols,
        h / rows);
    for (int lev = -1; lev < LEVELS; lev++) {
        rqs_rgb c = rqs_color_of(lev < 0 ? NAN : -1.0 + 2.0 * (lev + 0.5) / LEVELS);
        int any = 0;
        for (int a = 0; a < rows; a++)
            for (int b = 0; b < cols; b++) {
                if (level(t[(size_t)a * cols + b]) != lev)
                    continue;
                int e = b + 1;
                while (e < cols && level(t[(size_t)a * cols + e]) == lev)
                    e++;
                if (!any)
                    put(s, "<path fill=\"#%02x%02x%02x\" d=\"", c.r, c.g, c.b);
                any = 1;
                put(s, "M%d %dh%dv1h-%dz", b, a, e - b, e - b);
                b = e - 1;
            }
        if (any)
            put(s, "\"/>\n");
    }
    put(s, "</g>\n");
}

static int svg_encode(void *impl, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    svg *s = impl;
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
                      "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n",
                      s->W, s->H, s->W, s->H, s->W, s->H);
    static const char tail[] = "</svg>\n";
    size_t n = (size_t)hn + s->len + sizeof tail - 1;
    unsigned char *out = s->oom ? NULL : malloc(n);
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(out, head, (size_t)hn);
    if (s->len)
        memcpy(out + hn, s->buf, s->len);
    memcpy(out + hn + s->len, tail, sizeof tail - 1);
    *data = out;
    *len = n;
    return 0;
}

static void svg_destroy(void *impl)
{
    svg *s = impl;
    free(s->buf);
    free(s);
}

const rqs_canvas_ops rqs_svg_ops = {svg_rect, svg_line, svg_polyline, svg_text, svg_cells, svg_encode, svg_destroy,
                                    128};
