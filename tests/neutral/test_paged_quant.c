/* Quantized paged caches (docs/conventions.md section 12): decode over int8 / fp8 e4m3 / fp8 e5m2
 * caches against the fp64 reference computed from the stored values (q * scale; the 1e-5 metric of
 * section 10), caches quantized on the host and uploaded as they are (what an engine quantizing
 * itself does); the append's bytes and scales against support/quant.c bit for bit, on awkward rows;
 * and the quantization error against unquantized inputs (a documented figure, bounded). Both
 * backends (paged_quant_vulkan: paged.comp and paged_append_q8.comp on lavapipe). Seeds:
 * ROPEQK_TEST_SEED (default 20261201), printed with every failure. */
#include "paged_fixture.h"
#include "quant.h"

#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(paged_quant, .init = th_ctx_init, .fini = th_ctx_fini);

static const ropeqk_dtype q8[3] = {ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2};

/* each 8-bit dtype for K and V alike: GQA 8/2, pages of 16, ragged lengths with 1 and page_size +-1 */
Test(paged_quant, each_dtype_gqa_causal)
{
    static const char *const names[3] = {"int8 caches", "e4m3 caches", "e5m2 caches"};
    for (int i = 0; i < 3; i++) {
        pcase c = base_case(names[i]);
        c.kdt = c.vdt = q8[i];
        int64_t lens[] = {1, 15, 17, 2000, 16};
        memcpy(c.lens, lens, sizeof lens);
        c.p.causal = 1;
        c.q_ahead = 2;
        run_case(&c, pf_seed() + (uint64_t)i);
    }
}

/* K and V of different dtypes (8-bit with 8-bit, 8-bit with 16-bit), BSHD caches, half-split,
 * partial rotary, Dv != D with a tail of dims, f16 output */
Test(paged_quant, mixed_dtypes_partial_rotary_bshd)
{
    const ropeqk_dtype ks[4] = {ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2, ROPEQK_F16, ROPEQK_I8};
    const ropeqk_dtype vs[4] = {ROPEQK_I8, ROPEQK_BF16, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "K dtype %d, V dtype %d, half-split R=32 Dv=40 bshd", ks[i], vs[i]);
        pcase c = base_case(name);
        c.kdt = ks[i], c.vdt = vs[i];
        c.Hq = 4, c.Hkv = 4, c.D = 64, c.Dv = 40, c.ps = 32, c.maxp = 100, c.bshd_cache = true;
        int64_t lens[] = {3000, 1, 31, 33, 32};
        memcpy(c.lens, lens, sizeof lens);
        c.p.layout = ROPEQK_HALF_SPLIT;
        c.p.rotary_dim = 32;
        if (i == 3)
            c.odt = ROPEQK_F16, c.tol = 1e-3;
        run_case(&c, pf_seed() + 10 + (uint64_t)i);
    }
}

/* sliding window with causal masks, query rows ahead and behind, positions near INT32_MAX, a head
 * dim the CPU shape does not take (D 80: the GPU shape on either profile) */
Test(paged_quant, window_large_positions_odd_head_dim)
{
    for (int i = 0; i < 3; i++) {
        pcase c = base_case("8-bit, window 700, positions near 2^31, D 80");
        c.kdt = q8[i], c.vdt = q8[(i + 2) % 3];
        c.D = 80, c.Dv = 80, c.Hq = 6, c.Hkv = 2;
        c.p.causal = 1, c.p.window = 700;
        c.kpos_lo = INT32_MAX - 20000, c.kpos_span = 5000, c.q_ahead = -4;
        c.len_max = 4000;
        run_case(&c, pf_seed() + 20 + (uint64_t)i);
    }
}

/* rows starting anywhere in a 32-bit word (D 66, Dv 42, BHSD: rows 66 and 42 bytes apart): Vulkan
 * takes each code out of its word */
Test(paged_quant, unaligned_rows)
{
    for (int i = 0; i < 3; i++) {
        pcase c = base_case("8-bit, D 66, Dv 42");
        c.kdt = q8[i], c.vdt = q8[(i + 1) % 3];
        c.D = 66, c.Dv = 42, c.Hq = 4, c.Hkv = 2;
        c.p.causal = 1;
        c.len_max = 1500;
        run_case(&c, pf_seed() + 30 + (uint64_t)i);
    }
}

/* Every code of each 8-bit dtype through the decode: two one-token sequences whose K rows are code 0
 * (every score 0, so each row's O is its one V row exactly) and whose V rows hold codes 0..127 and
 * 128..255, scale 0.5. O must be rqs_q8_value(code) * 0.5 bit for bit in value: NaN codes NaN, e5m2's
 * infinities infinite, subnormals exact, -0 equal to 0. */
Test(paged_quant, every_code_decodes_to_its_value)
{
    enum { ED = 128, EPS = 16 };
    for (int i = 0; i < 3; i++) {
        const ropeqk_dtype dt = q8[i];
        ropeqk_plan_desc d = {.op = ROPEQK_OP_PAGED_DECODE};
        ropeqk_default_params(&d.params);
        d.q = ropeqk_tensor_bhsd(ROPEQK_F32, 2, 1, 1, ED);
        d.k = ropeqk_tensor_bhsd(dt, 2, 1, EPS, ED);
        d.v = d.k;
        d.out = ropeqk_tensor_bhsd(ROPEQK_F32, 2, 1, 1, ED);
        d.paged = (ropeqk_paged_desc){.page_size = EPS, .max_pages_per_seq = 1, .max_seqs = 2};
        static unsigned char kc[2 * EPS * ED], vc[2 * EPS * ED];
        static float sc[2 * EPS], q[2 * ED], o[2 * ED];
        memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
        for (int j = 0; j < 2 * ED; j++) /* token 0 of page p: codes p * 128 .. p * 128 + 127 */
            vc[(j / ED) * EPS * ED + j % ED] = (unsigned char)j, q[j] = (float)(j % 7) - 3.0f;
        for (int j = 0; j < 2 * EPS; j++)
            sc[j] = 0.5f;
        dm_buf *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bks = NULL, *bvs = NULL;
        ropeqk_plan *pl = NULL;
        cr_assert_eq(dm_create(th_ctx, sizeof q, q, false, &bq), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sizeof kc, kc, false, &bk), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sizeof vc, vc, false, &bv), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sizeof o, NULL, false, &bo), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sizeof sc, sc, false, &bks), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sizeof sc, sc, false, &bvs), ROPEQK_SUCCESS);
        cr_assert_eq(ropeqk_plan_create(th_ctx, &d, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        int32_t table[2] = {0, 1}, lens[2] = {1, 1}, qpos[2] = {0, 0};
        ropeqk_paged_batch b = {.n_seqs = 2, .page_table = table, .seq_lens = lens, .q_pos = qpos};
        ropeqk_paged_args a = {.q = dm_whole(bq), .k_cache = dm_whole(bk), .v_cache = dm_whole(bv),
                            .out = dm_whole(bo), .k_scale = dm_whole(bks), .v_scale = dm_whole(bvs)};
        cr_assert_eq(rqs_paged_run_wait(pl, &a, &b), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        cr_assert_eq(dm_read(bo, o), ROPEQK_SUCCESS);
        int bad = 0;
        for (int j = 0; j < 2 * ED; j++) {
            float want = rqs_q8_value((uint8_t)j, dt) * 0.5f;
            bool ok = isnan(want) ? isnan(o[j]) : o[j] == want;
            if (!ok && bad++ < 4)
                cr_log_error("dtype %d: code 0x%02X decoded to %a, want %a", (int)dt, j, (double)o[j], (double)want);
        }
        cr_expect_eq(bad, 0, "dtype %d: %d of 256 codes decoded wrong", (int)dt, bad);
        ropeqk_plan_destroy(pl);
        dm_free(bq), dm_free(bk), dm_free(bv), dm_free(bo);
        dm_free(bks), dm_free(bvs);
    }
}

/* ---- the append's bytes ------------------------------------------------------------------------ */
enum { AS = 2, AHKV = 2, ADMAX = 66, APS = 16, AMAXP = 4, ANEW = 20, AROWS = AS * AHKV * ANEW };

/* Row r of the new rows: awkward values by kind (r % 10), the rest random. Rows whose absmax is QMAX
 * have scale 1 exactly, so their values hit the code grid's ties exactly. */
static void awkward_row(int r, ropeqk_dtype dt, int AD, float *x, uint64_t *rng)
{
    const float qmax = rqs_q8_qmax(dt);
    for (int i = 0; i < AD; i++)
        x[i] = (float)rqs_normal(rng);
    switch (r % 10) {
    case 1: /* zeros, negative zero among them */
        for (int i = 0; i < AD; i++)
            x[i] = i % 2 ? -0.0f : 0.0f;
        break;
    case 2: x[5] = NAN; break;
    case 3: x[7] = -INFINITY; break;
    case 4: /* scale 1 and ties of each grid: int8 k + 0.5, e4m3 mantissa halfway, e5m2 likewise */
        x[0] = qmax;
        for (int i = 1; i < AD; i++) {
            float tie = dt == ROPEQK_I8 ? (float)(i % 40) + 0.5f
                        : dt == ROPEQK_FP8_E4M3 ? ldexpf(1.0f + 1.0f / 16.0f + (float)(i % 8) / 8.0f, i % 9 - 2)
                                                : ldexpf(1.0f + 1.0f / 8.0f + (float)(i % 4) / 4.0f, i % 14 - 4);
            x[i] = i % 3 ? tie : -tie;
        }
        break;
    case 5: /* scale 1 and the fp8 subnormals, their ties, and values below the smallest one */
        x[0] = -qmax;
        for (int i = 1; i < AD; i++)
            x[i] = (i % 2 ? 1.0f : -1.0f) * ldexpf((float)(i % 7) * 0.5f, dt == ROPEQK_FP8_E5M2 ? -16 : -9);
        break;
    case 6: /* saturation: values just past QMAX after the division's rounding, and the max */
        x[0] = qmax;
        x[1] = -qmax;
        x[2] = nextafterf(qmax, INFINITY);
        break;
    case 7: /* a row too small to quantize (absmax below 2^-90): zeros, scale 0 */
        for (int i = 0; i < AD; i++)
            x[i] = ldexpf(x[i], -100);
        break;
    case 8: /* f32 subnormal elements next to normal ones */
        x[3] = 1e-40f, x[4] = -3e-39f;
        break;
    default: break;
    }
}

static void f32_to_dt(const float *x, int n, ropeqk_dtype dt, unsigned char *out, float *rounded)
{
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (dt == ROPEQK_F16) {
            uint16_t h = rqs_float_to_half(v);
            memcpy(out + 2 * i, &h, 2);
            v = rqs_half_to_float(h);
        } else if (dt == ROPEQK_BF16) {
            uint16_t h = rqs_float_to_bf16(v);
            memcpy(out + 2 * i, &h, 2);
            v = rqs_bf16_to_float(h);
        } else {
            memcpy(out + 4 * i, &v, 4);
        }
        rounded[i] = v;
    }
}

/* The append of AROWS awkward rows of AD values into 8-bit caches whose views start `off` bytes into
 * their buffers (K BSHD: rows AHKV * AD bytes apart), each cache byte and scale against the host's. */
static void append_case(int AD, size_t off)
{
    const uint64_t seed = pf_seed();
    const ropeqk_dtype src_dt[3] = {ROPEQK_F32, ROPEQK_F16, ROPEQK_BF16};
    const int64_t num_pages = AS * AMAXP;
    for (int i = 0; i < 3; i++) {
        uint64_t rng = seed + (uint64_t)i;
        const ropeqk_dtype kdt = q8[i], vdt = q8[(i + 1) % 3], sk = src_dt[i], sv = src_dt[(i + 2) % 3];
        ropeqk_tensor q = ropeqk_tensor_bhsd(ROPEQK_F32, AS, AHKV, 1, AD), o = q;
        ropeqk_plan_desc desc = {.op = ROPEQK_OP_PAGED_DECODE, .q = q, .out = o,
                                 .k = ropeqk_tensor_bshd(kdt, num_pages, APS, AHKV, AD),
                                 .v = ropeqk_tensor_bhsd(vdt, num_pages, AHKV, APS, AD),
                                 .paged = {APS, AMAXP, AS}};
        ropeqk_default_params(&desc.params);
        ropeqk_plan *pl = NULL;
        cr_assert_eq(ropeqk_plan_create(th_ctx, &desc, &pl), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
        /* new rows [AS, AHKV, ANEW, AD] in their source dtypes, and the host's expected bytes */
        ropeqk_tensor tkn = ropeqk_tensor_bhsd(sk, AS, AHKV, ANEW, AD), tvn = ropeqk_tensor_bhsd(sv, AS, AHKV, ANEW, AD);
        static unsigned char kn[AROWS * ADMAX * 4], vn[AROWS * ADMAX * 4];
        size_t kb = (size_t)(num_pages * APS * AHKV * AD) + off, sb = (size_t)(num_pages * AHKV * APS) * sizeof(float);
        unsigned char *kexp = malloc(kb), *vexp = malloc(kb), *kgot = malloc(kb), *vgot = malloc(kb);
        float *ksexp = malloc(sb), *vsexp = malloc(sb), *ksgot = malloc(sb), *vsgot = malloc(sb);
        cr_assert(kexp && vexp && kgot && vgot && ksexp && vsexp && ksgot && vsgot);
        memset(kexp, 0xA5, kb), memset(vexp, 0xA5, kb), memset(ksexp, 0xA5, sb), memset(vsexp, 0xA5, sb);
        int32_t table[AS * AMAXP] = {5, 2, 7, 0, 1, 6, 3, 4}, lens[AS] = {5, 14};
        for (int r = 0; r < AROWS; r++) {
            const int t = r % ANEW, h = r / ANEW % AHKV, s = r / (ANEW * AHKV);
            const int tok = lens[s] + t, page = table[s * AMAXP + tok / APS], slot = tok % APS;
            float x[ADMAX], xr[ADMAX];
            for (int kv = 0; kv < 2; kv++) {
                const ropeqk_dtype dt = kv ? vdt : kdt, sdt = kv ? sv : sk;
                awkward_row(r + 3 * kv, dt, AD, x, &rng);
                f32_to_dt(x, AD, sdt, (kv ? vn : kn) + (size_t)r * AD * ropeqk_dtype_size(sdt), xr);
                const ropeqk_tensor *tc = kv ? &desc.v : &desc.k;
                size_t si = (size_t)((page * AHKV + h) * APS + slot);
                (kv ? vsexp : ksexp)[si] =
                    rqs_q8_quantize(xr, AD, dt, (kv ? vexp : kexp) + off + off4(tc, page, h, slot, 0));
            }
        }
        dm_buf *bkn, *bvn, *bk, *bv, *bks, *bvs;
        cr_assert_eq(dm_create(th_ctx, ropeqk_tensor_extent(&tkn), kn, true, &bkn), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, ropeqk_tensor_extent(&tvn), vn, true, &bvn), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, kb, NULL, true, &bk), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, kb, NULL, true, &bv), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sb, NULL, true, &bks), ROPEQK_SUCCESS);
        cr_assert_eq(dm_create(th_ctx, sb, NULL, true, &bvs), ROPEQK_SUCCESS);
        dm_buf *all[4] = {bk, bv, bks, bvs};
        for (int b = 0; b < 4; b++)
            cr_assert_eq(dm_fill(all[b], 0xA5), ROPEQK_SUCCESS);
        ropeqk_paged_batch batch = {.n_seqs = AS, .page_table = table, .seq_lens = lens};
        ropeqk_paged_cache cache = {dm_at(bk, off), dm_at(bv, off), dm_whole(bks), dm_whole(bvs)};
        ropeqk_status st = rqs_paged_append_wait(pl, &tkn, dm_whole(bkn), &tvn, dm_whole(bvn), &cache,
                                                &batch);
        cr_assert_eq(st, ROPEQK_SUCCESS, "seed %llu: %s: %s", (unsigned long long)seed, ropeqk_status_string(st),
                     ropeqk_last_error());
        cr_assert_eq(dm_read(bk, kgot), ROPEQK_SUCCESS);
        cr_assert_eq(dm_read(bv, vgot), ROPEQK_SUCCESS);
        cr_assert_eq(dm_read(bks, ksgot), ROPEQK_SUCCESS);
        cr_assert_eq(dm_read(bvs, vsgot), ROPEQK_SUCCESS);
        size_t bad = 0, bads = 0;
        for (size_t b = 0; b < kb; b++) {
            if (kgot[b] != kexp[b] && bad++ < 5)
                cr_log_error("K byte %zu: device 0x%02x, host 0x%02x", b, kgot[b], kexp[b]);
            if (vgot[b] != vexp[b] && bad++ < 5)
                cr_log_error("V byte %zu: device 0x%02x, host 0x%02x", b, vgot[b], vexp[b]);
        }
        bads = (size_t)(memcmp(ksgot, ksexp, sb) != 0) + (size_t)(memcmp(vsgot, vsexp, sb) != 0);
        cr_expect_eq(bad, 0, "D %d, offset %zu, K %d / V %d from %d / %d (seed %llu): %zu cache bytes differ from the host "
                     "quantizer", AD, off, kdt, vdt, sk, sv, (unsigned long long)seed, bad);
        cr_expect_eq(bads, 0, "K %d / V %d (seed %llu): scale bytes differ from the host quantizer", kdt, vdt,
                     (unsigned long long)seed);
        for (int b = 0; b < 4; b++) {
            bool intact = false;
            cr_expect(dm_check(all[b], NULL, &intact) == ROPEQK_SUCCESS && intact, "a canary changed");
        }
        dm_free(bkn), dm_free(bvn), dm_free(bk), dm_free(bv);
        dm_free(bks), dm_free(bvs);
        free(kexp), free(vexp), free(kgot), free(vgot), free(ksexp), free(vsexp), free(ksgot), free(vsgot);
        ropeqk_plan_destroy(pl);
    }
}

Test(paged_quant, append_bytes_match_the_host_quantizer) { append_case(64, 0); }

/* rows that start anywhere in a 32-bit word (D 66: K's BSHD rows 132 bytes apart and V's 66, the
 * caches 1 byte into their buffers): Vulkan's append shares words between neighbouring rows (and the
 * bytes before the cache, which must stay 0xA5) */
Test(paged_quant, append_bytes_unaligned_rows) { append_case(66, 1); }

/* ---- the quantization error against unquantized inputs ---------------------------------------------
 * Not the kernels' accuracy (the tests above hold that to 1e-5 against the stored values) but what
 * storing a cache in 8 bits costs: one decode row of N(0, 1) Q, K and V (Hq 8, Hkv 2, D 128, 4096
 * keys, interleaved RoPE at positions 0..4095, query at 4095), O in fp64 from the f32 K and V against
 * O in fp64 from the quantized ones. Figures: relative L2 error of O over the heads, and section 10's
 * metric (max |dO| / max ||V||_inf). f16 and bf16 caches (round to nearest even) for comparison. The
 * bounds are about twice what the rule gives (docs/conventions.md section 12 has the figures). */
enum { EHQ = 8, EHKV = 2, ED = 128, ESK = 4096 };

static float round_to(float x, ropeqk_dtype dt)
{
    return dt == ROPEQK_F16 ? rqs_half_to_float(rqs_float_to_half(x)) : rqs_bf16_to_float(rqs_float_to_bf16(x));
}

Test(paged_quant, quantization_error_figure)
{
    const uint64_t seed = pf_seed();
    uint64_t rng = seed;
    const size_t nk = (size_t)EHKV * ESK * ED;
    float *q = malloc(EHQ * ED * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    float *kq = malloc(nk * sizeof *kq), *vq = malloc(nk * sizeof *vq);
    double *o = malloc(EHQ * ED * sizeof *o), *oq = malloc(EHQ * ED * sizeof *oq);
    cr_assert(q && k && v && kq && vq && o && oq);
    for (int i = 0; i < EHQ * ED; i++)
        q[i] = (float)rqs_normal(&rng);
    for (size_t i = 0; i < nk; i++)
        k[i] = (float)rqs_normal(&rng), v[i] = (float)rqs_normal(&rng);
    ropeqk_params p;
    ropeqk_default_params(&p);
    p.q_pos_offset = ESK - 1;
    ropeqk_tensor tq = ropeqk_tensor_bhsd(ROPEQK_F32, 1, EHQ, 1, ED), tk = ropeqk_tensor_bhsd(ROPEQK_F32, 1, EHKV, ESK, ED);
    ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F64, 1, EHQ, 1, ED);
    cr_assert_eq(ropeqk_attention_ref(&p, &tq, q, &tk, k, &tk, v, NULL, NULL, &to, o, NULL, NULL), ROPEQK_SUCCESS);
    const ropeqk_dtype dts[5] = {ROPEQK_I8, ROPEQK_FP8_E4M3, ROPEQK_FP8_E5M2, ROPEQK_F16, ROPEQK_BF16};
    static const char *const names[5] = {"int8", "fp8 e4m3", "fp8 e5m2", "f16", "bf16"};
    const double bound[5] = {2e-2, 8e-2, 1.5e-1, 1e-3, 5e-3}; /* relative L2 of O */
    for (int di = 0; di < 5; di++) {
        uint8_t row[ED];
        for (size_t r = 0; r < nk / ED; r++)
            for (int kv = 0; kv < 2; kv++) {
                const float *x = (kv ? v : k) + r * ED;
                float *y = (kv ? vq : kq) + r * ED;
                if (di < 3) {
                    float sc = rqs_q8_quantize(x, ED, dts[di], row);
                    for (int i = 0; i < ED; i++)
                        y[i] = rqs_q8_value(row[i], dts[di]) * sc;
                } else {
                    for (int i = 0; i < ED; i++)
                        y[i] = round_to(x[i], dts[di]);
                }
            }
        cr_assert_eq(ropeqk_attention_ref(&p, &tq, q, &tk, kq, &tk, vq, NULL, NULL, &to, oq, NULL, NULL),
                     ROPEQK_SUCCESS);
        double num = 0, den = 0, dmax = 0, vmax = 0;
        for (int i = 0; i < EHQ * ED; i++) {
            num += (oq[i] - o[i]) * (oq[i] - o[i]), den += o[i] * o[i];
            dmax = fmax(dmax, fabs(oq[i] - o[i]));
        }
        for (size_t i = 0; i < nk; i++)
            vmax = fmax(vmax, fabs(v[i]));
        double rel = sqrt(num / den);
        cr_log_info("quantization error, %s cache: O relative L2 %.3g, max |dO| / max |V| %.3g (seed %llu)",
                    names[di], rel, dmax / vmax, (unsigned long long)seed);
        cr_expect(rel <= bound[di] && rel > 0, "%s (seed %llu): O relative L2 error %.3g outside (0, %g]", names[di],
                  (unsigned long long)seed, rel, bound[di]);
    }
    free(q), free(k), free(v), free(kq), free(vq), free(o), free(oq);
}
