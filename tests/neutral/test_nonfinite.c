/* Non-finite keys and values (docs/conventions.md section 9, issue 28), on either backend and, under
 * ROPEQK_PROFILE=gpu, the GPU kernels: a masked key weighs exactly nothing whatever its K and V slots
 * hold (NaN, +-inf), and a row that sees a non-finite key gets NaN in O and LSE.
 * Every case runs once with finite data (the baseline), then with a NaN or an infinity planted in one
 * element of a K or V row (or, for an 8-bit cache, in its code or its row scale) and compares row by
 * row, on the device and on the fp64 reference alike:
 *   - a row that does not see the planted key: bit-identical to the baseline (O and LSE);
 *   - a row that sees a planted K: every element of O and its LSE NaN;
 *   - a row that sees a planted V element: that column of O non-finite (NaN for a NaN), the other
 *     columns and the LSE bit-identical (LSE does not depend on V); on Vulkan the row may instead be
 *     NaN in every dim and in LSE (the tensor-core path's rule, glsl/cm_attn.comp: its matrix
 *     products cannot carry one dim's NaN; docs/conventions.md section 9);
 *   - a fully masked row: O exactly 0, LSE -inf (or the sink's logit), whatever the data.
 * The planted keys sit where the kernels' tiles and splits have edges (first and last keys of blocks
 * of 16 and tiles of 32 and 64, page and split boundaries), as future keys (causal) and keys outside a
 * sliding window; the paged cases also put NaN bytes in every slot past a sequence's length and in
 * pages no sequence uses (the fixture's 0xFF), against a baseline with zeros there.
 * Seed: ROPEQK_TEST_SEED (default 20261201), named in every failure message. */
#include "paged_fixture.h"
#include "quant.h"

#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(nonfinite, .init = th_ctx_init, .fini = th_ctx_fini);

/* What is planted: a value in an element of K or of V. */
typedef struct {
    bool in_v;
    float val;
} bad;
static const bad KINDS[6] = {{false, NAN}, {true, NAN}, {false, INFINITY}, {false, -INFINITY}, {true, INFINITY},
                             {true, -INFINITY}};

static void put_val(unsigned char *p, ropeqk_dtype dt, float x)
{
    uint16_t h = dt == ROPEQK_F16 ? rqs_float_to_half(x) : rqs_float_to_bf16(x);
    if (dt == ROPEQK_F32)
        memcpy(p, &x, 4);
    else
        memcpy(p, &h, 2);
}

static double get_val(const unsigned char *p, ropeqk_dtype dt)
{
    uint16_t h;
    float f;
    double g;
    switch (dt) {
    case ROPEQK_F16: memcpy(&h, p, 2); return rqs_half_to_float(h);
    case ROPEQK_BF16: memcpy(&h, p, 2); return rqs_bf16_to_float(h);
    case ROPEQK_F64: memcpy(&g, p, 8); return g;
    default: memcpy(&f, p, 4); return f;
    }
}

static bool sees(const ropeqk_params *p, int64_t pq, int64_t pk)
{
    return !((p->causal && pk > pq) || (p->window > 0 && pq - pk >= p->window));
}

/* How row (of the views below) relates to the planted element: 0 it does not see it, 1 it sees a
 * planted K, 2 it sees a planted V element in column col (-1: every column, an 8-bit row scale). */
typedef struct {
    const char *what; /* case, kind and key, for messages */
    const ropeqk_tensor *to, *tl;
    const unsigned char *o0, *o1, *l0, *l1; /* baseline and planted O and LSE */
    bool row_rule; /* a row that sees a planted V may be NaN whole (O and LSE): Vulkan's tensor cores */
} rows_cmp;

/* Checks one row (b, h, i) in `state`; returns whether it holds (logging the first few failures). */
static bool check_row(const rows_cmp *r, int64_t b, int64_t h, int64_t i, int state, int64_t col, bool nan,
                      int *logged)
{
    const ropeqk_tensor *to = r->to, *tl = r->tl;
    size_t oes = ropeqk_dtype_size(to->dtype), les = ropeqk_dtype_size(tl->dtype);
    size_t lo = off4(tl, b, h, i, 0);
    double l1 = get_val(r->l1 + lo, tl->dtype);
    if (state == 2 && r->row_rule && isnan(l1))
        state = 1; /* the whole row NaN, as for a planted K */
    bool ok = state == 1 ? isnan(l1) : memcmp(r->l0 + lo, r->l1 + lo, les) == 0;
    int64_t bad_d = -1;
    for (int64_t d = 0; d < to->ne[3] && ok; d++) {
        size_t o = off4(to, b, h, i, d);
        double x = get_val(r->o1 + o, to->dtype);
        if (state == 1 || (state == 2 && (col < 0 || d == col)))
            ok = state == 1 || nan ? isnan(x) : !isfinite(x);
        else
            ok = memcmp(r->o0 + o, r->o1 + o, oes) == 0;
        bad_d = ok ? -1 : d;
    }
    if (!ok && (*logged)++ < 4)
        cr_log_error("%s: row (b %lld, h %lld, i %lld) %s: LSE %g (baseline %g), dim %lld", r->what, (long long)b,
                     (long long)h, (long long)i,
                     state == 0 ? "does not see the key: not bit-identical" : "sees the key: not as the rule says",
                     l1, get_val(r->l0 + lo, tl->dtype), (long long)bad_d);
    return ok;
}

/* ---- dense attention (ropeqk_attention: few rows through the paged kernels, more through the
 * attention kernels) ------------------------------------------------------------------------- */
typedef struct {
    const char *name;
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    ropeqk_params p;
    ropeqk_dtype dt, odt;
    int64_t keys[10]; /* planted keys (batch B-1, KV head Hkv-1), -1 ends */
    int64_t kdim, vcol; /* the planted element of a K row, of a V row */
    bool arrays;        /* positions as per-token arrays (the same values as the offsets) */
} dcase;

typedef struct {
    ropeqk_tensor q, k, v, o, l, o64, l64;
} dviews;

/* With c->arrays the positions go as arrays (the kernels' per-token paths; few rows then take the
 * attention kernels, not the dense decode), holding the offsets' values. */
static void dense_outputs(const dcase *c, const dviews *t, const void *q, const void *k, const void *v, void *o,
                          void *l, void *o64, void *l64)
{
    ropeqk_params p = c->p;
    int32_t *qp = NULL, *kp = NULL;
    if (c->arrays) {
        cr_assert((qp = malloc((size_t)c->Sq * 4)) && (kp = malloc((size_t)c->Sk * 4)));
        for (int64_t i = 0; i < c->Sq; i++)
            qp[i] = (int32_t)(p.q_pos_offset + i);
        for (int64_t j = 0; j < c->Sk; j++)
            kp[j] = (int32_t)(p.k_pos_offset + j);
        p.q_pos_offset = p.k_pos_offset = 0;
    }
    ropeqk_status st = ropeqk_attention(th_ctx, &p, &t->q, q, &t->k, k, &t->v, v, qp, kp, &t->o, o, &t->l, l);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s", c->name, ropeqk_status_string(st), ropeqk_last_error());
    st = ropeqk_attention_ref(&p, &t->q, q, &t->k, k, &t->v, v, qp, kp, &t->o64, o64, &t->l64, l64);
    free(qp), free(kp);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: reference: %s", c->name, ropeqk_last_error());
}

static void dense_case(const dcase *c, uint64_t seed)
{
    dviews t = {.q = ropeqk_tensor_bhsd(c->dt, c->B, c->Hq, c->Sq, c->D),
                .k = ropeqk_tensor_bhsd(c->dt, c->B, c->Hkv, c->Sk, c->D),
                .v = ropeqk_tensor_bhsd(c->dt, c->B, c->Hkv, c->Sk, c->Dv),
                .o = ropeqk_tensor_bhsd(c->odt, c->B, c->Hq, c->Sq, c->Dv),
                .l = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, 1),
                .o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Dv),
                .l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1)};
    const ropeqk_tensor *in[3] = {&t.q, &t.k, &t.v};
    unsigned char *data[3];
    uint64_t rng = seed;
    for (int i = 0; i < 3; i++) {
        size_t es = ropeqk_dtype_size(c->dt), n = ropeqk_tensor_extent(in[i]) / es;
        cr_assert((data[i] = malloc(n * es)));
        for (size_t e = 0; e < n; e++)
            th_put_random(data[i] + e * es, c->dt, &rng);
    }
    size_t kb = ropeqk_tensor_extent(&t.k), vb = ropeqk_tensor_extent(&t.v);
    size_t ob = ropeqk_tensor_extent(&t.o), lb = ropeqk_tensor_extent(&t.l);
    size_t o64b = ropeqk_tensor_extent(&t.o64), l64b = ropeqk_tensor_extent(&t.l64);
    unsigned char *kx = malloc(kb), *vx = malloc(vb), *o[2], *l[2], *o64[2], *l64[2];
    cr_assert(kx && vx);
    for (int i = 0; i < 2; i++)
        cr_assert((o[i] = malloc(ob)) && (l[i] = malloc(lb)) && (o64[i] = malloc(o64b)) && (l64[i] = malloc(l64b)));
    dense_outputs(c, &t, data[0], data[1], data[2], o[0], l[0], o64[0], l64[0]);
    /* the baseline's fully masked rows: O exactly 0, LSE -inf (sinks: s_h) */
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->Sq; i++) {
                bool any = false;
                for (int64_t j = 0; j < c->Sk; j++)
                    any = any || sees(&c->p, c->p.q_pos_offset + i, c->p.k_pos_offset + j);
                float lv;
                memcpy(&lv, l[0] + off4(&t.l, b, h, i, 0), 4);
                if (!any)
                    cr_expect(lv == (c->p.sinks ? c->p.sinks[h] : -INFINITY), "%s (seed %llu): fully masked row "
                              "(h %lld, i %lld): LSE %g", c->name, (unsigned long long)seed, (long long)h,
                              (long long)i, lv);
                else
                    cr_expect(isfinite(lv), "%s (seed %llu): finite data, LSE %g", c->name,
                              (unsigned long long)seed, lv);
            }
    const int64_t G = c->Hq / c->Hkv, bb = c->B - 1, hk = c->Hkv - 1;
    int failed = 0;
    for (int n = 0; n < 10 && c->keys[n] >= 0; n++) {
        const int64_t j = c->keys[n];
        /* a NaN in K and in V at every key, the infinities in turn */
        const int kinds[3] = {0, 1, 2 + n % 4};
        for (int x = 0; x < 3; x++) {
            const bad *bd = &KINDS[kinds[x]];
            memcpy(kx, data[1], kb);
            memcpy(vx, data[2], vb);
            if (bd->in_v)
                put_val(vx + off4(&t.v, bb, hk, j, c->vcol), c->dt, bd->val);
            else
                put_val(kx + off4(&t.k, bb, hk, j, c->kdim), c->dt, bd->val);
            dense_outputs(c, &t, data[0], kx, vx, o[1], l[1], o64[1], l64[1]);
            char what[2][256];
            int64_t nsee = 0, nmask = 0, bad_rows[2] = {0, 0};
            for (int r = 0; r < 2; r++)
                snprintf(what[r], sizeof what[r], "%s (seed %llu)%s: %s %g at key %lld", c->name,
                         (unsigned long long)seed, r ? " fp64 reference" : "", bd->in_v ? "V" : "K",
                         (double)bd->val, (long long)j);
            rows_cmp cmp[2] = {{what[0], &t.o, &t.l, o[0], o[1], l[0], l[1], th_is_vulkan(th_ctx)},
                               {what[1], &t.o64, &t.l64, o64[0], o64[1], l64[0], l64[1], false}};
            int logged[2] = {0, 0};
            for (int64_t b = 0; b < c->B; b++)
                for (int64_t h = 0; h < c->Hq; h++)
                    for (int64_t i = 0; i < c->Sq; i++) {
                        bool s = b == bb && h / G == hk && sees(&c->p, c->p.q_pos_offset + i, c->p.k_pos_offset + j);
                        nsee += s;
                        nmask += b == bb && h / G == hk && !s;
                        int state = s ? (bd->in_v ? 2 : 1) : 0;
                        for (int r = 0; r < 2; r++)
                            bad_rows[r] += !check_row(&cmp[r], b, h, i, state, c->vcol, isnan(bd->val), &logged[r]);
                    }
            cr_expect(nmask > 0, "%s: key %lld is masked for no row of its head: it tests nothing", c->name,
                      (long long)j);
            cr_expect(bad_rows[0] == 0, "%s: %lld of %lld rows break the rule (%lld rows see the key)", what[0],
                      (long long)bad_rows[0], (long long)(c->B * c->Hq * c->Sq), (long long)nsee);
            cr_expect(bad_rows[1] == 0, "%s: %lld rows break the rule", what[1], (long long)bad_rows[1]);
            failed += bad_rows[0] > 0 || bad_rows[1] > 0;
        }
    }
    cr_log_info("%s (seed %llu): %d planted runs failed", c->name, (unsigned long long)seed, failed);
    for (int i = 0; i < 3; i++)
        free(data[i]);
    for (int i = 0; i < 2; i++)
        free(o[i]), free(l[i]), free(o64[i]), free(l64[i]);
    free(kx), free(vx);
}

static dcase dense_base(const char *name)
{
    dcase c;
    memset(&c, 0, sizeof c);
    c.name = name;
    ropeqk_default_params(&c.p);
    c.B = 2, c.Hq = 4, c.Hkv = 2, c.D = 64, c.Dv = 48, c.dt = c.odt = ROPEQK_F32;
    c.kdim = 5, c.vcol = 47;
    for (int i = 0; i < 10; i++)
        c.keys[i] = -1;
    return c;
}

/* Prefill (the attention kernels): 40 rows at positions 110..149 over 150 keys, causal and a window of
 * 60. Future keys 112, 127, 128, 143, 149 (blocks of 16, tiles of 64); keys 51, 63, 64, 80 leave the
 * window of the later rows. */
Test(nonfinite, dense_prefill_causal_window)
{
    dcase c = dense_base("dense prefill causal window 60, Sq 40 Sk 150");
    c.Sq = 40, c.Sk = 150;
    c.p.causal = 1, c.p.window = 60, c.p.q_pos_offset = 110;
    int64_t keys[] = {112, 127, 128, 143, 149, 51, 63, 64, 80, -1};
    memcpy(c.keys, keys, sizeof keys);
    dense_case(&c, pf_seed());
}

/* Prefill with f16 inputs, bf16 output, half-split, partial rotary (the planted K dim passes through
 * unrotated), soft-capping (which would map an infinite score to a finite one), sinks, rows 0..9
 * fully masked (queries before the first key), positions as arrays. */
Test(nonfinite, dense_prefill_f16_softcap_sinks_masked_rows)
{
    static const float sinks[4] = {0.5f, -1.0f, 2.0f, 0.0f};
    dcase c = dense_base("dense prefill f16 in, bf16 out, softcap, sinks, Sq 24 Sk 40");
    c.Sq = 24, c.Sk = 40, c.dt = ROPEQK_F16, c.odt = ROPEQK_BF16, c.kdim = 60, c.vcol = 16;
    c.p.causal = 1, c.p.k_pos_offset = 10, c.p.layout = ROPEQK_HALF_SPLIT, c.p.rotary_dim = 32;
    c.p.softcap = 30, c.p.sinks = sinks, c.p.n_sinks = 4, c.arrays = true;
    int64_t keys[] = {0, 5, 13, 31, -1};
    memcpy(c.keys, keys, sizeof keys);
    dense_case(&c, pf_seed() + 1);
}

/* Decode (few rows: the dense decode through the paged kernels, pages of 64 keys): 4 rows at positions
 * 296..299 over 300 keys, causal and a window of 101. Future keys 297..299; keys 195..198 at the
 * window's edge (a page boundary at 192), and 63, 64, 100 in pages no row reads. */
Test(nonfinite, dense_decode_causal_window)
{
    dcase c = dense_base("dense decode causal window 101, Sq 4 Sk 300");
    c.Sq = 4, c.Sk = 300, c.dt = ROPEQK_BF16;
    c.p.causal = 1, c.p.window = 101, c.p.q_pos_offset = 296;
    int64_t keys[] = {297, 298, 299, 195, 196, 197, 198, 63, 64, 100};
    memcpy(c.keys, keys, sizeof keys);
    dense_case(&c, pf_seed() + 2);
}

/* One decode row, no causal mask (a query before some of its keys), window of 70, positions as arrays
 * (the attention kernels, not the dense decode): keys 0..29 leave the window. */
Test(nonfinite, dense_decode_one_row_window)
{
    dcase c = dense_base("dense decode 1 row, window 70, Sk 260");
    c.Sq = 1, c.Sk = 260, c.B = 1, c.Hq = 8, c.Hkv = 1;
    c.p.window = 70, c.p.q_pos_offset = 99, c.arrays = true; /* sees keys 30..259 (no causal mask) */
    int64_t keys[] = {29, 16, 15, 0, -1};
    memcpy(c.keys, keys, sizeof keys);
    dense_case(&c, pf_seed() + 3);
}

/* ---- paged decode: ragged rows, row groups, the chunk path, 8-bit caches ------------------------ */
typedef struct {
    int s;
    int64_t tok; /* token tok of sequence s, KV head Hkv-1 */
} pplant;

static bool is_q8(ropeqk_dtype dt) { return dt == ROPEQK_I8 || dt == ROPEQK_FP8_E4M3 || dt == ROPEQK_FP8_E5M2; }

static void paged_outputs(const pcase *c, pdata *d, ropeqk_plan *pl, unsigned char *out, unsigned char *lse,
                          double *o64, double *l64, uint64_t seed)
{
    pbufs b;
    pbufs_make(d, &b, false);
    ropeqk_paged_batch batch = batch_of(c, d);
    ropeqk_paged_args a = args_of(c, &b);
    ropeqk_status st = rqs_paged_run_wait(pl, &a, &batch);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): run: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    cr_assert_eq(dm_read(b.o, out), ROPEQK_SUCCESS);
    cr_assert_eq(dm_read(b.l, lse), ROPEQK_SUCCESS);
    pbufs_free(&b);
    for (int64_t s = 0; s < c->n_seqs; s++) { /* packed as the device's rows: [row][Hq][Dv], [row][Hq] */
        pf_seqref r;
        pf_seq_reference(c, d, s, &r, seed);
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < r.ql; i++) {
                l64[(r.r0 + i) * c->Hq + h] = r.rl[h * r.ql + i];
                for (int64_t e = 0; e < c->Dv; e++)
                    o64[((r.r0 + i) * c->Hq + h) * c->Dv + e] = r.ro[(h * r.ql + i) * c->Dv + e];
            }
        pf_seqref_free(&r);
    }
}

/* Plants bd at a token's K (dim kdim) or V (column vcol) in KV head Hkv-1: the value itself in a 16/32-bit
 * cache, the NaN or infinity code of an fp8 cache that has one, else the row's scale. Returns the
 * column of O it reaches (-1: every column, through a V row's scale). */
static int64_t plant(const pcase *c, pdata *d, const pplant *p, const bad *bd, int64_t kdim, int64_t vcol)
{
    const ropeqk_dtype dt = bd->in_v ? c->vdt : c->kdt;
    const ropeqk_tensor *t = bd->in_v ? &d->tv : &d->tk;
    unsigned char *cache = bd->in_v ? d->v : d->k;
    const int64_t page = d->table[p->s * c->maxp + p->tok / c->ps], slot = p->tok % c->ps, hk = c->Hkv - 1;
    const int64_t e = bd->in_v ? vcol : kdim;
    if (!is_q8(dt)) {
        put_val(cache + off4(t, page, hk, slot, e), dt, bd->val);
        return e;
    }
    if (isnan(bd->val) && dt != ROPEQK_I8) { /* e4m3 and e5m2: 0x7F is NaN */
        cache[off4(t, page, hk, slot, e)] = 0x7F;
        return e;
    }
    if (dt == ROPEQK_FP8_E5M2) {
        cache[off4(t, page, hk, slot, e)] = bd->val > 0 ? 0x7C : 0xFC;
        return e;
    }
    (bd->in_v ? d->vs : d->ks)[(page * c->Hkv + hk) * c->ps + slot] = bd->val;
    return -1;
}

/* Every slot that holds no sequence's token made finite: K and V rows 0, 8-bit scales 1. */
static void clean_unused(const pcase *c, pdata *d)
{
    bool *used = calloc((size_t)(d->num_pages * c->ps), 1);
    cr_assert(used);
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t j = 0; j < d->lens[s]; j++)
            used[d->table[s * c->maxp + j / c->ps] * c->ps + j % c->ps] = true;
    size_t kes = ropeqk_dtype_size(c->kdt), ves = ropeqk_dtype_size(c->vdt);
    for (int64_t pg = 0; pg < d->num_pages; pg++)
        for (int64_t sl = 0; sl < c->ps; sl++)
            for (int64_t h = 0; h < c->Hkv && !used[pg * c->ps + sl]; h++) {
                for (int64_t e = 0; e < c->D; e++)
                    memset(d->k + off4(&d->tk, pg, h, sl, e), 0, kes);
                for (int64_t e = 0; e < c->Dv; e++)
                    memset(d->v + off4(&d->tv, pg, h, sl, e), 0, ves);
                if (d->ks)
                    d->ks[(pg * c->Hkv + h) * c->ps + sl] = 1.0f;
                if (d->vs)
                    d->vs[(pg * c->Hkv + h) * c->ps + sl] = 1.0f;
            }
    free(used);
}

/* The baseline with finite data in every unused slot, then each kind of bad value planted at every
 * plant at once over the fixture's data (NaN bytes in every unused slot and scale). */
static void paged_case(const pcase *c, const pplant *pl, int npl, int64_t kdim, int64_t vcol, uint64_t seed)
{
    uint64_t rng = seed;
    pdata d, clean;
    pdata_make(c, &d, &rng);
    ropeqk_plan_desc desc = desc_of(c, &d);
    ropeqk_plan *plan = NULL;
    ropeqk_status st = ropeqk_plan_create(th_ctx, &desc, &plan);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: plan: %s", c->name, ropeqk_last_error());
    unsigned char *k0 = d.k, *v0 = d.v, *kx = malloc(d.kb), *vx = malloc(d.vb);
    float *ks0 = d.ks, *vs0 = d.vs, *ksx = d.ksb ? malloc(d.ksb) : NULL, *vsx = d.vsb ? malloc(d.vsb) : NULL;
    cr_assert(kx && vx && (!d.ksb || ksx) && (!d.vsb || vsx));
    const size_t nrow = (size_t)(d.rows * c->Hq);
    unsigned char *o[2], *l[2];
    double *o64[2], *l64[2];
    for (int i = 0; i < 2; i++)
        cr_assert((o[i] = malloc(d.ob)) && (l[i] = malloc(d.lb)) && (o64[i] = malloc(nrow * (size_t)c->Dv * 8)) &&
                  (l64[i] = malloc(nrow * 8)));
    clean = d;
    clean.k = kx, clean.v = vx, clean.ks = ksx, clean.vs = vsx;
    memcpy(kx, k0, d.kb), memcpy(vx, v0, d.vb);
    if (ksx)
        memcpy(ksx, ks0, d.ksb);
    if (vsx)
        memcpy(vsx, vs0, d.vsb);
    clean_unused(c, &clean);
    paged_outputs(c, &clean, plan, o[0], l[0], o64[0], l64[0], seed);
    ropeqk_tensor r64 = ropeqk_tensor_bhsd(ROPEQK_F64, d.rows, c->Hq, 1, c->Dv);
    ropeqk_tensor rl64 = ropeqk_tensor_bhsd(ROPEQK_F64, d.rows, c->Hq, 1, 1);
    const int64_t G = c->Hq / c->Hkv;
    for (int x = 0; x < 6; x++) {
        const bad *bd = &KINDS[x];
        memcpy(kx, k0, d.kb), memcpy(vx, v0, d.vb);
        if (ksx)
            memcpy(ksx, ks0, d.ksb);
        if (vsx)
            memcpy(vsx, vs0, d.vsb);
        int64_t col = vcol;
        for (int i = 0; i < npl; i++)
            col = plant(c, &clean, &pl[i], bd, kdim, vcol);
        paged_outputs(c, &clean, plan, o[1], l[1], o64[1], l64[1], seed);
        char what[2][256];
        for (int r = 0; r < 2; r++)
            snprintf(what[r], sizeof what[r], "%s (seed %llu)%s: %s %g", c->name, (unsigned long long)seed,
                     r ? " fp64 reference" : "", bd->in_v ? "V" : "K", (double)bd->val);
        rows_cmp cmp[2] = {{what[0], &d.to, &d.tl, o[0], o[1], l[0], l[1], th_is_vulkan(th_ctx)},
                           {what[1], &r64, &rl64, (unsigned char *)o64[0], (unsigned char *)o64[1],
                            (unsigned char *)l64[0], (unsigned char *)l64[1], false}};
        int logged[2] = {0, 0};
        int64_t bad_rows[2] = {0, 0}, nsee = 0;
        for (int64_t s = 0; s < c->n_seqs; s++)
            for (int64_t i = 0; i < d.qind[s + 1] - d.qind[s]; i++)
                for (int64_t h = 0; h < c->Hq; h++) {
                    bool see = false;
                    for (int n = 0; n < npl; n++)
                        see = see || (pl[n].s == s && h / G == c->Hkv - 1 &&
                                      sees(&c->p, (int64_t)d.qpos[s] + i, (int64_t)d.kpos0[s] + pl[n].tok));
                    nsee += see;
                    for (int r = 0; r < 2; r++)
                        bad_rows[r] += !check_row(&cmp[r], d.qind[s] + i, h, 0, see ? (bd->in_v ? 2 : 1) : 0, col,
                                                  isnan(bd->val), &logged[r]);
                }
        cr_expect(bad_rows[0] == 0, "%s: %lld of %lld rows break the rule (%lld see a planted key)", what[0],
                  (long long)bad_rows[0], (long long)nrow, (long long)nsee);
        cr_expect(bad_rows[1] == 0, "%s: %lld rows break the rule", what[1], (long long)bad_rows[1]);
    }
    for (int n = 0; n < npl; n++) { /* each plant is masked for some row of its head: it tests something */
        int64_t nmask = 0, s = pl[n].s;
        for (int64_t i = 0; i < d.qind[s + 1] - d.qind[s]; i++)
            nmask += !sees(&c->p, (int64_t)d.qpos[s] + i, (int64_t)d.kpos0[s] + pl[n].tok);
        cr_expect(nmask > 0 && pl[n].tok < d.lens[s], "%s: plant %d (token %lld) tests nothing", c->name, n,
                  (long long)pl[n].tok);
    }
    for (int i = 0; i < 2; i++)
        free(o[i]), free(l[i]), free(o64[i]), free(l64[i]);
    free(kx), free(vx), free(ksx), free(vsx);
    ropeqk_plan_destroy(plan);
    pdata_free(&d);
}

/* The issue's cases: int8 caches, one KV head of 4 query heads, D 128, pages of 16, causal: a
 * speculative step of 4 rows over 24 tokens (token 22 is future to rows 0 and 1: the CPU profile's
 * row groups), a prefill chunk of 20 rows over 40 tokens (token 25 future to rows 0..4: the chunk
 * path), a decode row and a step of 2 (token 69 future to row 0). */
Test(nonfinite, paged_issue_int8_spec_chunk)
{
    pcase c = base_case("paged int8 causal: steps of 4, 20 (chunk), 1, 2");
    c.Hq = 4, c.Hkv = 1, c.D = 128, c.Dv = 128, c.n_seqs = 4, c.max_seqs = 4, c.maxp = 20, c.ragged = true;
    int64_t lens[] = {24, 40, 300, 70}, ql[] = {4, 20, 1, 2};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.kdt = c.vdt = ROPEQK_I8;
    c.p.causal = 1;
    const pplant pl[] = {{0, 22}, {1, 25}, {3, 69}};
    paged_case(&c, pl, 3, 7, 100, pf_seed() + 10);
}

/* f32, GQA 8/2, Dv 40 (a tail of V dims past the 16-lane chunks), causal + window 33, sinks: a chunk of
 * 20 rows (token 25 future), a decode row of 3000 tokens (keys past its window at split and page
 * boundaries and at the window's edge), 5 rows (53 leaves the window of rows 1.., 88 is future to rows
 * 0..2), a chunk of 17 rows over its 17 tokens (16 future to rows 0..15) */
Test(nonfinite, paged_f32_window_sinks_gqa)
{
    static const float sinks[8] = {0.5f, -1.0f, 1.0f, 0.0f, 2.0f, -3.0f, 0.25f, 1.5f};
    pcase c = base_case("paged f32 causal window 33 sinks: 20 (chunk), 1, 5, 17 (chunk) rows");
    c.Dv = 40, c.n_seqs = 4, c.max_seqs = 4, c.maxp = 200, c.ragged = true;
    int64_t lens[] = {40, 3000, 90, 17}, ql[] = {20, 1, 5, 17};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.p.causal = 1, c.p.window = 33, c.p.sinks = sinks, c.p.n_sinks = 8;
    const pplant pl[] = {{0, 25}, {1, 2966}, {1, 2960}, {1, 2048}, {1, 2047}, {1, 1536}, {1, 511},
                         {2, 53}, {2, 88}, {3, 16}};
    paged_case(&c, pl, 10, 3, 39, pf_seed() + 11);
}

/* fp8 caches (e4m3 K: its NaN code; e5m2 V: its NaN and infinity codes), BSHD, f16 Q and output,
 * GQA 6/3, pages of 32, causal: a step of 4 (97 future to row 0), a chunk of 64 rows over its 64
 * tokens (32 future to rows 0..31), a decode row */
Test(nonfinite, paged_fp8_bshd_chunk)
{
    pcase c = base_case("paged e4m3 K e5m2 V bshd f16: 4, 64 (chunk), 1 rows");
    c.Hq = 6, c.Hkv = 3, c.ps = 32, c.n_seqs = 3, c.max_seqs = 3, c.maxp = 20, c.ragged = true, c.bshd_cache = true;
    int64_t lens[] = {100, 64, 500}, ql[] = {4, 64, 1};
    memcpy(c.lens, lens, sizeof lens);
    memcpy(c.qlens, ql, sizeof ql);
    c.kdt = ROPEQK_FP8_E4M3, c.vdt = ROPEQK_FP8_E5M2, c.qdt = c.odt = ROPEQK_F16;
    c.p.causal = 1;
    const pplant pl[] = {{0, 97}, {1, 32}};
    paged_case(&c, pl, 2, 40, 0, pf_seed() + 12);
}

/* ---- scores: a masked entry is exactly -inf whatever K holds ----------------------------------- */
static void scores_case(int64_t Sq, int64_t Sk, int64_t qoff, int64_t window, const int64_t *keys, int nkeys,
                        uint64_t seed)
{
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.causal = 1, p.window = window, p.q_pos_offset = qoff;
    const int64_t Hq = 4, Hkv = 2, D = 64;
    ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, D), k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hkv, Sk, D);
    ropeqk_tensor o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, Hq, Sq, Sk);
    size_t qn = (size_t)(Hq * Sq * D), kn = (size_t)(Hkv * Sk * D), on = (size_t)(Hq * Sq * Sk);
    float *qd = malloc(qn * 4), *kd = malloc(kn * 4), *o0 = malloc(on * 4), *o1 = malloc(on * 4);
    cr_assert(qd && kd && o0 && o1);
    uint64_t rng = seed;
    rqs_fill_f32(qd, qn, &rng);
    rqs_fill_f32(kd, kn, &rng);
    ropeqk_status st = ropeqk_scores(th_ctx, &p, &q, qd, &k, kd, NULL, NULL, &o, o0);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    for (int n = 0; n < nkeys; n++) /* NaN in every dim of the key, both KV heads */
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t e = 0; e < D; e++)
                kd[(h * Sk + keys[n]) * D + e] = NAN;
    st = ropeqk_scores(th_ctx, &p, &q, qd, &k, kd, NULL, NULL, &o, o1);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    int64_t wrong = 0, masked = 0;
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < Sq; i++)
            for (int64_t j = 0; j < Sk; j++) {
                size_t e = (size_t)((h * Sq + i) * Sk + j);
                bool planted = false;
                for (int n = 0; n < nkeys; n++)
                    planted = planted || keys[n] == j;
                if (!sees(&p, qoff + i, j)) {
                    masked += planted;
                    wrong += !(isinf(o1[e]) && o1[e] < 0);
                } else {
                    wrong += planted ? !isnan(o1[e]) : memcmp(&o0[e], &o1[e], 4) != 0;
                }
            }
    cr_expect(masked > 0, "Sq %lld: no planted key is masked anywhere", (long long)Sq);
    cr_expect_eq(wrong, 0, "scores Sq %lld Sk %lld (seed %llu): %lld entries wrong (masked: not -inf; others "
                 "changed)", (long long)Sq, (long long)Sk, (unsigned long long)seed, (long long)wrong);
    free(qd), free(kd), free(o0), free(o1);
}

Test(nonfinite, scores_masked_entries)
{
    const int64_t prefill[] = {51, 63, 64, 112, 127, 128, 149}, decode[] = {197, 198, 199, 60};
    scores_case(40, 150, 110, 60, prefill, 7, pf_seed() + 20);
    scores_case(3, 300, 297, 101, decode, 4, pf_seed() + 21); /* few rows: the decode kernels */
}
