/* kernels/gpt_tasks.c — the "gpt.*" tasks (contracts in gpt_kernels.h):
 * one op descriptor per task (kernels/op_table.h: args, ranges, accesses
 * with their element types and count rules), and bodies that run the
 * descriptor's check (rp_op_prep) and then one kernel: the CPU kernels of
 * gpt_kernels.h, or in CUDA builds the rp_cuda_gpt_* launchers on
 * rp_ctx_stream(ctx). */
#include "tasks.h"

#include "engine/util.h"
#include "gpt_kernels.h"
#include "op_table.h"

#include <math.h>
#include <stdint.h>

/* The per-replay offsets of gpt_kernels.h must not move. */
_Static_assert(offsetof(rp_gpt_token_args, pos) == 0, "token pos offset");
_Static_assert(offsetof(rp_gpt_token_args, token) == 4, "token offset");
_Static_assert(offsetof(rp_gpt_token_args, T) == 16, "token T offset");
_Static_assert(offsetof(rp_gpt_ln_args, eps) == 8, "ln eps offset");
_Static_assert(offsetof(rp_gpt_matmul_args, accumulate) == 16, "mm acc");
_Static_assert(offsetof(rp_gpt_decode_args, pos) == 0, "decode pos offset");
_Static_assert(offsetof(rp_gpt_xent_args, grad) == 12, "xent grad offset");
_Static_assert(offsetof(rp_gpt_adamw_args, lr) == 0, "adamw lr offset");
_Static_assert(offsetof(rp_gpt_adamw_args, step) == 4, "adamw step offset");
_Static_assert(offsetof(rp_gpt_adamw_args, count) == 28, "adamw count");
_Static_assert(offsetof(rp_gpt_adamw_args, decay) == 32, "adamw decay");

#define BIG INT32_MAX
#define F32 RP_F32
#define I32 RP_I32
#define R RP_READ
#define W RP_WRITE
#define RW RP_RW

/* ---------------------------------------------------------------------- */
/* Checks beyond the ranges */

static int is_finite(float x) {
  return x == x && x - x == 0.0f; /* not NaN, not inf */
}

static rp_status heads_ok(const rp_op *op, int32_t C, int32_t NH) {
  if (C % NH)
    return rp__err(RP_EINVAL, "%s: C = %d is not a multiple of NH = %d",
                   op->name, (int)C, (int)NH);
  return RP_OK;
}

static rp_status attn_args(const rp_op *op, void *args,
                           const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_attn_args *a = args;
  return heads_ok(op, a->C, a->NH);
}

static rp_status decode_args(const rp_op *op, void *args,
                             const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_decode_args *a = args;
  if (a->pos < 0 || a->pos >= a->T)
    return rp__err(RP_ERANGE, "%s: pos %d outside [0, %d)", op->name,
                   (int)a->pos, (int)a->T);
  return heads_ok(op, a->C, a->NH);
}

static rp_status token_args(const rp_op *op, void *args,
                            const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_token_args *a = args;
  if (a->pos < 0 || a->pos >= a->T || a->token < 0 || a->token >= a->V)
    return rp__err(RP_ERANGE,
                   "%s: pos %d (need [0, %d)), token %d (need [0, %d))",
                   op->name, (int)a->pos, (int)a->T, (int)a->token, (int)a->V);
  return RP_OK;
}

static rp_status ln_args(const rp_op *op, void *args, const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_ln_args *a = args;
  if (!(a->eps > 0.0f) || !is_finite(a->eps))
    return rp__err(RP_EINVAL, "%s: eps = %g (need > 0)", op->name,
                   (double)a->eps);
  return RP_OK;
}

static rp_status xent_args(const rp_op *op, void *args,
                           const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_xent_args *a = args;
  if (!(a->norm >= 0.0f) || !is_finite(a->norm))
    return rp__err(RP_EINVAL, "%s: norm = %g (the global row count, 0: N)",
                   op->name, (double)a->norm);
  return RP_OK;
}

static rp_status adamw_args(const rp_op *op, void *args,
                            const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_adamw_args *a = args;
  if (!is_finite(a->lr) || !(a->beta1 >= 0.0f && a->beta1 < 1.0f) ||
      !(a->beta2 >= 0.0f && a->beta2 < 1.0f) || !(a->eps > 0.0f) ||
      !is_finite(a->eps) || !is_finite(a->weight_decay) || !is_finite(a->max_norm))
    return rp__err(RP_EINVAL,
                   "%s: lr = %g, beta1 = %g, beta2 = %g, eps = %g, "
                   "weight_decay = %g, max_norm = %g (need finite, betas in "
                   "[0, 1), eps > 0)",
                   op->name, (double)a->lr, (double)a->beta1, (double)a->beta2,
                   (double)a->eps, (double)a->weight_decay,
                   (double)a->max_norm);
  return RP_OK;
}

/* An output that must not share its instance with an input. */
static rp_status distinct(const rp_op *op, void *const *ptr, uint32_t out,
                          uint32_t in) {
  if (ptr[out] && ptr[out] == ptr[in])
    return rp__err(RP_EINVAL, "%s: access %u (%s) is access %u's (%s) memory",
                   op->name, out, op->head[out].role, in, op->head[in].role);
  return RP_OK;
}

static rp_status bias_gelu_ptrs(const rp_op *op, const void *args,
                                void *const *ptr, const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gpt_rows_cols_args *a = args;
  return a->rows > 0 ? distinct(op, ptr, 2, 0) : RP_OK;
}

/* ---------------------------------------------------------------------- */
/* The descriptors */

#define EM(m) RP_OPF(rp_gpt_embed_args, m)
static const rp_op OP_EMBED_FWD = {
    "gpt.embed_fwd",
    "rp_gpt_embed_args",
    sizeof(rp_gpt_embed_args),
    .fields = {{"B", EM(B), 0, 1, BIG},
               {"T", EM(T), 0, 1, BIG},
               {"C", EM(C), 0, 1, BIG},
               {"V", EM(V), 0, 1, BIG}},
    .head = {{"tokens", I32, R, {1, {EM(B), EM(T)}}},
             {"wte", F32, R, {1, {EM(V), EM(C)}}},
             {"wpe", F32, R, {1, {EM(T), EM(C)}}},
             {"out", F32, W, {1, {EM(B), EM(T), EM(C)}}}},
    .nhead = 4};
static const rp_op OP_EMBED_BWD = {
    "gpt.embed_bwd",
    "rp_gpt_embed_args",
    sizeof(rp_gpt_embed_args),
    .fields = {{"B", EM(B), 0, 1, BIG},
               {"T", EM(T), 0, 1, BIG},
               {"C", EM(C), 0, 1, BIG},
               {"V", EM(V), 0, 1, BIG}},
    .head = {{"tokens", I32, R, {1, {EM(B), EM(T)}}},
             {"dout", F32, R, {1, {EM(B), EM(T), EM(C)}}},
             {"dwte", F32, RW, {1, {EM(V), EM(C)}}},
             {"dwpe", F32, W, {1, {EM(T), EM(C)}}}},
    .nhead = 4};

#define TK(m) RP_OPF(rp_gpt_token_args, m)
static const rp_op OP_EMBED_TOKEN = {
    "gpt.embed_token",
    "rp_gpt_token_args",
    sizeof(rp_gpt_token_args),
    .fields = {{"C", TK(C), 0, 1, BIG},
               {"V", TK(V), 0, 1, BIG},
               {"T", TK(T), 0, 1, BIG}},
    .check_args = token_args,
    .head = {{"wte", F32, R, {1, {TK(V), TK(C)}}},
             {"wpe", F32, R, {1, {TK(T), TK(C)}}},
             {"out", F32, W, {1, {TK(C)}}}},
    .nhead = 3};

#define LN(m) RP_OPF(rp_gpt_ln_args, m)
static const rp_op OP_LN_FWD = {
    "gpt.layernorm_fwd",
    "rp_gpt_ln_args",
    sizeof(rp_gpt_ln_args),
    .fields = {{"N", LN(N), 0, 1, BIG}, {"C", LN(C), 0, 1, BIG}},
    .check_args = ln_args,
    .head = {{"x", F32, R, {1, {LN(N), LN(C)}}},
             {"w", F32, R, {1, {LN(C)}}},
             {"b", F32, R, {1, {LN(C)}}},
             {"out", F32, W, {1, {LN(N), LN(C)}}},
             {"mean", F32, W, {1, {LN(N)}}},
             {"rstd", F32, W, {1, {LN(N)}}}},
    .nhead = 6};
static const rp_op OP_RES_LN_FWD = {
    "gpt.residual_layernorm_fwd",
    "rp_gpt_ln_args",
    sizeof(rp_gpt_ln_args),
    .fields = {{"N", LN(N), 0, 1, BIG}, {"C", LN(C), 0, 1, BIG}},
    .check_args = ln_args,
    .head = {{"a", F32, R, {1, {LN(N), LN(C)}}},
             {"r", F32, R, {1, {LN(N), LN(C)}}},
             {"res", F32, W, {1, {LN(N), LN(C)}}},
             {"w", F32, R, {1, {LN(C)}}},
             {"b", F32, R, {1, {LN(C)}}},
             {"out", F32, W, {1, {LN(N), LN(C)}}},
             {"mean", F32, W, {1, {LN(N)}}},
             {"rstd", F32, W, {1, {LN(N)}}}},
    .nhead = 8};

#define LB(m) RP_OPF(rp_gpt_ln_bwd_args, m)
static const rp_op OP_LN_BWD = {
    "gpt.layernorm_bwd",
    "rp_gpt_ln_bwd_args",
    sizeof(rp_gpt_ln_bwd_args),
    .fields = {{"N", LB(N), 0, 1, BIG},
               {"C", LB(C), 0, 1, BIG},
               {"accumulate", LB(accumulate), 0, 0, 1}},
    .head = {{"dout", F32, R, {1, {LB(N), LB(C)}}},
             {"x", F32, R, {1, {LB(N), LB(C)}}},
             {"w", F32, R, {1, {LB(C)}}},
             {"mean", F32, R, {1, {LB(N)}}},
             {"rstd", F32, R, {1, {LB(N)}}},
             {"dx", F32, RW, {1, {LB(N), LB(C)}}},
             {"dw", F32, W, {1, {LB(C)}}},
             {"db", F32, W, {1, {LB(C)}}}},
    .nhead = 8};

#define MM(m) RP_OPF(rp_gpt_matmul_args, m)
#define MM_FIELDS                                                              \
  {                                                                            \
    {"N", MM(N), 0, 1, BIG}, {"C", MM(C), 0, 1, BIG},                          \
        {"OC", MM(OC), 0, 1, BIG}, {"has_bias", MM(has_bias), 0, 0, 1}, {      \
      "accumulate", MM(accumulate), 0, 0, 1                                    \
    }                                                                          \
  }
static const rp_op OP_MATMUL_FWD = {
    "gpt.matmul_fwd",
    "rp_gpt_matmul_args",
    sizeof(rp_gpt_matmul_args),
    .fields = MM_FIELDS,
    .head = {{"inp", F32, R, {1, {MM(N), MM(C)}}},
             {"W", F32, R, {1, {MM(OC), MM(C)}}},
             {"out", F32, W, {1, {MM(N), MM(OC)}}},
             {"bias", F32, R, {1, {MM(OC)}}, MM(has_bias)}},
    .nhead = 4};
static const rp_op OP_MATMUL_BWD = {
    "gpt.matmul_bwd",
    "rp_gpt_matmul_args",
    sizeof(rp_gpt_matmul_args),
    .fields = MM_FIELDS,
    .head = {{"dout", F32, R, {1, {MM(N), MM(OC)}}},
             {"inp", F32, R, {1, {MM(N), MM(C)}}},
             {"W", F32, R, {1, {MM(OC), MM(C)}}},
             {"dinp", F32, RW, {1, {MM(N), MM(C)}}},
             {"dW", F32, W, {1, {MM(OC), MM(C)}}},
             {"dbias", F32, W, {1, {MM(OC)}}, MM(has_bias)}},
    .nhead = 6};

#define RC(m) RP_OPF(rp_gpt_rows_cols_args, m)
static const rp_op OP_BIAS_GELU = {
    "gpt.bias_gelu_fwd",
    "rp_gpt_rows_cols_args",
    sizeof(rp_gpt_rows_cols_args),
    .fields = {{"rows", RC(rows), 0, 0, BIG}, {"cols", RC(cols), 0, 1, BIG}},
    .head = {{"pre", F32, RW, {1, {RC(rows), RC(cols)}}},
             {"bias", F32, R, {1, {RC(cols)}}},
             {"out", F32, W, {1, {RC(rows), RC(cols)}}}},
    .nhead = 3,
    .check_ptrs = bias_gelu_ptrs};

#define NN(m) RP_OPF(rp_gpt_n_args, m)
static const rp_op OP_GELU_BWD = {
    "gpt.gelu_bwd",
    "rp_gpt_n_args",
    sizeof(rp_gpt_n_args),
    .fields = {{"n", NN(n), 1, 0, INT64_MAX}},
    .head = {{"pre", F32, R, {1, {NN(n)}, 0, RP_OPC_I64}},
             {"dout", F32, R, {1, {NN(n)}, 0, RP_OPC_I64}},
             {"dpre", F32, W, {1, {NN(n)}, 0, RP_OPC_I64}}},
    .nhead = 3};

#define AT(m) RP_OPF(rp_gpt_attn_args, m)
#define AT_FIELDS                                                              \
  {                                                                            \
    {"B", AT(B), 0, 1, BIG}, {"T", AT(T), 0, 1, BIG}, {"C", AT(C), 0, 1, BIG}, \
    {                                                                          \
      "NH", AT(NH), 0, 1, BIG                                                  \
    }                                                                          \
  }
static const rp_op OP_ATTN_FWD = {
    "gpt.attention_fwd",
    "rp_gpt_attn_args",
    sizeof(rp_gpt_attn_args),
    .fields = AT_FIELDS,
    .check_args = attn_args,
    .head = {{"qkv", F32, R, {3, {AT(B), AT(T), AT(C)}}},
             {"qkvr", F32, W, {3, {AT(B), AT(T), AT(C)}}},
             {"att", F32, W, {1, {AT(B), AT(NH), AT(T), AT(T)}}},
             {"out", F32, W, {1, {AT(B), AT(T), AT(C)}}},
             {"scratch", F32, W, {1, {AT(B), AT(T), AT(C)}}}},
    .nhead = 5};
static const rp_op OP_ATTN_BWD = {
    "gpt.attention_bwd",
    "rp_gpt_attn_args",
    sizeof(rp_gpt_attn_args),
    .fields = AT_FIELDS,
    .check_args = attn_args,
    .head = {{"dout", F32, R, {1, {AT(B), AT(T), AT(C)}}},
             {"qkvr", F32, R, {3, {AT(B), AT(T), AT(C)}}},
             {"att", F32, R, {1, {AT(B), AT(NH), AT(T), AT(T)}}},
             {"dqkv", F32, W, {3, {AT(B), AT(T), AT(C)}}},
             {"datt", F32, W, {1, {AT(B), AT(NH), AT(T), AT(T)}}},
             {"scratch", F32, W, {4, {AT(B), AT(T), AT(C)}}}},
    .nhead = 6};

#define DC(m) RP_OPF(rp_gpt_decode_args, m)
static const rp_op OP_ATTN_DECODE = {
    "gpt.attention_decode",
    "rp_gpt_decode_args",
    sizeof(rp_gpt_decode_args),
    .fields = {{"T", DC(T), 0, 1, BIG},
               {"C", DC(C), 0, 1, BIG},
               {"NH", DC(NH), 0, 1, BIG}},
    .check_args = decode_args,
    .head = {{"qkv", F32, R, {3, {DC(C)}}},
             {"kcache", F32, RW, {1, {DC(T), DC(C)}}},
             {"vcache", F32, RW, {1, {DC(T), DC(C)}}},
             {"out", F32, W, {1, {DC(C)}}},
             {"scratch", F32, W, {1, {DC(NH), DC(T)}}}},
    .nhead = 5};

#define XE(m) RP_OPF(rp_gpt_xent_args, m)
static const rp_op OP_XENT = {"gpt.xent",
                              "rp_gpt_xent_args",
                              sizeof(rp_gpt_xent_args),
                              .fields = {{"N", XE(N), 0, 1, BIG},
                                         {"V", XE(V), 0, 1, BIG},
                                         {"grad", XE(grad), 0, 0, 1}},
                              .check_args = xent_args,
                              .head = {{"logits", F32, RW, {1, {XE(N), XE(V)}}},
                                       {"targets", I32, R, {1, {XE(N)}}},
                                       {"losses", F32, W, {1, {XE(N)}}},
                                       {"loss", F32, W, {0, {0}, 1}}},
                              .nhead = 4};

#define AW(m) RP_OPF(rp_gpt_adamw_args, m)
#define AW_VOL                                                                 \
  { 1, {0}, 0, RP_OPC_GROUP_VOL }
static const rp_op OP_ADAMW = {
    "gpt.adamw",
    "rp_gpt_adamw_args",
    sizeof(rp_gpt_adamw_args),
    .fields = {{"count", AW(count), 0, 1, RP_GPT_ADAMW_MAX},
               {"step", AW(step), 0, 1, BIG}},
    .check_args = adamw_args,
    .group = {{"W", F32, RW, AW_VOL},
              {"G", F32, R, AW_VOL},
              {"M", F32, RW, AW_VOL},
              {"V", F32, RW, AW_VOL}},
    .ngroup = 4,
    .group_count = AW(count),
    .tail = {{"stats", F32, W, {1, {AW(count)}, 1}}},
    .ntail = 1};

/* ---------------------------------------------------------------------- */
/* Bodies: the descriptor's check, then one kernel (CPU) or launcher (GPU).
 * PREP declares the args copy `a` and the pointers `p` of op. */

#define PREP(op, type, n)                                                      \
  type a;                                                                      \
  void *p[n];                                                                  \
  rp_status st = rp_op_prep(&(op), ctx, &a, p, NULL, n);                       \
  if (st != RP_OK)                                                             \
  return st

rp_status rp_task_gpt_embed_fwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_EMBED_FWD, rp_gpt_embed_args, 4);
  return rp_cpu_gpt_embed_fwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V);
}

rp_status rp_task_gpt_embed_bwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_EMBED_BWD, rp_gpt_embed_args, 4);
  return rp_cpu_gpt_embed_bwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V);
}

rp_status rp_task_gpt_embed_token_check(rp_task_ctx *ctx) {
  PREP(OP_EMBED_TOKEN, rp_gpt_token_args, 3);
  return RP_OK;
}

rp_status rp_task_gpt_embed_token_cpu(rp_task_ctx *ctx) {
  PREP(OP_EMBED_TOKEN, rp_gpt_token_args, 3);
  return rp_cpu_gpt_embed_token(p[0], p[1], p[2], a.pos, a.token, a.C, a.V,
                                a.T);
}

rp_status rp_task_gpt_layernorm_fwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_LN_FWD, rp_gpt_ln_args, 6);
  rp_cpu_gpt_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C, a.eps);
  return RP_OK;
}

rp_status rp_task_gpt_residual_layernorm_fwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_RES_LN_FWD, rp_gpt_ln_args, 8);
  rp_cpu_gpt_residual_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                    p[7], a.N, a.C, a.eps);
  return RP_OK;
}

rp_status rp_task_gpt_layernorm_bwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_LN_BWD, rp_gpt_ln_bwd_args, 8);
  rp_cpu_gpt_layernorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], a.N,
                           a.C, a.accumulate);
  return RP_OK;
}

rp_status rp_task_gpt_matmul_fwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_MATMUL_FWD, rp_gpt_matmul_args, 4);
  rp_cpu_gpt_matmul_fwd(p[0], p[1], p[3], p[2], a.N, a.C, a.OC);
  return RP_OK;
}

rp_status rp_task_gpt_matmul_bwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_MATMUL_BWD, rp_gpt_matmul_args, 6);
  rp_cpu_gpt_matmul_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C, a.OC,
                        a.accumulate);
  return RP_OK;
}

rp_status rp_task_gpt_bias_gelu_fwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_BIAS_GELU, rp_gpt_rows_cols_args, 3);
  rp_cpu_gpt_bias_gelu_fwd(p[0], p[1], p[2], a.rows, a.cols);
  return RP_OK;
}

rp_status rp_task_gpt_gelu_bwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_GELU_BWD, rp_gpt_n_args, 3);
  rp_cpu_gpt_gelu_bwd(p[0], p[1], p[2], a.n);
  return RP_OK;
}

rp_status rp_task_gpt_attention_fwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_ATTN_FWD, rp_gpt_attn_args, 5);
  rp_cpu_gpt_attention_fwd(p[0], p[1], p[2], p[3], p[4], a.B, a.T, a.C, a.NH);
  return RP_OK;
}

rp_status rp_task_gpt_attention_bwd_cpu(rp_task_ctx *ctx) {
  PREP(OP_ATTN_BWD, rp_gpt_attn_args, 6);
  rp_cpu_gpt_attention_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.B, a.T, a.C,
                           a.NH);
  return RP_OK;
}

rp_status rp_task_gpt_attention_decode_check(rp_task_ctx *ctx) {
  PREP(OP_ATTN_DECODE, rp_gpt_decode_args, 5);
  return RP_OK;
}

rp_status rp_task_gpt_attention_decode_cpu(rp_task_ctx *ctx) {
  PREP(OP_ATTN_DECODE, rp_gpt_decode_args, 5);
  return rp_cpu_gpt_attention_decode(p[0], p[1], p[2], p[3], p[4], a.pos, a.T,
                                     a.C, a.NH);
}

rp_status rp_task_gpt_xent_cpu(rp_task_ctx *ctx) {
  PREP(OP_XENT, rp_gpt_xent_args, 4);
  return rp_cpu_gpt_xent(p[0], p[1], p[2], p[3], a.N, a.V, a.norm, a.grad);
}

/* gpt.adamw: the accesses de-interleaved into the kernels' arrays. */
#define ADAMW_ACCESSES (4 * RP_GPT_ADAMW_MAX + 1)
typedef struct adamw_job {
  rp_gpt_adamw_args a;
  void *p[ADAMW_ACCESSES];
  int64_t vol[ADAMW_ACCESSES];
  float *w[RP_GPT_ADAMW_MAX], *m[RP_GPT_ADAMW_MAX], *v[RP_GPT_ADAMW_MAX];
  const float *g[RP_GPT_ADAMW_MAX];
  size_t n[RP_GPT_ADAMW_MAX];
  float *stats;
} adamw_job;

static rp_status adamw_prep(const rp_task_ctx *ctx, adamw_job *j) {
  rp_status st =
      rp_op_prep(&OP_ADAMW, ctx, &j->a, j->p, j->vol, ADAMW_ACCESSES);
  if (st != RP_OK)
    return st;
  for (int32_t i = 0; i < j->a.count; i++) {
    j->w[i] = j->p[4 * i];
    j->g[i] = j->p[4 * i + 1];
    j->m[i] = j->p[4 * i + 2];
    j->v[i] = j->p[4 * i + 3];
    j->n[i] = (size_t)j->vol[4 * i];
  }
  j->stats = j->p[4 * j->a.count];
  return RP_OK;
}

rp_status rp_task_gpt_adamw_check(rp_task_ctx *ctx) {
  adamw_job j;
  return adamw_prep(ctx, &j);
}

rp_status rp_task_gpt_adamw_cpu(rp_task_ctx *ctx) {
  adamw_job j;
  rp_status st = adamw_prep(ctx, &j);
  if (st == RP_OK)
    rp_cpu_gpt_adamw(j.w, j.g, j.m, j.v, j.n, j.stats, &j.a);
  return st;
}

/* ---------------------------------------------------------------------- */
/* GPU variants: the same check (on instance metadata only: the pointers
 * are device pointers), then the launcher on the task's stream. Tokens,
 * targets and positions read on the device are not checked here: a bad
 * one shows up as NaN (gpt_kernels.h); the check_fns reject an
 * interpolated pos or token on the host before a replay issues the op. */

#ifdef REPRISE_HAVE_CUDA
rp_status rp_task_gpt_embed_fwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_EMBED_FWD, rp_gpt_embed_args, 4);
  return rp_cuda_gpt_embed_fwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V,
                               rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_embed_bwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_EMBED_BWD, rp_gpt_embed_args, 4);
  return rp_cuda_gpt_embed_bwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V,
                               rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_embed_token_gpu(rp_task_ctx *ctx) {
  PREP(OP_EMBED_TOKEN, rp_gpt_token_args, 3);
  return rp_cuda_gpt_embed_token(p[0], p[1], p[2], a.pos, a.token, a.C, a.V,
                                 a.T, rp_ctx_device_args(ctx),
                                 rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_layernorm_fwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_LN_FWD, rp_gpt_ln_args, 6);
  return rp_cuda_gpt_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C,
                                   a.eps, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_residual_layernorm_fwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_RES_LN_FWD, rp_gpt_ln_args, 8);
  return rp_cuda_gpt_residual_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5],
                                            p[6], p[7], a.N, a.C, a.eps,
                                            rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_layernorm_bwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_LN_BWD, rp_gpt_ln_bwd_args, 8);
  return rp_cuda_gpt_layernorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                   p[7], a.N, a.C, a.accumulate,
                                   rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_matmul_fwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_MATMUL_FWD, rp_gpt_matmul_args, 4);
  return rp_cuda_gpt_matmul_fwd(p[0], p[1], p[3], p[2], a.N, a.C, a.OC,
                                rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_matmul_bwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_MATMUL_BWD, rp_gpt_matmul_args, 6);
  return rp_cuda_gpt_matmul_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C,
                                a.OC, a.accumulate, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_bias_gelu_fwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_BIAS_GELU, rp_gpt_rows_cols_args, 3);
  return rp_cuda_gpt_bias_gelu_fwd(p[0], p[1], p[2], a.rows, a.cols,
                                   rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_gelu_bwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_GELU_BWD, rp_gpt_n_args, 3);
  return rp_cuda_gpt_gelu_bwd(p[0], p[1], p[2], a.n, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_attention_fwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_ATTN_FWD, rp_gpt_attn_args, 5);
  return rp_cuda_gpt_attention_fwd(p[0], p[1], p[2], p[3], p[4], a.B, a.T, a.C,
                                   a.NH, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_attention_bwd_gpu(rp_task_ctx *ctx) {
  PREP(OP_ATTN_BWD, rp_gpt_attn_args, 6);
  return rp_cuda_gpt_attention_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.B, a.T,
                                   a.C, a.NH, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_attention_decode_gpu(rp_task_ctx *ctx) {
  PREP(OP_ATTN_DECODE, rp_gpt_decode_args, 5);
  return rp_cuda_gpt_attention_decode(p[0], p[1], p[2], p[3], p[4], a.pos, a.T,
                                      a.C, a.NH, rp_ctx_device_args(ctx),
                                      rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_xent_gpu(rp_task_ctx *ctx) {
  PREP(OP_XENT, rp_gpt_xent_args, 4);
  return rp_cuda_gpt_xent(p[0], p[1], p[2], p[3], a.N, a.V, a.norm, a.grad,
                          rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_adamw_gpu(rp_task_ctx *ctx) {
  adamw_job j;
  rp_status st = adamw_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  /* lr and step at offsets 0 and 4 of the device args inside an exec */
  return rp_cuda_gpt_adamw(j.w, j.g, j.m, j.v, j.n, j.stats, &j.a,
                           rp_ctx_device_args(ctx), rp_ctx_stream(ctx));
}
#endif
