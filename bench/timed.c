/* bench_time_ms (timed.h). */
#include "timed.h"

#include "clock.h"

int bench_time_ms(benv *e, timed_fn fn, void *ctx, int runs, int warmup, double *median, double *best)
{
    double t[64];
    if (runs < 1 || runs > 64)
        return ROPEQK_ERR_BAD_PARAM;
    for (int i = 0; i < warmup + runs; i++) {
        double t0 = rqs_now();
        int err = fn(e, ctx);
        if (err)
            return err;
        clFinish(e->queue);
        if (i >= warmup)
            t[i - warmup] = (rqs_now() - t0) * 1e3;
    }
    rqs_sort(t, (size_t)runs);
    *median = t[runs / 2];
    if (best)
        *best = t[0];
    return 0;
}
