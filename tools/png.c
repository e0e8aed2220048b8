/* The PNG form of the demo's picture: a small RGB raster (rectangles, lines, 5x7 bitmap text)
 * written with libpng. Without libpng only plot_have_png() remains, returning 0. */
#include "plot.h"

#include <stdio.h>
#include <string.h>

#ifndef ROPEQK_HAVE_PNG

int plot_have_png(void) { return 0; }

int plot_write_png(const char *path, const plot_data *pd, char *err, size_t errlen)
{
    (void)pd;
    snprintf(err, errlen, "%s: this ropeqk was built without libpng", path);
    return -1;
}

#else

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <unistd.h>

int plot_have_png(void) { return 1; }

typedef struct {
    int w, h;
    uint8_t *px; /* RGB, row-major */
} canvas;

static void put(canvas *c, int x, int y, const uint8_t rgb[3])
{
    if (x >= 0 && y >= 0 && x < c->w && y < c->h)
        memcpy(c->px + 3 * ((size_t)y * c->w + x), rgb, 3);
}

static void rect(canvas *c, int x, int y, int w, int h, const uint8_t rgb[3])
{
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++)
            put(c, i, j, rgb);
}

static void frame(canvas *c, int x, int y, int w, int h, const uint8_t rgb[3])
{
    rect(c, x, y, w, 1, rgb);
    rect(c, x, y + h - 1, w, 1, rgb);
    rect(c, x, y, 1, h, rgb);
    rect(c, x + w - 1, y, 1, h, rgb);
}

/* Line of width `t` (a t x t brush). */
static void line(canvas *c, int x0, int y0, int x1, int y1, int t, const uint8_t rgb[3])
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        rect(c, x0 - t / 2, y0 - t / 2, t, t, rgb);
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

#define ADV 6 /* glyph advance in font pixels */

static int text_width(const char *s, int scale) { return s ? (int)strlen(s) * ADV * scale - scale : 0; }

/* Text with its top-left at (x, y); align: 0 left, 1 centre, 2 right. rotated: reads bottom-up,
 * (x, y) is then the centre. */
static void text(canvas *c, int x, int y, const char *s, int scale, int align, int rotated, const uint8_t rgb[3])
{
    if (!s)
        return;
    int w = text_width(s, scale);
    if (!rotated)
        x -= align == 1 ? w / 2 : align == 2 ? w : 0;
    for (int n = 0; s[n]; n++) {
        const uint8_t *g = plot_glyph(s[n]);
        for (int row = 0; row < 9; row++)
            for (int col = 0; col < 5; col++) {
                if (!(g[row] & (0x10 >> col)))
                    continue;
                int gx = n * ADV + col, gy = row;
                if (!rotated)
                    rect(c, x + gx * scale, y + gy * scale, scale, scale, rgb);
                else /* rotate 90 degrees counter-clockwise around (x, y) */
                    rect(c, x - 7 * scale / 2 + gy * scale, y + w / 2 - (gx + 1) * scale, scale, scale, rgb);
            }
    }
}

static const uint8_t black[3] = {0, 0, 0}, grey[3] = {136, 136, 136}, light[3] = {228, 228, 228},
                     white[3] = {255, 255, 255}, red[3] = {180, 4, 38}, dim[3] = {68, 68, 68};

static double nice(double range, int target)
{
    double raw = range / target, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

static void draw_heat(canvas *c, const plot_data *pd, const plot_layout *L)
{
    for (int y = 0; y < L->hs; y++) {
        int a = (int)((int64_t)y * L->gr / L->hs);
        for (int x = 0; x < L->hs; x++) {
            int b = (int)((int64_t)x * L->gc / L->hs);
            uint8_t rgb[3];
            float v = L->cells[(size_t)a * L->gc + b];
            plot_color(isnan(v) ? NAN : v / L->vmax, rgb);
            put(c, L->hx + x, L->hy + y, rgb);
        }
    }
    frame(c, L->hx - 1, L->hy - 1, L->hs + 2, L->hs + 2, black);
    text(c, L->hx + L->hs / 2, L->hy - 26, pd->heat_title, 2, 1, 0, black);
    text(c, L->hx + L->hs / 2, L->hy + L->hs + 30, pd->heat_xlabel, 2, 1, 0, black);
    text(c, L->hx - 58, L->hy + L->hs / 2, pd->heat_ylabel, 2, 1, 1, black);
    char lab[32];
    double step = nice((double)pd->cols, 4);
    for (double v = 0; v < (double)pd->cols; v += step) {
        int x = L->hx + (int)((v + 0.5) / pd->cols * L->hs);
        rect(c, x, L->hy + L->hs + 1, 1, 5, black);
        plot_tick_label(v, step, lab, sizeof lab);
        text(c, x, L->hy + L->hs + 9, lab, 1, 1, 0, black);
    }
    step = nice((double)pd->rows, 4);
    for (double v = 0; v < (double)pd->rows; v += step) {
        int y = L->hy + (int)((v + 0.5) / pd->rows * L->hs);
        rect(c, L->hx - 6, y, 5, 1, black);
        plot_tick_label(v, step, lab, sizeof lab);
        text(c, L->hx - 9, y - 3, lab, 1, 2, 0, black);
    }
    /* colour bar, its labels, and the masked swatch */
    for (int y = 0; y < L->cbh; y++) {
        uint8_t rgb[3];
        plot_color(1.0 - 2.0 * (y + 0.5) / L->cbh, rgb);
        rect(c, L->cbx, L->cby + y, L->cbw, 1, rgb);
    }
    frame(c, L->cbx - 1, L->cby - 1, L->cbw + 2, L->cbh + 2, black);
    double vs = nice(2.0 * L->vmax, 4);
    for (double v = -floor(L->vmax / vs) * vs; v <= L->vmax + 1e-12; v += vs) {
        int y = L->cby + (int)(L->cbh * (0.5 - 0.5 * v / L->vmax));
        rect(c, L->cbx + L->cbw, y, 4, 1, black);
        plot_tick_label(v, vs, lab, sizeof lab);
        text(c, L->cbx + L->cbw + 7, y - 3, lab, 1, 0, 0, black);
    }
    rect(c, L->cbx, L->cby + L->cbh + 12, L->cbw, 14, plot_masked_rgb);
    text(c, L->cbx + L->cbw + 6, L->cby + L->cbh + 16, "masked", 1, 0, 0, black);
}

static void draw_curve(canvas *c, const plot_data *pd, const plot_layout *L)
{
#define PX(x) (L->cx + (int)lround(((x) - L->xlo) / (L->xhi - L->xlo) * (L->cw - 1)))
#define PY(y) (L->cy + L->ch - 1 - (int)lround(((y) - L->ylo) / (L->yhi - L->ylo) * (L->ch - 1)))
    char lab[32];
    for (double y = L->ylo; y <= L->yhi + 1e-9 * L->ystep; y += L->ystep) {
        rect(c, L->cx, PY(y), L->cw, 1, fabs(y) < 1e-9 * L->ystep ? grey : light);
        plot_tick_label(y, L->ystep, lab, sizeof lab);
        text(c, L->cx - 8, PY(y) - 3, lab, 1, 2, 0, black);
    }
    for (double x = L->xlo; x <= L->xhi + 1e-9; x += L->xstep) {
        rect(c, PX(x), L->cy, 1, L->ch, light);
        plot_tick_label(x, L->xstep, lab, sizeof lab);
        text(c, PX(x), L->cy + L->ch + 9, lab, 1, 1, 0, black);
    }
    int px = 0, py = 0, have = 0;
    for (int64_t i = 0; i < pd->npts; i++) {
        if (!isfinite(pd->curve[i])) {
            have = 0;
            continue;
        }
        int x = PX((double)i), y = PY(pd->curve[i]);
        if (have)
            line(c, px, py, x, y, 2, red);
        px = x;
        py = y;
        have = 1;
    }
    frame(c, L->cx - 1, L->cy - 1, L->cw + 2, L->ch + 2, black);
    text(c, L->cx + L->cw / 2, L->cy - 26, pd->curve_title, 2, 1, 0, black);
    text(c, L->cx + L->cw / 2, L->cy + L->ch + 30, pd->curve_xlabel, 2, 1, 0, black);
    text(c, L->cx - 62, L->cy + L->ch / 2, pd->curve_ylabel, 2, 1, 1, black);
#undef PX
#undef PY
}

static int save(const char *tmp, const canvas *c, char *err, size_t errlen)
{
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        fclose(f);
        snprintf(err, errlen, "%s: libpng: out of memory", tmp);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        snprintf(err, errlen, "%s: libpng: write failed", tmp);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++)
        png_write_row(png, c->px + (size_t)y * c->w * 3);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    if (fclose(f) != 0) {
        snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int plot_write_png(const char *path, const plot_data *pd, char *err, size_t errlen)
{
    plot_layout L;
    if (plot_layout_make(pd, 512, 1280, 700, &L) != 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    canvas c = {L.W, L.H, malloc((size_t)L.W * L.H * 3)};
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!c.px || !tmp) {
        free(c.px);
        free(tmp);
        plot_layout_free(&L);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    rect(&c, 0, 0, c.w, c.h, white);
    text(&c, c.w / 2, 14, pd->title, 2, 1, 0, black);
    draw_heat(&c, pd, &L);
    draw_curve(&c, pd, &L);
    if (pd->note)
        text(&c, c.w / 2, c.h - 22, pd->note, 1, 1, 0, dim);
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    int rc = save(tmp, &c, err, errlen);
    if (rc == 0 && rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        remove(tmp);
    free(tmp);
    free(c.px);
    plot_layout_free(&L);
    return rc;
}

#endif
