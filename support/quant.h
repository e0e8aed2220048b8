/* The 8-bit paged caches' quantization rule on the host (docs/conventions.md section 12), step for
 * step the append's (cl/quant.cl), so that tests can compare the device's bytes with these and
 * engines (and the bench) can fill a cache themselves. */
#ifndef ROPEQK_SUPPORT_QUANT_H
#define ROPEQK_SUPPORT_QUANT_H

#include <stdint.h>

#include "ropeqk.h"

/* QMAX: 127 (int8), 448 (e4m3), 57344 (e5m2). */
float rqs_q8_qmax(ropeqk_dtype dt);
/* An 8-bit element as (float)q (the value is that times its row's scale); NaN codes give NaN, e5m2's
 * infinities infinity. */
float rqs_q8_value(uint8_t q, ropeqk_dtype dt);
/* v (x / scale) to its code: round to nearest even, saturating to +-QMAX, fp8 keeping the sign. */
uint8_t rqs_q8_code(float v, ropeqk_dtype dt);
/* A row of n values quantized: the codes into q, the scale returned (0 for a row whose absmax is below
 * 2^-90, NaN for a row holding a NaN or an infinity: q all 0 then). */
float rqs_q8_quantize(const float *x, int64_t n, ropeqk_dtype dt, uint8_t *q);

#endif
