/* The replay scheduler's contracts beyond the basic cases of test_replay.c:
 * postconditions at replay, in-order completion seen through callbacks,
 * destroy with callbacks in flight, the placement reason in dumps, the
 * hand-off and wake-up counters, and what steers placement. */
#include "helpers.h"

#include "engine/engine.h"
#include "engine/util.h"
#include "replay/replay_impl.h"

#include <pthread.h>
#include <sched.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static rp_task_id reg(rp_runtime *rt, const char *name, rp_task_fn fn,
                      uint64_t cost_ns) {
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = name, .cpu_fn = fn, .cost_ns = cost_ns}, &t));
  return t;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Busy, not asleep: the worker stays on its core, as a real kernel would. */
static void busy_ns(uint64_t ns) {
  uint64_t t0 = now_ns();
  while (now_ns() - t0 < ns)
    ;
}

/* ---- postconditions ---- */

/* Waits args.delay_us, then writes args.val (interpolated per replay) into
 * its first access; args.fail != 0 fails it instead (RP_ETASK). */
typedef struct wargs {
  int64_t val;
  uint32_t delay_us;
  int32_t fail;
} wargs;

static rp_status write_task(rp_task_ctx *ctx) {
  const wargs *a = rp_ctx_args(ctx, NULL);
  if (a->delay_us)
    busy_ns((uint64_t)a->delay_us * 1000);
  if (a->fail)
    return RP_ETASK;
  *(int64_t *)rp_ctx_ptr(ctx, 0) = a->val;
  return RP_OK;
}

/* On one worker: op A (2 ms, then writes x) feeds postcondition "x"; op B
 * writes y but waits for precondition "gate". The post event must trigger
 * once A finished, with A's value visible, while B still waits (the replay
 * is not done): a post delivered at replay completion would hang here. */
Test(replay, postcondition_triggers_after_its_ops_before_unrelated_ops) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "write", write_task, 0);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x, y;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &y));
  rp_access ax = {x, RP_WRITE, 0}, ay = {y, RP_WRITE, 0};
  wargs wa = {-1, 2000, 0}, wb = {-1, 0, 0};
  rp_interp ipa = {0, offsetof(wargs, val), sizeof(int64_t)};
  rp_interp ipb = {8, offsetof(wargs, val), sizeof(int64_t)};
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event gate, a_ref;
  RP_CHECK(rp_capture_precondition(rt, "gate", &gate, NULL));
  /* B first in program order: the lane still runs A before B, because A
   * does not depend on a precondition */
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = 0,
                                       .accesses = &ay,
                                       .naccess = 1,
                                       .args = &wb,
                                       .args_size = sizeof wb,
                                       .interps = &ipb,
                                       .ninterp = 1,
                                       .wait = gate},
                          NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = 0,
                                       .accesses = &ax,
                                       .naccess = 1,
                                       .args = &wa,
                                       .args_size = sizeof wa,
                                       .interps = &ipa,
                                       .ninterp = 1},
                          &a_ref));
  uint32_t port;
  RP_CHECK(rp_capture_postcondition(rt, "x", &a_ref, 1, &port));
  cr_assert_eq(port, 0);
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_postcondition_count(g), 1);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int64_t k = 0; k < 4; k++) {
    int64_t vals[2] = {100 + k, 200 + k};
    rp_event pre, post, done;
    RP_CHECK(rp_event_create(rt, &pre));
    RP_CHECK(rp_replay(ex,
                       &(rp_replay_args){.args = vals,
                                         .args_size = sizeof vals,
                                         .pre = &pre,
                                         .npre = 1,
                                         .post = &post,
                                         .npost = 1},
                       &done));
    RP_EXPECT(rp_event_wait(rt, post, 10000000000ll), RP_OK);
    int64_t got;
    RP_CHECK(rp_instance_read(rt, x, &got, sizeof got));
    cr_assert_eq(got, 100 + k,
                 "replay %lld: post fired before its op's "
                 "write was visible (x = %lld)",
                 (long long)k, (long long)got);
    RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
    RP_CHECK(rp_instance_read(rt, y, &got, sizeof got));
    cr_assert_eq(got, k ? 200 + k - 1 : 0, "replay %lld: the gated op ran",
                 (long long)k);
    RP_CHECK(rp_event_trigger(rt, pre));
    RP_EXPECT(rp_event_wait(rt, done, -1), RP_OK);
    RP_CHECK(rp_instance_read(rt, y, &got, sizeof got));
    cr_assert_eq(got, 200 + k);
    RP_CHECK(rp_event_release(rt, pre));
    RP_CHECK(rp_event_release(rt, post));
    RP_CHECK(rp_event_release(rt, done));
  }
  /* asking for the wrong number of post events changes nothing */
  rp_event pre, posts[2], done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_EXPECT(rp_replay(ex,
                      &(rp_replay_args){
                          .pre = &pre, .npre = 1, .post = posts, .npost = 2},
                      &done),
            RP_EPORT);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 4);
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}

/* F (worker 0) fails on demand; H (worker 1) reads what F wrote; G (worker
 * 1) is independent. Posts: "f" <- F, "h" <- H, "g" <- G, "fg" <- F and G.
 * A failing F poisons "f", "h" (its dependent was skipped), "fg" and the
 * done event with F's error; "g" still triggers, with G's value visible.
 * The next replay triggers them all. */
Test(replay, failing_op_poisons_its_postconditions_only_then_next_works) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "write", write_task, 0);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x, y, z;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &y));
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &z));
  rp_access af = {x, RP_WRITE, 0}, ag = {y, RP_WRITE, 0};
  rp_access ah[2] = {{z, RP_WRITE, 0}, {x, RP_READ, 0}};
  wargs w0 = {7, 0, 0}, wg = {-1, 0, 0}, wh = {9, 0, 0};
  rp_interp ipf = {0, offsetof(wargs, fail), sizeof(int32_t)};
  rp_interp ipg = {8, offsetof(wargs, val), sizeof(int64_t)};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id F, G, H;
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = 0,
                                          .accesses = &af,
                                          .naccess = 1,
                                          .args = &w0,
                                          .args_size = sizeof w0},
                             &F));
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = 1,
                                          .accesses = &ag,
                                          .naccess = 1,
                                          .args = &wg,
                                          .args_size = sizeof wg},
                             &G));
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = 1,
                                          .accesses = ah,
                                          .naccess = 2,
                                          .args = &wh,
                                          .args_size = sizeof wh},
                             &H));
  RP_CHECK(rp_graph_add_edge(g, F, H));
  RP_CHECK(rp_graph_add_interp(g, F, &ipf));
  RP_CHECK(rp_graph_add_interp(g, G, &ipg));
  enum { PF, PH, PG, PFG, NP };
  rp_port_id p[NP];
  static const char *names[NP] = {"f", "h", "g", "fg"};
  for (int i = 0; i < NP; i++) {
    RP_CHECK(rp_graph_add_postcondition(g, names[i], &p[i]));
    cr_assert_eq(p[i], (rp_port_id)i);
  }
  RP_CHECK(rp_graph_bind_postcondition(g, p[PF], F));
  RP_CHECK(rp_graph_bind_postcondition(g, p[PH], H));
  RP_CHECK(rp_graph_bind_postcondition(g, p[PG], G));
  RP_CHECK(rp_graph_bind_postcondition(g, p[PFG], F));
  RP_CHECK(rp_graph_bind_postcondition(g, p[PFG], G));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int k = 0; k < 4; k++) {
    int fail = k % 2 == 0; /* fail, ok, fail, ok */
    struct {
      int32_t fail, pad;
      int64_t gval;
    } a = {fail, 0, 1000 + k};
    rp_event post[NP], done;
    RP_CHECK(rp_replay(
        ex,
        &(rp_replay_args){
            .args = &a, .args_size = sizeof a, .post = post, .npost = NP},
        &done));
    RP_EXPECT(rp_event_wait(rt, post[PG], 10000000000ll), RP_OK);
    int64_t got;
    RP_CHECK(rp_instance_read(rt, y, &got, sizeof got));
    cr_assert_eq(got, 1000 + k, "replay %d: 'g' fired before G's write", k);
    rp_status want = fail ? RP_ETASK : RP_OK;
    for (int i = 0; i < NP; i++)
      cr_assert_eq(rp_event_wait(rt, post[i], 10000000000ll),
                   i == PG ? RP_OK : want, "replay %d post '%s': %s", k,
                   names[i], rp_status_name(rp_event_query(rt, post[i])));
    RP_EXPECT(rp_event_wait(rt, done, -1), want);
    if (fail)
      cr_assert(strstr(rp_exec_error_detail(ex), "op 0") != NULL, "%s",
                rp_exec_error_detail(ex));
    RP_CHECK(rp_instance_read(rt, z, &got, sizeof got));
    cr_assert_eq(got, k == 0 ? 0 : 9, "replay %d: H ran after F failed", k);
    for (int i = 0; i < NP; i++)
      RP_CHECK(rp_event_release(rt, post[i]));
    RP_CHECK(rp_event_release(rt, done));
  }
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.ops_skipped, 2, "H skipped in the two failing replays");
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  RP_CHECK(rp_instance_free(rt, z));
  th_destroy(rt);
}

/* A replay that runs nothing because an instance went stale must not
 * report its postconditions as produced. */
Test(replay, stale_replay_poisons_its_postconditions) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "write", write_task, 0);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  rp_access ax = {x, RP_WRITE, 0};
  wargs wa = {5, 0, 0};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a;
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = 0,
                                          .accesses = &ax,
                                          .naccess = 1,
                                          .args = &wa,
                                          .args_size = sizeof wa},
                             &a));
  rp_port_id p;
  RP_CHECK(rp_graph_add_postcondition(g, "out", &p));
  RP_CHECK(rp_graph_bind_postcondition(g, p, a));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_instance_realloc(rt, &x));
  rp_event post, done;
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.post = &post, .npost = 1}, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ESTALE);
  RP_EXPECT(rp_event_wait(rt, post, -1), RP_ESTALE);
  RP_CHECK(rp_event_release(rt, post));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* ---- completion order ---- */

#define NORDER 200
static _Atomic uint32_t log_n;
static uint32_t log_r[NORDER];
static _Atomic int32_t log_st[NORDER];
static _Atomic uint32_t cb_runs[NORDER];
static _Atomic uint32_t op_done[NORDER][2]; /* per replay and worker */
static _Atomic int early_done = -1;         /* a replay done too soon */

/* Busy for args[0] ns (interpolated per replay), then marks its replay. */
static rp_status busy_arg_task(rp_task_ctx *ctx) {
  const uint32_t *ns = rp_ctx_args(ctx, NULL);
  busy_ns(*ns);
  uint64_t r = rp_ctx_replay(ctx);
  if (r < NORDER && rp_ctx_proc(ctx) < 2)
    atomic_store(&op_done[r][rp_ctx_proc(ctx)], 1);
  return RP_OK;
}

static void log_cb(void *arg, rp_status st) {
  uint32_t r = (uint32_t)(uintptr_t)arg;
  uint32_t i = atomic_fetch_add(&log_n, 1); /* the completion's position */
  if (i < NORDER)
    log_r[i] = r;
  /* done means both of the replay's ops finished */
  if (!atomic_load(&op_done[r][0]) || !atomic_load(&op_done[r][1]))
    atomic_store(&early_done, (int)r);
  atomic_store(&log_st[r], (int32_t)st);
  atomic_fetch_add(&cb_runs[r], 1);
}

static rp_status nothing_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* rp_replay never waits for a replay that needs something from its
 * caller: with the window of max_inflight replays full and one of them
 * gated on a precondition not yet triggered, the next rp_replay returns
 * RP_EBUSY at once (single-threaded: waiting would never end), replays
 * nothing, and succeeds once the precondition triggered and a replay
 * completed. */
Test(replay, a_full_window_with_a_gated_replay_is_busy_not_blocked,
     .timeout = 30) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "nothing", nothing_task, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &op));
  rp_port_id gate;
  RP_CHECK(rp_graph_add_precondition(g, "gate", &gate));
  RP_CHECK(rp_graph_bind_precondition(g, gate, op));
  const uint32_t window[] = {1, 4};
  for (int w = 0; w < 2; w++) {
    rp_exec *ex;
    RP_CHECK(
        rp_instantiate(g, &(rp_exec_opts){.max_inflight = window[w]}, &ex));
    rp_event pre[5], done[5];
    for (uint32_t i = 0; i <= window[w]; i++)
      RP_CHECK(rp_event_create(rt, &pre[i]));
    /* replay 0 gated; the others' preconditions already triggered */
    for (uint32_t i = 1; i <= window[w]; i++)
      RP_CHECK(rp_event_trigger(rt, pre[i]));
    for (uint32_t i = 0; i < window[w]; i++)
      RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre[i], .npre = 1},
                         &done[i]));
    rp_event extra = RP_NO_EVENT;
    RP_EXPECT(rp_replay(ex,
                        &(rp_replay_args){.pre = &pre[window[w]], .npre = 1},
                        &extra),
              RP_EBUSY);
    /* the oldest replay, its port and event, and what to do with it */
    char want[160];
    snprintf(want, sizeof want,
             "the oldest gated: replay 0 waits for precondition 0 ('gate'), "
             "event %#llx, an rp_event_create event that has not "
             "triggered: trigger it",
             (unsigned long long)pre[0].id);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    cr_assert_eq(extra.id, RP_NO_EVENT.id, "*done was written");
    rp_exec_stats es; /* in issue order: nothing completes before 0 */
    RP_CHECK(rp_exec_stats_get(ex, &es));
    cr_assert_eq(es.replays, 0);
    RP_CHECK(rp_event_trigger(rt, pre[0]));
    RP_EXPECT(rp_event_wait(rt, done[0], -1), RP_OK);
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre[window[w]], .npre = 1},
                       &extra));
    RP_EXPECT(rp_event_wait(rt, extra, -1), RP_OK);
    RP_CHECK(rp_event_release(rt, extra));
    for (uint32_t i = 0; i < window[w]; i++) {
      RP_EXPECT(rp_event_wait(rt, done[i], -1), RP_OK);
      RP_CHECK(rp_event_release(rt, done[i]));
    }
    for (uint32_t i = 0; i <= window[w]; i++)
      RP_CHECK(rp_event_release(rt, pre[i]));
    RP_CHECK(rp_exec_stats_get(ex, &es)); /* the refused one never ran */
    cr_assert_eq(es.replays, window[w] + 1);
    RP_CHECK(rp_exec_destroy(ex));
  }
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- chained execs: one's postcondition, another's precondition ---- */

/* A: precondition "in" -> op on worker 1 (nothing_task) -> postcondition
 * "out". B: precondition "from_a" -> op on worker 0 (hold_task). */
static _Atomic int hold_armed, hold_release;

/* Replay 0 of B stays in flight (running) until hold_release, when armed. */
static rp_status hold_task(rp_task_ctx *ctx) {
  if (rp_ctx_replay(ctx) == 0 && atomic_load(&hold_armed))
    while (!atomic_load(&hold_release))
      sched_yield();
  return RP_OK;
}

static rp_exec *chain_exec(rp_runtime *rt, rp_task_id t, rp_proc proc,
                           const char *pre_name, int with_post,
                           uint32_t max_inflight) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = proc}, &op));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, pre_name, &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, op));
  if (with_post) {
    RP_CHECK(rp_graph_add_postcondition(g, "out", &p));
    RP_CHECK(rp_graph_bind_postcondition(g, p, op));
  }
  rp_exec *ex;
  RP_CHECK(
      rp_instantiate(g, &(rp_exec_opts){.max_inflight = max_inflight}, &ex));
  RP_CHECK(rp_graph_destroy(g));
  return ex;
}

/* B's full window whose oldest replay waits for A's postcondition (A
 * itself gated on a user event, so nothing completes meanwhile): rp_replay
 * and rp_exec_destroy of B refuse naming that replay, the port, the event
 * and that the runtime completes it (wait for it, not "trigger it", which
 * rp_event_trigger would refuse); A's own full window names its user
 * event ("trigger it"). Nothing changed: once the user event triggered,
 * the refused replay is retried and runs, and B destroys. */
Test(replay, a_full_window_names_the_oldest_replays_pending_precondition,
     .timeout = 30) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "hold", hold_task, 0);
  rp_task_id n = reg(rt, "nothing", nothing_task, 0);
  atomic_store(&hold_armed, 0);
  rp_exec *a = chain_exec(rt, n, 1, "in", 1, 4);
  rp_exec *b = chain_exec(rt, t, 0, "from_a", 0, 4);
  rp_event u, out, da[4], db[5];
  RP_CHECK(rp_event_create(rt, &u));
  for (int k = 0; k < 4; k++) {
    rp_event o;
    RP_CHECK(rp_replay(
        a, &(rp_replay_args){.pre = &u, .npre = 1, .post = &o, .npost = 1},
        &da[k]));
    if (k == 0)
      out = o;
    else
      RP_CHECK(rp_event_release(rt, o));
  }
  for (int k = 0; k < 4; k++)
    RP_CHECK(rp_replay(b, &(rp_replay_args){.pre = &out, .npre = 1}, &db[k]));
  char want[320];
  /* B: its oldest replay waits for A's postcondition */
  db[4] = RP_NO_EVENT;
  RP_EXPECT(rp_replay(b, &(rp_replay_args){.pre = &out, .npre = 1}, &db[4]),
            RP_EBUSY);
  snprintf(want, sizeof want,
           "rp_replay: 4 replays are in flight (max_inflight), the oldest "
           "gated: replay 0 waits for precondition 0 ('from_a'), event "
           "%#llx, which the runtime completes",
           (unsigned long long)out.id);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  cr_assert(strstr(rp_error_detail(),
                   "wait for it (rp_event_wait on it, or on the done event of "
                   "replay 0 or a later one;"),
            "%s", rp_error_detail());
  cr_assert(!strstr(rp_error_detail(), "trigger it"), "%s", rp_error_detail());
  cr_assert_eq(db[4].id, RP_NO_EVENT.id, "*done was written");
  /* the event named is indeed not the user's to trigger */
  RP_EXPECT(rp_event_trigger(rt, out), RP_EINVAL);
  RP_EXPECT(rp_exec_destroy(b), RP_EBUSY);
  snprintf(want, sizeof want,
           "rp_exec_destroy: replay 0 waits for precondition 0 ('from_a'), "
           "event %#llx, which the runtime completes",
           (unsigned long long)out.id);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  /* A: its oldest replay waits for the user's event */
  rp_event extra = RP_NO_EVENT;
  RP_EXPECT(rp_replay(a, &(rp_replay_args){.pre = &u, .npre = 1}, &extra),
            RP_EBUSY);
  snprintf(want, sizeof want,
           "the oldest gated: replay 0 waits for precondition 0 ('in'), "
           "event %#llx, an rp_event_create event that has not triggered: "
           "trigger it; then replay again (nothing was replayed)",
           (unsigned long long)u.id);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  cr_assert_eq(extra.id, RP_NO_EVENT.id, "*done was written");
  rp_exec_stats es;
  RP_CHECK(rp_exec_stats_get(b, &es));
  cr_assert_eq(es.replays, 0);
  /* nothing changed: the refused replay runs once the chain moves */
  RP_CHECK(rp_event_trigger(rt, u));
  RP_EXPECT(rp_event_wait(rt, db[0], -1), RP_OK);
  RP_CHECK(rp_replay(b, &(rp_replay_args){.pre = &out, .npre = 1}, &db[4]));
  for (int k = 0; k < 5; k++) {
    RP_EXPECT(rp_event_wait(rt, db[k], -1), RP_OK);
    RP_CHECK(rp_event_release(rt, db[k]));
  }
  for (int k = 0; k < 4; k++) {
    RP_EXPECT(rp_event_wait(rt, da[k], -1), RP_OK);
    RP_CHECK(rp_event_release(rt, da[k]));
  }
  RP_CHECK(rp_exec_stats_get(b, &es));
  cr_assert_eq(es.replays, 5);
  RP_CHECK(rp_exec_stats_get(a, &es));
  cr_assert_eq(es.replays, 4);
  RP_CHECK(rp_event_release(rt, out));
  RP_CHECK(rp_event_release(rt, u));
  RP_CHECK(rp_exec_destroy(b));
  RP_CHECK(rp_exec_destroy(a));
  th_destroy(rt);
}

/* 'S' once the thread sleeps (a futex wait), else its state letter. */
static char thread_state(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : '?';
}

static _Atomic pid_t main_tid;
static _Atomic int main_returned;

/* Releases B's replay 0 once the main thread sleeps in rp_replay (its
 * window full) or has returned from it. */
static void *releaser(void *arg) {
  (void)arg;
  while (!atomic_load(&main_returned) &&
         thread_state(atomic_load(&main_tid)) != 'S')
    sched_yield();
  atomic_store(&hold_release, 1);
  return NULL;
}

/* The alternating loop A, B, A, B, ... with B's window full: B's oldest
 * replay has its precondition (A's postcondition completed) and only runs
 * long, while B's newest waits for A's latest postcondition, still pending
 * (here: A's replay gated on a user event not yet triggered). The oldest
 * completes without the caller, so rp_replay waits for it and succeeds; a
 * later replay gated behind it does not make it refuse. */
Test(replay, a_full_window_waits_for_an_oldest_replay_that_is_not_gated,
     .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "hold", hold_task, 0);
  atomic_store(&hold_armed, 1);
  atomic_store(&hold_release, 0);
  atomic_store(&main_returned, 0);
  atomic_store(&main_tid, (pid_t)syscall(SYS_gettid));
  rp_task_id n = reg(rt, "nothing", nothing_task, 0);
  rp_exec *a = chain_exec(rt, n, 1, "in", 1, 8);
  rp_exec *b = chain_exec(rt, t, 0, "from_a", 0, 4);
  rp_event u[5], out[5], da[5], db[5];
  for (int k = 0; k < 5; k++) {
    RP_CHECK(rp_event_create(rt, &u[k]));
    RP_CHECK(rp_replay(
        a,
        &(rp_replay_args){.pre = &u[k], .npre = 1, .post = &out[k], .npost = 1},
        &da[k]));
    if (k < 3)
      RP_CHECK(rp_event_trigger(rt, u[k]));
    if (k == 4)
      break; /* B's fifth replay: below, with its window full */
    RP_CHECK(
        rp_replay(b, &(rp_replay_args){.pre = &out[k], .npre = 1}, &db[k]));
  }
  /* B's replay 0 past its gate (held in its op), replay 3 gated */
  RP_EXPECT(rp_event_wait(rt, out[0], -1), RP_OK);
  cr_assert_eq(rp_event_query(rt, out[3]), RP_EAGAIN);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, releaser, NULL), 0);
  rp_status st =
      rp_replay(b, &(rp_replay_args){.pre = &out[4], .npre = 1}, &db[4]);
  atomic_store(&main_returned, 1);
  pthread_join(th, NULL);
  cr_assert_eq(st, RP_OK, "%s: %s", rp_status_name(st), rp_error_detail());
  RP_CHECK(rp_event_trigger(rt, u[3]));
  RP_CHECK(rp_event_trigger(rt, u[4]));
  for (int k = 0; k < 5; k++) {
    RP_EXPECT(rp_event_wait(rt, db[k], -1), RP_OK);
    RP_EXPECT(rp_event_wait(rt, da[k], -1), RP_OK);
    RP_CHECK(rp_event_release(rt, db[k]));
    RP_CHECK(rp_event_release(rt, da[k]));
    RP_CHECK(rp_event_release(rt, out[k]));
    RP_CHECK(rp_event_release(rt, u[k]));
  }
  rp_exec_stats es;
  RP_CHECK(rp_exec_stats_get(b, &es));
  cr_assert_eq(es.replays, 5);
  atomic_store(&hold_armed, 0);
  RP_CHECK(rp_exec_destroy(b));
  RP_CHECK(rp_exec_destroy(a));
  th_destroy(rt);
}

/* Two lanes, each op busy for its own per-replay time, so either lane may
 * finish a replay last while the other runs up to 7 replays ahead. Each
 * replay's lane-0 op waits for a precondition the host triggers only after
 * attaching the callback, so no callback runs on the host at attach time:
 * every one runs where the replay completes. The callbacks must come in
 * issue order, once each, each after both of its replay's ops.
 * (On CPU lanes the order also follows from the structure: the lane that
 * completes replay r does so inline, before it can count down r + 1; the
 * out-of-order hand-over in complete() serves GPU host callbacks.) */
Test(replay, replays_complete_in_issue_order_under_varying_durations,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "busy.arg", busy_arg_task, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  uint32_t zero = 0;
  rp_op_id op[2];
  for (int i = 0; i < 2; i++) {
    RP_CHECK(rp_graph_add_task(g,
                               &(rp_launch){.task = t,
                                            .proc = (rp_proc)i,
                                            .args = &zero,
                                            .args_size = sizeof zero},
                               &op[i]));
    RP_CHECK(rp_graph_add_interp(
        g, op[i], &(rp_interp){(size_t)i * 4, 0, sizeof(uint32_t)}));
  }
  rp_port_id gate;
  RP_CHECK(rp_graph_add_precondition(g, "gate", &gate));
  RP_CHECK(rp_graph_bind_precondition(g, gate, op[0]));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 8}, &ex));
  atomic_store(&log_n, 0);
  static rp_event done[NORDER];
  srand(99);
  for (uint32_t r = 0; r < NORDER; r++) {
    /* 0..60 us each, independently: the last lane changes at random */
    uint32_t ns[2] = {(uint32_t)(rand() % 61) * 1000,
                      (uint32_t)(rand() % 61) * 1000};
    rp_event pre;
    RP_CHECK(rp_event_create(rt, &pre));
    RP_CHECK(rp_replay(
        ex,
        &(rp_replay_args){
            .args = ns, .args_size = sizeof ns, .pre = &pre, .npre = 1},
        &done[r]));
    RP_CHECK(rp_event_on_complete(rt, done[r], log_cb, (void *)(uintptr_t)r));
    RP_CHECK(rp_event_trigger(rt, pre));
    RP_CHECK(rp_event_release(rt, pre));
  }
  for (uint32_t r = 0; r < NORDER; r++) {
    RP_EXPECT(rp_event_wait(rt, done[r], -1), RP_OK);
    RP_CHECK(rp_event_release(rt, done[r]));
  }
  /* the last callback may still be returning: it ran before its replay
   * counted as completed, and destroy waits for it in any case */
  RP_CHECK(rp_exec_destroy(ex));
  cr_assert_eq(atomic_load(&log_n), NORDER);
  cr_assert_eq(atomic_load(&early_done), -1,
               "replay %d was done before "
               "both of its ops finished",
               atomic_load(&early_done));
  for (uint32_t i = 0; i < NORDER; i++) {
    cr_assert_eq(log_r[i], i, "completion %u was replay %u", i, log_r[i]);
    cr_assert_eq(atomic_load(&cb_runs[i]), 1);
    cr_assert_eq(atomic_load(&log_st[i]), RP_OK);
  }
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- destroy with callbacks in flight ---- */

#define NFLIGHT 6
static rp_exec *g_ex;
static _Atomic int destroyed;
static _Atomic int late_cb;
static _Atomic uint32_t done_cbs[NFLIGHT], post_cbs[NFLIGHT];

/* Slow for a callback (still not blocking) and touches the exec: had
 * destroy returned (and freed it) before the callback finished, `late_cb`
 * or AddressSanitizer would tell. */
static void done_cb(void *arg, rp_status st) {
  busy_ns(300000);
  rp_exec_stats s;
  if (rp_exec_stats_get(g_ex, &s) != RP_OK || atomic_load(&destroyed))
    atomic_store(&late_cb, 1);
  if (st == RP_OK)
    atomic_fetch_add(&done_cbs[(uintptr_t)arg], 1);
}

static void post_cb(void *arg, rp_status st) {
  busy_ns(100000);
  if (atomic_load(&destroyed))
    atomic_store(&late_cb, 1);
  if (st == RP_OK)
    atomic_fetch_add(&post_cbs[(uintptr_t)arg], 1);
}

static rp_status slow_task(rp_task_ctx *ctx) {
  (void)ctx;
  busy_ns(1000000);
  return RP_OK;
}

Test(replay, destroy_waits_for_every_callback_of_replays_in_flight) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "slow", slow_task, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &a));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 1}, &b));
  RP_CHECK(rp_graph_add_edge(g, a, b));
  rp_port_id p;
  RP_CHECK(rp_graph_add_postcondition(g, "a", &p));
  RP_CHECK(rp_graph_bind_postcondition(g, p, a));
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 8}, &g_ex));
  atomic_store(&destroyed, 0);
  atomic_store(&late_cb, 0);
  rp_event done[NFLIGHT], post[NFLIGHT];
  for (uintptr_t r = 0; r < NFLIGHT; r++) {
    RP_CHECK(rp_replay(g_ex, &(rp_replay_args){.post = &post[r], .npost = 1},
                       &done[r]));
    RP_CHECK(rp_event_on_complete(rt, done[r], done_cb, (void *)r));
    RP_CHECK(rp_event_on_complete(rt, post[r], post_cb, (void *)r));
  }
  /* 6 replays of 2 ms each: most are still queued here */
  RP_EXPECT(rp_event_query(rt, done[NFLIGHT - 1]), RP_EAGAIN);
  RP_CHECK(rp_exec_destroy(g_ex));
  atomic_store(&destroyed, 1);
  for (int r = 0; r < NFLIGHT; r++) {
    cr_assert_eq(atomic_load(&done_cbs[r]), 1,
                 "done callback of replay %d "
                 "ran %u times before destroy returned",
                 r, atomic_load(&done_cbs[r]));
    cr_assert_eq(atomic_load(&post_cbs[r]), 1,
                 "post callback of replay %d "
                 "ran %u times before destroy returned",
                 r, atomic_load(&post_cbs[r]));
    RP_EXPECT(rp_event_query(rt, done[r]), RP_OK);
    RP_CHECK(rp_event_release(rt, done[r]));
    RP_CHECK(rp_event_release(rt, post[r]));
  }
  usleep(2000); /* a callback still running now would flag itself */
  cr_assert_eq(atomic_load(&late_cb), 0, "a callback ran after destroy");
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- the placement reason in dumps ---- */

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* The text of the dump's "placement:" line (static buffer). */
static const char *placement_line(const rp_exec *ex, rp_dump_format fmt) {
  static char line[512];
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_exec_dump(ex, f, fmt));
  fclose(f);
  const char *key = fmt == RP_DUMP_JSON ? "\"placement\": \"" : "placement: ";
  const char *p = strstr(buf, key);
  cr_assert_not_null(p, "no placement in the dump:\n%s", buf);
  p += strlen(key);
  size_t n = strcspn(p, fmt == RP_DUMP_JSON ? "\"" : "\n");
  cr_assert_lt(n, sizeof line);
  memcpy(line, p, n);
  line[n] = 0;
  free(buf);
  return line;
}

Test(replay, dump_shows_the_placement_and_why_before_and_after_replacing) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "empty", empty_task, 0); /* no cost hint */
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 8; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  const char *why = placement_line(ex, RP_DUMP_TEXT);
  cr_assert(strstr(why, "initial") == why, "%s", why);
  cr_assert(strstr(why, "default (1 us) costs") != NULL, "%s", why);
  cr_assert(strstr(why, "edge cost 200 ns") != NULL, "%s", why);
  cr_assert_str_eq(placement_line(ex, RP_DUMP_JSON), why);
  char before[512];
  snprintf(before, sizeof before, "%s", why);
  for (int i = 0; i < 40; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  /* replays never re-place: only rp_exec_tune does */
  cr_assert_str_eq(placement_line(ex, RP_DUMP_TEXT), before);
  uint32_t tuned = 0;
  /* which placement wins comes from a cost source (one worker fastest),
   * not from this machine's speed */
  rp__tune_cost_hook = th_cost_one_worker_wins;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned));
  rp__tune_cost_hook = NULL;
  cr_assert_gt(tuned, 0);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_gt(s.replacements, 0);
  cr_assert_eq(s.procs_used, 1);
  why = placement_line(ex, RP_DUMP_TEXT);
  /* the chosen candidate, then each trial's measured replay time */
  cr_assert(strstr(why, "one worker") == why ||
                strstr(why, "list scheduling on measured costs") == why,
            "the reason names the chosen candidate: %s", why);
  cr_assert(strstr(why, "after measuring replays:") != NULL, "%s", why);
  cr_assert(strstr(why, " initial ") != NULL, "%s", why);
  cr_assert(strstr(why, " ns") != NULL, "%s", why);
  cr_assert_str_eq(placement_line(ex, RP_DUMP_JSON), why);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(buf, "1 of 2 workers used") != NULL, "%s", buf);
  free(buf);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(replay, hinted_placement_says_so_and_never_changes) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "empty", empty_task, 5000);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.edge_cost_ns = 300}, &ex));
  char before[512];
  snprintf(before, sizeof before, "%s", placement_line(ex, RP_DUMP_TEXT));
  cr_assert_str_eq(before, "initial: list scheduling on hinted costs, edge "
                           "cost 300 ns");
  uint32_t tuned = 1;
  RP_CHECK(rp_exec_tune(ex, NULL, &tuned)); /* hints are trusted */
  cr_assert_eq(tuned, 0);
  for (int i = 0; i < 40; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  cr_assert_str_eq(placement_line(ex, RP_DUMP_TEXT), before);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replacements, 0);
  cr_assert_eq(s.procs_used, 2);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- hand-off and wake-up counters ---- */

/* The consumer's worker announces itself (an `arrive` task that runs first
 * in its lane) and the producer starts its busy time only then: on a
 * loaded machine a worker may take milliseconds to wake up, and a consumer
 * that arrives after its producer finished never waits. */
static _Atomic uint64_t arrived;

static rp_status arrive_task(rp_task_ctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&arrived, 1);
  return RP_OK;
}

static rp_status produce_task(rp_task_ctx *ctx) {
  const uint32_t *us = rp_ctx_args(ctx, NULL);
  /* bounded (1 s): a placement bug shows as a failed count, not a hang */
  uint64_t t0 = now_ns();
  while (atomic_load(&arrived) <= rp_ctx_replay(ctx) &&
         now_ns() - t0 < 1000000000ull)
    ;
  busy_ns((uint64_t)*us * 1000);
  *(int64_t *)rp_ctx_ptr(ctx, 0) += 1;
  return RP_OK;
}

static rp_status consume_task(rp_task_ctx *ctx) {
  (void)rp_ctx_ptr(ctx, 0);
  return RP_OK;
}

static rp_exec_stats run_edge(unsigned pp, unsigned pc, uint32_t us, int n) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id tp = reg(rt, "produce", produce_task, 0);
  rp_task_id tc = reg(rt, "consume", consume_task, 0);
  /* its high cost hint ranks it first in its lane */
  rp_task_id ta = reg(rt, "arrive", arrive_task, 1000000);
  atomic_store(&arrived, 0);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  rp_access w = {x, RP_RW, 0}, rd = {x, RP_READ, 0};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = ta, .proc = pc}, NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = tp,
                                       .proc = pp,
                                       .accesses = &w,
                                       .naccess = 1,
                                       .args = &us,
                                       .args_size = sizeof us},
                          NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = tc, .proc = pc, .accesses = &rd, .naccess = 1},
      NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int i = 0; i < n; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  int64_t v;
  RP_CHECK(rp_instance_read(rt, x, &v, sizeof v));
  cr_assert_eq(v, n);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.ops_run, 3ull * (uint64_t)n);
  cr_assert_eq(atomic_load(&arrived), (uint64_t)n);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
  return s;
}

Test(replay, cross_worker_wait_counts_handoffs_same_worker_none) {
  /* 2 ms: longer than a loaded machine keeps a thread off its core
   * between the consumer's arrival and its wait */
  rp_exec_stats s = run_edge(0, 1, 2000, 10);
  cr_assert_eq(s.procs_used, 2);
  cr_assert_gt(s.handoffs, 0,
               "a consumer on another worker waited for a "
               "2 ms producer 10 times and no hand-off was counted");
  s = run_edge(0, 0, 200, 10);
  cr_assert_eq(s.procs_used, 1);
  cr_assert_eq(s.handoffs, 0, "same worker: in order, nothing to wait for");
  cr_assert_eq(s.wakeups, 0);
}

/* 50 ms outlasts the default spin and yield bounds (10 us + 200 us of
 * wall time) by far: the consumer sleeps and is woken by the producer's
 * publication, even on a loaded machine where a yielding thread may stay
 * off its core for milliseconds. */
Test(replay, consumer_that_sleeps_counts_wakeups) {
  rp_exec_stats s = run_edge(0, 1, 50000, 5);
  cr_assert_gt(s.wakeups, 0,
               "a consumer waited 5 x 50 ms without sleeping "
               "(%llu hand-offs)",
               (unsigned long long)s.handoffs);
  cr_assert_gt(s.handoffs, 0);
}

/* With the spin and yield bounds set to zero through the environment
 * (read once per process, at the first wait: Criterion runs each test in
 * a fresh process), a consumer sleeps as soon as it finds the producer
 * not done, behind a 1 ms producer (long enough that a loaded machine
 * cannot keep the consumer away until the producer is done, every time). */
Test(replay, spin_and_yield_bounds_come_from_the_environment) {
  setenv("REPRISE_SPIN_NS", "0", 1);
  setenv("REPRISE_YIELD_NS", "0", 1);
  const rp_tunables *tun = rp__tunables();
  if (tun->spin_ns != 0 || tun->yield_ns != 0)
    cr_skip_test("the tunables were read before this test (--no-fork?)");
  rp_exec_stats s = run_edge(0, 1, 1000, 20);
  cr_assert_gt(s.wakeups, 0,
               "zero spin and yield bounds, 20 waits behind "
               "a 1 ms producer, and the consumer never slept (%llu "
               "hand-offs)",
               (unsigned long long)s.handoffs);
}

static rp_status noop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* One exec on worker 1 alone, one on worker 0 alone: while the first is
 * replayed a thousand times, worker 0 sleeps behind the ring (entries of
 * execs it has no lane in are passed over, a bounded number per poll).
 * Woken for the second exec's replay, it must read on to its entry, not
 * fall asleep again on the way (with no spin or yield budget it could
 * sleep after two polls, forever). */
Test(replay, a_worker_far_behind_the_ring_reaches_its_replay, .timeout = 120) {
  setenv("REPRISE_SPIN_NS", "0", 1);
  setenv("REPRISE_YIELD_NS", "0", 1);
  setenv("REPRISE_IDLE_SPIN_NS", "0", 1);
  const rp_tunables *tun = rp__tunables();
  if (tun->yield_ns != 0 || tun->idle_spin_ns != 0)
    cr_skip_test("the tunables were read before this test (--no-fork?)");
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "noop", noop_task, 0);
  rp_exec *ex[2];
  for (int w = 0; w < 2; w++) {
    rp_graph *g;
    rp_op_id op;
    RP_CHECK(rp_graph_create(rt, &g));
    RP_CHECK(rp_graph_add_task(
        g, &(rp_launch){.task = t, .proc = (rp_proc)(1 - w)}, &op));
    RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 8}, &ex[w]));
    RP_CHECK(rp_graph_destroy(g));
  }
  for (int round = 0; round < 3; round++) {
    rp_event d = RP_NO_EVENT;
    for (int i = 0; i < 1000; i++) { /* exec 0: worker 1 */
      if (d.id)
        rp_event_release(rt, d);
      RP_CHECK(rp_replay(ex[0], NULL, &d));
    }
    RP_CHECK(rp_event_wait(rt, d, -1));
    rp_event_release(rt, d);
    usleep(2000);                         /* worker 0 sleeps */
    RP_CHECK(rp_replay(ex[1], NULL, &d)); /* exec 1: worker 0 */
    rp_status st = rp_event_wait(rt, d, 10LL * 1000000000);
    cr_assert_eq(st, RP_OK, "round %d: worker 0's replay did not run: %s",
                 round, rp_status_name(st));
    rp_event_release(rt, d);
  }
  RP_CHECK(rp_exec_destroy(ex[0]));
  RP_CHECK(rp_exec_destroy(ex[1]));
  th_destroy(rt);
}

/* Two threads replaying two execs on two workers, with no spin or yield
 * budget (the workers sleep whenever they find nothing): a worker that
 * reaches an entry another thread has taken but not yet published must
 * not sleep there (the publication wakes that entry's workers only, and
 * its own entries behind it would wait forever). A stress test: the
 * window is short, so a hang showed in some runs only. */
typedef struct pair_arg {
  rp_runtime *rt;
  rp_exec *ex;
  _Atomic int st;
} pair_arg;

static void *replay_many(void *p) {
  pair_arg *a = p;
  rp_event ev[4] = {RP_NO_EVENT, RP_NO_EVENT, RP_NO_EVENT, RP_NO_EVENT};
  for (int i = 0; i < 4000; i++) {
    rp_event *e = &ev[i % 4];
    if (e->id) { /* the replay four back: done before the slot is reused */
      rp_status st = rp_event_wait(a->rt, *e, 20LL * 1000000000);
      rp_event_release(a->rt, *e);
      if (st != RP_OK) {
        atomic_store(&a->st, st);
        return NULL;
      }
    }
    rp_status st = rp_replay(a->ex, NULL, e);
    if (st != RP_OK) {
      atomic_store(&a->st, st);
      return NULL;
    }
  }
  for (int k = 0; k < 4; k++) {
    rp_status st = rp_event_wait(a->rt, ev[k], 20LL * 1000000000);
    rp_event_release(a->rt, ev[k]);
    if (st != RP_OK)
      atomic_store(&a->st, st);
  }
  return NULL;
}

Test(replay, two_threads_on_two_workers_never_lose_a_wakeup, .timeout = 300) {
  setenv("REPRISE_SPIN_NS", "0", 1);
  setenv("REPRISE_YIELD_NS", "0", 1);
  setenv("REPRISE_IDLE_SPIN_NS", "0", 1);
  rp_runtime *rt = th_cpu_runtime(3);
  rp_task_id t = reg(rt, "noop", noop_task, 0);
  pair_arg a[2];
  pthread_t th[2];
  for (int k = 0; k < 2; k++) {
    rp_graph *g;
    rp_op_id op;
    RP_CHECK(rp_graph_create(rt, &g));
    RP_CHECK(rp_graph_add_task(
        g, &(rp_launch){.task = t, .proc = (rp_proc)(1 + k)}, &op));
    a[k].rt = rt;
    atomic_store(&a[k].st, RP_OK);
    RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 4}, &a[k].ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  for (int k = 0; k < 2; k++)
    cr_assert_eq(pthread_create(&th[k], NULL, replay_many, &a[k]), 0);
  for (int k = 0; k < 2; k++)
    pthread_join(th[k], NULL);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(atomic_load(&a[k].st), RP_OK, "thread %d: %s", k,
                 rp_status_name(atomic_load(&a[k].st)));
    rp_exec_stats s;
    RP_CHECK(rp_exec_stats_get(a[k].ex, &s));
    cr_assert_eq(s.replays, 4000u);
    RP_CHECK(rp_exec_destroy(a[k].ex));
  }
  th_destroy(rt);
}

/* The host's busy-spin budget (waiting for a replay slot or an event):
 * 20 us when the process may run on more CPUs than the runtime's workers,
 * none when the workers fill them (a spinning host would take a worker's
 * core); REPRISE_HOST_SPIN_NS overrides (next test). The affinity mask
 * decides, so the test sets it: one CPU, then two. */
static uint64_t spin_with(int ncpu, unsigned workers) {
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < ncpu; c++)
    CPU_SET(c, &one);
  cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
  rp_runtime *rt = th_cpu_runtime(workers);
  uint64_t v = rp__host_spin_ns(rt);
  th_destroy(rt);
  return v;
}

Test(replay, host_spins_only_with_a_cpu_to_spare) {
  if (getenv("REPRISE_HOST_SPIN_NS"))
    cr_skip_test("REPRISE_HOST_SPIN_NS is set in the environment");
  cpu_set_t allowed;
  cr_assert_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int first = -1, second = -1;
  for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
    if (CPU_ISSET(c, &allowed)) {
      if (first < 0)
        first = c;
      else
        second = c;
    }
  cr_assert_eq(spin_with(1, 1), 0, "one CPU, one worker: the host must yield");
  if (second != 1 || first != 0)
    cr_skip_test("CPUs 0 and 1 are not both available here");
  cr_assert_eq(spin_with(2, 1), 20000, "two CPUs, one worker: host spins");
  cr_assert_eq(spin_with(2, 2), 0, "two CPUs, two workers: host yields");
}

Test(replay, host_spin_budget_comes_from_the_environment) {
  setenv("REPRISE_HOST_SPIN_NS", "1234", 1);
  if (rp__tunables()->host_spin_ns != 1234)
    cr_skip_test("the tunables were read before this test (--no-fork?)");
  cr_assert_eq(spin_with(1, 1), 1234);
}

/* The time tunables take what rp_runtime_create accepts (digits only,
 * 0..10^10); empty is not set, as for every REPRISE_* variable (the host
 * spin budget is then the runtime's choice, not 0), and a value the
 * create check refuses (it passes with ignore_env) is the default, not
 * clamped or read leniently. */
Test(replay, empty_or_malformed_time_tunables_are_their_defaults) {
  setenv("REPRISE_HOST_SPIN_NS", "", 1);
  setenv("REPRISE_SPIN_NS", "-5", 1);
  setenv("REPRISE_YIELD_NS", "99999999999", 1);
  setenv("REPRISE_IDLE_SPIN_NS", " 7", 1);
  setenv("REPRISE_HOST_YIELD_NS", "4321", 1); /* valid: read as given */
  const rp_tunables *t = rp__tunables();
  if (t->host_yield_ns != 4321)
    cr_skip_test("the tunables were read before this test (--no-fork?)");
  cr_assert_eq(t->host_spin_ns, UINT64_MAX, "empty: not set, got %llu",
               (unsigned long long)t->host_spin_ns);
  cr_assert_eq(t->spin_ns, 10000u, "-5: the default, got %llu",
               (unsigned long long)t->spin_ns);
  cr_assert_eq(t->yield_ns, 200000u, "above 10^10: the default, got %llu",
               (unsigned long long)t->yield_ns);
  cr_assert_eq(t->idle_spin_ns, 1000u, "' 7': the default, got %llu",
               (unsigned long long)t->idle_spin_ns);
  /* the runtime decides the spin budget: none with no CPU to spare */
  cr_assert_eq(spin_with(1, 1), 0);
}

/* A plain task with a cross-lane wait runs on the lane's fast path; a
 * failure upstream (a plain task on the other lane) must still skip it in
 * that replay, and the next replay runs both. */
static _Atomic int fail_next, dependent_ran;

static rp_status maybe_fail_task(rp_task_ctx *ctx) {
  (void)ctx;
  return atomic_load(&fail_next) ? RP_ETASK : RP_OK;
}

static rp_status dependent_task(rp_task_ctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&dependent_ran, 1);
  return RP_OK;
}

Test(replay, plain_task_waiting_across_lanes_is_skipped_after_upstream_fails) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id tf = reg(rt, "maybe_fail", maybe_fail_task, 0);
  rp_task_id td = reg(rt, "dependent", dependent_task, 0);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  rp_access w = {x, RP_WRITE, 0}, rd = {x, RP_READ, 0};
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL)); /* the read depends on the write */
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = tf, .proc = 0, .accesses = &w, .naccess = 1},
      NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = td, .proc = 1, .accesses = &rd, .naccess = 1},
      NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  atomic_store(&dependent_ran, 0);
  static const int fails[] = {0, 1, 0, 1, 1, 0};
  int runs = 0;
  for (int i = 0; i < 6; i++) {
    atomic_store(&fail_next, fails[i]);
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_EXPECT(rp_event_wait(rt, done, -1), fails[i] ? RP_ETASK : RP_OK);
    RP_CHECK(rp_event_release(rt, done));
    runs += !fails[i];
    cr_assert_eq(atomic_load(&dependent_ran), runs,
                 "replay %d: the dependent ran %d times, expected %d", i,
                 atomic_load(&dependent_ran), runs);
  }
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 2, "the two ops must sit on two lanes");
  cr_assert_eq(s.ops_run, 6 + 3, "every producer run, the dependent 3 times");
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* ---- what steers placement ---- */

static rp_exec_stats two_independent(uint64_t task_hint, uint64_t launch_hint,
                                     int capture) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "work", empty_task, task_hint);
  rp_graph *g;
  rp_launch l = {.task = t, .proc = RP_PROC_ANY, .cost_ns = launch_hint};
  if (capture) {
    RP_CHECK(rp_capture_begin(rt, NULL));
    RP_CHECK(rp_launch_task(rt, &l, NULL));
    RP_CHECK(rp_launch_task(rt, &l, NULL));
    RP_CHECK(rp_capture_end(rt, &g));
  } else {
    RP_CHECK(rp_graph_create(rt, &g));
    RP_CHECK(rp_graph_add_task(g, &l, NULL));
    RP_CHECK(rp_graph_add_task(g, &l, NULL));
  }
  rp_exec *ex;
  /* no_replace: the hints alone decide */
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.no_replace = 1}, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  rp_proc p0, p1;
  RP_CHECK(rp_exec_op_proc(ex, 0, &p0));
  RP_CHECK(rp_exec_op_proc(ex, 1, &p1));
  cr_assert_eq(s.procs_used, p0 == p1 ? 1u : 2u);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  return s;
}

Test(replay, per_launch_cost_hint_steers_placement_like_the_task_hint) {
  /* the registration hint: heavy spreads, tiny stays together */
  cr_assert_eq(two_independent(50000, 0, 0).procs_used, 2);
  cr_assert_eq(two_independent(10, 0, 0).procs_used, 1);
  /* the launch hint alone does the same, recorded or built */
  for (int capture = 0; capture < 2; capture++) {
    cr_assert_eq(two_independent(0, 50000, capture).procs_used, 2,
                 "capture %d: two 50 us launches", capture);
    cr_assert_eq(two_independent(0, 10, capture).procs_used, 1,
                 "capture %d: two 10 ns launches", capture);
  }
  /* and it overrides the task's hint */
  cr_assert_eq(two_independent(50000, 10, 1).procs_used, 1);
  cr_assert_eq(two_independent(10, 50000, 1).procs_used, 2);
}

/* A -> B, A -> C: three unpinned ops of task t. */
static rp_graph *fork_graph(rp_runtime *rt, rp_task_id t) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b, c;
  rp_launch l = {.task = t, .proc = RP_PROC_ANY};
  RP_CHECK(rp_graph_add_task(g, &l, &a));
  RP_CHECK(rp_graph_add_task(g, &l, &b));
  RP_CHECK(rp_graph_add_task(g, &l, &c));
  RP_CHECK(rp_graph_add_edge(g, a, b));
  RP_CHECK(rp_graph_add_edge(g, a, c));
  return g;
}

/* A -> B, A -> C, each 5 us (hinted). A cheap edge spreads B and C over two
 * workers; an edge dearer than running C after B keeps the fork on one. */
static uint32_t fork_procs(uint64_t edge_cost_ns) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "work", empty_task, 5000);
  rp_graph *g = fork_graph(rt, t);
  rp_exec *ex;
  RP_CHECK(
      rp_instantiate(g, &(rp_exec_opts){.edge_cost_ns = edge_cost_ns}, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  char want[64];
  snprintf(want, sizeof want, "edge cost %llu ns",
           (unsigned long long)edge_cost_ns);
  const char *why = placement_line(ex, RP_DUMP_TEXT);
  cr_assert(strstr(why, want) != NULL, "%s", why);
  /* it still runs correctly either way */
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  return s.procs_used;
}

Test(replay, edge_cost_option_keeps_a_fork_together_or_spreads_it) {
  cr_assert_eq(fork_procs(1), 2, "a 1 ns edge: B and C in parallel");
  cr_assert_eq(fork_procs(1000000), 1, "a 1 ms edge: the fork stays put");
}

/* Finish times saturate: at the unit limit (2^24 units of
 * RP_PLACE_COST_MAX behind edges of as much) they pass 2^64. Placed again
 * through the internal seam with an edge cost near UINT64_MAX (the
 * option caps it at RP_PLACE_COST_MAX), the fork above must stay on one
 * worker: a wrapped sum made the far worker's finish look the earliest
 * and spread it. */
Test(replay, finish_times_saturate_instead_of_wrapping) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "work", empty_task, 5000);
  rp_graph *g = fork_graph(rt, t);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.edge_cost_ns = 1}, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.procs_used, 2, "a 1 ns edge spreads the fork");
  for (uint64_t near = 0; near < 3; near++) {
    ex->edge_cost = UINT64_MAX - near * 2000; /* the test seam */
    RP_CHECK(rp__place(ex, 0));
    RP_CHECK(rp_exec_stats_get(ex, &s));
    cr_assert_eq(s.procs_used, 1,
                 "edge cost UINT64_MAX - %llu: the fork spread over %u "
                 "workers",
                 (unsigned long long)(near * 2000), s.procs_used);
  }
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- stress: failures, ports and the window wrapping around ---- */

/* A random DAG of SW_OPS ops over 4 workers (each op writes its own
 * instance and reads its predecessors', so replays also wait for each
 * other), replayed SW_REPLAYS times with up to max_inflight in flight.
 * Each replay picks what fails: nothing, one op (its task fails), or the
 * precondition (poisoned). Tasks check that their predecessors ran in
 * the same replay and mark themselves run; the done and postcondition
 * callbacks check that exactly the expected ops ran before them, in
 * replay order; afterwards each done event's status and detail name its
 * own replay's failure, and the counters add up. */
#define SW_OPS 12
#define SW_REPLAYS 400
#define SW_PORT_OPS 3
static uint32_t sw_pred[SW_OPS];       /* bit p: op p is a predecessor */
static uint32_t sw_port[2];            /* ops bound to postcondition 0, 1 */
static uint32_t sw_gated;              /* ops bound to the precondition */
static int32_t sw_fail[SW_REPLAYS];    /* op that fails, -1 none, -2 gate */
static uint32_t sw_expect[SW_REPLAYS]; /* ops expected to run */
static _Atomic uint32_t sw_ran[SW_REPLAYS];
static _Atomic uint32_t sw_bad, sw_bad_first;
static _Atomic int64_t sw_last_done;
static _Atomic uint32_t sw_post_seen[SW_REPLAYS][2];

static void sw_flag(uint32_t what) {
  uint32_t zero = 0;
  atomic_compare_exchange_strong(&sw_bad_first, &zero, what);
  atomic_fetch_add(&sw_bad, 1);
}

static rp_status sw_task(rp_task_ctx *ctx) {
  uint32_t op = *(const uint32_t *)rp_ctx_args(ctx, NULL);
  uint64_t r = rp_ctx_replay(ctx);
  if (r >= SW_REPLAYS) {
    sw_flag(1);
    return RP_OK;
  }
  uint32_t ran = atomic_load(&sw_ran[r]);
  if ((ran & sw_pred[op]) != sw_pred[op])
    sw_flag(2); /* a predecessor had not run */
  if (atomic_fetch_or(&sw_ran[r], 1u << op) & (1u << op))
    sw_flag(3); /* ran twice */
  if (sw_fail[r] == (int32_t)op)
    return rp_error_set(RP_ETASK, "op %u fails in replay %llu", op,
                        (unsigned long long)r);
  return RP_OK;
}

static void sw_done_cb(void *arg, rp_status st) {
  uint64_t r = (uintptr_t)arg;
  if (atomic_load(&sw_ran[r]) != sw_expect[r])
    sw_flag(10); /* done before (or without) its ops */
  int64_t prev = (int64_t)r - 1;
  if (!atomic_compare_exchange_strong(&sw_last_done, &prev, (int64_t)r))
    sw_flag(11); /* out of order */
  if ((st == RP_OK) != (sw_fail[r] == -1))
    sw_flag(12);
  char want[48]; /* a failure's words name its own replay */
  snprintf(want, sizeof want, "replay %llu: op ", (unsigned long long)r);
  if (st != RP_OK && !strstr(rp_error_detail(), want))
    sw_flag(13);
}

static void sw_post_cb(void *arg, rp_status st) {
  uintptr_t v = (uintptr_t)arg;
  uint64_t r = v >> 1;
  uint32_t p = v & 1;
  uint32_t ops = sw_port[p];
  int ok = (sw_expect[r] & ops) == ops &&
           (sw_fail[r] < 0 || !(ops >> sw_fail[r] & 1));
  if ((st == RP_OK) != ok)
    sw_flag(20); /* wrong status */
  if (ok && (atomic_load(&sw_ran[r]) & ops) != ops)
    sw_flag(21); /* before its ops */
  char want[48];
  snprintf(want, sizeof want, "replay %llu: op ", (unsigned long long)r);
  if (st != RP_OK && !strstr(rp_error_detail(), want))
    sw_flag(22);
  atomic_fetch_add(&sw_post_seen[r][p], 1);
}

/* The ops that run in a replay where op f fails (-1 none) and the gated
 * ops do not run (gate_poisoned): every op but those downstream of a
 * failure. Ops are numbered in a topological order. */
static uint32_t sw_expected_runs(int32_t f, int gate_poisoned) {
  uint32_t ran = 0, failed = 0;
  for (uint32_t o = 0; o < SW_OPS; o++) {
    if (sw_pred[o] & failed)
      failed |= 1u << o; /* skipped: poisoned by a predecessor */
    else if (gate_poisoned && (sw_gated >> o & 1))
      failed |= 1u << o;
    else {
      ran |= 1u << o;
      if ((int32_t)o == f)
        failed |= 1u << o;
    }
  }
  return ran;
}

static void sw_run(uint32_t max_inflight, unsigned seed) {
  rp_runtime *rt = th_cpu_runtime(4);
  rp_task_id t = reg(rt, "sw", sw_task, 0);
  srand(seed);
  rp_rect rc = rp_rect_1d(0, 0);
  rp_inst inst[SW_OPS];
  for (uint32_t o = 0; o < SW_OPS; o++)
    RP_CHECK(rp_instance_create(rt, 0, RP_I64, &rc, NULL, &inst[o]));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (uint32_t o = 0; o < SW_OPS; o++) {
    sw_pred[o] = 0;
    for (uint32_t p = 0; p < o; p++)
      if (rand() % 4 == 0)
        sw_pred[o] |= 1u << p;
    rp_access acc[SW_OPS];
    uint32_t n = 0;
    acc[n++] = (rp_access){inst[o], RP_WRITE, 0};
    for (uint32_t p = 0; p < o; p++)
      if (sw_pred[o] >> p & 1)
        acc[n++] = (rp_access){inst[p], RP_READ, 0};
    /* a third of the ops placed by the engine, the rest pinned */
    rp_proc proc = rand() % 3 == 0 ? RP_PROC_ANY : (rp_proc)(rand() % 4);
    rp_op_id id;
    RP_CHECK(rp_graph_add_task(g,
                               &(rp_launch){.task = t,
                                            .proc = proc,
                                            .accesses = acc,
                                            .naccess = n,
                                            .args = &o,
                                            .args_size = sizeof o,
                                            .cost_ns = 1000},
                               &id));
    cr_assert_eq(id, o);
    for (uint32_t p = 0; p < o; p++)
      if (sw_pred[o] >> p & 1)
        RP_CHECK(rp_graph_add_edge(g, p, o));
  }
  /* two postconditions of SW_PORT_OPS random ops each, one precondition
   * on two ops */
  for (uint32_t p = 0; p < 2; p++) {
    rp_port_id port;
    char name[8];
    snprintf(name, sizeof name, "post%u", p);
    RP_CHECK(rp_graph_add_postcondition(g, name, &port));
    sw_port[p] = 0;
    while (__builtin_popcount(sw_port[p]) < SW_PORT_OPS) {
      uint32_t o = (uint32_t)rand() % SW_OPS;
      if (!(sw_port[p] >> o & 1)) {
        sw_port[p] |= 1u << o;
        RP_CHECK(rp_graph_bind_postcondition(g, port, o));
      }
    }
  }
  rp_port_id gate;
  RP_CHECK(rp_graph_add_precondition(g, "gate", &gate));
  sw_gated = 0;
  while (__builtin_popcount(sw_gated) < 2) {
    uint32_t o = (uint32_t)rand() % SW_OPS;
    if (!(sw_gated >> o & 1)) {
      sw_gated |= 1u << o;
      RP_CHECK(rp_graph_bind_precondition(g, gate, o));
    }
  }
  rp_exec *ex;
  RP_CHECK(
      rp_instantiate(g, &(rp_exec_opts){.max_inflight = max_inflight}, &ex));
  atomic_store(&sw_bad, 0);
  atomic_store(&sw_bad_first, 0);
  atomic_store(&sw_last_done, -1);
  static rp_event done[SW_REPLAYS], pre[SW_REPLAYS];
  uint64_t want_run = 0, want_skip = 0;
  uint32_t triggered = 0; /* preconditions [0, triggered) are completed */
  for (uint32_t r = 0; r < SW_REPLAYS; r++) {
    int kind = rand() % 4; /* 0, 1: nothing fails; 2: an op; 3: the gate */
    sw_fail[r] = kind < 2 ? -1 : kind == 2 ? rand() % SW_OPS : -2;
    sw_expect[r] = sw_expected_runs(sw_fail[r], kind == 3);
    atomic_store(&sw_ran[r], 0);
    atomic_store(&sw_post_seen[r][0], 0);
    atomic_store(&sw_post_seen[r][1], 0);
    want_run += (uint64_t)__builtin_popcount(sw_expect[r]);
    want_skip += SW_OPS - (uint64_t)__builtin_popcount(sw_expect[r]);
    RP_CHECK(rp_event_create(rt, &pre[r]));
    /* half the preconditions complete before their replay is issued */
    if (rand() % 2 && triggered == r) {
      if (sw_fail[r] == -2)
        RP_CHECK(rp_event_poison(rt, pre[r], RP_EIO));
      else
        RP_CHECK(rp_event_trigger(rt, pre[r]));
      triggered++;
    }
    rp_event post[2];
    rp_status st;
    while ((st = rp_replay(
                ex,
                &(rp_replay_args){
                    .pre = &pre[r], .npre = 1, .post = post, .npost = 2},
                &done[r])) == RP_EBUSY) {
      /* the window is full with a gated replay: let the oldest go */
      cr_assert_lt(triggered, r);
      if (sw_fail[triggered] == -2)
        RP_CHECK(rp_event_poison(rt, pre[triggered], RP_EIO));
      else
        RP_CHECK(rp_event_trigger(rt, pre[triggered]));
      triggered++;
    }
    RP_CHECK(st);
    RP_CHECK(
        rp_event_on_complete(rt, done[r], sw_done_cb, (void *)(uintptr_t)r));
    for (uintptr_t p = 0; p < 2; p++) {
      RP_CHECK(rp_event_on_complete(rt, post[p], sw_post_cb,
                                    (void *)((uintptr_t)r << 1 | p)));
      RP_CHECK(rp_event_release(rt, post[p]));
    }
    /* complete some of the earlier preconditions, in order */
    while (triggered < r && rand() % 3 == 0) {
      if (sw_fail[triggered] == -2)
        RP_CHECK(rp_event_poison(rt, pre[triggered], RP_EIO));
      else
        RP_CHECK(rp_event_trigger(rt, pre[triggered]));
      triggered++;
    }
  }
  for (; triggered < SW_REPLAYS; triggered++) {
    if (sw_fail[triggered] == -2)
      RP_CHECK(rp_event_poison(rt, pre[triggered], RP_EIO));
    else
      RP_CHECK(rp_event_trigger(rt, pre[triggered]));
  }
  for (uint32_t r = 0; r < SW_REPLAYS; r++) {
    rp_status st = rp_event_wait(rt, done[r], -1);
    char want[96];
    if (sw_fail[r] == -1) {
      cr_assert_eq(st, RP_OK, "replay %u: %s", r, rp_error_detail());
    } else if (sw_fail[r] == -2) {
      cr_assert_eq(st, RP_EIO, "replay %u: %s", r, rp_error_detail());
      snprintf(want, sizeof want, "replay %u: op ", r);
      cr_assert(strstr(rp_error_detail(), want), "replay %u: %s", r,
                rp_error_detail());
      cr_assert(strstr(rp_error_detail(), "precondition 0 ('gate') poisoned"),
                "replay %u: %s", r, rp_error_detail());
    } else {
      cr_assert_eq(st, RP_ETASK, "replay %u: %s", r, rp_error_detail());
      snprintf(want, sizeof want, "replay %u: op %d ", r, sw_fail[r]);
      cr_assert(strstr(rp_error_detail(), want), "replay %u: %s", r,
                rp_error_detail());
      snprintf(want, sizeof want, "op %d fails in replay %u", sw_fail[r], r);
      cr_assert(strstr(rp_error_detail(), want), "replay %u: %s", r,
                rp_error_detail());
    }
    RP_CHECK(rp_event_release(rt, done[r]));
    RP_CHECK(rp_event_release(rt, pre[r]));
  }
  rp_exec_stats es;
  RP_CHECK(rp_exec_stats_get(ex, &es));
  cr_assert_eq(es.replays, SW_REPLAYS);
  cr_assert_eq(es.ops_run, want_run,
               "max_inflight %u: %llu ops run, %llu expected", max_inflight,
               (unsigned long long)es.ops_run, (unsigned long long)want_run);
  cr_assert_eq(es.ops_skipped, want_skip,
               "max_inflight %u: %llu ops skipped, %llu expected", max_inflight,
               (unsigned long long)es.ops_skipped,
               (unsigned long long)want_skip);
  RP_CHECK(rp_exec_destroy(ex));
  cr_assert_eq(atomic_load(&sw_bad), 0,
               "max_inflight %u: %u violations, the first of kind %u",
               max_inflight, atomic_load(&sw_bad), atomic_load(&sw_bad_first));
  cr_assert_eq(atomic_load(&sw_last_done), SW_REPLAYS - 1);
  for (uint32_t r = 0; r < SW_REPLAYS; r++) {
    cr_assert_eq(atomic_load(&sw_ran[r]), sw_expect[r], "replay %u", r);
    cr_assert_eq(atomic_load(&sw_post_seen[r][0]), 1);
    cr_assert_eq(atomic_load(&sw_post_seen[r][1]), 1);
  }
  RP_CHECK(rp_graph_destroy(g));
  for (uint32_t o = 0; o < SW_OPS; o++)
    RP_CHECK(rp_instance_free(rt, inst[o]));
  th_destroy(rt);
}

Test(replay, stress_failures_ports_and_window_wrap, .timeout = 300) {
  static const uint32_t windows[] = {1, 2, 3, 5, 64};
  for (unsigned seed = 1; seed <= 4; seed++)
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++)
      sw_run(windows[w], seed * 31 + (unsigned)w);
}

/* Two host threads replay two execs whose lanes share 3 workers, each
 * exec with a precondition its own thread triggers late (so replays of
 * either wait at a gate on a shared worker, and the other's queue behind
 * it): every rp_replay either issues or answers RP_EBUSY (never blocks
 * on the other thread's gate), every op runs once per replay in replay
 * order, and every replay completes. */
#define TX_OPS 6
#define TX_REPLAYS 2000
static _Atomic int64_t tx_last[2][TX_OPS];
static _Atomic uint32_t tx_bad;

typedef struct tx_args {
  uint32_t exec, op;
} tx_args;

static rp_status tx_task(rp_task_ctx *ctx) {
  const tx_args *a = rp_ctx_args(ctx, NULL);
  int64_t r = (int64_t)rp_ctx_replay(ctx);
  int64_t prev = r - 1;
  if (!atomic_compare_exchange_strong(&tx_last[a->exec][a->op], &prev, r))
    atomic_fetch_add(&tx_bad, 1);
  return RP_OK;
}

typedef struct tx_thread {
  rp_runtime *rt;
  rp_exec *ex;
  uint32_t busy; /* RP_EBUSY answers */
  rp_status st;
} tx_thread;

static void *tx_run(void *arg) {
  tx_thread *t = arg;
  static _Thread_local rp_event pre[TX_REPLAYS], done[TX_REPLAYS];
  uint32_t trig = 0;
  t->st = RP_OK;
  for (uint32_t r = 0; r < TX_REPLAYS && !t->st; r++) {
    if ((t->st = rp_event_create(t->rt, &pre[r])) != RP_OK)
      break;
    rp_status st;
    while ((st = rp_replay(t->ex, &(rp_replay_args){.pre = &pre[r], .npre = 1},
                           &done[r])) == RP_EBUSY) {
      t->busy++;
      if (trig < r)
        t->st = rp_event_trigger(t->rt, pre[trig++]);
      else
        sched_yield(); /* behind the other thread's gate */
      if (t->st)
        break;
    }
    if (!t->st)
      t->st = st;
    /* trigger some of the earlier ones, in order, leaving a few pending */
    while (!t->st && trig + 3 < r && (r + trig) % 3)
      t->st = rp_event_trigger(t->rt, pre[trig++]);
  }
  while (!t->st && trig < TX_REPLAYS)
    t->st = rp_event_trigger(t->rt, pre[trig++]);
  for (uint32_t r = 0; r < TX_REPLAYS && !t->st; r++) {
    t->st = rp_event_wait(t->rt, done[r], -1);
    rp_event_release(t->rt, done[r]);
    rp_event_release(t->rt, pre[r]);
  }
  return NULL;
}

Test(replay, two_threads_replay_execs_sharing_gated_workers, .timeout = 300) {
  rp_runtime *rt = th_cpu_runtime(3);
  rp_task_id t = reg(rt, "tx", tx_task, 0);
  tx_thread th[2];
  rp_graph *g[2];
  atomic_store(&tx_bad, 0);
  for (uint32_t e = 0; e < 2; e++) {
    RP_CHECK(rp_graph_create(rt, &g[e]));
    rp_port_id gate;
    RP_CHECK(rp_graph_add_precondition(g[e], "gate", &gate));
    for (uint32_t o = 0; o < TX_OPS; o++) {
      tx_args a = {e, o};
      atomic_store(&tx_last[e][o], -1);
      RP_CHECK(rp_graph_add_task(g[e],
                                 &(rp_launch){.task = t,
                                              .proc = (rp_proc)((o + e) % 3),
                                              .args = &a,
                                              .args_size = sizeof a},
                                 NULL));
      if (o) /* a chain over the workers; o 2 waits for the gate */
        RP_CHECK(rp_graph_add_edge(g[e], o - 1, o));
    }
    RP_CHECK(rp_graph_bind_precondition(g[e], gate, 2));
    th[e] = (tx_thread){.rt = rt};
    RP_CHECK(rp_instantiate(g[e], &(rp_exec_opts){.max_inflight = 2 + e * 3},
                            &th[e].ex));
  }
  pthread_t tid[2];
  for (int e = 0; e < 2; e++)
    cr_assert_eq(pthread_create(&tid[e], NULL, tx_run, &th[e]), 0);
  for (int e = 0; e < 2; e++)
    pthread_join(tid[e], NULL);
  for (uint32_t e = 0; e < 2; e++) {
    cr_assert_eq(th[e].st, RP_OK, "exec %u: %s", e, rp_status_name(th[e].st));
    rp_exec_stats es;
    RP_CHECK(rp_exec_stats_get(th[e].ex, &es));
    cr_assert_eq(es.replays, TX_REPLAYS);
    cr_assert_eq(es.ops_run, (uint64_t)TX_REPLAYS * TX_OPS);
    for (uint32_t o = 0; o < TX_OPS; o++)
      cr_assert_eq(atomic_load(&tx_last[e][o]), TX_REPLAYS - 1);
    RP_CHECK(rp_exec_destroy(th[e].ex));
    RP_CHECK(rp_graph_destroy(g[e]));
  }
  cr_assert_eq(atomic_load(&tx_bad), 0, "an op ran out of replay order");
  th_destroy(rt);
}

/* ---- the replay path allocates nothing, with several execs ---- */

/* Two execs on one runtime, each with a full window of replays in flight
 * and eight postcondition ports (each replay holds nine events until it
 * completes): together they hold more events than one exec's reservation
 * covers. Each exec's reservation counts on top of the others', so from
 * the first replay of either, the calling thread allocates nothing (the
 * event table does not grow on the replay path). */
Test(replay, two_execs_with_full_windows_allocate_nothing_on_replay) {
  if (rp_thread_allocated_bytes() == UINT64_MAX)
    cr_skip_test("built without jemalloc (sanitizer build): no per-thread "
                 "allocation counters");
  enum { POSTS = 8, WINDOW = 64 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "empty", empty_task, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &a));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "gate", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, a));
  for (int k = 0; k < POSTS; k++) {
    char name[8];
    snprintf(name, sizeof name, "p%d", k);
    RP_CHECK(rp_graph_add_postcondition(g, name, &p));
    RP_CHECK(rp_graph_bind_postcondition(g, p, a));
  }
  rp_exec *ex[2];
  for (int e = 0; e < 2; e++)
    RP_CHECK(
        rp_instantiate(g, &(rp_exec_opts){.max_inflight = WINDOW}, &ex[e]));
  rp_event gate, done[2];
  RP_CHECK(rp_event_create(rt, &gate));
  uint64_t host0 = rp_thread_allocated_bytes();
  /* every replay waits at the gate: the windows fill */
  for (int e = 0; e < 2; e++)
    for (int i = 0; i < WINDOW; i++) {
      RP_CHECK(rp_replay(ex[e], &(rp_replay_args){.pre = &gate, .npre = 1},
                         i == WINDOW - 1 ? &done[e] : NULL));
    }
  uint64_t host1 = rp_thread_allocated_bytes();
  RP_CHECK(rp_event_trigger(rt, gate));
  for (int e = 0; e < 2; e++) {
    RP_CHECK(rp_event_wait(rt, done[e], -1));
    RP_CHECK(rp_event_release(rt, done[e]));
  }
  cr_assert_eq(host1 - host0, 0,
               "the host allocated %llu bytes issuing %d replays of two "
               "execs",
               (unsigned long long)(host1 - host0), 2 * WINDOW);
  RP_CHECK(rp_event_release(rt, gate));
  for (int e = 0; e < 2; e++) {
    rp_exec_stats s;
    RP_CHECK(rp_exec_stats_get(ex[e], &s));
    cr_assert_eq(s.replays, WINDOW);
    RP_CHECK(rp_exec_destroy(ex[e]));
  }
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- precondition events that are no events of this runtime ---- */

/* A captured op reference (what a launch inside a capture hands back) or
 * another runtime's event passed as a precondition is refused with
 * RP_ESTALE, and the detail says what the handle is, as rp_event_wait's
 * does, not only that it "is stale"; nothing is replayed. */
Test(replay, a_precondition_that_is_no_event_of_the_runtime_is_named) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_runtime *other = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "empty", empty_task, 0);
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event gate, ref;
  RP_CHECK(rp_capture_precondition(rt, "gate", &gate, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0, .wait = gate},
                          &ref));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event foreign, done = RP_NO_EVENT;
  RP_CHECK(rp_event_create(other, &foreign));
  RP_EXPECT(rp_replay(ex, &(rp_replay_args){.pre = &ref, .npre = 1}, &done),
            RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "captured op reference"), "detail: %s",
            rp_error_detail());
  RP_EXPECT(rp_replay(ex, &(rp_replay_args){.pre = &foreign, .npre = 1}, &done),
            RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "another runtime"), "detail: %s",
            rp_error_detail());
  cr_assert_eq(done.id, 0, "*done untouched");
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 0);
  RP_CHECK(rp_event_release(other, foreign));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(other);
  th_destroy(rt);
}

/* ---- a replay's cost does not grow with max_args ---- */

/* rp_replay copies the argument block it is given into its slot and
 * touches nothing past it: a large max_args (room for the biggest block a
 * replay may pass) costs nothing per replay when replays pass a few
 * bytes. Seen through page faults, not time: 64 slots of 1 MiB each,
 * zeroed to their end on every replay, fault in 16,384 pages over one
 * window; copying 16 bytes faults in a page or two per slot. */
Test(replay, a_replay_touches_only_the_argument_bytes_it_passes) {
  enum { WINDOW = 64 };
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "empty", empty_task, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(
      g,
      &(rp_exec_opts){.max_inflight = WINDOW, .max_args = RP_MAX_REPLAY_ARGS},
      &ex));
  char args[16] = {1};
  struct rusage u0, u1;
  getrusage(RUSAGE_SELF, &u0);
  rp_event done;
  for (int i = 0; i < WINDOW; i++)
    RP_CHECK(
        rp_replay(ex, &(rp_replay_args){.args = args, .args_size = sizeof args},
                  i == WINDOW - 1 ? &done : NULL));
  RP_CHECK(rp_event_wait(rt, done, -1));
  getrusage(RUSAGE_SELF, &u1);
  long faults = u1.ru_minflt - u0.ru_minflt;
  cr_assert_lt(faults, 4096,
               "%ld page faults over %d replays of 16 argument bytes: the "
               "replay path touches its whole max_args block",
               faults, WINDOW);
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- replay numbers past 2^32 ---- */

/* x += the replay's argument, then (on the other worker) y = x and the
 * replay number seen, for the postcondition; the second exec's z += 1
 * waits for that postcondition. */
static _Atomic uint64_t wrap_seen_max, wrap_out_of_order;
static rp_status wrap_add(rp_task_ctx *ctx) {
  const int64_t *a = rp_ctx_args(ctx, NULL);
  *(int64_t *)rp_ctx_ptr(ctx, 0) += *a;
  return RP_OK;
}
static rp_status wrap_copy(rp_task_ctx *ctx) {
  *(int64_t *)rp_ctx_ptr(ctx, 1) = *(const int64_t *)rp_ctx_ptr(ctx, 0);
  uint64_t r = rp_ctx_replay(ctx), prev = atomic_load(&wrap_seen_max);
  if (prev && r != prev + 1)
    atomic_fetch_add(&wrap_out_of_order, 1);
  atomic_store(&wrap_seen_max, r);
  return RP_OK;
}

/* Starts ex's replay count at `from` as if that many replays had run and
 * completed since its placement (what 2^32 replays would leave: weeks of
 * them), nothing in flight. */
static void wrap_seed(rp_exec *ex, uint64_t from) {
  ex->issued = from;
  atomic_store(&ex->issued_pub, from);
  atomic_store(&ex->done_seq, (uint32_t)from);
  ex->epoch = 0;
  for (uint32_t l = 0; l < ex->nlanes; l++)
    atomic_store(&ex->lanes[l].progress, (uint32_t)from * ex->lanes[l].len);
}

/* The counters that wrap at 2^32 (done_seq, the lanes' progress words,
 * each replay's place relative to the placement) do so in the middle of
 * a run with replays in flight, cross-worker waits, an interpolated
 * argument, a postcondition chained into a second exec and eager ops
 * between: every replay runs once, in order, with its own argument, and
 * completes. */
Test(replay, replays_go_on_past_2_to_the_32_with_ports_and_runahead) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id add = reg(rt, "wrap.add", wrap_add, 1000),
             cp = reg(rt, "wrap.copy", wrap_copy, 1000);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x, y, z, w;
  int64_t zero = 0;
  rp_inst *all[] = {&x, &y, &z, &w};
  for (int i = 0; i < 4; i++) {
    RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, all[i]));
    RP_CHECK(rp_instance_write(rt, *all[i], &zero, sizeof zero));
  }
  rp_graph *ga, *gb;
  rp_event pre, d;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_precondition(rt, "in", &pre, NULL));
  rp_interp ip = {.src_offset = 0, .dst_offset = 0, .bytes = 8};
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){.task = add,
                   .proc = 0,
                   .accesses = &(rp_access){.inst = x, .priv = RP_RW},
                   .naccess = 1,
                   .args = &zero,
                   .args_size = sizeof zero,
                   .interps = &ip,
                   .ninterp = 1,
                   .wait = pre},
      NULL));
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){.task = cp,
                   .proc = 1,
                   .accesses = (rp_access[]){{.inst = x, .priv = RP_READ},
                                             {.inst = y, .priv = RP_WRITE}},
                   .naccess = 2},
      &d));
  RP_CHECK(rp_capture_postcondition(rt, "out", &d, 1, NULL));
  RP_CHECK(rp_capture_end(rt, &ga));
  int64_t one = 1;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_precondition(rt, "in", &pre, NULL));
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){.task = add,
                   .proc = 1,
                   .accesses = &(rp_access){.inst = z, .priv = RP_RW},
                   .naccess = 1,
                   .args = &one,
                   .args_size = sizeof one,
                   .wait = pre},
      NULL));
  RP_CHECK(rp_capture_end(rt, &gb));
  rp_exec *ea, *eb;
  RP_CHECK(rp_instantiate(ga, &(rp_exec_opts){.max_inflight = 3}, &ea));
  RP_CHECK(rp_instantiate(gb, &(rp_exec_opts){.max_inflight = 3}, &eb));
  const uint64_t from = (1ull << 32) - 1000;
  wrap_seed(ea, from);
  wrap_seed(eb, from);
  atomic_store(&wrap_seen_max, 0);
  atomic_store(&wrap_out_of_order, 0);
  rp_event go;
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_event_trigger(rt, go));
  enum { N = 3000 };
  int64_t want_x = 0;
  rp_event eager = RP_NO_EVENT;
  for (int i = 0; i < N; i++) {
    int64_t arg = i % 7;
    want_x += arg;
    rp_event post, da, db;
    RP_CHECK(rp_replay(ea,
                       &(rp_replay_args){.args = &arg,
                                         .args_size = sizeof arg,
                                         .pre = &go,
                                         .npre = 1,
                                         .post = &post,
                                         .npost = 1},
                       &da));
    rp_status st;
    /* a full window with a replay at an untriggered precondition is
     * RP_EBUSY (rp_replay): wait for it, then replay */
    while ((st = rp_replay(eb, &(rp_replay_args){.pre = &post, .npre = 1},
                           &db)) == RP_EBUSY)
      RP_CHECK(rp_event_wait(rt, post, -1));
    RP_CHECK(st);
    if (i % 16 == 0) { /* an eager op after the chain, on its own data */
      RP_CHECK(rp_event_release(rt, eager));
      RP_CHECK(rp_launch_task(
          rt,
          &(rp_launch){.task = add,
                       .proc = RP_PROC_ANY,
                       .accesses = &(rp_access){.inst = w, .priv = RP_RW},
                       .naccess = 1,
                       .args = &one,
                       .args_size = sizeof one,
                       .wait = db},
          &eager));
    }
    RP_CHECK(rp_event_release(rt, post));
    RP_CHECK(rp_event_release(rt, da));
    RP_CHECK(rp_event_release(rt, db));
  }
  RP_CHECK(rp_event_wait(rt, eager, -1));
  RP_CHECK(rp_event_release(rt, eager));
  RP_CHECK(rp_runtime_drain(rt));
  RP_CHECK(rp_exec_destroy(ea)); /* waits for every replay in flight */
  RP_CHECK(rp_exec_destroy(eb));
  int64_t got[4];
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_read(rt, *all[i], &got[i], sizeof got[i]));
  cr_assert_eq(got[0], want_x);
  cr_assert_eq(got[1], want_x);
  cr_assert_eq(got[2], N);
  cr_assert_eq(got[3], (N + 15) / 16);
  cr_assert_eq(atomic_load(&wrap_seen_max), from + N - 1);
  cr_assert_eq(atomic_load(&wrap_out_of_order), 0);
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_graph_destroy(ga));
  RP_CHECK(rp_graph_destroy(gb));
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_free(rt, *all[i]));
  th_destroy(rt);
}
