/* kernels/tasks.h — the training-step kernels as reprise tasks.
 *
 * rp_kernels_register() registers the tasks below, and the transformer's
 * "gpt.*" tasks (kernels/gpt_kernels.h), on a runtime. Each has a
 * CPU variant (kernels/cpu_kernels.h) and, in CUDA builds, a GPU variant
 * (kernels/cuda_kernels.cuh); all are RP_TASK_STREAM_ORDERED: the GPU variant
 * only enqueues work on rp_ctx_stream(ctx), and the CPU variant ignores the
 * stream and runs on its worker (which is its "device").
 *
 * Every task reads a small args struct (below) from rp_ctx_args() and its
 * instances from rp_ctx_ptr(ctx, i) in the documented access order. All data
 * is dense row-major (last dimension fastest); an instance may have any
 * rectangle (dimension and origin) as long as its layout is dense and it
 * holds at least the elements the args ask for: the task uses the first
 * ones. f32 data must be RP_F32 instances, labels and counts RP_I32.
 * A task returns
 *   RP_EINVAL  args missing or too short, or a negative size / bad norm,
 *              or an access the task writes sharing memory with another
 *              access (except the in-place cases named below);
 *   RP_ESHAPE  too few or too many accesses, an instance too small or not
 *              dense;
 *   RP_ETYPE   an instance of the wrong element type;
 *   RP_ERANGE  (CPU xent) a label outside [0, cols);
 *   RP_EBACKEND a CUDA or cuBLAS call failed;
 * with rp_error_detail() naming the task, the access and the sizes. It
 * checks before it touches any data, so a rejected task changed nothing.
 * The checks are data: each task is one op descriptor (kernels/op_table.h:
 * its args struct, the ranges of its fields, its accesses with element
 * type, privilege and count rule) run by one generic check, rp_op_prep.
 * The privileges below ("WRITE, or RW when beta != 0") are checked at every
 * launch, before anything runs or is recorded: each access is declared
 * with its privilege under the launch's args, or RP_RW (a field an
 * rp_interp writes counts as set), else the launch is refused with
 * RP_EINVAL naming the task, the access and both privileges (reprise.h,
 * rp_access). The task's own check runs at every launch too (after the
 * privileges; rp_op_check_launch): a launch it would refuse is refused
 * by the call with the errors above, nothing run or recorded, except
 * what an rp_interp of the launch may change (those checks run in every
 * replay: kernels/op_table.h).
 *
 * Per-replay values (learning rate, batch size) are interpolated into the
 * args bytes by offset (rp_interp.dst_offset): the offsets below are fixed
 * and checked by static asserts. Under CUDA graphs a GPU task is captured
 * once and passes its args to the kernel by value; only bytes the kernel
 * reads through rp_ctx_device_args() change per replay. rp.sgd does so for
 * lr (registered with RP_TASK_DEVICE_ARGS): lr may be interpolated inside a
 * graph; its momentum and n may not (they keep their recorded values; use
 * rp_exec_update_args to change them); rp.sgd_multi likewise, and
 * rp.gather_rows reads its batch index that way. Every other task reads
 * its args at issue: an interpolated one is issued op by op at every
 * replay instead of from a graph (correct, slower).
 */
#ifndef RP_KERNELS_TASKS_H
#define RP_KERNELS_TASKS_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

/* "rp.gemm": C = alpha * op(A) * op(B) + beta * C (see rp_cpu_gemm).
 * Accesses: 0 A (READ, m*k), 1 B (READ, k*n), 2 C (WRITE, or RW when
 * beta != 0; m*n). trans_a/trans_b: 0 or 1. */
typedef struct rp_gemm_args {
  int32_t m, n, k;          /* offsets 0, 4, 8 */
  int32_t trans_a, trans_b; /* offsets 12, 16 */
  float alpha, beta;        /* offsets 20, 24 */
} rp_gemm_args;

/* "rp.bias_add": X[r, c] += bias[c].
 * Accesses: 0 X (RW, rows*cols), 1 bias (READ, cols).
 * "rp.bias_grad": db[c] = sum_r dY[r, c].
 * Accesses: 0 dY (READ, rows*cols), 1 db (WRITE, cols). */
typedef struct rp_rows_cols_args {
  int32_t rows, cols; /* offsets 0, 4 */
} rp_rows_cols_args;
typedef rp_rows_cols_args rp_bias_args;

/* Elementwise tasks over n elements. n == 0 means "the whole instance of
 * access 0" (its rectangle volume).
 * "rp.relu_fwd": accesses 0 X (READ), 1 Y (WRITE); Y may be X's instance.
 * "rp.relu_bwd": accesses 0 X (READ: forward input or output), 1 dY (READ),
 *                2 dX (WRITE). */
typedef struct rp_elementwise_args {
  int32_t n; /* offset 0 */
} rp_elementwise_args;

/* "rp.xent_fwd": softmax cross-entropy forward over a [rows x cols] shard.
 * Accesses: 0 logits (READ, rows*cols), 1 labels (READ, I32, rows),
 *           2 probs (WRITE, rows*cols), 3 loss (WRITE, >= 1 element):
 *           loss[0] = sum over the shard's rows of -log p[label] / norm.
 * norm: the global batch size (0 means rows), so that the per-shard losses
 * of a data-parallel step sum (a SUM reduction copy) to the batch mean.
 * GPU variant: give the launch a workspace of rows * 4 bytes to reduce the
 * loss with many blocks (row losses go there); without one a single block
 * does the whole shard (correct and deterministic, slower for big shards).
 * A label outside [0, cols): CPU returns RP_ERANGE; GPU makes the loss NaN.
 * "rp.xent_bwd": dlogits = (probs - onehot(labels)) / norm.
 * Accesses: 0 probs (READ, rows*cols), 1 labels (READ, I32, rows),
 *           2 dlogits (WRITE, rows*cols; may be probs' instance).
 * A bad label: CPU RP_ERANGE; GPU writes NaN into that row. */
typedef struct rp_xent_args {
  int32_t rows, cols; /* offsets 0, 4 */
  float norm;         /* offset 8 */
} rp_xent_args;

/* "rp.sgd": v = momentum * v + g; w -= lr * v, over n elements (0: whole
 * instance of access 0). lr sits at offset 0 for per-replay interpolation.
 * lr and momentum must be finite and >= 0 (RP_EINVAL; checked on the host
 * for every replay by rp_task_sgd_check, the task's check_fn, since the
 * GPU variant reads lr on the device).
 * Accesses: 0 W (RW), 1 G (READ), 2 V (RW, the momentum buffer). */
typedef struct rp_sgd_args {
  float lr;       /* offset 0 */
  float momentum; /* offset 4 */
  int32_t n;      /* offset 8 */
} rp_sgd_args;

/* "rp.fill":  X = value            accesses: 0 X (WRITE).
 * "rp.scale": X *= value           accesses: 0 X (RW).
 * "rp.axpy":  Y += value * X       accesses: 0 X (READ), 1 Y (RW; may be
 *                                  X's instance).
 * n == 0: the whole instance of access 0. */
typedef struct rp_scalar_args {
  float value; /* offset 0 */
  int32_t n;   /* offset 4 */
} rp_scalar_args;

/* "rp.axpby": Y = a * X + b * Y over n elements (n == 0: the whole
 * instance of access 0), each element (a * x) + (b * y) in f32 without
 * contraction on both backends. An exponential moving average of weights
 * is a = 1 - decay, b = decay.
 * Accesses: 0 X (READ), 1 Y (RW; may be X's instance). */
typedef struct rp_axpby_args {
  float a, b; /* offsets 0, 4 */
  int32_t n;  /* offset 8 */
} rp_axpby_args;

/* "rp.accuracy": count[0] = number of rows whose argmax (first maximum)
 * equals the label; args are rp_rows_cols_args.
 * Accesses: 0 X (READ, rows*cols: logits or probs), 1 labels (READ, I32,
 *           rows), 2 count (WRITE, I32, >= 1 element). */

/* "rp.gather_rows": selects one batch of a data set:
 *   dst rows [0, rows) = src rows [index * rows, (index + 1) * rows)
 * for rows of `cols` elements. The index sits at offset 0 so that a
 * recorded step reads the next batch's index from the replay arguments.
 * Accesses: 0 src (READ), 1 dst (WRITE, >= rows*cols elements, sharing no
 * byte with src: RP_EINVAL); both dense, of the same element type (any
 * type). RP_ERANGE when index < 0 or the
 * selected rows reach past src (checked on instance metadata, so the GPU
 * variant checks it too). The GPU variant enqueues one small copy kernel
 * that reads the index on the device (RP_TASK_DEVICE_ARGS): from
 * rp_ctx_device_args inside an exec, so an interpolated index stays
 * inside the CUDA graph, else (eager) the by-value index. The kernel
 * bounds-checks the index itself and copies nothing when it is out of
 * range; the task's check_fn (rp_task_gather_rows_check) lets a replay
 * reject such an index on the host first, with RP_ERANGE and a detail. */
typedef struct rp_gather_args {
  int32_t index;      /* offset 0 */
  int32_t rows, cols; /* offsets 4, 8 */
} rp_gather_args;

/* ---- Fused tasks: what the MLP step launches (fewer, larger ops; fewer
 * CUDA graph nodes). Each CPU variant gives bitwise the results of the
 * unfused task sequence named; each GPU variant agrees with its CPU
 * variant within the tolerances of cuda_kernels.cuh (elementwise parts
 * equal; column sums and softmax within a relative 1e-4). ---- */

/* "rp.bias_act": Z[r, c] += bias[c]; with act = RP_ACT_RELU also
 * A = relu(Z) (rp.bias_add then rp.relu_fwd, in one kernel).
 * Accesses: 0 Z (RW, rows*cols), 1 bias (READ, cols),
 *           2 A (WRITE, rows*cols; act RP_ACT_RELU only, not Z's instance).
 * RP_EINVAL for an act other than these two. */
enum rp_act { RP_ACT_NONE = 0, RP_ACT_RELU = 1 };
typedef struct rp_bias_act_args {
  int32_t rows, cols; /* offsets 0, 4 */
  int32_t act;        /* offset 8: enum rp_act */
} rp_bias_act_args;

/* "rp.softmax_xent": rp.xent_fwd, rp.xent_bwd and (optionally) the bias
 * gradient of the layer that produced the logits, in one task; args are
 * rp_xent_args (norm as for rp.xent_fwd). No probs instance: they only
 * live in dlogits until the backward formula overwrites them.
 * Accesses: 0 logits (READ, rows*cols), 1 labels (READ, I32, rows),
 *           2 dlogits (WRITE, rows*cols), 3 loss (WRITE, >= 1 element),
 *           4 db (WRITE, cols; optional: db = column sums of dlogits).
 * A bad label: CPU RP_ERANGE before writing; GPU makes the loss and that
 * row (and so db) NaN. The GPU variant runs one block (1024 threads):
 * right for the MLP's shards (hundreds of rows); a shard of many thousands
 * of rows is better served by rp.xent_fwd with a workspace. */

/* "rp.relu_bwd_bias": dZ = dA * (A > 0), db[c] = sum_r dZ[r, c]
 * (rp.relu_bwd then rp.bias_grad); args are rp_rows_cols_args.
 * Accesses: 0 A (READ, rows*cols: the forward output or input),
 *           1 dA (READ, rows*cols), 2 dZ (WRITE, rows*cols; may be dA's
 *           instance), 3 db (WRITE, cols). */

/* "rp.sgd_multi": rp.sgd over `count` tensors in one launch (one kernel on
 * the GPU): for each i, v_i = momentum * v_i + g_i; w_i -= lr * v_i over
 * the whole instance of W_i (G_i and V_i hold at least as many elements).
 * Accesses: 3 * count, tensor i at 3i: W_i (RW), 3i+1: G_i (READ),
 *           3i+2: V_i (RW).
 * lr sits at offset 0 for per-replay interpolation and, as for rp.sgd, the
 * GPU variant reads it through rp_ctx_device_args (RP_TASK_DEVICE_ARGS):
 * an interpolated lr stays inside the CUDA graph; momentum and count keep
 * their recorded values. RP_EINVAL for count outside
 * 1..RP_SGD_MULTI_MAX or lr or momentum not finite and >= 0 (checked per
 * replay by rp_task_sgd_multi_check, its check_fn); RP_ESHAPE for fewer
 * than 3 * count accesses. */
#define RP_SGD_MULTI_MAX 32
typedef struct rp_sgd_multi_args {
  float lr;       /* offset 0 */
  float momentum; /* offset 4 */
  int32_t count;  /* offset 8: tensors */
} rp_sgd_multi_args;

/* The kernel tasks, one line each, in registration order:
 *   X(id, body, flags, check_fn)
 * id: the task's member of rp_kernel_tasks. body: the stem of its
 * descriptor rp_task_BODY_op (kernels/op_table.h, whose name is the one
 * registered and starts every error detail) and of its bodies
 * rp_task_BODY_cpu and, in CUDA builds, rp_task_BODY_gpu. flags: beyond
 * RP_TASK_STREAM_ORDERED; RP_TASK_DEVICE_ARGS where the GPU body reads
 * per-replay bytes on the device (rp_ctx_device_args), with a check_fn
 * (rp_task_desc.check_fn) that checks them on the host before each
 * replay; else 0 and NULL. rp_kernel_tasks, the bodies' prototypes, the
 * descriptors' declarations and rp_kernels_register's table are made
 * from this list. */
#define RP_KERNEL_TASKS(X)                                                     \
  X(gemm, gemm, 0, NULL)                                                       \
  X(bias_add, bias_add, 0, NULL)                                               \
  X(bias_grad, bias_grad, 0, NULL)                                             \
  X(relu_fwd, relu_fwd, 0, NULL)                                               \
  X(relu_bwd, relu_bwd, 0, NULL)                                               \
  X(xent_fwd, xent_fwd, 0, NULL)                                               \
  X(xent_bwd, xent_bwd, 0, NULL)                                               \
  X(sgd, sgd, RP_TASK_DEVICE_ARGS, rp_task_sgd_check) /* lr */                 \
  X(fill, fill, 0, NULL)                                                       \
  X(scale, scale, 0, NULL)                                                     \
  X(axpy, axpy, 0, NULL)                                                       \
  X(axpby, axpby, 0, NULL)                                                     \
  X(accuracy, accuracy, 0, NULL)                                               \
  X(gather_rows, gather_rows, RP_TASK_DEVICE_ARGS, rp_task_gather_rows_check)  \
  /* the fused tasks of the MLP step */                                        \
  X(bias_act, bias_act, 0, NULL)                                               \
  X(softmax_xent, softmax_xent, 0, NULL)                                       \
  X(relu_bwd_bias, relu_bwd_bias, 0, NULL)                                     \
  X(sgd_multi, sgd_multi, RP_TASK_DEVICE_ARGS, rp_task_sgd_multi_check)        \
  /* the transformer's tasks, "gpt.*" (gpt_kernels.h, gpt_tasks.c) */          \
  X(embed_fwd, gpt_embed_fwd, 0, NULL)                                         \
  X(embed_bwd, gpt_embed_bwd, 0, NULL)                                         \
  X(embed_token, gpt_embed_token, RP_TASK_DEVICE_ARGS,                         \
    rp_task_gpt_embed_token_check) /* pos, token */                            \
  X(layernorm_fwd, gpt_layernorm_fwd, 0, NULL)                                 \
  X(residual_layernorm_fwd, gpt_residual_layernorm_fwd, 0, NULL)               \
  X(layernorm_bwd, gpt_layernorm_bwd, 0, NULL)                                 \
  X(matmul_fwd, gpt_matmul_fwd, 0, NULL)                                       \
  X(matmul_bwd, gpt_matmul_bwd, 0, NULL)                                       \
  X(bias_gelu_fwd, gpt_bias_gelu_fwd, 0, NULL)                                 \
  X(gelu_bwd, gpt_gelu_bwd, 0, NULL)                                           \
  X(attention_fwd, gpt_attention_fwd, 0, NULL)                                 \
  X(attention_bwd, gpt_attention_bwd, 0, NULL)                                 \
  X(attention_decode, gpt_attention_decode, RP_TASK_DEVICE_ARGS,               \
    rp_task_gpt_attention_decode_check) /* pos */                              \
  X(xent, gpt_xent, 0, NULL)                                                   \
  X(adamw, gpt_adamw, RP_TASK_DEVICE_ARGS,                                     \
    rp_task_gpt_adamw_check) /* lr, step */                                    \
  X(sumsq, gpt_sumsq, 0, NULL)

/* The registered task ids, one member per line of RP_KERNEL_TASKS. */
#define RP_KT_ID_(id, body, flags, check_fn) rp_task_id id;
typedef struct rp_kernel_tasks {
  RP_KERNEL_TASKS(RP_KT_ID_)
} rp_kernel_tasks;
#undef RP_KT_ID_

/* Registers every task above on rt and fills *out. Call once per runtime:
 * if any of the names is already registered, returns RP_EEXIST and
 * registers nothing. On a CUDA runtime it also creates the cuBLAS handle and
 * workspace of each device the runtime's GPUs use, so that no GEMM allocates
 * during stream capture (RP_EBACKEND if that fails; nothing registered). */
rp_status rp_kernels_register(rp_runtime *rt, rp_kernel_tasks *out);

/* The task functions, for tests and for callers that build their own
 * registrations: rp_task_BODY_cpu and, in CUDA builds only,
 * rp_task_BODY_gpu for every line of RP_KERNEL_TASKS. */
#define RP_KT_CPU_(id, body, flags, check_fn)                                  \
  rp_status rp_task_##body##_cpu(rp_task_ctx *ctx);
RP_KERNEL_TASKS(RP_KT_CPU_)
#undef RP_KT_CPU_
#ifdef REPRISE_HAVE_CUDA
#define RP_KT_GPU_(id, body, flags, check_fn)                                  \
  rp_status rp_task_##body##_gpu(rp_task_ctx *ctx);
RP_KERNEL_TASKS(RP_KT_GPU_)
#undef RP_KT_GPU_
#endif
/* rp.gather_rows's check_fn (rp_task_desc.check_fn): the variants' checks
 * of the args (the batch index, after interpolation) against the
 * instances' shapes, touching no data. RP_OK or the variants' error. */
rp_status rp_task_gather_rows_check(rp_task_ctx *ctx);
/* rp.sgd's and rp.sgd_multi's check_fns: the args (lr after
 * interpolation, momentum) and the accesses' shapes, touching no data. */
rp_status rp_task_sgd_check(rp_task_ctx *ctx);
rp_status rp_task_sgd_multi_check(rp_task_ctx *ctx);
/* The check_fns of the gpt.* tasks (kernels/gpt_tasks.c) whose GPU
 * variants read per-replay args on the device: the task's argument and
 * access checks (an interpolated pos or token out of range: RP_ERANGE),
 * touching no data. */
rp_status rp_task_gpt_embed_token_check(rp_task_ctx *ctx);
rp_status rp_task_gpt_attention_decode_check(rp_task_ctx *ctx);
rp_status rp_task_gpt_adamw_check(rp_task_ctx *ctx);

#endif
