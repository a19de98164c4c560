/* tools/cmd_dump.c — `reprise dump FILE`: load a graph file and print it
 * (text, DOT, JSON; with --schedule the exec's per-worker schedule too),
 * its statistics (--stats) or the lint findings (--lint).
 *
 * A graph file names its tasks; the loader needs them registered. This
 * command registers the built-in kernel tasks (kernels/tasks.h) and, for
 * every other name in the file, a placeholder task that does nothing, so
 * that any file can be inspected. A placeholder's contract is unknown
 * (unless --contract declares it): the lint checks that need contracts skip
 * it. Processor indices in a file are those of the runtime that recorded it
 * (CPU workers first, then GPUs), so the file is loaded into a runtime with
 * enough CPU workers (--cpus) and, where a device answers, the GPUs. */
#include "cli.h"
#include "engine/util.h"
#include "dump_model.h"
#include "dump_view.h"

#include "kernels/tasks.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_CJSON
#include "capture/json_strict.h"
#endif

#define MAX_CONTRACTS 64

typedef struct contract_decl {
  const char *name; /* points into argv */
  size_t len;
  unsigned flags;
} contract_decl;

/* --format html (not a format rp_graph_dump writes) */
#define FMT_HTML ((rp_dump_format)100)

typedef struct dump_cli {
  const char *file, *output;
  rp_dump_format fmt;
  unsigned group;        /* --group [DEPTH]: 0 none */
  const char *focus;     /* --focus NAME */
  unsigned long depth;   /* --depth K (default 1) */
  int depth_given, crit; /* --critical-path */
  const char *trace;     /* --trace FILE */
  int summary;           /* --summary */
  const char *diff;      /* --diff FILE */
  int format_given, schedule, stats, lint, strict;
  unsigned checks;         /* --lint=CHECK,...: DM_LINT_* bits (0: every one) */
  unsigned ignored;        /* --lint-ignore CHECK */
  unsigned long cpus;      /* --workers (REPRISE_WORKERS); 0: from the file */
  rp_backend_kind backend; /* REPRISE_BACKEND (no option) */
  uint32_t gpus;           /* --gpus (REPRISE_GPUS); 0: the recorded GPUs */
  int gpus_given;
  unsigned model_gpus;            /* GPU processors of the model loaded into */
  const rp_machine_desc *machine; /* that model's description */
  uint64_t max_bytes;             /* --max-bytes: 0 = the loader's limits */
  contract_decl contracts[MAX_CONTRACTS];
  uint32_t ncontracts;
} dump_cli;

/* What the file asks of the runtime, read before loading. */
typedef struct prescan {
  char **tasks; /* distinct task names */
  uint32_t ntasks;
  uint32_t max_proc; /* largest processor index named, or UINT32_MAX */
  int gpu_mem;       /* an instance lives in GPU memory */
  int gpu_dev[RP_MODEL_MAX_MEMS]; /* the GPU memories' logical devices */
  uint32_t ngpu_dev;
} prescan;

/* Placeholders registered for this run. */
typedef struct placeholders {
  const char **names;  /* in the order the file first names them */
  const char **sorted; /* the same, sorted: looked up per op */
  uint32_t n;
  const dump_cli *cli;
} placeholders;

/* the help names the limit */
_Static_assert(DM_REACH_MAX_OPS == 32768u, "dump_usage says 32768 ops");

static void dump_usage(FILE *f) {
  fprintf(
      f,
      "usage: reprise dump FILE [options]\n"
      "       reprise dump A.json --diff B.json\n"
      "       reprise dump --trace TRACE --summary [--group DEPTH]\n"
      "\n"
      "Loads a graph file (rp_graph_save, `reprise train --save-graph`,\n"
      "REPRISE_DUMP) and prints it. Tasks the file names that this build\n"
      "does not register run as no-op placeholders (said on stderr).\n"
      "\n"
      "  --format text|dot|json|html\n"
      "                          the dump's format (default text); DOT\n"
      "                          renders with `dot -Tsvg`, JSON is a graph\n"
      "                          file; html: one self-contained page to\n"
      "                          explore (Graphviz dot, libjs-d3)\n"
      "  --group [DEPTH]         ops grouped by their names' first DEPTH\n"
      "                          dotted components (default 1; shard\n"
      "                          suffixes .s3, .t1 not counted), edges\n"
      "                          between groups counted\n"
      "  --focus NAME            only the op or group NAME (a name, a\n"
      "                          dotted prefix, 'op N', or '(unnamed)')\n"
      "                          and the ops\n"
      "  --depth K               within K edges of it (0..1000, default 1)\n"
      "  --critical-path         the longest path by cost, each op's share\n"
      "                          (a long one first per group of names;\n"
      "                          highlighted in DOT, JSON and html)\n"
      "  --trace TRACE           costs measured in a replay trace\n"
      "                          (`reprise train --trace`), for --summary,\n"
      "                          --critical-path or --format html\n"
      "  --summary               with --trace: time per group and task,\n"
      "                          busy shares, idle gaps, slowest replays\n"
      "  --diff B.json           what B adds, removes or changes (16\n"
      "                          lines of each kind, then a count; op\n"
      "                          differences also per group); exit 0\n"
      "                          same, 1 different, 2 unreadable (or the\n"
      "                          report unwritable, -o or stdout)\n"
      "  --schedule              also instantiate the graph and print the\n"
      "                          exec's per-worker schedule (same format)\n"
      "  --stats                 op counts per kind, processor and task,\n"
      "                          critical path (ops; ns with cost hints),\n"
      "                          width\n"
      "  --lint[=CHECK,...]      findings of every check, or of those\n"
      "                          named: runahead, contract,\n"
      "                          redundant-edge, unread-result,\n"
      "                          mergeable-copies, race, instantiate\n"
      "                          (16 lines a check, then a count;\n"
      "                          docs/debugging.md)\n"
      "  --lint-ignore CHECK[,CHECK...]\n"
      "                          lint without these checks (repeatable;\n"
      "                          implies --lint)\n"
      "  --strict                with --lint: exit 1 when there is a\n"
      "                          finding or a check could not run (more\n"
      "                          than 32768 ops: no reachability) or\n"
      "                          skipped tasks of unknown contract\n"
      "  --contract NAME=host|stream\n"
      "                          the contract of a task this build does not\n"
      "                          know (repeatable, a NAME once), for\n"
      "                          --lint and --schedule\n"
      "  --workers N             CPU workers of the machine the file is\n"
      "                          read as, 1..128 (env REPRISE_WORKERS;\n"
      "                          default: the recorded ones); --cpus is\n"
      "                          its deprecated spelling\n"
      "  --gpus N                logical GPUs of that machine, 1..16 (env\n"
      "                          REPRISE_GPUS; default: the recorded ones)\n"
      "  --max-bytes N           the largest file read, graph or trace\n"
      "                          (default and at most 64 MiB for a graph,\n"
      "                          1 GiB for a trace; K, M, G suffixes); the "
      "dump\n"
      "                          allocates no instance storage (it reads\n"
      "                          into a model of the recorded machine)\n"
      "  -o, --output FILE       write to FILE instead of stdout (- is\n"
      "                          stdout); FILE is replaced only by a\n"
      "                          whole dump\n"
      "  -h, --help              this text\n");
  fputs("\nFILE (both) must be a regular file or absent: a FIFO, a device, a\n"
        "socket or a directory is refused.\n"
        "--stats and --lint print instead of the dump unless --format\n"
        "text, dot or json is given too: after a text dump, on stderr beside\n"
        "DOT or JSON (which stay one document), as --summary's text does\n"
        "beside a DOT or JSON view.\n"
        "--format html, --group, --focus and --critical-path are views of\n"
        "their own: not with --stats, --lint or --schedule.\n"
        "Exit status: 0 done (lint findings included), 1 the file\n"
        "could not be read or loaded (its status is printed), the output\n"
        "could not be written or --strict found something, 2 bad usage\n"
        "(--diff: above). The file is read on any machine: it\n"
        "loads into a model of the recorded machine (no device, no instance\n"
        "storage); --schedule plans for it without CUDA (GPU segments\n"
        "included).\n",
        f);
}

/* ---- options ---- */

static int parse_format(const char *s, rp_dump_format *f) {
  if (!strcmp(s, "text"))
    *f = RP_DUMP_TEXT;
  else if (!strcmp(s, "dot"))
    *f = RP_DUMP_DOT;
  else if (!strcmp(s, "json"))
    *f = RP_DUMP_JSON;
  else if (!strcmp(s, "html"))
    *f = FMT_HTML;
  else
    return rp_cli_usage_error("dump",
                              "--format: '%s' is not text, dot, json or "
                              "html",
                              s);
  return RP_CLI_OK;
}

static int parse_contract(dump_cli *c, const char *s) {
  const char *eq = strrchr(s, '=');
  if (!eq || eq == s)
    return rp_cli_usage_error("dump",
                              "--contract: '%s' is not NAME=host or "
                              "NAME=stream",
                              s);
  unsigned flags;
  if (!strcmp(eq + 1, "host"))
    flags = RP_TASK_HOST;
  else if (!strcmp(eq + 1, "stream"))
    flags = RP_TASK_STREAM_ORDERED;
  else
    return rp_cli_usage_error("dump",
                              "--contract: '%s' is not host or "
                              "stream",
                              eq + 1);
  for (uint32_t i = 0; i < c->ncontracts; i++)
    if (c->contracts[i].len == (size_t)(eq - s) &&
        !strncmp(c->contracts[i].name, s, c->contracts[i].len))
      return rp_cli_usage_error("dump", "--contract %.*s given twice",
                                (int)(eq - s), s);
  if (c->ncontracts == MAX_CONTRACTS)
    return rp_cli_usage_error("dump", "--contract: more than %d",
                              MAX_CONTRACTS);
  c->contracts[c->ncontracts++] = (contract_decl){s, (size_t)(eq - s), flags};
  return RP_CLI_OK;
}

/* "redundant-edge,unread-result" into DM_LINT_* bits (added to *bits). */
static int parse_checks(const char *s, const char *opt, unsigned *bits) {
  for (const char *p = s;;) {
    size_t n = strcspn(p, ",");
    unsigned bit = dm_lint_check(p, n);
    if (!bit)
      return rp_cli_usage_error("dump",
                                "%s: '%.*s' is not a lint check (the "
                                "checks: %s)",
                                opt, (int)n, p, dm_lint_checks());
    *bits |= bit;
    if (!p[n])
      return RP_CLI_OK;
    p += n + 1;
  }
}

enum {
  OPT_FORMAT = 256,
  OPT_SCHEDULE,
  OPT_STATS,
  OPT_LINT,
  OPT_LINT_IGNORE,
  OPT_STRICT,
  OPT_CONTRACT,
  OPT_CPUS,
  OPT_GPUS,
  OPT_MAX_BYTES,
  OPT_GROUP,
  OPT_FOCUS,
  OPT_DEPTH,
  OPT_CRIT,
  OPT_TRACE,
  OPT_SUMMARY,
  OPT_DIFF
};

static const struct option LONGOPTS[] = {
    {"format", required_argument, NULL, OPT_FORMAT},
    {"schedule", no_argument, NULL, OPT_SCHEDULE},
    {"stats", no_argument, NULL, OPT_STATS},
    {"lint", optional_argument, NULL, OPT_LINT},
    {"lint-ignore", required_argument, NULL, OPT_LINT_IGNORE},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"contract", required_argument, NULL, OPT_CONTRACT},
    {"workers", required_argument, NULL, OPT_CPUS},
    {"cpus", required_argument, NULL, OPT_CPUS}, /* deprecated spelling */
    {"gpus", required_argument, NULL, OPT_GPUS},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"group", optional_argument, NULL, OPT_GROUP},
    {"focus", required_argument, NULL, OPT_FOCUS},
    {"depth", required_argument, NULL, OPT_DEPTH},
    {"critical-path", no_argument, NULL, OPT_CRIT},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"summary", no_argument, NULL, OPT_SUMMARY},
    {"diff", required_argument, NULL, OPT_DIFF},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_group(dump_cli *c, const char *arg) {
  unsigned long d = 1;
  if (arg && !rp_cli_parse_uint(arg, 1, DV_MAX_DEPTH, &d))
    return rp_cli_usage_error("dump",
                              "--group: '%s' is not a group depth in "
                              "1..%u (dotted name components)",
                              arg, DV_MAX_DEPTH);
  c->group = (unsigned)d;
  return RP_CLI_OK;
}

/* The views' options (--group ... --diff); -2: not one of them. */
static int view_option(dump_cli *c, int opt, const char *arg) {
  switch (opt) {
  case OPT_GROUP:
    return parse_group(c, arg);
  case OPT_FOCUS:
    if (!arg[0])
      return rp_cli_usage_error("dump", "--focus: an empty name");
    c->focus = arg;
    return RP_CLI_OK;
  case OPT_DEPTH:
    c->depth_given = 1;
    if (!rp_cli_parse_uint(arg, 0, 1000, &c->depth))
      return rp_cli_usage_error("dump",
                                "--depth: '%s' is not a number of edges "
                                "in 0..1000",
                                arg);
    return RP_CLI_OK;
  case OPT_CRIT:
    c->crit = 1;
    return RP_CLI_OK;
  case OPT_TRACE:
    c->trace = arg;
    return RP_CLI_OK;
  case OPT_SUMMARY:
    c->summary = 1;
    return RP_CLI_OK;
  case OPT_DIFF:
    c->diff = arg;
    return RP_CLI_OK;
  default:
    return -2;
  }
}

/* One option: RP_CLI_OK, RP_CLI_USAGE, or -1 after --help. */
static int apply_option(dump_cli *c, int opt, const char *arg) {
  int vrc = view_option(c, opt, arg);
  if (vrc != -2)
    return vrc;
  switch (opt) {
  case OPT_FORMAT:
    c->format_given = 1;
    return parse_format(arg, &c->fmt);
  case OPT_SCHEDULE:
    c->schedule = 1;
    return RP_CLI_OK;
  case OPT_STATS:
    c->stats = 1;
    return RP_CLI_OK;
  case OPT_LINT:
    c->lint = 1;
    return arg ? parse_checks(arg, "--lint", &c->checks) : RP_CLI_OK;
  case OPT_LINT_IGNORE:
    c->lint = 1;
    return parse_checks(arg, "--lint-ignore", &c->ignored);
  case OPT_STRICT:
    c->strict = 1;
    return RP_CLI_OK;
  case OPT_CONTRACT:
    return parse_contract(c, arg);
  case OPT_CPUS:
    if (!rp_cli_parse_uint(arg, 1, RP_CLI_MAX_WORKERS, &c->cpus))
      return rp_cli_usage_error("dump",
                                "--workers: '%s' is not a number in "
                                "1..%d",
                                arg, RP_CLI_MAX_WORKERS);
    return RP_CLI_OK;
  case OPT_GPUS: {
    unsigned long g;
    if (!rp_cli_parse_uint(arg, 1, 16, &g))
      return rp_cli_usage_error("dump",
                                "--gpus: '%s' is not a number in "
                                "1..16",
                                arg);
    c->gpus = (uint32_t)g;
    c->gpus_given = 1;
    return RP_CLI_OK;
  }
  case OPT_MAX_BYTES:
    /* up to a trace's limit; a graph is read up to RP_GRAPH_FILE_MAX */
    return rp_cli_parse_bytes("dump", "--max-bytes", arg, DV_TRACE_MAX_BYTES,
                              &c->max_bytes);
  case 'o':
    c->output = arg;
    return RP_CLI_OK;
  case 'h': /* a failed write is said with its cause (main) */
    rp_cli_print_help(dump_usage);
    return -1;
  default: /* getopt_long said what was wrong */
    return rp_cli_bad_option("dump");
  }
}

static int is_view(const dump_cli *c) {
  return c->group || c->focus || c->crit || c->fmt == FMT_HTML;
}

/* The views' options together. */
static int check_view_args(const dump_cli *c) {
  if (c->strict && !c->lint)
    return rp_cli_usage_error("dump", "--strict needs --lint");
  if (c->lint && !((c->checks ? c->checks : DM_LINT_ALL) & ~c->ignored))
    return rp_cli_usage_error("dump", "--lint-ignore leaves no lint check to "
                                      "run");
  if (c->depth_given && !c->focus)
    return rp_cli_usage_error("dump", "--depth needs --focus NAME");
  if (c->ncontracts && !c->lint && !c->schedule)
    return rp_cli_usage_error("dump", "--contract declares a task's "
                                      "contract for --lint or --schedule: "
                                      "give one of them");
  if (c->diff && (c->group || c->focus || c->crit || c->summary || c->stats ||
                  c->lint || c->schedule || c->format_given || c->trace))
    return rp_cli_usage_error("dump", "--diff compares two graphs: no other "
                                      "view, format or --trace with it");
  if (c->summary && !c->trace)
    return rp_cli_usage_error("dump", "--summary needs --trace FILE");
  if (c->summary && !c->file && (c->cpus || c->gpus_given))
    return rp_cli_usage_error("dump",
                              "--trace FILE --summary without a graph FILE "
                              "reads no machine: no --workers or --gpus "
                              "with it");
  if (c->trace && !c->summary && !c->crit && c->fmt != FMT_HTML)
    return rp_cli_usage_error("dump", "--trace FILE needs --summary, "
                                      "--critical-path or --format html");
  if (c->summary && (c->stats || c->lint || c->schedule))
    return rp_cli_usage_error("dump", "--summary is a view of its own: not "
                                      "with --stats, --lint or --schedule");
  if (c->summary && !c->file && (c->focus || c->crit || c->format_given))
    return rp_cli_usage_error("dump",
                              "--trace FILE --summary without a graph FILE "
                              "prints the trace's summary as text: no "
                              "--format, --focus or --critical-path with it");
  if (c->summary && c->file && !is_view(c) && c->format_given &&
      c->fmt != RP_DUMP_TEXT)
    return rp_cli_usage_error("dump",
                              "--summary prints text: --format %s "
                              "needs a view beside it (--group, "
                              "--focus, --critical-path)",
                              c->fmt == RP_DUMP_DOT ? "dot" : "json");
  if ((c->group || c->focus || c->crit || c->fmt == FMT_HTML) &&
      (c->schedule || c->stats || c->lint))
    return rp_cli_usage_error("dump", "--group, --focus, --critical-path "
                                      "and --format html are views of "
                                      "their own: not with --schedule, "
                                      "--stats or --lint");
  return RP_CLI_OK;
}

static int parse_args(int argc, char **argv, dump_cli *c) {
  static char prog[] = "reprise dump"; /* getopt's messages name argv[0] */
  argv[0] = prog;
  rp_cli_set_usage(dump_usage);
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, "ho:", LONGOPTS, NULL)) != -1) {
    const char *arg = optarg;
    /* --group DEPTH: a number right after --group is its depth (a negative
     * one too, to be refused as a depth rather than read as an option) */
    const char *next = optind < argc ? argv[optind] : NULL;
    const char *digits = next && next[0] == '-' ? next + 1 : next;
    if (opt == OPT_GROUP && !arg && digits && digits[0] >= '0' &&
        digits[0] <= '9' && strspn(digits, "0123456789") == strlen(digits))
      arg = argv[optind++];
    int rc = apply_option(c, opt, arg);
    if (rc)
      return rc;
  }
  /* --summary reads a graph FILE only beside its --trace: without one,
   * check_view_args names the --trace missing */
  if (optind >= argc && !c->summary)
    return rp_cli_usage_error("dump", "missing the graph FILE");
  c->file = optind < argc ? argv[optind++] : NULL;
  if (optind < argc)
    return rp_cli_usage_error("dump", "unexpected argument '%s'", argv[optind]);
  int rc = check_view_args(c);
  if (rc)
    return rc;
  /* the environment where no option decided (README "Environment") */
  uint32_t w = 0;
  if ((rc = rp_cli_env_backend("dump", &c->backend, NULL)) ||
      (!c->gpus_given &&
       (rc = rp_cli_env_u32("dump", "REPRISE_GPUS", 1, 16, &c->gpus, NULL))) ||
      (!c->cpus && (rc = rp_cli_env_workers("dump", &w, NULL))) ||
      (rc = rp_cli_env_check("dump")))
    return rc;
  if (w)
    c->cpus = w;
  /* a graph is read up to its loader's limit: more is for a trace */
  if (c->max_bytes > RP_GRAPH_FILE_MAX && !c->trace)
    return rp_cli_usage_error("dump",
                              "--max-bytes %llu: a graph file has 1..%u "
                              "bytes (up to %llu with --trace, for the "
                              "trace)",
                              (unsigned long long)c->max_bytes,
                              RP_GRAPH_FILE_MAX,
                              (unsigned long long)DV_TRACE_MAX_BYTES);
  if (c->output && !strcmp(c->output, "-"))
    c->output = NULL; /* -o -: standard output, as without -o */
  const char *const out[][2] = {{"--output", c->output}};
  const char *const in[][2] = {
      {"graph", c->file}, {"--trace", c->trace}, {"--diff", c->diff}};
  if ((rc = rp_cli_check_inputs("dump", in, 3)) ||
      (rc = rp_cli_check_not_inputs("dump", out, 1, in, 3)))
    return rc;
  return rp_cli_check_output("dump", "--output", c->output);
}

/* ---- prescan: task names and processors, before loading ---- */

static void prescan_free(prescan *p) {
  for (uint32_t i = 0; i < p->ntasks; i++)
    free(p->tasks[i]);
  free(p->tasks);
  memset(p, 0, sizeof *p);
}

#ifdef REPRISE_HAVE_CJSON
static void note_proc(prescan *p, const cJSON *v) {
  if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 65536) {
    uint32_t x = (uint32_t)v->valuedouble;
    if (p->max_proc == UINT32_MAX || x > p->max_proc)
      p->max_proc = x;
  }
}

/* A GPU memory an instance or mirror lives in (files without "machine"). */
static void note_gpu_dev(prescan *p, const cJSON *v) {
  p->gpu_mem = 1;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1023)
    return;
  int d = (int)v->valuedouble;
  for (uint32_t i = 0; i < p->ngpu_dev; i++)
    if (p->gpu_dev[i] == d)
      return;
  if (p->ngpu_dev < RP_MODEL_MAX_MEMS)
    p->gpu_dev[p->ngpu_dev++] = d;
}

/* A name and where it first appears, for sorting names with repeats. */
typedef struct named_at {
  const char *name;
  uint32_t at;
} named_at;

static int named_at_cmp(const void *a, const void *b) {
  const named_at *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The distinct task names of the ops, in the order they first appear:
 * sorted once to find the repeats (a file of 200,000 ops with as many
 * names), not compared pairwise. RP_ENOMEM (with a detail) when the names
 * cannot be had: the placeholders would be missing, and the loader would
 * say their tasks are unknown. */
static rp_status note_tasks(prescan *p, const cJSON *ops) {
  int n = cJSON_GetArraySize(ops);
  if (n <= 0)
    return RP_OK;
  named_at *v = malloc(sizeof *v * (size_t)n);
  if (!v)
    return rp_error_set(RP_ENOMEM,
                        "out of memory for the task names of %d ops "
                        "(%zu bytes)",
                        n, sizeof *v * (size_t)n);
  uint32_t m = 0;
  const cJSON *o;
  cJSON_ArrayForEach(o, ops) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "task");
    if (cJSON_IsString(t) && t->valuestring && m < (uint32_t)n)
      v[m] = (named_at){t->valuestring, m}, m++;
  }
  qsort(v, m, sizeof *v, named_at_cmp);
  /* the first of each run of equal names marks its position */
  uint8_t *first = calloc(m ? m : 1, 1);
  const char **at = calloc(m ? m : 1, sizeof *at);
  p->tasks = calloc(m ? m : 1, sizeof *p->tasks);
  rp_status st = RP_OK;
  if (first && at && p->tasks) {
    for (uint32_t i = 0; i < m; i++)
      if (i == 0 || strcmp(v[i].name, v[i - 1].name)) {
        first[v[i].at] = 1;
        at[v[i].at] = v[i].name;
      }
    for (uint32_t i = 0; i < m && !st; i++)
      if (first[i] && (p->tasks[p->ntasks] = strdup(at[i])) != NULL)
        p->ntasks++;
      else if (first[i])
        st = rp_error_set(RP_ENOMEM, "out of memory for the task name '%s'",
                          at[i]);
  } else {
    st = rp_error_set(RP_ENOMEM,
                      "out of memory for the task names of %u ops (%zu bytes)",
                      m, (size_t)(m ? m : 1) * (1 + 2 * sizeof(char *)));
  }
  free(first);
  free(at);
  free(v);
  return st;
}

static rp_status scan_tree(prescan *p, const cJSON *graph) {
  const cJSON *o, *ops = cJSON_GetObjectItemCaseSensitive(graph, "ops");
  rp_status st = note_tasks(p, ops);
  if (st)
    return st;
  cJSON_ArrayForEach(o, ops) {
    const cJSON *sp;
    note_proc(p, cJSON_GetObjectItemCaseSensitive(o, "proc"));
    cJSON_ArrayForEach(sp, cJSON_GetObjectItemCaseSensitive(o, "shard_procs"))
        note_proc(p, sp);
  }
  const cJSON *in,
      *insts = cJSON_GetObjectItemCaseSensitive(graph, "instances");
  cJSON_ArrayForEach(in, insts) {
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(in, "mem");
    if (cJSON_IsString(mem) && mem->valuestring &&
        !strcmp(mem->valuestring, "gpu"))
      note_gpu_dev(p, cJSON_GetObjectItemCaseSensitive(in, "device"));
  }
  cJSON_ArrayForEach(in, cJSON_GetObjectItemCaseSensitive(graph, "mirrors")) {
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(in, "mem");
    if (cJSON_IsString(mem) && mem->valuestring &&
        !strcmp(mem->valuestring, "gpu"))
      note_gpu_dev(p, cJSON_GetObjectItemCaseSensitive(in, "device"));
  }
  return RP_OK;
}

/* A file that does not parse, or holds more values than the loader reads,
 * is left to the loader to refuse; RP_ENOMEM (with a detail) when memory
 * runs out, since the loader, given no placeholders and too few
 * processors, would blame the file. */
static rp_status prescan_text(const char *text, size_t len, prescan *p) {
  memset(p, 0, sizeof *p);
  p->max_proc = UINT32_MAX;
  cJSON *doc = NULL;
  rp_status st = rp__json_parse_strict(text, len, RP_GRAPH_MAX_VALUES, &doc);
  if (st != RP_ENOMEM)
    st = RP_OK;
  if (doc)
    st = scan_tree(p, cJSON_GetObjectItemCaseSensitive(doc, "graph"));
  cJSON_Delete(doc);
  return st;
}
#else
static rp_status prescan_text(const char *text, size_t len, prescan *p) {
  (void)text, (void)len;
  memset(p, 0, sizeof *p);
  p->max_proc = UINT32_MAX;
  return RP_OK;
}
#endif

/* The file's text, read once for the prescan and the loader: a regular
 * file of at most the loader's size limit (or --max-bytes below it). NULL
 * after saying why. */
static char *read_graph_file(const dump_cli *c, const char *file, size_t *len) {
  size_t max = RP_GRAPH_FILE_MAX;
  if (c->max_bytes && c->max_bytes < max)
    max = (size_t)c->max_bytes;
  char *text = NULL;
  rp_status st = rp_file_read_regular(file, max, &text, len);
  if (st) {
    /* the limit named with the option that set it */
    int opt = st == RP_ERANGE && max == c->max_bytes;
    rp_cli_say(stderr, "reprise dump: cannot load '%s': %s (%s): %s%s\n", file,
               rp_status_name(st), rp_status_str(st), rp_error_detail(),
               opt ? " (--max-bytes)" : "");
    return NULL;
  }
  return text;
}

/* ---- runtime and tasks ---- */

static rp_status noop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static const contract_decl *find_contract(const dump_cli *c, const char *name) {
  for (uint32_t i = 0; i < c->ncontracts; i++)
    if (strlen(name) == c->contracts[i].len &&
        !strncmp(name, c->contracts[i].name, c->contracts[i].len))
      return &c->contracts[i];
  return NULL;
}

/* The machine of a file without "machine" (older files): a CPU worker
 * per processor index named, system, pinned and the GPU memories the
 * instances use; processor kinds are unknown, so every one is a CPU. */
static void infer_machine(const prescan *p, rp_machine_desc *m) {
  memset(m, 0, sizeof *m);
  m->cpus = p->max_proc == UINT32_MAX ? 1 : p->max_proc + 1;
  if (m->cpus > RP_CLI_MAX_WORKERS)
    m->cpus = RP_CLI_MAX_WORKERS;
  m->mems[m->nmems++] = (rp_mem_info){RP_MEM_PINNED, -1};
  for (uint32_t i = 0; i < p->ngpu_dev && m->nmems < RP_MODEL_MAX_MEMS; i++)
    m->mems[m->nmems++] = (rp_mem_info){RP_MEM_GPU, p->gpu_dev[i]};
}

/* --workers N / --gpus N over the recorded machine: N CPU workers; N
 * logical GPUs 0..N-1, each a processor with its memory. */
static void override_machine(const dump_cli *c, rp_machine_desc *m) {
  if (c->cpus)
    m->cpus = (unsigned)c->cpus;
  if (!c->gpus)
    return;
  m->ngpus = c->gpus < RP_MODEL_MAX_GPUS ? c->gpus : RP_MODEL_MAX_GPUS;
  for (unsigned g = 0; g < m->ngpus; g++) {
    m->gpu_device[g] = (int)g;
    if (m->nmems < RP_MODEL_MAX_MEMS)
      m->mems[m->nmems++] = (rp_mem_info){RP_MEM_GPU, (int)g};
  }
}

/* The model of the recorded machine the file is loaded into: no devices
 * needed, no instance storage (rp_runtime_create_model). */
static rp_status make_runtime(const dump_cli *c, const prescan *p,
                              const char *text, size_t len, rp_machine_desc *m,
                              rp_runtime **rt) {
  int present = 0;
  rp_status st = rp_graph_file_machine(text, len, m, &present);
  /* not the "machine" key: the loader says what is wrong; no memory to
   * read it is said, not taken for a file without one */
  if (st && st != RP_ENOMEM && !strstr(rp_error_detail(), "graph.machine"))
    st = RP_OK;
  if (st)
    return st;
  if (!present)
    infer_machine(p, m);
  override_machine(c, m);
  return rp_runtime_create_model(m, rt);
}

/* The communication tasks a runtime with a communicator registers
 * (comm/comm.c), by their contracts there: a file of a --dist or --tp step
 * names them, and the model runtime the dump reads into has no
 * communicator. */
static int dist_task_flags(const char *name, unsigned *flags) {
  static const struct {
    const char *name;
    unsigned flags;
  } t[] = {{"rp.dist.none", RP_TASK_HOST},
           {"rp.dist.send", RP_TASK_HOST},
           {"rp.dist.recv", RP_TASK_HOST},
           {"rp.dist.copy", RP_TASK_HOST},
           {"rp.dist.allreduce", RP_TASK_STREAM_ORDERED}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(t[i].name, name)) {
      *flags = t[i].flags;
      return 1;
    }
  return 0;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Built-in kernels and communication tasks, then a placeholder for every
 * other name that can be a task's (RP_EINVAL: empty, too long, a byte the
 * name rule refuses): the loader refuses the others naming the file and
 * the op. */
static rp_status register_tasks(rp_runtime *rt, const dump_cli *c,
                                const prescan *p, placeholders *ph) {
  rp_kernel_tasks k;
  rp_status st = rp_kernels_register(rt, &k);
  if (st)
    return st;
  ph->names = calloc(p->ntasks ? p->ntasks : 1, sizeof *ph->names);
  ph->sorted = calloc(p->ntasks ? p->ntasks : 1, sizeof *ph->sorted);
  if (!ph->names || !ph->sorted)
    return rp_error_set(RP_ENOMEM,
                        "out of memory for the names of %u unregistered "
                        "tasks",
                        p->ntasks);
  for (uint32_t i = 0; i < p->ntasks && !st; i++) {
    rp_task_id id;
    const contract_decl *cd = find_contract(c, p->tasks[i]);
    if (rp_task_find(rt, p->tasks[i], &id) == RP_OK) {
      if (cd)
        rp_cli_say(stderr,
                   "reprise dump: --contract %s: this build registers "
                   "that task; its registered contract is used\n",
                   p->tasks[i]);
      continue;
    }
    unsigned builtin = 0;
    int comm = !cd && dist_task_flags(p->tasks[i], &builtin);
    rp_task_desc d = {.name = p->tasks[i],
                      .cpu_fn = noop_task,
                      .gpu_fn = noop_task,
                      .flags = cd ? cd->flags : builtin};
    st = rp_task_register(rt, &d, &id);
    if (st == RP_EINVAL)
      st = RP_OK;
    else if (!st && !cd && !comm)
      ph->names[ph->n++] = p->tasks[i];
  }
  for (uint32_t j = 0; !st && j < c->ncontracts; j++) { /* a typo? */
    uint32_t i = 0;
    while (i < p->ntasks && find_contract(c, p->tasks[i]) != &c->contracts[j])
      i++;
    if (i == p->ntasks)
      rp_cli_say(stderr,
                 "reprise dump: --contract %.*s: the file has no task of that "
                 "name\n",
                 (int)c->contracts[j].len, c->contracts[j].name);
  }
  if (ph->n) {
    memcpy(ph->sorted, ph->names, sizeof *ph->sorted * ph->n);
    qsort(ph->sorted, ph->n, sizeof *ph->sorted, str_cmp);
  }
  return st;
}

/* Placeholder names the note lists (the rest are counted): a file of a
 * project with thousands of its own tasks gets one readable line. */
#define PLACEHOLDERS_SHOWN 16u

static void say_placeholders(const placeholders *ph) {
  if (!ph->n)
    return;
  rp_cli_say(stderr, "reprise dump: tasks this build does not register run as "
                     "no-op placeholders (contract unknown):");
  for (uint32_t i = 0; i < ph->n && i < PLACEHOLDERS_SHOWN; i++)
    rp_cli_say(stderr, "%s %s", i ? "," : "", ph->names[i]);
  if (ph->n > PLACEHOLDERS_SHOWN)
    rp_cli_say(stderr, ", ... (%u more; %u in all)", ph->n - PLACEHOLDERS_SHOWN,
               ph->n);
  fputc('\n', stderr);
}

static int is_placeholder(const char *name, void *arg) {
  const placeholders *ph = arg;
  return ph->n &&
         bsearch(&name, ph->sorted, ph->n, sizeof *ph->sorted, str_cmp) != NULL;
}

/* ---- loading ---- */

static void free_loaded(rp_runtime *rt, rp_graph *g) {
  uint32_t n = 0;
  rp_inst *list = NULL;
  if (rp_graph_instances(g, NULL, 0, &n) == RP_OK && n &&
      (list = malloc(sizeof *list * n)) != NULL &&
      rp_graph_instances(g, list, n, &n) == RP_OK) {
    rp_graph_destroy(g);
    for (uint32_t i = 0; i < n; i++)
      rp_instance_free(rt, list[i]);
  } else {
    rp_graph_destroy(g); /* the runtime frees the instances at destroy */
  }
  free(list);
}

/* The detail less the leading name of the reading call (the file is named
 * instead). */
static const char *file_why(void) {
  static const char *const calls[] = {"rp_graph_load_mem: ",
                                      "rp_graph_file_machine: "};
  const char *why = rp_error_detail();
  for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
    if (!strncmp(why, calls[i], strlen(calls[i])))
      return why + strlen(calls[i]);
  return why;
}

static int load_failed(const char *file, rp_status st) {
  const char *why = file_why();
  rp_cli_say(stderr, "reprise dump: cannot load '%s': %s (%s): %s\n", file,
             rp_status_name(st), rp_status_str(st), why);
  if (st == RP_EPROC)
    rp_cli_say(stderr, "reprise dump: --workers and --gpus replace the "
                       "recorded machine; processor indices in the file are "
                       "the recorded ones (CPU workers first, then GPUs)\n");
  return RP_CLI_FAILED;
}

/* ---- output ---- */

/* What a memstream collected (NULL on failure). */
typedef struct capture_buf {
  char *text;
  size_t len;
  FILE *f;
} capture_buf;

static int cap_open(capture_buf *b) {
  b->text = NULL;
  b->len = 0;
  b->f = open_memstream(&b->text, &b->len);
  return b->f ? 0 : -1;
}

static void cap_close(capture_buf *b) {
  if (b->f)
    fclose(b->f);
  b->f = NULL;
}

/* Graph and schedule in one document: JSON {"graph", "schedule"}; DOT one
 * digraph with each as a cluster, so `dot -Tsvg` renders a single SVG. */
static void combine(FILE *out, rp_dump_format fmt, const char *graph,
                    const char *sched) {
  if (fmt == RP_DUMP_JSON) {
    fprintf(out, "{\"graph\": %s, \"schedule\": %s}\n", graph, sched);
    return;
  }
  const char *g = strchr(graph, '\n'), *s = strchr(sched, '\n');
  /* the layout bounds are the root graph's (a cluster ignores them) */
  int big = strstr(graph, RP_DOT_BOUNDED) || strstr(sched, RP_DOT_BOUNDED);
  fprintf(out,
          "digraph reprise {\n  compound=true;\n%s%s%s"
          "  subgraph cluster_graph {\n  label=\"graph\";\n%s"
          "  subgraph cluster_schedule {\n  label=\"schedule\";\n%s}\n",
          big ? "  graph [" : "", big ? RP_DOT_BOUNDED : "", big ? "];\n" : "",
          g ? g + 1 : "}\n", s ? s + 1 : "}\n");
}

static int print_schedule_text(FILE *out, rp_exec *ex, rp_status st) {
  fprintf(out, "\nschedule:\n");
  if (st) {
    fprintf(out, "  not available: %s: %s\n", rp_status_name(st),
            rp_error_detail());
    return RP_CLI_OK;
  }
  return rp_exec_dump(ex, out, RP_DUMP_TEXT) ? RP_CLI_FAILED : RP_CLI_OK;
}

/* The processor an op is placed on, as the schedule lists it. */
static void say_proc(FILE *out, const dm_graph *m, rp_proc p) {
  if (p == RP_PROC_ANY)
    fprintf(out, "placed when instantiated (copies, proc any)");
  else if (p < m->nprocs && m->proc_kinds[p] == RP_PROC_GPU)
    fprintf(out, "proc %u (gpu)", p);
  else
    fprintf(out, "proc %u (cpu)", p);
}

/* --schedule on a model with GPU processors whose planning failed: the
 * placement the file records, per processor in op order (text; DOT and
 * JSON print the graph alone). */
static int print_placement(const dump_cli *c, rp_graph *g, FILE *out) {
  dm_graph m;
  if (dm_build(g, NULL, NULL, &m) != RP_OK)
    return RP_CLI_FAILED;
  fprintf(out, "\nschedule (placement only: GPU work is lowered to CUDA "
               "graphs on a machine whose GPUs answer):\n");
  for (uint32_t p = 0; p <= m.nprocs; p++) {
    rp_proc proc = p == m.nprocs ? RP_PROC_ANY : p;
    uint32_t n = 0;
    for (uint32_t i = 0; i < m.nops; i++) {
      const dm_op *op = &m.ops[i];
      int on = op->proc == proc;
      for (uint32_t s = 0; op->shard_procs && s < op->shards; s++)
        on |= op->shard_procs[s] == proc;
      if (!on)
        continue;
      if (!n++) {
        fprintf(out, "  ");
        say_proc(out, &m, proc);
        fprintf(out, ":\n");
      }
      fprintf(out, "    op %u%s%s%s %s\n", i, op->label[0] ? " '" : "",
              op->label, op->label[0] ? "'" : "", op->name);
    }
  }
  (void)c;
  dm_free(&m);
  return ferror(out) ? RP_CLI_FAILED : RP_CLI_OK;
}

/* The dump, with the schedule when asked (instantiating the graph). */
static int print_dump(const dump_cli *c, rp_graph *g, FILE *out) {
  if (!c->schedule)
    return rp_graph_dump(g, out, c->fmt) ? RP_CLI_FAILED : RP_CLI_OK;
  rp_exec *ex = NULL;
  /* A graph file does not record the max_args its program instantiated
   * with: the largest block lets every interpolation a replay could feed
   * through (the default, 256 bytes, would refuse a graph recorded for
   * more). */
  rp_exec_opts eo = {.max_args = RP_MAX_REPLAY_ARGS};
  rp_status ist = rp_instantiate(g, &eo, &ex);
  if (c->model_gpus && ist) { /* the placement the file records, at least */
    rp_cli_say(stderr, "reprise dump: --schedule: planning failed: %s: %s\n",
               rp_status_name(ist), rp_error_detail());
    if (rp_graph_dump(g, out, c->fmt))
      return RP_CLI_FAILED;
    if (c->fmt == RP_DUMP_TEXT)
      return print_placement(c, g, out);
    rp_cli_say(stderr, "reprise dump: --schedule: the machine has GPU "
                       "processors, which are not planned here: the graph "
                       "alone (--format text lists the placement)\n");
    return RP_CLI_OK;
  }
  if (ist)
    rp_cli_say(stderr, "reprise dump: --schedule: instantiate failed: %s: %s\n",
               rp_status_name(ist), rp_error_detail());
  int rc = RP_CLI_FAILED;
  if (c->fmt == RP_DUMP_TEXT) {
    rc = rp_graph_dump(g, out, c->fmt) ? RP_CLI_FAILED
                                       : print_schedule_text(out, ex, ist);
  } else if (ist) { /* said on stderr: the graph alone */
    rc = rp_graph_dump(g, out, c->fmt) ? RP_CLI_FAILED : RP_CLI_OK;
  } else {
    capture_buf gb = {0}, sb = {0};
    if (!cap_open(&gb) && !cap_open(&sb) && !rp_graph_dump(g, gb.f, c->fmt) &&
        !rp_exec_dump(ex, sb.f, c->fmt)) {
      cap_close(&gb);
      cap_close(&sb);
      combine(out, c->fmt, gb.text, sb.text);
      rc = ferror(out) ? RP_CLI_FAILED : RP_CLI_OK;
    }
    cap_close(&gb);
    cap_close(&sb);
    free(gb.text);
    free(sb.text);
  }
  rp_exec_destroy(ex);
  return rc;
}

/* *whole: the report was written whole (also when --strict fails it). */
static int print_analyses(const dump_cli *c, rp_graph *g, placeholders *ph,
                          FILE *out, int *whole) {
  dm_graph m;
  rp_status st = dm_build(g, is_placeholder, ph, &m);
  if (st) {
    rp_cli_say(stderr, "reprise dump: %s: %s\n", rp_status_name(st),
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  int rc = RP_CLI_OK;
  if (c->stats && dm_stats(&m, out, stderr))
    rc = RP_CLI_FAILED;
  if (!rc && c->lint) {
    if (c->stats)
      fputc('\n', out);
    unsigned checks = (c->checks ? c->checks : DM_LINT_ALL) & ~c->ignored;
    char refused[1024] = "";
    if ((checks & DM_LINT_INSTANTIATE) && (st = rp_graph_validate(g))) {
      snprintf(refused, sizeof refused, "%s: %s", rp_status_name(st),
               rp_error_detail());
      m.refused = refused;
    }
    dm_lint_result res;
    /* ops the runahead and contract checks skip: placeholders */
    uint32_t unknown = 0;
    if (checks & (DM_LINT_RUNAHEAD | DM_LINT_CONTRACT))
      for (uint32_t i = 0; i < m.nops; i++)
        unknown += m.ops[i].kind == RP_OP_TASK && !m.ops[i].contract_known;
    if (dm_lint(&m, checks, out, stderr, &res)) {
      rc = RP_CLI_FAILED;
    } else if (c->strict && (res.findings || res.unchecked || unknown)) {
      /* a check that could not run, or ran past some ops, fails too: CI
       * passes no graph it did not check */
      if (res.unchecked)
        rp_cli_say(stderr,
                   "reprise dump: --strict: %s: the graph is not fully "
                   "checked\n",
                   res.why);
      if (unknown)
        rp_cli_say(stderr,
                   "reprise dump: --strict: %u ops run tasks whose contract "
                   "is unknown, which runahead and contract skip: the graph "
                   "is not fully checked (declare them with --contract "
                   "NAME=host|stream, or --lint-ignore runahead,contract)\n",
                   unknown);
      rc = RP_CLI_FAILED, *whole = 1;
    }
  }
  dm_free(&m);
  return rc;
}

/* The text dump's first line: the machine the file is read as. */
static void print_machine(FILE *out, const rp_machine_desc *m) {
  fprintf(out, "machine: %u CPU worker%s (procs 0..%u)", m->cpus,
          m->cpus == 1 ? "" : "s", m->cpus - 1);
  for (unsigned g = 0; g < m->ngpus; g++)
    fprintf(out, "%s proc %u gpu device %d", g ? "," : ";", m->cpus + g,
            m->gpu_device[g]);
  fprintf(out, "; memories: system");
  for (unsigned k = 0; k < m->nmems; k++)
    if (m->mems[k].kind == RP_MEM_GPU)
      fprintf(out, ", gpu %d", m->mems[k].device);
    else if (m->mems[k].kind == RP_MEM_PINNED)
      fprintf(out, ", pinned");
  fputc('\n', out);
}

/* What the report goes to, for run_loaded and report_failed: "standard output"
 * or
 * "--output FILE". */
static char out_name[4200] = "standard output";

static int run_loaded(const dump_cli *c, rp_graph *g, placeholders *ph,
                      FILE *out, int *whole) {
  int dump = (!c->stats && !c->lint) || c->format_given;
  if (dump && c->fmt == RP_DUMP_TEXT && c->machine)
    print_machine(out, c->machine);
  int rc = dump ? print_dump(c, g, out) : RP_CLI_OK;
  /* a reader gone (`| head`) is not said, as in close_out */
  if (rc && dump && (out != stdout || !rp_cli_stdout_reader_gone(errno)))
    rp_cli_say(stderr, "reprise dump: writing the dump to %s failed: %s\n",
               out == stdout ? "standard output" : out_name, rp_error_detail());
  if (!rc && (c->stats || c->lint)) {
    /* beside a DOT or JSON dump the text goes to stderr: the output stays
     * one document that dot or a JSON reader takes */
    FILE *to = dump && c->fmt != RP_DUMP_TEXT ? stderr : out;
    if (dump && to == out)
      fputc('\n', out);
    rc = print_analyses(c, g, ph, to, whole);
  }
  *whole |= rc == RP_CLI_OK;
  return rc;
}

/* A graph file loaded into a model of its machine. */
typedef struct loaded {
  char *text; /* the file, kept for the views' extras */
  size_t len;
  prescan p;
  rp_runtime *rt;
  placeholders ph;
  rp_graph *g;
  rp_machine_desc m;
} loaded;

/* RP_CLI_OK, or RP_CLI_FAILED after saying why (unload frees either way). */
static int load(dump_cli *c, const char *file, loaded *L) {
  memset(L, 0, sizeof *L);
  L->ph.cli = c;
  L->p.max_proc = UINT32_MAX;
  if (!(L->text = read_graph_file(c, file, &L->len)))
    return RP_CLI_FAILED;
  rp_status st = prescan_text(L->text, L->len, &L->p);
  if (st) {
    rp_cli_say(stderr, "reprise dump: cannot load '%s': %s (%s): %s\n", file,
               rp_status_name(st), rp_status_str(st), rp_error_detail());
    return RP_CLI_FAILED;
  }
  st = make_runtime(c, &L->p, L->text, L->len, &L->m, &L->rt);
  c->model_gpus = st ? 0 : L->m.ngpus;
  c->machine = &L->m;
  if (!st && (st = register_tasks(L->rt, c, &L->p, &L->ph)) != RP_OK) {
    rp_cli_say(stderr, "reprise dump: registering tasks: %s: %s\n",
               rp_status_name(st), rp_error_detail());
    return RP_CLI_FAILED;
  }
  if (st) {
    rp_cli_say(stderr, "reprise dump: cannot load '%s': %s (%s): %s\n", file,
               rp_status_name(st), rp_status_str(st), file_why());
    return RP_CLI_FAILED;
  }
  if ((st = rp_graph_load_mem(L->rt, L->text, L->len, NULL, 0,
                              (size_t)c->max_bytes, &L->g)) != RP_OK)
    return load_failed(file, st);
  say_placeholders(&L->ph);
  return RP_CLI_OK;
}

/* RP_CLI_FAILED when the runtime's destroy failed. */
static int unload(loaded *L) {
  if (L->g)
    free_loaded(L->rt, L->g);
  free(L->ph.names);
  free(L->ph.sorted);
  prescan_free(&L->p);
  free(L->text);
  int rc =
      L->rt && rp_runtime_destroy(L->rt) != RP_OK ? RP_CLI_FAILED : RP_CLI_OK;
  memset(L, 0, sizeof *L);
  return rc;
}

/* Where a dump goes: -o FILE through the output writer (FILE is replaced
 * only by a whole dump, and kept as it was when the dump fails), else (or
 * with -o -) standard output. */
typedef struct dump_out {
  rp_output *o;
  FILE *f;
} dump_out;

static int open_out(const dump_cli *c, dump_out *d) {
  d->o = NULL;
  d->f = stdout;
  if (!c->output || !strcmp(c->output, "-"))
    return RP_CLI_OK;
  snprintf(out_name, sizeof out_name, "--output %s", c->output);
  int rc = rp_cli_output_open("dump", "--output", c->output, &d->o);
  d->f = rc ? NULL : rp_output_file(d->o);
  return rc;
}

/* A writer of the report failed: when out is in error, says so (not for a
 * reader gone from standard output, as close_out). RP_CLI_FAILED. */
static int report_failed(FILE *out) {
  int e = errno;
  if (out && ferror(out) && !(out == stdout && rp_cli_stdout_reader_gone(e)))
    rp_cli_say(stderr, "reprise dump: writing the report to %s failed: %s\n",
               out == stdout ? "standard output" : out_name,
               strerror(e ? e : EIO));
  return RP_CLI_FAILED;
}

/* Commits the file when the report was written whole, else drops it;
 * flushes standard output. rc, or RP_CLI_FAILED on a write error. */
static int close_out(const dump_cli *c, dump_out *d, int rc, int whole) {
  if (d->o) {
    if (!whole)
      rp_output_abort(d->o);
    else if (rp_cli_output_commit("dump", "--output", c->output, d->o))
      rc = RP_CLI_FAILED;
  } else if (d->f && (fflush(d->f) != 0 || ferror(d->f)) && rc == RP_CLI_OK) {
    /* what is still buffered is written at the flush: check after it; a
     * reader gone (`| head`) is not said */
    rc = report_failed(d->f);
  }
  d->o = NULL, d->f = NULL;
  return rc;
}

/* ---- the views (dump_view.h) ---- */

/* Measured costs from --trace (NULL without it). RP_CLI_OK or
 * RP_CLI_FAILED (a trace that cannot be read or is not one of this graph:
 * said). */
static int trace_costs(const dump_cli *c, const dm_graph *m, double **cost) {
  *cost = NULL;
  if (!c->trace)
    return RP_CLI_OK;
  dv_trace t;
  if (dv_trace_load(c->trace, c->max_bytes, &t, stderr))
    return RP_CLI_FAILED;
  int bad = dv_trace_op_costs(&t, m, cost, stderr);
  dv_trace_free(&t);
  return bad ? RP_CLI_FAILED : RP_CLI_OK;
}

/* --focus: its ops; RP_CLI_USAGE when the name matches none (said). */
static int focus_ops(const dump_cli *c, const dm_graph *m, uint32_t **ops,
                     uint32_t *n) {
  *ops = NULL, *n = 0;
  if (!c->focus)
    return RP_CLI_OK;
  unsigned depth = c->depth_given ? (unsigned)c->depth : 1;
  *n = dv_focus(m, c->focus, depth, ops);
  if (*n == UINT32_MAX) {
    rp_cli_say(stderr, "reprise dump: --focus: out of memory\n");
    return RP_CLI_FAILED;
  }
  if (!*n) /* a bad option value, as every other: the --help line too */
    return rp_cli_usage_error("dump",
                              "--focus: no op or group is named '%s' (%u "
                              "ops; a name is an op's name, a dotted prefix "
                              "of names, 'op N' or '" DV_UNNAMED "')",
                              c->focus, m->nops);
  return RP_CLI_OK;
}

static void describe(const dump_cli *c, const dm_graph *m, uint32_t n,
                     char *buf, size_t cap) {
  size_t k = 0;
  if (c->group)
    k = (size_t)snprintf(buf, cap, "ops grouped by %u name component%s",
                         c->group, c->group == 1 ? "" : "s");
  else
    k = (size_t)snprintf(buf, cap, "ops");
  unsigned long d = c->depth_given ? c->depth : 1UL;
  if (c->focus && k < cap)
    snprintf(buf + k, cap - k, " within %lu edge%s of '%s' (%u of %u ops)", d,
             d == 1 ? "" : "s", c->focus, n, m->nops);
  else if (k < cap)
    snprintf(buf + k, cap - k, " (%u ops)", m->nops);
}

static int write_view(const dump_cli *c, const dm_graph *m, const dv_crit *cr,
                      const double *cost, const uint32_t *ops, uint32_t n,
                      const dv_extra *x, FILE *out) {
  if (c->fmt == FMT_HTML) {
    dv_html_opts ho = {.title = c->file,
                       .extra = x,
                       .crit = cr,
                       .cost_ns = cost,
                       .ops = ops,
                       .nops = n,
                       .depth = c->group ? c->group : 1};
    return dv_html(m, &ho, out, stderr) ? report_failed(out) : RP_CLI_OK;
  }
  int rc = RP_CLI_OK;
  if (c->group || c->focus || c->fmt != RP_DUMP_TEXT) {
    dv_opts o = {
        .depth = c->group, .ops = ops, .nops = n, .crit = cr, .cost_ns = cost};
    dv_view v;
    char what[RP_NAME_MAX + 160];
    describe(c, m, n, what, sizeof what);
    if (dv_build(m, &o, &v, stderr))
      return RP_CLI_FAILED;
    rc = dv_write(m, &v, c->fmt, what, out) ? report_failed(out) : RP_CLI_OK;
    dv_free(&v);
  }
  if (!rc && cr && c->fmt == RP_DUMP_TEXT) {
    if (c->group || c->focus)
      fputc('\n', out);
    rc = dv_crit_print(m, cr, cost, c->group, out) ? report_failed(out)
                                                   : RP_CLI_OK;
  }
  return rc;
}

static int run_view(const dump_cli *c, loaded *L, FILE *out) {
  dm_graph m;
  rp_status st = dm_build(L->g, is_placeholder, &L->ph, &m);
  if (st) {
    rp_cli_say(stderr, "reprise dump: %s: %s\n", rp_status_name(st),
               rp_error_detail());
    return RP_CLI_FAILED;
  }
  double *cost = NULL;
  uint32_t *ops = NULL, n = 0;
  dv_crit cr = {0};
  dv_extra x = {0};
  int want_crit = c->crit || c->fmt == FMT_HTML;
  int rc = trace_costs(c, &m, &cost);
  if (!rc)
    rc = focus_ops(c, &m, &ops, &n);
  if (!rc && want_crit && dv_crit_find(&m, cost, &cr, stderr))
    rc = RP_CLI_FAILED;
  if (!rc && c->fmt == FMT_HTML && dv_extra_read(L->text, L->len, &x, stderr))
    rc = RP_CLI_FAILED;
  if (!rc)
    rc = write_view(c, &m, want_crit ? &cr : NULL, cost, ops, n, &x, out);
  dv_extra_free(&x);
  dv_crit_free(&cr);
  free(cost), free(ops);
  dm_free(&m);
  return rc;
}

/* --summary: the trace, checked against the graph g when one was given
 * (NULL: the trace alone). */
static int run_summary(const dump_cli *c, const rp_graph *g, FILE *out) {
  dv_trace t;
  if (dv_trace_load(c->trace, c->max_bytes, &t, stderr))
    return RP_CLI_FAILED;
  if (g) {
    dm_graph m;
    int bad = dm_build(g, NULL, NULL, &m) != RP_OK;
    if (bad)
      rp_cli_say(stderr, "reprise dump: %s\n", rp_error_detail());
    else
      bad = dv_trace_matches(&t, &m, stderr);
    dm_free(&m);
    if (bad) {
      dv_trace_free(&t);
      return RP_CLI_FAILED;
    }
  }
  int rc = dv_summary(&t, c->group ? c->group : 1, 5.0, out, stderr)
               ? report_failed(out)
               : RP_CLI_OK;
  dv_trace_free(&t);
  return rc;
}

/* --diff: 0 the same, 1 they differ, 2 either cannot be read (or the
 * report cannot be written). */
static int run_diff(dump_cli *c) {
  loaded a = {0}, b = {0};
  dm_graph ma = {0}, mb = {0};
  dv_extra xa = {0}, xb = {0};
  int rc = load(c, c->file, &a) || load(c, c->diff, &b) ? RP_CLI_USAGE : 0;
  if (!rc &&
      (dm_build(a.g, NULL, NULL, &ma) || dm_build(b.g, NULL, NULL, &mb))) {
    rp_cli_say(stderr, "reprise dump: --diff: %s\n", rp_error_detail());
    rc = RP_CLI_USAGE;
  }
  if (!rc && (dv_extra_read(a.text, a.len, &xa, stderr) ||
              dv_extra_read(b.text, b.len, &xb, stderr)))
    rc = RP_CLI_USAGE;
  dump_out d = {0};
  if (!rc && open_out(c, &d))
    rc = RP_CLI_USAGE;
  uint32_t nd = 0;
  if (!rc)
    rc = dv_diff(&ma, &xa, &mb, &xb, d.f, stderr, &nd)
             ? (report_failed(d.f), RP_CLI_USAGE)
         : nd ? RP_CLI_FAILED
              : RP_CLI_OK;
  /* a difference is a whole report too (exit 1); a failed write was said
   * (report_failed): close_out says only what the flush finds */
  int failed = rc == RP_CLI_USAGE;
  if (d.f && close_out(c, &d, failed ? RP_CLI_FAILED : RP_CLI_OK, !failed))
    rc = RP_CLI_USAGE;
  dv_extra_free(&xa), dv_extra_free(&xb);
  dm_free(&ma), dm_free(&mb);
  int ua = unload(&a), ub = unload(&b);
  return rc == RP_CLI_OK && (ua || ub) ? RP_CLI_USAGE : rc;
}

static int run(dump_cli *c) {
  if (c->diff)
    return run_diff(c);
  dump_out d = {0};
  if (c->summary && !c->file) {
    if (open_out(c, &d))
      return RP_CLI_FAILED;
    int rc = run_summary(c, NULL, d.f);
    return close_out(c, &d, rc, rc == RP_CLI_OK);
  }
  loaded L;
  int rc = load(c, c->file, &L);
  if (!rc && open_out(c, &d))
    rc = RP_CLI_FAILED;
  int whole = 0; /* --strict findings fail the run, not the report */
  if (!rc && is_view(c))
    rc = run_view(c, &L, d.f);
  else if (!rc && !c->summary)
    rc = run_loaded(c, L.g, &L.ph, d.f, &whole);
  if (!rc && c->summary) /* text: beside a DOT, JSON or html view, stderr */
    rc = run_summary(c, L.g, c->fmt == RP_DUMP_TEXT ? d.f : stderr);
  if (d.f)
    rc = close_out(c, &d, rc, whole || rc == RP_CLI_OK);
  int u = unload(&L);
  return rc == RP_CLI_OK ? u : rc;
}

int rp_cmd_dump(int argc, char **argv) {
  dump_cli c = {.fmt = RP_DUMP_TEXT};
  int rc = parse_args(argc, argv, &c);
  /* --diff's 1 says "they differ": an output it cannot write is 2, as
   * every other failure of the comparison */
  if (rc == RP_CLI_FAILED && c.diff)
    rc = RP_CLI_USAGE;
  if (rc)
    return rc < 0 ? RP_CLI_OK : rc;
  return run(&c);
}
