/* replay/lower_cuda.c — the device half of the CUDA lowering (see
 * lower.h): each exec's own streams, device parameter buffers, cross-GPU
 * events, capturing segments into CUDA graphs, launching them at every
 * replay, the host callbacks that report their completion, argument
 * updates, and destroy safety. Reaches CUDA only through the C wrappers of
 * engine/cuda/ (cuda_backend.h, cuda_graph.h). Without CUDA there can be
 * no GPU unit, and the entry points are stubs. */
#include "lower.h"

#ifdef REPRISE_HAVE_CUDA

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_graph.h"

#include <sched.h>
#include <string.h>
#include <time.h>

static void nap(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* Capture streams per GPU. cuBLAS gives every stream its own workspace
 * slice (kernels/cuda_kernels.cuh), and a captured GEMM keeps the slice of
 * the stream it was captured on: two nodes that may run concurrently must
 * therefore come from different capture streams. Each segment member gets
 * one of these streams ("color"); a member on the same color as an earlier
 * one, not already ordered after it, gets an extra edge, as stream order
 * would. 4: a 4-wide fork-join runs fully parallel. cuBLAS has 8 slices
 * per device, bound first come, first served: with several logical GPUs
 * or several execs alive on one device, streams beyond them run their
 * GEMMs without a workspace (correct, maybe slower; cuda_kernels.cuh). */
#define CAPTURE_STREAMS 4

/* ---- streams: each exec's own, leased from the runtime ---- */

/* One exec's streams on one GPU processor. The replay stream carries the
 * exec's segments (graph launches, op-by-op issue, parameter refreshes,
 * its host callbacks): replays of one exec stay in launch order on it, and
 * no other exec's work queues there. The capture streams are those its
 * graphs were captured on (and that updates re-capture on): cuBLAS binds a
 * workspace slice to the stream a GEMM is captured on, so an exec with
 * capture streams of its own never shares scratch memory with another
 * exec's GEMMs running at the same time on their own replay streams.
 *
 * A set belongs to one exec from its instantiate to its destroy. Destroy
 * syncs the replay stream and destroys the exec's graphs, then hands the
 * set back to the runtime, whose next instantiate on that processor takes
 * it again instead of creating streams: cuBLAS's slices (8 per device,
 * bound to stream handles for the life of the process) are then reused,
 * not exhausted by programs that instantiate many execs. The runtime
 * destroys every set when it is destroyed. */
typedef struct rp_lower_streams {
  void *replay; /* non-blocking: ignores the legacy default stream */
  void *done;   /* non-blocking: the completion side stream. A segment's
                   host function waits there (on an event recorded after
                   the segment's work), so the replay stream itself never
                   waits on the host: the next replay's graph starts while
                   the callback of this one is still on its way */
  void *cap[CAPTURE_STREAMS]; /* blocking: see rp__cuda_stream_create_
                                 blocking */
  uint32_t proc;
  struct rp_lower_streams *next_free; /* processor's free list */
  struct rp_lower_streams *next_all;  /* every set of the runtime */
} lower_streams;

typedef struct rp_lower_rt {
  pthread_mutex_t lock; /* leases and captures (instantiate, update, destroy
                           of execs with GPU ops) */
  uint32_t nprocs;
  lower_streams **free_sets; /* per processor: sets no exec holds */
  lower_streams *all;
  /* The GPU poller (see "completion by polling" below): one thread per
   * runtime, started by the first exec that may complete by polling. */
  pthread_mutex_t reg_lock; /* the registry (instantiate, destroy) */
  rp_exec **reg;            /* execs it polls */
  uint32_t nreg, capreg;
  rp_exec **snap; /* the poller's copy (poller only) */
  uint32_t capsnap;
  int started; /* under lock */
  pthread_t thread;
  RP_ALIGNED_LINE _Atomic uint64_t scan_seq; /* odd while scanning */
  RP_ALIGNED_LINE _Atomic uint32_t pending;  /* replay x GPU completions
                                                issued and not yet polled */
  _Atomic uint32_t sleeping;
  _Atomic uint32_t stop;
} lower_rt;

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
  (void)rp__cuda_stream_destroy(rt, ss->replay);
  (void)rp__cuda_stream_destroy(rt, ss->done);
  for (int c = 0; c < CAPTURE_STREAMS; c++)
    (void)rp__cuda_stream_destroy(rt, ss->cap[c]);
  free(ss);
}

static void poller_stop(lower_rt *lr);
static rp_status poller_register(lower_rt *lr, rp_exec *ex);

void rp__lower_rt_free(rp_runtime *rt, void *state) {
  lower_rt *lr = state;
  poller_stop(lr); /* every exec is gone: nothing left to poll */
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
  rp_status st = rp__cuda_stream_create(rt, p, &ss->replay);
  if (!st)
    st = rp__cuda_stream_create(rt, p, &ss->done);
  for (int c = 0; c < CAPTURE_STREAMS && !st; c++)
    st = rp__cuda_stream_create_blocking(rt, p, &ss->cap[c]);
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

/* Offsets of every GPU task unit's args in its GPU's buffer, and the
 * units whose args are interpolated per replay. */
static rp_status param_layout(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  for (uint32_t u = 0; u < lw->nop_units; u++) {
    rp_unit *x = &ex->units[u];
    if (lw->seg_of[u] == UINT32_MAX || x->kind != RP_UNIT_TASK)
      continue;
    rp_gpu_lane *gl = &lw->gpus[lw->gpu_of_lane[x->lane]];
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
      rp_gpu_lane *gl = &lw->gpus[lw->gpu_of_lane[x->lane]];
      const rp_task_rec *t = rp__task_get(ex->rt, ex->g->ops[x->op].task);
      gl->interp_checks[gl->ninterp_units] = t ? t->check_fn : NULL;
      gl->interp_units[gl->ninterp_units++] = u;
    }
  }
  return RP_OK;
}

/* Allocates one GPU's device buffer and staging slots, fills both with the
 * recorded args and points its units' contexts at their bytes. */
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
        x->lane != gl->lane)
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
    gl->device = rp__cuda_proc_device(ex->rt, gl->lane);
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
          rp__cuda_event_create(ex->rt, ex->units[u].lane, &lw->events[u]);
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

static const char *unit_label(const rp_unit *u) {
  return u->kind == RP_UNIT_COPY ? "copy" : u->name;
}

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
  int violation = 0, *saved = rp__tl_replay_violation;
  rp__tl_replay_violation = &violation;
  u->ctx.stream = stream;
  u->ctx.shards = u->max_shards;
  rp_status st = u->fn(&u->ctx);
  rp__tl_replay_violation = saved;
  if (violation)
    return rp__err(RP_ECONTRACT, "the task launched work or waited on an "
                                 "event while being captured");
  return st > 0 ? rp__err(RP_ETASK, "the task returned %d", (int)st) : st;
}

/* Captures unit ui into a new graph (*child, the caller's). A failure
 * names the op, its task and both the task's and CUDA's complaint. */
static rp_status capture_unit(rp_exec *ex, uint32_t ui, void *stream,
                              void **child) {
  rp_unit *u = &ex->units[ui];
  char task_why[256] = "";
  *child = NULL;
  rp__nvtx_push(unit_label(u));
  rp_status st = rp__cuda_capture_begin(ex->rt, stream);
  rp_status fst = RP_OK;
  if (st == RP_OK) {
    fst = capture_issue(u, stream);
    if (fst)
      snprintf(task_why, sizeof task_why, "%s", rp_error_detail());
    st = rp__cuda_capture_end(ex->rt, stream, child);
  }
  rp__nvtx_pop();
  if (fst == RP_OK && st == RP_OK)
    return RP_OK;
  char cuda_why[256] = "";
  if (st)
    snprintf(cuda_why, sizeof cuda_why, "%s", rp_error_detail());
  rp__cuda_graph_destroy(*child);
  *child = NULL;
  return rp__err(fst ? fst : st,
                 "op %u (%s) on GPU processor %u: capture "
                 "into a CUDA graph failed (a task must not allocate, "
                 "synchronize or use the legacy stream): %s%s%s",
                 u->op, unit_label(u), u->lane, task_why,
                 *task_why && *cuda_why ? "; " : "", cuda_why);
}

/* Why segment k cannot be one CUDA graph, or NULL. */
static const char *eager_reason(const rp_exec *ex, uint32_t k) {
  const rp_lower *lw = ex->lw;
  if (!lw->graphs)
    return "REPRISE_CUDA_GRAPHS=0";
  const rp_seg *sg = &lw->segs[k];
  for (uint32_t i = 0; i < sg->n; i++) {
    const rp_unit *u = &ex->units[lw->members[sg->first + i]];
    if (u->kind == RP_UNIT_COPY) {
      const rp_mem_info *m[2];
      rp_mem_info a, b;
      m[0] = rp_mem_query(ex->rt, u->xd->src_mem, &a) ? NULL : &a;
      m[1] = rp_mem_query(ex->rt, u->xd->dst_mem, &b) ? NULL : &b;
      for (int s = 0; s < 2; s++)
        if (m[s] && m[s]->kind == RP_MEM_SYSTEM)
          return "a copy touches pageable host memory";
      continue;
    }
    if (u->shards_src != SIZE_MAX)
      return "an op's shard count is interpolated";
    const char *why = rp__lower_task_blocker(ex->rt, &ex->g->ops[u->op]);
    if (why)
      return why;
  }
  return NULL;
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
  void *child;
  rp_status st = capture_unit(ex, ui, gs->cap[c], &child);
  if (st)
    return st;
  st = rp__cuda_graph_add_child(ex->rt, b->graph, b->deps, nd, child,
                                &b->nodes[i]);
  rp__cuda_graph_destroy(child);
  if (st)
    return rp__err_prefix(st, "op %u (%s): ", u->op, unit_label(u));
  b->colors[i] = c;
  tail[c] = i;
  if (lw->events[ui]) {
    void *rec;
    st = rp__cuda_graph_add_event_record(ex->rt, b->graph, &b->nodes[i], 1,
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
  b->deps = malloc(sizeof *b->deps * ((size_t)maxdeg + 2));
  if (!b->deps)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  rp_status st = rp__cuda_graph_create(ex->rt, &b->graph);
  uint32_t tail[CAPTURE_STREAMS], rr = 0;
  for (int c = 0; c < CAPTURE_STREAMS; c++)
    tail[c] = UINT32_MAX;
  for (uint32_t i = 0; i < sg->n && !st; i++)
    st = add_member(ex, k, i, gs, b, tail, &rr);
  free(b->deps);
  b->deps = NULL;
  if (st) {
    rp__cuda_graph_destroy(b->graph);
    b->graph = NULL;
  }
  return st;
}

/* Captures and instantiates segment k (device current: its GPU's). */
static rp_status segment_graph(rp_exec *ex, uint32_t k) {
  rp_lower *lw = ex->lw;
  rp_seg *sg = &lw->segs[k];
  rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  seg_build b = {NULL, &lw->nodes[sg->first], &lw->colors[sg->first], NULL};
  int prev;
  rp_status st = rp__cuda_device_enter(ex->rt, gl->device, &prev);
  if (st)
    return st;
  st = build_graph(ex, k, gl->streams, &b);
  if (!st) {
    sg->graph = b.graph;
    st = rp__cuda_graph_instantiate(ex->rt, sg->graph, gl->stream, &sg->exec);
    if (st)
      st = rp__err_prefix(st,
                          "instantiate: segment %u of GPU processor %u: "
                          "",
                          k, sg->lane);
  }
  rp__cuda_device_leave(gl->device, prev);
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
  st = rp__cuda_host_device_ptr(ex->rt, w, &dw);
  lw->words_dev = dw;
  for (uint32_t g = 0; g < lw->ngpu && !st; g++) {
    if (lw->gpus[g].group != g)
      continue;
    int prev;
    st = rp__cuda_device_enter(ex->rt, lw->gpus[g].device, &prev);
    if (st)
      return st;
    st = rp__cuda_stream_write_u32(ex->rt, lw->gpus[g].stream,
                                   lw->words_dev + g * sizeof(uint32_t), 0);
    if (!st)
      st = rp__cuda_stream_sync(ex->rt, lw->gpus[g].stream);
    rp__cuda_device_leave(lw->gpus[g].device, prev);
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
    rp_status st = rp__cuda_event_create(ex->rt, lw->gpus[i % lw->ngpu].lane,
                                         &lw->slot_events[i]);
    if (st)
      return rp__err_prefix(st, "instantiate: completion event: ");
  }
  /* One per segment (every segment: a re-placement may give any of them a
   * callback). Recorded after the segment's work and waited for on the
   * side stream right away, so one event serves every replay. */
  for (uint32_t k = 0; k < lw->nseg; k++) {
    rp_status st =
        rp__cuda_event_create(ex->rt, lw->segs[k].lane, &lw->done_events[k]);
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
    lw->segs[k].eager = eager_reason(ex, k);
    if (!lw->segs[k].eager)
      st = segment_graph(ex, k);
  }
  if (!st && lw->poll_ok)
    st = poller_register(lr, ex);
  pthread_mutex_unlock(&lr->lock);
  return st;
}

/* ---- replay: completion ---- */

static int reached(uint32_t v, uint32_t target) {
  return (int32_t)(v - target) >= 0;
}

/* Raises a GPU lane's progress to v (never lowers it: a direct publish
 * after a failure may overtake a late callback) and wakes sleepers. The
 * seq_cst CAS pairs with a consumer's seq_cst sleeper increment before its
 * last check (no lost wake-up), as the scheduler's publish() does. */
static void lane_publish(rp_lane *l, uint32_t v) {
  uint32_t cur = atomic_load(&l->progress);
  while (!reached(cur, v) &&
         !atomic_compare_exchange_weak(&l->progress, &cur, v))
    ;
  if (atomic_load(&l->sleepers))
    rp__futex_wake(&l->progress, 0x7fffffff);
}

/* What a segment's host function does: deliver postconditions, publish
 * the lane up to the segment's end, and at the GPU's last segment give
 * the slot its completion (exactly once: `owed` is exchanged). */
/* Segment sg of replay rel (slot s) completed on the device: deliver its
 * postconditions, publish its GPU lane up to the segment's end. */
static void seg_complete(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                         uint64_t rel) {
  rp_lower *lw = ex->lw;
  for (uint32_t i = 0; sg->any_post && i < sg->n; i++) {
    const rp_unit *u = &ex->units[lw->members[sg->first + i]];
    if (u->npost)
      rp__post_done(ex, u, s);
  }
  for (uint32_t i = 0; i < sg->npub; i++) {
    const rp_seg_pub *p = &lw->pubs[sg->pub_off + i];
    rp_lane *l = &ex->lanes[p->lane];
    lane_publish(l, (uint32_t)rel * l->len + p->end);
  }
}

static void seg_done_body(rp_seg_cb *c) {
  rp_exec *ex = c->ex;
  rp_lower *lw = ex->lw;
  /* acquire: pairs with the launcher's release store of rel, so the
   * members' statuses it wrote are visible to whoever waits on the lane */
  uint64_t rel = atomic_load_explicit(&c->rel, memory_order_acquire);
  const rp_seg *sg = &lw->segs[c->seg];
  rp_slot *s = &ex->slots[c->slot];
  seg_complete(ex, sg, s, rel);
  _Atomic uint64_t *owed = &lw->owed[(size_t)c->slot * lw->ngpu + sg->gpu];
  if (sg->last_of_gpu && atomic_exchange(owed, 0) != 0)
    rp__slot_sources_done(ex, s, lw->gpus[sg->gpu].nsrc);
}

/* ---- completion by polling ----
 *
 * A host function's latency is a wake-up of CUDA's callback thread (tens
 * of us on an H200), and in the replay stream it also holds back the next
 * replay. So an exec whose only host-visible completions are its GPUs'
 * last segments ends each replay's GPU work with an event record and no
 * host function; one poller thread per runtime queries those events in
 * stream order (cudaEventQuery, about 0.3 us) and completes the replays
 * whose events completed. It polls while such work is in flight, lingers
 * a little after the last completion (a training loop's next replay comes
 * soon), then sleeps on a futex the launchers wake. Exactly one of the
 * poller, a failing launcher and the lost-context rescue claims a replay's
 * completion (owed: CAS from r + 1 to 0). */

#define POLL_LINGER_NS 200000u /* spin after the last completion */
#define POLL_BUSY_NS 100000u   /* then yield between polls... */
#define POLL_SPACED_NS 2000u   /* between polls with several in flight */
#define POLL_NAP_NS                                                            \
  1000000u /* ...and past this nap 10 us (quiet                                \
              counts from the last completion or the                           \
              last new work, whichever is later) */

/* GPU g's last segment of replay r (slot index si) completed. */
static void gpu_done(rp_exec *ex, uint32_t g, uint32_t si, uint64_t rel) {
  rp_lower *lw = ex->lw;
  rp_slot *s = &ex->slots[si];
  seg_complete(ex, &lw->segs[lw->last_seg[g]], s, rel);
  rp__slot_sources_done(ex, s, lw->gpus[g].nsrc);
}

/* Completes ex's replays whose GPU work finished, per GPU in replay
 * order; the number completed. Poller thread only. */
static uint32_t poll_exec(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint32_t n = 0;
  for (uint32_t g = 0; g < lw->ngpu; g++)
    for (;;) {
      uint64_t r = lw->next_r[g];
      /* replays completed already (the callback path of an earlier
       * placement, a failure, a rescue): skip past them */
      uint32_t ahead = atomic_load(&ex->done_seq) - (uint32_t)r;
      if ((int32_t)ahead > 0) {
        lw->next_r[g] = r + ahead;
        continue;
      }
      uint32_t si = (uint32_t)(r % ex->max_inflight);
      size_t i = (size_t)si * lw->ngpu + g;
      /* acquire: pairs with the launcher's release of launched */
      uint64_t l = atomic_load_explicit(&lw->launched[i], memory_order_acquire);
      if (l <= r)
        break; /* replay r has not issued this GPU's work yet */
      uint64_t want = r + 1;
      if (l == want && atomic_load(&lw->owed[i]) == want) {
        if (lw->by_word[i]
                ? atomic_load_explicit((_Atomic uint32_t *)&lw->words[i],
                                       memory_order_acquire) != (uint32_t)want
                : rp__cuda_device_use(ex->rt, lw->gpus[g].device) != RP_OK ||
                      rp__cuda_event_done(ex->rt, lw->slot_events[i]) <= 0)
          break; /* still running (an error: quiesce rescues) */
        if (atomic_compare_exchange_strong(&lw->owed[i], &want, 0)) {
          gpu_done(ex, g, si, lw->rel_of[i]);
          atomic_fetch_sub(&lw->lr->pending, 1);
          n++;
        }
      }
      lw->next_r[g] = r + 1; /* done, by us or by someone else */
    }
  return n;
}

/* One pass over the registry (a snapshot taken under reg_lock; scan_seq
 * odd meanwhile, so that a destroyer can wait the pass out). */
static uint32_t poll_all(lower_rt *lr) {
  pthread_mutex_lock(&lr->reg_lock); /* the poller's side, not a replay's */
  uint32_t n = lr->nreg;
  if (n > lr->capsnap) {
    rp_exec **g = realloc(lr->snap, sizeof *g * n);
    if (!g)
      n = lr->capsnap; /* poll what fits; the rest on a later pass */
    else
      lr->snap = g, lr->capsnap = n;
  }
  if (n)
    memcpy(lr->snap, lr->reg, sizeof *lr->snap * n);
  atomic_fetch_add(&lr->scan_seq, 1);
  pthread_mutex_unlock(&lr->reg_lock);
  uint32_t done = 0;
  for (uint32_t i = 0; i < n; i++)
    done += poll_exec(lr->snap[i]);
  atomic_fetch_add(&lr->scan_seq, 1);
  return done;
}

static void *poller_main(void *arg) {
  lower_rt *lr = arg;
  uint64_t quiet_from = 0;
  uint32_t seen = 0; /* pending at the last pass */
  while (!atomic_load(&lr->stop)) {
    if (poll_all(lr)) {
      quiet_from = 0;
      seen = atomic_load(&lr->pending);
      continue;
    }
    uint32_t pending = atomic_load(&lr->pending);
    uint64_t now = rp__now_ns();
    if (!quiet_from || pending > seen) /* new work restarts the clock */
      quiet_from = now;
    seen = pending;
    uint64_t quiet = now - quiet_from;
    if (pending) { /* work in flight: keep polling */
      if (quiet < POLL_BUSY_NS && pending == 1)
        for (int i = 0; i < 8; i++) /* about 0.3 us between polls */
          rp__cpu_relax();
      else if (quiet < POLL_BUSY_NS) /* several in flight: the next is a
                                        replay away; each event query
                                        takes the driver lock the
                                        launching thread needs */
        while (rp__now_ns() - now < POLL_SPACED_NS)
          rp__cpu_relax();
      else if (quiet < POLL_NAP_NS)
        sched_yield();
      else
        nap(10000);
      continue;
    }
    if (quiet < POLL_LINGER_NS) {
      sched_yield();
      continue;
    }
    /* Asleep until a launcher issues work. seq_cst: pairs with
     * poller_kick's increment, then load of `sleeping` (no lost wake). */
    atomic_store(&lr->sleeping, 1);
    if (!atomic_load(&lr->pending) && !atomic_load(&lr->stop))
      rp__futex_wait(&lr->pending, 0, -1);
    atomic_store(&lr->sleeping, 0);
    quiet_from = 0;
  }
  return NULL;
}

static void poller_kick(lower_rt *lr) {
  atomic_fetch_add(&lr->pending, 1);
  if (atomic_load(&lr->sleeping))
    rp__futex_wake(&lr->pending, 1);
}

static void poller_stop(lower_rt *lr) {
  if (!lr->started)
    return;
  atomic_store(&lr->stop, 1);
  rp__futex_wake(&lr->pending, 1);
  pthread_join(lr->thread, NULL);
  lr->started = 0;
}

/* Adds ex to the registry, starting the thread on first use (lr->lock
 * held: instantiate). */
static rp_status poller_register(lower_rt *lr, rp_exec *ex) {
  if (!lr->started) {
    if (pthread_create(&lr->thread, NULL, poller_main, lr) != 0)
      return rp__err(RP_ENOMEM, "instantiate: cannot start the GPU "
                                "poller thread");
    lr->started = 1;
  }
  pthread_mutex_lock(&lr->reg_lock);
  rp_status st = RP_OK;
  if (lr->nreg == lr->capreg) {
    uint32_t cap = lr->capreg ? 2 * lr->capreg : 8;
    rp_exec **g = realloc(lr->reg, sizeof *g * cap);
    if (g)
      lr->reg = g, lr->capreg = cap;
    else
      st = rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  if (!st)
    lr->reg[lr->nreg++] = ex;
  pthread_mutex_unlock(&lr->reg_lock);
  return st;
}

/* Removes ex (quiesced) and waits out a pass that may still look at it. */
static void poller_unregister(lower_rt *lr, rp_exec *ex) {
  pthread_mutex_lock(&lr->reg_lock);
  int found = 0;
  for (uint32_t i = 0; i < lr->nreg && !found; i++)
    if (lr->reg[i] == ex) {
      lr->reg[i] = lr->reg[--lr->nreg];
      found = 1;
    }
  uint64_t seq = atomic_load(&lr->scan_seq);
  pthread_mutex_unlock(&lr->reg_lock);
  if (!found || !(seq & 1))
    return;
  while (atomic_load(&lr->scan_seq) == seq)
    sched_yield();
}

/* Runs on CUDA's callback thread once the segment's work completed. It
 * makes no CUDA call and never blocks (completion is non-blocking, see
 * scheduler.c complete()). */
static void seg_done(void *arg) {
  rp_seg_cb *c = arg;
  rp_lower *lw = c->ex->lw;
  seg_done_body(c);
  /* release: everything this callback did happens before a destroyer that
   * sees the count reach zero frees the exec. The last touch of it. */
  atomic_fetch_sub_explicit(&lw->cb_pending, 1, memory_order_release);
}

/* The GPU's last segment of replay s->r, under polling: an event record
 * after its work, then the poller is told (see above). When CUDA refuses
 * the record, the members fail and the replay completes here. */
static void signal_polled(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                          uint32_t slot, uint64_t rel) {
  rp_lower *lw = ex->lw;
  size_t i = (size_t)slot * lw->ngpu + sg->gpu;
  const rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  lw->rel_of[i] = rel; /* published by the release of launched */
  atomic_store_explicit(&lw->owed[i], s->r + 1, memory_order_relaxed);
  /* issue_segment made the device current, unless the replay is stale */
  rp_status st = s->stale ? rp__cuda_device_use(ex->rt, gl->device) : RP_OK;
  /* alone in flight (no earlier replay incomplete): the word */
  uint8_t word =
      lw->words && atomic_load_explicit(&ex->done_seq, memory_order_relaxed) ==
                       (uint32_t)s->r;
  lw->by_word[i] = word; /* published by the release of launched */
  if (!st)
    st = word ? rp__cuda_stream_write_u32(ex->rt, gl->stream,
                                          lw->words_dev + i * sizeof(uint32_t),
                                          (uint32_t)(s->r + 1))
              : rp__cuda_event_record(ex->rt, lw->slot_events[i], gl->stream);
  if (st == RP_OK) {
    /* release: the slot's statuses, rel and owed before the poller */
    atomic_store_explicit(&lw->launched[i], s->r + 1, memory_order_release);
    poller_kick(lw->lr);
    return;
  }
  for (uint32_t j = 0; j < sg->n; j++) {
    uint32_t m = lw->members[sg->first + j];
    if (!s->unit_status[m])
      rp__unit_failed(ex, s, m, st, "could not record its completion");
  }
  uint64_t want = s->r + 1;
  if (atomic_compare_exchange_strong(&lw->owed[i], &want, 0))
    gpu_done(ex, sg->gpu, slot, rel);
}

/* Enqueues segment k's host function after its work, on the GPU's
 * completion side stream (event record on the replay stream, event wait
 * and host function on the side stream: nothing in the replay stream
 * waits on the host), or, when CUDA refuses, runs it here. */
static void signal_segment(rp_exec *ex, uint32_t k, rp_slot *s, uint32_t slot,
                           uint64_t rel) {
  rp_lower *lw = ex->lw;
  const rp_seg *sg = &lw->segs[k];
  if (!sg->needs_cb)
    return;         /* a later segment's callback publishes past it */
  if (lw->polled) { /* sg is its GPU's last segment (rp__lower_placed) */
    signal_polled(ex, sg, s, slot, rel);
    return;
  }
  rp_seg_cb *c = &lw->cbs[(size_t)slot * lw->nseg + k];
  if (sg->last_of_gpu) /* relaxed: published by the release below */
    atomic_store_explicit(&lw->owed[(size_t)slot * lw->ngpu + sg->gpu],
                          s->r + 1, memory_order_relaxed);
  /* release: what the launcher did (statuses) happens before the callback */
  atomic_store_explicit(&c->rel, rel, memory_order_release);
  /* seq_cst: a quiescing host that reads zero saw no enqueue in flight */
  atomic_fetch_add(&lw->cb_pending, 1);
  const rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  rp_status st = rp__cuda_device_use(ex->rt, gl->device);
  void *ev = lw->done_events[k], *side = gl->streams->done;
  if (!st)
    st = rp__cuda_event_record(ex->rt, ev, gl->stream);
  if (!st)
    st = rp__cuda_stream_wait_event(ex->rt, side, ev);
  if (!st)
    st = rp__cuda_launch_host_func(ex->rt, side, seg_done, c);
  if (st == RP_OK) {
    rp__count(&lw->n_callbacks, 1);
    return;
  }
  atomic_fetch_sub(&lw->cb_pending, 1);
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t m = lw->members[sg->first + i];
    if (!s->unit_status[m])
      rp__unit_failed(ex, s, m, st, "could not enqueue its completion");
  }
  seg_done_body(c);
}

/* ---- replay: launch ---- */

/* The first poisoned precondition of u (the launcher blocked on all of
 * them already, so they are complete). */
static rp_status port_status(const rp_exec *ex, const rp_unit *u,
                             const rp_slot *s) {
  for (uint32_t i = 0; i < u->nport; i++) {
    rp_status st = rp__event_peek(ex->rt, s->pre[ex->ports[u->port_off + i]]);
    if (st)
      return st;
  }
  return RP_OK;
}

/* Blocks until each of the segment's preconditions completed; the first
 * poison, else RP_OK. Device work waiting on a port is never issued
 * before the port triggered. */
static rp_status wait_ports(rp_exec *ex, const rp_unit *l, rp_slot *s) {
  rp_status first = RP_OK;
  for (uint32_t i = 0; i < l->nport; i++) {
    rp_status st = rp__event_block(ex->rt, s->pre[ex->ports[l->port_off + i]]);
    if (st && !first)
      first = st;
  }
  return first;
}

/* 1 when some member inherits a failure (then it is issued op by op). */
static int members_poisoned(const rp_exec *ex, const rp_seg *sg,
                            const rp_slot *s) {
  if (!atomic_load_explicit(&s->any_fail, memory_order_relaxed))
    return 0;
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t ui = ex->lw->members[sg->first + i];
    if (s->unit_status[ui] || rp__pred_status(ex, &ex->units[ui], s))
      return 1;
  }
  return 0;
}

/* Copies this replay's interpolated values into its staging slot (and
 * the units' host args, for op-by-op issue), then the slot into the
 * device buffer, in stream order before the GPU's first segment. */
static rp_status refresh_params(rp_exec *ex, rp_gpu_lane *gl, rp_slot *s,
                                uint32_t slot, void *stream) {
  if (!gl->ninterp_units)
    return RP_OK;
  char *stg = gl->staging + (size_t)slot * gl->param_bytes;
  for (uint32_t i = 0; i < gl->ninterp_units; i++) {
    uint32_t ui = gl->interp_units[i];
    rp_unit *u = &ex->units[ui];
    for (uint32_t k = 0; k < u->ninterp; k++) {
      const rp_interp *ip = &u->interps[k];
      if (ip->dst_offset == RP_INTERP_SHARDS)
        continue;
      memcpy(stg + ex->lw->param_off[ui] + ip->dst_offset,
             s->args + ip->src_offset, ip->bytes);
      memcpy(u->args + ip->dst_offset, s->args + ip->src_offset, ip->bytes);
    }
    /* the task's host-side check of this replay's values: a bad one fails
     * the op (and poisons its successors) instead of reaching the device */
    rp_task_fn check = gl->interp_checks[i];
    rp_status cst = check && !s->unit_status[ui] ? check(&u->ctx) : RP_OK;
    if (RP_UNLIKELY(cst != RP_OK))
      rp__unit_failed(ex, s, ui, cst > 0 ? RP_ETASK : cst, rp_error_detail());
  }
  /* The staging slot is this replay's alone: the slot is re-armed only
   * after this replay completed, so the copy has run by then. */
  return rp__cuda_memcpy_async(ex->rt, gl->dev_params, stg, gl->param_bytes,
                               stream);
}

/* Every logical GPU of group g (g its leader), on the leader's stream. */
static rp_status refresh_group(rp_exec *ex, uint32_t g, rp_slot *s,
                               uint32_t slot) {
  rp_lower *lw = ex->lw;
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < lw->ngpu && !st; i++)
    if (lw->gpus[i].group == g)
      st = refresh_params(ex, &lw->gpus[i], s, slot, lw->gpus[g].stream);
  return st;
}

/* Other GPUs' producers: stream-level waits before the segment (the
 * event's last record was issued by an earlier launch, see lower.h). */
static rp_status wait_events(rp_exec *ex, const rp_seg *sg,
                             const rp_gpu_lane *gl) {
  for (uint32_t i = 0; i < sg->nev; i++) {
    rp_status st = rp__cuda_stream_wait_event(
        ex->rt, gl->stream, ex->lw->seg_events[sg->ev_off + i]);
    if (st)
      return st;
  }
  return RP_OK;
}

/* Issues a task unit on the stream, as run_task does on a CPU lane. */
static rp_status issue_task(rp_unit *u, rp_slot *s, void *stream, int *skip,
                            const char **why) {
  uint32_t shards = rp__unit_shards(u, s);
  if (!shards) {
    *skip = 1; /* this replay runs fewer shards: not a failure */
    return RP_OK;
  }
  u->ctx.shards = shards;
  u->ctx.stream = stream;
  int *violation = rp__tl_replay_violation;
  rp_status st = u->fn(&u->ctx);
  if (violation && *violation) {
    *violation = 0;
    *why = "task launched work or waited on an event inside a replay";
    return RP_ECONTRACT;
  }
  return st > 0 ? RP_ETASK : st;
}

static rp_status issue_unit(rp_exec *ex, uint32_t ui, rp_slot *s,
                            const rp_gpu_lane *gl, int *skip,
                            const char **why) {
  rp_unit *u = &ex->units[ui];
  rp_status st;
  rp__nvtx_push(unit_label(u));
  if (u->kind == RP_UNIT_COPY) {
    st = rp_xfer_check(u->xd);
    if (!st) {
      rp_xfer_reset(u->xd);
      st = rp_xfer_run_stream(u->xd, gl->stream);
    }
  } else {
    st = issue_task(u, s, gl->stream, skip, why);
  }
  if (!st && !*skip && ex->lw->events[ui])
    st = rp__cuda_event_record(ex->rt, ex->lw->events[ui], gl->stream);
  if (st && !*why)
    *why = rp_error_detail();
  rp__nvtx_pop();
  return st;
}

typedef struct issue_count {
  uint64_t run, skipped;
} issue_count;

/* Op by op on the GPU's stream, in topological order, skipping members
 * whose precondition or predecessor failed (failures of this segment's
 * own members propagate as they happen). */
static void issue_members(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                          const rp_gpu_lane *gl, issue_count *n) {
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t ui = ex->lw->members[sg->first + i];
    const rp_unit *u = &ex->units[ui];
    if (RP_UNLIKELY(s->unit_status[ui])) { /* failed its args check */
      n->skipped++;
      continue;
    }
    const char *why = "precondition poisoned";
    rp_status st = port_status(ex, u, s);
    if (!st && atomic_load_explicit(&s->any_fail, memory_order_relaxed)) {
      why = "upstream op failed";
      st = rp__pred_status(ex, u, s);
    }
    if (st) {
      rp__unit_failed(ex, s, ui, st, why);
      n->skipped++;
      continue;
    }
    int skip = 0;
    why = NULL;
    st = issue_unit(ex, ui, s, gl, &skip, &why);
    if (st)
      rp__unit_failed(ex, s, ui, st, why);
    n->run += !skip;
  }
}

/* A CUDA call failed before the segment was issued: every member not yet
 * failed fails with it. */
static void fail_members(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                         rp_status st, issue_count *n) {
  char why[256];
  snprintf(why, sizeof why, "%s", rp_error_detail());
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t ui = ex->lw->members[sg->first + i];
    if (!s->unit_status[ui]) {
      rp__unit_failed(ex, s, ui, st, why);
      n->skipped++;
    }
  }
}

/* ---- traces: device times of traced replays ---- */

struct rp_lower_trace {
  uint64_t from; /* replays [from, from + n) */
  uint32_t n;
  void **ev;         /* [((r - from) * nseg + k) * 2 + 0 / 1]: timed events
                        recorded before / after segment k's work */
  uint8_t *how;      /* [(r - from) * nseg + k]: 0 not recorded, 1 graph,
                        2 op by op; written by the launcher, read after
                        quiesce (the launcher's lane completes the replay
                        after it: release/acquire through done_seq) */
  void **base;       /* per GPU: the reference event */
  uint64_t *base_ns; /* per GPU: host clock when it had completed */
};

/* The event pair of segment sg in traced slot s, or NULL. */
static void **trace_pair(rp_exec *ex, const rp_seg *sg, const rp_slot *s,
                         uint8_t **how) {
  struct rp_lower_trace *t = ex->lw->trace;
  if (!t || s->r < t->from || s->r - t->from >= t->n)
    return NULL;
  size_t i =
      (size_t)(s->r - t->from) * ex->lw->nseg + (size_t)(sg - ex->lw->segs);
  *how = &t->how[i];
  return &t->ev[2 * i];
}

/* Issues the segment's work for one replay (not stale). A traced replay
 * brackets it with its two timing events (their failure fails nothing:
 * the trace then shows the host times only). */
static void issue_segment(rp_exec *ex, const rp_seg *sg, rp_slot *s,
                          uint32_t slot, rp_status ports, issue_count *n) {
  rp_lower *lw = ex->lw;
  rp_gpu_lane *gl = &lw->gpus[sg->gpu];
  uint8_t *how = NULL;
  void **tev = RP_UNLIKELY(s->traced) ? trace_pair(ex, sg, s, &how) : NULL;
  rp_status st = rp__cuda_device_use(ex->rt, gl->device);
  if (!st && sg->first_of_gpu)
    st = refresh_group(ex, sg->gpu, s, slot);
  /* The fast path: one graph launch, nothing to skip (decided after the
   * refresh: its args checks may fail members). */
  int graph = sg->exec && ports == RP_OK && !members_poisoned(ex, sg, s);
  if (!st)
    st = wait_events(ex, sg, gl);
  if (!st)
    rp__count(&lw->n_stream_waits, sg->nev);
  if (tev && !st && rp__cuda_event_record(ex->rt, tev[0], gl->stream))
    tev = NULL;
  if (!st && graph) {
    st = rp__cuda_graph_launch(ex->rt, sg->exec, gl->stream);
    if (!st) {
      n->run += sg->n;
      rp__count(&lw->n_graph_launches, 1);
    }
  } else if (!st) {
    uint64_t before = n->run;
    issue_members(ex, sg, s, gl, n);
    rp__count(&lw->n_op_by_op, n->run - before);
  }
  if (st)
    fail_members(ex, sg, s, st, n);
  else if (tev && !rp__cuda_event_record(ex->rt, tev[1], gl->stream))
    *how = graph ? 1 : 2;
}

/* A traced replay's result of the segment: its members' first failure. */
static rp_status seg_status(const rp_exec *ex, const rp_seg *sg,
                            const rp_slot *s) {
  if (s->stale)
    return RP_ESTALE;
  if (!atomic_load_explicit(&s->any_fail, memory_order_relaxed))
    return RP_OK;
  for (uint32_t i = 0; i < sg->n; i++) {
    int32_t st = s->unit_status[ex->lw->members[sg->first + i]];
    if (st)
      return (rp_status)st;
  }
  return RP_OK;
}

rp_status rp__lower_launch(rp_exec *ex, uint32_t ui, rp_slot *s, uint64_t rel,
                           uint64_t *t_issue) {
  rp_lower *lw = ex->lw;
  uint32_t k = lw->seg_of[ui];
  const rp_seg *sg = &lw->segs[k];
  uint32_t slot = (uint32_t)(s - ex->slots);
  rp__nvtx_push("reprise.segment");
  /* host dependencies of the members, this replay's and the previous */
  for (uint32_t i = 0; i < sg->nwait; i++)
    rp__lane_wait(ex, &lw->waits[sg->wait_off + i], rel);
  rp_status ports = wait_ports(ex, &ex->units[ui], s);
  if (sg->nwait | ex->units[ui].nport | ex->units[ui].nwait)
    rp__count(&lw->n_host_waits,
              sg->nwait + ex->units[ui].nport + ex->units[ui].nwait);
  int traced = s->traced;
  if (RP_UNLIKELY(traced) && t_issue)
    *t_issue = rp__now_ns();
  for (uint32_t i = 0; i < sg->npub; i++) /* rp_ctx_replay of tasks
                                              issued op by op */
    ex->lanes[lw->pubs[sg->pub_off + i].lane].cur_replay = s->r;
  rp_lane *l = &ex->lanes[sg->lane];
  issue_count n = {0, 0};
  if (!s->stale)
    issue_segment(ex, sg, s, slot, ports, &n);
  else
    n.skipped = sg->n; /* as CPU lanes count a stale replay's units */
  /* GPU lanes are written by their launchers only (one lane each) */
  atomic_fetch_add_explicit(&l->ops_run, n.run, memory_order_relaxed);
  atomic_fetch_add_explicit(&l->ops_skipped, n.skipped, memory_order_relaxed);
  signal_segment(ex, k, s, slot, rel);
  rp__nvtx_pop();
  /* the slot stays this replay's until this launcher's lane finished it */
  return RP_UNLIKELY(traced) ? seg_status(ex, sg, s) : RP_OK;
}

int rp__lower_device_save(rp_exec *ex) {
  int prev = -1; /* makes the first GPU's device current, as a launch will */
  return rp__cuda_device_enter(ex->rt, ex->lw->gpus[0].device, &prev) == RP_OK
             ? prev
             : -1;
}

void rp__lower_device_restore(rp_exec *ex, int dev) {
  if (dev >= 0)
    (void)rp__cuda_device_use(ex->rt, dev);
}

/* ---- quiesce and destroy safety ---- */

/* 1 when the CUDA context is lost (a sticky error, found by polling the
 * exec's streams: a device fault surfaces on the next call). */
static int context_lost(rp_exec *ex) {
  for (uint32_t i = 0; i < ex->lw->ngpu; i++)
    if (ex->lw->gpus[i].stream)
      (void)rp__cuda_stream_poll(ex->rt, ex->lw->gpus[i].stream);
  return rp__runtime_check(ex->rt) != RP_OK;
}

/* After a lost context CUDA runs no more host functions: publish every
 * GPU lane past the replays in flight (so that host units waiting on them
 * finish their lanes) and give each in-flight replay the completions its
 * callbacks owe, with RP_EUNUSABLE. */
static void rescue(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint64_t end = ex->issued - ex->epoch + 1;
  for (uint32_t i = 0; i < lw->ngpu; i++) {
    rp_lane *l = &ex->lanes[lw->gpus[i].lane];
    lane_publish(l, (uint32_t)end * l->len);
  }
  /* done_seq counts replays modulo 2^32 */
  uint32_t inflight = (uint32_t)ex->issued - atomic_load(&ex->done_seq);
  for (uint64_t r = ex->issued - inflight; r < ex->issued; r++) {
    rp_slot *s = &ex->slots[r % ex->max_inflight];
    int32_t zero = 0;
    atomic_compare_exchange_strong(&s->status, &zero, (int32_t)RP_EUNUSABLE);
    for (uint32_t g = 0; g < lw->ngpu; g++) {
      size_t i = (r % ex->max_inflight) * lw->ngpu + g;
      if (atomic_exchange(&lw->owed[i], 0) == 0)
        continue;
      if (atomic_load(&lw->launched[i]) == r + 1) /* the poller's count */
        atomic_fetch_sub(&lw->lr->pending, 1);
      rp__slot_sources_done(ex, s, lw->gpus[g].nsrc);
    }
  }
}

int rp__lower_quiesce(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint64_t last = rp__now_ns(), rescued_at = 0;
  rp_backoff b = RP_BACKOFF_HOST;
  for (;;) {
    /* acquire: pairs with the callbacks' release decrement */
    int idle = atomic_load(&ex->done_seq) == (uint32_t)ex->issued &&
               atomic_load_explicit(&lw->cb_pending, memory_order_acquire) == 0;
    if (idle && !rescued_at)
      return 0;
    uint64_t now = rp__now_ns();
    if (rescued_at && (idle || now - rescued_at > 2000000000ull))
      return 1; /* callbacks may never run: the exec is leaked */
    if (!rescued_at && now - last > 1000000) {
      last = now;
      if (context_lost(ex)) {
        rescue(ex);
        rescued_at = now;
      }
    }
    if (!rp__backoff(&b))
      nap(50000); /* destroy path: a sleep, not a futex */
  }
}

/* ---- traces: arming and reading ---- */

static void trace_destroy(rp_runtime *rt, struct rp_lower_trace *t, size_t nev,
                          uint32_t ngpu) {
  for (size_t i = 0; t->ev && i < nev; i++)
    (void)rp__cuda_event_destroy(rt, t->ev[i]);
  for (uint32_t i = 0; t->base && i < ngpu; i++)
    (void)rp__cuda_event_destroy(rt, t->base[i]);
  free(t->ev);
  free(t->how);
  free(t->base);
  free(t->base_ns);
  free(t);
}

void rp__lower_trace_free(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  if (!lw || !lw->trace)
    return;
  trace_destroy(ex->rt, lw->trace, (size_t)lw->trace->n * lw->nseg * 2,
                lw->ngpu);
  lw->trace = NULL;
}

/* GPU i's reference: recorded on the exec's replay stream and waited for;
 * the host clock read right after stands for its device time (late by the
 * host's wake-up, a few us). Work already queued there is waited for too:
 * no traced replay is in flight yet. */
static rp_status trace_base(rp_exec *ex, struct rp_lower_trace *t, uint32_t i) {
  const rp_gpu_lane *gl = &ex->lw->gpus[i];
  rp_status st = rp__cuda_event_create_timed(ex->rt, gl->lane, &t->base[i]);
  int prev;
  if (!st && !(st = rp__cuda_device_enter(ex->rt, gl->device, &prev))) {
    st = rp__cuda_event_record(ex->rt, t->base[i], gl->stream);
    if (!st)
      st = rp__cuda_event_sync(ex->rt, t->base[i]);
    rp__cuda_device_leave(gl->device, prev);
  }
  t->base_ns[i] = rp__now_ns();
  return st;
}

rp_status rp__lower_trace_start(rp_exec *ex, uint64_t from, uint32_t n) {
  rp_lower *lw = ex->lw;
  uint64_t nrec = (uint64_t)n * lw->nseg;
  if (nrec > RP_LOWER_TRACE_MAX_SEGS)
    return rp__err(RP_ERANGE,
                   "rp_exec_trace_start: %u replays of %u GPU segments "
                   "need %llu pairs of CUDA events (at most %u)",
                   n, lw->nseg, (unsigned long long)nrec,
                   RP_LOWER_TRACE_MAX_SEGS);
  struct rp_lower_trace *t = rp__calloc(1, sizeof *t);
  if (!t)
    return rp__err(RP_ENOMEM, "rp_exec_trace_start: out of memory");
  t->from = from;
  t->n = n;
  t->ev = rp__calloc((size_t)nrec * 2 + 1, sizeof *t->ev);
  t->how = rp__calloc((size_t)nrec + 1, 1);
  t->base = rp__calloc(lw->ngpu + 1, sizeof *t->base);
  t->base_ns = rp__calloc(lw->ngpu + 1, sizeof *t->base_ns);
  rp_status st = t->ev && t->how && t->base && t->base_ns
                     ? RP_OK
                     : rp__err(RP_ENOMEM, "rp_exec_trace_start: out of "
                                          "memory");
  for (uint64_t i = 0; i < nrec * 2 && !st; i++)
    st = rp__cuda_event_create_timed(ex->rt, lw->segs[(i / 2) % lw->nseg].lane,
                                     &t->ev[i]);
  for (uint32_t i = 0; i < lw->ngpu && !st; i++)
    st = trace_base(ex, t, i);
  if (st) {
    trace_destroy(ex->rt, t, (size_t)nrec * 2, lw->ngpu);
    return rp__err_prefix(st, "rp_exec_trace_start: CUDA events: ");
  }
  /* published to the launchers with ex->trace (see rp_exec_trace_start) */
  lw->trace = t;
  return RP_OK;
}

int rp__lower_trace_span(rp_exec *ex, uint64_t r, uint32_t k, uint64_t *t0,
                         uint64_t *t1, const char **how) {
  rp_lower *lw = ex->lw;
  struct rp_lower_trace *t = lw ? lw->trace : NULL;
  if (!t || r < t->from || r - t->from >= t->n || k >= lw->nseg)
    return 0;
  size_t i = (size_t)(r - t->from) * lw->nseg + k;
  uint32_t g = lw->segs[k].gpu;
  float a = 0, b = 0;
  if (!t->how[i] ||
      rp__cuda_event_elapsed_ms(ex->rt, t->base[g], t->ev[2 * i], &a) ||
      rp__cuda_event_elapsed_ms(ex->rt, t->base[g], t->ev[2 * i + 1], &b))
    return 0;
  /* float ms: about 0.5 us resolution over the first seconds of a trace */
  *t0 = t->base_ns[g] + (uint64_t)(a > 0 ? (double)a * 1e6 : 0.0);
  *t1 = t->base_ns[g] + (uint64_t)(b > 0 ? (double)b * 1e6 : 0.0);
  if (*t1 < *t0)
    *t1 = *t0;
  *how = t->how[i] == 1 ? "graph" : "op by op";
  return 1;
}

/* ---- free ---- */

void rp__lower_free(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  if (lw->lr)
    poller_unregister(lw->lr, ex); /* first: the poller reads the exec */
  int usable = rp__runtime_check(ex->rt) == RP_OK;
  rp__lower_trace_free(ex); /* events: released once their work is done */
  for (uint32_t i = 0; usable && i < lw->ngpu; i++)
    if (lw->gpus[i].stream) { /* uploads, the last replay's work and its
                                 completion */
      (void)rp__cuda_stream_sync(ex->rt, lw->gpus[i].stream);
      (void)rp__cuda_stream_sync(ex->rt, lw->gpus[i].streams->done);
    }
  for (uint32_t k = 0; lw->segs && k < lw->nseg; k++) {
    rp__cuda_graph_exec_destroy(lw->segs[k].exec);
    rp__cuda_graph_destroy(lw->segs[k].graph);
  }
  for (uint32_t u = 0; lw->events && u < lw->nop_units; u++)
    (void)rp__cuda_event_destroy(ex->rt, lw->events[u]);
  for (uint32_t k = 0; lw->done_events && k < lw->nseg; k++)
    (void)rp__cuda_event_destroy(ex->rt, lw->done_events[k]);
  for (size_t i = 0; lw->slot_events && i < (size_t)ex->max_inflight * lw->ngpu;
       i++)
    (void)rp__cuda_event_destroy(ex->rt, lw->slot_events[i]);
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
  rp_gpu_lane *gl = &lw->gpus[lw->gpu_of_lane[u->lane]];
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
  seg_build b = {NULL, malloc(sizeof(void *) * sg->n), malloc(sg->n), NULL};
  rp_status st = b.nodes && b.colors
                     ? build_graph(ex, k, gl->streams, &b)
                     : rp__err(RP_ENOMEM, "rp_exec_update_args: out of "
                                          "memory");
  const char *why = "";
  if (!st && rp__cuda_graph_exec_update(ex->rt, sg->exec, b.graph, &why)) {
    /* node handles stay those of the graph the exec was made from */
    rp__cuda_graph_destroy(b.graph);
  } else if (!st) {
    void *exec;
    st = rp__cuda_graph_instantiate(ex->rt, b.graph, gl->stream, &exec);
    if (!st) {
      rp__cuda_graph_exec_destroy(sg->exec);
      rp__cuda_graph_destroy(sg->graph);
      sg->exec = exec;
      sg->graph = b.graph;
      memcpy(&lw->nodes[sg->first], b.nodes, sizeof(void *) * sg->n);
      memcpy(&lw->colors[sg->first], b.colors, sg->n);
      *reinst = 1;
    } else {
      rp__cuda_graph_destroy(b.graph);
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
  int ok = rp__cuda_graph_exec_set_child(ex->rt, sg->exec,
                                         lw->nodes[sg->first + i], child, &why);
  rp__cuda_graph_destroy(child);
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
    st = rp__cuda_device_enter(ex->rt, gl->device, &prev);
    if (st)
      break;
    st = update_params(ex, ui);
    if (!st && lw->segs[k].exec)
      st = update_node(ex, ui, reinst);
    rp__cuda_device_leave(gl->device, prev);
  }
  pthread_mutex_unlock(&lr->lock);
  return st ? rp__err_prefix(st, "rp_exec_update_args: op %u: ", op) : RP_OK;
}

#else /* !REPRISE_HAVE_CUDA: no GPU processor, so no GPU unit */

rp_status rp__lower_build(rp_exec *ex) {
  RP_UNUSED(ex);
  return rp__err(RP_EUNSUPPORTED, "instantiate: GPU ops need a build with "
                                  "CUDA");
}

rp_status rp__lower_launch(rp_exec *ex, uint32_t ui, rp_slot *s, uint64_t rel,
                           uint64_t *t_issue) {
  RP_UNUSED(ex), RP_UNUSED(ui), RP_UNUSED(s), RP_UNUSED(rel);
  RP_UNUSED(t_issue);
  RP_ASSERT(!"GPU segment without CUDA");
  return RP_EUNSUPPORTED;
}

rp_status rp__lower_trace_start(rp_exec *ex, uint64_t from, uint32_t n) {
  RP_UNUSED(ex), RP_UNUSED(from), RP_UNUSED(n);
  return RP_OK;
}

int rp__lower_trace_span(rp_exec *ex, uint64_t r, uint32_t k, uint64_t *t0,
                         uint64_t *t1, const char **how) {
  RP_UNUSED(ex), RP_UNUSED(r), RP_UNUSED(k), RP_UNUSED(t0), RP_UNUSED(t1);
  RP_UNUSED(how);
  return 0;
}

void rp__lower_trace_free(rp_exec *ex) {
  RP_UNUSED(ex);
}

int rp__lower_quiesce(rp_exec *ex) {
  RP_UNUSED(ex);
  return 0;
}

void rp__lower_free(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  free(lw->segs);
  free(lw->members);
  free(lw->seg_of);
  free(lw->gpus);
  free(lw->gpu_of_lane);
  free(lw->waits);
  free(lw->pubs);
  free(lw->last_seg);
  free(lw);
  ex->lw = NULL;
}

rp_status rp__lower_update(rp_exec *ex, rp_op_id op, int *reinst) {
  RP_UNUSED(ex), RP_UNUSED(op), RP_UNUSED(reinst);
  return RP_OK;
}

void rp__lower_rt_free(rp_runtime *rt, void *state) {
  RP_UNUSED(rt);
  free(state);
}

int rp__lower_device_save(rp_exec *ex) {
  RP_UNUSED(ex);
  return -1;
}

void rp__lower_device_restore(rp_exec *ex, int dev) {
  RP_UNUSED(ex), RP_UNUSED(dev);
}

#endif
