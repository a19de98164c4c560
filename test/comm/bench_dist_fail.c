/* test/comm/bench_dist_fail.c — `reprise bench --dist` across 2 ranks
 * when a rank is given other options or stops answering. A plain program
 * (no Criterion, no MPI of its own; test/comm/driver.h) that runs the
 * built command line under mpiexec, each rank through a shell wrapper
 * that changes rank 1's arguments or stops it. ctest runs it for N = 2
 * (label "dist"):
 *
 *   test_bench_dist_fail REPRISE MPIEXEC NUMPROC_FLAG 2
 *
 * Checks (exit statuses and messages, never times: a hang is ended by the
 * wrapper's own kill and by the ctest timeout, and then fails the
 * checks):
 *  - rank 1 alone given another --reps, --quick or --workers: exit 2
 *    before any work, one message from rank 0 naming rank 1 and the
 *    option (the ranks used to stall 30 s and fail with RP_EPEER, or with
 *    --workers run on and print rank 0's worker count);
 *  - rank 1 stopped (SIGSTOP) mid-run with REPRISE_DIST_TIMEOUT_MS=2000:
 *    rank 0's replay fails naming rank 1 and the 2000 ms bound (the
 *    variable was ignored: 30 s), and rank 0 stops every rank (MPI_Abort)
 *    instead of waiting without end in the slowest-rank all-reduce. */
#define _GNU_SOURCE
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char DIR[] = "/tmp/rp_bench_dist_fail_XXXXXX";

static void other_options(void) {
  static const struct {
    const char *extra, *what;
  } cases[] = {{"--reps 9", "rank 1: --reps"},
               {"--quick", "rank 1: --quick"},
               {"--workers 2", "rank 1: --workers"}};
  static const char *a[] = {"bench", "--dist", "--reps", "8", NULL};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32], tag[32];
    snprintf(name, sizeof name, "opt%zu.sh", i);
    snprintf(tag, sizeof tag, "opt%zu", i);
    const char *sh = drv_rank1_script(name, cases[i].extra);
    if (!sh) {
      check(0, "write %s", name);
      continue;
    }
    int st = drv_reprise_wrapped(2, tag, sh, a, NULL);
    char lname[40];
    snprintf(lname, sizeof lname, "%s.log", tag);
    char *log = slurp(path(lname), NULL);
    check(st == 2 &&
              count(log, "reprise bench: --dist: ranks given other inputs "
                         "than rank 0's") == 1 &&
              count(log, cases[i].what) == 1 && count(log, "us/step") == 0,
          "rank 1 alone with %s: exit 2 (got %d) before any row, one "
          "message naming '%s': %s",
          cases[i].extra, st, cases[i].what, log ? log : "");
    free(log);
  }
}

/* Rank 1 is stopped 8 s in (set-up is over: mid-warm-up; stopped in
 * set-up, rank 0's collective there times out the same way) and killed
 * 120 s later if still there (the job's end without the fix). Rank 0's
 * --json, open all along, leaves no temporary file behind. */
static void frozen_peer(void) {
  const char *sh = drv_rank1_freeze_script("freeze.sh", 8, 120);
  if (!sh) {
    check(0, "write freeze.sh");
    return;
  }
  const char *a[] = {"bench",    "--dist", "--reps",
                     "10000000", "--json", path("frozen.json"),
                     NULL};
  setenv("REPRISE_DIST_TIMEOUT_MS", "2000", 1);
  int st = drv_reprise_wrapped(2, "frozen", sh, a, NULL);
  unsetenv("REPRISE_DIST_TIMEOUT_MS");
  char *log = slurp(path("frozen.log"), NULL);
  check(st != 0, "a stopped peer: the job fails (exit %d)", st);
  check(count(log, "RP_EPEER") > 0 && count(log, "rank 1 did not answer") > 0,
        "rank 0 names the peer that did not answer");
  check(count(log, "no answer within 2000 ms") > 0,
        "the replay waited REPRISE_DIST_TIMEOUT_MS (2000 ms), not 30 s");
  /* a failed rank waits 2 x the timeout and a second for the others */
  check(count(log, "rank 0: another rank did not answer within 5000 ms "
                   "(REPRISE_DIST_TIMEOUT_MS x 2 + 1 s) after this rank "
                   "failed: stopping every rank") == 1,
        "rank 0 stops every rank rather than wait for the stopped one: %s",
        log ? log : "");
  check(drv_count_files(".frozen.json.tmp.*") == 0,
        "a stopped peer: no temporary file of --json is left");
  free(log);
}

int main(int argc, char **argv) {
  int n = drv_args(argc, argv);
  if (n < 1)
    return 2;
  if (n != 2) {
    fprintf(stderr, "test_bench_dist_fail: runs on 2 ranks, not %d\n", n);
    return 2;
  }
  if (drv_mkdir(DIR)) {
    perror("mkdtemp");
    return 1;
  }
  other_options();
  frozen_peer();
  return drv_finish(n);
}
