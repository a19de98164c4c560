/* kernels/adamw.cu — CUDA launcher of the multi-tensor AdamW with global
 * gradient-norm clipping (gpt_kernels.h: gpt.adamw).
 *
 * The tensors' pointers, sizes and decay flags travel in the kernels'
 * parameters (so a captured graph keeps them), in chunks of kAdamChunk
 * tensors per launch: a chunk's table is 2.6 KiB, under the 4 KiB kernel
 * parameter limit that every toolkit and architecture accepts. Three passes,
 * stream-ordered:
 *  1. sum of squares: tensor i in np(n) parts of ceil(n / np) elements,
 *     the last one shorter (np = n / kSumsqSpan rounded up, at most
 *     kSumsqMaxParts: a function of n alone); a part's block of 1024 threads:
 * thread t sums its elements t, t + 1024, ... in f64, then a fixed tree (warp
 * butterflies, warps in order); the parts' f64 sums added in part order:
 * stats[1 + i] (as f32). The parts run as blocks of one launch per chunk, their
 *     sums in the stream's scratch slice, then a thread a tensor adds
 *     them; a stream without scratch runs a block a tensor that computes
 *     the parts one after the other: the same operations, the same bits;
 *  2. norm: one thread adds stats[1..count] in tensor order (f64):
 *     stats[0] = sqrt(sum);
 *  3. update: grid (x, tensor of the chunk), grid-stride over the tensor;
 *     each thread reads stats[0] (the clipping scale), lr and step (from
 *     dev_args at offsets 0 and 4 when given) on the device, and applies
 *     the contract's formulas with explicit round-to-nearest operations
 *     (no FMA contraction) in the C expression order.
 * With norm_parts > 0 (a share of a sharded model) pass 1 is skipped and
 * pass 2 sums the shares' sq[] instead (gpt.sumsq computed them, the same
 * pass 1 kernel into its `each`, then one thread's f64 total).
 * No atomics: deterministic. Agreement with the CPU: the sums run in
 * another order (relative 1e-4 on stats); the update is elementwise with
 * the same f32 operations in the same order (bias corrections in f64, as
 * on the CPU), so w, m and v agree to a relative 1e-5 (the clipping scale
 * carries the norm's last-bit differences).
 *
 * Cost: pass 1 spreads a tensor of n floats over n / kSumsqSpan blocks
 * (up to kSumsqMaxParts): 0.05 ms of the nanoGPT step on an NVIDIA H200
 * (build 1535567, Nsight Compute; a block a tensor took 0.45 ms at
 * 5608426: tensors of up to 590k floats, one SM each). */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr int kAdamChunk = 64;
constexpr unsigned kSumsqThreads = 1024;
constexpr unsigned kAdamThreads = 256;
/* Update blocks per tensor at most: 1024 x 256 threads, grid-stride. */
constexpr size_t kAdamMaxBlocks = 1024;

struct AdamTable {
  float *w[kAdamChunk];
  const float *g[kAdamChunk];
  float *m[kAdamChunk];
  float *v[kAdamChunk];
  unsigned long long n[kAdamChunk];
  unsigned char decay[kAdamChunk];
};
static_assert(sizeof(AdamTable) + 64 <= 4096,
              "AdamW chunk table beyond the 4 KiB kernel parameter limit");

struct AdamHyper {
  float lr;
  int step;
  float beta1, beta2, eps, weight_decay, max_norm;
};

/* A part: about 32 elements a thread of a 1024-thread block; at most 64
 * parts a tensor, so a chunk's partials (64 x 64 doubles, 32 KiB) fit in
 * any scratch slice (1 MiB and up). */
constexpr size_t kSumsqSpan = 32768;
constexpr unsigned kSumsqMaxParts = 64;

/* Tensor of n floats: its parts and their length. */
__host__ __device__ inline unsigned sumsq_parts(size_t n) {
  size_t p = (n + kSumsqSpan - 1) / kSumsqSpan;
  return p < 1 ? 1 : p > kSumsqMaxParts ? kSumsqMaxParts : (unsigned)p;
}

/* The f64 sum of g[i]^2 over part b of n floats, by the whole block (the
 * result in every thread). */
__device__ double part_sumsq(const float *g, size_t n, unsigned b,
                             double *red) {
  unsigned np = sumsq_parts(n);
  size_t len = (n + np - 1) / np, lo = (size_t)b * len;
  size_t hi = lo + len < n ? lo + len : n;
  double acc = 0.0;
#pragma unroll 4 /* loads issued ahead; the adds keep their order */
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    double x = g[i];
    acc += x * x;
  }
  return block_sum_d(acc, red);
}

/* Block (b, k): part b of tensor k into part[k * kSumsqMaxParts + b]. */
__global__ void __launch_bounds__(kSumsqThreads)
    adamw_sumsq_part_k(AdamTable t, double *__restrict__ part) {
  __shared__ double red[32];
  unsigned k = blockIdx.y, b = blockIdx.x;
  size_t n = (size_t)t.n[k];
  if (b >= sumsq_parts(n))
    return; /* block-uniform */
  double s = part_sumsq(t.g[k], n, b, red);
  if (threadIdx.x == 0)
    part[(size_t)k * kSumsqMaxParts + b] = s;
}

/* Thread k: stats[k] = tensor k's parts added in order. */
__global__ void adamw_sumsq_finish_k(AdamTable t, int count,
                                     const double *__restrict__ part,
                                     float *__restrict__ stats) {
  int k = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (k >= count)
    return;
  unsigned np = sumsq_parts((size_t)t.n[k]);
  double s = 0.0;
  for (unsigned b = 0; b < np; b++)
    s += part[(size_t)k * kSumsqMaxParts + b];
  stats[k] = (float)s;
}

/* Block k, without scratch: tensor k's parts one after the other. */
__global__ void __launch_bounds__(kSumsqThreads)
    adamw_sumsq_k(AdamTable t, float *__restrict__ stats) {
  __shared__ double red[32];
  unsigned k = blockIdx.x;
  size_t n = (size_t)t.n[k];
  double s = 0.0;
  for (unsigned b = 0, np = sumsq_parts(n); b < np; b++)
    s += part_sumsq(t.g[k], n, b, red);
  if (threadIdx.x == 0)
    stats[k] = (float)s;
}

/* stats[0..cnt) = the sums of squares of the chunk's tensors, on s. */
rp_status sumsq_chunk(const AdamTable &t, int cnt, float *stats, void *stream,
                      const char *what) {
  cudaStream_t s = as_stream(stream);
  size_t most = 0;
  for (int j = 0; j < cnt; j++)
    most = t.n[j] > most ? (size_t)t.n[j] : most;
  void *ws = nullptr;
  size_t ws_bytes = 0;
  rp_status st = rp_cuda_stream_scratch(stream, &ws, &ws_bytes);
  if (st != RP_OK)
    return st;
  if (ws && (size_t)cnt * kSumsqMaxParts * sizeof(double) <= ws_bytes) {
    double *part = static_cast<double *>(ws);
    adamw_sumsq_part_k<<<dim3(sumsq_parts(most), (unsigned)cnt), kSumsqThreads,
                         0, s>>>(t, part);
    st = RP_GPT_LAUNCHED(what);
    if (st != RP_OK)
      return st;
    adamw_sumsq_finish_k<<<1, kAdamChunk, 0, s>>>(t, cnt, part, stats);
  } else {
    adamw_sumsq_k<<<(unsigned)cnt, kSumsqThreads, 0, s>>>(t, stats);
  }
  return RP_GPT_LAUNCHED(what);
}

/* stats[0] = sqrt of the sum (f64, in order) of stats[1..count], or with
 * parts > 0 of the shares' sums sq[0..parts). */
__global__ void adamw_norm_k(float *stats, int count, const float *sq,
                             int parts) {
  double s = 0.0;
  if (parts > 0) {
    for (int j = 0; j < parts; j++)
      s += (double)sq[j];
  } else {
    for (int i = 0; i < count; i++)
      s += (double)stats[1 + i];
  }
  stats[0] = (float)sqrt(s);
}

/* gpt.sumsq: sq[0] = the sum (f64, in order) of each[0..count). */
__global__ void sumsq_total_k(const float *each, int count, float *sq) {
  double s = 0.0;
  for (int i = 0; i < count; i++)
    s += (double)each[i];
  sq[0] = (float)s;
}

__global__ void adamw_update_k(AdamTable t, AdamHyper hp,
                               const float *__restrict__ stats,
                               const void *dev) {
  float lr = hp.lr;
  int step = hp.step;
  if (dev) {
    lr = static_cast<const float *>(dev)[0];
    step = static_cast<const int32_t *>(dev)[1];
  }
  float norm = stats[0];
  float scale = 1.0f;
  if (hp.max_norm > 0.0f) {
    float r = __fdiv_rn(hp.max_norm, __fadd_rn(norm, 1e-6f));
    scale = r < 1.0f || isnan(r) ? r : 1.0f; /* NaN: every gradient NaN */
  }
  /* in double, then rounded: the CPU kernel's bias corrections */
  float bc1 = (float)(1.0 - pow((double)hp.beta1, (double)step));
  float bc2 = (float)(1.0 - pow((double)hp.beta2, (double)step));
  float ob1 = __fsub_rn(1.0f, hp.beta1), ob2 = __fsub_rn(1.0f, hp.beta2);
  float lrwd = __fmul_rn(lr, hp.weight_decay);
  unsigned k = blockIdx.y;
  float *w = t.w[k], *m = t.m[k], *v = t.v[k];
  const float *g = t.g[k];
  bool decay = t.decay[k] != 0;
  size_t n = (size_t)t.n[k];
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    float gi = __fmul_rn(scale, g[i]);
    float wi = w[i];
    if (decay)
      wi = __fsub_rn(wi, __fmul_rn(lrwd, wi)); /* w -= lr * wd * w */
    float mi = __fadd_rn(__fmul_rn(hp.beta1, m[i]), __fmul_rn(ob1, gi));
    float vi =
        __fadd_rn(__fmul_rn(hp.beta2, v[i]), __fmul_rn(__fmul_rn(ob2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    float mhat = __fdiv_rn(mi, bc1);
    float vhat = __fdiv_rn(vi, bc2);
    float upd =
        __fdiv_rn(__fmul_rn(lr, mhat), __fadd_rn(__fsqrt_rn(vhat), hp.eps));
    w[i] = __fsub_rn(wi, upd);
  }
}

/* Fills the table with tensors [base, base + cnt); returns the largest n. */
size_t adamw_table(AdamTable *t, float *const *w, const float *const *g,
                   float *const *m, float *const *v, const size_t *n,
                   const rp_gpt_adamw_args *a, int base, int cnt) {
  *t = AdamTable{};
  size_t most = 0;
  for (int j = 0; j < cnt; j++) {
    int i = base + j;
    t->w[j] = w[i];
    t->g[j] = g[i];
    t->m[j] = m[i];
    t->v[j] = v[i];
    t->n[j] = n[i];
    t->decay[j] = a->decay[i] ? 1 : 0;
    most = n[i] > most ? n[i] : most;
  }
  return most;
}

} // namespace

extern "C" rp_status rp_cuda_gpt_adamw(float *const *w, const float *const *g,
                                       float *const *m, float *const *v,
                                       const size_t *n, float *stats,
                                       const float *sq,
                                       const rp_gpt_adamw_args *args,
                                       const void *dev_args, void *stream) {
  static const char what[] = "rp_cuda_gpt_adamw";
  int count = args->count;
  if (count < 1 || count > RP_GPT_ADAMW_MAX)
    return rp__err(RP_EBACKEND, "%s: %d tensors (1..%d)", what, count,
                   RP_GPT_ADAMW_MAX);
  cudaStream_t s = as_stream(stream);
  AdamTable t;
  rp_status st = RP_OK;
  int parts = args->norm_parts > 0 ? args->norm_parts : 0;
  /* sharded (parts > 0): the sums are gpt.sumsq's, the norm from sq */
  for (int base = 0; !parts && st == RP_OK && base < count;
       base += kAdamChunk) {
    int cnt = count - base < kAdamChunk ? count - base : kAdamChunk;
    adamw_table(&t, w, g, m, v, n, args, base, cnt);
    st = sumsq_chunk(t, cnt, stats + 1 + base, stream,
                     "rp_cuda_gpt_adamw: sum of squares");
  }
  if (st != RP_OK)
    return st;
  adamw_norm_k<<<1, 1, 0, s>>>(stats, count, sq, parts);
  st = RP_GPT_LAUNCHED("rp_cuda_gpt_adamw: norm");
  AdamHyper hp = {args->lr,  args->step,         args->beta1,   args->beta2,
                  args->eps, args->weight_decay, args->max_norm};
  for (int base = 0; st == RP_OK && base < count; base += kAdamChunk) {
    int cnt = count - base < kAdamChunk ? count - base : kAdamChunk;
    size_t most = adamw_table(&t, w, g, m, v, n, args, base, cnt);
    if (most == 0)
      continue;
    size_t bx = (most + kAdamThreads - 1) / kAdamThreads;
    dim3 grid((unsigned)(bx < kAdamMaxBlocks ? bx : kAdamMaxBlocks),
              (unsigned)cnt);
    adamw_update_k<<<grid, kAdamThreads, 0, s>>>(t, hp, stats, dev_args);
    st = RP_GPT_LAUNCHED("rp_cuda_gpt_adamw: update");
  }
  return st;
}

extern "C" rp_status rp_cuda_gpt_sumsq(const float *const *g, const size_t *n,
                                       int count, float *sq, float *each,
                                       void *stream) {
  if (count < 1 || count > RP_GPT_ADAMW_MAX)
    return rp__err(RP_EBACKEND, "rp_cuda_gpt_sumsq: %d tensors (1..%d)", count,
                   RP_GPT_ADAMW_MAX);
  cudaStream_t s = as_stream(stream);
  AdamTable t;
  rp_status st = RP_OK;
  for (int base = 0; st == RP_OK && base < count; base += kAdamChunk) {
    int cnt = count - base < kAdamChunk ? count - base : kAdamChunk;
    t = AdamTable{};
    for (int j = 0; j < cnt; j++) {
      t.g[j] = g[base + j];
      t.n[j] = n[base + j];
    }
    st = sumsq_chunk(t, cnt, each + base, stream,
                     "rp_cuda_gpt_sumsq: sums of squares");
  }
  if (st != RP_OK)
    return st;
  sumsq_total_k<<<1, 1, 0, s>>>(each, count, sq);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_sumsq: total");
}
