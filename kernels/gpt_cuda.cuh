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
#include "gpt_launch.h"

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
inline cudaStream_t as_stream(void *s) {
  return static_cast<cudaStream_t>(s);
}

/* Grid-stride grids: at least 1, at most RP_GPT_MAX_BLOCKS blocks
 * (gpt_launch.h). */
inline unsigned blocks_for(size_t items, unsigned per_block) {
  return rp_gpt_blocks_for(items, per_block);
}

/* A launch shape of gpt_launch.h as <<<>>> takes it. */
inline dim3 grid_of(const rp_gpt_launch &l) {
  return dim3(l.grid[0], l.grid[1], l.grid[2]);
}
inline dim3 block_of(const rp_gpt_launch &l) {
  return dim3(l.block[0], l.block[1], l.block[2]);
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
 * LayerNorms' dw and db): K sums per column (1 or 2), each in one order
 * fixed by the row count alone:
 *  - the rows form colsum_chunks(rows) chunks of colsum_chunk_rows(rows)
 *    consecutive rows (the last one may be shorter);
 *  - in a chunk, row lane y (of kColsumLanes) adds the chunk's rows y,
 *    y + lanes, ... in order, and the lanes' sums are added in lane order:
 *    the chunk's partial;
 *  - the column's sum adds the chunks' partials in chunk order.
 * Two grids compute exactly this (REPRISE_GPT_COLSUM, colsum_mode):
 *  - split (default): a block per 32 columns and chunk writes its partials
 *    to the stream's workspace slice (rp_cuda_stream_scratch), then a
 *    thread per column adds them up: the nanoGPT step's 384 columns over
 *    16,384 rows run on 12 x 128 blocks;
 *  - serial: a block per 32 columns walks the chunks in order itself, no
 *    scratch, on as many blocks as the columns give (12 there). The split
 *    grid falls back to it when the stream has no slice or the partials
 *    do not fit in it.
 * Both add the same values in the same order with explicitly rounded
 * operations (no contraction), so they give the same bits: eager equals
 * replay whichever ran. No atomics. */
constexpr unsigned kColsumCols = 32; /* a warp reads 128 bytes of a row */
constexpr unsigned kColsumLanes = 8; /* 256 threads a block */
constexpr size_t kColsumMaxChunks = 128;
constexpr size_t kColsumMinRows = 64; /* rows a chunk, at least */

__host__ __device__ inline size_t colsum_chunk_rows(size_t rows) {
  size_t per = (rows + kColsumMaxChunks - 1) / kColsumMaxChunks;
  return per < kColsumMinRows ? kColsumMinRows : per;
}
/* At least one (empty when rows == 0: the sums are 0). */
__host__ __device__ inline size_t colsum_chunks(size_t rows) {
  size_t per = colsum_chunk_rows(rows);
  return rows ? (rows + per - 1) / per : 1;
}

/* One of two words in environment variable var: 0 when unset, empty or
 * first, 1 when second; RP_EINVAL otherwise, "what: VAR='v': need first or
 * second (selects)". The kernels' switches (REPRISE_GPT_COLSUM,
 * REPRISE_GPT_ATTN) read theirs through it at each launch. */
rp_status env_choice(const char *var, const char *first, const char *second,
                     const char *selects, const char *what, int *out);

/* env_choice into a two-valued enum (first = 0, second = 1). */
template <class E>
rp_status env_enum(const char *var, const char *first, const char *second,
                   const char *selects, const char *what, E *out) {
  int v;
  rp_status st = env_choice(var, first, second, selects, what, &v);
  *out = static_cast<E>(v);
  return st;
}

enum class ColsumMode { split, serial };
/* REPRISE_GPT_COLSUM: unset, empty or "split", or "serial"; RP_EINVAL
 * naming `what` and the variable otherwise. */
rp_status colsum_mode(ColsumMode *mode, const char *what);

/* Column c's partials of chunk k into p[K] (valid in lane y == 0). The
 * block is (kColsumCols, kColsumLanes) and every thread calls it (it has
 * barriers, the first one so that a loop may call it again). f(r, c, v)
 * gives row r's K values of column c. */
template <unsigned K, class F>
__device__ void
colsum_chunk(const F &f, size_t rows, size_t cols, size_t c, size_t k,
             float (*sh)[kColsumLanes][kColsumCols + 1], float *p) {
  size_t per = colsum_chunk_rows(rows), r0 = k * per;
  size_t r1 = r0 + per < rows ? r0 + per : rows;
  float acc[K];
  for (unsigned j = 0; j < K; j++)
    acc[j] = 0.0f;
  if (c < cols)
    for (size_t r = r0 + threadIdx.y; r < r1; r += kColsumLanes) {
      float v[K];
      f(r, c, v);
      for (unsigned j = 0; j < K; j++)
        acc[j] = __fadd_rn(acc[j], v[j]);
    }
  __syncthreads();
  for (unsigned j = 0; j < K; j++)
    sh[j][threadIdx.y][threadIdx.x] = acc[j];
  __syncthreads();
  if (threadIdx.y == 0)
    for (unsigned j = 0; j < K; j++) {
      float s = sh[j][0][threadIdx.x];
      for (unsigned y = 1; y < kColsumLanes; y++)
        s = __fadd_rn(s, sh[j][y][threadIdx.x]);
      p[j] = s;
    }
}

/* Split, first grid (columns / 32, chunks): part[(j * chunks + k) * cols
 * + c] = sum j of chunk k, column c. */
template <unsigned K, class F>
__global__ void colsum_part_k(F f, size_t rows, size_t cols,
                              float *__restrict__ part) {
  __shared__ float sh[K][kColsumLanes][kColsumCols + 1];
  size_t c = (size_t)blockIdx.x * kColsumCols + threadIdx.x;
  size_t k = blockIdx.y, chunks = gridDim.y;
  float p[K];
  colsum_chunk<K>(f, rows, cols, c, k, sh, p);
  if (threadIdx.y == 0 && c < cols)
    for (unsigned j = 0; j < K; j++)
      part[(j * chunks + k) * cols + c] = p[j];
}

/* Split, second grid: a thread per (j, c) adds the chunks' partials in
 * chunk order into out[j][c]. */
template <unsigned K>
__global__ void colsum_finish_k(const float *__restrict__ part, size_t chunks,
                                size_t cols, float *o0, float *o1) {
  for (size_t t = global_tid(); t < K * cols; t += global_threads()) {
    size_t j = t / cols, c = t % cols;
    const float *q = part + j * chunks * cols + c;
    float s = 0.0f;
    for (size_t k = 0; k < chunks; k++)
      s = __fadd_rn(s, q[k * cols]);
    (j ? o1 : o0)[c] = s;
  }
}

/* Serial: a block per 32 columns adds the chunks' partials as they come. */
template <unsigned K, class F>
__global__ void colsum_serial_k(F f, size_t rows, size_t cols, float *o0,
                                float *o1) {
  __shared__ float sh[K][kColsumLanes][kColsumCols + 1];
  size_t c = (size_t)blockIdx.x * kColsumCols + threadIdx.x;
  float s[K];
  for (unsigned j = 0; j < K; j++)
    s[j] = 0.0f;
  for (size_t k = 0, n = colsum_chunks(rows); k < n; k++) {
    float p[K];
    colsum_chunk<K>(f, rows, cols, c, k, sh, p);
    if (threadIdx.y == 0)
      for (unsigned j = 0; j < K; j++)
        s[j] = __fadd_rn(s[j], p[j]);
  }
  if (threadIdx.y == 0 && c < cols) {
    o0[c] = s[0];
    if (K > 1)
      o1[c] = s[K - 1];
  }
}

/* out0[c] (and out1[c] when K == 2) = the column sums of f over rows x
 * cols, on `stream`, by the grid `mode` names (split falls back to serial,
 * see above). */
template <unsigned K, class F>
rp_status colsum_run(ColsumMode mode, const F &f, size_t rows, size_t cols,
                     float *out0, float *out1, void *stream, const char *what) {
  static_assert(K == 1 || K == 2, "one or two sums a column");
  if (cols == 0)
    return RP_OK;
  size_t chunks = colsum_chunks(rows);
  unsigned gx = (unsigned)((cols + kColsumCols - 1) / kColsumCols);
  dim3 block(kColsumCols, kColsumLanes);
  cudaStream_t s = as_stream(stream);
  void *ws = nullptr;
  size_t ws_bytes = 0;
  if (mode == ColsumMode::split) {
    rp_status st = rp_cuda_stream_scratch(stream, &ws, &ws_bytes);
    if (st != RP_OK)
      return st;
  }
  if (ws && K * chunks * cols <= ws_bytes / sizeof(float)) {
    float *part = static_cast<float *>(ws);
    colsum_part_k<K>
        <<<dim3(gx, (unsigned)chunks), block, 0, s>>>(f, rows, cols, part);
    rp_status st = RP_GPT_LAUNCHED(what);
    if (st != RP_OK)
      return st;
    colsum_finish_k<K><<<blocks_for(K * cols, 256), 256, 0, s>>>(
        part, chunks, cols, out0, out1);
  } else {
    colsum_serial_k<K><<<gx, block, 0, s>>>(f, rows, cols, out0, out1);
  }
  return RP_GPT_LAUNCHED(what);
}

} // namespace rp_gpt

#endif
