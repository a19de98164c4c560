/* replay/scheduler.c — the replay scheduler.
 *
 * rp_replay arms one replay slot and publishes (exec, replay) in the
 * runtime's submission ring; every CPU worker reads the ring in the same
 * order and runs its lane of each exec it has units in. Inside a lane, units
 * run back to back; a cross-lane wait acquire-loads the producer lane's
 * progress word, spinning a bounded while before sleeping on it (futex).
 * Each lane decrements the replay's single completion counter once, when its
 * list is done; the last decrement triggers the replay's done event.
 *
 * The common path allocates nothing and takes no lock, from the first
 * replay on: slots, events (the lock-free free list holds the exec's
 * replay events, reserved at instantiate), args, status arrays, lanes and
 * waits all exist before the first replay. rp_replay never measures or
 * re-places (rp_exec_tune, tune.c, does, when the caller asks) and never
 * calls into capture/: the wrap-around waits were derived at
 * instantiate. */
#include "lower.h"

#include <sched.h>
#include <string.h>

/* ---- layer state ---- */

static void replay_dtor(rp_runtime *rt, void *arg) {
  rp_replay_state *rs = arg;
  if (rs->lower)
    rp__lower_rt_free(rt, rs->lower);
  pthread_mutex_destroy(&rs->exec_lock);
  free(rs->cursors);
  free(rs);
}

/* rp_instance_free / rp_instance_realloc (engine hook, see engine.h): an
 * exec with replays in flight that uses the instance makes the call fail
 * with RP_EBUSY. Seq_cst loads pair with rp_replay's publication of
 * issued_pub and with the engine's transient generation store. */
/* Replays of ex in flight. The oldest one's completion may be under way
 * (zeroed == 2: finish() runs, done_seq moves when it returns): once its
 * done event has triggered it no longer counts (a caller that waited on
 * that event must not be told it is in flight); before, it does. Never
 * waits: the caller holds locks that finish()'s done callbacks may take,
 * or is such a callback itself. */
static uint32_t inflight_settled(rp_exec *ex) {
  uint64_t issued = atomic_load(&ex->issued_pub);
  uint32_t n = (uint32_t)issued - atomic_load(&ex->done_seq);
  if (!n)
    return 0;
  const rp_slot *s = &ex->slots[(issued - n) % ex->max_inflight];
  /* a slot reused meanwhile holds a new replay's pending event: counted */
  if (atomic_load(&s->zeroed) == 2 &&
      rp__event_peek_live(ex->rt, (rp_event){atomic_load(&s->done_id)}) !=
          RP_EAGAIN)
    return n - 1;
  return n;
}

static int exec_uses(const rp_exec *ex, uint32_t slot, uint32_t gen) {
  for (uint32_t i = 0; i < ex->ninsts; i++)
    if (ex->insts[i].slot == slot && ex->insts[i].info.generation == gen)
      return 1;
  return 0;
}

static rp_status inst_busy(rp_runtime *rt, void *arg, rp_inst inst,
                           const char *what) {
  RP_UNUSED(rt);
  rp_replay_state *rs = arg;
  uint32_t slot = rp__inst_slot(inst), gen = rp__inst_gen(inst);
  rp_status st = RP_OK;
  pthread_mutex_lock(&rs->exec_lock);
  for (rp_exec *ex = rs->execs; ex && !st; ex = ex->reg_next) {
    if (!exec_uses(ex, slot, gen))
      continue;
    uint32_t inflight = inflight_settled(ex);
    if (inflight)
      st = rp__err(RP_EBUSY,
                   "%s: instance %#llx is used by exec %p, "
                   "which has %u replay(s) in flight; wait for their done "
                   "events first (nothing was changed)",
                   what, (unsigned long long)inst.id, (void *)ex, inflight);
  }
  pthread_mutex_unlock(&rs->exec_lock);
  return st;
}

void rp__exec_register(rp_exec *ex) {
  rp_replay_state *rs = ex->rs;
  pthread_mutex_lock(&rs->exec_lock);
  ex->reg_prev = NULL;
  ex->reg_next = rs->execs;
  if (rs->execs)
    rs->execs->reg_prev = ex;
  rs->execs = ex;
  ex->registered = 1;
  pthread_mutex_unlock(&rs->exec_lock);
}

void rp__exec_unregister(rp_exec *ex) {
  rp_replay_state *rs = ex->rs;
  if (!rs || !ex->registered)
    return;
  pthread_mutex_lock(&rs->exec_lock);
  if (ex->reg_prev)
    ex->reg_prev->reg_next = ex->reg_next;
  else
    rs->execs = ex->reg_next;
  if (ex->reg_next)
    ex->reg_next->reg_prev = ex->reg_prev;
  ex->registered = 0;
  pthread_mutex_unlock(&rs->exec_lock);
}

/* Under the runtime's layer lock (taking inst_lock inside it). */
static void install_hooks(rp_runtime *rt, void *rs) {
  rp__set_poller(rt, rp__replay_poll, rs);
  rp__set_inst_busy_hook(rt, inst_busy, rs);
}

rp_replay_state *rp__replay_state(rp_runtime *rt) {
  rp_replay_state *rs = rp__layer_get(rt, RP_LAYER_REPLAY);
  if (rs)
    return rs;
  rs = aligned_alloc(RP_CACHELINE, sizeof *rs);
  if (!rs)
    return NULL;
  memset(rs, 0, sizeof *rs);
  rs->rt = rt;
  rs->nworkers = rp__cpu_workers(rt);
  rs->cursors =
      aligned_alloc(RP_CACHELINE, sizeof(rp_cursor) * (rs->nworkers + 1));
  if (!rs->cursors) {
    free(rs);
    return NULL;
  }
  memset(rs->cursors, 0, sizeof(rp_cursor) * (rs->nworkers + 1));
  pthread_mutex_init(&rs->exec_lock, NULL);
  /* the hooks are set before another thread can replay through rs: an
   * instance free then always sees the replays in flight */
  rp_replay_state *won =
      rp__layer_set(rt, RP_LAYER_REPLAY, rs, replay_dtor, NULL, install_hooks);
  if (won != rs)
    replay_dtor(rt, rs);
  return won;
}

/* ---- waiting inside a lane ---- */

static void wait_list(rp_exec *ex, uint32_t off, uint32_t n, uint64_t rel,
                      rp_lane_stats *ls) {
  for (uint32_t i = 0; i < n; i++) {
    const rp_wait *w = &ex->waits[off + i];
    if (w->prev > rel)
      continue; /* no previous replay in this placement */
    rp_lane *p = &ex->lanes[w->lane];
    rp__lane_wait_progress(p, (uint32_t)(rel - w->prev) * p->len + w->pos, ls);
  }
}

/* ---- failures ---- */

/* Marks c gated at event e, replay r's precondition p of ex: what it is
 * first, under gate_seq (see rp_cursor), then the event. */
static void cursor_gate_set(rp_cursor *c, const rp_exec *ex, uint64_t r,
                            uint32_t p, rp_event e) {
  union {
    char c[RP_GATE_NAME_WORDS * 8];
    uint64_t w[RP_GATE_NAME_WORDS];
  } name;
  memset(&name, 0, sizeof name);
  const char *n = ex->g->pre[p].name;
  memcpy(name.c, n, strnlen(n, sizeof name.c - 1));
  atomic_fetch_add(&c->gate_seq, 1); /* odd: being written */
  atomic_store(&c->gate_port, p);
  atomic_store(&c->gate_r, r);
  atomic_store(&c->gate_ex, (uintptr_t)ex);
  for (int i = 0; i < RP_GATE_NAME_WORDS; i++)
    atomic_store(&c->gate_name[i], name.w[i]);
  atomic_store(&c->gate, e.id);
  atomic_fetch_add(&c->gate_seq, 1); /* even: one gate's */
}

rp_status rp__gate_block(rp_exec *ex, uint32_t lane, const rp_slot *s,
                         uint32_t p) {
  rp_event e = s->pre[p];
  rp_status st = rp__event_peek(ex->rt, e);
  if (st != RP_EAGAIN)
    return st; /* the common case: triggered before the lane got here */
  rp_cursor *c =
      ex->rs && lane < ex->rs->nworkers ? &ex->rs->cursors[lane] : NULL;
  if (c)
    cursor_gate_set(c, ex, s->r, p, e);
  st = rp__event_block_serving(ex->rt, e);
  if (c)
    atomic_store(&c->gate, 0);
  return st;
}

static rp_status wait_ports(rp_exec *ex, uint32_t lane, const rp_unit *u,
                            rp_slot *s, const char **why) {
  for (uint32_t i = 0; i < u->nport; i++) {
    uint32_t p = ex->ports[u->port_off + i];
    rp_status st = rp__gate_block(ex, lane, s, p);
    if (st) {
      *why = rp__port_why(ex, s, p);
      return st;
    }
  }
  return RP_OK;
}

/* ---- running units ---- */

/* A task function's return, as the replay records it: RP_ECONTRACT when
 * it launched or waited inside the replay (*violation, the refused call's
 * name, moved to *call), RP_ETASK for a positive (user) code or one that
 * is no rp_status. */
static rp_status task_status(rp_status st, const char **violation,
                             const char **call) {
  if (RP_UNLIKELY(*violation != NULL)) {
    *call = *violation;
    *violation = NULL;
    return RP_ECONTRACT;
  }
  return rp__task_status(st);
}

/* Why a task failed: the contract's words when it made a refused call
 * (call: its name), or what the task said itself (rp_error_set on this
 * worker thread, as any caller of the library reports, an RP_ECONTRACT it
 * returned of its own included; "" when it said nothing: the detail is
 * cleared before each task, so nothing an earlier task, eager op or
 * callback on this worker left there is taken for its words), or for a
 * return that is no rp_status (raw, mapped to RP_ETASK) without words,
 * that value. */
static const char *task_why(rp_status st, rp_status raw, const char *call) {
  if (call)
    return rp__contract_why(call);
  const char *bad = rp__task_returned_why(st, raw);
  return bad ? bad : rp_error_detail();
}

/* After a failure's detail was copied into the replay: the worker's own
 * detail is cleared, so a later task that fails without a word of its own
 * does not inherit this one. */
static void why_consumed(void) {
  rp_error_set(RP_OK, NULL);
}

/* The fast path's failure, out of its loop: inlined there, it grew the
 * loop and cost the chain workload 0.9 ns a task (1.5 -> 2.4). raw: what
 * the task returned; *violation: it broke its contract. */
__attribute__((noinline, cold)) static void
fast_failed(rp_exec *ex, rp_slot *s, uint32_t unit, rp_status raw,
            const char **violation) {
  const char *call = NULL;
  rp_status st = task_status(raw, violation, &call);
  rp__unit_failed(ex, s, unit, st, task_why(st, raw, call));
  why_consumed();
}

/* *overran: the task wrote past its workspace slice (the guard bytes
 * after it changed): RP_ERANGE whatever the task returned. *raw: what the
 * task function returned. */
static rp_status run_task(rp_unit *u, rp_slot *s, int *skip, int *overran,
                          rp_status *raw, const char **call) {
  uint32_t shards = rp__unit_shards(u, s);
  if (!shards) {
    *skip = 1; /* this replay runs fewer shards: not a failure */
    return RP_OK;
  }
  for (uint32_t k = 0; k < u->ninterp; k++) {
    const rp_interp *ip = &u->interps[k];
    if (ip->dst_offset != RP_INTERP_SHARDS)
      memcpy(u->args + ip->dst_offset, s->args + ip->src_offset, ip->bytes);
  }
  u->ctx.shards = shards;
  rp_error_set(RP_OK, NULL); /* a failure's words are the task's own */
  *raw = u->fn(&u->ctx);
  rp_status st = task_status(*raw, rp__tl_replay_violation, call);
  if (RP_UNLIKELY(u->guard != NULL)) {
    for (uint32_t i = 0; i < 64; i++)
      if (u->guard[i] != 0xa5) {
        memset(u->guard, 0xa5, 64);
        *overran = 1;
        return RP_ERANGE;
      }
  }
  return st;
}

static rp_status run_unit(rp_unit *u, rp_slot *s, int *skip, const char **why) {
  if (u->kind == RP_UNIT_EXT) {
    /* communication (dist/): planned at instantiate, run here */
    rp__nvtx_push(u->name);
    rp_status st = u->ext->run(u->ext_state, s->r, why);
    rp__nvtx_pop();
    return st;
  }
  if (u->kind == RP_UNIT_COPY) {
    rp__nvtx_push(rp__unit_trace_name(u));
    rp_status st = rp_xfer_check(u->xd);
    if (!st) {
      rp_xfer_reset(u->xd);
      st = rp_xfer_run_cpu(u->xd);
    }
    rp__nvtx_pop();
    if (st)
      *why = rp_error_detail();
    return st;
  }
  rp__nvtx_push(u->name);
  int overran = 0;
  rp_status raw = RP_OK;
  const char *call = NULL;
  rp_status st = run_task(u, s, skip, &overran, &raw, &call);
  rp__nvtx_pop();
  if (overran) /* a task's own RP_ERANGE keeps its own detail */
    *why = "task overran its workspace slice (guard bytes changed)";
  else if (st)
    *why = task_why(st, raw, call);
  return st;
}

/* ---- completion ---- */

static void store_stats(rp_lane *l, const rp_lane_stats *ls) {
  /* owner-only writers: load + store, relaxed (readers may lag) */
#define ADD_(f, v)                                                             \
  atomic_store_explicit(                                                       \
      &l->f, atomic_load_explicit(&l->f, memory_order_relaxed) + (v),          \
      memory_order_relaxed)
  ADD_(ops_run, ls->run);
  ADD_(ops_skipped, ls->skipped);
  ADD_(handoffs, ls->handoffs);
  ADD_(wakeups, ls->wakeups);
#undef ADD_
}

/* The general path for one unit: waits, preconditions, poison, copies,
 * interpolations, measurement, postconditions, publication. */
static void run_general(rp_exec *ex, rp_lane *l, uint32_t i, rp_slot *s,
                        uint64_t rel, rp_lane_stats *ls) {
  uint32_t ui = l->units[i];
  rp_unit *u = &ex->units[ui];
  int traced = s->traced;
  /* a launcher also waits inside rp__lower_launch (its members' waits) */
  uint64_t t_wait = traced && (u->nwait | u->nport || u->kind == RP_UNIT_LAUNCH)
                        ? rp__now_ns()
                        : 0;
  if (u->nwait)
    wait_list(ex, u->wait_off, u->nwait, rel, ls);
  if (u->kind == RP_UNIT_LAUNCH) { /* a GPU segment: it decides itself */
    uint64_t t_issue = 0;
    rp_status lst = rp__lower_launch(ex, ui, s, rel, &t_issue);
    if (RP_UNLIKELY(traced)) /* host side; trace.c adds the device times */
      rp__trace_unit(ex, s, ui, (uint32_t)(l - ex->lanes), t_wait, t_issue, lst,
                     0);
    if (u->publish)
      rp__lane_publish(l, (uint32_t)rel * l->len + i + 1);
    return;
  }
  rp_status st = RP_OK;
  const char *why = NULL;
  int skip = 0;
  if (RP_UNLIKELY(s->stale)) {
    /* nothing runs, yet the replay stays ordered after its preconditions
     * (its done event implies theirs), as a GPU segment's launcher waits
     * at its ports before skipping a stale replay */
    const char *ignored = NULL;
    if (u->nport)
      (void)wait_ports(ex, (uint32_t)(l - ex->lanes), u, s, &ignored);
    st = RP_ESTALE, skip = 2;
  } else if (u->nport && (st = wait_ports(ex, (uint32_t)(l - ex->lanes), u, s,
                                          &why)) != RP_OK)
    ;
  else if (RP_UNLIKELY(
               atomic_load_explicit(&s->any_fail, memory_order_relaxed)) &&
           (st = rp__pred_status(ex, u, s)) != RP_OK)
    why = "upstream op failed";
  uint64_t t0 = 0;
  if (st == RP_OK) {
    t0 = s->measure || traced ? rp__now_ns() : 0;
    st = run_unit(u, s, &skip, &why);
    if (s->measure) {
      uint64_t dt = rp__now_ns() - t0;
      if (dt < u->measured_ns)
        u->measured_ns = dt;
    }
    if (!skip)
      ls->run++;
  } else {
    ls->skipped++;
    /* communication that did not run: its peers' messages must not pair
     * with a later replay's (comm/exec.c) */
    if (u->kind == RP_UNIT_EXT && u->ext->skipped)
      u->ext->skipped(u->ext_state, s->r, st);
  }
  if (RP_UNLIKELY(st != RP_OK) && skip != 2) {
    rp__unit_failed(ex, s, ui, st, why);
    why_consumed();
  }
  if (RP_UNLIKELY(traced))
    rp__trace_unit(ex, s, ui, (uint32_t)(l - ex->lanes), t_wait, t0, st, skip);
  if (u->npost)
    rp__post_done(ex, u, s);
  if (u->publish)
    rp__lane_publish(l, (uint32_t)rel * l->len + i + 1);
}

static void run_lane(rp_exec *ex, uint32_t lane, uint64_t r) {
  rp_slot *s = &ex->slots[r % ex->max_inflight];
  rp_lane *l = &ex->lanes[lane];
  uint64_t rel = r - ex->epoch;
  rp_lane_stats ls = {0};
  l->cur_replay = r;
  if (RP_UNLIKELY(s->timed)) {
    uint64_t zero = 0;
    atomic_compare_exchange_strong_explicit(&s->t_start, &zero, rp__now_ns(),
                                            memory_order_relaxed,
                                            memory_order_relaxed);
  }
  /* Launches and waits from the lane's tasks flag this (contracts). */
  const char *violation = NULL;
  rp__tl_replay_violation = &violation;
  /* traced replays take the general path: the fast one stays untouched */
  int general = s->measure || s->stale || rp__nvtx_on || s->traced;
  /* While the lane runs, bring in what its replay boundary will touch:
   * the done event its completion may trigger (for writing) and the next
   * replay's slot (armed by now when replays are back to back). */
  rp__event_prefetch(ex->rt, s->done);
  __builtin_prefetch(&ex->slots[(r + 1) % ex->max_inflight], 0, 3);
  /* Nonzero while every unit takes the general path: a traced or measured
   * replay, or once this lane has seen a failure in this replay (its own,
   * or another lane's, read after a cross-lane wait: a failure is published
   * before the progress a wait sees). A unit without waits depends on
   * other lanes only through earlier units of this lane that waited, so
   * the fast path tests this local flag and never reads the slot's shared
   * line per task (other lanes write that line when they finish). */
  uint32_t block = (uint32_t)general |
                   atomic_load_explicit(&s->any_fail, memory_order_relaxed);
  /* Units taken by the general path (it counts its own runs): the fast
   * path's runs are the rest, so its loop stores nothing per task. */
  uint32_t general_units = 0;
  const rp_hot *const hot = l->hot, *const hend = hot + l->len;
  const uint32_t pub_base = (uint32_t)rel * l->len + 1;
  /* the worker's detail, cleared before each fast-path task (run_task
   * clears it on the general path) */
  char *const detail = rp__error_detail_buf();
  for (const rp_hot *h = hot; h != hend; h++) {
    /* Fast path: a plain task, after its cross-lane waits, in a replay
     * where nothing it depends on failed. */
    if (RP_LIKELY(!(h->slow | block))) {
      if (h->nwait) {
        wait_list(ex, h->wait_off, h->nwait, rel, &ls);
        block |= atomic_load_explicit(&s->any_fail, memory_order_relaxed);
      }
      if (RP_LIKELY(!block)) {
        detail[0] = 0;
        rp_status st = h->fn(h->ctx);
        if (RP_UNLIKELY(st != RP_OK || violation)) {
          fast_failed(ex, s, h->unit, st, &violation);
          block = 1;
        }
        if (h->publish)
          rp__lane_publish(l, pub_base + (uint32_t)(h - hot));
        continue;
      }
    }
    /* its waits are met: no cost */
    run_general(ex, l, (uint32_t)(h - hot), s, rel, &ls);
    general_units++;
    block |= atomic_load_explicit(&s->any_fail, memory_order_relaxed);
  }
  rp__tl_replay_violation = NULL;
  ls.run += l->len - general_units;
  store_stats(l, &ls);
  rp__slot_source_done(ex, s); /* the lane is one completion source */
}

/* Reads the worker's next ring entries: runs its lane of the first one it
 * has a lane in and returns 1, or returns 0 once the ring is read (entries
 * of execs it has no lane in are passed over). A worker that takes no part
 * in the execs being replayed reads to the ring's end, then goes idle and
 * sleeps like any other (an idle worker spinning on every submission would
 * take a core, or an SMT sibling's share of one, from a worker that runs
 * lanes); ring_reserve wakes a sleeper that holds the ring back. At most
 * PASS_MAX entries are passed over per call, so the worker's own queue is
 * not starved by a stream of other execs' replays; a call that stops
 * there returns 1 (more to read), not 0: a worker woken for its replay
 * far behind the ring would otherwise fall asleep on the way to it, and
 * nothing would wake it again. */
enum { PASS_MAX = 64 };

_Thread_local rp_cursor *rp__tl_cursor;

int rp__replay_poll(void *arg, unsigned worker) {
  rp_replay_state *rs = arg;
  rp_cursor *c = &rs->cursors[worker];
  rp__tl_cursor = c;
  uint64_t i = atomic_load_explicit(&c->next, memory_order_relaxed);
  for (uint64_t end = i + PASS_MAX; i < end; i++) {
    rp_sub *e = &rs->ring[i & (RP_RING - 1)];
    /* seq_cst: pairs with the worker's `sleeping` announcement (see
     * cpu_backend.c) and the producer's seq_cst publication */
    if (atomic_load(&e->seq) != i + 1)
      /* an entry taken (ring_take) but not yet published: read on, it is
       * published at once; a worker asleep here would miss the wake-up,
       * which goes to that entry's own workers only, and sleep through
       * the entries published behind it (a lost wake-up: a hang) */
      return i < atomic_load(&rs->tail);
    int mine = e->mask[worker / 64] >> (worker % 64) & 1;
    if (mine) {
      /* the next entry, while the lane runs (published by now when
       * replays are back to back) */
      __builtin_prefetch(&rs->ring[(i + 1) & (RP_RING - 1)], 0, 3);
      run_lane(e->ex, worker, e->r);
    }
    /* release: everything this worker did with the exec happens before a
     * destroyer sees the cursor pass the entry */
    atomic_store_explicit(&c->next, i + 1, memory_order_release);
    if (mine)
      return 1;
  }
  return 1; /* PASS_MAX passed over: read on */
}

/* ---- submission ---- */

static uint64_t min_cursor(rp_replay_state *rs) {
  uint64_t m = UINT64_MAX;
  for (uint32_t w = 0; w < rs->nworkers; w++) {
    uint64_t c =
        atomic_load_explicit(&rs->cursors[w].next, memory_order_acquire);
    if (c < m)
      m = c;
  }
  return m;
}

typedef struct gate_seen gate_seen;
static int worker_gate(const rp_replay_state *rs, uint32_t w, gate_seen *g);

/* Why ring_take did not take an entry. */
enum { TAKE_OK, TAKE_GATED, TAKE_IN_CALLBACK, TAKE_IN_TASK };

/* Takes the next ring entry (*t) for a submission, once every worker has
 * read the entry a ring before it; workers that take no part in recent
 * execs may sleep behind: they are woken to skip ahead. It never waits for
 * what only the caller can release: while the ring is full behind a worker
 * held at a precondition that has not triggered (its own, or through the
 * lanes it waits for) it takes nothing and returns TAKE_GATED, and an
 * event's callback (perhaps run by the very worker that holds the ring
 * back) gets TAKE_IN_CALLBACK, an eager task of the runtime (whose worker
 * may be that one) TAKE_IN_TASK. An entry taken must be published (submit,
 * or publish_empty). *held and *g then say which worker holds it back and
 * at which gate. */
static int ring_take(rp_replay_state *rs, uint64_t *t, int *held,
                     gate_seen *g) {
  for (;;) {
    uint64_t cur = atomic_load(&rs->tail);
    if (RP_LIKELY(cur < atomic_load(&rs->min_cache) + RP_RING)) {
      if (atomic_compare_exchange_weak(&rs->tail, &cur, cur + 1)) {
        *t = cur;
        return TAKE_OK;
      }
      continue;
    }
    uint64_t m = min_cursor(rs), old = atomic_load(&rs->min_cache);
    while (m > old && !atomic_compare_exchange_weak(&rs->min_cache, &old, m))
      ;
    if (cur < m + RP_RING)
      continue;
    for (uint32_t w = 0; w < rs->nworkers; w++)
      if (atomic_load(&rs->cursors[w].next) == m && worker_gate(rs, w, g)) {
        *held = (int)w;
        return TAKE_GATED;
      }
    if (rp__tl_in_callback)
      return TAKE_IN_CALLBACK;
    if (rp__in_task_of(rs->rt))
      return TAKE_IN_TASK;
    for (uint32_t w = 0; w < rs->nworkers; w++)
      if (atomic_load(&rs->cursors[w].next) == m)
        rp__worker_wake(rs->rt, w);
    sched_yield();
  }
}

/* A taken entry that carries no replay (the submission failed after
 * ring_take): published with no lane, so the workers pass over it. */
static void publish_empty(rp_replay_state *rs, uint64_t t) {
  rp_sub *e = &rs->ring[t & (RP_RING - 1)];
  e->ex = NULL;
  e->r = 0;
  memset(e->mask, 0, sizeof e->mask);
  atomic_store(&e->seq, t + 1);
}

/* Every quarter ring, wakes the workers that lag half a ring behind (those
 * with no lane in the execs being replayed sleep): they pass over the
 * entries while the ring still has room, so ring_reserve seldom has to
 * wait for a wake-up. */
static void nudge_laggards(rp_replay_state *rs, uint64_t t) {
  for (uint32_t w = 0; w < rs->nworkers; w++)
    if (atomic_load_explicit(&rs->cursors[w].next, memory_order_relaxed) +
            RP_RING / 2 <=
        t)
      rp__worker_wake(rs->rt, w);
}

/* Publishes replay r of ex in ring entry t (taken by ring_take). */
static void submit(rp_exec *ex, uint64_t r, uint64_t t) {
  rp_replay_state *rs = ex->rs;
  if (RP_UNLIKELY(t % (RP_RING / 4) == 0) && t)
    nudge_laggards(rs, t);
  rp_sub *e = &rs->ring[t & (RP_RING - 1)];
  e->ex = ex;
  e->r = r;
  memcpy(e->mask, ex->mask, sizeof e->mask);
  ex->last_sub = t;
  ex->slots[r % ex->max_inflight].sub = t;
  ex->submitted = 1;
  /* seq_cst: published before we look at the workers' sleeping flags */
  atomic_store(&e->seq, t + 1);
  /* the next entry, for writing: the workers read it a ring ago */
  __builtin_prefetch(&rs->ring[(t + 1) & (RP_RING - 1)], 1, 3);
  for (uint32_t w = 0; w < ex->nlanes; w++)
    if (ex->mask[w / 64] >> (w % 64) & 1)
      rp__worker_wake(ex->rt, w);
}

/* 1 when the launch lane's worker has no submission of this exec left to
 * run: a replay launched from the calling thread then cannot overtake an
 * earlier one still waiting in the ring (launches stay in replay order,
 * which the device parameter buffer relies on). */
static int launch_lane_idle(const rp_exec *ex) {
  if (!ex->submitted)
    return 1;
  const rp_cursor *c = &ex->rs->cursors[ex->lw->launch_lane];
  /* acquire: the worker's lane run happens before our own */
  return atomic_load_explicit(&c->next, memory_order_acquire) > ex->last_sub;
}

/* Runs the launch lane in the calling thread: the exec's CPU side is only
 * graph launches with nothing to wait for (rp_lower.inline_ok), so
 * rp_replay goes straight to cudaGraphLaunch without a hand-off to a
 * worker and back. */
static void launch_here(rp_exec *ex, uint64_t r) {
  ex->inline_runs++;
  int dev = rp__lower_device_save(ex);
  run_lane(ex, ex->lw->launch_lane, r);
  rp__lower_device_restore(ex, dev);
}

/* Blocks until fewer than `limit` replays are in flight. */
/* Host yield budget while waiting for a slot. The replays queued behind
 * the oldest one (one completes every interval_ns) keep the workers busy
 * while the host sleeps: when they outlast a slow wake-up (100 us), sleep
 * at once and leave the cores to the workers; when they do not, yield
 * (up to 100 us) so the next replay is submitted before the workers run
 * dry. */
static uint64_t slot_yield_budget(const rp_exec *ex, uint64_t limit) {
  uint64_t iv =
      atomic_load_explicit(&((rp_exec *)ex)->interval_ns, memory_order_relaxed);
  uint64_t queued = iv * (limit > 1 ? limit - 1 : 1);
  return queued >= 100000 ? 1000 : 100000;
}

/* The host busy-spins for a slot only while that pays: a spin that runs
 * out means the completion it waits for is far off (long replays) or
 * cannot come while it spins (the OS put the worker on the host's CPU), so
 * the next budget is halved; every SPIN_RETRY waits it starts again from
 * the runtime's full budget (rp__host_spin_ns: 0 where the host has no
 * core of its own). */
enum { SPIN_RETRY = 256 };

static void spin_adapt(rp_exec *ex, const rp_backoff *b) {
  if (b->yielded)
    ex->slot_spin_ns /= 2;
  if (++ex->slot_waits % SPIN_RETRY == 0)
    ex->slot_spin_ns = rp__host_spin_ns(ex->rt);
}

/* A precondition that a replay in flight waits for, not triggered yet: what
 * a refusal names. */
struct gate_seen {
  const void *ex; /* the exec (its address, for the words: never followed) */
  uint64_t r;     /* the replay */
  uint32_t port;  /* its precondition port */
  rp_event ev;    /* the event (the slot's reference: may go stale) */
  int user;       /* 1 an rp_event_create event, 0 one the runtime completes */
  int worker;     /* the worker held at it; -1 when not read off a worker */
  char name[RP_GATE_NAME_WORDS * 8]; /* the port's */
};

/* g's port name, ex's own. */
static void gate_name_of(const rp_exec *ex, gate_seen *g) {
  snprintf(g->name, sizeof g->name, "%s", ex->g->pre[g->port].name);
}

/* 1 when a replay in flight still waits for a precondition (an event the
 * caller may trigger only after issuing more replays); *g (may be NULL)
 * then names the first such replay and port. oldest_only: only the oldest
 * replay in flight, the one whose completion frees a slot, is looked at (a
 * later one gated behind it does not keep it from completing). A replay
 * that is completing drops its references to its preconditions before
 * done_seq moves, so a handle read here may be stale: that replay is past
 * its gates (not gated), whatever event now uses the slot. An event read
 * pending is read again after its kind: one that completed meanwhile does
 * not gate. */
static int inflight_gated(rp_exec *ex, int oldest_only, gate_seen *g) {
  uint32_t done = atomic_load_explicit(&ex->done_seq, memory_order_acquire);
  uint64_t from = ex->issued - ((uint32_t)ex->issued - done);
  uint64_t to = oldest_only && from < ex->issued ? from + 1 : ex->issued;
  for (uint64_t r = from; r < to; r++) {
    const rp_slot *s = &ex->slots[r % ex->max_inflight];
    for (uint32_t i = 0; i < ex->npre; i++) {
      rp_event e = s->pre[i];
      if (rp__event_peek_live(ex->rt, e) != RP_EAGAIN)
        continue;
      int user = rp__event_is_user(ex->rt, e);
      if (user < 0 || rp__event_peek_live(ex->rt, e) != RP_EAGAIN)
        continue; /* completed meanwhile */
      if (g) {
        *g = (gate_seen){
            .ex = ex, .r = r, .port = i, .ev = e, .user = user, .worker = -1};
        gate_name_of(ex, g);
      }
      return 1;
    }
  }
  return 0;
}

/* The words of every refusal for gate g, as seen by a call on ex: "replay
 * R waits for precondition P ('name'), event E, ...: <what the caller can
 * do>"; a replay of another exec is "replay R of exec X", one read off a
 * worker "on worker W, replay R ...". */
static const char *gate_words(const rp_exec *ex, const gate_seen *g, char *buf,
                              size_t size) {
  char of[48] = "", on[32] = "";
  if (g->ex != ex)
    snprintf(of, sizeof of, " of exec %p", g->ex);
  if (g->worker >= 0)
    snprintf(on, sizeof on, "on worker %d, ", g->worker);
  int n = snprintf(buf, size,
                   "%sreplay %llu%s waits for precondition %u ('%s'), event "
                   "%#llx, ",
                   on, (unsigned long long)g->r, of, g->port, g->name,
                   (unsigned long long)g->ev.id);
  if (n < 0 || (size_t)n >= size)
    return buf;
  if (g->user)
    snprintf(buf + n, size - (size_t)n,
             "an rp_event_create event that has not triggered: trigger it");
  else
    snprintf(buf + n, size - (size_t)n,
             "which the runtime completes (another replay's postcondition "
             "or done event, or an eager op's done event) and has not "
             "completed yet: wait for it (rp_event_wait on it, or on the "
             "done event of replay %llu%s or a later one; what completes it "
             "may itself wait for an event that the caller triggers)",
             (unsigned long long)g->r, of);
  return buf;
}

/* Reads worker w's gate into *g (see rp_cursor): 1 when it is one gate's,
 * still pending; 0 when the worker passed it meanwhile (or kept moving
 * while it was read). */
static int gate_read(const rp_replay_state *rs, uint32_t w, gate_seen *g) {
  rp_cursor *c = &rs->cursors[w];
  for (int tries = 0; tries < 16; tries++) {
    uint32_t seq = atomic_load(&c->gate_seq);
    if (seq & 1) {
      sched_yield();
      continue;
    }
    rp_event e = {atomic_load(&c->gate)};
    uint32_t port = atomic_load(&c->gate_port);
    uint64_t r = atomic_load(&c->gate_r);
    uintptr_t ex = atomic_load(&c->gate_ex);
    union {
      char c[RP_GATE_NAME_WORDS * 8];
      uint64_t w[RP_GATE_NAME_WORDS];
    } name;
    for (int i = 0; i < RP_GATE_NAME_WORDS; i++)
      name.w[i] = atomic_load(&c->gate_name[i]);
    if (atomic_load(&c->gate_seq) != seq)
      continue;
    if (!e.id)
      return 0;
    int user = rp__event_is_user(rs->rt, e);
    if (user < 0 || rp__event_peek_live(rs->rt, e) != RP_EAGAIN)
      return 0; /* completed meanwhile */
    *g = (gate_seen){.ex = (const void *)ex,
                     .r = r,
                     .port = port,
                     .ev = e,
                     .user = user,
                     .worker = (int)w};
    name.c[sizeof name.c - 1] = 0;
    memcpy(g->name, name.c, sizeof g->name);
    return 1;
  }
  return 0;
}

/* 1 when worker w waits at a precondition that has not triggered, or
 * sleeps on a lane whose worker does, and so on (at most one step per
 * worker); *g (may be NULL) then names that gate and the worker at it. The
 * event is looked at, not only the worker's mark: a worker whose gate
 * triggered may not have woken up yet. */
static int worker_gate(const rp_replay_state *rs, uint32_t w, gate_seen *g) {
  for (uint32_t step = 0; step <= rs->nworkers && w < rs->nworkers; step++) {
    uint64_t gate = atomic_load(&rs->cursors[w].gate);
    if (gate && rp__event_peek_live(rs->rt, (rp_event){gate}) == RP_EAGAIN)
      return !g || gate_read(rs, w, g);
    uint32_t on = atomic_load(&rs->cursors[w].waits_on);
    if (!on)
      return 0;
    w = on - 1;
  }
  return 0;
}

/* A worker ex has a lane on held at a gate (*g names it): its index, else
 * -1. */
static int exec_worker_gate(const rp_exec *ex, gate_seen *g) {
  const rp_replay_state *rs = ex->rs;
  for (uint32_t w = 0; rs && w < rs->nworkers && w < ex->nlanes; w++)
    if ((ex->mask[w / 64] >> (w % 64) & 1) && worker_gate(rs, w, g))
      return (int)w;
  return -1;
}

int rp__exec_worker_gated(const rp_exec *ex) {
  return exec_worker_gate(ex, NULL);
}

rp_status rp__exec_refuse_worker_gated(const rp_exec *ex, const char *what,
                                       const char *then) {
  gate_seen g;
  int w = exec_worker_gate(ex, &g);
  if (w < 0)
    return RP_OK;
  if (g.worker == w)
    g.worker = -1; /* named already */
  char words[512];
  return rp__err(RP_EBUSY,
                 "%s: worker %d, which the exec runs on, is held: %s; %s", what,
                 w, gate_words(ex, &g, words, sizeof words), then);
}

/* 1 when ex's oldest replay in flight cannot complete before the caller
 * triggers a precondition: a worker it has a lane on is held at one (its
 * own, or through the lanes it waits for) in a ring entry before its own;
 * *g names that gate. Host side (the replaying thread wrote the slot's
 * sub). */
static int ring_stuck(const rp_exec *ex, gate_seen *g) {
  uint32_t done = atomic_load_explicit(&ex->done_seq, memory_order_acquire);
  uint32_t n = (uint32_t)ex->issued - done;
  if (!n || !ex->rs)
    return 0;
  uint64_t sub = ex->slots[(ex->issued - n) % ex->max_inflight].sub;
  if (sub == UINT64_MAX)
    return 0; /* it never waited in the ring */
  for (uint32_t w = 0; w < ex->rs->nworkers && w < ex->nlanes; w++)
    if ((ex->mask[w / 64] >> (w % 64) & 1) &&
        atomic_load(&ex->rs->cursors[w].next) <= sub &&
        worker_gate(ex->rs, w, g))
      return 1;
  return 0;
}

/* Why wait_inflight did not wait. */
enum { WAIT_OK, WAIT_GATED, WAIT_RING_GATED, WAIT_IN_CALLBACK, WAIT_IN_TASK };

/* Waits until fewer than limit replays are in flight; WAIT_OK then. With
 * refuse_gated it never waits for what only the caller can release, and
 * returns instead (the checks run only when the window is full, off the
 * common path): WAIT_GATED the oldest replay of ex in flight waits for an
 * untriggered precondition (*g names it; a later replay gated behind it
 * is not waited for: once the oldest completed there is room, and a wait
 * for more than one slot ends when the next one is stuck at its gate, as
 * ring_stuck sees); WAIT_RING_GATED ex's replays make no progress
 * while a lane of another exec is blocked at one (they may be queued
 * behind it on a worker; *g names it); WAIT_IN_CALLBACK this thread runs an
 * event's callbacks, perhaps the completion of the very replay it would wait
 * for; WAIT_IN_TASK this thread runs an eager task of ex's runtime, whose
 * worker the replays in flight may need. */
static int wait_inflight(rp_exec *ex, uint64_t limit, int refuse_gated,
                         gate_seen *g) {
  rp_backoff b = RP_BACKOFF_HOST;
  b.spin_ns = ex->slot_spin_ns;
  b.yield_ns = slot_yield_budget(ex, limit);
  for (int waited = 0;; waited = 1) {
    uint32_t done = atomic_load_explicit(&ex->done_seq, memory_order_acquire);
    if ((uint32_t)ex->issued - done < limit) {
      if (waited)
        spin_adapt(ex, &b);
      return WAIT_OK;
    }
    if (!waited && refuse_gated && inflight_gated(ex, 1, g)) {
      /* the oldest may have completed since done was read: room then */
      if ((uint32_t)ex->issued - atomic_load(&ex->done_seq) < limit)
        return WAIT_OK;
      return WAIT_GATED;
    }
    if (refuse_gated && rp__tl_in_callback)
      return WAIT_IN_CALLBACK;
    if (refuse_gated && rp__in_task_of(ex->rt))
      return WAIT_IN_TASK;
    if (rp__backoff(&b))
      continue;
    if (refuse_gated && ring_stuck(ex, g))
      return WAIT_RING_GATED;
    /* Asleep until a slot frees; when replays are long (half the window
     * outlasts a slow wake-up, 100 us), until half the window drained: the
     * completer then pays for one futex wake per limit/2 replays, and the
     * host preempts a busy worker that often, not at every replay. */
    uint64_t iv = atomic_load_explicit(&ex->interval_ns, memory_order_relaxed);
    uint32_t free_n =
        limit > 1 && iv * (limit / 2) >= 100000 ? (uint32_t)(limit / 2) : 1;
    uint32_t want = (uint32_t)ex->issued - (uint32_t)limit + free_n;
    atomic_store(&ex->wake_at, want);
    atomic_fetch_add(&ex->done_sleepers, 1);
    for (;;) {
      done = atomic_load(&ex->done_seq);
      if ((int32_t)(done - want) >= 0)
        break;
      /* refusing: wakes every 1 ms to see whether a lane got stuck at a
       * gate meanwhile (the refusal has no event to sleep on) */
      rp__futex_wait(&ex->done_seq, done, refuse_gated ? 1000000 : -1);
      if (refuse_gated && ring_stuck(ex, g) &&
          (int32_t)(atomic_load(&ex->done_seq) - want) < 0) {
        atomic_fetch_sub(&ex->done_sleepers, 1);
        /* a slot may have freed since `want` was set: then go on */
        if ((uint32_t)ex->issued - atomic_load(&ex->done_seq) < limit)
          return WAIT_OK;
        return WAIT_RING_GATED;
      }
    }
    atomic_fetch_sub(&ex->done_sleepers, 1);
  }
}

int rp__exec_quiesce(rp_exec *ex) {
  if (ex->lw && rp__lower_quiesce(ex))
    return 1;
  (void)wait_inflight(ex, 1, 0, NULL);
  if (!ex->submitted) /* never went through the ring (no op, or every
                         replay launched from the calling thread) */
    return 0;
  /* The workers with a lane in ex: the others only skip its entries (the
   * entry's own mask and pointer, never the exec), so neither a worker busy
   * elsewhere nor one waiting at another exec's gate holds this up */
  rp_replay_state *rs = ex->rs;
  for (uint32_t w = 0; w < rs->nworkers && w < ex->nlanes; w++)
    while ((ex->mask[w / 64] >> (w % 64) & 1) &&
           atomic_load_explicit(&rs->cursors[w].next, memory_order_acquire) <=
               ex->last_sub) {
      rp__worker_wake(ex->rt, w);
      sched_yield();
    }
  return 0;
}

/* ---- public API ---- */

/* RP_ESTALE for precondition i's event e, saying what the handle is when
 * it is no event of the runtime (as the event calls do). */
static rp_status stale_pre(const rp_exec *ex, const char *what, uint32_t i,
                           rp_event e) {
  const char *note = rp__event_handle_note(ex->rt, e);
  return rp__err(RP_ESTALE,
                 "%s: precondition %u ('%s'): event %#llx is stale%s", what, i,
                 ex->g->pre[i].name, (unsigned long long)e.id, note);
}

rp_status rp__replay_check(rp_exec *ex, const rp_replay_args *a,
                           const char *what) {
  rp_status cst = rp__exec_check(ex, what);
  if (cst)
    return cst;
  if ((cst = rp__refuse_in_replay(what)) != RP_OK)
    return cst;
  rp_status st = rp__runtime_check(ex->rt);
  if ((cst = rp__exec_refuse_model(ex, what)) != RP_OK)
    return cst;
  if (st)
    return st;
  size_t size = a ? a->args_size : 0;
  uint32_t npre = a ? a->npre : 0;
  if (size > ex->max_args)
    return rp__err(RP_ERANGE,
                   "%s: %zu argument bytes, exec accepts "
                   "%zu (rp_exec_opts.max_args)",
                   what, size, ex->max_args);
  if (size && !a->args)
    return rp__err(RP_EINVAL, "%s: args_size %zu with NULL args", what, size);
  if (npre != ex->npre)
    return rp__err(RP_EPORT,
                   "%s: the exec has %u precondition ports, "
                   "the replay supplied %u events",
                   what, ex->npre, npre);
  if (npre && !a->pre)
    return rp__err(RP_EINVAL, "%s: NULL precondition events", what);
  for (uint32_t i = 0; i < npre; i++)
    if (!rp__event_live(ex->rt, a->pre[i]) || (a->pre[i].id >> 63))
      return stale_pre(ex, what, i, a->pre[i]);
  if (a && !a->post && a->npost)
    return rp__err(RP_EINVAL, "%s: npost %u with NULL post", what, a->npost);
  if (a && a->post && a->npost != ex->npost)
    return rp__err(RP_EPORT,
                   "%s: the exec has %u postcondition "
                   "ports, the replay asked for %u",
                   what, ex->npost, a->npost);
  if (RP_UNLIKELY(size < ex->min_args))
    return rp__err(
        RP_ERANGE,
        "%s: %zu argument bytes, but op %u's "
        "interpolation %u reads bytes [%zu, +%zu)",
        what, size, ex->min_args_op, ex->min_args_interp,
        ex->g->ops[ex->min_args_op].interps[ex->min_args_interp].src_offset,
        ex->g->ops[ex->min_args_op].interps[ex->min_args_interp].bytes);
  return RP_OK;
}

static void arm_slot(rp_exec *ex, rp_slot *s, uint64_t r,
                     const rp_replay_args *a) {
  if (atomic_load_explicit(&s->any_fail, memory_order_relaxed)) {
    memset(s->unit_status, 0, sizeof *s->unit_status * ex->nunits);
    atomic_store_explicit(&s->any_fail, 0, memory_order_relaxed);
  }
  atomic_store_explicit(&s->status, 0, memory_order_relaxed);
  atomic_store_explicit(&s->detail_ready, 0, memory_order_relaxed);
  atomic_store_explicit(&s->remaining, ex->active, memory_order_relaxed);
  for (uint32_t p = 0; p < ex->npost; p++) {
    atomic_store_explicit(&s->post_left[p], ex->post_units[p],
                          memory_order_relaxed);
    atomic_store_explicit(&s->post_status[p], 0, memory_order_relaxed);
  }
  /* only the bytes given: every byte a unit reads (its interpolations and
   * shard count, up to min_args) lies inside them (rp__replay_check), so
   * the rest of the max_args block is never read and not touched */
  size_t size = a ? a->args_size : 0;
  if (size)
    memcpy(s->args, a->args, size);
  s->r = r;
  int window = ex->tuning && r >= ex->measure_from && r < ex->measure_to;
  s->measure = window && ex->tune_phase == 0;
  s->timed = window && ex->tune_phase == 1;
  atomic_store_explicit(&s->t_start, 0, memory_order_relaxed);
  s->stale = 0;
  s->traced = 0;
  if (RP_UNLIKELY(ex->trace != NULL))
    rp__trace_arm(ex, s, r);
  /* seq_cst: pairs with rp_instance_free/realloc (issued_pub, see
   * inst_busy): a replay that misses an epoch or generation change in
   * flight there is seen in flight by it (a plain load on x86). The walk
   * over the instances runs only when the epoch moved since they were last
   * all current; once one is stale it stays stale (epoch_seen stays). */
  uint64_t epoch = atomic_load(ex->inst_epoch);
  if (RP_LIKELY(epoch == ex->epoch_seen))
    return;
  for (uint32_t i = 0; i < ex->ninsts; i++)
    if (rp__inst_gen_settled(ex->insts[i].gen_word,
                             ex->insts[i].info.generation) !=
        ex->insts[i].info.generation) {
      s->stale = 1;
      atomic_store(&s->status, (int32_t)RP_ESTALE);
      /* failure path: the first op that accesses it, by its name */
      uint32_t op = 0, found = 0;
      for (; op < ex->g->nops && !found; op++) {
        rp_access tmp[2];
        const rp_access *acc;
        uint32_t n = rp__op_accesses(&ex->g->ops[op], tmp, &acc);
        for (uint32_t k = 0; k < n && !found; k++)
          found = rp__inst_slot(acc[k].inst) == ex->insts[i].slot;
      }
      const char *oname = found ? ex->g->ops[op - 1].name : NULL;
      if (oname && !oname[0])
        oname = NULL;
      char by[96] = "";
      if (found)
        snprintf(by, sizeof by, " (accessed by op %u%s%s%s)", op - 1,
                 oname ? " '" : "", oname ? oname : "", oname ? "'" : "");
      snprintf(
          s->detail, sizeof s->detail,
          "replay %llu: instance %#llx%s was freed or reallocated after "
          "instantiate",
          (unsigned long long)r,
          (unsigned long long)((uint64_t)ex->insts[i].info.generation << 32 |
                               (uint64_t)rp__runtime_tag(ex->rt)
                                   << RP_HANDLE_TAG_SHIFT |
                               ex->insts[i].slot),
          by);
      atomic_store_explicit(&s->detail_ready, 1, memory_order_relaxed);
      /* no op runs: no postcondition was produced (relaxed: published
       * with the slot by submit) */
      for (uint32_t p = 0; p < ex->npost; p++) {
        atomic_store_explicit(&s->post_status[p], (int32_t)RP_ESTALE,
                              memory_order_relaxed);
        memcpy(s->post_detail[p], s->detail, sizeof s->detail);
      }
      return;
    }
  ex->epoch_seen = epoch; /* every instance current as of this epoch */
}

/* Done and postcondition events for the slot; the caller gets one
 * reference to each it asked for. */
static rp_status slot_events(rp_exec *ex, rp_slot *s, const rp_replay_args *a,
                             rp_event *done) {
  rp_status st = rp__event_new(ex->rt, &s->done);
  if (st)
    return st; /* table growth failed: out of memory */
  atomic_store_explicit(&s->done_id, s->done.id, memory_order_relaxed);
  uint32_t made = 0;
  while (made < ex->npost && !st)
    if ((st = rp__event_new(ex->rt, &s->post[made])) == RP_OK)
      made++;
  if (st) { /* out of memory: the events made go (completed, released) */
    for (uint32_t p = 0; p <= made; p++) {
      rp_event e = p < made ? s->post[p] : s->done;
      rp__event_complete(ex->rt, e, st);
      rp_event_release(ex->rt, e);
    }
    return st;
  }
  for (uint32_t p = 0; p < ex->npost; p++) {
    if (a && a->post)
      a->post[p] = s->post[p];
    else
      rp_event_release(ex->rt, s->post[p]);
  }
  for (uint32_t i = 0; i < ex->npre; i++)
    s->pre[i] = ex->pre_held[i]; /* the reference rp__replay_owned took */
  if (ex->lw && ex->lw->polled) {
    /* completed by the GPU poller: a host waiter that yields through a
     * few replay intervals sees it at once instead of being woken */
    uint64_t iv =
        atomic_load_explicit(&ex->interval_ns, memory_order_relaxed) / 1000 * 4;
    rp__event_set_yield(ex->rt, s->done,
                        (uint32_t)(iv < 200    ? 200
                                   : iv > 5000 ? 5000
                                               : iv));
  }
  if (done)
    *done = s->done;
  else
    rp_event_release(ex->rt, s->done);
  return RP_OK;
}

/* 1 when nothing of ex is in flight: every replay completed and no GPU
 * host callback is pending. A lane touches nothing rp_exec_tune changes
 * once its replay completed (its stats are stored before its completion
 * count), so idle workers need not be waited for. Waits only for a
 * completion already under way (the last replay's completion claimed: its
 * completer is past every precondition and task and only has to store
 * done_seq), so a host that saw the last done event sees the exec quiet. */
static int exec_quiet(rp_exec *ex) {
  uint32_t want = (uint32_t)ex->issued;
  uint32_t done = atomic_load_explicit(&ex->done_seq, memory_order_acquire);
  if (done != want && ex->issued &&
      atomic_load(&ex->slots[(ex->issued - 1) % ex->max_inflight].zeroed) == 2)
    while ((done = atomic_load_explicit(&ex->done_seq, memory_order_acquire)) !=
           want)
      rp__cpu_relax();
  if (done != want)
    return 0;
  return !ex->lw ||
         !atomic_load_explicit(&ex->lw->cb_pending, memory_order_acquire);
}

/* Why a running eager task of the runtime may not wait for replays. */
#define IN_TASK_WHY                                                            \
  "called from a running task of this runtime, which must not wait for "       \
  "replays in flight: they may need the task's worker (nothing was done)"

rp_status rp__exec_wait_quiet(rp_exec *ex, const char *what) {
  rp_backoff b = RP_BACKOFF_HOST;
  b.spin_ns = rp__host_spin_ns(ex->rt);
  /* in a callback, not even exec_quiet's short spin: the replay it would
   * spin for may be the one whose completion runs this callback; in an
   * eager task, one whose lane waits for the task's worker */
  int inflight = atomic_load_explicit(&ex->done_seq, memory_order_acquire) !=
                 (uint32_t)atomic_load(&ex->issued_pub);
  if (rp__tl_in_callback && inflight)
    return rp__err(RP_EBUSY,
                   "%s: called from an event's callback, which must not "
                   "block: it would wait for replays in flight, perhaps "
                   "the one completing (nothing was done)",
                   what);
  if (rp__in_task_of(ex->rt) && inflight)
    return rp__err(RP_EBUSY, "%s: %s", what, IN_TASK_WHY);
  gate_seen g;
  char words[512];
  while (!exec_quiet(ex)) {
    if (inflight_gated(ex, 0, &g))
      return rp__err(RP_EBUSY, "%s: %s; then retry (nothing was done)", what,
                     gate_words(ex, &g, words, sizeof words));
    if (rp__tl_in_callback)
      return rp__err(RP_EBUSY,
                     "%s: called from an event's callback, which must not "
                     "block: it would wait for replays in flight (nothing "
                     "was done)",
                     what);
    if (rp__in_task_of(ex->rt))
      return rp__err(RP_EBUSY, "%s: %s", what, IN_TASK_WHY);
    if (rp__backoff(&b))
      continue;
    if (ring_stuck(ex, &g))
      return rp__err(RP_EBUSY,
                     "%s: the replays in flight make no progress while %s; "
                     "then retry (nothing was done)",
                     what, gate_words(ex, &g, words, sizeof words));
    /* asleep until the next completion, 1 ms at most (see wait_inflight) */
    uint32_t done = atomic_load(&ex->done_seq);
    atomic_store(&ex->wake_at, done + 1);
    atomic_fetch_add(&ex->done_sleepers, 1);
    if (atomic_load(&ex->done_seq) == done)
      rp__futex_wait(&ex->done_seq, done, 1000000);
    atomic_fetch_sub(&ex->done_sleepers, 1);
  }
  return RP_OK;
}

/* The body of rp_replay, for the thread that holds ex->in_replay. */
/* Drops the references rp__replay_owned took on the preconditions (a
 * replay that was not issued); returns st. */
static rp_status drop_held(rp_exec *ex, uint32_t n, rp_status st) {
  for (uint32_t i = 0; i < n; i++)
    rp__event_unref(ex->rt, ex->pre_held[i]);
  return st;
}

rp_status rp__replay_owned(rp_exec *ex, const rp_replay_args *a,
                           rp_event *done) {
  rp_status st;
  uint64_t r = ex->issued;
  /* the preconditions held first: one released by the caller may complete
   * and be recycled while this waits for a slot, and its status with it */
  for (uint32_t i = 0; i < ex->npre; i++)
    if ((st = rp__event_retain(ex->rt, a->pre[i])) != RP_OK)
      return drop_held(ex, i, stale_pre(ex, "rp_replay", i, a->pre[i]));
    else
      ex->pre_held[i] = a->pre[i];
  gate_seen g;
  int w = wait_inflight(ex, ex->max_inflight, 1, &g);
  char words[512];
  if (RP_UNLIKELY(w == WAIT_GATED)) {
    return drop_held(ex, ex->npre,
                     rp__err(RP_EBUSY,
                             "rp_replay: %u replays are in flight "
                             "(max_inflight), the oldest gated: %s; then "
                             "replay again (nothing was replayed)",
                             ex->max_inflight,
                             gate_words(ex, &g, words, sizeof words)));
  }
  if (RP_UNLIKELY(w == WAIT_RING_GATED))
    return drop_held(ex, ex->npre,
                     rp__err(RP_EBUSY,
                             "rp_replay: %u replays are in flight "
                             "(max_inflight) and make no progress behind a "
                             "replay that waits at a precondition on a "
                             "worker they share: %s; then replay again "
                             "(nothing was replayed)",
                             ex->max_inflight,
                             gate_words(ex, &g, words, sizeof words)));
  if (RP_UNLIKELY(w != WAIT_OK))
    return drop_held(
        ex, ex->npre,
        rp__err(
            RP_EBUSY,
            w == WAIT_IN_CALLBACK
                ? "rp_replay: %u replays are in flight (max_inflight) and this "
                  "is an event's callback, which must not block waiting for "
                  "one: replay from elsewhere (nothing was replayed)"
                : "rp_replay: %u replays are in flight (max_inflight) and this "
                  "is a running task of the runtime, which must not wait for "
                  "one: its lane may run on the task's worker (nothing was "
                  "replayed)",
            ex->max_inflight));
  /* how it runs, decided first: through the ring, it takes its entry
   * before anything is armed (a full ring it cannot wait for is RP_EBUSY
   * with nothing replayed) */
  int how = ex->active == 0                                       ? 0
            : ex->lw && ex->lw->inline_ok && launch_lane_idle(ex) ? 1
                                                                  : 2;
  uint64_t t = 0;
  int held = -1;
  if (how == 2 && (w = ring_take(ex->rs, &t, &held, &g)) == TAKE_GATED) {
    if (g.worker == held)
      g.worker = -1; /* named already */
    return drop_held(ex, ex->npre,
                     rp__err(RP_EBUSY,
                             "rp_replay: the submission ring is full (%u "
                             "replays queued) behind worker %d, which is "
                             "held: %s; then replay again (nothing was "
                             "replayed)",
                             (unsigned)RP_RING, held,
                             gate_words(ex, &g, words, sizeof words)));
  }
  if (how == 2 && (w == TAKE_IN_CALLBACK || w == TAKE_IN_TASK))
    return drop_held(
        ex, ex->npre,
        rp__err(RP_EBUSY,
                "rp_replay: the submission ring is full (%u replays "
                "queued) and this is %s, which must not wait for room "
                "(its worker may be the one holding the ring back): "
                "replay from elsewhere (nothing was replayed)",
                (unsigned)RP_RING,
                w == TAKE_IN_TASK ? "a running task of the runtime"
                                  : "an event's callback"));
  rp_slot *s = &ex->slots[r % ex->max_inflight];
  /* The slot's previous replay finished (the window): its zeroed mark goes
   * before the publication below, so an rp_instance_free that sees this
   * replay issued never sees that mark on its slot and takes it for
   * settled (inflight_settled). */
  atomic_store_explicit(&s->zeroed, 0, memory_order_relaxed);
  /* in flight for rp_instance_free/realloc before arm_slot checks the
   * generations (seq_cst, see inst_busy) */
  atomic_store(&ex->issued_pub, r + 1);
  arm_slot(ex, s, r, a);
  s->sub = UINT64_MAX; /* submit() records its ring index */
  if ((st = slot_events(ex, s, a, done)) != RP_OK) {
    atomic_store(&ex->issued_pub, r);
    if (how == 2)
      publish_empty(ex->rs, t);
    return drop_held(ex, ex->npre, rp__err_prefix(st, "rp_replay: "));
  }
  ex->issued = r + 1;
  if (how == 0)
    rp__slot_complete(ex, s); /* nothing to run: completes in order, here */
  else if (how == 1)
    launch_here(ex, r);
  else
    submit(ex, r, t);
  return RP_OK;
}

rp_status rp__exec_busy(const rp_exec *ex, const char *what) {
  return rp__err(RP_EBUSY,
                 "%s: another thread is inside " RP_EXEC_HOLDERS " on exec %p "
                 "(one thread at a time per exec; nothing was done)",
                 what, (const void *)ex);
}

/* One thread at a time per exec: a second thread calling rp_replay (or
 * another call that holds the exec) on the exec while one is inside is
 * refused with RP_EBUSY, not raced (an uncontended exchange per replay). */
rp_status rp_replay(rp_exec *ex, const rp_replay_args *a, rp_event *done) {
  rp_status st = rp__replay_check(ex, a, "rp_replay");
  if (st)
    return st;
  if ((st = rp__exec_take(ex, "rp_replay")) != RP_OK)
    return st;
  rp__nvtx_push("reprise.replay");
  st = rp__replay_owned(ex, a, done);
  rp__nvtx_pop();
  rp__exec_give(ex);
  return st;
}

rp_status rp_exec_op_proc(const rp_exec *ex, rp_op_id op, rp_proc *out) {
  rp_status cst = rp__exec_check(ex, "rp_exec_op_proc");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_exec_op_proc: NULL out");
  if (op >= ex->g->nops)
    return rp__err(RP_EINVAL, "rp_exec_op_proc: op %u out of range (%u ops)",
                   op, ex->g->nops);
  *out = ex->units[ex->op_first[op]].lane;
  return RP_OK;
}

const char *rp_exec_error_detail(const rp_exec *ex) {
  return rp__exec_check(ex, "rp_exec_error_detail") ? "" : ex->last_detail;
}
