/* Eager execution: dependencies inferred from declared accesses. */
#include "helpers.h"

/* Internal (capture/launch.c): the room of an instance's eager
 * dependence sets. */
uint32_t rp__eager_room(rp_runtime *rt, rp_inst inst);

#include <stdint.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXT 512

static atomic_uint seq;
static atomic_uint runs[MAXT];
static unsigned start_seq[MAXT], end_seq[MAXT];

typedef struct targs {
  uint32_t id;
  int32_t fail;     /* return this status */
  uint32_t partner; /* wait (bounded) until this task started, or ~0 */
  uint32_t linger;  /* with partner: a task that must not start before this
                       one ends; waits for it up to 200 ms, then ends */
} targs;

static atomic_int started[MAXT];

static rp_status log_task(rp_task_ctx *ctx) {
  const targs *a = rp_ctx_args(ctx, NULL);
  start_seq[a->id] = atomic_fetch_add(&seq, 1);
  atomic_store(&started[a->id], 1);
  atomic_fetch_add(&runs[a->id], 1);
  if (a->partner != ~0u && a->linger) {
    /* Room for a partner that must wait: started meanwhile, it started
     * before this task ended (its start_seq below this end_seq). */
    for (int ms = 0; ms < 200 && !atomic_load(&started[a->partner]); ms++)
      nanosleep(&(struct timespec){0, 1000000}, NULL);
  } else if (a->partner != ~0u) {
    /* Bounded wait for a partner that must be able to run concurrently. */
    uint64_t spins = 0;
    while (!atomic_load(&started[a->partner]))
      if (++spins > 2000000000ull)
        return RP_ETIMEDOUT;
  }
  end_seq[a->id] = atomic_fetch_add(&seq, 1);
  return (rp_status)a->fail;
}

static void reset_log(void) {
  atomic_store(&seq, 0);
  for (int i = 0; i < MAXT; i++) {
    atomic_store(&runs[i], 0);
    atomic_store(&started[i], 0);
  }
}

static rp_task_id register_log(rp_runtime *rt) {
  rp_task_id id;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "log", .cpu_fn = log_task}, &id));
  return id;
}

static rp_inst mk(rp_runtime *rt) {
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &i));
  return i;
}

static rp_status launch_linger(rp_runtime *rt, rp_task_id t, uint32_t id,
                               rp_proc proc, const rp_access *acc, uint32_t n,
                               int32_t fail, uint32_t partner, uint32_t linger,
                               rp_event *done) {
  targs a = {id, fail, partner, linger};
  rp_launch l = {.task = t,
                 .proc = proc,
                 .accesses = acc,
                 .naccess = n,
                 .args = &a,
                 .args_size = sizeof a};
  return rp_launch_task(rt, &l, done);
}

static rp_status launch(rp_runtime *rt, rp_task_id t, uint32_t id, rp_proc proc,
                        const rp_access *acc, uint32_t n, int32_t fail,
                        uint32_t partner, rp_event *done) {
  return launch_linger(rt, t, id, proc, acc, n, fail, partner, 0, done);
}

/* ---- the dependence cases one by one ---- */

static void ordered_pair(rp_privilege first, rp_privilege second) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt);
  rp_access a1 = {x, first, first == RP_REDUCE ? RP_REDOP_SUM : 0};
  rp_access a2 = {x, second, second == RP_REDUCE ? RP_REDOP_SUM : 0};
  rp_event e1, e2;
  /* different workers, so only the dependency can order them; the first
   * lingers for the second, so that a missing dependency shows as an
   * overlap rather than by chance */
  RP_CHECK(launch_linger(rt, t, 0, 0, &a1, 1, 0, 1, 1, &e1));
  RP_CHECK(launch(rt, t, 1, 1, &a2, 1, 0, ~0u, &e2));
  RP_CHECK(rp_event_wait(rt, e2, -1));
  RP_CHECK(rp_event_wait(rt, e1, -1));
  cr_assert_lt(end_seq[0], start_seq[1], "second started before first ended");
  rp_event_release(rt, e1);
  rp_event_release(rt, e2);
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

Test(eager, read_after_write_waits) {
  ordered_pair(RP_WRITE, RP_READ);
}
Test(eager, write_after_read_waits) {
  ordered_pair(RP_READ, RP_WRITE);
}
Test(eager, write_after_write_waits) {
  ordered_pair(RP_WRITE, RP_RW);
}
Test(eager, read_after_reduce_waits) {
  ordered_pair(RP_REDUCE, RP_READ);
}
Test(eager, reduce_after_read_waits) {
  ordered_pair(RP_READ, RP_REDUCE);
}

/* Two ops that must be allowed to overlap: each waits for the other to
 * start, so serializing them would time out. */
static void concurrent_pair(rp_privilege p) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt);
  rp_access a = {x, p, p == RP_REDUCE ? RP_REDOP_SUM : 0};
  rp_event e1, e2;
  RP_CHECK(launch(rt, t, 0, 0, &a, 1, 0, 1, &e1));
  RP_CHECK(launch(rt, t, 1, 1, &a, 1, 0, 0, &e2));
  RP_EXPECT(rp_event_wait(rt, e1, -1), RP_OK);
  RP_EXPECT(rp_event_wait(rt, e2, -1), RP_OK);
  rp_event_release(rt, e1);
  rp_event_release(rt, e2);
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

Test(eager, readers_run_concurrently, .timeout = 60) {
  concurrent_pair(RP_READ);
}
Test(eager, same_operator_reductions_commute, .timeout = 60) {
  concurrent_pair(RP_REDUCE);
}

/* A task's fold and a copy's SUM into one instance do not commute (a CPU
 * copy folds under the library's block locks, which a task's atomic adds
 * do not take): the second waits for the first, in either order, eagerly
 * and recorded; copies' folds still commute with copies'. */
static atomic_int hold_task;

static rp_status held_fold(rp_task_ctx *ctx) {
  float *x = rp_ctx_ptr(ctx, 0);
  uint64_t spins = 0;
  while (atomic_load(&hold_task))
    if (++spins > 4000000000ull)
      return RP_ETIMEDOUT;
  for (int i = 0; i < 4; i++)
    x[i] += 10.0f; /* nothing else folds meanwhile: the point of the test */
  return RP_OK;
}

Test(eager, a_task_fold_and_a_copy_fold_into_one_instance_are_ordered,
     .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "held_fold", .cpu_fn = held_fold}, &t));
  rp_inst x = mk(rt), one = mk(rt);
  float ones[4] = {1, 1, 1, 1}, zero[4] = {0}, got[4];
  RP_CHECK(rp_instance_write(rt, one, ones, sizeof ones));
  RP_CHECK(rp_instance_write(rt, x, zero, sizeof zero));
  rp_access red = {x, RP_REDUCE, RP_REDOP_SUM};
  rp_copy c = {.src = one, .dst = x, .redop = RP_REDOP_SUM};
  /* the task first, held: the copy must not fold before it ends */
  atomic_store(&hold_task, 1);
  rp_event te, ce;
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 0, .accesses = &red, .naccess = 1},
      &te));
  RP_CHECK(rp_launch_copy(rt, &c, &ce));
  RP_EXPECT(rp_event_wait(rt, ce, 50 * 1000000), RP_ETIMEDOUT);
  atomic_store(&hold_task, 0);
  RP_CHECK(rp_event_wait(rt, ce, -1));
  RP_CHECK(rp_event_wait(rt, te, -1));
  RP_CHECK(rp_instance_read(rt, x, got, sizeof got));
  for (int i = 0; i < 4; i++)
    cr_assert_eq(got[i], 11.0f, "x[%d] = %g", i, (double)got[i]);
  RP_CHECK(rp_event_release(rt, te));
  RP_CHECK(rp_event_release(rt, ce));
  /* the copy first, held by its wait event: the task must not start */
  rp_event gate;
  RP_CHECK(rp_event_create(rt, &gate));
  c.wait = gate;
  RP_CHECK(rp_launch_copy(rt, &c, &ce));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 1, .accesses = &red, .naccess = 1},
      &te));
  RP_EXPECT(rp_event_wait(rt, te, 50 * 1000000), RP_ETIMEDOUT);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, te, -1));
  RP_CHECK(rp_instance_read(rt, x, got, sizeof got));
  for (int i = 0; i < 4; i++)
    cr_assert_eq(got[i], 22.0f, "x[%d] = %g", i, (double)got[i]);
  RP_CHECK(rp_event_release(rt, te));
  RP_CHECK(rp_event_release(rt, ce));
  RP_CHECK(rp_event_release(rt, gate));
  /* recorded: an edge between the task's fold and each copy's, none
   * between the two copies' */
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 0, .accesses = &red, .naccess = 1},
      NULL));
  c.wait = (rp_event){0};
  RP_CHECK(rp_launch_copy(rt, &c, NULL));
  RP_CHECK(rp_launch_copy(rt, &c, NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 1, .accesses = &red, .naccess = 1},
      NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 4);
  cr_assert(rp_graph_depends(g, 0, 1) && rp_graph_depends(g, 0, 2),
            "a copy fold does not wait for the task fold before it");
  cr_assert(!rp_graph_depends(g, 1, 2) && !rp_graph_depends(g, 2, 1),
            "two copy folds were ordered");
  cr_assert(rp_graph_depends(g, 1, 3) && rp_graph_depends(g, 2, 3),
            "the task fold does not wait for the copy folds before it");
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, one));
  th_destroy(rt);
}

Test(eager, failing_task_poisons_exactly_its_dependents) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt), y = mk(rt), z = mk(rt);
  rp_access wx = {x, RP_WRITE, 0},
            rx_wy[2] = {{x, RP_READ, 0}, {y, RP_WRITE, 0}};
  rp_access ry = {y, RP_READ, 0}, wz = {z, RP_WRITE, 0};
  rp_event a, b, c, d;
  RP_CHECK(launch(rt, t, 0, RP_PROC_ANY, &wx, 1, RP_ETASK, ~0u, &a));
  RP_CHECK(launch(rt, t, 1, RP_PROC_ANY, rx_wy, 2, 0, ~0u, &b));
  RP_CHECK(launch(rt, t, 2, RP_PROC_ANY, &ry, 1, 0, ~0u, &c));
  RP_CHECK(launch(rt, t, 3, RP_PROC_ANY, &wz, 1, 0, ~0u, &d));
  RP_EXPECT(rp_event_wait(rt, a, -1), RP_ETASK);
  RP_EXPECT(rp_event_wait(rt, b, -1), RP_ETASK);
  RP_EXPECT(rp_event_wait(rt, c, -1), RP_ETASK);
  RP_EXPECT(rp_event_wait(rt, d, -1), RP_OK);
  cr_assert_eq(atomic_load(&runs[0]), 1);
  cr_assert_eq(atomic_load(&runs[1]), 0, "dependent ran");
  cr_assert_eq(atomic_load(&runs[2]), 0, "transitive dependent ran");
  cr_assert_eq(atomic_load(&runs[3]), 1, "independent op did not run");
  /* A reader launched after the failure completed still depends on the
   * failed write: it inherits the poison too. */
  rp_access rx = {x, RP_READ, 0};
  rp_event late;
  RP_CHECK(launch(rt, t, 5, RP_PROC_ANY, &rx, 1, 0, ~0u, &late));
  RP_EXPECT(rp_event_wait(rt, late, -1), RP_ETASK);
  cr_assert_eq(atomic_load(&runs[5]), 0, "late reader of a failed write ran");
  RP_CHECK(rp_event_release(rt, late));
  /* WAW on a poisoned writer also inherits the poison (it depends on it). */
  rp_event e;
  RP_CHECK(launch(rt, t, 4, RP_PROC_ANY, &wx, 1, 0, ~0u, &e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_ETASK);
  rp_event events[] = {a, b, c, d, e};
  for (int i = 0; i < 5; i++)
    RP_CHECK(rp_event_release(rt, events[i]));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  RP_CHECK(rp_instance_free(rt, z));
  th_destroy(rt);
}

/* A failed op poisons what it writes, not what it only read: an op that
 * overwrites an instance the failed op read (ordered after it, write after
 * read) runs, and so do later readers of what it wrote; an op reading what
 * the failed op wrote fails. The same through a reduction group opened
 * after the failed reader, and for a copy. */
Test(eager, a_failed_reader_does_not_poison_later_writers) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt), y = mk(rt), z = mk(rt);
  rp_access rx_wy[2] = {{x, RP_READ, 0}, {y, RP_WRITE, 0}};
  rp_access wx = {x, RP_WRITE, 0}, rx = {x, RP_READ, 0}, ry = {y, RP_READ, 0};
  rp_access sum_x = {x, RP_REDUCE, RP_REDOP_SUM};
  rp_event a, b, c, d, e, f;
  RP_CHECK(launch(rt, t, 0, RP_PROC_ANY, rx_wy, 2, RP_ETASK, ~0u, &a));
  RP_CHECK(launch(rt, t, 1, RP_PROC_ANY, &wx, 1, 0, ~0u, &b));
  RP_CHECK(launch(rt, t, 2, RP_PROC_ANY, &rx, 1, 0, ~0u, &c));
  RP_CHECK(launch(rt, t, 3, RP_PROC_ANY, &ry, 1, 0, ~0u, &d));
  RP_EXPECT(rp_event_wait(rt, a, -1), RP_ETASK);
  RP_CHECK(rp_event_wait(rt, b, -1));
  RP_CHECK(rp_event_wait(rt, c, -1));
  RP_EXPECT(rp_event_wait(rt, d, -1), RP_ETASK);
  cr_assert_eq(atomic_load(&runs[1]), 1, "the write after the read ran not");
  cr_assert_eq(atomic_load(&runs[2]), 1, "its reader did not run");
  cr_assert_eq(atomic_load(&runs[3]), 0, "a reader of the failed write ran");
  /* a failed reader, then a reduction group and a copy into x */
  RP_CHECK(launch(rt, t, 4, RP_PROC_ANY, rx_wy, 2, RP_ETASK, ~0u, &e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_ETASK);
  RP_CHECK(launch(rt, t, 5, RP_PROC_ANY, &sum_x, 1, 0, ~0u, &f));
  RP_CHECK(rp_event_wait(rt, f, -1));
  cr_assert_eq(atomic_load(&runs[5]), 1, "the fold after the read ran not");
  rp_event g, h;
  RP_CHECK(launch(rt, t, 6, RP_PROC_ANY, rx_wy, 2, RP_ETASK, ~0u, &g));
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = z, .dst = x}, &h));
  RP_EXPECT(rp_event_wait(rt, g, -1), RP_ETASK);
  RP_CHECK(rp_event_wait(rt, h, -1));
  rp_event events[] = {a, b, c, d, e, f, g, h};
  for (size_t i = 0; i < sizeof events / sizeof *events; i++)
    RP_CHECK(rp_event_release(rt, events[i]));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  RP_CHECK(rp_instance_free(rt, z));
  th_destroy(rt);
}

/* A fold joining a failed fold's reduction group does not wait for it, so
 * it runs; a reader after the group depends on both and fails. */
Test(eager, a_fold_joining_a_failed_folds_group_runs) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt);
  rp_access sum_x = {x, RP_REDUCE, RP_REDOP_SUM}, rx = {x, RP_READ, 0};
  rp_event a, b, c;
  RP_CHECK(launch(rt, t, 0, RP_PROC_ANY, &sum_x, 1, RP_ETASK, ~0u, &a));
  RP_EXPECT(rp_event_wait(rt, a, -1), RP_ETASK);
  RP_CHECK(launch(rt, t, 1, RP_PROC_ANY, &sum_x, 1, 0, ~0u, &b));
  RP_CHECK(rp_event_wait(rt, b, -1));
  RP_CHECK(launch(rt, t, 2, RP_PROC_ANY, &rx, 1, 0, ~0u, &c));
  RP_EXPECT(rp_event_wait(rt, c, -1), RP_ETASK);
  cr_assert_eq(atomic_load(&runs[1]), 1, "the joining fold did not run");
  cr_assert_eq(atomic_load(&runs[2]), 0, "the reader after the group ran");
  rp_event events[] = {a, b, c};
  for (size_t i = 0; i < 3; i++)
    RP_CHECK(rp_event_release(rt, events[i]));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

Test(eager, explicit_wait_event_gates_the_task) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_event gate, done;
  RP_CHECK(rp_event_create(rt, &gate));
  targs a = {0, 0, ~0u, 0};
  rp_launch l = {.task = t,
                 .proc = RP_PROC_ANY,
                 .args = &a,
                 .args_size = sizeof a,
                 .wait = gate};
  RP_CHECK(rp_launch_task(rt, &l, &done));
  RP_EXPECT(rp_event_wait(rt, done, 20000000), RP_ETIMEDOUT);
  cr_assert_eq(atomic_load(&runs[0]), 0);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, done, -1));
  cr_assert_eq(atomic_load(&runs[0]), 1);
  rp_event_release(rt, gate);
  rp_event_release(rt, done);
  th_destroy(rt);
}

Test(eager, destroy_cancels_ops_waiting_on_untriggered_user_events) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = register_log(rt);
  rp_event gate;
  RP_CHECK(rp_event_create(rt, &gate));
  targs a = {0, 0, ~0u, 0};
  rp_launch l = {
      .task = t, .proc = 0, .args = &a, .args_size = sizeof a, .wait = gate};
  RP_CHECK(rp_launch_task(rt, &l, NULL));
  th_destroy(rt); /* must not hang; the gated op never runs */
  cr_assert_eq(atomic_load(&runs[0]), 0);
}

/* rp_runtime_drain waits for the ops issued before it, not for the runtime
 * to go quiet: a chain in which each op's completion callback launches the
 * next keeps one op pending at every moment (the next is launched before
 * the last one counts as completed), as a loader thread launching all the
 * time would. The drain waited for no op to be pending, for ever; it
 * returns now, with the op pending at its start completed. */
static rp_runtime *chain_rt;
static rp_task_id chain_task;
static _Atomic int chain_stop, chain_launched, chain_ran, chain_failed;

static rp_status chain_body(rp_task_ctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&chain_ran, 1);
  return RP_OK;
}

static void chain_next(void *arg, rp_status st) {
  (void)arg;
  if (st != RP_OK)
    atomic_store(&chain_failed, 1);
  if (atomic_load(&chain_stop))
    return;
  rp_event d;
  rp_launch l = {.task = chain_task, .proc = 0};
  if (rp_launch_task(chain_rt, &l, &d) != RP_OK ||
      rp_event_on_complete(chain_rt, d, chain_next, NULL) != RP_OK)
    atomic_store(&chain_failed, 1);
  atomic_fetch_add(&chain_launched, 1);
  rp_event_release(chain_rt, d);
}

Test(eager, drain_does_not_wait_for_ops_launched_after_it, .timeout = 60) {
  chain_rt = th_cpu_runtime(1);
  RP_CHECK(rp_task_register(
      chain_rt, &(rp_task_desc){.name = "chain", .cpu_fn = chain_body},
      &chain_task));
  atomic_store(&chain_stop, 0);
  chain_next(NULL, RP_OK); /* the first op, launched here */
  RP_CHECK(rp_runtime_drain(chain_rt));
  cr_assert_geq(atomic_load(&chain_ran), 1);
  atomic_store(&chain_stop, 1);
  /* the chain ends at the next completion: drain until it has */
  int launched;
  do {
    launched = atomic_load(&chain_launched);
    RP_CHECK(rp_runtime_drain(chain_rt));
  } while (launched != atomic_load(&chain_launched));
  cr_assert_eq(atomic_load(&chain_ran), atomic_load(&chain_launched));
  cr_assert_eq(atomic_load(&chain_failed), 0);
  th_destroy(chain_rt);
}

/* A destroy whose drain gives up (ops that make no progress for its 10 s
 * limit: RP_EBUSY, nothing freed) leaves those ops counted in the drain
 * epoch it had closed. A later rp_runtime_drain still waits for every op
 * issued before it, those included. Here: A runs and holds its worker
 * until the drain is called; B waits for A (not yet on a worker) and
 * takes a moment. When the drain returns, B has completed. */
static _Atomic int strand_drain_called;

static rp_status strand_a(rp_task_ctx *ctx) {
  (void)ctx;
  while (!atomic_load(&strand_drain_called))
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  /* a moment more, so that the drain is inside its wait when A ends */
  nanosleep(&(struct timespec){0, 100000000}, NULL);
  return RP_OK;
}

static rp_status strand_b(rp_task_ctx *ctx) {
  (void)ctx;
  nanosleep(&(struct timespec){0, 300000000}, NULL);
  return RP_OK;
}

Test(eager, drain_after_a_failed_destroy_waits_for_the_ops_it_left,
     .timeout = 120) {
  rp_runtime *r2 = th_cpu_runtime(2);
  rp_task_id ta, tb;
  RP_CHECK(rp_task_register(
      r2, &(rp_task_desc){.name = "strand_a", .cpu_fn = strand_a}, &ta));
  RP_CHECK(rp_task_register(
      r2, &(rp_task_desc){.name = "strand_b", .cpu_fn = strand_b}, &tb));
  atomic_store(&strand_drain_called, 0);
  rp_event a, b;
  /* B on the worker the CPU backend's drain looks at first */
  RP_CHECK(rp_launch_task(r2, &(rp_launch){.task = ta, .proc = 1}, &a));
  RP_CHECK(
      rp_launch_task(r2, &(rp_launch){.task = tb, .proc = 0, .wait = a}, &b));
  /* A makes no progress: the destroy's drain gives up after its limit */
  RP_EXPECT(rp_runtime_destroy(r2), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "rp_runtime_destroy: ") ==
                    rp_error_detail() &&
                strstr(rp_error_detail(), "cannot complete"),
            "%s", rp_error_detail());
  cr_assert_eq(rp_event_query(r2, b), RP_EAGAIN);
  atomic_store(&strand_drain_called, 1);
  RP_CHECK(rp_runtime_drain(r2));
  cr_assert_eq(rp_event_query(r2, a), RP_OK);
  cr_assert_eq(rp_event_query(r2, b), RP_OK,
               "B, issued before the drain, is still pending after it");
  RP_CHECK(rp_event_release(r2, a));
  RP_CHECK(rp_event_release(r2, b));
  th_destroy(r2);
}

/* The calls that wait for eager work to end, from a running eager task,
 * when they would wait for that task: drain and destroy of its runtime,
 * free and realloc of an instance it accesses: RP_ECONTRACT at once (each
 * used to wait for the task itself: drain and free forever, destroy for
 * its 10 s drain limit), the instance kept; free and realloc of an
 * instance a pending op uses (it may wait for the task, or be queued
 * behind it): RP_EBUSY, kept. What waits for nothing works: freeing an
 * instance no pending op uses, draining another runtime. */
static rp_runtime *self_rt, *other_rt;
static rp_inst self_inst, spare_inst, held_inst;
static rp_status self_st[8];
static rp_status self_waiter(rp_task_ctx *ctx) {
  (void)ctx;
  rp_inst copy = self_inst, held = held_inst;
  self_st[0] = rp_runtime_drain(self_rt);
  self_st[1] = rp_instance_free(self_rt, self_inst);
  self_st[2] = rp_instance_realloc(self_rt, &copy);
  self_st[3] = rp_runtime_destroy(self_rt);
  self_st[4] = rp_instance_free(self_rt, spare_inst);
  self_st[5] = rp_runtime_drain(other_rt);
  /* held_inst: a pending op uses it, which waits for this task */
  self_st[6] = rp_instance_free(self_rt, held_inst);
  self_st[7] = rp_instance_realloc(self_rt, &held);
  return RP_OK;
}

Test(eager, waiting_calls_from_a_running_task_on_itself_are_refused,
     .timeout = 30) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "waiter", .cpu_fn = self_waiter}, &t));
  self_rt = rt;
  other_rt = th_cpu_runtime(1);
  self_inst = mk(rt);
  spare_inst = mk(rt);
  held_inst = mk(rt);
  rp_access acc = {self_inst, RP_RW, 0};
  rp_event gate, done, later;
  RP_CHECK(rp_event_create(rt, &gate)); /* the task runs once both are in */
  rp_launch l = {
      .task = t, .proc = 0, .accesses = &acc, .naccess = 1, .wait = gate};
  RP_CHECK(rp_launch_task(rt, &l, &done));
  /* after the task (it reads what the task writes), on its one worker */
  rp_access acc2[2] = {{self_inst, RP_READ, 0}, {held_inst, RP_RW, 0}};
  reset_log();
  RP_CHECK(launch(rt, register_log(rt), 0, 0, acc2, 2, 0, ~0u, &later));
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, done, 10000000000ll));
  RP_CHECK(rp_event_wait(rt, later, 10000000000ll));
  static const char *const call[8] = {
      "rp_runtime_drain",
      "rp_instance_free",
      "rp_instance_realloc",
      "rp_runtime_destroy",
      "rp_instance_free (not accessed)",
      "rp_runtime_drain (another runtime)",
      "rp_instance_free (a pending op uses it)",
      "rp_instance_realloc (a pending op uses it)"};
  const rp_status want[8] = {RP_ECONTRACT, RP_ECONTRACT, RP_ECONTRACT,
                             RP_ECONTRACT, RP_OK,        RP_OK,
                             RP_EBUSY,     RP_EBUSY};
  for (int i = 0; i < 8; i++)
    cr_assert_eq(self_st[i], want[i], "%s from a task: %s", call[i],
                 rp_status_name(self_st[i]));
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, self_inst, &info)); /* not freed */
  RP_EXPECT(rp_instance_query(rt, spare_inst, &info), RP_ESTALE);
  RP_CHECK(rp_instance_query(rt, held_inst, &info)); /* not freed */
  rp_event_release(rt, gate);
  rp_event_release(rt, done);
  rp_event_release(rt, later);
  RP_CHECK(rp_instance_free(rt, self_inst));
  RP_CHECK(rp_instance_free(rt, held_inst));
  th_destroy(other_rt);
  th_destroy(rt);
}

/* Each shard fills its whole workspace slice with its own marker and says
 * where the slice is; the last shard to finish (the workspace lives until
 * then) checks every slice: aligned, disjoint from the others, holding
 * only its shard's marker. */
#define SPMD_N 6
static void *spmd_ptr[SPMD_N];
static size_t spmd_bytes[SPMD_N];
static atomic_uint spmd_finished;
static atomic_int spmd_verdict = -1; /* -1 unchecked, 0 ok, else bad shard+1 */

static int32_t spmd_mark(uint32_t shard) {
  return (int32_t)(0x5100 + shard);
}

static int spmd_check_all(void) {
  for (uint32_t a = 0; a < SPMD_N; a++) {
    char *pa = spmd_ptr[a];
    if (!pa || spmd_bytes[a] < 100 || (uintptr_t)pa % 64)
      return (int)a + 1;
    for (uint32_t b = 0; b < a; b++) {
      char *pb = spmd_ptr[b];
      if (!(pa + spmd_bytes[a] <= pb || pb + spmd_bytes[b] <= pa))
        return (int)a + 1;
    }
    const int32_t *w = (const int32_t *)pa;
    for (size_t i = 0; i < spmd_bytes[a] / sizeof *w; i++)
      if (w[i] != spmd_mark(a))
        return (int)a + 1;
  }
  return 0;
}

static rp_status spmd_task(rp_task_ctx *ctx) {
  int32_t *out = rp_ctx_ptr(ctx, 0);
  size_t wsb;
  int32_t *ws = rp_ctx_workspace(ctx, &wsb);
  uint32_t sh = rp_ctx_shard(ctx);
  if (sh >= SPMD_N)
    return RP_EINVAL;
  for (size_t i = 0; i < wsb / sizeof *ws; i++)
    ws[i] = spmd_mark(sh);
  spmd_ptr[sh] = ws;
  spmd_bytes[sh] = wsb;
  out[sh] = (int32_t)(sh * 10 + rp_ctx_shards(ctx));
  /* acq_rel: the last shard sees every other shard's slice and writes */
  if (atomic_fetch_add_explicit(&spmd_finished, 1, memory_order_acq_rel) ==
      SPMD_N - 1)
    atomic_store(&spmd_verdict, spmd_check_all());
  return RP_OK;
}

Test(eager, spmd_launch_runs_every_shard_with_its_workspace) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "spmd", .cpu_fn = spmd_task}, &t));
  rp_rect r = rp_rect_1d(0, SPMD_N - 1);
  rp_inst out;
  RP_CHECK(rp_instance_create(rt, 0, RP_I32, &r, NULL, &out));
  rp_access acc = {out, RP_WRITE, 0};
  rp_launch l = {.task = t,
                 .proc = RP_PROC_ANY,
                 .accesses = &acc,
                 .naccess = 1,
                 .shards = SPMD_N,
                 .workspace_bytes = 100};
  rp_event done;
  RP_CHECK(rp_launch_task(rt, &l, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  int32_t v[SPMD_N];
  RP_CHECK(rp_instance_read(rt, out, v, sizeof v));
  for (int i = 0; i < SPMD_N; i++)
    cr_assert_eq(v[i], i * 10 + SPMD_N, "shard %d", i);
  cr_assert_eq(atomic_load(&spmd_finished), SPMD_N);
  int verdict = atomic_load(&spmd_verdict);
  cr_assert_eq(verdict, 0,
               "shard %d's workspace slice is misaligned, "
               "overlaps another or was written by another shard",
               verdict - 1);
  /* a workspace whose total overflows: refused, naming the call and task */
  l.workspace_bytes = SIZE_MAX / 2;
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_launch_task: task 'spmd': "
                                      "workspace of") &&
                strstr(rp_error_detail(), "overflows"),
            "%s", rp_error_detail());
  rp_event_release(rt, done);
  RP_CHECK(rp_instance_free(rt, out));
  th_destroy(rt);
}

/* A workspace the processor's memory cannot give: the detail names the
 * call, the task and the workspace, nothing runs, *done is untouched, and
 * the next launch runs. (The size overflows the allocator's bookkeeping,
 * so no allocator is asked for petabytes.) */
Test(eager, a_workspace_that_cannot_be_allocated_names_the_call_and_task) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt);
  rp_access acc = {x, RP_WRITE, 0};
  targs a = {0, 0, ~0u, 0};
  rp_launch l = {.task = t,
                 .proc = 0,
                 .accesses = &acc,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a,
                 .workspace_bytes = SIZE_MAX - 63};
  rp_event done = {0x77};
  rp_status st = rp_launch_task(rt, &l, &done);
  cr_assert(st == RP_ERANGE || st == RP_ENOMEM, "%s (%s)", rp_status_name(st),
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), "rp_launch_task: task 'log': "
                                      "workspace of 1 x ") == rp_error_detail(),
            "%s", rp_error_detail());
  cr_assert_eq(done.id, 0x77, "*done untouched");
  l.workspace_bytes = 64;
  RP_CHECK(rp_launch_task(rt, &l, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  rp_event_release(rt, done);
  cr_assert_eq(atomic_load(&runs[0]), 1, "the failed launch ran nothing");
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

Test(eager, bad_launches_are_rejected_and_run_nothing) {
  reset_log();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt);
  targs a = {0, 0, ~0u, 0};
  rp_launch l = {.task = 99, .proc = 0, .args = &a, .args_size = sizeof a};
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_ENOTASK);
  l.task = t;
  l.proc = 7;
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EPROC);
  l.proc = 0;
  rp_access bad = {x, (rp_privilege)9, 0};
  l.accesses = &bad;
  l.naccess = 1;
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  bad = (rp_access){x, RP_REDUCE, (rp_redop)7};
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "access 0: unknown reduction operator 7"),
            "%s", rp_error_detail());
  /* RP_REDUCE with the redop left out: said so, not "unknown operator 0" */
  bad = (rp_access){x, RP_REDUCE, RP_REDOP_NONE};
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(),
                   "access 0: RP_REDUCE without a reduction operator "
                   "(redop RP_REDOP_NONE; set RP_REDOP_SUM)"),
            "%s", rp_error_detail());
  bad = (rp_access){x, RP_READ, RP_REDOP_SUM}; /* only RP_REDUCE takes one */
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "access 0: reduction operator 1 on a "
                                      "read access"),
            "%s", rp_error_detail());
  rp_inst stale = x;
  RP_CHECK(rp_instance_realloc(rt, &x));
  bad = (rp_access){stale, RP_READ, 0};
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_ESTALE);
  l.naccess = 0;
  l.args = NULL;
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  l.args = &a;
  rp_interp ip = {0, 0, 4};
  l.interps = &ip;
  l.ninterp = 1;
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  l.ninterp = 0;
  l.wait = (rp_event){0x1234567800000042ull};
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_ESTALE);
  l.wait = RP_NO_EVENT;
  l.workspace_bytes = 8;
  l.workspace_align = 3;
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EINVAL);
  RP_EXPECT(rp_launch_task(NULL, &l, NULL), RP_EINVAL);
  RP_EXPECT(rp_launch_task(rt, NULL, NULL), RP_EINVAL);
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(atomic_load(&runs[0]), 0);
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

Test(eager, task_registry_errors) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id id;
  rp_task_desc d = {.name = "t", .cpu_fn = log_task};
  RP_CHECK(rp_task_register(rt, &d, &id));
  RP_EXPECT(rp_task_register(rt, &d, &id), RP_EEXIST);
  d.name = "";
  RP_EXPECT(rp_task_register(rt, &d, &id), RP_EINVAL);
  d.name = "u";
  d.cpu_fn = NULL;
  RP_EXPECT(rp_task_register(rt, &d, &id), RP_EINVAL);
  d.cpu_fn = log_task;
  d.flags = RP_TASK_HOST | RP_TASK_STREAM_ORDERED;
  RP_EXPECT(rp_task_register(rt, &d, &id), RP_EINVAL);
  d.flags = 1u << 7;
  RP_EXPECT(rp_task_register(rt, &d, &id), RP_EINVAL);
  rp_task_id found;
  RP_CHECK(rp_task_find(rt, "t", &found));
  cr_assert_eq(found, 0);
  RP_EXPECT(rp_task_find(rt, "nope", &found), RP_ENOTASK);
  cr_assert_str_eq(rp_task_name(rt, 0), "t");
  cr_assert_null(rp_task_name(rt, 5));
  th_destroy(rt);
}

/* engine/engine_impl.h: the chunks of 1024 entries a table may grow to */
extern uint32_t rp__ctable_max_chunks;

/* A runtime's task table is full at its last entry (4M; the seam lowers
 * it to 2 chunks, 2048 tasks): the next registration is RP_ERANGE, as
 * documented, naming the call, not an out-of-memory; nothing is
 * registered and the registered tasks stay found. */
Test(eager, a_full_task_table_is_erange_not_out_of_memory) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp__ctable_max_chunks = 2;
  char name[32];
  rp_task_id id;
  for (uint32_t i = 0; i < 2048; i++) {
    snprintf(name, sizeof name, "t%u", i);
    RP_CHECK(rp_task_register(
        rt, &(rp_task_desc){.name = name, .cpu_fn = log_task}, &id));
  }
  id = 12345;
  RP_EXPECT(
      rp_task_register(
          rt, &(rp_task_desc){.name = "one.more", .cpu_fn = log_task}, &id),
      RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_task_register: too many tasks"), "%s",
            rp_error_detail());
  cr_assert_eq(id, 12345, "*out was written");
  rp_task_id found;
  RP_EXPECT(rp_task_find(rt, "one.more", &found), RP_ENOTASK);
  RP_CHECK(rp_task_find(rt, "t2047", &found));
  cr_assert_eq(found, 2047);
  rp__ctable_max_chunks = 4096;
  th_destroy(rt);
}

/* ---- property test: random DAGs ---- */

typedef struct rop {
  uint32_t n;
  rp_access acc[3];
} rop;

/* Do a (earlier) and b conflict on some instance? */
static int conflict(const rop *a, const rop *b) {
  for (uint32_t i = 0; i < a->n; i++)
    for (uint32_t j = 0; j < b->n; j++) {
      if (a->acc[i].inst.id != b->acc[j].inst.id)
        continue;
      rp_privilege p = a->acc[i].priv, q = b->acc[j].priv;
      if (p == RP_READ && q == RP_READ)
        continue;
      if (p == RP_REDUCE && q == RP_REDUCE)
        continue;
      return 1;
    }
  return 0;
}

Test(eager, random_dags_run_each_task_once_in_dependence_order,
     .timeout = 600) {
  static rop ops[MAXT];
  srand(12345);
  for (int dag = 0; dag < 500; dag++) {
    reset_log();
    unsigned workers = 1 + (unsigned)(rand() % 4);
    uint32_t n = 1 + (uint32_t)(rand() % 500);
    uint32_t ninst = 1 + (uint32_t)(rand() % 12);
    rp_runtime *rt = th_cpu_runtime(workers);
    rp_task_id t = register_log(rt);
    rp_inst inst[12];
    for (uint32_t i = 0; i < ninst; i++)
      inst[i] = mk(rt);
    for (uint32_t k = 0; k < n; k++) {
      rop *o = &ops[k];
      o->n = 1 + (uint32_t)(rand() % 3);
      for (uint32_t j = 0; j < o->n; j++) {
        static const rp_privilege privs[] = {RP_READ, RP_READ, RP_WRITE, RP_RW,
                                             RP_REDUCE};
        rp_privilege p = privs[rand() % 5];
        /* distinct instances per op */
        o->acc[j] = (rp_access){inst[((uint32_t)rand() + j) % ninst], p,
                                p == RP_REDUCE ? RP_REDOP_SUM : 0};
        for (uint32_t q = 0; q < j; q++)
          if (o->acc[q].inst.id == o->acc[j].inst.id)
            o->acc[j].priv = o->acc[q].priv, o->acc[j].redop = o->acc[q].redop;
      }
      rp_proc proc =
          rand() % 3 == 0 ? (rp_proc)(rand() % (int)workers) : RP_PROC_ANY;
      RP_CHECK(launch(rt, t, k, proc, o->acc, o->n, 0, ~0u, NULL));
    }
    RP_CHECK(rp_runtime_drain(rt));
    for (uint32_t k = 0; k < n; k++)
      cr_assert_eq(atomic_load(&runs[k]), 1, "dag %d task %u ran %u times", dag,
                   k, atomic_load(&runs[k]));
    for (uint32_t b = 0; b < n; b++)
      for (uint32_t a = 0; a < b; a++)
        if (conflict(&ops[a], &ops[b]))
          cr_assert_lt(end_seq[a], start_seq[b],
                       "dag %d: task %u (conflicts with earlier %u) started "
                       "before it ended",
                       dag, b, a);
    for (uint32_t i = 0; i < ninst; i++)
      RP_CHECK(rp_instance_free(rt, inst[i]));
    th_destroy(rt);
  }
}

/* ---- eager launches and captures of other threads ---- */

static rp_status add_one(rp_task_ctx *ctx) {
  int64_t *v = rp_ctx_ptr(ctx, 0);
  (*v)++;
  return RP_OK;
}

typedef struct capture_race {
  rp_runtime *rt;
  rp_task_id t;
  rp_inst x;
  atomic_int stop;
  unsigned ok, refused, other;
  int who_there; /* rp_capture_open from this thread while one is open */
} capture_race;

static void *eager_adder(void *arg) {
  capture_race *c = arg;
  rp_access acc = {c->x, RP_RW, RP_REDOP_NONE};
  rp_launch l = {
      .task = c->t, .proc = RP_PROC_ANY, .accesses = &acc, .naccess = 1};
  while (!atomic_load(&c->stop)) {
    rp_status st = rp_launch_task(c->rt, &l, NULL);
    if (st == RP_OK)
      c->ok++;
    else if (st == RP_ECAPTURE)
      c->refused++;
    else
      c->other++;
  }
  return NULL;
}

/* Launches of one thread while another opens and closes captures: each
 * launch either runs (eagerly, once) or is refused (RP_ECAPTURE), never
 * recorded into the other thread's capture; the capture's owner check is
 * race-free (the TSan build runs this). */
Test(eager, launches_race_other_threads_captures_opening_and_closing,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  capture_race c = {.rt = rt};
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "add_one", .cpu_fn = add_one}, &c.t));
  rp_rect r = rp_rect_1d(0, 0);
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &c.x));
  int64_t zero = 0;
  RP_CHECK(rp_instance_write(rt, c.x, &zero, sizeof zero));
  cr_assert_eq(rp_capture_open(rt), 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, eager_adder, &c), 0);
  unsigned recorded = 0;
  for (int i = 0; i < 300; i++) {
    RP_CHECK(rp_capture_begin(rt, NULL));
    cr_assert_eq(rp_capture_open(rt), 1, "the capturing thread records");
    rp_graph *g = NULL;
    RP_CHECK(rp_capture_end(rt, &g));
    recorded += rp_graph_op_count(g);
    rp_graph_destroy(g);
  }
  atomic_store(&c.stop, 1);
  pthread_join(th, NULL);
  RP_CHECK(rp_runtime_drain(rt));
  int64_t v = -1;
  RP_CHECK(rp_instance_read(rt, c.x, &v, sizeof v));
  cr_assert_eq(recorded, 0, "another thread's launch was recorded");
  cr_assert_eq(c.other, 0);
  cr_assert_eq((uint64_t)v, (uint64_t)c.ok, "%lld adds ran, %u launched",
               (long long)v, c.ok);
  RP_CHECK(rp_instance_free(rt, c.x));
  th_destroy(rt);
}

static void *who_records(void *arg) {
  capture_race *c = arg;
  c->who_there = rp_capture_open(c->rt);
  return NULL;
}

Test(eager, capture_open_says_which_thread_records) {
  rp_runtime *rt = th_cpu_runtime(1);
  capture_race c = {.rt = rt, .who_there = 7};
  cr_assert_eq(rp_capture_open(rt), 0, "no capture yet");
  RP_CHECK(rp_capture_begin(rt, NULL));
  cr_assert_eq(rp_capture_open(rt), 1);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, who_records, &c), 0);
  pthread_join(th, NULL);
  cr_assert_eq(c.who_there, -1, "another thread sees %d", c.who_there);
  RP_CHECK(rp_capture_abort(rt));
  cr_assert_eq(rp_capture_open(rt), 0, "aborted");
  cr_assert_eq(rp_capture_open(NULL), 0);
  th_destroy(rt);
}

typedef struct first_use {
  rp_runtime *rt;
  rp_status st;
} first_use;

static void *begin_capture(void *arg) {
  first_use *f = arg;
  f->st = rp_capture_begin(f->rt, NULL);
  if (f->st == RP_OK)
    f->st = rp_capture_abort(f->rt);
  return NULL;
}

static atomic_int slow_done;

static rp_status slow_write(rp_task_ctx *ctx) {
  (void)ctx;
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  atomic_store(&slow_done, 1);
  return RP_OK;
}

/* A runtime's first capture-layer use by two threads at once (a capture
 * begun on one, an eager launch then a free of its instance on the other):
 * the free waits for the launched op whichever thread installed the layer
 * (the release hook is set before any thread can launch through it; one
 * read unset skipped that wait: the TSan build also sees the race). */
Test(eager, first_capture_use_races_instance_frees, .timeout = 120) {
  for (int i = 0; i < 40; i++) {
    rp_runtime *rt = th_cpu_runtime(1);
    rp_task_id t;
    RP_CHECK(rp_task_register(
        rt, &(rp_task_desc){.name = "slow", .cpu_fn = slow_write}, &t));
    first_use f = {rt, RP_EINVAL};
    rp_inst x;
    rp_rect r = rp_rect_1d(0, 7);
    RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
    atomic_store(&slow_done, 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, begin_capture, &f), 0);
    rp_access acc = {x, RP_WRITE, RP_REDOP_NONE};
    rp_launch l = {.task = t, .proc = 0, .accesses = &acc, .naccess = 1};
    rp_status st;
    while ((st = rp_launch_task(rt, &l, NULL)) == RP_ECAPTURE)
      ; /* the other thread's capture is open: again */
    RP_CHECK(st);
    RP_CHECK(rp_instance_free(rt, x));
    cr_assert_eq(atomic_load(&slow_done), 1,
                 "iteration %d: the free returned before the op writing "
                 "the instance ran",
                 i);
    pthread_join(th, NULL);
    RP_CHECK(f.st);
    th_destroy(rt);
  }
}

static rp_status nop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* One op naming many instances makes room for one token in each
 * instance's sets, not one per access: the sink of a fork-join of N
 * branches (reprise bench --workload forkjoin --sizes N) reads N
 * instances, and room for N tokens in each of their 2 N sets took 8 GB
 * at N = 10,000 (OOM-killed at the 1,000,000 bench --sizes accepts). */
Test(eager, an_op_reading_many_instances_reserves_one_token_each) {
  enum { N = 2000 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task}, &t));
  rp_inst *y = malloc(sizeof *y * N);
  rp_access *acc = malloc(sizeof *acc * N);
  cr_assert(y && acc);
  for (uint32_t i = 0; i < N; i++) {
    y[i] = mk(rt);
    acc[i] = (rp_access){y[i], RP_READ, RP_REDOP_NONE};
  }
  rp_event gate, done; /* pending while the sets are looked at */
  RP_CHECK(rp_event_create(rt, &gate));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = RP_PROC_ANY,
                                       .accesses = acc,
                                       .naccess = N,
                                       .wait = gate},
                          &done));
  uint32_t most = 0;
  for (uint32_t i = 0; i < N; i++) {
    uint32_t room = rp__eager_room(rt, y[i]);
    most = room > most ? room : most;
  }
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, gate));
  cr_assert_gt(most, 0);
  cr_assert_leq(most, 64,
                "an instance read once has room for %u tokens (%u accesses "
                "in the op)",
                most, (unsigned)N);
  for (uint32_t i = 0; i < N; i++)
    RP_CHECK(rp_instance_free(rt, y[i]));
  free(y);
  free(acc);
  th_destroy(rt);
}

/* A long eager program keeps its dependence sets small: the readers of an
 * instance no op writes pile up only while they are pending; completed
 * ones are dropped as the sets fill (20000 readers, each waited for in
 * batches of 100: the sets never hold more than a few batches). */
Test(eager, dependence_sets_of_a_long_program_stay_small) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = register_log(rt);
  rp_inst x = mk(rt), y[2] = {mk(rt), mk(rt)};
  uint32_t most = 0;
  for (uint32_t i = 0; i < 20000; i++) {
    /* the log's slot of the task's writes: the tasks writing one y run
     * in order, the two y's at once */
    targs a = {.id = i & 1, .fail = 0, .partner = ~0u};
    rp_access acc[2] = {{x, RP_READ, RP_REDOP_NONE},
                        {y[i & 1], RP_WRITE, RP_REDOP_NONE}};
    rp_event e;
    RP_CHECK(rp_launch_task(rt,
                            &(rp_launch){.task = t,
                                         .proc = RP_PROC_ANY,
                                         .accesses = acc,
                                         .naccess = 2,
                                         .args = &a,
                                         .args_size = sizeof a},
                            &e));
    if (i % 100 == 99)
      RP_CHECK(rp_event_wait(rt, e, -1));
    RP_CHECK(rp_event_release(rt, e));
    uint32_t room = rp__eager_room(rt, x);
    if (room > most)
      most = room;
  }
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_leq(most, 1024, "the readers' set grew to room for %u tokens",
                most);
  cr_assert_gt(most, 0);
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y[0]));
  RP_CHECK(rp_instance_free(rt, y[1]));
  th_destroy(rt);
}
