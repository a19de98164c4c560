/* bench/dist_bench.c — `reprise bench --dist` under mpiexec -n N: the
 * data-parallel training step across ranks (replayed vs eager), and the
 * all-reduce the step's gradients use, replayed (a persistent
 * MPI_Allreduce_init started per replay) against a plain loop of blocking
 * MPI_Allreduce on the same buffers.
 *
 * The step is a two-layer MLP (gemm, bias, ReLU, softmax cross-entropy,
 * SGD with momentum) over a global batch split across ranks and, inside a
 * rank, across its workers (one shard each); a worker's gradients are
 * summed inside the rank (a reduction operator) and all-reduced across
 * ranks, four parameters, four all-reduces per step.
 *
 * Every figure is the slowest rank's time (ranks start each run together,
 * after a barrier), median of RUNS runs; rank 0 prints. Bandwidth: algbw =
 * bytes / time; busbw = algbw * 2 (n - 1) / n (the bytes each rank moves in
 * a ring all-reduce, as nccl-tests reports it). Goal (issue 8): the
 * replayed all-reduce costs no more than the plain MPI loop. */
#include "bench/bench_impl.h"

#include "kernels/tasks.h"

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

/* ---- the data-parallel MLP step ---- */

enum { P_W1, P_B1, P_W2, P_B2, NPARAM };
#define MAX_SHARDS 16

typedef struct shard {
  int rows;
  rp_inst x, lab, h, a, logits, probs, loss, dl, da, dh;
  rp_inst g[NPARAM];
} shard;

typedef struct mlp {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_inst w[NPARAM], v[NPARAM], g[NPARAM];
  shard sh[MAX_SHARDS];
  unsigned nsh;
} mlp;

static const int64_t PSHAPE[NPARAM][2] = {
    {D_IN, D_HID}, {1, D_HID}, {D_HID, N_CLS}, {1, N_CLS}};

static rp_status shard_init(mlp *m, shard *s, int64_t lo, int64_t hi) {
  rp_runtime *rt = m->rt;
  s->rows = (int)(hi - lo + 1);
  rp_status st = inst2(rt, RP_F32, lo, hi, D_IN, &s->x);
  if (!st)
    st = inst2(rt, RP_I32, lo, hi, 1, &s->lab);
  rp_inst *acts[] = {&s->h, &s->a, &s->da, &s->dh};
  for (int i = 0; i < 4 && !st; i++)
    st = inst2(rt, RP_F32, lo, hi, D_HID, acts[i]);
  rp_inst *outs[] = {&s->logits, &s->probs, &s->dl};
  for (int i = 0; i < 3 && !st; i++)
    st = inst2(rt, RP_F32, lo, hi, N_CLS, outs[i]);
  if (!st)
    st = inst2(rt, RP_F32, 0, 0, 1, &s->loss);
  for (int p = 0; p < NPARAM && !st; p++)
    st = m->nsh == 1
             ? (s->g[p] = m->g[p], RP_OK)
             : inst2(rt, RP_F32, 0, PSHAPE[p][0] - 1, PSHAPE[p][1], &s->g[p]);
  /* deterministic inputs: a class per row and a noisy one-hot */
  float *xb = calloc((size_t)s->rows * D_IN, sizeof *xb);
  int32_t *lb = calloc((size_t)s->rows, sizeof *lb);
  for (int r = 0; !st && xb && lb && r < s->rows; r++) {
    lb[r] = (int32_t)((lo + r) % N_CLS);
    for (int j = 0; j < D_IN; j++)
      xb[r * D_IN + j] = (float)(((lo + r) * 31 + j * 17) % 23) * 0.01f +
                         (j % N_CLS == lb[r] ? 1.0f : 0.0f);
  }
  if (!st && (!xb || !lb))
    st = RP_ENOMEM;
  if (!st)
    st = rp_instance_write(rt, s->x, xb, sizeof *xb * (size_t)s->rows * D_IN);
  if (!st)
    st = rp_instance_write(rt, s->lab, lb, sizeof *lb * (size_t)s->rows);
  free(xb);
  free(lb);
  return ck("shard set-up", st);
}

static rp_status mlp_init(mlp *m, rp_runtime *rt, unsigned nsh) {
  memset(m, 0, sizeof *m);
  m->rt = rt;
  m->nsh = nsh;
  rp_status st = ck("kernels", rp_kernels_register(rt, &m->k));
  for (int p = 0; p < NPARAM && !st; p++) {
    int64_t r = PSHAPE[p][0], c = PSHAPE[p][1];
    st = inst2(rt, RP_F32, 0, r - 1, c, &m->w[p]);
    if (!st)
      st = inst2(rt, RP_F32, 0, r - 1, c, &m->v[p]);
    if (!st)
      st = inst2(rt, RP_F32, 0, r - 1, c, &m->g[p]);
    float *w = calloc((size_t)(r * c), sizeof *w);
    for (int64_t i = 0; w && i < r * c; i++)
      w[i] = (float)((i * 7919) % 201 - 100) * (p == P_W1 ? 4e-4f : 2e-3f);
    if (!st)
      st = w ? rp_instance_write(rt, m->w[p], w, sizeof *w * (size_t)(r * c))
             : RP_ENOMEM;
    free(w);
  }
  rp_rect all = rp_rect_2d(0, B_GLOBAL - 1, 0, 0), mine, part;
  if (!st)
    st = rp_chunk_rect(&all, 0, (uint32_t)NRANKS, (uint32_t)RANK, &mine);
  for (unsigned i = 0; i < nsh && !st; i++)
    if (!(st = rp_chunk_rect(&mine, 0, nsh, i, &part)))
      st = shard_init(m, &m->sh[i], part.lo[0], part.hi[0]);
  return ck("model set-up", st);
}

static rp_status task(mlp *m, rp_task_id t, rp_proc p, const void *args,
                      size_t size, const rp_access *acc, uint32_t n,
                      rp_event *done) {
  rp_launch l = {.task = t,
                 .proc = p,
                 .accesses = acc,
                 .naccess = n,
                 .args = args,
                 .args_size = size};
  return rp_launch_task(m->rt, &l, done);
}

#define R_(i)                                                                  \
  { (i), RP_READ, RP_REDOP_NONE }
#define W_(i)                                                                  \
  { (i), RP_WRITE, RP_REDOP_NONE }
#define RW_(i)                                                                 \
  { (i), RP_RW, RP_REDOP_NONE }

static rp_status forward(mlp *m, shard *s, rp_proc p) {
  const rp_kernel_tasks *k = &m->k;
  int r = s->rows;
  rp_gemm_args g1 = {r, D_HID, D_IN, 0, 0, 1.0f, 0.0f};
  rp_access a1[] = {R_(s->x), R_(m->w[P_W1]), W_(s->h)};
  rp_status st = task(m, k->gemm, p, &g1, sizeof g1, a1, 3, NULL);
  rp_bias_args b1 = {r, D_HID};
  rp_access a2[] = {RW_(s->h), R_(m->w[P_B1])};
  if (!st)
    st = task(m, k->bias_add, p, &b1, sizeof b1, a2, 2, NULL);
  rp_elementwise_args e = {r * D_HID};
  rp_access a3[] = {R_(s->h), W_(s->a)};
  if (!st)
    st = task(m, k->relu_fwd, p, &e, sizeof e, a3, 2, NULL);
  rp_gemm_args g2 = {r, N_CLS, D_HID, 0, 0, 1.0f, 0.0f};
  rp_access a4[] = {R_(s->a), R_(m->w[P_W2]), W_(s->logits)};
  if (!st)
    st = task(m, k->gemm, p, &g2, sizeof g2, a4, 3, NULL);
  rp_bias_args b2 = {r, N_CLS};
  rp_access a5[] = {RW_(s->logits), R_(m->w[P_B2])};
  if (!st)
    st = task(m, k->bias_add, p, &b2, sizeof b2, a5, 2, NULL);
  rp_xent_args x = {r, N_CLS, (float)B_GLOBAL};
  rp_access a6[] = {R_(s->logits), R_(s->lab), W_(s->probs), W_(s->loss)};
  if (!st)
    st = task(m, k->xent_fwd, p, &x, sizeof x, a6, 4, NULL);
  return st;
}

static rp_status backward(mlp *m, shard *s, rp_proc p) {
  const rp_kernel_tasks *k = &m->k;
  int r = s->rows;
  rp_xent_args x = {r, N_CLS, (float)B_GLOBAL};
  rp_access a1[] = {R_(s->probs), R_(s->lab), W_(s->dl)};
  rp_status st = task(m, k->xent_bwd, p, &x, sizeof x, a1, 3, NULL);
  rp_gemm_args g2 = {D_HID, N_CLS, r, 1, 0, 1.0f, 0.0f};
  rp_access a2[] = {R_(s->a), R_(s->dl), W_(s->g[P_W2])};
  if (!st)
    st = task(m, k->gemm, p, &g2, sizeof g2, a2, 3, NULL);
  rp_bias_args b2 = {r, N_CLS};
  rp_access a3[] = {R_(s->dl), W_(s->g[P_B2])};
  if (!st)
    st = task(m, k->bias_grad, p, &b2, sizeof b2, a3, 2, NULL);
  rp_gemm_args gd = {r, D_HID, N_CLS, 0, 1, 1.0f, 0.0f};
  rp_access a4[] = {R_(s->dl), R_(m->w[P_W2]), W_(s->da)};
  if (!st)
    st = task(m, k->gemm, p, &gd, sizeof gd, a4, 3, NULL);
  rp_elementwise_args e = {r * D_HID};
  rp_access a5[] = {R_(s->h), R_(s->da), W_(s->dh)};
  if (!st)
    st = task(m, k->relu_bwd, p, &e, sizeof e, a5, 3, NULL);
  rp_gemm_args g1 = {D_IN, D_HID, r, 1, 0, 1.0f, 0.0f};
  rp_access a6[] = {R_(s->x), R_(s->dh), W_(s->g[P_W1])};
  if (!st)
    st = task(m, k->gemm, p, &g1, sizeof g1, a6, 3, NULL);
  rp_bias_args b1 = {r, D_HID};
  rp_access a7[] = {R_(s->dh), W_(s->g[P_B1])};
  if (!st)
    st = task(m, k->bias_grad, p, &b1, sizeof b1, a7, 2, NULL);
  return st;
}

/* The whole step; done (eager) gets the last SGD's event. */
static rp_status step(mlp *m, rp_event *done) {
  rp_status st = RP_OK;
  for (unsigned i = 0; i < m->nsh && !st; i++)
    if (!(st = forward(m, &m->sh[i], (rp_proc)i)))
      st = backward(m, &m->sh[i], (rp_proc)i);
  /* the last layers' gradients first: they are ready first */
  for (int p = NPARAM - 1; p >= 0 && !st; p--) {
    rp_inst parts[MAX_SHARDS];
    for (unsigned i = 0; i < m->nsh; i++)
      parts[i] = m->sh[i].g[p];
    rp_parallel_op red = {.kind = RP_POP_REDUCTION,
                          .whole = m->g[p],
                          .parts = parts,
                          .nparts = m->nsh};
    if (m->nsh > 1)
      st = rp_launch_parallel(m->rt, &red, NULL);
    if (!st)
      st = rp_launch_allreduce(
          m->rt, &(rp_allreduce){m->g[p], RP_REDOP_SUM, {0}}, NULL);
    rp_sgd_args sg = {0.05f, 0.9f, 0};
    rp_access a[] = {RW_(m->w[p]), R_(m->g[p]), RW_(m->v[p])};
    if (!st)
      st = task(m, m->k.sgd, RP_PROC_ANY, &sg, sizeof sg, a, 3,
                p == 0 ? done : NULL);
  }
  return ck("step", st);
}

/* Seconds per step: `reps` replays back to back, or eager steps. */
static double time_steps(mlp *m, rp_exec *ex, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = rp_bench_now_ns();
  rp_event e = RP_NO_EVENT;
  rp_status st = RP_OK;
  for (int i = 0; i < reps && !st; i++) {
    rp_event_release(m->rt, e);
    e = RP_NO_EVENT;
    if (ex) {
      st = rp_replay(ex, NULL, &e);
    } else {
      st = step(m, &e);
      if (!st) /* eager: each step waits for the previous */
        st = rp_event_wait(m->rt, e, -1);
    }
  }
  if (!st)
    st = rp_event_wait(m->rt, e, -1);
  if (!st)
    st = rp_runtime_drain(m->rt);
  rp_event_release(m->rt, e);
  double s = (double)(rp_bench_now_ns() - t0) * 1e-9 / reps;
  if (ck(ex ? "replay" : "eager step", st))
    s = -1;
  return slowest(s);
}

typedef struct row_out {
  FILE *table;
  rp_bench_json *json;
} row_out;

static void step_row(row_out *o, const char *mode, unsigned workers,
                     rp_bench_stats t) {
  if (RANK != 0)
    return;
  if (o->table)
    fprintf(o->table,
            "  step  %-7s %2d ranks x %u workers  %9.1f us/step "
            "(min %.1f, max %.1f)\n",
            mode, NRANKS, workers, t.median * 1e6, t.min * 1e6, t.max * 1e6);
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
  if (w > MAX_SHARDS)
    w = MAX_SHARDS;
  rp_runtime *rt;
  if (make_rt(w, &rt))
    return 1;
  mlp m;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  int reps = bo->quick ? 5 : bo->reps ? (int)bo->reps : 200;
  rp_status st = mlp_init(&m, rt, w);
  if (!st)
    st = ck("capture", rp_capture_begin(rt, NULL));
  if (!st && (st = step(&m, NULL)) != RP_OK)
    rp_capture_abort(rt);
  if (!st)
    st = ck("capture end", rp_capture_end(rt, &g));
  if (!st)
    st = ck("instantiate", rp_instantiate(g, NULL, &ex));
  rp_graph_destroy(g);
  double rv[RUNS], ev[RUNS];
  if (!st)
    time_steps(&m, ex, reps / 2 + 1); /* warm-up, placement trials */
  for (int r = 0; r < RUNS && !st; r++) {
    rv[r] = time_steps(&m, ex, reps);
    ev[r] = time_steps(&m, NULL, reps / 4 + 1);
    if (rv[r] < 0 || ev[r] < 0)
      st = RP_EBACKEND;
  }
  if (!st) {
    step_row(o, "replay", w, rp_bench_summarize(rv, RUNS));
    step_row(o, "eager", w, rp_bench_summarize(ev, RUNS));
  }
  rp_exec_destroy(ex);
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

static double time_plain(float *buf, int n, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = rp_bench_now_ns();
  for (int i = 0; i < reps; i++)
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return slowest((double)(rp_bench_now_ns() - t0) * 1e-9 / reps);
}

static void allreduce_row(row_out *o, size_t bytes, rp_bench_stats rep,
                          rp_bench_stats plain) {
  if (RANK != 0)
    return;
  double bus = 2.0 * (NRANKS - 1) / NRANKS;
  double rbw = (double)bytes / rep.median * 1e-9;
  double pbw = (double)bytes / plain.median * 1e-9;
  if (o->table)
    fprintf(o->table,
            "  allreduce %8zu B  replay %9.2f us %7.3f GB/s (bus "
            "%6.3f)  plain MPI_Allreduce %9.2f us %7.3f GB/s (bus %6.3f)  "
            "replay/plain %.2f\n",
            bytes, rep.median * 1e6, rbw, rbw * bus, plain.median * 1e6, pbw,
            pbw * bus, rep.median / plain.median);
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
  rp_bench_json_end(o->json);
}

static int bench_allreduce_size(rp_runtime *rt, size_t bytes, int quick,
                                row_out *o) {
  int n = (int)(bytes / sizeof(float));
  rp_inst x;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_status st = inst2(rt, RP_F32, 0, 0, n, &x);
  if (!st)
    st = rp_capture_begin(rt, NULL);
  if (!st && (st = rp_launch_allreduce(
                  rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL)) != RP_OK)
    rp_capture_abort(rt);
  if (!st)
    st = rp_capture_end(rt, &g);
  if (!st)
    st = rp_instantiate(g, &(rp_exec_opts){.no_replace = 1}, &ex);
  rp_graph_destroy(g);
  if (ck("all-reduce set-up", st))
    return 1;
  /* about 20 ms of traffic per run, at least 10 calls */
  int reps = quick ? 10 : (int)(((size_t)64 << 20) / (bytes + 16384)) + 10;
  float *buf = rp_instance_ptr(rt, x);
  double rv[RUNS], pv[RUNS];
  time_replays(rt, ex, reps / 4 + 2); /* warm both */
  time_plain(buf, n, reps / 4 + 2);
  for (int r = 0; r < RUNS && !st; r++) { /* alternate: drift hits both */
    rv[r] = time_replays(rt, ex, reps);
    pv[r] = time_plain(buf, n, reps);
    if (rv[r] < 0)
      st = RP_EBACKEND;
  }
  if (!st)
    allreduce_row(o, bytes, rp_bench_summarize(rv, RUNS),
                  rp_bench_summarize(pv, RUNS));
  rp_exec_destroy(ex);
  rp_instance_free(rt, x);
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
  FILE *json = NULL;
  int bad = RANK == 0 && json_path && !(json = fopen(json_path, "w"));
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (bad) {
    if (RANK == 0)
      fprintf(stderr, "reprise bench: cannot write '%s'\n", json_path);
    if (mine)
      MPI_Finalize();
    return 1;
  }
  rp_bench_json j;
  rp_bench_json_open(&j, json);
  row_out o = {RANK == 0 ? table : NULL, &j};
  if (RANK == 0 && table)
    fprintf(table,
            "reprise bench --dist: %d ranks (MPI), CPU backend; "
            "slowest rank, median of %d runs\n",
            NRANKS, RUNS);
  int rc = bench_step(bo, &o);
  if (!rc)
    rc = bench_allreduce(bo, &o);
  rp_bench_json_close(&j);
  if (json && fclose(json) != 0)
    rc = 1;
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
