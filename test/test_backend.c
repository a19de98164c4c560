/* test/test_backend.c — backend selection and the processor queues, on every
 * machine. The no-device cases skip (with the reason) where a CUDA device
 * answers. */
#include "helpers.h"

#include "engine/engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef REPRISE_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

static void skip_if_cuda_device(void) {
  if (th_cuda_available(NULL))
    cr_skip_test("a CUDA device answers: this case needs a machine without "
                 "one");
}

static rp_runtime_config quiet_config(rp_backend_kind kind) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = kind;
  cfg.cpus = 1;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  return cfg;
}

/* Bytes this thread allocated minus bytes it freed (jemalloc), or INT64_MIN
 * without jemalloc. */
static int64_t thread_live_bytes(void) {
#ifdef REPRISE_HAVE_JEMALLOC
  uint64_t a = 0, d = 0;
  size_t sz = sizeof a;
  if (mallctl("thread.allocated", &a, &sz, NULL, 0) != 0 ||
      mallctl("thread.deallocated", &d, &sz, NULL, 0) != 0)
    return INT64_MIN;
  return (int64_t)(a - d);
#else
  return INT64_MIN;
#endif
}

Test(backend, cuda_without_device_is_enodev_naming_cuda) {
  skip_if_cuda_device();
  rp_runtime_config cfg = quiet_config(RP_BACKEND_CUDA);
  rp_runtime *rt = (rp_runtime *)&cfg; /* must be overwritten with NULL */
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_ENODEV);
  cr_assert_null(rt, "a failed create must hand out no runtime");
  cr_assert(strstr(rp_error_detail(), "CUDA") != NULL,
            "detail should name CUDA: '%s'", rp_error_detail());
}

Test(backend, cuda_without_device_leaks_nothing) {
  skip_if_cuda_device();
  rp_runtime_config cfg = quiet_config(RP_BACKEND_CUDA);
  rp_runtime *rt = NULL;
  /* The first failure may leave the CUDA runtime's one-time state behind
   * (it is the library's, kept for the process); later ones must not grow
   * anything. */
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_ENODEV);
  int64_t before = thread_live_bytes();
  if (before == INT64_MIN)
    cr_skip_test("built without jemalloc: no allocation counters");
  for (int i = 0; i < 20; i++)
    RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_ENODEV);
  int64_t grown = thread_live_bytes() - before;
  cr_assert_eq(grown, 0, "20 failed creates left %lld bytes allocated",
               (long long)grown);
}

Test(backend, auto_without_device_falls_back_to_cpu) {
  skip_if_cuda_device();
  rp_runtime_config cfg = quiet_config(RP_BACKEND_AUTO);
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create(&cfg, &rt));
  cr_assert_eq(rp_runtime_backend(rt), RP_BACKEND_CPU);
  const char *why = rp_runtime_backend_reason(rt);
  cr_assert(why && *why, "AUTO fell back without saying why");
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    cr_assert_eq(pi.kind, RP_PROC_CPU, "processor %u is not a CPU", p);
  }
  rp_mem m;
  RP_EXPECT(rp_mem_find(rt, RP_MEM_GPU, 0, &m), RP_ENOENT);
  RP_EXPECT(rp_mem_find(rt, RP_MEM_PINNED, -1, &m), RP_ENOENT);
  th_destroy(rt);
}

Test(backend, env_backend_cuda_without_device_is_enodev) {
  skip_if_cuda_device();
  setenv("REPRISE_BACKEND", "cuda", 1);
  rp_runtime_config cfg = quiet_config(RP_BACKEND_AUTO);
  cfg.ignore_env = 0;
  rp_runtime *rt = NULL;
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_ENODEV);
  cr_assert_null(rt);
  cr_assert(strstr(rp_error_detail(), "CUDA") != NULL, "detail: '%s'",
            rp_error_detail());
}

Test(backend, env_backend_bogus_is_einval) {
  setenv("REPRISE_BACKEND", "bogus", 1);
  rp_runtime_config cfg = quiet_config(RP_BACKEND_CPU);
  cfg.ignore_env = 0;
  rp_runtime *rt = NULL;
  RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_EINVAL);
  cr_assert_null(rt);
  cr_assert(strstr(rp_error_detail(), "bogus") != NULL, "detail: '%s'",
            rp_error_detail());
}

/* The words are exact, as --backend's: "CPU" is no backend (the command
 * line refuses it too, test_cli). */
Test(backend, env_backend_words_are_exact_case) {
  static const char *bad[] = {"CPU", "Cuda", "AUTO"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("REPRISE_BACKEND", bad[i], 1);
    rp_runtime_config cfg = quiet_config(RP_BACKEND_CPU);
    cfg.ignore_env = 0;
    rp_runtime *rt = NULL;
    RP_EXPECT(rp_runtime_create(&cfg, &rt), RP_EINVAL);
    cr_assert_null(rt);
    char want[64];
    snprintf(want, sizeof want, "REPRISE_BACKEND=%s: expected one of", bad[i]);
    cr_assert(strstr(rp_error_detail(), want), "detail: '%s'",
              rp_error_detail());
  }
}

Test(backend, env_backend_cpu_overrides_config) {
  setenv("REPRISE_BACKEND", "cpu", 1);
  rp_runtime_config cfg = quiet_config(RP_BACKEND_CUDA);
  cfg.ignore_env = 0;
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create(&cfg, &rt));
  cr_assert_eq(rp_runtime_backend(rt), RP_BACKEND_CPU);
  th_destroy(rt);
}

/* ---- processor queues ---- */

enum { FIFO_ITEMS = 2000 };

typedef struct fifo_item {
  rp_work w;
  struct fifo_log *log;
  int index;
} fifo_item;

typedef struct fifo_log {
  int order[FIFO_ITEMS];
  int n;               /* written by the processor's thread only */
  pthread_t thread[2]; /* the threads that ran the first and last item */
} fifo_log;

static void fifo_run(rp_work *w) {
  fifo_item *it = (fifo_item *)w;
  fifo_log *log = it->log;
  if (log->n == 0)
    log->thread[0] = pthread_self();
  log->thread[1] = pthread_self();
  log->order[log->n++] = it->index;
}

Test(backend, cpu_worker_runs_its_queue_in_order) {
  rp_runtime *rt = th_cpu_runtime(2);
  fifo_log *log = calloc(1, sizeof *log);
  fifo_item *items = calloc(FIFO_ITEMS, sizeof *items);
  cr_assert(log && items);
  for (int i = 0; i < FIFO_ITEMS; i++) {
    items[i].w.run = fifo_run;
    items[i].log = log;
    items[i].index = i;
    rp__proc_enqueue(rt, 1, &items[i].w);
  }
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(log->n, FIFO_ITEMS);
  for (int i = 0; i < FIFO_ITEMS; i++)
    cr_assert_eq(log->order[i], i, "item %d ran at position %d", log->order[i],
                 i);
  cr_assert(pthread_equal(log->thread[0], log->thread[1]));
  cr_assert(!pthread_equal(log->thread[0], pthread_self()),
            "items ran on the enqueuing thread");
  th_destroy(rt);
  free(items);
  free(log);
}

/* ---- REPRISE_CPUS ---- */

/* A CPU runtime created with cfg.cpus = cpus and the environment read
 * (REPRISE_BACKEND cleared, so only REPRISE_CPUS applies). */
static rp_status create_with_env(unsigned cpus, rp_runtime **rt) {
  unsetenv("REPRISE_BACKEND");
  rp_runtime_config cfg = quiet_config(RP_BACKEND_CPU);
  cfg.cpus = cpus;
  cfg.ignore_env = 0;
  return rp_runtime_create(&cfg, rt);
}

static unsigned cpu_procs(const rp_runtime *rt) {
  unsigned n = 0;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    n += pi.kind == RP_PROC_CPU;
  }
  return n;
}

Test(backend, env_cpus_gives_the_worker_count_when_the_config_leaves_it_0) {
  setenv("REPRISE_CPUS", "3", 1);
  rp_runtime *rt;
  RP_CHECK(create_with_env(0, &rt));
  cr_assert_eq(cpu_procs(rt), 3u);
  cr_assert_eq(rp_proc_count(rt), 3u);
  th_destroy(rt);
}

Test(backend, env_cpus_overrides_a_config_count) {
  setenv("REPRISE_CPUS", "2", 1);
  rp_runtime *rt;
  RP_CHECK(create_with_env(1, &rt));
  cr_assert_eq(cpu_procs(rt), 2u);
  th_destroy(rt);
}

Test(backend, env_cpus_empty_is_unset) {
  setenv("REPRISE_CPUS", "", 1);
  rp_runtime *rt;
  RP_CHECK(create_with_env(2, &rt));
  cr_assert_eq(cpu_procs(rt), 2u);
  th_destroy(rt);
}

Test(backend, env_cpus_ignored_with_ignore_env) {
  setenv("REPRISE_CPUS", "bogus", 1);
  rp_runtime *rt = th_cpu_runtime(1); /* ignore_env = 1 */
  cr_assert_eq(cpu_procs(rt), 1u);
  th_destroy(rt);
}

Test(backend, env_cpus_bad_values_are_einval_naming_the_value) {
  static const char *bad[] = {"0",   "-1", "-3",  "129",
                              "abc", "3x", "2.5", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("REPRISE_CPUS", bad[i], 1);
    rp_runtime *rt = (rp_runtime *)&rt; /* must be overwritten with NULL */
    rp_status st = create_with_env(0, &rt);
    cr_assert_eq(st, RP_EINVAL, "REPRISE_CPUS=%s -> %s (%s)", bad[i],
                 rp_status_name(st), rp_error_detail());
    cr_assert_null(rt, "REPRISE_CPUS=%s handed out a runtime", bad[i]);
    char want[64];
    snprintf(want, sizeof want,
             "REPRISE_CPUS=%s: expected a whole number "
             "in 1..128",
             bad[i]);
    cr_assert(strstr(rp_error_detail(), want), "REPRISE_CPUS=%s: detail '%s'",
              bad[i], rp_error_detail());
  }
}

/* rp_proc_info.physical: -1 on CPU workers; a model runtime's GPU runs on
 * the device its machine names. */
Test(backend, physical_device_of_processors) {
  rp_runtime *rt = th_cpu_runtime(3);
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    cr_assert_eq(pi.kind, RP_PROC_CPU);
    cr_assert_eq(pi.physical, -1, "worker %u", p);
  }
  th_destroy(rt);
  rp_machine_desc m = {.cpus = 1, .ngpus = 2, .gpu_device = {0, 1}};
  m.nmems = 2;
  m.mems[0] = (rp_mem_info){RP_MEM_GPU, 0};
  m.mems[1] = (rp_mem_info){RP_MEM_GPU, 1};
  rp_runtime *model = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &model));
  for (rp_proc p = 1; p < 3; p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(model, p, &pi));
    cr_assert_eq(pi.kind, RP_PROC_GPU);
    cr_assert_eq(pi.physical, pi.device, "GPU processor %u", p);
  }
  th_destroy(model);
}
