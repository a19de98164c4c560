/* kernels/layernorm.cu — CUDA launchers of the LayerNorm kernels
 * (gpt_kernels.h: gpt.layernorm_fwd, gpt.residual_layernorm_fwd,
 * gpt.layernorm_bwd).
 *
 * Forward: a warp per row (8 rows a block of 256, grid-stride over rows).
 * Lane l takes columns l, l + 32, ...; mean = (sum x) / C, then the biased
 * variance from a second pass over (x - mean)^2 (two passes, as the CPU
 * kernel: no cancellation), rstd = 1 / sqrt(var + eps), the sums and the
 * square root in f64 as on the CPU, then out = (x - mean) * rstd * w + b
 * with explicit round-to-nearest operations (no FMA contraction). Sums:
 * lane-strided then a warp butterfly, a fixed order.
 * The residual variant writes res = a + r in the first pass and reads it
 * back (each lane its own columns). Rows of up to 128 columns keep the
 * lane's 4 columns in registers (ln_row_reg: one read of the input, the
 * same operations in the same order, hence the same bits); wider rows
 * reread them from memory (ln_row). On an NVIDIA H200 (Nsight Compute,
 * build 5608426 against 6b4cee4) the register form took 4.8 us a call for
 * 1024 rows of 128 against 5.5 us, but 47 us for 16384 rows of 384 (12
 * values a lane, 72 registers) against 39 us, hence the limit.
 *
 * Backward, two kernels:
 *  - dx: a warp per row: dnorm = w * dout, xhat = (x - mean) * rstd,
 *    dx (= or +=) rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat))
 *    (the two means summed in f64, as on the CPU); dnorm and xhat kept in
 *    registers for rows of up to 128 columns, as the forward;
 *  - dw, db: the column sums of gpt_cuda.cuh (chunks of rows, split over
 *    the grid through the stream's workspace slice, in an order fixed by
 *    N: deterministic, no atomics; it differs from the CPU's row order,
 *    hence a relative 1e-4 bound against it). */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr unsigned kLnThreads = 256; /* 8 rows (warps) a block */

/* One row, by the 32 lanes of a warp. a: the input (x, or the residual
 * stream's a); r: NULL, or the residual branch (then res = a + r is
 * written and normalized). */
__device__ void ln_row(const float *a, const float *r, float *res,
                       const float *__restrict__ w, const float *__restrict__ b,
                       float *out, float *mean, float *rstd, size_t row, int C,
                       float eps, unsigned lane) {
  const float *x = a + row * C;
  if (r) {
    const float *y = r + row * C;
    float *z = res + row * C;
    for (int c = lane; c < C; c += 32)
      z[c] = x[c] + y[c];
    x = z; /* each lane rereads only what it wrote */
  }
  double s = 0.0;
  for (int c = lane; c < C; c += 32)
    s += x[c];
  float m = (float)(warp_sum_d(s) / (double)C);
  double v = 0.0;
  for (int c = lane; c < C; c += 32) {
    double d = (double)__fsub_rn(x[c], m);
    v += d * d;
  }
  v = warp_sum_d(v);
  float rs = (float)(1.0 / sqrt(v / (double)C + (double)eps));
  float *o = out + row * C;
  for (int c = lane; c < C; c += 32) {
    float n = __fmul_rn(__fsub_rn(x[c], m), rs);
    o[c] = __fadd_rn(__fmul_rn(n, w[c]), b[c]);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

/* ln_row with the lane's columns (at most V: C <= 32 V) in registers. */
template <int V>
__device__ void ln_row_reg(const float *a, const float *r, float *res,
                           const float *__restrict__ w,
                           const float *__restrict__ b, float *out, float *mean,
                           float *rstd, size_t row, int C, float eps,
                           unsigned lane) {
  float xv[V];
  const float *x = a + row * C;
  if (r) {
    const float *y = r + row * C;
    float *z = res + row * C;
#pragma unroll
    for (int j = 0; j < V; j++) {
      int c = lane + 32 * j;
      if (c < C)
        z[c] = xv[j] = x[c] + y[c];
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; j++) {
      int c = lane + 32 * j;
      if (c < C)
        xv[j] = x[c];
    }
  }
  double s = 0.0;
#pragma unroll
  for (int j = 0; j < V; j++)
    if (lane + 32 * j < (unsigned)C)
      s += xv[j];
  float m = (float)(warp_sum_d(s) / (double)C);
  double v = 0.0;
#pragma unroll
  for (int j = 0; j < V; j++)
    if (lane + 32 * j < (unsigned)C) {
      double d = (double)__fsub_rn(xv[j], m);
      v += d * d;
    }
  v = warp_sum_d(v);
  float rs = (float)(1.0 / sqrt(v / (double)C + (double)eps));
  float *o = out + row * C;
#pragma unroll
  for (int j = 0; j < V; j++) {
    int c = lane + 32 * j;
    if (c < C) {
      float n = __fmul_rn(__fsub_rn(xv[j], m), rs);
      o[c] = __fadd_rn(__fmul_rn(n, w[c]), b[c]);
    }
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

/* V > 0: rows of at most 32 V columns, in registers; V = 0: any width. */
template <int V>
__global__ void ln_fwd_k(const float *a, const float *r, float *res,
                         const float *__restrict__ w,
                         const float *__restrict__ b, float *out, float *mean,
                         float *rstd, int N, int C, float eps) {
  constexpr int K = V > 0 ? V : 1;
  unsigned lane = threadIdx.x & 31;
  size_t warps = global_threads() / 32;
  for (size_t row = global_tid() / 32; row < (size_t)N; row += warps)
    if (V > 0)
      ln_row_reg<K>(a, r, res, w, b, out, mean, rstd, row, C, eps, lane);
    else
      ln_row(a, r, res, w, b, out, mean, rstd, row, C, eps, lane);
}

/* V > 0: rows of at most 32 V columns, dnorm and xhat in registers;
 * V = 0: any width (both recomputed in the second pass). */
template <int V>
__global__ void
ln_bwd_dx_k(const float *__restrict__ dout, const float *__restrict__ x,
            const float *__restrict__ w, const float *__restrict__ mean,
            const float *__restrict__ rstd, float *dx, int N, int C,
            int accumulate) {
  constexpr int K = V > 0 ? V : 1;
  unsigned lane = threadIdx.x & 31;
  size_t warps = global_threads() / 32;
  for (size_t row = global_tid() / 32; row < (size_t)N; row += warps) {
    const float *dy = dout + row * C, *xr = x + row * C;
    float *d = dx + row * C;
    float m = mean[row], rs = rstd[row];
    float xh[K], dnv[K];
    double s1 = 0.0, s2 = 0.0;
    if (V > 0) {
#pragma unroll
      for (int j = 0; j < K; j++) {
        int c = lane + 32 * j;
        if (c < C) {
          xh[j] = __fmul_rn(__fsub_rn(xr[c], m), rs);
          dnv[j] = __fmul_rn(w[c], dy[c]);
          s1 += dnv[j];
          s2 += (double)dnv[j] * xh[j];
        }
      }
    } else {
      for (int c = lane; c < C; c += 32) {
        float xhat = __fmul_rn(__fsub_rn(xr[c], m), rs);
        float dn = __fmul_rn(w[c], dy[c]);
        s1 += dn;
        s2 += (double)dn * xhat;
      }
    }
    float dn_mean = (float)(warp_sum_d(s1) / (double)C);
    float dnx_mean = (float)(warp_sum_d(s2) / (double)C);
    if (V > 0) {
#pragma unroll
      for (int j = 0; j < K; j++) {
        int c = lane + 32 * j;
        if (c < C) {
          float v =
              __fsub_rn(__fsub_rn(dnv[j], dn_mean), __fmul_rn(xh[j], dnx_mean));
          v = __fmul_rn(v, rs);
          d[c] = accumulate ? __fadd_rn(d[c], v) : v;
        }
      }
    } else {
      for (int c = lane; c < C; c += 32) {
        float xhat = __fmul_rn(__fsub_rn(xr[c], m), rs);
        float dn = __fmul_rn(w[c], dy[c]);
        float v = __fsub_rn(__fsub_rn(dn, dn_mean), __fmul_rn(xhat, dnx_mean));
        v = __fmul_rn(v, rs);
        d[c] = accumulate ? __fadd_rn(d[c], v) : v;
      }
    }
  }
}

/* Rows of up to kLnRegCols columns take the kernels' register form (4
 * values a lane), wider ones the any-width form. */
constexpr int kLnRegCols = 128;

/* dw[c] = sum_r dout[r, c] * xhat[r, c], db[c] = sum_r dout[r, c]: row
 * r's two values of column c for the column sums of gpt_cuda.cuh. */
struct DwDbItem {
  const float *dout, *x, *mean, *rstd;
  size_t C;
  __device__ void operator()(size_t r, size_t c, float *v) const {
    size_t i = r * C + c;
    float dy = dout[i];
    float xhat = __fmul_rn(__fsub_rn(x[i], mean[r]), rstd[r]);
    v[0] = __fmul_rn(dy, xhat);
    v[1] = dy;
  }
};

rp_status ln_fwd(const float *a, const float *r, float *res, const float *w,
                 const float *b, float *out, float *mean, float *rstd, int N,
                 int C, float eps, void *stream, const char *what) {
  if (N <= 0 || C <= 0)
    return RP_OK;
  dim3 grid(blocks_for((size_t)N, kLnThreads / 32));
  cudaStream_t s = as_stream(stream);
  if (C <= kLnRegCols)
    ln_fwd_k<4><<<grid, kLnThreads, 0, s>>>(a, r, res, w, b, out, mean, rstd, N,
                                            C, eps);
  else
    ln_fwd_k<0><<<grid, kLnThreads, 0, s>>>(a, r, res, w, b, out, mean, rstd, N,
                                            C, eps);
  return RP_GPT_LAUNCHED(what);
}

} // namespace

extern "C" rp_status rp_cuda_gpt_layernorm_fwd(const float *x, const float *w,
                                               const float *b, float *out,
                                               float *mean, float *rstd, int N,
                                               int C, float eps, void *stream) {
  return ln_fwd(x, nullptr, nullptr, w, b, out, mean, rstd, N, C, eps, stream,
                "rp_cuda_gpt_layernorm_fwd");
}

extern "C" rp_status
rp_cuda_gpt_residual_layernorm_fwd(const float *a, const float *r, float *res,
                                   const float *w, const float *b, float *out,
                                   float *mean, float *rstd, int N, int C,
                                   float eps, void *stream) {
  return ln_fwd(a, r, res, w, b, out, mean, rstd, N, C, eps, stream,
                "rp_cuda_gpt_residual_layernorm_fwd");
}

extern "C" rp_status
rp_cuda_gpt_layernorm_bwd(const float *dout, const float *x, const float *w,
                          const float *mean, const float *rstd, float *dx,
                          float *dw, float *db, int N, int C, int accumulate,
                          void *stream) {
  ColsumMode mode;
  rp_status cst = colsum_mode(&mode, "rp_cuda_gpt_layernorm_bwd");
  if (cst != RP_OK || C <= 0)
    return cst;
  cudaStream_t s = as_stream(stream);
  if (N > 0) {
    dim3 grid(blocks_for((size_t)N, kLnThreads / 32));
    if (C <= kLnRegCols)
      ln_bwd_dx_k<4><<<grid, kLnThreads, 0, s>>>(dout, x, w, mean, rstd, dx, N,
                                                 C, accumulate);
    else
      ln_bwd_dx_k<0><<<grid, kLnThreads, 0, s>>>(dout, x, w, mean, rstd, dx, N,
                                                 C, accumulate);
    rp_status st = RP_GPT_LAUNCHED("rp_cuda_gpt_layernorm_bwd: dx");
    if (st != RP_OK)
      return st;
  }
  /* N == 0 still runs: dw = db = 0, as on the CPU */
  size_t n = N < 0 ? 0 : (size_t)N;
  return colsum_run<2>(mode, DwDbItem{dout, x, mean, rstd, (size_t)C}, n,
                       (size_t)C, dw, db, stream,
                       "rp_cuda_gpt_layernorm_bwd: dw, db");
}
