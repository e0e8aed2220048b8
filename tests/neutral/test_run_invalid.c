/* Refusals of the neutral run API (ropeqk.h), on every backend present: each invalid argument of
 * ropeqk_plan_run, ropeqk_paged_run and ropeqk_paged_append gets its status, a message naming the
 * call, no event, and nothing runs (the outputs keep their bytes); the thread's message survives a
 * successful call. */
#include "paged_fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(run_invalid, .init = th_ctx_init, .fini = th_ctx_fini);

enum { B = 1, HQ = 2, HKV = 1, SQ = 3, SK = 5, D = 8 };
#define QB ((size_t)(B * HQ * SQ * D * 4))
#define KB ((size_t)(B * HKV * SK * D * 4))
#define OB ((size_t)(B * HQ * SQ * SK * 4))

static ropeqk_buffer *make(ropeqk_ctx *ctx, size_t n, uint32_t word)
{
    ropeqk_buffer *b = NULL;
    TH_OK(ropeqk_buffer_create(ctx, n, 0, &b));
    TH_OK(ropeqk_buffer_fill(b, 0, ropeqk_buffer_size(b), word));
    return b;
}

/* Every byte of the buffer still `word`'s (nothing ran into it). */
static void untouched(const ropeqk_buffer *b, uint32_t word, const char *what)
{
    size_t n = (size_t)ropeqk_buffer_size(b);
    uint32_t *h = malloc(n);
    cr_assert(h);
    TH_OK(ropeqk_ctx_finish(th_ctx));
    TH_OK(ropeqk_buffer_read(b, 0, h, n));
    for (size_t i = 0; i < n / 4; i++)
        cr_assert_eq(h[i], word, "%s: word %zu written by a refused call", what, i);
    free(h);
}

static ropeqk_plan *scores_plan(ropeqk_positions pos, int64_t max_keys)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .q = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, D),
                          .k = ropeqk_tensor_bhsd(ROPEQK_F32, B, HKV, SK, D),
                          .out = ropeqk_tensor_bhsd(ROPEQK_F32, B, HQ, SQ, SK), .positions = pos, .max_keys = max_keys};
    ropeqk_default_params(&d.params);
    ropeqk_plan *pl = NULL;
    TH_OK(ropeqk_plan_create(th_ctx, &d, &pl));
    return pl;
}

Test(run_invalid, plan_run)
{
    const uint32_t W = 0x7FC0DEADu;
    ropeqk_plan *pl = scores_plan(ROPEQK_POS_OFFSETS, 0), *dec = scores_plan(ROPEQK_POS_ARRAYS, SK);
    ropeqk_buffer *q = make(th_ctx, QB, 0x3c000000u), *k = make(th_ctx, KB, 0x3c000000u), *o = make(th_ctx, OB, W);
    ropeqk_buffer *small = make(th_ctx, OB - 4, W), *both = make(th_ctx, QB + OB, W), *pos = make(th_ctx, 64, 0);
    ropeqk_ctx *other = NULL;
    TH_OK(ropeqk_ctx_create(NULL, &other)); /* a context of its own (OpenCL: another cl_context; Vulkan: VkDevice) */
    ropeqk_buffer *foreign = NULL;
    TH_OK(ropeqk_buffer_create(other, OB, 0, &foreign));
    ropeqk_event *fev = NULL;
    ropeqk_copy fc = {foreign, 0, foreign, 64, 32};
    TH_OK(ropeqk_buffer_copy(&fc, 1, 0, NULL, &fev));
    const ropeqk_args good = {.q = {q, 0}, .k = {k, 0}, .out = {o, 0}};
    ropeqk_step step = {.n_keys = SK, .q_pos_offset = 0, .k_pos_offset = 0};
    ropeqk_event *none[1] = {NULL}, *foreign_ev[1] = {fev};
    struct {
        const char *name;
        ropeqk_plan *pl;
        ropeqk_args a;
        const ropeqk_step *step;
        uint32_t nw;
        ropeqk_event *const *w;
        ropeqk_status st;
    } cases[] = {
        {"q missing", pl, {.k = {k, 0}, .out = {o, 0}}, NULL, 0, NULL, ROPEQK_ERR_NULL_POINTER},
        {"out of another context", pl, {.q = {q, 0}, .k = {k, 0}, .out = {foreign, 0}}, NULL, 0, NULL,
         ROPEQK_ERR_BAD_PARAM},
        {"out too small", pl, {.q = {q, 0}, .k = {k, 0}, .out = {small, 0}}, NULL, 0, NULL,
         ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"out past its buffer", pl, {.q = {q, 0}, .k = {k, 0}, .out = {o, 8}}, NULL, 0, NULL,
         ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"offset past 2^64", pl, {.q = {q, UINT64_MAX - 3}, .k = {k, 0}, .out = {o, 0}}, NULL, 0, NULL,
         ROPEQK_ERR_BUFFER_TOO_SMALL},
        {"q misaligned", pl, {.q = {both, 2}, .k = {k, 0}, .out = {o, 0}}, NULL, 0, NULL, ROPEQK_ERR_BAD_STRIDES},
        {"out overlapping q", pl, {.q = {both, 0}, .k = {k, 0}, .out = {both, QB - 8}}, NULL, 0, NULL,
         ROPEQK_ERR_OVERLAP},
        {"a step for a fixed plan", pl, good, &step, 0, NULL, ROPEQK_ERR_BAD_PARAM},
        {"positions for an offsets plan", pl, {.q = {q, 0}, .k = {k, 0}, .k_pos = {pos, 0}, .out = {o, 0}}, NULL, 0,
         NULL, ROPEQK_ERR_BAD_PARAM},
        {"a decode plan without a step", dec, good, NULL, 0, NULL, ROPEQK_ERR_NULL_POINTER},
        {"a wait count without a list", pl, good, NULL, 1, NULL, ROPEQK_ERR_NULL_POINTER},
        {"a NULL event", pl, good, NULL, 1, none, ROPEQK_ERR_NULL_POINTER},
        {"an event of another device", pl, good, NULL, 1, foreign_ev, ROPEQK_ERR_BAD_PARAM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ropeqk_event *e = (ropeqk_event *)1;
        ropeqk_status st = ropeqk_plan_run(cases[i].pl, &cases[i].a, cases[i].step, cases[i].nw, cases[i].w, &e);
        cr_expect_eq(st, cases[i].st, "%s: %s (%s)", cases[i].name, ropeqk_status_string(st), ropeqk_last_error());
        cr_expect_null(e, "%s: an event for a refused run", cases[i].name);
        cr_expect(strncmp(ropeqk_last_error(), "ropeqk_plan_run: ", 17) == 0, "%s: message '%s'", cases[i].name,
                  ropeqk_last_error());
    }
    ropeqk_event *e = (ropeqk_event *)1;
    cr_expect_eq(ropeqk_plan_run(NULL, &good, NULL, 0, NULL, &e), ROPEQK_ERR_NULL_POINTER);
    cr_expect_null(e);
    cr_expect_eq(ropeqk_plan_run(pl, NULL, NULL, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    untouched(o, W, "out"), untouched(small, W, "small"), untouched(both, W, "both");
    /* a successful run leaves the thread's message of the last failure as it was */
    cr_assert_eq(ropeqk_plan_run(pl, &cases[0].a, NULL, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    char before[256];
    snprintf(before, sizeof before, "%s", ropeqk_last_error());
    TH_OK(ropeqk_plan_run(pl, &good, NULL, 0, NULL, NULL));
    cr_expect_str_eq(ropeqk_last_error(), before);
    TH_OK(ropeqk_ctx_finish(th_ctx));
    TH_OK(ropeqk_event_wait(fev, UINT64_MAX));
    ropeqk_event_release(fev);
    ropeqk_buffer *all[] = {q, k, o, small, both, pos, foreign};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ropeqk_buffer_destroy(all[i]);
    ropeqk_ctx_destroy(other);
    ropeqk_plan_destroy(pl), ropeqk_plan_destroy(dec);
}

Test(run_invalid, paged)
{
    const uint32_t W = 0x7FC0DEADu;
    uint64_t rng = 27;
    pcase c = base_case("run_invalid");
    c.Hq = 2, c.Hkv = 1, c.D = 16, c.Dv = 16, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 4, c.spare_pages = 1;
    c.lens[0] = 20, c.lens[1] = 9;
    pdata d;
    pdata_make(&c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(&c, &d);
    ropeqk_plan *pl = NULL, *sc = scores_plan(ROPEQK_POS_OFFSETS, 0);
    TH_OK(ropeqk_plan_create(th_ctx, &desc, &pl));
    ropeqk_buffer *q = make(th_ctx, d.qb, 0), *k = make(th_ctx, d.kb, 0), *v = make(th_ctx, d.vb, 0);
    ropeqk_buffer *o = make(th_ctx, d.ob, W), *l = make(th_ctx, d.lb, W);
    ropeqk_paged_batch b = batch_of(&c, &d);
    ropeqk_paged_args a = {.q = {q, 0}, .k_cache = {k, 0}, .v_cache = {v, 0}, .out = {o, 0}, .lse = {l, 0}};
    ropeqk_event *e = (ropeqk_event *)1;
    /* the plan's operation */
    ropeqk_args sa = {.q = {q, 0}, .k = {k, 0}, .out = {o, 0}};
    cr_expect_eq(ropeqk_plan_run(pl, &sa, NULL, 0, NULL, &e), ROPEQK_ERR_BAD_PARAM);
    cr_expect(strstr(ropeqk_last_error(), "ropeqk_paged_run"), "%s", ropeqk_last_error());
    cr_expect_eq(ropeqk_paged_run(sc, &a, &b, 0, NULL, &e), ROPEQK_ERR_BAD_PARAM);
    cr_expect_null(e);
    /* the batch, the views, the buffers' owner */
    int32_t bad_table[8];
    memcpy(bad_table, d.table, sizeof bad_table);
    bad_table[0] = (int32_t)d.num_pages;
    ropeqk_paged_batch bb = b;
    bb.page_table = bad_table;
    e = (ropeqk_event *)1;
    cr_expect_eq(ropeqk_paged_run(pl, &a, &bb, 0, NULL, &e), ROPEQK_ERR_PAGE_RANGE, "%s", ropeqk_last_error());
    cr_expect(strncmp(ropeqk_last_error(), "ropeqk_paged_run: ", 18) == 0, "%s", ropeqk_last_error());
    cr_expect_null(e);
    ropeqk_paged_args lse_missing = a;
    lse_missing.lse = (ropeqk_mem){NULL, 0};
    cr_expect_eq(ropeqk_paged_run(pl, &lse_missing, &b, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    ropeqk_paged_args overlap = a;
    overlap.out = (ropeqk_mem){q, 0};
    cr_expect_eq(ropeqk_paged_run(pl, &overlap, &b, 0, NULL, NULL), ROPEQK_ERR_OVERLAP, "%s", ropeqk_last_error());
    cr_expect_eq(ropeqk_paged_run(pl, &a, NULL, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    ropeqk_ctx *other = NULL;
    TH_OK(ropeqk_ctx_create(NULL, &other));
    ropeqk_buffer *foreign = NULL;
    TH_OK(ropeqk_buffer_create(other, d.qb, 0, &foreign));
    ropeqk_paged_args fa = a;
    fa.q = (ropeqk_mem){foreign, 0};
    cr_expect_eq(ropeqk_paged_run(pl, &fa, &b, 0, NULL, NULL), ROPEQK_ERR_BAD_PARAM);
    /* the append: its rows' shape, the lengths, NULLs */
    ropeqk_tensor kn = ropeqk_tensor_bhsd(ROPEQK_F32, c.n_seqs, c.Hkv, 1, c.D), vn = kn, wrong = kn;
    wrong.ne[3] = c.D / 2, wrong.nb[2] = wrong.nb[1] = c.D / 2 * 4, wrong.nb[0] = c.Hkv * wrong.nb[1];
    ropeqk_paged_cache cache = {.k_cache = {o, 0}, .v_cache = {l, 0}}; /* never written: refused first */
    ropeqk_buffer *nb = make(th_ctx, ropeqk_tensor_extent(&kn), 0);
    ropeqk_mem nm = {nb, 0};
    int32_t full[2] = {(int32_t)(c.maxp * c.ps), 1};
    ropeqk_paged_batch fb = b;
    fb.seq_lens = full;
    e = (ropeqk_event *)1;
    cr_expect_eq(ropeqk_paged_append(pl, &wrong, nm, &vn, nm, &cache, &b, 0, NULL, &e), ROPEQK_ERR_BAD_SHAPE);
    cr_expect_null(e);
    cr_expect_eq(ropeqk_paged_append(pl, &kn, nm, &vn, nm, &cache, &fb, 0, NULL, NULL), ROPEQK_ERR_SEQ_LENGTH);
    cr_expect_eq(ropeqk_paged_append(pl, &kn, nm, &vn, nm, NULL, &b, 0, NULL, NULL), ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_paged_append(pl, &kn, (ropeqk_mem){NULL, 0}, &vn, nm, &cache, &b, 0, NULL, NULL),
                 ROPEQK_ERR_NULL_POINTER);
    cr_expect_eq(ropeqk_paged_append(sc, &kn, nm, &vn, nm, &cache, &b, 0, NULL, NULL), ROPEQK_ERR_BAD_PARAM);
    untouched(o, W, "out / K cache"), untouched(l, W, "lse / V cache");
    ropeqk_buffer *all[] = {q, k, v, o, l, nb, foreign};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ropeqk_buffer_destroy(all[i]);
    ropeqk_ctx_destroy(other);
    ropeqk_plan_destroy(pl), ropeqk_plan_destroy(sc);
    pdata_free(&d);
}
