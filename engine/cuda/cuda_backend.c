/* engine/cuda/cuda_backend.c — the CUDA backend: one processor per logical
 * GPU, each with a driver host thread that drains an in-order queue
 * (engine/queue.h, as the CPU workers do) with the GPU's device current and
 * enqueues device work on the GPU's non-blocking stream; one GPU memory per
 * logical GPU; one pinned host memory shared by all.
 *
 * Logical GPUs map round-robin onto physical devices (logical i runs on
 * device i % ndev), so multi-device lowering can be exercised on one GPU.
 *
 * Lifetime: init probes the devices (RP_ENODEV when none answers, without
 * printing), registers processors and memories, creates the streams, starts
 * the drivers; any failure unwinds in reverse and leaves the runtime's
 * processor and memory tables as they were. fini drains, stops the drivers
 * and destroys the streams; it does not reset the devices (other users of
 * CUDA in the process keep their state). */
#include "../engine_impl.h"
#include "../queue.h"
#include "cuda_backend.h"
#include "../cuda_check.h"

#include <sched.h>
#include <string.h>

/* Alignment cudaMalloc guarantees (the CUDA programming guide: at least 256
 * bytes); cudaHostAlloc returns whole pages. Larger requests are refused
 * rather than over-allocated, since mem_free receives only the pointer. */
#define RP_CUDA_DEVICE_ALIGN 256u
#define RP_CUDA_PINNED_ALIGN 4096u

typedef struct cuda_gpu {
  rp_queue q; /* the driver's in-order queue */
  pthread_t thread;
  unsigned index;      /* logical GPU */
  int device;          /* physical CUDA device */
  cudaStream_t stream; /* eager work; non-blocking */
  rp_mem mem;          /* its GPU memory */
  struct cuda_state *cs;
} cuda_gpu;

typedef struct cuda_state {
  rp_runtime *rt;
  cuda_gpu *gpus;
  unsigned n;       /* logical GPUs */
  unsigned running; /* driver threads started */
  int ndev;         /* physical devices */
  rp_mem pinned;
  _Atomic int stop;
  _Atomic uint64_t pending; /* items pushed and not yet finished */
} cuda_state;

/* ---- current device ---- */

/* Makes dev current on the calling thread; *prev receives the device to
 * restore with dev_leave. */
static rp_status dev_enter(rp_runtime *rt, int dev, int *prev) {
  RP_CUDA_TRY(rt, cudaGetDevice(prev));
  if (*prev != dev)
    RP_CUDA_TRY(rt, cudaSetDevice(dev));
  return RP_OK;
}

static void dev_leave(int dev, int prev) {
  if (prev != dev && cudaSetDevice(prev) != cudaSuccess)
    (void)cudaGetLastError(); /* the caller's device is gone: keep ours */
}

/* ---- driver threads ---- */

static void *driver_main(void *arg) {
  cuda_gpu *g = arg;
  cuda_state *cs = g->cs;
  char name[16];
  snprintf(name, sizeof name, "rp-gpu-%u", g->index);
  pthread_setname_np(pthread_self(), name);
  /* Every item runs with the processor's device current; items leave it so
   * (a task that switches devices must switch back). init already made this
   * device current once, so a failure here means the device was lost. (NULL
   * runtime in the check: init may not have published the state yet.) */
  if (RP_CUDA(NULL, cudaSetDevice(g->device)) != RP_OK)
    rp__runtime_set_unusable(cs->rt, rp_error_detail());
  rp_backoff idle = RP_BACKOFF_INIT;
  while (!atomic_load_explicit(&cs->stop, memory_order_acquire)) {
    rp_work *item = rp__queue_pop(&g->q);
    if (item) {
      item->run(item);
      /* release: the item's effects happen before a drainer sees 0 */
      atomic_fetch_sub_explicit(&cs->pending, 1, memory_order_release);
      idle = (rp_backoff)RP_BACKOFF_INIT;
      continue;
    }
    if (rp__backoff(&idle))
      continue;
    /* Sleep: announce, re-check what a producer could have published before
     * seeing the announcement, then wait for a wake (see engine/queue.h). */
    uint32_t seq = rp__queue_sleep_begin(&g->q);
    if (rp__queue_nonempty(&g->q) ||
        atomic_load_explicit(&cs->stop, memory_order_acquire)) {
      rp__queue_sleep_end(&g->q);
      idle = (rp_backoff)RP_BACKOFF_INIT;
      continue;
    }
    rp__queue_sleep_wait(&g->q, seq);
    rp__queue_sleep_end(&g->q);
    idle = (rp_backoff)RP_BACKOFF_INIT;
  }
  return NULL;
}

/* Stops and joins the running drivers. Their queues must be empty. */
static void stop_drivers(cuda_state *cs) {
  /* release: pairs with the drivers' acquire loads of stop */
  atomic_store_explicit(&cs->stop, 1, memory_order_release);
  for (unsigned i = 0; i < cs->running; i++) {
    rp__queue_kick(&cs->gpus[i].q);
    pthread_join(cs->gpus[i].thread, NULL);
  }
  cs->running = 0;
}

static rp_status start_drivers(cuda_state *cs) {
  for (unsigned i = 0; i < cs->n; i++) {
    int rc =
        pthread_create(&cs->gpus[i].thread, NULL, driver_main, &cs->gpus[i]);
    if (rc != 0) {
      stop_drivers(cs);
      return rp__err(RP_ENOMEM,
                     "CUDA backend: cannot start the driver thread of GPU "
                     "%u: %s",
                     i, strerror(rc));
    }
    cs->running = i + 1;
  }
  return RP_OK;
}

/* Waits until every item pushed to a driver so far has run. */
static void wait_queues(cuda_state *cs) {
  while (atomic_load_explicit(&cs->pending, memory_order_acquire) != 0)
    sched_yield();
}

/* ---- init / fini ---- */

static rp_status probe_devices(int *ndev) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rp__err(RP_ENODEV,
                   "no CUDA device answers: cudaGetDeviceCount: %s (%s)",
                   cudaGetErrorString(e), cudaGetErrorName(e));
  }
  if (n < 1)
    return rp__err(RP_ENODEV, "no CUDA device answers: cudaGetDeviceCount "
                              "found no device");
  *ndev = n;
  return RP_OK;
}

/* Makes each physical device in use current once, which creates its primary
 * context: a device that is present but cannot be used (exclusive mode, lost)
 * says so here, as RP_ENODEV, before anything was registered. */
static rp_status open_devices(cuda_state *cs) {
  int used = (int)cs->n < cs->ndev ? (int)cs->n : cs->ndev;
  for (int d = 0; d < used; d++) {
    int prev;
    rp_status st = dev_enter(NULL, d, &prev);
    if (st != RP_OK)
      return rp__err_prefix(RP_ENODEV, "CUDA device %d does not answer: ", d);
    st = RP_CUDA(NULL, cudaFree(NULL)); /* forces context creation */
    dev_leave(d, prev);
    if (st != RP_OK)
      return rp__err_prefix(RP_ENODEV, "CUDA device %d does not answer: ", d);
  }
  return RP_OK;
}

/* Memories first (pinned, then one per GPU), then one processor per GPU
 * whose local memory is its GPU memory. The caller rolls back on failure. */
static rp_status register_all(rp_runtime *rt, cuda_state *cs) {
  rp_status st = rp__add_mem(rt, &(rp_mem_info){RP_MEM_PINNED, -1},
                             &rp__cuda_backend, 1, &cs->pinned);
  for (unsigned i = 0; st == RP_OK && i < cs->n; i++) {
    cuda_gpu *g = &cs->gpus[i];
    st = rp__add_mem(rt, &(rp_mem_info){RP_MEM_GPU, (int)i}, &rp__cuda_backend,
                     0, &g->mem);
    if (st == RP_OK)
      st = rp__add_proc(rt,
                        &(rp_proc_info){RP_PROC_GPU, (int)i, g->mem, g->device},
                        &rp__cuda_backend, i, NULL);
  }
  if (st)
    return rp__err_prefix(st, "CUDA backend with %u logical GPUs: ", cs->n);
  return RP_OK;
}

static void unregister_all(rp_runtime *rt, unsigned nprocs, unsigned nmems) {
  memset(&rt->procs[nprocs], 0, (rt->nprocs - nprocs) * sizeof rt->procs[0]);
  memset(&rt->mems[nmems], 0, (rt->nmems - nmems) * sizeof rt->mems[0]);
  rt->nprocs = nprocs;
  rt->nmems = nmems;
}

static void destroy_streams(cuda_state *cs) {
  for (unsigned i = 0; i < cs->n; i++)
    if (cs->gpus[i].stream) {
      rp__stream_hook_call(cs->gpus[i].stream, 0);
      /* fini cannot report; a sticky error still marks the runtime */
      (void)RP_CUDA(cs->rt, cudaStreamDestroy(cs->gpus[i].stream));
      cs->gpus[i].stream = NULL;
    }
}

static rp_status create_streams(cuda_state *cs) {
  for (unsigned i = 0; i < cs->n; i++) {
    cuda_gpu *g = &cs->gpus[i];
    int prev;
    rp_status st = dev_enter(NULL, g->device, &prev);
    if (st == RP_OK) {
      st = RP_CUDA(
          NULL, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
      if (st == RP_OK)
        rp__stream_hook_call(g->stream, 1);
      dev_leave(g->device, prev);
    }
    if (st) {
      g->stream = NULL;
      destroy_streams(cs);
      return rp__err_prefix(st, "CUDA backend, GPU %u: ", i);
    }
  }
  return RP_OK;
}

static cuda_state *state_new(rp_runtime *rt, unsigned n, int ndev) {
  cuda_state *cs = rp__calloc(1, sizeof *cs);
  if (!cs)
    return NULL;
  cs->gpus = aligned_alloc(RP_CACHELINE, sizeof(cuda_gpu) * n);
  if (!cs->gpus) {
    free(cs);
    return NULL;
  }
  memset(cs->gpus, 0, sizeof(cuda_gpu) * n);
  cs->rt = rt;
  cs->n = n;
  cs->ndev = ndev;
  for (unsigned i = 0; i < n; i++) {
    cuda_gpu *g = &cs->gpus[i];
    rp__queue_init(&g->q);
    g->index = i;
    g->device = (int)(i % (unsigned)ndev);
    g->cs = cs;
  }
  return cs;
}

static void state_free(cuda_state *cs) {
  free(cs->gpus);
  free(cs);
}

static rp_status init_steps(rp_runtime *rt, const rp_runtime_config *cfg,
                            cuda_state **out) {
  int ndev = 0;
  rp_status st = probe_devices(&ndev);
  if (st)
    return st;
  unsigned n = cfg->gpus ? cfg->gpus : (unsigned)ndev;
  if (n > RP_MAX_PROCS)
    return rp__err(RP_ERANGE, "%u logical GPUs requested (max %d)", n,
                   RP_MAX_PROCS);
  cuda_state *cs = state_new(rt, n, ndev);
  if (!cs)
    return rp__err(RP_ENOMEM, "CUDA backend: out of memory");
  unsigned nprocs0 = rt->nprocs, nmems0 = rt->nmems;
  if ((st = open_devices(cs)))
    goto fail_state;
  if ((st = register_all(rt, cs)))
    goto fail_registered;
  if ((st = create_streams(cs)))
    goto fail_registered;
  if ((st = start_drivers(cs)))
    goto fail_streams;
  *out = cs;
  return RP_OK;
fail_streams:
  destroy_streams(cs);
fail_registered:
  unregister_all(rt, nprocs0, nmems0);
fail_state:
  state_free(cs);
  return st;
}

static rp_status cuda_init(rp_runtime *rt, const rp_runtime_config *cfg,
                           void **state) {
  rp__nvtx_push("reprise: CUDA init");
  cuda_state *cs = NULL;
  rp_status st = init_steps(rt, cfg, &cs);
  if (st == RP_OK)
    *state = cs;
  rp__nvtx_pop();
  return st;
}

/* Synchronizes every physical device in use: the drivers' streams, the
 * streams upper layers created with rp__cuda_stream_create, host functions.
 * Returns nonzero when a device failed (the detail is recorded). */
static int sync_devices(cuda_state *cs) {
  int used = (int)cs->n < cs->ndev ? (int)cs->n : cs->ndev;
  int failed = 0;
  for (int d = 0; d < used; d++) {
    int prev;
    if (dev_enter(cs->rt, d, &prev) != RP_OK) {
      failed = 1;
      continue;
    }
    if (RP_CUDA(cs->rt, cudaDeviceSynchronize()) != RP_OK)
      failed = 1;
    dev_leave(d, prev);
  }
  return failed;
}

static void cuda_drain(void *state) {
  cuda_state *cs = state;
  rp__nvtx_push("reprise: CUDA drain");
  /* Queued items enqueue device work, so the queues empty first; device work
   * may end in host functions that queue more items, so repeat until a
   * synchronize finds nothing new (or a device failed: its work is gone). */
  for (;;) {
    wait_queues(cs);
    if (sync_devices(cs))
      break;
    if (atomic_load_explicit(&cs->pending, memory_order_acquire) == 0)
      break;
  }
  wait_queues(cs);
  rp__nvtx_pop();
}

static void cuda_fini(rp_runtime *rt, void *state) {
  RP_UNUSED(rt);
  cuda_state *cs = state;
  if (!cs)
    return;
  cuda_drain(cs);
  stop_drivers(cs);
  destroy_streams(cs);
  state_free(cs);
}

/* ---- memory ---- */

static rp_status gpu_alloc(cuda_state *cs, const cuda_gpu *g, size_t bytes,
                           void **ptr) {
  int prev;
  rp_status st = dev_enter(cs->rt, g->device, &prev);
  if (st)
    return st;
  void *p = NULL;
  st = RP_CUDA(cs->rt, cudaMalloc(&p, bytes));
  if (st == RP_OK) {
    /* cudaMemset runs on the legacy default stream, which the backend's
     * non-blocking streams do not wait for: finish it before the memory is
     * handed out. */
    st = RP_CUDA(cs->rt, cudaMemset(p, 0, bytes));
    if (st == RP_OK)
      st = RP_CUDA(cs->rt, cudaStreamSynchronize(NULL));
    if (st != RP_OK && cudaFree(p) != cudaSuccess)
      (void)cudaGetLastError();
  }
  dev_leave(g->device, prev);
  if (st)
    return rp__err_prefix(st, "GPU %u (device %d): ", g->index, g->device);
  *ptr = p;
  return RP_OK;
}

static rp_status pinned_alloc(cuda_state *cs, size_t bytes, void **ptr) {
  /* Portable: usable from every device's context; mapped: device-addressable
   * through UVA, so kernels may read it directly. */
  int prev;
  rp_status st = dev_enter(cs->rt, cs->gpus[0].device, &prev);
  if (st)
    return st;
  void *p = NULL;
  st = RP_CUDA(
      cs->rt,
      cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  dev_leave(cs->gpus[0].device, prev);
  if (st)
    return rp__err_prefix(st, "pinned memory: ");
  memset(p, 0, bytes);
  *ptr = p;
  return RP_OK;
}

static rp_status cuda_mem_alloc(void *state, const rp_mem_rec *m, size_t bytes,
                                size_t align, void **ptr) {
  cuda_state *cs = state;
  int pinned = m->info.kind == RP_MEM_PINNED;
  size_t max_align = pinned ? RP_CUDA_PINNED_ALIGN : RP_CUDA_DEVICE_ALIGN;
  if (align > max_align)
    return rp__err(RP_EUNSUPPORTED,
                   "%s memory aligns to %zu bytes, %zu requested",
                   pinned ? "pinned" : "GPU", max_align, align);
  if (pinned)
    return pinned_alloc(cs, bytes, ptr);
  RP_ASSERT(m->info.kind == RP_MEM_GPU && (unsigned)m->info.device < cs->n);
  return gpu_alloc(cs, &cs->gpus[m->info.device], bytes, ptr);
}

static void cuda_mem_free(void *state, const rp_mem_rec *m, void *ptr) {
  cuda_state *cs = state;
  if (m->info.kind == RP_MEM_PINNED) {
    (void)RP_CUDA(cs->rt, cudaFreeHost(ptr));
    return;
  }
  const cuda_gpu *g = &cs->gpus[m->info.device];
  int prev;
  if (dev_enter(cs->rt, g->device, &prev) != RP_OK)
    return;
  /* cudaFree waits for device work that may still use ptr. Errors cannot be
   * reported from here; a sticky one marks the runtime. */
  (void)RP_CUDA(cs->rt, cudaFree(ptr));
  dev_leave(g->device, prev);
}

/* The device owning ptr's allocation, or -1 for host memory. */
static int ptr_device(const void *ptr) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
             ? a.device
             : -1;
}

static rp_status cuda_mem_copy(void *state, void *dst, const void *src,
                               size_t bytes) {
  cuda_state *cs = state;
  /* cudaMemcpy runs on the current device's legacy default stream: make the
   * device side's device current, so that the synchronize below waits for
   * this copy. A copy from pageable memory may return before its DMA ends,
   * hence the synchronize: the copy is complete when this returns. */
  int dev = ptr_device(dst);
  if (dev < 0)
    dev = ptr_device(src);
  if (dev < 0)
    dev = cs->gpus[0].device;
  int prev;
  rp_status st = dev_enter(cs->rt, dev, &prev);
  if (st)
    return st;
  st = RP_CUDA(cs->rt, cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  if (st == RP_OK)
    st = RP_CUDA(cs->rt, cudaStreamSynchronize(NULL));
  dev_leave(dev, prev);
  return st;
}

/* ---- processors ---- */

static void cuda_enqueue(void *state, const rp_proc_rec *p, rp_work *w) {
  cuda_state *cs = state;
  RP_ASSERT(p->local < cs->n);
  cuda_gpu *g = &cs->gpus[p->local];
  /* relaxed: the push below publishes the increment to the driver before
   * its decrement (the driver acquires the item through the queue) */
  atomic_fetch_add_explicit(&cs->pending, 1, memory_order_relaxed);
  rp__queue_push(&g->q, w);
  rp__queue_wake(&g->q);
}

/* ---- asynchronous copies ---- */

/* Host function behind an async copy: the stream reached the end of it.
 * Runs on a CUDA host thread: done only completes events (no CUDA call). */
static void copy_done(void *arg) {
  rp_work *done = ((rp_copy_async *)arg)->done;
  done->run(done);
}

/* A 2-D copy on p's stream (cudaMemcpyDefault: UVA tells the directions,
 * pageable host memory is staged by the driver), then done as a host
 * function behind it. The stream belongs to p's device and a copy may be
 * issued to a stream of another device than the current one, so no device
 * switch is needed. */
static rp_status cuda_copy_async(void *state, const rp_proc_rec *p,
                                 rp_copy_async *op) {
  cuda_state *cs = state;
  RP_ASSERT(p->local < cs->n);
  cuda_gpu *g = &cs->gpus[p->local];
  rp_status st =
      RP_CUDA(cs->rt, cudaMemcpy2DAsync(op->dst, op->dpitch, op->src,
                                        op->spitch, op->row_bytes, op->rows,
                                        cudaMemcpyDefault, g->stream));
  if (st == RP_OK) {
    st = RP_CUDA(cs->rt, cudaLaunchHostFunc(g->stream, copy_done, op));
    /* The copy is in flight and nothing will say when it ends: wait for
     * it, so that the caller's buffers are quiet when the error is
     * reported (the wait's own error, if any, is the same failure). */
    if (st != RP_OK && cudaStreamSynchronize(g->stream) != cudaSuccess)
      (void)cudaGetLastError();
  }
  if (st)
    return rp__err_prefix(st,
                          "GPU %u: async copy of %zu x %zu bytes: ", g->index,
                          op->rows, op->row_bytes);
  return RP_OK;
}

const rp_backend_ops rp__cuda_backend = {
    .name = "cuda",
    .init = cuda_init,
    .fini = cuda_fini,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_copy = cuda_mem_copy,
    .proc_enqueue = cuda_enqueue,
    .drain = cuda_drain,
    .copy_async = cuda_copy_async,
    .dev = &rp__cuda_device_ops,
};

const rp_backend_ops *const rp__gpu_backend = &rp__cuda_backend;

/* ---- cuda_backend.h: primitives for the layers above ---- */

static cuda_gpu *gpu_of(rp_runtime *rt, rp_proc p) {
  cuda_state *cs = rt ? rt->gpu_state : NULL;
  if (!cs || p >= rt->nprocs || rt->procs[p].be != &rp__cuda_backend)
    return NULL;
  return &cs->gpus[rt->procs[p].local];
}

void *rp__cuda_proc_stream(rp_runtime *rt, rp_proc p) {
  cuda_gpu *g = gpu_of(rt, p);
  return g ? (void *)g->stream : NULL;
}

int rp__cuda_proc_device(rp_runtime *rt, rp_proc p) {
  cuda_gpu *g = gpu_of(rt, p);
  return g ? g->device : -1;
}

int rp__cuda_current_device(void) {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}

/* The start of a create on p's device: checks out (cleared) and p, then
 * makes p's device current (*g, *prev for dev_leave). what names the call. */
static rp_status create_enter(rp_runtime *rt, rp_proc p, void **out,
                              const char *what, cuda_gpu **g, int *prev) {
  *g = gpu_of(rt, p);
  if (!out)
    return rp__err(RP_EINVAL, "%s: NULL out", what);
  *out = NULL;
  if (!*g)
    return rp__err(RP_EPROC, "%s: processor %u is not a GPU of this runtime",
                   what, p);
  return dev_enter(rt, (*g)->device, prev);
}

rp_status rp__cuda_stream_create(rp_runtime *rt, rp_proc p, void **out) {
  cuda_gpu *g;
  int prev;
  rp_status st = create_enter(rt, p, out, "rp__cuda_stream_create", &g, &prev);
  if (st)
    return st;
  cudaStream_t s = NULL;
  st = RP_CUDA(rt, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (st == RP_OK)
    rp__stream_hook_call(s, 1);
  dev_leave(g->device, prev);
  if (st == RP_OK)
    *out = s;
  return st;
}

rp_status rp__cuda_stream_destroy(rp_runtime *rt, void *stream) {
  if (!stream)
    return RP_OK;
  rp__stream_hook_call(stream, 0);
  return RP_CUDA(rt, cudaStreamDestroy((cudaStream_t)stream));
}

rp_status rp__cuda_stream_sync(rp_runtime *rt, void *stream) {
  return RP_CUDA(rt, cudaStreamSynchronize((cudaStream_t)stream));
}

rp_status rp__cuda_event_create(rp_runtime *rt, rp_proc p, void **out) {
  cuda_gpu *g;
  int prev;
  rp_status st = create_enter(rt, p, out, "rp__cuda_event_create", &g, &prev);
  if (st)
    return st;
  cudaEvent_t e = NULL;
  st = RP_CUDA(rt, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  dev_leave(g->device, prev);
  if (st == RP_OK)
    *out = e;
  return st;
}

rp_status rp__cuda_event_destroy(rp_runtime *rt, void *event) {
  if (!event)
    return RP_OK;
  return RP_CUDA(rt, cudaEventDestroy((cudaEvent_t)event));
}

rp_status rp__cuda_event_record(rp_runtime *rt, void *event, void *stream) {
  return RP_CUDA(rt, cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

rp_status rp__cuda_stream_wait_event(rp_runtime *rt, void *stream,
                                     void *event) {
  return RP_CUDA(
      rt, cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
}

rp_status rp__cuda_launch_host_func(rp_runtime *rt, void *stream,
                                    void (*fn)(void *arg), void *arg) {
  if (!fn)
    return rp__err(RP_EINVAL, "rp__cuda_launch_host_func: NULL function");
  return RP_CUDA(rt, cudaLaunchHostFunc((cudaStream_t)stream, fn, arg));
}

rp_status rp__cuda_memset_async(rp_runtime *rt, void *stream, void *dst,
                                int value, size_t bytes) {
  return RP_CUDA(rt, cudaMemsetAsync(dst, value, bytes, (cudaStream_t)stream));
}
