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
  uint32_t tp; /* --tp: tensor-parallel processors per data group */
  const char *text;
  int text_given; /* --text given (else the default corpus) */
  uint64_t given; /* options seen, bit (option - first option) */
} train_cli;

/* `reprise train --model gpt` after parsing. Exit status as rp_cmd_train. */
int rp_cmd_train_gpt(const train_cli *c);

#endif
