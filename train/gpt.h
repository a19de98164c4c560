/* train/gpt.h — a decoder-only transformer (GPT-2 layout, as nanoGPT and
 * llm.c) trained by one recorded step built from the gpt.* kernel tasks
 * (kernels/gpt_kernels.h), for `reprise train --model gpt`, its tests and
 * benchmarks.
 *
 * The model (nanoGPT's model.py): token and position embeddings (learned,
 * wte [V x C], wpe [T x C]); L pre-LayerNorm blocks
 *   x = x + attn.proj(causal_self_attention(attn.qkv(ln1(x))))
 *   x = x + mlp.proj(gelu_tanh(mlp.fc(ln2(x))))          (fc: C -> 4C)
 * a final LayerNorm lnf, the LM head tied to wte (logits = lnf(x) wte^T)
 * and the mean cross-entropy over the B*T positions. fp32 throughout.
 *
 * Parameters, in this order (nanoGPT's named_parameters, rp_gpt_param):
 *   wte, wpe, then per block l: h{l}.ln1.w, h{l}.ln1.b, h{l}.attn.qkv.w,
 *   h{l}.attn.qkv.b, h{l}.attn.proj.w, h{l}.attn.proj.b, h{l}.ln2.w,
 *   h{l}.ln2.b, h{l}.mlp.fc.w, h{l}.mlp.fc.b, h{l}.mlp.proj.w,
 *   h{l}.mlp.proj.b, then lnf.w, lnf.b.
 * Matrices are [out x in] as nn.Linear. Their gradients are named with a
 * "d" in front of the last part ("h3.mlp.fc.dW", "h3.mlp.fc.db", "dwte"),
 * AdamW moments the name + ".m" and ".v" ("h3.mlp.fc.w.m").
 *
 * Initialisation (rp_gpt_reset) as nanoGPT: matrices and embeddings
 * normal(0, 0.02), the residual projections (attn.proj.w, mlp.proj.w)
 * normal(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm weights 1, from the
 * seed (Box-Muller over splitmix64, train/data.h's rp_rng).
 *
 * One training step over P processors (one launch sequence: eagerly run or
 * recorded, the same ops):
 *   1. rp.gather_rows copies batch `batch` of the batch ring (the inputs
 *      and the targets, B rows of T tokens each) into the home batch;
 *   2. P > 1: RP_POP_REPARTITION splits the batch rows into P shards,
 *      RP_POP_REPLICATE copies every parameter to the P processors;
 *   3. per shard: forward (gpt.embed_fwd; per block 8 ops: ln1 (fused with
 *      the previous block's residual add), qkv, attention, proj, ln2 (fused
 *      residual add), fc, bias+gelu, proj; lnf (fused residual add); head
 *      matmul), gpt.xent (loss and dlogits, norm = B*T so shard losses and
 *      gradients add up), backward in reverse (8 ops per block), embedding
 *      backward (adds into dwte after the tied head's part);
 *   4. P > 1: RP_POP_REDUCTION sums every gradient and the loss at home;
 *   5. one gpt.adamw over every parameter (clipping by the global norm).
 * P = 1: 16 L + 10 ops (74 for L = 4).
 *
 * Tensor parallelism (tp = N > 1; docs/distributed.md): the P processors
 * form P / N data groups of N; step 3's blocks run over the group's N
 * slices (NH / N heads and 4C / N MLP columns each: column-parallel qkv
 * and fc, row-parallel projections whose partial sums a RP_POP_REDUCTION
 * joins at the group's leader, the LayerNorm outputs RP_POP_REPLICATEd to
 * the slices). The optimizer state is sharded like the weights: group 0's
 * slices keep their shards (at their global offsets) of the split
 * tensors' weights, gradients and AdamW moments, home keeps the tensors
 * not split; in step 2 the other groups' slices get group 0's weight
 * shards (RP_POP_REPLICATE), in step 4 their gradient shards are summed
 * into group 0's (RP_POP_REDUCTION), and step 5 is one gpt.adamw per
 * processor of group 0 with the global norm: each one's gpt.sumsq, the
 * sums RP_POP_COMBINEd home and RP_POP_REPLICATEd back (norm_parts). The
 * tensor accessors and checkpoints gather and scatter the shards.
 *
 * Per-replay arguments (rp_gpt_step_args): the ring index (both gathers),
 * the learning rate and the 1-based AdamW step (bias correction). The
 * host computes the learning rate (warmup and cosine, rp_gpt_lr). Nothing
 * else changes between replays and a step allocates nothing.
 *
 * The batch ring: `ring` batches of B windows of T + 1 tokens (inputs and
 * targets shifted by one) in the home memory, written by the host with
 * rp_gpt_write_batches while no step runs. rp_gpt_train fills it every
 * `ring` steps with the windows of the coming steps: step t's windows are
 * drawn from (seed, t) alone, so eager and replayed training see the same
 * batches and a resumed run the ones an uninterrupted run does.
 *
 * Determinism: the gpt.* kernels are deterministic (gpt_kernels.h), so
 * replayed steps are bitwise equal to eager ones for P <= 2 (a reduction
 * of two parts has one order).
 *
 * Across ranks (cfg.dist = 1; "Distributed" in reprise.h,
 * docs/distributed.md): every rank of the runtime's communicator builds
 * the same model from the same seed and draws the same windows; rank r of
 * R keeps rows rp_chunk_rect([0, batch), 0, R, r) of every global batch
 * (global row numbers: its ring holds only those rows, and its home batch
 * is that rect) and splits them over its P / N data groups as above. The
 * cross-entropy keeps norm = global batch x T, so a rank's loss and
 * gradients are its part of the global mean's; after step 4 the step
 * all-reduces (RP_REDOP_SUM, in place) the loss ("loss.allreduce") and
 * then every home gradient, last tensor first ("lnf.db.allreduce" ..
 * "dwte.allreduce"), and step 5 runs on the global gradient, identically
 * on every rank: the weights stay equal on every rank. rp_gpt_evaluate
 * sums each rank's part and all-reduces the sum (eagerly): every rank
 * gets the global loss. Every rank must call rp_gpt_record (and
 * instantiate its graph), rp_gpt_evaluate and rp_gpt_train in the same
 * order (they contain collectives); sampling and decoding are local. With
 * one rank (or no communicator) the all-reduces leave the data as it is:
 * the weights equal those of dist = 0 bitwise.
 *
 * Tensor parallelism across ranks (cfg.dist with tp > procs, tp a multiple
 * of procs): the ranks' processors form one layout of ranks x procs
 * processors, processor p on rank p / procs, split into groups of tp as
 * in one process (rp_gpt_proc_count; rp_gpt_procs holds this rank's at
 * their indices). The model is the one process's: the home (processor 0,
 * rank 0) holds the whole batch, the shards and state live on their
 * processors' ranks, and every rank records the same step, keeping its
 * side: its processors' tasks, and each parallel operator whose parts
 * span ranks as copies between ranks (rp_launch_dist_copy, in part order,
 * so sums of two parts are the one process's bits); the loss is then
 * replicated to every rank ("loss.replicate", the graph's "loss" port).
 * Collective there (every rank calls them in the same order):
 * rp_gpt_record and the replays, rp_gpt_evaluate, rp_gpt_tensor_read (and
 * so rp_gpt_params_read and rp_gpt_save, whose file rank 0 alone writes),
 * rp_gpt_decode_fill, rp_gpt_sample (rank 0 picks, every rank gets its
 * tokens); rp_gpt_write_batches, rp_gpt_tensor_write and rp_gpt_reset
 * write this rank's part. rp_gpt_generate runs on rank 0 after
 * rp_gpt_decode_fill; rp_gpt_grad_norm answers on rank 0 (RP_EINVAL
 * elsewhere). The CPU backend only (the copies between ranks need host
 * memory: RP_EUNSUPPORTED on CUDA). */
#ifndef RP_TRAIN_GPT_H
#define RP_TRAIN_GPT_H

#include "data.h"
#include "kernels/gpt_kernels.h"
#include "kernels/tasks.h"

#define RP_GPT_MAX_LAYERS 32
#define RP_GPT_MAX_PROCS 16
#define RP_GPT_MAX_BATCH 65536
#define RP_GPT_MAX_VOCAB 256 /* byte-level vocabularies */
#define RP_GPT_MAX_WIDTH 8192
#define RP_GPT_MAX_CONTEXT 4096
/* Parameter tensors: 2 embeddings, 12 per block, 2 for lnf. */
#define RP_GPT_PARAMS(L) (12u * (L) + 4u)

typedef struct rp_gpt_config {
  uint32_t layers, heads, width, context; /* L, NH, C (NH | C), T */
  uint32_t vocab;                         /* V, 2..RP_GPT_MAX_VOCAB */
  uint32_t batch;                         /* B: global rows, >= procs */
  uint32_t procs;                         /* P, 1..RP_GPT_MAX_PROCS */
  uint32_t tp;   /* tensor-parallel degree N (0 or 1: none): P / N data groups
                    of N processors each (docs/distributed.md) */
  uint32_t ring; /* batches in the ring, >= 1 */
  float beta1, beta2, eps, weight_decay; /* AdamW */
  float max_norm;     /* clipping of the global gradient norm; <= 0: none */
  uint64_t seed;      /* weights, windows */
  int dist;           /* 1: one rank of a job over the runtime's ranks: data
                         parallel, or with tp > procs tensor parallel across them
                         (see above); 0: the runtime's rank alone */
  uint64_t max_bytes; /* 0: no limit; else rp_gpt_create refuses
                         (RP_ENOMEM, before making any, naming their size)
                         when this rank's instances would take more bytes,
                         and rp_gpt_decode_record / _fill when the decode
                         step's would take the model past it */
} rp_gpt_config;

/* Defaults: 4 layers, 4 heads, width 128, context 64, vocab 64, batch 16,
 * 1 processor, ring 64, AdamW (0.9, 0.95, 1e-8), weight decay 0.1 (matrices
 * and embeddings only), clipping at norm 1.0, seed 1. */
void rp_gpt_config_init(rp_gpt_config *cfg);
/* RP_OK, or RP_EINVAL naming the field (rp_gpt_create checks the same,
 * its messages naming rp_gpt_create). */
rp_status rp_gpt_config_check(const rp_gpt_config *cfg);
/* RP_OK when a global batch of `batch` rows splits over `ranks` ranks x
 * procs / tp data groups (tp 0 or 1: procs) with no empty shard, else
 * RP_ERANGE naming the first rank that gets an empty one; RP_EINVAL for a
 * zero or a layout that is none (procs not a multiple of tp; tp above
 * procs not a multiple of procs dividing ranks x procs). The same answer
 * on every rank: no communication. */
rp_status rp_gpt_split_check(uint32_t batch, uint32_t ranks, uint32_t procs,
                             uint32_t tp);

/* A layout: processors per rank, ranks, tensor-parallel width (0: 1). */
typedef struct rp_gpt_layout {
  uint32_t procs, ranks, tp;
} rp_gpt_layout;

/* 1 when layouts a and b add the data-parallel gradient parts (procs x
 * ranks / tp of them) in the same order, so that training on from a
 * checkpoint of a under b is bitwise training on under a: the same
 * layout, or the same parts and tp with at most 2 parts (one addition),
 * or with any number of parts when neither is data parallel across ranks
 * (each is one rank, or tensor parallel across the ranks: tp above
 * procs). Parts are added in order within a process and by the parallel
 * operators across ranks, and as MPI's all-reduce adds them for data
 * parallelism across ranks, which may be any order. */
int rp_gpt_layouts_sum_alike(rp_gpt_layout a, rp_gpt_layout b);

/* The replay argument block of a recorded step. A replay takes it as it
 * is: on a CPU processor a bad one fails the replay (the gather or
 * gpt.adamw refuses it: RP_ERANGE, RP_EINVAL; nothing updated), a GPU's
 * kernels read it on the device unchecked. rp_gpt_step_check says
 * whether rp_gpt_step would take it (rp_gpt_train checks its own). */
typedef struct rp_gpt_step_args {
  uint32_t batch; /* offset 0: ring index, < ring */
  float lr;       /* offset 4 */
  int32_t step;   /* offset 8: AdamW step, >= 1 */
} rp_gpt_step_args;

/* One parameter tensor of the table. */
typedef struct rp_gpt_param_info {
  char name[32];  /* "h3.mlp.fc.w" */
  uint32_t rows;  /* 1 for vectors */
  uint32_t cols;  /* elements per row */
  int decay;      /* weight decay applies (matrices, embeddings) */
  float init_std; /* 0: constant init_value */
  float init_value;
} rp_gpt_param_info;

typedef struct rp_gpt rp_gpt;

/* Allocates every instance on rt (rp_kernels_register done: `k`), with
 * the weights initialised from the seed. RP_EINVAL (config), RP_ERANGE
 * (dist: a rank's data group would get no rows, rp_gpt_split_check; every
 * rank checks every rank's, so all refuse alike), RP_EPROC, RP_ENOMEM,
 * instance errors. */
rp_status rp_gpt_create(rp_runtime *rt, const rp_kernel_tasks *k,
                        const rp_gpt_config *cfg, rp_gpt **out);
/* A decode-only model (`reprise generate`): the weights (initialised from
 * the seed as rp_gpt_create's), the decode step's instances (one
 * position's activations, the key/value caches; the decoding section
 * below) and nothing else: no gradients, AdamW moments, batch ring or
 * training activations, about a quarter of a training model's bytes. Of
 * cfg only the architecture (layers, heads, width, context, vocab), seed
 * and max_bytes count (counting the decode step's instances too): it is
 * one processor's, one row's. rp_gpt_decode_record, rp_gpt_generate, the
 * weights' accessors (rp_gpt_tensor_read/_write of RP_GPT_WEIGHT,
 * rp_gpt_params_read), rp_gpt_reset and rp_gpt_ckpt_load_weights take
 * it; the calls that train, evaluate, sample by full recompute or touch
 * the other slots (rp_gpt_step, _step_check, _record, _write_batches,
 * _batch_loss, _grad_norm, _evaluate, _forward, _sample, _train, _save,
 * _ckpt_apply) refuse it with RP_EINVAL, nothing done. Errors as
 * rp_gpt_create's. */
rp_status rp_gpt_create_decoder(rp_runtime *rt, const rp_kernel_tasks *k,
                                const rp_gpt_config *cfg, rp_gpt **out);
/* Destroy execs recorded from it first. NULL: no-op. Frees m as free()
 * does: m must not be used, or destroyed, again (the runtime's handles
 * are generation-checked; a model is a plain pointer), also when it
 * returns an error: RP_EBUSY when an exec still had replays in flight on
 * its instances, which then stay allocated until rp_runtime_destroy (the
 * detail counts them). */
rp_status rp_gpt_destroy(rp_gpt *m);

/* The accessors below answer NULL, 0 or a null handle for m NULL. */
const rp_gpt_config *rp_gpt_cfg(const rp_gpt *m);
/* Bytes of the instances on processor index p (0..P-1, the order of
 * rp_gpt_procs): all of them (*total) and those of the parameter state
 * (*state: weights, their replicas or shards, gradients, AdamW moments).
 * RP_EINVAL for p >= P. */
rp_status rp_gpt_proc_bytes(const rp_gpt *m, uint32_t p, uint64_t *total,
                            uint64_t *state);
const rp_proc *rp_gpt_procs(const rp_gpt *m);
/* The processors of the layout: P, or with tensor parallelism across
 * ranks ranks x P (processor p on rank p / P; rp_gpt_procs holds this
 * rank's at their indices). */
uint32_t rp_gpt_proc_count(const rp_gpt *m);
/* Parameter tensors (RP_GPT_PARAMS(L)) and scalars. */
uint32_t rp_gpt_param_tensors(const rp_gpt *m);
size_t rp_gpt_param_count(const rp_gpt *m);
/* Tensor i's description, NULL past the end. */
const rp_gpt_param_info *rp_gpt_param(const rp_gpt *m, uint32_t i);

/* Host access to tensor i (rows * cols floats): its weights, its gradient
 * (the last step's, summed over the shards) or its AdamW moments. A NULL
 * model or buffer, i >= rp_gpt_param_tensors or a bad slot: RP_EINVAL; n
 * other than the tensor's rows * cols: RP_ESHAPE. */
typedef enum rp_gpt_slot {
  RP_GPT_WEIGHT = 0,
  RP_GPT_GRAD = 1,
  RP_GPT_MOM1 = 2,
  RP_GPT_MOM2 = 3,
} rp_gpt_slot;
/* (rp_gpt_tensor_write refuses a second moment with a negative or NaN
 * element, RP_EINVAL naming it, nothing written: the next step's update
 * would make the weights NaN.) */
rp_status rp_gpt_tensor_read(rp_gpt *m, uint32_t i, rp_gpt_slot s, float *out,
                             size_t n);
rp_status rp_gpt_tensor_write(rp_gpt *m, uint32_t i, rp_gpt_slot s,
                              const float *in, size_t n);
/* Every weight, tensor after tensor, into out (n >= rp_gpt_param_count;
 * fewer: RP_EINVAL naming both counts). */
rp_status rp_gpt_params_read(rp_gpt *m, float *out, size_t n);
/* Re-initialises the weights from the seed, zeroes the moments.
 * The calls that run ops eagerly and read their results back
 * (rp_gpt_evaluate, rp_gpt_sample, rp_gpt_decode_fill, rp_gpt_generate,
 * rp_gpt_train, rp_gpt_save; with tensor parallelism across ranks, whose
 * shards travel by eager copies, also rp_gpt_reset, rp_gpt_tensor_read/
 * _write, rp_gpt_params_read and, with dist, rp_gpt_create) refuse to run
 * while a capture is open on the model's runtime (RP_ECAPTURE, nothing
 * issued): this thread's would record their ops, another thread's refuse
 * them part-way. rp_gpt_step and rp_gpt_forward record then. */
rp_status rp_gpt_reset(rp_gpt *m);

/* Writes n (1..ring) batches into ring slots 0..n-1: x and y hold
 * n * B * T tokens each (batch after batch, row after row; global batches:
 * with dist the ring keeps this rank's rows of each), in [0, V):
 * RP_ERANGE otherwise; NULL arrays or n outside 1..ring: RP_EINVAL. No
 * step may be running. The ring starts zeroed (a
 * step before any write trains on token 0 everywhere); rp_gpt_train
 * writes it itself. */
rp_status rp_gpt_write_batches(rp_gpt *m, const int32_t *x, const int32_t *y,
                               uint32_t n);

/* Issues one step (eagerly, or recorded with the interpolations while a
 * capture is open on this thread). RP_EINVAL for an lr that is not finite,
 * is negative, or whose product with the config's weight_decay is 1 or
 * more (AdamW's decay step would zero, flip or grow the matrices),
 * RP_ERANGE for a batch slot or step out of range, before anything is
 * issued. An eager op that still fails while it runs (a
 * communication error) poisons the instances it writes, and every later
 * op that reads them fails with it: the step's status (rp_gpt_train's
 * return) says so, and the model cannot train on. */
rp_status rp_gpt_step(rp_gpt *m, const rp_gpt_step_args *a);
/* rp_gpt_step's checks of a, alone (the same errors, naming this call):
 * for a block about to be replayed. */
rp_status rp_gpt_step_check(const rp_gpt *m, const rp_gpt_step_args *a);
/* Records one step into a new graph (the "loss" postcondition bound). */
rp_status rp_gpt_record(rp_gpt *m, rp_graph **out);
/* The last completed step's mean loss, read from its instance as it is
 * (rp_instance_read waits for nothing): after an eager rp_gpt_step, wait
 * first (rp_runtime_drain); after a replay, its done event; before any
 * step, 0. rp_gpt_evaluate's batches use the same instance: after it, the
 * last evaluated batch's loss. rp_gpt_train reads it at the right
 * times. */
rp_status rp_gpt_batch_loss(rp_gpt *m, float *out);
/* The last completed step's global gradient norm (before clipping); the
 * same rules. */
rp_status rp_gpt_grad_norm(rp_gpt *m, float *out);

/* Mean loss of the model on n batches (x, y as rp_gpt_write_batches;
 * they go through the ring, so nothing may be running), forward only,
 * eagerly over the data groups (and their slices). Collective with dist
 * (every rank passes the same batches and gets the global loss). When
 * one rank's part fails every rank fails: that rank with its own error,
 * the others with RP_EPOISON ("N rank(s) of the job failed their
 * part"); with tensor parallelism across ranks a failed op's sends are
 * skipped and its peers fail on their own (RP_EPEER after the dist
 * timeout). Refused while a capture is open (RP_ECAPTURE, see
 * rp_gpt_reset). */
rp_status rp_gpt_evaluate(rp_gpt *m, const int32_t *x, const int32_t *y,
                          uint32_t n, double *loss);

/* Records (or runs) the forward of `rows` rows (1..rows of shard 0) of
 * the tokens in `tokens` (an I32 instance of >= rows * T tokens) on
 * processor 0 with the home weights, up to the logits (shard 0's logits
 * instance, rows * T x V). The hook for decoding and sampling. With tp > 1
 * the blocks run over group 0's slices, after a REPARTITION of the home
 * weights into them. */
rp_status rp_gpt_forward(rp_gpt *m, rp_inst tokens, uint32_t rows);
/* (Refused before anything is issued: RP_EINVAL a tokens handle 0 where
 * processor 0 is this rank's, RP_ETYPE tokens not I32, RP_ESHAPE fewer
 * than rows * T of them, RP_ESTALE a stale handle. Run eagerly, its
 * ops complete later: a failure of one, e.g. a token outside [0, V) in
 * `tokens` on a CPU processor (a GPU's embedding makes that row NaN
 * instead), poisons that op's event, which this call does not hand out,
 * and the activations it writes: every later eager step, evaluation or
 * sampling of the model fails with that status (naming the op). In one
 * process replays of recorded graphs, the weights and rp_gpt_save are
 * unaffected; with tensor parallelism across ranks a failed op's sends
 * are skipped, so its peers fail (RP_EPEER after the dist timeout) and
 * the job's communication is broken. Check the tokens before, or record
 * the forward and replay it: the replay's done event carries the
 * failure.) */
/* Shard 0's logits instance (rows * T x V, row-major). */
rp_inst rp_gpt_logits(const rp_gpt *m);
/* How the next token is drawn from the logits. */
typedef struct rp_gpt_sampling {
  float temperature; /* 0: greedy (the first largest logit), else a draw
                        from softmax(logits / temperature) */
  uint32_t top_k;    /* > 0: only the tokens whose logit is at least the
                        top_k-th largest take part (ties at it all do, as
                        in nanoGPT); 0 or >= V: all */
  uint64_t seed;     /* the draws' rng seed */
  /* Optional (NULL: none): called with each token as it is drawn, in
   * order; a status other than RP_OK stops the run, which returns it
   * (`reprise generate` prints each byte as it comes). With tensor
   * parallelism across ranks, rp_gpt_sample calls it on the rank that
   * draws (rank 0's home) alone, and its refusal stops every rank. */
  rp_status (*on_token)(void *arg, int32_t token);
  void *arg;
} rp_gpt_sampling;
/* One draw (rp_gpt_sampling) from V logits with the caller's rng; scratch:
 * V floats, used when 0 < top_k < V. */
int32_t rp_gpt_pick(const float *logits, uint32_t V, float temperature,
                    uint32_t top_k, float *scratch, rp_rng *r);
/* Samples n tokens after the prompt (plen tokens, >= 1), full recompute of
 * a context window per token (the last T tokens: a sliding window, unlike
 * rp_gpt_generate's past the context), drawn as `how` says; out gets plen
 * + n tokens (RP_ERANGE when plen + n overflows 32 bits, nothing drawn).
 * Eager; with tensor parallelism across ranks collective (the same tokens
 * on every rank). */
rp_status rp_gpt_sample(rp_gpt *m, const int32_t *prompt, uint32_t plen,
                        uint32_t n, const rp_gpt_sampling *how, int32_t *out);

/* ---- decoding (the hook for `reprise generate`) ----
 * A decode graph: the forward of one token at position pos (0..T-1) with
 * the home weights on processor 0 (gpt.embed_token; per block the layers
 * above with gpt.attention_decode, which writes the token's key and value
 * into the block's caches at pos and attends over 0..pos; lnf; the head),
 * recorded once and replayed per token with pos and token as per-replay
 * arguments (the GPU kernels read them on the device: the graph never
 * changes). */
typedef struct rp_gpt_decode_step {
  int32_t pos;   /* offset 0 */
  int32_t token; /* offset 4 */
} rp_gpt_decode_step;
/* Records the decode graph (allocating its instances at the first call;
 * when making them fails, RP_ENOMEM past max_bytes included, none of
 * them stays and the next call makes them again). With tp > 1 it reads
 * whole copies of the split weights, which start zeroed: a caller that
 * replays it itself calls rp_gpt_decode_fill first (and after each
 * update); rp_gpt_generate does. */
rp_status rp_gpt_decode_record(rp_gpt *m, rp_graph **out);
/* The decode graph's logits (V floats), after a replay. */
rp_inst rp_gpt_decode_logits(const rp_gpt *m);
/* Fills the decode step's whole copies of the split weights from their
 * shards (allocating the decode instances at the first call).
 * rp_gpt_generate does it itself, except with tensor parallelism across
 * ranks: there it is collective (every rank calls it, rank 0 then
 * generates) and generate uses the weights of the last call. */
rp_status rp_gpt_decode_fill(rp_gpt *m);
/* Generates n tokens after the prompt (plen >= 1 tokens; only its last T
 * are decoded) by replaying ex (an instantiation of m's own
 * rp_gpt_decode_record graph: the exec holds the instances it was
 * recorded on, so another model's decode exec computes that model's
 * logits, not m's; this is not detected) once per position, drawn as `how`
 * says; when the context is full, the last T/2 tokens are decoded again from
 * position 0. out gets plen + n tokens. It first waits for the eager ops
 * issued before it (rp_runtime_drain: an eager rp_gpt_step may still be
 * writing the weights the replays read, and replays are not ordered after
 * eager ops). RP_ERANGE for a prompt token outside [0, V), or logits that
 * are not finite (weights that overflow: nothing to draw from; the tokens
 * drawn before stay in out). */
rp_status rp_gpt_generate(rp_gpt *m, rp_exec *ex, const int32_t *prompt,
                          uint32_t plen, uint32_t n, const rp_gpt_sampling *how,
                          int32_t *out);

/* Learning rate at step t (0-based) of `iters`: linear warmup over
 * `warmup` steps to lr (step t < warmup at lr (t + 1) / warmup), then a
 * cosine from lr at step `warmup` to lr / 10 at the last step; with at
 * most one step after the warmup, lr to the end. Never above lr (the
 * float formulas' rounding up is clamped): every step takes a peak that
 * rp_gpt_train takes. */
float rp_gpt_lr(float lr, uint32_t warmup, uint32_t iters, uint32_t t);

/* ---- text data (train/text.c) ---- */

/* A byte-level corpus: the distinct bytes of a file, in byte order, are
 * the vocabulary; the tokens are the file's bytes' indices; the first 90%
 * (of the tokens) train, the rest validate. */
typedef struct rp_text {
  uint32_t vocab;
  uint8_t bytes[RP_GPT_MAX_VOCAB]; /* token id -> byte */
  uint8_t *tokens;                 /* n token ids (< vocab), owned */
  size_t n, ntrain;                /* [0, ntrain) train, [ntrain, n) val */
} rp_text;

/* Reads a regular file of at most max_bytes (0: 1 GiB) and encodes it.
 * RP_EFORMAT when a split is too short for one window of context + 1
 * tokens or the file has fewer than 2 distinct bytes; errors of
 * rp_file_read_regular (naming the file). */
rp_status rp_text_load(const char *path, uint64_t max_bytes, uint32_t context,
                       rp_text *out);
/* Encodes len bytes of memory (the same rules, "path" naming it). */
rp_status rp_text_from_bytes(const char *what, const uint8_t *b, size_t len,
                             uint32_t context, rp_text *out);
void rp_text_free(rp_text *t);
/* Fills n batches of B windows of T + 1 tokens from [lo, hi) of t's
 * tokens: x gets tokens s..s+T-1, y s+1..s+T. Batch j's windows are drawn
 * from (seed, first + j) alone. RP_ERANGE (nothing written) when [lo, hi)
 * is not inside t or holds fewer than T + 1 tokens (a text loaded for a
 * shorter context), RP_EINVAL for NULL arguments or T = 0. */
rp_status rp_text_windows(const rp_text *t, size_t lo, size_t hi, uint32_t B,
                          uint32_t T, uint64_t seed, uint64_t first, uint32_t n,
                          int32_t *x, int32_t *y);
/* The count-based bigram model of the training split (add-one smoothing:
 * p(b | a) = (count(a b) + 1) / (count(a) + V)), its mean cross-entropy
 * over the n positions (x[i] -> y[i]); NaN for n 0 (no mean) or when its
 * V x V count table cannot be allocated. */
double rp_text_bigram_loss(const rp_text *t, const int32_t *x, const int32_t *y,
                           size_t n);
/* The FNV-1a 64 (ckpt.h's rp_fnv1a64) of the bytes t was encoded from:
 * the file's own bytes, in order. A checkpoint keeps it to tell the corpus
 * it was trained on from another of the same vocabulary. */
uint64_t rp_text_digest(const rp_text *t);

/* ---- training loop ---- */

typedef struct rp_gpt_train_opts {
  uint32_t iters, start; /* the schedule's steps; the first step run */
  uint32_t stop;         /* run steps start..stop-1 (0: iters) */
  float lr;              /* peak */
  uint32_t warmup;
  uint32_t loss_every; /* 0: never */
  /* after step t; loss: its loss when the step read one (every
   * loss_every steps and the last), else NULL; nonzero stops the loop */
  int (*progress)(void *arg, uint32_t t, const float *loss);
  void *arg;
  uint64_t *iter_ns; /* NULL or iters - start entries */
  uint64_t *wall_ns;
  uint32_t inflight; /* replays in flight, 0..RP_GPT_MAX_INFLIGHT (0: 1) */
} rp_gpt_train_opts;
#define RP_GPT_MAX_INFLIGHT 64

/* Trains on t's training split by replaying ex (eagerly when ex is NULL):
 * ex must be instantiated from m's own recorded step (the exec holds the
 * instances it was recorded on, so another model's exec trains that
 * model; this is not detected); refills the ring every `ring` steps,
 * from t (the first step writes it: batches an earlier call left there are
 * not reused, even for the same steps). By default
 * each step is waited for before the next starts, so iter_ns is each step's
 * latency.
 *
 * inflight N > 1 (with ex): rp_replay returns at once and up to N replays
 * stay outstanding; the loop waits for the oldest only when N are. A
 * refill of the ring, and a step that reads the loss (then reported to
 * progress with the loss of that step), first wait for every outstanding
 * replay, so no replay in flight has its ring slot overwritten. Replays of
 * one exec run in order, so the weights are bitwise those of N = 1.
 * iter_ns is then rp_replay to when the done event was seen, and
 * *wall_ns / steps the back-to-back time per step. The exec needs
 * max_inflight >= N (rp_exec_opts), else rp_replay blocks until a slot
 * frees (correct, less overlap). RP_EINVAL for N > 64, iters above
 * RP_GPT_ITERS_MAX, warmup not below iters, or an lr rp_gpt_step refuses
 * (before any step). */
rp_status rp_gpt_train(rp_gpt *m, rp_exec *ex, const rp_text *t,
                       const rp_gpt_train_opts *o);

/* ---- checkpoints ----
 * A checkpoint container (train/ckpt.h) of kind "gpt", payload version 3;
 * the payload, little-endian: u32 L, NH, C, T, V, B, u32 step (steps
 * done), f32 lr, u32 warmup, u32 iters, u64 seed, u32 procs, tp, ranks
 * (the processor layout that trained it: a resume on another one is not
 * bitwise), u64 text digest (rp_text_digest of the corpus trained on; 0:
 * none recorded), V vocabulary bytes, then per parameter tensor its
 * weights, first and second moments (f32). Versions 2 (no text digest)
 * and 1 (no layout fields either) are read too. The container's length
 * and checksum cover it; it is written through the output writer
 * (reprise.h "Output files"). */
typedef struct rp_gpt_ckpt {
  uint32_t layers, heads, width, context, vocab, batch;
  uint32_t procs, tp, ranks; /* the layout saved (0: a version 1 file) */
  uint32_t step, warmup, iters;
  float lr;
  uint64_t seed;
  uint64_t text_digest; /* 0: none (a version 1 or 2 file, or none given) */
  uint8_t bytes[RP_GPT_MAX_VOCAB];
  float *data; /* owned: weights, m, v per tensor (rp_gpt_ckpt_read) */
  size_t ndata;
  /* the container's checksum (train/ckpt.h) of the whole file: a file
   * rewritten with other bytes (almost surely) has another (a read fills
   * it; rp_gpt_save ignores it) */
  uint64_t checksum;
} rp_gpt_ckpt;
/* Writes m's weights and moments with info's step, schedule, text digest
 * and vocabulary (the rest of info is ignored). Errors: those of rp_ckpt_save
 * (the file at path is then unchanged), RP_ENOMEM, RP_EINVAL (nothing
 * written) for what the reader would refuse: a weight or moment
 * that is not finite, a vocabulary not in strictly increasing order, a
 * schedule outside the file's domain (lr finite in [0, 100]: training
 * takes lr x weight_decay below 1, so below 10 at the default decay, and
 * refuses a larger one when it starts; iters and step at most
 * RP_GPT_ITERS_MAX; with iters > 0, step <= iters and warmup < iters;
 * iters 0 records no schedule);
 * RP_ERANGE (nothing written) for a checkpoint larger than the reader
 * takes (rp_gpt_save_check). */
rp_status rp_gpt_save(rp_gpt *m, const char *path, const rp_gpt_ckpt *info);
/* The most steps a schedule has (rp_gpt_train's iters; a checkpoint's
 * iters and step). */
#define RP_GPT_ITERS_MAX 100000000u
/* The largest learning rate a checkpoint holds (the file format's:
 * training takes lr x weight_decay below 1). */
#define RP_GPT_CKPT_LR_MAX 100.0f
/* The largest checkpoint file the reader takes. */
#define RP_GPT_CKPT_MAX ((uint64_t)1 << 32)
/* RP_OK when m's checkpoint fits RP_GPT_CKPT_MAX (about 358 million
 * parameters); else RP_ERANGE giving both sizes, which rp_gpt_save
 * returns before writing anything (check it before training). */
rp_status rp_gpt_save_check(const rp_gpt *m);
/* rp_gpt_save_check for the model cfg describes (its layers, width,
 * context and vocabulary), before one is made. */
rp_status rp_gpt_save_check_config(const rp_gpt_config *cfg);
/* Every GPT checkpoint read below goes through one reader, which streams
 * the file in pieces (train/ckpt.h's rp_ckpt_reader): the file is never
 * held whole. Its checks, in order, each error naming the file: those of
 * the container (not a checkpoint, another model's kind, truncated,
 * trailing bytes; RP_ECHECKSUM when corrupt, before any check of the
 * payload), RP_EVERSION (another payload version), RP_EFORMAT (a bad
 * header, a size the header disagrees with, a vocabulary not in
 * increasing order, a value that is not finite, a second moment below
 * 0). */

/* The header, vocabulary and checksum into *out (out->data NULL,
 * out->ndata the count of values the file holds), the whole file checked:
 * its checksum in a first pass, then everything else in a second. Nothing
 * to free. */
rp_status rp_gpt_ckpt_read_info(const char *path, rp_gpt_ckpt *out);
/* rp_gpt_ckpt_read_info, keeping every value in out->data (free with
 * rp_gpt_ckpt_free): memory of the file's size, for tools that compare
 * checkpoints; a model loads one with rp_gpt_ckpt_load. Nothing is
 * allocated on error. */
rp_status rp_gpt_ckpt_read(const char *path, rp_gpt_ckpt *out);
void rp_gpt_ckpt_free(rp_gpt_ckpt *c);
/* RP_ESHAPE when c holds another architecture than g (layers, heads,
 * width, context, vocabulary), the detail naming both; else RP_OK. */
rp_status rp_gpt_ckpt_fits(const rp_gpt_ckpt *c, const rp_gpt_config *g);
/* Writes c's values (rp_gpt_ckpt_read's) into m. RP_ESHAPE when they are
 * of another architecture; RP_EFORMAT (nothing written) for a second
 * moment that is negative or NaN (a mean of squares). */
rp_status rp_gpt_ckpt_apply(rp_gpt *m, const rp_gpt_ckpt *c);
/* Resumes a training model m from the checkpoint at path (`reprise train
 * --load-weights`): its weights and both AdamW moments, streamed tensor by
 * tensor through one tensor's buffer (m plus that buffer: the file and its
 * values are never held). info: what rp_gpt_ckpt_read_info gave for path
 * (the step, schedule and vocabulary are the caller's to use), or NULL to
 * have that first pass made here. Everything is checked before anything is
 * written: the whole file (that first pass), its architecture against m's
 * (RP_ESHAPE naming the file), and that the file still holds the bytes
 * that pass checked (its checksum: RP_ECHECKSUM "changed since it was
 * read" otherwise); on those errors m is unchanged. The checksum is
 * checked again at the end: only a file that is rewritten while it is
 * being loaded (RP_ECHECKSUM, RP_EFORMAT truncated or grown) or a failed
 * read (RP_EIO) fails after writing began, and leaves m's weights and
 * moments partly the file's: load again or destroy m. RP_EINVAL for a
 * decode-only model (it has no moments: rp_gpt_ckpt_load_weights). */
rp_status rp_gpt_ckpt_load(rp_gpt *m, const char *path,
                           const rp_gpt_ckpt *info);
/* Writes the weights of the checkpoint at path into m (a training model
 * or a decode-only one; the moments are read, checked and left out),
 * streaming the file tensor by tensor through one tensor's buffer in one
 * pass. info: what rp_gpt_ckpt_read_info gave for path (its header and
 * vocabulary are the caller's to use), or NULL. With info, a file whose
 * checksum is not info's (replaced since it was read: another file's
 * weights would go with info's vocabulary) is refused before anything is
 * written (RP_ECHECKSUM "the file changed since it was read ... nothing
 * loaded", m unchanged), as are another architecture than m's (RP_ESHAPE
 * naming the file) and a file that does not open or whose header is bad.
 * The checksum of the values is checked at the end, after the weights
 * are written: on the errors found while the values are read
 * (RP_ECHECKSUM for a corrupt file or one rewritten during the load,
 * RP_EFORMAT, RP_EIO) m's weights are partly the file's: reload or
 * destroy m (check the file with rp_gpt_ckpt_read_info first to refuse a
 * corrupt one before). */
rp_status rp_gpt_ckpt_load_weights(rp_gpt *m, const char *path,
                                   const rp_gpt_ckpt *info);

#endif
