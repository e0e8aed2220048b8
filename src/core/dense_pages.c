/* The dense decode's "pages" (both backends: src/opencl/cl_dense.c, src/vulkan/vk_dense.c): few-row
 * dense attention runs the paged decode's kernels over the caller's dense [B, Hkv, Sk, D] K and V,
 * described as pages of RQ_DENSE_PAGE keys. Page (b, c) holds keys c * P .. c * P + P - 1 of batch
 * entry b and is numbered p = b * X + c * Y, so that the kernels' address
 * page * knb0 + head * knb1 + slot * knb2 is b * nb[0] + (c * P + slot) * nb[2] + head * nb[1] with
 * knb0 = nb[0] / X = P * nb[2] / Y (the gcd of the two; rq_dense_numbering). V shares the page
 * numbers, so V's strides must keep the same ratio, which contiguous BHSD and BSHD views of K and V
 * always do (any D and Dv); a view that does not (B > 1 with unrelated paddings of K and V) runs the
 * backend's old path. Query row i of batch entry b is sequence s = i * B + b of the decode, with its
 * own position, the keys' first position k_off, and its own page list: the pages the masks leave
 * (causal: keys up to the row's position; a window: from its start), so that a row's splits cover
 * only keys it sees. With a q position array the host does not know the positions (device memory):
 * every row gets all pages, and the backend copies the array into the metadata on the device; the
 * kernels mask by position as ever. Kept here so that both backends cut the same pages. */
#include "call.h"

#include <stdlib.h>
#include <string.h>

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

bool rq_dense_numbering(int64_t kb, int64_t kc, int64_t vb, int64_t vc, int64_t *X, int64_t *Y, int64_t *ks,
                        int64_t *vs)
{
    int64_t g = gcd64(kb, kc);
    bool from_k = g > 0;
    if (!from_k)
        g = gcd64(vb, vc);
    if (g == 0) { /* one page of one batch entry */
        *X = *Y = *ks = *vs = 0;
        return true;
    }
    int64_t x = (from_k ? kb : vb) / g, y = (from_k ? kc : vc) / g;
    int64_t ob = from_k ? vb : kb, oc = from_k ? vc : kc, o; /* the other tensor's strides */
    if (x > 0 && ob % x == 0)
        o = ob / x;
    else if (x == 0 && oc % y == 0)
        o = oc / y;
    else
        return false;
    if (x * o != ob || y * o != oc)
        return false;
    *X = x, *Y = y;
    *ks = from_k ? g : o;
    *vs = from_k ? o : g;
    return true;
}

bool rq_dense_view_pages(const ropeqk_plan *pl, int64_t Sk, int64_t *X, int64_t *Y, int64_t *ks, int64_t *vs)
{
    const ropeqk_tensor *k = &pl->k, *v = &pl->v;
    const int64_t B = pl->pb.B, P = RQ_DENSE_PAGE, nch = (Sk + P - 1) / P;
    return rq_dense_numbering(B > 1 ? k->nb[0] : 0, nch > 1 ? P * k->nb[2] : 0, B > 1 ? v->nb[0] : 0,
                              nch > 1 ? P * v->nb[2] : 0, X, Y, ks, vs) &&
           (B - 1) * *X + (nch - 1) * *Y <= INT32_MAX && B * pl->pb.Sq * pl->pb.Hq <= INT32_MAX;
}

/* Keys [*lo, *hi) of query row i: the unmasked ones (every key where the host does not know the
 * positions, qarr); *hi <= *lo: none. */
static void row_keys(const rq_problem *pb, int64_t i, int64_t Sk, int64_t q_off, int64_t k_off, bool qarr, int64_t *lo,
                     int64_t *hi)
{
    int64_t pq = q_off + i;
    *lo = 0, *hi = Sk;
    if (!qarr && pb->causal && pq - k_off + 1 < *hi)
        *hi = pq - k_off + 1;
    if (!qarr && pb->window > 0 && pq - pb->window - k_off + 1 > *lo)
        *lo = pq - pb->window - k_off + 1;
}

/* The metadata's layout for n rows in nints ints (m->v allocated by the caller). */
static void meta_layout(rq_paged_meta *m, int64_t n, size_t nints)
{
    m->n = nints;
    m->rows = n;
    m->lens_off = (int32_t)(n + 1);
    m->qpos_off = (int32_t)(2 * n + 1);
    m->kpos_off = (int32_t)(3 * n + 1);
    m->pages_off = (int32_t)(4 * n + 1);
}

ropeqk_status rq_dense_meta(const ropeqk_plan *pl, int64_t Sk, int64_t q_off, int64_t k_off, bool qarr, int64_t X,
                            int64_t Y, rq_paged_meta *m)
{
    const rq_problem *pb = &pl->pb;
    const int64_t B = pb->B, Sq = pb->Sq, n = B * Sq, P = RQ_DENSE_PAGE;
    memset(m, 0, sizeof *m);
    /* per query row: its first and one-past-last page */
    int64_t *c0 = malloc((size_t)Sq * 2 * sizeof *c0), *c1 = c0 ? c0 + Sq : NULL, total = 0;
    if (!c0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (int64_t i = 0; i < Sq; i++) {
        int64_t lo, hi; /* keys [lo, hi) are the row's unmasked ones */
        row_keys(pb, i, Sk, q_off, k_off, qarr, &lo, &hi);
        if (hi <= lo) /* fully masked: no pages (O = 0, LSE = -inf or the sink: the combine pass) */
            c0[i] = c1[i] = 0;
        else
            c0[i] = lo / P, c1[i] = (hi + P - 1) / P;
        total += c1[i] - c0[i];
        if (c1[i] - c0[i] > m->max_pages)
            m->max_pages = c1[i] - c0[i];
    }
    size_t nints = (size_t)(4 * n + 1) + (size_t)(total * B);
    if (nints > INT32_MAX || !(m->v = malloc(nints * sizeof *m->v))) {
        free(c0);
        return nints > INT32_MAX ? ROPEQK_ERR_TOO_LARGE : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    meta_layout(m, n, nints);
    if (m->max_pages < 1)
        m->max_pages = 1; /* every row masked: one split that returns at once */
    int32_t at = 0, *pages = m->v + m->pages_off;
    for (int64_t i = 0; i < Sq; i++)
        for (int64_t b = 0; b < B; b++) {
            int64_t s = i * B + b, first = c0[i] * P;
            m->v[s] = at;
            m->v[m->lens_off + s] = c1[i] > c0[i] ? (int32_t)((Sk < c1[i] * P ? Sk : c1[i] * P) - first) : 0;
            m->v[m->qpos_off + s] = qarr ? 0 : (int32_t)(q_off + i); /* arrays: copied on the device */
            m->v[m->kpos_off + s] = (int32_t)(k_off + first);
            for (int64_t c = c0[i]; c < c1[i]; c++)
                pages[at++] = (int32_t)(b * X + c * Y);
        }
    m->v[n] = at;
    free(c0);
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_dense_meta_grouped(const ropeqk_plan *pl, int64_t Sk, int64_t q_off, int64_t k_off, bool qarr,
                                    int64_t X, int64_t Y, rq_paged_meta *m)
{
    const rq_problem *pb = &pl->pb;
    const int64_t B = pb->B, Sq = pb->Sq, n = B * Sq, P = RQ_DENSE_PAGE;
    memset(m, 0, sizeof *m);
    /* the pages any row of a batch entry sees: the union of the rows' cuts (the kernels mask each row
     * by position) */
    int64_t lo = Sk, hi = 0;
    for (int64_t i = 0; i < Sq; i++) {
        int64_t a, b;
        row_keys(pb, i, Sk, q_off, k_off, qarr, &a, &b);
        if (b > a) {
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
        }
    }
    const int64_t c0 = hi > lo ? lo / P : 0, c1 = hi > lo ? (hi + P - 1) / P : 0;
    size_t nints = (size_t)(4 * n + 1) + (size_t)((c1 - c0) * B);
    if (nints > INT32_MAX)
        return ROPEQK_ERR_TOO_LARGE;
    if (!(m->v = malloc(nints * sizeof *m->v)))
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    meta_layout(m, n, nints);
    m->max_pages = c1 > c0 ? c1 - c0 : 1; /* every row masked: one split that returns at once */
    const int32_t len = c1 > c0 ? (int32_t)((Sk < c1 * P ? Sk : c1 * P) - c0 * P) : 0;
    int32_t *pages = m->v + m->pages_off;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < Sq; i++) {
            int64_t s = b * Sq + i;
            m->v[s] = (int32_t)(b * (c1 - c0));
            m->v[m->lens_off + s] = len;
            m->v[m->qpos_off + s] = qarr ? 0 : (int32_t)(q_off + i); /* arrays: copied on the device */
            m->v[m->kpos_off + s] = (int32_t)(k_off + c0 * P);
        }
        for (int64_t c = c0; c < c1; c++)
            pages[b * (c1 - c0) + c - c0] = (int32_t)(b * X + c * Y);
    }
    m->v[n] = (int32_t)(B * (c1 - c0));
    return ROPEQK_SUCCESS;
}
