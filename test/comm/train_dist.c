/* test/comm/train_dist.c — `reprise train --dist` across N ranks reaches
 * the weights of one process. A plain program (no Criterion, no MPI of its
 * own): it runs the built command line, once as one process without
 * --dist and then under `mpiexec -n N ... --dist` with the same global
 * batch and seed, and compares the --save-weights files. ctest runs it
 * for N = 1, 2 and 3 (label "dist"):
 *
 *   test_train_dist REPRISE MPIEXEC NUMPROC_FLAG N
 *
 * Checks: exit 0; only rank 0 prints; the JSON summary has "ranks": N and
 * "weights_equal_across_ranks": true; the weights equal the single
 * process's within TOL (bitwise for N = 1, also run without mpiexec);
 * --dist --eager reaches the replayed weights within TOL; a batch that
 * leaves a rank's processor without rows exits 2 on every rank; (N >= 2)
 * a usage error every rank finds alike is said once; (N = 2) a
 * rank that stops answering mid-run (SIGSTOP) makes the other report it
 * and stop the job within its timeouts, not wait for it.
 *
 * Tolerance: the ranks' all-reduce and the 2N shards (2 in one process)
 * sum the gradient in another order, so the weights agree within float
 * rounding: max |w_N - w_1| <= TOL * max |w_1|, TOL = 1e-5 (measured
 * about 7e-8 after 40 steps); the final loss within 1e-4 relative. */
#define _GNU_SOURCE
#include "driver.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOL 1e-5
#define LOSS_TOL 1e-4

static char DIR[] = "/tmp/rp_train_dist_XXXXXX";
static int N;

/* The same model, data and global batch for every run. */
#define COMMON                                                                 \
  "train", "--backend", "cpu", "--procs", "2", "--iters", "40", "--batch",     \
      "64", "--hidden", "16,16", "--samples", "1024", "--seed", "3", "--lr",   \
      "0.1"

/* `reprise train COMMON extra...` (under mpiexec -n np when np > 0);
 * its output goes to tag.log. Returns the exit status. */
static int train(int np, const char *tag, const char *const *extra) {
  static const char *common[] = {COMMON, NULL};
  return drv_reprise(np, tag, common, extra);
}

static float *weights(const char *name, size_t *n) {
  size_t len = 0;
  char *b = slurp(path(name), &len);
  /* a checkpoint (train/ckpt.h, train/mlp.h): the container's 48-byte
   * header, then the record: 48 bytes (the layer count L at 12), L + 1
   * widths, the floats (weights and momentum), an 8-byte checksum */
  const unsigned char *h = (const unsigned char *)b;
  size_t head = b && len >= 96 ? 96 + 4 * ((size_t)h[48 + 12] + 1) : len + 1;
  if (!b || len < head + 8 || (len - head - 8) % 4 ||
      memcmp(b + 48, "RPRSWGHT", 8) != 0) { /* not the MLP's record */
    free(b);
    *n = 0;
    return NULL;
  }
  *n = (len - head - 8) / 4;
  float *w = malloc(*n * sizeof *w + 1);
  for (size_t i = 0; w && i < *n; i++) { /* little-endian f32 */
    const unsigned char *p = h + head + 4 * i;
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    memcpy(&w[i], &u, 4);
  }
  free(b);
  return w;
}

/* max |a - b| / max |b| (inf when sizes differ or a file is missing). */
static double rel_diff(const char *a, const char *b, int *bitwise) {
  size_t na, nb;
  float *x = weights(a, &na), *y = weights(b, &nb);
  double d = INFINITY, m = 0;
  *bitwise = 0;
  if (x && y && na == nb && na > 0) {
    d = 0;
    for (size_t i = 0; i < na; i++) {
      double e = fabs((double)x[i] - (double)y[i]);
      d = e > d || isnan(e) ? e : d;
      m = fabs((double)y[i]) > m ? fabs((double)y[i]) : m;
    }
    d = m > 0 ? d / m : d;
    *bitwise = memcmp(x, y, na * sizeof *x) == 0;
  }
  free(x);
  free(y);
  return d;
}

/* ---- the cases ---- */

static double ref_loss;

static void reference(void) {
  const char *x[] = {"--save-weights", path("ref.bin"), "--json",
                     path("ref.json"), NULL};
  check(train(0, "ref", x) == 0, "one process, no --dist");
  char *j = slurp(path("ref.json"), NULL);
  const char *v = json_value(j, "final_loss");
  ref_loss = v ? strtod(v, NULL) : NAN;
  check(json_value(j, "ranks") == NULL,
        "without --dist the JSON has no \"ranks\"");
  free(j);
}

static void distributed(void) {
  const char *x[] = {"--dist", "--save-weights",  path("dist.bin"),
                     "--json", path("dist.json"), NULL};
  int st = train(N, "dist", x);
  check(st == 0, "mpiexec -n %d reprise train --dist: exit %d", N, st);
  char *log = slurp(path("dist.log"), NULL);
  check(count(log, "reprise train: MLP") == 1 && count(log, "final loss") == 1,
        "%d rank(s): rank 0 alone prints the header and the summary", N);
  free(log);
  char *j = slurp(path("dist.json"), NULL);
  const char *v = json_value(j, "ranks");
  check(v && strtol(v, NULL, 10) == N, "JSON \"ranks\": %d", N);
  v = json_value(j, "weights_equal_across_ranks");
  check(v && strncmp(v, "true", 4) == 0, "every rank ends with the same "
                                         "weights");
  v = json_value(j, "final_loss");
  double loss = v ? strtod(v, NULL) : NAN;
  check(fabs(loss - ref_loss) <= LOSS_TOL * fabs(ref_loss),
        "final loss %.9g vs one process %.9g (tolerance %g relative)", loss,
        ref_loss, LOSS_TOL);
  free(j);
  int bitwise;
  double d = rel_diff("dist.bin", "ref.bin", &bitwise);
  if (N == 1)
    check(bitwise, "1 rank: weights bitwise equal to one process (rel %g)", d);
  else
    check(d <= TOL,
          "%d ranks: weights within %g of one process: max rel "
          "diff %.3g%s",
          N, TOL, d, bitwise ? " (bitwise equal)" : "");
}

static void singleton(void) {
  const char *x[] = {"--dist", "--save-weights", path("single.bin"), NULL};
  check(train(0, "single", x) == 0, "--dist without mpiexec: exit 0");
  int bitwise;
  double d = rel_diff("single.bin", "ref.bin", &bitwise);
  check(bitwise, "--dist without mpiexec equals one process bitwise (%g)", d);
}

static void eager(void) {
  const char *x[] = {"--dist", "--eager", "--save-weights", path("eager.bin"),
                     NULL};
  int st = train(N, "eager", x);
  check(st == 0, "mpiexec -n %d reprise train --dist --eager: exit %d", N, st);
  int bitwise;
  double d = rel_diff("eager.bin", "dist.bin", &bitwise);
  check(d <= TOL, "--dist --eager within %g of --dist: %.3g%s", TOL, d,
        bitwise ? " (bitwise equal)" : "");
}

static void bad_split(void) {
  /* 2N - 1 rows: the last rank gets 1 row for its 2 processors (with one
   * rank --procs 2 > --batch 1 is refused before MPI starts) */
  char b[16];
  snprintf(b, sizeof b, "%d", 2 * N - 1);
  const char *x[] = {"--dist", "--batch", b, NULL};
  int st = train(N, "split", x);
  char *log = slurp(path("split.log"), NULL);
  check(st == 2 && count(log, "Try 'reprise train --help'") == 1,
        "--batch %s over %d rank(s) x 2 processors: exit %d (want 2), one "
        "message",
        b, N, st);
  free(log);
}

/* Rank 1 is stopped 3 s in (mid-training) and held 40 s; rank 0 must see
 * it within REPRISE_DIST_TIMEOUT_MS (2 s) at the next all-reduce, fail,
 * wait as long again for the others and stop every rank: the job ends
 * well before the hold does, and rank 0's --timings, open all along,
 * leaves no temporary file behind. */
static void frozen_peer(void) {
  const char *sh = drv_rank1_freeze_script("freeze.sh", 3, 40);
  if (!sh) {
    check(0, "write freeze.sh");
    return;
  }
  static const char *a[] = {COMMON, NULL};
  const char *b[] = {"--dist",    "--iters",           "1000000",
                     "--timings", path("frozen.json"), NULL};
  setenv("REPRISE_DIST_TIMEOUT_MS", "2000", 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* COMMON's --iters 40 is overridden by the later --iters */
  int st = drv_reprise_wrapped(2, "frozen", sh, a, b);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  unsetenv("REPRISE_DIST_TIMEOUT_MS");
  double s = (double)(t1.tv_sec - t0.tv_sec) +
             (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  char *log = slurp(path("frozen.log"), NULL);
  check(st != 0, "a stopped peer: the job fails (exit %d)", st);
  check(s < 35,
        "a stopped peer: the job ends in %.1f s, before the 40 s "
        "hold",
        s);
  check(count(log, "RP_EPEER") > 0 && count(log, "rank 1 did not answer") > 0,
        "rank 0 names the peer that did not answer");
  check(drv_count_files(".frozen.json.tmp.*") == 0,
        "a stopped peer: no temporary file of --timings is left");
  /* its "stopping every rank" line may be lost in the launcher's teardown:
   * the job's end, in time, is what is checked */
  free(log);
}

/* Rank 1 alone given another --lr, or an option it refuses: every rank
 * stops with one status (nobody left waiting in MPI_Init), one message
 * naming rank 1. */
static void rank_options(void) {
  const char *sh = drv_rank1_script("lr1.sh", "--lr 0.2");
  if (!sh) {
    check(0, "write lr1.sh");
    return;
  }
  static const char *a[] = {COMMON, "--dist", NULL};
  int st = drv_reprise_wrapped(2, "lr1", sh, a, NULL);
  char *log = slurp(path("lr1.log"), NULL);
  check(st == 2 && count(log, "rank 1: the options") == 1,
        "rank 1 alone with another --lr: exit 2 (got %d), one message: %s", st,
        log ? log : "");
  free(log);
  if (!(sh = drv_rank1_script("bad1.sh", "--momentum 2"))) {
    check(0, "write bad1.sh");
    return;
  }
  st = drv_reprise_wrapped(2, "bad1", sh, a, NULL);
  log = slurp(path("bad1.log"), NULL);
  check(st == 2 && count(log, "rank 1: refuses its options") == 1 &&
            count(log, "--momentum") >= 1,
        "rank 1 alone with a bad --momentum: exit 2 (got %d), rank 1 says "
        "why: %s",
        st, log ? log : "");
  free(log);
  /* bench --dist the same way (--momentum is not a bench option) */
  static const char *bq[] = {"bench", "--dist", "--quick", NULL};
  st = drv_reprise_wrapped(2, "bench1", sh, bq, NULL);
  log = slurp(path("bench1.log"), NULL);
  check(st == 2 &&
            count(log, "reprise bench: rank 1: refuses its options") == 1,
        "bench --dist, rank 1 alone with an unknown option: exit 2 (got %d), "
        "rank 1 says why: %s",
        st, log ? log : "");
  free(log);
}

/* The ranks' files are compared too, not only their options: rank 1
 * given another --data file than rank 0's (accuracy figures past 100%
 * and exit 0: the global sums over rank 0's count), or another
 * checkpoint (ranks whose weights then differ): exit 2 on every rank, one
 * message naming rank 1 and the input. */
static void rank_files(void) {
  for (int k = 0; k < 2; k++) { /* d0.csv, and d1.csv: one value other */
    char name[16];
    snprintf(name, sizeof name, "d%d.csv", k);
    FILE *f = fopen(path(name), "w");
    if (!f) {
      check(0, "write %s", name);
      return;
    }
    fputs("label,x0,x1\n", f);
    for (int i = 0; i < 300; i++)
      fprintf(f, "%d,%g,%g\n", i % 3, (double)(i % 17) / 17,
              k && i == 299 ? 5.0 : (double)i / 300);
    fclose(f);
  }
  char extra[600];
  snprintf(extra, sizeof extra, "--data %s", path("d1.csv"));
  const char *sh = drv_rank1_script("data1.sh", extra);
  static const char *a[] = {"train",  "--backend", "cpu",   "--procs",
                            "2",      "--iters",   "4",     "--batch",
                            "64",     "--hidden",  "16,16", "--dist",
                            "--data", NULL,        NULL};
  static char d0[512]; /* path()'s buffers rotate */
  snprintf(d0, sizeof d0, "%s", path("d0.csv"));
  a[13] = d0;
  int st = sh ? drv_reprise_wrapped(2, "data1", sh, a, NULL) : -1;
  char *log = slurp(path("data1.log"), NULL);
  check(st == 2 && count(log, "rank 1: the data") == 1,
        "rank 1 with another --data file: exit 2 (got %d), one message: %s", st,
        log ? log : "");
  free(log);
  /* two checkpoints of 10 steps at other learning rates */
  const char *ka[] = {"--iters", "10", "--save-weights", path("ka.bin"), NULL};
  const char *kb[] = {"--iters",        "10",           "--lr", "0.2",
                      "--save-weights", path("kb.bin"), NULL};
  check(train(0, "ka", ka) == 0 && train(0, "kb", kb) == 0,
        "two checkpoints to resume from");
  snprintf(extra, sizeof extra, "--load-weights %s", path("kb.bin"));
  sh = drv_rank1_script("ck1.sh", extra);
  static const char *b[] = {COMMON, "--dist", "--load-weights", NULL, NULL};
  static char kab[512];
  snprintf(kab, sizeof kab, "%s", path("ka.bin"));
  b[sizeof b / sizeof b[0] - 2] = kab;
  st = sh ? drv_reprise_wrapped(2, "ck1", sh, b, NULL) : -1;
  log = slurp(path("ck1.log"), NULL);
  check(st == 2 && count(log, "rank 1: the checkpoint (--load-weights)") == 1,
        "rank 1 with another checkpoint: exit 2 (got %d), one message: %s", st,
        log ? log : "");
  free(log);
}

/* The run `name` exited 2 and its log says `message` once, with one
 * "Try --help" line. */
static void said_once(const char *name, int st, const char *message,
                      const char *what) {
  char file[64];
  snprintf(file, sizeof file, "%s.log", name);
  char *log = slurp(path(file), NULL);
  check(st == 2 && count(log, "Try 'reprise train --help'") == 1 &&
            count(log, message) == 1,
        "%s: exit 2 (got %d), one message: %s", what, st, log ? log : "");
  free(log);
}

/* A usage error every rank finds alike (the options and the files are
 * the same on every rank) is said once, by rank 0: a --val-frac that
 * leaves no training batch, a --data file of fewer rows than --batch, an
 * --iters the checkpoint has done already. */
static void usage_once(void) {
  const char *vf[] = {"--dist", "--samples", "100", "--val-frac", "0.5", NULL};
  said_once("vf", train(N, "vf", vf), "--val-frac 0.5: 100 samples",
            "--val-frac 0.5 of 100 samples, --batch 64");
  FILE *f = fopen(path("few.csv"), "w");
  if (!f) {
    check(0, "write few.csv");
    return;
  }
  fputs("label,x0,x1\n", f);
  for (int i = 0; i < 50; i++)
    fprintf(f, "%d,%g,%g\n", i % 3, (double)(i % 7) / 7, (double)i / 50);
  fclose(f);
  static const char *a[] = {
      "train",   "--backend", "cpu",    "--procs", "2",  "--iters", "4",
      "--batch", "64",        "--dist", "--data",  NULL, NULL};
  static char few[512]; /* path()'s buffers rotate */
  snprintf(few, sizeof few, "%s", path("few.csv"));
  a[11] = few;
  said_once("few", drv_reprise(N, "few", a, NULL),
            "--batch 64 is more than the 50 samples",
            "--batch 64 over a --data file of 50 rows");
  const char *k[] = {"--save-weights", path("k40.bin"), NULL};
  check(train(0, "k40", k) == 0, "a checkpoint of 40 steps");
  static char k40[512];
  snprintf(k40, sizeof k40, "%s", path("k40.bin"));
  const char *it[] = {"--dist", "--load-weights", k40, NULL};
  said_once("it", train(N, "it", it), "has done 40 steps already",
            "--iters 40 from a checkpoint of 40 steps");
}

int main(int argc, char **argv) {
  if ((N = drv_args(argc, argv)) < 1)
    return 2;
  if (drv_mkdir(DIR)) {
    perror("mkdtemp");
    return 1;
  }
  reference();
  distributed();
  if (N == 1)
    singleton();
  eager();
  bad_split();
  if (N == 2)
    frozen_peer();
  if (N == 2)
    rank_options();
  if (N == 2)
    rank_files();
  if (N >= 2)
    usage_once();
  return drv_finish(N);
}
