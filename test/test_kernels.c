/* test/test_kernels.c — the CPU kernels (kernels/cpu_kernels.h) against
 * plain double-precision references on small and odd shapes, gradient checks
 * by finite differences, SGD against its closed form, and the task wrappers
 * (kernels/tasks.h) called with hand-built task contexts; suite
 * kernel_tasks_backends records a task and replays it on each backend
 * (also built as test_kernels_cuda, label gpu).
 *
 * Tolerances (relative, to max(|expected|, a magnitude floor)):
 *  - elementwise kernels (relu, bias_add, fill, scale, axpy, axpby, sgd):
 *    1e-6, i.e. a few f32 roundings;
 *  - GEMM: 1e-5 of sum_p |a_ip||b_pj| (the f32 dot product error bound for
 *    these k, whatever order BLAS sums in);
 *  - softmax / loss: 1e-5; column sums: 1e-5 of the column's sum of |dy|;
 *  - finite differences (f32 forward evaluations, central differences):
 *    relu 1e-4 absolute (h = 1e-2, points kept 5h away from the kink);
 *    softmax-xent 5e-4 absolute (h = 1e-2; truncation h^2/6 |f'''| and f32
 *    rounding of the loss over 2h are both below 1e-4). */
#include "helpers.h"
#include "kernels_ref.h"

#include "engine/engine.h"
#include "kernels/cpu_kernels.h"
#include "kernels/op_table.h"
#include "kernels/tasks.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* GEMM */

/* Runs one GEMM case against the reference. */
static void check_gemm(int ta, int tb, size_t m, size_t n, size_t k,
                       float alpha, float beta, uint32_t seed) {
  float *a = kr_random(m * k, seed, -1, 1);
  float *b = kr_random(k * n, seed + 1, -1, 1);
  float *c = kr_random(m * n, seed + 2, -1, 1);
  double *want = kr_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  /* Error bound per entry: |alpha| sum_p |a||b| + |beta c|. */
  float *absa = kr_alloc(m * k), *absb = kr_alloc(k * n);
  for (size_t i = 0; i < m * k; i++)
    absa[i] = fabsf(a[i]);
  for (size_t i = 0; i < k * n; i++)
    absb[i] = fabsf(b[i]);
  double *bound = kr_gemm(ta, tb, m, n, k, fabsf(alpha), absa, absb, 0, c);
  rp_cpu_gemm(ta, tb, (int)m, (int)n, (int)k, alpha, a, b, beta, c);
  for (size_t i = 0; i < m * n; i++)
    cr_assert(fabs(c[i] - want[i]) <= 1e-5 * (bound[i] + 1.0),
              "gemm ta=%d tb=%d %zux%zux%zu alpha=%g beta=%g: C[%zu] = %.9g, "
              "expected %.9g",
              ta, tb, m, n, k, alpha, beta, i, c[i], want[i]);
  free(a), free(b), free(c), free(want), free(absa), free(absb), free(bound);
}

Test(kernels, gemm_matches_reference_for_all_transposes_and_odd_shapes) {
  static const size_t ks[] = {1, 7, 13};
  for (size_t s = 0; s < KR_NSHAPES; s++)
    for (size_t kk = 0; kk < KR_LEN(ks); kk++)
      for (int t = 0; t < 4; t++) {
        size_t m = kr_shapes[s][0], n = kr_shapes[s][1];
        check_gemm(t & 1, t >> 1, m, n, ks[kk], 1.0f, 0.0f, 11);
        check_gemm(t & 1, t >> 1, n, m, ks[kk], 0.5f, -2.0f, 23);
      }
}

/* One row (m = 1: every product of the GPT's decode step, which takes a
 * GEMV): every transpose, the decode step's shapes (width 512: qkv, the
 * MLP's two products, the attention's scores and values), alpha and beta;
 * beta 0 never reads C (NaN there stays out of the result). */
Test(kernels, gemm_of_one_row_matches_reference_and_ignores_c_at_beta_0) {
  static const size_t nk[][2] = {{1536, 512}, {2048, 512}, {512, 2048},
                                 {93, 64},    {40, 64},    {64, 40}};
  for (size_t s = 0; s < KR_LEN(nk); s++)
    for (int t = 0; t < 4; t++) {
      check_gemm(t & 1, t >> 1, 1, nk[s][0], nk[s][1], 1.0f, 0.0f, 5);
      check_gemm(t & 1, t >> 1, 1, nk[s][0], nk[s][1], 0.5f, -2.0f, 9);
    }
  float a[3] = {1, 2, 3}, bt[6] = {1, 0, 1, 0, 1, 1}; /* B^T: 2 x 3 */
  float b[6] = {1, 0, 0, 1, 1, 1};                    /* B: 3 x 2 */
  for (int tb = 0; tb < 2; tb++) {
    float c[2] = {NAN, NAN};
    rp_cpu_gemm(0, tb, 1, 2, 3, 1.0f, a, tb ? bt : b, 0.0f, c);
    cr_assert(c[0] == 4.0f && c[1] == 5.0f, "tb %d: C = %g %g", tb,
              (double)c[0], (double)c[1]);
  }
}

Test(kernels, gemm_with_beta_zero_ignores_nan_in_c) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};
  float c[4] = {NAN, NAN, NAN, NAN};
  rp_cpu_gemm(0, 0, 2, 2, 3, 1.0f, a, b, 0.0f, c); /* [2x3] x [3x2] */
  float want[4] = {1 + 3, 2 + 3, 4 + 6, 5 + 6};
  for (int i = 0; i < 4; i++)
    cr_assert_float_eq(c[i], want[i], 0, "C[%d] = %g", i, c[i]);
}

Test(kernels, gemm_with_k_zero_or_alpha_zero_scales_c_by_beta) {
  float c[3] = {1, -2, 4};
  rp_cpu_gemm(0, 0, 1, 3, 0, 1.0f, NULL, NULL, 0.5f, c);
  cr_assert(c[0] == 0.5f && c[1] == -1.0f && c[2] == 2.0f);
  float a[2] = {1, 1}, b[6] = {1, 1, 1, 1, 1, 1};
  rp_cpu_gemm(0, 0, 1, 3, 2, 0.0f, a, b, 0.0f, c);
  cr_assert(c[0] == 0.0f && c[1] == 0.0f && c[2] == 0.0f);
}

/* OpenBLAS runs one thread per call (openblas_set_num_threads(1)): two CPU
 * workers calling it at once must each get their own correct result. */
typedef struct gemm_thread_arg {
  const float *a, *b;
  float *c;
  int m;
} gemm_thread_arg;

static void *gemm_thread(void *p) {
  gemm_thread_arg *g = p;
  for (int rep = 0; rep < 20; rep++)
    rp_cpu_gemm(0, 1, g->m, g->m, g->m, 1.0f, g->a, g->b, 0.0f, g->c);
  return NULL;
}

Test(kernels, gemm_from_two_threads_at_once_matches_serial) {
  const int m = 96;
  size_t mm = (size_t)m * m;
  float *a = kr_random(mm, 5, -1, 1), *b = kr_random(mm, 6, -1, 1);
  float *c1 = kr_alloc(mm), *c2 = kr_alloc(mm), *ref = kr_alloc(mm);
  rp_cpu_gemm(0, 1, m, m, m, 1.0f, a, b, 0.0f, ref);
  gemm_thread_arg g1 = {a, b, c1, m}, g2 = {a, b, c2, m};
  pthread_t t1, t2;
  cr_assert_eq(pthread_create(&t1, NULL, gemm_thread, &g1), 0);
  cr_assert_eq(pthread_create(&t2, NULL, gemm_thread, &g2), 0);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  cr_assert(memcmp(c1, ref, mm * sizeof *ref) == 0, "thread 1 differs");
  cr_assert(memcmp(c2, ref, mm * sizeof *ref) == 0, "thread 2 differs");
  free(a), free(b), free(c1), free(c2), free(ref);
}

/* ---------------------------------------------------------------------- */
/* Bias, ReLU */

Test(kernels, bias_add_and_bias_grad_match_reference) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t rows = kr_shapes[s][0], cols = kr_shapes[s][1], n = rows * cols;
    float *x = kr_random(n, 3 + (uint32_t)s, -2, 2);
    float *bias = kr_random(cols, 4, -1, 1);
    double *want = kr_dalloc(n), *gw = kr_dalloc(cols);
    double floor = 0.0;
    for (size_t i = 0; i < n; i++)
      want[i] = (double)x[i] + bias[i % cols];
    for (size_t c = 0; c < cols; c++) {
      gw[c] = 0.0;
      double mag = 0.0;
      for (size_t r = 0; r < rows; r++) {
        gw[c] += x[r * cols + c];
        mag += fabs(x[r * cols + c]);
      }
      floor = mag > floor ? mag : floor;
    }
    float *db = kr_alloc(cols);
    rp_cpu_bias_grad(x, db, rows, cols);
    kr_close(db, gw, cols, 1e-5, floor, 0, "bias_grad");
    rp_cpu_bias_add(x, bias, rows, cols);
    kr_close(x, want, n, 1e-6, 0, 0, "bias_add");
    free(x), free(bias), free(want), free(gw), free(db);
  }
}

Test(kernels, relu_fwd_and_bwd_match_reference_also_in_place) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t n = kr_shapes[s][0] * kr_shapes[s][1];
    float *x = kr_random(n, 7 + (uint32_t)s, -1, 1);
    float *dy = kr_random(n, 8, -1, 1), *y = kr_alloc(n), *dx = kr_alloc(n);
    x[0] = 0.0f; /* the kink: relu(0) = 0, gradient 0 */
    rp_cpu_relu_fwd(x, y, n);
    rp_cpu_relu_bwd(x, dy, dx, n);
    for (size_t i = 0; i < n; i++) {
      cr_assert_eq(y[i], x[i] > 0 ? x[i] : 0.0f, "relu_fwd[%zu]", i);
      cr_assert_eq(dx[i], x[i] > 0 ? dy[i] : 0.0f, "relu_bwd[%zu]", i);
    }
    rp_cpu_relu_fwd(x, x, n); /* in place */
    cr_assert(memcmp(x, y, n * sizeof *x) == 0, "in-place relu differs");
    free(x), free(dy), free(y), free(dx);
  }
}

/* A NaN stays NaN through relu (as torch.relu), so an overflow upstream
 * reaches the loss instead of turning into a quiet 0; -0 gives +0. */
Test(kernels, relu_keeps_nan_and_zeroes_negative_zero) {
  float x[4] = {NAN, -0.0f, -INFINITY, INFINITY}, y[4];
  rp_cpu_relu_fwd(x, y, 4);
  cr_assert(isnan(y[0]), "relu(NaN) = %g", (double)y[0]);
  cr_assert(y[1] == 0.0f && !signbit(y[1]), "relu(-0) = %g", (double)y[1]);
  cr_assert(y[2] == 0.0f && y[3] == INFINITY);
  float z[4] = {NAN, 1.0f, -2.0f, 0.0f}, b[2] = {0.5f, 0.5f}, a[4];
  rp_cpu_bias_act(z, b, a, 2, 2);
  cr_assert(isnan(a[0]), "bias_act kept NaN: %g", (double)a[0]);
  cr_assert(a[1] == 1.5f && a[2] == 0.0f && a[3] == 0.5f);
}

/* f(x) = sum_i w_i relu(x_i): df/dx_i = w_i [x_i > 0] = relu_bwd(x, w). */
static double relu_objective(const float *x, const float *w, float *tmp,
                             size_t n) {
  rp_cpu_relu_fwd(x, tmp, n);
  double f = 0.0;
  for (size_t i = 0; i < n; i++)
    f += (double)w[i] * tmp[i];
  return f;
}

Test(kernels, relu_bwd_matches_finite_differences) {
  const size_t n = 17 * 13;
  const float h = 1e-2f;
  float *x = kr_random(n, 31, -1, 1), *w = kr_random(n, 32, -1, 1);
  float *g = kr_alloc(n), *tmp = kr_alloc(n);
  for (size_t i = 0; i < n; i++) /* stay 5h away from the kink */
    if (fabsf(x[i]) < 5 * h)
      x[i] = x[i] < 0 ? -5 * h : 5 * h;
  rp_cpu_relu_bwd(x, w, g, n);
  for (size_t i = 0; i < n; i++) {
    float xi = x[i];
    x[i] = xi + h;
    double fp = relu_objective(x, w, tmp, n);
    x[i] = xi - h;
    double fm = relu_objective(x, w, tmp, n);
    x[i] = xi;
    double fd = (fp - fm) / (2.0 * h);
    cr_assert(fabs(fd - g[i]) <= 1e-4, "x[%zu] = %g: fd %.7g, relu_bwd %.7g", i,
              xi, fd, g[i]);
  }
  free(x), free(w), free(g), free(tmp);
}

/* ---------------------------------------------------------------------- */
/* Softmax cross-entropy */

Test(kernels, xent_fwd_matches_reference_and_probs_sum_to_one) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t rows = kr_shapes[s][0], cols = kr_shapes[s][1], n = rows * cols;
    float *x = kr_random(n, 41 + (uint32_t)s, -5, 5), *p = kr_alloc(n);
    int32_t *lab = kr_labels(rows, cols, 42 + (uint32_t)s);
    double *pw = kr_dalloc(n);
    double want = kr_xent(x, lab, rows, cols, pw) / (double)rows;
    float loss = -1;
    int64_t bad = rp_cpu_xent_fwd(x, lab, p, 0, rows, cols, (float)rows, &loss);
    cr_assert_eq(bad, -1);
    cr_assert(fabs(loss - want) <= 1e-5 * fabs(want) + 1e-7,
              "%zux%zu: loss %.9g, expected %.9g", rows, cols, loss, want);
    kr_close(p, pw, n, 1e-5, 0, 1e-9, "probs");
    for (size_t r = 0; r < rows; r++) {
      double sum = 0.0;
      for (size_t c = 0; c < cols; c++)
        sum += p[r * cols + c];
      cr_assert(fabs(sum - 1.0) <= 1e-5, "row %zu sums to %.9g", r, sum);
    }
    free(x), free(p), free(lab), free(pw);
  }
}

Test(kernels, xent_is_stable_for_logits_of_plus_minus_1000) {
  float x[3 * 3] = {1000,  -1000, 0,      /* row 0 */
                    -1000, -1000, -1000,  /* row 1: uniform */
                    1000,  1000,  -1000}; /* row 2: two-way tie */
  int32_t lab[3] = {1, 2, 0};
  float p[9], d[9], loss = 0;
  cr_assert_eq(rp_cpu_xent_fwd(x, lab, p, 0, 3, 3, 1.0f, &loss), -1);
  for (int i = 0; i < 9; i++)
    cr_assert(isfinite(p[i]) && isfinite(loss), "p[%d] = %g loss %g", i, p[i],
              loss);
  /* Row 0: p = (1, 0, 0), loss 2000; row 1: log 3; row 2: log 2. */
  double want = 2000.0 + log(3.0) + log(2.0);
  cr_assert(fabs(loss - want) <= 1e-5 * want, "loss %.9g want %.9g", loss,
            want);
  cr_assert(p[0] == 1.0f && p[1] == 0.0f && p[2] == 0.0f);
  cr_assert(fabsf(p[3] - 1.0f / 3) < 1e-7f && fabsf(p[6] - 0.5f) < 1e-7f);
  cr_assert_eq(rp_cpu_xent_bwd(p, lab, d, 0, 3, 3, 1.0f), -1);
  cr_assert(d[0] == 1.0f && d[1] == -1.0f && d[2] == 0.0f,
            "row 0 grad %g %g %g", d[0], d[1], d[2]);
}

/* Loss of the kernel at x (forward only), for finite differences. */
static double xent_objective(const float *x, const int32_t *lab, float *p,
                             size_t rows, size_t cols) {
  float loss = 0;
  rp_cpu_xent_fwd(x, lab, p, 0, rows, cols, (float)rows, &loss);
  return loss;
}

Test(kernels, xent_bwd_matches_finite_differences) {
  static const size_t shapes[][2] = {{1, 1}, {3, 5}, {17, 13}};
  const float h = 1e-2f;
  for (size_t s = 0; s < KR_LEN(shapes); s++) {
    size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
    float *x = kr_random(n, 51 + (uint32_t)s, -2, 2), *p = kr_alloc(n);
    float *d = kr_alloc(n);
    int32_t *lab = kr_labels(rows, cols, 52);
    xent_objective(x, lab, p, rows, cols);
    cr_assert_eq(rp_cpu_xent_bwd(p, lab, d, 0, rows, cols, (float)rows), -1);
    for (size_t i = 0; i < n; i++) {
      float xi = x[i];
      x[i] = xi + h;
      double fp = xent_objective(x, lab, p, rows, cols);
      x[i] = xi - h;
      double fm = xent_objective(x, lab, p, rows, cols);
      x[i] = xi;
      double fd = (fp - fm) / (2.0 * h);
      cr_assert(fabs(fd - d[i]) <= 5e-4,
                "%zux%zu, logit %zu: fd %.7g, bwd %.7g", rows, cols, i, fd,
                d[i]);
    }
    free(x), free(p), free(d), free(lab);
  }
}

/* Two data-parallel shards dividing by the global batch add up to the
 * one-batch loss, and their gradient rows equal the one-batch gradient. */
Test(kernels, xent_row_range_shards_sum_to_the_full_batch) {
  const size_t rows = 17, cols = 13, n = rows * cols, split = 9;
  float *x = kr_random(n, 61, -3, 3), *p = kr_alloc(n), *ps = kr_alloc(n);
  float *d = kr_alloc(n), *ds = kr_alloc(n);
  int32_t *lab = kr_labels(rows, cols, 62);
  float full = 0, l0 = 0, l1 = 0;
  rp_cpu_xent_fwd(x, lab, p, 0, rows, cols, (float)rows, &full);
  rp_cpu_xent_fwd(x, lab, ps, 0, split, cols, (float)rows, &l0);
  rp_cpu_xent_fwd(x, lab, ps, split, rows, cols, (float)rows, &l1);
  cr_assert(fabsf(l0 + l1 - full) <= 1e-6f * full, "%g + %g != %g", l0, l1,
            full);
  cr_assert(memcmp(p, ps, n * sizeof *p) == 0, "shard probs differ");
  rp_cpu_xent_bwd(p, lab, d, 0, rows, cols, (float)rows);
  rp_cpu_xent_bwd(p, lab, ds, 0, split, cols, (float)rows);
  rp_cpu_xent_bwd(p, lab, ds, split, rows, cols, (float)rows);
  cr_assert(memcmp(d, ds, n * sizeof *d) == 0, "shard gradient differs");
  free(x), free(p), free(ps), free(d), free(ds), free(lab);
}

Test(kernels, xent_reports_the_first_bad_label) {
  float x[6] = {1, 2, 3, 4, 5, 6}, p[6], d[6], loss = 0;
  int32_t lab[2] = {0, 3};
  cr_assert_eq(rp_cpu_xent_fwd(x, lab, p, 0, 2, 3, 2.0f, &loss), 1);
  cr_assert(isnan(loss));
  cr_assert_eq(rp_cpu_xent_bwd(p, lab, d, 0, 2, 3, 2.0f), 1);
  cr_assert(!isnan(d[0]) && isnan(d[3]));
  lab[1] = -1;
  cr_assert_eq(rp_cpu_xent_bwd(p, lab, d, 0, 2, 3, 2.0f), 1);
}

/* ---------------------------------------------------------------------- */
/* SGD, BLAS-1, accuracy */

Test(kernels, sgd_momentum_matches_closed_form_over_steps) {
  const size_t n = 33;
  const float lr = 0.1f, mu = 0.9f;
  float *w = kr_random(n, 71, -1, 1), *g = kr_random(n, 72, -1, 1);
  float *w0 = kr_alloc(n), *v = kr_alloc(n);
  memcpy(w0, w, n * sizeof *w);
  rp_cpu_fill(v, 0.0f, n);
  for (int t = 1; t <= 6; t++) {
    rp_cpu_sgd_momentum(w, g, v, n, lr, mu);
    /* Constant g, v_0 = 0: v_t = g (1 - mu^t) / (1 - mu);
     * w_t = w_0 - lr sum_{s=1..t} v_s
     *     = w_0 - lr g (t - mu (1 - mu^t) / (1 - mu)) / (1 - mu). */
    double mut = pow(mu, t);
    for (size_t i = 0; i < n; i++) {
      double vt = g[i] * (1 - mut) / (1 - mu);
      double wt =
          w0[i] - lr * g[i] * (t - mu * (1 - mut) / (1 - mu)) / (1 - mu);
      cr_assert(fabs(v[i] - vt) <= 1e-5 * (fabs(vt) + 1), "step %d v[%zu]", t,
                i);
      cr_assert(fabs(w[i] - wt) <= 1e-5 * (fabs(wt) + 1),
                "step %d w[%zu] = %.9g, expected %.9g", t, i, w[i], wt);
    }
  }
  free(w), free(g), free(w0), free(v);
}

Test(kernels, fill_scale_axpy_match_reference) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t n = kr_shapes[s][0] * kr_shapes[s][1];
    float *x = kr_random(n, 81 + (uint32_t)s, -1, 1);
    float *y = kr_random(n, 82, -1, 1);
    double *want = kr_dalloc(n);
    for (size_t i = 0; i < n; i++)
      want[i] = (double)y[i] + 0.25 * x[i];
    rp_cpu_axpy(0.25f, x, y, n);
    kr_close(y, want, n, 1e-6, 1e-6, 0, "axpy");
    for (size_t i = 0; i < n; i++)
      want[i] = (double)y[i] * -3.0;
    rp_cpu_scale(y, -3.0f, n);
    kr_close(y, want, n, 1e-6, 0, 0, "scale");
    rp_cpu_fill(y, 2.5f, n);
    for (size_t i = 0; i < n; i++)
      cr_assert_eq(y[i], 2.5f, "fill[%zu]", i);
    free(x), free(y), free(want);
  }
}

Test(kernels, argmax_correct_counts_first_maximum_on_ties) {
  float x[4 * 3] = {0,  5,  1,  /* argmax 1 */
                    2,  2,  1,  /* tie: first, 0 */
                    -1, -3, -1, /* tie: 0 */
                    0,  0,  9}; /* 2 */
  int32_t lab[4] = {1, 1, 0, 2};
  cr_assert_eq(rp_cpu_argmax_correct(x, lab, 4, 3), 3);
  cr_assert_eq(rp_cpu_argmax_correct(x, lab, 0, 3), 0);
  float one = 7;
  int32_t l0 = 0;
  cr_assert_eq(rp_cpu_argmax_correct(&one, &l0, 1, 1), 1);
}

/* ---------------------------------------------------------------------- */
/* Fused kernels against the unfused sequences they replace: bitwise equal,
 * on random (not zero) data, over the odd shapes. */

static void bits_eq(const float *a, const float *b, size_t n, const char *what,
                    size_t rows, size_t cols) {
  cr_assert(memcmp(a, b, n * sizeof *a) == 0, "%s %zux%zu differs", what, rows,
            cols);
}

Test(kernels, bias_act_equals_bias_add_then_relu_bitwise) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t rows = kr_shapes[s][0], cols = kr_shapes[s][1], n = rows * cols;
    float *z = kr_random(n, 201 + (uint32_t)s, -2, 2);
    float *bias = kr_random(cols, 202, -1, 1);
    float *zr = kr_alloc(n), *a = kr_alloc(n), *ar = kr_alloc(n);
    memcpy(zr, z, n * sizeof *z);
    rp_cpu_bias_add(zr, bias, rows, cols);
    rp_cpu_relu_fwd(zr, ar, n);
    float *z2 = kr_alloc(n);
    memcpy(z2, z, n * sizeof *z);
    rp_cpu_bias_act(z, bias, a, rows, cols);
    bits_eq(z, zr, n, "bias_act z", rows, cols);
    bits_eq(a, ar, n, "bias_act a", rows, cols);
    rp_cpu_bias_act(z2, bias, NULL, rows, cols); /* no activation */
    bits_eq(z2, zr, n, "bias_act (none) z", rows, cols);
    free(z), free(bias), free(zr), free(a), free(ar), free(z2);
  }
}

Test(kernels, relu_bwd_bias_grad_equals_relu_bwd_then_bias_grad_bitwise) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t rows = kr_shapes[s][0], cols = kr_shapes[s][1], n = rows * cols;
    float *a = kr_random(n, 211 + (uint32_t)s, -1, 1);
    float *da = kr_random(n, 212 + (uint32_t)s, -3, 3);
    float *dz = kr_alloc(n), *dzr = kr_alloc(n);
    float *db = kr_alloc(cols), *dbr = kr_alloc(cols);
    rp_cpu_relu_bwd(a, da, dzr, n);
    rp_cpu_bias_grad(dzr, dbr, rows, cols);
    rp_cpu_relu_bwd_bias_grad(a, da, dz, db, rows, cols);
    bits_eq(dz, dzr, n, "relu_bwd_bias dz", rows, cols);
    bits_eq(db, dbr, cols, "relu_bwd_bias db", rows, cols);
    rp_cpu_relu_bwd_bias_grad(a, da, da, db, rows, cols); /* dz = da */
    bits_eq(da, dzr, n, "relu_bwd_bias in place", rows, cols);
    free(a), free(da), free(dz), free(dzr), free(db), free(dbr);
  }
}

Test(kernels, softmax_xent_equals_fwd_bwd_and_bias_grad_bitwise) {
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t rows = kr_shapes[s][0], cols = kr_shapes[s][1], n = rows * cols;
    float *x = kr_random(n, 221 + (uint32_t)s, -6, 6);
    int32_t *lab = kr_labels(rows, cols, 222 + (uint32_t)s);
    float *p = kr_alloc(n), *dr = kr_alloc(n), *d = kr_alloc(n);
    float *dbr = kr_alloc(cols), *db = kr_alloc(cols);
    float norm = (float)(2 * rows + 1), lr_ = 0, l = 0, l2 = 0;
    cr_assert_eq(rp_cpu_xent_fwd(x, lab, p, 0, rows, cols, norm, &lr_), -1);
    cr_assert_eq(rp_cpu_xent_bwd(p, lab, dr, 0, rows, cols, norm), -1);
    rp_cpu_bias_grad(dr, dbr, rows, cols);
    cr_assert_eq(rp_cpu_softmax_xent(x, lab, d, db, rows, cols, norm, &l), -1);
    cr_assert(memcmp(&l, &lr_, sizeof l) == 0, "loss %.9g vs %.9g", l, lr_);
    bits_eq(d, dr, n, "softmax_xent dlogits", rows, cols);
    bits_eq(db, dbr, cols, "softmax_xent db", rows, cols);
    cr_assert_eq(rp_cpu_softmax_xent(x, lab, d, NULL, rows, cols, norm, &l2),
                 -1);
    cr_assert(memcmp(&l2, &lr_, sizeof l2) == 0, "loss without db");
    if (rows > 1) { /* a bad label: reported, its row and the loss NaN */
      lab[1] = (int32_t)cols;
      cr_assert_eq(rp_cpu_softmax_xent(x, lab, d, db, rows, cols, norm, &l), 1);
      cr_assert(isnan(l) && isnan(d[cols]), "bad label not NaN");
    }
    free(x), free(lab), free(p), free(dr), free(d), free(dbr), free(db);
  }
}

/* ---------------------------------------------------------------------- */
/* Task wrappers, run with hand-built contexts (struct rp_task_ctx is the
 * engine's; the launch layer builds the same thing). */

/* A dense row-major rows x cols instance over p. */
static rp_instance_info inst2d(void *p, rp_dtype dt, int64_t rows,
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

/* rp_op_prep writes one pointer per access the task may take, a tail
 * access switched off by its `when` field included (as NULL): a cap
 * smaller than that is refused (RP_ESHAPE) before any entry is written,
 * and with room the switched-off entry reads NULL, volume 0. */
typedef struct tail_args {
  int32_t n, bias;
} tail_args;
static const rp_op OP_TAIL = {
    .name = "test.tail",
    RP_OP_ARGS(tail_args),
    .fields = {{"n", RP_OPF(tail_args, n), 0, 1, 64}},
    .head = {{"x", RP_F32, RP_RW, {1, {RP_OPF(tail_args, n)}, 0, 0}, 0, 0, 0}},
    .nhead = 1,
    .tail = {{"b",
              RP_F32,
              RP_READ,
              {1, {RP_OPF(tail_args, n)}, 0, 0},
              RP_OPF(tail_args, bias),
              0,
              0}},
    .ntail = 1,
};

Test(kernel_tasks, op_prep_counts_a_switched_off_tail_in_its_room) {
  float x[4] = {1, 2, 3, 4};
  rp_instance_info in[1] = {inst2d(x, RP_F32, 1, 4)};
  tail_args ta = {.n = 4, .bias = 0};
  rp_task_ctx c = cpu_ctx(&ta, sizeof ta, in, 1);
  cr_assert_eq(rp_op_access_total(&OP_TAIL, &ta), 1);
  void *ptr[3] = {NULL, (void *)x, (void *)x};
  int64_t vol[3] = {-1, -1, -1};
  tail_args got;
  RP_EXPECT(rp_op_prep(&OP_TAIL, &c, &got, ptr, vol, 1), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "test.tail: 2 access slots"), "%s",
            rp_error_detail());
  cr_assert(ptr[0] == NULL && ptr[1] == x && vol[0] == -1 && vol[1] == -1,
            "an entry was written");
  RP_CHECK(rp_op_prep(&OP_TAIL, &c, &got, ptr, vol, 2));
  cr_assert(ptr[0] == x && ptr[1] == NULL && vol[0] == 4 && vol[1] == 0);
  cr_assert(ptr[2] == x && vol[2] == -1, "past the room");
}

Test(kernel_tasks, gemm_task_computes_and_rejects_bad_shapes_untouched) {
  const int m = 17, n = 13, k = 5;
  float *a = kr_random((size_t)m * k, 91, -1, 1);
  float *b = kr_random((size_t)k * n, 92, -1, 1);
  float *c = kr_random((size_t)m * n, 93, -1, 1), *c0 = kr_alloc((size_t)m * n);
  memcpy(c0, c, (size_t)m * n * sizeof *c);
  /* A stored k x m (trans_a), a global-coordinate origin for B. */
  rp_instance_info in[3] = {inst2d(a, RP_F32, k, m), inst2d(b, RP_F32, k, n),
                            inst2d(c, RP_F32, m, n)};
  in[1].rect = rp_rect_2d(100, 100 + k - 1, 7, 7 + n - 1);
  rp_gemm_args args = {.m = m,
                       .n = n,
                       .k = k,
                       .trans_a = 1,
                       .trans_b = 0,
                       .alpha = 2.0f,
                       .beta = 1.0f};
  double *want = kr_gemm(1, 0, m, n, k, 2.0, a, b, 1.0, c);
  rp_task_ctx ctx = cpu_ctx(&args, sizeof args, in, 3);
  RP_CHECK(rp_task_gemm_cpu(&ctx));
  kr_close(c, want, (size_t)m * n, 1e-5, 1.0, 0, "gemm task");

  memcpy(c, c0, (size_t)m * n * sizeof *c);
  in[2] = inst2d(c, RP_F32, m, n - 1); /* C one column short */
  RP_EXPECT(rp_task_gemm_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp.gemm") &&
                strstr(rp_error_detail(), "access 2"),
            "detail: %s", rp_error_detail());
  cr_assert(memcmp(c, c0, (size_t)m * n * sizeof *c) == 0, "C was touched");
  in[2] = inst2d(c, RP_F32, m, n);
  in[2].strides[0] = n + 1; /* padded rows: not dense */
  RP_EXPECT(rp_task_gemm_cpu(&ctx), RP_ESHAPE);
  in[2] = inst2d(c, RP_I32, m, n);
  RP_EXPECT(rp_task_gemm_cpu(&ctx), RP_ETYPE);
  in[2] = inst2d(c, RP_F32, m, n);
  ctx.naccess = 2;
  RP_EXPECT(rp_task_gemm_cpu(&ctx), RP_ESHAPE);
  ctx.naccess = 3;
  ctx.args_size = sizeof args - 1;
  RP_EXPECT(rp_task_gemm_cpu(&ctx), RP_EINVAL);
  ctx.args_size = sizeof args;
  args.trans_b = 2;
  RP_EXPECT(rp_task_gemm_cpu(&ctx), RP_EINVAL);
  cr_assert(memcmp(c, c0, (size_t)m * n * sizeof *c) == 0, "C was touched");
  free(a), free(b), free(c), free(c0), free(want);
}

/* Runs rp.xent_fwd + rp.xent_bwd over rows [r0, r0 + rows) of x. */
static void xent_tasks(float *x, int32_t *lab, float *p, float *d, float *loss,
                       int rows, int cols, float norm) {
  rp_instance_info in[4] = {
      inst2d(x, RP_F32, rows, cols), inst2d(lab, RP_I32, rows, 1),
      inst2d(p, RP_F32, rows, cols), inst2d(loss, RP_F32, 1, 1)};
  in[1].rect = rp_rect_1d(0, rows - 1);
  in[1].strides[0] = 1;
  rp_xent_args args = {.rows = rows, .cols = cols, .norm = norm};
  rp_task_ctx ctx = cpu_ctx(&args, sizeof args, in, 4);
  RP_CHECK(rp_task_xent_fwd_cpu(&ctx));
  rp_instance_info bin[3] = {in[2], in[1], inst2d(d, RP_F32, rows, cols)};
  rp_task_ctx bctx = cpu_ctx(&args, sizeof args, bin, 3);
  RP_CHECK(rp_task_xent_bwd_cpu(&bctx));
}

Test(kernel_tasks, xent_tasks_on_two_shards_equal_the_whole_batch) {
  const int rows = 64, cols = 33, split = 40;
  size_t n = (size_t)rows * cols;
  float *x = kr_random(n, 101, -4, 4), *p = kr_alloc(n), *d = kr_alloc(n);
  float *ps = kr_alloc(n), *ds = kr_alloc(n);
  int32_t *lab = kr_labels(rows, cols, 102);
  float full = 0, l0 = 0, l1 = 0;
  xent_tasks(x, lab, p, d, &full, rows, cols, 0); /* norm 0: rows */
  size_t off = (size_t)split * cols;
  xent_tasks(x, lab, ps, ds, &l0, split, cols, rows);
  xent_tasks(x + off, lab + split, ps + off, ds + off, &l1, rows - split, cols,
             rows);
  double *pw = kr_dalloc(n);
  double want = kr_xent(x, lab, rows, cols, pw) / rows;
  cr_assert(fabs(full - want) <= 1e-5 * want, "loss %g want %g", full, want);
  cr_assert(fabsf(l0 + l1 - full) <= 1e-6f * full, "%g + %g != %g", l0, l1,
            full);
  cr_assert(memcmp(d, ds, n * sizeof *d) == 0, "sharded gradient differs");
  free(x), free(p), free(d), free(ps), free(ds), free(lab), free(pw);
}

Test(kernel_tasks, xent_task_rejects_a_bad_label_before_writing) {
  float x[6] = {1, 2, 3, 4, 5, 6}, p[6] = {0}, loss = 42;
  int32_t lab[2] = {0, 3};
  rp_instance_info in[4] = {inst2d(x, RP_F32, 2, 3), inst2d(lab, RP_I32, 2, 1),
                            inst2d(p, RP_F32, 2, 3),
                            inst2d(&loss, RP_F32, 1, 1)};
  rp_xent_args args = {.rows = 2, .cols = 3, .norm = 2};
  rp_task_ctx ctx = cpu_ctx(&args, sizeof args, in, 4);
  RP_EXPECT(rp_task_xent_fwd_cpu(&ctx), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "row 1"), "%s", rp_error_detail());
  cr_assert(loss == 42 && p[0] == 0, "written despite the error");
  lab[1] = 2;
  in[1] = inst2d(lab, RP_F32, 2, 1);
  RP_EXPECT(rp_task_xent_fwd_cpu(&ctx), RP_ETYPE);
  in[1] = inst2d(lab, RP_I32, 2, 1);
  args.norm = -1;
  RP_EXPECT(rp_task_xent_fwd_cpu(&ctx), RP_EINVAL);
  args.norm = 2;
  RP_CHECK(rp_task_xent_fwd_cpu(&ctx));
  cr_assert(isfinite(loss) && loss > 0);
}

/* The learning rate sits at offset 0 of the args: a per-replay
 * interpolation that rewrites those 4 bytes changes the next step. */
Test(kernel_tasks, sgd_task_follows_interpolated_learning_rate) {
  enum { N = 13 };
  float w[N], g[N], v[N];
  for (int i = 0; i < N; i++)
    w[i] = 1.0f, g[i] = 0.5f, v[i] = 0.0f;
  rp_instance_info in[3] = {inst2d(w, RP_F32, 1, N), inst2d(g, RP_F32, 1, N),
                            inst2d(v, RP_F32, 1, N)};
  unsigned char argbuf[sizeof(rp_sgd_args)];
  rp_sgd_args a = {.lr = 0.1f, .momentum = 0.5f, .n = 0}; /* n 0: all */
  memcpy(argbuf, &a, sizeof a);
  rp_task_ctx ctx = cpu_ctx(argbuf, sizeof argbuf, in, 3);
  RP_CHECK(rp_task_sgd_cpu(&ctx)); /* v = 0.5, w = 1 - 0.05 */
  float lr2 = 1.0f;
  memcpy(argbuf + offsetof(rp_sgd_args, lr), &lr2, sizeof lr2);
  RP_CHECK(rp_task_sgd_cpu(&ctx)); /* v = 0.75, w = 0.95 - 0.75 */
  for (int i = 0; i < N; i++) {
    cr_assert_float_eq(v[i], 0.75f, 1e-7f, "v[%d] = %g", i, v[i]);
    cr_assert_float_eq(w[i], 0.2f, 1e-6f, "w[%d] = %g", i, w[i]);
  }
  in[2] = inst2d(v, RP_F32, 1, N - 1);
  RP_EXPECT(rp_task_sgd_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp.sgd"), "%s", rp_error_detail());
}

Test(kernel_tasks, elementwise_tasks_run_over_whole_instances) {
  enum { R = 3, C = 5 };
  float x[R * C], y[R * C], bias[C], db[C];
  for (int i = 0; i < R * C; i++)
    x[i] = (float)(i % 4) - 1.5f;
  for (int c = 0; c < C; c++)
    bias[c] = (float)c;
  rp_instance_info in[2] = {inst2d(x, RP_F32, R, C), inst2d(y, RP_F32, R, C)};
  rp_elementwise_args ea = {0};
  rp_task_ctx ctx = cpu_ctx(&ea, sizeof ea, in, 2);
  RP_CHECK(rp_task_relu_fwd_cpu(&ctx));
  for (int i = 0; i < R * C; i++)
    cr_assert_eq(y[i], x[i] > 0 ? x[i] : 0.0f);
  rp_bias_args ba = {.rows = R, .cols = C};
  rp_instance_info bin[2] = {inst2d(y, RP_F32, R, C),
                             inst2d(bias, RP_F32, 1, C)};
  ctx = cpu_ctx(&ba, sizeof ba, bin, 2);
  RP_CHECK(rp_task_bias_add_cpu(&ctx));
  bin[1] = inst2d(db, RP_F32, 1, C);
  RP_CHECK(rp_task_bias_grad_cpu(&ctx));
  for (int c = 0; c < C; c++) {
    float s = 0;
    for (int r = 0; r < R; r++)
      s += y[r * C + c];
    cr_assert_float_eq(db[c], s, 1e-6f, "db[%d]", c);
  }
  rp_scalar_args sa = {.value = 3.0f, .n = 0};
  ctx = cpu_ctx(&sa, sizeof sa, in, 1);
  RP_CHECK(rp_task_fill_cpu(&ctx));
  for (int i = 0; i < R * C; i++)
    cr_assert_eq(x[i], 3.0f);
}

Test(kernel_tasks, axpy_scale_accuracy_tasks) {
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
  rp_instance_info in[2] = {inst2d(x, RP_F32, 1, 4), inst2d(y, RP_F32, 1, 4)};
  rp_scalar_args sa = {.value = 0.5f, .n = 3}; /* first 3 only */
  rp_task_ctx ctx = cpu_ctx(&sa, sizeof sa, in, 2);
  RP_CHECK(rp_task_axpy_cpu(&ctx));
  cr_assert(y[0] == 1.5f && y[2] == 2.5f && y[3] == 1.0f);
  sa.value = -2.0f;
  sa.n = 5;        /* more than access 0 holds */
  ctx.naccess = 1; /* rp.scale takes X only */
  RP_EXPECT(rp_task_scale_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 0 (X) has 4 elements, needs 5"),
            "%s", rp_error_detail());
  sa.n = -1;
  RP_EXPECT(rp_task_scale_cpu(&ctx), RP_EINVAL);
  sa.n = 0;
  RP_CHECK(rp_task_scale_cpu(&ctx));
  cr_assert(x[0] == -2.0f && x[3] == -8.0f);

  float logits[2 * 3] = {0, 5, 1, 9, 2, 1};
  int32_t lab[2] = {1, 2}, count = -1;
  rp_instance_info ain[3] = {inst2d(logits, RP_F32, 2, 3),
                             inst2d(lab, RP_I32, 2, 1),
                             inst2d(&count, RP_I32, 1, 1)};
  rp_rows_cols_args rc = {.rows = 2, .cols = 3};
  ctx = cpu_ctx(&rc, sizeof rc, ain, 3);
  RP_CHECK(rp_task_accuracy_cpu(&ctx));
  cr_assert_eq(count, 1);
  ain[2] = inst2d(&count, RP_F32, 1, 1);
  RP_EXPECT(rp_task_accuracy_cpu(&ctx), RP_ETYPE);
}

/* ---- fused tasks: against the unfused tasks, and their errors ---- */

Test(kernel_tasks, bias_act_task_equals_bias_add_and_relu_tasks) {
  enum { R = 9, C = 7, N = R * C };
  float *z = kr_random(N, 301, -2, 2), *bias = kr_random(C, 302, -1, 1);
  float zr[N], ar[N], a[N], z0[N];
  memcpy(zr, z, sizeof zr);
  memcpy(z0, z, sizeof z0);
  rp_bias_args ba = {.rows = R, .cols = C};
  rp_instance_info bin[2] = {inst2d(zr, RP_F32, R, C),
                             inst2d(bias, RP_F32, 1, C)};
  rp_task_ctx ctx = cpu_ctx(&ba, sizeof ba, bin, 2);
  RP_CHECK(rp_task_bias_add_cpu(&ctx));
  rp_elementwise_args ea = {0};
  rp_instance_info rin[2] = {inst2d(zr, RP_F32, R, C),
                             inst2d(ar, RP_F32, R, C)};
  ctx = cpu_ctx(&ea, sizeof ea, rin, 2);
  RP_CHECK(rp_task_relu_fwd_cpu(&ctx));

  rp_bias_act_args args = {.rows = R, .cols = C, .act = RP_ACT_RELU};
  rp_instance_info in[3] = {inst2d(z, RP_F32, R, C), inst2d(bias, RP_F32, 1, C),
                            inst2d(a, RP_F32, R, C)};
  ctx = cpu_ctx(&args, sizeof args, in, 3);
  RP_CHECK(rp_task_bias_act_cpu(&ctx));
  cr_assert(memcmp(z, zr, sizeof zr) == 0 && memcmp(a, ar, sizeof ar) == 0,
            "bias_act differs from bias_add + relu_fwd");
  /* errors, each before anything is written */
  memcpy(z, z0, sizeof z0);
  args.act = 2;
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp.bias_act") &&
                strstr(rp_error_detail(), "act = 2"),
            "%s", rp_error_detail());
  args.act = RP_ACT_RELU;
  ctx.naccess = 2; /* relu needs A */
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 2 (A) missing"), "%s",
            rp_error_detail());
  ctx.naccess = 3;
  in[2] = inst2d(a, RP_I32, R, C);
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_ETYPE);
  in[2] = inst2d(z, RP_F32, R, C); /* A on Z's memory */
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(),
                   "rp.bias_act: access 0 (Z) and access 2 (A) overlap"),
            "%s", rp_error_detail());
  in[2] = inst2d(z + C, RP_F32, R, C); /* A from Z's second row */
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_EINVAL);
  in[2] = inst2d(a, RP_F32, R, C);
  in[1] = inst2d(bias, RP_F32, 1, C - 1);
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 1 (bias)"), "%s",
            rp_error_detail());
  in[1] = inst2d(bias, RP_F32, 1, C);
  ctx.args_size = sizeof args - 1;
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_EINVAL);
  ctx.args_size = sizeof args;
  args.rows = -1;
  RP_EXPECT(rp_task_bias_act_cpu(&ctx), RP_EINVAL);
  cr_assert(memcmp(z, z0, sizeof z0) == 0, "Z touched by a rejected task");
  /* act none: two accesses suffice, and it is rp.bias_add (zr) */
  args.rows = R;
  args.act = RP_ACT_NONE;
  ctx.naccess = 2;
  memset(a, 0, sizeof a);
  RP_CHECK(rp_task_bias_act_cpu(&ctx));
  cr_assert(memcmp(z, zr, sizeof zr) == 0, "act none differs from bias_add");
  cr_assert(a[0] == 0 && a[N - 1] == 0, "act none wrote A");
  free(z), free(bias);
}

Test(kernel_tasks, softmax_xent_task_equals_xent_tasks_and_bias_grad) {
  enum { R = 21, C = 5, N = R * C };
  float *x = kr_random(N, 311, -5, 5);
  int32_t *lab = kr_labels(R, C, 312);
  float p[N], dr[N], d[N], dbr[C], db[C], lr_ = 0, loss = 0;
  xent_tasks(x, lab, p, dr, &lr_, R, C, 64);
  rp_bias_args ba = {.rows = R, .cols = C};
  rp_instance_info gin[2] = {inst2d(dr, RP_F32, R, C),
                             inst2d(dbr, RP_F32, 1, C)};
  rp_task_ctx ctx = cpu_ctx(&ba, sizeof ba, gin, 2);
  RP_CHECK(rp_task_bias_grad_cpu(&ctx));

  rp_xent_args args = {.rows = R, .cols = C, .norm = 64};
  rp_instance_info in[5] = {inst2d(x, RP_F32, R, C), inst2d(lab, RP_I32, R, 1),
                            inst2d(d, RP_F32, R, C),
                            inst2d(&loss, RP_F32, 1, 1),
                            inst2d(db, RP_F32, 1, C)};
  ctx = cpu_ctx(&args, sizeof args, in, 5);
  RP_CHECK(rp_task_softmax_xent_cpu(&ctx));
  cr_assert(memcmp(&loss, &lr_, sizeof loss) == 0, "loss %g vs %g", loss, lr_);
  cr_assert(memcmp(d, dr, sizeof d) == 0, "dlogits differ");
  cr_assert(memcmp(db, dbr, sizeof db) == 0, "db differs");
  ctx.naccess = 4; /* db is optional */
  memset(d, 0, sizeof d);
  RP_CHECK(rp_task_softmax_xent_cpu(&ctx));
  cr_assert(memcmp(d, dr, sizeof d) == 0, "dlogits differ without db");
  ctx.naccess = 5;
  /* errors, before writing */
  memset(d, 0, sizeof d);
  loss = 42;
  lab[3] = C;
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp.softmax_xent") &&
                strstr(rp_error_detail(), "row 3"),
            "%s", rp_error_detail());
  cr_assert(loss == 42 && d[0] == 0, "written despite a bad label");
  lab[3] = 0;
  in[4] = inst2d(db, RP_F32, 1, C - 1);
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 4 (db)"), "%s",
            rp_error_detail());
  in[4] = inst2d(db, RP_F32, 1, C);
  in[2] = inst2d(d, RP_F32, R - 1, C);
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 2 (dlogits)"), "%s",
            rp_error_detail());
  in[2] = inst2d(d, RP_F32, R, C);
  in[1] = inst2d(lab, RP_F32, R, 1);
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_ETYPE);
  in[1] = inst2d(lab, RP_I32, R, 1);
  args.norm = -1;
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_EINVAL);
  args.norm = 64;
  ctx.naccess = 3;
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_ESHAPE);
  cr_assert(loss == 42 && d[0] == 0, "written by a rejected task");
  free(x), free(lab);
}

Test(kernel_tasks, relu_bwd_bias_task_equals_relu_bwd_and_bias_grad_tasks) {
  enum { R = 13, C = 40, N = R * C };
  float *a = kr_random(N, 321, -1, 1), *da = kr_random(N, 322, -2, 2);
  float dzr[N], dbr[C], dz[N], db[C];
  rp_elementwise_args ea = {0};
  rp_instance_info rin[3] = {inst2d(a, RP_F32, R, C), inst2d(da, RP_F32, R, C),
                             inst2d(dzr, RP_F32, R, C)};
  rp_task_ctx ctx = cpu_ctx(&ea, sizeof ea, rin, 3);
  RP_CHECK(rp_task_relu_bwd_cpu(&ctx));
  rp_bias_args ba = {.rows = R, .cols = C};
  rp_instance_info gin[2] = {inst2d(dzr, RP_F32, R, C),
                             inst2d(dbr, RP_F32, 1, C)};
  ctx = cpu_ctx(&ba, sizeof ba, gin, 2);
  RP_CHECK(rp_task_bias_grad_cpu(&ctx));

  rp_rows_cols_args args = {.rows = R, .cols = C};
  rp_instance_info in[4] = {inst2d(a, RP_F32, R, C), inst2d(da, RP_F32, R, C),
                            inst2d(dz, RP_F32, R, C), inst2d(db, RP_F32, 1, C)};
  ctx = cpu_ctx(&args, sizeof args, in, 4);
  RP_CHECK(rp_task_relu_bwd_bias_cpu(&ctx));
  cr_assert(memcmp(dz, dzr, sizeof dz) == 0, "dZ differs");
  cr_assert(memcmp(db, dbr, sizeof db) == 0, "db differs");
  memset(dz, 0, sizeof dz);
  memset(db, 0, sizeof db);
  in[3] = inst2d(db, RP_F32, 1, C - 1);
  RP_EXPECT(rp_task_relu_bwd_bias_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp.relu_bwd_bias") &&
                strstr(rp_error_detail(), "access 3 (db)"),
            "%s", rp_error_detail());
  in[3] = inst2d(db, RP_F32, 1, C);
  in[1] = inst2d(da, RP_I32, R, C);
  RP_EXPECT(rp_task_relu_bwd_bias_cpu(&ctx), RP_ETYPE);
  cr_assert(strstr(rp_error_detail(), "access 1 (dA)"), "%s",
            rp_error_detail());
  in[1] = inst2d(da, RP_F32, R, C);
  ctx.naccess = 3;
  RP_EXPECT(rp_task_relu_bwd_bias_cpu(&ctx), RP_ESHAPE);
  ctx.naccess = 4;
  args.cols = 0;
  RP_EXPECT(rp_task_relu_bwd_bias_cpu(&ctx), RP_EINVAL);
  for (int i = 0; i < N; i++)
    cr_assert(dz[i] == 0, "dZ written by a rejected task");
  free(a), free(da);
}

/* Three tensors of different sizes: one rp.sgd_multi equals three rp.sgd
 * tasks bitwise, also after the lr bytes change (interpolation). */
Test(kernel_tasks, sgd_multi_task_equals_one_sgd_task_per_tensor) {
  static const int64_t rows[3] = {5, 1, 17}, cols[3] = {3, 8, 2};
  float *w[3], *g[3], *v[3], *wr[3], *vr[3];
  rp_instance_info in[9], rin[3];
  for (int t = 0; t < 3; t++) {
    size_t n = (size_t)(rows[t] * cols[t]);
    w[t] = kr_random(n, 331 + t, -1, 1);
    g[t] = kr_random(n, 341 + t, -1, 1);
    v[t] = kr_random(n, 351 + t, -1, 1);
    wr[t] = kr_alloc(n), vr[t] = kr_alloc(n);
    memcpy(wr[t], w[t], n * sizeof(float));
    memcpy(vr[t], v[t], n * sizeof(float));
    in[3 * t] = inst2d(w[t], RP_F32, rows[t], cols[t]);
    in[3 * t + 1] = inst2d(g[t], RP_F32, rows[t], cols[t]);
    in[3 * t + 2] = inst2d(v[t], RP_F32, rows[t], cols[t]);
  }
  unsigned char argbuf[sizeof(rp_sgd_multi_args)];
  rp_sgd_multi_args a = {.lr = 0.1f, .momentum = 0.9f, .count = 3};
  memcpy(argbuf, &a, sizeof a);
  rp_task_ctx ctx = cpu_ctx(argbuf, sizeof argbuf, in, 9);
  for (int step = 0; step < 2; step++) {
    float lr = step ? 0.37f : 0.1f;
    memcpy(argbuf + offsetof(rp_sgd_multi_args, lr), &lr, sizeof lr);
    RP_CHECK(rp_task_sgd_multi_cpu(&ctx));
    for (int t = 0; t < 3; t++) {
      rp_sgd_args sa = {.lr = lr, .momentum = 0.9f, .n = 0};
      rin[0] = inst2d(wr[t], RP_F32, rows[t], cols[t]);
      rin[1] = in[3 * t + 1];
      rin[2] = inst2d(vr[t], RP_F32, rows[t], cols[t]);
      rp_task_ctx sctx = cpu_ctx(&sa, sizeof sa, rin, 3);
      RP_CHECK(rp_task_sgd_cpu(&sctx));
      size_t bytes = (size_t)(rows[t] * cols[t]) * sizeof(float);
      cr_assert(memcmp(w[t], wr[t], bytes) == 0, "step %d tensor %d: w", step,
                t);
      cr_assert(memcmp(v[t], vr[t], bytes) == 0, "step %d tensor %d: v", step,
                t);
    }
  }
  /* errors, before any tensor is touched */
  float w0 = w[0][0];
  memcpy(&a, argbuf, sizeof a);
  a.count = 0;
  memcpy(argbuf, &a, sizeof a);
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "count = 0"), "%s", rp_error_detail());
  a.count = RP_SGD_MULTI_MAX + 1;
  memcpy(argbuf, &a, sizeof a);
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_EINVAL);
  a.count = 4; /* 9 accesses hold 3 tensors */
  memcpy(argbuf, &a, sizeof a);
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "9 accesses for 4 tensors"), "%s",
            rp_error_detail());
  a.count = 3;
  memcpy(argbuf, &a, sizeof a);
  in[7] = inst2d(g[2], RP_F32, rows[2], cols[2] - 1); /* G_2 short */
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 7 (G)"), "%s", rp_error_detail());
  in[7] = inst2d(g[2], RP_F32, rows[2], cols[2]);
  in[5] = inst2d(v[1], RP_F64, rows[1], cols[1]);
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_ETYPE);
  ctx.args_size = sizeof a - 1;
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_EINVAL);
  cr_assert(w[0][0] == w0, "W touched by a rejected task");
  for (int t = 0; t < 3; t++)
    free(w[t]), free(g[t]), free(v[t]), free(wr[t]), free(vr[t]);
}

/* rp.sgd and rp.sgd_multi refuse an lr or momentum that is not finite or
 * is negative (the weights would go NaN or climb the gradient), the task
 * and its check_fn alike (the check_fn runs on the host before a GPU
 * replay whose lr the device reads); nothing is written. */
Test(kernel_tasks, sgd_tasks_refuse_a_non_finite_or_negative_lr) {
  enum { N = 4 };
  float w[N] = {1, 2, 3, 4}, g[N] = {1, 1, 1, 1}, v[N] = {0};
  rp_instance_info in[3] = {inst2d(w, RP_F32, 1, N), inst2d(g, RP_F32, 1, N),
                            inst2d(v, RP_F32, 1, N)};
  static const float bad[][2] = {
      {NAN, 0.9f}, {INFINITY, 0.9f}, {-0.1f, 0.9f}, {0.1f, NAN}, {0.1f, -1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rp_sgd_args a = {.lr = bad[i][0], .momentum = bad[i][1], .n = 0};
    rp_task_ctx ctx = cpu_ctx(&a, sizeof a, in, 3);
    RP_EXPECT(rp_task_sgd_cpu(&ctx), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp.sgd: lr = ") &&
                  strstr(rp_error_detail(), "need finite, >= 0"),
              "%s", rp_error_detail());
    RP_EXPECT(rp_task_sgd_check(&ctx), RP_EINVAL);
    rp_sgd_multi_args m = {.lr = bad[i][0], .momentum = bad[i][1], .count = 1};
    rp_task_ctx mctx = cpu_ctx(&m, sizeof m, in, 3);
    RP_EXPECT(rp_task_sgd_multi_cpu(&mctx), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp.sgd_multi: lr = "), "%s",
              rp_error_detail());
    RP_EXPECT(rp_task_sgd_multi_check(&mctx), RP_EINVAL);
  }
  for (int k = 0; k < N; k++)
    cr_assert(w[k] == (float)(k + 1) && v[k] == 0, "written at %d", k);
  rp_sgd_args ok = {.lr = 0, .momentum = 0, .n = 0}; /* 0 is allowed */
  rp_task_ctx ctx = cpu_ctx(&ok, sizeof ok, in, 3);
  RP_CHECK(rp_task_sgd_check(&ctx));
  RP_CHECK(rp_task_sgd_cpu(&ctx));
  cr_assert(w[0] == 1 && v[0] == 1);
}

/* rp.gather_rows's check_fn: the interpolated index against the shapes,
 * on instance metadata only (the pointers are never read). */
Test(kernel_tasks, gather_rows_check_fn_validates_the_index_on_metadata) {
  rp_instance_info in[2] = {inst2d((void *)0x1000, RP_F32, 12, 3),
                            inst2d((void *)0x2000, RP_F32, 4, 3)};
  rp_gather_args a = {.index = 2, .rows = 4, .cols = 3};
  rp_task_ctx ctx = cpu_ctx(&a, sizeof a, in, 2);
  RP_CHECK(rp_task_gather_rows_check(&ctx));
  a.index = 3; /* rows [12, 16) of 12 */
  RP_EXPECT(rp_task_gather_rows_check(&ctx), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp.gather_rows") &&
                strstr(rp_error_detail(), "batch index 3") &&
                strstr(rp_error_detail(), "12 rows"),
            "%s", rp_error_detail());
  a.index = -1;
  RP_EXPECT(rp_task_gather_rows_check(&ctx), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "negative"), "%s", rp_error_detail());
  a.index = 0;
  in[1] = inst2d((void *)0x2000, RP_I32, 4, 3);
  RP_EXPECT(rp_task_gather_rows_check(&ctx), RP_ETYPE);
  /* a dst too small is a shape (RP_ESHAPE, as every task's), whatever
   * the index */
  in[1] = inst2d((void *)0x2000, RP_F32, 3, 3); /* 9 elements of 12 */
  RP_EXPECT(rp_task_gather_rows_check(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "access 1 (dst) has 9 elements, "
                                      "needs 12"),
            "%s", rp_error_detail());
}

/* rp.gather_rows: dst sharing memory with src (any of its batches: the
 * index changes per replay) is refused before the copy, as every task
 * refuses a written access on another one; nothing is written. */
Test(kernel_tasks, gather_rows_refuses_dst_overlapping_src) {
  float *buf = kr_random(12 * 3 + 3, 521, -1, 1), *snap = kr_alloc(39);
  memcpy(snap, buf, 39 * sizeof *buf);
  rp_instance_info in[2] = {inst2d(buf, RP_F32, 12, 3),
                            inst2d(buf + 3, RP_F32, 4, 3)};
  rp_gather_args a = {.index = 0, .rows = 4, .cols = 3};
  rp_task_ctx ctx = cpu_ctx(&a, sizeof a, in, 2);
  static const char want[] =
      "rp.gather_rows: access 0 (src) and access 1 (dst) overlap";
  for (int32_t idx = 0; idx < 3; idx++) { /* batches 1 and 2 miss dst too */
    a.index = idx;
    RP_EXPECT(rp_task_gather_rows_cpu(&ctx), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), want), "index %d: %s", (int)idx,
              rp_error_detail());
    RP_EXPECT(rp_task_gather_rows_check(&ctx), RP_EINVAL);
  }
  in[1] = inst2d(buf + 36 - 1, RP_F32, 1, 3); /* src's last element */
  a = (rp_gather_args){.index = 0, .rows = 1, .cols = 3};
  RP_EXPECT(rp_task_gather_rows_cpu(&ctx), RP_EINVAL);
  cr_assert(memcmp(buf, snap, 39 * sizeof *buf) == 0, "memory written");
  /* right after src: no overlap */
  in[1] = inst2d(buf + 36, RP_F32, 1, 3);
  a.index = 11;
  RP_CHECK(rp_task_gather_rows_cpu(&ctx));
  for (int i = 0; i < 3; i++)
    cr_assert_eq(buf[36 + i], snap[33 + i], "dst[%d]", i);
  free(buf), free(snap);
}

Test(kernel_tasks, register_names_every_task_and_refuses_twice) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  static const char *names[] = {
      "rp.gemm",          "rp.bias_add",    "rp.bias_grad", "rp.relu_fwd",
      "rp.relu_bwd",      "rp.xent_fwd",    "rp.xent_bwd",  "rp.sgd",
      "rp.fill",          "rp.scale",       "rp.axpy",      "rp.axpby",
      "rp.accuracy",      "rp.gather_rows", "rp.bias_act",  "rp.softmax_xent",
      "rp.relu_bwd_bias", "rp.sgd_multi"};
  rp_task_id want[] = {
      k.gemm,         k.bias_add,      k.bias_grad, k.relu_fwd,    k.relu_bwd,
      k.xent_fwd,     k.xent_bwd,      k.sgd,       k.fill,        k.scale,
      k.axpy,         k.axpby,         k.accuracy,  k.gather_rows, k.bias_act,
      k.softmax_xent, k.relu_bwd_bias, k.sgd_multi};
  for (size_t i = 0; i < KR_LEN(names); i++) {
    rp_task_id id;
    RP_CHECK(rp_task_find(rt, names[i], &id));
    cr_assert_eq(id, want[i], "%s", names[i]);
  }
  /* the device-args tasks and gather_rows's host-side check */
  const rp_task_rec *g = rp__task_get(rt, k.gather_rows);
  cr_assert(g && g->check_fn == rp_task_gather_rows_check,
            "rp.gather_rows has no check_fn");
  cr_assert(g->flags & RP_TASK_DEVICE_ARGS, "rp.gather_rows flags %#x",
            g->flags);
  cr_assert(rp__task_get(rt, k.sgd_multi)->flags & RP_TASK_DEVICE_ARGS);
  cr_assert_null(rp__task_get(rt, k.gemm)->check_fn);
  rp_kernel_tasks again;
  RP_EXPECT(rp_kernels_register(rt, &again), RP_EEXIST);
  th_destroy(rt);
}

/* A NULL runtime or out-parameter: RP_EINVAL naming the call, nothing
 * registered (a later call registers every task). */
Test(kernel_tasks, register_refuses_null_arguments) {
  rp_kernel_tasks k;
  memset(&k, 0xab, sizeof k);
  RP_EXPECT(rp_kernels_register(NULL, &k), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_kernels_register: NULL argument");
  cr_assert_eq(k.gemm, 0xababababu, "out written on error");
  rp_runtime *rt = th_cpu_runtime(1);
  RP_EXPECT(rp_kernels_register(rt, NULL), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_kernels_register: NULL argument");
  rp_task_id id;
  RP_EXPECT(rp_task_find(rt, "rp.gemm", &id), RP_ENOTASK);
  RP_CHECK(rp_kernels_register(rt, &k));
  RP_CHECK(rp_task_find(rt, "rp.gemm", &id));
  cr_assert_eq(id, k.gemm);
  th_destroy(rt);
}

/* RP_KERNEL_TASKS (tasks.h) names each task once: rp_kernels_register
 * fills one member of rp_kernel_tasks per line, with ids dense and in the
 * list's order, registers nothing else, and registers each line's
 * descriptor's name once, under that id, with the line's bodies, flags
 * (beyond RP_TASK_STREAM_ORDERED), check_fn and the descriptor itself. */
typedef struct kt_line {
  rp_task_id id;
  const rp_op *op;
  rp_task_fn cpu_fn, gpu_fn, check_fn;
  unsigned flags;
} kt_line;
#ifdef REPRISE_HAVE_CUDA
#define KT_GPU(body) rp_task_##body##_gpu
#else
#define KT_GPU(body) NULL
#endif
Test(kernel_tasks, the_list_registers_each_task_once_with_dense_ids) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
#define KT_LINE(id_, body, flags_, check_)                                     \
  {k.id_, &rp_task_##body##_op, rp_task_##body##_cpu, KT_GPU(body), check_,    \
   flags_},
  const kt_line list[] = {RP_KERNEL_TASKS(KT_LINE)};
#undef KT_LINE
  size_t n = KR_LEN(list);
  cr_assert_eq(sizeof k, n * sizeof(rp_task_id), "one id per line");
  for (size_t i = 0; i < n; i++) {
    const kt_line *l = &list[i];
    const char *name = l->op->name;
    cr_assert_eq(l->id, list[0].id + i, "%s: id %u, line %zu", name, l->id, i);
    const rp_task_rec *t = rp__task_get(rt, l->id);
    cr_assert(t, "%s", name);
    cr_assert_str_eq(t->name, name);
    rp_task_id found;
    RP_CHECK(rp_task_find(rt, name, &found));
    cr_assert_eq(found, l->id, "%s", name);
    for (size_t j = 0; j < i; j++)
      cr_assert_str_neq(list[j].op->name, name, "lines %zu and %zu", j, i);
    cr_assert_eq(rp_kernel_op(name), l->op, "%s", name);
    cr_assert_eq(t->priv_arg, l->op, "%s", name);
    cr_assert_eq(t->cpu_fn, l->cpu_fn, "%s", name);
    cr_assert_eq(t->gpu_fn, l->gpu_fn, "%s", name);
    cr_assert_eq(t->check_fn, l->check_fn, "%s", name);
    cr_assert_eq(t->flags, RP_TASK_STREAM_ORDERED | l->flags, "%s", name);
  }
  cr_assert_null(rp__task_get(rt, list[n - 1].id + 1), "a task past the list");
  cr_assert_null(rp_kernel_op("rp.nonesuch"));
  th_destroy(rt);
}
#undef KT_GPU

/* What the list registers, written out here rather than derived from
 * RP_KERNEL_TASKS (the test above compares the list with itself): every
 * task's name, in registration order, with its flags and check_fn. A
 * GPU body that reads its args on the device without RP_TASK_DEVICE_ARGS
 * would be captured with stale args; without its check_fn a replay would
 * not refuse an interpolated value out of range. Graph files name tasks,
 * so a name changes only with the files that use it. */
Test(kernel_tasks, the_registered_names_flags_and_check_fns_are_pinned) {
  enum { DA = RP_TASK_DEVICE_ARGS };
  static const struct {
    const char *name;
    unsigned flags; /* beyond RP_TASK_STREAM_ORDERED */
    rp_task_fn check_fn;
  } want[] = {
      {"rp.gemm", 0, NULL},
      {"rp.bias_add", 0, NULL},
      {"rp.bias_grad", 0, NULL},
      {"rp.relu_fwd", 0, NULL},
      {"rp.relu_bwd", 0, NULL},
      {"rp.xent_fwd", 0, NULL},
      {"rp.xent_bwd", 0, NULL},
      {"rp.sgd", DA, rp_task_sgd_check},
      {"rp.fill", 0, NULL},
      {"rp.scale", 0, NULL},
      {"rp.axpy", 0, NULL},
      {"rp.axpby", 0, NULL},
      {"rp.accuracy", 0, NULL},
      {"rp.gather_rows", DA, rp_task_gather_rows_check},
      {"rp.bias_act", 0, NULL},
      {"rp.softmax_xent", 0, NULL},
      {"rp.relu_bwd_bias", 0, NULL},
      {"rp.sgd_multi", DA, rp_task_sgd_multi_check},
      {"gpt.embed_fwd", 0, NULL},
      {"gpt.embed_bwd", 0, NULL},
      {"gpt.embed_token", DA, rp_task_gpt_embed_token_check},
      {"gpt.layernorm_fwd", 0, NULL},
      {"gpt.residual_layernorm_fwd", 0, NULL},
      {"gpt.layernorm_bwd", 0, NULL},
      {"gpt.matmul_fwd", 0, NULL},
      {"gpt.matmul_bwd", 0, NULL},
      {"gpt.bias_gelu_fwd", 0, NULL},
      {"gpt.gelu_bwd", 0, NULL},
      {"gpt.attention_fwd", 0, NULL},
      {"gpt.attention_bwd", 0, NULL},
      {"gpt.attention_decode", DA, rp_task_gpt_attention_decode_check},
      {"gpt.xent", 0, NULL},
      {"gpt.adamw", DA, rp_task_gpt_adamw_check},
      {"gpt.sumsq", 0, NULL},
  };
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  cr_assert_eq(sizeof k, KR_LEN(want) * sizeof(rp_task_id), "%zu tasks",
               sizeof k / sizeof(rp_task_id));
  const rp_task_id *ids = (const rp_task_id *)&k;
  for (size_t i = 0; i < KR_LEN(want); i++) {
    rp_task_id id;
    RP_CHECK(rp_task_find(rt, want[i].name, &id));
    cr_assert_eq(id, ids[i], "%s: registered %zu-th", want[i].name, i);
    const rp_task_rec *t = rp__task_get(rt, id);
    cr_assert_eq(t->flags, RP_TASK_STREAM_ORDERED | want[i].flags,
                 "%s: flags %#x", want[i].name, t->flags);
    cr_assert_eq(t->check_fn, want[i].check_fn, "%s: check_fn", want[i].name);
  }
  th_destroy(rt);
}

/* A task's bodies name their descriptor apart from its line in
 * RP_KERNEL_TASKS (RP_OP_PREP's first argument, whose `.name` every error
 * detail starts with): every registered task, its CPU body and its
 * check_fn, refuses a launch without args naming itself as registered. */
Test(kernel_tasks, every_task_names_itself_as_registered_in_its_errors) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  const rp_task_id *ids = (const rp_task_id *)&k;
  _Static_assert(sizeof k % sizeof *ids == 0, "rp_kernel_tasks: ids only");
  for (size_t i = 0; i < sizeof k / sizeof *ids; i++) {
    const rp_task_rec *t = rp__task_get(rt, ids[i]);
    cr_assert(t && t->cpu_fn, "id %zu", i);
    char want[128];
    snprintf(want, sizeof want, "%s: args are 0 bytes, need ", t->name);
    rp_task_fn fns[2] = {t->cpu_fn, t->check_fn};
    for (int f = 0; f < 2 && fns[f]; f++) {
      rp_task_ctx ctx = cpu_ctx(NULL, 0, NULL, 0);
      RP_EXPECT(fns[f](&ctx), RP_EINVAL);
      cr_assert(strncmp(rp_error_detail(), want, strlen(want)) == 0,
                "%s (%s): '%s'", t->name, f ? "check_fn" : "cpu_fn",
                rp_error_detail());
    }
  }
  th_destroy(rt);
}

/* A launch with more accesses than the task's descriptor has is refused
 * (RP_ESHAPE naming both counts) before anything is written, instead of
 * running with the extra instances ignored: they were declared to the
 * dependence analysis but never touched, which mostly means the accesses
 * are not in the contract's order. An optional access may be given. */
Test(kernel_tasks, more_accesses_than_the_task_takes_are_refused) {
  float *buf = kr_random(64, 511, -1, 1), *snap = kr_alloc(64);
  memcpy(snap, buf, 64 * sizeof *buf);
  rp_instance_info in[7];
  for (int i = 0; i < 7; i++)
    in[i] = inst2d(buf + 8 * i, RP_F32, 1, 8);
  rp_scalar_args sa = {.value = 3.0f, .n = 0};
  rp_task_ctx ctx = cpu_ctx(&sa, sizeof sa, in, 2);
  RP_EXPECT(rp_task_scale_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(),
                   "rp.scale: 2 accesses, the task takes at most 1"),
            "%s", rp_error_detail());
  rp_sgd_multi_args ma = {.lr = 0.1f, .momentum = 0.5f, .count = 2};
  ctx = cpu_ctx(&ma, sizeof ma, in, 7);
  RP_EXPECT(rp_task_sgd_multi_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(),
                   "rp.sgd_multi: 7 accesses, the task takes at most 6"),
            "%s", rp_error_detail());
  cr_assert(memcmp(buf, snap, 64 * sizeof *buf) == 0, "written");
  /* softmax_xent's optional db (access 4) counts as one it takes */
  int32_t lab[2] = {0, 1};
  rp_xent_args xa = {.rows = 2, .cols = 4, .norm = 2};
  in[1] = inst2d(lab, RP_I32, 2, 1);
  in[3] = inst2d(buf + 24, RP_F32, 1, 1);
  ctx = cpu_ctx(&xa, sizeof xa, in, 5);
  RP_CHECK(rp_task_softmax_xent_cpu(&ctx));
  ctx.naccess = 6;
  RP_EXPECT(rp_task_softmax_xent_cpu(&ctx), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp.softmax_xent: 6 accesses, the task "
                                      "takes at most 5"),
            "%s", rp_error_detail());
  free(buf), free(snap);
}

/* ---- aliasing: an access a task writes shares no memory with another,
 * except the in-place cases the contracts name ---- */

static void overlap_refused(rp_status (*fn)(rp_task_ctx *), rp_task_ctx *ctx,
                            const char *want, const float *buf, size_t n) {
  float *snap = kr_alloc(n);
  memcpy(snap, buf, n * sizeof *buf);
  rp_status st = fn(ctx);
  cr_assert(st == RP_EINVAL, "%s: %s (%s)", want, rp_status_name(st),
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "want '%s', got '%s'", want,
            rp_error_detail());
  cr_assert(memcmp(buf, snap, n * sizeof *buf) == 0, "%s: memory written",
            want);
  free(snap);
}

Test(kernel_tasks, accesses_overlapping_a_written_one_are_refused) {
  enum { N = 4 };
  float *buf = kr_random(64, 501, -1, 1), *b = kr_random(N * N, 502, -1, 1);
  /* gemm: C on A, then C from A's last row */
  rp_gemm_args ga = {.m = N, .n = N, .k = N, .alpha = 1.0f, .beta = 0.0f};
  rp_instance_info gi[3] = {inst2d(buf, RP_F32, N, N), inst2d(b, RP_F32, N, N),
                            inst2d(buf, RP_F32, N, N)};
  rp_task_ctx ctx = cpu_ctx(&ga, sizeof ga, gi, 3);
  overlap_refused(rp_task_gemm_cpu, &ctx,
                  "rp.gemm: access 0 (A) and access 2 (C) overlap", buf, 64);
  gi[2] = inst2d(buf + N * N - N, RP_F32, N, N);
  overlap_refused(rp_task_gemm_cpu, &ctx, "access 0 (A) and access 2 (C)", buf,
                  64);
  gi[0] = inst2d(b, RP_F32, N, N); /* B read twice: allowed */
  RP_CHECK(rp_task_gemm_cpu(&ctx));

  /* relu_fwd and axpy: Y on X is their contract; Y one element on is not */
  float *x = kr_random(N * N + 1, 503, -1, 1);
  float *want = kr_alloc(N * N);
  for (int i = 0; i < N * N; i++)
    want[i] = x[i] > 0 ? x[i] : 0.0f;
  rp_elementwise_args ea = {N * N};
  rp_instance_info ri[2] = {inst2d(x, RP_F32, 1, N * N),
                            inst2d(x, RP_F32, 1, N * N)};
  ctx = cpu_ctx(&ea, sizeof ea, ri, 2);
  RP_CHECK(rp_task_relu_fwd_cpu(&ctx));
  cr_assert(memcmp(x, want, N * N * sizeof *x) == 0, "relu in place");
  ri[1] = inst2d(x + 1, RP_F32, 1, N * N);
  overlap_refused(rp_task_relu_fwd_cpu, &ctx,
                  "rp.relu_fwd: access 0 (X) and access 1 (Y) overlap", x,
                  N * N + 1);
  rp_scalar_args sa = {.value = 1.0f, .n = N * N};
  ri[1] = ri[0];
  ctx = cpu_ctx(&sa, sizeof sa, ri, 2);
  RP_CHECK(rp_task_axpy_cpu(&ctx));
  for (int i = 0; i < N * N; i++)
    cr_assert_eq(x[i], 2 * want[i], "axpy in place [%d]", i);
  ri[1] = inst2d(x + 1, RP_F32, 1, N * N);
  overlap_refused(rp_task_axpy_cpu, &ctx,
                  "rp.axpy: access 0 (X) and access 1 (Y) overlap", x,
                  N * N + 1);

  /* xent_bwd: dlogits on probs is its contract, on the labels it is not */
  int32_t lab[N] = {0, 1, 2, 3};
  rp_xent_args xa = {.rows = N, .cols = N, .norm = N};
  rp_instance_info xi[3] = {inst2d(b, RP_F32, N, N), inst2d(lab, RP_I32, N, 1),
                            inst2d(b, RP_F32, N, N)};
  ctx = cpu_ctx(&xa, sizeof xa, xi, 3);
  RP_CHECK(rp_task_xent_bwd_cpu(&ctx));
  xi[2] = inst2d(lab, RP_F32, N, N);
  xi[2].bytes = N * sizeof *lab; /* never read: refused first */
  overlap_refused(rp_task_xent_bwd_cpu, &ctx,
                  "rp.xent_bwd: access 1 (labels) and access 2 (dlogits) "
                  "overlap",
                  (const float *)lab, N);

  /* sgd_multi over 2 tensors of 8: W_1 on V_0 */
  rp_sgd_multi_args ma = {.lr = 0.1f, .momentum = 0.5f, .count = 2};
  rp_instance_info mi[6];
  for (int i = 0; i < 6; i++)
    mi[i] = inst2d(buf + 8 * i, RP_F32, 1, 8);
  mi[3] = mi[2];
  ctx = cpu_ctx(&ma, sizeof ma, mi, 6);
  overlap_refused(rp_task_sgd_multi_cpu, &ctx,
                  "rp.sgd_multi: access 2 (V) and access 3 (W) overlap", buf,
                  64);
  mi[3] = inst2d(buf + 24, RP_F32, 1, 8);
  RP_CHECK(rp_task_sgd_multi_cpu(&ctx));
  free(buf), free(b), free(x), free(want);
}

/* ---- rp.axpby, as docs/architecture.md's "Adding a task" adds it: the
 * kernel against a double reference, each check of its descriptor
 * refusing a bad launch by name before anything is written, and the task
 * recorded under a dotted name and replayed with per-replay coefficients
 * (kernel_tasks_backends: also on CUDA, as test_kernels_cuda) ---- */

Test(kernels, axpby_matches_reference) {
  const float a = 0.3f, b = -1.25f;
  for (size_t s = 0; s < KR_NSHAPES; s++) {
    size_t n = kr_shapes[s][0] * kr_shapes[s][1];
    float *x = kr_random(n, 91 + (uint32_t)s, -1, 1);
    float *y = kr_random(n, 92, -1, 1);
    double *want = kr_dalloc(n);
    for (size_t i = 0; i < n; i++)
      want[i] = (double)a * x[i] + (double)b * y[i];
    rp_cpu_axpby(a, x, b, y, n);
    /* |x|, |y| < 1: three f32 roundings of terms below |a| + |b| */
    kr_close(y, want, n, 1e-6, fabs(a) + fabs(b), 0, "axpby");
    free(x), free(y), free(want);
  }
}

/* fn(ctx) is refused with `st` and a detail containing `want`, and y (n
 * floats) is as it was. */
static void axpby_refused(rp_task_ctx *ctx, rp_status st, const char *want,
                          const float *y, size_t n) {
  float *snap = kr_alloc(n);
  memcpy(snap, y, n * sizeof *y);
  rp_status got = rp_task_axpby_cpu(ctx);
  cr_assert(got == st, "%s: %s (%s)", want, rp_status_name(got),
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "want '%s', got '%s'", want,
            rp_error_detail());
  cr_assert(memcmp(y, snap, n * sizeof *y) == 0, "%s: Y written", want);
  free(snap);
}

Test(kernel_tasks, axpby_task_refuses_each_bad_launch_by_name) {
  enum { N = 8 };
  float *x = kr_random(N + 1, 93, -1, 1), *y = kr_random(2 * N, 94, -1, 1);
  int32_t xi[N] = {0};
  rp_axpby_args a = {.a = 2.0f, .b = 0.5f, .n = N};
  rp_instance_info in[3] = {inst2d(x, RP_F32, 1, N), inst2d(y, RP_F32, 1, N),
                            inst2d(y + N, RP_F32, 1, N)};
  rp_task_ctx ctx = cpu_ctx(NULL, 0, in, 2);
  axpby_refused(&ctx, RP_EINVAL,
                "rp.axpby: args are 0 bytes, need 12 (rp_axpby_args)", y, N);
  ctx = cpu_ctx(&a, sizeof a - 4, in, 2);
  axpby_refused(&ctx, RP_EINVAL, "rp.axpby: args are 8 bytes, need 12", y, N);
  ctx = cpu_ctx(&a, sizeof a, in, 2);
  a.n = -1;
  axpby_refused(&ctx, RP_EINVAL, "rp.axpby: n = -1 (need 0..2147483647)", y, N);
  a.n = N;
  ctx.naccess = 1;
  axpby_refused(&ctx, RP_ESHAPE, "rp.axpby: access 1 (Y) missing: 1 accesses",
                y, N);
  ctx.naccess = 3; /* a third instance the task would not touch */
  axpby_refused(&ctx, RP_ESHAPE,
                "rp.axpby: 3 accesses, the task takes at most 2", y, 2 * N);
  ctx.naccess = 2;
  in[0] = inst2d(xi, RP_I32, 1, N);
  axpby_refused(&ctx, RP_ETYPE, "rp.axpby: access 0 (X) is i32, needs f32", y,
                N);
  in[0] = inst2d(x, RP_F32, 1, N);
  in[1] = inst2d(y, RP_F32, 1, N - 1);
  axpby_refused(&ctx, RP_ESHAPE,
                "rp.axpby: access 1 (Y) has 7 elements, needs 8", y, N);
  a.n = 0; /* the whole of X: 8 elements */
  axpby_refused(&ctx, RP_ESHAPE,
                "rp.axpby: access 1 (Y) has 7 elements, needs 8", y, N);
  in[1] = inst2d(y, RP_F32, 2, N / 2);
  in[1].strides[0] = N / 2 + 1; /* rows with a gap: not dense */
  axpby_refused(&ctx, RP_ESHAPE,
                "rp.axpby: access 1 (Y) is not dense row-major", y, 2 * N);
  in[1] = inst2d(x + 1, RP_F32, 1, N); /* Y one element into X */
  axpby_refused(&ctx, RP_EINVAL,
                "rp.axpby: access 0 (X) and access 1 (Y) overlap", x, N + 1);

  /* the good launches: on separate memory, and Y on X's instance */
  in[1] = inst2d(y, RP_F32, 1, N);
  float want[N];
  for (int i = 0; i < N; i++)
    want[i] = 2.0f * x[i] + 0.5f * y[i];
  RP_CHECK(rp_task_axpby_cpu(&ctx));
  cr_assert(memcmp(y, want, sizeof want) == 0, "Y = 2 X + Y / 2");
  in[1] = in[0];
  for (int i = 0; i < N; i++)
    want[i] = 2.0f * x[i] + 0.5f * x[i];
  RP_CHECK(rp_task_axpby_cpu(&ctx));
  cr_assert(memcmp(x, want, sizeof want) == 0, "X = 2 X + X / 2 in place");
  free(x), free(y);
}

/* An exponential moving average of weights W: E = (1 - d) W + d E, with
 * the decay d a per-replay argument, recorded once as "ema.update". */
Test(kernel_tasks_backends, axpby_recorded_by_name_replays_new_coefficients) {
  enum { R = 37, C = 5, N = R * C };
  rp_runtime *rt = th_runtime(TH_BACKEND, 1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_proc proc = th_backend_proc(rt);
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, proc, &pi));
  float *w = kr_random(N, 95, -1, 1), *e = kr_random(N, 96, -1, 1);
  rp_rect r = rp_rect_2d(0, R - 1, 0, C - 1);
  rp_inst iw, ie;
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &r, NULL, &iw));
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &r, NULL, &ie));
  RP_CHECK(rp_instance_write(rt, iw, w, sizeof(float) * N));
  RP_CHECK(rp_instance_write(rt, ie, e, sizeof(float) * N));

  rp_access acc[2] = {{.inst = iw, .priv = RP_READ},
                      {.inst = ie, .priv = RP_RW}};
  rp_axpby_args a = {.a = 1.0f, .b = 0.0f, .n = 0}; /* replaced per replay */
  rp_interp ip = {.src_offset = 0,
                  .dst_offset = offsetof(rp_axpby_args, a),
                  .bytes = 2 * sizeof(float)}; /* a, then b */
  rp_launch l = {.task = k.axpby,
                 .proc = proc,
                 .accesses = acc,
                 .naccess = 2,
                 .args = &a,
                 .args_size = sizeof a,
                 .interps = &ip,
                 .ninterp = 1};
  rp_graph *g;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_name_next(rt, "ema.update"));
  RP_CHECK(rp_launch_task(rt, &l, NULL));
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  cr_assert_str_eq(rp_graph_op_name(g, 0), "ema.update");
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));

  double *want = kr_dalloc(N);
  for (int i = 0; i < N; i++)
    want[i] = e[i];
  const float decay[3] = {0.9f, 0.5f, 0.99f};
  for (int t = 0; t < 3; t++) {
    float ab[2] = {1.0f - decay[t], decay[t]};
    rp_replay_args ra = {.args = ab, .args_size = sizeof ab};
    rp_event done;
    RP_CHECK(rp_replay(ex, &ra, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
    for (int i = 0; i < N; i++)
      want[i] = (double)ab[0] * w[i] + (double)ab[1] * want[i];
  }
  float *got = kr_alloc(N);
  RP_CHECK(rp_instance_read(rt, ie, got, sizeof(float) * N));
  /* three steps of three f32 roundings each, on terms below 1 */
  kr_close(got, want, N, 1e-6, 1.0, 0, "ema.update after 3 replays");
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  free(w), free(e), free(want), free(got);
  th_destroy(rt);
}

/* ---- privileges: a launch of a table-described task declares at least
 * what the task does with each access (kernels/op_table.h,
 * rp_op_check_privs); otherwise it is refused before anything runs or is
 * recorded ---- */

enum { PN = 8 };

typedef struct priv_fx {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_mem sys;
  rp_inst x, y;
} priv_fx;

static void priv_fx_init(priv_fx *f) {
  f->rt = th_cpu_runtime(2);
  RP_CHECK(rp_kernels_register(f->rt, &f->k));
  RP_CHECK(rp_mem_find(f->rt, RP_MEM_SYSTEM, -1, &f->sys));
  rp_mem sys = f->sys;
  rp_rect r = rp_rect_1d(0, PN - 1);
  float ones[PN];
  for (int i = 0; i < PN; i++)
    ones[i] = 1.0f;
  RP_CHECK(rp_instance_create(f->rt, sys, RP_F32, &r, NULL, &f->x));
  RP_CHECK(rp_instance_create(f->rt, sys, RP_F32, &r, NULL, &f->y));
  RP_CHECK(rp_instance_write(f->rt, f->x, ones, sizeof ones));
  RP_CHECK(rp_instance_write(f->rt, f->y, ones, sizeof ones));
}

/* n f32 instances of PN elements in system memory. */
static void priv_insts(priv_fx *f, rp_inst *i, int n) {
  rp_rect r = rp_rect_1d(0, PN - 1);
  for (int k = 0; k < n; k++)
    RP_CHECK(rp_instance_create(f->rt, f->sys, RP_F32, &r, NULL, &i[k]));
}

/* rp.gemm with *ga over i[0] (A, read), i[1] (B, read), i[2] (C, written):
 * acc holds the accesses the launch points to. */
static rp_launch priv_gemm(const priv_fx *f, const rp_inst *i, rp_gemm_args *ga,
                           rp_access acc[3]) {
  acc[0] = (rp_access){i[0], RP_READ, RP_REDOP_NONE};
  acc[1] = (rp_access){i[1], RP_READ, RP_REDOP_NONE};
  acc[2] = (rp_access){i[2], RP_WRITE, RP_REDOP_NONE};
  return (rp_launch){.task = f->k.gemm,
                     .proc = RP_PROC_ANY,
                     .accesses = acc,
                     .naccess = 3,
                     .args = ga,
                     .args_size = sizeof *ga};
}

/* Every element of inst is v. */
static void priv_expect(priv_fx *f, rp_inst inst, float v, const char *what) {
  float got[PN];
  RP_CHECK(rp_instance_read(f->rt, inst, got, sizeof got));
  for (int i = 0; i < PN; i++)
    cr_assert(got[i] == v, "%s: [%d] = %g, expected %g", what, i,
              (double)got[i], (double)v);
}

static void priv_refused(rp_status st, const char *want) {
  cr_assert(st == RP_EINVAL, "want RP_EINVAL, got %s (%s)", rp_status_name(st),
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "want '%s', got '%s'", want,
            rp_error_detail());
}

/* rp.axpy: Y += value * X, with X and Y declared as given. */
static rp_launch axpy_launch(priv_fx *f, rp_access *acc, rp_privilege px,
                             rp_privilege py, const rp_scalar_args *a) {
  acc[0] = (rp_access){f->x, px, RP_REDOP_NONE};
  acc[1] = (rp_access){f->y, py, RP_REDOP_NONE};
  return (rp_launch){.task = f->k.axpy,
                     .proc = RP_PROC_ANY,
                     .accesses = acc,
                     .naccess = 2,
                     .args = a,
                     .args_size = sizeof *a};
}

Test(kernel_privs, eager_launch_declaring_less_than_the_task_does_is_refused) {
  priv_fx f;
  priv_fx_init(&f);
  rp_scalar_args a = {.value = 1.0f, .n = 0};
  rp_access acc[2];
  rp_event done = {0};
  /* Y read and written, declared read: nothing runs, Y stays 1 */
  rp_launch l = axpy_launch(&f, acc, RP_READ, RP_READ, &a);
  priv_refused(rp_launch_task(f.rt, &l, &done),
               "rp_launch_task: task 'rp.axpy': access 1 (Y) is declared "
               "RP_READ, and the task reads and writes it: declare RP_RW");
  cr_assert_eq(done.id, 0, "*done set by a refused launch");
  /* declared WRITE: the task reads Y too (WRITE may drop its contents) */
  l = axpy_launch(&f, acc, RP_READ, RP_WRITE, &a);
  priv_refused(rp_launch_task(f.rt, &l, NULL),
               "access 1 (Y) is declared RP_WRITE, and the task reads and "
               "writes it: declare RP_RW");
  /* REDUCE is no write: other folds into Y would run beside it */
  acc[1] = (rp_access){f.y, RP_REDUCE, RP_REDOP_SUM};
  priv_refused(rp_launch_task(f.rt, &l, NULL),
               "access 1 (Y) is declared RP_REDUCE, and the task reads and "
               "writes it: declare RP_RW");
  /* X only read: declared WRITE is refused (the task reads it) */
  l = axpy_launch(&f, acc, RP_WRITE, RP_RW, &a);
  priv_refused(rp_launch_task(f.rt, &l, NULL),
               "access 0 (X) is declared RP_WRITE, and the task reads it: "
               "declare RP_READ or RP_RW");
  RP_CHECK(rp_runtime_drain(f.rt));
  priv_expect(&f, f.x, 1.0f, "X after the refusals");
  priv_expect(&f, f.y, 1.0f, "Y after the refusals");
  /* rp.fill writes X: READ refused, WRITE and RW run */
  rp_access fa = {f.x, RP_READ, RP_REDOP_NONE};
  rp_scalar_args fv = {.value = 3.0f, .n = 0};
  rp_launch fl = {.task = f.k.fill,
                  .proc = RP_PROC_ANY,
                  .accesses = &fa,
                  .naccess = 1,
                  .args = &fv,
                  .args_size = sizeof fv};
  priv_refused(rp_launch_task(f.rt, &fl, NULL),
               "task 'rp.fill': access 0 (X) is declared RP_READ, and the task "
               "overwrites it: declare RP_WRITE or RP_RW");
  RP_CHECK(rp_runtime_drain(f.rt));
  priv_expect(&f, f.x, 1.0f, "X after the refused fill");
  fa.priv = RP_RW;
  RP_CHECK(rp_launch_task(f.rt, &fl, NULL));
  fa.priv = RP_WRITE;
  fv.value = 2.0f;
  RP_CHECK(rp_launch_task(f.rt, &fl, NULL));
  /* the right declarations run, over-declaring X as RW too */
  l = axpy_launch(&f, acc, RP_RW, RP_RW, &a);
  RP_CHECK(rp_launch_task(f.rt, &l, NULL));
  l = axpy_launch(&f, acc, RP_READ, RP_RW, &a);
  RP_CHECK(rp_launch_task(f.rt, &l, NULL));
  RP_CHECK(rp_runtime_drain(f.rt));
  priv_expect(&f, f.y, 5.0f, "Y = 1 + 2 + 2");
  th_destroy(f.rt);
}

Test(kernel_privs, recorded_spmd_and_built_launches_are_refused_unrecorded) {
  priv_fx f;
  priv_fx_init(&f);
  rp_scalar_args a = {.value = 1.0f, .n = 0};
  rp_access acc[2];
  rp_launch bad = axpy_launch(&f, acc, RP_READ, RP_READ, &a);
  /* recorded: refused at the launch, the capture records nothing and
   * goes on */
  rp_graph *g;
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  rp_event ref = {0};
  priv_refused(rp_launch_task(f.rt, &bad, &ref),
               "rp_launch_task: task 'rp.axpy': access 1 (Y) is declared "
               "RP_READ");
  cr_assert_eq(ref.id, 0, "*done set by a refused launch");
  /* an SPMD launch: the same, once for all its shards */
  rp_launch spmd = bad;
  spmd.shards = 2;
  priv_refused(rp_launch_task(f.rt, &spmd, NULL),
               "task 'rp.axpy': access 1 (Y) is declared RP_READ");
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0, "a refused launch was recorded");
  RP_CHECK(rp_graph_destroy(g));
  /* eager SPMD too: nothing runs */
  priv_refused(rp_launch_task(f.rt, &spmd, NULL),
               "task 'rp.axpy': access 1 (Y) is declared RP_READ");
  /* the builder */
  RP_CHECK(rp_graph_create(f.rt, &g));
  priv_refused(rp_graph_add_task(g, &bad, NULL),
               "rp_graph_add_task: task 'rp.axpy': access 1 (Y) is declared "
               "RP_READ");
  cr_assert_eq(rp_graph_op_count(g), 0, "a refused task was added");
  rp_launch good = axpy_launch(&f, acc, RP_READ, RP_RW, &a);
  RP_CHECK(rp_graph_add_task(g, &good, NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(f.rt, done, -1));
  RP_CHECK(rp_event_release(f.rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_runtime_drain(f.rt));
  priv_expect(&f, f.y, 2.0f, "Y after the one good replay");
  th_destroy(f.rt);
}

/* A graph file is checked as it loads: one saved where "rp.axpy" was a
 * plain task (no descriptor: its privileges are the caller's word) loads
 * on a runtime with the kernels registered only with the privileges the
 * task needs. */
static rp_status plain_axpy(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

Test(kernel_privs, a_loaded_graph_declaring_too_little_is_refused) {
  th_tmpdir_make("/tmp/rp_privs_XXXXXX");
  const char *path = th_tmp_path("axpy.json");
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "rp.axpy", plain_axpy);
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect r = rp_rect_1d(0, PN - 1);
  rp_inst in[2];
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_create(rt, sys, RP_F32, &r, NULL, &in[i]));
  rp_access acc[2] = {{in[0], RP_READ, RP_REDOP_NONE},
                      {in[1], RP_READ, RP_REDOP_NONE}};
  rp_scalar_args a = {.value = 1.0f, .n = 0};
  rp_launch l = {.task = t,
                 .proc = RP_PROC_ANY,
                 .accesses = acc,
                 .naccess = 2,
                 .args = &a,
                 .args_size = sizeof a};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &l, NULL)); /* a plain task: accepted */
  RP_CHECK(rp_graph_save(g, path));
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_free(rt, in[i]));
  th_destroy(rt);

  priv_fx f;
  priv_fx_init(&f);
  rp_inst fin[2] = {f.x, f.y};
  g = NULL;
  priv_refused(rp_graph_load(f.rt, path, fin, 2, &g),
               "task 'rp.axpy': access 1 (Y) is declared RP_READ, and the "
               "task reads and writes it: declare RP_RW");
  cr_assert_null(g, "a graph left behind");
  priv_expect(&f, f.y, 1.0f, "Y");
  th_destroy(f.rt);
  th_tmpdir_remove();
}

/* Privileges that depend on the args: gpt.matmul_bwd's dinp (WRITE, also
 * READ when accumulate), rp.gemm's C (also READ when beta != 0), gpt.xent's
 * logits (READ, also WRITE when grad), rp.bias_act's A (present only when
 * act is RELU). A field an interpolation writes may take any value at a
 * replay: it counts as on. */
Test(kernel_privs, privileges_that_depend_on_the_args) {
  priv_fx f;
  priv_fx_init(&f);
  rp_inst i[6];
  priv_insts(&f, i, 6);
  /* gemm 2 x 2 x 2 */
  rp_gemm_args ga = {2, 2, 2, 0, 0, 1.0f, 0.0f};
  rp_access gacc[3];
  rp_launch gl = priv_gemm(&f, i, &ga, gacc);
  RP_CHECK(rp_launch_task(f.rt, &gl, NULL)); /* beta 0: C only written */
  ga.beta = -0.0f;                           /* compares equal to 0 */
  RP_CHECK(rp_launch_task(f.rt, &gl, NULL));
  ga.beta = 0.5f;
  priv_refused(rp_launch_task(f.rt, &gl, NULL),
               "task 'rp.gemm': access 2 (C) is declared RP_WRITE, and the "
               "task reads and writes it (as beta is nonzero): declare RP_RW");
  gacc[2].priv = RP_RW;
  RP_CHECK(rp_launch_task(f.rt, &gl, NULL));
  /* beta interpolated in a recorded launch: counts as nonzero */
  ga.beta = 0.0f;
  gacc[2].priv = RP_WRITE;
  rp_interp ip = {0, offsetof(rp_gemm_args, beta), sizeof(float)};
  gl.interps = &ip;
  gl.ninterp = 1;
  rp_graph *g;
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  priv_refused(rp_launch_task(f.rt, &gl, NULL),
               "access 2 (C) is declared RP_WRITE, and the task reads and "
               "writes it (as beta is interpolated): declare RP_RW");
  /* alpha and beta together (one interpolation over both) too */
  ip = (rp_interp){0, offsetof(rp_gemm_args, alpha), 2 * sizeof(float)};
  priv_refused(rp_launch_task(f.rt, &gl, NULL), "(as beta is interpolated)");
  ip = (rp_interp){0, offsetof(rp_gemm_args, alpha), sizeof(float)};
  RP_CHECK(rp_launch_task(f.rt, &gl, NULL)); /* alpha alone: C written */
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  RP_CHECK(rp_graph_destroy(g));

  /* gpt.matmul_bwd N 2, C 2, OC 2, no bias */
  rp_gpt_matmul_args ma = {2, 2, 2, 0, 1};
  rp_access macc[5] = {{i[0], RP_READ, RP_REDOP_NONE},
                       {i[1], RP_READ, RP_REDOP_NONE},
                       {i[2], RP_READ, RP_REDOP_NONE},
                       {i[3], RP_WRITE, RP_REDOP_NONE},
                       {i[4], RP_WRITE, RP_REDOP_NONE}};
  rp_launch ml = {.task = f.k.matmul_bwd,
                  .proc = RP_PROC_ANY,
                  .accesses = macc,
                  .naccess = 5,
                  .args = &ma,
                  .args_size = sizeof ma};
  priv_refused(rp_launch_task(f.rt, &ml, NULL),
               "task 'gpt.matmul_bwd': access 3 (dinp) is declared RP_WRITE, "
               "and the task reads and writes it (as accumulate is nonzero): "
               "declare RP_RW");
  ma.accumulate = 0;
  RP_CHECK(rp_launch_task(f.rt, &ml, NULL));
  /* dW is always only written: READ is refused */
  macc[4].priv = RP_READ;
  priv_refused(rp_launch_task(f.rt, &ml, NULL),
               "access 4 (dW) is declared RP_READ, and the task overwrites "
               "it: declare RP_WRITE or RP_RW");
  macc[4].priv = RP_WRITE;

  /* gpt.xent N 2, V 4: logits read, and written with grad */
  rp_inst tg;
  rp_rect r2 = rp_rect_1d(0, 1);
  RP_CHECK(rp_instance_create(f.rt, f.sys, RP_I32, &r2, NULL, &tg));
  int32_t tv[2] = {0, 1};
  RP_CHECK(rp_instance_write(f.rt, tg, tv, sizeof tv));
  rp_gpt_xent_args xa = {.N = 2, .V = 4, .norm = 0.0f, .grad = 1};
  rp_access xacc[4] = {{i[0], RP_READ, RP_REDOP_NONE},
                       {tg, RP_READ, RP_REDOP_NONE},
                       {i[4], RP_WRITE, RP_REDOP_NONE},
                       {i[5], RP_WRITE, RP_REDOP_NONE}};
  rp_launch xl = {.task = f.k.xent,
                  .proc = RP_PROC_ANY,
                  .accesses = xacc,
                  .naccess = 4,
                  .args = &xa,
                  .args_size = sizeof xa};
  priv_refused(rp_launch_task(f.rt, &xl, NULL),
               "task 'gpt.xent': access 0 (logits) is declared RP_READ, and "
               "the task reads and writes it (as grad is nonzero): declare "
               "RP_RW");
  xa.grad = 0;
  RP_CHECK(rp_launch_task(f.rt, &xl, NULL));

  /* rp.bias_act 2 x 4 without act: A (access 2) is not touched, whatever
   * its declaration; with act interpolated it is written */
  rp_bias_act_args ba = {2, 4, RP_ACT_NONE};
  rp_rect r4 = rp_rect_1d(0, 3);
  rp_inst bias;
  RP_CHECK(rp_instance_create(f.rt, f.sys, RP_F32, &r4, NULL, &bias));
  rp_access bacc[3] = {{i[0], RP_RW, RP_REDOP_NONE},
                       {bias, RP_READ, RP_REDOP_NONE},
                       {i[1], RP_READ, RP_REDOP_NONE}};
  rp_launch bl = {.task = f.k.bias_act,
                  .proc = RP_PROC_ANY,
                  .accesses = bacc,
                  .naccess = 3,
                  .args = &ba,
                  .args_size = sizeof ba};
  RP_CHECK(rp_launch_task(f.rt, &bl, NULL));
  rp_interp aip = {0, offsetof(rp_bias_act_args, act), sizeof ba.act};
  bl.interps = &aip;
  bl.ninterp = 1;
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  priv_refused(rp_launch_task(f.rt, &bl, NULL),
               "task 'rp.bias_act': access 2 (A) is declared RP_READ, and "
               "the task overwrites it: declare RP_WRITE or RP_RW");
  bacc[2].priv = RP_WRITE;
  RP_CHECK(rp_launch_task(f.rt, &bl, NULL));
  RP_CHECK(rp_capture_end(f.rt, &g));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_runtime_drain(f.rt));
  for (int k = 0; k < 6; k++)
    RP_CHECK(rp_instance_free(f.rt, i[k]));
  RP_CHECK(rp_instance_free(f.rt, tg));
  RP_CHECK(rp_instance_free(f.rt, bias));
  th_destroy(f.rt);
}

/* rp_graph_add_interp checks the op's privileges under its interpolations,
 * the new one included, as rp_graph_add_task checks a launch's: an
 * interpolation of rp.gemm's beta onto a C declared RP_WRITE is refused
 * at the call, the op unchanged (it instantiates, saves and loads back),
 * not left for instantiate (nothing could fix the op then, and the saved
 * file would not load). */
Test(kernel_privs, an_interpolation_added_later_is_checked_at_the_call) {
  priv_fx f;
  priv_fx_init(&f);
  rp_inst i[3];
  priv_insts(&f, i, 3);
  rp_gemm_args ga = {2, 2, 2, 0, 0, 1.0f, 0.0f};
  rp_access gacc[3];
  rp_launch gl = priv_gemm(&f, i, &ga, gacc);
  rp_graph *g;
  RP_CHECK(rp_graph_create(f.rt, &g));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g, &gl, &op)); /* beta 0: C only written */
  rp_interp alpha = {0, offsetof(rp_gemm_args, alpha), sizeof(float)};
  RP_CHECK(rp_graph_add_interp(g, op, &alpha)); /* alpha: C still written */
  rp_interp beta = {4, offsetof(rp_gemm_args, beta), sizeof(float)};
  priv_refused(rp_graph_add_interp(g, op, &beta),
               "rp_graph_add_interp: task 'rp.gemm': access 2 (C) is "
               "declared RP_WRITE, and the task reads and writes it (as beta "
               "is interpolated): declare RP_RW");
  RP_CHECK(rp_graph_validate(g)); /* the op as it was: one interpolation */
  th_tmpdir_make("/tmp/rp_privs_XXXXXX");
  const char *path = th_tmp_path("gemm.json");
  RP_CHECK(rp_graph_save(g, path));
  rp_graph *back = NULL;
  RP_CHECK(rp_graph_load(f.rt, path, i, 3, &back));
  RP_CHECK(rp_graph_destroy(back));
  RP_CHECK(rp_graph_destroy(g));
  /* declared RP_RW, the same interpolation is accepted */
  gacc[2].priv = RP_RW;
  RP_CHECK(rp_graph_create(f.rt, &g));
  RP_CHECK(rp_graph_add_task(g, &gl, &op));
  RP_CHECK(rp_graph_add_interp(g, op, &beta));
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(rp_graph_destroy(g));
  for (int k = 0; k < 3; k++)
    RP_CHECK(rp_instance_free(f.rt, i[k]));
  th_tmpdir_remove();
  th_destroy(f.rt);
}

/* Every kernel task is registered with its descriptor's privilege check. */
Test(kernel_privs, every_kernel_task_checks_its_launches_privileges) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  const rp_task_id *ids = (const rp_task_id *)&k;
  for (size_t n = 0; n < sizeof k / sizeof *ids; n++) {
    const rp_task_rec *t = rp__task_get(rt, ids[n]);
    cr_assert(t && t->priv_fn, "task %zu has no privilege check", n);
    cr_assert_eq(t->priv_arg, rp_kernel_op(t->name), "%s", t->name);
  }
  th_destroy(rt);
}

/* ---- a kernel task is never visible without its descriptor ---- */

typedef struct finder {
  rp_runtime *rt;
  const char *name;
  int found, checked, covered;
} finder;

/* Spins until the task is findable by name, then reads what a launch
 * reads: its privilege check and its cover hook. */
static void *find_task(void *arg) {
  finder *f = arg;
  rp_task_id id;
  while (!rp__task_lookup(f->rt, f->name, &id))
    sched_yield();
  const rp_task_rec *t = rp__task_get(f->rt, id);
  f->found = t != NULL;
  f->checked = t && t->priv_fn != NULL;
  f->covered = t && t->cover_fn != NULL;
  return NULL;
}

/* The hooks are part of the registration: a thread that finds a kernel
 * task by name while rp_kernels_register runs never sees it unchecked.
 * The window this guards (hooks set after the task became findable) is a
 * few instructions wide: a plain build catches it now and then, a
 * ThreadSanitizer build (make test-tsan) reports the unordered read and
 * write every time. */
Test(kernels, a_task_found_during_registration_has_its_descriptor) {
  rp_runtime *rt = th_cpu_runtime(1);
  finder f[2] = {{rt, "rp.gemm", 0, 0, 0}, {rt, "gpt.sumsq", 0, 0, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, find_task, &f[i]), 0);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(pthread_join(th[i], NULL), 0);
    cr_assert(f[i].found, "%s", f[i].name);
    cr_assert(f[i].checked, "%s found without its privilege check", f[i].name);
    cr_assert(f[i].covered, "%s found without its cover hook", f[i].name);
  }
  th_destroy(rt);
}

/* What copy insertion asks before leaving out a WRITE mirror's fill. */
Test(kernels, writes_whole_only_where_the_count_is_exact_and_fixed) {
  const rp_op *fill = rp_kernel_op("rp.fill");
  const rp_op *relu = rp_kernel_op("rp.relu_fwd");
  const rp_op *axpy = rp_kernel_op("rp.axpy");
  cr_assert(fill && relu && axpy);
  int64_t vol[2] = {4, 4};
  rp_scalar_args s = {1.0f, 0};
  rp_interp on_n = {0, offsetof(rp_scalar_args, n), 4};
  cr_assert(rp_op_writes_whole(fill, &s, sizeof s, vol, 1, 0, NULL, 0),
            "n 0: the whole instance");
  cr_assert(!rp_op_writes_whole(fill, &s, sizeof s, vol, 1, 0, &on_n, 1),
            "a replay may set n");
  s.n = 2;
  cr_assert(!rp_op_writes_whole(fill, &s, sizeof s, vol, 1, 0, NULL, 0),
            "2 of 4 elements");
  s.n = 4;
  cr_assert(rp_op_writes_whole(fill, &s, sizeof s, vol, 1, 0, NULL, 0));
  cr_assert(!rp_op_writes_whole(fill, &s, 4, vol, 1, 0, NULL, 0),
            "args too short");
  s.n = -1;
  cr_assert(!rp_op_writes_whole(fill, &s, sizeof s, vol, 1, 0, NULL, 0),
            "n out of range: the task refuses it");
  rp_elementwise_args e = {0};
  int64_t big_y[2] = {4, 8};
  cr_assert(rp_op_writes_whole(relu, &e, sizeof e, vol, 2, 1, NULL, 0));
  cr_assert(!rp_op_writes_whole(relu, &e, sizeof e, big_y, 2, 1, NULL, 0),
            "Y larger than X's count");
  cr_assert(!rp_op_writes_whole(relu, &e, sizeof e, vol, 2, 0, NULL, 0),
            "X is read");
  s.n = 0;
  cr_assert(!rp_op_writes_whole(axpy, &s, sizeof s, vol, 2, 1, NULL, 0),
            "Y is read and written");
}

/* ---- the body's checks at launch: a table-described task's launch whose
 * args or accesses its body would refuse (kernels/op_table.h,
 * rp_op_check_launch) is refused by the launch call itself, with the
 * body's status and detail, before anything runs or is recorded; a check
 * that reads a field an interpolation writes waits for the replay ---- */

typedef struct launch_case {
  const char *what;
  rp_launch l;
  rp_status want;
  const char *detail; /* after the call's "NAME: " */
} launch_case;

static void launch_refused(rp_status st, const launch_case *c,
                           const char *call) {
  char want[256];
  snprintf(want, sizeof want, "%s: %s", call, c->detail);
  cr_assert(st == c->want, "%s: want %s, got %s (%s)", c->what,
            rp_status_name(c->want), rp_status_name(st), rp_error_detail());
  cr_assert(strstr(rp_error_detail(), want), "%s: want '%s', got '%s'", c->what,
            want, rp_error_detail());
}

Test(kernel_launch, a_launch_the_body_would_refuse_is_refused_unrecorded) {
  priv_fx f;
  priv_fx_init(&f);
  rp_mem sys = f.sys;
  rp_rect r = rp_rect_1d(0, PN - 1), r2 = rp_rect_2d(0, 1, 0, PN / 2 - 1);
  const int64_t colmajor[2] = {1, 2};
  rp_inst xi, xs;
  RP_CHECK(rp_instance_create(f.rt, sys, RP_I32, &r, NULL, &xi));
  RP_CHECK(rp_instance_create(f.rt, sys, RP_F32, &r2, colmajor, &xs));
  rp_scalar_args fill = {.value = 5.0f, .n = 0}, bad_n = {.value = 5.0f, -1},
                 big_n = {.value = 5.0f, .n = PN + 1};
  rp_sgd_args sgd = {.lr = -1.0f, .momentum = 0.0f, .n = 0};
  rp_elementwise_args ew = {.n = 0};
  rp_sgd_multi_args multi = {.lr = 0.1f, .momentum = 0.0f, .count = 2};
  rp_access wx = {f.x, RP_WRITE, RP_REDOP_NONE},
            wxy[2] = {{f.x, RP_WRITE, RP_REDOP_NONE},
                      {f.y, RP_WRITE, RP_REDOP_NONE}},
            rx = {f.x, RP_READ, RP_REDOP_NONE},
            wxi = {xi, RP_WRITE, RP_REDOP_NONE},
            wxs = {xs, RP_WRITE, RP_REDOP_NONE},
            sgd_acc[3] = {{f.x, RP_RW, RP_REDOP_NONE},
                          {f.y, RP_READ, RP_REDOP_NONE},
                          {xs, RP_RW, RP_REDOP_NONE}},
            relu[3] = {{f.x, RP_READ, RP_REDOP_NONE},
                       {f.y, RP_READ, RP_REDOP_NONE},
                       {f.x, RP_WRITE, RP_REDOP_NONE}};
  char args_short[64], args_null[64];
  snprintf(args_null, sizeof args_null,
           "rp.fill: args are 0 bytes, need %zu (rp_scalar_args)",
           sizeof(rp_scalar_args));
  snprintf(args_short, sizeof args_short,
           "rp.fill: args are 4 bytes, need %zu (rp_scalar_args)",
           sizeof(rp_scalar_args));
#define LC(task_, acc_, nacc_, args_, size_)                                   \
  {                                                                            \
    .task = f.k.task_, .proc = RP_PROC_ANY, .accesses = acc_,                  \
    .naccess = nacc_, .args = args_, .args_size = size_                        \
  }
  const launch_case cases[] = {
      {"NULL args", LC(fill, &wx, 1, NULL, 0), RP_EINVAL, args_null},
      {"short args", LC(fill, &wx, 1, &fill, 4), RP_EINVAL, args_short},
      {"field out of range", LC(fill, &wx, 1, &bad_n, sizeof bad_n), RP_EINVAL,
       "rp.fill: n = -1 (need 0..2147483647)"},
      {"too many accesses", LC(fill, wxy, 2, &fill, sizeof fill), RP_ESHAPE,
       "rp.fill: 2 accesses, the task takes at most 1"},
      {"an access missing", LC(axpy, &rx, 1, &fill, sizeof fill), RP_ESHAPE,
       "rp.axpy: access 1 (Y) missing: 1 accesses"},
      {"wrong element type", LC(fill, &wxi, 1, &fill, sizeof fill), RP_ETYPE,
       "rp.fill: access 0 (X) is i32, needs f32"},
      {"instance too small", LC(fill, &wx, 1, &big_n, sizeof big_n), RP_ESHAPE,
       "rp.fill: access 0 (X) has 8 elements, needs 9"},
      {"not dense", LC(fill, &wxs, 1, &fill, sizeof fill), RP_ESHAPE,
       "rp.fill: access 0 (X) is not dense row-major"},
      {"check_args", LC(sgd, sgd_acc, 3, &sgd, sizeof sgd), RP_EINVAL,
       "rp.sgd: lr = -1, momentum = 0 (need finite, >= 0)"},
      {"overlap", LC(relu_bwd, relu, 3, &ew, sizeof ew), RP_EINVAL,
       "rp.relu_bwd: access 0 (X) and access 2 (dX) overlap"},
      {"too few for the count", LC(sgd_multi, sgd_acc, 3, &multi, sizeof multi),
       RP_ESHAPE, "rp.sgd_multi: 3 accesses for 2 tensors (need 6)"},
  };
#undef LC
  enum { NC = sizeof cases / sizeof cases[0] };
  /* recorded, single and SPMD: refused at the call, the capture records
   * nothing and goes on */
  rp_graph *g;
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  for (int i = 0; i < NC; i++) {
    rp_event ref = {0};
    launch_refused(rp_launch_task(f.rt, &cases[i].l, &ref), &cases[i],
                   "rp_launch_task");
    cr_assert_eq(ref.id, 0, "%s: *done set by a refused launch", cases[i].what);
    rp_launch spmd = cases[i].l;
    spmd.shards = 2;
    launch_refused(rp_launch_task(f.rt, &spmd, NULL), &cases[i],
                   "rp_launch_task");
  }
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0, "a refused launch was recorded");
  RP_CHECK(rp_graph_destroy(g));
  /* the builder, and eager launches: nothing added, nothing runs */
  RP_CHECK(rp_graph_create(f.rt, &g));
  for (int i = 0; i < NC; i++) {
    launch_refused(rp_graph_add_task(g, &cases[i].l, NULL), &cases[i],
                   "rp_graph_add_task");
    rp_event done = {0};
    launch_refused(rp_launch_task(f.rt, &cases[i].l, &done), &cases[i],
                   "rp_launch_task");
    cr_assert_eq(done.id, 0, "%s: *done set by a refused launch",
                 cases[i].what);
  }
  cr_assert_eq(rp_graph_op_count(g), 0, "a refused task was added");
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_runtime_drain(f.rt));
  priv_expect(&f, f.x, 1.0f, "X after the refusals");
  priv_expect(&f, f.y, 1.0f, "Y after the refusals");
  /* the good launch runs */
  rp_launch ok = {.task = f.k.fill,
                  .proc = RP_PROC_ANY,
                  .accesses = &wx,
                  .naccess = 1,
                  .args = &fill,
                  .args_size = sizeof fill};
  RP_CHECK(rp_launch_task(f.rt, &ok, NULL));
  RP_CHECK(rp_runtime_drain(f.rt));
  priv_expect(&f, f.x, 5.0f, "X after the good fill");
  RP_CHECK(rp_instance_free(f.rt, xi));
  RP_CHECK(rp_instance_free(f.rt, xs));
  th_destroy(f.rt);
}

/* One replay of ex with the replay argument bytes v (n bytes): its
 * status. */
static rp_status replay_with(rp_runtime *rt, rp_exec *ex, const void *v,
                             size_t n) {
  rp_replay_args ra = {.args = v, .args_size = n};
  rp_event done;
  RP_CHECK(rp_replay(ex, &ra, &done));
  rp_status st = rp_event_wait(rt, done, -1);
  RP_CHECK(rp_event_release(rt, done));
  return st;
}

/* A field an interpolation writes is checked when the task runs: the
 * recorded value is not (a placeholder out of range is accepted), the
 * replayed ones are, by the body's check in every replay. Fields no
 * interpolation writes are still checked at the launch. */
Test(kernel_launch, an_interpolated_field_is_checked_by_the_replay) {
  priv_fx f;
  priv_fx_init(&f);
  rp_access wx = {f.x, RP_WRITE, RP_REDOP_NONE};
  rp_scalar_args a = {.value = 4.0f, .n = -1}; /* n: each replay's */
  rp_interp ip = {.src_offset = 0,
                  .dst_offset = offsetof(rp_scalar_args, n),
                  .bytes = sizeof a.n};
  rp_launch l = {.task = f.k.fill,
                 .proc = RP_PROC_ANY,
                 .accesses = &wx,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a,
                 .interps = &ip,
                 .ninterp = 1};
  rp_graph *g;
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  RP_CHECK(rp_launch_task(f.rt, &l, NULL));
  /* value is not interpolated: a count past X still is refused when the
   * interpolation writes another field */
  rp_scalar_args big = {.value = 4.0f, .n = PN + 1};
  rp_interp ipv = {.src_offset = 0,
                   .dst_offset = offsetof(rp_scalar_args, value),
                   .bytes = sizeof big.value};
  rp_launch lv = l;
  lv.args = &big;
  lv.interps = &ipv;
  RP_EXPECT(rp_launch_task(f.rt, &lv, NULL), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp_launch_task: rp.fill: access 0 (X) "
                                      "has 8 elements, needs 9"),
            "%s", rp_error_detail());
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  int32_t n = PN;
  RP_CHECK(replay_with(f.rt, ex, &n, sizeof n));
  priv_expect(&f, f.x, 4.0f, "X after a replay with n = 8");
  n = PN + 1; /* past X */
  RP_EXPECT(replay_with(f.rt, ex, &n, sizeof n), RP_ESHAPE);
  cr_assert(strstr(rp_exec_error_detail(ex),
                   "rp.fill: access 0 (X) has 8 elements, needs 9"),
            "%s", rp_exec_error_detail(ex));
  n = -1; /* out of its range */
  RP_EXPECT(replay_with(f.rt, ex, &n, sizeof n), RP_EINVAL);
  cr_assert(strstr(rp_exec_error_detail(ex), "rp.fill: n = -1"), "%s",
            rp_exec_error_detail(ex));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));

  /* check_args reads any field: an interpolation of the args leaves it to
   * the replay (rp.sgd's lr) */
  rp_sgd_args s = {.lr = -1.0f, .momentum = 0.0f, .n = 0};
  rp_interp ilr = {.src_offset = 0,
                   .dst_offset = offsetof(rp_sgd_args, lr),
                   .bytes = sizeof s.lr};
  rp_mem sys = f.sys;
  rp_rect r = rp_rect_1d(0, PN - 1);
  rp_inst v;
  RP_CHECK(rp_instance_create(f.rt, sys, RP_F32, &r, NULL, &v));
  rp_access sa[3] = {{f.x, RP_RW, RP_REDOP_NONE},
                     {f.y, RP_READ, RP_REDOP_NONE},
                     {v, RP_RW, RP_REDOP_NONE}};
  rp_launch sl = {.task = f.k.sgd,
                  .proc = RP_PROC_ANY,
                  .accesses = sa,
                  .naccess = 3,
                  .args = &s,
                  .args_size = sizeof s,
                  .interps = &ilr,
                  .ninterp = 1};
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  RP_CHECK(rp_launch_task(f.rt, &sl, NULL));
  RP_CHECK(rp_capture_end(f.rt, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  float lr = -1.0f;
  RP_EXPECT(replay_with(f.rt, ex, &lr, sizeof lr), RP_EINVAL);
  cr_assert(strstr(rp_exec_error_detail(ex), "rp.sgd: lr = -1"), "%s",
            rp_exec_error_detail(ex));
  lr = 1.0f; /* X = 4 - 1 x 1 */
  RP_CHECK(replay_with(f.rt, ex, &lr, sizeof lr));
  priv_expect(&f, f.x, 3.0f, "X after one SGD step");
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(f.rt, v));
  th_destroy(f.rt);
}

/* A graph file is checked as it loads: one saved where "rp.fill" was a
 * plain task (no descriptor, nothing checked) and whose count is past its
 * instance does not load on a runtime with the kernels registered. */
Test(kernel_launch, a_loaded_graph_the_body_would_refuse_does_not_load) {
  th_tmpdir_make("/tmp/rp_launchchk_XXXXXX");
  const char *path = th_tmp_path("fill.json");
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "rp.fill", plain_axpy);
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect r = rp_rect_1d(0, PN - 1);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &r, NULL, &in));
  rp_access acc = {in, RP_WRITE, RP_REDOP_NONE};
  rp_scalar_args a = {.value = 2.0f, .n = PN + 1};
  rp_launch l = {.task = t,
                 .proc = RP_PROC_ANY,
                 .accesses = &acc,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &l, NULL)); /* a plain task: accepted */
  RP_CHECK(rp_graph_save(g, path));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);

  priv_fx f;
  priv_fx_init(&f);
  g = NULL;
  rp_status st = rp_graph_load(f.rt, path, &f.x, 1, &g);
  cr_assert(st == RP_ESHAPE, "want RP_ESHAPE, got %s (%s)", rp_status_name(st),
            rp_error_detail());
  cr_assert(strstr(rp_error_detail(),
                   "rp.fill: access 0 (X) has 8 elements, needs 9"),
            "%s", rp_error_detail());
  cr_assert_null(g, "a graph left behind");
  priv_expect(&f, f.x, 1.0f, "X");
  th_destroy(f.rt);
  th_tmpdir_remove();
}
