/* engine/cuda/cuda_graph.c — CUDA Graphs wrappers for the replay layer's
 * lowering (see cuda_graph.h). Every call is checked through RP_CUDA. */
#include "../engine_impl.h"
#include "cuda_backend.h"
#include "cuda_graph.h"
#include "../cuda_check.h"

#include <cuda.h> /* driver API types only: its entry points are looked up */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* ---- devices ---- */

rp_status rp__cuda_device_use(rp_runtime *rt, int dev) {
  int cur = -1;
  /* cudaGetDevice reads the thread's state: cheap enough for every launch,
   * and robust against a task that left another device current */
  RP_CUDA_TRY(rt, cudaGetDevice(&cur));
  if (cur != dev)
    RP_CUDA_TRY(rt, cudaSetDevice(dev));
  return RP_OK;
}

rp_status rp__cuda_device_enter(rp_runtime *rt, int dev, int *prev) {
  RP_CUDA_TRY(rt, cudaGetDevice(prev));
  if (*prev != dev)
    RP_CUDA_TRY(rt, cudaSetDevice(dev));
  return RP_OK;
}

void rp__cuda_device_leave(int dev, int prev) {
  if (prev != dev && cudaSetDevice(prev) != cudaSuccess)
    (void)cudaGetLastError(); /* the caller's device is gone: keep ours */
}

/* Clears *out, checks p is a GPU and makes its device current (*dev, *prev
 * for rp__cuda_device_leave). */
static rp_status proc_enter(rp_runtime *rt, rp_proc p, void **out, int *dev,
                            int *prev) {
  *out = NULL;
  *dev = rp__cuda_proc_device(rt, p);
  if (*dev < 0)
    return rp__err(RP_EPROC, "processor %u is not a GPU of this runtime", p);
  return rp__cuda_device_enter(rt, *dev, prev);
}

rp_status rp__cuda_stream_create_blocking(rp_runtime *rt, rp_proc p,
                                          void **out) {
  int dev, prev;
  rp_status st = proc_enter(rt, p, out, &dev, &prev);
  if (st)
    return st;
  cudaStream_t s = NULL;
  st = RP_CUDA(rt, cudaStreamCreateWithFlags(&s, cudaStreamDefault));
  if (st == RP_OK)
    rp__stream_hook_call(s, 1);
  rp__cuda_device_leave(dev, prev);
  if (st == RP_OK)
    *out = s;
  return st;
}

/* ---- capture ---- */

rp_status rp__cuda_capture_begin(rp_runtime *rt, void *stream) {
  return RP_CUDA(rt, cudaStreamBeginCapture((cudaStream_t)stream,
                                            cudaStreamCaptureModeThreadLocal));
}

rp_status rp__cuda_capture_end(rp_runtime *rt, void *stream, void **graph) {
  cudaGraph_t g = NULL;
  rp_status st = RP_CUDA(rt, cudaStreamEndCapture((cudaStream_t)stream, &g));
  if (st != RP_OK && g) { /* not expected: CUDA returns no graph on error */
    (void)cudaGraphDestroy(g);
    g = NULL;
  }
  *graph = g;
  return st;
}

/* ---- graphs ---- */

rp_status rp__cuda_graph_create(rp_runtime *rt, void **graph) {
  cudaGraph_t g = NULL;
  rp_status st = RP_CUDA(rt, cudaGraphCreate(&g, 0));
  *graph = st == RP_OK ? g : NULL;
  return st;
}

void rp__cuda_graph_destroy(void *graph) {
  if (graph && cudaGraphDestroy((cudaGraph_t)graph) != cudaSuccess)
    (void)cudaGetLastError();
}

rp_status rp__cuda_graph_add_child(rp_runtime *rt, void *graph,
                                   void *const *deps, size_t ndeps, void *child,
                                   void **node) {
  size_t n = 0;
  RP_CUDA_TRY(rt, cudaGraphGetNodes((cudaGraph_t)child, NULL, &n));
  cudaGraphNode_t out = NULL;
  const cudaGraphNode_t *d = (const cudaGraphNode_t *)deps;
  if (n == 0) /* a task that enqueued nothing: keep its place and edges */
    RP_CUDA_TRY(rt, cudaGraphAddEmptyNode(&out, (cudaGraph_t)graph, d, ndeps));
  else
    RP_CUDA_TRY(rt, cudaGraphAddChildGraphNode(&out, (cudaGraph_t)graph, d,
                                               ndeps, (cudaGraph_t)child));
  *node = out;
  return RP_OK;
}

rp_status rp__cuda_graph_add_event_record(rp_runtime *rt, void *graph,
                                          void *const *deps, size_t ndeps,
                                          void *event, void **node) {
  cudaGraphNode_t out = NULL;
  RP_CUDA_TRY(rt, cudaGraphAddEventRecordNode(&out, (cudaGraph_t)graph,
                                              (const cudaGraphNode_t *)deps,
                                              ndeps, (cudaEvent_t)event));
  *node = out;
  return RP_OK;
}

rp_status rp__cuda_graph_add_event_wait(rp_runtime *rt, void *graph,
                                        void *const *deps, size_t ndeps,
                                        void *event, void **node) {
  cudaGraphNode_t out = NULL;
  RP_CUDA_TRY(rt, cudaGraphAddEventWaitNode(&out, (cudaGraph_t)graph,
                                            (const cudaGraphNode_t *)deps,
                                            ndeps, (cudaEvent_t)event));
  *node = out;
  return RP_OK;
}

rp_status rp__cuda_graph_instantiate(rp_runtime *rt, void *graph, void *stream,
                                     void **exec) {
  cudaGraphExec_t e = NULL;
  *exec = NULL;
  RP_CUDA_TRY(rt, cudaGraphInstantiateWithFlags(&e, (cudaGraph_t)graph, 0));
  rp_status st = RP_CUDA(rt, cudaGraphUpload(e, (cudaStream_t)stream));
  if (st != RP_OK) {
    (void)cudaGraphExecDestroy(e);
    return st;
  }
  *exec = e;
  return RP_OK;
}

void rp__cuda_graph_exec_destroy(void *exec) {
  if (exec && cudaGraphExecDestroy((cudaGraphExec_t)exec) != cudaSuccess)
    (void)cudaGetLastError();
}

rp_status rp__cuda_graph_launch(rp_runtime *rt, void *exec, void *stream) {
  return RP_CUDA(rt,
                 cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream));
}

/* A refusal is an answer, not a failure: clear the thread's error. A
 * sticky error still marks the runtime (through the check). */
static int refused(rp_runtime *rt, cudaError_t e, const char *stmt,
                   const char **why) {
  *why = cudaGetErrorName(e);
  (void)rp__cuda_check(rt, e, stmt, __FILE__, __LINE__);
  return 0;
}

int rp__cuda_graph_exec_set_child(rp_runtime *rt, void *exec, void *node,
                                  void *child, const char **why) {
  cudaError_t e = cudaGraphExecChildGraphNodeSetParams(
      (cudaGraphExec_t)exec, (cudaGraphNode_t)node, (cudaGraph_t)child);
  if (e == cudaSuccess)
    return 1;
  return refused(rt, e, "cudaGraphExecChildGraphNodeSetParams", why);
}

static const char *update_result_name(enum cudaGraphExecUpdateResult r) {
  switch (r) {
  case cudaGraphExecUpdateErrorTopologyChanged:
    return "topology changed";
  case cudaGraphExecUpdateErrorNodeTypeChanged:
    return "node type changed";
  case cudaGraphExecUpdateErrorFunctionChanged:
  case cudaGraphExecUpdateErrorUnsupportedFunctionChange:
    return "kernel function changed";
  case cudaGraphExecUpdateErrorParametersChanged:
    return "parameters changed in an unsupported way";
  case cudaGraphExecUpdateErrorNotSupported:
    return "node not supported";
  case cudaGraphExecUpdateErrorAttributesChanged:
    return "node attributes changed";
  default:
    return "refused";
  }
}

int rp__cuda_graph_exec_update(rp_runtime *rt, void *exec, void *graph,
                               const char **why) {
  cudaGraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  cudaError_t e =
      cudaGraphExecUpdate((cudaGraphExec_t)exec, (cudaGraph_t)graph, &info);
  if (e == cudaSuccess)
    return 1;
  refused(rt, e, "cudaGraphExecUpdate", why);
  *why = update_result_name(info.result);
  return 0;
}

/* ---- streams ---- */

rp_status rp__cuda_memcpy_async(rp_runtime *rt, void *dst, const void *src,
                                size_t bytes, void *stream) {
  return RP_CUDA(rt, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                     (cudaStream_t)stream));
}

rp_status rp__cuda_stream_poll(rp_runtime *rt, void *stream) {
  cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* busy is not an error */
    return RP_OK;
  }
  return RP_CUDA(rt, e);
}

int rp__cuda_event_done(rp_runtime *rt, void *event) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess)
    return 1;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* pending is not an error */
    return 0;
  }
  (void)RP_CUDA(rt, e);
  return -1;
}

typedef CUresult (*write32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static write32_fn g_write32;
static pthread_once_t g_write32_once = PTHREAD_ONCE_INIT;

static void write32_init(void) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000,
                                       cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    memcpy(&g_write32, &fn, sizeof fn); /* POSIX: same representation */
  else
    (void)cudaGetLastError();
}

rp_status rp__cuda_host_device_ptr(rp_runtime *rt, void *host, void **dev) {
  *dev = NULL;
  return RP_CUDA(rt, cudaHostGetDevicePointer(dev, host, 0));
}

rp_status rp__cuda_stream_write_u32(rp_runtime *rt, void *stream,
                                    void *dev_word, uint32_t value) {
  pthread_once(&g_write32_once, write32_init);
  if (!g_write32)
    return rp__err(RP_EUNSUPPORTED, "cuStreamWriteValue32: the driver has "
                                    "no such entry point");
  CUresult r = g_write32((CUstream)stream, (CUdeviceptr)(uintptr_t)dev_word,
                         value, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r == CUDA_SUCCESS)
    return RP_OK;
  if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)
    return rp__err(RP_EUNSUPPORTED,
                   "cuStreamWriteValue32 refused (CUresult "
                   "%d): no stream memory operations here",
                   (int)r);
  /* the runtime's codes equal the driver's for the errors that matter
   * (700 illegal address, 719 launch failure, ...): checked as one, so a
   * sticky one marks the runtime unusable */
  return RP_CUDA(rt, (cudaError_t)r);
}

/* ---- timing events ---- */

rp_status rp__cuda_event_create_timed(rp_runtime *rt, rp_proc p, void **out) {
  int dev, prev;
  rp_status st = proc_enter(rt, p, out, &dev, &prev);
  if (st)
    return st;
  cudaEvent_t e = NULL;
  st = RP_CUDA(rt, cudaEventCreateWithFlags(&e, cudaEventDefault));
  rp__cuda_device_leave(dev, prev);
  if (st == RP_OK)
    *out = e;
  return st;
}

rp_status rp__cuda_event_sync(rp_runtime *rt, void *event) {
  return RP_CUDA(rt, cudaEventSynchronize((cudaEvent_t)event));
}

rp_status rp__cuda_event_elapsed_ms(rp_runtime *rt, void *start, void *end,
                                    float *ms) {
  *ms = 0.0f;
  return RP_CUDA(
      rt, cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
}
