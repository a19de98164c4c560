/* replay/dump.c — an exec's compiled form: per-worker schedules, the waits
 * between them, and why it was placed that way (text, DOT, JSON). */
#include "lower.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *unit_name(const rp_exec *ex, const rp_unit *u) {
  RP_UNUSED(ex);
  return u->kind == RP_UNIT_COPY ? "copy" : u->name;
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

/* A DOT string body: quotes and backslashes escaped, control bytes dropped. */
static void dot_str(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p >= 0x20)
      fputc(*p, f);
  }
}

static void dump_dot(const rp_exec *ex, FILE *f) {
  fprintf(f,
          "digraph exec {\n  rankdir=TB;\n  label=\"%u units on %u "
          "workers\";\n",
          ex->nunits, ex->active);
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    fprintf(f, "  subgraph cluster_lane%u {\n    label=\"lane %u\";\n", w, w);
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      fprintf(f, "    u%u [label=\"op %lld ", l->units[i], unit_op(u));
      dot_str(f, unit_name(ex, u));
      fprintf(f, "#%u\"];\n", u->shard);
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

/* Task names may hold quotes or control bytes. */
void rp__json_str(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
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
    return rp__err(RP_EINVAL, "rp_exec_dump: bad argument");
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
  errno = 0;
  if (fflush(f) != 0 || ferror(f))
    return rp__err(RP_EIO, "rp_exec_dump: write failed: %s",
                   strerror(errno ? errno : EIO));
  return RP_OK;
}

/* ---- REPRISE_DUMP=DIR ---- */

static atomic_int env_dump_warned;

static void env_dump_fail(const char *dir, const char *path, const char *why) {
  if (atomic_exchange(&env_dump_warned, 1))
    return; /* said once per process: every exec would repeat it */
  fprintf(stderr,
          "reprise: REPRISE_DUMP=%s: cannot write %s: %s (the exec "
          "is fine; later dump failures are not reported)\n",
          dir, path, why);
}

static void env_dump_schedule(const rp_exec *ex, const char *dir,
                              const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    env_dump_fail(dir, path, strerror(errno));
    return;
  }
  rp_status st = rp_exec_dump(ex, f, RP_DUMP_TEXT);
  if (fclose(f) != 0 && !st)
    st = RP_EIO;
  if (st)
    env_dump_fail(dir, path, rp_status_str(st));
}

void rp__exec_env_dump(rp_exec *ex) {
  const char *dir = getenv("REPRISE_DUMP");
  if (!dir || !*dir)
    return;
  static _Atomic unsigned serial;
  unsigned n = atomic_fetch_add(&serial, 1);
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    env_dump_fail(dir, dir, strerror(errno));
    return;
  }
  size_t len = strlen(dir) + 64;
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
