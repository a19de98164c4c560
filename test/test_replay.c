/* Record once, replay many: capture, builder, validation, instantiate,
 * the replay scheduler. The behaviours the GPU path shares (preconditions,
 * in-order logging of a fork-join, destroy in flight, soak, stale
 * instances, updated args) run on every backend at the end (suite
 * replay_backends, also built as test_replay_cuda); CUDA's own structure
 * is in test_replay_gpu.c. */
#include "helpers.h"

#include "capture/capture.h"
#include "bench/probe_kernels.cuh" /* the fold's mix; its GPU variants */

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXOPS 512

/* ---- a deterministic data task for differential tests ----
 * Every access is one int64. The task folds what it reads into an
 * accumulator seeded by its id and writes or reduces it: any ordering
 * mistake changes the final values. */

typedef struct dargs {
  uint32_t id;
  uint32_t pad;
} dargs;

static atomic_uint runs[MAXOPS];
static atomic_uint seqno;
/* Sequence numbers of each op's start and end, per replay: replay r logs
 * into row r % (RSLOTS - 1), eager runs into the last row. Atomic: the
 * differential test issues each DAG three times eagerly, so instances of
 * one op that do not conflict (readers, reductions) run at once and store
 * the same slot concurrently. Relaxed is enough: the stamps come from
 * seqno, and the checks read them after the done events, which order every
 * task before them. */
#define RSLOTS 4
static atomic_uint t_start[RSLOTS][MAXOPS], t_end[RSLOTS][MAXOPS];

static unsigned rslot(const rp_task_ctx *ctx) {
  uint64_t r = rp_ctx_replay(ctx);
  return r == UINT64_MAX ? RSLOTS - 1 : (unsigned)(r % (RSLOTS - 1));
}

static uint64_t mix(uint64_t a, uint64_t b) {
  a ^= b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2);
  return a * 0xff51afd7ed558ccdull;
}

static rp_status data_task(rp_task_ctx *ctx) {
  const dargs *a = rp_ctx_args(ctx, NULL);
  unsigned slot = rslot(ctx);
  atomic_store_explicit(&t_start[slot][a->id], atomic_fetch_add(&seqno, 1),
                        memory_order_relaxed);
  atomic_fetch_add(&runs[a->id], 1);
  uint64_t acc = a->id * 1000003ull + 17;
  uint32_t n = rp_ctx_access_count(ctx);
  /* the access privileges ride in the args tail */
  const uint8_t *privs = (const uint8_t *)(a + 1);
  for (uint32_t i = 0; i < n; i++) {
    /* a reduced instance may be folded into concurrently: never read it */
    if (privs[i] != RP_READ && privs[i] != RP_RW)
      continue;
    int64_t *p = rp_ctx_ptr(ctx, i);
    acc = mix(acc, (uint64_t)*p);
  }
  /* second pass: writes */
  for (uint32_t i = 0; i < n; i++) {
    int64_t *p = rp_ctx_ptr(ctx, i);
    if (privs[i] == RP_WRITE || privs[i] == RP_RW)
      *p = (int64_t)mix(acc, i);
    else if (privs[i] == RP_REDUCE)
      __atomic_fetch_add(p, (int64_t)(acc & 0xffff), __ATOMIC_RELAXED);
  }
  atomic_store_explicit(&t_end[slot][a->id], atomic_fetch_add(&seqno, 1),
                        memory_order_relaxed);
  return RP_OK;
}

typedef struct rdag {
  uint32_t n, ninst;
  uint32_t nacc[MAXOPS];
  rp_access acc[MAXOPS][3];
  rp_proc proc[MAXOPS];
  int port[MAXOPS]; /* -1 or precondition port index */
} rdag;

static void gen_dag(rdag *d, unsigned workers, int with_ports) {
  d->n = 1 + (uint32_t)(rand() % 500);
  d->ninst = 1 + (uint32_t)(rand() % 16);
  for (uint32_t k = 0; k < d->n; k++) {
    d->nacc[k] = 1 + (uint32_t)(rand() % 3);
    for (uint32_t j = 0; j < d->nacc[k]; j++) {
      static const rp_privilege privs[] = {RP_READ, RP_READ, RP_WRITE, RP_RW,
                                           RP_REDUCE};
      rp_privilege p = privs[rand() % 5];
      uint32_t inst = ((uint32_t)rand()) % d->ninst;
      for (uint32_t q = 0; q < j; q++)
        if (d->acc[k][q].inst.id == inst)
          inst = (inst + 1) % d->ninst; /* may still repeat: fixed below */
      d->acc[k][j] = (rp_access){{inst}, p, p == RP_REDUCE ? RP_REDOP_SUM : 0};
    }
    /* no instance twice in one op */
    for (uint32_t j = 1; j < d->nacc[k]; j++)
      for (uint32_t q = 0; q < j; q++)
        if (d->acc[k][q].inst.id == d->acc[k][j].inst.id) {
          d->nacc[k] = j;
          break;
        }
    d->proc[k] =
        rand() % 4 == 0 ? (rp_proc)(rand() % (int)workers) : RP_PROC_ANY;
    d->port[k] = with_ports && rand() % 16 == 0 ? rand() % 2 : -1;
  }
}

typedef struct world {
  rp_runtime *rt;
  rp_task_id task;
  rp_inst inst[16];
} world;

static void world_init(world *w, unsigned workers, uint32_t ninst) {
  w->rt = th_cpu_runtime(workers);
  RP_CHECK(rp_task_register(
      w->rt, &(rp_task_desc){.name = "data", .cpu_fn = data_task}, &w->task));
  rp_rect r = rp_rect_1d(0, 0);
  for (uint32_t i = 0; i < ninst; i++)
    RP_CHECK(rp_instance_create(w->rt, 0, RP_I64, &r, NULL, &w->inst[i]));
}

static void world_fini(world *w, uint32_t ninst) {
  for (uint32_t i = 0; i < ninst; i++)
    RP_CHECK(rp_instance_free(w->rt, w->inst[i]));
  th_destroy(w->rt);
}

/* Issues the DAG's launches (eager or inside a capture). */
static void issue(world *w, const rdag *d, const rp_event *ports) {
  for (uint32_t k = 0; k < d->n; k++) {
    struct {
      dargs a;
      uint8_t privs[4];
    } args = {{k, 0}, {0}};
    rp_access acc[3];
    for (uint32_t j = 0; j < d->nacc[k]; j++) {
      acc[j] = d->acc[k][j];
      acc[j].inst = w->inst[d->acc[k][j].inst.id];
      args.privs[j] = (uint8_t)acc[j].priv;
    }
    rp_launch l = {.task = w->task,
                   .proc = d->proc[k],
                   .accesses = acc,
                   .naccess = d->nacc[k],
                   .args = &args,
                   .args_size = sizeof args};
    if (ports && d->port[k] >= 0)
      l.wait = ports[d->port[k]];
    RP_CHECK(rp_launch_task(w->rt, &l, NULL));
  }
}

static void read_all(world *w, uint32_t ninst, int64_t *out) {
  for (uint32_t i = 0; i < ninst; i++)
    RP_CHECK(rp_instance_read(w->rt, w->inst[i], &out[i], sizeof out[i]));
}

static void reset_runs(void) {
  for (int i = 0; i < MAXOPS; i++)
    atomic_store(&runs[i], 0);
}

/* Every edge's order held in the n replays of the differential test (in
 * flight together), replay r + 1 counting as the step after replay r (it
 * must see r's results). Per instance, the accesses of n eager steps in a
 * row fall into epochs: a run of reads, a run of reductions, or one write;
 * an access conflicts with every access of the other epochs, and edges
 * order exactly those pairs. So it is enough (and linear) to check that
 * each access started after every access of the previous epoch ended: end
 * before start is transitive. */
typedef struct epoch {
  int kind; /* RP_READ, RP_REDUCE, or RP_WRITE for a writer */
  unsigned cur_end, prev_end;
  int have_prev;
  uint32_t cur_op, prev_op;
  int cur_r, prev_r;
} epoch;

static void check_edge_order(const rdag *d, int dag, int n) {
  for (uint32_t i = 0; i < d->ninst; i++) {
    epoch e = {.kind = -1};
    for (int r = 0; r < n; r++)
      for (uint32_t k = 0; k < d->n; k++)
        for (uint32_t j = 0; j < d->nacc[k]; j++) {
          if (d->acc[k][j].inst.id != i)
            continue;
          rp_privilege p = d->acc[k][j].priv;
          int kind = p == RP_READ || p == RP_REDUCE ? (int)p : RP_WRITE;
          unsigned st = t_start[r][k], en = t_end[r][k];
          if (kind != e.kind || kind == RP_WRITE) { /* a new epoch */
            e.have_prev = e.kind >= 0;
            e.prev_end = e.cur_end, e.prev_op = e.cur_op, e.prev_r = e.cur_r;
            e.kind = kind;
            e.cur_end = en, e.cur_op = k, e.cur_r = r;
          } else if (en > e.cur_end) {
            e.cur_end = en, e.cur_op = k, e.cur_r = r;
          }
          if (e.have_prev && !(e.prev_end < st))
            cr_assert_fail("dag %d instance %u: op %u of replay %d started "
                           "before op %u of replay %d ended",
                           dag, i, k, r, e.prev_op, e.prev_r);
        }
  }
}

Test(replay, differential_random_dags_match_eager, .timeout = 900) {
  static rdag d;
  srand(777);
  for (int dag = 0; dag < 1000; dag++) {
    unsigned workers = 1 + (unsigned)(rand() % 4);
    int with_ports = dag % 2;
    gen_dag(&d, workers, with_ports);
    const int N = 3;
    int64_t want[16], got[16];
    /* eager, N times */
    world w;
    world_init(&w, workers, d.ninst);
    for (int r = 0; r < N; r++)
      issue(&w, &d, NULL);
    RP_CHECK(rp_runtime_drain(w.rt));
    read_all(&w, d.ninst, want);
    world_fini(&w, d.ninst);
    /* recorded once, replayed N times */
    world_init(&w, workers, d.ninst);
    rp_event ports[2];
    RP_CHECK(rp_capture_begin(w.rt, NULL));
    if (with_ports) {
      RP_CHECK(rp_capture_precondition(w.rt, "p0", &ports[0], NULL));
      RP_CHECK(rp_capture_precondition(w.rt, "p1", &ports[1], NULL));
    }
    issue(&w, &d, with_ports ? ports : NULL);
    rp_graph *g;
    RP_CHECK(rp_capture_end(w.rt, &g));
    cr_assert_eq(rp_graph_op_count(g), d.n);
    /* ports never bound are legal to declare only if bound: drop the
     * graph's unbound ones by binding them to op 0 */
    for (uint32_t p = 0; with_ports && p < 2; p++) {
      rp_status st = rp_graph_bind_precondition(g, p, 0);
      cr_assert(st == RP_OK || st == RP_EPORT);
    }
    rp_exec *ex;
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    RP_CHECK(rp_graph_destroy(g)); /* the exec does not need it */
    reset_runs();
    rp_event done[3];
    for (int r = 0; r < N; r++) {
      rp_event pre[2] = {RP_NO_EVENT, RP_NO_EVENT};
      for (int p = 0; with_ports && p < 2; p++)
        RP_CHECK(rp_event_create(w.rt, &pre[p]));
      rp_replay_args a = {.pre = pre, .npre = with_ports ? 2 : 0};
      RP_CHECK(rp_replay(ex, &a, &done[r]));
      for (int p = 0; with_ports && p < 2; p++) {
        RP_CHECK(rp_event_trigger(w.rt, pre[p]));
        RP_CHECK(rp_event_release(w.rt, pre[p]));
      }
    }
    for (int r = 0; r < N; r++) {
      RP_EXPECT(rp_event_wait(w.rt, done[r], -1), RP_OK);
      RP_CHECK(rp_event_release(w.rt, done[r]));
    }
    for (uint32_t k = 0; k < d.n; k++)
      cr_assert_eq(atomic_load(&runs[k]), (unsigned)N,
                   "dag %d op %u ran %u times", dag, k, atomic_load(&runs[k]));
    check_edge_order(&d, dag, N); /* N <= RSLOTS - 1 rows */
    read_all(&w, d.ninst, got);
    for (uint32_t i = 0; i < d.ninst; i++)
      cr_assert_eq(got[i], want[i],
                   "dag %d (%u ops, %u workers, ports %d): "
                   "instance %u differs from eager",
                   dag, d.n, workers, with_ports, i);
    rp_exec_stats s;
    RP_CHECK(rp_exec_stats_get(ex, &s));
    cr_assert_eq(s.replays, (uint64_t)N);
    cr_assert_eq(s.ops_run, (uint64_t)N * d.n);
    RP_CHECK(rp_exec_destroy(ex));
    world_fini(&w, d.ninst);
  }
}

/* Does op a (earlier) conflict with op b on some instance? Such pairs are
 * exactly the ones the analysis orders (directly or transitively). */
static int conflict(const rdag *d, uint32_t a, uint32_t b) {
  for (uint32_t i = 0; i < d->nacc[a]; i++)
    for (uint32_t j = 0; j < d->nacc[b]; j++) {
      if (d->acc[a][i].inst.id != d->acc[b][j].inst.id)
        continue;
      rp_privilege p = d->acc[a][i].priv, q = d->acc[b][j].priv;
      if ((p == RP_READ && q == RP_READ) || (p == RP_REDUCE && q == RP_REDUCE))
        continue;
      return 1;
    }
  return 0;
}

Test(replay, edges_order_holds_in_every_replay, .timeout = 300) {
  static rdag d;
  srand(4242);
  for (int dag = 0; dag < 100; dag++) {
    unsigned workers = 2 + (unsigned)(rand() % 3);
    gen_dag(&d, workers, 0);
    world w;
    world_init(&w, workers, d.ninst);
    RP_CHECK(rp_capture_begin(w.rt, NULL));
    issue(&w, &d, NULL);
    rp_graph *g;
    RP_CHECK(rp_capture_end(w.rt, &g));
    rp_exec *ex;
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    for (int r = 0; r < 6; r++) { /* crosses the re-placement point */
      rp_event done;
      RP_CHECK(rp_replay(ex, NULL, &done));
      RP_CHECK(rp_event_wait(w.rt, done, -1));
      RP_CHECK(rp_event_release(w.rt, done));
      for (uint32_t to = 0; to < d.n; to++)
        for (uint32_t from = 0; from < to; from++)
          if (conflict(&d, from, to))
            cr_assert_lt(
                t_end[r % (RSLOTS - 1)][from], t_start[r % (RSLOTS - 1)][to],
                "dag %d replay %d: edge %u -> %u violated", dag, r, from, to);
    }
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
    world_fini(&w, d.ninst);
  }
}

/* ---- targeted cases ---- */

static atomic_int flag_ran[8];
static rp_status flag_task(rp_task_ctx *ctx) {
  const int *id = rp_ctx_args(ctx, NULL);
  atomic_fetch_add(&flag_ran[*id], 1);
  return RP_OK;
}

Test(replay, precondition_gates_only_its_dependents) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "flag", flag_task);
  for (int i = 0; i < 8; i++)
    atomic_store(&flag_ran[i], 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b;
  int ida = 0, idb = 1;
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){.task = t, .proc = 0, .args = &ida, .args_size = sizeof ida},
      &a));
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){.task = t, .proc = 0, .args = &idb, .args_size = sizeof idb},
      &b));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "input", &p));
  /* a waits on the port; b, recorded after it on the same worker, does not
   * and must run ahead */
  RP_CHECK(rp_graph_bind_precondition(g, p, a));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre, .npre = 1}, &done));
  for (int i = 0; i < 2000 && !atomic_load(&flag_ran[1]); i++)
    usleep(1000);
  cr_assert_eq(atomic_load(&flag_ran[1]), 1,
               "independent op did not run "
               "ahead");
  cr_assert_eq(atomic_load(&flag_ran[0]), 0, "dependent op ran early");
  RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, done, -1));
  cr_assert_eq(atomic_load(&flag_ran[0]), 1);
  rp_event_release(rt, pre);
  rp_event_release(rt, done);
  /* wrong number of preconditions */
  RP_EXPECT(rp_replay(ex, NULL, &done), RP_EPORT);
  /* the right number, no array: refused, and nothing ran */
  atomic_store(&flag_ran[0], 0);
  atomic_store(&flag_ran[1], 0);
  RP_EXPECT(rp_replay(ex, &(rp_replay_args){.pre = NULL, .npre = 1}, &done),
            RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_replay: NULL precondition events");
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(atomic_load(&flag_ran[0]) + atomic_load(&flag_ran[1]), 0);
  /* the exec still replays */
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre, .npre = 1}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  cr_assert_eq(atomic_load(&flag_ran[0]) + atomic_load(&flag_ran[1]), 2);
  rp_event_release(rt, pre);
  rp_event_release(rt, done);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

static atomic_int slow_count;

static rp_status slow_count_task(rp_task_ctx *ctx) {
  (void)ctx;
  usleep(5000);
  atomic_fetch_add(&slow_count, 1);
  return RP_OK;
}

/* Replays chained through done events the caller released while they
 * were pending (a released event still pending stays live): with one
 * replay in flight, rp_replay waits for the previous one, whose done
 * event completes and would be recycled meanwhile. Each replay waits for
 * the previous one and completes; none waits on itself. */
Test(replay, released_done_events_chain_replays, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "slow_count", slow_count_task);
  atomic_store(&slow_count, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a;
  RP_CHECK(
      rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY}, &a));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "prev", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, a));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 1}, &ex));
  rp_event prev = RP_NO_EVENT;
  enum { N = 12 };
  for (int i = 0; i < N; i++) {
    rp_event done;
    if (prev.id)
      RP_CHECK(rp_event_release(rt, prev)); /* still pending: still live */
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &prev, .npre = 1}, &done));
    prev = done;
  }
  RP_CHECK(rp_event_wait(rt, prev, 10000000000LL));
  RP_CHECK(rp_event_release(rt, prev));
  cr_assert_eq(atomic_load(&slow_count), N, "%d of %d replays ran",
               atomic_load(&slow_count), N);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(replay, poisoned_precondition_skips_only_dependents_then_next_works) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "flag", flag_task);
  for (int i = 0; i < 8; i++)
    atomic_store(&flag_ran[i], 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  int ids[3] = {0, 1, 2};
  rp_op_id op[3];
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_graph_add_task(g,
                               &(rp_launch){.task = t,
                                            .proc = RP_PROC_ANY,
                                            .args = &ids[i],
                                            .args_size = sizeof(int)},
                               &op[i]));
  RP_CHECK(rp_graph_add_edge(g, op[0], op[1])); /* 0 -> 1; 2 independent */
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "in", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, op[0]));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre, .npre = 1}, &done));
  RP_CHECK(rp_event_poison(rt, pre, RP_EIO));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_EIO);
  cr_assert_eq(atomic_load(&flag_ran[0]), 0);
  cr_assert_eq(atomic_load(&flag_ran[1]), 0);
  cr_assert_eq(atomic_load(&flag_ran[2]), 1);
  cr_assert_neq(rp_exec_error_detail(ex)[0], 0);
  rp_event_release(rt, pre);
  rp_event_release(rt, done);
  /* the next replay works */
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre, .npre = 1}, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(atomic_load(&flag_ran[i]), i == 2 ? 2 : 1);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.ops_skipped, 2);
  rp_event_release(rt, pre);
  rp_event_release(rt, done);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A task whose behaviour is chosen per replay through an interpolated
 * argument: 0 ok, 1 fail, 2 launch a task, 3 wait on an event, 4 drain
 * the runtime, 5 destroy a graph, 6 free an instance, 7 reallocate it
 * (mode_graph and mode_inst: live ones, which the refused calls leave
 * alive and unchanged), 8 return RP_ECONTRACT of its own (no call made). */
typedef struct mode_args {
  int32_t mode;
  rp_task_id self;
} mode_args;

static rp_graph *mode_graph;
static rp_inst mode_inst;

static rp_status mode_task(rp_task_ctx *ctx) {
  const mode_args *a = rp_ctx_args(ctx, NULL);
  rp_runtime *rt = rp_ctx_runtime(ctx);
  switch (a->mode) {
  case 1:
    return RP_ETASK;
  case 2: {
    rp_status st = rp_launch_task(
        rt, &(rp_launch){.task = a->self, .proc = RP_PROC_ANY}, NULL);
    return st == RP_ECONTRACT ? RP_OK : RP_EINVAL; /* swallow: still caught */
  }
  case 3: {
    rp_event e;
    rp_event_create(rt, &e);
    rp_status st = rp_event_wait(rt, e, -1); /* must not hang */
    rp_event_trigger(rt, e);
    rp_event_release(rt, e);
    return st == RP_ECONTRACT ? RP_OK : RP_EINVAL;
  }
  case 4: /* it would wait for eager work queued behind this very task */
    return rp_runtime_drain(rt) == RP_ECONTRACT ? RP_OK : RP_EINVAL;
  case 5:
    return rp_graph_destroy(mode_graph) == RP_ECONTRACT ? RP_OK : RP_EINVAL;
  case 6:
    return rp_instance_free(rt, mode_inst) == RP_ECONTRACT ? RP_OK : RP_EINVAL;
  case 7: { /* it drops the storage eager ops may still use */
    rp_inst in = mode_inst;
    rp_status st = rp_instance_realloc(rt, &in);
    return st == RP_ECONTRACT && in.id == mode_inst.id ? RP_OK : RP_EINVAL;
  }
  case 8:
    return rp_error_set(RP_ECONTRACT, "mode 8: the task's own words");
  default:
    return RP_OK;
  }
}

Test(replay, failing_task_and_contract_violations_complete_with_errors) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "mode", mode_task);
  rp_task_id f = th_task(rt, "flag", flag_task);
  for (int i = 0; i < 8; i++)
    atomic_store(&flag_ran[i], 0);
  rp_inst x;
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &x));
  RP_CHECK(rp_capture_begin(rt, NULL));
  mode_args ma = {0, t};
  rp_interp ip = {0, 0, sizeof(int32_t)};
  rp_access w = {x, RP_WRITE, 0}, rd = {x, RP_READ, 0};
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = RP_PROC_ANY,
                                       .accesses = &w,
                                       .naccess = 1,
                                       .args = &ma,
                                       .args_size = sizeof ma,
                                       .interps = &ip,
                                       .ninterp = 1},
                          NULL));
  int id = 0;
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = f,
                                       .proc = RP_PROC_ANY,
                                       .accesses = &rd,
                                       .naccess = 1,
                                       .args = &id,
                                       .args_size = sizeof id},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_create(rt, &mode_graph));
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &mode_inst));
  static const rp_status want[] = {RP_OK, RP_ETASK,     RP_OK, RP_ECONTRACT,
                                   RP_OK, RP_ECONTRACT, RP_OK, RP_ECONTRACT,
                                   RP_OK, RP_ECONTRACT, RP_OK, RP_ECONTRACT,
                                   RP_OK, RP_ECONTRACT, RP_OK};
  static const int32_t modes[] = {0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0};
  /* the replay's detail names the call the task made */
  static const char *const call[] = {NULL,
                                     NULL,
                                     "rp_launch_task",
                                     "rp_event_wait",
                                     "rp_runtime_drain",
                                     "rp_graph_destroy",
                                     "rp_instance_free",
                                     "rp_instance_realloc"};
  int expect_runs = 0;
  for (int i = 0; i < 15; i++) {
    rp_event done;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &modes[i], .args_size = sizeof modes[i]},
        &done));
    RP_EXPECT(rp_event_wait(rt, done, 10000000000ll), want[i]);
    if (call[modes[i]]) {
      char words[160];
      snprintf(words, sizeof words,
               "task called %s, which a task may not call inside a replay",
               call[modes[i]]);
      cr_assert(strstr(rp_exec_error_detail(ex), words), "replay %d: %s", i,
                rp_exec_error_detail(ex));
    }
    rp_event_release(rt, done);
    if (want[i] == RP_OK)
      expect_runs++;
    cr_assert_eq(atomic_load(&flag_ran[0]), expect_runs,
                 "replay %d: the dependent ran %d times, expected %d", i,
                 atomic_load(&flag_ran[0]), expect_runs);
  }
  /* a task's own RP_ECONTRACT keeps its own words (it called nothing);
   * a traced replay takes the general path: the same words there */
  static const int32_t more[] = {8, 3, 8};
  for (int i = 0; i < 3; i++) {
    if (i == 1)
      RP_CHECK(rp_exec_trace_start(ex, 2));
    rp_event done;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &more[i], .args_size = sizeof more[i]},
        &done));
    RP_EXPECT(rp_event_wait(rt, done, 10000000000ll), RP_ECONTRACT);
    const char *d = rp_exec_error_detail(ex);
    if (more[i] == 8)
      cr_assert(strstr(d, "RP_ECONTRACT: mode 8: the task's own words") &&
                    !strstr(d, "task called"),
                "replay %d: %s", i, d);
    else
      cr_assert(strstr(d, "task called rp_event_wait, which a task may not "
                          "call inside a replay"),
                "replay %d: %s", i, d);
    rp_event_release(rt, done);
    cr_assert_eq(atomic_load(&flag_ran[0]), expect_runs);
  }
  RP_CHECK(rp_graph_destroy(mode_graph)); /* both still alive */
  RP_CHECK(rp_instance_free(rt, mode_inst));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

typedef struct hyper {
  uint64_t iter;
  float lr;
} hyper;

static rp_status seen_task(rp_task_ctx *ctx) {
  const hyper *h = rp_ctx_args(ctx, NULL);
  hyper *out = rp_ctx_ptr(ctx, 0);
  out[rp_ctx_replay(ctx) % 64] = *h;
  return RP_OK;
}

/* A graph of one seen_task launch: its argument block h0, the two
 * interpolations ips. */
static rp_graph *capture_seen(rp_runtime *rt, rp_task_id t,
                              const rp_access *acc, const hyper *h0,
                              const rp_interp ips[2]) {
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = RP_PROC_ANY,
                                       .accesses = acc,
                                       .naccess = 1,
                                       .args = h0,
                                       .args_size = sizeof *h0,
                                       .interps = ips,
                                       .ninterp = 2},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  return g;
}

Test(replay, interpolated_arguments_change_every_replay) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "seen", seen_task);
  rp_inst log;
  rp_rect r = rp_rect_1d(0, 64 * 2 - 1); /* 64 hypers as 128 x u64 */
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &log));
  hyper h0 = {999, -1.0f};
  rp_interp ips[2] = {{0, offsetof(hyper, iter), sizeof(uint64_t)},
                      {8, offsetof(hyper, lr), sizeof(float)}};
  rp_access acc = {log, RP_RW, 0};
  rp_graph *g = capture_seen(rt, t, &acc, &h0, ips);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 8}, &ex));
  rp_event done[40];
  for (int i = 0; i < 40; i++) {
    struct {
      uint64_t iter;
      float lr;
    } a = {(uint64_t)i * 3, 0.5f / (float)(i + 1)};
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = &a, .args_size = sizeof a},
                       &done[i]));
  }
  for (int i = 0; i < 40; i++) {
    RP_CHECK(rp_event_wait(rt, done[i], -1));
    rp_event_release(rt, done[i]);
  }
  hyper *seen = rp_instance_ptr(rt, log);
  for (int i = 0; i < 40; i++) {
    cr_assert_eq(seen[i].iter, (uint64_t)i * 3, "replay %d saw iter %llu", i,
                 (unsigned long long)seen[i].iter);
    cr_assert_eq(seen[i].lr, 0.5f / (float)(i + 1), "replay %d saw lr", i);
  }
  /* too many argument bytes */
  char big[1024] = {0};
  rp_event d;
  RP_EXPECT(rp_replay(ex,
                      &(rp_replay_args){.args = big, .args_size = sizeof big},
                      &d),
            RP_ERANGE);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, log));
  th_destroy(rt);
}

/* Interpolations that write the same bytes apply in their order (the
 * launch's array, then rp_graph_add_interp's calls): the later one's bytes
 * stand, in the recorded graph and in the one a graph file loads. */
Test(replay, overlapping_interpolations_apply_in_order_the_later_wins) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "seen", seen_task);
  rp_inst log;
  rp_rect r = rp_rect_1d(0, 64 * 2 - 1);
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &log));
  hyper h0 = {999, -1.0f};
  /* both write lr: from bytes [0, 4), then from [4, 8) */
  rp_interp ips[2] = {{0, offsetof(hyper, lr), sizeof(float)},
                      {4, offsetof(hyper, lr), sizeof(float)}};
  rp_access acc = {log, RP_RW, 0};
  rp_graph *g = capture_seen(rt, t, &acc, &h0, ips);
  /* a third, added later, writes lr's low half from [8, 10) */
  RP_CHECK(rp_graph_add_interp(g, 0, &(rp_interp){8, offsetof(hyper, lr), 2}));
  rp_graph *loaded = NULL;
#ifdef REPRISE_HAVE_CJSON
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f != NULL);
  RP_CHECK(rp_graph_dump(g, f, RP_DUMP_JSON));
  fclose(f);
  RP_CHECK(rp_graph_load_mem(rt, buf, len, &log, 1, 0, &loaded));
  free(buf);
#endif
  rp_graph *graphs[2] = {g, loaded};
  for (int k = 0; k < 2 && graphs[k]; k++) {
    rp_exec *ex;
    RP_CHECK(rp_instantiate(graphs[k], NULL, &ex));
    float v[3] = {1.5f, 2.5f, 0};
    uint16_t low = 0x1234;
    memcpy(&v[2], &low, sizeof low);
    rp_event done;
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = v, .args_size = sizeof v},
                       &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    float want = 2.5f;               /* the second wins over the first ... */
    memcpy(&want, &low, sizeof low); /* ... and the third over its half */
    hyper *seen = rp_instance_ptr(rt, log);
    cr_assert_eq(seen[0].iter, 999, "graph %d: iter %llu", k,
                 (unsigned long long)seen[0].iter);
    cr_assert(!memcmp(&seen[0].lr, &want, sizeof want),
              "graph %d: lr %g, expected %g (the later interpolation's bytes)",
              k, (double)seen[0].lr, (double)want);
    RP_CHECK(rp_exec_destroy(ex));
  }
  if (loaded)
    RP_CHECK(rp_graph_destroy(loaded));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, log));
  th_destroy(rt);
}

static rp_status shard_task(rp_task_ctx *ctx) {
  size_t bytes;
  uint32_t *ws = rp_ctx_workspace(ctx, &bytes);
  uint32_t me = rp_ctx_shard(ctx) + 1;
  if (!ws || bytes < 1000) /* the launch asks for 1000 bytes a shard */
    return RP_ESHAPE;
  for (size_t i = 0; i < bytes / 4; i++)
    if (ws[i] != 0 && ws[i] != me)
      return RP_ERANGE; /* another shard touched my slice */
  for (size_t i = 0; i < bytes / 4; i++)
    ws[i] = me;
  int32_t *count = rp_ctx_ptr(ctx, 0);
  __atomic_fetch_add(&count[rp_ctx_shard(ctx)], 1, __ATOMIC_RELAXED);
  /* every shard stores the count, at once: the instance is reduced into,
   * so only atomic accesses are allowed on it */
  __atomic_store_n(&count[8], (int32_t)rp_ctx_shards(ctx), __ATOMIC_RELAXED);
  return RP_OK;
}

Test(replay, spmd_shards_get_disjoint_workspace_slices_per_replay_count) {
  rp_runtime *rt = th_cpu_runtime(3);
  rp_task_id t = th_task(rt, "shard", shard_task);
  rp_inst cnt;
  rp_rect r = rp_rect_1d(0, 8);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &cnt));
  rp_access acc = {cnt, RP_REDUCE, RP_REDOP_SUM};
  rp_interp ip = {0, RP_INTERP_SHARDS, sizeof(uint32_t)};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = RP_PROC_ANY,
                                       .accesses = &acc,
                                       .naccess = 1,
                                       .shards = 8,
                                       .workspace_bytes = 1000,
                                       .workspace_align = 64,
                                       .interps = &ip,
                                       .ninterp = 1},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  static const uint32_t counts[] = {8, 3, 1, 8, 5, 0, 100};
  int expect[8] = {0};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    rp_event done;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &counts[i], .args_size = 4}, &done));
    RP_EXPECT(rp_event_wait(rt, done, -1), RP_OK);
    rp_event_release(rt, done);
    uint32_t n = counts[i] < 1 ? 1 : counts[i] > 8 ? 8 : counts[i];
    for (uint32_t s = 0; s < n; s++)
      expect[s]++;
    int32_t *c = rp_instance_ptr(rt, cnt);
    for (int s = 0; s < 8; s++)
      cr_assert_eq(c[s], expect[s], "replay %zu shard %d", i, s);
    cr_assert_eq(c[8], (int32_t)n, "shard count seen by tasks");
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, cnt));
  th_destroy(rt);
}

/* What each shard saw: its processor and its workspace's size. */
static _Atomic int seen_proc[3];
static _Atomic size_t seen_ws[3];

static rp_status where_task(rp_task_ctx *ctx) {
  size_t bytes = 0;
  char *ws = rp_ctx_workspace(ctx, &bytes);
  memset(ws, 0x5a, bytes); /* the whole declared slice is usable */
  atomic_store(&seen_proc[rp_ctx_shard(ctx)], (int)rp_ctx_proc(ctx));
  atomic_store(&seen_ws[rp_ctx_shard(ctx)], bytes);
  return RP_OK;
}

/* shard_procs may leave some shards to the runtime (RP_PROC_ANY), eagerly
 * as recorded; a shard is told the workspace it declared, eager or
 * replayed (not the aligned stride between slices). */
Test(replay, spmd_shard_procs_with_any_and_the_declared_workspace) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "where", where_task);
  const rp_proc sp[3] = {RP_PROC_ANY, 1, RP_PROC_ANY};
  rp_launch l = {.task = t,
                 .proc = RP_PROC_ANY,
                 .shards = 3,
                 .shard_procs = sp,
                 .workspace_bytes = 100};
  for (int mode = 0; mode < 2; mode++) { /* eager, then replayed */
    for (int i = 0; i < 3; i++)
      atomic_store(&seen_proc[i], -1), atomic_store(&seen_ws[i], 0);
    rp_event done;
    rp_graph *g = NULL;
    rp_exec *ex = NULL;
    if (mode == 0) {
      RP_CHECK(rp_launch_task(rt, &l, &done));
    } else {
      RP_CHECK(rp_graph_create(rt, &g));
      RP_CHECK(rp_graph_add_task(g, &l, NULL));
      RP_CHECK(rp_instantiate(g, NULL, &ex));
      RP_CHECK(rp_replay(ex, NULL, &done));
    }
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
    for (int i = 0; i < 3; i++) {
      int p = atomic_load(&seen_proc[i]);
      cr_assert(p == 0 || p == 1, "mode %d shard %d ran on %d", mode, i, p);
      cr_assert_eq(atomic_load(&seen_ws[i]), 100, "mode %d shard %d", mode, i);
    }
    cr_assert_eq(atomic_load(&seen_proc[1]), 1, "mode %d", mode);
    if (ex)
      RP_CHECK(rp_exec_destroy(ex));
    if (g)
      RP_CHECK(rp_graph_destroy(g));
  }
  th_destroy(rt);
}

/* A fixed shard count (no interpolation): every shard writes a per-replay
 * marker over its whole slice and says where its slice is. */
#define FSHARDS 6
static void *slice_ptr[FSHARDS];
static size_t slice_bytes[FSHARDS];

static uint32_t slice_mark(uint64_t replay, uint32_t shard) {
  return (uint32_t)replay * 16 + shard + 1;
}

static rp_status slice_task(rp_task_ctx *ctx) {
  size_t bytes;
  uint32_t *ws = rp_ctx_workspace(ctx, &bytes);
  uint32_t sh = rp_ctx_shard(ctx);
  if (sh >= FSHARDS || rp_ctx_shards(ctx) != FSHARDS || !ws)
    return RP_EINVAL;
  slice_ptr[sh] = ws;
  slice_bytes[sh] = bytes;
  uint32_t mark = slice_mark(rp_ctx_replay(ctx), sh);
  for (size_t i = 0; i < bytes / 4; i++)
    ws[i] = mark;
  return RP_OK;
}

/* After each replay: the slices are aligned, at least the declared size,
 * pairwise disjoint, and each holds only its own shard's marker of this
 * replay (no shard wrote into another's slice, none was skipped). */
Test(replay, spmd_fixed_shard_count_each_shard_owns_its_slice) {
  rp_runtime *rt = th_cpu_runtime(3);
  rp_task_id t = th_task(rt, "slice", slice_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = RP_PROC_ANY,
                                          .shards = FSHARDS,
                                          .workspace_bytes = 1000,
                                          .workspace_align = 128,
                                          .cost_ns = 50000},
                             NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.ops, FSHARDS);
  cr_assert_gt(s.procs_used, 1, "50 us shards spread over the workers");
  for (uint64_t r = 0; r < 4; r++) {
    memset(slice_ptr, 0, sizeof slice_ptr);
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_EXPECT(rp_event_wait(rt, done, -1), RP_OK);
    RP_CHECK(rp_event_release(rt, done));
    for (uint32_t a = 0; a < FSHARDS; a++) {
      char *pa = slice_ptr[a];
      cr_assert_not_null(pa, "replay %llu: shard %u did not run",
                         (unsigned long long)r, a);
      cr_assert_geq(slice_bytes[a], 1000);
      cr_assert_eq((uintptr_t)pa % 128, 0, "shard %u slice misaligned", a);
      for (uint32_t b = 0; b < a; b++) {
        char *pb = slice_ptr[b];
        cr_assert(pa + slice_bytes[a] <= pb || pb + slice_bytes[b] <= pa,
                  "slices of shards %u and %u overlap", b, a);
      }
      const uint32_t *w = (const uint32_t *)pa;
      for (size_t i = 0; i < slice_bytes[a] / 4; i++)
        if (w[i] != slice_mark(r, a))
          cr_assert_fail("replay %llu: word %zu of shard %u's slice holds "
                         "%#x, expected %#x",
                         (unsigned long long)r, i, a, w[i], slice_mark(r, a));
    }
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

static rp_status overrun_task(rp_task_ctx *ctx) {
  size_t bytes;
  char *ws = rp_ctx_workspace(ctx, &bytes);
  if (rp_ctx_shard(ctx) == 1)
    ws[bytes] = 1; /* one byte past the slice */
  return RP_OK;
}

Test(replay, workspace_overrun_is_reported_in_debug_builds) {
#ifdef NDEBUG
  cr_skip_test("guard bytes exist in debug builds only");
#endif
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "overrun", overrun_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){
          .task = t, .proc = RP_PROC_ANY, .shards = 2, .workspace_bytes = 100},
      NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ERANGE);
  cr_assert(strstr(rp_exec_error_detail(ex), "overrun") != NULL, "%s",
            rp_exec_error_detail(ex));
  cr_assert(strstr(rp_exec_error_detail(ex), "shard 1") != NULL, "%s",
            rp_exec_error_detail(ex));
  rp_event_release(rt, done);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A failure's words as long as the runtime's own details run (the
 * communication layer's reach 320 bytes: who did not answer, where each
 * rank waits) reach rp_exec_error_detail and the waiter whole, with the
 * longest op and task names in front: the end of the words was cut off
 * ("rank 0 did not an"). */
static rp_status long_words_task(rp_task_ctx *ctx) {
  (void)ctx;
  char w[320];
  memset(w, 'w', sizeof w);
  memcpy(w + sizeof w - 5, " END", 5);
  return rp_error_set(RP_EPEER, "%s", w);
}

Test(replay, a_long_failure_detail_arrives_whole) {
  rp_runtime *rt = th_cpu_runtime(1);
  char tname[RP_NAME_MAX + 1], oname[RP_NAME_MAX + 1];
  memset(tname, 't', RP_NAME_MAX), tname[RP_NAME_MAX] = 0;
  memset(oname, 'o', RP_NAME_MAX), oname[RP_NAME_MAX] = 0;
  rp_task_id t = th_task(rt, tname, long_words_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op;
  RP_CHECK(
      rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY}, &op));
  RP_CHECK(rp_graph_set_op_name(g, op, oname));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_EPEER);
  const char *d = rp_error_detail();
  cr_assert(strstr(d, oname) && strstr(d, "wwww END"), "%s", d);
  d = rp_exec_error_detail(ex);
  cr_assert(strstr(d, oname) && strstr(d, tname) && strstr(d, "wwww END"), "%s",
            d);
  rp_event_release(rt, done);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A task that fails without words of its own gets none ("" after its
 * status), whatever an earlier task or callback on its worker left in
 * the thread's detail: here an op that polled a stale event (its detail
 * set, its failure handled) and returned RP_OK, in the same replay or
 * an earlier one, or an eager task that did so before the replay. */
static _Atomic int mute_fail_at = -1;
static rp_status noted_ok_task(rp_task_ctx *ctx) {
  /* a handled failure: the call sets the thread's detail */
  if (rp_event_query(ctx->rt, (rp_event){(uint64_t)1 << 62 | 1}) != RP_ESTALE)
    return rp_error_set(RP_EINVAL, "the poll of a stale event succeeded");
  return RP_OK;
}
static rp_status mute_fail_task(rp_task_ctx *ctx) {
  return (int64_t)rp_ctx_replay(ctx) == atomic_load(&mute_fail_at) ? RP_ETASK
                                                                   : RP_OK;
}

static void expect_mute(rp_runtime *rt, rp_exec *ex, rp_event done,
                        const char *when) {
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ETASK);
  const char *d = rp_exec_error_detail(ex);
  const char *tail = strstr(d, "RP_ETASK: ");
  cr_assert(tail && !strcmp(tail, "RP_ETASK: "),
            "%s: the failing task said nothing, the replay says: %s", when, d);
  RP_CHECK(rp_event_release(rt, done));
}

Test(replay, a_task_failing_without_words_gets_no_earlier_detail) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id noted = th_task(rt, "noted_ok", noted_ok_task);
  rp_task_id mute = th_task(rt, "mute_fail", mute_fail_task);
  rp_graph *g;
  rp_exec *ex;
  rp_event done;
  /* the same replay: op a ran just before op b on the worker; op b plain
   * (the lane's fast path) or interpolated (its general path) */
  for (int interp = 0; interp < 2; interp++) {
    RP_CHECK(rp_graph_create(rt, &g));
    rp_op_id a, b;
    uint32_t arg = 0;
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = noted, .proc = 0}, &a));
    RP_CHECK(rp_graph_add_task(
        g,
        &(rp_launch){
            .task = mute, .proc = 0, .args = &arg, .args_size = sizeof arg},
        &b));
    RP_CHECK(rp_graph_add_edge(g, a, b));
    if (interp)
      RP_CHECK(rp_graph_add_interp(g, b, &(rp_interp){0, 0, sizeof arg}));
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    atomic_store(&mute_fail_at, 0);
    RP_CHECK(
        rp_replay(ex, &(rp_replay_args){.args = &arg, .args_size = 4}, &done));
    expect_mute(rt, ex, done,
                interp ? "after op a, interpolated" : "after op a, plain");
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  /* only op b in the exec: an eager task ran on the worker before */
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = mute, .proc = 0}, NULL));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event e;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = noted, .proc = 0}, &e));
  RP_CHECK(rp_event_wait(rt, e, -1));
  RP_CHECK(rp_event_release(rt, e));
  atomic_store(&mute_fail_at, 0);
  RP_CHECK(rp_replay(ex, NULL, &done));
  expect_mute(rt, ex, done, "after an eager task");
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A task with a workspace that returns RP_ERANGE of its own, within its
 * slice, keeps its own detail (not called an overrun in debug builds). */
static rp_status own_range_task(rp_task_ctx *ctx) {
  size_t bytes;
  char *ws = rp_ctx_workspace(ctx, &bytes);
  ws[0] = 1;
  return rp_error_set(RP_ERANGE, "batch index past the data set");
}

Test(replay, a_tasks_own_range_error_with_a_workspace_keeps_its_detail) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "own_range", own_range_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 0, .workspace_bytes = 100}, NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ERANGE);
  const char *d = rp_exec_error_detail(ex);
  cr_assert(strstr(d, "batch index past the data set") && !strstr(d, "overran"),
            "%s", d);
  rp_event_release(rt, done);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A workspace the builder takes (its slice fits a size_t) but no memory
 * can hold with its alignment's slack: rp_instantiate refuses it
 * (RP_ERANGE, naming the op, the task, the bytes and the memory), hands
 * out no exec, and the graph and the runtime stay usable. */
Test(replay, a_workspace_no_allocation_can_hold_is_refused_at_instantiate) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "huge_ws", own_range_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  size_t huge = SIZE_MAX - 63; /* a multiple of 64: the slice fits */
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 0, .workspace_bytes = huge}, NULL));
  rp_exec *ex = (rp_exec *)0x1;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ERANGE);
  char want[200];
#ifdef NDEBUG
  snprintf(want, sizeof want,
           "rp_instantiate: op 0 (task 'huge_ws'): allocating %zu bytes in "
           "memory 0: allocation of %zu bytes overflows",
           huge, huge);
#else /* debug builds put 64 guard bytes after each slice: it overflows */
  snprintf(want, sizeof want,
           "rp_instantiate: op 0 (task 'huge_ws'): workspace of 1 x %zu "
           "bytes (aligned to 64) overflows",
           huge);
#endif
  cr_assert_str_eq(rp_error_detail(), want);
  cr_assert_eq(ex, (rp_exec *)0x1, "*out written on error");
  cr_assert_eq(rp_graph_op_count(g), 1);
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

static rp_status slow_task(rp_task_ctx *ctx) {
  (void)ctx;
  usleep(2000);
  atomic_fetch_add(&flag_ran[7], 1);
  return RP_OK;
}

Test(replay, destroy_waits_for_replays_in_flight) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "slow", slow_task);
  atomic_store(&flag_ran[7], 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &a));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 1}, &b));
  RP_CHECK(rp_graph_add_edge(g, a, b));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 16}, &ex));
  rp_event done[10];
  for (int i = 0; i < 10; i++)
    RP_CHECK(rp_replay(ex, NULL, &done[i]));
  RP_CHECK(rp_exec_destroy(ex)); /* replays still running */
  cr_assert_eq(atomic_load(&flag_ran[7]), 20);
  for (int i = 0; i < 10; i++) {
    RP_EXPECT(rp_event_query(rt, done[i]), RP_OK);
    rp_event_release(rt, done[i]);
  }
  RP_EXPECT(rp_runtime_destroy(rt), RP_EBUSY); /* the graph is alive */
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_graph *chain_graph(rp_runtime *rt, rp_task_id t, rp_inst x, int n) {
  rp_access acc = {x, RP_RW, 0};
  RP_CHECK(rp_capture_begin(rt, NULL));
  for (int i = 0; i < n; i++)
    RP_CHECK(rp_launch_task(
        rt,
        &(rp_launch){
            .task = t, .proc = RP_PROC_ANY, .accesses = &acc, .naccess = 1},
        NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  return g;
}

Test(replay, chain_stays_on_one_worker_with_zero_handoffs) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_inst x;
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &x));
  rp_graph *g = chain_graph(rt, t, x, 100);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int i = 0; i < 50; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
  }
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 1);
  cr_assert_eq(s.handoffs, 0);
  cr_assert_eq(s.ops_run, 50 * 100);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

static rp_status busy_task(rp_task_ctx *ctx) {
  (void)ctx;
  uint64_t t0 = 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - t0 > 50000)
      return RP_OK;
  }
}

Test(replay, wide_layer_of_costly_tasks_spreads_over_workers) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "busy", .cpu_fn = busy_task, .cost_ns = 50000},
      &t));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 8; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 2, "8 independent 50 us tasks use both workers");
  int on[2] = {0, 0};
  for (rp_op_id op = 0; op < 8; op++) {
    rp_proc p;
    RP_CHECK(rp_exec_op_proc(ex, op, &p));
    on[p]++;
  }
  cr_assert_eq(on[0], 4);
  cr_assert_eq(on[1], 4);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* Cost hints up to UINT64_MAX (task and launch) and edge costs as large
 * place and replay: placement counts at most RP_PLACE_COST_MAX each (the
 * finish times overflowed and instantiate read past its lanes). A chain
 * of such tasks stays on one worker, a layer of them spreads. */
Test(replay, the_largest_cost_hints_place_and_replay) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "busy",
                                            .cpu_fn = busy_task,
                                            .cost_ns = UINT64_MAX},
                            &t));
  for (int shape = 0; shape < 2; shape++) {
    rp_graph *g;
    RP_CHECK(rp_graph_create(rt, &g));
    rp_op_id prev = 0;
    for (int i = 0; i < 6; i++) {
      rp_op_id op;
      RP_CHECK(rp_graph_add_task(
          g,
          &(rp_launch){.task = t,
                       .proc = RP_PROC_ANY,
                       .cost_ns = i % 2 ? UINT64_MAX : UINT64_MAX - 1},
          &op));
      if (shape == 0 && i)
        RP_CHECK(rp_graph_add_edge(g, prev, op));
      prev = op;
    }
    rp_exec *ex;
    RP_CHECK(
        rp_instantiate(g, &(rp_exec_opts){.edge_cost_ns = UINT64_MAX}, &ex));
    rp_exec_stats s;
    RP_CHECK(rp_exec_stats_get(ex, &s));
    cr_assert_eq(s.procs_used, shape == 0 ? 1u : 2u, "shape %d: %u workers",
                 shape, s.procs_used);
    rp_event d;
    RP_CHECK(rp_replay(ex, NULL, &d));
    RP_CHECK(rp_event_wait(rt, d, -1));
    RP_CHECK(rp_event_release(rt, d));
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  th_destroy(rt);
}

Test(replay, empty_tasks_are_re_placed_onto_one_worker_after_measuring) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task); /* no cost hint */
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 8; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 2, "unknown costs default to 1 us: spread");
  for (int i = 0; i < 40; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
  }
  /* rp_replay only replays: the placement changes only in rp_exec_tune */
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, 0);
  cr_assert_eq(s.procs_used, 2);
  uint32_t tuned = 0;
  /* the choice between the measured placements comes from a cost source in
   * which one worker replays fastest, whatever this machine's speed */
  rp__tune_cost_hook = th_cost_one_worker_wins;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  rp__tune_cost_hook = NULL;
  /* a warm-up, 8 timing the units, 8 per placement tried (2 or 3) */
  cr_assert(tuned == 1 + 8 + 2 * 8 || tuned == 1 + 8 + 3 * 8, "%u", tuned);
  for (int i = 0; i < 40; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
  }
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, 1);
  cr_assert_eq(s.procs_used, 1, "the faster one-worker placement is kept");
  cr_assert_eq(s.ops_run, 8ull * (80 + tuned));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(replay, replay_path_allocates_nothing_after_warm_up) {
  if (rp_thread_allocated_bytes() == UINT64_MAX)
    cr_skip_test("built without jemalloc (sanitizer build): no per-thread "
                 "allocation counters");
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_inst x, y;
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &y));
  /* two chains pinned to two workers, joined: cross-worker waits too */
  rp_access ax = {x, RP_RW, 0}, ay = {y, RP_RW, 0};
  rp_access both[2] = {{x, RP_READ, 0}, {y, RP_RW, 0}};
  RP_CHECK(rp_capture_begin(rt, NULL));
  for (int i = 0; i < 20; i++) {
    RP_CHECK(rp_launch_task(
        rt, &(rp_launch){.task = t, .proc = 0, .accesses = &ax, .naccess = 1},
        NULL));
    RP_CHECK(rp_launch_task(
        rt, &(rp_launch){.task = t, .proc = 1, .accesses = &ay, .naccess = 1},
        NULL));
  }
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 1, .accesses = both, .naccess = 2},
      NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  for (int i = 0; i < 100; i++) { /* warm up: event free list, window */
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  uint64_t host0 = rp_thread_allocated_bytes();
  uint64_t work0 = rp_runtime_worker_allocated_bytes(rt);
  for (int i = 0; i < 1000; i++) {
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_release(rt, done));
  }
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  uint64_t host1 = rp_thread_allocated_bytes();
  uint64_t work1 = rp_runtime_worker_allocated_bytes(rt);
  cr_assert_neq(work0, UINT64_MAX);
  cr_assert_eq(host1 - host0, 0, "host thread allocated %llu bytes",
               (unsigned long long)(host1 - host0));
  cr_assert_eq(work1 - work0, 0, "workers allocated %llu bytes",
               (unsigned long long)(work1 - work0));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 1101);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}

/* Eight unhinted tasks on four instances (two per instance, in order),
 * joined by one that reads all four: placed on the 1 us default cost it
 * spreads over both workers, with cross-worker waits inside a replay and
 * wrap-around waits between replays (the next replay's writers wait for
 * this one's readers). */
static rp_graph *unhinted_fan(rp_runtime *rt, rp_task_id t, rp_task_id join,
                              const rp_inst *x) {
  RP_CHECK(rp_capture_begin(rt, NULL));
  th_launch_unhinted_fan(rt, t, join, x);
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  return g;
}

static void make_insts(rp_runtime *rt, rp_inst *x, int n) {
  rp_rect r = rp_rect_1d(0, 0);
  int64_t zero = 0;
  for (int i = 0; i < n; i++) {
    RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x[i]));
    RP_CHECK(rp_instance_write(rt, x[i], &zero, sizeof zero));
  }
}

static void check_fan(rp_runtime *rt, const rp_inst *x, int64_t replays) {
  for (int i = 0; i < 5; i++) {
    int64_t v;
    RP_CHECK(rp_instance_read(rt, x[i], &v, sizeof v));
    cr_assert_eq(v, i < 4 ? 2 * replays : 8 * replays,
                 "instance %d after %lld replays: %lld", i, (long long)replays,
                 (long long)v);
  }
}

/* Unhinted units (an exec that could re-place itself during its first
 * replays): from the very first replay of a fresh exec, neither
 * the calling thread nor a worker allocates a byte. */
Test(replay, replay_path_allocates_nothing_from_the_first_replay) {
  if (rp_thread_allocated_bytes() == UINT64_MAX)
    cr_skip_test("built without jemalloc (sanitizer build): no per-thread "
                 "allocation counters");
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add1", th_add1_task); /* no cost hints */
  rp_task_id j = th_task(rt, "sum4", th_sum4_task);
  rp_inst x[5];
  make_insts(rt, x, 5);
  rp_graph *g = unhinted_fan(rt, t, j, x);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 2, "unhinted: spread on the 1 us default");
  uint64_t host0 = rp_thread_allocated_bytes();
  uint64_t work0 = rp_runtime_worker_allocated_bytes(rt);
  cr_assert_neq(work0, UINT64_MAX);
  rp_event done;
  /* one at a time (each replay quiet before the next: the moment the old
   * tuning step re-placed), then back to back */
  for (int i = 0; i < 100; i++) {
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  for (int i = 0; i < 300; i++) {
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_release(rt, done));
  }
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  uint64_t host1 = rp_thread_allocated_bytes();
  uint64_t work1 = rp_runtime_worker_allocated_bytes(rt);
  cr_assert_eq(host1 - host0, 0,
               "host thread allocated %llu bytes from replay 1 to 401",
               (unsigned long long)(host1 - host0));
  cr_assert_eq(work1 - work0, 0,
               "workers allocated %llu bytes from replay 1 to 401",
               (unsigned long long)(work1 - work0));
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 401);
  cr_assert_eq(s.replacements, 0, "rp_replay never re-places");
  cr_assert_eq(s.procs_used, 2);
  cr_assert_eq(s.ops_run, 401ull * 9);
  check_fan(rt, x, 401);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < 5; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  th_destroy(rt);
}

/* A step with one op: every candidate placement is the initial one, so
 * nothing is timed; the dump says so (it printed the unmeasured marker as
 * "initial 18446744073709551615 ns"). */
Test(replay, exec_tune_with_nothing_to_compare_says_so) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add1", th_add1_task);
  rp_inst x;
  make_insts(rt, &x, 1);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access a = {x, RP_RW, RP_REDOP_NONE};
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){
          .task = t, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
      NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  uint32_t tuned = 0;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  cr_assert_gt(tuned, 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(buf, "nothing to measure") &&
                !strstr(buf, "18446744073709551615"),
            "%s", buf);
  free(buf);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* rp_exec_tune measures and keeps the fastest placement: nine tiny tasks
 * belong on one worker (a cross-worker hand-off costs far more than they
 * do); every trial replay is a real one, and the values say so. */
/* What holds at any speed: the tuner measures, keeps one of the placements
 * it timed (the dump says which, with each one's time), the workers used
 * agree with that choice, and results stay right. Which placement wins is
 * the machine's to decide (under load it may be any of them). */
Test(replay, exec_tune_picks_the_measured_placement_and_results_stay_right) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add1", th_add1_task);
  rp_task_id j = th_task(rt, "sum4", th_sum4_task);
  rp_inst x[5];
  make_insts(rt, x, 5);
  rp_graph *g = unhinted_fan(rt, t, j, x);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  uint32_t tuned = 0;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  cr_assert(tuned == 1 + 8 + 2 * 8 || tuned == 1 + 8 + 3 * 8, "%u", tuned);
  check_fan(rt, x, tuned);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, tuned);
  cr_assert_leq(s.replacements, 1);
  cr_assert(s.procs_used == 1 || s.procs_used == 2, "%u", s.procs_used);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  fclose(f);
  const char *why = strstr(buf, "placement: ");
  cr_assert_not_null(why, "%s", buf);
  why += strlen("placement: ");
  cr_assert(strstr(why, "after measuring replays:") != NULL, "%s", why);
  cr_assert(strstr(why, " initial ") != NULL, "%s", why);
  if (strncmp(why, "one worker", 10) == 0)
    cr_assert_eq(s.procs_used, 1, "%s", why);
  if (strncmp(why, "initial", 7) == 0)
    cr_assert_eq(s.replacements, 0, "%s", why);
  else
    cr_assert_eq(s.replacements, 1, "%s", why);
  free(buf);
  uint32_t procs = s.procs_used;
  for (int i = 0; i < 30; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  check_fan(rt, x, (int64_t)tuned + 30);
  uint32_t replacements = s.replacements;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, replacements, "rp_replay never re-places");
  cr_assert_eq(s.procs_used, procs);
  cr_assert_eq(s.ops_run, 9ull * (tuned + 30));
  /* tuning again measures again (and runs its replays) */
  uint32_t again = 0;
  RP_CHECK(rp_exec_tune(ex, NULL, &again));
  cr_assert_gt(again, 0);
  check_fan(rt, x, (int64_t)tuned + 30 + again);
  RP_CHECK(rp_exec_destroy(ex));
  for (int i = 0; i < 5; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  th_destroy(rt);
}

/* The choice itself, from an injected cost source: a candidate replaces the
 * initial placement only for a clear (10%) gain. */
Test(replay, exec_tune_keeps_the_initial_placement_without_a_clear_gain) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add1", th_add1_task);
  rp_task_id j = th_task(rt, "sum4", th_sum4_task);
  rp_inst x[5];
  make_insts(rt, x, 5);
  rp_graph *g = unhinted_fan(rt, t, j, x);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  uint32_t procs = s.procs_used;
  cr_assert_eq(procs, 2, "the unhinted fan starts over both workers");
  uint32_t tuned = 0;
  rp__tune_cost_hook = th_cost_all_equal;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, 0);
  cr_assert_eq(s.procs_used, procs, "the initial placement stays");
  check_fan(rt, x, tuned);
  /* one worker twice as fast: a clear gain, taken */
  uint32_t again = 0;
  rp__tune_cost_hook = th_cost_one_worker_wins;
  RP_CHECK(rp_exec_tune(ex, NULL, &again));
  rp__tune_cost_hook = NULL;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, 1);
  cr_assert_eq(s.procs_used, 1);
  check_fan(rt, x, (int64_t)tuned + again);
  RP_CHECK(rp_exec_destroy(ex));
  for (int i = 0; i < 5; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  th_destroy(rt);
}

/* Spins for 20 us: a measured cost well above the edge cost. */
static rp_status spin20us_task(rp_task_ctx *ctx) {
  (void)ctx;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do
    clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) <
         20000);
  return RP_OK;
}

/* The reason rp_exec_dump gives names each timing by the placement it
 * timed. Here list scheduling on the measured costs places the ops as
 * instantiate did (the hinted op on worker 0, the 20 us one beside it), so
 * the second and last placement timed is "one worker": its timing is
 * labelled so, not "measured". */
Test(replay, exec_tune_reason_names_each_timing_by_its_placement) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id spin = th_task(rt, "spin20us", spin20us_task), big;
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "hinted1s",
                                            .cpu_fn = th_add1_task,
                                            .cost_ns = 1000000000},
                            &big));
  rp_inst x[2];
  make_insts(rt, x, 2);
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_access a0 = {x[0], RP_RW, 0}, a1 = {x[1], RP_RW, 0};
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){
          .task = big, .proc = RP_PROC_ANY, .accesses = &a0, .naccess = 1},
      NULL));
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){
          .task = spin, .proc = RP_PROC_ANY, .accesses = &a1, .naccess = 1},
      NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  uint32_t tuned = 0;
  rp__tune_cost_hook = th_cost_one_worker_wins;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  rp__tune_cost_hook = NULL;
  cr_assert_eq(tuned, 1 + 8 + 2 * 8, "initial and one worker timed: %u", tuned);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(buf, "placement: one worker after measuring replays: "
                        "initial 20000 ns, one-worker 10000 ns\n"),
            "%s", buf);
  free(buf);
  RP_CHECK(rp_exec_destroy(ex));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  th_destroy(rt);
}

Test(replay, exec_tune_runs_nothing_when_every_unit_is_hinted) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "add1", .cpu_fn = th_add1_task, .cost_ns = 5000},
      &t));
  rp_inst x;
  make_insts(rt, &x, 1);
  rp_graph *g = chain_graph(rt, t, x, 4);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  uint32_t tuned = 99;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  cr_assert_eq(tuned, 0);
  /* a->post is ignored, whatever it holds (the graph has no ports) */
  rp_event posts[2] = {{0}, {0}};
  RP_CHECK(
      rp_exec_tune(ex, &(rp_replay_args){.post = posts, .npost = 2}, &tuned));
  RP_CHECK(
      rp_exec_tune(ex, &(rp_replay_args){.post = NULL, .npost = 1}, &tuned));
  cr_assert(posts[0].id == 0 && posts[1].id == 0, "an event was handed out");
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 0);
  cr_assert_eq(s.replacements, 0);
  /* and with no_replace, unhinted units are not measured either */
  rp_exec *ex2;
  rp_task_id u = th_task(rt, "add1u", th_add1_task);
  rp_graph *g2 = chain_graph(rt, u, x, 4);
  RP_CHECK(rp_instantiate(g2, &(rp_exec_opts){.no_replace = 1}, &ex2));
  RP_CHECK(rp_exec_tune(ex2, NULL, &tuned));
  cr_assert_eq(tuned, 0);
  int64_t v;
  RP_CHECK(rp_instance_read(rt, x, &v, sizeof v));
  cr_assert_eq(v, 0, "nothing ran");
  RP_CHECK(rp_exec_destroy(ex2));
  /* any nonzero no_replace counts, as the header says */
  RP_CHECK(rp_instantiate(g2, &(rp_exec_opts){.no_replace = -1}, &ex2));
  tuned = 7;
  RP_CHECK(rp_exec_tune(ex2, NULL, &tuned));
  cr_assert_eq(tuned, 0);
  RP_CHECK(rp_instance_read(rt, x, &v, sizeof v));
  cr_assert_eq(v, 0, "nothing ran");
  RP_CHECK(rp_exec_destroy(ex2));
  RP_CHECK(rp_graph_destroy(g2));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* A trial replay fails (in the second placement's window): rp_exec_tune
 * reports it, counts the replays that ran, and leaves the placement the
 * exec had before the call; the exec keeps working. */
static atomic_uint_fast64_t fail_at_replay;
static rp_status fail_once_task(rp_task_ctx *ctx) {
  *(int64_t *)rp_ctx_ptr(ctx, 0) += 1;
  return rp_ctx_replay(ctx) == atomic_load(&fail_at_replay) ? 1 : RP_OK;
}

/* unhinted_fan over x[0..5) and one more unhinted op of task f on its own
 * instance x[5]. */
static rp_graph *fan_with(rp_runtime *rt, rp_task_id f, rp_inst *x) {
  rp_task_id t = th_task(rt, "add1", th_add1_task);
  rp_task_id j = th_task(rt, "sum4", th_sum4_task);
  make_insts(rt, x, 6);
  rp_graph *g = unhinted_fan(rt, t, j, x);
  rp_access a = {x[5], RP_RW, 0};
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){
          .task = f, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
      NULL));
  return g;
}

/* Trial replays failing from replay 3 on: the error names the first of
 * them, as rp_exec_error_detail would have after it (it named the last of
 * its window). */
static rp_status fail_from_3_task(rp_task_ctx *ctx) {
  *(int64_t *)rp_ctx_ptr(ctx, 0) += 1;
  return rp_ctx_replay(ctx) >= 3 ? 1 : RP_OK;
}

Test(replay, exec_tune_names_the_first_failing_trial_replay) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x[6];
  rp_graph *g = fan_with(rt, th_task(rt, "fail_from_3", fail_from_3_task), x);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  uint32_t tuned = 0;
  RP_EXPECT(rp_exec_tune(ex, NULL, &tuned), RP_ETASK);
  cr_assert(strstr(rp_error_detail(), "replay 3:") ||
                strstr(rp_error_detail(), "replay 3 "),
            "%s", rp_error_detail());
  cr_assert_gt(tuned, 4u, "the window's replays ran: %u", tuned);
  RP_CHECK(rp_exec_destroy(ex));
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  th_destroy(rt);
}

Test(replay, exec_tune_failing_trial_keeps_the_previous_placement) {
  rp_runtime *rt = th_cpu_runtime(2);
  /* one worker would win by far: only the failure keeps the placement */
  rp__tune_cost_hook = th_cost_one_worker_wins;
  rp_inst x[6];
  rp_graph *g = fan_with(rt, th_task(rt, "fail_once", fail_once_task), x);
  /* replays 0..8 warm up and time units, 9..16 time the initial
   * placement, 17..24 the first candidate */
  atomic_store(&fail_at_replay, 20);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  rp_proc before[10], after[10];
  for (rp_op_id op = 0; op < 10; op++)
    RP_CHECK(rp_exec_op_proc(ex, op, &before[op]));
  uint32_t tuned = 0;
  RP_EXPECT(rp_exec_tune(ex, NULL, &tuned), RP_ETASK);
  cr_assert(strstr(rp_error_detail(), "fail_once") != NULL, "%s",
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), "replay 20") != NULL, "%s",
            rp_error_detail());
  cr_assert_eq(tuned, 25, "the failing window's replays all ran: %u", tuned);
  for (rp_op_id op = 0; op < 10; op++) {
    RP_CHECK(rp_exec_op_proc(ex, op, &after[op]));
    cr_assert_eq(after[op], before[op], "op %u moved", op);
  }
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, 0);
  cr_assert_eq(s.procs_used, 2);
  check_fan(rt, x, tuned);
  for (int i = 0; i < 10; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  check_fan(rt, x, (int64_t)tuned + 10);
  RP_CHECK(rp_exec_destroy(ex));
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  rp__tune_cost_hook = NULL;
  th_destroy(rt);
}

Test(replay, soak_100k_replays_without_growth, .timeout = 600) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_inst x;
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &x));
  rp_graph *g = chain_graph(rt, t, x, 8);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  uint64_t a0 = 0;
  for (int i = 0; i < 100000; i++) {
    if (i == 1000)
      a0 = rp_thread_allocated_bytes() + rp_runtime_worker_allocated_bytes(rt);
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_release(rt, done));
  }
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  uint64_t a1 =
      rp_thread_allocated_bytes() + rp_runtime_worker_allocated_bytes(rt);
  if (rp_thread_allocated_bytes() != UINT64_MAX)
    cr_assert_eq(a1, a0, "memory grew by %llu bytes over 99k replays",
                 (unsigned long long)(a1 - a0));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 100001);
  cr_assert_eq(s.ops_run, 800008);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
  /* the replays and ops were counted; the growth half needs the counters */
  if (rp_thread_allocated_bytes() == UINT64_MAX)
    cr_skip_test("built without jemalloc (sanitizer build): the replays "
                 "ran and were counted, memory growth not checked");
}

/* A graph of one op: flag task t with argument *id, x read and written. */
static rp_graph *flag_graph(rp_runtime *rt, rp_task_id t, rp_inst x,
                            const int *id, rp_op_id *op) {
  rp_access acc = {x, RP_RW, 0};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = 0,
                                          .accesses = &acc,
                                          .naccess = 1,
                                          .args = id,
                                          .args_size = sizeof *id},
                             op));
  return g;
}

Test(replay, stale_instance_fails_replay_with_estale_and_runs_nothing) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "flag", flag_task);
  atomic_store(&flag_ran[0], 0);
  rp_inst x;
  rp_rect r = rp_rect_1d(0, 3);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  int id = 0;
  rp_op_id op;
  rp_graph *g = flag_graph(rt, t, x, &id, &op);
  RP_CHECK(rp_graph_set_op_name(g, op, "snap"));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_instance_realloc(rt, &x));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ESTALE);
  cr_assert_eq(atomic_load(&flag_ran[0]), 0);
  /* the detail names the op that accesses it */
  cr_assert(strstr(rp_exec_error_detail(ex), "(accessed by op 0 'snap') was "
                                             "freed or reallocated"),
            "%s", rp_exec_error_detail(ex));
  rp_event_release(rt, done);
  /* and instantiating the graph now names the stale instance */
  rp_exec *ex2 = NULL;
  RP_EXPECT(rp_instantiate(g, NULL, &ex2), RP_ESTALE);
  cr_assert_null(ex2);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* A stale replay runs nothing, yet stays ordered after its preconditions:
 * its done event (and postconditions) come only once the precondition
 * event did, poisoned RP_ESTALE; a poisoned precondition leaves it
 * RP_ESTALE. */
Test(replay, a_stale_replay_completes_only_after_its_preconditions) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "flag", flag_task);
  atomic_store(&flag_ran[2], 0);
  rp_inst x;
  rp_rect r = rp_rect_1d(0, 3);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  int id = 2;
  rp_op_id op;
  rp_graph *g = flag_graph(rt, t, x, &id, &op);
  rp_port_id p, q;
  RP_CHECK(rp_graph_add_precondition(g, "in", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, op));
  RP_CHECK(rp_graph_add_postcondition(g, "out", &q));
  RP_CHECK(rp_graph_bind_postcondition(g, q, op));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_instance_realloc(rt, &x));
  for (int poison = 0; poison < 2; poison++) {
    rp_event pre, done, post;
    RP_CHECK(rp_event_create(rt, &pre));
    RP_CHECK(rp_replay(
        ex,
        &(rp_replay_args){.pre = &pre, .npre = 1, .post = &post, .npost = 1},
        &done));
    usleep(20000);
    RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
    RP_EXPECT(rp_event_query(rt, post), RP_EAGAIN);
    if (poison)
      RP_CHECK(rp_event_poison(rt, pre, RP_ETASK));
    else
      RP_CHECK(rp_event_trigger(rt, pre));
    RP_EXPECT(rp_event_wait(rt, done, -1), RP_ESTALE);
    RP_EXPECT(rp_event_wait(rt, post, -1), RP_ESTALE);
    cr_assert_eq(atomic_load(&flag_ran[2]), 0);
    rp_event_release(rt, pre);
    rp_event_release(rt, done);
    rp_event_release(rt, post);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* Replays check their instances only when some instance changed since
 * they were last all current (the runtime's instance epoch): freeing an
 * unrelated instance leaves the replays running; reallocating the exec's
 * own makes this and every later replay stale. */
Test(replay, an_unrelated_free_keeps_replays_running_a_realloc_stales_them) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "flag", flag_task);
  rp_inst x, other;
  rp_rect r = rp_rect_1d(0, 3);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &other));
  int id = 1;
  rp_graph *g = flag_graph(rt, t, x, &id, NULL);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  for (int i = 0; i < 3; i++) {
    atomic_store(&flag_ran[1], 0);
    if (i == 1)
      RP_CHECK(rp_instance_free(rt, other)); /* moves the epoch */
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    cr_assert_eq(atomic_load(&flag_ran[1]), 1, "replay %d ran", i);
  }
  RP_CHECK(rp_instance_realloc(rt, &x));
  for (int i = 0; i < 3; i++) {
    atomic_store(&flag_ran[1], 0);
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_EXPECT(rp_event_wait(rt, done, -1), RP_ESTALE);
    rp_event_release(rt, done);
    cr_assert_eq(atomic_load(&flag_ran[1]), 0, "stale replay %d ran", i);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* ---- capture errors, builder, validation ---- */

static char other_port_detail[256];

static char other_launch_detail[512];
static void *other_thread_launch(void *arg) {
  rp_runtime *rt = arg;
  rp_event pre; /* a port call from this thread: not its capture either */
  if (rp_capture_precondition(rt, "x", &pre, NULL) != RP_ECAPTURE)
    return (void *)(intptr_t)RP_OK;
  snprintf(other_port_detail, sizeof other_port_detail, "%s",
           rp_error_detail());
  rp_status st =
      rp_launch_task(rt, &(rp_launch){.task = 0, .proc = RP_PROC_ANY}, NULL);
  snprintf(other_launch_detail, sizeof other_launch_detail, "%s",
           rp_error_detail());
  return (void *)(intptr_t)st;
}

Test(replay, capture_misuse_gets_clear_errors) {
  rp_runtime *rt = th_cpu_runtime(1);
  th_task(rt, "empty", empty_task);
  rp_graph *g = NULL;
  RP_EXPECT(rp_capture_end(rt, &g), RP_ECAPTURE);
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_EXPECT(rp_capture_begin(rt, NULL), RP_ECAPTURE); /* nested */
  pthread_t th;
  pthread_create(&th, NULL, other_thread_launch, rt);
  void *res;
  pthread_join(th, &res);
  cr_assert_eq((rp_status)(intptr_t)res, RP_ECAPTURE,
               "a launch from another thread during capture");
  cr_assert(strstr(other_port_detail,
                   "rp_capture_precondition: no capture is open on this "
                   "thread (another thread is capturing on this runtime)"),
            "%s", other_port_detail);
  /* each detail names the call that failed */
  cr_assert(strstr(other_launch_detail, "rp_launch_task: another thread is "
                                        "capturing on this runtime"),
            "%s", other_launch_detail);
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_EXPECT(
      rp_launch_task(
          rt, &(rp_launch){.task = 0, .proc = RP_PROC_ANY, .wait = e}, NULL),
      RP_ECAPTURE); /* eager events cannot be recorded */
  cr_assert(strstr(rp_error_detail(), "rp_launch_task: event "), "%s",
            rp_error_detail());
  rp_event ref;
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = 0, .proc = RP_PROC_ANY}, &ref));
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  /* a captured reference is useless outside its capture */
  RP_EXPECT(
      rp_launch_task(
          rt, &(rp_launch){.task = 0, .proc = RP_PROC_ANY, .wait = ref}, NULL),
      RP_ECAPTURE);
  RP_EXPECT(rp_capture_precondition(rt, "x", &e, NULL), RP_ECAPTURE);
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_abort(rt));
  RP_EXPECT(rp_capture_abort(rt), RP_ECAPTURE);
  rp_event_trigger(rt, e);
  rp_event_release(rt, e);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* What a second thread gets while the first one's capture is open. */
typedef struct second_thread {
  rp_runtime *rt;
  rp_status begin, end, abort_, pre;
  char detail[256];
} second_thread;

static void *second_thread_capture(void *arg) {
  second_thread *st = arg;
  st->begin = rp_capture_begin(st->rt, NULL);
  snprintf(st->detail, sizeof st->detail, "%s", rp_error_detail());
  rp_graph *g = NULL;
  st->end = rp_capture_end(st->rt, &g);
  if (st->end == RP_OK)
    rp_graph_destroy(g);
  st->abort_ = rp_capture_abort(st->rt);
  rp_event e;
  st->pre = rp_capture_precondition(st->rt, "other", &e, NULL);
  return NULL;
}

Test(replay, capture_begin_from_a_second_thread_fails_and_leaves_the_first) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "empty", empty_task);
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event a, b;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, &a));
  second_thread st = {.rt = rt};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, second_thread_capture, &st), 0);
  pthread_join(th, NULL);
  cr_assert_eq(st.begin, RP_ECAPTURE, "begin from a second thread: %s",
               rp_status_name(st.begin));
  cr_assert(strstr(st.detail, "capture") != NULL, "detail: '%s'", st.detail);
  /* it has no capture of its own to end or abort, and cannot touch ours */
  cr_assert_eq(st.end, RP_ECAPTURE);
  cr_assert_eq(st.abort_, RP_ECAPTURE);
  cr_assert_eq(st.pre, RP_ECAPTURE);
  /* the first capture goes on as if nothing happened */
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0, .wait = a}, &b));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2);
  cr_assert_eq(rp_graph_precondition_count(g), 0);
  cr_assert(rp_graph_depends(g, 0, 1));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  /* once it ended, the second thread may capture */
  pthread_create(&th, NULL, second_thread_capture, &st);
  pthread_join(th, NULL);
  cr_assert_eq(st.begin, RP_OK, "%s", st.detail);
  cr_assert_eq(st.end, RP_OK, "it ended its own capture");
  th_destroy(rt);
}

/* The same step, recorded and built: same ops, same transitive deps. */
Test(replay, capture_and_builder_make_equivalent_graphs) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_inst x, y;
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &y));
  rp_access s0[] = {{x, RP_WRITE, 0}};
  rp_access s1[] = {{x, RP_READ, 0}, {y, RP_WRITE, 0}};
  rp_access s2[] = {{x, RP_READ, 0}};
  rp_access s3[] = {{y, RP_REDUCE, RP_REDOP_SUM}};
  rp_access s4[] = {{y, RP_REDUCE, RP_REDOP_SUM}};
  rp_access s5[] = {{x, RP_RW, 0}, {y, RP_READ, 0}};
  const rp_access *steps[] = {s0, s1, s2, s3, s4, s5};
  uint32_t ns[] = {1, 2, 1, 1, 1, 2};
  RP_CHECK(rp_capture_begin(rt, NULL));
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_launch_task(rt,
                            &(rp_launch){.task = t,
                                         .proc = RP_PROC_ANY,
                                         .accesses = steps[i],
                                         .naccess = ns[i]},
                            NULL));
  rp_graph *gc;
  RP_CHECK(rp_capture_end(rt, &gc));
  rp_graph *gb;
  RP_CHECK(rp_graph_create(rt, &gb));
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_graph_add_task(gb,
                               &(rp_launch){.task = t,
                                            .proc = RP_PROC_ANY,
                                            .accesses = steps[i],
                                            .naccess = ns[i]},
                               NULL));
  int edges[][2] = {{0, 1}, {0, 2}, {1, 3}, {1, 4}, {2, 5}, {3, 5}, {4, 5}};
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
    RP_CHECK(rp_graph_add_edge(gb, edges[i][0], edges[i][1]));
  cr_assert_eq(rp_graph_op_count(gc), rp_graph_op_count(gb));
  for (rp_op_id a = 0; a < 6; a++)
    for (rp_op_id b = 0; b < 6; b++)
      cr_assert_eq(rp_graph_depends(gc, a, b), rp_graph_depends(gb, a, b),
                   "depends(%u, %u)", a, b);
  cr_assert(!rp_graph_depends(gc, 3, 4), "reductions commute");
  RP_CHECK(rp_graph_destroy(gc));
  RP_CHECK(rp_graph_destroy(gb));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}

Test(replay, validation_names_the_problem_and_leaves_the_graph_fixable) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b, c;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &a));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 1}, &b));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &c));
  RP_CHECK(rp_graph_add_edge(g, a, b));
  RP_CHECK(rp_graph_add_edge(g, b, c));
  RP_CHECK(rp_graph_add_edge(g, c, a));
  rp_exec *ex = NULL;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ECYCLE);
  cr_assert_null(ex);
  const char *d = rp_error_detail();
  cr_assert(strstr(d, "op 0") && strstr(d, "op 1") && strstr(d, "op 2"),
            "cycle detail names its ops: %s", d);
  cr_assert_eq(rp_graph_op_count(g), 3, "graph unchanged");
  cr_assert_eq(rp_graph_edge_count(g), 3);
  RP_CHECK(rp_graph_remove_edge(g, c, a));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_destroy(ex));
  /* ports: declared but never bound */
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "in", &p));
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_EPORT);
  cr_assert(strstr(rp_error_detail(), "in") != NULL);
  RP_EXPECT(rp_graph_add_precondition(g, "in", &p), RP_EPORT); /* twice */
  RP_CHECK(rp_graph_bind_precondition(g, p, a));
  RP_EXPECT(rp_graph_bind_precondition(g, p, a), RP_EPORT);
  RP_EXPECT(rp_graph_bind_precondition(g, 9, a), RP_EPORT);
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_destroy(ex));
  /* bad ids */
  RP_EXPECT(rp_graph_add_edge(g, a, 99), RP_EINVAL);
  RP_EXPECT(rp_graph_add_task(g, &(rp_launch){.task = 42, .proc = 0}, NULL),
            RP_ENOTASK);
  RP_EXPECT(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 9}, NULL),
            RP_EPROC);
  RP_EXPECT(rp_graph_add_interp(g, a, &(rp_interp){0, 0, 4}), RP_ERANGE);
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A port's duplicate binds are refused whatever the order of the binds
 * (an op above every op bound so far skips the search; one below it
 * does not), and each port keeps exactly the ops it was given. */
Test(replay, a_port_refuses_a_duplicate_bind_in_any_order) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op[6];
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &op[i]));
  rp_port_id p, q;
  RP_CHECK(rp_graph_add_precondition(g, "in", &p));
  RP_CHECK(rp_graph_add_postcondition(g, "out", &q));
  static const int order[] = {3, 1, 5, 0};
  for (int k = 0; k < 4; k++) {
    RP_CHECK(rp_graph_bind_precondition(g, p, op[order[k]]));
    RP_CHECK(rp_graph_bind_postcondition(g, q, op[order[3 - k]]));
  }
  for (int k = 0; k < 4; k++) { /* the largest, one below it, the smallest */
    RP_EXPECT(rp_graph_bind_precondition(g, p, op[order[k]]), RP_EPORT);
    cr_assert(strstr(rp_error_detail(), "already bound"), "%s",
              rp_error_detail());
    RP_EXPECT(rp_graph_bind_postcondition(g, q, op[order[k]]), RP_EPORT);
  }
  RP_CHECK(rp_graph_bind_precondition(g, p, op[2])); /* new, below the max */
  RP_CHECK(rp_graph_bind_postcondition(g, q, op[4]));
  RP_EXPECT(rp_graph_bind_precondition(g, p, op[2]), RP_EPORT);
  RP_EXPECT(rp_graph_bind_postcondition(g, q, op[4]), RP_EPORT);
  rp_op_id got[8];
  uint32_t n = 0;
  RP_CHECK(rp_graph_postcondition_ops(g, q, got, 8, &n));
  static const int want[] = {0, 5, 1, 3, 4}; /* binding order */
  cr_assert_eq(n, 5);
  for (uint32_t i = 0; i < n; i++)
    cr_assert_eq(got[i], op[want[i]], "op %u", i);
  RP_CHECK(rp_graph_validate(g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(replay, graph_and_exec_dumps_show_ops_and_schedules) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_inst x;
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &x));
  rp_graph *g = chain_graph(rt, t, x, 3);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_DOT));
  fclose(f);
  cr_assert(strstr(buf, "lane 0") || strstr(buf, "lane 1"), "%s", buf);
  cr_assert(strstr(buf, "empty") != NULL);
  cr_assert(strstr(buf, "digraph") != NULL);
  free(buf);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* ---- rp_exec_update_args ---- */

static rp_exec *g_update_ex; /* for the contract case below */

static rp_status store_task(rp_task_ctx *ctx) {
  const int64_t *v = rp_ctx_args(ctx, NULL);
  *(int64_t *)rp_ctx_ptr(ctx, 0) = *v;
  return RP_OK;
}

static rp_status update_inside_task(rp_task_ctx *ctx) {
  (void)ctx;
  int64_t v = 0;
  return rp_exec_update_args(g_update_ex, 0, &v, sizeof v, NULL);
}

Test(replay, update_args_replaces_recorded_args_for_later_replays) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "store", store_task);
  rp_task_id bad = th_task(rt, "update.inside", update_inside_task);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x, y;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &y));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  int64_t v = 5;
  rp_access acc = {x, RP_WRITE, RP_REDOP_NONE};
  rp_op_id op, cp;
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = RP_PROC_ANY,
                                          .accesses = &acc,
                                          .naccess = 1,
                                          .args = &v,
                                          .args_size = sizeof v},
                             &op));
  RP_CHECK(rp_graph_add_copy(g, &(rp_copy){.src = x, .dst = y}, &cp));
  RP_CHECK(rp_graph_add_edge(g, op, cp));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int64_t want = 5; want < 9; want++) {
    int reinst = -1;
    if (want > 5) {
      RP_CHECK(rp_exec_update_args(ex, op, &want, sizeof want, &reinst));
      cr_assert_eq(reinst, 0, "a CPU op is never re-instantiated");
    }
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
    int64_t got;
    RP_CHECK(rp_instance_read(rt, y, &got, sizeof got));
    cr_assert_eq(got, want);
  }
  /* bad input changes nothing */
  int64_t w = 42;
  RP_EXPECT(rp_exec_update_args(ex, op, &w, sizeof w - 1, NULL), RP_ESHAPE);
  RP_EXPECT(rp_exec_update_args(ex, cp, &w, sizeof w, NULL), RP_EINVAL);
  RP_EXPECT(rp_exec_update_args(ex, 9, &w, sizeof w, NULL), RP_EINVAL);
  RP_EXPECT(rp_exec_update_args(ex, op, NULL, sizeof w, NULL), RP_EINVAL);
  RP_EXPECT(rp_exec_update_args(NULL, op, &w, sizeof w, NULL), RP_EINVAL);
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  int64_t got;
  RP_CHECK(rp_instance_read(rt, y, &got, sizeof got));
  cr_assert_eq(got, 8, "a refused update changed the args");
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  /* from a task inside a replay: a contract violation */
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = bad, .proc = 0}, NULL));
  RP_CHECK(rp_instantiate(g, NULL, &g_update_ex));
  RP_CHECK(rp_replay(g_update_ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ECONTRACT);
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(g_update_ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}

/* ---- every backend: the GPU replay behaviours ----
 * Suite replay_backends, also built as test_replay_cuda (test/helpers.h):
 * ops of a "device" processor (the first GPU on CUDA, lowered onto CUDA
 * graphs; worker 1 on the CPU backend) and of CPU worker 0, with tasks that
 * have both variants and compute the same values (the GPU variants are
 * bench/probe_kernels.cuh's). Instances live in host memory the device
 * reaches (pinned on CUDA, system memory on the CPU backend), so results
 * are read through their pointers. */

/* The device processor of a runtime of TH_BACKEND with two CPU workers. */
static rp_proc dev_proc(const rp_runtime *rt) {
  return TH_ON_CPU ? 1 : th_backend_proc(rt);
}

static rp_mem host_mem(const rp_runtime *rt) {
  rp_mem m = 0; /* the CPU backend: system memory */
  if (!TH_ON_CPU)
    RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &m));
  return m;
}

/* The fold task: access 0 is the output (WRITE), 1.. the inputs (READ);
 * each instance is one int64. out = mix(... mix(seed, in0) ..., inN). */

typedef struct fargs {
  uint32_t id, pad; /* offsets 0, 4 */
  int64_t seed;     /* offset 8: interpolated per replay */
} fargs;

static rp_status fold_cpu(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  int64_t x = a->seed;
  for (uint32_t i = 1; i < rp_ctx_access_count(ctx); i++)
    x = rp_probe_mix(x, *(const int64_t *)rp_ctx_ptr(ctx, i));
  *(int64_t *)rp_ctx_ptr(ctx, 0) = x;
  return RP_OK;
}

#ifdef REPRISE_HAVE_CUDA
static const int64_t *in_ptr(rp_task_ctx *ctx, uint32_t i) {
  return i < rp_ctx_access_count(ctx) ? rp_ctx_ptr(ctx, i) : NULL;
}

/* Registered with RP_TASK_DEVICE_ARGS: reads the seed on the device. */
static rp_status fold_gpu_dev(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  const char *dev = rp_ctx_device_args(ctx);
  return rp_cuda_probe_fold(
      rp_ctx_ptr(ctx, 0), in_ptr(ctx, 1), in_ptr(ctx, 2), in_ptr(ctx, 3),
      a->seed, dev ? (const int64_t *)(dev + 8) : NULL, rp_ctx_stream(ctx));
}

/* Reads the seed at issue (by value): interpolated ops are issued op by
 * op. */
static rp_status fold_gpu_val(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  return rp_cuda_probe_fold(rp_ctx_ptr(ctx, 0), in_ptr(ctx, 1), in_ptr(ctx, 2),
                            in_ptr(ctx, 3), a->seed, NULL, rp_ctx_stream(ctx));
}
#define FOLD_GPU(fn) fn
#else
#define FOLD_GPU(fn) NULL
#endif

typedef struct folds {
  rp_task_id dev, val;
} folds;

static folds reg_fold(rp_runtime *rt) {
  folds t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "fold.dev",
                      .cpu_fn = fold_cpu,
                      .gpu_fn = FOLD_GPU(fold_gpu_dev),
                      .flags = RP_TASK_STREAM_ORDERED | RP_TASK_DEVICE_ARGS},
      &t.dev));
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "fold.val",
                                            .cpu_fn = fold_cpu,
                                            .gpu_fn = FOLD_GPU(fold_gpu_val),
                                            .flags = RP_TASK_STREAM_ORDERED},
                            &t.val));
  return t;
}

/* The log task: appends its id to a log in host memory: log[0] counts
 * entries, entry i is log[1 + i] (entries beyond cap are counted but not
 * stored). */
typedef struct largs {
  int32_t *log;
  uint32_t cap;
  int32_t id;
} largs;

static rp_status log_cpu(rp_task_ctx *ctx) {
  const largs *a = rp_ctx_args(ctx, NULL);
  int32_t i = __atomic_fetch_add(&a->log[0], 1, __ATOMIC_RELAXED);
  if ((uint32_t)i < a->cap)
    a->log[1 + i] = a->id;
  return RP_OK;
}

#ifdef REPRISE_HAVE_CUDA
static rp_status log_gpu(rp_task_ctx *ctx) {
  const largs *a = rp_ctx_args(ctx, NULL);
  return rp_cuda_probe_log(a->log, a->cap, a->id, rp_ctx_stream(ctx));
}
#define LOG_GPU log_gpu
#else
#define LOG_GPU NULL
#endif

static rp_task_id reg_log(rp_runtime *rt) {
  rp_task_id t;
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "log",
                                            .cpu_fn = log_cpu,
                                            .gpu_fn = LOG_GPU,
                                            .flags = RP_TASK_STREAM_ORDERED},
                            &t));
  return t;
}

#define LOGCAP 512

static rp_op_id add_log(rp_graph *g, rp_task_id t, rp_proc p, int32_t *log,
                        int32_t id) {
  largs a = {log, LOGCAP, id};
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = p, .args = &a, .args_size = sizeof a},
      &op));
  return op;
}

/* A source, four branches of 20 (one capture stream each on CUDA), a
 * sink, all on the device processor: every replay logs the source first,
 * each branch in order, the sink last. */
Test(replay_backends, kernels_log_a_fork_join_in_dependency_order) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 2);
  rp_task_id t = reg_log(rt);
  rp_proc dev = dev_proc(rt);
  rp_rect r = rp_rect_1d(0, LOGCAP);
  rp_inst li;
  RP_CHECK(rp_instance_create(rt, host_mem(rt), RP_I32, &r, NULL, &li));
  int32_t *log = rp_instance_ptr(rt, li);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id src = add_log(g, t, dev, log, 0), sink;
  rp_op_id last[4];
  for (int b = 0; b < 4; b++) {
    last[b] = src;
    for (int i = 0; i < 20; i++) {
      rp_op_id op = add_log(g, t, dev, log, 1 + b * 100 + i);
      RP_CHECK(rp_graph_add_edge(g, last[b], op));
      last[b] = op;
    }
  }
  sink = add_log(g, t, dev, log, 999);
  for (int b = 0; b < 4; b++)
    RP_CHECK(rp_graph_add_edge(g, last[b], sink));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int rep = 0; rep < 20; rep++) {
    memset(log, 0, sizeof(int32_t) * (LOGCAP + 1));
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
    cr_assert_eq(log[0], 82, "replay %d: %d entries", rep, log[0]);
    cr_assert_eq(log[1], 0, "replay %d: source not first", rep);
    cr_assert_eq(log[82], 999, "replay %d: sink not last", rep);
    int next[4] = {0, 0, 0, 0};
    for (int i = 2; i < 82; i++) {
      int b = (log[i] - 1) / 100, k = (log[i] - 1) % 100;
      cr_assert(b >= 0 && b < 4, "replay %d: bad id %d", rep, log[i]);
      cr_assert_eq(k, next[b]++, "replay %d: branch %d out of order", rep, b);
    }
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, li));
  th_destroy(rt);
}

/* Preconditions: gated work waits, the rest runs ahead (on CUDA: device
 * work behind a port is not even issued). */
Test(replay_backends, precondition_gates_device_work_and_the_rest_runs_ahead) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 2);
  folds t = reg_fold(rt);
  rp_proc dev = dev_proc(rt);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, host_mem(rt), RP_I64, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, host_mem(rt), RP_I64, &r, NULL, &b));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  fargs fa = {0, 0, 11}, fb = {1, 0, 22};
  rp_access acca = {a, RP_WRITE, RP_REDOP_NONE},
            accb = {b, RP_WRITE, RP_REDOP_NONE};
  rp_op_id opa, opb;
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t.dev,
                                          .proc = dev,
                                          .accesses = &acca,
                                          .naccess = 1,
                                          .args = &fa,
                                          .args_size = sizeof fa},
                             &opa));
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t.dev,
                                          .proc = dev,
                                          .accesses = &accb,
                                          .naccess = 1,
                                          .args = &fb,
                                          .args_size = sizeof fb},
                             &opb));
  rp_port_id pin, pout;
  RP_CHECK(rp_graph_add_precondition(g, "in", &pin));
  RP_CHECK(rp_graph_bind_precondition(g, pin, opa));
  RP_CHECK(rp_graph_add_postcondition(g, "b", &pout));
  RP_CHECK(rp_graph_bind_postcondition(g, pout, opb));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  int64_t *pa = rp_instance_ptr(rt, a), *pb = rp_instance_ptr(rt, b);
  for (int rep = 0; rep < 3; rep++) {
    *pa = *pb = 0;
    rp_event pre, post, done;
    RP_CHECK(rp_event_create(rt, &pre));
    RP_CHECK(rp_replay(
        ex,
        &(rp_replay_args){.pre = &pre, .npre = 1, .post = &post, .npost = 1},
        &done));
    /* b does not depend on the port: it completes while the port is
     * pending; a must not even have been issued */
    RP_EXPECT(rp_event_wait(rt, post, 10ll * 1000 * 1000 * 1000), RP_OK);
    cr_assert_eq(*pb, 22, "replay %d: independent op did not run ahead", rep);
    usleep(20000);
    cr_assert_eq(*pa, 0, "replay %d: gated op ran before its port", rep);
    RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
    RP_CHECK(rp_event_trigger(rt, pre));
    RP_CHECK(rp_event_wait(rt, done, -1));
    cr_assert_eq(*pa, 11, "replay %d: gated op result", rep);
    cr_assert_eq(*pb, 22);
    rp_event_release(rt, pre);
    rp_event_release(rt, post);
    rp_event_release(rt, done);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* A small mixed pipeline: x0 = fold(seed0) on CPU worker 0, x1 =
 * fold(seed1, x0) on the device (device args), x2 = fold(seed2, x1) on
 * worker 0, x3 = fold(seed3, x2) on the device (by value: on CUDA issued
 * op by op). Seeds interpolated from args[0..3]. */
typedef struct mpipe {
  rp_runtime *rt;
  folds t;
  rp_inst x[4];
  rp_graph *g;
} mpipe;

static void pipe_init(mpipe *p) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 2);
  p->rt = rt;
  p->t = reg_fold(rt);
  rp_rect r = rp_rect_1d(0, 0);
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_create(rt, host_mem(rt), RP_I64, &r, NULL, &p->x[i]));
  RP_CHECK(rp_capture_begin(rt, NULL));
  for (uint32_t k = 0; k < 4; k++) {
    fargs a = {k, 0, 0};
    rp_access acc[2] = {{p->x[k], RP_WRITE, RP_REDOP_NONE},
                        {k ? p->x[k - 1] : p->x[0], RP_READ, RP_REDOP_NONE}};
    rp_interp ip = {8 * k, 8, 8};
    rp_launch l = {.task = k == 3 ? p->t.val : p->t.dev,
                   .proc = k % 2 ? dev_proc(rt) : 0,
                   .accesses = acc,
                   .naccess = k ? 2 : 1,
                   .args = &a,
                   .args_size = sizeof a,
                   .interps = &ip,
                   .ninterp = 1};
    RP_CHECK(rp_launch_task(rt, &l, NULL));
  }
  RP_CHECK(rp_capture_end(rt, &p->g));
}

static int64_t pipe_expect(const int64_t *seeds) {
  int64_t x = seeds[0];
  for (int k = 1; k < 4; k++)
    x = rp_probe_mix(seeds[k], x);
  return x;
}

static void pipe_fini(mpipe *p) {
  RP_CHECK(rp_graph_destroy(p->g));
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_free(p->rt, p->x[i]));
  th_destroy(p->rt);
}

Test(replay_backends, destroy_waits_for_replays_and_callbacks_in_flight) {
  mpipe p;
  pipe_init(&p);
  for (int round = 0; round < 20; round++) {
    rp_exec *ex;
    RP_CHECK(rp_instantiate(p.g, &(rp_exec_opts){.max_inflight = 16}, &ex));
    rp_event done[16];
    int64_t s[4] = {round, 1, 2, 3};
    for (int i = 0; i < 16; i++)
      RP_CHECK(rp_replay(
          ex, &(rp_replay_args){.args = s, .args_size = sizeof s}, &done[i]));
    RP_CHECK(rp_exec_destroy(ex)); /* replays and host callbacks pending */
    for (int i = 0; i < 16; i++) {
      RP_EXPECT(rp_event_query(p.rt, done[i]), RP_OK);
      rp_event_release(p.rt, done[i]);
    }
    int64_t v;
    RP_CHECK(rp_instance_read(p.rt, p.x[3], &v, sizeof v));
    cr_assert_eq(v, pipe_expect(s), "%s round %d", TH_BACKEND_NAME, round);
  }
  pipe_fini(&p);
}

Test(replay_backends, soak_20k_replays_stay_correct_without_host_allocation,
     .timeout = 900) {
  mpipe p;
  pipe_init(&p);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(p.g, NULL, &ex));
  enum { N = 20000 };
  uint64_t a0 = 0;
  int64_t s[4];
  for (int r = 0; r < N; r++) {
    if (r == 100)
      a0 = rp_thread_allocated_bytes();
    s[0] = r, s[1] = -r, s[2] = r * 3, s[3] = 7;
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = s, .args_size = sizeof s},
                       NULL));
  }
  uint64_t a1 = rp_thread_allocated_bytes();
  RP_CHECK(rp_exec_destroy(ex)); /* waits for all of them */
  if (a0 != UINT64_MAX)
    cr_assert_eq(a1, a0, "%s: rp_replay allocated %llu bytes", TH_BACKEND_NAME,
                 (unsigned long long)(a1 - a0));
  int64_t v;
  RP_CHECK(rp_instance_read(p.rt, p.x[3], &v, sizeof v));
  cr_assert_eq(v, pipe_expect(s));
  pipe_fini(&p);
}

Test(replay_backends, stale_instance_fails_the_replay_and_runs_nothing) {
  mpipe p;
  pipe_init(&p);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(p.g, NULL, &ex));
  int64_t s[4] = {1, 2, 3, 4};
  rp_event done;
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = s, .args_size = sizeof s},
                     &done));
  RP_CHECK(rp_event_wait(p.rt, done, -1));
  rp_event_release(p.rt, done);
  RP_CHECK(rp_instance_realloc(p.rt, &p.x[1]));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = s, .args_size = sizeof s},
                     &done));
  RP_EXPECT(rp_event_wait(p.rt, done, -1), RP_ESTALE);
  rp_event_release(p.rt, done);
  rp_exec_stats st;
  RP_CHECK(rp_exec_stats_get(ex, &st));
  cr_assert_eq(st.ops_run, 4u, "the stale replay ran ops");
  RP_CHECK(rp_exec_destroy(ex));
  pipe_fini(&p);
}

/* rp_exec_update_args on an op of the device (on CUDA a graph node,
 * updated in place or by re-instantiating). */
Test(replay_backends, update_args_changes_an_op_in_place_or_reinstantiates) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 2);
  folds t = reg_fold(rt);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, host_mem(rt), RP_I64, &r, NULL, &x));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  fargs a = {0, 0, 5};
  rp_access acc = {x, RP_WRITE, RP_REDOP_NONE};
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t.val,
                                          .proc = dev_proc(rt),
                                          .accesses = &acc,
                                          .naccess = 1,
                                          .args = &a,
                                          .args_size = sizeof a},
                             &op));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  int64_t *px = rp_instance_ptr(rt, x);
  for (int64_t seed = 5; seed < 10; seed++) {
    if (seed > 5) {
      a.seed = seed;
      int reinst = -1;
      RP_CHECK(rp_exec_update_args(ex, op, &a, sizeof a, &reinst));
      cr_assert(reinst == 0 || reinst == 1);
    }
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    cr_assert_eq(*px, seed, "the op still runs the old args");
  }
  RP_EXPECT(rp_exec_update_args(ex, op, &a, sizeof a - 1, NULL), RP_ESHAPE);
  RP_EXPECT(rp_exec_update_args(ex, 7, &a, sizeof a, NULL), RP_EINVAL);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* ---- eager work and replays that wait on each other ---- */

static rp_status ew_load(rp_task_ctx *ctx) {
  float *x = rp_ctx_ptr(ctx, 0);
  x[0] += 1;
  return RP_OK;
}

static rp_status ew_step(rp_task_ctx *ctx) {
  const float *x = rp_ctx_ptr(ctx, 0);
  float *w = rp_ctx_ptr(ctx, 1);
  w[0] += x[0];
  return RP_OK;
}

static rp_inst ew_scalar(rp_runtime *rt) {
  rp_inst i;
  rp_rect r = {.dim = 1, .lo = {0}, .hi = {0}};
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &i));
  float z = 0;
  RP_CHECK(rp_instance_write(rt, i, &z, sizeof z));
  return i;
}

/* An eager task of t on proc p with one access (i, priv), after wait. */
static void ew_launch(rp_runtime *rt, rp_task_id t, rp_proc p, rp_inst i,
                      rp_privilege priv, rp_event wait, rp_event *done) {
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){.task = t,
                   .proc = p,
                   .accesses = &(rp_access){i, priv, RP_REDOP_NONE},
                   .naccess = 1,
                   .wait = wait},
      done));
}

/* The pattern reprise.h gives for ordering eager work and replays: an
 * eager op's done event as a replay's precondition, the next eager op
 * waiting for that replay's done event. A worker that reached the
 * replay's precondition (or waited there for another lane) used to block
 * without running the eager op queued to it: the loop hung within a few
 * iterations, on 1, 2 and 4 workers. Now each worker runs its own queue
 * while it waits inside a replay. */
static void eager_op_as_precondition(void) {
  for (unsigned workers = 1; workers <= 4; workers *= 2) {
    rp_runtime *rt = th_cpu_runtime(workers);
    rp_task_id tl, ts;
    RP_CHECK(rp_task_register(
        rt, &(rp_task_desc){.name = "ew.load", .cpu_fn = ew_load}, &tl));
    RP_CHECK(rp_task_register(
        rt, &(rp_task_desc){.name = "ew.step", .cpu_fn = ew_step}, &ts));
    rp_inst x = ew_scalar(rt), w[4];
    rp_graph *g;
    rp_event batch;
    RP_CHECK(rp_capture_begin(rt, NULL));
    RP_CHECK(rp_capture_precondition(rt, "batch", &batch, NULL));
    for (unsigned p = 0; p < workers; p++) { /* a lane on every worker */
      w[p] = ew_scalar(rt);
      rp_access acc[] = {{x, RP_READ, RP_REDOP_NONE},
                         {w[p], RP_RW, RP_REDOP_NONE}};
      RP_CHECK(rp_launch_task(rt,
                              &(rp_launch){.task = ts,
                                           .proc = p,
                                           .accesses = acc,
                                           .naccess = 2,
                                           .wait = batch},
                              NULL));
    }
    RP_CHECK(rp_capture_end(rt, &g));
    rp_exec *ex;
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    /* one replay gated on an eager op that becomes ready only after the
     * workers reached the gate */
    rp_event u, ld, done;
    RP_CHECK(rp_event_create(rt, &u));
    ew_launch(rt, tl, RP_PROC_ANY, x, RP_RW, u, &ld);
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &ld, .npre = 1}, &done));
    usleep(20000);
    /* meanwhile an unrelated eager op on another instance runs */
    rp_inst y = ew_scalar(rt);
    rp_event other;
    ew_launch(rt, tl, RP_PROC_ANY, y, RP_RW, RP_NO_EVENT, &other);
    cr_assert_eq(rp_event_wait(rt, other, 10000000000ll), RP_OK,
                 "%u workers: an eager op stalled behind a waiting replay",
                 workers);
    RP_CHECK(rp_event_trigger(rt, u));
    cr_assert_eq(rp_event_wait(rt, done, 10000000000ll), RP_OK,
                 "%u workers: the replay gated on an eager op never ran",
                 workers);
    RP_CHECK(rp_event_release(rt, other));
    RP_CHECK(rp_event_release(rt, ld));
    RP_CHECK(rp_event_release(rt, u));
    /* the loop: load (after the previous step), step (after the load) */
    rp_event prev = done;
    for (int it = 0; it < 100; it++) {
      ew_launch(rt, tl, RP_PROC_ANY, x, RP_RW, prev, &ld);
      rp_status st;
      while ((st = rp_replay(ex, &(rp_replay_args){.pre = &ld, .npre = 1},
                             &done)) == RP_EBUSY)
        cr_assert_eq(rp_event_wait(rt, prev, 10000000000ll), RP_OK,
                     "%u workers: iteration %d hangs", workers, it);
      RP_CHECK(st);
      RP_CHECK(rp_event_release(rt, ld));
      RP_CHECK(rp_event_release(rt, prev));
      prev = done;
    }
    cr_assert_eq(rp_event_wait(rt, prev, 10000000000ll), RP_OK,
                 "%u workers: the last step never ran", workers);
    RP_CHECK(rp_event_release(rt, prev));
    /* x went 1, 2, ..., 101; every step added it to its w */
    for (unsigned p = 0; p < workers; p++) {
      float v;
      RP_CHECK(rp_instance_read(rt, w[p], &v, sizeof v));
      cr_assert_eq(v, 5151.0f, "%u workers, lane %u: %g", workers, p,
                   (double)v);
    }
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
    th_destroy(rt);
  }
}

Test(replay, eager_op_as_precondition_runs_while_the_replay_waits,
     .timeout = 120) {
  eager_op_as_precondition();
}

static rp_event ew_done; /* the replay the eager tasks look at */
static rp_runtime *ew_rt;
static atomic_uint ew_before;  /* eager tasks that started before it ended */
static atomic_uint ew_started; /* lane 0 began the replay */
static atomic_uint ew_release; /* lane 1 may finish */

static rp_status ew_mark(rp_task_ctx *ctx) {
  (void)ctx;
  atomic_store(&ew_started, 1);
  return RP_OK;
}

static rp_status ew_hold(rp_task_ctx *ctx) {
  (void)ctx;
  for (int i = 0; i < 10000 && !atomic_load(&ew_release); i++)
    usleep(1000);
  return RP_OK;
}

static rp_status ew_noop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_status ew_slow_eager(rp_task_ctx *ctx) {
  (void)ctx;
  if (rp_event_query(ew_rt, ew_done) == RP_EAGAIN)
    atomic_fetch_add(&ew_before, 1);
  usleep(30000);
  return RP_OK;
}

/* A worker waiting for another lane runs its queued eager work one item
 * at a time and goes back to its lane once the wait is over: of ten 30 ms
 * eager tasks queued to worker 0 while its lane waits for worker 1's, at
 * least one runs during the 40 ms wait, and they hold the replay for
 * about one or two of them once worker 1's lane is let go, not all ten
 * (the wait used to drain the whole queue before looking at the lane
 * again). */
Test(replay, a_waiting_lane_serves_eager_work_one_item_at_a_time,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  ew_rt = rt;
  rp_task_id mark, hold, noop, eager;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "ew.mark", .cpu_fn = ew_mark}, &mark));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "ew.hold", .cpu_fn = ew_hold}, &hold));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "ew.noop", .cpu_fn = ew_noop}, &noop));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "ew.eager", .cpu_fn = ew_slow_eager},
      &eager));
  rp_inst a = ew_scalar(rt), c = ew_scalar(rt);
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  ew_launch(rt, hold, 1, a, RP_RW, RP_NO_EVENT, NULL); /* worker 1: held */
  ew_launch(rt, mark, 0, c, RP_RW, RP_NO_EVENT,
            NULL); /* worker 0: started, then */
  ew_launch(rt, noop, 0, a, RP_READ, RP_NO_EVENT,
            NULL); /* waits for worker 1 */
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  atomic_store(&ew_before, 0);
  atomic_store(&ew_started, 0);
  atomic_store(&ew_release, 0);
  RP_CHECK(rp_replay(ex, NULL, &ew_done));
  for (int i = 0; i < 10000 && !atomic_load(&ew_started); i++)
    usleep(1000);
  cr_assert(atomic_load(&ew_started), "lane 0 never started");
  usleep(5000); /* lane 0 waits for lane 1 by now */
  rp_event ev[10];
  rp_inst own[10]; /* one each: all ten are queued at once */
  for (int i = 0; i < 10; i++) {
    own[i] = ew_scalar(rt);
    ew_launch(rt, eager, 0, own[i], RP_RW, RP_NO_EVENT, &ev[i]);
  }
  usleep(40000);
  atomic_store(&ew_release, 1);
  cr_assert_eq(rp_event_wait(rt, ew_done, 10000000000ll), RP_OK);
  for (int i = 0; i < 10; i++) {
    cr_assert_eq(rp_event_wait(rt, ev[i], 10000000000ll), RP_OK);
    RP_CHECK(rp_event_release(rt, ev[i]));
  }
  unsigned before = atomic_load(&ew_before);
  cr_assert_geq(before, 1u,
                "no eager task ran while worker 0's lane waited (40 ms)");
  cr_assert_lt(before, 10u, "all %u eager tasks ran inside the replay's wait",
               before);
  for (int i = 0; i < 10; i++)
    RP_CHECK(rp_instance_free(rt, own[i]));
  RP_CHECK(rp_event_release(rt, ew_done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* The deadlock through a wait for another lane: worker 1's lane is gated
 * at a precondition that is an eager op's done event, the eager op is
 * queued to worker 0, and worker 0's lane reads what worker 1's writes,
 * so worker 0 waits for worker 1's progress. Only worker 0 running its
 * queue from inside that wait lets the replay finish. */
static void lane_wait_runs_the_eager_op(void) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id noop;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "ew.noop", .cpu_fn = ew_noop}, &noop));
  rp_inst a = ew_scalar(rt), x = ew_scalar(rt);
  rp_graph *g;
  rp_event port;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_precondition(rt, "batch", &port, NULL));
  ew_launch(rt, noop, 1, a, RP_RW, port, NULL); /* worker 1: gated */
  ew_launch(rt, noop, 0, a, RP_READ, RP_NO_EVENT,
            NULL); /* worker 0: waits for worker 1 */
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int it = 0; it < 5; it++) {
    rp_event u, ld, done;
    RP_CHECK(rp_event_create(rt, &u));
    ew_launch(rt, noop, 0, x, RP_RW, u, &ld); /* queued to worker 0 at u */
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &ld, .npre = 1}, &done));
    usleep(20000); /* worker 0 in its lane wait, worker 1 at the gate */
    RP_CHECK(rp_event_trigger(rt, u));
    cr_assert_eq(rp_event_wait(rt, done, 10000000000ll), RP_OK,
                 "iteration %d: the replay waits for an eager op that its "
                 "waiting worker never ran",
                 it);
    RP_CHECK(rp_event_release(rt, done));
    RP_CHECK(rp_event_release(rt, ld));
    RP_CHECK(rp_event_release(rt, u));
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(replay, a_lane_waiting_for_another_lane_runs_the_eager_op_it_waits_for,
     .timeout = 120) {
  lane_wait_runs_the_eager_op();
}

/* The same waits on a kernel without futex_waitv (a worker then sleeps on
 * the word it waits for alone, an enqueue waking that word). */
extern int rp__futex_waitv_off;

Test(replay, waits_that_serve_eager_work_without_futex_waitv, .timeout = 120) {
  rp__futex_waitv_off = 1;
  lane_wait_runs_the_eager_op();
  eager_op_as_precondition();
}

static rp_status place_nop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* Placement's limits, on a model of a machine (instantiated, never run):
 * a graph of 129 ops of 4096 shards (528384 units) over 128 CPU lanes
 * needs more than 2^26 cells of lane knowledge, placement's limit; it is
 * refused (RP_ERANGE naming units and lanes), no exec handed out. */
Test(replay, units_times_lanes_past_placements_limit_are_refused) {
  rp_machine_desc md = {.cpus = 128};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&md, &rt));
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = place_nop}, &t));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 129; i++) {
    rp_op_id o;
    RP_CHECK(rp_graph_add_task(
        g, &(rp_launch){.task = t, .shards = RP_MAX_SHARDS}, &o));
  }
  rp_error_set(RP_EINVAL, "stale");
  rp_exec *ex = (rp_exec *)&md;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ERANGE);
  cr_assert_str_eq(rp_error_detail(), "rp_instantiate: placement: 528384 "
                                      "units x 128 lanes is too large");
  cr_assert_eq(ex, (rp_exec *)&md, "an exec was handed out");
  cr_assert_eq(rp_graph_op_count(g), 129u);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_runtime_destroy(rt));
}

/* The wrap-around dependencies of a graph whose writer of 4096 shards
 * follows 255 readers and a writer of 4096 shards each, as the next replay
 * sees them: 4096 x 256 x 4096 = 2^32 unit edges, more than an exec holds;
 * refused (RP_ERANGE naming the count), no exec handed out. */
Test(replay, wrap_around_unit_edges_past_the_limit_are_refused) {
  rp_machine_desc md = {.cpus = 1};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&md, &rt));
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = place_nop}, &t));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access w = {x, RP_WRITE, RP_REDOP_NONE}, rd = {x, RP_READ, RP_REDOP_NONE};
  for (int i = 0; i < 256; i++) {
    rp_op_id o;
    RP_CHECK(rp_graph_add_task(g,
                               &(rp_launch){.task = t,
                                            .shards = RP_MAX_SHARDS,
                                            .accesses = i ? &rd : &w,
                                            .naccess = 1},
                               &o));
  }
  rp_error_set(RP_EINVAL, "stale");
  rp_exec *ex = (rp_exec *)&md;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ERANGE);
  cr_assert_str_eq(rp_error_detail(), "rp_instantiate: instantiate: "
                                      "4294967296 wrap-around unit edges");
  cr_assert_eq(ex, (rp_exec *)&md, "an exec was handed out");
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_runtime_destroy(rt));
}
