/* capture/validate.c — graph validation, as instantiate runs it: each
 * problem has its own status and a detail naming the op, port or instance.
 * Validation never changes the graph, so a rejected graph can be fixed and
 * instantiated again. */
#include "capture_impl.h"

#include <string.h>

/* Whether processor p reaches access i of op (a mirror: its memory). */
static int op_reach(const rp_graph *g, rp_proc p, rp_inst inst) {
  if (rp__is_mirror(inst))
    return rp_proc_can_access(g->rt, p, g->mirrors[rp__mirror_index(inst)].mem);
  return rp__reach(g->rt, p, inst);
}

static rp_status reach_err(const rp_graph *g, const char *lab, uint32_t i,
                           rp_inst inst, rp_proc p) {
  rp_inst_view v;
  if (rp__is_mirror(inst)) {
    const rp_gmirror *m = &g->mirrors[rp__mirror_index(inst)];
    return rp__err(RP_EACCESS,
                   "%s: access %u: mirror %u of instance %#llx "
                   "(memory %u) is not accessible from processor %u",
                   lab, i, rp__mirror_index(inst),
                   (unsigned long long)m->src.id, m->mem, p);
  }
  rp__inst_view(g->rt, inst, &v);
  return rp__err(RP_EACCESS,
                 "%s: access %u: instance %#llx (memory %u) is not "
                 "accessible from processor %u%s",
                 lab, i, (unsigned long long)inst.id, v.info.mem, p,
                 g->no_copy_insertion ? " (copy insertion is off)" : "");
}

static rp_status check_task_op(const rp_graph *g, rp_op_id id) {
  const rp_gop *op = &g->ops[id];
  char lab[96];
  const rp_task_rec *t = rp__task_get(g->rt, op->task);
  if (!t)
    return rp__err(RP_ENOTASK, "op %u: task id %u is not registered", id,
                   op->task);
  /* formatted once per op: instantiate validates every op, so this is on
   * the path that has to stay at a few microseconds per op */
  rp__op_label(g, id, lab, sizeof lab);
  /* the launch checks run on the mirrors' sources (type, shape, liveness) */
  rp_access *res;
  rp_status st = rp__resolve_accesses(g, op->acc, op->nacc, lab, &res);
  if (st)
    return st;
  rp_launch l = {.task = op->task,
                 .proc = op->proc,
                 .accesses = res,
                 .naccess = op->nacc,
                 .args = op->args,
                 .args_size = op->args_size,
                 .shards = op->shards,
                 .shard_procs = op->shard_procs,
                 .workspace_bytes = op->ws_bytes,
                 .workspace_align = op->ws_align,
                 .interps = op->interps,
                 .ninterp = op->ninterp};
  st = rp__check_launch(g->rt, &l, 1);
  free(res);
  if (st)
    return rp__err_prefix(st, "%s: ", lab);
  /* the workspace instantiate allocates: the shards' slices, each aligned
   * (as an eager launch rounds it) */
  size_t align = op->ws_align ? op->ws_align : 64, slice, total;
  if (op->ws_bytes && (!rp__align_up_ok(op->ws_bytes, align, &slice) ||
                       !rp__mul_ok(slice, op->shards, &total)))
    return rp__err(RP_ERANGE,
                   "%s: workspace of %u x %zu bytes (aligned to %zu) "
                   "overflows",
                   lab, op->shards, op->ws_bytes, align);
  /* Reach: every access must be addressable from the op's processor(s):
   * copy insertion gave a task that could not reach an instance a mirror,
   * so what is left unreachable was recorded without it. RP_PROC_ANY: the
   * CPU workers, which all reach the same memories (worker 0 answers). */
  for (uint32_t s = 0; s < op->shards; s++) {
    rp_proc p = op->shard_procs ? op->shard_procs[s] : op->proc;
    if (p == RP_PROC_ANY)
      p = 0;
    for (uint32_t i = 0; i < op->nacc; i++)
      if (!op_reach(g, p, op->acc[i].inst))
        return reach_err(g, lab, i, op->acc[i].inst, p);
  }
  return RP_OK;
}

/* seen[op] is p + 1 once port p's list holds op: duplicates in O(binds). */
static rp_status check_ports(const rp_graph *g, const rp_gport *ports,
                             uint32_t n, const char *kind, uint32_t *seen) {
  for (uint32_t p = 0; p < n; p++) {
    if (!ports[p].nops)
      return rp__err(RP_EPORT, "%s port %u '%s' is never bound to an op", kind,
                     p, ports[p].name);
    for (uint32_t q = 0; q < p; q++)
      if (!strcmp(ports[q].name, ports[p].name))
        return rp__err(RP_EPORT,
                       "%s port name '%s' is used twice (ports %u "
                       "and %u)",
                       kind, ports[p].name, q, p);
    for (uint32_t i = 0; i < ports[p].nops; i++) {
      if (ports[p].ops[i] >= g->nops)
        return rp__err(RP_EPORT,
                       "%s port '%s' is bound to op %u, out of "
                       "range",
                       kind, ports[p].name, ports[p].ops[i]);
      if (seen[ports[p].ops[i]] == p + 1)
        return rp__err(RP_EPORT, "%s port '%s' is bound to op %u twice", kind,
                       ports[p].name, ports[p].ops[i]);
      seen[ports[p].ops[i]] = p + 1;
    }
  }
  return RP_OK;
}

static rp_status validate(const rp_graph *g);

rp_status rp_graph_validate(const rp_graph *g) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_validate");
  if (gst_)
    return gst_;
  if (!g)
    return rp__err(RP_EINVAL, "rp_graph_validate: NULL graph");
  rp_status st = validate(g);
  return st ? rp__err_as(st, "rp_graph_validate: ") : RP_OK;
}

static rp_status validate(const rp_graph *g) {
  rp_status st = rp__runtime_check(g->rt);
  if (st)
    return st;
  for (uint32_t i = 0; i < g->nedges; i++)
    if (g->edges[i].from >= g->nops || g->edges[i].to >= g->nops)
      return rp__err(RP_EINVAL,
                     "edge %u (%u -> %u) names an op out of range "
                     "(graph has %u ops)",
                     i, g->edges[i].from, g->edges[i].to, g->nops);
  if (g->npre || g->npost) {
    uint32_t *seen = rp__calloc(g->nops ? g->nops : 1, sizeof *seen);
    if (!seen)
      return rp__err(RP_ENOMEM, "out of memory");
    if (!(st = check_ports(g, g->pre, g->npre, "precondition", seen))) {
      memset(seen, 0, sizeof *seen * g->nops);
      st = check_ports(g, g->post, g->npost, "postcondition", seen);
    }
    free(seen);
    if (st)
      return st;
  }
  if ((st = rp__check_mirrors(g)) != RP_OK)
    return st;
  for (uint32_t id = 0; id < g->nops; id++) {
    const rp_gop *op = &g->ops[id];
    char lab[96];
    if (op->kind == RP_OP_TASK)
      st = check_task_op(g, id);
    else if (op->kind == RP_OP_COPY &&
             (rp__is_mirror(op->copy.src) || rp__is_mirror(op->copy.dst)))
      st = rp__check_mirror_copy(g, &op->copy,
                                 rp__op_label(g, id, lab, sizeof lab));
    else if (op->kind == RP_OP_COPY)
      st = rp__check_copy(g->rt, &op->copy, id);
    else
      st = rp__err(RP_EINVAL, "op %u: unknown kind %d", id, (int)op->kind);
    if (st)
      return st;
  }
  uint32_t *order = malloc(sizeof *order * (g->nops ? g->nops : 1));
  if (!order)
    return rp__err(RP_ENOMEM, "rp_graph_validate: out of memory");
  st = rp__graph_topo(g, order);
  free(order);
  return st;
}
