/* The fast paged decode's rotation table (both backends: cl/paged_fast.cl through src/opencl/cl_paged_fast.c,
 * glsl/paged_fast.comp through src/vulkan/vk_paged_fast.c): each key of a tile is rotated by
 * R(p) = A_w R(delta), the anchor A_w = R(first key of the tile) R(w dr) formed on the device from the
 * accurate angle of the tile's first position and this table's R(w dr), and R(delta) for the key's
 * offset delta < dr in its sub-tile from this table. The host's fp64 values correctly rounded to f32. */
#include "call.h"

#include <math.h>
#include <stdlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

int rq_pfast_dr(int64_t R, size_t shared_room)
{
    /* 32 keys share an anchor where R <= 128 and the table's 32 x (R/4 + 1) float4 fit; else 16 */
    int dr = R <= 128 ? 32 : 16;
    if (shared_room > 0 && dr == 32 && (size_t)(dr * (R / 4 + 1) * 16) > shared_room)
        dr = 16;
    return dr;
}

float *rq_pfast_table(const float *freq4, int64_t R, int dr, size_t *n)
{
    const int64_t r4 = R / 4, hr = R / 2, nw = RQ_PFAST_TILE / dr;
    const size_t n1 = (size_t)(dr * (r4 + 1) * 4), n2 = (size_t)(nw * hr * 2);
    float *t = calloc(n1 + n2, sizeof *t);
    if (!t)
        return NULL;
    /* pair i's frequency exactly as the device's anchors take it: the three floats' sum (inv/pi, negated
     * for the conjugate), in fp64 */
    double *f = malloc((size_t)hr * sizeof *f);
    if (!f) {
        free(t);
        return NULL;
    }
    for (int64_t i = 0; i < hr; i++)
        f[i] = M_PI * ((double)freq4[4 * i] + (double)freq4[4 * i + 1] + (double)freq4[4 * i + 2]);
    for (int64_t d = 0; d < dr; d++)
        for (int64_t i = 0; i < hr; i++) {
            double a = (double)d * f[i];
            t[(d * (r4 + 1) + i / 2) * 4 + (i % 2) * 2] = (float)cos(a);
            t[(d * (r4 + 1) + i / 2) * 4 + (i % 2) * 2 + 1] = (float)sin(a);
        }
    for (int64_t w = 0; w < nw; w++)
        for (int64_t i = 0; i < hr; i++) {
            double a = (double)(w * dr) * f[i];
            t[n1 + (size_t)(w * hr + i) * 2] = (float)cos(a);
            t[n1 + (size_t)(w * hr + i) * 2 + 1] = (float)sin(a);
        }
    free(f);
    *n = n1 + n2;
    return t;
}
