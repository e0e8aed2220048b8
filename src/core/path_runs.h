/* How often each host-chosen path ran, process-wide: the backends count, the tests read (a test
 * checks that the path it meant to exercise was taken: the chunked paged run, the fast decode, the
 * dense decode through the paged kernels, the tensor-core shaders). Not exported; the tests link the
 * library statically and include this header. One table for every backend, so a suite written
 * against the neutral API needs no backend #if to ask. */
#ifndef RQ_PATH_RUNS_H
#define RQ_PATH_RUNS_H

typedef enum {
    RQ_PATH_PAGED_CHUNK,  /* a ragged paged sequence's rows through the attention kernel (OpenCL) */
    RQ_PATH_PAGED_FAST,   /* the fast paged decode's pass 1 (paged_attn_fast*, paged_fast.comp) */
    RQ_PATH_DENSE_DECODE, /* a dense call through the paged decode kernels */
    RQ_PATH_VK_CM,        /* the cooperative-matrix shaders */
    RQ_PATH_VK_CM_EMU,    /* their emulated form (the products as loops) */
    RQ_PATH_COUNT
} rq_path;

void rq_path_hit(rq_path p);
long long rq_path_runs(rq_path p); /* 0 for a p out of range */

#endif
