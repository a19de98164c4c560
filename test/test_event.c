/* Events: trigger, poison, wait with timeout, callbacks, merge, stale
 * handles. */
#include "helpers.h"
#include "engine/engine_impl.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static rp_runtime *rt;
static void setup(void) {
  rt = th_cpu_runtime(2);
}
static void teardown(void) {
  th_destroy(rt);
}

TestSuite(event, .init = setup, .fini = teardown, .timeout = 60);

Test(event, trigger_then_wait_returns_ok) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_EXPECT(rp_event_query(rt, e), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, e));
  RP_EXPECT(rp_event_query(rt, e), RP_OK);
  RP_EXPECT(rp_event_wait(rt, e, 0), RP_OK);
  RP_CHECK(rp_event_release(rt, e));
}

Test(event, poison_carries_its_status) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_poison(rt, e, RP_ETASK));
  RP_EXPECT(rp_event_query(rt, e), RP_ETASK);
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_ETASK);
  RP_CHECK(rp_event_release(rt, e));
}

Test(event, double_trigger_and_bad_poison_are_rejected) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_EXPECT(rp_event_poison(rt, e, RP_OK), RP_EINVAL);
  /* negative but no status: waiters could not name it */
  RP_EXPECT(rp_event_poison(rt, e, (rp_status)-1000), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "-1000 is not a reprise status"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_poison(rt, e, (rp_status)INT_MIN), RP_EINVAL);
  /* what a query reads as "pending" */
  RP_EXPECT(rp_event_poison(rt, e, RP_EAGAIN), RP_EINVAL);
  RP_EXPECT(rp_event_query(rt, e), RP_EAGAIN); /* still pending */
  RP_CHECK(rp_event_trigger(rt, e));
  RP_EXPECT(rp_event_trigger(rt, e), RP_EINVAL);
  RP_EXPECT(rp_event_poison(rt, e, RP_ETASK), RP_EINVAL);
  RP_EXPECT(rp_event_query(rt, e), RP_OK);
  RP_CHECK(rp_event_release(rt, e));
  RP_EXPECT(rp_event_trigger(rt, RP_NO_EVENT), RP_EINVAL);
}

Test(event, wait_times_out_on_pending_event) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_EXPECT(rp_event_wait(rt, e, 2000000), RP_ETIMEDOUT);
  RP_CHECK(rp_event_trigger(rt, e));
  RP_CHECK(rp_event_release(rt, e));
}

static void *trigger_later(void *arg) {
  rp_event *e = arg;
  usleep(20000);
  rp_event_trigger(rt, *e);
  return NULL;
}

Test(event, sleeping_waiter_is_woken_by_another_thread) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  pthread_t t;
  pthread_create(&t, NULL, trigger_later, &e);
  RP_EXPECT(rp_event_wait(rt, e, 5000000000ll), RP_OK);
  pthread_join(t, NULL);
  RP_CHECK(rp_event_release(rt, e));
}

static atomic_int cb_calls;
static atomic_int cb_status;
static void cb(void *arg, rp_status st) {
  (void)arg;
  atomic_fetch_add(&cb_calls, 1);
  atomic_store(&cb_status, st);
}

Test(event, callbacks_run_once_before_and_after_trigger) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_on_complete(rt, e, cb, NULL));
  RP_CHECK(rp_event_on_complete(rt, e, cb, NULL));
  cr_assert_eq(atomic_load(&cb_calls), 0);
  RP_CHECK(rp_event_poison(rt, e, RP_EIO));
  cr_assert_eq(atomic_load(&cb_calls), 2);
  cr_assert_eq(atomic_load(&cb_status), RP_EIO);
  /* registering on a completed event runs at once */
  RP_CHECK(rp_event_on_complete(rt, e, cb, NULL));
  cr_assert_eq(atomic_load(&cb_calls), 3);
  RP_CHECK(rp_event_release(rt, e));
}

/* A runtime destroyed with user events nobody triggered poisons them with
 * RP_EBUSY: their callbacks run (nothing they hold leaks), and so do those
 * of a merge over them; released handles or not. */
Test(event, destroy_runs_the_callbacks_of_untriggered_events) {
  rp_runtime *r2 = th_cpu_runtime(1);
  rp_event e, f, m, in[2];
  RP_CHECK(rp_event_create(r2, &e));
  RP_CHECK(rp_event_create(r2, &in[0]));
  RP_CHECK(rp_event_create(r2, &in[1]));
  RP_CHECK(rp_event_create(r2, &f));
  RP_CHECK(rp_event_on_complete(r2, e, cb, NULL));
  RP_CHECK(rp_event_merge(r2, in, 2, &m));
  RP_CHECK(rp_event_on_complete(r2, m, cb, NULL));
  RP_CHECK(rp_event_trigger(r2, in[0]));
  RP_CHECK(rp_event_trigger(r2, f)); /* completed: no callback left */
  RP_CHECK(rp_event_release(r2, e)); /* released, still pending */
  RP_CHECK(rp_event_release(r2, m));
  RP_CHECK(rp_event_release(r2, in[0]));
  RP_CHECK(rp_event_release(r2, in[1]));
  cr_assert_eq(atomic_load(&cb_calls), 0);
  th_destroy(r2);
  cr_assert_eq(atomic_load(&cb_calls), 2, "%d callbacks ran",
               atomic_load(&cb_calls));
  cr_assert_eq(atomic_load(&cb_status), RP_EBUSY);
}

/* A callback that re-arms: each time its event completes, whatever the
 * status, it creates the next event, registers itself on it and launches
 * an eager task gated on it (a loader feeding the next step would). It
 * stops after 8 events, so that a test without the refusal ends. */
static rp_runtime *rearm_rt;
static rp_task_id rearm_task;
static _Atomic int rearm_calls, rearm_refused;
static rp_status rearm_nop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}
static void rearm_cb(void *arg, rp_status st) {
  (void)arg;
  (void)st;
  if (atomic_fetch_add(&rearm_calls, 1) >= 8)
    return;
  rp_event next = {12345};
  rp_status cst = rp_event_create(rearm_rt, &next);
  if (cst == RP_OK) {
    rp_event_on_complete(rearm_rt, next, rearm_cb, NULL);
    rp_launch l = {.task = rearm_task, .proc = RP_PROC_ANY, .wait = next};
    rp_launch_task(rearm_rt, &l, NULL);
    rp_event_release(rearm_rt, next);
    return;
  }
  cr_assert_eq(cst, RP_EBUSY, "%s", rp_status_name(cst));
  cr_assert(strstr(rp_error_detail(), "being destroyed"), "%s",
            rp_error_detail());
  cr_assert_eq(next.id, 12345, "out-parameter written on error");
  atomic_fetch_add(&rearm_refused, 1);
}

/* rp_runtime_destroy poisons the user events nobody will trigger (while
 * it drains, once the eager ops gated on them stall it, and after): their
 * callbacks run with RP_EBUSY. Such a callback cannot create user events
 * there: one made there would gate the drain again, for ever when each
 * callback makes the next, or outlive the runtime, its callbacks never
 * run and what they hold leaked. rp_event_create is refused (RP_EBUSY),
 * so a callback that re-arms ends after one call, and the runtime goes. */
Test(event, callbacks_run_by_destroy_cannot_create_events) {
  rp_runtime *r2 = th_cpu_runtime(1);
  rearm_rt = r2;
  atomic_store(&rearm_calls, 0);
  atomic_store(&rearm_refused, 0);
  RP_CHECK(rp_task_register(
      r2, &(rp_task_desc){.name = "rearm", .cpu_fn = rearm_nop}, &rearm_task));
  rp_event e;
  RP_CHECK(rp_event_create(r2, &e));
  RP_CHECK(rp_event_on_complete(r2, e, rearm_cb, NULL));
  /* before the destroy, it re-arms: a trigger runs it, it makes the next */
  RP_CHECK(rp_event_trigger(r2, e));
  RP_CHECK(rp_event_release(r2, e));
  cr_assert_eq(atomic_load(&rearm_calls), 1);
  cr_assert_eq(atomic_load(&rearm_refused), 0);
  th_destroy(r2); /* also checks for leaks in ASan builds */
  cr_assert_eq(atomic_load(&rearm_calls), 2, "%d callbacks ran",
               atomic_load(&rearm_calls));
  cr_assert_eq(atomic_load(&rearm_refused), 1);
}

/* A callback that rp_runtime_destroy runs (a user event it poisons) may
 * not make a graph (nor so an exec): the destroy checked for live ones
 * before it ran the callbacks, so one made there was left pointing at the
 * freed runtime (an exec instantiated from it then wrote into freed
 * memory at rp_exec_destroy). */
static rp_runtime *late_rt;
static rp_status late_graph_st, late_load_st;
static rp_graph *late_g;
static char late_detail[256];
static char *late_file; /* a graph file of an empty graph */
static size_t late_file_len;
static char late_why[256];
static void late_objects_cb(void *arg, rp_status st) {
  (void)arg;
  (void)st;
  snprintf(late_why, sizeof late_why, "%s", rp_error_detail());
  late_graph_st = rp_graph_create(late_rt, &late_g);
  snprintf(late_detail, sizeof late_detail, "%s", rp_error_detail());
  late_load_st =
      rp_graph_load_mem(late_rt, late_file, late_file_len, NULL, 0, 0, &late_g);
}
Test(event, callbacks_run_by_destroy_cannot_create_graphs) {
  rp_runtime *r2 = th_cpu_runtime(1);
  late_rt = r2;
  late_g = NULL;
  rp_graph *empty;
  RP_CHECK(rp_graph_create(r2, &empty));
  FILE *f = open_memstream(&late_file, &late_file_len);
  cr_assert_not_null(f);
  RP_CHECK(rp_graph_dump(empty, f, RP_DUMP_JSON));
  cr_assert_eq(fclose(f), 0);
  RP_CHECK(rp_graph_destroy(empty));
  rp_event e;
  RP_CHECK(rp_event_create(r2, &e));
  RP_CHECK(rp_event_on_complete(r2, e, late_objects_cb, NULL));
  th_destroy(r2); /* also checks for leaks in ASan builds */
  cr_assert_eq(late_graph_st, RP_EBUSY, "%s", rp_status_name(late_graph_st));
  cr_assert(strstr(late_detail, "rp_graph_create") &&
                strstr(late_detail, "being destroyed"),
            "%s", late_detail);
  cr_assert_eq(late_load_st, RP_EBUSY, "%s", rp_status_name(late_load_st));
  cr_assert_null(late_g, "a graph was made on a runtime being destroyed");
  /* what poisoned the event is said, not "no detail recorded" */
  cr_assert(strstr(late_why, "poisoned by rp_runtime_destroy"), "%s", late_why);
  free(late_file);
}

Test(event, merge_triggers_after_all_inputs) {
  rp_event in[3], m;
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_event_create(rt, &in[i]));
  RP_CHECK(rp_event_merge(rt, in, 3, &m));
  RP_CHECK(rp_event_trigger(rt, in[0]));
  RP_CHECK(rp_event_trigger(rt, in[2]));
  RP_EXPECT(rp_event_query(rt, m), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, in[1]));
  RP_EXPECT(rp_event_wait(rt, m, -1), RP_OK);
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_event_release(rt, in[i]));
  RP_CHECK(rp_event_release(rt, m));
}

Test(event, merge_is_poisoned_by_any_input) {
  rp_event in[2], m;
  RP_CHECK(rp_event_create(rt, &in[0]));
  RP_CHECK(rp_event_create(rt, &in[1]));
  RP_CHECK(rp_event_merge(rt, in, 2, &m));
  RP_CHECK(rp_event_poison(rt, in[1], RP_ETASK));
  RP_CHECK(rp_event_trigger(rt, in[0]));
  RP_EXPECT(rp_event_wait(rt, m, -1), RP_ETASK);
  RP_CHECK(rp_event_release(rt, in[0]));
  RP_CHECK(rp_event_release(rt, in[1]));
  RP_CHECK(rp_event_release(rt, m));
  /* merging nothing triggers at once */
  RP_CHECK(rp_event_merge(rt, NULL, 0, &m));
  RP_EXPECT(rp_event_query(rt, m), RP_OK);
  RP_CHECK(rp_event_release(rt, m));
}

Test(event, recycled_handle_is_stale_not_confused_with_new_event) {
  rp_event old;
  RP_CHECK(rp_event_create(rt, &old));
  RP_CHECK(rp_event_trigger(rt, old));
  RP_CHECK(rp_event_release(rt, old)); /* last reference: slot recycled */
  rp_event fresh;
  RP_CHECK(rp_event_create(rt, &fresh));
  /* The slot is reused (LIFO free list) with a new generation. */
  cr_assert_eq((uint32_t)fresh.id, (uint32_t)old.id, "slot reused");
  cr_assert_neq(fresh.id, old.id, "generation differs");
  RP_EXPECT(rp_event_query(rt, old), RP_ESTALE);
  RP_EXPECT(rp_event_wait(rt, old, 0), RP_ESTALE);
  RP_EXPECT(rp_event_trigger(rt, old), RP_ESTALE);
  RP_EXPECT(rp_event_release(rt, old), RP_ESTALE);
  RP_EXPECT(rp_event_on_complete(rt, old, cb, NULL), RP_ESTALE);
  RP_EXPECT(rp_event_merge(rt, &old, 1, &(rp_event){0}), RP_ESTALE);
  RP_EXPECT(rp_event_query(rt, fresh), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, fresh));
  RP_CHECK(rp_event_release(rt, fresh));
}

/* A slot recycled 2^31 - 1 times: its last generation, 2^31 - 1, still
 * hands out a working event (the handle's bit 63, which marks captured op
 * references, stays clear); released, the slot retires instead of
 * wrapping to generation 1, so a handle kept from any earlier generation
 * never names a later event, and the next event takes another slot (the
 * generation is set by hand: 2^31 recycles take minutes). */
Test(event, a_slot_whose_generations_are_used_up_retires) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_trigger(rt, e));
  RP_CHECK(rp_event_release(rt, e)); /* recycled: the next create takes it */
  uint32_t low = (uint32_t)e.id;
  rp_event_slot *s = (rp_event_slot *)rp__ctable_at(
      &rt->events.t, (low & RP_HANDLE_SLOT_MASK) - 1);
  atomic_store(&s->gen, 0x7fffffffu);
  RP_CHECK(rp_event_create(rt, &e));
  cr_assert_eq((uint32_t)e.id, low, "the slot is reused (LIFO free list)");
  cr_assert_eq(e.id >> 32, 0x7fffffffu);
  RP_EXPECT(rp_event_query(rt, e), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_OK);
  rp_event m;
  RP_CHECK(rp_event_merge(rt, &e, 1, &m));
  RP_EXPECT(rp_event_wait(rt, m, -1), RP_OK);
  RP_CHECK(rp_event_release(rt, m));
  RP_CHECK(rp_event_release(rt, e));
  RP_EXPECT(rp_event_query(rt, e), RP_ESTALE);
  cr_assert_eq(atomic_load(&s->gen), 0u, "the slot retired");
  /* the slot is never handed out again: a handle of generation 1 (what a
   * wrap would have made) and one of generation 0 (a retired slot's)
   * name nothing */
  rp_event fresh[4];
  for (int i = 0; i < 4; i++) {
    RP_CHECK(rp_event_create(rt, &fresh[i]));
    cr_assert_neq((uint32_t)fresh[i].id, low, "a retired slot was reused");
  }
  rp_event gen1 = {(uint64_t)1 << 32 | low}, gen0 = {low};
  RP_EXPECT(rp_event_query(rt, gen1), RP_ESTALE);
  RP_EXPECT(rp_event_query(rt, gen0), RP_ESTALE);
  RP_EXPECT(rp_event_trigger(rt, gen0), RP_ESTALE);
  RP_EXPECT(rp_event_release(rt, gen0), RP_ESTALE);
  for (int i = 0; i < 4; i++) {
    RP_CHECK(rp_event_trigger(rt, fresh[i]));
    RP_CHECK(rp_event_release(rt, fresh[i]));
  }
}

/* A stale completion or release racing the trigger that recycles its
 * slot: between resolving the handle and acting on it, another thread
 * completes the event and a third creates one in the same slot. The late
 * call must be refused, not act on the new event (the seam runs that
 * interleaving on one thread, deterministically). */
static rp_event race_fresh;
static void race_hook(rp_runtime *r, rp_event e) {
  rp__event_resolved_hook = NULL;   /* once: the calls below pass it too */
  RP_CHECK(rp_event_trigger(r, e)); /* the other thread's trigger */
  RP_CHECK(rp_event_create(r, &race_fresh)); /* a third thread's event */
  cr_assert_eq((uint32_t)race_fresh.id, (uint32_t)e.id,
               "the recycled slot is reused (LIFO free list)");
}

Test(event, a_late_trigger_or_release_never_acts_on_the_slots_next_event) {
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_release(rt, e)); /* the trigger recycles the slot */
  rp__event_resolved_hook = race_hook;
  RP_EXPECT(rp_event_trigger(rt, e), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "is stale (released and recycled)"), "%s",
            rp_error_detail());
  cr_assert_null(rp__event_resolved_hook, "the seam ran");
  RP_EXPECT(rp_event_query(rt, race_fresh), RP_EAGAIN); /* not completed */
  RP_CHECK(rp_event_release(rt, race_fresh));
  RP_CHECK(rp_event_trigger(rt, race_fresh));

  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_release(rt, e));
  rp__event_resolved_hook = race_hook; /* a second release, racing */
  RP_EXPECT(rp_event_release(rt, e), RP_ESTALE);
  cr_assert_null(rp__event_resolved_hook, "the seam ran");
  /* the new event keeps its handle's reference and its completion */
  RP_EXPECT(rp_event_query(rt, race_fresh), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, race_fresh));
  RP_EXPECT(rp_event_wait(rt, race_fresh, -1), RP_OK);
  RP_CHECK(rp_event_release(rt, race_fresh));
  RP_EXPECT(rp_event_query(rt, race_fresh), RP_ESTALE); /* recycled */

  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_release(rt, e));
  rp__event_resolved_hook = race_hook; /* a poison, racing */
  RP_EXPECT(rp_event_poison(rt, e, RP_ETIMEDOUT), RP_ESTALE);
  RP_EXPECT(rp_event_query(rt, race_fresh), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, race_fresh));
  RP_CHECK(rp_event_release(rt, race_fresh));
}

/* A callback registered, or a merge made, over a handle whose event
 * another thread completes and releases meanwhile (a stale use), its slot
 * taken by the next event: the registration is refused (RP_ESTALE), the
 * merge poisoned with RP_ESTALE, as rp_event_merge says; neither joins the
 * next event's list (its callback ran when the unrelated event triggered,
 * and the merge completed with it). */
Test(event, a_late_callback_or_merge_never_joins_the_slots_next_event) {
  rp_event e, m;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_release(rt, e)); /* the trigger recycles the slot */
  atomic_store(&cb_calls, 0);
  rp__event_resolved_hook = race_hook;
  RP_EXPECT(rp_event_on_complete(rt, e, cb, NULL), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "is stale (released and recycled)"), "%s",
            rp_error_detail());
  cr_assert_null(rp__event_resolved_hook, "the seam ran");
  RP_CHECK(rp_event_trigger(rt, race_fresh));
  cr_assert_eq(atomic_load(&cb_calls), 0,
               "the stale handle's callback ran for the slot's next event");
  RP_CHECK(rp_event_release(rt, race_fresh));

  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_release(rt, e));
  rp__event_resolved_hook = race_hook;
  RP_CHECK(rp_event_merge(rt, &e, 1, &m));
  cr_assert_null(rp__event_resolved_hook, "the seam ran");
  RP_EXPECT(rp_event_query(rt, m), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "went stale"), "%s", rp_error_detail());
  RP_CHECK(rp_event_release(rt, m));
  RP_CHECK(rp_event_trigger(rt, race_fresh));
  RP_CHECK(rp_event_release(rt, race_fresh));
}

Test(event, garbage_handles_are_stale) {
  RP_EXPECT(rp_event_query(rt, (rp_event){0x7777777700001234ull}), RP_ESTALE);
  RP_EXPECT(rp_event_wait(rt, (rp_event){0xffffffffull}, 0), RP_ESTALE);
  RP_EXPECT(rp_event_query(rt, RP_NO_EVENT), RP_OK);
  RP_CHECK(rp_event_release(rt, RP_NO_EVENT));
}

/* A handle with rt's tag and the current generation of a free slot (one
 * never used, or one recycled: the generation its next event will get)
 * names no event: it was never handed out. Every call refuses it
 * (RP_ESTALE) instead of reading the free slot as a pending event: a
 * callback or a launch's wait joining it was dropped, or waited for the
 * slot's next event (an eager op could take that slot for its own done
 * event and wait for itself). */
Test(event, a_handle_never_handed_out_is_stale) {
  rp_event e, used;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_create(rt, &used));
  RP_CHECK(rp_event_trigger(rt, used));
  RP_CHECK(rp_event_release(rt, used)); /* its slot is free, generation + 1 */
  rp_event never[2] = {{e.id + 2}, {used.id + (1ull << 32)}};
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &b));
  atomic_store(&cb_calls, 0);
  for (int k = 0; k < 2; k++) {
    rp_event n = never[k], m = {777}, d = {778};
    RP_EXPECT(rp_event_query(rt, n), RP_ESTALE);
    RP_EXPECT(rp_event_wait(rt, n, 0), RP_ESTALE);
    RP_EXPECT(rp_event_on_complete(rt, n, cb, NULL), RP_ESTALE);
    RP_EXPECT(rp_event_merge(rt, &n, 1, &m), RP_ESTALE);
    cr_assert_eq(m.id, 777u, "the merge's out-parameter was written");
    RP_EXPECT(rp_event_trigger(rt, n), RP_ESTALE);
    RP_EXPECT(rp_event_release(rt, n), RP_ESTALE);
    rp_copy c = {.src = a, .dst = b, .wait = n};
    RP_EXPECT(rp_launch_copy(rt, &c, &d), RP_ESTALE);
    cr_assert(strstr(rp_error_detail(), "stale"), "%s", rp_error_detail());
    cr_assert_eq(d.id, 778u, "the launch's done was written");
  }
  /* the slots' next events are unaffected */
  rp_event f[2];
  RP_CHECK(rp_event_create(rt, &f[0]));
  RP_CHECK(rp_event_create(rt, &f[1]));
  for (int k = 0; k < 2; k++) {
    RP_CHECK(rp_event_trigger(rt, f[k]));
    RP_CHECK(rp_event_release(rt, f[k]));
  }
  cr_assert_eq(atomic_load(&cb_calls), 0);
  RP_CHECK(rp_event_trigger(rt, e));
  RP_CHECK(rp_event_release(rt, e));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
}

/* A captured op reference, or another runtime's event, is no event of
 * rt: every event call refuses it (RP_ESTALE) and says what it is, the
 * merge's "which input" included. */
Test(event, a_captured_reference_or_foreign_event_is_named_by_every_call) {
  rp_event ref, foreign, m = {777};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_precondition(rt, "p", &ref, NULL));
  rp_runtime *r2 = th_cpu_runtime(1);
  RP_CHECK(rp_event_create(r2, &foreign));
  const struct {
    rp_event e;
    const char *note;
  } cases[] = {{ref, "a captured op reference, not an event"},
               {foreign, "a handle of another runtime"}};
  for (int k = 0; k < 2; k++) {
    rp_event e = cases[k].e;
    rp_status st[5] = {rp_event_merge(rt, (rp_event[]){RP_NO_EVENT, e}, 2, &m)};
    char merge_detail[256];
    snprintf(merge_detail, sizeof merge_detail, "%s", rp_error_detail());
    cr_assert(strstr(merge_detail, "evs[1]") &&
                  strstr(merge_detail, cases[k].note),
              "%s", merge_detail);
    st[1] = rp_event_wait(rt, e, 0);
    cr_assert(strstr(rp_error_detail(), cases[k].note), "%s",
              rp_error_detail());
    st[2] = rp_event_on_complete(rt, e, cb, NULL);
    cr_assert(strstr(rp_error_detail(), cases[k].note), "%s",
              rp_error_detail());
    st[3] = rp_event_query(rt, e);
    cr_assert(strstr(rp_error_detail(), cases[k].note), "%s",
              rp_error_detail());
    st[4] = rp_event_trigger(rt, e);
    cr_assert(strstr(rp_error_detail(), cases[k].note), "%s",
              rp_error_detail());
    for (int i = 0; i < 5; i++)
      cr_assert_eq(st[i], RP_ESTALE, "case %d, call %d: %s", k, i,
                   rp_status_name(st[i]));
    cr_assert_eq(m.id, 777u, "the merge's out-parameter was written");
  }
  RP_CHECK(rp_capture_abort(rt));
  RP_CHECK(rp_event_trigger(r2, foreign));
  RP_CHECK(rp_event_release(r2, foreign));
  th_destroy(r2);
}

Test(event, many_events_grow_the_table_and_recycle) {
  enum { N = 5000 };
  static rp_event ev[N];
  for (int i = 0; i < N; i++)
    RP_CHECK(rp_event_create(rt, &ev[i]));
  for (int i = 0; i < N; i++) {
    RP_CHECK(rp_event_trigger(rt, ev[i]));
    RP_CHECK(rp_event_release(rt, ev[i]));
  }
  for (int i = 0; i < N; i++)
    RP_EXPECT(rp_event_query(rt, ev[i]), RP_ESTALE);
}

static void *hammer(void *arg) {
  (void)arg;
  for (int i = 0; i < 20000; i++) {
    rp_event e;
    if (rp_event_create(rt, &e) != RP_OK)
      return (void *)1;
    if (rp_event_trigger(rt, e) != RP_OK)
      return (void *)2;
    if (rp_event_release(rt, e) != RP_OK)
      return (void *)3;
  }
  return NULL;
}

Test(event, concurrent_create_trigger_release_is_safe) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, hammer, NULL);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d failed at step %p", i, r);
  }
}

/* Two threads completing one event (a producer's trigger racing a
 * watchdog's poison): exactly one wins, the other gets RP_EINVAL, and the
 * event keeps the winner's status. */
static rp_event race_ev;
static atomic_int race_go;
static rp_status race_st[2];

static void *completer(void *arg) {
  int k = (int)(intptr_t)arg;
  atomic_fetch_add(&race_go, 1); /* both spin: they start together */
  while (atomic_load(&race_go) < 2)
    ;
  race_st[k] = k ? rp_event_poison(rt, race_ev, RP_ETIMEDOUT)
                 : rp_event_trigger(rt, race_ev);
  return NULL;
}

Test(event, concurrent_trigger_and_poison_one_wins) {
  for (int i = 0; i < 2000; i++) {
    RP_CHECK(rp_event_create(rt, &race_ev));
    atomic_store(&race_go, 0);
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
      pthread_create(&t[k], NULL, completer, (void *)(intptr_t)k);
    for (int k = 0; k < 2; k++)
      pthread_join(t[k], NULL);
    cr_assert((race_st[0] == RP_OK) != (race_st[1] == RP_OK),
              "round %d: trigger %s, poison %s", i, rp_status_name(race_st[0]),
              rp_status_name(race_st[1]));
    cr_assert_eq(race_st[race_st[0] == RP_OK], RP_EINVAL);
    RP_EXPECT(rp_event_wait(rt, race_ev, -1),
              race_st[0] == RP_OK ? RP_OK : RP_ETIMEDOUT);
    RP_CHECK(rp_event_release(rt, race_ev));
  }
}

/* A query of a poisoned event racing with the release of its handle (a
 * stale use) answers the poison or RP_ESTALE and never takes a reference
 * on a recycled slot: doing so recycled the slot twice (an internal
 * invariant failed, or two events shared a slot). */
static _Atomic uint64_t pub_id;
static atomic_int pub_stop;

static void *query_published(void *arg) {
  (void)arg;
  while (!atomic_load(&pub_stop)) {
    rp_event e = {atomic_load(&pub_id)};
    rp_status st = rp_event_query(rt, e);
    if (e.id && st != RP_ETIMEDOUT && st != RP_ESTALE)
      return (void *)1;
  }
  return NULL;
}

Test(event, query_racing_a_release_never_revives_the_slot) {
  pthread_t q;
  atomic_store(&pub_stop, 0);
  pthread_create(&q, NULL, query_published, NULL);
  for (int i = 0; i < 2000000; i++) {
    rp_event e;
    RP_CHECK(rp_event_create(rt, &e));
    RP_CHECK(rp_event_poison(rt, e, RP_ETIMEDOUT));
    atomic_store(&pub_id, e.id);
    for (volatile int k = 0; k < (i & 63); k++) /* varied windows */
      ;
    RP_CHECK(rp_event_release(rt, e));
  }
  atomic_store(&pub_stop, 1);
  void *bad;
  pthread_join(q, &bad);
  cr_assert_null(bad, "a query answered neither the poison nor RP_ESTALE");
  /* the table is sound: fresh events are distinct and behave */
  rp_event a, b;
  RP_CHECK(rp_event_create(rt, &a));
  RP_CHECK(rp_event_create(rt, &b));
  cr_assert_neq(a.id, b.id);
  RP_CHECK(rp_event_trigger(rt, a));
  RP_EXPECT(rp_event_query(rt, b), RP_EAGAIN);
  RP_CHECK(rp_event_release(rt, a));
  RP_CHECK(rp_event_release(rt, b));
}

/* A callback registered on a poisoned event whose handle another thread
 * releases meanwhile (a stale use) runs with the poison and its detail,
 * or is refused RP_ESTALE: the detail is never read after its slot
 * recycled it (ASan saw a use after free). */
static atomic_int late_cb_bad;
static char late_cb_saw[256];
static void late_cb(void *arg, rp_status st) {
  (void)arg;
  if ((st != RP_ETIMEDOUT || !strstr(rp_error_detail(), "poisoned with")) &&
      !atomic_exchange(&late_cb_bad, 1))
    snprintf(late_cb_saw, sizeof late_cb_saw, "%s: %s", rp_status_name(st),
             rp_error_detail());
}
static void *register_on_published(void *arg) {
  (void)arg;
  while (!atomic_load(&pub_stop)) {
    rp_event e = {atomic_load(&pub_id)};
    if (!e.id)
      continue;
    rp_status st = rp_event_on_complete(rt, e, late_cb, NULL);
    if (st != RP_OK && st != RP_ESTALE)
      return (void *)1;
  }
  return NULL;
}

Test(event, callbacks_racing_a_release_read_no_freed_detail) {
  pthread_t q;
  atomic_store(&pub_stop, 0);
  atomic_store(&pub_id, 0);
  atomic_store(&late_cb_bad, 0);
  pthread_create(&q, NULL, register_on_published, NULL);
  for (int i = 0; i < 300000; i++) {
    rp_event e;
    RP_CHECK(rp_event_create(rt, &e));
    RP_CHECK(rp_event_poison(rt, e, RP_ETIMEDOUT));
    atomic_store(&pub_id, e.id);
    for (volatile int k = 0; k < (i & 63); k++)
      ;
    RP_CHECK(rp_event_release(rt, e));
  }
  atomic_store(&pub_stop, 1);
  void *bad;
  pthread_join(q, &bad);
  cr_assert_null(bad, "a registration answered neither RP_OK nor RP_ESTALE");
  cr_assert_eq(atomic_load(&late_cb_bad), 0,
               "a callback ran without the poison or its detail: %s",
               late_cb_saw);
}

/* Events the runtime completes (an eager op's, a merge) are not the
 * caller's to trigger or poison: RP_EINVAL, and they complete as usual. */
Test(event, runtime_events_cannot_be_triggered_by_the_caller) {
  rp_event gate, merged;
  RP_CHECK(rp_event_create(rt, &gate));
  RP_CHECK(rp_event_merge(rt, &gate, 1, &merged));
  RP_EXPECT(rp_event_trigger(rt, merged), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "not an rp_event_create event"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_poison(rt, merged, RP_ETASK), RP_EINVAL);
  RP_EXPECT(rp_event_query(rt, merged), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, gate));
  RP_EXPECT(rp_event_wait(rt, merged, -1), RP_OK);
  RP_CHECK(rp_event_release(rt, merged));
  RP_CHECK(rp_event_release(rt, gate));
}

Test(event, null_arguments_are_rejected) {
  RP_EXPECT(rp_event_create(NULL, &(rp_event){0}), RP_EINVAL);
  RP_EXPECT(rp_event_create(rt, NULL), RP_EINVAL);
  RP_EXPECT(rp_event_on_complete(rt, RP_NO_EVENT, NULL, NULL), RP_EINVAL);
  RP_EXPECT(rp_event_merge(rt, NULL, 2, &(rp_event){0}), RP_EINVAL);
}

/* ---- a poisoned event's detail ---- */

static rp_status says_batch(rp_task_ctx *ctx) {
  (void)ctx;
  return rp_error_set(RP_EINVAL, "batch 9 of 4");
}
static rp_status fails_mutely(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_EIO;
}
static rp_status nop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* The detail after a poison status names what failed, not what an
 * earlier, unrelated call left on this thread. */
static void expect_detail(rp_event e, rp_status st, const char *text) {
  rp_error_set(RP_EBUSY, "an unrelated older failure");
  RP_EXPECT(rp_event_wait(rt, e, -1), st);
  cr_assert(strstr(rp_error_detail(), "rp_event_wait: event") &&
                strstr(rp_error_detail(), text),
            "wait: %s (want '%s')", rp_error_detail(), text);
  rp_error_set(RP_EBUSY, "an unrelated older failure");
  RP_EXPECT(rp_event_query(rt, e), st);
  cr_assert(strstr(rp_error_detail(), "rp_event_query: event") &&
                strstr(rp_error_detail(), text),
            "query: %s (want '%s')", rp_error_detail(), text);
}

Test(event, poison_status_comes_with_the_failing_ops_detail) {
  rp_task_id tb, tm, tn;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "batch", .cpu_fn = says_batch}, &tb));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "mute", .cpu_fn = fails_mutely}, &tm));
  RP_CHECK(
      rp_task_register(rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop}, &tn));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  rp_access w = {.inst = x, .priv = RP_WRITE};
  /* an eager task's own words */
  rp_event e1, e2, e3, e4;
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = tb, .proc = 0, .accesses = &w, .naccess = 1},
      &e1));
  expect_detail(e1, RP_EINVAL, "poisoned with RP_EINVAL: batch 9 of 4");
  /* a dependent passes the status and the words on: through its wait, and
   * through the instance the failed task wrote (poisoned) */
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = tn, .proc = 0, .wait = e1}, &e2));
  expect_detail(e2, RP_EINVAL, "poisoned with RP_EINVAL: batch 9 of 4");
  rp_access rd = {.inst = x, .priv = RP_READ};
  rp_event e5;
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = tn, .proc = 0, .accesses = &rd, .naccess = 1},
      &e5));
  expect_detail(e5, RP_EINVAL, "batch 9 of 4");
  /* a task that failed without words does not inherit the earlier one's
   * (the worker's detail is cleared before each task) */
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = tm, .proc = 0}, &e3));
  expect_detail(e3, RP_EIO, "no detail recorded");
  /* rp_event_poison */
  RP_CHECK(rp_event_create(rt, &e4));
  RP_CHECK(rp_event_poison(rt, e4, RP_ETIMEDOUT));
  expect_detail(e4, RP_ETIMEDOUT, "poisoned by rp_event_poison");
  /* a merge: the first poisoned input's status and words */
  rp_event m;
  rp_event two[2] = {e1, e4};
  RP_CHECK(rp_event_merge(rt, two, 2, &m));
  expect_detail(m, RP_EINVAL, "batch 9 of 4");
  /* a replay's done event: the replay's detail */
  rp_graph *g;
  rp_exec *ex;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = tb, .proc = 0}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event d;
  RP_CHECK(rp_replay(ex, NULL, &d));
  expect_detail(d, RP_EINVAL, "batch 9 of 4");
  cr_assert(strstr(rp_error_detail(), rp_exec_error_detail(ex)), "%s",
            rp_error_detail());
  rp_event all[] = {e1, e2, e3, e4, e5, m, d};
  for (unsigned i = 0; i < 7; i++)
    RP_CHECK(rp_event_release(rt, all[i]));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
}

/* A replay's postcondition events carry its failure's detail, as its done
 * event does; a poisoned precondition names its port and what poisoned
 * it; a task's return that is no rp_status is named. */
static rp_status returns_five(rp_task_ctx *ctx) {
  (void)ctx;
  return (rp_status)5;
}

Test(event, replay_ports_carry_the_failures_detail) {
  rp_task_id tb, tn, t5;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "batch", .cpu_fn = says_batch}, &tb));
  RP_CHECK(
      rp_task_register(rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop}, &tn));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "five", .cpu_fn = returns_five}, &t5));
  /* in (pre) -> a: batch -> b: nop; posts: "loaded" on a, "after" on b */
  rp_event in, a, b;
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_precondition(rt, "in", &in, NULL));
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = tb, .proc = 0, .wait = in}, &a));
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = tn, .proc = 0, .wait = a}, &b));
  RP_CHECK(rp_capture_postcondition(rt, "loaded", &a, 1, NULL));
  RP_CHECK(rp_capture_postcondition(rt, "after", &b, 1, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event pre, post[2], done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_replay(
      ex, &(rp_replay_args){.pre = &pre, .npre = 1, .post = post, .npost = 2},
      &done));
  expect_detail(post[0], RP_EINVAL, "op 0 (batch) shard 0: RP_EINVAL: batch 9");
  expect_detail(post[1], RP_EINVAL, "batch 9 of 4"); /* skipped after it */
  expect_detail(done, RP_EINVAL, "batch 9 of 4");
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, post[0]));
  RP_CHECK(rp_event_release(rt, post[1]));
  RP_CHECK(rp_event_release(rt, done));
  /* a poisoned precondition: its port's name and its own detail */
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_event_poison(rt, pre, RP_EPEER));
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.pre = &pre, .npre = 1}, &done));
  expect_detail(done, RP_EPEER,
                "precondition 0 ('in') poisoned: poisoned by rp_event_poison");
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  /* a return that is no rp_status: RP_ETASK naming the value, replayed
   * and eager */
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t5, .proc = 0}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_replay(ex, NULL, &done));
  expect_detail(done, RP_ETASK, "the task returned 5, not an rp_status");
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t5, .proc = 0}, &done));
  expect_detail(done, RP_ETASK, "task 'five' returned 5, not an rp_status");
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
}

/* A completion callback of a postcondition event runs on the worker
 * inside the replay, as a callback, not as the replay's task: it may
 * launch eager work and poll (it was refused with RP_ECONTRACT, and the
 * replay failed, blaming an op that did nothing wrong); one called with a
 * failure finds its detail in rp_error_detail(). */
static atomic_int cb_launch_st, cb_poll_st, cb_seen;
static rp_task_id cb_task;
static char cb_detail[256];

static void launch_from_cb(void *arg, rp_status st) {
  (void)arg;
  if (st != RP_OK)
    snprintf(cb_detail, sizeof cb_detail, "%s", rp_error_detail());
  rp_event e = RP_NO_EVENT;
  atomic_store(
      &cb_launch_st,
      rp_launch_task(rt, &(rp_launch){.task = cb_task, .proc = 0}, &e));
  atomic_store(&cb_poll_st, rp_event_wait(rt, e, 0) == RP_ETIMEDOUT
                                ? RP_OK
                                : rp_event_query(rt, e));
  if (e.id)
    rp_event_release(rt, e);
  atomic_store(&cb_seen, 1);
}

Test(event, postcondition_callbacks_may_launch_and_see_the_failure) {
  rp_task_id tn, tb;
  RP_CHECK(
      rp_task_register(rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop}, &tn));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "batch", .cpu_fn = says_batch}, &tb));
  cb_task = tn;
  for (int fail = 0; fail < 2; fail++) {
    rp_event in, a, b;
    rp_graph *g;
    RP_CHECK(rp_capture_begin(rt, NULL));
    RP_CHECK(rp_capture_precondition(rt, "gate", &in, NULL));
    RP_CHECK(rp_launch_task(
        rt, &(rp_launch){.task = fail ? tb : tn, .proc = 0, .wait = in}, &a));
    RP_CHECK(
        rp_launch_task(rt, &(rp_launch){.task = tn, .proc = 0, .wait = a}, &b));
    RP_CHECK(rp_capture_postcondition(rt, "mid", &a, 1, NULL));
    RP_CHECK(rp_capture_end(rt, &g));
    rp_exec *ex;
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    rp_event pre, post, done;
    RP_CHECK(rp_event_create(rt, &pre));
    RP_CHECK(rp_replay(
        ex,
        &(rp_replay_args){.pre = &pre, .npre = 1, .post = &post, .npost = 1},
        &done));
    atomic_store(&cb_seen, 0);
    cb_detail[0] = 0;
    RP_CHECK(rp_event_on_complete(rt, post, launch_from_cb, NULL));
    RP_CHECK(rp_event_trigger(rt, pre)); /* the callback runs in the replay */
    RP_EXPECT(rp_event_wait(rt, done, -1), fail ? RP_EINVAL : RP_OK);
    RP_CHECK(rp_runtime_drain(rt));
    cr_assert(atomic_load(&cb_seen));
    cr_assert_eq(atomic_load(&cb_launch_st), RP_OK, "launch: %s",
                 rp_status_name(atomic_load(&cb_launch_st)));
    cr_assert_eq(atomic_load(&cb_poll_st), RP_OK, "poll: %s",
                 rp_status_name(atomic_load(&cb_poll_st)));
    if (fail)
      cr_assert(strstr(cb_detail, "poisoned with RP_EINVAL") &&
                    strstr(cb_detail, "batch 9 of 4"),
                "the callback saw: %s", cb_detail);
    else
      cr_assert_str_empty(rp_exec_error_detail(ex));
    RP_CHECK(rp_event_release(rt, pre));
    RP_CHECK(rp_event_release(rt, post));
    RP_CHECK(rp_event_release(rt, done));
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
  }
}

/* A replay task's own words survive the callbacks of an event it
 * triggers (they were wiped: its failure said nothing). */
static rp_event user_ev;
static void noop_cb(void *arg, rp_status st) {
  (void)arg, (void)st;
  rp_error_set(RP_EBUSY, "a callback's stray words");
}
static rp_status says_then_triggers(rp_task_ctx *ctx) {
  (void)ctx;
  rp_status st = rp_error_set(RP_EINVAL, "batch 9 of 4");
  rp_event_trigger(rt, user_ev);
  return st;
}

Test(event, a_tasks_words_survive_the_callbacks_it_triggers) {
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "loader", .cpu_fn = says_then_triggers}, &t));
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_event_create(rt, &user_ev));
  RP_CHECK(rp_event_on_complete(rt, user_ev, noop_cb, NULL));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_EINVAL);
  cr_assert(strstr(rp_exec_error_detail(ex), "RP_EINVAL: batch 9 of 4"), "%s",
            rp_exec_error_detail(ex));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, user_ev));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
}

/* Every callback of a poisoned event sees its detail, whatever the
 * callbacks before it did; the thread's own detail comes back after. */
static char seen_by[2][256];
static atomic_int seen_n;
static void polls_then_records(void *arg, rp_status st) {
  (void)st;
  int k = atomic_fetch_add(&seen_n, 1);
  snprintf(seen_by[k & 1], sizeof seen_by[0], "%s", rp_error_detail());
  rp_event other = *(rp_event *)arg;
  (void)rp_event_wait(rt, other, 0); /* sets its own detail: timed out */
}

Test(event, every_callback_of_a_poisoned_event_sees_its_detail) {
  rp_event e, other;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_create(rt, &other));
  atomic_store(&seen_n, 0);
  RP_CHECK(rp_event_on_complete(rt, e, polls_then_records, &other));
  RP_CHECK(rp_event_on_complete(rt, e, polls_then_records, &other));
  rp_error_set(RP_EBUSY, "the caller's own");
  RP_CHECK(rp_event_poison(rt, e, RP_EPEER));
  cr_assert_eq(atomic_load(&seen_n), 2);
  for (int k = 0; k < 2; k++)
    cr_assert(strstr(seen_by[k], "poisoned with RP_EPEER: poisoned by "
                                 "rp_event_poison"),
              "callback %d saw: %s", k, seen_by[k]);
  cr_assert_str_eq(rp_error_detail(), "the caller's own");
  RP_CHECK(rp_event_trigger(rt, other));
  RP_CHECK(rp_event_release(rt, e));
  RP_CHECK(rp_event_release(rt, other));
}

/* A postcondition event never carries another op's words: two
 * independent failures on two workers, in either order. */
static rp_status fails_a(rp_task_ctx *ctx) {
  (void)ctx;
  return rp_error_set(RP_EINVAL, "A's own words");
}
static rp_status fails_b_later(rp_task_ctx *ctx) {
  (void)ctx;
  usleep(5000);
  return rp_error_set(RP_ENOMEM, "B's own words");
}

Test(event, a_postcondition_never_carries_another_ops_words) {
  rp_runtime *two = th_cpu_runtime(2);
  rp_task_id ta, tb;
  RP_CHECK(rp_task_register(
      two, &(rp_task_desc){.name = "A", .cpu_fn = fails_a}, &ta));
  RP_CHECK(rp_task_register(
      two, &(rp_task_desc){.name = "B", .cpu_fn = fails_b_later}, &tb));
  rp_event b;
  RP_CHECK(rp_capture_begin(two, NULL));
  RP_CHECK(rp_launch_task(two, &(rp_launch){.task = ta, .proc = 0}, NULL));
  RP_CHECK(rp_launch_task(two, &(rp_launch){.task = tb, .proc = 1}, &b));
  RP_CHECK(rp_capture_postcondition(two, "b_out", &b, 1, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(two, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event post, done;
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.post = &post, .npost = 1}, &done));
  RP_EXPECT(rp_event_wait(two, post, -1), RP_ENOMEM);
  cr_assert(!strstr(rp_error_detail(), "A's own words") &&
                strstr(rp_error_detail(), "op 1 (B) shard 0: RP_ENOMEM: B's "
                                          "own words"),
            "%s", rp_error_detail());
  rp_event_wait(two, done, -1);
  RP_CHECK(rp_event_release(two, post));
  RP_CHECK(rp_event_release(two, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(two);
}

/* Each pending merge keeps an event slot until its inputs complete, even
 * once released: merging (and releasing) an event that never triggers,
 * once a step, fills the event table (4M events; the seam lowers it to 2
 * chunks, 2048). The next merge, or event made, is RP_ENOMEM naming the
 * call and why the table is full, with nothing written; a callback needs
 * no slot and still registers. Once the event triggers, every merge
 * completes, the slots come back and the calls succeed again. */
static _Atomic int full_cbs;
static void full_cb(void *arg, rp_status st) {
  (void)arg;
  if (st == RP_OK)
    atomic_fetch_add(&full_cbs, 1);
}

Test(event, merges_of_an_event_never_triggered_fill_the_table_and_are_refused) {
  rp_runtime *r2 = th_cpu_runtime(1);
  rp__ctable_max_chunks = 2;
  rp_event e;
  RP_CHECK(rp_event_create(r2, &e));
  rp_status st = RP_OK;
  uint32_t n = 0;
  rp_event m = {777};
  for (; n <= 2048 && st == RP_OK; n++)
    if ((st = rp_event_merge(r2, &e, 1, &m)) == RP_OK) {
      RP_CHECK(rp_event_release(r2, m));
      m.id = 777;
    }
  cr_assert_eq(st, RP_ENOMEM, "%u merges: %s", n, rp_status_name(st));
  cr_assert_leq(n, 2048u);
  cr_assert(strstr(rp_error_detail(), "rp_event_merge: the event table is "
                                      "full (2048 events; "),
            "%s", rp_error_detail());
  cr_assert(strstr(rp_error_detail(), "a merge of an event that never "
                                      "triggers"),
            "%s", rp_error_detail());
  cr_assert_eq(m.id, 777u, "*out written on an error");
  RP_EXPECT(rp_event_create(r2, &m), RP_ENOMEM);
  cr_assert(strstr(rp_error_detail(),
                   "rp_event_create: the event table is full (2048 events; "),
            "%s", rp_error_detail());
  cr_assert_eq(m.id, 777u, "*out written on an error");
  atomic_store(&full_cbs, 0);
  for (int i = 0; i < 100; i++)
    RP_CHECK(rp_event_on_complete(r2, e, full_cb, NULL));
  RP_CHECK(rp_event_trigger(r2, e));
  cr_assert_eq(atomic_load(&full_cbs), 100);
  RP_CHECK(rp_event_merge(r2, &e, 1, &m)); /* the slots came back */
  RP_CHECK(rp_event_wait(r2, m, 0));
  RP_CHECK(rp_event_release(r2, m));
  RP_CHECK(rp_event_release(r2, e));
  rp__ctable_max_chunks = 4096;
  th_destroy(r2);
}

/* The other calls that make an event refuse a full table as rp_event_create
 * does, naming themselves (not an inner call, or no call at all), and
 * change nothing: once the table has room again each works. */
static void expect_full(rp_status st, const char *call) {
  cr_assert_eq(st, RP_ENOMEM, "%s: %s", call, rp_status_name(st));
  char want[96];
  snprintf(want, sizeof want, "%s: the event table is full (2048 events; ",
           call);
  cr_assert(!strncmp(rp_error_detail(), want, strlen(want)), "%s",
            rp_error_detail());
}

Test(event, a_full_table_is_refused_naming_replay_launch_copy_and_parallel) {
  rp_runtime *r2 = th_cpu_runtime(1);
  rp_task_id tn;
  RP_CHECK(
      rp_task_register(r2, &(rp_task_desc){.name = "nop", .cpu_fn = nop}, &tn));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst x, y, z;
  RP_CHECK(rp_instance_create(r2, 0, RP_F32, &r, NULL, &x));
  RP_CHECK(rp_instance_create(r2, 0, RP_F32, &r, NULL, &y));
  RP_CHECK(rp_instance_create(r2, 0, RP_F32, &r, NULL, &z));
  rp_graph *g;
  rp_exec *ex;
  RP_CHECK(rp_capture_begin(r2, NULL));
  RP_CHECK(rp_launch_task(r2, &(rp_launch){.task = tn, .proc = 0}, NULL));
  RP_CHECK(rp_capture_end(r2, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp__ctable_max_chunks = 2;
  static rp_event held[8192];
  uint32_t n = 0;
  while (n < 8192 && rp_event_create(r2, &held[n]) == RP_OK)
    n++;
  cr_assert_lt(n, 8192u, "the table never filled");
  rp_event d = {777};
  expect_full(rp_replay(ex, NULL, &d), "rp_replay");
  expect_full(rp_launch_task(r2, &(rp_launch){.task = tn, .proc = 0}, &d),
              "rp_launch_task");
  expect_full(rp_launch_copy(r2, &(rp_copy){.src = x, .dst = y}, &d),
              "rp_launch_copy");
  rp_inst parts[2] = {x, y};
  rp_parallel_op op = {
      .kind = RP_POP_REPLICATE, .whole = z, .parts = parts, .nparts = 2};
  expect_full(rp_launch_parallel(r2, &op, &d), "rp_launch_parallel");
  cr_assert_eq(d.id, 777u, "*done written on an error");
  /* room for one: the parallel operator's two copies get their events,
   * their merge does not */
  for (uint32_t i = 0; i < 2; i++) {
    n--;
    RP_CHECK(rp_event_trigger(r2, held[n]));
    RP_CHECK(rp_event_release(r2, held[n]));
  }
  expect_full(rp_launch_parallel(r2, &op, &d), "rp_launch_parallel");
  cr_assert_eq(d.id, 777u, "*done written on an error");
  RP_CHECK(rp_runtime_drain(r2));
  for (uint32_t i = 0; i < n; i++) {
    RP_CHECK(rp_event_trigger(r2, held[i]));
    RP_CHECK(rp_event_release(r2, held[i]));
  }
  RP_CHECK(rp_replay(ex, NULL, &d));
  RP_CHECK(rp_event_wait(r2, d, -1));
  RP_CHECK(rp_event_release(r2, d));
  rp_exec_stats es;
  RP_CHECK(rp_exec_stats_get(ex, &es));
  cr_assert_eq(es.replays, 1u, "the refused replay was counted");
  rp__ctable_max_chunks = 4096;
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(r2);
}
