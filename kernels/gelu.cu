/* kernels/gelu.cu — CUDA launchers of the GELU kernels (gpt_kernels.h:
 * gpt.bias_gelu_fwd, gpt.gelu_bwd), tanh approximation, computed as the
 * CPU kernel does (kernels/gelu.c):
 *   gelu(x)  = x h,  h = 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + exp(-2u)),
 *              u = s (x + 0.044715 x^3), s = sqrt(2 / pi);
 *   gelu'(x) = h + 2 x h (1 - h) s (1 + 3 0.044715 x^2) (the second term
 *              with x clamped to [-1e4, 1e4], where it is 0 beyond).
 * Elementwise, the CPU kernel's operations in its order, each with explicit
 * round-to-nearest intrinsics (no FMA contraction); device expf differs
 * from glibc's by a few ulp, so they agree with the CPU to a relative 1e-5
 * of max(|value|, 1). Deterministic. bias_gelu_fwd: a block per row
 * (grid-stride), threads over columns; gelu_bwd: grid-stride over n (dpre
 * may be dout: each element is read before it is written, by the same
 * thread). Both move float4s where the pointers and sizes allow (an
 * elementwise kernel is bound by memory traffic), the same bits. */
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

/* Beyond |x| = kGeluFlat, h is exactly 1 (x > 0) or 0 (x < 0) in float:
 * the gradient's second term is 0 there. */
constexpr float kGeluFlat = 1e4f;

/* h + 2 x h (1 - h) s (1 + 3 k x^2), the second term with x clamped to
 * [-kGeluFlat, kGeluFlat] as on the CPU: the same bits where |x| is within
 * it, and h (1 or 0) rather than 0 * inf = NaN where x^2 would overflow
 * (|x| above about 5e19). NaN stays NaN (h is NaN). */
__device__ inline float gelu_grad(float x) {
  float h = half_one_plus_tanh(x);
  float xc = fminf(fmaxf(x, -kGeluFlat), kGeluFlat);
  float poly = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(3.0f * kGeluK, xc), xc));
  float t = __fmul_rn(__fmul_rn(2.0f, xc), h);
  t = __fmul_rn(__fmul_rn(__fmul_rn(t, __fsub_rn(1.0f, h)), kGeluS), poly);
  return __fadd_rn(h, t);
}

__device__ inline float bias_gelu(float *p, float b) {
  float v = __fadd_rn(*p, b);
  *p = v;
  return __fmul_rn(v, half_one_plus_tanh(v));
}

/* vec: cols a multiple of 4 and every pointer 16-byte aligned (the
 * launcher checks), then each thread takes 4 columns at a time as float4
 * (the same operations per element). */
__global__ void bias_gelu_fwd_k(float *pre, const float *__restrict__ bias,
                                float *out, int rows, int cols, int vec) {
  for (size_t r = blockIdx.x; r < (size_t)rows; r += gridDim.x) {
    float *p = pre + r * cols, *o = out + r * cols;
    if (vec) {
      for (int c = 4 * threadIdx.x; c < cols; c += 4 * blockDim.x) {
        float4 v = *reinterpret_cast<float4 *>(p + c), g;
        const float4 b = *reinterpret_cast<const float4 *>(bias + c);
        g.x = bias_gelu(&v.x, b.x), g.y = bias_gelu(&v.y, b.y);
        g.z = bias_gelu(&v.z, b.z), g.w = bias_gelu(&v.w, b.w);
        *reinterpret_cast<float4 *>(p + c) = v;
        *reinterpret_cast<float4 *>(o + c) = g;
      }
    } else {
      for (int c = threadIdx.x; c < cols; c += blockDim.x)
        o[c] = bias_gelu(p + c, bias[c]);
    }
  }
}

/* n4 float4s (0 unless every pointer is 16-byte aligned), then the
 * elements from 4 n4 on one at a time. dpre may be dout: a thread reads
 * its elements before it writes them. */
__global__ void gelu_bwd_k(const float *pre, const float *dout, float *dpre,
                           size_t n4, size_t n) {
  for (size_t i = global_tid(); i < n4; i += global_threads()) {
    const float4 x = reinterpret_cast<const float4 *>(pre)[i];
    const float4 g = reinterpret_cast<const float4 *>(dout)[i];
    float4 r;
    r.x = __fmul_rn(g.x, gelu_grad(x.x));
    r.y = __fmul_rn(g.y, gelu_grad(x.y));
    r.z = __fmul_rn(g.z, gelu_grad(x.z));
    r.w = __fmul_rn(g.w, gelu_grad(x.w));
    reinterpret_cast<float4 *>(dpre)[i] = r;
  }
  for (size_t i = 4 * n4 + global_tid(); i < n; i += global_threads())
    dpre[i] = __fmul_rn(dout[i], gelu_grad(pre[i]));
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

} // namespace

extern "C" rp_status rp_cuda_gpt_bias_gelu_fwd(float *pre, const float *bias,
                                               float *out, int rows, int cols,
                                               void *stream) {
  if (rows <= 0 || cols <= 0)
    return RP_OK;
  int vec =
      cols % 4 == 0 && aligned16(pre) && aligned16(bias) && aligned16(out);
  bias_gelu_fwd_k<<<blocks_for((size_t)rows, 1), kGeluThreads, 0,
                    as_stream(stream)>>>(pre, bias, out, rows, cols, vec);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_bias_gelu_fwd");
}

extern "C" rp_status rp_cuda_gpt_gelu_bwd(const float *pre, const float *dout,
                                          float *dpre, int64_t n,
                                          void *stream) {
  if (n <= 0)
    return RP_OK;
  size_t n4 =
      aligned16(pre) && aligned16(dout) && aligned16(dpre) ? (size_t)n / 4 : 0;
  gelu_bwd_k<<<blocks_for(n4 ? n4 : (size_t)n, kGeluThreads), kGeluThreads, 0,
               as_stream(stream)>>>(pre, dout, dpre, n4, (size_t)n);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_gelu_bwd");
}
