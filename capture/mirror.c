/* capture/mirror.c — the graph's mirror table (capture.h "mirrors"):
 * adding entries, resolving mirror references to their sources, and the
 * checks validation and the graph loader share. Copy insertion itself,
 * which decides where mirrors are needed, is in insert.c. */
#include "capture_impl.h"

#include <string.h>

rp_status rp__graph_add_mirror(rp_graph *g, rp_inst src, rp_mem mem,
                               uint32_t *out) {
  rp_inst_view v;
  if (rp__is_mirror(src) || rp__inst_view(g->rt, src, &v) != RP_OK)
    return rp__err(RP_ESTALE,
                   "mirror of instance %#llx: the source is "
                   "stale, unknown or itself a mirror",
                   (unsigned long long)src.id);
  if (mem >= rp_mem_count(g->rt))
    return rp__err(RP_EINVAL,
                   "mirror of instance %#llx: memory %u out of "
                   "range (runtime has %u)",
                   (unsigned long long)src.id, mem, rp_mem_count(g->rt));
  /* the index must fit the handle's upper half and stay below the marker */
  if (g->nmirrors >= UINT32_MAX - 1)
    return rp__err(RP_ERANGE, "graph: too many mirrors");
  if (!rp__grow((void **)&g->mirrors, &g->mirrors_cap, g->nmirrors + 1,
                sizeof *g->mirrors))
    return rp__err(RP_ENOMEM, "graph: out of memory");
  g->mirrors[g->nmirrors] = (rp_gmirror){src, mem};
  *out = g->nmirrors++;
  return RP_OK;
}

rp_inst rp__graph_source(const rp_graph *g, rp_inst i) {
  if (!rp__is_mirror(i))
    return i;
  uint32_t k = rp__mirror_index(i);
  return k < g->nmirrors ? g->mirrors[k].src : (rp_inst){0};
}

rp_status rp__check_mirrors(const rp_graph *g) {
  for (uint32_t k = 0; k < g->nmirrors; k++) {
    const rp_gmirror *m = &g->mirrors[k];
    rp_inst_view v;
    if (rp__is_mirror(m->src) || rp__inst_view(g->rt, m->src, &v) != RP_OK)
      return rp__err(RP_ESTALE,
                     "mirror %u: source instance %#llx is stale "
                     "or unknown",
                     k, (unsigned long long)m->src.id);
    if (m->mem >= rp_mem_count(g->rt))
      return rp__err(RP_EINVAL,
                     "mirror %u: memory %u out of range (runtime "
                     "has %u)",
                     k, m->mem, rp_mem_count(g->rt));
  }
  return RP_OK;
}

static rp_status check_ref(const rp_graph *g, rp_inst i, const char *what,
                           const char *side) {
  if (rp__is_mirror(i) && rp__mirror_index(i) >= g->nmirrors)
    return rp__err(RP_EINVAL,
                   "%s: %s names mirror %u, out of range (the "
                   "graph has %u)",
                   what, side, rp__mirror_index(i), g->nmirrors);
  return RP_OK;
}

rp_status rp__check_mirror_copy(const rp_graph *g, const rp_copy *c,
                                const char *what) {
  rp_status st = check_ref(g, c->src, what, "source");
  if (!st)
    st = check_ref(g, c->dst, what, "destination");
  if (st)
    return st;
  int ms = rp__is_mirror(c->src), md = rp__is_mirror(c->dst);
  rp_inst other = ms ? c->dst : c->src;
  rp_inst mirror = ms ? c->src : c->dst;
  if (ms && md)
    return rp__err(RP_EINVAL,
                   "%s: copies mirror %u into mirror %u (a "
                   "mirror is copied only to or from its source)",
                   what, rp__mirror_index(c->src), rp__mirror_index(c->dst));
  if (rp__graph_source(g, mirror).id != other.id)
    return rp__err(RP_EINVAL,
                   "%s: mirror %u of instance %#llx is copied "
                   "%s instance %#llx (only its own source)",
                   what, rp__mirror_index(mirror),
                   (unsigned long long)rp__graph_source(g, mirror).id,
                   ms ? "into" : "from", (unsigned long long)other.id);
  if (c->redop != RP_REDOP_NONE || c->domain == RP_DOMAIN_RECT ||
      (unsigned)c->domain > RP_DOMAIN_RECT)
    return rp__err(RP_EINVAL,
                   "%s: a mirror copy moves the whole instance: "
                   "no reduction and no RECT domain",
                   what);
  rp_inst_view v;
  st = rp__inst_view(g->rt, other, &v);
  if (st)
    return rp__err(st, "%s: instance %#llx %s", what,
                   (unsigned long long)other.id, rp__inst_missing(other));
  return RP_OK;
}

rp_status rp__resolve_accesses(const rp_graph *g, const rp_access *acc,
                               uint32_t nacc, const char *what,
                               rp_access **out) {
  *out = NULL;
  if (!nacc)
    return RP_OK;
  rp_access *r = malloc(sizeof *r * nacc);
  if (!r)
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  for (uint32_t i = 0; i < nacc; i++) {
    if (rp__is_mirror(acc[i].inst)) { /* the label only where it may be used */
      char side[32];
      snprintf(side, sizeof side, "access %u", i);
      rp_status st = check_ref(g, acc[i].inst, what, side);
      if (st) {
        free(r);
        return st;
      }
    }
    r[i] = acc[i];
    r[i].inst = rp__graph_source(g, acc[i].inst);
  }
  *out = r;
  return RP_OK;
}

rp_status rp__graph_add_task_mirrored(rp_graph *g, const rp_launch *l,
                                      rp_op_id *out) {
  if (!g || !l)
    return rp__err(RP_EINVAL, "rp_graph_add_task: NULL argument");
  int any = 0;
  for (uint32_t i = 0; l->accesses && i < l->naccess; i++)
    any |= rp__is_mirror(l->accesses[i].inst);
  if (!any)
    return rp_graph_add_task(g, l, out);
  if (l->wait.id)
    return rp__err(RP_EINVAL, "rp_graph_add_task: use edges and ports, not "
                              "wait events, in the builder");
  rp_access *res;
  rp_status st = rp__resolve_accesses(g, l->accesses, l->naccess,
                                      "rp_graph_add_task", &res);
  if (st)
    return st;
  rp_launch chk = *l;
  chk.accesses = res;
  st = rp__check_launch(g->rt, &chk, 1);
  free(res);
  if (st)
    return st;
  rp_gop op;
  rp__gop_from_launch(&op, l);
  return rp__graph_append(g, &op, out);
}

/* ---- reach ---- */

int rp__reach(rp_runtime *rt, rp_proc p, rp_inst inst) {
  rp_capture_state *cs = rp__layer_get(rt, RP_LAYER_CAPTURE);
  if (cs && cs->reach)
    return cs->reach(cs->reach_arg, p, inst);
  rp_inst_view v;
  if (rp__inst_view(rt, inst, &v) != RP_OK)
    return 0;
  return rp_proc_can_access(rt, p, v.info.mem);
}

rp_status rp__capture_set_reach(rp_runtime *rt, rp_reach_fn fn, void *arg) {
  if (!rt)
    return rp__err(RP_EINVAL, "rp__capture_set_reach: NULL runtime");
  rp_capture_state *cs = rp__capture_state(rt);
  if (!cs)
    return rp__err(RP_ENOMEM, "rp__capture_set_reach: out of memory");
  cs->reach = fn;
  cs->reach_arg = arg;
  return RP_OK;
}
