/* The paged KV cache's host side, for every backend (ROPEQK_OP_PAGED_DECODE): validation of a plan's
 * description, and of each call's batch (lengths, page-table rows, positions) while packing it into
 * the one int32 metadata array the kernels read (cl/contract.h, glsl/vk_contract.h). The call checks
 * and the split rule are in paged_call.c. */
#include "call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest sequence a plan may describe (max_pages_per_seq * page_size): keeps every key index and
 * block bound of the kernels far inside int32. */
#define RQ_PAGED_MAX_CAPACITY (INT64_C(1) << 30)

/* The shape checks of the attention validation know no 8-bit dtype: an 8-bit cache view goes through
 * them as an f32 stand-in with every stride times 4, which passes and fails exactly the same
 * alignment, contiguity and aliasing rules (a 1-byte view is always aligned); its true extent is
 * taken from the view itself. */
static ropeqk_status q8_stand_in(const ropeqk_tensor *t, ropeqk_tensor *out)
{
    *out = *t;
    if (!rq_dtype_q8(t->dtype))
        return ROPEQK_SUCCESS;
    out->dtype = ROPEQK_F32;
    for (int i = 0; i < 4; i++)
        if (__builtin_mul_overflow(t->nb[i], INT64_C(4), &out->nb[i]))
            return ROPEQK_ERR_OVERFLOW;
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_paged_validate(const ropeqk_plan_desc *d, rq_problem *pb)
{
    const ropeqk_paged_desc *pg = &d->paged;
    const char *fn = "ropeqk_plan_create (paged decode)";
    if (d->positions != ROPEQK_POS_OFFSETS) {
        rq_set_error("%s: positions come from the batch at enqueue; desc.positions must be ROPEQK_POS_OFFSETS", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (d->params.q_pos_offset != 0 || d->params.k_pos_offset != 0) {
        rq_set_error("%s: params.q_pos_offset and k_pos_offset must be 0 (positions come from the batch)", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->page_size < 16 || pg->page_size > 256) {
        rq_set_error("%s: page_size %lld outside [16, 256]", fn, (long long)pg->page_size);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->max_pages_per_seq < 1 || pg->max_pages_per_seq > RQ_PAGED_MAX_CAPACITY / pg->page_size) {
        rq_set_error("%s: max_pages_per_seq %lld outside [1, %lld] (at most 2^30 tokens per sequence)", fn,
                     (long long)pg->max_pages_per_seq, (long long)(RQ_PAGED_MAX_CAPACITY / pg->page_size));
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->max_seqs < 1 || pg->max_seqs > INT32_MAX) {
        rq_set_error("%s: max_seqs %lld outside [1, INT32_MAX]", fn, (long long)pg->max_seqs);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pg->max_q_rows != 0 && (pg->max_q_rows < pg->max_seqs || pg->max_q_rows > INT32_MAX)) {
        rq_set_error("%s: max_q_rows %lld outside [max_seqs %lld, INT32_MAX] (0: max_seqs, one row each)", fn,
                     (long long)pg->max_q_rows, (long long)pg->max_seqs);
        return ROPEQK_ERR_BAD_PARAM;
    }
    const int64_t max_rows = pg->max_q_rows ? pg->max_q_rows : pg->max_seqs;
    if (d->q.ne[0] != max_rows || d->q.ne[2] != 1) {
        rq_set_error("%s: q must be [max_q_rows, Hq, 1, D] (max_q_rows %lld; q.ne[0] %lld, q.ne[2] %lld)", fn,
                     (long long)max_rows, (long long)d->q.ne[0], (long long)d->q.ne[2]);
        return ROPEQK_ERR_BAD_SHAPE;
    }
    if (d->k.ne[2] != pg->page_size || d->v.ne[2] != pg->page_size) {
        rq_set_error("%s: the caches must be [num_pages, Hkv, page_size, D or Dv]: k.ne[2] %lld, v.ne[2] %lld, "
                     "page_size %lld", fn, (long long)d->k.ne[2], (long long)d->v.ne[2], (long long)pg->page_size);
        return ROPEQK_ERR_BAD_SHAPE;
    }
    /* Q, out, lse and every parameter through the attention validation, against stand-in caches of
     * one sequence's capacity per query row. Per-token positions: DYNAMIC and LONGROPE need an
     * explicit seq_len (positions vary per enqueue). */
    int64_t cap = pg->max_pages_per_seq * pg->page_size;
    ropeqk_dtype kdt = rq_dtype_q8(d->k.dtype) ? ROPEQK_F32 : d->k.dtype;
    ropeqk_dtype vdt = rq_dtype_q8(d->v.dtype) ? ROPEQK_F32 : d->v.dtype;
    ropeqk_tensor ks = ropeqk_tensor_bhsd(kdt, max_rows, d->k.ne[1], cap, d->k.ne[3]);
    ropeqk_tensor vs = ropeqk_tensor_bhsd(vdt, max_rows, d->v.ne[1], cap, d->v.ne[3]);
    rq_problem r;
    ropeqk_status st = rq_validate_attention(&d->params, &d->q, &ks, &vs, &d->out, d->with_lse ? &d->lse : NULL,
                                             false, true, &r);
    if (st) {
        ropeqk_scaling_type t = d->params.scaling.type;
        if (st == ROPEQK_ERR_BAD_SCALING && (t == ROPEQK_SCALING_DYNAMIC || t == ROPEQK_SCALING_LONGROPE) &&
            d->params.scaling.seq_len == 0)
            rq_set_error("%s: DYNAMIC and LONGROPE scaling need scaling.seq_len (positions vary per enqueue)", fn);
        else
            rq_set_error("%s: q, out, lse, the caches' dtypes or head counts, or the parameters: %s", fn,
                         ropeqk_status_string(st));
        return st;
    }
    /* the caches' own views (dtype, strides, aliasing, extent, heads, dims) against a stand-in Q of
     * one row per page */
    ropeqk_tensor qs = ropeqk_tensor_bhsd(d->q.dtype, d->k.ne[0], d->q.ne[1], 1, d->q.ne[3]);
    ropeqk_tensor os = ropeqk_tensor_bhsd(ROPEQK_F32, d->k.ne[0], d->q.ne[1], 1, d->v.ne[3]);
    rq_problem c;
    ropeqk_tensor kc, vc; /* 8-bit caches as f32 stand-ins (q8_stand_in) */
    if ((st = q8_stand_in(&d->k, &kc)) || (st = q8_stand_in(&d->v, &vc)) ||
        (st = rq_validate_attention(&d->params, &qs, &kc, &vc, &os, NULL, false, true, &c)) ||
        (rq_dtype_q8(d->k.dtype) && (st = rq_check_layout(&d->k, true, &c.k_extent))) ||
        (rq_dtype_q8(d->v.dtype) && (st = rq_check_layout(&d->v, true, &c.v_extent)))) {
        rq_set_error("%s: the K or V cache view: %s", fn, ropeqk_status_string(st));
        return st;
    }
    /* M-RoPE rotates each cached key by three positions (t, h, w); the cache carries one, k_pos0 + j */
    if (r.mrope) {
        rq_set_error("%s: M-RoPE needs three positions per cached key, which the paged cache does not carry "
                     "(k_pos0 + j): not supported in paged decode", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    /* the scale buffers of 8-bit caches: num_pages * Hkv * page_size floats */
    size_t scales;
    if ((rq_dtype_q8(d->k.dtype) || rq_dtype_q8(d->v.dtype)) && rq_paged_scale_bytes(&d->k, &scales)) {
        rq_set_error("%s: the scale buffers' size (num_pages * Hkv * page_size floats) overflows", fn);
        return ROPEQK_ERR_OVERFLOW;
    }
    r.k_extent = c.k_extent;
    r.v_extent = c.v_extent;
    *pb = r;
    return ROPEQK_SUCCESS;
}

bool rq_paged_scale_bytes(const ropeqk_tensor *cache, size_t *bytes)
{
    int64_t n;
    return __builtin_mul_overflow(cache->ne[0], cache->ne[1], &n) || __builtin_mul_overflow(n, cache->ne[2], &n) ||
           __builtin_mul_overflow((size_t)n, sizeof(float), bytes);
}

/* A bit per page: whether it was seen (or written) already. */
static bool bit_test_set(unsigned char *bits, int32_t i)
{
    unsigned char m = (unsigned char)(1u << (i & 7));
    bool was = (bits[i >> 3] & m) != 0;
    bits[i >> 3] |= m;
    return was;
}

ropeqk_status rq_paged_build_meta(const ropeqk_plan *pl, const ropeqk_paged_batch *b, int64_t n_new,
                                 const char *fn, rq_paged_meta *m)
{
    memset(m, 0, sizeof *m);
    const ropeqk_paged_desc *pg = &pl->paged;
    const int64_t ps = pg->page_size, cap = pg->max_pages_per_seq * ps, num_pages = pl->k.ne[0];
    const bool decode = n_new < 0;
    if (b->n_seqs < 1 || b->n_seqs > pg->max_seqs) {
        rq_set_error("%s: n_seqs %lld outside [1, %lld]", fn, (long long)b->n_seqs, (long long)pg->max_seqs);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (!b->page_table || !b->seq_lens || (decode && !b->q_pos)) {
        rq_set_error("%s: batch->page_table, seq_lens%s are required", fn, decode ? " and q_pos" : "");
        return ROPEQK_ERR_NULL_POINTER;
    }
    const int64_t n = b->n_seqs;
    int64_t total = 0;
    for (int64_t s = 0; s < n; s++) {
        int64_t len = b->seq_lens[s];
        if (decode ? len < 1 || len > cap : len < 0 || len > cap - n_new) {
            if (decode)
                rq_set_error("%s: sequence %lld: length %lld outside [1, %lld]", fn, (long long)s, (long long)len,
                             (long long)cap);
            else
                rq_set_error("%s: sequence %lld: length %lld + %lld new tokens outside [0, %lld]", fn, (long long)s,
                             (long long)len, (long long)n_new, (long long)cap);
            return ROPEQK_ERR_SEQ_LENGTH;
        }
        if (decode && (b->k_pos0 ? b->k_pos0[s] : 0) + len - 1 > INT32_MAX) {
            rq_set_error("%s: sequence %lld: last key position k_pos0 + %lld - 1 beyond INT32_MAX", fn, (long long)s,
                         (long long)len);
            return ROPEQK_ERR_POSITION_RANGE;
        }
        int64_t np = (len + (decode ? 0 : n_new) + ps - 1) / ps;
        total += np;
        if (np > m->max_pages)
            m->max_pages = np;
    }
    int64_t rows = n;
    ropeqk_status st = decode ? rq_paged_rows(pl, b, fn, &rows) : ROPEQK_SUCCESS;
    if (st)
        return st;
    size_t nints = (size_t)(4 * rows + 1) + (size_t)total;
    if (nints > INT32_MAX) {
        rq_set_error("%s: the batch's page lists exceed 2^31 entries", fn);
        return ROPEQK_ERR_TOO_LARGE;
    }
    size_t nbytes = (size_t)(num_pages + 7) / 8;
    m->v = malloc(nints * sizeof *m->v);
    unsigned char *seen = calloc(nbytes, 1), *written = decode ? NULL : calloc(nbytes, 1);
    if (!m->v || !seen || (!decode && !written)) {
        free(m->v), free(seen), free(written);
        m->v = NULL;
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    m->n = nints;
    m->rows = rows;
    m->lens_off = (int32_t)(rows + 1);
    m->qpos_off = (int32_t)(2 * rows + 1);
    m->kpos_off = (int32_t)(3 * rows + 1);
    m->pages_off = (int32_t)(4 * rows + 1);
    if (decode)
        m->max_pages = 0; /* recounted over the rows' visible keys below */
    int32_t *pages = m->v + m->pages_off;
    int32_t at = 0;
    for (int64_t s = 0; s < n && !st; s++) {
        int64_t len = b->seq_lens[s], np = (len + (decode ? 0 : n_new) + ps - 1) / ps;
        /* pages the append writes: from the one holding token len on */
        int64_t first_written = decode ? np : len / ps;
        const int32_t *row = b->page_table + s * pg->max_pages_per_seq;
        /* the sequence's query rows (a decode: q_indptr's, else one; an append: its entry) */
        int64_t r0 = decode && b->q_indptr ? b->q_indptr[s] : s, r1 = decode && b->q_indptr ? b->q_indptr[s + 1] : s + 1;
        int64_t kp0 = decode && b->k_pos0 ? b->k_pos0[s] : 0;
        for (int64_t r = r0; r < r1; r++) {
            int64_t qp = decode ? (int64_t)b->q_pos[s] + (r - r0) : 0, vis = len;
            /* causal: keys past the row's position are masked; the row reads up to its own (at least
             * one key, which the kernels mask where the row sees none) */
            if (decode && pl->pb.causal && qp - kp0 + 1 < len)
                vis = qp - kp0 + 1 < 1 ? 1 : qp - kp0 + 1;
            m->v[r] = at;
            m->v[m->lens_off + r] = (int32_t)vis;
            m->v[m->qpos_off + r] = (int32_t)qp;
            m->v[m->kpos_off + r] = (int32_t)kp0;
            if (decode && (vis + ps - 1) / ps > m->max_pages)
                m->max_pages = (vis + ps - 1) / ps;
        }
        int64_t i = 0;
        for (; i < np; i++) {
            int32_t e = row[i];
            if (e < 0 || e >= num_pages) {
                rq_set_error("%s: sequence %lld: page-table entry %lld is %d, outside [0, %lld)", fn, (long long)s,
                             (long long)i, (int)e, (long long)num_pages);
                st = ROPEQK_ERR_PAGE_RANGE;
                break;
            }
            if (bit_test_set(seen, e)) {
                rq_set_error("%s: sequence %lld: page %d appears twice in its page-table row", fn, (long long)s,
                             (int)e);
                st = ROPEQK_ERR_PAGE_DUPLICATE;
                break;
            }
            if (i >= first_written && bit_test_set(written, e)) {
                rq_set_error("%s: page %d is written for two sequences", fn, (int)e);
                st = ROPEQK_ERR_PAGE_DUPLICATE;
                break;
            }
            pages[at++] = e;
        }
        for (int64_t k = 0; k < i; k++) /* clear this row's marks for the next sequence */
            seen[row[k] >> 3] &= (unsigned char)~(1u << (row[k] & 7));
    }
    m->v[rows] = at;
    free(seen);
    free(written);
    if (st) {
        free(m->v);
        m->v = NULL;
    }
    return st;
}

