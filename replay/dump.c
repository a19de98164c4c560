/* replay/dump.c — writing an exec out: its compiled form (per-worker
 * schedules, the waits between them, and why it was placed that way: text,
 * DOT, JSON, and REPRISE_DUMP=DIR), and rp_exec_trace_write (the records
 * trace.c kept, as Chrome trace event JSON). */
#include "lower.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *unit_name(const rp_exec *ex, const rp_unit *u) {
  RP_UNUSED(ex);
  return u->kind == RP_UNIT_COPY ? "copy" : u->name;
}

/* A copy's own name (as the graph dump shows it), or NULL: the text, DOT
 * and JSON schedules show it after "copy". */
static const char *copy_name(const rp_exec *ex, const rp_unit *u) {
  return u->kind == RP_UNIT_COPY && u->op < ex->g->nops &&
                 ex->g->ops[u->op].name[0]
             ? ex->g->ops[u->op].name
             : NULL;
}

/* A launcher has no op: -1 in DOT and JSON. */
static long long unit_op(const rp_unit *u) {
  return u->kind == RP_UNIT_LAUNCH ? -1 : (long long)u->op;
}

static void dump_text(const rp_exec *ex, FILE *f) {
  fprintf(f,
          "exec: %u ops, %u units, %u of %u workers used, %u in flight "
          "at most\nplacement: %s\n",
          ex->g->nops, ex->nunits, ex->active, ex->nlanes, ex->max_inflight,
          ex->place_why);
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    if (w < ex->ncpu)
      fprintf(f, "lane %u (worker %u): %u units\n", w, w, l->len);
    else
      fprintf(f,
              "lane %u (GPU processor %u, run by segment launches): %u "
              "units\n",
              w, w, l->len);
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      if (u->kind == RP_UNIT_LAUNCH)
        fprintf(f, "  [%u] launch segment %u", i, ex->lw->seg_of[l->units[i]]);
      else
        fprintf(f, "  [%u] op %u %s", i, u->op, unit_name(ex, u));
      if (copy_name(ex, u))
        fprintf(f, " '%s'", copy_name(ex, u));
      if (u->max_shards > 1)
        fprintf(f, " shard %u/%u", u->shard, u->max_shards);
      for (uint32_t k = 0; k < u->nwait; k++) {
        const rp_wait *wt = &ex->waits[u->wait_off + k];
        fprintf(f, " wait(lane %u >= %u%s)", wt->lane, wt->pos,
                wt->prev ? ", previous replay" : "");
      }
      for (uint32_t k = 0; k < u->nport; k++)
        fprintf(f, " pre('%s')", ex->g->pre[ex->ports[u->port_off + k]].name);
      for (uint32_t k = 0; k < u->npost; k++)
        fprintf(f, " post('%s')", ex->g->post[ex->posts[u->post_off + k]].name);
      fprintf(f, "%s\n", u->publish ? " publish" : "");
    }
  }
  rp__lower_dump(ex, f);
}

/* A DOT string body: quotes and backslashes escaped, every byte outside
 * printable ASCII shown as the text \xNN (as capture/dump.c does). */
static void dot_str(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p >= 0x20 && *p < 0x7f)
      fputc(*p, f);
    else
      fprintf(f, "\\\\x%02x", *p);
  }
}

static void dump_dot(const rp_exec *ex, FILE *f) {
  fprintf(f,
          "digraph exec {\n  rankdir=TB;\n  label=\"%u units on %u "
          "workers\";\n",
          ex->nunits, ex->active);
  if (rp__dot_large(ex->nunits, ex->nunits))
    fprintf(f, "  graph [" RP_DOT_BOUNDED "];\n");
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    fprintf(f, "  subgraph cluster_lane%u {\n    label=\"lane %u\";\n", w, w);
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      fprintf(f, "    u%u [label=\"op %lld ", l->units[i], unit_op(u));
      dot_str(f, unit_name(ex, u));
      fprintf(f, "#%u", u->shard);
      if (copy_name(ex, u)) {
        fprintf(f, "\\n");
        dot_str(f, copy_name(ex, u));
      }
      fprintf(f, "\"];\n");
      if (i)
        fprintf(f, "    u%u -> u%u [style=dotted];\n", l->units[i - 1],
                l->units[i]);
    }
    fprintf(f, "  }\n");
  }
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      for (uint32_t k = 0; k < u->nwait; k++) {
        const rp_wait *wt = &ex->waits[u->wait_off + k];
        fprintf(f, "  u%u -> u%u [color=red%s];\n",
                ex->lanes[wt->lane].units[wt->pos - 1], l->units[i],
                wt->prev ? ", style=dashed, label=\"prev\"" : "");
      }
    }
  }
  fprintf(f, "}\n");
}

/* A JSON string body: quotes and backslashes escaped, every byte outside
 * printable ASCII written as \u00NN (its Latin-1 reading), so the output
 * is valid JSON and valid UTF-8 whatever the string holds. */
void rp__json_str(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p >= 0x7f)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
}

static void dump_json(const rp_exec *ex, FILE *f) {
  fprintf(f,
          "{\"ops\": %u, \"units\": %u, \"workers_used\": %u, "
          "\"placement\": \"",
          ex->g->nops, ex->nunits, ex->active);
  rp__json_str(f, ex->place_why);
  fprintf(f, "\", \"lanes\": [");
  int first_lane = 1;
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    fprintf(f, "%s{\"worker\": %u, \"units\": [", first_lane ? "" : ", ", w);
    first_lane = 0;
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      fprintf(f, "%s{\"op\": %lld, \"name\": \"", i ? ", " : "", unit_op(u));
      rp__json_str(f, unit_name(ex, u));
      if (copy_name(ex, u)) {
        fprintf(f, "\", \"copy_name\": \"");
        rp__json_str(f, copy_name(ex, u));
      }
      fprintf(f, "\", \"shard\": %u, \"waits\": [", u->shard);
      for (uint32_t k = 0; k < u->nwait; k++) {
        const rp_wait *wt = &ex->waits[u->wait_off + k];
        fprintf(f, "%s{\"lane\": %u, \"pos\": %u, \"previous_replay\": %s}",
                k ? ", " : "", wt->lane, wt->pos, wt->prev ? "true" : "false");
      }
      fprintf(f, "], \"publish\": %s}", u->publish ? "true" : "false");
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]}\n");
}

rp_status rp_exec_dump(const rp_exec *ex, FILE *f, rp_dump_format fmt) {
  rp_status st = rp__exec_check(ex, "rp_exec_dump");
  if (st)
    return st;
  if (!f)
    return rp__err(RP_EINVAL, "rp_exec_dump: NULL f");
  errno = 0; /* a failed write's cause, where the stream is unbuffered */
  switch (fmt) {
  case RP_DUMP_TEXT:
    dump_text(ex, f);
    break;
  case RP_DUMP_DOT:
    dump_dot(ex, f);
    break;
  case RP_DUMP_JSON:
    dump_json(ex, f);
    break;
  default:
    return rp__err(RP_EINVAL, "rp_exec_dump: unknown format %d", (int)fmt);
  }
  /* buffered text reaches the file only at the flush: check after it */
  int wrote = errno;
  errno = 0;
  if (fflush(f) != 0 || ferror(f)) {
    int e = errno ? errno : wrote;
    return rp__err(RP_EIO, "rp_exec_dump: write failed: %s",
                   rp__write_cause(e));
  }
  return RP_OK;
}

/* ---- REPRISE_DUMP=DIR ---- */

static atomic_int env_dump_warned;

/* path: the file that could not be written, or NULL (why says it all). */
static void env_dump_fail(const char *dir, const char *path, const char *why) {
  if (atomic_exchange(&env_dump_warned, 1))
    return; /* said once per process: every exec would repeat it */
  fprintf(stderr,
          "reprise: REPRISE_DUMP=%s: %s%s%s%s (the exec is fine; later dump "
          "failures are not reported)\n",
          dir, path ? "cannot write " : "", path ? path : "", path ? ": " : "",
          why);
}

static void env_dump_schedule(const rp_exec *ex, const char *dir,
                              const char *path) {
  rp_output *o;
  rp_status st = rp_output_open(path, &o);
  if (!st && (st = rp_exec_dump(ex, rp_output_file(o), RP_DUMP_TEXT)))
    rp_output_abort(o);
  else if (!st)
    st = rp_output_commit(o);
  if (st)
    env_dump_fail(dir, path, rp_error_detail());
}

/* mkdir -p dir: 0, or -1 with errno set and path (len bytes) holding the
 * folder that could not be made. */
static int make_dirs(const char *dir, char *path, size_t len) {
  snprintf(path, len, "%s", dir);
  for (char *p = path + 1;; p++) {
    if (*p && *p != '/')
      continue;
    char c = *p;
    *p = '\0';
    struct stat sb;
    if (mkdir(path, 0777) != 0 &&
        (errno != EEXIST || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
      if (errno == EEXIST)
        errno = ENOTDIR;
      return -1;
    }
    if (!c)
      return 0;
    *p = c;
  }
}

void rp__exec_env_dump(rp_exec *ex) {
  const char *dir = getenv("REPRISE_DUMP");
  if (!dir || !*dir)
    return;
  static _Atomic unsigned serial;
  unsigned n = atomic_fetch_add(&serial, 1);
  size_t len = strlen(dir) + 64;
  char *made = malloc(len);
  if (!made || make_dirs(dir, made, len) != 0) {
    char why[256];
    snprintf(why, sizeof why, "cannot create the folder %s: %s",
             made ? made : dir, made ? strerror(errno) : "out of memory");
    env_dump_fail(dir, NULL, why);
    free(made);
    return;
  }
  free(made);
  char *path = malloc(len);
  if (!path) {
    env_dump_fail(dir, dir, "out of memory");
    return;
  }
  snprintf(path, len, "%s/exec-%ld-%u.graph.json", dir, (long)getpid(), n);
  rp_status st = rp_graph_save(ex->g, path);
  if (st)
    env_dump_fail(dir, path, rp_error_detail());
  snprintf(path, len, "%s/exec-%ld-%u.schedule.txt", dir, (long)getpid(), n);
  env_dump_schedule(ex, dir, path);
  free(path);
}

/* ---------------------------------------------------------------------- */
/* Traces: rp_exec_trace_write (trace.c records them) */

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

/* The tracks' names: the lanes, then the slots the traced replays
 * from..from+nrep-1 ran in (replay r in slot r % max_inflight). */
static void write_tracks(tw *w, const rp_exec *ex, uint64_t from,
                         uint64_t nrep) {
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
  for (uint64_t j = 0; j < ex->max_inflight && j < nrep; j++) {
    uint32_t k = (uint32_t)((from + j) % ex->max_inflight);
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
  write_tracks(&w, ex, t->from, end - t->from);
  for (uint64_t r = t->from; r < end; r++)
    replay_events(&w, ex, t, r);
  fprintf(f, "\n]}\n");
}

static rp_status trace_write_owned(rp_exec *ex, const char *path);

rp_status rp_exec_trace_write(rp_exec *ex, const char *path) {
  rp_status st = rp__exec_check_call(ex, "rp_exec_trace_write");
  if (st)
    return st;
  if (!path)
    return rp__err(RP_EINVAL, "rp_exec_trace_write: NULL path");
  /* a replay issued meanwhile from another thread would write the records
   * as they are read, and read the trace as it is freed */
  if ((st = rp__exec_take(ex, "rp_exec_trace_write")) != RP_OK)
    return st;
  st = trace_write_owned(ex, path);
  rp__exec_give(ex);
  return st;
}

/* rp_exec_trace_write's work, for the thread that holds the exec. */
static rp_status trace_write_owned(rp_exec *ex, const char *path) {
  rp_status st;
  struct rp_trace *t = ex->trace;
  if (!t)
    return rp__err(RP_EINVAL, "rp_exec_trace_write: no trace armed "
                              "(rp_exec_trace_start first)");
  /* Every issued replay completes and every worker leaves the exec: the
   * records are complete and no worker reads them any more. Replays of the
   * window that were never issued are left out. A replay waiting for a
   * precondition the caller has not triggered would be waited for
   * forever: refused (nothing written, the trace stays armed). */
  if ((st = rp__exec_wait_quiet(ex, "rp_exec_trace_write")) != RP_OK)
    return st;
  rp__exec_quiesce(ex);
  uint64_t end = ex->issued < t->to ? ex->issued : t->to;
  if (end < t->from)
    end = t->from;
  /* the one output writer (reprise.h "Output files"): the file at path is
   * replaced only by a whole trace */
  rp_output *o;
  st = rp_output_open(path, &o);
  if (st)
    return rp__err_prefix(st,
                          "rp_exec_trace_write: cannot create '%s': ", path);
  write_trace(ex, t, end, rp_output_file(o));
  if ((st = rp_output_commit(o)))
    return rp__err_prefix(st,
                          "rp_exec_trace_write: writing '%s' failed: ", path);
  rp__trace_free(ex); /* recording stops; a failed write keeps it armed */
  return RP_OK;
}
