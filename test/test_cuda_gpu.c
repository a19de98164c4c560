/* test/test_cuda_gpu.c — the CUDA backend's primitives: discovery, access,
 * instances in GPU and pinned memory, the driver threads and their streams,
 * logical GPUs over physical ones. Every case skips with the reason when no
 * CUDA device answers (label "gpu"). */
#include "helpers.h"

#include "engine/engine.h"
#ifdef REPRISE_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

Test(cuda_gpu, discovers_gpu_processors_and_memories) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  cr_assert_eq(rp_runtime_backend(rt), RP_BACKEND_CUDA);
  cr_assert_str_eq(rp_runtime_backend_reason(rt), "");
  unsigned ngpu = 0;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_CPU) {
      cr_assert_eq(ngpu, 0u, "CPU processor %u after a GPU", p);
      continue;
    }
    cr_assert_eq(pi.device, (int)ngpu, "GPU processor %u: logical device", p);
    rp_mem_info mi;
    RP_CHECK(rp_mem_query(rt, pi.local, &mi));
    cr_assert_eq(mi.kind, RP_MEM_GPU, "GPU processor %u: local memory", p);
    cr_assert_eq(mi.device, pi.device, "GPU processor %u: memory device", p);
    rp_mem found;
    RP_CHECK(rp_mem_find(rt, RP_MEM_GPU, pi.device, &found));
    cr_assert_eq(found, pi.local);
    ngpu++;
  }
  cr_assert_geq(ngpu, 1u);
  rp_mem pinned;
  RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &pinned));
  rp_mem_info mi;
  RP_CHECK(rp_mem_query(rt, pinned, &mi));
  cr_assert_eq(mi.device, -1);
  th_destroy(rt);
}

Test(cuda_gpu, access_matrix) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  rp_proc gpu = first_gpu(rt);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, gpu, &gi));
  rp_mem sys, pinned;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &pinned));
  cr_assert(rp_proc_can_access(rt, gpu, gi.local), "GPU -> its memory");
  cr_assert(rp_proc_can_access(rt, gpu, pinned), "GPU -> pinned");
  cr_assert(!rp_proc_can_access(rt, gpu, sys), "GPU -> system memory");
  cr_assert(rp_proc_can_access(rt, 0, sys), "CPU -> system memory");
  cr_assert(rp_proc_can_access(rt, 0, pinned), "CPU -> pinned");
  cr_assert(!rp_proc_can_access(rt, 0, gi.local), "CPU -> GPU memory");
  th_destroy(rt);
}

/* Creates an f64 instance in mem, checks it reads as zeros, writes a
 * pattern, reads it back, frees it and checks the handle went stale. */
static void round_trip(rp_runtime *rt, rp_mem mem, const int64_t *strides) {
  rp_rect r = rp_rect_2d(10, 13, -2, 0); /* 4 x 3, non-zero origin */
  enum { N = 12 };
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, mem, RP_F64, &r, strides, &in));
  double buf[N];
  memset(buf, 0xff, sizeof buf);
  RP_CHECK(rp_instance_read(rt, in, buf, sizeof buf));
  for (int i = 0; i < N; i++)
    cr_assert_eq(buf[i], 0.0, "memory %u: fresh element %d is %g", mem, i,
                 buf[i]);
  for (int i = 0; i < N; i++)
    buf[i] = 1.5 * i - 3;
  RP_CHECK(rp_instance_write(rt, in, buf, sizeof buf));
  double back[N];
  RP_CHECK(rp_instance_read(rt, in, back, sizeof back));
  cr_assert_arr_eq(back, buf, sizeof buf, "memory %u: round trip", mem);
  RP_EXPECT(rp_instance_read(rt, in, back, sizeof back - 8), RP_ESHAPE);
  RP_CHECK(rp_instance_free(rt, in));
  RP_EXPECT(rp_instance_read(rt, in, back, sizeof back), RP_ESTALE);
}

Test(cuda_gpu, gpu_memory_instances_round_trip) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, first_gpu(rt), &gi));
  round_trip(rt, gi.local, NULL);
  const int64_t column_major[2] = {1, 4}; /* rows are not contiguous */
  round_trip(rt, gi.local, column_major);

  rp_rect r = rp_rect_1d(0, 1023);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, gi.local, RP_I32, &r, NULL, &in));
  cr_assert_null(rp_instance_ptr(rt, in), "GPU memory is not host-addressable");
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, in, &info));
  cr_assert_not_null(info.ptr, "the device pointer is reported");
  int32_t v[1024];
  for (int i = 0; i < 1024; i++)
    v[i] = i;
  RP_CHECK(rp_instance_write(rt, in, v, sizeof v));
  RP_CHECK(rp_instance_realloc(rt, &in));
  RP_CHECK(rp_instance_read(rt, in, v, sizeof v));
  for (int i = 0; i < 1024; i++)
    cr_assert_eq(v[i], 0, "reallocated storage is zero (element %d)", i);
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

Test(cuda_gpu, pinned_memory_instances_round_trip) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  rp_mem pinned;
  RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &pinned));
  round_trip(rt, pinned, NULL);
  rp_rect r = rp_rect_1d(0, 63);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, pinned, RP_U8, &r, NULL, &in));
  uint8_t *p = rp_instance_ptr(rt, in);
  cr_assert_not_null(p, "pinned memory is host-addressable");
  for (int i = 0; i < 64; i++)
    p[i] = (uint8_t)(3 * i);
  uint8_t back[64];
  RP_CHECK(rp_instance_read(rt, in, back, sizeof back));
  cr_assert_arr_eq(back, p, sizeof back);
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

Test(cuda_gpu, instances_left_alive_are_freed_with_the_runtime) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, first_gpu(rt), &gi));
  rp_mem pinned;
  RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &pinned));
  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, gi.local, RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, pinned, RP_F32, &r, NULL, &b));
  th_destroy(rt);
}

#ifdef REPRISE_HAVE_CUDA

/* A work item that records the thread and current device it ran with, and
 * fills a buffer with 0xab on its processor's stream. */
typedef struct probe {
  rp_work w;
  rp_runtime *rt;
  rp_proc proc;
  void *dst;
  size_t bytes;
  pthread_t thread;
  char name[16];
  int device;
  rp_status st;
  char detail[256];
  _Atomic int ran;
} probe;

static void probe_run(rp_work *w) {
  probe *pr = (probe *)w;
  pr->thread = pthread_self();
  pthread_getname_np(pr->thread, pr->name, sizeof pr->name);
  pr->device = rp__cuda_current_device();
  pr->st = rp__cuda_memset_async(pr->rt, rp__cuda_proc_stream(pr->rt, pr->proc),
                                 pr->dst, 0xab, pr->bytes);
  snprintf(pr->detail, sizeof pr->detail, "%s", rp_error_detail());
  atomic_store(&pr->ran, 1);
}

Test(cuda_gpu, driver_runs_work_on_its_thread_with_the_device_current) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 2);
  rp_proc gpu = first_gpu(rt);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, gpu, &gi));
  cr_assert_not_null(rp__cuda_proc_stream(rt, gpu));
  cr_assert_null(rp__cuda_proc_stream(rt, 0), "a CPU worker has no stream");
  cr_assert_eq(rp__cuda_proc_device(rt, 0), -1);
  int device = rp__cuda_proc_device(rt, gpu);
  cr_assert_geq(device, 0);

  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, gi.local, RP_U8, &r, NULL, &in));
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, in, &info));
  probe *pr = calloc(1, sizeof *pr);
  cr_assert_not_null(pr);
  pr->w.run = probe_run;
  pr->rt = rt;
  pr->proc = gpu;
  pr->dst = info.ptr;
  pr->bytes = info.bytes;
  pr->device = -2;
  rp__proc_enqueue(rt, gpu, &pr->w);
  /* drain: the driver queue empties, then the device work completes */
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert(atomic_load(&pr->ran), "the work item did not run");
  cr_assert(!pthread_equal(pr->thread, pthread_self()),
            "the work item ran on the enqueuing thread");
  char want[16];
  snprintf(want, sizeof want, "rp-gpu-%d", gi.device);
  cr_assert_str_eq(pr->name, want, "ran on thread '%s'", pr->name);
  cr_assert_eq(pr->device, device, "device %d current, expected %d", pr->device,
               device);
  cr_assert_eq(pr->st, RP_OK, "memset on the processor's stream: %s (%s)",
               rp_status_name(pr->st), pr->detail);
  uint8_t *back = malloc(info.bytes);
  cr_assert_not_null(back);
  RP_CHECK(rp_instance_read(rt, in, back, info.bytes));
  for (size_t i = 0; i < info.bytes; i++)
    cr_assert_eq(back[i], 0xab, "byte %zu is %#x", i, back[i]);
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
  free(back);
  free(pr);
}

enum { FIFO_ITEMS = 2000 };

typedef struct fifo_item {
  rp_work w;
  int *log;
  int *n; /* written by the driver thread only */
  int index;
} fifo_item;

static void fifo_run(rp_work *w) {
  fifo_item *it = (fifo_item *)w;
  it->log[(*it->n)++] = it->index;
}

Test(cuda_gpu, driver_queue_runs_in_order) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc gpu = first_gpu(rt);
  int *log = calloc(FIFO_ITEMS, sizeof *log);
  int n = 0;
  fifo_item *items = calloc(FIFO_ITEMS, sizeof *items);
  cr_assert(log && items);
  for (int i = 0; i < FIFO_ITEMS; i++) {
    items[i] = (fifo_item){.w.run = fifo_run, .log = log, .n = &n, .index = i};
    rp__proc_enqueue(rt, gpu, &items[i].w);
  }
  RP_CHECK(rp_runtime_drain(rt));
  cr_assert_eq(n, FIFO_ITEMS);
  for (int i = 0; i < FIFO_ITEMS; i++)
    cr_assert_eq(log[i], i, "item %d ran at position %d", log[i], i);
  th_destroy(rt);
  free(items);
  free(log);
}

static void set_flag(void *arg) {
  atomic_store((_Atomic int *)arg, 1);
}

Test(cuda_gpu, streams_events_and_host_functions) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc gpu = first_gpu(rt);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, gpu, &gi));
  void *s = NULL, *ev = NULL;
  RP_EXPECT(rp__cuda_stream_create(rt, 0, &s), RP_EPROC);
  RP_EXPECT(rp__cuda_event_create(rt, 0, &ev), RP_EPROC);
  cr_assert(s == NULL && ev == NULL);
  RP_CHECK(rp__cuda_stream_create(rt, gpu, &s));
  RP_CHECK(rp__cuda_event_create(rt, gpu, &ev));

  rp_rect r = rp_rect_1d(0, 1 << 20);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, gi.local, RP_U8, &r, NULL, &in));
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, in, &info));
  /* The processor's stream fills the buffer; the extra stream waits for it
   * on the device, then runs a host function. */
  void *ps = rp__cuda_proc_stream(rt, gpu);
  RP_CHECK(rp__cuda_memset_async(rt, ps, info.ptr, 7, info.bytes));
  RP_CHECK(rp__cuda_event_record(rt, ev, ps));
  RP_CHECK(rp__cuda_stream_wait_event(rt, s, ev));
  _Atomic int flag = 0;
  RP_CHECK(rp__cuda_launch_host_func(rt, s, set_flag, &flag));
  RP_CHECK(rp__cuda_stream_sync(rt, s));
  cr_assert(atomic_load(&flag), "host function did not run before the sync");
  uint8_t *back = malloc(info.bytes);
  cr_assert_not_null(back);
  RP_CHECK(rp_instance_read(rt, in, back, info.bytes));
  for (size_t i = 0; i < info.bytes; i++)
    cr_assert_eq(back[i], 7, "byte %zu is %#x", i, back[i]);
  free(back);
  RP_CHECK(rp__cuda_event_destroy(rt, ev));
  RP_CHECK(rp__cuda_stream_destroy(rt, s));
  RP_CHECK(rp__cuda_stream_destroy(rt, NULL));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

Test(cuda_gpu, cuda_failure_is_a_status_with_detail) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  void *ps = rp__cuda_proc_stream(rt, first_gpu(rt));
  /* Recording a NULL event is a plain (non-sticky) CUDA error. */
  RP_EXPECT(rp__cuda_event_record(rt, NULL, ps), RP_EBACKEND);
  const char *d = rp_error_detail();
  cr_assert(strstr(d, "cudaEventRecord") && strstr(d, "cudaError"),
            "detail names the call and the CUDA error: '%s'", d);
  /* ...which leaves the runtime usable */
  rp_mem pinned;
  RP_CHECK(rp_mem_find(rt, RP_MEM_PINNED, -1, &pinned));
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, pinned, RP_F32, &r, NULL, &in));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

static unsigned count_gpus(const rp_runtime *rt) {
  unsigned n = 0;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    n += pi.kind == RP_PROC_GPU;
  }
  return n;
}

static rp_runtime *cuda_runtime_with_gpus(unsigned gpus) {
  th_need_gpu();
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CUDA;
  cfg.cpus = 2;
  cfg.gpus = gpus;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create(&cfg, &rt));
  return rt;
}

Test(cuda_gpu, logical_gpus_beyond_physical_map_round_robin) {
  rp_runtime *one = cuda_runtime_with_gpus(0);
  unsigned ndev = count_gpus(one); /* one logical GPU per physical device */
  th_destroy(one);
  unsigned n = ndev + 1;
  rp_runtime *rt = cuda_runtime_with_gpus(n);
  cr_assert_eq(count_gpus(rt), n, "gpus = %u gives %u GPU processors", n,
               count_gpus(rt));
  rp_proc p0 = first_gpu(rt);
  for (unsigned i = 0; i < n; i++) {
    rp_proc p = p0 + i;
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    cr_assert_eq(pi.kind, RP_PROC_GPU);
    cr_assert_eq(pi.device, (int)i);
    cr_assert_eq(rp__cuda_proc_device(rt, p), (int)(i % ndev), "logical GPU %u",
                 i);
    /* the public query says the same (the lowering groups by it) */
    cr_assert_eq(pi.physical, (int)(i % ndev), "logical GPU %u: physical %d", i,
                 pi.physical);
    /* each logical GPU has its own memory, reachable only from itself */
    for (unsigned j = 0; j < n; j++) {
      rp_proc_info pj;
      RP_CHECK(rp_proc_query(rt, p0 + j, &pj));
      cr_assert_eq(rp_proc_can_access(rt, p, pj.local), i == j,
                   "GPU %u -> memory of GPU %u", i, j);
    }
    rp_rect r = rp_rect_1d(0, 255);
    rp_inst in;
    RP_CHECK(rp_instance_create(rt, pi.local, RP_I64, &r, NULL, &in));
    int64_t v[256];
    for (int k = 0; k < 256; k++)
      v[k] = (int64_t)i * 1000 + k;
    RP_CHECK(rp_instance_write(rt, in, v, sizeof v));
    int64_t back[256];
    RP_CHECK(rp_instance_read(rt, in, back, sizeof back));
    cr_assert_arr_eq(back, v, sizeof v, "logical GPU %u", i);
    RP_CHECK(rp_instance_free(rt, in));
  }
  th_destroy(rt);
}

#endif /* REPRISE_HAVE_CUDA */
