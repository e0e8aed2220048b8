/* A backend's tuning knobs as data: each backend publishes a table of the knobs its
 * kernels and host read (rq_backend.knobs: src/opencl/cl_knobs.c, src/vulkan/vk_knobs.c), with
 * their range, environment variable, per-profile defaults and the field of rq_tuning that holds
 * the value. The core never names a knob: resolution (tuning.c), the cache file (tune_cache.c), the
 * tuner's checks and progress lines (tune.c) and the public key/value view (knob.c) iterate over
 * the tables. */
#ifndef ROPEQK_CORE_KNOB_H
#define ROPEQK_CORE_KNOB_H

#include "internal.h"

/* How a knob's values read in the API (ropeqk_tuning, ropeqk_tuning_set), where 0 is always "the
 * default", against what rq_tuning holds once resolved. */
typedef enum {
    RQ_KNOB_INT,    /* a number in [lo, hi] (and ok), the same everywhere */
    RQ_KNOB_OFF,    /* likewise, with 0 = off in the environment and the file (rq_tuning holds 0),
                     * which the API writes -1 (0 being the default) and reports as -1 */
    RQ_KNOB_ONOFF,  /* a switch: API 1 on, -1 off; environment and file 0 / 1 (rq_tuning: 1 / 0) */
    RQ_KNOB_MODE,   /* a mode in [lo, hi] that includes 0 (= the default, auto) as is, everywhere */
    RQ_KNOB_VENDOR, /* the backend's vendor builtins: the backend's tuning_base sets 1 where the
                     * device has them; API -1 turns them off (0); reported as 0 (auto) / -1 (off) */
} rq_knob_kind;

enum {
    RQ_KNOB_CACHED = 1,    /* a line of the tuning cache file (tune_cache.c), required in it */
    RQ_KNOB_CACHE_V4 = 2,  /* with CACHED: came with format 4, so not required in a format 3 file */
    RQ_KNOB_CACHE_OPT = 4, /* with CACHED: optional in every file (came later in format 4) */
    RQ_KNOB_SHOWN = 8,     /* in the tuner's progress lines ("tq=12 wg=16 ...") */
};

#define RQ_KNOB_NO_API ((ptrdiff_t)-1)

typedef struct rq_knob {
    const char *name;    /* "tq": ropeqk_tuning's field, the file's key, the key/value view's name */
    const char *env;     /* "ROPEQK_TQ"; NULL: none */
    int lo, hi;          /* the range of the environment, the file and the API (but for its 0 / -1) */
    bool (*ok)(long v);  /* the allowed values within it; NULL: every one */
    const char *allowed; /* those in words ("1, 4, 8 or 16"); "" when every one in range is */
    rq_knob_kind kind;
    unsigned flags;      /* RQ_KNOB_* */
    size_t off;          /* its int in rq_tuning */
    ptrdiff_t api_off;   /* its int32_t in ropeqk_tuning; RQ_KNOB_NO_API: environment only */
    int def_cpu, def_gpu; /* rq_tuning's value under each profile before the device's heuristics */
    const char *doc;     /* one line for ropeqk_knob_info */
} rq_knob;

/* rq_tuning's and ropeqk_tuning's int of knob k. */
#define RQ_KNOB_AT(t, k) (*(int *)((char *)(t) + (k)->off))
#define RQ_KNOB_API_AT(o, k) (*(int32_t *)((char *)(o) + (k)->api_off))

/* Every knob of the backends built in (rq_backends, in their order), each name once (the first
 * table that has it: knobs two backends read, such as chunk_rows, carry the same entry): at most
 * RQ_KNOBS_MAX into out; returns how many. Resolution applies them all, so that a malformed value
 * of any backend's knob fails wherever it is set and every field has its default. */
#define RQ_KNOBS_MAX 64
size_t rq_knobs_all(const rq_knob **out);
/* The knob called name among n, NULL if none. */
const rq_knob *rq_knob_find(const rq_knob *const *all, size_t n, const char *name);

/* Checks an API value (0 = default: always fine): ROPEQK_ERR_BAD_CONFIG with the thread's message
 * when the kind, range or allowed set refuses it. */
ropeqk_status rq_knob_check_api(const rq_knob *k, int32_t v);
/* The API's value of a resolved knob (ropeqk_ctx_tuning's field: off as -1, switches as 1 / -1). */
int32_t rq_knob_report(const rq_knob *k, int stored);

const char *rq_profile_name(ropeqk_profile p);

struct rq_tuning_s;
/* Whether resolved knobs pass every built-in backend's rule for knobs that hold together
 * (rq_backend.tuning_check); on false, why says which. */
bool rq_tuning_consistent(const struct rq_tuning_s *t, char *why, size_t len);

#endif
