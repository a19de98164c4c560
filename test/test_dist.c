/* test/test_dist.c — the distributed API in one process (rank 0 of 1, no
 * communicator): what works on one rank, what is refused and why. The
 * cases across ranks are an MPI program (test/comm/test_dist.c, label
 * "dist"). */
#include "helpers.h"

#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rp_inst make(rp_runtime *rt, rp_dtype t, rp_rect r) {
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, 0, t, &r, NULL, &i));
  return i;
}

static void fill(rp_runtime *rt, rp_inst i, int n, float base) {
  float *v = malloc(sizeof *v * (size_t)n);
  for (int k = 0; k < n; k++)
    v[k] = base + (float)k;
  RP_CHECK(rp_instance_write(rt, i, v, sizeof *v * (size_t)n));
  free(v);
}

/* A graph of the one task l: rp_instantiate refuses it (RP_EINVAL, the
 * detail naming want), no exec made. */
static void refused_at_instantiate(rp_runtime *rt, const rp_launch *l,
                                   const char *want) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, l, NULL));
  rp_exec *ex = NULL;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_EINVAL);
  cr_assert_null(ex);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  RP_CHECK(rp_graph_destroy(g));
}

static void read_f(rp_runtime *rt, rp_inst i, float *v, int n) {
  RP_CHECK(rp_instance_read(rt, i, v, sizeof *v * (size_t)n));
}

static void wait_ok(rp_runtime *rt, rp_event e) {
  RP_CHECK(rp_event_wait(rt, e, -1));
  RP_CHECK(rp_event_release(rt, e));
}

/* Records f(rt, arg) once, replays it `n` times, checks each replay. */
static void record_replay(rp_runtime *rt, void (*f)(rp_runtime *, void *),
                          void *arg, int n) {
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  f(rt, arg);
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  for (int k = 0; k < n; k++) {
    rp_event e;
    RP_CHECK(rp_replay(ex, NULL, &e));
    rp_status st = rp_event_wait(rt, e, -1);
    cr_assert_eq(st, RP_OK, "replay %d: %s (%s)", k, rp_status_name(st),
                 rp_exec_error_detail(ex));
    RP_CHECK(rp_event_release(rt, e));
  }
  RP_CHECK(rp_exec_destroy(ex));
}

/* The library's own probes (the first distributed call looks for pinned
 * memory, which a CPU runtime lacks) leave the caller's last failure
 * detail alone: a successful call does not replace it. */
Test(dist, a_success_keeps_the_last_failure_detail) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 3));
  RP_EXPECT(rp_launch_allreduce(rt, NULL, NULL), RP_EINVAL);
  char was[512];
  snprintf(was, sizeof was, "%s", rp_error_detail());
  cr_assert(was[0], "the failure said nothing");
  rp_event e;
  RP_CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
  RP_CHECK(rp_event_wait(rt, e, -1));
  RP_CHECK(rp_event_release(rt, e));
  cr_assert_str_eq(rp_error_detail(), was);
  th_destroy(rt);
}

Test(dist, one_process_is_rank_zero_of_one) {
  rp_runtime *rt = th_cpu_runtime(2);
  cr_assert_eq(rp_runtime_rank(rt), 0);
  cr_assert_eq(rp_runtime_ranks(rt), 1);
  cr_assert_str_empty(rp_runtime_dist_detail(rt));
  cr_assert_eq(rp_runtime_rank(NULL), 0);
  cr_assert_eq(rp_runtime_ranks(NULL), 1);
  /* the communication tasks arrive with the first distributed call */
  rp_task_id id;
  RP_EXPECT(rp_task_find(rt, "rp.dist.allreduce", &id), RP_ENOTASK);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_event e;
  RP_CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
  wait_ok(rt, e);
  RP_CHECK(rp_task_find(rt, "rp.dist.allreduce", &id));
  RP_CHECK(rp_task_find(rt, "rp.dist.send", &id));
  th_destroy(rt);
}

static void allreduce_op(rp_runtime *rt, void *arg) {
  RP_CHECK(rp_launch_allreduce(
      rt, &(rp_allreduce){*(rp_inst *)arg, RP_REDOP_SUM, {0}}, NULL));
}

Test(dist, allreduce_of_one_rank_leaves_the_data) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 15));
  fill(rt, x, 16, 3.0f);
  rp_event e;
  RP_CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
  wait_ok(rt, e);
  record_replay(rt, allreduce_op, &x, 3);
  float v[16];
  read_f(rt, x, v, 16);
  for (int k = 0; k < 16; k++)
    cr_assert_eq(v[k], 3.0f + (float)k, "element %d", k);
  th_destroy(rt);
}

/* The builder orders a graph's communication ops among themselves, and
 * nothing else: a user task of id 0 (the runtime's first) before the
 * first all-reduce stays unordered with it (the communication tasks were
 * not registered yet, and their ids, all 0, matched it). */
static rp_status noop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

Test(dist, the_builder_orders_communication_ops_only) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "user.noop", .cpu_fn = noop_task}, &t));
  cr_assert_eq(t, 0, "the runtime's first task");
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 3)),
          y = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access a = {y, RP_RW, RP_REDOP_NONE};
  rp_op_id u, r1, r2;
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 0, .accesses = &a, .naccess = 1}, &u));
  RP_CHECK(
      rp_graph_add_allreduce(g, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &r1));
  RP_CHECK(
      rp_graph_add_allreduce(g, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &r2));
  cr_assert(!rp_graph_depends(g, u, r1) && !rp_graph_depends(g, u, r2),
            "the user's task was ordered before the all-reduces");
  cr_assert(rp_graph_depends(g, r1, r2), "the all-reduces are not ordered");
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

typedef struct copy_arg {
  rp_inst src, dst;
  rp_rect rect;
  rp_redop redop;
} copy_arg;

static void copy_op(rp_runtime *rt, void *arg) {
  copy_arg *c = arg;
  RP_CHECK(rp_launch_dist_copy(
      rt,
      &(rp_dist_copy){
          .src = c->src, .dst = c->dst, .rect = c->rect, .redop = c->redop},
      NULL));
}

/* rank 0 -> rank 0: a local copy between strided rectangles, plain then
 * SUM, eager then replayed. */
Test(dist, copy_to_the_same_rank_is_a_local_copy) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst src = make(rt, RP_F32, rp_rect_2d(0, 3, 0, 5));
  rp_inst dst = make(rt, RP_F32, rp_rect_2d(1, 3, 1, 4));
  fill(rt, src, 24, 0.0f);
  copy_arg c = {src, dst, rp_rect_2d(1, 2, 2, 4), RP_REDOP_NONE};
  rp_event e;
  RP_CHECK(rp_launch_dist_copy(
      rt, &(rp_dist_copy){.src = src, .dst = dst, .rect = c.rect}, &e));
  wait_ok(rt, e);
  float v[12];
  read_f(rt, dst, v, 12);
  for (int r = 1; r <= 2; r++)
    for (int col = 2; col <= 4; col++)
      cr_assert_eq(v[(r - 1) * 4 + (col - 1)], (float)(r * 6 + col));
  c.redop = RP_REDOP_SUM;
  record_replay(rt, copy_op, &c, 3); /* three more: 4x in total */
  read_f(rt, dst, v, 12);
  for (int r = 1; r <= 2; r++)
    for (int col = 2; col <= 4; col++)
      cr_assert_eq(v[(r - 1) * 4 + (col - 1)], 4.0f * (float)(r * 6 + col),
                   "row %d col %d", r, col);
  cr_assert_eq(v[0], 0.0f, "outside the rect");
  th_destroy(rt);
}

/* rank 0 -> rank 0 between two external instances over one buffer, one
 * element apart: refused as rp_launch_copy refuses it (reprise.h,
 * rp_instance_create_external), and the buffer stays as it was. A local
 * copy moves its rows through a 4 KiB bounce buffer, so it would read
 * elements it had already overwritten. Bytes that do not overlap copy. */
Test(dist, local_copy_between_overlapping_bytes_is_refused) {
  rp_runtime *rt = th_cpu_runtime(2);
  enum { N = 2000 };
  static float buf[2 * N + 1];
  for (int k = 0; k < 2 * N + 1; k++)
    buf[k] = (float)k;
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst a, b, far;
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf,
                                       sizeof *buf * N, &a));
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf + 1,
                                       sizeof *buf * N, &b));
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf + N + 1,
                                       sizeof *buf * N, &far));
  rp_event e = RP_NO_EVENT;
  for (int sum = 0; sum < 2; sum++) {
    rp_dist_copy c = {
        .src = a, .dst = b, .redop = sum ? RP_REDOP_SUM : RP_REDOP_NONE};
    RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "overlap"), "%s", rp_error_detail());
    c.src = b, c.dst = a;
    RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_EINVAL);
    /* a rect of points whose bytes are apart in the two instances */
    c.rect = rp_rect_1d(10, 10);
    RP_CHECK(rp_launch_dist_copy(rt, &c, &e));
    wait_ok(rt, e);
  }
  cr_assert_eq(buf[10], 22.0f, "copied (11), then summed (+ 11)");
  buf[10] = 10.0f;
  for (int k = 0; k < 2 * N + 1; k++)
    cr_assert_eq(buf[k], (float)k, "buf[%d] changed", k);
  /* the root's own part of a parallel operator is such a copy too */
  rp_dist_parallel p = {.kind = RP_POP_REDUCTION, .whole = b, .part = a};
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "overlap"), "%s", rp_error_detail());
  RP_CHECK(rp_launch_dist_copy(rt, &(rp_dist_copy){.src = a, .dst = far}, &e));
  wait_ok(rt, e);
  for (int k = 0; k < N; k++)
    cr_assert_eq(buf[N + 1 + k], (float)k, "far[%d]", k);
  th_destroy(rt);
}

typedef struct pop_arg {
  rp_dist_parallel p;
} pop_arg;

static void pop_op(rp_runtime *rt, void *arg) {
  RP_CHECK(rp_launch_dist_parallel(rt, &((pop_arg *)arg)->p, NULL));
}

/* With one rank every parallel operator is one local copy (the reduce's is
 * the plain copy of the only part). */
Test(dist, parallel_operators_on_one_rank) {
  rp_runtime *rt = th_cpu_runtime(2);
  for (int kind = 0; kind <= RP_POP_REDUCTION; kind++)
    for (int bwd = 0; bwd < 2; bwd++) {
      rp_inst whole = make(rt, RP_F32, rp_rect_2d(0, 3, 0, 2));
      rp_inst part = make(rt, RP_F32, rp_rect_2d(0, 3, 0, 2));
      int to_parts =
          (kind == RP_POP_REPARTITION || kind == RP_POP_REPLICATE) != bwd;
      fill(rt, to_parts ? whole : part, 12, 5.0f);
      pop_arg a = {{.kind = (rp_pop_kind)kind,
                    .backward = bwd,
                    .whole = whole,
                    .part = part}};
      rp_event e;
      RP_CHECK(rp_launch_dist_parallel(rt, &a.p, &e));
      wait_ok(rt, e);
      rp_inst dst = to_parts ? part : whole;
      float v[12];
      read_f(rt, dst, v, 12);
      for (int k = 0; k < 12; k++)
        cr_assert_eq(v[k], 5.0f + (float)k, "eager: kind %d bwd %d elt %d",
                     kind, bwd, k);
      fill(rt, dst, 12, 100.0f); /* the replays must write it again */
      record_replay(rt, pop_op, &a, 2);
      read_f(rt, dst, v, 12);
      for (int k = 0; k < 12; k++)
        cr_assert_eq(v[k], 5.0f + (float)k, "replayed: kind %d bwd %d elt %d",
                     kind, bwd, k);
      RP_CHECK(rp_instance_free(rt, whole));
      RP_CHECK(rp_instance_free(rt, part));
    }
  th_destroy(rt);
}

Test(dist, bad_input_is_refused_and_records_nothing) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_2d(0, 3, 0, 3));
  rp_inst y = make(rt, RP_F32, rp_rect_2d(0, 3, 0, 3));
  rp_inst b = make(rt, RP_U8, rp_rect_1d(0, 7));
  rp_inst d = make(rt, RP_F64, rp_rect_2d(0, 3, 0, 3));
  rp_inst gone = make(rt, RP_F32, rp_rect_1d(0, 3));
  RP_CHECK(rp_instance_free(rt, gone));
  int64_t strides[2] = {8, 1}; /* 4x4 in rows of 8: not dense */
  rp_inst padded;
  rp_rect r44 = rp_rect_2d(0, 3, 0, 3);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r44, strides, &padded));
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event e = RP_NO_EVENT;
  RP_EXPECT(
      rp_launch_allreduce(NULL, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e),
      RP_EINVAL);
  RP_EXPECT(rp_launch_allreduce(rt, NULL, &e), RP_EINVAL);
  RP_EXPECT(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_NONE, {0}}, &e),
            RP_EINVAL);
  RP_EXPECT(rp_launch_allreduce(rt, &(rp_allreduce){b, RP_REDOP_SUM, {0}}, &e),
            RP_ETYPE);
  RP_EXPECT(
      rp_launch_allreduce(rt, &(rp_allreduce){padded, RP_REDOP_SUM, {0}}, &e),
      RP_ESHAPE);
  RP_EXPECT(
      rp_launch_allreduce(rt, &(rp_allreduce){gone, RP_REDOP_SUM, {0}}, &e),
      RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_launch_allreduce"), "%s",
            rp_error_detail());
  rp_dist_copy c = {.src = x, .dst = y};
  c.dst_rank = 1;
  RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "1 ranks"), "%s", rp_error_detail());
  c.dst_rank = 0;
  c.redop = (rp_redop)7;
  RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_EINVAL);
  c.redop = RP_REDOP_NONE;
  c.rect = rp_rect_2d(2, 5, 0, 1);
  RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_ESHAPE);
  c.rect = (rp_rect){0};
  c.dst = x;
  RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "from an instance into itself"), "%s",
            rp_error_detail());
  c.dst = d;
  RP_EXPECT(rp_launch_dist_copy(rt, &c, &e), RP_ETYPE);
  cr_assert(strstr(rp_error_detail(), "from f32 into f64"), "%s",
            rp_error_detail());
  RP_EXPECT(
      rp_launch_dist_copy(
          rt, &(rp_dist_copy){.src = b, .dst = b, .redop = RP_REDOP_SUM}, &e),
      RP_ETYPE);
  RP_EXPECT(rp_launch_dist_copy(rt, &(rp_dist_copy){.src = gone, .dst = y}, &e),
            RP_ESTALE);
  rp_dist_parallel p = {.kind = (rp_pop_kind)9, .whole = x, .part = y};
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_EINVAL);
  p.kind = RP_POP_REPLICATE;
  p.backward = -1; /* 0 or 1 only */
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "backward = -1"), "%s",
            rp_error_detail());
  p.backward = 0;
  p.kind = RP_POP_REPLICATE;
  p.root = 1;
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_ERANGE);
  p.root = 0;
  p.part = make(rt, RP_F32, rp_rect_1d(0, 7)); /* not the whole's shape */
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_ESHAPE);
  /* the root's part of another type than the whole (its shape's) */
  p.part = d;
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_ETYPE);
  cr_assert_str_eq(rp_error_detail(), "rp_launch_dist_parallel: the root's "
                                      "part is f64, the whole f32");
  p.kind = RP_POP_REPARTITION;
  p.part = y;
  p.dim = 5;
  RP_EXPECT(rp_launch_dist_parallel(rt, &p, &e), RP_EINVAL);
  RP_EXPECT(rp_launch_dist_parallel(rt, NULL, &e), RP_EINVAL);
  /* a sum over bytes, refused on one rank as on several (a reduction's
   * forward and a replicate's backward sum the parts) */
  rp_dist_parallel u = {.kind = RP_POP_REDUCTION, .whole = b, .part = b};
  RP_EXPECT(rp_launch_dist_parallel(rt, &u, &e), RP_ETYPE);
  cr_assert(strstr(rp_error_detail(), "SUM over u8"), "%s", rp_error_detail());
  u.kind = RP_POP_REPLICATE;
  u.backward = 1;
  RP_EXPECT(rp_launch_dist_parallel(rt, &u, &e), RP_ETYPE);
  cr_assert_eq(e.id, 0, "no event handed out");
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0, "nothing recorded");
  /* builder: no wait events, and the same checks */
  rp_event user;
  RP_CHECK(rp_event_create(rt, &user));
  rp_op_id id;
  RP_EXPECT(
      rp_graph_add_allreduce(g, &(rp_allreduce){x, RP_REDOP_SUM, user}, &id),
      RP_EINVAL);
  RP_EXPECT(
      rp_graph_add_allreduce(g, &(rp_allreduce){b, RP_REDOP_SUM, {0}}, &id),
      RP_ETYPE);
  RP_EXPECT(rp_graph_add_dist_copy(NULL, &c, &id), RP_EINVAL);
  RP_EXPECT(rp_graph_add_dist_copy(
                g, &(rp_dist_copy){.src = x, .dst = y, .src_rank = 3}, &id),
            RP_ERANGE);
  cr_assert_eq(rp_graph_op_count(g), 0);
  RP_CHECK(rp_event_trigger(rt, user));
  RP_CHECK(rp_event_release(rt, user));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(dist, builder_keeps_communication_in_order) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 7));
  rp_inst y = make(rt, RP_F32, rp_rect_1d(0, 7));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b;
  RP_CHECK(
      rp_graph_add_allreduce(g, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &a));
  /* no data dependence on x: the order comes from the chain */
  RP_CHECK(
      rp_graph_add_allreduce(g, &(rp_allreduce){y, RP_REDOP_SUM, {0}}, &b));
  cr_assert(rp_graph_depends(g, a, b), "the second follows the first");
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event e;
  RP_CHECK(rp_replay(ex, NULL, &e));
  wait_ok(rt, e);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A communication task launched by name with foreign arguments fails
 * cleanly, eager and at instantiate. */
Test(dist, foreign_arguments_are_refused) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_event first;
  RP_CHECK(
      rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &first));
  wait_ok(rt, first);
  rp_task_id id;
  RP_CHECK(rp_task_find(rt, "rp.dist.send", &id));
  int junk = 42;
  rp_launch l = {
      .task = id, .proc = RP_PROC_ANY, .args = &junk, .args_size = sizeof junk};
  rp_event e;
  RP_CHECK(rp_launch_task(rt, &l, &e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_EINVAL);
  RP_CHECK(rp_event_release(rt, e));
  refused_at_instantiate(rt, &l, "rp.dist.send");
  /* well-formed, but a send from rank 0 to rank 1: not this job's (a graph
   * file recorded on another rank or job) */
  rp_inst y = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_dist_args a = {.magic = RP_DIST_ARGS_MAGIC,
                    .role = RP_DIST_SEND,
                    .src_rank = 0,
                    .dst_rank = 1,
                    .dtype = RP_F32,
                    .dom = rp_rect_1d(0, 3)};
  rp_access acc[2] = {{y, RP_READ, 0}, {x, RP_RW, 0}};
  l = (rp_launch){.task = id,
                  .proc = RP_PROC_ANY,
                  .args = &a,
                  .args_size = sizeof a,
                  .accesses = acc,
                  .naccess = 2};
  RP_CHECK(rp_launch_task(rt, &l, &e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_EINVAL);
  RP_CHECK(rp_event_release(rt, e));
  /* a rectangle outside its instances (fresh ones: the failed op above
   * would poison ops that depend on it) */
  rp_inst u = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_inst w = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_inst t = make(rt, RP_U8, rp_rect_1d(0, 0));
  a.role = RP_DIST_SELF;
  a.dst_rank = 0;
  a.dom = rp_rect_1d(0, 9);
  rp_access acc3[3] = {{u, RP_READ, 0}, {w, RP_WRITE, 0}, {t, RP_RW, 0}};
  RP_CHECK(rp_task_find(rt, "rp.dist.copy", &l.task));
  l.accesses = acc3;
  l.naccess = 3;
  RP_CHECK(rp_launch_task(rt, &l, &e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_ESHAPE);
  RP_CHECK(rp_event_release(rt, e));
  th_destroy(rt);
}

/* A local copy launched by name (or loaded from a graph file) whose two
 * sides are one instance is refused, as rp_launch_dist_copy refuses it:
 * eager (nothing written) and at instantiate. */
Test(dist, a_local_copy_by_name_into_its_own_source_is_refused) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 3));
  rp_inst t = make(rt, RP_U8, rp_rect_1d(0, 0));
  rp_event first;
  RP_CHECK(
      rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &first));
  wait_ok(rt, first);
  fill(rt, x, 4, 1.0f);
  rp_dist_args a = {.magic = RP_DIST_ARGS_MAGIC,
                    .role = RP_DIST_SELF,
                    .redop = RP_REDOP_SUM,
                    .dtype = RP_F32,
                    .dom = rp_rect_1d(0, 3)};
  rp_access acc[3] = {{x, RP_READ, 0}, {x, RP_RW, 0}, {t, RP_RW, 0}};
  rp_launch l = {.proc = RP_PROC_ANY,
                 .args = &a,
                 .args_size = sizeof a,
                 .accesses = acc,
                 .naccess = 3};
  RP_CHECK(rp_task_find(rt, "rp.dist.copy", &l.task));
  rp_event e;
  RP_CHECK(rp_launch_task(rt, &l, &e));
  RP_EXPECT(rp_event_wait(rt, e, -1), RP_EINVAL);
  RP_CHECK(rp_event_release(rt, e));
  cr_assert(strstr(rp_runtime_dist_detail(rt), "overlap") ||
                strstr(rp_error_detail(), "overlap"),
            "%s / %s", rp_runtime_dist_detail(rt), rp_error_detail());
  float v[4];
  read_f(rt, x, v, 4);
  for (int k = 0; k < 4; k++)
    cr_assert_eq(v[k], 1.0f + (float)k, "eager: element %d written", k);
  rp_inst y = make(rt, RP_F32, rp_rect_1d(0, 3)); /* x is poisoned now */
  fill(rt, y, 4, 1.0f);
  acc[0].inst = acc[1].inst = y;
  refused_at_instantiate(rt, &l, "overlap");
  read_f(rt, y, v, 4);
  for (int k = 0; k < 4; k++)
    cr_assert_eq(v[k], 1.0f + (float)k, "element %d written", k);
  th_destroy(rt);
}

Test(dist, a_communicator_needs_mpi) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  long fake_comm = 0;
  cfg.comm = &fake_comm;
  rp_runtime *rt = NULL;
#ifdef REPRISE_HAVE_MPI
  /* MPI is built in but this process never initialized it */
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "MPI_THREAD_MULTIPLE"), "%s",
            rp_error_detail());
#else
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_EUNSUPPORTED);
#endif
  cr_assert_null(rt);
}

Test(dist, timeout_from_the_environment_is_checked) {
  setenv("REPRISE_DIST_TIMEOUT_MS", "0", 1);
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.quiet = 1;
  rp_runtime *rt = NULL;
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "REPRISE_DIST_TIMEOUT_MS"));
  setenv("REPRISE_DIST_TIMEOUT_MS", "250", 1);
  RP_CHECK(rp_runtime_create(&cfg, &rt));
  th_destroy(rt);
  unsetenv("REPRISE_DIST_TIMEOUT_MS");
}

#ifdef REPRISE_HAVE_CJSON
/* g copies x (8 f32) into y: x filled with 1..8, one replay of g leaves
 * y the same. */
static void replay_copies_ramp(rp_runtime *rt, rp_graph *g, rp_inst x,
                               rp_inst y) {
  fill(rt, x, 8, 1.0f);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event e;
  RP_CHECK(rp_replay(ex, NULL, &e));
  wait_ok(rt, e);
  float v[8];
  read_f(rt, y, v, 8);
  for (int k = 0; k < 8; k++)
    cr_assert_eq(v[k], 1.0f + (float)k);
  RP_CHECK(rp_exec_destroy(ex));
}

/* A graph with communication saved and loaded (tasks by name, the token
 * instance in the table) instantiates and replays. */
Test(dist, graph_files_carry_communication_ops) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 7));
  rp_inst y = make(rt, RP_F32, rp_rect_1d(0, 7));
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(
      rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL));
  RP_CHECK(rp_launch_dist_copy(rt, &(rp_dist_copy){.src = x, .dst = y}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  char path[] = "/tmp/rp_dist_graph_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  RP_CHECK(rp_graph_save(g, path));
  uint32_t n = 0;
  RP_CHECK(rp_graph_instances(g, NULL, 0, &n));
  rp_inst insts[4];
  cr_assert_eq(n, 3, "x, the token, y");
  RP_CHECK(rp_graph_instances(g, insts, 4, &n));
  rp_graph *h;
  RP_CHECK(rp_graph_load(rt, path, insts, n, &h));
  unlink(path);
  replay_copies_ramp(rt, h, x, y);
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A communication op is planned once at instantiate from its recorded
 * arguments: no replay reads an interpolation of them, so one is refused
 * (RP_EINVAL naming the task), by rp_graph_add_interp (the op unchanged:
 * it still replays as the copy it was) and in a graph file (the op named
 * by its path), not accepted and silently never applied. */
Test(dist, an_interpolation_of_a_communication_op_is_refused) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst x = make(rt, RP_F32, rp_rect_1d(0, 7));
  rp_inst y = make(rt, RP_F32, rp_rect_1d(0, 7));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id id;
  RP_CHECK(rp_graph_add_dist_copy(g, &(rp_dist_copy){.src = x, .dst = y}, &id));
  const char *want = "task 'rp.dist.copy' is a communication op: its "
                     "arguments are the library's, planned once at "
                     "instantiate, so no interpolation applies";
  RP_EXPECT(rp_graph_add_interp(g, id, &(rp_interp){0, 0, 4}), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_graph_add_interp: "), "%s",
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  replay_copies_ramp(rt, g, x, y);
  /* a file whose communication op has an interpolation (edited: no
   * checksum) */
  char path[] = "/tmp/rp_dist_interp_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  RP_CHECK(rp_graph_save(g, path));
  size_t len = 0;
  char *text = th_read_all(path, &len);
  unlink(path);
  char *sum = strstr(text, "\"checksum\"");
  char *sum_end = sum ? strchr(sum, '\n') : NULL;
  char *at = strstr(text, "\"interps\":\t[]");
  cr_assert(sum_end && at && sum_end < at, "%s", text);
  const char *ip = "\"interps\": [{\"src\": 0, \"dst\": 0, \"bytes\": 4}]";
  char *edited = malloc(len + strlen(ip) + 1);
  size_t k = 0;
  memcpy(edited, text, (size_t)(sum - text)); /* up to the checksum */
  k += (size_t)(sum - text);
  memcpy(edited + k, sum_end + 1, (size_t)(at - sum_end - 1));
  k += (size_t)(at - sum_end - 1);
  memcpy(edited + k, ip, strlen(ip));
  k += strlen(ip);
  const char *rest = at + strlen("\"interps\":\t[]");
  memcpy(edited + k, rest, len - (size_t)(rest - text));
  k += len - (size_t)(rest - text);
  rp_inst insts[3];
  uint32_t n = 0;
  RP_CHECK(rp_graph_instances(g, insts, 3, &n));
  rp_graph *h = NULL;
  rp_status st = rp_graph_load_mem(rt, edited, k, insts, n, 0, &h);
  cr_assert_eq(st, RP_EINVAL, "%s (%s)", rp_status_name(st), rp_error_detail());
  cr_assert_null(h);
  cr_assert(strstr(rp_error_detail(), "graph.ops[0]"), "%s", rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  free(edited);
  free(text);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}
#endif

/* A copy between ranks moves host memory: on a model of a machine with a
 * GPU, recording one from or into a GPU instance is refused (RP_EACCESS
 * naming the call and the side), nothing recorded; between two host
 * instances of the model (no storage) it records, and so does a parallel
 * operator's copy of the root's own part. */
Test(dist, a_copy_between_ranks_of_a_gpu_instance_is_refused_by_side) {
  rp_machine_desc m = {.cpus = 1, .ngpus = 1, .gpu_device = {0}, .nmems = 1};
  m.mems[0] = (rp_mem_info){RP_MEM_GPU, 0};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_mem gm = RP_MEM_CALLER;
  for (rp_mem k = 0; k < 8; k++) {
    rp_mem_info mi;
    if (rp_mem_query(rt, k, &mi) == RP_OK && mi.kind == RP_MEM_GPU)
      gm = k;
  }
  cr_assert_neq(gm, RP_MEM_CALLER, "the model has no GPU memory");
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst gi, hi, h2;
  RP_CHECK(rp_instance_create(rt, gm, RP_F32, &r, NULL, &gi));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &hi));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &h2));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id id = 77;
  RP_EXPECT(
      rp_graph_add_dist_copy(g, &(rp_dist_copy){.src = gi, .dst = hi}, &id),
      RP_EACCESS);
  cr_assert_str_eq(rp_error_detail(),
                   "rp_graph_add_dist_copy: source instance is in GPU memory; "
                   "cross-rank copies need host memory");
  RP_EXPECT(
      rp_graph_add_dist_copy(g, &(rp_dist_copy){.src = hi, .dst = gi}, &id),
      RP_EACCESS);
  cr_assert_str_eq(rp_error_detail(),
                   "rp_graph_add_dist_copy: destination instance is in GPU "
                   "memory; cross-rank copies need host memory");
  cr_assert_eq(id, 77, "*out written on error");
  cr_assert_eq(rp_graph_op_count(g), 0, "recorded on error");
  /* a model's instances have no storage: none overlaps another (the
   * copy was refused as "whose bytes overlap in memory") */
  RP_CHECK(
      rp_graph_add_dist_copy(g, &(rp_dist_copy){.src = hi, .dst = h2}, &id));
  cr_assert_eq(rp_graph_op_count(g), 1);
  RP_CHECK(rp_graph_destroy(g));
  /* nor does a parallel operator's root part, recorded */
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event e;
  RP_CHECK(rp_launch_dist_parallel(
      rt,
      &(rp_dist_parallel){.kind = RP_POP_REPLICATE, .whole = hi, .part = h2},
      &e));
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_gt(rp_graph_op_count(g), 0);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}
