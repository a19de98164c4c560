/* test/test_oom.c — allocation failure, one allocation at a time.
 *
 * This binary links with the linker's --wrap for malloc, calloc, realloc
 * and aligned_alloc (test/CMakeLists.txt): every call the library (and
 * this file) makes goes through the wrappers below, which can fail the
 * n-th one. A sweep runs a whole scenario (runtime, model, record,
 * instantiate, replays, files, teardown) with allocation n failing, for
 * n = 0, 1, 2, ... until a run meets no failure. Each run must either
 * succeed with the same results as a run without failures (an allocation
 * the library can do without) or fail with RP_ENOMEM and a detail of its
 * own saying it ran out of memory (each run starts with a dummy detail,
 * as an earlier call's, which must not come back), and tear down cleanly:
 * every destroy returns RP_OK and, in ASan builds, LeakSanitizer finds
 * nothing after it. Allocations inside libc or other
 * shared libraries (Criterion, BLAS, fopen's buffer) are not wrapped.
 *
 * A second test arms "every allocation fails" around replays of an
 * instantiated exec: a replay allocates nothing (reprise.h), so they all
 * succeed and the wrappers see no call at all, from any thread. */
#include "helpers.h"
#include "capture/capture_impl.h"
#include "kernels/tasks.h"
#include "replay/lower.h"
#include "tools/cli.h"
#include "tools/dump_model.h"
#include "tools/dump_view.h"
#include "train/gpt.h"
#include "train/mlp.h"

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>
#endif
#ifdef REPRISE_HAVE_MPI
#include <mpi.h>
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define OOM_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOM_LEAK_CHECK 1
#endif
#endif
#ifdef OOM_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

/* ---- the wrappers ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);

/* Allocations to let through before the one that fails (-1: none fails);
 * oom_all: every one fails. */
static atomic_long oom_left = -1;
static atomic_int oom_all;
static atomic_long oom_calls; /* calls while armed */
static atomic_int oom_fired;

/* Where the first calls under oom_all came from (for the message). */
static void *_Atomic oom_callers[4];

static int oom_fail_at(void *caller) {
  if (atomic_load_explicit(&oom_all, memory_order_relaxed)) {
    long i = atomic_fetch_add(&oom_calls, 1);
    if (i < 4)
      atomic_store(&oom_callers[i], caller);
    return 1;
  }
  long l = atomic_load_explicit(&oom_left, memory_order_relaxed);
  while (l >= 0) {
    if (atomic_compare_exchange_weak(&oom_left, &l, l - 1)) {
      atomic_fetch_add(&oom_calls, 1);
      if (l == 0)
        atomic_store(&oom_fired, 1);
      return l == 0;
    }
  }
  return 0;
}

#define oom_fail() oom_fail_at(__builtin_return_address(0))

/* When set, a malloc that does not fail is made by this instead. */
static void *(*oom_hook)(size_t n);

void *__wrap_malloc(size_t n) {
  if (oom_fail())
    return NULL;
  return oom_hook ? oom_hook(n) : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
  return oom_fail() ? NULL : __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
  return oom_fail() ? NULL : __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
  return oom_fail() ? NULL : __real_aligned_alloc(align, n);
}

static void oom_arm(long n) {
  atomic_store(&oom_fired, 0);
  atomic_store(&oom_calls, 0);
  atomic_store(&oom_left, n);
}

/* Disarms; 1 when the armed allocation failed. */
static int oom_disarm(void) {
  atomic_store(&oom_left, -1);
  atomic_store(&oom_all, 0);
  return atomic_load(&oom_fired);
}

static void leak_check(const char *what, long n) {
#ifdef OOM_LEAK_CHECK
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
               "%s: LeakSanitizer found leaks in the runs up to allocation "
               "%ld failing (see the report above)",
               what, n);
#else
  (void)what, (void)n;
#endif
}

/* Set before each run of a sweep: a run that fails must replace it with
 * its own detail, which says it ran out of memory. */
#define STALE_DETAIL "stale detail from an earlier call"

static void stale_detail_set(void) {
  rp_error_set(RP_EINVAL, "%s", STALE_DETAIL);
}

/* 1 when a failed run's detail e is its own and says it ran out of memory
 * ("out of memory", ENOMEM's text from a system call, or "cannot allocate
 * N bytes" of a memory's allocator). */
static int oom_detail_ok(const char *e) {
  return !strstr(e, STALE_DETAIL) &&
         (strstr(e, "out of memory") || strstr(e, strerror(ENOMEM)) ||
          strstr(e, "cannot allocate"));
}

/* A scenario: runs to the end or to its first error, tears down what it
 * made either way, and returns the first error (teardown errors count:
 * a destroy must not fail because an allocation did). `out` gets the
 * results to compare (nout floats). */
typedef rp_status (*scenario_fn)(float *out, size_t nout);

/* Sweeps allocation n = 0, 1, ... of `run`; returns the number of
 * allocations a whole run made. */
static long sweep(const char *what, scenario_fn run, size_t nout) {
  float *want = calloc(nout, sizeof *want), *got = calloc(nout, sizeof *got);
  cr_assert(want && got);
  rp_status st = run(want, nout);
  cr_assert_eq(st, RP_OK, "%s without failures: %s (%s)", what,
               rp_status_name(st), rp_error_detail());
  leak_check(what, -1);
  long n = 0;
  for (;; n++) {
    memset(got, 0, nout * sizeof *got);
    stale_detail_set();
    oom_arm(n);
    st = run(got, nout);
    int fired = oom_disarm();
    if (st != RP_OK)
      cr_assert_eq(st, RP_ENOMEM,
                   "%s, allocation %ld failing: %s (%s), not RP_ENOMEM", what,
                   n, rp_status_name(st), rp_error_detail());
    if (st == RP_ENOMEM)
      cr_assert(oom_detail_ok(rp_error_detail()),
                "%s, allocation %ld failing: the detail '%s' is not "
                "its own saying out of memory",
                what, n, rp_error_detail());
    if (st == RP_OK) {
      size_t i = 0;
      while (i < nout && !memcmp(&got[i], &want[i], sizeof *got))
        i++;
      cr_assert(i == nout,
                "%s, allocation %ld failing: RP_OK with other results "
                "(result %zu: %g, not %g)",
                what, n, i, i < nout ? got[i] : 0.0, i < nout ? want[i] : 0.0);
    }
    /* a leak stays unreachable: one check every 64 runs and one at the
     * end find it, the report naming where it was allocated */
    if (!fired || n % 64 == 63)
      leak_check(what, n);
    if (!fired)
      break;
  }
  free(want);
  free(got);
  cr_log_info("%s: %ld allocations failed in turn", what, n);
  return n;
}

/* sweep, asserting that a whole run made more than `least` allocations
 * (a sweep that saw fewer tested less than it says). */
static void sweep_over(const char *what, scenario_fn run, size_t nout,
                       long least) {
  long n = sweep(what, run, nout);
  cr_assert_gt(n, least, "%s: the sweep saw only %ld allocations", what, n);
}

/* ---- scenarios ---- */

/* One replay of ex with args, waited for; its first error. */
static rp_status replay_wait(rp_runtime *rt, rp_exec *ex, const void *args,
                             size_t size) {
  rp_event done = {0};
  rp_status st =
      rp_replay(ex, &(rp_replay_args){.args = args, .args_size = size}, &done);
  if (st == RP_OK)
    st = rp_event_wait(rt, done, -1);
  rp_status rs = st == RP_OK || done.id ? rp_event_release(rt, done) : RP_OK;
  return st ? st : rs;
}

/* A new empty file from the template path ("/tmp/rp_oom_XXXXXX"). */
static rp_status temp_file(char *path) {
  int fd = mkstemp(path);
  if (fd < 0)
    return rp_error_set(RP_EIO, "mkstemp failed");
  close(fd);
  return RP_OK;
}

/* The files in dir other than those named in keep (NULL-ended): a failed
 * call must leave none behind (RP_EINVAL naming the first). Removes them
 * all, and dir when rm_dir. */
static rp_status dir_check_clean(const char *dir, const char *const *keep,
                                 int rm_dir) {
  rp_status st = RP_OK;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null", dir);
  FILE *p = popen(cmd, "r");
  char name[256];
  while (p && fgets(name, sizeof name, p)) {
    name[strcspn(name, "\n")] = 0;
    int kept = 0;
    for (int i = 0; keep && keep[i]; i++)
      kept |= !strcmp(keep[i], name);
    if (!kept && st == RP_OK)
      st = rp_error_set(RP_EINVAL, "a file left behind in %s: %s", dir, name);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
  }
  if (p)
    pclose(p);
  if (rm_dir)
    rmdir(dir);
  return st;
}

#define TRY(call)                                                              \
  do {                                                                         \
    rp_status t_ = (call);                                                     \
    if (t_ != RP_OK && st == RP_OK)                                            \
      st = t_;                                                                 \
  } while (0)

/* A scenario's teardown of its exec and graphs (each NULL: not made):
 * st, else the first error of the destroys. */
static rp_status drop_graphs(rp_status st, rp_exec *ex, rp_graph *back,
                             rp_graph *g) {
  if (ex)
    TRY(rp_exec_destroy(ex));
  if (back)
    TRY(rp_graph_destroy(back));
  if (g)
    TRY(rp_graph_destroy(g));
  return st;
}

/* Then (after its model) its runtime (NULL: not made) and, with dir, the
 * check that dir holds the file `keep` alone (dir_check_clean, dir
 * removed): st, else the first error of these. */
static rp_status drop_runtime(rp_status st, rp_runtime *rt, const char *dir,
                              const char *keep) {
  if (rt)
    TRY(rp_runtime_destroy(rt));
  if (dir) {
    const char *const kept[] = {keep, NULL};
    TRY(dir_check_clean(dir, kept, 1));
  }
  return st;
}

/* A GPT of 2 heads on 2 processors. */
static rp_gpt_config tiny_gpt(uint32_t layers, uint32_t width, uint32_t context,
                              uint32_t vocab, uint32_t batch) {
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = layers;
  c.heads = 2;
  c.width = width;
  c.context = context;
  c.vocab = vocab;
  c.batch = batch;
  c.procs = 2;
  return c;
}

static rp_status make_runtime(unsigned workers, rp_runtime **rt) {
  rp_runtime_config rc;
  rp_runtime_config_init(&rc);
  rc.backend = RP_BACKEND_CPU;
  rc.cpus = workers;
  rc.quiet = 1;
  rc.ignore_env = 1;
  *rt = NULL;
  return rp_runtime_create(&rc, rt);
}

/* The MLP on 2 processors: record (tasks, copies, replicate, repartition,
 * reductions), the graph file round trip, instantiate, the dump, a trace,
 * three replays with per-replay arguments. */
static rp_status mlp_scenario(float *out, size_t nout) {
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_dataset d;
  memset(&d, 0, sizeof d);
  rp_mlp *m = NULL;
  rp_graph *g = NULL, *back = NULL;
  rp_exec *ex = NULL;
  rp_inst insts[128];
  uint32_t ni = 0;
  char path[] = "/tmp/rp_oom_XXXXXX";
  rp_status st = temp_file(path);
  if (st != RP_OK)
    return st;
  st = make_runtime(2, &rt);
  if (st != RP_OK)
    goto out;
  TRY(rp_kernels_register(rt, &k));
  if (st == RP_OK)
    TRY(rp_data_generate(RP_DATA_SPIRALS, 256, 2, 3, 7, &d));
  rp_mlp_config c;
  rp_mlp_config_init(&c);
  c.hidden[0] = c.hidden[1] = 8;
  c.nhidden = 2;
  c.batch = 32;
  c.procs = 2;
  c.seed = 7;
  if (st == RP_OK)
    TRY(rp_mlp_create(rt, &k, &c, &d, &m));
  if (st == RP_OK)
    TRY(rp_mlp_record(m, &g));
#ifdef REPRISE_HAVE_CJSON
  if (st == RP_OK)
    TRY(rp_graph_save(g, path));
  if (st == RP_OK)
    TRY(rp_graph_instances(g, insts, 128, &ni));
  if (st == RP_OK)
    TRY(rp_graph_load(rt, path, insts, ni, &back));
#endif
  if (st == RP_OK)
    TRY(rp_instantiate(back ? back : g, NULL, &ex));
  FILE *devnull = fopen("/dev/null", "w");
  if (!devnull && st == RP_OK)
    st = rp_error_set(RP_EIO, "cannot open /dev/null");
  if (st == RP_OK)
    TRY(rp_graph_dump(g, devnull, RP_DUMP_JSON));
  if (st == RP_OK)
    TRY(rp_exec_dump(ex, devnull, RP_DUMP_TEXT));
  if (devnull)
    fclose(devnull);
  if (st == RP_OK)
    TRY(rp_exec_trace_start(ex, 2));
  for (uint32_t i = 0; i < 3 && st == RP_OK; i++) {
    rp_mlp_step_args a = {i, 0.05f};
    TRY(replay_wait(rt, ex, &a, sizeof a));
  }
  if (st == RP_OK)
    TRY(rp_exec_trace_write(ex, path));
  if (st == RP_OK && rp_mlp_param_count(m) > nout)
    st = rp_error_set(RP_EINVAL, "more parameters than expected");
  if (st == RP_OK)
    TRY(rp_mlp_params_read(m, out, nout));
out:
  st = drop_graphs(st, ex, back, g);
  if (m)
    TRY(rp_mlp_destroy(m));
  rp_data_free(&d);
  unlink(path);
  return drop_runtime(st, rt, NULL, NULL);
}

/* The tiny GPT (tensor parallelism tp) on rt: created, one batch
 * written, its step recorded, instantiated and replayed twice; *m, *g and
 * *ex as far as it got (the caller tears them down). */
static rp_status gpt_two_steps(rp_runtime *rt, uint32_t tp, rp_gpt **m,
                               rp_graph **g, rp_exec **ex) {
  rp_kernel_tasks k;
  rp_status st = RP_OK;
  TRY(rp_kernels_register(rt, &k));
  rp_gpt_config c = tiny_gpt(1, 8, 4, 5, 2);
  c.tp = tp;
  if (st == RP_OK)
    TRY(rp_gpt_create(rt, &k, &c, m));
  int32_t x[2 * 4] = {0, 1, 2, 3, 4, 3, 2, 1};
  int32_t y[2 * 4] = {1, 2, 3, 4, 3, 2, 1, 0};
  if (st == RP_OK)
    TRY(rp_gpt_write_batches(*m, x, y, 1));
  if (st == RP_OK)
    TRY(rp_gpt_record(*m, g));
  if (st == RP_OK)
    TRY(rp_instantiate(*g, NULL, ex));
  for (int32_t s = 1; s <= 2 && st == RP_OK; s++) {
    rp_gpt_step_args a = {.batch = 0, .lr = 0.01f, .step = s};
    TRY(replay_wait(rt, *ex, &a, sizeof a));
  }
  return st;
}

/* The GPT on 2 processors: create, record, instantiate, two replays, a
 * checkpoint written and read back into the model (streamed, and read
 * whole). */
static rp_status gpt_scenario(float *out, size_t nout) {
  rp_runtime *rt = NULL;
  rp_gpt *m = NULL;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_gpt_ckpt ck;
  memset(&ck, 0, sizeof ck);
  char path[] = "/tmp/rp_oom_XXXXXX";
  rp_status st = temp_file(path);
  if (st != RP_OK)
    return st;
  st = make_runtime(2, &rt);
  if (st != RP_OK)
    goto out;
  TRY(gpt_two_steps(rt, 1, &m, &g, &ex));
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  info.step = 2;
  info.iters = 10;
  info.lr = 0.01f;
  for (uint32_t i = 0; i < 5; i++)
    info.bytes[i] = (uint8_t)('a' + i);
  if (st == RP_OK)
    TRY(rp_gpt_save(m, path, &info));
  if (st == RP_OK) /* as `reprise train --load-weights` resumes */
    TRY(rp_gpt_ckpt_read_info(path, &ck));
  if (st == RP_OK)
    TRY(rp_gpt_ckpt_load(m, path, &ck));
  rp_gpt_ckpt ck2; /* and the values whole (rp_gpt_ckpt_read) */
  if (st == RP_OK)
    TRY(rp_gpt_ckpt_read(path, &ck2));
  if (st == RP_OK) {
    st = rp_gpt_ckpt_apply(m, &ck2);
    rp_gpt_ckpt_free(&ck2);
  }
  if (st == RP_OK && rp_gpt_param_count(m) > nout)
    st = rp_error_set(RP_EINVAL, "more parameters than expected");
  if (st == RP_OK)
    TRY(rp_gpt_params_read(m, out, nout));
out:
  rp_gpt_ckpt_free(&ck);
  st = drop_graphs(st, ex, NULL, g);
  if (m)
    TRY(rp_gpt_destroy(m));
  unlink(path);
  return drop_runtime(st, rt, NULL, NULL);
}

/* The GPT split by tensor parallelism (tp 2 over 2 processors: each
 * processor's shards of the split tensors): create, record, instantiate,
 * two replays, the gradient norm and the weights read back. */
static rp_status gpt_tp_scenario(float *out, size_t nout) {
  rp_runtime *rt = NULL;
  rp_gpt *m = NULL;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_status st = make_runtime(2, &rt);
  if (st != RP_OK)
    goto out;
  TRY(gpt_two_steps(rt, 2, &m, &g, &ex));
  float norm = 0;
  if (st == RP_OK)
    TRY(rp_gpt_grad_norm(m, &norm));
  if (st == RP_OK && rp_gpt_param_count(m) + 1 > nout)
    st = rp_error_set(RP_EINVAL, "more parameters than expected");
  if (st == RP_OK)
    TRY(rp_gpt_params_read(m, out, nout - 1));
  if (st == RP_OK)
    out[nout - 1] = norm;
out:
  st = drop_graphs(st, ex, NULL, g);
  if (m)
    TRY(rp_gpt_destroy(m));
  return drop_runtime(st, rt, NULL, NULL);
}

/* Text, eager training (every op launched one by one), evaluation, the
 * decode graph replayed per token, and full-recompute sampling. */
static rp_status gpt_eager_scenario(float *out, size_t nout) {
  static const char corpus[] = "the cat sat on the mat; the dog sat on "
                               "the log. the cat and the dog ate.";
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_gpt *m = NULL;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_text t;
  memset(&t, 0, sizeof t);
  rp_status st = make_runtime(2, &rt);
  if (st != RP_OK)
    return st;
  TRY(rp_kernels_register(rt, &k));
  if (st == RP_OK)
    TRY(rp_text_from_bytes("corpus", (const uint8_t *)corpus, sizeof corpus - 1,
                           4, &t));
  rp_gpt_config c = tiny_gpt(1, 8, 4, t.vocab, 2);
  if (st == RP_OK)
    TRY(rp_gpt_create(rt, &k, &c, &m));
  rp_gpt_train_opts o = {.iters = 2, .lr = 1e-2f};
  if (st == RP_OK)
    TRY(rp_gpt_train(m, NULL, &t, &o));
  int32_t x[2 * 4], y[2 * 4];
  double loss = 0;
  if (st == RP_OK)
    TRY(rp_text_windows(&t, 0, t.n, 2, 4, 3, 0, 1, x, y));
  if (st == RP_OK)
    TRY(rp_gpt_evaluate(m, x, y, 1, &loss));
  if (st == RP_OK)
    TRY(rp_gpt_decode_record(m, &g));
  if (st == RP_OK)
    TRY(rp_instantiate(g, NULL, &ex));
  int32_t prompt[2] = {1, 2}, gen[2 + 6], smp[2 + 2];
  rp_gpt_sampling how = {.temperature = 0, .seed = 1};
  if (st == RP_OK)
    TRY(rp_gpt_generate(m, ex, prompt, 2, 6, &how, gen));
  if (st == RP_OK)
    TRY(rp_gpt_sample(m, prompt, 2, 2, &how, smp));
  size_t np = rp_gpt_param_count(m);
  if (st == RP_OK && np + 1 + 8 + 4 > nout)
    st = rp_error_set(RP_EINVAL, "more parameters than expected");
  if (st == RP_OK)
    TRY(rp_gpt_params_read(m, out, np));
  if (st == RP_OK) {
    out[np] = (float)loss;
    for (int i = 0; i < 8; i++)
      out[np + 1 + i] = (float)gen[i];
    for (int i = 0; i < 4; i++)
      out[np + 9 + i] = (float)smp[i];
  }
  st = drop_graphs(st, ex, NULL, g);
  if (m)
    TRY(rp_gpt_destroy(m));
  rp_text_free(&t);
  return drop_runtime(st, rt, NULL, NULL);
}

/* A done slot's value before an eager launch: a launch that fails must
 * leave it so. */
static const rp_event UNSET = {0x5eed};

/* After an eager launch that returned st into *slot (preset to UNSET): a
 * failure that wrote *done is RP_EINVAL (the sweep reports it as not
 * RP_ENOMEM); a success is waited for and its event released. */
static rp_status launched(rp_runtime *rt, rp_status st, const rp_event *slot,
                          const char *what) {
  rp_event done = *slot; /* read after the launch (an argument may be
                            evaluated before it) */
  if (st)
    return done.id == UNSET.id
               ? st
               : rp_error_set(RP_EINVAL, "%s that failed with %s wrote *done",
                              what, rp_status_name(st));
  st = rp_event_wait(rt, done, -1);
  rp_status rs = rp_event_release(rt, done);
  return st ? st : rs;
}

/* Eager parallel operators: a REPLICATE of a whole into 4 parts, then a
 * REDUCTION of the parts back, each with a done event. An error partway
 * (a later copy's allocation) leaves *done untouched: the caller releases
 * nothing it was not given (RP_EINVAL here otherwise, which the sweep
 * reports as not RP_ENOMEM). */
static rp_status eager_parallel_scenario(float *out, size_t nout) {
  enum { NP = 4, N = 16 };
  rp_runtime *rt = NULL;
  rp_status st = make_runtime(2, &rt);
  if (st)
    return st;
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst whole = {0}, parts[NP] = {{0}};
  TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &whole));
  for (int i = 0; i < NP && !st; i++)
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &parts[i]));
  float v[N];
  for (int k = 0; k < N; k++)
    v[k] = (float)k + 0.5f;
  if (!st)
    TRY(rp_instance_write(rt, whole, v, sizeof v));
  rp_pop_kind kinds[2] = {RP_POP_REPLICATE, RP_POP_REDUCTION};
  for (int k = 0; k < 2 && !st; k++) {
    rp_parallel_op op = {
        .kind = kinds[k], .whole = whole, .parts = parts, .nparts = NP};
    rp_event done = UNSET;
    st = launched(rt, rp_launch_parallel(rt, &op, &done), &done,
                  "an eager parallel operator");
  }
  if (!st)
    TRY(rp_instance_read(rt, whole, out,
                         sizeof(float) * (nout < N ? nout : N)));
  rp_status dst = rp_runtime_destroy(rt);
  return st ? st : dst;
}

/* Eager copies, each with a done event, on fresh instances (their
 * dependence state is made as they launch): a launch that fails leaves
 * *done untouched, as every launch error does. */
static rp_status eager_copies_scenario(float *out, size_t nout) {
  enum { NI = 6, N = 16 };
  rp_runtime *rt = NULL;
  rp_status st = make_runtime(2, &rt);
  if (st)
    return st;
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst in[NI] = {{0}};
  for (int i = 0; i < NI && !st; i++)
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in[i]));
  float v[N];
  for (int k = 0; k < N; k++)
    v[k] = (float)k + 0.25f;
  if (!st)
    TRY(rp_instance_write(rt, in[0], v, sizeof v));
  for (int i = 1; i < NI && !st; i++) {
    rp_event done = UNSET;
    rp_copy c = {.src = in[i - 1], .dst = in[i], .domain = RP_DOMAIN_SRC};
    st = launched(rt, rp_launch_copy(rt, &c, &done), &done, "an eager copy");
  }
  if (!st)
    TRY(rp_instance_read(rt, in[NI - 1], out,
                         sizeof(float) * (nout < N ? nout : N)));
  rp_status dst = rp_runtime_destroy(rt);
  return st ? st : dst;
}

/* A task that declares a write and touches nothing (so a free that let
 * it run on freed storage would corrupt nothing: the scenario reports it). */
static rp_status touch_nothing(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* What an event's callback tried on an instance an eager op still uses. */
typedef struct change_in_cb {
  rp_runtime *rt;
  rp_inst inst;
  rp_status free_st, realloc_st;
  char realloc_why[256], free_why[256]; /* their details */
} change_in_cb;

static void change_from_callback(void *arg, rp_status st) {
  change_in_cb *c = arg;
  if (st) {
    c->free_st = c->realloc_st = st;
    return;
  }
  c->realloc_st = rp_instance_realloc(c->rt, &c->inst);
  snprintf(c->realloc_why, sizeof c->realloc_why, "%s", rp_error_detail());
  c->free_st = rp_instance_free(c->rt, c->inst);
  snprintf(c->free_why, sizeof c->free_why, "%s", rp_error_detail());
  if (c->free_st == RP_OK)
    c->inst.id = 0; /* gone */
}

/* An eager op that writes an instance waits for a user event; an event's
 * callback then reallocates and frees the instance. Both must refuse
 * (RP_EBUSY: the op is pending, and a callback does not wait) or fail
 * with RP_ENOMEM, the instance intact either way; a call that went ahead
 * would leave the op to run on freed storage. */
static rp_status busy_instance_scenario(float *out, size_t nout) {
  enum { N = 16 };
  rp_runtime *rt = NULL;
  rp_status st = make_runtime(2, &rt);
  if (st)
    return st;
  rp_task_id t = 0;
  TRY(rp_task_register(
      rt, &(rp_task_desc){.name = "touch_nothing", .cpu_fn = touch_nothing},
      &t));
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst inst = {0};
  if (!st)
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &inst));
  rp_event go = {0}, ping = {0};
  change_in_cb c = {rt, inst, RP_OK, RP_OK,
                    "", ""}; /* outlives ping's
                              * callback */
  if (!st)
    TRY(rp_event_create(rt, &go));
  if (!st) {
    rp_access acc = {.inst = inst, .priv = RP_WRITE};
    rp_event done = UNSET;
    rp_status ls = rp_launch_task(
        rt,
        &(rp_launch){
            .task = t, .proc = 0, .accesses = &acc, .naccess = 1, .wait = go},
        &done);
    if (ls) {
      st = done.id == UNSET.id
               ? ls
               : rp_error_set(RP_EINVAL, "a launch that failed wrote *done");
    } else {
      TRY(rp_event_create(rt, &ping));
      if (!st)
        TRY(rp_event_on_complete(rt, ping, change_from_callback, &c));
      if (!st)
        TRY(rp_event_trigger(rt, ping));
      if (!st) {
        rp_status cs[2] = {c.realloc_st, c.free_st};
        const char *what[2] = {"rp_instance_realloc", "rp_instance_free"};
        const char *why[2] = {c.realloc_why, c.free_why};
        inst = c.inst; /* the handle left (a realloc's, none) */
        for (int k = 0; k < 2 && !st; k++)
          if (cs[k] == RP_OK)
            st = rp_error_set(RP_EINVAL,
                              "%s from a callback returned RP_OK while an "
                              "eager op that writes the instance is pending",
                              what[k]);
          else if (cs[k] != RP_EBUSY) /* its own detail, not the other's */
            st = rp_error_set(cs[k], "%s", why[k]);
      }
      TRY(rp_event_trigger(rt, go));
      TRY(rp_event_wait(rt, done, -1));
      TRY(rp_event_release(rt, done));
    }
  }
  if (!st) { /* the op is done: the instance is whole and can go */
    float v[N];
    TRY(rp_instance_read(rt, inst, v, sizeof v));
    if (!st)
      memcpy(out, v, sizeof(float) * (nout < N ? nout : N));
  }
  if (inst.id)
    TRY(rp_instance_free(rt, inst));
  TRY(rp_event_release(rt, go));
  TRY(rp_event_release(rt, ping));
  rp_status dst = rp_runtime_destroy(rt);
  return st ? st : dst;
}

/* A callback that counts. */
static void count_cb(void *arg, rp_status st) {
  atomic_fetch_add((atomic_int *)arg, st == RP_OK ? 1 : 1000);
}

/* The engine's own tables past their first chunk and hash: 40 tasks,
 * 1100 instances (named, one reallocated with its data checked to stay
 * when that fails), 1100 events with callbacks and a merge of them all.
 * A call that fails must leave what it was given as it was. */
static rp_status engine_tables_scenario(float *out, size_t nout) {
  enum { NT = 40, NI = 1100, NE = 1100 };
  static rp_inst insts[NI];
  static rp_event evs[NE];
  memset(insts, 0, sizeof insts);
  memset(evs, 0, sizeof evs);
  rp_runtime *rt = NULL;
  rp_status st = make_runtime(1, &rt);
  if (st)
    return st;
  rp_task_id ids[NT];
  for (int i = 0; i < NT && !st; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", i);
    TRY(rp_task_register(
        rt, &(rp_task_desc){.name = name, .cpu_fn = touch_nothing}, &ids[i]));
  }
  for (int i = 0; i < NT && !st; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", i);
    rp_task_id id;
    TRY(rp_task_find(rt, name, &id));
    if (!st && id != ids[i])
      st = rp_error_set(RP_EINVAL, "task %s found as %u, not %u", name, id,
                        ids[i]);
  }
  rp_rect r = rp_rect_1d(0, 3);
  for (int i = 0; i < NI && !st; i++) {
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &insts[i]));
    if (!st)
      TRY(rp_instance_set_name(rt, insts[i], "x"));
  }
  float v[4] = {1, 2, 3, 4}, w[4] = {0};
  if (!st)
    TRY(rp_instance_write(rt, insts[NI - 1], v, sizeof v));
  if (!st) {
    rp_inst h = insts[NI - 1];
    rp_status rs = rp_instance_realloc(rt, &h);
    if (rs) { /* nothing changed: the handle and its data stay */
      st = rs;
      if (h.id != insts[NI - 1].id ||
          rp_instance_read(rt, h, w, sizeof w) != RP_OK ||
          memcmp(v, w, sizeof v))
        st = rp_error_set(RP_EINVAL, "a failed realloc changed the instance");
    } else {
      insts[NI - 1] = h;
      TRY(rp_instance_read(rt, h, w, sizeof w));
      if (!st && (w[0] || w[3]))
        st = rp_error_set(RP_EINVAL, "a realloc kept the old data");
      if (!st && strcmp(rp_instance_name(rt, h), "x"))
        st = rp_error_set(RP_EINVAL, "a realloc dropped the name");
    }
  }
  atomic_int calls = 0;
  for (int i = 0; i < NE && !st; i++) {
    TRY(rp_event_create(rt, &evs[i]));
    if (!st && i % 100 == 0)
      TRY(rp_event_on_complete(rt, evs[i], count_cb, &calls));
  }
  rp_event m = UNSET;
  if (!st) {
    rp_status ms = rp_event_merge(rt, evs, NE, &m);
    if (ms)
      st = m.id == UNSET.id
               ? ms
               : rp_error_set(RP_EINVAL, "a merge that failed wrote *out");
  }
  for (int i = 0; i < NE; i++)
    if (evs[i].id)
      TRY(rp_event_trigger(rt, evs[i]));
  if (!st) {
    TRY(rp_event_wait(rt, m, -1));
    TRY(rp_event_release(rt, m));
  }
  if (!st && atomic_load(&calls) != NE / 100)
    st = rp_error_set(RP_EINVAL, "%d callbacks ran (%d expected)",
                      atomic_load(&calls), NE / 100);
  for (int i = 0; i < NE; i++)
    TRY(rp_event_release(rt, evs[i]));
  for (int i = 0; i < NI; i++)
    TRY(rp_instance_free(rt, insts[i]));
  if (!st)
    for (size_t i = 0; i < nout && i < 4; i++)
      out[i] = w[i];
  rp_status dst = rp_runtime_destroy(rt);
  return st ? st : dst;
}

/* ---- the recorder: a failed recording call changes nothing ---- */

/* Instances private to one worker (the copy insertion tests' predicate,
 * test_insert.c): the worker that cannot reach one gets a mirror. */
typedef struct oom_priv {
  uint64_t id[2];
  rp_proc owner[2];
} oom_priv;

static int oom_private_reach(void *arg, rp_proc p, rp_inst inst) {
  const oom_priv *pv = arg;
  for (int i = 0; i < 2; i++)
    if (pv->id[i] == inst.id)
      return p != pv->owner[i] ? 0 : 1;
  return 1;
}

static void fnv(uint64_t *h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    *h = (*h ^ b[i]) * 0x100000001b3ull;
}

/* The graph as recorded (instances by slot and generation: a handle's
 * other bits differ between runtimes): ops (kind, task, processor, group, name,
 * inserted, accesses), edges in order, ports with their ops, mirrors, groups.
 */
static uint64_t graph_fingerprint(const rp_graph *g) {
  uint64_t h = 0xcbf29ce484222325ull;
  fnv(&h, &g->nops, sizeof g->nops);
  for (uint32_t i = 0; i < g->nops; i++) {
    const rp_gop *op = &g->ops[i];
    uint32_t w[6] = {op->kind,  op->task,     op->proc,
                     op->group, op->inserted, op->nacc};
    fnv(&h, w, sizeof w);
    fnv(&h, op->name, strlen(op->name));
    rp_access tmp[2];
    const rp_access *acc;
    uint32_t n = rp__op_accesses(op, tmp, &acc);
    for (uint32_t k = 0; k < n; k++) {
      uint32_t a[4] = {rp__inst_slot(acc[k].inst), rp__inst_gen(acc[k].inst),
                       (uint32_t)acc[k].priv, (uint32_t)acc[k].redop};
      fnv(&h, a, sizeof a);
    }
  }
  fnv(&h, &g->nedges, sizeof g->nedges);
  for (uint32_t e = 0; e < g->nedges; e++)
    fnv(&h, &g->edges[e], sizeof g->edges[e]);
  const rp_gport *ports[2] = {g->pre, g->post};
  uint32_t nports[2] = {g->npre, g->npost};
  for (int k = 0; k < 2; k++) {
    fnv(&h, &nports[k], sizeof nports[k]);
    for (uint32_t p = 0; p < nports[k]; p++) {
      fnv(&h, ports[k][p].name, strlen(ports[k][p].name));
      fnv(&h, &ports[k][p].nops, sizeof ports[k][p].nops);
      fnv(&h, ports[k][p].ops, sizeof *ports[k][p].ops * ports[k][p].nops);
    }
  }
  fnv(&h, &g->nmirrors, sizeof g->nmirrors);
  for (uint32_t m = 0; m < g->nmirrors; m++) {
    uint32_t v[3] = {rp__inst_slot(g->mirrors[m].src),
                     rp__inst_gen(g->mirrors[m].src), g->mirrors[m].mem};
    fnv(&h, v, sizeof v);
  }
  fnv(&h, &g->ngroups, sizeof g->ngroups);
  return h;
}

/* Each recording call is made again when it fails with RP_ENOMEM: the
 * sweep fails one allocation, so the second try gets what it asks for.
 * A failed call must have left the capture as it was (the retry then
 * records the same graph as one success), or failed the capture, which
 * rp_capture_end reports (RP_ENOMEM). */
#define RETRY(call)                                                            \
  do {                                                                         \
    if (st == RP_OK) {                                                         \
      rp_status r_ = (call);                                                   \
      if (r_ == RP_ENOMEM)                                                     \
        r_ = (call);                                                           \
      st = r_;                                                                 \
    }                                                                          \
  } while (0)

/* rp_capture_name_next (a failed launch spends the name), then l. */
static rp_status named_task(rp_runtime *rt, const char *name,
                            const rp_launch *l, rp_event *done) {
  rp_status st = rp_capture_name_next(rt, name);
  return st ? st : rp_launch_task(rt, l, done);
}

static rp_status named_parallel(rp_runtime *rt, const char *name,
                                const rp_parallel_op *op, rp_event *done) {
  rp_status st = rp_capture_name_next(rt, name);
  return st ? st : rp_launch_parallel(rt, op, done);
}

/* Records a step with a precondition port, tasks with and without copy
 * insertion (one writing an instance and reading another), a copy, a replicate
 * and a reduction of 3 parts and a postcondition, then instantiates and replays
 * it once. out: the graph's fingerprint (two 16-bit halves of its low 32 bits:
 * exact in a float), then the instances' contents. */
static rp_status recorder_scenario(float *out, size_t nout) {
  enum { N = 4, NP = 3 };
  rp_runtime *rt = NULL;
  rp_status st = make_runtime(2, &rt);
  if (st)
    return st;
  rp_kernel_tasks k;
  TRY(rp_kernels_register(rt, &k));
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_task_id nop = 0;
  TRY(rp_task_register(
      rt, &(rp_task_desc){.name = "touch_nothing", .cpu_fn = touch_nothing},
      &nop));
  rp_inst a = {0}, b = {0}, c = {0}, d = {0}, whole = {0}, parts[NP] = {{0}};
  rp_inst *all[] = {&a, &b, &c, &d, &whole, &parts[0], &parts[1], &parts[2]};
  enum { NI = sizeof all / sizeof *all };
  for (int i = 0; i < NI && !st; i++)
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, all[i]));
  for (int i = 0; i < NI && !st; i++) {
    float v[N];
    for (int e = 0; e < N; e++)
      v[e] = (float)(i * N + e) + 0.5f;
    TRY(rp_instance_write(rt, *all[i], v, sizeof v));
  }
  oom_priv pv = {{a.id, b.id}, {0, 1}};
  if (!st)
    TRY(rp__capture_set_reach(rt, oom_private_reach, &pv));
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  RETRY(rp_capture_begin(rt, NULL));
  int open = st == RP_OK;
  rp_event go = {0}, e_scale = {0}, e_axpy = {0}, e_red = {0};
  RETRY(rp_capture_precondition(rt, "go", &go, NULL));
  rp_scalar_args two = {2.0f, 0}, half = {0.5f, 0};
  /* worker 0 reads shared c after the precondition: no insertion */
  rp_access rc = {c, RP_RW, RP_REDOP_NONE};
  rp_launch l1 = {.task = k.scale,
                  .proc = 0,
                  .accesses = &rc,
                  .naccess = 1,
                  .args = &two,
                  .args_size = sizeof two,
                  .wait = go};
  RETRY(named_task(rt, "scale.c", &l1, &e_scale));
  /* c's writer again, then the first reader of d: an op whose accesses
   * change the analysis before one of them needs memory */
  rp_access rcd[2] = {{c, RP_RW, RP_REDOP_NONE}, {d, RP_READ, RP_REDOP_NONE}};
  rp_launch l0 = {.task = nop, .proc = 0, .accesses = rcd, .naccess = 2};
  RETRY(named_task(rt, "rw.c.read.d", &l0, NULL));
  /* a reduction group of 17 on d, then an op reading d and reducing into
   * it: its read closes the group before its reduction opens a new one,
   * whose predecessors (the 17 and itself) the reserve must have made room
   * for; then d's writer, ordered after it */
  rp_access rd_sum = {d, RP_REDUCE, RP_REDOP_SUM};
  rp_launch lr = {.task = nop, .proc = 0, .accesses = &rd_sum, .naccess = 1};
  for (int i = 0; i < 17; i++)
    RETRY(named_task(rt, "sum.d", &lr, NULL));
  rp_access rd_read_sum[2] = {{d, RP_READ, RP_REDOP_NONE},
                              {d, RP_REDUCE, RP_REDOP_SUM}};
  rp_launch lrr = {
      .task = nop, .proc = 0, .accesses = rd_read_sum, .naccess = 2};
  RETRY(named_task(rt, "read.sum.d", &lrr, NULL));
  rp_access rd_rw = {d, RP_RW, RP_REDOP_NONE};
  rp_launch lw = {.task = nop, .proc = 0, .accesses = &rd_rw, .naccess = 1};
  RETRY(named_task(rt, "rw.d", &lw, NULL));
  /* worker 1 scales a (worker 0's): fill, task, write-back */
  rp_access ra = {a, RP_RW, RP_REDOP_NONE};
  rp_launch l2 = {.task = k.scale,
                  .proc = 1,
                  .accesses = &ra,
                  .naccess = 1,
                  .args = &half,
                  .args_size = sizeof half,
                  .wait = e_scale};
  RETRY(named_task(rt, "scale.a", &l2, NULL));
  /* worker 0: b += 2 a, b being worker 1's */
  rp_access rab[2] = {{a, RP_READ, RP_REDOP_NONE}, {b, RP_RW, RP_REDOP_NONE}};
  rp_launch l3 = {.task = k.axpy,
                  .proc = 0,
                  .accesses = rab,
                  .naccess = 2,
                  .args = &two,
                  .args_size = sizeof two};
  RETRY(named_task(rt, "axpy", &l3, &e_axpy));
  rp_copy cp = {.src = b, .dst = whole, .domain = RP_DOMAIN_SRC};
  RETRY(rp_launch_copy(rt, &cp, NULL));
  rp_parallel_op rep = {
      .kind = RP_POP_REPLICATE, .whole = whole, .parts = parts, .nparts = NP};
  RETRY(named_parallel(rt, "rep", &rep, NULL));
  rp_parallel_op red = rep;
  red.kind = RP_POP_REDUCTION;
  RETRY(named_parallel(rt, "red", &red, &e_red));
  rp_event outs[2] = {e_axpy, e_red};
  RETRY(rp_capture_postcondition(rt, "out", outs, 2, NULL));
  if (open) {
    rp_status es = st ? rp_capture_abort(rt) : rp_capture_end(rt, &g);
    if (!st)
      st = es;
  }
  uint64_t fp = g ? graph_fingerprint(g) : 0;
  if (g)
    TRY(rp_instantiate(g, NULL, &ex));
  rp_event pre = {0}, post = {0}, done = {0};
  if (!st)
    TRY(rp_event_create(rt, &pre));
  if (!st)
    TRY(rp_event_trigger(rt, pre));
  if (!st) {
    rp_replay_args ra2 = {.pre = &pre, .npre = 1, .post = &post, .npost = 1};
    TRY(rp_replay(ex, &ra2, &done));
    if (!st) {
      TRY(rp_event_wait(rt, done, -1));
      TRY(rp_event_wait(rt, post, -1));
      TRY(rp_event_release(rt, done));
      TRY(rp_event_release(rt, post));
    }
  }
  TRY(rp_event_release(rt, pre));
  if (!st && nout >= 2 + NI * N) {
    out[0] = (float)(fp & 0xffff);
    out[1] = (float)((fp >> 16) & 0xffff);
    for (int i = 0; i < NI && !st; i++)
      TRY(rp_instance_read(rt, *all[i], out + 2 + i * N, sizeof(float) * N));
  }
  st = drop_graphs(st, ex, NULL, g);
  TRY(rp__capture_set_reach(rt, NULL, NULL));
  for (int i = 0; i < NI; i++)
    if (all[i]->id)
      TRY(rp_instance_free(rt, *all[i]));
  rp_status dst = rp_runtime_destroy(rt);
  return st ? st : dst;
}

/* ---- rp_exec_tune: a failed tune leaves the exec usable ---- */

static rp_status add1_i64(rp_task_ctx *ctx) {
  *(int64_t *)rp_ctx_ptr(ctx, 0) += 1;
  return RP_OK;
}

static rp_status sum4_i64(rp_task_ctx *ctx) {
  int64_t s = 0;
  for (uint32_t i = 0; i < 4; i++)
    s += *(const int64_t *)rp_ctx_ptr(ctx, i);
  *(int64_t *)rp_ctx_ptr(ctx, 4) += s;
  return RP_OK;
}

/* An unhinted fan (4 independent increments, then a join reading them:
 * the initial placement spreads it over both workers) tuned with every
 * placement timed equal: the initial one stays, so the tuner re-applies
 * it after timing the candidates. Whatever allocation fails there, the
 * exec must stay usable (reprise.h, rp_exec_tune): three more replays
 * then run every op exactly once each. out: 0 (the checks are here: a
 * failed tune's run is not compared). */
static rp_status tune_scenario(float *out, size_t nout) {
  enum { N = 5 };
  rp_runtime *rt = NULL;
  rp_status st = make_runtime(2, &rt);
  if (st)
    return st;
  rp_task_id add1 = 0, sum4 = 0;
  TRY(rp_task_register(
      rt, &(rp_task_desc){.name = "add1_i64", .cpu_fn = add1_i64}, &add1));
  if (!st)
    TRY(rp_task_register(
        rt, &(rp_task_desc){.name = "sum4_i64", .cpu_fn = sum4_i64}, &sum4));
  rp_inst x[N] = {{0}};
  rp_rect r = rp_rect_1d(0, 0);
  for (int i = 0; i < N && !st; i++)
    TRY(rp_instance_create(rt, 0, RP_I64, &r, NULL, &x[i]));
  int64_t zero = 0;
  for (int i = 0; i < N && !st; i++)
    TRY(rp_instance_write(rt, x[i], &zero, sizeof zero));
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  if (!st)
    TRY(rp_graph_create(rt, &g));
  rp_op_id ops[N];
  for (int i = 0; i < 4 && !st; i++) {
    rp_access a = {x[i], RP_RW, RP_REDOP_NONE};
    TRY(rp_graph_add_task(
        g,
        &(rp_launch){
            .task = add1, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
        &ops[i]));
  }
  rp_access j[N];
  for (int i = 0; i < N; i++)
    j[i] = (rp_access){x[i], i < 4 ? RP_READ : RP_RW, RP_REDOP_NONE};
  if (!st)
    TRY(rp_graph_add_task(
        g,
        &(rp_launch){
            .task = sum4, .proc = RP_PROC_ANY, .accesses = j, .naccess = N},
        &ops[4]));
  for (int i = 0; i < 4 && !st; i++)
    TRY(rp_graph_add_edge(g, ops[i], ops[4]));
  if (!st)
    TRY(rp_instantiate(g, NULL, &ex));
  uint32_t tuned = 0;
  rp_status tst = RP_OK;
  if (!st) {
    rp__tune_cost_hook = th_cost_all_equal;
    tst = rp_exec_tune(ex, NULL, &tuned);
    rp__tune_cost_hook = NULL;
    if (tst != RP_OK && tst != RP_ENOMEM)
      st = tst;
  }
  for (int i = 0; i < 3 && !st; i++) {
    /* a broken placement deadlocks its replay: reported, not waited for
     * (nothing is torn down then: the exec cannot be) */
    rp_event done = {0};
    TRY(rp_replay(ex, NULL, &done));
    if (st)
      break;
    rp_status ws = rp_event_wait(rt, done, 60 * 1000000000ll);
    if (ws == RP_ETIMEDOUT)
      return rp_error_set(RP_ETIMEDOUT,
                          "after rp_exec_tune returned %s (%u trial "
                          "replays), replay %d never completed",
                          rp_status_name(tst), tuned, i);
    TRY(ws);
    TRY(rp_event_release(rt, done));
  }
  if (!st) {
    int64_t v[N], n = (int64_t)tuned + 3;
    for (int i = 0; i < N && !st; i++)
      TRY(rp_instance_read(rt, x[i], &v[i], sizeof v[i]));
    for (int i = 0; i < N && !st; i++)
      if (v[i] != (i < 4 ? n : 2 * n * (n + 1)))
        st = rp_error_set(RP_EINVAL,
                          "after rp_exec_tune returned %s (%u trial "
                          "replays) and 3 replays, instance %d holds %lld, "
                          "not %lld: the exec ran ops twice or not at all",
                          rp_status_name(tst), tuned, i, (long long)v[i],
                          (long long)(i < 4 ? n : 2 * n * (n + 1)));
  }
  if (!st)
    st = tst;
  st = drop_graphs(st, ex, NULL, g);
  for (int i = 0; i < N; i++)
    if (x[i].id)
      TRY(rp_instance_free(rt, x[i]));
  for (size_t i = 0; i < nout; i++)
    out[i] = 0;
  rp_status dst = rp_runtime_destroy(rt);
  return st ? st : dst;
}

/* ---- the GPU lowering's plan, on a model of a machine ---- */

static rp_status gpu_nop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* A model with 3 CPU workers and GPUs 3, 4 (one device) and 5 (another),
 * and a graph over them: host work between GPU chains (several segments),
 * cross-GPU edges both ways, a precondition and a postcondition. */
static rp_status gpu_plan_graph(rp_runtime **rt, rp_graph **g) {
  rp_machine_desc m = {.cpus = 3, .ngpus = 3, .gpu_device = {0, 0, 1}};
  *rt = NULL;
  *g = NULL;
  rp_status st = rp_runtime_create_model(&m, rt);
  rp_task_id t = 0;
  rp_task_desc d = {.name = "t.gpu", .cpu_fn = gpu_nop, .gpu_fn = gpu_nop};
  if (!st)
    TRY(rp_task_register(*rt, &d, &t));
  if (!st)
    TRY(rp_graph_create(*rt, g));
  /* procs of the ops (A: host work, placed), edges from the op before
   * and from op - 3 */
  const rp_proc A = RP_PROC_ANY;
  const rp_proc procs[] = {3, A, 4, 5, A, 3, 5, 4, A, 3, A, 5, 4, A, A};
  enum { NOPS = sizeof procs / sizeof procs[0] };
  uint32_t arg = 0;
  for (uint32_t i = 0; i < NOPS && !st; i++) {
    rp_launch l = {.task = t,
                   .proc = procs[i],
                   .args = &arg,
                   .args_size = sizeof arg,
                   .cost_ns = 1000 + 500 * (i % 3)};
    TRY(rp_graph_add_task(*g, &l, NULL));
    if (i && !st)
      TRY(rp_graph_add_edge(*g, i - 1, i));
    if (i >= 3 && !st)
      TRY(rp_graph_add_edge(*g, i - 3, i));
  }
  /* and independent host work, spread over the workers */
  for (uint32_t i = 0; i < 3 && !st; i++) {
    rp_launch l = {.task = t, .proc = A, .cost_ns = 50000};
    TRY(rp_graph_add_task(*g, &l, NULL));
  }
  rp_port_id pre = 0, post = 0;
  if (!st)
    TRY(rp_graph_add_precondition(*g, "in", &pre));
  if (!st)
    TRY(rp_graph_bind_precondition(*g, pre, 6));
  if (!st)
    TRY(rp_graph_add_postcondition(*g, "out", &post));
  if (!st)
    TRY(rp_graph_bind_postcondition(*g, post, 7));
  return st;
}

/* The exec's dump as text into buf (NUL-terminated, truncated to n). */
static rp_status exec_text(const rp_exec *ex, char *buf, size_t n) {
  FILE *f = fmemopen(buf, n, "w");
  if (!f)
    return rp_error_set(RP_EIO, "fmemopen failed");
  rp_status st = rp_exec_dump(ex, f, RP_DUMP_TEXT);
  fclose(f);
  buf[n - 1] = 0;
  return st;
}

/* Instantiate on the model (cut, launchers, placement, the per-placement
 * segment data) and the exec's figures. out: the statistics of the plan. */
static rp_status gpu_plan_scenario(float *out, size_t nout) {
  rp_runtime *rt = NULL;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_status st = gpu_plan_graph(&rt, &g);
  if (!st)
    TRY(rp_instantiate(g, NULL, &ex));
  rp_exec_stats s;
  if (!st)
    TRY(rp_exec_stats_get(ex, &s));
  if (!st && nout >= 6) {
    out[0] = (float)s.gpu_segments;
    out[1] = (float)s.gpus;
    out[2] = (float)s.gpu_devices;
    out[3] = (float)s.max_gpu_segments;
    out[4] = (float)s.procs_used;
    out[5] = (float)s.ops;
  }
  return drop_runtime(drop_graphs(st, ex, NULL, g), rt, NULL, NULL);
}

/* ---- tests ---- */

/* ---- graph files, dumps, the dump tool's model and views, traces ---- */

#ifdef REPRISE_HAVE_CJSON
/* cJSON is a shared library, whose allocations the wrappers do not see:
 * its hooks send them through the wrappers for the sweeps of graph files,
 * dumps and traces. */
static void cjson_through_wrappers(int on) {
  cJSON_Hooks h = {.malloc_fn = __wrap_malloc, .free_fn = free};
  cJSON_InitHooks(on ? &h : NULL);
}
#endif

/* A file of text in dir, read whole into *buf (malloc'd, NUL-ended; NULL
 * and 0 when it does not exist). */
static rp_status slurp(const char *path, char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return RP_OK;
  char *b = NULL;
  size_t n = 0, cap = 0;
  int c;
  while ((c = fgetc(f)) != EOF) {
    if (n + 2 > cap) {
      cap = cap ? 2 * cap : 4096;
      char *nb = __real_realloc(b, cap);
      if (!nb) {
        free(b);
        fclose(f);
        return rp_error_set(RP_EIO, "slurp: cannot grow a buffer");
      }
      b = nb;
    }
    b[n++] = (char)c;
  }
  fclose(f);
  if (!b)
    b = __real_malloc(1);
  b[n] = 0;
  *buf = b;
  *len = n;
  return RP_OK;
}

/* FNV-1a of n bytes into out[0..3] (16-bit pieces: exact in a float). */
static void hash_out(float *out, const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  fnv(&h, p, n);
  for (int i = 0; i < 4; i++)
    out[i] = (float)((h >> (16 * i)) & 0xffff);
}

/* A stream into memory (libc's buffer: not wrapped). */
typedef struct memout {
  FILE *f;
  char *buf;
  size_t len;
} memout;

static rp_status memout_open(memout *m) {
  memset(m, 0, sizeof *m);
  m->f = open_memstream(&m->buf, &m->len);
  return m->f ? RP_OK : rp_error_set(RP_EIO, "open_memstream failed");
}

/* Closes m (its text stays in m->buf until memout_free). */
static void memout_close(memout *m) {
  if (m->f)
    fclose(m->f);
  m->f = NULL;
}

static void memout_free(memout *m) {
  memout_close(m);
  free(m->buf);
  m->buf = NULL;
}

/* A small graph of every kind of op a graph file holds: named tasks with
 * arguments, an interpolation and cost hints, a copy, a replicate and a
 * reduction of 2 parts, an all-reduce and a local copy between ranks (the
 * one rank), named instances, edges and both kinds of port. */
static rp_status file_graph(rp_runtime *rt, const rp_kernel_tasks *k,
                            rp_inst *in, rp_graph **g) {
  enum { N = 4 };
  rp_rect r = rp_rect_1d(0, N - 1);
  static const char *const names[6] = {"a", "b", "c", "whole", "p0", "p1"};
  rp_status st = RP_OK;
  for (int i = 0; i < 6 && !st; i++) {
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in[i]));
    if (!st)
      TRY(rp_instance_set_name(rt, in[i], names[i]));
    float v[N];
    for (int e = 0; e < N; e++)
      v[e] = (float)(i * N + e) + 0.5f;
    if (!st)
      TRY(rp_instance_write(rt, in[i], v, sizeof v));
  }
  *g = NULL;
  if (!st)
    TRY(rp_graph_create(rt, g));
  rp_scalar_args two = {2.0f, 0};
  rp_access aa = {in[0], RP_RW, RP_REDOP_NONE};
  rp_access ab[2] = {{in[0], RP_READ, RP_REDOP_NONE},
                     {in[1], RP_RW, RP_REDOP_NONE}};
  rp_op_id s = 0, x = 0, c = 0, p = 0, ar = 0, dc = 0;
  uint32_t np = 0;
  if (!st)
    TRY(rp_graph_add_task(*g,
                          &(rp_launch){.task = k->scale,
                                       .proc = 0,
                                       .accesses = &aa,
                                       .naccess = 1,
                                       .args = &two,
                                       .args_size = sizeof two,
                                       .cost_ns = 2000},
                          &s));
  if (!st)
    TRY(rp_graph_set_op_name(*g, s, "step.scale"));
  if (!st)
    TRY(rp_graph_add_interp(*g, s, &(rp_interp){0, 0, sizeof(float)}));
  if (!st)
    TRY(rp_graph_add_task(*g,
                          &(rp_launch){.task = k->axpy,
                                       .proc = 1,
                                       .accesses = ab,
                                       .naccess = 2,
                                       .args = &two,
                                       .args_size = sizeof two},
                          &x));
  if (!st)
    TRY(rp_graph_set_op_name(*g, x, "step.axpy"));
  if (!st)
    TRY(rp_graph_add_copy(
        *g, &(rp_copy){.src = in[1], .dst = in[3], .domain = RP_DOMAIN_SRC},
        &c));
  rp_parallel_op rep = {
      .kind = RP_POP_REPLICATE, .whole = in[3], .parts = &in[4], .nparts = 2};
  if (!st)
    TRY(rp_graph_add_parallel(*g, &rep, &p, &np));
  if (!st)
    TRY(rp_graph_add_allreduce(
        *g, &(rp_allreduce){.inst = in[2], .redop = RP_REDOP_SUM}, &ar));
  if (!st)
    TRY(rp_graph_add_dist_copy(
        *g, &(rp_dist_copy){.src = in[2], .dst = in[0], .redop = RP_REDOP_SUM},
        &dc));
  if (!st)
    TRY(rp_graph_add_edge(*g, s, x));
  if (!st)
    TRY(rp_graph_add_edge(*g, x, c));
  for (uint32_t i = 0; i < np && !st; i++)
    TRY(rp_graph_add_edge(*g, c, p + i));
  if (!st)
    TRY(rp_graph_add_edge(*g, ar, dc));
  if (!st)
    TRY(rp_graph_add_edge(*g, dc, s));
  rp_port_id pre = 0, post = 0;
  if (!st)
    TRY(rp_graph_add_precondition(*g, "in", &pre));
  if (!st)
    TRY(rp_graph_bind_precondition(*g, pre, ar));
  if (!st)
    TRY(rp_graph_add_postcondition(*g, "out", &post));
  for (uint32_t i = 0; i < np && !st; i++)
    TRY(rp_graph_bind_postcondition(*g, post, p + i));
  return st;
}

/* The start of file_graph's scenarios: a new directory from the template
 * dir ("/tmp/rp_oom_dir_XXXXXX") and path (64 bytes), the file `name` in
 * it; a runtime of 2 workers, its kernels and file_graph's graph. */
static rp_status file_start(char *dir, char *path, const char *name,
                            rp_runtime **rt, rp_kernel_tasks *k, rp_inst *in,
                            rp_graph **g) {
  if (!mkdtemp(dir))
    return rp_error_set(RP_EIO, "mkdtemp failed");
  snprintf(path, 64, "%s/%s", dir, name);
  rp_status st = make_runtime(2, rt);
  if (!st)
    TRY(rp_kernels_register(*rt, k));
  if (!st)
    TRY(file_graph(*rt, k, in, g));
  return st;
}

/* One replay with the one precondition triggered and the postcondition
 * waited for. */
static rp_status replay_ports(rp_runtime *rt, rp_exec *ex, const void *args,
                              size_t size) {
  rp_event pre = {0}, post = {0}, done = {0};
  rp_status st = rp_event_create(rt, &pre);
  if (!st)
    TRY(rp_event_trigger(rt, pre));
  if (!st) {
    rp_replay_args ra = {.args = args,
                         .args_size = size,
                         .pre = &pre,
                         .npre = 1,
                         .post = &post,
                         .npost = 1};
    TRY(rp_replay(ex, &ra, &done));
    if (!st) {
      TRY(rp_event_wait(rt, done, -1));
      TRY(rp_event_wait(rt, post, -1));
      TRY(rp_event_release(rt, done));
      TRY(rp_event_release(rt, post));
    }
  }
  if (pre.id)
    TRY(rp_event_release(rt, pre));
  return st;
}

/* rp_graph_save over an older file, rp_graph_load of it, the graph dumps
 * (text, DOT, JSON) of what loaded, rp_instantiate with REPRISE_DUMP set,
 * the exec's dumps, two replays. A failed save leaves the older file as it
 * was and nothing else; a dump REPRISE_DUMP could not write is whole or
 * absent. out: hashes of the file, of the dumps and of the instances. */
static rp_status graph_file_scenario(float *out, size_t nout) {
  enum { NI = 6, N = 4, NH = 6 };
  char dir[] = "/tmp/rp_oom_dir_XXXXXX", path[64], dump_dir[64];
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_inst in[NI] = {{0}};
  rp_graph *g = NULL, *back = NULL;
  rp_exec *ex = NULL;
  memout dumps[NH];
  memset(dumps, 0, sizeof dumps);
  char *text = NULL;
  size_t len = 0;
  rp_status st = file_start(dir, path, "g.json", &rt, &k, in, &g);
  snprintf(dump_dir, sizeof dump_dir, "%s/dumps", dir);
  static const char older[] = "an older file\n";
  FILE *f = st ? NULL : fopen(path, "w");
  if (!st && (!f || fputs(older, f) == EOF || fclose(f)))
    st = rp_error_set(RP_EIO, "cannot write %s", path);
  if (!st) {
    rp_status ss = rp_graph_save(g, path);
    if (ss) { /* the older file stays, and nothing else is written */
      rp_status rs = slurp(path, &text, &len);
      if (!rs && (!text || strcmp(text, older)))
        rs = rp_error_set(RP_EINVAL,
                          "rp_graph_save failed (%s) and the older file "
                          "changed",
                          rp_status_name(ss));
      free(text);
      text = NULL;
      static const char *const keep[] = {"g.json", NULL};
      if (!rs)
        rs = dir_check_clean(dir, keep, 0);
      st = rs ? rs : rp_error_set(ss, "%s", rp_error_detail());
    }
  }
  if (!st)
    TRY(slurp(path, &text, &len));
  if (!st && nout >= 4 * (NH + 1) + NI * N)
    hash_out(out, text, len);
  rp_inst insts[16];
  uint32_t ni = 0;
  if (!st)
    TRY(rp_graph_instances(g, insts, 16, &ni));
  if (!st)
    TRY(rp_graph_load(rt, path, insts, ni, &back));
  static const rp_dump_format fmts[3] = {RP_DUMP_TEXT, RP_DUMP_DOT,
                                         RP_DUMP_JSON};
  for (int i = 0; i < 3 && !st; i++) {
    TRY(memout_open(&dumps[i]));
    if (!st)
      TRY(rp_graph_dump(back, dumps[i].f, fmts[i]));
  }
  if (!st && setenv("REPRISE_DUMP", dump_dir, 1))
    st = rp_error_set(RP_EIO, "setenv failed");
  if (!st)
    TRY(rp_instantiate(back, NULL, &ex));
  unsetenv("REPRISE_DUMP");
  for (int i = 0; i < 3 && !st; i++) {
    TRY(memout_open(&dumps[3 + i]));
    if (!st)
      TRY(rp_exec_dump(ex, dumps[3 + i].f, fmts[i]));
  }
  /* what REPRISE_DUMP wrote: whole (the same text as the dumps above) or
   * nothing */
  if (ex) {
    char cmd[256], name[256];
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null", dump_dir);
    FILE *p = popen(cmd, "r");
    while (p && fgets(name, sizeof name, p)) {
      name[strcspn(name, "\n")] = 0;
      char fp[512];
      snprintf(fp, sizeof fp, "%s/%s", dump_dir, name);
      const char *want = NULL;
      if (strstr(name, ".graph.json"))
        want = text; /* as rp_graph_save wrote it */
      else if (strstr(name, ".schedule.txt"))
        want = dumps[3].f ? (memout_close(&dumps[3]), dumps[3].buf) : NULL;
      char *got = NULL;
      size_t glen = 0;
      rp_status rs = slurp(fp, &got, &glen);
      if (!rs && want && strcmp(got, want) && !st)
        st = rp_error_set(RP_EINVAL, "REPRISE_DUMP left %s partial", name);
      else if (!rs && !want && !st)
        st = rp_error_set(RP_EINVAL, "REPRISE_DUMP wrote %s", name);
      free(got);
      unlink(fp);
    }
    if (p)
      pclose(p);
  }
  rmdir(dump_dir);
  float alpha = 3.0f;
  for (int i = 0; i < 2 && !st; i++)
    TRY(replay_ports(rt, ex, &alpha, sizeof alpha));
  for (int i = 0; i < NH && !st; i++) {
    memout_close(&dumps[i]);
    if (nout >= 4 * (NH + 1) + NI * N)
      hash_out(out + 4 * (i + 1), dumps[i].buf, dumps[i].len);
  }
  for (int i = 0; i < NI && !st; i++)
    if (nout >= 4 * (NH + 1) + NI * N)
      TRY(rp_instance_read(rt, in[i], out + 4 * (NH + 1) + i * N,
                           sizeof(float) * N));
  for (int i = 0; i < NH; i++)
    memout_free(&dumps[i]);
  free(text);
  return drop_runtime(drop_graphs(st, ex, back, g), rt, dir, "g.json");
}

/* A dump tool's call that returned rc (0 ok) with what it said on err:
 * RP_ENOMEM when it said it ran out of memory (rp_error_detail: its
 * words), else RP_EINVAL naming the call. */
static rp_status tool_status(const char *call, int rc, memout *err) {
  fflush(err->f);
  const char *said = err->buf ? err->buf : "";
  if (!rc && !strstr(said, "out of memory"))
    return RP_OK;
  if (strstr(said, "out of memory"))
    return rp_error_set(RP_ENOMEM, "%s: %s", call, said);
  return rp_error_set(RP_EINVAL, "%s failed (%d) saying '%s'", call, rc, said);
}

/* As `reprise dump` reads a graph file: the text, rp_graph_load_mem, the
 * model (dm_build), then --stats, --lint, --critical-path, --group 1
 * (text, DOT, JSON), --focus with --depth 1, the file's extras and
 * --diff of the graph against itself. A view that says "out of memory"
 * counts as RP_ENOMEM. out: a hash of everything written. */
static rp_status dump_tool_scenario(float *out, size_t nout) {
  enum { NI = 6 };
  char dir[] = "/tmp/rp_oom_dir_XXXXXX", path[64];
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_inst in[NI] = {{0}};
  rp_graph *g = NULL, *back = NULL;
  char *text = NULL;
  size_t len = 0;
  memout o = {0}, e = {0};
  dm_graph m = {0};
  dv_crit c = {0};
  dv_view v = {0};
  dv_extra x = {0};
  int have_m = 0, have_x = 0;
  uint32_t *focus = NULL;
  rp_status st = file_start(dir, path, "g.json", &rt, &k, in, &g);
  if (!st)
    TRY(rp_graph_save(g, path));
  if (!st)
    TRY(slurp(path, &text, &len));
  if (!st)
    TRY(rp_graph_load_mem(rt, text, len, NULL, 0, 0, &back));
  if (!st)
    TRY(memout_open(&o));
  if (!st)
    TRY(memout_open(&e));
  if (!st) {
    TRY(dm_build(back, NULL, NULL, &m));
    have_m = !st;
  }
  if (!st)
    TRY(tool_status("dm_stats", dm_stats(&m, o.f, e.f), &e));
  dm_lint_result lr;
  memset(&lr, 0, sizeof lr);
  if (!st)
    TRY(tool_status("dm_lint", dm_lint(&m, DM_LINT_ALL, o.f, e.f, &lr), &e));
  if (!st && lr.unchecked)
    st = strstr(lr.why, "out of memory")
             ? rp_error_set(RP_ENOMEM, "dm_lint: %s", lr.why)
             : rp_error_set(RP_EINVAL, "dm_lint: %s", lr.why);
  if (!st)
    TRY(tool_status("dv_crit_find", dv_crit_find(&m, NULL, &c, e.f), &e));
  if (!st)
    TRY(tool_status("dv_crit_print", dv_crit_print(&m, &c, NULL, 1, o.f), &e));
  if (!st)
    TRY(tool_status("dv_build",
                    dv_build(&m, &(dv_opts){.depth = 1, .crit = &c}, &v, e.f),
                    &e));
  static const rp_dump_format fmts[3] = {RP_DUMP_TEXT, RP_DUMP_DOT,
                                         RP_DUMP_JSON};
  for (int i = 0; i < 3 && !st; i++)
    TRY(tool_status("dv_write", dv_write(&m, &v, fmts[i], "--group 1", o.f),
                    &e));
  if (!st) {
    uint32_t n = dv_focus(&m, "step.axpy", 1, &focus);
    if (n == UINT32_MAX)
      st = rp_error_set(RP_ENOMEM, "dv_focus: out of memory");
    else if (n != 3)
      st = rp_error_set(RP_EINVAL, "dv_focus: %u ops, not 3", n);
    else
      fprintf(o.f, "focus %u %u %u\n", focus[0], focus[1], focus[2]);
  }
  if (!st) {
    TRY(tool_status("dv_extra_read", dv_extra_read(text, len, &x, e.f), &e));
    have_x = !st;
  }
  uint32_t nd = 0;
  if (!st)
    TRY(tool_status("dv_diff", dv_diff(&m, &x, &m, &x, o.f, e.f, &nd), &e));
  if (!st && nd)
    st = rp_error_set(RP_EINVAL,
                      "dv_diff: %u differences of a graph from "
                      "itself",
                      nd);
  if (o.f) {
    fflush(o.f);
    if (!st && strstr(o.buf, "out of memory"))
      st = rp_error_set(RP_ENOMEM, "a view said: out of memory");
    if (!st && nout >= 4)
      hash_out(out, o.buf, o.len);
  }
  free(focus);
  if (have_x)
    dv_extra_free(&x);
  dv_free(&v);
  dv_crit_free(&c);
  if (have_m)
    dm_free(&m);
  memout_free(&o);
  memout_free(&e);
  free(text);
  return drop_runtime(drop_graphs(st, NULL, back, g), rt, dir, "g.json");
}

/* rp_exec_trace_start of 1 replay, 2 replays, rp_exec_trace_write (a
 * failed write leaves no file and the trace armed: rp_exec_trace_start
 * says RP_EBUSY), then the trace as `reprise dump --trace --summary
 * --critical-path` reads it. out: the replays' results and the task and
 * copy events the trace holds (how long each took is not compared). */
static rp_status trace_scenario(float *out, size_t nout) {
  enum { NI = 6, N = 4 };
  char dir[] = "/tmp/rp_oom_dir_XXXXXX", path[64];
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_inst in[NI] = {{0}};
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  memout o = {0}, e = {0};
  dm_graph m = {0};
  dv_trace t = {0};
  dv_crit c = {0};
  int have_m = 0, have_t = 0;
  double *cost = NULL;
  rp_status st = file_start(dir, path, "t.json", &rt, &k, in, &g);
  if (!st)
    TRY(rp_instantiate(g, NULL, &ex));
  if (!st) /* the first of the two replays */
    TRY(rp_exec_trace_start(ex, 1));
  float alpha = 3.0f;
  for (int i = 0; i < 2 && !st; i++)
    TRY(replay_ports(rt, ex, &alpha, sizeof alpha));
  if (!st) {
    rp_status ws = rp_exec_trace_write(ex, path);
    if (ws) {
      st = ws;
      char detail[512];
      snprintf(detail, sizeof detail, "%s", rp_error_detail());
      rp_status again = rp_exec_trace_start(ex, 1);
      if (access(path, F_OK) == 0)
        st = rp_error_set(RP_EINVAL,
                          "rp_exec_trace_write failed (%s) and left %s",
                          rp_status_name(ws), path);
      else if (again != RP_EBUSY)
        st = rp_error_set(RP_EINVAL,
                          "rp_exec_trace_write failed (%s) and the trace "
                          "is not armed any more (rp_exec_trace_start: %s)",
                          rp_status_name(ws), rp_status_name(again));
      else
        st = rp_error_set(ws, "%s", detail);
    }
  }
  if (!st)
    TRY(memout_open(&o));
  if (!st)
    TRY(memout_open(&e));
  if (!st) {
    TRY(tool_status("dv_trace_load", dv_trace_load(path, 0, &t, e.f), &e));
    have_t = !st;
  }
  if (!st) {
    TRY(dm_build(g, NULL, NULL, &m));
    have_m = !st;
  }
  if (!st)
    TRY(tool_status("dv_trace_matches", dv_trace_matches(&t, &m, e.f), &e));
  if (!st)
    TRY(tool_status("dv_trace_op_costs", dv_trace_op_costs(&t, &m, &cost, e.f),
                    &e));
  if (!st)
    TRY(tool_status("dv_summary", dv_summary(&t, 1, 100.0, o.f, e.f), &e));
  if (!st)
    TRY(tool_status("dv_crit_find", dv_crit_find(&m, cost, &c, e.f), &e));
  if (!st)
    TRY(tool_status("dv_crit_print", dv_crit_print(&m, &c, cost, 1, o.f), &e));
  if (o.f) {
    fflush(o.f);
    if (!st && strstr(o.buf, "out of memory"))
      st = rp_error_set(RP_ENOMEM, "a view said: out of memory");
  }
  if (!st && nout >= 1 + NI * N) {
    uint32_t ops = 0;
    for (uint32_t i = 0; i < t.nev; i++)
      ops += t.ev[i].cat == DV_EV_TASK || t.ev[i].cat == DV_EV_COPY;
    out[0] = (float)ops;
    for (int i = 0; i < NI && !st; i++)
      TRY(rp_instance_read(rt, in[i], out + 1 + i * N, sizeof(float) * N));
  }
  free(cost);
  dv_crit_free(&c);
  if (have_t)
    dv_trace_free(&t);
  if (have_m)
    dm_free(&m);
  memout_free(&o);
  memout_free(&e);
  return drop_runtime(drop_graphs(st, ex, NULL, g), rt, dir, "t.json");
}

/* The communication ops of one rank, eager and replayed: an all-reduce,
 * a local copy and each parallel operator between ranks (a copy on one
 * rank), recorded, instantiated (the distributed layer's plan) and
 * replayed twice. out: the instances. */
static void dist_pop_ops(rp_runtime *rt, rp_inst *in, rp_event *last,
                         rp_status *stp) {
  rp_status st = *stp;
  if (!st)
    TRY(rp_launch_allreduce(
        rt, &(rp_allreduce){.inst = in[0], .redop = RP_REDOP_SUM}, NULL));
  if (!st)
    TRY(rp_launch_dist_copy(rt,
                            &(rp_dist_copy){.src = in[0],
                                            .dst = in[1],
                                            .rect = rp_rect_1d(1, 2),
                                            .redop = RP_REDOP_SUM},
                            NULL));
  for (int kind = 0; kind <= RP_POP_REDUCTION && !st; kind++)
    TRY(rp_launch_dist_parallel(rt,
                                &(rp_dist_parallel){.kind = (rp_pop_kind)kind,
                                                    .whole = in[2 + kind % 2],
                                                    .part = in[4]},
                                kind == RP_POP_REDUCTION ? last : NULL));
  *stp = st;
}

static rp_status dist_scenario(float *out, size_t nout) {
  enum { NI = 5, N = 4 };
  rp_runtime *rt = NULL;
  rp_inst in[NI] = {{0}};
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_status st = make_runtime(2, &rt);
  rp_rect r = rp_rect_1d(0, N - 1);
  for (int i = 0; i < NI && !st; i++) {
    TRY(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in[i]));
    float v[N];
    for (int e = 0; e < N; e++)
      v[e] = (float)(i * N + e) + 0.5f;
    if (!st)
      TRY(rp_instance_write(rt, in[i], v, sizeof v));
  }
  if (!st) { /* eager */
    rp_event last = UNSET;
    dist_pop_ops(rt, in, &last, &st);
    if (!st)
      st = launched(rt, st, &last, "an eager parallel operator");
  }
  if (!st)
    TRY(rp_capture_begin(rt, NULL));
  if (!st) {
    dist_pop_ops(rt, in, NULL, &st);
    rp_status es = st ? rp_capture_abort(rt) : rp_capture_end(rt, &g);
    if (!st)
      st = es;
  }
  if (!st)
    TRY(rp_instantiate(g, NULL, &ex));
  for (int i = 0; i < 2 && !st; i++)
    TRY(replay_wait(rt, ex, NULL, 0));
  for (int i = 0; i < NI && !st && nout >= NI * N; i++)
    TRY(rp_instance_read(rt, in[i], out + i * N, sizeof(float) * N));
  return drop_runtime(drop_graphs(st, ex, NULL, g), rt, NULL, NULL);
}

TestSuite(oom, .timeout = 600);

Test(oom, every_allocation_of_the_mlp_step_fails_in_turn) {
  sweep_over("mlp", mlp_scenario, 4096, 100);
}

Test(oom, every_allocation_of_the_gpt_step_fails_in_turn) {
  sweep_over("gpt", gpt_scenario, 4096, 100);
}

Test(oom, every_allocation_of_the_tensor_parallel_gpt_fails_in_turn) {
  sweep_over("gpt tp", gpt_tp_scenario, 4096, 100);
}

Test(oom, every_allocation_of_eager_copies_fails_in_turn) {
  sweep_over("eager copies", eager_copies_scenario, 16, 8);
}

Test(oom, every_allocation_of_eager_parallel_operators_fails_in_turn) {
  sweep_over("eager parallel", eager_parallel_scenario, 16, 8);
}

Test(oom, every_allocation_of_a_busy_instance_change_fails_in_turn) {
  sweep_over("busy instance", busy_instance_scenario, 16, 4);
}

Test(oom, every_allocation_of_the_engines_tables_fails_in_turn) {
  sweep_over("engine tables", engine_tables_scenario, 4, 10);
}

Test(oom, every_allocation_of_a_recording_fails_in_turn_changing_nothing) {
  sweep_over("recorder", recorder_scenario, 64, 50);
}

Test(oom, every_allocation_of_eager_gpt_training_and_decoding_fails_in_turn) {
  sweep_over("gpt eager", gpt_eager_scenario, 4096, 100);
}

Test(oom, every_allocation_of_a_tune_fails_in_turn_leaving_the_exec_usable) {
  sweep_over("tune", tune_scenario, 1, 20);
}

Test(oom, every_allocation_of_a_gpu_plan_fails_in_turn) {
  sweep_over("gpu plan", gpu_plan_scenario, 6, 50);
}

/* The reads of a checkpoint, as the CLI makes them: `reprise generate`
 * (rp_gpt_ckpt_read_info, then rp_gpt_ckpt_load_weights), `reprise train
 * --model gpt --load-weights` (rp_gpt_ckpt_load), rp_gpt_ckpt_read, and
 * the MLP's `--load-weights` (rp_mlp_ckpt_read). */
enum { CKPT_INFO_READ, CKPT_WEIGHTS, CKPT_RESUME, CKPT_WHOLE, CKPT_MLP };

static rp_status ckpt_read_call(int call, rp_gpt *dec, rp_gpt *m,
                                const char *gpt_path, const char *mlp_path) {
  rp_gpt_ckpt c;
  rp_mlp_ckpt mc;
  rp_status st = RP_OK;
  switch (call) {
  case CKPT_INFO_READ:
    return rp_gpt_ckpt_read_info(gpt_path, &c);
  case CKPT_WEIGHTS:
    return rp_gpt_ckpt_load_weights(dec, gpt_path, NULL);
  case CKPT_RESUME:
    return rp_gpt_ckpt_load(m, gpt_path, NULL);
  case CKPT_WHOLE:
    if ((st = rp_gpt_ckpt_read(gpt_path, &c)) == RP_OK)
      rp_gpt_ckpt_free(&c);
    return st;
  default:
    if ((st = rp_mlp_ckpt_read(mlp_path, &mc)) == RP_OK)
      rp_mlp_ckpt_free(&mc);
    return st;
  }
}

/* A checkpoint read that runs out of memory says what it could not
 * allocate and how many bytes: allocation n of each read failing, for n =
 * 0, 1, ..., is RP_ENOMEM "<file>: out of memory for <N> bytes ..." (it
 * was "<file>: out of memory"), and leaks nothing; a streamed read names
 * the largest tensor, its bytes rows x cols x 4. */
Test(oom, a_checkpoint_read_out_of_memory_names_what_and_its_bytes) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(2, &rt));
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c = tiny_gpt(1, 8, 4, 5, 2);
  rp_gpt *m, *dec;
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  RP_CHECK(rp_gpt_create_decoder(rt, &k, &c, &dec));
  char gpt_path[] = "/tmp/rp_oom_XXXXXX", mlp_path[] = "/tmp/rp_oom_XXXXXX";
  RP_CHECK(temp_file(gpt_path));
  RP_CHECK(temp_file(mlp_path));
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  for (uint32_t i = 0; i < 5; i++)
    info.bytes[i] = (uint8_t)('a' + i);
  RP_CHECK(rp_gpt_save(m, gpt_path, &info));
  rp_dataset d;
  RP_CHECK(rp_data_generate(RP_DATA_SPIRALS, 64, 2, 3, 7, &d));
  rp_mlp_config mc;
  rp_mlp_config_init(&mc);
  mc.hidden[0] = 8;
  mc.nhidden = 1;
  mc.batch = 16;
  mc.procs = 1;
  rp_mlp *mlp;
  RP_CHECK(rp_mlp_create(rt, &k, &mc, &d, &mlp));
  rp_mlp_ckpt_info mi = {.step = 1, .lr = 0.05f, .lr_decay = 0.0f};
  RP_CHECK(rp_mlp_save(mlp, mlp_path, &mi));
  /* the largest tensor (the first of equals), as the reads name it */
  const rp_gpt_param_info *big = rp_gpt_param(m, 0);
  for (uint32_t i = 1; i < rp_gpt_param_tensors(m); i++) {
    const rp_gpt_param_info *p = rp_gpt_param(m, i);
    if ((size_t)p->rows * p->cols > (size_t)big->rows * big->cols)
      big = p;
  }
  char tensor[128];
  snprintf(tensor, sizeof tensor,
           "out of memory for %zu bytes reading the tensor '%s'",
           (size_t)big->rows * big->cols * sizeof(float), big->name);
  static const char *const names[] = {
      "rp_gpt_ckpt_read_info", "rp_gpt_ckpt_load_weights", "rp_gpt_ckpt_load",
      "rp_gpt_ckpt_read", "rp_mlp_ckpt_read"};
  int named_mib = 0; /* a failure of 1 MiB or more gives it in MiB too */
  for (int call = CKPT_INFO_READ; call <= CKPT_MLP; call++) {
    const char *path = call == CKPT_MLP ? mlp_path : gpt_path;
    int named_tensor = 0;
    long n = 0;
    for (;; n++) {
      stale_detail_set();
      oom_arm(n);
      rp_status st = ckpt_read_call(call, dec, m, gpt_path, mlp_path);
      int fired = oom_disarm();
      if (!fired) {
        RP_CHECK(st);
        break;
      }
      if (st == RP_OK)
        continue; /* an allocation the read does without */
      RP_EXPECT(st, RP_ENOMEM);
      const char *e = rp_error_detail();
      size_t pl = strlen(path);
      unsigned long long bytes = 0;
      int used = 0;
      cr_assert(!strncmp(e, path, pl) &&
                    sscanf(e + pl, ": out of memory for %llu byte%n", &bytes,
                           &used) == 1 &&
                    used > 0 && bytes > 0,
                "%s, allocation %ld failing: '%s' (the file, then what "
                "could not be allocated and its bytes)",
                names[call], n, e);
      named_tensor |= strstr(e, tensor) != NULL;
      if (bytes >= 1u << 20) {
        char mib[64];
        snprintf(mib, sizeof mib, "%llu bytes (%.1f MiB) ", bytes,
                 (double)bytes / (1u << 20));
        cr_assert(strstr(e, mib), "%s, allocation %ld failing: '%s' (not '%s')",
                  names[call], n, e, mib);
        named_mib = 1;
      } else {
        cr_assert(!strstr(e, "MiB"), "%s: '%s' (MiB under 1 MiB)", names[call],
                  e);
      }
    }
    cr_assert_gt(n, 0, "%s allocates nothing", names[call]);
    if (call != CKPT_WHOLE && call != CKPT_MLP)
      cr_assert(named_tensor, "%s: no failure said '%s'", names[call], tensor);
    leak_check(names[call], n);
  }
  cr_assert(named_mib, "no failure of 1 MiB or more (the payload's checksum "
                       "buffer) was said");
  RP_CHECK(rp_mlp_destroy(mlp));
  rp_data_free(&d);
  RP_CHECK(rp_gpt_destroy(dec));
  RP_CHECK(rp_gpt_destroy(m));
  th_destroy(rt);
  unlink(gpt_path);
  unlink(mlp_path);
}

/* A new placement of an exec with GPU segments (rp_exec_tune's apply:
 * the units' lanes set, then rp__place_finalize) that runs out of memory
 * leaves the placement in effect whole: the same lanes, waits and
 * segment data (its dump), every lane's units where the units say. */
Test(oom, a_gpu_execs_placement_that_runs_out_of_memory_changes_nothing) {
  rp_runtime *rt;
  rp_graph *g;
  RP_CHECK(gpu_plan_graph(&rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  uint32_t n = ex->nunits;
  uint32_t *seq = malloc(sizeof *seq * n), *keep = malloc(sizeof *keep * n),
           *trial = malloc(sizeof *trial * n);
  cr_assert(seq && keep && trial);
  static char before[1 << 16], after[1 << 16];
  RP_CHECK(exec_text(ex, before, sizeof before));
  for (uint32_t u = 0; u < n; u++)
    keep[u] = ex->units[u].lane;
  RP_CHECK(rp__place_plan(ex, 0, 1, seq)); /* one worker: other lanes */
  int differs = 0;
  for (uint32_t u = 0; u < n; u++) {
    trial[u] = ex->units[u].lane;
    differs |= trial[u] != keep[u];
  }
  cr_assert(differs, "the trial placement moves some unit");
  long k = 0;
  for (;; k++) {
    for (uint32_t u = 0; u < n; u++)
      ex->units[u].lane = trial[u];
    stale_detail_set();
    oom_arm(k);
    rp_status st = rp__place_finalize(ex, seq);
    int fired = oom_disarm();
    if (!fired) {
      RP_CHECK(st);
      break;
    }
    RP_EXPECT(st, RP_ENOMEM);
    cr_assert(oom_detail_ok(rp_error_detail()),
              "allocation %ld failing: the detail '%s' is not its own "
              "saying out of memory",
              k, rp_error_detail());
    for (uint32_t u = 0; u < n; u++) /* as apply() does */
      ex->units[u].lane = keep[u];
    for (uint32_t w = 0; w < ex->nlanes; w++)
      for (uint32_t i = 0; i < ex->lanes[w].len; i++) {
        const rp_unit *u = &ex->units[ex->lanes[w].units[i]];
        cr_assert(u->lane == w && u->pos == i,
                  "allocation %ld failing: lane %u lists unit %u at %u, "
                  "which is at %u of lane %u",
                  k, w, ex->lanes[w].units[i], i, u->pos, u->lane);
      }
    RP_CHECK(exec_text(ex, after, sizeof after));
    cr_assert_str_eq(after, before,
                     "allocation %ld failing changed the plan in effect", k);
  }
  cr_assert_gt(k, 3, "only %ld allocations", k);
  RP_CHECK(exec_text(ex, after, sizeof after));
  cr_assert_str_neq(after, before, "the new placement is in effect");
  free(seq);
  free(keep);
  free(trial);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* An instance's storage that cannot be allocated: create and realloc fail
 * with RP_ENOMEM, the detail naming the call, and a failed realloc keeps
 * the handle and the data. */
Test(oom, instance_storage_out_of_memory_names_the_call_and_keeps_the_data) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(1, &rt));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a, b = {0x5eed};
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  float v[4] = {1, 2, 3, 4}, w[4];
  RP_CHECK(rp_instance_write(rt, a, v, sizeof v));
  oom_arm(0); /* the storage: the slot table has room already */
  rp_status st = rp_instance_create(rt, 0, RP_F32, &r, NULL, &b);
  cr_assert(oom_disarm());
  RP_EXPECT(st, RP_ENOMEM);
  cr_assert(!strncmp(rp_error_detail(), "rp_instance_create: ", 20),
            "the detail names the call: %s", rp_error_detail());
  cr_assert_eq(b.id, 0x5eed, "*out untouched");
  rp_inst h = a;
  oom_arm(0);
  st = rp_instance_realloc(rt, &h);
  cr_assert(oom_disarm());
  RP_EXPECT(st, RP_ENOMEM);
  cr_assert(!strncmp(rp_error_detail(), "rp_instance_realloc: ", 21),
            "the detail names the call: %s", rp_error_detail());
  cr_assert_eq(h.id, a.id, "the handle stays");
  RP_CHECK(rp_instance_read(rt, a, w, sizeof w));
  cr_assert(!memcmp(v, w, sizeof v), "the data stays");
  RP_CHECK(rp_instance_free(rt, a));
  th_destroy(rt);
}

/* Replays n times with every allocation failing (armed after `warm`
 * unarmed replays: a CPU GEMM of a narrow product grows its worker's
 * scratch on first use, kernels/cpu_kernels.c); asserts they all succeed
 * and nothing was asked of the allocator. */
static void replay_unallocating(const char *what, rp_runtime *rt, rp_exec *ex,
                                void *args, size_t size, int32_t *step,
                                uint32_t warm, uint32_t n) {
  for (uint32_t i = 0; i < warm + n; i++) {
    if (i == warm) {
      oom_arm(-1);
      atomic_store(&oom_all, 1);
    }
    if (step)
      (*step)++;
    rp_status st = replay_wait(rt, ex, args, size);
    long calls = atomic_load(&oom_calls);
    if (st != RP_OK || calls) {
      oom_disarm();
      char where[256] = "";
      for (int c = 0; c < 4 && c < calls; c++) {
        Dl_info di;
        void *a = atomic_load(&oom_callers[c]);
        size_t len = strlen(where);
        /* an offset in the object, for addr2line -e */
        int known = dladdr(a, &di) != 0;
        snprintf(where + len, sizeof where - len, " %s+%#zx",
                 known && di.dli_fname ? di.dli_fname : "?",
                 known ? (size_t)((char *)a - (char *)di.dli_fbase) : 0);
      }
      cr_assert_fail("%s: replay %u with every allocation failing: %s (%s), "
                     "%ld allocation%s asked for (from%s)",
                     what, i, rp_status_name(st), rp_error_detail(), calls,
                     calls == 1 ? "" : "s", where);
    }
  }
  oom_disarm();
}

Test(oom, replays_ask_the_allocator_for_nothing) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(2, &rt));
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  /* the MLP: tasks, copies and parallel operators over two workers */
  rp_dataset d;
  RP_CHECK(rp_data_generate(RP_DATA_SPIRALS, 256, 2, 3, 7, &d));
  rp_mlp_config mc;
  rp_mlp_config_init(&mc);
  mc.batch = 32;
  rp_mlp *mlp;
  RP_CHECK(rp_mlp_create(rt, &k, &mc, &d, &mlp));
  rp_graph *g;
  RP_CHECK(rp_mlp_record(mlp, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_mlp_step_args ma = {1, 0.05f};
  replay_unallocating("mlp", rt, ex, &ma, sizeof ma, NULL, 2, 50);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_mlp_destroy(mlp));
  rp_data_free(&d);
  /* the GPT on two processors */
  rp_gpt_config gc = tiny_gpt(2, 16, 8, 7, 4);
  rp_gpt *gpt;
  RP_CHECK(rp_gpt_create(rt, &k, &gc, &gpt));
  RP_CHECK(rp_gpt_record(gpt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_gpt_step_args ga = {.batch = 0, .lr = 1e-3f, .step = 0};
  replay_unallocating("gpt", rt, ex, &ga, sizeof ga, &ga.step, 2, 20);
  float loss;
  RP_CHECK(rp_gpt_batch_loss(gpt, &loss));
  cr_assert(loss > 0 && loss < 10, "loss %g", (double)loss);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_gpt_destroy(gpt));
  th_destroy(rt);
}

#ifdef REPRISE_HAVE_CJSON
Test(oom, every_allocation_of_a_graph_files_round_trip_fails_in_turn) {
  cjson_through_wrappers(1);
  sweep("graph file", graph_file_scenario, 4 * 7 + 6 * 4);
  cjson_through_wrappers(0);
}

Test(oom, every_allocation_of_the_dump_tools_views_fails_in_turn) {
  cjson_through_wrappers(1);
  sweep("dump tool", dump_tool_scenario, 4);
  cjson_through_wrappers(0);
}

Test(oom, every_allocation_of_a_trace_written_and_read_fails_in_turn) {
  cjson_through_wrappers(1);
  sweep("trace", trace_scenario, 1 + 6 * 4);
  cjson_through_wrappers(0);
}

/* `reprise dump --format html` (dv_html: its levels, dot's output read
 * back, the page) with allocation n failing, for n = 0, 1, ...: the page a
 * run without failures writes, or -1 saying "out of memory" on err (never
 * nothing, nor "dot failed (signal 13)" for the dot whose output it could
 * not read), and no leak. Needs Graphviz's dot and d3 (skipped without). */
Test(oom, every_allocation_of_an_html_dump_fails_in_turn_said_as_such) {
  char dir[] = "/tmp/rp_oom_dir_XXXXXX", path[64];
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_inst in[6] = {{0}};
  rp_graph *g = NULL;
  RP_CHECK(file_start(dir, path, "g.json", &rt, &k, in, &g));
  dm_graph m;
  RP_CHECK(dm_build(g, NULL, NULL, &m));
  dv_html_opts ho = {.title = "oom", .depth = 1};
  memout want, o, e;
  RP_CHECK(memout_open(&want));
  RP_CHECK(memout_open(&e));
  int rc = dv_html(&m, &ho, want.f, e.f);
  memout_close(&want);
  memout_close(&e);
  int missing =
      rc && e.buf && (strstr(e.buf, "not on PATH") || strstr(e.buf, "missing"));
  cr_assert(!rc || missing, "without failures: %s", e.buf ? e.buf : "");
  memout_free(&e);
  long n = 0;
  for (; !missing; n++) {
    RP_CHECK(memout_open(&o));
    RP_CHECK(memout_open(&e));
    oom_arm(n);
    rc = dv_html(&m, &ho, o.f, e.f);
    int fired = oom_disarm();
    memout_close(&o);
    memout_close(&e);
    const char *said = e.buf ? e.buf : "";
    if (!rc)
      cr_assert(o.len == want.len && !memcmp(o.buf, want.buf, o.len),
                "allocation %ld failing: another page", n);
    else
      cr_assert(!strncmp(said, "reprise dump: ", 14) &&
                    strstr(said, "out of memory") &&
                    !strstr(said, "dot failed"),
                "allocation %ld failing: -1 saying '%s'", n, said);
    memout_free(&o);
    memout_free(&e);
    if (!fired || n % 64 == 63)
      leak_check("dv_html", n);
    if (!fired)
      break;
  }
  memout_free(&want);
  dm_free(&m);
  RP_CHECK(drop_runtime(drop_graphs(RP_OK, NULL, NULL, g), rt, dir, NULL));
  if (missing)
    cr_skip_test("Graphviz's dot or d3 is missing");
  cr_assert_gt(n, 10, "the sweep saw only %ld allocations", n);
  cr_log_info("dv_html: %ld allocations failed in turn", n);
}

/* `reprise bench --plot` reads the rows it measured with the strict
 * parse: allocation n failing, for n = 0, 1, ..., is said as "out of
 * memory" (it was "the rows are not JSON") and leaks nothing; a run
 * without failures reaches gnuplot (a REPRISE_GNUPLOT that names no
 * program: nothing is drawn). */
Test(oom, bench_plot_rows_out_of_memory_is_said_as_such) {
  static const char rows[] =
      "[{\"workload\": \"chain\", \"mode\": \"replay\", \"nodes\": 10, "
      "\"ns_per_task_median\": 5}, {\"workload\": \"chain\", \"mode\": "
      "\"eager\", \"nodes\": 10, \"ns_per_task_median\": 9}]";
  char errp[] = "/tmp/rp_oom_plot_XXXXXX";
  int fe = mkstemp(errp), saved = dup(2);
  cr_assert(fe >= 0 && saved >= 0);
  unlink(errp);
  cr_assert_eq(setenv("REPRISE_GNUPLOT", "/nonexistent/gnuplot", 1), 0);
  cjson_through_wrappers(1);
  for (long n = 0;; n++) {
    cr_assert_eq(ftruncate(fe, 0), 0);
    cr_assert_eq(lseek(fe, 0, SEEK_SET), 0);
    fflush(stderr);
    dup2(fe, 2);
    stale_detail_set();
    oom_arm(n);
    int rc = rp_cli_plot_bench(rows, sizeof rows - 1, "/tmp/rp_oom_plot.svg");
    int fired = oom_disarm();
    fflush(stderr);
    dup2(saved, 2);
    char err[1024];
    ssize_t got = pread(fe, err, sizeof err - 1, 0);
    err[got > 0 ? got : 0] = '\0';
    if (!fired) {
      cr_assert_eq(rc, RP_CLI_USAGE, "%s", err);
      cr_assert(strstr(err, "REPRISE_GNUPLOT"), "%s", err);
      break;
    }
    cr_assert_eq(rc, RP_CLI_FAILED, "allocation %ld: %s", n, err);
    cr_assert(strstr(err, "reprise bench --plot: ") &&
                  strstr(err, "out of memory") && !strstr(err, STALE_DETAIL),
              "allocation %ld failing: %s", n, err);
    leak_check("bench --plot", n);
  }
  cjson_through_wrappers(0);
  unsetenv("REPRISE_GNUPLOT");
  close(fe);
  close(saved);
}
#endif

Test(oom, every_allocation_of_one_ranks_communication_fails_in_turn) {
  sweep("communication", dist_scenario, 5 * 4);
}

/* A file that grows after fstat (the first allocation's wrapper below
 * appends to it) grows the read buffer; when that growth fails the detail
 * gives the bytes asked for, as the first allocation's does. */
static const char *_Atomic grow_path;

static void *grow_then_malloc(size_t n) {
  const char *p = atomic_exchange(&grow_path, NULL);
  if (p) {
    FILE *f = fopen(p, "a");
    cr_assert(f);
    fputs("grown after fstat\n", f);
    fclose(f);
  }
  return __real_malloc(n);
}

Test(oom, a_read_whose_buffer_cannot_grow_says_how_many_bytes) {
  char path[] = "/tmp/rp_oom_grow_XXXXXX";
  cr_assert_eq(temp_file(path), RP_OK);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs("0123456789", f); /* 10 bytes: a buffer of 12 */
  fclose(f);
  oom_hook = grow_then_malloc;
  atomic_store(&grow_path, path);
  char *buf = (char *)1;
  size_t len = 7;
  oom_arm(1); /* the first growth: 12 bytes doubled */
  rp_status st = rp_file_read_regular(path, 1 << 20, &buf, &len);
  int fired = oom_disarm();
  oom_hook = NULL;
  unlink(path);
  cr_assert(fired, "the read made no second allocation");
  cr_assert_eq(st, RP_ENOMEM, "%s (%s)", rp_status_name(st), rp_error_detail());
  cr_assert(strstr(rp_error_detail(), "out of memory for 24 bytes"), "%s",
            rp_error_detail());
  cr_assert(buf == (char *)1 && len == 7, "the outputs were written");
  leak_check("rp_file_read_regular", 1);
}

/* A GPT checkpoint (the tiny model's, untrained; vocabulary "abcde") at
 * path, made without failures. */
static void tiny_gpt_checkpoint(const char *path) {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_gpt *m;
  RP_CHECK(make_runtime(2, &rt));
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c = tiny_gpt(1, 8, 4, 5, 2);
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  info.lr = 0.01f;
  for (uint32_t i = 0; i < 5; i++)
    info.bytes[i] = (uint8_t)('a' + i);
  RP_CHECK(rp_gpt_save(m, path, &info));
  RP_CHECK(rp_gpt_destroy(m));
  RP_CHECK(rp_runtime_destroy(rt));
}

/* A command (rp_cmd_generate, rp_cmd_train: `args`, argc of them) run in
 * this process with allocation n failing, for n = -1 (none), 0, 1, ...:
 * it succeeds, printing what the run without failures printed (same_out;
 * else no "nan": no figure it could not compute), or fails with exit 1
 * saying on stderr, after `prefix`, what ran out of memory (never an
 * empty detail or an earlier call's), and leaks nothing. The run without
 * failures prints want_len bytes (0: any). */
static void cmd_sweep_saying(const char *what, int (*cmd)(int, char **),
                             int argc, const char *const *args,
                             const char *prefix, int same_out, size_t want_len,
                             const char *must) {
  char outp[] = "/tmp/rp_oom_out_XXXXXX", errp[] = "/tmp/rp_oom_err_XXXXXX";
  int fo = mkstemp(outp), fe = mkstemp(errp), so = dup(1), se = dup(2);
  cr_assert(fo >= 0 && fe >= 0 && so >= 0 && se >= 0);
  unlink(outp), unlink(errp);
  char want[8192] = "", *argv[64], copy[64][128];
  cr_assert_lt(argc, 64);
  int said = !must;
  long n = -1;
  for (;; n++) {
    cr_assert(ftruncate(fo, 0) == 0 && ftruncate(fe, 0) == 0);
    cr_assert(lseek(fo, 0, SEEK_SET) == 0 && lseek(fe, 0, SEEK_SET) == 0);
    for (int i = 0; i < argc; i++) { /* getopt permutes argv */
      cr_assert_lt(strlen(args[i]), sizeof copy[i]);
      argv[i] = strcpy(copy[i], args[i]);
    }
    argv[argc] = NULL;
    fflush(stdout), fflush(stderr);
    dup2(fo, 1), dup2(fe, 2);
    /* the command's messages say the failing call's detail, not this */
    stale_detail_set();
    if (n >= 0)
      oom_arm(n);
    int rc = cmd(argc, argv);
    int fired = n >= 0 && oom_disarm();
    fflush(stdout), fflush(stderr);
    dup2(so, 1), dup2(se, 2);
    char out[8192], err[4096];
    ssize_t got = pread(fo, out, sizeof out - 1, 0);
    out[got > 0 ? got : 0] = '\0';
    got = pread(fe, err, sizeof err - 1, 0);
    err[got > 0 ? got : 0] = '\0';
    if (n < 0) { /* without failures */
      cr_assert(rc == 0 && !strstr(out, "nan"), "%s: exit %d: %s%s", what, rc,
                out, err);
      cr_assert(!want_len || strlen(out) == want_len, "%s: %s", what, out);
      snprintf(want, sizeof want, "%s", out);
      continue;
    }
    if (rc == 0)
      cr_assert(same_out ? !strcmp(out, want) : !strstr(out, "nan"),
                "%s, allocation %ld failing: exit 0 printing %s", what, n, out);
    else
      cr_assert(rc == RP_CLI_FAILED && strstr(err, prefix) &&
                    oom_detail_ok(err) && !strstr(err, "()"),
                "%s, allocation %ld failing: exit %d: %s", what, n, rc, err);
    if (rc && must && strstr(err, must))
      said = 1;
    if (!fired || n % 64 == 63)
      leak_check(what, n);
    if (!fired)
      break;
  }
  cr_assert_gt(n, 100, "%s: the sweep saw only %ld allocations", what, n);
  cr_assert(said, "%s: no failing run said '%s'", what, must);
  cr_log_info("%s: %ld allocations failed in turn", what, n);
  close(fo), close(fe), close(so), close(se);
}

/* cmd_sweep_saying with no message every sweep must meet. */
static void cmd_sweep(const char *what, int (*cmd)(int, char **), int argc,
                      const char *const *args, const char *prefix, int same_out,
                      size_t want_len) {
  cmd_sweep_saying(what, cmd, argc, args, prefix, same_out, want_len, NULL);
}

/* `reprise generate` (the checkpoint's reads, the runtime, the decoder,
 * its recorded step and the replays) as cmd_sweep runs it: a run that
 * succeeds prints the same text. */
Test(oom, every_allocation_of_reprise_generate_fails_in_turn_said_as_such) {
  char ck[] = "/tmp/rp_oom_gen_XXXXXX";
  cr_assert_eq(temp_file(ck), RP_OK);
  tiny_gpt_checkpoint(ck);
  const char *a[] = {"generate", "--prompt",  "ab",  "--tokens",
                     "6",        "--backend", "cpu", "--load-weights",
                     ck};
  cmd_sweep("reprise generate", rp_cmd_generate, 9, a, "reprise generate: ", 1,
            9);
  unlink(ck);
}

/* A text corpus of 240 bytes at path (a mkstemp template, filled in). */
static void tiny_corpus(char *path) {
  cr_assert_eq(temp_file(path), RP_OK);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  for (int i = 0; i < 40; i++)
    fputs(i % 3 ? "abcab " : "cabde\n", f);
  cr_assert_eq(fclose(f), 0);
}

/* `reprise train --model gpt` (in this process: the corpus, the runtime,
 * the model, its recorded step, two replays, the validation passes, the
 * sample's decode step and --save-weights) with allocation n failing, for
 * n = 0, 1, ...: it succeeds, printing no figure it could not compute
 * (the bigram baseline was "nan", the run "NOT below" it), or fails with
 * exit 1 saying on stderr what ran out of memory (never an empty detail or
 * an earlier call's), and leaks nothing. */
Test(oom, every_allocation_of_reprise_train_gpt_fails_in_turn_said_as_such) {
  char corpus[] = "/tmp/rp_oom_txt_XXXXXX", ck[] = "/tmp/rp_oom_ck_XXXXXX";
  tiny_corpus(corpus);
  cr_assert_eq(temp_file(ck), RP_OK);
  const char *a[] = {
      "train", "--model",     "gpt", "--backend", "cpu", "--text",
      corpus,  "--layers",    "1",   "--heads",   "2",   "--width",
      "8",     "--context",   "4",   "--batch",   "2",   "--iters",
      "2",     "--log-every", "1",   "--sample",  "3",   "--save-weights",
      ck};
  cmd_sweep("reprise train --model gpt", rp_cmd_train, sizeof a / sizeof *a, a,
            "reprise train: ", 0, 0);
  unlink(corpus), unlink(ck);
}

/* rp_gpt_reset (rp_gpt_create's initialisation), rp_gpt_save and
 * rp_gpt_sample with allocation n failing, for n = 0, 1, ...: RP_ENOMEM
 * whose detail says "out of memory" (or ENOMEM's text, from a file's
 * creation), the call's own buffers by their
 * bytes ("<call>: out of memory for N bytes"; it was "<call>: memory"),
 * and no leak. */
Test(oom, gpt_reset_save_and_sample_out_of_memory_name_their_bytes) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(2, &rt));
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c = tiny_gpt(1, 8, 4, 5, 2);
  rp_gpt *m;
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  char path[] = "/tmp/rp_oom_XXXXXX";
  RP_CHECK(temp_file(path));
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  for (uint32_t i = 0; i < 5; i++)
    info.bytes[i] = (uint8_t)('a' + i);
  static const char *const names[] = {"rp_gpt_reset", "rp_gpt_save",
                                      "rp_gpt_sample"};
  for (int call = 0; call < 3; call++) {
    int named = 0;
    long n = 0;
    for (;; n++) {
      int32_t prompt[1] = {1}, out[4];
      stale_detail_set();
      oom_arm(n);
      rp_status st = call == 0 ? rp_gpt_reset(m)
                     : call == 1
                         ? rp_gpt_save(m, path, &info)
                         : rp_gpt_sample(m, prompt, 1, 3,
                                         &(rp_gpt_sampling){.seed = 1}, out);
      int fired = oom_disarm();
      if (!fired) {
        RP_CHECK(st);
        break;
      }
      if (st == RP_OK)
        continue; /* an allocation the call does without */
      RP_EXPECT(st, RP_ENOMEM);
      const char *e = rp_error_detail();
      cr_assert(oom_detail_ok(e), "%s, allocation %ld failing: '%s'",
                names[call], n, e);
      char own[64];
      snprintf(own, sizeof own, "%s: out of memory for ", names[call]);
      unsigned long long bytes = 0;
      if (!strncmp(e, own, strlen(own)) &&
          sscanf(e + strlen(own), "%llu bytes (", &bytes) == 1 && bytes > 0)
        named = 1;
    }
    cr_assert(named, "%s: no failure said '%s: out of memory for N bytes'",
              names[call], names[call]);
    leak_check(names[call], n);
  }
  RP_CHECK(rp_gpt_destroy(m));
  th_destroy(rt);
  unlink(path);
}

/* `reprise train` (the MLP, in this process: the data set, the runtime,
 * the model on 2 processors, its recorded step, replays, validation, the
 * eager comparison and --save-weights) with allocation n failing, for n =
 * 0, 1, ...: as the GPT's above. */
Test(oom, every_allocation_of_reprise_train_mlp_fails_in_turn_said_as_such) {
  char ck[] = "/tmp/rp_oom_ck_XXXXXX";
  cr_assert_eq(temp_file(ck), RP_OK);
  const char *a[] = {
      "train",   "--backend", "cpu",     "--procs",   "2",
      "--iters", "3",         "--batch", "16",        "--hidden",
      "8",       "--samples", "64",      "--compare", "--save-weights",
      ck};
  cmd_sweep("reprise train (MLP)", rp_cmd_train, sizeof a / sizeof *a, a,
            "reprise train: ", 0, 0);
  unlink(ck);
}

/* A graph file of nops ops whose task ("my.log") this build does not
 * register, recorded on a runtime of `workers` CPU workers, saved at
 * path. */
static void placeholder_graph_file(const char *path, unsigned workers,
                                   int nops) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(workers, &rt));
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "my.log", .cpu_fn = rp_task_fill_cpu}, &t));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access acc = {in, RP_READ, RP_REDOP_NONE};
  for (int i = 0; i < nops; i++)
    RP_CHECK(rp_graph_add_task(
        g, &(rp_launch){.task = t, .proc = 0, .accesses = &acc, .naccess = 1},
        NULL));
  RP_CHECK(rp_graph_save(g, path));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  RP_CHECK(rp_runtime_destroy(rt));
}

/* `reprise dump FILE --stats` of a file naming a task this build lacks
 * (the file, the runtime of its machine, the kernels and a placeholder
 * task for the name, the graph, the model and its statistics) as
 * cmd_sweep runs it (a run that succeeds may print statistics that say
 * what they could not count for want of memory). No memory for the
 * placeholders' names says so (it said "registering tasks: RP_ENOMEM: "
 * and an earlier call's detail), and neither does the file's prescan for
 * the task names (it said the file's task is unknown: RP_ENOTASK). */
Test(oom, every_allocation_of_reprise_dump_fails_in_turn_said_as_such) {
  char g[] = "/tmp/rp_oom_dump_XXXXXX";
  cr_assert_eq(temp_file(g), RP_OK);
  placeholder_graph_file(g, 1, 1);
  const char *a[] = {"dump", g, "--stats"};
  cmd_sweep_saying("reprise dump", rp_cmd_dump, 3, a, "reprise dump: ", 0, 0,
                   "registering tasks: RP_ENOMEM: out of memory for the names "
                   "of 1 unregistered tasks");
  unlink(g);
}

/* `reprise dump FILE` of a file recorded on 3 CPU workers (40 ops): a run that
 * succeeds reads the file as that machine (its first line), one that runs
 * out of memory reading the machine says so (it took the file for one
 * without a machine and guessed one worker from its ops). */
Test(oom, reprise_dump_reads_the_recorded_machine_or_says_out_of_memory) {
  char g[] = "/tmp/rp_oom_dump_XXXXXX";
  cr_assert_eq(temp_file(g), RP_OK);
  placeholder_graph_file(g, 3, 40);
  const char *a[] = {"dump", g};
  cmd_sweep("reprise dump", rp_cmd_dump, 2, a, "reprise dump: ", 1, 0);
  unlink(g);
}

#ifdef REPRISE_HAVE_MPI
/* `reprise train --model gpt --dist` on one rank (MPI initialized here,
 * so that the command neither starts nor finalizes it: every run of the
 * sweep uses it) as cmd_sweep runs it: no memory for the weights the
 * ranks compare at the end says so (it said "reading the weights:
 * RP_ENOMEM" and an earlier call's detail). */
Test(oom,
     every_allocation_of_reprise_train_gpt_dist_fails_in_turn_said_as_such) {
  int provided = 0;
#ifdef OOM_LEAK_CHECK
  __lsan_disable(); /* MPICH's UCX plugins keep what they allocate here */
#endif
  cr_assert_eq(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided),
               MPI_SUCCESS);
#ifdef OOM_LEAK_CHECK
  __lsan_enable();
#endif
  char corpus[] = "/tmp/rp_oom_txt_XXXXXX";
  tiny_corpus(corpus);
  const char *a[] = {"train",   "--model", "gpt",     "--dist",   "--backend",
                     "cpu",     "--text",  corpus,    "--layers", "1",
                     "--heads", "2",       "--width", "8",        "--context",
                     "4",       "--batch", "2",       "--iters",  "1"};
  cmd_sweep_saying("reprise train --model gpt --dist", rp_cmd_train,
                   sizeof a / sizeof *a, a, "reprise train: ", 0, 0,
                   "bytes of weights to compare across ranks");
  unlink(corpus);
  MPI_Finalize();
}
#endif

/* With tensor parallelism, reading or writing a split tensor moves it
 * through a buffer of one shard's part: when that buffer cannot be had,
 * the detail names the call and the bytes (it said "out of memory"). */
Test(oom, a_split_tensors_io_out_of_memory_names_its_bytes) {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_gpt *m;
  RP_CHECK(make_runtime(2, &rt));
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c = tiny_gpt(1, 8, 4, 5, 2);
  c.tp = 2;
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  uint32_t split = 0;
  for (uint32_t i = 0; i < rp_gpt_param_tensors(m); i++) {
    const rp_gpt_param_info *p = rp_gpt_param(m, i);
    size_t n = (size_t)p->rows * p->cols;
    float *buf = calloc(n, sizeof *buf);
    cr_assert_not_null(buf);
    for (int write = 0; write < 2; write++) {
      stale_detail_set();
      atomic_store(&oom_all, 1);
      rp_status st = write ? rp_gpt_tensor_write(m, i, RP_GPT_WEIGHT, buf, n)
                           : rp_gpt_tensor_read(m, i, RP_GPT_WEIGHT, buf, n);
      oom_disarm();
      if (st == RP_OK)
        continue; /* not split: no buffer */
      split += !write;
      char want[160];
      snprintf(want, sizeof want,
               "%s: out of memory for %zu bytes (one shard's part of a "
               "split tensor)",
               write ? "rp_gpt_tensor_write" : "rp_gpt_tensor_read",
               n / 2 * sizeof *buf);
      cr_assert_eq(st, RP_ENOMEM, "%s: %s", p->name, rp_error_detail());
      cr_assert_str_eq(rp_error_detail(), want, "%s", p->name);
    }
    free(buf);
  }
  cr_assert_gt(split, 0, "no tensor is split with tp 2");
  RP_CHECK(rp_gpt_destroy(m));
  th_destroy(rt);
}

/* rp_instance_realloc of a handle never handed out (a free slot's next
 * generation) is refused RP_ESTALE before it allocates anything (it
 * allocated the new storage first, and with no memory said RP_ENOMEM);
 * so is one naming a freed slot that wrapped caller memory (it said
 * "wraps caller memory", RP_EINVAL). */
Test(oom, a_realloc_of_a_handle_never_handed_out_allocates_nothing) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(1, &rt));
  rp_rect r = rp_rect_1d(0, 3);
  float caller[4];
  for (int external = 0; external < 2; external++) {
    rp_inst a;
    if (external)
      RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, caller,
                                           sizeof caller, &a));
    else
      RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
    RP_CHECK(rp_instance_free(rt, a));
    rp_inst never = {a.id + (1ull << 32)}, h = never;
    atomic_store(&oom_calls, 0);
    atomic_store(&oom_all, 1);
    rp_status st = rp_instance_realloc(rt, &h);
    long asked = atomic_load(&oom_calls);
    oom_disarm();
    RP_EXPECT(st, RP_ESTALE);
    char want[96];
    snprintf(want, sizeof want, "rp_instance_realloc: instance %#llx is stale",
             (unsigned long long)never.id);
    cr_assert_str_eq(rp_error_detail(), want, "external %d", external);
    cr_assert_eq(asked, 0, "external %d: %ld allocations asked for", external,
                 asked);
    cr_assert_eq(h.id, never.id, "the handle was rewritten");
  }
  th_destroy(rt);
}

/* rp_graph_depends allocates its search (the adjacency and the stack):
 * each allocation failing in turn gives 0 with an RP_ENOMEM detail naming
 * the call (the adjacency's said "graph: out of memory"), and the next
 * call answers on the unchanged graph. */
Test(oom, rp_graph_depends_out_of_memory_names_the_call) {
  rp_runtime *rt;
  RP_CHECK(make_runtime(1, &rt));
  rp_task_id t = th_task(rt, "touch_nothing", touch_nothing);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id o[3];
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &o[i]));
  RP_CHECK(rp_graph_add_edge(g, o[0], o[1]));
  RP_CHECK(rp_graph_add_edge(g, o[1], o[2]));
  long n = 0;
  for (;; n++) {
    stale_detail_set();
    oom_arm(n);
    int d = rp_graph_depends(g, o[0], o[2]);
    int fired = oom_disarm();
    if (!fired) {
      cr_assert_eq(d, 1, "without failures: o0 -> o2");
      break;
    }
    cr_assert_eq(d, 0, "allocation %ld failing: answered %d", n, d);
    cr_assert_str_eq(rp_error_detail(), "rp_graph_depends: out of memory",
                     "allocation %ld failing", n);
  }
  cr_assert_geq(n, 3, "the search made only %ld allocations", n);
  cr_assert_eq(rp_graph_op_count(g), 3u);
  cr_assert_eq(rp_graph_edge_count(g), 2u);
  cr_assert_eq(rp_graph_depends(g, o[2], o[0]), 0);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  leak_check("rp_graph_depends", n);
}

/* A model's distributed launches (refused there: RP_EUNSUPPORTED) first
 * make the runtime's capture state: when that allocation fails the call
 * says RP_ENOMEM naming itself, and the runtime still refuses as before. */
Test(oom, a_models_distributed_launch_out_of_memory_names_the_call) {
  rp_machine_desc md = {.cpus = 1};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&md, &rt));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  rp_allreduce ar = {.inst = x, .redop = RP_REDOP_SUM};
  long n = 0, said = 0;
  for (;; n++) {
    stale_detail_set();
    oom_arm(n);
    rp_event done = UNSET;
    rp_status st = rp_launch_allreduce(rt, &ar, &done);
    int fired = oom_disarm();
    cr_assert_eq(done.id, UNSET.id, "allocation %ld failing: done was set", n);
    if (!fired) {
      RP_EXPECT(st, RP_EUNSUPPORTED);
      cr_assert(strstr(rp_error_detail(), "rp_launch_allreduce"), "%s",
                rp_error_detail());
      break;
    }
    if (st == RP_EUNSUPPORTED)
      continue; /* an allocation it can do without */
    cr_assert_eq(st, RP_ENOMEM, "allocation %ld failing: %s (%s)", n,
                 rp_status_name(st), rp_error_detail());
    cr_assert(oom_detail_ok(rp_error_detail()) &&
                  strstr(rp_error_detail(), "rp_launch_allreduce: "),
              "allocation %ld failing: '%s'", n, rp_error_detail());
    said++;
  }
  cr_assert_gt(said, 0, "no allocation of the launch failed");
  float v[4] = {1, 2, 3, 4};
  RP_EXPECT(rp_instance_write(rt, x, v, sizeof v), RP_EUNSUPPORTED);
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_runtime_destroy(rt));
  leak_check("rp_launch_allreduce on a model", n);
}

#ifdef REPRISE_HAVE_CJSON
/* Loading a graph file with mirrors (copy insertion) and an SPMD op with
 * shard_procs, each allocation failing in turn: RP_ENOMEM with a detail
 * of its own naming the call and what it was loading (the mirrors' table
 * said "out of memory" alone), nothing handed out,
 * and a load that succeeds gives the graph a load without failures
 * gives. */
Test(oom, a_graph_files_mirrors_and_shard_procs_out_of_memory_are_named) {
  enum { N = 4 };
  rp_runtime *rt;
  RP_CHECK(make_runtime(2, &rt));
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst a, c;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &c));
  oom_priv pv = {{a.id, 0}, {0, 0}};
  RP_CHECK(rp__capture_set_reach(rt, oom_private_reach, &pv));
  rp_scalar_args two = {2.0f, 0};
  rp_access ra = {a, RP_RW, RP_REDOP_NONE}, rc = {c, RP_RW, RP_REDOP_NONE};
  rp_proc sp[2] = {0, 1};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = k.scale,
                                       .proc = 1,
                                       .accesses = &ra,
                                       .naccess = 1,
                                       .args = &two,
                                       .args_size = sizeof two},
                          NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = k.scale,
                                       .accesses = &rc,
                                       .naccess = 1,
                                       .args = &two,
                                       .args_size = sizeof two,
                                       .shards = 2,
                                       .shard_procs = sp},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp__capture_set_reach(rt, NULL, NULL));
  cr_assert_eq(g->nmirrors, 1u, "a mirror for a on worker 1");
  char path[] = "/tmp/rp_oom_txt_XXXXXX";
  cr_assert_eq(temp_file(path), RP_OK);
  RP_CHECK(rp_graph_save(g, path));
  size_t len;
  char *text = th_read_all(path, &len);
  unlink(path);
  rp_inst insts[2] = {a, c};
  uint32_t ni = 0;
  RP_CHECK(rp_graph_instances(g, insts, 2, &ni));
  cr_assert_eq(ni, 2u);
  rp_graph *first;
  RP_CHECK(rp_graph_load_mem(rt, text, len, insts, ni, 0, &first));
  cr_assert_eq(first->nmirrors, 1u);
  uint64_t want = graph_fingerprint(first);
  RP_CHECK(rp_graph_destroy(first));
  const char *need[] = {"rp_graph_load_mem: graph.mirrors: out of memory",
                        "rp_graph_load_mem: graph.ops[3].shard_procs: out "
                        "of memory"};
  int seen[2] = {0, 0};
  cjson_through_wrappers(1);
  long n = 0;
  for (;; n++) {
    stale_detail_set();
    rp_graph *back = (rp_graph *)&n; /* untouched on error */
    oom_arm(n);
    rp_status st = rp_graph_load_mem(rt, text, len, insts, ni, 0, &back);
    int fired = oom_disarm();
    if (st == RP_OK) {
      cr_assert_eq(graph_fingerprint(back), want,
                   "allocation %ld failing: another graph", n);
      RP_CHECK(rp_graph_destroy(back));
      if (!fired)
        break;
      continue;
    }
    cr_assert_eq(st, RP_ENOMEM, "allocation %ld failing: %s (%s)", n,
                 rp_status_name(st), rp_error_detail());
    const char *e = rp_error_detail();
    cr_assert(oom_detail_ok(e) && !strncmp(e, "rp_graph_load_mem: ", 19),
              "allocation %ld failing: '%s'", n, e);
    cr_assert_eq(back, (rp_graph *)&n, "allocation %ld failing: *out set", n);
    for (int i = 0; i < 2; i++)
      if (!strcmp(e, need[i]))
        seen[i] = 1;
    if (n % 64 == 63)
      leak_check("graph file with mirrors", n);
  }
  cjson_through_wrappers(0);
  for (int i = 0; i < 2; i++)
    cr_assert(seen[i], "no failure said '%s'", need[i]);
  leak_check("graph file with mirrors", n);
  free(text);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, c));
  th_destroy(rt);
}
#endif
