/* The `check` subcommand: a randomized sweep of the device path against the scalar fp64 path.
 * Every case derives its parameters from (seed, case index) alone, so a failing case is
 * reproduced by the same --seed whatever --cases is. */
#include "cli.h"
#include "clock.h"
#include "half.h"
#include "rng.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HALF 128 /* R/2 for the largest D below */

typedef struct {
    ropeqk_params p;
    ropeqk_dtype dtype;
    bool bshd, per_token;
    int64_t B, Hq, Hkv, Sq, Sk, D;
    int64_t max_pos;
    double long_f[MAX_HALF], short_f[MAX_HALF], freq[MAX_HALF]; /* p.scaling points here */
} check_case;

static const char *const dtype_label[] = {"f32", "f16", "bf16"};

static void describe(const check_case *c, char *buf, size_t len)
{
    char sc[256], win[48] = "";
    cli_scaling_describe(&c->p.scaling, sc, sizeof sc);
    if (c->p.window)
        snprintf(win, sizeof win, " window=%" PRId64, c->p.window);
    snprintf(buf, len,
             "%s %s %s B=%" PRId64 " Hq=%" PRId64 " Hkv=%" PRId64 " Sq=%" PRId64 " Sk=%" PRId64 " D=%" PRId64
             " R=%d base=%g%s%s%s%s%s max position %" PRId64,
             c->p.layout == ROPEQK_HALF_SPLIT ? "half-split" : "interleaved", dtype_label[c->dtype],
             c->bshd ? "bshd" : "bhsd", c->B, c->Hq, c->Hkv, c->Sq, c->Sk, c->D,
             c->p.rotary_dim ? (int)c->p.rotary_dim : (int)c->D, c->p.base, c->p.causal ? " causal" : "",
             c->p.conjugate ? " conjugate" : "", c->per_token ? " per-token positions" : "", sc, win, c->max_pos);
}

/* Random frequency scaling, variant v: 0..4 linear, dynamic, yarn, llama3, longrope; 5 none with
 * freq_factors; 6 any type with freq_factors. Optional parameters are left to their defaults in about
 * half the cases. */
static void draw_scaling(check_case *c, uint64_t *r, int v)
{
    static const int64_t l0s[] = {2048, 4096, 8192, 32768};
    ropeqk_scaling *s = &c->p.scaling;
    const int64_t R = c->p.rotary_dim ? c->p.rotary_dim : c->D, half = R / 2;
    int t = v < 5 ? v + 1 : v == 5 ? ROPEQK_SCALING_NONE : (int)rqs_range(r, 0, 5);
    if (t == ROPEQK_SCALING_DYNAMIC && R <= 2)
        t = ROPEQK_SCALING_LINEAR; /* dynamic needs R > 2 */
    s->type = (ropeqk_scaling_type)t;
    int64_t l0 = rqs_unit(r) < 0.7 ? l0s[rqs_range(r, 0, 3)] : rqs_range(r, 64, 65536);
    double factor = 1.0 + 39.0 * rqs_unit(r);
    bool opt = rqs_unit(r) < 0.5;
    switch (s->type) {
    case ROPEQK_SCALING_NONE:
        break;
    case ROPEQK_SCALING_LINEAR:
        s->factor = factor;
        break;
    case ROPEQK_SCALING_DYNAMIC:
        s->factor = factor;
        s->original_max_position = l0;
        break;
    case ROPEQK_SCALING_YARN:
        s->factor = factor;
        s->original_max_position = l0;
        if (opt) {
            s->beta_fast = 8.0 + 56.0 * rqs_unit(r);
            s->beta_slow = 0.5 + 3.5 * rqs_unit(r);
        }
        if (rqs_unit(r) < 0.3)
            s->attention_factor = 0.8 + 0.7 * rqs_unit(r);
        break;
    case ROPEQK_SCALING_LLAMA3:
        if (opt) {
            s->factor = factor;
            s->original_max_position = l0;
            s->low_freq_factor = 0.5 + 1.5 * rqs_unit(r);
            s->high_freq_factor = s->low_freq_factor + 0.5 + 5.5 * rqs_unit(r);
        }
        break;
    case ROPEQK_SCALING_LONGROPE:
        s->original_max_position = l0;
        for (int64_t i = 0; i < half; i++) {
            c->long_f[i] = 1.0 + 63.0 * rqs_unit(r);
            c->short_f[i] = 1.0 + 2.0 * rqs_unit(r);
        }
        s->long_factor = c->long_f;
        s->short_factor = c->short_f;
        s->n_long_factor = s->n_short_factor = (int32_t)half;
        if (opt)
            s->factor = factor;
        if (rqs_unit(r) < 0.2)
            s->attention_factor = 0.8 + 0.7 * rqs_unit(r);
        break;
    }
    /* the length: either side of L0 (required with per-token positions), else offset + rows */
    if ((t == ROPEQK_SCALING_DYNAMIC || t == ROPEQK_SCALING_LONGROPE) && (c->per_token || rqs_unit(r) < 0.5))
        s->seq_len = rqs_unit(r) < 0.5 ? rqs_range(r, 1, l0) : rqs_range(r, l0 + 1, 4 * l0);
    if (v >= 5 || rqs_unit(r) < 0.15) {
        for (int64_t i = 0; i < half; i++)
            c->freq[i] = 1.0 + 7.0 * rqs_unit(r);
        s->freq_factors = c->freq;
        s->n_freq_factors = (int32_t)half;
    }
}

static const int64_t dims[] = {2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 128, 256};
static const double bases[] = {10000.0, 500000.0, 1000000.0, 100.0, 10.0};

/* Parameters of case i. Layout and dtype cycle; the other features recur with fixed periods so
 * that a short sweep still covers all of them, their sizes drawn at random. */
static void make_case(uint64_t seed, int64_t i, uint64_t *r, check_case *c)
{
    *r = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
    rqs_rand(r);
    memset(c, 0, sizeof *c);
    ropeqk_default_params(&c->p);
    c->p.layout = i % 2 ? ROPEQK_HALF_SPLIT : ROPEQK_INTERLEAVED;
    c->dtype = (ropeqk_dtype)((i / 2) % 3); /* f32, f16, bf16 */
    c->bshd = (i / 4) % 2 == 1;
    bool large = i % 3 == 2, partial = i % 5 == 1 || i % 5 == 3;
    c->per_token = i % 7 == 4 || i % 7 == 6;
    c->B = rqs_range(r, 1, 2);
    c->Hkv = rqs_range(r, 1, 3);
    c->Hq = c->Hkv * (i % 4 == 0 ? 1 : rqs_range(r, 2, 4)); /* GQA in 3 cases of 4 */
    c->D = dims[rqs_range(r, 0, (int64_t)(sizeof dims / sizeof dims[0]) - 1)];
    c->Sq = rqs_unit(r) < 0.2 ? 1 : rqs_range(r, 1, 40); /* decode-like Sq = 1 often */
    c->Sk = rqs_range(r, 1, 80);
    c->p.rotary_dim = partial && c->D > 2 ? (int32_t)(2 * rqs_range(r, 1, c->D / 2 - 1)) : 0;
    c->p.base = rqs_unit(r) < 0.7 ? bases[rqs_range(r, 0, 4)] : exp(rqs_unit(r) * 16.0 + 1.0);
    c->p.causal = rqs_unit(r) < 0.5;
    c->p.conjugate = rqs_unit(r) < 0.25;
    double u = rqs_unit(r);
    c->p.scale = u < 0.5 ? 0.0 : u < 0.9 ? 0.05 + 2.0 * rqs_unit(r) : -0.3;
    int64_t lim = large ? (int64_t)1 << 20 : 4096;
    if (!c->per_token) {
        c->p.k_pos_offset = rqs_range(r, large ? lim - 4096 : 0, lim - c->Sk);
        if (c->Sq == 1) /* decode: the query at the last key position */
            c->p.q_pos_offset = c->p.k_pos_offset + c->Sk - 1;
        else if (c->p.causal) /* a chunk of queries inside the keys' range: every row sees some keys */
            c->p.q_pos_offset = c->p.k_pos_offset + rqs_range(r, 0, c->Sk > c->Sq ? c->Sk - c->Sq : 0);
        else
            c->p.q_pos_offset = rqs_range(r, large ? lim - 4096 : 0, lim - c->Sq);
        int64_t mq = c->p.q_pos_offset + c->Sq - 1, mk = c->p.k_pos_offset + c->Sk - 1;
        c->max_pos = mq > mk ? mq : mk;
    } else {
        c->max_pos = lim;
    }
    /* frequency scaling in half of the cases, all 7 variants within 18 cases */
    if ((i / 3) % 2 == 1)
        draw_scaling(c, r, (int)(((i / 6) * 3 + i % 3) % 7));
    /* a sliding window in one case of 5 (both layouts) */
    if (i % 5 == 2) {
        c->p.window = rqs_range(r, 1, c->Sq + c->Sk + 4);
        if (!c->per_token && c->Sq > 1) { /* queries among the keys, so that the window cuts inside */
            c->p.q_pos_offset = c->p.k_pos_offset + rqs_range(r, 0, c->Sk > c->Sq ? c->Sk - c->Sq : 0);
            int64_t mq = c->p.q_pos_offset + c->Sq - 1, mk = c->p.k_pos_offset + c->Sk - 1;
            c->max_pos = mq > mk ? mq : mk;
        }
    }
}

static void fill_input(uint64_t *r, ropeqk_dtype dt, void *data, size_t n)
{
    for (size_t x = 0; x < n; x++) {
        float v = (float)rqs_normal(r);
        if (dt == ROPEQK_F16)
            ((uint16_t *)data)[x] = rqs_float_to_half(v);
        else if (dt == ROPEQK_BF16)
            ((uint16_t *)data)[x] = rqs_float_to_bf16(v);
        else
            ((float *)data)[x] = v;
    }
}

typedef struct {
    int64_t cases, failures;
    double max_err;
} tally;

/* Runs one case; returns CLI_OK, CLI_CHECK_FAILED (counted) or CLI_RUNTIME (printed). */
static int run_case(cli_device *dev, const check_case *c, uint64_t *r, double *err_out, int64_t *mism_out)
{
    ropeqk_tensor qt = c->bshd ? ropeqk_tensor_bshd(c->dtype, c->B, c->Sq, c->Hq, c->D)
                               : ropeqk_tensor_bhsd(c->dtype, c->B, c->Hq, c->Sq, c->D);
    ropeqk_tensor kt = c->bshd ? ropeqk_tensor_bshd(c->dtype, c->B, c->Sk, c->Hkv, c->D)
                               : ropeqk_tensor_bhsd(c->dtype, c->B, c->Hkv, c->Sk, c->D);
    ropeqk_tensor ot = ropeqk_tensor_bhsd(ROPEQK_F32, c->B, c->Hq, c->Sq, c->Sk);
    size_t qb = ropeqk_tensor_extent(&qt), kb = ropeqk_tensor_extent(&kt), ob = ropeqk_tensor_extent(&ot);
    size_t es = ropeqk_dtype_size(c->dtype);
    void *qd = malloc(qb), *kd = malloc(kb);
    float *od = malloc(ob);
    int32_t *qpos = NULL, *kpos = NULL;
    int rc = CLI_RUNTIME;
    if (c->per_token) {
        qpos = malloc((size_t)c->Sq * sizeof *qpos);
        kpos = malloc((size_t)c->Sk * sizeof *kpos);
    }
    if (!qd || !kd || !od || (c->per_token && (!qpos || !kpos))) {
        cli_err("check: out of memory");
        goto done;
    }
    fill_input(r, c->dtype, qd, qb / es);
    fill_input(r, c->dtype, kd, kb / es);
    if (c->per_token) { /* unsorted, with repeats: the mask must follow positions, not rows */
        for (int64_t j = 0; j < c->Sk; j++)
            kpos[j] = (int32_t)rqs_range(r, 0, c->max_pos);
        for (int64_t i = 0; i < c->Sq; i++)
            qpos[i] = rqs_unit(r) < 0.3 ? kpos[rqs_range(r, 0, c->Sk - 1)]
                                               : (int32_t)rqs_range(r, 0, c->max_pos);
    }
    ropeqk_status st = cli_device_scores(dev, &c->p, &qt, qd, &kt, kd, qpos, kpos, &ot, od);
    if (st != ROPEQK_SUCCESS) {
        char what[1024], d[640];
        describe(c, d, sizeof d);
        snprintf(what, sizeof what, "check: device path on [%s]", d);
        cli_lib_err(what, st, dev->ctx);
        goto done;
    }
    st = cli_verify(&c->p, &qt, qd, &kt, kd, qpos, kpos, &ot, od, err_out, mism_out);
    if (st != ROPEQK_SUCCESS) {
        cli_lib_err("check: scalar path", st, NULL);
        goto done;
    }
    rc = !(*err_out <= CLI_TOLERANCE) || *mism_out != 0 ? CLI_CHECK_FAILED : CLI_OK;
done:
    free(qd);
    free(kd);
    free(od);
    free(qpos);
    free(kpos);
    return rc;
}

int cmd_check(int argc, char **argv)
{
    int64_t seed = -1, ncases = 100;
    const char *device = NULL;
    int seen_seed = 0, verbose = 0;
    const cli_opt opts[] = {
        {"--seed", OPT_I64, &seed, "N", "random seed, 0..2^63-1 (default: from the clock; printed)", 0, 0,
         INT64_MAX, NULL, &seen_seed},
        {"--cases", OPT_I64, &ncases, "N", "number of random cases (default 100)", 0, 1, 100000000, NULL, NULL},
        {"--device", OPT_STR, &device, "SPEC", "device: P:D, vulkan[:N] or a name substring (default as in `ropeqk devices`)",
         0, 0, 0, NULL, NULL},
        {"--verbose", OPT_FLAG, &verbose, NULL, "print every case and its error (default off)", 0, 0, 0, NULL,
         NULL},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    bool help = false;
    int rc = cli_parse("check", opts, nopts, argc, argv, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        cli_print_help(stdout, "ropeqk check [--seed N] [--cases N] [--device SPEC]",
                       "Runs random problems on the device and on the scalar fp64 path and compares them\n"
                       "(metric of docs/conventions.md, tolerance 1e-5, masks exactly): both layouts, f32,\n"
                       "f16 and bf16 inputs, BHSD and BSHD, partial rotary, GQA/MQA, causal, conjugate,\n"
                       "decode (Sq = 1), per-token positions, positions up to 2^20, frequency scaling\n"
                       "(linear, dynamic, yarn, llama3, longrope, freq_factors) in half the cases, sliding\n"
                       "windows in one of 5.\n"
                       "Exit status 3 if any case fails.",
                       opts, nopts);
        return CLI_OK;
    }
    if (!seen_seed)
        seed = (int64_t)cli_default_seed();
    cli_device dev;
    rc = cli_device_open("check", device, false, &dev);
    if (rc != CLI_OK)
        return rc;
    printf("check: seed %" PRId64 ", %" PRId64 " cases on %s (%s), tolerance %g\n", seed, ncases, dev.name, dev.why,
           CLI_TOLERANCE);
    fflush(stdout);
    tally t[2][3];
    memset(t, 0, sizeof t);
    bool tty = isatty(2);
    int64_t fails = 0;
    double t0 = rqs_now();
    uint64_t r;
    rc = CLI_OK;
    for (int64_t i = 0; i < ncases; i++) {
        check_case c;
        char d[640];
        make_case((uint64_t)seed, i, &r, &c);
        describe(&c, d, sizeof d);
        if (tty) {
            fprintf(stderr, "\r\033[K[%" PRId64 "/%" PRId64 "] %.100s", i + 1, ncases, d);
            fflush(stderr);
        }
        double err = 0.0;
        int64_t mism = 0;
        int cr = run_case(&dev, &c, &r, &err, &mism);
        if (cr == CLI_RUNTIME) {
            if (tty)
                fputc('\n', stderr);
            rc = CLI_RUNTIME;
            break;
        }
        tally *x = &t[c.p.layout == ROPEQK_HALF_SPLIT][c.dtype];
        x->cases++;
        if (!(err <= x->max_err))
            x->max_err = err;
        if (cr == CLI_CHECK_FAILED) {
            x->failures++;
            fails++;
            if (tty)
                fprintf(stderr, "\r\033[K");
            fprintf(stderr, "FAIL case %" PRId64 " (--seed %" PRId64 "): %s: max error %.3g, mask mismatches %" PRId64
                    "\n", i, seed, d, err, mism);
        } else if (verbose) {
            if (tty)
                fprintf(stderr, "\r\033[K");
            printf("case %" PRId64 ": %s: max error %.3g\n", i, d, err);
            fflush(stdout);
        }
    }
    if (tty)
        fprintf(stderr, "\r\033[K");
    double secs = rqs_now() - t0;
    cli_device_close(&dev);
    printf("\n%-12s %-5s %7s %11s %9s\n", "layout", "dtype", "cases", "max error", "failures");
    double all_err = 0.0;
    int64_t all_cases = 0;
    for (int l = 0; l < 2; l++)
        for (int dt = 0; dt < 3; dt++) {
            const tally *x = &t[l][dt];
            printf("%-12s %-5s %7" PRId64 " %11.3g %9" PRId64 "\n", l ? "half-split" : "interleaved", dtype_label[dt],
                   x->cases, x->max_err, x->failures);
            if (!(x->max_err <= all_err))
                all_err = x->max_err;
            all_cases += x->cases;
        }
    printf("%-12s %-5s %7" PRId64 " %11.3g %9" PRId64 "\n", "all", "", all_cases, all_err, fails);
    if (rc == CLI_RUNTIME) {
        printf("stopped by a runtime error after %" PRId64 " cases (%.1f s)\n", all_cases, secs);
        return CLI_RUNTIME;
    }
    printf("%s: %" PRId64 " of %" PRId64 " cases within %g (%.1f s, seed %" PRId64 ")\n", fails ? "FAIL" : "PASS",
           all_cases - fails, all_cases, CLI_TOLERANCE, secs, seed);
    return fails ? CLI_CHECK_FAILED : CLI_OK;
}
