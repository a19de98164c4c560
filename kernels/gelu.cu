/* kernels/gelu.cu — CUDA launchers of the GELU kernels (gpt_kernels.h:
 * gpt.bias_gelu_fwd, gpt.gelu_bwd), tanh approximation, computed as the
 * CPU kernel does (kernels/gelu.c):
 *   gelu(x)  = x h,  h = 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + exp(-2u)),
 *              u = s (x + 0.044715 x^3), s = sqrt(2 / pi);
 *   gelu'(x) = h + 2 x h (1 - h) s (1 + 3 0.044715 x^2).
 * Elementwise, the CPU kernel's operations in its order, each with explicit
 * round-to-nearest intrinsics (no FMA contraction); device expf differs
 * from glibc's by a few ulp, so they agree with the CPU to a relative 1e-5
 * of max(|value|, 1). Deterministic. bias_gelu_fwd: a block per row
 * (grid-stride), threads over columns; gelu_bwd: grid-stride over n (dpre
 * may be dout: each element is read before it is written, by the same
 * thread). */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr unsigned kGeluThreads = 256;
constexpr float kGeluS = 0.7978845608028654f; /* sqrt(2 / pi) */
constexpr float kGeluK = 0.044715f;

/* h = sigma(2u) = 0.5 (1 + tanh(u)), u = s (x + k x^3): the CPU kernel's
 * 1 / (1 + exp(-2 s (x + k x x x))), left to right as C evaluates it. */
__device__ inline float half_one_plus_tanh(float x) {
  float cube = __fmul_rn(__fmul_rn(__fmul_rn(kGeluK, x), x), x);
  float z = __fmul_rn(-2.0f * kGeluS, __fadd_rn(x, cube));
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(z)));
}

/* h + 2 x h (1 - h) s (1 + 3 k x^2) */
__device__ inline float gelu_grad(float x) {
  float h = half_one_plus_tanh(x);
  float poly = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(3.0f * kGeluK, x), x));
  float t = __fmul_rn(__fmul_rn(2.0f, x), h);
  t = __fmul_rn(__fmul_rn(__fmul_rn(t, __fsub_rn(1.0f, h)), kGeluS), poly);
  return __fadd_rn(h, t);
}

__global__ void bias_gelu_fwd_k(float *pre, const float *__restrict__ bias,
                                float *out, int rows, int cols) {
  for (size_t r = blockIdx.x; r < (size_t)rows; r += gridDim.x) {
    float *p = pre + r * cols, *o = out + r * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = __fadd_rn(p[c], bias[c]);
      p[c] = v;
      o[c] = __fmul_rn(v, half_one_plus_tanh(v));
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
