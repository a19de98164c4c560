/* replay/gpu_launch.c — the device side of a replay (see gpu.h):
 * launching each segment (graph or op by op) after refreshing the
 * parameters, completing it (the poller, the completion word or event, the
 * side-stream host callbacks), the device save/restore around inline
 * launches, and quiesce with its rescue after a lost context. */
#include "gpu.h"

#include <sched.h>
#include <string.h>

/* ---- replay: completion ---- */

static int reached(uint32_t v, uint32_t target) {
  return (int32_t)(v - target) >= 0;
}

/* Raises a GPU lane's progress to v (never lowers it: a direct publish
 * after a failure may overtake a late callback) and wakes sleepers. The
 * seq_cst CAS pairs with a consumer's seq_cst sleeper increment before its
 * last check (no lost wake-up), as the scheduler's publish() does. */
static void lane_publish(rp_lane *l, uint32_t v) {
  uint32_t cur = atomic_load(&l->progress);
  while (!reached(cur, v) &&
         !atomic_compare_exchange_weak(&l->progress, &cur, v))
    ;
  if (atomic_load(&l->sleepers))
    rp__futex_wake(&l->progress, 0x7fffffff);
}

/* What a segment's host function does: deliver postconditions, publish
 * the lane up to the segment's end, and at the GPU's last segment give
 * the slot its completion (exactly once: `owed` is exchanged). */
/* Segment sg of replay rel (slot s) completed on the device: deliver its
 * postconditions, publish its GPU lane up to the segment's end. */
static void seg_complete(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                         uint64_t rel) {
  rp_lower *lw = ex->lw;
  for (uint32_t i = 0; sg->any_post && i < sg->n; i++) {
    const rp_unit *u = &ex->units[lw->members[sg->first + i]];
    if (u->npost)
      rp__post_done(ex, u, s);
  }
  for (uint32_t i = 0; i < sg->npub; i++) {
    const rp_seg_pub *p = &lw->pubs[sg->pub_off + i];
    rp_lane *l = &ex->lanes[p->lane];
    lane_publish(l, (uint32_t)rel * l->len + p->end);
  }
}

static void seg_done_body(rp_seg_cb *c) {
  rp_exec *ex = c->ex;
  rp_lower *lw = ex->lw;
  /* acquire: pairs with the launcher's release store of rel, so the
   * members' statuses it wrote are visible to whoever waits on the lane */
  uint64_t rel = atomic_load_explicit(&c->rel, memory_order_acquire);
  const rp_seg *sg = &lw->segs[c->seg];
  rp_slot *s = &ex->slots[c->slot];
  seg_complete(ex, sg, s, rel);
  _Atomic uint64_t *owed = &lw->owed[(size_t)c->slot * lw->ngpu + sg->gpu];
  if (sg->last_of_gpu && atomic_exchange(owed, 0) != 0)
    rp__slot_sources_done(ex, s, lw->gpus[sg->gpu].nsrc);
}

/* ---- completion by polling ----
 *
 * A host function's latency is a wake-up of CUDA's callback thread (tens
 * of us on an H200), and in the replay stream it also holds back the next
 * replay. So an exec whose only host-visible completions are its GPUs'
 * last segments ends each replay's GPU work with an event record and no
 * host function; one poller thread per runtime queries those events in
 * stream order (cudaEventQuery, about 0.3 us) and completes the replays
 * whose events completed. It polls while such work is in flight, lingers
 * a little after the last completion (a training loop's next replay comes
 * soon), then sleeps on a futex the launchers wake. Exactly one of the
 * poller, a failing launcher and the lost-context rescue claims a replay's
 * completion (owed: CAS from r + 1 to 0). */

#define POLL_LINGER_NS 200000u /* spin after the last completion */
#define POLL_BUSY_NS 100000u   /* then yield between polls... */
#define POLL_SPACED_NS 2000u   /* between polls with several in flight */
#define POLL_NAP_NS                                                            \
  1000000u /* ...and past this nap 10 us (quiet                                \
              counts from the last completion or the                           \
              last new work, whichever is later) */

/* GPU g's last segment of replay r (slot index si) completed. */
static void gpu_done(rp_exec *ex, uint32_t g, uint32_t si, uint64_t rel) {
  rp_lower *lw = ex->lw;
  rp_slot *s = &ex->slots[si];
  seg_complete(ex, &lw->segs[lw->last_seg[g]], s, rel);
  rp__slot_sources_done(ex, s, lw->gpus[g].nsrc);
}

/* Completes ex's replays whose GPU work finished, per GPU in replay
 * order; the number completed. Poller thread only. */
static uint32_t poll_exec(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint32_t n = 0;
  for (uint32_t g = 0; g < lw->ngpu; g++)
    for (;;) {
      uint64_t r = lw->next_r[g];
      /* replays completed already (the callback path of an earlier
       * placement, a failure, a rescue): skip past them */
      uint32_t ahead = atomic_load(&ex->done_seq) - (uint32_t)r;
      if ((int32_t)ahead > 0) {
        lw->next_r[g] = r + ahead;
        continue;
      }
      uint32_t si = (uint32_t)(r % ex->max_inflight);
      size_t i = (size_t)si * lw->ngpu + g;
      /* acquire: pairs with the launcher's release of launched */
      uint64_t l = atomic_load_explicit(&lw->launched[i], memory_order_acquire);
      if (l <= r)
        break; /* replay r has not issued this GPU's work yet */
      uint64_t want = r + 1;
      if (l == want && atomic_load(&lw->owed[i]) == want) {
        if (lw->by_word[i]
                ? atomic_load_explicit((_Atomic uint32_t *)&lw->words[i],
                                       memory_order_acquire) != (uint32_t)want
                : DV(ex)->device_use(ex->rt, lw->gpus[g].device) != RP_OK ||
                      DV(ex)->event_done(ex->rt, lw->slot_events[i]) <= 0)
          break; /* still running (an error: quiesce rescues) */
        if (atomic_compare_exchange_strong(&lw->owed[i], &want, 0)) {
          gpu_done(ex, g, si, lw->rel_of[i]);
          atomic_fetch_sub(&lw->lr->pending, 1);
          n++;
        }
      }
      lw->next_r[g] = r + 1; /* done, by us or by someone else */
    }
  return n;
}

/* One pass over the registry (a snapshot taken under reg_lock; scan_seq
 * odd meanwhile, so that a destroyer can wait the pass out). */
static uint32_t poll_all(lower_rt *lr) {
  pthread_mutex_lock(&lr->reg_lock); /* the poller's side, not a replay's */
  uint32_t n = lr->nreg;
  if (n > lr->capsnap) {
    rp_exec **g = realloc(lr->snap, sizeof *g * n);
    if (!g)
      n = lr->capsnap; /* poll what fits; the rest on a later pass */
    else
      lr->snap = g, lr->capsnap = n;
  }
  if (n)
    memcpy(lr->snap, lr->reg, sizeof *lr->snap * n);
  atomic_fetch_add(&lr->scan_seq, 1);
  pthread_mutex_unlock(&lr->reg_lock);
  uint32_t done = 0;
  for (uint32_t i = 0; i < n; i++)
    done += poll_exec(lr->snap[i]);
  atomic_fetch_add(&lr->scan_seq, 1);
  return done;
}

static void *poller_main(void *arg) {
  lower_rt *lr = arg;
  uint64_t quiet_from = 0;
  uint32_t seen = 0; /* pending at the last pass */
  while (!atomic_load(&lr->stop)) {
    if (poll_all(lr)) {
      quiet_from = 0;
      seen = atomic_load(&lr->pending);
      continue;
    }
    uint32_t pending = atomic_load(&lr->pending);
    uint64_t now = rp__now_ns();
    if (!quiet_from || pending > seen) /* new work restarts the clock */
      quiet_from = now;
    seen = pending;
    uint64_t quiet = now - quiet_from;
    if (pending) { /* work in flight: keep polling */
      if (quiet < POLL_BUSY_NS && pending == 1)
        for (int i = 0; i < 8; i++) /* about 0.3 us between polls */
          rp__cpu_relax();
      else if (quiet < POLL_BUSY_NS) /* several in flight: the next is a
                                        replay away; each event query
                                        takes the driver lock the
                                        launching thread needs */
        while (rp__now_ns() - now < POLL_SPACED_NS)
          rp__cpu_relax();
      else if (quiet < POLL_NAP_NS)
        sched_yield();
      else
        rp__nap(10000);
      continue;
    }
    if (quiet < POLL_LINGER_NS) {
      sched_yield();
      continue;
    }
    /* Asleep until a launcher issues work. seq_cst: pairs with
     * poller_kick's increment, then load of `sleeping` (no lost wake). */
    atomic_store(&lr->sleeping, 1);
    if (!atomic_load(&lr->pending) && !atomic_load(&lr->stop))
      rp__futex_wait(&lr->pending, 0, -1);
    atomic_store(&lr->sleeping, 0);
    quiet_from = 0;
  }
  return NULL;
}

static void poller_kick(lower_rt *lr) {
  atomic_fetch_add(&lr->pending, 1);
  if (atomic_load(&lr->sleeping))
    rp__futex_wake(&lr->pending, 1);
}

void rp__gpu_poller_stop(lower_rt *lr) {
  if (!lr->started)
    return;
  atomic_store(&lr->stop, 1);
  rp__futex_wake(&lr->pending, 1);
  pthread_join(lr->thread, NULL);
  lr->started = 0;
}

/* Adds ex to the registry, starting the thread on first use (lr->lock
 * held: instantiate). */
rp_status rp__gpu_poller_register(lower_rt *lr, rp_exec *ex) {
  if (!lr->started) {
    if (pthread_create(&lr->thread, NULL, poller_main, lr) != 0)
      return rp__err(RP_ENOMEM, "instantiate: cannot start the GPU "
                                "poller thread");
    lr->started = 1;
  }
  pthread_mutex_lock(&lr->reg_lock);
  rp_status st = RP_OK;
  if (lr->nreg == lr->capreg) {
    uint32_t cap = lr->capreg ? 2 * lr->capreg : 8;
    rp_exec **g = realloc(lr->reg, sizeof *g * cap);
    if (g)
      lr->reg = g, lr->capreg = cap;
    else
      st = rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  if (!st)
    lr->reg[lr->nreg++] = ex;
  pthread_mutex_unlock(&lr->reg_lock);
  return st;
}

/* Removes ex (quiesced) and waits out a pass that may still look at it. */
void rp__gpu_poller_unregister(lower_rt *lr, rp_exec *ex) {
  pthread_mutex_lock(&lr->reg_lock);
  int found = 0;
  for (uint32_t i = 0; i < lr->nreg && !found; i++)
    if (lr->reg[i] == ex) {
      lr->reg[i] = lr->reg[--lr->nreg];
      found = 1;
    }
  uint64_t seq = atomic_load(&lr->scan_seq);
  pthread_mutex_unlock(&lr->reg_lock);
  if (!found || !(seq & 1))
    return;
  while (atomic_load(&lr->scan_seq) == seq)
    sched_yield();
}

/* Runs on CUDA's callback thread once the segment's work completed. It
 * makes no CUDA call and never blocks (completion is non-blocking, see
 * scheduler.c complete()). */
static void seg_done(void *arg) {
  rp_seg_cb *c = arg;
  rp_lower *lw = c->ex->lw;
  seg_done_body(c);
  /* release: everything this callback did happens before a destroyer that
   * sees the count reach zero frees the exec. The last touch of it. */
  atomic_fetch_sub_explicit(&lw->cb_pending, 1, memory_order_release);
}

/* The GPU's last segment of replay s->r, under polling: an event record
 * after its work, then the poller is told (see above). When CUDA refuses
 * the record, the members fail and the replay completes here. */
static void signal_polled(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                          uint32_t slot, uint64_t rel) {
  rp_lower *lw = ex->lw;
  size_t i = (size_t)slot * lw->ngpu + sg->gpu;
  const rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  lw->rel_of[i] = rel; /* published by the release of launched */
  atomic_store_explicit(&lw->owed[i], s->r + 1, memory_order_relaxed);
  /* issue_segment made the device current, unless the replay is stale */
  rp_status st = s->stale ? DV(ex)->device_use(ex->rt, gl->device) : RP_OK;
  /* alone in flight (no earlier replay incomplete): the word */
  uint8_t word =
      lw->words && atomic_load_explicit(&ex->done_seq, memory_order_relaxed) ==
                       (uint32_t)s->r;
  lw->by_word[i] = word; /* published by the release of launched */
  if (!st)
    st = word ? DV(ex)->stream_write_u32(ex->rt, gl->stream,
                                         lw->words_dev + i * sizeof(uint32_t),
                                         (uint32_t)(s->r + 1))
              : DV(ex)->event_record(ex->rt, lw->slot_events[i], gl->stream);
  if (st == RP_OK) {
    /* release: the slot's statuses, rel and owed before the poller */
    atomic_store_explicit(&lw->launched[i], s->r + 1, memory_order_release);
    poller_kick(lw->lr);
    return;
  }
  for (uint32_t j = 0; j < sg->n; j++) {
    uint32_t m = lw->members[sg->first + j];
    if (!s->unit_status[m])
      rp__unit_failed(ex, s, m, st, "could not record its completion");
  }
  uint64_t want = s->r + 1;
  if (atomic_compare_exchange_strong(&lw->owed[i], &want, 0))
    gpu_done(ex, sg->gpu, slot, rel);
}

/* Enqueues segment k's host function after its work, on the GPU's
 * completion side stream (event record on the replay stream, event wait
 * and host function on the side stream: nothing in the replay stream
 * waits on the host), or, when CUDA refuses, runs it here. */
static void signal_segment(rp_exec *ex, uint32_t k, rp_slot *s, uint32_t slot,
                           uint64_t rel) {
  rp_lower *lw = ex->lw;
  const rp_seg *sg = &lw->segs[k];
  if (!sg->needs_cb)
    return;         /* a later segment's callback publishes past it */
  if (lw->polled) { /* sg is its GPU's last segment (rp__lower_placed) */
    signal_polled(ex, sg, s, slot, rel);
    return;
  }
  rp_seg_cb *c = &lw->cbs[(size_t)slot * lw->nseg + k];
  if (sg->last_of_gpu) /* relaxed: published by the release below */
    atomic_store_explicit(&lw->owed[(size_t)slot * lw->ngpu + sg->gpu],
                          s->r + 1, memory_order_relaxed);
  /* release: what the launcher did (statuses) happens before the callback */
  atomic_store_explicit(&c->rel, rel, memory_order_release);
  /* seq_cst: a quiescing host that reads zero saw no enqueue in flight */
  atomic_fetch_add(&lw->cb_pending, 1);
  const rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  rp_status st = DV(ex)->device_use(ex->rt, gl->device);
  void *ev = lw->done_events[k], *side = gl->streams->done;
  if (!st)
    st = DV(ex)->event_record(ex->rt, ev, gl->stream);
  if (!st)
    st = DV(ex)->stream_wait_event(ex->rt, side, ev);
  if (!st)
    st = DV(ex)->launch_host_func(ex->rt, side, seg_done, c);
  if (st == RP_OK) {
    rp__count(&lw->n_callbacks, 1);
    return;
  }
  atomic_fetch_sub(&lw->cb_pending, 1);
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t m = lw->members[sg->first + i];
    if (!s->unit_status[m])
      rp__unit_failed(ex, s, m, st, "could not enqueue its completion");
  }
  seg_done_body(c);
}

/* ---- replay: launch ---- */

/* The first poisoned precondition of u (the launcher blocked on all of
 * them already, so they are complete). */
/* The first poisoned precondition's status, *why naming the port and
 * what poisoned it; RP_OK when none is. */
static rp_status port_status(const rp_exec *ex, const rp_unit *u,
                             const rp_slot *s, const char **why) {
  for (uint32_t i = 0; i < u->nport; i++) {
    uint32_t p = ex->ports[u->port_off + i];
    rp_status st = rp__event_peek(ex->rt, s->pre[p]);
    if (st) {
      *why = rp__port_why(ex, s, p);
      return st;
    }
  }
  return RP_OK;
}

/* Blocks until each of the segment's preconditions completed; the first
 * poison, else RP_OK. Device work waiting on a port is never issued
 * before the port triggered. */
static rp_status wait_ports(rp_exec *ex, const rp_unit *l, rp_slot *s) {
  rp_status first = RP_OK;
  for (uint32_t i = 0; i < l->nport; i++) {
    rp_status st =
        rp__gate_block(ex, ex->lw->launch_lane, s, ex->ports[l->port_off + i]);
    if (st && !first)
      first = st;
  }
  return first;
}

/* 1 when some member inherits a failure (then it is issued op by op). */
static int members_poisoned(const rp_exec *ex, const rp_seg *sg,
                            const rp_slot *s) {
  if (!atomic_load_explicit(&s->any_fail, memory_order_relaxed))
    return 0;
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t ui = ex->lw->members[sg->first + i];
    if (s->unit_status[ui] || rp__pred_status(ex, &ex->units[ui], s))
      return 1;
  }
  return 0;
}

/* Copies this replay's interpolated values into its staging slot (and
 * the units' host args, for op-by-op issue), then the slot into the
 * device buffer, in stream order before the GPU's first segment. */
static rp_status refresh_params(rp_exec *ex, rp_gpu_lane *gl, rp_slot *s,
                                uint32_t slot, void *stream) {
  if (!gl->ninterp_units)
    return RP_OK;
  char *stg = gl->staging + (size_t)slot * gl->param_bytes;
  for (uint32_t i = 0; i < gl->ninterp_units; i++) {
    uint32_t ui = gl->interp_units[i];
    rp_unit *u = &ex->units[ui];
    for (uint32_t k = 0; k < u->ninterp; k++) {
      const rp_interp *ip = &u->interps[k];
      if (ip->dst_offset == RP_INTERP_SHARDS)
        continue;
      memcpy(stg + ex->lw->param_off[ui] + ip->dst_offset,
             s->args + ip->src_offset, ip->bytes);
      memcpy(u->args + ip->dst_offset, s->args + ip->src_offset, ip->bytes);
    }
    /* the task's host-side check of this replay's values: a bad one fails
     * the op (and poisons its successors) instead of reaching the device */
    rp_task_fn check = gl->interp_checks[i];
    rp_status cst = RP_OK;
    if (check && !s->unit_status[ui]) {
      rp_error_set(RP_OK, NULL); /* its words, not an earlier call's */
      cst = check(&u->ctx);
    }
    if (RP_UNLIKELY(cst != RP_OK))
      rp__unit_failed(ex, s, ui, rp__task_status(cst), rp_error_detail());
  }
  /* The staging slot is this replay's alone: the slot is re-armed only
   * after this replay completed, so the copy has run by then. */
  rp__count(&ex->lw->n_param_copies, 1);
  return DV(ex)->memcpy_async(ex->rt, gl->dev_params, stg, gl->param_bytes,
                              stream);
}

/* Every logical GPU of group g (g its leader): the leader holds the
 * group's one buffer, refreshed with one copy on its stream. */
static rp_status refresh_group(rp_exec *ex, uint32_t g, rp_slot *s,
                               uint32_t slot) {
  rp_gpu_lane *gl = &ex->lw->gpus[g];
  return refresh_params(ex, gl, s, slot, gl->stream);
}

/* Other GPUs' producers: stream-level waits before the segment (the
 * event's last record was issued by an earlier launch, see lower.h). */
static rp_status wait_events(rp_exec *ex, const rp_seg *sg,
                             const rp_gpu_lane *gl) {
  for (uint32_t i = 0; i < sg->nev; i++) {
    rp_status st = DV(ex)->stream_wait_event(
        ex->rt, gl->stream, ex->lw->seg_events[sg->ev_off + i]);
    if (st)
      return st;
  }
  return RP_OK;
}

/* Issues a task unit on the stream, as run_task does on a CPU lane. */
static rp_status issue_task(rp_unit *u, rp_slot *s, void *stream, int *skip,
                            const char **why) {
  uint32_t shards = rp__unit_shards(u, s);
  if (!shards) {
    *skip = 1; /* this replay runs fewer shards: not a failure */
    return RP_OK;
  }
  u->ctx.shards = shards;
  u->ctx.stream = stream;
  const char **violation = rp__tl_replay_violation;
  rp_error_set(RP_OK, NULL); /* a failure's words are the task's own */
  rp_status raw = u->fn(&u->ctx);
  if (violation && *violation) {
    *why = rp__contract_why(*violation);
    *violation = NULL;
    return RP_ECONTRACT;
  }
  rp_status st = rp__task_status(raw);
  const char *bad = rp__task_returned_why(st, raw);
  if (bad)
    *why = bad;
  return st;
}

static rp_status issue_unit(rp_exec *ex, uint32_t ui, rp_slot *s,
                            const rp_gpu_lane *gl, int *skip,
                            const char **why) {
  rp_unit *u = &ex->units[ui];
  rp_status st;
  rp__nvtx_push(rp__unit_label(u));
  if (u->kind == RP_UNIT_COPY) {
    st = rp_xfer_check(u->xd);
    if (!st) {
      rp_xfer_reset(u->xd);
      st = rp_xfer_run_stream(u->xd, gl->stream);
    }
  } else {
    st = issue_task(u, s, gl->stream, skip, why);
  }
  if (!st && !*skip && ex->lw->events[ui])
    st = DV(ex)->event_record(ex->rt, ex->lw->events[ui], gl->stream);
  if (st && !*why)
    *why = rp_error_detail();
  rp__nvtx_pop();
  return st;
}

typedef struct issue_count {
  uint64_t run, skipped;
} issue_count;

/* Op by op on the GPU's stream, in topological order, skipping members
 * whose precondition or predecessor failed (failures of this segment's
 * own members propagate as they happen). */
static void issue_members(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                          const rp_gpu_lane *gl, issue_count *n) {
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t ui = ex->lw->members[sg->first + i];
    const rp_unit *u = &ex->units[ui];
    if (RP_UNLIKELY(s->unit_status[ui])) { /* failed its args check */
      n->skipped++;
      continue;
    }
    const char *why = NULL;
    rp_status st = port_status(ex, u, s, &why);
    if (!st && atomic_load_explicit(&s->any_fail, memory_order_relaxed)) {
      why = "upstream op failed";
      st = rp__pred_status(ex, u, s);
    }
    if (st) {
      rp__unit_failed(ex, s, ui, st, why);
      n->skipped++;
      continue;
    }
    int skip = 0;
    why = NULL;
    st = issue_unit(ex, ui, s, gl, &skip, &why);
    if (st)
      rp__unit_failed(ex, s, ui, st, why);
    n->run += !skip;
  }
}

/* A CUDA call failed before the segment was issued: every member not yet
 * failed fails with it. */
static void fail_members(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                         rp_status st, issue_count *n) {
  char why[RP_SLOT_DETAIL]; /* a unit's failure line holds no more */
  snprintf(why, sizeof why, "%s", rp_error_detail());
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t ui = ex->lw->members[sg->first + i];
    if (!s->unit_status[ui]) {
      rp__unit_failed(ex, s, ui, st, why);
      n->skipped++;
    }
  }
}

/* The event pair of segment sg in traced slot s, or NULL. */
static void **trace_pair(rp_exec *ex, const rp_seg *sg, const rp_slot *s,
                         uint8_t **how) {
  struct rp_lower_trace *t = ex->lw->trace;
  if (!t || s->r < t->from || s->r - t->from >= t->n)
    return NULL;
  size_t i =
      (size_t)(s->r - t->from) * ex->lw->nseg + (size_t)(sg - ex->lw->segs);
  *how = &t->how[i];
  return &t->ev[2 * i];
}

/* Issues the segment's work for one replay (not stale). A traced replay
 * brackets it with its two timing events (their failure fails nothing:
 * the trace then shows the host times only). */
static void issue_segment(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                          uint32_t slot, rp_status ports, issue_count *n) {
  rp_lower *lw = ex->lw;
  rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  uint8_t *how = NULL;
  void **tev = RP_UNLIKELY(s->traced) ? trace_pair(ex, sg, s, &how) : NULL;
  rp_status st = DV(ex)->device_use(ex->rt, gl->device);
  if (!st && sg->first_of_gpu)
    st = refresh_group(ex, sg->gpu, s, slot);
  /* The fast path: one graph launch, nothing to skip (decided after the
   * refresh: its args checks may fail members). */
  int graph = sg->exec && ports == RP_OK && !members_poisoned(ex, sg, s);
  /* A graph waits for other GPUs' producers itself (event wait nodes);
   * issued op by op, the stream waits before the members. */
  if (!st && !graph && sg->nev) {
    st = wait_events(ex, sg, gl);
    if (!st)
      rp__count(&lw->n_stream_waits, sg->nev);
  }
  if (tev && !st && DV(ex)->event_record(ex->rt, tev[0], gl->stream))
    tev = NULL;
  if (!st && graph) {
    st = DV(ex)->graph_launch(ex->rt, sg->exec, gl->stream);
    if (!st) {
      n->run += sg->n;
      rp__count(&lw->n_graph_launches, 1);
    }
  } else if (!st) {
    uint64_t before = n->run;
    issue_members(ex, sg, s, gl, n);
    rp__count(&lw->n_op_by_op, n->run - before);
  }
  if (st)
    fail_members(ex, sg, s, st, n);
  else if (tev && !DV(ex)->event_record(ex->rt, tev[1], gl->stream))
    *how = graph ? 1 : 2;
}

/* A traced replay's result of the segment: its members' first failure. */
static rp_status seg_status(const rp_exec *ex, const rp_seg *sg,
                            const rp_slot *s) {
  if (s->stale)
    return RP_ESTALE;
  if (!atomic_load_explicit(&s->any_fail, memory_order_relaxed))
    return RP_OK;
  for (uint32_t i = 0; i < sg->n; i++) {
    int32_t st = s->unit_status[ex->lw->members[sg->first + i]];
    if (st)
      return (rp_status)st;
  }
  return RP_OK;
}

rp_status rp__lower_launch(rp_exec *ex, uint32_t ui, rp_slot *s, uint64_t rel,
                           uint64_t *t_issue) {
  rp_lower *lw = ex->lw;
  uint32_t k = lw->seg_of[ui];
  const rp_seg *sg = &lw->segs[k];
  uint32_t slot = (uint32_t)(s - ex->slots);
  rp__nvtx_push("reprise.segment");
  /* host dependencies of the members, this replay's and the previous */
  for (uint32_t i = 0; i < sg->nwait; i++)
    rp__lane_wait(ex, &lw->waits[sg->wait_off + i], rel);
  rp_status ports = wait_ports(ex, &ex->units[ui], s);
  if (sg->nwait | ex->units[ui].nport | ex->units[ui].nwait)
    rp__count(&lw->n_host_waits,
              sg->nwait + ex->units[ui].nport + ex->units[ui].nwait);
  int traced = s->traced;
  if (RP_UNLIKELY(traced) && t_issue)
    *t_issue = rp__now_ns();
  for (uint32_t i = 0; i < sg->npub; i++) /* rp_ctx_replay of tasks
                                              issued op by op */
    ex->lanes[lw->pubs[sg->pub_off + i].lane].cur_replay = s->r;
  rp_lane *l = &ex->lanes[sg->lane];
  issue_count n = {0, 0};
  if (!s->stale)
    issue_segment(ex, sg, s, slot, ports, &n);
  else
    n.skipped = sg->n; /* as CPU lanes count a stale replay's units */
  /* GPU lanes are written by their launchers only (one lane each) */
  atomic_fetch_add_explicit(&l->ops_run, n.run, memory_order_relaxed);
  atomic_fetch_add_explicit(&l->ops_skipped, n.skipped, memory_order_relaxed);
  signal_segment(ex, k, s, slot, rel);
  rp__nvtx_pop();
  /* the slot stays this replay's until this launcher's lane finished it */
  return RP_UNLIKELY(traced) ? seg_status(ex, sg, s) : RP_OK;
}

int rp__lower_device_save(rp_exec *ex) {
  int prev = -1; /* makes the first GPU's device current, as a launch will */
  return DV(ex)->device_enter(ex->rt, ex->lw->gpus[0].device, &prev) == RP_OK
             ? prev
             : -1;
}

void rp__lower_device_restore(rp_exec *ex, int dev) {
  if (dev >= 0)
    (void)DV(ex)->device_use(ex->rt, dev);
}

/* ---- quiesce and destroy safety ---- */

/* 1 when the CUDA context is lost (a sticky error, found by polling the
 * exec's streams: a device fault surfaces on the next call). */
static int context_lost(rp_exec *ex) {
  for (uint32_t i = 0; i < ex->lw->ngpu; i++)
    if (ex->lw->gpus[i].stream)
      (void)DV(ex)->stream_poll(ex->rt, ex->lw->gpus[i].stream);
  return rp__runtime_check(ex->rt) != RP_OK;
}

/* After a lost context CUDA runs no more host functions: publish every
 * GPU lane past the replays in flight (so that host units waiting on them
 * finish their lanes) and give each in-flight replay the completions its
 * callbacks owe, with RP_EUNUSABLE. */
static void rescue(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint64_t end = ex->issued - ex->epoch + 1;
  for (uint32_t i = 0; i < lw->ngpu; i++) {
    rp_lane *l = &ex->lanes[lw->gpus[i].lane];
    lane_publish(l, (uint32_t)end * l->len);
  }
  /* done_seq counts replays modulo 2^32 */
  uint32_t inflight = (uint32_t)ex->issued - atomic_load(&ex->done_seq);
  for (uint64_t r = ex->issued - inflight; r < ex->issued; r++) {
    rp_slot *s = &ex->slots[r % ex->max_inflight];
    int32_t zero = 0;
    atomic_compare_exchange_strong(&s->status, &zero, (int32_t)RP_EUNUSABLE);
    for (uint32_t g = 0; g < lw->ngpu; g++) {
      size_t i = (r % ex->max_inflight) * lw->ngpu + g;
      if (atomic_exchange(&lw->owed[i], 0) == 0)
        continue;
      if (atomic_load(&lw->launched[i]) == r + 1) /* the poller's count */
        atomic_fetch_sub(&lw->lr->pending, 1);
      rp__slot_sources_done(ex, s, lw->gpus[g].nsrc);
    }
  }
}

int rp__lower_quiesce(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint64_t last = rp__now_ns(), rescued_at = 0;
  rp_backoff b = RP_BACKOFF_HOST;
  for (;;) {
    /* acquire: pairs with the callbacks' release decrement */
    int idle = atomic_load(&ex->done_seq) == (uint32_t)ex->issued &&
               atomic_load_explicit(&lw->cb_pending, memory_order_acquire) == 0;
    if (idle && !rescued_at)
      return 0;
    uint64_t now = rp__now_ns();
    if (rescued_at && (idle || now - rescued_at > 2000000000ull))
      return 1; /* callbacks may never run: the exec is leaked */
    if (!rescued_at && now - last > 1000000) {
      last = now;
      if (context_lost(ex)) {
        rescue(ex);
        rescued_at = now;
      }
    }
    if (!rp__backoff(&b))
      rp__nap(50000); /* destroy path: a sleep, not a futex */
  }
}
