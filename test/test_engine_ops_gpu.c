/* test/test_engine_ops_gpu.c — the engine's low-level operations on a GPU
 * processor: strided copies on the GPU's stream (host -> device -> host,
 * pageable and pinned), copies after their precondition, a GPU task spawn
 * completing through its stream, and the access rules. The CPU cases are
 * in test_engine_ops.c. Every case skips with the reason when no CUDA
 * device answers (label "gpu"). */
#include "helpers.h"

#include "engine/engine.h"
#ifdef REPRISE_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEC 1000000000ll

enum { GUARD = 0xEE };

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000l};
  nanosleep(&ts, NULL);
}

/* The first GPU processor of rt (asserts there is one). */
static rp_proc first_gpu(const rp_runtime *rt) {
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_GPU)
      return p;
  }
  cr_assert_fail("the CUDA runtime has no GPU processor");
  return 0;
}

static rp_mem mem_of(rp_runtime *rt, rp_mem_kind kind, int device) {
  rp_mem m;
  RP_CHECK(rp_mem_find(rt, kind, device, &m));
  return m;
}

/* A device buffer of n bytes, every byte GUARD. */
static void *device_guarded(rp_runtime *rt, rp_mem gmem, size_t n) {
  void *d;
  RP_CHECK(rp__mem_alloc(rt, gmem, n, 256, &d));
  unsigned char *h = malloc(n);
  cr_assert(h);
  memset(h, GUARD, n);
  RP_CHECK(rp__mem_copy(rt, gmem, d, RP_MEM_CALLER, h, n));
  free(h);
  return d;
}

/* One async copy on `where`, waited for. */
static void copy_on(rp_runtime *rt, rp_proc where, const rp_copy_bytes *c) {
  rp_event done;
  RP_CHECK(rp__spawn_copy(rt, c, where, RP_NO_EVENT, &done));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  RP_CHECK(rp_event_release(rt, done));
}

/* host (pageable src or pinned) -> device (strided) -> host (strided back
 * into a dense buffer), all on the GPU's stream; the device buffer outside
 * the rows and the host buffer outside the copy stay GUARD. */
static void round_trip(rp_runtime *rt, rp_mem host_mem, size_t rows,
                       size_t row_bytes, size_t host_pitch, size_t dev_pitch) {
  rp_proc gpu = first_gpu(rt);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, gpu, &gi));
  size_t src_bytes = (rows - 1) * host_pitch + row_bytes;
  size_t dev_bytes = (rows - 1) * dev_pitch + row_bytes + 64;
  size_t back_bytes = rows * row_bytes + 64;
  unsigned char *src, *back;
  RP_CHECK(rp__mem_alloc(rt, host_mem, src_bytes, 64, (void **)&src));
  RP_CHECK(rp__mem_alloc(rt, host_mem, back_bytes, 64, (void **)&back));
  for (size_t i = 0; i < src_bytes; i++)
    src[i] = (unsigned char)((i * 131u + rows) % 251u);
  memset(back, GUARD, back_bytes);
  unsigned char *dev = device_guarded(rt, gi.local, dev_bytes);
  rp_copy_bytes up = {.dst = dev + 32,
                      .dst_mem = gi.local,
                      .src = src,
                      .src_mem = host_mem,
                      .rows = rows,
                      .row_bytes = row_bytes,
                      .src_pitch = host_pitch,
                      .dst_pitch = dev_pitch};
  copy_on(rt, gpu, &up);
  rp_copy_bytes down = {.dst = back + 16,
                        .dst_mem = host_mem,
                        .src = dev + 32,
                        .src_mem = gi.local,
                        .rows = rows,
                        .row_bytes = row_bytes,
                        .src_pitch = dev_pitch,
                        .dst_pitch = row_bytes};
  copy_on(rt, gpu, &down);
  for (size_t r = 0; r < rows; r++)
    cr_assert_eq(
        memcmp(back + 16 + r * row_bytes, src + r * host_pitch, row_bytes), 0,
        "row %zu (%zu x %zu)", r, rows, row_bytes);
  for (size_t i = 0; i < back_bytes; i++)
    if (i < 16 || i >= 16 + rows * row_bytes)
      cr_assert_eq(back[i], GUARD, "host byte %zu outside the copy", i);
  /* the device gaps: read the whole buffer back synchronously */
  unsigned char *all = malloc(dev_bytes);
  cr_assert(all);
  RP_CHECK(rp__mem_copy(rt, RP_MEM_CALLER, all, gi.local, dev, dev_bytes));
  for (size_t i = 0; i < dev_bytes; i++) {
    size_t off = i - 32;
    int inside =
        i >= 32 && off / dev_pitch < rows && off % dev_pitch < row_bytes;
    if (!inside)
      cr_assert_eq(all[i], GUARD, "device byte %zu outside the copy", i);
  }
  free(all);
  rp__mem_free(rt, gi.local, dev);
  rp__mem_free(rt, host_mem, src);
  rp__mem_free(rt, host_mem, back);
}

Test(engine_ops_gpu, strided_copies_on_the_gpu_stream) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  rp_mem sys = mem_of(rt, RP_MEM_SYSTEM, -1);
  rp_mem pinned = mem_of(rt, RP_MEM_PINNED, -1);
  round_trip(rt, sys, 1, 4099, 4099, 4099); /* contiguous, pageable */
  round_trip(rt, pinned, 1, 65536, 65536, 65536);
  round_trip(rt, sys, 17, 29, 53, 37); /* strided both sides */
  round_trip(rt, pinned, 64, 100, 128, 512);
  th_destroy(rt);
}

Test(engine_ops_gpu, gpu_copy_waits_for_its_pre) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  rp_proc gpu = first_gpu(rt);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, gpu, &gi));
  rp_mem pinned = mem_of(rt, RP_MEM_PINNED, -1);
  unsigned char *src;
  RP_CHECK(rp__mem_alloc(rt, pinned, 1024, 64, (void **)&src));
  memset(src, 0x5c, 1024);
  unsigned char *dev = device_guarded(rt, gi.local, 1024);
  rp_copy_bytes c = {.dst = dev,
                     .dst_mem = gi.local,
                     .src = src,
                     .src_mem = pinned,
                     .rows = 1,
                     .row_bytes = 1024};
  rp_event pre, done;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp__spawn_copy(rt, &c, gpu, pre, &done));
  sleep_ms(30);
  RP_EXPECT(rp_event_query(rt, done), RP_EAGAIN);
  unsigned char back[1024];
  RP_CHECK(rp__mem_copy(rt, RP_MEM_CALLER, back, gi.local, dev, 1024));
  for (int i = 0; i < 1024; i++)
    cr_assert_eq(back[i], GUARD, "byte %d copied before pre triggered", i);
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, done, 30 * SEC));
  RP_CHECK(rp__mem_copy(rt, RP_MEM_CALLER, back, gi.local, dev, 1024));
  for (int i = 0; i < 1024; i++)
    cr_assert_eq(back[i], 0x5c, "byte %d", i);
  RP_CHECK(rp_event_release(rt, pre));
  RP_CHECK(rp_event_release(rt, done));
  rp__mem_free(rt, gi.local, dev);
  rp__mem_free(rt, pinned, src);
  th_destroy(rt);
}

Test(engine_ops_gpu, cpu_worker_cannot_copy_device_memory) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, first_gpu(rt), &gi));
  void *dev;
  RP_CHECK(rp__mem_alloc(rt, gi.local, 64, 256, &dev));
  unsigned char host[64] = {0};
  rp_copy_bytes c = {.dst = dev,
                     .dst_mem = gi.local,
                     .src = host,
                     .src_mem = mem_of(rt, RP_MEM_SYSTEM, -1),
                     .rows = 1,
                     .row_bytes = 64};
  rp_event done = {0x5a5a};
  RP_EXPECT(rp__spawn_copy(rt, &c, 0, RP_NO_EVENT, &done), RP_EACCESS);
  cr_assert(strstr(rp_error_detail(), "not addressable from CPU worker 0"),
            "%s", rp_error_detail());
  cr_assert_eq(done.id, 0x5a5a);
  rp__mem_free(rt, gi.local, dev);
  th_destroy(rt);
}

#ifdef REPRISE_HAVE_CUDA

/* GPU variant: fills its instance 0 with the byte in args on the stream. */
static rp_status gpu_fill(rp_task_ctx *ctx) {
  const rp_instance_info *in = rp_ctx_inst(ctx, 0);
  int v = *(const unsigned char *)rp_ctx_args(ctx, NULL);
  return rp__cuda_memset_async(rp_ctx_runtime(ctx), rp_ctx_stream(ctx), in->ptr,
                               v, in->bytes);
}

Test(engine_ops_gpu, gpu_task_spawn_completes_through_its_stream) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc gpu = first_gpu(rt);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, gpu, &gi));
  rp_task_desc d = {0};
  d.name = "gpu_fill";
  d.gpu_fn = gpu_fill;
  d.flags = RP_TASK_STREAM_ORDERED;
  rp_task_id t;
  RP_CHECK(rp_task_register(rt, &d, &t));
  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, gi.local, RP_U8, &r, NULL, &in));
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, in, &info));
  rp_mem pinned = mem_of(rt, RP_MEM_PINNED, -1);
  unsigned char *back;
  RP_CHECK(rp__mem_alloc(rt, pinned, 4096, 64, (void **)&back));
  unsigned char byte = 0x3d;
  rp_task_spawn s = {.proc = gpu,
                     .task = t,
                     .args = &byte,
                     .args_size = 1,
                     .insts = &in,
                     .ninsts = 1};
  rp_event pre, d1, d2;
  RP_CHECK(rp_event_create(rt, &pre));
  RP_CHECK(rp__spawn_task(rt, &s, pre, &d1));
  rp_copy_bytes c = {.dst = back,
                     .dst_mem = pinned,
                     .src = info.ptr,
                     .src_mem = gi.local,
                     .rows = 1,
                     .row_bytes = 4096};
  RP_CHECK(rp__spawn_copy(rt, &c, gpu, d1, &d2));
  RP_CHECK(rp_event_trigger(rt, pre));
  RP_CHECK(rp_event_wait(rt, d2, 30 * SEC));
  RP_CHECK(rp_event_query(rt, d1));
  for (int i = 0; i < 4096; i++)
    cr_assert_eq(back[i], 0x3d, "byte %d", i);
  /* a poisoned pre skips the GPU task too */
  rp_event bad, d3;
  RP_CHECK(rp_event_create(rt, &bad));
  RP_CHECK(rp__spawn_task(rt, &s, bad, &d3));
  RP_CHECK(rp_event_poison(rt, bad, RP_EIO));
  RP_EXPECT(rp_event_wait(rt, d3, 30 * SEC), RP_EIO);
  rp_event evs[] = {pre, d1, d2, bad, d3};
  for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
    RP_CHECK(rp_event_release(rt, evs[i]));
  rp__mem_free(rt, pinned, back);
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

#endif
