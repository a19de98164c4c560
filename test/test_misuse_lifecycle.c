/* test/test_misuse_lifecycle.c — what the caller does wrong with handles
 * and lifetimes is refused with a named error, never acted on: destroyed
 * runtimes, graphs and execs; another runtime's events and instances;
 * events released twice; instances freed under replays in flight; gated
 * replays while an exec measures its placement; captures left open by an
 * exiting thread; rp_replay from several threads at once. */
#include "helpers.h"

/* replay/replay_impl.h: the worker of ex that waits at a precondition, or
 * -1 (what rp_exec_tune looks at) */
int rp__exec_worker_gated(const rp_exec *ex);

#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEC 1000000000ll

static _Atomic int runs;

static rp_status count_task(rp_task_ctx *ctx) {
  (void)ctx;
  atomic_fetch_add(&runs, 1);
  return RP_OK;
}

/* Writes its replay number into the first element of access 0. */
static rp_status write_task(rp_task_ctx *ctx) {
  float *p = rp_ctx_ptr(ctx, 0);
  if (p)
    p[0] = (float)rp_ctx_replay(ctx);
  atomic_fetch_add(&runs, 1);
  return RP_OK;
}

static rp_task_id reg(rp_runtime *rt, const char *name, rp_task_fn fn,
                      uint64_t cost_ns) {
  rp_task_id id;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = name, .cpu_fn = fn, .cost_ns = cost_ns},
      &id));
  return id;
}

static rp_inst make_inst(rp_runtime *rt) {
  rp_inst in;
  rp_rect r = rp_rect_1d(0, 15);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  return in;
}

/* ---- lifecycle: destroyed handles ---- */

Test(misuse, destroyed_runtime_is_refused_and_double_destroy_is_estale) {
  rp_runtime *rt = th_cpu_runtime(1);
  th_destroy(rt);
  RP_EXPECT(rp_runtime_destroy(rt), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "destroyed"), "%s", rp_error_detail());
  rp_event e;
  RP_EXPECT(rp_event_create(rt, &e), RP_ESTALE);
  RP_EXPECT(rp_runtime_drain(rt), RP_ESTALE);
  rp_graph *g;
  RP_EXPECT(rp_graph_create(rt, &g), RP_ESTALE);
  RP_EXPECT(rp_capture_begin(rt, NULL), RP_ESTALE);
  rp_inst in;
  rp_rect r = rp_rect_1d(0, 3);
  RP_EXPECT(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in), RP_ESTALE);
  RP_EXPECT(rp_event_release(rt, (rp_event){1}), RP_ESTALE);
}

/* Messages that say what is wrong: a runtime with only a capture open is
 * busy because of that capture's graph (the detail says to end it), and
 * an interpolation of 0 bytes is refused as such, not as "outside". */
Test(misuse, open_capture_and_empty_interpolation_are_named) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "count", count_task, 100);
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_EXPECT(rp_runtime_destroy(rt), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "an open capture's graph counts"), "%s",
            rp_error_detail());
  uint32_t arg = 0;
  rp_interp ip = {0, 0, 0};
  rp_launch l = {.task = t,
                 .proc = 0,
                 .args = &arg,
                 .args_size = sizeof arg,
                 .interps = &ip,
                 .ninterp = 1};
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "writes 0 bytes"), "%s",
            rp_error_detail());
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(misuse, destroyed_graph_and_exec_are_refused) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 100);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  /* the runtime refuses to go while they live */
  RP_EXPECT(rp_runtime_destroy(rt), RP_EBUSY);
  RP_CHECK(rp_graph_destroy(g));
  RP_EXPECT(rp_graph_destroy(g), RP_ESTALE);
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ESTALE);
  RP_EXPECT(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, NULL),
            RP_ESTALE);
  RP_EXPECT(rp_graph_validate(g), RP_ESTALE);
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_EXPECT(rp_exec_destroy(ex), RP_ESTALE);
  RP_EXPECT(rp_replay(ex, NULL, &done), RP_ESTALE);
  rp_exec_stats s;
  RP_EXPECT(rp_exec_stats_get(ex, &s), RP_ESTALE);
  RP_EXPECT(rp_exec_dump(ex, stderr, RP_DUMP_TEXT), RP_ESTALE);
  RP_EXPECT(rp_exec_update_args(ex, 0, NULL, 0, NULL), RP_ESTALE);
  cr_assert_str_eq(rp_exec_error_detail(ex), "");
  th_destroy(rt);
}

/* A failed instantiate destroys nothing the caller had: the exec it
 * built and freed again does not take a place in the quarantine of
 * destroyed objects (reprise.h), so the exec destroyed before 32 of them
 * is still refused (RP_ESTALE), and never taken for an exec instantiated
 * after them that reuses its memory. */
Test(misuse, failed_instantiates_keep_a_destroyed_exec_quarantined) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_exec *gone, *live;
  RP_CHECK(rp_instantiate(g, NULL, &gone));
  RP_CHECK(rp_exec_destroy(gone));
  rp_exec_opts bad = {.max_inflight = RP_MAX_INFLIGHT + 1};
  for (int i = 0; i < 32; i++) {
    rp_exec *ex = NULL;
    RP_EXPECT(rp_instantiate(g, &bad, &ex), RP_ERANGE);
    cr_assert_null(ex, "*out untouched");
  }
  RP_CHECK(rp_instantiate(g, NULL, &live));
  RP_EXPECT(rp_exec_destroy(gone), RP_ESTALE);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(live, &s));
  RP_CHECK(rp_exec_destroy(live));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* Graphs no caller was given (a capture aborted, or ended after a launch
 * failed) do not take a place in the quarantine either: a graph destroyed
 * before 32 of them is still refused (RP_ESTALE), never taken for a graph
 * created after them that reuses its memory. */
Test(misuse, aborted_captures_keep_a_destroyed_graph_quarantined) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_graph *gone;
  RP_CHECK(rp_graph_create(rt, &gone));
  RP_CHECK(rp_graph_destroy(gone));
  for (int i = 0; i < 32; i++) {
    RP_CHECK(rp_capture_begin(rt, NULL));
    RP_CHECK(rp_capture_abort(rt));
  }
  rp_graph *live; /* may reuse the memory of a graph freed meanwhile */
  RP_CHECK(rp_graph_create(rt, &live));
  RP_EXPECT(rp_graph_destroy(gone), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_graph_destroy"), "%s",
            rp_error_detail());
  RP_CHECK(rp_graph_destroy(live)); /* not destroyed through gone */
  th_destroy(rt);
}

/* ---- foreign and stale handles ---- */

Test(misuse, another_runtimes_handles_are_refused_never_acted_on) {
  rp_runtime *a = th_cpu_runtime(1), *b = th_cpu_runtime(1);
  rp_inst ia = make_inst(a);
  rp_event ea;
  RP_CHECK(rp_event_create(a, &ea));
  RP_EXPECT(rp_instance_free(b, ia), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "another runtime"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_instance_realloc(b, &ia), RP_ESTALE);
  rp_instance_info info;
  RP_EXPECT(rp_instance_query(b, ia, &info), RP_ESTALE);
  cr_assert_null(rp_instance_ptr(b, ia));
  RP_EXPECT(rp_event_trigger(b, ea), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "another runtime"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_poison(b, ea, RP_ETASK), RP_ESTALE);
  RP_EXPECT(rp_event_release(b, ea), RP_ESTALE);
  RP_EXPECT(rp_event_query(b, ea), RP_ESTALE);
  RP_EXPECT(rp_event_wait(b, ea, 0), RP_ESTALE);
  /* a's objects are untouched */
  RP_CHECK(rp_instance_query(a, ia, &info));
  RP_EXPECT(rp_event_query(a, ea), RP_EAGAIN);
  /* b's own handle with the same slot still works on b */
  rp_inst ib = make_inst(b);
  cr_assert_neq(ib.id, ia.id);
  RP_EXPECT(rp_instance_query(a, ib, &info), RP_ESTALE);
  RP_CHECK(rp_instance_free(b, ib));
  RP_CHECK(rp_event_trigger(a, ea));
  RP_CHECK(rp_event_release(a, ea));
  RP_CHECK(rp_instance_free(a, ia));
  th_destroy(b);
  th_destroy(a);
}

/* engine/engine.h: the tag the last runtime created took */
extern _Atomic uint32_t rp__runtime_tag_last;

/* Runtimes created one after another take different tags also where a
 * count of creations would wrap at 2^32 (the seam starts there: 2^32
 * creations take weeks): a handle of the one before is refused by the
 * next, not taken for the next's own event in the same slot. */
Test(misuse, consecutive_runtimes_keep_distinct_tags_past_2_to_the_32) {
  uint32_t saved = atomic_load(&rp__runtime_tag_last);
  atomic_store(&rp__runtime_tag_last, UINT32_MAX - 1);
  rp_runtime *a = th_cpu_runtime(1), *b = th_cpu_runtime(1),
             *c = th_cpu_runtime(1);
  atomic_store(&rp__runtime_tag_last, saved);
  rp_event ea, eb, ec;
  RP_CHECK(rp_event_create(a, &ea));
  RP_CHECK(rp_event_create(b, &eb));
  RP_CHECK(rp_event_create(c, &ec));
  /* the same slot and generation in each: only the tag tells them apart */
  cr_assert_eq((uint32_t)(eb.id & 0x7fffff), (uint32_t)(ec.id & 0x7fffff));
  cr_assert_neq(eb.id, ec.id, "runtimes b and c share a tag: %#llx",
                (unsigned long long)eb.id);
  cr_assert_neq(ea.id, eb.id, "runtimes a and b share a tag: %#llx",
                (unsigned long long)ea.id);
  RP_EXPECT(rp_event_trigger(c, eb), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "another runtime"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_query(c, ec), RP_EAGAIN); /* c's own: untouched */
  RP_EXPECT(rp_event_query(b, eb), RP_EAGAIN);
  rp_runtime *rts[] = {a, b, c};
  rp_event evs[] = {ea, eb, ec};
  for (int i = 0; i < 3; i++) {
    RP_CHECK(rp_event_trigger(rts[i], evs[i]));
    RP_CHECK(rp_event_release(rts[i], evs[i]));
  }
  th_destroy(c);
  th_destroy(b);
  th_destroy(a);
}

Test(misuse, stale_instance_and_released_event_are_refused) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst in = make_inst(rt), old = in;
  RP_CHECK(rp_instance_realloc(rt, &in));
  RP_EXPECT(rp_instance_free(rt, old), RP_ESTALE);
  RP_EXPECT(rp_instance_realloc(rt, &old), RP_ESTALE);
  RP_CHECK(rp_instance_free(rt, in));
  RP_EXPECT(rp_instance_free(rt, in), RP_ESTALE);
  float buf[16];
  RP_EXPECT(rp_instance_read(rt, in, buf, sizeof buf), RP_ESTALE);
  /* a triggered event released once is recycled: stale */
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_trigger(rt, e));
  RP_CHECK(rp_event_release(rt, e));
  RP_EXPECT(rp_event_release(rt, e), RP_ESTALE);
  RP_EXPECT(rp_event_trigger(rt, e), RP_ESTALE);
  th_destroy(rt);
}

/* A graph whose copy names an instance freed since: validate and
 * instantiate say so in their own name and the op's, not an internal
 * call's. */
Test(misuse, a_stale_copy_is_named_by_validate_and_instantiate) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "count", count_task, 100);
  rp_inst a = make_inst(rt), b = make_inst(rt);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, NULL));
  RP_CHECK(rp_graph_add_copy(g, &(rp_copy){.src = a, .dst = b}, NULL));
  RP_CHECK(rp_instance_free(rt, b));
  RP_EXPECT(rp_graph_validate(g), RP_ESTALE);
  cr_assert(
      !strncmp(rp_error_detail(), "rp_graph_validate: op 1 (copy): ", 32) &&
          !strstr(rp_error_detail(), "rp_xfer"),
      "%s", rp_error_detail());
  rp_exec *ex;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ESTALE);
  cr_assert(!strncmp(rp_error_detail(), "rp_instantiate: op 1 (copy): ", 29),
            "%s", rp_error_detail());
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  th_destroy(rt);
}

/* Releasing a still-pending event twice must not take the trigger's
 * reference: the task gated on it still runs once it triggers, and the
 * runtime goes down cleanly. */
Test(misuse, pending_event_released_twice_is_refused) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_event gate, done;
  RP_CHECK(rp_event_create(rt, &gate));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0, .wait = gate},
                          &done));
  RP_CHECK(rp_event_release(rt, gate));
  RP_EXPECT(rp_event_release(rt, gate), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "already released"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_release(rt, gate), RP_ESTALE);
  RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  cr_assert_eq(atomic_load(&runs), 1);
  th_destroy(rt);
}

/* ---- resources in use ---- */

/* An exec of one task on proc (it writes `in` unless in.id is 0), gated
 * on precondition "go" when gated, max_inflight replays in flight. */
static rp_exec *op_exec(rp_runtime *rt, rp_task_id t, rp_proc proc, rp_inst in,
                        int gated, uint32_t max_inflight) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access acc = {.inst = in, .priv = RP_WRITE};
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){
          .task = t, .proc = proc, .accesses = &acc, .naccess = in.id != 0},
      &op));
  if (gated) {
    rp_port_id p;
    RP_CHECK(rp_graph_add_precondition(g, "go", &p));
    RP_CHECK(rp_graph_bind_precondition(g, p, op));
  }
  rp_exec *ex;
  RP_CHECK(
      rp_instantiate(g, &(rp_exec_opts){.max_inflight = max_inflight}, &ex));
  RP_CHECK(rp_graph_destroy(g));
  return ex;
}

/* One task writing inst, gated on precondition port 0. */
static rp_exec *gated_writer(rp_runtime *rt, rp_task_id t, rp_inst in,
                             uint32_t max_inflight) {
  return op_exec(rt, t, RP_PROC_ANY, in, 1, max_inflight);
}

Test(misuse, instance_used_by_a_replay_in_flight_is_not_freed) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "write", write_task, 100);
  rp_inst in = make_inst(rt);
  rp_exec *ex = gated_writer(rt, t, in, 4);
  rp_event go, done;
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &go, .npre = 1}, &done));
  rp_instance_info before, after;
  RP_CHECK(rp_instance_query(rt, in, &before));
  RP_EXPECT(rp_instance_free(rt, in), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "in flight"), "%s", rp_error_detail());
  rp_inst moved = in;
  RP_EXPECT(rp_instance_realloc(rt, &moved), RP_EBUSY);
  cr_assert_eq(moved.id, in.id, "realloc changed the handle");
  /* nothing changed: same generation and storage */
  RP_CHECK(rp_instance_query(rt, in, &after));
  cr_assert_eq(after.generation, before.generation);
  cr_assert_eq(after.ptr, before.ptr);
  RP_CHECK(rp_event_trigger(rt, go));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, go));
  /* quiet now: free works, and a later replay reports the stale instance */
  RP_CHECK(rp_instance_realloc(rt, &moved));
  RP_CHECK(rp_instance_free(rt, moved));
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_event_trigger(rt, go));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &go, .npre = 1}, &done));
  RP_EXPECT(rp_event_wait(rt, done, 10 * SEC), RP_ESTALE);
  /* the detail names the handle the caller held, runtime tag included */
  char want[96];
  snprintf(want, sizeof want, "instance %#llx (accessed by op 0) was freed",
           (unsigned long long)in.id);
  cr_assert(strstr(rp_exec_error_detail(ex), want), "no '%s' in '%s'", want,
            rp_exec_error_detail(ex));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

typedef struct trigger_later {
  rp_runtime *rt;
  rp_event e;
  _Atomic int fired;
} trigger_later;

static void *trigger_after_sleep(void *p) {
  trigger_later *tl = p;
  usleep(50000);
  atomic_store(&tl->fired, 1);
  rp_event_trigger(tl->rt, tl->e);
  return NULL;
}

/* Eager ops are waited for: free returns once the gated task ran. */
Test(misuse, instance_used_by_an_eager_op_waits_for_it) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "write", write_task, 0);
  atomic_store(&runs, 0);
  rp_inst in = make_inst(rt);
  trigger_later tl = {.rt = rt};
  RP_CHECK(rp_event_create(rt, &tl.e));
  rp_access acc = {.inst = in, .priv = RP_WRITE};
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){
          .task = t, .proc = 0, .accesses = &acc, .naccess = 1, .wait = tl.e},
      NULL));
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, trigger_after_sleep, &tl), 0);
  RP_CHECK(rp_instance_free(rt, in));
  cr_assert(atomic_load(&tl.fired), "free did not wait for the eager op");
  cr_assert_eq(atomic_load(&runs), 1);
  pthread_join(th, NULL);
  RP_CHECK(rp_event_release(rt, tl.e));
  th_destroy(rt);
}

/* ---- replay never blocks beyond its promise ---- */

/* N gated replays are issued before any precondition triggers, with room
 * for all of them in flight: rp_replay must return every time, in each
 * placement mode (unhinted, hinted, no_replace); rp_replay never measures
 * or re-places, rp_exec_tune does once they completed. */
static void gated_replays(uint64_t cost_ns, int no_replace) {
  enum { N = 40 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, cost_ns);
  atomic_store(&runs, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "go", &p));
  for (int i = 0; i < 6; i++) {
    rp_op_id op;
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               &op));
    RP_CHECK(rp_graph_bind_precondition(g, p, op));
  }
  rp_exec *ex;
  RP_CHECK(rp_instantiate(
      g, &(rp_exec_opts){.max_inflight = N, .no_replace = no_replace}, &ex));
  RP_CHECK(rp_graph_destroy(g));
  rp_event go[N], done[N];
  for (int i = 0; i < N; i++) {
    RP_CHECK(rp_event_create(rt, &go[i]));
    RP_CHECK(
        rp_replay(ex, &(rp_replay_args){.pre = &go[i], .npre = 1}, &done[i]));
  }
  cr_assert_eq(atomic_load(&runs), 0);
  for (int i = 0; i < N; i++)
    RP_CHECK(rp_event_trigger(rt, go[i]));
  for (int i = 0; i < N; i++) {
    RP_CHECK(rp_event_wait(rt, done[i], 30 * SEC));
    RP_CHECK(rp_event_release(rt, done[i]));
    RP_CHECK(rp_event_release(rt, go[i]));
  }
  cr_assert_eq(atomic_load(&runs), N * 6);
  /* the exec is quiet now: rp_exec_tune runs its trial replays (with a
   * triggered precondition) and replays go on */
  rp_event ready;
  RP_CHECK(rp_event_create(rt, &ready));
  RP_CHECK(rp_event_trigger(rt, ready));
  uint32_t tuned = 0;
  RP_CHECK(
      rp_exec_tune(ex, &(rp_replay_args){.pre = &ready, .npre = 1}, &tuned));
  cr_assert_eq(atomic_load(&runs), (int)((N + tuned) * 6));
  cr_assert(cost_ns == 0 && !no_replace ? tuned > 0 : tuned == 0, "%u", tuned);
  RP_CHECK(rp_event_release(rt, ready));
  for (int i = 0; i < 40; i++) {
    rp_event e, d;
    RP_CHECK(rp_event_create(rt, &e));
    RP_CHECK(rp_event_trigger(rt, e));
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &e, .npre = 1}, &d));
    RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
    RP_CHECK(rp_event_release(rt, d));
    RP_CHECK(rp_event_release(rt, e));
  }
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* rp_exec_tune runs replays now: it refuses a precondition that has not
 * triggered (RP_EAGAIN) and a replay in flight that still waits for one
 * (RP_EBUSY), running nothing either time, instead of waiting for the
 * caller, who may trigger them only after the call returns. */
Test(misuse, exec_tune_refuses_pending_preconditions, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "go", &p));
  for (int i = 0; i < 4; i++) {
    rp_op_id op;
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               &op));
    RP_CHECK(rp_graph_bind_precondition(g, p, op));
  }
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  rp_event go, done;
  RP_CHECK(rp_event_create(rt, &go));
  uint32_t tuned = 7;
  RP_EXPECT(rp_exec_tune(ex, &(rp_replay_args){.pre = &go, .npre = 1}, &tuned),
            RP_EAGAIN);
  cr_assert_eq(tuned, 7, "nothing ran: *replays untouched");
  RP_EXPECT(rp_exec_tune(ex, NULL, &tuned), RP_EPORT);
  /* a gated replay in flight */
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &go, .npre = 1}, &done));
  rp_event ready;
  RP_CHECK(rp_event_create(rt, &ready));
  RP_CHECK(rp_event_trigger(rt, ready));
  RP_EXPECT(
      rp_exec_tune(ex, &(rp_replay_args){.pre = &ready, .npre = 1}, &tuned),
      RP_EBUSY);
  char tune_want[160];
  snprintf(tune_want, sizeof tune_want,
           "rp_exec_tune: replay 0 waits for precondition 0 ('go'), event "
           "%#llx, an rp_event_create event",
           (unsigned long long)go.id);
  cr_assert(strstr(rp_error_detail(), tune_want), "%s", rp_error_detail());
  cr_assert_eq(tuned, 7, "nothing ran: *replays untouched");
  cr_assert_eq(atomic_load(&runs), 0, "nothing ran");
  /* destroy, an args update and a trace write would wait for it forever:
   * refused, nothing changed (the exec replays and destroys below) */
  RP_CHECK(rp_exec_trace_start(ex, 1));
  const char *calls[] = {"rp_exec_destroy", "rp_exec_update_args",
                         "rp_exec_trace_write"};
  for (int k = 0; k < 3; k++) {
    char path[] = "/tmp/rp_misuse_trace_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    rp_status st = k == 0   ? rp_exec_destroy(ex)
                   : k == 1 ? rp_exec_update_args(ex, 0, NULL, 0, NULL)
                            : rp_exec_trace_write(ex, path);
    cr_assert_eq(st, RP_EBUSY, "%s: %s", calls[k], rp_status_name(st));
    /* the replay, its port, its event and what to do with it */
    char want[256];
    snprintf(want, sizeof want,
             "%s: replay 0 waits for precondition 0 ('go'), event %#llx, an "
             "rp_event_create event that has not triggered: trigger it; "
             "then retry (nothing was done)",
             calls[k], (unsigned long long)go.id);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    struct stat sb;
    cr_assert(stat(path, &sb) == 0 && sb.st_size == 0, "%s wrote", calls[k]);
    unlink(path);
  }
  RP_CHECK(rp_event_trigger(rt, go));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  char tp[] = "/tmp/rp_misuse_trace_XXXXXX"; /* the trace stayed armed */
  close(mkstemp(tp));
  RP_CHECK(rp_exec_trace_write(ex, tp));
  unlink(tp);
  RP_CHECK(
      rp_exec_tune(ex, &(rp_replay_args){.pre = &ready, .npre = 1}, &tuned));
  cr_assert_gt(tuned, 0);
  cr_assert_eq(atomic_load(&runs), (int)((1 + tuned) * 4));
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_event_release(rt, ready));
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

Test(misuse, gated_replays_do_not_block_while_placement_is_measured,
     .timeout = 120) {
  gated_replays(0, 0);
}

Test(misuse, gated_replays_do_not_block_with_cost_hints, .timeout = 120) {
  gated_replays(1000, 0);
}

Test(misuse, gated_replays_do_not_block_with_no_replace, .timeout = 120) {
  gated_replays(0, 1);
}

/* One op on proc, no access, gated by "go" when gated. */
static rp_exec *one_op_exec_on(rp_runtime *rt, rp_task_id t, rp_proc proc,
                               int gated, uint32_t max_inflight) {
  return op_exec(rt, t, proc, (rp_inst){0}, gated, max_inflight);
}

static rp_exec *one_op_exec(rp_runtime *rt, rp_task_id t, int gated,
                            uint32_t max_inflight) {
  return one_op_exec_on(rt, t, RP_PROC_ANY, gated, max_inflight);
}

/* The event a gated replay waits at in the refusal tests below, all made
 * to trigger by the caller's event go: go itself (GATE_USER, an
 * rp_event_create event: the refusals say "trigger it"), or one the
 * runtime completes once go triggered, which they say to wait for: the
 * done event of an eager op on proc `proc` waiting for go (GATE_EAGER),
 * or the postcondition 'out' of a replay of exec src, its op on proc
 * `proc` waiting for go (GATE_POST: execs chained through ports). */
enum { GATE_USER, GATE_EAGER, GATE_POST };
typedef struct gate_src {
  rp_event go, gate, src_done;
  rp_exec *src;
} gate_src;

static gate_src gate_src_make(rp_runtime *rt, rp_task_id t, int kind,
                              rp_proc proc) {
  gate_src s = {0};
  RP_CHECK(rp_event_create(rt, &s.go));
  s.gate = s.go;
  if (kind == GATE_EAGER)
    RP_CHECK(rp_launch_task(
        rt, &(rp_launch){.task = t, .proc = proc, .wait = s.go}, &s.gate));
  if (kind == GATE_POST) {
    rp_graph *g;
    RP_CHECK(rp_graph_create(rt, &g));
    rp_op_id op;
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = proc}, &op));
    rp_port_id p;
    RP_CHECK(rp_graph_add_precondition(g, "go", &p));
    RP_CHECK(rp_graph_bind_precondition(g, p, op));
    RP_CHECK(rp_graph_add_postcondition(g, "out", &p));
    RP_CHECK(rp_graph_bind_postcondition(g, p, op));
    RP_CHECK(rp_instantiate(g, NULL, &s.src));
    RP_CHECK(rp_graph_destroy(g));
    RP_CHECK(rp_replay(
        s.src,
        &(rp_replay_args){.pre = &s.go, .npre = 1, .post = &s.gate, .npost = 1},
        &s.src_done));
  }
  return s;
}

/* Once go triggered: everything s made completed and is released. */
static void gate_src_free(rp_runtime *rt, gate_src *s) {
  RP_CHECK(rp_event_wait(rt, s->gate, 30 * SEC));
  if (s->gate.id != s->go.id)
    RP_CHECK(rp_event_release(rt, s->gate));
  if (s->src) {
    RP_CHECK(rp_event_wait(rt, s->src_done, 30 * SEC));
    RP_CHECK(rp_event_release(rt, s->src_done));
    RP_CHECK(rp_exec_destroy(s->src));
  }
  RP_CHECK(rp_event_release(rt, s->go));
}

/* Asserts that detail names replay 0 of exec gx (NULL: the refusing call's
 * own exec) waiting at its precondition 0 ('go') for event e, and what to
 * do: trigger it (user) or wait for it. */
static void assert_gate_words(const char *detail, const rp_exec *gx, rp_event e,
                              int user) {
  char of[64] = "", want[512];
  if (gx)
    snprintf(of, sizeof of, " of exec %p", (const void *)gx);
  snprintf(want, sizeof want,
           "replay 0%s waits for precondition 0 ('go'), event %#llx, %s", of,
           (unsigned long long)e.id,
           user ? "an rp_event_create event that has not triggered: trigger it"
                : "which the runtime completes (another replay's "
                  "postcondition or done event, or an eager op's done event) "
                  "and has not completed yet: wait for it (rp_event_wait on "
                  "it");
  cr_assert(strstr(detail, want), "want \"%s\" in: %s", want, detail);
  if (!user)
    cr_assert(!strstr(detail, "trigger it"), "%s", detail);
}

/* Replays of an exec queued on a worker behind another exec's replay that
 * waits for a precondition cannot complete: with its window full,
 * rp_replay says so (RP_EBUSY) instead of waiting forever, and so does
 * rp_exec_destroy, both naming the worker, the other exec's replay, its
 * port and event, and whether to trigger it (the caller's event) or wait
 * for it (one the runtime completes: an eager op's done event, another
 * exec's postcondition); once it completed, everything completes and the
 * exec replays as before. ea and eb share worker 0 (GATE_POST's source
 * exec runs on worker 1). */
static void behind_another_execs_gate(int kind) {
  rp_runtime *rt = th_cpu_runtime(kind == GATE_POST ? 2 : 1);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  gate_src src = gate_src_make(rt, t, kind, kind == GATE_POST ? 1 : 0);
  rp_exec *ea = one_op_exec_on(rt, t, 0, 1, 2),
          *eb = one_op_exec_on(rt, t, 0, 0, 2);
  rp_event da, db[2];
  RP_CHECK(rp_replay(ea, &(rp_replay_args){.pre = &src.gate, .npre = 1}, &da));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_replay(eb, NULL, &db[i]));
  RP_EXPECT(rp_replay(eb, NULL, NULL), RP_EBUSY);
  const char *d = rp_error_detail();
  cr_assert(strstr(d, "rp_replay: 2 replays are in flight (max_inflight) and "
                      "make no progress behind a replay that waits at a "
                      "precondition on a worker they share: on worker 0, "),
            "%s", d);
  assert_gate_words(d, ea, src.gate, kind == GATE_USER);
  cr_assert(strstr(d, "; then replay again (nothing was replayed)"), "%s", d);
  RP_EXPECT(rp_exec_destroy(eb), RP_EBUSY);
  d = rp_error_detail();
  cr_assert(strstr(d, "rp_exec_destroy: the replays in flight make no "
                      "progress while on worker 0, "),
            "%s", d);
  assert_gate_words(d, ea, src.gate, kind == GATE_USER);
  cr_assert_eq(atomic_load(&runs), 0);
  RP_CHECK(rp_event_trigger(rt, src.go));
  RP_CHECK(rp_event_wait(rt, da, 30 * SEC));
  for (int i = 0; i < 2; i++) {
    RP_CHECK(rp_event_wait(rt, db[i], 30 * SEC));
    RP_CHECK(rp_event_release(rt, db[i]));
  }
  gate_src_free(rt, &src);
  cr_assert_eq(atomic_load(&runs), 3 + (kind != GATE_USER));
  RP_CHECK(rp_replay(eb, NULL, NULL)); /* usable as before */
  RP_CHECK(rp_event_release(rt, da));
  RP_CHECK(rp_exec_destroy(ea));
  RP_CHECK(rp_exec_destroy(eb));
  th_destroy(rt);
}

Test(misuse, replays_behind_another_execs_gate_are_refused_not_waited_for,
     .timeout = 60) {
  behind_another_execs_gate(GATE_USER);
}

Test(misuse, replays_behind_an_eager_ops_done_event_say_to_wait_for_it,
     .timeout = 60) {
  behind_another_execs_gate(GATE_EAGER);
}

Test(misuse, replays_behind_another_execs_postcondition_say_to_wait_for_it,
     .timeout = 60) {
  behind_another_execs_gate(GATE_POST);
}

/* The gate may hold a worker only through another lane: exec B's first op
 * (worker 1) waits for "go", its second (worker 0) waits for the first;
 * exec A runs on worker 0 only, behind B. A's third replay and A's
 * destroy refuse (RP_EBUSY) instead of waiting for the caller. */
Test(misuse, replays_held_through_another_lanes_gate_are_refused,
     .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id x, y;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 1}, &x));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &y));
  RP_CHECK(rp_graph_add_edge(g, x, y));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "go", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, x));
  rp_exec *eb;
  RP_CHECK(rp_instantiate(g, NULL, &eb));
  RP_CHECK(rp_graph_destroy(g));
  rp_exec *ea = one_op_exec_on(rt, t, 0, 0, 2);
  rp_event go, db;
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_replay(eb, &(rp_replay_args){.pre = &go, .npre = 1}, &db));
  RP_CHECK(rp_replay(ea, NULL, NULL));
  RP_CHECK(rp_replay(ea, NULL, NULL));
  RP_EXPECT(rp_replay(ea, NULL, NULL), RP_EBUSY);
  RP_EXPECT(rp_exec_destroy(ea), RP_EBUSY);
  cr_assert_eq(atomic_load(&runs), 0);
  RP_CHECK(rp_event_trigger(rt, go));
  RP_CHECK(rp_event_wait(rt, db, 30 * SEC));
  RP_CHECK(rp_exec_destroy(ea)); /* its two replays complete, then it goes */
  cr_assert_eq(atomic_load(&runs), 4);
  RP_CHECK(rp_event_release(rt, db));
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_exec_destroy(eb));
  th_destroy(rt);
}

static rp_status slow_task(rp_task_ctx *ctx) {
  (void)ctx;
  usleep(3000);
  atomic_fetch_add(&runs, 1);
  return RP_OK;
}

/* A gate on one worker holds up only the replays queued behind it: an exec
 * on another worker replays past its window without RP_EBUSY (its replays
 * are slow, so it waits for slots), and destroying it once quiet returns
 * while the other exec still waits for its precondition. */
Test(misuse, a_gate_on_another_worker_does_not_refuse_or_block, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id slow = reg(rt, "slow", slow_task, 0);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_exec *ea = one_op_exec_on(rt, slow, 0, 0, 2);
  rp_exec *eb = one_op_exec_on(rt, t, 1, 1, 2);
  rp_event go, db;
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_replay(eb, &(rp_replay_args){.pre = &go, .npre = 1}, &db));
  for (int i = 0; i < 8; i++)
    RP_CHECK(rp_replay(ea, NULL, NULL));
  RP_CHECK(rp_exec_destroy(ea)); /* waits for its own replays only */
  cr_assert_eq(atomic_load(&runs), 8);
  RP_EXPECT(rp_event_query(rt, db), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, go));
  RP_CHECK(rp_event_wait(rt, db, 30 * SEC));
  RP_CHECK(rp_event_release(rt, db));
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_exec_destroy(eb));
  th_destroy(rt);
}

/* A callback on a worker other than an exec's destroys that (quiet) exec
 * and returns; rp_exec_tune from a callback is RP_EBUSY (it always
 * waits). */
static rp_exec *cb_quiet_ex;
static _Atomic int cb_quiet_destroy = 1, cb_tune = 1;

static void eager_cb(void *arg, rp_status st) {
  (void)arg, (void)st;
  uint32_t n;
  atomic_store(&cb_tune, rp_exec_tune(cb_quiet_ex, NULL, &n));
  atomic_store(&cb_quiet_destroy, rp_exec_destroy(cb_quiet_ex));
}

Test(misuse, a_callback_destroys_a_quiet_exec_and_cannot_tune, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id slow = reg(rt, "slow", slow_task, 0);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  cb_quiet_ex = one_op_exec_on(rt, t, 0, 0, 2);
  rp_event d;
  RP_CHECK(rp_replay(cb_quiet_ex, NULL, &d));
  RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
  RP_CHECK(rp_event_release(rt, d));
  rp_event e; /* an eager op on worker 1, its callback on that worker */
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = slow, .proc = 1}, &e));
  RP_CHECK(rp_event_on_complete(rt, e, eager_cb, NULL));
  RP_CHECK(rp_event_wait(rt, e, 30 * SEC));
  for (int i = 0; i < 3000 && atomic_load(&cb_quiet_destroy) == 1; i++)
    usleep(1000);
  cr_assert_eq(atomic_load(&cb_tune), RP_EBUSY);
  cr_assert_eq(atomic_load(&cb_quiet_destroy), RP_OK);
  RP_CHECK(rp_event_release(rt, e));
  th_destroy(rt);
}

/* An eager op's callback on the only worker: the op queued behind it
 * (which uses inst) cannot run before the callback returns, so the calls
 * that would wait for it are RP_EBUSY there and change nothing; a poll
 * (timeout 0) answers. */
static rp_inst cb_inst;
static rp_event cb_behind;
static _Atomic int cb_free_st = 1, cb_realloc_st = 1, cb_wait_st = 1,
                   cb_poll_st = 1, cb_drain_st = 1, cb_destroy_rt_st = 1;
static _Atomic int cb_same_handle;

static rp_status seven_task(rp_task_ctx *ctx) {
  ((float *)rp_ctx_ptr(ctx, 0))[0] = 7.0f;
  atomic_fetch_add(&runs, 1);
  return RP_OK;
}

static void blocking_calls_cb(void *arg, rp_status st) {
  rp_runtime *rt = arg;
  (void)st;
  rp_inst in = cb_inst;
  atomic_store(&cb_free_st, rp_instance_free(rt, cb_inst));
  atomic_store(&cb_realloc_st, rp_instance_realloc(rt, &in));
  atomic_store(&cb_same_handle, in.id == cb_inst.id);
  atomic_store(&cb_wait_st, rp_event_wait(rt, cb_behind, -1));
  atomic_store(&cb_poll_st, rp_event_wait(rt, cb_behind, 0));
  atomic_store(&cb_drain_st, rp_runtime_drain(rt));
  atomic_store(&cb_destroy_rt_st, rp_runtime_destroy(rt));
}

Test(misuse, a_callback_cannot_wait_for_work_queued_behind_it, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id slow = reg(rt, "slow", slow_task, 0);
  rp_task_id w = reg(rt, "seven", seven_task, 0);
  atomic_store(&runs, 0);
  cb_inst = make_inst(rt);
  rp_event a;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = slow, .proc = 0}, &a));
  rp_access acc = {cb_inst, RP_WRITE, RP_REDOP_NONE};
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = w, .proc = 0, .accesses = &acc, .naccess = 1},
      &cb_behind));
  RP_CHECK(rp_event_on_complete(rt, a, blocking_calls_cb, rt));
  RP_CHECK(rp_event_wait(rt, cb_behind, 30 * SEC));
  cr_assert_eq(atomic_load(&cb_free_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&cb_realloc_st), RP_EBUSY);
  cr_assert(atomic_load(&cb_same_handle), "a refused realloc moved the handle");
  cr_assert_eq(atomic_load(&cb_wait_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&cb_poll_st), RP_ETIMEDOUT);
  cr_assert_eq(atomic_load(&cb_drain_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&cb_destroy_rt_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&runs), 2, "both ops ran");
  float v[16] = {-1};
  RP_CHECK(rp_instance_read(rt, cb_inst, v, sizeof v));
  cr_assert_eq(v[0], 7.0f, "the write task ran on the kept storage");
  RP_CHECK(rp_event_release(rt, a));
  RP_CHECK(rp_event_release(rt, cb_behind));
  RP_CHECK(rp_instance_free(rt, cb_inst)); /* from here it works */
  th_destroy(rt);
}

/* A free or realloc refused (RP_EBUSY: an exec holds a gated replay of
 * the instance) changes nothing: replays of another exec using it, on
 * another thread meanwhile, never fail as if it had changed (the
 * generation word's transient mark was read as stale: 1 in 20 failed). */
static rp_exec *busy_r;
static _Atomic int busy_stop, busy_exited;
static _Atomic long busy_ok, busy_failed;

static void *replay_loop(void *arg) {
  rp_runtime *rt = arg;
  while (!atomic_load(&busy_stop)) {
    rp_event d;
    rp_status rs = rp_replay(busy_r, NULL, &d);
    if (rs == RP_EBUSY) /* the ring is full behind the gated replay */
      break;
    if (rs != RP_OK) {
      atomic_fetch_add(&busy_failed, 1);
      break;
    }
    rp_status st = rp_event_wait(rt, d, -1);
    atomic_fetch_add(st == RP_OK ? &busy_ok : &busy_failed, 1);
    rp_event_release(rt, d);
  }
  atomic_store(&busy_exited, 1);
  return NULL;
}

Test(misuse, a_refused_free_fails_no_replay_of_the_instance, .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  rp_inst u = make_inst(rt), w = make_inst(rt);
  rp_graph *g;
  rp_exec *gated;
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event go;
  RP_CHECK(rp_capture_precondition(rt, "go", &go, NULL));
  rp_access au = {u, RP_RW, RP_REDOP_NONE};
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){
          .task = t, .proc = 0, .accesses = &au, .naccess = 1, .wait = go},
      NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &gated));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_access ar[2] = {{w, RP_RW, RP_REDOP_NONE}, {u, RP_READ, RP_REDOP_NONE}};
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 1, .accesses = ar, .naccess = 2},
      NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &busy_r));
  RP_CHECK(rp_graph_destroy(g));
  rp_event gate, gd;
  RP_CHECK(rp_event_create(rt, &gate));
  RP_CHECK(rp_replay(gated, &(rp_replay_args){.pre = &gate, .npre = 1}, &gd));
  atomic_store(&busy_stop, 0);
  atomic_store(&busy_exited, 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, replay_loop, rt), 0);
  /* 20000 tries, and on until a replay has completed beside them (a
   * loaded machine may not run the replaying thread at once; 60 s at most,
   * then the assertion below fails) */
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0;; i++) {
    if (i >= 20000) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (atomic_load(&busy_ok) > 0 || atomic_load(&busy_exited) ||
          now.tv_sec - t0.tv_sec > 60)
        break;
    }
    rp_inst h = u;
    rp_status st =
        i % 2 ? rp_instance_free(rt, u) : rp_instance_realloc(rt, &h);
    cr_assert_eq(st, RP_EBUSY, "try %d: %s", i, rp_status_name(st));
    cr_assert_eq(h.id, u.id);
  }
  atomic_store(&busy_stop, 1);
  pthread_join(th, NULL);
  cr_assert_eq(atomic_load(&busy_failed), 0,
               "%ld of %ld replays failed though nothing changed: %s",
               atomic_load(&busy_failed),
               atomic_load(&busy_ok) + atomic_load(&busy_failed),
               rp_exec_error_detail(busy_r));
  cr_assert_gt(atomic_load(&busy_ok), 0);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, gd, 30 * SEC));
  RP_CHECK(rp_event_release(rt, gd));
  RP_CHECK(rp_event_release(rt, gate));
  RP_CHECK(rp_exec_destroy(gated));
  RP_CHECK(rp_exec_destroy(busy_r));
  RP_CHECK(rp_instance_free(rt, u));
  RP_CHECK(rp_instance_free(rt, w));
  th_destroy(rt);
}

/* rp_exec_destroy while another thread replays the exec in a loop: busy
 * while that thread is inside rp_replay, then it succeeds, and the other
 * thread's next rp_replay says RP_ESTALE (the exec's tag is read while
 * destroy poisons it: atomic, no data race for TSan). The thread is held
 * inside rp_replay first: the exec's window (2) is full of replays whose
 * task waits, so its third rp_replay waits for a slot. */
static rp_exec *loop_ex;
static _Atomic int loop_last = 1;
static _Atomic int loop_entering, loop_go;

static rp_status held_count_task(rp_task_ctx *ctx) {
  (void)ctx;
  for (long i = 0; i < 10000 && !atomic_load(&loop_go); i++)
    usleep(1000); /* 10 s at most */
  return RP_OK;
}

static void *replay_until_refused(void *arg) {
  (void)arg;
  for (int i = 1;; i++) {
    atomic_store(&loop_entering, i);
    rp_status st = rp_replay(loop_ex, NULL, NULL);
    if (st == RP_EBUSY) /* destroy is inside now */
      continue;
    if (st != RP_OK) {
      atomic_store(&loop_last, st);
      return NULL;
    }
  }
}

/* Lets the held replays go after 5 s whatever happens (a destroy that
 * came before the thread was inside would wait for them). */
static void *loop_watchdog(void *arg) {
  (void)arg;
  for (int i = 0; i < 5000 && !atomic_load(&loop_go); i++)
    usleep(1000);
  atomic_store(&loop_go, 1);
  return NULL;
}

Test(misuse, destroy_beside_a_replaying_thread_is_busy_then_stale,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "held", held_count_task, 0);
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 2}, &loop_ex));
  RP_CHECK(rp_graph_destroy(g));
  atomic_store(&loop_go, 0);
  pthread_t th, dog;
  cr_assert_eq(pthread_create(&dog, NULL, loop_watchdog, NULL), 0);
  cr_assert_eq(pthread_create(&th, NULL, replay_until_refused, NULL), 0);
  for (int i = 0; i < 10000 && atomic_load(&loop_entering) < 3; i++)
    usleep(1000);
  cr_assert_geq(atomic_load(&loop_entering), 3, "the thread never replayed");
  usleep(100000); /* it waits inside its third rp_replay by now */
  rp_status st = rp_exec_destroy(loop_ex);
  cr_assert_eq(st, RP_EBUSY, "destroy beside a thread inside rp_replay: %s",
               rp_status_name(st));
  cr_assert(strstr(rp_error_detail(), "rp_replay"), "%s", rp_error_detail());
  atomic_store(&loop_go, 1); /* the replays run; the thread goes on */
  while ((st = rp_exec_destroy(loop_ex)) == RP_EBUSY)
    ;
  cr_assert_eq(st, RP_OK, "%s", rp_status_name(st));
  pthread_join(th, NULL);
  pthread_join(dog, NULL);
  cr_assert_eq(atomic_load(&loop_last), RP_ESTALE, "%s",
               rp_status_name(atomic_load(&loop_last)));
  th_destroy(rt);
}

/* While one thread is inside rp_exec_tune (its trial replay held in a
 * task), rp_exec_destroy and rp_replay from another are RP_EBUSY, naming
 * every call that holds an exec (their messages named rp_replay alone). */
Test(misuse, calls_beside_a_tuning_thread_are_busy_naming_tune,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "hold", th_held_task, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 2; i++) {
    rp_op_id op;
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               &op));
  }
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  th_held_tune_start(ex, NULL);
  RP_EXPECT(rp_exec_destroy(ex), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "inside rp_replay, rp_exec_tune, "
                                      "rp_exec_destroy, rp_exec_update_args, "
                                      "rp_exec_trace_start or "
                                      "rp_exec_trace_write"),
            "%s", rp_error_detail());
  rp_event d;
  RP_EXPECT(rp_replay(ex, NULL, &d), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "inside rp_replay, rp_exec_tune, "
                                      "rp_exec_destroy, rp_exec_update_args, "
                                      "rp_exec_trace_start or "
                                      "rp_exec_trace_write"),
            "%s", rp_error_detail());
  rp_status tuned = th_held_tune_finish();
  cr_assert_eq(tuned, RP_OK, "rp_exec_tune: %s", rp_status_name(tuned));
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* A replay waiting at a precondition holds its worker, and with it the
 * submission ring: after a ring of other replays, rp_replay says so
 * (RP_EBUSY, nothing replayed), naming the worker, the gated exec's
 * replay, port and event and whether to trigger it or wait for it,
 * instead of waiting forever for it; once it completed, replays go on. */
static void full_ring_behind_a_gate(int kind) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  rp_graph *g;
  rp_exec *gated, *other;
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event go;
  RP_CHECK(rp_capture_precondition(rt, "go", &go, NULL));
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0, .wait = go}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &gated));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 1}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &other));
  RP_CHECK(rp_graph_destroy(g));
  /* GATE_POST's source exec on worker 1 would sit in the ring too */
  gate_src src = gate_src_make(rt, t, kind == GATE_POST ? GATE_EAGER : kind, 0);
  rp_event gd;
  RP_CHECK(
      rp_replay(gated, &(rp_replay_args){.pre = &src.gate, .npre = 1}, &gd));
  for (int i = 0; i < 300000 && rp__exec_worker_gated(gated) < 0; i++)
    usleep(100); /* worker 0 reaches the gate */
  cr_assert_eq(rp__exec_worker_gated(gated), 0, "worker 0 never waited");
  rp_status st = RP_OK;
  int n = 0;
  for (; n < 10000 && st == RP_OK; n++) {
    rp_event d;
    if ((st = rp_replay(other, NULL, &d)) == RP_OK) {
      RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
      RP_CHECK(rp_event_release(rt, d));
    }
  }
  cr_assert_eq(st, RP_EBUSY, "%d replays: %s", n, rp_status_name(st));
  const char *d = rp_error_detail();
  cr_assert(strstr(d, "rp_replay: the submission ring is full (4096 replays "
                      "queued) behind worker 0, which is held: replay 0 of "
                      "exec "),
            "%s", d);
  assert_gate_words(d, gated, src.gate, kind == GATE_USER);
  cr_assert(strstr(d, "; then replay again (nothing was replayed)"), "%s", d);
  cr_assert_leq(n, 4097, "the ring took %d replays", n);
  RP_CHECK(rp_event_trigger(rt, src.go));
  RP_CHECK(rp_event_wait(rt, gd, 30 * SEC));
  rp_event dn;
  RP_CHECK(rp_replay(other, NULL, &dn)); /* room again */
  RP_CHECK(rp_event_wait(rt, dn, 30 * SEC));
  RP_CHECK(rp_event_release(rt, dn));
  RP_CHECK(rp_event_release(rt, gd));
  gate_src_free(rt, &src);
  RP_CHECK(rp_exec_destroy(gated));
  RP_CHECK(rp_exec_destroy(other));
  th_destroy(rt);
}

Test(misuse, a_full_ring_behind_a_gated_replay_is_busy_not_blocked,
     .timeout = 120) {
  full_ring_behind_a_gate(GATE_USER);
}

Test(misuse, a_full_ring_behind_an_eager_ops_done_event_says_to_wait_for_it,
     .timeout = 120) {
  full_ring_behind_a_gate(GATE_EAGER);
}

/* Two threads fill the ring behind a gated replay, each replaying its own
 * exec: both get RP_EBUSY (nothing replayed) rather than one waiting for
 * room until the trigger (they took their entries before seeing the ring
 * full). */
static rp_exec *fill_ex[2];
static rp_runtime *fill_rt;
static _Atomic int fill_st[2];
static _Atomic long fill_n[2];

static void *fill_ring(void *arg) {
  int k = (int)(intptr_t)arg;
  rp_runtime *rt = fill_rt;
  for (;;) {
    rp_event d;
    rp_status st = rp_replay(fill_ex[k], NULL, &d);
    if (st != RP_OK) {
      atomic_store(&fill_st[k], st);
      return NULL;
    }
    atomic_fetch_add(&fill_n[k], 1);
    rp_event_release(rt, d);
  }
}

static rp_exec *one_task_exec(rp_runtime *rt, rp_task_id t, rp_proc p,
                              int gated) {
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event go = RP_NO_EVENT;
  if (gated)
    RP_CHECK(rp_capture_precondition(rt, "go", &go, NULL));
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = t, .proc = p, .wait = go}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 64}, &ex));
  RP_CHECK(rp_graph_destroy(g));
  return ex;
}

Test(misuse, two_threads_filling_the_ring_behind_a_gate_are_both_busy,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  fill_rt = rt;
  rp_task_id t = reg(rt, "count", count_task, 0);
  rp_exec *gated = one_task_exec(rt, t, 0, 1);
  fill_ex[0] = one_task_exec(rt, t, 1, 0);
  fill_ex[1] = one_task_exec(rt, t, 1, 0);
  rp_event gate, gd;
  RP_CHECK(rp_event_create(rt, &gate));
  RP_CHECK(rp_replay(gated, &(rp_replay_args){.pre = &gate, .npre = 1}, &gd));
  usleep(10000); /* worker 0 reaches the gate */
  pthread_t th[2];
  for (int k = 0; k < 2; k++) {
    atomic_store(&fill_st[k], RP_OK);
    atomic_store(&fill_n[k], 0);
    cr_assert_eq(pthread_create(&th[k], NULL, fill_ring, (void *)(intptr_t)k),
                 0);
  }
  for (int k = 0; k < 2; k++)
    pthread_join(th[k], NULL);
  for (int k = 0; k < 2; k++)
    cr_assert_eq(atomic_load(&fill_st[k]), RP_EBUSY, "thread %d: %s", k,
                 rp_status_name(atomic_load(&fill_st[k])));
  cr_assert_leq(atomic_load(&fill_n[0]) + atomic_load(&fill_n[1]), 4095);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, gd, 30 * SEC));
  for (int k = 0; k < 2; k++) { /* room again: both go on */
    rp_event d;
    RP_CHECK(rp_replay(fill_ex[k], NULL, &d));
    RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
    RP_CHECK(rp_event_release(rt, d));
    RP_CHECK(rp_exec_destroy(fill_ex[k]));
  }
  RP_CHECK(rp_event_release(rt, gd));
  RP_CHECK(rp_event_release(rt, gate));
  RP_CHECK(rp_exec_destroy(gated));
  th_destroy(rt);
}

/* A done callback run by the worker that holds the full ring back (its
 * cursor stays on the replay it completes until the callback returns)
 * cannot wait for room: rp_replay from it is RP_EBUSY (it deadlocked). */
static rp_exec *cb_other;
static _Atomic int cb_ring_st = 1;

static void replay_from_cb(void *arg, rp_status st) {
  (void)arg, (void)st;
  atomic_store(&cb_ring_st, rp_replay(cb_other, NULL, NULL));
}

/* Worker 0's task holds the ring until the host has replayed 4095 times
 * behind it: with its own entry the ring's 4096 are all taken (30 s at
 * most, so a broken assumption fails the test instead of hanging it). */
static _Atomic int cb_replayed;
static rp_status hold_ring_task(rp_task_ctx *ctx) {
  (void)ctx;
  for (int i = 0; i < 300000 && atomic_load(&cb_replayed) < 4095; i++)
    usleep(100);
  return RP_OK;
}

Test(misuse, a_callback_on_the_worker_holding_a_full_ring_is_busy,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id hold = reg(rt, "hold", hold_ring_task, 0);
  rp_task_id t = reg(rt, "count", count_task, 0);
  rp_exec *x = one_task_exec(rt, hold, 0, 0);
  rp_exec *y = one_task_exec(rt, t, 1, 0);
  cb_other = one_task_exec(rt, t, 1, 0);
  atomic_store(&cb_replayed, 0);
  rp_event dx;
  RP_CHECK(rp_replay(x, NULL, &dx)); /* worker 0 holds the ring */
  RP_CHECK(rp_event_on_complete(rt, dx, replay_from_cb, NULL));
  for (int i = 0; i < 4200; i++) { /* past a ring behind worker 0 */
    rp_event d;
    RP_CHECK(rp_replay(y, NULL, &d));
    RP_CHECK(rp_event_release(rt, d));
    atomic_fetch_add(&cb_replayed, 1);
  }
  RP_CHECK(rp_event_wait(rt, dx, 30 * SEC));
  RP_CHECK(rp_exec_destroy(y)); /* all of y's replays ran */
  /* the ring was full when the callback ran: 4096 entries from x's */
  cr_assert_eq(atomic_load(&cb_ring_st), RP_EBUSY, "%s",
               atomic_load(&cb_ring_st) == 1
                   ? "the callback did not run"
                   : rp_status_name(atomic_load(&cb_ring_st)));
  RP_CHECK(rp_event_release(rt, dx));
  RP_CHECK(rp_exec_destroy(x));
  RP_CHECK(rp_exec_destroy(cb_other));
  th_destroy(rt);
}

/* rp_exec_tune while a replay of another exec waits at a precondition on
 * the worker the exec runs on: RP_EBUSY, nothing run (its trial replays
 * would queue behind the gate, waited for: it hung), naming the worker,
 * the gated replay, its port and event and whether to trigger it or wait
 * for it, as rp_replay does when its window fills; once it completed, it
 * tunes. */
static void tune_behind_a_gate(int kind) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "count", count_task, 0);
  rp_exec *gated = one_task_exec(rt, t, 0, 1);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 3; i++) /* no cost hints: tune has trials to run */
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               NULL));
  rp_exec *b;
  RP_CHECK(rp_instantiate(g, NULL, &b));
  RP_CHECK(rp_graph_destroy(g));
  gate_src src = gate_src_make(rt, t, kind, 0);
  rp_event gd;
  RP_CHECK(
      rp_replay(gated, &(rp_replay_args){.pre = &src.gate, .npre = 1}, &gd));
  /* the worker reaches the gate (tune sees a gate the worker waits at; a
   * sleep of 10 ms was not always enough on a busy machine: tune then
   * queued its trials behind the gate and waited) */
  for (int i = 0; i < 100000 && rp__exec_worker_gated(gated) < 0; i++)
    usleep(100);
  cr_assert_geq(rp__exec_worker_gated(gated), 0, "the worker never waited");
  atomic_store(&runs, 0);
  uint32_t ran = 777;
  RP_EXPECT(rp_exec_tune(b, NULL, &ran), RP_EBUSY);
  const char *d = rp_error_detail();
  cr_assert(strstr(d, "rp_exec_tune: worker 0, which the exec runs on, is "
                      "held: replay 0 of exec "),
            "%s", d);
  assert_gate_words(d, gated, src.gate, kind == GATE_USER);
  cr_assert(strstr(d, "; then tune again (the trial replays would wait "
                      "behind it; nothing was run)"),
            "%s", d);
  cr_assert_eq(ran, 777u, "replays written");
  cr_assert_eq(atomic_load(&runs), 0, "something ran");
  RP_CHECK(rp_event_trigger(rt, src.go));
  RP_CHECK(rp_event_wait(rt, gd, 30 * SEC));
  RP_CHECK(rp_exec_tune(b, NULL, &ran));
  cr_assert_gt(ran, 0u);
  RP_CHECK(rp_event_release(rt, gd));
  gate_src_free(rt, &src);
  RP_CHECK(rp_exec_destroy(gated));
  RP_CHECK(rp_exec_destroy(b));
  th_destroy(rt);
}

Test(misuse, tune_behind_another_execs_gate_is_busy, .timeout = 120) {
  tune_behind_a_gate(GATE_USER);
}

Test(misuse, tune_behind_an_eager_ops_done_event_says_to_wait_for_it,
     .timeout = 120) {
  tune_behind_a_gate(GATE_EAGER);
}

/* A callback run at once (its event completed already) is a callback
 * as one run by the trigger: a wait on a pending event and a drain are
 * RP_EBUSY there too (they blocked: until the timeout, or forever). */
static rp_event cb_pending;
static _Atomic int cb_now_wait_st = 1, cb_now_drain_st = 1;

static void at_once_cb(void *arg, rp_status st) {
  rp_runtime *rt = arg;
  (void)st;
  atomic_store(&cb_now_wait_st, rp_event_wait(rt, cb_pending, 2 * SEC));
  atomic_store(&cb_now_drain_st, rp_runtime_drain(rt));
}

Test(misuse, a_callback_run_at_once_cannot_wait_either, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_event done, gate;
  RP_CHECK(rp_event_create(rt, &done));
  RP_CHECK(rp_event_trigger(rt, done));
  RP_CHECK(rp_event_create(rt, &gate));
  rp_task_id t = reg(rt, "count", count_task, 0);
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0, .wait = gate},
                          &cb_pending));
  RP_CHECK(rp_event_on_complete(rt, done, at_once_cb, rt)); /* runs now */
  cr_assert_eq(atomic_load(&cb_now_wait_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&cb_now_drain_st), RP_EBUSY);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_CHECK(rp_event_wait(rt, cb_pending, 30 * SEC));
  RP_CHECK(rp_event_release(rt, cb_pending));
  RP_CHECK(rp_event_release(rt, gate));
  RP_CHECK(rp_event_release(rt, done));
  th_destroy(rt);
}

/* A replay's done-event callback runs before the replay leaves the
 * window: rp_replay (window of 1) and rp_exec_destroy from it would wait
 * for that very replay, so they are RP_EBUSY (cb must not block). */
static rp_exec *cb_ex;
static _Atomic int cb_replay_st = 1, cb_destroy_st = 1;

static void done_cb(void *arg, rp_status st) {
  (void)st;
  atomic_store(
      &cb_replay_st,
      rp_replay(cb_ex, &(rp_replay_args){.pre = arg, .npre = 1}, NULL));
  atomic_store(&cb_destroy_st, rp_exec_destroy(cb_ex));
}

Test(misuse, calls_that_would_wait_are_refused_in_a_done_callback,
     .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  cb_ex = one_op_exec(rt, t, 1, 1);
  rp_event go, done;
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_replay(cb_ex, &(rp_replay_args){.pre = &go, .npre = 1}, &done));
  RP_CHECK(rp_event_on_complete(rt, done, done_cb, &go));
  RP_CHECK(rp_event_trigger(rt, go)); /* the worker completes it */
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  for (int i = 0; i < 3000 && atomic_load(&cb_destroy_st) == 1; i++)
    usleep(1000);
  cr_assert_eq(atomic_load(&cb_replay_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&cb_destroy_st), RP_EBUSY);
  cr_assert_eq(atomic_load(&runs), 1);
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_exec_destroy(cb_ex)); /* from here it works */
  th_destroy(rt);
}

/* rp_instance_free from a replay's done callback, and from the host while
 * such a callback runs: the replay completing is never waited for (it
 * spun forever in the callback, and the host spun holding the locks the
 * callback then took). In the callback the replay's done event has
 * triggered: its instances may go (free, realloc), as may any other. */
static rp_runtime *fc_rt;
static rp_inst fc_used, fc_other;
static _Atomic int fc_state; /* 1 running, 2 returned */
static _Atomic int fc_st[3];
static _Atomic int fc_release; /* the host let the callback go on */
static rp_task_id fc_task;

static void free_cb(void *arg, rp_status st) {
  (void)arg, (void)st;
  atomic_store(&fc_state, 1);
  atomic_store(&fc_st[0], rp_instance_realloc(fc_rt, &fc_used));
  atomic_store(&fc_st[1], rp_instance_free(fc_rt, fc_used));
  atomic_store(&fc_st[2], rp_instance_free(fc_rt, fc_other));
  atomic_store(&fc_state, 2);
}

/* While the host frees an unrelated instance, the callback builds and
 * instantiates a graph and creates an instance (the locks the host's free
 * holds). */
static void busy_cb(void *arg, rp_status st) {
  (void)arg, (void)st;
  atomic_store(&fc_state, 1);
  for (int i = 0; i < 10000 && !atomic_load(&fc_release); i++)
    usleep(100);
  rp_exec *ex = op_exec(fc_rt, fc_task, RP_PROC_ANY, (rp_inst){0}, 0, 1);
  rp_inst in;
  rp_rect r = rp_rect_1d(0, 3);
  atomic_store(&fc_st[0], rp_instance_create(fc_rt, 0, RP_F32, &r, NULL, &in));
  atomic_store(&fc_st[1], rp_instance_free(fc_rt, in));
  atomic_store(&fc_st[2], rp_exec_destroy(ex)); /* quiet: it may go */
  atomic_store(&fc_state, 2);
}

static void wait_state(int want) {
  for (int i = 0; i < 10000 && atomic_load(&fc_state) != want; i++)
    usleep(1000);
  cr_assert_eq(atomic_load(&fc_state), want, "the callback is stuck");
}

Test(misuse, frees_in_and_beside_a_done_callback_do_not_wait_for_it,
     .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  fc_rt = rt;
  fc_task = reg(rt, "count", count_task, 0);
  fc_used = make_inst(rt), fc_other = make_inst(rt);
  rp_exec *ex = gated_writer(rt, fc_task, fc_used, 1);
  rp_event go, done;
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &go, .npre = 1}, &done));
  atomic_store(&fc_state, 0);
  RP_CHECK(rp_event_on_complete(rt, done, free_cb, NULL));
  RP_CHECK(rp_event_trigger(rt, go));
  wait_state(2);
  for (int k = 0; k < 3; k++)
    cr_assert_eq(atomic_load(&fc_st[k]), RP_OK, "call %d: %s", k,
                 rp_status_name(atomic_load(&fc_st[k])));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, go));
  /* the host frees an unrelated instance while a done callback of an
   * exec that is still completing takes the runtime's locks */
  fc_used = make_inst(rt), fc_other = make_inst(rt);
  rp_exec *ex2 = gated_writer(rt, fc_task, fc_used, 1);
  RP_CHECK(rp_event_create(rt, &go));
  RP_CHECK(rp_replay(ex2, &(rp_replay_args){.pre = &go, .npre = 1}, &done));
  atomic_store(&fc_state, 0);
  atomic_store(&fc_release, 0);
  RP_CHECK(rp_event_on_complete(rt, done, busy_cb, NULL));
  RP_CHECK(rp_event_trigger(rt, go));
  wait_state(1);
  atomic_store(&fc_release, 1); /* it goes on while the host frees */
  RP_CHECK(rp_instance_free(rt, fc_other));
  wait_state(2);
  for (int k = 0; k < 3; k++)
    cr_assert_eq(atomic_load(&fc_st[k]), RP_OK, "call %d: %s", k,
                 rp_status_name(atomic_load(&fc_st[k])));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, go));
  RP_CHECK(rp_instance_free(rt, fc_used));
  RP_CHECK(rp_exec_destroy(ex2));
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* An eager task that drives replays of an exec whose lane runs on the
 * task's own worker: the replays in flight cannot run before the task
 * returns. The calls that would wait for them (rp_replay with a full
 * window, rp_exec_destroy, rp_exec_update_args, rp_exec_trace_write,
 * rp_exec_tune) are RP_EBUSY there, as in an event's callback, and do
 * nothing; the replay issued before completes once the task returns. */
static rp_exec *task_ex;
static _Atomic int task_first = 1, task_replay = 1, task_destroy = 1,
                   task_update = 1, task_trace = 1, task_tune = 1;
static char task_detail[1024];

static rp_status replay_driver_task(rp_task_ctx *ctx) {
  (void)ctx;
  int v = 5;
  atomic_store(&task_first, rp_replay(task_ex, NULL, NULL));
  atomic_store(&task_replay, rp_replay(task_ex, NULL, NULL));
  snprintf(task_detail, sizeof task_detail, "%s", rp_error_detail());
  atomic_store(&task_destroy, rp_exec_destroy(task_ex));
  atomic_store(&task_update,
               rp_exec_update_args(task_ex, 0, &v, sizeof v, NULL));
  rp_status ts = rp_exec_trace_start(task_ex, 1);
  atomic_store(&task_trace,
               ts ? ts : rp_exec_trace_write(task_ex, "/dev/null/none"));
  atomic_store(&task_tune, rp_exec_tune(task_ex, NULL, NULL));
  return RP_OK;
}

Test(misuse, a_task_cannot_wait_for_replays_that_need_its_worker,
     .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "count", count_task, 0);
  rp_task_id drv = reg(rt, "driver", replay_driver_task, 0);
  atomic_store(&runs, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  int v = 1;
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 0, .args = &v, .args_size = sizeof v},
      NULL));
  RP_CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 1}, &task_ex));
  RP_CHECK(rp_graph_destroy(g));
  rp_event d;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = drv, .proc = 0}, &d));
  RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
  RP_CHECK(rp_event_release(rt, d));
  cr_assert_eq(atomic_load(&task_first), RP_OK);
  cr_assert_eq(atomic_load(&task_replay), RP_EBUSY, "%s",
               rp_status_name(atomic_load(&task_replay)));
  cr_assert(strstr(task_detail, "rp_replay") &&
                strstr(task_detail, "running task"),
            "%s", task_detail);
  cr_assert_eq(atomic_load(&task_destroy), RP_EBUSY);
  cr_assert_eq(atomic_load(&task_update), RP_EBUSY);
  cr_assert_eq(atomic_load(&task_trace), RP_EBUSY);
  cr_assert_eq(atomic_load(&task_tune), RP_EBUSY);
  /* the one replay issued runs once the task returned; the exec works */
  RP_CHECK(rp_replay(task_ex, NULL, &d));
  RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
  RP_CHECK(rp_event_release(rt, d));
  cr_assert_eq(atomic_load(&runs), 2);
  RP_CHECK(rp_exec_destroy(task_ex));
  th_destroy(rt);
}

/* npost slots without the array (or args_size without args) is a
 * malformed request, refused before anything runs; npost 0 with NULL post
 * asks for no events. */
Test(misuse, replay_counts_without_their_arrays_are_einval) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_exec *ex = one_op_exec(rt, t, 0, 1);
  RP_EXPECT(rp_replay(ex, &(rp_replay_args){.npost = 1}, NULL), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "npost 1 with NULL post"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_replay(ex, &(rp_replay_args){.args_size = 4}, NULL), RP_EINVAL);
  rp_event done;
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.post = NULL, .npost = 0}, &done));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  cr_assert_eq(atomic_load(&runs), 1, "a refused replay ran");
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

Test(misuse, zero_op_exec_replays_and_destroys, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < 20; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
    RP_CHECK(rp_event_release(rt, done));
  }
  for (int i = 0; i < 5; i++) /* and some never waited for */
    RP_CHECK(rp_replay(ex, NULL, NULL));
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* ---- concurrency misuse ---- */

typedef struct replayer {
  rp_runtime *rt;
  rp_exec *ex;
  _Atomic int *go;
  int ok, busy, other;
} replayer;

static void *replay_thread(void *p) {
  replayer *r = p;
  while (!atomic_load(r->go))
    ;
  for (int i = 0; i < 200; i++) {
    rp_event done;
    rp_status st = rp_replay(r->ex, NULL, &done);
    if (st == RP_OK) {
      r->ok++;
      if (rp_event_wait(r->rt, done, 30 * SEC) != RP_OK ||
          rp_event_release(r->rt, done) != RP_OK)
        r->other++;
    } else if (st == RP_EBUSY) {
      r->busy++;
    } else {
      r->other++;
    }
  }
  return NULL;
}

/* Eight threads replaying one exec: each call either runs one replay
 * (counted exactly once) or is refused with RP_EBUSY; nothing is lost,
 * duplicated or hung. */
Test(misuse, concurrent_replay_on_one_exec_is_refused_not_raced,
     .timeout = 300) {
  enum { T = 8 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = RP_PROC_ANY},
                               NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  _Atomic int go = 0;
  replayer r[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    r[i] = (replayer){.rt = rt, .ex = ex, .go = &go};
    cr_assert_eq(pthread_create(&th[i], NULL, replay_thread, &r[i]), 0);
  }
  atomic_store(&go, 1);
  int ok = 0, other = 0;
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    ok += r[i].ok;
    other += r[i].other;
  }
  cr_assert_eq(other, 0);
  cr_assert_gt(ok, 0);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, (uint64_t)ok);
  cr_assert_eq(atomic_load(&runs), ok * 3);
  RP_CHECK(rp_exec_destroy(ex));
  th_destroy(rt);
}

/* ---- orphaned captures ---- */

static void *capture_and_exit(void *p) {
  rp_runtime *rt = p;
  rp_status st = rp_capture_begin(rt, NULL);
  return (void *)(intptr_t)st;
}

Test(misuse, capture_left_open_by_an_exiting_thread_is_aborted) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  pthread_t th;
  void *ret;
  cr_assert_eq(pthread_create(&th, NULL, capture_and_exit, rt), 0);
  pthread_join(th, &ret);
  cr_assert_eq((intptr_t)ret, RP_OK);
  /* eager launches work again, a new capture opens, destroy succeeds */
  rp_event done;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, &done));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  cr_assert_eq(atomic_load(&runs), 1);
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_abort(rt));
  th_destroy(rt);
}

/* A capture belongs to the thread that opened it: only that thread can end
 * it. An eager task or an event's callback borrows a worker (or whichever
 * thread triggers the event): a capture it opened and left open could
 * never be closed, the runtime refusing every eager launch from other
 * threads and rp_runtime_destroy for good. rp_capture_begin there is
 * RP_ECONTRACT (on its own runtime or another), nothing opened. */
static rp_runtime *scope_rt[2];
static _Atomic int scope_task_st[2] = {1, 1}, scope_cb_st = 1;

static rp_status capture_in_task(rp_task_ctx *ctx) {
  (void)ctx;
  for (int i = 0; i < 2; i++)
    atomic_store(&scope_task_st[i], rp_capture_begin(scope_rt[i], NULL));
  atomic_fetch_add(&runs, 1);
  return RP_OK;
}

static void capture_in_cb(void *arg, rp_status st) {
  (void)arg;
  (void)st;
  atomic_store(&scope_cb_st, rp_capture_begin(scope_rt[0], NULL));
}

Test(misuse, a_task_or_callback_cannot_open_a_capture, .timeout = 60) {
  rp_runtime *rt = th_cpu_runtime(1), *other = th_cpu_runtime(1);
  scope_rt[0] = rt;
  scope_rt[1] = other;
  rp_task_id c = reg(rt, "capturer", capture_in_task, 0);
  rp_task_id t = reg(rt, "count", count_task, 0);
  atomic_store(&runs, 0);
  rp_event d;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = c, .proc = 0}, &d));
  RP_CHECK(rp_event_on_complete(rt, d, capture_in_cb, NULL));
  RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
  RP_CHECK(rp_event_release(rt, d));
  for (int i = 0; i < 3000 && atomic_load(&scope_cb_st) == 1; i++)
    usleep(1000); /* the callback may still be running on the worker */
  for (int i = 0; i < 2; i++)
    cr_assert_eq(atomic_load(&scope_task_st[i]), RP_ECONTRACT, "%s",
                 rp_status_name(atomic_load(&scope_task_st[i])));
  cr_assert_eq(atomic_load(&scope_cb_st), RP_ECONTRACT, "%s",
               rp_status_name(atomic_load(&scope_cb_st)));
  /* nothing was opened: eager launches work, the host captures */
  cr_assert_eq(rp_capture_open(rt), 0);
  cr_assert_eq(rp_capture_open(other), 0);
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, &d));
  RP_CHECK(rp_event_wait(rt, d, 30 * SEC));
  RP_CHECK(rp_event_release(rt, d));
  cr_assert_eq(atomic_load(&runs), 2);
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_abort(rt));
  th_destroy(other);
  th_destroy(rt);
}

/* A thread holds at most 4 open captures: its exit aborts them. A fifth
 * was accepted untracked, and when the thread exited it stayed open: that
 * runtime refused every eager launch and capture with RP_ECAPTURE and
 * rp_runtime_destroy with RP_EBUSY, for good. */
static void *five_captures(void *arg) {
  rp_runtime **rts = arg;
  for (int i = 0; i < 4; i++)
    if (rp_capture_begin(rts[i], NULL) != RP_OK)
      return (void *)1;
  rp_status st = rp_capture_begin(rts[4], NULL);
  int named = strstr(rp_error_detail(), "holds 4 open captures") != NULL;
  return (void *)(uintptr_t)(st == RP_ERANGE && named ? 0 : 2);
}

Test(misuse, a_fifth_open_capture_on_one_thread_is_refused) {
  rp_runtime *rts[5];
  for (int i = 0; i < 5; i++)
    rts[i] = th_cpu_runtime(1);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, five_captures, rts), 0);
  void *res;
  cr_assert_eq(pthread_join(th, &res), 0);
  cr_assert_eq((uintptr_t)res, 0, "the fifth capture: %s",
               (uintptr_t)res == 1 ? "a first four failed" : "not refused");
  /* every runtime takes a capture again (the four were aborted at the
   * thread's exit, the fifth never opened) and is destroyed */
  for (int i = 0; i < 5; i++) {
    RP_CHECK(rp_capture_begin(rts[i], NULL));
    RP_CHECK(rp_capture_abort(rts[i]));
    th_destroy(rts[i]);
  }
}
