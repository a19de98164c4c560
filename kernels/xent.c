/* kernels/xent.c — softmax cross-entropy over rows of logits on the CPU
 * (contract in gpt_kernels.h), with the gradient written over the logits.
 * Each row subtracts its maximum before exp (logits of +-1000 neither
 * overflow nor give log(0)); row sums and the loss are accumulated in
 * double, in order. Targets are checked before anything is written. */
#include "gpt_kernels.h"

#include "engine/util.h"
#include "vexpf.h"

#include <math.h>

rp_status rp_cpu_gpt_xent(float *logits, const int32_t *targets, float *losses,
                          float *loss, int N, int V, float norm, int grad) {
  for (int r = 0; r < N; r++)
    if (targets[r] < 0 || targets[r] >= V)
      return rp__err(RP_ERANGE, "gpt.xent: target %d of row %d outside [0, %d)",
                     (int)targets[r], r, V);
  float nrm = norm != 0.0f ? norm : (float)N;
  size_t v_n = (size_t)V;
  double total = 0.0;
  for (size_t r = 0; r < (size_t)N; r++) {
    float *x = logits + r * v_n;
    size_t tgt = (size_t)targets[r];
    float m = -INFINITY;
    for (size_t c = 0; c < v_n; c++)
      m = x[c] > m ? x[c] : m;
    /* with grad, exp(x - m) is kept in x (one expf per logit) */
    float xt = x[tgt] - m;
    double s = 0.0;
    if (grad) {
      for (size_t c = 0; c < v_n; c++)
        x[c] = rp_vexpf(x[c] - m);
      for (size_t c = 0; c < v_n; c++)
        s += x[c];
    } else
      for (size_t c = 0; c < v_n; c++)
        s += rp_vexpf(x[c] - m);
    losses[r] = (float)(log(s) - (double)xt);
    total += losses[r];
    if (grad) {
      float inv = (float)(1.0 / s);
      for (size_t c = 0; c < v_n; c++)
        x[c] = (x[c] * inv - (c == tgt ? 1.0f : 0.0f)) / nrm;
    }
  }
  loss[0] = (float)(total / (double)nrm);
  return RP_OK;
}
