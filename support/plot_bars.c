/* The bench's chart (plot.h): groups of bars, one group per shape and one bar per implementation,
 * on a log10 axis (decode and prefill figures differ by two orders of magnitude), with a legend;
 * laid out once on the canvas (canvas.h) for both formats. */
#include "canvas.h"
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const rqs_rgb palette[] = {{0x1f, 0x77, 0xb4}, {0xae, 0xc7, 0xe8}, {0xd6, 0x27, 0x28}, {0x2c, 0xa0, 0x2c},
                                  {0x7f, 0x7f, 0x7f}, {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b}};
#define NPAL (int)(sizeof palette / sizeof palette[0])
static const rqs_rgb black = {0, 0, 0}, grid_rgb = {0xdd, 0xdd, 0xdd};

static int has_bar(double v) { return v > 0 && isfinite(v); }

int rqs_plot_bars(const char *path, const rqs_bar_plot *bp, char *err, size_t errlen)
{
    double vmin = INFINITY, vmax = 0.0;
    for (int i = 0; i < bp->ngroups * bp->nseries; i++)
        if (has_bar(bp->values[i]))
            vmin = fmin(vmin, bp->values[i]), vmax = fmax(vmax, bp->values[i]);
    if (vmax <= 0)
        vmin = 0.1, vmax = 1.0;
    int lo = (int)floor(log10(vmin)), hi = (int)ceil(log10(vmax)); /* whole decades */
    if (hi <= lo)
        hi = lo + 1;
    const double left = 70, top = 40, ph = 360, bar = 14, gap = 24, legend = 150;
    double group = bp->nseries * bar + gap, pw = bp->ngroups * group + gap;
    size_t longest = 0; /* group names hang below the axis at 35 degrees, about 6 px a character */
    for (int g = 0; g < bp->ngroups; g++)
        longest = bp->groups[g] && strlen(bp->groups[g]) > longest ? strlen(bp->groups[g]) : longest;
    double W = fmax(left + pw, left + bp->nseries * legend) + 20;
    double H = top + ph + 14 + fmax(100.0, 6.0 * sin(35 * 3.14159265358979323846 / 180) * (double)longest) + 40;
    rqs_canvas *cv = rqs_canvas_open(path, (int)ceil(W), (int)H, err, errlen);
    if (!cv)
        return -1;
    rqs_text(cv, left, 20, 14, RQS_ANCHOR_START, 0, black, bp->title);
    char lab[160];
    for (int e = lo; e <= hi; e++) { /* decade grid lines */
        double y = top + ph - (e - lo) * ph / (hi - lo);
        rqs_line(cv, left, y, left + pw, y, grid_rgb, 1);
        snprintf(lab, sizeof lab, "%g", pow(10, e));
        rqs_text(cv, left - 6, y + 4, 11, RQS_ANCHOR_END, 0, black, lab);
    }
    for (int g = 0; g < bp->ngroups; g++) {
        double gx = left + gap + g * group;
        for (int i = 0; i < bp->nseries; i++) {
            double v = bp->values[g * bp->nseries + i];
            if (!has_bar(v))
                continue;
            double h = fmax((log10(v) - lo) * ph / (hi - lo), 1.0);
            snprintf(lab, sizeof lab, "%s %s: %.2f %s", bp->groups[g], bp->series[i], v, bp->unit ? bp->unit : "");
            rqs_rect(cv, gx + i * bar, top + ph - h, bar - 2, h, &palette[i % NPAL], NULL, lab);
        }
        rqs_text(cv, gx + bp->nseries * bar / 2 - 20, top + ph + 14, 11, RQS_ANCHOR_START, 35, black, bp->groups[g]);
    }
    rqs_line(cv, left, top + ph, left + pw, top + ph, black, 1);
    for (int i = 0; i < bp->nseries; i++) { /* legend */
        double x = left + i * legend, y = H - 18;
        rqs_rect(cv, x, y - 10, 12, 12, &palette[i % NPAL], NULL, NULL);
        rqs_text(cv, x + 16, y, 11, RQS_ANCHOR_START, 0, black, bp->series[i]);
    }
    return rqs_canvas_finish(cv, path, err, errlen);
}
