/* kernels/attention.c — causal self-attention on the CPU (contracts and
 * layouts in gpt_kernels.h). Per (batch, head) the products are GEMMs
 * through rp_cpu_gemm (CBLAS), in a loop over B * NH; the scaled causal
 * softmax and its backward are plain loops, each row summed in column
 * order (in double): bitwise reproducible. The score GEMMs compute the
 * whole T x T block and the softmax overwrites the masked part (u > t)
 * with zeros, so att v and its backward need no mask. */
#include "gpt_kernels.h"

#include "cpu_kernels.h"
#include "engine/util.h"

#include "vexpf.h"

#include <math.h>
#include <string.h>

/* p[0..n) = softmax(p[0..n)), p[n..len) = 0: one causal row. */
static void softmax_row(float *p, size_t n, size_t len) {
  float m = -INFINITY;
  for (size_t u = 0; u < n; u++)
    m = p[u] > m ? p[u] : m;
  for (size_t u = 0; u < n; u++)
    p[u] = rp_vexpf(p[u] - m);
  double s = 0.0;
  for (size_t u = 0; u < n; u++)
    s += p[u];
  float inv = (float)(1.0 / s);
  for (size_t u = 0; u < n; u++)
    p[u] *= inv;
  for (size_t u = n; u < len; u++)
    p[u] = 0.0f;
}

/* Between [B, T, width] (head h of part `part` in columns part*C + h*hs..)
 * and [B, NH, T, hs]: to_heads 1 copies from the wide src into the heads
 * layout dst, 0 from the heads layout src back into the wide dst. */
static void permute(const float *src, float *dst, size_t width, size_t part,
                    int to_heads, int B, int T, int C, int NH) {
  size_t hs = (size_t)(C / NH), t_n = (size_t)T;
  for (size_t b = 0; b < (size_t)B; b++)
    for (size_t h = 0; h < (size_t)NH; h++)
      for (size_t t = 0; t < t_n; t++) {
        size_t ho = ((b * (size_t)NH + h) * t_n + t) * hs;
        size_t wo = (b * t_n + t) * width + part * (size_t)C + h * hs;
        memcpy(dst + (to_heads ? ho : wo), src + (to_heads ? wo : ho),
               hs * sizeof *dst);
      }
}

static inline void attention_fwd(const float *qkv, float *qkvr, float *att,
                                 float *out, float *scratch, int B, int T,
                                 int C, int NH) {
  size_t hs = (size_t)(C / NH), t_n = (size_t)T;
  size_t nc = (size_t)B * t_n * (size_t)C; /* N * C */
  for (size_t part = 0; part < 3; part++)
    permute(qkv, qkvr + part * nc, 3 * (size_t)C, part, 1, B, T, C, NH);
  float scale = 1.0f / sqrtf((float)hs);
  for (size_t bh = 0; bh < (size_t)B * (size_t)NH; bh++) {
    const float *q = qkvr + bh * t_n * hs;
    const float *k = q + nc, *v = q + 2 * nc;
    float *a = att + bh * t_n * t_n;
    float *y = scratch + bh * t_n * hs;
    /* a[T, T] = scale * q k^T, then the causal softmax per row */
    rp_cpu_gemm(0, 1, T, T, (int)hs, scale, q, k, 0.0f, a);
    for (size_t t = 0; t < t_n; t++)
      softmax_row(a + t * t_n, t + 1, t_n);
    /* y[T, hs] = a v */
    rp_cpu_gemm(0, 0, T, (int)hs, T, 1.0f, a, v, 0.0f, y);
  }
  permute(scratch, out, (size_t)C, 0, 0, B, T, C, NH);
}

static inline void attention_bwd(const float *dout, const float *qkvr,
                                 const float *att, float *dqkv, float *datt,
                                 float *scratch, int B, int T, int C, int NH) {
  size_t hs = (size_t)(C / NH), t_n = (size_t)T;
  size_t nc = (size_t)B * t_n * (size_t)C;
  float *dy = scratch, *dq = scratch + nc, *dk = dq + nc, *dv = dk + nc;
  permute(dout, dy, (size_t)C, 0, 1, B, T, C, NH);
  float scale = 1.0f / sqrtf((float)hs);
  for (size_t bh = 0; bh < (size_t)B * (size_t)NH; bh++) {
    size_t o = bh * t_n * hs;
    const float *q = qkvr + o, *k = q + nc, *v = q + 2 * nc;
    const float *a = att + bh * t_n * t_n;
    float *da = datt + bh * t_n * t_n;
    /* da = dy v^T; dv = a^T dy */
    rp_cpu_gemm(0, 1, T, T, (int)hs, 1.0f, dy + o, v, 0.0f, da);
    rp_cpu_gemm(1, 0, T, (int)hs, T, 1.0f, a, dy + o, 0.0f, dv + o);
    /* softmax backward, in place: dpre = scale * a (da - sum_u a da) */
    for (size_t t = 0; t < t_n; t++) {
      const float *ar = a + t * t_n;
      float *dr = da + t * t_n;
      double s = 0.0;
      for (size_t u = 0; u <= t; u++)
        s += (double)ar[u] * dr[u];
      float sf = (float)s;
      for (size_t u = 0; u <= t; u++)
        dr[u] = scale * ar[u] * (dr[u] - sf);
      for (size_t u = t + 1; u < t_n; u++)
        dr[u] = 0.0f;
    }
    /* dq = dpre k; dk = dpre^T q */
    rp_cpu_gemm(0, 0, T, (int)hs, T, 1.0f, da, k, 0.0f, dq + o);
    rp_cpu_gemm(1, 0, T, (int)hs, T, 1.0f, da, q, 0.0f, dk + o);
  }
  for (size_t part = 0; part < 3; part++)
    permute(dq + part * nc, dqkv, 3 * (size_t)C, part, 0, B, T, C, NH);
}

/* the softmax loops also as AVX2 code where the CPU has it (vexpf.h) */
RP_VEC_DISPATCH(rp_cpu_gpt_attention_fwd, attention_fwd,
                (const float *qkv, float *qkvr, float *att, float *out,
                 float *scratch, int B, int T, int C, int NH),
                (qkv, qkvr, att, out, scratch, B, T, C, NH))

RP_VEC_DISPATCH(rp_cpu_gpt_attention_bwd, attention_bwd,
                (const float *dout, const float *qkvr, const float *att,
                 float *dqkv, float *datt, float *scratch, int B, int T, int C,
                 int NH),
                (dout, qkvr, att, dqkv, datt, scratch, B, T, C, NH))

rp_status rp_cpu_gpt_attention_decode(const float *qkv, float *kcache,
                                      float *vcache, float *out, float *scratch,
                                      int pos, int T, int C, int NH) {
  if (pos < 0 || pos >= T)
    return rp__err(RP_ERANGE, "gpt.attention_decode: pos %d outside [0, %d)",
                   pos, T);
  size_t hs = (size_t)(C / NH), t_n = (size_t)T, p = (size_t)pos;
  float scale = 1.0f / sqrtf((float)hs);
  for (size_t h = 0; h < (size_t)NH; h++) {
    float *kc = kcache + h * t_n * hs, *vc = vcache + h * t_n * hs;
    memcpy(kc + p * hs, qkv + (size_t)C + h * hs, hs * sizeof *kc);
    memcpy(vc + p * hs, qkv + 2 * (size_t)C + h * hs, hs * sizeof *vc);
    float *s = scratch + h * t_n;
    /* s[0..pos] = scale * q K^T, softmax; out_h = s V */
    rp_cpu_gemm(0, 1, 1, pos + 1, (int)hs, scale, qkv + h * hs, kc, 0.0f, s);
    softmax_row(s, p + 1, p + 1);
    rp_cpu_gemm(0, 0, 1, (int)hs, pos + 1, 1.0f, s, vc, 0.0f, out + h * hs);
  }
  return RP_OK;
}
