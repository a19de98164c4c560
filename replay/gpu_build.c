/* replay/gpu_build.c — the device side of an exec at instantiate (see
 * gpu.h): each exec's own streams, leased from the runtime; the device
 * parameter buffers; cross-GPU events; capturing segments into graphs and
 * instantiating them; rp_exec_update_args on a built exec; and freeing it
 * all at destroy. */
#include "gpu.h"

#include <string.h>

static pthread_mutex_t g_rt_init = PTHREAD_MUTEX_INITIALIZER;

static lower_rt *lower_rt_get(rp_exec *ex) {
  rp_replay_state *rs = ex->rs;
  pthread_mutex_lock(&g_rt_init); /* instantiate path only */
  lower_rt *lr = rs->lower;
  if (!lr && (lr = rp__calloc(1, sizeof *lr)) != NULL) {
    lr->nprocs = rp_proc_count(ex->rt);
    lr->free_sets = rp__calloc(lr->nprocs, sizeof *lr->free_sets);
    if (!lr->free_sets) {
      free(lr);
      lr = NULL;
    } else {
      pthread_mutex_init(&lr->lock, NULL);
      pthread_mutex_init(&lr->reg_lock, NULL);
      rs->lower = lr;
    }
  }
  pthread_mutex_unlock(&g_rt_init);
  return lr;
}

static void streams_destroy(rp_runtime *rt, lower_streams *ss) {
  (void)rp__device_ops(rt)->stream_destroy(rt, ss->replay);
  (void)rp__device_ops(rt)->stream_destroy(rt, ss->done);
  for (int c = 0; c < CAPTURE_STREAMS; c++)
    (void)rp__device_ops(rt)->stream_destroy(rt, ss->cap[c]);
  free(ss);
}

void rp__lower_rt_free(rp_runtime *rt, void *state) {
  lower_rt *lr = state;
  rp__gpu_poller_stop(lr); /* every exec is gone: nothing left to poll */
  /* every exec is destroyed (or leaked after a lost context) by now */
  while (lr->all) {
    lower_streams *ss = lr->all;
    lr->all = ss->next_all;
    streams_destroy(rt, ss);
  }
  free(lr->free_sets);
  free(lr->reg);
  free(lr->snap);
  pthread_mutex_destroy(&lr->lock);
  pthread_mutex_destroy(&lr->reg_lock);
  free(lr);
}

/* A set of streams on processor p for one exec: a free one, else new ones
 * (lr->lock held). */
static rp_status lease_streams(rp_runtime *rt, lower_rt *lr, rp_proc p,
                               lower_streams **out) {
  lower_streams *ss = lr->free_sets[p];
  if (ss) {
    lr->free_sets[p] = ss->next_free;
    ss->next_free = NULL;
    *out = ss;
    return RP_OK;
  }
  if (!(ss = rp__calloc(1, sizeof *ss)))
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  ss->proc = p;
  rp_status st = rp__device_ops(rt)->stream_create(rt, p, &ss->replay);
  if (!st)
    st = rp__device_ops(rt)->stream_create(rt, p, &ss->done);
  for (int c = 0; c < CAPTURE_STREAMS && !st; c++)
    st = rp__device_ops(rt)->stream_create_blocking(rt, p, &ss->cap[c]);
  if (st) {
    streams_destroy(rt, ss);
    return rp__err_prefix(st, "instantiate: streams of GPU processor %u: ", p);
  }
  ss->next_all = lr->all;
  lr->all = ss;
  *out = ss;
  return RP_OK;
}

/* Hands an exec's set back (lr->lock held; its work finished). */
static void return_streams(lower_rt *lr, lower_streams *ss) {
  ss->next_free = lr->free_sets[ss->proc];
  lr->free_sets[ss->proc] = ss;
}

/* ---- device parameter buffers ---- */

static size_t align16(size_t v) {
  return (v + 15) & ~(size_t)15;
}

static int has_value_interp(const rp_unit *u) {
  for (uint32_t k = 0; k < u->ninterp; k++)
    if (u->interps[k].dst_offset != RP_INTERP_SHARDS)
      return 1;
  return 0;
}

/* The GPU whose parameter buffer holds the args of lane's units: its
 * group's leader. Logical GPUs on one device share one buffer (and one
 * staging slot per replay), so a replay refreshes a group's parameters with
 * one copy. */
static rp_gpu_lane *buf_of(rp_exec *ex, uint32_t lane) {
  rp_lower *lw = ex->lw;
  return &lw->gpus[lw->gpus[lw->gpu_of_lane[lane]].group];
}

/* Offsets of every GPU task unit's args in its group's buffer, and the
 * units whose args are interpolated per replay. */
static rp_status param_layout(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  for (uint32_t u = 0; u < lw->nop_units; u++) {
    rp_unit *x = &ex->units[u];
    if (lw->seg_of[u] == UINT32_MAX || x->kind != RP_UNIT_TASK)
      continue;
    rp_gpu_lane *gl = buf_of(ex, x->lane);
    lw->param_off[u] = (uint32_t)gl->param_bytes;
    gl->param_bytes = align16(gl->param_bytes + x->ctx.args_size);
    gl->ninterp_units += has_value_interp(x);
  }
  for (uint32_t i = 0; i < lw->ngpu; i++) {
    rp_gpu_lane *gl = &lw->gpus[i];
    if (gl->param_bytes > UINT32_MAX)
      return rp__err(RP_ERANGE,
                     "instantiate: GPU processor %u: %zu bytes "
                     "of task arguments",
                     gl->lane, gl->param_bytes);
    gl->interp_units = malloc(sizeof *gl->interp_units *
                              (gl->ninterp_units ? gl->ninterp_units : 1));
    gl->interp_checks = rp__calloc(gl->ninterp_units ? gl->ninterp_units : 1,
                                   sizeof *gl->interp_checks);
    if (!gl->interp_units || !gl->interp_checks)
      return rp__err(RP_ENOMEM, "instantiate: out of memory");
    gl->ninterp_units = 0;
  }
  for (uint32_t u = 0; u < lw->nop_units; u++) {
    rp_unit *x = &ex->units[u];
    if (lw->seg_of[u] != UINT32_MAX && x->kind == RP_UNIT_TASK &&
        has_value_interp(x)) {
      rp_gpu_lane *gl = buf_of(ex, x->lane);
      const rp_task_rec *t = rp__task_get(ex->rt, ex->g->ops[x->op].task);
      gl->interp_checks[gl->ninterp_units] = t ? t->check_fn : NULL;
      gl->interp_units[gl->ninterp_units++] = u;
    }
  }
  return RP_OK;
}

/* Allocates one group's device buffer and staging slots (on its leader;
 * the others have none), fills both with the recorded args and points its
 * units' contexts at their bytes. */
static rp_status param_buffers(rp_exec *ex, rp_gpu_lane *gl) {
  rp_lower *lw = ex->lw;
  size_t pb = gl->param_bytes, total;
  if (!pb)
    return RP_OK;
  if (!rp__mul_ok(pb, ex->max_inflight, &total))
    return rp__err(RP_ERANGE, "instantiate: parameter staging overflows");
  void *dev = NULL, *stg = NULL;
  rp_status st = rp__mem_alloc(ex->rt, gl->dev_mem, pb, 256, &dev);
  if (st)
    return rp__err_prefix(st,
                          "instantiate: parameter buffer of GPU "
                          "processor %u: ",
                          gl->lane);
  gl->dev_params = dev;
  if ((st = rp__mem_alloc(ex->rt, gl->pin_mem, total, 64, &stg)) != RP_OK)
    return rp__err_prefix(st, "instantiate: parameter staging: ");
  gl->staging = stg;
  for (uint32_t u = 0; u < lw->nop_units; u++) {
    rp_unit *x = &ex->units[u];
    if (lw->seg_of[u] == UINT32_MAX || x->kind != RP_UNIT_TASK ||
        buf_of(ex, x->lane) != gl)
      continue;
    for (uint32_t slot = 0; slot < ex->max_inflight; slot++)
      memcpy(gl->staging + (size_t)slot * pb + lw->param_off[u], x->args,
             x->ctx.args_size);
    x->ctx.dev_args =
        x->ctx.args_size ? gl->dev_params + lw->param_off[u] : NULL;
  }
  /* synchronous: complete before any graph can read it */
  return rp__mem_copy(ex->rt, gl->dev_mem, gl->dev_params, gl->pin_mem,
                      gl->staging, pb);
}

static rp_status setup_gpus(rp_exec *ex, lower_rt *lr) {
  rp_lower *lw = ex->lw;
  rp_mem pinned;
  rp_status st = rp_mem_find(ex->rt, RP_MEM_PINNED, -1, &pinned);
  if (st)
    return rp__err_prefix(st, "instantiate: pinned memory: ");
  lw->param_off = rp__calloc(ex->nunits, sizeof *lw->param_off);
  if (!lw->param_off)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t i = 0; i < lw->ngpu && !st; i++) {
    rp_gpu_lane *gl = &lw->gpus[i];
    gl->device = DV(ex)->proc_device(ex->rt, gl->lane);
    gl->dev_mem = rp__proc(ex->rt, gl->lane)->local;
    gl->pin_mem = pinned;
    st = lease_streams(ex->rt, lr, gl->lane, &gl->streams);
    if (!st)
      gl->stream = gl->streams->replay;
  }
  if (!st)
    st = param_layout(ex);
  for (uint32_t i = 0; i < lw->ngpu && !st; i++)
    st = param_buffers(ex, &lw->gpus[i]);
  return st;
}

/* ---- cross-GPU events ---- */

/* The group (leader's index in lw->gpus) of GPU unit u. */
static uint32_t group_of(const rp_exec *ex, uint32_t u) {
  const rp_lower *lw = ex->lw;
  return lw->gpus[lw->gpu_of_lane[ex->units[u].lane]].group;
}

/* 1 when GPU unit u's predecessor p is a GPU op unit of another group
 * (another physical device; launchers, also predecessors of their
 * members, are not): ordered by an event. Within a group stream order and
 * graph edges do. */
static int other_gpu(const rp_exec *ex, uint32_t u, uint32_t p) {
  return p < ex->lw->nop_units && ex->lw->seg_of[p] != UINT32_MAX &&
         group_of(ex, p) != group_of(ex, u);
}

/* 1 when p is a member of segment k (not its launcher). */
static int in_segment(const rp_lower *lw, uint32_t p, uint32_t k) {
  return p < lw->nop_units && lw->seg_of[p] == k;
}

/* Calls fn(ex, k, producer, arg) for every producer on another GPU that
 * segment k's members depend on, in this replay or the previous one. */
static void each_cross(rp_exec *ex, uint32_t k, const uint32_t *woff,
                       const uint32_t *wsrc,
                       void (*fn)(rp_exec *, uint32_t, uint32_t, void *),
                       void *arg) {
  const rp_seg *sg = &ex->lw->segs[k];
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t u = ex->lw->members[sg->first + i];
    const rp_unit *x = &ex->units[u];
    for (uint32_t j = 0; j < x->npred; j++)
      if (other_gpu(ex, u, ex->preds[x->pred_off + j]))
        fn(ex, k, ex->preds[x->pred_off + j], arg);
    for (uint32_t j = woff[u]; j < woff[u + 1]; j++)
      if (other_gpu(ex, u, wsrc[j]))
        fn(ex, k, wsrc[j], arg);
  }
}

typedef struct cross_acc {
  uint32_t *stamp; /* per unit: segment + 1 that listed it last */
  uint8_t *need;   /* per unit: needs an event */
  uint32_t count;  /* (segment, producer) pairs */
  int fill;
} cross_acc;

static void cross_visit(rp_exec *ex, uint32_t k, uint32_t p, void *arg) {
  cross_acc *a = arg;
  if (a->stamp[p] == k + 1)
    return;
  a->stamp[p] = k + 1;
  a->need[p] = 1;
  if (a->fill)
    ex->lw->seg_events[a->count] = ex->lw->events[p];
  a->count++;
}

static rp_status make_events(rp_exec *ex, const uint8_t *need) {
  rp_lower *lw = ex->lw;
  for (uint32_t u = 0; u < lw->nop_units; u++)
    if (need[u]) {
      /* recorded on the producer's own device, waited on anywhere */
      rp_status st =
          DV(ex)->event_create(ex->rt, ex->units[u].lane, &lw->events[u]);
      if (st)
        return rp__err_prefix(st,
                              "instantiate: event of op %u: ", ex->units[u].op);
    }
  return RP_OK;
}

static rp_status setup_events(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint32_t n = ex->nunits;
  /* the wrap-around edges instantiate computed (rp__place_wrap_deps) */
  const uint32_t *woff = ex->wrap_off, *wsrc = ex->wrap_src;
  cross_acc a = {rp__calloc(n ? n : 1, sizeof *a.stamp),
                 rp__calloc(n ? n : 1, 1), 0, 0};
  lw->events = rp__calloc(n ? n : 1, sizeof *lw->events);
  rp_status st = a.stamp && a.need && lw->events
                     ? RP_OK
                     : rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t k = 0; k < lw->nseg && !st; k++)
    each_cross(ex, k, woff, wsrc, cross_visit, &a);
  if (!st && !(lw->seg_events = malloc(sizeof(void *) * (a.count + 1))))
    st = rp__err(RP_ENOMEM, "instantiate: out of memory");
  if (!st)
    st = make_events(ex, a.need);
  if (!st) {
    memset(a.stamp, 0, sizeof *a.stamp * n);
    a.count = 0;
    a.fill = 1;
    for (uint32_t k = 0; k < lw->nseg; k++) {
      lw->segs[k].ev_off = a.count;
      each_cross(ex, k, woff, wsrc, cross_visit, &a);
      lw->segs[k].nev = a.count - lw->segs[k].ev_off;
    }
  }
  free(a.stamp);
  free(a.need);
  return st;
}

/* ---- capture ---- */

/* Runs unit u's issue (a task's GPU variant, or a copy) into capture on
 * stream, so it records instead of running. Tasks that launch work or wait
 * on events are refused as inside a replay. */
static rp_status capture_issue(rp_unit *u, void *stream) {
  if (u->kind == RP_UNIT_COPY) {
    rp_xfer_reset(u->xd);
    rp_status st = rp_xfer_run_stream(u->xd, stream);
    rp_xfer_reset(u->xd); /* replays run the graph, not the descriptor */
    return st;
  }
  const char *violation = NULL, **saved = rp__tl_replay_violation;
  rp__tl_replay_violation = &violation;
  u->ctx.stream = stream;
  u->ctx.shards = u->max_shards;
  rp_status st = u->fn(&u->ctx);
  rp__tl_replay_violation = saved;
  if (violation)
    return rp__err(RP_ECONTRACT,
                   "the task called %s, which a task may not call while "
                   "being captured (a launch, a wait, or a change to an "
                   "object)",
                   violation);
  rp_status ts = rp__task_status(st);
  return ts != st ? rp__err(ts, "the task returned %d", (int)st) : st;
}

/* Captures unit ui into a new graph (*child, the caller's). A failure
 * names the op, its task and both the task's and CUDA's complaint. */
static rp_status capture_unit(rp_exec *ex, uint32_t ui, void *stream,
                              void **child) {
  rp_unit *u = &ex->units[ui];
  char task_why[256] = "";
  *child = NULL;
  rp__nvtx_push(rp__unit_label(u));
  rp_status st = DV(ex)->capture_begin(ex->rt, stream);
  rp_status fst = RP_OK;
  if (st == RP_OK) {
    fst = capture_issue(u, stream);
    if (fst)
      snprintf(task_why, sizeof task_why, "%s", rp_error_detail());
    st = DV(ex)->capture_end(ex->rt, stream, child);
  }
  rp__nvtx_pop();
  if (fst == RP_OK && st == RP_OK)
    return RP_OK;
  char cuda_why[256] = "";
  if (st)
    snprintf(cuda_why, sizeof cuda_why, "%s", rp_error_detail());
  DV(ex)->graph_destroy(*child);
  *child = NULL;
  return rp__err(fst ? fst : st,
                 "op %u (%s) on GPU processor %u: capture "
                 "into a CUDA graph failed (a task must not allocate, "
                 "synchronize or use the legacy stream): %s%s%s",
                 u->op, rp__unit_label(u), u->lane, task_why,
                 *task_why && *cuda_why ? "; " : "", cuda_why);
}

/* Adds node to deps[0..*nd) unless it is there. */
static void dep_add(void **deps, size_t *nd, void *node) {
  for (size_t i = 0; i < *nd; i++)
    if (deps[i] == node)
      return;
  deps[(*nd)++] = node;
}

typedef struct seg_build {
  void *graph;
  void **nodes;    /* per member */
  uint8_t *colors; /* per member: capture stream */
  void **deps;     /* scratch */
  void **waits;    /* the segment's cross-GPU event waits (graph nodes) */
  uint32_t nwaits;
} seg_build;

/* The capture stream for member i: continue a predecessor's chain when it
 * ends at that predecessor, else an unused stream, else round robin. */
static uint8_t pick_color(rp_exec *ex, uint32_t k, uint32_t i,
                          const uint32_t *tail, const uint8_t *colors,
                          uint32_t *rr) {
  const rp_seg *sg = &ex->lw->segs[k];
  const rp_unit *u = &ex->units[ex->lw->members[sg->first + i]];
  for (uint32_t j = 0; j < u->npred; j++) {
    uint32_t p = ex->preds[u->pred_off + j];
    if (!in_segment(ex->lw, p, k))
      continue;
    uint32_t pi = ex->lw->midx[p];
    if (tail[colors[pi]] == pi)
      return colors[pi];
  }
  for (uint8_t c = 0; c < CAPTURE_STREAMS; c++)
    if (tail[c] == UINT32_MAX)
      return c;
  return (uint8_t)((*rr)++ % CAPTURE_STREAMS);
}

/* Member i's node: its captured child after its same-segment
 * predecessors (and the previous node of its capture stream), then the
 * record of its event when another GPU waits for it. */
static rp_status add_member(rp_exec *ex, uint32_t k, uint32_t i,
                            const lower_streams *gs, seg_build *b,
                            uint32_t *tail, uint32_t *rr) {
  rp_lower *lw = ex->lw;
  const rp_seg *sg = &lw->segs[k];
  uint32_t ui = lw->members[sg->first + i];
  const rp_unit *u = &ex->units[ui];
  size_t nd = 0;
  for (uint32_t j = 0; j < u->npred; j++) {
    uint32_t p = ex->preds[u->pred_off + j];
    if (in_segment(lw, p, k))
      dep_add(b->deps, &nd, b->nodes[lw->midx[p]]);
  }
  uint8_t c = pick_color(ex, k, i, tail, b->colors, rr);
  if (tail[c] != UINT32_MAX) /* stream order on the capture stream */
    dep_add(b->deps, &nd, b->nodes[tail[c]]);
  /* A root of the segment starts after the other GPUs' producers, as the
   * whole segment did when the waits were issued on the stream before it. */
  for (uint32_t w = 0; nd == 0 && w < b->nwaits; w++)
    b->deps[w] = b->waits[w];
  if (nd == 0)
    nd = b->nwaits;
  void *child;
  rp_status st = capture_unit(ex, ui, gs->cap[c], &child);
  if (st)
    return st;
  st = DV(ex)->graph_add_child(ex->rt, b->graph, b->deps, nd, child,
                               &b->nodes[i]);
  DV(ex)->graph_destroy(child);
  if (st)
    return rp__err_prefix(st, "op %u (%s): ", u->op, rp__unit_label(u));
  b->colors[i] = c;
  tail[c] = i;
  if (lw->events[ui]) {
    void *rec;
    st = DV(ex)->graph_add_event_record(ex->rt, b->graph, &b->nodes[i], 1,
                                        lw->events[ui], &rec);
  }
  return st;
}

/* Builds segment k's graph into b (b->nodes, b->colors sized sg->n). */
static rp_status build_graph(rp_exec *ex, uint32_t k, const lower_streams *gs,
                             seg_build *b) {
  const rp_seg *sg = &ex->lw->segs[k];
  uint32_t maxdeg = 0;
  for (uint32_t i = 0; i < sg->n; i++) {
    const rp_unit *u = &ex->units[ex->lw->members[sg->first + i]];
    maxdeg = u->npred > maxdeg ? u->npred : maxdeg;
  }
  b->deps = malloc(sizeof *b->deps * ((size_t)maxdeg + 2 + sg->nev));
  b->waits = malloc(sizeof *b->waits * (sg->nev ? sg->nev : 1));
  b->nwaits = 0;
  if (!b->deps || !b->waits) {
    free(b->deps);
    free(b->waits);
    b->deps = b->waits = NULL;
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  rp_status st = DV(ex)->graph_create(ex->rt, &b->graph);
  /* Dependencies on other physical GPUs' producers: event wait nodes inside
   * the graph (the producers' graphs record the events), so a replay needs
   * no host-issued stream wait before this segment. */
  for (uint32_t w = 0; w < sg->nev && !st; w++, b->nwaits++)
    st = DV(ex)->graph_add_event_wait(ex->rt, b->graph, NULL, 0,
                                      ex->lw->seg_events[sg->ev_off + w],
                                      &b->waits[w]);
  uint32_t tail[CAPTURE_STREAMS], rr = 0;
  for (int c = 0; c < CAPTURE_STREAMS; c++)
    tail[c] = UINT32_MAX;
  for (uint32_t i = 0; i < sg->n && !st; i++)
    st = add_member(ex, k, i, gs, b, tail, &rr);
  free(b->deps);
  free(b->waits);
  b->deps = b->waits = NULL;
  if (st) {
    DV(ex)->graph_destroy(b->graph);
    b->graph = NULL;
  }
  return st;
}

/* Captures and instantiates segment k (device current: its GPU's). */
static rp_status segment_graph(rp_exec *ex, uint32_t k) {
  rp_lower *lw = ex->lw;
  rp_seg *sg = &lw->segs[k];
  rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  seg_build b = {.nodes = &lw->nodes[sg->first],
                 .colors = &lw->colors[sg->first]};
  int prev;
  rp_status st = DV(ex)->device_enter(ex->rt, gl->device, &prev);
  if (st)
    return st;
  st = build_graph(ex, k, gl->streams, &b);
  if (!st) {
    sg->graph = b.graph;
    st = DV(ex)->graph_instantiate(ex->rt, sg->graph, gl->stream, &sg->exec);
    if (st)
      st = rp__err_prefix(st,
                          "instantiate: segment %u of GPU processor %u: "
                          "",
                          k, sg->lane);
  }
  DV(ex)->device_leave(gl->device, prev);
  return st;
}

/* ---- build ---- */

/* The polled completion words, when the driver writes memory from a
 * stream: a probe write on each GPU's replay stream tells (an exec with
 * them polls plain memory, without a CUDA call and its driver lock). */
static rp_status completion_words(rp_exec *ex, size_t n) {
  rp_lower *lw = ex->lw;
  void *w = NULL;
  rp_status st =
      rp__mem_alloc(ex->rt, lw->gpus[0].pin_mem, n * sizeof(uint32_t), 64, &w);
  if (st)
    return rp__err_prefix(st, "instantiate: completion words: ");
  memset(w, 0, n * sizeof(uint32_t));
  lw->words = w;
  void *dw = NULL;
  st = DV(ex)->host_device_ptr(ex->rt, w, &dw);
  lw->words_dev = dw;
  for (uint32_t g = 0; g < lw->ngpu && !st; g++) {
    if (lw->gpus[g].group != g)
      continue;
    int prev;
    st = DV(ex)->device_enter(ex->rt, lw->gpus[g].device, &prev);
    if (st)
      return st;
    st = DV(ex)->stream_write_u32(ex->rt, lw->gpus[g].stream,
                                  lw->words_dev + g * sizeof(uint32_t), 0);
    if (!st)
      st = DV(ex)->stream_sync(ex->rt, lw->gpus[g].stream);
    DV(ex)->device_leave(lw->gpus[g].device, prev);
  }
  if (st && rp__runtime_check(ex->rt) == RP_OK) { /* events, then */
    rp__mem_free(ex->rt, lw->gpus[0].pin_mem, lw->words);
    lw->words = NULL;
    return RP_OK;
  }
  return st ? rp__err_prefix(st, "instantiate: completion words: ") : RP_OK;
}

static rp_status setup_callbacks(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  size_t ncb = (size_t)ex->max_inflight * lw->nseg;
  lw->cbs = rp__calloc(ncb, sizeof *lw->cbs);
  lw->owed = rp__calloc((size_t)ex->max_inflight * lw->ngpu, sizeof *lw->owed);
  lw->done_events =
      rp__calloc(lw->nseg ? lw->nseg : 1, sizeof *lw->done_events);
  size_t nsg = (size_t)ex->max_inflight * lw->ngpu;
  lw->slot_events = rp__calloc(nsg, sizeof *lw->slot_events);
  lw->launched = rp__calloc(nsg, sizeof *lw->launched);
  lw->rel_of = rp__calloc(nsg, sizeof *lw->rel_of);
  lw->next_r = rp__calloc(lw->ngpu, sizeof *lw->next_r);
  lw->by_word = rp__calloc(nsg, 1);
  if (!lw->cbs || !lw->owed || !lw->done_events || !lw->slot_events ||
      !lw->launched || !lw->rel_of || !lw->next_r || !lw->by_word)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  if (lw->poll_ok && !lw->poll_events) {
    rp_status st = completion_words(ex, nsg);
    if (st)
      return st;
  }
  for (size_t i = 0; lw->poll_ok && i < nsg; i++) {
    rp_status st = DV(ex)->event_create(ex->rt, lw->gpus[i % lw->ngpu].lane,
                                        &lw->slot_events[i]);
    if (st)
      return rp__err_prefix(st, "instantiate: completion event: ");
  }
  /* One per segment (every segment: a re-placement may give any of them a
   * callback). Recorded after the segment's work and waited for on the
   * side stream right away, so one event serves every replay. */
  for (uint32_t k = 0; k < lw->nseg; k++) {
    rp_status st =
        DV(ex)->event_create(ex->rt, lw->segs[k].lane, &lw->done_events[k]);
    if (st)
      return rp__err_prefix(st,
                            "instantiate: completion event of segment "
                            "%u: ",
                            k);
  }
  for (uint32_t slot = 0; slot < ex->max_inflight; slot++)
    for (uint32_t k = 0; k < lw->nseg; k++) {
      rp_seg_cb *c = &lw->cbs[(size_t)slot * lw->nseg + k];
      c->ex = ex;
      c->seg = k;
      c->slot = slot;
    }
  return RP_OK;
}

static rp_status setup_members(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint32_t nm = 0;
  for (uint32_t k = 0; k < lw->nseg; k++)
    nm += lw->segs[k].n;
  lw->nodes = rp__calloc(nm ? nm : 1, sizeof *lw->nodes);
  lw->colors = rp__calloc(nm ? nm : 1, 1);
  lw->midx = rp__calloc(ex->nunits, sizeof *lw->midx);
  if (!lw->nodes || !lw->colors || !lw->midx)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t k = 0; k < lw->nseg; k++)
    for (uint32_t i = 0; i < lw->segs[k].n; i++)
      lw->midx[lw->members[lw->segs[k].first + i]] = i;
  return RP_OK;
}

static int graphs_enabled(void) {
  /* read at every instantiate (not a runtime tunable): a debugging
   * switch that also serves the benchmark's comparison */
  const char *v = getenv("REPRISE_CUDA_GRAPHS");
  return !(v && strcmp(v, "0") == 0);
}

rp_status rp__lower_build(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  lw->dev = rp__device_ops(ex->rt);
  if (!lw->dev)
    return rp__err(RP_EUNSUPPORTED, "instantiate: GPU ops need a runtime "
                                    "with a device backend");
  lw->graphs = graphs_enabled();
  lower_rt *lr = lower_rt_get(ex);
  if (!lr)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  pthread_mutex_lock(&lr->lock); /* instantiate path only */
  ex->lw->lr = lr;
  rp_status st = setup_gpus(ex, lr);
  if (!st)
    st = setup_events(ex);
  if (!st)
    st = setup_callbacks(ex);
  if (!st)
    st = setup_members(ex);
  for (uint32_t k = 0; k < lw->nseg && !st; k++) {
    lw->segs[k].eager = rp__lower_eager_reason(ex, k);
    if (!lw->segs[k].eager)
      st = segment_graph(ex, k);
  }
  if (!st && lw->poll_ok)
    st = rp__gpu_poller_register(lr, ex);
  pthread_mutex_unlock(&lr->lock);
  return st;
}

/* ---- free ---- */

void rp__lower_free(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  if (lw->lr)
    rp__gpu_poller_unregister(lw->lr,
                              ex); /* first: the poller reads the exec */
  /* no device calls where the build never reached the device (a model
   * runtime, a runtime without a device backend) */
  int usable = lw->dev && rp__runtime_check(ex->rt) == RP_OK;
  rp__lower_trace_free(ex); /* events: released once their work is done */
  for (uint32_t i = 0; usable && i < lw->ngpu; i++)
    if (lw->gpus[i].stream) { /* uploads, the last replay's work and its
                                 completion */
      (void)DV(ex)->stream_sync(ex->rt, lw->gpus[i].stream);
      (void)DV(ex)->stream_sync(ex->rt, lw->gpus[i].streams->done);
    }
  for (uint32_t k = 0; lw->dev && lw->segs && k < lw->nseg; k++) {
    DV(ex)->graph_exec_destroy(lw->segs[k].exec);
    DV(ex)->graph_destroy(lw->segs[k].graph);
  }
  for (uint32_t u = 0; lw->events && u < lw->nop_units; u++)
    (void)DV(ex)->event_destroy(ex->rt, lw->events[u]);
  for (uint32_t k = 0; lw->done_events && k < lw->nseg; k++)
    (void)DV(ex)->event_destroy(ex->rt, lw->done_events[k]);
  for (size_t i = 0; lw->slot_events && i < (size_t)ex->max_inflight * lw->ngpu;
       i++)
    (void)DV(ex)->event_destroy(ex->rt, lw->slot_events[i]);
  if (lw->words) /* the streams were synced above (or the context is lost) */
    rp__mem_free(ex->rt, lw->gpus[0].pin_mem, lw->words);
  for (uint32_t i = 0; lw->gpus && i < lw->ngpu; i++) {
    rp_gpu_lane *gl = &lw->gpus[i];
    if (gl->dev_params)
      rp__mem_free(ex->rt, gl->dev_mem, gl->dev_params);
    if (gl->staging)
      rp__mem_free(ex->rt, gl->pin_mem, gl->staging);
    free(gl->interp_units);
    free(gl->interp_checks);
  }
  /* Last: the streams go back to the runtime for the next exec, once
   * their work finished (synced above) and no graph of this exec remains.
   * After a lost context they stay out (the runtime destroys them). */
  lower_rt *lr = lw->lr;
  if (lr) {
    pthread_mutex_lock(&lr->lock); /* destroy path only */
    for (uint32_t i = 0; usable && lw->gpus && i < lw->ngpu; i++)
      if (lw->gpus[i].streams)
        return_streams(lr, lw->gpus[i].streams);
    pthread_mutex_unlock(&lr->lock);
  }
  free(lw->segs);
  free(lw->members);
  free(lw->seg_of);
  free(lw->gpus);
  free(lw->gpu_of_lane);
  free(lw->waits);
  free(lw->pubs);
  free(lw->events);
  free(lw->seg_events);
  free(lw->nodes);
  free(lw->colors);
  free(lw->midx);
  free(lw->param_off);
  free(lw->cbs);
  free(lw->done_events);
  free(lw->slot_events);
  free(lw->by_word);
  free((void *)lw->launched);
  free(lw->rel_of);
  free(lw->next_r);
  free(lw->last_seg);
  free((void *)lw->owed);
  free(lw);
  ex->lw = NULL;
}

/* ---- rp_exec_update_args ---- */

/* The op's new args into every staging slot and the device buffer. */
static rp_status update_params(rp_exec *ex, uint32_t ui) {
  rp_lower *lw = ex->lw;
  rp_unit *u = &ex->units[ui];
  rp_gpu_lane *gl = buf_of(ex, u->lane);
  size_t n = u->ctx.args_size, off = lw->param_off[ui];
  if (!n)
    return RP_OK;
  for (uint32_t slot = 0; slot < ex->max_inflight; slot++)
    memcpy(gl->staging + (size_t)slot * gl->param_bytes + off, u->args, n);
  return rp__mem_copy(ex->rt, gl->dev_mem, gl->dev_params + off, gl->pin_mem,
                      gl->staging + off, n);
}

/* Rebuilds segment k from fresh captures; applies it with
 * cudaGraphExecUpdate, else re-instantiates. */
static rp_status rebuild_segment(rp_exec *ex, uint32_t k, int *reinst) {
  rp_lower *lw = ex->lw;
  rp_seg *sg = &lw->segs[k];
  rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  seg_build b = {.nodes = malloc(sizeof(void *) * sg->n),
                 .colors = malloc(sg->n)};
  rp_status st = b.nodes && b.colors
                     ? build_graph(ex, k, gl->streams, &b)
                     : rp__err(RP_ENOMEM, "rp_exec_update_args: out of "
                                          "memory");
  const char *why = "";
  if (!st && DV(ex)->graph_exec_update(ex->rt, sg->exec, b.graph, &why)) {
    /* node handles stay those of the graph the exec was made from */
    DV(ex)->graph_destroy(b.graph);
  } else if (!st) {
    void *exec;
    st = DV(ex)->graph_instantiate(ex->rt, b.graph, gl->stream, &exec);
    if (!st) {
      DV(ex)->graph_exec_destroy(sg->exec);
      DV(ex)->graph_destroy(sg->graph);
      sg->exec = exec;
      sg->graph = b.graph;
      memcpy(&lw->nodes[sg->first], b.nodes, sizeof(void *) * sg->n);
      memcpy(&lw->colors[sg->first], b.colors, sg->n);
      *reinst = 1;
    } else {
      DV(ex)->graph_destroy(b.graph);
      st = rp__err_prefix(st,
                          "cudaGraphExecUpdate refused (%s), and "
                          "re-instantiating failed: ",
                          why);
    }
  }
  free(b.nodes);
  free(b.colors);
  return st;
}

/* Unit ui of a graph segment: re-capture, set its node in place, else
 * rebuild the segment. */
static rp_status update_node(rp_exec *ex, uint32_t ui, int *reinst) {
  rp_lower *lw = ex->lw;
  uint32_t k = lw->seg_of[ui], i = lw->midx[ui];
  rp_seg *sg = &lw->segs[k];
  const lower_streams *gs = lw->gpus[sg->gpu].streams;
  void *child;
  uint8_t c = lw->colors[sg->first + i]; /* same stream: same cuBLAS slice */
  rp_status st = capture_unit(ex, ui, gs->cap[c], &child);
  if (st)
    return st;
  const char *why = "";
  int ok = DV(ex)->graph_exec_set_child(ex->rt, sg->exec,
                                        lw->nodes[sg->first + i], child, &why);
  DV(ex)->graph_destroy(child);
  return ok ? RP_OK : rebuild_segment(ex, k, reinst);
}

rp_status rp__lower_update(rp_exec *ex, rp_op_id op, int *reinst) {
  rp_lower *lw = ex->lw;
  lower_rt *lr = lower_rt_get(ex);
  if (!lr)
    return rp__err(RP_ENOMEM, "rp_exec_update_args: out of memory");
  rp_status st = RP_OK;
  pthread_mutex_lock(&lr->lock);
  for (uint32_t ui = ex->op_first[op]; ui < ex->op_first[op + 1] && !st; ui++) {
    uint32_t k = lw->seg_of[ui];
    if (k == UINT32_MAX)
      continue; /* a CPU unit: its args are all it has */
    const rp_gpu_lane *gl = &lw->gpus[lw->segs[k].gpu];
    int prev;
    st = DV(ex)->device_enter(ex->rt, gl->device, &prev);
    if (st)
      break;
    st = update_params(ex, ui);
    if (!st && lw->segs[k].exec)
      st = update_node(ex, ui, reinst);
    DV(ex)->device_leave(gl->device, prev);
  }
  pthread_mutex_unlock(&lr->lock);
  return st ? rp__err_prefix(st, "rp_exec_update_args: op %u: ", op) : RP_OK;
}
