/* capture/query.c — reading a recorded graph back through the public
 * header (rp_graph_op_query and its kin): what the dump tool and a user's
 * own analyses need, without the graph's structs. */
#include "capture_impl.h"

#include <string.h>

rp_runtime *rp_graph_runtime(const rp_graph *g) {
  return rp__graph_check(g, "rp_graph_runtime") ? NULL : g->rt;
}

static rp_status get_op(const rp_graph *g, rp_op_id op, const char *what,
                        const rp_gop **out) {
  rp_status st = rp__graph_check(g, what);
  if (st)
    return st;
  if (op >= g->nops)
    return rp__err(RP_ERANGE, "%s: op %u of %u", what, op, g->nops);
  *out = &g->ops[op];
  return RP_OK;
}

rp_status rp_graph_op_query(const rp_graph *g, rp_op_id op, rp_op_info *out) {
  const rp_gop *go = NULL;
  rp_status st = get_op(g, op, "rp_graph_op_query", &go);
  if (st)
    return st;
  if (!out)
    return rp__err(RP_EINVAL, "rp_graph_op_query: NULL out");
  rp_access tmp[2];
  const rp_access *acc;
  rp_op_info o = {
      .kind = go->kind,
      .shards = 1,
      .proc = RP_PROC_ANY,
      .naccess = rp__op_accesses(go, tmp, &acc),
      .inserted = go->inserted,
  };
  if (go->kind == RP_OP_TASK) {
    o.task = go->task;
    o.proc = go->proc;
    o.shards = go->shards ? go->shards : 1;
    o.shard_procs = go->shard_procs;
    o.cost_ns = go->cost_ns;
  } else {
    o.copy = go->copy;
    o.copy.wait = RP_NO_EVENT;
  }
  *out = o;
  return RP_OK;
}

rp_status rp_graph_op_accesses(const rp_graph *g, rp_op_id op, rp_access *out,
                               uint32_t cap, uint32_t *n) {
  const rp_gop *go = NULL;
  rp_status st = get_op(g, op, "rp_graph_op_accesses", &go);
  if (st)
    return st;
  if (!n || (cap && !out))
    return rp__err(RP_EINVAL, "rp_graph_op_accesses: NULL argument");
  rp_access tmp[2];
  const rp_access *acc;
  uint32_t k = rp__op_accesses(go, tmp, &acc);
  *n = k;
  if (cap && k) /* acc may be NULL for an op without accesses */
    memcpy(out, acc, sizeof *out * (k < cap ? k : cap));
  if (k > cap && (out || cap))
    return rp__err(RP_ERANGE,
                   "rp_graph_op_accesses: op %u has %u accesses, "
                   "room for %u",
                   op, k, cap);
  return RP_OK;
}

uint32_t rp_graph_mirror_count(const rp_graph *g) {
  return rp__graph_check(g, "rp_graph_mirror_count") ? 0 : g->nmirrors;
}

rp_status rp_graph_mirror_query(const rp_graph *g, uint32_t k, rp_inst *ref,
                                rp_inst *source, rp_mem *mem) {
  rp_status st = rp__graph_check(g, "rp_graph_mirror_query");
  if (st)
    return st;
  if (k >= g->nmirrors)
    return rp__err(RP_ERANGE, "rp_graph_mirror_query: mirror %u of %u", k,
                   g->nmirrors);
  if (ref)
    *ref = rp__mirror_ref(k);
  if (source)
    *source = g->mirrors[k].src;
  if (mem)
    *mem = g->mirrors[k].mem;
  return RP_OK;
}

rp_status rp_graph_edge_query(const rp_graph *g, uint32_t e, rp_op_id *from,
                              rp_op_id *to, int *inferred) {
  rp_status st = rp__graph_check(g, "rp_graph_edge_query");
  if (st)
    return st;
  if (!from || !to || !inferred)
    return rp__err(RP_EINVAL, "rp_graph_edge_query: NULL argument");
  if (e >= g->nedges)
    return rp__err(RP_ERANGE, "rp_graph_edge_query: edge %u of %u", e,
                   g->nedges);
  *from = g->edges[e].from;
  *to = g->edges[e].to;
  *inferred = g->edges[e].inferred != 0;
  return RP_OK;
}

rp_status rp_graph_postcondition_ops(const rp_graph *g, rp_port_id p,
                                     rp_op_id *out, uint32_t cap, uint32_t *n) {
  rp_status st = rp__graph_check(g, "rp_graph_postcondition_ops");
  if (st)
    return st;
  if (!n || (cap && !out))
    return rp__err(RP_EINVAL, "rp_graph_postcondition_ops: NULL argument");
  if (p >= g->npost)
    return rp__err(RP_ERANGE, "rp_graph_postcondition_ops: port %u of %u", p,
                   g->npost);
  const rp_gport *port = &g->post[p];
  *n = port->nops;
  if (cap && port->nops)
    memcpy(out, port->ops, sizeof *out * (port->nops < cap ? port->nops : cap));
  if (port->nops > cap && (out || cap))
    return rp__err(RP_ERANGE,
                   "rp_graph_postcondition_ops: port %u has %u ops, room "
                   "for %u",
                   p, port->nops, cap);
  return RP_OK;
}

rp_status rp_graph_load_mem(rp_runtime *rt, const void *buf, size_t len,
                            const rp_inst *insts, uint32_t ninsts,
                            size_t max_alloc, rp_graph **out) {
  rp_status cst = rp__rt_check(rt, "rp_graph_load_mem");
  if (cst)
    return cst;
  if (len > RP_GRAPH_FILE_MAX)
    return rp__err(RP_ERANGE,
                   "rp_graph_load_mem: %zu bytes, above the limit of %u", len,
                   RP_GRAPH_FILE_MAX);
  rp_status st =
      rp__graph_load_mem(rt, buf, len, insts, ninsts, max_alloc, out);
  return st ? rp__err_as(st, "rp_graph_load_mem: ") : RP_OK;
}

rp_status rp_graph_file_machine(const void *buf, size_t len, rp_machine_desc *m,
                                int *present) {
  rp_status st = rp__graph_machine(buf, len, m, present);
  return st ? rp__err_as(st, "rp_graph_file_machine: ") : RP_OK;
}
