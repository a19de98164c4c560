/* kernels/cuda_kernels.cuh — C-callable launchers for the CUDA kernels of the
 * training step (kernels/cuda_kernels.cu). No CUDA types appear here, so C
 * files (kernels/tasks.c, tests) include it without the CUDA headers: a
 * stream is a cudaStream_t passed as void * (NULL: the legacy default
 * stream), pointers are device pointers.
 *
 * Layouts and math are exactly those of the CPU kernels (cpu_kernels.h):
 * dense row-major f32, int32 labels. Every launcher is stream-ordered: it
 * only enqueues work on `stream` (kernels, cuBLAS, memset), never
 * synchronizes and never allocates (cuBLAS state is created beforehand by
 * rp_cuda_blas_init), so every launcher may be called inside CUDA stream
 * capture. Launchers return RP_OK, or RP_EBACKEND with rp_error_detail()
 * naming the launcher and the CUDA/cuBLAS error. Empty outputs enqueue
 * nothing; a reduction over zero rows writes its neutral value (0), as the
 * CPU kernel does.
 *
 * Agreement with the CPU kernels (what test/test_kernels_gpu.c checks):
 *  - relu, bias_add, fill, scale, axpy, axpby, sgd: the same f32 operations
 *    in the same order, no FMA contraction: equal to the CPU result
 *    (checked to a relative 1e-5).
 *  - xent: expf differs from glibc's by a few ulp and sums are reduced in a
 *    different order: relative 1e-4 (probs, dlogits, loss).
 *  - bias_grad: column sums in a different order: relative 1e-4.
 *  - gemm (cuBLAS's default FP32 math: TF32 tensor cores are not enabled):
 *    relative 1e-4 of the largest |C| entry.
 * Determinism: no launcher reduces floats with atomics. Loss, bias_grad and
 * accuracy reductions use a fixed order for given sizes, so repeated runs
 * give bitwise equal results on the same GPU (cuBLAS is bitwise
 * reproducible for one toolkit, architecture and SM count). */
#ifndef RP_KERNELS_CUDA_KERNELS_CUH
#define RP_KERNELS_CUDA_KERNELS_CUH

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Elementwise, bias, loss, optimizer (same contracts as cpu_kernels.h). */

rp_status rp_cuda_relu_fwd(const float *x, float *y, size_t n, void *stream);
rp_status rp_cuda_relu_bwd(const float *x, const float *dy, float *dx, size_t n,
                           void *stream);
rp_status rp_cuda_bias_add(float *x, const float *bias, size_t rows,
                           size_t cols, void *stream);
/* Deterministic column sums: blocks of 32 columns x 8 row lanes; each lane
 * sums its rows in order, then lane partials are added in lane order. */
rp_status rp_cuda_bias_grad(const float *dy, float *db, size_t rows,
                            size_t cols, void *stream);
/* Softmax cross-entropy forward over a [rows x cols] matrix: writes probs
 * and loss[0] = sum_r loss_r / norm (see rp_cpu_xent_fwd). One warp per row
 * (max, sum of exp, normalize: warp shuffles). The loss sum over rows is a
 * fixed-order reduction:
 *  - row_loss != NULL (device scratch of rows floats): every warp writes its
 *    row's loss there, then one block sums them;
 *  - row_loss == NULL: a single block does all rows (its warps take rows
 *    round-robin) and sums in the same kernel.
 * A label outside [0, cols) makes that row's loss (hence loss[0]) NaN. */
rp_status rp_cuda_xent_fwd(const float *logits, const int32_t *labels,
                           float *probs, float *row_loss, float *loss,
                           size_t rows, size_t cols, float norm, void *stream);
/* dlogits = (probs - onehot) / norm; a row with a bad label becomes NaN. */
rp_status rp_cuda_xent_bwd(const float *probs, const int32_t *labels,
                           float *dlogits, size_t rows, size_t cols, float norm,
                           void *stream);
/* v = mu * v + g; w -= lr * v. lr_dev: NULL to use lr, or a device pointer
 * read by the kernel when it runs (a per-replay learning rate in a device
 * parameter buffer reaches a captured graph this way). */
rp_status rp_cuda_sgd_momentum(float *w, const float *g, float *v, size_t n,
                               float lr, float mu, const float *lr_dev,
                               void *stream);
rp_status rp_cuda_fill(float *x, float value, size_t n, void *stream);
rp_status rp_cuda_scale(float *x, float alpha, size_t n, void *stream);
rp_status rp_cuda_axpy(float alpha, const float *x, float *y, size_t n,
                       void *stream);
rp_status rp_cuda_axpby(float a, const float *x, float b, float *y, size_t n,
                        void *stream);
/* Copies bytes from src to dst (both device memory of the current device,
 * or peer-accessible) with cudaMemcpyAsync on stream: a memcpy node under
 * capture. bytes == 0 enqueues nothing. */
rp_status rp_cuda_copy_async(void *dst, const void *src, size_t bytes,
                             void *stream);
/* *count (device int32) = rows whose argmax (first maximum) == label. */
rp_status rp_cuda_argmax_correct(const float *x, const int32_t *labels,
                                 int32_t *count, size_t rows, size_t cols,
                                 void *stream);

/* ---------------------------------------------------------------------- */
/* Fused kernels (kernels/tasks.h's rp.bias_act, rp.relu_bwd_bias,
 * rp.softmax_xent, rp.sgd_multi, and rp.gather_rows's copy). Each is one
 * kernel launch and follows its CPU twin in cpu_kernels.h:
 *  - bias_act, sgd_multi: the f32 operations of the unfused kernels, no
 *    FMA contraction: equal to the CPU results;
 *  - relu_bwd_bias_grad: dz equal; db summed as rp_cuda_bias_grad does
 *    (relative 1e-4 of the CPU's column sums, bitwise equal to
 *    rp_cuda_relu_bwd + rp_cuda_bias_grad);
 *  - softmax_xent: dlogits and loss as rp_cuda_xent_fwd/bwd (relative
 *    1e-4), db a fixed-order column sum (relative 1e-4).
 * All are deterministic (no float atomics). */

/* z += bias (row-broadcast); a = max(z, 0) when a != NULL (a NaN stays
 * NaN, as on the CPU). */
rp_status rp_cuda_bias_act(float *z, const float *bias, float *a, size_t rows,
                           size_t cols, void *stream);
/* dz = da * (a > 0), db = column sums of dz (blocks of 32 columns x 8 row
 * lanes, as rp_cuda_bias_grad). */
rp_status rp_cuda_relu_bwd_bias_grad(const float *a, const float *da, float *dz,
                                     float *db, size_t rows, size_t cols,
                                     void *stream);
/* One block of 32 warps: softmax, loss[0] = sum_r loss_r / norm, dlogits
 * = (p - onehot) / norm (a bad label: NaN row, NaN loss), then (db !=
 * NULL) db = column sums of dlogits in a fixed order. */
rp_status rp_cuda_softmax_xent(const float *logits, const int32_t *labels,
                               float *dlogits, float *db, float *loss,
                               size_t rows, size_t cols, float norm,
                               void *stream);
/* rp_cuda_sgd_momentum over `count` tensors (1..RP_CUDA_SGD_MULTI_MAX) in
 * one kernel: the pointer table is passed by value (kernel parameters);
 * tensor i is updated by the blocks of grid row i. */
#define RP_CUDA_SGD_MULTI_MAX 32
rp_status rp_cuda_sgd_multi(float *const *w, const float *const *g,
                            float *const *v, const size_t *n, int count,
                            float lr, float mu, const float *lr_dev,
                            void *stream);
/* Copies batch `index` (batch_bytes each) of src_base to dst, where src
 * holds `batches` whole batches. index_dev: NULL to use index, or a device
 * pointer to an int32 read when the kernel runs (a per-replay index in the
 * device parameter buffer). The kernel copies nothing when the index it
 * reads is outside [0, batches). */
rp_status rp_cuda_gather_rows(void *dst, const void *src_base,
                              size_t batch_bytes, int64_t batches,
                              int32_t index, const void *index_dev,
                              void *stream);

/* ---------------------------------------------------------------------- */
/* GEMM through cuBLAS: the contract of rp_cpu_gemm (row-major, trans flags,
 * beta == 0 does not read C), on the current CUDA device.
 *
 * Each device has one cuBLAS handle and workspace slices of
 * rp_cuda_blas_ws_bytes (4 or 32 MiB), RP_CUBLAS_WS_SLOTS of them
 * created by
 * rp_cuda_blas_init before any capture. cublasSetStream resets a handle's
 * workspace to cuBLAS's own pool (which allocates, and breaks capture), so
 * every call sets the stream and then this stream's workspace slice, under
 * a per-device lock. A slice serves one stream (two streams running
 * concurrently must not share scratch memory): a stream takes a free slice,
 * or outside capture a new one (up to RP_CUBLAS_WS_MAX_SLOTS), when it is
 * created (rp_cuda_blas_stream_hook, which rp_kernels_register installs as
 * the engine's stream hook) or at its first GEMM, and gives it back when it
 * is destroyed. Every GEMM thus runs with the same workspace size, and
 * cuBLAS, whose choice of algorithm depends on it, computes the same bits
 * on any stream: eager equals replay. A stream that can get no slice (all
 * taken, or an allocation failed) runs with no workspace: correct, maybe
 * slower, and not bitwise equal to the others.
 * Under capture, a GEMM node keeps the slice of the stream it was captured
 * on. Two graphs captured on the same stream must therefore not run at the
 * same time (nor alongside eager GEMMs on that stream): capture segments
 * that may run concurrently on distinct streams. */
#define RP_CUBLAS_WS_SLOTS 8
#define RP_CUBLAS_WS_MAX_SLOTS 256
/* cuBLAS's recommendations for cublasSetWorkspace, which PyTorch's default
 * follows: 32 MiB on Hopper (compute capability 9.x), for split-K GEMMs
 * (the GPT's weight gradients, k = the batch's rows, split into partial
 * products that live in the workspace), 4 MiB elsewhere. The 8 slots cost
 * 256 or 32 MiB of device memory. */
#define RP_CUBLAS_WS_BYTES ((size_t)4 << 20)
#define RP_CUBLAS_WS_BYTES_HOPPER ((size_t)32 << 20)
/* A slice's size on a device of compute capability cc_major.x:
 * RP_CUBLAS_WS_BYTES_HOPPER for 9, else RP_CUBLAS_WS_BYTES, unless
 * REPRISE_CUBLAS_WS_MIB gives its MiB (1..1024; read when a device's cuBLAS
 * state is created). RP_EINVAL naming the variable for any other value. */
rp_status rp_cuda_blas_ws_bytes(int cc_major, size_t *out);
#define RP_CUDA_MAX_DEVICES 64

/* The engine's stream hook (engine/device_ops.h: rp__set_stream_hook):
 * created = 1 binds the new stream (the current device's) to a workspace
 * slice; 0 waits for the stream's work and frees its slice. */
void rp_cuda_blas_stream_hook(void *stream, int created);

rp_status rp_cuda_gemm(int trans_a, int trans_b, int m, int n, int k,
                       float alpha, const float *a, const float *b, float beta,
                       float *c, void *stream);
/* `batch` row-major GEMMs C_i = alpha op(A_i) op(B_i) + beta C_i (one
 * cublasSgemmStridedBatched): X_i = x + i * stride_x; lda, ldb, ldc are the
 * stored row lengths (A is m x k, or k x m when trans_a; B is k x n, or
 * n x k when trans_b; C is m x n). k == 0 or alpha == 0 needs a dense C
 * (ldc == n, stride_c == m * n) and scales it by beta. Same handle,
 * workspace and capture rules as rp_cuda_gemm. */
rp_status rp_cuda_gemm_strided_batched(
    int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
    int lda, long long stride_a, const float *b, int ldb, long long stride_b,
    float beta, float *c, int ldc, long long stride_c, int batch, void *stream);
/* rp_cuda_gemm_strided_batched with a pointer per batch entry: a[i], b[i],
 * c[i] (tables of `batch` pointers in device memory, read when the GEMM
 * runs, so stream-ordered writes before it are seen; one
 * cublasSgemmBatched). k must be positive. The matrices need a float's
 * alignment only: cuBLAS asks more of them under its fast math modes,
 * which these handles never enable. Same handle, workspace and capture
 * rules as rp_cuda_gemm. */
rp_status rp_cuda_gemm_batched(int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float *const *a, int lda,
                               const float *const *b, int ldb, float beta,
                               float *const *c, int ldc, int batch,
                               void *stream);
/* Creates the handle and workspace of physical device `device` (idempotent,
 * thread-safe). Must not be called during stream capture. rp_cuda_gemm
 * calls it itself when not capturing; during capture an uninitialized
 * device is an error (RP_EBACKEND). */
rp_status rp_cuda_blas_init(int device);
/* The workspace slice of `stream`, the one its GEMMs use, as scratch for
 * a kernel's launches between GEMMs: the stream's order keeps them apart,
 * and a captured node keeps the slice under the rules above. *ws = NULL,
 * *bytes = 0 when the stream has none: the legacy stream (NULL), every
 * slice taken, or capture before the device's cuBLAS state exists. Outside
 * capture it creates that state (rp_cuda_blas_init) and may bind a slice. */
rp_status rp_cuda_stream_scratch(void *stream, void **ws, size_t *bytes);
/* Destroys every handle and workspace. Call after all GEMM work finished and
 * before the CUDA context goes away (e.g. before cudaDeviceReset); a later
 * rp_cuda_blas_init starts over. */
void rp_cuda_blas_shutdown(void);

/* ---------------------------------------------------------------------- */
/* Small host helpers so that tests and benches need no CUDA headers. All
 * return RP_OK or RP_EBACKEND with a detail. */

rp_status rp_cuda_device_count(int *out);
rp_status rp_cuda_stream_create(void **out);
rp_status rp_cuda_stream_destroy(void *stream);
rp_status rp_cuda_stream_sync(void *stream);
rp_status rp_cuda_buf_alloc(void **out, size_t bytes);
void rp_cuda_buf_free(void *p);
/* Synchronous copies (cudaMemcpy: also orders after legacy-stream work). */
rp_status rp_cuda_buf_put(void *dst_dev, const void *src_host, size_t bytes);
rp_status rp_cuda_buf_get(void *dst_host, const void *src_dev, size_t bytes);
/* Records the work enqueued on stream between these two calls (global
 * capture mode: any allocation or synchronization in between fails), then
 * instantiates the graph, launches it `launches` times on the stream and
 * frees it. For tests that launchers are capture-safe. */
rp_status rp_cuda_capture_begin(void *stream);
rp_status rp_cuda_capture_end_launch(void *stream, int launches);

#ifdef __cplusplus
}
#endif

#endif
