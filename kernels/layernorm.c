/* kernels/layernorm.c — LayerNorm on the CPU (contracts in gpt_kernels.h),
 * as torch.nn.LayerNorm: biased variance, eps inside the square root. The
 * row statistics are accumulated in double, in a fixed order: four partial
 * sums over the columns i = 0, 1, 2, 3 mod 4 (the tail in the first), then
 * (s0 + s1) + (s2 + s3): four independent chains instead of one. The
 * column sums of the backward are in row order. */
#include "gpt_kernels.h"

#include "vexpf.h"

#include <math.h>
#include <string.h>

/* sum of x[0..C) in double, in the order above */
static double sum4(const float *x, size_t C) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  size_t i = 0;
  for (; i + 4 <= C; i += 4)
    for (size_t j = 0; j < 4; j++)
      s[j] += x[i + j];
  for (; i < C; i++)
    s[0] += x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/* sum of (x[i] - m)^2 (the difference in float, squared in double) */
static double sqdev4(const float *x, float m, size_t C) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  size_t i = 0;
  for (; i + 4 <= C; i += 4)
    for (size_t j = 0; j < 4; j++) {
      double d = (double)(x[i + j] - m);
      s[j] += d * d;
    }
  for (; i < C; i++) {
    double d = (double)(x[i] - m);
    s[0] += d * d;
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/* One row: mean and rstd of x[0..C), then out = (x - mean) * rstd * w + b. */
static void ln_row(const float *x, const float *w, const float *b, float *out,
                   float *mean, float *rstd, size_t C, float eps) {
  float m = (float)(sum4(x, C) / (double)C);
  double v = sqdev4(x, m, C);
  float r = (float)(1.0 / sqrt(v / (double)C + (double)eps));
  for (size_t i = 0; i < C; i++)
    out[i] = (x[i] - m) * r * w[i] + b[i];
  *mean = m;
  *rstd = r;
}

static inline void layernorm_fwd(const float *x, const float *w, const float *b,
                                 float *out, float *mean, float *rstd, int N,
                                 int C, float eps) {
  size_t c = (size_t)C;
  for (size_t r = 0; r < (size_t)N; r++)
    ln_row(x + r * c, w, b, out + r * c, &mean[r], &rstd[r], c, eps);
}

static inline void residual_layernorm_fwd(const float *a, const float *r,
                                          float *res, const float *w,
                                          const float *b, float *out,
                                          float *mean, float *rstd, int N,
                                          int C, float eps) {
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
static inline void layernorm_bwd(const float *dout, const float *x,
                                 const float *w, const float *mean,
                                 const float *rstd, float *dx, float *dw,
                                 float *db, int N, int C, int accumulate) {
  size_t c = (size_t)C;
  memset(dw, 0, c * sizeof *dw);
  memset(db, 0, c * sizeof *db);
  for (size_t r = 0; r < (size_t)N; r++) {
    const float *dy = dout + r * c, *xr = x + r * c;
    float *dxr = dx + r * c;
    float m = mean[r], rs = rstd[r];
    double sg4[4] = {0.0, 0.0, 0.0, 0.0}, sgn4[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 4 <= c; i += 4)
      for (size_t j = 0; j < 4; j++) {
        float n = (xr[i + j] - m) * rs;
        float g = w[i + j] * dy[i + j];
        sg4[j] += g;
        sgn4[j] += (double)g * n;
      }
    for (; i < c; i++) {
      float n = (xr[i] - m) * rs;
      float g = w[i] * dy[i];
      sg4[0] += g;
      sgn4[0] += (double)g * n;
    }
    double sg = (sg4[0] + sg4[1]) + (sg4[2] + sg4[3]);
    double sgn = (sgn4[0] + sgn4[1]) + (sgn4[2] + sgn4[3]);
    for (i = 0; i < c; i++) {
      float n = (xr[i] - m) * rs;
      dw[i] += dy[i] * n;
      db[i] += dy[i];
    }
    float mg = (float)(sg / (double)c), mgn = (float)(sgn / (double)c);
    for (i = 0; i < c; i++) {
      float n = (xr[i] - m) * rs;
      float d = (w[i] * dy[i] - mg - n * mgn) * rs;
      dxr[i] = accumulate ? dxr[i] + d : d;
    }
  }
}

/* also as AVX2 code where the CPU has it (vexpf.h); the four partial sums
 * stay four lanes, so the bits are the same */
RP_VEC_DISPATCH(rp_cpu_gpt_layernorm_fwd, layernorm_fwd,
                (const float *x, const float *w, const float *b, float *out,
                 float *mean, float *rstd, int N, int C, float eps),
                (x, w, b, out, mean, rstd, N, C, eps))

RP_VEC_DISPATCH(rp_cpu_gpt_residual_layernorm_fwd, residual_layernorm_fwd,
                (const float *a, const float *r, float *res, const float *w,
                 const float *b, float *out, float *mean, float *rstd, int N,
                 int C, float eps),
                (a, r, res, w, b, out, mean, rstd, N, C, eps))

RP_VEC_DISPATCH(rp_cpu_gpt_layernorm_bwd, layernorm_bwd,
                (const float *dout, const float *x, const float *w,
                 const float *mean, const float *rstd, float *dx, float *dw,
                 float *db, int N, int C, int accumulate),
                (dout, x, w, mean, rstd, dx, dw, db, N, C, accumulate))
