/* kernels/matmul.c — the linear layers on the CPU (contracts in
 * gpt_kernels.h): y = x W^T + b and its backward, every product through
 * rp_cpu_gemm (CBLAS, one thread per worker), bias sums in row order. */
#include "gpt_kernels.h"

#include "cpu_kernels.h"

void rp_cpu_gpt_matmul_fwd(const float *inp, const float *W, const float *bias,
                           float *out, int N, int C, int OC) {
  /* out[N, OC] = inp[N, C] W[OC, C]^T */
  rp_cpu_gemm(0, 1, N, OC, C, 1.0f, inp, W, 0.0f, out);
  if (bias)
    rp_cpu_bias_add(out, bias, (size_t)N, (size_t)OC);
}

void rp_cpu_gpt_matmul_bwd(const float *dout, const float *inp, const float *W,
                           float *dinp, float *dW, float *dbias, int N, int C,
                           int OC, int accumulate) {
  /* dinp[N, C] (+)= dout[N, OC] W[OC, C] */
  rp_cpu_gemm(0, 0, N, C, OC, 1.0f, dout, W, accumulate ? 1.0f : 0.0f, dinp);
  /* dW[OC, C] = dout^T inp */
  rp_cpu_gemm(1, 0, OC, C, N, 1.0f, dout, inp, 0.0f, dW);
  if (dbias)
    rp_cpu_bias_grad(dout, dbias, (size_t)N, (size_t)OC);
}
