/* tools/dump_model.c — the dump command's model of a loaded graph. Reads
 * the recorded graph through the public header only (rp_graph_op_query,
 * rp_graph_edge_query, ...) and the task registry (rp_task_query) for
 * contracts. */
#include "dump_model.h"

#include <stdlib.h>
#include <string.h>

typedef struct inst_key {
  uint64_t id;
  uint32_t idx;
} inst_key;

static int cmp_key(const void *a, const void *b) {
  uint64_t x = ((const inst_key *)a)->id, y = ((const inst_key *)b)->id;
  return x < y ? -1 : x > y;
}

static uint32_t inst_index(const inst_key *keys, uint32_t n, rp_inst i) {
  inst_key k = {i.id, 0};
  const inst_key *hit = bsearch(&k, keys, n, sizeof *keys, cmp_key);
  return hit ? hit->idx : UINT32_MAX;
}

/* Model instance i: mirror k of g (after the table), its source's element
 * type and rectangle in the mirror's memory, named after its source. */
static rp_status mirror_inst(const rp_graph *g, uint32_t k, dm_inst *out,
                             inst_key *key) {
  rp_runtime *rt = rp_graph_runtime(g);
  rp_inst ref, src;
  rp_mem mem;
  rp_instance_info info;
  rp_mem_info mi;
  rp_status st = rp_graph_mirror_query(g, k, &ref, &src, &mem);
  if (!st && !(st = rp_instance_query(rt, src, &info)))
    st = rp_mem_query(rt, mem, &mi);
  if (st)
    return st;
  *out = (dm_inst){mi.kind, mi.device, info.dtype, info.rect, ""};
  const char *name = rp_instance_name(rt, src);
  name = name && name[0] ? name : "inst";
  char suffix[24]; /* the name's end stays whole when the name is cut */
  size_t ns = (size_t)snprintf(suffix, sizeof suffix, ".mirror%u", k);
  size_t len = strnlen(name, sizeof out->name - 1 - ns);
  memcpy(out->name, name, len);
  memcpy(out->name + len, suffix, ns + 1);
  key->id = ref.id;
  return RP_OK;
}

/* The instance table (graph file order), then the mirrors capture
 * inserted, and a sorted id -> index map. */
static rp_status build_insts(const rp_graph *g, dm_graph *m, inst_key **keys) {
  rp_runtime *rt = rp_graph_runtime(g);
  uint32_t n = 0, nm = rp_graph_mirror_count(g);
  rp_status st = rp_graph_instances(g, NULL, 0, &n);
  if (st)
    return st;
  rp_inst *list = malloc(sizeof *list * (n ? n : 1));
  m->insts = calloc(n + nm ? n + nm : 1, sizeof *m->insts);
  *keys = malloc(sizeof **keys * (n + nm ? n + nm : 1));
  if (!list || !m->insts || !*keys) {
    free(list);
    return rp_error_set(RP_ENOMEM, "dump: out of memory");
  }
  if ((st = rp_graph_instances(g, list, n, &n)) != RP_OK) {
    free(list);
    return st;
  }
  for (uint32_t i = 0; i < n && !st; i++) {
    rp_instance_info info;
    rp_mem_info mi;
    if ((st = rp_instance_query(rt, list[i], &info)) != RP_OK ||
        (st = rp_mem_query(rt, info.mem, &mi)) != RP_OK)
      break;
    m->insts[i] = (dm_inst){mi.kind, mi.device, info.dtype, info.rect, ""};
    const char *name = rp_instance_name(rt, list[i]);
    snprintf(m->insts[i].name, sizeof m->insts[i].name, "%s", name ? name : "");
    (*keys)[i] = (inst_key){list[i].id, i};
  }
  free(list);
  for (uint32_t k = 0; k < nm && !st; k++) {
    (*keys)[n + k].idx = n + k;
    st = mirror_inst(g, k, &m->insts[n + k], &(*keys)[n + k]);
  }
  if (st) /* keys half filled: the caller frees them unread */
    return st;
  m->ninsts = n + nm;
  qsort(*keys, n + nm, sizeof **keys, cmp_key);
  return RP_OK;
}

static rp_rect intersect(const rp_rect *a, const rp_rect *b) {
  rp_rect r = {0};
  if (a->dim != b->dim)
    return r;
  r.dim = a->dim;
  for (int d = 0; d < a->dim; d++) {
    r.lo[d] = a->lo[d] > b->lo[d] ? a->lo[d] : b->lo[d];
    r.hi[d] = a->hi[d] < b->hi[d] ? a->hi[d] : b->hi[d];
    if (r.lo[d] > r.hi[d])
      return (rp_rect){0};
  }
  return r;
}

static rp_rect copy_domain(const dm_graph *m, const rp_copy *c,
                           const dm_access *acc) {
  const rp_rect *src = &m->insts[acc[0].inst].rect;
  const rp_rect *dst = &m->insts[acc[1].inst].rect;
  switch (c->domain) {
  case RP_DOMAIN_SRC:
    return *src;
  case RP_DOMAIN_DST:
    return *dst;
  case RP_DOMAIN_RECT:
    return c->rect;
  default:
    return intersect(src, dst);
  }
}

static void task_op(rp_runtime *rt, const rp_op_info *oi, dm_op *op,
                    int (*unknown)(const char *, void *), void *arg) {
  rp_task_info t;
  int known = rp_task_query(rt, oi->task, &t) == RP_OK;
  op->name = known ? t.name : "?";
  /* as instantiate places them: unpinned SPMD shards go to any worker */
  op->proc = oi->shard_procs  ? oi->shard_procs[0]
             : oi->shards > 1 ? RP_PROC_ANY
                              : oi->proc;
  op->shard_procs = oi->shard_procs;
  rp_proc_info pi = {.kind = RP_PROC_CPU};
  if (op->proc != RP_PROC_ANY)
    rp_proc_query(rt, op->proc, &pi);
  op->pkind = pi.kind;
  op->shards = oi->shards;
  op->flags = known ? t.flags : 0;
  op->contract_known = known && !(unknown && unknown(t.name, arg));
  op->cost_ns = oi->cost_ns ? oi->cost_ns : known ? t.cost_ns : 0;
}

static rp_status build_ops(const rp_graph *g, dm_graph *m, const inst_key *keys,
                           int (*unknown)(const char *, void *), void *arg) {
  rp_runtime *rt = rp_graph_runtime(g);
  uint32_t nops = rp_graph_op_count(g);
  uint64_t nacc = 0;
  rp_op_info oi;
  for (uint32_t i = 0; i < nops; i++)
    if (rp_graph_op_query(g, i, &oi) == RP_OK)
      nacc += oi.naccess;
  m->ops = calloc(nops ? nops : 1, sizeof *m->ops);
  m->acc_pool = calloc(nacc ? nacc : 1, sizeof *m->acc_pool);
  rp_access *acc = calloc(nacc ? nacc : 1, sizeof *acc);
  if (!m->ops || !m->acc_pool || !acc) {
    free(acc);
    return rp_error_set(RP_ENOMEM, "dump: out of memory");
  }
  dm_access *pool = m->acc_pool;
  uint32_t cap = nacc < UINT32_MAX ? (uint32_t)nacc : UINT32_MAX;
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < nops && !st; i++, m->nops++) {
    dm_op *op = &m->ops[i];
    if ((st = rp_graph_op_query(g, i, &oi)) != RP_OK ||
        (st = rp_graph_op_accesses(g, i, acc, cap, &op->nacc)) != RP_OK)
      break;
    op->kind = oi.kind;
    const char *label = rp_graph_op_name(g, i);
    snprintf(op->label, sizeof op->label, "%s", label ? label : "");
    op->acc = pool;
    for (uint32_t k = 0; k < op->nacc && !st; k++) {
      pool[k] = (dm_access){inst_index(keys, m->ninsts, acc[k].inst),
                            acc[k].priv, acc[k].redop};
      if (pool[k].inst == UINT32_MAX) /* an internal invariant, said */
        st = rp_error_set(RP_EINVAL,
                          "dump: op %u access %u names instance %#llx, "
                          "neither in the instance table nor a mirror",
                          i, k, (unsigned long long)acc[k].inst.id);
    }
    if (st)
      break;
    pool += op->nacc;
    if (oi.kind == RP_OP_TASK) {
      task_op(rt, &oi, op, unknown, arg);
      continue;
    }
    op->name = "copy";
    op->proc = RP_PROC_ANY;
    op->pkind = RP_PROC_CPU;
    op->shards = 1;
    op->domain = copy_domain(m, &oi.copy, op->acc);
  }
  free(acc);
  return st;
}

static rp_status build_edges(const rp_graph *g, dm_graph *m) {
  rp_runtime *rt = rp_graph_runtime(g);
  uint32_t nedges = rp_graph_edge_count(g);
  m->edges = malloc(sizeof *m->edges * (nedges ? nedges : 1));
  if (!m->edges)
    return rp_error_set(RP_ENOMEM, "dump: out of memory");
  rp_status st = RP_OK;
  for (uint32_t e = 0; e < nedges && !st; e++) {
    dm_edge *d = &m->edges[e];
    st = rp_graph_edge_query(g, e, &d->from, &d->to, &d->inferred);
  }
  m->nedges = nedges;
  m->npre = rp_graph_precondition_count(g);
  m->npost = rp_graph_postcondition_count(g);
  for (uint32_t p = 0; p < m->npost && !st; p++) {
    uint32_t n = 0;
    if ((st = rp_graph_postcondition_ops(g, p, NULL, 0, &n)) != RP_OK)
      break;
    rp_op_id *ops = malloc(sizeof *ops * (n ? n : 1));
    if (!ops)
      return rp_error_set(RP_ENOMEM, "dump: out of memory");
    if (!(st = rp_graph_postcondition_ops(g, p, ops, n, &n)))
      for (uint32_t k = 0; k < n; k++)
        m->ops[ops[k]].npost++;
    free(ops);
  }
  if (st)
    return st;
  m->nprocs = rp_proc_count(rt);
  m->proc_kinds = calloc(m->nprocs ? m->nprocs : 1, sizeof *m->proc_kinds);
  if (!m->proc_kinds)
    return rp_error_set(RP_ENOMEM, "dump: out of memory");
  for (uint32_t p = 0; p < m->nprocs; p++) {
    rp_proc_info pi = {.kind = RP_PROC_CPU};
    rp_proc_query(rt, p, &pi);
    m->proc_kinds[p] = pi.kind;
  }
  return RP_OK;
}

rp_status dm_build(const rp_graph *g, int (*unknown)(const char *, void *),
                   void *arg, dm_graph *m) {
  memset(m, 0, sizeof *m);
  if (!rp_graph_runtime(g))
    return rp_error_set(RP_EINVAL, "dm_build: NULL graph");
  inst_key *keys = NULL;
  rp_status st = build_insts(g, m, &keys);
  if (!st)
    st = build_ops(g, m, keys, unknown, arg);
  if (!st)
    st = build_edges(g, m);
  free(keys);
  if (st)
    dm_free(m);
  return st;
}

void dm_free(dm_graph *m) {
  free(m->ops);
  free(m->insts);
  free(m->edges);
  free(m->acc_pool);
  free(m->proc_kinds);
  memset(m, 0, sizeof *m);
}
