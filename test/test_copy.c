/* Copies and parallel operators through the launch API: eager, recorded and
 * replayed, built, on 1-4 workers. (The descriptors themselves are tested in
 * test_xfer.c.) */
#include "helpers.h"

#include <string.h>
#include <time.h>

static rp_inst mk(rp_runtime *rt, rp_dtype t, rp_rect r) {
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, 0, t, &r, NULL, &i));
  return i;
}

static void fill_f64(rp_runtime *rt, rp_inst i, double base) {
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, i, &info));
  int64_t n = rp_rect_volume(&info.rect);
  double *v = malloc(sizeof *v * (size_t)n);
  for (int64_t k = 0; k < n; k++)
    v[k] = base + (double)k;
  RP_CHECK(rp_instance_write(rt, i, v, sizeof *v * (size_t)n));
  free(v);
}

static double *read_f64(rp_runtime *rt, rp_inst i, int64_t *n) {
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, i, &info));
  *n = rp_rect_volume(&info.rect);
  double *v = malloc(sizeof *v * (size_t)*n);
  RP_CHECK(rp_instance_read(rt, i, v, sizeof *v * (size_t)*n));
  return v;
}

Test(copy, eager_copy_moves_the_intersection) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst a = mk(rt, RP_F64, rp_rect_1d(0, 9));
  rp_inst b = mk(rt, RP_F64, rp_rect_1d(5, 14)); /* global coords 5..14 */
  fill_f64(rt, a, 100);
  rp_event done;
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  int64_t n;
  double *v = read_f64(rt, b, &n);
  for (int k = 0; k < 5; k++)
    cr_assert_eq(v[k], 105.0 + k, "global point %d", 5 + k);
  for (int k = 5; k < 10; k++)
    cr_assert_eq(v[k], 0.0, "outside the intersection");
  free(v);
  rp_event_release(rt, done);
  /* bad copies are rejected before anything runs */
  rp_inst c = mk(rt, RP_F32, rp_rect_1d(0, 9));
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = c}, NULL), RP_ETYPE);
  rp_inst far = mk(rt, RP_F64, rp_rect_1d(50, 59));
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = far}, NULL),
            RP_ESHAPE);
  RP_EXPECT(rp_launch_copy(
                rt, &(rp_copy){.src = a, .dst = b, .redop = (rp_redop)9}, NULL),
            RP_EINVAL);
  rp_inst gone = c;
  RP_CHECK(rp_instance_free(rt, c));
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = gone}, NULL),
            RP_ESTALE);
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  RP_CHECK(rp_instance_free(rt, far));
  th_destroy(rt);
}

/* Every operator, both directions, eager and replayed, on 1-4 workers:
 * the replayed values equal the eager ones exactly, and both equal the
 * operator's definition. */
typedef struct pop_case {
  rp_pop_kind kind;
  int bwd;
} pop_case;

static void check_pop(rp_runtime *rt, rp_inst whole, rp_inst *parts, uint32_t n,
                      pop_case pc, const rp_rect *wr) {
  int64_t wn;
  double *w = read_f64(rt, whole, &wn);
  int gather = (pc.kind == RP_POP_REPARTITION && pc.bwd) ||
               (pc.kind == RP_POP_COMBINE && !pc.bwd);
  int scatter = (pc.kind == RP_POP_REPARTITION && !pc.bwd) ||
                (pc.kind == RP_POP_COMBINE && pc.bwd);
  int sum = (pc.kind == RP_POP_REPLICATE && pc.bwd) ||
            (pc.kind == RP_POP_REDUCTION && !pc.bwd);
  for (uint32_t i = 0; i < n; i++) {
    int64_t pn;
    double *p = read_f64(rt, parts[i], &pn);
    rp_instance_info info;
    RP_CHECK(rp_instance_query(rt, parts[i], &info));
    for (int64_t k = 0; k < pn; k++) {
      /* row-major 2D: global index of the part's k-th point */
      int64_t cols = wr->hi[1] - wr->lo[1] + 1;
      int64_t pcols = info.rect.hi[1] - info.rect.lo[1] + 1;
      int64_t row = info.rect.lo[0] + k / pcols,
              col = info.rect.lo[1] + k % pcols;
      int64_t gk = row * cols + col;
      if (gather || scatter)
        cr_assert_eq(p[k], w[gk], "part %u point %lld", i, (long long)k);
      else if (!sum) /* broadcast */
        cr_assert_eq(p[k], w[k], "replica %u point %lld", i, (long long)k);
    }
    free(p);
  }
  if (sum)
    for (int64_t k = 0; k < wn; k++) {
      double want = 0;
      for (uint32_t i = 0; i < n; i++)
        want += 1000.0 * (i + 1) + (double)k; /* see fill below */
      cr_assert_eq(w[k], want, "sum at %lld", (long long)k);
    }
  free(w);
}

static void run_pop(unsigned workers, uint32_t nparts, pop_case pc,
                    int replay) {
  rp_runtime *rt = th_cpu_runtime(workers);
  rp_rect wr = rp_rect_2d(0, 9, 0, 6); /* 10 x 7: uneven splits */
  rp_inst whole = mk(rt, RP_F64, wr);
  rp_inst parts[4];
  int split = pc.kind == RP_POP_REPARTITION || pc.kind == RP_POP_COMBINE;
  for (uint32_t i = 0; i < nparts; i++) {
    rp_rect pr = wr;
    if (split)
      RP_CHECK(rp_chunk_rect(&wr, 0, nparts, i, &pr));
    parts[i] = mk(rt, RP_F64, pr);
  }
  /* inputs: the whole for scatter/broadcast, the parts otherwise */
  int from_parts = (pc.kind == RP_POP_REPLICATE && pc.bwd) ||
                   (pc.kind == RP_POP_REDUCTION && !pc.bwd) ||
                   (pc.kind == RP_POP_REPARTITION && pc.bwd) ||
                   (pc.kind == RP_POP_COMBINE && !pc.bwd);
  if (from_parts)
    for (uint32_t i = 0; i < nparts; i++) {
      if (split) { /* each part holds the whole's values at its points */
        int64_t n;
        rp_instance_info info;
        RP_CHECK(rp_instance_query(rt, parts[i], &info));
        n = rp_rect_volume(&info.rect);
        double *v = malloc(sizeof *v * (size_t)n);
        for (int64_t k = 0; k < n; k++)
          v[k] = (double)(info.rect.lo[0] * 7 + k) + 0.5;
        RP_CHECK(rp_instance_write(rt, parts[i], v, sizeof *v * (size_t)n));
        free(v);
      } else {
        fill_f64(rt, parts[i], 1000.0 * (i + 1));
      }
    }
  else
    fill_f64(rt, whole, 3.25);
  rp_parallel_op op = {.kind = pc.kind,
                       .backward = pc.bwd,
                       .whole = whole,
                       .parts = parts,
                       .nparts = nparts,
                       .dim = 0};
  if (!replay) {
    rp_event done;
    RP_CHECK(rp_launch_parallel(rt, &op, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
  } else {
    RP_CHECK(rp_capture_begin(rt, NULL));
    RP_CHECK(rp_launch_parallel(rt, &op, NULL));
    rp_graph *g;
    RP_CHECK(rp_capture_end(rt, &g));
    cr_assert_eq(rp_graph_op_count(g), nparts, "one copy per part");
    rp_exec *ex;
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  check_pop(rt, whole, parts, nparts, pc, &wr);
  RP_CHECK(rp_instance_free(rt, whole));
  for (uint32_t i = 0; i < nparts; i++)
    RP_CHECK(rp_instance_free(rt, parts[i]));
  th_destroy(rt);
}

Test(copy, every_parallel_operator_both_ways_eager_and_replayed) {
  static const pop_case cases[] = {
      {RP_POP_REPLICATE, 0},   {RP_POP_REPLICATE, 1}, {RP_POP_REPARTITION, 0},
      {RP_POP_REPARTITION, 1}, {RP_POP_COMBINE, 0},   {RP_POP_COMBINE, 1},
      {RP_POP_REDUCTION, 0},   {RP_POP_REDUCTION, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (unsigned workers = 1; workers <= 4; workers++)
      for (uint32_t parts = 1; parts <= 4; parts++)
        for (int replay = 0; replay < 2; replay++)
          run_pop(workers, parts, cases[c], replay);
}

/* A task that sleeps `ms` (its argument), then writes its value: a part
 * produced late. */
typedef struct slow_fill_args {
  int ms;
  float v;
} slow_fill_args;

static rp_status slow_fill(rp_task_ctx *ctx) {
  const slow_fill_args *a = rp_ctx_args(ctx, NULL);
  struct timespec ts = {0, (long)a->ms * 1000000L};
  nanosleep(&ts, NULL);
  float *p = rp_ctx_ptr(ctx, 0);
  int64_t n = rp_rect_volume(&rp_ctx_inst(ctx, 0)->rect);
  for (int64_t k = 0; k < n; k++)
    p[k] = a->v;
  return RP_OK;
}

/* A float sum of four parts is ((p0 + p1) + p2) + p3 whichever part is
 * ready first: eager, recorded and replayed, and built. Part 1 comes 30 ms
 * after the others; 1e8 - 1e8 + 1 + 1 is 2 in part order and 0 when part
 * 1 (-1e8) is added last (1e8 + 1 rounds to 1e8 in f32). */
Test(copy, sums_of_parts_run_in_part_order_whatever_is_ready_first) {
  rp_runtime *rt = th_cpu_runtime(4);
  rp_task_id fill;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "slow_fill", .cpu_fn = slow_fill}, &fill));
  rp_rect r = rp_rect_1d(0, 63);
  static const float vals[4] = {1e8f, -1e8f, 1.0f, 1.0f};
  for (int mode = 0; mode < 3; mode++) { /* eager, recorded, built */
    rp_inst whole = mk(rt, RP_F32, r), parts[4];
    for (int i = 0; i < 4; i++)
      parts[i] = mk(rt, RP_F32, r);
    rp_graph *g = NULL;
    if (mode == 1)
      RP_CHECK(rp_capture_begin(rt, NULL));
    if (mode == 2)
      RP_CHECK(rp_graph_create(rt, &g));
    rp_op_id fills[4], first = 0;
    for (int i = 0; i < 4; i++) {
      slow_fill_args a = {i == 1 ? 30 : 0, vals[i]};
      rp_access acc = {.inst = parts[i], .priv = RP_WRITE};
      rp_launch l = {.task = fill,
                     .proc = RP_PROC_ANY,
                     .accesses = &acc,
                     .naccess = 1,
                     .args = &a,
                     .args_size = sizeof a};
      if (mode == 2)
        RP_CHECK(rp_graph_add_task(g, &l, &fills[i]));
      else
        RP_CHECK(rp_launch_task(rt, &l, NULL));
    }
    rp_parallel_op op = {
        .kind = RP_POP_REDUCTION, .whole = whole, .parts = parts, .nparts = 4};
    uint32_t count = 0;
    if (mode == 2) {
      RP_CHECK(rp_graph_add_parallel(g, &op, &first, &count));
      for (uint32_t i = 0; i < 4; i++)
        RP_CHECK(rp_graph_add_edge(g, fills[i], first + i));
    } else {
      RP_CHECK(rp_launch_parallel(rt, &op, NULL));
      first = 4; /* recorded: after the 4 fills */
    }
    if (mode == 1)
      RP_CHECK(rp_capture_end(rt, &g));
    if (g) {
      for (uint32_t i = 1; i < 4; i++) /* a chain of the copies */
        cr_assert(rp_graph_depends(g, (rp_op_id)(first + i - 1),
                                   (rp_op_id)(first + i)),
                  "mode %d: copy %u does not follow copy %u", mode, i, i - 1);
      rp_exec *ex;
      RP_CHECK(rp_instantiate(g, NULL, &ex));
      for (int rep = 0; rep < 3; rep++) {
        rp_event done;
        RP_CHECK(rp_replay(ex, NULL, &done));
        RP_CHECK(rp_event_wait(rt, done, -1));
        rp_event_release(rt, done);
        float *w = rp_instance_ptr(rt, whole);
        cr_assert_eq(w[0], 2.0f, "mode %d replay %d: %g", mode, rep, w[0]);
      }
      RP_CHECK(rp_exec_destroy(ex));
      RP_CHECK(rp_graph_destroy(g));
    } else {
      RP_CHECK(rp_runtime_drain(rt));
      float *w = rp_instance_ptr(rt, whole);
      cr_assert_eq(w[0], 2.0f, "eager: %g", w[0]);
    }
    RP_CHECK(rp_instance_free(rt, whole));
    for (int i = 0; i < 4; i++)
      RP_CHECK(rp_instance_free(rt, parts[i]));
  }
  th_destroy(rt);
}

/* Reductions of several parts into one destination, replayed many times on
 * several workers: the sums stay exact (the SUM copies run in part order
 * after the plain first copy). */
Test(copy, replayed_reduction_is_exact_every_replay) {
  rp_runtime *rt = th_cpu_runtime(4);
  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst whole = mk(rt, RP_I64, r), parts[4];
  for (int i = 0; i < 4; i++) {
    parts[i] = mk(rt, RP_I64, r);
    int64_t *p = rp_instance_ptr(rt, parts[i]);
    for (int k = 0; k < 4096; k++)
      p[k] = (int64_t)(i + 1) * 1000 + k;
  }
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_parallel(rt,
                              &(rp_parallel_op){.kind = RP_POP_REDUCTION,
                                                .whole = whole,
                                                .parts = parts,
                                                .nparts = 4},
                              NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int rep = 0; rep < 50; rep++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    int64_t *w = rp_instance_ptr(rt, whole);
    for (int k = 0; k < 4096; k++)
      cr_assert_eq(w[k], 10000 + 4 * k, "replay %d point %d", rep, k);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, whole));
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_free(rt, parts[i]));
  th_destroy(rt);
}

/* A reduction of N parts, then a replicate of the whole back into them (an
 * all-reduce): each reader waits for the end of the chained sums, not for
 * every sum, so the capture has O(N) edges (it had N^2), every sum still
 * precedes every reader, and eager and replayed results are the sum. */
Test(copy, all_reduce_of_many_parts_has_linear_edges) {
  enum { NP = 256 };
  rp_runtime *rt = th_cpu_runtime(2);
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst whole = mk(rt, RP_I64, r), parts[NP];
  for (int i = 0; i < NP; i++)
    parts[i] = mk(rt, RP_I64, r);
  rp_parallel_op red = {
      .kind = RP_POP_REDUCTION, .whole = whole, .parts = parts, .nparts = NP};
  rp_parallel_op rep = {
      .kind = RP_POP_REPLICATE, .whole = whole, .parts = parts, .nparts = NP};
  for (int mode = 0; mode < 2; mode++) { /* eager, then replayed */
    for (int i = 0; i < NP; i++) {
      int64_t *p = rp_instance_ptr(rt, parts[i]);
      for (int k = 0; k < 8; k++)
        p[k] = i + k;
    }
    rp_graph *g = NULL;
    if (mode == 1)
      RP_CHECK(rp_capture_begin(rt, NULL));
    RP_CHECK(rp_launch_parallel(rt, &red, NULL));
    RP_CHECK(rp_launch_parallel(rt, &rep, NULL));
    if (mode == 1) {
      RP_CHECK(rp_capture_end(rt, &g));
      cr_assert_eq(rp_graph_op_count(g), 2 * NP);
      cr_assert_leq(rp_graph_edge_count(g), 4 * NP, "%u edges",
                    rp_graph_edge_count(g));
      for (uint32_t s = 0; s < NP; s += 51)
        for (uint32_t d = 0; d < NP; d += 37)
          cr_assert(rp_graph_depends(g, s, NP + d),
                    "sum %u does not precede reader %u", s, d);
      rp_exec *ex;
      RP_CHECK(rp_instantiate(g, NULL, &ex));
      rp_event done;
      RP_CHECK(rp_replay(ex, NULL, &done));
      RP_CHECK(rp_event_wait(rt, done, -1));
      rp_event_release(rt, done);
      RP_CHECK(rp_exec_destroy(ex));
      RP_CHECK(rp_graph_destroy(g));
    }
    RP_CHECK(rp_runtime_drain(rt));
    for (int i = 0; i < NP; i += 17) {
      const int64_t *p = rp_instance_ptr(rt, parts[i]);
      for (int k = 0; k < 8; k++)
        cr_assert_eq(p[k], NP * (NP - 1) / 2 + (int64_t)NP * k,
                     "mode %d part %d [%d]: %lld", mode, i, k, (long long)p[k]);
    }
  }
  RP_CHECK(rp_instance_free(rt, whole));
  for (int i = 0; i < NP; i++)
    RP_CHECK(rp_instance_free(rt, parts[i]));
  th_destroy(rt);
}

/* In a capture, a parallel operator's reference stands for all its copies
 * (as the eager *done merges them): a wait on it orders after every copy,
 * and a postcondition on it binds every copy. */
Test(copy, a_recorded_parallel_operators_reference_covers_every_copy) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_rect whole = rp_rect_1d(0, 7);
  rp_inst w = mk(rt, RP_F64, whole), parts[3];
  for (int i = 0; i < 3; i++)
    parts[i] = mk(rt, RP_F64, whole);
  rp_inst other = mk(rt, RP_F64, whole);
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event ref;
  RP_CHECK(rp_launch_parallel(
      rt,
      &(rp_parallel_op){
          .kind = RP_POP_REPLICATE, .whole = w, .parts = parts, .nparts = 3},
      &ref));
  /* it reads part 0 (an inferred edge from copy 0) and waits for the
   * operator: ordered after every copy, each edge once */
  RP_CHECK(rp_launch_copy(
      rt, &(rp_copy){.src = parts[0], .dst = other, .wait = ref}, NULL));
  uint32_t port;
  RP_CHECK(rp_capture_postcondition(rt, "replicated", &ref, 1, &port));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 4);
  for (rp_op_id i = 0; i < 3; i++)
    cr_assert(rp_graph_depends(g, i, 3), "copy %u does not precede the wait",
              i);
  cr_assert_eq(rp_graph_edge_count(g), 3, "one edge per copy, no duplicate");
  rp_op_id bound[4];
  uint32_t n;
  RP_CHECK(rp_graph_postcondition_ops(g, port, bound, 4, &n));
  cr_assert_eq(n, 3, "the postcondition binds %u ops", n);
  for (uint32_t i = 0; i < n; i++)
    cr_assert_eq(bound[i], i);
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_instance_free(rt, parts[i]));
  RP_CHECK(rp_instance_free(rt, w));
  RP_CHECK(rp_instance_free(rt, other));
  th_destroy(rt);
}

/* Errors name the call the caller made, not the library's internal use of
 * another public call (rp_xfer_plan, rp_xfer_expand_parallel). */
Test(copy, errors_name_the_call_made) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst a = mk(rt, RP_F64, r), b = mk(rt, RP_F64, r),
          gone = mk(rt, RP_F64, r);
  RP_CHECK(rp_instance_free(rt, gone));
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = gone, .dst = b}, NULL),
            RP_ESTALE);
  cr_assert(!strncmp(rp_error_detail(), "rp_launch_copy: ", 16) &&
                !strstr(rp_error_detail(), "rp_xfer_plan"),
            "%s", rp_error_detail());
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_EXPECT(rp_graph_add_copy(g, &(rp_copy){.src = gone, .dst = b}, NULL),
            RP_ESTALE);
  cr_assert(!strncmp(rp_error_detail(), "rp_graph_add_copy: ", 19), "%s",
            rp_error_detail());
  static rp_inst many[5000];
  for (int i = 0; i < 5000; i++)
    many[i] = b;
  RP_EXPECT(rp_launch_parallel(rt,
                               &(rp_parallel_op){.kind = RP_POP_REPLICATE,
                                                 .whole = a,
                                                 .parts = many,
                                                 .nparts = 5000},
                               NULL),
            RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_launch_parallel: replicate "
                                      "operator with 5000 parts"),
            "%s", rp_error_detail());
  rp_inst parts[2] = {b, gone};
  RP_EXPECT(rp_graph_add_parallel(g,
                                  &(rp_parallel_op){.kind = RP_POP_REPLICATE,
                                                    .whole = a,
                                                    .parts = parts,
                                                    .nparts = 2},
                                  NULL, NULL),
            RP_ESTALE);
  cr_assert(!strncmp(rp_error_detail(), "rp_graph_add_parallel: ", 23) &&
                !strstr(rp_error_detail(), "rp_xfer_"),
            "%s", rp_error_detail());
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* A sum of parts (reduction forward, replicate backward) of a type a sum
 * cannot take is refused whatever the part count: one part, a plain copy,
 * too, as the same operator over two parts is (eager, recorded, built). */
Test(copy, a_sum_of_u8_parts_is_refused_even_over_one_part) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst w = mk(rt, RP_U8, r), p[2] = {mk(rt, RP_U8, r), mk(rt, RP_U8, r)};
  uint8_t before[4] = {7, 7, 7, 7}, after[4];
  RP_CHECK(rp_instance_write(rt, w, before, sizeof before));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (uint32_t n = 1; n <= 2; n++)
    for (int k = 0; k < 2; k++) {
      rp_parallel_op op = {.kind = k ? RP_POP_REPLICATE : RP_POP_REDUCTION,
                           .backward = k,
                           .whole = w,
                           .parts = p,
                           .nparts = n};
      RP_EXPECT(rp_launch_parallel(rt, &op, NULL), RP_ETYPE);
      cr_assert(strstr(rp_error_detail(), "sums its parts, which are u8"),
                "%u parts: %s", n, rp_error_detail());
      RP_EXPECT(rp_graph_add_parallel(g, &op, NULL, NULL), RP_ETYPE);
      RP_CHECK(rp_capture_begin(rt, NULL));
      RP_EXPECT(rp_launch_parallel(rt, &op, NULL), RP_ETYPE);
      RP_CHECK(rp_capture_abort(rt));
      /* the other direction moves bytes only: u8 is fine */
      op.backward = !op.backward;
      rp_event done;
      RP_CHECK(rp_launch_parallel(rt, &op, &done));
      RP_CHECK(rp_event_wait(rt, done, -1));
      RP_CHECK(rp_event_release(rt, done));
      RP_CHECK(rp_instance_write(rt, w, before, sizeof before));
    }
  cr_assert_eq(rp_graph_op_count(g), 0);
  RP_CHECK(rp_instance_read(rt, w, after, sizeof after));
  cr_assert(!memcmp(before, after, sizeof after));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A RECT domain that is empty, or has another dimension count than the
 * instances, is refused saying which of the two it is. */
Test(copy, a_bad_rect_domain_says_whether_it_is_empty_or_of_other_dims) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst a = mk(rt, RP_F64, rp_rect_2d(0, 3, 0, 3)),
          b = mk(rt, RP_F64, rp_rect_2d(0, 3, 0, 3));
  RP_EXPECT(rp_launch_copy(rt,
                           &(rp_copy){.src = a,
                                      .dst = b,
                                      .domain = RP_DOMAIN_RECT,
                                      .rect = rp_rect_2d(2, 1, 0, 0)},
                           NULL),
            RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(),
                   "rp_launch_copy: domain RECT [2..1, 0..0] is empty") &&
                !strstr(rp_error_detail(), "dims"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_launch_copy(rt,
                           &(rp_copy){.src = a,
                                      .dst = b,
                                      .domain = RP_DOMAIN_RECT,
                                      .rect = rp_rect_1d(0, 1)},
                           NULL),
            RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp_launch_copy: domain RECT [0..1] "
                                      "has 1 dims, the instances have 2"),
            "%s", rp_error_detail());
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* An eager copy's wait event must be live and no captured op's reference:
 * each is refused naming the call and the event, and nothing is copied. */
Test(copy, an_eager_copys_bad_wait_event_is_refused) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst a = mk(rt, RP_F64, r), b = mk(rt, RP_F64, r);
  fill_f64(rt, a, 1);
  rp_event ev;
  RP_CHECK(rp_event_create(rt, &ev));
  RP_CHECK(rp_event_trigger(rt, ev));
  RP_CHECK(rp_event_release(rt, ev));
  RP_EXPECT(
      rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b, .wait = ev}, NULL),
      RP_ESTALE);
  char want[128];
  snprintf(want, sizeof want, "rp_launch_copy: wait event %#llx is stale",
           (unsigned long long)ev.id);
  cr_assert_str_eq(rp_error_detail(), want);

  rp_event ref;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, &ref));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  RP_EXPECT(
      rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b, .wait = ref}, NULL),
      RP_ECAPTURE);
  cr_assert_str_eq(rp_error_detail(),
                   "rp_launch_copy: waits on a captured op reference outside "
                   "its capture");
  RP_CHECK(rp_runtime_drain(rt));
  int64_t n;
  double *v = read_f64(rt, b, &n);
  for (int64_t k = 0; k < n; k++)
    cr_assert_eq(v[k], 0.0, "nothing was copied");
  free(v);
  /* the runtime still copies */
  rp_event done;
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  v = read_f64(rt, b, &n);
  cr_assert_eq(v[7], 8.0);
  free(v);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

Test(copy, builder_copies_and_parallel_ops_replay) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst a = mk(rt, RP_F64, r), b = mk(rt, RP_F64, r), c = mk(rt, RP_F64, r);
  fill_f64(rt, a, 1);
  fill_f64(rt, c, 100);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id c1, first;
  uint32_t count;
  RP_CHECK(rp_graph_add_copy(g, &(rp_copy){.src = a, .dst = b}, &c1));
  rp_inst reps[2] = {c, a};
  /* replicate backward: a + c -> b... use b as the whole: sum of c and a */
  RP_CHECK(rp_graph_add_parallel(
      g,
      &(rp_parallel_op){
          .kind = RP_POP_REDUCTION, .whole = b, .parts = reps, .nparts = 2},
      &first, &count));
  cr_assert_eq(count, 2);
  RP_CHECK(rp_graph_add_edge(g, c1, first));
  /* errors name the problem */
  RP_EXPECT(rp_graph_add_copy(g, &(rp_copy){.src = a, .dst = a}, NULL),
            RP_EINVAL);
  RP_EXPECT(rp_graph_add_copy(
                g, &(rp_copy){.src = a, .dst = b, .wait = (rp_event){5}}, NULL),
            RP_EINVAL);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  rp_event_release(rt, done);
  int64_t n;
  double *v = read_f64(rt, b, &n);
  /* the copy wrote a into b; then the reduction, after it, c + a */
  for (int k = 0; k < 8; k++)
    cr_assert_eq(v[k], (100.0 + k) + (1.0 + k), "b[%d] = %g, not c + a", k,
                 v[k]);
  free(v);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  RP_CHECK(rp_instance_free(rt, c));
  th_destroy(rt);
}

Test(copy, stale_descriptor_moves_no_byte_in_a_replay) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_rect r = rp_rect_1d(0, 15);
  rp_inst a = mk(rt, RP_F64, r), b = mk(rt, RP_F64, r);
  fill_f64(rt, a, 7);
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_instance_realloc(rt, &a)); /* the source goes stale */
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_EXPECT(rp_event_wait(rt, done, -1), RP_ESTALE);
  rp_event_release(rt, done);
  int64_t n;
  double *v = read_f64(rt, b, &n);
  for (int k = 0; k < 16; k++)
    cr_assert_eq(v[k], 0.0, "no byte moved");
  free(v);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* A parallel operator whose parts pass the operator's checks but one of
 * whose copies the planner refuses (a part wrapping the whole's own
 * bytes: source and destination overlap) is refused naming the call, the
 * operator and the copy, before any copy runs or is added. */
Test(copy, a_part_over_the_wholes_own_bytes_is_refused_naming_the_copy) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst whole = mk(rt, RP_F64, rp_rect_1d(0, 7));
  fill_f64(rt, whole, 1.0);
  rp_rect wr = rp_rect_1d(0, 7), r0, r1;
  RP_CHECK(rp_chunk_rect(&wr, 0, 2, 0, &r0));
  RP_CHECK(rp_chunk_rect(&wr, 0, 2, 1, &r1));
  rp_inst p0 = mk(rt, RP_F64, r0), p1;
  fill_f64(rt, p0, 100.0);
  double *w = rp_instance_ptr(rt, whole);
  cr_assert_not_null(w);
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F64, &r1, NULL, w + 4,
                                       4 * sizeof(double), &p1));
  rp_inst parts[2] = {p0, p1};
  rp_parallel_op op = {
      .kind = RP_POP_REPARTITION, .whole = whole, .parts = parts, .nparts = 2};
  const char *calls[2] = {"rp_launch_parallel", "rp_graph_add_parallel"};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int c = 0; c < 2; c++) {
    rp_error_set(RP_EINVAL, "stale");
    rp_event done = {0x5eed};
    rp_op_id first = 77;
    uint32_t n = 77;
    rp_status st = c ? rp_graph_add_parallel(g, &op, &first, &n)
                     : rp_launch_parallel(rt, &op, &done);
    RP_EXPECT(st, RP_EINVAL);
    char want[160];
    snprintf(want, sizeof want,
             "%s: repartition operator, copy 1 of 2: copy %#llx -> %#llx: "
             "the instances' bytes overlap in memory",
             calls[c], (unsigned long long)whole.id, (unsigned long long)p1.id);
    cr_assert(!strncmp(rp_error_detail(), want, strlen(want)), "%s: %s",
              calls[c], rp_error_detail());
    cr_assert_eq(done.id, 0x5eedu, "%s: done was set", calls[c]);
    cr_assert_eq(first, 77u, "%s", calls[c]);
    cr_assert_eq(n, 77u, "%s", calls[c]);
  }
  cr_assert_eq(rp_graph_op_count(g), 0u, "nothing added");
  RP_CHECK(rp_runtime_drain(rt));
  int64_t n;
  double *v = read_f64(rt, p0, &n);
  for (int64_t k = 0; k < n; k++)
    cr_assert_eq(v[k], 100.0 + (double)k, "part 0 element %lld changed",
                 (long long)k);
  free(v);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, p1));
  RP_CHECK(rp_instance_free(rt, p0));
  RP_CHECK(rp_instance_free(rt, whole));
  th_destroy(rt);
}
