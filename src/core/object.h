/* The neutral context and plan objects: what every backend shares, plus an `impl` pointer to the
 * backend's own state (ggml's {iface, context}). Not installed. */
#ifndef ROPEQK_CORE_OBJECT_H
#define ROPEQK_CORE_OBJECT_H

#include "tuning.h"
#include <pthread.h>
#include <stdatomic.h>

struct rq_backend;

struct ropeqk_ctx {
    const struct rq_backend *be; /* the backend: its table (backend.h) */
    void *impl;                  /* the backend's context (struct rq_cl_ctx, struct rq_vk_ctx) */
    atomic_int last_err;         /* latest backend failure's raw code (ropeqk_ctx_backend_error) */
    pthread_mutex_t lock;        /* guards build_log, and the backend's caches of built kernels */
    char *build_log;             /* log of the latest failed build (ropeqk_ctx_build_log) */
    char device_desc[256];       /* "name (platform, driver version)" for messages */
    rq_devinfo dev;              /* what the configuration was chosen from (the tuner reuses it) */
    rq_tuning tune;
    char options[512];           /* what the kernels are built with (ropeqk_ctx_build_options) */
};

/* A plan: the operation, validated once. */
struct ropeqk_plan {
    ropeqk_ctx *ctx;
    ropeqk_op op;
    rq_problem pb;             /* validated at creation; Sk = max_keys for decode plans; pb.scaling
                                * is cleared once the frequencies are computed (the caller's arrays
                                * need not outlive creation) */
    ropeqk_tensor q, k, out;   /* the descriptors (k, out: for max_keys keys in decode plans) */
    ropeqk_tensor v, lse;      /* attention and paged decode */
    bool with_lse;
    bool dynamic;              /* decode plan: keys and offsets per enqueue */
    bool arrays;               /* per-token positions allowed at enqueue */
    ropeqk_paged_desc paged;
    float *sinks;              /* the plan's copy of params.sinks (pb.sinks points here), or NULL */
    /* paged plans on a backend with paged_chunks: the attention plan that serves a sequence's long
     * chunk of query rows (prefill) over its K/V gathered from the pages (plan.c's chunk_plan), NULL
     * where it could not be made (the rows then take the decode kernels) */
    struct ropeqk_plan *chunk;
    void *impl;                /* the backend's plan (kernels or pipelines, tables, scratch) */
};

/* ---- the host-memory path (ropeqk_scores, ropeqk_attention) ---- */
typedef enum { RQ_IO_Q, RQ_IO_K, RQ_IO_V, RQ_IO_QPOS, RQ_IO_KPOS, RQ_IO_OUT, RQ_IO_LSE, RQ_IO_COUNT } rq_io_role;
/* One host range of a host-memory call. */
typedef struct {
    const void *in; /* uploaded before the run (NULL: not uploaded) */
    void *out;      /* read back after the run (NULL: an input) */
    size_t bytes;   /* 0: absent */
} rq_host_io;

#endif
