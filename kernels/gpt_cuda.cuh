/* kernels/gpt_cuda.cuh — what the GPT kernels' CUDA files (kernels/embed.cu,
 * layernorm.cu, matmul.cu, gelu.cu, attention.cu, xent.cu, adamw.cu) share:
 * error wrapping, launch-shape helpers and deterministic warp and block
 * reductions. CUDA translation units only (the launchers' C interface is
 * kernels/gpt_kernels.h).
 *
 * Determinism: every reduction here combines values in an order fixed by
 * the launch shape alone (xor butterflies inside a warp, then the warps'
 * partials in warp order), never by timing; no float atomics. */
#ifndef RP_KERNELS_GPT_CUDA_CUH
#define RP_KERNELS_GPT_CUDA_CUH

#include "cuda_kernels.cuh"
#include "engine/cuda_check.h"
#include "gpt_kernels.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* engine/util.h is C-only (_Atomic); this is its rp__err prototype. */
extern "C" rp_status rp__err(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Every CUDA call goes through the project's one wrapper
 * (engine/cuda_check.h); after a <<<>>> launch, configuration errors show
 * up in cudaGetLastError. */
#define RP_GPT_CHECK(e, what)                                                  \
  rp__cuda_check(nullptr, (e), (what), __FILE__, __LINE__)
#define RP_GPT_LAUNCHED(what) RP_GPT_CHECK(cudaGetLastError(), what)

namespace rp_gpt {

constexpr unsigned kFull = 0xffffffffu;
/* Grid cap for grid-stride loops: 65536 blocks of 256 threads cover 16M
 * items a sweep, which fills any current GPU; the loops cover the rest. */
constexpr size_t kMaxBlocks = 65536;

inline cudaStream_t as_stream(void *s) {
  return static_cast<cudaStream_t>(s);
}

inline unsigned blocks_for(size_t items, unsigned per_block) {
  size_t b = (items + per_block - 1) / per_block;
  if (b == 0)
    b = 1;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

__device__ inline float nan_f() {
  return __int_as_float(0x7fc00000);
}

__device__ inline size_t global_tid() {
  return blockIdx.x * (size_t)blockDim.x + threadIdx.x;
}
__device__ inline size_t global_threads() {
  return (size_t)gridDim.x * blockDim.x;
}

/* Butterfly (xor) reductions: every lane ends with the same bits (each
 * step adds the same two values on both lanes, and + commutes). The whole
 * warp must call them. */
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ inline double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

/* Block reductions (blockDim.x a multiple of 32, at most 1024; every
 * thread of the block calls them, and all get the result): each warp
 * reduces by butterfly, then warp 0 reduces the warps' values (in a
 * butterfly over lanes = warp index, missing warps giving the neutral
 * value). sh: 32 entries of shared memory. A barrier comes before the
 * write of sh, so consecutive calls may share sh; other uses of sh after a
 * call need a barrier first. */
__device__ inline double block_sum_d(double v, double *sh) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned nwarps = blockDim.x >> 5;
  v = warp_sum_d(v);
  __syncthreads();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  double w = lane < nwarps ? sh[lane] : 0.0;
  return warp_sum_d(w);
}
__device__ inline float block_max(float v, float *sh) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned nwarps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  float w = lane < nwarps ? sh[lane] : -INFINITY;
  return warp_max(w);
}

} // namespace rp_gpt

#endif
