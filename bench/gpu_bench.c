/* bench/gpu_bench.c — `reprise bench --gpu`: chains of 10, 100 and 1000
 * empty kernels and a 4-stream fork-join, each run four ways:
 *   stream   per-kernel launches on streams (the fork-join: 4 streams with
 *            event fork and join), the usual eager CUDA;
 *   graph    the same work captured once into a CUDA graph, cudaGraphLaunch
 *            per run (the floor reprise aims at);
 *   reprise  the same ops recorded into a reprise graph on one GPU
 *            processor, instantiated once (CUDA graphs), rp_replay per run;
 *   reprise-eager  the same with REPRISE_CUDA_GRAPHS=0 (ops issued on the
 *            GPU's stream at every replay).
 * For each: host time per run (median of 5 batches of BATCH runs, the
 * launch calls alone: stream, one per kernel; the others, one per run) and
 * end-to-end time per run (the batch from its first
 * call until all of it completed, per run). Runs in a batch go back to back
 * (reprise: max_inflight = BATCH, so rp_replay never waits for a slot).
 * Without a device or driver (or in a build without CUDA) it prints why
 * and exits 0 with no rows; any other failure to start the CUDA runtime
 * exits 1. Goals (reported, never asserted): reprise's host
 * time at most 1 us above cudaGraphLaunch's at every size; end-to-end at
 * most 1.1x the raw graph's; at least 3x faster than stream launches at
 * 100 kernels. */
#include "bench_impl.h"

#include <stdlib.h>
#include <string.h>

#ifdef REPRISE_HAVE_CUDA
#include "kernels/cuda_kernels.cuh"
#include "train/mlp.h"
#include "bench/probe_kernels.cuh"

#define BATCH 64

typedef struct gpu_case {
  const char *name;
  int kind; /* RP_PROBE_CHAIN or RP_PROBE_FORKJOIN */
  int n;    /* kernels (fork-join: branch kernels, plus source and sink) */
} gpu_case;

static const gpu_case CASES[] = {
    {"chain10", RP_PROBE_CHAIN, 10},
    {"chain100", RP_PROBE_CHAIN, 100},
    {"chain1000", RP_PROBE_CHAIN, 1000},
    {"forkjoin4x25", RP_PROBE_FORKJOIN, 100},
};

typedef struct timing {
  double host_ns, e2e_ns; /* per run, medians */
  double lat_ns;          /* one run issued alone, then waited for */
} timing;

/* Latency runs: each issues one run and waits for it; the median. */
#define LAT_RUNS 200

/* ---- raw CUDA ---- */

typedef rp_status (*issue_fn)(void *arg);

static rp_status issue_stream(void *arg) {
  void **a = arg;
  const rp_probe_env *env = a[0];
  const gpu_case *c = a[1];
  return rp_cuda_probe_issue(env, c->kind, c->n);
}

static rp_status issue_graph(void *arg) {
  void **a = arg;
  const rp_probe_env *env = a[0];
  return rp_cuda_probe_graph_launch(a[2], env->stream[0]);
}

/* Times BATCH back-to-back issues, then the wait for all of them; the
 * medians of RP_BENCH_RUNS batches. */
static rp_status time_raw(issue_fn fn, void *arg, void *sync_stream,
                          timing *t) {
  double host[RP_BENCH_RUNS], e2e[RP_BENCH_RUNS];
  rp_status st = fn(arg); /* warm-up */
  if (!st)
    st = rp_cuda_stream_sync(sync_stream);
  for (int r = 0; r < RP_BENCH_RUNS && !st; r++) {
    uint64_t t0 = rp_bench_now_ns();
    for (int i = 0; i < BATCH && !st; i++)
      st = fn(arg);
    uint64_t t1 = rp_bench_now_ns();
    if (!st)
      st = rp_cuda_stream_sync(sync_stream);
    uint64_t t2 = rp_bench_now_ns();
    host[r] = (double)(t1 - t0) / BATCH;
    e2e[r] = (double)(t2 - t0) / BATCH;
  }
  if (!st) {
    t->host_ns = rp_bench_summarize(host, RP_BENCH_RUNS).median;
    t->e2e_ns = rp_bench_summarize(e2e, RP_BENCH_RUNS).median;
  }
  static double lat[LAT_RUNS];
  for (int r = 0; r < LAT_RUNS && !st; r++) {
    uint64_t t0 = rp_bench_now_ns();
    st = fn(arg);
    if (!st)
      st = rp_cuda_stream_sync(sync_stream);
    lat[r] = (double)(rp_bench_now_ns() - t0);
  }
  if (!st)
    t->lat_ns = rp_bench_summarize(lat, LAT_RUNS).median;
  return st;
}

/* ---- reprise ---- */

static rp_status empty_gpu(rp_task_ctx *ctx) {
  return rp_cuda_probe_empty(rp_ctx_stream(ctx));
}

static rp_status add_empty(rp_graph *g, rp_task_id t, rp_proc gpu,
                           rp_op_id *out) {
  rp_launch l = {.task = t, .proc = gpu};
  return rp_graph_add_task(g, &l, out);
}

static rp_status add_chain(rp_graph *g, rp_task_id t, rp_proc gpu, int n,
                           rp_op_id from, rp_op_id *last) {
  rp_status st = RP_OK;
  rp_op_id prev = from;
  for (int i = 0; i < n && !st; i++) {
    rp_op_id op;
    st = add_empty(g, t, gpu, &op);
    if (!st && prev != UINT32_MAX)
      st = rp_graph_add_edge(g, prev, op);
    prev = op;
  }
  *last = prev;
  return st;
}

/* The case as a reprise graph (explicit edges, no accesses). */
static rp_status build_case(rp_runtime *rt, rp_task_id t, rp_proc gpu,
                            const gpu_case *c, rp_graph **out) {
  rp_graph *g;
  rp_status st = rp_graph_create(rt, &g);
  if (st)
    return st;
  rp_op_id last;
  if (c->kind == RP_PROBE_CHAIN) {
    st = add_chain(g, t, gpu, c->n, UINT32_MAX, &last);
  } else {
    rp_op_id src, sink, tails[RP_PROBE_STREAMS];
    st = add_empty(g, t, gpu, &src);
    for (int b = 0; b < RP_PROBE_STREAMS && !st; b++)
      st = add_chain(g, t, gpu, c->n / RP_PROBE_STREAMS, src, &tails[b]);
    if (!st)
      st = add_empty(g, t, gpu, &sink);
    for (int b = 0; b < RP_PROBE_STREAMS && !st; b++)
      st = rp_graph_add_edge(g, tails[b], sink);
  }
  if (st) {
    rp_graph_destroy(g);
    return st;
  }
  *out = g;
  return RP_OK;
}

static rp_status replay_batch(rp_runtime *rt, rp_exec *ex, double *host,
                              double *e2e) {
  rp_event done[BATCH];
  rp_status st = RP_OK;
  int issued = 0;
  uint64_t t0 = rp_bench_now_ns();
  for (; issued < BATCH && !st; issued++)
    st = rp_replay(ex, NULL, &done[issued]);
  uint64_t t1 = rp_bench_now_ns();
  if (st)
    issued--;
  for (int i = 0; i < issued; i++) {
    rp_status w = rp_event_wait(rt, done[i], -1);
    st = st ? st : w;
    rp_event_release(rt, done[i]);
  }
  uint64_t t2 = rp_bench_now_ns();
  *host = (double)(t1 - t0) / BATCH;
  *e2e = (double)(t2 - t0) / BATCH;
  return st;
}

/* One replay, then its wait, LAT_RUNS times: the median (args: the
 * replay's argument block, may be NULL). */
static rp_status replay_latency(rp_runtime *rt, rp_exec *ex,
                                const rp_replay_args *args, double *lat_ns) {
  static double lat[LAT_RUNS];
  rp_status st = RP_OK;
  for (int r = 0; r < LAT_RUNS && !st; r++) {
    rp_event done;
    uint64_t t0 = rp_bench_now_ns();
    st = rp_replay(ex, args, &done);
    if (!st) {
      st = rp_event_wait(rt, done, -1);
      rp_event_release(rt, done);
    }
    lat[r] = (double)(rp_bench_now_ns() - t0);
  }
  if (!st)
    *lat_ns = rp_bench_summarize(lat, LAT_RUNS).median;
  return st;
}

static rp_status time_reprise(rp_runtime *rt, rp_task_id t, rp_proc gpu,
                              const gpu_case *c, int graphs, timing *out) {
  rp_graph *g;
  rp_status st = build_case(rt, t, gpu, c, &g);
  if (st)
    return st;
  if (!graphs)
    setenv("REPRISE_CUDA_GRAPHS", "0", 1);
  rp_exec_opts o = {.max_inflight = BATCH};
  rp_exec *ex = NULL;
  st = rp_instantiate(g, &o, &ex);
  if (!graphs)
    unsetenv("REPRISE_CUDA_GRAPHS");
  rp_graph_destroy(g);
  double host[RP_BENCH_RUNS], e2e[RP_BENCH_RUNS], h, e;
  if (!st)
    st = replay_batch(rt, ex, &h, &e); /* warm-up */
  for (int r = 0; r < RP_BENCH_RUNS && !st; r++)
    st = replay_batch(rt, ex, &host[r], &e2e[r]);
  if (!st) {
    out->host_ns = rp_bench_summarize(host, RP_BENCH_RUNS).median;
    out->e2e_ns = rp_bench_summarize(e2e, RP_BENCH_RUNS).median;
    st = replay_latency(rt, ex, NULL, &out->lat_ns);
  }
  if (ex)
    rp_exec_destroy(ex);
  return st;
}

/* ---- rows ---- */

static void row(const gpu_case *c, const char *mode, const timing *t,
                const timing *graph, FILE *f, rp_bench_json *j) {
  double ratio = t->e2e_ns / graph->e2e_ns;
  if (f)
    fprintf(f, "%-13s %-14s %6d %10.2f %10.2f %10.2f %10.2f %11.2f\n", c->name,
            mode, c->n + (c->kind == RP_PROBE_FORKJOIN ? 2 : 0),
            t->host_ns / 1e3, t->e2e_ns / 1e3, t->lat_ns / 1e3, ratio,
            (t->host_ns - graph->host_ns) / 1e3);
  rp_bench_json_begin(j);
  rp_bench_json_str(j, "case", c->name);
  rp_bench_json_str(j, "mode", mode);
  rp_bench_json_uint(j, "kernels",
                     (uint64_t)(c->n + (c->kind == RP_PROBE_FORKJOIN ? 2 : 0)));
  rp_bench_json_num(j, "host_ns", t->host_ns);
  rp_bench_json_num(j, "e2e_ns", t->e2e_ns);
  rp_bench_json_num(j, "lat_ns", t->lat_ns);
  rp_bench_json_num(j, "lat_minus_graph_ns", t->lat_ns - graph->lat_ns);
  rp_bench_json_num(j, "e2e_vs_graph", ratio);
  rp_bench_json_num(j, "host_minus_graph_ns", t->host_ns - graph->host_ns);
  rp_bench_json_end(j);
}

static rp_status run_case(rp_runtime *rt, rp_task_id t, rp_proc gpu,
                          const rp_probe_env *env, const gpu_case *c, FILE *f,
                          rp_bench_json *j) {
  timing ts, tg, tr, te;
  void *exec = NULL;
  void *arg[3] = {(void *)env, (void *)c, NULL};
  rp_status st = time_raw(issue_stream, arg, env->stream[0], &ts);
  if (!st)
    st = rp_cuda_probe_graph(env, c->kind, c->n, &exec);
  arg[2] = exec;
  if (!st)
    st = time_raw(issue_graph, arg, env->stream[0], &tg);
  rp_cuda_probe_graph_destroy(exec);
  if (!st)
    st = time_reprise(rt, t, gpu, c, 1, &tr);
  if (!st)
    st = time_reprise(rt, t, gpu, c, 0, &te);
  if (st)
    return st;
  row(c, "stream", &ts, &tg, f, j);
  row(c, "graph", &tg, &tg, f, j);
  row(c, "reprise", &tr, &tg, f, j);
  row(c, "reprise-eager", &te, &tg, f, j);
  return RP_OK;
}

/* ---- the training step ---- */

/* The step `reprise train --backend cuda --procs 1` replays (MLP
 * 2-64-64-3, batch 256, spirals), per iteration: back to back (e2e, the
 * throughput) and one replay then wait (lat, what `reprise train` does
 * without --inflight). No raw reference: the ratio columns print 0. */
static rp_status train_row(rp_runtime *rt, FILE *f, rp_bench_json *j) {
  rp_kernel_tasks k;
  rp_dataset d = {0};
  rp_mlp *m = NULL;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_mlp_config cfg;
  rp_mlp_config_init(&cfg);
  cfg.procs = 1;
  rp_status st = rp_kernels_register(rt, &k);
  if (!st)
    st = rp_data_generate(RP_DATA_SPIRALS, 4096, 2, 3, cfg.seed, &d);
  if (!st)
    st = rp_mlp_create(rt, &k, &cfg, &d, &m);
  if (!st)
    st = rp_mlp_record(m, &g);
  rp_exec_opts eo = {.max_inflight = BATCH};
  if (!st)
    st = rp_instantiate(g, &eo, &ex);
  rp_mlp_step_args a = {0, 0.01f};
  rp_replay_args ra = {.args = &a, .args_size = sizeof a};
  double host[RP_BENCH_RUNS], e2e[RP_BENCH_RUNS];
  timing t = {0};
  for (int r = -1; r < RP_BENCH_RUNS && !st; r++) { /* r = -1: warm-up */
    rp_event done[BATCH];
    int issued = 0;
    uint64_t t0 = rp_bench_now_ns();
    for (; issued < BATCH && !st; issued++) {
      a.batch = (uint32_t)issued % 16;
      st = rp_replay(ex, &ra, &done[issued]);
    }
    uint64_t t1 = rp_bench_now_ns();
    if (st)
      issued--;
    for (int i = 0; i < issued; i++) {
      rp_status w = rp_event_wait(rt, done[i], -1);
      st = st ? st : w;
      rp_event_release(rt, done[i]);
    }
    uint64_t t2 = rp_bench_now_ns();
    if (r >= 0) {
      host[r] = (double)(t1 - t0) / BATCH;
      e2e[r] = (double)(t2 - t0) / BATCH;
    }
  }
  if (!st) {
    t.host_ns = rp_bench_summarize(host, RP_BENCH_RUNS).median;
    t.e2e_ns = rp_bench_summarize(e2e, RP_BENCH_RUNS).median;
    st = replay_latency(rt, ex, &ra, &t.lat_ns);
  }
  rp_exec_stats s = {0};
  if (!st)
    st = rp_exec_stats_get(ex, &s);
  if (!st) {
    if (f)
      fprintf(f, "%-13s %-14s %6u %10.2f %10.2f %10.2f %10s %11s\n", "train",
              "reprise", s.ops, t.host_ns / 1e3, t.e2e_ns / 1e3, t.lat_ns / 1e3,
              "-", "-");
    rp_bench_json_begin(j);
    rp_bench_json_str(j, "case", "train");
    rp_bench_json_str(j, "mode", "reprise");
    rp_bench_json_uint(j, "kernels", s.ops);
    rp_bench_json_num(j, "host_ns", t.host_ns);
    rp_bench_json_num(j, "e2e_ns", t.e2e_ns);
    rp_bench_json_num(j, "lat_ns", t.lat_ns);
    rp_bench_json_uint(j, "graph_launches_per_replay",
                       s.replays ? s.graph_launches / s.replays : 0);
    rp_bench_json_uint(j, "op_by_op_per_replay",
                       s.replays ? s.gpu_ops_op_by_op / s.replays : 0);
    rp_bench_json_end(j);
    if (f)
      fprintf(f,
              "# train: the step of `reprise train --backend cuda "
              "--procs 1` (MLP 2-64-64-3,\n# batch 256), %u ops in %u "
              "segment(s); per replay: %.2f graph launches, %.2f ops\n# "
              "issued op by op, %.2f host callbacks\n",
              s.ops, s.gpu_segments,
              (double)s.graph_launches / (double)s.replays,
              (double)s.gpu_ops_op_by_op / (double)s.replays,
              (double)s.host_callbacks / (double)s.replays);
  }
  if (ex)
    rp_exec_destroy(ex);
  if (g)
    rp_graph_destroy(g);
  if (m)
    rp_mlp_destroy(m);
  rp_data_free(&d);
  return st;
}

static rp_status first_gpu(rp_runtime *rt, rp_proc *out) {
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    if (rp_proc_query(rt, p, &pi) == RP_OK && pi.kind == RP_PROC_GPU) {
      *out = p;
      return RP_OK;
    }
  }
  return RP_ENODEV;
}

static int run_all(const rp_bench_opts *o, rp_runtime *rt, FILE *table,
                   rp_bench_json *j) {
  rp_proc gpu;
  rp_task_id t;
  rp_status st = first_gpu(rt, &gpu);
  if (st)
    return rp_bench_fail("no GPU processor", st);
  rp_task_desc d = {.name = "bench.empty",
                    .gpu_fn = empty_gpu,
                    .flags = RP_TASK_STREAM_ORDERED};
  if ((st = rp_task_register(rt, &d, &t)))
    return rp_bench_fail("rp_task_register", st);
  rp_probe_env env;
  if ((st = rp_cuda_probe_env_create(&env)))
    return rp_bench_fail("streams", st);
  if (table)
    fprintf(table,
            "# host_us: per run, the launch calls alone (stream: one per "
            "kernel; reprise:\n# rp_replay, which arms the slot and launches "
            "the graph from the calling\n# thread); e2e_us: per run, %d runs "
            "back to back until all completed;\n# medians of %d batches; "
            "lat_us: one run issued alone, then waited for\n# (stream sync / "
            "rp_event_wait), median of %d\n%-13s %-14s %6s %10s %10s %10s %10s "
            "%11s\n",
            BATCH, RP_BENCH_RUNS, LAT_RUNS, "case", "mode", "kernels",
            "host_us", "e2e_us", "lat_us", "e2e/graph", "host-graph");
  size_t ncase = o->quick ? 2 : sizeof CASES / sizeof CASES[0], i = 0;
  for (; i < ncase && !st; i++)
    st = run_case(rt, t, gpu, &env, &CASES[i], table, j);
  rp_cuda_probe_env_destroy(&env);
  if (st)
    return rp_bench_fail(CASES[i - 1].name, st);
  st = train_row(rt, table, j);
  return st ? rp_bench_fail("train", st) : 0;
}
#endif

int rp_bench_gpu(const rp_bench_opts *o, FILE *table, FILE *json) {
  rp_bench_json j;
  rp_bench_json_open(&j, json, o->quick);
#ifndef REPRISE_HAVE_CUDA
  (void)o;
  if (table)
    fprintf(table, "no GPU: this build of reprise has no CUDA (no rows)\n");
  rp_bench_json_close(&j);
  return 0;
#else
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CUDA;
  cfg.cpus = o->workers;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  rp_status st = rp_runtime_create(&cfg, &rt);
  if (st) {
    /* no device, or no (or too old a) driver: nothing to measure here;
     * any other failure on a machine with a device is an error */
    const char *why = rp_error_detail();
    int none = st == RP_ENODEV && (strstr(why, "cudaErrorNoDevice") ||
                                   strstr(why, "cudaErrorInsufficientDriver") ||
                                   strstr(why, "found no device"));
    rp_bench_json_close(&j);
    if (none) {
      if (table)
        fprintf(table, "no GPU: %s (no rows)\n", why);
      return 0;
    }
    return rp_bench_fail("--gpu: the CUDA runtime", st);
  }
  int rc = run_all(o, rt, table, &j);
  rp_bench_json_close(&j);
  rp_runtime_destroy(rt);
  return rc;
#endif
}
