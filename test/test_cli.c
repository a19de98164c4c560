/* The `reprise` command line: exit statuses, usage, and the benchmark's
 * JSON output. Runs the built binary (REPRISE_CLI_PATH); asserts behaviour,
 * never timings. */
#include "helpers.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef REPRISE_CLI_PATH
#error "test/CMakeLists.txt passes the path of the reprise binary"
#endif

typedef struct cli_run {
  int status; /* exit status, -1 when it did not exit normally */
  char out[16384];
  char err[16384];
} cli_run;

static void slurp(int fd, char *buf, size_t cap) {
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, buf, cap - 1);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
}

/* Runs `reprise args...` (args NULL-terminated) with stdout and stderr
 * captured in temporary files. */
static void run_cli(cli_run *r, const char *const *args) {
  char *argv[32] = {(char *)"reprise"};
  for (int i = 0; args[i]; i++) {
    cr_assert_lt(i + 2, 32);
    argv[i + 1] = (char *)args[i];
  }
  char outp[] = "/tmp/rp_cli_out_XXXXXX", errp[] = "/tmp/rp_cli_err_XXXXXX";
  int fo = mkstemp(outp), fe = mkstemp(errp);
  cr_assert(fo >= 0 && fe >= 0, "mkstemp");
  unlink(outp);
  unlink(errp);
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork");
  if (pid == 0) {
    dup2(fo, 1);
    dup2(fe, 2);
    execv(REPRISE_CLI_PATH, argv);
    _exit(127);
  }
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  slurp(fo, r->out, sizeof r->out);
  slurp(fe, r->err, sizeof r->err);
}

#define RUN(r, ...) run_cli((r), (const char *const[]){__VA_ARGS__, NULL})

/* ---- a small JSON validator (RFC 8259 grammar, no semantics) ---- */

static int j_value(const char **p);

static void j_ws(const char **p) {
  while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')
    (*p)++;
}

static int j_string(const char **p) {
  if (*(*p)++ != '"')
    return 0;
  for (; **p != '"'; (*p)++) {
    if (**p == '\0' || (unsigned char)**p < 0x20)
      return 0;
    if (**p == '\\' && *++(*p) == '\0')
      return 0;
  }
  (*p)++;
  return 1;
}

static int j_number(const char **p) {
  char *end;
  strtod(*p, &end);
  int ok = end > *p && (**p == '-' || (**p >= '0' && **p <= '9'));
  *p = end;
  return ok;
}

static int j_seq(const char **p, char close, int members) {
  (*p)++;
  j_ws(p);
  if (**p == close) {
    (*p)++;
    return 1;
  }
  for (;;) {
    j_ws(p);
    if (members) {
      if (!j_string(p))
        return 0;
      j_ws(p);
      if (*(*p)++ != ':')
        return 0;
    }
    if (!j_value(p))
      return 0;
    j_ws(p);
    char c = *(*p)++;
    if (c == close)
      return 1;
    if (c != ',')
      return 0;
  }
}

static int j_value(const char **p) {
  j_ws(p);
  static const char *lits[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++)
    if (strncmp(*p, lits[i], strlen(lits[i])) == 0) {
      *p += strlen(lits[i]);
      return 1;
    }
  switch (**p) {
  case '{':
    return j_seq(p, '}', 1);
  case '[':
    return j_seq(p, ']', 0);
  case '"':
    return j_string(p);
  default:
    return j_number(p);
  }
}

static int json_valid(const char *s) {
  if (!j_value(&s))
    return 0;
  j_ws(&s);
  return *s == '\0';
}

static void read_file(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  cr_assert_geq(fd, 0, "cannot open %s", path);
  slurp(fd, buf, cap);
}

/* ---- tests ---- */

Test(cli, version_prints_the_library_version) {
  cli_run r;
  RUN(&r, "version");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  char want[64];
  snprintf(want, sizeof want, "reprise %d.%d.%d\n", REPRISE_VERSION_MAJOR,
           REPRISE_VERSION_MINOR, REPRISE_VERSION_PATCH);
  cr_assert_str_eq(r.out, want);
}

Test(cli, unknown_command_exits_2_with_usage_on_stderr) {
  cli_run r;
  RUN(&r, "frobnicate");
  cr_assert_eq(r.status, 2);
  cr_assert(strstr(r.err, "unknown command 'frobnicate'"), "%s", r.err);
  cr_assert(strstr(r.err, "usage: reprise <command>"), "%s", r.err);
  cr_assert_str_empty(r.out);
}

Test(cli, no_command_exits_2_with_usage_on_stderr) {
  cli_run r;
  run_cli(&r, (const char *const[]){NULL});
  cr_assert_eq(r.status, 2);
  cr_assert(strstr(r.err, "usage: reprise <command>"), "%s", r.err);
}

Test(cli, help_goes_to_stdout_and_exits_0) {
  cli_run r;
  RUN(&r, "help");
  cr_assert_eq(r.status, 0);
  cr_assert(strstr(r.out, "bench"), "%s", r.out);
  RUN(&r, "bench", "--help");
  cr_assert_eq(r.status, 0);
  const char *opts[] = {"--mode",    "--workload", "--workers", "--reps",
                        "--backend", "--quick",    "--hop",     "--json"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    cr_assert(strstr(r.out, opts[i]), "bench --help lacks %s", opts[i]);
}

Test(cli, unfinished_commands_say_so_and_exit_2) {
  cli_run r;
  RUN(&r, "dump");
  cr_assert_eq(r.status, 2);
  cr_assert(strstr(r.err, "not available yet"), "%s", r.err);
  RUN(&r, "train");
  cr_assert_eq(r.status, 2);
}

Test(cli, bench_gpu_runs_or_says_no_gpu_and_exits_0) {
  cli_run r;
  RUN(&r, "bench", "--gpu", "--quick");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "no GPU: ") || strstr(r.out, "chain10"),
            "neither rows nor the reason: %s", r.out);
  if (strstr(r.out, "no GPU: "))
    cr_assert(!strstr(r.out, "chain10"), "rows without a GPU: %s", r.out);
}

Test(cli, bench_rejects_bad_option_values_with_exit_2) {
  static const char *bad[][2] = {
      {"--workers", "0"},   {"--workers", "-3"},    {"--reps", "-1"},
      {"--reps", "0"},      {"--reps", "12x"},      {"--mode", "foo"},
      {"--backend", "tpu"}, {"--workload", "nope"}, {"--workload", "chain,"},
      {"--bogus", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cli_run r;
    if (bad[i][1])
      RUN(&r, "bench", "--quick", bad[i][0], bad[i][1]);
    else
      RUN(&r, "bench", "--quick", bad[i][0]);
    cr_assert_eq(r.status, 2, "%s %s -> %d", bad[i][0],
                 bad[i][1] ? bad[i][1] : "", r.status);
    cr_assert(strstr(r.err, "reprise bench"), "%s: %s", bad[i][0], r.err);
    cr_assert_str_empty(r.out, "%s printed a table", bad[i][0]);
  }
}

Test(cli, bench_quick_eager_chain_writes_valid_json, .timeout = 300) {
  char path[] = "/tmp/rp_cli_json_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cli_run r;
  RUN(&r, "bench", "--quick", "--mode", "eager", "--workload", "chain",
      "--json", path);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "chain"), "no table row: %s", r.out);
  static char buf[16384];
  read_file(path, buf, sizeof buf);
  unlink(path);
  cr_assert(json_valid(buf), "invalid JSON: %s", buf);
  const char *keys[] = {"workload",
                        "mode",
                        "backend",
                        "workers",
                        "nodes",
                        "reps",
                        "ns_per_task_median",
                        "ns_per_task_min",
                        "ns_per_task_max",
                        "setup_us"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", keys[i]);
    cr_assert(strstr(buf, k), "key %s missing: %s", keys[i], buf);
  }
  cr_assert(strstr(buf, "\"workload\": \"chain\""), "%s", buf);
  cr_assert(strstr(buf, "\"nodes\": 1000"), "%s", buf);
  const char *m = strstr(buf, "\"ns_per_task_median\":");
  double v = strtod(m + strlen("\"ns_per_task_median\":"), NULL);
  cr_assert_gt(v, 0, "%s", buf);
}

Test(cli, bench_hop_reports_the_spin_and_sleep_cases, .timeout = 300) {
  char path[] = "/tmp/rp_cli_hop_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cli_run r;
  RUN(&r, "bench", "--quick", "--mode", "eager", "--hop", "--json", path);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  static char buf[16384];
  read_file(path, buf, sizeof buf);
  unlink(path);
  cr_assert(json_valid(buf), "invalid JSON: %s", buf);
  cr_assert(strstr(buf, "\"case\": \"hop_spin\""), "%s", buf);
  cr_assert(strstr(buf, "\"case\": \"hop_sleep\""), "%s", buf);
  cr_assert(strstr(buf, "\"ns_median\":"), "%s", buf);
  cr_assert_null(strstr(buf, "\"workload\""), "--hop alone ran workloads");
}

Test(cli, json_validator_rejects_broken_text) {
  cr_assert(json_valid("[{\"a\": 1.5, \"b\": [true, null, \"x\\\"\"]}]"));
  cr_assert_not(json_valid("[{\"a\": 1,}]"));
  cr_assert_not(json_valid("[{\"a\" 1}]"));
  cr_assert_not(json_valid("[1, 2"));
  cr_assert_not(json_valid("[nan]"));
}
