/* tools/dump_summary.c — `reprise dump --trace FILE --summary`: where the
 * traced replays' time goes. Time per group (the dotted prefix of the op
 * names the events carry) and per task, each processor track's busy share
 * of the traced span, its idle gaps longer than a threshold (5 us), the
 * slowest replays and, for GPU traces, the device time of each GPU's
 * segments. Times are the trace's (us), summed over the traced replays and
 * shown per replay. */
#include "dump_view.h"

#include <stdlib.h>
#include <string.h>

#define SLOT_TID 1000u /* replay-slot tracks start here (replay/dump.c) */
#define TOP_ROWS 20u

typedef struct row {
  char key[RP_NAME_MAX + 1];
  double us;
  uint32_t n;
} row;

typedef struct span {
  double t0, t1;
  uint32_t ev; /* the event that starts it */
} span;

static int cmp_key(const void *a, const void *b) {
  return strcmp(((const row *)a)->key, ((const row *)b)->key);
}

static int cmp_us(const void *a, const void *b) {
  double x = ((const row *)a)->us, y = ((const row *)b)->us;
  return (x < y) - (x > y);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static int cmp_span(const void *a, const void *b) {
  double x = ((const span *)a)->t0, y = ((const span *)b)->t0;
  return (x > y) - (x < y);
}

static int is_work(const dv_event *e) {
  return e->cat == DV_EV_TASK || e->cat == DV_EV_COPY;
}

/* The op's name an event carries: "" for unnamed ops (the task's name or
 * reprise.copy stand in for it there). */
static const char *op_label(const dv_event *e) {
  if (e->cat == DV_EV_TASK)
    return e->task ? e->name : "";
  return strcmp(e->name, "reprise.copy") ? e->name : "";
}

static const char *task_of(const dv_event *e) {
  if (e->cat == DV_EV_COPY)
    return "copy";
  return e->task ? e->task : e->name;
}

/* Rows keyed by group (by_task 0) or task, summed, largest first. */
static uint32_t tally(const dv_trace *t, unsigned depth, int by_task, row *r) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->nev; i++) {
    const dv_event *e = &t->ev[i];
    if (!is_work(e))
      continue;
    if (by_task)
      snprintf(r[n].key, sizeof r[n].key, "%s", task_of(e));
    else
      dv_group_key(op_label(e), depth, r[n].key, sizeof r[n].key);
    r[n].us = e->dur;
    r[n++].n = 1;
  }
  qsort(r, n, sizeof *r, cmp_key);
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (k && !strcmp(r[k - 1].key, r[i].key)) {
      r[k - 1].us += r[i].us;
      r[k - 1].n++;
    } else {
      r[k++] = r[i];
    }
  }
  qsort(r, k, sizeof *r, cmp_us);
  return k;
}

static void print_rows(const char *title, const row *r, uint32_t n,
                       uint32_t replays, FILE *out) {
  double total = 0, rest = 0;
  for (uint32_t i = 0; i < n; i++)
    total += r[i].us;
  fprintf(out, "%s (%u; per replay, share of op time):\n", title, n);
  for (uint32_t i = 0; i < n; i++) {
    if (i >= TOP_ROWS) {
      rest += r[i].us;
      continue;
    }
    fprintf(out, "  %-32s %10.1f us  %5.1f%%  (%u events)\n", r[i].key,
            r[i].us / replays, total > 0 ? 100.0 * r[i].us / total : 0.0,
            r[i].n);
  }
  if (n > TOP_ROWS)
    fprintf(out, "  ... %u more: %.1f us (%.1f%%)\n", n - TOP_ROWS,
            rest / replays, total > 0 ? 100.0 * rest / total : 0.0);
}

/* The replays' spans, sorted and merged (the time the tracks are measured
 * over: a training loop's host work between replays is not idle time). */
typedef struct windows {
  span *w;
  uint32_t n;
  uint32_t replays;
  double total, t0, t1; /* their length; first start, last end */
} windows;

static int make_windows(const dv_trace *t, windows *ws) {
  memset(ws, 0, sizeof *ws);
  ws->w = malloc(sizeof *ws->w * (t->nev ? t->nev : 1));
  if (!ws->w)
    return -1;
  for (uint32_t i = 0; i < t->nev; i++)
    if (t->ev[i].cat == DV_EV_REPLAY)
      ws->w[ws->n++] = (span){t->ev[i].ts, t->ev[i].ts + t->ev[i].dur, i};
  ws->replays = ws->n;
  if (!ws->n) { /* no replay events: the events' extent */
    span all = {1e300, 0, 0};
    for (uint32_t i = 0; i < t->nev; i++) {
      if (t->ev[i].ts < all.t0)
        all.t0 = t->ev[i].ts;
      if (t->ev[i].ts + t->ev[i].dur > all.t1)
        all.t1 = t->ev[i].ts + t->ev[i].dur;
    }
    ws->w[ws->n++] = all;
    ws->replays = 1;
  }
  qsort(ws->w, ws->n, sizeof *ws->w, cmp_span);
  uint32_t k = 0;
  for (uint32_t i = 0; i < ws->n; i++)
    if (k && ws->w[i].t0 <= ws->w[k - 1].t1) {
      if (ws->w[i].t1 > ws->w[k - 1].t1)
        ws->w[k - 1].t1 = ws->w[i].t1;
    } else {
      ws->w[k++] = ws->w[i];
    }
  ws->n = k;
  for (uint32_t i = 0; i < k; i++)
    ws->total += ws->w[i].t1 - ws->w[i].t0;
  ws->t0 = ws->w[0].t0, ws->t1 = ws->w[k - 1].t1;
  return 0;
}

static const char *track_name(const dv_trace *t, uint32_t tid) {
  for (uint32_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].tid == tid && t->tracks[i].name)
      return t->tracks[i].name;
  return "track";
}

typedef struct gap_note {
  double us, at;
  uint32_t tid, ev; /* ev: the event after the gap, UINT32_MAX: none */
} gap_note;

/* One track: its busy spans merged, measured inside the replays' windows:
 * busy time, and its idle gaps over gap_us, those before its first op
 * and after its last op in a replay included (a worker done early waits
 * for the replay's end: idle). */
static void one_track(const dv_trace *t, uint32_t tid, span *s,
                      const windows *ws, double gap_us, gap_note *big,
                      FILE *out) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->nev; i++)
    if (t->ev[i].tid == tid && t->ev[i].cat != DV_EV_WAIT &&
        t->ev[i].cat != DV_EV_REPLAY)
      s[n++] = (span){t->ev[i].ts, t->ev[i].ts + t->ev[i].dur, i};
  qsort(s, n, sizeof *s, cmp_span);
  uint32_t m = 0; /* merged in place: sorted, disjoint */
  for (uint32_t i = 0; i < n; i++)
    if (m && s[i].t0 <= s[m - 1].t1) {
      if (s[i].t1 > s[m - 1].t1)
        s[m - 1].t1 = s[i].t1;
    } else {
      s[m++] = s[i];
    }
  double busy = 0, gaps = 0;
  uint32_t ngap = 0, j = 0;
  for (uint32_t w = 0; w < ws->n; w++) {
    double a = ws->w[w].t0, b = ws->w[w].t1, cur = a;
    while (j < m && s[j].t1 <= a)
      j++;
    for (uint32_t k = j; k <= m; k++) {
      int last = k == m || s[k].t0 >= b; /* the window's end */
      double s0 = last ? b : s[k].t0 > a ? s[k].t0 : a;
      double g = s0 - cur;
      if (g > gap_us) {
        ngap++, gaps += g;
        if (g > big->us)
          *big = (gap_note){g, cur, tid, last ? UINT32_MAX : s[k].ev};
      }
      if (last)
        break;
      double s1 = s[k].t1 < b ? s[k].t1 : b;
      busy += s1 - s0;
      cur = s1;
    }
  }
  double span_us = ws->total;
  fprintf(out,
          "  %-24s busy %10.1f us of %.1f us (%5.1f%%); %u idle gaps "
          "over %.0f us, %.1f us in all\n",
          track_name(t, tid), busy, span_us,
          span_us > 0 ? 100.0 * busy / span_us : 0.0, ngap, gap_us, gaps);
}

static int tracks(const dv_trace *t, const windows *ws, double gap_us,
                  FILE *out) {
  span *s = malloc(sizeof *s * t->nev);
  uint32_t *seen = calloc(t->nev, sizeof *seen);
  if (!s || !seen) {
    free(s), free(seen);
    return -1;
  }
  uint32_t ns = 0;
  for (uint32_t i = 0; i < t->nev; i++) {
    uint32_t tid = t->ev[i].tid, k = 0;
    while (k < ns && seen[k] != tid)
      k++;
    if (k == ns && tid < SLOT_TID)
      seen[ns++] = tid;
  }
  qsort(seen, ns, sizeof *seen, cmp_u32); /* tracks in tid order */
  fprintf(out, "processors (busy share of the time in replays):\n");
  gap_note big = {0};
  for (uint32_t k = 0; k < ns; k++)
    one_track(t, seen[k], s, ws, gap_us, &big, out);
  if (big.us > 0 && big.ev != UINT32_MAX)
    fprintf(out, "  largest idle gap: %.1f us on %s at %.1f us, before '%s'\n",
            big.us, track_name(t, big.tid), big.at, t->ev[big.ev].name);
  else if (big.us > 0)
    fprintf(out,
            "  largest idle gap: %.1f us on %s at %.1f us, to the end of "
            "the replay\n",
            big.us, track_name(t, big.tid), big.at);
  free(s), free(seen);
  return 0;
}

static void slowest(const dv_trace *t, FILE *out) {
  uint32_t shown[5] = {0}, n = 0;
  fprintf(out, "slowest replays:\n");
  for (uint32_t k = 0; k < 5; k++) {
    int64_t best = -1;
    for (uint32_t i = 0; i < t->nev; i++) {
      int taken = 0;
      for (uint32_t j = 0; j < n; j++)
        taken |= shown[j] == i;
      if (t->ev[i].cat == DV_EV_REPLAY && !taken &&
          (best < 0 || t->ev[i].dur > t->ev[best].dur))
        best = i;
    }
    if (best < 0)
      break;
    shown[n++] = (uint32_t)best;
    fprintf(out, "  %-12s %10.1f us\n", t->ev[best].name, t->ev[best].dur);
  }
  if (!n)
    fprintf(out, "  (no replay events)\n");
}

static void device(const dv_trace *t, uint32_t replays, FILE *out) {
  double dev = 0, host = 0;
  uint32_t nseg = 0, ndev = 0;
  for (uint32_t i = 0; i < t->nev; i++) {
    if (t->ev[i].cat == DV_EV_GPU) {
      nseg++;
      ndev += t->ev[i].device;
      dev += t->ev[i].device ? t->ev[i].dur : 0;
    } else if (t->ev[i].cat == DV_EV_LAUNCH) {
      host += t->ev[i].dur;
    }
  }
  if (!nseg)
    return;
  fprintf(out,
          "GPU segments: %u traced (%u with device times): %.1f us per "
          "replay on the devices, %.1f us per replay launching them\n",
          nseg, ndev, dev / replays, host / replays);
}

int dv_summary(const dv_trace *t, unsigned depth, double gap_us, FILE *out,
               FILE *err) {
  row *r = malloc(sizeof *r * (t->nev ? t->nev : 1));
  windows ws;
  if (!r || make_windows(t, &ws)) {
    free(r);
    fprintf(err, "reprise dump: --summary: out of memory\n");
    return -1;
  }
  fprintf(out,
          "trace: %u replays traced, %u events, %.1f us in replays (%.1f us "
          "from the first to the last)\n",
          ws.replays, t->nev, ws.total, ws.t1 - ws.t0);
  char title[64];
  snprintf(title, sizeof title, "time per group (depth %u)", depth);
  print_rows(title, r, tally(t, depth, 0, r), ws.replays, out);
  print_rows("time per task", r, tally(t, depth, 1, r), ws.replays, out);
  free(r);
  int rc = tracks(t, &ws, gap_us, out);
  if (rc)
    fprintf(err, "reprise dump: --summary: out of memory\n");
  free(ws.w);
  if (!rc) {
    slowest(t, out);
    device(t, ws.replays, out);
  }
  return rc || ferror(out) ? -1 : 0;
}
