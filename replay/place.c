/* replay/place.c — placement: which worker runs each unit, in which order,
 * and which cross-worker waits that implies.
 *
 * List scheduling by upward rank (HEFT without insertion): a unit's cost is
 * its hint, else its measured time, else a default; a cross-worker edge costs
 * edge_cost (200 ns by default: the cross-core hand-off on the machines we
 * measured costs 65-330 ns, an empty task 2 ns). Each unplaced unit goes to
 * the worker where it finishes earliest, so a chain stays on one worker, a
 * layer of 1 us tasks spreads and a layer of empty tasks stays together. */
#include "lower.h"

#include <string.h>

#define DEFAULT_COST_NS 1000 /* unknown cost before measurement: 1 us */

static uint64_t unit_cost_raw(const rp_exec *ex, const rp_unit *u,
                              int use_measured) {
  if (use_measured && u->measure && ex->measure_to > ex->measure_from &&
      u->measured_ns != UINT64_MAX)
    return (u->measured_ns > ex->clock_ns ? u->measured_ns - ex->clock_ns : 0) +
           1;
  return u->cost_ns ? u->cost_ns : DEFAULT_COST_NS;
}

/* Costs count up to RP_PLACE_COST_MAX (reprise.h); the finish times of a
 * schedule add them up in 64 bits, saturating (sat_add). */
static uint64_t unit_cost(const rp_exec *ex, const rp_unit *u,
                          int use_measured) {
  uint64_t c = unit_cost_raw(ex, u, use_measured);
  return c < RP_PLACE_COST_MAX ? c : RP_PLACE_COST_MAX;
}

/* Finish times saturate at TIME_MAX instead of wrapping (2^24 units of
 * RP_PLACE_COST_MAX, each behind an edge of as much, pass 2^64): a wrapped
 * time would make the latest lane look the earliest. UINT64_MAX itself
 * marks an unused lane (eft). */
#define TIME_MAX (UINT64_MAX - 1)

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a >= TIME_MAX || b >= TIME_MAX - a ? TIME_MAX : a + b;
}

typedef struct sched_item {
  double rank;
  uint32_t topo; /* index in the topological order */
  uint32_t unit;
} sched_item;

static int by_rank(const void *a, const void *b) {
  const sched_item *x = a, *y = b;
  if (x->rank != y->rank)
    return x->rank > y->rank ? -1 : 1;
  return x->topo < y->topo ? -1 : x->topo > y->topo;
}

/* Units in list-scheduling order: decreasing upward rank. Because every
 * edge adds edge_cost (> 0) or a positive cost, a predecessor always ranks
 * above its successors, so this order is topological. */
static rp_status rank_order(rp_exec *ex, int use_measured, sched_item *it) {
  uint32_t n = ex->nunits;
  double *rank = rp__calloc(n, sizeof *rank);
  if (!rank)
    return rp__err(RP_ENOMEM, "placement: out of memory");
  double e = (double)ex->edge_cost;
  for (uint32_t k = n; k-- > 0;) {
    uint32_t u = ex->order[k];
    rank[u] += (double)unit_cost(ex, &ex->units[u], use_measured) + 1e-3;
    const rp_unit *uu = &ex->units[u];
    for (uint32_t j = 0; j < uu->npred; j++) {
      uint32_t p = ex->preds[uu->pred_off + j];
      double via = e + rank[u];
      if (via > rank[p])
        rank[p] = via;
    }
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t u = ex->order[k];
    it[k] = (sched_item){rank[u], k, u};
  }
  free(rank);
  qsort(it, n, sizeof *it, by_rank);
  return RP_OK;
}

/* Earliest finish of unit u on lane w. Starting a lane that has no work
 * yet costs one hand-off (the replay reaching another worker), so a handful
 * of tiny independent units stays on one worker. avail[w] == UINT64_MAX
 * marks an unused lane. */
static uint64_t eft(const rp_exec *ex, const rp_unit *u, uint32_t w,
                    const uint64_t *avail, const uint64_t *finish,
                    uint64_t cost, int any_used) {
  uint64_t start = avail[w] != UINT64_MAX ? avail[w]
                   : any_used             ? ex->edge_cost
                                          : 0;
  for (uint32_t j = 0; j < u->npred; j++) {
    uint32_t p = ex->preds[u->pred_off + j];
    uint64_t ready =
        sat_add(finish[p], ex->units[p].lane != w ? ex->edge_cost : 0);
    if (ready > start)
      start = ready;
  }
  return sat_add(start, cost);
}

/* max_lanes limits the lanes unpinned units may use (1: keep them all on
 * lane 0, the "no parallelism" candidate). */
static rp_status list_schedule(rp_exec *ex, int use_measured,
                               uint32_t max_lanes, uint32_t *seq) {
  uint32_t n = ex->nunits, L = ex->nlanes;
  sched_item *it = malloc(sizeof *it * (n ? n : 1));
  uint64_t *avail = malloc(sizeof *avail * (L ? L : 1));
  uint64_t *finish = rp__calloc(n, sizeof *finish);
  rp_status st = RP_OK;
  if (!it || !avail || !finish) {
    st = rp__err(RP_ENOMEM, "placement: out of memory");
    goto out;
  }
  for (uint32_t w = 0; w < L; w++)
    avail[w] = UINT64_MAX;
  if ((st = rank_order(ex, use_measured, it)) != RP_OK)
    goto out;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t u = it[k].unit;
    rp_unit *uu = &ex->units[u];
    uint64_t c = unit_cost(ex, uu, use_measured);
    uint32_t best = uu->pinned;
    if (best == RP_PROC_ANY) {
      uint64_t best_t = UINT64_MAX;
      /* unpinned units run on CPU workers only (lanes [0, ncpu)) */
      for (uint32_t w = 0; w < ex->ncpu && w < max_lanes; w++) {
        uint64_t t = eft(ex, uu, w, avail, finish, c, k > 0);
        if (t < best_t || best == RP_PROC_ANY) {
          best_t = t;
          best = w;
        }
      }
    }
    uu->lane = best;
    finish[u] = eft(ex, uu, best, avail, finish, c, k > 0);
    avail[best] = finish[u];
    seq[k] = u;
  }
out:
  free(it);
  free(avail);
  free(finish);
  return st;
}

/* The global order S': list-scheduling order with the units that do not
 * depend on a precondition port moved first (a set closed under
 * predecessors, so S' stays topological). Every lane is a subsequence of
 * S', which is what makes the cross-lane waits deadlock-free. */
typedef struct key_item {
  uint32_t key, k;
} key_item;

static int by_key(const void *a, const void *b) {
  const key_item *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->k < y->k ? -1 : x->k > y->k;
}

/* With GPU units: S' is seq stably sorted by the lowering's keys (which
 * hold the port bit too and never decrease along an edge, so S' stays
 * topological): each GPU lane then lists its segments one after another,
 * and the launchers come in launch order (replay/lower.h). */
static rp_status key_first(rp_exec *ex, const uint32_t *seq) {
  uint32_t n = ex->nunits;
  key_item *it = malloc(sizeof *it * (n ? n : 1));
  if (!it)
    return rp__err(RP_ENOMEM, "placement: out of memory");
  for (uint32_t k = 0; k < n; k++)
    it[k] = (key_item){ex->unit_key[seq[k]], k};
  qsort(it, n, sizeof *it, by_key);
  for (uint32_t k = 0; k < n; k++)
    ex->order[k] = seq[it[k].k];
  free(it);
  return RP_OK;
}

static rp_status port_first(rp_exec *ex, const uint32_t *seq) {
  uint32_t n = ex->nunits;
  if (ex->unit_key)
    return key_first(ex, seq);
  unsigned char *dep = rp__calloc(n, 1);
  if (!dep)
    return rp__err(RP_ENOMEM, "placement: out of memory");
  for (uint32_t k = 0; k < n; k++) {
    uint32_t u = seq[k];
    const rp_unit *uu = &ex->units[u];
    dep[u] = uu->nport > 0;
    for (uint32_t j = 0; j < uu->npred && !dep[u]; j++)
      dep[u] = dep[ex->preds[uu->pred_off + j]];
  }
  uint32_t o = 0;
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t k = 0; k < n; k++)
      if (dep[seq[k]] == pass)
        ex->order[o++] = seq[k];
  free(dep);
  return RP_OK;
}

/* build_waits' scratch, allocated (with room for every wait) before the
 * placement changes anything: see rp__place_finalize. */
typedef struct waits_scratch {
  uint32_t *kn, *need, *wrap_need, *last, *wrap_known;
  uint32_t most; /* the most waits any placement can need */
} waits_scratch;

static void waits_scratch_free(waits_scratch *w) {
  free(w->kn);
  free(w->need);
  free(w->wrap_need);
  free(w->last);
  free(w->wrap_known);
}

/* The scratch, and ex->waits grown to the most waits any placement can
 * need: a unit waits at most once per other lane for this replay and once
 * per other lane for the previous one, and at most once per predecessor
 * or wrap-around source. */
static rp_status waits_prepare(rp_exec *ex, waits_scratch *w) {
  uint32_t n = ex->nunits, L = ex->nlanes;
  size_t cells;
  memset(w, 0, sizeof *w);
  if (!rp__mul_ok(n, L, &cells) || cells > (64u << 20))
    return rp__err(RP_ERANGE, "placement: %u units x %u lanes is too large", n,
                   L);
  uint64_t most = 0;
  for (uint32_t u = 0; u < n; u++) {
    uint32_t nw = ex->wrap_off[u + 1] - ex->wrap_off[u];
    most += ex->units[u].npred < L ? ex->units[u].npred : L;
    most += nw < L ? nw : L;
  }
  if (most > UINT32_MAX)
    return rp__err(RP_ERANGE, "placement: more than %u cross-lane waits",
                   UINT32_MAX);
  w->kn = rp__calloc(cells ? cells : 1, sizeof *w->kn);
  w->need = rp__calloc(L, sizeof *w->need);
  w->wrap_need = rp__calloc(L, sizeof *w->wrap_need);
  w->last = rp__calloc(L, sizeof *w->last); /* last unit per lane */
  w->wrap_known = rp__calloc(L * (size_t)L, sizeof *w->wrap_known);
  if (!w->kn || !w->need || !w->wrap_need || !w->last || !w->wrap_known ||
      !rp__grow((void **)&ex->waits, &ex->waits_cap, most ? (uint32_t)most : 1,
                sizeof *ex->waits)) {
    waits_scratch_free(w);
    return rp__err(RP_ENOMEM, "placement: out of memory");
  }
  w->most = (uint32_t)most;
  return RP_OK;
}

/* Within the room waits_prepare made. */
static void add_wait(rp_exec *ex, rp_wait w) {
  ex->waits[ex->nwaits++] = w;
}

/* Lane positions and, with vector clocks, the minimal cross-lane waits:
 * kn[u][L] = units of lane L known complete once u completed. Cannot
 * fail: waits_prepare allocated everything. */
static void build_waits(rp_exec *ex, waits_scratch *ws) {
  const uint32_t *wrap_off = ex->wrap_off, *wrap_src = ex->wrap_src;
  uint32_t n = ex->nunits, L = ex->nlanes;
  uint32_t *kn = ws->kn, *need = ws->need, *wrap_need = ws->wrap_need,
           *last = ws->last, *wrap_known = ws->wrap_known;
  for (uint32_t w = 0; w < L; w++)
    last[w] = UINT32_MAX;
  ex->nwaits = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t u = ex->order[k];
    rp_unit *uu = &ex->units[u];
    uint32_t me = uu->lane;
    uint32_t *K = &kn[(size_t)u * L];
    if (last[me] != UINT32_MAX)
      memcpy(K, &kn[(size_t)last[me] * L], sizeof *K * L);
    memset(need, 0, sizeof *need * L);
    for (uint32_t j = 0; j < uu->npred; j++) {
      const rp_unit *p = &ex->units[ex->preds[uu->pred_off + j]];
      if (p->lane != me && p->pos + 1 > need[p->lane])
        need[p->lane] = p->pos + 1;
    }
    uu->wait_off = ex->nwaits;
    for (uint32_t l = 0; l < L; l++) {
      if (!need[l] || K[l] >= need[l])
        continue;
      /* implied by another candidate's knowledge? */
      int implied = 0;
      for (uint32_t l2 = 0; l2 < L && !implied; l2++) {
        if (l2 == l || !need[l2] || K[l2] >= need[l2])
          continue;
        uint32_t src = ex->lanes[l2].units[need[l2] - 1];
        implied = kn[(size_t)src * L + l] >= need[l];
      }
      if (!implied)
        add_wait(ex, (rp_wait){l, need[l], 0});
    }
    /* fold the knowledge of every needed producer unit */
    for (uint32_t l = 0; l < L; l++)
      if (need[l] && K[l] < need[l]) {
        const uint32_t *S = &kn[(size_t)ex->lanes[l].units[need[l] - 1] * L];
        for (uint32_t x = 0; x < L; x++)
          if (S[x] > K[x])
            K[x] = S[x];
      }
    /* wrap-around waits: on the previous replay's conflicting units,
     * unless this lane already knows the producer lane reached the current
     * replay (which implies all of the previous one) */
    memset(wrap_need, 0, sizeof *wrap_need * L);
    for (uint32_t j = wrap_off[u]; j < wrap_off[u + 1]; j++) {
      const rp_unit *p = &ex->units[wrap_src[j]];
      if (p->lane != me && p->pos + 1 > wrap_need[p->lane])
        wrap_need[p->lane] = p->pos + 1;
    }
    for (uint32_t l = 0; l < L; l++) {
      uint32_t *wk = &wrap_known[(size_t)me * L + l];
      if (!wrap_need[l] || K[l] > 0 || *wk >= wrap_need[l])
        continue;
      add_wait(ex, (rp_wait){l, wrap_need[l], 1});
      *wk = wrap_need[l];
    }
    uu->nwait = ex->nwaits - uu->wait_off;
    K[me] = uu->pos + 1;
    last[me] = u;
  }
  /* publish after every unit somebody waits for */
  for (uint32_t i = 0; i < ex->nwaits; i++) {
    rp_wait w = ex->waits[i];
    ex->units[ex->lanes[w.lane].units[w.pos - 1]].publish = 1;
  }
}

/* Wrap-around dependencies (replay r+1 on replay r), from the accesses:
 * analyse the op sequence twice; deps of the second pass on the first are
 * the cross-replay edges. Expanded to units. They depend on the accesses
 * only, not on the placement: computed once at instantiate, and every
 * placement (build_waits) turns them into waits on its own lanes. */
rp_status rp__place_wrap_deps(rp_exec *ex) {
  const rp_graph *g = ex->g;
  rp_analysis a;
  rp__analysis_init(&a, (rp_dep_hooks){0});
  rp_dep_set *per_op = rp__calloc(g->nops, sizeof *per_op);
  rp_status st = per_op ? RP_OK : rp__err(RP_ENOMEM, "out of memory");
  uint32_t *topo_ops = malloc(sizeof *topo_ops * (g->nops ? g->nops : 1));
  if (!topo_ops && !st)
    st = rp__err(RP_ENOMEM, "out of memory");
  if (!st)
    st = rp__graph_topo(g, topo_ops);
  for (int pass = 0; pass < 2 && !st; pass++)
    for (uint32_t k = 0; k < g->nops && !st; k++) {
      uint32_t op = topo_ops[k];
      rp_access acc[2];
      const rp_access *ap;
      uint32_t na = rp__op_accesses(&g->ops[op], acc, &ap);
      if (pass == 1) {
        rp_dep_set d = {0};
        st = rp__analysis_deps(&a, ap, na, g->ops[op].kind != RP_OP_TASK, &d);
        for (uint32_t i = 0; i < d.n && !st; i++)
          if (d.v[i].id < (1ull << 32)) /* a first-pass op */
            st = rp__depset_add(&per_op[op], d.v[i]);
        rp__depset_free(&d);
      }
      /* tokens: the op id, with the pass in the high half */
      if (!st)
        st = rp__analysis_commit(
            &a, ap, na, g->ops[op].kind != RP_OP_TASK,
            (rp_dep_token){(uint64_t)pass << 32 | op, 0, 0});
    }
  rp__analysis_fini(&a);
  free(topo_ops);
  /* expand to units: every unit of op waits for every unit of each dep */
  uint64_t total = 0;
  for (uint32_t u = 0; u < ex->nunits && !st; u++) {
    if (ex->units[u].kind == RP_UNIT_LAUNCH)
      continue; /* no op: a launcher has no accesses */
    const rp_dep_set *d = &per_op[ex->units[u].op];
    for (uint32_t i = 0; i < d->n; i++) {
      uint32_t o = (uint32_t)d->v[i].id;
      total += ex->op_first[o + 1] - ex->op_first[o];
    }
  }
  if (!st && total > UINT32_MAX)
    st = rp__err(RP_ERANGE, "instantiate: %llu wrap-around unit edges",
                 (unsigned long long)total);
  if (!st) {
    ex->wrap_off = rp__calloc(ex->nunits + 1, sizeof *ex->wrap_off);
    ex->wrap_src = rp__calloc(total ? total : 1, sizeof *ex->wrap_src);
    if (!ex->wrap_off || !ex->wrap_src)
      st = rp__err(RP_ENOMEM, "out of memory");
  }
  uint32_t k = 0;
  for (uint32_t u = 0; u < ex->nunits && !st; u++) {
    ex->wrap_off[u] = k;
    if (ex->units[u].kind == RP_UNIT_LAUNCH)
      continue;
    const rp_dep_set *d = &per_op[ex->units[u].op];
    for (uint32_t i = 0; i < d->n; i++) {
      uint32_t o = (uint32_t)d->v[i].id;
      for (uint32_t v = ex->op_first[o]; v < ex->op_first[o + 1]; v++)
        ex->wrap_src[k++] = v;
    }
  }
  if (!st)
    ex->wrap_off[ex->nunits] = k;
  for (uint32_t i = 0; per_op && i < g->nops; i++)
    rp__depset_free(&per_op[i]);
  free(per_op);
  return st;
}

rp_status rp__place_plan(rp_exec *ex, int use_measured, uint32_t max_lanes,
                         uint32_t *seq) {
  return list_schedule(ex, use_measured, max_lanes, seq);
}

rp_status rp__place(rp_exec *ex, int use_measured) {
  uint32_t n = ex->nunits;
  uint32_t *seq = malloc(sizeof *seq * (n ? n : 1));
  rp_status st = seq ? RP_OK : rp__err(RP_ENOMEM, "placement: out of memory");
  if (!st)
    st = list_schedule(ex, use_measured, ex->nlanes, seq);
  if (!st)
    st = rp__place_finalize(ex, seq);
  free(seq);
  return st;
}

/* The lanes' hot records, and each unit's context bound to its lane. */
static void fill_hot(rp_exec *ex) {
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    rp_lane *l = &ex->lanes[w];
    for (uint32_t i = 0; i < l->len; i++) {
      rp_unit *u = &ex->units[l->units[i]];
      u->ctx.proc = w;
      u->ctx.replay_at = &l->cur_replay;
      l->hot[i] = (rp_hot){
          .fn = u->fn,
          .ctx = &u->ctx,
          .unit = l->units[i],
          .slow = u->kind != RP_UNIT_TASK || u->nport || u->npost ||
                  u->ninterp || u->shards_src != SIZE_MAX || u->guard != NULL,
          .publish = u->publish,
          .wait_off = u->wait_off,
          .nwait = u->nwait,
      };
    }
  }
}

/* Everything that can fail (the scratch, the room for the waits and for
 * the lowering's per-placement data, the order) comes before the first
 * change: a failure leaves the placement in effect whole, so rp_exec_tune
 * can keep it. (With GPU units the lowering follows, rp__lower_placed.) */
rp_status rp__place_finalize(rp_exec *ex, const uint32_t *seq) {
  uint32_t n = ex->nunits;
  waits_scratch ws;
  rp_status st = waits_prepare(ex, &ws);
  if (st)
    return st;
  if ((ex->lw && (st = rp__lower_reserve(ex, ws.most)) != RP_OK) ||
      (st = port_first(ex, seq)) != RP_OK) {
    waits_scratch_free(&ws);
    return st;
  }
  memset(ex->mask, 0, sizeof ex->mask);
  ex->active = 0;
  for (uint32_t w = 0; w < ex->nlanes; w++)
    ex->lanes[w].len = 0;
  for (uint32_t k = 0; k < n; k++) {
    rp_unit *u = &ex->units[ex->order[k]];
    rp_lane *l = &ex->lanes[u->lane];
    u->pos = l->len;
    u->publish = 0;
    l->units[l->len++] = ex->order[k];
  }
  /* Every lane with units is a completion source; only CPU lanes are
   * run by workers (a GPU lane completes from its host callbacks). */
  for (uint32_t w = 0; w < ex->nlanes; w++)
    if (ex->lanes[w].len) {
      if (w < ex->ncpu)
        ex->mask[w / 64] |= 1ull << (w % 64);
      ex->active++;
    }
  build_waits(ex, &ws);
  waits_scratch_free(&ws);
  fill_hot(ex);
  if (ex->lw)
    rp__lower_placed(ex);
  return RP_OK;
}
