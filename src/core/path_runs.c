/* The path counters (path_runs.h). */
#include "path_runs.h"

#include <stdatomic.h>

static atomic_llong runs[RQ_PATH_COUNT];

void rq_path_hit(rq_path p)
{
    if ((unsigned)p < RQ_PATH_COUNT)
        atomic_fetch_add(&runs[p], 1);
}

long long rq_path_runs(rq_path p) { return (unsigned)p < RQ_PATH_COUNT ? atomic_load(&runs[p]) : 0; }
