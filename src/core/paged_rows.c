/* Ragged query rows over the paged cache (docs/conventions.md section 10): a batch whose sequence s
 * has q_len[s] = q_indptr[s+1] - q_indptr[s] >= 1 query rows, packed in q in sequence order, at
 * positions q_pos[s] .. q_pos[s] + q_len[s] - 1 (a prefill chunk, a speculative step, a decode).
 * The kernels see rows, not sequences: each row is an entry of the packed metadata with its own
 * position and the page list of its sequence (shared, written once), so every backend's decode
 * kernels serve ragged batches unchanged. */
#include "call.h"

ropeqk_status rq_paged_rows(const ropeqk_plan *pl, const ropeqk_paged_batch *b, const char *fn, int64_t *rows)
{
    const int64_t n = b->n_seqs, cap = pl->q.ne[0];
    const int32_t *ip = b->q_indptr;
    *rows = n;
    if (!ip)
        return ROPEQK_SUCCESS; /* one row per sequence; n <= max_seqs <= max_q_rows */
    if (ip[0] != 0) {
        rq_set_error("%s: q_indptr[0] is %d, not 0", fn, (int)ip[0]);
        return ROPEQK_ERR_QUERY_ROWS;
    }
    for (int64_t s = 0; s < n; s++) {
        int64_t q_len = (int64_t)ip[s + 1] - ip[s];
        if (q_len < 1) {
            rq_set_error("%s: sequence %lld: q_indptr[%lld] = %d after %d: every sequence needs at least one query "
                         "row (offsets strictly increasing)", fn, (long long)s, (long long)(s + 1), (int)ip[s + 1],
                         (int)ip[s]);
            return ROPEQK_ERR_QUERY_ROWS;
        }
        if (ip[s + 1] > cap) {
            rq_set_error("%s: q_indptr[%lld] = %d: the rows exceed the plan's max_q_rows (%lld)", fn,
                         (long long)(s + 1), (int)ip[s + 1], (long long)cap);
            return ROPEQK_ERR_QUERY_ROWS;
        }
        if (q_len > b->seq_lens[s]) {
            rq_set_error("%s: sequence %lld: %lld query rows but %d cached tokens (a query row's token is in the "
                         "cache: append the new tokens' K/V first)", fn, (long long)s, (long long)q_len,
                         (int)b->seq_lens[s]);
            return ROPEQK_ERR_QUERY_ROWS;
        }
        if ((int64_t)b->q_pos[s] + q_len - 1 > INT32_MAX) {
            rq_set_error("%s: sequence %lld: last query position q_pos + %lld - 1 beyond INT32_MAX", fn, (long long)s,
                         (long long)q_len);
            return ROPEQK_ERR_POSITION_RANGE;
        }
    }
    *rows = ip[n];
    return ROPEQK_SUCCESS;
}
