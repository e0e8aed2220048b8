/* The demo's picture (plot.h): a heat map of one head's scores with its colour bar, and a curve of
 * score against relative distance, laid out once on the canvas (canvas.h) for both formats. */
#include "canvas.h"
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { W = 1280, H = 700 };

static const rqs_rgb black = {0, 0, 0}, grid_rgb = {228, 228, 228}, axis_rgb = {136, 136, 136},
                     curve_rgb = {180, 4, 38}, note_rgb = {68, 68, 68};

/* A round tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over range. */
static double nice_step(double range, int target)
{
    if (!(range > 0.0) || !isfinite(range))
        return 1.0;
    double raw = range / target, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

/* As many decimals as the step needs, no more ("0.25", "1500"). */
static void tick_label(double v, double step, char *buf, size_t len)
{
    if (fabs(v) < step * 1e-9)
        v = 0.0;
    int dec = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6 || fabs(v) >= 1e7)
        snprintf(buf, len, "%g", v);
    else
        snprintf(buf, len, "%.*f", dec, v);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int hx, hy, hs;         /* heat map box: top-left and side */
    int cbx, cby, cbw, cbh; /* colour bar */
    int cx, cy, cw, ch;     /* curve axes box */
    float *cells;           /* gr x gc downsampled scores over vmax: [-1, 1], NaN = masked */
    int gr, gc;
    double vmax;            /* the colour scale is [-vmax, vmax] */
    double xlo, xhi, xstep; /* curve axes: data range and tick step */
    double ylo, yhi, ystep;
} layout;

/* Averages the heat map down to at most grid cells per side, picks the colour scale and places the
 * panels. -1 on out of memory. */
static int make_layout(const rqs_heat_plot *pd, int grid, layout *L)
{
    L->gr = (int)(pd->rows < grid ? pd->rows : grid);
    L->gc = (int)(pd->cols < grid ? pd->cols : grid);
    size_t n = (size_t)L->gr * (size_t)L->gc, nm = 0;
    L->cells = malloc(n * sizeof *L->cells);
    float *mag = malloc(n * sizeof *mag);
    if (!L->cells || !mag) {
        free(mag);
        free(L->cells);
        return -1;
    }
    for (int a = 0; a < L->gr; a++) {
        int64_t r0 = a * pd->rows / L->gr, r1 = (a + 1) * pd->rows / L->gr;
        for (int b = 0; b < L->gc; b++) {
            int64_t c0 = b * pd->cols / L->gc, c1 = (b + 1) * pd->cols / L->gc, cnt = 0;
            double sum = 0.0;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    float v = pd->heat[r * pd->cols + c];
                    if (isfinite(v))
                        sum += v, cnt++;
                }
            float v = cnt ? (float)(sum / (double)cnt) : NAN;
            L->cells[(size_t)a * L->gc + b] = v;
            if (cnt)
                mag[nm++] = fabsf(v);
        }
    }
    /* colour scale: the 99th percentile of |value|, so that a few outliers do not wash it out */
    L->vmax = 1.0;
    if (nm) {
        qsort(mag, nm, sizeof *mag, cmp_float);
        double v = mag[(size_t)(0.99 * (double)(nm - 1))];
        if (v > 0.0)
            L->vmax = v;
    }
    free(mag);
    for (size_t i = 0; i < n; i++)
        L->cells[i] = (float)(L->cells[i] / L->vmax);
    /* heat map on the left, colour bar, curve on the right */
    L->hs = H - 170, L->hx = 80, L->hy = 84;
    L->cbx = L->hx + L->hs + 24, L->cby = L->hy, L->cbw = 18, L->cbh = L->hs;
    L->cx = L->cbx + 150, L->cy = L->hy, L->cw = W - L->cx - 40, L->ch = L->hs;
    double ymin = INFINITY, ymax = -INFINITY;
    for (int64_t i = 0; i < pd->npts; i++)
        if (isfinite(pd->curve[i]))
            ymin = fmin(ymin, pd->curve[i]), ymax = fmax(ymax, pd->curve[i]);
    if (!(ymin <= ymax))
        ymin = -1.0, ymax = 1.0;
    if (ymax - ymin < 1e-12)
        ymin -= 1.0, ymax += 1.0;
    L->ystep = nice_step(ymax - ymin, 6);
    L->ylo = floor(ymin / L->ystep) * L->ystep;
    L->yhi = ceil(ymax / L->ystep) * L->ystep;
    L->xlo = 0.0;
    L->xhi = pd->npts > 1 ? (double)(pd->npts - 1) : 1.0;
    L->xstep = nice_step(L->xhi - L->xlo, 5);
    return 0;
}

/* The colour bar: the map from +1 (top) to -1, labelled in score units, and the masked swatch. */
static int draw_colour_bar(rqs_canvas *cv, const layout *L)
{
    int n = rqs_canvas_max_cells(cv);
    float *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < n; i++)
        t[i] = (float)(1.0 - 2.0 * (i + 0.5) / n);
    rqs_cells(cv, L->cbx, L->cby, L->cbw, L->cbh, n, 1, t);
    free(t);
    rqs_rect(cv, L->cbx, L->cby, L->cbw, L->cbh, NULL, &black, NULL);
    double vs = nice_step(2.0 * L->vmax, 4);
    for (double v = -floor(L->vmax / vs) * vs; v <= L->vmax + 1e-12; v += vs) {
        char lab[32];
        double y = L->cby + L->cbh * (0.5 - 0.5 * v / L->vmax);
        tick_label(v, vs, lab, sizeof lab);
        rqs_line(cv, L->cbx + L->cbw, y, L->cbx + L->cbw + 3, y, black, 1);
        rqs_text(cv, L->cbx + L->cbw + 6, y + 4, 12, RQS_ANCHOR_START, 0, black, lab);
    }
    rqs_rect(cv, L->cbx, L->cby + L->cbh + 12, L->cbw, 14, &rqs_masked_rgb, &black, NULL);
    rqs_text(cv, L->cbx + L->cbw + 6, L->cby + L->cbh + 24, 12, RQS_ANCHOR_START, 0, black, "masked");
    return 0;
}

static int draw_heat(rqs_canvas *cv, const rqs_heat_plot *pd, const layout *L)
{
    rqs_cells(cv, L->hx, L->hy, L->hs, L->hs, L->gr, L->gc, L->cells);
    rqs_rect(cv, L->hx, L->hy, L->hs, L->hs, NULL, &black, NULL);
    rqs_text(cv, L->hx + L->hs / 2.0, L->hy - 12, 15, RQS_ANCHOR_MIDDLE, 0, black, pd->heat_title);
    rqs_text(cv, L->hx + L->hs / 2.0, L->hy + L->hs + 40, 13, RQS_ANCHOR_MIDDLE, 0, black, pd->heat_xlabel);
    rqs_text(cv, L->hx - 44, L->hy + L->hs / 2.0, 13, RQS_ANCHOR_MIDDLE, -90, black, pd->heat_ylabel);
    char lab[32];
    double step = nice_step((double)pd->cols, 4);
    for (double v = 0; v < (double)pd->cols; v += step) { /* ticks at cell centres */
        double x = L->hx + (v + 0.5) / pd->cols * L->hs;
        tick_label(v, step, lab, sizeof lab);
        rqs_line(cv, x, L->hy + L->hs, x, L->hy + L->hs + 5, black, 1);
        rqs_text(cv, x, L->hy + L->hs + 19, 12, RQS_ANCHOR_MIDDLE, 0, black, lab);
    }
    step = nice_step((double)pd->rows, 4);
    for (double v = 0; v < (double)pd->rows; v += step) {
        double y = L->hy + (v + 0.5) / pd->rows * L->hs;
        tick_label(v, step, lab, sizeof lab);
        rqs_line(cv, L->hx - 5, y, L->hx, y, black, 1);
        rqs_text(cv, L->hx - 8, y + 4, 12, RQS_ANCHOR_END, 0, black, lab);
    }
    return draw_colour_bar(cv, L);
}

static int draw_curve(rqs_canvas *cv, const rqs_heat_plot *pd, const layout *L)
{
#define PX(x) (L->cx + ((x) - L->xlo) / (L->xhi - L->xlo) * L->cw)
#define PY(y) (L->cy + L->ch - ((y) - L->ylo) / (L->yhi - L->ylo) * L->ch)
    char lab[32];
    rqs_text(cv, L->cx + L->cw / 2.0, L->cy - 12, 15, RQS_ANCHOR_MIDDLE, 0, black, pd->curve_title);
    for (double y = L->ylo; y <= L->yhi + 1e-9 * L->ystep; y += L->ystep) {
        tick_label(y, L->ystep, lab, sizeof lab);
        rqs_line(cv, L->cx, PY(y), L->cx + L->cw, PY(y), fabs(y) < 1e-9 * L->ystep ? axis_rgb : grid_rgb, 1);
        rqs_text(cv, L->cx - 8, PY(y) + 4, 12, RQS_ANCHOR_END, 0, black, lab);
    }
    for (double x = L->xlo; x <= L->xhi + 1e-9; x += L->xstep) {
        tick_label(x, L->xstep, lab, sizeof lab);
        rqs_line(cv, PX(x), L->cy, PX(x), L->cy + L->ch, grid_rgb, 1);
        rqs_text(cv, PX(x), L->cy + L->ch + 19, 12, RQS_ANCHOR_MIDDLE, 0, black, lab);
    }
    double *xs = malloc((size_t)pd->npts * 2 * sizeof *xs);
    if (!xs)
        return -1;
    double *ys = xs + pd->npts;
    for (int64_t i = 0; i < pd->npts; i++) {
        xs[i] = PX((double)i);
        ys[i] = isfinite(pd->curve[i]) ? PY(pd->curve[i]) : NAN;
    }
    rqs_polyline(cv, xs, ys, (size_t)pd->npts, curve_rgb, 1.5);
    free(xs);
    rqs_rect(cv, L->cx, L->cy, L->cw, L->ch, NULL, &black, NULL);
    rqs_text(cv, L->cx + L->cw / 2.0, L->cy + L->ch + 40, 13, RQS_ANCHOR_MIDDLE, 0, black, pd->curve_xlabel);
    rqs_text(cv, L->cx - 60, L->cy + L->ch / 2.0, 13, RQS_ANCHOR_MIDDLE, -90, black, pd->curve_ylabel);
    return 0;
#undef PX
#undef PY
}

int rqs_plot_heat(const char *path, const rqs_heat_plot *pd, char *err, size_t errlen)
{
    if (rqs_plot_check_path(path, err, errlen) != 0)
        return -1;
    if (!pd->heat || pd->rows < 1 || pd->cols < 1 || !pd->curve || pd->npts < 1) {
        snprintf(err, errlen, "%s: nothing to plot", path);
        return -1;
    }
    rqs_canvas *cv = rqs_canvas_open(path, W, H, err, errlen);
    if (!cv)
        return -1;
    layout L;
    int rc = make_layout(pd, rqs_canvas_max_cells(cv), &L);
    if (rc == 0) {
        rqs_text(cv, W / 2.0, 30, 18, RQS_ANCHOR_MIDDLE, 0, black, pd->title);
        rc = draw_heat(cv, pd, &L);
        if (rc == 0)
            rc = draw_curve(cv, pd, &L);
        if (pd->note)
            rqs_text(cv, W / 2.0, H - 14, 12, RQS_ANCHOR_MIDDLE, 0, note_rgb, pd->note);
        free(L.cells);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        rqs_canvas_discard(cv);
        return -1;
    }
    return rqs_canvas_finish(cv, path, err, errlen);
}
