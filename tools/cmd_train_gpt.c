/* tools/cmd_train_gpt.c — `reprise train --model gpt`: a GPT (train/gpt.h)
 * on a byte-level text corpus, trained by replaying its recorded step
 * (--eager: the same step without recording). Prints the batch loss, the
 * validation loss against a count-based bigram model's on the same
 * windows, throughput in tokens/s and a sample of generated text.
 * --dist runs it on every rank of `mpiexec -n N` (each rank its rows of
 * every global batch, the loss and gradients all-reduced; or, with --tp
 * above --procs, tensor-parallel groups across the ranks' processors),
 * rank 0 printing and writing files.
 * Exit status: 0 trained, 1 failed (engine error, unreadable corpus or
 * checkpoint, diverged), 2 bad usage. */
#include "cmd_train.h"

#include "train/ckpt.h"
#include "train/train_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VAL_BATCHES 8 /* validation: 8 batches of windows of the val split */
#define RING_BYTES ((size_t)64 << 20) /* the batch ring's tokens, at most */

typedef struct gpt_state {
  const train_cli *c;
  rp_text text;
  uint64_t digest; /* rp_text_digest (with --save-weights or --load-weights) */
  rp_gpt_ckpt ckpt;
  int have_ckpt;
  uint32_t start;
  rp_runtime *rt;
  rp_gpt *m;
  rp_graph *g;
  rp_exec *ex;
  int32_t *vx, *vy; /* validation windows */
  double bigram, init_val, val;
  float last_loss;
  uint64_t *ns;
  uint64_t wall;
  uint32_t done;
  double limit;
  int diverged, failed;
  int val_diverged;    /* the validation loss diverged, not the batch's */
  double diverged_val; /* that validation loss */
  /* the recorded step's ops: kernels, copies and (--dist) communication
   * ops (the rp.dist.* tasks: all-reduces, copies between ranks) */
  uint32_t ops, kernels, copies, comm;
  int tty;
  double record_ms, instantiate_ms;
  uint64_t val_ns; /* validation passes inside the training loop */
  train_ranks tr;  /* --dist: MPI_COMM_WORLD's; else 0 of 1 */
  int ranks_checked, ranks_equal; /* --dist: final weights on every rank */
  int xr; /* --dist, --tp above --procs: groups across ranks (train/gpt.h) */
  /* bytes per processor, all and the parameter state's, taken with the
   * training step in place (before the decode step of --sample) */
  uint64_t total_bytes[RP_GPT_MAX_PROCS], state_bytes[RP_GPT_MAX_PROCS];
} gpt_state;

/* The training log's stream: standard output, or standard error when
 * --dump=dot|json prints its document there (as the MLP's train_log). */
static FILE *glog;

/* --dist: the worst rc over the ranks (tools/cmd_train.h); else rc. */
static int agree(const gpt_state *s, int rc) {
  return rp_train_agree(s->c->dist, rc);
}

static int load_text(gpt_state *s) {
  const train_cli *c = s->c;
  rp_status st = rp_text_load(c->text, c->max_bytes, c->context, &s->text);
  if (st == RP_OK) {
    if (c->save_weights || c->load_weights) /* the checkpoints' */
      s->digest = rp_text_digest(&s->text);
    return RP_CLI_OK;
  }
  if (!c->text_given && access(c->text, F_OK) != 0)
    rp_cli_say(stderr,
               "%s: the default corpus %s is missing: install the "
               "Debian package fortunes (make deps), or name a file with "
               "--text FILE\n",
               rp_train_who(), c->text);
  else /* RP_ERANGE: above the limit, which --max-bytes sets */
    rp_cli_say(stderr, "%s: --text %s%s\n", rp_train_who(), rp_error_detail(),
               st == RP_ERANGE ? " (--max-bytes)" : "");
  return RP_CLI_FAILED;
}

static int load_ckpt(gpt_state *s) {
  const train_cli *c = s->c;
  if (!c->load_weights)
    return RP_CLI_OK;
  /* the header, the vocabulary and the file's checksum, every value
   * checked and none kept (setup streams them into the model); read once:
   * parsing read it when it took options from it */
  if (c->have_ckpt_info)
    s->ckpt = c->ckpt_info;
  else if (rp_gpt_ckpt_read_info(c->load_weights, &s->ckpt) != RP_OK)
    return rp_train_opt_fail("--load-weights");
  s->have_ckpt = 1;
  return RP_CLI_OK;
}

/* --dist: the ranks train one model, so they must have been given the same
 * options, corpus and checkpoint (collective; rank 0 names what differs:
 * each rank would otherwise judge its own, or train on numbers that do
 * not match its peers'). */
static int same_inputs(gpt_state *s) {
  const train_cli *c = s->c;
  const uint64_t h0 = RP_FNV64_INIT;
  const rp_gpt_ckpt *k = &s->ckpt;
  uint64_t text = rp_fnv1a64(h0, s->text.bytes, s->text.vocab);
  text = rp_fnv1a64(text, s->text.tokens, s->text.n * sizeof *s->text.tokens);
  uint64_t ck = h0;
  if (s->have_ckpt) {
    uint32_t head[] = {k->layers, k->heads, k->width,  k->context,
                       k->vocab,  k->batch, k->procs,  k->tp,
                       k->ranks,  k->step,  k->warmup, k->iters};
    ck = rp_fnv1a64(ck, head, sizeof head);
    ck = rp_fnv1a64(ck, &k->lr, sizeof k->lr);
    ck = rp_fnv1a64(ck, &k->seed, sizeof k->seed);
    ck = rp_fnv1a64(ck, &k->checksum, sizeof k->checksum); /* the values */
  }
  train_input in[] = {{"the options", rp_train_options_hash(c)},
                      {"the corpus (--text)", text},
                      {"the checkpoint (--load-weights)", ck}};
  return rp_train_same_inputs(c->dist, in, 3);
}

/* The checkpoint against the corpus and the options (every rank has the
 * same: same_inputs). */
static int check_ckpt(gpt_state *s) {
  const train_cli *c = s->c;
  if (!s->have_ckpt)
    return RP_CLI_OK;
  const rp_gpt_ckpt *k = &s->ckpt;
  if (k->vocab != s->text.vocab ||
      memcmp(k->bytes, s->text.bytes, k->vocab) != 0) {
    if (s->tr.rank != 0) /* --dist: rank 0 says it */
      return RP_CLI_FAILED;
    rp_cli_say(stderr,
               "%s: --load-weights %s: its vocabulary (%u bytes) "
               "is not the one of %s (%u bytes): another corpus\n",
               rp_train_who(), c->load_weights, k->vocab, c->text,
               s->text.vocab);
    return RP_CLI_FAILED;
  }
  /* another architecture first: nothing else about the file matters */
  rp_gpt_config g = {.layers = c->layers,
                     .heads = c->heads,
                     .width = c->width,
                     .context = c->context,
                     .vocab = s->text.vocab};
  if (rp_gpt_ckpt_fits(k, &g) != RP_OK) {
    if (s->tr.rank == 0)
      rp_cli_say(stderr, "%s: --load-weights %s: %s\n", rp_train_who(),
                 c->load_weights, rp_error_detail());
    return RP_CLI_FAILED;
  }
  if (c->stop <= k->step && s->tr.rank != 0) /* --dist: rank 0 says it */
    return RP_CLI_USAGE;
  if (c->stop <= k->step)
    return rp_cli_usage_error(
        "train",
        "--%s %u%s: %s has done %u step%s already; --iters and --stop count "
        "the total steps",
        c->stop < c->iters ? "stop" : "iters", c->stop,
        c->stop < c->iters ? "" : rp_train_from_ckpt(c, "iters"),
        c->load_weights, k->step, k->step == 1 ? "" : "s");
  s->start = k->step;
  s->done = k->step; /* --timings of a run failing before its first step */
  char d[512] = "";  /* what differs: saved, then this run's (iters 0: the
                        file holds no schedule, written by the library) */
  /* the same vocabulary (above), other bytes (digest 0: a version 1 or 2
   * file, or the library's without one: nothing to compare) */
  if (k->text_digest && k->text_digest != s->digest)
    rp_cli_appendf(d, sizeof d,
                   ", another corpus (the same vocabulary, other bytes than "
                   "--text's)");
  if (k->iters && k->lr != c->lr)
    rp_train_note_float(d, sizeof d, "--lr", k->lr, c->lr);
  if (k->iters && k->warmup != c->warmup)
    rp_cli_appendf(d, sizeof d, ", --warmup %u (now %u)", k->warmup, c->warmup);
  if (k->iters && k->iters != c->iters)
    rp_cli_appendf(d, sizeof d, ", --iters %u (now %u)", k->iters, c->iters);
  if (k->batch != c->mc.batch)
    rp_cli_appendf(d, sizeof d, ", --batch %u (now %u)", k->batch, c->mc.batch);
  if (k->seed != c->mc.seed)
    rp_cli_appendf(d, sizeof d, ", --seed %llu (now %llu)",
                   (unsigned long long)k->seed, (unsigned long long)c->mc.seed);
  /* another layout may sum the gradients in another order (procs 0: a
   * version 1 file, no layout to compare) */
  uint64_t kn = (uint64_t)k->procs * k->ranks;
  rp_gpt_layout was = {k->procs, k->ranks, k->tp},
                now = {c->mc.procs, s->tr.ranks, c->tp};
  if (k->procs && !rp_gpt_layouts_sum_alike(was, now))
    rp_cli_appendf(d, sizeof d,
                   ", %llu processor%s with --tp %u (--procs %u on %u rank%s; "
                   "now --procs %u on %u rank%s with --tp %u)",
                   (unsigned long long)kn, kn == 1 ? "" : "s", k->tp, k->procs,
                   k->ranks, k->ranks == 1 ? "" : "s", c->mc.procs, s->tr.ranks,
                   s->tr.ranks == 1 ? "" : "s", c->tp);
  if (s->tr.rank == 0 && d[0]) /* --dist: said once */
    rp_cli_say(stderr,
               "reprise train: note: %s was saved with %s; so this run is not "
               "an exact continuation\n",
               c->load_weights, d + 2);
  return RP_CLI_OK;
}

static int setup(gpt_state *s) {
  const train_cli *c = s->c;
  /* a checkpoint larger than its reader takes is refused from the sizes
   * alone, before the runtime and the model are made */
  rp_gpt_config sz;
  rp_gpt_config_init(&sz);
  sz.layers = c->layers;
  sz.width = c->width;
  sz.context = c->context;
  sz.vocab = s->text.vocab;
  if (c->save_weights && rp_gpt_save_check_config(&sz) != RP_OK) {
    rp_cli_say(stderr, "%s: --save-weights %s: %s\n", rp_train_who(),
               c->save_weights, rp_error_detail());
    return RP_CLI_FAILED;
  }
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = c->backend;
  cfg.cpus = c->mc.procs;
  cfg.gpus = c->mc.procs;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  /* parse_args checked it (rp_cli_env_check): no failure here */
  (void)rp_cli_env_u32("train", "REPRISE_DIST_TIMEOUT_MS", 1, 86400000,
                       &cfg.dist_timeout_ms, NULL);
  if (c->dist) /* create duplicates it: collective */
    cfg.comm = rp_train_world();
  rp_status st = rp_runtime_create(&cfg, &s->rt);
  if (st != RP_OK) {
    char what[64] = "creating the runtime";
    if (c->backend_src && c->backend != RP_BACKEND_AUTO)
      rp_cli_runtime_what(what, sizeof what, c->backend_src, c->backend);
    return rp_train_fail(what, st);
  }
  rp_kernel_tasks k;
  if ((st = rp_kernels_register(s->rt, &k)) != RP_OK)
    return rp_train_fail("registering the kernels", st);
  rp_gpt_config g;
  rp_gpt_config_init(&g);
  g.layers = c->layers;
  g.heads = c->heads;
  g.width = c->width;
  g.context = c->context;
  g.vocab = s->text.vocab;
  g.batch = c->mc.batch;
  g.procs = c->mc.procs;
  g.tp = c->tp;
  g.seed = c->mc.seed;
  g.dist = c->dist;
  s->xr = c->dist && c->tp > c->mc.procs;
  size_t per = (size_t)g.batch * g.context * 2 * sizeof(int32_t);
  size_t ring = RING_BYTES / per;
  ring = ring < 1 ? 1 : ring > 64 ? 64 : ring;
  g.ring = (uint32_t)(ring > c->iters ? c->iters : ring);
  g.ring = g.ring < VAL_BATCHES ? VAL_BATCHES : g.ring;
  /* on the CPU backend instances are host memory: a model larger than the
   * memory the run may have is refused before any is touched (calloc
   * would hand it out, and the first step would meet the OOM killer) */
  if (rp_runtime_backend(s->rt) == RP_BACKEND_CPU)
    g.max_bytes = rp_train_memory_limit();
  if ((st = rp_gpt_create(s->rt, &k, &g, &s->m)) != RP_OK && st == RP_ENOMEM &&
      g.max_bytes) {
    rp_cli_say(stderr,
               "%s: building the model: RP_ENOMEM (%s): the limit is the "
               "memory this process may have (the least of physical memory, "
               "the cgroup's limit and RLIMIT_AS; under --dist, per rank); use "
               "a smaller --width, --layers, --context or --batch\n",
               rp_train_who(), rp_error_detail());
    return RP_CLI_FAILED;
  }
  if (st != RP_OK)
    return rp_train_fail("building the model", st);
  /* the weights and moments streamed in, if the file still holds the
   * bytes load_ckpt checked (else nothing is loaded); a failure leaves
   * the run to end here, before any step and any output */
  if (s->have_ckpt &&
      rp_gpt_ckpt_load(s->m, c->load_weights, &s->ckpt) != RP_OK)
    return rp_train_opt_fail("--load-weights"); /* the detail names it */
  return RP_CLI_OK;
}

/* The validation windows (VAL_BATCHES batches from the val split, seeded)
 * and the bigram model's loss on them. */
static int validation_set(gpt_state *s) {
  const train_cli *c = s->c;
  size_t n = (size_t)VAL_BATCHES * c->mc.batch * c->context;
  s->vx = calloc(n, sizeof *s->vx);
  s->vy = calloc(n, sizeof *s->vy);
  if (!s->vx || !s->vy) {
    rp_cli_say(stderr, "%s: out of memory\n", rp_train_who());
    return RP_CLI_FAILED;
  }
  if (rp_text_windows(&s->text, s->text.ntrain, s->text.n, c->mc.batch,
                      c->context, c->mc.seed ^ 0x76616c6964617465ull, 0,
                      VAL_BATCHES, s->vx, s->vy)) { /* rp_text_load checked */
    rp_cli_say(stderr, "%s: %s: %s\n", rp_train_who(), c->text,
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  s->bigram = rp_text_bigram_loss(&s->text, s->vx, s->vy, n);
  if (isnan(s->bigram)) { /* n > 0: its table could not be allocated */
    size_t v = s->text.vocab;
    rp_cli_say(stderr,
               "%s: the bigram baseline: out of memory for %zu bytes (its "
               "%zu x %zu counts)\n",
               rp_train_who(), (v * v + v) * sizeof(double), v, v);
    return RP_CLI_FAILED;
  }
  return RP_CLI_OK;
}

/* Collective under --dist (every rank gets the global loss). */
static int evaluate(gpt_state *s, double *out) {
  rp_status st = rp_gpt_evaluate(s->m, s->vx, s->vy, VAL_BATCHES, out);
  return st ? rp_train_fail("validation", st) : RP_CLI_OK;
}

/* Whether a loss is past the divergence limit (the same on every rank:
 * batch losses are all-reduced, validation runs on the same weights). */
static int past_limit(const gpt_state *s, double loss) {
  return !isfinite(loss) || loss > s->limit;
}

/* The loss of the weights the run starts from: one that is not finite
 * fails before any step, naming the weights, not as divergence (the loss
 * is all-reduced: the same on every rank). */
static int evaluate_initial(gpt_state *s) {
  int rc = evaluate(s, &s->init_val);
  if (rc || isfinite(s->init_val))
    return rc;
  if (s->tr.rank == 0)
    rp_cli_say(stderr,
               "reprise train: the validation loss of the initial weights is "
               "%s, before any step: %s overflow float arithmetic\n",
               isnan(s->init_val) ? "NaN" : "infinite",
               s->c->load_weights ? "the --load-weights checkpoint's weights"
                                  : "the initial weights");
  return RP_CLI_FAILED;
}

/* Records the step; rank 0 hands its graph to --dump and --save-graph
 * (each rank records its side). */
static int record(gpt_state *s) {
  const train_cli *c = s->c;
  uint64_t t0 = rp_train_now_ns();
  rp_status st = rp_gpt_record(s->m, &s->g);
  s->record_ms = (double)(rp_train_now_ns() - t0) * 1e-6;
  if (st != RP_OK)
    return rp_train_fail("recording the step", st);
  s->ops = rp_graph_op_count(s->g);
  for (rp_op_id i = 0; i < s->ops; i++) {
    rp_op_info oi;
    if (rp_graph_op_query(s->g, i, &oi) == RP_OK) {
      const char *t = oi.kind == RP_OP_TASK ? rp_task_name(s->rt, oi.task) : "";
      int comm = t && !strncmp(t, "rp.dist.", 8);
      s->kernels += oi.kind == RP_OP_TASK && !comm;
      s->copies += oi.kind == RP_OP_COPY;
      s->comm += comm;
    }
  }
  if (s->tr.rank != 0)
    return RP_CLI_OK;
  /* a reader gone (`| head`) is not said: exit 1 at the end, as for the
   * report */
  if (c->dump && (st = rp_graph_dump(s->g, stdout, c->dump_fmt)) != RP_OK &&
      !rp_cli_stdout_reader_gone(errno))
    return rp_train_fail("--dump", st);
  if (c->save_graph && (st = rp_graph_save(s->g, c->save_graph)) != RP_OK)
    return rp_train_fail("--save-graph", st);
  return RP_CLI_OK;
}

/* Instantiates the recorded step (unless --eager; collective under
 * --dist: every rank does it after every rank recorded). */
static int instantiate(gpt_state *s) {
  const train_cli *c = s->c;
  if (c->eager)
    return RP_CLI_OK;
  /* room for --inflight replays (0: the default, 4) */
  rp_exec_opts eo = {.max_inflight = c->inflight > 4 ? c->inflight : 0};
  uint64_t t0 = rp_train_now_ns();
  rp_status st = rp_instantiate(s->g, &eo, &s->ex);
  if (st != RP_OK)
    return rp_train_fail("instantiating the step", st);
  s->instantiate_ms = (double)(rp_train_now_ns() - t0) * 1e-6;
  if (c->trace && s->tr.rank == 0) { /* --dist: rank 0's replays */
    uint32_t n = c->stop < 16 ? c->stop : 16;
    if ((st = rp_exec_trace_start(s->ex, n)) != RP_OK)
      return rp_train_fail("--trace", st);
  }
  return RP_CLI_OK;
}

static int on_step(void *arg, uint32_t t, const float *read) {
  gpt_state *s = arg;
  const train_cli *c = s->c;
  s->done = t + 1;
  if (!read) /* this step's loss was not read */
    return 0;
  float loss = *read;
  s->last_loss = loss;
  if (past_limit(s, loss)) {
    s->diverged = 1;
    return 1;
  }
  if (!(t % c->log_every == 0 || t + 1 == c->stop))
    return 0;
  double val = NAN;
  uint64_t t0 = rp_train_now_ns();
  int rc = evaluate(s, &val);
  s->val_ns += rp_train_now_ns() - t0;
  if (rc != RP_CLI_OK) {
    s->failed = 1;
    return 1;
  }
  if (past_limit(s, val)) { /* the weights this step's update made */
    s->diverged = s->val_diverged = 1;
    s->diverged_val = val;
    return 1;
  }
  if (s->tr.rank != 0) /* --dist: rank 0 prints */
    return 0;
  fprintf(glog, "%-6s iter %6u/%u  loss %.4f  val loss %.4f  (bigram %.4f)\n",
          c->eager ? "eager" : "replay", t + 1, c->iters, (double)loss, val,
          s->bigram);
  fflush(glog);
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void print_header(const gpt_state *s) {
  const train_cli *c = s->c;
  const rp_text *t = &s->text;
  fprintf(glog,
          "reprise train: GPT %u layer%s, %u head%s, width %u, context %u, "
          "vocabulary %u bytes (%zu parameters)\n",
          c->layers, c->layers == 1 ? "" : "s", c->heads,
          c->heads == 1 ? "" : "s", c->width, c->context, t->vocab,
          rp_gpt_param_count(s->m));
  char ranks[48] = ""; /* --dist: the global batch's ranks */
  if (c->dist)
    snprintf(ranks, sizeof ranks, "%u rank%s (MPI) x ", s->tr.ranks,
             s->tr.ranks == 1 ? "" : "s");
  uint32_t all = rp_gpt_proc_count(s->m), groups = all / c->tp;
  uint32_t tokens = c->mc.batch * c->context;
  rp_cli_say(
      glog,
      "corpus %s: %zu bytes, %zu train / %zu validation; batch %u "
      "window%s (%u token%s per step) over %s%u processor%s, backend %s\n",
      c->text, t->n, t->ntrain, t->n - t->ntrain, c->mc.batch,
      c->mc.batch == 1 ? "" : "s", tokens, tokens == 1 ? "" : "s", ranks,
      c->mc.procs, c->mc.procs == 1 ? "" : "s",
      rp_runtime_backend(s->rt) == RP_BACKEND_CUDA ? "cuda" : "cpu");
  if (c->dist && s->xr)
    fprintf(glog,
            "tensor parallel across ranks: the %u processors of the %u ranks "
            "(processor p on rank p / %u) form %u group%s of %u; the "
            "parallel operators' copies between ranks are MPI messages\n",
            all, s->tr.ranks, c->mc.procs, groups, groups == 1 ? "" : "s",
            c->tp);
  else if (c->dist)
    fprintf(glog,
            "data parallel across ranks: each rank %s rows of every batch; "
            "loss and gradients all-reduced\n",
            s->tr.ranks == 1 ? "all" : "its");
  const char *why = rp_runtime_backend_reason(s->rt);
  if (c->backend == RP_BACKEND_AUTO && why[0])
    fprintf(glog, "  not CUDA: %s\n", why);
  if (c->tp > 1)
    fprintf(glog,
            "tensor parallel: %u processors per group (%u of %u heads, %u of "
            "%u MLP columns each), %u data-parallel group%s\n",
            c->tp, c->heads / c->tp, c->heads, 4 * c->width / c->tp,
            4 * c->width, groups, groups == 1 ? "" : "s");
  fprintf(glog,
          "bytes per processor (parameter state: weights, replicas or shards, "
          "gradients, AdamW moments; then everything):");
  for (uint32_t p = 0; p < all; p++)
    fprintf(glog, "%s %u: %llu / %llu", p ? "," : "", p,
            (unsigned long long)s->state_bytes[p],
            (unsigned long long)s->total_bytes[p]);
  fprintf(glog, "\n");
  char comm[48] = "";
  if (s->comm)
    snprintf(comm, sizeof comm, ", %u communication", s->comm);
  char lr[32]; /* the float trained with, every digit it needs */
  fprintf(glog,
          "recorded step: %u ops (%u kernels, %u cop%s%s)%s; AdamW, lr %s "
          "(warmup %u, cosine to %g), clipping at 1.0\n",
          s->ops, s->kernels, s->copies, s->copies == 1 ? "y" : "ies", comm,
          s->ex ? "" : " (not replayed: --eager)",
          rp_cli_float_str(lr, sizeof lr, c->lr), c->warmup,
          (double)c->lr / 10);
  if (s->start)
    rp_cli_say(glog, "resumed from %s at step %u\n", c->load_weights, s->start);
  fprintf(glog,
          "bigram baseline (add-one smoothing, train counts) on the "
          "validation windows: %.4f\n",
          s->bigram);
  fprintf(glog, "initial val loss %.4f\n", s->init_val);
  fflush(glog);
}

/* A sample from the trained model: the decode step recorded once and
 * replayed per byte (rp_gpt_generate), after a newline, or the
 * vocabulary's first byte when the corpus has none (as `reprise generate`
 * without --prompt: the same seed draws the same bytes). */
static int print_sample(gpt_state *s) {
  const train_cli *c = s->c;
  if (!c->sample)
    return RP_CLI_OK;
  int32_t *out = calloc((size_t)c->sample + 1, sizeof *out);
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  int32_t prompt = 0;
  int newline = 0;
  for (uint32_t v = 0; v < s->text.vocab; v++)
    if (s->text.bytes[v] == '\n')
      prompt = (int32_t)v, newline = 1;
  char after[96] = "";
  if (!newline)
    snprintf(after, sizeof after,
             " after 0x%02x, the vocabulary's first byte (the corpus has no "
             "newline)",
             (unsigned)s->text.bytes[0]);
  rp_status st =
      out ? rp_gpt_decode_record(s->m, &g)
          : rp_error_set(RP_ENOMEM,
                         "out of memory for %zu bytes (the sample's %u "
                         "tokens after its first)",
                         ((size_t)c->sample + 1) * sizeof *out, c->sample);
  if (!st)
    st = rp_instantiate(g, NULL, &ex);
  uint64_t t0 = rp_train_now_ns();
  if (!st)
    st = rp_gpt_generate(
        s->m, ex, &prompt, 1, c->sample,
        &(rp_gpt_sampling){.temperature = 1, .seed = c->mc.seed}, out);
  double secs = (double)(rp_train_now_ns() - t0) * 1e-9;
  if (st == RP_OK) {
    fprintf(glog,
            "sample (%u byte%s%s, temperature 1; %u-op decode step "
            "replayed per byte, %.0f bytes/s):\n----\n",
            c->sample, c->sample == 1 ? "" : "s", after, rp_graph_op_count(g),
            secs > 0 ? c->sample / secs : 0);
    rp_cli_text t = {glog, 0};
    for (uint32_t i = 1; i <= c->sample; i++)
      rp_cli_text_put(&t, s->text.bytes[out[i]]);
    rp_cli_text_end(&t);
    fprintf(glog, "\n----\n");
  }
  int rc = st == RP_OK ? RP_CLI_OK : rp_train_fail("sampling", st);
  rp_exec_destroy(ex);
  rp_graph_destroy(g);
  free(out);
  return rc;
}

/* The step times: latency (median, p99 of the per-step times) and the
 * loop's throughput (back to back, the validation passes left out). */
typedef struct gpt_times {
  double median_us, p99_us, thr_us, tok_s, train_tok_s;
} gpt_times;

/* `,\n  "key": v` with the fewest digits that read back as v. */
static void json_float(FILE *f, const char *key, float v) {
  char b[32];
  fprintf(f, ",\n  \"%s\": %s", key, rp_cli_float_str(b, sizeof b, v));
}

static int write_json(const gpt_state *s, const gpt_times *tm) {
  const train_cli *c = s->c;
  rp_output *o;
  int rc = rp_cli_output_open("train", "--json", c->json, &o);
  if (rc)
    return rc;
  FILE *f = rp_output_file(o);
  fprintf(f,
          "{\n  \"model\": \"gpt\",\n  \"backend\": \"%s\",\n  \"layers\": "
          "%u,\n  \"heads\": %u,\n  \"width\": %u,\n  \"context\": %u,\n"
          "  \"vocab\": %u,\n  \"batch\": %u,\n  \"procs\": %u,\n  \"iters\": "
          "%u,\n  \"mode\": \"%s\",\n  \"params\": %zu,\n  \"ops_per_step\": "
          "%u",
          rp_runtime_backend(s->rt) == RP_BACKEND_CUDA ? "cuda" : "cpu",
          c->layers, c->heads, c->width, c->context, s->text.vocab, c->mc.batch,
          c->mc.procs, c->iters, c->eager ? "eager" : "replay",
          rp_gpt_param_count(s->m), s->ops);
  /* the rest of the config a rerun needs (lr: the shortest that reads
   * back as the float trained with) */
  fprintf(f, ",\n  \"stop\": %u", c->stop);
  json_float(f, "lr", c->lr);
  fprintf(f, ",\n  \"warmup\": %u,\n  \"seed\": %llu", c->warmup,
          (unsigned long long)c->mc.seed);
  rp_cli_json_str(f, "text", c->text);
  rp_cli_json_str(f, "load_weights", c->load_weights);
  /* a figure that is not finite is null (JSON has no NaN) */
  rp_cli_json_num(f, "final_loss", s->last_loss, 1);
  rp_cli_json_num(f, "val_loss", s->val, 1);
  rp_cli_json_num(f, "initial_val_loss", s->init_val, 1);
  rp_cli_json_num(f, "bigram_val_loss", s->bigram, 1);
  rp_cli_json_num(f, "iter_us_median", tm->median_us, 1);
  rp_cli_json_num(f, "tokens_per_s", tm->tok_s, 1);
  fprintf(f,
          ",\n  \"start_step\": %u,\n  \"steps_done\": %u,\n  \"tp\": %u,\n"
          "  \"kernels_per_step\": %u,\n  \"copies_per_step\": %u,\n"
          "  \"comm_per_step\": %u,\n",
          s->start, s->done, c->tp, s->kernels, s->copies, s->comm);
  if (c->dist) /* procs: per rank; batch: global */
    fprintf(f, "  \"ranks\": %u,\n", s->tr.ranks);
  if (s->ranks_checked)
    fprintf(f, "  \"weights_equal_across_ranks\": %s,\n",
            s->ranks_equal ? "true" : "false");
  fprintf(f, "  \"bytes_per_proc\": [");
  for (int pass = 0; pass < 2; pass++) {
    if (pass)
      fprintf(f, "],\n  \"state_bytes_per_proc\": [");
    for (uint32_t p = 0; p < rp_gpt_proc_count(s->m); p++)
      fprintf(
          f, "%s%llu", p ? ", " : "",
          (unsigned long long)(pass ? s->state_bytes[p] : s->total_bytes[p]));
  }
  fprintf(f, "],\n  \"inflight\": %u", c->eager ? 1 : c->inflight);
  rp_cli_json_num(f, "iter_us_p99", tm->p99_us, 1);
  rp_cli_json_num(f, "iter_us_throughput", tm->thr_us, 1);
  rp_cli_json_num(f, "train_tokens_per_s", tm->train_tok_s, 1);
  rp_cli_json_num(f, "record_ms", s->record_ms, 1);
  rp_exec_stats es; /* the replayed step's (absent with --eager) */
  if (s->ex)
    rp_cli_json_num(f, "instantiate_ms", s->instantiate_ms, 1);
  if (s->ex && rp_exec_stats_get(s->ex, &es) == RP_OK && es.replays)
    rp_cli_json_num(f, "ops_run_per_replay",
                    (double)es.ops_run / (double)es.replays, 1);
  fprintf(f, "\n}\n");
  return rp_cli_output_commit("train", "--json", c->json, o);
}

static int write_timings(gpt_state *s, uint32_t ran);

/* A run that fails or diverges still writes --timings: the rows of the
 * steps it ran (the MLP's rule). RP_CLI_FAILED. */
static int train_failed(gpt_state *s) {
  if (s->tr.rank == 0)
    write_timings(s, s->done - s->start);
  return RP_CLI_FAILED;
}

static int train(gpt_state *s) {
  const train_cli *c = s->c;
  uint32_t n = c->iters - s->start;
  if (!(s->ns = calloc(n, sizeof *s->ns))) {
    uint64_t bytes = (uint64_t)n * sizeof *s->ns;
    return rp_train_fail(
        "allocating timings",
        rp_error_set(RP_ENOMEM,
                     "out of memory for %llu bytes (%.1f MiB): the time of "
                     "each of the %u steps to run",
                     (unsigned long long)bytes, (double)bytes / (1u << 20), n));
  }
  s->limit = 10.0 * (s->init_val > log(s->text.vocab) ? s->init_val
                                                      : log(s->text.vocab));
  s->tty = isatty(fileno(glog));
  rp_gpt_train_opts o = {.iters = c->iters,
                         .start = s->start,
                         .stop = c->stop,
                         .lr = c->lr,
                         .warmup = c->warmup,
                         .loss_every = c->log_every,
                         .progress = on_step,
                         .arg = s,
                         .iter_ns = s->ns,
                         .wall_ns = &s->wall,
                         .inflight = c->eager ? 1 : c->inflight};
  rp_status st = rp_gpt_train(s->m, s->ex, &s->text, &o);
  if (st != RP_OK) {
    rp_train_fail(c->eager ? "eager training" : "training by replay", st);
    return train_failed(s);
  }
  if (s->failed)
    return train_failed(s);
  if (!s->diverged && !s->failed) {
    int rc = evaluate(s, &s->val); /* the weights of the last update */
    if (rc != RP_CLI_OK)
      return train_failed(s);
    if (past_limit(s, s->val)) {
      s->diverged = s->val_diverged = 1;
      s->diverged_val = s->val;
    }
  }
  if (s->diverged) { /* the same on every rank */
    char lr[32];
    if (s->tr.rank == 0)
      rp_cli_say(stderr,
                 "reprise train: training diverged at iteration %u: %s %g is "
                 "not finite or above %g: try a smaller --lr (now %s)\n",
                 s->done, s->val_diverged ? "validation loss" : "loss",
                 s->val_diverged ? s->diverged_val : (double)s->last_loss,
                 s->limit, rp_cli_float_str(lr, sizeof lr, c->lr));
    return train_failed(s);
  }
  if (c->trace && s->ex && s->tr.rank == 0) {
    if ((st = rp_exec_trace_write(s->ex, c->trace)) != RP_OK)
      return rp_train_fail("--trace", st);
  }
  return RP_CLI_OK;
}

/* --dist: whether every rank holds the same weights (collective). */
static int check_ranks(gpt_state *s) {
  if (!s->c->dist || s->xr) /* xr: one copy of each shard, no replicas */
    return RP_CLI_OK;
  size_t n = rp_gpt_param_count(s->m);
  float *w = calloc(n ? n : 1, sizeof *w);
  rp_status st = w ? rp_gpt_params_read(s->m, w, n)
                   : rp_error_set(RP_ENOMEM,
                                  "out of memory for %zu bytes of weights "
                                  "to compare across ranks",
                                  n * sizeof *w);
  int rc = agree(s, st ? rp_train_fail("reading the weights", st) : RP_CLI_OK);
  if (!rc) {
    s->ranks_checked = 1;
    s->ranks_equal = rp_train_same_on_every_rank(w, n);
  }
  free(w);
  return rc;
}

/* --save-weights (with groups across ranks collective: every rank reads
 * the shards, rank 0 writes the file). */
static int save_weights(gpt_state *s) {
  const train_cli *c = s->c;
  if (!c->save_weights)
    return RP_CLI_OK;
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  info.step = s->done;
  info.lr = c->lr;
  info.warmup = c->warmup;
  info.iters = c->iters;
  info.text_digest = s->digest;
  memcpy(info.bytes, s->text.bytes, s->text.vocab);
  if (rp_gpt_save(s->m, c->save_weights, &info) != RP_OK)
    return rp_train_opt_fail("--save-weights");
  return RP_CLI_OK;
}

/* Groups across ranks: what needs every rank's shards, collectively
 * before rank 0's summary: the decode step's weights (rank 0 samples) and
 * --save-weights. */
static int xr_tail(gpt_state *s) {
  rp_status st = s->c->sample ? rp_gpt_decode_fill(s->m) : RP_OK;
  if (st != RP_OK)
    return rp_train_fail("gathering the weights for sampling", st);
  return save_weights(s);
}

/* Rank 0's: the figures (its own times), the sample, --save-weights and
 * --json. */
/* --timings FILE (rank 0): every step's time in the format `reprise plot
 * --train` reads, as the MLP writes it ({"format": "reprise-timings",
 * "version": 1, "iterations": [{"iteration": N, "mode": "replay|eager",
 * "ns": T}, ...]}); iterations count from the resumed step. */
static int write_timings(gpt_state *s, uint32_t ran) {
  const train_cli *c = s->c;
  if (!c->timings || s->tr.rank != 0)
    return RP_CLI_OK;
  rp_output *o;
  int rc = rp_cli_output_open("train", "--timings", c->timings, &o);
  if (rc)
    return rc;
  FILE *f = rp_output_file(o);
  fprintf(f, "{\"format\": \"reprise-timings\", \"version\": 1, "
             "\"iterations\": [");
  for (uint32_t i = 0, k = 0; i < ran; i++)
    if (s->ns[i]) /* a step that ran (one in flight when a run failed: 0) */
      fprintf(f, "%s\n  {\"iteration\": %u, \"mode\": \"%s\", \"ns\": %llu}",
              k++ ? "," : "", s->start + i, c->eager ? "eager" : "replay",
              (unsigned long long)s->ns[i]);
  fprintf(f, "\n]}\n");
  return rp_cli_output_commit("train", "--timings", c->timings, o);
}

static int summary(gpt_state *s) {
  const train_cli *c = s->c;
  uint32_t ran = s->done - s->start;
  int wrc = write_timings(s, ran); /* before the sort below */
  qsort(s->ns, ran, sizeof *s->ns, cmp_u64);
  gpt_times tm = {0};
  /* as the MLP's: the mean of the two middle times for an even count */
  tm.median_us =
      !ran      ? 0
      : ran % 2 ? (double)s->ns[ran / 2] / 1e3
                : ((double)s->ns[ran / 2 - 1] + (double)s->ns[ran / 2]) / 2e3;
  uint32_t k = (uint32_t)ceil(0.99 * ran);
  tm.p99_us = ran ? (double)s->ns[k ? k - 1 : 0] / 1e3 : 0;
  double tok = (double)ran * c->mc.batch * c->context;
  tm.tok_s = s->wall ? tok / ((double)s->wall * 1e-9) : 0;
  uint64_t loop = s->wall > s->val_ns ? s->wall - s->val_ns : 0;
  tm.thr_us = ran ? (double)loop / 1e3 / ran : 0;
  tm.train_tok_s = loop ? tok / ((double)loop * 1e-9) : 0;
  fprintf(glog,
          "final loss %.4f, val loss %.4f (initial %.4f); bigram baseline "
          "%.4f: %s\n",
          (double)s->last_loss, s->val, s->init_val, s->bigram,
          s->val < s->bigram ? "below the baseline" : "NOT below the baseline");
  fprintf(glog,
          "%-6s %u iteration%s: per step median %.1f us, p99 %.1f us%s; "
          "throughput %.1f us/step back to back (%u in flight), %.0f "
          "tokens/s (%.0f with the validation passes; %u ops per step)\n",
          c->eager ? "eager" : "replay", ran, ran == 1 ? "" : "s", tm.median_us,
          tm.p99_us, c->dist ? " (rank 0)" : "", tm.thr_us,
          c->eager ? 1 : c->inflight, tm.train_tok_s, tm.tok_s, s->ops);
  rp_exec_stats es; /* the replays' own count */
  if (s->ex && rp_exec_stats_get(s->ex, &es) == RP_OK && es.replays)
    fprintf(glog,
            "replays: %llu, %u ops per replay, %.1f run per replay "
            "(rp_exec_stats)\n",
            (unsigned long long)es.replays, es.ops,
            (double)es.ops_run / (double)es.replays);
  if (s->ranks_checked)
    fprintf(glog, "ranks: final weights %s on all %u rank%s\n",
            s->ranks_equal ? "bitwise equal" : "DIFFER", s->tr.ranks,
            s->tr.ranks == 1 ? "" : "s");
  int rc = print_sample(s);
  if (!s->xr && save_weights(s))
    rc = RP_CLI_FAILED;
  if (!rc && c->json)
    rc = write_json(s, &tm);
  return rc ? rc : wrc;
}

/* --dist: starts MPI and checks that the global batch splits over the
 * ranks' data groups; every rank reaches the same verdict alone, rank 0
 * says it. */
static int dist_start(gpt_state *s) {
  const train_cli *c = s->c;
  int rc = rp_train_mpi_start(&s->tr);
  if (rc)
    return rc;
  /* the options first, on every rank alike (the split below judges this
   * rank's own; one refusing alone would leave the others waiting) */
  train_input in = {"the options", rp_train_options_hash(c)};
  if ((rc = rp_train_same_inputs(1, &in, 1)))
    return rc;
  if (rp_gpt_split_check(c->mc.batch, s->tr.ranks, c->mc.procs, c->tp) == RP_OK)
    return RP_CLI_OK;
  if (s->tr.rank != 0)
    return RP_CLI_USAGE;
  char from[96] = ""; /* a batch the user did not give: say whose it is */
  if (rp_train_from_ckpt(c, "batch")[0])
    snprintf(from, sizeof from,
             " (batch %u is the --load-weights file's: give --batch to "
             "change it)",
             c->mc.batch);
  return rp_cli_usage_error("train", "--dist: %s%s", rp_error_detail(), from);
}

/* Every step that a rank may fail alone is followed by agree() under
 * --dist, so all ranks reach the same collective calls (runtime create,
 * evaluation, instantiate, the replays) or stop together. */
static int run(gpt_state *s) {
  int rc = agree(s, load_text(s));
  if (!rc)
    rc = agree(s, load_ckpt(s));
  if (!rc)
    rc = same_inputs(s);
  if (!rc)
    rc = agree(s, check_ckpt(s));
  if (!rc)
    rc = agree(s, setup(s));
  if (!rc)
    rc = agree(s, validation_set(s));
  if (!rc)
    rc = agree(s, evaluate_initial(s));
  if (!rc)
    rc = agree(s, record(s));
  if (!rc)
    rc = agree(s, instantiate(s));
  for (uint32_t p = 0; !rc && p < rp_gpt_proc_count(s->m); p++)
    rp_gpt_proc_bytes(s->m, p, &s->total_bytes[p], &s->state_bytes[p]);
  if (!rc && s->tr.rank == 0)
    print_header(s);
  if (!rc)
    rc = agree(s, train(s));
  if (!rc)
    rc = check_ranks(s);
  if (!rc && s->xr)
    rc = agree(s, xr_tail(s));
  if (!rc && s->tr.rank == 0)
    rc = summary(s);
  return agree(s, rc);
}

int rp_cmd_train_gpt(const train_cli *c) {
  glog = c->dump && c->dump_fmt != RP_DUMP_TEXT ? stderr : stdout;
  gpt_state s;
  memset(&s, 0, sizeof s);
  s.c = c;
  s.tr.ranks = 1;
  int rc = c->dist ? dist_start(&s) : RP_CLI_OK;
  if (!rc)
    rc = run(&s);
  rp_exec_destroy(s.ex);
  rp_graph_destroy(s.g);
  rp_gpt_destroy(s.m);
  if (s.rt) {
    rp_status st = rp_runtime_destroy(s.rt);
    if (st != RP_OK)
      rp_cli_say(stderr, "%s: destroying the runtime: %s (%s)\n",
                 rp_train_who(), rp_status_name(st), rp_error_detail());
  }
  rp_train_mpi_stop(&s.tr); /* after the runtime is destroyed */
  rp_text_free(&s.text);
  rp_gpt_ckpt_free(&s.ckpt);
  free(s.vx);
  free(s.vy);
  free(s.ns);
  return rc;
}
