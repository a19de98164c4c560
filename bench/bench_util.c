/* bench/bench_util.c — clock, statistics, busy loop, runtime creation and
 * the JSON writer shared by the benchmarks. */
#include "bench_impl.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

static _Atomic int table_errno;

void rp_bench_flush(FILE *t) {
  if (fflush(t) != 0) {
    int expected = 0, e = errno ? errno : EIO;
    atomic_compare_exchange_strong(&table_errno, &expected, e);
  }
}

int rp_bench_table_errno(void) {
  return atomic_load(&table_errno);
}

uint64_t rp_bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

rp_bench_stats rp_bench_summarize(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return (rp_bench_stats){med, v[0], v[n - 1]};
}

/* ---- busy work ---- */

/* Busy for ns nanoseconds of wall time. Timed, not counted: on a shared
 * virtual machine a core's speed changes from run to run, and a loop
 * calibrated once would then make the "1 us task" anything from 0.5 to 2 us
 * (the ideal schedule the tiny workload is compared with assumes the task
 * time it reports). */
void rp_bench_busy(uint64_t ns) {
  uint64_t t0 = rp_bench_now_ns();
  while (rp_bench_now_ns() - t0 < ns)
    ;
}

/* What one rp_bench_busy(ns) call costs run alone: the fastest batch
 * average (being preempted only ever makes a batch slower). */
double rp_bench_busy_cost(uint64_t ns) {
  enum { BATCHES = 11, CALLS = 200 };
  double best = 0;
  for (int b = 0; b < BATCHES; b++) {
    uint64_t t0 = rp_bench_now_ns();
    for (int c = 0; c < CALLS; c++)
      rp_bench_busy(ns);
    double v = (double)(rp_bench_now_ns() - t0) / CALLS;
    best = b == 0 || v < best ? v : best;
  }
  return best;
}

/* ---- runtime ---- */

int rp_bench_fail(const char *what, rp_status st) {
  fprintf(stderr, "reprise bench: %s: %s (%s)\n", what, rp_status_name(st),
          rp_error_detail());
  return 1;
}

rp_status rp_bench_check(const char *what, rp_status st) {
  if (st)
    rp_bench_fail(what, st);
  return st;
}

rp_status rp_bench_runtime(const rp_bench_opts *o, rp_runtime **out) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = o->backend;
  cfg.cpus = o->workers;
  cfg.quiet = 1;
  cfg.ignore_env = 1; /* --backend and --workers decide, not REPRISE_* */
  rp_status st = rp_runtime_create(&cfg, out);
  if (st) {
    char what[64] = "cannot create the runtime";
    if (o->backend_src) /* as train says it: which option or variable */
      snprintf(what, sizeof what, "creating the runtime (%s%s%s)",
               o->backend_src, o->backend_src[0] == '-' ? " " : "=",
               o->backend == RP_BACKEND_CUDA  ? "cuda"
               : o->backend == RP_BACKEND_CPU ? "cpu"
                                              : "auto");
    rp_bench_fail(what, st);
    return st;
  }
  if (o->backend == RP_BACKEND_AUTO &&
      rp_runtime_backend(*out) == RP_BACKEND_CPU)
    fprintf(stderr, "reprise bench: using the CPU backend: %s\n",
            rp_runtime_backend_reason(*out));
  return RP_OK;
}

const char *rp_bench_backend_name(const rp_runtime *rt) {
  return rp_runtime_backend(rt) == RP_BACKEND_CUDA ? "cuda" : "cpu";
}

/* ---- JSON ---- */

void rp_bench_json_open(rp_bench_json *j, FILE *f, int quick) {
  *j = (rp_bench_json){.f = f, .quick = quick};
  if (f)
    fputs("[", f);
}

void rp_bench_json_close(rp_bench_json *j) {
  if (j->f)
    fputs(j->objects ? "\n]\n" : "]\n", j->f);
}

void rp_bench_json_begin(rp_bench_json *j) {
  if (j->f)
    fputs(j->objects++ ? ",\n  {" : "\n  {", j->f);
  j->fields = 0;
}

void rp_bench_json_end(rp_bench_json *j) {
  if (j->f)
    fprintf(j->f, ", \"commit\": \"%s\"%s}", rp_build_commit,
            j->quick ? ", \"quick\": true" : "");
}

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void put_key(rp_bench_json *j, const char *key) {
  if (j->fields++)
    fputs(", ", j->f);
  put_string(j->f, key);
  fputs(": ", j->f);
}

void rp_bench_json_str(rp_bench_json *j, const char *key, const char *v) {
  if (!j->f)
    return;
  put_key(j, key);
  put_string(j->f, v);
}

void rp_bench_json_uint(rp_bench_json *j, const char *key, uint64_t v) {
  if (!j->f)
    return;
  put_key(j, key);
  fprintf(j->f, "%llu", (unsigned long long)v);
}

void rp_bench_json_num(rp_bench_json *j, const char *key, double v) {
  if (!j->f)
    return;
  put_key(j, key);
  if (isfinite(v)) /* 9 significant digits: a 0.0001 s median stays one */
    fprintf(j->f, "%.9g", v);
  else
    fputs("null", j->f);
}
