/* kernels/gelu.cu — CUDA launchers of the GELU kernels (gpt_kernels.h:
 * gpt.bias_gelu_fwd, gpt.gelu_bwd), tanh approximation:
 *   gelu(x)  = 0.5 x (1 + tanh(s (x + 0.044715 x^3))), s = sqrt(2 / pi);
 *   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 0.044715 x^2),
 *              t = tanh(s (x + 0.044715 x^3)).
 * Elementwise, the CPU kernel's operations in its order, each with explicit
 * round-to-nearest intrinsics (no FMA contraction); tanhf differs from
 * glibc's by a few ulp, so they
 * agree with the CPU to a relative 1e-5 of max(|value|, 1) (where 1 +
 * tanh cancels, the absolute error stays at a few ulp of 1). Deterministic.
 * bias_gelu_fwd: a block per row (grid-stride), threads over columns;
 * gelu_bwd: grid-stride over n (dpre may be dout: each element is read
 * before it is written, by the same thread). */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr unsigned kGeluThreads = 256;
constexpr float kGeluS = 0.7978845608028654f; /* sqrt(2 / pi) */
constexpr float kGeluK = 0.044715f;

__device__ inline float gelu_arg(float x) {
  /* s * (x + k * x * x * x), evaluated left to right as C does */
  float cube = __fmul_rn(__fmul_rn(__fmul_rn(kGeluK, x), x), x);
  return __fmul_rn(kGeluS, __fadd_rn(x, cube));
}

__device__ inline float gelu(float x) {
  float t = tanhf(gelu_arg(x));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, t));
}

__device__ inline float gelu_grad(float x) {
  float t = tanhf(gelu_arg(x));
  float sech2 = __fsub_rn(1.0f, __fmul_rn(t, t)); /* cannot overflow */
  float poly = __fadd_rn(
      1.0f, __fmul_rn(__fmul_rn(3.0f * kGeluK, x), x)); /* 1 + 3k x^2 */
  float left = __fmul_rn(0.5f, __fadd_rn(1.0f, t));
  float right =
      __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(0.5f, x), sech2), kGeluS), poly);
  return __fadd_rn(left, right);
}

__global__ void bias_gelu_fwd_k(float *pre, const float *__restrict__ bias,
                                float *out, int rows, int cols) {
  for (size_t r = blockIdx.x; r < (size_t)rows; r += gridDim.x) {
    float *p = pre + r * cols, *o = out + r * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = __fadd_rn(p[c], bias[c]);
      p[c] = v;
      o[c] = gelu(v);
    }
  }
}

__global__ void gelu_bwd_k(const float *pre, const float *dout, float *dpre,
                           size_t n) {
  for (size_t i = global_tid(); i < n; i += global_threads())
    dpre[i] = __fmul_rn(dout[i], gelu_grad(pre[i]));
}

} // namespace

extern "C" rp_status rp_cuda_gpt_bias_gelu_fwd(float *pre, const float *bias,
                                               float *out, int rows, int cols,
                                               void *stream) {
  if (rows <= 0 || cols <= 0)
    return RP_OK;
  bias_gelu_fwd_k<<<blocks_for((size_t)rows, 1), kGeluThreads, 0,
                    as_stream(stream)>>>(pre, bias, out, rows, cols);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_bias_gelu_fwd");
}

extern "C" rp_status rp_cuda_gpt_gelu_bwd(const float *pre, const float *dout,
                                          float *dpre, int64_t n,
                                          void *stream) {
  if (n <= 0)
    return RP_OK;
  gelu_bwd_k<<<blocks_for((size_t)n, kGeluThreads), kGeluThreads, 0,
               as_stream(stream)>>>(pre, dout, dpre, (size_t)n);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_gelu_bwd");
}
