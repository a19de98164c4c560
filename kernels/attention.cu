/* kernels/attention.cu — CUDA launchers of causal self-attention
 * (gpt_kernels.h: gpt.attention_fwd, gpt.attention_bwd,
 * gpt.attention_decode). Two paths, chosen by the shape and
 * REPRISE_GPT_ATTN alone (so eager and replay agree): where a head fits in
 * shared memory, one fused kernel each way (below, attention_fused_*);
 * otherwise llm.c's scheme: permute, strided-batched GEMMs, a fused scaled
 * causal softmax, unpermute. Both write the same qkvr and att (the
 * backward of either path reads either's).
 *
 * Layouts: qkv [B, T, 3, NH, hs]; qkvr = q, k, v each [B, NH, T, hs];
 * att [B, NH, T, T]. The GEMMs run as rp_cuda_gemm_strided_batched over
 * the B * NH heads (row-major per head, see cuda_kernels.cuh; batch
 * strides T * hs and T * T), scale = 1 / sqrt(hs):
 *   forward   att = scale * q k^T   (m T, n T,  k hs; B transposed)
 *             y   = att v           (m T, n hs, k T)  into scratch
 *   backward  datt = dy v^T         (m T, n T,  k hs; B transposed)
 *             dv   = att^T dy       (m T, n hs, k T;  A transposed)
 *             dpre = softmax backward of datt, times scale (in place)
 *             dq   = dpre k         (m T, n hs, k T)
 *             dk   = dpre^T q       (m T, n hs, k T;  A transposed)
 * Softmax forward, in place on att: a warp per row (b, h, t); lane-strided
 * max and sum of exp over u <= t (the sum in f64), warp butterflies;
 * writes exp(x - max) * (1 / sum) for u <= t and 0 above the diagonal (the
 * CPU kernel's operations). Backward, in place on datt: a warp per row;
 * dpre[u] = scale * att[u] * (datt[u] - sum_u' att[u'] datt[u']) for u <= t
 * (the sum in f64), 0 above. Deterministic (fixed orders; cuBLAS is bitwise
 * reproducible on one GPU model and toolkit). Agreement with the CPU: the
 * GEMMs and sums run in another order: 1e-4 relative to the largest |entry|.
 * REPRISE_GPT_ATTN_GEMM=direct: the GEMMs reading dy or writing y, dq, dk,
 * dv take those rows in place ([B, T, C], [B, T, 3C]: a head is rows of
 * hs floats, C or 3C apart) through pointer tables (rp_cuda_gemm_batched),
 * dropping every permute but qkv's.
 *
 * Decode (batch 1, one token at pos): a block per head. The block writes
 * the token's k and v rows into the caches at pos, then (after a barrier:
 * the block's global writes are visible to the block) each warp scores the
 * positions u = warp, warp + nwarps, ... <= pos (a lane-strided dot product
 * and a butterfly) into scratch[h, u]; block max and sum of exp (f64) in a
 * fixed order, the scores turned into probabilities p in place; out[h, d]
 * = sum_u p_u v[u, d], the u split over a fixed number of thread groups
 * added in group order. pos comes from dev_args
 * (offset 0) when given; outside [0, Tmax) the head's output is NaN and the
 * caches are untouched. */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr unsigned kAttnThreads = RP_GPT_ATTN_THREADS;

/* The permutes copy E-sized pieces (float, or float4 where hs is a
 * multiple of 4 and both pointers 16-byte aligned: launch_permute); hs
 * counts E. */

/* qkv [B, T, 3, NH, hs] -> q, k, v [B, NH, T, hs] (= qkvr). */
template <class E>
__global__ void permute_qkv_k(const E *__restrict__ qkv, E *__restrict__ qkvr,
                              int B, int T, int NH, int hs) {
  size_t per = (size_t)B * NH * T * hs, C = (size_t)NH * hs;
  for (size_t i = global_tid(); i < per; i += global_threads()) {
    size_t d = i % hs, rest = i / hs;
    size_t t = rest % T;
    rest /= T;
    size_t h = rest % NH, b = rest / NH;
    size_t src = ((b * T + t) * 3) * C + h * hs + d;
    qkvr[i] = qkv[src];
    qkvr[per + i] = qkv[src + C];
    qkvr[2 * per + i] = qkv[src + 2 * C];
  }
}

/* [B, NH, T, hs] <-> [B, T, NH, hs]: to_bt = 1 copies src [B, NH, T, hs]
 * into dst [B, T, NH, hs] (the forward's unpermute), 0 the other way (its
 * backward). */
template <class E>
__global__ void permute_heads_k(const E *__restrict__ src, E *__restrict__ dst,
                                int B, int T, int NH, int hs, int to_bt) {
  size_t n = (size_t)B * NH * T * hs;
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    size_t d = i % hs, rest = i / hs;
    size_t t = rest % T;
    rest /= T;
    size_t h = rest % NH, b = rest / NH;
    size_t j = ((b * T + t) * NH + h) * hs + d; /* i's place in [B, T, C] */
    if (to_bt)
      dst[j] = src[i];
    else
      dst[i] = src[j];
  }
}

/* dq, dk, dv [B, NH, T, hs] each -> dqkv [B, T, 3, NH, hs] (=). */
template <class E>
__global__ void unpermute_dqkv_k(const E *__restrict__ dqkvr,
                                 E *__restrict__ dqkv, int B, int T, int NH,
                                 int hs) {
  size_t per = (size_t)B * NH * T * hs, C = (size_t)NH * hs;
  for (size_t i = global_tid(); i < per; i += global_threads()) {
    size_t d = i % hs, rest = i / hs;
    size_t t = rest % T;
    rest /= T;
    size_t h = rest % NH, b = rest / NH;
    size_t dst = ((b * T + t) * 3) * C + h * hs + d;
    dqkv[dst] = dqkvr[i];
    dqkv[dst + C] = dqkvr[per + i];
    dqkv[dst + 2 * C] = dqkvr[2 * per + i];
  }
}

enum class Permute { qkv, heads_to_bt, heads_from_bt, dqkv };

/* One permute kernel of B NH T hs floats (times 3 for qkv and dqkv). */
void launch_permute(Permute k, const float *src, float *dst, int B, int T,
                    int NH, int hs, cudaStream_t s) {
  size_t n = (size_t)B * NH * T * hs;
  bool v4 =
      hs % 4 == 0 &&
      ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) &
       15) == 0;
  if (v4) {
    const float4 *a = reinterpret_cast<const float4 *>(src);
    float4 *o = reinterpret_cast<float4 *>(dst);
    unsigned g = blocks_for(n / 4, kAttnThreads);
    if (k == Permute::qkv)
      permute_qkv_k<<<g, kAttnThreads, 0, s>>>(a, o, B, T, NH, hs / 4);
    else if (k == Permute::dqkv)
      unpermute_dqkv_k<<<g, kAttnThreads, 0, s>>>(a, o, B, T, NH, hs / 4);
    else
      permute_heads_k<<<g, kAttnThreads, 0, s>>>(a, o, B, T, NH, hs / 4,
                                                 k == Permute::heads_to_bt);
    return;
  }
  unsigned g = blocks_for(n, kAttnThreads);
  if (k == Permute::qkv)
    permute_qkv_k<<<g, kAttnThreads, 0, s>>>(src, dst, B, T, NH, hs);
  else if (k == Permute::dqkv)
    unpermute_dqkv_k<<<g, kAttnThreads, 0, s>>>(src, dst, B, T, NH, hs);
  else
    permute_heads_k<<<g, kAttnThreads, 0, s>>>(src, dst, B, T, NH, hs,
                                               k == Permute::heads_to_bt);
}

/* The causal softmax of row t of a [T, T] block, by one warp, in place on
 * x (scores for u <= t, already scaled): max and sum of exp (f64) over u
 * <= t, then exp(x - max) * (1 / sum) for u <= t and 0 above the diagonal,
 * also into copy when given. Each lane reads and writes only its own
 * entries (u = lane, lane + 32, ...). */
__device__ inline void warp_softmax_row(float *x, float *copy, int t, int T) {
  unsigned lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int u = lane; u <= t; u += 32)
    m = fmaxf(m, x[u]);
  m = warp_max(m);
  double s = 0.0;
  for (int u = lane; u <= t; u += 32)
    s += expf(x[u] - m);
  float inv = (float)(1.0 / warp_sum_d(s));
  for (int u = lane; u < T; u += 32) {
    float e = u <= t ? __fmul_rn(expf(x[u] - m), inv) : 0.0f;
    x[u] = e;
    if (copy)
      copy[u] = e;
  }
}

/* Its backward, by one warp, in place on d (datt of row t): scale * a (d -
 * <a, d>) for u <= t (the sum in f64), 0 above; each lane its own entries. */
__device__ inline void warp_softmax_bwd_row(const float *a, float *d, int t,
                                            int T, float scale) {
  unsigned lane = threadIdx.x & 31;
  double dot = 0.0;
  for (int u = lane; u <= t; u += 32)
    dot += (double)a[u] * d[u];
  float sf = (float)warp_sum_d(dot);
  for (int u = lane; u < T; u += 32)
    d[u] =
        u <= t ? __fmul_rn(__fmul_rn(scale, a[u]), __fsub_rn(d[u], sf)) : 0.0f;
}

/* Causal softmax of each row of att (already scaled), in place. */
__global__ void softmax_causal_k(float *att, size_t rows, int T) {
  size_t warps = global_threads() / 32;
  for (size_t r = global_tid() / 32; r < rows; r += warps)
    warp_softmax_row(att + r * T, nullptr, (int)(r % (size_t)T), T);
}

/* Softmax backward, in place on datt: scale * att (datt - <att, datt>). */
__global__ void softmax_causal_bwd_k(const float *__restrict__ att, float *datt,
                                     size_t rows, int T, float scale) {
  size_t warps = global_threads() / 32;
  for (size_t r = global_tid() / 32; r < rows; r += warps)
    warp_softmax_bwd_row(att + r * T, datt + r * T, (int)(r % (size_t)T), T,
                         scale);
}

/* Fused attention for heads that fit in shared memory (see the header
 * comment). Forward: a grid of (B * NH) x R blocks of W warps; every block
 * puts K and V of its head in shared memory (rows padded to hs + 1 floats:
 * lanes reading rows j apart hit distinct banks) and block y of a head
 * takes the query rows t = y, y + R, ... (interleaved: causal rows grow
 * in cost with t), a warp per row; q, k, v are also written to qkvr for
 * the backward, each row t by block t mod R. A row's warp computes
 * lane-strided scores u <= t (a serial fma dot product, then * scale, as
 * the GEMM's alpha), max, sum of exp (f64) and probabilities as
 * softmax_causal_k; then a lane per column d adds p_u v[u, d] for u =
 * 0..t into out [B, T, C]. Each row is one warp's in a fixed order: the
 * bits do not depend on W or R. The launcher takes up to kFusedMaxWarps
 * warps (latency hiding: a warp's rows are chains of dependent shared
 * memory reads) and enough row groups for about 256 blocks; the shapes
 * that take the fused path are those that fit with kAttnThreads / 32
 * warps (kernels/gpt_launch.h: rp_gpt_attn_fused_*). */
constexpr unsigned kFusedMaxWarps = RP_GPT_ATTN_FUSED_MAX_THREADS / 32;

__global__ void __launch_bounds__(kFusedMaxWarps * 32, 1)
    attention_fused_fwd_k(const float *__restrict__ qkv,
                          float *__restrict__ qkvr, float *__restrict__ att,
                          float *__restrict__ out, int B, int T, int NH, int hs,
                          float scale) {
  extern __shared__ float sm[];
  const int p = hs + 1, C = NH * hs;
  const unsigned W = blockDim.x >> 5, R = gridDim.y, y = blockIdx.y;
  const size_t bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const size_t per = (size_t)B * NH * T * hs;
  float *Ks = sm, *Vs = Ks + (size_t)T * p;
  float *qw = Vs + (size_t)T * p, *pw = qw + W * (size_t)hs;
  for (size_t i = threadIdx.x; i < (size_t)T * hs; i += blockDim.x) {
    size_t t = i / hs, d = i % hs;
    size_t src = ((b * T + t) * 3) * C + h * hs + d, dst = bh * T * hs + i;
    float k = qkv[src + C], v = qkv[src + 2 * C];
    if (t % R == y)
      qkvr[dst] = qkv[src], qkvr[per + dst] = k, qkvr[2 * per + dst] = v;
    Ks[t * p + d] = k, Vs[t * p + d] = v;
  }
  __syncthreads();
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float *qr = qw + warp * (size_t)hs, *pr = pw + warp * (size_t)T;
  for (int t = (int)(warp * R + y); t < T; t += (int)(W * R)) {
    const size_t row = (b * T + t) * 3 * C + h * hs;
    for (int d = lane; d < hs; d += 32)
      qr[d] = qkv[row + d];
    __syncwarp();
    for (int u = lane; u <= t; u += 32) {
      const float *k = Ks + (size_t)u * p;
      float dot = 0.0f;
      for (int d = 0; d < hs; d++)
        dot = fmaf(qr[d], k[d], dot);
      pr[u] = scale * dot;
    }
    warp_softmax_row(pr, att + (bh * T + t) * T, t, T);
    __syncwarp(); /* every probability is visible to the warp */
    float *o = out + (b * T + t) * C + h * hs;
    for (int d = lane; d < hs; d += 32) {
      float acc = 0.0f;
      for (int u = 0; u <= t; u++)
        acc = fmaf(pr[u], Vs[(size_t)u * p + d], acc);
      o[d] = acc;
    }
    __syncwarp(); /* qr and pr are rewritten for the next row */
  }
}

/* Fused backward, a block of kFusedMaxWarps warps per (b, h): K, V and dy
 * of the head in shared memory, dpre [T, T] beside them. Phase 1, a warp per
 * row t: datt[u] = dy[t] . v[u] for u <= t (lane-strided), then dpre = scale *
 * att (datt - <att, datt>) as softmax_causal_bwd_k (the sum in f64), 0 above
 * the diagonal. Phase 2: q replaces V in shared memory. Phase 3, a warp per row
 * t and a lane per column d: dq[t] = sum_{u<=t} dpre[t, u] k[u], dk[t] =
 * sum_{i>=t} dpre[i, t] q[i], dv[t] = sum_{i>=t} att[i, t] dy[i], written
 * straight into dqkv [B, T, 3C]. */
__global__ void __launch_bounds__(kFusedMaxWarps * 32, 1)
    attention_fused_bwd_k(const float *__restrict__ dout,
                          const float *__restrict__ qkvr,
                          const float *__restrict__ att,
                          float *__restrict__ dqkv, int B, int T, int NH,
                          int hs, float scale) {
  extern __shared__ float sm[];
  const int p = hs + 1, C = NH * hs;
  const size_t bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const size_t per = (size_t)B * NH * T * hs, head = bh * T * hs;
  float *Ks = sm, *Vs = Ks + (size_t)T * p, *Ys = Vs + (size_t)T * p;
  float *dS = Ys + (size_t)T * p;
  const float *ab = att + bh * T * T;
  for (size_t i = threadIdx.x; i < (size_t)T * hs; i += blockDim.x) {
    size_t t = i / hs, d = i % hs;
    Ks[t * p + d] = qkvr[per + head + i];
    Vs[t * p + d] = qkvr[2 * per + head + i];
    Ys[t * p + d] = dout[(b * T + t) * C + h * hs + d];
  }
  __syncthreads();
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int W = (int)(blockDim.x >> 5);
  for (int t = warp; t < T; t += W) {
    const float *y = Ys + (size_t)t * p;
    float *ds = dS + (size_t)t * T;
    for (int u = lane; u <= t; u += 32) {
      const float *v = Vs + (size_t)u * p;
      float acc = 0.0f;
      for (int d = 0; d < hs; d++)
        acc = fmaf(y[d], v[d], acc);
      ds[u] = acc;
    }
    warp_softmax_bwd_row(ab + (size_t)t * T, ds, t, T, scale);
  }
  __syncthreads(); /* dpre complete; V no longer read */
  float *Qs = Vs;
  for (size_t i = threadIdx.x; i < (size_t)T * hs; i += blockDim.x)
    Qs[(i / hs) * p + i % hs] = qkvr[head + i];
  __syncthreads();
  for (int t = warp; t < T; t += W) {
    const float *ds = dS + (size_t)t * T;
    float *g = dqkv + (b * T + t) * 3 * C + h * hs;
    for (int d = lane; d < hs; d += 32) {
      float dq = 0.0f, dk = 0.0f, dv = 0.0f;
      for (int u = 0; u <= t; u++)
        dq = fmaf(ds[u], Ks[(size_t)u * p + d], dq);
      for (int i = t; i < T; i++) {
        dk = fmaf(dS[(size_t)i * T + t], Qs[(size_t)i * p + d], dk);
        dv = fmaf(ab[(size_t)i * T + t], Ys[(size_t)i * p + d], dv);
      }
      g[d] = dq, g[C + d] = dk, g[2 * C + d] = dv;
    }
  }
}

/* One block per head h. kcache, vcache [NH, Tmax, hs]; sc [NH, Tmax]. */
__global__ void attention_decode_k(const float *__restrict__ qkv, float *kcache,
                                   float *vcache, float *__restrict__ out,
                                   float *sc, int pos, int T, int NH, int hs,
                                   const int32_t *dev) {
  __shared__ float red[32];
  __shared__ double redd[32];
  extern __shared__ float part[]; /* blockDim.x floats */
  if (dev)
    pos = dev[0];
  int h = blockIdx.x, C = NH * hs;
  float *o = out + (size_t)h * hs;
  if (pos < 0 || pos >= T) { /* block-uniform */
    for (int d = threadIdx.x; d < hs; d += blockDim.x)
      o[d] = nan_f();
    return;
  }
  float *K = kcache + (size_t)h * T * hs, *Vc = vcache + (size_t)h * T * hs;
  const float *q = qkv + (size_t)h * hs;
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    K[(size_t)pos * hs + d] = qkv[C + h * hs + d];
    Vc[(size_t)pos * hs + d] = qkv[2 * C + h * hs + d];
  }
  __syncthreads(); /* the cache rows are visible to the whole block */
  float scale = 1.0f / sqrtf((float)hs);
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned nwarps = blockDim.x >> 5;
  float *s = sc + (size_t)h * T;
  for (int u = warp; u <= pos; u += nwarps) {
    const float *k = K + (size_t)u * hs;
    float dot = 0.0f;
    for (int d = lane; d < hs; d += 32)
      dot = __fadd_rn(dot, __fmul_rn(q[d], k[d]));
    dot = warp_sum(dot);
    if (lane == 0)
      s[u] = __fmul_rn(scale, dot);
  }
  __syncthreads(); /* scores visible */
  float m = -INFINITY;
  for (int u = threadIdx.x; u <= pos; u += blockDim.x)
    m = fmaxf(m, s[u]);
  m = block_max(m, red);
  double sum = 0.0;
  for (int u = threadIdx.x; u <= pos; u += blockDim.x) {
    float e = expf(s[u] - m);
    s[u] = e; /* each thread rewrites only what it read */
    sum += e;
  }
  float inv = (float)(1.0 / block_sum_d(sum, redd));
  for (int u = threadIdx.x; u <= pos; u += blockDim.x)
    s[u] = __fmul_rn(s[u], inv); /* the same u as above: own entries */
  __syncthreads();               /* the probabilities are visible */
  /* out: columns in chunks of w = min(hs, blockDim); g groups of w threads
   * split u (group j takes u = j, j + g, ...), then group 0 adds the
   * groups' partials in group order. */
  int w = hs < (int)blockDim.x ? hs : (int)blockDim.x;
  int groups = (int)blockDim.x / w;
  int grp = (int)threadIdx.x / w, col = (int)threadIdx.x % w;
  for (int d0 = 0; d0 < hs; d0 += w) {
    int d = d0 + col;
    float acc = 0.0f;
    if (grp < groups && d < hs)
      for (int u = grp; u <= pos; u += groups)
        acc = __fadd_rn(acc, __fmul_rn(s[u], Vc[(size_t)u * hs + d]));
    part[threadIdx.x] = acc;
    __syncthreads();
    if (grp == 0 && d < hs) {
      float tot = part[col];
      for (int j = 1; j < groups; j++)
        tot += part[j * w + col];
      o[d] = tot;
    }
    __syncthreads(); /* part is rewritten by the next chunk */
  }
}

/* The attention's path: REPRISE_GPT_ATTN fused (the default: the fused
 * kernels where a head fits in shared memory, the GEMM path otherwise) or
 * gemm (the GEMM path always). */
enum class AttnMode { fused, gemm };

rp_status attn_mode(AttnMode *mode, const char *what) {
  return env_enum("REPRISE_GPT_ATTN", "fused", "gemm",
                  "the attention's kernels", what, mode);
}

/* The GEMM path's head layout: REPRISE_GPT_ATTN_GEMM permute (the
 * default: heads copied into [B, NH, T, hs] around strided-batched GEMMs)
 * or direct (the GEMMs whose operand or result is in the [B, T, C] or
 * [B, T, 3C] layout address each head in place, through pointer tables:
 * no permute but qkv's, which writes qkvr for the backward). */
enum class GemmLayout { permute, direct };

rp_status gemm_layout(GemmLayout *layout, const char *what) {
  return env_enum("REPRISE_GPT_ATTN_GEMM", "permute", "direct",
                  "the attention GEMMs' head layout", what, layout);
}

/* Pointer tables for rp_cuda_gemm_batched: entry i (head i = b NH + h) of
 * table j is base[j] + b sb[j] + h sh[j]. Table j starts at entry j
 * table_stride(bh): an even count, so every table is 16-byte aligned
 * (cuBLAS has asked that of pointer arrays). */
inline size_t table_stride(int bh) {
  return ((size_t)bh + 1) & ~(size_t)1;
}

constexpr int kMaxTables = 9;
struct HeadTables {
  const float *base[kMaxTables];
  long long sb[kMaxTables], sh[kMaxTables];
  int n;
  int add(const float *base_, long long sb_, long long sh_) {
    base[n] = base_, sb[n] = sb_, sh[n] = sh_;
    return n++;
  }
};

__global__ void head_tables_k(HeadTables t, float **tab, int bh, int NH,
                              size_t stride) {
  size_t total = (size_t)t.n * (size_t)bh;
  for (size_t x = global_tid(); x < total; x += global_threads()) {
    size_t j = x / (size_t)bh, i = x % (size_t)bh;
    tab[j * stride + i] = const_cast<float *>(t.base[j]) +
                          (long long)(i / NH) * t.sb[j] +
                          (long long)(i % NH) * t.sh[j];
  }
}

/* The tables' place: scratch rounded up to 16 bytes, when `tables` tables
 * fit in its `floats` floats (nullptr otherwise: the shape takes the
 * permute layout; a choice by the shape alone, so eager and replay
 * agree). */
float **tables_in(float *scratch, size_t floats, int tables, int bh) {
  size_t need = (size_t)tables * table_stride(bh) * sizeof(float *) + 12;
  if (floats * sizeof(float) < need)
    return nullptr;
  uintptr_t a = reinterpret_cast<uintptr_t>(scratch);
  a = (a + 15) & ~(uintptr_t)15;
  return reinterpret_cast<float **>(a);
}

/* Fills the tables of t at tab (stream-ordered before the GEMMs that read
 * them). */
rp_status head_tables(const HeadTables &t, float **tab, int bh, int NH,
                      cudaStream_t s, const char *what) {
  size_t total = (size_t)t.n * (size_t)bh;
  head_tables_k<<<blocks_for(total, kAttnThreads), kAttnThreads, 0, s>>>(
      t, tab, bh, NH, table_stride(bh));
  return RP_GPT_LAUNCHED(what);
}

/* Both fused kernels within the 48 KiB of shared memory a block gets
 * without opting in (rp_gpt_attn_fused_fits): T 64 with hs 32 (the
 * launch-bound step) fits, T 256 with hs 64 (nanoGPT's) does not. */
bool fused_fits(AttnMode mode, int T, int hs) {
  return mode == AttnMode::fused && rp_gpt_attn_fused_fits(T, hs);
}

bool attn_shape_ok(int B, int T, int C, int NH, const char *what) {
  if (NH > 0 && C % NH == 0)
    return true;
  rp__err(RP_EBACKEND, "%s: C = %d is not a multiple of NH = %d (B %d, T %d)",
          what, C, NH, B, T);
  return false;
}

/* What the forward and the backward check first: the settings
 * (REPRISE_GPT_ATTN, REPRISE_GPT_ATTN_GEMM), then the shape. *go is false
 * when they launch nothing: a failed check (its status) or an empty shape
 * (RP_OK). */
rp_status attn_begin(int B, int T, int C, int NH, const char *what,
                     AttnMode *mode, GemmLayout *layout, bool *go) {
  *go = false;
  rp_status st = attn_mode(mode, what);
  if (st == RP_OK)
    st = gemm_layout(layout, what);
  if (st != RP_OK || B <= 0 || T <= 0 || C <= 0)
    return st;
  if (!attn_shape_ok(B, T, C, NH, what))
    return RP_EBACKEND;
  *go = true;
  return RP_OK;
}

/* The causal softmax's backward over the bh heads' rows, in place on datt
 * (both layouts of the GEMM path). */
rp_status softmax_bwd(const float *att, float *datt, int bh, int T, int hs,
                      cudaStream_t s, const char *what) {
  size_t rows = (size_t)bh * T;
  softmax_causal_bwd_k<<<blocks_for(rows, kAttnThreads / 32), kAttnThreads, 0,
                         s>>>(att, datt, rows, T, 1.0f / sqrtf((float)hs));
  return RP_GPT_LAUNCHED(what);
}

/* The GEMM path's backward in the direct layout: dout and dqkv addressed
 * per head in place (tables at tab), q, k, v from qkvr, att and datt
 * [B, NH, T, T]; the permute layout's GEMMs and softmax backward, in its
 * order. */
rp_status attention_bwd_direct(const float *dout, const float *q,
                               const float *k, const float *v, const float *att,
                               float *dqkv, float *datt, float **tab, int B,
                               int T, int NH, int hs, cudaStream_t s,
                               const char *what) {
  const int C = NH * hs, bh = B * NH;
  const long long sq = (long long)T * hs, st2 = (long long)T * T;
  const long long tc = (long long)T * C, t3c = 3 * tc;
  HeadTables t{};
  const int ty = t.add(dout, tc, hs), tv = t.add(v, NH * sq, sq);
  const int tk = t.add(k, NH * sq, sq), tq = t.add(q, NH * sq, sq);
  const int ta = t.add(att, NH * st2, st2), td = t.add(datt, NH * st2, st2);
  const int gq = t.add(dqkv, t3c, hs), gk = t.add(dqkv + C, t3c, hs);
  const int gv = t.add(dqkv + 2 * C, t3c, hs);
  rp_status st = head_tables(t, tab, bh, NH, s, what);
  const size_t ts = table_stride(bh);
  auto in = [&](int j) -> const float *const * { return tab + j * ts; };
  auto outp = [&](int j) -> float *const * { return tab + j * ts; };
  /* datt = dy v^T; dv = att^T dy */
  if (st == RP_OK)
    st = rp_cuda_gemm_batched(0, 1, T, T, hs, 1.0f, in(ty), C, in(tv), hs, 0.0f,
                              outp(td), T, bh, s);
  if (st == RP_OK)
    st = rp_cuda_gemm_batched(1, 0, T, hs, T, 1.0f, in(ta), T, in(ty), C, 0.0f,
                              outp(gv), 3 * C, bh, s);
  if (st != RP_OK)
    return st;
  st = softmax_bwd(att, datt, bh, T, hs, s, what);
  /* dq = dpre k; dk = dpre^T q */
  if (st == RP_OK)
    st = rp_cuda_gemm_batched(0, 0, T, hs, T, 1.0f, in(td), T, in(tk), hs, 0.0f,
                              outp(gq), 3 * C, bh, s);
  if (st == RP_OK)
    st = rp_cuda_gemm_batched(1, 0, T, hs, T, 1.0f, in(td), T, in(tq), hs, 0.0f,
                              outp(gk), 3 * C, bh, s);
  return st;
}

} // namespace

extern "C" rp_status rp_cuda_gpt_attention_fwd(const float *qkv, float *qkvr,
                                               float *att, float *out,
                                               float *scratch, int B, int T,
                                               int C, int NH, void *stream) {
  static const char what[] = "rp_cuda_gpt_attention_fwd";
  AttnMode mode;
  GemmLayout layout;
  bool go;
  rp_status st = attn_begin(B, T, C, NH, what, &mode, &layout, &go);
  if (!go)
    return st;
  cudaStream_t s = as_stream(stream);
  int hs = C / NH, bh = B * NH;
  if (fused_fits(mode, T, hs)) {
    rp_gpt_launch l = rp_gpt_attn_fused_fwd_launch(bh, T, hs);
    attention_fused_fwd_k<<<grid_of(l), block_of(l), l.smem, s>>>(
        qkv, qkvr, att, out, B, T, NH, hs, 1.0f / sqrtf((float)hs));
    return RP_GPT_LAUNCHED(what);
  }
  size_t n = (size_t)B * T * C;
  long long sq = (long long)T * hs, st2 = (long long)T * T;
  const float *q = qkvr, *k = qkvr + n, *v = qkvr + 2 * n;
  launch_permute(Permute::qkv, qkv, qkvr, B, T, NH, hs, s);
  st = RP_GPT_LAUNCHED(what);
  if (st == RP_OK)
    st = rp_cuda_gemm_strided_batched(0, 1, T, T, hs, 1.0f / sqrtf((float)hs),
                                      q, hs, sq, k, hs, sq, 0.0f, att, T, st2,
                                      bh, stream);
  if (st != RP_OK)
    return st;
  size_t rows = (size_t)bh * T;
  softmax_causal_k<<<blocks_for(rows, kAttnThreads / 32), kAttnThreads, 0, s>>>(
      att, rows, T);
  st = RP_GPT_LAUNCHED(what);
  float **tab =
      layout == GemmLayout::direct ? tables_in(scratch, n, 3, bh) : nullptr;
  if (st == RP_OK && tab) { /* y = att v straight into out [B, T, C] */
    HeadTables t{};
    const size_t ts = table_stride(bh);
    int ta = t.add(att, (long long)NH * T * T, st2);
    int tv = t.add(v, (long long)NH * sq, sq);
    int to = t.add(out, (long long)T * C, hs);
    st = head_tables(t, tab, bh, NH, s, what);
    if (st == RP_OK)
      st = rp_cuda_gemm_batched(0, 0, T, hs, T, 1.0f, tab + ta * ts, T,
                                tab + tv * ts, hs, 0.0f, tab + to * ts, C, bh,
                                stream);
    return st;
  }
  if (st == RP_OK)
    st = rp_cuda_gemm_strided_batched(0, 0, T, hs, T, 1.0f, att, T, st2, v, hs,
                                      sq, 0.0f, scratch, hs, sq, bh, stream);
  if (st != RP_OK)
    return st;
  launch_permute(Permute::heads_to_bt, scratch, out, B, T, NH, hs, s);
  return RP_GPT_LAUNCHED(what);
}

extern "C" rp_status rp_cuda_gpt_attention_bwd(
    const float *dout, const float *qkvr, const float *att, float *dqkv,
    float *datt, float *scratch, int B, int T, int C, int NH, void *stream) {
  static const char what[] = "rp_cuda_gpt_attention_bwd";
  AttnMode mode;
  GemmLayout layout;
  bool go;
  rp_status st = attn_begin(B, T, C, NH, what, &mode, &layout, &go);
  if (!go)
    return st;
  cudaStream_t s = as_stream(stream);
  int hs = C / NH, bh = B * NH;
  if (fused_fits(mode, T, hs)) {
    rp_gpt_launch l = rp_gpt_attn_fused_bwd_launch(bh, T, hs);
    attention_fused_bwd_k<<<grid_of(l), block_of(l), l.smem, s>>>(
        dout, qkvr, att, dqkv, B, T, NH, hs, 1.0f / sqrtf((float)hs));
    return RP_GPT_LAUNCHED(what);
  }
  size_t n = (size_t)B * T * C;
  long long sq = (long long)T * hs, st2 = (long long)T * T;
  const float *q = qkvr, *k = qkvr + n, *v = qkvr + 2 * n;
  float **tab =
      layout == GemmLayout::direct ? tables_in(scratch, 4 * n, 9, bh) : nullptr;
  if (tab)
    return attention_bwd_direct(dout, q, k, v, att, dqkv, datt, tab, B, T, NH,
                                hs, s, what);
  float *dy = scratch, *dq = scratch + n, *dk = scratch + 2 * n,
        *dv = scratch + 3 * n;
  launch_permute(Permute::heads_from_bt, dout, dy, B, T, NH, hs, s);
  st = RP_GPT_LAUNCHED(what);
  if (st == RP_OK)
    st = rp_cuda_gemm_strided_batched(0, 1, T, T, hs, 1.0f, dy, hs, sq, v, hs,
                                      sq, 0.0f, datt, T, st2, bh, stream);
  if (st == RP_OK)
    st = rp_cuda_gemm_strided_batched(1, 0, T, hs, T, 1.0f, att, T, st2, dy, hs,
                                      sq, 0.0f, dv, hs, sq, bh, stream);
  if (st != RP_OK)
    return st;
  st = softmax_bwd(att, datt, bh, T, hs, s, what);
  if (st == RP_OK)
    st = rp_cuda_gemm_strided_batched(0, 0, T, hs, T, 1.0f, datt, T, st2, k, hs,
                                      sq, 0.0f, dq, hs, sq, bh, stream);
  if (st == RP_OK)
    st = rp_cuda_gemm_strided_batched(1, 0, T, hs, T, 1.0f, datt, T, st2, q, hs,
                                      sq, 0.0f, dk, hs, sq, bh, stream);
  if (st != RP_OK)
    return st;
  launch_permute(Permute::dqkv, dq, dqkv, B, T, NH, hs, s);
  return RP_GPT_LAUNCHED(what);
}

extern "C" rp_status
rp_cuda_gpt_attention_decode(const float *qkv, float *kcache, float *vcache,
                             float *out, float *scratch, int pos, int T, int C,
                             int NH, const void *dev_args, void *stream) {
  static const char what[] = "rp_cuda_gpt_attention_decode";
  if (T <= 0 || C <= 0)
    return RP_OK;
  if (!attn_shape_ok(1, T, C, NH, what))
    return RP_EBACKEND;
  rp_gpt_launch l = rp_gpt_attn_decode_launch(NH);
  attention_decode_k<<<grid_of(l), block_of(l), l.smem, as_stream(stream)>>>(
      qkv, kcache, vcache, out, scratch, pos, T, NH, C / NH,
      static_cast<const int32_t *>(dev_args));
  return RP_GPT_LAUNCHED(what);
}
