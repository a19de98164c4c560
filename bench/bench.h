/* bench/bench.h — the benchmarks `reprise bench` runs. Each writes a
 * human-readable table to `table` and a JSON array to `json` (either may be
 * NULL) and returns 0, or nonzero when it could not run. */
#ifndef RP_BENCH_H
#define RP_BENCH_H

#include <stdio.h>

/* Planned copies (xfer/) against memcpy: cases contiguous and strided2d at
 * 64 KiB, 1 MiB, 16 MiB; throughput, plan+release and reset costs. */
int rp_bench_xfer(FILE *table, FILE *json);

#endif
