/* Test harness: strided views with guard bytes, seeded random data, device-vs-reference runs on
 * either backend (device buffers with canaries through tests/devmem.h). Backend-neutral: only ropeqk.h. */
#ifndef ROPEQK_TEST_HARNESS_H
#define ROPEQK_TEST_HARNESS_H

#include "devmem.h"
#include "half.h"
#include "rng.h"
#include "ropeqk.h"

#include <stdbool.h>

/* ROPEQK_TEST_SEED, else dflt: the seed of a randomised test (print it with every failure). */
uint64_t th_seed(uint64_t dflt);
/* ROPEQK_TEST_STRIDE (1 to 16, else 1): the big case sweeps (sweep, attn_sweep, attn_gpu, tiled,
 * vk_attn_edges, dense_decode, variants' sweeps) run every N-th of their cases only, and
 * paged_engine checks every N-th step against fp64 (every step's cache bytes still). scripts/test.sh sets 4 for the sanitizer stage:
 * there the cases check the host code's memory use, which a quarter of the shapes reaches as the
 * whole sweep does (the kernels are not instrumented), and the whole sweeps ran in the stages before
 * (issue 30: the stage took over 40 of CI's 45 minutes on a 2-core AVX2 host). */
int th_stride(void);

typedef enum { TH_BHSD = 0, TH_BSHD = 1, TH_PADDED = 2 } th_layout;

/* A host buffer holding one view; every byte outside the view holds a guard pattern. */
typedef struct {
    ropeqk_tensor t;
    unsigned char *data;
    size_t bytes;
} th_buf;

/* Makes a view of [B,H,S,D] (or [B,Hq,Sq,Sk] for scores) in the given memory layout. TH_PADDED adds
 * spare elements after each row and after each head, so strides are not the packed ones. */
bool th_alloc(th_buf *b, ropeqk_dtype dt, const int64_t ne[4], th_layout lay);
void th_free(th_buf *b);
/* A random value in [-1, 1) exactly representable in dt, stored at p (f16: exponents 2^-6..2^-1). */
void th_put_random(void *p, ropeqk_dtype dt, uint64_t *rng);
/* Random values in the view (th_put_random). */
void th_fill_random(th_buf *b, uint64_t *rng);
/* True when every byte outside the view still holds the guard pattern. */
bool th_guards_intact(const th_buf *b);

typedef struct {
    int64_t B, Hq, Hkv, Sq, Sk, D;
    ropeqk_params p;
    ropeqk_dtype dtype;
    th_layout in_layout, out_layout;
    bool per_token_pos;   /* random int32 positions instead of offsets */
    bool enqueue;         /* device buffers with NaN canaries through a one-shot plan (dm_scores_oneshot:
                           * ropeqk_plan_create + ropeqk_plan_run), not ropeqk_scores */
    int64_t pos_max;      /* per-token positions drawn from [0, pos_max] */
} th_case;

typedef struct {
    ropeqk_status status;
    double max_err;
    int64_t mismatch;
    bool guards_ok;  /* output padding untouched, inputs unchanged, device canaries intact */
    int64_t masked;  /* -inf entries in the reference */
} th_result;

/* A small case: B 1, Hq 2, Hkv 1, Sq 6, Sk 5, D 8, f32, default parameters. */
th_case th_case_small(void);
/* The device suites' base case (GQA 2): B 1, Hq 4, Hkv 2, Sq 9, Sk 13, D 16, f32, default parameters. */
th_case th_case_gqa(void);

/* A valid scores call (Hq 4, Hkv 2, Sq 3, Sk 5, D 8, f32) for the refusal tests to break one field
 * at a time. */
typedef struct {
    ropeqk_params p;
    ropeqk_tensor q, k, o;
} th_call;
th_call th_valid_call(void);

/* A context on `device` with the tuning t (NULL: the defaults), or the test skips when there is no
 * such device; any other failure fails the test. The caller destroys it. */
ropeqk_ctx *th_ctx_on(const char *device, const ropeqk_tuning *t);
/* Runs a case on the device and on the scalar path, compares with the metric of docs/conventions.md. */
th_result th_run(ropeqk_ctx *ctx, const th_case *c, uint64_t seed);
/* One line describing a case, for failure messages. */
void th_describe(const th_case *c, char *buf, size_t len);

/* One plan run from four threads at once on ctx (its queue, through the neutral run calls), each
 * into an output buffer of its own (tests/devmem.h), against a lone run: run(out, iters, user) runs
 * the plan iters times into out, the full problem last; every thread's status must be success, its
 * output bitwise equal to the lone run's (iters 1) and the canaries around it intact. */
typedef ropeqk_status (*th_loop_fn)(dm_buf *out, int iters, void *user);
void th_expect_threads_match_lone_run(ropeqk_ctx *ctx, size_t out_bytes, int iters, th_loop_fn run, void *user);

/* In a sanitizer build: run LeakSanitizer now and abort the test worker if anything leaked (Criterion
 * workers exit without running LSan's own exit-time check). On Vulkan (ROPEQK_VULKAN_VALIDATION=1):
 * aborts the worker if the Khronos validation layer reported anything. Use as a suite .fini. */
void th_leak_check(void);
/* Skips the test (with the reason) where ROPEQK_VULKAN_VALIDATION=auto and the validation layer is
 * not installed: the Vulkan-only suites' .init (the others skip through th_ctx_or_skip_reason). */
void th_skip_without_validation(void);

/* A fresh folder under $TMPDIR (else /tmp) made $XDG_CACHE_HOME, so a test's tuning cache starts
 * empty (false if it cannot be made); th_cache_home_remove() deletes it again. */
bool th_cache_home_make(char *dir, size_t len);
void th_cache_home_remove(const char *dir);

/* A context on the default device ($ROPEQK_DEVICE), or NULL (with the reason printed) when there is none. */
ropeqk_ctx *th_ctx_or_skip_reason(char *why, size_t len);
/* A context on the default device with this tuning (NULL: defaults); the test fails without one. */
ropeqk_ctx *th_ctx_tuned(const ropeqk_tuning *t);

/* A suite's shared context: th_ctx_init (a suite's .init) creates th_ctx or skips the test;
 * th_ctx_fini (its .fini) destroys it and runs th_leak_check. */
extern ropeqk_ctx *th_ctx;
void th_ctx_init(void);
void th_ctx_fini(void);

/* The one skip fixture of a suite's .init or a test's start: skips (with the reason) where there is no
 * device; with opencl_only non-NULL, also on a Vulkan device (the reason: what is OpenCL's). The
 * context it probes with is destroyed. */
void th_skip_without_device(const char *opencl_only);

/* Whether ctx is a Vulkan context (ROPEQK_DEVICE=vulkan). */
bool th_is_vulkan(const ropeqk_ctx *ctx);
/* "OpenCL", "Vulkan" or "none": ctx's backend, for messages. */
const char *th_backend_name(const ropeqk_ctx *ctx);
/* In a test of an OpenCL-only concept: on a Vulkan context, destroy it and skip. */
#define TH_SKIP_IF_VULKAN(ctx)                                                                     \
    do {                                                                                           \
        if (th_is_vulkan(ctx)) {                                                                   \
            ropeqk_ctx_destroy(ctx);                                                               \
            cr_skip_test("OpenCL API (ropeqk_opencl.h): nothing to test on Vulkan");               \
        }                                                                                          \
    } while (0)
/* The same for a suite's shared context (a pointer variable its .fini destroys, NULL-safe): a
 * skipped test's .fini does not run, so the context is destroyed here and the variable cleared. */
#define TH_SKIP_ON_VULKAN(ctx, why)                                                                \
    do {                                                                                           \
        if (th_is_vulkan(ctx)) {                                                                   \
            ropeqk_ctx_destroy(ctx);                                                               \
            (ctx) = NULL;                                                                          \
            cr_skip_test("OpenCL only: %s", why);                                                  \
        }                                                                                          \
    } while (0)

/* Asserts that a library call succeeded, with its status and ropeqk_last_error() on failure. */
#define TH_OK(call)                                                                                \
    do {                                                                                           \
        ropeqk_status th_st_ = (call);                                                             \
        cr_assert_eq(th_st_, ROPEQK_SUCCESS, "%s: %s: %s", #call, ropeqk_status_string(th_st_),    \
                     ropeqk_last_error());                                                         \
    } while (0)

#endif
