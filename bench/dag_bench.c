/* bench/dag_bench.c — the standard DAG workloads (chain, forkjoin, layered,
 * tiny), run eagerly and, where the replay layer is built, replayed.
 *
 * Each workload is built once per runtime: its instances created and the
 * list of launches (every node's task, declared accesses and arguments)
 * laid out in arrays. One execution issues that list once. Placement is
 * left to the engine (RP_PROC_ANY).
 *
 * eager   an execution launches every node through rp_launch_task, then
 *         waits for the last node. The last node depends transitively on
 *         every other one, so the time covers the dependence analysis, the
 *         issue, each hand-off and the tasks themselves.
 * replay  the list is recorded once between rp_capture_begin/end and
 *         instantiated once; an execution is one rp_replay, issued back to
 *         back with the previous ones (up to the exec's default window of 4
 *         in flight: rp_replay waits for a slot; the host keeps the last 8
 *         done events and waits for the oldest before reusing its place).
 *
 * static  with replay: the same DAG run by a hand-written static schedule
 *         (static_sched.c): the lanes the replayed exec settled on, one
 *         thread each running its fixed list, progress counters for the
 *         cross-lane dependences (those of the previous iteration
 *         included, so iterations overlap as replays in flight do). The
 *         same task work, workers, reps, runs and clock; the replay row's
 *         x_static is its median over this row's.
 *
 * ns_per_task = run time / (reps x nodes): what one task costs end to end,
 * at the parallelism the DAG allows on the given workers. setup_us is the
 * build time (eager), the rp_instantiate time (replay) or the static
 * schedule's build and thread start (static). For tiny, ideal_ns is the
 * total task time spread evenly over the workers, at most 8 (a layer's
 * width; task_ns / min(workers, 8) per task) and %ideal that over the
 * row's median. */
#include "bench_impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- workload definitions ---- */

enum {
  CHAIN_LEN = 1000,
  FJ_WIDTH = 1000,
  LAYERS = 16,
  LAYER_WIDTH = 8,
  TINY_TASK_NS = 1000, /* busy work per tiny task */
  REPLAY_RING = 8,     /* done events kept (the exec's window is 4) */
};

typedef struct workload_def {
  const char *name;
  unsigned bit;
  /* Executions per timed run. Replay costs far less per task, so it gets
   * more reps for a run long enough to time (milliseconds); eager gets
   * fewer so the default run of everything stays well under a minute. */
  uint32_t reps_replay, reps_eager, reps_quick;
} workload_def;

static const workload_def DEFS[] = {
    {"chain", RP_BENCH_CHAIN, 200, 20, 2},
    {"forkjoin", RP_BENCH_FORKJOIN, 200, 20, 2},
    {"layered", RP_BENCH_LAYERED, 2000, 200, 10},
    {"tiny", RP_BENCH_TINY, 200, 20, 2},
};
#define NDEFS (sizeof DEFS / sizeof DEFS[0])

typedef struct workload {
  uint32_t nodes, node_cap;
  rp_launch *launches;
  uint32_t nacc, acc_cap;
  rp_access *acc; /* every node's accesses, back to back */
  uint32_t *tok;  /* per access: the index of its instance in insts */
  uint32_t ninst;
  rp_inst *insts;   /* one-element tokens the accesses name */
  uint64_t busy_ns; /* tiny: every node's argument; 0: no arguments */
} workload;

/* What every measurement of one rp_bench_dag call shares. */
typedef struct dag_ctx {
  const rp_bench_opts *o;
  rp_runtime *rt;
  const char *backend;
  rp_task_id empty, spin;
  uint64_t busy_ns; /* tiny: busy time per task (TINY_TASK_NS) */
  double task_ns;   /* measured cost of one such task run alone */
  FILE *table;
  rp_bench_json *json;
} dag_ctx;

typedef struct dag_row {
  const char *workload, *mode;
  uint32_t nodes, reps;
  rp_bench_stats s; /* ns per task over RP_BENCH_RUNS runs */
  double setup_us;
  double task_ns;   /* tiny only; < 0 elsewhere */
  double vs_static; /* replay: median / the static schedule's; < 0: none */
  /* how the work was spread: replay, the exec's counters (per replay, over
   * its life); static, the threads and the waits per iteration */
  int sched;
  uint32_t lanes;
  double handoffs, wakeups, waits;
  uint64_t replacements;
} dag_row;

void rp_bench_opts_init(rp_bench_opts *o) {
  *o = (rp_bench_opts){.modes = RP_BENCH_EAGER | RP_BENCH_REPLAY,
                       .workloads = RP_BENCH_ALL,
                       .workers = 2,
                       .backend = RP_BACKEND_AUTO};
}

unsigned rp_bench_workload_parse(const char *name) {
  for (size_t i = 0; i < NDEFS; i++)
    if (strcmp(DEFS[i].name, name) == 0)
      return DEFS[i].bit;
  return 0;
}

/* ---- building ---- */

static void wl_free(rp_runtime *rt, workload *w) {
  for (uint32_t i = 0; i < w->ninst; i++)
    rp_instance_free(rt, w->insts[i]);
  free(w->insts);
  free(w->tok);
  free(w->acc);
  free(w->launches);
  *w = (workload){0};
}

/* Arrays of exactly the sizes the builder fills, and the tokens. */
static rp_status wl_alloc(rp_runtime *rt, workload *w, uint32_t nodes,
                          uint32_t ninst, uint32_t nacc) {
  w->launches = calloc(nodes, sizeof *w->launches);
  w->acc = calloc(nacc, sizeof *w->acc);
  w->tok = calloc(nacc, sizeof *w->tok);
  w->insts = calloc(ninst, sizeof *w->insts);
  if (!w->launches || !w->acc || !w->tok || !w->insts) {
    fprintf(stderr, "reprise bench: out of memory\n");
    return RP_ENOMEM;
  }
  w->node_cap = nodes;
  w->acc_cap = nacc;
  rp_mem sys;
  rp_status st = rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys);
  rp_rect one = rp_rect_1d(0, 0);
  for (uint32_t i = 0; i < ninst && !st; i++) {
    st = rp_instance_create(rt, sys, RP_I64, &one, NULL, &w->insts[i]);
    w->ninst += st == RP_OK;
  }
  return rp_bench_check("token instances", st);
}

static void acc_add(workload *w, uint32_t inst, rp_privilege p) {
  assert(w->nacc < w->acc_cap && inst < w->ninst);
  w->tok[w->nacc] = inst;
  w->acc[w->nacc++] = (rp_access){w->insts[inst], p, RP_REDOP_NONE};
}

/* A node whose accesses are acc[first .. nacc). */
static void node_add(workload *w, rp_task_id task, uint32_t first) {
  assert(w->nodes < w->node_cap);
  rp_launch *l = &w->launches[w->nodes++];
  *l = (rp_launch){.task = task,
                   .proc = RP_PROC_ANY,
                   .accesses = w->acc + first,
                   .naccess = w->nacc - first};
  if (w->busy_ns) {
    l->args = &w->busy_ns;
    l->args_size = sizeof w->busy_ns;
  }
}

/* Each task RW on the one token: a line of len. */
static rp_status build_chain(rp_runtime *rt, rp_task_id t, workload *w,
                             uint32_t len) {
  rp_status st = wl_alloc(rt, w, len, 1, len);
  for (uint32_t i = 0; i < len && !st; i++) {
    uint32_t a = w->nacc;
    acc_add(w, 0, RP_RW);
    node_add(w, t, a);
  }
  return st;
}

/* Source writes X (token 0); middle i reads X and writes Y_i (token 1+i);
 * the sink reads every Y_i. */
static rp_status build_forkjoin(rp_runtime *rt, rp_task_id t, workload *w,
                                uint32_t width) {
  rp_status st = wl_alloc(rt, w, width + 2, width + 1, 3 * width + 1);
  if (st)
    return st;
  uint32_t a = w->nacc;
  acc_add(w, 0, RP_WRITE);
  node_add(w, t, a);
  for (uint32_t i = 0; i < width; i++) {
    a = w->nacc;
    acc_add(w, 0, RP_READ);
    acc_add(w, 1 + i, RP_WRITE);
    node_add(w, t, a);
  }
  a = w->nacc;
  for (uint32_t i = 0; i < width; i++)
    acc_add(w, 1 + i, RP_READ);
  node_add(w, t, a);
  return RP_OK;
}

/* Task (l, j) writes token l*W+j and reads all W tokens of layer l-1; a
 * sink reads the last layer. */
static rp_status build_layered(rp_runtime *rt, rp_task_id t, workload *w,
                               uint32_t layers) {
  const uint32_t W = LAYER_WIDTH, L = layers;
  rp_status st =
      wl_alloc(rt, w, L * W + 1, L * W, W + (L - 1) * W * (W + 1) + W);
  if (st)
    return st;
  for (uint32_t l = 0; l < L; l++) {
    for (uint32_t j = 0; j < W; j++) {
      uint32_t a = w->nacc;
      for (uint32_t k = 0; l > 0 && k < W; k++)
        acc_add(w, (l - 1) * W + k, RP_READ);
      acc_add(w, l * W + j, RP_WRITE);
      node_add(w, t, a);
    }
  }
  uint32_t a = w->nacc;
  for (uint32_t k = 0; k < W; k++)
    acc_add(w, (L - 1) * W + k, RP_READ);
  node_add(w, t, a);
  return RP_OK;
}

/* The workload's shape parameter for `size` (0: the standard size; else
 * about `size` tasks): a chain's length, a fork-join's width, the layers. */
static uint32_t shape_of(unsigned bit, uint32_t size) {
  switch (bit) {
  case RP_BENCH_CHAIN:
    return size ? size : CHAIN_LEN;
  case RP_BENCH_FORKJOIN:
    return size ? (size > 3 ? size - 2 : 1) : FJ_WIDTH;
  default:
    return size ? (size > LAYER_WIDTH ? (size - 1) / LAYER_WIDTH : 1) : LAYERS;
  }
}

uint32_t rp_bench_graphs(unsigned bit, const uint32_t *sizes, uint32_t nsizes) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < nsizes; k++) {
    uint32_t j = 0;
    while (j < k && shape_of(bit, sizes[j]) != shape_of(bit, sizes[k]))
      j++;
    n += j == k;
  }
  return n;
}

static rp_status build(const dag_ctx *c, unsigned bit, uint32_t size,
                       workload *w) {
  uint32_t n = shape_of(bit, size);
  switch (bit) {
  case RP_BENCH_CHAIN:
    return build_chain(c->rt, c->empty, w, n);
  case RP_BENCH_FORKJOIN:
    return build_forkjoin(c->rt, c->empty, w, n);
  case RP_BENCH_LAYERED:
    return build_layered(c->rt, c->empty, w, n);
  default:
    w->busy_ns = c->busy_ns;
    return build_layered(c->rt, c->spin, w, n);
  }
}

/* ---- timing ---- */

typedef rp_status (*exec_fn)(void *arg, uint32_t reps);

/* RP_BENCH_RUNS timed runs of `reps` executions, after an untimed warm-up
 * of a tenth as many (first touch of the engine's pools, workers awake). */
static rp_status time_runs(exec_fn fn, void *arg, uint32_t reps, uint32_t nodes,
                           rp_bench_stats *out) {
  rp_status st = fn(arg, reps / 10 ? reps / 10 : 1);
  double v[RP_BENCH_RUNS];
  for (int r = 0; r < RP_BENCH_RUNS && !st; r++) {
    uint64_t t0 = rp_bench_now_ns();
    st = fn(arg, reps);
    v[r] = (double)(rp_bench_now_ns() - t0) / ((double)reps * nodes);
  }
  if (!st)
    *out = rp_bench_summarize(v, RP_BENCH_RUNS);
  return st;
}

/* ---- eager ---- */

typedef struct eager_arg {
  rp_runtime *rt;
  const workload *w;
} eager_arg;

static rp_status eager_reps(void *p, uint32_t reps) {
  const eager_arg *e = p;
  const workload *w = e->w;
  for (uint32_t r = 0; r < reps; r++) {
    rp_event last = RP_NO_EVENT;
    for (uint32_t i = 0; i < w->nodes; i++) {
      rp_event *done = i + 1 == w->nodes ? &last : NULL;
      rp_status st = rp_launch_task(e->rt, &w->launches[i], done);
      if (st)
        return rp_bench_check("eager launch", st);
    }
    rp_status st = rp_event_wait(e->rt, last, -1);
    rp_event_release(e->rt, last);
    if (st)
      return rp_bench_check("eager execution", st);
  }
  return RP_OK;
}

static rp_status eager_measure(const dag_ctx *c, const workload *w,
                               dag_row *row) {
  eager_arg e = {c->rt, w};
  rp_status st = time_runs(eager_reps, &e, row->reps, w->nodes, &row->s);
  rp_runtime_drain(c->rt); /* after a failure, ops may still be running */
  return st;
}

/* ---- replay ---- */

typedef struct replay_arg {
  rp_runtime *rt;
  rp_exec *ex;
  rp_event ring[REPLAY_RING]; /* done events of the replays in flight */
  uint64_t host_alloc;        /* bytes the last call's loop allocated */
} replay_arg;

static rp_status record(rp_runtime *rt, const workload *w, rp_graph **g) {
  rp_status st = rp_capture_begin(rt, NULL);
  for (uint32_t i = 0; i < w->nodes && !st; i++)
    st = rp_launch_task(rt, &w->launches[i], NULL);
  if (st) {
    rp_capture_abort(rt);
    return st;
  }
  return rp_capture_end(rt, g);
}

/* Waits for and drops the done event in ring slot s, if there is one. */
static rp_status ring_settle(replay_arg *r, uint32_t s) {
  if (!r->ring[s].id)
    return RP_OK;
  rp_status st = rp_event_wait(r->rt, r->ring[s], -1);
  rp_event_release(r->rt, r->ring[s]);
  r->ring[s] = RP_NO_EVENT;
  return st;
}

/* Back-to-back replays. The ring holds the last REPLAY_RING done events:
 * no per-replay storage, and every replay's event is waited for, so the
 * run ends when the last replay finished. Allocation-free on this side. */
static rp_status replay_reps(void *p, uint32_t reps) {
  replay_arg *r = p;
  uint64_t a0 = rp_thread_allocated_bytes();
  rp_replay_args args = {0};
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < reps && !st; i++) {
    st = ring_settle(r, i % REPLAY_RING);
    if (!st)
      st = rp_replay(r->ex, &args, &r->ring[i % REPLAY_RING]);
  }
  for (uint32_t i = 0; i < REPLAY_RING; i++) { /* oldest first */
    rp_status s2 = ring_settle(r, (reps + i) % REPLAY_RING);
    st = st ? st : s2;
  }
  r->host_alloc = rp_thread_allocated_bytes() - a0;
  return rp_bench_check("replay", st);
}

/* ---- static: replay's hand-written peer ---- */

static void static_empty(const void *arg, uint32_t node) {
  (void)arg;
  (void)node;
}

static void static_spin(const void *arg, uint32_t node) {
  (void)node;
  rp_bench_busy(*(const uint64_t *)arg);
}

/* The static schedule of w on the lanes ex settled on, timed as the replay
 * row was (same reps, runs and clock). */
static rp_status static_measure(const dag_ctx *c, const workload *w,
                                const rp_exec *ex, dag_row *row) {
  uint32_t *lane = malloc(sizeof *lane * w->nodes);
  uint32_t *off = malloc(sizeof *off * (w->nodes + 1));
  if (!lane || !off) {
    free(lane);
    free(off);
    return rp_bench_check("static schedule", RP_ENOMEM);
  }
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < w->nodes && !st; i++) {
    /* op i is launch i (recorded in order) */
    rp_proc p = 0;
    st = rp_bench_check("exec op proc", rp_exec_op_proc(ex, i, &p));
    lane[i] = p;
    off[i] = (uint32_t)(w->launches[i].accesses - w->acc);
  }
  off[w->nodes] = w->nacc;
  rp_bench_graph g = {.nodes = w->nodes,
                      .ntokens = w->ninst,
                      .nlanes = c->o->workers,
                      .acc_off = off,
                      .acc = w->acc,
                      .tok = w->tok,
                      .lane = lane};
  rp_bench_static *sc = NULL;
  uint64_t t0 = rp_bench_now_ns();
  if (!st)
    st = rp_bench_check(
        "static schedule",
        rp_bench_static_create(&g, w->busy_ns ? static_spin : static_empty,
                               &w->busy_ns, &sc));
  row->setup_us = (double)(rp_bench_now_ns() - t0) / 1e3;
  free(lane);
  free(off);
  if (st)
    return st;
  st = time_runs(rp_bench_static_run, sc, row->reps, w->nodes, &row->s);
  row->sched = 1;
  row->lanes = rp_bench_static_lanes(sc);
  row->waits = rp_bench_static_waits(sc);
  rp_bench_static_destroy(sc);
  return st;
}

/* The exec's spread of the work, per replay over its life. */
static void exec_sched(const rp_exec *ex, dag_row *row) {
  rp_exec_stats xs;
  if (rp_exec_stats_get(ex, &xs) || !xs.replays)
    return;
  row->sched = 1;
  row->lanes = xs.procs_used;
  row->handoffs = (double)xs.handoffs / (double)xs.replays;
  row->wakeups = (double)xs.wakeups / (double)xs.replays;
  row->replacements = xs.replacements;
}

/* The replay row, then (sr not NULL) the static schedule's on the lanes
 * the exec settled on, measured while the exec still exists. */
static rp_status replay_measure(const dag_ctx *c, const workload *w,
                                dag_row *row, dag_row *sr) {
  rp_graph *g;
  rp_status st = record(c->rt, w, &g);
  if (st)
    return rp_bench_check("record", st);
  replay_arg r = {.rt = c->rt};
  uint64_t t0 = rp_bench_now_ns();
  st = rp_instantiate(g, NULL, &r.ex);
  row->setup_us = (double)(rp_bench_now_ns() - t0) / 1e3;
  rp_graph_destroy(g);
  if (st)
    return rp_bench_check("instantiate", st);
  /* unhinted workloads: place by measurement before timing (the bench's
   * tasks have no side effects that matter); not part of setup_us */
  st = rp_exec_tune(r.ex, NULL, NULL);
  if (st) {
    rp_exec_destroy(r.ex);
    return rp_bench_check("exec tune", st);
  }
  st = time_runs(replay_reps, &r, row->reps, w->nodes, &row->s);
  exec_sched(r.ex, row);
  if (!st && sr)
    st = static_measure(c, w, r.ex, sr);
  rp_status d = rp_bench_check("exec destroy", rp_exec_destroy(r.ex));
  if (rp_thread_allocated_bytes() != UINT64_MAX && r.host_alloc)
    fprintf(stderr, "reprise bench: %s replay loop allocated %llu bytes\n",
            row->workload, (unsigned long long)r.host_alloc);
  return st ? st : d;
}

/* ---- rows ---- */

static void row_table_header(FILE *t) {
  fprintf(t,
          "%-9s %-6s %-7s %7s %6s %6s %12s %10s %10s %10s %8s %8s %6s "
          "%8s\n",
          "workload", "mode", "backend", "workers", "nodes", "reps",
          "ns/task-med", "min", "max", "setup_us", "task_ns", "ideal_ns",
          "%ideal", "x_static");
}

/* The ideal for tiny: the total task time spread evenly over the workers,
 * at most a layer's width of them (within one run no more tasks can run
 * at once; replays in flight may overlap, so past that many workers the
 * measured time can beat it), in ns per task; < 0 for the other
 * workloads. */
static double ideal_ns(const dag_ctx *c, const dag_row *r) {
  unsigned busy = c->o->workers < LAYER_WIDTH ? c->o->workers : LAYER_WIDTH;
  return r->task_ns >= 0 ? r->task_ns / busy : -1;
}

/* A column only some rows have: the value, or "-". */
static void table_opt(FILE *t, int width, int prec, double v, int has) {
  if (has)
    fprintf(t, " %*.*f", width, prec, v);
  else
    fprintf(t, " %*s", width, "-");
}

static void row_emit(const dag_ctx *c, const dag_row *r) {
  double ideal = ideal_ns(c, r);
  if (c->table) {
    FILE *t = c->table;
    fprintf(t, "%-9s %-6s %-7s %7u %6u %6u %12.1f %10.1f %10.1f %10.1f",
            r->workload, r->mode, c->backend, c->o->workers, r->nodes, r->reps,
            r->s.median, r->s.min, r->s.max, r->setup_us);
    table_opt(t, 8, 1, r->task_ns, r->task_ns >= 0);
    table_opt(t, 8, 1, ideal, ideal >= 0);
    table_opt(t, 6, 1, 100 * ideal / r->s.median, ideal >= 0);
    table_opt(t, 8, 2, r->vs_static, r->vs_static >= 0);
    fputc('\n', t);
    rp_bench_flush(t);
  }
  rp_bench_json *j = c->json;
  rp_bench_json_begin(j);
  rp_bench_json_str(j, "workload", r->workload);
  rp_bench_json_str(j, "mode", r->mode);
  rp_bench_json_str(j, "backend", c->backend);
  rp_bench_json_uint(j, "workers", c->o->workers);
  rp_bench_json_uint(j, "nodes", r->nodes);
  rp_bench_json_uint(j, "reps", r->reps);
  rp_bench_json_num(j, "ns_per_task_median", r->s.median);
  rp_bench_json_num(j, "ns_per_task_min", r->s.min);
  rp_bench_json_num(j, "ns_per_task_max", r->s.max);
  rp_bench_json_num(j, "setup_us", r->setup_us);
  if (r->task_ns >= 0) {
    rp_bench_json_num(j, "task_ns", r->task_ns);
    rp_bench_json_num(j, "ideal_ns_per_task", ideal);
    rp_bench_json_num(j, "pct_of_ideal", 100 * ideal / r->s.median);
  }
  if (r->vs_static >= 0)
    rp_bench_json_num(j, "vs_static", r->vs_static);
  if (r->sched) {
    rp_bench_json_uint(j, "lanes", r->lanes);
    if (!strcmp(r->mode, "static")) {
      rp_bench_json_num(j, "waits_per_iter", r->waits);
    } else {
      rp_bench_json_num(j, "handoffs_per_replay", r->handoffs);
      rp_bench_json_num(j, "wakeups_per_replay", r->wakeups);
      rp_bench_json_uint(j, "replacements", r->replacements);
    }
  }
  rp_bench_json_end(j);
}

/* ---- tasks ---- */

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_status spin_task(rp_task_ctx *ctx) {
  const uint64_t *ns = rp_ctx_args(ctx, NULL);
  rp_bench_busy(*ns);
  return RP_OK;
}

static rp_status register_tasks(dag_ctx *c) {
  rp_task_desc empty = {.name = "bench.empty", .cpu_fn = empty_task};
  /* The busy task's cost is known: give placement the hint. */
  rp_task_desc spin = {.name = "bench.spin",
                       .cpu_fn = spin_task,
                       .cost_ns = (uint64_t)c->task_ns};
  rp_status st = rp_task_register(c->rt, &empty, &c->empty);
  return st ? st : rp_task_register(c->rt, &spin, &c->spin);
}

/* ---- driver ---- */

/* The standard size's node count, for scaling reps to other sizes. */
static uint32_t standard_nodes(unsigned bit) {
  return bit == RP_BENCH_CHAIN      ? CHAIN_LEN
         : bit == RP_BENCH_FORKJOIN ? FJ_WIDTH + 2
                                    : LAYERS * LAYER_WIDTH + 1;
}

/* Reps for a graph of `nodes`: the default keeps the tasks per timed run
 * about those of the standard size (at least 1, at most 10^6). */
static uint32_t reps_for(const rp_bench_opts *o, const workload_def *d,
                         unsigned mode, uint32_t nodes) {
  if (o->reps)
    return o->reps;
  uint64_t r = o->quick                 ? d->reps_quick
               : mode == RP_BENCH_EAGER ? d->reps_eager
                                        : d->reps_replay;
  if (nodes && o->nsizes)
    r = r * standard_nodes(d->bit) / nodes;
  return r < 1 ? 1 : r > 1000000 ? 1000000 : (uint32_t)r;
}

static rp_status measure(const dag_ctx *c, const workload *w, unsigned mode,
                         dag_row *row, dag_row *sr) {
  if (mode == RP_BENCH_REPLAY)
    return replay_measure(c, w, row, sr);
  return eager_measure(c, w, row);
}

static int run_workload(const dag_ctx *c, const workload_def *d,
                        uint32_t size) {
  workload w = {0};
  uint64_t t0 = rp_bench_now_ns();
  rp_status st = build(c, d->bit, size, &w); /* reports its failures */
  double build_us = (double)(rp_bench_now_ns() - t0) / 1e3;
  static const unsigned modes[] = {RP_BENCH_EAGER, RP_BENCH_REPLAY};
  for (size_t m = 0; m < 2 && !st; m++) {
    if (!(c->o->modes & modes[m]))
      continue;
    dag_row row = {.workload = d->name,
                   .mode = modes[m] == RP_BENCH_EAGER ? "eager" : "replay",
                   .nodes = w.nodes,
                   .reps = reps_for(c->o, d, modes[m], w.nodes),
                   .setup_us = build_us,
                   .task_ns = d->bit == RP_BENCH_TINY ? c->task_ns : -1,
                   .vs_static = -1};
    dag_row sr = row; /* the static schedule's, after a replay row */
    sr.mode = "static";
    sr.s.median = -1;
    st = measure(c, &w, modes[m], &row, &sr);
    if (!st && sr.s.median > 0)
      row.vs_static = row.s.median / sr.s.median;
    if (!st)
      row_emit(c, &row);
    if (!st && sr.s.median > 0)
      row_emit(c, &sr);
  }
  wl_free(c->rt, &w);
  return st ? 1 : 0;
}

static int run_all(dag_ctx *c) {
  rp_status st = register_tasks(c);
  if (st)
    return rp_bench_fail("task registration", st);
  int rc = 0;
  if (c->table && c->o->workloads)
    row_table_header(c->table);
  uint32_t nsizes = c->o->nsizes ? c->o->nsizes : 1;
  for (size_t i = 0; i < NDEFS && !rc; i++)
    for (uint32_t k = 0; k < nsizes && !rc; k++) {
      if (!(c->o->workloads & DEFS[i].bit))
        continue;
      uint32_t size = c->o->nsizes ? c->o->sizes[k] : 0, j = 0;
      /* two sizes that build one graph (layers of 8): measured once */
      while (j < k && shape_of(DEFS[i].bit, c->o->sizes[j]) !=
                          shape_of(DEFS[i].bit, size))
        j++;
      if (j < k) {
        fprintf(stderr,
                "reprise bench: %s: --sizes %u builds the graph of --sizes "
                "%u: measured once\n",
                DEFS[i].name, size, c->o->sizes[j]);
        continue;
      }
      rc = run_workload(c, &DEFS[i], size);
    }
  if (!rc && c->o->hop)
    rc = rp_bench_hop_rows(c->o, c->rt, c->table, c->json);
  return rc;
}

int rp_bench_dag(const rp_bench_opts *o, FILE *table, FILE *json) {
  rp_bench_opts eff = *o;
  dag_ctx c = {.o = &eff, .table = table};
  /* Calibrate before the workers exist: they would compete for the cores
   * and make the loop look slower than it is when run alone. */
  if (eff.workloads & RP_BENCH_TINY) {
    c.busy_ns = TINY_TASK_NS;
    c.task_ns = rp_bench_busy_cost(TINY_TASK_NS);
  }
  if (rp_bench_runtime(&eff, &c.rt))
    return 1;
  c.backend = rp_bench_backend_name(c.rt);
  rp_bench_json j;
  rp_bench_json_open(&j, json, o->quick);
  c.json = &j;
  int rc = run_all(&c);
  rp_bench_json_close(&j);
  rp_status st = rp_runtime_destroy(c.rt);
  return rc ? rc : st ? rp_bench_fail("runtime destroy", st) : 0;
}
