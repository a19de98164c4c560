/* bench/hop_bench.c — latency of one dependent hop between two workers.
 *
 * Two ops: A on worker 0 writes token X, B on worker 1 reads X. A stores the
 * clock into X as its last act; B reads the clock as its first act and
 * appends the difference to its sample instance S. The hop is thus the time
 * from A's store to B's start: A's completion path, B's worker noticing it
 * and, when it slept, waking up. Measured inside the tasks, so the host's
 * issue and wait costs are not in it (an end-to-end time minus a one-worker
 * baseline would carry the noise of both).
 *
 * Before its store A busy-waits lead_ns, so that by the time it stores the
 * host has gone to sleep (on a 2-core machine it would otherwise still hold
 * B's core and its own issue cost would sit in the hop) and B is waiting:
 * hop_spin   lead 5 us, under the consumer's busy-spin bound (REPRISE_SPIN_NS,
 *            10 us): B's worker is spinning on A's progress (replay) or on
 *            its queue (eager) when A stores.
 * hop_sleep  lead 1 ms, far beyond the spin and yield bounds (10 + 200 us):
 *            B's worker sleeps on its futex and the hop includes the wake.
 * The "os" rows are the floor: the same hop between two bare threads, the
 * consumer spinning on a word or asleep on a futex, no engine in between.
 * The figure is the median sample; min and max show the spread. */
#include "bench_impl.h"

#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
  HOP_CAP = 4096, /* samples S can hold */
  HOP_WARM = 20,  /* back-to-back executions before each case, not sampled */
};
typedef struct hop_case {
  const char *name;
  uint32_t samples, quick_samples;
  uint64_t lead_ns; /* A's busy wait before its store */
} hop_case;

static const hop_case CASES[] = {
    {"hop_spin", 2000, 100, 5000},
    {"hop_sleep", 200, 20, 1000000},
};

/* The lead of the case being run: set by the host before it issues, read by
 * A (issue orders the store before the task). */
static uint64_t g_lead_ns;

typedef struct hop_ctx {
  rp_runtime *rt;
  rp_inst x, s;
  int64_t *samples; /* S on the host: [0] count, [1..] samples */
  rp_access acc_a[1], acc_b[2];
  rp_launch la, lb;
  rp_exec *ex;    /* replay mode */
  sem_t done_sem; /* posted when the execution waited for completes */
} hop_ctx;

typedef rp_status (*hop_exec)(hop_ctx *h);

/* ---- tasks ---- */

static rp_status hop_a(rp_task_ctx *ctx) {
  int64_t *x = rp_ctx_ptr(ctx, 0);
  rp_bench_busy(g_lead_ns);
  *x = (int64_t)rp_bench_now_ns();
  return RP_OK;
}

static rp_status hop_b(rp_task_ctx *ctx) {
  int64_t now = (int64_t)rp_bench_now_ns();
  const int64_t *x = rp_ctx_ptr(ctx, 0);
  int64_t *s = rp_ctx_ptr(ctx, 1); /* s[0]: count, s[1..]: samples */
  int64_t n = s[0];
  if (n < rp_ctx_inst(ctx, 1)->rect.hi[0]) {
    s[n + 1] = now - *x;
    s[0] = n + 1;
  }
  return RP_OK;
}

static rp_status hop_setup(hop_ctx *h) {
  rp_task_id a, b;
  rp_task_desc da = {.name = "bench.hop_a", .cpu_fn = hop_a};
  rp_task_desc db = {.name = "bench.hop_b", .cpu_fn = hop_b};
  rp_mem sys;
  rp_rect one = rp_rect_1d(0, 0), samples = rp_rect_1d(0, HOP_CAP);
  rp_status st = rp_task_register(h->rt, &da, &a);
  st = st ? st : rp_task_register(h->rt, &db, &b);
  st = st ? st : rp_mem_find(h->rt, RP_MEM_SYSTEM, -1, &sys);
  st = st ? st : rp_instance_create(h->rt, sys, RP_I64, &one, NULL, &h->x);
  st = st ? st : rp_instance_create(h->rt, sys, RP_I64, &samples, NULL, &h->s);
  h->acc_a[0] = (rp_access){h->x, RP_WRITE, RP_REDOP_NONE};
  h->acc_b[0] = (rp_access){h->x, RP_READ, RP_REDOP_NONE};
  h->acc_b[1] = (rp_access){h->s, RP_RW, RP_REDOP_NONE};
  h->la = (rp_launch){.task = a, .proc = 0, .accesses = h->acc_a, .naccess = 1};
  h->lb = (rp_launch){.task = b, .proc = 1, .accesses = h->acc_b, .naccess = 2};
  h->samples = st ? NULL : rp_instance_ptr(h->rt, h->s);
  return st || h->samples ? st : RP_EACCESS; /* system memory: never */
}

/* ---- one execution ---- */

/* Waits for e asleep on a semaphore posted from e's completion callback:
 * on a 2-core machine a host spinning in rp_event_wait (or even yielding)
 * competes with the two workers whose hop is measured. The host's own
 * wake-up comes after B's sample was taken, so it is not in the figure. */
static void post_done(void *arg, rp_status st) {
  (void)st;
  sem_post(arg);
}

static rp_status host_wait(hop_ctx *h, rp_event e) {
  rp_status st = rp_event_on_complete(h->rt, e, post_done, &h->done_sem);
  if (st)
    return st;
  while (sem_wait(&h->done_sem) != 0)
    ; /* EINTR */
  return rp_event_query(h->rt, e);
}

/* A is gated on a user event the host triggers once B is launched too, so
 * B is already waiting on A when A completes: the hop is worker to worker,
 * never the host issuing B after A finished. */
static rp_status hop_eager(hop_ctx *h) {
  rp_event gate, done = RP_NO_EVENT;
  rp_status st = rp_event_create(h->rt, &gate);
  if (st)
    return st;
  h->la.wait = gate;
  st = rp_launch_task(h->rt, &h->la, NULL);
  st = st ? st : rp_launch_task(h->rt, &h->lb, &done);
  rp_status tr = rp_event_trigger(h->rt, gate); /* always: nothing hangs */
  st = st ? st : tr ? tr : host_wait(h, done);
  rp_event_release(h->rt, done);
  rp_event_release(h->rt, gate);
  h->la.wait = RP_NO_EVENT;
  return st;
}

static rp_status hop_replay(hop_ctx *h) {
  rp_replay_args args = {0};
  rp_event done;
  rp_status st = rp_replay(h->ex, &args, &done);
  if (st)
    return st;
  st = host_wait(h, done);
  rp_event_release(h->rt, done);
  return st;
}

static rp_status hop_instantiate(hop_ctx *h) {
  rp_graph *g;
  rp_status st = rp_capture_begin(h->rt, NULL);
  st = st ? st : rp_launch_task(h->rt, &h->la, NULL);
  st = st ? st : rp_launch_task(h->rt, &h->lb, NULL);
  if (st) {
    rp_capture_abort(h->rt);
    return st;
  }
  st = rp_capture_end(h->rt, &g);
  if (st)
    return st;
  st = rp_instantiate(g, NULL, &h->ex);
  rp_graph_destroy(g);
  return st;
}

/* ---- measuring ---- */

/* The median of B's samples s[1 .. n], checking B ran n times. */
static rp_status hop_samples(const int64_t *s, uint32_t n,
                             rp_bench_stats *out) {
  if (s[0] != (int64_t)n) {
    fprintf(stderr, "reprise bench: hop: consumer ran %lld times, not %u\n",
            (long long)s[0], n);
    return RP_ETASK;
  }
  double *v = malloc(sizeof *v * n);
  if (!v) {
    fprintf(stderr, "reprise bench: hop: out of memory\n");
    return RP_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++)
    v[i] = (double)s[i + 1];
  *out = rp_bench_summarize(v, n);
  free(v);
  return RP_OK;
}

/* Warm-up, then n sampled executions. Reports its failures. */
static rp_status hop_case_run(hop_ctx *h, hop_exec fn, const hop_case *k,
                              uint32_t n, rp_bench_stats *out) {
  rp_status st = RP_OK;
  g_lead_ns = k->lead_ns;
  for (int i = 0; i < HOP_WARM && !st; i++)
    st = fn(h);
  /* No op is in flight (the last execution was waited for): the host may
   * reset the sample count directly. */
  if (!st)
    h->samples[0] = 0;
  for (uint32_t i = 0; i < n && !st; i++)
    st = fn(h);
  if (st)
    return rp_bench_check(k->name, st);
  return hop_samples(h->samples, n, out);
}

/* ---- the OS floor: two bare threads ---- */

typedef struct os_hop {
  _Atomic uint32_t word;  /* the producer's round number */
  _Atomic uint32_t taken; /* the consumer's samples so far */
  int sleep;              /* consumer: futex wait (1) or spin (0) */
  uint32_t n;
  int64_t stamp; /* the producer's clock, written before word */
  double *v;     /* samples */
} os_hop;

static void *os_consumer(void *arg) {
  os_hop *o = arg;
  for (uint32_t r = 1; r <= o->n; r++) {
    uint32_t w;
    /* acquire: the stamp written before the round number */
    while ((w = atomic_load_explicit(&o->word, memory_order_acquire)) < r)
      if (o->sleep)
        syscall(SYS_futex, &o->word, FUTEX_WAIT_PRIVATE, w, NULL, NULL, 0);
    o->v[r - 1] = (double)((int64_t)rp_bench_now_ns() - o->stamp);
    /* release: the sample, and the stamp read, before the next round */
    atomic_store_explicit(&o->taken, r, memory_order_release);
  }
  return NULL;
}

/* n hops of the case's lead between the host and one thread. */
static rp_status os_case(const hop_case *k, uint32_t n, rp_bench_stats *out) {
  os_hop o = {.sleep = k->lead_ns > 100000, .n = n};
  o.v = malloc(sizeof *o.v * n);
  pthread_t t;
  if (!o.v || pthread_create(&t, NULL, os_consumer, &o) != 0) {
    free(o.v);
    fprintf(stderr, "reprise bench: hop: cannot start the os thread\n");
    return RP_ENOMEM;
  }
  for (uint32_t r = 1; r <= n; r++) {
    rp_bench_busy(k->lead_ns);
    o.stamp = (int64_t)rp_bench_now_ns();
    /* seq_cst: the stamp before the round; the consumer's futex wait
     * rechecks the word, so no wake-up is lost */
    atomic_store(&o.word, r);
    if (o.sleep)
      syscall(SYS_futex, &o.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    /* the next round starts after this sample was taken */
    while (atomic_load_explicit(&o.taken, memory_order_acquire) < r)
      rp_bench_busy(100);
  }
  pthread_join(t, NULL);
  *out = rp_bench_summarize(o.v, n);
  free(o.v);
  return RP_OK;
}

static void hop_emit(const rp_bench_opts *o, const char *backend,
                     const char *mode, const hop_case *k, uint32_t n,
                     const rp_bench_stats *s, FILE *t, rp_bench_json *j) {
  if (t) {
    fprintf(t, "%-9s %-6s %-7s %7u %7u %10.1f %10.1f %10.1f\n", k->name, mode,
            backend, o->workers, n, s->median, s->min, s->max);
    rp_bench_flush(t);
  }
  rp_bench_json_begin(j);
  rp_bench_json_str(j, "case", k->name);
  rp_bench_json_str(j, "mode", mode);
  rp_bench_json_str(j, "backend", backend);
  rp_bench_json_uint(j, "workers", o->workers);
  rp_bench_json_uint(j, "reps", n);
  rp_bench_json_num(j, "ns_median", s->median);
  rp_bench_json_num(j, "ns_min", s->min);
  rp_bench_json_num(j, "ns_max", s->max);
  rp_bench_json_end(j);
}

static rp_status hop_mode(const rp_bench_opts *o, hop_ctx *h, hop_exec fn,
                          const char *mode, FILE *t, rp_bench_json *j) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const hop_case *k = &CASES[i];
    uint32_t n = o->quick ? k->quick_samples : k->samples;
    rp_bench_stats s = {0};
    rp_status st = hop_case_run(h, fn, k, n, &s);
    if (st)
      return st;
    hop_emit(o, rp_bench_backend_name(h->rt), mode, k, n, &s, t, j);
  }
  return RP_OK;
}

static rp_status hop_modes(const rp_bench_opts *o, hop_ctx *h, FILE *t,
                           rp_bench_json *j) {
  rp_status st = RP_OK;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0] && !st; i++) {
    const hop_case *k = &CASES[i];
    uint32_t n = o->quick ? k->quick_samples : k->samples;
    rp_bench_stats s = {0};
    st = os_case(k, n, &s);
    if (!st)
      hop_emit(o, "-", "os", k, n, &s, t, j);
  }
  if (!st && (o->modes & RP_BENCH_EAGER))
    st = hop_mode(o, h, hop_eager, "eager", t, j);
  if (!st && (o->modes & RP_BENCH_REPLAY)) {
    st = rp_bench_check("hop instantiate", hop_instantiate(h));
    if (!st)
      st = hop_mode(o, h, hop_replay, "replay", t, j);
    rp_status d = h->ex ? rp_exec_destroy(h->ex) : RP_OK;
    st = st ? st : rp_bench_check("hop exec destroy", d);
  }
  return st;
}

int rp_bench_hop_rows(const rp_bench_opts *o, rp_runtime *rt, FILE *table,
                      rp_bench_json *json) {
  if (o->workers < 2) {
    fprintf(stderr, "reprise bench: --hop needs 2 workers or more\n");
    return 0;
  }
  hop_ctx h = {.rt = rt};
  sem_init(&h.done_sem, 0, 0);
  rp_status st = rp_bench_check("hop setup", hop_setup(&h));
  if (!st && table)
    fprintf(table, "%-9s %-6s %-7s %7s %7s %10s %10s %10s\n", "case", "mode",
            "backend", "workers", "samples", "ns-med", "min", "max");
  if (!st)
    st = hop_modes(o, &h, table, json);
  rp_runtime_drain(rt);
  rp_instance_free(rt, h.x); /* freeing a zero handle just fails */
  rp_instance_free(rt, h.s);
  sem_destroy(&h.done_sem);
  return st ? 1 : 0;
}
