/* test/test_gpt_kernels_ref.c — the GPT CPU kernels on the shapes the
 * small cases of test_gpt_kernels.c do not reach, against double-precision
 * references written here from the formulas of gpt_kernels.h:
 *  - rows longer than a vector (AVX2: 8 floats), so that the vector body
 *    and its tail both run: AdamW tensors of 1 to 1000 elements, LayerNorm
 *    widths 1 to 771, GELU over 3 x 1001 inputs in [-20, 20] (the exp
 *    clamps in vector lanes), attention rows of 33 to 64;
 *  - the GELU gradient at inputs up to 3.4e38, where x^2 overflows float;
 *  - attention with T = 1, head sizes 5 and 12 (not multiples of 8),
 *    scores up to 36 (inputs in [-6, 6]); decoding at every position with
 *    the cache rows past it NaN (a read beyond pos shows);
 *  - cross-entropy with V = 1, logits of +-1000 spread over the vector
 *    lanes, and V = 50257 (GPT-2's vocabulary) with logits in [-100, 100];
 *  - the AVX2 and plain copies of every dispatched kernel give the same
 *    bits (vexpf.h's promise; skipped where the CPU has no AVX2).
 *
 * Bounds: 1e-5 relative to max(|expected|, floor), the floor the largest
 * |expected| of the array where entries cancel (attention, LayerNorm's
 * gradients), a tiny one where they do not (GELU, the probabilities of
 * cross-entropy's gradient: each entry within 1e-5 of itself), 1 for
 * values of order 1; 1e-4 where the inputs carry their own rounding
 * (LayerNorm of rows offset by 100: x itself is rounded to 8e-6; scores
 * of 36: exp amplifies their f32 rounding). */
#include "helpers.h"
#include "kernels_ref.h"

#include "kernels/gpt_kernels.h"
#include "kernels/vexpf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double max_abs_d(const double *v, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs(v[i]));
  return m;
}

/* ---------------------------------------------------------------------- */
/* Attention: out = softmax(q k^T / sqrt(hs), causal) v per (b, head), and
 * its gradient by the chain rule, in double. qkv: [B][T][3][C]. */

typedef struct attn_shape {
  int B, T, C, NH;
} attn_shape;

static size_t qkv_at(attn_shape s, int b, int t, int part, int h, int d) {
  int hs = s.C / s.NH;
  return (((size_t)b * s.T + t) * 3 + part) * s.C + (size_t)h * hs + d;
}

static void attn_ref(attn_shape s, const float *qkv, const float *dout,
                     double *out, double *dqkv) {
  int T = s.T, hs = s.C / s.NH;
  double scale = 1.0 / sqrt((double)hs);
  double *p = kr_dalloc((size_t)T * T), *dp = kr_dalloc((size_t)T);
  if (dqkv)
    memset(dqkv, 0, (size_t)s.B * T * 3 * s.C * sizeof *dqkv);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++) {
      for (int t = 0; t < T; t++) {
        double mx = -INFINITY, sum = 0;
        for (int u = 0; u <= t; u++) {
          double a = 0;
          for (int d = 0; d < hs; d++)
            a += (double)qkv[qkv_at(s, b, t, 0, h, d)] *
                 qkv[qkv_at(s, b, u, 1, h, d)];
          p[t * T + u] = a * scale;
          mx = fmax(mx, p[t * T + u]);
        }
        for (int u = 0; u <= t; u++)
          sum += p[t * T + u] = exp(p[t * T + u] - mx);
        for (int u = 0; u <= t; u++)
          p[t * T + u] /= sum;
        for (int d = 0; d < hs; d++) {
          double a = 0;
          for (int u = 0; u <= t; u++)
            a += p[t * T + u] * qkv[qkv_at(s, b, u, 2, h, d)];
          out[((size_t)b * T + t) * s.C + (size_t)h * hs + d] = a;
        }
      }
      if (!dqkv)
        continue;
      for (int t = 0; t < T; t++) {
        const float *dy = dout + ((size_t)b * T + t) * s.C + (size_t)h * hs;
        double row = 0; /* sum_u p dp */
        for (int u = 0; u <= t; u++) {
          double a = 0;
          for (int d = 0; d < hs; d++) {
            a += (double)dy[d] * qkv[qkv_at(s, b, u, 2, h, d)];
            dqkv[qkv_at(s, b, u, 2, h, d)] += p[t * T + u] * dy[d];
          }
          dp[u] = a;
          row += p[t * T + u] * a;
        }
        for (int u = 0; u <= t; u++) {
          double ds = p[t * T + u] * (dp[u] - row) * scale;
          for (int d = 0; d < hs; d++) {
            dqkv[qkv_at(s, b, t, 0, h, d)] +=
                ds * qkv[qkv_at(s, b, u, 1, h, d)];
            dqkv[qkv_at(s, b, u, 1, h, d)] +=
                ds * qkv[qkv_at(s, b, t, 0, h, d)];
          }
        }
      }
    }
  free(p), free(dp);
}

static void check_attention(attn_shape s, float amp, double rel,
                            uint32_t seed) {
  size_t n = (size_t)s.B * s.T * s.C, na = (size_t)s.B * s.NH * s.T * s.T;
  float *qkv = kr_random(3 * n, seed, -amp, amp);
  float *dout = kr_random(n, seed + 1, -1, 1);
  float *qkvr = kr_alloc(3 * n), *att = kr_alloc(na), *out = kr_alloc(n);
  float *scr = kr_alloc(4 * n), *dqkv = kr_alloc(3 * n), *datt = kr_alloc(na);
  double *want = kr_dalloc(n), *wd = kr_dalloc(3 * n);
  rp_cpu_gpt_attention_fwd(qkv, qkvr, att, out, scr, s.B, s.T, s.C, s.NH);
  rp_cpu_gpt_attention_bwd(dout, qkvr, att, dqkv, datt, scr, s.B, s.T, s.C,
                           s.NH);
  attn_ref(s, qkv, dout, want, wd);
  char what[96];
  snprintf(what, sizeof what, "attention out B %d T %d C %d NH %d", s.B, s.T,
           s.C, s.NH);
  kr_close(out, want, n, rel, max_abs_d(want, n), 0, what);
  snprintf(what, sizeof what, "attention dqkv B %d T %d C %d NH %d", s.B, s.T,
           s.C, s.NH);
  kr_close(dqkv, wd, 3 * n, rel, max_abs_d(wd, 3 * n), 0, what);
  free(qkv), free(dout), free(qkvr), free(att), free(out), free(scr),
      free(dqkv), free(datt), free(want), free(wd);
}

Test(gpt_kernels_ref, attention_at_edge_shapes_matches_double_reference) {
  check_attention((attn_shape){1, 1, 8, 2}, 1, 1e-5, 11);   /* T = 1 */
  check_attention((attn_shape){2, 1, 12, 1}, 1, 1e-5, 13);  /* T = 1, hs 12 */
  check_attention((attn_shape){2, 37, 36, 3}, 1, 1e-5, 15); /* hs 12 */
  check_attention((attn_shape){1, 33, 5, 1}, 1, 1e-5, 17);  /* hs 5 */
  check_attention((attn_shape){1, 64, 64, 4}, 1, 1e-5, 19); /* hs 16 */
  check_attention((attn_shape){1, 20, 24, 2}, 6, 1e-4, 21); /* large scores */
}

/* Decoding position by position: each output the reference's row of the
 * prefix; the cache rows past pos are NaN until written, so a read beyond
 * pos makes the output NaN. */
static void check_decode(int T, int C, int NH, float amp, uint32_t seed) {
  int hs = C / NH;
  size_t nc = (size_t)NH * T * hs;
  float *seq = kr_random((size_t)T * 3 * C, seed, -amp, amp);
  float *kc = kr_alloc(nc), *vc = kr_alloc(nc), *out = kr_alloc((size_t)C);
  float *scr = kr_alloc((size_t)NH * T);
  for (size_t i = 0; i < nc; i++)
    kc[i] = vc[i] = NAN;
  double *want = kr_dalloc((size_t)T * C);
  attn_ref((attn_shape){1, T, C, NH}, seq, NULL, want, NULL);
  for (int pos = 0; pos < T; pos++) {
    RP_CHECK(rp_cpu_gpt_attention_decode(seq + (size_t)pos * 3 * C, kc, vc, out,
                                         scr, pos, T, C, NH));
    const double *w = want + (size_t)pos * C;
    char what[64];
    snprintf(what, sizeof what, "decode T %d C %d at pos %d", T, C, pos);
    kr_close(out, w, (size_t)C, 1e-5, max_abs_d(w, (size_t)C), 0, what);
  }
  free(seq), free(kc), free(vc), free(out), free(scr), free(want);
}

Test(gpt_kernels_ref, decode_reads_no_cache_row_past_its_position) {
  check_decode(1, 8, 2, 1, 31);
  check_decode(37, 36, 3, 1, 33);
  check_decode(20, 24, 2, 6, 35);
}

/* ---------------------------------------------------------------------- */
/* Cross-entropy: losses, their sum over norm, dlogits (p - onehot) / norm */

static void check_xent(int N, int V, float lo, float hi, int extremes,
                       float norm, uint32_t seed) {
  size_t n = (size_t)N * V;
  float *x = kr_random(n, seed, lo, hi);
  if (extremes) /* +-1000 every 7th logit: every lane position meets them */
    for (size_t i = 0; i < n; i += 7)
      x[i] = (i / 7) % 2 ? 1000.0f : -1000.0f;
  int32_t *tg = kr_labels((size_t)N, (size_t)V, seed + 1);
  double nrm = norm != 0 ? norm : N, total = 0;
  double *wl = kr_dalloc((size_t)N), *wg = kr_dalloc(n);
  for (int r = 0; r < N; r++) {
    const float *xr = x + (size_t)r * V;
    double mx = -INFINITY, z = 0;
    for (int c = 0; c < V; c++)
      mx = fmax(mx, xr[c]);
    for (int c = 0; c < V; c++)
      z += exp((double)xr[c] - mx);
    wl[r] = log(z) + mx - xr[tg[r]];
    total += wl[r];
    for (int c = 0; c < V; c++)
      wg[(size_t)r * V + c] =
          (exp((double)xr[c] - mx) / z - (c == tg[r])) / nrm;
  }
  double wloss = total / nrm;
  float *g = kr_alloc(n), *losses = kr_alloc((size_t)N), loss = 0;
  char what[80];
  for (int grad = 0; grad < 2; grad++) {
    memcpy(g, x, n * sizeof *g);
    RP_CHECK(rp_cpu_gpt_xent(g, tg, losses, &loss, N, V, norm, grad));
    snprintf(what, sizeof what, "xent N %d V %d losses (grad %d)", N, V, grad);
    kr_close(losses, wl, (size_t)N, 1e-5, 1, 0, what);
    snprintf(what, sizeof what, "xent N %d V %d loss (grad %d)", N, V, grad);
    kr_close(&loss, &wloss, 1, 1e-5, 1, 0, what);
    if (grad) {
      /* each p / norm within 1e-5 of itself (the smallest under float's
       * range: 1e-30); the target's (p - 1) / norm, which cancels when p
       * is near 1, within 1e-5 of 1 / norm */
      for (int r = 0; r < N; r++)
        for (int c = 0; c < V; c++) {
          size_t i = (size_t)r * V + c;
          snprintf(what, sizeof what, "xent N %d V %d dlogit [%d, %d]", N, V, r,
                   c);
          kr_close(&g[i], &wg[i], 1, 1e-5, (c == tg[r] ? 1 : 1e-30) / nrm, 0,
                   what);
        }
    } else {
      cr_assert(memcmp(g, x, n * sizeof *g) == 0,
                "xent N %d V %d: grad 0 wrote the logits", N, V);
    }
  }
  free(x), free(tg), free(wl), free(wg), free(g), free(losses);
}

Test(gpt_kernels_ref, xent_at_extreme_logits_and_vocabularies) {
  check_xent(1, 1, -3, 3, 0, 0, 41); /* one class: loss 0, gradient 0 */
  check_xent(1, 3, -3, 3, 0, 0, 43);
  check_xent(3, 1003, -4, 4, 0, 0, 45);
  check_xent(3, 1003, -4, 4, 1, 0, 47);          /* +-1000 in every lane */
  check_xent(5, 17, -1, 1, 1, 64.0f, 49);        /* and a global norm */
  check_xent(2, 50257, -100, 100, 0, 16.0f, 51); /* GPT-2's vocabulary */
}

/* ---------------------------------------------------------------------- */
/* AdamW over tensors of 1 to 1000 elements, clipping, mixed decay */

enum { AK = 5 };
static const size_t adam_n[AK] = {1, 7, 8, 37, 1000};

typedef struct adam_state {
  float *w[AK], *g[AK], *m[AK], *v[AK];
} adam_state;

static adam_state adam_new(uint32_t seed) {
  adam_state s;
  for (int i = 0; i < AK; i++) {
    uint32_t k = seed + 4 * (uint32_t)i;
    s.w[i] = kr_random(adam_n[i], k, -1, 1);
    s.g[i] = kr_random(adam_n[i], k + 1, -2, 2);
    s.m[i] = kr_random(adam_n[i], k + 2, -0.1f, 0.1f);
    s.v[i] = kr_random(adam_n[i], k + 3, 0, 0.01f);
  }
  return s;
}

static void adam_free(adam_state *s) {
  for (int i = 0; i < AK; i++)
    free(s->w[i]), free(s->g[i]), free(s->m[i]), free(s->v[i]);
}

static rp_gpt_adamw_args adam_args(void) {
  rp_gpt_adamw_args a = kr_adamw_args(3e-3f, 3, 1.0f, AK);
  for (int i = 0; i < AK; i++)
    a.decay[i] = (uint8_t)(i % 2);
  return a;
}

Test(gpt_kernels_ref, adamw_over_long_tensors_matches_double_reference) {
  adam_state s = adam_new(61);
  rp_gpt_adamw_args a = adam_args();
  double *W[AK], *M[AK], *Vv[AK], total = 0, upd = 0;
  for (int i = 0; i < AK; i++)
    for (size_t e = 0; e < adam_n[i]; e++)
      total += (double)s.g[i][e] * s.g[i][e];
  double norm = sqrt(total), scale = fmin(1.0, a.max_norm / (norm + 1e-6));
  cr_assert(scale < 1.0, "the test means to clip (norm %g)", norm);
  double bc1 = 1 - pow(a.beta1, a.step), bc2 = 1 - pow(a.beta2, a.step);
  for (int i = 0; i < AK; i++) {
    size_t n = adam_n[i];
    W[i] = kr_dalloc(n), M[i] = kr_dalloc(n), Vv[i] = kr_dalloc(n);
    for (size_t e = 0; e < n; e++) {
      double g = scale * s.g[i][e], w = s.w[i][e];
      if (a.decay[i])
        w -= (double)a.lr * a.weight_decay * w;
      M[i][e] = a.beta1 * (double)s.m[i][e] + (1 - (double)a.beta1) * g;
      Vv[i][e] = a.beta2 * (double)s.v[i][e] + (1 - (double)a.beta2) * g * g;
      w -= a.lr * (M[i][e] / bc1) / (sqrt(Vv[i][e] / bc2) + a.eps);
      upd = fmax(upd, fabs(w - s.w[i][e]));
      W[i][e] = w;
    }
  }
  float stats[AK + 1];
  rp_cpu_gpt_adamw(s.w, (const float *const *)s.g, s.m, s.v, adam_n, stats,
                   NULL, &a);
  kr_close(stats, &norm, 1, 1e-6, 0, 0, "adamw norm");
  for (int i = 0; i < AK; i++) {
    char what[48];
    size_t n = adam_n[i];
    /* w moves by about lr: its error judged against the update's size */
    snprintf(what, sizeof what, "adamw w (n %zu)", n);
    kr_close(s.w[i], W[i], n, 0, 0, 1e-4 * upd, what);
    snprintf(what, sizeof what, "adamw m (n %zu)", n);
    kr_close(s.m[i], M[i], n, 1e-5, 1e-3, 0, what);
    snprintf(what, sizeof what, "adamw v (n %zu)", n);
    kr_close(s.v[i], Vv[i], n, 1e-5, 1e-5, 0, what);
    double sq = 0;
    for (size_t e = 0; e < n; e++)
      sq += (double)s.g[i][e] * s.g[i][e];
    snprintf(what, sizeof what, "adamw stats (n %zu)", n);
    kr_close(&stats[1 + i], &sq, 1, 1e-6, 0, 0, what);
    free(W[i]), free(M[i]), free(Vv[i]);
  }
  adam_free(&s);
}

/* ---------------------------------------------------------------------- */
/* LayerNorm: widths 1 to 771, rows offset by 100; backward accumulating
 * into dx (dw and db start random: they are written, not added to) */

static void check_layernorm(int N, int C, float off, double rel,
                            uint32_t seed) {
  size_t n = (size_t)N * C;
  float *x = kr_random(n, seed, off - 1, off + 1);
  float *w = kr_random((size_t)C, seed + 1, 0.5f, 1.5f);
  float *b = kr_random((size_t)C, seed + 2, -1, 1);
  float *dy = kr_random(n, seed + 3, -1, 1),
        *dx = kr_random(n, seed + 4, -1, 1);
  float *dw = kr_random((size_t)C, seed + 5, -1, 1);
  float *db = kr_random((size_t)C, seed + 6, -1, 1);
  double *wo = kr_dalloc(n), *wdx = kr_dalloc(n), *wr = kr_dalloc((size_t)N);
  double *wm = kr_dalloc((size_t)N), *wdw = kr_dalloc((size_t)C),
         *wdb = kr_dalloc((size_t)C);
  for (int c = 0; c < C; c++) /* accumulate = 1: dx +=, dw and db = */
    wdw[c] = 0, wdb[c] = 0;
  for (int r = 0; r < N; r++) {
    const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
    double mu = 0, var = 0, sg = 0, sgn = 0;
    for (int c = 0; c < C; c++)
      mu += xr[c];
    mu /= C;
    for (int c = 0; c < C; c++)
      var += (xr[c] - mu) * (xr[c] - mu);
    var /= C;
    double rs = 1 / sqrt(var + 1e-5);
    wm[r] = mu, wr[r] = rs;
    for (int c = 0; c < C; c++) {
      double nh = (xr[c] - mu) * rs, gg = (double)w[c] * dyr[c];
      wo[(size_t)r * C + c] = nh * w[c] + b[c];
      sg += gg, sgn += gg * nh;
      wdw[c] += dyr[c] * nh, wdb[c] += dyr[c];
    }
    for (int c = 0; c < C; c++) {
      double nh = (xr[c] - mu) * rs;
      wdx[(size_t)r * C + c] =
          dx[(size_t)r * C + c] +
          ((double)w[c] * dyr[c] - sg / C - nh * sgn / C) * rs;
    }
  }
  float *out = kr_alloc(n), *mean = kr_alloc((size_t)N),
        *rstd = kr_alloc((size_t)N);
  rp_cpu_gpt_layernorm_fwd(x, w, b, out, mean, rstd, N, C, 1e-5f);
  rp_cpu_gpt_layernorm_bwd(dy, x, w, mean, rstd, dx, dw, db, N, C, 1);
  const struct {
    const char *name;
    const float *got;
    const double *want;
    size_t n;
    double scale;
  } arr[] = {{"out", out, wo, n, 1},
             {"mean", mean, wm, (size_t)N, 1},
             {"rstd", rstd, wr, (size_t)N, 1},
             {"dx", dx, wdx, n, max_abs_d(wdx, n)},
             {"dw", dw, wdw, (size_t)C, max_abs_d(wdw, (size_t)C)},
             {"db", db, wdb, (size_t)C, max_abs_d(wdb, (size_t)C)}};
  for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) {
    char what[80];
    snprintf(what, sizeof what, "layernorm N %d C %d offset %g: %s", N, C,
             (double)off, arr[i].name);
    kr_close(arr[i].got, arr[i].want, arr[i].n, rel, arr[i].scale, 0, what);
  }
  free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(wo),
      free(wdx), free(wr), free(wm), free(wdw), free(wdb), free(out),
      free(mean), free(rstd);
}

Test(gpt_kernels_ref, layernorm_at_widths_1_to_771_matches_double_reference) {
  check_layernorm(1, 1, 0, 1e-5, 71); /* one element: out = b, dx = dx */
  check_layernorm(1, 3, 0, 1e-5, 73);
  check_layernorm(2, 16, 0, 1e-5, 75);
  check_layernorm(3, 771, 0, 1e-5, 77);
  check_layernorm(3, 771, 100, 1e-4, 79); /* x carries 8e-6 of rounding */
}

/* ---------------------------------------------------------------------- */
/* GELU (tanh form) over [-20, 20]: exp's clamps in vector lanes */

/* In terms of h = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), which does not
 * cancel for x << 0 as 1 + tanh(u) does (double's 1 + tanh(u) is 0 below
 * about x = -6.6, far above float's range): gelu = x h, and
 * gelu' = h + 2 x h (1 - h) k (1 + 3 c x^2). */
static double gelu_h(double x) {
  const double k = sqrt(2.0 / M_PI);
  return 1.0 / (1.0 + exp(-2.0 * k * (x + 0.044715 * x * x * x)));
}

static double gelu_d(double x) {
  return x * gelu_h(x);
}

static double gelu_grad_d(double x) {
  const double k = sqrt(2.0 / M_PI);
  double h = gelu_h(x);
  return h + 2 * x * h * (1 - h) * k * (1 + 3 * 0.044715 * x * x);
}

Test(gpt_kernels_ref, gelu_over_wide_inputs_matches_double_reference) {
  enum { R = 3, CC = 1001, GN = R * CC };
  float *pre = kr_random(GN, 81, -20, 20),
        *bias = kr_random(CC, 82, -0.5f, 0.5f);
  float *pre0 = kr_alloc(GN), *out = kr_alloc(GN),
        *dy = kr_random(GN, 83, -1, 1);
  float *dp = kr_alloc(GN);
  memcpy(pre0, pre, sizeof(float) * GN);
  rp_cpu_gpt_bias_gelu_fwd(pre, bias, out, R, CC);
  rp_cpu_gpt_gelu_bwd(pre, dy, dp, GN);
  double *wo = kr_dalloc(GN), *wg = kr_dalloc(GN);
  for (int i = 0; i < GN; i++) {
    cr_assert(pre[i] == pre0[i] + bias[i % CC], "pre[%d] += bias", i);
    wo[i] = gelu_d(pre[i]);
    wg[i] = dy[i] * gelu_grad_d(pre[i]);
  }
  /* each output within 1e-5 of itself (x h does not cancel; below 1e-30
   * float flushes it); the gradient within 1e-5 of max(|g|, 1e-2), since
   * h + (a negative term) cancels near x = -0.75 */
  kr_close(out, wo, GN, 1e-5, 1e-30, 0, "bias_gelu_fwd");
  kr_close(dp, wg, GN, 1e-5, 1e-2, 0, "gelu_bwd");
  free(pre), free(bias), free(pre0), free(out), free(dy), free(dp), free(wo),
      free(wg);
}

/* Inputs of any finite size: the gradient's x^2 overflows float beyond
 * |x| = 5e19, where h is exactly 1 (x > 0) or 0 (x < 0); the reference,
 * whose x^2 is finite in double, gives those limits. Each gradient within
 * 1e-6 of max(|g|, 1), every one finite. */
Test(gpt_kernels_ref, gelu_bwd_of_huge_inputs_is_the_limit_not_nan) {
  static const float xs[] = {
      1e4f,  -1e4f,  1.0001e4f, -1.0001e4f, 1e19f, -1e19f, 5e19f,   -5e19f,
      6e19f, -6e19f, 1e20f,     -1e20f,     1e30f, -1e30f, 3.4e38f, -3.4e38f};
  enum { GN = KR_LEN(xs), REP = 3 };
  /* REP copies, so that the vector body and its tail both meet them */
  float pre[GN * REP], dy[GN * REP], dp[GN * REP];
  double want[GN * REP];
  for (int i = 0; i < GN * REP; i++) {
    pre[i] = xs[i % GN];
    dy[i] = 1.0f;
    want[i] = gelu_grad_d(pre[i]);
    cr_assert(isfinite(want[i]), "reference at %g", (double)pre[i]);
  }
  rp_cpu_gpt_gelu_bwd(pre, dy, dp, GN * REP);
  for (int i = 0; i < GN * REP; i++)
    cr_assert(isfinite(dp[i]), "gelu_bwd at %g is %g", (double)pre[i],
              (double)dp[i]);
  kr_close(dp, want, GN * REP, 1e-6, 1, 0, "gelu_bwd at huge inputs");
  /* the infinities: the limits too (the reference's inf * 0 is NaN) */
  float inf[2] = {INFINITY, -INFINITY}, one[2] = {1, 1}, dinf[2];
  rp_cpu_gpt_gelu_bwd(inf, one, dinf, 2);
  cr_assert(dinf[0] == 1.0f && dinf[1] == 0.0f,
            "gelu_bwd at +inf %g (need 1), at -inf %g (need 0)",
            (double)dinf[0], (double)dinf[1]);
}

/* ---------------------------------------------------------------------- */
/* The AVX2 copies against the plain ones: the same bits */

/* Runs fn twice, AVX2 then plain, on copies of the same inputs. */
typedef void (*vec_case)(float *const *bufs);

static void both_copies(const char *what, vec_case fn, size_t nbufs,
                        const size_t *len, uint32_t seed) {
  float *a[10], *p[10];
  cr_assert(nbufs <= 10);
  for (size_t i = 0; i < nbufs; i++) {
    a[i] = kr_random(len[i], seed + (uint32_t)i, -3, 3);
    p[i] = kr_alloc(len[i]);
    memcpy(p[i], a[i], len[i] * sizeof(float));
  }
  rp__vec_plain = 0;
  fn(a);
  rp__vec_plain = 1;
  fn(p);
  rp__vec_plain = 0;
  for (size_t i = 0; i < nbufs; i++) {
    cr_assert(memcmp(a[i], p[i], len[i] * sizeof(float)) == 0,
              "%s: buffer %zu differs between the AVX2 and plain copies", what,
              i);
    free(a[i]), free(p[i]);
  }
}

enum { VN = 3, VC = 771, VB = 2, VT = 37, VCA = 36, VNH = 3 };

/* a, r, res, w, bias, out, mean, rstd, dw, db */
static void run_ln(float *const *b) {
  rp_cpu_gpt_residual_layernorm_fwd(b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                                    b[7], VN, VC, 1e-5f);
  rp_cpu_gpt_layernorm_fwd(b[2], b[3], b[4], b[5], b[6], b[7], VN, VC, 1e-5f);
  /* dout r, dx accumulated onto a */
  rp_cpu_gpt_layernorm_bwd(b[1], b[2], b[3], b[6], b[7], b[0], b[8], b[9], VN,
                           VC, 1);
}

static void run_gelu(float *const *b) {
  rp_cpu_gpt_bias_gelu_fwd(b[0], b[1], b[2], VN, VC);
  b[0][5] = NAN, b[0][6] = INFINITY, b[0][7] = -INFINITY; /* the ends */
  b[0][8] = 95.0f, b[0][9] = -95.0f;
  rp_cpu_gpt_gelu_bwd(b[0], b[3], b[4], (int64_t)VN * VC);
}

static void run_attn(float *const *b) {
  rp_cpu_gpt_attention_fwd(b[0], b[1], b[2], b[3], b[4], VB, VT, VCA, VNH);
  rp_cpu_gpt_attention_bwd(b[5], b[1], b[2], b[6], b[7], b[4], VB, VT, VCA,
                           VNH);
}

static void run_adamw(float *const *b) {
  rp_gpt_adamw_args a = adam_args();
  float *w[AK], *g[AK], *m[AK], *v[AK];
  for (int i = 0; i < AK; i++) { /* slices of 4 buffers of 1053 */
    size_t at = 0;
    for (int k = 0; k < i; k++)
      at += adam_n[k];
    w[i] = b[0] + at, g[i] = b[1] + at, m[i] = b[2] + at, v[i] = b[3] + at;
  }
  for (size_t e = 0; e < 1053; e++)
    b[3][e] = fabsf(b[3][e]); /* v >= 0 */
  rp_cpu_gpt_adamw(w, (const float *const *)g, m, v, adam_n, b[4], NULL, &a);
}

Test(gpt_kernels_ref, avx2_and_plain_copies_give_the_same_bits) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2"))
    cr_skip_test("this CPU has no AVX2: one copy runs");
#else
  cr_skip_test("no AVX2 copies in this build (GCC on x86-64 makes them)");
#endif
  const size_t nln = (size_t)VN * VC;
  const size_t ln[10] = {nln, nln, nln, VC, VC, nln, VN, VN, VC, VC};
  both_copies("layernorm", run_ln, 10, ln, 91);
  const size_t ge[5] = {nln, VC, nln, nln, nln};
  both_copies("gelu", run_gelu, 5, ge, 93);
  const size_t n = (size_t)VB * VT * VCA, na = (size_t)VB * VNH * VT * VT;
  const size_t at[8] = {3 * n, 3 * n, na, n, 4 * n, n, 3 * n, na};
  both_copies("attention", run_attn, 8, at, 95);
  const size_t ad[5] = {1053, 1053, 1053, 1053, AK + 1};
  both_copies("adamw", run_adamw, 5, ad, 97);
}
