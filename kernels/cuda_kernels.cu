/* kernels/cuda_kernels.cu — CUDA kernels and their C launchers; see
 * cuda_kernels.cuh for the contracts, tolerances and determinism. The math
 * and layouts are those of cpu_kernels.h (dense row-major f32). */
#include "cuda_kernels.cuh"
#include "engine/cuda_check.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <mutex>
#include <pthread.h>
#include <stdio.h>

/* engine/util.h is C-only (_Atomic); this is its rp__err prototype. */
extern "C" rp_status rp__err(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

namespace {

/* ---------------------------------------------------------------------- */
/* Launch shapes and error reporting */

constexpr unsigned kThreads = 256;    /* elementwise and warp-per-row */
constexpr unsigned kSumThreads = 256; /* one-block loss sum */
/* one-block xent (32 warps); the kernels launched with 1024 threads
 * declare it in __launch_bounds__, so ptxas keeps them within the 64
 * registers a thread that a 1024-thread block can have */
constexpr unsigned kFusedThreads = 1024;
constexpr unsigned kFull = 0xffffffffu;
/* Grid cap: 65536 blocks x 256 threads cover 16M elements per sweep, which
 * fills any current GPU; the grid-stride loops cover larger n. */
constexpr size_t kMaxBlocks = 65536;

unsigned blocks_for(size_t items, unsigned per_block) {
  size_t b = (items + per_block - 1) / per_block;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

/* Every CUDA call goes through the project's one wrapper
 * (engine/cuda_check.h): what, file:line and the error name in the detail;
 * a sticky error marks the process's device lost, so the runtime that ran
 * the kernel turns unusable at its next call. */
#define check(e, what) rp__cuda_check(nullptr, (e), (what), __FILE__, __LINE__)
/* After a <<<>>> launch: configuration errors show up here. */
#define launched(what) check(cudaGetLastError(), what)

/* ---------------------------------------------------------------------- */
/* cuBLAS, loaded when first needed. Linking libcublas costs every process
 * about 75 ms at start-up (libcublasLt's relocations and constructors),
 * whether or not it ever runs a GEMM on a GPU, so `reprise version`, `dump`
 * and CPU training would pay it too. It is dlopen'ed by the first
 * rp_cuda_blas_init instead (RP_CUBLAS_SONAME, then the toolkit's copy
 * RP_CUBLAS_PATH), and these are the only entry points reprise calls. */

struct BlasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_sb;
  decltype(&cublasSgemmBatched) sgemm_b;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

BlasApi g_api;
/* pthread_once, not std::call_once: that one's weak libstdc++ helper would
 * be exported by libreprise.so, which exports only reprise.h's names */
pthread_once_t g_api_once = PTHREAD_ONCE_INIT;
char g_api_why[512]; /* empty: loaded */

/* Looks up one symbol into *fn; records why not in g_api_why. */
template <typename F> bool blas_sym(void *h, const char *name, F *fn) {
  *fn = reinterpret_cast<F>(dlsym(h, name));
  if (!*fn)
    snprintf(g_api_why, sizeof g_api_why, "%s lacks %s", RP_CUBLAS_SONAME,
             name);
  return *fn != nullptr;
}

void blas_load(void) {
  void *h = dlopen(RP_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    h = dlopen(RP_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(g_api_why, sizeof g_api_why, "cannot load cuBLAS (%s, %s): %s",
             RP_CUBLAS_SONAME, RP_CUBLAS_PATH, e ? e : "not found");
    return;
  }
  BlasApi a{};
  if (!blas_sym(h, "cublasCreate_v2", &a.create) ||
      !blas_sym(h, "cublasDestroy_v2", &a.destroy) ||
      !blas_sym(h, "cublasSetStream_v2", &a.set_stream) ||
      !blas_sym(h, "cublasSetWorkspace_v2", &a.set_workspace) ||
      !blas_sym(h, "cublasSgemm_v2", &a.sgemm) ||
      !blas_sym(h, "cublasSgemmStridedBatched", &a.sgemm_sb) ||
      !blas_sym(h, "cublasSgemmBatched", &a.sgemm_b) ||
      !blas_sym(h, "cublasGetStatusName", &a.status_name) ||
      !blas_sym(h, "cublasGetStatusString", &a.status_string))
    return; /* the handle stays open: harmless, and never unloaded */
  g_api = a;
}

/* The loaded API, or RP_EBACKEND naming what failed (every call). */
rp_status blas_api(const char *what) {
  pthread_once(&g_api_once, blas_load);
  if (g_api_why[0])
    return rp__err(RP_EBACKEND, "%s: %s", what, g_api_why);
  return RP_OK;
}

rp_status blas_check(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return RP_OK;
  /* a status comes from a call: the API is loaded */
  return rp__err(RP_EBACKEND, "%s: %s (%s)", what, g_api.status_name(s),
                 g_api.status_string(s));
}

cudaStream_t as_stream(void *s) {
  return static_cast<cudaStream_t>(s);
}

__device__ inline size_t global_tid() {
  return blockIdx.x * (size_t)blockDim.x + threadIdx.x;
}
__device__ inline size_t global_threads() {
  return (size_t)gridDim.x * blockDim.x;
}

/* ---------------------------------------------------------------------- */
/* Elementwise kernels. Explicit __f*_rn intrinsics where a multiply feeds an
 * add: nvcc would otherwise contract them into an FMA, and the CPU build
 * (C11, no contraction) rounds twice; with them the results are equal. */

__global__ void relu_fwd_k(const float *x, float *y, size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    float v = x[i];
    y[i] = v > 0.0f || v != v ? v : 0.0f;
  }
}

__global__ void relu_bwd_k(const float *x, const float *dy, float *dx,
                           size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads())
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void bias_add_k(float *x, const float *bias, size_t rows,
                           size_t cols) {
  size_t n = rows * cols;
  for (size_t i = global_tid(); i < n; i += global_threads())
    x[i] += bias[i % cols];
}

__global__ void sgd_k(float *w, const float *g, float *v, size_t n, float lr,
                      float mu, const float *lr_dev) {
  float rate = lr_dev ? *lr_dev : lr;
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    float vi = __fadd_rn(__fmul_rn(mu, v[i]), g[i]); /* v = mu*v + g */
    v[i] = vi;
    w[i] = __fsub_rn(w[i], __fmul_rn(rate, vi)); /* w -= lr*v */
  }
}

__global__ void fill_k(float *x, float value, size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads())
    x[i] = value;
}

__global__ void scale_k(float *x, float alpha, size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads())
    x[i] *= alpha;
}

__global__ void axpy_k(float alpha, const float *x, float *y, size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads())
    y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
}

__global__ void axpby_k(float a, const float *x, float b, float *y, size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads())
    y[i] = __fadd_rn(__fmul_rn(a, x[i]), __fmul_rn(b, y[i]));
}

/* ---------------------------------------------------------------------- */
/* bias_grad: db[c] = sum_r dy[r, c]. Block = 32 columns x 8 row lanes: the
 * 32 threads of a warp read 32 consecutive columns of one row (coalesced);
 * row lane y sums rows y, y+32, ... in order; lane 0 adds the 32 partials in
 * lane order. Fixed order for given sizes: deterministic. 32 row lanes
 * (1024 threads a block): a block covers only 32 columns, so its rows are
 * what keeps it busy (8 lanes left a 256 x 64 gradient at ~28 us under
 * ncu on an H100, 1024 x 256 at ~100 us). */

constexpr unsigned kBgCols = 32, kBgLanes = 32;
constexpr unsigned kBgThreads = kBgCols * kBgLanes; /* __launch_bounds__ */

__global__ void __launch_bounds__(kBgThreads)
    bias_grad_k(const float *__restrict__ dy, float *__restrict__ db,
                size_t rows, size_t cols) {
  __shared__ float part[kBgLanes][kBgCols + 1]; /* +1: no bank conflicts */
  size_t c = (size_t)blockIdx.x * kBgCols + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
#pragma unroll 4
    for (size_t r = threadIdx.y; r < rows; r += kBgLanes)
      acc += dy[r * cols + c];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float s = part[0][threadIdx.x];
    for (unsigned y = 1; y < kBgLanes; y++)
      s += part[y][threadIdx.x];
    db[c] = s;
  }
}

/* ---------------------------------------------------------------------- */
/* Softmax cross-entropy. A warp owns a row: lanes stride over its columns,
 * then butterfly shuffles (xor) combine the lanes. Every lane ends with the
 * same bits (each step adds the same two values, and float + commutes). */

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFull, v, o);
  return v;
}

/* Called by all 32 lanes of a warp for one row. m = max x, s = sum
 * exp(x - m) (terms in (0, 1], s >= 1: stable for logits like +-1000);
 * writes p = exp(x - m) / s and returns log(s) - (x[label] - m), or NaN for
 * a label outside [0, cols). x[label] is read before p is written, so p may
 * alias x. */
__device__ float xent_row(const float *x, int32_t label, float *p, size_t cols,
                          unsigned lane) {
  bool ok = label >= 0 && (size_t)label < cols;
  float xl = ok ? x[label] : 0.0f;
  float m = -INFINITY;
  for (size_t c = lane; c < cols; c += 32)
    m = fmaxf(m, x[c]);
  m = warp_max(m);
  float s = 0.0f;
  for (size_t c = lane; c < cols; c += 32) {
    float e = expf(x[c] - m);
    p[c] = e;
    s += e;
  }
  s = warp_sum(s);
  for (size_t c = lane; c < cols; c += 32)
    p[c] = p[c] / s; /* each lane rereads only what it wrote */
  return ok ? logf(s) - (xl - m) : __int_as_float(0x7fc00000); /* NaN */
}

/* Many blocks: warp w of the grid takes rows w, w + warps, ...; lane 0
 * stores the row's loss. The loop bound is warp-uniform, so every shuffle
 * has its whole warp. */
__global__ void xent_rows_k(const float *logits, const int32_t *labels,
                            float *probs, float *row_loss, size_t rows,
                            size_t cols) {
  unsigned lane = threadIdx.x & 31;
  size_t warps = global_threads() / 32;
  for (size_t r = global_tid() / 32; r < rows; r += warps) {
    float l =
        xent_row(logits + r * cols, labels[r], probs + r * cols, cols, lane);
    if (lane == 0)
      row_loss[r] = l;
  }
}

/* One block: *loss = (sum of row_loss in a fixed tree order) / norm. Sums in
 * f64 like the CPU kernel, so the two agree closely. */
__global__ void loss_sum_k(const float *row_loss, size_t rows, float norm,
                           float *loss) {
  __shared__ double sh[kSumThreads];
  unsigned t = threadIdx.x;
  double acc = 0.0;
  for (size_t i = t; i < rows; i += kSumThreads)
    acc += row_loss[i];
  sh[t] = acc;
  __syncthreads();
  for (unsigned half = kSumThreads / 2; half > 0; half /= 2) {
    if (t < half)
      sh[t] += sh[t + half];
    __syncthreads();
  }
  if (t == 0)
    *loss = (float)(sh[0] / norm);
}

/* One block of 32 warps without scratch: warp w takes rows w, w + 32, ...
 * and lane 0 keeps its running sum (in row order); thread 0 adds the warps'
 * sums in warp order. */
__global__ void __launch_bounds__(kFusedThreads)
    xent_fused_k(const float *logits, const int32_t *labels, float *probs,
                 float *loss, size_t rows, size_t cols, float norm) {
  __shared__ double sh[kFusedThreads / 32];
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  unsigned nwarps = blockDim.x / 32;
  double acc = 0.0;
  for (size_t r = warp; r < rows; r += nwarps)
    acc += xent_row(logits + r * cols, labels[r], probs + r * cols, cols, lane);
  if (lane == 0)
    sh[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (unsigned w = 0; w < nwarps; w++)
      s += sh[w];
    *loss = (float)(s / norm);
  }
}

/* dlogits[r, c] = (p[r, c] - (c == label_r)) / norm; NaN for a bad label. */
__global__ void xent_bwd_k(const float *probs, const int32_t *labels,
                           float *dlogits, size_t rows, size_t cols,
                           float norm) {
  size_t n = rows * cols;
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    size_t r = i / cols, c = i % cols;
    int32_t label = labels[r];
    bool ok = label >= 0 && (size_t)label < cols;
    float y = (size_t)label == c ? 1.0f : 0.0f;
    dlogits[i] = ok ? (probs[i] - y) / norm : __int_as_float(0x7fc00000);
  }
}

/* ---------------------------------------------------------------------- */
/* Argmax accuracy: warp per row. Each lane scans its columns in order
 * keeping the first maximum; the warp then keeps the larger value, and on a
 * tie the smaller column: the row's first maximum, as on the CPU. The count
 * is an integer sum, exact in any order. */

__device__ inline void argmax_merge(float &v, long long &i, float ov,
                                    long long oi) {
  bool take = oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i));
  if (take) {
    v = ov;
    i = oi;
  }
}

__global__ void argmax_k(const float *x, const int32_t *labels, int32_t *count,
                         size_t rows, size_t cols) {
  unsigned lane = threadIdx.x & 31;
  size_t warps = global_threads() / 32;
  for (size_t r = global_tid() / 32; r < rows; r += warps) {
    const float *row = x + r * cols;
    float v = 0.0f;
    long long i = -1; /* -1: this lane has no column */
    for (size_t c = lane; c < cols; c += 32)
      if (i < 0 || row[c] > v) {
        v = row[c];
        i = (long long)c;
      }
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(kFull, v, o);
      long long oi = __shfl_xor_sync(kFull, i, o);
      argmax_merge(v, i, ov, oi);
    }
    if (lane == 0 && i >= 0 && i == (long long)labels[r])
      atomicAdd(count, 1);
  }
}

/* ---------------------------------------------------------------------- */
/* Fused kernels */

__global__ void bias_act_k(float *z, const float *bias, float *a, size_t rows,
                           size_t cols) {
  size_t n = rows * cols;
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    float v = z[i] + bias[i % cols];
    z[i] = v;
    if (a)
      a[i] = v > 0.0f || v != v ? v : 0.0f;
  }
}

/* bias_grad_k's shape and order, computing dz on the way. */
__global__ void __launch_bounds__(kBgThreads)
    relu_bwd_bias_k(const float *__restrict__ a, const float *__restrict__ da,
                    float *__restrict__ dz, float *__restrict__ db, size_t rows,
                    size_t cols) {
  __shared__ float part[kBgLanes][kBgCols + 1];
  size_t c = (size_t)blockIdx.x * kBgCols + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
#pragma unroll 4
    for (size_t r = threadIdx.y; r < rows; r += kBgLanes) {
      size_t i = r * cols + c;
      float v = a[i] > 0.0f ? da[i] : 0.0f;
      dz[i] = v;
      acc += v;
    }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float s = part[0][threadIdx.x];
    for (unsigned y = 1; y < kBgLanes; y++)
      s += part[y][threadIdx.x];
    db[c] = s;
  }
}

/* db[c] = column sums of d (rows x cols), by the whole block (barriers
 * inside: every thread calls it): column chunks of 32, lane = column, warp
 * y sums rows y, y + nwarps, ... in order, warp 0 adds the partials in
 * warp order (deterministic). part: shared scratch of nwarps x 33. */
__device__ void column_sums(const float *d, float *db, size_t rows, size_t cols,
                            float (*part)[33]) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  unsigned nwarps = blockDim.x / 32;
  for (size_t c0 = 0; c0 < cols; c0 += 32) {
    size_t c = c0 + lane;
    float cs = 0.0f;
    for (size_t r = warp; c < cols && r < rows; r += nwarps)
      cs += d[r * cols + c];
    part[warp][lane] = cs;
    __syncthreads();
    if (warp == 0 && c < cols) {
      float s = part[0][lane];
      for (unsigned y = 1; y < nwarps; y++)
        s += part[y][lane];
      db[c] = s;
    }
    __syncthreads(); /* part is reused by the next chunk */
  }
}

/* One block of kFusedThreads: warp w takes rows w, w + 32, ... (softmax
 * into dlogits, then the backward formula on the lane's own columns);
 * thread 0 sums the warps' losses in warp order. After a barrier (which
 * also makes the block's global writes visible to the block), column
 * chunks of 32: lane = column, warp y sums rows y, y + 32, ... in order,
 * warp 0 adds the 32 partials in order. */
__global__ void __launch_bounds__(kFusedThreads)
    softmax_xent_k(const float *logits, const int32_t *labels, float *dlogits,
                   float *db, float *loss, size_t rows, size_t cols,
                   float norm) {
  __shared__ double sh[kFusedThreads / 32];
  __shared__ float part[kFusedThreads / 32][33];
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  unsigned nwarps = blockDim.x / 32;
  double acc = 0.0;
  for (size_t r = warp; r < rows; r += nwarps) {
    float *d = dlogits + r * cols;
    int32_t label = labels[r];
    acc += xent_row(logits + r * cols, label, d, cols, lane);
    bool ok = label >= 0 && (size_t)label < cols;
    for (size_t c = lane; c < cols; c += 32) { /* the lane's own p[c] */
      float y = (size_t)label == c ? 1.0f : 0.0f;
      d[c] = ok ? (d[c] - y) / norm : __int_as_float(0x7fc00000);
    }
  }
  if (lane == 0)
    sh[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (unsigned w = 0; w < nwarps; w++)
      s += sh[w];
    *loss = (float)(s / norm);
  }
  if (db)
    column_sums(dlogits, db, rows, cols, part);
}

/* Few classes (cols <= kSmallCols): a thread owns a row — the warp-per-row
 * kernel above leaves 29 of 32 lanes idle at 3 classes and walks 32 rows
 * per warp at batch 1024 (~68 us under ncu on an H100). One block of
 * kFusedThreads: thread t takes rows t, t + 1024, ... (the row formulas of
 * xent_row, in column order); the loss adds each thread's rows in order
 * (f64), then the threads in a fixed tree; db as softmax_xent_k. */
constexpr size_t kSmallCols = 32;

__global__ void __launch_bounds__(kFusedThreads)
    softmax_xent_small_k(const float *__restrict__ logits,
                         const int32_t *__restrict__ labels,
                         float *__restrict__ dlogits, float *db, float *loss,
                         size_t rows, size_t cols, float norm) {
  __shared__ double sh[kFusedThreads];
  __shared__ float part[kFusedThreads / 32][33];
  unsigned t = threadIdx.x;
  double acc = 0.0;
  for (size_t r = t; r < rows; r += blockDim.x) {
    const float *x = logits + r * cols;
    float *d = dlogits + r * cols;
    int32_t label = labels[r];
    bool ok = label >= 0 && (size_t)label < cols;
    float xl = ok ? x[label] : 0.0f;
    float m = -INFINITY;
    for (size_t c = 0; c < cols; c++)
      m = fmaxf(m, x[c]);
    float s = 0.0f;
    for (size_t c = 0; c < cols; c++)
      s += expf(x[c] - m);
    for (size_t c = 0; c < cols; c++) {
      float p = expf(x[c] - m) / s;
      float y = (size_t)label == c ? 1.0f : 0.0f;
      d[c] = ok ? (p - y) / norm : __int_as_float(0x7fc00000);
    }
    acc +=
        ok ? (double)(logf(s) - (xl - m)) : (double)__int_as_float(0x7fc00000);
  }
  sh[t] = acc;
  __syncthreads(); /* also: the block's dlogits writes are visible */
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half)
      sh[t] += sh[t + half];
    __syncthreads();
  }
  if (t == 0)
    *loss = (float)(sh[0] / norm);
  if (db)
    column_sums(dlogits, db, rows, cols, part);
}

struct SgdTable {
  float *w[RP_CUDA_SGD_MULTI_MAX];
  const float *g[RP_CUDA_SGD_MULTI_MAX];
  float *v[RP_CUDA_SGD_MULTI_MAX];
  size_t n[RP_CUDA_SGD_MULTI_MAX];
};

/* Grid row blockIdx.y updates tensor blockIdx.y with sgd_k's operations. */
__global__ void sgd_multi_k(SgdTable t, float lr, float mu,
                            const float *lr_dev) {
  float rate = lr_dev ? *lr_dev : lr;
  unsigned k = blockIdx.y;
  float *w = t.w[k], *v = t.v[k];
  const float *g = t.g[k];
  size_t n = t.n[k], stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float vi = __fadd_rn(__fmul_rn(mu, v[i]), g[i]);
    v[i] = vi;
    w[i] = __fsub_rn(w[i], __fmul_rn(rate, vi));
  }
}

/* Copies `units` units (4 bytes when words, else 1) of the selected batch;
 * an index outside [0, batches) copies nothing. */
__global__ void gather_rows_k(char *dst, const char *src, size_t batch_bytes,
                              long long batches, int index,
                              const int32_t *index_dev, bool words) {
  long long idx = index_dev ? *index_dev : index;
  if (idx < 0 || idx >= batches)
    return;
  const char *from = src + (size_t)idx * batch_bytes;
  if (words) {
    size_t n = batch_bytes / 4;
    const uint32_t *s = reinterpret_cast<const uint32_t *>(from);
    uint32_t *d = reinterpret_cast<uint32_t *>(dst);
    for (size_t i = global_tid(); i < n; i += global_threads())
      d[i] = s[i];
  } else {
    for (size_t i = global_tid(); i < batch_bytes; i += global_threads())
      dst[i] = from[i];
  }
}

} // namespace

/* ---------------------------------------------------------------------- */
/* Launchers */

extern "C" rp_status rp_cuda_relu_fwd(const float *x, float *y, size_t n,
                                      void *stream) {
  if (n == 0)
    return RP_OK;
  relu_fwd_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(x, y,
                                                                          n);
  return launched("rp_cuda_relu_fwd");
}

extern "C" rp_status rp_cuda_relu_bwd(const float *x, const float *dy,
                                      float *dx, size_t n, void *stream) {
  if (n == 0)
    return RP_OK;
  relu_bwd_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      x, dy, dx, n);
  return launched("rp_cuda_relu_bwd");
}

extern "C" rp_status rp_cuda_bias_add(float *x, const float *bias, size_t rows,
                                      size_t cols, void *stream) {
  size_t n = rows * cols;
  if (n == 0)
    return RP_OK;
  bias_add_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      x, bias, rows, cols);
  return launched("rp_cuda_bias_add");
}

extern "C" rp_status rp_cuda_bias_grad(const float *dy, float *db, size_t rows,
                                       size_t cols, void *stream) {
  if (cols == 0)
    return RP_OK;
  /* rows == 0 still runs: it writes db = 0, as the CPU kernel does. */
  size_t nb = (cols + kBgCols - 1) / kBgCols;
  if (nb > 0x7fffffffu)
    return rp__err(RP_EBACKEND, "rp_cuda_bias_grad: %zu columns", cols);
  bias_grad_k<<<(unsigned)nb, dim3(kBgCols, kBgLanes), 0, as_stream(stream)>>>(
      dy, db, rows, cols);
  return launched("rp_cuda_bias_grad");
}

extern "C" rp_status rp_cuda_xent_fwd(const float *logits,
                                      const int32_t *labels, float *probs,
                                      float *row_loss, float *loss, size_t rows,
                                      size_t cols, float norm, void *stream) {
  cudaStream_t s = as_stream(stream);
  if (rows == 0) /* the mean over no rows contributes 0, as on the CPU */
    return check(cudaMemsetAsync(loss, 0, sizeof(float), s),
                 "rp_cuda_xent_fwd: cudaMemsetAsync");
  if (!row_loss) {
    xent_fused_k<<<1, kFusedThreads, 0, s>>>(logits, labels, probs, loss, rows,
                                             cols, norm);
    return launched("rp_cuda_xent_fwd (one block)");
  }
  /* kThreads / 32 rows per block. */
  xent_rows_k<<<blocks_for(rows, kThreads / 32), kThreads, 0, s>>>(
      logits, labels, probs, row_loss, rows, cols);
  rp_status st = launched("rp_cuda_xent_fwd (rows)");
  if (st != RP_OK)
    return st;
  loss_sum_k<<<1, kSumThreads, 0, s>>>(row_loss, rows, norm, loss);
  return launched("rp_cuda_xent_fwd (sum)");
}

extern "C" rp_status rp_cuda_xent_bwd(const float *probs, const int32_t *labels,
                                      float *dlogits, size_t rows, size_t cols,
                                      float norm, void *stream) {
  size_t n = rows * cols;
  if (n == 0)
    return RP_OK;
  xent_bwd_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      probs, labels, dlogits, rows, cols, norm);
  return launched("rp_cuda_xent_bwd");
}

extern "C" rp_status rp_cuda_sgd_momentum(float *w, const float *g, float *v,
                                          size_t n, float lr, float mu,
                                          const float *lr_dev, void *stream) {
  if (n == 0)
    return RP_OK;
  sgd_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      w, g, v, n, lr, mu, lr_dev);
  return launched("rp_cuda_sgd_momentum");
}

extern "C" rp_status rp_cuda_fill(float *x, float value, size_t n,
                                  void *stream) {
  if (n == 0)
    return RP_OK;
  fill_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(x, value,
                                                                      n);
  return launched("rp_cuda_fill");
}

extern "C" rp_status rp_cuda_scale(float *x, float alpha, size_t n,
                                   void *stream) {
  if (n == 0)
    return RP_OK;
  scale_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(x, alpha,
                                                                       n);
  return launched("rp_cuda_scale");
}

extern "C" rp_status rp_cuda_axpy(float alpha, const float *x, float *y,
                                  size_t n, void *stream) {
  if (n == 0)
    return RP_OK;
  axpy_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(alpha, x,
                                                                      y, n);
  return launched("rp_cuda_axpy");
}

extern "C" rp_status rp_cuda_axpby(float a, const float *x, float b, float *y,
                                   size_t n, void *stream) {
  if (n == 0)
    return RP_OK;
  axpby_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(a, x, b,
                                                                       y, n);
  return launched("rp_cuda_axpby");
}

extern "C" rp_status rp_cuda_copy_async(void *dst, const void *src,
                                        size_t bytes, void *stream) {
  if (bytes == 0)
    return RP_OK;
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                               as_stream(stream)),
               "rp_cuda_copy_async: cudaMemcpyAsync");
}

extern "C" rp_status rp_cuda_argmax_correct(const float *x,
                                            const int32_t *labels,
                                            int32_t *count, size_t rows,
                                            size_t cols, void *stream) {
  cudaStream_t s = as_stream(stream);
  /* Stream-ordered zeroing (a memset node under capture), then the count. */
  rp_status st = check(cudaMemsetAsync(count, 0, sizeof(int32_t), s),
                       "rp_cuda_argmax_correct: cudaMemsetAsync");
  if (st != RP_OK || rows == 0 || cols == 0)
    return st;
  argmax_k<<<blocks_for(rows, kThreads / 32), kThreads, 0, s>>>(
      x, labels, count, rows, cols);
  return launched("rp_cuda_argmax_correct");
}

extern "C" rp_status rp_cuda_bias_act(float *z, const float *bias, float *a,
                                      size_t rows, size_t cols, void *stream) {
  size_t n = rows * cols;
  if (n == 0)
    return RP_OK;
  bias_act_k<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      z, bias, a, rows, cols);
  return launched("rp_cuda_bias_act");
}

extern "C" rp_status rp_cuda_relu_bwd_bias_grad(const float *a, const float *da,
                                                float *dz, float *db,
                                                size_t rows, size_t cols,
                                                void *stream) {
  if (cols == 0)
    return RP_OK;
  /* rows == 0 still runs: db = 0, as on the CPU */
  size_t nb = (cols + kBgCols - 1) / kBgCols;
  if (nb > 0x7fffffffu)
    return rp__err(RP_EBACKEND, "rp_cuda_relu_bwd_bias_grad: %zu columns",
                   cols);
  relu_bwd_bias_k<<<(unsigned)nb, dim3(kBgCols, kBgLanes), 0,
                    as_stream(stream)>>>(a, da, dz, db, rows, cols);
  return launched("rp_cuda_relu_bwd_bias_grad");
}

extern "C" rp_status rp_cuda_softmax_xent(const float *logits,
                                          const int32_t *labels, float *dlogits,
                                          float *db, float *loss, size_t rows,
                                          size_t cols, float norm,
                                          void *stream) {
  /* rows == 0 still runs: loss = 0 and db = 0, as on the CPU */
  if (cols <= kSmallCols)
    softmax_xent_small_k<<<1, kFusedThreads, 0, as_stream(stream)>>>(
        logits, labels, dlogits, db, loss, rows, cols, norm);
  else
    softmax_xent_k<<<1, kFusedThreads, 0, as_stream(stream)>>>(
        logits, labels, dlogits, db, loss, rows, cols, norm);
  return launched("rp_cuda_softmax_xent");
}

extern "C" rp_status rp_cuda_sgd_multi(float *const *w, const float *const *g,
                                       float *const *v, const size_t *n,
                                       int count, float lr, float mu,
                                       const float *lr_dev, void *stream) {
  if (count < 1 || count > RP_CUDA_SGD_MULTI_MAX)
    return rp__err(RP_EBACKEND, "rp_cuda_sgd_multi: %d tensors (1..%d)", count,
                   RP_CUDA_SGD_MULTI_MAX);
  SgdTable t = {};
  size_t most = 0;
  for (int i = 0; i < count; i++) {
    t.w[i] = w[i];
    t.g[i] = g[i];
    t.v[i] = v[i];
    t.n[i] = n[i];
    most = n[i] > most ? n[i] : most;
  }
  if (most == 0)
    return RP_OK;
  dim3 grid(blocks_for(most, kThreads), (unsigned)count);
  sgd_multi_k<<<grid, kThreads, 0, as_stream(stream)>>>(t, lr, mu, lr_dev);
  return launched("rp_cuda_sgd_multi");
}

extern "C" rp_status rp_cuda_gather_rows(void *dst, const void *src_base,
                                         size_t batch_bytes, int64_t batches,
                                         int32_t index, const void *index_dev,
                                         void *stream) {
  if (batch_bytes == 0)
    return RP_OK;
  /* 4-byte units when every batch and both ends are 4-byte aligned */
  bool words = batch_bytes % 4 == 0 && (uintptr_t)dst % 4 == 0 &&
               (uintptr_t)src_base % 4 == 0;
  size_t units = words ? batch_bytes / 4 : batch_bytes;
  gather_rows_k<<<blocks_for(units, kThreads), kThreads, 0,
                  as_stream(stream)>>>(
      static_cast<char *>(dst), static_cast<const char *>(src_base),
      batch_bytes, (long long)batches, index,
      static_cast<const int32_t *>(index_dev), words);
  return launched("rp_cuda_gather_rows");
}

/* ---------------------------------------------------------------------- */
/* cuBLAS: one handle and one workspace (RP_CUBLAS_WS_SLOTS slices) per
 * device, created outside capture. */

namespace {

/* A workspace slice and the stream it serves (NULL: free). */
struct WsSlot {
  void *stream = nullptr;
  char *ws = nullptr;
};

struct BlasDev {
  std::atomic<bool> ready{false}; /* release-stored after setup */
  std::mutex lock; /* one stream/workspace/enqueue sequence at a time */
  cublasHandle_t handle = nullptr;
  char *ws = nullptr;  /* the first RP_CUBLAS_WS_SLOTS slices, one block */
  size_t ws_bytes = 0; /* a slice's size (rp_cuda_blas_ws_bytes) */
  WsSlot slot[RP_CUBLAS_WS_MAX_SLOTS];
  unsigned nslots = 0; /* slot[0..nslots) have their memory */
};

BlasDev g_blas[RP_CUDA_MAX_DEVICES];
std::mutex g_blas_init_lock; /* serializes init and shutdown */

/* With the device current: handle, then workspace; the handle is destroyed
 * again when the workspace cannot be allocated. */
rp_status blas_create(BlasDev *d) {
  cublasHandle_t h = nullptr;
  void *ws = nullptr;
  rp_status st = blas_api("rp_cuda_blas_init");
  if (st != RP_OK)
    return st;
  int dev = 0, major = 0;
  st = check(cudaGetDevice(&dev), "rp_cuda_blas_init: cudaGetDevice");
  if (st == RP_OK)
    st = check(
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
        "rp_cuda_blas_init: cudaDeviceGetAttribute");
  size_t bytes = 0;
  if (st == RP_OK)
    st = rp_cuda_blas_ws_bytes(major, &bytes);
  if (st != RP_OK)
    return st;
  st = blas_check(g_api.create(&h), "rp_cuda_blas_init: cublasCreate");
  if (st != RP_OK)
    return st;
  st = check(cudaMalloc(&ws, RP_CUBLAS_WS_SLOTS * bytes),
             "rp_cuda_blas_init: cudaMalloc(workspace)");
  if (st != RP_OK) {
    g_api.destroy(h);
    return st;
  }
  d->handle = h;
  d->ws = static_cast<char *>(ws);
  for (unsigned i = 0; i < RP_CUBLAS_WS_SLOTS; i++)
    d->slot[i] = WsSlot{nullptr, d->ws + (size_t)i * bytes};
  d->ws_bytes = bytes;
  d->nslots = RP_CUBLAS_WS_SLOTS;
  return RP_OK;
}

/* The slot of `stream`: its own, else a free one taken for it, else (when
 * grow, outside capture, with the device current) a new one; NULL when none
 * can be had. Caller holds d->lock. */
WsSlot *ws_bind(BlasDev *d, void *stream, bool grow) {
  if (!stream)      /* the legacy stream: no slice; it would match a free one */
    return nullptr; /* that a created stream may claim meanwhile */
  WsSlot *free_slot = nullptr;
  for (unsigned i = 0; i < d->nslots; i++) {
    if (d->slot[i].stream == stream)
      return &d->slot[i];
    if (!d->slot[i].stream && !free_slot)
      free_slot = &d->slot[i];
  }
  if (!free_slot && grow && d->nslots < RP_CUBLAS_WS_MAX_SLOTS) {
    void *ws = nullptr;
    if (cudaMalloc(&ws, d->ws_bytes) != cudaSuccess) {
      (void)cudaGetLastError(); /* not sticky: the GEMM runs without one */
      return nullptr;
    }
    free_slot = &d->slot[d->nslots++];
    free_slot->ws = static_cast<char *>(ws);
  }
  if (free_slot)
    free_slot->stream = stream;
  return free_slot;
}

/* The workspace slice of `stream` (see ws_bind; grows only outside
 * capture, which CUDA is asked about). Caller holds d->lock. */
rp_status stream_slot(BlasDev *d, void *stream, const char *what, void **ws,
                      size_t *bytes) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  rp_status st = check(cudaStreamIsCapturing(as_stream(stream), &cs), what);
  WsSlot *sl = st == RP_OK
                   ? ws_bind(d, stream, cs == cudaStreamCaptureStatusNone)
                   : nullptr;
  *ws = sl ? sl->ws : nullptr; /* none left: no workspace, not a shared one */
  *bytes = sl ? d->ws_bytes : 0;
  return st;
}

/* The current device's state, created now unless the stream is capturing. */
rp_status blas_dev_for(void *stream, BlasDev **out) {
  int dev = 0;
  rp_status st = check(cudaGetDevice(&dev), "rp_cuda_gemm: cudaGetDevice");
  if (st != RP_OK)
    return st;
  if (dev < 0 || dev >= RP_CUDA_MAX_DEVICES)
    return rp__err(RP_EBACKEND, "rp_cuda_gemm: device %d beyond %d", dev,
                   RP_CUDA_MAX_DEVICES);
  BlasDev *d = &g_blas[dev];
  if (!d->ready.load(std::memory_order_acquire)) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    st = check(cudaStreamIsCapturing(as_stream(stream), &cs),
               "rp_cuda_gemm: cudaStreamIsCapturing");
    if (st != RP_OK)
      return st;
    if (cs != cudaStreamCaptureStatusNone)
      return rp__err(RP_EBACKEND,
                     "rp_cuda_gemm: no cuBLAS state for device %d during "
                     "stream capture; call rp_cuda_blas_init (or "
                     "rp_kernels_register) before capturing",
                     dev);
    st = rp_cuda_blas_init(dev);
    if (st != RP_OK)
      return st;
  }
  *out = d;
  return RP_OK;
}

/* C = beta * C for the k == 0 / alpha == 0 cases (see rp_cpu_gemm). */
rp_status gemm_scale_only(float beta, float *c, size_t mn, void *stream) {
  if (beta == 0.0f)
    return rp_cuda_fill(c, 0.0f, mn, stream);
  return beta == 1.0f ? RP_OK : rp_cuda_scale(c, beta, mn, stream);
}

} // namespace

extern "C" rp_status rp_cuda_blas_ws_bytes(int cc_major, size_t *out) {
  const char *e = getenv("REPRISE_CUBLAS_WS_MIB");
  *out = cc_major == 9 ? RP_CUBLAS_WS_BYTES_HOPPER : RP_CUBLAS_WS_BYTES;
  if (!e || !*e)
    return RP_OK;
  char *end = nullptr;
  errno = 0;
  unsigned long v = strtoul(e, &end, 10);
  if (errno || *end || e[0] < '0' || e[0] > '9' || v < 1 || v > 1024)
    return rp__err(RP_EINVAL,
                   "REPRISE_CUBLAS_WS_MIB='%s': need a whole number of MiB "
                   "in 1..1024",
                   e);
  *out = (size_t)v << 20;
  return RP_OK;
}

extern "C" rp_status rp_cuda_blas_init(int device) {
  if (device < 0 || device >= RP_CUDA_MAX_DEVICES)
    return rp__err(RP_EBACKEND, "rp_cuda_blas_init: device %d out of range",
                   device);
  std::lock_guard<std::mutex> g(g_blas_init_lock);
  BlasDev *d = &g_blas[device];
  if (d->ready.load(std::memory_order_relaxed))
    return RP_OK;
  int prev = 0;
  rp_status st =
      check(cudaGetDevice(&prev), "rp_cuda_blas_init: cudaGetDevice");
  if (st != RP_OK)
    return st;
  st = check(cudaSetDevice(device), "rp_cuda_blas_init: cudaSetDevice");
  if (st == RP_OK)
    st = blas_create(d);
  cudaSetDevice(prev); /* the caller's device, whatever happened */
  if (st == RP_OK)     /* release: handle and ws are set before ready reads 1 */
    d->ready.store(true, std::memory_order_release);
  return st;
}

/* A new stream gets its slice now, outside capture, so that a capture on
 * it later finds one; a stream about to be destroyed gives its slice back
 * once its work (which may still use the slice) is done. Slices are found
 * by stream across devices: a destroyed stream's device need not be
 * current. */
extern "C" void rp_cuda_blas_stream_hook(void *stream, int created) {
  if (created) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 ||
        dev >= RP_CUDA_MAX_DEVICES) {
      (void)cudaGetLastError();
      return;
    }
    BlasDev *d = &g_blas[dev];
    if (!d->ready.load(std::memory_order_acquire))
      return; /* bound on its first GEMM instead */
    std::lock_guard<std::mutex> g(d->lock);
    (void)ws_bind(d, stream, true);
    return;
  }
  for (int i = 0; i < RP_CUDA_MAX_DEVICES; i++) {
    BlasDev *d = &g_blas[i];
    if (!d->ready.load(std::memory_order_acquire))
      continue;
    WsSlot *sl = nullptr;
    {
      std::lock_guard<std::mutex> g(d->lock);
      for (unsigned k = 0; k < d->nslots && !sl; k++)
        if (d->slot[k].stream == stream)
          sl = &d->slot[k];
    }
    if (!sl)
      continue;
    /* Outside the lock: other streams' GEMMs go on meanwhile. The slot
     * still names this stream, so nobody claims it before its work ends;
     * the stream gets no new work, since it is being destroyed. */
    if (cudaStreamSynchronize(as_stream(stream)) != cudaSuccess)
      (void)cudaGetLastError(); /* a broken stream: its work is over */
    std::lock_guard<std::mutex> g(d->lock);
    if (sl->stream == stream) /* shutdown may have cleared it meanwhile */
      sl->stream = nullptr;
    return;
  }
}

extern "C" void rp_cuda_blas_shutdown(void) {
  std::lock_guard<std::mutex> g(g_blas_init_lock);
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess)
    prev = 0;
  for (int i = 0; i < RP_CUDA_MAX_DEVICES; i++) {
    BlasDev *d = &g_blas[i];
    if (!d->ready.load(std::memory_order_acquire))
      continue;
    std::lock_guard<std::mutex> dl(d->lock); /* no GEMM enqueue in flight */
    cudaSetDevice(i);
    g_api.destroy(d->handle); /* ready: the API is loaded */
    cudaFree(d->ws);
    for (unsigned k = RP_CUBLAS_WS_SLOTS; k < d->nslots; k++)
      cudaFree(d->slot[k].ws);
    for (unsigned k = 0; k < d->nslots; k++)
      d->slot[k] = WsSlot{};
    d->handle = nullptr;
    d->ws = nullptr;
    d->nslots = 0;
    d->ready.store(false, std::memory_order_release);
  }
  cudaSetDevice(prev);
}

namespace {

/* Binds stream and its workspace slice to the device's handle (caller holds
 * d->lock). Order matters: cublasSetStream resets the workspace to cuBLAS's
 * own pool, which allocates and breaks capture. */
rp_status blas_bind(BlasDev *d, void *stream, const char *what) {
  void *ws = nullptr;
  size_t ws_bytes = 0;
  rp_status st = stream_slot(d, stream, "rp_cuda_gemm: cudaStreamIsCapturing",
                             &ws, &ws_bytes);
  if (st != RP_OK)
    return st;
  st = blas_check(g_api.set_stream(d->handle, as_stream(stream)), what);
  if (st == RP_OK)
    st = blas_check(g_api.set_workspace(d->handle, ws, ws_bytes), what);
  return st;
}

} // namespace

extern "C" rp_status rp_cuda_stream_scratch(void *stream, void **ws,
                                            size_t *bytes) {
  *ws = nullptr;
  *bytes = 0;
  if (!stream) /* the legacy stream has no slice (see ws_bind) */
    return RP_OK;
  int dev = 0;
  rp_status st =
      check(cudaGetDevice(&dev), "rp_cuda_stream_scratch: cudaGetDevice");
  if (st != RP_OK || dev < 0 || dev >= RP_CUDA_MAX_DEVICES)
    return st;
  if (!g_blas[dev].ready.load(std::memory_order_acquire)) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    st = check(cudaStreamIsCapturing(as_stream(stream), &cs),
               "rp_cuda_stream_scratch: cudaStreamIsCapturing");
    if (st != RP_OK || cs != cudaStreamCaptureStatusNone)
      return st; /* no state to make under capture: no scratch */
  }
  BlasDev *d = nullptr;
  st = blas_dev_for(stream, &d); /* makes the state outside capture */
  if (st != RP_OK)
    return st;
  std::lock_guard<std::mutex> g(d->lock);
  return stream_slot(d, stream, "rp_cuda_stream_scratch: cudaStreamIsCapturing",
                     ws, bytes);
}

/* Row-major C (m x n, row length n) read as column-major is C^T (n x m,
 * ld n). C^T = op(B)^T * op(A)^T, and a row-major operand read as
 * column-major is already transposed: so cuBLAS gets B first with B's
 * trans flag and ld (its stored row length), then A likewise. */
extern "C" rp_status rp_cuda_gemm(int trans_a, int trans_b, int m, int n, int k,
                                  float alpha, const float *a, const float *b,
                                  float beta, float *c, void *stream) {
  if (m <= 0 || n <= 0)
    return RP_OK;
  if (k <= 0 || alpha == 0.0f)
    return gemm_scale_only(beta, c, (size_t)m * (size_t)n, stream);
  BlasDev *d = nullptr;
  rp_status st = blas_dev_for(stream, &d);
  if (st != RP_OK)
    return st;
  int lda = trans_a ? m : k, ldb = trans_b ? k : n;
  std::lock_guard<std::mutex> g(d->lock);
  st = blas_bind(d, stream, "rp_cuda_gemm: cublasSetStream/Workspace");
  if (st == RP_OK)
    st = blas_check(g_api.sgemm(d->handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                &alpha, b, ldb, a, lda, &beta, c, n),
                    "rp_cuda_gemm: cublasSgemm");
  return st;
}

/* The same row-major to column-major mapping as rp_cuda_gemm, per batch
 * entry, with the leading dimensions (stored row lengths) and the batch
 * strides given. */
extern "C" rp_status
rp_cuda_gemm_strided_batched(int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda,
                             long long stride_a, const float *b, int ldb,
                             long long stride_b, float beta, float *c, int ldc,
                             long long stride_c, int batch, void *stream) {
  if (m <= 0 || n <= 0 || batch <= 0)
    return RP_OK;
  if (k <= 0 || alpha == 0.0f) {
    if (ldc != n || stride_c != (long long)m * n)
      return rp__err(RP_EBACKEND,
                     "rp_cuda_gemm_strided_batched: k = %d or alpha = 0 "
                     "needs a dense C",
                     k);
    return gemm_scale_only(beta, c, (size_t)m * (size_t)n * (size_t)batch,
                           stream);
  }
  BlasDev *d = nullptr;
  rp_status st = blas_dev_for(stream, &d);
  if (st != RP_OK)
    return st;
  std::lock_guard<std::mutex> g(d->lock);
  st = blas_bind(d, stream,
                 "rp_cuda_gemm_strided_batched: cublasSetStream/Workspace");
  if (st == RP_OK)
    st = blas_check(g_api.sgemm_sb(d->handle,
                                   trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                   &alpha, b, ldb, stride_b, a, lda, stride_a,
                                   &beta, c, ldc, stride_c, batch),
                    "rp_cuda_gemm_strided_batched: cublasSgemmStridedBatched");
  return st;
}

/* The same mapping with a pointer per batch entry (one cublasSgemmBatched):
 * the tables live in device memory and are read when the GEMM runs. */
extern "C" rp_status rp_cuda_gemm_batched(int trans_a, int trans_b, int m,
                                          int n, int k, float alpha,
                                          const float *const *a, int lda,
                                          const float *const *b, int ldb,
                                          float beta, float *const *c, int ldc,
                                          int batch, void *stream) {
  if (m <= 0 || n <= 0 || batch <= 0)
    return RP_OK;
  if (k <= 0)
    return rp__err(RP_EBACKEND, "rp_cuda_gemm_batched: k = %d", k);
  BlasDev *d = nullptr;
  rp_status st = blas_dev_for(stream, &d);
  if (st != RP_OK)
    return st;
  std::lock_guard<std::mutex> g(d->lock);
  st = blas_bind(d, stream, "rp_cuda_gemm_batched: cublasSetStream/Workspace");
  if (st == RP_OK)
    st =
        blas_check(g_api.sgemm_b(d->handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                 &alpha, b, ldb, a, lda, &beta, c, ldc, batch),
                   "rp_cuda_gemm_batched: cublasSgemmBatched");
  return st;
}

/* ---------------------------------------------------------------------- */
/* Host helpers for tests and benches */

extern "C" rp_status rp_cuda_device_count(int *out) {
  *out = 0;
  return check(cudaGetDeviceCount(out), "cudaGetDeviceCount");
}

extern "C" rp_status rp_cuda_stream_create(void **out) {
  cudaStream_t s = nullptr;
  rp_status st = check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                       "cudaStreamCreateWithFlags");
  *out = st == RP_OK ? static_cast<void *>(s) : nullptr;
  if (st == RP_OK)
    rp_cuda_blas_stream_hook(s, 1);
  return st;
}

extern "C" rp_status rp_cuda_stream_destroy(void *stream) {
  if (!stream)
    return RP_OK;
  rp_cuda_blas_stream_hook(stream, 0);
  return check(cudaStreamDestroy(as_stream(stream)), "cudaStreamDestroy");
}

extern "C" rp_status rp_cuda_stream_sync(void *stream) {
  return check(cudaStreamSynchronize(as_stream(stream)),
               "cudaStreamSynchronize");
}

extern "C" rp_status rp_cuda_buf_alloc(void **out, size_t bytes) {
  *out = nullptr;
  return check(cudaMalloc(out, bytes ? bytes : 1), "cudaMalloc");
}

extern "C" void rp_cuda_buf_free(void *p) {
  cudaFree(p);
}

extern "C" rp_status rp_cuda_buf_put(void *dst_dev, const void *src_host,
                                     size_t bytes) {
  /* From pageable memory cudaMemcpy may return before the DMA out of its
   * staging buffer lands; work on a non-blocking stream would then read
   * the old bytes. The put is whole when this returns. */
  rp_status st =
      check(cudaMemcpy(dst_dev, src_host, bytes, cudaMemcpyHostToDevice),
            "cudaMemcpy(host to device)");
  return st != RP_OK ? st
                     : check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

extern "C" rp_status rp_cuda_buf_get(void *dst_host, const void *src_dev,
                                     size_t bytes) {
  return check(cudaMemcpy(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy(device to host)");
}

extern "C" rp_status rp_cuda_capture_begin(void *stream) {
  return check(
      cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeGlobal),
      "cudaStreamBeginCapture");
}

extern "C" rp_status rp_cuda_capture_end_launch(void *stream, int launches) {
  cudaStream_t s = as_stream(stream);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  rp_status st = check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  if (st != RP_OK)
    return st;
  st = check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int i = 0; st == RP_OK && i < launches; i++)
    st = check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
  if (st == RP_OK)
    st = check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (exec)
    cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return st;
}
