/* test/test_gpt_kernels.c — the GPT CPU kernels (kernels/gpt_kernels.h) and
 * their gpt.* tasks.
 *
 * References and bounds:
 *  - forwards against naive double-precision loops written here, straight
 *    from the formulas, within 1e-5 of max(|expected|, 1) (plus 1e-5
 *    absolute for the products of 5 to 8 terms of magnitude <= 1);
 *  - backwards against central finite differences of the f32 forward of
 *    L = sum_i r_i y_i (r a fixed random projection, L accumulated in
 *    double), h = 1e-2 on inputs of magnitude <= 4: truncation
 *    h^2/6 |L'''| is below 2e-5 and f32 rounding of L over 2h below 1e-4
 *    for these sizes (tens of outputs of magnitude <= 3), so the bound is
 *    |g - fd| <= 2e-4 + 2e-3 |fd| (the largest deviation seen is 1.5e-5;
 *    a gradient off by 1% fails it);
 *  - AdamW against a two-step example computed by hand (in double, as
 *    written in gpt_kernels.h), within 1e-6 relative;
 *  - decoding against attention_fwd's rows for the same prefix (1e-5);
 *  - every gpt.* task, launched on a runtime, against its raw kernel:
 *    bitwise on the CPU backend, within 1e-4 of max(|x|, 1) on CUDA (suite
 *    gpt_tasks_backends, also built as test_gpt_kernels_cuda);
 *  - the tasks' refusals (missing access, wrong type, too small, bad args,
 *    a position or token out of range) leave every output untouched; every
 *    access of every task, short by one element, of the other type,
 *    strided or left out, is refused with a message naming it; so is an
 *    access overlapping one the task writes. */
#include "helpers.h"
#include "kernels_ref.h"

#include "engine/engine.h"
#include "kernels/gpt_kernels.h"
#include "kernels/tasks.h"
#include "kernels/vexpf.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Helpers */

static void *dup_f(const float *p, size_t n) {
  float *q = kr_alloc(n);
  memcpy(q, p, n * sizeof *q);
  return q;
}

static double dot_d(const float *r, const float *y, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += (double)r[i] * y[i];
  return s;
}

typedef double (*objective)(void *st);

/* Central differences of f with respect to x[0..n) (every element up to
 * 96, else a stride through them) against grad. */
static void fd_check(const char *what, float *x, size_t n, const float *grad,
                     objective f, void *st) {
  size_t step = n <= 96 ? 1 : n / 61 + 1;
  for (size_t i = 0; i < n; i += step) {
    float x0 = x[i], xp = x0 + 1e-2f, xm = x0 - 1e-2f;
    x[i] = xp;
    double fp = f(st);
    x[i] = xm;
    double fm = f(st);
    x[i] = x0;
    double fd = (fp - fm) / ((double)xp - (double)xm);
    cr_assert(fabs(grad[i] - fd) <= 2e-4 + 2e-3 * fabs(fd),
              "%s: gradient %zu is %.7g, finite difference %.7g", what, i,
              grad[i], fd);
  }
}

static void bits_eq(const float *a, const float *b, size_t n,
                    const char *what) {
  cr_assert(memcmp(a, b, n * sizeof *a) == 0, "%s differs bitwise", what);
}

static int32_t *tokens_of(size_t n, int V, uint32_t seed) {
  return kr_labels(n, (size_t)V, seed);
}

/* ---------------------------------------------------------------------- */
/* Embeddings */

enum { EB = 2, ET = 5, EC = 6, EV = 7 };

/* The vectorisable exp of the softmax, GELU and cross-entropy kernels:
 * within 2.5e-7 relative of expf from ln(FLT_MIN) to 88, inf above
 * ln(FLT_MAX), 0 below ln(FLT_MIN) (no subnormals), NaN in, NaN out (under
 * UBSan: no undefined shift or conversion on the way). */
Test(gpt_kernels, vexpf_matches_expf_and_handles_the_ends) {
  for (int i = -8733; i <= 8800; i++) {
    float x = (float)i * 0.01f, want = expf(x), got = rp_vexpf(x);
    cr_assert(fabsf(got - want) <= 2.5e-7f * want, "exp(%g): %.9g vs %.9g",
              (double)x, (double)got, (double)want);
  }
  cr_assert(isinf(rp_vexpf(89.0f)) && rp_vexpf(89.0f) > 0);
  cr_assert(isinf(rp_vexpf(INFINITY)));
  cr_assert_eq(rp_vexpf(-88.0f), 0.0f);
  cr_assert_eq(rp_vexpf(-INFINITY), 0.0f);
  cr_assert_eq(rp_vexpf(0.0f), 1.0f);
  cr_assert(isnan(rp_vexpf(NAN)));
  cr_assert(isnan(rp_vexpf(-NAN)));
}

Test(gpt_kernels, embed_fwd_matches_lookup_and_bwd_sums_rows) {
  int32_t *tok = tokens_of(EB * ET, EV, 3);
  tok[0] = tok[ET + 2] = 4; /* a repeated token */
  float *wte = kr_random(EV * EC, 4, -1, 1),
        *wpe = kr_random(ET * EC, 5, -1, 1);
  float *out = kr_alloc(EB * ET * EC);
  RP_CHECK(rp_cpu_gpt_embed_fwd(tok, wte, wpe, out, EB, ET, EC, EV));
  for (int b = 0; b < EB; b++)
    for (int t = 0; t < ET; t++)
      for (int c = 0; c < EC; c++)
        cr_assert(out[(b * ET + t) * EC + c] ==
                      wte[tok[b * ET + t] * EC + c] + wpe[t * EC + c],
                  "out[%d,%d,%d]", b, t, c);
  /* backward: dwte += (it holds the LM head's part), dwpe = */
  float *dout = kr_random(EB * ET * EC, 6, -1, 1);
  float *dwte = kr_random(EV * EC, 7, -1, 1), *dwte0 = dup_f(dwte, EV * EC);
  float *dwpe = kr_random(ET * EC, 8, 100, 200);
  RP_CHECK(rp_cpu_gpt_embed_bwd(tok, dout, dwte, dwpe, EB, ET, EC, EV));
  double want_te[EV * EC], want_pe[ET * EC];
  for (int i = 0; i < EV * EC; i++)
    want_te[i] = dwte0[i];
  memset(want_pe, 0, sizeof want_pe);
  for (int r = 0; r < EB * ET; r++)
    for (int c = 0; c < EC; c++) {
      want_te[tok[r] * EC + c] += dout[r * EC + c];
      want_pe[(r % ET) * EC + c] += dout[r * EC + c];
    }
  kr_close(dwte, want_te, EV * EC, 1e-6, 1.0, 0, "dwte");
  kr_close(dwpe, want_pe, ET * EC, 1e-6, 1.0, 0, "dwpe");
  free(tok), free(wte), free(wpe), free(out), free(dout), free(dwte),
      free(dwte0), free(dwpe);
}

Test(gpt_kernels, embed_rejects_a_token_out_of_range_before_writing) {
  int32_t tok[4] = {0, 1, EV, 2};
  float *wte = kr_random(EV * EC, 4, -1, 1), *wpe = kr_random(4 * EC, 5, -1, 1);
  float *out = kr_random(4 * EC, 6, -1, 1), *out0 = dup_f(out, 4 * EC);
  RP_EXPECT(rp_cpu_gpt_embed_fwd(tok, wte, wpe, out, 1, 4, EC, EV), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "token 7"), "%s", rp_error_detail());
  bits_eq(out, out0, 4 * EC, "out after a bad token");
  tok[2] = -1;
  float *dwte = dup_f(wte, EV * EC), *dwpe = dup_f(wpe, 4 * EC);
  RP_EXPECT(rp_cpu_gpt_embed_bwd(tok, out, dwte, dwpe, 1, 4, EC, EV),
            RP_ERANGE);
  bits_eq(dwte, wte, EV * EC, "dwte after a bad token");
  bits_eq(dwpe, wpe, 4 * EC, "dwpe after a bad token");
  RP_EXPECT(rp_cpu_gpt_embed_token(wte, wpe, out, 4, 0, EC, EV, 4), RP_ERANGE);
  RP_EXPECT(rp_cpu_gpt_embed_token(wte, wpe, out, 0, EV, EC, EV, 4), RP_ERANGE);
  bits_eq(out, out0, 4 * EC, "out after a bad pos or token");
  RP_CHECK(rp_cpu_gpt_embed_token(wte, wpe, out, 3, 5, EC, EV, 4));
  for (int c = 0; c < EC; c++)
    cr_assert(out[c] == wte[5 * EC + c] + wpe[3 * EC + c]);
  free(wte), free(wpe), free(out), free(out0), free(dwte), free(dwpe);
}

/* ---------------------------------------------------------------------- */
/* LayerNorm */

enum { LN_N = 6, LN_C = 10 };

typedef struct ln_state {
  float *x, *w, *b, *out, *mean, *rstd, *r;
} ln_state;

static double ln_obj(void *p) {
  ln_state *s = p;
  rp_cpu_gpt_layernorm_fwd(s->x, s->w, s->b, s->out, s->mean, s->rstd, LN_N,
                           LN_C, 1e-5f);
  return dot_d(s->r, s->out, LN_N * LN_C);
}

Test(gpt_kernels, layernorm_fwd_matches_reference) {
  float *x = kr_random(LN_N * LN_C, 11, -2, 3), *w = kr_random(LN_C, 12, -1, 1);
  float *b = kr_random(LN_C, 13, -1, 1), *out = kr_alloc(LN_N * LN_C);
  float mean[LN_N], rstd[LN_N];
  rp_cpu_gpt_layernorm_fwd(x, w, b, out, mean, rstd, LN_N, LN_C, 1e-5f);
  double want[LN_N * LN_C], wm[LN_N], wr[LN_N];
  for (int r = 0; r < LN_N; r++) {
    double m = 0, v = 0;
    for (int c = 0; c < LN_C; c++)
      m += x[r * LN_C + c];
    m /= LN_C;
    for (int c = 0; c < LN_C; c++)
      v += (x[r * LN_C + c] - m) * (x[r * LN_C + c] - m);
    v /= LN_C; /* biased, as torch */
    wm[r] = m;
    wr[r] = 1.0 / sqrt(v + 1e-5);
    for (int c = 0; c < LN_C; c++)
      want[r * LN_C + c] = (x[r * LN_C + c] - m) * wr[r] * w[c] + b[c];
  }
  kr_close(out, want, LN_N * LN_C, 1e-5, 1.0, 0, "layernorm out");
  kr_close(mean, wm, LN_N, 1e-5, 1.0, 0, "layernorm mean");
  kr_close(rstd, wr, LN_N, 1e-5, 1.0, 0, "layernorm rstd");
  /* residual variant: res = a + r, then the same */
  float *a = kr_random(LN_N * LN_C, 14, -1, 1), *rr = kr_alloc(LN_N * LN_C);
  for (int i = 0; i < LN_N * LN_C; i++)
    rr[i] = x[i] - a[i];
  float *res = kr_alloc(LN_N * LN_C), *out2 = kr_alloc(LN_N * LN_C);
  float mean2[LN_N], rstd2[LN_N];
  rp_cpu_gpt_residual_layernorm_fwd(a, rr, res, w, b, out2, mean2, rstd2, LN_N,
                                    LN_C, 1e-5f);
  for (int i = 0; i < LN_N * LN_C; i++)
    cr_assert(res[i] == a[i] + rr[i], "res[%d]", i);
  kr_close(out2, want, LN_N * LN_C, 1e-5, 1.0, 1e-5, "residual out");
  free(x), free(w), free(b), free(out), free(a), free(rr), free(res),
      free(out2);
}

Test(gpt_kernels, layernorm_bwd_matches_finite_differences) {
  ln_state s = {kr_random(LN_N * LN_C, 21, -2, 2),
                kr_random(LN_C, 22, -1, 1),
                kr_random(LN_C, 23, -1, 1),
                kr_alloc(LN_N * LN_C),
                kr_alloc(LN_N),
                kr_alloc(LN_N),
                kr_random(LN_N * LN_C, 24, -1, 1)};
  ln_obj(&s);
  float *dx = kr_alloc(LN_N * LN_C), *dw = kr_alloc(LN_C), *db = kr_alloc(LN_C);
  rp_cpu_gpt_layernorm_bwd(s.r, s.x, s.w, s.mean, s.rstd, dx, dw, db, LN_N,
                           LN_C, 0);
  /* accumulate = 1 adds the same dx onto what is there */
  float *dx2 = kr_random(LN_N * LN_C, 25, -1, 1),
        *base = dup_f(dx2, LN_N * LN_C);
  rp_cpu_gpt_layernorm_bwd(s.r, s.x, s.w, s.mean, s.rstd, dx2, dw, db, LN_N,
                           LN_C, 1);
  for (int i = 0; i < LN_N * LN_C; i++)
    cr_assert(dx2[i] == base[i] + dx[i], "dx += at %d", i);
  fd_check("layernorm dx", s.x, LN_N * LN_C, dx, ln_obj, &s);
  fd_check("layernorm dw", s.w, LN_C, dw, ln_obj, &s);
  fd_check("layernorm db", s.b, LN_C, db, ln_obj, &s);
  free(s.x), free(s.w), free(s.b), free(s.out), free(s.mean), free(s.rstd),
      free(s.r), free(dx), free(dw), free(db), free(dx2), free(base);
}

/* ---------------------------------------------------------------------- */
/* Linear */

enum { MN = 7, MC = 5, MOC = 9 };

typedef struct mm_state {
  float *inp, *W, *bias, *out, *r;
} mm_state;

static double mm_obj(void *p) {
  mm_state *s = p;
  rp_cpu_gpt_matmul_fwd(s->inp, s->W, s->bias, s->out, MN, MC, MOC);
  return dot_d(s->r, s->out, MN * MOC);
}

Test(gpt_kernels, matmul_fwd_matches_reference_and_bwd_finite_differences) {
  mm_state s = {kr_random(MN * MC, 31, -1, 1), kr_random(MOC * MC, 32, -1, 1),
                kr_random(MOC, 33, -1, 1), kr_alloc(MN * MOC),
                kr_random(MN * MOC, 34, -1, 1)};
  mm_obj(&s);
  double want[MN * MOC];
  for (int n = 0; n < MN; n++)
    for (int o = 0; o < MOC; o++) {
      double acc = s.bias[o];
      for (int c = 0; c < MC; c++)
        acc += (double)s.inp[n * MC + c] * s.W[o * MC + c];
      want[n * MOC + o] = acc;
    }
  kr_close(s.out, want, MN * MOC, 1e-5, 1.0, 1e-5, "matmul out");
  /* without bias */
  float *nob = kr_alloc(MN * MOC);
  rp_cpu_gpt_matmul_fwd(s.inp, s.W, NULL, nob, MN, MC, MOC);
  for (int n = 0; n < MN; n++)
    for (int o = 0; o < MOC; o++)
      want[n * MOC + o] -= s.bias[o];
  kr_close(nob, want, MN * MOC, 1e-5, 1.0, 1e-5, "matmul out, no bias");
  float *dinp = kr_alloc(MN * MC), *dW = kr_alloc(MOC * MC),
        *db = kr_alloc(MOC);
  rp_cpu_gpt_matmul_bwd(s.r, s.inp, s.W, dinp, dW, db, MN, MC, MOC, 0);
  float *dinp2 = kr_random(MN * MC, 35, -1, 1), *base = dup_f(dinp2, MN * MC);
  rp_cpu_gpt_matmul_bwd(s.r, s.inp, s.W, dinp2, dW, NULL, MN, MC, MOC, 1);
  for (int i = 0; i < MN * MC; i++)
    cr_assert(fabsf(dinp2[i] - (base[i] + dinp[i])) <= 1e-5f, "dinp += %d", i);
  fd_check("matmul dinp", s.inp, MN * MC, dinp, mm_obj, &s);
  fd_check("matmul dW", s.W, MOC * MC, dW, mm_obj, &s);
  fd_check("matmul dbias", s.bias, MOC, db, mm_obj, &s);
  free(s.inp), free(s.W), free(s.bias), free(s.out), free(s.r), free(nob),
      free(dinp), free(dW), free(db), free(dinp2), free(base);
}

/* ---------------------------------------------------------------------- */
/* GELU */

static double gelu_ref(double x) {
  return 0.5 * x *
         (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) *
                     (x + 0.044715 * x * x * x)));
}

typedef struct gelu_state {
  float *pre, *bias, *tmp, *out, *r;
  int n;
} gelu_state;

static double gelu_obj(void *p) {
  gelu_state *s = p;
  memcpy(s->tmp, s->pre, (size_t)s->n * sizeof(float));
  rp_cpu_gpt_bias_gelu_fwd(s->tmp, s->bias, s->out, 1, s->n);
  return dot_d(s->r, s->out, (size_t)s->n);
}

Test(gpt_kernels, bias_gelu_fwd_matches_reference_and_bwd_finite_differences) {
  enum { R = 4, CC = 13 };
  float *pre = kr_random(R * CC, 41, -4, 4), *bias = kr_random(CC, 42, -1, 1);
  float *pre0 = dup_f(pre, R * CC), *out = kr_alloc(R * CC);
  rp_cpu_gpt_bias_gelu_fwd(pre, bias, out, R, CC);
  double want[R * CC];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < CC; c++) {
      cr_assert(pre[r * CC + c] == pre0[r * CC + c] + bias[c], "pre += bias");
      want[r * CC + c] = gelu_ref(pre[r * CC + c]);
    }
  kr_close(out, want, R * CC, 1e-5, 1.0, 1e-6, "gelu out");
  gelu_state s = {pre0,
                  kr_alloc(R * CC),
                  kr_alloc(R * CC),
                  kr_alloc(R * CC),
                  kr_random(R * CC, 43, -1, 1),
                  R * CC};
  memset(s.bias, 0, R * CC * sizeof(float));
  float *dpre = kr_alloc(R * CC);
  rp_cpu_gpt_gelu_bwd(pre0, s.r, dpre, R * CC);
  fd_check("gelu dpre", pre0, R * CC, dpre, gelu_obj, &s);
  /* in place: dpre may be dout's instance */
  float *d = dup_f(s.r, R * CC);
  rp_cpu_gpt_gelu_bwd(pre0, d, d, R * CC);
  bits_eq(d, dpre, R * CC, "gelu_bwd in place");
  free(pre), free(bias), free(pre0), free(out), free(s.bias), free(s.tmp),
      free(s.out), free(s.r), free(dpre), free(d);
}

/* ---------------------------------------------------------------------- */
/* Attention */

enum { AB = 2, AT = 6, AC = 8, ANH = 2, AHS = AC / ANH, AN = AB * AT };

typedef struct attn_state {
  float *qkv, *qkvr, *att, *out, *scratch, *r;
} attn_state;

static attn_state attn_new(uint32_t seed) {
  attn_state s = {kr_random(AN * 3 * AC, seed, -1, 1),
                  kr_alloc(3 * AN * AC),
                  kr_alloc(AB * ANH * AT * AT),
                  kr_alloc(AN * AC),
                  kr_alloc(AN * AC),
                  kr_random(AN * AC, seed + 1, -1, 1)};
  return s;
}

static void attn_free(attn_state *s) {
  free(s->qkv), free(s->qkvr), free(s->att), free(s->out), free(s->scratch),
      free(s->r);
}

static double attn_obj(void *p) {
  attn_state *s = p;
  rp_cpu_gpt_attention_fwd(s->qkv, s->qkvr, s->att, s->out, s->scratch, AB, AT,
                           AC, ANH);
  return dot_d(s->r, s->out, AN * AC);
}

Test(gpt_kernels, attention_fwd_matches_causal_softmax_reference) {
  attn_state s = attn_new(51);
  attn_obj(&s);
  double want[AN * AC], watt[AB * ANH * AT * AT];
  double scale = 1.0 / sqrt((double)AHS);
  for (int b = 0; b < AB; b++)
    for (int h = 0; h < ANH; h++)
      for (int t = 0; t < AT; t++) {
        const float *q = s.qkv + (b * AT + t) * 3 * AC + h * AHS;
        double sc[AT], mx = -1e300, sum = 0;
        for (int u = 0; u <= t; u++) {
          const float *k = s.qkv + (b * AT + u) * 3 * AC + AC + h * AHS;
          sc[u] = 0;
          for (int d = 0; d < AHS; d++)
            sc[u] += (double)q[d] * k[d];
          sc[u] *= scale;
          mx = sc[u] > mx ? sc[u] : mx;
        }
        for (int u = 0; u <= t; u++)
          sum += sc[u] = exp(sc[u] - mx);
        double *arow = watt + ((b * ANH + h) * AT + t) * AT;
        for (int u = 0; u < AT; u++)
          arow[u] = u <= t ? sc[u] / sum : 0.0;
        for (int d = 0; d < AHS; d++) {
          double acc = 0;
          for (int u = 0; u <= t; u++)
            acc +=
                arow[u] * s.qkv[(b * AT + u) * 3 * AC + 2 * AC + h * AHS + d];
          want[(b * AT + t) * AC + h * AHS + d] = acc;
        }
      }
  kr_close(s.out, want, AN * AC, 1e-5, 1.0, 1e-6, "attention out");
  kr_close(s.att, watt, AB * ANH * AT * AT, 1e-5, 1.0, 1e-7, "attention att");
  for (int u = 0; u < AB * ANH * AT * AT; u++)
    if (watt[u] == 0.0)
      cr_assert(s.att[u] == 0.0f, "att %d above the diagonal", u);
  /* qkvr: [3][B][NH][T][hs] */
  for (int p = 0; p < 3; p++)
    for (int b = 0; b < AB; b++)
      for (int h = 0; h < ANH; h++)
        for (int t = 0; t < AT; t++)
          for (int d = 0; d < AHS; d++)
            cr_assert(s.qkvr[(((p * AB + b) * ANH + h) * AT + t) * AHS + d] ==
                      s.qkv[(b * AT + t) * 3 * AC + p * AC + h * AHS + d]);
  attn_free(&s);
}

Test(gpt_kernels, attention_bwd_matches_finite_differences) {
  attn_state s = attn_new(61);
  attn_obj(&s);
  float *dqkv = kr_alloc(AN * 3 * AC), *datt = kr_alloc(AB * ANH * AT * AT);
  float *scr = kr_alloc(4 * AN * AC);
  rp_cpu_gpt_attention_bwd(s.r, s.qkvr, s.att, dqkv, datt, scr, AB, AT, AC,
                           ANH);
  fd_check("attention dqkv", s.qkv, AN * 3 * AC, dqkv, attn_obj, &s);
  /* deterministic: a second run is bitwise equal */
  float *again = kr_alloc(AN * 3 * AC);
  attn_obj(&s);
  rp_cpu_gpt_attention_bwd(s.r, s.qkvr, s.att, again, datt, scr, AB, AT, AC,
                           ANH);
  bits_eq(again, dqkv, AN * 3 * AC, "attention_bwd run twice");
  free(dqkv), free(datt), free(scr), free(again);
  attn_free(&s);
}

Test(gpt_kernels, attention_decode_equals_fwd_rows_of_the_same_prefix) {
  enum { TM = 7 };
  float *seq = kr_random(TM * 3 * AC, 71, -1, 1);
  float *kc = kr_alloc(ANH * TM * AHS), *vc = kr_alloc(ANH * TM * AHS);
  float *out = kr_alloc(AC), *scr = kr_alloc(ANH * TM);
  float *qkvr = kr_alloc(3 * TM * AC), *att = kr_alloc(ANH * TM * TM);
  float *fout = kr_alloc(TM * AC), *fscr = kr_alloc(TM * AC);
  rp_cpu_gpt_attention_fwd(seq, qkvr, att, fout, fscr, 1, TM, AC, ANH);
  for (int pos = 0; pos < TM; pos++) {
    RP_CHECK(rp_cpu_gpt_attention_decode(seq + pos * 3 * AC, kc, vc, out, scr,
                                         pos, TM, AC, ANH));
    kr_close_f(out, fout + pos * AC, AC, 1e-5, 1.0, 1e-6, "decode row");
    for (int h = 0; h < ANH; h++)
      for (int d = 0; d < AHS; d++)
        cr_assert(kc[(h * TM + pos) * AHS + d] ==
                      seq[pos * 3 * AC + AC + h * AHS + d] &&
                  vc[(h * TM + pos) * AHS + d] ==
                      seq[pos * 3 * AC + 2 * AC + h * AHS + d]);
  }
  float *out0 = dup_f(out, AC), *kc0 = dup_f(kc, ANH * TM * AHS);
  RP_EXPECT(rp_cpu_gpt_attention_decode(seq, kc, vc, out, scr, TM, TM, AC, ANH),
            RP_ERANGE);
  RP_EXPECT(rp_cpu_gpt_attention_decode(seq, kc, vc, out, scr, -1, TM, AC, ANH),
            RP_ERANGE);
  bits_eq(out, out0, AC, "decode out after a bad pos");
  bits_eq(kc, kc0, ANH * TM * AHS, "kcache after a bad pos");
  free(seq), free(kc), free(vc), free(out), free(scr), free(qkvr), free(att),
      free(fout), free(fscr), free(out0), free(kc0);
}

/* ---------------------------------------------------------------------- */
/* Cross-entropy */

enum { XN = 5, XV = 9 };

typedef struct xent_state {
  float *logits, *tmp, *losses, loss;
  int32_t *tg;
} xent_state;

static double xent_obj(void *p) {
  xent_state *s = p;
  memcpy(s->tmp, s->logits, XN * XV * sizeof(float));
  RP_CHECK(rp_cpu_gpt_xent(s->tmp, s->tg, s->losses, &s->loss, XN, XV, 0, 0));
  return s->loss;
}

Test(gpt_kernels, xent_loss_and_grad_match_the_formula_and_differences) {
  xent_state s = {kr_random(XN * XV, 81, -3, 3), kr_alloc(XN * XV),
                  kr_alloc(XN), 0, tokens_of(XN, XV, 82)};
  float *g = dup_f(s.logits, XN * XV), losses[XN], loss = 0;
  float norm = 12.0f; /* a shard of a 12-row batch */
  RP_CHECK(rp_cpu_gpt_xent(g, s.tg, losses, &loss, XN, XV, norm, 1));
  double total = 0;
  for (int r = 0; r < XN; r++) {
    double m = -1e300, z = 0;
    for (int c = 0; c < XV; c++)
      m = fmax(m, s.logits[r * XV + c]);
    for (int c = 0; c < XV; c++)
      z += exp(s.logits[r * XV + c] - m);
    double lr = log(z) + m - s.logits[r * XV + s.tg[r]];
    cr_assert(fabs(losses[r] - lr) <= 1e-5 * fmax(1.0, fabs(lr)), "row %d", r);
    total += lr;
    for (int c = 0; c < XV; c++) {
      double p = exp(s.logits[r * XV + c] - m) / z;
      double want = (p - (c == s.tg[r])) / norm;
      cr_assert(fabs(g[r * XV + c] - want) <= 1e-6, "dlogits[%d,%d]", r, c);
    }
  }
  cr_assert(fabs(loss - total / norm) <= 1e-5 * fmax(1.0, total / norm));
  /* norm 0: the mean over N rows; the gradient of that loss by differences */
  float *g0 = dup_f(s.logits, XN * XV);
  RP_CHECK(rp_cpu_gpt_xent(g0, s.tg, losses, &loss, XN, XV, 0, 1));
  fd_check("xent dlogits", s.logits, XN * XV, g0, xent_obj, &s);
  /* grad = 0 reads the logits only */
  float *ro = dup_f(s.logits, XN * XV);
  RP_CHECK(rp_cpu_gpt_xent(ro, s.tg, losses, &loss, XN, XV, 0, 0));
  bits_eq(ro, s.logits, XN * XV, "logits with grad = 0");
  /* a bad target: nothing written */
  float lcopy[XN];
  memcpy(lcopy, losses, sizeof lcopy);
  s.tg[3] = XV;
  RP_EXPECT(rp_cpu_gpt_xent(ro, s.tg, losses, &loss, XN, XV, 0, 1), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "row 3"), "%s", rp_error_detail());
  bits_eq(ro, s.logits, XN * XV, "logits after a bad target");
  bits_eq(losses, lcopy, XN, "losses after a bad target");
  free(s.logits), free(s.tmp), free(s.losses), free(s.tg), free(g), free(g0),
      free(ro);
}

/* ---------------------------------------------------------------------- */
/* AdamW */

/* Two tensors (a decayed matrix of 3 and a vector of 2), clipping active
 * on step 1, not on step 2, computed in double by the formulas of
 * gpt_kernels.h. */
Test(gpt_kernels, adamw_two_steps_match_a_hand_computed_example) {
  float w0[3] = {0.5f, -1.0f, 2.0f}, w1[2] = {0.25f, -0.75f};
  float g0[3] = {3.0f, -4.0f, 0.0f}, g1[2] = {0.0f, 12.0f};
  float m0[3] = {0}, m1[2] = {0}, v0[3] = {0}, v1[2] = {0}, stats[3];
  float *w[2] = {w0, w1}, *m[2] = {m0, m1}, *v[2] = {v0, v1};
  const float *g[2] = {g0, g1};
  size_t n[2] = {3, 2};
  rp_gpt_adamw_args a = kr_adamw_args(0.1f, 1, 6.5f, 2);
  a.decay[0] = 1;
  double W[5] = {0.5, -1.0, 2.0, 0.25, -0.75}, M[5] = {0}, V[5] = {0};
  for (int step = 1; step <= 2; step++) {
    a.step = step;
    if (step == 2) { /* new gradients, below max_norm */
      g0[0] = 0.5f, g0[1] = 1.0f, g0[2] = -1.0f, g1[0] = 2.0f, g1[1] = 0.0f;
    }
    double gd[5] = {g0[0], g0[1], g0[2], g1[0], g1[1]};
    double sq0 = gd[0] * gd[0] + gd[1] * gd[1] + gd[2] * gd[2];
    double sq1 = gd[3] * gd[3] + gd[4] * gd[4];
    double norm = sqrt(sq0 + sq1); /* 13 on step 1, 2.5 on step 2 */
    double scale = fmin(1.0, 6.5 / (norm + 1e-6));
    rp_cpu_gpt_adamw(w, g, m, v, n, stats, NULL, &a);
    cr_assert(fabs(stats[0] - norm) <= 1e-6 * norm, "step %d norm %g", step,
              stats[0]);
    cr_assert(stats[1] == (float)sq0 && stats[2] == (float)sq1, "step %d sq",
              step);
    double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.95, step);
    for (int i = 0; i < 5; i++) {
      double gi = scale * gd[i];
      if (i < 3)
        W[i] -= 0.1 * 0.1 * W[i];
      M[i] = 0.9 * M[i] + 0.1 * gi;
      V[i] = 0.95 * V[i] + 0.05 * gi * gi;
      W[i] -= 0.1 * (M[i] / bc1) / (sqrt(V[i] / bc2) + 1e-8);
    }
    float got[5] = {w0[0], w0[1], w0[2], w1[0], w1[1]};
    float gm[5] = {m0[0], m0[1], m0[2], m1[0], m1[1]};
    float gv[5] = {v0[0], v0[1], v0[2], v1[0], v1[1]};
    kr_close(got, W, 5, 1e-6, 1.0, 0, "adamw w");
    kr_close(gm, M, 5, 1e-6, 1.0, 0, "adamw m");
    kr_close(gv, V, 5, 1e-6, 1.0, 1e-9, "adamw v");
  }
  /* step 1 by hand for w1[1] (no decay, g = 12 * 6.5/13 = 6): m = 0.6,
   * v = 1.8, mhat = 6, vhat = 36, w = -0.75 - 0.1 * 6 / 6 = -0.85 */
  cr_assert(fabs(W[4] -
                 (-0.85 - 0.1 * (0.9 * 0.6 + 0) / (1 - 0.81) /
                              (sqrt(0.95 * 1.8 / (1 - 0.9025)) + 1e-8))) < 1e-9,
            "w1[1] after step 2: %.9g", W[4]);
}

/* A gradient norm that is NaN (one NaN gradient element) makes every
 * weight NaN, as torch's clip_grad_norm_ (its clamp keeps the NaN): no
 * tensor takes an unclipped step; the same through shared sums (the NaN
 * in another share's sum). */
Test(gpt_kernels, adamw_nan_norm_makes_every_weight_nan) {
  for (int sharded = 0; sharded < 2; sharded++) {
    float w0[3] = {0.5f, -1.0f, 2.0f}, w1[2] = {0.25f, -0.75f};
    float g0[3] = {NAN, 0.5f, 0.0f}, g1[2] = {0.5f, 1.0f};
    float m0[3] = {0}, m1[2] = {0}, v0[3] = {0}, v1[2] = {0}, stats[3];
    float *w[2] = {w0, w1}, *m[2] = {m0, m1}, *v[2] = {v0, v1};
    const float *g[2] = {g0, g1};
    size_t n[2] = {3, 2};
    rp_gpt_adamw_args a = kr_adamw_args(0.1f, 1, 1.0f, 2);
    a.decay[0] = 1;
    if (sharded) { /* this share holds tensor 1 only; sq[0] is the other's */
      float sq[2] = {NAN, 1.25f};
      a.count = 1, a.norm_parts = 2;
      rp_cpu_gpt_adamw(&w[1], &g[1], &m[1], &v[1], &n[1], stats, sq, &a);
    } else {
      rp_cpu_gpt_adamw(w, g, m, v, n, stats, NULL, &a);
    }
    cr_assert(isnan(stats[0]), "norm %g", stats[0]);
    for (int i = 0; i < 2; i++)
      cr_assert(isnan(w1[i]) && isnan(m1[i]) && isnan(v1[i]),
                "sharded %d: tensor 1 element %d took a step: w %g", sharded, i,
                w1[i]);
    for (int i = 0; i < 3 && !sharded; i++)
      cr_assert(isnan(w0[i]), "tensor 0 element %d: w %g", i, w0[i]);
  }
}

/* Sharded: the two tensors as two shares (gpt.sumsq each, the sums
 * gathered, gpt.adamw each with norm_parts 2) give the unsharded step's
 * bits (the sums of squares here are exact in f32), clipping included. */
Test(gpt_kernels, adamw_over_shares_equals_one_adamw) {
  float w0[3] = {0.5f, -1.0f, 2.0f}, w1[2] = {0.25f, -0.75f};
  float g0[3] = {3.0f, -4.0f, 0.0f}, g1[2] = {0.0f, 12.0f};
  float m0[3] = {0.1f, 0, 0}, m1[2] = {0, -0.2f}, v0[3] = {0.5f, 0, 1},
        v1[2] = {2, 0};
  float W0[3], W1[2], M0[3], M1[2], V0[3], V1[2];
  memcpy(W0, w0, sizeof w0), memcpy(W1, w1, sizeof w1);
  memcpy(M0, m0, sizeof m0), memcpy(M1, m1, sizeof m1);
  memcpy(V0, v0, sizeof v0), memcpy(V1, v1, sizeof v1);
  rp_gpt_adamw_args a = kr_adamw_args(0.1f, 2, 6.5f, 2);
  a.decay[0] = 1;
  float stats[3], *w[2] = {w0, w1}, *m[2] = {m0, m1}, *v[2] = {v0, v1};
  const float *g[2] = {g0, g1};
  size_t n[2] = {3, 2};
  rp_cpu_gpt_adamw(w, g, m, v, n, stats, NULL, &a);
  /* the shares */
  float sq[2], each0[1], each1[1], st0[2] = {-1, -1}, st1[2] = {-1, -1};
  const float *G0[1] = {g0}, *G1[1] = {g1};
  rp_cpu_gpt_sumsq(G0, &n[0], 1, &sq[0], each0);
  rp_cpu_gpt_sumsq(G1, &n[1], 1, &sq[1], each1);
  cr_assert(sq[0] == 25.0f && each0[0] == 25.0f && sq[1] == 144.0f);
  rp_gpt_adamw_args s0 = a, s1 = a;
  s0.count = s1.count = 1;
  s0.norm_parts = s1.norm_parts = 2;
  s1.decay[0] = 0;
  float *pw0[1] = {W0}, *pm0[1] = {M0}, *pv0[1] = {V0};
  float *pw1[1] = {W1}, *pm1[1] = {M1}, *pv1[1] = {V1};
  rp_cpu_gpt_adamw(pw0, G0, pm0, pv0, &n[0], st0, sq, &s0);
  rp_cpu_gpt_adamw(pw1, G1, pm1, pv1, &n[1], st1, sq, &s1);
  cr_assert(st0[0] == stats[0] && st1[0] == stats[0] && stats[0] == 13.0f,
            "norm %g %g %g", st0[0], st1[0], stats[0]);
  cr_assert(st0[1] == -1 && st1[1] == -1, "no per-tensor sums when sharded");
  cr_assert(!memcmp(W0, w0, sizeof W0) && !memcmp(W1, w1, sizeof W1) &&
                !memcmp(M0, m0, sizeof M0) && !memcmp(M1, m1, sizeof M1) &&
                !memcmp(V0, v0, sizeof V0) && !memcmp(V1, v1, sizeof V1),
            "the shares' update differs from one AdamW's");
}

/* gpt.sumsq against sums in double. */
Test(gpt_kernels, sumsq_matches_double_sums) {
  float *a = kr_random(1000, 31, -2, 2), *b = kr_random(7, 32, -1, 1);
  const float *g[2] = {a, b};
  size_t n[2] = {1000, 7};
  float sq, each[2];
  rp_cpu_gpt_sumsq(g, n, 2, &sq, each);
  double sa = 0, sb = 0;
  for (size_t i = 0; i < 1000; i++)
    sa += (double)a[i] * a[i];
  for (size_t i = 0; i < 7; i++)
    sb += (double)b[i] * b[i];
  cr_assert(each[0] == (float)sa && each[1] == (float)sb, "each");
  cr_assert(sq == (float)(sa + sb), "sq %.9g vs %.9g", sq, sa + sb);
  free(a), free(b);
}

/* ---------------------------------------------------------------------- */
/* The tasks, launched eagerly on each backend (suite gpt_tasks_backends:
 * on the CPU backend every access equals the raw kernel's result bitwise;
 * on CUDA, where the task runs the rp_cuda_gpt_* launcher, within 1e-4 of
 * max(|x|, 1): cuBLAS and the device reductions sum in other orders). */

enum { TC_MAX = 12 };

/* One launch: its accesses' initial contents and, computed on the host
 * by the CPU kernel in place, the contents expected after it. */
typedef struct tcase {
  uint32_t n;
  rp_dtype dt[TC_MAX];
  size_t len[TC_MAX];
  void *init[TC_MAX], *want[TC_MAX];
  int scratch[TC_MAX]; /* contents left to the backend: compared on CPU */
} tcase;

static void tc_push(tcase *c, rp_dtype dt, void *p, size_t len) {
  cr_assert(c->n < TC_MAX);
  c->dt[c->n] = dt;
  c->len[c->n] = len;
  c->init[c->n] = p;
  c->scratch[c->n] = 0;
  c->want[c->n] = malloc(len * 4);
  memcpy(c->want[c->n], p, len * 4);
  c->n++;
}

/* Random f32 in [-1, 1) (seeded by the access index), or tokens in
 * [0, mod). */
static void tc_f32(tcase *c, size_t len) {
  tc_push(c, RP_F32, kr_random(len, 1000 + c->n, -1, 1), len);
}

static void tc_i32(tcase *c, size_t len, int mod) {
  tc_push(c, RP_I32, tokens_of(len, mod, 2000 + c->n), len);
}

/* The last access pushed is a scratch buffer. */
static void tc_scratch(tcase *c) {
  c->scratch[c->n - 1] = 1;
}

static float *F(tcase *c, uint32_t i) {
  return c->want[i];
}

/* Runs task `id` over c's initial contents on rt (instances in proc's
 * memory), then compares every access with c->want. */
static void tc_run(rp_runtime *rt, rp_task_id id, const void *args, size_t size,
                   tcase *c, const char *what) {
  rp_proc proc = th_backend_proc(rt);
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, proc, &pi));
  rp_inst inst[TC_MAX];
  rp_access acc[TC_MAX];
  for (uint32_t i = 0; i < c->n; i++) {
    rp_rect r = rp_rect_1d(0, (int64_t)c->len[i] - 1);
    RP_CHECK(rp_instance_create(rt, pi.local, c->dt[i], &r, NULL, &inst[i]));
    RP_CHECK(rp_instance_write(rt, inst[i], c->init[i], c->len[i] * 4));
    acc[i] = (rp_access){.inst = inst[i], .priv = RP_RW};
  }
  rp_launch l = {.task = id,
                 .proc = proc,
                 .accesses = acc,
                 .naccess = c->n,
                 .args = args,
                 .args_size = size};
  rp_event e;
  RP_CHECK(rp_launch_task(rt, &l, &e));
  RP_CHECK(rp_event_wait(rt, e, -1));
  RP_CHECK(rp_event_release(rt, e));
  for (uint32_t i = 0; i < c->n; i++) {
    float *got = kr_alloc(c->len[i]);
    RP_CHECK(rp_instance_read(rt, inst[i], got, c->len[i] * 4));
    if (TH_ON_CPU || c->dt[i] != RP_F32)
      cr_assert(memcmp(got, c->want[i], c->len[i] * 4) == 0,
                "%s: access %u differs from the kernel's", what, i);
    else if (!c->scratch[i])
      kr_close_f(got, c->want[i], c->len[i], 1e-4, 1.0, 0, what);
    free(got);
    RP_CHECK(rp_instance_free(rt, inst[i]));
    free(c->init[i]), free(c->want[i]);
  }
  c->n = 0;
}

Test(gpt_tasks_backends, every_gpt_task_equals_its_kernel) {
  rp_runtime *rt = th_runtime(TH_BACKEND, 1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  enum { B = 2, T = 5, C = 8, NH = 2, V = 11, N = B * T, OC = 12 };
  tcase c = {0};

  rp_gpt_embed_args ea = {B, T, C, V};
  tc_i32(&c, N, V), tc_f32(&c, V * C), tc_f32(&c, T * C), tc_f32(&c, N * C);
  RP_CHECK(rp_cpu_gpt_embed_fwd(c.want[0], F(&c, 1), F(&c, 2), F(&c, 3), B, T,
                                C, V));
  tc_run(rt, k.embed_fwd, &ea, sizeof ea, &c, "gpt.embed_fwd");
  tc_i32(&c, N, V), tc_f32(&c, N * C), tc_f32(&c, V * C), tc_f32(&c, T * C);
  RP_CHECK(rp_cpu_gpt_embed_bwd(c.want[0], F(&c, 1), F(&c, 2), F(&c, 3), B, T,
                                C, V));
  tc_run(rt, k.embed_bwd, &ea, sizeof ea, &c, "gpt.embed_bwd");
  rp_gpt_token_args ta = {.pos = 3, .token = 7, .C = C, .V = V, .T = T};
  tc_f32(&c, V * C), tc_f32(&c, T * C), tc_f32(&c, C);
  RP_CHECK(rp_cpu_gpt_embed_token(F(&c, 0), F(&c, 1), F(&c, 2), 3, 7, C, V, T));
  tc_run(rt, k.embed_token, &ta, sizeof ta, &c, "gpt.embed_token");

  rp_gpt_ln_args la = {N, C, 1e-5f};
  tc_f32(&c, N * C), tc_f32(&c, C), tc_f32(&c, C), tc_f32(&c, N * C);
  tc_f32(&c, N), tc_f32(&c, N);
  rp_cpu_gpt_layernorm_fwd(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3), F(&c, 4),
                           F(&c, 5), N, C, 1e-5f);
  tc_run(rt, k.layernorm_fwd, &la, sizeof la, &c, "gpt.layernorm_fwd");
  tc_f32(&c, N * C), tc_f32(&c, N * C), tc_f32(&c, N * C), tc_f32(&c, C);
  tc_f32(&c, C), tc_f32(&c, N * C), tc_f32(&c, N), tc_f32(&c, N);
  rp_cpu_gpt_residual_layernorm_fwd(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3),
                                    F(&c, 4), F(&c, 5), F(&c, 6), F(&c, 7), N,
                                    C, 1e-5f);
  tc_run(rt, k.residual_layernorm_fwd, &la, sizeof la, &c,
         "gpt.residual_layernorm_fwd");
  rp_gpt_ln_bwd_args lb = {N, C, 1};
  tc_f32(&c, N * C), tc_f32(&c, N * C), tc_f32(&c, C), tc_f32(&c, N);
  tc_f32(&c, N), tc_f32(&c, N * C), tc_f32(&c, C), tc_f32(&c, C);
  for (int r = 0; r < N; r++) /* a plausible rstd: positive */
    F(&c, 4)[r] = ((float *)c.init[4])[r] = 1.5f + F(&c, 4)[r];
  rp_cpu_gpt_layernorm_bwd(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3), F(&c, 4),
                           F(&c, 5), F(&c, 6), F(&c, 7), N, C, 1);
  tc_run(rt, k.layernorm_bwd, &lb, sizeof lb, &c, "gpt.layernorm_bwd");

  rp_gpt_matmul_args ma = {N, C, OC, 1, 1};
  tc_f32(&c, N * C), tc_f32(&c, OC * C), tc_f32(&c, N * OC), tc_f32(&c, OC);
  rp_cpu_gpt_matmul_fwd(F(&c, 0), F(&c, 1), F(&c, 3), F(&c, 2), N, C, OC);
  tc_run(rt, k.matmul_fwd, &ma, sizeof ma, &c, "gpt.matmul_fwd");
  tc_f32(&c, N * OC), tc_f32(&c, N * C), tc_f32(&c, OC * C), tc_f32(&c, N * C);
  tc_f32(&c, OC * C), tc_f32(&c, OC);
  rp_cpu_gpt_matmul_bwd(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3), F(&c, 4),
                        F(&c, 5), N, C, OC, 1);
  tc_run(rt, k.matmul_bwd, &ma, sizeof ma, &c, "gpt.matmul_bwd");

  rp_gpt_rows_cols_args ga = {N, OC};
  tc_f32(&c, N * OC), tc_f32(&c, OC), tc_f32(&c, N * OC);
  rp_cpu_gpt_bias_gelu_fwd(F(&c, 0), F(&c, 1), F(&c, 2), N, OC);
  tc_run(rt, k.bias_gelu_fwd, &ga, sizeof ga, &c, "gpt.bias_gelu_fwd");
  rp_gpt_n_args na = {N * OC};
  tc_f32(&c, N * OC), tc_f32(&c, N * OC), tc_f32(&c, N * OC);
  rp_cpu_gpt_gelu_bwd(F(&c, 0), F(&c, 1), F(&c, 2), N * OC);
  tc_run(rt, k.gelu_bwd, &na, sizeof na, &c, "gpt.gelu_bwd");

  rp_gpt_attn_args aa = {B, T, C, NH};
  tc_f32(&c, N * 3 * C), tc_f32(&c, 3 * N * C), tc_f32(&c, B * NH * T * T);
  tc_f32(&c, N * C), tc_f32(&c, N * C), tc_scratch(&c);
  rp_cpu_gpt_attention_fwd(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3), F(&c, 4), B,
                           T, C, NH);
  /* the forward's qkvr and att feed the backward */
  float *qkvr = dup_f(F(&c, 1), 3 * N * C),
        *att = dup_f(F(&c, 2), B * NH * T * T);
  tc_run(rt, k.attention_fwd, &aa, sizeof aa, &c, "gpt.attention_fwd");
  tc_f32(&c, N * C);
  tc_push(&c, RP_F32, qkvr, 3 * N * C);
  tc_push(&c, RP_F32, att, B * NH * T * T);
  tc_f32(&c, N * 3 * C), tc_f32(&c, B * NH * T * T), tc_scratch(&c);
  tc_f32(&c, 4 * N * C), tc_scratch(&c);
  rp_cpu_gpt_attention_bwd(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3), F(&c, 4),
                           F(&c, 5), B, T, C, NH);
  tc_run(rt, k.attention_bwd, &aa, sizeof aa, &c, "gpt.attention_bwd");
  rp_gpt_decode_args da = {.pos = 2, .T = T, .C = C, .NH = NH};
  tc_f32(&c, 3 * C), tc_f32(&c, T * C), tc_f32(&c, T * C), tc_f32(&c, C);
  tc_f32(&c, NH * T), tc_scratch(&c);
  RP_CHECK(rp_cpu_gpt_attention_decode(F(&c, 0), F(&c, 1), F(&c, 2), F(&c, 3),
                                       F(&c, 4), 2, T, C, NH));
  tc_run(rt, k.attention_decode, &da, sizeof da, &c, "gpt.attention_decode");

  rp_gpt_xent_args xa = {N, V, 0.0f, 1};
  tc_f32(&c, N * V), tc_i32(&c, N, V), tc_f32(&c, N), tc_f32(&c, 1);
  RP_CHECK(
      rp_cpu_gpt_xent(F(&c, 0), c.want[1], F(&c, 2), F(&c, 3), N, V, 0.0f, 1));
  tc_run(rt, k.xent, &xa, sizeof xa, &c, "gpt.xent");

  rp_gpt_adamw_args wa = kr_adamw_args(1e-2f, 3, 1.0f, 2);
  wa.decay[0] = 1;
  tc_f32(&c, 24), tc_f32(&c, 24), tc_f32(&c, 24), tc_f32(&c, 24);
  tc_f32(&c, 5), tc_f32(&c, 5), tc_f32(&c, 5), tc_f32(&c, 5), tc_f32(&c, 3);
  for (uint32_t i = 3; i < 8; i += 4) /* v >= 0 */
    for (size_t e = 0; e < c.len[i]; e++)
      F(&c, i)[e] = ((float *)c.init[i])[e] = fabsf(F(&c, i)[e]);
  float *w[2] = {F(&c, 0), F(&c, 4)}, *m[2] = {F(&c, 2), F(&c, 6)},
        *v[2] = {F(&c, 3), F(&c, 7)};
  const float *g[2] = {F(&c, 1), F(&c, 5)};
  size_t n[2] = {24, 5};
  rp_cpu_gpt_adamw(w, g, m, v, n, F(&c, 8), NULL, &wa);
  tc_run(rt, k.adamw, &wa, sizeof wa, &c, "gpt.adamw");

  /* one share of a sharded model: the norm from 3 shares' sums */
  wa.norm_parts = 3;
  tc_f32(&c, 24), tc_f32(&c, 24), tc_f32(&c, 24), tc_f32(&c, 24);
  tc_f32(&c, 5), tc_f32(&c, 5), tc_f32(&c, 5), tc_f32(&c, 5), tc_f32(&c, 3);
  tc_f32(&c, 3);
  for (uint32_t i = 3; i < 10; i += i == 7 ? 2 : 4) /* v, sums >= 0 */
    for (size_t e = 0; e < c.len[i]; e++)
      F(&c, i)[e] = ((float *)c.init[i])[e] = fabsf(F(&c, i)[e]);
  float *sw[2] = {F(&c, 0), F(&c, 4)}, *sm[2] = {F(&c, 2), F(&c, 6)},
        *sv[2] = {F(&c, 3), F(&c, 7)};
  const float *sg[2] = {F(&c, 1), F(&c, 5)};
  rp_cpu_gpt_adamw(sw, sg, sm, sv, n, F(&c, 8), F(&c, 9), &wa);
  tc_run(rt, k.adamw, &wa, sizeof wa, &c, "gpt.adamw (sharded)");

  rp_gpt_sumsq_args qa = {2};
  tc_f32(&c, 24), tc_f32(&c, 5), tc_f32(&c, 1), tc_f32(&c, 2);
  const float *qg[2] = {F(&c, 0), F(&c, 1)};
  rp_cpu_gpt_sumsq(qg, n, 2, F(&c, 2), F(&c, 3));
  tc_run(rt, k.sumsq, &qa, sizeof qa, &c, "gpt.sumsq");
  th_destroy(rt);
}

/* ---------------------------------------------------------------------- */
/* The tasks' checks, with hand-built contexts */

static rp_instance_info inst1d(void *p, rp_dtype dt, int64_t n) {
  rp_instance_info in;
  memset(&in, 0, sizeof in);
  in.dtype = dt;
  in.rect = rp_rect_1d(0, n - 1);
  in.strides[0] = 1;
  in.bytes = (size_t)n * rp_dtype_size(dt);
  in.ptr = p;
  return in;
}

static rp_task_ctx cpu_ctx(const void *args, size_t size,
                           const rp_instance_info *insts, uint32_t n) {
  rp_task_ctx c;
  memset(&c, 0, sizeof c);
  c.kind = RP_PROC_CPU;
  c.shards = 1;
  c.args = args;
  c.args_size = size;
  c.naccess = n;
  c.insts = insts;
  c.replay = UINT64_MAX;
  return c;
}

Test(gpt_tasks, bad_accesses_and_args_are_refused_before_writing) {
  enum { N = 4, C = 8, OC = 6 };
  float *inp = kr_random(N * C, 111, -1, 1), *W = kr_random(OC * C, 112, -1, 1);
  float *bias = kr_random(OC, 113, -1, 1), *out = kr_random(N * OC, 114, 5, 6);
  float *out0 = dup_f(out, N * OC);
  rp_instance_info in[4] = {
      inst1d(inp, RP_F32, N * C), inst1d(W, RP_F32, OC * C),
      inst1d(out, RP_F32, N * OC), inst1d(bias, RP_F32, OC)};
  rp_gpt_matmul_args a = {N, C, OC, 1, 0};
  rp_task_ctx ctx = cpu_ctx(&a, sizeof a, in, 4);
  ctx.naccess = 3; /* the bias is missing */
  RP_EXPECT(rp_task_gpt_matmul_fwd_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "gpt.matmul_fwd: access 3 (bias) "
                                      "missing"),
            "%s", rp_error_detail());
  ctx.naccess = 4;
  in[1].dtype = RP_I32;
  RP_EXPECT(rp_task_gpt_matmul_fwd_cpu(&ctx), RP_ETYPE);
  cr_assert(strstr(rp_error_detail(), "access 1 (W)"), "%s", rp_error_detail());
  in[1].dtype = RP_F32;
  in[2] = inst1d(out, RP_F32, N * OC - 1);
  RP_EXPECT(rp_task_gpt_matmul_fwd_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "has 23 elements, needs 24"), "%s",
            rp_error_detail());
  in[2] = inst1d(out, RP_F32, N * OC);
  a.has_bias = 2;
  RP_EXPECT(rp_task_gpt_matmul_fwd_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "has_bias = 2"), "%s", rp_error_detail());
  a.has_bias = 1;
  a.OC = 0;
  RP_EXPECT(rp_task_gpt_matmul_fwd_cpu(&ctx), RP_EINVAL);
  a.OC = OC;
  ctx.args_size = sizeof a - 4;
  RP_EXPECT(rp_task_gpt_matmul_fwd_cpu(&ctx), RP_EINVAL);
  ctx.args_size = sizeof a;
  bits_eq(out, out0, N * OC, "out after refused launches");
  /* the good launch, without bias: 3 accesses are enough */
  a.has_bias = 0;
  ctx.naccess = 3;
  RP_CHECK(rp_task_gpt_matmul_fwd_cpu(&ctx));
  float *ref = kr_alloc(N * OC);
  rp_cpu_gpt_matmul_fwd(inp, W, NULL, ref, N, C, OC);
  bits_eq(out, ref, N * OC, "task out");

  /* attention: C not a multiple of NH */
  rp_gpt_attn_args aa = {1, 2, 6, 4};
  ctx = cpu_ctx(&aa, sizeof aa, in, 4);
  RP_EXPECT(rp_task_gpt_attention_fwd_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "multiple of NH"), "%s",
            rp_error_detail());
  /* sizes whose product overflows int64 (3 B T C = 3 * 2^93) */
  aa = (rp_gpt_attn_args){INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
  RP_EXPECT(rp_task_gpt_attention_fwd_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "overflow"), "%s", rp_error_detail());

  /* embed_token and attention_decode: the check_fns refuse pos and token
   * out of range (RP_ERANGE) on metadata, as the CPU bodies do */
  float wte[5 * 2], wpe[3 * 2], o[2] = {7, 7};
  for (int i = 0; i < 10; i++)
    wte[i] = 1.0f + (float)i; /* distinct: the row read is checked */
  for (int i = 0; i < 6; i++)
    wpe[i] = 0.25f * (float)(i + 1);
  rp_instance_info ti[3] = {inst1d(wte, RP_F32, 10), inst1d(wpe, RP_F32, 6),
                            inst1d(o, RP_F32, 2)};
  rp_gpt_token_args ta = {.pos = 3, .token = 1, .C = 2, .V = 5, .T = 3};
  ctx = cpu_ctx(&ta, sizeof ta, ti, 3);
  RP_EXPECT(rp_task_gpt_embed_token_check(&ctx), RP_ERANGE);
  RP_EXPECT(rp_task_gpt_embed_token_cpu(&ctx), RP_ERANGE);
  ta.pos = 2, ta.token = 5;
  RP_EXPECT(rp_task_gpt_embed_token_check(&ctx), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "token 5"), "%s", rp_error_detail());
  cr_assert(o[0] == 7 && o[1] == 7, "out written");
  ta.token = 4;
  RP_CHECK(rp_task_gpt_embed_token_check(&ctx));
  RP_CHECK(rp_task_gpt_embed_token_cpu(&ctx));
  for (int c = 0; c < 2; c++) /* token 4's row plus position 2's */
    cr_assert_eq(o[c], wte[4 * 2 + c] + wpe[2 * 2 + c], "o[%d] = %g", c,
                 (double)o[c]);

  float q[3 * 4] = {0}, kc[2 * 3 * 2] = {0}, vc[2 * 3 * 2] = {0}, dout[4],
              sc[2 * 3];
  rp_instance_info di[5] = {inst1d(q, RP_F32, 12), inst1d(kc, RP_F32, 12),
                            inst1d(vc, RP_F32, 12), inst1d(dout, RP_F32, 4),
                            inst1d(sc, RP_F32, 6)};
  rp_gpt_decode_args da = {.pos = 3, .T = 3, .C = 4, .NH = 2};
  ctx = cpu_ctx(&da, sizeof da, di, 5);
  RP_EXPECT(rp_task_gpt_attention_decode_check(&ctx), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "pos 3"), "%s", rp_error_detail());
  di[4] = inst1d(sc, RP_F32, 5); /* scores need NH * T */
  da.pos = 0;
  RP_EXPECT(rp_task_gpt_attention_decode_check(&ctx), RP_ESHAPE);
  di[4] = inst1d(sc, RP_F32, 6);
  RP_CHECK(rp_task_gpt_attention_decode_cpu(&ctx));

  /* adamw and sumsq below read and write inp and out: refused, they
   * leave them as they were */
  float *inp0 = dup_f(inp, N * C), *outs = dup_f(out, N * OC);
  /* adamw: fewer accesses than 4 * count + 1 */
  rp_gpt_adamw_args wa = {.lr = 0.1f,
                          .step = 1,
                          .beta1 = 0.9f,
                          .beta2 = 0.99f,
                          .eps = 1e-8f,
                          .count = 2};
  rp_instance_info wi[8];
  for (int i = 0; i < 8; i++)
    wi[i] = inst1d(inp, RP_F32, 4);
  ctx = cpu_ctx(&wa, sizeof wa, wi, 8);
  RP_EXPECT(rp_task_gpt_adamw_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "8 accesses for 2 tensors (need 9)"),
            "%s", rp_error_detail());
  /* sharded: the sums' access after stats, of norm_parts elements */
  wa.norm_parts = 2;
  rp_instance_info wj[10];
  for (int i = 0; i < 10; i++)
    wj[i] = inst1d(inp, RP_F32, 4);
  ctx = cpu_ctx(&wa, sizeof wa, wj, 9);
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "9 accesses for 2 tensors (need 10)"),
            "%s", rp_error_detail());
  ctx = cpu_ctx(&wa, sizeof wa, wj, 10);
  wj[9] = inst1d(inp, RP_F32, 1);
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 9 (sq) has 1 elements, needs 2"),
            "%s", rp_error_detail());
  wa.norm_parts = RP_GPT_NORM_PARTS_MAX + 1;
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_EINVAL);
  wa.norm_parts = 0;
  ctx = cpu_ctx(&wa, sizeof wa, wi, 8);
  /* sumsq: its per-tensor sums need count elements */
  rp_gpt_sumsq_args qa = {2};
  rp_instance_info qi[4] = {inst1d(inp, RP_F32, 4), inst1d(inp, RP_F32, 4),
                            inst1d(out, RP_F32, 1), inst1d(out0, RP_F32, 1)};
  rp_task_ctx qc = cpu_ctx(&qa, sizeof qa, qi, 4);
  RP_EXPECT(rp_task_gpt_sumsq_cpu(&qc), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 3 (each) has 1 elements"), "%s",
            rp_error_detail());
  wa.beta1 = 1.0f;
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_EINVAL);
  wa.beta1 = 0.9f; /* a negative lr (a replay's argument) would ascend */
  wa.lr = -1.0f;
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "lr = -1"), "%s", rp_error_detail());
  bits_eq(inp, inp0, N * C, "inp after refused adamw and sumsq");
  bits_eq(out, outs, N * OC, "out after refused adamw and sumsq");
  free(inp0), free(outs);
  free(inp), free(W), free(bias), free(out), free(out0), free(ref);
}

/* gpt.layernorm_fwd (and the residual one, the same check) refuses an eps
 * that is not positive and finite, gpt.xent a norm that is negative or not
 * finite: RP_EINVAL naming the task and the value, nothing written. */
Test(gpt_tasks, layernorm_eps_and_xent_norm_out_of_range_are_refused) {
  enum { N = 2, C = 4, V = 3 };
  float x[N * C], w[C], b[C], out[N * C], mean[N], rstd[N];
  for (int i = 0; i < N * C; i++)
    x[i] = (float)i, out[i] = 7;
  for (int i = 0; i < C; i++)
    w[i] = 1, b[i] = 0;
  for (int i = 0; i < N; i++)
    mean[i] = rstd[i] = 7;
  rp_instance_info li[6] = {
      inst1d(x, RP_F32, N * C), inst1d(w, RP_F32, C),
      inst1d(b, RP_F32, C),     inst1d(out, RP_F32, N * C),
      inst1d(mean, RP_F32, N),  inst1d(rstd, RP_F32, N)};
  static const float bad_eps[] = {0.0f, -1e-5f, NAN, INFINITY};
  static const char *const said[] = {"eps = 0 (need > 0)", "eps = -1e-05",
                                     "eps = nan", "eps = inf"};
  for (int i = 0; i < 4; i++) {
    rp_gpt_ln_args la = {N, C, bad_eps[i]};
    rp_task_ctx ctx = cpu_ctx(&la, sizeof la, li, 6);
    RP_EXPECT(rp_task_gpt_layernorm_fwd_cpu(&ctx), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "gpt.layernorm_fwd: ") &&
                  strstr(rp_error_detail(), said[i]),
              "%s", rp_error_detail());
  }
  for (int i = 0; i < N * C; i++)
    cr_assert_eq(out[i], 7.0f, "out written by a refused launch");
  cr_assert(mean[0] == 7 && rstd[N - 1] == 7, "stats written");
  rp_gpt_ln_args la = {N, C, 1e-5f};
  rp_task_ctx ctx = cpu_ctx(&la, sizeof la, li, 6);
  RP_CHECK(rp_task_gpt_layernorm_fwd_cpu(&ctx));
  cr_assert_neq(out[0], 7.0f);

  float logits[N * V] = {1, 2, 3, 3, 2, 1}, losses[N] = {7, 7}, loss = 7;
  int32_t tg[N] = {0, 2};
  rp_instance_info xi[4] = {inst1d(logits, RP_F32, N * V),
                            inst1d(tg, RP_I32, N), inst1d(losses, RP_F32, N),
                            inst1d(&loss, RP_F32, 1)};
  static const float bad_norm[] = {-1.0f, NAN, INFINITY};
  static const char *const nsaid[] = {"norm = -1 (the global row count, 0: N)",
                                      "norm = nan", "norm = inf"};
  for (int i = 0; i < 3; i++) {
    rp_gpt_xent_args xa = {N, V, bad_norm[i], 0};
    ctx = cpu_ctx(&xa, sizeof xa, xi, 4);
    RP_EXPECT(rp_task_gpt_xent_cpu(&ctx), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "gpt.xent: ") &&
                  strstr(rp_error_detail(), nsaid[i]),
              "%s", rp_error_detail());
  }
  cr_assert(losses[0] == 7 && losses[1] == 7 && loss == 7,
            "losses written by a refused launch");
  rp_gpt_xent_args xa = {N, V, 0.0f, 0};
  ctx = cpu_ctx(&xa, sizeof xa, xi, 4);
  RP_CHECK(rp_task_gpt_xent_cpu(&ctx));
  cr_assert_neq(loss, 7.0f);
}

/* gpt.adamw's decay step multiplies the decayed tensors by 1 - lr x
 * weight_decay, computed in float: a pair whose exact product is below 1
 * but rounds to 1 in float would zero them, and is refused as 1 is (by the
 * task and by its check_fn, before anything is written). */
Test(gpt_tasks, adamw_refuses_a_decay_step_that_zeroes_or_grows_weights) {
  const float lr = 0.435312152f, wd = 2.29720211f;
  cr_assert((double)lr * wd < 1.0 && lr * wd >= 1.0f, "the pair: %.17g, %.9g",
            (double)lr * wd, (double)(lr * wd));
  float w[4] = {1, -2, 3, -4}, g[4] = {0.5f, 0.5f, -0.5f, 0.25f}, m[4] = {0},
        v[4] = {0}, stats[2] = {7, 7};
  float w0[4];
  memcpy(w0, w, sizeof w);
  rp_instance_info in[5] = {inst1d(w, RP_F32, 4), inst1d(g, RP_F32, 4),
                            inst1d(m, RP_F32, 4), inst1d(v, RP_F32, 4),
                            inst1d(stats, RP_F32, 2)};
  rp_gpt_adamw_args a = {.lr = lr,
                         .step = 1,
                         .beta1 = 0.9f,
                         .beta2 = 0.95f,
                         .eps = 1e-8f,
                         .weight_decay = wd,
                         .count = 1};
  a.decay[0] = 1;
  rp_task_ctx ctx = cpu_ctx(&a, sizeof a, in, 5);
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_EINVAL);
  RP_EXPECT(rp_task_gpt_adamw_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "gpt.adamw: lr ") &&
                strstr(rp_error_detail(), "x weight_decay"),
            "%s", rp_error_detail());
  bits_eq(w, w0, 4, "W after the refused step");
  cr_assert(m[0] == 0 && v[0] == 0 && stats[0] == 7, "state written");
  /* a negative weight decay would grow the decayed tensors every step
   * (torch.optim.AdamW refuses it too) */
  a.lr = 1e-3f, a.weight_decay = -0.5f;
  RP_EXPECT(rp_task_gpt_adamw_check(&ctx), RP_EINVAL);
  RP_EXPECT(rp_task_gpt_adamw_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "weight_decay = -0.5") &&
                strstr(rp_error_detail(), "weight_decay >= 0"),
            "%s", rp_error_detail());
  bits_eq(w, w0, 4, "W after the refused step");
  cr_assert(m[0] == 0 && v[0] == 0 && stats[0] == 7, "state written");
  /* not decayed: the product does not matter */
  a.lr = lr, a.weight_decay = wd;
  a.decay[0] = 0;
  RP_CHECK(rp_task_gpt_adamw_cpu(&ctx));
}

/* Every access of every gpt.* task, one at a time: shortened by one
 * element (RP_ESHAPE naming the access, its role and both counts), of the
 * other element type (RP_ETYPE), strided (RP_ESHAPE, not dense), or left
 * out with those after it (RP_ESHAPE, missing); each refusal leaves every
 * buffer as it was. A group's first access (adamw's W, sumsq's G) sets the
 * group's size, so shortening it is no error: skipped there. */
enum { MS_MAX = 10 };
typedef struct ms_case {
  const char *name;
  rp_status (*fn)(rp_task_ctx *);
  const void *args;
  size_t size;
  uint32_t n;
  rp_dtype dt[MS_MAX];
  int64_t need[MS_MAX];
  const char *role[MS_MAX];
  int sets_size[MS_MAX]; /* 1: shortening it is allowed */
} ms_case;

/* mc's task on ctx returns want, with want_detail in its message. */
static void ms_expect(const ms_case *mc, rp_task_ctx *ctx, rp_status want,
                      const char *what, uint32_t i, const char *want_detail) {
  rp_status st = mc->fn(ctx);
  cr_assert(st == want, "%s: access %u %s: %s, expected %s (%s)", mc->name, i,
            what, rp_status_name(st), rp_status_name(want), rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want_detail),
            "%s: access %u %s: want '%s', got '%s'", mc->name, i, what,
            want_detail, rp_error_detail());
}

static void ms_check(const ms_case *mc) {
  void *buf[MS_MAX], *snap[MS_MAX];
  rp_instance_info in[MS_MAX];
  for (uint32_t i = 0; i < mc->n; i++) {
    size_t bytes = (size_t)mc->need[i] * 2 * 4; /* room for stride 2 */
    buf[i] = kr_random((size_t)mc->need[i] * 2, 500 + i, 0.5f, 1.5f);
    if (mc->dt[i] == RP_I32)
      memset(buf[i], 0, bytes); /* token, target 0: in range */
    snap[i] = malloc(bytes);
    cr_assert(snap[i]);
    memcpy(snap[i], buf[i], bytes);
    in[i] = inst1d(buf[i], mc->dt[i], mc->need[i]);
  }
  rp_task_ctx ctx = cpu_ctx(mc->args, mc->size, in, mc->n);
  char want[160];
  for (uint32_t i = 0; i < mc->n; i++) {
    rp_instance_info keep = in[i];
    if (!mc->sets_size[i] && mc->need[i] > 1) { /* one element short */
      in[i] = inst1d(buf[i], mc->dt[i], mc->need[i] - 1);
      snprintf(want, sizeof want,
               "%s: access %u (%s) has %lld elements, needs %lld", mc->name, i,
               mc->role[i], (long long)mc->need[i] - 1, (long long)mc->need[i]);
      ms_expect(mc, &ctx, RP_ESHAPE, "short", i, want);
    }
    in[i] = keep; /* the other type */
    in[i].dtype = mc->dt[i] == RP_F32 ? RP_I32 : RP_F32;
    snprintf(want, sizeof want, "%s: access %u (%s) is %s, needs %s", mc->name,
             i, mc->role[i], rp_dtype_name(in[i].dtype),
             rp_dtype_name(mc->dt[i]));
    ms_expect(mc, &ctx, RP_ETYPE, "of the other type", i, want);
    in[i] = keep;
    if (mc->need[i] > 1) { /* strided */
      in[i].strides[0] = 2;
      snprintf(want, sizeof want, "%s: access %u (%s) is not dense row-major",
               mc->name, i, mc->role[i]);
      ms_expect(mc, &ctx, RP_ESHAPE, "strided", i, want);
      in[i] = keep;
    }
    ctx.naccess = i; /* left out, with the accesses after it */
    ms_expect(mc, &ctx, RP_ESHAPE, "left out", i, mc->name);
    ctx.naccess = mc->n;
    for (uint32_t j = 0; j < mc->n; j++)
      cr_assert(memcmp(buf[j], snap[j], (size_t)mc->need[j] * 2 * 4) == 0,
                "%s: a refusal about access %u wrote access %u", mc->name, i,
                j);
  }
  RP_CHECK(mc->fn(&ctx)); /* and the whole launch is good */
  for (uint32_t i = 0; i < mc->n; i++)
    free(buf[i]), free(snap[i]);
}

Test(gpt_tasks, every_access_mis_shaped_is_refused_by_name) {
  enum { B = 2, T = 3, C = 4, NH = 2, V = 5, N = B * T, OC = 6 };
  const rp_dtype F = RP_F32, I = RP_I32;
  rp_gpt_embed_args ea = {B, T, C, V};
  rp_gpt_token_args ta = {.pos = 1, .token = 2, .C = C, .V = V, .T = T};
  rp_gpt_ln_args la = {N, C, 1e-5f};
  rp_gpt_ln_bwd_args lb = {N, C, 0};
  rp_gpt_matmul_args ma = {N, C, OC, 1, 0};
  rp_gpt_rows_cols_args ga = {N, OC};
  rp_gpt_n_args na = {N * OC};
  rp_gpt_attn_args aa = {B, T, C, NH};
  rp_gpt_decode_args da = {.pos = 1, .T = T, .C = C, .NH = NH};
  rp_gpt_xent_args xa = {N, V, 0.0f, 1};
  rp_gpt_adamw_args wa = kr_adamw_args(1e-3f, 1, 1.0f, 2);
  rp_gpt_sumsq_args qa = {2};
  const ms_case cases[] = {
      {"gpt.embed_fwd",
       rp_task_gpt_embed_fwd_cpu,
       &ea,
       sizeof ea,
       4,
       {I, F, F, F},
       {N, V * C, T * C, N * C},
       {"tokens", "wte", "wpe", "out"},
       {0}},
      {"gpt.embed_bwd",
       rp_task_gpt_embed_bwd_cpu,
       &ea,
       sizeof ea,
       4,
       {I, F, F, F},
       {N, N * C, V * C, T * C},
       {"tokens", "dout", "dwte", "dwpe"},
       {0}},
      {"gpt.embed_token",
       rp_task_gpt_embed_token_cpu,
       &ta,
       sizeof ta,
       3,
       {F, F, F},
       {V * C, T * C, C},
       {"wte", "wpe", "out"},
       {0}},
      {"gpt.layernorm_fwd",
       rp_task_gpt_layernorm_fwd_cpu,
       &la,
       sizeof la,
       6,
       {F, F, F, F, F, F},
       {N * C, C, C, N * C, N, N},
       {"x", "w", "b", "out", "mean", "rstd"},
       {0}},
      {"gpt.residual_layernorm_fwd",
       rp_task_gpt_residual_layernorm_fwd_cpu,
       &la,
       sizeof la,
       8,
       {F, F, F, F, F, F, F, F},
       {N * C, N * C, N * C, C, C, N * C, N, N},
       {"a", "r", "res", "w", "b", "out", "mean", "rstd"},
       {0}},
      {"gpt.layernorm_bwd",
       rp_task_gpt_layernorm_bwd_cpu,
       &lb,
       sizeof lb,
       8,
       {F, F, F, F, F, F, F, F},
       {N * C, N * C, C, N, N, N * C, C, C},
       {"dout", "x", "w", "mean", "rstd", "dx", "dw", "db"},
       {0}},
      {"gpt.matmul_fwd",
       rp_task_gpt_matmul_fwd_cpu,
       &ma,
       sizeof ma,
       4,
       {F, F, F, F},
       {N * C, OC * C, N * OC, OC},
       {"inp", "W", "out", "bias"},
       {0}},
      {"gpt.matmul_bwd",
       rp_task_gpt_matmul_bwd_cpu,
       &ma,
       sizeof ma,
       6,
       {F, F, F, F, F, F},
       {N * OC, N * C, OC * C, N * C, OC * C, OC},
       {"dout", "inp", "W", "dinp", "dW", "dbias"},
       {0}},
      {"gpt.bias_gelu_fwd",
       rp_task_gpt_bias_gelu_fwd_cpu,
       &ga,
       sizeof ga,
       3,
       {F, F, F},
       {N * OC, OC, N * OC},
       {"pre", "bias", "out"},
       {0}},
      {"gpt.gelu_bwd",
       rp_task_gpt_gelu_bwd_cpu,
       &na,
       sizeof na,
       3,
       {F, F, F},
       {N * OC, N * OC, N * OC},
       {"pre", "dout", "dpre"},
       {0}},
      {"gpt.attention_fwd",
       rp_task_gpt_attention_fwd_cpu,
       &aa,
       sizeof aa,
       5,
       {F, F, F, F, F},
       {3 * N * C, 3 * N * C, B * NH * T * T, N * C, N * C},
       {"qkv", "qkvr", "att", "out", "scratch"},
       {0}},
      {"gpt.attention_bwd",
       rp_task_gpt_attention_bwd_cpu,
       &aa,
       sizeof aa,
       6,
       {F, F, F, F, F, F},
       {N * C, 3 * N * C, B * NH * T * T, 3 * N * C, B * NH * T * T, 4 * N * C},
       {"dout", "qkvr", "att", "dqkv", "datt", "scratch"},
       {0}},
      {"gpt.attention_decode",
       rp_task_gpt_attention_decode_cpu,
       &da,
       sizeof da,
       5,
       {F, F, F, F, F},
       {3 * C, T * C, T * C, C, NH * T},
       {"qkv", "kcache", "vcache", "out", "scratch"},
       {0}},
      {"gpt.xent",
       rp_task_gpt_xent_cpu,
       &xa,
       sizeof xa,
       4,
       {F, I, F, F},
       {N * V, N, N, 1},
       {"logits", "targets", "losses", "loss"},
       {0}},
      {"gpt.adamw",
       rp_task_gpt_adamw_cpu,
       &wa,
       sizeof wa,
       9,
       {F, F, F, F, F, F, F, F, F},
       {7, 7, 7, 7, 3, 3, 3, 3, 3},
       {"W", "G", "M", "V", "W", "G", "M", "V", "stats"},
       {1, 0, 0, 0, 1, 0, 0, 0, 0}},
      {"gpt.sumsq",
       rp_task_gpt_sumsq_cpu,
       &qa,
       sizeof qa,
       4,
       {F, F, F, F},
       {7, 3, 1, 2},
       {"G", "G", "sq", "each"},
       {1, 1, 0, 0}},
  };
  for (size_t i = 0; i < KR_LEN(cases); i++)
    ms_check(&cases[i]);
}

/* Accesses that share memory with one the task writes: refused
 * (RP_EINVAL naming both) before anything is written, whole or in part,
 * within a tensor group or across groups; two reads may share, and
 * gelu_bwd's dpre may be dout (the same first element). Without the check
 * each of these ran and overwrote an input: BLAS writing the product over
 * its own operand, AdamW's m and v one buffer. */
static void refused_overlap(rp_status (*fn)(rp_task_ctx *), rp_task_ctx *ctx,
                            const char *want, float *buf, size_t n) {
  float *snap = dup_f(buf, n);
  rp_status st = fn(ctx);
  cr_assert(st == RP_EINVAL, "%s: %s (%s)", want, rp_status_name(st),
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "want '%s', got '%s'", want,
            rp_error_detail());
  bits_eq(buf, snap, n, want);
  free(snap);
}

Test(gpt_tasks, accesses_overlapping_a_written_one_are_refused) {
  enum { N = 4, C = 6 };
  float *buf = kr_random(64 * C, 130, -1, 1), *W = kr_random(C * C, 131, -1, 1);
  /* matmul_fwd in place: out on inp (C == OC) */
  rp_gpt_matmul_args ma = {N, C, C, 0, 0};
  rp_instance_info mi[3] = {inst1d(buf, RP_F32, N * C),
                            inst1d(W, RP_F32, C * C),
                            inst1d(buf, RP_F32, N * C)};
  rp_task_ctx ctx = cpu_ctx(&ma, sizeof ma, mi, 3);
  refused_overlap(rp_task_gpt_matmul_fwd_cpu, &ctx,
                  "gpt.matmul_fwd: access 0 (inp) and access 2 (out) overlap",
                  buf, 64 * C);
  /* out from inp's last row on: one row shared */
  mi[2] = inst1d(buf + (N - 1) * C, RP_F32, N * C);
  refused_overlap(rp_task_gpt_matmul_fwd_cpu, &ctx,
                  "access 0 (inp) and access 2 (out) overlap", buf, 64 * C);
  /* W read twice (inp is W's first rows): allowed */
  mi[0] = inst1d(W, RP_F32, N * C), mi[2] = inst1d(buf, RP_F32, N * C);
  RP_CHECK(rp_task_gpt_matmul_fwd_cpu(&ctx));

  /* layernorm_fwd: rstd one element into mean */
  rp_gpt_ln_args la = {N, C, 1e-5f};
  float *x = kr_random(N * C, 132, -1, 1), *wb = kr_random(2 * C, 133, 0, 1);
  rp_instance_info li[6] = {
      inst1d(x, RP_F32, N * C),       inst1d(wb, RP_F32, C),
      inst1d(wb + C, RP_F32, C),      inst1d(buf, RP_F32, N * C),
      inst1d(buf + N * C, RP_F32, N), inst1d(buf + N * C + 1, RP_F32, N)};
  ctx = cpu_ctx(&la, sizeof la, li, 6);
  refused_overlap(rp_task_gpt_layernorm_fwd_cpu, &ctx,
                  "gpt.layernorm_fwd: access 4 (mean) and access 5 (rstd) "
                  "overlap",
                  buf, 64 * C);
  li[5] = inst1d(buf + N * C + N, RP_F32, N);
  RP_CHECK(rp_task_gpt_layernorm_fwd_cpu(&ctx));

  /* gelu_bwd: dpre on dout is its contract; on pre, or one element into
   * dout, it is not */
  rp_gpt_n_args na = {N * C};
  float *dy = kr_random(N * C + 1, 134, -1, 1);
  rp_instance_info gi[3] = {inst1d(x, RP_F32, N * C), inst1d(dy, RP_F32, N * C),
                            inst1d(dy, RP_F32, N * C)};
  ctx = cpu_ctx(&na, sizeof na, gi, 3);
  float *want = kr_alloc(N * C);
  rp_cpu_gpt_gelu_bwd(x, dy, want, N * C);
  RP_CHECK(rp_task_gpt_gelu_bwd_cpu(&ctx));
  bits_eq(dy, want, N * C, "gelu_bwd in place");
  gi[2] = inst1d(x, RP_F32, N * C);
  refused_overlap(rp_task_gpt_gelu_bwd_cpu, &ctx,
                  "gpt.gelu_bwd: access 0 (pre) and access 2 (dpre) overlap", x,
                  N * C);
  gi[2] = inst1d(dy + 1, RP_F32, N * C);
  refused_overlap(rp_task_gpt_gelu_bwd_cpu, &ctx,
                  "access 1 (dout) and access 2 (dpre) overlap", dy, N * C + 1);
  /* bias_gelu_fwd: out on pre */
  rp_gpt_rows_cols_args ga = {N, C};
  rp_instance_info bi[3] = {inst1d(buf, RP_F32, N * C), inst1d(wb, RP_F32, C),
                            inst1d(buf, RP_F32, N * C)};
  ctx = cpu_ctx(&ga, sizeof ga, bi, 3);
  refused_overlap(rp_task_gpt_bias_gelu_fwd_cpu, &ctx,
                  "gpt.bias_gelu_fwd: access 0 (pre) and access 2 (out) "
                  "overlap",
                  buf, 64 * C);

  /* adamw over 2 tensors of 8: M_1 on V_1; then W_1 over the end of W_0
   * (across groups); then the stats on G_0 */
  rp_gpt_adamw_args wa = kr_adamw_args(1e-3f, 1, 1.0f, 2);
  rp_instance_info ai[9];
  for (int i = 0; i < 9; i++)
    ai[i] = inst1d(buf + 8 * i, RP_F32, 8);
  ai[8] = inst1d(buf + 8 * 8, RP_F32, 3);
  ai[7] = ai[6]; /* V_1 = M_1 */
  ctx = cpu_ctx(&wa, sizeof wa, ai, 9);
  refused_overlap(rp_task_gpt_adamw_cpu, &ctx,
                  "gpt.adamw: access 6 (M) and access 7 (V) overlap", buf,
                  64 * C);
  ai[7] = inst1d(buf + 8 * 7, RP_F32, 8);
  ai[4] = inst1d(buf + 4, RP_F32, 8);
  refused_overlap(rp_task_gpt_adamw_cpu, &ctx,
                  "gpt.adamw: access 0 (W) and access 4 (W) overlap", buf,
                  64 * C);
  ai[4] = inst1d(buf + 8 * 4, RP_F32, 8);
  ai[8] = inst1d(buf + 8 * 1 + 5, RP_F32, 3);
  refused_overlap(rp_task_gpt_adamw_cpu, &ctx,
                  "gpt.adamw: access 1 (G) and access 8 (stats) overlap", buf,
                  64 * C);
  ai[8] = inst1d(buf + 8 * 8, RP_F32, 3);
  RP_CHECK(rp_task_gpt_adamw_cpu(&ctx));
  free(buf), free(W), free(x), free(wb), free(dy), free(want);
}

Test(gpt_tasks, register_names_the_gpt_tasks) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  static const char *names[] = {"gpt.embed_fwd",
                                "gpt.embed_bwd",
                                "gpt.embed_token",
                                "gpt.layernorm_fwd",
                                "gpt.residual_layernorm_fwd",
                                "gpt.layernorm_bwd",
                                "gpt.matmul_fwd",
                                "gpt.matmul_bwd",
                                "gpt.bias_gelu_fwd",
                                "gpt.gelu_bwd",
                                "gpt.attention_fwd",
                                "gpt.attention_bwd",
                                "gpt.attention_decode",
                                "gpt.xent",
                                "gpt.adamw",
                                "gpt.sumsq"};
  rp_task_id ids[] = {k.embed_fwd,
                      k.embed_bwd,
                      k.embed_token,
                      k.layernorm_fwd,
                      k.residual_layernorm_fwd,
                      k.layernorm_bwd,
                      k.matmul_fwd,
                      k.matmul_bwd,
                      k.bias_gelu_fwd,
                      k.gelu_bwd,
                      k.attention_fwd,
                      k.attention_bwd,
                      k.attention_decode,
                      k.xent,
                      k.adamw,
                      k.sumsq};
  for (size_t i = 0; i < KR_LEN(names); i++) {
    rp_task_id id;
    RP_CHECK(rp_task_find(rt, names[i], &id));
    cr_assert(id == ids[i], "%s", names[i]);
  }
  th_destroy(rt);
}
