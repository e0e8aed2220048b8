/* ropeqk-bench --dense-decode (dense_decode.c): dense attention decode with and without the K
 * pre-pass, against the paged decode on the same shape, in one run. */
#ifndef ROPEQK_BENCH_DENSE_DECODE_H
#define ROPEQK_BENCH_DENSE_DECODE_H

#include "benv.h"

#include <stdint.h>

/* len keys (rounded up to a multiple of 16), Sq 1, 2, 4, 8; 0 on success, 3 when outputs differ. */
int bench_dense_decode(benv *e, int64_t len);

#endif
