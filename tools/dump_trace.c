/* tools/dump_trace.c — reads the Chrome trace JSON that rp_exec_trace_write
 * (`reprise train --trace`) writes: "X" events (cat task, copy, wait,
 * launch, gpu, replay; ts and dur in us; args.op, args.replay, args.task,
 * args.device_times) and the "thread_name" metadata naming each track.
 * --critical-path --trace and --summary read it. */
#include "cli.h"
#include "dump_view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef REPRISE_HAVE_CJSON
#include "capture/json_strict.h"

static dv_cat cat_of(const char *s) {
  static const char *const names[] = {"task",   "copy", "wait",
                                      "launch", "gpu",  "replay"};
  for (int i = 0; i < 6; i++)
    if (s && !strcmp(s, names[i]))
      return (dv_cat)i;
  return DV_EV_OTHER;
}

static const char *str_item(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num_item(const cJSON *o, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v))
    return 0;
  *out = v->valuedouble;
  return 1;
}

/* e's tid into *tid: 0 when absent or not a whole number in 0..2^32-1. */
static int tid_item(const cJSON *e, uint32_t *tid) {
  double v;
  if (!num_item(e, "tid", &v) || !(v >= 0 && v <= 4294967295.0) ||
      v != floor(v))
    return 0;
  *tid = (uint32_t)v;
  return 1;
}

/* A "thread_name" event names a track; other metadata is skipped. 0 ok,
 * -1 malformed (what is wrong in *why). */
static int track(dv_trace *t, const cJSON *e, const char **why) {
  const char *what = str_item(e, "name");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
  uint32_t tid;
  if (!what || strcmp(what, "thread_name"))
    return 0;
  if (!tid_item(e, &tid)) {
    *why = "a \"thread_name\" event whose tid is not a whole number in "
           "0..4294967295";
    return -1;
  }
  t->tracks[t->ntracks++] = (dv_track){tid, str_item(args, "name")};
  return 0;
}

/* An index in args: -1 when absent, -2 when present but not a whole
 * number in 0..2^53 (where doubles are exact). */
static int64_t index_item(const cJSON *args, const char *key) {
  double a;
  if (!num_item(args, key, &a))
    return cJSON_GetObjectItemCaseSensitive(args, key) ? -2 : -1;
  return a >= 0 && a <= 9007199254740992.0 && a == floor(a) ? (int64_t)a : -2;
}

/* One "X" event; 0 ok, -1 malformed (what is wrong in *why). */
static int event(const cJSON *e, dv_event *d, const char **why) {
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
  double tid;
  d->name = str_item(e, "name");
  d->cat = cat_of(str_item(e, "cat"));
  if (!d->name || !num_item(e, "tid", &tid) || !num_item(e, "ts", &d->ts) ||
      !num_item(e, "dur", &d->dur)) {
    *why = "an \"X\" event without name, tid, ts or dur";
    return -1;
  }
  if (!tid_item(e, &d->tid)) {
    *why = "an \"X\" event whose tid is not a whole number in 0..4294967295";
    return -1;
  }
  if (!(d->ts >= 0 && d->ts < 1e15)) { /* 1e15 us: 31 years */
    *why = "an \"X\" event whose ts is negative or not below 1e15 us";
    return -1;
  }
  if (!(d->dur >= 0 && d->dur < 1e15)) {
    *why = "an \"X\" event whose dur is negative or not below 1e15 us";
    return -1;
  }
  d->task = str_item(args, "task");
  d->op = index_item(args, "op");
  d->replay = index_item(args, "replay");
  if (d->op == -2 || d->replay == -2) {
    *why = "an \"X\" event whose args.op or args.replay is not a whole "
           "number in 0..2^53";
    return -1;
  }
  if ((d->cat == DV_EV_TASK || d->cat == DV_EV_COPY) && d->op < 0) {
    *why = "a task or copy event without args.op";
    return -1;
  }
  d->device =
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "device_times"));
  const char *status = str_item(args, "status");
  d->ran = !status || !strcmp(status, "ok");
  return 0;
}

/* fill's *why for a trace without "X" events: rp_exec_trace_write wrote
 * it before any armed replay was issued (or it is not a reprise trace). */
static const char NO_REPLAY[] = "no replay";

/* -1 malformed: *why says what, *bad which event (its index in
 * traceEvents). */
static int fill(dv_trace *t, const cJSON *events, const char **why, int *bad) {
  int n = cJSON_GetArraySize(events);
  t->ev = calloc(n ? (size_t)n : 1, sizeof *t->ev);
  t->tracks = calloc(n ? (size_t)n : 1, sizeof *t->tracks);
  if (!t->ev || !t->tracks) {
    *why = "out of memory";
    return -1;
  }
  const cJSON *e;
  *bad = -1;
  cJSON_ArrayForEach(e, events) {
    const char *ph = str_item(e, "ph");
    ++*bad;
    if (!cJSON_IsObject(e) || !ph) {
      *why = "an event that is not an object with \"ph\"";
      return -1;
    }
    if (!strcmp(ph, "M") && track(t, e, why))
      return -1;
    else if (!strcmp(ph, "X") && event(e, &t->ev[t->nev], why))
      return -1;
    else if (!strcmp(ph, "X"))
      t->nev++;
  }
  *bad = -1;
  if (!t->nev) { /* said apart: a trace written before any replay ran */
    *why = NO_REPLAY;
    return -1;
  }
  return 0;
}

int dv_trace_load(const char *path, uint64_t max, dv_trace *t, FILE *err) {
  memset(t, 0, sizeof *t);
  char *text = NULL;
  size_t len = 0;
  int opt = max && max <= DV_TRACE_MAX_BYTES; /* --max-bytes set the limit */
  if (!opt)
    max = DV_TRACE_MAX_BYTES;
  rp_status st = rp_file_read_regular(path, (size_t)max, &text, &len);
  if (st) {
    rp_cli_say(err, "reprise dump: cannot read the trace '%s': %s: %s%s\n",
               path, rp_status_name(st), rp_error_detail(),
               opt && st == RP_ERANGE ? " (--max-bytes)" : "");
    return -1;
  }
  const char *why = NULL;
  int bad = -1;
  cJSON *doc = rp_cli_json_parse(text, len);
  if (!doc)
    why = rp_error_detail();
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
  if (doc && !cJSON_IsArray(events))
    why = "no \"traceEvents\" array (not a Chrome trace)";
  t->doc = doc;
  if (!why)
    fill(t, events, &why, &bad);
  if (why && !doc)
    rp_cli_say(err, "reprise dump: the trace '%s': %s\n", path, why);
  else if (why == NO_REPLAY)
    rp_cli_say(err,
               "reprise dump: the trace '%s' holds no replay: no \"X\" "
               "events (rp_exec_trace_write wrote it before any armed "
               "replay was issued)\n",
               path);
  else if (why && bad >= 0)
    rp_cli_say(err,
               "reprise dump: the trace '%s' is not a reprise trace: "
               "traceEvents[%d] is %s\n",
               path, bad, why);
  else if (why)
    rp_cli_say(err, "reprise dump: the trace '%s' is not a reprise trace: %s\n",
               path, why);
  free(text);
  if (why)
    dv_trace_free(t);
  return why ? -1 : 0;
}

void dv_trace_free(dv_trace *t) {
  cJSON_Delete(t->doc);
  free(t->ev), free(t->tracks);
  memset(t, 0, sizeof *t);
}
#else
int dv_trace_load(const char *path, uint64_t max, dv_trace *t, FILE *err) {
  (void)max;
  memset(t, 0, sizeof *t);
  rp_cli_say(err,
             "reprise dump: cannot read the trace '%s': this build has no "
             "JSON parser (configure with cJSON, Debian's libcjson-dev)\n",
             path);
  return -1;
}

void dv_trace_free(dv_trace *t) {
  free(t->ev), free(t->tracks);
  memset(t, 0, sizeof *t);
}
#endif

static void say_quoted(FILE *err, const char *s) {
  rp_cli_put_quoted(err, s);
}

int dv_trace_matches(const dv_trace *t, const dm_graph *m, FILE *err) {
  for (uint32_t i = 0; i < t->nev; i++) {
    const dv_event *e = &t->ev[i];
    if ((e->cat != DV_EV_TASK && e->cat != DV_EV_COPY) || e->op < 0)
      continue;
    if ((uint64_t)e->op >= m->nops) {
      fprintf(err, "reprise dump: --trace: the trace names op %lld ('",
              (long long)e->op);
      say_quoted(err, e->name);
      fprintf(err, "'), the graph has %u ops: not a trace of this graph\n",
              m->nops);
      return -1;
    }
    const dm_op *o = &m->ops[e->op];
    const char *want = o->label[0]             ? o->label
                       : o->kind == RP_OP_COPY ? "reprise.copy"
                                               : o->name;
    if (strcmp(e->name, want) != 0) {
      fprintf(err, "reprise dump: --trace: the trace's op %lld is '",
              (long long)e->op);
      say_quoted(err, e->name);
      fprintf(err, "', the graph's is '%s': not a trace of this graph\n", want);
      return -1;
    }
  }
  return 0;
}

int dv_trace_op_costs(const dv_trace *t, const dm_graph *m, double **cost,
                      FILE *err) {
  uint32_t nops = m->nops;
  if (dv_trace_matches(t, m, err)) {
    *cost = NULL;
    return -1;
  }
  *cost = calloc(nops ? nops : 1, sizeof **cost);
  uint32_t *runs = calloc(nops ? nops : 1, sizeof *runs);
  if (!*cost || !runs) {
    free(*cost), free(runs);
    *cost = NULL;
    fprintf(err, "reprise dump: out of memory\n");
    return -1;
  }
  for (uint32_t i = 0; i < t->nev; i++) {
    const dv_event *e = &t->ev[i];
    /* a shard the replay did not run (fewer shards), or an op a stale or
     * failed replay skipped, is an event of about 0 us but no run: its
     * op's mean is over the runs */
    if ((e->cat != DV_EV_TASK && e->cat != DV_EV_COPY) || e->op < 0 || !e->ran)
      continue;
    (*cost)[e->op] += e->dur * 1e3;
    runs[e->op]++;
  }
  /* SPMD shards: one event each per replay; the op's cost is their mean */
  uint32_t none = 0, first = 0;
  int gpu = 0; /* a GPU trace: ops inside a segment have no events */
  for (uint32_t i = 0; i < t->nev; i++)
    gpu |= t->ev[i].cat == DV_EV_GPU || t->ev[i].cat == DV_EV_LAUNCH;
  for (uint32_t i = 0; i < nops; i++) {
    if (runs[i])
      (*cost)[i] /= runs[i];
    else if (!none++)
      first = i;
  }
  free(runs);
  /* a trace of this graph has every op's events: one without any is
   * costed 0 ns, which the figures would hide */
  if (none && !gpu)
    fprintf(err,
            "reprise dump: --trace: warning: %u of %u ops have no event in "
            "the trace (the first: op %u '%s'): they count 0 ns\n",
            none, nops, first,
            m->ops[first].label[0] ? m->ops[first].label : m->ops[first].name);
  return 0;
}
