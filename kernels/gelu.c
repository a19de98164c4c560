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

/* Beyond |x| = GELU_FLAT, h is exactly 1 (x > 0) or 0 (x < 0) in float,
 * so h (1 - h) and the gradient's second term below are 0 there. */
#define GELU_FLAT 1e4f

/* d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 k x^2) with t =
 * tanh(u); in terms of h = 0.5 (1 + t): 1 - t^2 = 4 h (1 - h), so
 * d gelu / dx = h + 2 x h (1 - h) s (1 + 3 k x^2). The second term takes
 * x clamped to [-GELU_FLAT, GELU_FLAT]: the same bits where |x| is within
 * it, and 0 rather than 0 * inf = NaN where x^2 would overflow (|x| above
 * about 5e19): the gradient is h there, 1 or 0, as the limits. NaN stays
 * NaN (h is NaN). */
static inline void gelu_bwd(const float *pre, const float *dout, float *dpre,
                            int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float x = pre[i];
    float h = half_one_plus_tanh(x);
    /* quiet comparisons, as vexpf.h's: the selects may become blends */
    float xc = __builtin_isgreater(x, GELU_FLAT) ? GELU_FLAT : x;
    xc = __builtin_isless(xc, -GELU_FLAT) ? -GELU_FLAT : xc;
    float g = h + 2.0f * xc * h * (1.0f - h) * GELU_S *
                      (1.0f + 3.0f * GELU_K * xc * xc);
    dpre[i] = dout[i] * g;
  }
}

RP_VEC_DISPATCH(rp_cpu_gpt_bias_gelu_fwd, bias_gelu_fwd,
                (float *pre, const float *bias, float *out, int rows, int cols),
                (pre, bias, out, rows, cols))

RP_VEC_DISPATCH(rp_cpu_gpt_gelu_bwd, gelu_bwd,
                (const float *pre, const float *dout, float *dpre, int64_t n),
                (pre, dout, dpre, n))
