/* The demo's picture: layout shared by both formats, the colour map, and the SVG writer.
 * The PNG raster is in png.c. */
#include "plot.h"
#include "atomic_file.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const uint8_t plot_masked_rgb[3] = {48, 48, 48};

void plot_color(double t, uint8_t rgb[3])
{
    /* "coolwarm"-like diverging map: blue - light grey - red */
    static const double stops[5][3] = {
        {59, 76, 192}, {141, 176, 254}, {221, 221, 221}, {244, 154, 123}, {180, 4, 38}};
    if (isnan(t)) {
        memcpy(rgb, plot_masked_rgb, 3);
        return;
    }
    double u = (t < -1.0 ? -1.0 : t > 1.0 ? 1.0 : t) * 2.0 + 2.0; /* [0, 4] */
    int i = (int)floor(u);
    if (i > 3)
        i = 3;
    double f = u - i;
    for (int c = 0; c < 3; c++)
        rgb[c] = (uint8_t)lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c]));
}

static double nice_step(double range, int target)
{
    if (!(range > 0.0) || !isfinite(range))
        return 1.0;
    double raw = range / target, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

void plot_tick_label(double v, double step, char *buf, size_t len)
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

int plot_layout_make(const plot_data *pd, int grid, int W, int H, plot_layout *L)
{
    memset(L, 0, sizeof *L);
    L->W = W;
    L->H = H;
    L->gr = (int)(pd->rows < grid ? pd->rows : grid);
    L->gc = (int)(pd->cols < grid ? pd->cols : grid);
    size_t n = (size_t)L->gr * (size_t)L->gc;
    L->cells = malloc(n * sizeof *L->cells);
    float *mag = malloc(n * sizeof *mag);
    if (!L->cells || !mag) {
        free(mag);
        plot_layout_free(L);
        return -1;
    }
    size_t nm = 0;
    for (int a = 0; a < L->gr; a++) {
        int64_t r0 = a * pd->rows / L->gr, r1 = (a + 1) * pd->rows / L->gr;
        for (int b = 0; b < L->gc; b++) {
            int64_t c0 = b * pd->cols / L->gc, c1 = (b + 1) * pd->cols / L->gc;
            double sum = 0.0;
            int64_t cnt = 0;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    float v = pd->heat[r * pd->cols + c];
                    if (isfinite(v)) {
                        sum += v;
                        cnt++;
                    }
                }
            float v = cnt ? (float)(sum / (double)cnt) : NAN;
            L->cells[(size_t)a * L->gc + b] = v;
            if (cnt)
                mag[nm++] = fabsf(v);
        }
    }
    /* colour scale: the 99th percentile of |value|, so a few outliers do not wash it out */
    L->vmax = 1.0;
    if (nm) {
        qsort(mag, nm, sizeof *mag, cmp_float);
        double v = mag[(size_t)(0.99 * (double)(nm - 1))];
        if (v > 0.0)
            L->vmax = v;
    }
    free(mag);
    /* panels: heat map on the left, colour bar, curve on the right */
    L->hs = H - 170;
    L->hx = 80;
    L->hy = 84;
    L->cbx = L->hx + L->hs + 24;
    L->cby = L->hy;
    L->cbw = 18;
    L->cbh = L->hs;
    L->cx = L->cbx + 150;
    L->cy = L->hy;
    L->cw = W - L->cx - 40;
    L->ch = L->hs;
    double ymin = INFINITY, ymax = -INFINITY;
    for (int64_t i = 0; i < pd->npts; i++)
        if (isfinite(pd->curve[i])) {
            ymin = fmin(ymin, pd->curve[i]);
            ymax = fmax(ymax, pd->curve[i]);
        }
    if (!(ymin <= ymax)) {
        ymin = -1.0;
        ymax = 1.0;
    }
    if (ymax - ymin < 1e-12) {
        ymin -= 1.0;
        ymax += 1.0;
    }
    L->ystep = nice_step(ymax - ymin, 6);
    L->ylo = floor(ymin / L->ystep) * L->ystep;
    L->yhi = ceil(ymax / L->ystep) * L->ystep;
    L->xlo = 0.0;
    L->xhi = pd->npts > 1 ? (double)(pd->npts - 1) : 1.0;
    L->xstep = nice_step(L->xhi - L->xlo, 5);
    return 0;
}

void plot_layout_free(plot_layout *L)
{
    free(L->cells);
    L->cells = NULL;
}

/* ---- SVG ------------------------------------------------------------------------------------ */
typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...)
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

static void sb_text(sbuf *s, double x, double y, int size, const char *anchor, const char *extra, const char *t)
{
    sb_printf(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\"%s>", x, y, size, anchor,
              extra ? extra : "");
    for (; t && *t; t++) {
        if (*t == '<')
            sb_printf(s, "&lt;");
        else if (*t == '>')
            sb_printf(s, "&gt;");
        else if (*t == '&')
            sb_printf(s, "&amp;");
        else
            sb_printf(s, "%c", *t);
    }
    sb_printf(s, "</text>\n");
}

#define SVG_LEVELS 64

static void svg_heat(sbuf *s, const plot_data *pd, const plot_layout *L)
{
    /* one path per colour level (and one for masked cells), in cell units, scaled to the box */
    sb_printf(s, "<g transform=\"translate(%d,%d) scale(%.6f,%.6f)\" shape-rendering=\"crispEdges\">\n", L->hx,
              L->hy, (double)L->hs / L->gc, (double)L->hs / L->gr);
    for (int lev = -1; lev < SVG_LEVELS; lev++) {
        uint8_t rgb[3];
        plot_color(lev < 0 ? NAN : -1.0 + 2.0 * (lev + 0.5) / SVG_LEVELS, rgb);
        int any = 0;
        for (int a = 0; a < L->gr; a++)
            for (int b = 0; b < L->gc; b++) {
                float v = L->cells[(size_t)a * L->gc + b];
                int lv = -1;
                if (!isnan(v)) {
                    double t = v / L->vmax;
                    lv = (int)floor((fmin(fmax(t, -1.0), 1.0) + 1.0) * 0.5 * SVG_LEVELS);
                    if (lv >= SVG_LEVELS)
                        lv = SVG_LEVELS - 1;
                }
                if (lv != lev)
                    continue;
                /* merge a horizontal run of the same level */
                int e = b + 1;
                while (e < L->gc) {
                    float w = L->cells[(size_t)a * L->gc + e];
                    int lw = -1;
                    if (!isnan(w)) {
                        double t = w / L->vmax;
                        lw = (int)floor((fmin(fmax(t, -1.0), 1.0) + 1.0) * 0.5 * SVG_LEVELS);
                        if (lw >= SVG_LEVELS)
                            lw = SVG_LEVELS - 1;
                    }
                    if (lw != lev)
                        break;
                    e++;
                }
                if (!any)
                    sb_printf(s, "<path fill=\"#%02x%02x%02x\" d=\"", rgb[0], rgb[1], rgb[2]);
                any = 1;
                sb_printf(s, "M%d %dh%dv1h-%dz", b, a, e - b, e - b);
                b = e - 1;
            }
        if (any)
            sb_printf(s, "\"/>\n");
    }
    sb_printf(s, "</g>\n");
    sb_printf(s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#000\"/>\n", L->hx, L->hy,
              L->hs, L->hs);
    sb_text(s, L->hx + L->hs / 2.0, L->hy - 12, 15, "middle", NULL, pd->heat_title);
    sb_text(s, L->hx + L->hs / 2.0, L->hy + L->hs + 40, 13, "middle", NULL, pd->heat_xlabel);
    char tr[96];
    snprintf(tr, sizeof tr, " transform=\"rotate(-90 %d %d)\"", L->hx - 44, L->hy + L->hs / 2);
    sb_text(s, L->hx - 44, L->hy + L->hs / 2, 13, "middle", tr, pd->heat_ylabel);
    double step = nice_step((double)pd->cols, 4);
    for (double v = 0; v < (double)pd->cols; v += step) {
        char lab[32];
        double x = L->hx + (v + 0.5) / pd->cols * L->hs;
        plot_tick_label(v, step, lab, sizeof lab);
        sb_printf(s, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\"/>\n", x, L->hy + L->hs, x,
                  L->hy + L->hs + 5);
        sb_text(s, x, L->hy + L->hs + 19, 12, "middle", NULL, lab);
    }
    step = nice_step((double)pd->rows, 4);
    for (double v = 0; v < (double)pd->rows; v += step) {
        char lab[32];
        double y = L->hy + (v + 0.5) / pd->rows * L->hs;
        plot_tick_label(v, step, lab, sizeof lab);
        sb_printf(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>\n", L->hx - 5, y, L->hx, y);
        sb_text(s, L->hx - 8, y + 4, 12, "end", NULL, lab);
    }
    /* colour bar */
    sb_printf(s, "<defs><linearGradient id=\"cb\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">");
    for (int i = 0; i <= 8; i++) {
        uint8_t rgb[3];
        plot_color(-1.0 + i / 4.0, rgb);
        sb_printf(s, "<stop offset=\"%.3f\" stop-color=\"#%02x%02x%02x\"/>", i / 8.0, rgb[0], rgb[1], rgb[2]);
    }
    sb_printf(s, "</linearGradient></defs>\n");
    sb_printf(s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#cb)\" stroke=\"#000\"/>\n", L->cbx,
              L->cby, L->cbw, L->cbh);
    double vs = nice_step(2.0 * L->vmax, 4);
    for (double v = -floor(L->vmax / vs) * vs; v <= L->vmax + 1e-12; v += vs) {
        char lab[32];
        double y = L->cby + L->cbh * (0.5 - 0.5 * v / L->vmax);
        plot_tick_label(v, vs, lab, sizeof lab);
        sb_text(s, L->cbx + L->cbw + 5, y + 4, 12, "start", NULL, lab);
    }
    sb_printf(s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"14\" fill=\"#%02x%02x%02x\" stroke=\"#000\"/>\n",
              L->cbx, L->cby + L->cbh + 12, L->cbw, plot_masked_rgb[0], plot_masked_rgb[1], plot_masked_rgb[2]);
    sb_text(s, L->cbx + L->cbw + 5, L->cby + L->cbh + 24, 12, "start", NULL, "masked");
}

static void svg_curve(sbuf *s, const plot_data *pd, const plot_layout *L)
{
#define PX(x) (L->cx + ((x) - L->xlo) / (L->xhi - L->xlo) * L->cw)
#define PY(y) (L->cy + L->ch - ((y) - L->ylo) / (L->yhi - L->ylo) * L->ch)
    sb_text(s, L->cx + L->cw / 2.0, L->cy - 12, 15, "middle", NULL, pd->curve_title);
    for (double y = L->ylo; y <= L->yhi + 1e-9 * L->ystep; y += L->ystep) {
        char lab[32];
        plot_tick_label(y, L->ystep, lab, sizeof lab);
        sb_printf(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n", L->cx, PY(y),
                  L->cx + L->cw, PY(y), fabs(y) < 1e-9 * L->ystep ? "#888" : "#e4e4e4");
        sb_text(s, L->cx - 8, PY(y) + 4, 12, "end", NULL, lab);
    }
    for (double x = L->xlo; x <= L->xhi + 1e-9; x += L->xstep) {
        char lab[32];
        plot_tick_label(x, L->xstep, lab, sizeof lab);
        sb_printf(s, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>\n", PX(x), L->cy, PX(x),
                  L->cy + L->ch);
        sb_text(s, PX(x), L->cy + L->ch + 19, 12, "middle", NULL, lab);
    }
    sb_printf(s, "<polyline fill=\"none\" stroke=\"#b40426\" stroke-width=\"1.5\" points=\"");
    for (int64_t i = 0; i < pd->npts; i++)
        if (isfinite(pd->curve[i]))
            sb_printf(s, "%.1f,%.1f ", PX((double)i), PY(pd->curve[i]));
    sb_printf(s, "\"/>\n");
    sb_printf(s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#000\"/>\n", L->cx, L->cy,
              L->cw, L->ch);
    sb_text(s, L->cx + L->cw / 2.0, L->cy + L->ch + 40, 13, "middle", NULL, pd->curve_xlabel);
    char tr[96];
    snprintf(tr, sizeof tr, " transform=\"rotate(-90 %d %d)\"", L->cx - 60, L->cy + L->ch / 2);
    sb_text(s, L->cx - 60, L->cy + L->ch / 2, 13, "middle", tr, pd->curve_ylabel);
#undef PX
#undef PY
}

static int write_svg(const char *path, const plot_data *pd, char *err, size_t errlen)
{
    plot_layout L;
    if (plot_layout_make(pd, 128, 1280, 700, &L) != 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    sbuf s = {0};
    sb_printf(&s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                  "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
                  "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n",
              L.W, L.H, L.W, L.H, L.W, L.H);
    sb_text(&s, L.W / 2.0, 30, 18, "middle", NULL, pd->title);
    svg_heat(&s, pd, &L);
    svg_curve(&s, pd, &L);
    if (pd->note)
        sb_text(&s, L.W / 2.0, L.H - 14, 12, "middle", " fill=\"#444\"", pd->note);
    sb_printf(&s, "</svg>\n");
    plot_layout_free(&L);
    int rc = -1;
    if (s.oom)
        snprintf(err, errlen, "%s: out of memory", path);
    else
        rc = rqs_write_atomic(path, &(rqs_span){s.buf, s.len}, 1, err, errlen);
    free(s.buf);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------- */
static const char *extension(const char *path)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) ? dot : "";
}

int plot_check_path(const char *path, char *err, size_t errlen)
{
    const char *ext = extension(path);
    if (strcasecmp(ext, ".svg") == 0)
        return 0;
    if (strcasecmp(ext, ".png") == 0) {
        if (plot_have_png())
            return 0;
        snprintf(err, errlen, "%s: this ropeqk was built without libpng; write an .svg instead", path);
        return -1;
    }
    snprintf(err, errlen, "%s: unknown picture format '%s' (use .png or .svg)", path, ext);
    return -1;
}

int plot_write(const char *path, const plot_data *pd, char *err, size_t errlen)
{
    if (plot_check_path(path, err, errlen) != 0)
        return -1;
    if (!pd->heat || pd->rows < 1 || pd->cols < 1 || !pd->curve || pd->npts < 1) {
        snprintf(err, errlen, "%s: nothing to plot", path);
        return -1;
    }
    if (strcasecmp(extension(path), ".svg") == 0)
        return write_svg(path, pd, err, errlen);
    return plot_write_png(path, pd, err, errlen);
}
