/* The paged-KV-cache tests' one problem and one reference (test_paged.c: decode and append against
 * fp64; test_paged_invalid.c: refusals and threads; test_vk_paged.c: what only lavapipe needs), on
 * either backend: problems over shuffled pages with ragged lengths, their device buffers on the
 * suite's context (th_ctx), and the check against ropeqk_attention_ref on each sequence's pages
 * gathered into a dense K/V. */
#ifndef ROPEQK_TEST_PAGED_FIXTURE_H
#define ROPEQK_TEST_PAGED_FIXTURE_H

#include "harness.h"

#include <criterion/criterion.h>

#define MAXS 8

typedef struct {
    const char *name;
    int64_t Hq, Hkv, D, Dv, ps, n_seqs, max_seqs, maxp, spare_pages;
    int64_t lens[MAXS];        /* 0: drawn from [1, len_max] */
    int64_t len_max;
    ropeqk_dtype qdt, kdt, vdt, odt;
    bool bshd_cache, with_lse;
    ropeqk_params p;
    /* positions: k_pos0 from [kpos_lo, kpos_lo + kpos_span]; q_pos = last key + q_ahead (may be < 0) */
    int64_t kpos_lo, kpos_span, q_ahead;
    double tol;                /* 0: 1e-5 */
    /* ragged query rows (q_indptr): qlens[s] rows for sequence s (0: 1), the last at the sequence's
     * last key + q_ahead; ragged: pass q_indptr even when every sequence has one row; max_rows: the
     * plan's max_q_rows (0: the rows' total + 3) */
    bool ragged;
    int64_t qlens[MAXS], max_rows;
} pcase;

typedef struct {
    ropeqk_tensor tq, tk, tv, to, tl;
    unsigned char *q, *k, *v;
    size_t qb, kb, vb, ob, lb;
    float *ks, *vs;   /* 8-bit caches: the scales [num_pages, Hkv, ps] (NaN where unused), else NULL */
    size_t ksb, vsb;  /* their bytes (0 without) */
    int64_t num_pages;
    int32_t *table, lens[MAXS], qpos[MAXS], kpos0[MAXS];
    int32_t qind[MAXS + 1];    /* q_indptr */
    int64_t rows, max_rows;    /* query rows of the batch, and of the plan (q.ne[0]) */
} pdata;

/* A problem's device buffers (tests/devmem.h) on th_ctx. */
typedef struct {
    dm_buf *q, *k, *v, *o, *l;
    dm_buf *ks, *vs; /* 8-bit caches' scales, else NULL */
} pbufs;

/* ROPEQK_TEST_SEED, else 20261201: print it with every failure. */
uint64_t pf_seed(void);
size_t off4(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d);
/* The K or V cache view: [num_pages, Hkv, ps, dim], BHSD or BSHD memory. */
ropeqk_tensor cache_view(const pcase *c, ropeqk_dtype dt, int64_t num_pages, int64_t dim);
/* Element i of the cache row at byte offset `row` as the kernels read it: an 8-bit element times
 * the row's scale (`scales` and its index), else the stored value. */
double cache_elem(const unsigned char *cache, size_t row, int64_t i, ropeqk_dtype dt, const float *scales,
                  size_t si);
/* Lengths, shuffled pages (every sequence's pages distinct, spare pages unused), positions, data.
 * Every cache byte outside the sequences' tokens is 0xFF (NaN in every dtype, and its scale NaN for
 * an 8-bit cache, whose rows are uniform f32 rows quantized by support/quant.c). */
void pdata_make(const pcase *c, pdata *d, uint64_t *rng);
void pdata_free(pdata *d);
ropeqk_paged_batch batch_of(const pcase *c, pdata *d);
ropeqk_plan_desc desc_of(const pcase *c, const pdata *d);
/* Device copies of q, k, v (between canaries when `canaries`), out and lse filled with 0x5A. */
void pbufs_make(const pdata *d, pbufs *b, bool canaries);
void pbufs_free(pbufs *b);
ropeqk_paged_args args_of(const pcase *c, const pbufs *b);
/* The fp64 reference of sequence s (ropeqk_attention_ref on its keys and values gathered from the
 * pages into dense [1, Hkv, len, D] views, 8-bit caches as their f32 values): ro [Hq][q_len][Dv] and
 * rl [Hq][q_len] (views o64, l64); to, tl: the sequence's rows of the plan's out and lse views, from
 * row r0 (q_len = ql rows); tv and v: the gathered V, for the metric. */
typedef struct {
    ropeqk_tensor tv, to, tl, o64, l64;
    unsigned char *v;
    double *ro, *rl;
    int64_t r0, ql;
} pf_seqref;
void pf_seq_reference(const pcase *c, const pdata *d, int64_t s, pf_seqref *r, uint64_t seed);
void pf_seqref_free(pf_seqref *r);
/* out [max_rows, Hq, 1, Dv] (c->odt) and lse [max_rows, Hq, 1, 1] (NULL without with_lse), host copies
 * of the device's, against ropeqk_attention_ref sequence by sequence (its query rows as a dense
 * [1, Hq, q_len, D] view at positions q_pos .. q_pos + q_len - 1; keys and values gathered from
 * the pages into dense [1, Hkv, len, D] views, key j at position k_pos0 + j) with the metric of
 * docs/conventions.md section 10 (ropeqk_attention_max_error); rows whose every key is masked must
 * be exactly 0 (LSE -inf). */
void pf_check(const pcase *c, const pdata *d, const unsigned char *out, const float *lse, uint64_t seed);
/* Decode on the device, then pf_check; rows past the batch's, the LSE without with_lse, the inputs and
 * the canaries untouched. */
void run_case(const pcase *c, uint64_t seed);
/* f32, Hq 8 / Hkv 2, D = Dv = 64, pages of 16, 5 of 6 sequences up to 5000 tokens, LSE. */
pcase base_case(const char *name);

#endif
