/* ropeqk-bench's first-call latency (first_call.c): context creation + first op in a new process,
 * measured in child processes of the bench with a cold and a warm pocl kernel cache. */
#ifndef ROPEQK_BENCH_FIRST_CALL_H
#define ROPEQK_BENCH_FIRST_CALL_H

#include <stdbool.h>

/* The child mode's body (--first-call-child[-decode]): prints create, first prefill-shaped call and
 * first decode-shaped call in seconds; decode_first runs the decode-shaped call first. Exit status. */
int first_call_child(bool decode_first);
/* The parent's measurement, running self in child mode: out[0] cold, prefill first; out[1] warm,
 * prefill first; out[2] cold, decode first (each create, prefill, decode; out[i][0] NaN on failure). */
void first_call_latency(const char *self, double out[3][3]);

#endif
