/* kernels/layernorm.c — LayerNorm on the CPU (contracts in gpt_kernels.h),
 * as torch.nn.LayerNorm: biased variance, eps inside the square root. The
 * row statistics are accumulated in double, in column order; the column
 * sums of the backward in row order. */
#include "gpt_kernels.h"

#include <math.h>
#include <string.h>

/* One row: mean and rstd of x[0..C), then out = (x - mean) * rstd * w + b. */
static void ln_row(const float *x, const float *w, const float *b, float *out,
                   float *mean, float *rstd, size_t C, float eps) {
  double s = 0.0;
  for (size_t i = 0; i < C; i++)
    s += x[i];
  float m = (float)(s / (double)C);
  double v = 0.0;
  for (size_t i = 0; i < C; i++) {
    double d = (double)(x[i] - m);
    v += d * d;
  }
  float r = (float)(1.0 / sqrt(v / (double)C + (double)eps));
  for (size_t i = 0; i < C; i++)
    out[i] = (x[i] - m) * r * w[i] + b[i];
  *mean = m;
  *rstd = r;
}

void rp_cpu_gpt_layernorm_fwd(const float *x, const float *w, const float *b,
                              float *out, float *mean, float *rstd, int N,
                              int C, float eps) {
  size_t c = (size_t)C;
  for (size_t r = 0; r < (size_t)N; r++)
    ln_row(x + r * c, w, b, out + r * c, &mean[r], &rstd[r], c, eps);
}

void rp_cpu_gpt_residual_layernorm_fwd(const float *a, const float *r,
                                       float *res, const float *w,
                                       const float *b, float *out, float *mean,
                                       float *rstd, int N, int C, float eps) {
  size_t c = (size_t)C;
  for (size_t row = 0; row < (size_t)N; row++) {
    const float *ar = a + row * c, *rr = r + row * c;
    float *s = res + row * c;
    for (size_t i = 0; i < c; i++)
      s[i] = ar[i] + rr[i];
    ln_row(s, w, b, out + row * c, &mean[row], &rstd[row], c, eps);
  }
}

/* Per row, with n = (x - mean) * rstd and g = w * dout:
 *   dx = (g - mean(g) - n * mean(g * n)) * rstd;
 * dw += dout * n and db += dout, rows in order (both zeroed first). */
void rp_cpu_gpt_layernorm_bwd(const float *dout, const float *x, const float *w,
                              const float *mean, const float *rstd, float *dx,
                              float *dw, float *db, int N, int C,
                              int accumulate) {
  size_t c = (size_t)C;
  memset(dw, 0, c * sizeof *dw);
  memset(db, 0, c * sizeof *db);
  for (size_t r = 0; r < (size_t)N; r++) {
    const float *dy = dout + r * c, *xr = x + r * c;
    float *dxr = dx + r * c;
    float m = mean[r], rs = rstd[r];
    double sg = 0.0, sgn = 0.0;
    for (size_t i = 0; i < c; i++) {
      float n = (xr[i] - m) * rs;
      float g = w[i] * dy[i];
      sg += g;
      sgn += (double)g * n;
      dw[i] += dy[i] * n;
      db[i] += dy[i];
    }
    float mg = (float)(sg / (double)c), mgn = (float)(sgn / (double)c);
    for (size_t i = 0; i < c; i++) {
      float n = (xr[i] - m) * rs;
      float d = (w[i] * dy[i] - mg - n * mgn) * rs;
      dxr[i] = accumulate ? dxr[i] + d : d;
    }
  }
}
