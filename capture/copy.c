/* capture/copy.c — copies and parallel operators through the launch API:
 * validation through the transfer planner, eager execution on a CPU worker
 * (or a GPU's driver thread for device memory), recording, and the builder
 * calls. A parallel operator is its copies, each issued like a copy. */
#include "capture_impl.h"

#include <string.h>

#define MAX_PARTS 4096

rp_status rp__check_copy(rp_runtime *rt, const rp_copy *c, rp_op_id op) {
  rp_xfer_desc d;
  rp_status st = rp_xfer_plan(rt, c, &d);
  if (st)
    return op == UINT32_MAX ? st : rp__err_as(st, "op %u (copy): ", op);
  rp_xfer_release(&d);
  return RP_OK;
}

/* ---- eager ---- */

typedef struct eager_copy {
  rp_gate gate;
  rp_capture_state *cs;
  rp_event done;
  uint8_t epoch; /* its drain epoch (rp__eager_end) */
  rp_xfer_desc d;
  rp_gate_waiter waiters[];
} eager_copy;

/* why: a failure's detail (NULL: none). */
static void copy_finish(eager_copy *c, rp_status st, const char *why) {
  rp_capture_state *cs = c->cs;
  rp_event done = c->done;
  uint8_t epoch = c->epoch;
  rp_xfer_release(&c->d);
  free(c);
  rp__event_complete_why(cs->rt, done, st, why);
  rp__eager_op_done(cs, epoch);
}

static void copy_stream_done(void *arg) {
  copy_finish(arg, RP_OK, NULL);
}

static void copy_run(rp_work *w) {
  eager_copy *c = (eager_copy *)w;
  rp_status st = (rp_status)atomic_load(&c->gate.poison);
  if (st != RP_OK) { /* a dependency failed: pass its status on */
    char *why = rp__gate_take_why(&c->gate);
    copy_finish(c, st, why);
    free(why);
    return;
  }
  if (rp_xfer_is_device(&c->d)) {
    rp_runtime *rt = c->cs->rt;
    const rp_device_ops *dev = rp__device_ops(rt);
    if (!dev) {
      st = rp__err(RP_EUNSUPPORTED, "device copy without a device backend");
    } else {
      void *stream = dev->proc_stream(rt, c->gate.proc);
      st = rp_xfer_run_stream(&c->d, stream);
      if (st == RP_OK)
        st = dev->launch_host_func(rt, stream, copy_stream_done, c);
      if (st == RP_OK)
        return; /* completes from the stream */
    }
  } else {
    rp__nvtx_push("reprise.copy");
    st = rp_xfer_run_cpu(&c->d);
    rp__nvtx_pop();
  }
  copy_finish(c, st, st ? rp_error_detail() : NULL);
}

static rp_status eager_copy_issue(rp_capture_state *cs, const rp_copy *c,
                                  rp_event *done) {
  rp_access acc[2] = {{c->src, RP_READ, RP_REDOP_NONE},
                      {c->dst, c->redop ? RP_REDUCE : RP_WRITE, c->redop}};
  uint32_t npre;
  rp_proc hint;
  rp_status st = rp__eager_begin(cs, acc, 2, 1, c->wait, &npre, &hint);
  if (st)
    return st;
  eager_copy *op = malloc(sizeof *op + sizeof(rp_gate_waiter) * npre);
  if (!op) {
    rp__eager_abort(cs);
    return rp__err(RP_ENOMEM, "rp_launch_copy: out of memory");
  }
  memset(op, 0, sizeof *op);
  op->cs = cs;
  op->gate.work.run = copy_run;
  if ((st = rp_xfer_plan(cs->rt, c, &op->d)) != RP_OK) {
    rp__eager_abort(cs);
    free(op);
    return st;
  }
  rp_proc proc = rp_xfer_is_device(&op->d) ? rp_xfer_device_proc(&op->d) : hint;
  int armed;
  st = rp__eager_end(cs, &op->gate, proc, op->waiters, acc, 2, 1, &op->done,
                     &op->epoch, done, &armed);
  if (!armed) {
    rp_xfer_release(&op->d);
    free(op);
  }
  return st;
}

/* ---- entry points ---- */

static rp_status check_wait(rp_runtime *rt, rp_event wait, int rec,
                            const char *what) {
  if (!rec && (wait.id & RP_REF_BIT))
    return rp__err(RP_ECAPTURE,
                   "%s: waits on a captured op reference "
                   "outside its capture",
                   what);
  if (!rec && !rp__event_live(rt, wait))
    return rp__err(RP_ESTALE, "%s: wait event %#llx is stale", what,
                   (unsigned long long)wait.id);
  return RP_OK;
}

static rp_status record_copy(rp_capture_state *cs, const rp_copy *c,
                             uint32_t group, rp_pop_kind kind, int bwd,
                             rp_event wait, rp_event *ref) {
  rp_gop op;
  memset(&op, 0, sizeof op);
  op.kind = RP_OP_COPY;
  op.copy = *c;
  op.copy.wait = RP_NO_EVENT;
  op.group = group;
  op.pop_kind = kind;
  op.pop_backward = bwd;
  op.shards = 1;
  op.proc = RP_PROC_ANY;
  return rp__record_op(cs, &op, wait, ref);
}

rp_status rp_launch_copy(rp_runtime *rt, const rp_copy *c, rp_event *done) {
  rp_capture_state *cs = NULL;
  int rec = 0;
  rp_status st = rp__launch_enter(rt, c, "rp_launch_copy", &cs, &rec);
  if (!st)
    st = check_wait(rt, c->wait, rec, "rp_launch_copy");
  if (!st && (st = rp__check_copy(rt, c, UINT32_MAX)) != RP_OK)
    return rp__launch_leave(cs, rec, rp__err_as(st, "rp_launch_copy: "));
  if (st)
    return rp__launch_leave(cs, rec, st);
  return rp__launch_leave(cs, rec,
                          rec ? record_copy(cs, c, 0, 0, 0, c->wait, done)
                              : eager_copy_issue(cs, c, done));
}

/* The operator's copies (errors name `what`, the call, and a failing
 * copy's index). */
static rp_status expand(rp_runtime *rt, const rp_parallel_op *op,
                        rp_copy **copies, uint32_t *n, const char *what) {
  if (op->nparts > MAX_PARTS)
    return rp__err(RP_ERANGE, "%s: %s operator with %u parts (max %u)", what,
                   rp__pop_name(op->kind), op->nparts, MAX_PARTS);
  rp_status st = rp_xfer_expand_parallel(rt, op, NULL, 0, n);
  if (st)
    return rp__err_as(st, "%s: ", what);
  *copies = rp__calloc(*n, sizeof **copies);
  if (!*copies)
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  st = rp_xfer_expand_parallel(rt, op, *copies, *n, n);
  if (st)
    st = rp__err_as(st, "%s: ", what);
  for (uint32_t i = 0; i < *n && !st; i++)
    if ((st = rp__check_copy(rt, &(*copies)[i], UINT32_MAX)) != RP_OK)
      st = rp__err_as(st, "%s: %s operator, copy %u of %u: ", what,
                      rp__pop_name(op->kind), i, *n);
  if (st) {
    free(*copies);
    *copies = NULL;
  }
  return st;
}

/* Copy i adds into the whole that copy i - 1 added into: it must follow
 * it. A REDUCTION's (or backward REPLICATE's) copies are part 0, then
 * `+=` each other part; the analysis lets reductions into one instance
 * run in any order, so from three parts on the float sum would depend on
 * which finished first. Chained, it is (p0 + p1) + p2 ... on every
 * backend, eager or replayed. */
static int sum_in_part_order(const rp_copy *copies, uint32_t i) {
  return i >= 2 && copies[i].redop && copies[i - 1].redop &&
         copies[i].dst.id == copies[i - 1].dst.id;
}

/* Eager: each copy is issued like rp_launch_copy (the operator's wait
 * gates every copy; a sum's later copies wait for the copy before, which
 * waited for it); done is their merge. */
static rp_status eager_parallel(rp_capture_state *cs, const rp_parallel_op *op,
                                rp_copy *copies, uint32_t n, rp_event *done) {
  rp_event *evs = rp__calloc(n, sizeof *evs);
  if (!evs)
    return rp__err(RP_ENOMEM, "rp_launch_parallel: out of memory");
  rp_status st = RP_OK;
  uint32_t issued = 0;
  for (; issued < n && !st; issued++) {
    int chained = sum_in_part_order(copies, issued);
    copies[issued].wait = chained ? evs[issued - 1] : op->wait;
    st = eager_copy_issue(cs, &copies[issued], &evs[issued]);
    if (!st && chained) { /* later readers wait for the chain's end */
      pthread_mutex_lock(&cs->lock);
      rp__analysis_implied(&cs->eager, copies[issued].dst, evs[issued - 1].id);
      pthread_mutex_unlock(&cs->lock);
    }
  }
  if (st) {
    issued--;
    st = rp__err_as(st, "rp_launch_parallel: "); /* not rp_launch_copy's */
  }
  /* Partway (out of memory: the copies were checked before), the copies
   * issued run on; the caller gets the error and *done untouched. */
  rp_status mst =
      done && !st ? rp_event_merge(cs->rt, evs, issued, done) : RP_OK;
  for (uint32_t i = 0; i < issued; i++)
    rp_event_release(cs->rt, evs[i]);
  free(evs);
  return st    ? st
         : mst ? rp__err_as(mst, "rp_launch_parallel: ") /* not the merge's */
               : RP_OK;
}

static rp_status record_parallel(rp_capture_state *cs, const rp_parallel_op *op,
                                 rp_copy *copies, uint32_t n, rp_event *done) {
  uint32_t nops = cs->graph->nops, group = ++cs->graph->ngroups;
  rp_status st = RP_OK;
  rp_event last = RP_NO_EVENT;
  cs->keep_name = 1; /* every copy of the operator carries its name */
  for (uint32_t i = 0; i < n && !st; i++) {
    st = record_copy(cs, &copies[i], group, op->kind, op->backward, op->wait,
                     &last);
    /* Sums into one whole run in part order: reductions commute for the
     * dependence analysis, float sums do not (sum_in_part_order). */
    if (!st && sum_in_part_order(copies, i)) {
      st = rp__graph_edge_inferred(cs->graph, cs->graph->nops - 2,
                                   cs->graph->nops - 1);
      /* later readers wait for the chain's end alone: N edges, not N^2 */
      if (!st)
        rp__analysis_implied(&cs->rec, copies[i].dst, cs->graph->nops - 2);
    }
  }
  cs->keep_name = 0;
  cs->next_name[0] = '\0';
  /* Nothing recorded: the graph is as it was (its group tag is handed out
   * again). Some copies recorded (only on ENOMEM, the copies were checked):
   * the analysis cannot take them back, so the capture fails. */
  if (st && cs->graph->nops == nops)
    cs->graph->ngroups--;
  else if (st)
    rp__capture_fail(cs, st);
  /* The operator's reference: its last copy. Its earlier copies precede it
   * only through accesses, so a postcondition on the whole operator should
   * name each copy (rp_capture_postcondition takes their list). */
  if (!st && done)
    *done = last;
  return st;
}

rp_status rp_launch_parallel(rp_runtime *rt, const rp_parallel_op *op,
                             rp_event *done) {
  rp_capture_state *cs = NULL;
  int rec = 0;
  rp_status st = rp__launch_enter(rt, op, "rp_launch_parallel", &cs, &rec);
  if (!st)
    st = check_wait(rt, op->wait, rec, "rp_launch_parallel");
  rp_copy *copies = NULL;
  uint32_t n = 0;
  if (!st)
    st = expand(rt, op, &copies, &n, "rp_launch_parallel");
  if (st)
    return rp__launch_leave(cs, rec, st);
  st = rec ? record_parallel(cs, op, copies, n, done)
           : eager_parallel(cs, op, copies, n, done);
  free(copies);
  return rp__launch_leave(cs, rec, st);
}

/* ---- builder ---- */

rp_status rp_graph_add_copy(rp_graph *g, const rp_copy *c, rp_op_id *out) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_copy");
  if (gst_)
    return gst_;
  if (!g || !c)
    return rp__err(RP_EINVAL, "rp_graph_add_copy: NULL argument");
  if (c->wait.id)
    return rp__err(RP_EINVAL, "rp_graph_add_copy: use edges and ports, not "
                              "wait events, in the builder");
  rp_status st = rp__check_copy(g->rt, c, UINT32_MAX);
  if (st)
    return rp__err_as(st, "rp_graph_add_copy: ");
  rp_gop op;
  memset(&op, 0, sizeof op);
  op.kind = RP_OP_COPY;
  op.copy = *c;
  op.shards = 1;
  op.proc = RP_PROC_ANY;
  return rp__graph_append(g, &op, out);
}

rp_status rp_graph_add_parallel(rp_graph *g, const rp_parallel_op *p,
                                rp_op_id *first, uint32_t *count) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_add_parallel");
  if (gst_)
    return gst_;
  if (!g || !p)
    return rp__err(RP_EINVAL, "rp_graph_add_parallel: NULL argument");
  if (p->wait.id)
    return rp__err(RP_EINVAL, "rp_graph_add_parallel: use edges and ports, "
                              "not wait events, in the builder");
  rp_copy *copies = NULL;
  uint32_t n = 0;
  rp_status st = expand(g->rt, p, &copies, &n, "rp_graph_add_parallel");
  if (st)
    return st;
  uint32_t base = g->nops, group = ++g->ngroups;
  for (uint32_t i = 0; i < n && !st; i++) {
    rp_gop op;
    memset(&op, 0, sizeof op);
    op.kind = RP_OP_COPY;
    op.copy = copies[i];
    op.shards = 1;
    op.proc = RP_PROC_ANY;
    op.group = group;
    op.pop_kind = p->kind;
    op.pop_backward = p->backward;
    st = rp__graph_append(g, &op, NULL);
  }
  /* The builder has no accesses-based ordering: a plain copy followed by
   * SUM copies into one destination gets explicit edges, a chain in part
   * order (sum_in_part_order). */
  for (uint32_t i = 1; i < n && !st; i++)
    if (copies[i].redop && !copies[0].redop &&
        copies[i].dst.id == copies[0].dst.id)
      st = rp__graph_edge(g, base + i - 1, base + i);
  free(copies);
  if (st) {
    while (g->nops > base)
      rp__gop_clear(&g->ops[--g->nops]);
    while (g->nedges && g->edges[g->nedges - 1].from >= base)
      g->nedges--;
    g->ngroups--;
    return st;
  }
  if (first)
    *first = base;
  if (count)
    *count = n;
  return RP_OK;
}
