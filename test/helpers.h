/* test/helpers.h — shared test support: runtime creation per backend, skip
 * messages, allocation counters. */
#ifndef RP_TEST_HELPERS_H
#define RP_TEST_HELPERS_H

#include "reprise.h"

#include <criterion/criterion.h>

/* Asserts that a call returned RP_OK, printing the status and detail. */
#define RP_CHECK(call)                                                         \
  do {                                                                         \
    rp_status st_ = (call);                                                    \
    cr_assert_eq(st_, RP_OK, "%s -> %s (%s)", #call, rp_status_name(st_),      \
                 rp_error_detail());                                           \
  } while (0)

/* Asserts a specific status. */
#define RP_EXPECT(call, want)                                                  \
  do {                                                                         \
    rp_status st_ = (call);                                                    \
    cr_assert_eq(st_, (want), "%s -> %s, expected %s (%s)", #call,             \
                 rp_status_name(st_), rp_status_name(want),                    \
                 rp_error_detail());                                           \
  } while (0)

/* A CPU runtime with n workers (environment ignored). */
rp_runtime *th_cpu_runtime(unsigned workers);
/* Registers a task with a CPU variant only (asserting success). */
rp_task_id th_task(rp_runtime *rt, const char *name, rp_task_fn cpu);
/* Tasks on int64 instances: th_add1_task adds 1 to access 0;
 * th_sum4_task writes access 4 = accesses 0 + 1 + 2 + 3. */
rp_status th_add1_task(rp_task_ctx *ctx);
rp_status th_sum4_task(rp_task_ctx *ctx);
/* Launches, into the capture open on this thread, an unhinted fan (no
 * cost hints, RP_PROC_ANY): eight `add1` (task t) over x[0..4), two each,
 * then `sum4` (task join) of them into x[4]. */
void th_launch_unhinted_fan(rp_runtime *rt, rp_task_id t, rp_task_id join,
                            const rp_inst *x);
/* A runtime of the given backend; for CUDA without a device the test is
 * skipped with the reason (th_need_gpu). */
rp_runtime *th_runtime(rp_backend_kind kind, unsigned workers);
/* A runtime of procs processors of kind: CPU workers, or on CUDA procs
 * logical GPUs of one device (their copies run on the device: one GPU is
 * enough) beside 2 CPU workers. Skips as th_runtime does. */
rp_runtime *th_runtime_procs(rp_backend_kind kind, unsigned procs);
/* Destroys rt and asserts it returned RP_OK; in ASan builds also that
 * LeakSanitizer finds no leak at that point (anything the test still holds
 * outside the runtime counts too). */
void th_destroy(rp_runtime *rt);
/* 1 when a CUDA device answers (probed once per process); 0 when none can
 * (a build without CUDA, no device, no or too old a driver: why says
 * which). A device that answers while rp_runtime_create on the CUDA backend
 * fails is a test failure, never a skip. */
int th_cuda_available(const char **why);
/* 1 when REPRISE_REQUIRE_GPU=1: a GPU is expected, so a GPU test that
 * would skip fails instead. */
int th_gpu_required(void);
/* Skips the running GPU test with the reason (printf-style, a literal
 * format), or fails it under REPRISE_REQUIRE_GPU=1. */
#define th_gpu_skip(...)                                                       \
  do {                                                                         \
    if (th_gpu_required())                                                     \
      cr_assert_fail("REPRISE_REQUIRE_GPU=1, but this GPU test would "         \
                     "skip: " __VA_ARGS__);                                    \
    else                                                                       \
      cr_skip_test(__VA_ARGS__);                                               \
  } while (0)
/* Skips (th_gpu_skip) the running test unless a CUDA device answers. */
void th_need_gpu(void);

/* rp_exec_tune's cost source (replay/replay_impl.h): a test that asserts
 * which placement the tuner keeps sets it, so that the machine's speed and
 * load cannot decide the outcome. Two sources: a placement on one worker
 * replays in half the time of any wider one; every placement takes the
 * same time. */
extern uint64_t (*rp__tune_cost_hook)(const char *what, uint32_t workers,
                                      uint64_t measured_ns);
uint64_t th_cost_one_worker_wins(const char *what, uint32_t workers,
                                 uint64_t measured_ns);
uint64_t th_cost_all_equal(const char *what, uint32_t workers,
                           uint64_t measured_ns);

/* A scratch directory for the running test: th_tmpdir_make creates one
 * from a mkdtemp template ("/tmp/rp_x_XXXXXX"), th_tmp_path names a file
 * in it (the last 8 results stay valid), th_tmpdir_remove deletes it with
 * everything in it. One directory at a time. */
void th_tmpdir_make(const char *templ);
void th_tmpdir_remove(void);
const char *th_tmp_path(const char *name);
/* The whole file at path, NUL-terminated, malloc'd; *len gets its size when
 * len is not NULL. Asserts it could be read. */
char *th_read_all(const char *path, size_t *len);

/* A thread inside rp_exec_tune, held in a trial replay: th_held_task (a
 * task to register for the exec's ops) says it runs, waits until
 * th_held_tune_finish (10 s at most) and then runs the body given to
 * th_held_tune_start (NULL: nothing; its status is the task's).
 * th_held_tune_start starts the thread, rp_exec_tune(ex, no arguments),
 * and returns once a trial replay is held in th_held_task, asserting it
 * got there; th_held_tune_finish lets it go, joins it and returns tune's
 * status. One at a time per process. */
rp_status th_held_task(rp_task_ctx *ctx);
void th_held_tune_start(rp_exec *ex, rp_task_fn body);
rp_status th_held_tune_finish(void);

/* Backends for parameterized tests. */
extern rp_backend_kind th_backends[2];

/* Behaviours every backend must show are tested once, in suites whose name
 * ends in "_backends", on TH_BACKEND. A test source with such a suite
 * builds twice (test/CMakeLists.txt): as test_x, where TH_BACKEND is
 * RP_BACKEND_CPU and every suite runs (label "unit"), and as test_x_cuda,
 * where TH_BACKEND is RP_BACKEND_CUDA and only the *_backends suites run
 * (label "gpu"; th_runtime skips them with the reason when no CUDA device
 * answers). Where the backends differ in a tolerance or a detail, the test
 * says so with TH_ON_CPU. */
/* TH_TSAN: defined in ThreadSanitizer builds, whose shadow memory makes
 * resident-memory figures meaningless. */
#if defined(__SANITIZE_THREAD__)
#define TH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TH_TSAN 1
#endif
#endif
/* TH_SANITIZED: defined in ThreadSanitizer and AddressSanitizer builds,
 * whose shadow memory and quarantine are resident too: peak-memory bounds
 * are asserted in plain builds only. */
#if defined(TH_TSAN) || defined(__SANITIZE_ADDRESS__)
#define TH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_SANITIZED 1
#endif
#endif

#ifndef TH_BACKEND
#define TH_BACKEND RP_BACKEND_CPU
#endif
#define TH_ON_CPU (TH_BACKEND == RP_BACKEND_CPU)
/* "CPU" or "CUDA", for messages. */
#define TH_BACKEND_NAME (TH_ON_CPU ? "CPU" : "CUDA")
/* The first processor of rt that runs TH_BACKEND's work (a CPU worker on
 * the CPU backend, a GPU on CUDA); asserts there is one. */
rp_proc th_backend_proc(const rp_runtime *rt);

#endif
