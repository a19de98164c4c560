/* replay/dump.c — an exec's compiled form: per-worker schedules, the waits
 * between them, and why it was placed that way (text, DOT, JSON). */
#include "lower.h"

static const char *unit_name(const rp_exec *ex, const rp_unit *u) {
  RP_UNUSED(ex);
  return u->kind == RP_UNIT_COPY ? "copy" : u->name;
}

/* A launcher has no op: -1 in DOT and JSON. */
static long long unit_op(const rp_unit *u) {
  return u->kind == RP_UNIT_LAUNCH ? -1 : (long long)u->op;
}

static void dump_text(const rp_exec *ex, FILE *f) {
  fprintf(f, "exec: %u ops, %u units, %u of %u workers used, %u in flight "
          "at most\nplacement: %s\n", ex->g->nops, ex->nunits, ex->active,
          ex->nlanes, ex->max_inflight, ex->place_why);
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    if (w < ex->ncpu)
      fprintf(f, "lane %u (worker %u): %u units\n", w, w, l->len);
    else
      fprintf(f, "lane %u (GPU processor %u, run by segment launches): %u "
              "units\n", w, w, l->len);
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
        fprintf(f, " post('%s')",
                ex->g->post[ex->posts[u->post_off + k]].name);
      fprintf(f, "%s\n", u->publish ? " publish" : "");
    }
  }
  rp__lower_dump(ex, f);
}

static void dump_dot(const rp_exec *ex, FILE *f) {
  fprintf(f, "digraph exec {\n  rankdir=TB;\n  label=\"%u units on %u "
          "workers\";\n", ex->nunits, ex->active);
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    fprintf(f, "  subgraph cluster_lane%u {\n    label=\"lane %u\";\n", w, w);
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      fprintf(f, "    u%u [label=\"op %lld %s#%u\"];\n", l->units[i],
              unit_op(u), unit_name(ex, u), u->shard);
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

static void dump_json(const rp_exec *ex, FILE *f) {
  fprintf(f, "{\"ops\": %u, \"units\": %u, \"workers_used\": %u, "
          "\"placement\": \"%s\", \"lanes\": [", ex->g->nops, ex->nunits,
          ex->active, ex->place_why);
  int first_lane = 1;
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (!l->len)
      continue;
    fprintf(f, "%s{\"worker\": %u, \"units\": [", first_lane ? "" : ", ", w);
    first_lane = 0;
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      fprintf(f, "%s{\"op\": %lld, \"name\": \"%s\", \"shard\": %u, "
              "\"waits\": [", i ? ", " : "", unit_op(u), unit_name(ex, u),
              u->shard);
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
  if (!ex || !f || ex->magic != RP_EXEC_MAGIC)
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
  return ferror(f) ? rp__err(RP_EIO, "rp_exec_dump: write failed") : RP_OK;
}
