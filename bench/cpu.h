/* The host CPU line of the bench's reports: the host baselines' speed depends on its instruction
 * sets, so a figure without it cannot be compared with another machine's. */
#ifndef ROPEQK_BENCH_CPU_H
#define ROPEQK_BENCH_CPU_H

/* "host CPU: <model>; <n> online; flags: <avx*>" on stdout (from /proc/cpuinfo). */
void bench_print_cpu(void);

#endif
