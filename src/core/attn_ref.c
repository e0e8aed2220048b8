/* The attention reference path, O = softmax(S) V in fp64, and the attention metric
 * (docs/conventions.md, section 9). S comes from the scores reference's own row evaluation
 * (rq_scorer in ref.c), so the two reference paths cannot drift apart. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* softmax(row) V for one query row into acc[0..Dv-1]; returns the row's LSE. `sink` (-inf: none) is
 * the query head's sink logit: it joins the denominator and carries no value. */
static double softmax_v(const rq_problem *pb, const double *row, double sink, const ropeqk_tensor *v,
                        const void *v_data, int64_t b, int64_t hk, double *acc)
{
    /* A NaN score (an unmasked key with non-finite data: rq_scorer's nan_nonfinite) wins the max, so
     * it poisons O and LSE instead of being silently skipped. */
    double m = sink;
    for (int64_t j = 0; j < pb->Sk; j++) {
        if (isnan(row[j])) {
            m = NAN;
            break;
        }
        m = row[j] > m ? row[j] : m;
    }
    for (int64_t d = 0; d < pb->Dv; d++)
        acc[d] = 0.0;
    if (m == -INFINITY)
        return -INFINITY; /* fully masked, no sink: O = 0 exactly, LSE = -inf */
    /* Subtracting the max keeps every weight in (0, 1] and the sum in [1, Sk]: no overflow for any
     * finite scores, and no all-underflow to 0/0. */
    double sum = 0.0;
    for (int64_t j = 0; j < pb->Sk; j++) {
        if (row[j] == -INFINITY)
            continue; /* masked: weight exactly 0, and skipped, never multiplied: its V may hold NaN */
        double w = exp(row[j] - m);
        sum += w;
        for (int64_t d = 0; d < pb->Dv; d++)
            acc[d] += w * rq_load_elem(v_data, rq_off(v, b, hk, j, d), v->dtype);
    }
    if (sink > -INFINITY) /* e^{s_h} in the denominator only; a fully masked row: O = 0, LSE = s_h */
        sum += exp(sink - m);
    for (int64_t d = 0; d < pb->Dv; d++)
        acc[d] /= sum;
    return m + log(sum);
}

ropeqk_status ropeqk_attention_ref(const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                                   const ropeqk_tensor *k, const void *k_data, const ropeqk_tensor *v,
                                   const void *v_data, const int32_t *q_pos, const int32_t *k_pos,
                                   const ropeqk_tensor *out, void *out_data, const ropeqk_tensor *lse, void *lse_data)
{
    rq_problem pb;
    ropeqk_status st = rq_validate_attention(p, q, k, v, out, lse, true, q_pos || k_pos, &pb);
    if (st)
        return st;
    /* the shared validator also admits f16/bf16 outputs (the device path writes them); this path
     * stores its fp64 results as F32 or F64 only */
    if (out->dtype != ROPEQK_F32 && out->dtype != ROPEQK_F64)
        return ROPEQK_ERR_BAD_DTYPE;
    if (!q_data || !k_data || !v_data || !out_data || (lse && !lse_data))
        return ROPEQK_ERR_NULL_POINTER;
    rq_scorer sc;
    if ((st = rq_scorer_init(&sc, &pb, k, k_data, q_pos, k_pos)))
        return st;
    sc.nan_nonfinite = true; /* a seen non-finite key: NaN, never a weight of 0 (section 9) */
    /* O(Sk + Dv) scratch: one row of S at a time, never the whole [Sq, Sk] block. Sk doubles cannot
     * overflow (the scorer's B*Hkv*Sk*D did not), Dv <= 65536. */
    double *row = malloc((size_t)pb.Sk * sizeof(double));
    double *acc = malloc((size_t)pb.Dv * sizeof(double));
    if (!row || !acc) {
        free(row); free(acc);
        rq_scorer_free(&sc);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    for (int64_t b = 0; b < pb.B; b++)
        for (int64_t h = 0; h < pb.Hq; h++)
            for (int64_t i = 0; i < pb.Sq; i++) {
                rq_scorer_row(&sc, q, q_data, b, h, i, row);
                double sink = pb.sinks ? (double)pb.sinks[h] : -INFINITY;
                double l = softmax_v(&pb, row, sink, v, v_data, b, h / pb.G, acc);
                for (int64_t d = 0; d < pb.Dv; d++)
                    rq_store_elem(out_data, rq_off(out, b, h, i, d), out->dtype, acc[d]);
                if (lse)
                    rq_store_elem(lse_data, rq_off(lse, b, h, i, 0), lse->dtype, l);
            }
    free(row); free(acc);
    rq_scorer_free(&sc);
    return ROPEQK_SUCCESS;
}

/* |a - w| / den, 0 when equal (so equal infinities agree), infinite when the quotient is undefined
 * (an infinity against a finite value with an infinite denominator). */
static double rel_diff(double a, double w, double den)
{
    if (a == w)
        return 0.0;
    double e = fabs(a - w) / den;
    return isnan(e) ? INFINITY : e;
}

static bool same_shape(const ropeqk_tensor *a, const ropeqk_tensor *b)
{
    for (int i = 0; i < 4; i++)
        if (a->ne[i] != b->ne[i])
            return false;
    return true;
}

ropeqk_status ropeqk_attention_max_error(const ropeqk_tensor *v, const void *v_data, const ropeqk_tensor *out,
                                         const void *out_data, const ropeqk_tensor *out64, const void *out64_data,
                                         const ropeqk_tensor *lse, const void *lse_data, const ropeqk_tensor *lse64,
                                         const void *lse64_data, double *max_err, double *max_lse_rel,
                                         int64_t *mismatch)
{
    /* one LSE without the other has nothing to be compared with: a missing argument */
    if (!v || !out || !out64 || !max_err || !max_lse_rel || !mismatch || !lse != !lse64)
        return ROPEQK_ERR_NULL_POINTER;
    /* every view only needs to be readable: any dtype rq_load_elem knows, any legal strides */
    size_t ext;
    ropeqk_status st;
    /* 8-bit values mean nothing without their scales: the caller dequantizes (section 12) */
    if (rq_dtype_q8(v->dtype) || rq_dtype_q8(out->dtype) || rq_dtype_q8(out64->dtype) ||
        (lse && rq_dtype_q8(lse->dtype)) || (lse64 && rq_dtype_q8(lse64->dtype)))
        return ROPEQK_ERR_BAD_DTYPE;
    if ((st = rq_check_layout(v, false, &ext)) || (st = rq_check_layout(out, false, &ext)) ||
        (st = rq_check_layout(out64, false, &ext)) || (lse && (st = rq_check_layout(lse, false, &ext))) ||
        (lse64 && (st = rq_check_layout(lse64, false, &ext))))
        return st;
    int64_t B = v->ne[0], Hkv = v->ne[1], Sk = v->ne[2], Dv = v->ne[3], Hq = out->ne[1], Sq = out->ne[2];
    if (out->ne[0] != B || out->ne[3] != Dv || !same_shape(out, out64))
        return ROPEQK_ERR_BAD_SHAPE;
    if (Hq % Hkv != 0)
        return ROPEQK_ERR_BAD_HEADS;
    if (lse && (lse->ne[0] != B || lse->ne[1] != Hq || lse->ne[2] != Sq || lse->ne[3] != 1 || !same_shape(lse, lse64)))
        return ROPEQK_ERR_BAD_SHAPE;
    if (!v_data || !out_data || !out64_data || (lse && (!lse_data || !lse64_data)))
        return ROPEQK_ERR_NULL_POINTER;
    int64_t g = Hq / Hkv;
    /* V's inf-norm once per (b, kv head): it is shared by g * Sq rows (B*Hkv fits: V's count did) */
    double *vn = malloc((size_t)(B * Hkv) * sizeof *vn);
    if (!vn)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hkv; h++) {
            double n = 0.0;
            for (int64_t j = 0; j < Sk; j++)
                for (int64_t d = 0; d < Dv; d++) {
                    double x = fabs(rq_load_elem(v_data, rq_off(v, b, h, j, d), v->dtype));
                    n = x > n ? x : n;
                }
            vn[b * Hkv + h] = n > 0.0 ? n : 1.0; /* all-zero V: absolute error */
        }
    double worst = 0.0, worst_lse = 0.0;
    int64_t bad = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                double den = vn[b * Hkv + h / g], e = 0.0, le = 0.0;
                bool mismatched = false;
                for (int64_t d = 0; d < Dv; d++) {
                    double a = rq_load_elem(out_data, rq_off(out, b, h, i, d), out->dtype);
                    double w = rq_load_elem(out64_data, rq_off(out64, b, h, i, d), out64->dtype);
                    mismatched = mismatched || isnan(a) || isnan(w);
                    double x = rel_diff(a, w, den);
                    e = x > e ? x : e;
                }
                if (lse) {
                    double a = rq_load_elem(lse_data, rq_off(lse, b, h, i, 0), lse->dtype);
                    double w = rq_load_elem(lse64_data, rq_off(lse64, b, h, i, 0), lse64->dtype);
                    /* -inf marks a fully masked row: disagreeing masks are not a size of error */
                    mismatched = mismatched || isnan(a) || isnan(w) || ((a == -INFINITY) != (w == -INFINITY));
                    le = rel_diff(a, w, fmax(fabs(w), 1.0));
                }
                if (mismatched) {
                    bad++;
                    continue;
                }
                worst = e > worst ? e : worst;
                worst_lse = le > worst_lse ? le : worst_lse;
            }
    free(vn);
    *max_err = worst;
    *max_lse_rel = worst_lse;
    *mismatch = bad;
    return ROPEQK_SUCCESS;
}
