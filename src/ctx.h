/* The context object, shared by ctx.c, program.c and enqueue.c. Not installed. */
#ifndef ROPEQK_CTX_H
#define ROPEQK_CTX_H

#include "internal.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct rq_program {
    cl_device_id device;
    char options[256];
    cl_program program;
    struct rq_program *next;
} rq_program;

struct ropeqk_ctx {
    cl_context context;
    cl_command_queue queue;
    cl_device_id device;
    atomic_int last_cl;
    pthread_mutex_t lock;     /* guards programs and build_log */
    rq_program *programs;     /* cache keyed by (device, options) */
    char *build_log;
    int tq, wg;               /* tuning knobs of this context's device (see scores.cl) */
    char options[256];
    cl_ulong max_alloc;
};

/* Records a failing cl_int in the context and returns it as a status. */
static inline ropeqk_status rq_cl_fail(ropeqk_ctx *ctx, cl_int err)
{
    if (ctx)
        atomic_store(&ctx->last_cl, err);
    return (ropeqk_status)err;
}

/* The program for `device` built with the context's options, from the cache or built now. */
ropeqk_status rq_get_program(ropeqk_ctx *ctx, cl_device_id device, cl_program *out);
void rq_free_programs(ropeqk_ctx *ctx);
/* Fills ctx->tq, ctx->wg, ctx->options and ctx->max_alloc for ctx->device. */
ropeqk_status rq_tune_for_device(ropeqk_ctx *ctx);

#endif
