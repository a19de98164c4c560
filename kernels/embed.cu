/* kernels/embed.cu — CUDA launchers of the embedding kernels
 * (gpt_kernels.h: gpt.embed_fwd, gpt.embed_bwd, gpt.embed_token).
 *
 * embed_fwd: a block per row (b, t), threads over the C columns:
 *   out = wte[tok] + wpe[t] (one f32 add: equal to the CPU result); a token
 *   outside [0, V) makes the row NaN.
 * embed_bwd, deterministic without atomics or scratch:
 *   dwpe: a thread per (t, c) sums dout[b, t, c] over b in increasing order
 *     from 0 (the CPU's order and operations: equal results);
 *   dwte: a block lists the positions q holding its token in increasing
 *     order (an ordered block compaction into shared memory, flushed when
 *     full) and each thread adds dout[q, c] for its columns into
 *     dwte[tok, c] in that order: the CPU's order and operations (equal
 *     results). Which block takes which token:
 *     - by token, when 4 V x the column blocks <= N (the GPT's byte-level
 *       vocabularies): block (v, y) takes token v and 256 columns, and
 *       scans all N positions: V N comparisons a column block;
 *     - else by position: a block per position p (grid-stride) owns tok[p]
 *       when p is its first occurrence (it scans tok[0..p) for an earlier
 *       one) and lists q >= p: O(N^2) comparisons.
 *     Positions with a token outside [0, V) are skipped (the CPU refuses
 *     them before writing). O(N C) float adds either way.
 * embed_token: one block, threads over C; pos and token from dev_args
 *   (offsets 0 and 4) when given; out of range: NaN. */
#include "gpt_cuda.cuh"

using namespace rp_gpt;

namespace {

constexpr unsigned kEmbedThreads = RP_GPT_EMBED_THREADS;
/* dwte owner block: positions gathered per flush (shared int32s). */
constexpr unsigned kEmbedList = 2048;

__global__ void embed_fwd_k(const int32_t *__restrict__ tokens,
                            const float *__restrict__ wte,
                            const float *__restrict__ wpe,
                            float *__restrict__ out, int B, int T, int C,
                            int V) {
  size_t rows = (size_t)B * T;
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int32_t tok = tokens[r];
    bool ok = tok >= 0 && tok < V;
    size_t t = r % (size_t)T;
    const float *e = wte + (ok ? (size_t)tok : 0) * C;
    const float *p = wpe + t * C;
    float *o = out + r * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      o[c] = ok ? e[c] + p[c] : nan_f();
  }
}

/* dwpe[t, c] = sum_b dout[b, t, c], b increasing, from 0. */
__global__ void embed_bwd_wpe_k(const float *__restrict__ dout,
                                float *__restrict__ dwpe, int B, int T, int C) {
  size_t n = (size_t)T * C, row = (size_t)T * C;
  for (size_t i = global_tid(); i < n; i += global_threads()) {
    float acc = 0.0f;
    for (int b = 0; b < B; b++)
      acc += dout[(size_t)b * row + i];
    dwpe[i] = acc;
  }
}

/* Rows whose loads embed_flush issues before their adds. */
constexpr unsigned kEmbedAhead = 8;

/* Adds the listed rows of dout (in list order) into columns [c0, c1) of
 * dwte row tok. Every thread calls it (barrier inside, so the list may be
 * refilled after). The loads go kEmbedAhead rows ahead of the adds, which
 * keep their order: a frequent token's thousands of rows wait for memory
 * once a group, not once a row (the nanoGPT step's embed_bwd on an NVIDIA
 * H200, Nsight Compute: 0.60 ms with a load before each add at 5608426,
 * 0.30 ms at 1535567). */
__device__ void embed_flush(const float *__restrict__ dout, float *dwte,
                            int32_t tok, int C, int c0, int c1, const int *list,
                            unsigned cnt) {
  __syncthreads(); /* the list writes are visible */
  float *d = dwte + (size_t)tok * C;
  for (int c = c0 + (int)threadIdx.x; c < c1; c += blockDim.x) {
    float acc = d[c];
    unsigned j = 0;
    for (; j + kEmbedAhead <= cnt; j += kEmbedAhead) {
      float x[kEmbedAhead];
#pragma unroll
      for (unsigned u = 0; u < kEmbedAhead; u++)
        x[u] = dout[(size_t)list[j + u] * C + c];
#pragma unroll
      for (unsigned u = 0; u < kEmbedAhead; u++)
        acc += x[u];
    }
    for (; j < cnt; j++)
      acc += dout[(size_t)list[j] * C + c];
    d[c] = acc;
  }
  __syncthreads(); /* done reading the list */
}

/* Adds the rows q >= from of dout whose token is tok, in increasing q,
 * into columns [c0, c1) of dwte row tok: an ordered compaction of the
 * positions into the shared list (chunks of blockDim positions, a warp's
 * matches ranked by ballot, warps in order; cnt is block-uniform), flushed
 * when full. blockDim.x == kEmbedThreads; every thread calls it. */
__device__ void embed_gather(const int32_t *__restrict__ tokens,
                             const float *__restrict__ dout, float *dwte,
                             int32_t tok, int from, int N, int C, int c0,
                             int c1, int *list, unsigned *warp_cnt) {
  unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned nwarps = blockDim.x >> 5;
  unsigned cnt = 0;
  for (int q0 = from; q0 < N; q0 += blockDim.x) {
    if (cnt > kEmbedList - blockDim.x) { /* room for a whole chunk */
      embed_flush(dout, dwte, tok, C, c0, c1, list, cnt);
      cnt = 0;
    }
    int q = q0 + (int)threadIdx.x;
    bool match = q < N && tokens[q] == tok;
    unsigned ballot = __ballot_sync(kFull, match);
    if (lane == 0)
      warp_cnt[warp] = __popc(ballot);
    __syncthreads();
    unsigned before = 0, total = 0;
    for (unsigned w = 0; w < nwarps; w++) {
      before += w < warp ? warp_cnt[w] : 0;
      total += warp_cnt[w];
    }
    if (match)
      list[cnt + before + __popc(ballot & ((1u << lane) - 1u))] = q;
    cnt += total;
    __syncthreads(); /* warp_cnt is rewritten by the next chunk */
  }
  embed_flush(dout, dwte, tok, C, c0, c1, list, cnt);
}

/* By position: a block per position p (grid-stride) owns token tok[p]
 * when no earlier position holds it, and gathers its rows from p on.
 * O(N^2) token comparisons: for vocabularies large against N. */
__global__ void embed_bwd_wte_k(const int32_t *__restrict__ tokens,
                                const float *__restrict__ dout,
                                float *__restrict__ dwte, int N, int C, int V) {
  __shared__ int list[kEmbedList];
  __shared__ unsigned warp_cnt[kEmbedThreads / 32];
  for (int p = blockIdx.x; p < N; p += gridDim.x) {
    int32_t tok = tokens[p];
    if (tok < 0 || tok >= V)
      continue; /* block-uniform */
    int earlier = 0;
    for (int q = threadIdx.x; q < p; q += blockDim.x)
      earlier |= tokens[q] == tok;
    if (__syncthreads_or(earlier))
      continue;
    embed_gather(tokens, dout, dwte, tok, p, N, C, 0, C, list, warp_cnt);
  }
}

/* By token: block (v, y) gathers token v's rows into columns [y *
 * kEmbedThreads, + kEmbedThreads) (grid-stride over v). V x N token
 * comparisons a column block: for vocabularies small against N. */
__global__ void embed_bwd_wte_tok_k(const int32_t *__restrict__ tokens,
                                    const float *__restrict__ dout,
                                    float *__restrict__ dwte, int N, int C,
                                    int V) {
  __shared__ int list[kEmbedList];
  __shared__ unsigned warp_cnt[kEmbedThreads / 32];
  int c0 = (int)(blockIdx.y * kEmbedThreads);
  int c1 = C - c0 < (int)kEmbedThreads ? C : c0 + (int)kEmbedThreads;
  for (int v = blockIdx.x; v < V; v += gridDim.x)
    embed_gather(tokens, dout, dwte, v, 0, N, C, c0, c1, list, warp_cnt);
}

__global__ void embed_token_k(const float *__restrict__ wte,
                              const float *__restrict__ wpe,
                              float *__restrict__ out, int pos, int token,
                              int C, int V, int T, const int32_t *dev) {
  if (dev) {
    pos = dev[0];
    token = dev[1];
  }
  bool ok = pos >= 0 && pos < T && token >= 0 && token < V;
  const float *e = wte + (ok ? (size_t)token : 0) * C;
  const float *p = wpe + (ok ? (size_t)pos : 0) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    out[c] = ok ? e[c] + p[c] : nan_f();
}

} // namespace

extern "C" rp_status rp_cuda_gpt_embed_fwd(const int32_t *tokens,
                                           const float *wte, const float *wpe,
                                           float *out, int B, int T, int C,
                                           int V, void *stream) {
  size_t rows = (size_t)B * T;
  if (rows == 0 || C <= 0)
    return RP_OK;
  embed_fwd_k<<<blocks_for(rows, 1), kEmbedThreads, 0, as_stream(stream)>>>(
      tokens, wte, wpe, out, B, T, C, V);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_embed_fwd");
}

extern "C" rp_status rp_cuda_gpt_embed_bwd(const int32_t *tokens,
                                           const float *dout, float *dwte,
                                           float *dwpe, int B, int T, int C,
                                           int V, void *stream) {
  if (T <= 0 || C <= 0)
    return RP_OK;
  cudaStream_t s = as_stream(stream);
  /* B == 0 still runs: dwpe = 0, as on the CPU */
  embed_bwd_wpe_k<<<blocks_for((size_t)T * C, kEmbedThreads), kEmbedThreads, 0,
                    s>>>(dout, dwpe, B < 0 ? 0 : B, T, C);
  rp_status st = RP_GPT_LAUNCHED("rp_cuda_gpt_embed_bwd: dwpe");
  long long n = (long long)B * T;
  if (st != RP_OK || n <= 0)
    return st;
  /* The kernels' int loops step past N by up to 65536 blocks: keep that
   * in range. */
  if (n > 0x7fffffffLL - 65536)
    return rp__err(RP_EBACKEND, "rp_cuda_gpt_embed_bwd: %lld positions", n);
  int by_token;
  rp_gpt_launch l = rp_gpt_embed_bwd_wte_launch(n, C, V, &by_token);
  if (by_token)
    embed_bwd_wte_tok_k<<<grid_of(l), block_of(l), l.smem, s>>>(
        tokens, dout, dwte, (int)n, C, V);
  else
    embed_bwd_wte_k<<<grid_of(l), block_of(l), l.smem, s>>>(tokens, dout, dwte,
                                                            (int)n, C, V);
  return RP_GPT_LAUNCHED("rp_cuda_gpt_embed_bwd: dwte");
}

extern "C" rp_status rp_cuda_gpt_embed_token(const float *wte, const float *wpe,
                                             float *out, int pos, int token,
                                             int C, int V, int T,
                                             const void *dev_args,
                                             void *stream) {
  if (C <= 0)
    return RP_OK;
  embed_token_k<<<1, kEmbedThreads, 0, as_stream(stream)>>>(
      wte, wpe, out, pos, token, C, V, T,
      static_cast<const int32_t *>(dev_args));
  return RP_GPT_LAUNCHED("rp_cuda_gpt_embed_token");
}
