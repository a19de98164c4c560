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
 * split over rows into the stream's workspace slice, in an order fixed by
 * N, no atomics), after the GEMMs on the same stream. dinp uses beta =
 * accumulate, dW beta = 0.
 * Agreement with the CPU (CBLAS): GEMMs sum in another order, 1e-4 relative
 * to the largest |entry|; cuBLAS is bitwise reproducible for a toolkit,
 * architecture and SM count, so runs are deterministic. */
#include "gpt_cuda.cuh"

#include <stdlib.h>
#include <string.h>

using namespace rp_gpt;

rp_status rp_gpt::env_choice(const char *var, const char *first,
                             const char *second, const char *selects,
                             const char *what, int *out) {
  const char *e = getenv(var);
  *out = 0;
  if (!e || !*e || !strcmp(e, first))
    return RP_OK;
  if (!strcmp(e, second)) {
    *out = 1;
    return RP_OK;
  }
  return rp__err(RP_EINVAL, "%s: %s='%s': need %s or %s (%s)", what, var, e,
                 first, second, selects);
}

rp_status rp_gpt::colsum_mode(ColsumMode *mode, const char *what) {
  return env_enum("REPRISE_GPT_COLSUM", "split", "serial",
                  "the grid of the backward's column sums", what, mode);
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

/* dbias: row r's value of column c is dout[r, c]. */
struct BiasItem {
  const float *dy;
  size_t cols;
  __device__ void operator()(size_t r, size_t c, float *v) const {
    v[0] = dy[r * cols + c];
  }
};

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
  ColsumMode mode;
  rp_status st = colsum_mode(&mode, "rp_cuda_gpt_matmul_bwd");
  if (st == RP_OK)
    st = rp_cuda_gemm(0, 0, N, C, OC, 1.0f, dout, W, accumulate ? 1.0f : 0.0f,
                      dinp, stream);
  if (st == RP_OK)
    st = rp_cuda_gemm(1, 0, OC, C, N, 1.0f, dout, inp, 0.0f, dW, stream);
  if (st != RP_OK || !dbias || OC <= 0)
    return st;
  /* N == 0 still runs: dbias = 0, as on the CPU */
  size_t rows = N > 0 ? (size_t)N : 0, oc = (size_t)OC;
  return colsum_run<1>(mode, BiasItem{dout, oc}, rows, oc, dbias, nullptr,
                       stream, "rp_cuda_gpt_matmul_bwd: dbias");
}
