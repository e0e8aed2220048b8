/* The scalar reference path: the definition of docs/conventions.md evaluated in fp64, as plainly as
 * possible, so that it can be read against the spec. It is the truth every device result is checked
 * against. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* Rotates one row (D values) in place: pair u of dims [rot_off, rot_off + R) by the position of its
 * stream, pos[rq_mrope_stream(u)] (one stream without M-RoPE). */
static void rotate_row(const rq_problem *pb, const double *inv, const int64_t pos[3], double *x)
{
    for (int64_t u = 0; u < pb->R / 2; u++) {
        int64_t i0 = pb->rot_off + (pb->layout == ROPEQK_INTERLEAVED ? 2 * u : u);
        int64_t i1 = pb->rot_off + (pb->layout == ROPEQK_INTERLEAVED ? 2 * u + 1 : u + pb->R / 2);
        double a = (double)pos[rq_mrope_stream(pb, u)] * inv[u];
        double c = cos(a) * pb->attn, s = (pb->conjugate ? -sin(a) : sin(a)) * pb->attn;
        double x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
    }
}

/* The rotary positions of row r of S rows (pos[stream]) from an array ([S], or [3][S] under M-RoPE)
 * or the offset, and the position masks use: the array's (its only stream) or, under M-RoPE, token
 * order (offset + r, whatever the three rotary positions). */
static int64_t row_pos(const rq_problem *pb, const int32_t *arr, int64_t S, int64_t off, int64_t r, int64_t pos[3])
{
    for (int s = 0; s < 3; s++)
        pos[s] = arr ? arr[(pb->mrope ? s : 0) * S + r] : off + r;
    return pb->mrope || !arr ? off + r : arr[r];
}

static void load_row(const ropeqk_tensor *t, const void *data, int64_t b, int64_t h, int64_t s, int64_t D,
                     double *x)
{
    for (int64_t d = 0; d < D; d++)
        x[d] = rq_load_elem(data, rq_off(t, b, h, s, d), t->dtype);
}

ropeqk_status rq_scorer_init(rq_scorer *sc, const rq_problem *pb, const ropeqk_tensor *k, const void *k_data,
                             const int32_t *q_pos, const int32_t *k_pos)
{
    sc->pb = pb;
    sc->q_pos = q_pos;
    sc->k_pos = k_pos;
    sc->kr = sc->qr = sc->inv = NULL;
    sc->nan_nonfinite = false;
    /* rotated K for all (b, hk, j), rotated Q one row at a time */
    size_t nk, bytes;
    if (__builtin_mul_overflow((size_t)(pb->B * pb->Hkv), (size_t)pb->Sk, &nk) ||
        __builtin_mul_overflow(nk, (size_t)pb->D, &nk) || __builtin_mul_overflow(nk, sizeof(double), &bytes))
        return ROPEQK_ERR_OVERFLOW;
    sc->kr = malloc(bytes);
    sc->qr = malloc((size_t)pb->D * sizeof(double));
    sc->inv = malloc((size_t)(pb->R / 2) * sizeof(double));
    if (!sc->kr || !sc->qr || !sc->inv) {
        rq_scorer_free(sc);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    rq_inv_freq(pb, sc->inv);
    for (int64_t b = 0; b < pb->B; b++)
        for (int64_t h = 0; h < pb->Hkv; h++)
            for (int64_t j = 0; j < pb->Sk; j++) {
                double *x = sc->kr + ((b * pb->Hkv + h) * pb->Sk + j) * pb->D;
                int64_t pos[3];
                row_pos(pb, k_pos, pb->Sk, pb->k_off, j, pos);
                load_row(k, k_data, b, h, j, pb->D, x);
                rotate_row(pb, sc->inv, pos, x);
            }
    return ROPEQK_SUCCESS;
}

void rq_scorer_row(const rq_scorer *sc, const ropeqk_tensor *q, const void *q_data, int64_t b, int64_t h, int64_t i,
                   double *row)
{
    const rq_problem *pb = sc->pb;
    int64_t qpos[3], kpos[3];
    int64_t pi = row_pos(pb, sc->q_pos, pb->Sq, pb->q_off, i, qpos);
    load_row(q, q_data, b, h, i, pb->D, sc->qr);
    rotate_row(pb, sc->inv, qpos, sc->qr);
    const double *kh = sc->kr + (b * pb->Hkv + h / pb->G) * pb->Sk * pb->D;
    for (int64_t j = 0; j < pb->Sk; j++) {
        int64_t pj = row_pos(pb, sc->k_pos, pb->Sk, pb->k_off, j, kpos);
        double sum = 0.0;
        for (int64_t d = 0; d < pb->D; d++)
            sum += sc->qr[d] * kh[j * pb->D + d];
        double s = pb->scale * sum;
        if (sc->nan_nonfinite && !isfinite(s))
            s = NAN; /* before soft-capping, which would map an infinity to +-C */
        if (pb->softcap > 0.0) /* Gemma 2: C tanh(S / C), after the scale */
            s = pb->softcap * tanh(s / pb->softcap);
        row[j] = rq_masked(pb, pi, pj) ? -INFINITY : s;
    }
}

void rq_scorer_free(rq_scorer *sc)
{
    free(sc->kr); free(sc->qr); free(sc->inv);
    sc->kr = sc->qr = sc->inv = NULL;
}

ropeqk_status ropeqk_scores_ref(const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                                const ropeqk_tensor *k, const void *k_data, const int32_t *q_pos,
                                const int32_t *k_pos, const ropeqk_tensor *out, void *out_data)
{
    rq_problem pb;
    ropeqk_status st = rq_validate(p, q, k, out, true, q_pos || k_pos, &pb);
    if (st)
        return st;
    if (!q_data || !k_data || !out_data)
        return ROPEQK_ERR_NULL_POINTER;
    rq_scorer sc;
    if ((st = rq_scorer_init(&sc, &pb, k, k_data, q_pos, k_pos)))
        return st;
    /* Sk doubles cannot overflow: the scorer's B*Hkv*Sk*D doubles did not */
    double *row = malloc((size_t)pb.Sk * sizeof(double));
    if (!row) {
        rq_scorer_free(&sc);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    for (int64_t b = 0; b < pb.B; b++)
        for (int64_t h = 0; h < pb.Hq; h++)
            for (int64_t i = 0; i < pb.Sq; i++) {
                rq_scorer_row(&sc, q, q_data, b, h, i, row);
                for (int64_t j = 0; j < pb.Sk; j++)
                    rq_store_elem(out_data, rq_off(out, b, h, i, j), out->dtype, row[j]);
            }
    rq_scorer_free(&sc);
    free(row);
    return ROPEQK_SUCCESS;
}

static double row_norm(const ropeqk_tensor *t, const void *data, int64_t b, int64_t h, int64_t s, int64_t D)
{
    double n = 0.0;
    for (int64_t d = 0; d < D; d++) {
        double v = rq_load_elem(data, rq_off(t, b, h, s, d), t->dtype);
        n += v * v;
    }
    return sqrt(n);
}

ropeqk_status ropeqk_max_error(const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                               const ropeqk_tensor *k, const void *k_data, const ropeqk_tensor *s,
                               const void *s_data, const ropeqk_tensor *s64, const void *s64_data,
                               double *max_err, int64_t *mask_mismatch)
{
    rq_problem pb, pb64;
    ropeqk_status st = rq_validate(p, q, k, s, true, false, &pb);
    if (!st)
        st = rq_validate(p, q, k, s64, true, false, &pb64);
    if (st)
        return st;
    if (!q_data || !k_data || !s_data || !s64_data || !max_err || !mask_mismatch)
        return ROPEQK_ERR_NULL_POINTER;
    /* key norms once, not once per query row */
    size_t nk;
    if (__builtin_mul_overflow((size_t)(pb.B * pb.Hkv), (size_t)pb.Sk, &nk) || nk > SIZE_MAX / sizeof(double))
        return ROPEQK_ERR_OVERFLOW;
    double *knorm = malloc(nk * sizeof *knorm);
    if (!knorm)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (int64_t b = 0; b < pb.B; b++)
        for (int64_t h = 0; h < pb.Hkv; h++)
            for (int64_t j = 0; j < pb.Sk; j++)
                knorm[(b * pb.Hkv + h) * pb.Sk + j] = row_norm(k, k_data, b, h, j, pb.D);
    double worst = 0.0;
    int64_t bad = 0;
    for (int64_t b = 0; b < pb.B; b++)
        for (int64_t h = 0; h < pb.Hq; h++)
            for (int64_t i = 0; i < pb.Sq; i++) {
                double nq = row_norm(q, q_data, b, h, i, pb.D);
                for (int64_t j = 0; j < pb.Sk; j++) {
                    double v = rq_load_elem(s_data, rq_off(s, b, h, i, j), s->dtype);
                    double w = rq_load_elem(s64_data, rq_off(s64, b, h, i, j), s64->dtype);
                    bool mv = isinf(v) && v < 0, mw = isinf(w) && w < 0;
                    if (isnan(v) || isnan(w) || mv != mw) {
                        bad++;
                        continue;
                    }
                    if (mv)
                        continue;
                    double den = fabs(pb.scale) * nq * knorm[(b * pb.Hkv + h / pb.G) * pb.Sk + j];
                    double diff = fabs(v - w);
                    double e = den > 0.0 ? diff / den : (diff > 0.0 ? INFINITY : 0.0);
                    if (e > worst)
                        worst = e;
                }
            }
    free(knorm);
    *max_err = worst;
    *mask_mismatch = bad;
    return ROPEQK_SUCCESS;
}
