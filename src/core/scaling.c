/* Frequency scaling (linear, dynamic NTK, YaRN, Llama 3, LongRoPE, per-frequency divisors), in fp64
 * on the host, following the Hugging Face `rope_scaling` formulas as written in docs/conventions.md.
 * The kernels only ever see the final inverse frequencies and the attention factor. */
#include "internal.h"

#include <math.h>

#define RQ_PI 3.14159265358979323846

static bool pos_finite(double x) { return isfinite(x) && x > 0.0; }

static bool factors_ok(const double *f, int32_t n, int64_t want)
{
    if (!f || n != want)
        return false;
    for (int32_t i = 0; i < n; i++)
        if (!pos_finite(f[i]))
            return false;
    return true;
}

ropeqk_status rq_check_scaling(const ropeqk_scaling *s, rq_problem *pb, bool per_token_pos)
{
    const int64_t half = pb->R / 2;
    const ropeqk_scaling_type t = s->type;
    if (t < ROPEQK_SCALING_NONE || t > ROPEQK_SCALING_LONGROPE)
        return ROPEQK_ERR_BAD_SCALING;
    /* fields the type does not read must stay unset */
    bool uses_factor = t != ROPEQK_SCALING_NONE, uses_l0 = t >= ROPEQK_SCALING_DYNAMIC,
         uses_len = t == ROPEQK_SCALING_DYNAMIC || t == ROPEQK_SCALING_LONGROPE,
         uses_beta = t == ROPEQK_SCALING_YARN, uses_attn = t == ROPEQK_SCALING_YARN || t == ROPEQK_SCALING_LONGROPE,
         uses_lh = t == ROPEQK_SCALING_LLAMA3, uses_lists = t == ROPEQK_SCALING_LONGROPE;
    if ((!uses_factor && s->factor != 0.0) || (!uses_l0 && s->original_max_position != 0) ||
        (!uses_len && s->seq_len != 0) || (!uses_beta && (s->beta_fast != 0.0 || s->beta_slow != 0.0)) ||
        (!uses_attn && s->attention_factor != 0.0) ||
        (!uses_lh && (s->low_freq_factor != 0.0 || s->high_freq_factor != 0.0)) ||
        (!uses_lists && (s->long_factor || s->short_factor || s->n_long_factor || s->n_short_factor)) ||
        (!uses_beta && s->yarn_no_truncate) || (s->yarn_no_truncate != 0 && s->yarn_no_truncate != 1))
        return ROPEQK_ERR_BAD_SCALING;
    /* required and range-checked */
    pb->factor = s->factor;
    if (t == ROPEQK_SCALING_LLAMA3 && pb->factor == 0.0)
        pb->factor = 8.0;
    if (t == ROPEQK_SCALING_LONGROPE && pb->factor == 0.0)
        pb->factor = 1.0; /* only feeds the default attention factor */
    if (uses_factor && !pos_finite(pb->factor))
        return ROPEQK_ERR_BAD_SCALING;
    pb->l0 = s->original_max_position;
    if (t == ROPEQK_SCALING_LLAMA3 && pb->l0 == 0)
        pb->l0 = 8192;
    if (uses_l0 && pb->l0 <= 0)
        return ROPEQK_ERR_BAD_SCALING;
    /* LongRoPE's default attention factor divides by ln(L0) */
    if (t == ROPEQK_SCALING_LONGROPE && s->attention_factor == 0.0 && pb->factor > 1.0 && pb->l0 < 2)
        return ROPEQK_ERR_BAD_SCALING;
    if (uses_len) {
        pb->seq_len = s->seq_len;
        if (pb->seq_len == 0) {
            if (per_token_pos)
                return ROPEQK_ERR_BAD_SCALING; /* the host cannot see device positions */
            int64_t lq = pb->q_off + pb->Sq, lk = pb->k_off + pb->Sk;
            pb->seq_len = lq > lk ? lq : lk;
        }
        if (pb->seq_len <= 0)
            return ROPEQK_ERR_BAD_SCALING;
    }
    if (t == ROPEQK_SCALING_DYNAMIC && pb->R <= 2)
        return ROPEQK_ERR_BAD_SCALING; /* the exponent R/(R-2) */
    pb->beta_fast = s->beta_fast == 0.0 ? 32.0 : s->beta_fast;
    pb->beta_slow = s->beta_slow == 0.0 ? 1.0 : s->beta_slow;
    if (uses_beta && (!pos_finite(pb->beta_fast) || !pos_finite(pb->beta_slow)))
        return ROPEQK_ERR_BAD_SCALING;
    pb->low_ff = s->low_freq_factor == 0.0 ? 1.0 : s->low_freq_factor;
    pb->high_ff = s->high_freq_factor == 0.0 ? 4.0 : s->high_freq_factor;
    if (uses_lh && (!pos_finite(pb->low_ff) || !pos_finite(pb->high_ff) || pb->low_ff == pb->high_ff))
        return ROPEQK_ERR_BAD_SCALING;
    if (uses_lists && (!factors_ok(s->long_factor, s->n_long_factor, half) ||
                       !factors_ok(s->short_factor, s->n_short_factor, half)))
        return ROPEQK_ERR_BAD_SCALING;
    if ((s->freq_factors || s->n_freq_factors) && !factors_ok(s->freq_factors, s->n_freq_factors, half))
        return ROPEQK_ERR_BAD_SCALING;
    pb->attn = 1.0;
    if (s->attention_factor != 0.0) {
        if (!pos_finite(s->attention_factor))
            return ROPEQK_ERR_BAD_SCALING;
        pb->attn = s->attention_factor;
    } else if (t == ROPEQK_SCALING_YARN && pb->factor > 1.0) {
        pb->attn = 0.1 * log(pb->factor) + 1.0;
    } else if (t == ROPEQK_SCALING_LONGROPE && pb->factor > 1.0) {
        pb->attn = sqrt(1.0 + log(pb->factor) / log((double)pb->l0));
    }
    pb->scaling = s;
    return ROPEQK_SUCCESS;
}

/* YaRN: dimension index at which a wavelength makes `rot` turns over L0. */
static double yarn_corr_dim(double rot, double R, double base, double l0)
{
    return R * log(l0 / (rot * 2.0 * RQ_PI)) / (2.0 * log(base));
}

/* Quantities shared by every frequency of a problem (the NTK base, YaRN's ramp ends). */
typedef struct {
    double base, low, high;
} freq_setup;

static freq_setup setup(const rq_problem *pb)
{
    const ropeqk_scaling_type t = pb->scaling ? pb->scaling->type : ROPEQK_SCALING_NONE;
    const double R = (double)pb->R;
    freq_setup f = {pb->base, 0.0, 0.0};
    if (t == ROPEQK_SCALING_DYNAMIC && pb->seq_len > pb->l0)
        f.base *= pow(pb->factor * (double)pb->seq_len / (double)pb->l0 - (pb->factor - 1.0), R / (R - 2.0));
    if (t == ROPEQK_SCALING_YARN) {
        /* Hugging Face's find_correction_range: rounded out to whole dims unless "truncate": false */
        double lo = yarn_corr_dim(pb->beta_fast, R, f.base, (double)pb->l0);
        double hi = yarn_corr_dim(pb->beta_slow, R, f.base, (double)pb->l0);
        bool round = !pb->scaling->yarn_no_truncate;
        f.low = fmax(round ? floor(lo) : lo, 0.0);
        f.high = fmin(round ? ceil(hi) : hi, R - 1.0);
        if (f.low == f.high)
            f.high += 0.001;
    }
    return f;
}

/* Inverse frequency i, scaling applied. */
static double inv_at(const rq_problem *pb, const freq_setup *fs, int64_t i)
{
    const ropeqk_scaling *s = pb->scaling;
    const ropeqk_scaling_type t = s ? s->type : ROPEQK_SCALING_NONE;
    const double R = (double)pb->R;
    double f = pow(fs->base, -2.0 * (double)i / R);
    switch (t) {
    case ROPEQK_SCALING_LINEAR:
        f /= pb->factor;
        break;
    case ROPEQK_SCALING_YARN: {
        double ramp = fmin(fmax(((double)i - fs->low) / (fs->high - fs->low), 0.0), 1.0);
        double e = 1.0 - ramp; /* extrapolation weight */
        f = (f / pb->factor) * (1.0 - e) + f * e;
        break;
    }
    case ROPEQK_SCALING_LLAMA3: {
        double wavelen = 2.0 * RQ_PI / f, l0 = (double)pb->l0;
        if (wavelen > l0 / pb->low_ff) {
            f /= pb->factor;
        } else if (!(wavelen < l0 / pb->high_ff)) {
            double sm = (l0 / wavelen - pb->low_ff) / (pb->high_ff - pb->low_ff);
            f = (1.0 - sm) * f / pb->factor + sm * f;
        }
        break;
    }
    case ROPEQK_SCALING_LONGROPE: {
        const double *ext = pb->seq_len > pb->l0 ? s->long_factor : s->short_factor;
        f = 1.0 / (ext[i] * pow(fs->base, 2.0 * (double)i / R));
        break;
    }
    default:
        break;
    }
    if (s && s->freq_factors)
        f /= s->freq_factors[i];
    return f;
}

void rq_inv_freq(const rq_problem *pb, double *inv)
{
    freq_setup fs = setup(pb);
    for (int64_t i = 0; i < pb->R / 2; i++)
        inv[i] = inv_at(pb, &fs, i);
}

bool rq_freqs_usable(const rq_problem *pb)
{
    /* The kernels carry inv/pi as floats: past ~1e30 rad per position no angle means anything, and
     * a non-finite or non-positive frequency (a subnormal divisor, base 1e-300, ...) would turn
     * every score into NaN. */
    if (!isfinite(pb->attn) || pb->attn <= 0.0)
        return false;
    freq_setup fs = setup(pb);
    for (int64_t i = 0; i < pb->R / 2; i++) {
        double f = inv_at(pb, &fs, i);
        if (!isfinite(f) || f <= 0.0 || f > 1e30)
            return false;
    }
    return true;
}
