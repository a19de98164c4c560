/* capture/graph.c — graphs: the explicit builder, validation, topological
 * order with cycle reporting, transitive dependence queries. */
#include "capture_impl.h"

#include <string.h>

/* ---- ops ---- */

void rp__gop_from_launch(rp_gop *op, const rp_launch *l) {
  memset(op, 0, sizeof *op);
  op->kind = RP_OP_TASK;
  op->task = l->task;
  op->proc = l->proc;
  op->shards = l->shards > 1 ? l->shards : 1;
  op->shard_procs = (rp_proc *)l->shard_procs;
  op->ws_bytes = l->workspace_bytes;
  op->ws_align = l->workspace_align;
  op->cost_ns = l->cost_ns;
  op->args = (void *)l->args;
  op->args_size = l->args_size;
  op->acc = (rp_access *)l->accesses;
  op->nacc = l->naccess;
  op->interps = (rp_interp *)l->interps;
  op->ninterp = l->ninterp;
}

uint32_t rp__op_accesses(const rp_gop *op, rp_access tmp[2],
                         const rp_access **out) {
  if (op->kind == RP_OP_TASK) {
    *out = op->acc;
    return op->nacc;
  }
  tmp[0] = (rp_access){op->copy.src, RP_READ, RP_REDOP_NONE};
  tmp[1] = (rp_access){op->copy.dst, op->copy.redop ? RP_REDUCE : RP_WRITE,
                       op->copy.redop};
  *out = tmp;
  return 2;
}

void rp__gop_clear(rp_gop *op) {
  free(op->shard_procs);
  free(op->args);
  free(op->acc);
  free(op->interps);
  memset(op, 0, sizeof *op);
}

static void *dup_bytes(const void *p, size_t n, int *fail) {
  if (!n || !p)
    return NULL;
  void *d = malloc(n);
  if (!d)
    *fail = 1;
  else
    memcpy(d, p, n);
  return d;
}

rp_status rp__gop_copy(rp_gop *dst, const rp_gop *src) {
  int fail = 0;
  *dst = *src;
  dst->shard_procs =
      src->shard_procs
          ? dup_bytes(src->shard_procs, sizeof(rp_proc) * src->shards, &fail)
          : NULL;
  dst->args = dup_bytes(src->args, src->args_size, &fail);
  dst->acc = dup_bytes(src->acc, sizeof(rp_access) * src->nacc, &fail);
  dst->interps =
      dup_bytes(src->interps, sizeof(rp_interp) * src->ninterp, &fail);
  if (fail) {
    rp__gop_clear(dst);
    return rp__err(RP_ENOMEM, "graph: out of memory");
  }
  return RP_OK;
}

const char *rp__op_label(const rp_graph *g, rp_op_id id, char *buf, size_t n) {
  if (id >= g->nops) {
    snprintf(buf, n, "op %u (out of range)", id);
    return buf;
  }
  const rp_gop *op = &g->ops[id];
  char named[RP_NAME_MAX + 4] = "";
  if (op->name[0])
    snprintf(named, sizeof named, " '%s'", op->name);
  if (op->kind == RP_OP_TASK) {
    const char *name = rp_task_name(g->rt, op->task);
    snprintf(buf, n, "op %u%s (task '%s')", id, named, name ? name : "?");
  } else {
    snprintf(buf, n, "op %u%s (%scopy)", id, named,
             op->inserted ? "inserted " : "");
  }
  return buf;
}

/* ---- lifetime ---- */

rp_status rp__graph_new(rp_runtime *rt, const char *what, rp_graph **out) {
  /* rp_graph_create, rp_graph_load and rp_capture_begin come here */
  rp_status st = rp__runtime_refuse_closing(rt, what);
  if (st)
    return st;
  rp_graph *g = rp__calloc(1, sizeof *g);
  if (!g)
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  g->magic = RP_GRAPH_MAGIC;
  g->rt = rt;
  rp__runtime_ref(rt, 1);
  *out = g;
  return RP_OK;
}

rp_status rp__graph_check(const rp_graph *g, const char *what) {
  if (RP_UNLIKELY(!g))
    return rp__err(RP_EINVAL, "%s: NULL graph", what);
  if (RP_LIKELY(g->magic == RP_GRAPH_MAGIC))
    return RP_OK;
  if (g->magic == RP_DEAD_MAGIC)
    return rp__err(RP_ESTALE, "%s: the graph %p was destroyed", what,
                   (const void *)g);
  return rp__err(RP_EINVAL, "%s: %p is not a graph", what, (const void *)g);
}

rp_status rp_graph_create(rp_runtime *rt, rp_graph **out) {
  rp_status st = rp__rt_check(rt, "rp_graph_create");
  if (st)
    return st;
  if (!out)
    return rp__err(RP_EINVAL, "rp_graph_create: NULL argument");
  return rp__graph_new(rt, "rp_graph_create", out);
}

static void ports_free(rp_gport *p, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    free(p[i].name);
    free(p[i].ops);
  }
  free(p);
}

/* Frees what g holds and drops its runtime reference. */
static void graph_release(rp_graph *g) {
  for (uint32_t i = 0; i < g->nops; i++)
    rp__gop_clear(&g->ops[i]);
  free(g->ops);
  free(g->edges);
  free(g->eidx);
  ports_free(g->pre, g->npre);
  ports_free(g->post, g->npost);
  free(g->mirrors);
  rp__runtime_ref(g->rt, -1);
}

rp_status rp_graph_destroy(rp_graph *g) {
  if (!g)
    return RP_OK;
  rp_status st = rp__graph_check(g, "rp_graph_destroy");
  if (!st)
    st = rp__refuse_in_replay("rp_graph_destroy");
  if (st)
    return st;
  graph_release(g);
  /* quarantined with a poisoned magic: a second destroy or a later call
   * with this handle is refused (RP_ESTALE) */
  g->magic = RP_DEAD_MAGIC;
  rp__quarantine(g);
  return RP_OK;
}

void rp__graph_discard(rp_graph *g) {
  if (!g)
    return;
  graph_release(g);
  free(g);
}

/* ---- building ---- */

rp_status rp__graph_append(rp_graph *g, const rp_gop *op, rp_op_id *out) {
  if (g->nops == UINT32_MAX - 1)
    return rp__err(RP_ERANGE, "graph: too many ops");
  if (!rp__grow((void **)&g->ops, &g->ops_cap, g->nops + 1, sizeof *g->ops))
    return rp__err(RP_ENOMEM, "graph: out of memory");
  rp_status st = rp__gop_copy(&g->ops[g->nops], op);
  if (st)
    return st;
  /* Keep group tags of appended parallel-operator copies (graph files carry
   * them) clear of the ones later rp_graph_add_parallel calls hand out. */
  if (op->group > g->ngroups)
    g->ngroups = op->group;
  if (out)
    *out = g->nops;
  g->nops++;
  return RP_OK;
}

/* ---- the edge index (see struct rp_graph) ---- */

static uint32_t edge_hash(rp_op_id from, rp_op_id to) {
  uint64_t k = ((uint64_t)from << 32 | to) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(k >> 32);
}

/* The position of edge from -> to, or UINT32_MAX when absent. */
static uint32_t eidx_find(const rp_graph *g, rp_op_id from, rp_op_id to) {
  if (!g->eidx)
    return UINT32_MAX;
  uint32_t mask = g->eidx_cap - 1;
  for (uint32_t h = edge_hash(from, to) & mask; g->eidx[h];
       h = (h + 1) & mask) {
    uint32_t k = g->eidx[h] - 1;
    if (k < g->nedges && g->edges[k].from == from && g->edges[k].to == to)
      return k;
  }
  return UINT32_MAX;
}

/* Writes position k (no capacity check: the caller made room). */
static void eidx_put(rp_graph *g, uint32_t k) {
  uint32_t mask = g->eidx_cap - 1;
  uint32_t h = edge_hash(g->edges[k].from, g->edges[k].to) & mask;
  while (g->eidx[h])
    h = (h + 1) & mask;
  g->eidx[h] = k + 1;
  g->eidx_used++;
}

/* Makes room for `more` entries at a load of at most 1/2. When full (stale
 * entries count) or missing (a graph with edges but no index yet), it is
 * rebuilt from the edges, sized for the live ones: amortized O(1). */
static rp_status eidx_reserve(rp_graph *g, uint32_t more) {
  if (g->eidx && ((uint64_t)g->eidx_used + more) * 2 <= g->eidx_cap)
    return RP_OK;
  uint64_t cap = 16, live = (uint64_t)g->nedges + more;
  while (cap < live * 2)
    cap *= 2;
  if (cap > (1ull << 31))
    return rp__err(RP_ERANGE,
                   "graph: %u edges are past the edge index's "
                   "limit of 2^30",
                   g->nedges);
  uint32_t *t = rp__calloc((size_t)cap, sizeof *t);
  if (!t)
    return rp__err(RP_ENOMEM, "graph: out of memory");
  free(g->eidx);
  g->eidx = t;
  g->eidx_cap = (uint32_t)cap;
  g->eidx_used = 0;
  for (uint32_t k = 0; k < g->nedges; k++)
    eidx_put(g, k);
  return RP_OK;
}

static rp_status edge_add(rp_graph *g, rp_op_id from, rp_op_id to,
                          uint32_t inferred) {
  rp_status st = eidx_reserve(g, 1);
  if (st)
    return st;
  if (!rp__grow((void **)&g->edges, &g->edges_cap, g->nedges + 1,
                sizeof *g->edges))
    return rp__err(RP_ENOMEM, "graph: out of memory");
  g->edges[g->nedges++] = (rp_gedge){from, to, inferred};
  eidx_put(g, g->nedges - 1);
  return RP_OK;
}

rp_status rp__graph_edge(rp_graph *g, rp_op_id from, rp_op_id to) {
  return edge_add(g, from, to, 0);
}

rp_status rp__graph_edge_inferred(rp_graph *g, rp_op_id from, rp_op_id to) {
  rp_status st = eidx_reserve(g, 0); /* builds a missing index */
  if (st)
    return st;
  if (eidx_find(g, from, to) != UINT32_MAX)
    return RP_OK; /* there already, inferred or asked for */
  return edge_add(g, from, to, 1);
}

rp_status rp_graph_add_task(rp_graph *g, const rp_launch *l, rp_op_id *out) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_task");
  if (gst_)
    return gst_;
  if (!g || !l)
    return rp__err(RP_EINVAL, "rp_graph_add_task: NULL argument");
  if (l->wait.id)
    return rp__err(RP_EINVAL, "rp_graph_add_task: use edges and ports, not "
                              "wait events, in the builder");
  rp_status st = rp__check_launch(g->rt, l, 1);
  if (st)
    return rp__err_as(st, "rp_graph_add_task: ");
  rp_gop op;
  rp__gop_from_launch(&op, l);
  return rp__graph_append(g, &op, out);
}

static rp_status check_op_id(const rp_graph *g, rp_op_id id, const char *what) {
  if (id >= g->nops)
    return rp__err(RP_EINVAL, "%s: op %u out of range (graph has %u ops)", what,
                   id, g->nops);
  return RP_OK;
}

rp_status rp_graph_add_edge(rp_graph *g, rp_op_id from, rp_op_id to) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_edge");
  if (gst_)
    return gst_;
  if (!g)
    return rp__err(RP_EINVAL, "rp_graph_add_edge: NULL graph");
  rp_status st = check_op_id(g, from, "rp_graph_add_edge");
  if (!st)
    st = check_op_id(g, to, "rp_graph_add_edge");
  if (st)
    return st;
  if ((st = eidx_reserve(g, 0)) != RP_OK) /* builds a missing index */
    return st;
  uint32_t k = eidx_find(g, from, to);
  if (k != UINT32_MAX) { /* asked for now, whoever added it first */
    g->edges[k].inferred = 0;
    return RP_OK;
  }
  return rp__graph_edge(g, from, to);
}

rp_status rp_graph_remove_edge(rp_graph *g, rp_op_id from, rp_op_id to) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_remove_edge");
  if (gst_)
    return gst_;
  if (!g)
    return rp__err(RP_EINVAL, "rp_graph_remove_edge: NULL graph");
  rp_status st = eidx_reserve(g, 1); /* room to re-index the moved edge */
  if (st)
    return st;
  uint32_t i = eidx_find(g, from, to);
  if (i == UINT32_MAX)
    return rp__err(RP_ENOENT, "rp_graph_remove_edge: no edge %u -> %u", from,
                   to);
  /* the last edge moves into i: index it there (its old entry, past the
   * end now, goes stale) */
  g->edges[i] = g->edges[--g->nedges];
  if (i < g->nedges)
    eidx_put(g, i);
  return RP_OK;
}

static rp_status add_port(rp_gport **ports, uint32_t *n, uint32_t *cap,
                          const char *name, rp_port_id *out, const char *what) {
  if (!name || !*name)
    return rp__err(RP_EINVAL, "%s: a port needs a name", what);
  rp_status st = rp__name_check(name, what);
  if (st)
    return st;
  for (uint32_t i = 0; i < *n; i++)
    if (!strcmp((*ports)[i].name, name))
      return rp__err(RP_EPORT, "%s: port '%s' is already used (port %u)", what,
                     name, i);
  if (!rp__grow((void **)ports, cap, *n + 1, sizeof **ports))
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  char *dup = rp__strdup(name);
  if (!dup)
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  (*ports)[*n] = (rp_gport){.name = dup};
  if (out)
    *out = *n;
  (*n)++;
  return RP_OK;
}

rp_status rp_graph_add_precondition(rp_graph *g, const char *name,
                                    rp_port_id *out) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_precondition");
  if (gst_)
    return gst_;
  if (!g)
    return rp__err(RP_EINVAL, "rp_graph_add_precondition: NULL graph");
  return add_port(&g->pre, &g->npre, &g->pre_cap, name, out,
                  "rp_graph_add_precondition");
}

rp_status rp_graph_add_postcondition(rp_graph *g, const char *name,
                                     rp_port_id *out) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_postcondition");
  if (gst_)
    return gst_;
  if (!g)
    return rp__err(RP_EINVAL, "rp_graph_add_postcondition: NULL graph");
  return add_port(&g->post, &g->npost, &g->post_cap, name, out,
                  "rp_graph_add_postcondition");
}

static rp_status bind(rp_graph *g, int pre, rp_port_id p, rp_op_id op,
                      const char *what) {
  rp_status gst = rp__graph_check(g, what);
  if (gst)
    return gst;
  rp_gport *ports = pre ? g->pre : g->post;
  uint32_t n = pre ? g->npre : g->npost;
  if (p >= n)
    return rp__err(RP_EPORT, "%s: port %u out of range (%u ports)", what, p, n);
  rp_status st = check_op_id(g, op, what);
  if (st)
    return st;
  rp_gport *port = &ports[p];
  for (uint32_t i = 0; port->nops && op <= port->max && i < port->nops; i++)
    if (port->ops[i] == op)
      return rp__err(RP_EPORT, "%s: port '%s' is already bound to op %u", what,
                     port->name, op);
  if (!rp__grow((void **)&port->ops, &port->cap, port->nops + 1,
                sizeof *port->ops))
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  if (!port->nops || op > port->max)
    port->max = op;
  port->ops[port->nops++] = op;
  return RP_OK;
}

rp_status rp_graph_bind_precondition(rp_graph *g, rp_port_id p, rp_op_id op) {
  return bind(g, 1, p, op, "rp_graph_bind_precondition");
}

rp_status rp_graph_bind_postcondition(rp_graph *g, rp_port_id p, rp_op_id op) {
  return bind(g, 0, p, op, "rp_graph_bind_postcondition");
}

rp_status rp_graph_add_interp(rp_graph *g, rp_op_id id, const rp_interp *ip) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_interp");
  if (gst_)
    return gst_;
  if (!g || !ip)
    return rp__err(RP_EINVAL, "rp_graph_add_interp: NULL argument");
  rp_status st = check_op_id(g, id, "rp_graph_add_interp");
  if (st)
    return st;
  rp_gop *op = &g->ops[id];
  if (op->kind != RP_OP_TASK)
    return rp__err(RP_EINVAL, "rp_graph_add_interp: op %u is a copy", id);
  rp_launch l = {.task = op->task,
                 .args_size = op->args_size,
                 .shards = op->shards,
                 .interps = ip,
                 .ninterp = 1,
                 .args = op->args};
  rp_interp *tmp = op->interps;
  uint32_t n = op->ninterp;
  if ((st = rp__check_interps(&l, rp_task_name(g->rt, op->task), n)) != RP_OK)
    return rp__err_prefix(st, "rp_graph_add_interp: ");
  if (!(tmp = rp__reallocarray(tmp, n + 1, sizeof *tmp)))
    return rp__err(RP_ENOMEM, "rp_graph_add_interp: out of memory");
  op->interps = tmp; /* room for one more; the op keeps its n until the
                        checks below pass */
  tmp[n] = *ip;
  /* a library task's privileges under the op's interpolations, this one
   * included (a field it writes may take any value at a replay), as
   * rp_graph_add_task checks a launch's: an access declared short of what
   * the task then does is refused here, not only at instantiate (nothing
   * could fix the op afterwards, and rp_graph_save would write a file the
   * loader refuses) */
  const rp_task_rec *t = rp__task_get(g->rt, op->task);
  if (t && t->ext)
    return rp__err(RP_EINVAL, "rp_graph_add_interp: " INTERP_EXT_REFUSED,
                   t->name);
  if (t && t->priv_fn &&
      (st = t->priv_fn(t->priv_arg, op->args, op->args_size, op->acc, op->nacc,
                       tmp, n + 1)) != RP_OK)
    return rp__err_prefix(st, "rp_graph_add_interp: ");
  op->ninterp = n + 1;
  return RP_OK;
}

/* ---- queries ---- */

uint32_t rp_graph_op_count(const rp_graph *g) {
  return rp__graph_check(g, "rp_graph_op_count") ? 0 : g->nops;
}
uint32_t rp_graph_edge_count(const rp_graph *g) {
  return rp__graph_check(g, "rp_graph_edge_count") ? 0 : g->nedges;
}
uint32_t rp_graph_precondition_count(const rp_graph *g) {
  return rp__graph_check(g, "rp_graph_precondition_count") ? 0 : g->npre;
}
uint32_t rp_graph_postcondition_count(const rp_graph *g) {
  return rp__graph_check(g, "rp_graph_postcondition_count") ? 0 : g->npost;
}

/* Successor lists in CSR form: off[nops + 1], adj[nedges]. */
static rp_status csr(const rp_graph *g, uint32_t **off, uint32_t **adj,
                     const char *what) {
  *off = rp__calloc(g->nops + 1, sizeof **off);
  *adj = rp__calloc(g->nedges ? g->nedges : 1, sizeof **adj);
  if (!*off || !*adj) {
    free(*off);
    free(*adj);
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  }
  for (uint32_t i = 0; i < g->nedges; i++)
    (*off)[g->edges[i].from + 1]++;
  for (uint32_t i = 0; i < g->nops; i++)
    (*off)[i + 1] += (*off)[i];
  uint32_t *fill = rp__calloc(g->nops + 1, sizeof *fill);
  if (!fill) {
    free(*off);
    free(*adj);
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  }
  for (uint32_t i = 0; i < g->nedges; i++) {
    uint32_t f = g->edges[i].from;
    (*adj)[(*off)[f] + fill[f]++] = g->edges[i].to;
  }
  free(fill);
  return RP_OK;
}

int rp_graph_depends(const rp_graph *g, rp_op_id from, rp_op_id to) {
  if (rp__graph_check(g, "rp_graph_depends"))
    return 0;
  if (from >= g->nops || to >= g->nops) {
    rp__err(RP_ERANGE,
            "rp_graph_depends: op %u out of range (the graph has %u)",
            from >= g->nops ? from : to, g->nops);
    return 0;
  }
  uint32_t *off, *adj; /* from == to: 1 when from lies on a cycle */
  if (csr(g, &off, &adj, "rp_graph_depends"))
    return 0;
  uint32_t *stack = malloc(sizeof *stack * g->nops);
  unsigned char *seen = rp__calloc(g->nops, 1);
  int found = 0;
  if (stack && seen) {
    uint32_t sp = 0;
    stack[sp++] = from;
    seen[from] = 1;
    while (sp && !found) {
      uint32_t u = stack[--sp];
      for (uint32_t k = off[u]; k < off[u + 1]; k++) {
        uint32_t v = adj[k];
        if (v == to) {
          found = 1;
          break;
        }
        if (!seen[v]) {
          seen[v] = 1;
          stack[sp++] = v;
        }
      }
    }
  }
  if (!stack || !seen)
    rp__err(RP_ENOMEM, "rp_graph_depends: out of memory");
  free(stack);
  free(seen);
  free(off);
  free(adj);
  return found;
}

/* Names the ops of one cycle among the ops Kahn's algorithm left (those
 * with indeg > 0). Each of them has a predecessor that is also left, so
 * walking predecessors must revisit an op: that closes a cycle. One pass
 * over the edges picks each op's predecessor first, so the walk stays
 * linear however long the cycle is (graph files can hold long ones). A
 * cycle longer than the detail holds is listed from its first op as far
 * as room allows, then "... (N more ops) -> " and the first op again:
 * every arrow the detail shows is an edge of the graph. */
static rp_status report_cycle(const rp_graph *g, const uint32_t *indeg) {
  uint32_t start = 0;
  while (start < g->nops && indeg[start] == 0)
    start++;
  uint32_t *pos = malloc(sizeof *pos * g->nops);
  uint32_t *path = malloc(sizeof *path * (g->nops + 1));
  uint32_t *pred = malloc(sizeof *pred * g->nops);
  /* a label: "op N 'name' (task 'name')", both names RP_NAME_MAX */
  char msg[600] = "", lab[2 * RP_NAME_MAX + 40], first[sizeof lab];
  if (pos && path && pred && start < g->nops) {
    for (uint32_t i = 0; i < g->nops; i++)
      pos[i] = pred[i] = UINT32_MAX;
    for (uint32_t k = 0; k < g->nedges; k++) {
      const rp_gedge *e = &g->edges[k];
      if (indeg[e->to] > 0 && indeg[e->from] > 0 && pred[e->to] == UINT32_MAX)
        pred[e->to] = e->from;
    }
    uint32_t len = 0, u = start;
    while (pos[u] == UINT32_MAX) {
      pos[u] = len;
      path[len++] = u;
      RP_ASSERT(pred[u] != UINT32_MAX);
      u = pred[u];
    }
    /* path[pos[u]..len) walks the cycle backwards: print it forwards,
     * path[len - 1] first and last */
    uint32_t ncyc = len - pos[u], k = 0;
    rp__op_label(g, path[len - 1], first, sizeof first);
    size_t used = 0, flen = strlen(first);
    static const size_t MORE = sizeof "... (4294967295 more ops) -> " - 1;
    for (; k < ncyc; k++) {
      rp__op_label(g, path[len - 1 - k], lab, sizeof lab);
      size_t need = strlen(lab) + 4; /* the label and " -> " */
      size_t close = k + 1 < ncyc ? MORE + flen : flen; /* what must follow */
      if (used + need + close >= sizeof msg)
        break;
      used += (size_t)snprintf(msg + used, sizeof msg - used, "%s -> ", lab);
    }
    if (k < ncyc)
      used += (size_t)snprintf(msg + used, sizeof msg - used,
                               "... (%u more op%s) -> ", ncyc - k,
                               ncyc - k == 1 ? "" : "s");
    snprintf(msg + used, sizeof msg - used, "%s", first);
  }
  free(pos);
  free(path);
  free(pred);
  return rp__err(RP_ECYCLE, "graph has a cycle: %s", msg);
}

rp_status rp__graph_topo(const rp_graph *g, uint32_t *order) {
  uint32_t *off, *adj;
  rp_status st = csr(g, &off, &adj, "graph");
  if (st)
    return st;
  uint32_t *indeg = rp__calloc(g->nops ? g->nops : 1, sizeof *indeg);
  if (!indeg) {
    free(off);
    free(adj);
    return rp__err(RP_ENOMEM, "graph: out of memory");
  }
  st = rp__topo_order(g->nops, off, adj, indeg, order) == g->nops
           ? RP_OK
           : report_cycle(g, indeg);
  free(indeg);
  free(off);
  free(adj);
  return st;
}

/* ---- names ---- */

rp_status rp_graph_set_op_name(rp_graph *g, rp_op_id op, const char *name) {
  rp_status st = rp__graph_check(g, "rp_graph_set_op_name");
  if (st)
    return st;
  if ((st = check_op_id(g, op, "rp_graph_set_op_name")) != RP_OK)
    return st;
  if (name && (st = rp__name_check(name, "rp_graph_set_op_name")) != RP_OK)
    return st;
  rp__name_set(g->ops[op].name, name);
  return RP_OK;
}

const char *rp_graph_op_name(const rp_graph *g, rp_op_id op) {
  if (rp__graph_check(g, "rp_graph_op_name"))
    return NULL;
  if (op >= g->nops) {
    rp__err(RP_ERANGE,
            "rp_graph_op_name: op %u out of range (the graph has %u)", op,
            g->nops);
    return NULL;
  }
  return g->ops[op].name;
}
