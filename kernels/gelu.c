/* kernels/gelu.c — GELU, tanh approximation (nn.GELU(approximate="tanh")),
 * on the CPU (contracts in gpt_kernels.h):
 *   gelu(x) = 0.5 x (1 + tanh(u)), u = s (x + 0.044715 x^3), s = sqrt(2/pi).
 * Computed as x * sigma(2u) with sigma(z) = 1 / (1 + exp(-z)), the same
 * function (0.5 (1 + tanh(u)) = sigma(2u)): one expf instead of glibc's
 * tanhf (about 9 times slower here), and no cancellation in 1 + tanh for
 * x << 0. exp(-2u) overflows to inf for x << 0, giving sigma = 0. The
 * exp is rp_vexpf (vexpf.h), so the loops vectorise. */
#include "gpt_kernels.h"

#include "vexpf.h"

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K 0.044715f

/* sigma(2u) = 0.5 (1 + tanh(u)) */
static float half_one_plus_tanh(float x) {
  return 1.0f / (1.0f + rp_vexpf(-2.0f * GELU_S * (x + GELU_K * x * x * x)));
}

static inline void bias_gelu_fwd(float *pre, const float *bias, float *out,
                                 int rows, int cols) {
  size_t c = (size_t)cols;
  for (size_t r = 0; r < (size_t)rows; r++) {
    float *restrict p = pre + r * c, *restrict o = out + r * c;
    for (size_t i = 0; i < c; i++) {
      float x = p[i] + bias[i];
      p[i] = x;
      o[i] = x * half_one_plus_tanh(x);
    }
  }
}

/* d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 k x^2) with t =
 * tanh(u); in terms of h = 0.5 (1 + t): 1 - t^2 = 4 h (1 - h), so
 * d gelu / dx = h + 2 x h (1 - h) s (1 + 3 k x^2). */
static inline void gelu_bwd(const float *pre, const float *dout, float *dpre,
                            int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float x = pre[i];
    float h = half_one_plus_tanh(x);
    float g =
        h + 2.0f * x * h * (1.0f - h) * GELU_S * (1.0f + 3.0f * GELU_K * x * x);
    dpre[i] = dout[i] * g;
  }
}

RP_VEC_DISPATCH(rp_cpu_gpt_bias_gelu_fwd, bias_gelu_fwd,
                (float *pre, const float *bias, float *out, int rows, int cols),
                (pre, bias, out, rows, cols))

RP_VEC_DISPATCH(rp_cpu_gpt_gelu_bwd, gelu_bwd,
                (const float *pre, const float *dout, float *dpre, int64_t n),
                (pre, dout, dpre, n))
