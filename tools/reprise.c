/* tools/reprise.c — the `reprise` command line: `reprise <command>
 * [options]`. This file dispatches and prints the top-level usage; each
 * command lives in its own cmd_*.c. */
#include "cli.h"

#include "reprise.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* git describe of the checkout this binary was built from (generated at
 * build time: cmake/build_commit.cmake). */
extern const char rp_build_commit[];

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

#ifdef REPRISE_HAVE_BENCH
#define BENCH_CMD rp_cmd_bench
#define BENCH_SUMMARY "measure launch and replay overheads"
#else
/* Configured with -DREPRISE_BENCH=OFF: bench/ is not compiled in, and the
 * command says so in one line (exit 1: the request is well-formed, this
 * build cannot do it). */
static int cmd_no_bench(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* --help still answers, as everywhere */
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: reprise bench [options]\n\n"
             "This build has no benchmarks (configured with "
             "-DREPRISE_BENCH=OFF):\nreconfigure with -DREPRISE_BENCH=ON "
             "to measure launch and replay overheads.\n");
      return RP_CLI_OK;
    }
  fprintf(stderr, "reprise bench: this build has no benchmarks (configured "
                  "with -DREPRISE_BENCH=OFF)\n");
  return RP_CLI_FAILED;
}
#define BENCH_CMD cmd_no_bench
#define BENCH_SUMMARY "not in this build (-DREPRISE_BENCH=OFF)"
#endif

typedef struct command {
  const char *name;
  rp_cli_cmd_fn run;
  const char *summary;
} command;

static const command COMMANDS[] = {
    {"bench", BENCH_CMD, BENCH_SUMMARY},
    {"dump", rp_cmd_dump,
     "print a graph file (text, DOT, JSON), its stats "
     "or lint findings"},
    {"plot", rp_cmd_plot, "plot benchmark rows or training timings (gnuplot)"},
    {"generate", rp_cmd_generate,
     "text from a GPT checkpoint, one decode replay per token"},
    {"train", rp_cmd_train,
     "train an MLP or a GPT by replaying one recorded step"},
    {"version", cmd_version, "print the version"},
    {"help", cmd_help, "print this help, or a command's (help COMMAND)"},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
  fprintf(f, "usage: reprise <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
  fprintf(f, "\n'reprise <command> --help' describes a command's options.\n");
}

static const command *find_command(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(COMMANDS[i].name, name) == 0)
      return &COMMANDS[i];
  return NULL;
}

static int is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static void version_usage(FILE *f) {
  fprintf(f, "usage: reprise version\n\nPrints the version of this build and "
             "the commit it was built from "
             "(also: reprise --version).\n\nExit status: 0, or 2 bad "
             "usage.\n");
}

static void help_usage(FILE *f) {
  fprintf(f, "usage: reprise help [COMMAND]\n\nPrints the list of "
             "commands, or COMMAND's options (as 'reprise COMMAND --help').\n"
             "\nExit status: 0, or 2 for an unknown COMMAND.\n");
}

/* A bad argument to version or help: the message, then the usage (as the
 * other commands' bad options). */
static int usage_error(const char *cmd, void (*u)(FILE *), const char *msg,
                       const char *arg) {
  fprintf(stderr, "reprise %s: %s '%s'\n\n", cmd, msg, arg);
  u(stderr);
  return RP_CLI_USAGE;
}

static int cmd_version(int argc, char **argv) {
  if (argc == 2 && is_help(argv[1])) {
    version_usage(stdout);
    return RP_CLI_OK;
  }
  if (argc > 1)
    return usage_error("version", version_usage, "unexpected argument",
                       argv[1]);
  printf("reprise %s (commit %s)\n", rp_version_string(), rp_build_commit);
  return RP_CLI_OK;
}

static int cmd_help(int argc, char **argv) {
  if (argc == 1) {
    usage(stdout);
    return RP_CLI_OK;
  }
  if (argc == 2 && is_help(argv[1])) {
    help_usage(stdout);
    return RP_CLI_OK;
  }
  /* `help TOPIC --help` is `help TOPIC` (every help TOPIC answers --help) */
  if (argc > 3 || (argc == 3 && !is_help(argv[2])))
    return usage_error("help", help_usage, "unexpected argument", argv[2]);
  if (argv[1][0] == '-')
    return usage_error("help", help_usage, "unknown option", argv[1]);
  const command *c = find_command(argv[1]);
  if (!c) { /* the list of topics, not a pointer to another --help */
    fprintf(stderr, "reprise help: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return RP_CLI_USAGE;
  }
  char help[] = "--help";
  char *args[] = {argv[1], help, NULL};
  return c->run(2, args);
}

/* What a command printed on stdout (generated text, a dump, its report)
 * is its product: a command that succeeded but could not write it fails
 * (exit 1), saying so for a full disk, silently for a reader gone (`|
 * head`: a pipeline expects no word). */
static int stdout_written(const char *cmd, int rc) {
  int e = fflush(stdout) ? errno : 0;
  if ((!e && !ferror(stdout)) || rc != RP_CLI_OK)
    return rc;
  if (!e) /* failed before, nothing left to flush: a help's cause, kept */
    e = rp_cli_stdout_errno();
  if (!rp_cli_stdout_reader_gone(e))
    fprintf(stderr, "reprise %s: writing to standard output failed: %s\n", cmd,
            e ? strerror(e) : "a write failed");
  return RP_CLI_FAILED;
}

/* SIGINT, SIGTERM, SIGHUP: the temporary files of the outputs being
 * written go first (rp_output_discard_all), then the signal does what it
 * would have done by default: the process dies of it. */
static void on_stop(int sig) {
  rp_output_discard_all();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void stop_signals(void) {
  const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction old;
    /* kept ignored where it was (nohup); a handler that a library put
     * there as it loaded is replaced (UCX, under MPICH, logs SIGHUP and
     * runs on) */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) {
      struct sigaction sa = {.sa_handler = on_stop};
      sigemptyset(&sa.sa_mask);
      sigaction(sigs[i], &sa, NULL);
    }
  }
}

/* Standard descriptors the caller closed are held by /dev/null, read
 * only: a file the command opens (an output's temporary file) cannot take
 * descriptor 1 or 2 and receive the console text, and writes to a closed
 * stdout still fail (EBADF: exit 1, as a failed stdout). */
static void hold_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int got = open("/dev/null", O_RDONLY);
      if (got >= 0 && got != fd) { /* a lower one was free: not ours */
        (void)dup2(got, fd);
        close(got);
      }
    }
}

int main(int argc, char **argv) {
  hold_std_fds();
  /* a closed pipe on stdout is a failed write (EPIPE), exit 1 at the end
   * (stdout_written), not a death that also loses the files the command
   * was about to write */
  signal(SIGPIPE, SIG_IGN);
  stop_signals();
  if (argc < 2) {
    usage(stderr);
    return RP_CLI_USAGE;
  }
  if (is_help(argv[1]))
    return stdout_written("help", cmd_help(1, argv + 1));
  if (strcmp(argv[1], "--version") == 0)
    return stdout_written("version", cmd_version(1, argv + 1));
  const command *c = find_command(argv[1]);
  if (!c) {
    fprintf(stderr, "reprise: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return RP_CLI_USAGE;
  }
  return stdout_written(c->name, c->run(argc - 1, argv + 1));
}
