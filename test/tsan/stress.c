/* test/tsan/stress.c — the concurrent paths under ThreadSanitizer.
 *
 * `make test-tsan` runs this program after the unit suite (which runs under
 * TSan through test/tsan/crit_shim.h: Criterion itself cannot start there,
 * Snaipe/Criterion#274). It pushes harder than the unit tests do: events
 * across threads, eager DAGs on several workers, replays of two execs from
 * two host threads at once, poison, destroy with replays in flight, traced
 * replays in flight, engine ops (task spawns and copies chained by events)
 * from two host threads. It checks results as it goes and exits non-zero on
 * the first mismatch; TSan (halt_on_error=1) fails it on any race. */
#include "reprise.h"

#include "engine/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    rp_status st_ = (call);                                                    \
    if (st_ != RP_OK) {                                                        \
      fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call,     \
              rp_status_name(st_), rp_error_detail());                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static rp_runtime *rt;

static rp_status add_task(rp_task_ctx *ctx) {
  int64_t *acc = rp_ctx_ptr(ctx, 0);
  const int64_t *inc = rp_ctx_args(ctx, NULL);
  *acc += *inc;
  return RP_OK;
}

static rp_status fail_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_ETASK;
}

static void *event_hammer(void *arg) {
  (void)arg;
  for (int i = 0; i < 5000; i++) {
    rp_event e;
    CHECK(rp_event_create(rt, &e));
    CHECK(rp_event_trigger(rt, e));
    CHECK(rp_event_wait(rt, e, -1));
    CHECK(rp_event_release(rt, e));
  }
  return NULL;
}

static void events(void) {
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    pthread_create(&t[i], NULL, event_hammer, NULL);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
}

/* A chain of adds over two instances on alternating workers: the final
 * values are exact only if every dependency held. */
static void eager_chain(rp_task_id add, rp_inst x, rp_inst y) {
  for (int64_t i = 1; i <= 2000; i++) {
    rp_access acc = {i % 3 ? x : y, RP_RW, 0};
    CHECK(rp_launch_task(rt,
                         &(rp_launch){.task = add,
                                      .proc = (rp_proc)(i % 3),
                                      .accesses = &acc,
                                      .naccess = 1,
                                      .args = &i,
                                      .args_size = sizeof i},
                         NULL));
  }
  CHECK(rp_runtime_drain(rt));
}

static rp_exec *record_exec(rp_task_id add, rp_inst a, rp_inst b) {
  CHECK(rp_capture_begin(rt, NULL));
  for (int64_t i = 0; i < 50; i++) {
    rp_access acc = {i % 2 ? a : b, RP_RW, 0};
    int64_t one = 1;
    CHECK(rp_launch_task(rt,
                         &(rp_launch){.task = add,
                                      .proc = RP_PROC_ANY,
                                      .accesses = &acc,
                                      .naccess = 1,
                                      .args = &one,
                                      .args_size = sizeof one},
                         NULL));
  }
  rp_graph *g;
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  CHECK(rp_graph_destroy(g));
  return ex;
}

static void *replay_loop(void *arg) {
  rp_exec *ex = arg;
  rp_event done = RP_NO_EVENT;
  for (int i = 0; i < 300; i++) {
    if (done.id)
      CHECK(rp_event_release(rt, done));
    CHECK(rp_replay(ex, NULL, &done));
  }
  CHECK(rp_event_wait(rt, done, -1));
  CHECK(rp_event_release(rt, done));
  return NULL;
}

static int64_t value(rp_inst i) {
  int64_t v;
  CHECK(rp_instance_read(rt, i, &v, sizeof v));
  return v;
}

static void replays(rp_task_id add) {
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst in[4];
  for (int i = 0; i < 4; i++)
    CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &in[i]));
  rp_exec *e1 = record_exec(add, in[0], in[1]);
  rp_exec *e2 = record_exec(add, in[2], in[3]);
  pthread_t t1, t2;
  pthread_create(&t1, NULL, replay_loop, e1);
  pthread_create(&t2, NULL, replay_loop, e2);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  for (int i = 0; i < 4; i++)
    EXPECT(value(in[i]) == 300 * 25);
  /* destroy with replays in flight */
  for (int i = 0; i < 20; i++)
    CHECK(rp_replay(e1, NULL, NULL));
  CHECK(rp_exec_destroy(e1));
  EXPECT(value(in[0]) == 320 * 25);
  CHECK(rp_exec_destroy(e2));
  for (int i = 0; i < 4; i++)
    CHECK(rp_instance_free(rt, in[i]));
}

static void poison(rp_task_id add, rp_task_id fail) {
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x;
  CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  rp_access w = {x, RP_WRITE, 0}, rw = {x, RP_RW, 0};
  int64_t one = 1;
  CHECK(rp_capture_begin(rt, NULL));
  CHECK(rp_launch_task(
      rt, &(rp_launch){.task = fail, .proc = 0, .accesses = &w, .naccess = 1},
      NULL));
  CHECK(rp_launch_task(rt,
                       &(rp_launch){.task = add,
                                    .proc = 1,
                                    .accesses = &rw,
                                    .naccess = 1,
                                    .args = &one,
                                    .args_size = sizeof one},
                       NULL));
  rp_graph *g;
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  for (int i = 0; i < 50; i++) {
    rp_event done;
    CHECK(rp_replay(ex, NULL, &done));
    EXPECT(rp_event_wait(rt, done, -1) == RP_ETASK);
    CHECK(rp_event_release(rt, done));
  }
  EXPECT(value(x) == 0);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_graph_destroy(g));
  CHECK(rp_instance_free(rt, x));
}

/* Traced replays back to back (several in flight, cross-worker waits),
 * then a trace armed when the exec is destroyed with replays in flight. */
static void traces(rp_task_id add) {
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst a, b;
  CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &a));
  CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &b));
  rp_exec *ex = record_exec(add, a, b);
  CHECK(rp_exec_trace_start(ex, 40));
  for (int i = 0; i < 60; i++)
    CHECK(rp_replay(ex, NULL, NULL));
  char path[64];
  snprintf(path, sizeof path, "/tmp/rp_tsan_trace_%d.json", (int)getpid());
  CHECK(rp_exec_trace_write(ex, path));
  remove(path);
  EXPECT(value(a) == 60 * 25 && value(b) == 60 * 25);
  CHECK(rp_exec_trace_start(ex, 10));
  for (int i = 0; i < 5; i++)
    CHECK(rp_replay(ex, NULL, NULL));
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_instance_free(rt, a));
  CHECK(rp_instance_free(rt, b));
}

/* Engine ops (engine/ops.c): each host thread chains spawns (done -> pre)
 * over the three workers that bump a plain counter, with a copy of the
 * counter in the chain every 100 bumps. Exact counts and no race report
 * hold only if each completion happens before the op behind it. */
typedef struct op_chain {
  rp_task_id bump;
  int64_t count, copy;
} op_chain;

static rp_status bump_task(rp_task_ctx *ctx) {
  int64_t *c = *(int64_t *const *)rp_ctx_args(ctx, NULL);
  *c += 1;
  return RP_OK;
}

static void *op_chain_run(void *arg) {
  op_chain *ch = arg;
  int64_t *c = &ch->count;
  rp_event prev = RP_NO_EVENT, done;
  for (int i = 0; i < 2000; i++) {
    rp_task_spawn s = {.proc = (rp_proc)(i % 3),
                       .task = ch->bump,
                       .args = &c,
                       .args_size = sizeof c};
    CHECK(rp__spawn_task(rt, &s, prev, &done));
    CHECK(rp_event_release(rt, prev));
    prev = done;
    if (i % 100 == 99) {
      rp_copy_bytes cp = {.dst = &ch->copy,
                          .dst_mem = 0,
                          .src = c,
                          .src_mem = 0,
                          .rows = 1,
                          .row_bytes = sizeof *c};
      CHECK(rp__spawn_copy(rt, &cp, (rp_proc)((i + 1) % 3), prev, &done));
      CHECK(rp_event_release(rt, prev));
      prev = done;
    }
  }
  CHECK(rp_event_wait(rt, prev, -1));
  CHECK(rp_event_release(rt, prev));
  return NULL;
}

static void engine_ops(void) {
  rp_task_id bump;
  CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "bump", .cpu_fn = bump_task}, &bump));
  op_chain ch[2] = {{bump, 0, 0}, {bump, 0, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, op_chain_run, &ch[i]);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++)
    EXPECT(ch[i].count == 2000 && ch[i].copy == 2000);
}

int main(void) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = 3;
  cfg.quiet = 1;
  CHECK(rp_runtime_create(&cfg, &rt));
  rp_task_id add, fail;
  CHECK(rp_task_register(rt, &(rp_task_desc){.name = "add", .cpu_fn = add_task},
                         &add));
  CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "fail", .cpu_fn = fail_task}, &fail));
  events();
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x, y;
  CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x));
  CHECK(rp_instance_create(rt, 0, RP_I64, &r, NULL, &y));
  eager_chain(add, x, y);
  int64_t sx = 0, sy = 0;
  for (int64_t i = 1; i <= 2000; i++)
    *(i % 3 ? &sx : &sy) += i;
  EXPECT(value(x) == sx && value(y) == sy);
  CHECK(rp_instance_free(rt, x));
  CHECK(rp_instance_free(rt, y));
  replays(add);
  poison(add, fail);
  traces(add);
  engine_ops();
  CHECK(rp_runtime_destroy(rt));
  printf("tsan stress: ok\n");
  return 0;
}
