/* The paged calls' front end for every backend (call.h): what a decode or an append checks before
 * anything is enqueued or recorded, and how a decode is split over the pages. */
#include "call.h"

#include <stdlib.h>
#include <string.h>

size_t rq_rows_extent(const ropeqk_tensor *t, int64_t n)
{
    ropeqk_tensor c = *t;
    c.ne[0] = n;
    return ropeqk_tensor_extent(&c);
}

static ropeqk_status paged_plan(const ropeqk_plan *pl, const char *fn)
{
    if (pl->op != ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("%s: the plan is not a paged-decode plan", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    return ROPEQK_SUCCESS;
}

/* The scale buffers of 8-bit caches (docs/conventions.md section 12), presence only: required
 * exactly for an 8-bit cache (a scale buffer beside a 16/32-bit cache is a caller's mix-up, not
 * something to ignore). */
static ropeqk_status scales_present(const ropeqk_plan *pl, const rq_mem *ks, const rq_mem *vs, const char *fn)
{
    const rq_mem *m[2] = {ks, vs};
    const ropeqk_tensor *t[2] = {&pl->k, &pl->v};
    static const char *const name[2] = {"k_scale", "v_scale"}, *const cache[2] = {"K", "V"};
    for (int i = 0; i < 2; i++) {
        bool q8 = rq_dtype_q8(t[i]->dtype);
        if (q8 && !m[i]->id) {
            rq_set_error("%s: the %s cache is 8-bit: its %s buffer is required", fn, cache[i], name[i]);
            return ROPEQK_ERR_NULL_POINTER;
        }
        if (!q8 && m[i]->id) {
            rq_set_error("%s: a %s buffer given for a 16/32-bit %s cache (scales go with 8-bit caches only)", fn,
                         name[i], cache[i]);
            return ROPEQK_ERR_BAD_PARAM;
        }
    }
    return ROPEQK_SUCCESS;
}

/* The scale buffers' views: f32-aligned, num_pages * Hkv * page_size floats (*rk / *rv: id 0 for a
 * cache without scales). */
static ropeqk_status scales_fit(const ropeqk_plan *pl, const rq_mem *ks, const rq_mem *vs, const char *fn,
                                rq_range *rk, rq_range *rv)
{
    const rq_mem *m[2] = {ks, vs};
    const ropeqk_tensor *t[2] = {&pl->k, &pl->v};
    rq_range *r[2] = {rk, rv};
    static const char *const name[2] = {"k_scale", "v_scale"};
    for (int i = 0; i < 2; i++) {
        size_t bytes = 0;
        *r[i] = (rq_range){0, 0, 0};
        if (!rq_dtype_q8(t[i]->dtype))
            continue;
        (void)rq_paged_scale_bytes(t[i], &bytes); /* no overflow: checked at plan creation */
        ropeqk_status st = rq_check_mem(pl->ctx->be, m[i], sizeof(float), bytes, fn, name[i], r[i]);
        if (st)
            return st;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_paged_call_check(const ropeqk_plan *pl, const rq_paged_mems *m, const ropeqk_paged_batch *batch,
                                  const char *fn, rq_paged_meta *meta)
{
    const rq_backend *be = pl->ctx->be;
    const rq_problem *pb = &pl->pb;
    meta->v = NULL;
    ropeqk_status st = paged_plan(pl, fn);
    if (st)
        return st;
    if (!m->q.id || !m->k_cache.id || !m->v_cache.id || !m->out.id || (pl->with_lse && !m->lse.id)) {
        rq_set_error("%s: q, k_cache, v_cache, out%s buffers are required", fn, pl->with_lse ? " and lse" : "");
        return ROPEQK_ERR_NULL_POINTER;
    }
    if (!pl->with_lse && m->lse.id) {
        rq_set_error("%s: an lse buffer given to a plan made without with_lse", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if ((st = scales_present(pl, &m->k_scale, &m->v_scale, fn)))
        return st;
    if ((st = rq_paged_build_meta(pl, batch, -1, fn, meta)))
        return st;
    const int64_t n = meta->rows; /* q, out and lse hold a row per query row */
    rq_range rq = {0, 0, 0}, rk = rq, rv = rq, ro = rq, rl = rq, rks = rq, rvs = rq;
    if ((st = rq_check_mem(be, &m->q, ropeqk_dtype_size(pl->q.dtype), rq_rows_extent(&pl->q, n), fn, "q", &rq)) ||
        (st = rq_check_mem(be, &m->k_cache, ropeqk_dtype_size(pl->k.dtype), pb->k_extent, fn, "k_cache", &rk)) ||
        (st = rq_check_mem(be, &m->v_cache, ropeqk_dtype_size(pl->v.dtype), pb->v_extent, fn, "v_cache", &rv)) ||
        (st = rq_check_mem(be, &m->out, ropeqk_dtype_size(pl->out.dtype), rq_rows_extent(&pl->out, n), fn, "out",
                           &ro)) ||
        (pl->with_lse && (st = rq_check_mem(be, &m->lse, 4, rq_rows_extent(&pl->lse, n), fn, "lse", &rl))) ||
        (st = scales_fit(pl, &m->k_scale, &m->v_scale, fn, &rks, &rvs)))
        goto fail;
    const rq_range *outs[2] = {&ro, &rl}, *ins[5] = {&rq, &rk, &rv, &rks, &rvs};
    if (rq_outputs_overlap(outs, 2, ins, 5)) {
        rq_set_error("%s: out or lse overlaps an input or each other in the same buffer", fn);
        st = ROPEQK_ERR_OVERLAP;
        goto fail;
    }
    return ROPEQK_SUCCESS;
fail:
    free(meta->v);
    meta->v = NULL;
    return st;
}

/* k_new [n_seqs, Hkv, n_new, D], v_new [n_seqs, Hkv, n_new, Dv], of the caches' dtypes: their view
 * rules through the attention validation, with a stand-in Q (one row per entry) and output; *c gets
 * their extents. */
static ropeqk_status check_new_rows(const ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                    const ropeqk_paged_batch *batch, const char *fn, rq_problem *c)
{
    const rq_problem *pb = &pl->pb;
    /* an 8-bit cache is written from unquantized rows (any of f32/f16/bf16: the view checks below
     * refuse the rest), which the append quantizes */
    if ((!rq_dtype_q8(pl->k.dtype) && k_new->dtype != pl->k.dtype) ||
        (!rq_dtype_q8(pl->v.dtype) && v_new->dtype != pl->v.dtype)) {
        rq_set_error("%s: k_new and v_new must have the caches' dtypes (f32, f16 or bf16 for an 8-bit cache)", fn);
        return ROPEQK_ERR_BAD_DTYPE;
    }
    ropeqk_tensor qs = ropeqk_tensor_bhsd(ROPEQK_F32, k_new->ne[0], k_new->ne[1], 1, k_new->ne[3]);
    ropeqk_tensor os = ropeqk_tensor_bhsd(ROPEQK_F32, k_new->ne[0], k_new->ne[1], 1, v_new->ne[3]);
    ropeqk_params p;
    ropeqk_default_params(&p);
    ropeqk_status st = rq_validate_attention(&p, &qs, k_new, v_new, &os, NULL, false, false, c);
    if (st) {
        rq_set_error("%s: the k_new or v_new view: %s", fn, ropeqk_status_string(st));
        return st;
    }
    if (k_new->ne[0] != batch->n_seqs || k_new->ne[1] != pb->Hkv || k_new->ne[3] != pb->D || v_new->ne[3] != pb->Dv) {
        rq_set_error("%s: k_new must be [n_seqs, Hkv, n_new, D] and v_new [n_seqs, Hkv, n_new, Dv]", fn);
        return ROPEQK_ERR_BAD_SHAPE;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_append_call_check(const ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                   const rq_append_mems *m, const ropeqk_paged_batch *batch, const char *fn,
                                   rq_paged_meta *meta)
{
    const rq_backend *be = pl->ctx->be;
    const rq_problem *pb = &pl->pb;
    meta->v = NULL;
    ropeqk_status st = paged_plan(pl, fn);
    if (st)
        return st;
    if (!m->k_new.id || !m->v_new.id || !m->k_cache.id || !m->v_cache.id) {
        rq_set_error("%s: k_new, v_new, k_cache and v_cache buffers are required", fn);
        return ROPEQK_ERR_NULL_POINTER;
    }
    if ((st = scales_present(pl, &m->k_scale, &m->v_scale, fn)))
        return st;
    rq_problem c;
    if ((st = check_new_rows(pl, k_new, v_new, batch, fn, &c)) ||
        (st = rq_paged_build_meta(pl, batch, k_new->ne[2], fn, meta)))
        return st;
    size_t kes = ropeqk_dtype_size(pl->k.dtype), ves = ropeqk_dtype_size(pl->v.dtype);
    rq_range rkn = {0, 0, 0}, rvn = rkn, rk = rkn, rv = rkn, rks = rkn, rvs = rkn;
    if ((st = rq_check_mem(be, &m->k_new, ropeqk_dtype_size(k_new->dtype), c.k_extent, fn, "k_new", &rkn)) ||
        (st = rq_check_mem(be, &m->v_new, ropeqk_dtype_size(v_new->dtype), c.v_extent, fn, "v_new", &rvn)) ||
        (st = rq_check_mem(be, &m->k_cache, kes, pb->k_extent, fn, "k_cache", &rk)) ||
        (st = rq_check_mem(be, &m->v_cache, ves, pb->v_extent, fn, "v_cache", &rv)) ||
        (st = scales_fit(pl, &m->k_scale, &m->v_scale, fn, &rks, &rvs)))
        goto fail;
    const rq_range *caches[] = {&rk, &rv, &rks, &rvs}, *news[] = {&rkn, &rvn};
    if (rq_outputs_overlap(caches, 4, news, 2)) {
        rq_set_error("%s: the caches (or their scales) overlap each other or the new rows in the same buffer", fn);
        st = ROPEQK_ERR_OVERLAP;
        goto fail;
    }
    bool q8 = rq_dtype_q8(pl->k.dtype) || rq_dtype_q8(pl->v.dtype); /* quantized: a row per work-item */
    if (batch->n_seqs * pb->Hkv > INT32_MAX || k_new->ne[2] > INT32_MAX ||
        (q8 && batch->n_seqs * pb->Hkv * k_new->ne[2] > INT32_MAX)) {
        rq_set_error("%s: n_seqs * Hkv, n_new (or, 8-bit caches, their product) beyond INT32_MAX", fn);
        st = ROPEQK_ERR_TOO_LARGE;
        goto fail;
    }
    return ROPEQK_SUCCESS;
fail:
    free(meta->v);
    meta->v = NULL;
    return st;
}

int64_t rq_paged_pages_per_split(int64_t target, int64_t tasks, int64_t longest_pages, int64_t page_size,
                                 int64_t min_keys, int64_t max_pages)
{
    int64_t want = (target + tasks - 1) / tasks, min_pages = (min_keys + page_size - 1) / page_size;
    int64_t pps = (longest_pages + want - 1) / want;
    if (pps < min_pages)
        pps = min_pages;
    if (max_pages > 0 && pps > max_pages)
        pps = max_pages;
    return pps < 1 ? 1 : pps;
}

int64_t rq_paged_chunk_rows(const ropeqk_plan *pl) { return pl->ctx->tune.chunk_rows; }

int64_t rq_paged_seq_rows(const ropeqk_paged_batch *b, int64_t s)
{
    return b->q_indptr ? (int64_t)b->q_indptr[s + 1] - b->q_indptr[s] : 1;
}

bool rq_paged_decode_run(const ropeqk_plan *pl, const ropeqk_paged_batch *b, int64_t *s, int64_t *r0, int64_t *r1)
{
    const int64_t cr = rq_paged_chunk_rows(pl);
    while (*s < b->n_seqs && rq_paged_seq_rows(b, *s) >= cr)
        (*s)++;
    if (*s >= b->n_seqs)
        return false;
    int64_t s0 = *s;
    while (*s < b->n_seqs && rq_paged_seq_rows(b, *s) < cr)
        (*s)++;
    *r0 = b->q_indptr ? b->q_indptr[s0] : s0;
    *r1 = b->q_indptr ? b->q_indptr[*s] : *s;
    return true;
}

ropeqk_status rq_paged_meta_rows(const rq_paged_meta *m, int64_t r0, int64_t r1, int64_t page_size,
                                 rq_paged_meta *sub)
{
    const int64_t n = r1 - r0, p0 = m->v[r0], np = m->v[r1] - p0;
    memset(sub, 0, sizeof *sub);
    sub->n = (size_t)(4 * n + 1 + np);
    if (!(sub->v = malloc(sub->n * sizeof *sub->v)))
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    sub->rows = n;
    sub->lens_off = (int32_t)(n + 1), sub->qpos_off = (int32_t)(2 * n + 1), sub->kpos_off = (int32_t)(3 * n + 1);
    sub->pages_off = (int32_t)(4 * n + 1);
    for (int64_t r = 0; r <= n; r++)
        sub->v[r] = m->v[r0 + r] - (int32_t)p0;
    for (int64_t r = 0; r < n; r++) {
        sub->v[sub->lens_off + r] = m->v[m->lens_off + r0 + r];
        sub->v[sub->qpos_off + r] = m->v[m->qpos_off + r0 + r];
        sub->v[sub->kpos_off + r] = m->v[m->kpos_off + r0 + r];
        int64_t pages = (sub->v[sub->lens_off + r] + page_size - 1) / page_size;
        if (pages > sub->max_pages)
            sub->max_pages = pages;
    }
    memcpy(sub->v + sub->pages_off, m->v + m->pages_off + p0, (size_t)np * sizeof *sub->v);
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_paged_meta_groups(rq_paged_meta *m, int64_t max_rows)
{
    int64_t ng = 0;
    for (int64_t r = 0, in = 0; r < m->rows; r++) { /* count first */
        bool same = r > 0 && in < max_rows && m->v[r] == m->v[r - 1] &&
                    m->v[m->kpos_off + r] == m->v[m->kpos_off + r - 1];
        in = same ? in + 1 : 1;
        ng += !same;
    }
    if (m->n + (size_t)ng + 1 > INT32_MAX)
        return ROPEQK_ERR_TOO_LARGE;
    int32_t *v = realloc(m->v, (m->n + (size_t)ng + 1) * sizeof *v);
    if (!v)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    m->v = v;
    m->groups_off = (int32_t)m->n;
    m->group_rows = 0;
    int32_t *g = v + m->n;
    int64_t k = 0, in = 0;
    for (int64_t r = 0; r < m->rows; r++) {
        bool same = r > 0 && in < max_rows && v[r] == v[r - 1] && v[m->kpos_off + r] == v[m->kpos_off + r - 1];
        in = same ? in + 1 : 1;
        if (!same)
            g[k++] = (int32_t)r;
        if (in > m->group_rows)
            m->group_rows = in;
    }
    g[k] = (int32_t)m->rows;
    m->ngroups = ng;
    m->n += (size_t)ng + 1;
    return ROPEQK_SUCCESS;
}

int64_t rq_paged_chunk_mark(const ropeqk_plan *pl, const ropeqk_paged_batch *b, rq_paged_meta *meta)
{
    int64_t n = 0;
    if (!pl->chunk || !b->q_indptr)
        return 0;
    meta->max_pages = 0;
    for (int64_t s = 0; s < b->n_seqs; s++) {
        bool chunk = rq_paged_seq_rows(b, s) >= rq_paged_chunk_rows(pl);
        n += chunk;
        for (int64_t r = b->q_indptr[s]; r < b->q_indptr[s + 1]; r++) {
            if (chunk) /* a placeholder row of one key for the decode kernels; overwritten after them */
                meta->v[meta->lens_off + r] = 1;
            int64_t np = (meta->v[meta->lens_off + r] + pl->paged.page_size - 1) / pl->paged.page_size;
            if (np > meta->max_pages)
                meta->max_pages = np;
        }
    }
    return n;
}
