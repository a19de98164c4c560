/* train/train_util.c — error prefixes, the clock, names, recording and
 * replaying a step for train/ and the tools (train_util.h), over libc and
 * the public API. */
#include "train_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rp_status rp_train_wait_ops(rp_runtime *rt, const rp_event *evs, uint32_t n,
                            rp_status issued, const char *what,
                            const char *tail) {
  rp_event all = RP_NO_EVENT;
  rp_status st = issued;
  if (st == RP_OK)
    st = rp_event_merge(rt, evs, n, &all);
  /* the failure's detail, before a release can replace it */
  char why[1024]; /* rp_error_detail()'s size */
  snprintf(why, sizeof why, "%s", st != RP_OK ? rp_error_detail() : "");
  for (uint32_t i = 0; i < n; i++)
    rp_event_release(rt, evs[i]);
  if (st != RP_OK) {
    rp_runtime_drain(rt); /* what was issued */
    return rp_error_set(st, "%s", why);
  }
  st = rp_event_wait(rt, all, -1);
  rp_event_release(rt, all);
  if (st != RP_OK) /* the wait's detail: the failed op's own */
    return rp_error_set(st, "an op of the %s failed (%s%s%s)%s", what,
                        rp_error_detail(),
                        *rp_runtime_dist_detail(rt) ? "; " : "",
                        rp_runtime_dist_detail(rt), tail);
  return RP_OK;
}

rp_status rp_train_name_inst(rp_runtime *rt, rp_inst inst, const char *fmt,
                             ...) {
  char name[RP_NAME_MAX + 1];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  return inst.id ? rp_instance_set_name(rt, inst, name) : RP_OK;
}

rp_status rp_train_vname_op(rp_runtime *rt, const char *sfx, char *out,
                            const char *fmt, va_list ap) {
  char name[RP_NAME_MAX + 1];
  int n = vsnprintf(name, sizeof name, fmt, ap);
  if (n >= 0 && (size_t)n < sizeof name)
    snprintf(name + n, sizeof name - (size_t)n, "%s", sfx);
  if (out)
    memcpy(out, name, sizeof name);
  return rp_capture_name_next(rt, name);
}

rp_status rp_train_capture(rp_runtime *rt, int *recording,
                           rp_status (*issue)(void *arg), void *arg,
                           rp_graph **out) {
  rp_status st = rp_capture_begin(rt, NULL);
  if (st != RP_OK)
    return st;
  *recording = 1;
  st = issue(arg);
  *recording = 0;
  if (st != RP_OK) {
    rp_capture_abort(rt);
    return st;
  }
  rp_graph *g = NULL;
  if ((st = rp_capture_end(rt, &g)) != RP_OK)
    return st;
  *out = g;
  return RP_OK;
}

rp_status rp_train_bind_named(rp_graph *g, const char *port, const char *op,
                              const char *who) {
  rp_port_id id;
  rp_status st = rp_graph_add_postcondition(g, port, &id);
  uint32_t bound = 0;
  for (rp_op_id i = 0; !st && i < rp_graph_op_count(g); i++) {
    const char *name = rp_graph_op_name(g, i);
    if (name && !strcmp(name, op)) {
      st = rp_graph_bind_postcondition(g, id, i);
      bound++;
    }
  }
  if (!st && !bound)
    st = rp_error_set(RP_EINVAL, "%s: no op named '%s' writes the %s", who, op,
                      port);
  return st;
}

rp_status rp_train_record(rp_runtime *rt, int *recording,
                          rp_status (*issue)(void *arg), void *arg,
                          const char *loss_op, const char *who,
                          rp_graph **out) {
  rp_graph *g = NULL;
  rp_status st = rp_train_capture(rt, recording, issue, arg, &g);
  if (st != RP_OK)
    return st;
  if ((st = rp_train_bind_named(g, "loss", loss_op, who)) != RP_OK) {
    rp_graph_destroy(g);
    return st;
  }
  *out = g;
  return RP_OK;
}

rp_status rp_train_replay_wait(rp_runtime *rt, rp_exec *ex, const void *args,
                               size_t size) {
  rp_replay_args ra = {.args = args, .args_size = size};
  rp_event done;
  rp_status st = rp_replay(ex, &ra, &done);
  if (st != RP_OK)
    return st;
  st = rp_event_wait(rt, done, -1);
  rp_event_release(rt, done);
  if (st != RP_OK)
    return rp_error_set(st, "replay failed: %s", rp_exec_error_detail(ex));
  return RP_OK;
}

rp_status rp_train_err_prefix(rp_status st, const char *fmt, ...) {
  char pre[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  /* rp_error_set formats before it replaces: the old detail may be an
   * argument */
  return rp_error_set(st, "%s%s", pre, rp_error_detail());
}

void *rp_train_realloc_n(void *p, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes))
    return NULL;
  return realloc(p, bytes ? bytes : 1);
}

uint64_t rp_train_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rp_train_rank_rows(const rp_runtime *rt, uint32_t B, int64_t *lo,
                        int64_t *hi) {
  rp_rect whole = rp_rect_1d(0, B - 1), part = whole;
  rp_chunk_rect(&whole, 0, rp_runtime_ranks(rt), rp_runtime_rank(rt), &part);
  *lo = part.lo[0];
  *hi = part.hi[0];
}

rp_status rp_train_pick_procs(rp_runtime *rt, uint32_t n, rp_proc *procs,
                              rp_mem *mems, const char *who) {
  rp_proc_kind want =
      rp_runtime_backend(rt) == RP_BACKEND_CUDA ? RP_PROC_GPU : RP_PROC_CPU;
  uint32_t k = 0;
  for (rp_proc p = 0; p < rp_proc_count(rt) && k < n; p++) {
    rp_proc_info pi;
    if (rp_proc_query(rt, p, &pi) == RP_OK && pi.kind == want) {
      procs[k] = p;
      mems[k++] = pi.local;
    }
  }
  if (k < n)
    return rp_error_set(RP_EPROC,
                        "%s: %u %s processors wanted, the runtime has %u", who,
                        n, want == RP_PROC_GPU ? "GPU" : "CPU", k);
  return RP_OK;
}

/* ---- replays in flight ---- */

void rp_train_ring_init(rp_train_ring *r, rp_runtime *rt, rp_exec *ex,
                        uint32_t cap, uint32_t start, uint64_t *iter_ns,
                        rp_status (*report)(void *, uint32_t, int *),
                        void *arg) {
  memset(r, 0, sizeof *r);
  r->rt = rt;
  r->ex = ex;
  r->cap = cap;
  r->first = r->start = start;
  r->iter_ns = iter_ns;
  r->report = report;
  r->arg = arg;
}

rp_status rp_train_ring_issue(rp_train_ring *r, const rp_replay_args *ra,
                              uint32_t step) {
  uint32_t slot = (r->head + r->n) % r->cap;
  r->t0[slot] = rp_train_now_ns();
  rp_status st = rp_replay(r->ex, ra, &r->ev[slot]);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "step %u: ", step);
  r->n++;
  return RP_OK;
}

rp_status rp_train_ring_retire(rp_train_ring *r) {
  uint32_t i = r->head, s = r->first;
  rp_status st = rp_event_wait(r->rt, r->ev[i], -1);
  uint64_t t1 = rp_train_now_ns();
  rp_event_release(r->rt, r->ev[i]);
  r->head = (i + 1) % r->cap;
  r->n--;
  r->first++;
  if (st != RP_OK)
    return rp_error_set(st, "step %u: replay failed: %s", s,
                        rp_exec_error_detail(r->ex));
  if (r->iter_ns)
    r->iter_ns[s - r->start] = t1 - r->t0[i];
  if (r->halt || !r->report)
    return RP_OK;
  return r->report(r->arg, s, &r->halt);
}

rp_status rp_train_ring_finish(rp_train_ring *r, rp_status st) {
  while (!st && r->n) /* the last steps, reported in order */
    st = rp_train_ring_retire(r);
  if (!r->n)
    return st;
  /* after an error: wait for the rest, keep the first error and its
   * detail (a failing wait sets its own) */
  char why[1024]; /* rp_error_detail()'s size */
  snprintf(why, sizeof why, "%s", rp_error_detail());
  while (r->n) {
    (void)rp_event_wait(r->rt, r->ev[r->head], -1);
    rp_event_release(r->rt, r->ev[r->head]);
    r->head = (r->head + 1) % r->cap;
    r->n--;
  }
  return rp_error_set(st, "%s", why);
}

rp_status rp_train_split_check(uint32_t batch, uint32_t ranks, uint32_t parts,
                               const char *part_name, const char *parts_name) {
  if (batch == 0 || ranks == 0 || parts == 0)
    return rp_error_set(RP_EINVAL, "batch %u, ranks %u, %s %u (need >= 1)",
                        batch, ranks, parts_name, parts);
  rp_rect whole = rp_rect_1d(0, batch - 1), part, sub;
  for (uint32_t r = 0; r < ranks; r++) {
    rp_status st = rp_chunk_rect(&whole, 0, ranks, r, &part);
    for (uint32_t p = 0; st == RP_OK && p < parts; p++)
      st = rp_chunk_rect(&part, 0, parts, p, &sub);
    if (st != RP_OK && ranks == 1) /* one split: over the parts alone */
      return rp_error_set(RP_ERANGE,
                          "batch %u cannot be split over %u %s (the last "
                          "gets an empty shard): use a larger batch or "
                          "fewer %s",
                          batch, parts, parts_name, parts_name);
    if (st != RP_OK)
      return rp_error_set(RP_ERANGE,
                          "batch %u cannot be split over %u ranks x %u "
                          "%s (rank %u gets an empty shard): use a "
                          "larger batch or fewer ranks or %s",
                          batch, ranks, parts,
                          parts == 1 ? part_name : parts_name, r, parts_name);
  }
  return RP_OK;
}
