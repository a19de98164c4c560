/* Replays on the CUDA backend: GPU ops lowered onto CUDA graphs
 * (replay/lower.h). What only CUDA has: random DAGs (with poison and
 * interpolation) compared with the CPU backend, graph segments against op
 * by op issue, an exec's own streams, GPU trace tracks, capture failures,
 * device copies and events between logical GPUs, the counters of a
 * GPU-only replay. Multi-device lowering runs on one physical GPU through
 * logical GPUs (rp_runtime_config.gpus). The behaviours every backend
 * shares (a fork-join logged in order, preconditions, destroy in flight,
 * soak, stale instances, updated args) are test_replay.c's replay_backends
 * suite (test_replay_cuda runs it on CUDA). Label "gpu": every case skips
 * with the reason when no CUDA device answers. */
#include "helpers.h"

#ifdef REPRISE_HAVE_CUDA
#include "kernels/cuda_kernels.cuh"
#include "bench/probe_kernels.cuh"
#include "engine/cuda/cuda_backend.h"
#include "replay/lower.h" /* an exec's streams (rp_gpu_lane) */
#endif

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef REPRISE_HAVE_CUDA
/* A build without CUDA has no GPU processor: every case says so. */
Test(replay_gpu, skipped_without_cuda) {
  th_gpu_skip("no CUDA device: this build of reprise has no CUDA");
}
#else

/* ---- runtimes ---- */

/* A CUDA runtime with `cpus` workers and `gpus` logical GPUs (0: one per
 * device); skips without a device. */
static rp_runtime *gpu_runtime(unsigned cpus, unsigned gpus) {
  th_need_gpu();
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CUDA;
  cfg.cpus = cpus;
  cfg.gpus = gpus;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create(&cfg, &rt));
  return rt;
}

/* The i-th GPU processor. */
static rp_proc gpu_proc(const rp_runtime *rt, unsigned i) {
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_GPU && i-- == 0)
      return p;
  }
  cr_assert_fail("no GPU processor %u", i);
  return 0;
}

static unsigned gpu_count(const rp_runtime *rt) {
  unsigned n = 0;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    n += pi.kind == RP_PROC_GPU;
  }
  return n;
}

static rp_mem pinned_mem(const rp_runtime *rt) {
  rp_mem m = 0;
  if (rp_runtime_backend(rt) == RP_BACKEND_CUDA)
    RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &m));
  return m; /* the CPU backend: system memory (0) */
}

/* ---- the fold task: the same value on CPUs and GPUs ----
 * Access 0 is the output (WRITE), 1.. the inputs (READ); each instance is
 * one int64. out = mix(... mix(seed, in0) ..., inN). */

typedef struct fargs {
  uint32_t id, pad; /* offsets 0, 4 */
  int64_t seed;     /* offset 8: interpolated per replay */
} fargs;

static const int64_t *in_ptr(rp_task_ctx *ctx, uint32_t i) {
  return i < rp_ctx_access_count(ctx) ? rp_ctx_ptr(ctx, i) : NULL;
}

static rp_status fold_cpu(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  int64_t x = a->seed;
  for (uint32_t i = 1; i < rp_ctx_access_count(ctx); i++)
    x = rp_probe_mix(x, *(const int64_t *)rp_ctx_ptr(ctx, i));
  *(int64_t *)rp_ctx_ptr(ctx, 0) = x;
  return RP_OK;
}

/* Registered with RP_TASK_DEVICE_ARGS: reads the seed on the device. */
static rp_status fold_gpu_dev(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  const char *dev = rp_ctx_device_args(ctx);
  return rp_cuda_probe_fold(
      rp_ctx_ptr(ctx, 0), in_ptr(ctx, 1), in_ptr(ctx, 2), in_ptr(ctx, 3),
      a->seed, dev ? (const int64_t *)(dev + 8) : NULL, rp_ctx_stream(ctx));
}

/* Reads the seed at issue (by value): interpolated ops are issued op by
 * op. */
static rp_status fold_gpu_val(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  return rp_cuda_probe_fold(rp_ctx_ptr(ctx, 0), in_ptr(ctx, 1), in_ptr(ctx, 2),
                            in_ptr(ctx, 3), a->seed, NULL, rp_ctx_stream(ctx));
}

typedef struct tasks {
  rp_task_id dev, val;
} tasks;

static tasks reg_fold(rp_runtime *rt) {
  tasks t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "fold.dev",
                      .cpu_fn = fold_cpu,
                      .gpu_fn = fold_gpu_dev,
                      .flags = RP_TASK_STREAM_ORDERED | RP_TASK_DEVICE_ARGS},
      &t.dev));
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "fold.val",
                                            .cpu_fn = fold_cpu,
                                            .gpu_fn = fold_gpu_val,
                                            .flags = RP_TASK_STREAM_ORDERED},
                            &t.val));
  return t;
}

/* ---- random DAGs ---- */

#define MAXOPS 64
#define MAXINST 12
#define NREP 4

typedef struct rdag {
  uint32_t n, ninst;
  uint32_t out[MAXOPS], nin[MAXOPS], in[MAXOPS][3];
  int where[MAXOPS]; /* -1 any CPU worker, -2 CPU worker 0, g >= 0: GPU g */
  int byval[MAXOPS]; /* 1: fold.val */
  int interp[MAXOPS];
  int port[MAXOPS];
} rdag;

static void gen_dag(rdag *d, unsigned ngpu, int with_ports) {
  d->n = 1 + (uint32_t)(rand() % MAXOPS);
  d->ninst = 2 + (uint32_t)(rand() % (MAXINST - 1));
  for (uint32_t k = 0; k < d->n; k++) {
    d->out[k] = (uint32_t)rand() % d->ninst;
    d->nin[k] = 0;
    for (int j = rand() % 3; j > 0; j--) {
      uint32_t x = (uint32_t)rand() % d->ninst;
      int dup = x == d->out[k];
      for (uint32_t q = 0; q < d->nin[k]; q++)
        dup |= d->in[k][q] == x;
      if (!dup)
        d->in[k][d->nin[k]++] = x;
    }
    int r = rand() % 8;
    d->where[k] = r < 2 ? -1 : r < 3 ? -2 : (int)((unsigned)rand() % ngpu);
    d->byval[k] = rand() % 4 == 0;
    d->interp[k] = rand() % 3 == 0;
    d->port[k] = with_ports && rand() % 10 == 0;
  }
}

typedef struct world {
  rp_runtime *rt;
  tasks t;
  rp_inst inst[MAXINST];
} world;

static void world_init(world *w, rp_runtime *rt, uint32_t ninst) {
  w->rt = rt;
  w->t = reg_fold(rt);
  rp_rect r = rp_rect_1d(0, 0);
  for (uint32_t i = 0; i < ninst; i++)
    RP_CHECK(
        rp_instance_create(rt, pinned_mem(rt), RP_I64, &r, NULL, &w->inst[i]));
}

static void world_fini(world *w, uint32_t ninst) {
  for (uint32_t i = 0; i < ninst; i++)
    RP_CHECK(rp_instance_free(w->rt, w->inst[i]));
  th_destroy(w->rt);
}

/* Records the DAG (dependencies inferred from the accesses). On a CPU
 * runtime GPU ops go to any CPU worker. */
static rp_graph *record(world *w, const rdag *d) {
  int gpu = rp_runtime_backend(w->rt) == RP_BACKEND_CUDA;
  rp_event port = RP_NO_EVENT;
  RP_CHECK(rp_capture_begin(w->rt, NULL));
  RP_CHECK(rp_capture_precondition(w->rt, "in", &port, NULL));
  for (uint32_t k = 0; k < d->n; k++) {
    fargs a = {k, 0, (int64_t)k * 7919};
    rp_access acc[4];
    acc[0] = (rp_access){w->inst[d->out[k]], RP_WRITE, RP_REDOP_NONE};
    for (uint32_t j = 0; j < d->nin[k]; j++)
      acc[1 + j] = (rp_access){w->inst[d->in[k][j]], RP_READ, RP_REDOP_NONE};
    rp_interp ip = {8 * (k % 4), 8, 8}; /* seed from replay arg k % 4 */
    rp_proc proc = d->where[k] == -1   ? RP_PROC_ANY
                   : d->where[k] == -2 ? 0
                   : gpu               ? gpu_proc(w->rt, (unsigned)d->where[k])
                                       : RP_PROC_ANY;
    rp_launch l = {.task = d->byval[k] ? w->t.val : w->t.dev,
                   .proc = proc,
                   .accesses = acc,
                   .naccess = 1 + d->nin[k],
                   .args = &a,
                   .args_size = sizeof a,
                   .interps = d->interp[k] ? &ip : NULL,
                   .ninterp = d->interp[k] ? 1 : 0,
                   .wait = d->port[k] ? port : RP_NO_EVENT};
    RP_CHECK(rp_launch_task(w->rt, &l, NULL));
  }
  rp_graph *g;
  RP_CHECK(rp_capture_end(w->rt, &g));
  /* a declared port must be bound: bind it to op 0 (RP_EPORT when it
   * already is) */
  rp_status st = rp_graph_bind_precondition(g, 0, 0);
  cr_assert(st == RP_OK || st == RP_EPORT, "%s", rp_error_detail());
  return g;
}

/* Replays the DAG NREP times: replay r's args are seeds r*4 .. r*4+3; the
 * port is poisoned in replay `poison_at` (-1: never), triggered otherwise
 * (after the replay was submitted, so the gated work waits for it). The
 * done statuses go to st[], the final instance values to out[]. */
static void run(world *w, const rdag *d, int poison_at, rp_status *st,
                int64_t *out) {
  rp_graph *g = record(w, d);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  for (int r = 0; r < NREP; r++) {
    int64_t args[4] = {r * 4, r * 4 + 1, r * 4 + 2, r * 4 + 3};
    rp_event pre, done;
    RP_CHECK(rp_event_create(w->rt, &pre));
    rp_replay_args a = {
        .args = args, .args_size = sizeof args, .pre = &pre, .npre = 1};
    RP_CHECK(rp_replay(ex, &a, &done));
    if (r == poison_at)
      RP_CHECK(rp_event_poison(w->rt, pre, RP_EPOISON));
    else
      RP_CHECK(rp_event_trigger(w->rt, pre));
    RP_CHECK(rp_event_release(w->rt, pre));
    st[r] = rp_event_wait(w->rt, done, -1);
    RP_CHECK(rp_event_release(w->rt, done));
  }
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, (uint64_t)NREP);
  cr_assert_eq(s.ops, d->n);
  RP_CHECK(rp_exec_destroy(ex));
  for (uint32_t i = 0; i < d->ninst; i++)
    RP_CHECK(rp_instance_read(w->rt, w->inst[i], &out[i], sizeof out[i]));
}

/* Each DAG on the CPU backend, then on the CUDA backend with the given
 * logical GPUs: the same values and statuses, replay after replay. */
static void differential(unsigned ngpu_req, int dags, unsigned seed) {
  rp_runtime *probe = gpu_runtime(2, ngpu_req); /* skips without a GPU */
  unsigned ngpu = gpu_count(probe);
  th_destroy(probe);
  static rdag d;
  srand(seed);
  for (int dag = 0; dag < dags; dag++) {
    gen_dag(&d, ngpu, 1);
    int poison_at = rand() % 3 == 0 ? rand() % NREP : -1;
    rp_status want_st[NREP], got_st[NREP];
    int64_t want[MAXINST], got[MAXINST];
    world w;
    world_init(&w, th_cpu_runtime(2), d.ninst);
    run(&w, &d, poison_at, want_st, want);
    world_fini(&w, d.ninst);
    world_init(&w, gpu_runtime(2, ngpu_req), d.ninst);
    run(&w, &d, poison_at, got_st, got);
    world_fini(&w, d.ninst);
    for (int r = 0; r < NREP; r++)
      cr_assert_eq(got_st[r], want_st[r],
                   "dag %d replay %d: done %s, CPU "
                   "backend %s",
                   dag, r, rp_status_name(got_st[r]),
                   rp_status_name(want_st[r]));
    for (uint32_t i = 0; i < d.ninst; i++)
      cr_assert_eq(got[i], want[i],
                   "dag %d (%u ops, %u GPUs, poison at %d): "
                   "instance %u differs from the CPU backend",
                   dag, d.n, ngpu, poison_at, i);
  }
}

Test(replay_gpu, random_dags_match_the_cpu_backend, .timeout = 900) {
  differential(1, 60, 515);
}

Test(replay_gpu, random_dags_over_two_logical_gpus_match, .timeout = 900) {
  differential(2, 40, 616);
}

/* The same with each logical GPU its own group (cross-GPU events, as on
 * separate devices, although they share one). */
Test(replay_gpu, random_dags_over_two_ungrouped_logical_gpus_match,
     .timeout = 900) {
  setenv("REPRISE_GPU_GROUPS", "0", 1); /* read at instantiate */
  differential(2, 30, 818);
  unsetenv("REPRISE_GPU_GROUPS");
}

Test(replay_gpu, random_dags_without_cuda_graphs_match, .timeout = 900) {
  setenv("REPRISE_CUDA_GRAPHS", "0", 1); /* read at instantiate */
  differential(2, 30, 717);
  unsetenv("REPRISE_CUDA_GRAPHS");
}

/* ---- a small mixed pipeline: host -> GPU -> host -> GPU ---- */

typedef struct mpipe {
  rp_runtime *rt;
  tasks t;
  rp_inst x[4];
  rp_graph *g;
} mpipe;

/* x0 = fold(seed0) on a CPU, x1 = fold(seed1, x0) on the GPU (device
 * args), x2 = fold(seed2, x1) on a CPU, x3 = fold(seed3, x2) on the GPU
 * (by value: issued op by op). Seeds interpolated from args[0..3]. */
static void pipe_init(mpipe *p, rp_runtime *rt) {
  p->rt = rt;
  p->t = reg_fold(rt);
  rp_rect r = rp_rect_1d(0, 0);
  for (int i = 0; i < 4; i++)
    RP_CHECK(
        rp_instance_create(rt, pinned_mem(rt), RP_I64, &r, NULL, &p->x[i]));
  RP_CHECK(rp_capture_begin(rt, NULL));
  for (uint32_t k = 0; k < 4; k++) {
    fargs a = {k, 0, 0};
    rp_access acc[2] = {{p->x[k], RP_WRITE, RP_REDOP_NONE},
                        {k ? p->x[k - 1] : p->x[0], RP_READ, RP_REDOP_NONE}};
    rp_interp ip = {8 * k, 8, 8};
    rp_launch l = {.task = k == 3 ? p->t.val : p->t.dev,
                   .proc = k % 2 ? gpu_proc(rt, 0) : 0,
                   .accesses = acc,
                   .naccess = k ? 2 : 1,
                   .args = &a,
                   .args_size = sizeof a,
                   .interps = &ip,
                   .ninterp = 1};
    RP_CHECK(rp_launch_task(rt, &l, NULL));
  }
  RP_CHECK(rp_capture_end(rt, &p->g));
}

static int64_t pipe_expect(const int64_t *seeds) {
  int64_t x = seeds[0];
  for (int k = 1; k < 4; k++)
    x = rp_probe_mix(seeds[k], x);
  return x;
}

static void pipe_fini(mpipe *p) {
  RP_CHECK(rp_graph_destroy(p->g));
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_free(p->rt, p->x[i]));
  th_destroy(p->rt);
}

Test(replay_gpu, interpolated_values_reach_graphs_and_op_by_op_ops) {
  mpipe p;
  pipe_init(&p, gpu_runtime(2, 1));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(p.g, &(rp_exec_opts){.max_inflight = 8}, &ex));
  rp_event done[32];
  int64_t got[32];
  for (int r = 0; r < 32; r++) {
    int64_t s[4] = {r, 100 + r, 200 + r, 300 + r};
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = s, .args_size = sizeof s},
                       &done[r]));
    if (r % 4 == 3) /* let a few queue up, then check the last value */
      for (int q = r - 3; q <= r; q++) {
        RP_CHECK(rp_event_wait(p.rt, done[q], -1));
        RP_CHECK(rp_event_release(p.rt, done[q]));
      }
    if (r % 4 == 3) {
      RP_CHECK(rp_instance_read(p.rt, p.x[3], &got[r], sizeof got[r]));
      cr_assert_eq(got[r], pipe_expect(s), "replay %d", r);
    }
  }
  char buf[8192] = "";
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(buf, "gpu segments"), "%s", buf);
  cr_assert(strstr(buf, "CUDA graph"), "%s", buf);
  cr_assert(strstr(buf, "issued op by op"), "the by-value op: %s", buf);
  RP_CHECK(rp_exec_destroy(ex));
  pipe_fini(&p);
}

/* The replay stream of ex on its first GPU. */
static void *exec_stream(const rp_exec *ex) {
  cr_assert_not_null(ex->lw, "the exec has no GPU segments");
  cr_assert_not_null(ex->lw->gpus[0].stream);
  return ex->lw->gpus[0].stream;
}

static void pipe_replay(mpipe *p, rp_exec *ex, int64_t seed) {
  int64_t s[4] = {seed, 1, 2, 3}, v;
  rp_event done;
  RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = s, .args_size = sizeof s},
                     &done));
  RP_CHECK(rp_event_wait(p->rt, done, -1));
  RP_CHECK(rp_event_release(p->rt, done));
  RP_CHECK(rp_instance_read(p->rt, p->x[3], &v, sizeof v));
  cr_assert_eq(v, pipe_expect(s), "seed %lld", (long long)seed);
}

/* Each exec launches on streams of its own; a destroyed exec's streams go
 * to the next exec instantiated (cuBLAS slices are bound to streams). */
Test(replay_gpu, each_exec_replays_on_streams_of_its_own) {
  mpipe p;
  pipe_init(&p, gpu_runtime(2, 1));
  rp_exec *a, *b, *c;
  RP_CHECK(rp_instantiate(p.g, NULL, &a));
  RP_CHECK(rp_instantiate(p.g, NULL, &b));
  void *sa = exec_stream(a), *sb = exec_stream(b);
  cr_assert_neq(sa, sb, "two execs share a replay stream");
  cr_assert_neq(sa, rp__cuda_proc_stream(p.rt, gpu_proc(p.rt, 0)),
                "an exec replays on the processor's eager stream");
  pipe_replay(&p, a, 5);
  pipe_replay(&p, b, 6);
  RP_CHECK(rp_exec_destroy(a));
  RP_CHECK(rp_instantiate(p.g, NULL, &c));
  cr_assert_eq(exec_stream(c), sa, "the freed streams were not reused");
  pipe_replay(&p, c, 7);
  pipe_replay(&p, b, 8);
  RP_CHECK(rp_exec_destroy(b));
  RP_CHECK(rp_exec_destroy(c));
  pipe_fini(&p);
}

static unsigned count_str(const char *text, const char *what) {
  unsigned n = 0;
  for (const char *q = text; (q = strstr(q, what)) != NULL; q += strlen(what))
    n++;
  return n;
}

/* Traces of a GPU exec: per traced replay and segment, a launch event on
 * the launching worker's track and one event on the GPU's track with the
 * device times of its timing events; untraced replays read no clock. */
Test(replay_gpu, traces_show_each_segment_on_the_gpu_track) {
  mpipe p;
  pipe_init(&p, gpu_runtime(2, 1));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(p.g, NULL, &ex));
  pipe_replay(&p, ex, 1);
  cr_assert_eq(rp__exec_trace_clock_reads(ex), 0, "untraced: clock read");
  th_tmpdir_make("/tmp/rp_gtrace_XXXXXX");
  const char *path = th_tmp_path("gpu.json");
  RP_CHECK(rp_exec_trace_start(ex, 3));
  for (int r = 0; r < 3; r++)
    pipe_replay(&p, ex, 10 + r);
  RP_CHECK(rp_exec_trace_write(ex, path));
  char *text = th_read_all(path, NULL);
  unsigned nseg = ex->lw->nseg, want = 3 * nseg;
  cr_assert_geq(nseg, 2, "host -> GPU -> host -> GPU: two segments");
  cr_assert_eq(count_str(text, "\"cat\": \"gpu\""), want, "%s", text);
  cr_assert_eq(count_str(text, "\"cat\": \"launch\""), want, "%s", text);
  cr_assert_eq(count_str(text, "\"device_times\": true"), want, "%s", text);
  cr_assert(strstr(text, "\"issued\": \"graph\""), "%s", text);
  cr_assert(strstr(text, "\"issued\": \"op by op\""), "%s", text);
  cr_assert(strstr(text, "\"gpu 0 (processor "), "%s", text);
  free(text);
  uint64_t reads = rp__exec_trace_clock_reads(ex);
  pipe_replay(&p, ex, 20); /* recording stopped */
  cr_assert_eq(rp__exec_trace_clock_reads(ex), reads);
  RP_CHECK(rp_exec_trace_start(ex, 2)); /* destroy frees an armed trace */
  pipe_replay(&p, ex, 21);
  RP_CHECK(rp_exec_destroy(ex));
  th_tmpdir_remove();
  pipe_fini(&p);
}

/* ---- capture failures ---- */

static rp_status bad_alloc(rp_task_ctx *ctx) {
  (void)ctx;
  void *p = NULL;
  rp_status st = rp_cuda_buf_alloc(&p, 64); /* allocates inside capture */
  if (p)
    rp_cuda_buf_free(p);
  return st;
}

static rp_status bad_sync(rp_task_ctx *ctx) {
  rp_status st = rp_cuda_probe_empty(rp_ctx_stream(ctx));
  return st ? st : rp_cuda_stream_sync(rp_ctx_stream(ctx));
}

static rp_status bad_legacy(rp_task_ctx *ctx) {
  (void)ctx;
  return rp_cuda_probe_empty(NULL); /* the legacy default stream */
}

Test(replay_gpu, capture_failures_name_the_task_and_the_cuda_error) {
  rp_runtime *rt = gpu_runtime(2, 1);
  static const struct {
    const char *name;
    rp_task_fn fn;
  } bad[] = {{"bad.alloc", bad_alloc},
             {"bad.sync", bad_sync},
             {"bad.legacy", bad_legacy}};
  tasks good = reg_fold(rt);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rp_task_id t;
    RP_CHECK(rp_task_register(rt,
                              &(rp_task_desc){.name = bad[i].name,
                                              .gpu_fn = bad[i].fn,
                                              .flags = RP_TASK_STREAM_ORDERED},
                              &t));
    rp_graph *g;
    RP_CHECK(rp_graph_create(rt, &g));
    RP_CHECK(rp_graph_add_task(
        g, &(rp_launch){.task = t, .proc = gpu_proc(rt, 0)}, NULL));
    rp_exec *ex = NULL;
    rp_status st = rp_instantiate(g, NULL, &ex);
    cr_assert_neq(st, RP_OK, "%s: instantiate accepted it", bad[i].name);
    cr_assert_null(ex);
    cr_assert(strstr(rp_error_detail(), bad[i].name), "%s: %s", bad[i].name,
              rp_error_detail());
    cr_assert(strstr(rp_error_detail(), "capture"), "%s: %s", bad[i].name,
              rp_error_detail());
    cr_assert(strstr(rp_error_detail(), "cuda"), "%s: no CUDA error: %s",
              bad[i].name, rp_error_detail());
    RP_CHECK(rp_graph_destroy(g));
  }
  /* not sticky: the same runtime still captures and replays */
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, pinned_mem(rt), RP_I64, &r, NULL, &x));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  fargs a = {0, 0, 77};
  rp_access acc = {x, RP_WRITE, RP_REDOP_NONE};
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = good.dev,
                                          .proc = gpu_proc(rt, 0),
                                          .accesses = &acc,
                                          .naccess = 1,
                                          .args = &a,
                                          .args_size = sizeof a},
                             NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  rp_event_release(rt, done);
  cr_assert_eq(*(int64_t *)rp_instance_ptr(rt, x), 77);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

/* ---- device copies between logical GPUs ---- */

Test(replay_gpu, device_copies_and_events_across_logical_gpus) {
  rp_runtime *rt = gpu_runtime(2, 2);
  tasks t = reg_fold(rt);
  rp_proc g0 = gpu_proc(rt, 0), g1 = gpu_proc(rt, 1);
  rp_proc_info i0, i1;
  RP_CHECK(rp_proc_query(rt, g0, &i0));
  RP_CHECK(rp_proc_query(rt, g1, &i1));
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst a, b, c;
  RP_CHECK(rp_instance_create(rt, i0.local, RP_I64, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, i1.local, RP_I64, &r, NULL, &b));
  RP_CHECK(rp_instance_create(rt, pinned_mem(rt), RP_I64, &r, NULL, &c));
  /* a = fold(seed) on GPU 0; copy a -> b (GPU 1's stream); c = fold(b) on
   * GPU 1: a device copy and a cross-GPU event every replay */
  RP_CHECK(rp_capture_begin(rt, NULL));
  fargs fa = {0, 0, 0}, fc = {1, 0, 9};
  rp_access aa = {a, RP_WRITE, RP_REDOP_NONE};
  rp_access ac[2] = {{c, RP_WRITE, RP_REDOP_NONE}, {b, RP_READ, RP_REDOP_NONE}};
  rp_interp ip = {0, 8, 8};
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t.dev,
                                       .proc = g0,
                                       .accesses = &aa,
                                       .naccess = 1,
                                       .args = &fa,
                                       .args_size = sizeof fa,
                                       .interps = &ip,
                                       .ninterp = 1},
                          NULL));
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t.dev,
                                       .proc = g1,
                                       .accesses = ac,
                                       .naccess = 2,
                                       .args = &fc,
                                       .args_size = sizeof fc},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  int64_t *pc = rp_instance_ptr(rt, c);
  for (int64_t s = 1; s <= 50; s++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, &(rp_replay_args){.args = &s, .args_size = sizeof s},
                       &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    cr_assert_eq(*pc, rp_probe_mix(9, s), "replay %lld", (long long)s);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  RP_CHECK(rp_instance_free(rt, c));
  th_destroy(rt);
}

/* ---- the structure of a GPU-only replay: counters ---- */

/* Fails the op when its (interpolated) seed is negative: the check a
 * replay runs on the host before issuing the op's graph. */
static rp_status fold_check(rp_task_ctx *ctx) {
  const fargs *a = rp_ctx_args(ctx, NULL);
  return a->seed < 0
             ? rp__err(RP_ERANGE, "fold.chk: seed %lld < 0", (long long)a->seed)
             : RP_OK;
}

typedef struct gchain {
  rp_runtime *rt;
  rp_task_id t;
  rp_inst x[10];
  rp_graph *g;
} gchain;

/* x0 = fold(seed) on GPU 0, x_k = fold(seed + k, x_{k-1}): ten kernels,
 * each reading its seed on the device; x9's writer feeds a
 * postcondition. */
static void gchain_init_on(gchain *c, unsigned ngpu) {
  c->rt = gpu_runtime(2, ngpu);
  RP_CHECK(rp_task_register(
      c->rt,
      &(rp_task_desc){.name = "fold.chk",
                      .cpu_fn = fold_cpu,
                      .gpu_fn = fold_gpu_dev,
                      .check_fn = fold_check,
                      .flags = RP_TASK_STREAM_ORDERED | RP_TASK_DEVICE_ARGS},
      &c->t));
  rp_rect r = rp_rect_1d(0, 0);
  rp_mem dev;
  RP_CHECK(rp_mem_find(c->rt, RP_MEM_GPU, 0, &dev));
  for (int i = 0; i < 10; i++)
    RP_CHECK(rp_instance_create(c->rt, i == 9 ? pinned_mem(c->rt) : dev, RP_I64,
                                &r, NULL, &c->x[i]));
  RP_CHECK(rp_capture_begin(c->rt, NULL));
  rp_event last = RP_NO_EVENT;
  for (uint32_t k = 0; k < 10; k++) {
    fargs a = {k, 0, 0};
    rp_access acc[2] = {{c->x[k], RP_WRITE, RP_REDOP_NONE},
                        {k ? c->x[k - 1] : c->x[0], RP_READ, RP_REDOP_NONE}};
    rp_interp ip = {0, 8, 8};
    rp_launch l = {.task = c->t,
                   .proc = gpu_proc(c->rt, k % ngpu),
                   .accesses = acc,
                   .naccess = k ? 2 : 1,
                   .args = &a,
                   .args_size = sizeof a,
                   .interps = &ip,
                   .ninterp = 1};
    RP_CHECK(rp_launch_task(c->rt, &l, k == 9 ? &last : NULL));
  }
  uint32_t port;
  RP_CHECK(rp_capture_postcondition(c->rt, "x9", &last, 1, &port));
  RP_CHECK(rp_capture_end(c->rt, &c->g));
}

static void gchain_init(gchain *c) {
  gchain_init_on(c, 1);
}

static int64_t gchain_expect(int64_t seed) {
  int64_t x = seed;
  for (int k = 1; k < 10; k++)
    x = rp_probe_mix(seed, x);
  return x;
}

static void gchain_fini(gchain *c) {
  RP_CHECK(rp_graph_destroy(c->g));
  for (int i = 0; i < 10; i++)
    RP_CHECK(rp_instance_free(c->rt, c->x[i]));
  th_destroy(c->rt);
}

/* Latency and back-to-back replays of the chain, their order and results,
 * and the counters; poll: completion by the poller reading completion
 * words (1, the default), polling events (2) or by host functions on the
 * side stream (0: REPRISE_GPU_POLL=0). */
static void gpu_only_step(int poll) {
  gchain c;
  gchain_init(&c);
  rp_exec *ex;
  if (poll != 1)
    setenv("REPRISE_GPU_POLL", poll ? "events" : "0", 1);
  rp_status ist = rp_instantiate(c.g, &(rp_exec_opts){.max_inflight = 8}, &ex);
  unsetenv("REPRISE_GPU_POLL");
  RP_CHECK(ist);
  /* latency mode: one replay, then wait */
  for (int r = 0; r < 20; r++) {
    int64_t seed = 1000 + r, v;
    rp_event done, post;
    RP_CHECK(rp_replay(
        ex,
        &(rp_replay_args){
            .args = &seed, .args_size = sizeof seed, .post = &post, .npost = 1},
        &done));
    RP_CHECK(rp_event_wait(c.rt, post, -1));
    RP_CHECK(rp_event_wait(c.rt, done, -1));
    rp_event_release(c.rt, post);
    rp_event_release(c.rt, done);
    RP_CHECK(rp_instance_read(c.rt, c.x[9], &v, sizeof v));
    cr_assert_eq(v, gchain_expect(seed), "replay %d", r);
  }
  /* back to back: done events complete in issue order */
  rp_event done[40];
  for (int r = 0; r < 40; r++) {
    int64_t seed = 5000 + r;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &seed, .args_size = sizeof seed},
        &done[r]));
  }
  for (int r = 39; r >= 0; r--) {
    RP_CHECK(rp_event_wait(c.rt, done[r], -1));
    for (int q = 0; q < r; q++) /* every earlier one completed too */
      RP_EXPECT(rp_event_query(c.rt, done[q]), RP_OK);
  }
  for (int r = 0; r < 40; r++)
    rp_event_release(c.rt, done[r]);
  int64_t v;
  RP_CHECK(rp_instance_read(c.rt, c.x[9], &v, sizeof v));
  cr_assert_eq(v, gchain_expect(5039));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.replays, 60u);
  cr_assert_eq(s.gpus, 1u);
  cr_assert_eq(s.gpu_segments, 1u, "one segment: %u", s.gpu_segments);
  cr_assert_eq(s.gpu_segments_op_by_op, 0u);
  cr_assert_eq(s.graph_launches, 60u, "one graph launch per replay");
  cr_assert_eq(s.gpu_ops_op_by_op, 0u);
  cr_assert_eq(s.host_callbacks, poll ? 0u : 60u,
               "polling: no host function; else one per replay (on the "
               "side stream): %llu",
               (unsigned long long)s.host_callbacks);
  cr_assert_eq(s.host_waits, 0u);
  cr_assert_eq(s.stream_waits, 0u);
  cr_assert_eq(s.inline_launches, 60u, "no hand-off to a worker");
  /* destroy with replays in flight: it waits for them */
  rp_event last[8];
  for (int r = 0; r < 8; r++) {
    int64_t seed = 9000 + r;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &seed, .args_size = sizeof seed},
        &last[r]));
  }
  RP_CHECK(rp_exec_destroy(ex));
  for (int r = 0; r < 8; r++) {
    RP_EXPECT(rp_event_query(c.rt, last[r]), RP_OK);
    rp_event_release(c.rt, last[r]);
  }
  RP_CHECK(rp_instance_read(c.rt, c.x[9], &v, sizeof v));
  cr_assert_eq(v, gchain_expect(9007));
  gchain_fini(&c);
}

Test(replay_gpu, a_gpu_only_step_is_one_graph_launch_completed_by_polling) {
  gpu_only_step(1);
}

Test(replay_gpu, a_gpu_only_step_completes_through_side_stream_callbacks) {
  gpu_only_step(0);
}

Test(replay_gpu, a_gpu_only_step_completed_by_polling_events) {
  gpu_only_step(2);
}

Test(replay_gpu, a_failed_args_check_poisons_the_replay_and_the_next_works) {
  gchain c;
  gchain_init(&c);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(c.g, &(rp_exec_opts){.max_inflight = 4}, &ex));
  int64_t seeds[6] = {1, 2, -5, 3, -1, 4};
  rp_event done[6], post[6];
  for (int r = 0; r < 6; r++)
    RP_CHECK(rp_replay(ex,
                       &(rp_replay_args){.args = &seeds[r],
                                         .args_size = sizeof seeds[r],
                                         .post = &post[r],
                                         .npost = 1},
                       &done[r]));
  for (int r = 0; r < 6; r++) {
    rp_status want = seeds[r] < 0 ? RP_ERANGE : RP_OK;
    RP_EXPECT(rp_event_wait(c.rt, done[r], -1), want);
    RP_EXPECT(rp_event_wait(c.rt, post[r], -1), want);
    rp_event_release(c.rt, done[r]);
    rp_event_release(c.rt, post[r]);
  }
  int64_t v;
  RP_CHECK(rp_instance_read(c.rt, c.x[9], &v, sizeof v));
  cr_assert_eq(v, gchain_expect(4), "the replays after a failure work");
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.graph_launches, 4u, "the good replays ran their graph");
  cr_assert_geq(s.ops_skipped, 20u, "the bad ones skipped all ten ops");
  RP_CHECK(rp_exec_destroy(ex));
  gchain_fini(&c);
}

Test(replay_gpu, host_work_between_gpu_ops_is_waited_for_by_the_launcher) {
  mpipe p;
  pipe_init(&p, gpu_runtime(2, 1));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(p.g, NULL, &ex));
  for (int r = 0; r < 5; r++)
    pipe_replay(&p, ex, r);
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.inline_launches, 0u, "host tasks: launched by a worker");
  cr_assert_geq(s.host_waits, 5u, "the second segment waits for host work");
  cr_assert_eq(s.gpu_segments, 2u);
  RP_CHECK(rp_exec_destroy(ex));
  pipe_fini(&p);
}

/* The same chain with every logical GPU its own group (as on two physical
 * devices): a segment waits for the other GPU's producer through an event
 * wait node inside its graph, not a stream wait the launcher issues; issued
 * op by op (REPRISE_CUDA_GRAPHS=0) the stream waits instead. */
static void ungrouped_chain(int graphs, rp_exec_stats *s) {
  setenv("REPRISE_GPU_GROUPS", "0", 1); /* read at instantiate */
  if (!graphs)
    setenv("REPRISE_CUDA_GRAPHS", "0", 1);
  gchain c;
  gchain_init_on(&c, 2);
  rp_exec *ex;
  rp_status ist = rp_instantiate(c.g, &(rp_exec_opts){.max_inflight = 4}, &ex);
  unsetenv("REPRISE_GPU_GROUPS");
  unsetenv("REPRISE_CUDA_GRAPHS");
  RP_CHECK(ist);
  rp_event done[30];
  for (int r = 0; r < 30; r++) {
    int64_t seed = 900 + r;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &seed, .args_size = sizeof seed},
        &done[r]));
  }
  for (int r = 0; r < 30; r++) {
    RP_CHECK(rp_event_wait(c.rt, done[r], -1));
    rp_event_release(c.rt, done[r]);
  }
  int64_t v;
  RP_CHECK(rp_instance_read(c.rt, c.x[9], &v, sizeof v));
  cr_assert_eq(v, gchain_expect(929), "graphs=%d: %lld, want %lld", graphs,
               (long long)v, (long long)gchain_expect(929));
  RP_CHECK(rp_exec_stats_get(ex, s));
  cr_assert_eq(s->gpus, 2u);
  cr_assert_gt(s->gpu_segments, 1u, "the chain crosses GPUs: %u segments",
               s->gpu_segments);
  RP_CHECK(rp_exec_destroy(ex));
  gchain_fini(&c);
}

Test(replay_gpu, ungrouped_logical_gpus_wait_inside_their_graphs) {
  rp_exec_stats s;
  ungrouped_chain(1, &s);
  cr_assert_eq(s.stream_waits, 0u, "waits are graph nodes: %llu stream waits",
               (unsigned long long)s.stream_waits);
  cr_assert_eq(s.graph_launches, 30ull * s.gpu_segments);
  cr_assert_eq(s.gpu_ops_op_by_op, 0u);
  ungrouped_chain(0, &s);
  cr_assert_gt(s.stream_waits, 0u, "op by op: the launcher's stream waits");
  cr_assert_eq(s.graph_launches, 0u);
}

/* Two logical GPUs on one device alternate along the chain: one graph on
 * the device, no event between them, one launch per replay. */
Test(replay_gpu, logical_gpus_on_one_device_share_one_graph) {
  gchain c;
  gchain_init_on(&c, 2);
  rp_proc_info a, b;
  RP_CHECK(rp_proc_query(c.rt, gpu_proc(c.rt, 0), &a));
  RP_CHECK(rp_proc_query(c.rt, gpu_proc(c.rt, 1), &b));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(c.g, &(rp_exec_opts){.max_inflight = 4}, &ex));
  rp_event done[30];
  for (int r = 0; r < 30; r++) {
    int64_t seed = 700 + r;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &seed, .args_size = sizeof seed},
        &done[r]));
  }
  for (int r = 0; r < 30; r++) {
    RP_CHECK(rp_event_wait(c.rt, done[r], -1));
    rp_event_release(c.rt, done[r]);
  }
  int64_t v;
  RP_CHECK(rp_instance_read(c.rt, c.x[9], &v, sizeof v));
  cr_assert_eq(v, gchain_expect(729));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.gpus, 2u);
  cr_assert_neq(a.device, b.device, "logical indices differ");
  /* on a one-device machine both logical GPUs run on it: grouped */
  if (a.physical == b.physical ||
      rp__cuda_proc_device(c.rt, gpu_proc(c.rt, 0)) ==
          rp__cuda_proc_device(c.rt, gpu_proc(c.rt, 1))) {
    cr_assert_eq(s.gpu_devices, 1u);
    cr_assert_eq(s.gpu_segments, 1u, "one graph for both: %u segments",
                 s.gpu_segments);
    cr_assert_eq(s.graph_launches, 30u);
    cr_assert_eq(s.stream_waits, 0u);
    cr_assert_eq(s.param_copies, 30u, "one refresh copy per replay: %llu",
                 (unsigned long long)s.param_copies);
  } else {
    cr_assert_eq(s.gpu_devices, 2u);
  }
  cr_assert_eq(s.gpu_ops_op_by_op, 0u);
  cr_assert_eq(s.host_waits, 0u);
  RP_CHECK(rp_exec_destroy(ex));
  gchain_fini(&c);
}

#endif /* REPRISE_HAVE_CUDA */
