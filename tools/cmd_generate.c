/* tools/cmd_generate.c — `reprise generate`: text from a GPT checkpoint
 * (`reprise train --model gpt --save-weights FILE`), decoded by replaying
 * one recorded decode step per token (train/gpt.h: rp_gpt_decode_record,
 * rp_gpt_generate) of a decode-only model (rp_gpt_create_decoder) whose
 * weights are streamed from the file (rp_gpt_ckpt_load_weights). Exit status: 0
 * generated, 1 failed (unreadable checkpoint, engine error), 2 bad usage. */
#include "cmd_train.h"

#include "train/train_util.h"

#include <getopt.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_cli {
  rp_backend_kind backend;
  const char *backend_src; /* "--backend", "REPRISE_BACKEND" or NULL */
  const char *weights, *prompt;
  int prompt_given;
  uint32_t tokens, top_k;
  uint64_t seed;
  float temperature;
} gen_cli;

_Static_assert(ULONG_MAX == UINT64_MAX,
               "--seed parses 64 bits as unsigned long");

static void gen_usage(FILE *f) {
  fprintf(f,
          "usage: reprise generate --load-weights FILE [options]\n"
          "\n"
          "Generates text with a GPT checkpoint of `reprise train --model "
          "gpt\n"
          "--save-weights FILE`: the decode step (one token at a position,\n"
          "with key/value caches) is recorded once and replayed per token,\n"
          "the position and the token as per-replay arguments.\n"
          "\n"
          "  --load-weights FILE   the checkpoint (required)\n"
          "  --prompt TEXT         the text to continue (default a newline);\n"
          "                        its bytes must be in the checkpoint's\n"
          "                        vocabulary; printed whole, but past the\n"
          "                        model's context only its last context\n"
          "                        bytes are decoded\n"
          "  --tokens N            bytes to generate, 1..1000000 (default\n"
          "                        200), each printed as it is drawn;\n"
          "                        past the model's context the last\n"
          "                        context/2 bytes are decoded again\n"
          "                        from position 0, and it goes on\n"
          "  --temperature X       sampling temperature in [0, 100], 0\n"
          "                        greedy (default 1)\n"
          "  --top-k K             draw only from the K likeliest bytes,\n"
          "                        1..65536 (ties with the K-th included;\n"
          "                        default all)\n"
          "  --seed N              sampling seed, 0..2^64-1 (default 1)\n"
          "  --backend cpu|cuda|auto  (default auto)\n"
          "  -h, --help            this text\n"
          "\n"
          "Exit status: 0 generated, 1 failed (a bad checkpoint, a prompt\n"
          "byte outside its vocabulary, no CUDA device for --backend cuda,\n"
          "logits that are not finite, standard output not written: a\n"
          "reader gone stops the run at once, silently), 2 bad usage.\n");
}

/* A temperature above 0 that the sampler's float holds as 0 (it would
 * decode greedily unasked): 1e-50, or 1e-400 past even a double. */
static int tiny_temperature(const char *s) {
  if (!s || !*s || *s == '-' || isspace((unsigned char)*s) || strchr(s, 'x') ||
      strchr(s, 'X'))
    return 0;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || isnan(v) || v <= 0 || v > 1)
    return v == 0 && !*end && errno == ERANGE; /* below a double's range */
  return (float)v == 0.0f;
}

static int gen_parse(int argc, char **argv, gen_cli *c) {
  static const struct option opts[] = {
      {"load-weights", required_argument, NULL, 'w'},
      {"prompt", required_argument, NULL, 'p'},
      {"tokens", required_argument, NULL, 'n'},
      {"temperature", required_argument, NULL, 't'},
      {"seed", required_argument, NULL, 's'},
      {"top-k", required_argument, NULL, 'k'},
      {"backend", required_argument, NULL, 'b'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static char prog[] = "reprise generate";
  argv[0] = prog;
  rp_cli_set_usage(gen_usage);
  c->backend = RP_BACKEND_AUTO;
  c->prompt = "\n";
  c->tokens = 200;
  c->seed = 1;
  c->temperature = 1.0f;
  optind = 1;
  int opt, rc = RP_CLI_OK;
  while (!rc && (opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    double t;
    switch (opt) {
    case 'w':
      c->weights = optarg;
      break;
    case 'p':
      c->prompt = optarg;
      c->prompt_given = 1;
      break;
    case 'n':
      rc = rp_cli_parse_u32("generate", "--tokens", optarg, 1, 1000000,
                            &c->tokens);
      break;
    case 't':
      if (tiny_temperature(optarg))
        rc = rp_cli_usage_error("generate",
                                "--temperature: '%s' is above 0 but below "
                                "the smallest temperature a float holds "
                                "(%g; 0 decodes greedily)",
                                optarg, (double)FLT_TRUE_MIN);
      else if (!rp_cli_parse_double(optarg, &t) || t < 0 || t > 100)
        rc = rp_cli_usage_error("generate",
                                "--temperature: '%s' is not a number in "
                                "[0, 100]",
                                optarg);
      else
        c->temperature = (float)t;
      break;
    case 's': { /* 64 bits, as train's --seed */
      unsigned long seed = 0;
      if (!rp_cli_parse_uint(optarg, 0, ULONG_MAX, &seed))
        rc = rp_cli_usage_error("generate",
                                "--seed: '%s' is not a number in 0..%lu",
                                optarg, ULONG_MAX);
      else
        c->seed = seed;
      break;
    }
    case 'k':
      rc = rp_cli_parse_u32("generate", "--top-k", optarg, 1, 65536, &c->top_k);
      break;
    case 'b':
      rc = rp_cli_parse_backend("generate", optarg, &c->backend);
      c->backend_src = "--backend";
      break;
    case 'h':
      gen_usage(stdout);
      return -1;
    default:
      return rp_cli_bad_option("generate");
    }
  }
  if (rc)
    return rc;
  if (optind < argc)
    return rp_cli_usage_error("generate", "unexpected argument '%s'",
                              argv[optind]);
  /* the environment where no option decided (README "Environment") */
  if ((rc = rp_cli_env_backend_src("generate", &c->backend, &c->backend_src)))
    return rc;
  if (!c->weights)
    return rp_cli_usage_error("generate", "--load-weights FILE is required");
  const char *const ins[][2] = {{"--load-weights", c->weights}};
  if ((rc = rp_cli_check_inputs("generate", ins, 1)))
    return rc;
  if (!c->prompt[0])
    return rp_cli_usage_error("generate", "--prompt: an empty prompt");
  return RP_CLI_OK;
}

static int gfail(const char *what, rp_status st) {
  rp_cli_say(stderr, "reprise generate: %s: %s (%s)\n", what,
             rp_status_name(st), rp_error_detail());
  return RP_CLI_FAILED;
}

/* The prompt's bytes as tokens of the checkpoint's vocabulary. Without
 * --prompt: a newline, or the vocabulary's first byte when the corpus had
 * no newline (said on stderr). */
static int encode(gen_cli *c, const rp_gpt_ckpt *k, int32_t *out) {
  static char first[2];
  if (!c->prompt_given && !memchr(k->bytes, '\n', k->vocab)) {
    first[0] = (char)k->bytes[0];
    c->prompt = first;
    rp_cli_say(stderr,
               "reprise generate: %s has no newline in its vocabulary: the "
               "prompt is its first byte (0x%02x); --prompt TEXT sets one\n",
               c->weights, (unsigned)k->bytes[0]);
  }
  for (size_t i = 0; c->prompt[i]; i++) {
    int32_t id = -1;
    for (uint32_t v = 0; v < k->vocab; v++)
      id = k->bytes[v] == (uint8_t)c->prompt[i] ? (int32_t)v : id;
    if (id < 0) {
      rp_cli_say(stderr,
                 "reprise generate: --prompt: 0x%02x (the prompt's byte at "
                 "offset %zu) is not in the vocabulary of %s\n",
                 (unsigned)(uint8_t)c->prompt[i], i, c->weights);
      return RP_CLI_FAILED;
    }
    out[i] = id;
  }
  return RP_CLI_OK;
}

/* Each byte goes out as it is drawn (a long run shows its text as it
 * comes, and an interrupted one keeps what it printed); a write that
 * fails stops the run. */
typedef struct byte_out {
  const uint8_t *bytes; /* token -> byte */
  int err;              /* errno of the failed write, else 0 */
  rp_cli_text text;     /* on stdout */
} byte_out;

static int put_flushed(byte_out *o, int32_t tok) {
  errno = 0; /* a failure's own errno, not an older one */
  rp_cli_text_put(&o->text, o->bytes[tok]);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    o->err = errno ? errno : EIO;
    return -1;
  }
  return 0;
}

static rp_status on_token(void *arg, int32_t tok) {
  byte_out *o = arg;
  return put_flushed(o, tok)
             ? rp_error_set(RP_EIO, "writing to standard output: %s",
                            strerror(o->err))
             : RP_OK;
}

static int generate(gen_cli *c, rp_gpt_ckpt *k) {
  size_t plen = strlen(c->prompt); /* the default's 1 byte stays 1 */
  int32_t *tok = calloc(plen + c->tokens, sizeof *tok);
  if (!tok)
    return gfail("allocating the tokens",
                 rp_error_set(RP_ENOMEM,
                              "out of memory for %zu bytes: the prompt's %zu "
                              "and the %u to generate",
                              (plen + c->tokens) * sizeof *tok, plen,
                              c->tokens));
  int rc = encode(c, k, tok);
  rp_runtime *rt = NULL;
  rp_gpt *m = NULL;
  rp_graph *g = NULL;
  rp_exec *ex = NULL;
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = c->backend;
  cfg.cpus = 1;
  cfg.gpus = 1;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_status st;
  rp_kernel_tasks kt;
  rp_gpt_config gc;
  rp_gpt_config_init(&gc);
  gc.layers = k->layers;
  gc.heads = k->heads;
  gc.width = k->width;
  gc.context = k->context;
  gc.vocab = k->vocab;
  gc.batch = 1;
  gc.ring = 1;
  if (!rc && (st = rp_runtime_create(&cfg, &rt)) != RP_OK) {
    char what[64] = "creating the runtime";
    if (c->backend_src && c->backend != RP_BACKEND_AUTO)
      rp_cli_runtime_what(what, sizeof what, c->backend_src, c->backend);
    rc = gfail(what, st);
  }
  const char *why = rt ? rp_runtime_backend_reason(rt) : "";
  if (!rc && c->backend == RP_BACKEND_AUTO && why[0])
    rp_cli_say(stderr, "reprise generate: not CUDA: %s\n", why);
  if (!rc && (st = rp_kernels_register(rt, &kt)) != RP_OK)
    rc = gfail("registering the kernels", st);
  /* the decode-only model: the weights, the caches, one position's
   * activations; on the CPU backend against the memory the process may
   * have, as train's model */
  if (rt && rp_runtime_backend(rt) == RP_BACKEND_CPU)
    gc.max_bytes = rp_train_memory_limit();
  if (!rc && (st = rp_gpt_create_decoder(rt, &kt, &gc, &m)) != RP_OK) {
    if (st == RP_ENOMEM && gc.max_bytes)
      rp_cli_say(stderr,
                 "reprise generate: building the model: RP_ENOMEM (%s): the "
                 "limit is the memory this process may have (the least of "
                 "physical memory, the cgroup's limit and RLIMIT_AS)\n",
                 rp_error_detail());
    rc = st == RP_ENOMEM && gc.max_bytes ? RP_CLI_FAILED
                                         : gfail("building the model", st);
  }
  /* the weights streamed from the file (checked whole before: the same
   * bytes, or nothing is loaded) */
  if (!rc && (st = rp_gpt_ckpt_load_weights(m, c->weights, k)) != RP_OK)
    rc = gfail("loading the weights", st);
  if (!rc && (st = rp_gpt_decode_record(m, &g)) != RP_OK)
    rc = gfail("recording the decode step", st);
  if (!rc && (st = rp_instantiate(g, NULL, &ex)) != RP_OK)
    rc = gfail("instantiating the decode step", st);
  byte_out o = {k->bytes, 0, {stdout, 0}};
  for (size_t i = 0; !rc && !o.err && i < plen; i++)
    (void)put_flushed(&o, tok[i]);
  uint64_t t0 = rp_train_now_ns();
  rp_gpt_sampling how = {c->temperature, c->top_k, c->seed, on_token, &o};
  if (!rc && !o.err &&
      (st = rp_gpt_generate(m, ex, tok, (uint32_t)plen, c->tokens, &how,
                            tok)) != RP_OK &&
      !o.err) {
    /* the text so far (the prompt at least) ends its line before the
     * error is said */
    rp_cli_text_end(&o.text);
    putchar('\n');
    fflush(stdout);
    rc = gfail("generating", st);
  }
  double s = (double)(rp_train_now_ns() - t0) * 1e-9;
  if (!rc && !o.err) {
    errno = 0;
    rp_cli_text_end(&o.text);
    if (putchar('\n') == EOF || fflush(stdout) != 0)
      o.err = errno ? errno : EIO;
  }
  if (!rc && o.err) { /* a reader gone (| head): said by nobody, as a
                         shell's pipeline would */
    if (!rp_cli_stdout_reader_gone(o.err))
      rp_cli_say(stderr,
                 "reprise generate: writing to standard output failed: "
                 "%s\n",
                 strerror(o.err));
    rc = RP_CLI_FAILED;
  }
  if (!rc) {
    /* the time covers the prompt's last window too (one replay per
     * position, filling the caches), so the rate is a lower bound */
    rp_cli_say(
        stderr,
        "reprise generate: %u byte%s in %.3f s (%.0f tokens/s generated; "
        "one replay of the %u-op decode step per position, the prompt's "
        "included) on %s\n",
        c->tokens, c->tokens == 1 ? "" : "s", s, s > 0 ? c->tokens / s : 0,
        rp_graph_op_count(g),
        rp_runtime_backend(rt) == RP_BACKEND_CUDA ? "cuda" : "cpu");
  }
  rp_exec_destroy(ex);
  rp_graph_destroy(g);
  rp_gpt_destroy(m);
  if (rt)
    rp_runtime_destroy(rt);
  free(tok);
  return rc;
}

int rp_cmd_generate(int argc, char **argv) {
  gen_cli c;
  memset(&c, 0, sizeof c);
  int rc = gen_parse(argc, argv, &c);
  if (rc)
    return rc < 0 ? RP_CLI_OK : rc;
  rp_gpt_ckpt k; /* the header and vocabulary: the values stay in the file */
  rp_status st = rp_gpt_ckpt_read_info(c.weights, &k);
  if (st != RP_OK) {
    rp_cli_say(stderr, "reprise generate: --load-weights %s\n",
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  rc = generate(&c, &k);
  rp_gpt_ckpt_free(&k);
  return rc;
}
