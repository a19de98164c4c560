/* tools/cmd_train.c — `reprise train`: build the data-parallel MLP step
 * (kernels/mlp.h), record it, instantiate it and train by replaying it;
 * --eager runs the same step without recording, --compare both ways;
 * --dist runs it on every rank of `mpiexec -n N` (one shard per rank and
 * processor, gradients all-reduced), rank 0 printing and writing files.
 * Exit status: 0 trained, 1 the work failed (engine error, unreadable or
 * malformed --data file, diverged loss), 2 bad usage. */
#include "cli.h"

#include "kernels/mlp.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_MPI
#include <mpi.h>
#endif

typedef struct train_cli {
  rp_backend_kind backend;
  const char *backend_src; /* "--backend", "REPRISE_BACKEND" or NULL */
  rp_mlp_config mc;
  uint32_t iters, log_every;
  uint32_t inflight; /* --inflight: replays kept in flight */
  float lr, lr_decay;
  rp_data_kind kind;
  uint32_t samples, classes, features;
  int synth_given; /* --dataset/--samples/--classes/--features */
  uint64_t max_bytes; /* --max-bytes: --data file size limit (0: default) */
  const char *data, *save_graph, *trace, *json, *timings, *save_weights;
  int eager, compare, dump, dist;
  rp_dump_format dump_fmt;
} train_cli;

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
      "  --seed N                  data and weight seed (default 1)\n"
      "  --dataset spirals|blobs   synthetic data set (default spirals)\n"
      "  --samples N               synthetic samples (default 4096)\n"
      "  --classes N               synthetic classes (default 3)\n"
      "  --features N              blobs' dimensions (default 16; spirals 2)\n"
      "  --data FILE               read the data set from FILE instead (CSV\n"
      "                            with a 'label,...' header, or the binary\n"
      "                            RPRSDATA format; see README); a regular\n"
      "                            file (FIFOs, devices are refused)\n"
      "  --max-bytes N             the largest --data file read (default\n"
      "                            4G; K, M, G suffixes); CSV lines are\n"
      "                            limited to 1 MiB\n"
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
      "                            iterations) beside the latency. Not with\n"
      "                            --eager\n"
      "  --log-every K             print the batch loss every K iterations\n"
      "                            (default: 10 times per run)\n"
      "  --save-graph FILE         write the recorded step as a graph file\n"
      "  --dump[=text|dot|json]    print the recorded step (default text)\n"
      "  --trace FILE              Chrome trace of the first replays\n"
      "  --json FILE               write the summary as one JSON object\n"
      "  --timings FILE            write every iteration's time (JSON, for\n"
      "                            `reprise plot --train FILE`)\n"
      "  --save-weights FILE       write the final weights (for debugging and\n"
      "                            tests): raw little-endian f32, layer by\n"
      "                            layer, weights row-major [in x out], then\n"
      "                            the bias\n"
      "  -h, --help                this text\n"
      "\n"
      "Exit status: 0 trained, 1 failed (engine error, bad --data file,\n"
      "diverged loss), 2 bad usage.\n");
}

/* ---- option values ---- */

static int bad(const char *opt, const char *s, const char *want) {
  return rp_cli_usage_error("train", "%s: '%s' is not %s", opt, s, want);
}

/* A finite real in [lo, hi) (hi_open) or [lo, hi]; lo_open excludes lo. */
static int parse_real(const char *opt, const char *s, double lo, int lo_open,
                      double hi, int hi_open, float *out) {
  char *end;
  errno = 0;
  double v = s[0] ? strtod(s, &end) : NAN;
  if (!s[0] || *end || errno || !isfinite(v) || v < lo ||
      (lo_open && v == lo) || v > hi || (hi_open && v == hi))
    return rp_cli_usage_error("train",
                              "%s: '%s' is not a number in %c%g, "
                              "%g%c",
                              opt, s, lo_open ? '(' : '[', lo, hi,
                              hi_open ? ')' : ']');
  *out = (float)v;
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
  return rp_cli_parse_u32("train", "--hidden", item, 1, 65536,
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

/* One option. RP_CLI_OK, RP_CLI_USAGE, or -1 after --help. */
static int apply_option(train_cli *c, int opt, const char *arg) {
  uint32_t seed32 = 0;
  switch (opt) {
  case OPT_BACKEND:
    c->backend_src = "--backend";
    return rp_cli_parse_backend("train", arg, &c->backend);
  case OPT_PROCS:
    return rp_cli_parse_u32("train", "--procs", arg, 1, RP_MLP_MAX_PROCS,
                            &c->mc.procs);
  case OPT_ITERS:
    return rp_cli_parse_u32("train", "--iters", arg, 1, 100000000, &c->iters);
  case OPT_BATCH:
    return rp_cli_parse_u32("train", "--batch", arg, 1, 1u << 24, &c->mc.batch);
  case OPT_HIDDEN:
    return parse_hidden(arg, &c->mc);
  case OPT_LR:
    return parse_real("--lr", arg, 0, 1, 100, 0, &c->lr);
  case OPT_LR_DECAY:
    return parse_real("--lr-decay", arg, 0, 0, 1e6, 0, &c->lr_decay);
  case OPT_MOMENTUM:
    return parse_real("--momentum", arg, 0, 0, 1, 1, &c->mc.momentum);
  case OPT_SEED:
    if (rp_cli_parse_u32("train", "--seed", arg, 0, 0xffffffffu, &seed32))
      return RP_CLI_USAGE;
    c->mc.seed = seed32;
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
  case 'h':
    train_usage(stdout);
    return -1;
  default: /* getopt_long already said what was wrong */
    return rp_cli_bad_option("train");
  }
}

/* Combinations the options alone cannot express. */
static int check_options(train_cli *c) {
  if (c->eager && c->compare)
    return rp_cli_usage_error("train", "--eager and --compare exclude each "
                                       "other (--compare runs both)");
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
  if (!c->data && c->mc.batch > c->samples)
    return rp_cli_usage_error("train", "--batch %u is more than --samples %u",
                              c->mc.batch, c->samples);
  if (c->trace && c->eager)
    return rp_cli_usage_error("train", "--trace needs the recorded step "
                                       "(drop --eager)");
  if (c->inflight > 1 && c->eager)
    return rp_cli_usage_error("train", "--inflight %u needs the recorded "
                                       "step (drop --eager)",
                              c->inflight);
  return RP_CLI_OK;
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
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "h", LONGOPTS, NULL)) != -1) {
    int rc = apply_option(c, opt, optarg);
    if (rc)
      return rc;
  }
  if (optind < argc)
    return rp_cli_usage_error("train", "unexpected argument '%s'",
                              argv[optind]);
  /* the environment where no option decided (README "Environment") */
  int env_backend = 0, rc;
  if (!c->backend_src &&
      (rc = rp_cli_env_backend("train", &c->backend, &env_backend)))
    return rc;
  if (env_backend)
    c->backend_src = "REPRISE_BACKEND";
  if ((rc = rp_cli_env_check("train")))
    return rc;
  if (!c->features)
    c->features = c->kind == RP_DATA_SPIRALS ? 2 : 16;
  if (!c->log_every)
    c->log_every = c->iters >= 10 ? c->iters / 10 : 1;
  if ((rc = check_options(c)))
    return rc;
  /* every output path, before any work */
  const char *outs[][2] = {{"--json", c->json}, {"--trace", c->trace},
                           {"--timings", c->timings},
                           {"--save-graph", c->save_graph},
                           {"--save-weights", c->save_weights}};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
    if ((rc = rp_cli_check_output("train", outs[i][0], outs[i][1])))
      return rc;
  return RP_CLI_OK;
}

/* ---- progress ---- */

typedef struct progress {
  uint32_t iters, every;
  int quiet; /* --dist: ranks other than 0 print nothing */
  int tty;
  const char *what; /* "replay" or "eager" */
  float last_loss;
} progress;

static void draw_bar(const progress *p, uint32_t done) {
  enum { WIDTH = 30 };
  int fill = (int)((uint64_t)done * WIDTH / p->iters);
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = '\0';
  printf("\r%-6s [%s] %u/%u  loss %.4f ", p->what, bar, done, p->iters,
         (double)p->last_loss);
  fflush(stdout);
}

static int on_step(void *arg, uint32_t t, float loss) {
  progress *p = arg;
  uint32_t done = t + 1;
  if (p->quiet)
    return 0;
  if (!isnan(loss))
    p->last_loss = loss;
  int log = !isnan(loss) && (t % p->every == 0 || done == p->iters);
  if (log && p->tty)
    printf("\r%-60s\r", ""); /* clear the bar, print the line, redraw */
  if (log)
    printf("%-6s iter %6u/%u  loss %.4f\n", p->what, done, p->iters,
           (double)loss);
  uint32_t tick = p->iters >= 100 ? p->iters / 100 : 1;
  if (p->tty && (log || done % tick == 0 || done == p->iters))
    draw_bar(p, done);
  if (p->tty && done == p->iters)
    printf("\n");
  return 0;
}

/* ---- timings ---- */

typedef struct run_stats {
  int ran;
  double median_us, p99_us, samples_per_s;
  double wall_us_per_iter; /* throughput: the loop's wall time / iters */
  double final_loss, accuracy;
} run_stats;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Latency from the per-iteration times; throughput from the wall time of
 * the whole loop (with replays in flight the latencies overlap). */
static void summarize(uint64_t *ns, uint32_t n, uint32_t batch, uint64_t wall,
                      run_stats *s) {
  double total = (double)wall;
  qsort(ns, n, sizeof *ns, cmp_u64);
  s->median_us = (n % 2 ? (double)ns[n / 2]
                        : ((double)ns[n / 2 - 1] + (double)ns[n / 2]) / 2) /
                 1e3;
  uint32_t k = (uint32_t)ceil(0.99 * n);
  s->p99_us = (double)ns[k ? k - 1 : 0] / 1e3;
  s->samples_per_s = total > 0 ? (double)n * batch / (total * 1e-9) : 0;
  s->wall_us_per_iter = total / 1e3 / n;
  s->ran = 1;
}

/* ---- one run on one backend ---- */

typedef struct train_state {
  const train_cli *c;
  rp_dataset data;
  rp_runtime *rt;
  rp_mlp *m;
  rp_graph *g;
  rp_exec *ex;
  uint64_t *ns;
  FILE *timings;       /* --timings: rows appended by every run */
  uint32_t timing_rows;
  double init_loss, init_acc, instantiate_ms;
  run_stats replay, eager;
  int compared, bitwise;
  double max_diff;
  uint32_t rank, ranks;           /* --dist: MPI_COMM_WORLD's; else 0 of 1 */
  int mpi_mine;                   /* --dist: this command initialized MPI */
  int ranks_checked, ranks_equal; /* --dist: final weights on every rank */
} train_state;

#define FALLBACK 3 /* internal: retry on the CPU backend */

/* --dist: this rank, named in every error message (any rank may fail). */
static int LOG_RANK = -1;

/* "reprise train" or, under --dist, "reprise train: rank R". */
static const char *who(void) {
  static char buf[48];
  if (LOG_RANK < 0)
    return "reprise train";
  snprintf(buf, sizeof buf, "reprise train: rank %d", LOG_RANK);
  return buf;
}

static int fail(const char *what, rp_status st) {
  fprintf(stderr, "%s: %s: %s (%s)\n", who(), what, rp_status_name(st),
          rp_error_detail());
  return RP_CLI_FAILED;
}

static int oom(const char *what) {
  fprintf(stderr, "%s: %s: out of memory\n", who(), what);
  return RP_CLI_FAILED;
}

/* ---- across ranks (--dist) ---- */

#ifdef REPRISE_HAVE_MPI
/* Starts MPI unless the process already did (the runtime's workers call
 * MPI: MPI_THREAD_MULTIPLE) and checks that the global batch splits over
 * the ranks' processors; every rank reaches the same verdict alone. */
static int dist_start(train_state *s) {
  int init = 0, provided = 0, rank = 0, size = 1;
  MPI_Initialized(&init);
  if (!init) {
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    s->mpi_mine = 1;
  } else {
    MPI_Query_thread(&provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  s->rank = (uint32_t)rank;
  s->ranks = (uint32_t)size;
  LOG_RANK = rank;
  if (provided < MPI_THREAD_MULTIPLE) {
    fprintf(stderr,
            "%s: --dist: MPI offers thread level %d only; the "
            "workers need MPI_THREAD_MULTIPLE\n",
            who(), provided);
    return RP_CLI_FAILED;
  }
  const rp_mlp_config *mc = &s->c->mc;
  if (rp_mlp_split_check(mc->batch, s->ranks, mc->procs) == RP_OK)
    return RP_CLI_OK;
  if (rank != 0) /* rank 0 says it once */
    return RP_CLI_USAGE;
  return rp_cli_usage_error("train", "--dist: %s", rp_error_detail());
}

/* After the runtime is destroyed (it frees its communicators first). */
static void dist_stop(train_state *s) {
  if (s->mpi_mine)
    MPI_Finalize();
  s->mpi_mine = 0;
}

/* The worst outcome over the ranks (a failure, then FALLBACK, then ok), so
 * that all ranks stop, fall back or go on together instead of leaving the
 * others blocked in the next collective call (runtime create, instantiate,
 * a replay's all-reduce). A rank that did not fail itself says nothing:
 * the one that failed did. */
static int agree(const train_state *s, int rc) {
  if (!s->c->dist)
    return rc;
  int mine = rc == FALLBACK ? 1 : rc ? 10 + rc : 0, worst = mine;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst == 0 ? RP_CLI_OK : worst == 1 ? FALLBACK : worst - 10;
}

/* 1 when every rank holds the same n weights bitwise (FNV-1a of the
 * bytes: equal hashes everywhere). Collective. */
static int same_on_every_rank(const float *w, size_t n) {
  const unsigned char *b = (const unsigned char *)w;
  unsigned long long h = 14695981039346656037ull, lo = 0, hi = 0;
  for (size_t i = 0; i < n * sizeof *w; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}
#else
static int dist_start(train_state *s) {
  (void)s;
  return rp_cli_usage_error("train", "--dist: this build has no MPI "
                                     "(reconfigure where CMake finds MPI, "
                                     "with -DREPRISE_MPI=ON)");
}
static void dist_stop(train_state *s) {
  (void)s;
}
static int agree(const train_state *s, int rc) {
  (void)s;
  return rc;
}
static int same_on_every_rank(const float *w, size_t n) {
  (void)w, (void)n;
  return 1;
}
#endif

static int load_data(train_state *s) {
  const train_cli *c = s->c;
  rp_status st = c->data ? rp_data_load_max(c->data, c->max_bytes, &s->data)
                         : rp_data_generate(c->kind, c->samples, c->features,
                                            c->classes, c->mc.seed, &s->data);
  if (st != RP_OK) {
    fprintf(stderr, "%s: %s\n", who(), rp_error_detail());
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

static int setup(train_state *s, rp_backend_kind backend) {
  const train_cli *c = s->c;
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = backend;
  cfg.cpus = c->mc.procs; /* the step's processors on the CPU backend */
  cfg.gpus = c->mc.procs; /* logical GPUs, round-robin on the devices */
  cfg.quiet = 1;          /* the summary says which backend and why */
  cfg.ignore_env = 1;     /* the options decide */
  /* parse_args checked it (rp_cli_env_check): no failure here */
  (void)rp_cli_env_u32("train", "REPRISE_DIST_TIMEOUT_MS", 1, 86400000,
                       &cfg.dist_timeout_ms, NULL);
#ifdef REPRISE_HAVE_MPI
  MPI_Comm world = MPI_COMM_WORLD; /* create duplicates it (collective) */
  if (c->dist)
    cfg.comm = &world;
#endif
  rp_status st = rp_runtime_create(&cfg, &s->rt);
  if (st != RP_OK && c->backend_src && backend != RP_BACKEND_AUTO) {
    char what[64];
    snprintf(what, sizeof what, "creating the runtime (%s%s%s)",
             c->backend_src, c->backend_src[0] == '-' ? " " : "=",
             backend == RP_BACKEND_CUDA ? "cuda" : "cpu");
    return fail(what, st);
  }
  if (st != RP_OK)
    return fail("creating the runtime", st);
  rp_kernel_tasks k;
  if ((st = rp_kernels_register(s->rt, &k)) != RP_OK)
    return fail("registering the kernels", st);
  if ((st = rp_mlp_create(s->rt, &k, &c->mc, &s->data, &s->m)) != RP_OK)
    return fail("building the model", st);
  return RP_CLI_OK;
}

/* Collective under --dist (the sums are all-reduced). */
static int evaluate_initial(train_state *s) {
  rp_status st = rp_mlp_evaluate(s->m, &s->init_loss, &s->init_acc);
  return st ? fail("evaluating the initial weights", st) : RP_CLI_OK;
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
    fprintf(stderr,
            "%s: replays on CUDA are not in this build "
            "(%s); training on the CPU backend\n",
            who(), rp_error_detail());
    return FALLBACK;
  }
  if (st != RP_OK) {
    fail("instantiating the step", st);
    if (st == RP_EUNSUPPORTED)
      fprintf(stderr, "(--eager trains without replays)\n");
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
  int rc = agree(s, st ? fail("recording the step", st) : RP_CLI_OK);
  if (!rc && !c->eager)
    rc = agree(s, instantiate(s, asked));
  if (rc || s->rank != 0)
    return agree(s, rc);
  if (c->dump && (st = rp_graph_dump(s->g, stdout, c->dump_fmt)) != RP_OK)
    rc = fail("--dump", st);
  if (!rc && c->save_graph &&
      (st = rp_graph_save(s->g, c->save_graph)) != RP_OK)
    rc = fail("--save-graph", st);
  return agree(s, rc);
}

/* --timings FILE: {"format": "reprise-timings", "version": 1,
 * "iterations": [{"iteration": N, "mode": "replay|eager", "ns": T}, ...]}
 * (the format `reprise plot --train` reads). */
static void write_timings(train_state *s, const char *mode) {
  for (uint32_t i = 0; s->timings && i < s->c->iters; i++)
    fprintf(s->timings, "%s\n  {\"iteration\": %u, \"mode\": \"%s\", "
            "\"ns\": %llu}", s->timing_rows++ ? "," : "", i, mode,
            (unsigned long long)s->ns[i]);
}

static int timings_open(train_state *s) {
  if (!s->c->timings || s->rank != 0) /* --dist: rank 0's own times */
    return RP_CLI_OK;
  if (!(s->timings = fopen(s->c->timings, "w"))) {
    fprintf(stderr, "reprise train: --timings %s: cannot write\n",
            s->c->timings);
    return RP_CLI_FAILED;
  }
  fprintf(s->timings, "{\"format\": \"reprise-timings\", \"version\": 1, "
          "\"iterations\": [");
  return RP_CLI_OK;
}

static int timings_close(train_state *s) {
  if (!s->timings)
    return RP_CLI_OK;
  fprintf(s->timings, "\n]}\n");
  int bad = ferror(s->timings) | (fclose(s->timings) != 0);
  s->timings = NULL;
  if (bad)
    fprintf(stderr, "reprise train: --timings %s: write failed\n",
            s->c->timings);
  return bad ? RP_CLI_FAILED : RP_CLI_OK;
}

static int train_once(train_state *s, int eager, run_stats *out) {
  const train_cli *c = s->c;
  uint64_t wall = 0;
  progress p = {c->iters,
                c->log_every,
                s->rank != 0,
                s->rank == 0 && isatty(STDOUT_FILENO),
                eager ? "eager" : "replay",
                NAN};
  rp_mlp_train_opts o = {.iters = c->iters,
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
  if (p.tty)
    fflush(stdout);
  if (st != RP_OK)
    return fail(eager ? "eager training" : "training by replay", st);
  write_timings(s, eager ? "eager" : "replay"); /* before summarize sorts */
  summarize(s->ns, c->iters, c->mc.batch, wall, out);
  if ((st = rp_mlp_evaluate(s->m, &out->final_loss, &out->accuracy)))
    return fail("evaluating the trained weights", st);
  return RP_CLI_OK;
}

static int trace_start(train_state *s) {
  if (!s->c->trace || s->rank != 0) /* --dist: rank 0's replays */
    return RP_CLI_OK;
  uint32_t n = s->c->iters < 16 ? s->c->iters : 16;
  rp_status st = rp_exec_trace_start(s->ex, n);
  return st == RP_OK ? RP_CLI_OK : fail("--trace", st);
}

static int trace_write(train_state *s) {
  if (!s->c->trace || s->rank != 0)
    return RP_CLI_OK;
  rp_status st = rp_exec_trace_write(s->ex, s->c->trace);
  return st == RP_OK ? RP_CLI_OK : fail("--trace", st);
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
  return st == RP_OK ? RP_CLI_OK : fail("reading the weights", st);
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
    if (rc)
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
      return fail("restarting for the eager run", st);
    }
  }
  rc = train_once(s, 1, &s->eager);
  if (!rc && c->compare)
    rc = compare_weights(s, replayed);
  free(replayed);
  return rc;
}

/* --save-weights FILE: the n floats as raw little-endian f32 (the order
 * of rp_mlp_params_read). */
static int write_weights(const char *path, const float *w, size_t n) {
  unsigned char *b = malloc(n * 4 + 1);
  if (!b)
    return oom("--save-weights");
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &w[i], 4);
    for (int k = 0; k < 4; k++)
      b[4 * i + k] = (unsigned char)(u >> (8 * k));
  }
  FILE *f = fopen(path, "wb");
  if (!f)
    fprintf(stderr, "%s: --save-weights %s: cannot write: %s\n", who(), path,
            strerror(errno));
  int bad = !f;
  if (f) {
    bad = fwrite(b, 4, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad)
      fprintf(stderr, "%s: --save-weights %s: write failed\n", who(), path);
  }
  free(b);
  return bad ? RP_CLI_FAILED : RP_CLI_OK;
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
           : st ? fail("reading the weights", st)
                : RP_CLI_OK;
  rc = agree(s, rc);
  if (!rc && c->dist) {
    s->ranks_checked = 1;
    s->ranks_equal = same_on_every_rank(w, n);
  }
  if (!rc && c->save_weights && s->rank == 0)
    rc = write_weights(c->save_weights, w, n);
  free(w);
  return agree(s, rc);
}

static void teardown(train_state *s) {
  rp_exec_destroy(s->ex);
  rp_graph_destroy(s->g);
  rp_mlp_destroy(s->m);
  rp_status st = rp_runtime_destroy(s->rt);
  if (st != RP_OK)
    fprintf(stderr, "%s: destroying the runtime: %s (%s)\n", who(),
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
  printf("%sbackend %s, processors", lead, backend_name(b));
  for (uint32_t p = 0; p < c->mc.procs; p++)
    printf("%s%u", p ? "," : " ", rp_mlp_procs(s->m)[p]);
  printf(" (%s)%s\n", b == RP_BACKEND_CUDA ? "GPUs" : "CPU workers",
         c->dist ? " on every rank; gradients all-reduced" : "");
}

static void print_header(const train_state *s) {
  const train_cli *c = s->c;
  const rp_dataset *d = &s->data;
  printf("reprise train: MLP %u", d->features);
  for (uint32_t i = 0; i < c->mc.nhidden; i++)
    printf("-%u", c->mc.hidden[i]);
  printf("-%u (%zu parameters), %u samples (%s), batch %u over ", d->classes,
         rp_mlp_param_count(s->m), d->n,
         c->data ? c->data : rp_data_kind_name(c->kind), c->mc.batch);
  if (c->dist)
    printf("%u rank%s (MPI) x ", s->ranks, s->ranks == 1 ? "" : "s");
  printf("%u processors\n", c->mc.procs);
  print_procs(s, "");
  const char *why = rp_runtime_backend_reason(s->rt);
  if (c->backend == RP_BACKEND_AUTO && why[0])
    printf("  not CUDA: %s\n", why);
  if (s->g)
    printf("recorded step: %u ops, %u edges%s\n", rp_graph_op_count(s->g),
           rp_graph_edge_count(s->g), s->ex ? "" : " (not replayed)");
  if (s->ex)
    printf("instantiated in %.2f ms\n", s->instantiate_ms);
  printf("initial loss %.4f, accuracy %.1f%%\n", s->init_loss,
         100 * s->init_acc);
  fflush(stdout);
}

static void print_run(const char *what, const run_stats *r, uint32_t iters,
                      uint32_t inflight, int dist) {
  printf("%-6s %u iterations: per iteration median %.1f us, p99 %.1f us%s; "
         "throughput %.1f us/iteration (%u in flight), %.0f samples/s\n",
         what, iters, r->median_us, r->p99_us, dist ? " (rank 0)" : "",
         r->wall_us_per_iter, inflight, r->samples_per_s);
}

static void print_summary(const train_state *s) {
  const train_cli *c = s->c;
  const run_stats *fin = c->eager ? &s->eager : &s->replay;
  printf("final loss %.4f (initial %.4f), accuracy %.1f%%\n", fin->final_loss,
         s->init_loss, 100 * fin->accuracy);
  if (s->replay.ran)
    print_run("replay", &s->replay, c->iters, c->inflight, c->dist);
  if (s->eager.ran)
    print_run("eager", &s->eager, c->iters, 1, c->dist);
  if (s->replay.ran && s->eager.ran)
    printf("eager/replay median: %.2fx\n",
           s->eager.median_us / s->replay.median_us);
  if (s->compared && s->bitwise)
    printf("replay vs eager: final weights bitwise equal\n");
  else if (s->compared)
    printf("replay vs eager: final weights differ, max |diff| %.3g\n",
           s->max_diff);
  if (s->ranks_checked)
    printf("ranks: final weights %s on all %u rank%s\n",
           s->ranks_equal ? "bitwise equal" : "DIFFER", s->ranks,
           s->ranks == 1 ? "" : "s");
  print_procs(s, "ran on ");
}

static void json_num(FILE *f, const char *key, double v, int ok) {
  if (ok && isfinite(v))
    fprintf(f, ",\n  \"%s\": %.9g", key, v);
  else
    fprintf(f, ",\n  \"%s\": null", key);
}

static int write_json(const train_state *s) {
  const train_cli *c = s->c;
  FILE *f = fopen(c->json, "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write '%s': %s\n", who(), c->json,
            strerror(errno));
    return RP_CLI_FAILED;
  }
  const run_stats *fin = c->eager ? &s->eager : &s->replay;
  fprintf(f, "{\n  \"backend\": \"%s\"",
          backend_name(rp_runtime_backend(s->rt)));
  if (c->dist) /* procs: per rank; batch: global */
    fprintf(f, ",\n  \"ranks\": %u", s->ranks);
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
  json_num(f, "initial_loss", s->init_loss, 1);
  json_num(f, "final_loss", fin->final_loss, 1);
  json_num(f, "accuracy", fin->accuracy, 1);
  json_num(f, "replay_iter_us_median", s->replay.median_us, s->replay.ran);
  json_num(f, "replay_iter_us_p99", s->replay.p99_us, s->replay.ran);
  json_num(f, "eager_iter_us_median", s->eager.median_us, s->eager.ran);
  json_num(f, "eager_iter_us_p99", s->eager.p99_us, s->eager.ran);
  json_num(f, "replay_iter_us_throughput", s->replay.wall_us_per_iter,
           s->replay.ran);
  json_num(f, "eager_iter_us_throughput", s->eager.wall_us_per_iter,
           s->eager.ran);
  json_num(f, "samples_per_s", fin->samples_per_s, 1);
  if (s->compared)
    fprintf(f, ",\n  \"weights_bitwise_equal\": %s",
            s->bitwise ? "true" : "false");
  if (s->ranks_checked)
    fprintf(f, ",\n  \"weights_equal_across_ranks\": %s",
            s->ranks_equal ? "true" : "false");
  fprintf(f, "\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "%s: error writing '%s'\n", who(), c->json);
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
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
  if (s->rank == 0)
    print_header(s);
  if ((rc = agree(s, train_all(s))) || (rc = final_weights(s)))
    return rc;
  if (s->rank == 0)
    print_summary(s);
  const run_stats *fin = c->eager ? &s->eager : &s->replay;
  if (c->json && s->rank == 0 && (rc = write_json(s)))
    return rc;
  if (!isfinite(fin->final_loss)) { /* the same on every rank */
    if (s->rank == 0)
      fprintf(stderr,
              "reprise train: training diverged (final loss %g): try "
              "a smaller --lr\n",
              fin->final_loss);
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

static int train_main(train_state *s) {
  const train_cli *c = s->c;
  int rc = load_data(s);
  if (!rc && !(s->ns = malloc(c->iters * sizeof *s->ns)))
    rc = oom("allocating timings");
  if (!rc)
    rc = timings_open(s);
  if ((rc = agree(s, rc)) == RP_CLI_OK) {
    rc = run_on(s, c->backend, c->backend);
    if (rc == FALLBACK) {
      teardown(s);
      rc = run_on(s, RP_BACKEND_CPU, c->backend);
    }
  }
  int tc = timings_close(s);
  rc = rc ? rc : tc;
  teardown(s);
  free(s->ns);
  rp_data_free(&s->data);
  return rc;
}

int rp_cmd_train(int argc, char **argv) {
  train_cli c = {0};
  int rc = parse_args(argc, argv, &c);
  if (rc)
    return rc < 0 ? RP_CLI_OK : rc;
  train_state s = {.c = &c, .rank = 0, .ranks = 1};
  if (!c.dist || (rc = dist_start(&s)) == RP_CLI_OK)
    rc = train_main(&s);
  dist_stop(&s); /* after train_main destroyed the runtime */
  LOG_RANK = -1;
  return rc;
}
