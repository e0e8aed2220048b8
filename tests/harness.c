#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define TH_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/lsan_interface.h>
#define TH_LSAN 1
#endif
#endif

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 0xFFu /* all-ones bytes are NaN as f32, f16 and bf16: a stray read poisons a score */

uint64_t th_seed(uint64_t dflt)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e && *e ? strtoull(e, NULL, 0) : dflt;
}

bool th_alloc(th_buf *b, ropeqk_dtype dt, const int64_t ne[4], th_layout lay)
{
    memset(b, 0, sizeof *b);
    int64_t es = (int64_t)ropeqk_dtype_size(dt);
    if (lay == TH_BSHD) {
        b->t = ropeqk_tensor_bshd(dt, ne[0], ne[2], ne[1], ne[3]);
    } else if (lay == TH_PADDED) {
        /* rows padded by 3 elements, heads by 5 rows' worth, batches by 1 element */
        b->t.dtype = dt;
        memcpy(b->t.ne, ne, sizeof b->t.ne);
        b->t.nb[3] = es;
        b->t.nb[2] = (ne[3] + 3) * es;
        b->t.nb[1] = b->t.nb[2] * (ne[2] + 5);
        b->t.nb[0] = b->t.nb[1] * ne[1] + es;
    } else {
        b->t = ropeqk_tensor_bhsd(dt, ne[0], ne[1], ne[2], ne[3]);
    }
    /* extra bytes after the extent catch writes one past the end */
    b->bytes = ropeqk_tensor_extent(&b->t) + 64;
    b->data = malloc(b->bytes);
    if (!b->data)
        return false;
    memset(b->data, GUARD, b->bytes);
    return true;
}

void th_free(th_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static size_t off(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (size_t)(a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3]);
}

void th_put_random(void *p, ropeqk_dtype dt, uint64_t *rng)
{
    if (dt == ROPEQK_F16) { /* sign, exponent 2^-6..2^-1, random mantissa */
        uint64_t r = rqs_rand(rng);
        uint16_t h = (uint16_t)(((r & 1) << 15) | ((9 + (r >> 1) % 6) << 10) | ((r >> 8) & 0x3ff));
        memcpy(p, &h, 2);
    } else if (dt == ROPEQK_BF16) { /* a uniform float truncated to its upper half */
        float f = (float)rqs_uniform(rng);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        uint16_t h = (uint16_t)(bits >> 16);
        memcpy(p, &h, 2);
    } else {
        float f = (float)rqs_uniform(rng);
        memcpy(p, &f, 4);
    }
}

void th_fill_random(th_buf *b, uint64_t *rng)
{
    const ropeqk_tensor *t = &b->t;
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
        for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
                    th_put_random(b->data + off(t, i0, i1, i2, i3), t->dtype, rng);
}

bool th_guards_intact(const th_buf *b)
{
    /* mark the view's bytes in a map, then every unmarked byte must be GUARD */
    unsigned char *in = calloc(b->bytes, 1);
    if (!in)
        return false;
    const ropeqk_tensor *t = &b->t;
    size_t es = ropeqk_dtype_size(t->dtype);
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
        for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
                    memset(in + off(t, i0, i1, i2, i3), 1, es);
    bool ok = true;
    for (size_t i = 0; i < b->bytes && ok; i++)
        ok = in[i] || b->data[i] == GUARD;
    free(in);
    return ok;
}

void th_describe(const th_case *c, char *buf, size_t len)
{
    static const char *lay[] = {"bhsd", "bshd", "padded"};
    static const char *dt[] = {"f32", "f16", "bf16", "f64"};
    snprintf(buf, len,
             "B=%lld Hq=%lld Hkv=%lld Sq=%lld Sk=%lld D=%lld R=%d %s %s in=%s out=%s base=%g causal=%d conj=%d "
             "qoff=%lld koff=%lld pos=%s(max %lld)",
             (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq, (long long)c->Sk,
             (long long)c->D, c->p.rotary_dim, c->p.layout ? "half-split" : "interleaved", dt[c->dtype],
             lay[c->in_layout], lay[c->out_layout], c->p.base, c->p.causal, c->p.conjugate,
             (long long)c->p.q_pos_offset, (long long)c->p.k_pos_offset, c->per_token_pos ? "per-token" : "offsets",
             (long long)c->pos_max);
}

/* The device-buffer path: every buffer (Q, K, positions, scores) sits between NaN canaries, at an
 * offset into its backend buffer; inputs must come back unchanged, canaries intact. */
static ropeqk_status run_devmem(ropeqk_ctx *ctx, const th_case *c, th_buf *q, th_buf *k, const int32_t *qp,
                                const int32_t *kp, th_buf *o, bool *guards_ok)
{
    dm_buf *g[5] = {NULL, NULL, NULL, NULL, NULL};
    const void *src[5] = {q->data, k->data, o->data, qp, kp};
    const size_t n[5] = {q->bytes, k->bytes, o->bytes, (size_t)c->Sq * 4, (size_t)c->Sk * 4};
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < 5 && !st; i++)
        if (src[i])
            st = dm_create(ctx, n[i], src[i], true, &g[i]);
    if (!st) {
        ropeqk_args a = {.q = dm_whole(g[0]), .k = dm_whole(g[1]), .out = dm_whole(g[2]), .q_pos = dm_whole(g[3]),
                      .k_pos = dm_whole(g[4])};
        st = dm_scores_oneshot(ctx, &c->p, &q->t, &k->t, &o->t, &a);
    }
    if (st)
        fprintf(stderr, "th_run: device-buffer path: %s (%s)\n", ropeqk_status_string(st), ropeqk_last_error());
    *guards_ok = true;
    const void *expect[5] = {q->data, k->data, NULL, qp, kp};
    for (int i = 0; i < 5; i++) {
        if (!g[i])
            continue;
        bool intact = false;
        if (i == 2 && dm_read(g[i], o->data))
            *guards_ok = false;
        if (dm_check(g[i], expect[i], &intact) || !intact)
            *guards_ok = false;
        dm_free(g[i]);
    }
    return st;
}

th_result th_run(ropeqk_ctx *ctx, const th_case *c, uint64_t seed)
{
    th_result r = {ROPEQK_SUCCESS, INFINITY, -1, false, 0};
    uint64_t rng = seed;
    th_buf q, k, o, o64;
    const int64_t qe[4] = {c->B, c->Hq, c->Sq, c->D}, ke[4] = {c->B, c->Hkv, c->Sk, c->D};
    const int64_t oe[4] = {c->B, c->Hq, c->Sq, c->Sk};
    int32_t *qp = NULL, *kp = NULL;
    bool ok = th_alloc(&q, c->dtype, qe, c->in_layout) & th_alloc(&k, c->dtype, ke, c->in_layout) &
              th_alloc(&o, ROPEQK_F32, oe, c->out_layout) & th_alloc(&o64, ROPEQK_F64, oe, TH_BHSD);
    unsigned char *q_copy = NULL, *k_copy = NULL;
    if (!ok) {
        r.status = ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        goto done;
    }
    th_fill_random(&q, &rng);
    th_fill_random(&k, &rng);
    if (c->per_token_pos) {
        qp = malloc((size_t)c->Sq * sizeof *qp);
        kp = malloc((size_t)c->Sk * sizeof *kp);
        for (int64_t i = 0; i < c->Sq; i++)
            qp[i] = (int32_t)(rqs_rand(&rng) % (uint64_t)(c->pos_max + 1));
        for (int64_t j = 0; j < c->Sk; j++)
            kp[j] = (int32_t)(rqs_rand(&rng) % (uint64_t)(c->pos_max + 1));
    }
    q_copy = malloc(q.bytes);
    k_copy = malloc(k.bytes);
    memcpy(q_copy, q.data, q.bytes);
    memcpy(k_copy, k.data, k.bytes);
    bool device_guards = true;
    if (c->enqueue)
        r.status = run_devmem(ctx, c, &q, &k, qp, kp, &o, &device_guards);
    else
        r.status = ropeqk_scores(ctx, &c->p, &q.t, q.data, &k.t, k.data, qp, kp, &o.t, (float *)(void *)o.data);
    if (r.status)
        goto done;
    r.status = ropeqk_scores_ref(&c->p, &q.t, q.data, &k.t, k.data, qp, kp, &o64.t, o64.data);
    if (r.status)
        goto done;
    r.status = ropeqk_max_error(&c->p, &q.t, q.data, &k.t, k.data, &o.t, o.data, &o64.t, o64.data, &r.max_err,
                                &r.mismatch);
    r.guards_ok = device_guards && th_guards_intact(&o) && memcmp(q_copy, q.data, q.bytes) == 0 &&
                  memcmp(k_copy, k.data, k.bytes) == 0;
    const double *s64 = (const double *)(void *)o64.data;
    for (int64_t i = 0; i < c->B * c->Hq * c->Sq * c->Sk; i++)
        r.masked += isinf(s64[i]) && s64[i] < 0;
done:
    free(q_copy);
    free(k_copy);
    free(qp);
    free(kp);
    th_free(&q);
    th_free(&k);
    th_free(&o);
    th_free(&o64);
    return r;
}

ropeqk_ctx *th_ctx_or_skip_reason(char *why, size_t len)
{
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(NULL, &ctx);
    if (st == ROPEQK_ERR_NO_DEVICE) {
        snprintf(why, len, "no device: %s (%s)", ropeqk_status_string(st), ropeqk_last_error());
        return NULL;
    }
    /* anything else is a failure, not a skip: a malformed ROPEQK_* variable, or validation required
     * (ROPEQK_VULKAN_VALIDATION=1) without the layer must not pass as "nothing to test" */
    cr_assert_eq(st, ROPEQK_SUCCESS, "ropeqk_ctx_create: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    ropeqk_diagnostics d;
    if (!ropeqk_ctx_diagnostics(ctx, &d) && d.validation == ROPEQK_VALIDATION_UNAVAILABLE) {
        snprintf(why, len, "ROPEQK_VULKAN_VALIDATION=auto and VK_LAYER_KHRONOS_validation is not installed: this "
                           "suite runs under the validation layer only (Debian: vulkan-validationlayers)");
        ropeqk_ctx_destroy(ctx);
        return NULL;
    }
    /* the device in the test log (stderr: not part of the TAP stream), so that a run on a GPU
     * machine says what each suite ran on */
    fprintf(stderr, "# device: %s\n", ropeqk_ctx_device_description(ctx));
    return ctx;
}

typedef struct {
    ropeqk_ctx *ctx;
    dm_buf *out;
    int iters;
    th_loop_fn run;
    void *user;
    ropeqk_status st;
    char why[256];
} loop_arg;

static void *loop_thread(void *v)
{
    loop_arg *a = v;
    a->st = a->run(a->out, a->iters, a->user);
    if (a->st)
        snprintf(a->why, sizeof a->why, "%s", ropeqk_last_error());
    return NULL;
}

void th_expect_threads_match_lone_run(ropeqk_ctx *ctx, size_t out_bytes, int iters, th_loop_fn run, void *user)
{
    unsigned char *expect = malloc(out_bytes), *got = malloc(out_bytes);
    cr_assert(expect && got);
    loop_arg one = {.ctx = ctx, .iters = 1, .run = run, .user = user};
    cr_assert_eq(dm_create(ctx, out_bytes, NULL, true, &one.out), ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    loop_thread(&one);
    cr_assert_eq(one.st, ROPEQK_SUCCESS, "a lone run: %s: %s", ropeqk_status_string(one.st), one.why);
    cr_assert_eq(dm_read(one.out, expect), ROPEQK_SUCCESS);
    pthread_t th[4];
    loop_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (loop_arg){.ctx = ctx, .iters = iters, .run = run, .user = user};
        cr_assert_eq(dm_create(ctx, out_bytes, NULL, true, &args[i].out), ROPEQK_SUCCESS);
        cr_assert_eq(pthread_create(&th[i], NULL, loop_thread, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(args[i].st, ROPEQK_SUCCESS, "thread %d: %s: %s", i, ropeqk_status_string(args[i].st),
                     args[i].why);
        cr_assert_eq(dm_read(args[i].out, got), ROPEQK_SUCCESS);
        cr_expect(memcmp(got, expect, out_bytes) == 0, "thread %d: last result differs from a lone run", i);
        bool intact = false;
        cr_expect(dm_check(args[i].out, NULL, &intact) == ROPEQK_SUCCESS && intact,
                  "thread %d: a canary around the output changed", i);
        dm_free(args[i].out);
    }
    dm_free(one.out);
    free(expect);
    free(got);
}

ropeqk_ctx *th_ctx_tuned(const ropeqk_tuning *t)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    if (t)
        cp.tuning = *t;
    ropeqk_ctx *x = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &x);
    cr_assert_eq(st, ROPEQK_SUCCESS, "ropeqk_ctx_create: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
    return x;
}

th_case th_case_small(void)
{
    th_case c;
    memset(&c, 0, sizeof c);
    c.B = 1, c.Hq = 2, c.Hkv = 1, c.Sq = 6, c.Sk = 5, c.D = 8;
    ropeqk_default_params(&c.p);
    c.dtype = ROPEQK_F32;
    return c;
}

th_case th_case_gqa(void)
{
    th_case c = th_case_small();
    c.Hq = 4, c.Hkv = 2, c.Sq = 9, c.Sk = 13, c.D = 16;
    return c;
}

th_call th_valid_call(void)
{
    th_call c;
    ropeqk_default_params(&c.p);
    c.q = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 4, 3, 8);
    c.k = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 2, 5, 8);
    c.o = ropeqk_tensor_bhsd(ROPEQK_F32, 1, 4, 3, 5);
    return c;
}

ropeqk_ctx *th_ctx_on(const char *device, const ropeqk_tuning *t)
{
    ropeqk_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    cp.device = device;
    if (t)
        cp.tuning = *t;
    ropeqk_ctx *ctx = NULL;
    ropeqk_status st = ropeqk_ctx_create(&cp, &ctx);
    if (st == ROPEQK_ERR_NO_DEVICE)
        cr_skip_test("no device '%s': %s", device ? device : "", ropeqk_last_error());
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s", ropeqk_last_error());
    return ctx;
}

ropeqk_ctx *th_ctx;

void th_ctx_init(void)
{
    char why[256];
    th_ctx = th_ctx_or_skip_reason(why, sizeof why);
    if (!th_ctx)
        cr_skip_test("%s", why);
}

void th_ctx_fini(void)
{
    ropeqk_ctx_destroy(th_ctx);
    th_ctx = NULL;
    th_leak_check();
}

void th_skip_without_device(const char *opencl_only)
{
    char why[256];
    ropeqk_ctx *x = th_ctx_or_skip_reason(why, sizeof why);
    if (!x)
        cr_skip_test("%s", why);
    bool vk = th_is_vulkan(x);
    ropeqk_ctx_destroy(x);
    if (vk && opencl_only)
        cr_skip_test("%s", opencl_only);
}

bool th_is_vulkan(const ropeqk_ctx *ctx) { return ropeqk_ctx_backend(ctx) == ROPEQK_BACKEND_VULKAN; }

const char *th_backend_name(const ropeqk_ctx *ctx)
{
    ropeqk_backend b = ropeqk_ctx_backend(ctx);
    return b == ROPEQK_BACKEND_OPENCL ? "OpenCL" : b == ROPEQK_BACKEND_VULKAN ? "Vulkan" : "none";
}

void th_leak_check(void)
{
    ropeqk_diagnostics d;
    if (!ropeqk_ctx_diagnostics(NULL, &d) && d.messages) {
        fprintf(stderr, "Khronos validation layer: %u message(s) in this test, the first: %s\n", d.messages, d.first);
        abort();
    }
#ifdef TH_LSAN
    if (__lsan_do_recoverable_leak_check() != 0) {
        fprintf(stderr, "LeakSanitizer found leaks in this test (report above)\n");
        abort();
    }
#endif
}

int th_stride(void)
{
    const char *e = getenv("ROPEQK_TEST_STRIDE");
    int n = e ? atoi(e) : 1;
    return n >= 1 && n <= 16 ? n : 1;
}

void th_skip_without_validation(void)
{
    ropeqk_diagnostics d;
    if (!ropeqk_ctx_diagnostics(NULL, &d) && d.validation == ROPEQK_VALIDATION_UNAVAILABLE)
        cr_skip_test("ROPEQK_VULKAN_VALIDATION=auto and VK_LAYER_KHRONOS_validation is not installed: this suite "
                     "runs under the validation layer only (Debian: vulkan-validationlayers)");
}

bool th_cache_home_make(char *dir, size_t len)
{
    snprintf(dir, len, "%s/rqcacheXXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return false;
    return setenv("XDG_CACHE_HOME", dir, 1) == 0;
}

void th_cache_home_remove(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
