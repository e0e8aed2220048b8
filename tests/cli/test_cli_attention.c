/* `ropeqk attention` and the attention part of `ropeqk demo`. Random inputs are written with the
 * npy module; every output file is checked in this process against ropeqk_attention_ref on the
 * input files as read back (fp64), by ropeqk_attention_max_error within 1e-5 (O, and LSE relative),
 * with the shapes [B,Hq,Sq,Dv] and [B,Hq,Sq]. Each case runs on the scalar path (--device ref,
 * always) and on the default OpenCL device (skipped without a platform). Then --check, usage errors
 * (exit 2, naming the flag), runtime errors (exit 1, naming the file, no output left) and the demo. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "half.h"
#include "npy.h"
#include "rng.h"
#include "ropeqk.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

#include "cli_fixture.h"
#include "cli_files.h"

TestSuite(attention, .init = setup, .fini = teardown, .timeout = 300);

/* One problem: the input files, the flags given to the command, and the same parameters for
 * ropeqk_attention_ref. */
typedef struct {
    const char *q, *k, *v;
    bool bshd;
    const char *flags[24]; /* NULL-terminated */
    ropeqk_params p;
    const int32_t *qpos, *kpos;
} problem;

/* Runs `attention` on the problem (device or ref), writing O (and LSE when with_lse) in tmp. */
static void run_attention(const problem *pb, bool device, bool with_lse, const char *o, const char *l)
{
    const char *argv[48];
    int n = 0;
    argv[n++] = "attention";
    argv[n++] = "--q", argv[n++] = pb->q;
    argv[n++] = "--k", argv[n++] = pb->k;
    argv[n++] = "--v", argv[n++] = pb->v;
    argv[n++] = "--out", argv[n++] = o;
    if (with_lse)
        argv[n++] = "--lse", argv[n++] = l;
    for (int i = 0; pb->flags[i]; i++)
        argv[n++] = pb->flags[i];
    if (!device)
        argv[n++] = "--device", argv[n++] = "ref";
    argv[n] = NULL;
    cli_result r = run(argv);
    cr_assert_eq(r.status, 0, "exit status %d\nstdout: %s\nstderr: %s", r.status, r.out, r.err);
    cr_expect(strstr(r.out, "attention: Q ["), "%s", r.out);
    cli_result_free(&r);
}

/* O (and LSE) files against ropeqk_attention_ref on the input files, shapes included. */
static void expect_matches_ref(const problem *pb, const char *o_path, const char *l_path, const char *what)
{
    npy_array qa = {0}, ka = {0}, va = {0}, oa = {0}, la = {0};
    load(pb->q, &qa);
    load(pb->k, &ka);
    load(pb->v, &va);
    load(o_path, &oa);
    ropeqk_tensor q = input_view(&qa, pb->bshd), k = input_view(&ka, pb->bshd), v = input_view(&va, pb->bshd);
    const int64_t B = q.ne[0], Hq = q.ne[1], Sq = q.ne[2], Dv = v.ne[3];
    cr_assert(oa.dtype == NPY_F32 && oa.ndim == 4 && oa.shape[0] == B && oa.shape[1] == Hq && oa.shape[2] == Sq &&
                  oa.shape[3] == Dv,
              "%s: O is %s with %d dims [%lld,%lld,%lld,%lld], expected <f4 [%lld,%lld,%lld,%lld]", what,
              npy_dtype_descr(oa.dtype), oa.ndim, (long long)oa.shape[0], (long long)oa.shape[1],
              (long long)oa.shape[2], (long long)oa.shape[3], (long long)B, (long long)Hq, (long long)Sq,
              (long long)Dv);
    if (l_path) {
        load(l_path, &la);
        cr_assert(la.dtype == NPY_F32 && la.ndim == 3 && la.shape[0] == B && la.shape[1] == Hq && la.shape[2] == Sq,
                  "%s: LSE is %s with %d dims, expected <f4 [%lld,%lld,%lld]", what, npy_dtype_descr(la.dtype),
                  la.ndim, (long long)B, (long long)Hq, (long long)Sq);
    }
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, Dv);
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, Dv);
    ropeqk_tensor lt = ropeqk_tensor_bhsd(ROPEQK_F32, B, Hq, Sq, 1);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, B, Hq, Sq, 1);
    double *e = malloc(ropeqk_tensor_extent(&o64)), *el = malloc(ropeqk_tensor_extent(&l64));
    cr_assert(e && el);
    ropeqk_status st = ropeqk_attention_ref(&pb->p, &q, qa.data, &k, ka.data, &v, va.data, pb->qpos, pb->kpos, &o64,
                                            e, &l64, el);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: ropeqk_attention_ref: %s", what, ropeqk_status_string(st));
    double err = 0.0, lerr = 0.0;
    int64_t mism = 0;
    st = ropeqk_attention_max_error(&v, va.data, &ot, oa.data, &o64, e, l_path ? &lt : NULL, la.data,
                                    l_path ? &l64 : NULL, l_path ? el : NULL, &err, &lerr, &mism);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: ropeqk_attention_max_error: %s", what, ropeqk_status_string(st));
    cr_expect(err <= 1e-5, "%s: O error %.3g > 1e-5", what, err);
    cr_expect(lerr <= 1e-5, "%s: LSE error %.3g > 1e-5", what, lerr);
    cr_expect_eq(mism, 0, "%s: %lld row mismatches", what, (long long)mism);
    free(e);
    free(el);
    npy_free(&qa), npy_free(&ka), npy_free(&va), npy_free(&oa), npy_free(&la);
}

/* The problem on the scalar path and on the device, with and without --lse. */
static void check_problem(const problem *pb, const char *name)
{
    char what[128];
    for (int device = 0; device < 2; device++) {
        if (device && no_device())
            continue;
        const char *o = tpath(device ? "o_dev.npy" : "o_ref.npy"), *l = tpath(device ? "l_dev.npy" : "l_ref.npy");
        run_attention(pb, device, true, o, l);
        snprintf(what, sizeof what, "%s on %s", name, device ? "the device" : "the scalar path");
        expect_matches_ref(pb, o, l, what);
        remove(o), remove(l);
        run_attention(pb, device, false, o, NULL);
        cr_expect_eq(dir_entries(tmp), 1, "%s: a file other than O written without --lse", what);
        expect_matches_ref(pb, o, NULL, what);
        remove(o);
    }
}

Test(attention, gqa_dv_lse_f32)
{
    /* Hq 6 on Hkv 2, D 16, Dv 24, queries in the middle of the keys: causal cuts inside */
    problem pb = {.q = ipath("q.npy"), .k = ipath("k.npy"), .v = ipath("v.npy"),
                  .flags = {"--layout", "half-split", "--causal", "--q-pos-offset", "4", "--base", "500000"}};
    save_rand(pb.q, NPY_F32, 2, 6, 7, 16, 1);
    save_rand(pb.k, NPY_F32, 2, 2, 11, 16, 2);
    save_rand(pb.v, NPY_F32, 2, 2, 11, 24, 3);
    ropeqk_default_params(&pb.p);
    pb.p.layout = ROPEQK_HALF_SPLIT, pb.p.causal = 1, pb.p.q_pos_offset = 4, pb.p.base = 500000.0;
    check_problem(&pb, "f32 GQA Dv != D");
}

Test(attention, f16_inputs_window)
{
    problem pb = {.q = ipath("q.npy"), .k = ipath("k.npy"), .v = ipath("v.npy"),
                  .flags = {"--causal", "--window", "3", "--scale", "0.3"}};
    save_rand(pb.q, NPY_F16, 1, 4, 9, 32, 4);
    save_rand(pb.k, NPY_F16, 1, 1, 9, 32, 5); /* MQA */
    save_rand(pb.v, NPY_F16, 1, 1, 9, 8, 6);
    ropeqk_default_params(&pb.p);
    pb.p.causal = 1, pb.p.window = 3, pb.p.scale = 0.3;
    check_problem(&pb, "f16 window");
    /* V in another storage than Q and K: f32 V with f16 Q/K */
    save_rand(pb.v, NPY_F32, 1, 1, 9, 40, 7);
    check_problem(&pb, "f16 Q/K, f32 V");
}

Test(attention, bf16_inputs)
{
    problem pb = {.q = ipath("q.npy"), .k = ipath("k.npy"), .v = ipath("v.npy"),
                  .flags = {"--dtype", "bf16", "--layout", "half-split", "--rotary-dim", "16"}};
    save_rand(pb.q, NPY_U16, 1, 4, 5, 64, 8);
    save_rand(pb.k, NPY_U16, 1, 2, 13, 64, 9);
    save_rand(pb.v, NPY_U16, 1, 2, 13, 64, 10);
    ropeqk_default_params(&pb.p);
    pb.p.layout = ROPEQK_HALF_SPLIT, pb.p.rotary_dim = 16;
    check_problem(&pb, "bf16");
}

Test(attention, bshd_positions_scaling_masked_row)
{
    /* per-token positions, YaRN, causal: query 0 sits before every key (a fully masked row) */
    static const int64_t qp[3] = {2, 40, 9};
    static const int64_t kp[6] = {5, 3, 30, 3, 8, 100};
    static const int32_t qp32[3] = {2, 40, 9}, kp32[6] = {5, 3, 30, 3, 8, 100};
    problem pb = {.q = ipath("q.npy"), .k = ipath("k.npy"), .v = ipath("v.npy"), .bshd = true,
                  .flags = {"--format", "bshd", "--causal", "--q-positions", ipath("qp.npy"), "--k-positions",
                            ipath("kp.npy"), "--scaling", "yarn", "--factor", "4", "--original-max-pos", "16"},
                  .qpos = qp32, .kpos = kp32};
    save_rand(pb.q, NPY_F32, 1, 3, 4, 16, 11); /* [B,S,H,D]: 3 queries, 4 heads */
    save_rand(pb.k, NPY_F32, 1, 6, 2, 16, 12);
    save_rand(pb.v, NPY_F32, 1, 6, 2, 12, 13);
    save_i64(ipath("qp.npy"), qp, 3);
    save_i64(ipath("kp.npy"), kp, 6);
    ropeqk_default_params(&pb.p);
    pb.p.causal = 1;
    pb.p.scaling.type = ROPEQK_SCALING_YARN, pb.p.scaling.factor = 4.0, pb.p.scaling.original_max_position = 16;
    check_problem(&pb, "bshd positions yarn");
    /* the masked row itself: O = 0, LSE = -inf, in [B,Hq,Sq,...] order */
    run_attention(&pb, false, true, tpath("o.npy"), tpath("l.npy"));
    npy_array o = {0}, l = {0};
    load(tpath("o.npy"), &o);
    load(tpath("l.npy"), &l);
    const float *od = o.data, *ld = l.data;
    for (int h = 0; h < 4; h++) {
        cr_expect(ld[h * 3 + 0] == -INFINITY && isfinite(ld[h * 3 + 1]), "head %d: LSE %g %g", h, ld[h * 3],
                  ld[h * 3 + 1]);
        for (int d = 0; d < 12; d++)
            cr_expect(od[(h * 3 + 0) * 12 + d] == 0.0f);
    }
    npy_free(&o), npy_free(&l);
}

Test(attention, check_passes)
{
    save_rand(ipath("q.npy"), NPY_F32, 1, 8, 6, 32, 14);
    save_rand(ipath("k.npy"), NPY_F32, 1, 2, 10, 32, 15);
    save_rand(ipath("v.npy"), NPY_F16, 1, 2, 10, 48, 16);
    for (int device = 0; device < 2; device++) {
        if (device && no_device())
            continue;
        const char *argv[] = {"attention", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--v", ipath("v.npy"),
                              "--out", tpath("o.npy"), "--causal", "--check", device ? NULL : "--device", "ref",
                              NULL};
        cli_result r = run(argv);
        cr_expect_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
        cr_expect(strstr(r.out, "O max error") && strstr(r.out, "LSE max relative error") &&
                      strstr(r.out, "row mismatches 0") && strstr(r.out, "PASS"),
                  "%s", r.out);
        if (!device)
            cr_expect(strstr(r.out, "scalar reference path"), "%s", r.out);
        cr_expect_eq(dir_entries(tmp), 1, "--check without --lse writes O only");
        cli_result_free(&r);
        remove(tpath("o.npy"));
        /* --math fast: the tensor-core path's bound where a device takes it (docs/tensor-cores.md) */
        const char *fargv[] = {"attention", "--q", ipath("q.npy"), "--k", ipath("k.npy"), "--v", ipath("v.npy"),
                               "--out", tpath("o.npy"), "--causal", "--check", "--math", "fast",
                               device ? NULL : "--device", "ref", NULL};
        r = run(fargv);
        cr_expect_eq(r.status, 0, "--math fast: stdout: %s\nstderr: %s", r.out, r.err);
        cr_expect(strstr(r.out, "tolerance 0.002") && strstr(r.out, "PASS"), "--math fast: %s", r.out);
        cli_result_free(&r);
        remove(tpath("o.npy"));
    }
}

Test(attention, usage_errors)
{
    const char *q = ipath("q.npy"), *k = ipath("k.npy"), *v = ipath("v.npy"), *o = tpath("o.npy");
    save_rand(q, NPY_F32, 1, 2, 3, 8, 17);
    save_rand(k, NPY_F32, 1, 1, 4, 8, 18);
    save_rand(v, NPY_F32, 1, 1, 4, 8, 19);
    expect_error(ARGS("attention", "--k", k, "--v", v, "--out", o), 2, "--q", NULL);
    expect_error(ARGS("attention", "--q", q, "--v", v, "--out", o), 2, "--k", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--out", o), 2, "--v", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v), 2, "--out", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", "--out", o), 2, "--v", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--lse", o), 2, "--lse", "--out");
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--beta-fast", "16"), 2, "--beta-fast",
                 "yarn");
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--scaling", "yarn", "--factor", "4"), 2,
                 "--original-max-pos", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--dtype", "f8"), 2, "--dtype", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--window", "-2"), 2, "--window", NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--rotary-dim", "3"), 2, "--rotary-dim",
                 NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--frobnicate"), 2, "--frobnicate",
                 NULL);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", v, "--out", o, "--math", "exact"), 2, "--math", NULL);
    cli_result r = run(ARGS("attention", "--help"));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: ropeqk attention") && strstr(r.out, "--v FILE") && strstr(r.out, "--lse FILE") &&
                  strstr(r.out, "--scaling") && strstr(r.out, "(default 10000)"),
              "%s", r.out);
    cli_result_free(&r);
}

Test(attention, runtime_errors)
{
    char q[768], k[768], o[768], l[768]; /* ipath/tpath recycle their buffers */
    snprintf(q, sizeof q, "%s", ipath("q.npy"));
    snprintf(k, sizeof k, "%s", ipath("k.npy"));
    snprintf(o, sizeof o, "%s", tpath("o.npy"));
    snprintf(l, sizeof l, "%s", tpath("l.npy"));
    save_rand(q, NPY_F32, 1, 2, 3, 8, 20);
    save_rand(k, NPY_F32, 1, 1, 4, 8, 21);
    save_rand(ipath("v_sk.npy"), NPY_F32, 1, 1, 5, 8, 22);  /* Sk 5, K has 4 */
    save_rand(ipath("v_h.npy"), NPY_F32, 1, 2, 4, 8, 23);   /* Hkv 2, K has 1 */
    save_rand(ipath("v_u2.npy"), NPY_U16, 1, 1, 4, 8, 24);  /* bf16 bits without --dtype bf16 */
    npy_array v3 = {.dtype = NPY_F32, .ndim = 3, .shape = {1, 4, 8}, .nbytes = 128};
    float zeros[32] = {0};
    v3.data = zeros;
    char err[256];
    cr_assert_eq(npy_save(ipath("v_3d.npy"), &v3, err, sizeof err), 0, "%s", err);
    const char *bad[] = {"v_sk.npy", "v_h.npy", "v_u2.npy", "v_3d.npy", "missing.npy"};
    for (int device = 0; device < 2; device++) /* the scalar path, and the default device (or none) */
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            const char *argv[] = {"attention", "--q",  q, "--k", k, "--v", ipath(bad[i]), "--out", o, "--lse", l,
                                  device ? NULL : "--device", "ref", NULL};
            expect_error(argv, 1, bad[i], NULL);
        }
    /* an output folder that does not exist: neither O nor LSE is left */
    save_rand(ipath("v.npy"), NPY_F32, 1, 1, 4, 8, 25);
    expect_error(ARGS("attention", "--q", q, "--k", k, "--v", ipath("v.npy"), "--out", o, "--lse",
                      tpath("no/such/dir/l.npy"), "--device", "ref"),
                 1, "no/such/dir/l.npy", NULL);
}

Test(attention, demo_attention_part)
{
    cli_result r = run(ARGS("demo", "--device", "ref", "--tokens", "8", "--runs", "1"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "attention   : skipped on the scalar path") && strstr(r.out, "PASS"), "%s", r.out);
    cli_result_free(&r);
    r = run(ARGS("demo", "--device", "ref", "--tokens", "8", "--runs", "1", "--attention-tokens", "40",
                 "--check-rows", "5"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "attn call") && strstr(r.out, "peak memory") && strstr(r.out, "5 query rows") &&
                  strstr(r.out, "result      : PASS"),
              "%s", r.out);
    cli_result_free(&r);
    if (no_device())
        cr_skip_test("no device");
    r = run(ARGS("demo", "--tokens", "16", "--runs", "1", "--attention-tokens", "300"));
    cr_expect_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.out, "O [1,32,300,128] f32") && strstr(r.out, "attn call") &&
                  strstr(r.out, "peak memory") && strstr(r.out, "[1,32,300,300] alone would need 11.0 MiB") &&
                  strstr(r.out, "8 query rows (first, last, 6 at random) x 32 heads") &&
                  strstr(r.out, "row mismatches 0") && strstr(r.out, "result      : PASS"),
              "%s", r.out);
    cli_result_free(&r);
    r = run(ARGS("demo", "--tokens", "16", "--runs", "1", "--attention-tokens", "0"));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "skipped (--attention-tokens 0)") && !strstr(r.out, "attn call"), "%s", r.out);
    cli_result_free(&r);
}
