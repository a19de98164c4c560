/* kernels/tasks.c — the kernels as reprise tasks (contracts in tasks.h).
 *
 * Every task is split in two: a `*_prep` that reads and checks the args and
 * instances into a small job struct (shared by both variants, touching no
 * data), and the variants that run the job: the CPU one calls
 * cpu_kernels.h, the GPU one (CUDA builds) enqueues through the C launchers
 * of cuda_kernels.cuh on rp_ctx_stream(ctx). */
#include "tasks.h"

#include "cpu_kernels.h"
#include "engine/util.h"

#ifdef REPRISE_HAVE_CUDA
#include "cuda_kernels.cuh"
_Static_assert(RP_CUDA_SGD_MULTI_MAX == RP_SGD_MULTI_MAX, "sgd_multi table");
#endif

#include <stddef.h>
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
_Static_assert(offsetof(rp_gather_args, index) == 0, "gather index offset");
_Static_assert(offsetof(rp_sgd_multi_args, lr) == 0, "sgd_multi lr offset");
_Static_assert(offsetof(rp_sgd_multi_args, count) == 8, "sgd_multi count");
_Static_assert(offsetof(rp_bias_act_args, act) == 8, "bias_act act offset");

/* ---------------------------------------------------------------------- */
/* Checking args and instances */

/* Copies the task's args (at least `size` bytes) into out. */
static rp_status get_args(const rp_task_ctx *ctx, const char *task,
                          const char *type, void *out, size_t size) {
  size_t have = 0;
  const void *a = rp_ctx_args(ctx, &have);
  if (!a || have < size)
    return rp__err(RP_EINVAL, "%s: args are %zu bytes, need %zu (%s)", task,
                   a ? have : 0, size, type);
  memcpy(out, a, size); /* args bytes carry no alignment promise */
  return RP_OK;
}

/* 1 when the layout is dense row-major (a dimension of extent 1 may have
 * any stride: it is never stepped over). */
static int dense(const rp_instance_info *in) {
  int64_t want = 1;
  for (int d = in->rect.dim - 1; d >= 0; d--) {
    int64_t ext = in->rect.hi[d] - in->rect.lo[d] + 1;
    if (ext > 1 && in->strides[d] != want)
      return 0;
    want *= ext;
  }
  return 1;
}

/* Access i, named `role`: present, of type dt, dense, with at least `need`
 * elements. *ptr gets its element at rect.lo. */
static rp_status get_inst(const rp_task_ctx *ctx, const char *task, uint32_t i,
                          const char *role, rp_dtype dt, int64_t need,
                          void **ptr) {
  const rp_instance_info *in = rp_ctx_inst(ctx, i);
  if (!in)
    return rp__err(RP_ESHAPE, "%s: access %u (%s) missing: %u accesses", task,
                   i, role, rp_ctx_access_count(ctx));
  if (in->dtype != dt)
    return rp__err(RP_ETYPE, "%s: access %u (%s) is %s, needs %s", task, i,
                   role, rp_dtype_name(in->dtype), rp_dtype_name(dt));
  if (!dense(in))
    return rp__err(RP_ESHAPE, "%s: access %u (%s) is not dense row-major", task,
                   i, role);
  int64_t vol = rp_rect_volume(&in->rect);
  if (vol < need)
    return rp__err(RP_ESHAPE,
                   "%s: access %u (%s) has %lld elements, needs %lld", task, i,
                   role, (long long)vol, (long long)need);
  *ptr = in->ptr;
  return RP_OK;
}

/* Elementwise count: n, or the volume of access 0 when n == 0. */
static rp_status elem_count(const rp_task_ctx *ctx, const char *task, int32_t n,
                            int64_t *out) {
  if (n < 0)
    return rp__err(RP_EINVAL, "%s: n = %d", task, (int)n);
  const rp_instance_info *in = rp_ctx_inst(ctx, 0);
  if (n == 0 && !in)
    return rp__err(RP_ESHAPE, "%s: n = 0 needs access 0", task);
  *out = n ? n : rp_rect_volume(&in->rect);
  return RP_OK;
}

static rp_status rows_cols_ok(const char *task, int32_t rows, int32_t cols) {
  if (rows < 0 || cols < 1)
    return rp__err(RP_EINVAL,
                   "%s: rows = %d, cols = %d (need rows >= 0, "
                   "cols >= 1)",
                   task, (int)rows, (int)cols);
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* rp.gemm */

typedef struct gemm_job {
  rp_gemm_args a;
  const float *A, *B;
  float *C;
} gemm_job;

static rp_status gemm_prep(const rp_task_ctx *ctx, gemm_job *j) {
  const char *t = "rp.gemm";
  rp_status st = get_args(ctx, t, "rp_gemm_args", &j->a, sizeof j->a);
  if (st != RP_OK)
    return st;
  const rp_gemm_args *a = &j->a;
  if (a->m < 0 || a->n < 0 || a->k < 0 || (a->trans_a & ~1) ||
      (a->trans_b & ~1))
    return rp__err(
        RP_EINVAL, "%s: m = %d, n = %d, k = %d, trans_a = %d, trans_b = %d", t,
        (int)a->m, (int)a->n, (int)a->k, (int)a->trans_a, (int)a->trans_b);
  void *A = NULL, *B = NULL, *C = NULL;
  st = get_inst(ctx, t, 0, "A", RP_F32, (int64_t)a->m * a->k, &A);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, "B", RP_F32, (int64_t)a->k * a->n, &B);
  if (st == RP_OK)
    st = get_inst(ctx, t, 2, "C", RP_F32, (int64_t)a->m * a->n, &C);
  j->A = A;
  j->B = B;
  j->C = C;
  return st;
}

rp_status rp_task_gemm_cpu(rp_task_ctx *ctx) {
  gemm_job j;
  rp_status st = gemm_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  rp_cpu_gemm(j.a.trans_a, j.a.trans_b, j.a.m, j.a.n, j.a.k, j.a.alpha, j.A,
              j.B, j.a.beta, j.C);
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* rp.bias_add, rp.bias_grad */

typedef struct bias_job {
  rp_rows_cols_args a;
  float *mat, *vec; /* X or dY; bias or db */
} bias_job;

static rp_status bias_prep(const rp_task_ctx *ctx, const char *t, int grad,
                           bias_job *j) {
  rp_status st = get_args(ctx, t, "rp_bias_args", &j->a, sizeof j->a);
  if (st == RP_OK)
    st = rows_cols_ok(t, j->a.rows, j->a.cols);
  if (st != RP_OK)
    return st;
  void *mat = NULL, *vec = NULL;
  st = get_inst(ctx, t, 0, grad ? "dY" : "X", RP_F32,
                (int64_t)j->a.rows * j->a.cols, &mat);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, grad ? "db" : "bias", RP_F32, j->a.cols, &vec);
  j->mat = mat;
  j->vec = vec;
  return st;
}

rp_status rp_task_bias_add_cpu(rp_task_ctx *ctx) {
  bias_job j;
  rp_status st = bias_prep(ctx, "rp.bias_add", 0, &j);
  if (st == RP_OK)
    rp_cpu_bias_add(j.mat, j.vec, (size_t)j.a.rows, (size_t)j.a.cols);
  return st;
}

rp_status rp_task_bias_grad_cpu(rp_task_ctx *ctx) {
  bias_job j;
  rp_status st = bias_prep(ctx, "rp.bias_grad", 1, &j);
  if (st == RP_OK)
    rp_cpu_bias_grad(j.mat, j.vec, (size_t)j.a.rows, (size_t)j.a.cols);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.relu_fwd, rp.relu_bwd */

typedef struct relu_job {
  int64_t n;
  const float *x, *dy; /* dy: backward only */
  float *out;          /* y or dx */
} relu_job;

static rp_status relu_prep(const rp_task_ctx *ctx, const char *t, int bwd,
                           relu_job *j) {
  rp_elementwise_args a = {0};
  rp_status st = get_args(ctx, t, "rp_elementwise_args", &a, sizeof a);
  if (st == RP_OK)
    st = elem_count(ctx, t, a.n, &j->n);
  if (st != RP_OK)
    return st;
  void *x = NULL, *dy = NULL, *out = NULL;
  st = get_inst(ctx, t, 0, "X", RP_F32, j->n, &x);
  if (st == RP_OK && bwd)
    st = get_inst(ctx, t, 1, "dY", RP_F32, j->n, &dy);
  if (st == RP_OK)
    st = get_inst(ctx, t, bwd ? 2 : 1, bwd ? "dX" : "Y", RP_F32, j->n, &out);
  j->x = x;
  j->dy = dy;
  j->out = out;
  return st;
}

rp_status rp_task_relu_fwd_cpu(rp_task_ctx *ctx) {
  relu_job j;
  rp_status st = relu_prep(ctx, "rp.relu_fwd", 0, &j);
  if (st == RP_OK)
    rp_cpu_relu_fwd(j.x, j.out, (size_t)j.n);
  return st;
}

rp_status rp_task_relu_bwd_cpu(rp_task_ctx *ctx) {
  relu_job j;
  rp_status st = relu_prep(ctx, "rp.relu_bwd", 1, &j);
  if (st == RP_OK)
    rp_cpu_relu_bwd(j.x, j.dy, j.out, (size_t)j.n);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.xent_fwd, rp.xent_bwd */

typedef struct xent_job {
  int32_t rows, cols;
  float norm;
  const float *in; /* logits (fwd) or probs (bwd) */
  const int32_t *labels;
  float *out;  /* probs (fwd) or dlogits (bwd) */
  float *loss; /* fwd only */
} xent_job;

/* mode: XENT_FWD, XENT_BWD, or XENT_FUSED (rp.softmax_xent: logits in,
 * dlogits and loss out). */
enum { XENT_FWD = 0, XENT_BWD = 1, XENT_FUSED = 2 };

static rp_status xent_prep(const rp_task_ctx *ctx, const char *t, int mode,
                           xent_job *j) {
  *j = (xent_job){0}; /* every field set on every path, failures included */
  int bwd = mode == XENT_BWD;
  rp_xent_args a = {0};
  rp_status st = get_args(ctx, t, "rp_xent_args", &a, sizeof a);
  if (st == RP_OK)
    st = rows_cols_ok(t, a.rows, a.cols);
  if (st != RP_OK)
    return st;
  /* norm 0: the shard is the whole batch (mean over its own rows). */
  j->norm = a.norm != 0.0f ? a.norm : (a.rows > 0 ? (float)a.rows : 1.0f);
  if (!(j->norm > 0.0f) || j->norm > 3.0e38f) /* also rejects NaN, inf */
    return rp__err(RP_EINVAL, "%s: norm = %g (the global batch size)", t,
                   (double)a.norm);
  j->rows = a.rows;
  j->cols = a.cols;
  int64_t mn = (int64_t)a.rows * a.cols;
  void *in = NULL, *labels = NULL, *out = NULL, *loss = NULL;
  st = get_inst(ctx, t, 0, bwd ? "probs" : "logits", RP_F32, mn, &in);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, "labels", RP_I32, a.rows, &labels);
  if (st == RP_OK)
    st = get_inst(ctx, t, 2, mode != XENT_FWD ? "dlogits" : "probs", RP_F32, mn,
                  &out);
  if (st == RP_OK && !bwd)
    st = get_inst(ctx, t, 3, "loss", RP_F32, 1, &loss);
  j->in = in;
  j->labels = labels;
  j->out = out;
  j->loss = loss;
  return st;
}

/* CPU only (the labels live on the host): RP_ERANGE for the first label
 * outside [0, cols), before anything is written. */
static rp_status labels_ok(const char *t, const xent_job *j) {
  for (int32_t r = 0; r < j->rows; r++)
    if (j->labels[r] < 0 || j->labels[r] >= j->cols)
      return rp__err(RP_ERANGE, "%s: label %d of row %d outside [0, %d)", t,
                     (int)j->labels[r], (int)r, (int)j->cols);
  return RP_OK;
}

rp_status rp_task_xent_fwd_cpu(rp_task_ctx *ctx) {
  const char *t = "rp.xent_fwd";
  xent_job j;
  rp_status st = xent_prep(ctx, t, 0, &j);
  if (st == RP_OK)
    st = labels_ok(t, &j);
  if (st == RP_OK)
    rp_cpu_xent_fwd(j.in, j.labels, j.out, 0, (size_t)j.rows, (size_t)j.cols,
                    j.norm, j.loss);
  return st;
}

rp_status rp_task_xent_bwd_cpu(rp_task_ctx *ctx) {
  const char *t = "rp.xent_bwd";
  xent_job j;
  rp_status st = xent_prep(ctx, t, 1, &j);
  if (st == RP_OK)
    st = labels_ok(t, &j);
  if (st == RP_OK)
    rp_cpu_xent_bwd(j.in, j.labels, j.out, 0, (size_t)j.rows, (size_t)j.cols,
                    j.norm);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.sgd */

typedef struct sgd_job {
  rp_sgd_args a;
  int64_t n;
  float *w, *g, *v;
} sgd_job;

static rp_status sgd_prep(const rp_task_ctx *ctx, sgd_job *j) {
  const char *t = "rp.sgd";
  rp_status st = get_args(ctx, t, "rp_sgd_args", &j->a, sizeof j->a);
  if (st == RP_OK)
    st = elem_count(ctx, t, j->a.n, &j->n);
  if (st != RP_OK)
    return st;
  void *w = NULL, *g = NULL, *v = NULL;
  st = get_inst(ctx, t, 0, "W", RP_F32, j->n, &w);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, "G", RP_F32, j->n, &g);
  if (st == RP_OK)
    st = get_inst(ctx, t, 2, "V", RP_F32, j->n, &v);
  j->w = w;
  j->g = g;
  j->v = v;
  return st;
}

rp_status rp_task_sgd_cpu(rp_task_ctx *ctx) {
  sgd_job j;
  rp_status st = sgd_prep(ctx, &j);
  if (st == RP_OK)
    rp_cpu_sgd_momentum(j.w, j.g, j.v, (size_t)j.n, j.a.lr, j.a.momentum);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.fill, rp.scale, rp.axpy */

typedef struct scalar_job {
  float value;
  int64_t n;
  float *x, *y; /* y: axpy only */
} scalar_job;

static rp_status scalar_prep(const rp_task_ctx *ctx, const char *t, int axpy,
                             scalar_job *j) {
  *j = (scalar_job){0}; /* every field set on every path, failures included */
  rp_scalar_args a = {0};
  rp_status st = get_args(ctx, t, "rp_scalar_args", &a, sizeof a);
  if (st == RP_OK)
    st = elem_count(ctx, t, a.n, &j->n);
  if (st != RP_OK)
    return st;
  j->value = a.value;
  void *x = NULL, *y = NULL;
  st = get_inst(ctx, t, 0, "X", RP_F32, j->n, &x);
  if (st == RP_OK && axpy)
    st = get_inst(ctx, t, 1, "Y", RP_F32, j->n, &y);
  j->x = x;
  j->y = y;
  return st;
}

rp_status rp_task_fill_cpu(rp_task_ctx *ctx) {
  scalar_job j;
  rp_status st = scalar_prep(ctx, "rp.fill", 0, &j);
  if (st == RP_OK)
    rp_cpu_fill(j.x, j.value, (size_t)j.n);
  return st;
}

rp_status rp_task_scale_cpu(rp_task_ctx *ctx) {
  scalar_job j;
  rp_status st = scalar_prep(ctx, "rp.scale", 0, &j);
  if (st == RP_OK)
    rp_cpu_scale(j.x, j.value, (size_t)j.n);
  return st;
}

rp_status rp_task_axpy_cpu(rp_task_ctx *ctx) {
  scalar_job j;
  rp_status st = scalar_prep(ctx, "rp.axpy", 1, &j);
  if (st == RP_OK)
    rp_cpu_axpy(j.value, j.x, j.y, (size_t)j.n);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.accuracy */

typedef struct acc_job {
  rp_rows_cols_args a;
  const float *x;
  const int32_t *labels;
  int32_t *count;
} acc_job;

static rp_status acc_prep(const rp_task_ctx *ctx, acc_job *j) {
  const char *t = "rp.accuracy";
  rp_status st = get_args(ctx, t, "rp_rows_cols_args", &j->a, sizeof j->a);
  if (st == RP_OK)
    st = rows_cols_ok(t, j->a.rows, j->a.cols);
  if (st != RP_OK)
    return st;
  void *x = NULL, *labels = NULL, *count = NULL;
  st = get_inst(ctx, t, 0, "X", RP_F32, (int64_t)j->a.rows * j->a.cols, &x);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, "labels", RP_I32, j->a.rows, &labels);
  if (st == RP_OK)
    st = get_inst(ctx, t, 2, "count", RP_I32, 1, &count);
  j->x = x;
  j->labels = labels;
  j->count = count;
  return st;
}

rp_status rp_task_accuracy_cpu(rp_task_ctx *ctx) {
  acc_job j;
  rp_status st = acc_prep(ctx, &j);
  if (st == RP_OK) /* rows fit int32, so the count does too */
    j.count[0] = (int32_t)rp_cpu_argmax_correct(j.x, j.labels, (size_t)j.a.rows,
                                                (size_t)j.a.cols);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.gather_rows */

typedef struct gather_job {
  const char *src; /* the selected batch */
  char *dst;
  size_t bytes;         /* rows * cols * element size */
  const char *src_base; /* batch 0 (GPU: the kernel selects) */
  int64_t batches;      /* whole batches in src */
  int32_t index;
} gather_job;

/* Access i as a dense instance of at least `need` elements; any type. */
static rp_status get_any(const rp_task_ctx *ctx, const char *t, uint32_t i,
                         const char *role, int64_t need,
                         const rp_instance_info **out) {
  const rp_instance_info *in = rp_ctx_inst(ctx, i);
  if (!in)
    return rp__err(RP_ESHAPE, "%s: access %u (%s) missing: %u accesses", t, i,
                   role, rp_ctx_access_count(ctx));
  if (!dense(in))
    return rp__err(RP_ESHAPE, "%s: access %u (%s) is not dense row-major", t, i,
                   role);
  int64_t vol = rp_rect_volume(&in->rect);
  if (vol < need)
    return rp__err(RP_ERANGE,
                   "%s: access %u (%s) has %lld elements, needs "
                   "%lld",
                   t, i, role, (long long)vol, (long long)need);
  *out = in;
  return RP_OK;
}

static rp_status gather_prep(const rp_task_ctx *ctx, gather_job *j) {
  const char *t = "rp.gather_rows";
  rp_gather_args a;
  rp_status st = get_args(ctx, t, "rp_gather_args", &a, sizeof a);
  if (st == RP_OK && (a.rows < 0 || a.cols < 0))
    st = rp__err(RP_EINVAL, "%s: rows = %d, cols = %d", t, (int)a.rows,
                 (int)a.cols);
  if (st == RP_OK && a.index < 0)
    st = rp__err(RP_ERANGE, "%s: batch index %d is negative", t, (int)a.index);
  if (st != RP_OK)
    return st;
  int64_t n = (int64_t)a.rows * a.cols; /* < 2^62: no overflow below */
  const rp_instance_info *src = NULL, *dst = NULL;
  st = get_any(ctx, t, 1, "dst", n, &dst);
  if (st == RP_OK && (st = get_any(ctx, t, 0, "src", 0, &src)) == RP_OK &&
      (int64_t)a.index + 1 > rp_rect_volume(&src->rect) / (n ? n : 1))
    st = rp__err(RP_ERANGE,
                 "%s: batch index %d selects rows [%lld, %lld) "
                 "beyond the %lld rows of src",
                 t, (int)a.index, (long long)a.index * a.rows,
                 (long long)(a.index + 1) * a.rows,
                 (long long)(a.cols ? rp_rect_volume(&src->rect) / a.cols : 0));
  if (st == RP_OK && src->dtype != dst->dtype)
    st = rp__err(RP_ETYPE, "%s: src is %s, dst is %s", t,
                 rp_dtype_name(src->dtype), rp_dtype_name(dst->dtype));
  if (st != RP_OK)
    return st;
  size_t esz = rp_dtype_size(src->dtype);
  j->bytes = (size_t)n * esz;
  j->src_base = src->ptr;
  j->src = (const char *)src->ptr + (size_t)a.index * j->bytes;
  j->dst = dst->ptr;
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

/* ---------------------------------------------------------------------- */
/* rp.bias_act */

typedef struct bias_act_job {
  rp_bias_act_args a;
  float *z, *a_out; /* a_out: NULL without activation */
  const float *bias;
} bias_act_job;

static rp_status bias_act_prep(const rp_task_ctx *ctx, bias_act_job *j) {
  const char *t = "rp.bias_act";
  rp_status st = get_args(ctx, t, "rp_bias_act_args", &j->a, sizeof j->a);
  if (st == RP_OK)
    st = rows_cols_ok(t, j->a.rows, j->a.cols);
  if (st == RP_OK && j->a.act != RP_ACT_NONE && j->a.act != RP_ACT_RELU)
    st = rp__err(RP_EINVAL, "%s: act = %d (need %d none or %d relu)", t,
                 (int)j->a.act, RP_ACT_NONE, RP_ACT_RELU);
  if (st != RP_OK)
    return st;
  int64_t mn = (int64_t)j->a.rows * j->a.cols;
  void *z = NULL, *bias = NULL, *a = NULL;
  st = get_inst(ctx, t, 0, "Z", RP_F32, mn, &z);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, "bias", RP_F32, j->a.cols, &bias);
  if (st == RP_OK && j->a.act == RP_ACT_RELU)
    st = get_inst(ctx, t, 2, "A", RP_F32, mn, &a);
  if (st == RP_OK && a && a == z && mn > 0)
    st = rp__err(RP_EINVAL, "%s: access 2 (A) is access 0's (Z) memory", t);
  j->z = z;
  j->bias = bias;
  j->a_out = a;
  return st;
}

rp_status rp_task_bias_act_cpu(rp_task_ctx *ctx) {
  bias_act_job j;
  rp_status st = bias_act_prep(ctx, &j);
  if (st == RP_OK)
    rp_cpu_bias_act(j.z, j.bias, j.a_out, (size_t)j.a.rows, (size_t)j.a.cols);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.softmax_xent: xent_prep's checks (probs are dlogits here) plus the
 * optional db */

static rp_status softmax_xent_prep(const rp_task_ctx *ctx, xent_job *j,
                                   float **db) {
  const char *t = "rp.softmax_xent";
  rp_status st = xent_prep(ctx, t, XENT_FUSED, j);
  void *d = NULL;
  if (st == RP_OK && rp_ctx_access_count(ctx) > 4)
    st = get_inst(ctx, t, 4, "db", RP_F32, j->cols, &d);
  *db = d;
  return st;
}

rp_status rp_task_softmax_xent_cpu(rp_task_ctx *ctx) {
  const char *t = "rp.softmax_xent";
  xent_job j;
  float *db = NULL;
  rp_status st = softmax_xent_prep(ctx, &j, &db);
  if (st == RP_OK)
    st = labels_ok(t, &j);
  if (st == RP_OK)
    rp_cpu_softmax_xent(j.in, j.labels, j.out, db, (size_t)j.rows,
                        (size_t)j.cols, j.norm, j.loss);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.relu_bwd_bias */

typedef struct relu_bias_job {
  rp_rows_cols_args a;
  const float *act, *da;
  float *dz, *db;
} relu_bias_job;

static rp_status relu_bias_prep(const rp_task_ctx *ctx, relu_bias_job *j) {
  const char *t = "rp.relu_bwd_bias";
  rp_status st = get_args(ctx, t, "rp_rows_cols_args", &j->a, sizeof j->a);
  if (st == RP_OK)
    st = rows_cols_ok(t, j->a.rows, j->a.cols);
  if (st != RP_OK)
    return st;
  int64_t mn = (int64_t)j->a.rows * j->a.cols;
  void *act = NULL, *da = NULL, *dz = NULL, *db = NULL;
  st = get_inst(ctx, t, 0, "A", RP_F32, mn, &act);
  if (st == RP_OK)
    st = get_inst(ctx, t, 1, "dA", RP_F32, mn, &da);
  if (st == RP_OK)
    st = get_inst(ctx, t, 2, "dZ", RP_F32, mn, &dz);
  if (st == RP_OK)
    st = get_inst(ctx, t, 3, "db", RP_F32, j->a.cols, &db);
  j->act = act;
  j->da = da;
  j->dz = dz;
  j->db = db;
  return st;
}

rp_status rp_task_relu_bwd_bias_cpu(rp_task_ctx *ctx) {
  relu_bias_job j;
  rp_status st = relu_bias_prep(ctx, &j);
  if (st == RP_OK)
    rp_cpu_relu_bwd_bias_grad(j.act, j.da, j.dz, j.db, (size_t)j.a.rows,
                              (size_t)j.a.cols);
  return st;
}

/* ---------------------------------------------------------------------- */
/* rp.sgd_multi */

typedef struct sgd_multi_job {
  rp_sgd_multi_args a;
  float *w[RP_SGD_MULTI_MAX], *v[RP_SGD_MULTI_MAX];
  const float *g[RP_SGD_MULTI_MAX];
  size_t n[RP_SGD_MULTI_MAX];
} sgd_multi_job;

/* Tensor i: W_i's volume, and G_i, V_i holding at least as much. */
static rp_status sgd_tensor(const rp_task_ctx *ctx, const char *t, uint32_t i,
                            sgd_multi_job *j) {
  const rp_instance_info *w = rp_ctx_inst(ctx, 3 * i);
  int64_t n = w ? rp_rect_volume(&w->rect) : 0;
  void *pw = NULL, *pg = NULL, *pv = NULL;
  rp_status st = get_inst(ctx, t, 3 * i, "W", RP_F32, n, &pw);
  if (st == RP_OK)
    st = get_inst(ctx, t, 3 * i + 1, "G", RP_F32, n, &pg);
  if (st == RP_OK)
    st = get_inst(ctx, t, 3 * i + 2, "V", RP_F32, n, &pv);
  j->w[i] = pw;
  j->g[i] = pg;
  j->v[i] = pv;
  j->n[i] = (size_t)n;
  return st;
}

static rp_status sgd_multi_prep(const rp_task_ctx *ctx, sgd_multi_job *j) {
  const char *t = "rp.sgd_multi";
  rp_status st = get_args(ctx, t, "rp_sgd_multi_args", &j->a, sizeof j->a);
  if (st != RP_OK)
    return st;
  if (j->a.count < 1 || j->a.count > RP_SGD_MULTI_MAX)
    return rp__err(RP_EINVAL, "%s: count = %d (need 1..%d)", t, (int)j->a.count,
                   RP_SGD_MULTI_MAX);
  uint32_t want = 3u * (uint32_t)j->a.count;
  if (rp_ctx_access_count(ctx) < want)
    return rp__err(RP_ESHAPE, "%s: %u accesses for %d tensors (need %u)", t,
                   rp_ctx_access_count(ctx), (int)j->a.count, want);
  for (uint32_t i = 0; st == RP_OK && i < (uint32_t)j->a.count; i++)
    st = sgd_tensor(ctx, t, i, j);
  return st;
}

rp_status rp_task_sgd_multi_cpu(rp_task_ctx *ctx) {
  sgd_multi_job j;
  rp_status st = sgd_multi_prep(ctx, &j);
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
  gemm_job j;
  rp_status st = gemm_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_gemm(j.a.trans_a, j.a.trans_b, j.a.m, j.a.n, j.a.k, j.a.alpha,
                      j.A, j.B, j.a.beta, j.C, rp_ctx_stream(ctx));
}

rp_status rp_task_bias_add_gpu(rp_task_ctx *ctx) {
  bias_job j;
  rp_status st = bias_prep(ctx, "rp.bias_add", 0, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_bias_add(j.mat, j.vec, (size_t)j.a.rows, (size_t)j.a.cols,
                          rp_ctx_stream(ctx));
}

rp_status rp_task_bias_grad_gpu(rp_task_ctx *ctx) {
  bias_job j;
  rp_status st = bias_prep(ctx, "rp.bias_grad", 1, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_bias_grad(j.mat, j.vec, (size_t)j.a.rows, (size_t)j.a.cols,
                           rp_ctx_stream(ctx));
}

rp_status rp_task_relu_fwd_gpu(rp_task_ctx *ctx) {
  relu_job j;
  rp_status st = relu_prep(ctx, "rp.relu_fwd", 0, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_relu_fwd(j.x, j.out, (size_t)j.n, rp_ctx_stream(ctx));
}

rp_status rp_task_relu_bwd_gpu(rp_task_ctx *ctx) {
  relu_job j;
  rp_status st = relu_prep(ctx, "rp.relu_bwd", 1, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_relu_bwd(j.x, j.dy, j.out, (size_t)j.n, rp_ctx_stream(ctx));
}

rp_status rp_task_xent_fwd_gpu(rp_task_ctx *ctx) {
  xent_job j;
  rp_status st = xent_prep(ctx, "rp.xent_fwd", 0, &j);
  if (st != RP_OK)
    return st;
  /* Row losses go to the workspace when the launch declared enough of it;
   * otherwise the one-block kernel needs none. */
  size_t ws_bytes = 0;
  void *ws = rp_ctx_workspace(ctx, &ws_bytes);
  float *row_loss =
      ws && ws_bytes >= (size_t)j.rows * sizeof(float) ? ws : NULL;
  return rp_cuda_xent_fwd(j.in, j.labels, j.out, row_loss, j.loss,
                          (size_t)j.rows, (size_t)j.cols, j.norm,
                          rp_ctx_stream(ctx));
}

rp_status rp_task_xent_bwd_gpu(rp_task_ctx *ctx) {
  xent_job j;
  rp_status st = xent_prep(ctx, "rp.xent_bwd", 1, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_xent_bwd(j.in, j.labels, j.out, (size_t)j.rows, (size_t)j.cols,
                          j.norm, rp_ctx_stream(ctx));
}

rp_status rp_task_sgd_gpu(rp_task_ctx *ctx) {
  sgd_job j;
  rp_status st = sgd_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  /* Inside an exec the learning rate is read on the device from this
   * op's bytes in the parameter buffer (lr sits at offset 0), so a
   * per-replay lr reaches the captured graph; eager launches pass it by
   * value (no buffer). See tasks.h. */
  const float *lr_dev = rp_ctx_device_args(ctx);
  return rp_cuda_sgd_momentum(j.w, j.g, j.v, (size_t)j.n, j.a.lr, j.a.momentum,
                              lr_dev, rp_ctx_stream(ctx));
}

rp_status rp_task_fill_gpu(rp_task_ctx *ctx) {
  scalar_job j;
  rp_status st = scalar_prep(ctx, "rp.fill", 0, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_fill(j.x, j.value, (size_t)j.n, rp_ctx_stream(ctx));
}

rp_status rp_task_scale_gpu(rp_task_ctx *ctx) {
  scalar_job j;
  rp_status st = scalar_prep(ctx, "rp.scale", 0, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_scale(j.x, j.value, (size_t)j.n, rp_ctx_stream(ctx));
}

rp_status rp_task_axpy_gpu(rp_task_ctx *ctx) {
  scalar_job j;
  rp_status st = scalar_prep(ctx, "rp.axpy", 1, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_axpy(j.value, j.x, j.y, (size_t)j.n, rp_ctx_stream(ctx));
}

rp_status rp_task_accuracy_gpu(rp_task_ctx *ctx) {
  acc_job j;
  rp_status st = acc_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_argmax_correct(j.x, j.labels, j.count, (size_t)j.a.rows,
                                (size_t)j.a.cols, rp_ctx_stream(ctx));
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
  bias_act_job j;
  rp_status st = bias_act_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_bias_act(j.z, j.bias, j.a_out, (size_t)j.a.rows,
                          (size_t)j.a.cols, rp_ctx_stream(ctx));
}

rp_status rp_task_softmax_xent_gpu(rp_task_ctx *ctx) {
  xent_job j;
  float *db = NULL;
  rp_status st = softmax_xent_prep(ctx, &j, &db);
  if (st != RP_OK)
    return st;
  return rp_cuda_softmax_xent(j.in, j.labels, j.out, db, j.loss, (size_t)j.rows,
                              (size_t)j.cols, j.norm, rp_ctx_stream(ctx));
}

rp_status rp_task_relu_bwd_bias_gpu(rp_task_ctx *ctx) {
  relu_bias_job j;
  rp_status st = relu_bias_prep(ctx, &j);
  if (st != RP_OK)
    return st;
  return rp_cuda_relu_bwd_bias_grad(j.act, j.da, j.dz, j.db, (size_t)j.a.rows,
                                    (size_t)j.a.cols, rp_ctx_stream(ctx));
}

rp_status rp_task_sgd_multi_gpu(rp_task_ctx *ctx) {
  sgd_multi_job j;
  rp_status st = sgd_multi_prep(ctx, &j);
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

typedef struct task_entry {
  const char *name;
  rp_task_fn cpu_fn, gpu_fn;
  size_t field;        /* offset of the id in rp_kernel_tasks */
  unsigned flags;      /* beyond RP_TASK_STREAM_ORDERED */
  rp_task_fn check_fn; /* rp_task_desc.check_fn, or NULL */
} task_entry;

#define TASK(nm, fn, field_)                                                   \
  {                                                                            \
    "rp." nm, rp_task_##fn##_cpu, GPU_FN(rp_task_##fn##_gpu),                  \
        offsetof(rp_kernel_tasks, field_), 0, NULL                             \
  }

#define GPT(nm, flags_, check_)                                                \
  {                                                                            \
    "gpt." #nm, rp_task_gpt_##nm##_cpu, GPU_FN(rp_task_gpt_##nm##_gpu),        \
        offsetof(rp_kernel_tasks, nm), flags_, check_                          \
  }

static const task_entry TASKS[] = {
    TASK("gemm", gemm, gemm),
    TASK("bias_add", bias_add, bias_add),
    TASK("bias_grad", bias_grad, bias_grad),
    TASK("relu_fwd", relu_fwd, relu_fwd),
    TASK("relu_bwd", relu_bwd, relu_bwd),
    TASK("xent_fwd", xent_fwd, xent_fwd),
    TASK("xent_bwd", xent_bwd, xent_bwd),
    /* its GPU variant reads lr from rp_ctx_device_args (tasks.h) */
    {"rp.sgd", rp_task_sgd_cpu, GPU_FN(rp_task_sgd_gpu),
     offsetof(rp_kernel_tasks, sgd), RP_TASK_DEVICE_ARGS, NULL},
    TASK("fill", fill, fill),
    TASK("scale", scale, scale),
    TASK("axpy", axpy, axpy),
    TASK("accuracy", accuracy, accuracy),
    /* its GPU variant reads the batch index from rp_ctx_device_args; a
     * replay checks an interpolated index on the host first (check_fn) */
    {"rp.gather_rows", rp_task_gather_rows_cpu, GPU_FN(rp_task_gather_rows_gpu),
     offsetof(rp_kernel_tasks, gather_rows), RP_TASK_DEVICE_ARGS,
     rp_task_gather_rows_check},
    /* the fused tasks of the MLP step */
    TASK("bias_act", bias_act, bias_act),
    TASK("softmax_xent", softmax_xent, softmax_xent),
    TASK("relu_bwd_bias", relu_bwd_bias, relu_bwd_bias),
    {"rp.sgd_multi", rp_task_sgd_multi_cpu, GPU_FN(rp_task_sgd_multi_gpu),
     offsetof(rp_kernel_tasks, sgd_multi), RP_TASK_DEVICE_ARGS, NULL},
    /* the transformer (kernels/gpt_tasks.c) */
    GPT(embed_fwd, 0, NULL),
    GPT(embed_bwd, 0, NULL),
    /* pos and token are read on the device; check_fn: their ranges */
    GPT(embed_token, RP_TASK_DEVICE_ARGS, rp_task_gpt_embed_token_check),
    GPT(layernorm_fwd, 0, NULL),
    GPT(residual_layernorm_fwd, 0, NULL),
    GPT(layernorm_bwd, 0, NULL),
    GPT(matmul_fwd, 0, NULL),
    GPT(matmul_bwd, 0, NULL),
    GPT(bias_gelu_fwd, 0, NULL),
    GPT(gelu_bwd, 0, NULL),
    GPT(attention_fwd, 0, NULL),
    GPT(attention_bwd, 0, NULL),
    GPT(attention_decode, RP_TASK_DEVICE_ARGS,
        rp_task_gpt_attention_decode_check),
    GPT(xent, 0, NULL),
    /* lr and step are read on the device; check_fn: step >= 1 etc. */
    GPT(adamw, RP_TASK_DEVICE_ARGS, rp_task_gpt_adamw_check),
};

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
  return st == RP_OK ? RP_OK : rp__err_prefix(st, "rp_kernels_register: ");
}
#endif

rp_status rp_kernels_register(rp_runtime *rt, rp_kernel_tasks *out) {
  if (!rt || !out)
    return rp__err(RP_EINVAL, "rp_kernels_register: NULL argument");
  /* All-or-nothing for the expected failure: check names first. */
  for (size_t i = 0; i < RP_ARRAY_LEN(TASKS); i++) {
    rp_task_id id;
    if (rp_task_find(rt, TASKS[i].name, &id) == RP_OK)
      return rp__err(RP_EEXIST,
                     "rp_kernels_register: task '%s' already registered",
                     TASKS[i].name);
  }
#ifdef REPRISE_HAVE_CUDA
  rp_status bst = blas_setup(rt);
  if (bst != RP_OK)
    return bst;
#endif
  rp_kernel_tasks ids;
  for (size_t i = 0; i < RP_ARRAY_LEN(TASKS); i++) {
    rp_task_desc d = {.name = TASKS[i].name,
                      .cpu_fn = TASKS[i].cpu_fn,
                      .gpu_fn = TASKS[i].gpu_fn,
                      .flags = RP_TASK_STREAM_ORDERED | TASKS[i].flags,
                      .cost_ns = 0,
                      .check_fn = TASKS[i].check_fn};
    rp_task_id id;
    rp_status st = rp_task_register(rt, &d, &id);
    if (st != RP_OK) /* out of memory: earlier ones stay registered */
      return rp__err_prefix(st, "rp_kernels_register: ");
    memcpy((char *)&ids + TASKS[i].field, &id, sizeof id);
  }
  *out = ids;
  return RP_OK;
}
