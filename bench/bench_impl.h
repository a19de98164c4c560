/* bench/bench_impl.h — what the benchmark files share: the clock, the
 * statistics of repeated runs, a calibrated busy loop, a hand-written JSON
 * writer and runtime creation. Private to bench/. */
#ifndef RP_BENCH_IMPL_H
#define RP_BENCH_IMPL_H

#include "bench.h"

#include <stddef.h>
#include <stdint.h>

/* Timed runs per measurement. The figure reported is the median of these:
 * on a shared 2-core machine one run in five can lose its core to another
 * process or land on a frequency change, and the median ignores that run
 * where the mean would not; min and max show how far the runs spread. */
#define RP_BENCH_RUNS 5

/* CLOCK_MONOTONIC in ns: comparable across cores (the kernel keeps it
 * consistent), ~20 ns per read through the vDSO. */
uint64_t rp_bench_now_ns(void);

/* fflush(t), remembering the first failure's errno for
 * rp_bench_table_errno. */
void rp_bench_flush(FILE *t);

typedef struct rp_bench_stats {
  double median, min, max;
} rp_bench_stats;

/* Median, min and max of v[0..n) (n >= 1); sorts v in place. */
rp_bench_stats rp_bench_summarize(double *v, size_t n);

/* Busy for ns nanoseconds of wall time (the tiny workload's task), and
 * what one such call costs run alone. */
void rp_bench_busy(uint64_t ns);
double rp_bench_busy_cost(uint64_t ns);

/* Creates the runtime the options ask for (environment overrides of the
 * backend and worker count ignored: the flags decide). Prints why on
 * failure. */
rp_status rp_bench_runtime(const rp_bench_opts *o, rp_runtime **out);
/* "cpu" or "cuda". */
const char *rp_bench_backend_name(const rp_runtime *rt);
/* Reports a failed call on stderr with the engine's detail; returns 1. */
int rp_bench_fail(const char *what, rp_status st);
/* st, reported with rp_bench_fail when it is an error. */
rp_status rp_bench_check(const char *what, rp_status st);

/* ---- JSON: one array of flat objects, written by hand ---- */

typedef struct rp_bench_json {
  FILE *f;          /* NULL: every call is a no-op */
  unsigned objects; /* objects written so far (for the commas) */
  unsigned fields;  /* fields in the open object */
  int quick;        /* every row ends with "quick": true (--quick) */
} rp_bench_json;

/* "["; quick: the rows are --quick's smoke test, marked as such. */
void rp_bench_json_open(rp_bench_json *j, FILE *f, int quick);
void rp_bench_json_close(rp_bench_json *j); /* "]" */
void rp_bench_json_begin(rp_bench_json *j); /* "{" */
void rp_bench_json_end(rp_bench_json *j);   /* "}" */
void rp_bench_json_str(rp_bench_json *j, const char *key, const char *v);
void rp_bench_json_uint(rp_bench_json *j, const char *key, uint64_t v);
/* Non-finite values are written as null (JSON has no NaN). */
void rp_bench_json_num(rp_bench_json *j, const char *key, double v);

/* ---- the static schedule (static_sched.c): replay's hand-written peer ---- */

/* A DAG to run statically: node i's accesses are acc[acc_off[i] ..
 * acc_off[i + 1]), tok[] numbering each access's instance (0..ntokens);
 * nodes in launch order (a topological order); lane[i] < nlanes. */
typedef struct rp_bench_graph {
  uint32_t nodes, ntokens, nlanes;
  const uint32_t *acc_off;
  const rp_access *acc;
  const uint32_t *tok;
  const uint32_t *lane;
} rp_bench_graph;

/* Every node's work: body(arg, node). */
typedef void (*rp_bench_body)(const void *arg, uint32_t node);
typedef struct rp_bench_static rp_bench_static;

/* Builds the schedule and starts one thread per lane that has nodes.
 * RP_ENOMEM (memory or a thread), RP_EINVAL (a lane out of range). */
rp_status rp_bench_static_create(const rp_bench_graph *g, rp_bench_body body,
                                 const void *arg, rp_bench_static **out);
/* Runs reps iterations and waits for them (an exec_fn: s is the schedule). */
rp_status rp_bench_static_run(void *s, uint32_t reps);
void rp_bench_static_destroy(rp_bench_static *s);
/* Threads (lanes with nodes), and cross-lane waits per iteration. */
uint32_t rp_bench_static_lanes(const rp_bench_static *s);
uint32_t rp_bench_static_waits(const rp_bench_static *s);

/* ---- the hop benchmark (hop_bench.c), called by rp_bench_dag ---- */

/* Measures one dependent hop between workers 0 and 1 in each selected mode
 * and writes the rows. 0 ok, 1 failure. */
int rp_bench_hop_rows(const rp_bench_opts *o, rp_runtime *rt, FILE *table,
                      rp_bench_json *json);

#endif
