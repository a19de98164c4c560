/* bench/dist_bench.c — `reprise bench --dist` under mpiexec -n N: the
 * data-parallel training step across ranks (replayed vs eager), and the
 * all-reduce the step's gradients use, replayed (a persistent
 * MPI_Allreduce_init started per replay) against a plain loop of blocking
 * MPI_Allreduce on the same buffers.
 *
 * The step is `reprise train`'s (train/mlp.h) with one hidden layer,
 * 256-256-10 on Gaussian clusters: a global batch split across ranks and,
 * inside a rank, across its workers (one shard each); a worker's gradients
 * are summed inside the rank (a reduction operator) and all-reduced across
 * ranks (the loss and four parameters: five all-reduces per step).
 *
 * Every figure is the slowest rank's time (ranks start each run together,
 * after a barrier), median of RUNS runs; rank 0 prints. Bandwidth: algbw =
 * bytes / time; busbw = algbw * 2 (n - 1) / n (the bytes each rank moves in
 * a ring all-reduce, as nccl-tests reports it). Goal: the
 * replayed all-reduce costs no more than the plain MPI loop.
 *
 * The all-reduce is replayed two ways: alone (a graph of one all-reduce,
 * one replay each: the replay's own cost, its hand-off to the worker and
 * its completion, is paid per all-reduce) against a loop over that buffer,
 * and inside a step (a graph of IN_STEP all-reduces of IN_STEP buffers,
 * one after another, as a training step's gradients are: the replay's time
 * over IN_STEP) against a loop over the same IN_STEP buffers in turn. */
#include "bench/bench_impl.h"

#include "train/mlp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef REPRISE_HAVE_MPI
#include <mpi.h>

#define RUNS 5
#define B_GLOBAL 256 /* rows per step, all ranks */
#define D_IN 256
#define D_HID 256
#define N_CLS 10
#define BATCHES 4  /* global batches in the data set */
#define IN_STEP 16 /* all-reduces in the "inside a step" graph */

static int RANK, NRANKS;

static rp_status ck(const char *what, rp_status st) {
  if (st)
    fprintf(stderr, "reprise bench --dist: rank %d: %s: %s (%s)\n", RANK, what,
            rp_status_name(st), rp_error_detail());
  return st;
}

/* The slowest rank's seconds. */
static double slowest(double s) {
  double m = 0;
  MPI_Allreduce(&s, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

static rp_status make_rt(unsigned workers, rp_runtime **out) {
  static MPI_Comm world;
  world = MPI_COMM_WORLD;
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = workers;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  cfg.comm = &world;
  return ck("rp_runtime_create", rp_runtime_create(&cfg, out));
}

static rp_status inst2(rp_runtime *rt, rp_dtype t, int64_t r0, int64_t r1,
                       int64_t cols, rp_inst *out) {
  rp_rect r = rp_rect_2d(r0, r1, 0, cols - 1);
  return rp_instance_create(rt, 0, t, &r, NULL, out);
}

/* ---- the data-parallel MLP step: train/mlp.h's, one hidden layer ---- */

typedef struct model {
  rp_runtime *rt;
  rp_mlp *m;
  uint32_t batches;
} model;

static rp_status model_init(model *md, rp_runtime *rt, unsigned procs) {
  memset(md, 0, sizeof *md);
  md->rt = rt;
  rp_kernel_tasks k;
  rp_dataset d = {0};
  rp_mlp_config cfg;
  rp_mlp_config_init(&cfg);
  cfg.hidden[0] = D_HID;
  cfg.nhidden = 1;
  cfg.batch = B_GLOBAL;
  cfg.procs = procs;
  cfg.dist = 1;
  rp_status st = ck("kernels", rp_kernels_register(rt, &k));
  if (!st)
    st = ck("data", rp_data_generate(RP_DATA_BLOBS, B_GLOBAL * BATCHES, D_IN,
                                     N_CLS, 1, &d));
  if (!st)
    st = ck("model set-up", rp_mlp_create(rt, &k, &cfg, &d, &md->m));
  rp_data_free(&d);
  if (!st)
    md->batches = rp_mlp_batches(md->m);
  return st;
}

/* Seconds per step: `reps` replays back to back, or eager steps. */
static double time_steps(model *md, rp_exec *ex, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = rp_bench_now_ns();
  rp_event e = RP_NO_EVENT;
  rp_status st = RP_OK;
  for (int i = 0; i < reps && !st; i++) {
    rp_mlp_step_args sa = {(uint32_t)i % md->batches, 0.05f};
    rp_event_release(md->rt, e);
    e = RP_NO_EVENT;
    if (ex) {
      rp_replay_args ra = {.args = &sa, .args_size = sizeof sa};
      st = rp_replay(ex, &ra, &e);
    } else if (!(st = rp_mlp_step(md->m, &sa))) {
      st = rp_runtime_drain(md->rt); /* eager: each step waits */
    }
  }
  if (!st && ex)
    st = rp_event_wait(md->rt, e, -1);
  if (!st)
    st = rp_runtime_drain(md->rt);
  rp_event_release(md->rt, e);
  double s = (double)(rp_bench_now_ns() - t0) * 1e-9 / reps;
  if (ck(ex ? "replay" : "eager step", st))
    s = -1;
  return slowest(s);
}

typedef struct row_out {
  FILE *table;
  rp_bench_json *json;
} row_out;

/* The first failed write to the table (MPI leaves standard output line
 * buffered: the cause is known only at the write that failed). */
static int TABLE_ERRNO;

static void table_check(FILE *t) {
  if (t && ferror(t) && !TABLE_ERRNO)
    TABLE_ERRNO = errno ? errno : EIO;
}

static void step_row(row_out *o, const char *mode, unsigned workers,
                     rp_bench_stats t) {
  if (RANK != 0)
    return;
  if (o->table)
    fprintf(o->table,
            "  step  %-7s %2d rank%s x %u worker%s  %9.1f us/step "
            "(min %.1f, max %.1f)\n",
            mode, NRANKS, NRANKS == 1 ? " " : "s", workers,
            workers == 1 ? " " : "s", t.median * 1e6, t.min * 1e6, t.max * 1e6);
  table_check(o->table);
  rp_bench_json_begin(o->json);
  rp_bench_json_str(o->json, "bench", "dist_step");
  rp_bench_json_str(o->json, "mode", mode);
  rp_bench_json_uint(o->json, "ranks", (uint64_t)NRANKS);
  rp_bench_json_uint(o->json, "workers", workers);
  rp_bench_json_num(o->json, "us_per_step", t.median * 1e6);
  rp_bench_json_num(o->json, "us_min", t.min * 1e6);
  rp_bench_json_num(o->json, "us_max", t.max * 1e6);
  rp_bench_json_end(o->json);
}

static int bench_step(const rp_bench_opts *bo, row_out *o) {
  unsigned w = bo->workers ? bo->workers : 1;
  if (w > RP_MLP_MAX_PROCS)
    w = RP_MLP_MAX_PROCS;
  rp_runtime *rt;
  if (make_rt(w, &rt))
    return 1;
  model md;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  int reps = bo->quick ? 5 : bo->reps ? (int)bo->reps : 200;
  rp_status st = model_init(&md, rt, w);
  if (!st)
    st = ck("record", rp_mlp_record(md.m, &g));
  if (!st)
    st = ck("instantiate", rp_instantiate(g, NULL, &ex));
  rp_graph_destroy(g);
  double rv[RUNS], ev[RUNS];
  if (!st)
    time_steps(&md, ex, reps / 2 + 1); /* warm-up, placement trials */
  for (int r = 0; r < RUNS && !st; r++) {
    rv[r] = time_steps(&md, ex, reps);
    ev[r] = time_steps(&md, NULL, reps / 4 + 1);
    if (rv[r] < 0 || ev[r] < 0)
      st = RP_EBACKEND;
  }
  if (!st) {
    step_row(o, "replay", w, rp_bench_summarize(rv, RUNS));
    step_row(o, "eager", w, rp_bench_summarize(ev, RUNS));
  }
  rp_exec_destroy(ex);
  rp_mlp_destroy(md.m);
  rp_runtime_destroy(rt);
  return st != RP_OK;
}

/* ---- the all-reduce: replayed (persistent) vs plain MPI_Allreduce ---- */

static double time_replays(rp_runtime *rt, rp_exec *ex, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = rp_bench_now_ns();
  rp_event e = RP_NO_EVENT;
  rp_status st = RP_OK;
  for (int i = 0; i < reps && !st; i++) {
    rp_event_release(rt, e);
    st = rp_replay(ex, NULL, &e);
  }
  if (!st)
    st = rp_event_wait(rt, e, -1);
  rp_event_release(rt, e);
  double s = (double)(rp_bench_now_ns() - t0) * 1e-9 / reps;
  return slowest(ck("all-reduce replay", st) ? -1 : s);
}

/* reps blocking all-reduces, of bufs[0], bufs[1], ... bufs[nb - 1] in
 * turn. */
static double time_plain(float *const *bufs, int nb, int n, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = rp_bench_now_ns();
  for (int i = 0; i < reps; i++)
    MPI_Allreduce(MPI_IN_PLACE, bufs[i % nb], n, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  return slowest((double)(rp_bench_now_ns() - t0) * 1e-9 / reps);
}

static void allreduce_row(row_out *o, size_t bytes, rp_bench_stats rep,
                          rp_bench_stats plain, rp_bench_stats step,
                          rp_bench_stats plain_k) {
  if (RANK != 0)
    return;
  double bus = 2.0 * (NRANKS - 1) / NRANKS;
  double rbw = (double)bytes / rep.median * 1e-9;
  double pbw = (double)bytes / plain.median * 1e-9;
  if (o->table)
    fprintf(o->table,
            "  allreduce %8zu B  replay %9.2f us %7.3f GB/s (bus "
            "%6.3f)  plain MPI_Allreduce %9.2f us %7.3f GB/s (bus %6.3f)  "
            "replay/plain %.2f\n"
            "  allreduce %8zu B  inside a step of %d: %9.2f us each  "
            "plain over %d buffers %9.2f us  in-step/plain %.2f\n",
            bytes, rep.median * 1e6, rbw, rbw * bus, plain.median * 1e6, pbw,
            pbw * bus, rep.median / plain.median, bytes, IN_STEP,
            step.median * 1e6, IN_STEP, plain_k.median * 1e6,
            step.median / plain_k.median);
  table_check(o->table);
  rp_bench_json_begin(o->json);
  rp_bench_json_str(o->json, "bench", "dist_allreduce");
  rp_bench_json_uint(o->json, "ranks", (uint64_t)NRANKS);
  rp_bench_json_uint(o->json, "bytes", bytes);
  rp_bench_json_num(o->json, "replay_us", rep.median * 1e6);
  rp_bench_json_num(o->json, "replay_algbw_gbps", rbw);
  rp_bench_json_num(o->json, "replay_busbw_gbps", rbw * bus);
  rp_bench_json_num(o->json, "plain_us", plain.median * 1e6);
  rp_bench_json_num(o->json, "plain_algbw_gbps", pbw);
  rp_bench_json_num(o->json, "plain_busbw_gbps", pbw * bus);
  rp_bench_json_num(o->json, "replay_over_plain", rep.median / plain.median);
  rp_bench_json_uint(o->json, "in_step", IN_STEP);
  rp_bench_json_num(o->json, "in_step_us", step.median * 1e6);
  rp_bench_json_num(o->json, "in_step_plain_us", plain_k.median * 1e6);
  rp_bench_json_num(o->json, "in_step_over_plain",
                    step.median / plain_k.median);
  rp_bench_json_end(o->json);
}

/* An exec of k all-reduces, of x[0], ..., x[k - 1] one after another. */
static rp_status allreduce_exec(rp_runtime *rt, const rp_inst *x, int k,
                                rp_exec **out) {
  rp_graph *g = NULL;
  rp_status st = rp_capture_begin(rt, NULL);
  for (int i = 0; !st && i < k; i++)
    if ((st = rp_launch_allreduce(rt, &(rp_allreduce){x[i], RP_REDOP_SUM, {0}},
                                  NULL)) != RP_OK)
      rp_capture_abort(rt);
  if (!st)
    st = rp_capture_end(rt, &g);
  if (!st)
    st = rp_instantiate(g, &(rp_exec_opts){.no_replace = 1}, out);
  rp_graph_destroy(g);
  return st;
}

static int bench_allreduce_size(rp_runtime *rt, size_t bytes, int quick,
                                row_out *o) {
  int n = (int)(bytes / sizeof(float));
  rp_inst x[IN_STEP] = {{0}};
  float *bufs[IN_STEP];
  rp_exec *ex = NULL, *exk = NULL;
  rp_status st = RP_OK;
  for (int i = 0; !st && i < IN_STEP; i++)
    if (!(st = inst2(rt, RP_F32, 0, 0, n, &x[i])))
      bufs[i] = rp_instance_ptr(rt, x[i]);
  if (!st)
    st = allreduce_exec(rt, x, 1, &ex);
  if (!st)
    st = allreduce_exec(rt, x, IN_STEP, &exk);
  /* about 20 ms of traffic per run, at least 10 calls */
  int reps = quick ? 10 : (int)(((size_t)64 << 20) / (bytes + 16384)) + 10;
  int kreps = (reps + IN_STEP - 1) / IN_STEP;
  double rv[RUNS], pv[RUNS], kv[RUNS], qv[RUNS];
  if (!ck("all-reduce set-up", st)) {
    time_replays(rt, ex, reps / 4 + 2); /* warm all four */
    time_plain(bufs, 1, n, reps / 4 + 2);
    time_replays(rt, exk, kreps / 4 + 2);
    time_plain(bufs, IN_STEP, n, kreps * IN_STEP / 4 + 2);
  }
  for (int r = 0; r < RUNS && !st; r++) { /* alternate: drift hits all */
    rv[r] = time_replays(rt, ex, reps);
    pv[r] = time_plain(bufs, 1, n, reps);
    kv[r] = time_replays(rt, exk, kreps) / IN_STEP;
    qv[r] = time_plain(bufs, IN_STEP, n, kreps * IN_STEP);
    if (rv[r] < 0 || kv[r] < 0)
      st = RP_EBACKEND;
  }
  if (!st)
    allreduce_row(o, bytes, rp_bench_summarize(rv, RUNS),
                  rp_bench_summarize(pv, RUNS), rp_bench_summarize(kv, RUNS),
                  rp_bench_summarize(qv, RUNS));
  rp_exec_destroy(ex);
  rp_exec_destroy(exk);
  for (int i = 0; i < IN_STEP; i++)
    if (x[i].id)
      rp_instance_free(rt, x[i]);
  return st != RP_OK;
}

static int bench_allreduce(const rp_bench_opts *bo, row_out *o) {
  static const size_t sizes[] = {4096, 65536, 1 << 20, 16 << 20};
  rp_runtime *rt;
  if (make_rt(1, &rt))
    return 1;
  int rc = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !rc; i++)
    rc = bench_allreduce_size(rt, sizes[i], bo->quick, o);
  rp_runtime_destroy(rt);
  return rc;
}

int rp_bench_dist(const rp_bench_opts *bo, FILE *table, const char *json_path) {
  int init = 0, mine = 0, provided = 0;
  MPI_Initialized(&init);
  if (!init) {
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    mine = 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &RANK);
  MPI_Comm_size(MPI_COMM_WORLD, &NRANKS);
  /* rank 0's --json through the output writer (reprise.h "Output
   * files"): replaced only by a whole file */
  rp_output *out = NULL;
  int bad = RANK == 0 && json_path && rp_output_open(json_path, &out);
  FILE *json = rp_output_file(out);
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (bad) {
    if (RANK == 0)
      fprintf(stderr, "reprise bench: --json %s: %s\n", json_path,
              rp_error_detail());
    if (mine)
      MPI_Finalize();
    return 1;
  }
  if (NRANKS == 1 && RANK == 0) /* one process: nothing crosses ranks */
    fprintf(stderr,
            "reprise bench --dist: 1 rank: only the step rows; run it under "
            "mpiexec -n N (N >= 2) to measure communication between ranks "
            "(the all-reduce rows)\n");
  rp_bench_json j;
  rp_bench_json_open(&j, json, bo->quick);
  row_out o = {RANK == 0 ? table : NULL, &j};
  if (RANK == 0 && table)
    fprintf(table,
            "reprise bench --dist: %d rank%s (MPI), CPU backend; "
            "slowest rank, median of %d runs\n",
            NRANKS, NRANKS == 1 ? "" : "s", RUNS);
  table_check(o.table);
  int rc = bench_step(bo, &o);
  if (!rc && NRANKS > 1) /* one rank's "all-reduce" is a copy */
    rc = bench_allreduce(bo, &o);
  rp_bench_json_close(&j);
  if (rc)
    rp_output_abort(out);
  else if (out && rp_output_commit(out) != RP_OK) {
    fprintf(stderr, "reprise bench: --json %s: %s\n", json_path,
            rp_error_detail());
    rc = 1;
  }
  if (o.table && fflush(o.table))
    table_check(o.table);
  if (!rc && TABLE_ERRNO) { /* a reader gone (| head) wants no word */
    if (TABLE_ERRNO != EPIPE)
      fprintf(stderr, "reprise bench: writing to standard output failed: %s\n",
              strerror(TABLE_ERRNO));
    rc = 1;
  }
  if (mine)
    MPI_Finalize();
  return rc;
}

#else /* !REPRISE_HAVE_MPI */

int rp_bench_dist(const rp_bench_opts *bo, FILE *table, const char *json_path) {
  (void)bo, (void)table, (void)json_path;
  fprintf(stderr, "reprise bench --dist: this build has no MPI\n");
  return 1;
}

#endif
