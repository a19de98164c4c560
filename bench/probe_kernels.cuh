/* bench/probe_kernels.cuh — tiny CUDA kernels for the GPU tests and the
 * GPU benchmark (bench/probe_kernels.cu): an empty kernel, an execution
 * log, an int64 fold that matches a CPU function bit for bit, and the raw
 * CUDA baselines of `reprise bench --gpu` (per-kernel stream launches and a
 * captured CUDA graph of the same work). C callable, no CUDA types: streams,
 * events and graph execs are void *. Every launcher is stream-ordered and
 * capture-safe; each returns RP_OK or RP_EBACKEND with a detail. */
#ifndef RP_BENCH_PROBE_KERNELS_CUH
#define RP_BENCH_PROBE_KERNELS_CUH

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One empty kernel (1 block of 1 thread). */
rp_status rp_cuda_probe_empty(void *stream);

/* Appends id to a device log: log[0] counts entries, entry i is log[1 + i]
 * (an atomicAdd on log[0] picks i; entries beyond cap are counted but not
 * stored). Kernels that run concurrently append in some order; kernels
 * ordered by the graph append in that order. */
rp_status rp_cuda_probe_log(int32_t *log, uint32_t cap, int32_t id,
                            void *stream);

/* The fold the GPU tests compare with the CPU backend: with
 * x = seed_dev ? *seed_dev : seed, for each non-NULL input i in order
 * x = rp_probe_mix(x, in_i[0]); then out[0] = x. One thread. */
rp_status rp_cuda_probe_fold(int64_t *out, const int64_t *in0,
                             const int64_t *in1, const int64_t *in2,
                             int64_t seed, const int64_t *seed_dev,
                             void *stream);

/* The same mix on the host. */
static inline int64_t rp_probe_mix(int64_t a, int64_t b) {
  uint64_t x = (uint64_t)a, y = (uint64_t)b;
  x ^= y + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
  return (int64_t)(x * 0xff51afd7ed558ccdull);
}

/* ---- raw CUDA baselines for the benchmark ---- */

enum { RP_PROBE_CHAIN = 0, RP_PROBE_FORKJOIN = 1 };
#define RP_PROBE_STREAMS 4

/* Streams and events for the baselines, created on the current device. */
typedef struct rp_probe_env {
  void *stream[RP_PROBE_STREAMS]; /* non-blocking */
  void *event[RP_PROBE_STREAMS + 1];
} rp_probe_env;

rp_status rp_cuda_probe_env_create(rp_probe_env *env);
void rp_cuda_probe_env_destroy(rp_probe_env *env);
/* Enqueues one run of the workload with per-kernel launches: CHAIN, n
 * kernels on stream[0]; FORKJOIN, a source kernel on stream[0], then
 * RP_PROBE_STREAMS branches of n / RP_PROBE_STREAMS kernels on the four
 * streams (event fork and join), then a sink kernel on stream[0]. */
rp_status rp_cuda_probe_issue(const rp_probe_env *env, int kind, int n);
/* Captures one rp_cuda_probe_issue into a graph, instantiates and uploads
 * it: *exec (cudaGraphExec_t) is the caller's. */
rp_status rp_cuda_probe_graph(const rp_probe_env *env, int kind, int n,
                              void **exec);
rp_status rp_cuda_probe_graph_launch(void *exec, void *stream);
void rp_cuda_probe_graph_destroy(void *exec);

#ifdef __cplusplus
}
#endif

#endif
