/* The call front end of scores and attention runs, for every backend (call.h): steps, views against
 * their buffers, overlaps. Nothing here knows what a buffer is beyond its {id, offset, end}. */
#include "call.h"

#include <stdio.h>

uint64_t rq_view_bytes(const rq_backend *be, uint64_t off, size_t es, size_t extent)
{
    uint64_t u = be->access_unit;
    if (u <= 1 || es >= u || extent == 0)
        return extent;
    return (off % u + extent + u - 1) / u * u - off % u;
}

ropeqk_status rq_check_mem(const rq_backend *be, const rq_mem *m, size_t es, size_t extent, const char *fn,
                           const char *what, rq_range *r)
{
    if (m->off % es != 0) {
        rq_set_error("%s: %s: offset %llu is not a multiple of the element size %zu", fn, what,
                     (unsigned long long)m->off, es);
        return ROPEQK_ERR_BAD_STRIDES;
    }
    uint64_t need = rq_view_bytes(be, m->off, es, extent);
    if (m->off > m->end || need > m->end - m->off) {
        rq_set_error("%s: %s: the view needs %llu bytes from offset %llu, the buffer has %llu", fn, what,
                     (unsigned long long)need, (unsigned long long)m->off, (unsigned long long)m->end);
        return ROPEQK_ERR_BUFFER_TOO_SMALL;
    }
    r->id = m->id;
    r->off = m->off;
    r->len = need;
    return ROPEQK_SUCCESS;
}

bool rq_ranges_overlap(const rq_range *a, const rq_range *b)
{
    return a->id && a->id == b->id && a->off < b->off + b->len && b->off < a->off + a->len;
}

bool rq_outputs_overlap(const rq_range *const *outs, int n_out, const rq_range *const *ins, int n_in)
{
    for (int o = 0; o < n_out; o++) {
        for (int i = 0; i < n_in; i++)
            if (rq_ranges_overlap(outs[o], ins[i]))
                return true;
        for (int p = o + 1; p < n_out; p++)
            if (rq_ranges_overlap(outs[o], outs[p]))
                return true;
    }
    return false;
}

/* offset + rows - 1 within int32, as rq_validate requires of the plan's own offsets */
static bool pos_ok(int64_t off, int64_t rows)
{
    return off >= INT32_MIN && off <= (int64_t)INT32_MAX - (rows - 1);
}

ropeqk_status rq_plan_step(const ropeqk_plan *pl, const ropeqk_step *step, bool pos_arrays, const char *fn,
                           rq_extents *x)
{
    const rq_problem *pb = &pl->pb;
    x->Sk = pb->Sk;
    x->q_off = pb->q_off;
    x->k_off = pb->k_off;
    if (pl->dynamic) {
        if (!step) {
            rq_set_error("%s: a decode plan needs a step (keys and offsets)", fn);
            return ROPEQK_ERR_NULL_POINTER;
        }
        if (step->n_keys < 1 || step->n_keys > pb->Sk) {
            rq_set_error("%s: n_keys %lld outside [1, %lld]", fn, (long long)step->n_keys, (long long)pb->Sk);
            return ROPEQK_ERR_BAD_PARAM;
        }
        x->Sk = step->n_keys;
        x->q_off = step->q_pos_offset;
        x->k_off = step->k_pos_offset;
        if (!pos_ok(x->q_off, pb->Sq) || !pos_ok(x->k_off, x->Sk)) {
            rq_set_error("%s: step offsets %lld, %lld put positions outside int32", fn, (long long)x->q_off,
                         (long long)x->k_off);
            return ROPEQK_ERR_POSITION_RANGE;
        }
    } else if (step) {
        rq_set_error("%s: a fixed plan takes no step (create it with max_keys)", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (pos_arrays && !pl->arrays) {
        rq_set_error("%s: position arrays given to a plan made for offsets", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    /* extents of this call's views: a decode plan uses the first n_keys keys of its descriptors */
    bool attn = pl->op == ROPEQK_OP_ATTENTION;
    x->k = pb->k_extent;
    x->o = attn ? pb->o_extent : pb->out_extent;
    x->v = pb->v_extent;
    if (x->Sk != pb->Sk) {
        ropeqk_tensor k = pl->k, o = pl->out, v = pl->v;
        k.ne[2] = o.ne[3] = v.ne[2] = x->Sk;
        x->k = ropeqk_tensor_extent(&k);
        if (attn)
            x->v = ropeqk_tensor_extent(&v);
        else
            x->o = ropeqk_tensor_extent(&o);
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_call_check(const ropeqk_plan *pl, const ropeqk_step *step, const rq_call_mems *m, const char *fn,
                            const char *paged_fn, rq_extents *x)
{
    const rq_backend *be = pl->ctx->be;
    const rq_problem *pb = &pl->pb;
    if (pl->op == ROPEQK_OP_PAGED_DECODE) {
        rq_set_error("%s: a paged-decode plan runs with %s", fn, paged_fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    if (!m->q.id || !m->k.id || !m->out.id) {
        rq_set_error("%s: q, k and out buffers are required", fn);
        return ROPEQK_ERR_NULL_POINTER;
    }
    ropeqk_status st = rq_plan_step(pl, step, m->q_pos.id || m->k_pos.id, fn, x);
    if (st)
        return st;
    bool attn = pl->op == ROPEQK_OP_ATTENTION;
    rq_range rq = {0, 0, 0}, rk = rq, ro = rq, rqp = rq, rkp = rq, rv = rq, rl = rq;
    if ((st = rq_check_mem(be, &m->q, ropeqk_dtype_size(pl->q.dtype), pb->q_extent, fn, "q", &rq)) ||
        (st = rq_check_mem(be, &m->k, ropeqk_dtype_size(pl->k.dtype), x->k, fn, "k", &rk)) ||
        (st = rq_check_mem(be, &m->out, ropeqk_dtype_size(pl->out.dtype), x->o, fn, "out", &ro)))
        return st;
    size_t streams = (size_t)rq_pos_streams(pb); /* [3][S] under M-RoPE */
    if (m->q_pos.id && (st = rq_check_mem(be, &m->q_pos, 4, streams * (size_t)pb->Sq * 4, fn, "q_pos", &rqp)))
        return st;
    if (m->k_pos.id && (st = rq_check_mem(be, &m->k_pos, 4, streams * (size_t)x->Sk * 4, fn, "k_pos", &rkp)))
        return st;
    if (attn) {
        if (!m->v.id || (pl->with_lse && !m->lse.id)) {
            rq_set_error("%s: an attention plan needs v%s", fn, pl->with_lse ? " and lse" : "");
            return ROPEQK_ERR_NULL_POINTER;
        }
        if ((st = rq_check_mem(be, &m->v, ropeqk_dtype_size(pl->v.dtype), x->v, fn, "v", &rv)) ||
            (pl->with_lse && (st = rq_check_mem(be, &m->lse, 4, pb->lse_extent, fn, "lse", &rl))))
            return st;
    }
    const rq_range *in[] = {&rq, &rk, &rqp, &rkp, &rv}, *outs[] = {&ro, &rl};
    if (rq_outputs_overlap(outs, 2, in, 5)) {
        rq_set_error("%s: an output overlaps an input or the other output in the same buffer", fn);
        return ROPEQK_ERR_OVERLAP;
    }
    return ROPEQK_SUCCESS;
}
