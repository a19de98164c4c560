/* engine/cpu/cpu_backend.c — the CPU backend: worker threads, each draining
 * an in-order queue (its stream), system memory, and the worker loop's poll
 * hook through which the replay scheduler runs its static schedules.
 *
 * Queues are engine/queue.h's intrusive MPSC lists: a push is one atomic
 * exchange, nothing is allocated. An idle worker spins for the tunable
 * REPRISE_SPIN_NS, yields for REPRISE_YIELD_NS, then sleeps on a futex until a
 * producer wakes it. */
#include "../engine_impl.h"
#include "../queue.h"

#include <sched.h>
#include <string.h>

typedef struct cpu_worker {
  rp_queue q; /* this worker's in-order queue (its stream) */
  /* 1 while nothing is queued or running (drain) */
  RP_ALIGNED_LINE _Atomic uint32_t idle;
  /* items pushed to q, and items of q that finished running: a drain waits
   * for the count pushed when it started, not for the queue to empty,
   * which other threads' launches could put off for ever */
  _Atomic uint64_t pushed, ran;
  pthread_t thread;
  unsigned index;
  rp_runtime *rt;
  struct cpu_state *cs;
  /* while the worker sleeps inside a replay (rp__worker_block_wait), the
   * word an enqueue wakes, NULL otherwise: the queue's wake_seq (futex_waitv
   * waits on it beside the replay's word; an enqueue bumps it), or on a
   * kernel without futex_waitv the replay's word itself. Not the queue's
   * `sleeping`, which replay submissions wake too. */
  _Atomic(_Atomic uint32_t *) blocked_on;
} cpu_worker;

/* The worker this thread is, NULL on other threads. */
static _Thread_local cpu_worker *tl_worker;

typedef struct cpu_state {
  cpu_worker *workers;
  unsigned n;
  int pin; /* REPRISE_PIN, read by cpu_init: never by a worker (a getenv
              there races a setenv of the program's after create) */
  _Atomic int stop;
  _Atomic uint64_t pending; /* items pushed and not yet finished */
} cpu_state;

static int poll_once(cpu_worker *w) {
  /* acquire: pairs with rp__set_poller's release, so fn is the one set */
  void *arg = atomic_load_explicit(&w->rt->poll_arg, memory_order_acquire);
  return arg ? w->rt->poll_fn(arg, w->index) : 0;
}

/* REPRISE_PIN=1 (cs->pin): worker i runs on core i (mod the cores this
 * process may use). Off by default. */
static void pin(const cpu_state *cs, unsigned index) {
  if (cs->pin <= 0)
    return;
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return;
  int n = CPU_COUNT(&allowed), k = (int)(index % (unsigned)(n ? n : 1));
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &allowed) && k-- == 0) {
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      return;
    }
}

static void *worker_main(void *p) {
  cpu_worker *w = p;
  cpu_state *cs = w->cs;
  char name[16];
  snprintf(name, sizeof name, "rp-worker-%u", w->index);
  pthread_setname_np(pthread_self(), name);
  pin(cs, w->index);
  tl_worker = w;
  rp__alloc_counter_register(w->rt, w->index);
  rp_backoff idle = RP_BACKOFF_IDLE;
  while (!atomic_load_explicit(&cs->stop, memory_order_acquire)) {
    rp_work *item = rp__queue_pop(&w->q);
    if (item) {
      item->run(item);
      atomic_fetch_add_explicit(&w->ran, 1, memory_order_release);
      atomic_fetch_sub_explicit(&cs->pending, 1, memory_order_release);
      idle = (rp_backoff)RP_BACKOFF_IDLE;
      continue;
    }
    if (poll_once(w)) {
      idle = (rp_backoff)RP_BACKOFF_IDLE;
      continue;
    }
    if (rp__backoff(&idle))
      continue;
    /* Sleep: announce, re-check everything a producer could have published
     * before seeing the announcement, then wait for a wake. */
    uint32_t seq = rp__queue_sleep_begin(&w->q);
    if (rp__queue_nonempty(&w->q) || poll_once(w) ||
        atomic_load_explicit(&cs->stop, memory_order_acquire)) {
      rp__queue_sleep_end(&w->q);
      idle = (rp_backoff)RP_BACKOFF_IDLE;
      continue;
    }
    atomic_store(&w->idle, 1);
    rp__queue_sleep_wait(&w->q, seq);
    atomic_store(&w->idle, 0);
    rp__queue_sleep_end(&w->q);
    idle = (rp_backoff)RP_BACKOFF_IDLE;
  }
  return NULL;
}

/* ---- backend ops ---- */

static rp_status cpu_init(rp_runtime *rt, const rp_runtime_config *cfg,
                          void **state) {
  cpu_state *cs = rp__calloc(1, sizeof *cs);
  if (!cs)
    return rp__err(RP_ENOMEM, "CPU backend: out of memory");
  unsigned n = cfg->cpus ? cfg->cpus : 1;
  cs->workers = aligned_alloc(RP_CACHELINE, sizeof(cpu_worker) * n);
  if (!cs->workers) {
    free(cs);
    return rp__err(RP_ENOMEM, "CPU backend: out of memory");
  }
  memset(cs->workers, 0, sizeof(cpu_worker) * n);
  cs->pin = (int)rp__env_long("REPRISE_PIN", 0);
  rp_mem sysmem;
  rp_status st = rp__add_mem(rt, &(rp_mem_info){RP_MEM_SYSTEM, -1},
                             &rp__cpu_backend, 1, &sysmem);
  if (st)
    goto fail;
  for (unsigned i = 0; i < n; i++) {
    cpu_worker *w = &cs->workers[i];
    rp__queue_init(&w->q);
    w->index = i;
    w->rt = rt;
    w->cs = cs;
    st = rp__add_proc(rt, &(rp_proc_info){RP_PROC_CPU, (int)i, sysmem, -1},
                      &rp__cpu_backend, i, NULL);
    if (st)
      goto fail;
  }
  *state = cs;
  for (unsigned i = 0; i < n; i++) {
    if (pthread_create(&cs->workers[i].thread, NULL, worker_main,
                       &cs->workers[i]) != 0) {
      atomic_store(&cs->stop, 1);
      for (unsigned j = 0; j < i; j++) {
        rp__queue_kick(&cs->workers[j].q);
        pthread_join(cs->workers[j].thread, NULL);
      }
      *state = NULL;
      st = rp__err(RP_ENOMEM, "CPU backend: cannot start worker %u", i);
      goto fail;
    }
    cs->n = i + 1;
  }
  return RP_OK;
fail:
  free(cs->workers);
  free(cs);
  return st;
}

/* Waits until every item pushed so far finished running (as many as were
 * pushed to each worker when it started have run there: each worker runs
 * its queue in order). Items pushed meanwhile are not waited for. */
static void cpu_drain(void *state) {
  cpu_state *cs = state;
  for (unsigned i = 0; i < cs->n; i++) {
    cpu_worker *w = &cs->workers[i];
    uint64_t target = atomic_load(&w->pushed);
    while (atomic_load_explicit(&w->ran, memory_order_acquire) < target)
      sched_yield();
  }
}

/* Waits until no item is queued or running, those pushed meanwhile (by
 * running items) included: for stopping the workers. */
static void cpu_drain_all(cpu_state *cs) {
  while (atomic_load_explicit(&cs->pending, memory_order_acquire) != 0)
    sched_yield();
}

static void cpu_fini(rp_runtime *rt, void *state) {
  RP_UNUSED(rt);
  cpu_state *cs = state;
  if (!cs)
    return;
  cpu_drain_all(cs);
  atomic_store(&cs->stop, 1);
  for (unsigned i = 0; i < cs->n; i++) {
    cpu_worker *w = &cs->workers[i];
    rp__queue_kick(&w->q);
    pthread_join(w->thread, NULL);
  }
  free(cs->workers);
  free(cs);
}

static rp_status cpu_mem_alloc(void *state, const rp_mem_rec *m, size_t bytes,
                               size_t align, void **ptr) {
  RP_UNUSED(state);
  RP_UNUSED(m);
  if (align < sizeof(void *))
    align = sizeof(void *);
  size_t rounded;
  if (!rp__align_up_ok(bytes, align, &rounded))
    return rp__err(RP_ERANGE,
                   "allocation of %zu bytes aligned to %zu "
                   "overflows",
                   bytes, align);
  /* zeroed by calloc, not memset: a large block's pages stay untouched
   * (the kernel's zero pages) until used, so allocating a model larger
   * than the machine fails its size checks, not the OOM killer. align is
   * a power of two; the block's start is kept in the word before p. */
  if (rounded > SIZE_MAX - sizeof(void *) - align)
    return rp__err(RP_ERANGE, "allocation of %zu bytes overflows", bytes);
  void *raw = calloc(1, rounded + sizeof(void *) + align);
  if (!raw)
    return rp__err(RP_ENOMEM, "system memory: cannot allocate %zu bytes",
                   bytes);
  uintptr_t a =
      ((uintptr_t)raw + sizeof(void *) + align - 1) & ~((uintptr_t)align - 1);
  ((void **)a)[-1] = raw;
  *ptr = (void *)a;
  return RP_OK;
}

static void cpu_mem_free(void *state, const rp_mem_rec *m, void *ptr) {
  RP_UNUSED(state);
  RP_UNUSED(m);
  if (ptr)
    free(((void **)ptr)[-1]);
}

static void cpu_enqueue(void *state, const rp_proc_rec *p, rp_work *item) {
  cpu_state *cs = state;
  cpu_worker *w = &cs->workers[p->local];
  atomic_fetch_add_explicit(&cs->pending, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&w->pushed, 1, memory_order_relaxed);
  rp__queue_push(&w->q, item);
  rp__queue_wake(&w->q);
  /* seq_cst after the push: a worker in rp__worker_block_wait that
   * announced before this load is woken here, else it sees the item (on a
   * kernel without futex_waitv it may be between its check and its
   * sleep: then its bound) */
  _Atomic uint32_t *b = atomic_load(&w->blocked_on);
  if (RP_UNLIKELY(b == &w->q.wake_seq))
    rp__queue_kick(&w->q);
  else if (RP_UNLIKELY(b != NULL))
    rp__futex_wake(b, 0x7fffffff);
}

/* The copy item: runs on the worker in queue order, so it follows every
 * item queued on this worker before it. */
static void cpu_copy_run(rp_work *w) {
  rp_copy_async *op = (rp_copy_async *)w;
  char *d = op->dst;
  const char *s = op->src;
  if (op->dpitch == op->row_bytes && op->spitch == op->row_bytes) {
    memcpy(d, s, op->rows * op->row_bytes); /* dense: one call */
  } else {
    for (size_t r = 0; r < op->rows; r++)
      memcpy(d + r * op->dpitch, s + r * op->spitch, op->row_bytes);
  }
  /* done may free op: nothing touches it after this call */
  op->done->run(op->done);
}

static rp_status cpu_copy_async(void *state, const rp_proc_rec *p,
                                rp_copy_async *op) {
  op->work.run = cpu_copy_run;
  cpu_enqueue(state, p, &op->work);
  return RP_OK;
}

const rp_backend_ops rp__cpu_backend = {
    .name = "cpu",
    .init = cpu_init,
    .fini = cpu_fini,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_copy = NULL,
    .proc_enqueue = cpu_enqueue,
    .drain = cpu_drain,
    .copy_async = cpu_copy_async,
};

/* ---- engine entry points that reach the workers ---- */

void rp__proc_enqueue(rp_runtime *rt, rp_proc p, rp_work *w) {
  RP_ASSERT(p < rt->nprocs);
  const rp_proc_rec *pr = &rt->procs[p];
  void *st = pr->be == &rp__cpu_backend ? rt->cpu_state : rt->gpu_state;
  pr->be->proc_enqueue(st, pr, w);
}

void rp__set_poller(rp_runtime *rt, rp_poll_fn fn, void *arg) {
  rt->poll_fn = fn;
  /* release: fn is visible to workers that acquire-load a non-NULL arg */
  atomic_store_explicit(&rt->poll_arg, arg, memory_order_release);
  rp__worker_wake_all(rt);
}

int rp__worker_serve(void) {
  cpu_worker *w = tl_worker;
  rp_work *item = w ? rp__queue_pop(&w->q) : NULL;
  if (!item)
    return 0;
  /* the item is eager work, outside the replay this thread waits in */
  const char **violation = rp__tl_replay_violation;
  const struct rp_task_ctx *task = rp__tl_task;
  rp__tl_replay_violation = NULL;
  item->run(item);
  atomic_fetch_add_explicit(&w->ran, 1, memory_order_release);
  atomic_fetch_sub_explicit(&w->cs->pending, 1, memory_order_release);
  rp__tl_replay_violation = violation;
  rp__tl_task = task;
  rp_error_set(RP_OK, NULL); /* its detail is not the replay's */
  return 1;
}

int rp__worker_block_wait(_Atomic uint32_t *word, uint32_t v) {
  cpu_worker *w = tl_worker;
  if (!w) {
    rp__futex_wait(word, v, -1);
    return 1;
  }
  /* announced (seq_cst) before the re-check, so an enqueue either is seen
   * below or bumps wake_seq from seq (cpu_enqueue) */
  uint32_t seq = atomic_load(&w->q.wake_seq);
  int both = rp__futex_wait2_usable();
  atomic_store(&w->blocked_on, both ? &w->q.wake_seq : word);
  int slept = !rp__queue_nonempty(&w->q);
  if (slept && (!both || rp__futex_wait2(word, v, &w->q.wake_seq, seq) < 0))
    rp__futex_wait(word, v, RP_SERVE_SLEEP_NS);
  atomic_store(&w->blocked_on, NULL);
  return slept;
}

void rp__worker_wake(rp_runtime *rt, unsigned w) {
  cpu_state *cs = rt->cpu_state;
  if (w < cs->n)
    rp__queue_wake(&cs->workers[w].q);
}

void rp__worker_wake_all(rp_runtime *rt) {
  cpu_state *cs = rt->cpu_state;
  for (unsigned i = 0; i < cs->n; i++)
    rp__queue_wake(&cs->workers[i].q);
}
