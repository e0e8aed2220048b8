/* ropeqk-bench --paged (paged.c): paged-KV decode over one long sequence, f32 and f16 caches,
 * against a copy kernel over the same bytes. */
#ifndef ROPEQK_BENCH_PAGED_H
#define ROPEQK_BENCH_PAGED_H

#include "benv.h"

#include <stdint.h>

/* One sequence of len tokens; 0 on success. */
int bench_paged(benv *e, int64_t len);

#endif
