/* kernels/gelu.c — GELU, tanh approximation (nn.GELU(approximate="tanh")),
 * on the CPU (contracts in gpt_kernels.h):
 *   gelu(x) = 0.5 x (1 + tanh(s (x + 0.044715 x^3))), s = sqrt(2 / pi). */
#include "gpt_kernels.h"

#include <math.h>

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_K 0.044715f

static float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(GELU_S * (x + GELU_K * x * x * x)));
}

void rp_cpu_gpt_bias_gelu_fwd(float *pre, const float *bias, float *out,
                              int rows, int cols) {
  size_t c = (size_t)cols;
  for (size_t r = 0; r < (size_t)rows; r++) {
    float *p = pre + r * c, *o = out + r * c;
    for (size_t i = 0; i < c; i++) {
      float x = p[i] + bias[i];
      p[i] = x;
      o[i] = gelu(x);
    }
  }
}

/* d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 k x^2), t the tanh
 * above (1 - t^2 = sech^2, which cannot overflow as cosh can). */
void rp_cpu_gpt_gelu_bwd(const float *pre, const float *dout, float *dpre,
                         int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float x = pre[i];
    float t = tanhf(GELU_S * (x + GELU_K * x * x * x));
    float g = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_S *
                                      (1.0f + 3.0f * GELU_K * x * x);
    dpre[i] = dout[i] * g;
  }
}
