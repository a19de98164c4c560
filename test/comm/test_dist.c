/* test/comm/test_dist.c — the distributed layer across ranks, as a plain
 * MPI program (Criterion forks, which MPI does not survive). ctest runs it
 * with `mpiexec -n 2` and `-n 3` (label "dist"). Every case runs on every
 * rank; a failed check prints the rank, the line and why, and aborts the
 * job. The single-process behaviour is in test/test_dist.c (Criterion).
 *
 * Cases: eager all-reduce and cross-rank copies; the four parallel
 * operators across ranks, forward and backward, recorded and replayed (and
 * eager); builder forms; replays in flight back to back (persistent
 * all-reduce and ring copies, values unique per replay); another
 * max_inflight on one rank (refused at instantiate); a stale instance
 * on one rank (RP_ESTALE there, RP_EPEER naming it elsewhere); a receive
 * skipped in a replay on one rank (the exec breaks there: its next replay
 * never takes the skipped one's message); ranks that recorded other
 * steps (the roll call names a rank waiting in instantiate's set-up); MPI
 * finalized before the runtime goes (run last: RP_EINVAL, no abort); a
 * peer that
 * never answers (eager and replayed: RP_EPEER naming it, within the
 * bound); an all-reduce that timed out and completes late (no instance
 * written); an eager all-reduce after a failed one (its detail quotes the
 * earlier failure); which rank checks what in a parallel operator; a
 * data-parallel linear-regression step on N ranks reaching the weights of one
 * process within a stated tolerance; and (2 ranks) the GPT split by tensor
 * parallelism across the ranks against one process of two processors through
 * the model's API (train/gpt.h). */
#include "reprise.h"

#include "comm/comm.h"
#include "kernels/tasks.h"
#include "train/gpt.h"

#include <math.h>
#include <stdatomic.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int RANK, NRANKS;

static void fail(int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rank %d: FAIL at test_dist.c:%d: ", RANK, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CHECK(call)                                                            \
  do {                                                                         \
    rp_status st_ = (call);                                                    \
    if (st_ != RP_OK)                                                          \
      fail(__LINE__, "%s -> %s (%s)", #call, rp_status_name(st_),              \
           rp_error_detail());                                                 \
  } while (0)

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      fail(__LINE__, __VA_ARGS__);                                             \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void done_case(const char *name) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (RANK == 0)
    printf("ok %d ranks: %s\n", NRANKS, name);
  fflush(stdout);
}

/* A CPU runtime of 2 workers on MPI_COMM_WORLD (dist), or of this
 * process alone (the references). */
static rp_runtime *make_rt_on(int dist, uint32_t timeout_ms) {
  static MPI_Comm world;
  world = MPI_COMM_WORLD;
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = 2;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  cfg.comm = dist ? &world : NULL;
  cfg.dist_timeout_ms = timeout_ms;
  rp_runtime *rt = NULL;
  CHECK(rp_runtime_create(&cfg, &rt));
  return rt;
}

static rp_runtime *make_rt(uint32_t timeout_ms) {
  return make_rt_on(1, timeout_ms);
}

static rp_inst inst_2d(rp_runtime *rt, rp_dtype t, int64_t r0, int64_t r1,
                       int64_t c0, int64_t c1) {
  rp_rect r = rp_rect_2d(r0, r1, c0, c1);
  rp_inst i;
  CHECK(rp_instance_create(rt, 0, t, &r, NULL, &i));
  return i;
}

static void wait_ok(rp_runtime *rt, rp_event e) {
  CHECK(rp_event_wait(rt, e, -1));
  CHECK(rp_event_release(rt, e));
}

/* ---- eager ---- */

static void eager_allreduce(void) {
  rp_runtime *rt = make_rt(0);
  EXPECT(rp_runtime_rank(rt) == (uint32_t)RANK, "rank %u", rp_runtime_rank(rt));
  EXPECT(rp_runtime_ranks(rt) == (uint32_t)NRANKS, "ranks %u",
         rp_runtime_ranks(rt));
  const rp_dtype types[] = {RP_F32, RP_F64, RP_I32, RP_I64};
  for (int t = 0; t < 4; t++) {
    rp_inst x = inst_2d(rt, types[t], 0, 2, 0, 3); /* 12 elements */
    double v[12];
    char raw[12 * 8];
    for (int i = 0; i < 12; i++)
      v[i] = RANK * 1000 + i;
    for (int i = 0; i < 12; i++) {
      float f = (float)v[i];
      int32_t a = (int32_t)v[i];
      int64_t b = (int64_t)v[i];
      void *src = types[t] == RP_F32   ? (void *)&f
                  : types[t] == RP_F64 ? (void *)&v[i]
                  : types[t] == RP_I32 ? (void *)&a
                                       : (void *)&b;
      memcpy(raw + i * rp_dtype_size(types[t]), src, rp_dtype_size(types[t]));
    }
    CHECK(rp_instance_write(rt, x, raw, 12 * rp_dtype_size(types[t])));
    rp_event e;
    CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
    wait_ok(rt, e);
    CHECK(rp_instance_read(rt, x, raw, 12 * rp_dtype_size(types[t])));
    for (int i = 0; i < 12; i++) {
      double want = 1000.0 * NRANKS * (NRANKS - 1) / 2 + NRANKS * i, got;
      char *p = raw + i * rp_dtype_size(types[t]);
      float f;
      int32_t a;
      int64_t b;
      switch (types[t]) {
      case RP_F32:
        memcpy(&f, p, 4), got = f;
        break;
      case RP_F64:
        memcpy(&got, p, 8);
        break;
      case RP_I32:
        memcpy(&a, p, 4), got = a;
        break;
      default:
        memcpy(&b, p, 8), got = (double)b;
      }
      EXPECT(got == want, "%s element %d: %g, want %g", rp_dtype_name(types[t]),
             i, got, want);
    }
    CHECK(rp_instance_free(rt, x));
  }
  CHECK(rp_runtime_destroy(rt));
  done_case("eager all-reduce, four types");
}

/* Ring: rank r sends rows 1..2, cols 2..4 of its 4x6 instance (strided) to
 * rank r+1, which receives them into a 2x3 instance at the same global
 * coordinates; then the same again with SUM into ones. A copy between two
 * other ranks is a placeholder on this one. */
static void eager_copies(void) {
  rp_runtime *rt = make_rt(0);
  rp_inst src = inst_2d(rt, RP_F32, 0, 3, 0, 5);
  rp_inst dst = inst_2d(rt, RP_F32, 1, 2, 2, 4);
  float s[24], d[6];
  for (int i = 0; i < 24; i++)
    s[i] = (float)(RANK * 100 + i);
  CHECK(rp_instance_write(rt, src, s, sizeof s));
  int next = (RANK + 1) % NRANKS, prev = (RANK + NRANKS - 1) % NRANKS;
  rp_rect dom = rp_rect_2d(1, 2, 2, 4);
  for (int sum = 0; sum < 2; sum++) {
    for (int i = 0; i < 6; i++)
      d[i] = 1.0f;
    CHECK(rp_instance_write(rt, dst, d, sizeof d));
    rp_event last = RP_NO_EVENT;
    for (int r = 0; r < NRANKS; r++) { /* every rank makes every call */
      rp_dist_copy c = {.src_rank = (uint32_t)r,
                        .dst_rank = (uint32_t)((r + 1) % NRANKS),
                        .src = src,
                        .dst = dst,
                        .rect = dom,
                        .redop = sum ? RP_REDOP_SUM : RP_REDOP_NONE};
      rp_event e;
      CHECK(rp_launch_dist_copy(rt, &c, &e));
      CHECK(rp_event_release(rt, last));
      last = e;
    }
    wait_ok(rt, last); /* the last one follows every earlier one */
    CHECK(rp_runtime_drain(rt));
    CHECK(rp_instance_read(rt, dst, d, sizeof d));
    for (int i = 0; i < 6; i++) {
      int row = 1 + i / 3, col = 2 + i % 3;
      float want = (float)(prev * 100 + row * 6 + col) + (sum ? 1.0f : 0.0f);
      EXPECT(d[i] == want, "sum %d element %d: %g, want %g (from rank %d)", sum,
             i, (double)d[i], (double)want, prev);
    }
  }
  (void)next;
  CHECK(rp_runtime_destroy(rt));
  done_case("eager cross-rank copies (strided, SUM, placeholders)");
}

/* ---- parallel operators across ranks ---- */

typedef struct pop_case {
  rp_pop_kind kind;
  int backward;
  const char *name;
} pop_case;

static const pop_case POPS[] = {
    {RP_POP_REPLICATE, 0, "replicate fwd (broadcast)"},
    {RP_POP_REPLICATE, 1, "replicate bwd (reduce)"},
    {RP_POP_REPARTITION, 0, "repartition fwd (scatter)"},
    {RP_POP_REPARTITION, 1, "repartition bwd (gather)"},
    {RP_POP_COMBINE, 0, "combine fwd (gather)"},
    {RP_POP_COMBINE, 1, "combine bwd (scatter)"},
    {RP_POP_REDUCTION, 0, "reduction fwd (reduce)"},
    {RP_POP_REDUCTION, 1, "reduction bwd (broadcast)"},
};

#define ROWS_PER 3
#define COLS 4

typedef struct pop_world {
  rp_runtime *rt;
  rp_inst whole, part;
  int split, to_parts, root;
} pop_world;

static void pop_setup(pop_world *w, rp_runtime *rt, const pop_case *pc) {
  w->rt = rt;
  w->root = NRANKS - 1; /* not rank 0, on purpose */
  w->split = pc->kind == RP_POP_REPARTITION || pc->kind == RP_POP_COMBINE;
  int fwd = pc->kind == RP_POP_REPARTITION || pc->kind == RP_POP_REPLICATE;
  w->to_parts = fwd != pc->backward;
  int64_t rows = (int64_t)NRANKS * ROWS_PER;
  w->whole = RANK == w->root ? inst_2d(rt, RP_F32, 0, rows - 1, 0, COLS - 1)
                             : (rp_inst){0};
  w->part = w->split ? inst_2d(rt, RP_F32, RANK * ROWS_PER,
                               RANK * ROWS_PER + ROWS_PER - 1, 0, COLS - 1)
                     : inst_2d(rt, RP_F32, 0, rows - 1, 0, COLS - 1);
}

static float whole_val(int k, int i) {
  return (float)(1000 * k + i);
}
static float part_val(int r, int k, int i) {
  return (float)(100 * r + 10 * k + i);
}

static void pop_write(pop_world *w, int k) {
  int nw = NRANKS * ROWS_PER * COLS, np = w->split ? ROWS_PER * COLS : nw;
  float *buf = calloc((size_t)nw, sizeof *buf);
  if (RANK == w->root) {
    for (int i = 0; i < nw; i++)
      buf[i] = w->to_parts ? whole_val(k, i) : -1.0f;
    CHECK(rp_instance_write(w->rt, w->whole, buf, (size_t)nw * 4));
  }
  for (int i = 0; i < np; i++)
    buf[i] = w->to_parts ? -1.0f : part_val(RANK, k, i);
  CHECK(rp_instance_write(w->rt, w->part, buf, (size_t)np * 4));
  free(buf);
}

static void pop_verify(pop_world *w, const pop_case *pc, int k) {
  int nw = NRANKS * ROWS_PER * COLS, np = w->split ? ROWS_PER * COLS : nw;
  float *buf = calloc((size_t)nw, sizeof *buf);
  if (w->to_parts) { /* every part gets its piece of the whole */
    CHECK(rp_instance_read(w->rt, w->part, buf, (size_t)np * 4));
    int off = w->split ? RANK * ROWS_PER * COLS : 0;
    for (int i = 0; i < np; i++)
      EXPECT(buf[i] == whole_val(k, off + i),
             "%s replay %d part elt %d: "
             "%g, want %g",
             pc->name, k, i, (double)buf[i], (double)whole_val(k, off + i));
  } else if (RANK == w->root) { /* the whole gathers or sums the parts */
    CHECK(rp_instance_read(w->rt, w->whole, buf, (size_t)nw * 4));
    for (int i = 0; i < nw; i++) {
      float want = 0;
      if (w->split)
        want = part_val(i / (ROWS_PER * COLS), k, i % (ROWS_PER * COLS));
      else
        for (int r = 0; r < NRANKS; r++)
          want += part_val(r, k, i);
      EXPECT(buf[i] == want, "%s replay %d whole elt %d: %g, want %g", pc->name,
             k, i, (double)buf[i], (double)want);
    }
  }
  free(buf);
}

static void pop_launch(pop_world *w, const pop_case *pc, rp_event *done) {
  rp_dist_parallel p = {.kind = pc->kind,
                        .backward = pc->backward,
                        .root = (uint32_t)w->root,
                        .whole = w->whole,
                        .part = w->part,
                        .dim = 0};
  CHECK(rp_launch_dist_parallel(w->rt, &p, done));
}

static void parallel_ops(void) {
  for (size_t c = 0; c < sizeof POPS / sizeof POPS[0]; c++) {
    const pop_case *pc = &POPS[c];
    rp_runtime *rt = make_rt(0);
    pop_world w;
    pop_setup(&w, rt, pc);
    /* eager */
    pop_write(&w, 7);
    rp_event e;
    pop_launch(&w, pc, &e);
    wait_ok(rt, e);
    pop_verify(&w, pc, 7);
    /* recorded once, replayed with new data three times */
    rp_graph *g;
    CHECK(rp_capture_begin(rt, NULL));
    pop_launch(&w, pc, NULL);
    CHECK(rp_capture_end(rt, &g));
    rp_exec *ex;
    CHECK(rp_instantiate(g, NULL, &ex));
    CHECK(rp_graph_destroy(g));
    for (int k = 0; k < 3; k++) {
      pop_write(&w, k);
      CHECK(rp_replay(ex, NULL, &e));
      rp_status st = rp_event_wait(rt, e, -1);
      EXPECT(st == RP_OK, "%s replay %d: %s (%s)", pc->name, k,
             rp_status_name(st), rp_exec_error_detail(ex));
      CHECK(rp_event_release(rt, e));
      pop_verify(&w, pc, k);
    }
    CHECK(rp_exec_destroy(ex));
    CHECK(rp_runtime_destroy(rt));
    char name[96];
    snprintf(name, sizeof name, "%s across ranks (eager, 3 replays)", pc->name);
    done_case(name);
  }
}

/* A sum across ranks adds the parts in rank order whatever the root, as
 * the local operators add theirs in part order: part 0, then += part 1,
 * += part 2, ... Parts 1e8, -1e8, 1 (ranks 0, 1, 2) sum to 1 in that order
 * in f32; starting from the root's part (rank 2) would give 0. */
static void sums_in_rank_order(void) {
  if (NRANKS < 3)
    return;
  static const pop_case sums[] = {
      {RP_POP_REDUCTION, 0, "reduction fwd (reduce)"},
      {RP_POP_REPLICATE, 1, "replicate bwd (reduce)"},
  };
  for (size_t c = 0; c < 2; c++) {
    rp_runtime *rt = make_rt(0);
    pop_world w;
    pop_setup(&w, rt, &sums[c]); /* root NRANKS - 1 */
    int nw = NRANKS * ROWS_PER * COLS;
    float *buf = calloc((size_t)nw, sizeof *buf);
    float mine = RANK == 0 ? 1e8f : RANK == 1 ? -1e8f : RANK == 2 ? 1.0f : 0;
    rp_graph *g;
    CHECK(rp_capture_begin(rt, NULL));
    pop_launch(&w, &sums[c], NULL);
    CHECK(rp_capture_end(rt, &g));
    rp_exec *ex;
    CHECK(rp_instantiate(g, NULL, &ex));
    CHECK(rp_graph_destroy(g));
    for (int mode = 0; mode < 2; mode++) { /* eager, then a replay */
      for (int i = 0; i < nw; i++)
        buf[i] = mine;
      CHECK(rp_instance_write(rt, w.part, buf, (size_t)nw * 4));
      rp_event e;
      if (mode == 0)
        pop_launch(&w, &sums[c], &e);
      else
        CHECK(rp_replay(ex, NULL, &e));
      wait_ok(rt, e);
      if (RANK == w.root) {
        CHECK(rp_instance_read(rt, w.whole, buf, (size_t)nw * 4));
        for (int i = 0; i < nw; i++)
          EXPECT(buf[i] == 1.0f,
                 "%s (%s) elt %d: %g, want 1 (parts summed "
                 "in rank order)",
                 sums[c].name, mode ? "replayed" : "eager", i, (double)buf[i]);
      }
    }
    free(buf);
    CHECK(rp_exec_destroy(ex));
    CHECK(rp_runtime_destroy(rt));
    char name[96];
    snprintf(name, sizeof name, "%s sums in rank order (root %d)", sums[c].name,
             w.root);
    done_case(name);
  }
}

/* ---- replays in flight ---- */

#define N_ELEM 16
#define N_REPLAYS 24

/* X[i] = (rank + 1) * (replay + 1) + i */
static rp_status stamp_task(rp_task_ctx *ctx) {
  float *x = rp_ctx_ptr(ctx, 0);
  uint64_t r = rp_ctx_replay(ctx);
  int rank = *(const int *)rp_ctx_args(ctx, NULL);
  for (int i = 0; i < N_ELEM; i++)
    x[i] = (float)((rank + 1) * (int)(r + 1) + i);
  return RP_OK;
}

/* H[replay][0..N) = X, H[replay][N..2N) = Z */
static rp_status log_task(rp_task_ctx *ctx) {
  const float *x = rp_ctx_ptr(ctx, 0), *z = rp_ctx_ptr(ctx, 1);
  float *h = rp_ctx_ptr(ctx, 2);
  uint64_t r = rp_ctx_replay(ctx);
  memcpy(h + r * 2 * N_ELEM, x, N_ELEM * sizeof *x);
  memcpy(h + r * 2 * N_ELEM + N_ELEM, z, N_ELEM * sizeof *z);
  return RP_OK;
}

typedef struct flight {
  rp_runtime *rt;
  rp_task_id stamp, log;
  rp_inst x, y, z, h;
} flight;

static void flight_setup(flight *f, uint32_t timeout_ms) {
  f->rt = make_rt(timeout_ms);
  CHECK(rp_task_register(f->rt,
                         &(rp_task_desc){.name = "stamp", .cpu_fn = stamp_task},
                         &f->stamp));
  CHECK(rp_task_register(
      f->rt, &(rp_task_desc){.name = "log", .cpu_fn = log_task}, &f->log));
  f->x = inst_2d(f->rt, RP_F32, 0, 0, 0, N_ELEM - 1);
  f->y = inst_2d(f->rt, RP_F32, 0, 0, 0, N_ELEM - 1);
  f->z = inst_2d(f->rt, RP_F32, 0, 0, 0, N_ELEM - 1);
  f->h = inst_2d(f->rt, RP_F32, 0, N_REPLAYS - 1, 0, 2 * N_ELEM - 1);
}

/* stamp X; copy X -> Z of the next rank (ring); Y = X; all-reduce X;
 * log X and Z. */
static void flight_record(flight *f, rp_graph **g, int allreduce_only) {
  CHECK(rp_capture_begin(f->rt, NULL));
  rp_access sa[1] = {{f->x, RP_WRITE, 0}};
  CHECK(rp_launch_task(f->rt,
                       &(rp_launch){.task = f->stamp,
                                    .proc = RP_PROC_ANY,
                                    .accesses = sa,
                                    .naccess = 1,
                                    .args = &RANK,
                                    .args_size = sizeof RANK},
                       NULL));
  for (int r = 0; r < NRANKS && !allreduce_only; r++) {
    rp_dist_copy c = {.src_rank = (uint32_t)r,
                      .dst_rank = (uint32_t)((r + 1) % NRANKS),
                      .src = f->x,
                      .dst = f->z};
    CHECK(rp_launch_dist_copy(f->rt, &c, NULL));
  }
  CHECK(rp_launch_allreduce(f->rt, &(rp_allreduce){f->x, RP_REDOP_SUM, {0}},
                            NULL));
  rp_access la[3] = {{f->x, RP_READ, 0}, {f->z, RP_READ, 0}, {f->h, RP_RW, 0}};
  CHECK(rp_launch_task(
      f->rt,
      &(rp_launch){
          .task = f->log, .proc = RP_PROC_ANY, .accesses = la, .naccess = 3},
      NULL));
  CHECK(rp_capture_end(f->rt, g));
}

static void inflight(void) {
  flight f;
  flight_setup(&f, 0);
  rp_graph *g;
  flight_record(&f, &g, 0);
  rp_exec *ex;
  CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 4}, &ex));
  CHECK(rp_graph_destroy(g));
  rp_event ev[N_REPLAYS];
  for (int k = 0; k < N_REPLAYS; k++) /* back to back, no waiting */
    CHECK(rp_replay(ex, NULL, &ev[k]));
  for (int k = 0; k < N_REPLAYS; k++) {
    rp_status st = rp_event_wait(f.rt, ev[k], -1);
    EXPECT(st == RP_OK, "replay %d: %s (%s)", k, rp_status_name(st),
           rp_exec_error_detail(ex));
    CHECK(rp_event_release(f.rt, ev[k]));
  }
  float h[N_REPLAYS * 2 * N_ELEM];
  CHECK(rp_instance_read(f.rt, f.h, h, sizeof h));
  int prev = (RANK + NRANKS - 1) % NRANKS;
  for (int k = 0; k < N_REPLAYS; k++)
    for (int i = 0; i < N_ELEM; i++) {
      float x = h[k * 2 * N_ELEM + i], z = h[k * 2 * N_ELEM + N_ELEM + i];
      float wx = (float)((k + 1) * NRANKS * (NRANKS + 1) / 2 + NRANKS * i);
      float wz = (float)((prev + 1) * (k + 1) + i);
      EXPECT(x == wx, "replay %d all-reduce elt %d: %g, want %g", k, i,
             (double)x, (double)wx);
      EXPECT(z == wz, "replay %d ring copy elt %d: %g, want %g", k, i,
             (double)z, (double)wz);
    }
  rp_exec_stats s;
  CHECK(rp_exec_stats_get(ex, &s));
  EXPECT(s.replays == N_REPLAYS, "%llu replays", (unsigned long long)s.replays);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_runtime_destroy(f.rt));
  done_case("24 replays in flight back to back (persistent all-reduce, ring "
            "copies, 4 slots)");
}

/* The builder forms: explicit edges, communication chained in order. */
static void builder(void) {
  flight f;
  flight_setup(&f, 0);
  rp_graph *g;
  CHECK(rp_graph_create(f.rt, &g));
  rp_access sa[1] = {{f.x, RP_WRITE, 0}};
  rp_op_id stamp, ar, cp;
  CHECK(rp_graph_add_task(g,
                          &(rp_launch){.task = f.stamp,
                                       .proc = RP_PROC_ANY,
                                       .accesses = sa,
                                       .naccess = 1,
                                       .args = &RANK,
                                       .args_size = sizeof RANK},
                          &stamp));
  CHECK(
      rp_graph_add_allreduce(g, &(rp_allreduce){f.x, RP_REDOP_SUM, {0}}, &ar));
  CHECK(rp_graph_add_edge(g, stamp, ar));
  rp_dist_copy c = {.src_rank = 0,
                    .dst_rank = (uint32_t)(NRANKS - 1),
                    .src = f.x,
                    .dst = f.z};
  CHECK(rp_graph_add_dist_copy(g, &c, &cp));
  EXPECT(rp_graph_depends(g, ar, cp), "the copy must follow the all-reduce");
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  CHECK(rp_graph_destroy(g));
  for (int k = 0; k < 3; k++) {
    rp_event e;
    CHECK(rp_replay(ex, NULL, &e));
    wait_ok(f.rt, e);
    float z[N_ELEM];
    CHECK(rp_instance_read(f.rt, RANK == NRANKS - 1 ? f.z : f.x, z, sizeof z));
    for (int i = 0; i < N_ELEM; i++) {
      float w = (float)((k + 1) * NRANKS * (NRANKS + 1) / 2 + NRANKS * i);
      EXPECT(z[i] == w, "replay %d elt %d: %g, want %g", k, i, (double)z[i],
             (double)w);
    }
  }
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_runtime_destroy(f.rt));
  done_case("builder forms (rp_graph_add_allreduce, rp_graph_add_dist_copy)");
}

/* ---- failures ---- */

/* The bound in the failure cases: short, and still far above what a
 * healthy op takes on a loaded 2-core machine. The checks only use it as a
 * lower bound (a failure never comes before it). */
#define SHORT_MS 3000

/* Eager staging buffers alive on this rank: after failures that left no
 * request with MPI (none timed out in MPI's hands), 0. */
static int64_t staged_live(rp_runtime *rt) {
  return atomic_load(&rp__dist_state(rt)->eager_staged);
}

static int contains(const char *s, const char *sub) {
  return strstr(s, sub) != NULL;
}

/* Ranks that instantiate one graph with other max_inflight are refused
 * on every rank (RP_EINVAL naming the counts): a copy's messages are
 * tagged by replay slot, so rank 0's 2 slots against the others' 1 paired
 * a copy with the next replay's message, and replays returned RP_OK with
 * another replay's data. */
static void inflight_differs(void) {
  flight f;
  flight_setup(&f, SHORT_MS);
  rp_graph *g;
  flight_record(&f, &g, 0);
  rp_exec *ex = NULL;
  uint32_t k = RANK == 0 ? 2 : 1;
  rp_status st = rp_instantiate(g, &(rp_exec_opts){.max_inflight = k}, &ex);
  EXPECT(st == RP_EINVAL && ex == NULL &&
             contains(rp_error_detail(), "max_inflight 1 to 2"),
         "max_inflight %u here, 2 on rank 0 and 1 elsewhere: %s (%s)", k,
         rp_status_name(st), rp_error_detail());
  if (st == RP_OK)
    CHECK(rp_exec_destroy(ex));
  /* the same graph with equal counts instantiates and replays */
  CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 2}, &ex));
  rp_event e;
  CHECK(rp_replay(ex, NULL, &e));
  wait_ok(f.rt, e);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_graph_destroy(g));
  CHECK(rp_runtime_destroy(f.rt));
  done_case("other max_inflight on one rank: instantiate refused on every "
            "rank");
}

/* Rank 1 reallocates an instance the exec uses: its replay fails with
 * RP_ESTALE and its communication never runs; it tells the others, whose
 * all-reduce fails with RP_EPEER naming rank 1 and the stale replay. A
 * later replay there fails at once (the exec's communication is broken). */
/* Eager ops refused on one rank before they ran (a stale instance there)
 * keep their places in the runtime's order: the next copy between ranks 0
 * and 1 delivers its own data on rank 1, never the refused copy's message
 * (it did, every later copy shifted by one); an all-reduce refused on
 * rank 1 makes the next all-reduce fail on every rank (out of step)
 * instead of pairing rank 1's with the others' previous one. */
static void refused_on_one_rank(void) {
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_inst src = inst_2d(rt, RP_F32, 0, 0, 0, 3);
  rp_inst dst = inst_2d(rt, RP_F32, 0, 0, 0, 3), old = dst;
  float v[4];
  for (int copy = 1; copy <= 2; copy++) {
    for (int i = 0; i < 4; i++)
      v[i] = (float)copy;
    CHECK(rp_instance_write(rt, src, v, sizeof v));
    if (copy == 1 && RANK == 1)
      CHECK(rp_instance_realloc(rt, &dst)); /* `old` is stale here */
    rp_dist_copy c = {
        .src_rank = 0, .dst_rank = 1, .src = src, .dst = copy == 1 ? old : dst};
    rp_event e = RP_NO_EVENT;
    rp_status st = rp_launch_dist_copy(rt, &c, &e);
    if (copy == 1 && RANK == 1) {
      EXPECT(st == RP_ESTALE, "refused copy: %s", rp_status_name(st));
      continue;
    }
    CHECK(st);
    st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    if (copy == 2 && RANK == 1) {
      CHECK(st);
      CHECK(rp_instance_read(rt, dst, v, sizeof v));
      EXPECT(v[0] == 2.0f && v[3] == 2.0f,
             "the copy after a refused one delivered %g, not 2", (double)v[0]);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  rp_inst sum = inst_2d(rt, RP_F32, 0, 0, 0, 3), gone = sum;
  if (RANK == 1)
    CHECK(rp_instance_realloc(rt, &sum));
  rp_event e = RP_NO_EVENT;
  rp_status st = rp_launch_allreduce(
      rt, &(rp_allreduce){.inst = gone, .redop = RP_REDOP_SUM}, &e);
  if (RANK == 1) {
    EXPECT(st == RP_ESTALE, "refused all-reduce: %s", rp_status_name(st));
  } else {
    CHECK(st);
    st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    EXPECT(st != RP_OK, "rank %d: an all-reduce rank 1 refused ran", RANK);
  }
  st = rp_launch_allreduce(
      rt, &(rp_allreduce){.inst = sum, .redop = RP_REDOP_SUM}, &e);
  if (st == RP_OK) {
    st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
  }
  EXPECT(st != RP_OK, "rank %d: the all-reduce after a refused one ran (%s)",
         RANK, rp_runtime_dist_detail(rt));
  /* out of step, or timed out before MPI took the operand: the staging
   * buffers were freed */
  EXPECT(staged_live(rt) == 0,
         "rank %d: %lld eager staging buffers left after failed all-reduces",
         RANK, (long long)staged_live(rt));
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(rp_runtime_destroy(rt));
  done_case("eager ops refused on one rank keep their places: no copy or "
            "all-reduce pairs with another");
}

/* rp_exec_tune on an exec that communicates across ranks is refused on
 * every rank (the trial replays would differ per rank), nothing run. */
static void tune_refused(void) {
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 3);
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  CHECK(rp_launch_allreduce(
      rt, &(rp_allreduce){.inst = x, .redop = RP_REDOP_SUM}, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  uint32_t n = 99;
  rp_status st = rp_exec_tune(ex, NULL, &n);
  EXPECT(st == RP_EUNSUPPORTED && contains(rp_error_detail(), "across"),
         "tune: %s (%s)", rp_status_name(st), rp_error_detail());
  rp_exec_stats s;
  CHECK(rp_exec_stats_get(ex, &s));
  EXPECT(s.replays == 0, "tune ran %llu replays",
         (unsigned long long)s.replays);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_graph_destroy(g));
  CHECK(rp_runtime_destroy(rt));
  done_case("rp_exec_tune refused on an exec that communicates across ranks");
}

static void stale_rank(void) {
  flight f;
  flight_setup(&f, SHORT_MS);
  rp_graph *g;
  flight_record(&f, &g, 1);
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  CHECK(rp_graph_destroy(g));
  rp_event e;
  CHECK(rp_replay(ex, NULL, &e)); /* a good one first */
  wait_ok(f.rt, e);
  MPI_Barrier(MPI_COMM_WORLD);
  if (RANK == 1)
    CHECK(rp_instance_realloc(f.rt, &f.z));
  double t0 = now_s();
  CHECK(rp_replay(ex, NULL, &e));
  rp_status st = rp_event_wait(f.rt, e, -1);
  double dt = now_s() - t0;
  CHECK(rp_event_release(f.rt, e));
  const char *d = rp_exec_error_detail(ex);
  if (RANK == 1) {
    EXPECT(st == RP_ESTALE, "stale rank: %s (%s)", rp_status_name(st), d);
    printf("   rank 1: %s\n", d);
  } else {
    EXPECT(st == RP_EPEER, "peer of the stale rank: %s (%s)",
           rp_status_name(st), d);
    EXPECT(contains(d, "rank 1 gave up first: rank 1 skipped its all-reduce") &&
               contains(d, "RP_ESTALE"),
           "detail: %s", d);
    if (RANK == 0)
      printf("   rank 0 after %.3f s: %s\n", dt, d);
    CHECK(rp_replay(ex, NULL, &e));
    st = rp_event_wait(f.rt, e, -1);
    CHECK(rp_event_release(f.rt, e));
    d = rp_exec_error_detail(ex);
    EXPECT(st == RP_EPEER && contains(d, "broke earlier"),
           "after the timeout: %s (%s)", rp_status_name(st), d);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_runtime_destroy(f.rt));
  done_case("stale instance on rank 1: RP_ESTALE there, RP_EPEER naming it "
            "elsewhere");
}

/* The last rank never takes part: eager, a receive from it times out; in a
 * replay (it instantiates but never replays), the copy from it and the
 * all-reduce time out, naming it. Nothing hangs. */
static void missing_peer(void) {
  int last = NRANKS - 1;
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  rp_inst z = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  char want[48];
  snprintf(want, sizeof want, "rank %d did not answer", last);
  /* eager: rank 0 receives from the last rank, which sends nothing (a
   * sum: through a staging buffer, freed after the timeout, as no request
   * holds it) */
  if (RANK == 0) {
    rp_dist_copy c = {.src_rank = (uint32_t)last,
                      .dst_rank = 0,
                      .src = x,
                      .dst = z,
                      .redop = RP_REDOP_SUM};
    rp_event e;
    double t0 = now_s();
    CHECK(rp_launch_dist_copy(rt, &c, &e));
    rp_status st = rp_event_wait(rt, e, -1);
    double dt = now_s() - t0;
    CHECK(rp_event_release(rt, e));
    const char *d = rp_runtime_dist_detail(rt);
    EXPECT(st == RP_EPEER, "eager recv: %s (%s)", rp_status_name(st), d);
    EXPECT(contains(d, want), "eager detail: %s", d);
    EXPECT(dt >= SHORT_MS * 1e-3 * 0.99, "eager: failed after %.3f s", dt);
    EXPECT(staged_live(rt) == 0,
           "eager recv: %lld staging buffers left after its timeout",
           (long long)staged_live(rt));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* replayed */
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  rp_dist_copy c = {
      .src_rank = (uint32_t)last, .dst_rank = 0, .src = x, .dst = z};
  CHECK(rp_launch_dist_copy(rt, &c, NULL));
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex)); /* collective: every rank */
  CHECK(rp_graph_destroy(g));
  if (RANK != last) {
    rp_event e;
    double t0 = now_s();
    CHECK(rp_replay(ex, NULL, &e));
    rp_status st = rp_event_wait(rt, e, -1);
    double dt = now_s() - t0;
    CHECK(rp_event_release(rt, e));
    const char *d = rp_exec_error_detail(ex);
    EXPECT(st == RP_EPEER, "replay: %s (%s)", rp_status_name(st), d);
    EXPECT(contains(d, want), "replay detail: %s", d);
    if (RANK == 0)
      printf("   rank 0 after %.3f s: %s\n", dt, d);
    EXPECT(dt >= SHORT_MS * 1e-3 * 0.99, "replay: failed after %.3f s", dt);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_runtime_destroy(rt));
  done_case("a peer that never answers: RP_EPEER naming it (eager, replay)");
}

/* An all-reduce that timed out stays with MPI (a collective cannot be
 * cancelled) and completes when the late rank arrives. It must then write
 * into a buffer of its own, never into the instance: every rank but the
 * last replays, times out, destroys the exec and writes 5 into the
 * instance; the last rank replays after that (its contribution completes
 * the stale all-reduce on the others, its own result is not checked), and
 * the others' instances still hold 5 (they held the late sum, written over
 * the caller's data after the failure was reported). */
static void late_allreduce(void) {
  int last = NRANKS - 1;
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(rp_instance_write(rt, x, v, sizeof v));
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex)); /* collective: every rank */
  CHECK(rp_graph_destroy(g));
  int go = 1;
  rp_event e;
  if (RANK != last) {
    CHECK(rp_replay(ex, NULL, &e));
    rp_status st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    EXPECT(st == RP_EPEER, "replay without the last rank: %s (%s)",
           rp_status_name(st), rp_exec_error_detail(ex));
    CHECK(rp_exec_destroy(ex));
    for (int i = 0; i < 8; i++)
      v[i] = 5;
    CHECK(rp_instance_write(rt, x, v, sizeof v));
    if (RANK == 0)
      MPI_Send(&go, 1, MPI_INT, last, 99, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(rp_replay(ex, NULL, &e)); /* late: RP_OK or RP_EPEER */
    (void)rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    CHECK(rp_exec_destroy(ex));
  }
  /* MPI progresses the stale all-reduce inside these calls */
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < 20; k++) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (RANK != last) {
    CHECK(rp_instance_read(rt, x, v, sizeof v));
    for (int i = 0; i < 8; i++)
      EXPECT(v[i] == 5.0f,
             "element %d is %g after the failed all-reduce, not the 5 "
             "written since",
             i, (double)v[i]);
  }
  CHECK(rp_runtime_destroy(rt));
  done_case("an all-reduce that timed out and completes late writes no "
            "instance");
}

/* Operands that differ between ranks, each on a runtime of its own (a
 * failed eager op fails the runtime's later eager cross-rank ops, which
 * run in launch order): an eager all-reduce of other counts (RP_ESHAPE on
 * every rank, the elements untouched), a copy whose source holds more than
 * its destination (RP_ESHAPE on the receiver, where MPI's truncation would
 * have been fatal) and one whose source holds less (RP_ESHAPE, the
 * destination untouched), a captured all-reduce of other counts (rp_instantiate
 * refuses it on every rank, and a valid eager all-reduce then sums). It
 * runs after missing_peer, whose notice to a rank that never waits stays
 * unread: it must not reach these runtimes' communicators. */
static rp_inst odd_inst(rp_runtime *rt) { /* 6 doubles on rank 0, else 8 */
  return inst_2d(rt, RP_F64, 0, 1, 0, RANK == 0 ? 2 : 3);
}

static void shape_mismatch(void) {
  double v[8] = {1, 1, 1, 1, 1, 1, 1, 1}, back[8];
  size_t mine = (RANK == 0 ? 6 : 8) * sizeof(double);
  rp_runtime *rt = make_rt(0);
  rp_inst odd = odd_inst(rt);
  CHECK(rp_instance_write(rt, odd, v, mine));
  rp_event e;
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){odd, RP_REDOP_SUM, {0}}, &e));
  rp_status st = rp_event_wait(rt, e, -1);
  CHECK(rp_event_release(rt, e));
  const char *d = rp_runtime_dist_detail(rt);
  EXPECT(st == RP_ESHAPE, "eager all-reduce: %s (%s)", rp_status_name(st), d);
  EXPECT(contains(d, "all-reduce operands differ: 6 to 8 elements"),
         "eager all-reduce detail: %s", d);
  CHECK(rp_instance_read(rt, odd, back, mine));
  EXPECT(back[0] == 1.0 && back[5] == 1.0, "operands changed: %g %g", back[0],
         back[5]);
  CHECK(rp_instance_free(rt, odd));
  CHECK(rp_runtime_destroy(rt));

  /* rank 1's 8 doubles into rank 0's instance of 6 */
  rt = make_rt(0);
  odd = odd_inst(rt);
  CHECK(rp_instance_write(rt, odd, v, mine));
  rp_dist_copy c = {.src_rank = 1, .dst_rank = 0, .src = odd, .dst = odd};
  CHECK(rp_launch_dist_copy(rt, &c, &e));
  st = rp_event_wait(rt, e, -1);
  CHECK(rp_event_release(rt, e));
  d = rp_runtime_dist_detail(rt);
  if (RANK == 0) {
    EXPECT(st == RP_ESHAPE, "copy into the smaller: %s (%s)",
           rp_status_name(st), d);
    EXPECT(contains(d, "64 bytes arrived, the destination rect holds 48"),
           "copy detail: %s", d);
  } else {
    EXPECT(st == RP_OK, "rank %d: %s (%s)", RANK, rp_status_name(st), d);
  }
  CHECK(rp_instance_free(rt, odd));
  CHECK(rp_runtime_destroy(rt));

  /* rank 0's 6 doubles into rank 1's instance of 8: refused, and the
   * destination keeps its elements (the message is taken aside) */
  rt = make_rt(0);
  odd = odd_inst(rt);
  double nine[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  CHECK(rp_instance_write(rt, odd, RANK == 0 ? nine : v, mine));
  c = (rp_dist_copy){.src_rank = 0, .dst_rank = 1, .src = odd, .dst = odd};
  CHECK(rp_launch_dist_copy(rt, &c, &e));
  st = rp_event_wait(rt, e, -1);
  CHECK(rp_event_release(rt, e));
  d = rp_runtime_dist_detail(rt);
  if (RANK == 1) {
    EXPECT(st == RP_ESHAPE, "copy into the larger: %s (%s)", rp_status_name(st),
           d);
    EXPECT(contains(d, "48 bytes arrived, the destination rect holds 64"),
           "copy detail: %s", d);
    CHECK(rp_instance_read(rt, odd, back, mine));
    for (int i = 0; i < 8; i++)
      EXPECT(back[i] == 1.0, "element %d of the refused destination: %g", i,
             back[i]);
  } else {
    EXPECT(st == RP_OK, "rank %d: %s (%s)", RANK, rp_status_name(st), d);
  }
  CHECK(rp_instance_free(rt, odd));
  CHECK(rp_runtime_destroy(rt));

  rt = make_rt(0);
  odd = odd_inst(rt);
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){odd, RP_REDOP_SUM, {0}}, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex = NULL;
  st = rp_instantiate(g, NULL, &ex); /* collective: every rank */
  EXPECT(st == RP_ESHAPE && !ex, "instantiate: %s (%s)", rp_status_name(st),
         rp_error_detail());
  EXPECT(contains(rp_error_detail(),
                  "all-reduce operands differ: 6 to 8 elements"),
         "instantiate detail: %s", rp_error_detail());
  CHECK(rp_graph_destroy(g));
  rp_inst x = inst_2d(rt, RP_F64, 0, 0, 0, 3);
  CHECK(rp_instance_write(rt, x, v, 4 * sizeof(double)));
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
  wait_ok(rt, e);
  CHECK(rp_instance_read(rt, x, back, 4 * sizeof(double)));
  EXPECT(back[3] == NRANKS, "valid all-reduce after: %g", back[3]);
  CHECK(rp_instance_free(rt, x));
  CHECK(rp_instance_free(rt, odd));
  CHECK(rp_runtime_destroy(rt));
  done_case("operands that differ between ranks: RP_ESHAPE (eager all-reduce "
            "and copy, instantiate)");
}

/* An eager all-reduce whose operands differ in type (f32 on rank 0, i32
 * elsewhere) fails with RP_ESHAPE on every rank, naming the types; the
 * runtime's next eager all-reduce (of other counts: it would fail on its
 * own, with another detail) fails with the same status, and its detail
 * says that the runtime's eager communication failed earlier, quoting
 * that failure, instead of repeating it as its own. */
static void eager_after_failure(void) {
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_inst a = inst_2d(rt, RANK == 0 ? RP_F32 : RP_I32, 0, 1, 0, 3);
  rp_event e;
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){a, RP_REDOP_SUM, {0}}, &e));
  rp_status st = rp_event_wait(rt, e, -1);
  CHECK(rp_event_release(rt, e));
  char first[400];
  snprintf(first, sizeof first, "%s", rp_runtime_dist_detail(rt));
  EXPECT(st == RP_ESHAPE, "first all-reduce: %s (%s)", rp_status_name(st),
         first);
  EXPECT(contains(first, "8 to 8 elements, types f32 to i32"),
         "first detail: %s", first);
  rp_inst b = inst_2d(rt, RP_F32, 0, 0, 0, RANK == 0 ? 7 : 8);
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){b, RP_REDOP_SUM, {0}}, &e));
  st = rp_event_wait(rt, e, -1);
  char ev[600];
  snprintf(ev, sizeof ev, "%s", rp_error_detail());
  CHECK(rp_event_release(rt, e));
  const char *d = rp_runtime_dist_detail(rt);
  EXPECT(st == RP_ESHAPE, "second all-reduce: %s (%s)", rp_status_name(st), d);
  EXPECT(strcmp(d, first) != 0 &&
             contains(d, "the runtime's eager communication failed earlier") &&
             contains(d, first),
         "second detail: %s", d);
  EXPECT(contains(ev, "failed earlier") && contains(ev, first),
         "second event's detail: %s", ev);
  if (RANK == 0)
    printf("   rank 0: %s\n", d);
  CHECK(rp_instance_free(rt, a));
  CHECK(rp_instance_free(rt, b));
  CHECK(rp_runtime_destroy(rt));
  done_case("an eager op after a failed one says the earlier failure is "
            "the cause");
}

/* A task that fails while FAIL_NOW is set (rank 1, one replay; rank 0 in
 * eager_failure_told). */
static _Atomic int FAIL_NOW;

static rp_status gate_task(rp_task_ctx *ctx) {
  (void)ctx;
  return atomic_load(&FAIL_NOW) ? 1 : RP_OK;
}

/* The timeout of eager_failure_told: long, so that a peer that waited for
 * it would say "no answer within" and "did not answer" instead of the
 * notice's cause (the check is on that text, not on a clock). */
#define TOLD_MS 20000

/* An eager op that fails or is skipped on rank 0 tells the other ranks,
 * whose eager ops waiting on rank 0 fail at once with RP_EPEER naming
 * rank 0 and quoting its cause (they waited for the whole timeout and
 * then said "rank 0 did not answer"). First rank 0's receive of a copy
 * from rank 1 fails (8 doubles into 6: RP_ESHAPE), so its next eager op,
 * an all-reduce, does not run there; then, on a runtime of its own, rank
 * 0's all-reduce is skipped because a task writing its instance failed. */
static void eager_failure_told(void) {
  for (int skipped = 0; skipped <= 1; skipped++) {
    rp_runtime *rt = make_rt(TOLD_MS);
    rp_inst odd = odd_inst(rt);
    rp_inst x = inst_2d(rt, RP_F64, 0, 0, 0, 3);
    rp_event e;
    rp_status st;
    const char *cause;
    if (!skipped) {
      rp_dist_copy c = {.src_rank = 1, .dst_rank = 0, .src = odd, .dst = odd};
      CHECK(rp_launch_dist_copy(rt, &c, &e));
      st = rp_event_wait(rt, e, -1);
      CHECK(rp_event_release(rt, e));
      EXPECT(st == (RANK == 0 ? RP_ESHAPE : RP_OK), "copy 1 -> 0: %s (%s)",
             rp_status_name(st), rp_runtime_dist_detail(rt));
      cause = "recv from rank 1 (eager op 0) failed with RP_ESHAPE: recv "
              "from rank 1: 64 bytes arrived, the destination rect holds 48";
    } else {
      rp_task_id gate;
      CHECK(rp_task_register(
          rt, &(rp_task_desc){.name = "gate", .cpu_fn = gate_task}, &gate));
      atomic_store(&FAIL_NOW, RANK == 0);
      rp_access ga[1] = {{x, RP_RW, 0}};
      CHECK(rp_launch_task(
          rt,
          &(rp_launch){
              .task = gate, .proc = RP_PROC_ANY, .accesses = ga, .naccess = 1},
          NULL));
      cause = "all-reduce (eager op 0) did not run: an op it depends on "
              "failed with";
    }
    double t0 = now_s();
    CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
    st = rp_event_wait(rt, e, -1);
    double dt = now_s() - t0;
    CHECK(rp_event_release(rt, e));
    atomic_store(&FAIL_NOW, 0);
    const char *d = rp_runtime_dist_detail(rt);
    if (RANK == 0) {
      EXPECT(st != RP_OK && contains(d, "did not run"),
             "rank 0's all-reduce: %s (%s)", rp_status_name(st), d);
    } else {
      EXPECT(st == RP_EPEER, "%s: rank %d's all-reduce: %s (%s)",
             skipped ? "skipped" : "failed", RANK, rp_status_name(st), d);
      EXPECT(contains(d, "rank 0 gave up first: rank 0: ") &&
                 contains(d, cause),
             "%s: rank %d's all-reduce detail: %s",
             skipped ? "skipped" : "failed", RANK, d);
      EXPECT(!contains(d, "no answer within") && !contains(d, "did not answer"),
             "rank %d waited for the timeout: %s", RANK, d);
      if (RANK == 1)
        printf("   rank 1 after %.3f s (timeout %d s): %s\n", dt,
               TOLD_MS / 1000, d);
    }
    EXPECT(staged_live(rt) == 0, "rank %d: %lld eager staging buffers left",
           RANK, (long long)staged_live(rt));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(rp_instance_free(rt, x));
    CHECK(rp_instance_free(rt, odd));
    CHECK(rp_runtime_destroy(rt));
  }
  done_case("an eager op that fails or is skipped on rank 0 fails its peers' "
            "ops at once, quoting the cause");
}

/* Which rank checks what in rp_launch_dist_parallel. A split dim outside
 * the part's dimensions is refused on every rank (RP_EINVAL; it was the
 * root's alone, and another rank's receive then timed out), each rank's
 * copies keep their places, so the next operator pairs as it should. A
 * part of another size on a rank that is not the root is seen where a
 * copy receives it: RP_ESHAPE on that rank in a scatter, on the root in a
 * gather; the sender succeeds. */
static void pop_checks(void) {
  rp_runtime *rt = make_rt(SHORT_MS);
  int64_t rows = (int64_t)NRANKS * 2;
  rp_inst whole =
      RANK == 0 ? inst_2d(rt, RP_F32, 0, rows - 1, 0, 1) : (rp_inst){0};
  rp_inst part = inst_2d(rt, RP_F32, RANK * 2, RANK * 2 + 1, 0, 1);
  rp_dist_parallel p = {.kind = RP_POP_REPARTITION,
                        .root = 0,
                        .whole = whole,
                        .part = part,
                        .dim = 2};
  rp_event e = RP_NO_EVENT;
  rp_status st = rp_launch_dist_parallel(rt, &p, &e);
  EXPECT(st == RP_EINVAL && contains(rp_error_detail(), "dim 2 out of range"),
         "dim 2 of a 2-dim part: %s (%s)", rp_status_name(st),
         rp_error_detail());
  p.dim = -1;
  st = rp_launch_dist_parallel(rt, &p, &e);
  EXPECT(st == RP_EINVAL && contains(rp_error_detail(), "dim -1 out of range"),
         "dim -1: %s (%s)", rp_status_name(st), rp_error_detail());
  /* the ranks' eager orders still agree: a valid scatter delivers */
  float v[64];
  for (int i = 0; i < 64; i++)
    v[i] = (float)i;
  if (RANK == 0)
    CHECK(rp_instance_write(rt, whole, v, (size_t)rows * 2 * sizeof(float)));
  p.dim = 0;
  CHECK(rp_launch_dist_parallel(rt, &p, &e));
  wait_ok(rt, e);
  float got[4];
  CHECK(rp_instance_read(rt, part, got, sizeof got));
  EXPECT(got[0] == (float)(RANK * 4) && got[3] == (float)(RANK * 4 + 3),
         "scatter after the refused ones: %g %g", (double)got[0],
         (double)got[3]);
  CHECK(rp_instance_free(rt, part));
  if (RANK == 0)
    CHECK(rp_instance_free(rt, whole));
  CHECK(rp_runtime_destroy(rt));

  /* rank 1's part has 3 rows, its chunk 2: scatter, then gather, each on
   * a runtime of its own (a failed eager op fails the later ones) */
  for (int gather = 0; gather <= 1; gather++) {
    rt = make_rt(SHORT_MS);
    whole = RANK == 0 ? inst_2d(rt, RP_F32, 0, rows - 1, 0, 1) : (rp_inst){0};
    part = inst_2d(rt, RP_F32, RANK * 2, RANK * 2 + (RANK == 1 ? 2 : 1), 0, 1);
    CHECK(rp_instance_write(rt, part, v, (RANK == 1 ? 6 : 4) * sizeof(float)));
    if (RANK == 0)
      CHECK(rp_instance_write(rt, whole, v, (size_t)rows * 2 * sizeof(float)));
    p = (rp_dist_parallel){.kind = gather ? RP_POP_COMBINE : RP_POP_REPARTITION,
                           .root = 0,
                           .whole = whole,
                           .part = part};
    CHECK(rp_launch_dist_parallel(rt, &p, &e)); /* every rank launches */
    st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    const char *d = rp_runtime_dist_detail(rt);
    int receiver = gather ? 0 : 1;
    if (RANK == receiver) {
      const char *want = gather ? "24 bytes arrived, the destination rect "
                                  "holds 16"
                                : "16 bytes arrived, the destination rect "
                                  "holds 24";
      EXPECT(st == RP_ESHAPE && contains(d, want), "%s, rank %d: %s (%s)",
             gather ? "gather" : "scatter", RANK, rp_status_name(st), d);
    } else if (RANK == 1 || !gather) {
      EXPECT(st == RP_OK, "%s, rank %d: %s (%s)", gather ? "gather" : "scatter",
             RANK, rp_status_name(st), d);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(rp_instance_free(rt, part));
    if (RANK == 0)
      CHECK(rp_instance_free(rt, whole));
    CHECK(rp_runtime_destroy(rt));
  }
  done_case("rp_launch_dist_parallel: a bad dim refused on every rank; a "
            "wrong part off the root is RP_ESHAPE where it is received");
}

/* Three ranks or more: rank 1 never replays; rank 2 receives from it and
 * times out, rank 0 receives from rank 2 (which never sends: its op after
 * the failed one is skipped). Rank 0's own timeout is far longer (the bound
 * is per rank), so only rank 2's notice can end its wait: it must name the
 * first cause. */
static void cascade(void) {
  if (NRANKS < 3)
    return;
  rp_runtime *rt = make_rt(RANK == 0 ? 600000 : SHORT_MS);
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  rp_inst z = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  rp_dist_copy a = {.src_rank = 1, .dst_rank = 2, .src = x, .dst = z};
  rp_dist_copy b = {.src_rank = 2, .dst_rank = 0, .src = z, .dst = x};
  CHECK(rp_launch_dist_copy(rt, &a, NULL));
  CHECK(rp_launch_dist_copy(rt, &b, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  CHECK(rp_graph_destroy(g));
  if (RANK == 0 || RANK == 2) {
    rp_event e;
    double t0 = now_s();
    CHECK(rp_replay(ex, NULL, &e));
    rp_status st = rp_event_wait(rt, e, -1);
    double dt = now_s() - t0;
    CHECK(rp_event_release(rt, e));
    const char *d = rp_exec_error_detail(ex);
    EXPECT(st == RP_EPEER, "cascade: %s (%s)", rp_status_name(st), d);
    EXPECT(contains(d, "rank 1 did not answer"), "detail: %s", d);
    if (RANK == 0) {
      EXPECT(contains(d, "rank 2 gave up first"), "detail: %s", d);
      printf("   rank 0 learned in %.3f s: %s\n", dt, d);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_runtime_destroy(rt));
  done_case("a rank that gave up tells the others (cascade)");
}

/* A replayed receive skipped on rank 1 (an op before it failed there)
 * while rank 0's send completed (MPI buffered its small message): the
 * message must not be taken by rank 1's next replay, which used to receive
 * replay 1's data in replay 2 and report success. The skip breaks the
 * exec's communication on rank 1 (later replays fail at once with
 * RP_EPEER naming the skipped op) and tells the other ranks. */
static void skipped_recv(void) {
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_task_id gate;
  CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "gate", .cpu_fn = gate_task}, &gate));
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 3);
  rp_inst z = inst_2d(rt, RP_F32, 0, 0, 0, 3);
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  rp_access ga[1] = {{z, RP_RW, 0}};
  CHECK(rp_launch_task(
      rt,
      &(rp_launch){
          .task = gate, .proc = RP_PROC_ANY, .accesses = ga, .naccess = 1},
      NULL));
  rp_dist_copy c = {.src_rank = 0, .dst_rank = 1, .src = x, .dst = z};
  CHECK(rp_launch_dist_copy(rt, &c, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 1}, &ex));
  CHECK(rp_graph_destroy(g));
  for (int k = 0; k < 3; k++) {
    float v[4] = {(float)(k + 1), (float)(k + 1), (float)(k + 1),
                  (float)(k + 1)};
    if (RANK == 0)
      CHECK(rp_instance_write(rt, x, v, sizeof v));
    atomic_store(&FAIL_NOW, RANK == 1 && k == 1);
    rp_event e;
    CHECK(rp_replay(ex, NULL, &e));
    rp_status st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    const char *d = rp_exec_error_detail(ex);
    if (RANK == 1 && k == 0)
      EXPECT(st == RP_OK, "replay 0: %s (%s)", rp_status_name(st), d);
    if (RANK == 1 && k == 1)
      EXPECT(st == RP_ETASK, "replay 1: %s (%s)", rp_status_name(st), d);
    if (RANK == 1 && k == 2) {
      CHECK(rp_instance_read(rt, z, v, sizeof v));
      EXPECT(st != RP_OK || v[0] == 3.0f,
             "replay 2 received %g (replay 1's message), not 3, and "
             "reported success",
             (double)v[0]);
      EXPECT(st == RP_EPEER && contains(d, "broke earlier") &&
                 contains(d, "skipped"),
             "replay 2 after a skipped receive: %s (%s)", rp_status_name(st),
             d);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  atomic_store(&FAIL_NOW, 0);
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_runtime_destroy(rt));
  done_case("a receive skipped in a replay breaks the exec: the next replay "
            "never takes its message");
}

/* ---- data-parallel training ---- */

/* Linear regression, y = x W, loss = |xW - t|^2 / (2B) over a global batch
 * of B rows: every rank takes its chunk of the rows, each of its P workers
 * a chunk of those; a worker computes G_s = x_s^T (x_s W - t_s) / B, the
 * rank sums its G_s (a local reduction), the ranks all-reduce G, and every
 * rank applies W -= lr G. The same seed and global batch on 1, 2 and 3
 * ranks must give the same W up to float rounding (sums in other orders). */
#define DP_B 24
#define DP_D 8
#define DP_O 3
#define DP_P 2
#define DP_STEPS 30
#define DP_LR 0.05f
#define DP_TOL 1e-5

static float dp_x(int row, int j) {
  unsigned h = (unsigned)(row * 131 + j * 7919 + 12345) * 2654435761u;
  return (float)((h >> 8) % 2001) / 1000.0f - 1.0f;
}
static float dp_t(int row, int o) {
  float s = 0;
  for (int j = 0; j < DP_D; j++)
    s += dp_x(row, j) * (float)((j + o) % 5 - 2) * 0.5f;
  return s;
}

typedef struct dp_shard {
  rp_inst x, t, y, g;
  int rows;
} dp_shard;

/* Builds the step on rt (ranks = rp_runtime_ranks) and returns its exec. */
static rp_exec *dp_build(rp_runtime *rt, rp_kernel_tasks *k, rp_inst w,
                         rp_inst gsum, rp_inst v, dp_shard *sh) {
  uint32_t rank = rp_runtime_rank(rt), ranks = rp_runtime_ranks(rt);
  rp_rect all = rp_rect_2d(0, DP_B - 1, 0, DP_D - 1), mine, part;
  CHECK(rp_chunk_rect(&all, 0, ranks, rank, &mine));
  rp_inst parts[DP_P];
  for (int s = 0; s < DP_P; s++) {
    CHECK(rp_chunk_rect(&mine, 0, DP_P, (uint32_t)s, &part));
    int64_t lo = part.lo[0], hi = part.hi[0];
    sh[s].rows = (int)(hi - lo + 1);
    sh[s].x = inst_2d(rt, RP_F32, lo, hi, 0, DP_D - 1);
    sh[s].t = inst_2d(rt, RP_F32, lo, hi, 0, DP_O - 1);
    sh[s].y = inst_2d(rt, RP_F32, lo, hi, 0, DP_O - 1);
    sh[s].g = inst_2d(rt, RP_F32, 0, DP_D - 1, 0, DP_O - 1);
    parts[s] = sh[s].g;
    float xb[DP_B * DP_D], tb[DP_B * DP_O];
    for (int r = 0; r < sh[s].rows; r++) {
      for (int j = 0; j < DP_D; j++)
        xb[r * DP_D + j] = dp_x((int)lo + r, j);
      for (int o = 0; o < DP_O; o++)
        tb[r * DP_O + o] = dp_t((int)lo + r, o);
    }
    CHECK(
        rp_instance_write(rt, sh[s].x, xb, sizeof(float) * sh[s].rows * DP_D));
    CHECK(
        rp_instance_write(rt, sh[s].t, tb, sizeof(float) * sh[s].rows * DP_O));
  }
  CHECK(rp_capture_begin(rt, NULL));
  for (int s = 0; s < DP_P; s++) {
    rp_proc p = (rp_proc)s;
    rp_gemm_args fa = {sh[s].rows, DP_O, DP_D, 0, 0, 1.0f, 0.0f};
    rp_access f[3] = {
        {sh[s].x, RP_READ, 0}, {w, RP_READ, 0}, {sh[s].y, RP_WRITE, 0}};
    CHECK(rp_launch_task(rt,
                         &(rp_launch){.task = k->gemm,
                                      .proc = p,
                                      .accesses = f,
                                      .naccess = 3,
                                      .args = &fa,
                                      .args_size = sizeof fa},
                         NULL));
    rp_scalar_args ax = {-1.0f, 0};
    rp_access a[2] = {{sh[s].t, RP_READ, 0}, {sh[s].y, RP_RW, 0}};
    CHECK(rp_launch_task(rt,
                         &(rp_launch){.task = k->axpy,
                                      .proc = p,
                                      .accesses = a,
                                      .naccess = 2,
                                      .args = &ax,
                                      .args_size = sizeof ax},
                         NULL));
    rp_gemm_args ba = {DP_D, DP_O, sh[s].rows, 1, 0, 1.0f / DP_B, 0.0f};
    rp_access b[3] = {
        {sh[s].x, RP_READ, 0}, {sh[s].y, RP_READ, 0}, {sh[s].g, RP_WRITE, 0}};
    CHECK(rp_launch_task(rt,
                         &(rp_launch){.task = k->gemm,
                                      .proc = p,
                                      .accesses = b,
                                      .naccess = 3,
                                      .args = &ba,
                                      .args_size = sizeof ba},
                         NULL));
  }
  rp_parallel_op red = {
      .kind = RP_POP_REDUCTION, .whole = gsum, .parts = parts, .nparts = DP_P};
  CHECK(rp_launch_parallel(rt, &red, NULL));
  CHECK(
      rp_launch_allreduce(rt, &(rp_allreduce){gsum, RP_REDOP_SUM, {0}}, NULL));
  rp_sgd_args sa = {DP_LR, 0.0f, 0};
  rp_access sg[3] = {{w, RP_RW, 0}, {gsum, RP_READ, 0}, {v, RP_RW, 0}};
  CHECK(rp_launch_task(rt,
                       &(rp_launch){.task = k->sgd,
                                    .proc = RP_PROC_ANY,
                                    .accesses = sg,
                                    .naccess = 3,
                                    .args = &sa,
                                    .args_size = sizeof sa},
                       NULL));
  rp_graph *g;
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  CHECK(rp_graph_destroy(g));
  return ex;
}

/* Trains DP_STEPS replays on rt and returns W. */
static void dp_train(rp_runtime *rt, float *wout) {
  rp_kernel_tasks k;
  CHECK(rp_kernels_register(rt, &k));
  rp_inst w = inst_2d(rt, RP_F32, 0, DP_D - 1, 0, DP_O - 1);
  rp_inst gsum = inst_2d(rt, RP_F32, 0, DP_D - 1, 0, DP_O - 1);
  rp_inst v = inst_2d(rt, RP_F32, 0, DP_D - 1, 0, DP_O - 1);
  float w0[DP_D * DP_O];
  for (int i = 0; i < DP_D * DP_O; i++)
    w0[i] = 0.01f * (float)(i % 7);
  CHECK(rp_instance_write(rt, w, w0, sizeof w0));
  dp_shard sh[DP_P];
  rp_exec *ex = dp_build(rt, &k, w, gsum, v, sh);
  rp_event e = RP_NO_EVENT;
  for (int s = 0; s < DP_STEPS; s++) {
    CHECK(rp_event_release(rt, e));
    CHECK(rp_replay(ex, NULL, &e));
  }
  rp_status st = rp_event_wait(rt, e, -1);
  EXPECT(st == RP_OK, "training: %s (%s)", rp_status_name(st),
         rp_exec_error_detail(ex));
  CHECK(rp_event_release(rt, e));
  CHECK(rp_instance_read(rt, w, wout, sizeof(float) * DP_D * DP_O));
  CHECK(rp_exec_destroy(ex));
}

static void dp_equivalence(void) {
  float wn[DP_D * DP_O], w1[DP_D * DP_O];
  rp_runtime *rt = make_rt(0);
  dp_train(rt, wn);
  CHECK(rp_runtime_destroy(rt));
  /* the reference: one process (no communicator), same seed and batch */
  rt = make_rt_on(0, 0);
  dp_train(rt, w1);
  CHECK(rp_runtime_destroy(rt));
  double worst = 0, moved = 0;
  for (int i = 0; i < DP_D * DP_O; i++) {
    double d = fabs((double)wn[i] - (double)w1[i]);
    double scale = fabs((double)w1[i]) > 1 ? fabs((double)w1[i]) : 1;
    worst = d / scale > worst ? d / scale : worst;
    moved += fabs((double)w1[i] - 0.01 * (i % 7));
  }
  EXPECT(moved > 0.1, "training did not move the weights (%g)", moved);
  EXPECT(worst <= DP_TOL, "weights differ from one process by %g (> %g)", worst,
         DP_TOL);
  double all = 0;
  MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (RANK == 0)
    printf("   data-parallel step: %d ranks x %d workers vs one process, "
           "%d steps: max relative weight difference %.3g (tolerance %g)\n",
           NRANKS, DP_P, DP_STEPS, all, DP_TOL);
  done_case("data-parallel training equals one process");
}

/* ---- the GPT with tensor parallelism across 2 ranks (train/gpt.h) ----
 * One processor per rank, tp 2: slice 0 and the leader on rank 0, slice 1
 * on rank 1; the reference is one process (no communicator) with tp 2
 * over 2 processors, the same layout. Every operator has two parts, so
 * the two compute the same bits: an eager step, then 2 replays of the
 * recorded step; every tensor's weights, gradients and moments (read on
 * every rank: collective), the batch loss on every rank, the gradient
 * norm on rank 0 (refused on rank 1, which does not hold it), the
 * evaluation, greedy sampling (every rank gets rank 0's tokens) and
 * greedy decoding on rank 0 after the collective fill. */

static rp_gpt *gpt_model(rp_runtime *rt, int dist, uint32_t procs) {
  rp_kernel_tasks k;
  CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  c.context = 8;
  c.vocab = 16;
  c.batch = 4;
  c.ring = 2;
  c.procs = procs;
  c.tp = 2;
  c.dist = dist;
  c.seed = 5;
  rp_gpt *m = NULL;
  CHECK(rp_gpt_create(rt, &k, &c, &m));
  return m;
}

/* Steps 1 (eager) to 3 (replayed) on the tokens of one batch, then the
 * figures compared: *n floats of state into st (weights, gradients,
 * moments of every tensor), the batch loss, the evaluation and a greedy
 * sample into smp[10]. */
static float *gpt_run(rp_runtime *rt, rp_gpt *m, double *eval, float *loss,
                      int32_t *smp, size_t *n) {
  enum { B = 4, T = 8 };
  int32_t x[2 * B * T], y[2 * B * T];
  for (int i = 0; i < 2 * B * T; i++) {
    x[i] = (i * 7 + 3) % 16;
    y[i] = (i * 5 + 1) % 16;
  }
  CHECK(rp_gpt_write_batches(m, x, y, 2));
  rp_gpt_step_args a = {0, 1e-2f, 1};
  CHECK(rp_gpt_step(m, &a));
  CHECK(rp_runtime_drain(rt));
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  CHECK(rp_gpt_record(m, &g));
  CHECK(rp_instantiate(g, NULL, &ex));
  for (int s = 2; s <= 3; s++) {
    a = (rp_gpt_step_args){(uint32_t)(s - 1) % 2, 1e-2f, s};
    rp_event e;
    CHECK(rp_replay(ex, &(rp_replay_args){.args = &a, .args_size = sizeof a},
                    &e));
    rp_status st = rp_event_wait(rt, e, -1);
    EXPECT(st == RP_OK, "replay %d: %s", s, rp_exec_error_detail(ex));
    CHECK(rp_event_release(rt, e));
  }
  CHECK(rp_gpt_batch_loss(m, loss));
  size_t total = 4 * rp_gpt_param_count(m), off = 0;
  float *out = malloc(total * sizeof *out);
  EXPECT(out, "out of memory");
  for (uint32_t i = 0; i < rp_gpt_param_tensors(m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(m, i);
    size_t e = (size_t)pi->rows * pi->cols;
    for (int sl = RP_GPT_WEIGHT; sl <= RP_GPT_MOM2; sl++, off += e)
      CHECK(rp_gpt_tensor_read(m, i, (rp_gpt_slot)sl, out + off, e));
  }
  *n = total;
  CHECK(rp_gpt_evaluate(m, x, y, 2, eval));
  int32_t prompt[2] = {1, 2};
  CHECK(rp_gpt_sample(m, prompt, 2, 8,
                      &(rp_gpt_sampling){.temperature = 0, .seed = 9}, smp));
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_graph_destroy(g));
  return out;
}

/* Greedy decoding of 8 tokens after {1, 2} into out[10]. */
static void gpt_decode(rp_gpt *m, int32_t *out) {
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  CHECK(rp_gpt_decode_record(m, &g));
  CHECK(rp_instantiate(g, NULL, &ex));
  int32_t prompt[2] = {1, 2};
  CHECK(rp_gpt_generate(m, ex, prompt, 2, 8,
                        &(rp_gpt_sampling){.temperature = 0, .seed = 9}, out));
  CHECK(rp_exec_destroy(ex));
  CHECK(rp_graph_destroy(g));
}

static void gpt_across_ranks(void) {
  if (NRANKS != 2)
    return; /* tp 2 over one processor per rank: two ranks */
  rp_runtime *rt = make_rt(30000);
  rp_gpt *m = gpt_model(rt, 1, 1);
  EXPECT(rp_gpt_proc_count(m) == 2, "the layout spans %u processors",
         rp_gpt_proc_count(m));
  double ev;
  float loss, norm;
  int32_t smp[10], dec[10];
  size_t n;
  float *st = gpt_run(rt, m, &ev, &loss, smp, &n);
  rp_status ns = rp_gpt_grad_norm(m, &norm);
  EXPECT(RANK == 0 ? ns == RP_OK : ns == RP_EINVAL,
         "rp_gpt_grad_norm on rank %d: %s", RANK, rp_status_name(ns));
  CHECK(rp_gpt_decode_fill(m)); /* collective; rank 0 decodes */
  if (RANK == 0)
    gpt_decode(m, dec);

  rp_runtime *r1 = make_rt_on(0, 0); /* the reference: one process */
  rp_gpt *m1 = gpt_model(r1, 0, 2);
  double ev1;
  float loss1, norm1;
  int32_t smp1[10], dec1[10];
  size_t n1;
  float *st1 = gpt_run(r1, m1, &ev1, &loss1, smp1, &n1);
  CHECK(rp_gpt_grad_norm(m1, &norm1));
  gpt_decode(m1, dec1);

  EXPECT(n == n1 && !memcmp(st, st1, n * sizeof *st),
         "weights, gradients and moments: not the one process's bits");
  EXPECT(!memcmp(&loss, &loss1, sizeof loss), "batch loss %.9g vs %.9g",
         (double)loss, (double)loss1);
  EXPECT(RANK != 0 || !memcmp(&norm, &norm1, sizeof norm),
         "gradient norm %.9g vs %.9g", (double)norm, (double)norm1);
  EXPECT(ev == ev1, "evaluation %.17g vs %.17g", ev, ev1);
  EXPECT(!memcmp(smp, smp1, sizeof smp), "greedy sample differs");
  EXPECT(RANK != 0 || !memcmp(dec, dec1, sizeof dec),
         "greedy decoding differs");
  EXPECT(!memcmp(smp, dec1, sizeof smp),
         "greedy sample and greedy decoding differ");
  free(st);
  free(st1);
  CHECK(rp_gpt_destroy(m1));
  CHECK(rp_runtime_destroy(r1));
  CHECK(rp_gpt_destroy(m));
  CHECK(rp_runtime_destroy(rt));
  done_case("the GPT with tensor parallelism across ranks equals one process");
}

/* A data-parallel job's evaluation when one rank's part failed (its
 * activations poisoned by an eager forward over a token outside the
 * vocabulary): that rank returns its op's status, every other rank
 * RP_EPOISON, none waits for the others past the all-reduce. */
static void gpt_eval_failure(void) {
  rp_runtime *rt = make_rt(30000);
  rp_kernel_tasks k;
  CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 1;
  c.heads = 2;
  c.width = 16;
  c.context = 8;
  c.vocab = 16;
  c.batch = 6; /* rows on every rank of 2 or 3 */
  c.ring = 1;
  c.dist = 1;
  c.seed = 5;
  rp_gpt *m = NULL;
  CHECK(rp_gpt_create(rt, &k, &c, &m));
  enum { B = 6, T = 8 };
  int32_t x[B * T], y[B * T];
  for (int i = 0; i < B * T; i++) {
    x[i] = (i * 7 + 3) % 16;
    y[i] = (i * 5 + 1) % 16;
  }
  double ev = -1;
  CHECK(rp_gpt_evaluate(m, x, y, 1, &ev));
  int last = RANK == NRANKS - 1;
  if (last) {
    rp_proc_info pi;
    CHECK(rp_proc_query(rt, rp_gpt_procs(m)[0], &pi));
    rp_rect r = rp_rect_1d(0, T - 1);
    rp_inst tok;
    CHECK(rp_instance_create(rt, pi.local, RP_I32, &r, NULL, &tok));
    int32_t bad[T] = {0, 1, 99};
    CHECK(rp_instance_write(rt, tok, bad, sizeof bad));
    CHECK(rp_gpt_forward(m, tok, 1));
    CHECK(rp_runtime_drain(rt));
    CHECK(rp_instance_free(rt, tok));
  }
  rp_status st = rp_gpt_evaluate(m, x, y, 1, &ev);
  if (last)
    EXPECT(st == RP_ERANGE && contains(rp_error_detail(), "token 99"),
           "the failed rank: %s: %s", rp_status_name(st), rp_error_detail());
  else
    EXPECT(st == RP_EPOISON &&
               contains(rp_error_detail(), "1 rank(s) of the job failed"),
           "rank %d: %s: %s", RANK, rp_status_name(st), rp_error_detail());
  CHECK(rp_gpt_destroy(m));
  CHECK(rp_runtime_destroy(rt));
  done_case("a GPT evaluation that failed on one rank fails on every rank");
}

/* The ranks record different steps: the others two all-reduces, rank 0
 * one. Rank 0's instantiate agrees on op 0 and returns; the others wait in
 * instantiate's agreement for op 1, a set-up collective. Rank 0 (the
 * shorter timeout) replays, times out and asks where the others wait: they
 * answer from the set-up, and the detail says so (not "an eager op"); its
 * notice then fails their instantiate at once, naming rank 0. */
static void setup_roll_call(void) {
  rp_runtime *rt = make_rt(RANK == 0 ? SHORT_MS : 3 * SHORT_MS);
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  rp_inst y = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL));
  if (RANK != 0)
    CHECK(rp_launch_allreduce(rt, &(rp_allreduce){y, RP_REDOP_SUM, {0}}, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex = NULL;
  rp_status st = rp_instantiate(g, NULL, &ex);
  CHECK(rp_graph_destroy(g));
  if (RANK == 0) {
    CHECK(st);
    rp_event e;
    CHECK(rp_replay(ex, NULL, &e));
    st = rp_event_wait(rt, e, -1);
    CHECK(rp_event_release(rt, e));
    const char *d = rp_exec_error_detail(ex);
    EXPECT(st == RP_EPEER, "replay: %s (%s)", rp_status_name(st), d);
    for (int j = 1; j < NRANKS; j++) {
      char want[64];
      snprintf(want, sizeof want, "rank %d waits in a set-up collective", j);
      EXPECT(contains(d, want), "replay detail: %s", d);
    }
    EXPECT(!contains(d, "eager"), "replay detail: %s", d);
    printf("   rank 0: %s\n", d);
    CHECK(rp_exec_destroy(ex));
  } else {
    const char *d = rp_error_detail();
    EXPECT(st == RP_EPEER && !ex, "instantiate: %s (%s)", rp_status_name(st),
           d);
    EXPECT(contains(d, "rank 0 gave up first"), "instantiate detail: %s", d);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(rp_instance_free(rt, x));
  CHECK(rp_instance_free(rt, y));
  CHECK(rp_runtime_destroy(rt));
  done_case("ranks recording other steps: the roll call names a rank in "
            "instantiate's set-up as such");
}

/* MPI finalized before the runtime goes (the wrong order): the ops that
 * would call MPI fail with RP_EINVAL naming it (MPICH would abort the
 * process), instantiate refuses, and destroying still works. Runs last,
 * in place of main's MPI_Finalize; a failure exits 1 (no MPI_Abort now). */
static void after_finalize(void) {
  rp_runtime *rt = make_rt(SHORT_MS);
  rp_inst x = inst_2d(rt, RP_F32, 0, 0, 0, 7);
  float v[8] = {1, 1, 1, 1, 1, 1, 1, 1}, got[8];
  CHECK(rp_instance_write(rt, x, v, sizeof v));
  rp_graph *g;
  CHECK(rp_capture_begin(rt, NULL));
  CHECK(rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL));
  CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  CHECK(rp_instantiate(g, NULL, &ex));
  rp_event e;
  CHECK(rp_replay(ex, NULL, &e));
  wait_ok(rt, e); /* every rank: 1 * NRANKS */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  int bad = 0;
#define LATE(cond, ...)                                                        \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rank %d: FAIL at test_dist.c:%d: ", RANK, __LINE__);    \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      bad = 1;                                                                 \
    }                                                                          \
  } while (0)
  const char *want = "MPI is finalized";
  /* a replay */
  rp_status st = rp_replay(ex, NULL, &e);
  LATE(st == RP_OK, "replay: %s", rp_status_name(st));
  st = rp_event_wait(rt, e, -1);
  rp_event_release(rt, e);
  const char *d = rp_exec_error_detail(ex);
  LATE(st == RP_EINVAL && contains(d, want) && contains(d, "all-reduce"),
       "replay after MPI_Finalize: %s (%s)", rp_status_name(st), d);
  /* an eager all-reduce */
  st = rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e);
  LATE(st == RP_OK, "eager launch: %s", rp_status_name(st));
  st = rp_event_wait(rt, e, -1);
  rp_event_release(rt, e);
  d = rp_runtime_dist_detail(rt);
  LATE(st == RP_EINVAL && contains(d, want),
       "eager all-reduce after MPI_Finalize: %s (%s)", rp_status_name(st), d);
  /* nothing written */
  LATE(rp_instance_read(rt, x, got, sizeof got) == RP_OK &&
           got[0] == (float)NRANKS && got[7] == (float)NRANKS,
       "the instance holds %g, not %d", (double)got[0], NRANKS);
  /* instantiate: no communicator to duplicate */
  rp_exec *ex2 = NULL;
  st = rp_instantiate(g, NULL, &ex2);
  d = rp_error_detail();
  LATE(st == RP_EINVAL && !ex2 && contains(d, want),
       "instantiate after MPI_Finalize: %s (%s)", rp_status_name(st), d);
  LATE(rp_graph_destroy(g) == RP_OK, "graph destroy");
  LATE(rp_exec_destroy(ex) == RP_OK, "exec destroy: %s", rp_error_detail());
  LATE(rp_instance_free(rt, x) == RP_OK, "instance free");
  LATE(rp_runtime_destroy(rt) == RP_OK, "runtime destroy: %s",
       rp_error_detail());
#undef LATE
  if (bad)
    exit(1);
  if (RANK == 0)
    printf("ok %d ranks: MPI finalized before the runtime: RP_EINVAL, no "
           "abort\n",
           NRANKS);
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &RANK);
  MPI_Comm_size(MPI_COMM_WORLD, &NRANKS);
  if (provided < MPI_THREAD_MULTIPLE)
    fail(__LINE__, "MPI offers thread level %d only", provided);
  if (NRANKS < 2)
    fail(__LINE__, "run with mpiexec -n 2 or more");
  /* argv[1], when given, runs only the case of that name */
  static const struct {
    const char *name;
    void (*fn)(void);
  } cases[] = {
      {"eager_allreduce", eager_allreduce},
      {"eager_copies", eager_copies},
      {"parallel_ops", parallel_ops},
      {"sums_in_rank_order", sums_in_rank_order},
      {"inflight", inflight},
      {"inflight_differs", inflight_differs},
      {"builder", builder},
      {"dp_equivalence", dp_equivalence},
      {"gpt_across_ranks", gpt_across_ranks},
      {"gpt_eval_failure", gpt_eval_failure},
      {"tune_refused", tune_refused},
      {"stale_rank", stale_rank},
      {"refused_on_one_rank", refused_on_one_rank},
      {"missing_peer", missing_peer},
      {"late_allreduce", late_allreduce},
      {"shape_mismatch", shape_mismatch},
      {"eager_after_failure", eager_after_failure},
      {"eager_failure_told", eager_failure_told},
      {"pop_checks", pop_checks},
      {"cascade", cascade},
      {"skipped_recv", skipped_recv},
      {"setup_roll_call", setup_roll_call},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if (argc < 2 || !strcmp(argv[1], cases[i].name))
      cases[i].fn();
  MPI_Barrier(MPI_COMM_WORLD);
  if (argc < 2 || !strcmp(argv[1], "after_finalize"))
    after_finalize(); /* finalizes MPI */
  else
    MPI_Finalize();
  if (RANK == 0)
    printf("all distributed cases passed on %d ranks\n", NRANKS);
  return 0;
}
