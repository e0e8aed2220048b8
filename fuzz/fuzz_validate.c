/* libFuzzer target: the public API's argument validation (src/tensor.c, src/scaling.c) and, for
 * small accepted problems, the scalar reference path on host buffers of exactly the extents the
 * descriptors claim (malloc'd one by one, so ASan sees any access outside a view). No OpenCL.
 * The input encodes one call: see validate_input.h; fuzz/make_seeds.py writes the seeds.
 *
 * Checks: every status is one validation can return (ROPEQK_SUCCESS is impossible with NULL data,
 * ROPEQK_ERR_NULL_POINTER means validation passed); an accepted call satisfies every rule ropeqk.h
 * documents, and its views never alias (brute force for small views); a real run succeeds, leaves
 * the inputs and the output's gaps untouched, writes -inf wherever the mask says, agrees with
 * ropeqk_max_error(), and gives the same scores for position arrays equal to the offsets as for
 * none; ropeqk_inv_freq() writes no more than R/2 entries.
 *
 * An accepted configuration must also give finite, positive inverse frequencies (<= 1e30) and a
 * finite attention factor. Environment: FUZZ_VERBOSE=1 describes each input on stderr. */
#include "validate_input.h"

#include <math.h>
#include <string.h>

enum { MAX_EXTENT = 64 * 1024, ALIAS_CHECK_MAX = 4096 };
static const double MAX_WORK = 1e6;

static bool verbose(void)
{
    static int on = -1;
    if (on < 0)
        on = fv_env_flag("FUZZ_VERBOSE");
    return on;
}

/* ---- the rules ropeqk.h documents ------------------------------------------------------ */

static bool dtype_ok(ropeqk_dtype t, bool qk)
{
    return qk ? t == ROPEQK_F32 || t == ROPEQK_F16 || t == ROPEQK_BF16 : t == ROPEQK_F32 || t == ROPEQK_F64;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Brute force: no two elements of a small accepted view share a byte offset (offsets are
   multiples of the element size, so distinct offsets never overlap). */
static void check_no_alias(const ropeqk_tensor *t)
{
    int64_t n;
    CHECK(!__builtin_mul_overflow(t->ne[0], t->ne[1], &n) && !__builtin_mul_overflow(n, t->ne[2], &n) &&
          !__builtin_mul_overflow(n, t->ne[3], &n));
    if (n > ALIAS_CHECK_MAX)
        return;
    int64_t *off = malloc((size_t)n * sizeof *off), m = 0;
    CHECK(off);
    for (int64_t a = 0; a < t->ne[0]; a++)
        for (int64_t b = 0; b < t->ne[1]; b++)
            for (int64_t c = 0; c < t->ne[2]; c++)
                for (int64_t d = 0; d < t->ne[3]; d++)
                    off[m++] = a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3];
    qsort(off, (size_t)n, sizeof *off, cmp_i64);
    for (int64_t i = 1; i < n; i++)
        CHECK(off[i] != off[i - 1]);
    free(off);
}

static void check_view_rules(const ropeqk_tensor *t, bool qk)
{
    CHECK(dtype_ok(t->dtype, qk));
    int64_t es = (int64_t)ropeqk_dtype_size(t->dtype);
    for (int i = 0; i < 4; i++) {
        CHECK(t->ne[i] >= 1);
        CHECK(t->nb[i] >= 0 && t->nb[i] % es == 0);
    }
    if (qk && t->ne[3] > 1)
        CHECK(t->nb[3] == es);
    size_t ext = ropeqk_tensor_extent(t);
    CHECK(ext >= (size_t)es && ext <= (size_t)INT64_MAX);
    check_no_alias(t);
}

static bool pos_finite(double x) { return isfinite(x) && x > 0.0; }

static void check_list(const double *f, int32_t n, int64_t half)
{
    CHECK(f && n == half);
    for (int32_t i = 0; i < n; i++)
        CHECK(pos_finite(f[i]));
}

/* Validation accepted (p, q, k, o): every documented rule must hold. */
static void check_accepted(const ropeqk_params *p, const ropeqk_tensor *q, const ropeqk_tensor *k,
                           const ropeqk_tensor *o)
{
    check_view_rules(q, true);
    check_view_rules(k, true);
    check_view_rules(o, false);
    int64_t B = q->ne[0], Hq = q->ne[1], Sq = q->ne[2], D = q->ne[3], Hkv = k->ne[1], Sk = k->ne[2];
    CHECK(k->ne[0] == B && k->ne[3] == D);
    CHECK(o->ne[0] == B && o->ne[1] == Hq && o->ne[2] == Sq && o->ne[3] == Sk);
    CHECK(Hq % Hkv == 0);
    CHECK(D <= 65536);
    int64_t R = p->rotary_dim ? p->rotary_dim : D;
    CHECK(R >= 2 && R <= D && R % 2 == 0);
    CHECK(p->layout == ROPEQK_INTERLEAVED || p->layout == ROPEQK_HALF_SPLIT);
    CHECK(p->base == 0.0 || pos_finite(p->base));
    CHECK(isfinite(p->scale));
    CHECK(p->q_pos_offset >= INT32_MIN && p->q_pos_offset <= INT32_MAX - (Sq - 1));
    CHECK(p->k_pos_offset >= INT32_MIN && p->k_pos_offset <= INT32_MAX - (Sk - 1));
    CHECK(p->window >= 0);
    const ropeqk_scaling *s = &p->scaling;
    CHECK(s->type >= ROPEQK_SCALING_NONE && s->type <= ROPEQK_SCALING_LONGROPE);
    if (s->type == ROPEQK_SCALING_LONGROPE) {
        check_list(s->long_factor, s->n_long_factor, R / 2);
        check_list(s->short_factor, s->n_short_factor, R / 2);
    } else {
        CHECK(!s->long_factor && !s->short_factor && !s->n_long_factor && !s->n_short_factor);
    }
    if (s->freq_factors || s->n_freq_factors)
        check_list(s->freq_factors, s->n_freq_factors, R / 2);
    if (s->type == ROPEQK_SCALING_NONE)
        CHECK(s->factor == 0.0);
    if (s->type == ROPEQK_SCALING_LINEAR)
        CHECK(pos_finite(s->factor));
    if (s->type != ROPEQK_SCALING_YARN)
        CHECK(s->beta_fast == 0.0 && s->beta_slow == 0.0);
    if (s->type != ROPEQK_SCALING_LLAMA3)
        CHECK(s->low_freq_factor == 0.0 && s->high_freq_factor == 0.0);
}

static bool known_status(ropeqk_status st)
{
    switch (st) {
    case ROPEQK_ERR_NULL_POINTER:
    case ROPEQK_ERR_BAD_SHAPE:
    case ROPEQK_ERR_BAD_ROTARY_DIM:
    case ROPEQK_ERR_BAD_HEADS:
    case ROPEQK_ERR_BAD_STRIDES:
    case ROPEQK_ERR_OVERLAP:
    case ROPEQK_ERR_OVERFLOW:
    case ROPEQK_ERR_BAD_DTYPE:
    case ROPEQK_ERR_BAD_PARAM:
    case ROPEQK_ERR_POSITION_RANGE:
    case ROPEQK_ERR_BAD_SCALING:
        return true;
    default:
        return false;
    }
}

/* ---- the real run ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, pos;
} cycler;

static uint8_t cy_u8(cycler *c, size_t i)
{
    if (!c->n)
        return (uint8_t)(i * 37 + 11);
    uint8_t v = c->p[c->pos];
    c->pos = (c->pos + 1) % c->n;
    return v;
}

static void *filled(size_t len, cycler *c)
{
    uint8_t *b = malloc(len);
    CHECK(b);
    for (size_t i = 0; i < len; i++)
        b[i] = cy_u8(c, i);
    return b;
}

static int32_t *fill_pos(int mode, int64_t n, int64_t off, cycler *c)
{
    int32_t *a = malloc((size_t)n * sizeof *a);
    CHECK(a);
    for (int64_t i = 0; i < n; i++) {
        uint32_t raw = 0;
        switch (mode) {
        case 0: a[i] = (int32_t)(off + i); break; /* what the offsets mean */
        case 1:
            for (int b = 0; b < 4; b++)
                raw |= (uint32_t)cy_u8(c, (size_t)i) << (8 * b);
            a[i] = (int32_t)raw;
            break;
        case 2: a[i] = (int32_t)i; break;
        case 3: a[i] = INT32_MAX; break;
        case 4: a[i] = INT32_MIN; break;
        case 5: a[i] = (int32_t)(n - 1 - i); break;
        case 6: a[i] = i % 2 ? INT32_MAX : INT32_MIN; break;
        default: a[i] = cy_u8(c, (size_t)i); break;
        }
    }
    return a;
}

static double load_out(const ropeqk_tensor *o, const uint8_t *base, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const uint8_t *e = base + b * o->nb[0] + h * o->nb[1] + i * o->nb[2] + j * o->nb[3];
    if (o->dtype == ROPEQK_F64) {
        double d;
        memcpy(&d, e, 8);
        return d;
    }
    float f;
    memcpy(&f, e, 4);
    return f;
}

static void run_for_real(const fv_call *call)
{
    const ropeqk_params *p = &call->p;
    const ropeqk_tensor *q = &call->q, *k = &call->k, *o = &call->o;
    cycler cy = {call->rest, call->rest_len, 0}, *c = &cy;
    size_t qe = ropeqk_tensor_extent(q), ke = ropeqk_tensor_extent(k), oe = ropeqk_tensor_extent(o);
    int64_t B = q->ne[0], Hq = q->ne[1], Sq = q->ne[2], D = q->ne[3], Sk = k->ne[2];
    if (qe > MAX_EXTENT || ke > MAX_EXTENT || oe > MAX_EXTENT ||
        (double)B * (double)Hq * (double)Sq * (double)Sk * (double)D > MAX_WORK)
        return;
    uint8_t *qd = filled(qe, c), *kd = filled(ke, c), *od = malloc(oe);
    uint8_t *q0 = malloc(qe), *k0 = malloc(ke);
    CHECK(od && q0 && k0);
    memcpy(q0, qd, qe);
    memcpy(k0, kd, ke);
    memset(od, 0xA5, oe); /* canary: bytes outside the output's elements must keep it */
    int32_t *qpos = call->use_qpos ? fill_pos(call->pos_mode, Sq, p->q_pos_offset, c) : NULL;
    int32_t *kpos = call->use_kpos ? fill_pos(call->pos_mode, Sk, p->k_pos_offset, c) : NULL;

    ropeqk_status st = ropeqk_scores_ref(p, q, qd, k, kd, qpos, kpos, o, od);
    if (verbose())
        fprintf(stderr, "  real run: %s\n", ropeqk_status_string(st));
    CHECK(st == ROPEQK_SUCCESS);
    CHECK(memcmp(qd, q0, qe) == 0 && memcmp(kd, k0, ke) == 0);

    /* the output's gaps are untouched; masked entries are -inf */
    uint8_t *mine = calloc(oe, 1);
    CHECK(mine);
    int64_t es = (int64_t)ropeqk_dtype_size(o->dtype), nan = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++)
                for (int64_t j = 0; j < Sk; j++) {
                    int64_t at = b * o->nb[0] + h * o->nb[1] + i * o->nb[2] + j * o->nb[3];
                    memset(mine + at, 1, (size_t)es);
                    double v = load_out(o, od, b, h, i, j);
                    int64_t pq = qpos ? qpos[i] : p->q_pos_offset + i, pk = kpos ? kpos[j] : p->k_pos_offset + j;
                    bool masked = (p->causal && pk > pq) || (p->window > 0 && pq - pk >= p->window);
                    if (masked)
                        CHECK(isinf(v) && v < 0);
                    nan += isnan(v);
                }
    for (size_t i = 0; i < oe; i++)
        if (!mine[i])
            CHECK(od[i] == 0xA5);
    free(mine);

    /* the error metric of a result against itself: 0, and a mismatch per NaN */
    double err = -1.0;
    int64_t mism = -1;
    st = ropeqk_max_error(p, q, qd, k, kd, o, od, o, od, &err, &mism);
    CHECK(st == ROPEQK_SUCCESS);
    CHECK(err == 0.0 && mism == nan);

    /* position arrays that spell out the offsets give bitwise the same scores as none */
    if ((qpos || kpos) && call->pos_mode == 0) {
        uint8_t *od2 = malloc(oe);
        CHECK(od2);
        memcpy(od2, od, oe);
        st = ropeqk_scores_ref(p, q, qd, k, kd, NULL, NULL, o, od2);
        CHECK(st == ROPEQK_SUCCESS);
        CHECK(memcmp(od, od2, oe) == 0);
        free(od2);
    }

    free(qd); free(kd); free(od); free(q0); free(k0); free(qpos); free(kpos);
}

/* ---- the target ------------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fv_call c;
    fv_decode(data, size, &c);
    const ropeqk_params *p = &c.p;
    int64_t D = c.q.ne[3], R = p->rotary_dim ? p->rotary_dim : D;
    if (verbose())
        fv_print(&c);

    /* Validation only: positions are flags here (never read before the NULL-data check). */
    int32_t dummy_pos[1] = {0};
    ropeqk_status st = ropeqk_scores_ref(p, &c.q, NULL, &c.k, NULL, c.use_qpos ? dummy_pos : NULL,
                                         c.use_kpos ? dummy_pos : NULL, &c.o, NULL);
    if (verbose())
        fprintf(stderr, "  validation: %s\n", ropeqk_status_string(st));
    CHECK(known_status(st));
    if (st == ROPEQK_ERR_NULL_POINTER) {
        check_accepted(p, &c.q, &c.k, &c.o);
        if (c.real)
            run_for_real(&c);
    }

    /* Inverse frequencies for head_dim = D of q: inv holds exactly R/2 doubles. */
    size_t half = R >= 2 && R <= 65536 ? (size_t)(R / 2) : 1;
    double *inv = malloc(half * sizeof *inv), af = -1.0;
    CHECK(inv);
    st = ropeqk_inv_freq(p, D, inv, &af);
    if (verbose()) {
        fprintf(stderr, "  ropeqk_inv_freq(head_dim %lld): %s", (long long)D, ropeqk_status_string(st));
        for (size_t i = 0; st == ROPEQK_SUCCESS && i < half && i < 8; i++)
            fprintf(stderr, " %.17g", inv[i]);
        if (st == ROPEQK_SUCCESS)
            fprintf(stderr, "; attention factor %.17g", af);
        fprintf(stderr, "\n");
    }
    CHECK(st == ROPEQK_SUCCESS || (known_status(st) && st != ROPEQK_ERR_NULL_POINTER));
    if (st == ROPEQK_SUCCESS) {
        CHECK(R >= 2 && R <= D && R % 2 == 0 && D <= 65536);
        CHECK(isfinite(af) && af > 0.0);
        for (size_t i = 0; i < half; i++)
            CHECK(isfinite(inv[i]) && inv[i] > 0.0 && inv[i] <= 1e30);
    }
    free(inv);
    fv_free(&c);
    return 0;
}
