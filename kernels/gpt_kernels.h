/* kernels/gpt_kernels.h — the transformer (GPT) kernels: task contracts,
 * argument structs, and the raw kernels behind them.
 *
 * Three layers, one contract:
 *  1. Tasks ("gpt.*", registered by rp_kernels_register with the ids in
 *     rp_kernel_tasks): each reads the args struct below from
 *     rp_ctx_args() and its instances in the access order documented here.
 *     Arguments and shapes are checked once, by the task's op descriptor
 *     (kernels/op_table.h; the gpt.* ones in kernels/gpt_tasks.c), before
 *     any data is touched; so is aliasing: an access the task writes
 *     shares no memory with another access (RP_EINVAL naming both), except
 *     gpt.gelu_bwd's dpre, which may be dout's instance.
 *  2. CPU kernels rp_cpu_gpt_* (plain C, CBLAS for GEMMs).
 *  3. CUDA launchers rp_cuda_gpt_* (the kernels/NAME.cu files; C-callable,
 * no CUDA types: a stream is a cudaStream_t passed as void *). They take the
 * same arguments as the CPU kernel of the same name, plus the stream (and, for
 * tasks registered with RP_TASK_DEVICE_ARGS, a device pointer to the replay's
 * argument bytes, NULL outside an exec). Launchers only enqueue work on the
 * stream: no synchronisation, no allocation (cuBLAS state is created by
 * rp_cuda_blas_init before any capture), so every launcher may run inside CUDA
 * stream capture. They return RP_OK or RP_EBACKEND.
 *
 * Sizes: B batch, T context (positions), C width, NH heads, hs = C / NH,
 * V vocabulary, N = B * T rows. Everything is dense row-major f32 (last
 * dimension fastest); tokens and targets are i32. Weight matrices are laid
 * out as PyTorch's nn.Linear: W[OC][C] (out features, in features), so
 * y = x W^T + b.
 *
 * Determinism: no kernel reduces floats in an order that depends on timing
 * (no float atomics); a kernel run twice on the same inputs gives bitwise
 * equal outputs, on both backends. That is what makes a replayed step
 * bitwise equal to the same step run eagerly.
 *
 * Accumulation: "(=)" means the output is overwritten, "(+=)" that the
 * kernel adds into it (the caller zeroes it first where needed). */
#ifndef RP_KERNELS_GPT_KERNELS_H
#define RP_KERNELS_GPT_KERNELS_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Embeddings */

/* "gpt.embed_fwd": out[b,t,:] = wte[tok[b,t],:] + wpe[t,:].
 * Accesses: 0 tokens (READ, I32, B*T), 1 wte (READ, V*C),
 *           2 wpe (READ, >= T*C), 3 out (WRITE, B*T*C).
 * A token outside [0, V): RP_ERANGE (CPU, checked before writing); the GPU
 * kernel writes NaN into that row.
 * "gpt.embed_bwd": dwte[tok[b,t],:] += dout[b,t,:] (+=: the tied LM head
 * wrote its part first); dwpe[t,:] = sum_b dout[b,t,:] (=).
 * Accesses: 0 tokens (READ, I32, B*T), 1 dout (READ, B*T*C),
 *           2 dwte (RW, V*C), 3 dwpe (WRITE, >= T*C).
 * Both: for each vocabulary row (and each position) the rows are summed in
 * increasing (b, t) order, on both backends. */
typedef struct rp_gpt_embed_args {
  int32_t B, T, C, V; /* offsets 0, 4, 8, 12 */
} rp_gpt_embed_args;

/* "gpt.embed_token" (decoding): out[0..C) = wte[token,:] + wpe[pos,:].
 * Registered with RP_TASK_DEVICE_ARGS: pos and token are per-replay
 * arguments (offsets 0 and 4) that the GPU kernel reads through
 * rp_ctx_device_args inside an exec, so the decode graph never changes.
 * Accesses: 0 wte (READ, V*C), 1 wpe (READ, Tmax*C), 2 out (WRITE, C).
 * pos outside [0, Tmax) or token outside [0, V): RP_ERANGE (a check_fn
 * rejects it on the host before the replay; the GPU kernel writes NaN). */
typedef struct rp_gpt_token_args {
  int32_t pos;     /* offset 0: per replay */
  int32_t token;   /* offset 4: per replay */
  int32_t C, V, T; /* offsets 8, 12, 16: T = Tmax, rows of wpe */
} rp_gpt_token_args;

/* ---------------------------------------------------------------------- */
/* LayerNorm (biased variance, as torch.nn.LayerNorm) */

/* "gpt.layernorm_fwd": out = (x - mean) * rstd * w + b per row of C.
 * Accesses: 0 x (READ, N*C), 1 w (READ, C), 2 b (READ, C),
 *           3 out (WRITE, N*C), 4 mean (WRITE, N), 5 rstd (WRITE, N).
 * "gpt.residual_layernorm_fwd": res = a + r (the residual add), then
 * layernorm_fwd of res, in one pass.
 * Accesses: 0 a (READ, N*C), 1 r (READ, N*C), 2 res (WRITE, N*C),
 *           3 w (READ, C), 4 b (READ, C), 5 out (WRITE, N*C),
 *           6 mean (WRITE, N), 7 rstd (WRITE, N). */
typedef struct rp_gpt_ln_args {
  int32_t N, C; /* offsets 0, 4 */
  float eps;    /* offset 8 (1e-5 as PyTorch) */
} rp_gpt_ln_args;

/* "gpt.layernorm_bwd": given dout, the forward input x, w, mean, rstd:
 * dx (= or += by `accumulate`), dw (=), db (=) (column sums in row order).
 * Accesses: 0 dout (READ, N*C), 1 x (READ, N*C), 2 w (READ, C),
 *           3 mean (READ, N), 4 rstd (READ, N),
 *           5 dx (WRITE, or RW when accumulate; N*C),
 *           6 dw (WRITE, C), 7 db (WRITE, C). */
typedef struct rp_gpt_ln_bwd_args {
  int32_t N, C;       /* offsets 0, 4 */
  int32_t accumulate; /* offset 8: 0 dx =, 1 dx += */
} rp_gpt_ln_bwd_args;

/* ---------------------------------------------------------------------- */
/* Linear layers (GEMMs: CBLAS on the CPU, cuBLAS on the GPU, plain FP32
 * math on both: no TF32) */

/* "gpt.matmul_fwd": out[N,OC] = inp[N,C] W[OC,C]^T (+ bias[OC]).
 * Accesses: 0 inp (READ, N*C), 1 W (READ, OC*C), 2 out (WRITE, N*OC),
 *           3 bias (READ, OC; present only when has_bias). */
typedef struct rp_gpt_matmul_args {
  int32_t N, C, OC;   /* offsets 0, 4, 8 */
  int32_t has_bias;   /* offset 12: 0 or 1 */
  int32_t accumulate; /* offset 16 (matmul_bwd only): dinp += instead of = */
} rp_gpt_matmul_args;

/* "gpt.matmul_bwd": dinp (= or +=) dout W; dW (=) dout^T inp;
 * dbias (=) column sums of dout (when has_bias).
 * Accesses: 0 dout (READ, N*OC), 1 inp (READ, N*C), 2 W (READ, OC*C),
 *           3 dinp (WRITE, or RW when accumulate; N*C),
 *           4 dW (WRITE, OC*C), 5 dbias (WRITE, OC; only when has_bias). */

/* ---------------------------------------------------------------------- */
/* GELU (tanh approximation, as nn.GELU(approximate="tanh")) */

/* "gpt.bias_gelu_fwd": pre[r,c] += bias[c]; out = gelu(pre).
 * Accesses: 0 pre (RW, rows*cols), 1 bias (READ, cols),
 *           2 out (WRITE, rows*cols; not pre's instance). */
typedef struct rp_gpt_rows_cols_args {
  int32_t rows, cols; /* offsets 0, 4 */
} rp_gpt_rows_cols_args;

/* "gpt.gelu_bwd": dpre = dout * gelu'(pre), elementwise over n.
 * Accesses: 0 pre (READ, n), 1 dout (READ, n), 2 dpre (WRITE, n; may be
 * dout's instance). */
typedef struct rp_gpt_n_args {
  int64_t n; /* offset 0 */
} rp_gpt_n_args;

/* ---------------------------------------------------------------------- */
/* Causal self-attention (nanoGPT's layout: qkv = [N, 3C], q in columns
 * [0, C), k in [C, 2C), v in [2C, 3C); head h owns columns h*hs..h*hs+hs-1
 * of each) */

/* "gpt.attention_fwd":
 *   qkvr  = q, k, v permuted to [B, NH, T, hs] each (q first, then k, v);
 *   att   = softmax(q k^T / sqrt(hs)) with the causal mask (att[.., t, u]
 *           = 0 for u > t): [B, NH, T, T], kept for the backward;
 *   out   = (att v) permuted back to [B, T, C] (heads concatenated).
 * GEMMs as strided-batched over B*NH (cblas in a loop on the CPU,
 * cublasSgemmStridedBatched on the GPU); the scaled causal softmax is one
 * fused kernel.
 * Accesses: 0 qkv (READ, N*3C), 1 qkvr (WRITE, 3*N*C),
 *           2 att (WRITE, B*NH*T*T), 3 out (WRITE, N*C),
 *           4 scratch (WRITE, N*C: att v before the permute; on the GPU
 *             with REPRISE_GPT_ATTN_GEMM=direct the GEMMs' pointer tables,
 *             whose bits depend on the buffers' addresses). */
typedef struct rp_gpt_attn_args {
  int32_t B, T, C, NH; /* offsets 0, 4, 8, 12 */
} rp_gpt_attn_args;

/* "gpt.attention_bwd": dqkv (=) from dout and the forward's qkvr, att.
 * Accesses: 0 dout (READ, N*C), 1 qkvr (READ, 3*N*C),
 *           2 att (READ, B*NH*T*T), 3 dqkv (WRITE, N*3C),
 *           4 datt (WRITE, B*NH*T*T: scratch),
 *           5 scratch (WRITE, 4*N*C: d(att v) permuted, then dq, dk, dv in
 *             [B, NH, T, hs]; on the GPU with REPRISE_GPT_ATTN_GEMM=direct
 *             the GEMMs' pointer tables). */

/* "gpt.attention_decode" (decoding, batch 1, one token at position pos):
 * writes the token's k and v into the caches at pos, then
 * out = softmax(q K[0..pos]^T / sqrt(hs)) V[0..pos] per head.
 * Registered with RP_TASK_DEVICE_ARGS: pos (offset 0) is a per-replay
 * argument read on the device inside an exec.
 * Accesses: 0 qkv (READ, 3C), 1 kcache (RW, NH*Tmax*hs),
 *           2 vcache (RW, NH*Tmax*hs), 3 out (WRITE, C),
 *           4 scratch (WRITE, NH*Tmax: the scores).
 * pos outside [0, Tmax): RP_ERANGE (check_fn on the host). */
typedef struct rp_gpt_decode_args {
  int32_t pos;      /* offset 0: per replay */
  int32_t T, C, NH; /* offsets 4, 8, 12: T = Tmax */
} rp_gpt_decode_args;

/* ---------------------------------------------------------------------- */
/* Loss */

/* "gpt.xent": softmax cross-entropy over N rows of V logits.
 * losses[r] = -log softmax(logits[r])[target[r]];
 * loss[0] = (sum_r losses[r]) / norm, summed in row order (norm: the global
 * number of rows, 0 meaning N, so that shard losses add up to the mean);
 * with grad = 1, logits are replaced by dlogits = (softmax - onehot) / norm.
 * Accesses: 0 logits (RW when grad, else READ; N*V),
 *           1 targets (READ, I32, N), 2 losses (WRITE, N),
 *           3 loss (WRITE, >= 1).
 * A target outside [0, V): CPU RP_ERANGE before writing; GPU NaN. */
typedef struct rp_gpt_xent_args {
  int32_t N, V; /* offsets 0, 4 */
  float norm;   /* offset 8 */
  int32_t grad; /* offset 12: 0 or 1 */
} rp_gpt_xent_args;

/* ---------------------------------------------------------------------- */
/* Optimizer */

/* "gpt.adamw": AdamW over `count` tensors in one task, with global
 * gradient-norm clipping (torch.nn.utils.clip_grad_norm_ then
 * torch.optim.AdamW, default non-fused math):
 *   sq_i   = sum of g_i^2 (per tensor, in element order: stats[1 + i]);
 *   norm   = sqrt(sum_i sq_i) (tensor order: stats[0], before clipping);
 *   scale  = max_norm > 0 ? min(1, max_norm / (norm + 1e-6)) : 1
 *            (a NaN norm gives scale NaN: every weight NaN, as torch's
 *            clamp; a sum of squares past FLT_MAX, a norm past about
 *            1.8e19, is inf and scale 0 where it is summed as floats: on
 *            the GPU per tensor, with norm_parts per share; the CPU's
 *            unsharded total is a double);
 *   for each element: g = scale * g;
 *     w -= lr * weight_decay * w   (only where decay[i] != 0);
 *     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
 *     w -= lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps).
 * lr and step (1-based) are per-replay arguments at offsets 0 and 4;
 * registered with RP_TASK_DEVICE_ARGS, the GPU variant reads them through
 * rp_ctx_device_args inside an exec (the graph never changes).
 * Accesses: 4 * count, tensor i at 4i: W_i (RW), 4i+1 G_i (READ),
 *           4i+2 M_i (RW), 4i+3 V_i (RW), all of W_i's volume; then
 *           access 4*count: stats (WRITE, >= count + 1); with norm_parts
 *           k > 0, access 4*count + 1: sq (READ, >= k).
 *
 * Sharded state (norm_parts = k > 0): the tensors are one processor's
 * share of a model whose clipping norm covers every share. sq holds the k
 * shares' sums of squares (gpt.sumsq's sq[0] of each, gathered); then
 *   norm = sqrt(sum_j sq[j]) (f64, in index order: stats[0]),
 * and stats[1 + i] is not written (the sums are gpt.sumsq's). Every share
 * given the same sq computes the same norm, bit for bit. */
#define RP_GPT_ADAMW_MAX 512
#define RP_GPT_NORM_PARTS_MAX 64
typedef struct rp_gpt_adamw_args {
  float lr;                        /* offset 0: per replay */
  int32_t step;                    /* offset 4: per replay, >= 1 */
  float beta1, beta2, eps;         /* offsets 8, 12, 16 */
  float weight_decay;              /* offset 20: >= 0 */
  float max_norm;                  /* offset 24: <= 0: no clipping */
  int32_t count;                   /* offset 28: 1..RP_GPT_ADAMW_MAX */
  uint8_t decay[RP_GPT_ADAMW_MAX]; /* offset 32: 1 = decayed (matrices) */
  int32_t norm_parts; /* 0..RP_GPT_NORM_PARTS_MAX: 0, the norm of these */
} rp_gpt_adamw_args;

/* "gpt.sumsq": the sums of squares of `count` gradient tensors (one
 * processor's share of a model's, for a sharded gpt.adamw):
 *   each[i] = sum of g_i^2 (f64 in element order, stored as f32);
 *   sq[0]   = sum_i of those sums (f64 in tensor order, as f32).
 * Accesses: count G_i (READ), then sq (WRITE, >= 1), then each (WRITE,
 * >= count). The CUDA sums run in another order (relative 1e-6). */
typedef struct rp_gpt_sumsq_args {
  int32_t count; /* 1..RP_GPT_ADAMW_MAX */
} rp_gpt_sumsq_args;

/* ---------------------------------------------------------------------- */
/* CPU kernels (kernels/NAME.c: embed, layernorm, matmul, gelu, attention,
 * xent, adamw). Sizes are validated by the task layer;
 * these only compute. Functions that can find bad data (a token, target or
 * position out of range) return RP_ERANGE (with rp_error_detail) before
 * writing anything, else RP_OK. */

rp_status rp_cpu_gpt_embed_fwd(const int32_t *tokens, const float *wte,
                               const float *wpe, float *out, int B, int T,
                               int C, int V);
rp_status rp_cpu_gpt_embed_bwd(const int32_t *tokens, const float *dout,
                               float *dwte, float *dwpe, int B, int T, int C,
                               int V);
rp_status rp_cpu_gpt_embed_token(const float *wte, const float *wpe, float *out,
                                 int pos, int token, int C, int V, int T);
void rp_cpu_gpt_layernorm_fwd(const float *x, const float *w, const float *b,
                              float *out, float *mean, float *rstd, int N,
                              int C, float eps);
void rp_cpu_gpt_residual_layernorm_fwd(const float *a, const float *r,
                                       float *res, const float *w,
                                       const float *b, float *out, float *mean,
                                       float *rstd, int N, int C, float eps);
void rp_cpu_gpt_layernorm_bwd(const float *dout, const float *x, const float *w,
                              const float *mean, const float *rstd, float *dx,
                              float *dw, float *db, int N, int C,
                              int accumulate);
/* bias may be NULL (no bias). */
void rp_cpu_gpt_matmul_fwd(const float *inp, const float *W, const float *bias,
                           float *out, int N, int C, int OC);
/* dbias may be NULL (no bias). */
void rp_cpu_gpt_matmul_bwd(const float *dout, const float *inp, const float *W,
                           float *dinp, float *dW, float *dbias, int N, int C,
                           int OC, int accumulate);
void rp_cpu_gpt_bias_gelu_fwd(float *pre, const float *bias, float *out,
                              int rows, int cols);
void rp_cpu_gpt_gelu_bwd(const float *pre, const float *dout, float *dpre,
                         int64_t n);
void rp_cpu_gpt_attention_fwd(const float *qkv, float *qkvr, float *att,
                              float *out, float *scratch, int B, int T, int C,
                              int NH);
void rp_cpu_gpt_attention_bwd(const float *dout, const float *qkvr,
                              const float *att, float *dqkv, float *datt,
                              float *scratch, int B, int T, int C, int NH);
rp_status rp_cpu_gpt_attention_decode(const float *qkv, float *kcache,
                                      float *vcache, float *out, float *scratch,
                                      int pos, int T, int C, int NH);
rp_status rp_cpu_gpt_xent(float *logits, const int32_t *targets, float *losses,
                          float *loss, int N, int V, float norm, int grad);
/* w, g, m, v: arrays of count pointers; n: element counts. */
/* sq: the shares' sums of squares when a->norm_parts > 0, else unused. */
void rp_cpu_gpt_adamw(float *const *w, const float *const *g, float *const *m,
                      float *const *v, const size_t *n, float *stats,
                      const float *sq, const rp_gpt_adamw_args *a);
void rp_cpu_gpt_sumsq(const float *const *g, const size_t *n, int count,
                      float *sq, float *each);

/* ---------------------------------------------------------------------- */
/* CUDA launchers (the kernels/NAME.cu files, CUDA builds only). dev_args:
 * the replay's argument bytes on the device (rp_ctx_device_args), or NULL to
 * use the by-value arguments. */
#ifdef REPRISE_HAVE_CUDA
rp_status rp_cuda_gpt_embed_fwd(const int32_t *tokens, const float *wte,
                                const float *wpe, float *out, int B, int T,
                                int C, int V, void *stream);
rp_status rp_cuda_gpt_embed_bwd(const int32_t *tokens, const float *dout,
                                float *dwte, float *dwpe, int B, int T, int C,
                                int V, void *stream);
rp_status rp_cuda_gpt_embed_token(const float *wte, const float *wpe,
                                  float *out, int pos, int token, int C, int V,
                                  int T, const void *dev_args, void *stream);
rp_status rp_cuda_gpt_layernorm_fwd(const float *x, const float *w,
                                    const float *b, float *out, float *mean,
                                    float *rstd, int N, int C, float eps,
                                    void *stream);
rp_status rp_cuda_gpt_residual_layernorm_fwd(const float *a, const float *r,
                                             float *res, const float *w,
                                             const float *b, float *out,
                                             float *mean, float *rstd, int N,
                                             int C, float eps, void *stream);
rp_status rp_cuda_gpt_layernorm_bwd(const float *dout, const float *x,
                                    const float *w, const float *mean,
                                    const float *rstd, float *dx, float *dw,
                                    float *db, int N, int C, int accumulate,
                                    void *stream);
rp_status rp_cuda_gpt_matmul_fwd(const float *inp, const float *W,
                                 const float *bias, float *out, int N, int C,
                                 int OC, void *stream);
rp_status rp_cuda_gpt_matmul_bwd(const float *dout, const float *inp,
                                 const float *W, float *dinp, float *dW,
                                 float *dbias, int N, int C, int OC,
                                 int accumulate, void *stream);
rp_status rp_cuda_gpt_bias_gelu_fwd(float *pre, const float *bias, float *out,
                                    int rows, int cols, void *stream);
rp_status rp_cuda_gpt_gelu_bwd(const float *pre, const float *dout, float *dpre,
                               int64_t n, void *stream);
rp_status rp_cuda_gpt_attention_fwd(const float *qkv, float *qkvr, float *att,
                                    float *out, float *scratch, int B, int T,
                                    int C, int NH, void *stream);
rp_status rp_cuda_gpt_attention_bwd(const float *dout, const float *qkvr,
                                    const float *att, float *dqkv, float *datt,
                                    float *scratch, int B, int T, int C, int NH,
                                    void *stream);
rp_status rp_cuda_gpt_attention_decode(const float *qkv, float *kcache,
                                       float *vcache, float *out,
                                       float *scratch, int pos, int T, int C,
                                       int NH, const void *dev_args,
                                       void *stream);
rp_status rp_cuda_gpt_xent(float *logits, const int32_t *targets, float *losses,
                           float *loss, int N, int V, float norm, int grad,
                           void *stream);
/* w, g, m, v, n: host arrays of count entries (device pointers and counts),
 * copied into the kernels' parameters at enqueue (so a captured graph keeps
 * them); args: the recorded args (host); dev_args: see above (lr at offset
 * 0, step at offset 4 are read from it when not NULL). */
rp_status rp_cuda_gpt_adamw(float *const *w, const float *const *g,
                            float *const *m, float *const *v, const size_t *n,
                            float *stats, const float *sq,
                            const rp_gpt_adamw_args *args, const void *dev_args,
                            void *stream);
/* g, n: host arrays of count entries (as rp_cuda_gpt_adamw's). */
rp_status rp_cuda_gpt_sumsq(const float *const *g, const size_t *n, int count,
                            float *sq, float *each, void *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
