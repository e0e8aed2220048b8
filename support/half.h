/* f16 and bf16 storage conversions for tools, tests, bench and fuzzers (the one copy outside the
 * library; libropeqk keeps its own, src/core/tensor.c). Round to nearest even; NaN stays NaN. */
#ifndef RQS_HALF_H
#define RQS_HALF_H

#include <stdint.h>

float rqs_half_to_float(uint16_t h);
uint16_t rqs_float_to_half(float f);
float rqs_bf16_to_float(uint16_t b);
uint16_t rqs_float_to_bf16(float f);

#endif
