/* comm/comm.c — the distributed layer's state and its launch API: ranks,
 * the communication ops' task records, all-reduce, cross-rank copies and the
 * parallel operators across ranks (as copies), and their builder forms.
 * Every launch becomes one rp_launch_task of an "rp.dist.*" task (see
 * comm.h for the roles and accesses), so eager execution, recording,
 * dependence analysis, graph files and dumps treat it as any task. */
#include "comm.h"

#include "capture/capture.h"

#include <string.h>

#define DEFAULT_TIMEOUT_MS 30000u

/* ---- state ---- */

rp_dist_state *rp__dist_state(rp_runtime *rt) {
  return rp__layer_get(rt, RP_LAYER_COMM);
}

static void state_free(rp_dist_state *ds) {
  rp__nccl_fini(ds);
  rp__mpi_detach(ds);
  free(ds->send_seq);
  free(ds->recv_seq);
  pthread_mutex_destroy(&ds->lock);
  free(ds);
}

static void dist_dtor(rp_runtime *rt, void *arg) {
  RP_UNUSED(rt);
  state_free(arg);
}

static rp_status register_tasks(rp_dist_state *ds) {
  static const char *const names[RP_DIST_ROLES] = {
      "rp.dist.none", "rp.dist.send", "rp.dist.recv", "rp.dist.copy",
      "rp.dist.allreduce"};
  for (int r = 0; r < RP_DIST_ROLES; r++) {
    rp_task_desc d = {
        .name = names[r],
        .cpu_fn = rp__dist_task_cpu,
        .gpu_fn = r == RP_DIST_ALLREDUCE && rp__nccl_built() ? rp__dist_task_gpu
                                                             : NULL,
        /* the all-reduce's GPU form only enqueues NCCL work on its stream;
         * copies touch host memory */
        .flags = r == RP_DIST_ALLREDUCE ? RP_TASK_STREAM_ORDERED : RP_TASK_HOST,
    };
    /* the record holds its replayed form before the task can be found */
    rp_task_hooks h = {.ext = &rp__dist_ext};
    rp_status st = rp__task_register_with(ds->rt, &d, &h, &ds->task[r]);
    if (st)
      return st;
  }
  return RP_OK;
}

rp_status rp__dist_attach(rp_runtime *rt, const rp_runtime_config *cfg) {
  rp_dist_state *ds = rp__calloc(1, sizeof *ds);
  if (!ds)
    return rp__err(RP_ENOMEM, "rp_runtime_create: out of memory");
  ds->rt = rt;
  ds->ranks = 1;
  uint32_t ms =
      cfg->dist_timeout_ms ? cfg->dist_timeout_ms : DEFAULT_TIMEOUT_MS;
  ds->timeout_ns = (uint64_t)ms * 1000000ull;
  pthread_mutex_init(&ds->lock, NULL);
  rp_status st = RP_OK;
  if (cfg->comm && !(st = rp__mpi_attach(ds, cfg->comm)))
    st = register_tasks(ds); /* at once: graph files may name them */
  if (!st) {
    ds->send_seq = rp__calloc(ds->ranks, sizeof *ds->send_seq);
    ds->recv_seq = rp__calloc(ds->ranks, sizeof *ds->recv_seq);
    if (!ds->send_seq || !ds->recv_seq)
      st = rp__err(RP_ENOMEM, "rp_runtime_create: out of memory");
  }
  if (st) {
    state_free(ds);
    return st;
  }
  rp__layer_set(rt, RP_LAYER_COMM, ds, dist_dtor, NULL, NULL);
  return RP_OK;
}

uint32_t rp_runtime_rank(const rp_runtime *rt) {
  rp_dist_state *ds = rp__rt_check(rt, "rp_runtime_rank")
                          ? NULL
                          : rp__dist_state((rp_runtime *)rt);
  return ds ? ds->rank : 0;
}

uint32_t rp_runtime_ranks(const rp_runtime *rt) {
  rp_dist_state *ds = rp__rt_check(rt, "rp_runtime_ranks")
                          ? NULL
                          : rp__dist_state((rp_runtime *)rt);
  return ds ? ds->ranks : 1;
}

void rp__dist_set_detail(rp_dist_state *ds, const char *why) {
  pthread_mutex_lock(&ds->lock); /* failure path only */
  snprintf(ds->detail, sizeof ds->detail, "%s", why);
  if (!ds->first[0])
    snprintf(ds->first, sizeof ds->first, "%s", why);
  pthread_mutex_unlock(&ds->lock);
}

const char *rp_runtime_dist_detail(const rp_runtime *rt) {
  rp_dist_state *ds = rp__rt_check(rt, "rp_runtime_dist_detail")
                          ? NULL
                          : rp__dist_state((rp_runtime *)rt);
  return ds ? ds->detail : "";
}

/* ---- validation ---- */

static rp_status enter(rp_runtime *rt, const void *arg, const char *what,
                       rp_dist_state **ds) {
  rp_status st = rp__rt_check(rt, what);
  if (st)
    return st;
  if (!arg) /* each failure from here spends a pending op name */
    return rp__launch_failed(rt, rp__err(RP_EINVAL, "%s: NULL argument", what));
  if (!(*ds = rp__dist_state(rt)))
    return rp__launch_failed(
        rt, rp__err(RP_EINVAL, "%s: runtime has no distributed state", what));
  return RP_OK;
}

static int summable(rp_dtype t) {
  return t == RP_F32 || t == RP_F64 || t == RP_I32 || t == RP_I64;
}

/* A live host instance of this rank; `side` names it in errors. */
static rp_status local_inst(rp_runtime *rt, rp_inst i, const char *what,
                            const char *side, rp_inst_view *v) {
  rp_status st = rp__inst_view(rt, i, v);
  if (st)
    return rp__err_prefix(st, "%s: %s instance %#llx: ", what, side,
                          (unsigned long long)i.id);
  return RP_OK;
}

/* The points this side moves: rect (dim 0: the instance's own). */
static rp_status resolve_dom(const rp_instance_info *inst, const rp_rect *r,
                             const char *what, const char *side, rp_rect *dom) {
  if (r->dim == 0) {
    *dom = inst->rect;
    return RP_OK;
  }
  int ok = r->dim == inst->rect.dim && rp_rect_volume(r) > 0;
  for (int d = 0; ok && d < r->dim; d++)
    ok = r->lo[d] >= inst->rect.lo[d] && r->hi[d] <= inst->rect.hi[d];
  if (!ok)
    return rp__err(RP_ESHAPE,
                   "%s: rect does not fit the %s instance (or is "
                   "empty)",
                   what, side);
  *dom = *r;
  return RP_OK;
}

static rp_status host_side(rp_runtime *rt, const rp_inst_view *v,
                           const char *what, const char *side, rp_redop redop) {
  if (!rp__mem_host_addressable(rt, v->info.mem))
    return rp__err(RP_EACCESS,
                   "%s: %s instance is in GPU memory; "
                   "cross-rank copies need host memory",
                   what, side);
  if (redop == RP_REDOP_SUM && !summable(v->info.dtype))
    return rp__err(RP_ETYPE, "%s: SUM over %s", what,
                   rp_dtype_name(v->info.dtype));
  return RP_OK;
}

/* ---- launching ---- */

/* The tasks (a single-process runtime registers them at its first
 * distributed call, so that a runtime that never communicates has only
 * its user's tasks) and the token. Under ds->lock. */
static rp_status ensure_token(rp_dist_state *ds) {
  if (ds->token.id)
    return RP_OK;
  rp_task_id id;
  rp_status st =
      rp__task_lookup(ds->rt, "rp.dist.none", &id) ? RP_OK : register_tasks(ds);
  if (st)
    return st;
  /* pinned memory when there is some: GPU processors reach it too */
  rp_mem m;
  if (!rp__mem_lookup(ds->rt, RP_MEM_PINNED, -1, &m) &&
      !rp__mem_lookup(ds->rt, RP_MEM_SYSTEM, -1, &m))
    return rp__err(RP_ENOMEM, "dist: no host memory for the token");
  rp_rect r = rp_rect_1d(0, 0);
  st = rp_instance_create(ds->rt, m, RP_U8, &r, NULL, &ds->token);
  return st;
}

/* One communication op through rp_launch_task (g NULL) or the builder
 * (g set). acc has room for one more access: the token's. */
static rp_status launch_op(rp_dist_state *ds, rp_graph *g, rp_dist_args *a,
                           rp_access *acc, uint32_t nacc, rp_proc proc,
                           rp_event wait, rp_event *done, rp_op_id *id) {
  pthread_mutex_lock(&ds->lock);
  rp_status st = ensure_token(ds);
  if (st) {
    pthread_mutex_unlock(&ds->lock);
    return st;
  }
  acc[nacc++] = (rp_access){ds->token, RP_RW, RP_REDOP_NONE};
  /* Eager numbering: every rank makes the same calls, so the counts agree;
   * recorded ops count too (harmless: they use the exec's numbering). */
  uint64_t *seq = a->role == RP_DIST_SEND   ? &ds->send_seq[a->dst_rank]
                  : a->role == RP_DIST_RECV ? &ds->recv_seq[a->src_rank]
                                            : NULL;
  a->eager_op = ds->eager_ops;
  a->eager_seq = seq ? *seq : 0;
  rp_launch l = {.task = ds->task[a->role],
                 .proc = proc,
                 .accesses = acc,
                 .naccess = nacc,
                 .args = a,
                 .args_size = sizeof *a,
                 .wait = wait};
  st = g ? rp_graph_add_task(g, &l, id) : rp_launch_task(ds->rt, &l, done);
  if (!g) { /* a launch that failed here still takes its place in order */
    ds->eager_ops++;
    if (seq)
      ++*seq;
  }
  pthread_mutex_unlock(&ds->lock);
  return st;
}

/* An eager op this rank refused before launching it (a stale or
 * mismatched instance here): it still takes its place in the runtime's
 * order, so that the next ops pair with their peers' next ops (the peers
 * wait for this one: RP_EPEER after the timeout, or an all-reduce's
 * agreement sees the ranks out of step), never with this op's messages. */
static void skip_op(rp_dist_state *ds, const rp_dist_args *a) {
  pthread_mutex_lock(&ds->lock);
  ds->eager_ops++;
  if (a->role == RP_DIST_SEND)
    ds->send_seq[a->dst_rank]++;
  else if (a->role == RP_DIST_RECV)
    ds->recv_seq[a->src_rank]++;
  pthread_mutex_unlock(&ds->lock);
}

/* Fills args and accesses of this rank's side of c; RP_DIST_NONE when the
 * copy does not involve it. */
static rp_status copy_side(rp_dist_state *ds, const rp_dist_copy *c,
                           const char *what, rp_dist_args *a, rp_access *acc,
                           uint32_t *nacc) {
  rp_runtime *rt = ds->rt;
  if (c->src_rank >= ds->ranks || c->dst_rank >= ds->ranks)
    return rp__err(RP_ERANGE, "%s: rank %u -> %u, the job has %u ranks", what,
                   c->src_rank, c->dst_rank, ds->ranks);
  if (c->redop != RP_REDOP_NONE && c->redop != RP_REDOP_SUM)
    return rp__err(RP_EINVAL, "%s: unknown redop %d", what, (int)c->redop);
  int src = c->src_rank == ds->rank, dst = c->dst_rank == ds->rank;
  *a = (rp_dist_args){.magic = RP_DIST_ARGS_MAGIC,
                      .src_rank = c->src_rank,
                      .dst_rank = c->dst_rank,
                      .redop = c->redop};
  a->role = src && dst ? RP_DIST_SELF
            : src      ? RP_DIST_SEND
            : dst      ? RP_DIST_RECV
                       : RP_DIST_NONE;
  *nacc = 0;
  rp_inst_view sv, dv;
  rp_status st = RP_OK;
  if (src && !(st = local_inst(rt, c->src, what, "source", &sv)) &&
      !(st = host_side(rt, &sv, what, "source", c->redop)))
    st = resolve_dom(&sv.info, &c->rect, what, "source", &a->dom);
  if (!st && dst && !(st = local_inst(rt, c->dst, what, "destination", &dv)) &&
      !(st = host_side(rt, &dv, what, "destination", c->redop)))
    st = resolve_dom(&dv.info, src ? &a->dom : &c->rect, what, "destination",
                     &a->dom);
  if (st)
    return st;
  if (src && dst && c->src.id == c->dst.id)
    return rp__err(RP_EINVAL,
                   "%s: a copy within this rank (src_rank == dst_rank) "
                   "from an instance into itself",
                   what);
  if (src && dst && sv.info.dtype != dv.info.dtype)
    return rp__err(RP_ETYPE,
                   "%s: a copy within this rank from %s into %s (one type "
                   "on both sides)",
                   what, rp_dtype_name(sv.info.dtype),
                   rp_dtype_name(dv.info.dtype));
  /* allocated instances never share bytes; external ones may (as for
   * rp_launch_copy, reprise.h rp_instance_create_external); a model's
   * (rp_runtime_create_model) have no storage, so no bytes to share */
  if (src && dst && sv.info.ptr && dv.info.ptr &&
      rp__dist_overlap(&sv.info, &dv.info, &a->dom))
    return rp__err(RP_EINVAL,
                   "%s: a copy within this rank from instance %#llx into "
                   "instance %#llx, whose bytes overlap in memory; copy "
                   "through a separate buffer",
                   what, (unsigned long long)c->src.id,
                   (unsigned long long)c->dst.id);
  rp_privilege wp = c->redop == RP_REDOP_SUM ? RP_RW : RP_WRITE;
  if (src)
    acc[(*nacc)++] = (rp_access){c->src, RP_READ, RP_REDOP_NONE};
  if (dst)
    acc[(*nacc)++] = (rp_access){c->dst, wp, RP_REDOP_NONE};
  a->dtype = src ? sv.info.dtype : dst ? dv.info.dtype : 0;
  return RP_OK;
}

static rp_status allreduce_side(rp_dist_state *ds, const rp_allreduce *x,
                                const char *what, rp_dist_args *a,
                                rp_access *acc, rp_proc *proc) {
  rp_runtime *rt = ds->rt;
  if (x->redop != RP_REDOP_SUM)
    return rp__err(RP_EINVAL, "%s: redop %d (only RP_REDOP_SUM)", what,
                   (int)x->redop);
  rp_inst_view v;
  rp_status st = local_inst(rt, x->inst, what, "its", &v);
  if (st)
    return st;
  if (!summable(v.info.dtype))
    return rp__err(RP_ETYPE, "%s: SUM over %s", what,
                   rp_dtype_name(v.info.dtype));
  void *p;
  if (!rp__dist_contig(&v.info, &v.info.rect, &p))
    return rp__err(RP_ESHAPE, "%s: the instance is not dense", what);
  *proc = RP_PROC_ANY;
  if (!rp__mem_host_addressable(rt, v.info.mem)) {
    if (!rp__nccl_built())
      return rp__err(RP_EUNSUPPORTED,
                     "%s: a GPU instance needs NCCL (this "
                     "build has none)",
                     what);
    for (rp_proc q = 0; q < rp_proc_count(rt); q++) {
      rp_proc_info pi;
      rp_proc_query(rt, q, &pi);
      if (pi.kind == RP_PROC_GPU && pi.local == v.info.mem)
        *proc = q;
    }
    if (*proc == RP_PROC_ANY)
      return rp__err(RP_EACCESS, "%s: no GPU processor works in memory %u",
                     what, v.info.mem);
  }
  *a = (rp_dist_args){.magic = RP_DIST_ARGS_MAGIC,
                      .role = RP_DIST_ALLREDUCE,
                      .redop = RP_REDOP_SUM,
                      .dtype = v.info.dtype,
                      .dom = v.info.rect};
  acc[0] = (rp_access){x->inst, RP_RW, RP_REDOP_NONE};
  return RP_OK;
}

rp_status rp_launch_allreduce(rp_runtime *rt, const rp_allreduce *x,
                              rp_event *done) {
  const char *what = "rp_launch_allreduce";
  rp_dist_state *ds;
  rp_status st = enter(rt, x, what, &ds);
  if (st)
    return st;
  if ((st = rp__launch_eager_ok(rt, what)))
    return rp__launch_failed(rt, st);
  rp_dist_args a;
  rp_access acc[2];
  rp_proc proc;
  if ((st = allreduce_side(ds, x, what, &a, acc, &proc))) {
    skip_op(ds, &(rp_dist_args){.role = RP_DIST_ALLREDUCE});
    return rp__launch_failed(rt, st);
  }
  st = launch_op(ds, NULL, &a, acc, 1, proc, x->wait, done, NULL);
  return st ? rp__launch_failed(rt, rp__err_as(st, "%s: ", what)) : RP_OK;
}

rp_status rp_launch_dist_copy(rp_runtime *rt, const rp_dist_copy *c,
                              rp_event *done) {
  const char *what = "rp_launch_dist_copy";
  rp_dist_state *ds;
  rp_status st = enter(rt, c, what, &ds);
  if (st)
    return st;
  if ((st = rp__launch_eager_ok(rt, what)))
    return rp__launch_failed(rt, st);
  rp_dist_args a = {0};
  rp_access acc[3];
  uint32_t n = 0;
  if ((st = copy_side(ds, c, what, &a, acc, &n))) {
    if (a.magic == RP_DIST_ARGS_MAGIC) /* this rank's side was known */
      skip_op(ds, &a);
    return rp__launch_failed(rt, st);
  }
  st = launch_op(ds, NULL, &a, acc, n, RP_PROC_ANY, c->wait, done, NULL);
  return st ? rp__launch_failed(rt, rp__err_as(st, "%s: ", what)) : RP_OK;
}

/* ---- builder forms ---- */

/* The graph's newest communication op, or UINT32_MAX. */
static rp_op_id last_comm_op(const rp_dist_state *ds, const rp_graph *g) {
  for (uint32_t i = g->nops; i-- > 0;)
    if (g->ops[i].kind == RP_OP_TASK)
      for (int r = 0; r < RP_DIST_ROLES; r++)
        if (g->ops[i].task == ds->task[r])
          return i;
  return UINT32_MAX;
}

static rp_status add_op(rp_dist_state *ds, rp_graph *g, rp_dist_args *a,
                        rp_access *acc, uint32_t n, rp_proc proc,
                        rp_op_id *out) {
  /* the tasks first: before them ds->task[] is all 0, a user task's id */
  pthread_mutex_lock(&ds->lock);
  rp_status tst = ensure_token(ds);
  pthread_mutex_unlock(&ds->lock);
  if (tst)
    return tst;
  rp_op_id prev = last_comm_op(ds, g), id;
  rp_status st = launch_op(ds, g, a, acc, n, proc, RP_NO_EVENT, NULL, &id);
  if (!st && prev != UINT32_MAX && (st = rp_graph_add_edge(g, prev, id))) {
    rp__gop_clear(&g->ops[--g->nops]); /* undo: the graph stays as it was */
    return st;
  }
  if (!st && out)
    *out = id;
  return st;
}

static rp_status builder_enter(rp_graph *g, const void *arg, rp_event wait,
                               const char *what, rp_dist_state **ds) {
  rp_status st = rp__graph_check(g, what);
  if (st)
    return st;
  st = enter(g->rt, arg, what, ds);
  if (!st && wait.id)
    st = rp__err(RP_EINVAL,
                 "%s: use edges and ports, not wait events, in "
                 "the builder",
                 what);
  return st;
}

rp_status rp_graph_add_allreduce(rp_graph *g, const rp_allreduce *x,
                                 rp_op_id *out) {
  const char *what = "rp_graph_add_allreduce";
  rp_dist_state *ds;
  rp_status st = builder_enter(g, x, x ? x->wait : RP_NO_EVENT, what, &ds);
  rp_dist_args a;
  rp_access acc[2];
  rp_proc proc;
  if (!st)
    st = allreduce_side(ds, x, what, &a, acc, &proc);
  return st ? st : add_op(ds, g, &a, acc, 1, proc, out);
}

rp_status rp_graph_add_dist_copy(rp_graph *g, const rp_dist_copy *c,
                                 rp_op_id *out) {
  const char *what = "rp_graph_add_dist_copy";
  rp_dist_state *ds;
  rp_status st = builder_enter(g, c, c ? c->wait : RP_NO_EVENT, what, &ds);
  rp_dist_args a;
  rp_access acc[3];
  uint32_t n = 0;
  if (!st)
    st = copy_side(ds, c, what, &a, acc, &n);
  return st ? st : add_op(ds, g, &a, acc, n, RP_PROC_ANY, out);
}

/* ---- parallel operators across ranks ---- */

typedef struct pop_plan {
  int to_parts; /* whole -> parts (broadcast, scatter), else parts -> whole */
  int split;    /* chunks of the whole (scatter, gather), else all of it */
  int sum;      /* parts summed into the whole (reduce) */
} pop_plan;

static int rect_eq(const rp_rect *a, const rp_rect *b) {
  int eq = a->dim == b->dim;
  for (int d = 0; eq && d < a->dim; d++)
    eq = a->lo[d] == b->lo[d] && a->hi[d] == b->hi[d];
  return eq;
}

static rp_status pop_check(rp_dist_state *ds, const rp_dist_parallel *p,
                           const char *what, pop_plan *pl, int *planned) {
  if ((unsigned)p->kind > RP_POP_REDUCTION)
    return rp__err(RP_EINVAL, "%s: unknown kind %d", what, (int)p->kind);
  if (p->backward != 0 && p->backward != 1)
    return rp__err(RP_EINVAL, "%s: backward = %d (0 forward, 1 backward)", what,
                   p->backward);
  if (p->root >= ds->ranks)
    return rp__err(RP_ERANGE, "%s: root %u, the job has %u ranks", what,
                   p->root, ds->ranks);
  int split = p->kind == RP_POP_REPARTITION || p->kind == RP_POP_COMBINE;
  int fwd_scatter =
      p->kind == RP_POP_REPARTITION || p->kind == RP_POP_REPLICATE;
  *pl = (pop_plan){.split = split, .to_parts = fwd_scatter != !!p->backward};
  pl->sum = !split && !pl->to_parts;
  *planned = 1;
  rp_inst_view pv, wv;
  rp_status st = local_inst(ds->rt, p->part, what, "part", &pv);
  if (st)
    return st;
  /* on every rank and at any rank count (one rank sums nothing, but the
   * same call on two would) */
  if (pl->sum && !summable(pv.info.dtype))
    return rp__err(RP_ETYPE, "%s: SUM over %s", what,
                   rp_dtype_name(pv.info.dtype));
  /* A chunk has its whole's dimensions, so a split dim outside the part's
   * is wrong on every rank, the root's whole unseen. Beyond that a rank's
   * part may be a chunk of some whole of any shape (torch.chunk's sizes
   * reach any extent), so only the root, which holds the whole, checks its
   * own part; the others' are checked by size where a copy receives them
   * (docs/distributed.md). */
  if (split && (p->dim < 0 || p->dim >= pv.info.rect.dim))
    return rp__err(RP_EINVAL, "%s: dim %d out of range (the part has %d dims)",
                   what, p->dim, pv.info.rect.dim);
  if (ds->rank != p->root)
    return RP_OK;
  if ((st = local_inst(ds->rt, p->whole, what, "whole", &wv)))
    return st;
  if (wv.info.dtype != pv.info.dtype)
    return rp__err(RP_ETYPE, "%s: the root's part is %s, the whole %s", what,
                   rp_dtype_name(pv.info.dtype), rp_dtype_name(wv.info.dtype));
  rp_rect want = wv.info.rect;
  if (split &&
      (st = rp_chunk_rect(&wv.info.rect, p->dim, ds->ranks, p->root, &want)))
    return rp__err_prefix(st, "%s: ", what);
  if (!rect_eq(&want, &pv.info.rect))
    return rp__err(RP_ESHAPE, "%s: the root's part is not %s of the whole",
                   what, split ? "its chunk" : "the shape");
  for (uint32_t k = 0; split && k < ds->ranks; k++) /* no empty chunk */
    if ((st = rp_chunk_rect(&wv.info.rect, p->dim, ds->ranks, k, &want)))
      return rp__err_prefix(st, "%s: part %u: ", what, k);
  return RP_OK;
}

/* The copy between the root and rank k, as this rank sees it. */
static rp_status pop_copy(rp_dist_state *ds, const rp_dist_parallel *p,
                          const pop_plan *pl, uint32_t k, rp_dist_copy *c) {
  rp_rect r = {0};
  if (ds->rank == p->root) {
    rp_inst_view wv;
    rp__inst_view(ds->rt, p->whole, &wv);
    r = wv.info.rect;
    rp_status st = pl->split
                       ? rp_chunk_rect(&wv.info.rect, p->dim, ds->ranks, k, &r)
                       : RP_OK;
    if (st)
      return rp__err_prefix(st, "rp_launch_dist_parallel: part %u: ", k);
  } else {
    r.dim = 0; /* rank k's side: its whole part */
  }
  *c = (rp_dist_copy){.src_rank = pl->to_parts ? p->root : k,
                      .dst_rank = pl->to_parts ? k : p->root,
                      .src = pl->to_parts ? p->whole : p->part,
                      .dst = pl->to_parts ? p->part : p->whole,
                      .rect = r,
                      .redop = pl->sum && k ? RP_REDOP_SUM : RP_REDOP_NONE,
                      .wait = p->wait};
  return RP_OK;
}

/* Eager: the merge of the launched ops' events; recorded: the last op,
 * which follows the others (they all write the token). */
static rp_status pop_done(rp_runtime *rt, rp_event *evs, uint32_t n,
                          rp_event *done) {
  rp_status st = RP_OK;
  if (done && n && (evs[n - 1].id >> 63))
    *done = evs[n - 1];
  else if (done)
    st = rp_event_merge(rt, evs, n, done);
  for (uint32_t i = 0; i < n && !(evs[i].id >> 63); i++)
    rp_event_release(rt, evs[i]);
  return st;
}

rp_status rp_launch_dist_parallel(rp_runtime *rt, const rp_dist_parallel *p,
                                  rp_event *done) {
  const char *what = "rp_launch_dist_parallel";
  rp_dist_state *ds;
  pop_plan pl = {0};
  rp_status st = enter(rt, p, what, &ds);
  if (st) /* a runtime that is no runtime is not touched again */
    return st;
  if ((st = rp__launch_eager_ok(rt, what)))
    return rp__launch_failed(rt, st);
  /* planned: the copies' ranks are known (pop_check got past the
   * arguments every rank gives alike); a refusal after that is this
   * rank's own, and its copies still take their places */
  int planned = 0;
  st = pop_check(ds, p, what, &pl, &planned);
  rp_event *evs = rp__calloc(ds->ranks, sizeof *evs);
  if (!st && !evs)
    st = rp__err(RP_ENOMEM, "%s: out of memory", what);
  uint32_t n = 0;
  /* the parts in rank order: a sum starts with part 0's plain copy and
   * adds the others in order, as the local operators add theirs in part
   * order, whatever the root; every rank launches every copy (a copy that does
   * not involve it is a placeholder), so the ranks' eager op counts stay equal;
   * after a refusal here (this rank's instances) the rest take their places
   * unlaunched */
  for (uint32_t k = 0; planned && k < ds->ranks; k++) {
    rp_dist_copy c;
    rp_dist_args a;
    rp_access acc[3];
    uint32_t na = 0;
    if (!st && !(st = pop_copy(ds, p, &pl, k, &c)) &&
        !(st = copy_side(ds, &c, what, &a, acc, &na))) {
      st = launch_op(ds, NULL, &a, acc, na, RP_PROC_ANY, c.wait, &evs[n], NULL);
      n += !st;
      continue;
    }
    uint32_t from = pl.to_parts ? p->root : k, to = pl.to_parts ? k : p->root;
    skip_op(ds, &(rp_dist_args){.role = from == ds->rank && to == ds->rank
                                            ? RP_DIST_SELF
                                        : from == ds->rank ? RP_DIST_SEND
                                        : to == ds->rank   ? RP_DIST_RECV
                                                           : RP_DIST_NONE,
                                .src_rank = from,
                                .dst_rank = to});
  }
  rp_status dst = evs ? pop_done(rt, evs, n, st ? NULL : done) : RP_OK;
  free(evs);
  return rp__launch_failed(rt, st ? st : dst);
}
