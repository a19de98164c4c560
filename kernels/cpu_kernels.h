/* kernels/cpu_kernels.h — CPU kernels for an MLP training step: GEMM (through
 * CBLAS when the build found OpenBLAS), bias, ReLU, softmax cross-entropy,
 * SGD with momentum and small BLAS-1 helpers. Private to libreprise; the
 * reprise task wrappers (kernels/tasks.h) and the tests call them.
 *
 * Layout, for every kernel here: dense row-major f32. A matrix of R rows and
 * C columns is R*C consecutive floats; element (r, c) is at index r*C + c.
 * Vectors are dense. Labels are int32 class indices in [0, C).
 *
 * The kernels do no allocation and take no locks (except the one-time
 * OpenBLAS setup behind rp_cpu_gemm). Output buffers may alias an input only
 * where a kernel says so.
 *
 * These are also the reference the CUDA kernels (kernels/cuda_kernels.cuh)
 * are compared against. */
#ifndef RP_KERNELS_CPU_KERNELS_H
#define RP_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* C = alpha * op(A) * op(B) + beta * C, row-major, as cblas_sgemm with
 * CblasRowMajor. op(A) is m x k, op(B) is k x n, C is m x n (row length n).
 * trans_a = 0: A is stored m x k (row length k); else A is stored k x m and
 * op(A) = A^T. Likewise trans_b = 0: B stored k x n; else stored n x k.
 * As in BLAS, beta == 0 means C is not read (NaNs in it do not propagate).
 * k == 0 or alpha == 0 gives C = beta * C. OpenBLAS runs single-threaded:
 * when the library loads it sets openblas_set_num_threads(1) for the whole
 * process and stops OpenBLAS's server threads (which would otherwise spin
 * for ~0.1 s after load), so that CPU workers running GEMM tasks side by
 * side do not oversubscribe the cores. One row (m == 1, the GPT decode
 * step's products) runs as a GEMV, which reads B in place (OpenBLAS's GEMM
 * packs all of B first). */
void rp_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, const float *b, float beta, float *c);

/* x[r, c] += bias[c] for a rows x cols matrix x. */
void rp_cpu_bias_add(float *x, const float *bias, size_t rows, size_t cols);

/* db[c] = sum over r of dy[r, c] (overwrites db). Rows are summed in order,
 * in f32. */
void rp_cpu_bias_grad(const float *dy, float *db, size_t rows, size_t cols);

/* y = max(x, 0) elementwise (a NaN stays NaN, as torch.relu). y may equal x (in
 * place). */
void rp_cpu_relu_fwd(const float *x, float *y, size_t n);

/* dx = dy * (x > 0): x is the forward input (the forward output works the
 * same, since y > 0 exactly where x > 0). dx may equal dy. */
void rp_cpu_relu_bwd(const float *x, const float *dy, float *dx, size_t n);

/* Softmax cross-entropy, forward, over rows [row_begin, row_end) of a
 * [B x cols] logits matrix (pointers are to row 0 of the whole matrix; a
 * data-parallel shard passes its row range, or its own slice with range
 * [0, rows)). For each row r with m = max_c x[r, c] and
 * s = sum_c exp(x[r, c] - m):
 *   probs[r, c] = exp(x[r, c] - m) / s
 *   loss_r      = log(s) - (x[r, label_r] - m)   (= -log probs[r, label_r])
 * Subtracting the row maximum keeps exp() in [0, 1], so logits like +-1000
 * neither overflow nor give log(0). *loss = sum of loss_r (summed in f64, in
 * row order) / norm, where norm is the global batch size: shards that each
 * divide by the global batch sum to the mean over the whole batch.
 * Returns -1 when every label is in [0, cols); else the first row with a bad
 * label (its probs are still written, and *loss is NaN). */
int64_t rp_cpu_xent_fwd(const float *logits, const int32_t *labels,
                        float *probs, size_t row_begin, size_t row_end,
                        size_t cols, float norm, float *loss);

/* Softmax cross-entropy, backward, over rows [row_begin, row_end):
 *   dlogits[r, c] = (probs[r, c] - (c == label_r)) / norm
 * the gradient of the forward *loss for an upstream gradient of 1. Passing
 * the global batch as norm makes every data-parallel shard compute exactly
 * the rows of the one-big-batch gradient. dlogits may equal probs.
 * Returns -1, or the first row with a label outside [0, cols) (that row's
 * dlogits are then NaN). */
int64_t rp_cpu_xent_bwd(const float *probs, const int32_t *labels,
                        float *dlogits, size_t row_begin, size_t row_end,
                        size_t cols, float norm);

/* SGD with momentum (PyTorch's formulation, dampening 0):
 *   v = mu * v + g;  w = w - lr * v
 * elementwise over n. With v = 0 initially and a constant g, after t steps
 * v_t = g * (1 - mu^t) / (1 - mu). */
void rp_cpu_sgd_momentum(float *w, const float *g, float *v, size_t n, float lr,
                         float mu);

/* ---- Fused kernels (one pass each; every result is bitwise equal to the
 * unfused sequence named, since each element sees the same f32 operations
 * in the same order). ---- */

/* z[r, c] += bias[c]; then, when a != NULL, a = max(z, 0) (a NaN stays NaN):
 * rp_cpu_bias_add followed by rp_cpu_relu_fwd. a may not alias z. */
void rp_cpu_bias_act(float *z, const float *bias, float *a, size_t rows,
                     size_t cols);

/* dz = da * (a > 0) and db[c] = sum over r of dz[r, c] (rows in order):
 * rp_cpu_relu_bwd followed by rp_cpu_bias_grad. dz may equal da. */
void rp_cpu_relu_bwd_bias_grad(const float *a, const float *da, float *dz,
                               float *db, size_t rows, size_t cols);

/* Softmax cross-entropy forward and backward in one pass over rows
 * [0, rows): rp_cpu_xent_fwd (probs into dlogits) then rp_cpu_xent_bwd in
 * place, then, when db != NULL, rp_cpu_bias_grad(dlogits, db). *loss is the
 * forward's (summed in f64, in row order, / norm). Returns -1, or the first
 * row with a label outside [0, cols) (its dlogits are NaN, *loss NaN). */
int64_t rp_cpu_softmax_xent(const float *logits, const int32_t *labels,
                            float *dlogits, float *db, size_t rows, size_t cols,
                            float norm, float *loss);

/* x[i] = value. */
void rp_cpu_fill(float *x, float value, size_t n);
/* x[i] *= alpha. */
void rp_cpu_scale(float *x, float alpha, size_t n);
/* y[i] += alpha * x[i]. */
void rp_cpu_axpy(float alpha, const float *x, float *y, size_t n);
/* y[i] = a * x[i] + b * y[i] (two products, then their sum: no
 * contraction). */
void rp_cpu_axpby(float a, const float *x, float b, float *y, size_t n);

/* Number of rows r whose argmax over columns (the first maximum on ties)
 * equals labels[r]. x is rows x cols (logits or probabilities). Rows with a
 * NaN count as an unspecified argmax. */
size_t rp_cpu_argmax_correct(const float *x, const int32_t *labels, size_t rows,
                             size_t cols);

#endif
