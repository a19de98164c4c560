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
 * reduces by butterfly, then every warp reduces the warps' values (a
 * butterfly over lanes = warp index, missing warps giving the neutral
 * value; the same inputs in the same lanes, so the same bits in every
 * warp). sh: 32 entries of shared memory. A barrier comes before the
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

/* Column sums of the backward (the linear layers' bias gradients, the
 * LayerNorms' dw and db): a block of COLS consecutive columns x 1024 /
 * COLS row lanes; row lane y sums rows y, y + lanes, ... in order, then
 * lane 0 adds the lanes' partials in lane order (a fixed order for a given
 * COLS: deterministic, no atomics, no scratch). The grid covers the
 * columns only, so COLS sets the parallelism: with 32 a warp reads 128
 * bytes of one row and a 384-column layer gets 12 blocks; with 8 a warp
 * reads 32 bytes of each of 4 rows (whole sectors) and gets 48.
 * REPRISE_GPT_COLSUM_COLS picks it (colsum_cols). */
rp_status colsum_cols(unsigned *cols, const char *what);

template <unsigned COLS> struct colsum {
  static constexpr unsigned lanes = 1024 / COLS;
  static unsigned blocks(size_t cols) {
    return (unsigned)((cols + COLS - 1) / COLS);
  }
  /* Lane 0 of column c: the sum of the lanes' partials in lane order.
   * Every thread of the block calls it (a barrier inside). */
  __device__ static float finish(float acc, float (*part)[COLS + 1]) {
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    float s = 0.0f;
    if (threadIdx.y == 0) {
      s = part[0][threadIdx.x];
      for (unsigned y = 1; y < lanes; y++)
        s += part[y][threadIdx.x];
    }
    return s;
  }
};

} // namespace rp_gpt

#endif
