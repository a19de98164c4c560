/* kernels/xent.cu — CUDA launcher of the softmax cross-entropy
 * (gpt_kernels.h: gpt.xent), llm.c's fused classifier without atomics.
 *
 * Two kernels:
 *  - rows: a block per row (grid-stride over rows; 1024 threads for V >
 *    4096, else 256, else 64 for V <= 256: a shape fixed by V,
 *    rp_gpt_xent_rows_launch). The target
 *    logit is read first; block max, then the block sum of exp(x - max) in
 *    f64 (thread-strided partials, warp butterflies, warps in order);
 *    losses[r] = log(sum) - (x[target] - max) in f64; with grad, after both
 *    reductions (the barriers inside them order every read of the row
 *    before any write), each thread overwrites its own columns with
 *    (exp(x - max) * (1 / sum) - onehot) / norm: the CPU kernel's
 *    operations. A target outside [0, V) gives a NaN loss and, with grad, a
 *    NaN row.
 *  - loss: one block of 256 threads sums losses in f64: thread t takes rows
 *    t, t + 256, ... in order, then a fixed tree; loss[0] = sum / norm.
 * norm 0 means N. Deterministic (fixed orders). Agreement with the CPU:
 * device expf/logf differ by a few ulp and sums run in another order:
 * relative 1e-4 (losses, loss, dlogits against max |dlogit|). */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr unsigned kLossThreads = 256;

/* up to 1024 threads (rp_gpt_xent_rows_launch) */
__global__ void __launch_bounds__(1024)
    xent_rows_k(float *logits, const int32_t *__restrict__ targets,
                float *__restrict__ losses, int N, int V, float norm,
                int grad) {
  __shared__ float red[32];
  __shared__ double redd[32];
  for (size_t r = blockIdx.x; r < (size_t)N; r += gridDim.x) {
    float *x = logits + r * V;
    int32_t tgt = targets[r];
    bool ok = tgt >= 0 && tgt < V;
    float xt = ok ? x[tgt] : 0.0f;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < V; c += blockDim.x)
      m = fmaxf(m, x[c]);
    m = block_max(m, red);
    double s = 0.0;
    for (int c = threadIdx.x; c < V; c += blockDim.x)
      s += expf(x[c] - m);
    s = block_sum_d(s, redd);
    if (threadIdx.x == 0)
      losses[r] = ok ? (float)(log(s) - (double)(xt - m)) : nan_f();
    if (grad) {
      float inv = (float)(1.0 / s);
      for (int c = threadIdx.x; c < V; c += blockDim.x) {
        float p = __fmul_rn(expf(x[c] - m), inv);
        float y = c == tgt ? 1.0f : 0.0f;
        x[c] = ok ? __fdiv_rn(__fsub_rn(p, y), norm) : nan_f();
      }
    }
    __syncthreads(); /* red is reused by the next row */
  }
}

__global__ void xent_loss_k(const float *__restrict__ losses, int N, float norm,
                            float *__restrict__ loss) {
  __shared__ double sh[kLossThreads];
  unsigned t = threadIdx.x;
  double acc = 0.0;
  for (size_t i = t; i < (size_t)N; i += kLossThreads)
    acc += losses[i];
  sh[t] = acc;
  __syncthreads();
  for (unsigned half = kLossThreads / 2; half > 0; half /= 2) {
    if (t < half)
      sh[t] += sh[t + half];
    __syncthreads();
  }
  if (t == 0)
    loss[0] = (float)(sh[0] / norm);
}

} // namespace

extern "C" rp_status rp_cuda_gpt_xent(float *logits, const int32_t *targets,
                                      float *losses, float *loss, int N, int V,
                                      float norm, int grad, void *stream) {
  cudaStream_t s = as_stream(stream);
  if (N < 0)
    N = 0;
  float nrm = norm != 0.0f ? norm : (float)N;
  if (N > 0 && V > 0) {
    rp_gpt_launch l = rp_gpt_xent_rows_launch(N, V);
    xent_rows_k<<<grid_of(l), block_of(l), l.smem, s>>>(logits, targets, losses,
                                                        N, V, nrm, grad);
    rp_status st = RP_GPT_LAUNCHED("rp_cuda_gpt_xent: rows");
    if (st != RP_OK)
      return st;
  }
  /* N == 0 still runs: loss = 0 (0 / 0 would be NaN: norm 1 then) */
  xent_loss_k<<<1, kLossThreads, 0, s>>>(losses, V > 0 ? N : 0,
                                         N > 0 ? nrm : 1.0f, loss);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_xent: loss");
}
