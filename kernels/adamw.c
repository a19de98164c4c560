/* kernels/adamw.c — AdamW with global gradient-norm clipping on the CPU
 * (contract and formulas in gpt_kernels.h: torch.nn.utils.clip_grad_norm_
 * then torch.optim.AdamW's default math). The squared norms are summed in
 * double, each tensor in element order, the tensors in order. */
#include "gpt_kernels.h"

#include "vexpf.h"

#include <math.h>

/* One tensor's update; decay is a constant at each call, so each loop has
 * no branch and vectorises (sqrtf inlines: kernels built without errno). */
static inline void adamw_update(float *restrict wi, const float *restrict gi,
                                float *restrict mi, float *restrict vi,
                                size_t n, float scale, float lr, float b1,
                                float b2, float eps, float bc1, float bc2,
                                float wd, int decay) {
  for (size_t e = 0; e < n; e++) {
    float gr = scale * gi[e];
    float x = wi[e];
    if (decay)
      x -= wd * x;
    float me = b1 * mi[e] + (1.0f - b1) * gr;
    float ve = b2 * vi[e] + (1.0f - b2) * gr * gr;
    mi[e] = me;
    vi[e] = ve;
    wi[e] = x - lr * (me / bc1) / (sqrtf(ve / bc2) + eps);
  }
}

/* Tensor i's sum of squares, in element order. */
static inline double sum_sq(const float *g, size_t n) {
  double sq = 0.0;
  for (size_t e = 0; e < n; e++)
    sq += (double)g[e] * g[e];
  return sq;
}

static inline void adamw(float *const *w, const float *const *g,
                         float *const *m, float *const *v, const size_t *n,
                         float *stats, const float *sq,
                         const rp_gpt_adamw_args *a) {
  double total = 0.0;
  if (a->norm_parts > 0) { /* the shares' sums, in index order */
    for (int32_t j = 0; j < a->norm_parts; j++)
      total += (double)sq[j];
  } else {
    for (int32_t i = 0; i < a->count; i++) {
      double s = sum_sq(g[i], n[i]);
      stats[1 + i] = (float)s;
      total += s;
    }
  }
  float norm = (float)sqrt(total);
  stats[0] = norm;
  float scale = 1.0f;
  if (a->max_norm > 0.0f) {
    float c = a->max_norm / (norm + 1e-6f);
    /* a norm that is NaN makes every gradient NaN, as clip_grad_norm_'s
     * clamp does: no tensor takes an unclipped step */
    scale = c < 1.0f || isnan(c) ? c : 1.0f;
  }
  float lr = a->lr, b1 = a->beta1, b2 = a->beta2, eps = a->eps;
  float bc1 = (float)(1.0 - pow((double)b1, (double)a->step));
  float bc2 = (float)(1.0 - pow((double)b2, (double)a->step));
  float wd = lr * a->weight_decay;
  for (int32_t i = 0; i < a->count; i++) {
    if (a->decay[i] != 0)
      adamw_update(w[i], g[i], m[i], v[i], n[i], scale, lr, b1, b2, eps, bc1,
                   bc2, wd, 1);
    else
      adamw_update(w[i], g[i], m[i], v[i], n[i], scale, lr, b1, b2, eps, bc1,
                   bc2, wd, 0);
  }
}

/* also as AVX2 code where the CPU has it (vexpf.h): the same bits */
RP_VEC_DISPATCH(rp_cpu_gpt_adamw, adamw,
                (float *const *w, const float *const *g, float *const *m,
                 float *const *v, const size_t *n, float *stats,
                 const float *sq, const rp_gpt_adamw_args *a),
                (w, g, m, v, n, stats, sq, a))

void rp_cpu_gpt_sumsq(const float *const *g, const size_t *n, int count,
                      float *sq, float *each) {
  double total = 0.0;
  for (int i = 0; i < count; i++) {
    double s = sum_sq(g[i], n[i]);
    each[i] = (float)s;
    total += s;
  }
  sq[0] = (float)total;
}
