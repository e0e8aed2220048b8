/* The colour map of the canvas (canvas_format.h): rqs_cells' values to colours, for both formats
 * and the plots' colour bars. */
#include "canvas_format.h"

#include <math.h>

const rqs_rgb rqs_masked_rgb = {48, 48, 48};

rqs_rgb rqs_color_of(double t)
{
    /* "coolwarm"-like diverging map: blue - light grey - red, linear between five stops */
    static const double stops[5][3] = {
        {59, 76, 192}, {141, 176, 254}, {221, 221, 221}, {244, 154, 123}, {180, 4, 38}};
    if (isnan(t))
        return rqs_masked_rgb;
    double u = (t < -1.0 ? -1.0 : t > 1.0 ? 1.0 : t) * 2.0 + 2.0; /* [0, 4] */
    int i = (int)floor(u);
    if (i > 3)
        i = 3;
    double f = u - i, c[3];
    for (int k = 0; k < 3; k++)
        c[k] = stops[i][k] + f * (stops[i + 1][k] - stops[i][k]);
    return (rqs_rgb){(uint8_t)lround(c[0]), (uint8_t)lround(c[1]), (uint8_t)lround(c[2])};
}
