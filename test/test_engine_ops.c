/* test/test_engine_ops.c — the engine's low-level operations
 * (engine/ops.c): task spawns and byte copies gated on one precondition
 * event, each completing an event of its own. Copies after their
 * precondition, strided copies through a processor's own memory and a task
 * spawn followed by a copy on every backend (suite engine_ops_backends,
 * also built as test_engine_ops_cuda: test/helpers.h); the rest on the CPU
 * backend. What only CUDA has (device memory a CPU worker cannot address)
 * is in test_engine_ops_gpu.c. */
#include "helpers.h"

#include "engine/engine.h"
#ifdef REPRISE_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEC 1000000000ll

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000l};
  nanosleep(&ts, NULL);
}

static rp_mem sysmem(rp_runtime *rt) {
  rp_mem m;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &m));
  return m;
}

/* ---- tasks the spawns run ---- */

/* args: a pointer to a counter, incremented once per run. (Tasks run on
 * workers: they report mistakes through their status, not cr_assert.) */
static rp_status count_task(rp_task_ctx *ctx) {
  size_t n;
  _Atomic int *const *c = rp_ctx_args(ctx, &n);
  if (n != sizeof *c)
    return RP_EINVAL;
  atomic_fetch_add(*c, 1);
  return RP_OK;
}

/* args: a sequence log; appends its index (tasks of a chain). */
typedef struct seq_log {
  _Atomic int next;
  int order[512];
} seq_log;
typedef struct seq_args {
  seq_log *log;
  int index;
} seq_args;

static rp_status seq_task(rp_task_ctx *ctx) {
  const seq_args *a = rp_ctx_args(ctx, NULL);
  int at = atomic_fetch_add(&a->log->next, 1);
  a->log->order[at] = a->index;
  return RP_OK;
}

/* args: a status to return. */
static rp_status fail_task(rp_task_ctx *ctx) {
  return *(const rp_status *)rp_ctx_args(ctx, NULL);
}

/* What a task saw of its context. */
typedef struct ctx_seen {
  rp_proc proc;
  rp_proc_kind kind;
  uint32_t shard, shards, naccess;
  unsigned char args[16];
  void *ptr0;
  rp_rect rect1;
  void *ws;
} ctx_seen;
static ctx_seen g_seen; /* the CPU task writes it; the host reads after */

static rp_status look_task(rp_task_ctx *ctx) {
  size_t n;
  const void *a = rp_ctx_args(ctx, &n);
  if (n != sizeof g_seen.args)
    return RP_EINVAL;
  memcpy(g_seen.args, a, n);
  g_seen.proc = rp_ctx_proc(ctx);
  g_seen.kind = rp_ctx_proc_kind(ctx);
  g_seen.shard = rp_ctx_shard(ctx);
  g_seen.shards = rp_ctx_shards(ctx);
  g_seen.naccess = rp_ctx_access_count(ctx);
  g_seen.ptr0 = rp_ctx_ptr(ctx, 0);
  g_seen.rect1 = rp_ctx_inst(ctx, 1)->rect;
  g_seen.ws = rp_ctx_workspace(ctx, NULL);
  return RP_OK;
}

static rp_status gpu_only_task(rp_task_ctx *ctx) {
  RP_UNUSED(ctx);
  return RP_OK;
}

static rp_task_id reg(rp_runtime *rt, const char *name, rp_task_fn cpu,
                      rp_task_fn gpu) {
  rp_task_desc d = {0};
  d.name = name;
  d.cpu_fn = cpu;
  d.gpu_fn = gpu;
  rp_task_id id;
  RP_CHECK(rp_task_register(rt, &d, &id));
  return id;
}

static rp_task_spawn counter_spawn(rp_task_id t, rp_proc p, _Atomic int **c) {
  return (rp_task_spawn){
      .proc = p, .task = t, .args = c, .args_size = sizeof *c};
}

/* ---- task spawns ---- */

Test(engine_ops, task_runs_only_after_pre_triggers) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  _Atomic int runs = 0, *rp = &runs;
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  rp_task_spawn s = counter_spawn(t, 1, &rp);
  RP_CHECK(rp__spawn_task(rt, &s, pre, &done));
  sleep_ms(30);
  cr_assert_eq(atomic_load(&runs), 0, "the task ran before pre triggered");
  RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  cr_assert_eq(atomic_load(&runs), 1);
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_release(rt, pre));
  th_destroy(rt);
}

Test(engine_ops, no_precondition_runs_at_once_and_pre_may_be_released) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  _Atomic int runs = 0, *rp = &runs;
  rp_task_spawn s = counter_spawn(t, 0, &rp);
  rp_event done, pre;
  RP_CHECK(rp__spawn_task(rt, &s, RP_NO_EVENT, &done));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  /* the caller's reference to pre may go right after the spawn */
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp__event_retain(rt, pre)); /* the triggering side's reference */
  RP_CHECK(rp__spawn_task(rt, &s, pre, &done));
  RP_CHECK(rp_event_release(rt, pre)); /* the spawning side's */
  RP_CHECK(rp_event_trigger(rt, pre));
  rp__event_unref(rt, pre); /* the engine-side reference retained above */
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  /* done == NULL: nobody waits, drain does */
  RP_CHECK(rp__spawn_task(rt, &s, RP_NO_EVENT, NULL));
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(atomic_load(&runs), 3);
  th_destroy(rt);
}

Test(engine_ops, chain_of_spawns_runs_in_done_to_pre_order) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "seq", seq_task, NULL);
  seq_log *log = calloc(1, sizeof *log);
  cr_assert(log);
  enum { N = 300 };
  rp_event gate, prev;
  RP_CHECK(rp_event_create(rt, &gate)); /* holds the chain back */
  prev = gate;
  RP_CHECK(rp__event_retain(rt, gate));
  for (int i = 0; i < N; i++) {
    seq_args a = {log, i};
    /* alternate workers: each link crosses to the other one */
    rp_task_spawn s = {
        .proc = (rp_proc)(i % 2), .task = t, .args = &a, .args_size = sizeof a};
    rp_event done;
    RP_CHECK(rp__spawn_task(rt, &s, prev, &done));
    RP_CHECK(rp_event_release(rt, prev));
    prev = done;
  }
  cr_assert_eq(atomic_load(&log->next), 0, "the chain started early");
  RP_CHECK(rp_event_trigger(rt, gate));
  rp__event_unref(rt, gate); /* the engine-side reference retained above */
  RP_CHECK(rp_event_wait(rt, prev, 30 * SEC));
  RP_CHECK(rp_event_release(rt, prev));
  cr_assert_eq(atomic_load(&log->next), N);
  for (int i = 0; i < N; i++)
    cr_assert_eq(log->order[i], i, "position %d ran task %d", i, log->order[i]);
  th_destroy(rt);
  free(log);
}

Test(engine_ops, poisoned_pre_skips_the_task_and_poisons_done_alike) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  _Atomic int runs = 0, *rp = &runs;
  rp_task_spawn s = counter_spawn(t, 0, &rp);
  rp_event pre, done, ok, merged, done2;
  /* poisoned before the spawn, and while it waits */
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_event_poison(rt, pre, RP_EPEER));
  RP_CHECK(rp__spawn_task(rt, &s, pre, &done));
  RP_EXPECT(rp_event_wait(rt, done, 10 * SEC), RP_EPEER);
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp_event_create(rt, &ok));
  rp_event both[2] = {ok, pre};
  RP_CHECK(rp_event_merge(rt, both, 2, &merged));
  RP_CHECK(rp__spawn_task(rt, &s, merged, &done));
  /* a dependent of the skipped task is skipped too, same status */
  RP_CHECK(rp__spawn_task(rt, &s, done, &done2));
  RP_CHECK(rp_event_trigger(rt, ok));
  RP_CHECK(rp_event_poison(rt, pre, RP_ETIMEDOUT));
  RP_EXPECT(rp_event_wait(rt, done, 10 * SEC), RP_ETIMEDOUT);
  RP_EXPECT(rp_event_wait(rt, done2, 10 * SEC), RP_ETIMEDOUT);
  RP_EXPECT(rp_event_query(rt, done2), RP_ETIMEDOUT);
  cr_assert_eq(atomic_load(&runs), 0, "a task behind a poisoned pre ran");
  rp_event evs[] = {pre, ok, merged, done, done2};
  for (size_t i = 0; i < RP_ARRAY_LEN(evs); i++)
    RP_CHECK(rp_event_release(rt, evs[i]));
  th_destroy(rt);
}

Test(engine_ops, failing_task_poisons_done_and_its_dependents) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id f = reg(rt, "fail", fail_task, NULL);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  _Atomic int runs = 0, *rp = &runs;
  /* positive, no rp_status (waiters could not name it), or what a query
   * reads as "pending": RP_ETASK */
  rp_status codes[] = {RP_EIO, 7, (rp_status)-1000, RP_EAGAIN};
  rp_status want[] = {RP_EIO, RP_ETASK, RP_ETASK, RP_ETASK};
  for (int i = 0; i < 4; i++) {
    rp_task_spawn s = {
        .proc = 0, .task = f, .args = &codes[i], .args_size = sizeof codes[i]};
    rp_task_spawn c = counter_spawn(t, 0, &rp);
    rp_event d1, d2;
    RP_CHECK(rp__spawn_task(rt, &s, RP_NO_EVENT, &d1));
    RP_CHECK(rp__spawn_task(rt, &c, d1, &d2));
    RP_EXPECT(rp_event_wait(rt, d1, 10 * SEC), want[i]);
    RP_EXPECT(rp_event_wait(rt, d2, 10 * SEC), want[i]);
    RP_CHECK(rp_event_release(rt, d1));
    RP_CHECK(rp_event_release(rt, d2));
  }
  cr_assert_eq(atomic_load(&runs), 0);
  th_destroy(rt);
}

Test(engine_ops, task_context_has_copied_args_and_instance_views) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "look", look_task, NULL);
  rp_inst a, b;
  rp_rect ra = rp_rect_1d(0, 15), rb = rp_rect_2d(4, 7, -3, 2);
  RP_CHECK(rp_instance_create(rt, sysmem(rt), RP_F32, &ra, NULL, &a));
  RP_CHECK(rp_instance_create(rt, sysmem(rt), RP_I64, &rb, NULL, &b));
  rp_inst insts[2] = {a, b};
  unsigned char args[16];
  for (int i = 0; i < 16; i++)
    args[i] = (unsigned char)(i * 7 + 1);
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  rp_task_spawn s = {.proc = 1,
                     .task = t,
                     .args = args,
                     .args_size = sizeof args,
                     .insts = insts,
                     .ninsts = 2};
  RP_CHECK(rp__spawn_task(rt, &s, pre, &done));
  memset(args, 0xff, sizeof args); /* the spawn holds its own copy */
  memset(insts, 0, sizeof insts);
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  for (int i = 0; i < 16; i++)
    cr_assert_eq(g_seen.args[i], (unsigned char)(i * 7 + 1), "arg byte %d", i);
  cr_assert_eq(g_seen.proc, 1u);
  cr_assert_eq(g_seen.kind, RP_PROC_CPU);
  cr_assert_eq(g_seen.shard, 0u);
  cr_assert_eq(g_seen.shards, 1u);
  cr_assert_eq(g_seen.naccess, 2u);
  cr_assert_eq(g_seen.ptr0, rp_instance_ptr(rt, a));
  cr_assert_eq(g_seen.rect1.lo[1], -3);
  cr_assert_eq(g_seen.rect1.hi[0], 7);
  cr_assert_null(g_seen.ws);
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* Every bad spawn: its status, a detail naming the problem, *done left
 * alone, nothing run, nothing leaked (th_destroy's leak check in ASan
 * builds). */
Test(engine_ops, bad_task_spawns_return_precise_errors_and_change_nothing) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  rp_task_id g = reg(rt, "gpu_only", NULL, gpu_only_task);
  _Atomic int runs = 0, *rp = &runs;
  rp_inst dead;
  rp_rect r = rp_rect_1d(0, 3);
  RP_CHECK(rp_instance_create(rt, sysmem(rt), RP_F32, &r, NULL, &dead));
  RP_CHECK(rp_instance_free(rt, dead));
  rp_event stale;
  RP_CHECK(rp_event_create(rt, &stale));
  RP_CHECK(rp_event_trigger(rt, stale));
  RP_CHECK(rp_event_release(rt, stale));
  static char big[(1u << 20) + 1];
  rp_task_spawn ok = counter_spawn(t, 0, &rp);
  struct {
    const char *name;
    rp_task_spawn s;
    rp_event pre;
    rp_status want;
    const char *detail;
  } cases[] = {
      {"proc out of range",
       {.proc = 2, .task = t},
       RP_NO_EVENT,
       RP_EPROC,
       "processor 2 out of range (runtime has 2)"},
      {"RP_PROC_ANY",
       {.proc = RP_PROC_ANY, .task = t},
       RP_NO_EVENT,
       RP_EPROC,
       "out of range"},
      {"unknown task",
       {.proc = 0, .task = 99},
       RP_NO_EVENT,
       RP_ENOTASK,
       "task id 99 is not registered"},
      {"no CPU variant",
       {.proc = 0, .task = g},
       RP_NO_EVENT,
       RP_EPROC,
       "task 'gpu_only' has no CPU variant for processor 0"},
      {"NULL args",
       {.proc = 0, .task = t, .args_size = 8},
       RP_NO_EVENT,
       RP_EINVAL,
       "8 argument bytes, NULL args"},
      {"args too big",
       {.proc = 0, .task = t, .args = big, .args_size = sizeof big},
       RP_NO_EVENT,
       RP_ERANGE,
       "1048577 argument bytes (max 1048576)"},
      {"NULL insts",
       {.proc = 0, .task = t, .ninsts = 2},
       RP_NO_EVENT,
       RP_EINVAL,
       "2 instances, NULL array"},
      {"stale instance",
       {.proc = 0, .task = t, .insts = &dead, .ninsts = 1},
       RP_NO_EVENT,
       RP_ESTALE,
       "instance 0: instance"},
      {"stale pre", ok, stale, RP_ESTALE, "precondition event"},
  };
  for (size_t i = 0; i < RP_ARRAY_LEN(cases); i++) {
    rp_event done = {0x5a5a};
    rp_status st = rp__spawn_task(rt, &cases[i].s, cases[i].pre, &done);
    cr_assert_eq(st, cases[i].want, "%s: %s, expected %s (%s)", cases[i].name,
                 rp_status_name(st), rp_status_name(cases[i].want),
                 rp_error_detail());
    cr_assert(strstr(rp_error_detail(), cases[i].detail), "%s: detail '%s'",
              cases[i].name, rp_error_detail());
    cr_assert(strstr(rp_error_detail(), "rp__spawn_task"),
              "%s: detail '%s' does not name the call", cases[i].name,
              rp_error_detail());
    cr_assert_eq(done.id, 0x5a5a, "%s: *done was written", cases[i].name);
  }
  rp_event done;
  RP_EXPECT(rp__spawn_task(NULL, &ok, RP_NO_EVENT, &done), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "NULL runtime"), "%s", rp_error_detail());
  RP_EXPECT(rp__spawn_task(rt, NULL, RP_NO_EVENT, &done), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "NULL spawn"), "%s", rp_error_detail());
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(atomic_load(&runs), 0, "a refused spawn ran");
  /* the runtime is unharmed */
  RP_CHECK(rp__spawn_task(rt, &ok, RP_NO_EVENT, &done));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  cr_assert_eq(atomic_load(&runs), 1);
  th_destroy(rt);
}

/* ---- byte copies ---- */

enum { GUARD = 0xEE };

/* A buffer of n bytes filled with GUARD. */
static unsigned char *guarded(size_t n) {
  unsigned char *b = malloc(n);
  cr_assert(b);
  memset(b, GUARD, n);
  return b;
}

static unsigned char *pattern(size_t n, unsigned seed) {
  unsigned char *b = malloc(n);
  cr_assert(b);
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)((i * 131u + seed) % 251u);
  return b;
}

/* Checks dst (dst_bytes long) after a copy of c (pointers into dst/src):
 * copied rows equal the source rows, every other byte is still GUARD. */
static void check_copied(const unsigned char *dst, size_t dst_bytes,
                         const rp_copy_bytes *c) {
  size_t dp = c->dst_pitch ? c->dst_pitch : c->row_bytes;
  size_t sp = c->src_pitch ? c->src_pitch : c->row_bytes;
  const unsigned char *d0 = c->dst, *s0 = c->src;
  for (size_t i = 0; i < dst_bytes; i++) {
    ptrdiff_t off = (const unsigned char *)dst + i - d0;
    size_t row = off >= 0 ? (size_t)off / dp : 0;
    size_t col = off >= 0 ? (size_t)off % dp : 0;
    int inside = off >= 0 && row < c->rows && col < c->row_bytes;
    if (inside)
      cr_assert_eq(dst[i], s0[row * sp + col], "row %zu col %zu", row, col);
    else
      cr_assert_eq(dst[i], GUARD, "byte %zu outside the copy changed", i);
  }
}

static void copy_and_check(rp_runtime *rt, rp_proc where, size_t rows,
                           size_t row_bytes, size_t sp, size_t dp) {
  size_t src_bytes = (rows - 1) * (sp ? sp : row_bytes) + row_bytes + 64;
  size_t dst_bytes = (rows - 1) * (dp ? dp : row_bytes) + row_bytes + 96;
  unsigned char *src = pattern(src_bytes, (unsigned)(rows + row_bytes));
  unsigned char *dst = guarded(dst_bytes);
  rp_copy_bytes c = {.dst = dst + 32,
                     .dst_mem = sysmem(rt),
                     .src = src + 16,
                     .src_mem = sysmem(rt),
                     .rows = rows,
                     .row_bytes = row_bytes,
                     .src_pitch = sp,
                     .dst_pitch = dp};
  rp_event done;
  RP_CHECK(rp__spawn_copy(rt, &c, where, RP_NO_EVENT, &done));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  check_copied(dst, dst_bytes, &c);
  free(src);
  free(dst);
}

Test(engine_ops, contiguous_copies_land_and_touch_nothing_else) {
  rp_runtime *rt = th_cpu_runtime(2);
  copy_and_check(rt, 0, 1, 1, 0, 0);
  copy_and_check(rt, 1, 1, 4099, 0, 0);
  copy_and_check(rt, 0, 1, 1000, 1000, 1000);
  copy_and_check(rt, 1, 13, 24, 0, 0); /* rows back to back: dense */
  th_destroy(rt);
}

Test(engine_ops, strided_copies_follow_both_pitches) {
  rp_runtime *rt = th_cpu_runtime(2);
  copy_and_check(rt, 0, 17, 29, 53, 37); /* different pitches each side */
  copy_and_check(rt, 1, 8, 16, 16, 64);  /* dense source, strided dest */
  copy_and_check(rt, 0, 8, 16, 64, 0);   /* strided source, dense dest */
  copy_and_check(rt, 1, 1, 5, 9, 7);     /* one row: pitches unused */
  copy_and_check(rt, 0, 200, 3, 4, 1000);
  th_destroy(rt);
}

/* ---- every backend: copies on the backend's processor ---- */

/* The host side of a backend's copies: pinned memory on CUDA (the GPU's
 * stream copies it asynchronously), system memory on the CPU backend. */
static rp_mem host_mem(rp_runtime *rt) {
  rp_mem m;
  RP_CHECK(rp_mem_find(rt, TH_ON_CPU ? RP_MEM_SYSTEM : RP_MEM_PINNED, -1, &m));
  return m;
}

/* The memory of TH_BACKEND's processor p (system memory on the CPU
 * backend, the GPU's device memory on CUDA). */
static rp_mem local_mem(rp_runtime *rt, rp_proc p) {
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, p, &pi));
  return pi.local;
}

/* A buffer of n bytes in memory m, every byte GUARD (written through
 * rp__mem_copy: m may be device memory). */
static unsigned char *mem_guarded(rp_runtime *rt, rp_mem m, size_t n) {
  void *d;
  RP_CHECK(rp__mem_alloc(rt, m, n, 256, &d));
  unsigned char *h = guarded(n);
  RP_CHECK(rp__mem_copy(rt, m, d, RP_MEM_CALLER, h, n));
  free(h);
  return d;
}

/* n bytes at p in memory m, read back synchronously (malloc'd). */
static unsigned char *read_back(rp_runtime *rt, rp_mem m, const void *p,
                                size_t n) {
  unsigned char *h = malloc(n);
  cr_assert(h);
  RP_CHECK(rp__mem_copy(rt, RP_MEM_CALLER, h, m, p, n));
  return h;
}

/* One async copy on `where`, waited for. */
static void copy_on(rp_runtime *rt, rp_proc where, const rp_copy_bytes *c) {
  rp_event done;
  RP_CHECK(rp__spawn_copy(rt, c, where, RP_NO_EVENT, &done));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  RP_CHECK(rp_event_release(rt, done));
}

/* host (host_mem) -> the processor's memory (strided) -> host (strided
 * back into a dense buffer), all on the backend's processor (the GPU's
 * stream on CUDA); the processor's buffer outside the rows and the host
 * buffer outside the copy stay GUARD. */
static void round_trip(rp_runtime *rt, rp_mem hmem, size_t rows,
                       size_t row_bytes, size_t host_pitch, size_t dev_pitch) {
  rp_proc proc = th_backend_proc(rt);
  rp_mem local = local_mem(rt, proc);
  size_t src_bytes = (rows - 1) * host_pitch + row_bytes;
  size_t dev_bytes = (rows - 1) * dev_pitch + row_bytes + 64;
  size_t back_bytes = rows * row_bytes + 64;
  unsigned char *src, *back;
  RP_CHECK(rp__mem_alloc(rt, hmem, src_bytes, 64, (void **)&src));
  RP_CHECK(rp__mem_alloc(rt, hmem, back_bytes, 64, (void **)&back));
  for (size_t i = 0; i < src_bytes; i++)
    src[i] = (unsigned char)((i * 131u + rows) % 251u);
  memset(back, GUARD, back_bytes);
  unsigned char *dev = mem_guarded(rt, local, dev_bytes);
  rp_copy_bytes up = {.dst = dev + 32,
                      .dst_mem = local,
                      .src = src,
                      .src_mem = hmem,
                      .rows = rows,
                      .row_bytes = row_bytes,
                      .src_pitch = host_pitch,
                      .dst_pitch = dev_pitch};
  copy_on(rt, proc, &up);
  rp_copy_bytes down = {.dst = back + 16,
                        .dst_mem = hmem,
                        .src = dev + 32,
                        .src_mem = local,
                        .rows = rows,
                        .row_bytes = row_bytes,
                        .src_pitch = dev_pitch,
                        .dst_pitch = row_bytes};
  copy_on(rt, proc, &down);
  for (size_t r = 0; r < rows; r++)
    cr_assert_eq(
        memcmp(back + 16 + r * row_bytes, src + r * host_pitch, row_bytes), 0,
        "%s: row %zu (%zu x %zu)", TH_BACKEND_NAME, r, rows, row_bytes);
  for (size_t i = 0; i < back_bytes; i++)
    if (i < 16 || i >= 16 + rows * row_bytes)
      cr_assert_eq(back[i], GUARD, "host byte %zu outside the copy", i);
  /* the gaps in the processor's buffer: read it all back synchronously */
  unsigned char *all = read_back(rt, local, dev, dev_bytes);
  for (size_t i = 0; i < dev_bytes; i++) {
    size_t off = i - 32;
    int inside =
        i >= 32 && off / dev_pitch < rows && off % dev_pitch < row_bytes;
    if (!inside)
      cr_assert_eq(all[i], GUARD, "%s: byte %zu outside the copy",
                   TH_BACKEND_NAME, i);
  }
  free(all);
  rp__mem_free(rt, local, dev);
  rp__mem_free(rt, hmem, src);
  rp__mem_free(rt, hmem, back);
}

Test(engine_ops_backends, strided_copies_through_the_processors_memory) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 2);
  rp_mem sys = sysmem(rt), host = host_mem(rt);
  round_trip(rt, sys, 1, 4099, 4099, 4099); /* contiguous, pageable */
  round_trip(rt, host, 1, 65536, 65536, 65536);
  round_trip(rt, sys, 17, 29, 53, 37); /* strided both sides */
  round_trip(rt, host, 64, 100, 128, 512);
  th_destroy(rt);
}

/* A copy from host memory into the processor's memory gated on pre: it
 * copies nothing and does not complete until pre triggers, and reads the
 * source after (the source may change until then). rows x row_bytes,
 * pitch apart on both sides (0: dense); the source is `fill` in every byte
 * (-1: a pattern). */
static void copy_waits(rp_runtime *rt, size_t rows, size_t row_bytes,
                       size_t pitch, int fill) {
  rp_proc proc = th_backend_proc(rt);
  rp_mem local = local_mem(rt, proc), hmem = host_mem(rt);
  size_t bytes = (rows - 1) * (pitch ? pitch : row_bytes) + row_bytes;
  unsigned char *src;
  RP_CHECK(rp__mem_alloc(rt, hmem, bytes, 64, (void **)&src));
  if (fill < 0) {
    unsigned char *p = pattern(bytes, 3);
    memcpy(src, p, bytes);
    free(p);
  } else {
    memset(src, fill, bytes);
  }
  unsigned char *dst = mem_guarded(rt, local, bytes);
  rp_copy_bytes c = {.dst = dst,
                     .dst_mem = local,
                     .src = src,
                     .src_mem = hmem,
                     .rows = rows,
                     .row_bytes = row_bytes,
                     .src_pitch = pitch,
                     .dst_pitch = pitch};
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp__spawn_copy(rt, &c, proc, pre, &done));
  sleep_ms(30);
  RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
  unsigned char *back = read_back(rt, local, dst, bytes);
  for (size_t i = 0; i < bytes; i++)
    cr_assert_eq(back[i], GUARD, "%s: byte %zu copied before pre triggered",
                 TH_BACKEND_NAME, i);
  free(back);
  if (fill < 0)
    src[0] = 0x42; /* read by the copy, after pre */
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  back = read_back(rt, local, dst, bytes);
  rp_copy_bytes seen = c; /* the same copy, into the bytes read back */
  seen.dst = back;
  check_copied(back, bytes, &seen);
  if (fill < 0)
    cr_assert_eq(back[0], 0x42);
  else
    for (size_t i = 0; i < bytes; i++)
      cr_assert_eq(back[i], (unsigned char)fill, "byte %zu", i);
  free(back);
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, done));
  rp__mem_free(rt, local, dst);
  rp__mem_free(rt, hmem, src);
}

Test(engine_ops_backends, copy_waits_for_its_pre) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 2);
  copy_waits(rt, 4, 32, 64, -1); /* strided, the source changed late */
  copy_waits(rt, 1, 1024, 0, 0x5c);
  th_destroy(rt);
}

/* Fills its instance 0 with the byte in args: on a CPU worker, and on a
 * GPU's stream. */
static rp_status fill_byte_cpu(rp_task_ctx *ctx) {
  const rp_instance_info *in = rp_ctx_inst(ctx, 0);
  memset(in->ptr, *(const unsigned char *)rp_ctx_args(ctx, NULL), in->bytes);
  return RP_OK;
}

#ifdef REPRISE_HAVE_CUDA
static rp_status fill_byte_gpu(rp_task_ctx *ctx) {
  const rp_instance_info *in = rp_ctx_inst(ctx, 0);
  int v = *(const unsigned char *)rp_ctx_args(ctx, NULL);
  return rp__cuda_memset_async(rp_ctx_runtime(ctx), rp_ctx_stream(ctx), in->ptr,
                               v, in->bytes);
}
#endif

/* A task spawn on the backend's processor (through its stream on CUDA)
 * filling an instance in its memory, a copy to host memory after it, both
 * behind one pre; a poisoned pre skips the task. */
Test(engine_ops_backends, task_spawn_then_copy_complete_in_event_order) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 1);
  rp_proc proc = th_backend_proc(rt);
  rp_mem local = local_mem(rt, proc);
  rp_task_desc d = {0};
  d.name = "fill_byte";
  d.cpu_fn = fill_byte_cpu;
#ifdef REPRISE_HAVE_CUDA
  d.gpu_fn = fill_byte_gpu;
#endif
  d.flags = RP_TASK_STREAM_ORDERED;
  rp_task_id t;
  RP_CHECK(rp_task_register(rt, &d, &t));
  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, local, RP_U8, &r, NULL, &in));
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, in, &info));
  rp_mem hmem = host_mem(rt);
  unsigned char *back;
  RP_CHECK(rp__mem_alloc(rt, hmem, 4096, 64, (void **)&back));
  memset(back, GUARD, 4096);
  unsigned char byte = 0x3d;
  rp_task_spawn s = {.proc = proc,
                     .task = t,
                     .args = &byte,
                     .args_size = 1,
                     .insts = &in,
                     .ninsts = 1};
  rp_event pre, d1, d2;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp__spawn_task(rt, &s, pre, &d1));
  rp_copy_bytes c = {.dst = back,
                     .dst_mem = hmem,
                     .src = info.ptr,
                     .src_mem = local,
                     .rows = 1,
                     .row_bytes = 4096};
  RP_CHECK(rp__spawn_copy(rt, &c, proc, d1, &d2));
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, d2, 30 * SEC));
  RP_CHECK(rp_event_query(rt, d1));
  for (int i = 0; i < 4096; i++)
    cr_assert_eq(back[i], 0x3d, "%s: byte %d", TH_BACKEND_NAME, i);
  /* a poisoned pre skips the task too */
  rp_event bad, d3;
  RP_CHECK(rp_event_create(rt, &bad));
  RP_CHECK(rp__spawn_task(rt, &s, bad, &d3));
  RP_CHECK(rp_event_poison(rt, bad, RP_EIO));
  RP_EXPECT(rp_event_wait(rt, d3, 30 * SEC), RP_EIO);
  rp_event evs[] = {pre, d1, d2, bad, d3};
  for (size_t i = 0; i < RP_ARRAY_LEN(evs); i++)
    RP_CHECK(rp_event_release(rt, evs[i]));
  rp__mem_free(rt, hmem, back);
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

Test(engine_ops, copy_behind_a_poisoned_pre_copies_nothing) {
  rp_runtime *rt = th_cpu_runtime(1);
  unsigned char *src = pattern(64, 1), *dst = guarded(64);
  rp_copy_bytes c = {.dst = dst,
                     .dst_mem = sysmem(rt),
                     .src = src,
                     .src_mem = sysmem(rt),
                     .rows = 1,
                     .row_bytes = 64};
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp__spawn_copy(rt, &c, 0, pre, &done));
  RP_CHECK(rp_event_poison(rt, pre, RP_EIO));
  RP_EXPECT(rp_event_wait(rt, done, 10 * SEC), RP_EIO);
  for (size_t i = 0; i < 64; i++)
    cr_assert_eq(dst[i], GUARD, "byte %zu copied", i);
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, done));
  th_destroy(rt);
  free(src);
  free(dst);
}

/* A task fills a buffer, a copy moves it, a task checks it: ops chained by
 * events only, across both workers. */
static rp_status fill_task(rp_task_ctx *ctx) {
  unsigned char *b = *(unsigned char *const *)rp_ctx_args(ctx, NULL);
  for (int i = 0; i < 128; i++)
    b[i] = (unsigned char)(255 - i);
  return RP_OK;
}

Test(engine_ops, task_then_copy_then_task_by_events) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id fill = reg(rt, "fill", fill_task, NULL);
  rp_task_id cnt = reg(rt, "count", count_task, NULL);
  unsigned char *a = guarded(128), *b = guarded(128);
  _Atomic int runs = 0, *rp = &runs;
  rp_task_spawn s1 = {
      .proc = 0, .task = fill, .args = &a, .args_size = sizeof a};
  rp_event d1, d2, d3;
  RP_CHECK(rp__spawn_task(rt, &s1, RP_NO_EVENT, &d1));
  rp_copy_bytes c = {.dst = b,
                     .dst_mem = sysmem(rt),
                     .src = a,
                     .src_mem = sysmem(rt),
                     .rows = 1,
                     .row_bytes = 128};
  RP_CHECK(rp__spawn_copy(rt, &c, 1, d1, &d2));
  rp_task_spawn s3 = counter_spawn(cnt, 0, &rp);
  RP_CHECK(rp__spawn_task(rt, &s3, d2, &d3));
  RP_CHECK(rp_event_wait(rt, d3, 10 * SEC));
  for (int i = 0; i < 128; i++)
    cr_assert_eq(b[i], (unsigned char)(255 - i), "byte %d", i);
  cr_assert_eq(atomic_load(&runs), 1);
  RP_CHECK(rp_event_release(rt, d1));
  RP_CHECK(rp_event_release(rt, d2));
  RP_CHECK(rp_event_release(rt, d3));
  th_destroy(rt);
  free(a);
  free(b);
}

Test(engine_ops, bad_copies_return_precise_errors_and_change_nothing) {
  rp_runtime *rt = th_cpu_runtime(2);
  unsigned char *src = pattern(256, 5), *dst = guarded(256);
  rp_mem m = sysmem(rt);
  rp_copy_bytes ok = {.dst = dst,
                      .dst_mem = m,
                      .src = src,
                      .src_mem = m,
                      .rows = 2,
                      .row_bytes = 8,
                      .src_pitch = 16,
                      .dst_pitch = 16};
  rp_event stale;
  RP_CHECK(rp_event_create(rt, &stale));
  RP_CHECK(rp_event_trigger(rt, stale));
  RP_CHECK(rp_event_release(rt, stale));
  struct {
    const char *name;
    rp_copy_bytes c;
    rp_proc where;
    rp_event pre;
    rp_status want;
    const char *detail;
  } cases[] = {
      {"where out of range", ok, 2, RP_NO_EVENT, RP_EPROC,
       "processor 2 out of range (runtime has 2)"},
      {"RP_PROC_ANY", ok, RP_PROC_ANY, RP_NO_EVENT, RP_EPROC, "out of range"},
      {"NULL dst", ok, 0, RP_NO_EVENT, RP_EINVAL, "NULL dst pointer"},
      {"NULL src", ok, 0, RP_NO_EVENT, RP_EINVAL, "NULL src pointer"},
      {"zero rows", ok, 0, RP_NO_EVENT, RP_EINVAL,
       "0 rows of 8 bytes: nothing to copy"},
      {"zero row bytes", ok, 0, RP_NO_EVENT, RP_EINVAL,
       "2 rows of 0 bytes: nothing to copy"},
      {"src pitch below row", ok, 0, RP_NO_EVENT, RP_EINVAL,
       "src_pitch 7 is below row_bytes 8"},
      {"dst pitch below row", ok, 0, RP_NO_EVENT, RP_EINVAL,
       "dst_pitch 3 is below row_bytes 8"},
      {"dst memory out of range", ok, 0, RP_NO_EVENT, RP_EINVAL,
       "dst memory 9 out of range (runtime has 1)"},
      {"src memory out of range", ok, 0, RP_NO_EVENT, RP_EINVAL,
       "src memory 7 out of range"},
      {"overlap", ok, 0, RP_NO_EVENT, RP_EINVAL, "overlaps source"},
      {"extent overflows", ok, 0, RP_NO_EVENT, RP_ERANGE,
       "overflow the address space"},
      {"stale pre", ok, 0, stale, RP_ESTALE, "precondition event"},
  };
  cases[2].c.dst = NULL;
  cases[3].c.src = NULL;
  cases[4].c.rows = 0;
  cases[5].c.row_bytes = 0;
  cases[6].c.src_pitch = 7;
  cases[7].c.dst_pitch = 3;
  cases[8].c.dst_mem = 9;
  cases[9].c.src_mem = 7;
  cases[10].c.dst = src + 8; /* rows [8,16) and [24,32) vs [0,8), [16,24)
                                interleave; the ranges still overlap */
  cases[11].c.rows = SIZE_MAX / 8;
  for (size_t i = 0; i < RP_ARRAY_LEN(cases); i++) {
    rp_event done = {0x5a5a};
    rp_status st =
        rp__spawn_copy(rt, &cases[i].c, cases[i].where, cases[i].pre, &done);
    cr_assert_eq(st, cases[i].want, "%s: %s, expected %s (%s)", cases[i].name,
                 rp_status_name(st), rp_status_name(cases[i].want),
                 rp_error_detail());
    cr_assert(strstr(rp_error_detail(), cases[i].detail), "%s: detail '%s'",
              cases[i].name, rp_error_detail());
    cr_assert(strstr(rp_error_detail(), "rp__spawn_copy"),
              "%s: detail '%s' does not name the call", cases[i].name,
              rp_error_detail());
    cr_assert_eq(done.id, 0x5a5a, "%s: *done was written", cases[i].name);
  }
  rp_event done;
  RP_EXPECT(rp__spawn_copy(NULL, &ok, 0, RP_NO_EVENT, &done), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "NULL runtime"), "%s", rp_error_detail());
  RP_EXPECT(rp__spawn_copy(rt, NULL, 0, RP_NO_EVENT, &done), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "NULL copy"), "%s", rp_error_detail());
  RP_CHECK(rp_runtime_drain(rt));
  for (size_t i = 0; i < 256; i++)
    cr_assert_eq(dst[i], GUARD, "a refused copy wrote byte %zu", i);
  /* the runtime is unharmed */
  RP_CHECK(rp__spawn_copy(rt, &ok, 1, RP_NO_EVENT, &done));
  RP_CHECK(rp_event_wait(rt, done, 10 * SEC));
  RP_CHECK(rp_event_release(rt, done));
  check_copied(dst, 256, &ok);
  th_destroy(rt);
  free(src);
  free(dst);
}

/* ---- concurrency and teardown ---- */

enum { PER_THREAD = 3000, COPY_EVERY = 10 };

typedef struct spawner {
  rp_runtime *rt;
  rp_task_id task;
  _Atomic int *runs;
  unsigned char *src, *dst; /* this thread's copy buffers */
  unsigned seed;
  rp_status st;
} spawner;

/* Spawns PER_THREAD tasks: runs of chained ones (done -> pre) and
 * independent ones, on both workers, and a copy every COPY_EVERY, each
 * into its own slot of dst. */
static void *spawn_many(void *p) {
  spawner *s = p;
  _Atomic int *runs = s->runs;
  rp_event prev = RP_NO_EVENT;
  for (int i = 0; i < PER_THREAD && s->st == RP_OK; i++) {
    rp_task_spawn ts = {.proc = (rp_proc)((i + s->seed) % 2),
                        .task = s->task,
                        .args = &runs,
                        .args_size = sizeof runs};
    rp_event done;
    int chained = (i / 7) % 2;
    s->st = rp__spawn_task(s->rt, &ts, chained ? prev : RP_NO_EVENT, &done);
    if (s->st)
      break;
    rp_event_release(s->rt, prev);
    prev = done;
    if (i % COPY_EVERY == 0) {
      size_t slot = (size_t)(i / COPY_EVERY) * 16;
      rp_mem m = 0; /* system memory: the CPU backend's first */
      rp_copy_bytes c = {.dst = s->dst + slot,
                         .dst_mem = m,
                         .src = s->src + slot,
                         .src_mem = m,
                         .rows = 2,
                         .row_bytes = 8,
                         .src_pitch = 8,
                         .dst_pitch = 8};
      s->st = rp__spawn_copy(s->rt, &c, (rp_proc)(i % 2), prev, NULL);
    }
  }
  if (s->st == RP_OK)
    s->st = rp_event_wait(s->rt, prev, 60 * SEC);
  rp_event_release(s->rt, prev);
  return NULL;
}

Test(engine_ops, many_concurrent_spawns_from_two_host_threads, .timeout = 300) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  cr_assert_eq(sysmem(rt), 0u);
  _Atomic int runs = 0;
  size_t bytes = (PER_THREAD / COPY_EVERY) * 16;
  spawner sp[2];
  pthread_t th[2];
  for (int k = 0; k < 2; k++) {
    sp[k] = (spawner){rt,
                      t,
                      &runs,
                      pattern(bytes, 11u * (unsigned)k + 1),
                      guarded(bytes),
                      (unsigned)k,
                      RP_OK};
    cr_assert_eq(pthread_create(&th[k], NULL, spawn_many, &sp[k]), 0);
  }
  for (int k = 0; k < 2; k++)
    pthread_join(th[k], NULL);
  RP_CHECK(rp_runtime_drain(rt));
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(sp[k].st, RP_OK, "thread %d: %s (%s)", k,
                 rp_status_name(sp[k].st), rp_error_detail());
    cr_assert_eq(memcmp(sp[k].src, sp[k].dst, bytes), 0, "thread %d: copies",
                 k);
    free(sp[k].src);
    free(sp[k].dst);
  }
  cr_assert_eq(atomic_load(&runs), 2 * PER_THREAD);
  th_destroy(rt);
}

Test(engine_ops, destroy_cancels_ops_gated_on_untriggered_user_events) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg(rt, "count", count_task, NULL);
  _Atomic int runs = 0, *rp = &runs;
  rp_event never, d1;
  RP_CHECK(rp_event_create(rt, &never));
  rp_task_spawn s = counter_spawn(t, 0, &rp);
  RP_CHECK(rp__spawn_task(rt, &s, never, &d1));
  unsigned char *src = pattern(32, 2), *dst = guarded(32);
  rp_copy_bytes c = {.dst = dst,
                     .dst_mem = sysmem(rt),
                     .src = src,
                     .src_mem = sysmem(rt),
                     .rows = 1,
                     .row_bytes = 32};
  RP_CHECK(rp__spawn_copy(rt, &c, 1, d1, NULL));
  RP_CHECK(rp_event_release(rt, never));
  RP_CHECK(rp_event_release(rt, d1));
  th_destroy(rt); /* cancels `never` (RP_EBUSY): both ops complete */
  cr_assert_eq(atomic_load(&runs), 0);
  for (size_t i = 0; i < 32; i++)
    cr_assert_eq(dst[i], GUARD, "byte %zu copied", i);
  free(src);
  free(dst);
}

/* An error detail that quotes the current one (rp__err(st, "...: %s",
 * rp_error_detail())) reads it whole before writing: the arguments may
 * point into the detail's own buffer. */
Test(engine_ops, an_error_detail_may_quote_the_current_one) {
  rp_error_set(RP_EINVAL, "the inner reason, %d bytes long", 31);
  rp_status st = rp__err(RP_EUNUSABLE, "outer: %s", rp_error_detail());
  cr_assert_eq(st, RP_EUNUSABLE);
  cr_assert_str_eq(rp_error_detail(), "outer: the inner reason, 31 bytes long");
  char path[8] = "p.json";
  rp_error_set(RP_EIO, "cannot open");
  rp__err_prefix(RP_EIO, "%s (%s): ", path, rp_error_detail());
  cr_assert_str_eq(rp_error_detail(), "p.json (cannot open): cannot open");
}

/* A model of a machine (rp_runtime_create_model) has no devices and no
 * instance storage: it runs nothing, so a spawn or a copy on any of its
 * processors is refused before anything is armed, as its eager launches
 * are, and the task never runs. */
Test(engine_ops, a_model_of_a_machine_refuses_spawns_and_copies) {
  rp_machine_desc m = {.cpus = 1, .ngpus = 1, .gpu_device = {0}};
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_task_id t = reg(rt, "count", count_task, count_task);
  _Atomic int runs = 0, *rp = &runs;
  for (rp_proc p = 0; p < 2; p++) {
    rp_task_spawn s = counter_spawn(t, p, &rp);
    rp_event done = RP_NO_EVENT;
    RP_EXPECT(rp__spawn_task(rt, &s, RP_NO_EVENT, &done), RP_EUNSUPPORTED);
    cr_assert_eq(done.id, 0u, "processor %u: no event made", p);
    cr_assert(strstr(rp_error_detail(), "model"), "processor %u: %s", p,
              rp_error_detail());
    unsigned char src[16] = {1}, dst[16] = {0};
    rp_copy_bytes c = {.dst = dst,
                       .dst_mem = sysmem(rt),
                       .src = src,
                       .src_mem = sysmem(rt),
                       .rows = 1,
                       .row_bytes = sizeof src};
    RP_EXPECT(rp__spawn_copy(rt, &c, p, RP_NO_EVENT, &done), RP_EUNSUPPORTED);
    cr_assert(strstr(rp_error_detail(), "model"), "processor %u: %s", p,
              rp_error_detail());
    cr_assert_eq(dst[0], 0, "processor %u: bytes copied", p);
  }
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(atomic_load(&runs), 0, "a task ran on the model");
  th_destroy(rt);
}
