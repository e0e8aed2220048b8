/* A hand-written SVG bar chart (no dependencies): one group of bars per shape, one bar per
 * implementation, GFLOP/s on a log10 axis (decode and prefill differ by two orders of magnitude). */
#include "bench.h"

#include <math.h>
#include <stdio.h>

static const char *const colors[] = {"#1f77b4", "#aec7e8", "#d62728", "#2ca02c", "#7f7f7f", "#9467bd", "#8c564b"};

int plot_svg(const char *path, int nshapes, const char *const *shape_names, int nimpl,
             const char *const *impl_names, const double *values)
{
    double vmin = INFINITY, vmax = 0.0;
    for (int i = 0; i < nshapes * nimpl; i++)
        if (values[i] > 0) {
            vmin = fmin(vmin, values[i]);
            vmax = fmax(vmax, values[i]);
        }
    if (vmax <= 0)
        vmin = 0.1, vmax = 1.0;
    int lo = (int)floor(log10(vmin)), hi = (int)ceil(log10(vmax));
    if (hi <= lo)
        hi = lo + 1;
    const double left = 70, top = 40, ph = 360, bar = 14, gap = 24;
    double group = nimpl * bar + gap, pw = nshapes * group + gap;
    double W = left + pw + 20, H = top + ph + 150;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' "
               "font-size='11'>\n<rect width='100%%' height='100%%' fill='white'/>\n", W, H);
    fprintf(f, "<text x='%.0f' y='20' font-size='14'>ropeqk-bench: GFLOP/s (log scale, higher is better)</text>\n",
            left);
    for (int e = lo; e <= hi; e++) { /* decade grid lines */
        double y = top + ph - (e - lo) * ph / (hi - lo);
        fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.1f' y2='%.1f' stroke='#ddd'/>\n", left, left + pw, y, y);
        fprintf(f, "<text x='%.0f' y='%.1f' text-anchor='end'>%g</text>\n", left - 6, y + 4, pow(10, e));
    }
    for (int s = 0; s < nshapes; s++) {
        double gx = left + gap + s * group;
        for (int i = 0; i < nimpl; i++) {
            double v = values[s * nimpl + i];
            if (v <= 0)
                continue;
            double h = (log10(v) - lo) * ph / (hi - lo);
            if (h < 1)
                h = 1;
            fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'><title>%s %s: %.2f GFLOP/s"
                       "</title></rect>\n", gx + i * bar, top + ph - h, bar - 2, h, colors[i % 7], shape_names[s],
                    impl_names[i], v);
        }
        double cx = gx + nimpl * bar / 2;
        fprintf(f, "<text transform='translate(%.1f,%.1f) rotate(35)'>%s</text>\n", cx - 20, top + ph + 14,
                shape_names[s]);
    }
    fprintf(f, "<line x1='%.0f' x2='%.0f' y1='%.0f' y2='%.0f' stroke='black'/>\n", left, left + pw, top + ph,
            top + ph);
    for (int i = 0; i < nimpl; i++) { /* legend */
        double x = left + i * 130, y = H - 18;
        fprintf(f, "<rect x='%.0f' y='%.0f' width='12' height='12' fill='%s'/><text x='%.0f' y='%.0f'>%s</text>\n",
                x, y - 10, colors[i % 7], x + 16, y, impl_names[i]);
    }
    fprintf(f, "</svg>\n");
    return fclose(f);
}
