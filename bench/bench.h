/* bench/bench.h — the benchmark entry points the `reprise bench` command
 * calls. Benchmarks report; they never assert a figure.
 *
 * Every entry point writes human-readable rows to `table` (may be NULL) and,
 * when `json` is not NULL, one complete JSON array of row objects to it.
 * They return 0 on success and 1 when the engine failed (the reason is on
 * stderr); a JSON array already begun is still closed. */
#ifndef RP_BENCH_H
#define RP_BENCH_H

#include "reprise.h"

#include <stdio.h>

/* git describe of the checkout this binary was built from (generated at
 * build time: cmake/build_commit.cmake); every JSON row carries it. */
extern const char rp_build_commit[];

/* How the DAG workloads are executed. */
enum rp_bench_mode {
  RP_BENCH_EAGER = 1u << 0,  /* rp_launch_task per node, wait for the last */
  RP_BENCH_REPLAY = 1u << 1, /* record once, instantiate once, rp_replay */
};

/* The standard DAG workloads (one bit each). */
enum rp_bench_workload {
  RP_BENCH_CHAIN = 1u << 0,    /* 1000 empty tasks in a line */
  RP_BENCH_FORKJOIN = 1u << 1, /* source -> 1000 independent -> sink */
  RP_BENCH_LAYERED = 1u << 2,  /* 16 layers x 8, all-to-all, then a sink */
  RP_BENCH_TINY = 1u << 3,     /* layered with ~1 us of busy work per task */
  RP_BENCH_ALL = 0xfu,
};

typedef struct rp_bench_opts {
  unsigned modes;          /* rp_bench_mode bits */
  unsigned workloads;      /* rp_bench_workload bits; 0: none (hop only) */
  unsigned workers;        /* CPU workers, >= 1 */
  uint32_t reps;           /* executions per timed run; 0: workload default */
  rp_backend_kind backend; /* CPU, CUDA or AUTO */
  const char *backend_src; /* "--backend" or "REPRISE_BACKEND" when one
                              chose it (named if the runtime fails), NULL */
  int quick;               /* 1: a few reps only (CI smoke test) */
  int hop;                 /* 1: also measure one cross-worker hop */
  const uint32_t *sizes;   /* graph sizes to sweep (tasks per graph, about:
                              chain length, fork-join width + 2, layers of 8
                              + 1), or NULL: each workload's standard size */
  uint32_t nsizes;
  uint32_t dist_timeout_ms; /* --dist: how long a replay waits for a peer
                               (rp_runtime_config.dist_timeout_ms) and a
                               failed rank for the others; 0: 30000 */
  /* how a message naming a file is written (the command's rp_cli_say:
   * control bytes of a name escaped); NULL: fprintf */
  void (*say)(FILE *f, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
} rp_bench_opts;

/* Defaults: both modes, every workload, 2 workers, default reps, AUTO. */
void rp_bench_opts_init(rp_bench_opts *o);
/* The workload bit for a name ("chain", ...), 0 when there is none. */
unsigned rp_bench_workload_parse(const char *name);

/* How many distinct graphs the nsizes sizes build for one workload (bit:
 * its rp_bench_workload bit): two sizes can build one (layered's and tiny's
 * layers of 8), which rp_bench_dag then measures once. */
uint32_t rp_bench_graphs(unsigned bit, const uint32_t *sizes, uint32_t nsizes);

/* The DAG workloads and, with o->hop, the hop latency. */
int rp_bench_dag(const rp_bench_opts *o, FILE *table, FILE *json);

/* Graph-building benchmark (bench/build_bench.c): a chain of n tasks built
 * with the builder (rp_graph_add_task + rp_graph_add_edge), its
 * rp_instantiate, and n / 2.5 task registrations, on one CPU worker;
 * seconds per row. */
int rp_bench_build(uint32_t n, FILE *table, FILE *json);

/* Transfer-descriptor benchmark (bench/xfer_bench.c): fixed cases on one
 * CPU worker; quick: every loop 16 times shorter (a smoke test). */
int rp_bench_xfer(int quick, FILE *table, FILE *json);

/* The error of the first table row that could not be written (an errno;
 * 0 when none failed): the rows are flushed one by one as they are
 * measured, so by the time the caller checks the stream the cause is
 * gone. */
int rp_bench_table_errno(void);

/* The distributed benchmark (bench/dist_bench.c), for mpiexec -n N: the
 * data-parallel MLP step replayed vs eager (o->workers shards per rank,
 * o->reps steps per run), and the replayed all-reduce against a plain loop
 * of MPI_Allreduce. Initializes MPI (MPI_THREAD_MULTIPLE) unless the caller
 * did, and then finalizes it. Rank 0 alone writes the table and, when
 * json_path is not NULL, creates that file with the JSON array (a path, not
 * a FILE: the other ranks must not touch it). Builds without MPI say so and
 * return 1. */
int rp_bench_dist(const rp_bench_opts *o, FILE *table, const char *json_path);

/* The GPU benchmark (bench/gpu_bench.c): empty-kernel chains of 10, 100
 * and 1000 and a 4-stream fork-join, as stream launches, a raw CUDA graph
 * and reprise replays (with and without CUDA graphs). Uses o->workers and
 * o->quick (two cases). Without a device it writes "no GPU: <reason>" and
 * returns 0 with no rows. */
int rp_bench_gpu(const rp_bench_opts *o, FILE *table, FILE *json);

#endif
