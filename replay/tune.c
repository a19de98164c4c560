/* replay/tune.c — placement by measurement.
 *
 * A cost model only predicts. When some units were placed without a cost
 * hint, the exec times its first replays (each unit's fastest run, and each
 * replay's duration), then tries the candidate placements those costs
 * suggest — list scheduling on the measured costs, and everything on one
 * worker — for a window of replays each, and keeps the one whose replays
 * were fastest. Every change happens between replays (rp_replay takes the
 * step only once the exec is quiet, postponing it otherwise: it never waits
 * for replays in flight, which may be gated on the caller), never during one;
 * at most two trials run, so the exec settles after a few dozen replays and
 * never moves again.
 *
 * A replay's duration, in steady state, is the time from when it could
 * start (its first lane began, or the previous replay completed, whichever
 * is later) to its completion: with replays back to back that is the
 * throughput, and for a lone replay its latency. */
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

static rp_status trial_alloc(rp_exec *ex, rp_trial *t, const char *what) {
  t->lane = malloc(sizeof *t->lane * (ex->nunits ? ex->nunits : 1));
  t->seq = malloc(sizeof *t->seq * (ex->nunits ? ex->nunits : 1));
  t->what = what;
  t->median_ns = UINT64_MAX;
  return t->lane && t->seq ? RP_OK
                           : rp__err(RP_ENOMEM, "instantiate: out of memory");
}

/* Saves the placement now in effect as trial 0. */
rp_status rp__tune_init(rp_exec *ex) {
  rp_trial *t = &ex->trials[0];
  rp_status st = trial_alloc(ex, t, "initial (hinted or default costs)");
  if (st)
    return st;
  for (uint32_t u = 0; u < ex->nunits; u++)
    t->lane[u] = ex->units[u].lane;
  if (ex->nunits)
    memcpy(t->seq, ex->order, sizeof *t->seq * ex->nunits);
  ex->ntrials = 1;
  ex->cur_trial = 0;
  ex->tune_phase = 0;
  ex->tuning = 1;
  return RP_OK;
}

void rp__tune_record(rp_exec *ex, rp_slot *s, uint64_t end) {
  uint64_t start = atomic_load_explicit(&s->t_start, memory_order_relaxed);
  if (ex->last_end > start)
    start = ex->last_end;
  ex->last_end = end;
  if (s->timed && ex->ndt < RP_TRIAL_LEN && end > start)
    ex->dts[ex->ndt++] = end - start;
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

static int same_lanes(const rp_exec *ex, const rp_trial *a, const rp_trial *b) {
  return !memcmp(a->lane, b->lane, sizeof *a->lane * ex->nunits);
}

/* Plans a candidate (the units' lanes are restored afterwards); keeps it
 * unless an earlier trial places every unit the same way. */
static void add_candidate(rp_exec *ex, uint32_t max_lanes, const char *what) {
  rp_trial *t = &ex->trials[ex->ntrials];
  if (trial_alloc(ex, t, what) != RP_OK ||
      rp__place_plan(ex, 1, max_lanes, t->seq) != RP_OK) {
    trial_free(t);
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
}

/* Makes trial i the placement in effect. Progress words restart at zero in
 * the new epoch (nothing is in flight). */
static void apply(rp_exec *ex, uint32_t i) {
  rp_trial *t = &ex->trials[i];
  for (uint32_t u = 0; u < ex->nunits; u++)
    ex->units[u].lane = t->lane[u];
  if (rp__place_finalize(ex, t->seq) != RP_OK)
    return; /* out of memory: keep going with what finalize built */
  ex->cur_trial = i;
  ex->epoch = ex->issued;
  for (uint32_t w = 0; w < ex->nlanes; w++)
    atomic_store(&ex->lanes[w].progress, 0);
}

static void settle(rp_exec *ex) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < ex->ntrials; i++)
    /* leave the initial placement only for a clear (10%) gain */
    if (ex->trials[i].median_ns * 10 < ex->trials[0].median_ns * 9 &&
        ex->trials[i].median_ns < ex->trials[best].median_ns)
      best = i;
  if (best != ex->cur_trial)
    apply(ex, best);
  if (best != 0)
    ex->replacements++;
  int n = snprintf(ex->place_why, sizeof ex->place_why,
                   "%s after measuring "
                   "replays:",
                   ex->trials[best].what);
  for (uint32_t i = 0;
       i < ex->ntrials && n > 0 && (size_t)n < sizeof ex->place_why; i++)
    n += snprintf(ex->place_why + n, sizeof ex->place_why - (size_t)n,
                  " %s %llu ns%s",
                  i == 0   ? "initial"
                  : i == 1 ? "measured"
                           : "one-worker",
                  (unsigned long long)ex->trials[i].median_ns,
                  i + 1 < ex->ntrials ? "," : "");
  ex->tuning = 0;
  ex->measure_from = ex->measure_to = 0;
  rp__tune_free(ex);
}

static void next_window(rp_exec *ex) {
  ex->ndt = 0;
  ex->measure_from = (uint32_t)ex->issued;
  ex->measure_to = (uint32_t)ex->issued + RP_TRIAL_LEN;
}

/* Windows: units are timed first (the timing itself would slow a timed
 * replay, so replay times are taken in later windows); then the initial
 * placement and each candidate are timed in turn. */
void rp__tune_step(rp_exec *ex) {
  /* rp_replay calls this only once the exec is quiet (exec_quiet): no
   * rp__exec_quiesce here, which would wait for idle workers that another
   * exec's gated replay may hold */
  if (ex->tune_phase == 0) {
    /* unit costs are known now: plan the candidates */
    add_candidate(ex, ex->nlanes, "list scheduling on measured costs");
    add_candidate(ex, 1, "one worker");
    ex->tune_phase = 1;
    if (ex->ntrials > 1)
      next_window(ex);
    else
      settle(ex);
    return;
  }
  ex->trials[ex->cur_trial].median_ns = window_median(ex);
  uint32_t next = ex->cur_trial + 1;
  if (next < ex->ntrials) {
    apply(ex, next);
    next_window(ex);
  } else {
    settle(ex);
  }
}
