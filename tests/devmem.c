/* Device buffers with NaN canaries and waited-for runs for the tests (devmem.h): ropeqk.h only. */
#include "devmem.h"

#include <stdlib.h>
#include <string.h>

struct dm_buf {
    ropeqk_buffer *buf;
    size_t bytes;  /* payload */
    size_t padded; /* payload rounded up to whole words */
    size_t lead;   /* canary bytes before (and after) the payload: 0 or DM_CANARY_BYTES */
    size_t total;  /* lead + padded + lead */
};

ropeqk_status dm_create(ropeqk_ctx *ctx, size_t bytes, const void *init, bool canaries, dm_buf **out)
{
    if (!out || !ctx)
        return ROPEQK_ERR_NULL_POINTER;
    *out = NULL;
    if (bytes == 0)
        return ROPEQK_ERR_BAD_SHAPE;
    if (bytes > SIZE_MAX / 2 - 2 * DM_CANARY_BYTES)
        return ROPEQK_ERR_OVERFLOW;
    dm_buf *b = calloc(1, sizeof *b);
    if (!b)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    b->bytes = bytes;
    b->padded = (bytes + 3) / 4 * 4;
    b->lead = canaries ? DM_CANARY_BYTES : 0;
    b->total = b->padded + 2 * b->lead;
    /* the canary word everywhere, then the payload over it */
    ropeqk_status st = rqs_buffer_make(ctx, b->total, NULL, ROPEQK_BUFFER_HOST_VISIBLE, &b->buf);
    if (!st && init)
        st = ropeqk_buffer_write(b->buf, b->lead, init, bytes);
    if (st) {
        dm_free(b);
        return st;
    }
    *out = b;
    return ROPEQK_SUCCESS;
}

void dm_free(dm_buf *b)
{
    if (!b)
        return;
    ropeqk_buffer_destroy(b->buf);
    free(b);
}

size_t dm_bytes(const dm_buf *b) { return b ? b->bytes : 0; }
ropeqk_buffer *dm_buffer(const dm_buf *b) { return b ? b->buf : NULL; }

ropeqk_mem dm_at(const dm_buf *b, size_t offset)
{
    ropeqk_mem m = {b ? b->buf : NULL, b ? b->lead + offset : 0};
    return m;
}

ropeqk_status dm_write(dm_buf *b, size_t offset, const void *src, size_t n)
{
    if (!b || (!src && n))
        return ROPEQK_ERR_NULL_POINTER;
    if (offset > b->bytes || n > b->bytes - offset)
        return ROPEQK_ERR_BUFFER_TOO_SMALL;
    return ropeqk_buffer_write(b->buf, b->lead + offset, src, n);
}

ropeqk_status dm_fill(dm_buf *b, unsigned char byte)
{
    if (!b)
        return ROPEQK_ERR_NULL_POINTER;
    return ropeqk_buffer_fill(b->buf, b->lead, b->padded, byte * 0x01010101u);
}

ropeqk_status dm_read_part(const dm_buf *b, size_t offset, size_t n, void *dst)
{
    if (!b || (!dst && n))
        return ROPEQK_ERR_NULL_POINTER;
    if (offset > b->bytes || n > b->bytes - offset)
        return ROPEQK_ERR_BUFFER_TOO_SMALL;
    return ropeqk_buffer_read(b->buf, b->lead + offset, dst, n);
}

ropeqk_status dm_read(const dm_buf *b, void *dst) { return dm_read_part(b, 0, b ? b->bytes : 0, dst); }

ropeqk_status dm_check(const dm_buf *b, const void *expect, bool *intact)
{
    if (!b || !intact)
        return ROPEQK_ERR_NULL_POINTER;
    *intact = false;
    unsigned char *all = malloc(b->total);
    if (!all)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    ropeqk_status st = ropeqk_buffer_read(b->buf, 0, all, b->total);
    if (!st) {
        const uint32_t word = DM_CANARY_WORD;
        bool ok = true;
        for (size_t i = 0; i < b->lead && ok; i += 4)
            ok = memcmp(all + i, &word, 4) == 0 && memcmp(all + b->lead + b->padded + i, &word, 4) == 0;
        if (ok && expect)
            ok = memcmp(all + b->lead, expect, b->bytes) == 0;
        *intact = ok;
    }
    free(all);
    return st;
}

ropeqk_status dm_scores_oneshot(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q,
                                const ropeqk_tensor *k, const ropeqk_tensor *out, const ropeqk_args *a)
{
    if (!ctx || !p || !q || !k || !out || !a)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_plan_desc d;
    memset(&d, 0, sizeof d);
    d.op = ROPEQK_OP_SCORES, d.params = *p, d.q = *q, d.k = *k, d.out = *out;
    d.positions = a->q_pos.buf || a->k_pos.buf ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS;
    ropeqk_plan *plan = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &plan);
    if (!st)
        st = rqs_plan_run_wait(plan, a, NULL);
    ropeqk_plan_destroy(plan);
    return st;
}
