/* bench/static_sched.c — the hand-written peer of CPU replay: a static
 * schedule of the same DAG, the yardstick the CPU replay goals
 * (bench/replay_goals.sh) measure reprise's replay against.
 *
 * Given every node's accesses (in launch order, which is a topological
 * order) and a lane per node (the one reprise's exec settled on), it builds
 * what a programmer would write by hand for that one DAG:
 *
 *  - one thread per lane that has nodes, created once, running its fixed
 *    list (the lane's nodes in launch order) iteration after iteration;
 *  - one progress counter per node, on its own cache line: the iterations
 *    the node completed, stored (release) only by nodes another lane waits
 *    for;
 *  - a wait (acquire loads, pause; sched_yield after a bound, so that an
 *    oversubscribed run still moves) for each cross-lane predecessor that
 *    an earlier wait of the lane does not already imply: the latest
 *    position per producer lane, and none that the previous iteration's
 *    waits cover;
 *  - the dependences of iteration r on iteration r - 1 (a node rewriting a
 *    token the previous iteration still reads or writes) kept too, so
 *    iterations overlap as far as those allow (replays: as far as those
 *    and the exec's limit on replays in flight allow);
 *  - no queue, no allocation, no lock and no system call per iteration.
 *
 * The host starts a run (reps iterations) by bumping a generation number
 * and waits for the lanes to finish the way rp_event_wait does: yields for
 * a while, then sleeps (here on a condition variable), so the time it
 * measures ends the same way a replay run's does. Between runs the lane
 * threads spin, then yield, then sleep until the next generation. */
#include "bench_impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum {
  LINE = 64,
  SPIN_POLLS = 1024,       /* pause-polls before a wait starts yielding */
  IDLE_YIELD_NS = 2000000, /* lane threads between runs: yield, then sleep */
  HOST_YIELD_NS = 50000,   /* the host's yield budget (as rp_event_wait) */
};

typedef struct st_ctr {
  alignas(LINE) _Atomic uint32_t done; /* iterations completed */
} st_ctr;

typedef struct st_wait {
  _Atomic uint32_t *done; /* the producer's counter */
  uint32_t prev;          /* 1: the producer's previous iteration */
} st_wait;

typedef struct st_item {
  uint32_t node;
  uint32_t wait_off, nwait;
  _Atomic uint32_t *publish; /* this node's counter, or NULL: nobody waits */
} st_item;

typedef struct st_lane {
  struct rp_bench_static *s;
  const st_item *items;
  uint32_t n;
  pthread_t th;
} st_lane;

struct rp_bench_static {
  rp_bench_body body;
  const void *arg;
  st_ctr *ctr;     /* per node */
  st_item *items;  /* lane by lane */
  st_wait *waits;  /* per item, back to back */
  st_lane *lanes;  /* the lanes that have nodes */
  uint32_t nlanes; /* threads started */
  uint32_t nwaits;
  uint32_t iter0;                    /* iterations run before the current run */
  uint32_t reps;                     /* of the current run */
  alignas(LINE) _Atomic uint32_t go; /* run generation */
  _Atomic uint32_t quit;
  alignas(LINE) _Atomic uint32_t finished; /* lanes done with the run */
  pthread_mutex_t lock;
  pthread_cond_t cv_go, cv_done;
};

static void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ---- the lanes ---- */

static void wait_done(_Atomic uint32_t *done, uint32_t target) {
  /* acquire: the producer's body (and all it did) happens before ours */
  for (uint32_t n = 0;
       (int32_t)(atomic_load_explicit(done, memory_order_acquire) - target) < 0;
       n++)
    if (n < SPIN_POLLS)
      cpu_pause();
    else
      sched_yield();
}

/* The next run's generation (seen: the last one), or the same after quit. */
static uint32_t wait_go(struct rp_bench_static *s, uint32_t seen) {
  uint64_t t0 = 0;
  for (uint32_t n = 0;; n++) {
    uint32_t g = atomic_load_explicit(&s->go, memory_order_acquire);
    if (g != seen || atomic_load(&s->quit))
      return g;
    if (n < SPIN_POLLS) {
      cpu_pause();
      continue;
    }
    uint64_t now = rp_bench_now_ns();
    t0 = t0 ? t0 : now;
    if (now - t0 < IDLE_YIELD_NS) {
      sched_yield();
      continue;
    }
    pthread_mutex_lock(&s->lock);
    while (atomic_load(&s->go) == seen && !atomic_load(&s->quit))
      pthread_cond_wait(&s->cv_go, &s->lock);
    pthread_mutex_unlock(&s->lock);
  }
}

static void *lane_main(void *p) {
  st_lane *l = p;
  struct rp_bench_static *s = l->s;
  const rp_bench_body body = s->body;
  const void *arg = s->arg;
  uint32_t seen = 0;
  for (;;) {
    seen = wait_go(s, seen);
    if (atomic_load(&s->quit))
      return NULL;
    const uint32_t r0 = s->iter0, end = r0 + s->reps; /* set before go */
    for (uint32_t r = r0; r != end; r++) {
      for (uint32_t i = 0; i < l->n; i++) {
        const st_item *it = &l->items[i];
        for (uint32_t k = 0; k < it->nwait; k++) {
          const st_wait *w = &s->waits[it->wait_off + k];
          wait_done(w->done, r + 1 - w->prev);
        }
        body(arg, it->node);
        if (it->publish) /* release: the body before the count */
          atomic_store_explicit(it->publish, r + 1, memory_order_release);
      }
    }
    /* acq_rel: the last lane's signal covers every lane's run */
    if (atomic_fetch_add_explicit(&s->finished, 1, memory_order_acq_rel) + 1 ==
        s->nlanes) {
      pthread_mutex_lock(&s->lock);
      pthread_cond_signal(&s->cv_done);
      pthread_mutex_unlock(&s->lock);
    }
  }
}

rp_status rp_bench_static_run(void *p, uint32_t reps) {
  struct rp_bench_static *s = p;
  s->reps = reps;
  atomic_store(&s->finished, 0);
  pthread_mutex_lock(&s->lock);
  atomic_store_explicit(&s->go, atomic_load(&s->go) + 1, memory_order_release);
  pthread_cond_broadcast(&s->cv_go);
  pthread_mutex_unlock(&s->lock);
  uint64_t t0 = rp_bench_now_ns();
  while (atomic_load_explicit(&s->finished, memory_order_acquire) < s->nlanes &&
         rp_bench_now_ns() - t0 < HOST_YIELD_NS)
    sched_yield();
  pthread_mutex_lock(&s->lock);
  while (atomic_load_explicit(&s->finished, memory_order_acquire) < s->nlanes)
    pthread_cond_wait(&s->cv_done, &s->lock);
  pthread_mutex_unlock(&s->lock);
  s->iter0 += reps;
  return RP_OK;
}

/* ---- building ---- */

/* The dependences of one iteration's nodes, iteration r - 1's included:
 * the accesses analysed over two copies of the node list (RAW, WAR and WAW
 * per token; anything but a read counts as a write). A predecessor found in
 * the first copy belongs to the previous iteration: deps[doff[i] ..
 * doff[i + 1]) hold node + nodes * prev. */
typedef struct dep_state {
  int64_t *writer; /* per token: its last writer, an index in the 2 copies */
  int64_t *rhead;  /* per token: its readers since, a list in the pool */
  int64_t *rnode, *rnext; /* the pool: reader, next entry */
  int64_t npool;
  uint32_t *deps, ndeps, deps_cap;
} dep_state;

static int dep_push(dep_state *d, int64_t v, int64_t N) {
  if (d->ndeps == d->deps_cap) {
    uint32_t cap = d->deps_cap ? 2 * d->deps_cap : 1024;
    uint32_t *n = realloc(d->deps, sizeof *n * cap);
    if (!n)
      return 1;
    d->deps = n;
    d->deps_cap = cap;
  }
  d->deps[d->ndeps++] = (uint32_t)(v < N ? v + N : v - N); /* prev: v < N */
  return 0;
}

static rp_status analyse(const rp_bench_graph *g, dep_state *d,
                         uint32_t *doff) {
  const int64_t N = g->nodes;
  const size_t pool = 2 * (size_t)g->acc_off[g->nodes];
  d->writer = malloc(sizeof *d->writer * g->ntokens);
  d->rhead = malloc(sizeof *d->rhead * g->ntokens);
  d->rnode = malloc(sizeof *d->rnode * (pool + 1));
  d->rnext = malloc(sizeof *d->rnext * (pool + 1));
  if (!d->writer || !d->rhead || !d->rnode || !d->rnext)
    return RP_ENOMEM;
  for (uint32_t t = 0; t < g->ntokens; t++)
    d->writer[t] = d->rhead[t] = -1;
  doff[0] = 0;
  for (int64_t v = 0; v < 2 * N; v++) {
    uint32_t i = (uint32_t)(v % N), a0 = g->acc_off[i], a1 = g->acc_off[i + 1];
    for (uint32_t a = a0; a < a1 && v >= N; a++) {
      uint32_t t = g->tok[a];
      if (d->writer[t] >= 0 && dep_push(d, d->writer[t], N))
        return RP_ENOMEM;
      for (int64_t e = d->rhead[t]; g->acc[a].priv != RP_READ && e >= 0;
           e = d->rnext[e])
        if (dep_push(d, d->rnode[e], N))
          return RP_ENOMEM;
    }
    for (uint32_t a = a0; a < a1; a++) {
      uint32_t t = g->tok[a];
      if (g->acc[a].priv != RP_READ) {
        d->writer[t] = v;
        d->rhead[t] = -1;
      } else if (d->writer[t] != v) {
        d->rnode[d->npool] = v;
        d->rnext[d->npool] = d->rhead[t];
        d->rhead[t] = d->npool++;
      }
    }
    if (v >= N)
      doff[i + 1] = d->ndeps;
  }
  return RP_OK;
}

static void dep_free(dep_state *d) {
  free(d->writer);
  free(d->rhead);
  free(d->rnode);
  free(d->rnext);
  free(d->deps);
}

/* Where the lanes are, and what the reduction keeps per lane pair. */
typedef struct lane_map {
  uint32_t *pos;     /* per node: index in its lane */
  uint32_t *len;     /* per lane: nodes */
  uint32_t *first;   /* per lane: its first item */
  int64_t *covered;  /* [consumer * L + producer]: waited for so far */
  int64_t *start;    /* the same at an iteration's start */
  int64_t *best;     /* per producer lane, for one node */
  uint32_t *bestdep; /* the dependence that gave best */
} lane_map;

/* A dependence's position on its producer's lane, as the count of that
 * lane's nodes done, relative to the consumer's iteration (<= 0: only an
 * earlier iteration's). */
static int64_t dep_lin(const rp_bench_graph *g, const lane_map *m,
                       uint32_t dep) {
  uint32_t p = dep % g->nodes, prev = dep / g->nodes;
  return (int64_t)m->pos[p] + 1 - (int64_t)prev * m->len[g->lane[p]];
}

/* The waits of every node: per producer lane the latest dependence, unless
 * an earlier wait of the lane (this iteration's, or the previous one's a
 * lane length back) covers it. Pass 0 only finds where each lane's waits
 * end, which is what the next iteration starts with covered; pass 1 emits. */
static uint32_t reduce(struct rp_bench_static *s, const rp_bench_graph *g,
                       const dep_state *d, const uint32_t *doff, lane_map *m,
                       int emit) {
  const uint32_t L = g->nlanes;
  memcpy(m->covered, m->start, sizeof *m->covered * (size_t)L * L);
  uint32_t nw = 0;
  for (uint32_t i = 0; i < g->nodes; i++) { /* lane order within each lane */
    uint32_t me = g->lane[i];
    st_item *it = &s->items[m->first[me] + m->pos[i]];
    for (uint32_t l = 0; l < L; l++)
      m->best[l] = INT64_MIN;
    for (uint32_t e = doff[i]; e < doff[i + 1]; e++) {
      uint32_t p = g->lane[d->deps[e] % g->nodes];
      int64_t lin = dep_lin(g, m, d->deps[e]);
      if (p != me && lin > m->best[p]) {
        m->best[p] = lin;
        m->bestdep[p] = d->deps[e];
      }
    }
    it->node = i;
    it->wait_off = nw;
    for (uint32_t p = 0; p < L; p++) {
      int64_t *c = &m->covered[(size_t)me * L + p];
      if (m->best[p] == INT64_MIN || m->best[p] <= *c)
        continue;
      *c = m->best[p];
      uint32_t pn = m->bestdep[p] % g->nodes;
      if (emit) {
        s->waits[nw] = (st_wait){&s->ctr[pn].done, m->bestdep[p] / g->nodes};
        it->nwait++;
        s->items[m->first[p] + m->pos[pn]].publish = &s->ctr[pn].done;
      }
      nw++;
    }
  }
  for (size_t k = 0; !emit && k < (size_t)L * L; k++) {
    int64_t c = m->covered[k];
    m->start[k] = c == INT64_MIN ? INT64_MIN : c - (int64_t)m->len[k % L];
  }
  return nw;
}

static void lane_map_free(lane_map *m) {
  free(m->pos);
  free(m->len);
  free(m->first);
  free(m->covered);
  free(m->start);
  free(m->best);
  free(m->bestdep);
}

static rp_status build(struct rp_bench_static *s, const rp_bench_graph *g) {
  const uint32_t L = g->nlanes, N = g->nodes;
  dep_state d = {0};
  lane_map m = {0};
  uint32_t *doff = malloc(sizeof *doff * (N + 1));
  m.pos = malloc(sizeof *m.pos * N);
  m.len = calloc(L, sizeof *m.len);
  m.first = calloc(L, sizeof *m.first);
  m.covered = malloc(sizeof *m.covered * (size_t)L * L);
  m.start = malloc(sizeof *m.start * (size_t)L * L);
  m.best = malloc(sizeof *m.best * L);
  m.bestdep = malloc(sizeof *m.bestdep * L);
  s->ctr = aligned_alloc(LINE, sizeof *s->ctr * N);
  s->items = calloc(N, sizeof *s->items);
  rp_status st = RP_ENOMEM;
  if (!doff || !m.pos || !m.len || !m.first || !m.covered || !m.start ||
      !m.best || !m.bestdep || !s->ctr || !s->items ||
      (st = analyse(g, &d, doff)) != RP_OK)
    goto out;
  memset(s->ctr, 0, sizeof *s->ctr * N);
  for (uint32_t i = 0; i < N; i++)
    m.pos[i] = m.len[g->lane[i]]++;
  for (uint32_t l = 1; l < L; l++)
    m.first[l] = m.first[l - 1] + m.len[l - 1];
  for (size_t k = 0; k < (size_t)L * L; k++)
    m.start[k] = INT64_MIN;
  s->nwaits = reduce(s, g, &d, doff, &m, 0);
  s->nwaits = reduce(s, g, &d, doff, &m, 0); /* the count with carry-over */
  st = RP_ENOMEM;
  if (!(s->waits = malloc(sizeof *s->waits * (s->nwaits + 1))))
    goto out;
  reduce(s, g, &d, doff, &m, 1);
  s->lanes = calloc(L, sizeof *s->lanes);
  if (!s->lanes)
    goto out;
  for (uint32_t l = 0; l < L; l++)
    if (m.len[l])
      s->lanes[s->nlanes++] =
          (st_lane){.s = s, .items = &s->items[m.first[l]], .n = m.len[l]};
  st = RP_OK;
out:
  free(doff);
  dep_free(&d);
  lane_map_free(&m);
  return st;
}

rp_status rp_bench_static_create(const rp_bench_graph *g, rp_bench_body body,
                                 const void *arg, rp_bench_static **out) {
  *out = NULL;
  for (uint32_t i = 0; i < g->nodes; i++)
    if (g->lane[i] >= g->nlanes)
      return RP_EINVAL;
  struct rp_bench_static *s = calloc(1, sizeof *s);
  if (!s)
    return RP_ENOMEM;
  s->body = body;
  s->arg = arg;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cv_go, NULL);
  pthread_cond_init(&s->cv_done, NULL);
  uint32_t want = 0;
  rp_status st = build(s, g);
  if (!st) {
    want = s->nlanes;
    s->nlanes = 0; /* counts the threads started, for destroy */
  }
  for (uint32_t l = 0; l < want && !st; l++) {
    if (pthread_create(&s->lanes[l].th, NULL, lane_main, &s->lanes[l]) != 0)
      st = RP_ENOMEM;
    else
      s->nlanes++;
  }
  if (st) {
    rp_bench_static_destroy(s);
    return st;
  }
  *out = s;
  return RP_OK;
}

uint32_t rp_bench_static_lanes(const rp_bench_static *s) {
  return s->nlanes;
}
uint32_t rp_bench_static_waits(const rp_bench_static *s) {
  return s->nwaits;
}

void rp_bench_static_destroy(rp_bench_static *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  atomic_store(&s->quit, 1);
  pthread_cond_broadcast(&s->cv_go);
  pthread_mutex_unlock(&s->lock);
  for (uint32_t l = 0; l < s->nlanes; l++)
    pthread_join(s->lanes[l].th, NULL);
  pthread_cond_destroy(&s->cv_go);
  pthread_cond_destroy(&s->cv_done);
  pthread_mutex_destroy(&s->lock);
  free(s->ctr);
  free(s->items);
  free(s->waits);
  free(s->lanes);
  free(s);
}
