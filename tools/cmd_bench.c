/* tools/cmd_bench.c — `reprise bench`: parse the options, run the chosen
 * benchmark, write the table to stdout and the JSON array to --json FILE. */
#include "cli.h"

#include "bench/bench.h"
#include "train/ckpt.h"
#include "train/mlp.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef REPRISE_HAVE_MPI
#include <mpi.h>
#endif

#define MAX_SIZES 16

typedef struct bench_cli {
  rp_bench_opts o;
  const char *json; /* --json FILE, or NULL */
  const char *plot; /* --plot FILE.svg|.png, or NULL */
  uint32_t sizes[MAX_SIZES];
  int workloads_given;
  int xfer, gpu, dist, build;
  int workers_given, backend_given;
  int workers_opt, mode_given, reps_given; /* given as options */
} bench_cli;

static void bench_usage(FILE *f) {
  fprintf(
      f,
      "usage: reprise bench [options]\n"
      "\n"
      "Runs the DAG workloads eagerly and/or recorded and replayed, and\n"
      "prints ns per task (median, min and max of 5 runs) and setup time.\n"
      "With replay, a 'static' row follows each replay row: the same DAG\n"
      "run by a hand-written static schedule (one thread per lane the exec\n"
      "chose, progress counters between lanes; same work, workers and\n"
      "reps); x_static is the replay median over it. For tiny, ideal_ns is\n"
      "the task time spread evenly over the workers, %%ideal the share of\n"
      "it a row reaches. bench/replay_goals.sh repeats a run and sums up.\n"
      "\n"
      "  --mode replay|eager|both  how to execute (default both)\n"
      "  --workload LIST           chain, forkjoin, layered, tiny; comma\n"
      "                            list or repeated (default all four)\n"
      "  --workers N               CPU worker threads, 1..%d (default 2;\n"
      "                            env REPRISE_WORKERS)\n"
      "  --reps N                  executions per timed run, 1..100000000\n"
      "                            (default per workload and mode)\n"
      "  --backend cpu|cuda|auto   engine backend (default auto; env\n"
      "                            REPRISE_BACKEND)\n"
      "  --quick                   a few reps only: a smoke test that the\n"
      "                            benchmarks run, not a measurement (its\n"
      "                            numbers can be 20-30x off)\n"
      "  --hop                     one cross-worker hop, spinning and\n"
      "                            sleeping consumer (alone unless\n"
      "                            --workload is given too)\n"
      "  --sizes LIST              graph sizes to sweep, in tasks per graph\n"
      "                            (about: chain length, fork-join width\n"
      "                            + 2, layers of 8 + 1), each 3..1000000,\n"
      "                            e.g. 100,1000,10000; comma list or\n"
      "                            repeated, up to %d sizes (each size\n"
      "                            once; sizes that build one graph run\n"
      "                            once); reps scale to keep the tasks per\n"
      "                            run\n",
      RP_CLI_MAX_WORKERS, MAX_SIZES);
  fprintf(
      f,
      "  --json FILE               also write the rows as a JSON array\n"
      "                            (fields: docs/bench_rows.md)\n"
      "  --plot FILE               draw ns per task against graph size\n"
      "                            (.svg, or .png with pngcairo) with\n"
      "                            gnuplot; needs --sizes that build 2\n"
      "                            graphs or more for each workload\n"
      "                            (refused before running otherwise)\n"
      "  --xfer                    the transfer benchmark instead: fixed\n"
      "                            cases on one CPU worker (takes --quick\n"
      "                            and --json only)\n"
      "  --build                   the graph-building benchmark instead:\n"
      "                            a chain of N tasks built with the\n"
      "                            builder, its instantiate, and N/2.5\n"
      "                            task registrations, in seconds, on one\n"
      "                            CPU worker (N: one --sizes value,\n"
      "                            default 100000; takes --json too)\n"
      "  --gpu                     the GPU benchmark instead: empty-kernel\n"
      "                            chains and a fork-join as stream\n"
      "                            launches, a CUDA graph and reprise\n"
      "                            replays (uses --workers, --quick);\n"
      "                            without a device: 'no GPU', no rows;\n"
      "                            REPRISE_BACKEND=cpu is refused\n"
      "  --dist                    the distributed benchmark instead:\n"
      "                            run under mpiexec -n N; the data-\n"
      "                            parallel step (replay vs eager, --workers\n"
      "                            shards per rank, 1..%d, default 1) and\n"
      "                            the replayed all-reduce vs MPI_Allreduce\n"
      "                            (from 2 ranks; 1 rank: the step rows), on\n"
      "                            the CPU backend (uses --workers, --reps,\n"
      "                            --quick, --json; every rank given rank\n"
      "                            0's; env REPRISE_DIST_TIMEOUT_MS)\n"
      "  -h, --help                this text\n"
      "\n"
      "Options win over the REPRISE_* variables (README \"Environment\").\n"
      "Exit status: 0 done, 1 a benchmark failed, 2 bad usage.\n",
      RP_MLP_MAX_PROCS);
}

/* ---- option values ---- */

static int parse_mode(const char *s, unsigned *modes) {
  if (strcmp(s, "replay") == 0)
    *modes = RP_BENCH_REPLAY;
  else if (strcmp(s, "eager") == 0)
    *modes = RP_BENCH_EAGER;
  else if (strcmp(s, "both") == 0)
    *modes = RP_BENCH_EAGER | RP_BENCH_REPLAY;
  else
    return rp_cli_usage_error("bench",
                              "--mode: '%s' is not replay, eager or both", s);
  return RP_CLI_OK;
}

static int add_workload(const char *name, void *arg) {
  unsigned bit = rp_bench_workload_parse(name);
  if (!bit)
    return rp_cli_usage_error("bench",
                              "--workload: unknown workload '%s' "
                              "(chain, forkjoin, layered, tiny)",
                              name);
  *(unsigned *)arg |= bit;
  return RP_CLI_OK;
}

static int add_size(const char *item, void *arg) {
  bench_cli *c = arg;
  unsigned long v;
  if (!rp_cli_parse_uint(item, 3, 1000000, &v))
    return rp_cli_usage_error("bench",
                              "--sizes: '%s' is not a number in "
                              "3..1000000",
                              item);
  for (uint32_t i = 0; i < c->o.nsizes; i++)
    if (c->sizes[i] == v)
      return rp_cli_usage_error("bench", "--sizes: %lu given twice", v);
  if (c->o.nsizes == MAX_SIZES)
    return rp_cli_usage_error("bench", "--sizes: more than %d sizes",
                              MAX_SIZES);
  c->sizes[c->o.nsizes++] = (uint32_t)v;
  return RP_CLI_OK;
}

/* ---- parsing ---- */

enum {
  OPT_MODE = 256,
  OPT_WORKLOAD,
  OPT_WORKERS,
  OPT_REPS,
  OPT_BACKEND,
  OPT_QUICK,
  OPT_HOP,
  OPT_JSON,
  OPT_XFER,
  OPT_GPU,
  OPT_SIZES,
  OPT_PLOT,
  OPT_DIST,
  OPT_BUILD
};

static const struct option LONGOPTS[] = {
    {"mode", required_argument, NULL, OPT_MODE},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"reps", required_argument, NULL, OPT_REPS},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"hop", no_argument, NULL, OPT_HOP},
    {"json", required_argument, NULL, OPT_JSON},
    {"xfer", no_argument, NULL, OPT_XFER},
    {"gpu", no_argument, NULL, OPT_GPU},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"dist", no_argument, NULL, OPT_DIST},
    {"build", no_argument, NULL, OPT_BUILD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One option. RP_CLI_OK, RP_CLI_USAGE, or -1 after --help. */
static int apply_option(bench_cli *c, int opt, const char *arg) {
  uint32_t v;
  int rc = RP_CLI_OK;
  switch (opt) {
  case OPT_MODE:
    c->mode_given = 1;
    return parse_mode(arg, &c->o.modes);
  case OPT_WORKLOAD:
    c->o.workloads = c->workloads_given++ ? c->o.workloads : 0;
    return rp_cli_each_item(arg, add_workload, &c->o.workloads);
  case OPT_WORKERS:
    if (!(rc = rp_cli_parse_u32("bench", "--workers", arg, 1,
                                RP_CLI_MAX_WORKERS, &v))) {
      c->o.workers = v;
      c->workers_given = c->workers_opt = 1;
    }
    return rc;
  case OPT_REPS:
    c->reps_given = 1;
    return rp_cli_parse_u32("bench", "--reps", arg, 1, 100000000, &c->o.reps);
  case OPT_BACKEND:
    c->backend_given = 1;
    return rp_cli_parse_backend("bench", arg, &c->o.backend);
  case OPT_QUICK:
    c->o.quick = 1;
    return RP_CLI_OK;
  case OPT_HOP:
    c->o.hop = 1;
    return RP_CLI_OK;
  case OPT_JSON:
    c->json = arg;
    return RP_CLI_OK;
  case OPT_XFER:
    c->xfer = 1;
    return RP_CLI_OK;
  case OPT_GPU:
    c->gpu = 1;
    return RP_CLI_OK;
  case OPT_SIZES: /* as --workload: the lists add up */
    c->o.sizes = c->sizes;
    return rp_cli_each_item(arg, add_size, c);
  case OPT_PLOT:
    c->plot = arg;
    return RP_CLI_OK;
  case OPT_DIST:
    c->dist = 1;
    return RP_CLI_OK;
  case OPT_BUILD:
    c->build = 1;
    return RP_CLI_OK;
  case 'h':
    bench_usage(stdout);
    return -1;
  default: /* getopt_long already said what was wrong */
    return rp_cli_bad_option("bench");
  }
}

static int parse_args(int argc, char **argv, bench_cli *c) {
  static char prog[] = "reprise bench"; /* getopt's messages name argv[0] */
  argv[0] = prog;
  rp_bench_opts_init(&c->o);
  c->o.say = rp_cli_say; /* --dist's messages naming --json, escaped */
  rp_cli_set_usage(bench_usage);
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "h", LONGOPTS, NULL)) != -1) {
    int rc = apply_option(c, opt, optarg);
    if (rc)
      return rc;
  }
  if (optind < argc)
    return rp_cli_usage_error("bench", "unexpected argument '%s'",
                              argv[optind]);
  /* the environment where no option decided (README "Environment") */
  int rc, env_backend = 0;
  if ((!c->backend_given &&
       (rc = rp_cli_env_backend("bench", &c->o.backend, &env_backend))) ||
      (!c->workers_given &&
       (rc = rp_cli_env_workers("bench", &c->o.workers, &c->workers_given))) ||
      (rc = rp_cli_env_check("bench")))
    return rc;
  c->o.backend_src = c->backend_given ? "--backend"
                     : env_backend    ? "REPRISE_BACKEND"
                                      : NULL;
  /* --xfer, --gpu, --build and --dist each run instead of the DAG
   * workloads (and --hop): at most one of them */
  const int alone[] = {c->xfer, c->gpu, c->build, c->dist};
  const char *alone_name[] = {"--xfer", "--gpu", "--build", "--dist"};
  const char *first = NULL;
  for (size_t i = 0; i < sizeof alone / sizeof alone[0]; i++) {
    if (alone[i] && first)
      return rp_cli_usage_error("bench",
                                "%s and %s are benchmarks of their own: "
                                "one at a time",
                                first, alone_name[i]);
    first = alone[i] ? alone_name[i] : first;
  }
  if (first && (c->o.hop || c->workloads_given))
    return rp_cli_usage_error("bench",
                              "%s runs instead of the DAG workloads: not "
                              "with %s",
                              first, c->o.hop ? "--hop" : "--workload");
  /* --xfer and --build time fixed cases on one CPU worker: the DAG
   * options would be ignored, so they are refused (--quick shortens
   * --xfer's loops; --build's one size is its first --sizes value) */
  if (c->xfer || c->build) {
    const char *dag = c->mode_given            ? "--mode"
                      : c->reps_given          ? "--reps"
                      : c->workers_opt         ? "--workers"
                      : c->backend_given       ? "--backend"
                      : c->build && c->o.quick ? "--quick"
                      : c->xfer && c->o.nsizes ? "--sizes"
                                               : NULL;
    if (dag)
      return rp_cli_usage_error("bench",
                                "%s times fixed cases on one CPU worker: "
                                "%s does not apply to it",
                                first, dag);
    if (c->build && c->o.nsizes > 1)
      return rp_cli_usage_error("bench",
                                "--build takes one --sizes value (the "
                                "chain's length), not %u",
                                c->o.nsizes);
  }
  /* --gpu times fixed kernel chains on the CUDA backend with --workers
   * and --quick: the DAG's other options would be ignored */
  if (c->gpu) {
    const char *dag = c->mode_given      ? "--mode"
                      : c->reps_given    ? "--reps"
                      : c->backend_given ? "--backend"
                      : c->o.nsizes      ? "--sizes"
                                         : NULL;
    if (dag)
      return rp_cli_usage_error("bench",
                                "--gpu times fixed cases on the CUDA "
                                "backend: %s does not apply to it",
                                dag);
    /* the variable, where no option decides, may be set for a whole
     * session: cuda and auto agree with --gpu, cpu asks for another
     * backend */
    if (env_backend && c->o.backend == RP_BACKEND_CPU)
      return rp_cli_usage_error("bench",
                                "--gpu times fixed cases on the CUDA "
                                "backend: REPRISE_BACKEND=cpu does not "
                                "apply to it (unset it, or set cuda or "
                                "auto)");
  }
  /* --dist times the MLP step both ways (--reps of them) and fixed
   * all-reduce sizes; --hop alone its own sample counts: what they would
   * ignore is refused */
  if (c->dist && (c->mode_given || c->o.nsizes))
    return rp_cli_usage_error("bench",
                              "--dist times its step replayed and eager and "
                              "all-reduces of fixed sizes: %s does not apply "
                              "to it",
                              c->mode_given ? "--mode" : "--sizes");
  /* --dist's step is train/mlp.h's on the CPU backend: one shard per
   * worker, at most RP_MLP_MAX_PROCS (REPRISE_BACKEND, where no option
   * decides, does not apply to it) */
  if (c->dist && c->backend_given && c->o.backend == RP_BACKEND_CUDA)
    return rp_cli_usage_error("bench", "--dist runs on the CPU backend: "
                                       "--backend cuda does not apply to it");
  if (c->dist && c->workers_given && c->o.workers > RP_MLP_MAX_PROCS)
    return rp_cli_usage_error(
        "bench",
        "--dist: %s%u: the step has at most %d "
        "shards (workers) per rank",
        c->workers_opt ? "--workers " : "REPRISE_WORKERS=", c->o.workers,
        RP_MLP_MAX_PROCS);
  if (c->o.hop && !c->workloads_given && (c->reps_given || c->o.nsizes))
    return rp_cli_usage_error("bench",
                              "--hop alone times one hand-off: %s applies "
                              "to the DAG workloads (add --workload)",
                              c->reps_given ? "--reps" : "--sizes");
  if (c->o.hop && c->o.workers < 2)
    return rp_cli_usage_error("bench",
                              "--hop times a hand-off between two workers: "
                              "%u worker%s (--workers or REPRISE_WORKERS)",
                              c->o.workers, c->o.workers == 1 ? "" : "s");
  if (c->o.hop && !c->workloads_given)
    c->o.workloads = 0; /* --hop alone measures only the hop */
  if (c->plot && !*c->plot)
    return rp_cli_usage_error("bench", "--plot: an empty file name");
  if (c->plot && !rp_cli_plot_ext_ok(c->plot))
    return rp_cli_usage_error("bench",
                              "--plot: '%s' must end in .svg or "
                              ".png",
                              c->plot);
  if (c->plot && (c->xfer || c->gpu || c->build || c->dist || !c->o.workloads))
    return rp_cli_usage_error("bench",
                              "--plot draws the DAG workloads: not "
                              "with --xfer, --gpu, --build, --dist or --hop "
                              "alone");
  if (c->plot && c->o.nsizes < 2)
    return rp_cli_usage_error("bench",
                              "--plot draws ns per task against graph "
                              "size: give --sizes with two sizes or more");
  /* sizes that build one graph run once (layers of 8): a workload to
   * draw needs two graphs, known before anything runs */
  static const char *const names[] = {"chain", "forkjoin", "layered", "tiny"};
  for (size_t i = 0; c->plot && i < sizeof names / sizeof *names; i++) {
    unsigned bit = rp_bench_workload_parse(names[i]);
    if ((c->o.workloads & bit) &&
        rp_bench_graphs(bit, c->o.sizes, c->o.nsizes) < 2)
      return rp_cli_usage_error("bench",
                                "--plot draws ns per task against graph "
                                "size: the --sizes given build one %s graph "
                                "(layers of 8 tasks; sizes up to 16 build "
                                "one layer): give sizes that build two or "
                                "more",
                                names[i]);
  }
  if (c->dist && !c->workers_given)
    c->o.workers = 1; /* one shard per rank: mpiexec -n 2 fills 2 cores */
  /* the runtime's bound on a peer, and the ranks' own (rp_env_check
   * above refused a bad value) */
  if (c->dist)
    (void)rp_cli_env_u32("bench", "REPRISE_DIST_TIMEOUT_MS", 1, 86400000,
                         &c->o.dist_timeout_ms, NULL);
  /* output paths and gnuplot, before any work */
  const char *const outs[][2] = {{"--json", c->json}, {"--plot", c->plot}};
  if ((rc = rp_cli_check_outputs("bench", outs, 2)) ||
      (c->plot && (rc = rp_cli_plot_terminal_check("bench --plot", c->plot))))
    return rc;
  return RP_CLI_OK;
}

/* ---- running ---- */

static int run_xfer(int quick, FILE *json) {
  return rp_bench_xfer(quick, stdout, json) ? RP_CLI_FAILED : RP_CLI_OK;
}

/* --plot: the rows collected in memory, drawn, and written to --json. */
static int run_plot(const bench_cli *c) {
  char *rows = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&rows, &len);
  if (!mem) {
    rp_cli_say(stderr, "reprise bench: out of memory\n");
    return RP_CLI_FAILED;
  }
  int rc = rp_bench_dag(&c->o, stdout, mem);
  fclose(mem);
  if (!rc && c->json && rp_file_write_atomic(c->json, rows, len) != RP_OK) {
    rp_cli_say(stderr, "reprise bench: --json %s: %s\n", c->json,
               rp_error_detail());
    rc = RP_CLI_FAILED;
  }
  if (!rc)
    rc = rp_cli_plot_bench(rows, len, c->plot);
  free(rows);
  return rc;
}

static int run(const bench_cli *c) {
  if (c->dist) /* MPI ranks: rank 0 alone opens the JSON file */
    return rp_bench_dist(&c->o, stdout, c->json) ? RP_CLI_FAILED : RP_CLI_OK;
  if (c->plot)
    return run_plot(c);
  rp_output *o = NULL; /* --json through the output writer */
  if (c->json && rp_cli_output_open("bench", "--json", c->json, &o))
    return RP_CLI_FAILED;
  FILE *json = rp_output_file(o);
  uint32_t n = c->o.nsizes ? c->o.sizes[0] : 100000;
  int rc =
      c->gpu ? (rp_bench_gpu(&c->o, stdout, json) ? RP_CLI_FAILED : RP_CLI_OK)
      : c->xfer  ? run_xfer(c->o.quick, json)
      : c->build ? (rp_bench_build(n, stdout, json) ? RP_CLI_FAILED : RP_CLI_OK)
                 : rp_bench_dag(&c->o, stdout, json);
  /* a failed run keeps the previous file; the commit checks the writes */
  if (rc != RP_CLI_OK)
    rp_output_abort(o);
  else
    rc = rp_cli_output_commit("bench", "--json", c->json, o);
  return rc;
}

static int parse_any(int argc, char **argv, void *c) {
  return parse_args(argc, argv, c);
}

/* --dist: every rank given rank 0's options (collective, before any
 * work): a rank with other --reps or --quick would wait for messages that
 * never come, other --workers measure another step under rank 0's row.
 * Output file names are rank 0's alone. */
static int same_options(const bench_cli *c) {
  const rp_bench_opts *o = &c->o; /* --backend: the CPU's, or refused */
  const struct {
    const char *what;
    const void *p;
    size_t n;
  } opt[] = {{"--workers", &o->workers, sizeof o->workers},
             {"--reps", &o->reps, sizeof o->reps},
             {"--quick", &o->quick, sizeof o->quick}};
  rp_cli_input in[sizeof opt / sizeof opt[0]];
  for (size_t k = 0; k < sizeof opt / sizeof opt[0]; k++)
    in[k] = (rp_cli_input){opt[k].what,
                           rp_fnv1a64(RP_FNV64_INIT, opt[k].p, opt[k].n)};
  return rp_cli_same_inputs("bench", in, sizeof in / sizeof in[0]);
}

int rp_cmd_bench(int argc, char **argv) {
  bench_cli c = {0};
  int rank = 0, rc;
#ifdef REPRISE_HAVE_MPI
  int started = 0; /* this call started MPI: it finalizes it */
#endif
  if (rp_cli_wants_dist(argc, argv)) { /* MPI first (cli.h) */
#ifdef REPRISE_HAVE_MPI
    int init = 0, provided = 0;
    MPI_Initialized(&init);
    if (!init) {
      MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
      started = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    rc = rp_cli_parse_dist("bench", argc, argv, parse_any, &c, sizeof c);
    if (!rc)
      rc = same_options(&c);
  } else {
    rc = parse_args(argc, argv, &c);
  }
  if (!rc && c.o.quick && rank == 0)
    rp_cli_say(
        stderr,
        "reprise bench: --quick is a smoke test, not a "
        "measurement: a few reps each, so the numbers can be 20-30x off "
        "the real ones, and first-use allocations (the allocator's "
        "caches) may show as 'replay loop allocated' lines. Drop --quick "
        "to measure.\n");
  if (!rc) /* --dist: rp_bench_dist finalizes MPI only if it started it */
    rc = run(&c);
  /* a row that could not be written: its cause (the final check of
   * standard output would find the stream in error, the errno gone) */
  int te = rp_bench_table_errno();
  if (!rc && te) {
    if (!rp_cli_stdout_reader_gone(te))
      rp_cli_say(stderr,
                 "reprise bench: writing to standard output failed: %s\n",
                 strerror(te));
    rc = RP_CLI_FAILED;
  }
#ifdef REPRISE_HAVE_MPI
  if (started)
    MPI_Finalize();
#endif
  return rc < 0 ? RP_CLI_OK : rc;
}
