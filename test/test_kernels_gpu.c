/* test/test_kernels_gpu.c (label gpu) — every CUDA kernel of
 * kernels/cuda_kernels.cuh against the CPU kernel (the reference backend),
 * on the same small and odd shapes as test_kernels.c. Skips with the reason
 * when the build has no CUDA or no device answers.
 *
 * Tolerances (relative, to max(|cpu value|, a magnitude floor)):
 *  - elementwise (relu, bias_add, fill, scale, axpy, axpby, sgd, xent_bwd
 *    from the same probs): 1e-5 — the kernels do the same f32 operations,
 *    with FMA contraction disabled where it matters;
 *  - gemm: 1e-4 of the largest |C| (cuBLAS sums in another order);
 *  - softmax probs and loss: 1e-4 (device expf differs by a few ulp, other
 *    summation order); bias_grad: 1e-4 of the column's sum of |dy|.
 * Reductions must also be deterministic: two runs give the same bits. */
#include "helpers.h"

#ifdef REPRISE_HAVE_CUDA

#include "kernels_ref.h"

#include "engine/engine.h"
#include "kernels/cpu_kernels.h"
#include "kernels/cuda_kernels.cuh"
#include "kernels/tasks.h"

#include <math.h>
#include <string.h>

static void need_gpu(void) {
  th_need_gpu();
}

static void *dev_copy(const void *host, size_t bytes) {
  void *d = NULL;
  RP_CHECK(rp_cuda_buf_alloc(&d, bytes));
  if (host)
    RP_CHECK(rp_cuda_buf_put(d, host, bytes));
  return d;
}

/* Synchronizes the stream, then copies a device buffer back. */
static void fetch(void *host, const void *dev, size_t bytes, void *stream) {
  RP_CHECK(rp_cuda_stream_sync(stream));
  RP_CHECK(rp_cuda_buf_get(host, dev, bytes));
}

static void *new_stream(void) {
  void *s = NULL;
  RP_CHECK(rp_cuda_stream_create(&s));
  return s;
}

/* ---------------------------------------------------------------------- */
/* Elementwise */

Test(kernels_gpu, elementwise_kernels_match_cpu) {
  need_gpu();
  void *s = new_stream();
  for (size_t sh = 0; sh < KR_NSHAPES; sh++) {
    size_t rows = kr_shapes[sh][0], cols = kr_shapes[sh][1], n = rows * cols;
    size_t fb = n * sizeof(float);
    float *x = kr_random(n, 1 + (uint32_t)sh, -1, 1);
    float *y = kr_random(n, 2, -1, 1), *b = kr_random(cols, 3, -1, 1);
    float *v = kr_random(n, 4, -1, 1), *got = kr_alloc(n);
    float *dx = dev_copy(x, fb), *dy = dev_copy(y, fb);
    float *db = dev_copy(b, cols * sizeof(float)), *dout = dev_copy(NULL, fb);

    rp_cpu_relu_fwd(x, v, n); /* v: CPU result scratch from here on */
    RP_CHECK(rp_cuda_relu_fwd(dx, dout, n, s));
    fetch(got, dout, fb, s);
    kr_close_f(got, v, n, 1e-5, 0, 0, "relu_fwd");
    rp_cpu_relu_bwd(x, y, v, n);
    RP_CHECK(rp_cuda_relu_bwd(dx, dy, dout, n, s));
    fetch(got, dout, fb, s);
    kr_close_f(got, v, n, 1e-5, 0, 0, "relu_bwd");

    memcpy(v, x, fb);
    rp_cpu_bias_add(v, b, rows, cols);
    RP_CHECK(rp_cuda_bias_add(dx, db, rows, cols, s));
    fetch(got, dx, fb, s);
    kr_close_f(got, v, n, 1e-5, 0, 0, "bias_add");

    rp_cpu_axpy(0.75f, v, y, n); /* y += 0.75 (x + b) on both sides */
    RP_CHECK(rp_cuda_axpy(0.75f, dx, dy, n, s));
    fetch(got, dy, fb, s);
    kr_close_f(got, y, n, 1e-5, 1e-6, 0, "axpy");
    rp_cpu_axpby(-0.5f, v, 1.25f, y, n); /* y = 1.25 y - 0.5 (x + b) */
    RP_CHECK(rp_cuda_axpby(-0.5f, dx, 1.25f, dy, n, s));
    fetch(got, dy, fb, s);
    kr_close_f(got, y, n, 1e-5, 1e-6, 0, "axpby");
    rp_cpu_scale(y, -1.5f, n);
    RP_CHECK(rp_cuda_scale(dy, -1.5f, n, s));
    fetch(got, dy, fb, s);
    kr_close_f(got, y, n, 1e-5, 1e-6, 0, "scale");
    RP_CHECK(rp_cuda_fill(dy, 0.125f, n, s));
    fetch(got, dy, fb, s);
    for (size_t i = 0; i < n; i++)
      cr_assert_eq(got[i], 0.125f, "fill[%zu]", i);
    free(x), free(y), free(b), free(v), free(got);
    rp_cuda_buf_free(dx), rp_cuda_buf_free(dy), rp_cuda_buf_free(db);
    rp_cuda_buf_free(dout);
  }
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(kernels_gpu, sgd_momentum_matches_cpu_over_steps) {
  need_gpu();
  void *s = new_stream();
  const size_t n = 64 * 33 + 1;
  size_t fb = n * sizeof(float);
  float *w = kr_random(n, 11, -1, 1), *g = kr_random(n, 12, -1, 1);
  float *v = kr_alloc(n), *got = kr_alloc(n);
  rp_cpu_fill(v, 0.0f, n);
  float *dw = dev_copy(w, fb), *dg = dev_copy(g, fb), *dv = dev_copy(v, fb);
  for (int t = 0; t < 5; t++) {
    rp_cpu_sgd_momentum(w, g, v, n, 0.05f, 0.9f);
    RP_CHECK(rp_cuda_sgd_momentum(dw, dg, dv, n, 0.05f, 0.9f, NULL, s));
  }
  fetch(got, dw, fb, s);
  kr_close_f(got, w, n, 1e-5, 1e-3, 0, "sgd w");
  fetch(got, dv, fb, s);
  kr_close_f(got, v, n, 1e-5, 1e-3, 0, "sgd v");
  free(w), free(g), free(v), free(got);
  rp_cuda_buf_free(dw), rp_cuda_buf_free(dg), rp_cuda_buf_free(dv);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* Reductions: bias_grad, xent, accuracy */

Test(kernels_gpu, bias_grad_matches_cpu_and_is_deterministic) {
  need_gpu();
  void *s = new_stream();
  static const size_t extra[][2] = {{1000, 3}, {5, 100}, {0, 7}};
  for (size_t sh = 0; sh < KR_NSHAPES + KR_LEN(extra); sh++) {
    const size_t *shape =
        sh < KR_NSHAPES ? kr_shapes[sh] : extra[sh - KR_NSHAPES];
    size_t rows = shape[0], cols = shape[1], n = rows * cols;
    float *dy = kr_random(n, 21 + (uint32_t)sh, -1, 1);
    float *want = kr_alloc(cols), *got = kr_alloc(cols),
          *again = kr_alloc(cols);
    rp_cpu_bias_grad(dy, want, rows, cols);
    double floor = 1e-6;
    for (size_t c = 0; c < cols; c++) {
      double mag = 0;
      for (size_t r = 0; r < rows; r++)
        mag += fabs(dy[r * cols + c]);
      floor = mag > floor ? mag : floor;
    }
    float *ddy = dev_copy(dy, n * sizeof(float));
    float *ddb = dev_copy(want, cols * sizeof(float)); /* overwritten */
    RP_CHECK(rp_cuda_bias_grad(ddy, ddb, rows, cols, s));
    fetch(got, ddb, cols * sizeof(float), s);
    RP_CHECK(rp_cuda_bias_grad(ddy, ddb, rows, cols, s));
    fetch(again, ddb, cols * sizeof(float), s);
    kr_close_f(got, want, cols, 1e-4, floor, 0, "bias_grad");
    cr_assert(memcmp(got, again, cols * sizeof(float)) == 0,
              "bias_grad %zux%zu not deterministic", rows, cols);
    free(dy), free(want), free(got), free(again);
    rp_cuda_buf_free(ddy), rp_cuda_buf_free(ddb);
  }
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* One xent case, with and without row-loss scratch. */
static void check_xent(const float *x, const int32_t *lab, size_t rows,
                       size_t cols, void *s) {
  size_t n = rows * cols, fb = n * sizeof(float);
  float *p = kr_alloc(n), *d = kr_alloc(n), *got = kr_alloc(n), loss = 0;
  rp_cpu_xent_fwd(x, lab, p, 0, rows, cols, (float)rows, &loss);
  rp_cpu_xent_bwd(p, lab, d, 0, rows, cols, (float)rows);
  float *dx = dev_copy(x, fb), *dp = dev_copy(NULL, fb);
  int32_t *dl = dev_copy(lab, rows * sizeof(int32_t));
  float *scratch = dev_copy(NULL, rows * sizeof(float));
  float *dloss = dev_copy(NULL, sizeof(float)), gl[3];
  for (int pass = 0; pass < 3; pass++) { /* scratch, scratch again, none */
    RP_CHECK(rp_cuda_xent_fwd(dx, dl, dp, pass < 2 ? scratch : NULL, dloss,
                              rows, cols, (float)rows, s));
    fetch(&gl[pass], dloss, sizeof(float), s);
    cr_assert(fabsf(gl[pass] - loss) <= 1e-4f * fabsf(loss) + 1e-7f,
              "%zux%zu pass %d: loss %.9g, cpu %.9g", rows, cols, pass,
              gl[pass], loss);
  }
  cr_assert(memcmp(&gl[0], &gl[1], sizeof(float)) == 0,
            "loss not deterministic");
  fetch(got, dp, fb, s);
  kr_close_f(got, p, n, 1e-4, 0, 1e-12, "xent probs");
  /* Backward from the CPU probs: the same f32 operations. */
  RP_CHECK(rp_cuda_buf_put(dp, p, fb));
  RP_CHECK(rp_cuda_xent_bwd(dp, dl, dx, rows, cols, (float)rows, s));
  fetch(got, dx, fb, s);
  kr_close_f(got, d, n, 1e-5, 0, 1e-12, "xent_bwd");
  free(p), free(d), free(got);
  rp_cuda_buf_free(dx), rp_cuda_buf_free(dp), rp_cuda_buf_free(dl);
  rp_cuda_buf_free(scratch), rp_cuda_buf_free(dloss);
}

Test(kernels_gpu, xent_matches_cpu_with_and_without_scratch) {
  need_gpu();
  void *s = new_stream();
  static const size_t extra[][2] = {{1000, 10}, {7, 1000}};
  for (size_t sh = 0; sh < KR_NSHAPES + KR_LEN(extra); sh++) {
    const size_t *shape =
        sh < KR_NSHAPES ? kr_shapes[sh] : extra[sh - KR_NSHAPES];
    size_t rows = shape[0], cols = shape[1];
    float *x = kr_random(rows * cols, 31 + (uint32_t)sh, -8, 8);
    int32_t *lab = kr_labels(rows, cols, 32 + (uint32_t)sh);
    check_xent(x, lab, rows, cols, s);
    free(x), free(lab);
  }
  float big[9] = {1000, -1000, 0, -1000, -1000, -1000, 1000, 1000, -1000};
  int32_t blab[3] = {1, 2, 0};
  check_xent(big, blab, 3, 3, s);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(kernels_gpu, xent_bad_label_gives_nan_not_a_fault) {
  need_gpu();
  void *s = new_stream();
  float x[6] = {1, 2, 3, 4, 5, 6}, loss = 0, d[6];
  int32_t lab[2] = {0, 7};
  float *dx = dev_copy(x, sizeof x), *dp = dev_copy(NULL, sizeof x);
  int32_t *dl = dev_copy(lab, sizeof lab);
  float *dloss = dev_copy(NULL, sizeof(float));
  RP_CHECK(rp_cuda_xent_fwd(dx, dl, dp, NULL, dloss, 2, 3, 2.0f, s));
  fetch(&loss, dloss, sizeof loss, s);
  cr_assert(isnan(loss), "loss %g", loss);
  RP_CHECK(rp_cuda_xent_bwd(dp, dl, dx, 2, 3, 2.0f, s));
  fetch(d, dx, sizeof d, s);
  cr_assert(!isnan(d[0]) && isnan(d[3]) && isnan(d[5]));
  rp_cuda_buf_free(dx), rp_cuda_buf_free(dp), rp_cuda_buf_free(dl);
  rp_cuda_buf_free(dloss);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(kernels_gpu, argmax_correct_matches_cpu) {
  need_gpu();
  void *s = new_stream();
  for (size_t sh = 0; sh < KR_NSHAPES; sh++) {
    size_t rows = kr_shapes[sh][0], cols = kr_shapes[sh][1], n = rows * cols;
    float *x = kr_random(n, 41 + (uint32_t)sh, -1, 1);
    for (size_t i = 0; i < n; i += 3) /* ties: coarse values */
      x[i] = roundf(x[i] * 2);
    int32_t *lab = kr_labels(rows, cols, 42);
    for (size_t r = 0; r < rows; r += 2) { /* even rows: the right label */
      size_t best = 0;
      for (size_t c = 1; c < cols; c++)
        best = x[r * cols + c] > x[r * cols + best] ? c : best;
      lab[r] = (int32_t)best;
    }
    int32_t want = (int32_t)rp_cpu_argmax_correct(x, lab, rows, cols), got = -1;
    float *dx = dev_copy(x, n * sizeof(float));
    int32_t *dl = dev_copy(lab, rows * sizeof(int32_t));
    int32_t *dc = dev_copy(NULL, sizeof(int32_t));
    RP_CHECK(rp_cuda_argmax_correct(dx, dl, dc, rows, cols, s));
    fetch(&got, dc, sizeof got, s);
    cr_assert_eq(got, want, "%zux%zu: %d correct, cpu %d", rows, cols, got,
                 want);
    free(x), free(lab);
    rp_cuda_buf_free(dx), rp_cuda_buf_free(dl), rp_cuda_buf_free(dc);
  }
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* GEMM */

static void check_gemm(int ta, int tb, size_t m, size_t n, size_t k,
                       float alpha, float beta, void *s) {
  float *a = kr_random(m * k, 51, -1, 1), *b = kr_random(k * n, 52, -1, 1);
  float *c = kr_random(m * n, 53, -1, 1), *got = kr_alloc(m * n);
  float *da = dev_copy(a, m * k * sizeof(float));
  float *db = dev_copy(b, k * n * sizeof(float));
  float *dc = dev_copy(c, m * n * sizeof(float));
  rp_cpu_gemm(ta, tb, (int)m, (int)n, (int)k, alpha, a, b, beta, c);
  RP_CHECK(
      rp_cuda_gemm(ta, tb, (int)m, (int)n, (int)k, alpha, da, db, beta, dc, s));
  fetch(got, dc, m * n * sizeof(float), s);
  double cmax = 1e-3;
  for (size_t i = 0; i < m * n; i++)
    cmax = fabs(c[i]) > cmax ? fabs(c[i]) : cmax;
  char what[96];
  snprintf(what, sizeof what, "gemm ta=%d tb=%d %zux%zux%zu", ta, tb, m, n, k);
  kr_close_f(got, c, m * n, 1e-4, cmax, 0, what);
  free(a), free(b), free(c), free(got);
  rp_cuda_buf_free(da), rp_cuda_buf_free(db), rp_cuda_buf_free(dc);
}

Test(kernels_gpu, gemm_matches_cpu_for_all_transposes_and_odd_shapes) {
  need_gpu();
  RP_CHECK(rp_cuda_blas_init(0));
  void *s = new_stream();
  static const size_t ks[] = {1, 13, 257};
  for (size_t sh = 0; sh < KR_NSHAPES; sh++)
    for (size_t kk = 0; kk < KR_LEN(ks); kk++)
      for (int t = 0; t < 4; t++) {
        size_t m = kr_shapes[sh][0], n = kr_shapes[sh][1];
        check_gemm(t & 1, t >> 1, m, n, ks[kk], 1.0f, 0.0f, s);
        check_gemm(t & 1, t >> 1, n, m, ks[kk], 0.5f, -2.0f, s);
      }
  check_gemm(0, 0, 4, 5, 0, 1.0f, 3.0f, s); /* k == 0: C = beta C */
  RP_CHECK(rp_cuda_stream_destroy(s));
  rp_cuda_blas_shutdown();
}

/* More streams than the first workspace slices: the extra ones get slices
 * of their own and must be right (and the legacy stream too). */
Test(kernels_gpu, gemm_on_more_streams_than_workspace_slices) {
  need_gpu();
  enum { NS = RP_CUBLAS_WS_SLOTS + 3 };
  void *ss[NS];
  for (int i = 0; i < NS; i++)
    ss[i] = new_stream();
  for (int i = 0; i < NS; i++)
    check_gemm(i & 1, 0, 64, 33, 17, 1.0f, 0.0f, ss[i]);
  check_gemm(0, 1, 17, 13, 5, 1.0f, 1.0f, NULL);
  for (int i = 0; i < NS; i++)
    RP_CHECK(rp_cuda_stream_destroy(ss[i]));
  rp_cuda_blas_shutdown();
}

/* The workspace slice's size: 32 MiB on compute capability 9 (Hopper), 4
 * MiB on the others, or REPRISE_CUBLAS_WS_MIB MiB on any; any other value
 * is refused naming the variable. Reads the environment only: runs without
 * a device. */
Test(kernels_gpu, cublas_workspace_size_from_the_environment) {
  size_t b = 0;
  unsetenv("REPRISE_CUBLAS_WS_MIB");
  const int major[] = {7, 8, 9, 10, 12};
  const size_t want[] = {4, 4, 32, 4, 4};
  for (size_t i = 0; i < sizeof major / sizeof *major; i++) {
    RP_CHECK(rp_cuda_blas_ws_bytes(major[i], &b));
    cr_assert_eq(b, want[i] << 20, "compute capability %d: %zu bytes", major[i],
                 b);
  }
  cr_assert_eq(RP_CUBLAS_WS_BYTES, (size_t)4 << 20);
  cr_assert_eq(RP_CUBLAS_WS_BYTES_HOPPER, (size_t)32 << 20);
  setenv("REPRISE_CUBLAS_WS_MIB", "32", 1);
  RP_CHECK(rp_cuda_blas_ws_bytes(8, &b));
  cr_assert_eq(b, (size_t)32 << 20);
  setenv("REPRISE_CUBLAS_WS_MIB", "4", 1);
  RP_CHECK(rp_cuda_blas_ws_bytes(9, &b));
  cr_assert_eq(b, (size_t)4 << 20);
  static const char *bad[] = {
      "0", "1025", "-4", "4x", "x", " 8", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("REPRISE_CUBLAS_WS_MIB", bad[i], 1);
    cr_assert_eq(rp_cuda_blas_ws_bytes(9, &b), RP_EINVAL, "%s", bad[i]);
    cr_assert(strstr(rp_error_detail(), "REPRISE_CUBLAS_WS_MIB"), "%s",
              rp_error_detail());
  }
  unsetenv("REPRISE_CUBLAS_WS_MIB");
}

/* cuBLAS picks its algorithm by the workspace it is given, so a GEMM long
 * in k (split-K where a workspace allows) computes the same bits on every
 * stream: on streams made and destroyed over and over (their slices come
 * back), on more streams at once than the first slices, and on a stream
 * whose GEMM was captured into a graph. */
Test(kernels_gpu, gemm_bits_do_not_depend_on_the_stream) {
  need_gpu();
  RP_CHECK(rp_cuda_blas_init(0));
  enum { NS = 3 * RP_CUBLAS_WS_SLOTS, M = 64, N = 48, K = 1 << 15 };
  float *a = kr_random((size_t)M * K, 71, -1, 1);
  float *b = kr_random((size_t)K * N, 72, -1, 1);
  float *da = dev_copy(a, (size_t)M * K * 4),
        *db = dev_copy(b, (size_t)K * N * 4);
  float *dc = dev_copy(NULL, (size_t)M * N * 4);
  float *ref = kr_alloc((size_t)M * N), *got = kr_alloc((size_t)M * N);
  void *s0 = new_stream();
  RP_CHECK(rp_cuda_gemm(0, 0, M, N, K, 1.0f, da, db, 0.0f, dc, s0));
  fetch(ref, dc, (size_t)M * N * 4, s0);
  RP_CHECK(rp_cuda_stream_destroy(s0));
  for (int round = 0; round < 3; round++) { /* made and destroyed: reused */
    void *ss[NS];
    for (int i = 0; i < NS; i++)
      ss[i] = new_stream();
    for (int i = 0; i < NS; i++) {
      RP_CHECK(rp_cuda_fill(dc, 0.0f, (size_t)M * N, ss[i]));
      if (i == 5) { /* captured, then launched */
        RP_CHECK(rp_cuda_capture_begin(ss[i]));
        RP_CHECK(rp_cuda_gemm(0, 0, M, N, K, 1.0f, da, db, 0.0f, dc, ss[i]));
        RP_CHECK(rp_cuda_capture_end_launch(ss[i], 1));
      } else {
        RP_CHECK(rp_cuda_gemm(0, 0, M, N, K, 1.0f, da, db, 0.0f, dc, ss[i]));
      }
      fetch(got, dc, (size_t)M * N * 4, ss[i]);
      cr_assert(!memcmp(got, ref, (size_t)M * N * 4),
                "round %d, stream %d: the GEMM's bits differ", round, i);
    }
    for (int i = 0; i < NS; i++)
      RP_CHECK(rp_cuda_stream_destroy(ss[i]));
  }
  free(a), free(b), free(ref), free(got);
  rp_cuda_buf_free(da), rp_cuda_buf_free(db), rp_cuda_buf_free(dc);
  rp_cuda_blas_shutdown();
}

/* The point of the up-front cuBLAS setup: GEMM, elementwise and loss kernels
 * recorded into one CUDA graph (global capture mode: any allocation fails
 * it) replay correctly. A learning rate in device memory changed between
 * launches reaches the captured SGD kernel. */
Test(kernels_gpu, launchers_are_capture_safe_and_replay) {
  need_gpu();
  RP_CHECK(rp_cuda_blas_init(0));
  void *s = new_stream();
  const int m = 17, n = 13, k = 33;
  size_t mn = (size_t)m * n;
  float *a = kr_random((size_t)m * k, 61, -1, 1);
  float *b = kr_random((size_t)k * n, 62, -1, 1);
  int32_t *lab = kr_labels(m, n, 63);
  float *h = kr_alloc(mn), *p = kr_alloc(mn), *got = kr_alloc(mn), loss = 0;
  rp_cpu_gemm(0, 0, m, n, k, 1.0f, a, b, 0.0f, h);
  rp_cpu_relu_fwd(h, h, mn);
  rp_cpu_xent_fwd(h, lab, p, 0, m, n, (float)m, &loss);
  float *da = dev_copy(a, (size_t)m * k * 4),
        *db = dev_copy(b, (size_t)k * n * 4);
  float *dh = dev_copy(NULL, mn * 4), *dp = dev_copy(NULL, mn * 4);
  int32_t *dl = dev_copy(lab, (size_t)m * 4);
  float *dloss = dev_copy(NULL, 4), *drow = dev_copy(NULL, (size_t)m * 4);
  float one = 1.0f, w0 = 0.0f, lr = 0.5f;
  float *dw = dev_copy(&w0, 4), *dg = dev_copy(&one, 4), *dv = dev_copy(&w0, 4);
  float *dlr = dev_copy(&lr, 4);
  RP_CHECK(rp_cuda_capture_begin(s));
  RP_CHECK(rp_cuda_gemm(0, 0, m, n, k, 1.0f, da, db, 0.0f, dh, s));
  RP_CHECK(rp_cuda_relu_fwd(dh, dh, mn, s));
  RP_CHECK(rp_cuda_xent_fwd(dh, dl, dp, drow, dloss, m, n, (float)m, s));
  RP_CHECK(rp_cuda_sgd_momentum(dw, dg, dv, 1, 99.0f, 0.0f, dlr, s));
  RP_CHECK(rp_cuda_capture_end_launch(s, 2)); /* w = -0.5 - 0.5 */
  lr = 2.0f;
  RP_CHECK(rp_cuda_buf_put(dlr, &lr, 4));
  RP_CHECK(rp_cuda_capture_begin(s));
  RP_CHECK(rp_cuda_sgd_momentum(dw, dg, dv, 1, 99.0f, 0.0f, dlr, s));
  RP_CHECK(rp_cuda_capture_end_launch(s, 1)); /* w = -1 - 2 */
  float w = 0, gl = 0;
  fetch(&w, dw, 4, s);
  cr_assert_eq(w, -3.0f, "w = %g: the device learning rate was not used", w);
  fetch(got, dp, mn * 4, s);
  kr_close_f(got, p, mn, 1e-4, 0, 1e-12, "captured probs");
  fetch(&gl, dloss, 4, s);
  cr_assert(fabsf(gl - loss) <= 1e-4f * loss, "captured loss %g, cpu %g", gl,
            loss);
  free(a), free(b), free(lab), free(h), free(p), free(got);
  void *bufs[] = {da, db, dh, dp, dl, dloss, drow, dw, dg, dv, dlr};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
  RP_CHECK(rp_cuda_stream_destroy(s));
  rp_cuda_blas_shutdown();
}

/* ---------------------------------------------------------------------- */
/* GPU task variants with hand-built contexts (device pointers). */

static rp_instance_info dinst(void *p, rp_dtype dt, int64_t rows,
                              int64_t cols) {
  rp_instance_info in;
  memset(&in, 0, sizeof in);
  in.dtype = dt;
  in.rect = rp_rect_2d(0, rows - 1, 0, cols - 1);
  in.strides[0] = cols;
  in.strides[1] = 1;
  in.bytes = (size_t)(rows * cols) * rp_dtype_size(dt);
  in.ptr = p;
  return in;
}

static rp_task_ctx gpu_ctx(void *stream, const void *args, size_t size,
                           const rp_instance_info *insts, uint32_t n) {
  rp_task_ctx c;
  memset(&c, 0, sizeof c);
  c.kind = RP_PROC_GPU;
  c.shards = 1;
  c.stream = stream;
  c.args = args;
  c.args_size = size;
  c.naccess = n;
  c.insts = insts;
  c.replay = UINT64_MAX;
  return c;
}

Test(kernels_gpu, gemm_xent_sgd_tasks_match_cpu_tasks) {
  need_gpu();
  void *s = new_stream();
  const int m = 64, n = 33, k = 13;
  size_t mn = (size_t)m * n;
  float *a = kr_random((size_t)m * k, 71, -1, 1);
  float *b = kr_random((size_t)n * k, 72, -1, 1);
  float *c = kr_alloc(mn), *got = kr_alloc(mn), *p = kr_alloc(mn);
  int32_t *lab = kr_labels(m, n, 73);
  float *da = dev_copy(a, (size_t)m * k * 4),
        *db = dev_copy(b, (size_t)n * k * 4);
  float *dc = dev_copy(NULL, mn * 4), *dp = dev_copy(NULL, mn * 4);
  int32_t *dl = dev_copy(lab, (size_t)m * 4);
  float *dloss = dev_copy(NULL, 4), *ws = dev_copy(NULL, (size_t)m * 4);
  rp_gemm_args ga = {.m = m, .n = n, .k = k, .trans_b = 1, .alpha = 1.0f};
  rp_instance_info hin[3] = {dinst(a, RP_F32, m, k), dinst(b, RP_F32, n, k),
                             dinst(c, RP_F32, m, n)};
  rp_instance_info din[3] = {dinst(da, RP_F32, m, k), dinst(db, RP_F32, n, k),
                             dinst(dc, RP_F32, m, n)};
  rp_task_ctx hc = gpu_ctx(NULL, &ga, sizeof ga, hin, 3);
  hc.kind = RP_PROC_CPU;
  rp_task_ctx dcx = gpu_ctx(s, &ga, sizeof ga, din, 3);
  RP_CHECK(rp_task_gemm_cpu(&hc));
  RP_CHECK(rp_task_gemm_gpu(&dcx));
  fetch(got, dc, mn * 4, s);
  kr_close_f(got, c, mn, 1e-4, 1.0, 0, "gemm task");
  din[2] = dinst(dc, RP_F32, m, n - 1);
  RP_EXPECT(rp_task_gemm_gpu(&dcx), RP_ESHAPE);

  rp_xent_args xa = {.rows = m, .cols = n, .norm = (float)m};
  float loss = 0, gl = 0;
  rp_instance_info hx[4] = {dinst(c, RP_F32, m, n), dinst(lab, RP_I32, m, 1),
                            dinst(p, RP_F32, m, n), dinst(&loss, RP_F32, 1, 1)};
  rp_instance_info dx[4] = {dinst(dc, RP_F32, m, n), dinst(dl, RP_I32, m, 1),
                            dinst(dp, RP_F32, m, n),
                            dinst(dloss, RP_F32, 1, 1)};
  rp_task_ctx hxc = gpu_ctx(NULL, &xa, sizeof xa, hx, 4);
  rp_task_ctx dxc = gpu_ctx(s, &xa, sizeof xa, dx, 4);
  dxc.workspace = ws;
  dxc.workspace_bytes = (size_t)m * 4;
  RP_CHECK(rp_task_xent_fwd_cpu(&hxc));
  RP_CHECK(rp_task_xent_fwd_gpu(&dxc));
  fetch(&gl, dloss, 4, s);
  cr_assert(fabsf(gl - loss) <= 1e-4f * loss, "xent task loss %g, cpu %g", gl,
            loss);

  /* rp.sgd: W = C, G = probs, V = 0 on both sides (GPU inputs are the
   * GPU's own gemm/xent results, hence the 1e-4). */
  rp_sgd_args sa = {.lr = 0.1f, .momentum = 0.9f, .n = 0};
  float *v = kr_alloc(mn), *dv = dev_copy(NULL, mn * 4);
  rp_cpu_fill(v, 0.0f, mn);
  RP_CHECK(rp_cuda_buf_put(dv, v, mn * 4));
  rp_instance_info hs[3] = {dinst(c, RP_F32, m, n), dinst(p, RP_F32, m, n),
                            dinst(v, RP_F32, m, n)};
  rp_instance_info ds[3] = {dinst(dc, RP_F32, m, n), dinst(dp, RP_F32, m, n),
                            dinst(dv, RP_F32, m, n)};
  rp_task_ctx hsc = gpu_ctx(NULL, &sa, sizeof sa, hs, 3);
  rp_task_ctx dsc = gpu_ctx(s, &sa, sizeof sa, ds, 3);
  RP_CHECK(rp_task_sgd_cpu(&hsc));
  RP_CHECK(rp_task_sgd_gpu(&dsc));
  fetch(got, dc, mn * 4, s);
  kr_close_f(got, c, mn, 1e-4, 1.0, 0, "sgd task");
  ds[2] = dinst(ws, RP_F32, 1, m); /* V holds only m floats */
  RP_EXPECT(rp_task_sgd_gpu(&dsc), RP_ESHAPE);
  free(v);
  rp_cuda_buf_free(dv);
  free(a), free(b), free(c), free(got), free(p), free(lab);
  void *bufs[] = {da, db, dc, dp, dl, dloss, ws};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
  RP_CHECK(rp_cuda_stream_destroy(s));
  rp_cuda_blas_shutdown();
}

/* relu keeps a NaN on the GPU as on the CPU (the forward and the fused
 * bias + relu), zeroes -0 and -inf, passes +inf. */
Test(kernels_gpu, relu_keeps_nan_as_the_cpu) {
  need_gpu();
  void *s = new_stream();
  float x[4] = {NAN, -0.0f, -INFINITY, INFINITY}, got[4];
  float *dx = dev_copy(x, sizeof x), *dout = dev_copy(NULL, sizeof x);
  RP_CHECK(rp_cuda_relu_fwd(dx, dout, 4, s));
  fetch(got, dout, sizeof got, s);
  cr_assert(isnan(got[0]), "relu(NaN) = %g", (double)got[0]);
  cr_assert(got[1] == 0.0f && !signbit(got[1]) && got[2] == 0.0f &&
            got[3] == INFINITY);
  float z[4] = {NAN, 1.0f, -2.0f, 0.0f}, b[2] = {0.5f, 0.5f};
  float *dz = dev_copy(z, sizeof z), *db = dev_copy(b, sizeof b);
  RP_CHECK(rp_cuda_bias_act(dz, db, dout, 2, 2, s));
  fetch(got, dout, sizeof got, s);
  cr_assert(isnan(got[0]), "bias_act kept NaN: %g", (double)got[0]);
  cr_assert(got[1] == 1.5f && got[2] == 0.0f && got[3] == 0.5f);
  void *bufs[] = {dx, dout, dz, db};
  for (size_t i = 0; i < KR_LEN(bufs); i++)
    rp_cuda_buf_free(bufs[i]);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* ---------------------------------------------------------------------- */
/* Fused kernels and tasks against their CPU variants (tolerances in
 * cuda_kernels.cuh: bias_act, sgd_multi equal to 1e-5; relu_bwd_bias's dz
 * equal and db 1e-4; softmax_xent 1e-4), and against the unfused GPU
 * kernels where those are the same operations (bitwise). */

Test(kernels_gpu, bias_act_and_relu_bwd_bias_match_cpu_and_unfused_gpu) {
  need_gpu();
  void *s = new_stream();
  for (size_t sh = 0; sh < KR_NSHAPES; sh++) {
    size_t rows = kr_shapes[sh][0], cols = kr_shapes[sh][1], n = rows * cols;
    size_t fb = n * sizeof(float), cb = cols * sizeof(float);
    float *z = kr_random(n, 401 + (uint32_t)sh, -2, 2);
    float *b = kr_random(cols, 402, -1, 1), *da = kr_random(n, 403, -2, 2);
    float *a = kr_alloc(n), *got = kr_alloc(n), *got2 = kr_alloc(n);
    float *dbh = kr_alloc(cols), *gdb = kr_alloc(cols), *gdb2 = kr_alloc(cols);
    float *dz = dev_copy(z, fb), *dz2 = dev_copy(z, fb);
    float *dbias = dev_copy(b, cb), *dda = dev_copy(da, fb);
    float *dact = dev_copy(NULL, fb), *dact2 = dev_copy(NULL, fb);
    float *ddb = dev_copy(NULL, cb), *ddb2 = dev_copy(NULL, cb);
    rp_cpu_bias_act(z, b, a, rows, cols);
    RP_CHECK(rp_cuda_bias_act(dz, dbias, dact, rows, cols, s));
    RP_CHECK(rp_cuda_bias_add(dz2, dbias, rows, cols, s));
    RP_CHECK(rp_cuda_relu_fwd(dz2, dact2, n, s));
    fetch(got, dact, fb, s);
    fetch(got2, dact2, fb, s);
    kr_close_f(got, a, n, 1e-5, 0, 0, "bias_act a");
    cr_assert(memcmp(got, got2, fb) == 0, "bias_act vs bias_add + relu");
    fetch(got, dz, fb, s);
    kr_close_f(got, z, n, 1e-5, 0, 0, "bias_act z");

    /* relu_bwd_bias over (a, da): dz into dz2's buffer */
    float *dzh = kr_alloc(n);
    rp_cpu_relu_bwd_bias_grad(a, da, dzh, dbh, rows, cols);
    RP_CHECK(rp_cuda_relu_bwd_bias_grad(dact, dda, dz2, ddb, rows, cols, s));
    RP_CHECK(rp_cuda_relu_bwd(dact, dda, dz, n, s));
    RP_CHECK(rp_cuda_bias_grad(dz, ddb2, rows, cols, s));
    fetch(got, dz2, fb, s);
    kr_close_f(got, dzh, n, 1e-5, 0, 0, "relu_bwd_bias dz");
    fetch(gdb, ddb, cb, s);
    fetch(gdb2, ddb2, cb, s);
    kr_close_f(gdb, dbh, cols, 1e-4, 1.0, 0, "relu_bwd_bias db");
    cr_assert(memcmp(gdb, gdb2, cb) == 0, "relu_bwd_bias vs unfused db");
    free(z), free(b), free(da), free(a), free(got), free(got2), free(dbh);
    free(gdb), free(gdb2), free(dzh);
    void *bufs[] = {dz, dz2, dbias, dda, dact, dact2, ddb, ddb2};
    for (size_t i = 0; i < KR_LEN(bufs); i++)
      rp_cuda_buf_free(bufs[i]);
  }
  RP_CHECK(rp_cuda_stream_destroy(s));
}

Test(kernels_gpu, softmax_xent_matches_cpu_and_is_deterministic) {
  need_gpu();
  void *s = new_stream();
  static const size_t extra[][2] = {{256, 3}, {1000, 70}, {0, 4}};
  for (size_t sh = 0; sh < KR_NSHAPES + KR_LEN(extra); sh++) {
    const size_t *shape =
        sh < KR_NSHAPES ? kr_shapes[sh] : extra[sh - KR_NSHAPES];
    size_t rows = shape[0], cols = shape[1], n = rows * cols;
    size_t fb = (n ? n : 1) * sizeof(float), cb = cols * sizeof(float);
    float *x = kr_random(n, 411 + (uint32_t)sh, -6, 6);
    int32_t *lab = kr_labels(rows, cols, 412);
    float *d = kr_alloc(n), *db = kr_alloc(cols), *got = kr_alloc(n);
    float *gdb = kr_alloc(cols), *gdb2 = kr_alloc(cols);
    float loss = 0, gl = 0, gl2 = 0, norm = (float)(rows ? rows : 1);
    float *dx = dev_copy(x, fb), *dd = dev_copy(NULL, fb);
    int32_t *dl = dev_copy(lab, (rows ? rows : 1) * 4);
    float *ddb = dev_copy(NULL, cb), *dloss = dev_copy(NULL, 4);
    rp_cpu_softmax_xent(x, lab, d, db, rows, cols, norm, &loss);
    RP_CHECK(rp_cuda_softmax_xent(dx, dl, dd, ddb, dloss, rows, cols, norm, s));
    fetch(got, dd, n * sizeof(float), s);
    fetch(gdb, ddb, cb, s);
    fetch(&gl, dloss, 4, s);
    kr_close_f(got, d, n, 1e-4, 1.0 / norm, 0, "softmax_xent dlogits");
    kr_close_f(gdb, db, cols, 1e-4, 1.0, 0, "softmax_xent db");
    cr_assert(fabsf(gl - loss) <= 1e-4f * fabsf(loss) + 1e-7f,
              "%zux%zu: loss %g, cpu %g", rows, cols, gl, loss);
    RP_CHECK(rp_cuda_softmax_xent(dx, dl, dd, ddb, dloss, rows, cols, norm, s));
    fetch(gdb2, ddb, cb, s);
    fetch(&gl2, dloss, 4, s);
    cr_assert(memcmp(gdb, gdb2, cb) == 0 && gl == gl2, "not deterministic");
    free(x), free(lab), free(d), free(db), free(got), free(gdb), free(gdb2);
    void *bufs[] = {dx, dd, dl, ddb, dloss};
    for (size_t i = 0; i < KR_LEN(bufs); i++)
      rp_cuda_buf_free(bufs[i]);
  }
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* rp.sgd_multi's GPU variant against its CPU variant, with lr by value
 * (eager) and then from a device args buffer (as inside an exec). */
Test(kernels_gpu, sgd_multi_task_matches_cpu_with_device_lr) {
  need_gpu();
  void *s = new_stream();
  static const int64_t rows[3] = {64, 1, 33}, cols[3] = {64, 64, 3};
  float *w[3], *g[3], *v[3], *dw[3], *dg[3], *dv[3];
  rp_instance_info hin[9], din[9];
  for (int t = 0; t < 3; t++) {
    size_t n = (size_t)(rows[t] * cols[t]), fb = n * sizeof(float);
    w[t] = kr_random(n, 421 + t, -1, 1);
    g[t] = kr_random(n, 431 + t, -1, 1);
    v[t] = kr_random(n, 441 + t, -1, 1);
    dw[t] = dev_copy(w[t], fb), dg[t] = dev_copy(g[t], fb);
    dv[t] = dev_copy(v[t], fb);
    float *h[3] = {w[t], g[t], v[t]}, *dd[3] = {dw[t], dg[t], dv[t]};
    for (int i = 0; i < 3; i++) {
      hin[3 * t + i] = dinst(h[i], RP_F32, rows[t], cols[t]);
      din[3 * t + i] = dinst(dd[i], RP_F32, rows[t], cols[t]);
    }
  }
  rp_sgd_multi_args a = {.lr = 0.05f, .momentum = 0.9f, .count = 3};
  rp_task_ctx hc = gpu_ctx(NULL, &a, sizeof a, hin, 9);
  hc.kind = RP_PROC_CPU;
  rp_task_ctx dc = gpu_ctx(s, &a, sizeof a, din, 9);
  RP_CHECK(rp_task_sgd_multi_cpu(&hc));
  RP_CHECK(rp_task_sgd_multi_gpu(&dc));
  /* the device args say lr 0.2; the by-value args still 0.05 */
  rp_sgd_multi_args dev = {.lr = 0.2f, .momentum = 0.9f, .count = 3};
  void *dargs = dev_copy(&dev, sizeof dev);
  dc.dev_args = dargs;
  RP_CHECK(rp_task_sgd_multi_gpu(&dc));
  a.lr = 0.2f;
  RP_CHECK(rp_task_sgd_multi_cpu(&hc));
  for (int t = 0; t < 3; t++) {
    size_t n = (size_t)(rows[t] * cols[t]);
    float *got = kr_alloc(n);
    fetch(got, dw[t], n * sizeof(float), s);
    kr_close_f(got, w[t], n, 1e-5, 1e-3, 0, "sgd_multi w");
    fetch(got, dv[t], n * sizeof(float), s);
    kr_close_f(got, v[t], n, 1e-5, 1e-3, 0, "sgd_multi v");
    free(got);
  }
  dc.dev_args = NULL;
  a.count = 0;
  RP_EXPECT(rp_task_sgd_multi_gpu(&dc), RP_EINVAL);
  rp_cuda_buf_free(dargs);
  for (int t = 0; t < 3; t++) {
    free(w[t]), free(g[t]), free(v[t]);
    rp_cuda_buf_free(dw[t]), rp_cuda_buf_free(dg[t]), rp_cuda_buf_free(dv[t]);
  }
  RP_CHECK(rp_cuda_stream_destroy(s));
}

/* rp.gather_rows's GPU variant: the by-value index eagerly, the device
 * index when there are device args, and nothing copied for an index out
 * of range; also under stream capture (a graph replayed with a new index
 * in the device buffer copies the new batch). */
Test(kernels_gpu, gather_rows_reads_the_index_on_the_device) {
  need_gpu();
  void *s = new_stream();
  int32_t src[6 * 2], fill[4] = {-7, -7, -7, -7}, got[4];
  for (int i = 0; i < 12; i++)
    src[i] = 100 + i;
  void *dsrc = dev_copy(src, sizeof src), *ddst = dev_copy(fill, sizeof fill);
  rp_instance_info in[2] = {dinst(dsrc, RP_I32, 6, 2),
                            dinst(ddst, RP_I32, 2, 2)};
  rp_gather_args a = {.index = 1, .rows = 2, .cols = 2};
  rp_task_ctx c = gpu_ctx(s, &a, sizeof a, in, 2);
  RP_CHECK(rp_task_gather_rows_gpu(&c));
  fetch(got, ddst, sizeof got, s);
  for (int j = 0; j < 4; j++)
    cr_assert_eq(got[j], 104 + j, "by value: elem %d = %d", j, got[j]);
  rp_gather_args dev = a;
  dev.index = 2;
  void *dargs = dev_copy(&dev, sizeof dev);
  c.dev_args = dargs;
  RP_CHECK(rp_cuda_capture_begin(s));
  RP_CHECK(rp_task_gather_rows_gpu(&c));
  RP_CHECK(rp_cuda_capture_end_launch(s, 1));
  fetch(got, ddst, sizeof got, s);
  for (int j = 0; j < 4; j++)
    cr_assert_eq(got[j], 108 + j, "device index: elem %d = %d", j, got[j]);
  dev.index = 3; /* beyond the 3 batches: the kernel copies nothing */
  RP_CHECK(rp_cuda_buf_put(dargs, &dev, sizeof dev));
  RP_CHECK(rp_cuda_buf_put(ddst, fill, sizeof fill));
  RP_CHECK(rp_task_gather_rows_gpu(&c));
  fetch(got, ddst, sizeof got, s);
  for (int j = 0; j < 4; j++)
    cr_assert_eq(got[j], -7, "out of range: elem %d = %d", j, got[j]);
  /* the host-side check rejects the same index */
  c.args = &dev;
  RP_EXPECT(rp_task_gather_rows_check(&c), RP_ERANGE);
  rp_cuda_buf_free(dargs), rp_cuda_buf_free(dsrc), rp_cuda_buf_free(ddst);
  RP_CHECK(rp_cuda_stream_destroy(s));
}

#else /* !REPRISE_HAVE_CUDA */

Test(kernels_gpu, skipped_without_cuda) {
  th_gpu_skip("built without the CUDA toolkit: no CUDA kernels to test");
}

#endif
