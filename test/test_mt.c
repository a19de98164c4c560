/* test/test_mt.c — the public API's promises about threads (reprise.h:
 * "One thread at a time per exec", the capture contract, events), each
 * exercised from several host threads at once. Run under TSan (make
 * test-tsan) a race in any of them fails the test. */
#include "helpers.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000000ll

TestSuite(mt, .timeout = 300);

/* add1 with a check: its two int64 argument words must be equal (an
 * argument block torn by a concurrent update would not be), and access 0
 * gets the first one added. */
static rp_status add_arg_task(rp_task_ctx *ctx) {
  size_t n = 0;
  const int64_t *a = rp_ctx_args(ctx, &n);
  if (n != 2 * sizeof(int64_t) || a[0] != a[1]) {
    return rp_error_set(RP_EINVAL, "torn arguments");
  }
  int64_t *x = rp_ctx_ptr(ctx, 0);
  *x += a[0];
  return RP_OK;
}

static rp_inst i64_inst(rp_runtime *rt, int64_t n) {
  rp_inst x;
  rp_rect r = rp_rect_1d(0, n - 1);
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  return x;
}

static int64_t read0(rp_runtime *rt, rp_inst x) {
  int64_t v = 0;
  RP_CHECK(rp_instance_read(rt, x, &v, sizeof v));
  return v;
}

/* An exec of `n` captured add_arg ops (args {1, 1}), op i on x[stride * i]
 * (stride 0: a chain on x[0]; 1: a fan over x[0..n-1]), each on
 * RP_PROC_ANY; opts NULL for the defaults. */
static rp_exec *adds_exec(rp_runtime *rt, rp_task_id t, const rp_inst *x,
                          int stride, int n, const rp_exec_opts *opts) {
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  int64_t one[2] = {1, 1};
  for (int i = 0; i < n; i++) {
    rp_access acc = {x[stride * i], RP_RW, RP_REDOP_NONE};
    RP_CHECK(rp_launch_task(rt,
                            &(rp_launch){.task = t,
                                         .proc = RP_PROC_ANY,
                                         .accesses = &acc,
                                         .naccess = 1,
                                         .args = one,
                                         .args_size = sizeof one},
                            NULL));
  }
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, opts, &ex));
  RP_CHECK(rp_graph_destroy(g));
  return ex;
}

/* A chain of `n` add_arg ops on x, `inflight` replays in flight, the
 * placement kept. */
static rp_exec *chain_exec(rp_runtime *rt, rp_task_id t, rp_inst x, int n,
                           uint32_t inflight) {
  return adds_exec(rt, t, &x, 0, n,
                   &(rp_exec_opts){.max_inflight = inflight, .no_replace = 1});
}

/* ---- replays of two execs from two threads ---- */

typedef struct {
  rp_runtime *rt;
  rp_exec *ex;
  int n;
  _Atomic int *go;
  rp_status st;
  int ok, busy;
} replay_job;

/* Replays ex n times (RP_EBUSY retried), waiting only for the last. */
static void *replay_n(void *p) {
  replay_job *j = p;
  while (j->go && !atomic_load(j->go))
    ;
  rp_event last = RP_NO_EVENT;
  for (int i = 0; i < j->n;) {
    rp_event done;
    rp_status st = rp_replay(j->ex, NULL, &done);
    if (st == RP_EBUSY) {
      j->busy++;
      continue;
    }
    if (st != RP_OK) {
      j->st = st;
      break;
    }
    j->ok++;
    i++;
    if (last.id)
      rp_event_release(j->rt, last);
    last = done;
  }
  if (last.id) {
    rp_status st = rp_event_wait(j->rt, last, 60 * SEC);
    if (st && !j->st)
      j->st = st;
    rp_event_release(j->rt, last);
  }
  return NULL;
}

Test(mt, two_execs_replayed_from_two_threads_are_exact) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1), y = i64_inst(rt, 1);
  rp_exec *ea = chain_exec(rt, t, x, 3, 4), *eb = chain_exec(rt, t, y, 5, 2);
  _Atomic int go = 0;
  replay_job ja = {rt, ea, 300, &go, RP_OK, 0, 0};
  replay_job jb = {rt, eb, 300, &go, RP_OK, 0, 0};
  pthread_t a, b;
  cr_assert_eq(pthread_create(&a, NULL, replay_n, &ja), 0);
  cr_assert_eq(pthread_create(&b, NULL, replay_n, &jb), 0);
  atomic_store(&go, 1);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  cr_assert_eq(ja.st, RP_OK, "%s", rp_status_name(ja.st));
  cr_assert_eq(jb.st, RP_OK, "%s", rp_status_name(jb.st));
  cr_assert_eq(ja.busy + jb.busy, 0, "two execs never refuse each other");
  cr_assert_eq(read0(rt, x), 300 * 3);
  cr_assert_eq(read0(rt, y), 300 * 5);
  RP_CHECK(rp_exec_destroy(ea));
  RP_CHECK(rp_exec_destroy(eb));
  th_destroy(rt);
}

/* ---- calls on an exec while another thread replays it ---- */

/* The exec does not depend on its graph: destroying the graph, dumping the
 * exec and making other graphs and execs on the runtime while a thread
 * replays it change nothing of its replays. */
Test(mt, graph_destroy_dump_and_instantiate_beside_a_replaying_thread) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1), y = i64_inst(rt, 1);
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  int64_t one[2] = {1, 1};
  rp_access acc = {x, RP_RW, RP_REDOP_NONE};
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_launch_task(rt,
                            &(rp_launch){.task = t,
                                         .proc = (rp_proc)(i % 2),
                                         .accesses = &acc,
                                         .naccess = 1,
                                         .args = one,
                                         .args_size = sizeof one},
                            NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  replay_job j = {rt, ex, 400, NULL, RP_OK, 0, 0};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, replay_n, &j), 0);
  RP_CHECK(rp_graph_destroy(g));
  FILE *f = fopen("/dev/null", "w");
  cr_assert_not_null(f);
  for (int k = 0; k < 10; k++) {
    RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
    RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_JSON));
    rp_exec *other = chain_exec(rt, t, y, 2, 2);
    rp_event d;
    RP_CHECK(rp_replay(other, NULL, &d));
    RP_CHECK(rp_event_wait(rt, d, 60 * SEC));
    RP_CHECK(rp_event_release(rt, d));
    RP_CHECK(rp_exec_destroy(other));
  }
  fclose(f);
  pthread_join(th, NULL);
  cr_assert_eq(j.st, RP_OK, "%s", rp_status_name(j.st));
  cr_assert_eq(j.busy, 0);
  cr_assert_eq(read0(rt, x), 400 * 4);
  cr_assert_eq(read0(rt, y), 10 * 2);
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

typedef struct {
  rp_exec *ex;
  _Atomic int *stop;
  _Atomic int ok;
  int busy, other;
  rp_status first_other;
} hammer_job;

/* Replays ex until *stop, counting OK / RP_EBUSY / anything else (no done
 * events). */
static void *replay_until_stop(void *p) {
  hammer_job *h = p;
  while (!atomic_load(h->stop)) {
    rp_status st = rp_replay(h->ex, NULL, NULL);
    if (st == RP_EBUSY) {
      h->busy++;
      continue;
    }
    if (st == RP_OK) {
      h->ok++;
      continue;
    }
    h->other++;
    if (!h->first_other)
      h->first_other = st;
  }
  return NULL;
}

static rp_runtime *upd_rt;
static _Atomic int upd_failed;
static void on_done(void *arg, rp_status st) {
  (void)arg;
  if (st != RP_OK)
    atomic_fetch_add(&upd_failed, 1);
}

/* Replays with a done callback that counts failures (no event kept). */
static void *replay_until_stop_cb(void *p) {
  hammer_job *h = p;
  while (!atomic_load(h->stop)) {
    rp_event done;
    rp_status st = rp_replay(h->ex, NULL, &done);
    if (st == RP_EBUSY) {
      h->busy++;
      continue;
    }
    if (st != RP_OK) {
      h->other++;
      if (!h->first_other)
        h->first_other = st;
      continue;
    }
    h->ok++;
    if (rp_event_on_complete(upd_rt, done, on_done, NULL) != RP_OK ||
        rp_event_release(upd_rt, done) != RP_OK)
      h->other++;
  }
  return NULL;
}

/* rp_exec_update_args from one thread while another replays the exec:
 * each update either happens between replays or is refused (RP_EBUSY,
 * naming the call), never lands in a replay's argument bytes half
 * written. */
Test(mt, update_args_beside_a_replaying_thread_is_busy_or_whole) {
  rp_runtime *rt = upd_rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1);
  rp_exec *ex = chain_exec(rt, t, x, 2, 4);
  atomic_store(&upd_failed, 0);
  _Atomic int stop = 0;
  hammer_job h = {ex, &stop, 0, 0, 0, RP_OK};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, replay_until_stop_cb, &h), 0);
  int upd_ok = 0, upd_busy = 0;
  /* the updates yield so that a loaded machine still runs the replaying
   * thread between them (the bound only stops a broken library) */
  for (int64_t k = 0; atomic_load(&h.ok) < 500 && k < 100000000; k++) {
    if (k)
      sched_yield();
    int64_t v[2] = {1 + k % 3, 1 + k % 3};
    rp_status st = rp_exec_update_args(ex, 0, v, sizeof v, NULL);
    if (st == RP_OK)
      upd_ok++;
    else {
      cr_assert_eq(st, RP_EBUSY, "%s (%s)", rp_status_name(st),
                   rp_error_detail());
      cr_assert(strstr(rp_error_detail(), "rp_exec_update_args"), "%s",
                rp_error_detail());
      upd_busy++;
    }
  }
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  RP_CHECK(rp_runtime_drain(rt));
  RP_CHECK(rp_exec_destroy(ex)); /* waits for the replays in flight */
  cr_assert_eq(h.other, 0, "%s", rp_status_name(h.first_other));
  cr_assert_eq(atomic_load(&upd_failed), 0, "a replay saw torn arguments");
  cr_assert_gt(h.ok, 0);
  cr_assert_gt(upd_ok + upd_busy, 0);
  th_destroy(rt);
}

/* rp_exec_trace_start / rp_exec_trace_write from one thread while another
 * replays the exec: refused (RP_EBUSY naming the call) or done whole. */
Test(mt, trace_beside_a_replaying_thread_is_busy_or_whole) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1);
  rp_exec *ex = chain_exec(rt, t, x, 2, 4);
  th_tmpdir_make("/tmp/rp_mt_XXXXXX");
  const char *path = th_tmp_path("trace.json");
  _Atomic int stop = 0;
  hammer_job h = {ex, &stop, 0, 0, 0, RP_OK};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, replay_until_stop, &h), 0);
  int written = 0;
  for (int k = 0; atomic_load(&h.ok) < 300 && k < 100000; k++) {
    rp_status st = rp_exec_trace_start(ex, 3);
    if (st == RP_OK || st == RP_EBUSY) {
      if (st == RP_EBUSY)
        cr_assert(strstr(rp_error_detail(), "rp_exec_trace_start"), "%s",
                  rp_error_detail());
      st = rp_exec_trace_write(ex, path);
      if (st == RP_OK)
        written++;
      else
        cr_assert(st == RP_EBUSY || st == RP_EINVAL, "%s (%s)",
                  rp_status_name(st), rp_error_detail());
    } else {
      cr_assert_fail("trace_start: %s (%s)", rp_status_name(st),
                     rp_error_detail());
    }
  }
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  cr_assert_eq(h.other, 0, "%s", rp_status_name(h.first_other));
  RP_CHECK(rp_runtime_drain(rt));
  RP_CHECK(rp_exec_destroy(ex));
  th_tmpdir_remove();
  th_destroy(rt);
  (void)written;
}

/* ---- eager launches and drains from several threads ---- */

typedef struct {
  rp_runtime *rt;
  rp_task_id t;
  rp_inst own, shared;
  int n;
  rp_status st;
} eager_job;

static void *eager_adds(void *p) {
  eager_job *j = p;
  int64_t one[2] = {1, 1};
  for (int i = 0; i < j->n && !j->st; i++) {
    rp_access acc = {i % 2 ? j->own : j->shared, RP_RW, RP_REDOP_NONE};
    j->st = rp_launch_task(j->rt,
                           &(rp_launch){.task = j->t,
                                        .proc = (rp_proc)(i % 2),
                                        .accesses = &acc,
                                        .naccess = 1,
                                        .args = one,
                                        .args_size = sizeof one},
                           NULL);
    if (!j->st && i % 64 == 0)
      j->st = rp_runtime_drain(j->rt);
  }
  if (!j->st)
    j->st = rp_runtime_drain(j->rt);
  return NULL;
}

Test(mt, eager_launches_and_drains_from_four_threads_are_exact) {
  enum { T = 4, N = 600 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst shared = i64_inst(rt, 1);
  eager_job j[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    j[i] = (eager_job){rt, t, i64_inst(rt, 1), shared, N, RP_OK};
    cr_assert_eq(pthread_create(&th[i], NULL, eager_adds, &j[i]), 0);
  }
  for (int i = 0; i < T; i++)
    pthread_join(th[i], NULL);
  RP_CHECK(rp_runtime_drain(rt));
  for (int i = 0; i < T; i++) {
    cr_assert_eq(j[i].st, RP_OK, "%s", rp_status_name(j[i].st));
    cr_assert_eq(read0(rt, j[i].own), N / 2);
  }
  cr_assert_eq(read0(rt, shared), T * N / 2);
  th_destroy(rt);
}

/* ---- instances and tasks made and freed while replays run ---- */

typedef struct {
  rp_runtime *rt;
  int n;
  rp_status st;
} churn_job;

static void *instance_churn(void *p) {
  churn_job *j = p;
  for (int i = 0; i < j->n && !j->st; i++) {
    rp_inst a;
    rp_rect r = rp_rect_1d(0, 7);
    j->st = rp_instance_create(j->rt, 0, RP_F32, &r, NULL, &a);
    if (j->st)
      break;
    char name[32];
    snprintf(name, sizeof name, "churn%d", i % 5);
    if ((j->st = rp_instance_set_name(j->rt, a, name)) != RP_OK)
      break;
    if (i % 3 == 0 && (j->st = rp_instance_realloc(j->rt, &a)) != RP_OK)
      break;
    j->st = rp_instance_free(j->rt, a);
  }
  return NULL;
}

static void *task_churn(void *p) {
  churn_job *j = p;
  for (int i = 0; i < j->n && !j->st; i++) {
    char name[32];
    snprintf(name, sizeof name, "churn_task_%d", i);
    rp_task_id id;
    j->st = rp_task_register(
        j->rt, &(rp_task_desc){.name = name, .cpu_fn = add_arg_task}, &id);
    if (!j->st)
      j->st = rp_task_find(j->rt, name, &id);
  }
  return NULL;
}

/* Instances created, renamed, reallocated and freed and tasks registered
 * on two threads while a third replays an exec and the main thread
 * launches eagerly: the replays (which walk their instances' generations
 * whenever the instance epoch moved) and the eager ops stay exact. */
Test(mt, instance_and_task_churn_beside_replays_and_launches) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1), y = i64_inst(rt, 1);
  rp_exec *ex = chain_exec(rt, t, x, 3, 4);
  replay_job rj = {rt, ex, 300, NULL, RP_OK, 0, 0};
  churn_job ci = {rt, 400, RP_OK}, ct = {rt, 300, RP_OK};
  pthread_t a, b, c;
  cr_assert_eq(pthread_create(&a, NULL, replay_n, &rj), 0);
  cr_assert_eq(pthread_create(&b, NULL, instance_churn, &ci), 0);
  cr_assert_eq(pthread_create(&c, NULL, task_churn, &ct), 0);
  int64_t one[2] = {1, 1};
  rp_access acc = {y, RP_RW, RP_REDOP_NONE};
  for (int i = 0; i < 300; i++)
    RP_CHECK(rp_launch_task(rt,
                            &(rp_launch){.task = t,
                                         .proc = RP_PROC_ANY,
                                         .accesses = &acc,
                                         .naccess = 1,
                                         .args = one,
                                         .args_size = sizeof one},
                            NULL));
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_join(c, NULL);
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(rj.st, RP_OK, "%s", rp_status_name(rj.st));
  cr_assert_eq(ci.st, RP_OK, "%s", rp_status_name(ci.st));
  cr_assert_eq(ct.st, RP_OK, "%s", rp_status_name(ct.st));
  cr_assert_eq(read0(rt, x), 300 * 3);
  cr_assert_eq(read0(rt, y), 300);
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* ---- events across threads ---- */

typedef struct {
  rp_runtime *rt;
  rp_event e;
  _Atomic int *woke;
  rp_status st;
} waiter;

static void *wait_forever(void *p) {
  waiter *w = p;
  w->st = rp_event_wait(w->rt, w->e, -1);
  atomic_fetch_add(w->woke, 1);
  return NULL;
}

static _Atomic int cb_calls;
static void count_cb(void *arg, rp_status st) {
  (void)arg;
  if (st == RP_OK)
    atomic_fetch_add(&cb_calls, 1);
}

typedef struct {
  rp_runtime *rt;
  rp_event e;
  rp_status st;
} trig_job;

static void *trigger_it(void *p) {
  trig_job *j = p;
  j->st = rp_event_trigger(j->rt, j->e);
  return NULL;
}

/* Many threads wait on one user event, callbacks are registered on it from
 * others as it triggers, and two threads trigger it at once: every waiter
 * wakes with RP_OK (no lost wake-up), every callback runs once, one
 * trigger wins and the other is RP_EINVAL. */
Test(mt, one_event_many_waiters_two_triggers_and_callbacks) {
  enum { W = 6, ROUNDS = 50 };
  rp_runtime *rt = th_cpu_runtime(2);
  for (int round = 0; round < ROUNDS; round++) {
    rp_event e;
    RP_CHECK(rp_event_create(rt, &e));
    _Atomic int woke = 0;
    atomic_store(&cb_calls, 0);
    waiter w[W];
    pthread_t th[W];
    for (int i = 0; i < W; i++) {
      w[i] = (waiter){rt, e, &woke, RP_EAGAIN};
      cr_assert_eq(pthread_create(&th[i], NULL, wait_forever, &w[i]), 0);
    }
    RP_CHECK(rp_event_on_complete(rt, e, count_cb, NULL));
    trig_job t1 = {rt, e, RP_EAGAIN}, t2 = {rt, e, RP_EAGAIN};
    pthread_t a, b;
    cr_assert_eq(pthread_create(&a, NULL, trigger_it, &t1), 0);
    cr_assert_eq(pthread_create(&b, NULL, trigger_it, &t2), 0);
    RP_CHECK(rp_event_on_complete(rt, e, count_cb, NULL));
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_assert((t1.st == RP_OK) != (t2.st == RP_OK), "%s %s",
              rp_status_name(t1.st), rp_status_name(t2.st));
    cr_assert(t1.st == RP_EINVAL || t2.st == RP_EINVAL);
    for (int i = 0; i < W; i++) {
      pthread_join(th[i], NULL);
      cr_assert_eq(w[i].st, RP_OK, "%s", rp_status_name(w[i].st));
    }
    cr_assert_eq(atomic_load(&woke), W);
    cr_assert_eq(atomic_load(&cb_calls), 2);
    RP_CHECK(rp_event_release(rt, e));
  }
  th_destroy(rt);
}

/* ---- capture across threads ---- */

typedef struct {
  rp_runtime *rt;
  _Atomic int *go;
  rp_status st;
} begin_job;

static _Atomic int capturing, overlapped;

static void *begin_then_abort(void *p) {
  begin_job *j = p;
  while (!atomic_load(j->go))
    ;
  j->st = rp_capture_begin(j->rt, NULL);
  if (j->st == RP_OK) {
    if (atomic_fetch_add(&capturing, 1) != 0)
      atomic_store(&overlapped, 1);
    usleep(1000);
    atomic_fetch_sub(&capturing, 1);
    rp_status st = rp_capture_abort(j->rt);
    if (st)
      j->st = st;
  }
  return NULL;
}

/* Two threads opening a capture on one runtime at once: one at a time
 * records, the other gets RP_ECAPTURE; never both at once. */
Test(mt, two_threads_beginning_a_capture_never_both_record) {
  rp_runtime *rt = th_cpu_runtime(2);
  for (int round = 0; round < 50; round++) {
    _Atomic int go = 0;
    begin_job a = {rt, &go, RP_EAGAIN}, b = {rt, &go, RP_EAGAIN};
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, begin_then_abort, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, begin_then_abort, &b), 0);
    atomic_store(&go, 1);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert(a.st == RP_OK || a.st == RP_ECAPTURE, "%s", rp_status_name(a.st));
    cr_assert(b.st == RP_OK || b.st == RP_ECAPTURE, "%s", rp_status_name(b.st));
    cr_assert(a.st == RP_OK || b.st == RP_OK, "one of them records");
  }
  cr_assert_eq(atomic_load(&overlapped), 0, "two captures were open at once");
  th_destroy(rt);
}

/* ---- the runtime's destroy beside a thread that uses it ---- */

/* rp_runtime_destroy while another thread replays an exec of it: RP_EBUSY
 * (an exec is alive), nothing freed; the replays go on and are exact. */
Test(mt, runtime_destroy_beside_a_replaying_thread_is_busy) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1);
  rp_exec *ex = chain_exec(rt, t, x, 2, 4);
  replay_job j = {rt, ex, 300, NULL, RP_OK, 0, 0};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, replay_n, &j), 0);
  for (int k = 0; k < 20; k++)
    RP_EXPECT(rp_runtime_destroy(rt), RP_EBUSY);
  pthread_join(th, NULL);
  cr_assert_eq(j.st, RP_OK, "%s", rp_status_name(j.st));
  cr_assert_eq(read0(rt, x), 300 * 2);
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* While one thread is inside rp_exec_tune (its trial replay held in a
 * task), rp_exec_update_args, rp_exec_trace_start and rp_exec_trace_write
 * from another are RP_EBUSY naming the call and the calls that hold the
 * exec, and change nothing: the update would otherwise wait inside tune's
 * trial replays and write the argument bytes they read, a trace would
 * start in the middle of them. */
Test(mt, calls_that_change_an_exec_beside_a_tuning_thread_are_busy) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "hold", th_held_task);
  rp_inst x = i64_inst(rt, 1);
  rp_exec *ex = adds_exec(rt, t, &x, 0, 1, NULL);
  th_tmpdir_make("/tmp/rp_mt_XXXXXX");
  const char *path = th_tmp_path("trace.json");
  th_held_tune_start(ex, add_arg_task); /* each trial replay adds 1 */
  static const char holders[] =
      "another thread is inside rp_replay, rp_exec_tune, rp_exec_destroy, "
      "rp_exec_update_args, rp_exec_trace_start or rp_exec_trace_write";
  int64_t two[2] = {2, 2};
  int reinst = -1;
  RP_EXPECT(rp_exec_update_args(ex, 0, two, sizeof two, &reinst), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "rp_exec_update_args: "), "%s",
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), holders), "%s", rp_error_detail());
  cr_assert_eq(reinst, -1, "an out-parameter written on an error");
  RP_EXPECT(rp_exec_trace_start(ex, 2), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "rp_exec_trace_start: "), "%s",
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), holders), "%s", rp_error_detail());
  RP_EXPECT(rp_exec_trace_write(ex, path), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "rp_exec_trace_write: "), "%s",
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), holders), "%s", rp_error_detail());
  rp_status tuned = th_held_tune_finish();
  cr_assert_eq(tuned, RP_OK, "rp_exec_tune: %s", rp_status_name(tuned));
  /* nothing changed: every trial replay added 1, no trace is armed */
  int64_t v = read0(rt, x);
  RP_EXPECT(rp_exec_trace_write(ex, path), RP_EINVAL);
  RP_CHECK(rp_exec_update_args(ex, 0, two, sizeof two, NULL));
  rp_event d;
  RP_CHECK(rp_replay(ex, NULL, &d));
  RP_CHECK(rp_event_wait(rt, d, 60 * SEC));
  RP_CHECK(rp_event_release(rt, d));
  cr_assert_eq(read0(rt, x), v + 2);
  RP_CHECK(rp_exec_destroy(ex));
  th_tmpdir_remove();
  th_destroy(rt);
}

/* ---- graphs built, instantiated and replayed on several threads ---- */

typedef struct {
  rp_runtime *rt;
  rp_task_id t;
  rp_inst x;
  int rounds, capture;
  rp_status st;
  char where[64];
} build_job;

#define BJ_TRY(call)                                                           \
  do {                                                                         \
    if ((j->st = (call)) != RP_OK) {                                           \
      snprintf(j->where, sizeof j->where, "%s", #call);                        \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

/* Builds (with the builder, or by capture when j->capture) a chain of 3
 * add_arg ops on j->x, instantiates it, replays it twice and destroys
 * everything, j->rounds times. */
static void *build_and_replay(void *p) {
  build_job *j = p;
  int64_t one[2] = {1, 1};
  rp_access acc = {j->x, RP_RW, RP_REDOP_NONE};
  rp_launch l = {.task = j->t,
                 .proc = RP_PROC_ANY,
                 .accesses = &acc,
                 .naccess = 1,
                 .args = one,
                 .args_size = sizeof one};
  for (int r = 0; r < j->rounds; r++) {
    rp_graph *g;
    if (j->capture) {
      rp_status st;
      while ((st = rp_capture_begin(j->rt, NULL)) == RP_ECAPTURE)
        sched_yield(); /* the other thread's capture is open */
      BJ_TRY(st);
      for (int i = 0; i < 3; i++)
        BJ_TRY(rp_launch_task(j->rt, &l, NULL));
      BJ_TRY(rp_capture_end(j->rt, &g));
    } else {
      BJ_TRY(rp_graph_create(j->rt, &g));
      rp_op_id prev = 0, op;
      for (int i = 0; i < 3; i++) {
        BJ_TRY(rp_graph_add_task(g, &l, &op));
        if (i)
          BJ_TRY(rp_graph_add_edge(g, prev, op));
        prev = op;
      }
    }
    rp_exec *ex;
    BJ_TRY(rp_instantiate(g, NULL, &ex));
    BJ_TRY(rp_graph_destroy(g));
    for (int k = 0; k < 2; k++) {
      rp_event d;
      BJ_TRY(rp_replay(ex, NULL, &d));
      BJ_TRY(rp_event_wait(j->rt, d, 60 * SEC));
      BJ_TRY(rp_event_release(j->rt, d));
    }
    BJ_TRY(rp_exec_destroy(ex));
  }
  return NULL;
}

/* Four threads each build their own graphs on one runtime (two with the
 * builder, two by capture, taking turns at the one capture a runtime has
 * open at a time), instantiate, replay and destroy them: every replay is
 * exact. */
Test(mt, graphs_built_instantiated_and_replayed_on_four_threads) {
  enum { T = 4, R = 25 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  build_job j[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    j[i] = (build_job){rt, t, i64_inst(rt, 1), R, i % 2, RP_OK, ""};
    cr_assert_eq(pthread_create(&th[i], NULL, build_and_replay, &j[i]), 0);
  }
  for (int i = 0; i < T; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    cr_assert_eq(j[i].st, RP_OK, "thread %d: %s -> %s", i, j[i].where,
                 rp_status_name(j[i].st));
    cr_assert_eq(read0(rt, j[i].x), R * 2 * 3);
  }
  th_destroy(rt);
}

/* ---- the event table grows while replays complete events ---- */

static void *event_flood(void *p) {
  churn_job *j = p;
  enum { N = 3000 };
  static rp_event evs[N];
  for (int round = 0; round < j->n && !j->st; round++) {
    int made = 0;
    for (; made < N; made++)
      if ((j->st = rp_event_create(j->rt, &evs[made])) != RP_OK)
        break;
    for (int i = 0; i < made; i++) {
      rp_status st = rp_event_trigger(j->rt, evs[i]);
      if (st == RP_OK)
        st = rp_event_release(j->rt, evs[i]);
      if (st && !j->st)
        j->st = st;
    }
  }
  return NULL;
}

/* One thread creates thousands of events at once (the runtime's event
 * table grows) while another replays and waits for done events from the
 * same table: every replay completes, every event is exact. */
Test(mt, event_table_growth_beside_replays) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst x = i64_inst(rt, 1);
  rp_exec *ex = chain_exec(rt, t, x, 2, 4);
  replay_job rj = {rt, ex, 400, NULL, RP_OK, 0, 0};
  churn_job ce = {rt, 4, RP_OK};
  pthread_t a, b;
  cr_assert_eq(pthread_create(&b, NULL, event_flood, &ce), 0);
  cr_assert_eq(pthread_create(&a, NULL, replay_n, &rj), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  cr_assert_eq(rj.st, RP_OK, "%s", rp_status_name(rj.st));
  cr_assert_eq(ce.st, RP_OK, "%s", rp_status_name(ce.st));
  cr_assert_eq(read0(rt, x), 400 * 2);
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* ---- rp_exec_tune beside another exec's replays ---- */

/* A fan of `n` add_arg ops, op i on x[i], the default options. */
static rp_exec *fan_exec(rp_runtime *rt, rp_task_id t, const rp_inst *x,
                         int n) {
  return adds_exec(rt, t, x, 1, n, NULL);
}

/* The main thread tunes an exec (a fan of unhinted ops, re-placed onto one
 * worker and back: the cost source alternates) while another thread
 * replays a second exec on the same workers: both stay exact. */
Test(mt, tune_beside_another_execs_replays) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_arg", add_arg_task);
  rp_inst xs[4], y = i64_inst(rt, 1);
  for (int i = 0; i < 4; i++)
    xs[i] = i64_inst(rt, 1);
  rp_exec *tuned = fan_exec(rt, t, xs, 4);
  rp_exec *other = chain_exec(rt, t, y, 3, 4);
  replay_job rj = {rt, other, 300, NULL, RP_OK, 0, 0};
  pthread_t a;
  cr_assert_eq(pthread_create(&a, NULL, replay_n, &rj), 0);
  uint32_t total = 0;
  for (int k = 0; k < 6; k++) {
    rp__tune_cost_hook = k % 2 ? th_cost_all_equal : th_cost_one_worker_wins;
    uint32_t ran = 0;
    RP_CHECK(rp_exec_tune(tuned, NULL, &ran));
    total += ran;
    rp_event d;
    RP_CHECK(rp_replay(tuned, NULL, &d));
    RP_CHECK(rp_event_wait(rt, d, 60 * SEC));
    RP_CHECK(rp_event_release(rt, d));
    total++;
  }
  rp__tune_cost_hook = NULL;
  pthread_join(a, NULL);
  cr_assert_eq(rj.st, RP_OK, "%s", rp_status_name(rj.st));
  cr_assert_eq(read0(rt, y), 300 * 3);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(read0(rt, xs[i]), (int64_t)total);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(tuned, &s));
  cr_assert_gt(s.replacements, 0, "the placement never changed");
  RP_CHECK(rp_exec_destroy(tuned));
  RP_CHECK(rp_exec_destroy(other));
  th_destroy(rt);
}

/* Access 0 gets the number of cores the worker running it may use. */
static rp_status cores_task(rp_task_ctx *ctx) {
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof s, &s) != 0)
    return rp_error_set(RP_EIO, "sched_getaffinity failed");
  *(int64_t *)rp_ctx_ptr(ctx, 0) = CPU_COUNT(&s);
  return RP_OK;
}

/* REPRISE_PIN is read by rp_runtime_create, never by a worker thread
 * later: a program's setenv after create (setenv is not thread-safe, and
 * a getenv in a starting worker crashed under one) changes nothing, and
 * with REPRISE_PIN=1 at create each worker runs on one core. */
Test(mt, reprise_pin_is_read_at_create_and_pins_each_worker) {
  cpu_set_t all;
  cr_assert_eq(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2)
    cr_skip_test("one core: pinning changes nothing to see");
  for (int on = 0; on < 2; on++) {
    if (on)
      cr_assert_eq(setenv("REPRISE_PIN", "1", 1), 0);
    else
      unsetenv("REPRISE_PIN");
    rp_runtime *rt = th_cpu_runtime(2);
    /* what the program sets after create: the other value, many times */
    for (int i = 0; i < 1000; i++) {
      if (on)
        unsetenv("REPRISE_PIN");
      else
        cr_assert_eq(setenv("REPRISE_PIN", "1", 1), 0);
    }
    rp_task_id t = th_task(rt, "cores", cores_task);
    rp_inst x = i64_inst(rt, 1);
    for (rp_proc w = 0; w < 2; w++) {
      rp_access acc = {x, RP_WRITE, RP_REDOP_NONE};
      rp_event d;
      RP_CHECK(rp_launch_task(
          rt,
          &(rp_launch){.task = t, .proc = w, .accesses = &acc, .naccess = 1},
          &d));
      RP_CHECK(rp_event_wait(rt, d, 60 * SEC));
      RP_CHECK(rp_event_release(rt, d));
      int64_t n = read0(rt, x);
      if (on)
        cr_assert_eq(n, 1,
                     "REPRISE_PIN=1 at create: worker %u may use %lld "
                     "cores",
                     (unsigned)w, (long long)n);
      else
        cr_assert_eq(n, CPU_COUNT(&all),
                     "REPRISE_PIN unset at create: worker %u may use %lld "
                     "of %d cores",
                     (unsigned)w, (long long)n, CPU_COUNT(&all));
    }
    th_destroy(rt);
  }
  unsetenv("REPRISE_PIN");
}
