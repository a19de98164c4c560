/* replay/instantiate.c — an exec's life, in one file: rp_instantiate
 * compiles a graph into an exec (validate, expand SPMD ops into units, plan
 * transfer descriptors, allocate workspaces and replay slots, place,
 * lower GPU work); rp_exec_update_args, rp_exec_stats_get and
 * rp_exec_destroy (with the free) complete it. Everything a replay needs
 * is allocated here. Within replay/, the files call downwards only:
 * instantiate -> dump -> tune -> place -> scheduler -> gpu_build ->
 * gpu_launch -> slot -> trace -> lower (docs/architecture.md "Layers"). */
#include "lower.h"

#include <string.h>

#define DEFAULT_INFLIGHT 4
#define DEFAULT_MAX_ARGS 256
#define DEFAULT_EDGE_COST 200
#define RESERVE_EVENTS_MAX                                                     \
  65536 /* replay events reserved per exec, at most                            \
         */
#define GUARD_BYTES 64
#define GUARD_BYTE 0xa5

/* ---- graph copy ---- */

static rp_status copy_ports(rp_gport **dst, const rp_gport *src, uint32_t n) {
  *dst = rp__calloc(n, sizeof **dst);
  if (!*dst)
    return RP_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    (*dst)[i].name = rp__strdup(src[i].name);
    (*dst)[i].ops = rp__calloc(src[i].nops, sizeof(rp_op_id));
    if (!(*dst)[i].name || !(*dst)[i].ops)
      return RP_ENOMEM;
    if (src[i].nops)
      memcpy((*dst)[i].ops, src[i].ops, sizeof(rp_op_id) * src[i].nops);
    (*dst)[i].nops = (*dst)[i].cap = src[i].nops;
  }
  return RP_OK;
}

/* A private deep copy, so destroying the user's graph leaves the exec
 * intact. It does not count as a live graph of the runtime. */
static rp_status graph_clone(const rp_graph *g, rp_graph **out) {
  rp_graph *c = rp__calloc(1, sizeof *c);
  if (!c)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  *c = *g;
  c->eidx = NULL; /* the clone's edge index is built if ever needed */
  c->eidx_cap = c->eidx_used = 0;
  c->mirrors = NULL; /* materialize_mirrors replaces every mirror reference */
  c->nmirrors = c->mirrors_cap = 0;
  c->ops = rp__calloc(g->nops, sizeof *c->ops);
  c->edges = rp__calloc(g->nedges, sizeof *c->edges);
  c->pre = c->post = NULL;
  c->nops = 0;
  rp_status st = c->ops && c->edges ? RP_OK : RP_ENOMEM;
  for (uint32_t i = 0; i < g->nops && !st; i++, c->nops++)
    st = rp__gop_copy(&c->ops[i], &g->ops[i]);
  if (!st) {
    if (g->nedges) /* g->edges may be NULL: memcpy's source must not */
      memcpy(c->edges, g->edges, sizeof *c->edges * g->nedges);
    c->ops_cap = c->nops;
    c->edges_cap = g->nedges;
    st = copy_ports(&c->pre, g->pre, g->npre);
  }
  if (!st)
    st = copy_ports(&c->post, g->post, g->npost);
  *out = c;
  return st ? rp__err(RP_ENOMEM, "instantiate: out of memory") : RP_OK;
}

static void graph_free(rp_graph *c) {
  if (!c)
    return;
  for (uint32_t i = 0; i < c->nops; i++)
    rp__gop_clear(&c->ops[i]);
  free(c->ops);
  free(c->edges);
  for (uint32_t i = 0; c->pre && i < c->npre; i++) {
    free(c->pre[i].name);
    free(c->pre[i].ops);
  }
  for (uint32_t i = 0; c->post && i < c->npost; i++) {
    free(c->post[i].name);
    free(c->post[i].ops);
  }
  free(c->pre);
  free(c->post);
  free(c);
}

/* ---- mirrors ---- */

/* One instance per mirror of g (copy insertion, capture.h): in the
 * mirror's memory, with its source's type and rectangle (dense), owned by
 * the exec. The exec's copy of the graph then names them instead of the
 * mirror references, so units, views and copy descriptors see ordinary
 * instances. */
static rp_status materialize_mirrors(rp_exec *ex, const rp_graph *g) {
  if (!g->nmirrors)
    return RP_OK;
  ex->mirrors = rp__calloc(g->nmirrors, sizeof *ex->mirrors);
  if (!ex->mirrors)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t k = 0; k < g->nmirrors; k++) {
    rp_inst_view v;
    rp_status st = rp__inst_view(ex->rt, g->mirrors[k].src, &v);
    if (!st)
      st = rp_instance_create(ex->rt, g->mirrors[k].mem, v.info.dtype,
                              &v.info.rect, NULL, &ex->mirrors[k]);
    if (st)
      return rp__err_prefix(st, "instantiate: mirror %u of instance %#llx: ", k,
                            (unsigned long long)g->mirrors[k].src.id);
    ex->nmirrors++;
  }
  for (uint32_t id = 0; id < ex->g->nops; id++) {
    rp_gop *op = &ex->g->ops[id];
    rp_inst *refs[2] = {&op->copy.src, &op->copy.dst};
    for (uint32_t i = 0; op->kind == RP_OP_TASK && i < op->nacc; i++)
      if (rp__is_mirror(op->acc[i].inst))
        op->acc[i].inst = ex->mirrors[rp__mirror_index(op->acc[i].inst)];
    for (int i = 0; op->kind == RP_OP_COPY && i < 2; i++)
      if (rp__is_mirror(*refs[i]))
        *refs[i] = ex->mirrors[rp__mirror_index(*refs[i])];
  }
  return RP_OK;
}

/* ---- units ---- */

static rp_status count_units(rp_exec *ex) {
  const rp_graph *g = ex->g;
  ex->op_first = rp__calloc(g->nops + 1, sizeof *ex->op_first);
  if (!ex->op_first)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  uint64_t n = 0;
  for (uint32_t i = 0; i < g->nops; i++) {
    ex->op_first[i] = (uint32_t)n;
    n += g->ops[i].kind == RP_OP_TASK ? g->ops[i].shards : 1;
    if (n > (1u << 24))
      return rp__err(RP_ERANGE, "instantiate: more than %u units", 1u << 24);
  }
  ex->op_first[g->nops] = (uint32_t)n;
  ex->nunits = (uint32_t)n;
  ex->units = rp__calloc(n, sizeof *ex->units);
  return ex->units ? RP_OK : rp__err(RP_ENOMEM, "instantiate: out of memory");
}

/* Unit-level predecessors (CSR), precondition and postcondition lists. */
static rp_status link_units(rp_exec *ex) {
  const rp_graph *g = ex->g;
  uint32_t n = ex->nunits;
  uint32_t *cnt = rp__calloc(n + 1, sizeof *cnt);
  uint32_t *pcnt = rp__calloc(n + 1, sizeof *pcnt);
  uint32_t *qcnt = rp__calloc(n + 1, sizeof *qcnt);
  rp_status st = cnt && pcnt && qcnt ? RP_OK : RP_ENOMEM;
  uint64_t total = 0, tp = 0, tq = 0;
  for (uint32_t e = 0; e < g->nedges && !st; e++) {
    rp_gedge ed = g->edges[e];
    uint32_t w = ex->op_first[ed.from + 1] - ex->op_first[ed.from];
    for (uint32_t u = ex->op_first[ed.to]; u < ex->op_first[ed.to + 1]; u++)
      cnt[u] += w, total += w;
  }
  for (uint32_t p = 0; p < g->npre && !st; p++)
    for (uint32_t k = 0; k < g->pre[p].nops; k++) {
      rp_op_id o = g->pre[p].ops[k];
      for (uint32_t u = ex->op_first[o]; u < ex->op_first[o + 1]; u++)
        pcnt[u]++, tp++;
    }
  for (uint32_t p = 0; p < g->npost && !st; p++)
    for (uint32_t k = 0; k < g->post[p].nops; k++) {
      rp_op_id o = g->post[p].ops[k];
      for (uint32_t u = ex->op_first[o]; u < ex->op_first[o + 1]; u++)
        qcnt[u]++, tq++;
    }
  if (!st && (total > UINT32_MAX || tp > UINT32_MAX || tq > UINT32_MAX))
    st = RP_ERANGE;
  if (!st) {
    ex->preds = rp__calloc(total ? total : 1, sizeof *ex->preds);
    ex->ports = rp__calloc(tp ? tp : 1, sizeof *ex->ports);
    ex->posts = rp__calloc(tq ? tq : 1, sizeof *ex->posts);
    ex->post_units =
        rp__calloc(g->npost ? g->npost : 1, sizeof *ex->post_units);
    if (!ex->preds || !ex->ports || !ex->posts || !ex->post_units)
      st = RP_ENOMEM;
  }
  uint32_t o1 = 0, o2 = 0, o3 = 0;
  for (uint32_t u = 0; u < n && !st; u++) {
    ex->units[u].pred_off = o1;
    ex->units[u].port_off = o2;
    ex->units[u].post_off = o3;
    o1 += cnt[u], o2 += pcnt[u], o3 += qcnt[u];
  }
  for (uint32_t e = 0; e < g->nedges && !st; e++) {
    rp_gedge ed = g->edges[e];
    for (uint32_t u = ex->op_first[ed.to]; u < ex->op_first[ed.to + 1]; u++)
      for (uint32_t v = ex->op_first[ed.from]; v < ex->op_first[ed.from + 1];
           v++)
        ex->preds[ex->units[u].pred_off + ex->units[u].npred++] = v;
  }
  for (uint32_t p = 0; p < g->npre && !st; p++)
    for (uint32_t k = 0; k < g->pre[p].nops; k++) {
      rp_op_id o = g->pre[p].ops[k];
      for (uint32_t u = ex->op_first[o]; u < ex->op_first[o + 1]; u++)
        ex->ports[ex->units[u].port_off + ex->units[u].nport++] = p;
    }
  for (uint32_t p = 0; p < g->npost && !st; p++)
    for (uint32_t k = 0; k < g->post[p].nops; k++) {
      rp_op_id o = g->post[p].ops[k];
      for (uint32_t u = ex->op_first[o]; u < ex->op_first[o + 1]; u++) {
        ex->posts[ex->units[u].post_off + ex->units[u].npost++] = p;
        ex->post_units[p]++;
      }
    }
  free(cnt);
  free(pcnt);
  free(qcnt);
  if (st == RP_ERANGE)
    return rp__err(st,
                   "instantiate: more than %u unit dependencies, "
                   "precondition or postcondition links",
                   UINT32_MAX);
  return st ? rp__err(st, "instantiate: out of memory") : RP_OK;
}

/* The unique instances of the exec, for stale checks at every replay. */
static rp_status collect_insts(rp_exec *ex) {
  const rp_graph *g = ex->g;
  uint32_t cap = 0, seen_cap = 0;
  unsigned char *seen = NULL; /* by instance slot */
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < g->nops && !st; i++) {
    rp_access tmp[2];
    const rp_access *acc;
    uint32_t n = rp__op_accesses(&g->ops[i], tmp, &acc);
    for (uint32_t k = 0; k < n && !st; k++) {
      uint32_t slot = rp__inst_slot(acc[k].inst);
      if (slot == UINT32_MAX ||
          !rp__grow((void **)&seen, &seen_cap, slot + 1, 1)) {
        st = rp__err(RP_ENOMEM, "instantiate: out of memory");
        break;
      }
      if (seen[slot])
        continue;
      seen[slot] = 1;
      if (!rp__grow((void **)&ex->insts, &cap, ex->ninsts + 1,
                    sizeof *ex->insts))
        st = rp__err(RP_ENOMEM, "instantiate: out of memory");
      else if ((st = rp__inst_view(ex->rt, acc[k].inst,
                                   &ex->insts[ex->ninsts])) != RP_OK)
        st = rp__err_prefix(st, "op %u: ", i);
      else
        ex->ninsts++;
    }
  }
  free(seen);
  return st;
}

/* GPU shards: one slice per shard in its GPU's memory (no guard bytes:
 * the host cannot check them after each replay). */
static rp_status setup_gpu_workspace(rp_exec *ex, const rp_gop *op,
                                     rp_unit *first) {
  size_t align = op->ws_align ? op->ws_align : 64;
  for (uint32_t s = 0; s < op->shards; s++) {
    rp_unit *u = first + s;
    const rp_proc_info *pi =
        u->pinned == RP_PROC_ANY ? NULL : rp__proc(ex->rt, u->pinned);
    rp_mem mem = pi ? pi->local : 0;
    void *buf;
    rp_status st = rp__mem_alloc(ex->rt, mem, op->ws_bytes, align, &buf);
    if (st)
      return rp__err_prefix(st, "workspace of shard %u: ", s);
    ex->workspaces[ex->nws] = buf;
    ex->ws_mems[ex->nws++] = mem;
    u->ctx.workspace = buf;
    u->ctx.workspace_bytes = op->ws_bytes;
  }
  return RP_OK;
}

static rp_status setup_workspace(rp_exec *ex, const rp_gop *op,
                                 rp_unit *first) {
  size_t align = op->ws_align ? op->ws_align : 64;
  /* a model's memory is addresses only: nothing to guard */
  size_t guard = RP_DEBUG && !rp__runtime_is_model(ex->rt) ? GUARD_BYTES : 0;
  size_t slice, total;
  if (!rp__add_ok(op->ws_bytes, guard, &slice) ||
      !rp__align_up_ok(slice, align, &slice) ||
      !rp__mul_ok(slice, op->shards, &total))
    return rp__err(RP_ERANGE,
                   "workspace of %u x %zu bytes (aligned to %zu) "
                   "overflows",
                   op->shards, op->ws_bytes, align);
  rp_mem mem = 0; /* CPU units: system memory */
  void *buf;
  rp_status st = rp__mem_alloc(ex->rt, mem, total, align, &buf);
  if (st)
    return st;
  ex->workspaces[ex->nws] = buf;
  ex->ws_mems[ex->nws++] = mem;
  for (uint32_t s = 0; s < op->shards; s++) {
    rp_unit *u = first + s;
    u->ctx.workspace = (char *)buf + s * slice;
    u->ctx.workspace_bytes = op->ws_bytes;
    if (guard) {
      u->guard = (unsigned char *)u->ctx.workspace + op->ws_bytes;
      memset(u->guard, GUARD_BYTE, guard);
    }
  }
  return RP_OK;
}

/* Units of a task with a planned replay form (communication): the ext
 * plans each one; units are visited in op order (see rp_task_ext). */
static rp_status plan_ext_units(rp_exec *ex, const rp_task_rec *t, uint32_t id,
                                rp_unit *first, uint32_t n) {
  if (ex->ext && ex->ext != t->ext)
    return rp__err(RP_EUNSUPPORTED,
                   "op %u (task '%s'): two kinds of "
                   "planned tasks in one exec",
                   id, t->name);
  rp_status st;
  if (!ex->ext) {
    if ((st = t->ext->exec_begin(ex->rt, ex->max_inflight, &ex->ext_xs)))
      return rp__err_prefix(st, "op %u (task '%s'): ", id, t->name);
    ex->ext = t->ext;
  }
  for (uint32_t s = 0; s < n; s++) {
    rp_unit *u = first + s;
    int as_task = 0;
    u->ext = t->ext;
    if ((st = t->ext->plan(ex->ext_xs, id, &u->ctx, &u->ext_state, &as_task)) !=
        RP_OK)
      return rp__err_prefix(st, "op %u (task '%s'): ", id, t->name);
    if (!as_task)
      u->kind = RP_UNIT_EXT;
  }
  return RP_OK;
}

static rp_status setup_task_units(rp_exec *ex, uint32_t id,
                                  rp_instance_info *views) {
  const rp_gop *op = &ex->g->ops[id];
  const rp_task_rec *t = rp__task_get(ex->rt, op->task);
  rp_unit *first = &ex->units[ex->op_first[id]];
  size_t shards_src = SIZE_MAX;
  int on_gpu = 0;
  for (uint32_t k = 0; k < op->ninterp; k++)
    if (op->interps[k].dst_offset == RP_INTERP_SHARDS)
      shards_src = op->interps[k].src_offset;
  for (uint32_t s = 0; s < op->shards; s++) {
    rp_unit *u = first + s;
    u->kind = RP_UNIT_TASK;
    u->op = id;
    u->shard = s;
    u->pinned = op->shard_procs  ? op->shard_procs[s]
                : op->shards > 1 ? RP_PROC_ANY
                                 : op->proc;
    const rp_proc_info *pi =
        u->pinned == RP_PROC_ANY ? NULL : rp__proc(ex->rt, u->pinned);
    int gpu = pi && pi->kind == RP_PROC_GPU; /* lowered: replay/lower.h */
    on_gpu |= gpu;
    u->cost_ns = op->cost_ns ? op->cost_ns : t->cost_ns;
    u->measure = u->pinned == RP_PROC_ANY && !u->cost_ns;
    u->measured_ns = UINT64_MAX;
    u->fn = gpu ? t->gpu_fn : t->cpu_fn;
    u->name = op->name[0] ? op->name : t->name; /* the exec's clone */
    u->task_name = t->name;
    u->interps = op->interps;
    u->ninterp = op->ninterp;
    u->shards_src = shards_src;
    u->max_shards = op->shards;
    u->args = malloc(op->args_size ? op->args_size : 1);
    if (!u->args)
      return rp__err(RP_ENOMEM, "instantiate: out of memory");
    if (op->args_size)
      memcpy(u->args, op->args, op->args_size);
    u->ctx = (rp_task_ctx){.rt = ex->rt,
                           .kind = gpu ? RP_PROC_GPU : RP_PROC_CPU,
                           .shard = s,
                           .shards = op->shards,
                           .args = u->args,
                           .args_size = op->args_size,
                           .naccess = op->nacc,
                           .insts = views};
  }
  if (op->ws_bytes) {
    rp_status st = on_gpu ? setup_gpu_workspace(ex, op, first)
                          : setup_workspace(ex, op, first);
    if (st)
      return rp__err_prefix(st, "op %u (task '%s'): ", id, t->name);
  }
  return t->ext ? plan_ext_units(ex, t, id, first, op->shards) : RP_OK;
}

static rp_status setup_units(rp_exec *ex) {
  const rp_graph *g = ex->g;
  for (uint32_t id = 0; id < g->nops; id++) {
    const rp_gop *op = &g->ops[id];
    rp_unit *u = &ex->units[ex->op_first[id]];
    if (op->kind == RP_OP_COPY) {
      u->kind = RP_UNIT_COPY;
      u->op = id;
      u->name = op->name[0] ? op->name : NULL;
      u->pinned = RP_PROC_ANY;
      u->xd = &ex->xds[ex->nxds];
      rp_status st = rp_xfer_plan(ex->rt, &op->copy, u->xd);
      if (st)
        return rp__err_prefix(st, "op %u (copy): ", id);
      ex->nxds++;
      u->cost_ns = 0;
      u->measure = 1;
      u->measured_ns = UINT64_MAX;
      if (rp_xfer_is_device(u->xd)) { /* lowered: replay/lower.h */
        u->pinned = rp_xfer_device_proc(u->xd);
        if (u->pinned == RP_PROC_ANY)
          return rp__err(RP_EPROC,
                         "op %u (copy): no GPU processor owns "
                         "either side's memory",
                         id);
        u->measure = 0;
      }
      continue;
    }
    /* one view array per op, shared by its shard units */
    rp_instance_info *views = rp__calloc(op->nacc, sizeof *views);
    if (!views)
      return rp__err(RP_ENOMEM, "instantiate: out of memory");
    ex->views[id] = views;
    for (uint32_t i = 0; i < op->nacc; i++) {
      rp_inst_view v;
      rp__inst_view(ex->rt, op->acc[i].inst, &v);
      views[i] = v.info;
    }
    rp_status st = setup_task_units(ex, id, views);
    if (st)
      return st;
  }
  return RP_OK;
}

static rp_status alloc_slots(rp_exec *ex) {
  ex->slots = aligned_alloc(RP_CACHELINE, sizeof *ex->slots * ex->max_inflight);
  if (!ex->slots)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  memset(ex->slots, 0, sizeof *ex->slots * ex->max_inflight);
  if (!(ex->pre_held =
            rp__calloc(ex->npre ? ex->npre : 1, sizeof *ex->pre_held)))
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t i = 0; i < ex->max_inflight; i++) {
    rp_slot *s = &ex->slots[i];
    s->unit_status = rp__calloc(ex->nunits, sizeof *s->unit_status);
    s->post_left = rp__calloc(ex->npost ? ex->npost : 1, sizeof *s->post_left);
    s->post_status =
        rp__calloc(ex->npost ? ex->npost : 1, sizeof *s->post_status);
    s->post_detail =
        rp__calloc(ex->npost ? ex->npost : 1, sizeof *s->post_detail);
    s->pre = rp__calloc(ex->npre ? ex->npre : 1, sizeof *s->pre);
    s->post = rp__calloc(ex->npost ? ex->npost : 1, sizeof *s->post);
    s->args = rp__calloc(ex->max_args ? ex->max_args : 1, 1);
    if (!s->unit_status || !s->post_left || !s->post_status ||
        !s->post_detail || !s->pre || !s->post || !s->args)
      return rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  return RP_OK;
}

static rp_status alloc_lanes(rp_exec *ex) {
  /* one lane per processor: GPU lanes exist only for the lowering */
  ex->nlanes = ex->lw ? rp_proc_count(ex->rt) : ex->ncpu;
  ex->lanes = aligned_alloc(RP_CACHELINE,
                            sizeof(rp_lane) * (ex->nlanes ? ex->nlanes : 1));
  if (!ex->lanes)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  memset(ex->lanes, 0, sizeof(rp_lane) * ex->nlanes);
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    ex->lanes[w].index = w;
    ex->lanes[w].units = rp__calloc(ex->nunits, sizeof(uint32_t));
    ex->lanes[w].hot = rp__calloc(ex->nunits, sizeof(rp_hot));
    if (!ex->lanes[w].units || !ex->lanes[w].hot)
      return rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  return RP_OK;
}

/* The options, checked: past the limits is an error, not a silent clamp. */
static rp_status options(rp_exec *ex, const rp_exec_opts *o) {
  if (o && o->max_inflight > RP_MAX_INFLIGHT)
    return rp__err(RP_ERANGE,
                   "rp_instantiate: max_inflight %u exceeds the "
                   "limit of %u replays in flight",
                   o->max_inflight, RP_MAX_INFLIGHT);
  if (o && o->max_args > RP_MAX_REPLAY_ARGS)
    return rp__err(RP_ERANGE,
                   "rp_instantiate: max_args %zu exceeds the "
                   "limit of %u bytes",
                   o->max_args, RP_MAX_REPLAY_ARGS);
  ex->max_inflight = o && o->max_inflight ? o->max_inflight : DEFAULT_INFLIGHT;
  ex->slot_spin_ns = rp__host_spin_ns(ex->rt);
  ex->max_args = o && o->max_args ? o->max_args : DEFAULT_MAX_ARGS;
  ex->edge_cost = o && o->edge_cost_ns ? o->edge_cost_ns : DEFAULT_EDGE_COST;
  if (ex->edge_cost > RP_PLACE_COST_MAX) /* counted up to it (reprise.h) */
    ex->edge_cost = RP_PLACE_COST_MAX;
  ex->no_replace = o ? o->no_replace : 0;
  return RP_OK;
}

/* Interpolations must read inside the replay argument block. The largest
 * end of what they read is the shortest block a replay may pass (checked
 * by rp_replay in O(1); the op and interpolation are kept to name them). */
static rp_status check_interp_sources(rp_exec *ex) {
  ex->min_args = 0;
  for (uint32_t id = 0; id < ex->g->nops; id++) {
    const rp_gop *op = &ex->g->ops[id];
    for (uint32_t k = 0; k < op->ninterp; k++) {
      size_t end;
      if (!rp__add_ok(op->interps[k].src_offset, op->interps[k].bytes, &end) ||
          end > ex->max_args)
        return rp__err(RP_ERANGE,
                       "op %u: interpolation %u reads replay "
                       "argument bytes [%zu, +%zu) beyond max_args %zu",
                       id, k, op->interps[k].src_offset, op->interps[k].bytes,
                       ex->max_args);
      if (end > ex->min_args) {
        ex->min_args = end;
        ex->min_args_op = id;
        ex->min_args_interp = k;
      }
    }
  }
  return RP_OK;
}

static rp_status build(rp_exec *ex, const rp_graph *g,
                       const rp_exec_opts *opts) {
  rp_status st = options(ex, opts);
  if (!st)
    st = graph_clone(g, &ex->g);
  if (!st)
    st = materialize_mirrors(ex, g);
  if (!st)
    st = check_interp_sources(ex);
  if (!st)
    st = count_units(ex);
  if (!st) {
    ex->npre = g->npre;
    ex->npost = g->npost;
    ex->order = rp__calloc(ex->nunits, sizeof *ex->order);
    ex->xds = rp__calloc(g->nops, sizeof *ex->xds);
    /* one workspace per CPU op, one per GPU shard: at most one per unit */
    ex->workspaces = rp__calloc(ex->nunits, sizeof *ex->workspaces);
    ex->ws_mems = rp__calloc(ex->nunits, sizeof *ex->ws_mems);
    ex->views = rp__calloc(g->nops, sizeof *ex->views);
    if (!ex->order || !ex->xds || !ex->workspaces || !ex->ws_mems || !ex->views)
      st = rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  if (!st)
    st = link_units(ex);
  if (!st)
    st = collect_insts(ex);
  if (!st)
    st = setup_units(ex);
  if (!st) {
    /* the initial order for ranking: units in op topological order */
    uint32_t *topo = rp__calloc(g->nops ? g->nops : 1, sizeof *topo);
    st = topo ? rp__graph_topo(ex->g, topo)
              : rp__err(RP_ENOMEM,
                        "out of memory for the topological order of %u ops",
                        g->nops);
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->nops && !st; i++)
      for (uint32_t u = ex->op_first[topo[i]]; u < ex->op_first[topo[i] + 1];
           u++)
        ex->order[k++] = u;
    free(topo);
  }
  ex->ncpu = rp__cpu_workers(ex->rt);
  if (!st) /* GPU units: segments and their launchers (replay/lower.h) */
    st = rp__lower_plan(ex);
  if (!st) /* cross-replay edges: from the accesses, once for every placement */
    st = rp__place_wrap_deps(ex);
  if (!st)
    st = alloc_slots(ex);
  if (!st) {
    /* the done and postcondition events of a full window of replays (and
     * the one being issued), on the free list now: the first replay does
     * not grow the runtime's event table (events the caller creates come
     * from the same table) */
    uint64_t n = ((uint64_t)ex->max_inflight + 1) * (1 + (uint64_t)ex->npost);
    uint32_t k = n < RESERVE_EVENTS_MAX ? (uint32_t)n : RESERVE_EVENTS_MAX;
    /* on top of the other live execs' reservations (given back by
     * exec_release) */
    if ((st = rp__event_reserve(ex->rt, k)) == RP_OK)
      ex->events_reserved = k;
  }
  if (!st)
    st = alloc_lanes(ex);
  if (!st)
    st = rp__place(ex, 0);
  /* a model of a machine (reprise dump --schedule): the plan — segments,
   * launchers, placement — without CUDA graphs, streams or buffers; such
   * an exec is dumped, never replayed (rp_replay refuses it) */
  if (!st && ex->lw && !rp__runtime_is_model(ex->rt))
    st = rp__lower_build(ex);
  return st;
}

/* Everything the exec holds, not the struct itself. */
static void exec_release(rp_exec *ex) {
  rp__exec_unregister(ex); /* first: free/realloc stop looking at it */
  if (ex->events_reserved)
    rp__event_unreserve(ex->rt, ex->events_reserved);
  if (ex->lw)
    rp__lower_free(ex); /* first: its graphs use the units and buffers */
  free(ex->unit_key);
  for (uint32_t i = 0; ex->units && i < ex->nunits; i++) {
    if (ex->units[i].ext_state)
      ex->units[i].ext->release(ex->units[i].ext_state);
    free(ex->units[i].args);
  }
  if (ex->ext)
    ex->ext->exec_end(ex->ext_xs);
  for (uint32_t i = 0; ex->views && ex->g && i < ex->g->nops; i++)
    free(ex->views[i]);
  free(ex->views);
  for (uint32_t i = 0; i < ex->nxds; i++)
    rp_xfer_release(&ex->xds[i]);
  for (uint32_t i = 0; i < ex->nws; i++)
    rp__mem_free(ex->rt, ex->ws_mems[i], ex->workspaces[i]);
  for (uint32_t i = 0; ex->slots && i < ex->max_inflight; i++) {
    rp_slot *s = &ex->slots[i];
    free(s->unit_status);
    free((void *)s->post_left);
    free((void *)s->post_status);
    free(s->post_detail);
    free(s->pre);
    free(s->post);
    free(s->args);
  }
  for (uint32_t w = 0; ex->lanes && w < ex->nlanes; w++) {
    free(ex->lanes[w].units);
    free(ex->lanes[w].hot);
  }
  free(ex->lanes);
  free(ex->pre_held);
  free(ex->slots);
  free(ex->units);
  free(ex->order);
  free(ex->op_first);
  free(ex->preds);
  free(ex->wrap_off);
  free(ex->wrap_src);
  free(ex->waits);
  free(ex->ports);
  free(ex->posts);
  free(ex->post_units);
  free(ex->insts);
  free(ex->xds);
  free(ex->workspaces);
  free(ex->ws_mems);
  /* after the descriptors that name them were released */
  for (uint32_t k = 0; k < ex->nmirrors; k++)
    rp_instance_free(ex->rt, ex->mirrors[k]);
  free(ex->mirrors);
  graph_free(ex->g);
  rp__tune_free(ex);
  rp__trace_free(ex);
  pthread_mutex_destroy(&ex->detail_lock);
}

void rp__exec_free(rp_exec *ex) {
  exec_release(ex);
  /* quarantined with a poisoned magic: a second destroy or a later call
   * with this handle is refused (RP_ESTALE) */
  atomic_store_explicit(&ex->magic, RP_DEAD_MAGIC, memory_order_relaxed);
  rp__quarantine(ex);
}

rp_status rp_instantiate(rp_graph *g, const rp_exec_opts *opts, rp_exec **out) {
  rp_status gst_ = rp__graph_check(g, "rp_instantiate");
  if (gst_)
    return gst_;
  if (!g || !out)
    return rp__err(RP_EINVAL, "rp_instantiate: NULL argument");
  uint64_t t0 = rp__now_ns();
  rp__nvtx_push("reprise.instantiate");
  rp_status st = rp_graph_validate(g);
  rp_replay_state *rs = st ? NULL : rp__replay_state(g->rt);
  if (!st && !rs)
    st = rp__err(RP_ENOMEM, "rp_instantiate: out of memory");
  rp_exec *ex = NULL;
  if (!st) {
    ex = rp__calloc(1, sizeof *ex);
    if (!ex)
      st = rp__err(RP_ENOMEM, "rp_instantiate: out of memory");
  }
  if (!st) {
    atomic_store_explicit(&ex->magic, RP_EXEC_MAGIC, memory_order_relaxed);
    ex->rt = g->rt;
    ex->rs = rs;
    /* before the instances are resolved: a change from here on moves it */
    ex->inst_epoch = rp__inst_epoch_word(g->rt);
    ex->epoch_seen = atomic_load(ex->inst_epoch);
    pthread_mutex_init(&ex->detail_lock, NULL);
    st = build(ex, g, opts);
    if (st) {
      /* never handed out: freed, not quarantined (the quarantine holds
       * the last destroyed objects, which this one must not push out) */
      exec_release(ex);
      free(ex);
      ex = NULL;
    }
  }
  if (ex) {
    int any_measure = 0;
    for (uint32_t i = 0; i < ex->nunits; i++)
      any_measure |= ex->units[i].measure;
    /* this placement stays until the caller runs rp_exec_tune (tune.c):
     * no replay changes it */
    snprintf(ex->place_why, sizeof ex->place_why,
             "initial: list scheduling on %s costs, edge cost %llu ns",
             any_measure ? "hinted or default (1 us)" : "hinted",
             (unsigned long long)ex->edge_cost);
    rp__runtime_ref(g->rt, 1);
    rp__exec_register(ex);
    rp__exec_env_dump(ex); /* REPRISE_DUMP=DIR; never fails */
    *out = ex;
  }
  rp__nvtx_pop();
  RP_UNUSED(t0);
  /* the detail names the call the caller made (validation's and the
   * build's own names go) */
  return st ? rp__err_as(st, "rp_instantiate: ") : RP_OK;
}

/* ---- the rest of an exec's life: updates, statistics, destroy ---- */

rp_status rp_exec_destroy(rp_exec *ex) {
  if (!ex)
    return RP_OK;
  rp_status cst = rp__exec_check(ex, "rp_exec_destroy");
  if (cst)
    return cst;
  if ((cst = rp__refuse_in_replay("rp_exec_destroy")) != RP_OK)
    return cst;
  if ((cst = rp__exec_take(ex, "rp_exec_destroy")) != RP_OK)
    return cst;
  rp_runtime *rt = ex->rt;
  /* a GPU exec's completion may be the thread running this callback (the
   * poller's scan, a CUDA host function), which freeing it waits for */
  if (rp__tl_in_callback && ex->lw) {
    rp__exec_give(ex);
    return rp__err(RP_EBUSY, "rp_exec_destroy: called from an event's "
                             "callback on an exec with GPU segments, whose "
                             "completion thread it would wait for (nothing "
                             "was freed)");
  }
  /* a replay that waits for a precondition the caller has not triggered
   * would be waited for forever: refused, nothing freed */
  if ((cst = rp__exec_wait_quiet(ex, "rp_exec_destroy")) != RP_OK) {
    rp__exec_give(ex);
    return cst;
  }
  if (rp__exec_quiesce(ex)) {
    /* The CUDA context is lost: host callbacks CUDA will never run may
     * still reference the exec, so it is leaked rather than freed. */
    rp__exec_unregister(ex);
    atomic_store_explicit(&ex->magic, 0, memory_order_relaxed);
    rp__runtime_ref(rt, -1);
    return rp__err(RP_EUNUSABLE,
                   "rp_exec_destroy: the CUDA context was "
                   "lost, the exec's memory is leaked: %s",
                   rp_error_detail());
  }
  rp__exec_free(ex);
  rp__runtime_ref(rt, -1);
  return RP_OK;
}

rp_status rp_exec_stats_get(const rp_exec *ex, rp_exec_stats *out) {
  rp_status cst = rp__exec_check(ex, "rp_exec_stats_get");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_exec_stats_get: NULL out");
  memset(out, 0, sizeof *out);
  out->replays =
      atomic_load_explicit(&((rp_exec *)ex)->completed, memory_order_relaxed);
  for (uint32_t w = 0; w < ex->nlanes; w++) {
    rp_lane *l = &ex->lanes[w];
    out->ops_run += atomic_load_explicit(&l->ops_run, memory_order_relaxed);
    out->ops_skipped +=
        atomic_load_explicit(&l->ops_skipped, memory_order_relaxed);
    out->handoffs += atomic_load_explicit(&l->handoffs, memory_order_relaxed);
    out->wakeups += atomic_load_explicit(&l->wakeups, memory_order_relaxed);
  }
  out->replacements = ex->replacements;
  out->ops = ex->nunits - ex->nlaunch;
  out->procs_used = ex->active;
  out->inline_launches = ex->inline_runs;
  if (ex->lw)
    rp__lower_stats(ex, out);
  return RP_OK;
}

static rp_status update_check(rp_exec *ex, rp_op_id op, const void *args,
                              size_t size) {
  rp_status cst = rp__exec_check(ex, "rp_exec_update_args");
  if (cst)
    return cst;
  if ((cst = rp__refuse_in_replay("rp_exec_update_args")) != RP_OK ||
      (cst = rp__exec_refuse_model(ex, "rp_exec_update_args")) != RP_OK)
    return cst;
  rp_status st = rp__runtime_check(ex->rt);
  if (st)
    return st;
  if (op >= ex->g->nops)
    return rp__err(RP_EINVAL,
                   "rp_exec_update_args: op %u out of range (%u "
                   "ops)",
                   op, ex->g->nops);
  const rp_gop *g = &ex->g->ops[op];
  if (g->kind != RP_OP_TASK)
    return rp__err(RP_EINVAL, "rp_exec_update_args: op %u is a copy", op);
  if (size != g->args_size)
    return rp__err(RP_ESHAPE,
                   "rp_exec_update_args: op %u takes %zu argument "
                   "bytes, %zu given",
                   op, g->args_size, size);
  if (size && !args)
    return rp__err(RP_EINVAL, "rp_exec_update_args: NULL args");
  return RP_OK;
}

/* rp_exec_update_args' work, for the thread that holds the exec. */
static rp_status update_owned(rp_exec *ex, rp_op_id op, const void *args,
                              size_t size, int *reinstantiated) {
  rp_status st = rp__exec_wait_quiet(ex, "rp_exec_update_args");
  if (st != RP_OK)
    return st;
  if (reinstantiated)
    *reinstantiated = 0;
  if (rp__exec_quiesce(ex))
    return rp__err(RP_EUNUSABLE,
                   "rp_exec_update_args: the CUDA context "
                   "was lost: %s",
                   rp_error_detail());
  rp_gop *g = &ex->g->ops[op];
  if (size)
    memcpy(g->args, args, size);
  for (uint32_t u = ex->op_first[op]; u < ex->op_first[op + 1]; u++)
    if (size)
      memcpy(ex->units[u].args, args, size);
  int reinst = 0;
  if (ex->lw)
    st = rp__lower_update(ex, op, &reinst);
  if (reinstantiated)
    *reinstantiated = reinst;
  return st;
}

rp_status rp_exec_update_args(rp_exec *ex, rp_op_id op, const void *args,
                              size_t size, int *reinstantiated) {
  rp_status st = update_check(ex, op, args, size);
  if (st)
    return st;
  /* a replay issued meanwhile from another thread would read the bytes
   * as they are copied */
  if ((st = rp__exec_take(ex, "rp_exec_update_args")) != RP_OK)
    return st;
  st = update_owned(ex, op, args, size, reinstantiated);
  rp__exec_give(ex);
  return st;
}
