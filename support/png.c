/* PNG encoding of the raster canvas (canvas_raster.c) with libpng, into memory: the file itself is
 * written by canvas.c like any other format (whole or not at all). libpng is optional: without it
 * (ROPEQK_HAVE_PNG unset) rqs_plot_have_png() says so and .png paths are refused up front. */
#include "canvas_format.h"
#include "plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ROPEQK_HAVE_PNG

int rqs_plot_have_png(void) { return 0; }

int rqs_png_encode(const uint8_t *rgb, int W, int H, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    (void)rgb, (void)W, (void)H, (void)data, (void)len;
    snprintf(err, errlen, "built without libpng");
    return -1;
}

#else

#include <png.h>
#include <setjmp.h>

int rqs_plot_have_png(void) { return 1; }

typedef struct {
    unsigned char *buf;
    size_t len, cap;
    int oom;
} membuf;

static void on_write(png_structp png, png_bytep p, png_size_t n)
{
    membuf *m = png_get_io_ptr(png);
    if (m->oom)
        return;
    if (m->len + n > m->cap) {
        size_t cap = (m->cap ? 2 * m->cap : 65536) + n;
        unsigned char *nb = realloc(m->buf, cap);
        if (!nb) {
            m->oom = 1;
            return;
        }
        m->buf = nb;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, p, n);
    m->len += n;
}

static void on_flush(png_structp png) { (void)png; }

int rqs_png_encode(const uint8_t *rgb, int W, int H, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    /* volatile: modified between setjmp and a longjmp from libpng */
    membuf *volatile m = calloc(1, sizeof *m);
    png_structp png = m ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!m || !png || !info) {
        png_destroy_write_struct(&png, info ? &info : NULL);
        free(m);
        snprintf(err, errlen, "libpng: out of memory");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(m->buf);
        free(m);
        snprintf(err, errlen, "libpng: encoding failed");
        return -1;
    }
    png_set_write_fn(png, m, on_write, on_flush);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < H; y++)
        png_write_row(png, (png_const_bytep)(rgb + (size_t)y * W * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    int rc = m->oom ? -1 : 0;
    if (rc)
        snprintf(err, errlen, "out of memory");
    *data = rc ? (free(m->buf), NULL) : m->buf;
    *len = rc ? 0 : m->len;
    free(m);
    return rc;
}

#endif
