/* replay/trace.c — recording replay timelines (dump.c writes them out as
 * Chrome trace event JSON, which Perfetto (ui.perfetto.dev) and
 * chrome://tracing open): arming, the records of the replay path, and the
 * device times of GPU segments. It calls nothing in replay/ but inline
 * helpers (replay_impl.h), so the scheduler and the slot may record here.
 *
 * rp_exec_trace_start arms a window of the next N replays and allocates
 * every record those replays can write: one per unit per replay (a unit runs
 * once per replay, on one lane, so records need no index and no atomics),
 * plus each replay's submission and completion times. arm_slot marks a slot
 * traced when its replay falls in the window; a traced replay runs every
 * unit through the general path, which stamps the clock around each unit's
 * waits and run. Replays outside a window never look at any of this: the
 * fast path and the per-unit general path are unchanged for them, and no
 * clock is read (trace_clock_reads counts the reads, for the tests).
 *
 * Names: a unit's events carry the same string as its NVTX range (the task
 * name, RP_NVTX_COPY for copies), so a trace and an Nsight Systems
 * timeline line up. A replay's span runs from its submission to its
 * completion; the NVTX range "reprise.replay" covers only the rp_replay
 * call, so the two are named apart ("replay N").
 *
 * Timing note: a traced replay runs on the general path, so it costs a few
 * ns more per unit than an untraced one on the fast path; the trace shows
 * the shape of a replay (who waits for whom, for how long), not the last
 * nanosecond of the fast path.
 *
 * GPU segments (replay/lower.h): a GPU's ops are not run by a lane but
 * launched, one segment at a time, by a launcher unit on a CPU lane. Its
 * record is the host side (the segment's waits, then the launch call, on
 * the worker's track); gpu_launch.c also records two timing events around
 * the segment's work on the exec's replay stream, and the writer puts the
 * device span, mapped onto the host clock through a reference event
 * waited for at trace start, on the GPU's track ("gpu N"). Individual ops
 * inside a segment (one CUDA graph) get no events of their own. */
#include "gpu.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static uint64_t trace_clock(rp_exec *ex, uint64_t reads) {
  /* relaxed: a statistic, read after the replays it counts completed */
  atomic_fetch_add_explicit(&ex->trace_clock_reads, reads,
                            memory_order_relaxed);
  return rp__now_ns();
}

/* ---- the replay path (traced replays only) ---- */

void rp__trace_arm(rp_exec *ex, rp_slot *s, uint64_t r) {
  struct rp_trace *t = ex->trace;
  if (r < t->from || r >= t->to)
    return;
  s->traced = 1;
  t->replays[r - t->from].t_arm = trace_clock(ex, 1);
}

void rp__trace_unit(rp_exec *ex, const rp_slot *s, uint32_t unit, uint32_t lane,
                    uint64_t t_wait, uint64_t t_start, rp_status st, int skip) {
  struct rp_trace *t = ex->trace;
  rp_trace_rec *rec = &t->recs[(s->r - t->from) * t->nunits + unit];
  uint64_t reads = 1 + (t_wait != 0) + (t_start != 0);
  rec->t_end = trace_clock(ex, reads);
  rec->t_wait = t_wait;
  rec->t_start = t_start;
  rec->lane = lane;
  rec->status = skip == 1 ? 1 : (int32_t)st;
}

void rp__trace_done(rp_exec *ex, const rp_slot *s, uint64_t now, rp_status st) {
  struct rp_trace *t = ex->trace;
  rp_trace_replay *rr = &t->replays[s->r - t->from];
  rr->t_done = now; /* complete() read the clock already */
  rr->status = (int32_t)st;
}

uint64_t rp__exec_trace_clock_reads(const rp_exec *ex) {
  return atomic_load_explicit(&((rp_exec *)ex)->trace_clock_reads,
                              memory_order_relaxed);
}

void rp__trace_free(rp_exec *ex) {
  if (ex->lw) /* the exec's free did it already otherwise */
    rp__lower_trace_free(ex);
  if (!ex->trace)
    return;
  free(ex->trace->recs);
  free(ex->trace->replays);
  free(ex->trace);
  ex->trace = NULL;
}

/* ---- the public calls ---- */

static rp_status trace_start_owned(rp_exec *ex, uint32_t replays);

rp_status rp_exec_trace_start(rp_exec *ex, uint32_t replays) {
  rp_status st = rp__exec_check_call(ex, "rp_exec_trace_start");
  if (!st)
    st = rp__exec_refuse_model(ex, "rp_exec_trace_start");
  if (st)
    return st;
  if (!replays)
    return rp__err(RP_EINVAL, "rp_exec_trace_start: 0 replays");
  /* ex->trace and ex->issued are the host's: a replay issued meanwhile
   * from another thread reads and writes them */
  if ((st = rp__exec_take(ex, "rp_exec_trace_start")) != RP_OK)
    return st;
  st = trace_start_owned(ex, replays);
  rp__exec_give(ex);
  return st;
}

/* rp_exec_trace_start's work, for the thread that holds the exec. */
static rp_status trace_start_owned(rp_exec *ex, uint32_t replays) {
  if (ex->trace)
    return rp__err(RP_EBUSY,
                   "rp_exec_trace_start: a trace of replays "
                   "[%llu, %llu) is armed; write it first "
                   "(rp_exec_trace_write)",
                   (unsigned long long)ex->trace->from,
                   (unsigned long long)ex->trace->to);
  uint64_t n = (uint64_t)replays * (ex->nunits ? ex->nunits : 1);
  if (n > RP_TRACE_MAX_RECS)
    return rp__err(RP_ERANGE,
                   "rp_exec_trace_start: %u replays of %u units "
                   "need %llu records (at most %u)",
                   replays, ex->nunits, (unsigned long long)n,
                   RP_TRACE_MAX_RECS);
  struct rp_trace *t = rp__calloc(1, sizeof *t);
  if (t) {
    t->recs = rp__calloc((size_t)n, sizeof *t->recs);
    t->replays = rp__calloc(replays, sizeof *t->replays);
  }
  if (!t || !t->recs || !t->replays) {
    if (t) {
      free(t->recs);
      free(t->replays);
    }
    free(t);
    return rp__err(RP_ENOMEM, "rp_exec_trace_start: out of memory");
  }
  t->nunits = ex->nunits;
  t->from = ex->issued; /* the next replay rp_replay will arm */
  t->to = t->from + replays;
  rp_status lst = ex->lw ? rp__lower_trace_start(ex, t->from, replays) : RP_OK;
  if (lst) {
    free(t->recs);
    free(t->replays);
    free(t);
    return lst;
  }
  /* Only the host thread reads ex->trace before a slot is armed; workers
   * reach it through traced slots, published by submit()'s seq_cst store. */
  ex->trace = t;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Device times (the GPU lowering's events, gpu.h) */

static void gpu_trace_destroy(rp_runtime *rt, struct rp_lower_trace *t,
                              size_t nev, uint32_t ngpu) {
  for (size_t i = 0; t->ev && i < nev; i++)
    (void)rp__device_ops(rt)->event_destroy(rt, t->ev[i]);
  for (uint32_t i = 0; t->base && i < ngpu; i++)
    (void)rp__device_ops(rt)->event_destroy(rt, t->base[i]);
  free(t->ev);
  free(t->how);
  free(t->base);
  free(t->base_ns);
  free(t);
}

void rp__lower_trace_free(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  if (!lw || !lw->trace)
    return;
  gpu_trace_destroy(ex->rt, lw->trace, (size_t)lw->trace->n * lw->nseg * 2,
                    lw->ngpu);
  lw->trace = NULL;
}

/* GPU i's reference: recorded on the exec's replay stream and waited for;
 * the host clock read right after stands for its device time (late by the
 * host's wake-up, a few us). Work already queued there is waited for too:
 * no traced replay is in flight yet. */
static rp_status gpu_trace_base(rp_exec *ex, struct rp_lower_trace *t,
                                uint32_t i) {
  const rp_gpu_lane *gl = &ex->lw->gpus[i];
  rp_status st = DV(ex)->event_create_timed(ex->rt, gl->lane, &t->base[i]);
  int prev;
  if (!st && !(st = DV(ex)->device_enter(ex->rt, gl->device, &prev))) {
    st = DV(ex)->event_record(ex->rt, t->base[i], gl->stream);
    if (!st)
      st = DV(ex)->event_sync(ex->rt, t->base[i]);
    DV(ex)->device_leave(gl->device, prev);
  }
  t->base_ns[i] = rp__now_ns();
  return st;
}

rp_status rp__lower_trace_start(rp_exec *ex, uint64_t from, uint32_t n) {
  rp_lower *lw = ex->lw;
  uint64_t nrec = (uint64_t)n * lw->nseg;
  if (nrec > RP_LOWER_TRACE_MAX_SEGS)
    return rp__err(RP_ERANGE,
                   "rp_exec_trace_start: %u replays of %u GPU segments "
                   "need %llu pairs of CUDA events (at most %u)",
                   n, lw->nseg, (unsigned long long)nrec,
                   RP_LOWER_TRACE_MAX_SEGS);
  struct rp_lower_trace *t = rp__calloc(1, sizeof *t);
  if (!t)
    return rp__err(RP_ENOMEM, "rp_exec_trace_start: out of memory");
  t->from = from;
  t->n = n;
  t->ev = rp__calloc((size_t)nrec * 2 + 1, sizeof *t->ev);
  t->how = rp__calloc((size_t)nrec + 1, 1);
  t->base = rp__calloc(lw->ngpu + 1, sizeof *t->base);
  t->base_ns = rp__calloc(lw->ngpu + 1, sizeof *t->base_ns);
  rp_status st = t->ev && t->how && t->base && t->base_ns
                     ? RP_OK
                     : rp__err(RP_ENOMEM, "rp_exec_trace_start: out of "
                                          "memory");
  for (uint64_t i = 0; i < nrec * 2 && !st; i++)
    st = DV(ex)->event_create_timed(ex->rt, lw->segs[(i / 2) % lw->nseg].lane,
                                    &t->ev[i]);
  for (uint32_t i = 0; i < lw->ngpu && !st; i++)
    st = gpu_trace_base(ex, t, i);
  if (st) {
    gpu_trace_destroy(ex->rt, t, (size_t)nrec * 2, lw->ngpu);
    return rp__err_prefix(st, "rp_exec_trace_start: CUDA events: ");
  }
  /* published to the launchers with ex->trace (see rp_exec_trace_start) */
  lw->trace = t;
  return RP_OK;
}

int rp__lower_trace_span(rp_exec *ex, uint64_t r, uint32_t k, uint64_t *t0,
                         uint64_t *t1, const char **how) {
  rp_lower *lw = ex->lw;
  struct rp_lower_trace *t = lw ? lw->trace : NULL;
  if (!t || r < t->from || r - t->from >= t->n || k >= lw->nseg)
    return 0;
  size_t i = (size_t)(r - t->from) * lw->nseg + k;
  uint32_t g = lw->segs[k].gpu;
  float a = 0, b = 0;
  if (!t->how[i] ||
      DV(ex)->event_elapsed_ms(ex->rt, t->base[g], t->ev[2 * i], &a) ||
      DV(ex)->event_elapsed_ms(ex->rt, t->base[g], t->ev[2 * i + 1], &b))
    return 0;
  /* float ms: about 0.5 us resolution over the first seconds of a trace */
  *t0 = t->base_ns[g] + (uint64_t)(a > 0 ? (double)a * 1e6 : 0.0);
  *t1 = t->base_ns[g] + (uint64_t)(b > 0 ? (double)b * 1e6 : 0.0);
  if (*t1 < *t0)
    *t1 = *t0;
  *how = t->how[i] == 1 ? "graph" : "op by op";
  return 1;
}
