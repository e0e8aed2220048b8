/* Device buffers with NaN canaries for the tests, on ropeqk.h's neutral API only (ropeqk_buffer_*),
 * the same code on every backend; runs waited for: support/runwait.h (included).
 *
 * A dm_buf is one ropeqk_buffer (host-visible) of payload + 2 * DM_CANARY_BYTES when it has
 * canaries: the quiet-NaN word DM_CANARY_WORD before and after the payload (which is rounded up to
 * whole words), so a stray read that reaches a result shows as NaN and a stray write as a changed
 * canary (dm_check). Runs view the payload at the canary's offset (dm_whole, dm_at). Messages:
 * ropeqk_last_error(). */
#ifndef ROPEQK_TEST_DEVMEM_H
#define ROPEQK_TEST_DEVMEM_H

#include "ropeqk.h"
#include "runwait.h"

#include <stdbool.h>
#include <stddef.h>

#define DM_CANARY_BYTES 256
#define DM_CANARY_WORD RQS_NAN_WORD /* a quiet NaN as f32 (a score or output read from it is NaN) */

typedef struct dm_buf dm_buf;

/* A buffer of `bytes` payload bytes (>= 1) on ctx's device, with canaries when `canaries` is set.
 * The payload starts as a copy of init, or (init NULL) holds the canary word. */
ropeqk_status dm_create(ropeqk_ctx *ctx, size_t bytes, const void *init, bool canaries, dm_buf **out);
void dm_free(dm_buf *b); /* NULL-safe; no run may be using it */
size_t dm_bytes(const dm_buf *b);
/* The ropeqk_buffer underneath (canaries included), for tests of the buffer calls themselves. */
ropeqk_buffer *dm_buffer(const dm_buf *b);
/* Writes n bytes at byte `offset` of the payload. */
ropeqk_status dm_write(dm_buf *b, size_t offset, const void *src, size_t n);
/* Sets every payload byte to `byte` (the padding to the next word too). */
ropeqk_status dm_fill(dm_buf *b, unsigned char byte);
/* Copies the whole payload, or n bytes of it from `offset`, to dst. */
ropeqk_status dm_read(const dm_buf *b, void *dst);
ropeqk_status dm_read_part(const dm_buf *b, size_t offset, size_t n, void *dst);
/* *intact: the canaries still hold DM_CANARY_WORD (true without canaries) and, expect non-NULL, the
 * payload equals expect byte for byte. */
ropeqk_status dm_check(const dm_buf *b, const void *expect, bool *intact);

/* The payload from `offset` bytes on, as a run's view; b NULL: absent ({NULL, 0}). */
ropeqk_mem dm_at(const dm_buf *b, size_t offset);
static inline ropeqk_mem dm_whole(const dm_buf *b) { return dm_at(b, 0); }

/* A fixed scores plan made, run once and destroyed; positions present in `a` make it a
 * ROPEQK_POS_ARRAYS plan. */
ropeqk_status dm_scores_oneshot(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q,
                                const ropeqk_tensor *k, const ropeqk_tensor *out, const ropeqk_args *a);

#endif
