/* Paged KV cache refusals, on either backend: every invalid description, batch and append is refused
 * with its status and nothing written (a refused call's command buffer is still submitted, so
 * anything recorded before the refusal would show; no event comes back); one plan run from four
 * threads on the context's queue gives a lone run's bits. Fixture: paged_fixture.c. The seed
 * is ROPEQK_TEST_SEED (default 20261201). */
#include "paged_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged, .init = th_ctx_init, .fini = th_ctx_fini);

/* ---- refusals ---------------------------------------------------------------------------------- */
enum { IS = 3, IHQ = 4, IHKV = 2, ID = 32, IPS = 16, IMAXP = 4, INP = 12 };

Test(paged, invalid_descriptions)
{
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, ID);
    ropeqk_tensor k = ropeqk_tensor_bhsd(ROPEQK_F16, INP, IHKV, IPS, ID);
    ropeqk_tensor v = ropeqk_tensor_bhsd(ROPEQK_F32, INP, IHKV, IPS, ID);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, ID);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, 1);
    ropeqk_plan_desc good = {.op = ROPEQK_OP_PAGED_DECODE, .q = q, .k = k, .v = v, .out = o, .lse = l,
                             .with_lse = 1, .paged = {IPS, IMAXP, IS}};
    ropeqk_default_params(&good.params);
    ropeqk_plan *pl = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &good, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    ropeqk_plan_destroy(pl);
    struct {
        ropeqk_plan_desc d;
        ropeqk_status want;
        const char *what;
    } cases[24];
    int n = 0;
#define CASE(WANT, WHAT, EDIT)                                                                     \
    do {                                                                                           \
        cases[n].d = good;                                                                         \
        ropeqk_plan_desc *d = &cases[n].d;                                                         \
        EDIT;                                                                                      \
        cases[n].want = (WANT);                                                                    \
        cases[n++].what = (WHAT);                                                                  \
    } while (0)
    CASE(ROPEQK_ERR_BAD_PARAM, "page_size 8", (d->paged.page_size = 8, d->k.ne[2] = d->v.ne[2] = 8));
    CASE(ROPEQK_ERR_BAD_PARAM, "page_size 512", (d->paged.page_size = 512));
    CASE(ROPEQK_ERR_BAD_SHAPE, "page_size != k.ne[2]", (d->paged.page_size = 32));
    CASE(ROPEQK_ERR_BAD_SHAPE, "v.ne[2] != page_size", (d->v = ropeqk_tensor_bhsd(ROPEQK_F32, INP, IHKV, 32, ID)));
    CASE(ROPEQK_ERR_BAD_PARAM, "max_pages_per_seq 0", (d->paged.max_pages_per_seq = 0));
    CASE(ROPEQK_ERR_BAD_SHAPE, "max_seqs != q.ne[0]", (d->paged.max_seqs = IS + 1));
    CASE(ROPEQK_ERR_BAD_SHAPE, "two query rows", (d->q.ne[2] = 2));
    CASE(ROPEQK_ERR_BAD_PARAM, "per-token position arrays", (d->positions = ROPEQK_POS_ARRAYS));
    CASE(ROPEQK_ERR_BAD_PARAM, "max_keys", (d->max_keys = 5));
    CASE(ROPEQK_ERR_BAD_PARAM, "a position offset", (d->params.q_pos_offset = 3));
    CASE(ROPEQK_ERR_BAD_SCALING, "DYNAMIC without seq_len",
         (d->params.scaling.type = ROPEQK_SCALING_DYNAMIC, d->params.scaling.factor = 2,
          d->params.scaling.original_max_position = 64));
    CASE(ROPEQK_ERR_BAD_SHAPE, "V with other heads", (d->v = ropeqk_tensor_bhsd(ROPEQK_F32, INP, 1, IPS, ID)));
    CASE(ROPEQK_ERR_BAD_SHAPE, "K with another head dim", (d->k = ropeqk_tensor_bhsd(ROPEQK_F16, INP, IHKV, IPS, 16)));
    CASE(ROPEQK_ERR_BAD_STRIDES, "K cache rows not contiguous", (d->k.nb[3] = 4, d->k.nb[2] = 4 * ID * 2));
    CASE(ROPEQK_ERR_BAD_DTYPE, "f64 output", (d->out = ropeqk_tensor_bhsd(ROPEQK_F64, IS, IHQ, 1, ID)));
    CASE(ROPEQK_ERR_BAD_SHAPE, "LSE of the wrong shape", (d->lse = ropeqk_tensor_bhsd(ROPEQK_F32, IS, IHQ, 1, 2)));
#undef CASE
    for (int i = 0; i < n; i++) {
        pl = (ropeqk_plan *)1;
        ropeqk_status st = ropeqk_plan_create(th_ctx, &cases[i].d, &pl);
        cr_expect_eq(st, cases[i].want, "%s: got %s", cases[i].what, ropeqk_status_string(st));
        cr_expect_null(pl, "%s: a plan for a refused description", cases[i].what);
        cr_expect(st == ROPEQK_SUCCESS || ropeqk_last_error()[0], "%s: no message", cases[i].what);
        if (st == ROPEQK_SUCCESS)
            ropeqk_plan_destroy(pl);
    }
    ropeqk_plan_desc d = good;
    d.params.scaling.type = ROPEQK_SCALING_DYNAMIC;
    d.params.scaling.factor = 2;
    d.params.scaling.original_max_position = 64;
    d.params.scaling.seq_len = 1000;
    cr_expect_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_SUCCESS, "DYNAMIC with seq_len: %s", ropeqk_last_error());
    ropeqk_plan_destroy(pl);
}

/* A plan, its buffers (out and lse holding a canary) and a good batch for the refusal tests. */
typedef struct {
    pcase c;
    pdata d;
    pbufs b;
    ropeqk_plan *pl;
} pfix;

static void pfix_make(pfix *f)
{
    f->c = base_case("refusals");
    f->c.Hq = IHQ, f->c.Hkv = IHKV, f->c.D = ID, f->c.Dv = ID, f->c.ps = IPS, f->c.maxp = IMAXP;
    f->c.n_seqs = IS, f->c.max_seqs = IS, f->c.spare_pages = 2, f->c.len_max = IPS * IMAXP;
    f->c.kdt = ROPEQK_F16;
    int64_t lens[] = {IPS * IMAXP, 2 * IPS + 1, 3 * IPS + 1}; /* 4, 3 and 4 pages */
    memcpy(f->c.lens, lens, sizeof lens);
    uint64_t rng = 3;
    pdata_make(&f->c, &f->d, &rng);
    ropeqk_plan_desc desc = desc_of(&f->c, &f->d);
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &f->pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    pbufs_make(&f->d, &f->b, false); /* exact sizes: "too small" means the same on both backends */
}

static void pfix_free(pfix *f)
{
    pbufs_free(&f->b);
    ropeqk_plan_destroy(f->pl);
    pdata_free(&f->d);
}

static void expect_untouched(const dm_buf *m, unsigned char byte, const char *what)
{
    size_t bytes = dm_bytes(m);
    unsigned char *h = malloc(bytes);
    cr_assert(h);
    cr_assert_eq(dm_read(m, h), ROPEQK_SUCCESS);
    for (size_t i = 0; i < bytes; i++)
        if (h[i] != byte) {
            cr_expect_fail("%s: byte %zu changed by a refused call", what, i);
            break;
        }
    free(h);
}

Test(paged, invalid_batches_write_nothing)
{
    static pfix f;
    pfix_make(&f);
    pdata *d = &f.d;
    ropeqk_paged_batch good = batch_of(&f.c, d);
    ropeqk_paged_args ga = args_of(&f.c, &f.b);
    dm_buf *small = NULL;
    cr_assert_eq(dm_create(th_ctx, 16, NULL, false, &small), ROPEQK_SUCCESS);
    int32_t tab[IS * IMAXP], lens[IS], qpos[IS], kpos[IS];
    enum { N = 32 };
    struct {
        ropeqk_paged_batch b;
        ropeqk_paged_args a;
        ropeqk_status want;
        char what[80];
        int32_t tab[IS * IMAXP], lens[IS], kpos[IS];
    } *cs = calloc(N, sizeof *cs);
    int n = 0;
    /* each case edits its own copies of the arrays */
#define CASE(WANT, WHAT, EDIT)                                                                     \
    do {                                                                                           \
        memcpy(cs[n].tab, d->table, sizeof tab);                                                   \
        memcpy(cs[n].lens, d->lens, sizeof lens);                                                  \
        memcpy(cs[n].kpos, d->kpos0, sizeof kpos);                                                 \
        cs[n].b = good;                                                                            \
        cs[n].b.page_table = cs[n].tab;                                                            \
        cs[n].b.seq_lens = cs[n].lens;                                                             \
        cs[n].b.k_pos0 = cs[n].kpos;                                                               \
        cs[n].a = ga;                                                                              \
        int32_t *T = cs[n].tab, *L = cs[n].lens, *K = cs[n].kpos;                                  \
        ropeqk_paged_batch *B = &cs[n].b;                                                          \
        ropeqk_paged_args *A = &cs[n].a;                                                              \
        (void)T, (void)L, (void)K, (void)B, (void)A;                                               \
        EDIT;                                                                                      \
        cs[n].want = (WANT);                                                                       \
        snprintf(cs[n++].what, 80, "%s", (WHAT));                                                  \
    } while (0)
    CASE(ROPEQK_ERR_BAD_PARAM, "n_seqs 0", B->n_seqs = 0);
    CASE(ROPEQK_ERR_BAD_PARAM, "n_seqs past max_seqs", B->n_seqs = IS + 1);
    CASE(ROPEQK_ERR_NULL_POINTER, "no page table", B->page_table = NULL);
    CASE(ROPEQK_ERR_NULL_POINTER, "no lengths", B->seq_lens = NULL);
    CASE(ROPEQK_ERR_NULL_POINTER, "no q_pos", B->q_pos = NULL);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length 0", L[1] = 0);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length -3", L[0] = -3);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length past capacity", L[2] = IPS * IMAXP + 1);
    CASE(ROPEQK_ERR_PAGE_RANGE, "page -1", (L[1] = IPS + 1, T[IMAXP + 1] = -1));
    CASE(ROPEQK_ERR_PAGE_RANGE, "page num_pages", (L[0] = 1, T[0] = (int32_t)d->num_pages));
    CASE(ROPEQK_ERR_PAGE_DUPLICATE, "a page twice in a sequence", (L[2] = 2 * IPS + 1, T[2 * IMAXP + 2] = T[2 * IMAXP]));
    CASE(ROPEQK_ERR_POSITION_RANGE, "last key position past INT32_MAX", (K[1] = INT32_MAX - L[1] + 2));
    CASE(ROPEQK_ERR_NULL_POINTER, "no q buffer", A->q.buf = NULL);
    CASE(ROPEQK_ERR_NULL_POINTER, "no lse buffer with with_lse", A->lse.buf = NULL);
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "q buffer too small", A->q.buf = dm_buffer(small));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "K cache too small", A->k_cache.buf = dm_buffer(small));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "V cache too small", A->v_cache.buf = dm_buffer(small));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "lse too small", A->lse.buf = dm_buffer(small));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "V cache at an offset", A->v_cache.offset = 64);
    CASE(ROPEQK_ERR_BAD_STRIDES, "misaligned q offset", A->q.offset = 2);
    CASE(ROPEQK_ERR_OVERLAP, "out over Q", (A->out.buf = dm_buffer(f.b.q)));
    CASE(ROPEQK_ERR_OVERLAP, "lse over the V cache", (A->lse.buf = dm_buffer(f.b.v)));
#undef CASE
    /* a refused call: its status, and no event (devmem.c: RQS_ERR_STRAY_EVENT otherwise) */
    for (int i = 0; i < n; i++) {
        ropeqk_status st = rqs_paged_run_wait(f.pl, &cs[i].a, &cs[i].b);
        cr_expect_eq(st, cs[i].want, "%s: got %d %s (%s)", cs[i].what, st, ropeqk_status_string(st),
                     ropeqk_last_error());
    }
    /* n_seqs past max_seqs, where the output buffer is big enough only for the plan: covered above;
     * the output too small for the batch */
    ropeqk_paged_args a = ga;
    a.out.buf = dm_buffer(small);
    cr_expect_eq(rqs_paged_run_wait(f.pl, &a, &good), ROPEQK_ERR_BUFFER_TOO_SMALL);
    cr_expect_eq(rqs_paged_run_wait(NULL, &ga, &good), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(rqs_paged_run_wait(f.pl, &ga, NULL), ROPEQK_ERR_NULL_POINTER);
    /* each backend's own entry point with no arguments: tests/interop/test_run_interop.c (paged_entry_points) */
    /* a paged plan through the generic run, and a scores plan through the paged one */
    ropeqk_args sa = {.q = dm_whole(f.b.q), .k = dm_whole(f.b.k), .out = dm_whole(f.b.o)};
    cr_expect_eq(rqs_plan_run_wait(f.pl, &sa, NULL), ROPEQK_ERR_BAD_PARAM);
    ropeqk_plan_desc sd = {.op = ROPEQK_OP_SCORES, .q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, ID),
                           .k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 4, ID),
                           .out = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 1, 1, 4)};
    ropeqk_default_params(&sd.params);
    ropeqk_plan *scores = NULL;
    cr_assert_eq(ropeqk_plan_create(th_ctx, &sd, &scores), ROPEQK_SUCCESS);
    cr_expect_eq(rqs_paged_run_wait(scores, &ga, &good), ROPEQK_ERR_BAD_PARAM);
    ropeqk_plan_destroy(scores);
    expect_untouched(f.b.o, 0x5A, "out");
    expect_untouched(f.b.l, 0x5A, "lse");

    /* the legal edges: the last key exactly at INT32_MAX, garbage past the used page-table entries,
     * a page shared by two sequences (a common prefix) */
    memcpy(tab, d->table, sizeof tab);
    memcpy(lens, d->lens, sizeof lens);
    memcpy(qpos, d->qpos, sizeof qpos);
    memcpy(kpos, d->kpos0, sizeof kpos);
    kpos[0] = INT32_MAX - lens[0] + 1;
    qpos[0] = INT32_MAX;
    lens[1] = 1;
    tab[IMAXP + 1] = -99;
    tab[IMAXP + 2] = INT32_MAX;
    tab[2 * IMAXP] = tab[IMAXP];
    ropeqk_paged_batch edge = {.n_seqs = IS, .page_table = tab, .seq_lens = lens, .q_pos = qpos, .k_pos0 = kpos};
    ropeqk_status st = rqs_paged_run_wait(f.pl, &ga, &edge);
    cr_expect_eq(st, ROPEQK_SUCCESS, "legal edges: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    edge.k_pos0 = NULL; /* NULL k_pos0: every sequence starts at position 0 */
    cr_expect_eq(rqs_paged_run_wait(f.pl, &ga, &edge), ROPEQK_SUCCESS);
    free(cs);
    dm_free(small);
    pfix_free(&f);
}

Test(paged, invalid_appends_write_nothing)
{
    static pfix f;
    pfix_make(&f);
    pdata *d = &f.d;
    const pcase *c = &f.c;
    cr_assert_eq(dm_fill(f.b.k, 0xA5), ROPEQK_SUCCESS);
    cr_assert_eq(dm_fill(f.b.v, 0xA5), ROPEQK_SUCCESS);
    int64_t nn = 3;
    ropeqk_tensor tkn = ropeqk_tensor_bhsd(c->kdt, IS, IHKV, nn, ID), tvn = ropeqk_tensor_bhsd(c->vdt, IS, IHKV, nn, ID);
    dm_buf *bkn = NULL, *bvn = NULL, *small = NULL;
    cr_assert_eq(dm_create(th_ctx, ropeqk_tensor_extent(&tkn), NULL, false, &bkn), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, ropeqk_tensor_extent(&tvn), NULL, false, &bvn), ROPEQK_SUCCESS);
    cr_assert_eq(dm_create(th_ctx, 16, NULL, false, &small), ROPEQK_SUCCESS);
    int32_t lens[IS] = {0, IPS - 1, 5}, tab[IS * IMAXP];
    memcpy(tab, d->table, sizeof tab);
    ropeqk_paged_batch good = {.n_seqs = IS, .page_table = tab, .seq_lens = lens};
    ropeqk_mem kn = dm_whole(bkn), vn = dm_whole(bvn), kc = dm_whole(f.b.k), vc = dm_whole(f.b.v);
    struct {
        ropeqk_status want;
        const char *what;
        int32_t l[IS], t[IS * IMAXP];
        ropeqk_tensor tk, tv;
        ropeqk_mem kn, vn, kc, vc;
        int64_t n_seqs;
    } cs[16];
    int n = 0;
#define CASE(WANT, WHAT, EDIT)                                                                     \
    do {                                                                                           \
        cs[n].want = (WANT), cs[n].what = (WHAT);                                                  \
        memcpy(cs[n].l, lens, sizeof lens), memcpy(cs[n].t, tab, sizeof tab);                      \
        cs[n].tk = tkn, cs[n].tv = tvn, cs[n].kn = kn, cs[n].vn = vn, cs[n].kc = kc, cs[n].vc = vc; \
        cs[n].n_seqs = IS;                                                                         \
        EDIT;                                                                                      \
        n++;                                                                                       \
    } while (0)
    CASE(ROPEQK_ERR_SEQ_LENGTH, "length + n_new past capacity", cs[n].l[0] = IPS * IMAXP - 2);
    CASE(ROPEQK_ERR_SEQ_LENGTH, "negative length", cs[n].l[2] = -1);
    CASE(ROPEQK_ERR_PAGE_RANGE, "written page out of range", cs[n].t[IMAXP + 1] = 99);
    CASE(ROPEQK_ERR_PAGE_DUPLICATE, "a page twice in a sequence", (cs[n].l[0] = IPS - 1, cs[n].t[1] = cs[n].t[0]));
    CASE(ROPEQK_ERR_PAGE_DUPLICATE, "a page written for two sequences", cs[n].t[2 * IMAXP] = cs[n].t[0]);
    CASE(ROPEQK_ERR_BAD_DTYPE, "k_new of another dtype", cs[n].tk.dtype = ROPEQK_F32);
    CASE(ROPEQK_ERR_BAD_SHAPE, "k_new for another batch size", cs[n].n_seqs = 2);
    CASE(ROPEQK_ERR_BAD_SHAPE, "v_new with another n_new", cs[n].tv = ropeqk_tensor_bhsd(c->vdt, IS, IHKV, 2, ID));
    CASE(ROPEQK_ERR_BAD_SHAPE, "k_new with another head dim", cs[n].tk = ropeqk_tensor_bhsd(c->kdt, IS, IHKV, nn, 16));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "k_new buffer too small", cs[n].kn.buf = dm_buffer(small));
    CASE(ROPEQK_ERR_BUFFER_TOO_SMALL, "V cache too small", cs[n].vc.buf = dm_buffer(small));
    CASE(ROPEQK_ERR_OVERLAP, "K cache over the V cache", cs[n].kc.buf = dm_buffer(f.b.v));
    CASE(ROPEQK_ERR_OVERLAP, "new rows inside the K cache", (cs[n].kn.buf = dm_buffer(f.b.k), cs[n].vn.buf = dm_buffer(f.b.k)));
    CASE(ROPEQK_ERR_NULL_POINTER, "no v_new buffer", cs[n].vn.buf = NULL);
#undef CASE
    for (int i = 0; i < n; i++) {
        ropeqk_paged_batch b = good;
        b.page_table = cs[i].t;
        b.seq_lens = cs[i].l;
        b.n_seqs = cs[i].n_seqs;
        ropeqk_paged_cache cc = {cs[i].kc, cs[i].vc, {0}, {0}};
        ropeqk_status st = rqs_paged_append_wait(f.pl, &cs[i].tk, cs[i].kn, &cs[i].tv, cs[i].vn, &cc, &b);
        cr_expect_eq(st, cs[i].want, "%s: got %d %s (%s)", cs[i].what, st, ropeqk_status_string(st),
                     ropeqk_last_error());
    }
    ropeqk_paged_cache gc = {kc, vc, {0}, {0}};
    cr_expect_eq(rqs_paged_append_wait(f.pl, &tkn, kn, &tvn, vn, &gc, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(rqs_paged_append_wait(NULL, &tkn, kn, &tvn, vn, &gc, &good), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(rqs_paged_append_wait(f.pl, &tkn, kn, &tvn, vn, NULL, &good), ROPEQK_ERR_NULL_POINTER);
    expect_untouched(f.b.k, 0xA5, "K cache");
    expect_untouched(f.b.v, 0xA5, "V cache");
    /* and the good one goes through */
    cr_expect_eq(rqs_paged_append_wait(f.pl, &tkn, kn, &tvn, vn, &gc, &good), ROPEQK_SUCCESS, "%s",
                 ropeqk_last_error());
    dm_free(bkn), dm_free(bvn), dm_free(small);
    pfix_free(&f);
}

/* ---- one plan, several threads ----------------------------------------------------------------- */
/* Runs the plan (on the context's queue, from the calling thread) with batches of 1..IS sequences
 * (the kernels' arguments and, on Vulkan, the recorded metadata change every call), the full batch
 * last. */
static ropeqk_status paged_loop(dm_buf *out, int iters, void *user)
{
    pfix *f = user;
    ropeqk_paged_batch b = batch_of(&f->c, &f->d);
    ropeqk_paged_args a = args_of(&f->c, &f->b); /* a plan without LSE: no lse */
    a.out = dm_whole(out);
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < iters && !st; i++) {
        b.n_seqs = i == iters - 1 ? IS : 1 + i % IS;
        st = rqs_paged_run_wait(f->pl, &a, &b);
    }
    return st;
}

Test(paged, one_plan_enqueued_from_four_threads)
{
    static pfix f;
    pfix_make(&f);
    /* pfix_make makes an LSE plan: remake it without, so each thread needs only its own output */
    ropeqk_plan_destroy(f.pl);
    f.c.with_lse = false;
    ropeqk_plan_desc desc = desc_of(&f.c, &f.d);
    cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &f.pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    th_expect_threads_match_lone_run(th_ctx, f.d.ob, 40, paged_loop, &f);
    pfix_free(&f);
}

/* The paged kernels' arguments against cl/contract.h: tests/neutral/test_plan.c (one test for every kernel). */
