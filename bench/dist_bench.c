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
 * over IN_STEP) against a loop over the same IN_STEP buffers in turn.
 *
 * Failures: a set-up step or timed run that fails on one rank fails on
 * every rank (meet: the ranks learn it together, then stop, with no rank
 * left in a collective call); a rank waits at most the peer timeout
 * (REPRISE_DIST_TIMEOUT_MS) for the others there, then stops every rank
 * with MPI_Abort, as `reprise train --dist` does. */
#include "bench/bench_impl.h"

#include "train/mlp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
/* How long a replay waits for a peer (rp_runtime_config.dist_timeout_ms)
 * and a rank for the others at the benchmark's own meeting points. */
static uint32_t TIMEOUT_MS;

static rp_status ck(const char *what, rp_status st) {
  if (st)
    fprintf(stderr, "reprise bench --dist: rank %d: %s: %s (%s)\n", RANK, what,
            rp_status_name(st), rp_error_detail());
  return st;
}

/* The largest of every rank's v[0..n-1] (n <= 2) into m, the ranks'
 * meeting point. A healthy rank waits for the others at most TIMEOUT_MS,
 * then stops every rank (MPI_Abort, status 1): a peer that does not come
 * is frozen or gone, and a blocking collective would wait for it without
 * end. A rank that failed waits twice as long, and a second more: a
 * healthy peer may first have to time out itself, inside the runtime's
 * own wait for this rank (the same TIMEOUT_MS), before it comes; so a
 * failure one rank alone had reaches every rank as a failure, not as a
 * missing peer. A healthy rank spins (MPI_Barrier's start, no sleep
 * between the polls); a failed one polls every millisecond. */
static void meet(const double *v, double *m, int n, int failed) {
  MPI_Request req;
  MPI_Iallreduce(v, m, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req);
  uint64_t t0 = rp_bench_now_ns();
  uint64_t limit = (uint64_t)TIMEOUT_MS * 1000000 * (failed ? 2 : 1) +
                   (failed ? 1000000000ull : 0);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    if (rp_bench_now_ns() - t0 > limit) {
      fprintf(stderr,
              "reprise bench --dist: rank %d: another rank did not answer "
              "within %llu ms (REPRISE_DIST_TIMEOUT_MS%s)%s: stopping every "
              "rank\n",
              RANK, (unsigned long long)(limit / 1000000),
              failed ? " x 2 + 1 s" : "",
              failed ? " after this rank failed" : "");
      fflush(stderr);
      /* MPI_Abort ends the process without its signal handlers: the
       * outputs being written (--json) go first */
      rp_output_discard_all();
      usleep(200000); /* time for the launcher to forward the line */
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (failed)
      usleep(1000);
  }
}

/* RP_OK when st is RP_OK on every rank, else RP_EBACKEND on every rank
 * (the rank that failed said why): all ranks stop or go on together
 * instead of leaving the others in the next collective call. */
static rp_status agree(rp_status st) {
  double v = st != RP_OK, m = 0;
  meet(&v, &m, 1, st != RP_OK);
  return m > 0 ? (st ? st : RP_EBACKEND) : RP_OK;
}

/* The slowest rank's seconds, or -1 when st failed on any rank. */
static double slowest(rp_status st, double s) {
  double v[2] = {st != RP_OK, s}, m[2] = {0, 0};
  meet(v, m, 2, st != RP_OK);
  return m[0] > 0 ? -1 : m[1];
}

/* Every rank at once: the start of a timed run. */
static void start_together(void) {
  double v = 0, m = 0;
  meet(&v, &m, 1, 0);
}

static rp_status make_rt(unsigned workers, rp_runtime **out) {
  static MPI_Comm world;
  world = MPI_COMM_WORLD;
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = workers;
  cfg.quiet = 1;
  cfg.ignore_env = 1; /* the options decide; the timeout: rp_bench_opts */
  cfg.dist_timeout_ms = TIMEOUT_MS;
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

/* Seconds per step: `reps` replays back to back, or eager steps; the
 * slowest rank's, or -1 when a rank failed. A failed replay ends the run:
 * after a peer's timeout every later one fails at once (RP_EPEER), and the
 * loop would go on for --reps. Each replay's event is kept for KEEP more
 * replays (they run in order, a window of 4 in flight); one in KEEP is
 * queried then: a load, not a wait, once every KEEP replays. */
#define KEEP 8
static double time_steps(model *md, rp_exec *ex, int reps) {
  start_together();
  uint64_t t0 = rp_bench_now_ns();
  rp_event ev[KEEP] = {RP_NO_EVENT}, last = RP_NO_EVENT;
  rp_status st = RP_OK;
  for (int i = 0; i < reps && !st; i++) {
    rp_mlp_step_args sa = {(uint32_t)i % md->batches, 0.05f};
    rp_event *e = &ev[i % KEEP];
    /* once every KEEP replays: a failure is seen within 2 KEEP */
    rp_status q = e->id && i % KEEP == 0 ? rp_event_query(md->rt, *e) : RP_OK;
    rp_event_release(md->rt, *e);
    *e = RP_NO_EVENT;
    if (q != RP_OK && q != RP_EAGAIN) {
      st = q;
      break;
    }
    if (ex) {
      rp_replay_args ra = {.args = &sa, .args_size = sizeof sa};
      st = rp_replay(ex, &ra, e);
      last = *e;
    } else if (!(st = rp_mlp_step(md->m, &sa))) {
      st = rp_runtime_drain(md->rt); /* eager: each step waits */
    }
  }
  if (!st && ex)
    st = rp_event_wait(md->rt, last, -1);
  if (!st)
    st = rp_runtime_drain(md->rt);
  for (int k = 0; k < KEEP; k++)
    rp_event_release(md->rt, ev[k]);
  double s = (double)(rp_bench_now_ns() - t0) * 1e-9 / reps;
  return slowest(ck(ex ? "replay" : "eager step", st), s);
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

static void step_row(row_out *o, const char *mode, unsigned workers, int reps,
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
  rp_bench_json_uint(o->json, "reps", (uint64_t)reps);
  rp_bench_json_num(o->json, "us_per_step", t.median * 1e6);
  rp_bench_json_num(o->json, "us_min", t.min * 1e6);
  rp_bench_json_num(o->json, "us_max", t.max * 1e6);
  rp_bench_json_end(o->json);
}

static int bench_step(const rp_bench_opts *bo, row_out *o) {
  /* the command refuses more (RP_MLP_MAX_PROCS shards per rank) */
  unsigned w = bo->workers ? bo->workers : 1;
  rp_runtime *rt = NULL;
  if (agree(make_rt(w, &rt))) {
    rp_runtime_destroy(rt);
    return 1;
  }
  model md;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  /* --reps wins over --quick, as for the DAG workloads */
  int reps = bo->reps ? (int)bo->reps : bo->quick ? 5 : 200;
  rp_status st = model_init(&md, rt, w);
  if (!st)
    st = ck("record", rp_mlp_record(md.m, &g));
  /* instantiate is collective (the persistent all-reduces): every rank
   * reaches it or none does */
  if (!(st = agree(st)))
    st = agree(ck("instantiate", rp_instantiate(g, NULL, &ex)));
  rp_graph_destroy(g);
  double rv[RUNS], ev[RUNS];
  if (!st && time_steps(&md, ex, reps / 2 + 1) < 0) /* warm-up, trials */
    st = RP_EBACKEND;
  for (int r = 0; r < RUNS && !st; r++) {
    rv[r] = time_steps(&md, ex, reps); /* -1 on every rank, or none */
    ev[r] = rv[r] < 0 ? -1 : time_steps(&md, NULL, reps / 4 + 1);
    if (rv[r] < 0 || ev[r] < 0)
      st = RP_EBACKEND;
  }
  if (!st) {
    step_row(o, "replay", w, reps, rp_bench_summarize(rv, RUNS));
    step_row(o, "eager", w, reps / 4 + 1, rp_bench_summarize(ev, RUNS));
  }
  rp_exec_destroy(ex);
  rp_mlp_destroy(md.m);
  rp_runtime_destroy(rt);
  return st != RP_OK;
}

/* ---- the all-reduce: replayed (persistent) vs plain MPI_Allreduce ---- */

static double time_replays(rp_runtime *rt, rp_exec *ex, int reps) {
  start_together();
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
  return slowest(ck("all-reduce replay", st), s);
}

/* reps blocking all-reduces, of bufs[0], bufs[1], ... bufs[nb - 1] in
 * turn (MPI's own wait: a peer frozen inside the loop holds it). */
static double time_plain(float *const *bufs, int nb, int n, int reps) {
  start_together();
  uint64_t t0 = rp_bench_now_ns();
  for (int i = 0; i < reps; i++)
    MPI_Allreduce(MPI_IN_PLACE, bufs[i % nb], n, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  return slowest(RP_OK, (double)(rp_bench_now_ns() - t0) * 1e-9 / reps);
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
  /* instantiate is collective: every rank reaches it or none does */
  st = agree(ck("all-reduce buffers", st));
  if (!st)
    st = agree(ck("all-reduce set-up", allreduce_exec(rt, x, 1, &ex)));
  if (!st)
    st = agree(ck("all-reduce set-up", allreduce_exec(rt, x, IN_STEP, &exk)));
  /* about 20 ms of traffic per run, at least 10 calls */
  int reps = quick ? 10 : (int)(((size_t)64 << 20) / (bytes + 16384)) + 10;
  int kreps = (reps + IN_STEP - 1) / IN_STEP;
  double rv[RUNS], pv[RUNS], kv[RUNS], qv[RUNS];
  if (!st) { /* warm all four */
    int bad = time_replays(rt, ex, reps / 4 + 2) < 0;
    time_plain(bufs, 1, n, reps / 4 + 2);
    bad = bad || time_replays(rt, exk, kreps / 4 + 2) < 0;
    time_plain(bufs, IN_STEP, n, kreps * IN_STEP / 4 + 2);
    st = bad ? RP_EBACKEND : RP_OK;
  }
  for (int r = 0; r < RUNS && !st; r++) { /* alternate: drift hits all */
    if ((rv[r] = time_replays(rt, ex, reps)) < 0) { /* on every rank */
      st = RP_EBACKEND;
      break;
    }
    pv[r] = time_plain(bufs, 1, n, reps);
    kv[r] = time_replays(rt, exk, kreps) / IN_STEP;
    qv[r] = time_plain(bufs, IN_STEP, n, kreps * IN_STEP);
    if (kv[r] < 0)
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
  rp_runtime *rt = NULL;
  if (agree(make_rt(1, &rt))) {
    rp_runtime_destroy(rt);
    return 1;
  }
  int rc = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !rc; i++)
    rc = bench_allreduce_size(rt, sizes[i], bo->quick, o);
  rp_runtime_destroy(rt);
  return rc;
}

/* fprintf to f, for rp_bench_opts.say left NULL. */
static void say_plain(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say_plain(FILE *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
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
  TIMEOUT_MS = bo->dist_timeout_ms ? bo->dist_timeout_ms : 30000;
  /* rank 0's --json through the output writer (reprise.h "Output
   * files"): replaced only by a whole file */
  rp_output *out = NULL;
  int bad = RANK == 0 && json_path && rp_output_open(json_path, &out);
  FILE *json = rp_output_file(out);
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (bad) {
    if (RANK == 0)
      (bo->say ? bo->say : say_plain)(stderr, "reprise bench: --json %s: %s\n",
                                      json_path, rp_error_detail());
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
    (bo->say ? bo->say : say_plain)(stderr, "reprise bench: --json %s: %s\n",
                                    json_path, rp_error_detail());
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
