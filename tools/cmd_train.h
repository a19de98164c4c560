/* tools/cmd_train.h — what `reprise train`'s two models share: the parsed
 * options (one grammar, tools/cmd_train.c) and the GPT's entry point
 * (tools/cmd_train_gpt.c). */
#ifndef RP_TOOLS_CMD_TRAIN_H
#define RP_TOOLS_CMD_TRAIN_H

#include "cli.h"

#include "train/gpt.h"
#include "train/mlp.h"

/* The default corpus of --model gpt: fortune cookies from the Debian
 * package `fortunes` (`make deps` installs it). */
#define RP_GPT_DEFAULT_TEXT "/usr/share/games/fortunes/cookie"

typedef struct train_cli {
  rp_backend_kind backend;
  const char *backend_src; /* "--backend", "REPRISE_BACKEND" or NULL */
  rp_mlp_config mc;        /* also --procs, --batch, --seed of the GPT */
  /* --procs, --batch as given: parsed once the model (and its limits) is
   * known */
  const char *procs_arg, *batch_arg;
  uint32_t iters, log_every;
  uint32_t inflight; /* --inflight: replays kept in flight */
  float lr, lr_decay;
  rp_data_kind kind;
  uint32_t samples, classes, features;
  int synth_given;    /* --dataset/--samples/--classes/--features */
  uint64_t max_bytes; /* --max-bytes: --data file size limit (0: default) */
  const char *data, *save_graph, *trace, *json, *timings, *save_weights;
  int eager, compare, dump, dist;
  rp_dump_format dump_fmt;
  const char *labels;       /* --labels: the --data file is IDX images */
  const char *load_weights; /* --load-weights: resume from a checkpoint */
  float val_frac;           /* --val-frac: held out for validation */
  int no_shuffle;           /* --no-shuffle: batches in the file's order */
  /* --model gpt */
  int gpt;
  uint32_t layers, heads, width, context, warmup, sample;
  uint32_t tp;   /* --tp: tensor-parallel processors per data group */
  uint32_t stop; /* --stop: the run ends after this step (<= iters) */
  const char *text;
  int text_given;     /* --text given (else the default corpus) */
  uint64_t given;     /* options seen, bit (option - first option) */
  int lr_from_ckpt;   /* --model gpt: lr is the --load-weights file's */
  uint64_t from_ckpt; /* options the --load-weights file gave, as given */
  const char *lr_arg; /* --lr as given (lr: its float) */
  /* --model gpt --load-weights: the file's header, vocabulary and
   * checksum, when parsing read it for the options' defaults (the whole
   * file checked: rp_gpt_ckpt_read_info; have_ckpt_info 0: not read) */
  rp_gpt_ckpt ckpt_info;
  int have_ckpt_info;
} train_cli;

/* " (from --load-weights)" when the value of the option named `name`
 * (its long name: "iters") is the --load-weights file's, not given; else
 * "". Messages about a value say where it came from. */
const char *rp_train_from_ckpt(const train_cli *c, const char *name);

/* The memory this process may have: the least of physical memory, its
 * cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) and RLIMIT_AS;
 * 0 when none is known. */
uint64_t rp_train_memory_limit(void);

/* `reprise train --model gpt` after parsing. Exit status as rp_cmd_train. */
int rp_cmd_train_gpt(const train_cli *c);

/* ---- --dist: the models across MPI ranks (tools/cmd_train.c) ---- */

typedef struct train_ranks {
  uint32_t rank, ranks; /* MPI_COMM_WORLD's; 0 of 1 without --dist */
  int mpi_mine;         /* this command initialized MPI */
} train_ranks;

/* Starts MPI unless the process already did (the runtime's workers call
 * MPI: MPI_THREAD_MULTIPLE) and fills *r; from then on rp_train_who names
 * the rank. RP_CLI_FAILED when MPI lacks the thread level; in a build
 * without MPI the usage error (exit 2) that --dist gets there. */
int rp_train_mpi_start(train_ranks *r);
/* Finalizes MPI if rp_train_mpi_start initialized it; after the runtime is
 * destroyed (it frees its communicators first). */
void rp_train_mpi_stop(train_ranks *r);
/* "reprise train" or, between the two calls above, "reprise train: rank
 * R": the start of every error message (any rank may fail). */
const char *rp_train_who(void);
/* Says "<rp_train_who()>: <what>: <status name> (<detail>)" on standard
 * error; returns RP_CLI_FAILED. */
int rp_train_fail(const char *what, rp_status st);
/* Says "<rp_train_who()>: <opt> <detail>" on standard error (the file an
 * option names failed to read or write; the detail says why); returns
 * RP_CLI_FAILED. */
int rp_train_opt_fail(const char *opt);
/* rp_runtime_config.comm for --dist: MPI_COMM_WORLD (NULL without MPI). */
void *rp_train_world(void);
/* With dist, the worst rc over the ranks (a failure, then 3, then 0;
 * collective), so that all ranks stop or go on together instead of leaving
 * the others blocked in the next collective call; else rc. */
int rp_train_agree(int dist, int rc);
/* 1 when every rank holds the same n floats bitwise. Collective. */
int rp_train_same_on_every_rank(const float *w, size_t n);

/* An input the ranks must share (tools/cli.h): "the options", the
 * corpus, the checkpoint. */
typedef rp_cli_input train_input;
/* The options that decide the computation (all but output file names). */
uint64_t rp_train_options_hash(const train_cli *c);

/* Appends ", OPT WAS (now NOW)" to the note d (n bytes) of what a
 * checkpoint was saved with: both floats with the digits that tell them
 * apart (rp_cli_float_str). */
void rp_train_note_float(char *d, size_t n, const char *opt, float was,
                         float now);
/* With dist: rp_cli_same_inputs("train", in, n) (collective). Without
 * dist: RP_CLI_OK. */
int rp_train_same_inputs(int dist, const train_input *in, unsigned n);

#endif
