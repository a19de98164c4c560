/* test/kernels_ref.h — plain references and comparison helpers shared by
 * test_kernels.c and test_gpt_kernels.c (CPU kernels vs these references)
 * and their _gpu twins (CUDA kernels vs the CPU kernels). References compute in
 * double, in the most obvious way, straight from the formulas in
 * kernels/cpu_kernels.h. */
#ifndef RP_TEST_KERNELS_REF_H
#define RP_TEST_KERNELS_REF_H

#include "kernels/gpt_kernels.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* gpt.adamw's args as the GPT tests use them: beta1 0.9, beta2 0.95, eps
 * 1e-8, weight decay 0.1 (decay[] all 0, norm_parts 0). */
static inline rp_gpt_adamw_args kr_adamw_args(float lr, int32_t step,
                                              float max_norm, int32_t count) {
  rp_gpt_adamw_args a;
  memset(&a, 0, sizeof a);
  a.lr = lr;
  a.step = step;
  a.beta1 = 0.9f;
  a.beta2 = 0.95f;
  a.eps = 1e-8f;
  a.weight_decay = 0.1f;
  a.max_norm = max_norm;
  a.count = count;
  return a;
}

/* The odd and small shapes every kernel is run on (rows x cols). */
static const size_t kr_shapes[][2] = {{1, 1}, {3, 5}, {17, 13}, {64, 33}};
#define KR_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KR_NSHAPES KR_LEN(kr_shapes)

/* xorshift32: reproducible data without libc rand state. */
static inline uint32_t kr_next(uint32_t *s) {
  uint32_t x = *s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *s = x;
}

/* Uniform in [lo, hi). */
static inline float kr_uniform(uint32_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)(kr_next(s) >> 8) / (float)(1u << 24);
}

static inline float *kr_alloc(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  cr_assert(p, "out of memory");
  return p;
}

static inline float *kr_random(size_t n, uint32_t seed, float lo, float hi) {
  float *p = kr_alloc(n);
  uint32_t s = seed ? seed : 1;
  for (size_t i = 0; i < n; i++)
    p[i] = kr_uniform(&s, lo, hi);
  return p;
}

static inline int32_t *kr_labels(size_t rows, size_t cols, uint32_t seed) {
  int32_t *l = malloc((rows ? rows : 1) * sizeof *l);
  cr_assert(l, "out of memory");
  uint32_t s = seed ? seed : 1;
  for (size_t r = 0; r < rows; r++)
    l[r] = (int32_t)(kr_next(&s) % cols);
  return l;
}

/* Asserts |got - want| <= rel * max(|want|, scale) + abs_tol elementwise.
 * `scale` is a magnitude floor (e.g. the largest |entry|) so that entries
 * that cancel to near zero are judged against the data's size. */
static inline void kr_close(const float *got, const double *want, size_t n,
                            double rel, double scale, double abs_tol,
                            const char *what) {
  for (size_t i = 0; i < n; i++) {
    double w = want[i], g = got[i];
    double mag = fabs(w) > scale ? fabs(w) : scale;
    cr_assert(fabs(g - w) <= rel * mag + abs_tol,
              "%s: element %zu is %.9g, expected %.9g (rel %g, scale %g)", what,
              i, g, w, rel, scale);
  }
}

/* Same, against a float array. */
static inline void kr_close_f(const float *got, const float *want, size_t n,
                              double rel, double scale, double abs_tol,
                              const char *what) {
  for (size_t i = 0; i < n; i++) {
    double w = want[i], g = got[i];
    double mag = fabs(w) > scale ? fabs(w) : scale;
    cr_assert(fabs(g - w) <= rel * mag + abs_tol,
              "%s: element %zu is %.9g, expected %.9g (rel %g, scale %g)", what,
              i, g, w, rel, scale);
  }
}

static inline double *kr_dalloc(size_t n) {
  double *p = malloc((n ? n : 1) * sizeof *p);
  cr_assert(p, "out of memory");
  return p;
}

/* C = alpha op(A) op(B) + beta C in double; C0 is C's input. */
static inline double *kr_gemm(int ta, int tb, size_t m, size_t n, size_t k,
                              double alpha, const float *a, const float *b,
                              double beta, const float *c0) {
  double *c = kr_dalloc(m * n);
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double acc = 0.0;
      for (size_t p = 0; p < k; p++) {
        double av = ta ? a[p * m + i] : a[i * k + p];
        double bv = tb ? b[j * k + p] : b[p * n + j];
        acc += av * bv;
      }
      c[i * n + j] = alpha * acc + (beta != 0.0 ? beta * c0[i * n + j] : 0.0);
    }
  return c;
}

/* Softmax rows (double) and the summed loss -log p[label] over rows. */
static inline double kr_xent(const float *x, const int32_t *labels, size_t rows,
                             size_t cols, double *probs) {
  double loss = 0.0;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double m = xr[0], s = 0.0;
    for (size_t c = 1; c < cols; c++)
      m = xr[c] > m ? xr[c] : m;
    for (size_t c = 0; c < cols; c++)
      s += exp(xr[c] - m);
    for (size_t c = 0; c < cols; c++)
      probs[r * cols + c] = exp(xr[c] - m) / s;
    loss += log(s) - (xr[labels[r]] - m);
  }
  return loss;
}

#endif
