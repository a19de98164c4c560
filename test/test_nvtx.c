/* NVTX ranges, checked without Nsight Systems or a GPU: ctest starts this
 * program with NVTX_INJECTION64_PATH naming test/nvtx_inject.c's library,
 * which NVTX loads on the first range and which logs every push and pop.
 * The cases replay execs and check the ranges' names, counts, nesting and
 * balance: "reprise.instantiate", "reprise.replay", one range per op (the
 * task's name, "reprise.copy" for a copy) and, on the CUDA backend,
 * "reprise.segment" for every device segment launched. */
#include "helpers.h"

#include "nvtx_inject.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef REPRISE_HAVE_NVTX
Test(nvtx, skipped_without_nvtx) {
  cr_skip_test("this build has no NVTX (the CUDA toolkit's nvtx3 headers "
               "were not found)");
}
#else

/* ---- the injection library's log ---- */

static rp_nvtx_log_fn log_fn;
static rp_nvtx_reset_fn reset_fn;

/* Finds the injection library that NVTX loaded. Run by hand without the
 * variable, the process sets it itself before its first NVTX call (NVTX
 * reads it then, lazily), so the cases work outside ctest too. */
static void attach(void) {
  const char *path = getenv("NVTX_INJECTION64_PATH");
  if (!path || !*path) {
    setenv("NVTX_INJECTION64_PATH", RP_NVTX_INJECT_PATH, 1);
    path = RP_NVTX_INJECT_PATH;
  }
  /* The first range loads it: instantiate one trivial runtime's worth. */
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    h = dlopen(path, RTLD_NOW); /* the same copy NVTX will dlopen */
  cr_assert_not_null(h, "cannot load the NVTX injection library %s: %s", path,
                     dlerror());
  log_fn = (rp_nvtx_log_fn)(uintptr_t)dlsym(h, "rp_nvtx_inject_log");
  reset_fn = (rp_nvtx_reset_fn)(uintptr_t)dlsym(h, "rp_nvtx_inject_reset");
  cr_assert(log_fn && reset_fn,
            "the injection library %s lacks its log "
            "functions",
            path);
}

/* Pushes of name in the log (from index from on). */
static size_t pushes(const char *name, size_t from) {
  size_t n, dropped, k = 0;
  const rp_nvtx_rec *r = log_fn(&n, &dropped);
  for (size_t i = from; i < n; i++)
    k += r[i].push && strcmp(r[i].name, name) == 0;
  return k;
}

/* Every pop closes an open range on its own thread, and each thread ends
 * with none open: pushes and pops balance per thread. */
static void assert_balanced(void) {
  size_t n, dropped;
  const rp_nvtx_rec *r = log_fn(&n, &dropped);
  cr_assert_eq(dropped, 0, "the injection log overflowed");
  for (size_t i = 0; i < n; i++) {
    cr_assert(r[i].push || r[i].name[0],
              "record %zu: a pop on thread %lu "
              "without an open range",
              i, r[i].tid);
    int open = 0;
    for (size_t j = 0; j < n; j++)
      if (r[j].tid == r[i].tid)
        open += r[j].push ? 1 : -1;
    cr_assert_eq(open, 0, "thread %lu ends with %d ranges open", r[i].tid,
                 open);
  }
}

/* Prints the log (on failure it shows what was pushed). */
static void print_log(void) {
  size_t n, dropped;
  const rp_nvtx_rec *r = log_fn(&n, &dropped);
  for (size_t i = 0; i < n; i++)
    fprintf(stderr, "  %s %*s%s (thread %lu)\n", r[i].push ? "push" : "pop ",
            2 * r[i].depth, "", r[i].name, r[i].tid);
}

/* ---- tasks ---- */

static rp_status nop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_task_id reg(rp_runtime *rt, const char *name, rp_task_fn cpu,
                      rp_task_fn gpu, unsigned flags) {
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){
          .name = name, .cpu_fn = cpu, .gpu_fn = gpu, .flags = flags},
      &t));
  return t;
}

/* ---- cases ---- */

#define NREPLAY 3

/* CPU: a recorded step of three tasks on two workers and a copy. Every
 * replay pushes "reprise.replay" once on the calling thread, outermost;
 * each op pushes its task's name once per replay ("reprise.copy" for the
 * copy); no "reprise.segment" (no GPU). */
Test(nvtx, cpu_replay_ranges_and_names) {
  attach();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id ta = reg(rt, "nvtx.produce", nop_task, NULL, 0);
  rp_task_id tb = reg(rt, "nvtx.consume", nop_task, NULL, 0);
  rp_task_id tc = reg(rt, "nvtx.side", nop_task, NULL, 0);
  rp_inst x, y;
  rp_rect r16 = rp_rect_1d(0, 15);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r16, NULL, &x));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r16, NULL, &y));
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_access wx = {x, RP_WRITE, 0}, rx = {x, RP_READ, 0}, wy = {y, RP_WRITE, 0};
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = ta, .proc = 0, .accesses = &wx, .naccess = 1},
      NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = tc, .proc = 1, .accesses = &wy, .naccess = 1},
      NULL));
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = x, .dst = y}, NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = tb, .proc = 1, .accesses = &rx, .naccess = 1},
      NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));

  reset_fn();
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  cr_assert_eq(pushes("reprise.instantiate", 0), 1);
  size_t n0, dropped;
  log_fn(&n0, &dropped);
  for (int i = 0; i < NREPLAY; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));

  size_t n;
  const rp_nvtx_rec *r = log_fn(&n, &dropped);
  if (pushes("reprise.replay", n0) != NREPLAY ||
      pushes("nvtx.produce", n0) != NREPLAY)
    print_log();
  cr_assert_eq(pushes("reprise.replay", n0), NREPLAY);
  cr_assert_eq(pushes("nvtx.produce", n0), NREPLAY);
  cr_assert_eq(pushes("nvtx.consume", n0), NREPLAY);
  cr_assert_eq(pushes("nvtx.side", n0), NREPLAY);
  cr_assert_eq(pushes("reprise.copy", n0), NREPLAY);
  cr_assert_eq(pushes("reprise.segment", 0), 0,
               "a CPU exec has no device "
               "segments");
  /* the replay range is outermost on the thread that called rp_replay */
  unsigned long me = (unsigned long)syscall(SYS_gettid);
  for (size_t i = n0; i < n; i++)
    if (r[i].push && strcmp(r[i].name, "reprise.replay") == 0) {
      cr_assert_eq(r[i].depth, 0, "reprise.replay nested at depth %d",
                   r[i].depth);
      cr_assert_eq(r[i].tid, me, "reprise.replay pushed on another thread");
    }
  /* nothing but the names above appeared */
  for (size_t i = n0; i < n; i++)
    cr_assert(!r[i].push || strcmp(r[i].name, "reprise.replay") == 0 ||
                  strncmp(r[i].name, "nvtx.", 5) == 0 ||
                  strcmp(r[i].name, "reprise.copy") == 0,
              "unexpected range '%s'", r[i].name);
  assert_balanced();
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}

/* Eager launches (no capture) push the task's name too, once each. */
Test(nvtx, eager_task_range) {
  attach();
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "nvtx.eager", nop_task, NULL, 0);
  reset_fn();
  for (int i = 0; i < 2; i++) {
    rp_event done;
    RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(pushes("nvtx.eager", 0), 2);
  cr_assert_eq(pushes("reprise.replay", 0), 0);
  assert_balanced();
  th_destroy(rt);
}

/* CUDA: a GPU op's replay pushes "reprise.replay" and "reprise.segment"
 * (the device segment's launch); the op's name is pushed when it is
 * captured into the segment's graph or issued. Skips without a device. */
Test(nvtx, cuda_segment_ranges) {
  attach();
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc gpu = RP_PROC_ANY;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_GPU) {
      gpu = p;
      break;
    }
  }
  cr_assert_neq(gpu, RP_PROC_ANY, "a CUDA runtime without a GPU processor");
  rp_task_id t = reg(rt, "nvtx.gpu", NULL, nop_task, RP_TASK_STREAM_ORDERED);
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = gpu}, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  reset_fn();
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  size_t n0, dropped;
  log_fn(&n0, &dropped);
  for (int i = 0; i < NREPLAY; i++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  if (pushes("reprise.segment", n0) < NREPLAY)
    print_log();
  cr_assert_eq(pushes("reprise.instantiate", 0), 1);
  cr_assert_eq(pushes("reprise.replay", n0), NREPLAY);
  cr_assert_geq(pushes("reprise.segment", n0), NREPLAY,
                "one segment "
                "launch per replay at least");
  cr_assert_geq(pushes("nvtx.gpu", 0), 1,
                "the GPU op's name was never "
                "pushed (capture or issue)");
  assert_balanced();
  th_destroy(rt);
}

#endif
