/* The edges of the Vulkan attention shader's tiles (glsl/attention.comp), against the fp64 path
 * (ropeqk_attention_ref) by the attention metric of docs/conventions.md with the sweep's bounds: O
 * within 1e-5 of max |V| (plus half an ulp of an f16/bf16 output), LSE within 1e-5 relative, -inf
 * exactly where the reference has it. For every rows-per-work-group shape the tuner can pick
 * (vk_rows 32, 64, 128: the 64 x 64, 32 x 64 and 128 x 32 tiles on lavapipe):
 *   - Sq, Sk and G*Sq not multiples of the tile, query-row blocks that straddle two query heads;
 *   - GQA 1, 4 and 8 query heads per KV head;
 *   - causal with offsets (rows that see no key: O = 0, LSE = -inf), sliding windows, per-token
 *     positions (unsorted), masked tiles skipped;
 *   - head dims that are not a multiple of the 16-dim step nor of 4 (the scalar Q/K loads), D 2;
 *   - Dv 256 (two column blocks of V), Dv 3, Dv != D;
 *   - f16 and bf16 V and O, O rows at odd element offsets (a padded view: words shared between rows
 *     and with the padding, whose contents must survive), strided V;
 *   - long rows: Sk 32768 at D 256, Dv 256 and Sk 60000 at D 128 (several key chunks: llvmpipe's loop
 *     limit), with fully masked rows across the chunks.
 * Runs on the first Vulkan device (lavapipe in CI) with the validation layer (th_leak_check). */
#include "harness.h"
#include "rng.h"
#include "ropeqk_vulkan.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void teardown(void) { th_leak_check(); }

TestSuite(vk_attn_edges, .init = th_skip_without_validation, .fini = teardown, .timeout = 900);

static ropeqk_ctx *make(int rows)
{
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    t.vk_rows = rows;
    return th_ctx_on("vulkan", &t);
}

typedef struct {
    const char *name;
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    int causal;
    int64_t window, q_off, k_off;
    bool per_token;
    ropeqk_dtype qk_dt, v_dt, o_dt;
    bool strided; /* V rows padded, O rows padded to an odd element count (16-bit: shared words) */
} ecase;

static const ecase cases[] = {
    {"tiles cut by Sq and Sk, G 1", 1, 2, 2, 67, 133, 72, 40, 1, 0, 133 - 67 + 5, 0, false, ROPEQK_F32, ROPEQK_F32,
     ROPEQK_F32, false},
    {"G 4, row blocks across heads, window, D 66, Dv 256 f16", 1, 8, 2, 29, 200, 66, 256, 1, 37, 171, 0, false,
     ROPEQK_F32, ROPEQK_F16, ROPEQK_F16, true},
    {"G 8, per-token positions, causal + window, bf16", 2, 8, 1, 9, 1000, 128, 128, 1, 300, 0, 0, true, ROPEQK_BF16,
     ROPEQK_BF16, ROPEQK_BF16, true},
    {"G 4, rows before every key (fully masked), Dv 96 bf16 out", 1, 4, 1, 50, 77, 64, 96, 1, 0, 10, 35, false,
     ROPEQK_F16, ROPEQK_F32, ROPEQK_BF16, true},
    {"D 2, Dv 3, one row, f16 out at odd offsets", 1, 3, 1, 1, 5, 2, 3, 0, 0, 0, 0, false, ROPEQK_F32, ROPEQK_F16,
     ROPEQK_F16, true},
    {"G 8 non-causal, Sq 100 Sk 65", 1, 8, 1, 100, 65, 80, 80, 0, 0, 0, 0, false, ROPEQK_F32, ROPEQK_F32, ROPEQK_F32,
     false},
};

static const ecase long_cases[] = {
    /* D 256, Dv 256: 17024 keys a chunk for the default shape (vk_attn.c), two column blocks */
    {"Sk 32768, D 256, Dv 256, causal", 1, 4, 1, 3, 32768, 256, 256, 1, 0, 32768 - 2, 1, false, ROPEQK_F32,
     ROPEQK_F32, ROPEQK_F32, false},
    /* D 128: 25216 keys a chunk; a window that ends inside the second chunk, f16 V and O */
    {"Sk 60000, D 128, window, f16 V/O", 1, 2, 1, 5, 60000, 128, 128, 1, 40000, 60000 - 5, 0, false, ROPEQK_F32,
     ROPEQK_F16, ROPEQK_F16, true},
    /* per-token positions over a long row (every tile's range from the arrays), query 0 before
     * every key: O = 0 and LSE = -inf after all the chunks */
    {"Sk 40000, per-token positions, causal, a row sees no key", 1, 4, 1, 3, 40000, 64, 64, 1, 0, 0, 0, true,
     ROPEQK_F32, ROPEQK_F32, ROPEQK_F32, false},
};

/* A [B,H,S,X] view: packed, or with rows of X + pad elements and heads of S rows + 1 spare row. */
static ropeqk_tensor view(ropeqk_dtype dt, int64_t B, int64_t H, int64_t S, int64_t X, int64_t pad)
{
    ropeqk_tensor t = ropeqk_tensor_bhsd(dt, B, H, S, X);
    if (pad) {
        int64_t es = (int64_t)ropeqk_dtype_size(dt);
        t.nb[2] = (X + pad) * es;
        t.nb[1] = (S + 1) * t.nb[2];
        t.nb[0] = H * t.nb[1];
    }
    return t;
}

static void fill(const ropeqk_tensor *t, void *data, uint64_t *rng, double amp)
{
    for (int64_t b = 0; b < t->ne[0]; b++)
        for (int64_t h = 0; h < t->ne[1]; h++)
            for (int64_t s = 0; s < t->ne[2]; s++)
                for (int64_t x = 0; x < t->ne[3]; x++) {
                    char *p = (char *)data + b * t->nb[0] + h * t->nb[1] + s * t->nb[2] +
                              x * (int64_t)ropeqk_dtype_size(t->dtype);
                    float f = (float)(rqs_uniform(rng) * amp);
                    if (t->dtype == ROPEQK_F32) {
                        memcpy(p, &f, 4);
                    } else { /* values exact in the storage type: bf16 bits, or f16 of a short mantissa */
                        uint32_t u;
                        if (t->dtype == ROPEQK_F16)
                            f = roundf(f * 1024.0f) / 1024.0f;
                        memcpy(&u, &f, 4);
                        uint16_t h16;
                        if (t->dtype == ROPEQK_BF16) {
                            h16 = (uint16_t)(u >> 16);
                        } else { /* |f| < 2: an f16 normal or zero, 10 fraction bits kept */
                            uint32_t sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
                            h16 = (uint16_t)(f == 0.0f ? sign : sign | ((e - 112u) << 10) | (m >> 13));
                            if (f != 0.0f && (e < 113u)) /* below f16's normal range: use 0 */
                                h16 = (uint16_t)sign;
                        }
                        memcpy(p, &h16, 2);
                    }
                }
}

static void run(ropeqk_ctx *ctx, int rows, const ecase *c, uint64_t seed)
{
    char d[400];
    snprintf(d, sizeof d, "vk_rows %d, %s (B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld causal %d window %lld "
             "offs %lld/%lld dtypes %d/%d/%d%s%s), seed %llu",
             rows, c->name, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq, (long long)c->Sk,
             (long long)c->D, (long long)c->Dv, c->causal, (long long)c->window, (long long)c->q_off,
             (long long)c->k_off, c->qk_dt, c->v_dt, c->o_dt, c->per_token ? " per-token" : "",
             c->strided ? " strided" : "", (unsigned long long)seed);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.layout = seed % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    p.causal = c->causal;
    p.window = c->window;
    p.q_pos_offset = c->q_off;
    p.k_pos_offset = c->k_off;
    ropeqk_tensor q = ropeqk_tensor_bhsd(c->qk_dt, c->B, c->Hq, c->Sq, c->D);
    ropeqk_tensor k = ropeqk_tensor_bhsd(c->qk_dt, c->B, c->Hkv, c->Sk, c->D);
    ropeqk_tensor v = view(c->v_dt, c->B, c->Hkv, c->Sk, c->Dv, c->strided ? 3 : 0);
    ropeqk_tensor o = view(c->o_dt, c->B, c->Hq, c->Sq, c->Dv, c->strided ? 1 : 0);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, c->Dv);
    ropeqk_tensor l = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, 1);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, c->B, c->Hq, c->Sq, 1);
    size_t qb = ropeqk_tensor_extent(&q), kb = ropeqk_tensor_extent(&k), vb = ropeqk_tensor_extent(&v);
    size_t ob = ropeqk_tensor_extent(&o), lb = ropeqk_tensor_extent(&l);
    void *qd = calloc(1, qb), *kd = calloc(1, kb), *vd = calloc(1, vb);
    unsigned char *od = malloc(ob), *guard = malloc(ob);
    float *ld = malloc(lb);
    double *o64d = malloc(ropeqk_tensor_extent(&o64)), *l64d = malloc(ropeqk_tensor_extent(&l64));
    cr_assert(qd && kd && vd && od && guard && ld && o64d && l64d);
    uint64_t rng = seed;
    fill(&q, qd, &rng, 1.5); /* scores of a few units: the running max moves from tile to tile */
    fill(&k, kd, &rng, 1.5);
    fill(&v, vd, &rng, 1.0);
    for (size_t i = 0; i < ob; i++) /* the output's padding must come back unchanged */
        od[i] = guard[i] = (unsigned char)(0xA5 ^ i);
    int32_t *qp = NULL, *kp = NULL;
    if (c->per_token) { /* unsorted positions: keys spread over [0, 4 Sk), queries over [Sk, 3 Sk) */
        qp = malloc((size_t)c->Sq * 4);
        kp = malloc((size_t)c->Sk * 4);
        for (int64_t j = 0; j < c->Sk; j++)
            kp[j] = (int32_t)(rqs_rand(&rng) % (uint64_t)(4 * c->Sk));
        for (int64_t i = 0; i < c->Sq; i++)
            qp[i] = (int32_t)(c->Sk + rqs_rand(&rng) % (uint64_t)(2 * c->Sk));
        if (c->causal)
            qp[0] = -1; /* before every key: a fully masked row */
    }
    ropeqk_status st = ropeqk_attention(ctx, &p, &q, qd, &k, kd, &v, vd, qp, kp, &o, od, &l, ld);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s: %s", ropeqk_status_string(st), ropeqk_last_error(), d);
    st = ropeqk_attention_ref(&p, &q, qd, &k, kd, &v, vd, qp, kp, &o64, o64d, &l64, l64d);
    cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s", d);
    double err = 0, lerr = 0;
    int64_t mism = 0;
    st = ropeqk_attention_max_error(&v, vd, &o, od, &o64, o64d, &l, ld, &l64, l64d, &err, &lerr, &mism);
    cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s", d);
    double bound = 1e-5 + (c->o_dt == ROPEQK_F16 ? 0x1p-11 : c->o_dt == ROPEQK_BF16 ? 0x1p-8 : 0.0);
    cr_expect(err <= bound, "O error %.3g > %.3g: %s", err, bound, d);
    cr_expect(lerr <= 1e-5, "LSE error %.3g: %s", lerr, d);
    cr_expect_eq(mism, 0, "%lld NaN or -inf mismatches: %s", (long long)mism, d);
    /* bytes outside the view's elements: untouched */
    int64_t es = (int64_t)ropeqk_dtype_size(o.dtype), bad = 0;
    for (size_t i = 0; i < ob; i++) {
        int64_t r = (int64_t)i, b = r / o.nb[0], h = r % o.nb[0] / o.nb[1], s = r % o.nb[1] / o.nb[2];
        int64_t x = r % o.nb[2] / es;
        bool inside = b < o.ne[0] && h < o.ne[1] && s < o.ne[2] && x < o.ne[3];
        bad += !inside && od[i] != guard[i];
    }
    cr_expect_eq(bad, 0, "%lld bytes of the output's padding overwritten: %s", (long long)bad, d);
    cr_log_info("%s: O error %.3g, LSE %.3g", d, err, lerr);
    free(qd), free(kd), free(vd), free(od), free(guard), free(ld), free(o64d), free(l64d), free(qp), free(kp);
}

static uint64_t seed0(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20261125ull;
}

static void every_case(int rows)
{
    ropeqk_ctx *ctx = make(rows);
    /* the shape in effect: every Vulkan device has room for each row count (32 KiB of shared memory
     * take 128 rows with 32-key tiles) */
    char want[64];
    snprintf(want, sizeof want, "(at Dv 128: %d x ", rows);
    cr_expect(strstr(ropeqk_ctx_build_options(ctx), want), "%s", ropeqk_ctx_build_options(ctx));
    cr_log_info("%s", ropeqk_ctx_build_options(ctx));
    /* every case, or every N-th (harness.h), a different quarter for each row count */
    for (size_t i = (size_t)(rows / 32) % (size_t)th_stride(); i < sizeof cases / sizeof cases[0]; i += (size_t)th_stride())
        run(ctx, rows, &cases[i], seed0() + (uint64_t)i);
    ropeqk_ctx_destroy(ctx);
}

Test(vk_attn_edges, rows64) { every_case(64); }
Test(vk_attn_edges, rows32) { every_case(32); }
Test(vk_attn_edges, rows128) { every_case(128); }

Test(vk_attn_edges, long_rows_in_key_chunks)
{
    ropeqk_ctx *ctx = make(64);
    for (size_t i = 0; i < sizeof long_cases / sizeof long_cases[0]; i++)
        run(ctx, 64, &long_cases[i], seed0() + 100 + (uint64_t)i);
    ropeqk_ctx_destroy(ctx);
}
