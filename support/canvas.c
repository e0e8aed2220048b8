/* The canvas's front (canvas.h): the format by the file's extension, dispatch to it, and writing
 * the encoded file. */
#include "atomic_file.h"
#include "canvas.h"
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct rqs_canvas {
    const rqs_canvas_ops *ops;
    void *impl;
};

/* ".svg", ".png", ... (the last dot after the last slash), "" when there is none */
static const char *extension(const char *path)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) ? dot : "";
}

int rqs_plot_check_path(const char *path, char *err, size_t errlen)
{
    const char *ext = extension(path);
    if (strcasecmp(ext, ".svg") == 0)
        return 0;
    if (strcasecmp(ext, ".png") == 0) {
        if (rqs_plot_have_png())
            return 0;
        snprintf(err, errlen, "%s: this program was built without libpng; write an .svg instead", path);
        return -1;
    }
    snprintf(err, errlen, "%s: unknown picture format '%s' (use .png or .svg)", path, ext);
    return -1;
}

rqs_canvas *rqs_canvas_open(const char *path, int W, int H, char *err, size_t errlen)
{
    if (rqs_plot_check_path(path, err, errlen) != 0)
        return NULL;
    rqs_canvas *c = malloc(sizeof *c);
    if (c) {
        c->ops = strcasecmp(extension(path), ".svg") == 0 ? &rqs_svg_ops : &rqs_raster_ops;
        c->impl = c->ops == &rqs_svg_ops ? rqs_svg_new(W, H) : rqs_raster_new(W, H);
    }
    if (!c || !c->impl) {
        free(c);
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    return c;
}

int rqs_canvas_finish(rqs_canvas *c, const char *path, char *err, size_t errlen)
{
    unsigned char *data = NULL;
    size_t len = 0;
    char why[256] = "";
    int rc = c->ops->encode(c->impl, &data, &len, why, sizeof why);
    if (rc != 0)
        snprintf(err, errlen, "%s: %s", path, why);
    else
        rc = rqs_write_atomic(path, &(rqs_span){data, len}, 1, err, errlen);
    free(data);
    rqs_canvas_discard(c);
    return rc;
}

void rqs_canvas_discard(rqs_canvas *c)
{
    c->ops->destroy(c->impl);
    free(c);
}

int rqs_canvas_max_cells(const rqs_canvas *c) { return c->ops->max_cells; }

void rqs_rect(rqs_canvas *c, double x, double y, double w, double h, const rqs_rgb *fill, const rqs_rgb *stroke,
              const char *tip)
{
    c->ops->rect(c->impl, x, y, w, h, fill, stroke, tip);
}

void rqs_line(rqs_canvas *c, double x0, double y0, double x1, double y1, rqs_rgb color, double width)
{
    c->ops->line(c->impl, x0, y0, x1, y1, color, width);
}

void rqs_polyline(rqs_canvas *c, const double *x, const double *y, size_t n, rqs_rgb color, double width)
{
    for (size_t i = 0; i < n;) {
        while (i < n && !(isfinite(x[i]) && isfinite(y[i])))
            i++;
        size_t j = i;
        while (j < n && isfinite(x[j]) && isfinite(y[j]))
            j++;
        if (j > i)
            c->ops->polyline(c->impl, x + i, y + i, j - i, color, width);
        i = j;
    }
}

void rqs_text(rqs_canvas *c, double x, double y, double size, rqs_anchor anchor, double angle, rqs_rgb color,
              const char *s)
{
    if (s && *s)
        c->ops->text(c->impl, x, y, size, anchor, angle, color, s);
}

void rqs_cells(rqs_canvas *c, double x, double y, double w, double h, int rows, int cols, const float *t)
{
    if (rows > 0 && cols > 0)
        c->ops->cells(c->impl, x, y, w, h, rows, cols, t);
}
