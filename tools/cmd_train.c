/* tools/cmd_train.c — `reprise train`: build the data-parallel MLP step
 * (train/mlp.h), record it, instantiate it and train by replaying it;
 * --eager runs the same step without recording, --compare both ways;
 * --dist runs it on every rank of `mpiexec -n N` (one shard per rank and
 * processor, gradients all-reduced), rank 0 printing and writing files.
 * Exit status: 0 trained, 1 the work failed (engine error, unreadable or
 * malformed --data file, diverged loss), 2 bad usage. */
#include "cmd_train.h"

#include "train/ckpt.h"
#include "train/train_util.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_MPI
#include <mpi.h>
#endif

/* Divergence: a batch loss (at a log point) or the final loss that is not
 * finite or above DIVERGE_FACTOR x max(initial loss, ln(classes)). */
#define DIVERGE_FACTOR 10.0

/* The training log's stream: standard output, or standard error when
 * --dump=dot|json prints its document there, so that the output stays one
 * document that dot or a JSON reader takes (as `reprise dump` puts its
 * --stats text beside one). */
static FILE *train_log;

static void train_usage(FILE *f) {
  fprintf(
      f,
      "usage: reprise train [options]\n"
      "\n"
      "Builds one data-parallel training step of an MLP classifier over P\n"
      "processors (batch repartitioned into P shards, weights replicated,\n"
      "gradients combined by a reduction, SGD on processor 0), records it,\n"
      "instantiates it and trains by replaying it; the batch index and the\n"
      "learning rate are per-replay arguments.\n"
      "\n"
      "  --backend cpu|cuda|auto   engine backend (default auto: CUDA when a\n"
      "                            device answers, else CPU)\n"
      "  --procs P                 data-parallel processors (default 2)\n"
      "  --iters N                 training iterations (default 1000)\n"
      "  --batch B                 global batch size (default 256)\n"
      "  --hidden LIST             hidden layer widths, e.g. 64,64 (default)\n"
      "  --lr X                    learning rate (default 0.05)\n"
      "  --lr-decay X              lr at step t: lr / (1 + X t) (default 0)\n"
      "  --momentum X              SGD momentum in [0, 1) (default 0.9)\n"
      "  --seed N                  data and weight seed, 0..2^64-1 (default "
      "1)\n"
      "  --dataset spirals|blobs   synthetic data set (default spirals)\n"
      "  --samples N               synthetic samples (default 4096)\n"
      "  --classes N               synthetic classes (default 3)\n"
      "  --features N              blobs' dimensions (default 16; spirals 2)\n"
      "  --data FILE               read the data set from FILE instead (CSV\n"
      "                            with a 'label,...' header, or the binary\n"
      "                            RPRSDATA format; docs/training.md); a\n"
      "                            regular file (FIFOs, devices are refused)\n"
      "  --labels FILE             with --data IMAGES: the IDX (MNIST) pair,\n"
      "                            idx3 unsigned-byte images (scaled to\n"
      "                            [0,1], dimensions after the first\n"
      "                            flattened) and idx1 unsigned-byte labels\n"
      "  --val-frac F              hold out F of the samples (rounded to\n"
      "                            whole batches, at least one) for\n"
      "                            validation, reported at log points\n"
      "                            (at most 0.9; default 0.1; 0: none)\n"
      "  --no-shuffle              keep the data set's order (default: a new\n"
      "                            seeded order every epoch)\n"
      "  --load-weights FILE       resume from a --save-weights file: "
      "weights,\n"
      "                            momentum, step; --iters is the total\n"
      "  --max-bytes N             the largest --data file read (default\n"
      "                            4G; K, M, G suffixes); CSV lines are\n"
      "                            limited to 1 MiB; binary and IDX data\n"
      "                            sets to 1 GiB whatever N: samples x\n"
      "                            (features + 1) x 4 bytes\n");
  fprintf(
      f,
      "  --eager                   run the same step eagerly, not recorded\n"
      "  --compare                 train by replay, then eagerly from the "
      "same\n"
      "                            start; report both and compare weights\n"
      "  --dist                    data parallel across MPI ranks: run under\n"
      "                            mpiexec -n N; each rank takes its rows of\n"
      "                            every global batch and splits them over\n"
      "                            its P processors; gradients all-reduced.\n"
      "                            Rank 0 alone prints and writes --json,\n"
      "                            --timings, --trace, --save-graph, --dump\n"
      "                            and --save-weights (its own times)\n"
      "  --inflight N              keep up to N replays in flight (1..64,\n"
      "                            default 1): a replay starts while earlier\n"
      "                            ones run; a loss print first waits for\n"
      "                            all. Reports throughput (wall time /\n"
      "                            iterations, the validation passes left\n"
      "                            out) beside the latency. Not with --eager\n"
      "  --log-every K             print the batch loss every K iterations\n"
      "                            (default: 10 times per run)\n"
      "  --save-graph FILE         write the recorded step as a graph file\n"
      "  --dump[=text|dot|json]    print the recorded step (default text;\n"
      "                            dot, json: the log goes to stderr)\n"
      "  --trace FILE              Chrome trace of the first replays\n"
      "  --json FILE               write the summary as one JSON object\n"
      "  --timings FILE            write every iteration's time (JSON, for\n"
      "                            `reprise plot --train FILE`)\n"
      "  --save-weights FILE       write a checkpoint: weights, momentum, the\n"
      "                            step and the lr schedule (a versioned\n"
      "                            RPRSCKPT container: docs/training.md,\n"
      "                            and docs/gpt.md for --model gpt)\n"
      "  -h, --help                this text\n"
      "\n");
  fprintf(
      f,
      "--model mlp|gpt             the model (default mlp, above). gpt: a\n"
      "                            decoder-only transformer on a text file's\n"
      "                            bytes (see docs/gpt.md), with the shared\n"
      "                            options --backend --procs (default 1)\n"
      "                            --iters (default 600) --batch (default\n"
      "                            16) --lr (peak, default 0.002; below\n"
      "                            10: lr x the weight decay 0.1 must stay\n"
      "                            below 1)\n"
      "                            --seed --eager --log-every --save-graph\n"
      "                            --dump --trace --json --timings\n"
      "                            --save-weights\n"
      "                            --load-weights (the options not given:\n"
      "                            the file's architecture, batch, seed and\n"
      "                            schedule) --max-bytes --inflight\n"
      "                            --dist (each rank its rows of every\n"
      "                            batch, split over its --procs / --tp\n"
      "                            data groups; or --tp above --procs:\n"
      "                            tensor parallel across the ranks) and\n"
      "                            its own:\n"
      "  --layers N                transformer blocks (default 2)\n"
      "  --heads N                 attention heads (default 4)\n"
      "  --width N                 embedding width, a multiple of --heads\n"
      "                            (default 64)\n"
      "  --context N               positions per window (default 64)\n"
      "  --text FILE               the corpus (default " RP_GPT_DEFAULT_TEXT
      ",\n"
      "                            from the Debian package fortunes; at\n"
      "                            most --max-bytes, default 1G)\n"
      "  --warmup N                linear warmup steps before the cosine\n"
      "                            decay (default iters/10, at most 100)\n"
      "  --sample N                bytes sampled at the end (default 200)\n"
      "  --stop N                  stop after step N of the --iters schedule\n"
      "                            (default --iters): --save-weights, then\n"
      "                            --load-weights with the same --iters\n"
      "                            goes on bitwise as one run would\n"
      "  --tp N                    tensor parallelism: attention heads and\n"
      "                            MLP columns split over N processors\n"
      "                            (default 1; --procs a multiple of N, the\n"
      "                            rest data parallel; with --dist, N may\n"
      "                            span ranks: a multiple of --procs, the\n"
      "                            groups over all ranks' processors;\n"
      "                            docs/distributed.md)\n"
      "\n"
      "Exit status: 0 trained, 1 failed (engine error, bad --data or\n"
      "--load-weights file, diverged: a loss not finite or above 10x\n"
      "max(initial loss, ln(classes)); --model gpt: a batch or validation\n"
      "loss not finite or above 10x max(initial validation loss,\n"
      "ln(vocabulary))), 2 bad usage.\n");
}

#define ITERS_MAX 100000000u /* --iters, the schedule's steps */
_Static_assert(ITERS_MAX == RP_GPT_ITERS_MAX, "one limit on the steps");

/* ---- option values ---- */

static int bad(const char *opt, const char *s, const char *want) {
  return rp_cli_usage_error("train", "%s: '%s' is not %s", opt, s, want);
}

static int out_of(double v, double lo, int lo_open, double hi, int hi_open) {
  return v < lo || (lo_open && v == lo) || v > hi || (hi_open && v == hi);
}

/* A finite real in [lo, hi) (hi_open) or [lo, hi]; lo_open excludes lo.
 * The range holds for the float the run uses: 1e-50 is 0 as a float. */
static int parse_real(const char *opt, const char *s, double lo, int lo_open,
                      double hi, int hi_open, float *out) {
  double v;
  char lb = lo_open ? '(' : '[', hb = hi_open ? ')' : ']';
  if (!rp_cli_parse_double(s, &v) || out_of(v, lo, lo_open, hi, hi_open))
    return rp_cli_usage_error("train", "%s: '%s' is not a number in %c%g, %g%c",
                              opt, s, lb, lo, hi, hb);
  float f = (float)v;
  if (out_of(f, lo, lo_open, hi, hi_open))
    return rp_cli_usage_error("train",
                              "%s: '%s' is %g as a 32-bit float, not in "
                              "%c%g, %g%c",
                              opt, s, (double)f, lb, lo, hi, hb);
  *out = f;
  return RP_CLI_OK;
}

typedef struct hidden_parse {
  rp_mlp_config *mc;
  int rc;
} hidden_parse;

static int add_hidden(const char *item, void *arg) {
  hidden_parse *h = arg;
  if (h->mc->nhidden == RP_MLP_MAX_HIDDEN)
    return rp_cli_usage_error("train", "--hidden: more than %d layers",
                              RP_MLP_MAX_HIDDEN);
  return rp_cli_parse_u32("train", "--hidden", item, 1, RP_MLP_MAX_WIDTH,
                          &h->mc->hidden[h->mc->nhidden++]);
}

static int parse_hidden(const char *s, rp_mlp_config *mc) {
  hidden_parse h = {mc, 0};
  mc->nhidden = 0;
  return rp_cli_each_item(s, add_hidden, &h);
}

static int parse_dump(const char *s, train_cli *c) {
  c->dump = 1;
  if (!s || strcmp(s, "text") == 0)
    c->dump_fmt = RP_DUMP_TEXT;
  else if (strcmp(s, "dot") == 0)
    c->dump_fmt = RP_DUMP_DOT;
  else if (strcmp(s, "json") == 0)
    c->dump_fmt = RP_DUMP_JSON;
  else
    return bad("--dump", s, "text, dot or json");
  return RP_CLI_OK;
}

/* ---- parsing ---- */

enum {
  OPT_BACKEND = 256,
  OPT_PROCS,
  OPT_ITERS,
  OPT_BATCH,
  OPT_HIDDEN,
  OPT_LR,
  OPT_LR_DECAY,
  OPT_MOMENTUM,
  OPT_SEED,
  OPT_DATASET,
  OPT_SAMPLES,
  OPT_CLASSES,
  OPT_FEATURES,
  OPT_DATA,
  OPT_EAGER,
  OPT_COMPARE,
  OPT_LOG_EVERY,
  OPT_SAVE_GRAPH,
  OPT_DUMP,
  OPT_TRACE,
  OPT_TIMINGS,
  OPT_JSON,
  OPT_DIST,
  OPT_SAVE_WEIGHTS,
  OPT_INFLIGHT,
  OPT_MAX_BYTES,
  OPT_LABELS,
  OPT_VAL_FRAC,
  OPT_NO_SHUFFLE,
  OPT_LOAD_WEIGHTS,
  OPT_MODEL, /* the GPT's options (cmd_train.h) */
  OPT_LAYERS,
  OPT_HEADS,
  OPT_WIDTH,
  OPT_CONTEXT,
  OPT_TEXT,
  OPT_WARMUP,
  OPT_SAMPLE,
  OPT_TP,
  OPT_STOP,
  OPT_END,
};

static const struct option LONGOPTS[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"procs", required_argument, NULL, OPT_PROCS},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"lr", required_argument, NULL, OPT_LR},
    {"lr-decay", required_argument, NULL, OPT_LR_DECAY},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"seed", required_argument, NULL, OPT_SEED},
    {"dataset", required_argument, NULL, OPT_DATASET},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"features", required_argument, NULL, OPT_FEATURES},
    {"data", required_argument, NULL, OPT_DATA},
    {"eager", no_argument, NULL, OPT_EAGER},
    {"compare", no_argument, NULL, OPT_COMPARE},
    {"log-every", required_argument, NULL, OPT_LOG_EVERY},
    {"save-graph", required_argument, NULL, OPT_SAVE_GRAPH},
    {"dump", optional_argument, NULL, OPT_DUMP},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"json", required_argument, NULL, OPT_JSON},
    {"timings", required_argument, NULL, OPT_TIMINGS},
    {"dist", no_argument, NULL, OPT_DIST},
    {"save-weights", required_argument, NULL, OPT_SAVE_WEIGHTS},
    {"inflight", required_argument, NULL, OPT_INFLIGHT},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"val-frac", required_argument, NULL, OPT_VAL_FRAC},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"load-weights", required_argument, NULL, OPT_LOAD_WEIGHTS},
    {"model", required_argument, NULL, OPT_MODEL},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"text", required_argument, NULL, OPT_TEXT},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"sample", required_argument, NULL, OPT_SAMPLE},
    {"tp", required_argument, NULL, OPT_TP},
    {"stop", required_argument, NULL, OPT_STOP},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int apply_data_option(train_cli *c, int opt, const char *arg) {
  c->synth_given = 1;
  switch (opt) {
  case OPT_DATASET:
    return rp_data_kind_parse(arg, &c->kind)
               ? bad("--dataset", arg, "spirals or blobs")
               : RP_CLI_OK;
  case OPT_SAMPLES:
    return rp_cli_parse_u32("train", "--samples", arg, 1, 1u << 24,
                            &c->samples);
  case OPT_CLASSES:
    return rp_cli_parse_u32("train", "--classes", arg, 2, 1000, &c->classes);
  default:
    return rp_cli_parse_u32("train", "--features", arg, 1, 4096, &c->features);
  }
}

_Static_assert(ULONG_MAX == UINT64_MAX,
               "--seed parses 64 bits as unsigned long");

/* One option. RP_CLI_OK, RP_CLI_USAGE, or -1 after --help. */
static int apply_option(train_cli *c, int opt, const char *arg) {
  unsigned long seed = 0;
  switch (opt) {
  case OPT_BACKEND:
    c->backend_src = "--backend";
    return rp_cli_parse_backend("train", arg, &c->backend);
  case OPT_PROCS:
    c->procs_arg = arg;
    return RP_CLI_OK;
  case OPT_ITERS:
    return rp_cli_parse_u32("train", "--iters", arg, 1, ITERS_MAX, &c->iters);
  case OPT_BATCH:
    c->batch_arg = arg;
    return RP_CLI_OK;
  case OPT_HIDDEN:
    return parse_hidden(arg, &c->mc);
  case OPT_LR:
    c->lr_arg = arg;
    return parse_real("--lr", arg, 0, 1, 100, 0, &c->lr);
  case OPT_LR_DECAY:
    return parse_real("--lr-decay", arg, 0, 0, 1e6, 0, &c->lr_decay);
  case OPT_MOMENTUM:
    return parse_real("--momentum", arg, 0, 0, 1, 1, &c->mc.momentum);
  case OPT_SEED:
    /* 64 bits, as the checkpoints' seed: a mismatch's "--seed N" is
     * always an option the user can give */
    if (!rp_cli_parse_uint(arg, 0, ULONG_MAX, &seed))
      return rp_cli_usage_error("train",
                                "--seed: '%s' is not a number in "
                                "0..%lu",
                                arg, ULONG_MAX);
    c->mc.seed = seed;
    return RP_CLI_OK;
  case OPT_DATASET:
  case OPT_SAMPLES:
  case OPT_CLASSES:
  case OPT_FEATURES:
    return apply_data_option(c, opt, arg);
  case OPT_DATA:
    c->data = arg;
    return RP_CLI_OK;
  case OPT_MAX_BYTES:
    return rp_cli_parse_bytes("train", "--max-bytes", arg, (uint64_t)1 << 40,
                              &c->max_bytes);
  case OPT_EAGER:
    c->eager = 1;
    return RP_CLI_OK;
  case OPT_COMPARE:
    c->compare = 1;
    return RP_CLI_OK;
  case OPT_LOG_EVERY:
    return rp_cli_parse_u32("train", "--log-every", arg, 1, 100000000,
                            &c->log_every);
  case OPT_SAVE_GRAPH:
    c->save_graph = arg;
    return RP_CLI_OK;
  case OPT_DUMP:
    return parse_dump(arg, c);
  case OPT_TRACE:
    c->trace = arg;
    return RP_CLI_OK;
  case OPT_JSON:
    c->json = arg;
    return RP_CLI_OK;
  case OPT_TIMINGS:
    c->timings = arg;
    return RP_CLI_OK;
  case OPT_DIST:
    c->dist = c->mc.dist = 1;
    return RP_CLI_OK;
  case OPT_SAVE_WEIGHTS:
    c->save_weights = arg;
    return RP_CLI_OK;
  case OPT_INFLIGHT:
    return rp_cli_parse_u32("train", "--inflight", arg, 1, RP_MLP_MAX_INFLIGHT,
                            &c->inflight);
  case OPT_LABELS:
    c->labels = arg;
    return RP_CLI_OK;
  case OPT_VAL_FRAC:
    return parse_real("--val-frac", arg, 0, 0, 0.9, 0, &c->val_frac);
  case OPT_NO_SHUFFLE:
    c->no_shuffle = 1;
    return RP_CLI_OK;
  case OPT_LOAD_WEIGHTS:
    c->load_weights = arg;
    return RP_CLI_OK;
  case OPT_MODEL:
    if (strcmp(arg, "mlp") && strcmp(arg, "gpt"))
      return bad("--model", arg, "mlp or gpt");
    c->gpt = strcmp(arg, "gpt") == 0;
    return RP_CLI_OK;
  case OPT_LAYERS:
    return rp_cli_parse_u32("train", "--layers", arg, 1, RP_GPT_MAX_LAYERS,
                            &c->layers);
  case OPT_HEADS:
    return rp_cli_parse_u32("train", "--heads", arg, 1, 256, &c->heads);
  case OPT_WIDTH:
    return rp_cli_parse_u32("train", "--width", arg, 1, RP_GPT_MAX_WIDTH,
                            &c->width);
  case OPT_CONTEXT:
    return rp_cli_parse_u32("train", "--context", arg, 1, RP_GPT_MAX_CONTEXT,
                            &c->context);
  case OPT_TEXT:
    c->text = arg;
    c->text_given = 1;
    return RP_CLI_OK;
  case OPT_WARMUP:
    return rp_cli_parse_u32("train", "--warmup", arg, 0, 100000000, &c->warmup);
  case OPT_SAMPLE:
    return rp_cli_parse_u32("train", "--sample", arg, 0, 1000000, &c->sample);
  case OPT_TP:
    return rp_cli_parse_u32("train", "--tp", arg, 1, RP_GPT_MAX_PROCS, &c->tp);
  case OPT_STOP:
    return rp_cli_parse_u32("train", "--stop", arg, 1, 100000000, &c->stop);
  case 'h':
    train_usage(stdout);
    return -1;
  default: /* getopt_long already said what was wrong */
    return rp_cli_bad_option("train");
  }
}

/* --trace and --inflight above 1 time the recorded step: not with
 * --eager (both models). */
static int replay_only(const train_cli *c) {
  if (c->trace && c->eager)
    return rp_cli_usage_error("train", "--trace needs the recorded step "
                                       "(drop --eager)");
  if (c->inflight > 1 && c->eager)
    return rp_cli_usage_error("train",
                              "--inflight %u needs the recorded "
                              "step (drop --eager)",
                              c->inflight);
  return RP_CLI_OK;
}

/* Combinations the options alone cannot express. */
static int check_options(train_cli *c) {
  if (c->eager && c->compare)
    return rp_cli_usage_error("train", "--eager and --compare exclude each "
                                       "other (--compare runs both)");
  if (c->labels && !c->data)
    return rp_cli_usage_error("train", "--labels FILE needs --data IMAGES "
                                       "(the IDX images file)");
  if (c->data && c->synth_given)
    return rp_cli_usage_error("train", "--data FILE excludes --dataset, "
                                       "--samples, --classes and --features");
  if (c->kind == RP_DATA_SPIRALS && c->features && c->features != 2)
    return rp_cli_usage_error("train",
                              "--features %u: spirals have 2 "
                              "features (use --dataset blobs)",
                              c->features);
  if (c->mc.procs > c->mc.batch)
    return rp_cli_usage_error("train",
                              "--procs %u is more than --batch %u: "
                              "every processor needs a shard of the batch",
                              c->mc.procs, c->mc.batch);
  /* the synthetic set's size, as rp_data_generate counts it */
  uint64_t synth = ((uint64_t)c->features + 1) * 4 * c->samples;
  if (!c->data && synth > RP_DATA_MAX_BYTES)
    return rp_cli_usage_error("train",
                              "--samples %u x --features %u is %llu bytes of "
                              "data (at most %llu)",
                              c->samples, c->features,
                              (unsigned long long)synth,
                              (unsigned long long)RP_DATA_MAX_BYTES);
  if (c->backend == RP_BACKEND_CUDA && c->mc.procs > RP_MAX_GPUS)
    return rp_cli_usage_error("train",
                              "--procs %u: the CUDA backend has at most %d "
                              "processors (logical GPUs); up to %d run on "
                              "the CPU backend",
                              c->mc.procs, RP_MAX_GPUS, RP_MLP_MAX_PROCS);
  if (!c->data && c->mc.batch > c->samples)
    return rp_cli_usage_error("train", "--batch %u is more than --samples %u",
                              c->mc.batch, c->samples);
  /* --dist: checked with the number of ranks once MPI started */
  if (!c->dist && rp_mlp_split_check(c->mc.batch, 1, c->mc.procs) != RP_OK)
    return rp_cli_usage_error("train", "--batch %u over --procs %u: %s",
                              c->mc.batch, c->mc.procs, rp_error_detail());
  return replay_only(c);
}

#define GIVEN(c, o) (((c)->given >> ((o)-OPT_BACKEND)) & 1u)

/* An option's long name, by its value. */
static const char *opt_name(int o) {
  for (const struct option *l = LONGOPTS; l->name; l++)
    if (l->val == o)
      return l->name;
  return "?";
}

#define FROM(c, o) rp_train_from_ckpt((c), opt_name(o))

const char *rp_train_from_ckpt(const train_cli *c, const char *name) {
  for (const struct option *l = LONGOPTS; l->name; l++)
    if (l->val >= OPT_BACKEND && l->val < OPT_END && !strcmp(l->name, name))
      return (c->from_ckpt >> (l->val - OPT_BACKEND)) & 1u
                 ? " (from --load-weights)"
                 : "";
  return "";
}

/* --model mlp (the default): the GPT's own options are refused. */
static int gpt_only(const train_cli *c) {
  const int o[] = {OPT_LAYERS, OPT_HEADS,  OPT_WIDTH, OPT_CONTEXT, OPT_TEXT,
                   OPT_WARMUP, OPT_SAMPLE, OPT_TP,    OPT_STOP};
  for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
    if (GIVEN(c, o[i]))
      return rp_cli_usage_error("train", "--%s is an option of --model gpt",
                                opt_name(o[i]));
  return RP_CLI_OK;
}

/* --model gpt --load-weights FILE: the options not given take the
 * checkpoint's values (its architecture, batch and seed, and its schedule
 * when it holds one), so the file alone resumes its run; they count as
 * given from here on. */
static int gpt_ckpt_defaults(train_cli *c) {
  const int o[] = {OPT_LAYERS, OPT_HEADS, OPT_WIDTH, OPT_CONTEXT, OPT_BATCH,
                   OPT_SEED,   OPT_ITERS, OPT_LR,    OPT_WARMUP};
  int all = 1;
  for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
    all &= (int)GIVEN(c, o[i]);
  if (!c->load_weights || all)
    return RP_CLI_OK;
  rp_gpt_ckpt k; /* gpt_options checked the name first */
  if (rp_gpt_ckpt_read_info(c->load_weights, &k) != RP_OK)
    return rp_train_opt_fail("--load-weights");
  uint32_t *u[] = {&c->layers, &c->heads, &c->width, &c->context, &c->mc.batch};
  const uint32_t ku[] = {k.layers, k.heads, k.width, k.context, k.batch};
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
    if (!GIVEN(c, o[i]))
      *u[i] = ku[i];
  if (!GIVEN(c, OPT_SEED))
    c->mc.seed = k.seed;
  if (k.iters) { /* 0: written by the library, no schedule */
    if (!GIVEN(c, OPT_ITERS))
      c->iters = k.iters;
    if (!GIVEN(c, OPT_LR)) {
      c->lr = k.lr;
      c->lr_from_ckpt = 1;
    }
    if (!GIVEN(c, OPT_WARMUP))
      c->warmup = k.warmup;
  }
  for (size_t i = 0; i < sizeof o / sizeof o[0]; i++) {
    uint64_t bit = 1ull << (o[i] - OPT_BACKEND);
    if (!(c->given & bit) && (k.iters || (o[i] != OPT_ITERS && o[i] != OPT_LR &&
                                          o[i] != OPT_WARMUP)))
      c->from_ckpt |= bit;
  }
  c->given |= c->from_ckpt;
  c->ckpt_info = k; /* the run's load_ckpt takes it from here */
  c->have_ckpt_info = 1;
  return RP_CLI_OK;
}

/* --model gpt: the MLP's own options are refused, the shared ones get the
 * GPT's defaults (or a --load-weights checkpoint's) where not given, the
 * output paths are checked (their names against each other and the
 * inputs' before the checkpoint is read: usage errors, before any work). */
static int gpt_options(train_cli *c) {
  const int o[] = {OPT_HIDDEN,  OPT_LR_DECAY, OPT_MOMENTUM, OPT_DATASET,
                   OPT_SAMPLES, OPT_CLASSES,  OPT_FEATURES, OPT_DATA,
                   OPT_COMPARE, OPT_LABELS,   OPT_VAL_FRAC, OPT_NO_SHUFFLE};
  for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
    if (GIVEN(c, o[i]))
      return rp_cli_usage_error("train",
                                "--%s is not an option of --model "
                                "gpt",
                                opt_name(o[i]));
  if (!c->text)
    c->text = RP_GPT_DEFAULT_TEXT;
  const char *const outs[][2] = {{"--json", c->json},
                                 {"--trace", c->trace},
                                 {"--timings", c->timings},
                                 {"--save-graph", c->save_graph},
                                 {"--save-weights", c->save_weights}};
  const char *const ins[][2] = {{"--text", c->text},
                                {"--load-weights", c->load_weights}};
  const size_t no = sizeof outs / sizeof outs[0],
               ni = sizeof ins / sizeof ins[0];
  int rc = rp_cli_check_inputs("train", ins, ni);
  if (!rc)
    rc = rp_cli_check_not_inputs("train", outs, no, ins, ni);
  if (!rc)
    rc = rp_cli_check_output_names("train", outs, no);
  if (!rc)
    rc = gpt_ckpt_defaults(c);
  if (rc != RP_CLI_OK)
    return rc;
  if (!GIVEN(c, OPT_PROCS))
    c->mc.procs = 1;
  if (!GIVEN(c, OPT_BATCH))
    c->mc.batch = 16;
  if (!GIVEN(c, OPT_ITERS))
    c->iters = 600;
  if (!GIVEN(c, OPT_LR))
    c->lr = 2e-3f;
  c->layers = GIVEN(c, OPT_LAYERS) ? c->layers : 2;
  c->heads = GIVEN(c, OPT_HEADS) ? c->heads : 4;
  c->width = GIVEN(c, OPT_WIDTH) ? c->width : 64;
  c->context = GIVEN(c, OPT_CONTEXT) ? c->context : 64;
  c->warmup = GIVEN(c, OPT_WARMUP) ? c->warmup
              : c->iters >= 1000   ? 100
                                   : c->iters / 10;
  if (c->warmup && c->warmup >= c->iters)
    return rp_cli_usage_error("train",
                              "--warmup %u%s is not below --iters %u%s: the "
                              "learning rate would never reach --lr",
                              c->warmup, FROM(c, OPT_WARMUP), c->iters,
                              FROM(c, OPT_ITERS));
  rp_gpt_config dc;
  rp_gpt_config_init(&dc);
  /* judged as trained: the float lr (the checks of rp_gpt_step and the
   * AdamW task), printed with the digits that tell it from the limit */
  if ((double)c->lr * dc.weight_decay >= 1) {
    char lr[32], by[32], lim[32];
    rp_cli_float_str(lr, sizeof lr, c->lr);
    rp_cli_float_str(by, sizeof by, c->lr * dc.weight_decay); /* AdamW's */
    rp_cli_float_str(lim, sizeof lim, 1 / dc.weight_decay);
    if (c->lr_from_ckpt) {
      rp_cli_say(stderr,
                 "%s: --load-weights %s: its lr %s: with the GPT's weight "
                 "decay %g, AdamW's decay step would multiply the matrices "
                 "by 1 - %s (give --lr below %s)\n",
                 rp_train_who(), c->load_weights, lr, (double)dc.weight_decay,
                 by, lim);
      return RP_CLI_FAILED;
    }
    double given = 0; /* the text given, when the float reads otherwise */
    char as[96] = "";
    if (c->lr_arg && rp_cli_parse_double(c->lr_arg, &given) &&
        given != strtod(lr, NULL))
      snprintf(as, sizeof as, " ('%s' as a 32-bit float)", c->lr_arg);
    return rp_cli_usage_error("train",
                              "--lr %s%s: with the GPT's weight decay %g, "
                              "AdamW's decay step would multiply the "
                              "matrices by 1 - %s (need --lr below %s)",
                              lr, as, (double)dc.weight_decay, by, lim);
  }
  /* the file's domain takes lr 0 (the library may write one), --lr does
   * not: every step would leave the weights as they are */
  if (c->lr_from_ckpt && !(c->lr > 0)) {
    rp_cli_say(stderr,
               "%s: --load-weights %s: its lr 0: every step would leave the "
               "weights as they are (give --lr above 0)\n",
               rp_train_who(), c->load_weights);
    return RP_CLI_FAILED;
  }
  c->sample = GIVEN(c, OPT_SAMPLE) ? c->sample : 200;
  if (!GIVEN(c, OPT_STOP))
    c->stop = c->iters;
  if (c->stop > c->iters)
    return rp_cli_usage_error("train",
                              "--stop %u is past --iters %u%s, the "
                              "schedule's last step",
                              c->stop, c->iters, FROM(c, OPT_ITERS));
  if (!c->log_every)
    c->log_every = c->iters >= 10 ? c->iters / 10 : 1;
  if (c->width % c->heads)
    return rp_cli_usage_error("train",
                              "--width %u%s is not a multiple of "
                              "--heads %u%s",
                              c->width, FROM(c, OPT_WIDTH), c->heads,
                              FROM(c, OPT_HEADS));
  c->tp = GIVEN(c, OPT_TP) ? c->tp : 1;
  if (c->dist && c->tp > c->mc.procs && c->tp % c->mc.procs)
    return rp_cli_usage_error("train",
                              "--tp %u is not a multiple of --procs %u (a "
                              "group across ranks takes every processor of "
                              "--tp / --procs ranks)",
                              c->tp, c->mc.procs);
  if (!(c->dist && c->tp > c->mc.procs) && c->mc.procs % c->tp)
    return rp_cli_usage_error("train",
                              "--procs %u is not a multiple of --tp %u (the "
                              "processors form data groups of --tp; with "
                              "--dist, --tp may also span ranks)",
                              c->mc.procs, c->tp);
  if (c->heads % c->tp)
    return rp_cli_usage_error("train",
                              "--heads %u%s is not a multiple of --tp %u: "
                              "every processor needs whole heads",
                              c->heads, FROM(c, OPT_HEADS), c->tp);
  if (c->mc.procs / c->tp > c->mc.batch)
    return rp_cli_usage_error("train",
                              "--procs %u / --tp %u is more than --batch "
                              "%u%s: every data group needs rows of the batch",
                              c->mc.procs, c->tp, c->mc.batch,
                              FROM(c, OPT_BATCH));
  /* the kernels index with int32: the activations and the attention
   * scores must stay below 2^31 (rp_gpt_config_check) */
  uint64_t rows = (uint64_t)c->mc.batch * c->context;
  if (rows * c->width * 4 >= (1u << 31) ||
      rows * c->heads * c->context >= (1u << 31))
    return rp_cli_usage_error("train",
                              "--batch %u%s x --context %u%s is too large "
                              "for the kernels' int32 sizes (batch x context "
                              "x 4 x width and batch x heads x context^2 "
                              "must stay below 2^31)",
                              c->mc.batch, FROM(c, OPT_BATCH), c->context,
                              FROM(c, OPT_CONTEXT));
  /* --dist: checked with the number of ranks, once MPI has started */
  if (!c->dist && rp_gpt_split_check(c->mc.batch, 1, c->mc.procs, c->tp))
    return rp_cli_usage_error("train", "--batch %u%s over --procs %u: %s",
                              c->mc.batch, FROM(c, OPT_BATCH), c->mc.procs,
                              rp_error_detail());
  if ((rc = replay_only(c)) != RP_CLI_OK)
    return rc;
  return rp_cli_check_outputs("train", outs, no);
}

static int parse_args(int argc, char **argv, train_cli *c) {
  static char prog[] = "reprise train"; /* getopt's messages name argv[0] */
  argv[0] = prog;
  rp_mlp_config_init(&c->mc);
  c->backend = RP_BACKEND_AUTO;
  c->iters = 1000;
  c->inflight = 1;
  c->lr = 0.05f;
  c->kind = RP_DATA_SPIRALS;
  c->samples = 4096;
  c->classes = 3;
  rp_cli_set_usage(train_usage);
  c->val_frac = 0.1f;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "h", LONGOPTS, NULL)) != -1) {
    /* an option given twice takes its last value (README "The command
     * line"); --hidden is one list of widths, which a second --hidden
     * would silently replace, or (as bench's lists) add to */
    if (opt == OPT_HIDDEN && GIVEN(c, OPT_HIDDEN))
      return rp_cli_usage_error("train",
                                "--hidden given twice (--hidden %s): give "
                                "every width in one list (--hidden 64,32)",
                                optarg);
    if (opt >= OPT_BACKEND && opt < OPT_END)
      c->given |= 1ull << (opt - OPT_BACKEND);
    int rc = apply_option(c, opt, optarg);
    if (rc)
      return rc;
  }
  if (optind < argc)
    return rp_cli_usage_error("train", "unexpected argument '%s'",
                              argv[optind]);
  /* the environment where no option decided (README "Environment") */
  int rc = rp_cli_env_backend_src("train", &c->backend, &c->backend_src);
  if (rc)
    return rc;
  /* --procs and --batch in the model's limits (the last one given wins) */
  if ((c->procs_arg &&
       (rc = rp_cli_parse_u32("train", "--procs", c->procs_arg, 1,
                              c->gpt ? RP_GPT_MAX_PROCS : RP_MLP_MAX_PROCS,
                              &c->mc.procs))) ||
      (c->batch_arg &&
       (rc = rp_cli_parse_u32("train", "--batch", c->batch_arg, 1,
                              c->gpt ? RP_GPT_MAX_BATCH : 1u << 24,
                              &c->mc.batch))))
    return rc;
  if (c->gpt || (rc = gpt_only(c)))
    return c->gpt ? gpt_options(c) : rc;
  /* as --labels: an option that would do nothing is refused */
  if (GIVEN(c, OPT_MAX_BYTES) && !c->data)
    return rp_cli_usage_error("train",
                              "--max-bytes limits the --data file read: it "
                              "needs --data FILE (a --dataset is generated, "
                              "not read)");
  if (!c->features)
    c->features = c->kind == RP_DATA_SPIRALS ? 2 : 16;
  if (!c->log_every)
    c->log_every = c->iters >= 10 ? c->iters / 10 : 1;
  if ((rc = check_options(c)))
    return rc;
  /* every output path, before any work */
  const char *const outs[][2] = {{"--json", c->json},
                                 {"--trace", c->trace},
                                 {"--timings", c->timings},
                                 {"--save-graph", c->save_graph},
                                 {"--save-weights", c->save_weights}};
  const char *const ins[][2] = {{"--data", c->data},
                                {"--labels", c->labels},
                                {"--load-weights", c->load_weights}};
  if ((rc = rp_cli_check_inputs("train", ins, sizeof ins / sizeof ins[0])) ||
      (rc = rp_cli_check_not_inputs("train", outs, sizeof outs / sizeof outs[0],
                                    ins, sizeof ins / sizeof ins[0])))
    return rc;
  return rp_cli_check_outputs("train", outs, sizeof outs / sizeof outs[0]);
}

/* ---- progress ---- */

/* One log point: the batch loss and, with a validation set, its figures. */
typedef struct log_point {
  uint32_t iter;
  float loss;
  double val_loss, val_acc;
} log_point;

typedef struct train_state train_state;

typedef struct progress {
  uint32_t iters, every;
  int quiet; /* --dist: ranks other than 0 print nothing */
  int tty;
  const char *what; /* "replay" or "eager" */
  float last_loss;
  train_state *s; /* validation at log points, the log, divergence */
  uint32_t done;  /* steps done (the last step's index + 1) */
  int failed;     /* a validation failed: stopped, s has said why */
  int bar_open;   /* the bar is the tty's last line, unterminated */
} progress;

static void draw_bar(progress *p, uint32_t done) {
  enum { WIDTH = 30 };
  int fill = (int)((uint64_t)done * WIDTH / p->iters);
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf(train_log, "\r%-6s [%s] %u/%u  loss %.4f ", p->what, bar, done,
          p->iters, (double)p->last_loss);
  fflush(train_log);
  p->bar_open = 1;
}

/* A run that stops before its last iteration (divergence, a failure)
 * leaves the bar as it was: end its line before anything else prints. */
static void end_bar(progress *p) {
  if (p->bar_open)
    fprintf(train_log, "\n");
  p->bar_open = 0;
}

static int step_checks(progress *p, uint32_t t, float loss);
static void print_log_line(const progress *p, uint32_t done, float loss);

static int on_step(void *arg, uint32_t t, float loss) {
  progress *p = arg;
  uint32_t done = t + 1;
  p->done = done;
  int stop = step_checks(p, t, loss); /* collective: before quiet's return */
  if (p->quiet)
    return stop;
  if (!isnan(loss))
    p->last_loss = loss;
  int log = !isnan(loss) && (t % p->every == 0 || done == p->iters);
  if (log && p->tty) {
    /* clear the bar, print the line, redraw */
    fprintf(train_log, "\r%-60s\r", "");
    p->bar_open = 0;
  }
  if (log)
    print_log_line(p, done, loss);
  uint32_t tick = p->iters >= 100 ? p->iters / 100 : 1;
  if (p->tty && (log || done % tick == 0 || done == p->iters))
    draw_bar(p, done);
  if (p->tty && done == p->iters)
    end_bar(p);
  return stop;
}

/* ---- timings ---- */

typedef struct run_stats {
  int ran;
  double median_us, p99_us;
  /* throughput: the loop's wall time, the validation passes at its log
   * points left out, per iteration and as samples per second; and the
   * samples per second with them */
  double wall_us_per_iter, samples_per_s, samples_per_s_with_val;
  int val_ran; /* the loop ran validation passes */
  double final_loss, accuracy;
} run_stats;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Latency from the per-iteration times; throughput from the wall time of
 * the whole loop (with replays in flight the latencies overlap) less the
 * val_ns its log points spent on validation passes (no step runs then). */
static void summarize(uint64_t *ns, uint32_t n, uint32_t batch, uint64_t wall,
                      uint64_t val_ns, run_stats *s) {
  double total = (double)wall,
         loop = wall > val_ns ? (double)(wall - val_ns) : 0;
  qsort(ns, n, sizeof *ns, cmp_u64);
  s->median_us = (n % 2 ? (double)ns[n / 2]
                        : ((double)ns[n / 2 - 1] + (double)ns[n / 2]) / 2) /
                 1e3;
  uint32_t k = (uint32_t)ceil(0.99 * n);
  s->p99_us = (double)ns[k ? k - 1 : 0] / 1e3;
  s->samples_per_s = loop > 0 ? (double)n * batch / (loop * 1e-9) : 0;
  s->samples_per_s_with_val =
      total > 0 ? (double)n * batch / (total * 1e-9) : 0;
  s->wall_us_per_iter = loop / 1e3 / n;
  s->val_ran = val_ns > 0;
  s->ran = 1;
}

/* ---- one run on one backend ---- */

struct train_state {
  const train_cli *c;
  rp_dataset data;
  rp_runtime *rt;
  rp_mlp *m;
  rp_graph *g;
  rp_exec *ex;
  uint64_t *ns;
  FILE *timings;        /* --timings: rows appended by every run */
  rp_output *timings_o; /* its writer: the file is replaced at the end */
  uint32_t timing_rows;
  double init_loss, init_acc, instantiate_ms;
  run_stats replay, eager;
  int compared, bitwise;
  double max_diff;
  train_ranks tr;                 /* --dist: MPI_COMM_WORLD's; else 0 of 1 */
  int ranks_checked, ranks_equal; /* --dist: final weights on every rank */
  rp_dataset val;                 /* --val-frac: the held-out samples */
  rp_mlp_ckpt ckpt;               /* --load-weights */
  uint32_t start;                 /* the first step: the file's, or 0 */
  uint32_t steps_done;            /* the last run's steps (for the file) */
  double limit;                   /* divergence: a loss above it */
  int diverged;
  uint32_t diverged_at;
  double diverged_loss;
  double val_loss, val_acc; /* the last run's final validation */
  log_point *log;           /* the last run's log points */
  uint32_t nlog, caplog;
  uint64_t val_ns; /* the last run's validation passes at its log points */
};

#define FALLBACK 3 /* internal: retry on the CPU backend */

/* --dist: this rank, named in every error message (any rank may fail). */
static int LOG_RANK = -1;

const char *rp_train_who(void) {
  static char buf[48];
  if (LOG_RANK < 0)
    return "reprise train";
  snprintf(buf, sizeof buf, "reprise train: rank %d", LOG_RANK);
  return buf;
}

static const char *who(void) {
  return rp_train_who();
}

int rp_train_fail(const char *what, rp_status st) {
  rp_cli_say(stderr, "%s: %s: %s (%s)\n", who(), what, rp_status_name(st),
             rp_error_detail());
  return RP_CLI_FAILED;
}

int rp_train_opt_fail(const char *opt) {
  rp_cli_say(stderr, "%s: %s %s\n", who(), opt, rp_error_detail());
  return RP_CLI_FAILED;
}

static int oom(const char *what) {
  rp_cli_say(stderr, "%s: %s: out of memory\n", who(), what);
  return RP_CLI_FAILED;
}

/* At a step that read the batch loss (every --log-every steps and the
 * last, as the training loops read it): the validation figures
 * (collective under --dist: every rank reads the same steps' losses), the
 * log and the divergence check. Non-zero stops training. */
static int step_checks(progress *p, uint32_t t, float loss) {
  train_state *s = p->s;
  if (!s || !(t % p->every == 0 || t + 1 == p->iters))
    return 0;
  log_point lp = {t + 1, loss, NAN, NAN};
  if (s->val.n) {
    uint64_t t0 = rp_train_now_ns();
    rp_status st = rp_mlp_evaluate_val(s->m, &lp.val_loss, &lp.val_acc);
    s->val_ns += rp_train_now_ns() - t0; /* not the loop's throughput */
    if (st != RP_OK) {
      rp_train_fail("validation", st);
      p->failed = 1;
      return 1;
    }
  }
  if (s->nlog < s->caplog)
    s->log[s->nlog++] = lp;
  if (!isfinite(loss) || loss > s->limit) {
    s->diverged = 1;
    s->diverged_at = t + 1;
    s->diverged_loss = loss;
    return 1;
  }
  return 0;
}

static void print_log_line(const progress *p, uint32_t done, float loss) {
  const train_state *s = p->s;
  fprintf(train_log, "%-6s iter %6u/%u  loss %.4f", p->what, done, p->iters,
          (double)loss);
  const log_point *lp = s && s->nlog ? &s->log[s->nlog - 1] : NULL;
  if (lp && lp->iter == done && s->val.n)
    fprintf(train_log, "  val loss %.4f  val acc %.1f%%", lp->val_loss,
            100 * lp->val_acc);
  fprintf(train_log, "\n");
}

/* ---- across ranks (--dist) ---- */

#ifdef REPRISE_HAVE_MPI
/* This command initialized MPI (before parsing, or at the model's start):
 * whichever rp_train_mpi_start comes later owns it too. */
static int MPI_MINE;

int rp_train_mpi_start(train_ranks *r) {
  int init = 0, provided = 0, rank = 0, size = 1;
  MPI_Initialized(&init);
  if (!init) {
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    MPI_MINE = 1;
  } else {
    MPI_Query_thread(&provided);
  }
  r->mpi_mine = MPI_MINE;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  r->rank = (uint32_t)rank;
  r->ranks = (uint32_t)size;
  LOG_RANK = rank;
  if (provided < MPI_THREAD_MULTIPLE) {
    rp_cli_say(stderr,
               "%s: --dist: MPI offers thread level %d only; the "
               "workers need MPI_THREAD_MULTIPLE\n",
               who(), provided);
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

void rp_train_mpi_stop(train_ranks *r) {
  if (r->mpi_mine && MPI_MINE) {
    MPI_Finalize();
    MPI_MINE = 0;
  }
  r->mpi_mine = 0;
  LOG_RANK = -1;
}

void *rp_train_world(void) {
  static MPI_Comm world; /* create duplicates it (collective) */
  world = MPI_COMM_WORLD;
  return &world;
}

/* A failure outranks FALLBACK, which outranks ok. A rank that failed may
 * have failed because a peer stopped answering (RP_EPEER): it waits for
 * the others as long as a replay waits for a peer (REPRISE_DIST_TIMEOUT_MS,
 * checked at start), then stops every rank (MPI_Abort, status 1) rather
 * than wait without end for a rank that may never come. */
int rp_train_agree(int dist, int rc) {
  if (!dist)
    return rc;
  int mine = rc == FALLBACK ? 1 : rc ? 10 + rc : 0, worst = mine;
  MPI_Request req;
  MPI_Iallreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
  const char *e = getenv("REPRISE_DIST_TIMEOUT_MS");
  long ms = e && *e ? strtol(e, NULL, 10) : 30000;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done)
      break;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long waited =
        (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
    if (mine >= 10 && waited > ms) {
      rp_cli_say(stderr,
                 "%s: another rank did not answer within %ld ms "
                 "(REPRISE_DIST_TIMEOUT_MS) after this rank failed: stopping "
                 "every rank\n",
                 who(), ms);
      fflush(stderr);
      /* MPI_Abort ends the process without its signal handlers: the
       * outputs being written (--timings) go first */
      rp_output_discard_all();
      usleep(200000); /* time for the launcher to forward the line */
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    usleep(mine >= 10 ? 1000 : 100);
  }
  return worst == 0 ? RP_CLI_OK : worst == 1 ? FALLBACK : worst - 10;
}

/* FNV-1a of the bytes: equal hashes everywhere. */
int rp_train_same_on_every_rank(const float *w, size_t n) {
  unsigned long long h = rp_fnv1a64(RP_FNV64_INIT, w, n * sizeof *w), lo = 0,
                     hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

#else
int rp_train_mpi_start(train_ranks *r) {
  (void)r;
  return rp_cli_usage_error("train", "--dist: this build has no MPI "
                                     "(reconfigure where CMake finds MPI, "
                                     "with -DREPRISE_MPI=ON)");
}
void rp_train_mpi_stop(train_ranks *r) {
  (void)r;
}
void *rp_train_world(void) {
  return NULL;
}
int rp_train_agree(int dist, int rc) {
  (void)dist;
  return rc;
}
int rp_train_same_on_every_rank(const float *w, size_t n) {
  (void)w, (void)n;
  return 1;
}
#endif

int rp_train_same_inputs(int dist, const train_input *in, unsigned n) {
  return dist ? rp_cli_same_inputs("train", in, n) : RP_CLI_OK;
}

void rp_train_note_float(char *d, size_t n, const char *opt, float was,
                         float now) {
  char a[32], b[32];
  rp_cli_appendf(d, n, ", %s %s (now %s)", opt,
                 rp_cli_float_str(a, sizeof a, was),
                 rp_cli_float_str(b, sizeof b, now));
}

uint64_t rp_train_options_hash(const train_cli *c) {
  /* every option but the output files' names, --dump and --timings: the
   * ranks run one computation. --log-every counts (a log point's
   * validation pass and loss are collective), and so does whether
   * --save-weights is given when --tp spans ranks (every rank reads its
   * shards for rank 0's file). */
  char b[512];
  int xr_save = c->gpt && c->tp > c->mc.procs && c->save_weights;
  int len = snprintf(
      b, sizeof b,
      /* %a: every bit of a float option */
      "%d|%u|%u,%u|%a|%llu|%u|%u|%a,%a|%d|%u,%u,%u|%llu|%d,%d|%a|%d|%d|"
      "%u,%u,%u,%u,%u,%u,%u,%u|%d,%d|%u,%d|",
      (int)c->backend, c->mc.nhidden, c->mc.batch, c->mc.procs,
      (double)c->mc.momentum, (unsigned long long)c->mc.seed, c->iters,
      c->inflight, (double)c->lr, (double)c->lr_decay, (int)c->kind, c->samples,
      c->classes, c->features, (unsigned long long)c->max_bytes, c->eager,
      c->compare, (double)c->val_frac, c->no_shuffle, c->gpt, c->layers,
      c->heads, c->width, c->context, c->warmup, c->sample, c->tp, c->stop,
      c->labels != NULL, c->load_weights != NULL, c->log_every, xr_save);
  uint64_t h = rp_fnv1a64(RP_FNV64_INIT, b, (size_t)len);
  return rp_fnv1a64(h, c->mc.hidden, c->mc.nhidden * sizeof *c->mc.hidden);
}

/* Starts MPI and checks that the global batch splits over the ranks'
 * processors; every rank reaches the same verdict alone. */
static int dist_start(train_state *s) {
  int rc = rp_train_mpi_start(&s->tr);
  if (rc)
    return rc;
  /* the options first, on every rank alike: the split below judges this
   * rank's own --batch and --procs, and a rank refusing alone would leave
   * the others in a collective call */
  train_input in = {"the options", rp_train_options_hash(s->c)};
  if ((rc = rp_train_same_inputs(1, &in, 1)))
    return rc;
  const rp_mlp_config *mc = &s->c->mc;
  if (rp_mlp_split_check(mc->batch, s->tr.ranks, mc->procs) == RP_OK)
    return RP_CLI_OK;
  if (s->tr.rank != 0) /* rank 0 says it once */
    return RP_CLI_USAGE;
  return rp_cli_usage_error("train", "--dist: %s", rp_error_detail());
}

/* After the runtime is destroyed (it frees its communicators first). */
static void dist_stop(train_state *s) {
  rp_train_mpi_stop(&s->tr);
}

/* The worst outcome over the ranks (a failure, then FALLBACK, then ok), so
 * that all ranks stop, fall back or go on together instead of leaving the
 * others blocked in the next collective call (runtime create, instantiate,
 * a replay's all-reduce). A rank that did not fail itself says nothing:
 * the one that failed did. */
static int agree(const train_state *s, int rc) {
  return rp_train_agree(s->c->dist, rc);
}

static int same_on_every_rank(const float *w, size_t n) {
  return rp_train_same_on_every_rank(w, n);
}

/* --dist: a verdict every rank reaches alike (on the options and on
 * inputs compared across the ranks: same_files) is said by rank 0 alone;
 * the others return the same status in silence. */
static int says(const train_state *s) {
  return s->tr.rank == 0;
}

/* --val-frac: holds out F of the samples, rounded down to whole batches
 * (at least one), chosen by a permutation seeded from --seed. */
static int split_val(train_state *s) {
  const train_cli *c = s->c;
  uint32_t n = s->data.n, B = c->mc.batch;
  if (c->val_frac <= 0)
    return RP_CLI_OK;
  uint32_t nval = (uint32_t)((double)c->val_frac * n / B) * B;
  nval = nval ? nval : B;
  if ((n < B || n - nval < B) && !says(s))
    return RP_CLI_USAGE;
  if (n < B || n - nval < B)
    return rp_cli_usage_error("train",
                              "--val-frac %g: %u sample%s cannot hold "
                              "a validation batch and a training batch of "
                              "%u (use --val-frac 0 or a smaller --batch)",
                              (double)c->val_frac, n, n == 1 ? "" : "s", B);
  rp_status st = rp_data_split(&s->data, nval, c->mc.seed, &s->val);
  return st ? rp_train_fail("holding out the validation set", st) : RP_CLI_OK;
}

static int load_data(train_state *s) {
  const train_cli *c = s->c;
  rp_status st =
      c->labels ? rp_data_load_idx(c->data, c->labels, c->max_bytes, &s->data)
      : c->data ? rp_data_load_max(c->data, c->max_bytes, &s->data)
                : rp_data_generate(c->kind, c->samples, c->features, c->classes,
                                   c->mc.seed, &s->data);
  if (st != RP_OK) {
    rp_cli_say(stderr, "%s: %s\n", who(), rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* The data against the options (after same_files: the same verdict on
 * every rank), then the validation split. */
static int check_data(train_state *s) {
  const train_cli *c = s->c;
  if (c->mc.batch > s->data.n && !says(s))
    return RP_CLI_USAGE;
  if (c->mc.batch > s->data.n) /* a usage error, as for --samples */
    return rp_cli_usage_error("train",
                              "--batch %u is more than the %u sample%s of %s",
                              c->mc.batch, s->data.n, s->data.n == 1 ? "" : "s",
                              c->data ? c->data : "the data set");
  return split_val(s);
}

/* --load-weights: reads the file before any work (a failure is this
 * rank's own: said with its rank). */
static int read_ckpt(train_state *s) {
  const train_cli *c = s->c;
  if (!c->load_weights)
    return RP_CLI_OK;
  if (rp_mlp_ckpt_read(c->load_weights, &s->ckpt) != RP_OK)
    return rp_train_opt_fail("--load-weights");
  return RP_CLI_OK;
}

/* --load-weights: checks the file against the options and the data (after
 * same_files: the same verdict on every rank); --iters counts the total,
 * so it must exceed the steps the file has done. A setting that differs
 * from the file's is allowed (fine-tuning) but makes the run no exact
 * continuation: it is said once. */
static int check_ckpt(train_state *s) {
  const train_cli *c = s->c;
  if (!c->load_weights)
    return RP_CLI_OK;
  const rp_mlp_ckpt_info *f = &s->ckpt.info;
  /* another architecture first: nothing else about the file matters */
  if (rp_mlp_ckpt_fits(&s->ckpt, &c->mc, &s->data) != RP_OK) {
    if (says(s))
      rp_cli_say(stderr, "%s: --load-weights %s: %s\n", who(), c->load_weights,
                 rp_error_detail());
    return RP_CLI_FAILED;
  }
  if (f->step >= ITERS_MAX) { /* no --iters can go on from it */
    if (says(s))
      rp_cli_say(stderr,
                 "%s: --load-weights %s: the file has done %u steps, and "
                 "--iters goes to %u at most: nothing is left to train (a "
                 "damaged step field?)\n",
                 who(), c->load_weights, f->step, ITERS_MAX);
    return RP_CLI_FAILED;
  }
  if (c->iters <= f->step && !says(s))
    return RP_CLI_USAGE;
  if (c->iters <= f->step)
    return rp_cli_usage_error("train",
                              "--iters %u: %s has done %u step%s "
                              "already; --iters counts the total steps, so "
                              "ask for more than %u",
                              c->iters, c->load_weights, f->step,
                              f->step == 1 ? "" : "s", f->step);
  s->start = f->step;
  char d[256] = ""; /* what differs: saved, then this run's */
  if (f->lr != c->lr)
    rp_train_note_float(d, sizeof d, "--lr", f->lr, c->lr);
  if (f->lr_decay != c->lr_decay)
    rp_train_note_float(d, sizeof d, "--lr-decay", f->lr_decay, c->lr_decay);
  if (f->momentum != c->mc.momentum)
    rp_train_note_float(d, sizeof d, "--momentum", f->momentum, c->mc.momentum);
  if (f->batch != c->mc.batch)
    rp_cli_appendf(d, sizeof d, ", --batch %u (now %u)", f->batch, c->mc.batch);
  if (f->seed != c->mc.seed)
    rp_cli_appendf(d, sizeof d, ", --seed %llu (now %llu)",
                   (unsigned long long)f->seed, (unsigned long long)c->mc.seed);
  if (f->shuffle != (uint32_t)!c->no_shuffle)
    rp_cli_appendf(d, sizeof d, ", %s (now %s)",
                   f->shuffle ? "shuffled" : "--no-shuffle",
                   c->no_shuffle ? "--no-shuffle" : "shuffled");
  if (s->tr.rank == 0 && d[0])
    rp_cli_say(stderr,
               "%s: note: %s was saved with %s; so this run is not an exact "
               "continuation\n",
               who(), c->load_weights, d + 2);
  return RP_CLI_OK;
}

/* The --load-weights checkpoint into the model (again before --compare's
 * eager run); a file of another architecture is refused here. */
static int restore(train_state *s) {
  if (!s->ckpt.params)
    return RP_CLI_OK;
  rp_status st = rp_mlp_ckpt_apply(s->m, &s->ckpt);
  if (st != RP_OK) {
    rp_cli_say(stderr, "%s: --load-weights %s: %s\n", who(), s->c->load_weights,
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* --save-weights: a checkpoint larger than --load-weights reads is
 * refused from the options and the data set's sizes alone, before the
 * runtime or the model is made (no memory is allocated for it). */
/* After same_files: the same verdict on every rank. */
static int save_check(const train_state *s) {
  const train_cli *c = s->c;
  if (c->save_weights && rp_mlp_save_check_config(&c->mc, s->data.features,
                                                  s->data.classes) != RP_OK) {
    if (says(s))
      rp_cli_say(stderr, "%s: --save-weights %s: %s\n", who(), c->save_weights,
                 rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* A number of bytes from a cgroup file ("max": none, 0). */
static uint64_t cgroup_bytes(const char *path) {
  FILE *f = fopen(path, "r");
  unsigned long long v = 0;
  if (f) {
    if (fscanf(f, "%llu", &v) != 1)
      v = 0;
    fclose(f);
  }
  return (uint64_t)v;
}

/* The least memory.max from this process's cgroup (v2: /proc/self/cgroup's
 * "0::/path") up to the root; 0 when none is set. */
static uint64_t cgroup_v2_limit(void) {
  char line[512], dir[600];
  FILE *f = fopen("/proc/self/cgroup", "r");
  const char *path = "";
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) {
      line[strcspn(line, "\n")] = 0;
      path = line + 3;
      break;
    }
  uint64_t lim = 0;
  for (;;) {
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s/memory.max", path);
    uint64_t v = cgroup_bytes(dir);
    if (v && (!lim || v < lim))
      lim = v;
    char *slash = *path ? strrchr(line + 3, '/') : NULL;
    if (!slash)
      break;
    *slash = 0; /* the parent ("" for the root) */
  }
  if (f)
    fclose(f);
  return lim;
}

uint64_t rp_train_memory_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t lim = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  uint64_t more[3] = {
      cgroup_v2_limit(),
      cgroup_bytes("/sys/fs/cgroup/memory/memory.limit_in_bytes"), 0};
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    more[2] = (uint64_t)rl.rlim_cur;
  for (int i = 0; i < 3; i++)
    if (more[i] && (!lim || more[i] < lim))
      lim = more[i];
  return lim;
}

/* On the CPU backend instances are host memory: a model whose weights,
 * gradients and momentum alone (a lower bound of what rp_mlp_create
 * makes) pass the memory the run may have is refused before any is made
 * (calloc would hand it out, and the first step would meet the OOM
 * killer). 0 fits or unknown, else the bytes. */
static double mlp_too_large(const train_state *s, uint64_t *limit) {
  const train_cli *c = s->c;
  double params = 0, in = s->data.features;
  for (uint32_t l = 0; l <= c->mc.nhidden; l++) {
    double out = l < c->mc.nhidden ? c->mc.hidden[l] : s->data.classes;
    params += in * out + out;
    in = out;
  }
  double bytes = params * 3 * sizeof(float);
  *limit = rp_train_memory_limit();
  return *limit && bytes > (double)*limit ? bytes : 0;
}

static int setup(train_state *s, rp_backend_kind backend) {
  const train_cli *c = s->c;
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = backend;
  cfg.cpus = c->mc.procs; /* the step's processors on the CPU backend */
  /* logical GPUs, round-robin on the devices; more processors than a
   * runtime's GPUs are for the CPU backend only (rp_mlp_create says so on
   * a GPU) */
  cfg.gpus = c->mc.procs < RP_MAX_GPUS ? c->mc.procs : RP_MAX_GPUS;
  cfg.quiet = 1;      /* the summary says which backend and why */
  cfg.ignore_env = 1; /* the options decide */
  /* parse_args checked it (rp_cli_env_check): no failure here */
  (void)rp_cli_env_u32("train", "REPRISE_DIST_TIMEOUT_MS", 1, 86400000,
                       &cfg.dist_timeout_ms, NULL);
  if (c->dist)
    cfg.comm = rp_train_world();
  rp_status st = rp_runtime_create(&cfg, &s->rt);
  if (st != RP_OK && c->backend_src && backend != RP_BACKEND_AUTO) {
    char what[64];
    rp_cli_runtime_what(what, sizeof what, c->backend_src, backend);
    return rp_train_fail(what, st);
  }
  if (st != RP_OK)
    return rp_train_fail("creating the runtime", st);
  if (c->backend == RP_BACKEND_AUTO && c->mc.procs > RP_MAX_GPUS &&
      rp_runtime_rank(s->rt) == 0) /* train_main chose the CPU backend */
    fprintf(train_log,
            "note: --procs %u is more than a GPU runtime has (%d): the CPU "
            "backend\n",
            c->mc.procs, RP_MAX_GPUS);
  rp_kernel_tasks k;
  if ((st = rp_kernels_register(s->rt, &k)) != RP_OK)
    return rp_train_fail("registering the kernels", st);
  uint64_t limit = 0;
  double need = rp_runtime_backend(s->rt) == RP_BACKEND_CPU
                    ? mlp_too_large(s, &limit)
                    : 0;
  if (need) {
    rp_cli_say(stderr,
               "%s: building the model: its weights, gradients and momentum "
               "alone take %.4g bytes, above the %" PRIu64
               " bytes this process may have (the least of physical memory, "
               "the cgroup's limit and RLIMIT_AS); use a smaller --hidden\n",
               rp_train_who(), need, limit);
    return RP_CLI_FAILED;
  }
  if ((st = rp_mlp_create(s->rt, &k, &c->mc, &s->data, &s->m)) != RP_OK)
    return rp_train_fail("building the model", st);
  if (s->val.n && (st = rp_mlp_set_validation(s->m, &s->val)) != RP_OK)
    return rp_train_fail("copying the validation set", st);
  if (!c->no_shuffle &&
      (st = rp_mlp_shuffle(s->m, &s->data, c->mc.seed)) != RP_OK)
    return rp_train_fail("shuffling", st);
  return restore(s);
}

/* The largest |feature| of the training and validation rows. */
static double max_feature(const train_state *s) {
  double m = 0;
  const rp_dataset *d[2] = {&s->data, &s->val};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; d[k]->x && i < (size_t)d[k]->n * d[k]->features; i++)
      m = fmax(m, fabs((double)d[k]->x[i]));
  return m;
}

/* A note for a divergence when the data may be its cause: features this
 * large overflow float arithmetic in a step whatever the --lr (a row of
 * them may first come in a later epoch's batches). */
#define HUGE_FEATURE 1e15
static const char *huge_features(const train_state *s) {
  static char note[160];
  double m = max_feature(s);
  if (!(m > HUGE_FEATURE))
    return "";
  snprintf(note, sizeof note,
           "; or scale the features: the largest |feature| is %g", m);
  return note;
}

/* Collective under --dist (the sums are all-reduced). */
static int evaluate_initial(train_state *s) {
  rp_status st = rp_mlp_evaluate(s->m, &s->init_loss, &s->init_acc);
  double chance = log((double)s->data.classes); /* a uniform guess */
  s->limit = DIVERGE_FACTOR * (s->init_loss > chance ? s->init_loss : chance);
  if (st)
    return rp_train_fail("evaluating the initial weights", st);
  double vloss = 0, vacc;
  const char *which = "loss";
  if (isfinite(s->init_loss) && s->val.n) { /* the held-out rows too */
    if ((st = rp_mlp_evaluate_val(s->m, &vloss, &vacc)) != RP_OK)
      return rp_train_fail(
          "evaluating the initial weights on the validation set", st);
    which = "validation loss";
  }
  double l = isfinite(s->init_loss) ? vloss : s->init_loss;
  if (!isfinite(l)) { /* before any step: not --lr */
    rp_cli_say(stderr,
               "%s: the %s of the initial weights is %s, before any step: "
               "%s overflow float arithmetic (scale the features%s; the "
               "largest |feature| is %g)\n",
               who(), which, isnan(l) ? "NaN" : "infinite",
               s->c->load_weights ? "the data or the --load-weights weights"
                                  : "the data",
               s->c->load_weights ? ", or start from other weights" : "",
               max_feature(s));
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* Instantiates the recorded step. FALLBACK when AUTO chose CUDA and this
 * build cannot replay GPU ops yet. */
static int instantiate(train_state *s, rp_backend_kind asked) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  /* room for --inflight replays (0: the default, 4) */
  rp_exec_opts eo = {.max_inflight = s->c->inflight > 4 ? s->c->inflight : 0};
  rp_status st = rp_instantiate(s->g, &eo, &s->ex);
  clock_gettime(CLOCK_MONOTONIC, &b);
  s->instantiate_ms = (double)(b.tv_sec - a.tv_sec) * 1e3 +
                      (double)(b.tv_nsec - a.tv_nsec) / 1e6;
  if (st == RP_EUNSUPPORTED && asked == RP_BACKEND_AUTO &&
      rp_runtime_backend(s->rt) == RP_BACKEND_CUDA) {
    rp_cli_say(stderr,
               "%s: replays on CUDA are not in this build "
               "(%s); training on the CPU backend\n",
               who(), rp_error_detail());
    return FALLBACK;
  }
  if (st != RP_OK) {
    rp_train_fail("instantiating the step", st);
    if (st == RP_EUNSUPPORTED)
      rp_cli_say(stderr, "(--eager trains without replays)\n");
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* Records the step, instantiates it (unless --eager; collective under
 * --dist, so every rank first learns that every rank recorded), then hands
 * rank 0's graph to --dump and --save-graph. */
static int record(train_state *s, rp_backend_kind asked) {
  const train_cli *c = s->c;
  rp_status st = rp_mlp_record(s->m, &s->g);
  int rc = agree(s, st ? rp_train_fail("recording the step", st) : RP_CLI_OK);
  if (!rc && !c->eager)
    rc = agree(s, instantiate(s, asked));
  if (rc || s->tr.rank != 0)
    return agree(s, rc);
  /* a reader gone (`| head`) is not said: exit 1 at the end, as for the
   * report */
  if (c->dump && (st = rp_graph_dump(s->g, stdout, c->dump_fmt)) != RP_OK &&
      !rp_cli_stdout_reader_gone(errno))
    rc = rp_train_fail("--dump", st);
  if (!rc && c->save_graph &&
      (st = rp_graph_save(s->g, c->save_graph)) != RP_OK)
    rc = rp_train_fail("--save-graph", st);
  return agree(s, rc);
}

/* --timings FILE: {"format": "reprise-timings", "version": 1,
 * "iterations": [{"iteration": N, "mode": "replay|eager", "ns": T}, ...]}
 * (the format `reprise plot --train` reads). */
static void write_timings(train_state *s, const char *mode, uint32_t n) {
  for (uint32_t i = 0; s->timings && i < n; i++)
    fprintf(s->timings,
            "%s\n  {\"iteration\": %u, \"mode\": \"%s\", "
            "\"ns\": %llu}",
            s->timing_rows++ ? "," : "", s->start + i, mode,
            (unsigned long long)s->ns[i]);
}

static int timings_open(train_state *s) {
  if (!s->c->timings || s->tr.rank != 0) /* --dist: rank 0's own times */
    return RP_CLI_OK;
  int rc =
      rp_cli_output_open("train", "--timings", s->c->timings, &s->timings_o);
  if (rc)
    return rc;
  s->timings = rp_output_file(s->timings_o);
  fprintf(s->timings, "{\"format\": \"reprise-timings\", \"version\": 1, "
                      "\"iterations\": [");
  return RP_CLI_OK;
}

static int timings_close(train_state *s) {
  if (!s->timings)
    return RP_CLI_OK;
  /* the rows of the iterations that ran, also after a failure: a whole
   * JSON file either way */
  fprintf(s->timings, "\n]}\n");
  s->timings = NULL;
  rp_output *o = s->timings_o;
  s->timings_o = NULL;
  return rp_cli_output_commit("train", "--timings", s->c->timings, o);
}

static int train_once(train_state *s, int eager, run_stats *out) {
  const train_cli *c = s->c;
  uint64_t wall = 0;
  progress p = {.iters = c->iters,
                .every = c->log_every,
                .quiet = s->tr.rank != 0,
                .tty = s->tr.rank == 0 && isatty(fileno(train_log)),
                .what = eager ? "eager" : "replay",
                .last_loss = NAN,
                .s = s,
                .done = s->start};
  s->nlog = 0;
  s->val_ns = 0;
  rp_mlp_train_opts o = {.iters = c->iters,
                         .start = s->start,
                         .lr = c->lr,
                         .lr_decay = c->lr_decay,
                         .loss_every = c->log_every,
                         .progress = on_step,
                         .arg = &p,
                         .iter_ns = s->ns,
                         .inflight = eager ? 1 : c->inflight,
                         .wall_ns = &wall};
  rp_status st = eager ? rp_mlp_train_eager(s->m, &o)
                       : rp_mlp_train_replay(s->m, s->ex, &o);
  end_bar(&p);
  fflush(train_log);
  uint32_t ran = p.done - s->start; /* fewer when it diverged or failed */
  s->steps_done = p.done;
  /* the rows of the steps that ran, a failed run's too (before the sort) */
  write_timings(s, eager ? "eager" : "replay", ran);
  if (st != RP_OK)
    return rp_train_fail(eager ? "eager training" : "training by replay", st);
  if (p.failed)
    return RP_CLI_FAILED;
  if (ran)
    summarize(s->ns, ran, c->mc.batch, wall, s->val_ns, out);
  if ((st = rp_mlp_evaluate(s->m, &out->final_loss, &out->accuracy)))
    return rp_train_fail("evaluating the trained weights", st);
  if (s->val.n &&
      (st = rp_mlp_evaluate_val(s->m, &s->val_loss, &s->val_acc)) != RP_OK)
    return rp_train_fail("validation", st);
  if (!isfinite(out->final_loss) || out->final_loss > s->limit) {
    s->diverged_at = s->diverged ? s->diverged_at : p.done;
    s->diverged_loss = s->diverged ? s->diverged_loss : out->final_loss;
    s->diverged = 1; /* the same on every rank: the loss is all-reduced */
  }
  return RP_CLI_OK;
}

static int trace_start(train_state *s) {
  if (!s->c->trace || s->tr.rank != 0) /* --dist: rank 0's replays */
    return RP_CLI_OK;
  uint32_t n = s->c->iters < 16 ? s->c->iters : 16;
  rp_status st = rp_exec_trace_start(s->ex, n);
  return st == RP_OK ? RP_CLI_OK : rp_train_fail("--trace", st);
}

static int trace_write(train_state *s) {
  if (!s->c->trace || s->tr.rank != 0)
    return RP_CLI_OK;
  rp_status st = rp_exec_trace_write(s->ex, s->c->trace);
  return st == RP_OK ? RP_CLI_OK : rp_train_fail("--trace", st);
}

/* --compare: replay's final weights against eager's from the same start. */
static int compare_weights(train_state *s, const float *replayed) {
  size_t n = rp_mlp_param_count(s->m);
  float *w = malloc(n * sizeof *w);
  if (!w)
    return oom("comparing weights");
  rp_status st = rp_mlp_params_read(s->m, w, n);
  if (st == RP_OK) {
    s->compared = 1;
    s->bitwise = memcmp(w, replayed, n * sizeof *w) == 0;
    for (size_t i = 0; i < n; i++) {
      double d = fabs((double)w[i] - (double)replayed[i]);
      s->max_diff = d > s->max_diff || isnan(d) ? d : s->max_diff;
    }
  }
  free(w);
  return st == RP_OK ? RP_CLI_OK : rp_train_fail("reading the weights", st);
}

static int train_all(train_state *s) {
  const train_cli *c = s->c;
  int rc = RP_CLI_OK;
  float *replayed = NULL;
  if (!c->eager) { /* --dist: every rank passes both agree() calls */
    rc = agree(s, trace_start(s));
    if (!rc)
      rc = train_once(s, 0, &s->replay);
    rc = agree(s, rc ? rc : trace_write(s));
    if (rc || s->diverged)
      return rc;
  }
  if (!c->eager && !c->compare)
    return RP_CLI_OK;
  size_t n = rp_mlp_param_count(s->m);
  if (c->compare) {
    rp_status st;
    if (!(replayed = malloc(n * sizeof *replayed)))
      return oom("comparing weights");
    if ((st = rp_mlp_params_read(s->m, replayed, n)) ||
        (st = rp_mlp_reset(s->m))) {
      free(replayed);
      return rp_train_fail("restarting for the eager run", st);
    }
    if ((rc = restore(s)) != RP_CLI_OK) {
      free(replayed);
      return rc;
    }
  }
  rc = train_once(s, 1, &s->eager);
  if (!rc && c->compare)
    rc = compare_weights(s, replayed);
  free(replayed);
  return rc;
}

/* --save-weights FILE: a checkpoint (train/mlp.h) of the weights, the
 * momentum, the steps done and the lr schedule. */
static int write_weights(train_state *s) {
  const train_cli *c = s->c;
  rp_mlp_ckpt_info info = {
      .step = s->steps_done, .lr = c->lr, .lr_decay = c->lr_decay};
  if (rp_mlp_save(s->m, c->save_weights, &info) != RP_OK)
    return rp_train_opt_fail("--save-weights");
  return RP_CLI_OK;
}

/* The final weights: --dist checks that every rank holds the same ones
 * (collective), rank 0 writes --save-weights. */
static int final_weights(train_state *s) {
  const train_cli *c = s->c;
  if (!c->dist && !c->save_weights)
    return RP_CLI_OK;
  size_t n = rp_mlp_param_count(s->m);
  float *w = malloc(n * sizeof *w);
  rp_status st = w ? rp_mlp_params_read(s->m, w, n) : RP_OK;
  int rc = !w   ? oom("reading the weights")
           : st ? rp_train_fail("reading the weights", st)
                : RP_CLI_OK;
  rc = agree(s, rc);
  if (!rc && c->dist) {
    s->ranks_checked = 1;
    s->ranks_equal = same_on_every_rank(w, n);
  }
  if (!rc && c->save_weights && s->tr.rank == 0)
    rc = write_weights(s);
  free(w);
  return agree(s, rc);
}

static void teardown(train_state *s) {
  rp_exec_destroy(s->ex);
  rp_graph_destroy(s->g);
  rp_mlp_destroy(s->m);
  rp_status st = rp_runtime_destroy(s->rt);
  if (st != RP_OK)
    rp_cli_say(stderr, "%s: destroying the runtime: %s (%s)\n", who(),
               rp_status_name(st), rp_error_detail());
  s->ex = NULL;
  s->g = NULL;
  s->m = NULL;
  s->rt = NULL;
}

/* ---- reporting ---- */

static const char *backend_name(rp_backend_kind b) {
  return b == RP_BACKEND_CUDA ? "cuda" : "cpu";
}

/* "<lead>backend B, processors p,q (CPU workers|GPUs)[ on every rank...]" */
static void print_procs(const train_state *s, const char *lead) {
  const train_cli *c = s->c;
  rp_backend_kind b = rp_runtime_backend(s->rt);
  fprintf(train_log, "%sbackend %s, processors", lead, backend_name(b));
  for (uint32_t p = 0; p < c->mc.procs; p++)
    fprintf(train_log, "%s%u", p ? "," : " ", rp_mlp_procs(s->m)[p]);
  fprintf(train_log, " (%s)%s\n", b == RP_BACKEND_CUDA ? "GPUs" : "CPU workers",
          c->dist ? " on every rank; gradients all-reduced" : "");
}

static void print_header(const train_state *s) {
  const train_cli *c = s->c;
  const rp_dataset *d = &s->data;
  fprintf(train_log, "reprise train: MLP %u", d->features);
  for (uint32_t i = 0; i < c->mc.nhidden; i++)
    fprintf(train_log, "-%u", c->mc.hidden[i]);
  rp_cli_say(train_log,
             "-%u (%zu parameters), %u sample%s (%s), batch %u over ",
             d->classes, rp_mlp_param_count(s->m), d->n, d->n == 1 ? "" : "s",
             c->data ? c->data : rp_data_kind_name(c->kind), c->mc.batch);
  if (c->dist)
    fprintf(train_log, "%u rank%s (MPI) x ", s->tr.ranks,
            s->tr.ranks == 1 ? "" : "s");
  fprintf(train_log, "%u processor%s\n", c->mc.procs,
          c->mc.procs == 1 ? "" : "s");
  if (s->val.n) /* the samples above are those trained on */
    fprintf(train_log, "validation: %u sample%s held out (--val-frac %g); %s\n",
            s->val.n, s->val.n == 1 ? "" : "s", (double)c->val_frac,
            c->no_shuffle ? "batches in the data set's order"
                          : "shuffled every epoch");
  print_procs(s, "");
  const char *why = rp_runtime_backend_reason(s->rt);
  if (c->backend == RP_BACKEND_AUTO && why[0])
    fprintf(train_log, "  not CUDA: %s\n", why);
  if (s->g)
    fprintf(train_log, "recorded step: %u ops, %u edges%s\n",
            rp_graph_op_count(s->g), rp_graph_edge_count(s->g),
            s->ex ? "" : " (not replayed)");
  if (s->ex)
    fprintf(train_log, "instantiated in %.2f ms\n", s->instantiate_ms);
  if (s->start)
    rp_cli_say(train_log, "resumed from %s at step %u\n", c->load_weights,
               s->start);
  fprintf(train_log, "initial loss %.4f, accuracy %.1f%%\n", s->init_loss,
          100 * s->init_acc);
  fflush(train_log);
}

static void print_run(const char *what, const run_stats *r, uint32_t iters,
                      uint32_t inflight, int dist) {
  fprintf(train_log,
          "%-6s %u iteration%s: per iteration median %.1f us, p99 %.1f us%s; "
          "throughput %.1f us/iteration (%u in flight), %.0f samples/s",
          what, iters, iters == 1 ? "" : "s", r->median_us, r->p99_us,
          dist ? " (rank 0)" : "", r->wall_us_per_iter, inflight,
          r->samples_per_s);
  if (r->val_ran)
    fprintf(train_log, " (%.0f with the validation passes)",
            r->samples_per_s_with_val);
  fprintf(train_log, "\n");
}

static void print_summary(const train_state *s) {
  const train_cli *c = s->c;
  const run_stats *fin = c->eager ? &s->eager : &s->replay;
  fprintf(train_log, "final loss %.4f (initial %.4f), accuracy %.1f%%\n",
          fin->final_loss, s->init_loss, 100 * fin->accuracy);
  if (s->val.n)
    fprintf(train_log,
            "validation loss %.4f, accuracy %.1f%% (%u held-out sample%s)\n",
            s->val_loss, 100 * s->val_acc, s->val.n, s->val.n == 1 ? "" : "s");
  if (s->replay.ran)
    print_run("replay", &s->replay, s->steps_done - s->start, c->inflight,
              c->dist);
  rp_exec_stats es;
  if (s->replay.ran && s->ex && rp_exec_stats_get(s->ex, &es) == RP_OK &&
      es.gpus && es.replays) {
    double n = (double)es.replays;
    fprintf(train_log,
            "gpu: %u segment(s) on %u device(s); per replay %.2f graph "
            "launches, %.2f ops op by op, %.2f host callbacks, %.2f host "
            "waits, %.2f stream waits, %.2f parameter copies, %.2f inline\n",
            es.gpu_segments, es.gpu_devices, (double)es.graph_launches / n,
            (double)es.gpu_ops_op_by_op / n, (double)es.host_callbacks / n,
            (double)es.host_waits / n, (double)es.stream_waits / n,
            (double)es.param_copies / n, (double)es.inline_launches / n);
  }
  if (s->eager.ran)
    print_run("eager", &s->eager, s->steps_done - s->start, 1, c->dist);
  if (s->replay.ran && s->eager.ran)
    fprintf(train_log, "eager/replay median: %.2fx\n",
            s->eager.median_us / s->replay.median_us);
  if (s->compared && s->bitwise)
    fprintf(train_log, "replay vs eager: final weights bitwise equal\n");
  else if (s->compared)
    fprintf(train_log,
            "replay vs eager: final weights differ, max |diff| %.3g\n",
            s->max_diff);
  if (s->ranks_checked)
    fprintf(train_log, "ranks: final weights %s on all %u rank%s\n",
            s->ranks_equal ? "bitwise equal" : "DIFFER", s->tr.ranks,
            s->tr.ranks == 1 ? "" : "s");
  print_procs(s, "ran on ");
}

/* The practitioner's keys: samples, validation, shuffling, resume,
 * divergence and the log points. */
static void write_json_training(FILE *f, const train_state *s) {
  const train_cli *c = s->c;
  fprintf(f, ",\n  \"train_samples\": %u,\n  \"val_samples\": %u", s->data.n,
          s->val.n);
  rp_cli_json_num(f, "val_loss", s->val_loss, s->val.n > 0);
  rp_cli_json_num(f, "val_accuracy", s->val_acc, s->val.n > 0);
  fprintf(f, ",\n  \"shuffle\": %s,\n  \"start_step\": %u",
          c->no_shuffle ? "false" : "true", s->start);
  fprintf(f, ",\n  \"steps_done\": %u,\n  \"diverged\": %s", s->steps_done,
          s->diverged ? "true" : "false");
  rp_cli_json_num(f, "diverge_limit", s->limit, 1);
  fprintf(f, ",\n  \"log\": [");
  for (uint32_t i = 0; i < s->nlog; i++) {
    const log_point *lp = &s->log[i];
    fprintf(f, "%s\n    {\"iter\": %u", i ? "," : "", lp->iter);
    rp_cli_json_num(f, "loss", lp->loss, 1);
    rp_cli_json_num(f, "val_loss", lp->val_loss, s->val.n > 0);
    rp_cli_json_num(f, "val_accuracy", lp->val_acc, s->val.n > 0);
    fprintf(f, "}");
  }
  fprintf(f, "%s]", s->nlog ? "\n  " : "");
}

static int write_json(const train_state *s) {
  const train_cli *c = s->c;
  rp_output *o;
  int rc = rp_cli_output_open("train", "--json", c->json, &o);
  if (rc)
    return rc;
  FILE *f = rp_output_file(o);
  const run_stats *fin = c->eager ? &s->eager : &s->replay;
  fprintf(f, "{\n  \"backend\": \"%s\"",
          backend_name(rp_runtime_backend(s->rt)));
  if (c->dist) /* procs: per rank; batch: global */
    fprintf(f, ",\n  \"ranks\": %u", s->tr.ranks);
  fprintf(f, ",\n  \"procs\": %u,\n  \"iters\": %u,\n  \"batch\": %u",
          c->mc.procs, c->iters, c->mc.batch);
  fprintf(f, ",\n  \"inflight\": %u", c->inflight);
  fprintf(f, ",\n  \"hidden\": [");
  for (uint32_t i = 0; i < c->mc.nhidden; i++)
    fprintf(f, "%s%u", i ? ", " : "", c->mc.hidden[i]);
  fprintf(f, "],\n  \"mode\": \"%s\"",
          c->compare ? "compare"
          : c->eager ? "eager"
                     : "replay");
  rp_cli_json_num(f, "initial_loss", s->init_loss, 1);
  rp_cli_json_num(f, "final_loss", fin->final_loss, 1);
  rp_cli_json_num(f, "accuracy", fin->accuracy, 1);
  rp_cli_json_num(f, "replay_iter_us_median", s->replay.median_us,
                  s->replay.ran);
  rp_cli_json_num(f, "replay_iter_us_p99", s->replay.p99_us, s->replay.ran);
  rp_cli_json_num(f, "eager_iter_us_median", s->eager.median_us, s->eager.ran);
  rp_cli_json_num(f, "eager_iter_us_p99", s->eager.p99_us, s->eager.ran);
  rp_cli_json_num(f, "replay_iter_us_throughput", s->replay.wall_us_per_iter,
                  s->replay.ran);
  rp_cli_json_num(f, "eager_iter_us_throughput", s->eager.wall_us_per_iter,
                  s->eager.ran);
  rp_cli_json_num(f, "samples_per_s", fin->samples_per_s, 1);
  rp_cli_json_num(f, "samples_per_s_with_validation",
                  fin->samples_per_s_with_val, 1);
  /* the step's size in ops (each a kernel on a GPU): what a comparison
   * with another framework's step counts against */
  rp_exec_stats es;
  if (s->ex && rp_exec_stats_get(s->ex, &es) == RP_OK) {
    fprintf(f, ",\n  \"ops_per_step\": %u", es.ops);
    if (es.gpus && es.replays)
      fprintf(f, ",\n  \"graph_launches_per_replay\": %.2f",
              (double)es.graph_launches / (double)es.replays);
  }
  if (s->compared)
    fprintf(f, ",\n  \"weights_bitwise_equal\": %s",
            s->bitwise ? "true" : "false");
  if (s->ranks_checked)
    fprintf(f, ",\n  \"weights_equal_across_ranks\": %s",
            s->ranks_equal ? "true" : "false");
  write_json_training(f, s);
  fprintf(f, "\n}\n");
  return rp_cli_output_commit("train", "--json", c->json, o);
}

/* ---- entry ---- */

/* Every step below that a rank may fail alone is followed by agree()
 * under --dist, so all ranks reach the same collective calls or stop
 * together. */
static int run_on(train_state *s, rp_backend_kind backend,
                  rp_backend_kind asked) {
  const train_cli *c = s->c;
  int rc = agree(s, setup(s, backend));
  if (!rc)
    rc = agree(s, evaluate_initial(s));
  if (!rc && (!c->eager || c->save_graph || c->dump))
    rc = record(s, asked);
  if (rc)
    return rc;
  if (s->tr.rank == 0)
    print_header(s);
  if ((rc = agree(s, train_all(s))))
    return rc;
  if (!s->diverged && (rc = final_weights(s))) /* no diverged checkpoint */
    return rc;
  if (s->tr.rank == 0)
    print_summary(s);
  if (c->json && s->tr.rank == 0 && (rc = write_json(s)))
    return rc;
  if (s->diverged) { /* the same on every rank: the losses are global */
    char lr[32];
    if (s->tr.rank == 0)
      rp_cli_say(stderr,
                 "reprise train: training diverged at iteration %u: loss %g "
                 "is not finite or above %g (%gx max(initial loss %.4f, "
                 "ln(classes))): try a smaller --lr (now %s)%s%s\n",
                 s->diverged_at, s->diverged_loss, s->limit, DIVERGE_FACTOR,
                 s->init_loss, rp_cli_float_str(lr, sizeof lr, c->lr),
                 c->lr_decay > 0 ? "" : " or --lr-decay", huge_features(s));
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* A data set's hash: its sizes, features and labels. */
static uint64_t data_hash(uint64_t h, const rp_dataset *d) {
  uint32_t head[] = {d->n, d->features, d->classes};
  h = rp_fnv1a64(h, head, sizeof head);
  if (d->x)
    h = rp_fnv1a64(h, d->x, (size_t)d->n * d->features * sizeof *d->x);
  return d->y ? rp_fnv1a64(h, d->y, (size_t)d->n * sizeof *d->y) : h;
}

/* --dist: every rank loaded the same data and checkpoint (collective; the
 * options were compared at the start), before either is judged against
 * the options (then every rank reaches the same verdict, which rank 0
 * says). Each rank trains on its rows of the one data set: other data
 * gave figures past 100% accuracy (the global sums over rank 0's count),
 * another checkpoint ranks whose weights differ. (--val-frac's split
 * follows from the data and the options.) */
static int same_files(const train_state *s) {
  const uint64_t h0 = RP_FNV64_INIT;
  uint64_t data = data_hash(h0, &s->data), ck = h0;
  if (s->c->load_weights) {
    const rp_mlp_ckpt *k = &s->ckpt;
    uint32_t head[] = {k->info.step, k->info.batch, k->info.shuffle, k->layers};
    float sched[] = {k->info.lr, k->info.lr_decay, k->info.momentum};
    ck = rp_fnv1a64(ck, head, sizeof head);
    ck = rp_fnv1a64(ck, sched, sizeof sched);
    ck = rp_fnv1a64(ck, &k->info.seed, sizeof k->info.seed);
    ck = rp_fnv1a64(ck, k->widths, ((size_t)k->layers + 1) * sizeof *k->widths);
    ck = rp_fnv1a64(ck, k->params, k->nparams * sizeof *k->params);
  }
  train_input in[] = {
      {"the data (--data, --samples, --dataset, --val-frac)", data},
      {"the checkpoint (--load-weights)", ck}};
  return rp_train_same_inputs(s->c->dist, in, 2);
}

static int train_main(train_state *s) {
  const train_cli *c = s->c;
  int rc = load_data(s);
  if (!rc)
    rc = read_ckpt(s);
  if ((rc = agree(s, rc)) == RP_CLI_OK)
    rc = same_files(s);
  if (!rc)
    rc = check_data(s);
  if (!rc)
    rc = check_ckpt(s);
  if (!rc)
    rc = save_check(s);
  s->caplog = c->iters / c->log_every + 2;
  if (!rc && !(s->log = calloc(s->caplog, sizeof *s->log)))
    rc = oom("allocating the log");
  if (!rc && !(s->ns = malloc(c->iters * sizeof *s->ns)))
    rc = oom("allocating timings");
  if (!rc)
    rc = timings_open(s);
  if ((rc = agree(s, rc)) == RP_CLI_OK) {
    /* auto with more processors than a GPU runtime has: the CPU backend
     * (check_options refused them with --backend cuda) */
    rc = run_on(s,
                c->backend == RP_BACKEND_AUTO && c->mc.procs > RP_MAX_GPUS
                    ? RP_BACKEND_CPU
                    : c->backend,
                c->backend);
    if (rc == FALLBACK) {
      teardown(s);
      rc = run_on(s, RP_BACKEND_CPU, c->backend);
    }
  }
  int tc = timings_close(s);
  rc = rc ? rc : tc;
  teardown(s);
  free(s->ns);
  free(s->log);
  rp_data_free(&s->data);
  rp_data_free(&s->val);
  rp_mlp_ckpt_free(&s->ckpt);
  return rc;
}

static int parse_any(int argc, char **argv, void *c) {
  return parse_args(argc, argv, c);
}

/* --dist under a launcher: MPI first, then the options (cli.h). */
static int parse_dist(int argc, char **argv, train_cli *c, train_ranks *tr) {
  int rc = rp_train_mpi_start(tr);
  return rc ? rc
            : rp_cli_parse_dist("train", argc, argv, parse_any, c, sizeof *c);
}

int rp_cmd_train(int argc, char **argv) {
  train_cli c = {0};
  train_ranks early = {.rank = 0, .ranks = 1};
  int dist = rp_cli_wants_dist(argc, argv);
  int rc =
      dist ? parse_dist(argc, argv, &c, &early) : parse_args(argc, argv, &c);
  if (dist && (rc || !c.dist)) /* else the model's start takes MPI over */
    rp_train_mpi_stop(&early);
  if (rc)
    return rc < 0 ? RP_CLI_OK : rc;
  if (c.gpt)
    return rp_cmd_train_gpt(&c);
  train_log = c.dump && c.dump_fmt != RP_DUMP_TEXT ? stderr : stdout;
  train_state s = {.c = &c, .tr = {.rank = 0, .ranks = 1}};
  if (!c.dist || (rc = dist_start(&s)) == RP_CLI_OK)
    rc = train_main(&s);
  dist_stop(&s); /* after train_main destroyed the runtime */
  return rc;
}
