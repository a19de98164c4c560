/* bench/build_bench.c — `reprise bench --build`: what building a graph
 * costs, apart from replaying it. Three rows, each the median of
 * RP_BENCH_RUNS runs with no untimed warm-up (the first run, with its
 * first use of memory, is one of them; CPU backend, one worker):
 *   chain      rp_graph_create, N tasks added with rp_graph_add_task and
 *              N - 1 edges i -> i+1 with rp_graph_add_edge (100k by
 *              default; the goal is under 0.2 s);
 *   instantiate rp_instantiate of that chain;
 *   register   N / 2.5 rp_task_register calls with distinct names (40k
 *              for the default N) into a fresh runtime;
 *   ports      N independent tasks, each bound to one precondition and
 *              one postcondition port (rp_graph_bind_*), then
 *              rp_instantiate of them.
 * Edge insertion and task registration are O(1) amortized (hash indexes in
 * capture/graph.c and engine/runtime.c), a bind in ascending op order O(1)
 * and the validation of a port's ops linear: a linear duplicate search in
 * any of them makes its row grow with N squared. */
#include "bench_impl.h"

#include <stdio.h>
#include <stdlib.h>

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_status cpu_runtime(rp_runtime **rt) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = 1;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  return rp_bench_check("runtime", rp_runtime_create(&cfg, rt));
}

/* A chain of n tasks: seconds to build it and to instantiate it. */
static rp_status run_chain(rp_runtime *rt, rp_task_id t, uint32_t n,
                           double *build_s, double *inst_s) {
  uint64_t t0 = rp_bench_now_ns();
  rp_graph *g = NULL;
  rp_status st = rp_graph_create(rt, &g);
  rp_op_id prev = 0;
  for (uint32_t i = 0; i < n && !st; i++) {
    rp_op_id id;
    st = rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &id);
    if (!st && i)
      st = rp_graph_add_edge(g, prev, id);
    prev = id;
  }
  uint64_t t1 = rp_bench_now_ns();
  rp_exec *ex = NULL;
  if (!st)
    st = rp_instantiate(g, NULL, &ex);
  uint64_t t2 = rp_bench_now_ns();
  rp_bench_check("build chain", st);
  rp_exec_destroy(ex);
  rp_graph_destroy(g);
  *build_s = (double)(t1 - t0) * 1e-9;
  *inst_s = (double)(t2 - t1) * 1e-9;
  return st;
}

/* n tasks bound to one precondition and one postcondition port, and
 * their instantiation: seconds. */
static rp_status run_ports(rp_runtime *rt, rp_task_id t, uint32_t n,
                           double *s) {
  uint64_t t0 = rp_bench_now_ns();
  rp_graph *g = NULL;
  rp_port_id pre = 0, post = 0;
  rp_status st = rp_graph_create(rt, &g);
  if (!st)
    st = rp_graph_add_precondition(g, "in", &pre);
  if (!st)
    st = rp_graph_add_postcondition(g, "out", &post);
  for (uint32_t i = 0; i < n && !st; i++) {
    rp_op_id id;
    st = rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &id);
    if (!st)
      st = rp_graph_bind_precondition(g, pre, id);
    if (!st)
      st = rp_graph_bind_postcondition(g, post, id);
  }
  rp_exec *ex = NULL;
  if (!st)
    st = rp_instantiate(g, NULL, &ex);
  *s = (double)(rp_bench_now_ns() - t0) * 1e-9;
  rp_bench_check("ports", st);
  rp_exec_destroy(ex);
  rp_graph_destroy(g);
  return st;
}

/* n registrations with distinct names into a fresh runtime: seconds. */
static rp_status run_register(uint32_t n, double *s) {
  rp_runtime *rt = NULL;
  rp_status st = cpu_runtime(&rt);
  uint64_t t0 = rp_bench_now_ns();
  for (uint32_t i = 0; i < n && !st; i++) {
    char name[32];
    snprintf(name, sizeof name, "bench.task.%u", i);
    rp_task_id id;
    st = rp_task_register(
        rt, &(rp_task_desc){.name = name, .cpu_fn = empty_task}, &id);
  }
  *s = (double)(rp_bench_now_ns() - t0) * 1e-9;
  rp_bench_check("register", st);
  if (rt)
    rp_runtime_destroy(rt);
  return st;
}

static void row(FILE *table, rp_bench_json *j, const char *name, uint32_t n,
                rp_bench_stats s) {
  if (table)
    /* 4 significant digits: a small chain's times in microseconds are
     * no 0.0000 (the JSON keeps every digit) */
    fprintf(table, "%-12s %8u %10.4g %10.4g %10.4g\n", name, n, s.median, s.min,
            s.max);
  rp_bench_json_begin(j);
  rp_bench_json_str(j, "bench", "build");
  rp_bench_json_str(j, "case", name);
  rp_bench_json_uint(j, "n", n);
  rp_bench_json_num(j, "s_median", s.median);
  rp_bench_json_num(j, "s_min", s.min);
  rp_bench_json_num(j, "s_max", s.max);
  rp_bench_json_end(j);
}

int rp_bench_build(uint32_t n, FILE *table, FILE *json) {
  rp_runtime *rt = NULL;
  rp_task_id t;
  if (cpu_runtime(&rt))
    return 1;
  rp_status st = rp_bench_check(
      "register",
      rp_task_register(
          rt, &(rp_task_desc){.name = "bench.empty", .cpu_fn = empty_task},
          &t));
  double b[RP_BENCH_RUNS], in[RP_BENCH_RUNS], r[RP_BENCH_RUNS],
      po[RP_BENCH_RUNS];
  for (int k = 0; k < RP_BENCH_RUNS && !st; k++)
    st = run_chain(rt, t, n, &b[k], &in[k]);
  for (int k = 0; k < RP_BENCH_RUNS && !st; k++)
    st = run_ports(rt, t, n, &po[k]);
  uint32_t nreg = (uint32_t)(n / 2.5);
  for (int k = 0; k < RP_BENCH_RUNS && !st; k++)
    st = run_register(nreg, &r[k]);
  rp_runtime_destroy(rt);
  if (st)
    return 1;
  rp_bench_json j;
  rp_bench_json_open(&j, json, 0); /* --quick does not change it */
  if (table)
    fprintf(table, "%-12s %8s %10s %10s %10s\n", "case", "n", "s_median",
            "s_min", "s_max");
  row(table, &j, "chain", n, rp_bench_summarize(b, RP_BENCH_RUNS));
  row(table, &j, "instantiate", n, rp_bench_summarize(in, RP_BENCH_RUNS));
  row(table, &j, "register", nreg, rp_bench_summarize(r, RP_BENCH_RUNS));
  row(table, &j, "ports", n, rp_bench_summarize(po, RP_BENCH_RUNS));
  rp_bench_json_close(&j);
  return 0;
}
