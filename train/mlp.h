/* train/mlp.h — a data-parallel MLP training step built from the launch
 * API and the kernel tasks (kernels/tasks.h), for `reprise train`, its
 * tests and benchmarks.
 *
 * The model: features -> hidden[0] -> ... -> hidden[nhidden-1] -> classes,
 * ReLU between layers, softmax cross-entropy loss, SGD with momentum.
 * Weights of layer l are a [d_l x d_{l+1}] matrix (He-uniform initialised
 * from the seed, Glorot for the last layer) and a bias (zero).
 *
 * One training step over P processors (all ops of one launch sequence, so
 * eager execution and one recorded graph run exactly the same ops):
 *   1. rp.gather_rows on the home processor (processor 0 of the step) copies
 *      batch `index` of the data set into the batch instances;
 *   2. RP_POP_REPARTITION fwd scatters the batch (rows and labels) into P
 *      shards (rp_chunk_rect along rows; shards keep global row numbers);
 *   3. RP_POP_REPLICATE fwd copies every weight and bias into P replicas;
 *   4. on each processor p, with the fused tasks of tasks.h: forward
 *      (gemm, bias_act: bias + relu), loss (softmax_xent with norm = global
 *      batch, so the shard losses and gradients add up to those of the
 *      whole batch; it also writes the last layer's bias gradient),
 *      backward (gemm for dW and d(in), relu_bwd_bias for the layer
 *      below's dz and bias gradient) into per-shard gradients;
 *   5. RP_POP_REDUCTION fwd sums the P partial gradients (and the P partial
 *      losses) into one on the home memory;
 *   6. one rp.sgd_multi on the home processor updates every weight and
 *      bias.
 * The next step's replicate (3) reads the updated weights. With P = 1 the
 * only shard is the home batch in the home memory: it uses the home
 * instances (batch, weights, gradients, loss) directly and the step has no
 * parallel ops (2, 3, 5): 5L + 2 ops for L layers (17 for 2-64-64-3).
 *
 * Per-replay arguments (rp_mlp_step_args, the replay's argument block): the
 * batch index reaches both gathers and the learning rate the sgd_multi
 * task through interpolations (both read on the device by GPU variants, so
 * on CUDA they stay inside the step's CUDA graphs); nothing else changes
 * between replays. Every instance is allocated by rp_mlp_create: a step
 * allocates nothing.
 *
 * Processors: on a CUDA runtime the first P GPUs, else the first P CPU
 * workers (the runtime needs at least P of them). Processor 0 is home: the
 * data set, batch, master weights, momentum and summed gradients live in
 * its memory; shard p's instances in processor p's.
 *
 * Determinism: the step's ops and their order are fixed by dependencies,
 * and the gradient sum adds the parts in processor order (reprise.h,
 * parallel operators), so eager and replayed training give bitwise equal
 * weights at any P (docs/training.md).
 *
 * Across ranks (cfg.dist = 1; see "Distributed" in reprise.h): every rank
 * of the runtime's communicator builds the same model from the same data
 * set and seed and holds its rows of every global batch: rank r of R owns
 * rows rp_chunk_rect([0, batch), 0, R, r) of each batch (global row
 * numbers), copied from the data set at create, and splits them over its P
 * processors as above. The loss keeps norm = global batch; after the
 * in-rank reduction (5) the step all-reduces the batch loss and then every
 * gradient, last layer first, before the sgd tasks (6), so every rank
 * applies the same global gradient to the same weights. rp_mlp_evaluate
 * evaluates each rank's rows and all-reduces the sums (eagerly): every
 * rank gets the global figures. Every rank must call rp_mlp_record,
 * rp_mlp_evaluate and the training loops in the same order (they contain
 * collectives). With one rank (or no communicator) the all-reduces leave
 * the data as it is: the weights equal those of dist = 0 bitwise.
 *
 * Threads: one rp_mlp is used by one thread at a time, and only while none
 * of its steps is running (rp_mlp_train_* return with every step done). */
#ifndef RP_TRAIN_MLP_H
#define RP_TRAIN_MLP_H

#include "data.h"
#include "kernels/tasks.h"

#define RP_MLP_MAX_HIDDEN 8
#define RP_MLP_MAX_WIDTH 65536u /* units in one hidden layer */
#define RP_MLP_MAX_PROCS 64

typedef struct rp_mlp_config {
  uint32_t hidden[RP_MLP_MAX_HIDDEN]; /* hidden layer widths, each >= 1 */
  uint32_t nhidden;                   /* 0..RP_MLP_MAX_HIDDEN */
  uint32_t batch;                     /* global batch, >= procs */
  uint32_t procs;                     /* P, 1..RP_MLP_MAX_PROCS */
  float momentum;                     /* 0 <= momentum < 1 */
  uint64_t seed;                      /* weight initialisation */
  int dist; /* 1: one rank of a data-parallel job over the runtime's ranks
               (see above); 0: the runtime's rank alone */
} rp_mlp_config;

/* Defaults: hidden 64,64, batch 256, 2 processors, momentum 0.9, seed 1,
 * not distributed. */
void rp_mlp_config_init(rp_mlp_config *cfg);

/* The replay argument block of a recorded step. */
typedef struct rp_mlp_step_args {
  uint32_t batch; /* batch index, < rp_mlp_batches() */
  float lr;       /* learning rate */
} rp_mlp_step_args;

typedef struct rp_mlp rp_mlp;

/* Allocates every instance of the model on rt (which must have had
 * rp_kernels_register called: `k` are its ids), copies the data set into
 * the home memory (the data set may be freed afterwards) and initialises
 * the weights. *out is owned by the caller (rp_mlp_destroy). Errors, with a
 * detail naming the field: RP_EINVAL (bad config), RP_ERANGE (batch larger
 * than the data set, or a shard, or with dist a rank's rows, would be
 * empty: every rank checks every rank's, so all refuse alike), RP_EPROC
 * (fewer than P processors of the backend's kind), RP_ENOMEM, and any
 * instance error. */
rp_status rp_mlp_create(rp_runtime *rt, const rp_kernel_tasks *k,
                        const rp_mlp_config *cfg, const rp_dataset *data,
                        rp_mlp **out);
/* RP_OK when a global batch of `batch` rows splits over `ranks` ranks x
 * `procs` processors with no empty shard (rp_chunk_rect by rank, then by
 * processor), else RP_ERANGE naming the first rank that gets an empty one
 * (RP_EINVAL for a zero). The same answer on every rank: no communication. */
rp_status rp_mlp_split_check(uint32_t batch, uint32_t ranks, uint32_t procs);

/* Frees every instance. Destroy execs recorded from it first. NULL: no-op. */
rp_status rp_mlp_destroy(rp_mlp *m);

/* Batches per epoch: samples / batch (a partial last batch is dropped). */
uint32_t rp_mlp_batches(const rp_mlp *m);
/* The processors the step runs on (procs entries). */
const rp_proc *rp_mlp_procs(const rp_mlp *m);
/* Number of trainable parameters (weights and biases). */
size_t rp_mlp_param_count(const rp_mlp *m);

/* Issues one step: runs it eagerly, or records it while a capture is open
 * on this thread (then with the per-replay interpolations; a->batch and
 * a->lr are the values recorded as defaults). Returns at once in eager mode
 * (rp_runtime_drain waits). */
rp_status rp_mlp_step(rp_mlp *m, const rp_mlp_step_args *a);
/* Records one step into a new graph (*out owned by the caller). */
rp_status rp_mlp_record(rp_mlp *m, rp_graph **out);

/* Re-initialises weights and biases from the seed and zeroes momentum:
 * the state right after rp_mlp_create. */
rp_status rp_mlp_reset(rp_mlp *m);
/* Copies every parameter (layer by layer: weights then bias) into out
 * (n >= rp_mlp_param_count floats). */
rp_status rp_mlp_params_read(rp_mlp *m, float *out, size_t n);
/* The last step's batch loss (mean over the global batch). */
rp_status rp_mlp_batch_loss(rp_mlp *m, float *out);
/* Mean loss and accuracy (0..1) over every whole batch of the data set
 * (in the order it has now: with shuffling, the last epoch's), with the
 * current weights, computed eagerly on the home processor. */
rp_status rp_mlp_evaluate(rp_mlp *m, double *loss, double *accuracy);

/* Validation: copies a held-out set (same features, labels below the
 * model's classes; every whole batch of it is used, with dist each rank's
 * rows of each) into the home memory, once per model (RP_EEXIST after).
 * RP_ESHAPE (features), RP_ERANGE (a label, or fewer samples than one
 * batch), RP_ENOMEM. Allocates instances: call it before training. */
rp_status rp_mlp_set_validation(rp_mlp *m, const rp_dataset *val);
/* rp_mlp_evaluate over the validation set (RP_EINVAL without one).
 * Collective with dist, as rp_mlp_evaluate. */
rp_status rp_mlp_evaluate_val(rp_mlp *m, double *loss, double *accuracy);

/* Shuffling per epoch: from now on, the training loops give step t the
 * order of epoch e = t / rp_mlp_batches(): the data set d (the one given to
 * rp_mlp_create: RP_ESHAPE when its size differs) permuted by a
 * permutation seeded from `seed` and e alone. Before the first step of an
 * epoch (and the first step a loop runs) they write that order into the
 * data instances with rp_instance_write while no step runs (with replays
 * in flight, they first wait for them), so the recorded step is unchanged
 * and its gathers read the new order; nothing is allocated then (the
 * copies and the permutation are allocated here, once). Every rank computes
 * the same permutation, so with dist the ranks take their rows of the same
 * global batches; a run resumed at step t sees the order an uninterrupted
 * one does. Replay and eager training stay bitwise equal. */
rp_status rp_mlp_shuffle(rp_mlp *m, const rp_dataset *d, uint64_t seed);
/* Epoch `epoch`'s order of n samples under `seed` (the one rp_mlp_shuffle
 * uses): a Fisher-Yates permutation (rp_data_permutation) whose seed is
 * splitmix64's output for a value mixed from seed and epoch, so the orders
 * of different epochs are independent streams. */
void rp_mlp_epoch_permutation(uint32_t n, uint64_t seed, uint32_t epoch,
                              uint32_t *perm);

/* Training loops. Step t (0-based) uses batch t % rp_mlp_batches() and the
 * learning rate lr / (1 + lr_decay * t). By default each step is waited
 * for before the next starts, so iter_ns[t] is step t's latency: rp_replay
 * to done, or issuing the eager launches to the events of its last ops.
 *
 * inflight N > 1 (rp_mlp_train_replay only): rp_replay returns at once and
 * up to N replays stay outstanding; the loop waits for the oldest one's
 * done event only when N are. A step that reads the loss (every
 * loss_every steps, and the last) first waits for every outstanding
 * replay, itself included, so the loss read is that step's. Replays of one
 * exec run in order, so the weights are bitwise those of N = 1. iter_ns[t]
 * is then rp_replay of step t to when its done event was seen, and the
 * throughput is *wall_ns / iters. The exec needs max_inflight >= N
 * (rp_exec_opts), else rp_replay blocks until a slot frees (correct, less
 * overlap). */
#define RP_MLP_MAX_INFLIGHT 64
typedef struct rp_mlp_train_opts {
  uint32_t iters; /* the last step is iters - 1 */
  uint32_t start; /* the first step (a resumed run: the steps done), <= iters;
                     the lr schedule and the epochs count from step 0 */
  float lr;
  float lr_decay;
  uint32_t loss_every; /* read the batch loss every k steps; 0: never */
  /* Called after step t completed, in step order (may be NULL); loss is
   * the batch loss when it was read at this step, else NaN. Non-zero
   * stops training (after the outstanding replays finished). */
  int (*progress)(void *arg, uint32_t t, float loss);
  void *arg;
  uint64_t *iter_ns; /* NULL, or iters - start entries (step t's at
                        t - start) */
  uint32_t inflight; /* replays in flight, 0..RP_MLP_MAX_INFLIGHT (0: 1) */
  uint64_t *wall_ns; /* NULL, or out: wall time of the whole loop */
} rp_mlp_train_opts;

/* Trains by replaying ex (an instantiation of rp_mlp_record's graph). A
 * failed replay returns its status with rp_exec_error_detail in the
 * detail. */
rp_status rp_mlp_train_replay(rp_mlp *m, rp_exec *ex,
                              const rp_mlp_train_opts *o);
/* Trains by issuing the same step eagerly (o->inflight is ignored: every
 * step is waited for before the next is issued). */
rp_status rp_mlp_train_eager(rp_mlp *m, const rp_mlp_train_opts *o);

/* Checkpoints (`reprise train --save-weights/--load-weights`): a
 * checkpoint container (train/ckpt.h: kind "mlp", payload version 1, a
 * length and an FNV-1a 64 around the record, written through the output
 * writer, so the file is replaced only by a whole checkpoint) holding this
 * record of little-endian words (a bare record, without the container,
 * also loads):
 *   bytes 0..7    magic "RPRSWGHT"
 *   8..11         u32 version, 1
 *   12..15        u32 layers L (1..RP_MLP_MAX_HIDDEN + 1)
 *   16..19        u32 step: the steps done (the next step's index)
 *   20..27        f32 lr, f32 lr_decay (the schedule lr / (1 + decay t))
 *   28..31        f32 momentum
 *   32..35        u32 batch
 *   36..39        u32 flags (bit 0: shuffled per epoch)
 *   40..47        u64 seed (data, weights, shuffling)
 *   48..          L + 1 u32 widths: features, hidden..., classes
 *   then per layer: W [in x out] row-major, bias [out], W's momentum, the
 *   bias's momentum (f32), then the u64 FNV-1a 64 of every byte before it.
 * Loading a checkpoint into a model of the same shape, with the same data,
 * batch, seed and schedule, and training steps step..N-1 ends bitwise
 * where training 0..N-1 without a stop does. */
#define RP_MLP_CKPT_MAX ((size_t)1 << 31) /* largest file read */
typedef struct rp_mlp_ckpt_info {
  uint32_t step;
  float lr, lr_decay, momentum; /* momentum: the model's, on save */
  uint32_t batch;               /* on save: the model's */
  uint32_t shuffle;             /* on save: whether rp_mlp_shuffle is on */
  uint64_t seed;                /* on save: the model's */
} rp_mlp_ckpt_info;
typedef struct rp_mlp_ckpt {
  rp_mlp_ckpt_info info;
  uint32_t layers, widths[RP_MLP_MAX_HIDDEN + 2];
  float *params; /* owned: the file's floats in its order */
  size_t nparams;
} rp_mlp_ckpt;

/* Writes m's weights, biases and momentum with info->step, lr, lr_decay
 * (the rest comes from the model). Errors: rp_ckpt_save's (RP_EINVAL a
 * path that is not a regular file, RP_EIO when writing fails:
 * the file at path is then unchanged), RP_EINVAL (nothing written) for
 * what rp_mlp_ckpt_read would refuse: a weight or momentum not finite, an
 * lr not above 0 or a decay below 0; RP_ERANGE (nothing written) for a
 * checkpoint larger than the reader takes (rp_mlp_save_check). */
rp_status rp_mlp_save(rp_mlp *m, const char *path,
                      const rp_mlp_ckpt_info *info);
/* RP_OK when m's checkpoint fits RP_MLP_CKPT_MAX; else RP_ERANGE giving
 * both sizes, which rp_mlp_save returns before writing anything (check it
 * before training, or rp_mlp_save_check_config before building m). */
rp_status rp_mlp_save_check(const rp_mlp *m);
/* The bytes of the checkpoint rp_mlp_save writes (container included) for
 * the model cfg builds on a data set of `features` and `classes`: its size
 * follows from the widths alone (features, cfg->hidden, classes), not from
 * the processors, batch or dist. Saturates at UINT64_MAX; 0 for a NULL cfg
 * or more than RP_MLP_MAX_HIDDEN layers. */
uint64_t rp_mlp_ckpt_bytes(const rp_mlp_config *cfg, uint32_t features,
                           uint32_t classes);
/* rp_mlp_save_check for the model cfg would build on such a data set,
 * without building it (no memory allocated): the same RP_ERANGE and
 * detail; RP_EINVAL for a NULL cfg or more than RP_MLP_MAX_HIDDEN
 * layers. */
rp_status rp_mlp_save_check_config(const rp_mlp_config *cfg, uint32_t features,
                                   uint32_t classes);
/* Reads and checks a whole checkpoint (a regular file of at most
 * RP_MLP_CKPT_MAX bytes) into *out (rp_mlp_ckpt_free). Its first bytes are
 * judged before the rest is read: a file that is neither a container nor
 * a record, or a container whose header contradicts the file's size, is
 * refused unread (a bare record is read whole). Errors name the
 * file: RP_EFORMAT (not this format, another model's checkpoint, a
 * container whose payload is not one weights record, bad layer count or
 * width, truncated or trailing bytes, a bad schedule),
 * RP_EVERSION, RP_ECHECKSUM (corrupt), and those of reading a file. */
rp_status rp_mlp_ckpt_read(const char *path, rp_mlp_ckpt *out);
void rp_mlp_ckpt_free(rp_mlp_ckpt *c);
/* RP_ESHAPE, naming both shapes, when c holds another architecture than
 * the model cfg would build on data (features, cfg's hidden widths,
 * classes); else RP_OK. */
rp_status rp_mlp_ckpt_fits(const rp_mlp_ckpt *c, const rp_mlp_config *cfg,
                           const rp_dataset *data);
/* Writes a checkpoint's weights, biases and momentum into m: RP_ESHAPE,
 * naming both shapes, when the file holds another architecture. */
rp_status rp_mlp_ckpt_apply(rp_mlp *m, const rp_mlp_ckpt *c);

#endif
