/* bench/probe_kernels.cu — see probe_kernels.cuh. */
#include "probe_kernels.cuh"

#include "engine/cuda_check.h"

#include <cuda_runtime.h>

/* The project's one CUDA error wrapper (engine/cuda_check.h). */
#define check(e, what) rp__cuda_check(nullptr, (e), (what), __FILE__, __LINE__)

namespace {

cudaStream_t as_stream(void *s) {
  return static_cast<cudaStream_t>(s);
}

__global__ void empty_k() {}

__global__ void log_k(int32_t *log, uint32_t cap, int32_t id) {
  int32_t i = atomicAdd(&log[0], 1);
  if ((uint32_t)i < cap)
    log[1 + i] = id;
}

__device__ int64_t mix_d(int64_t a, int64_t b) {
  uint64_t x = (uint64_t)a, y = (uint64_t)b;
  x ^= y + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
  return (int64_t)(x * 0xff51afd7ed558ccdull);
}

__global__ void fold_k(int64_t *out, const int64_t *in0, const int64_t *in1,
                       const int64_t *in2, int64_t seed,
                       const int64_t *seed_dev) {
  int64_t x = seed_dev ? *seed_dev : seed;
  if (in0)
    x = mix_d(x, *in0);
  if (in1)
    x = mix_d(x, *in1);
  if (in2)
    x = mix_d(x, *in2);
  *out = x;
}

} // namespace

extern "C" rp_status rp_cuda_probe_empty(void *stream) {
  empty_k<<<1, 1, 0, as_stream(stream)>>>();
  return check(cudaGetLastError(), "rp_cuda_probe_empty");
}

extern "C" rp_status rp_cuda_probe_log(int32_t *log, uint32_t cap, int32_t id,
                                       void *stream) {
  log_k<<<1, 1, 0, as_stream(stream)>>>(log, cap, id);
  return check(cudaGetLastError(), "rp_cuda_probe_log");
}

extern "C" rp_status rp_cuda_probe_fold(int64_t *out, const int64_t *in0,
                                        const int64_t *in1, const int64_t *in2,
                                        int64_t seed, const int64_t *seed_dev,
                                        void *stream) {
  fold_k<<<1, 1, 0, as_stream(stream)>>>(out, in0, in1, in2, seed, seed_dev);
  return check(cudaGetLastError(), "rp_cuda_probe_fold");
}

/* ---- baselines ---- */

extern "C" rp_status rp_cuda_probe_env_create(rp_probe_env *env) {
  *env = rp_probe_env{};
  rp_status st = RP_OK;
  for (int i = 0; i < RP_PROBE_STREAMS && st == RP_OK; i++) {
    cudaStream_t s = nullptr;
    st = check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
               "rp_cuda_probe_env_create: cudaStreamCreateWithFlags");
    env->stream[i] = s;
  }
  for (int i = 0; i <= RP_PROBE_STREAMS && st == RP_OK; i++) {
    cudaEvent_t e = nullptr;
    st = check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
               "rp_cuda_probe_env_create: cudaEventCreateWithFlags");
    env->event[i] = e;
  }
  if (st != RP_OK)
    rp_cuda_probe_env_destroy(env);
  return st;
}

extern "C" void rp_cuda_probe_env_destroy(rp_probe_env *env) {
  for (int i = 0; i < RP_PROBE_STREAMS; i++)
    if (env->stream[i])
      (void)cudaStreamDestroy(as_stream(env->stream[i]));
  for (int i = 0; i <= RP_PROBE_STREAMS; i++)
    if (env->event[i])
      (void)cudaEventDestroy(static_cast<cudaEvent_t>(env->event[i]));
  (void)cudaGetLastError();
  *env = rp_probe_env{};
}

namespace {

rp_status chain(void *stream, int n) {
  for (int i = 0; i < n; i++)
    empty_k<<<1, 1, 0, as_stream(stream)>>>();
  return check(cudaGetLastError(), "rp_cuda_probe_issue: launch");
}

rp_status forkjoin(const rp_probe_env *env, int n) {
  cudaStream_t s0 = as_stream(env->stream[0]);
  cudaEvent_t fork = static_cast<cudaEvent_t>(env->event[0]);
  rp_status st = chain(s0, 1);
  if (st == RP_OK)
    st = check(cudaEventRecord(fork, s0), "rp_cuda_probe_issue: fork");
  for (int b = 1; b < RP_PROBE_STREAMS && st == RP_OK; b++)
    st = check(cudaStreamWaitEvent(as_stream(env->stream[b]), fork, 0),
               "rp_cuda_probe_issue: fork wait");
  for (int b = 0; b < RP_PROBE_STREAMS && st == RP_OK; b++)
    st = chain(env->stream[b], n / RP_PROBE_STREAMS);
  for (int b = 1; b < RP_PROBE_STREAMS && st == RP_OK; b++) {
    cudaEvent_t join = static_cast<cudaEvent_t>(env->event[b]);
    st = check(cudaEventRecord(join, as_stream(env->stream[b])),
               "rp_cuda_probe_issue: join");
    if (st == RP_OK)
      st = check(cudaStreamWaitEvent(s0, join, 0),
                 "rp_cuda_probe_issue: join wait");
  }
  return st == RP_OK ? chain(s0, 1) : st;
}

} // namespace

extern "C" rp_status rp_cuda_probe_issue(const rp_probe_env *env, int kind,
                                         int n) {
  return kind == RP_PROBE_CHAIN ? chain(env->stream[0], n) : forkjoin(env, n);
}

extern "C" rp_status rp_cuda_probe_graph(const rp_probe_env *env, int kind,
                                         int n, void **exec) {
  cudaStream_t s0 = as_stream(env->stream[0]);
  *exec = nullptr;
  rp_status st = check(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal),
                       "rp_cuda_probe_graph: cudaStreamBeginCapture");
  if (st != RP_OK)
    return st;
  rp_status ist = rp_cuda_probe_issue(env, kind, n);
  cudaGraph_t g = nullptr;
  st = check(cudaStreamEndCapture(s0, &g),
             "rp_cuda_probe_graph: cudaStreamEndCapture");
  if (ist != RP_OK || st != RP_OK) {
    if (g)
      (void)cudaGraphDestroy(g);
    return ist != RP_OK ? ist : st;
  }
  cudaGraphExec_t e = nullptr;
  st = check(cudaGraphInstantiateWithFlags(&e, g, 0),
             "rp_cuda_probe_graph: cudaGraphInstantiateWithFlags");
  (void)cudaGraphDestroy(g);
  if (st == RP_OK)
    st = check(cudaGraphUpload(e, s0), "rp_cuda_probe_graph: upload");
  if (st == RP_OK)
    *exec = e;
  else if (e)
    (void)cudaGraphExecDestroy(e);
  return st;
}

extern "C" rp_status rp_cuda_probe_graph_launch(void *exec, void *stream) {
  return check(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), as_stream(stream)),
      "rp_cuda_probe_graph_launch");
}

extern "C" void rp_cuda_probe_graph_destroy(void *exec) {
  if (exec &&
      cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)) != cudaSuccess)
    (void)cudaGetLastError();
}
