/* test/test_gpt_kernels_gpu.c (label gpu) — every CUDA launcher of
 * kernels/gpt_kernels.h (rp_cuda_gpt_*) against the CPU kernel of the same
 * name (rp_cpu_gpt_*, the reference backend), on small and odd shapes and
 * on shapes that reach each kernel's other paths (lane and chunk loops,
 * xent's block sizes, embed_bwd's list flush, adamw's tensor chunks).
 * Skips with the reason when the build has no CUDA or no device answers.
 *
 * Bounds: |gpu - cpu| <= rel * max(|cpu|, floor), with
 *  - elementwise kernels (embed_fwd, embed_token, embed_bwd, whose sums run
 *    in the same (b, t) order on both backends, the qkv permutation, the KV
 *    cache writes, the AdamW update): rel 1e-5, floor the largest |cpu|
 *    entry of the output (values that cancel are judged at the data's size);
 *    embed_fwd and embed_bwd are also bitwise equal to the CPU (the same f32
 *    adds in the same order);
 *  - GELU forward and backward: rel 1e-5, floor 1 (device expf differs
 *    from glibc's by a few ulp; the floor judges values near 0 at the
 *    scale of 1);
 *  - reductions, softmax and GEMMs (layernorm, matmul, attention, decode,
 *    xent, adamw's norms): rel 1e-4, floor the largest |cpu| entry (other
 *    summation orders, cuBLAS's blocking, device expf).
 * Determinism: every launcher runs twice on the same inputs (read-write
 * buffers restored in between) and must give bitwise equal outputs. The
 * launchers that take dev_args are also run inside a CUDA graph (global
 * capture mode: an allocation or synchronization would fail the capture)
 * with per-replay values in device memory that differ from the by-value
 * arguments. */
#include "helpers.h"

#ifdef REPRISE_HAVE_CUDA

#include "kernels_ref.h"

#include "kernels/cuda_kernels.cuh"
#include "kernels/gpt_kernels.h"

#include <math.h>
#include <string.h>

#define REL_ELEM 1e-5
#define REL_RED 1e-4

static void need_gpu(void) {
  const char *why = NULL;
  if (!th_cuda_available(&why))
    th_gpu_skip("%s", why);
}

static void *dput(const void *host, size_t bytes) {
  void *d = NULL;
  RP_CHECK(rp_cuda_buf_alloc(&d, bytes));
  if (host)
    RP_CHECK(rp_cuda_buf_put(d, host, bytes));
  return d;
}

/* Synchronizes the stream, then copies a device buffer back. */
static void dget(void *host, const void *dev, size_t bytes, void *stream) {
  RP_CHECK(rp_cuda_stream_sync(stream));
  RP_CHECK(rp_cuda_buf_get(host, dev, bytes));
}

/* A fresh host copy of a device buffer. */
static float *dgetf(const void *dev, size_t n, void *stream) {
  float *h = kr_alloc(n);
  dget(h, dev, n * sizeof(float), stream);
  return h;
}

static void *new_stream(void) {
  void *s = NULL;
  RP_CHECK(rp_cuda_stream_create(&s));
  return s;
}

static float *fdup(const float *x, size_t n) {
  float *p = kr_alloc(n);
  memcpy(p, x, n * sizeof *p);
  return p;
}

static double max_abs(const float *x, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++)
    m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

/* got vs want within rel of max(|want|, largest |want|). */
static void close_max(const float *got, const float *want, size_t n, double rel,
                      const char *what) {
  kr_close_f(got, want, n, rel, max_abs(want, n), 0, what);
}

/* Each element within rel of its own magnitude, or of floor x the largest
 * |want| where it is smaller: for values that do not cancel (sums of
 * squares, probabilities), where close_max would let a small one be far
 * off. */
static void close_each(const float *got, const float *want, size_t n,
                       double rel, double floor, const char *what) {
  kr_close_f(got, want, n, rel, floor * max_abs(want, n), 0, what);
}

/* Bitwise equality of two runs. */
static void same_bits(const float *a, const float *b, size_t n,
                      const char *what) {
  for (size_t i = 0; i < n; i++)
    cr_assert(memcmp(&a[i], &b[i], sizeof(float)) == 0,
              "%s: run 2 differs at %zu (%.9g vs %.9g)", what, i, b[i], a[i]);
}

static int32_t *tokens_random(size_t n, int V, uint32_t seed) {
  return kr_labels(n, (size_t)V, seed);
}

/* ---------------------------------------------------------------------- */
/* Embeddings */

Test(gpt_kernels_gpu, embed_fwd_matches_cpu_and_marks_bad_tokens) {
  need_gpu();
  void *s = new_stream();
  const int B = 3, T = 7, C = 37, V = 11;
  size_t n = (size_t)B * T * C;
  int32_t *tok = tokens_random((size_t)B * T, V, 1);
  float *wte = kr_random((size_t)V * C, 2, -1, 1);
  float *wpe = kr_random((size_t)(T + 2) * C, 3, -1, 1); /* >= T*C */
  float *want = kr_alloc(n);
  RP_CHECK(rp_cpu_gpt_embed_fwd(tok, wte, wpe, want, B, T, C, V));
  int32_t *dtok = dput(tok, (size_t)B * T * 4);
  float *dwte = dput(wte, (size_t)V * C * 4);
  float *dwpe = dput(wpe, (size_t)(T + 2) * C * 4), *dout = dput(NULL, n * 4);
  RP_CHECK(rp_cuda_gpt_embed_fwd(dtok, dwte, dwpe, dout, B, T, C, V, s));
  float *got = dgetf(dout, n, s);
  close_max(got, want, n, REL_ELEM, "embed_fwd");
  same_bits(want, got, n, "embed_fwd against the CPU"); /* one f32 add */
  RP_CHECK(rp_cuda_gpt_embed_fwd(dtok, dwte, dwpe, dout, B, T, C, V, s));
  float *again = dgetf(dout, n, s);
  same_bits(got, again, n, "embed_fwd");
  /* a token outside [0, V): the CPU refuses, the GPU writes a NaN row */
  tok[4] = V;
  RP_EXPECT(rp_cpu_gpt_embed_fwd(tok, wte, wpe, want, B, T, C, V), RP_ERANGE);
  RP_CHECK(rp_cuda_buf_put(dtok, tok, (size_t)B * T * 4));
  RP_CHECK(rp_cuda_gpt_embed_fwd(dtok, dwte, dwpe, dout, B, T, C, V, s));
  free(got);
  got = dgetf(dout, n, s);
  for (size_t r = 0; r < (size_t)B * T; r++)
    for (int c = 0; c < C; c++)
      cr_assert(r == 4 ? isnan(got[r * C + c])
                       : got[r * C + c] == again[r * C + c],
                "row %zu col %d: %g", r, c, got[r * C + c]);
  free(tok), free(wte), free(wpe), free(want), free(got), free(again);
  rp_cuda_buf_free(dtok), rp_cuda_buf_free(dwte), rp_cuda_buf_free(dwpe);
  rp_cuda_buf_free(dout);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* dwte by token (4 V x the 256-column blocks <= N) and by position (the
 * others); skew: every other position holds token 0, so that it holds more
 * positions than one list flush (2048) when N is over 4096. */
static void check_embed_bwd(int B, int T, int C, int V, int skew, uint32_t seed,
                            void *s) {
  size_t N = (size_t)B * T, n = N * C;
  int32_t *tok = tokens_random(N, V, seed);
  for (size_t i = 0; skew && i < N; i += 2)
    tok[i] = 0;
  float *dout = kr_random(n, seed + 1, -1, 1);
  float *dwte0 = kr_random((size_t)V * C, seed + 2, -1, 1); /* += */
  float *wte = fdup(dwte0, (size_t)V * C), *wpe = kr_alloc((size_t)T * C);
  RP_CHECK(rp_cpu_gpt_embed_bwd(tok, dout, wte, wpe, B, T, C, V));
  int32_t *dtok = dput(tok, N * 4);
  float *ddout = dput(dout, n * 4), *ddwte = dput(dwte0, (size_t)V * C * 4);
  float *ddwpe = dput(NULL, (size_t)T * C * 4);
  RP_CHECK(rp_cuda_gpt_embed_bwd(dtok, ddout, ddwte, ddwpe, B, T, C, V, s));
  float *g_wte = dgetf(ddwte, (size_t)V * C, s);
  float *g_wpe = dgetf(ddwpe, (size_t)T * C, s);
  close_max(g_wte, wte, (size_t)V * C, REL_ELEM, "embed_bwd dwte");
  close_max(g_wpe, wpe, (size_t)T * C, REL_ELEM, "embed_bwd dwpe");
  /* the contract's (b, t) order on both backends: the same f32 adds */
  same_bits(wte, g_wte, (size_t)V * C, "embed_bwd dwte against the CPU");
  same_bits(wpe, g_wpe, (size_t)T * C, "embed_bwd dwpe against the CPU");
  RP_CHECK(rp_cuda_buf_put(ddwte, dwte0, (size_t)V * C * 4));
  RP_CHECK(rp_cuda_gpt_embed_bwd(dtok, ddout, ddwte, ddwpe, B, T, C, V, s));
  float *a_wte = dgetf(ddwte, (size_t)V * C, s);
  float *a_wpe = dgetf(ddwpe, (size_t)T * C, s);
  same_bits(g_wte, a_wte, (size_t)V * C, "embed_bwd dwte");
  same_bits(g_wpe, a_wpe, (size_t)T * C, "embed_bwd dwpe");
  free(tok), free(dout), free(dwte0), free(wte), free(wpe);
  free(g_wte), free(g_wpe), free(a_wte), free(a_wpe);
  rp_cuda_buf_free(dtok), rp_cuda_buf_free(ddout), rp_cuda_buf_free(ddwte);
  rp_cuda_buf_free(ddwpe);
}

Test(gpt_kernels_gpu, embed_bwd_matches_cpu_in_token_order) {
  need_gpu();
  void *s = new_stream();
  check_embed_bwd(2, 5, 3, 7, 0, 10, s);        /* by position */
  check_embed_bwd(3, 33, 300, 50, 0, 20, s);    /* by position */
  check_embed_bwd(4, 1024, 8, 2, 0, 30, s);     /* by token, flushes */
  check_embed_bwd(4, 1024, 300, 2, 0, 40, s);   /* by token, 2 column blocks */
  check_embed_bwd(8, 1024, 16, 4000, 1, 50, s); /* by position, flushes */
  check_embed_bwd(16, 64, 128, 112, 0, 60, s);  /* the launch config */
  check_embed_bwd(64, 256, 384, 65, 1, 70, s);  /* nanoGPT's, skewed */
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(gpt_kernels_gpu, embed_token_reads_device_args_in_a_graph) {
  need_gpu();
  void *s = new_stream();
  const int C = 300, V = 13, T = 9;
  float *wte = kr_random((size_t)V * C, 40, -1, 1);
  float *wpe = kr_random((size_t)T * C, 41, -1, 1);
  float *want = kr_alloc(C);
  float *dwte = dput(wte, (size_t)V * C * 4),
        *dwpe = dput(wpe, (size_t)T * C * 4);
  float *dout = dput(NULL, (size_t)C * 4);
  RP_CHECK(rp_cpu_gpt_embed_token(wte, wpe, want, 3, 12, C, V, T));
  RP_CHECK(rp_cuda_gpt_embed_token(dwte, dwpe, dout, 3, 12, C, V, T, NULL, s));
  float *got = dgetf(dout, C, s);
  close_max(got, want, C, REL_ELEM, "embed_token by value");
  /* device arguments win over the by-value ones, also in a graph */
  rp_gpt_token_args a = {.pos = 8, .token = 0, .C = C, .V = V, .T = T};
  void *dargs = dput(&a, sizeof a);
  RP_CHECK(rp_cpu_gpt_embed_token(wte, wpe, want, 8, 0, C, V, T));
  RP_CHECK(rp_cuda_capture_begin(s));
  RP_CHECK(rp_cuda_gpt_embed_token(dwte, dwpe, dout, 3, 12, C, V, T, dargs, s));
  RP_CHECK(rp_cuda_capture_end_launch(s, 1));
  free(got);
  got = dgetf(dout, C, s);
  close_max(got, want, C, REL_ELEM, "embed_token device args");
  /* out of range: the CPU refuses, the GPU writes NaN */
  RP_EXPECT(rp_cpu_gpt_embed_token(wte, wpe, want, T, 0, C, V, T), RP_ERANGE);
  a.pos = T;
  RP_CHECK(rp_cuda_buf_put(dargs, &a, sizeof a));
  RP_CHECK(rp_cuda_gpt_embed_token(dwte, dwpe, dout, 3, 12, C, V, T, dargs, s));
  free(got);
  got = dgetf(dout, C, s);
  for (int c = 0; c < C; c++)
    cr_assert(isnan(got[c]), "pos out of range: out[%d] = %g", c, got[c]);
  free(wte), free(wpe), free(want), free(got);
  rp_cuda_buf_free(dwte), rp_cuda_buf_free(dwpe), rp_cuda_buf_free(dout);
  rp_cuda_buf_free(dargs);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* LayerNorm */

static void check_layernorm(int N, int C, uint32_t seed, void *s) {
  size_t n = (size_t)N * C;
  const float eps = 1e-5f;
  float *x = kr_random(n, seed, -2, 3), *r = kr_random(n, seed + 1, -1, 1);
  float *w = kr_random(C, seed + 2, 0.5f, 1.5f);
  float *b = kr_random(C, seed + 3, -0.5f, 0.5f);
  float *out = kr_alloc(n), *mean = kr_alloc(N), *rstd = kr_alloc(N);
  float *res = kr_alloc(n);
  float *dx = dput(x, n * 4), *dr = dput(r, n * 4), *dw = dput(w, C * 4);
  float *db = dput(b, C * 4), *dout = dput(NULL, n * 4);
  float *dmean = dput(NULL, N * 4), *drstd = dput(NULL, N * 4);
  float *dres = dput(NULL, n * 4);

  rp_cpu_gpt_layernorm_fwd(x, w, b, out, mean, rstd, N, C, eps);
  RP_CHECK(
      rp_cuda_gpt_layernorm_fwd(dx, dw, db, dout, dmean, drstd, N, C, eps, s));
  float *g_out = dgetf(dout, n, s), *g_mean = dgetf(dmean, N, s);
  float *g_rstd = dgetf(drstd, N, s);
  close_max(g_out, out, n, REL_RED, "layernorm_fwd out");
  close_max(g_mean, mean, N, REL_RED, "layernorm_fwd mean");
  close_max(g_rstd, rstd, N, REL_RED, "layernorm_fwd rstd");
  RP_CHECK(
      rp_cuda_gpt_layernorm_fwd(dx, dw, db, dout, dmean, drstd, N, C, eps, s));
  float *a_out = dgetf(dout, n, s);
  same_bits(g_out, a_out, n, "layernorm_fwd out");
  free(g_out), free(g_mean), free(g_rstd), free(a_out);

  rp_cpu_gpt_residual_layernorm_fwd(x, r, res, w, b, out, mean, rstd, N, C,
                                    eps);
  RP_CHECK(rp_cuda_gpt_residual_layernorm_fwd(dx, dr, dres, dw, db, dout, dmean,
                                              drstd, N, C, eps, s));
  float *g_res = dgetf(dres, n, s);
  g_out = dgetf(dout, n, s), g_mean = dgetf(dmean, N, s);
  g_rstd = dgetf(drstd, N, s);
  close_max(g_res, res, n, REL_ELEM, "residual_layernorm_fwd res");
  close_max(g_out, out, n, REL_RED, "residual_layernorm_fwd out");
  close_max(g_mean, mean, N, REL_RED, "residual_layernorm_fwd mean");
  close_max(g_rstd, rstd, N, REL_RED, "residual_layernorm_fwd rstd");
  RP_CHECK(rp_cuda_gpt_residual_layernorm_fwd(dx, dr, dres, dw, db, dout, dmean,
                                              drstd, N, C, eps, s));
  a_out = dgetf(dout, n, s);
  same_bits(g_out, a_out, n, "residual_layernorm_fwd out");
  free(g_res), free(g_out), free(g_mean), free(g_rstd), free(a_out);

  /* backward of the residual stream's LayerNorm (x = res), both modes;
   * the device gets the CPU's mean and rstd so that only the backward is
   * judged */
  float *dy = kr_random(n, seed + 4, -1, 1),
        *dx0 = kr_random(n, seed + 5, -1, 1);
  RP_CHECK(rp_cuda_buf_put(dres, res, n * 4));
  RP_CHECK(rp_cuda_buf_put(dmean, mean, N * 4));
  RP_CHECK(rp_cuda_buf_put(drstd, rstd, N * 4));
  float *ddy = dput(dy, n * 4), *ddx = dput(NULL, n * 4);
  float *ddw = dput(NULL, C * 4), *ddb = dput(NULL, C * 4);
  for (int acc = 0; acc < 2; acc++) {
    float *cdx = fdup(dx0, n), *cdw = kr_alloc(C), *cdb = kr_alloc(C);
    rp_cpu_gpt_layernorm_bwd(dy, res, w, mean, rstd, cdx, cdw, cdb, N, C, acc);
    float *g[3], *a[3];
    for (int run = 0; run < 2; run++) {
      RP_CHECK(rp_cuda_buf_put(ddx, dx0, n * 4));
      RP_CHECK(rp_cuda_gpt_layernorm_bwd(ddy, dres, dw, dmean, drstd, ddx, ddw,
                                         ddb, N, C, acc, s));
      float **o = run ? a : g;
      o[0] = dgetf(ddx, n, s), o[1] = dgetf(ddw, C, s), o[2] = dgetf(ddb, C, s);
    }
    close_max(g[0], cdx, n, REL_RED,
              acc ? "layernorm_bwd dx +=" : "layernorm_bwd dx");
    close_max(g[1], cdw, C, REL_RED, "layernorm_bwd dw");
    close_max(g[2], cdb, C, REL_RED, "layernorm_bwd db");
    same_bits(g[0], a[0], n, "layernorm_bwd dx");
    same_bits(g[1], a[1], C, "layernorm_bwd dw");
    same_bits(g[2], a[2], C, "layernorm_bwd db");
    for (int i = 0; i < 3; i++)
      free(g[i]), free(a[i]);
    free(cdx), free(cdw), free(cdb);
  }
  free(x), free(r), free(w), free(b), free(out), free(mean), free(rstd);
  free(res), free(dy), free(dx0);
  void *bufs[] = {dx, dr, dw, db, dout, dmean, drstd, dres, ddy, ddx, ddw, ddb};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
}

Test(gpt_kernels_gpu, layernorm_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  check_layernorm(5, 7, 100, s);
  check_layernorm(37, 300, 110, s);
  check_layernorm(70, 64, 120, s);
  /* the kernels' register form (4 values a lane) at and past its edge of
   * 128 columns, and the any-width form up to GPT-2 widths and beyond */
  check_layernorm(9, 128, 130, s);
  check_layernorm(9, 129, 140, s);
  check_layernorm(9, 384, 150, s);
  check_layernorm(6, 385, 160, s);
  check_layernorm(6, 1024, 170, s);
  check_layernorm(4, 1100, 180, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* Linear layers */

static void check_matmul(int N, int C, int OC, int has_bias, int acc,
                         uint32_t seed, void *s) {
  size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
  float *inp = kr_random(ni, seed, -1, 1), *W = kr_random(nw, seed + 1, -1, 1);
  float *bias = kr_random(OC, seed + 2, -1, 1), *out = kr_alloc(no);
  float *dout = kr_random(no, seed + 3, -1, 1);
  float *dinp0 = kr_random(ni, seed + 4, -1, 1), *dinp = fdup(dinp0, ni);
  float *dW = kr_alloc(nw), *dbias = kr_alloc(OC);
  rp_cpu_gpt_matmul_fwd(inp, W, has_bias ? bias : NULL, out, N, C, OC);
  rp_cpu_gpt_matmul_bwd(dout, inp, W, dinp, dW, has_bias ? dbias : NULL, N, C,
                        OC, acc);
  float *d_inp = dput(inp, ni * 4), *d_W = dput(W, nw * 4);
  float *d_bias = dput(bias, OC * 4), *d_out = dput(NULL, no * 4);
  float *d_dout = dput(dout, no * 4), *d_dinp = dput(NULL, ni * 4);
  float *d_dW = dput(NULL, nw * 4), *d_dbias = dput(NULL, OC * 4);
  float *g[4], *a[4];
  for (int run = 0; run < 2; run++) {
    float **o = run ? a : g;
    RP_CHECK(rp_cuda_gpt_matmul_fwd(d_inp, d_W, has_bias ? d_bias : NULL, d_out,
                                    N, C, OC, s));
    RP_CHECK(rp_cuda_buf_put(d_dinp, dinp0, ni * 4));
    RP_CHECK(rp_cuda_gpt_matmul_bwd(d_dout, d_inp, d_W, d_dinp, d_dW,
                                    has_bias ? d_dbias : NULL, N, C, OC, acc,
                                    s));
    o[0] = dgetf(d_out, no, s), o[1] = dgetf(d_dinp, ni, s);
    o[2] = dgetf(d_dW, nw, s), o[3] = dgetf(d_dbias, OC, s);
  }
  close_max(g[0], out, no, REL_RED, "matmul_fwd out");
  close_max(g[1], dinp, ni, REL_RED, "matmul_bwd dinp");
  close_max(g[2], dW, nw, REL_RED, "matmul_bwd dW");
  if (has_bias)
    close_max(g[3], dbias, OC, REL_RED, "matmul_bwd dbias");
  same_bits(g[0], a[0], no, "matmul_fwd out");
  same_bits(g[1], a[1], ni, "matmul_bwd dinp");
  same_bits(g[2], a[2], nw, "matmul_bwd dW");
  if (has_bias)
    same_bits(g[3], a[3], OC, "matmul_bwd dbias");
  for (int i = 0; i < 4; i++)
    free(g[i]), free(a[i]);
  free(inp), free(W), free(bias), free(out), free(dout), free(dinp0);
  free(dinp), free(dW), free(dbias);
  void *bufs[] = {d_inp, d_W, d_bias, d_out, d_dout, d_dinp, d_dW, d_dbias};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
}

Test(gpt_kernels_gpu, matmul_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  check_matmul(9, 13, 21, 1, 0, 200, s);
  check_matmul(9, 13, 21, 0, 1, 210, s);
  check_matmul(64, 96, 130, 1, 1, 220, s);
  check_matmul(1, 5, 3, 0, 0, 230, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* The backward's column sums (matmul_bwd's dbias, layernorm_bwd's dw and
 * db) of one shape, under REPRISE_GPT_COLSUM = split and = serial, eagerly
 * and (split) inside a CUDA graph: the CPU within REL_RED, and all of them
 * the same bits (gpt_cuda.cuh: the grids add in one order). matmul_bwd's
 * input is 3 wide: only its dbias is judged here. */
static void check_colsums(int N, int C, uint32_t seed, void *s) {
  size_t n = (size_t)N * C;
  const int IC = 3;
  float *dy = kr_random(n, seed, -1, 1), *x = kr_random(n, seed + 1, -2, 3);
  float *mean = kr_random(N, seed + 2, -0.5f, 0.5f);
  float *rstd = kr_random(N, seed + 3, 0.5f, 2.0f);
  float *w = kr_random(C, seed + 4, 0.5f, 1.5f);
  float *inp = kr_random((size_t)N * IC, seed + 5, -1, 1);
  float *W = kr_random((size_t)C * IC, seed + 6, -1, 1);
  float *cdx = kr_alloc(n), *cdw = kr_alloc(C), *cdb = kr_alloc(C);
  float *cdinp = kr_alloc((size_t)N * IC), *cdW = kr_alloc((size_t)C * IC);
  float *cbias = kr_alloc(C);
  rp_cpu_gpt_layernorm_bwd(dy, x, w, mean, rstd, cdx, cdw, cdb, N, C, 0);
  rp_cpu_gpt_matmul_bwd(dy, inp, W, cdinp, cdW, cbias, N, IC, C, 0);
  float *ddy = dput(dy, n * 4), *dx = dput(x, n * 4);
  float *dmean = dput(mean, N * 4), *drstd = dput(rstd, N * 4);
  float *dw = dput(w, C * 4), *ddx = dput(NULL, n * 4);
  float *ddw = dput(NULL, C * 4), *ddb = dput(NULL, C * 4);
  float *dinp = dput(inp, (size_t)N * IC * 4);
  float *dW = dput(W, (size_t)C * IC * 4);
  float *ddinp = dput(NULL, (size_t)N * IC * 4);
  float *ddW = dput(NULL, (size_t)C * IC * 4), *dbias = dput(NULL, C * 4);
  float *poison = kr_random(C, seed + 7, 5, 6);
  const char *mode[] = {"split", "serial", "split"}; /* the last: a graph */
  float *got[3][3];
  for (int m = 0; m < 3; m++) {
    setenv("REPRISE_GPT_COLSUM", mode[m], 1);
    RP_CHECK(rp_cuda_buf_put(ddw, poison, C * 4));
    RP_CHECK(rp_cuda_buf_put(ddb, poison, C * 4));
    RP_CHECK(rp_cuda_buf_put(dbias, poison, C * 4));
    if (m == 2)
      RP_CHECK(rp_cuda_capture_begin(s));
    RP_CHECK(rp_cuda_gpt_layernorm_bwd(ddy, dx, dw, dmean, drstd, ddx, ddw, ddb,
                                       N, C, 0, s));
    RP_CHECK(rp_cuda_gpt_matmul_bwd(ddy, dinp, dW, ddinp, ddW, dbias, N, IC, C,
                                    0, s));
    if (m == 2)
      RP_CHECK(rp_cuda_capture_end_launch(s, 1));
    got[m][0] = dgetf(ddw, C, s), got[m][1] = dgetf(ddb, C, s);
    got[m][2] = dgetf(dbias, C, s);
  }
  unsetenv("REPRISE_GPT_COLSUM");
  close_max(got[0][0], cdw, C, REL_RED, "column sums: layernorm dw");
  close_max(got[0][1], cdb, C, REL_RED, "column sums: layernorm db");
  close_max(got[0][2], cbias, C, REL_RED, "column sums: matmul dbias");
  const char *what[] = {"layernorm dw", "layernorm db", "matmul dbias"};
  for (int m = 1; m < 3; m++)
    for (int k = 0; k < 3; k++) {
      for (int i = 0; i < C; i++)
        cr_assert(!memcmp(&got[0][k][i], &got[m][k][i], sizeof(float)),
                  "N %d C %d %s column %d: split %.9g, %s %.9g", N, C, what[k],
                  i, got[0][k][i], m == 1 ? "serial" : "split in a graph",
                  got[m][k][i]);
    }
  for (int m = 0; m < 3; m++)
    for (int k = 0; k < 3; k++)
      free(got[m][k]);
  free(dy), free(x), free(mean), free(rstd), free(w), free(inp), free(W);
  free(cdx), free(cdw), free(cdb), free(cdinp), free(cdW), free(cbias);
  free(poison);
  void *bufs[] = {ddy, dx,   dmean, drstd, dw,  ddx,  ddw,
                  ddb, dinp, dW,    ddinp, ddW, dbias};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
}

/* Shapes around the chunking's edges (one short chunk, 64-row chunks,
 * the 128-chunk cap, a partial block of 32 columns) and the nanoGPT
 * step's (16,384 rows, 384 and 1,536 columns). */
Test(gpt_kernels_gpu, column_sums_split_and_serial_give_the_same_bits) {
  need_gpu();
  void *s = new_stream();
  const int shape[][2] = {{1, 1},       {5, 7},       {63, 33},   {64, 300},
                          {65, 300},    {1000, 64},   {8191, 40}, {9000, 129},
                          {16384, 384}, {16384, 1536}};
  for (uint32_t i = 0; i < KR_LEN(shape); i++)
    check_colsums(shape[i][0], shape[i][1], 300 + 10 * i, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* With a workspace slice too small for the partials (1 MiB: 2 x 128 chunks
 * x 2,100 columns need 2.1 MB), split runs the serial grid: still the same
 * bits and the CPU's sums. Criterion runs each test in its own process, so
 * the slice size is read here first. */
Test(gpt_kernels_gpu, column_sums_without_room_for_partials_run_serial) {
  need_gpu();
  setenv("REPRISE_CUBLAS_WS_MIB", "1", 1);
  void *s = new_stream();
  size_t bytes = 0;
  RP_CHECK(rp_cuda_blas_ws_bytes(9, &bytes));
  cr_assert_eq(bytes, (size_t)1 << 20);
  check_colsums(8192, 2100, 400, s);
  check_colsums(100, 50, 410, s); /* these partials fit */
  RP_CHECK(rp_cuda_stream_destroy(s));
  unsetenv("REPRISE_CUBLAS_WS_MIB");
}

/* Another mode is refused with the variable's name, before anything is
 * launched (so this runs without a device too). */
Test(gpt_kernels_gpu, unknown_column_sum_mode_is_refused) {
  const char *bad[] = {"8", "32", "splits", "Serial", "0"};
  for (uint32_t i = 0; i < KR_LEN(bad); i++) {
    setenv("REPRISE_GPT_COLSUM", bad[i], 1);
    cr_assert_eq(rp_cuda_gpt_layernorm_bwd(NULL, NULL, NULL, NULL, NULL, NULL,
                                           NULL, NULL, 4, 4, 0, NULL),
                 RP_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "REPRISE_GPT_COLSUM='%s'", bad[i]);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    cr_assert_eq(rp_cuda_gpt_matmul_bwd(NULL, NULL, NULL, NULL, NULL, NULL, 4,
                                        4, 4, 0, NULL),
                 RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp_cuda_gpt_matmul_bwd: "
                                        "REPRISE_GPT_COLSUM"),
              "%s", rp_error_detail());
  }
  unsetenv("REPRISE_GPT_COLSUM");
}

/* ---------------------------------------------------------------------- */
/* GELU */

/* bias + GELU forward of rows x cols against the CPU, twice the same bits:
 * cols 302 takes the scalar loop on aligned rows (not a multiple of 4),
 * 1536 (nanoGPT's 4C) makes the float4 loop's column loop step twice. */
static void check_gelu_fwd(int rows, int cols, uint32_t seed, void *s) {
  size_t n = (size_t)rows * cols;
  float *pre0 = kr_random(n, seed, -5, 5),
        *bias = kr_random(cols, seed + 1, -1, 1);
  float *pre = fdup(pre0, n), *out = kr_alloc(n);
  rp_cpu_gpt_bias_gelu_fwd(pre, bias, out, rows, cols);
  float *d_pre = dput(NULL, n * 4), *d_bias = dput(bias, cols * 4);
  float *d_out = dput(NULL, n * 4);
  float *g[2], *a[2];
  for (int run = 0; run < 2; run++) {
    float **o = run ? a : g;
    RP_CHECK(rp_cuda_buf_put(d_pre, pre0, n * 4));
    RP_CHECK(rp_cuda_gpt_bias_gelu_fwd(d_pre, d_bias, d_out, rows, cols, s));
    o[0] = dgetf(d_pre, n, s), o[1] = dgetf(d_out, n, s);
  }
  char what[2][64];
  snprintf(what[0], sizeof what[0], "bias_gelu_fwd pre, %d cols", cols);
  snprintf(what[1], sizeof what[1], "bias_gelu_fwd out, %d cols", cols);
  kr_close_f(g[0], pre, n, REL_ELEM, 1.0, 0, what[0]);
  kr_close_f(g[1], out, n, REL_ELEM, 1.0, 0, what[1]);
  for (int i = 0; i < 2; i++) {
    same_bits(g[i], a[i], n, what[i]);
    free(g[i]), free(a[i]);
  }
  free(pre0), free(bias), free(pre), free(out);
  rp_cuda_buf_free(d_pre), rp_cuda_buf_free(d_bias), rp_cuda_buf_free(d_out);
}

Test(gpt_kernels_gpu, gelu_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  const int rows = 7, cols = 300;
  check_gelu_fwd(rows, cols, 300, s);
  check_gelu_fwd(3, 302, 320, s);
  check_gelu_fwd(3, 1536, 330, s);
  size_t n = (size_t)rows * cols;
  float *pre0 = kr_random(n, 300, -5, 5), *bias = kr_random(cols, 301, -1, 1);
  float *dpre_ = dput(NULL, n * 4), *dbias = dput(bias, cols * 4);
  float *dout = dput(NULL, n * 4);
  float *g[2];
  /* rows of 296 columns from the second float: no pointer 16-byte
   * aligned, then only out's (the scalar loop both times): the bits of the
   * float4 loop on the same values at aligned addresses, and the CPU's
   * within the bound */
  const int c4 = cols - 4;
  size_t n4 = (size_t)rows * c4;
  float *pa = dput(pre0 + 1, n4 * 4), *ba = dput(bias + 1, c4 * 4);
  float *oa = dput(NULL, n4 * 4);
  RP_CHECK(rp_cuda_gpt_bias_gelu_fwd(pa, ba, oa, rows, c4, s));
  float *want_p = dgetf(pa, n4, s), *want_o = dgetf(oa, n4, s);
  float *pre9 = fdup(pre0, n), *out9 = kr_alloc(n);
  rp_cpu_gpt_bias_gelu_fwd(pre9 + 1, bias + 1, out9 + 1, rows, c4);
  kr_close_f(want_o, out9 + 1, n4, REL_ELEM, 1.0, 0, "float4 out, 296 cols");
  RP_CHECK(rp_cuda_buf_put(dpre_, pre0, n * 4));
  RP_CHECK(
      rp_cuda_gpt_bias_gelu_fwd(dpre_ + 1, dbias + 1, dout + 1, rows, c4, s));
  g[0] = dgetf(dpre_, n, s), g[1] = dgetf(dout, n, s);
  same_bits(want_p, g[0] + 1, n4, "bias_gelu_fwd pre, unaligned");
  same_bits(want_o, g[1] + 1, n4, "bias_gelu_fwd out, unaligned");
  free(g[0]), free(g[1]);
  RP_CHECK(rp_cuda_buf_put(pa, pre0 + 1, n4 * 4));
  RP_CHECK(rp_cuda_gpt_bias_gelu_fwd(pa, ba, dout + 1, rows, c4, s));
  g[1] = dgetf(dout, n, s);
  same_bits(want_o, g[1] + 1, n4, "bias_gelu_fwd out alone unaligned");
  free(g[1]), free(want_p), free(want_o), free(pre9), free(out9);
  rp_cuda_buf_free(pa), rp_cuda_buf_free(ba), rp_cuda_buf_free(oa);

  /* backward, also in place (dpre is dout's buffer) */
  const int64_t m = 2101;
  float *x = kr_random(m, 310, -5, 5), *dy = kr_random(m, 311, -1, 1);
  float *dx = kr_alloc(m);
  /* where x^2 overflows (|x| above about 5e19) the gradient is h: 1 or 0,
   * not NaN; in the float4 loop and in the tail */
  const float huge[] = {1e20f, -1e20f, 3e38f, -3e38f};
  for (size_t i = 0; i < KR_LEN(huge); i++)
    x[100 + i] = x[m - 1 - (int64_t)i] = huge[i];
  rp_cpu_gpt_gelu_bwd(x, dy, dx, m);
  float *d_x = dput(x, m * 4), *d_dy = dput(dy, m * 4),
        *d_dx = dput(NULL, m * 4);
  RP_CHECK(rp_cuda_gpt_gelu_bwd(d_x, d_dy, d_dx, m, s));
  float *g1 = dgetf(d_dx, m, s);
  kr_close_f(g1, dx, m, REL_ELEM, 1.0, 0, "gelu_bwd");
  /* one float in: no pointer 16-byte aligned (the scalar loop), the same
   * bits as the float4 one */
  float *d_dx1 = dput(NULL, (m + 1) * 4);
  RP_CHECK(rp_cuda_gpt_gelu_bwd(d_x + 1, d_dy + 1, d_dx1 + 1, m - 1, s));
  float *g3 = dgetf(d_dx1, m, s);
  same_bits(g1 + 1, g3 + 1, m - 1, "gelu_bwd unaligned");
  free(g3);
  /* only dpre unaligned */
  RP_CHECK(rp_cuda_gpt_gelu_bwd(d_x, d_dy, d_dx1 + 1, m, s));
  g3 = dgetf(d_dx1, m + 1, s);
  same_bits(g1, g3 + 1, m, "gelu_bwd, dpre alone unaligned");
  RP_CHECK(rp_cuda_gpt_gelu_bwd(d_x, d_dy, d_dy, m, s)); /* in place */
  float *g2 = dgetf(d_dy, m, s);
  same_bits(g1, g2, m, "gelu_bwd in place");
  free(g3);
  rp_cuda_buf_free(d_dx1);
  free(pre0), free(bias), free(x), free(dy), free(dx);
  free(g1), free(g2);
  void *bufs[] = {dpre_, dbias, dout, d_x, d_dy, d_dx};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* Attention */

/* Selects the attention's path: "fused", "gemm" (the GEMM path, permute
 * layout) or "direct" (the GEMM path addressing heads in place). */
static void set_attn(const char *mode) {
  setenv("REPRISE_GPT_ATTN", strcmp(mode, "fused") ? "gemm" : "fused", 1);
  setenv("REPRISE_GPT_ATTN_GEMM", strcmp(mode, "direct") ? "permute" : "direct",
         1);
}

static void unset_attn(void) {
  unsetenv("REPRISE_GPT_ATTN");
  unsetenv("REPRISE_GPT_ATTN_GEMM");
}

/* Attention forward and backward on the GPU through the path `mode`
 * (set_attn), against the CPU; both runs of the same inputs give the same
 * bits. Returns the GPU's outputs: qkvr, att, out, dqkv. */
static void attention_gpu(const char *mode, int B, int T, int C, int NH,
                          const float *qkv, const float *dout, float *got[4],
                          void *s) {
  size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
  float *qkvr = kr_alloc(3 * n), *att = kr_alloc(na), *out = kr_alloc(n);
  float *scr = kr_alloc(4 * n), *dqkv = kr_alloc(3 * n), *datt = kr_alloc(na);
  rp_cpu_gpt_attention_fwd(qkv, qkvr, att, out, scr, B, T, C, NH);
  rp_cpu_gpt_attention_bwd(dout, qkvr, att, dqkv, datt, scr, B, T, C, NH);
  float *d_qkv = dput(qkv, 3 * n * 4), *d_qkvr = dput(NULL, 3 * n * 4);
  float *d_att = dput(NULL, na * 4), *d_out = dput(NULL, n * 4);
  float *d_scr = dput(NULL, 4 * n * 4), *d_dout = dput(dout, n * 4);
  /* the forward's scratch: its n floats, then a guard no path may touch */
  float *d_sf = dput(NULL, (n + 64) * 4);
  float *d_dqkv = dput(NULL, 3 * n * 4), *d_datt = dput(NULL, na * 4);
  size_t np = 3 * n > na ? 3 * n : na;
  float *poison = kr_random(np > n + 64 ? np : n + 64, 430, 5, 6);
  float *a[4];
  /* the fused kernels run where both fit in 48 KiB of shared memory
   * (kernels/attention.cu); the GEMM path writes datt, they do not */
  int hs = C / NH;
  size_t fwd = 2 * (size_t)T * (hs + 1) + 8 * ((size_t)hs + T);
  size_t bwd = 3 * (size_t)T * (hs + 1) + (size_t)T * T;
  int fused = !strcmp(mode, "fused") && fwd * 4 <= 49152 && bwd * 4 <= 49152;
  /* the GEMM path's scratch: the permute layout writes att v there
   * (forward) and dq, dk, dv at [n, 4n) (backward); the direct layout only
   * its pointer tables, where they fit (kernels/attention.cu tables_in: 3
   * and 9 tables of B NH entries rounded up to even, and 12 bytes to align
   * them), the rest untouched: a direct run that fell back to the permute
   * layout would pass the value checks unseen */
  int gemm_path = strcmp(mode, "fused") != 0;
  size_t ts = ((size_t)B * NH + 1) & ~(size_t)1;
  size_t need_f = 3 * ts * sizeof(void *) + 12,
         need_b = 9 * ts * sizeof(void *) + 12;
  int tab_f = !strcmp(mode, "direct") && n * 4 >= need_f;
  int tab_b = !strcmp(mode, "direct") && 4 * n * 4 >= need_b;
  float *poison4 = kr_random(4 * n, 431, 5, 6);
  set_attn(mode);
  for (int run = 0; run < 2; run++) {
    float **o = run ? a : got;
    /* every output rewritten, the mask's zeros included */
    RP_CHECK(rp_cuda_buf_put(d_qkvr, poison, 3 * n * 4));
    RP_CHECK(rp_cuda_buf_put(d_att, poison, na * 4));
    RP_CHECK(rp_cuda_buf_put(d_out, poison, n * 4));
    RP_CHECK(rp_cuda_buf_put(d_dqkv, poison, 3 * n * 4));
    RP_CHECK(rp_cuda_buf_put(d_datt, poison, na * 4));
    RP_CHECK(rp_cuda_buf_put(d_sf, poison, (n + 64) * 4));
    RP_CHECK(rp_cuda_buf_put(d_scr, poison4, 4 * n * 4));
    RP_CHECK(rp_cuda_gpt_attention_fwd(d_qkv, d_qkvr, d_att, d_out, d_sf, B, T,
                                       C, NH, s));
    float *guard = dgetf(d_sf, n + 64, s);
    cr_assert(!memcmp(guard + n, poison + n, 64 * 4),
              "%s: the forward wrote past its scratch", mode);
    size_t from = tab_f ? (need_f + 3) / 4 : 0;
    if (gemm_path && from < n)
      cr_assert_eq(!memcmp(guard + from, poison + from, (n - from) * 4), tab_f,
                   "%s, B %d T %d NH %d: the forward's scratch says the %s "
                   "layout ran",
                   mode, B, T, NH, tab_f ? "permute" : "direct");
    free(guard);
    RP_CHECK(rp_cuda_gpt_attention_bwd(d_dout, d_qkvr, d_att, d_dqkv, d_datt,
                                       d_scr, B, T, C, NH, s));
    float *sb = dgetf(d_scr, 4 * n, s);
    from = tab_b ? (need_b + 3) / 4 : n;
    if (gemm_path && from < 4 * n)
      cr_assert_eq(!memcmp(sb + from, poison4 + from, (4 * n - from) * 4),
                   tab_b,
                   "%s, B %d T %d NH %d: the backward's scratch says the %s "
                   "layout ran",
                   mode, B, T, NH, tab_b ? "permute" : "direct");
    free(sb);
    o[0] = dgetf(d_qkvr, 3 * n, s), o[1] = dgetf(d_att, na, s);
    o[2] = dgetf(d_out, n, s), o[3] = dgetf(d_dqkv, 3 * n, s);
    float *dt = dgetf(d_datt, na, s);
    cr_assert_eq(!memcmp(dt, poison, na * 4), fused,
                 "%s, T %d hs %d: the %s path was expected", mode, T, hs,
                 fused ? "fused" : "GEMM");
    free(dt);
  }
  /* the other path's backward on this path's forward (both write the same
   * qkvr and att): the CPU's dqkv */
  set_attn(strcmp(mode, "fused") ? "fused" : "gemm");
  RP_CHECK(rp_cuda_buf_put(d_dqkv, poison, 3 * n * 4));
  RP_CHECK(rp_cuda_gpt_attention_bwd(d_dout, d_qkvr, d_att, d_dqkv, d_datt,
                                     d_scr, B, T, C, NH, s));
  float *mixed = dgetf(d_dqkv, 3 * n, s);
  close_max(mixed, dqkv, 3 * n, REL_RED, "attention_bwd after the other path");
  free(mixed);
  unset_attn();
  char what[4][96];
  const char *names[] = {"attention_fwd qkvr", "attention_fwd att",
                         "attention_fwd out", "attention_bwd dqkv"};
  for (int i = 0; i < 4; i++)
    snprintf(what[i], sizeof what[i], "%s (%s; B %d T %d C %d NH %d)", names[i],
             mode, B, T, C, NH);
  close_max(got[0], qkvr, 3 * n, REL_ELEM, what[0]);
  close_max(got[1], att, na, REL_RED, what[1]);
  close_max(got[2], out, n, REL_RED, what[2]);
  close_max(got[3], dqkv, 3 * n, REL_RED, what[3]);
  /* the causal mask: exact zeros above the diagonal */
  for (size_t r = 0; r < (size_t)B * NH * T; r++)
    for (int u = (int)(r % T) + 1; u < T; u++)
      cr_assert_eq(got[1][r * T + u], 0.0f, "%s: att row %zu col %d", mode, r,
                   u);
  size_t sizes[] = {3 * n, na, n, 3 * n};
  for (int i = 0; i < 4; i++) {
    same_bits(got[i], a[i], sizes[i], what[i]);
    free(a[i]);
  }
  free(qkvr), free(att), free(out), free(scr), free(dqkv), free(datt);
  free(poison), free(poison4);
  void *bufs[] = {d_qkv,  d_qkvr, d_att,  d_out, d_scr,
                  d_dout, d_dqkv, d_datt, d_sf};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
}

/* The three paths against the CPU and within the same bound of each
 * other. */
static void check_attention(int B, int T, int C, int NH, uint32_t seed,
                            void *s) {
  size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
  float *qkv = kr_random(3 * n, seed, -1.5f, 1.5f);
  float *dout = kr_random(n, seed + 1, -1, 1);
  float *fused[4], *gemm[4], *direct[4];
  attention_gpu("fused", B, T, C, NH, qkv, dout, fused, s);
  attention_gpu("gemm", B, T, C, NH, qkv, dout, gemm, s);
  attention_gpu("direct", B, T, C, NH, qkv, dout, direct, s);
  size_t sizes[] = {3 * n, na, n, 3 * n};
  for (int i = 0; i < 4; i++) {
    close_max(fused[i], gemm[i], sizes[i], REL_RED, "attention fused vs gemm");
    close_max(direct[i], gemm[i], sizes[i], REL_RED,
              "attention direct vs permute");
    free(fused[i]), free(gemm[i]), free(direct[i]);
  }
  free(qkv), free(dout);
}

/* Shapes for both paths: the fused kernels take a head that fits in 48 KiB
 * of shared memory (odd sizes, T above a warp's 32 lanes, hs above 64,
 * T 96 with hs 8 at the edge, the launch-bound step's T 64 with hs 32);
 * T 64 with hs 64 and T 100 with hs 16 do not fit, so "fused" runs the
 * GEMM path there too. The fused forward's geometry (kernels/attention.cu)
 * varies with them: 32 warps and 2 or 3 row groups a head (T 33, 40, 64,
 * 96: rows left over in the last group), 16 warps (T 8 with hs 300: 32
 * warps' buffers do not fit), and 256 heads in one row group, two rows a
 * warp (B 64). */
Test(gpt_kernels_gpu, attention_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  check_attention(2, 7, 12, 3, 400, s);
  check_attention(1, 33, 64, 2, 410, s);
  check_attention(3, 40, 48, 4, 420, s);
  check_attention(1, 40, 80, 1, 440, s);
  check_attention(2, 96, 48, 6, 450, s);
  check_attention(16, 64, 128, 4, 460, s);
  check_attention(2, 64, 256, 4, 470, s);
  check_attention(1, 100, 32, 2, 480, s);
  check_attention(1, 8, 300, 1, 490, s);
  check_attention(64, 64, 128, 4, 500, s);
  /* T 2 with hs 2: the direct layout's pointer tables do not fit in the
   * scratch, so it runs the permute layout; T 3 with hs 2: they fit the
   * backward's scratch, not the forward's (permute forward, direct
   * backward) */
  check_attention(3, 2, 6, 3, 510, s);
  check_attention(2, 3, 6, 3, 520, s);
  /* hs 5 and 6: heads and rows only 4 or 8 bytes aligned in the direct
   * layout; B NH 3: an odd table length (tables padded to 16 bytes) */
  check_attention(2, 7, 15, 3, 530, s);
  check_attention(2, 9, 18, 3, 540, s);
  check_attention(1, 7, 15, 3, 550, s);
  /* nanoGPT's head: T 256, hs 64 (the direct layout at that scale) */
  check_attention(2, 256, 384, 6, 560, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* Another path is refused with the variable's name, before anything is
 * launched (so this runs without a device too). */
Test(gpt_kernels_gpu, unknown_attention_path_is_refused) {
  const char *bad[] = {"flash", "Fused", "GEMM", "1"};
  for (uint32_t i = 0; i < KR_LEN(bad); i++) {
    setenv("REPRISE_GPT_ATTN", bad[i], 1);
    cr_assert_eq(rp_cuda_gpt_attention_fwd(NULL, NULL, NULL, NULL, NULL, 2, 4,
                                           8, 2, NULL),
                 RP_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "REPRISE_GPT_ATTN='%s'", bad[i]);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    cr_assert_eq(rp_cuda_gpt_attention_bwd(NULL, NULL, NULL, NULL, NULL, NULL,
                                           2, 4, 8, 2, NULL),
                 RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp_cuda_gpt_attention_bwd: "
                                        "REPRISE_GPT_ATTN"),
              "%s", rp_error_detail());
  }
  unsetenv("REPRISE_GPT_ATTN");
  const char *bad_layout[] = {"Direct", "strided", "0"};
  for (uint32_t i = 0; i < KR_LEN(bad_layout); i++) {
    setenv("REPRISE_GPT_ATTN_GEMM", bad_layout[i], 1);
    char want[64];
    snprintf(want, sizeof want, "REPRISE_GPT_ATTN_GEMM='%s'", bad_layout[i]);
    cr_assert_eq(rp_cuda_gpt_attention_fwd(NULL, NULL, NULL, NULL, NULL, 2, 4,
                                           8, 2, NULL),
                 RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    cr_assert_eq(rp_cuda_gpt_attention_bwd(NULL, NULL, NULL, NULL, NULL, NULL,
                                           2, 4, 8, 2, NULL),
                 RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  }
  unsetenv("REPRISE_GPT_ATTN_GEMM");
}

/* Decodes positions 0..P-1 on both backends (a new qkv each step): out
 * after every step and the caches at the end; the device run passes pos
 * through dev_args when dev is set (the by-value pos is then wrong). */
static void check_decode(int T, int C, int NH, int P, int dev, uint32_t seed,
                         void *s) {
  size_t nc = (size_t)T * C; /* NH * Tmax * hs */
  float *kc = kr_random(nc, seed, -1, 1), *vc = kr_random(nc, seed + 1, -1, 1);
  float *d_kc = dput(kc, nc * 4), *d_vc = dput(vc, nc * 4);
  float *d_qkv = dput(NULL, 3 * (size_t)C * 4), *d_out = dput(NULL, C * 4);
  float *d_scr = dput(NULL, (size_t)NH * T * 4);
  float *out = kr_alloc(C), *scr = kr_alloc((size_t)NH * T);
  rp_gpt_decode_args args = {.pos = 0, .T = T, .C = C, .NH = NH};
  void *dargs = dput(&args, sizeof args);
  for (int pos = 0; pos < P; pos++) {
    float *qkv = kr_random(3 * (size_t)C, seed + 10 + (uint32_t)pos, -2, 2);
    RP_CHECK(rp_cpu_gpt_attention_decode(qkv, kc, vc, out, scr, pos, T, C, NH));
    RP_CHECK(rp_cuda_buf_put(d_qkv, qkv, 3 * (size_t)C * 4));
    args.pos = pos;
    RP_CHECK(rp_cuda_buf_put(dargs, &args, sizeof args));
    RP_CHECK(rp_cuda_gpt_attention_decode(d_qkv, d_kc, d_vc, d_out, d_scr,
                                          dev ? T + 5 : pos, T, C, NH,
                                          dev ? dargs : NULL, s));
    float *got = dgetf(d_out, C, s);
    close_max(got, out, C, REL_RED, "attention_decode out");
    free(qkv), free(got);
  }
  float *g_kc = dgetf(d_kc, nc, s), *g_vc = dgetf(d_vc, nc, s);
  close_max(g_kc, kc, nc, REL_ELEM, "attention_decode kcache");
  close_max(g_vc, vc, nc, REL_ELEM, "attention_decode vcache");
  /* the last step again (it rewrites the same cache rows): same bits */
  float *first = dgetf(d_out, C, s);
  RP_CHECK(rp_cuda_gpt_attention_decode(d_qkv, d_kc, d_vc, d_out, d_scr,
                                        dev ? T + 5 : P - 1, T, C, NH,
                                        dev ? dargs : NULL, s));
  float *again = dgetf(d_out, C, s);
  same_bits(first, again, C, "attention_decode out");
  free(kc), free(vc), free(out), free(scr), free(g_kc), free(g_vc);
  free(first), free(again);
  void *bufs[] = {d_kc, d_vc, d_qkv, d_out, d_scr, dargs};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
}

Test(gpt_kernels_gpu, attention_decode_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  check_decode(40, 64, 4, 40, 0, 500, s); /* hs 16, positions past a warp */
  check_decode(12, 48, 3, 7, 1, 510, s);  /* pos from dev_args */
  check_decode(5, 600, 2, 5, 0, 520, s);  /* hs 300 > the block */
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(gpt_kernels_gpu, attention_decode_reads_pos_in_a_graph) {
  need_gpu();
  void *s = new_stream();
  const int T = 6, C = 8, NH = 2;
  size_t nc = (size_t)T * C;
  float *kc = kr_random(nc, 530, -1, 1), *vc = kr_random(nc, 531, -1, 1);
  float *qkv = kr_random(3 * (size_t)C, 532, -1, 1);
  float *out = kr_alloc(C), *scr = kr_alloc((size_t)NH * T);
  float *d_kc = dput(kc, nc * 4), *d_vc = dput(vc, nc * 4);
  float *d_qkv = dput(qkv, 3 * (size_t)C * 4), *d_out = dput(NULL, C * 4);
  float *d_scr = dput(NULL, (size_t)NH * T * 4);
  rp_gpt_decode_args args = {.pos = 4, .T = T, .C = C, .NH = NH};
  void *dargs = dput(&args, sizeof args);
  RP_CHECK(rp_cpu_gpt_attention_decode(qkv, kc, vc, out, scr, 4, T, C, NH));
  RP_CHECK(rp_cuda_capture_begin(s));
  RP_CHECK(rp_cuda_gpt_attention_decode(d_qkv, d_kc, d_vc, d_out, d_scr, 1, T,
                                        C, NH, dargs, s));
  RP_CHECK(rp_cuda_capture_end_launch(s, 1));
  float *got = dgetf(d_out, C, s), *g_kc = dgetf(d_kc, nc, s);
  close_max(got, out, C, REL_RED, "captured decode out");
  close_max(g_kc, kc, nc, REL_ELEM, "captured decode kcache");
  /* pos out of range: NaN output, caches untouched */
  args.pos = T;
  RP_CHECK(rp_cuda_buf_put(dargs, &args, sizeof args));
  RP_CHECK(rp_cuda_gpt_attention_decode(d_qkv, d_kc, d_vc, d_out, d_scr, 1, T,
                                        C, NH, dargs, s));
  free(got);
  got = dgetf(d_out, C, s);
  float *g_kc2 = dgetf(d_kc, nc, s);
  for (int c = 0; c < C; c++)
    cr_assert(isnan(got[c]), "pos out of range: out[%d] = %g", c, got[c]);
  same_bits(g_kc, g_kc2, nc, "kcache after a refused pos");
  free(kc), free(vc), free(qkv), free(out), free(scr), free(got), free(g_kc);
  free(g_kc2);
  void *bufs[] = {d_kc, d_vc, d_qkv, d_out, d_scr, dargs};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* Cross-entropy */

static void check_xent(int N, int V, float norm, int grad, uint32_t seed,
                       void *s) {
  size_t n = (size_t)N * V;
  float *x0 = kr_random(n, seed, -4, 4), *x = fdup(x0, n);
  int32_t *tgt = tokens_random(N, V, seed + 1);
  float *losses = kr_alloc(N), loss = 0;
  RP_CHECK(rp_cpu_gpt_xent(x, tgt, losses, &loss, N, V, norm, grad));
  float *d_x = dput(NULL, n * 4), *d_losses = dput(NULL, (size_t)N * 4);
  float *d_loss = dput(NULL, 4);
  int32_t *d_tgt = dput(tgt, (size_t)N * 4);
  float *g[3], *a[3];
  for (int run = 0; run < 2; run++) {
    float **o = run ? a : g;
    RP_CHECK(rp_cuda_buf_put(d_x, x0, n * 4));
    RP_CHECK(
        rp_cuda_gpt_xent(d_x, d_tgt, d_losses, d_loss, N, V, norm, grad, s));
    o[0] = dgetf(d_x, n, s), o[1] = dgetf(d_losses, N, s);
    o[2] = dgetf(d_loss, 1, s);
  }
  /* dlogits: p / norm, each within REL_RED of itself (close_max's shared
   * floor let the many small ones be far off), but at the target, whose
   * (p - 1) / norm cancels when p is near 1: within REL_RED of the
   * largest */
  double big = max_abs(x, n);
  for (int r = 0; r < N; r++)
    for (int c = 0; c < V; c++) {
      size_t i = (size_t)r * V + c;
      kr_close_f(&g[0][i], &x[i], 1, REL_RED, grad && c == tgt[r] ? big : 1e-30,
                 0, grad ? "xent dlogits" : "xent logits kept");
    }
  close_max(g[1], losses, N, REL_RED, "xent losses");
  close_max(g[2], &loss, 1, REL_RED, "xent loss");
  same_bits(g[0], a[0], n, "xent logits");
  same_bits(g[1], a[1], N, "xent losses");
  same_bits(g[2], a[2], 1, "xent loss");
  for (int i = 0; i < 3; i++)
    free(g[i]), free(a[i]);
  /* a bad target: NaN in that row's loss (and gradient), and in loss[0] */
  tgt[N / 2] = -1;
  RP_CHECK(rp_cuda_buf_put(d_tgt, tgt, (size_t)N * 4));
  RP_CHECK(rp_cuda_buf_put(d_x, x0, n * 4));
  RP_CHECK(rp_cuda_gpt_xent(d_x, d_tgt, d_losses, d_loss, N, V, norm, grad, s));
  float *gl = dgetf(d_losses, N, s), *gx = dgetf(d_x, n, s), l1 = 0;
  dget(&l1, d_loss, 4, s);
  cr_assert(isnan(gl[N / 2]) && isnan(l1), "bad target: loss %g, row %g", l1,
            gl[N / 2]);
  if (grad)
    for (int c = 0; c < V; c++)
      cr_assert(isnan(gx[(size_t)(N / 2) * V + c]), "bad target: dlogit %d", c);
  free(gl), free(gx);
  free(x0), free(x), free(tgt), free(losses);
  rp_cuda_buf_free(d_x), rp_cuda_buf_free(d_losses), rp_cuda_buf_free(d_loss);
  rp_cuda_buf_free(d_tgt);
}

Test(gpt_kernels_gpu, xent_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  check_xent(7, 11, 0.0f, 1, 600, s);      /* 64 threads a row, norm = N */
  check_xent(7, 11, 0.0f, 0, 610, s);      /* no gradient: logits kept */
  check_xent(5, 300, 16.0f, 1, 620, s);    /* 256 threads, a global norm */
  check_xent(3, 5000, 0.0f, 1, 630, s);    /* 1024 threads */
  check_xent(300, 65, 1024.0f, 1, 640, s); /* many rows */
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* AdamW */

#define ADAM_COUNT 70 /* more than one launch's chunk of 64 tensors */

/* Three steps of AdamW over ADAM_COUNT tensors on both backends (device
 * copies of the same state); dev: lr and step from a device copy of the
 * args, with wrong by-value ones, the update captured into a graph. */
static void check_adamw(float max_norm, int dev, void *s) {
  rp_gpt_adamw_args a = kr_adamw_args(1e-2f, 1, max_norm, ADAM_COUNT);
  float *w[ADAM_COUNT], *g[ADAM_COUNT], *m[ADAM_COUNT], *v[ADAM_COUNT];
  float *dw[ADAM_COUNT], *dg[ADAM_COUNT], *dm[ADAM_COUNT], *dv[ADAM_COUNT];
  size_t n[ADAM_COUNT];
  for (int i = 0; i < ADAM_COUNT; i++) {
    n[i] = i == 3 ? 0 : i == 7 ? 100003 : (size_t)(i * 37 % 500 + 1);
    a.decay[i] = (uint8_t)(i % 3 != 0);
    w[i] = kr_random(n[i], 700 + (uint32_t)i, -1, 1);
    g[i] = kr_random(n[i], 800 + (uint32_t)i, -1, 1);
    m[i] = kr_random(n[i], 900 + (uint32_t)i, -0.01f, 0.01f);
    v[i] = kr_random(n[i], 1000 + (uint32_t)i, 0, 0.001f);
    dw[i] = dput(w[i], n[i] * 4), dg[i] = dput(g[i], n[i] * 4);
    dm[i] = dput(m[i], n[i] * 4), dv[i] = dput(v[i], n[i] * 4);
  }
  float stats[ADAM_COUNT + 1], gstats[ADAM_COUNT + 1];
  float *dstats = dput(NULL, sizeof stats);
  void *dargs = dput(&a, sizeof a);
  for (int step = 1; step <= 3; step++) {
    a.step = step;
    a.lr = 1e-2f / (float)step;
    rp_cpu_gpt_adamw(w, (const float *const *)g, m, v, n, stats, NULL, &a);
    if (dev) {
      RP_CHECK(rp_cuda_buf_put(dargs, &a, sizeof a));
      rp_gpt_adamw_args wrong = a;
      wrong.lr = 5.0f, wrong.step = 40;
      RP_CHECK(rp_cuda_capture_begin(s));
      RP_CHECK(rp_cuda_gpt_adamw(dw, (const float *const *)dg, dm, dv, n,
                                 dstats, NULL, &wrong, dargs, s));
      RP_CHECK(rp_cuda_capture_end_launch(s, 1));
    } else {
      RP_CHECK(rp_cuda_gpt_adamw(dw, (const float *const *)dg, dm, dv, n,
                                 dstats, NULL, &a, NULL, s));
    }
  }
  dget(gstats, dstats, sizeof gstats, s);
  /* the norm and each tensor's sum of squares (f64 on both sides) */
  close_each(gstats, stats, ADAM_COUNT + 1, REL_RED, 0, "adamw stats");
  cr_assert(gstats[0] > 0.0f && (max_norm <= 0.0f || gstats[0] > max_norm),
            "norm %g: the test means to clip", gstats[0]);
  for (int i = 0; i < ADAM_COUNT; i++) {
    if (n[i] == 0)
      continue;
    float *gw = dgetf(dw[i], n[i], s), *gm = dgetf(dm[i], n[i], s);
    float *gv = dgetf(dv[i], n[i], s);
    close_max(gw, w[i], n[i], REL_ELEM, "adamw w");
    close_max(gm, m[i], n[i], REL_ELEM, "adamw m");
    close_max(gv, v[i], n[i], REL_ELEM, "adamw v");
    free(gw), free(gm), free(gv);
  }
  /* determinism: one more step from the same state, twice */
  float *w7 = dgetf(dw[7], n[7], s), *m7 = dgetf(dm[7], n[7], s);
  float *v7 = dgetf(dv[7], n[7], s), *r1 = NULL;
  a.step = 4;
  for (int run = 0; run < 2; run++) {
    RP_CHECK(rp_cuda_buf_put(dw[7], w7, n[7] * 4));
    RP_CHECK(rp_cuda_buf_put(dm[7], m7, n[7] * 4));
    RP_CHECK(rp_cuda_buf_put(dv[7], v7, n[7] * 4));
    RP_CHECK(rp_cuda_gpt_adamw(dw, (const float *const *)dg, dm, dv, n, dstats,
                               NULL, &a, NULL, s));
    float *r = dgetf(dw[7], n[7], s);
    if (run) {
      same_bits(r1, r, n[7], "adamw w (tensor 7)");
      free(r);
    } else {
      r1 = r;
    }
  }
  free(w7), free(m7), free(v7), free(r1);
  for (int i = 0; i < ADAM_COUNT; i++) {
    free(w[i]), free(g[i]), free(m[i]), free(v[i]);
    rp_cuda_buf_free(dw[i]), rp_cuda_buf_free(dg[i]);
    rp_cuda_buf_free(dm[i]), rp_cuda_buf_free(dv[i]);
  }
  rp_cuda_buf_free(dstats), rp_cuda_buf_free(dargs);
}

Test(gpt_kernels_gpu, adamw_matches_cpu_with_and_without_clipping) {
  need_gpu();
  void *s = new_stream();
  check_adamw(0.0f, 0, s);
  check_adamw(1.0f, 0, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(gpt_kernels_gpu, adamw_reads_lr_and_step_in_a_graph) {
  need_gpu();
  RP_CHECK(rp_cuda_blas_init(0));
  void *s = new_stream();
  check_adamw(1.0f, 1, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* A NaN gradient norm makes every weight NaN on the GPU too (the CPU's
 * rule: torch's clamp keeps the NaN). */
Test(gpt_kernels_gpu, adamw_nan_norm_makes_every_weight_nan) {
  need_gpu();
  void *s = new_stream();
  float w0[3] = {0.5f, -1.0f, 2.0f}, w1[2] = {0.25f, -0.75f};
  float g0[3] = {NAN, 0.5f, 0.0f}, g1[2] = {0.5f, 1.0f}, z[3] = {0};
  size_t n[2] = {3, 2};
  float *dw[2] = {dput(w0, sizeof w0), dput(w1, sizeof w1)};
  float *dg[2] = {dput(g0, sizeof g0), dput(g1, sizeof g1)};
  float *dm[2] = {dput(z, 12), dput(z, 8)}, *dv[2] = {dput(z, 12), dput(z, 8)};
  float *dstats = dput(NULL, 3 * sizeof(float));
  rp_gpt_adamw_args a = kr_adamw_args(0.1f, 1, 1.0f, 2);
  a.decay[0] = 1;
  RP_CHECK(rp_cuda_gpt_adamw(dw, (const float *const *)dg, dm, dv, n, dstats,
                             NULL, &a, NULL, s));
  for (int t = 0; t < 2; t++) {
    float *gw = dgetf(dw[t], n[t], s);
    for (size_t i = 0; i < n[t]; i++)
      cr_assert(isnan(gw[i]), "tensor %d element %zu took a step: %g", t, i,
                gw[i]);
    free(gw);
    rp_cuda_buf_free(dw[t]), rp_cuda_buf_free(dg[t]);
    rp_cuda_buf_free(dm[t]), rp_cuda_buf_free(dv[t]);
  }
  rp_cuda_buf_free(dstats);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* Sharded: ADAM_COUNT tensors as two shares (the first 35, the rest):
 * gpt.sumsq on each share into one element of sq each, then gpt.adamw on
 * each share with norm_parts 2, on both backends; both shares compute the
 * same norm bit for bit. */
Test(gpt_kernels_gpu, adamw_over_shares_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  enum { HALF = 35 };
  rp_gpt_adamw_args a = kr_adamw_args(1e-2f, 2, 1.0f, 0);
  a.norm_parts = 2;
  float *w[ADAM_COUNT], *g[ADAM_COUNT], *m[ADAM_COUNT], *v[ADAM_COUNT];
  float *dw[ADAM_COUNT], *dg[ADAM_COUNT], *dm[ADAM_COUNT], *dv[ADAM_COUNT];
  size_t n[ADAM_COUNT];
  for (int i = 0; i < ADAM_COUNT; i++) {
    n[i] = i == 40 ? 100003 : (size_t)(i * 37 % 500 + 1);
    w[i] = kr_random(n[i], 1700 + (uint32_t)i, -1, 1);
    g[i] = kr_random(n[i], 1800 + (uint32_t)i, -1, 1);
    m[i] = kr_random(n[i], 1900 + (uint32_t)i, -0.01f, 0.01f);
    v[i] = kr_random(n[i], 2000 + (uint32_t)i, 0, 0.001f);
    dw[i] = dput(w[i], n[i] * 4), dg[i] = dput(g[i], n[i] * 4);
    dm[i] = dput(m[i], n[i] * 4), dv[i] = dput(v[i], n[i] * 4);
  }
  float sq[2], each[ADAM_COUNT], gsq[2], geach[ADAM_COUNT];
  float stats[2][ADAM_COUNT + 1], gst[2][ADAM_COUNT + 1];
  float *dsq = dput(NULL, sizeof sq), *deach = dput(NULL, sizeof each);
  float *dst[2] = {dput(NULL, sizeof stats[0]), dput(NULL, sizeof stats[0])};
  int base[2] = {0, HALF}, cnt[2] = {HALF, ADAM_COUNT - HALF};
  for (int j = 0; j < 2; j++) {
    rp_cpu_gpt_sumsq((const float *const *)g + base[j], n + base[j], cnt[j],
                     &sq[j], each + base[j]);
    RP_CHECK(rp_cuda_gpt_sumsq((const float *const *)dg + base[j], n + base[j],
                               cnt[j], dsq + j, deach + base[j], s));
  }
  for (int j = 0; j < 2; j++) {
    rp_gpt_adamw_args aj = a;
    aj.count = cnt[j];
    for (int i = 0; i < cnt[j]; i++)
      aj.decay[i] = (uint8_t)((base[j] + i) % 3 != 0);
    int b = base[j];
    rp_cpu_gpt_adamw(w + b, (const float *const *)g + b, m + b, v + b, n + b,
                     stats[j], sq, &aj);
    RP_CHECK(rp_cuda_gpt_adamw(dw + b, (const float *const *)dg + b, dm + b,
                               dv + b, n + b, dst[j], dsq, &aj, NULL, s));
  }
  dget(gsq, dsq, sizeof gsq, s);
  dget(geach, deach, sizeof geach, s);
  close_each(gsq, sq, 2, REL_RED, 0, "sumsq sq");
  close_each(geach, each, ADAM_COUNT, REL_RED, 0, "sumsq each");
  for (int j = 0; j < 2; j++)
    dget(gst[j], dst[j], sizeof gst[j], s);
  same_bits(&gst[0][0], &gst[1][0], 1, "the shares' norms");
  close_each(&gst[0][0], &stats[0][0], 1, REL_RED, 0, "sharded norm");
  cr_assert(gst[0][0] > a.max_norm, "norm %g: the test means to clip",
            gst[0][0]);
  for (int i = 0; i < ADAM_COUNT; i++) {
    float *gw = dgetf(dw[i], n[i], s), *gm = dgetf(dm[i], n[i], s);
    float *gv = dgetf(dv[i], n[i], s);
    close_max(gw, w[i], n[i], REL_ELEM, "sharded adamw w");
    close_max(gm, m[i], n[i], REL_ELEM, "sharded adamw m");
    close_max(gv, v[i], n[i], REL_ELEM, "sharded adamw v");
    free(gw), free(gm), free(gv);
    free(w[i]), free(g[i]), free(m[i]), free(v[i]);
    rp_cuda_buf_free(dw[i]), rp_cuda_buf_free(dg[i]);
    rp_cuda_buf_free(dm[i]), rp_cuda_buf_free(dv[i]);
  }
  rp_cuda_buf_free(dsq), rp_cuda_buf_free(deach);
  rp_cuda_buf_free(dst[0]), rp_cuda_buf_free(dst[1]);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* The sums of squares split a tensor into parts by its length alone
 * (kernels/adamw.cu): blocks of one launch on a stream with a scratch
 * slice, one block a tensor part after part on the legacy stream, which
 * has none; the same bits either way, near the CPU's. Sizes: empty, under
 * one part, 4 parts, and past the most parts (each part longer). */
Test(gpt_kernels_gpu, sumsq_same_bits_with_and_without_scratch) {
  need_gpu();
  void *s = new_stream();
  void *ws = NULL, *none = NULL;
  size_t ws_bytes = 0, none_bytes = 0;
  RP_CHECK(rp_cuda_stream_scratch(s, &ws, &ws_bytes));
  RP_CHECK(rp_cuda_stream_scratch(NULL, &none, &none_bytes));
  cr_assert(ws != NULL && none == NULL,
            "a new stream has a scratch slice, the legacy stream none");
  enum { COUNT = 5 };
  size_t n[COUNT] = {0, 1000, 100003, 64 * 32768 + 4099, 7};
  float *g[COUNT], *dg[COUNT];
  for (int i = 0; i < COUNT; i++) {
    g[i] = kr_random(n[i], 2100 + (uint32_t)i, -1, 1);
    dg[i] = dput(g[i], n[i] * 4);
  }
  float sq, each[COUNT], got[2][COUNT + 1];
  rp_cpu_gpt_sumsq((const float *const *)g, n, COUNT, &sq, each);
  float *d_out[2] = {dput(NULL, (COUNT + 1) * 4), dput(NULL, (COUNT + 1) * 4)};
  void *streams[2] = {s, NULL};
  for (int j = 0; j < 2; j++) {
    RP_CHECK(rp_cuda_gpt_sumsq((const float *const *)dg, n, COUNT, d_out[j],
                               d_out[j] + 1, streams[j]));
    dget(got[j], d_out[j], sizeof got[j], streams[j]);
  }
  same_bits(got[0], got[1], COUNT + 1, "sumsq with and without scratch");
  close_each(got[0], &sq, 1, REL_RED, 0, "sumsq total");
  close_each(got[0] + 1, each, COUNT, REL_RED, 0, "sumsq each");
  for (int i = 0; i < COUNT; i++)
    free(g[i]), rp_cuda_buf_free(dg[i]);
  rp_cuda_buf_free(d_out[0]), rp_cuda_buf_free(d_out[1]);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* GEMM launchers recorded into a graph (cuBLAS state created beforehand)
 * give the eager results; attention through the path `mode`. */
static void check_capture(const char *mode) {
  set_attn(mode);
  void *s = new_stream();
  const int B = 2, T = 9, C = 16, NH = 2;
  size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
  float *x = kr_random(n, 1100, -1, 1);
  float *W = kr_random(3 * (size_t)C * C, 1101, -1, 1);
  float *bias = kr_random(3 * (size_t)C, 1102, -1, 1);
  float *d_x = dput(x, n * 4), *d_W = dput(W, 3 * (size_t)C * C * 4);
  float *d_b = dput(bias, 3 * (size_t)C * 4), *d_qkv = dput(NULL, 3 * n * 4);
  float *d_qkvr = dput(NULL, 3 * n * 4), *d_att = dput(NULL, na * 4);
  float *d_out = dput(NULL, n * 4), *d_scr = dput(NULL, 4 * n * 4);
  float *d_dqkv = dput(NULL, 3 * n * 4), *d_datt = dput(NULL, na * 4);
  float *eager[3], *graph[3];
  float *poison = kr_random(3 * n, 1103, 5, 6);
  for (int run = 0; run < 2; run++) {
    if (run) { /* the graph must rewrite every output */
      RP_CHECK(rp_cuda_buf_put(d_qkv, poison, 3 * n * 4));
      RP_CHECK(rp_cuda_buf_put(d_out, poison, n * 4));
      RP_CHECK(rp_cuda_buf_put(d_dqkv, poison, 3 * n * 4));
      RP_CHECK(rp_cuda_capture_begin(s));
    }
    RP_CHECK(rp_cuda_gpt_matmul_fwd(d_x, d_W, d_b, d_qkv, B * T, C, 3 * C, s));
    RP_CHECK(rp_cuda_gpt_attention_fwd(d_qkv, d_qkvr, d_att, d_out, d_scr, B, T,
                                       C, NH, s));
    /* the forward's output stands in for the gradient from above */
    RP_CHECK(rp_cuda_gpt_attention_bwd(d_out, d_qkvr, d_att, d_dqkv, d_datt,
                                       d_scr, B, T, C, NH, s));
    if (run)
      RP_CHECK(rp_cuda_capture_end_launch(s, 2));
    float **o = run ? graph : eager;
    o[0] = dgetf(d_qkv, 3 * n, s), o[1] = dgetf(d_out, n, s);
    o[2] = dgetf(d_dqkv, 3 * n, s);
  }
  unset_attn();
  char what[3][64];
  const char *names[] = {"matmul_fwd", "attention_fwd", "attention_bwd"};
  size_t sizes[] = {3 * n, n, 3 * n};
  for (int i = 0; i < 3; i++) {
    snprintf(what[i], sizeof what[i], "captured %s (%s)", names[i], mode);
    same_bits(eager[i], graph[i], sizes[i], what[i]);
    free(eager[i]), free(graph[i]);
  }
  free(x), free(W), free(bias), free(poison);
  void *bufs[] = {d_x,   d_W,   d_b,   d_qkv,  d_qkvr,
                  d_att, d_out, d_scr, d_dqkv, d_datt};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(gpt_kernels_gpu, gemm_launchers_are_capture_safe) {
  need_gpu();
  RP_CHECK(rp_cuda_blas_init(0));
  check_capture("fused");
  check_capture("gemm");
  check_capture("direct");
}

#else /* !REPRISE_HAVE_CUDA */

Test(gpt_kernels_gpu, skipped_without_cuda) {
  cr_skip_test("built without the CUDA toolkit: no GPT CUDA kernels to test");
}

#endif
