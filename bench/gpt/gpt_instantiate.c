/* bench/gpt/gpt_instantiate.c — the cost of compiling a GPT training step:
 * builds the model of train/gpt.h (the step `reprise train --model gpt`
 * runs), records one step, then instantiates it REPS times (each exec
 * destroyed before the next) and prints one JSON object: the recorded ops,
 * the record time and the instantiate times (min/median/max ms; the median
 * of an even count is the mean of the middle two).
 *
 *   gpt_instantiate [--layers L] [--heads H] [--width C] [--context T]
 *                   [--batch B] [--vocab V] [--procs P] [--reps N]
 *                   [--backend cpu|cuda|auto]
 *
 * Defaults: nanoGPT's shakespeare_char step (6 layers, 6 heads, width 384,
 * context 256, batch 64, vocab 65), 1 processor, 10 repetitions, the CPU
 * backend. Built with the benchmarks (REPRISE_BENCH); bench/torch_gpt.py
 * runs it beside `reprise train`. Exit status 0, 1 on an engine error, 2 on
 * bad usage. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "reprise.h"
#include "train/gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPS 1000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int fail(const char *what, rp_status st) {
  fprintf(stderr, "gpt_instantiate: %s: %s: %s\n", what, rp_status_name(st),
          rp_error_detail());
  return 1;
}

static int usage(const char *bad) {
  fprintf(stderr,
          "gpt_instantiate: bad option or value '%s'\n"
          "usage: gpt_instantiate [--layers L] [--heads H] [--width C] "
          "[--context T] [--batch B] [--vocab V] [--procs P] [--reps N] "
          "[--backend cpu|cuda|auto]\n",
          bad);
  return 2;
}

/* Parses argv into cfg, *reps and *backend; 0 ok, 2 bad usage. */
static int parse(int argc, char **argv, rp_gpt_config *cfg, unsigned *reps,
                 rp_backend_kind *backend) {
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (i + 1 >= argc)
      return usage(o);
    const char *v = argv[++i];
    if (!strcmp(o, "--backend")) {
      if (!strcmp(v, "cpu"))
        *backend = RP_BACKEND_CPU;
      else if (!strcmp(v, "cuda"))
        *backend = RP_BACKEND_CUDA;
      else if (!strcmp(v, "auto"))
        *backend = RP_BACKEND_AUTO;
      else
        return usage(v);
      continue;
    }
    char *end = NULL;
    unsigned long n = strtoul(v, &end, 10);
    if (!*v || *end || n < 1 || n > 1u << 20)
      return usage(v);
    if (!strcmp(o, "--layers"))
      cfg->layers = (uint32_t)n;
    else if (!strcmp(o, "--heads"))
      cfg->heads = (uint32_t)n;
    else if (!strcmp(o, "--width"))
      cfg->width = (uint32_t)n;
    else if (!strcmp(o, "--context"))
      cfg->context = (uint32_t)n;
    else if (!strcmp(o, "--batch"))
      cfg->batch = (uint32_t)n;
    else if (!strcmp(o, "--vocab"))
      cfg->vocab = (uint32_t)n;
    else if (!strcmp(o, "--procs"))
      cfg->procs = (uint32_t)n;
    else if (!strcmp(o, "--reps") && n <= MAX_REPS)
      *reps = (unsigned)n;
    else
      return usage(o);
  }
  return 0;
}

/* Records the step once, instantiates it reps times into ms[]. */
static int measure(rp_gpt *m, unsigned reps, double *ms, double *record_ms,
                   uint32_t *ops) {
  rp_graph *g = NULL;
  double t0 = now_ms();
  rp_status st = rp_gpt_record(m, &g);
  *record_ms = now_ms() - t0;
  if (st != RP_OK)
    return fail("recording the step", st);
  *ops = rp_graph_op_count(g);
  int rc = 0;
  for (unsigned r = 0; r < reps && !rc; r++) {
    rp_exec *ex = NULL;
    t0 = now_ms();
    st = rp_instantiate(g, NULL, &ex);
    ms[r] = now_ms() - t0;
    if (st != RP_OK)
      rc = fail("instantiating the step", st);
    else if ((st = rp_exec_destroy(ex)) != RP_OK)
      rc = fail("destroying the exec", st);
  }
  st = rp_graph_destroy(g);
  return rc ? rc : st ? fail("destroying the graph", st) : 0;
}

int main(int argc, char **argv) {
  rp_gpt_config cfg;
  rp_gpt_config_init(&cfg);
  cfg.layers = 6;
  cfg.heads = 6;
  cfg.width = 384;
  cfg.context = 256;
  cfg.batch = 64;
  cfg.vocab = 65;
  cfg.ring = 1;
  unsigned reps = 10;
  rp_backend_kind backend = RP_BACKEND_CPU;
  int rc = parse(argc, argv, &cfg, &reps, &backend);
  if (rc)
    return rc;
  rp_runtime_config rc_cfg;
  rp_runtime_config_init(&rc_cfg);
  rc_cfg.backend = backend;
  rc_cfg.cpus = cfg.procs;
  rc_cfg.gpus = cfg.procs;
  rc_cfg.quiet = 1;
  rc_cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  rp_status st = rp_runtime_create(&rc_cfg, &rt);
  if (st != RP_OK)
    return fail("creating the runtime", st);
  rp_kernel_tasks k;
  rp_gpt *m = NULL;
  if ((st = rp_kernels_register(rt, &k)) != RP_OK)
    rc = fail("registering the kernels", st);
  else if ((st = rp_gpt_create(rt, &k, &cfg, &m)) != RP_OK)
    rc = fail("building the model", st);
  double ms[MAX_REPS], record_ms = 0;
  uint32_t ops = 0;
  if (!rc)
    rc = measure(m, reps, ms, &record_ms, &ops);
  if (!rc) {
    qsort(ms, reps, sizeof *ms, cmp_double);
    /* of an even count, the mean of the middle two */
    double median =
        reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
    printf("{\"layers\": %u, \"heads\": %u, \"width\": %u, \"context\": %u, "
           "\"batch\": %u, \"vocab\": %u, \"procs\": %u, \"backend\": \"%s\", "
           "\"ops\": %u, \"record_ms\": %.3f, \"reps\": %u, "
           "\"instantiate_ms\": {\"min\": %.3f, \"median\": %.3f, "
           "\"max\": %.3f}}\n",
           cfg.layers, cfg.heads, cfg.width, cfg.context, cfg.batch, cfg.vocab,
           cfg.procs,
           rp_runtime_backend(rt) == RP_BACKEND_CUDA ? "cuda" : "cpu", ops,
           record_ms, reps, ms[0], median, ms[reps - 1]);
  }
  if ((st = rp_gpt_destroy(m)) != RP_OK && !rc)
    rc = fail("destroying the model", st);
  if ((st = rp_runtime_destroy(rt)) != RP_OK && !rc)
    rc = fail("destroying the runtime", st);
  return rc;
}
