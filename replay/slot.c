/* replay/slot.c — a replay's slot, shared by the CPU lanes (scheduler.c)
 * and the GPU launcher (gpu_launch.c): a unit's failure and what it
 * poisons, postcondition delivery, the one completion counter and in-order
 * completion (finish: the done event, the completion interval, the tuning
 * and trace records of the replay), and the exec handle check. It calls
 * nothing above it in replay/ (trace.c's records, the engine's events). */
#include "replay_impl.h"

#include <string.h>

void rp__unit_failed(rp_exec *ex, rp_slot *s, uint32_t ui, rp_status st,
                     const char *why) {
  const rp_unit *u = &ex->units[ui];
  s->unit_status[ui] = st;
  int32_t zero = 0;
  /* a named op: "op 3 'fc1.fwd' (rp.gemm)"; else "op 3 (rp.gemm)" */
  const char *kind = u->kind == RP_UNIT_COPY ? "copy"
                     : u->task_name          ? u->task_name
                                             : u->name;
  const char *named = u->name && u->name != u->task_name ? u->name : NULL;
  char line[RP_SLOT_DETAIL];
  snprintf(line, sizeof line, "replay %llu: op %u%s%s%s (%s) shard %u: %s: %s",
           (unsigned long long)s->r, u->op, named ? " '" : "",
           named ? named : "", named ? "'" : "", kind, u->shard,
           rp_status_name(st), why ? why : "");
  if (atomic_compare_exchange_strong(&s->status, &zero, (int32_t)st)) {
    memcpy(s->detail, line, sizeof line);
    atomic_store_explicit(&s->detail_ready, 1, memory_order_release);
  }
  for (uint32_t k = 0; k < u->npost; k++) {
    uint32_t p = ex->posts[u->post_off + k];
    zero = 0;
    /* the port's words are the unit's whose status it takes; read once
     * the port's last unit is done (post_left, acq_rel) */
    if (!atomic_compare_exchange_strong(&s->post_status[p], &zero, (int32_t)st))
      continue;
    /* a unit skipped after a failure adds the replay's first failure, so
     * the port names a cause (said to be the replay's: another lane's
     * independent failure may be the first) */
    int upstream = why && !strcmp(why, "upstream op failed") &&
                   atomic_load_explicit(&s->detail_ready, memory_order_acquire);
    snprintf(s->post_detail[p], sizeof s->post_detail[p], "%s%s%s%s", line,
             upstream ? " (the replay's first failure: " : "",
             upstream ? s->detail : "", upstream ? ")" : "");
  }
  /* relaxed: readers synchronize through the lane progress they waited on */
  atomic_store_explicit(&s->any_fail, 1, memory_order_relaxed);
}

const char *rp__port_why(const rp_exec *ex, const rp_slot *s, uint32_t p) {
  static _Thread_local char buf[RP_SLOT_DETAIL];
  const char *w = rp__event_why(ex->rt, s->pre[p]);
  snprintf(buf, sizeof buf, "precondition %u ('%s') poisoned%s%s", p,
           ex->g->pre[p].name, w ? ": " : "", w ? w : "");
  return buf;
}

const char *rp__task_returned_why(rp_status st, rp_status raw) {
  static _Thread_local char buf[64];
  if (st == raw || rp_error_detail()[0])
    return NULL;
  snprintf(buf, sizeof buf, "the task returned %d, not an rp_status", (int)raw);
  return buf;
}

/* Slow path, only after a failure in this replay: inherit a predecessor's
 * status. */
rp_status rp__pred_status(const rp_exec *ex, const rp_unit *u,
                          const rp_slot *s) {
  for (uint32_t i = 0; i < u->npred; i++) {
    int32_t st = s->unit_status[ex->preds[u->pred_off + i]];
    if (st)
      return (rp_status)st;
  }
  return RP_OK;
}

void rp__post_done(rp_exec *ex, const rp_unit *u, rp_slot *s) {
  for (uint32_t k = 0; k < u->npost; k++) {
    uint32_t p = ex->posts[u->post_off + k];
    if (atomic_fetch_sub_explicit(&s->post_left[p], 1, memory_order_acq_rel) ==
        1) {
      rp_status st = (rp_status)atomic_load(&s->post_status[p]);
      /* a failure's event carries the words of the unit whose status it
       * took (its own failure, or "upstream op failed" naming it) */
      rp__event_complete_why(ex->rt, s->post[p], st,
                             st ? s->post_detail[p] : NULL);
    }
  }
}

/* Completes replay s->r, which is next in order (done_seq == s->r). */
static void finish(rp_exec *ex, rp_slot *s) {
  uint32_t me = (uint32_t)s->r;
  rp_status st = (rp_status)atomic_load(&s->status);
  if (st) {
    pthread_mutex_lock(&ex->detail_lock); /* failure path only */
    memcpy(ex->last_detail, s->detail, sizeof ex->last_detail);
    if (ex->tuning && !ex->tune_fail_seen) { /* replays finish in order */
      memcpy(ex->tune_fail_detail, s->detail, sizeof ex->tune_fail_detail);
      ex->tune_fail_seen = 1;
    }
    pthread_mutex_unlock(&ex->detail_lock);
  }
  for (uint32_t i = 0; i < ex->npre; i++)
    rp__event_unref(ex->rt, s->pre[i]); /* retained by slot_events */
  uint64_t now = rp__now_ns();
  if (RP_UNLIKELY(ex->tuning))
    rp__tune_record(ex, s, now);
  /* completion interval, smoothed (1/8): the host's slot-wait budget */
  uint64_t last = ex->last_done_ns,
           iv = atomic_load_explicit(&ex->interval_ns, memory_order_relaxed);
  if (last && now > last)
    atomic_store_explicit(&ex->interval_ns, iv - iv / 8 + (now - last) / 8,
                          memory_order_relaxed);
  ex->last_done_ns = now;
  if (RP_UNLIKELY(s->traced)) /* before done_seq: trace_write waits on it */
    rp__trace_done(ex, s, now, st);
  atomic_fetch_add_explicit(&ex->completed, 1, memory_order_relaxed);
  /* a failure's event carries the replay's detail (copied: the slot is
   * reused) */
  rp__event_complete_why(ex->rt, s->done, st, st ? s->detail : NULL);
  /* seq_cst store pairs with a waiting host's seq_cst sleeper count, and
   * with complete()'s seq_cst store of `zeroed` (see there) */
  atomic_store(&ex->done_seq, me + 1);
  if (atomic_load(&ex->done_sleepers) &&
      (int32_t)(me + 1 - atomic_load(&ex->wake_at)) >= 0)
    rp__futex_wake(&ex->done_seq, 0x7fffffff);
}

/* Called by the last completion source of s (a lane, or a GPU's host
 * callback). Replays complete in order, and a completer never waits for
 * an earlier replay: a CUDA host callback must not block, and callbacks
 * of independent streams may share one thread. So it marks the slot done
 * and completes it only if it is next; whoever completes the replay before
 * it then chains on. Dekker pairing: this thread stores `zeroed` then
 * loads done_seq, the previous completer stores done_seq then loads
 * `zeroed` (all seq_cst), so at least one of them sees the other; the CAS
 * from 1 to 2 makes exactly one of them complete it. */
void rp__slot_complete(rp_exec *ex, rp_slot *s) {
  atomic_store(&s->zeroed, 1);
  for (;;) {
    uint64_t r = s->r;
    if (atomic_load(&ex->done_seq) != (uint32_t)r)
      return; /* the completer of replay r - 1 will chain on */
    uint32_t one = 1;
    if (!atomic_compare_exchange_strong(&s->zeroed, &one, 2))
      return; /* claimed by the other side */
    finish(ex, s);
    /* the next replay, if its counter already reached zero */
    s = &ex->slots[(r + 1) % ex->max_inflight];
    if (atomic_load(&s->zeroed) != 1)
      return;
  }
}

void rp__slot_source_done(rp_exec *ex, rp_slot *s) {
  /* acq_rel: the last source sees every other source's writes */
  if (atomic_fetch_sub_explicit(&s->remaining, 1, memory_order_acq_rel) == 1)
    rp__slot_complete(ex, s);
}

void rp__slot_sources_done(rp_exec *ex, rp_slot *s, uint32_t n) {
  if (n &&
      atomic_fetch_sub_explicit(&s->remaining, n, memory_order_acq_rel) == n)
    rp__slot_complete(ex, s);
}

void rp__tune_record(rp_exec *ex, rp_slot *s, uint64_t end) {
  uint64_t start = atomic_load_explicit(&s->t_start, memory_order_relaxed);
  if (ex->last_end > start)
    start = ex->last_end;
  ex->last_end = end;
  if (s->timed && ex->ndt < RP_TRIAL_LEN && end > start)
    ex->dts[ex->ndt++] = end - start;
}
