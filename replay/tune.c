/* replay/tune.c — placement by measurement, when the caller asks for it.
 *
 * rp_replay only replays: it never measures, re-places, allocates or waits
 * for the exec to go quiet. A cost model only predicts, so when some units
 * were placed without a cost hint the caller may run rp_exec_tune (public,
 * include/reprise.h): it times trial replays (each unit's fastest run, then
 * each replay's duration), plans the candidate placements those costs
 * suggest — list scheduling on the measured costs, and everything on one
 * worker — runs a window of replays on each, and keeps the one whose
 * replays were fastest. Every change happens between windows, with nothing
 * of the exec in flight; the planning allocates (place.c), which is why it
 * lives here and not on the replay path.
 *
 * Why an explicit call and not trial replays inside rp_instantiate: a
 * trial replay is a real replay. A training step updates its weights and
 * optimizer state, advances counters, may consume a data batch, and a
 * graph with precondition ports cannot run before its inputs are ready.
 * Instantiating must not run the user's step behind their back (nor
 * block on events nobody triggered yet), so the caller chooses when the
 * extra replays are harmless — on warm-up data, on a scratch copy of the
 * state, or as the first steps of a run — the way CUDA-graph users run
 * warm-up iterations before capture. Without the call the exec keeps the
 * placement instantiate chose (hints, else a 1 us default), and nothing
 * about it changes at replay time.
 *
 * A replay's duration, in steady state, is the time from when it could
 * start (its first lane began, or the previous replay completed, whichever
 * is later) to its completion: with replays back to back (as rp_exec_tune
 * issues them) that is the throughput, and for a lone replay its latency. */
#include "replay_impl.h"

#include <string.h>

static void trial_free(rp_trial *t) {
  free(t->lane);
  free(t->seq);
  memset(t, 0, sizeof *t);
}

void rp__tune_free(rp_exec *ex) {
  for (uint32_t i = 0; i < RP_TRIALS; i++)
    trial_free(&ex->trials[i]);
}

static rp_status trial_alloc(rp_exec *ex, rp_trial *t, const char *what,
                             const char *label) {
  t->lane = malloc(sizeof *t->lane * (ex->nunits ? ex->nunits : 1));
  t->seq = malloc(sizeof *t->seq * (ex->nunits ? ex->nunits : 1));
  t->what = what;
  t->label = label;
  t->median_ns = UINT64_MAX;
  return t->lane && t->seq ? RP_OK
                           : rp__err(RP_ENOMEM, "rp_exec_tune: out of memory");
}

/* Saves the placement now in effect as trial 0. */
static rp_status tune_init(rp_exec *ex) {
  rp_trial *t = &ex->trials[0];
  rp_status st = trial_alloc(ex, t,
                             ex->tuned ? "previous (measured before)"
                                       : "initial (hinted or default costs)",
                             "initial");
  if (st)
    return st;
  for (uint32_t u = 0; u < ex->nunits; u++)
    t->lane[u] = ex->units[u].lane;
  if (ex->nunits)
    memcpy(t->seq, ex->order, sizeof *t->seq * ex->nunits);
  ex->ntrials = 1;
  ex->cur_trial = 0;
  ex->tune_phase = 0;
  ex->ndt = 0;
  ex->last_end = 0;
  for (uint32_t u = 0; u < ex->nunits; u++)
    ex->units[u].measured_ns = UINT64_MAX;
  /* the fastest of a few back-to-back clock reads: what a timing of an
   * empty unit measures on its own */
  ex->clock_ns = UINT64_MAX;
  for (int i = 0; i < 32; i++) {
    uint64_t a = rp__now_ns(), b = rp__now_ns();
    if (b - a < ex->clock_ns)
      ex->clock_ns = b - a;
  }
  ex->tuning = 1;
  return RP_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t window_median(rp_exec *ex) {
  if (!ex->ndt)
    return UINT64_MAX;
  qsort(ex->dts, ex->ndt, sizeof *ex->dts, cmp_u64);
  return ex->dts[ex->ndt / 2];
}

uint64_t (*rp__tune_cost_hook)(const char *what, uint32_t workers,
                               uint64_t measured_ns);

/* The number of lanes trial t places units on (for the cost hook only). */
static uint32_t trial_workers(const rp_exec *ex, const rp_trial *t) {
  uint32_t n = 0;
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    uint32_t u = 0;
    while (u < ex->nunits && t->lane[u] != w)
      u++;
    n += u < ex->nunits;
  }
  return n;
}

static int same_lanes(const rp_exec *ex, const rp_trial *a, const rp_trial *b) {
  return !memcmp(a->lane, b->lane, sizeof *a->lane * ex->nunits);
}

/* Plans a candidate (the units' lanes are restored afterwards); keeps it
 * unless an earlier trial places every unit the same way. */
/* Returns 1 when the candidate could not be planned (out of memory). */
static int add_candidate(rp_exec *ex, uint32_t max_lanes, const char *what,
                         const char *label) {
  rp_trial *t = &ex->trials[ex->ntrials];
  int lost = 0;
  if (trial_alloc(ex, t, what, label) != RP_OK ||
      rp__place_plan(ex, 1, max_lanes, t->seq) != RP_OK) {
    trial_free(t);
    lost = 1;
  } else {
    for (uint32_t u = 0; u < ex->nunits; u++)
      t->lane[u] = ex->units[u].lane;
    int dup = 0;
    for (uint32_t i = 0; i < ex->ntrials && !dup; i++)
      dup = same_lanes(ex, &ex->trials[i], t);
    if (dup)
      trial_free(t);
    else
      ex->ntrials++;
  }
  const rp_trial *cur = &ex->trials[ex->cur_trial];
  for (uint32_t u = 0; u < ex->nunits; u++)
    ex->units[u].lane = cur->lane[u];
  return lost;
}

/* Makes trial i the placement in effect. Progress words restart at zero in
 * the new epoch (nothing is in flight). On failure the placement in effect
 * (trial cur_trial) stays, whole: rp__place_finalize changes nothing
 * before its last allocation, and the units' lanes go back. */
static rp_status apply(rp_exec *ex, uint32_t i) {
  rp_trial *t = &ex->trials[i];
  /* every worker of the old placement leaves the exec first: quiesce,
   * later, waits only for the workers of the new one */
  if (rp__exec_quiesce(ex))
    return rp__err(RP_EUNUSABLE,
                   "rp_exec_tune: the CUDA context was lost: "
                   "%s",
                   rp_error_detail());
  for (uint32_t u = 0; u < ex->nunits; u++)
    ex->units[u].lane = t->lane[u];
  rp_status st = rp__place_finalize(ex, t->seq);
  if (st) {
    const rp_trial *cur = &ex->trials[ex->cur_trial];
    for (uint32_t u = 0; u < ex->nunits; u++)
      ex->units[u].lane = cur->lane[u];
    return st;
  }
  ex->cur_trial = i;
  ex->epoch = ex->issued;
  for (uint32_t w = 0; w < ex->nlanes; w++)
    atomic_store(&ex->lanes[w].progress, 0);
  return RP_OK;
}

/* Ends the measurement: no replay is timed any more. */
static void tune_end(rp_exec *ex) {
  ex->tuning = 0;
  ex->measure_from = ex->measure_to = 0;
  rp__tune_free(ex);
}

static rp_status settle(rp_exec *ex) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < ex->ntrials; i++)
    /* leave the initial placement only for a clear (10%) gain */
    if (ex->trials[i].median_ns * 10 < ex->trials[0].median_ns * 9 &&
        ex->trials[i].median_ns < ex->trials[best].median_ns)
      best = i;
  rp_status st = best != ex->cur_trial ? apply(ex, best) : RP_OK;
  if (st) /* still tuning: tune_run goes back to the placement before */
    return st;
  if (best != 0)
    ex->replacements++;
  if (ex->ntrials == 1) { /* no other placement to time */
    if (ex->tune_lost)
      snprintf(ex->place_why, sizeof ex->place_why,
               "%s: %u candidate placement%s could not be planned (out of "
               "memory), nothing measured",
               ex->trials[0].what, ex->tune_lost,
               ex->tune_lost == 1 ? "" : "s");
    else
      snprintf(ex->place_why, sizeof ex->place_why,
               "%s: the candidates (list scheduling on measured costs, one "
               "worker) place every op as it does, nothing to measure",
               ex->trials[0].what);
    ex->tuned = 1;
    tune_end(ex);
    return st;
  }
  int n = snprintf(ex->place_why, sizeof ex->place_why,
                   "%s after measuring "
                   "replays:",
                   ex->trials[best].what);
  for (uint32_t i = 0;
       i < ex->ntrials && n > 0 && (size_t)n < sizeof ex->place_why; i++)
    n += snprintf(ex->place_why + n, sizeof ex->place_why - (size_t)n,
                  " %s %llu ns%s", ex->trials[i].label,
                  (unsigned long long)ex->trials[i].median_ns,
                  i + 1 < ex->ntrials ? "," : "");
  ex->tuned = 1;
  tune_end(ex);
  return st;
}

static void next_window(rp_exec *ex) {
  ex->ndt = 0;
  ex->measure_from = ex->issued;
  ex->measure_to = ex->issued + RP_TRIAL_LEN;
}

/* Windows: units are timed first (the timing itself would slow a timed
 * replay, so replay times are taken in later windows); then the placement
 * in effect and each candidate are timed in turn. Called with nothing of
 * the exec in flight (rp_exec_tune waits for that first). */
static rp_status tune_step(rp_exec *ex) {
  if (ex->tune_phase == 0) {
    /* unit costs are known now: plan the candidates */
    ex->tune_lost =
        add_candidate(ex, ex->nlanes, "list scheduling on measured costs",
                      "measured") +
        add_candidate(ex, 1, "one worker", "one-worker");
    ex->tune_phase = 1;
    if (ex->ntrials > 1) {
      next_window(ex);
      return RP_OK;
    }
    return settle(ex);
  }
  rp_trial *cur = &ex->trials[ex->cur_trial];
  cur->median_ns = window_median(ex);
  if (rp__tune_cost_hook)
    cur->median_ns =
        rp__tune_cost_hook(cur->what, trial_workers(ex, cur), cur->median_ns);
  uint32_t next = ex->cur_trial + 1;
  if (next < ex->ntrials) {
    rp_status st = apply(ex, next);
    next_window(ex);
    return st;
  }
  return settle(ex);
}

/* Issues replays until ex->measure_to, back to back (up to max_inflight in
 * flight, as a training loop keeps them), then waits for every one: the
 * first failure among them, if any. */
static rp_status run_window(rp_exec *ex, const rp_replay_args *a,
                            uint32_t *replays) {
  rp_event done[RP_TRIAL_LEN + 1];
  uint32_t n = 0;
  rp_status st = RP_OK;
  pthread_mutex_lock(&ex->detail_lock); /* nothing in flight: a fresh */
  ex->tune_fail_seen = 0;               /* window's first failure */
  pthread_mutex_unlock(&ex->detail_lock);
  while (ex->issued < ex->measure_to && n < RP_TRIAL_LEN + 1 && !st) {
    st = rp__replay_owned(ex, a, &done[n]);
    if (!st)
      n++;
  }
  /* the first failure's detail, kept past the later waits (each failing
   * wait sets its own): an issue's that failed, else a replay's */
  char why[sizeof ex->tune_fail_detail] = "";
  if (st)
    snprintf(why, sizeof why, "%s", rp_error_detail());
  for (uint32_t i = 0; i < n; i++) {
    rp_status rs = rp_event_wait(ex->rt, done[i], -1);
    rp_event_release(ex->rt, done[i]);
    if (rs && !st) { /* finish() stored it before the done event */
      pthread_mutex_lock(&ex->detail_lock);
      snprintf(why, sizeof why, "%s",
               ex->tune_fail_seen ? ex->tune_fail_detail
                                  : rp_exec_error_detail(ex));
      pthread_mutex_unlock(&ex->detail_lock);
      st = rs;
    }
  }
  *replays += n;
  if (st)
    return rp__err(st, "%s", why);
  /* completed: only a completer's last stores can still be under way */
  return rp__exec_wait_quiet(ex, "rp_exec_tune");
}

/* The trial replays and placement steps; ex->in_replay is held and nothing
 * of ex is in flight. On failure the placement in effect before the call is
 * restored. */
static rp_status tune_run(rp_exec *ex, const rp_replay_args *a,
                          uint32_t *replays) {
  rp_status st = tune_init(ex);
  if (st) {
    rp__tune_free(ex);
    return st;
  }
  /* replay `issued` warms caches, the next RP_TRIAL_LEN time the units */
  ex->measure_from = ex->issued + 1;
  ex->measure_to = ex->issued + 1 + RP_TRIAL_LEN;
  while (ex->tuning && !st) {
    st = run_window(ex, a, replays);
    if (!st)
      st = tune_step(ex);
  }
  if (st && ex->tuning) {
    char why[RP_SLOT_DETAIL + 64]; /* a replay's failure line, prefixed */
    snprintf(why, sizeof why, "%s", rp_error_detail());
    /* back to the placement in effect before the call; should that run
     * out of memory too, the trial's placement in effect stays (whole) */
    int kept = ex->cur_trial == 0 || apply(ex, 0) == RP_OK;
    tune_end(ex);
    st =
        rp__err(st, "rp_exec_tune: after %u trial replay(s) (%s): %s", *replays,
                kept ? "the placement in effect before the call is kept"
                     : "restoring the placement in effect before the call "
                       "ran out of memory: the last trial's placement stays",
                why);
  }
  return st;
}

static int wants_tuning(const rp_exec *ex) {
  if (ex->no_replace)
    return 0;
  for (uint32_t u = 0; u < ex->nunits; u++)
    if (ex->units[u].measure)
      return 1;
  return 0;
}

rp_status rp_exec_tune(rp_exec *ex, const rp_replay_args *a,
                       uint32_t *replays) {
  /* trial replays hand out no postcondition events: a->post is ignored,
   * not checked */
  rp_replay_args ta = a ? *a : (rp_replay_args){0};
  ta.post = NULL;
  ta.npost = 0;
  rp_status st = rp__replay_check(ex, a ? &ta : NULL, "rp_exec_tune");
  if (st)
    return st;
  if (rp__tl_in_callback) /* it always waits for its trial replays */
    return rp__err(RP_EBUSY, "rp_exec_tune: called from an event's "
                             "callback, which must not block (nothing was "
                             "run)");
  if (rp__in_task_of(ex->rt)) /* ...which may need this task's worker */
    return rp__err(RP_EBUSY, "rp_exec_tune: called from a running task of "
                             "this runtime: it waits for its trial replays, "
                             "which may need the task's worker (nothing was "
                             "run)");
  if (ex->ext && rp_runtime_ranks(ex->rt) > 1)
    return rp__err(RP_EUNSUPPORTED,
                   "rp_exec_tune: the exec communicates across %u ranks: "
                   "each rank would measure its own placements and run its "
                   "own number of trial replays, which its peers' "
                   "communication ops would not match (nothing was run)",
                   rp_runtime_ranks(ex->rt));
  for (uint32_t i = 0; i < ta.npre; i++) {
    rp_status ps = rp__event_peek(ex->rt, ta.pre[i]);
    if (ps == RP_EAGAIN)
      return rp__err(RP_EAGAIN,
                     "rp_exec_tune: precondition %u ('%s') has not "
                     "triggered: trial replays run now (nothing was run)",
                     i, ex->g->pre[i].name);
    if (ps)
      return rp__err(ps,
                     "rp_exec_tune: precondition %u ('%s') was poisoned "
                     "(%s): nothing was run",
                     i, ex->g->pre[i].name, rp_status_name(ps));
  }
  if ((st = rp__exec_take(ex, "rp_exec_tune")) != RP_OK)
    return st;
  rp__nvtx_push("reprise.tune");
  uint32_t ran = 0;
  st = rp__exec_wait_quiet(ex, "rp_exec_tune");
  if (!st && wants_tuning(ex)) /* its trial replays would queue behind a
                                  gated worker, waited for */
    st = rp__exec_refuse_worker_gated(
        ex, "rp_exec_tune",
        "then tune again (the trial replays would wait behind it; nothing "
        "was run)");
  if (!st && wants_tuning(ex))
    st = tune_run(ex, &ta, &ran);
  rp__nvtx_pop();
  rp__exec_give(ex);
  /* *replays says how many ran: on success, or on a failure after trial
   * replays ran; an error before any leaves it untouched */
  if (replays && (!st || ran))
    *replays = ran;
  return st;
}
