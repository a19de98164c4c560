/* test/test_nolock.c — the replay path takes no lock.
 *
 * This binary links with the linker's --wrap for the pthread calls that
 * take or wait on a lock (test/CMakeLists.txt): pthread_mutex_lock,
 * _trylock and _timedlock, pthread_rwlock_rdlock, _wrlock, their try and
 * timed forms, pthread_spin_lock and _trylock, pthread_cond_wait and
 * _timedwait. Every call the library (and this file) makes goes through
 * the wrappers below, which count the calls made while armed, apart for the
 * test's thread (the one calling rp_replay) and every other thread (the
 * CPU workers). Calls inside libc or other shared libraries (jemalloc,
 * Criterion, BLAS) are not wrapped.
 *
 * Each case instantiates an exec with max_inflight 4, warms it up with 2
 * replays, then counts over 1,000 replays kept 4 in flight: observed by
 * polling rp_event_query on each done event (no waiter), released at once
 * (rp_replay waits for a free slot), or waited for with rp_event_wait. The
 * first two take no lock on any thread (reprise.h, docs/architecture.md);
 * rp_event_wait sleeps on the event's state word, not on its lock. */
#include "helpers.h"
#include "kernels/tasks.h"
#include "train/data.h"
#include "train/mlp.h"
#include "xfer/xfer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- the wrappers ---- */

/* LK_FOLD: the block locks of a CPU SUM fold (rp__xfer_is_fold_lock) */
enum { LK_FOLD, LK_MUTEX, LK_RWLOCK, LK_SPIN, LK_COND, LK_KINDS };
static const char *const lk_name[LK_KINDS] = {"fold block lock", "mutex",
                                              "rwlock", "spin", "cond wait"};

static atomic_int lk_armed;
static _Thread_local int lk_host; /* 1 on the test's thread */
/* [0] the test's thread, [1] every other thread */
static atomic_long lk_calls[2][LK_KINDS];
/* Where the first calls while armed came from (for the message). */
#define LK_CALLERS 6
static atomic_long lk_seen;
static void *_Atomic lk_caller[LK_CALLERS];

static void lk_note(int kind, void *caller) {
  if (!atomic_load_explicit(&lk_armed, memory_order_relaxed))
    return;
  atomic_fetch_add(&lk_calls[lk_host ? 0 : 1][kind], 1);
  long i = atomic_fetch_add(&lk_seen, 1);
  if (i < LK_CALLERS)
    atomic_store(&lk_caller[i], caller);
}

#define LK_WRAP(ret, name, kind, params, args)                                 \
  ret __real_##name params;                                                    \
  ret __wrap_##name params;                                                    \
  ret __wrap_##name params {                                                   \
    lk_note(kind, __builtin_return_address(0));                                \
    return __real_##name args;                                                 \
  }

#define LK_M (rp__xfer_is_fold_lock(m) ? LK_FOLD : LK_MUTEX)
LK_WRAP(int, pthread_mutex_lock, LK_M, (pthread_mutex_t * m), (m))
LK_WRAP(int, pthread_mutex_trylock, LK_M, (pthread_mutex_t * m), (m))
LK_WRAP(int, pthread_mutex_timedlock, LK_M,
        (pthread_mutex_t * m, const struct timespec *t), (m, t))
LK_WRAP(int, pthread_rwlock_rdlock, LK_RWLOCK, (pthread_rwlock_t * l), (l))
LK_WRAP(int, pthread_rwlock_wrlock, LK_RWLOCK, (pthread_rwlock_t * l), (l))
LK_WRAP(int, pthread_rwlock_tryrdlock, LK_RWLOCK, (pthread_rwlock_t * l), (l))
LK_WRAP(int, pthread_rwlock_trywrlock, LK_RWLOCK, (pthread_rwlock_t * l), (l))
LK_WRAP(int, pthread_rwlock_timedrdlock, LK_RWLOCK,
        (pthread_rwlock_t * l, const struct timespec *t), (l, t))
LK_WRAP(int, pthread_rwlock_timedwrlock, LK_RWLOCK,
        (pthread_rwlock_t * l, const struct timespec *t), (l, t))
LK_WRAP(int, pthread_spin_lock, LK_SPIN, (pthread_spinlock_t * s), (s))
LK_WRAP(int, pthread_spin_trylock, LK_SPIN, (pthread_spinlock_t * s), (s))
LK_WRAP(int, pthread_cond_wait, LK_COND,
        (pthread_cond_t * c, pthread_mutex_t *m), (c, m))
LK_WRAP(int, pthread_cond_timedwait, LK_COND,
        (pthread_cond_t * c, pthread_mutex_t *m, const struct timespec *t),
        (c, m, t))

typedef struct lk_counts {
  long host, workers;     /* every kind */
  long kind[2][LK_KINDS]; /* [host/workers][kind] */
  char where[512];        /* the first callers, as object+offset */
} lk_counts;

static void lk_arm(void) {
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < LK_KINDS; k++)
      atomic_store(&lk_calls[h][k], 0);
  atomic_store(&lk_seen, 0);
  lk_host = 1;
  atomic_store(&lk_armed, 1);
}

static lk_counts lk_disarm(void) {
  atomic_store(&lk_armed, 0);
  lk_counts c;
  memset(&c, 0, sizeof c);
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < LK_KINDS; k++) {
      c.kind[h][k] = atomic_load(&lk_calls[h][k]);
      *(h ? &c.workers : &c.host) += c.kind[h][k];
    }
  long seen = atomic_load(&lk_seen);
  for (long i = 0; i < LK_CALLERS && i < seen; i++) {
    Dl_info di;
    void *a = atomic_load(&lk_caller[i]);
    size_t len = strlen(c.where);
    /* an offset in the object, for addr2line -e */
    int known = dladdr(a, &di) != 0;
    snprintf(c.where + len, sizeof c.where - len, " %s+%#zx",
             known && di.dli_fname ? di.dli_fname : "?",
             known ? (size_t)((char *)a - (char *)di.dli_fbase) : 0);
  }
  return c;
}

static void lk_describe(const lk_counts *c, char *out, size_t n) {
  size_t len = 0;
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < LK_KINDS; k++)
      if (c->kind[h][k] && len < n)
        len += (size_t)snprintf(out + len, n - len, "%s%s %s: %ld",
                                len ? ", " : "", h ? "workers" : "host",
                                lk_name[k], c->kind[h][k]);
  if (len < n)
    snprintf(out + len, n - len, "; first from%s", c->where);
}

/* ---- the replay window ---- */

#define INFLIGHT 4u
#define WINDOW 1000u

typedef enum observe {
  OBSERVE_POLL,     /* rp_event_query until done, then release */
  OBSERVE_RELEASE,  /* release at once: rp_replay waits for a slot */
  OBSERVE_WAIT,     /* rp_event_wait, then release */
  OBSERVE_CALLBACK, /* a callback (rp_event_on_complete), then as POLL */
} observe;

static const char *const observe_name[] = {
    "polled", "released at once", "waited for", "polled, with a callback"};

/* The replay's argument block for replay i (NULL: none). */
typedef const void *(*args_fn)(void *ctx, uint32_t i, size_t *size);

static atomic_uint callbacks_run;

static void count_callback(void *arg, rp_status st) {
  (void)arg;
  if (st == RP_OK)
    atomic_fetch_add(&callbacks_run, 1);
}

static rp_status observe_done(rp_runtime *rt, rp_event e, observe how) {
  rp_status st = RP_OK;
  if (how == OBSERVE_WAIT)
    st = rp_event_wait(rt, e, -1);
  else if (how != OBSERVE_RELEASE)
    while ((st = rp_event_query(rt, e)) == RP_EAGAIN)
      sched_yield();
  rp_status rs = rp_event_release(rt, e);
  return st ? st : rs;
}

/* One replay (i), waited for; its lock calls in *one when one is given. */
static void replay_one(rp_runtime *rt, rp_exec *ex, args_fn args, void *ctx,
                       uint32_t i, lk_counts *one) {
  size_t size = 0;
  const void *a = args ? args(ctx, i, &size) : NULL;
  rp_event e;
  if (one)
    lk_arm();
  rp_status st =
      rp_replay(ex, &(rp_replay_args){.args = a, .args_size = size}, &e);
  if (st == RP_OK)
    st = observe_done(rt, e, OBSERVE_WAIT);
  if (one)
    *one = lk_disarm();
  cr_assert_eq(st, RP_OK, "replay %u: %s (%s)", i, rp_status_name(st),
               rp_error_detail());
}

/* Two replays waited for (the second counted into *one), then WINDOW
 * replays kept INFLIGHT in flight and observed as `how` says, counted; the
 * last one is observed as the others are, and then every replay has
 * completed (in order). */
static lk_counts replay_window(rp_runtime *rt, rp_exec *ex, args_fn args,
                               void *ctx, observe how, lk_counts *one) {
  rp_event ev[INFLIGHT];
  replay_one(rt, ex, args, ctx, 0, NULL);
  replay_one(rt, ex, args, ctx, 1, one);
  uint32_t i = 2;
  rp_status st = RP_OK;
  uint32_t issued = 0, observed = 0;
  atomic_store(&callbacks_run, 0);
  lk_arm();
  for (uint32_t k = 0; k < WINDOW && st == RP_OK; k++, i++) {
    if (issued - observed == INFLIGHT && how != OBSERVE_RELEASE)
      st = observe_done(rt, ev[observed++ % INFLIGHT], how);
    size_t size = 0;
    const void *a = args ? args(ctx, i, &size) : NULL;
    rp_event *e = &ev[issued % INFLIGHT];
    if (st == RP_OK)
      st = rp_replay(ex, &(rp_replay_args){.args = a, .args_size = size}, e);
    if (st != RP_OK)
      break;
    issued++;
    if (how == OBSERVE_CALLBACK)
      st = rp_event_on_complete(rt, *e, count_callback, NULL);
    else if (how == OBSERVE_RELEASE) {
      /* the last one is polled: its completion is every replay's */
      st = k + 1 < WINDOW ? rp_event_release(rt, *e)
                          : observe_done(rt, *e, OBSERVE_POLL);
      observed++;
    }
  }
  while (st == RP_OK && observed < issued)
    st = observe_done(rt, ev[observed++ % INFLIGHT], how);
  lk_counts c = lk_disarm();
  cr_assert_eq(st, RP_OK, "replays %s: %s (%s)", observe_name[how],
               rp_status_name(st), rp_error_detail());
  cr_assert_eq(issued, WINDOW);
  if (how == OBSERVE_CALLBACK)
    cr_assert_eq(atomic_load(&callbacks_run), WINDOW);
  return c;
}

/* No lock call on any thread but `allowed` on the workers. */
static void assert_locks(const char *what, observe how, const lk_counts *c,
                         int allowed) {
  char desc[768];
  lk_describe(c, desc, sizeof desc);
  long others = c->workers - (allowed >= 0 ? c->kind[1][allowed] : 0);
  cr_assert(c->host == 0 && others == 0,
            "%s, %u replays %u in flight %s: %ld lock call(s) on the "
            "calling thread, %ld on the workers (%s)",
            what, WINDOW, INFLIGHT, observe_name[how], c->host, c->workers,
            desc);
}

/* ---- the steps ---- */

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

#define CHAIN 300

/* Unhinted (no cost hints, any processor): a fork-join (eight adds over
 * four instances joined by a sum of all four) and a chain of CHAIN empty
 * tasks on a fifth and sixth instance, alternately read-write and read. */
static rp_graph *unhinted_dag(rp_runtime *rt, const rp_inst *x) {
  rp_task_id t = th_task(rt, "add1", th_add1_task);
  rp_task_id j = th_task(rt, "sum4", th_sum4_task);
  rp_task_id e = th_task(rt, "empty", empty_task);
  RP_CHECK(rp_capture_begin(rt, NULL));
  th_launch_unhinted_fan(rt, t, j, x);
  for (int i = 0; i < CHAIN; i++) {
    rp_access a = {x[5], i % 2 ? RP_READ : RP_RW, 0};
    RP_CHECK(rp_launch_task(
        rt,
        &(rp_launch){
            .task = e, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
        NULL));
  }
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  return g;
}

static void dag_case(observe how) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x[6];
  rp_rect r = rp_rect_1d(0, 0);
  int64_t zero = 0;
  for (int i = 0; i < 6; i++) {
    RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x[i]));
    RP_CHECK(rp_instance_write(rt, x[i], &zero, sizeof zero));
  }
  rp_graph *g = unhinted_dag(rt, x);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = INFLIGHT}, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 2, "unhinted: spread over both workers");
  lk_counts c = replay_window(rt, ex, NULL, NULL, how, NULL);
  if (how == OBSERVE_CALLBACK) {
    /* the event's lock: registering on a pending event (the calling
     * thread), completing an event with a callback (a worker) */
    char desc[768];
    lk_describe(&c, desc, sizeof desc);
    cr_assert(c.host == c.kind[0][LK_MUTEX] &&
                  c.workers == c.kind[1][LK_MUTEX] && c.host <= (long)WINDOW &&
                  c.workers <= (long)WINDOW,
              "%u replays with a callback each: at most one lock of the "
              "event per replay on each side (%s)",
              WINDOW, desc);
  } else {
    assert_locks("unhinted fork-join and chain", how, &c, -1);
  }
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, WINDOW + 2);
  cr_assert_eq(s.ops_run, (WINDOW + 2ull) * (9 + CHAIN));
  for (int i = 0; i < 5; i++) {
    int64_t v;
    RP_CHECK(rp_instance_read(rt, x[i], &v, sizeof v));
    cr_assert_eq(v, (i < 4 ? 2 : 8) * (int64_t)(WINDOW + 2), "x[%d] = %lld", i,
                 (long long)v);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_free(rt, x[i]));
  th_destroy(rt);
}

typedef struct mlp_args {
  rp_mlp_step_args a;
  uint32_t batches;
} mlp_args;

static const void *mlp_step(void *ctx, uint32_t i, size_t *size) {
  mlp_args *m = ctx;
  m->a.batch = i % m->batches;
  *size = sizeof m->a;
  return &m->a;
}

/* The MLP step on `procs` processors (2 workers): tasks, copies and, on
 * 2, the parallel operators (a replicate, the gradients' sum of parts,
 * whose SUM copies fold under the block locks). On 1 no lock is taken;
 * on 2 only the folds' block locks, on the workers, as many in every
 * replay. */
static void mlp_case(uint32_t procs, observe how) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_dataset d;
  RP_CHECK(rp_data_generate(RP_DATA_SPIRALS, 256, 2, 3, 7, &d));
  rp_mlp_config mc;
  rp_mlp_config_init(&mc);
  mc.batch = 32;
  mc.procs = procs;
  rp_mlp *mlp;
  RP_CHECK(rp_mlp_create(rt, &k, &mc, &d, &mlp));
  rp_graph *g;
  RP_CHECK(rp_mlp_record(mlp, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = INFLIGHT}, &ex));
  mlp_args ma = {{0, 0.05f}, rp_mlp_batches(mlp)};
  lk_counts one;
  lk_counts c = replay_window(rt, ex, mlp_step, &ma, how, &one);
  char what[64];
  snprintf(what, sizeof what, "the MLP step on %u processor%s", procs,
           procs == 1 ? "" : "s");
  long folds = one.kind[1][LK_FOLD];
  if (procs == 1) {
    assert_locks(what, how, &c, -1);
  } else {
    char desc[768];
    lk_describe(&one, desc, sizeof desc);
    cr_assert(one.host == 0 && one.workers == folds && folds > 0,
              "%s, one replay: the folds' block locks only, on the "
              "workers (%s)",
              what, desc);
    assert_locks(what, how, &c, LK_FOLD);
    cr_assert_eq(c.kind[1][LK_FOLD], (long)WINDOW * folds,
                 "%s: %ld fold block locks in %u replays, %ld in one", what,
                 c.kind[1][LK_FOLD], WINDOW, folds);
  }
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, WINDOW + 2);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_mlp_destroy(mlp));
  rp_data_free(&d);
  th_destroy(rt);
}

/* The wrappers see the library's calls: creating a runtime and registering
 * a task take locks, and an eager SUM copy into host memory takes the fold
 * block locks, so a count of zero below is not a wrapper that counts
 * nothing. */
Test(nolock, the_wrappers_count_the_library_s_calls) {
  lk_arm();
  rp_runtime *rt = th_cpu_runtime(2);
  (void)th_task(rt, "empty", empty_task);
  lk_counts c = lk_disarm();
  cr_assert(c.kind[0][LK_MUTEX] > 0, "no lock counted while creating a "
                                     "runtime and registering a task");
  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &b));
  float v[4096];
  for (int i = 0; i < 4096; i++)
    v[i] = 1.0f;
  RP_CHECK(rp_instance_write(rt, a, v, sizeof v));
  RP_CHECK(rp_instance_write(rt, b, v, sizeof v));
  rp_event done;
  lk_arm();
  RP_CHECK(rp_launch_copy(
      rt, &(rp_copy){.src = a, .dst = b, .redop = RP_REDOP_SUM}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  c = lk_disarm();
  RP_CHECK(rp_event_release(rt, done));
  cr_assert(c.kind[1][LK_FOLD] > 0, "no fold block lock counted in a SUM "
                                    "copy of 16 KiB");
  RP_CHECK(rp_instance_read(rt, b, v, sizeof v));
  cr_assert_eq(v[4095], 2.0f);
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

Test(nolock, dag_replays_polled_take_no_lock) {
  dag_case(OBSERVE_POLL);
}
Test(nolock, dag_replays_released_at_once_take_no_lock) {
  dag_case(OBSERVE_RELEASE);
}
Test(nolock, dag_replays_waited_for_take_no_lock) {
  dag_case(OBSERVE_WAIT);
}
Test(nolock, dag_replays_with_a_callback_take_the_event_lock_at_most_twice) {
  dag_case(OBSERVE_CALLBACK);
}
Test(nolock, mlp_on_one_processor_takes_no_lock) {
  mlp_case(1, OBSERVE_POLL);
  mlp_case(1, OBSERVE_WAIT);
}
Test(nolock, mlp_replays_polled_take_only_the_fold_block_locks) {
  mlp_case(2, OBSERVE_POLL);
}
Test(nolock, mlp_replays_released_at_once_take_only_the_fold_block_locks) {
  mlp_case(2, OBSERVE_RELEASE);
}
Test(nolock, mlp_replays_waited_for_take_only_the_fold_block_locks) {
  mlp_case(2, OBSERVE_WAIT);
}
