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
#include <string.h>

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
  if (!is_finite(a->lr) || !(a->lr >= 0.0f) || /* < 0: ascent */
      !(a->beta1 >= 0.0f && a->beta1 < 1.0f) ||
      !(a->beta2 >= 0.0f && a->beta2 < 1.0f) || !(a->eps > 0.0f) ||
      !is_finite(a->eps) || !is_finite(a->weight_decay) ||
      !(a->weight_decay >= 0.0f) || /* < 0: grows the matrices */
      !is_finite(a->max_norm))
    return rp__err(RP_EINVAL,
                   "%s: lr = %g, beta1 = %g, beta2 = %g, eps = %g, "
                   "weight_decay = %g, max_norm = %g (need finite, lr >= 0, "
                   "betas in [0, 1), eps > 0, weight_decay >= 0)",
                   op->name, (double)a->lr, (double)a->beta1, (double)a->beta2,
                   (double)a->eps, (double)a->weight_decay,
                   (double)a->max_norm);
  int decays = 0; /* count was checked against its range first */
  for (int32_t i = 0; i < a->count; i++)
    decays |= a->decay[i];
  /* the decay step multiplies the decayed tensors by 1 - lr x weight_decay:
   * at 1 or more it zeroes them, flips their sign or grows them. The
   * product as the kernels compute it, in float: a double product below 1
   * may round to 1. */
  float lrwd = a->lr * a->weight_decay;
  if (decays && !(lrwd < 1.0f))
    return rp__err(RP_EINVAL,
                   "%s: lr %g x weight_decay %g = %g in float (need "
                   "below 1: the decay step multiplies the matrices by 1 - "
                   "lr x weight_decay)",
                   op->name, (double)a->lr, (double)a->weight_decay,
                   (double)lrwd);
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* The descriptors */

#define EM(m) RP_OPF(rp_gpt_embed_args, m)
const rp_op rp_task_gpt_embed_fwd_op = {
    .name = "gpt.embed_fwd",
    RP_OP_ARGS(rp_gpt_embed_args),
    .fields = {{"B", EM(B), 0, 1, INT32_MAX},
               {"T", EM(T), 0, 1, INT32_MAX},
               {"C", EM(C), 0, 1, INT32_MAX},
               {"V", EM(V), 0, 1, INT32_MAX}},
    .head = {{"tokens", RP_I32, RP_READ, {1, {EM(B), EM(T)}}},
             {"wte", RP_F32, RP_READ, {1, {EM(V), EM(C)}}},
             {"wpe", RP_F32, RP_READ, {1, {EM(T), EM(C)}}},
             {"out", RP_F32, RP_WRITE, {1, {EM(B), EM(T), EM(C)}}}},
    .nhead = 4,
};
const rp_op rp_task_gpt_embed_bwd_op = {
    .name = "gpt.embed_bwd",
    RP_OP_ARGS(rp_gpt_embed_args),
    .fields = {{"B", EM(B), 0, 1, INT32_MAX},
               {"T", EM(T), 0, 1, INT32_MAX},
               {"C", EM(C), 0, 1, INT32_MAX},
               {"V", EM(V), 0, 1, INT32_MAX}},
    .head = {{"tokens", RP_I32, RP_READ, {1, {EM(B), EM(T)}}},
             {"dout", RP_F32, RP_READ, {1, {EM(B), EM(T), EM(C)}}},
             {"dwte", RP_F32, RP_RW, {1, {EM(V), EM(C)}}},
             {"dwpe", RP_F32, RP_WRITE, {1, {EM(T), EM(C)}}}},
    .nhead = 4,
};

#define TK(m) RP_OPF(rp_gpt_token_args, m)
const rp_op rp_task_gpt_embed_token_op = {
    .name = "gpt.embed_token",
    RP_OP_ARGS(rp_gpt_token_args),
    .fields = {{"C", TK(C), 0, 1, INT32_MAX},
               {"V", TK(V), 0, 1, INT32_MAX},
               {"T", TK(T), 0, 1, INT32_MAX}},
    .check_args = token_args,
    .head = {{"wte", RP_F32, RP_READ, {1, {TK(V), TK(C)}}},
             {"wpe", RP_F32, RP_READ, {1, {TK(T), TK(C)}}},
             {"out", RP_F32, RP_WRITE, {1, {TK(C)}}}},
    .nhead = 3,
};

#define LN(m) RP_OPF(rp_gpt_ln_args, m)
const rp_op rp_task_gpt_layernorm_fwd_op = {
    .name = "gpt.layernorm_fwd",
    RP_OP_ARGS(rp_gpt_ln_args),
    .fields = {{"N", LN(N), 0, 1, INT32_MAX}, {"C", LN(C), 0, 1, INT32_MAX}},
    .check_args = ln_args,
    .head = {{"x", RP_F32, RP_READ, {1, {LN(N), LN(C)}}},
             {"w", RP_F32, RP_READ, {1, {LN(C)}}},
             {"b", RP_F32, RP_READ, {1, {LN(C)}}},
             {"out", RP_F32, RP_WRITE, {1, {LN(N), LN(C)}}},
             {"mean", RP_F32, RP_WRITE, {1, {LN(N)}}},
             {"rstd", RP_F32, RP_WRITE, {1, {LN(N)}}}},
    .nhead = 6,
};
const rp_op rp_task_gpt_residual_layernorm_fwd_op = {
    .name = "gpt.residual_layernorm_fwd",
    RP_OP_ARGS(rp_gpt_ln_args),
    .fields = {{"N", LN(N), 0, 1, INT32_MAX}, {"C", LN(C), 0, 1, INT32_MAX}},
    .check_args = ln_args,
    .head = {{"a", RP_F32, RP_READ, {1, {LN(N), LN(C)}}},
             {"r", RP_F32, RP_READ, {1, {LN(N), LN(C)}}},
             {"res", RP_F32, RP_WRITE, {1, {LN(N), LN(C)}}},
             {"w", RP_F32, RP_READ, {1, {LN(C)}}},
             {"b", RP_F32, RP_READ, {1, {LN(C)}}},
             {"out", RP_F32, RP_WRITE, {1, {LN(N), LN(C)}}},
             {"mean", RP_F32, RP_WRITE, {1, {LN(N)}}},
             {"rstd", RP_F32, RP_WRITE, {1, {LN(N)}}}},
    .nhead = 8,
};

#define LB(m) RP_OPF(rp_gpt_ln_bwd_args, m)
const rp_op rp_task_gpt_layernorm_bwd_op = {
    .name = "gpt.layernorm_bwd",
    RP_OP_ARGS(rp_gpt_ln_bwd_args),
    .fields = {{"N", LB(N), 0, 1, INT32_MAX},
               {"C", LB(C), 0, 1, INT32_MAX},
               {"accumulate", LB(accumulate), 0, 0, 1}},
    .head = {{"dout", RP_F32, RP_READ, {1, {LB(N), LB(C)}}},
             {"x", RP_F32, RP_READ, {1, {LB(N), LB(C)}}},
             {"w", RP_F32, RP_READ, {1, {LB(C)}}},
             {"mean", RP_F32, RP_READ, {1, {LB(N)}}},
             {"rstd", RP_F32, RP_READ, {1, {LB(N)}}},
             {"dx",
              RP_F32,
              RP_WRITE,
              {1, {LB(N), LB(C)}},
              .also = RP_READ,
              .also_when = LB(accumulate),
              .also_name = "accumulate"},
             {"dw", RP_F32, RP_WRITE, {1, {LB(C)}}},
             {"db", RP_F32, RP_WRITE, {1, {LB(C)}}}},
    .nhead = 8,
};

#define MM(m) RP_OPF(rp_gpt_matmul_args, m)
/* clang-format off */
#define MM_FIELDS \
  {{"N", MM(N), 0, 1, INT32_MAX}, {"C", MM(C), 0, 1, INT32_MAX}, \
   {"OC", MM(OC), 0, 1, INT32_MAX}, {"has_bias", MM(has_bias), 0, 0, 1}, \
   {"accumulate", MM(accumulate), 0, 0, 1}}
/* clang-format on */
const rp_op rp_task_gpt_matmul_fwd_op = {
    .name = "gpt.matmul_fwd",
    RP_OP_ARGS(rp_gpt_matmul_args),
    .fields = MM_FIELDS,
    .head = {{"inp", RP_F32, RP_READ, {1, {MM(N), MM(C)}}},
             {"W", RP_F32, RP_READ, {1, {MM(OC), MM(C)}}},
             {"out", RP_F32, RP_WRITE, {1, {MM(N), MM(OC)}}},
             {"bias", RP_F32, RP_READ, {1, {MM(OC)}}, MM(has_bias)}},
    .nhead = 4,
};
const rp_op rp_task_gpt_matmul_bwd_op = {
    .name = "gpt.matmul_bwd",
    RP_OP_ARGS(rp_gpt_matmul_args),
    .fields = MM_FIELDS,
    .head = {{"dout", RP_F32, RP_READ, {1, {MM(N), MM(OC)}}},
             {"inp", RP_F32, RP_READ, {1, {MM(N), MM(C)}}},
             {"W", RP_F32, RP_READ, {1, {MM(OC), MM(C)}}},
             {"dinp",
              RP_F32,
              RP_WRITE,
              {1, {MM(N), MM(C)}},
              .also = RP_READ,
              .also_when = MM(accumulate),
              .also_name = "accumulate"},
             {"dW", RP_F32, RP_WRITE, {1, {MM(OC), MM(C)}}},
             {"dbias", RP_F32, RP_WRITE, {1, {MM(OC)}}, MM(has_bias)}},
    .nhead = 6,
};

#define RC(m) RP_OPF(rp_gpt_rows_cols_args, m)
const rp_op rp_task_gpt_bias_gelu_fwd_op = {
    .name = "gpt.bias_gelu_fwd",
    RP_OP_ARGS(rp_gpt_rows_cols_args),
    .fields = {{"rows", RC(rows), 0, 0, INT32_MAX},
               {"cols", RC(cols), 0, 1, INT32_MAX}},
    .head = {{"pre", RP_F32, RP_RW, {1, {RC(rows), RC(cols)}}},
             {"bias", RP_F32, RP_READ, {1, {RC(cols)}}},
             {"out", RP_F32, RP_WRITE, {1, {RC(rows), RC(cols)}}}},
    .nhead = 3,
};

#define NN(m) RP_OPF(rp_gpt_n_args, m)
const rp_op rp_task_gpt_gelu_bwd_op = {
    .name = "gpt.gelu_bwd",
    RP_OP_ARGS(rp_gpt_n_args),
    .fields = {{"n", NN(n), 1, 0, INT64_MAX}},
    .head = {{"pre", RP_F32, RP_READ, {1, {NN(n)}, 0, RP_OPC_I64}},
             {"dout", RP_F32, RP_READ, {1, {NN(n)}, 0, RP_OPC_I64}},
             {"dpre", RP_F32, RP_WRITE, {1, {NN(n)}, 0, RP_OPC_I64}, 0, 0, 2}},
    .nhead = 3,
};

#define AT(m) RP_OPF(rp_gpt_attn_args, m)
/* clang-format off */
#define AT_FIELDS \
  {{"B", AT(B), 0, 1, INT32_MAX}, {"T", AT(T), 0, 1, INT32_MAX}, \
   {"C", AT(C), 0, 1, INT32_MAX}, {"NH", AT(NH), 0, 1, INT32_MAX}}
/* clang-format on */
const rp_op rp_task_gpt_attention_fwd_op = {
    .name = "gpt.attention_fwd",
    RP_OP_ARGS(rp_gpt_attn_args),
    .fields = AT_FIELDS,
    .check_args = attn_args,
    .head = {{"qkv", RP_F32, RP_READ, {3, {AT(B), AT(T), AT(C)}}},
             {"qkvr", RP_F32, RP_WRITE, {3, {AT(B), AT(T), AT(C)}}},
             {"att", RP_F32, RP_WRITE, {1, {AT(B), AT(NH), AT(T), AT(T)}}},
             {"out", RP_F32, RP_WRITE, {1, {AT(B), AT(T), AT(C)}}},
             {"scratch", RP_F32, RP_WRITE, {1, {AT(B), AT(T), AT(C)}}}},
    .nhead = 5,
};
const rp_op rp_task_gpt_attention_bwd_op = {
    .name = "gpt.attention_bwd",
    RP_OP_ARGS(rp_gpt_attn_args),
    .fields = AT_FIELDS,
    .check_args = attn_args,
    .head = {{"dout", RP_F32, RP_READ, {1, {AT(B), AT(T), AT(C)}}},
             {"qkvr", RP_F32, RP_READ, {3, {AT(B), AT(T), AT(C)}}},
             {"att", RP_F32, RP_READ, {1, {AT(B), AT(NH), AT(T), AT(T)}}},
             {"dqkv", RP_F32, RP_WRITE, {3, {AT(B), AT(T), AT(C)}}},
             {"datt", RP_F32, RP_WRITE, {1, {AT(B), AT(NH), AT(T), AT(T)}}},
             {"scratch", RP_F32, RP_WRITE, {4, {AT(B), AT(T), AT(C)}}}},
    .nhead = 6,
};

#define DC(m) RP_OPF(rp_gpt_decode_args, m)
const rp_op rp_task_gpt_attention_decode_op = {
    .name = "gpt.attention_decode",
    RP_OP_ARGS(rp_gpt_decode_args),
    .fields = {{"T", DC(T), 0, 1, INT32_MAX},
               {"C", DC(C), 0, 1, INT32_MAX},
               {"NH", DC(NH), 0, 1, INT32_MAX}},
    .check_args = decode_args,
    .head = {{"qkv", RP_F32, RP_READ, {3, {DC(C)}}},
             {"kcache", RP_F32, RP_RW, {1, {DC(T), DC(C)}}},
             {"vcache", RP_F32, RP_RW, {1, {DC(T), DC(C)}}},
             {"out", RP_F32, RP_WRITE, {1, {DC(C)}}},
             {"scratch", RP_F32, RP_WRITE, {1, {DC(NH), DC(T)}}}},
    .nhead = 5,
};

#define XE(m) RP_OPF(rp_gpt_xent_args, m)
const rp_op rp_task_gpt_xent_op = {
    .name = "gpt.xent",
    RP_OP_ARGS(rp_gpt_xent_args),
    .fields = {{"N", XE(N), 0, 1, INT32_MAX},
               {"V", XE(V), 0, 1, INT32_MAX},
               {"grad", XE(grad), 0, 0, 1}},
    .check_args = xent_args,
    .head = {{"logits",
              RP_F32,
              RP_READ,
              {1, {XE(N), XE(V)}},
              .also = RP_WRITE,
              .also_when = XE(grad),
              .also_name = "grad"},
             {"targets", RP_I32, RP_READ, {1, {XE(N)}}},
             {"losses", RP_F32, RP_WRITE, {1, {XE(N)}}},
             {"loss", RP_F32, RP_WRITE, RP_OPC_ONE}},
    .nhead = 4,
};

#define AW(m) RP_OPF(rp_gpt_adamw_args, m)
const rp_op rp_task_gpt_adamw_op = {
    .name = "gpt.adamw",
    RP_OP_ARGS(rp_gpt_adamw_args),
    .fields = {{"count", AW(count), 0, 1, RP_GPT_ADAMW_MAX},
               {"step", AW(step), 0, 1, INT32_MAX},
               {"norm_parts", AW(norm_parts), 0, 0, RP_GPT_NORM_PARTS_MAX}},
    .check_args = adamw_args,
    .group = {{"W", RP_F32, RP_RW, RP_OPC_GROUP},
              {"G", RP_F32, RP_READ, RP_OPC_GROUP},
              {"M", RP_F32, RP_RW, RP_OPC_GROUP},
              {"V", RP_F32, RP_RW, RP_OPC_GROUP}},
    .ngroup = 4,
    .group_count = AW(count),
    .tail = {{"stats", RP_F32, RP_WRITE, {1, {AW(count)}, 1}},
             {"sq", RP_F32, RP_READ, {1, {AW(norm_parts)}}, AW(norm_parts)}},
    .ntail = 2,
};

#define SQ(m) RP_OPF(rp_gpt_sumsq_args, m)
const rp_op rp_task_gpt_sumsq_op = {
    .name = "gpt.sumsq",
    RP_OP_ARGS(rp_gpt_sumsq_args),
    .fields = {{"count", SQ(count), 0, 1, RP_GPT_ADAMW_MAX}},
    .group = {{"G", RP_F32, RP_READ, RP_OPC_GROUP}},
    .ngroup = 1,
    .group_count = SQ(count),
    .tail = {{"sq", RP_F32, RP_WRITE, RP_OPC_ONE},
             {"each", RP_F32, RP_WRITE, {1, {SQ(count)}}}},
    .ntail = 2,
};

/* Bodies: the descriptor's check (RP_OP_PREP: the args copy `a`, the
 * pointers `p`), then one kernel (CPU) or launcher (GPU). */

rp_status rp_task_gpt_embed_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_embed_fwd_op, rp_gpt_embed_args, 4);
  return rp_cpu_gpt_embed_fwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V);
}

rp_status rp_task_gpt_embed_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_embed_bwd_op, rp_gpt_embed_args, 4);
  return rp_cpu_gpt_embed_bwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V);
}

rp_status rp_task_gpt_embed_token_check(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_embed_token_op, rp_gpt_token_args, 3);
  return RP_OK;
}

rp_status rp_task_gpt_embed_token_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_embed_token_op, rp_gpt_token_args, 3);
  return rp_cpu_gpt_embed_token(p[0], p[1], p[2], a.pos, a.token, a.C, a.V,
                                a.T);
}

rp_status rp_task_gpt_layernorm_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_layernorm_fwd_op, rp_gpt_ln_args, 6);
  rp_cpu_gpt_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C, a.eps);
  return RP_OK;
}

rp_status rp_task_gpt_residual_layernorm_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_residual_layernorm_fwd_op, rp_gpt_ln_args, 8);
  rp_cpu_gpt_residual_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                    p[7], a.N, a.C, a.eps);
  return RP_OK;
}

rp_status rp_task_gpt_layernorm_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_layernorm_bwd_op, rp_gpt_ln_bwd_args, 8);
  rp_cpu_gpt_layernorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], a.N,
                           a.C, a.accumulate);
  return RP_OK;
}

rp_status rp_task_gpt_matmul_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_matmul_fwd_op, rp_gpt_matmul_args, 4);
  rp_cpu_gpt_matmul_fwd(p[0], p[1], p[3], p[2], a.N, a.C, a.OC);
  return RP_OK;
}

rp_status rp_task_gpt_matmul_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_matmul_bwd_op, rp_gpt_matmul_args, 6);
  rp_cpu_gpt_matmul_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C, a.OC,
                        a.accumulate);
  return RP_OK;
}

rp_status rp_task_gpt_bias_gelu_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_bias_gelu_fwd_op, rp_gpt_rows_cols_args, 3);
  rp_cpu_gpt_bias_gelu_fwd(p[0], p[1], p[2], a.rows, a.cols);
  return RP_OK;
}

rp_status rp_task_gpt_gelu_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_gelu_bwd_op, rp_gpt_n_args, 3);
  rp_cpu_gpt_gelu_bwd(p[0], p[1], p[2], a.n);
  return RP_OK;
}

rp_status rp_task_gpt_attention_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_fwd_op, rp_gpt_attn_args, 5);
  rp_cpu_gpt_attention_fwd(p[0], p[1], p[2], p[3], p[4], a.B, a.T, a.C, a.NH);
  return RP_OK;
}

rp_status rp_task_gpt_attention_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_bwd_op, rp_gpt_attn_args, 6);
  rp_cpu_gpt_attention_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.B, a.T, a.C,
                           a.NH);
  return RP_OK;
}

rp_status rp_task_gpt_attention_decode_check(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_decode_op, rp_gpt_decode_args, 5);
  return RP_OK;
}

rp_status rp_task_gpt_attention_decode_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_decode_op, rp_gpt_decode_args, 5);
  return rp_cpu_gpt_attention_decode(p[0], p[1], p[2], p[3], p[4], a.pos, a.T,
                                     a.C, a.NH);
}

rp_status rp_task_gpt_xent_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_xent_op, rp_gpt_xent_args, 4);
  return rp_cpu_gpt_xent(p[0], p[1], p[2], p[3], a.N, a.V, a.norm, a.grad);
}

/* gpt.adamw: the accesses de-interleaved into the kernels' arrays. */
#define ADAMW_ACCESSES (4 * RP_GPT_ADAMW_MAX + 2)
_Static_assert(ADAMW_ACCESSES <= RP_OP_MAX_TOTAL, "rp_op_prep's limit");
typedef struct adamw_job {
  rp_gpt_adamw_args a;
  void *p[ADAMW_ACCESSES];
  int64_t vol[ADAMW_ACCESSES];
  float *w[RP_GPT_ADAMW_MAX], *m[RP_GPT_ADAMW_MAX], *v[RP_GPT_ADAMW_MAX];
  const float *g[RP_GPT_ADAMW_MAX];
  size_t n[RP_GPT_ADAMW_MAX];
  float *stats;
  const float *sq;
} adamw_job;

/* args_only: the check_fn's check (rp_op_prep_args) */
static rp_status adamw_prep(const rp_task_ctx *ctx, adamw_job *j,
                            int args_only) {
  rp_status st = (args_only ? rp_op_prep_args : rp_op_prep)(
      &rp_task_gpt_adamw_op, ctx, &j->a, j->p, j->vol, ADAMW_ACCESSES);
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
  j->sq = j->p[4 * j->a.count + 1];
  return RP_OK;
}

rp_status rp_task_gpt_adamw_check(rp_task_ctx *ctx) {
  adamw_job j;
  return adamw_prep(ctx, &j, 1);
}

rp_status rp_task_gpt_adamw_cpu(rp_task_ctx *ctx) {
  adamw_job j;
  rp_status st = adamw_prep(ctx, &j, 0);
  if (st == RP_OK)
    rp_cpu_gpt_adamw(j.w, j.g, j.m, j.v, j.n, j.stats, j.sq, &j.a);
  return st;
}

/* gpt.sumsq: the gradients' pointers and sizes into the kernels' arrays. */
#define SUMSQ_ACCESSES (RP_GPT_ADAMW_MAX + 2)
typedef struct sumsq_job {
  rp_gpt_sumsq_args a;
  void *p[SUMSQ_ACCESSES];
  int64_t vol[SUMSQ_ACCESSES];
  const float *g[RP_GPT_ADAMW_MAX];
  size_t n[RP_GPT_ADAMW_MAX];
  float *sq, *each;
} sumsq_job;

static rp_status sumsq_prep(const rp_task_ctx *ctx, sumsq_job *j) {
  rp_status st = rp_op_prep(&rp_task_gpt_sumsq_op, ctx, &j->a, j->p, j->vol,
                            SUMSQ_ACCESSES);
  if (st != RP_OK)
    return st;
  for (int32_t i = 0; i < j->a.count; i++) {
    j->g[i] = j->p[i];
    j->n[i] = (size_t)j->vol[i];
  }
  j->sq = j->p[j->a.count];
  j->each = j->p[j->a.count + 1];
  return RP_OK;
}

rp_status rp_task_gpt_sumsq_cpu(rp_task_ctx *ctx) {
  sumsq_job j;
  rp_status st = sumsq_prep(ctx, &j);
  if (st == RP_OK)
    rp_cpu_gpt_sumsq(j.g, j.n, j.a.count, j.sq, j.each);
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
  RP_OP_PREP(rp_task_gpt_embed_fwd_op, rp_gpt_embed_args, 4);
  return rp_cuda_gpt_embed_fwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V,
                               rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_embed_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_embed_bwd_op, rp_gpt_embed_args, 4);
  return rp_cuda_gpt_embed_bwd(p[0], p[1], p[2], p[3], a.B, a.T, a.C, a.V,
                               rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_embed_token_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_embed_token_op, rp_gpt_token_args, 3);
  return rp_cuda_gpt_embed_token(p[0], p[1], p[2], a.pos, a.token, a.C, a.V,
                                 a.T, rp_ctx_device_args(ctx),
                                 rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_layernorm_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_layernorm_fwd_op, rp_gpt_ln_args, 6);
  return rp_cuda_gpt_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C,
                                   a.eps, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_residual_layernorm_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_residual_layernorm_fwd_op, rp_gpt_ln_args, 8);
  return rp_cuda_gpt_residual_layernorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5],
                                            p[6], p[7], a.N, a.C, a.eps,
                                            rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_layernorm_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_layernorm_bwd_op, rp_gpt_ln_bwd_args, 8);
  return rp_cuda_gpt_layernorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                   p[7], a.N, a.C, a.accumulate,
                                   rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_matmul_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_matmul_fwd_op, rp_gpt_matmul_args, 4);
  return rp_cuda_gpt_matmul_fwd(p[0], p[1], p[3], p[2], a.N, a.C, a.OC,
                                rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_matmul_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_matmul_bwd_op, rp_gpt_matmul_args, 6);
  return rp_cuda_gpt_matmul_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.N, a.C,
                                a.OC, a.accumulate, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_bias_gelu_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_bias_gelu_fwd_op, rp_gpt_rows_cols_args, 3);
  return rp_cuda_gpt_bias_gelu_fwd(p[0], p[1], p[2], a.rows, a.cols,
                                   rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_gelu_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_gelu_bwd_op, rp_gpt_n_args, 3);
  return rp_cuda_gpt_gelu_bwd(p[0], p[1], p[2], a.n, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_attention_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_fwd_op, rp_gpt_attn_args, 5);
  return rp_cuda_gpt_attention_fwd(p[0], p[1], p[2], p[3], p[4], a.B, a.T, a.C,
                                   a.NH, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_attention_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_bwd_op, rp_gpt_attn_args, 6);
  return rp_cuda_gpt_attention_bwd(p[0], p[1], p[2], p[3], p[4], p[5], a.B, a.T,
                                   a.C, a.NH, rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_attention_decode_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_attention_decode_op, rp_gpt_decode_args, 5);
  return rp_cuda_gpt_attention_decode(p[0], p[1], p[2], p[3], p[4], a.pos, a.T,
                                      a.C, a.NH, rp_ctx_device_args(ctx),
                                      rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_xent_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gpt_xent_op, rp_gpt_xent_args, 4);
  return rp_cuda_gpt_xent(p[0], p[1], p[2], p[3], a.N, a.V, a.norm, a.grad,
                          rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_adamw_gpu(rp_task_ctx *ctx) {
  adamw_job j;
  rp_status st = adamw_prep(ctx, &j, 0);
  if (st != RP_OK)
    return st;
  /* lr and step at offsets 0 and 4 of the device args inside an exec */
  return rp_cuda_gpt_adamw(j.w, j.g, j.m, j.v, j.n, j.stats, j.sq, &j.a,
                           rp_ctx_device_args(ctx), rp_ctx_stream(ctx));
}

rp_status rp_task_gpt_sumsq_gpu(rp_task_ctx *ctx) {
  sumsq_job j;
  rp_status st = sumsq_prep(ctx, &j);
  return st ? st
            : rp_cuda_gpt_sumsq(j.g, j.n, j.a.count, j.sq, j.each,
                                rp_ctx_stream(ctx));
}
#endif
