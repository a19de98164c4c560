/* kernels/tasks.c — the kernels as reprise tasks (contracts in tasks.h).
 *
 * Every task is one op descriptor (kernels/op_table.h: its args struct,
 * the ranges of its size fields, its accesses with element type and count
 * rule) and its variants: each runs the descriptor's check (rp_op_prep,
 * touching no data) and then the CPU kernel of cpu_kernels.h or, in CUDA
 * builds, the launcher of cuda_kernels.cuh on rp_ctx_stream(ctx). The
 * gpt.* tasks (kernels/gpt_tasks.c) are built the same way. */
#include "tasks.h"

#include "cpu_kernels.h"
#include "engine/device_ops.h"
#include "engine/engine.h"
#include "engine/util.h"
#include "op_table.h"

#ifdef REPRISE_HAVE_CUDA
#include "cuda_kernels.cuh"
_Static_assert(RP_CUDA_SGD_MULTI_MAX == RP_SGD_MULTI_MAX, "sgd_multi table");
#endif

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The offsets documented in tasks.h are what per-replay interpolation
 * writes to: they must not move. */
_Static_assert(offsetof(rp_gemm_args, alpha) == 20, "gemm alpha offset");
_Static_assert(offsetof(rp_gemm_args, beta) == 24, "gemm beta offset");
_Static_assert(sizeof(rp_gemm_args) == 28, "gemm args size");
_Static_assert(offsetof(rp_xent_args, norm) == 8, "xent norm offset");
_Static_assert(offsetof(rp_sgd_args, lr) == 0, "sgd lr offset");
_Static_assert(offsetof(rp_sgd_args, momentum) == 4, "sgd momentum offset");
_Static_assert(offsetof(rp_sgd_args, n) == 8, "sgd n offset");
_Static_assert(offsetof(rp_scalar_args, n) == 4, "scalar n offset");
_Static_assert(offsetof(rp_axpby_args, b) == 4, "axpby b offset");
_Static_assert(offsetof(rp_axpby_args, n) == 8, "axpby n offset");
_Static_assert(offsetof(rp_gather_args, index) == 0, "gather index offset");
_Static_assert(offsetof(rp_sgd_multi_args, lr) == 0, "sgd_multi lr offset");
_Static_assert(offsetof(rp_sgd_multi_args, count) == 8, "sgd_multi count");
_Static_assert(offsetof(rp_bias_act_args, act) == 8, "bias_act act offset");

/* ---------------------------------------------------------------------- */
/* Checks beyond the ranges */

/* rp.xent_*: norm 0 is the shard's own row count; the copy of the args
 * carries the effective norm. */
static rp_status xent_args(const rp_op *op, void *args,
                           const rp_task_ctx *ctx) {
  (void)ctx;
  rp_xent_args *a = args;
  float norm = a->norm != 0.0f ? a->norm : (a->rows > 0 ? (float)a->rows : 1);
  if (!(norm > 0.0f) || norm > 3.0e38f) /* also rejects NaN, inf */
    return rp__err(RP_EINVAL, "%s: norm = %g (the global batch size)", op->name,
                   (double)a->norm);
  a->norm = norm;
  return RP_OK;
}

static rp_status gather_args(const rp_op *op, void *args,
                             const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_gather_args *a = args;
  if (a->index < 0)
    return rp__err(RP_ERANGE, "%s: batch index %d is negative", op->name,
                   (int)a->index);
  return RP_OK;
}

/* rp.gather_rows: dst holds a batch, src holds batch `index`, both of one
 * element type (on metadata: the GPU variant checks the same). */
static rp_status gather_ptrs(const rp_op *op, const void *args,
                             void *const *ptr, const rp_task_ctx *ctx) {
  const rp_gather_args *a = args;
  const rp_instance_info *src = rp_ctx_inst(ctx, 0), *dst = rp_ctx_inst(ctx, 1);
  int64_t n = (int64_t)a->rows * a->cols; /* < 2^62: no overflow below */
  int64_t svol = rp_rect_volume(&src->rect), dvol = rp_rect_volume(&dst->rect);
  if (dvol < n) /* a shape, not the index: as every task's */
    return rp__err(RP_ESHAPE,
                   "%s: access 1 (dst) has %lld elements, needs %lld", op->name,
                   (long long)dvol, (long long)n);
  if ((int64_t)a->index + 1 > svol / (n ? n : 1))
    return rp__err(RP_ERANGE,
                   "%s: batch index %d selects rows [%lld, %lld) beyond the "
                   "%lld rows of src",
                   op->name, (int)a->index, (long long)a->index * a->rows,
                   (long long)(a->index + 1) * a->rows,
                   (long long)(a->cols ? svol / a->cols : 0));
  if (src->dtype != dst->dtype)
    return rp__err(RP_ETYPE, "%s: src is %s, dst is %s", op->name,
                   rp_dtype_name(src->dtype), rp_dtype_name(dst->dtype));
  /* dst's batch shares no byte with src (any batch of it: the index may
   * change per replay); the descriptor's rules count no elements here */
  uintptr_t s0 = (uintptr_t)ptr[0], d0 = (uintptr_t)ptr[1];
  size_t es = rp_dtype_size(src->dtype);
  if (n > 0 && svol > 0 && d0 < s0 + (uintptr_t)svol * es &&
      s0 < d0 + (uintptr_t)n * es)
    return rp__err(RP_EINVAL,
                   "%s: access 0 (src) and access 1 (dst) overlap, and the "
                   "task writes one of them",
                   op->name);
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* The descriptors */

#define GM(m) RP_OPF(rp_gemm_args, m)
const rp_op rp_task_gemm_op = {
    .name = "rp.gemm",
    RP_OP_ARGS(rp_gemm_args),
    .fields = {{"m", GM(m), 0, 0, INT32_MAX},
               {"n", GM(n), 0, 0, INT32_MAX},
               {"k", GM(k), 0, 0, INT32_MAX},
               {"trans_a", GM(trans_a), 0, 0, 1},
               {"trans_b", GM(trans_b), 0, 0, 1}},
    .head = {{"A", RP_F32, RP_READ, {1, {GM(m), GM(k)}}},
             {"B", RP_F32, RP_READ, {1, {GM(k), GM(n)}}},
             /* C = ... + beta * C: read when beta != 0 */
             {"C",
              RP_F32,
              RP_WRITE,
              {1, {GM(m), GM(n)}},
              .flags = RP_OPA_ALSO_F32,
              .also = RP_READ,
              .also_when = GM(beta),
              .also_name = "beta"}},
    .nhead = 3,
};

/* rows x cols tasks: rows >= 0, cols >= 1 (rp_rows_cols_args, and the
 * rp_xent_args that start the same way) */
_Static_assert(offsetof(rp_xent_args, cols) ==
                   offsetof(rp_rows_cols_args, cols),
               "xent rows, cols");
#define RC(m) RP_OPF(rp_rows_cols_args, m)
/* clang-format off */
#define RC_FIELDS \
  {{"rows", RC(rows), 0, 0, INT32_MAX}, {"cols", RC(cols), 0, 1, INT32_MAX}}
#define RC_MAT {1, {RC(rows), RC(cols)}}
#define RC_ROW {1, {RC(cols)}}
#define RC_LABELS {"labels", RP_I32, RP_READ, {1, {RC(rows)}}}
/* clang-format on */
const rp_op rp_task_bias_add_op = {
    .name = "rp.bias_add",
    RP_OP_ARGS(rp_bias_args),
    .fields = RC_FIELDS,
    .head = {{"X", RP_F32, RP_RW, RC_MAT}, {"bias", RP_F32, RP_READ, RC_ROW}},
    .nhead = 2,
};
const rp_op rp_task_bias_grad_op = {
    .name = "rp.bias_grad",
    RP_OP_ARGS(rp_bias_args),
    .fields = RC_FIELDS,
    .head = {{"dY", RP_F32, RP_READ, RC_MAT}, {"db", RP_F32, RP_WRITE, RC_ROW}},
    .nhead = 2,
};
const rp_op rp_task_accuracy_op = {
    .name = "rp.accuracy",
    RP_OP_ARGS(rp_rows_cols_args),
    .fields = RC_FIELDS,
    .head = {{"X", RP_F32, RP_READ, RC_MAT},
             {"labels", RP_I32, RP_READ, {1, {RC(rows)}}},
             {"count", RP_I32, RP_WRITE, RP_OPC_ONE}},
    .nhead = 3,
};
const rp_op rp_task_relu_bwd_bias_op = {
    .name = "rp.relu_bwd_bias",
    RP_OP_ARGS(rp_rows_cols_args),
    .fields = RC_FIELDS,
    .head = {{"A", RP_F32, RP_READ, RC_MAT},
             {"dA", RP_F32, RP_READ, RC_MAT},
             {"dZ", RP_F32, RP_WRITE, RC_MAT, 0, RP_OPA_WRITES_ALL, 2},
             {"db", RP_F32, RP_WRITE, RC_ROW, 0, RP_OPA_WRITES_ALL}},
    .nhead = 4,
};

#define BA(m) RP_OPF(rp_bias_act_args, m)
const rp_op rp_task_bias_act_op = {
    .name = "rp.bias_act",
    RP_OP_ARGS(rp_bias_act_args),
    .fields = {{"rows", BA(rows), 0, 0, INT32_MAX},
               {"cols", BA(cols), 0, 1, INT32_MAX},
               {"act", BA(act), 0, RP_ACT_NONE, RP_ACT_RELU}},
    .head = {{"Z", RP_F32, RP_RW, {1, {BA(rows), BA(cols)}}},
             {"bias", RP_F32, RP_READ, {1, {BA(cols)}}},
             {"A", RP_F32, RP_WRITE, {1, {BA(rows), BA(cols)}}, BA(act)}},
    .nhead = 3,
};

/* Elementwise tasks: n, or the whole instance of access 0 when n == 0 */
#define EW(m) RP_OPF(rp_elementwise_args, m)
#define EW_N RP_OPC_N(EW(n))
const rp_op rp_task_relu_fwd_op = {
    .name = "rp.relu_fwd",
    RP_OP_ARGS(rp_elementwise_args),
    .fields = {{"n", EW(n), 0, 0, INT32_MAX}},
    .head = {{"X", RP_F32, RP_READ, EW_N},
             {"Y", RP_F32, RP_WRITE, EW_N, 0, RP_OPA_WRITES_ALL, 1}},
    .nhead = 2,
};
const rp_op rp_task_relu_bwd_op = {
    .name = "rp.relu_bwd",
    RP_OP_ARGS(rp_elementwise_args),
    .fields = {{"n", EW(n), 0, 0, INT32_MAX}},
    .head = {{"X", RP_F32, RP_READ, EW_N},
             {"dY", RP_F32, RP_READ, EW_N},
             {"dX", RP_F32, RP_WRITE, EW_N, 0, RP_OPA_WRITES_ALL}},
    .nhead = 3,
};

/* rp.sgd's and rp.sgd_multi's lr and momentum (offsets 0 and 4 in both):
 * finite and >= 0 (torch.optim.SGD's rule), or every weight goes NaN or
 * climbs its gradient. */
_Static_assert(offsetof(rp_sgd_multi_args, lr) == offsetof(rp_sgd_args, lr) &&
                   offsetof(rp_sgd_multi_args, momentum) ==
                       offsetof(rp_sgd_args, momentum),
               "sgd args layouts");
static rp_status sgd_args(const rp_op *op, void *args, const rp_task_ctx *ctx) {
  (void)ctx;
  const rp_sgd_args *a = args;
  if (!(isfinite(a->lr) && a->lr >= 0.0f && isfinite(a->momentum) &&
        a->momentum >= 0.0f))
    return rp__err(RP_EINVAL, "%s: lr = %g, momentum = %g (need finite, >= 0)",
                   op->name, (double)a->lr, (double)a->momentum);
  return RP_OK;
}

#define SG(m) RP_OPF(rp_sgd_args, m)
#define SG_N RP_OPC_N(SG(n))
const rp_op rp_task_sgd_op = {
    .name = "rp.sgd",
    RP_OP_ARGS(rp_sgd_args),
    .fields = {{"n", SG(n), 0, 0, INT32_MAX}},
    .check_args = sgd_args,
    .head = {{"W", RP_F32, RP_RW, SG_N},
             {"G", RP_F32, RP_READ, SG_N},
             {"V", RP_F32, RP_RW, SG_N}},
    .nhead = 3,
};

#define SC(m) RP_OPF(rp_scalar_args, m)
#define SC_N RP_OPC_N(SC(n))
const rp_op rp_task_fill_op = {
    .name = "rp.fill",
    RP_OP_ARGS(rp_scalar_args),
    .fields = {{"n", SC(n), 0, 0, INT32_MAX}},
    .head = {{"X", RP_F32, RP_WRITE, SC_N, 0, RP_OPA_WRITES_ALL}},
    .nhead = 1,
};
const rp_op rp_task_scale_op = {
    .name = "rp.scale",
    RP_OP_ARGS(rp_scalar_args),
    .fields = {{"n", SC(n), 0, 0, INT32_MAX}},
    .head = {{"X", RP_F32, RP_RW, SC_N}},
    .nhead = 1,
};
const rp_op rp_task_axpy_op = {
    .name = "rp.axpy",
    RP_OP_ARGS(rp_scalar_args),
    .fields = {{"n", SC(n), 0, 0, INT32_MAX}},
    .head = {{"X", RP_F32, RP_READ, SC_N}, {"Y", RP_F32, RP_RW, SC_N, 0, 0, 1}},
    .nhead = 2,
};

#define AB(m) RP_OPF(rp_axpby_args, m)
#define AB_N RP_OPC_N(AB(n))
const rp_op rp_task_axpby_op = {
    .name = "rp.axpby",
    RP_OP_ARGS(rp_axpby_args),
    .fields = {{"n", AB(n), 0, 0, INT32_MAX}},
    .head = {{"X", RP_F32, RP_READ, AB_N}, {"Y", RP_F32, RP_RW, AB_N, 0, 0, 1}},
    .nhead = 2,
};

const rp_op rp_task_xent_fwd_op = {
    .name = "rp.xent_fwd",
    RP_OP_ARGS(rp_xent_args),
    .fields = RC_FIELDS,
    .check_args = xent_args,
    .head = {{"logits", RP_F32, RP_READ, RC_MAT},
             RC_LABELS,
             {"probs", RP_F32, RP_WRITE, RC_MAT},
             {"loss", RP_F32, RP_WRITE, RP_OPC_ONE}},
    .nhead = 4,
};
const rp_op rp_task_xent_bwd_op = {
    .name = "rp.xent_bwd",
    RP_OP_ARGS(rp_xent_args),
    .fields = RC_FIELDS,
    .check_args = xent_args,
    .head = {{"probs", RP_F32, RP_READ, RC_MAT},
             RC_LABELS,
             {"dlogits", RP_F32, RP_WRITE, RC_MAT, 0, 0, 1}},
    .nhead = 3,
};
const rp_op rp_task_softmax_xent_op = {
    .name = "rp.softmax_xent",
    RP_OP_ARGS(rp_xent_args),
    .fields = RC_FIELDS,
    .check_args = xent_args,
    .head = {{"logits", RP_F32, RP_READ, RC_MAT},
             RC_LABELS,
             {"dlogits", RP_F32, RP_WRITE, RC_MAT},
             {"loss", RP_F32, RP_WRITE, RP_OPC_ONE},
             {"db", RP_F32, RP_WRITE, RC_ROW, 0, RP_OPA_OPTIONAL}},
    .nhead = 5,
};

#define GA(m) RP_OPF(rp_gather_args, m)
const rp_op rp_task_gather_rows_op = {
    .name = "rp.gather_rows",
    RP_OP_ARGS(rp_gather_args),
    .fields = {{"rows", GA(rows), 0, 0, INT32_MAX},
               {"cols", GA(cols), 0, 0, INT32_MAX}},
    .check_args = gather_args,
    /* sizes and overlap checked by gather_ptrs (RP_ERANGE: a batch index
     * is data) */
    .head = {{"src", RP_F32, RP_READ, {0}, 0, RP_OPA_ANY_TYPE},
             {"dst", RP_F32, RP_WRITE, {0}, 0, RP_OPA_ANY_TYPE}},
    .nhead = 2,
    .check_ptrs = gather_ptrs,
};

#define SM(m) RP_OPF(rp_sgd_multi_args, m)
const rp_op rp_task_sgd_multi_op = {
    .name = "rp.sgd_multi",
    RP_OP_ARGS(rp_sgd_multi_args),
    .fields = {{"count", SM(count), 0, 1, RP_SGD_MULTI_MAX}},
    .check_args = sgd_args,
    .group = {{"W", RP_F32, RP_RW, RP_OPC_GROUP},
              {"G", RP_F32, RP_READ, RP_OPC_GROUP},
              {"V", RP_F32, RP_RW, RP_OPC_GROUP}},
    .ngroup = 3,
    .group_count = SM(count),
};

/* ---------------------------------------------------------------------- */
/* CPU variants */

rp_status rp_task_gemm_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gemm_op, rp_gemm_args, 3);
  rp_cpu_gemm(a.trans_a, a.trans_b, a.m, a.n, a.k, a.alpha, p[0], p[1], a.beta,
              p[2]);
  return RP_OK;
}

rp_status rp_task_bias_add_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_bias_add_op, rp_bias_args, 2);
  rp_cpu_bias_add(p[0], p[1], (size_t)a.rows, (size_t)a.cols);
  return RP_OK;
}

rp_status rp_task_bias_grad_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_bias_grad_op, rp_bias_args, 2);
  rp_cpu_bias_grad(p[0], p[1], (size_t)a.rows, (size_t)a.cols);
  return RP_OK;
}

/* Elementwise count: n, or the whole instance of access 0. */
static size_t count_of(int32_t n, const rp_task_ctx *ctx) {
  return n ? (size_t)n : (size_t)rp_rect_volume(&rp_ctx_inst(ctx, 0)->rect);
}

rp_status rp_task_relu_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_relu_fwd_op, rp_elementwise_args, 2);
  rp_cpu_relu_fwd(p[0], p[1], count_of(a.n, ctx));
  return RP_OK;
}

rp_status rp_task_relu_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_relu_bwd_op, rp_elementwise_args, 3);
  rp_cpu_relu_bwd(p[0], p[1], p[2], count_of(a.n, ctx));
  return RP_OK;
}

/* CPU only (the labels live on the host): RP_ERANGE for the first label
 * outside [0, cols), before anything is written. */
static rp_status labels_ok(const char *t, const int32_t *labels, int32_t rows,
                           int32_t cols) {
  for (int32_t r = 0; r < rows; r++)
    if (labels[r] < 0 || labels[r] >= cols)
      return rp__err(RP_ERANGE, "%s: label %d of row %d outside [0, %d)", t,
                     (int)labels[r], (int)r, (int)cols);
  return RP_OK;
}

rp_status rp_task_xent_fwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_xent_fwd_op, rp_xent_args, 4);
  st = labels_ok(rp_task_xent_fwd_op.name, p[1], a.rows, a.cols);
  if (st == RP_OK)
    rp_cpu_xent_fwd(p[0], p[1], p[2], 0, (size_t)a.rows, (size_t)a.cols, a.norm,
                    p[3]);
  return st;
}

rp_status rp_task_xent_bwd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_xent_bwd_op, rp_xent_args, 3);
  st = labels_ok(rp_task_xent_bwd_op.name, p[1], a.rows, a.cols);
  if (st == RP_OK)
    rp_cpu_xent_bwd(p[0], p[1], p[2], 0, (size_t)a.rows, (size_t)a.cols,
                    a.norm);
  return st;
}

rp_status rp_task_sgd_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_sgd_op, rp_sgd_args, 3);
  rp_cpu_sgd_momentum(p[0], p[1], p[2], count_of(a.n, ctx), a.lr, a.momentum);
  return RP_OK;
}

rp_status rp_task_sgd_check(rp_task_ctx *ctx) {
  rp_sgd_args a;
  void *p[3];
  return rp_op_prep_args(&rp_task_sgd_op, ctx, &a, p, NULL, 3);
}

rp_status rp_task_fill_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_fill_op, rp_scalar_args, 1);
  rp_cpu_fill(p[0], a.value, count_of(a.n, ctx));
  return RP_OK;
}

rp_status rp_task_scale_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_scale_op, rp_scalar_args, 1);
  rp_cpu_scale(p[0], a.value, count_of(a.n, ctx));
  return RP_OK;
}

rp_status rp_task_axpy_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_axpy_op, rp_scalar_args, 2);
  rp_cpu_axpy(a.value, p[0], p[1], count_of(a.n, ctx));
  return RP_OK;
}

rp_status rp_task_axpby_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_axpby_op, rp_axpby_args, 2);
  rp_cpu_axpby(a.a, p[0], a.b, p[1], count_of(a.n, ctx));
  return RP_OK;
}

rp_status rp_task_accuracy_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_accuracy_op, rp_rows_cols_args, 3);
  int32_t *count = p[2]; /* rows fit int32, so the count does too */
  count[0] = (int32_t)rp_cpu_argmax_correct(p[0], p[1], (size_t)a.rows,
                                            (size_t)a.cols);
  return RP_OK;
}

/* rp.gather_rows: the selected batch, and what the GPU kernel needs to
 * select it itself. */
typedef struct gather_job {
  const char *src; /* the selected batch */
  char *dst;
  size_t bytes;         /* rows * cols * element size */
  const char *src_base; /* batch 0 (GPU: the kernel selects) */
  int64_t batches;      /* whole batches in src */
  int32_t index;
} gather_job;

static rp_status gather_prep(const rp_task_ctx *ctx, gather_job *j) {
  rp_gather_args a;
  void *p[2];
  rp_status st = rp_op_prep(&rp_task_gather_rows_op, ctx, &a, p, NULL, 2);
  if (st != RP_OK)
    return st;
  const rp_instance_info *src = rp_ctx_inst(ctx, 0);
  int64_t n = (int64_t)a.rows * a.cols;
  j->bytes = (size_t)n * rp_dtype_size(src->dtype);
  j->src_base = p[0];
  j->src = (const char *)p[0] + (size_t)a.index * j->bytes;
  j->dst = p[1];
  j->index = a.index;
  j->batches = rp_rect_volume(&src->rect) / (n ? n : 1);
  return RP_OK;
}

rp_status rp_task_gather_rows_cpu(rp_task_ctx *ctx) {
  gather_job j;
  rp_status st = gather_prep(ctx, &j);
  if (st == RP_OK && j.bytes)
    memcpy(j.dst, j.src, j.bytes);
  return st;
}

rp_status rp_task_gather_rows_check(rp_task_ctx *ctx) {
  gather_job j;
  return gather_prep(ctx, &j);
}

rp_status rp_task_bias_act_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_bias_act_op, rp_bias_act_args, 3);
  rp_cpu_bias_act(p[0], p[1], p[2], (size_t)a.rows, (size_t)a.cols);
  return RP_OK;
}

rp_status rp_task_softmax_xent_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_softmax_xent_op, rp_xent_args, 5);
  st = labels_ok(rp_task_softmax_xent_op.name, p[1], a.rows, a.cols);
  if (st == RP_OK)
    rp_cpu_softmax_xent(p[0], p[1], p[2], p[4], (size_t)a.rows, (size_t)a.cols,
                        a.norm, p[3]);
  return st;
}

rp_status rp_task_relu_bwd_bias_cpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_relu_bwd_bias_op, rp_rows_cols_args, 4);
  rp_cpu_relu_bwd_bias_grad(p[0], p[1], p[2], p[3], (size_t)a.rows,
                            (size_t)a.cols);
  return RP_OK;
}

/* rp.sgd_multi: the accesses de-interleaved into the launchers' arrays. */
#define SGD_MULTI_ACCESSES (3 * RP_SGD_MULTI_MAX)
typedef struct sgd_multi_job {
  rp_sgd_multi_args a;
  void *p[SGD_MULTI_ACCESSES];
  int64_t vol[SGD_MULTI_ACCESSES];
  float *w[RP_SGD_MULTI_MAX], *v[RP_SGD_MULTI_MAX];
  const float *g[RP_SGD_MULTI_MAX];
  size_t n[RP_SGD_MULTI_MAX];
} sgd_multi_job;

/* args_only: the check_fn's check (rp_op_prep_args) */
static rp_status sgd_multi_prep(const rp_task_ctx *ctx, sgd_multi_job *j,
                                int args_only) {
  rp_status st = (args_only ? rp_op_prep_args : rp_op_prep)(
      &rp_task_sgd_multi_op, ctx, &j->a, j->p, j->vol, SGD_MULTI_ACCESSES);
  for (int32_t i = 0; st == RP_OK && i < j->a.count; i++) {
    j->w[i] = j->p[3 * i];
    j->g[i] = j->p[3 * i + 1];
    j->v[i] = j->p[3 * i + 2];
    j->n[i] = (size_t)j->vol[3 * i];
  }
  return st;
}

rp_status rp_task_sgd_multi_check(rp_task_ctx *ctx) {
  sgd_multi_job j;
  return sgd_multi_prep(ctx, &j, 1);
}

rp_status rp_task_sgd_multi_cpu(rp_task_ctx *ctx) {
  sgd_multi_job j;
  rp_status st = sgd_multi_prep(ctx, &j, 0);
  for (int32_t i = 0; st == RP_OK && i < j.a.count; i++)
    rp_cpu_sgd_momentum(j.w[i], j.g[i], j.v[i], j.n[i], j.a.lr, j.a.momentum);
  return st;
}

/* ---------------------------------------------------------------------- */
/* GPU variants: the same checks (on instance metadata only: the pointers
 * are device pointers and never dereferenced here), then one launcher call
 * on the task's stream. Labels cannot be checked from the host: a bad one
 * shows up as NaN (see tasks.h). */

#ifdef REPRISE_HAVE_CUDA
rp_status rp_task_gemm_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_gemm_op, rp_gemm_args, 3);
  return rp_cuda_gemm(a.trans_a, a.trans_b, a.m, a.n, a.k, a.alpha, p[0], p[1],
                      a.beta, p[2], rp_ctx_stream(ctx));
}

rp_status rp_task_bias_add_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_bias_add_op, rp_bias_args, 2);
  return rp_cuda_bias_add(p[0], p[1], (size_t)a.rows, (size_t)a.cols,
                          rp_ctx_stream(ctx));
}

rp_status rp_task_bias_grad_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_bias_grad_op, rp_bias_args, 2);
  return rp_cuda_bias_grad(p[0], p[1], (size_t)a.rows, (size_t)a.cols,
                           rp_ctx_stream(ctx));
}

rp_status rp_task_relu_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_relu_fwd_op, rp_elementwise_args, 2);
  return rp_cuda_relu_fwd(p[0], p[1], count_of(a.n, ctx), rp_ctx_stream(ctx));
}

rp_status rp_task_relu_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_relu_bwd_op, rp_elementwise_args, 3);
  return rp_cuda_relu_bwd(p[0], p[1], p[2], count_of(a.n, ctx),
                          rp_ctx_stream(ctx));
}

rp_status rp_task_xent_fwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_xent_fwd_op, rp_xent_args, 4);
  /* Row losses go to the workspace when the launch declared enough of it;
   * otherwise the one-block kernel needs none. */
  size_t ws_bytes = 0;
  void *ws = rp_ctx_workspace(ctx, &ws_bytes);
  float *row_loss =
      ws && ws_bytes >= (size_t)a.rows * sizeof(float) ? ws : NULL;
  return rp_cuda_xent_fwd(p[0], p[1], p[2], row_loss, p[3], (size_t)a.rows,
                          (size_t)a.cols, a.norm, rp_ctx_stream(ctx));
}

rp_status rp_task_xent_bwd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_xent_bwd_op, rp_xent_args, 3);
  return rp_cuda_xent_bwd(p[0], p[1], p[2], (size_t)a.rows, (size_t)a.cols,
                          a.norm, rp_ctx_stream(ctx));
}

rp_status rp_task_sgd_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_sgd_op, rp_sgd_args, 3);
  /* Inside an exec the learning rate is read on the device from this
   * op's bytes in the parameter buffer (lr sits at offset 0), so a
   * per-replay lr reaches the captured graph; eager launches pass it by
   * value (no buffer). See tasks.h. */
  const float *lr_dev = rp_ctx_device_args(ctx);
  return rp_cuda_sgd_momentum(p[0], p[1], p[2], count_of(a.n, ctx), a.lr,
                              a.momentum, lr_dev, rp_ctx_stream(ctx));
}

rp_status rp_task_fill_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_fill_op, rp_scalar_args, 1);
  return rp_cuda_fill(p[0], a.value, count_of(a.n, ctx), rp_ctx_stream(ctx));
}

rp_status rp_task_scale_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_scale_op, rp_scalar_args, 1);
  return rp_cuda_scale(p[0], a.value, count_of(a.n, ctx), rp_ctx_stream(ctx));
}

rp_status rp_task_axpy_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_axpy_op, rp_scalar_args, 2);
  return rp_cuda_axpy(a.value, p[0], p[1], count_of(a.n, ctx),
                      rp_ctx_stream(ctx));
}

rp_status rp_task_axpby_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_axpby_op, rp_axpby_args, 2);
  return rp_cuda_axpby(a.a, p[0], a.b, p[1], count_of(a.n, ctx),
                       rp_ctx_stream(ctx));
}

rp_status rp_task_accuracy_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_accuracy_op, rp_rows_cols_args, 3);
  return rp_cuda_argmax_correct(p[0], p[1], p[2], (size_t)a.rows,
                                (size_t)a.cols, rp_ctx_stream(ctx));
}

rp_status rp_task_gather_rows_gpu(rp_task_ctx *ctx) {
  gather_job j;
  rp_status st = gather_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  /* The kernel gets the src base and the batch count and picks the batch
   * itself: the device-side index (inside an exec; offset 0) when there is
   * one, else the by-value one. */
  return rp_cuda_gather_rows(j.dst, j.src_base, j.bytes, j.batches, j.index,
                             rp_ctx_device_args(ctx), rp_ctx_stream(ctx));
}

rp_status rp_task_bias_act_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_bias_act_op, rp_bias_act_args, 3);
  return rp_cuda_bias_act(p[0], p[1], p[2], (size_t)a.rows, (size_t)a.cols,
                          rp_ctx_stream(ctx));
}

rp_status rp_task_softmax_xent_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_softmax_xent_op, rp_xent_args, 5);
  return rp_cuda_softmax_xent(p[0], p[1], p[2], p[4], p[3], (size_t)a.rows,
                              (size_t)a.cols, a.norm, rp_ctx_stream(ctx));
}

rp_status rp_task_relu_bwd_bias_gpu(rp_task_ctx *ctx) {
  RP_OP_PREP(rp_task_relu_bwd_bias_op, rp_rows_cols_args, 4);
  return rp_cuda_relu_bwd_bias_grad(p[0], p[1], p[2], p[3], (size_t)a.rows,
                                    (size_t)a.cols, rp_ctx_stream(ctx));
}

rp_status rp_task_sgd_multi_gpu(rp_task_ctx *ctx) {
  sgd_multi_job j;
  rp_status st = sgd_multi_prep(ctx, &j, 0);
  if (st != RP_OK)
    return st;
  /* lr at offset 0 of the device args inside an exec (see rp.sgd) */
  return rp_cuda_sgd_multi(j.w, j.g, j.v, j.n, j.a.count, j.a.lr, j.a.momentum,
                           rp_ctx_device_args(ctx), rp_ctx_stream(ctx));
}
#define GPU_FN(f) f
#else
#define GPU_FN(f) NULL
#endif

/* ---------------------------------------------------------------------- */
/* Registration */

/* One entry per line of RP_KERNEL_TASKS (tasks.h), in its order. */
typedef struct task_entry {
  const rp_op *op; /* its name is the registered name */
  rp_task_fn cpu_fn, gpu_fn;
  size_t field;        /* offset of the id in rp_kernel_tasks */
  unsigned flags;      /* beyond RP_TASK_STREAM_ORDERED */
  rp_task_fn check_fn; /* rp_task_desc.check_fn, or NULL */
} task_entry;

#define TASK_ENTRY(id, body, flags, check_fn)                                  \
  {&rp_task_##body##_op,                                                       \
   rp_task_##body##_cpu,                                                       \
   GPU_FN(rp_task_##body##_gpu),                                               \
   offsetof(rp_kernel_tasks, id),                                              \
   flags,                                                                      \
   check_fn},
static const task_entry TASKS[] = {RP_KERNEL_TASKS(TASK_ENTRY)};
#undef TASK_ENTRY

const rp_op *rp_kernel_op(const char *name) {
  for (size_t i = 0; i < RP_ARRAY_LEN(TASKS); i++)
    if (!strcmp(TASKS[i].op->name, name))
      return TASKS[i].op;
  return NULL;
}

#ifdef REPRISE_HAVE_CUDA
/* cuBLAS state for every device the runtime's GPUs use, before any capture.
 * Logical GPU d maps onto physical device d % count (the round-robin of
 * rp_runtime_config.gpus); a device missed here is still set up by the
 * first GEMM issued outside capture. */
static rp_status blas_setup(rp_runtime *rt) {
  if (rp_runtime_backend(rt) != RP_BACKEND_CUDA)
    return RP_OK;
  int count = 0;
  rp_status st = rp_cuda_device_count(&count);
  for (rp_proc p = 0; st == RP_OK && count > 0 && p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    if (rp_proc_query(rt, p, &pi) == RP_OK && pi.kind == RP_PROC_GPU)
      st = rp_cuda_blas_init(pi.device % count);
  }
  if (st == RP_OK) /* streams created from now on get a workspace slice */
    rp__set_stream_hook(rp_cuda_blas_stream_hook);
  return st == RP_OK ? RP_OK : rp__err_prefix(st, "rp_kernels_register: ");
}
#endif

/* The engine's privilege hook (engine.h rp_task_priv_fn): arg is the
 * task's descriptor. */
static rp_status op_privs(const void *arg, const void *args, size_t args_size,
                          const rp_access *acc, uint32_t nacc,
                          const rp_interp *interps, uint32_t ninterp) {
  return rp_op_check_privs(arg, args, args_size, acc, nacc, interps, ninterp);
}

/* The engine's launch hook (engine.h rp_task_launch_fn): arg is the
 * task's descriptor; the body's checks on the launch's args and its
 * accesses' layouts (rp_op_check_launch). */
static rp_status op_launch(const void *arg, rp_runtime *rt,
                           const rp_launch *l) {
  rp_instance_info small[2 * RP_OP_MAX_ACCESSES + 2];
  rp_instance_info *in = small;
  if (l->naccess > RP_ARRAY_LEN(small) &&
      !(in = malloc(l->naccess * sizeof *in)))
    return rp__err(RP_ENOMEM, "%s: out of memory checking the launch",
                   ((const rp_op *)arg)->name);
  rp_status st = RP_OK;
  for (uint32_t i = 0; st == RP_OK && i < l->naccess; i++)
    st = rp_instance_query(rt, l->accesses[i].inst, &in[i]);
  rp_task_ctx ctx = {.rt = rt,
                     .proc = l->proc,
                     .shards = l->shards > 1 ? l->shards : 1,
                     .args = l->args,
                     .args_size = l->args_size,
                     .naccess = l->naccess,
                     .insts = in,
                     .replay = UINT64_MAX};
  if (st == RP_OK)
    st = rp_op_check_launch(arg, &ctx, l->interps, l->ninterp);
  if (in != small)
    free(in);
  return st;
}

/* The engine's cover hook (engine.h rp_task_cover_fn): arg is the task's
 * descriptor. */
static int op_covers(const void *arg, const void *args, size_t args_size,
                     const int64_t *vol, uint32_t nacc, uint32_t i,
                     const rp_interp *interps, uint32_t ninterp) {
  return rp_op_writes_whole(arg, args, args_size, vol, nacc, i, interps,
                            ninterp);
}

rp_status rp_kernels_register(rp_runtime *rt, rp_kernel_tasks *out) {
  if (!rt || !out)
    return rp__err(RP_EINVAL, "rp_kernels_register: NULL argument");
  rp_status cst = rp__rt_check(rt, "rp_kernels_register");
  if (cst)
    return cst;
  /* All-or-nothing for the expected failure: check names first. */
  for (size_t i = 0; i < RP_ARRAY_LEN(TASKS); i++) {
    rp_task_id id;
    if (rp__task_lookup(rt, TASKS[i].op->name, &id))
      return rp__err(RP_EEXIST,
                     "rp_kernels_register: task '%s' already registered",
                     TASKS[i].op->name);
  }
#ifdef REPRISE_HAVE_CUDA
  rp_status bst = blas_setup(rt);
  if (bst != RP_OK)
    return bst;
#endif
  rp_kernel_tasks ids;
  for (size_t i = 0; i < RP_ARRAY_LEN(TASKS); i++) {
    const rp_op *op = TASKS[i].op;
    rp_task_desc d = {.name = op->name,
                      .cpu_fn = TASKS[i].cpu_fn,
                      .gpu_fn = TASKS[i].gpu_fn,
                      .flags = RP_TASK_STREAM_ORDERED | TASKS[i].flags,
                      .cost_ns = 0,
                      .check_fn = TASKS[i].check_fn};
    /* every kernel task is described by data: its launches' declared
     * privileges are checked against its descriptor, which also tells
     * copy insertion which writes cover their instance; the record holds
     * both before the task can be found */
    rp_task_hooks h = {.priv_fn = op_privs,
                       .launch_fn = op_launch,
                       .cover_fn = op_covers,
                       .arg = op};
    rp_task_id id;
    rp_status st = rp__task_register_with(rt, &d, &h, &id);
    if (st != RP_OK) /* out of memory: earlier ones stay registered */
      return rp__err_prefix(st, "rp_kernels_register: ");
    memcpy((char *)&ids + TASKS[i].field, &id, sizeof id);
  }
  *out = ids;
  return RP_OK;
}
