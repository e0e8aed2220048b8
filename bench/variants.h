/* ropeqk-bench --variants (variants.c): the cost of each model-family variant (docs/conventions.md
 * section 11) over plain attention on the same shape, in the same run. */
#ifndef ROPEQK_BENCH_VARIANTS_H
#define ROPEQK_BENCH_VARIANTS_H

#include "benv.h"

/* runs timed rounds (every variant of a shape once per round, after 2 warm-up rounds), medians;
 * shape_filter: shapes whose name contains it only (NULL: all). 0 on success. */
int bench_variants(benv *e, int runs, const char *shape_filter);

#endif
