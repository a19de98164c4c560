/* kernels/matmul.cu — CUDA launchers of the linear layers (gpt_kernels.h:
 * gpt.matmul_fwd, gpt.matmul_bwd): cuBLAS SGEMM through rp_cuda_gemm
 * (kernels/cuda_kernels.cu: the dlopen'ed cuBLAS, one handle and workspace
 * per device created before any capture, plain FP32 math without TF32).
 *
 * Row-major to cuBLAS: rp_cuda_gemm takes row-major operands and passes
 * cuBLAS (column-major) the transposed problem C^T = op(B)^T op(A)^T, B
 * first; a row-major X read as column-major is X^T, so no data moves.
 * With W[OC][C] as nn.Linear stores it:
 *   forward   out[N,OC]  = inp[N,C] W^T      gemm(N, T; m N,  n OC, k C)
 *   backward  dinp[N,C]  = dout[N,OC] W      gemm(N, N; m N,  n C,  k OC)
 *             dW[OC,C]   = dout^T inp        gemm(T, N; m OC, n C,  k N)
 * Bias: the forward first broadcasts bias into out (a kernel), then the
 * GEMM adds with beta = 1; dbias = column sums of dout (gpt_cuda.cuh:
 * blocks of REPRISE_GPT_COLSUM_COLS columns, default 32, fixed order, no
 * atomics; with 32 the order of rp_cuda_bias_grad). dinp uses beta =
 * accumulate, dW beta = 0.
 * Agreement with the CPU (CBLAS): GEMMs sum in another order, 1e-4 relative
 * to the largest |entry|; cuBLAS is bitwise reproducible for a toolkit,
 * architecture and SM count, so runs are deterministic. */
#include "gpt_cuda.cuh"

#include <stdlib.h>
#include <string.h>

using namespace rp_gpt;

rp_status rp_gpt::colsum_cols(unsigned *cols, const char *what) {
  const char *e = getenv("REPRISE_GPT_COLSUM_COLS");
  *cols = 32;
  if (!e || !*e || !strcmp(e, "32"))
    return RP_OK;
  if (!strcmp(e, "8") || !strcmp(e, "16")) {
    *cols = (unsigned)atoi(e);
    return RP_OK;
  }
  return rp__err(RP_EINVAL,
                 "%s: REPRISE_GPT_COLSUM_COLS='%s': need 8, 16 or 32 "
                 "(columns a block of the backward's column sums)",
                 what, e);
}

namespace {

constexpr unsigned kBiasThreads = 256;

/* out[r, c] = bias[c]: a block per row, threads over the columns. */
__global__ void bias_rows_k(const float *__restrict__ bias,
                            float *__restrict__ out, int N, int OC) {
  for (size_t r = blockIdx.x; r < (size_t)N; r += gridDim.x) {
    float *o = out + r * OC;
    for (int c = threadIdx.x; c < OC; c += blockDim.x)
      o[c] = bias[c];
  }
}

/* dbias[c] = sum_r dout[r, c]: the column sums of gpt_cuda.cuh. */
template <unsigned COLS>
__global__ void bias_grad_cols_k(const float *__restrict__ dy,
                                 float *__restrict__ db, size_t rows,
                                 size_t cols) {
  using cs = colsum<COLS>;
  __shared__ float part[cs::lanes][COLS + 1];
  size_t c = (size_t)blockIdx.x * COLS + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
    for (size_t r = threadIdx.y; r < rows; r += cs::lanes)
      acc += dy[r * cols + c];
  float s = cs::finish(acc, part);
  if (threadIdx.y == 0 && c < cols)
    db[c] = s;
}

template <unsigned COLS>
void bias_grad_cols(const float *dy, float *db, size_t rows, size_t cols,
                    cudaStream_t s) {
  bias_grad_cols_k<COLS>
      <<<colsum<COLS>::blocks(cols), dim3(COLS, colsum<COLS>::lanes), 0, s>>>(
          dy, db, rows, cols);
}

} // namespace

extern "C" rp_status rp_cuda_gpt_matmul_fwd(const float *inp, const float *W,
                                            const float *bias, float *out,
                                            int N, int C, int OC,
                                            void *stream) {
  if (N <= 0 || OC <= 0)
    return RP_OK;
  if (bias) {
    bias_rows_k<<<blocks_for((size_t)N, 1), kBiasThreads, 0,
                  as_stream(stream)>>>(bias, out, N, OC);
    rp_status st = RP_GPT_LAUNCHED("rp_cuda_gpt_matmul_fwd: bias");
    if (st != RP_OK)
      return st;
  }
  return rp_cuda_gemm(0, 1, N, OC, C, 1.0f, inp, W, bias ? 1.0f : 0.0f, out,
                      stream);
}

extern "C" rp_status rp_cuda_gpt_matmul_bwd(const float *dout, const float *inp,
                                            const float *W, float *dinp,
                                            float *dW, float *dbias, int N,
                                            int C, int OC, int accumulate,
                                            void *stream) {
  unsigned cols;
  rp_status st = colsum_cols(&cols, "rp_cuda_gpt_matmul_bwd");
  if (st == RP_OK)
    st = rp_cuda_gemm(0, 0, N, C, OC, 1.0f, dout, W, accumulate ? 1.0f : 0.0f,
                      dinp, stream);
  if (st == RP_OK)
    st = rp_cuda_gemm(1, 0, OC, C, N, 1.0f, dout, inp, 0.0f, dW, stream);
  if (st != RP_OK || !dbias || OC <= 0)
    return st;
  /* N == 0 still runs: dbias = 0, as on the CPU */
  size_t rows = N > 0 ? (size_t)N : 0, oc = (size_t)OC;
  cudaStream_t s = as_stream(stream);
  if (cols == 8)
    bias_grad_cols<8>(dout, dbias, rows, oc, s);
  else if (cols == 16)
    bias_grad_cols<16>(dout, dbias, rows, oc, s);
  else
    bias_grad_cols<32>(dout, dbias, rows, oc, s);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_matmul_bwd: dbias");
}
