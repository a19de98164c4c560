/* kernels/cpu_kernels.c — see cpu_kernels.h for the contracts and layouts. */
#include "cpu_kernels.h"
#include "vexpf.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#ifdef REPRISE_HAVE_BLAS
#include <cblas.h>
#endif

int rp__vec_plain; /* vexpf.h: 0, the AVX2 copies where the CPU has AVX2 */

/* ---------------------------------------------------------------------- */
/* GEMM */

/* C = beta * C over m x n, honouring "beta == 0: C is not read". */
static void scale_c(float *c, size_t mn, float beta) {
  if (beta == 0.0f)
    rp_cpu_fill(c, 0.0f, mn);
  else if (beta != 1.0f)
    rp_cpu_scale(c, beta, mn);
}

#ifdef REPRISE_HAVE_BLAS
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* OpenBLAS's own thread pool would put N threads behind every GEMM task, and
 * the runtime already runs one task per core on its CPU workers: one thread
 * per call. This is process-wide (OpenBLAS keeps one setting). */
static void blas_setup(void) {
  openblas_set_num_threads(1);
}

/* The pthreads build of OpenBLAS starts one server thread per core when it
 * loads, and each polls its queue with sched_yield for about 2^28 cycles
 * (~0.1 s) before it sleeps: on a 16-core machine, 15 threads competing
 * with the CPU workers for the first tenth of a second of every process
 * (measured here: 103 ms of CPU in a 200 ms sleep with one such thread).
 * reprise runs OpenBLAS on one thread, so when this library loads it sets
 * that and stops the pool through OpenBLAS's exported shutdown (the one its
 * fork handler uses; weak: absent in other builds, then only the setting
 * applies). Process-wide, as blas_setup is. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

__attribute__((constructor)) static void blas_pool_stop(void) {
  pthread_once(&blas_once, blas_setup);
  if (blas_thread_shutdown_)
    blas_thread_shutdown_();
}

/* Per-thread scratch, grown on demand and freed when the thread exits:
 * after the first steps a worker's GEMMs allocate nothing. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

typedef struct scratch {
  size_t cap; /* floats */
  float v[];
} scratch;

static void scratch_key_init(void) {
  (void)pthread_key_create(&scratch_key, free);
}

static float *scratch_get(size_t n) {
  pthread_once(&scratch_once, scratch_key_init);
  scratch *s = pthread_getspecific(scratch_key);
  if (s && s->cap >= n)
    return s->v;
  scratch *g = realloc(s, sizeof *g + n * sizeof(float));
  if (!g)
    return NULL; /* s stays set: the caller falls back to plain BLAS */
  g->cap = n;
  (void)pthread_setspecific(scratch_key, g);
  return g->v;
}

/* OpenBLAS 0.3.21 (Debian 12) runs A B with a narrow B (n < 16, "small
 * matrix" sizes) in kernels that malloc a scratch buffer on every call on
 * AVX-512 machines (sgemm_small_kernel_b0_nn_COOPERLAKE: 512 B to 1.5 KiB
 * a call in the training step), which would break the replay path's
 * promise of allocating nothing. The same product as C^T = B^T A^T (both
 * operands transposed, which those kernels do not take) into per-thread
 * scratch, then transposed into C, allocates nothing after warm-up and
 * costs about as much (2.5 us instead of 1.2 us at 128 x 3 x 64). */
static int gemm_transposed(int m, int n, int k, float alpha, const float *a,
                           const float *b, float beta, float *c) {
  size_t mn = (size_t)m * (size_t)n;
  float *t =
      n < 16 && mn * (size_t)k <= ((size_t)1 << 21) ? scratch_get(mn) : NULL;
  if (!t)
    return 0;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, n, m, k, alpha, b, n, a, k,
              0.0f, t, m);
  for (size_t i = 0; i < (size_t)m; i++)
    for (size_t j = 0; j < (size_t)n; j++) {
      float *cij = &c[i * (size_t)n + j];
      float v = t[j * (size_t)m + i];
      *cij = beta == 0.0f ? v : v + beta * *cij;
    }
  return 1;
}

static void gemm_blas(int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, const float *b, float beta, float *c) {
  pthread_once(&blas_once, blas_setup);
  if (m == 1) {
    /* One row (the decode step's every product): a GEMV reads B where it
     * is, where OpenBLAS's GEMM first packs all of B into a buffer, a copy
     * of the whole weight matrix per call (up to 3.6x the time at 2048 x
     * 512). beta 0: C zeroed first, so that it is not read (a BLAS may
     * scale it by 0, and NaN x 0 is NaN). */
    if (beta == 0.0f)
      rp_cpu_fill(c, 0.0f, (size_t)n);
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? n : k,
                tb ? k : n, alpha, b, tb ? k : n, a, 1, beta, c, 1);
    return;
  }
  if (!ta && !tb && gemm_transposed(m, n, k, alpha, a, b, beta, c))
    return;
  /* Row-major leading dimensions are the stored row lengths. */
  int lda = ta ? m : k, ldb = tb ? k : n;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, n);
}
#else
/* Fallback when the build found no BLAS: a plain triple loop. Correct (the
 * tests run against it in such builds) but one to two orders of magnitude
 * slower than OpenBLAS; sums each dot product in f32 in order of p. */
static void gemm_naive(int ta, int tb, int m, int n, int k, float alpha,
                       const float *a, const float *b, float beta, float *c) {
  for (size_t i = 0; i < (size_t)m; i++)
    for (size_t j = 0; j < (size_t)n; j++) {
      float acc = 0.0f;
      for (size_t p = 0; p < (size_t)k; p++) {
        float av = ta ? a[p * (size_t)m + i] : a[i * (size_t)k + p];
        float bv = tb ? b[j * (size_t)k + p] : b[p * (size_t)n + j];
        acc += av * bv;
      }
      float *cij = &c[i * (size_t)n + j];
      *cij = beta == 0.0f ? alpha * acc : alpha * acc + beta * *cij;
    }
}
#endif

void rp_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, const float *b, float beta, float *c) {
  if (m <= 0 || n <= 0)
    return;
  /* No product term: handled here so that k == 0 never reaches BLAS with a
   * zero leading dimension. */
  if (k <= 0 || alpha == 0.0f) {
    scale_c(c, (size_t)m * (size_t)n, beta);
    return;
  }
#ifdef REPRISE_HAVE_BLAS
  gemm_blas(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
#else
  gemm_naive(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
#endif
}

/* ---------------------------------------------------------------------- */
/* Bias and ReLU */

void rp_cpu_bias_add(float *x, const float *bias, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++) {
    float *row = x + r * cols;
    for (size_t c = 0; c < cols; c++)
      row[c] += bias[c];
  }
}

void rp_cpu_bias_grad(const float *dy, float *db, size_t rows, size_t cols) {
  /* Row-outer order: reads dy sequentially and vectorizes over columns;
   * each column is still summed in row order. */
  rp_cpu_fill(db, 0.0f, cols);
  for (size_t r = 0; r < rows; r++) {
    const float *row = dy + r * cols;
    for (size_t c = 0; c < cols; c++)
      db[c] += row[c];
  }
}

void rp_cpu_relu_fwd(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    y[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
}

void rp_cpu_relu_bwd(const float *x, const float *dy, float *dx, size_t n) {
  for (size_t i = 0; i < n; i++)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---------------------------------------------------------------------- */
/* Softmax cross-entropy */

/* One row: writes p = softmax(x) and returns log(s) - (x[label] - m), the
 * row's loss, or NaN when label is out of range. */
static float xent_row(const float *x, int32_t label, float *p, size_t cols) {
  float m = x[0];
  for (size_t c = 1; c < cols; c++)
    m = x[c] > m ? x[c] : m;
  float s = 0.0f;
  for (size_t c = 0; c < cols; c++) {
    p[c] = expf(x[c] - m); /* in (0, 1]: no overflow for any finite x */
    s += p[c];
  }
  for (size_t c = 0; c < cols; c++)
    p[c] = p[c] / s;
  if (label < 0 || (size_t)label >= cols)
    return NAN;
  /* s >= 1 (the max term is exp(0)), so log(s) is finite and >= 0. */
  return logf(s) - (x[label] - m);
}

int64_t rp_cpu_xent_fwd(const float *logits, const int32_t *labels,
                        float *probs, size_t row_begin, size_t row_end,
                        size_t cols, float norm, float *loss) {
  int64_t bad = -1;
  double sum = 0.0;
  if (cols == 0) { /* no class is a valid label */
    *loss = row_begin < row_end ? NAN : 0.0f;
    return row_begin < row_end ? (int64_t)row_begin : -1;
  }
  for (size_t r = row_begin; r < row_end; r++) {
    int32_t label = labels[r];
    if ((label < 0 || (size_t)label >= cols) && bad < 0)
      bad = (int64_t)r;
    sum += xent_row(logits + r * cols, label, probs + r * cols, cols);
  }
  *loss = (float)(sum / norm);
  return bad;
}

int64_t rp_cpu_xent_bwd(const float *probs, const int32_t *labels,
                        float *dlogits, size_t row_begin, size_t row_end,
                        size_t cols, float norm) {
  int64_t bad = -1;
  for (size_t r = row_begin; r < row_end; r++) {
    const float *p = probs + r * cols;
    float *d = dlogits + r * cols;
    int32_t label = labels[r];
    int ok = label >= 0 && (size_t)label < cols;
    if (!ok && bad < 0)
      bad = (int64_t)r;
    for (size_t c = 0; c < cols; c++) {
      float y = (size_t)label == c ? 1.0f : 0.0f;
      d[c] = ok ? (p[c] - y) / norm : NAN;
    }
  }
  return bad;
}

/* ---------------------------------------------------------------------- */
/* Fused kernels: one sweep over the rows, each element computed by exactly
 * the operations of the unfused kernels (see cpu_kernels.h). */

void rp_cpu_bias_act(float *z, const float *bias, float *a, size_t rows,
                     size_t cols) {
  for (size_t r = 0; r < rows; r++) {
    float *zr = z + r * cols;
    for (size_t c = 0; c < cols; c++)
      zr[c] += bias[c];
    if (a)
      rp_cpu_relu_fwd(zr, a + r * cols, cols);
  }
}

void rp_cpu_relu_bwd_bias_grad(const float *a, const float *da, float *dz,
                               float *db, size_t rows, size_t cols) {
  rp_cpu_fill(db, 0.0f, cols);
  for (size_t r = 0; r < rows; r++) {
    const float *ar = a + r * cols, *dar = da + r * cols;
    float *dzr = dz + r * cols;
    for (size_t c = 0; c < cols; c++) {
      dzr[c] = ar[c] > 0.0f ? dar[c] : 0.0f;
      db[c] += dzr[c]; /* rows in order, as rp_cpu_bias_grad */
    }
  }
}

int64_t rp_cpu_softmax_xent(const float *logits, const int32_t *labels,
                            float *dlogits, float *db, size_t rows, size_t cols,
                            float norm, float *loss) {
  if (cols == 0) /* no class is a valid label: as rp_cpu_xent_fwd */
    return rp_cpu_xent_fwd(logits, labels, dlogits, 0, rows, cols, norm, loss);
  if (db)
    rp_cpu_fill(db, 0.0f, cols);
  int64_t bad = -1;
  double sum = 0.0;
  for (size_t r = 0; r < rows; r++) {
    float *d = dlogits + r * cols;
    /* probs of the row, then dlogits in place: rp_cpu_xent_bwd's formula */
    sum += xent_row(logits + r * cols, labels[r], d, cols);
    int64_t b = rp_cpu_xent_bwd(d, labels + r, d, 0, 1, cols, norm);
    if (b >= 0 && bad < 0)
      bad = (int64_t)r;
    for (size_t c = 0; db && c < cols; c++)
      db[c] += d[c];
  }
  *loss = (float)(sum / norm);
  return bad;
}

/* ---------------------------------------------------------------------- */
/* Optimizer and BLAS-1 */

void rp_cpu_sgd_momentum(float *w, const float *g, float *v, size_t n, float lr,
                         float mu) {
  for (size_t i = 0; i < n; i++) {
    float vi = mu * v[i] + g[i];
    v[i] = vi;
    w[i] = w[i] - lr * vi;
  }
}

void rp_cpu_fill(float *x, float value, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = value;
}

void rp_cpu_scale(float *x, float alpha, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] *= alpha;
}

void rp_cpu_axpy(float alpha, const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    y[i] += alpha * x[i];
}

void rp_cpu_axpby(float a, const float *x, float b, float *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    y[i] = a * x[i] + b * y[i];
}

size_t rp_cpu_argmax_correct(const float *x, const int32_t *labels, size_t rows,
                             size_t cols) {
  size_t correct = 0;
  for (size_t r = 0; r < rows; r++) {
    const float *row = x + r * cols;
    size_t best = 0;
    for (size_t c = 1; c < cols; c++)
      if (row[c] > row[best]) /* strict: the first maximum wins ties */
        best = c;
    correct += labels[r] >= 0 && (size_t)labels[r] == best;
  }
  return correct;
}
