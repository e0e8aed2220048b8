/* The paged-KV-cache tests' fixture (test_paged.c: decode and append against fp64;
 * test_paged_invalid.c: refusals and threads): problems over shuffled pages with ragged lengths,
 * their device buffers on the suite's context, and the fp64 reference. */
#ifndef ROPEQK_TEST_PAGED_FIXTURE_H
#define ROPEQK_TEST_PAGED_FIXTURE_H

#include "harness.h"

#include <criterion/criterion.h>

/* The suite's context (pf_setup, pf_teardown: the suites' .init and .fini). */
extern ropeqk_ctx *ctx;
void pf_setup(void);
void pf_teardown(void);

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
} pcase;

typedef struct {
    ropeqk_tensor tq, tk, tv, to, tl;
    unsigned char *q, *k, *v;
    size_t qb, kb, vb, ob, lb;
    int64_t num_pages;
    int32_t *table, lens[MAXS], qpos[MAXS], kpos0[MAXS];
} pdata;

typedef struct {
    cl_mem q, k, v, o, l;
} pbufs;

/* The helpers (each documented in paged_fixture.c). */
uint64_t test_seed(void);
float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);
double load(const void *base, size_t off, ropeqk_dtype t);
void put_random(void *p, ropeqk_dtype t, uint64_t *rng);
size_t off4(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d);
cl_mem make_buffer(size_t bytes, const void *init);
void fill_bytes(cl_mem m, size_t bytes, unsigned char byte);
void read_buffer(cl_mem m, size_t bytes, void *dst);
ropeqk_tensor cache_view(const pcase *c, ropeqk_dtype dt, int64_t num_pages, int64_t dim);
void pdata_make(const pcase *c, pdata *d, uint64_t *rng);
void pdata_free(pdata *d);
ropeqk_paged_batch batch_of(const pcase *c, pdata *d);
ropeqk_plan_desc desc_of(const pcase *c, const pdata *d);
void rotate(const ropeqk_params *p, int64_t D, const double *inv, double attn, int64_t pos, double *x);
void reference(const pcase *c, const pdata *d, double *o64, double *lse64, double *vmax);
void pbufs_make(const pdata *d, pbufs *b);
void pbufs_free(pbufs *b);
ropeqk_opencl_paged_args args_of(const pcase *c, const pbufs *b);
void run_case(const pcase *c, uint64_t seed);
pcase base_case(const char *name);

#endif
