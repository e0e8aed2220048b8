/* ropeqk-bench --host-cost (host_cost.c): the host time per decode-shaped ropeqk_plan_run, a plan
 * made and destroyed per call (one-shot) against a plan made once. */
#ifndef ROPEQK_BENCH_HOST_COST_H
#define ROPEQK_BENCH_HOST_COST_H

#include "benv.h"

/* n calls per variant, timed one by one; 0 on success. */
int bench_host_cost(benv *e, int n);

#endif
