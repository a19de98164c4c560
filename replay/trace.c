/* replay/trace.c — replay timelines as Chrome trace event JSON, which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open.
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

/* Records beyond this (32 bytes each) are refused at start: a trace is for
 * a few replays of one step, not for a whole run. */
#define RP_TRACE_MAX_RECS (8u << 20)
/* Thread ids of the per-slot replay tracks (workers use their index). */
#define RP_TRACE_SLOT_TID 1000u

typedef struct rp_trace_rec {
  uint64_t t_wait;  /* clock before the unit's waits; 0: it had none */
  uint64_t t_start; /* clock before it ran; 0: it did not run */
  uint64_t t_end;   /* 0: the record was never written */
  uint32_t lane;
  int32_t status; /* RP_OK, the failure, or 1: not run in this replay */
} rp_trace_rec;

typedef struct rp_trace_replay {
  uint64_t t_arm, t_done; /* submission (slot armed) and completion */
  int32_t status;
} rp_trace_replay;

struct rp_trace {
  uint64_t from, to; /* replays [from, to) are traced */
  uint32_t nunits;
  rp_trace_rec *recs; /* (r - from) * nunits + unit */
  rp_trace_replay *replays;
};

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

static rp_status check_exec(rp_exec *ex, const char *what) {
  rp_status st = rp__exec_check(ex, what);
  if (st)
    return st;
  if (rp__tl_replay_violation) {
    *rp__tl_replay_violation = 1;
    return rp__err(RP_ECONTRACT, "%s called from a task inside a replay", what);
  }
  return RP_OK;
}

rp_status rp_exec_trace_start(rp_exec *ex, uint32_t replays) {
  rp_status st = check_exec(ex, "rp_exec_trace_start");
  if (st)
    return st;
  if (!replays)
    return rp__err(RP_EINVAL, "rp_exec_trace_start: 0 replays");
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

/* ---- writing ---- */

typedef struct tw {
  FILE *f;
  uint64_t base; /* ns: the earliest timestamp, written as ts 0 */
  long pid;
  int first;
} tw;

static void ev_sep(tw *w) {
  fputs(w->first ? "\n  " : ",\n  ", w->f);
  w->first = 0;
}

static double us(const tw *w, uint64_t t) {
  return t > w->base ? (double)(t - w->base) / 1e3 : 0.0;
}

static void meta(tw *w, const char *what, uint32_t tid, const char *name,
                 uint32_t index) {
  ev_sep(w);
  fprintf(w->f,
          "{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %ld, "
          "\"tid\": %u, \"args\": {\"name\": \"",
          what, w->pid, tid);
  rp__json_str(w->f, name);
  fprintf(w->f, "\"}}");
  ev_sep(w);
  fprintf(w->f,
          "{\"name\": \"thread_sort_index\", \"ph\": \"M\", "
          "\"pid\": %ld, \"tid\": %u, \"args\": {\"sort_index\": %u}}",
          w->pid, tid, index);
}

static void complete_ev(tw *w, const char *name, const char *cat, uint32_t tid,
                        uint64_t t0, uint64_t t1) {
  ev_sep(w);
  fprintf(w->f, "{\"name\": \"");
  rp__json_str(w->f, name);
  fprintf(w->f,
          "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %ld, "
          "\"tid\": %u, \"ts\": %.3f, \"dur\": %.3f",
          cat, w->pid, tid, us(w, t0), t1 > t0 ? (double)(t1 - t0) / 1e3 : 0.0);
}

static const char *status_text(int32_t st) {
  return st == 1 ? "not run (fewer shards)" : st ? rp_status_name(st) : "ok";
}

static void unit_events(tw *w, const rp_exec *ex, const rp_trace_rec *rec,
                        uint32_t ui, uint64_t r) {
  const rp_unit *u = &ex->units[ui];
  if (rec->t_wait) {
    uint64_t end = rec->t_start ? rec->t_start : rec->t_end;
    complete_ev(w, "wait", "wait", rec->lane, rec->t_wait, end);
    fprintf(w->f,
            ", \"args\": {\"op\": %u, \"shard\": %u, \"replay\": %llu, "
            "\"waits\": %u, \"preconditions\": %u}}",
            u->op, u->shard, (unsigned long long)r, u->nwait, u->nport);
  }
  uint64_t t0 = rec->t_start ? rec->t_start : rec->t_end;
  complete_ev(w, rp__unit_trace_name(u),
              u->kind == RP_UNIT_COPY ? "copy" : "task", rec->lane, t0,
              rec->t_end);
  fprintf(w->f, ", \"args\": {\"op\": %u, ", u->op);
  if (u->kind != RP_UNIT_COPY && u->task_name) { /* named ops: the task */
    fprintf(w->f, "\"task\": \"");
    rp__json_str(w->f, u->task_name);
    fprintf(w->f, "\", ");
  }
  fprintf(w->f, "\"shard\": %u, \"replay\": %llu, \"status\": \"%s\"}}",
          u->shard, (unsigned long long)r, status_text(rec->status));
}

/* A GPU segment's launcher ui in replay r: its waits and launch call on
 * the worker's track, and one event on the GPU's track: the device span
 * when its timing events were recorded, else the host launch time. */
static void launch_events(tw *w, rp_exec *ex, const rp_trace_rec *rec,
                          uint32_t ui, uint64_t r) {
  uint32_t k = ex->lw->seg_of[ui];
  const rp_seg *sg = &ex->lw->segs[k];
  char name[64];
  uint64_t ts = rec->t_start ? rec->t_start : rec->t_end;
  if (rec->t_wait) {
    complete_ev(w, "wait", "wait", rec->lane, rec->t_wait, ts);
    fprintf(w->f, ", \"args\": {\"segment\": %u, \"replay\": %llu}}", k,
            (unsigned long long)r);
  }
  snprintf(name, sizeof name, "launch segment %u", k);
  complete_ev(w, name, "launch", rec->lane, ts, rec->t_end);
  fprintf(w->f,
          ", \"args\": {\"segment\": %u, \"replay\": %llu, \"ops\": %u, "
          "\"status\": \"%s\"}}",
          k, (unsigned long long)r, sg->n, status_text(rec->status));
  uint64_t d0 = 0, d1 = 0;
  const char *how = "";
  int dev = rp__lower_trace_span(ex, r, k, &d0, &d1, &how);
  snprintf(name, sizeof name, "segment %u", k);
  complete_ev(w, name, "gpu", sg->lane, dev ? d0 : ts, dev ? d1 : ts);
  fprintf(w->f,
          ", \"args\": {\"segment\": %u, \"replay\": %llu, \"ops\": %u, "
          "\"device_times\": %s, \"issued\": \"%s\", "
          "\"host_launch_us\": %.3f, \"status\": \"%s\"}}",
          k, (unsigned long long)r, sg->n, dev ? "true" : "false",
          dev ? how : "unknown", us(w, ts), status_text(rec->status));
}

static void replay_events(tw *w, rp_exec *ex, const struct rp_trace *t,
                          uint64_t r) {
  const rp_trace_replay *rr = &t->replays[r - t->from];
  uint32_t tid = RP_TRACE_SLOT_TID + (uint32_t)(r % ex->max_inflight);
  char name[48];
  snprintf(name, sizeof name, "replay %llu", (unsigned long long)r);
  complete_ev(w, name, "replay", tid, rr->t_arm, rr->t_done);
  fprintf(w->f, ", \"args\": {\"replay\": %llu, \"status\": \"%s\"}}",
          (unsigned long long)r, status_text(rr->status));
  for (uint32_t u = 0; u < t->nunits; u++) {
    const rp_trace_rec *rec = &t->recs[(r - t->from) * t->nunits + u];
    if (rec->t_end && ex->units[u].kind == RP_UNIT_LAUNCH)
      launch_events(w, ex, rec, u, r);
    else if (rec->t_end)
      unit_events(w, ex, rec, u, r);
  }
}

/* The earliest timestamp of the traced replays [from, end). */
static uint64_t trace_base(const struct rp_trace *t, uint64_t end) {
  uint64_t base = UINT64_MAX;
  for (uint64_t r = t->from; r < end; r++)
    if (t->replays[r - t->from].t_arm && t->replays[r - t->from].t_arm < base)
      base = t->replays[r - t->from].t_arm;
  return base == UINT64_MAX ? 0 : base;
}

static void write_tracks(tw *w, const rp_exec *ex, uint64_t nrep) {
  char name[64];
  snprintf(name, sizeof name, "reprise exec (%u ops, %u units)", ex->g->nops,
           ex->nunits);
  ev_sep(w);
  fprintf(w->f,
          "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %ld, "
          "\"tid\": 0, \"args\": {\"name\": \"",
          w->pid);
  rp__json_str(w->f, name);
  fprintf(w->f, "\"}}");
  for (uint32_t l = 0; l < ex->nlanes; l++) {
    uint32_t g = ex->lw ? ex->lw->gpu_of_lane[l] : UINT32_MAX;
    if (g != UINT32_MAX) /* a GPU lane: its segments' device spans */
      snprintf(name, sizeof name, "gpu %u (processor %u)", g, l);
    else
      snprintf(name, sizeof name, "worker %u", l);
    meta(w, "thread_name", l, name, l);
  }
  for (uint32_t k = 0; k < ex->max_inflight && k < nrep; k++) {
    snprintf(name, sizeof name, "replays (slot %u)", k);
    meta(w, "thread_name", RP_TRACE_SLOT_TID + k, name, ex->nlanes + k);
  }
}

static void write_trace(rp_exec *ex, const struct rp_trace *t, uint64_t end,
                        FILE *f) {
  tw w = {
      .f = f, .base = trace_base(t, end), .pid = (long)getpid(), .first = 1};
  fprintf(f,
          "{\"displayTimeUnit\": \"ns\",\n \"otherData\": {\"producer\": "
          "\"reprise %s\", \"replays_traced\": %llu, \"replays_armed\": "
          "%llu, \"units_per_replay\": %u},\n \"traceEvents\": [",
          rp_version_string(), (unsigned long long)(end - t->from),
          (unsigned long long)(t->to - t->from), t->nunits);
  write_tracks(&w, ex, end - t->from);
  for (uint64_t r = t->from; r < end; r++)
    replay_events(&w, ex, t, r);
  fprintf(f, "\n]}\n");
}

rp_status rp_exec_trace_write(rp_exec *ex, const char *path) {
  rp_status st = check_exec(ex, "rp_exec_trace_write");
  if (st)
    return st;
  if (!path)
    return rp__err(RP_EINVAL, "rp_exec_trace_write: NULL path");
  struct rp_trace *t = ex->trace;
  if (!t)
    return rp__err(RP_EINVAL, "rp_exec_trace_write: no trace armed "
                              "(rp_exec_trace_start first)");
  /* Every issued replay completes and every worker leaves the exec: the
   * records are complete and no worker reads them any more. Replays of the
   * window that were never issued are left out. */
  rp__exec_quiesce(ex);
  uint64_t end = ex->issued < t->to ? ex->issued : t->to;
  if (end < t->from)
    end = t->from;
  FILE *f = fopen(path, "w");
  if (!f)
    return rp__err(RP_EIO, "rp_exec_trace_write: cannot create '%s': %s", path,
                   strerror(errno));
  write_trace(ex, t, end, f);
  int bad = ferror(f), err = bad ? errno : 0;
  if (!bad && fflush(f) != 0)
    bad = 1, err = errno;
  if (fclose(f) != 0 && !bad)
    bad = 1, err = errno;
  if (bad)
    return rp__err(RP_EIO, "rp_exec_trace_write: writing '%s' failed: %s", path,
                   strerror(err ? err : EIO));
  rp__trace_free(ex); /* recording stops; a failed write keeps it armed */
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
