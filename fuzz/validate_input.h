/* fuzz_validate's input format: bytes -> one ropeqk call (parameters, three descriptors, factor
 * lists, fill bytes). fuzz/make_seeds.py writes the same encoding.
 *
 *   u8   flags: bit0 causal, bit1 conjugate, bit2 q positions array, bit3 k positions array,
 *              bit4 run the reference for real when small, bits5-7 position fill mode
 *   I32  layout, rotary_dim          F64 base, scale          I64 q_pos_offset, k_pos_offset, window
 *   I32  scaling.type                F64 factor               I64 original_max_position, seq_len
 *   F64  beta_fast, beta_slow, attention_factor, low_freq_factor, high_freq_factor
 *   TENSOR q, k, out                 LIST long_factor, short_factor, freq_factors
 *   ...  the rest: bytes cycled to fill Q, K and positions
 *
 *   TENSOR = I32 dtype, I64 ne[4], u8 stride mode (mode % 4: 0 contiguous BHSD, 1 contiguous BSHD,
 *            2 explicit: I64 nb[4], 3 BHSD with one stride replaced: u8 dim, I64 nb)
 *   LIST   = u8 mode (% 4: 0 NULL/0, 1 NULL/I32 n, 2 array/I32 n, 3 array/n = R/2 of q), and for
 *            an array: u8 m, m x F64, cycled to fill its n entries (1.0 when m == 0)
 *
 * I64/I32/F64 are biased toward edge cases: a byte below 0xC0 (0x40 for F64) is the value itself,
 * higher bytes select -1, INT64_MAX, 2^k +- 1, SIZE_MAX / element size, near-overflow strides,
 * NaN, infinities, denormals, raw bytes... (validate_input.c). Reads past the end yield zeros. */
#ifndef FUZZ_VALIDATE_INPUT_H
#define FUZZ_VALIDATE_INPUT_H

#include "ropeqk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                     \
    do {                                                                                                \
        if (!(cond)) {                                                                                  \
            fprintf(stderr, "fuzz_validate: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                                    \
        }                                                                                               \
    } while (0)

/* A factor list longer than this is given one entry (the library must reject it unread). */
#define FV_MAX_LIST 65536

typedef struct {
    ropeqk_params p;       /* p.scaling's lists point into lists[] */
    ropeqk_tensor q, k, o;
    double *lists[3];      /* long, short, freq: malloc'd, owned */
    bool use_qpos, use_kpos, real;
    int pos_mode;          /* 0..7, see fill_pos() in fuzz_validate.c */
    const uint8_t *rest;   /* fill bytes */
    size_t rest_len;
} fv_call;

/* Decodes data into *c. */
void fv_decode(const uint8_t *data, size_t size, fv_call *c);
void fv_free(fv_call *c);
/* The decoded call on stderr, for FUZZ_VERBOSE=1. */
void fv_print(const fv_call *c);

/* An environment variable set to something other than "" or "0". */
bool fv_env_flag(const char *name);

#endif /* FUZZ_VALIDATE_INPUT_H */
