#include "helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* ASan builds: LeakSanitizer reports leaks at exit, but Criterion ignores
 * the exit status of its test processes, so a leaking test would pass.
 * th_destroy runs a recoverable leak check itself and fails the test. */
#if defined(__SANITIZE_ADDRESS__)
#define TH_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_LEAK_CHECK 1
#endif
#endif
#ifdef TH_LEAK_CHECK
#include <sanitizer/lsan_interface.h>

/* The CUDA driver keeps process-lifetime allocations it never frees; they
 * are not reprise's leaks. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:libcuda.so\nleak:libnvidia-\n";
}
#endif

rp_backend_kind th_backends[2] = {RP_BACKEND_CPU, RP_BACKEND_CUDA};

rp_proc th_backend_proc(const rp_runtime *rt) {
  rp_proc_kind want = TH_ON_CPU ? RP_PROC_CPU : RP_PROC_GPU;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    rp_status st = rp_proc_query(rt, p, &pi);
    cr_assert_eq(st, RP_OK, "rp_proc_query: %s", rp_status_name(st));
    if (pi.kind == want)
      return p;
  }
  cr_assert_fail("the %s runtime has no processor of its kind",
                 TH_BACKEND_NAME);
  return 0;
}

rp_runtime *th_cpu_runtime(unsigned workers) {
  return th_runtime(RP_BACKEND_CPU, workers);
}

rp_task_id th_task(rp_runtime *rt, const char *name, rp_task_fn cpu) {
  rp_task_id t;
  RP_CHECK(
      rp_task_register(rt, &(rp_task_desc){.name = name, .cpu_fn = cpu}, &t));
  return t;
}

rp_status th_add1_task(rp_task_ctx *ctx) {
  *(int64_t *)rp_ctx_ptr(ctx, 0) += 1;
  return RP_OK;
}

rp_status th_sum4_task(rp_task_ctx *ctx) {
  int64_t v = 0;
  for (uint32_t i = 0; i < 4; i++)
    v += *(const int64_t *)rp_ctx_ptr(ctx, i);
  *(int64_t *)rp_ctx_ptr(ctx, 4) = v;
  return RP_OK;
}

void th_launch_unhinted_fan(rp_runtime *rt, rp_task_id t, rp_task_id join,
                            const rp_inst *x) {
  for (int i = 0; i < 8; i++) {
    rp_access a = {x[i % 4], RP_RW, 0};
    RP_CHECK(rp_launch_task(
        rt,
        &(rp_launch){
            .task = t, .proc = RP_PROC_ANY, .accesses = &a, .naccess = 1},
        NULL));
  }
  rp_access all[5] = {{x[0], RP_READ, 0},
                      {x[1], RP_READ, 0},
                      {x[2], RP_READ, 0},
                      {x[3], RP_READ, 0},
                      {x[4], RP_RW, 0}};
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){
          .task = join, .proc = RP_PROC_ANY, .accesses = all, .naccess = 5},
      NULL));
}

int th_gpu_required(void) {
  const char *v = getenv("REPRISE_REQUIRE_GPU");
  return v && strcmp(v, "1") == 0;
}

/* 1 when no CUDA device can answer in this process: a build without CUDA,
 * no device, or no (or too old a) driver; the reason goes to why. Any other
 * answer means a device is there. */
static int no_device(char *why, size_t n) {
#ifndef REPRISE_HAVE_CUDA
  snprintf(why, n,
           "no CUDA device: this build of reprise has no CUDA "
           "(configured without the toolkit or -DREPRISE_CUDA=OFF)");
  return 1;
#else
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    snprintf(why, n, "no CUDA device: cudaGetDeviceCount: %s (%s)",
             cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
  }
  if (e == cudaSuccess && count < 1) {
    snprintf(why, n, "no CUDA device: cudaGetDeviceCount found none");
    return 1;
  }
  return 0;
#endif
}

int th_cuda_available(const char **why) {
  static int probed = -1;
  static char reason[512];
  if (probed < 0) {
    if (no_device(reason, sizeof reason)) {
      probed = 0;
    } else {
      rp_runtime_config cfg;
      rp_runtime_config_init(&cfg);
      cfg.backend = RP_BACKEND_CUDA;
      cfg.cpus = 1;
      cfg.quiet = 1;
      cfg.ignore_env = 1;
      rp_runtime *rt = NULL;
      rp_status st = rp_runtime_create(&cfg, &rt);
      /* a device answers: a runtime that cannot start on it is a failure
       * (a regression or a broken machine), never a skip */
      cr_assert_eq(st, RP_OK,
                   "a CUDA device answers but rp_runtime_create on the CUDA "
                   "backend failed: %s (%s)",
                   rp_status_name(st), rp_error_detail());
      probed = 1;
      rp_runtime_destroy(rt);
    }
  }
  if (why)
    *why = reason;
  return probed;
}

void th_need_gpu(void) {
  const char *why;
  if (!th_cuda_available(&why))
    th_gpu_skip("%s", why);
}

/* cpus workers and gpus GPUs (0: the config's default) of kind. */
static rp_runtime *make_runtime(rp_backend_kind kind, unsigned cpus,
                                unsigned gpus) {
  if (kind == RP_BACKEND_CUDA)
    th_need_gpu();
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = kind;
  cfg.cpus = cpus;
  if (gpus)
    cfg.gpus = gpus;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  rp_status st = rp_runtime_create(&cfg, &rt);
  cr_assert_eq(st, RP_OK, "runtime create: %s (%s)", rp_status_name(st),
               rp_error_detail());
  return rt;
}

rp_runtime *th_runtime(rp_backend_kind kind, unsigned workers) {
  return make_runtime(kind, workers, 0);
}

rp_runtime *th_runtime_procs(rp_backend_kind kind, unsigned procs) {
  return kind == RP_BACKEND_CUDA ? make_runtime(kind, 2, procs)
                                 : make_runtime(kind, procs, 0);
}

void th_destroy(rp_runtime *rt) {
  rp_status st = rp_runtime_destroy(rt);
  cr_assert_eq(st, RP_OK, "runtime destroy: %s (%s)", rp_status_name(st),
               rp_error_detail());
#ifdef TH_LEAK_CHECK
  /* Everything the test allocated through the runtime is gone by now; the
   * report (on stderr) names the allocation sites. */
  int leaks = __lsan_do_recoverable_leak_check();
  cr_assert_eq(leaks, 0,
               "LeakSanitizer found leaks after runtime destroy "
               "(see the report above)");
#endif
}

/* ---- rp_exec_tune's cost sources ---- */

uint64_t th_cost_one_worker_wins(const char *what, uint32_t workers,
                                 uint64_t measured_ns) {
  (void)what, (void)measured_ns;
  return workers <= 1 ? 10000 : 20000;
}

uint64_t th_cost_all_equal(const char *what, uint32_t workers,
                           uint64_t measured_ns) {
  (void)what, (void)workers, (void)measured_ns;
  return 10000;
}

/* ---- scratch files ---- */

static char th_tmpdir[64];

void th_tmpdir_make(const char *templ) {
  /* under /tmp: a test run from the source tree must not leave files in
   * it when it fails before th_tmpdir_remove */
  cr_assert(templ[0] == '/', "th_tmpdir_make: '%s' is not absolute", templ);
  /* one at a time: a second would orphan the first (left in /tmp) */
  cr_assert(!th_tmpdir[0], "th_tmpdir_make: '%s' is still open", th_tmpdir);
  snprintf(th_tmpdir, sizeof th_tmpdir, "%s", templ);
  cr_assert_not_null(mkdtemp(th_tmpdir));
}

void th_tmpdir_remove(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", th_tmpdir);
  cr_assert_eq(system(cmd), 0);
  th_tmpdir[0] = '\0';
}

const char *th_tmp_path(const char *name) {
  static char buf[8][160];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 160, "%s/%s", th_tmpdir, name);
  return p;
}

char *th_read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = 0;
  fclose(f);
  if (len)
    *len = (size_t)n;
  return b;
}

static _Atomic int held_in, held_go;
static rp_task_fn held_body;
static pthread_t held_thread;

rp_status th_held_task(rp_task_ctx *ctx) {
  atomic_store(&held_in, 1);
  for (long i = 0; i < 10000000 && !atomic_load(&held_go); i++)
    usleep(1);
  return held_body ? held_body(ctx) : RP_OK;
}

static void *held_tune(void *ex) {
  uint32_t tuned = 0;
  return (void *)(intptr_t)rp_exec_tune(ex, &(rp_replay_args){0}, &tuned);
}

void th_held_tune_start(rp_exec *ex, rp_task_fn body) {
  held_body = body;
  atomic_store(&held_in, 0), atomic_store(&held_go, 0);
  cr_assert_eq(pthread_create(&held_thread, NULL, held_tune, ex), 0);
  for (int i = 0; i < 10000000 && !atomic_load(&held_in); i++)
    usleep(1);
  cr_assert(atomic_load(&held_in), "tune ran no trial replay");
}

rp_status th_held_tune_finish(void) {
  atomic_store(&held_go, 1);
  void *ret;
  cr_assert_eq(pthread_join(held_thread, &ret), 0);
  return (rp_status)(intptr_t)ret;
}
