/* test/tsan/crit_shim.c — the runner behind crit_shim.h (TSan builds only;
 * why it exists: the header's comment, Snaipe/Criterion#274).
 *
 * main() sorts the registered tests by suite and name and runs each in a
 * forked process, one at a time, as Criterion does with --jobs 1: the
 * runner itself creates no thread, so forking is safe under TSan, and a
 * crash, a hang or a TSan report (halt_on_error=1 exits with 66) ends one
 * test, not the run. The test process reports through a shared page: the
 * state it reached and the failure or skip message. The verdict:
 *   PASS  the test body and .fini returned, exit status 0
 *   SKIP  cr_skip_test, exit status 0
 *   FAIL  a failed assertion, a timeout (SIGALRM from the test's alarm),
 *         a signal, any other exit status (TSan's 66), or an exit before
 *         the test ended.
 * The exit status is 1 when any test failed, 2 on a usage error.
 * Options: --filter PATTERN (fnmatch on "suite/name", as Criterion's),
 * --list, --help. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strsignal */
#endif
#include "crit_shim.h"

#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 1024
#define MAX_SUITES 128

static const struct crs_test *tests[MAX_TESTS];
static int n_tests;
static const struct crs_suite *suites[MAX_SUITES];
static int n_suites;

/* What the test process tells the runner (MAP_SHARED: written by the
 * child, read by the parent after waitpid, which orders the two). */
enum { ST_NONE, ST_RUNNING, ST_DONE, ST_SKIPPED, ST_FAILED };
struct result {
  int state;
  char msg[1024];
};
static struct result *res;

/* ---- registration (constructors, before main) ---- */

void crs_register_test(const struct crs_test *t) {
  if (n_tests == MAX_TESTS) {
    fprintf(stderr, "crit_shim: more than %d tests\n", MAX_TESTS);
    abort();
  }
  tests[n_tests++] = t;
}

void crs_register_suite(const struct crs_suite *s) {
  if (n_suites == MAX_SUITES) {
    fprintf(stderr, "crit_shim: more than %d suites\n", MAX_SUITES);
    abort();
  }
  suites[n_suites++] = s;
}

/* ---- reporting from the test process ---- */

void crs_fail(const char *file, int line, const char *expr, const char *detail,
              const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(stderr, "%s:%d: Assertion failed: %s\n", file, line, expr);
  if (detail)
    fprintf(stderr, "  %s\n", detail);
  if (msg[0])
    fprintf(stderr, "  %s\n", msg);
  if (res) {
    res->state = ST_FAILED;
    snprintf(res->msg, sizeof res->msg, "%s:%d: %s", file, line,
             msg[0] ? msg : expr);
  }
  fflush(stderr);
  _exit(1);
}

void crs_skip(const char *file, int line, const char *fmt, ...) {
  (void)file;
  (void)line;
  if (res) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg, sizeof res->msg, fmt, ap);
    va_end(ap);
    res->state = ST_SKIPPED;
  }
  fflush(stdout);
  fflush(stderr);
  _exit(0);
}

void crs_log(const char *tag, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[%s] %s\n", tag, msg);
}

const char *crs_detail_str(const char *a, const char *b) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "actual: \"%.480s\"  expected: \"%.480s\"",
           a ? a : "(null)", b ? b : "(null)");
  return buf;
}

const char *crs_detail_float(double a, double b, double eps) {
  static char buf[128];
  snprintf(buf, sizeof buf, "actual: %.9g  expected: %.9g  epsilon: %.3g", a, b,
           eps);
  return buf;
}

/* ---- the runner ---- */

static int by_suite_then_name(const void *pa, const void *pb) {
  const struct crs_test *a = *(const struct crs_test *const *)pa;
  const struct crs_test *b = *(const struct crs_test *const *)pb;
  int c = strcmp(a->suite, b->suite);
  return c ? c : strcmp(a->name, b->name);
}

static const struct crs_suite *suite_of(const struct crs_test *t) {
  for (int i = 0; i < n_suites; i++)
    if (strcmp(suites[i]->name, t->suite) == 0)
      return suites[i];
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The test process: suite and test .init, the body, .fini, then exit(0)
 * (so that atexit work and TSan's end-of-process check run). The alarm's
 * SIGALRM, left at its default action, ends the process on a timeout. */
_Noreturn static void run_child(const struct crs_test *t,
                                const struct crs_suite *s, double timeout) {
  res->state = ST_RUNNING;
  signal(SIGALRM, SIG_DFL);
  if (timeout > 0) {
    unsigned secs = (unsigned)timeout;
    alarm(secs + ((double)secs < timeout));
  }
  if (s && s->opts.init)
    s->opts.init();
  if (t->opts.init)
    t->opts.init();
  t->fn();
  if (t->opts.fini)
    t->opts.fini();
  if (s && s->opts.fini)
    s->opts.fini();
  res->state = ST_DONE;
  exit(0);
}

enum outcome { PASSED, SKIPPED, FAILED, CRASHED };

/* The verdict from the test process's wait status and reported state;
 * prints the line for it. */
static enum outcome judge(const struct crs_test *t, int status, double secs,
                          double timeout) {
  const char *st = t->suite, *nm = t->name;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      printf("[FAIL] %s::%s: timed out after %gs\n", st, nm, timeout);
    else
      printf("[FAIL] %s::%s: crashed: signal %d (%s) (%.2fs)\n", st, nm, sig,
             strsignal(sig), secs);
    return CRASHED;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (res->state == ST_FAILED) {
    printf("[FAIL] %s::%s: %s (%.2fs)\n", st, nm, res->msg, secs);
    return FAILED;
  }
  if (code == 0 && res->state == ST_DONE) {
    printf("[PASS] %s::%s (%.2fs)\n", st, nm, secs);
    return PASSED;
  }
  if (code == 0 && res->state == ST_SKIPPED) {
    printf("[SKIP] %s::%s: %s\n", st, nm, res->msg);
    return SKIPPED;
  }
  if (code == 0)
    printf("[FAIL] %s::%s: the process exited before the test ended\n", st, nm);
  else
    printf("[FAIL] %s::%s: exit status %d%s (%.2fs)\n", st, nm, code,
           code == 66 ? " (ThreadSanitizer's: see its report above)" : "",
           secs);
  return FAILED;
}

static enum outcome run_one(const struct crs_test *t) {
  const struct crs_suite *s = suite_of(t);
  double timeout = t->opts.timeout > 0 ? t->opts.timeout
                   : s                 ? s->opts.timeout
                                       : 0;
  memset(res, 0, sizeof *res);
  fflush(stdout);
  fflush(stderr);
  double t0 = now_s();
  pid_t pid = fork();
  if (pid < 0) {
    printf("[FAIL] %s::%s: fork: %s\n", t->suite, t->name, strerror(errno));
    return CRASHED;
  }
  if (pid == 0)
    run_child(t, s, timeout);
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      printf("[FAIL] %s::%s: waitpid: %s\n", t->suite, t->name,
             strerror(errno));
      return CRASHED;
    }
  }
  return judge(t, status, now_s() - t0, timeout);
}

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--filter PATTERN] [--list]\n"
          "  --filter PATTERN  run the tests whose \"suite/name\" matches the\n"
          "                    shell pattern (fnmatch), e.g. 'replay/soak*'\n"
          "  --list            print the tests and exit\n"
          "(the ThreadSanitizer build's test runner: test/tsan/crit_shim.h)\n",
          argv0);
}

/* Parses the options; -1 on a usage error, 1 for --help, else 0. */
static int parse_args(int argc, char **argv, const char **filter, int *list) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--filter") == 0 && i + 1 < argc) {
      *filter = argv[++i];
    } else if (strncmp(a, "--filter=", 9) == 0) {
      *filter = a + 9;
    } else if (strcmp(a, "--list") == 0 || strcmp(a, "-l") == 0) {
      *list = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout, argv[0]);
      return 1;
    } else {
      fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
      usage(stderr, argv[0]);
      return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *filter = NULL;
  int list = 0;
  int pa = parse_args(argc, argv, &filter, &list);
  if (pa)
    return pa < 0 ? 2 : 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  qsort(tests, (size_t)n_tests, sizeof tests[0], by_suite_then_name);
  res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (res == MAP_FAILED) {
    perror("crit_shim: mmap");
    return 1;
  }
  int count[4] = {0}, tested = 0;
  double t0 = now_s();
  for (int i = 0; i < n_tests; i++) {
    char full[256];
    snprintf(full, sizeof full, "%s/%s", tests[i]->suite, tests[i]->name);
    if (filter && fnmatch(filter, full, 0) != 0)
      continue;
    if (list) {
      printf("%s\n", full);
      continue;
    }
    count[run_one(tests[i])]++;
    tested++;
  }
  if (list)
    return 0;
  int failing = count[FAILED] + count[CRASHED];
  printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | "
         "Skipped: %d | Crashing: %d (%.1fs)\n",
         tested, count[PASSED], failing, count[SKIPPED], count[CRASHED],
         now_s() - t0);
  return failing ? 1 : 0;
}
