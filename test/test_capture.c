/* The recorder (capture/record.c) and its dependence analysis
 * (capture/analysis.c): which recorded ops a capture orders, checked
 * against an oracle of the access rules (reprise.h, "The capture
 * contract", and RP_REDUCE), and what a capture does on misuse. */
#include "helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

#define NI 3    /* instances */
#define NOPS 12 /* ops per random capture */
#define NCASES 3000

/* One op's access to one instance in the oracle: 0 none, else a privilege;
 * copy: the op is a copy (its reductions are copies'). */
typedef struct o_op {
  int priv[NI];
  int copy;
} o_op;

/* 1 when ops i < j must be ordered: they share an instance that one of
 * them does not only read, unless both fold into it with the same kind of
 * op and nothing but such folds touched it in between (one group). */
static int must_order(const o_op *ops, int i, int j) {
  for (int x = 0; x < NI; x++) {
    int a = ops[i].priv[x], b = ops[j].priv[x];
    if (!a || !b || (a == RP_READ && b == RP_READ))
      continue;
    if (a == RP_REDUCE && b == RP_REDUCE && ops[i].copy == ops[j].copy) {
      int same_group = 1;
      for (int k = i + 1; k < j; k++)
        if (ops[k].priv[x] &&
            (ops[k].priv[x] != RP_REDUCE || ops[k].copy != ops[i].copy))
          same_group = 0;
      if (same_group)
        continue;
    }
    return 1;
  }
  return 0;
}

Test(capture, random_captures_order_exactly_the_conflicting_ops,
     .timeout = 300) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_inst in[NI];
  rp_rect r = rp_rect_1d(0, 3);
  for (int x = 0; x < NI; x++)
    RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in[x]));
  srand(12345);
  for (int c = 0; c < NCASES; c++) {
    o_op ops[NOPS];
    memset(ops, 0, sizeof ops);
    RP_CHECK(rp_capture_begin(rt, NULL));
    for (int o = 0; o < NOPS; o++) {
      if (rand() % 3 == 0) { /* a copy between two instances */
        int s = rand() % NI, d = (s + 1 + rand() % (NI - 1)) % NI;
        int red = rand() % 2;
        ops[o].copy = 1;
        ops[o].priv[s] = RP_READ;
        ops[o].priv[d] = red ? RP_REDUCE : RP_WRITE;
        RP_CHECK(rp_launch_copy(
            rt,
            &(rp_copy){.src = in[s],
                       .dst = in[d],
                       .redop = red ? RP_REDOP_SUM : RP_REDOP_NONE},
            NULL));
        continue;
      }
      rp_access acc[2 * NI];
      uint32_t n = 0;
      for (int k = 0; k < 2 * NI; k++) {     /* an instance may come twice */
        int x = rand() % NI, p = rand() % 6; /* 0, 1: none */
        static const int privs[] = {0, 0, RP_READ, RP_WRITE, RP_RW, RP_REDUCE};
        if (!privs[p] || (k >= NI && rand() % 3))
          continue;
        int had = ops[o].priv[x];
        /* two accesses: both reads a read, both folds a fold, else RW */
        ops[o].priv[x] = !had || had == privs[p] ? privs[p] : RP_RW;
        if (had == RP_WRITE && privs[p] == RP_WRITE)
          ops[o].priv[x] = RP_WRITE;
        acc[n++] =
            (rp_access){in[x], (rp_privilege)privs[p],
                        privs[p] == RP_REDUCE ? RP_REDOP_SUM : RP_REDOP_NONE};
      }
      RP_CHECK(rp_launch_task(
          rt,
          &(rp_launch){
              .task = t, .proc = RP_PROC_ANY, .accesses = acc, .naccess = n},
          NULL));
    }
    rp_graph *g;
    RP_CHECK(rp_capture_end(rt, &g));
    cr_assert_eq(rp_graph_op_count(g), NOPS);
    /* every edge joins conflicting ops (no spurious order) */
    for (uint32_t e = 0; e < rp_graph_edge_count(g); e++) {
      rp_op_id from, to;
      int inferred;
      RP_CHECK(rp_graph_edge_query(g, e, &from, &to, &inferred));
      cr_assert(from < to && must_order(ops, (int)from, (int)to),
                "case %d: edge %u -> %u joins ops that need no order", c, from,
                to);
    }
    /* every conflicting pair is ordered (no missed dependence) */
    for (int i = 0; i < NOPS; i++)
      for (int j = i + 1; j < NOPS; j++)
        if (must_order(ops, i, j))
          cr_assert(rp_graph_depends(g, (rp_op_id)i, (rp_op_id)j),
                    "case %d: ops %d and %d conflict, unordered", c, i, j);
    RP_CHECK(rp_graph_destroy(g));
  }
  for (int x = 0; x < NI; x++)
    RP_CHECK(rp_instance_free(rt, in[x]));
  th_destroy(rt);
}

/* What an event's callback gets when it runs on the capturing thread (the
 * thread's rp_event_trigger runs it there): it borrows the thread, as on
 * any other, so its launches are refused as another thread's are (they
 * were recorded into the capture, handing the callback an op reference
 * for its done event), and it cannot end the thread's capture. */
typedef struct cb_calls {
  rp_runtime *rt;
  rp_task_id task;
  int called, open;
  rp_status launch, copy, name, abort_;
  char detail[256];
  rp_inst x, y;
} cb_calls;

static void calls_from_callback(void *arg, rp_status st) {
  cb_calls *c = arg;
  (void)st;
  c->called = 1;
  c->open = rp_capture_open(c->rt);
  rp_event done = RP_NO_EVENT;
  c->launch = rp_launch_task(
      c->rt, &(rp_launch){.task = c->task, .proc = RP_PROC_ANY}, &done);
  snprintf(c->detail, sizeof c->detail, "%s", rp_error_detail());
  c->copy = rp_launch_copy(c->rt, &(rp_copy){.src = c->x, .dst = c->y}, NULL);
  c->name = rp_capture_name_next(c->rt, "cb");
  c->abort_ = rp_capture_abort(c->rt);
}

Test(capture, a_callback_on_the_capturing_thread_is_not_recorded) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "empty", empty_task);
  rp_rect r = rp_rect_1d(0, 3);
  cb_calls c = {
      .rt = rt, .task = t, .launch = 1, .copy = 1, .name = 1, .abort_ = 1};
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &c.x));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &c.y));
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_on_complete(rt, e, calls_from_callback, &c));
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_name_next(rt, "host"));
  RP_CHECK(rp_event_trigger(rt, e)); /* runs the callback here */
  cr_assert(c.called);
  cr_assert_eq(c.open, -1, "rp_capture_open from the callback: %d", c.open);
  cr_assert_eq(c.launch, RP_ECAPTURE, "%s", rp_status_name(c.launch));
  cr_assert(strstr(c.detail, "rp_launch_task: called from an event's "
                             "callback on the thread that is capturing"),
            "%s", c.detail);
  cr_assert_eq(c.copy, RP_ECAPTURE, "%s", rp_status_name(c.copy));
  cr_assert_eq(c.name, RP_ECAPTURE, "%s", rp_status_name(c.name));
  cr_assert_eq(c.abort_, RP_ECAPTURE, "%s", rp_status_name(c.abort_));
  /* the capture is still open, the host's name still pending */
  cr_assert_eq(rp_capture_open(rt), 1);
  RP_CHECK(
      rp_launch_task(rt, &(rp_launch){.task = t, .proc = RP_PROC_ANY}, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1, "the callback's launches recorded");
  cr_assert_str_eq(rp_graph_op_name(g, 0), "host");
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_event_release(rt, e));
  RP_CHECK(rp_instance_free(rt, c.x));
  RP_CHECK(rp_instance_free(rt, c.y));
  th_destroy(rt);
}

/* One thread captures over and over while another launches eagerly and
 * tries to capture: the other thread's launches run (RP_OK) or are
 * refused (RP_ECAPTURE) and nothing else, what ran is counted exactly,
 * and no capture takes an op it did not launch. */
static rp_status add_one(rp_task_ctx *ctx) {
  int64_t *v = rp_ctx_ptr(ctx, 0);
  *v += 1;
  return RP_OK;
}

typedef struct eager_side {
  rp_runtime *rt;
  rp_task_id add;
  rp_inst x;
  _Atomic int stop, ran, refused;
  int other, captured;
} eager_side;

static void *eager_loop(void *arg) {
  eager_side *e = arg;
  rp_access a = {e->x, RP_RW, RP_REDOP_NONE};
  while (!atomic_load(&e->stop)) {
    rp_event done = RP_NO_EVENT;
    rp_status st = rp_launch_task(
        e->rt,
        &(rp_launch){
            .task = e->add, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
        &done);
    if (st == RP_OK) {
      atomic_fetch_add(&e->ran, 1);
      if (rp_event_wait(e->rt, done, -1) != RP_OK ||
          rp_event_release(e->rt, done) != RP_OK)
        e->other++;
    } else if (st == RP_ECAPTURE) {
      atomic_fetch_add(&e->refused, 1);
    } else {
      e->other++;
    }
    if (rp_capture_begin(e->rt, NULL) == RP_OK) {
      rp_graph *g = NULL;
      e->captured++;
      if (rp_capture_end(e->rt, &g) != RP_OK || rp_graph_op_count(g) != 0)
        e->other++;
      rp_graph_destroy(g);
    }
  }
  return NULL;
}

Test(capture, another_threads_eager_launches_run_or_are_refused,
     .timeout = 120) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "add_one", add_one);
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x, y;
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &y));
  int64_t zero = 0;
  RP_CHECK(rp_instance_write(rt, x, &zero, sizeof zero));
  eager_side e = {.rt = rt, .add = t, .x = x};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, eager_loop, &e), 0);
  rp_access a = {y, RP_RW, RP_REDOP_NONE};
  int mine = 0;
  /* until the other thread saw both outcomes a few times */
  for (int c = 0; c < 100000 && (c < 300 || atomic_load(&e.ran) < 20 ||
                                 atomic_load(&e.refused) < 20);
       c++) {
    rp_status st = rp_capture_begin(rt, NULL);
    if (st == RP_ECAPTURE) /* the other thread's, for a moment */
      continue;
    RP_CHECK(st);
    mine++;
    for (int i = 0; i < 10; i++)
      RP_CHECK(rp_launch_task(
          rt,
          &(rp_launch){
              .task = t, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
          NULL));
    rp_graph *g;
    RP_CHECK(rp_capture_end(rt, &g));
    cr_assert_eq(rp_graph_op_count(g), 10);
    cr_assert_eq(rp_graph_edge_count(g), 9);
    RP_CHECK(rp_graph_destroy(g));
  }
  atomic_store(&e.stop, 1);
  pthread_join(th, NULL);
  cr_assert_eq(e.other, 0, "a launch or capture failed otherwise");
  cr_assert(mine > 0);
  RP_CHECK(rp_runtime_drain(rt));
  int64_t v = -1;
  RP_CHECK(rp_instance_read(rt, x, &v, sizeof v));
  cr_assert_eq(v, atomic_load(&e.ran), "%lld adds ran, %d launched",
               (long long)v, atomic_load(&e.ran));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}
