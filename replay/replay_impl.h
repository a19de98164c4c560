/* replay/replay_impl.h — the compiled form of a graph (an exec) and the
 * replay scheduler's per-runtime state. Only the replay sources include
 * this.
 *
 * An exec is a set of lanes, one per CPU worker that has work: a lane is a
 * static list of units (one op, or one shard of an SPMD op) in an order
 * consistent with one global topological order. A worker runs its lane
 * back-to-back for each replay; same-lane edges cost nothing. A cross-lane
 * edge is a wait on the producer lane's progress word (a monotonic count of
 * units it completed, replay after replay), published with a release store
 * only after units that someone waits for. Waits are reduced at instantiate:
 * a unit waits for a producer lane position only if no earlier unit of its
 * lane already waited for a later one. */
#ifndef RP_REPLAY_IMPL_H
#define RP_REPLAY_IMPL_H

#include "capture/capture.h"
#include "xfer/xfer.h"

#include <stddef.h>
#include <string.h>

#define RP_EXEC_MAGIC 0x52505845u /* "RPXE" */
#define RP_RING 4096    /* submission ring entries (power of two; 256 KiB) */
#define RP_MASK_WORDS 2 /* 128 CPU workers */

/* RP_UNIT_EXT: a task with a planned replay form (engine.h rp_task_ext,
 * dist/ communication): run through ext->run, always on the general path.
 * RP_UNIT_LAUNCH: issues one GPU segment (replay/lower.h). */
enum {
  RP_UNIT_TASK = 0,
  RP_UNIT_COPY = 1,
  RP_UNIT_EXT = 2,
  RP_UNIT_LAUNCH = 3,
};

/* A cross-lane wait: lane `lane` must have completed `pos` units of replay
 * r - prev (prev = 1: a wrap-around wait on the previous replay). */
typedef struct rp_wait {
  uint32_t lane;
  uint32_t pos;
  uint32_t prev;
} rp_wait;

typedef struct rp_unit {
  uint8_t kind;
  uint8_t publish; /* store the lane's progress after this unit */
  uint8_t measure; /* unplaced unit whose cost is being measured */
  uint32_t op;     /* graph op id */
  uint32_t shard;
  uint32_t lane;            /* worker */
  uint32_t pos;             /* index in the lane */
  uint32_t wait_off, nwait; /* into exec->waits */
  uint32_t port_off, nport; /* precondition ports: into exec->ports */
  uint32_t post_off, npost; /* postcondition ports: into exec->posts */
  uint32_t pred_off, npred; /* predecessor units: into exec->preds */
  rp_proc pinned;           /* RP_PROC_ANY when the engine places it */
  uint64_t cost_ns;         /* hint or measurement (placement) */
  uint64_t measured_ns;     /* fastest run in the measurement window (the
                               minimum is robust to preemption and cold
                               caches); UINT64_MAX before */
  /* task units */
  rp_task_fn fn;
  rp_task_ctx ctx;          /* prebuilt; args/shards refreshed per replay */
  char *args;               /* this unit's own argument bytes */
  const rp_interp *interps; /* into the exec's copy of the op */
  uint32_t ninterp;
  size_t shards_src; /* SIZE_MAX or offset of the shard count */
  uint32_t max_shards;
  /* what traces, NVTX ranges and error details call the unit: the op's
   * name (rp_capture_name_next, graph files) when it has one, else its
   * task's name; copies: the op's name or NULL ("reprise.copy") */
  const char *name;
  const char *task_name; /* tasks: the registered task name */
  unsigned char *guard;  /* debug: bytes after this shard's workspace */
  /* copy units */
  rp_xfer_desc *xd;
  /* ext units (and ext tasks kept as tasks): the plan's state */
  const rp_task_ext *ext;
  void *ext_state;
} rp_unit;

/* A lane's entry in list order: the fast path needs only this. */
typedef struct rp_hot {
  rp_task_fn fn;
  rp_task_ctx *ctx;
  uint32_t unit;
  uint16_t slow;    /* nonzero: copy, ports, postconditions, interpolations,
                       shard count or guard: take the general path */
  uint16_t publish; /* store the lane's progress after the unit */
  uint32_t wait_off, nwait; /* the unit's cross-lane waits (exec->waits) */
} rp_hot;

typedef struct rp_lane {
  /* written by the lane's worker, read by consumers (a wait reads len with
   * progress: one line) */
  RP_ALIGNED_LINE _Atomic uint32_t progress;
  _Atomic uint32_t sleepers;
  uint32_t len;   /* units in the lane (set at placement) */
  uint32_t index; /* its worker (lane i runs on worker i) */
  /* owned by the worker (stats stored once per lane run, read relaxed) */
  RP_ALIGNED_LINE uint32_t *units; /* unit indices, len entries */
  rp_hot *hot;                     /* the same, as hot records */
  uint64_t cur_replay;             /* what rp_ctx_replay reports */
  _Atomic uint64_t ops_run, ops_skipped, handoffs, wakeups;
} rp_lane;

/* A placement the exec tries for a window of replays (tune.c). */
#define RP_TRIALS 3
#define RP_TRIAL_LEN 8
typedef struct rp_trial {
  uint32_t *lane; /* per unit */
  uint32_t *seq;  /* scheduling order */
  uint64_t median_ns;
  const char *what;  /* the placement, as rp_exec_dump's reason starts */
  const char *label; /* its name in the reason's list of timings */
} rp_trial;

/* A replay failure's detail line, at most. */
#define RP_SLOT_DETAIL 512

typedef struct rp_slot {
  /* One cache line holds what every lane reads when it starts the replay
   * and what its completion writes (the host arms it all at once): a lane
   * pays one transfer for the slot, not one per field. */
  RP_ALIGNED_LINE _Atomic uint32_t remaining; /* completion sources left: one
                                                 per lane */
  _Atomic int32_t status;                     /* first failure */
  _Atomic uint32_t any_fail; /* fast-path flag: some unit failed */
  /* 0 armed, 1 counter reached zero, 2 completion claimed: completion is in
   * replay order without blocking a completer (see complete()) */
  _Atomic uint32_t zeroed;
  uint64_t r;
  uint8_t stale;            /* an instance went stale: skip everything */
  uint8_t measure;          /* time every unit (placement window) */
  uint8_t timed;            /* time the replay (placement trials) */
  uint8_t traced;           /* record this replay's timeline (trace.c) */
  _Atomic uint64_t t_start; /* when its first lane started (timed) */
  rp_event done;
  /* done.id again, for inst_busy's look from another thread while the
   * slot may be reused (written before the replay is published) */
  _Atomic uint64_t done_id;
  /* read on the slower paths */
  RP_ALIGNED_LINE int32_t *unit_status; /* per unit, valid when any_fail */
  _Atomic uint32_t *post_left;          /* per postcondition port */
  _Atomic int32_t *post_status;
  /* per postcondition port, the failure its status came from (written by
   * the unit whose status it is, before its post_left decrement) */
  char (*post_detail)[2 * RP_SLOT_DETAIL + 64];
  rp_event *pre;  /* retained, npre */
  rp_event *post; /* npost */
  char *args;
  size_t args_size;
  uint64_t sub; /* ring index of its submission; UINT64_MAX when it did not
                   go through the ring (host side: the replaying thread) */
  char detail[RP_SLOT_DETAIL];   /* first failure, for rp_exec_error_detail
                                   (written with the status that first
                                   leaves 0) */
  _Atomic uint32_t detail_ready; /* detail written (release): postcondition
                                    events completing meanwhile copy it */
} rp_slot;
_Static_assert(offsetof(rp_slot, unit_status) == RP_CACHELINE,
               "a replay's per-lane slot fields fill one cache line");

struct rp_exec {
  /* atomic (relaxed): another thread's call may read it while destroy
   * poisons it (RP_ESTALE there, never a data race) */
  _Atomic uint32_t magic;
  rp_runtime *rt;
  struct rp_replay_state *rs;
  rp_graph *g; /* a private copy of the graph (dump, re-placement) */

  rp_unit *units;
  uint32_t nunits;
  uint32_t *order;    /* units in the global order (S') */
  uint32_t *op_first; /* first unit of each graph op */
  uint32_t *preds;    /* CSR payload */
  uint32_t *wrap_off; /* wrap-around (replay r on r - 1) sources of unit u:
                         wrap_src[wrap_off[u] .. wrap_off[u + 1]) (units;
                         placement-independent, built once at instantiate) */
  uint32_t *wrap_src;
  rp_wait *waits;
  uint32_t nwaits, waits_cap;
  uint32_t *ports;      /* precondition port ids per unit */
  uint32_t *posts;      /* postcondition port ids per unit */
  uint32_t *post_units; /* units bound per postcondition port */
  uint32_t npre, npost;
  uint32_t events_reserved; /* its share of the runtime's reserved events
                               (rp__event_reserve) */
  /* the replay being issued's precondition events, held (a reference
   * each) from before it waits for a window slot until its slot takes
   * them: a released event cannot complete and be recycled meanwhile */
  rp_event *pre_held;

  uint32_t nlanes; /* = processors: CPU workers, then GPU lanes
                      (replay/lower.h), which no worker runs */
  uint32_t ncpu;   /* CPU workers: lanes [0, ncpu) */
  rp_lane *lanes;
  uint64_t mask[RP_MASK_WORDS]; /* lanes with units */
  uint32_t active;              /* lanes with units: completion sources */
  uint32_t nlaunch;             /* launcher units (after the op units) */
  uint32_t *unit_key;           /* GPU lowering: per unit, the order key (NULL
                                   without GPU units) */
  struct rp_lower *lw;          /* GPU lowering (NULL without GPU units) */

  rp_instance_info **views; /* per graph op: its accesses' instances */
  rp_inst_view *insts;      /* every instance the exec touches */
  uint32_t ninsts;
  /* The runtime's instance epoch, and its value when every instance was
   * last seen current (host thread only): a replay walks insts only when
   * the epoch moved since. */
  const _Atomic uint64_t *inst_epoch;
  uint64_t epoch_seen;
  rp_xfer_desc *xds;
  uint32_t nxds;
  const rp_task_ext *ext; /* the ext table of the exec's ext units */
  void *ext_xs;           /* its per-exec state (exec_begin) */
  rp_inst *mirrors;       /* one instance per graph mirror (owned) */
  uint32_t nmirrors;
  void **workspaces; /* one buffer per SPMD op with a workspace */
  rp_mem *ws_mems;
  uint32_t nws;

  rp_slot *slots;
  uint32_t max_inflight;
  size_t max_args;
  size_t min_args;      /* the shortest argument block a replay may
                           pass: the end of the furthest interpolation
                           source (0: none) */
  uint32_t min_args_op; /* the op and interpolation that read there */
  uint32_t min_args_interp;
  uint64_t edge_cost;
  int no_replace;

  uint64_t epoch; /* replay number placement started at (lanes read it) */

  /* Written by the host on every replay: a line of their own, so that the
   * lanes' reads of the fields above stay in their caches. */
  RP_ALIGNED_LINE uint64_t issued; /* replays submitted (host side) */
  /* misuse guards (scheduler.c): 1 while a thread is inside one of the
   * calls that hold the exec (rp__exec_take: a second concurrent caller is
   * refused, RP_EBUSY); issued as seen by other
   * threads, stored (seq_cst) before the replay checks its instances'
   * generations, so rp_instance_free/realloc sees it in flight */
  _Atomic uint32_t in_replay;
  _Atomic uint64_t issued_pub;
  struct rp_exec *reg_next, *reg_prev; /* rp_replay_state.execs */
  int registered;
  uint64_t last_sub;    /* ring index of the last submission */
  int submitted;        /* some replay went through the ring */
  uint64_t inline_runs; /* replays whose launch lane ran in the
                           calling thread (host side only) */
  /* The host's busy-spin budget while it waits for a slot (host side
   * only, scheduler.c wait_inflight): starts at rp__host_spin_ns, halves
   * after a spin that ran out, back to full every SPIN_RETRY waits. */
  uint64_t slot_spin_ns;
  uint32_t slot_waits;
  RP_ALIGNED_LINE _Atomic uint32_t done_seq; /* replays completed (low 32) */
  _Atomic uint32_t done_sleepers;
  _Atomic uint32_t wake_at;     /* done_seq a sleeping host waits for */
  _Atomic uint64_t interval_ns; /* smoothed time between completions */
  uint64_t last_done_ns;        /* completion path only */
  _Atomic uint64_t completed;

  /* placement measurement and trials (tune.c): only inside rp_exec_tune,
   * which holds in_replay; rp_replay itself never changes the placement */
  uint64_t measure_from, measure_to; /* replays [from, to) are timed */
  int tuning;                        /* rp_exec_tune is measuring */
  int tuned;                         /* some rp_exec_tune settled */
  int tune_phase;                    /* 0: timing units; 1: timing placements */
  rp_trial trials[RP_TRIALS];
  uint32_t ntrials, cur_trial;
  uint64_t dts[RP_TRIAL_LEN]; /* replay times in the current window */
  uint32_t ndt;
  uint64_t last_end; /* completion time of the previous replay */
  uint64_t clock_ns; /* cost of reading the clock, subtracted from timings */
  int replace_pending;
  uint64_t replacements;
  char place_why[160];
  char last_detail[RP_SLOT_DETAIL];
  /* rp_exec_tune: the first failure of a window of trial replays (in
   * replay order), under detail_lock; tune clears tune_fail_seen */
  char tune_fail_detail[RP_SLOT_DETAIL];
  uint32_t tune_lost; /* candidate placements that could not be planned */
  int tune_fail_seen;
  pthread_mutex_t detail_lock; /* failure path only */

  /* traces (trace.c): NULL unless rp_exec_trace_start armed one; set and
   * cleared by the host thread only while no traced replay is in flight */
  struct rp_trace *trace;
  /* clock reads taken for traces, summed over workers (relaxed: read after
   * rp__exec_quiesce or by tests); stays 0 while nothing is traced */
  _Atomic uint64_t trace_clock_reads;
};

/* The replay layer's per-runtime state: the submission ring every worker
 * reads in the same order (so that two execs sharing workers can never wait
 * on each other in opposite orders). */
typedef struct rp_sub { /* one cache line each: a reader pays one transfer */
  RP_ALIGNED_LINE _Atomic uint64_t seq; /* index + 1 once published */
  rp_exec *ex;
  uint64_t r;
  uint64_t mask[RP_MASK_WORDS];
} rp_sub;

/* The words of a precondition's name (RP_NAME_MAX bytes and a NUL) that a
 * worker's cursor keeps. */
enum { RP_GATE_NAME_WORDS = (RP_NAME_MAX + 1) / 8 };
_Static_assert((RP_NAME_MAX + 1) % 8 == 0, "a port name fills whole words");

typedef struct rp_cursor {
  RP_ALIGNED_LINE _Atomic uint64_t next; /* next ring index to read */
  /* the precondition event the worker's lane waits at (rp__gate_block),
   * inside ring entry `next`, 0 when none: while it has not triggered,
   * every later entry the worker has a lane in waits for the caller */
  _Atomic uint64_t gate;
  /* lane + 1 while the worker sleeps waiting for that lane's progress
   * inside entry `next` (rp__lane_wait_progress); 0 otherwise: a chain of
   * these ending at a gated worker holds every lane on it */
  _Atomic uint32_t waits_on;
  /* What `gate` is, for the refusals that name it: the exec (its address,
   * never followed: it may be gone by the time a reader prints it), the
   * replay, the precondition port and its name. Written by
   * the worker before it sets `gate`, only when it blocks there; gate_seq
   * is odd while they are written, so a reader that sees it unchanged
   * around its reads of them and of `gate` read one gate's. */
  RP_ALIGNED_LINE _Atomic uint32_t gate_seq;
  _Atomic uint32_t gate_port;
  _Atomic uint64_t gate_r;
  _Atomic uintptr_t gate_ex;
  RP_ALIGNED_LINE _Atomic uint64_t gate_name[RP_GATE_NAME_WORDS];
} rp_cursor;

/* The cursor of the worker this thread is (set by rp__replay_poll), NULL
 * on other threads. */
extern _Thread_local rp_cursor *rp__tl_cursor;

typedef struct rp_replay_state {
  rp_runtime *rt;
  uint32_t nworkers;
  RP_ALIGNED_LINE _Atomic uint64_t tail;
  _Atomic uint64_t min_cache;
  rp_cursor *cursors;
  void *lower; /* the CUDA lowering's per-runtime streams (gpu_build.c) */
  /* every live exec of the runtime, for rp_instance_free/realloc's check
   * that no replay in flight uses the instance (never on the replay path) */
  pthread_mutex_t exec_lock;
  struct rp_exec *execs;
  rp_sub ring[RP_RING];
} rp_replay_state;

rp_replay_state *rp__replay_state(rp_runtime *rt);
/* Frees everything an exec owns and quarantines the struct (rp_exec_destroy,
 * instantiate.c; quiesced first). */
void rp__exec_free(rp_exec *ex);
/* Adds ex to / removes it from its runtime's list of execs. */
void rp__exec_register(rp_exec *ex);
void rp__exec_unregister(rp_exec *ex);
/* RP_OK for a live exec; RP_EINVAL for NULL or no exec, RP_ESTALE for a
 * destroyed one (still quarantined, engine/util.h). `what`: the call. */
static inline rp_status rp__exec_check(const rp_exec *ex, const char *what) {
  if (RP_UNLIKELY(!ex))
    return rp__err(RP_EINVAL, "%s: NULL exec", what);
  uint32_t m = atomic_load_explicit(&ex->magic, memory_order_relaxed);
  if (RP_LIKELY(m == RP_EXEC_MAGIC))
    return RP_OK;
  if (m == RP_DEAD_MAGIC)
    return rp__err(RP_ESTALE, "%s: the exec %p was destroyed", what,
                   (const void *)ex);
  return rp__err(RP_EINVAL, "%s: %p is not an exec (destroyed?)", what,
                 (const void *)ex);
}
/* RP_EUNSUPPORTED for an exec of a machine model (it can be dumped, not
 * run: nothing to trace, no device to hold arguments), else RP_OK. */
static inline rp_status rp__exec_refuse_model(const rp_exec *ex,
                                              const char *what) {
  if (RP_UNLIKELY(rp__runtime_is_model(ex->rt)))
    return rp__err(RP_EUNSUPPORTED,
                   "%s: the exec was instantiated on a model of a machine "
                   "(reprise dump): it can be dumped, not run",
                   what);
  return RP_OK;
}
/* rp__exec_check, and RP_ECONTRACT when called from a task inside a
 * replay (public calls that may wait: trace start and write). */
static inline rp_status rp__exec_check_call(rp_exec *ex, const char *what) {
  rp_status st = rp__exec_check(ex, what);
  if (st)
    return st;
  return rp__refuse_in_replay(what);
}

/* placement (place.c): assigns every unit a lane and builds the lanes,
 * waits and publish flags. May allocate. */
rp_status rp__place(rp_exec *ex, int use_measured);
/* Assigns every unit a lane (written into the units) and fills seq with the
 * scheduling order, without building lanes. */
rp_status rp__place_plan(rp_exec *ex, int use_measured, uint32_t max_lanes,
                         uint32_t *seq);
/* Rebuilds lanes, waits and publish flags for the lane assignment already in
 * the units, with seq as the scheduling order. */
rp_status rp__place_finalize(rp_exec *ex, const uint32_t *seq);

/* The wrap-around dependencies (replay r on replay r - 1) per unit, from
 * the accesses, into ex->wrap_off / ex->wrap_src (instantiate, once: they
 * do not depend on the placement). Launcher units have none. */
rp_status rp__place_wrap_deps(rp_exec *ex);

/* Adds v to a counter only one thread writes at a time (readers load it
 * relaxed): a plain load and store, no read-modify-write. */
static inline void rp__count(_Atomic uint64_t *c, uint64_t v) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                        memory_order_relaxed);
}
/* ---- lane progress (inline: the CPU lanes' hot path and the GPU
 * launcher share them) ---- */

static inline int rp__lane_reached(uint32_t v, uint32_t target) {
  return (int32_t)(v - target) >= 0;
}

/* Stores the lane's progress and wakes consumers sleeping on it. The seq_cst
 * store pairs with the consumer's seq_cst increment of `sleepers` before its
 * final check (no lost wake-up). */
static inline void rp__lane_publish(rp_lane *l, uint32_t v) {
  atomic_store(&l->progress, v);
  if (atomic_load(&l->sleepers))
    rp__futex_wake(&l->progress, 0x7fffffff);
}

typedef struct rp_lane_stats {
  uint64_t run, skipped, handoffs, wakeups;
} rp_lane_stats;

static inline void rp__lane_wait_progress(rp_lane *p, uint32_t target,
                                          rp_lane_stats *ls) {
  /* acquire: the producer's units (and their status) happen before */
  uint32_t v = atomic_load_explicit(&p->progress, memory_order_acquire);
  if (rp__lane_reached(v, target))
    return;
  ls->handoffs++;
  rp_backoff b = RP_BACKOFF_INIT;
  while (rp__backoff(&b)) {
    v = atomic_load_explicit(&p->progress, memory_order_acquire);
    if (rp__lane_reached(v, target))
      return;
  }
  rp_cursor *me = rp__tl_cursor; /* asleep: say on whom (ring_stuck) */
  if (me)
    atomic_store(&me->waits_on, p->index + 1);
  for (;;) {
    /* the worker's own eager work, one item at a time with the progress
     * read between: the lane waited for may wait for it (an eager op's
     * done event as a precondition) */
    if (rp__worker_serve()) {
      v = atomic_load_explicit(&p->progress, memory_order_acquire);
      if (rp__lane_reached(v, target))
        break;
      continue;
    }
    atomic_fetch_add(&p->sleepers, 1);
    v = atomic_load(&p->progress);
    if (rp__lane_reached(v, target)) {
      atomic_fetch_sub(&p->sleepers, 1);
      break;
    }
    int slept = rp__worker_block_wait(&p->progress, v);
    atomic_fetch_sub(&p->sleepers, 1);
    ls->wakeups += (uint64_t)slept;
  }
  if (me)
    atomic_store(&me->waits_on, 0);
}

/* Waits until w holds for replay rel (spin, then futex). */
static inline void rp__lane_wait(rp_exec *ex, const rp_wait *w, uint64_t rel) {
  rp_lane_stats ls = {0};
  if (w->prev > rel)
    return;
  rp_lane *p = &ex->lanes[w->lane];
  rp__lane_wait_progress(p, (uint32_t)(rel - w->prev) * p->len + w->pos, &ls);
}

/* The shards unit u runs in slot s's replay: max_shards, or the per-replay
 * count (shards_src) clamped to 1..max_shards. 0 when u's shard is not among
 * them: u skips this replay (not a failure). CPU lanes and GPU issue share
 * it. */
static inline uint32_t rp__unit_shards(const rp_unit *u, const rp_slot *s) {
  if (u->shards_src == SIZE_MAX)
    return u->max_shards;
  uint32_t v;
  memcpy(&v, s->args + u->shards_src, sizeof v);
  uint32_t shards = v < 1 ? 1 : v > u->max_shards ? u->max_shards : v;
  return u->shard < shards ? shards : 0;
}

/* scheduler (scheduler.c) */
/* The words of a poisoned precondition p of slot s: its port and what
 * poisoned it (a thread-local buffer, valid until the next call). */
const char *rp__port_why(const rp_exec *ex, const rp_slot *s, uint32_t p);
/* For a task's return raw that is no rp_status (rp__task_status mapped it
 * to st) and a task that said nothing: "the task returned N, not an
 * rp_status" (a thread-local buffer); else NULL. */
const char *rp__task_returned_why(rp_status st, rp_status raw);
/* The first failure among u's predecessors in slot s (RP_OK: none). */
rp_status rp__pred_status(const rp_exec *ex, const rp_unit *u,
                          const rp_slot *s);
int rp__replay_poll(void *arg, unsigned worker);
/* Waits for every replay to complete and every worker and host callback
 * to leave the exec. Returns 1 when the CUDA context was lost meanwhile
 * (the exec must then be leaked, see rp__lower_quiesce), else 0. */
int rp__exec_quiesce(rp_exec *ex);
/* Lane `lane`'s wait for slot s's precondition p: blocks until its event
 * completes, the lane's worker marked gated at it meanwhile (the exec,
 * replay and port kept for refusals that name it) when it had not
 * triggered. */
rp_status rp__gate_block(rp_exec *ex, uint32_t lane, const rp_slot *s,
                         uint32_t p);
/* One thread at a time per exec (reprise.h): rp_replay, rp_exec_tune,
 * rp_exec_destroy, rp_exec_update_args, rp_exec_trace_start and
 * rp_exec_trace_write hold ex->in_replay while they are inside; a second
 * thread calling one of them meanwhile is refused. rp__exec_busy is that
 * refusal (RP_EBUSY, `what` and the holding calls named); rp__exec_take
 * takes the exec or refuses, rp__exec_give hands it back. */
#define RP_EXEC_HOLDERS                                                        \
  "rp_replay, rp_exec_tune, rp_exec_destroy, rp_exec_update_args, "            \
  "rp_exec_trace_start or rp_exec_trace_write"
rp_status rp__exec_busy(const rp_exec *ex, const char *what);
static inline rp_status rp__exec_take(rp_exec *ex, const char *what) {
  if (RP_UNLIKELY(
          atomic_exchange_explicit(&ex->in_replay, 1, memory_order_acquire)))
    return rp__exec_busy(ex, what);
  return RP_OK;
}
static inline void rp__exec_give(rp_exec *ex) {
  atomic_store_explicit(&ex->in_replay, 0, memory_order_release);
}
/* rp_replay's argument checks (`what` names the call in errors). */
rp_status rp__replay_check(rp_exec *ex, const rp_replay_args *a,
                           const char *what);
/* rp_replay's body, for the thread that holds ex->in_replay (rp_replay,
 * rp_exec_tune's trial replays). */
rp_status rp__replay_owned(rp_exec *ex, const rp_replay_args *a,
                           rp_event *done);
/* Waits until nothing of ex is in flight (every replay completed, no GPU
 * host callback pending), without waiting for idle workers. RP_EBUSY when
 * a replay in flight waits for a precondition that has not triggered (it
 * may need the caller). Never called by rp_replay. */
rp_status rp__exec_wait_quiet(rp_exec *ex, const char *what);
/* A worker ex has a lane on that waits at a precondition that has not
 * triggered (a replay of any exec, or through the lanes it waits for):
 * its index, else -1. A replay of ex would queue behind it. */
int rp__exec_worker_gated(const rp_exec *ex);
/* RP_EBUSY when such a worker is held (rp__exec_worker_gated), the detail
 * "what: worker W, which the exec runs on, ...: <the gate, as rp_replay's
 * refusals name it>; <then>"; RP_OK when none is. */
rp_status rp__exec_refuse_worker_gated(const rp_exec *ex, const char *what,
                                       const char *then);
/* A replay's slot (slot.c): failures, postconditions, in-order completion;
 * the CPU lanes (scheduler.c) and the GPU launcher (gpu_launch.c) share it. */
/* Records unit ui's failure in slot s (first failure names the replay). */
void rp__unit_failed(rp_exec *ex, rp_slot *s, uint32_t ui, rp_status st,
                     const char *why);
/* Delivers unit u's postconditions in slot s. */
void rp__post_done(rp_exec *ex, const rp_unit *u, rp_slot *s);
/* Slot s's counter reached zero: completes its replay if it is next, and
 * chains on to later ones already done (in order, without blocking). */
void rp__slot_complete(rp_exec *ex, rp_slot *s);
/* One completion source of slot s is done; the last one completes the
 * replay (in order, without blocking). */
void rp__slot_source_done(rp_exec *ex, rp_slot *s);
/* n completion sources at once (a GPU group completes its logical GPUs'
 * lanes together). */
void rp__slot_sources_done(rp_exec *ex, rp_slot *s, uint32_t n);

/* The records of a trace (trace.c writes them on the replay path, dump.c
 * writes them out). */
/* Records beyond this (32 bytes each) are refused at start: a trace is for
 * a few replays of one step, not for a whole run. */
#define RP_TRACE_MAX_RECS (8u << 20)
/* Thread ids of the per-slot replay tracks (workers use their index). */
#define RP_TRACE_SLOT_TID 1000u

typedef struct rp_trace_rec {
  uint64_t t_wait;  /* clock before the unit's waits; 0: it had none */
  uint64_t t_start; /* clock before it ran; 0: it did not run */
  uint64_t t_end;   /* 0: the record was never written */
  uint32_t lane;
  int32_t status; /* RP_OK, the failure, or 1: not run in this replay */
} rp_trace_rec;

typedef struct rp_trace_replay {
  uint64_t t_arm, t_done; /* submission (slot armed) and completion */
  int32_t status;
} rp_trace_replay;

struct rp_trace {
  uint64_t from, to; /* replays [from, to) are traced */
  uint32_t nunits;
  rp_trace_rec *recs; /* (r - from) * nunits + unit */
  rp_trace_replay *replays;
};

/* traces (trace.c). The replay path calls these only for slots armed as
 * traced, so an exec that is not being traced does no extra work.
 * The name a unit's trace events and NVTX ranges share. */
#define RP_NVTX_COPY "reprise.copy"
static inline const char *rp__unit_trace_name(const rp_unit *u) {
  return u->kind == RP_UNIT_COPY && !u->name ? RP_NVTX_COPY : u->name;
}
/* arm_slot: marks s traced (and stamps its submission) when replay r falls
 * in the armed trace window. */
void rp__trace_arm(rp_exec *ex, rp_slot *s, uint64_t r);
/* One unit of a traced replay ran on `lane` (or was skipped): t_wait is
 * the clock before its waits (0: it had none), t_start before it ran (0:
 * it did not run); the end is read here. */
void rp__trace_unit(rp_exec *ex, const rp_slot *s, uint32_t unit, uint32_t lane,
                    uint64_t t_wait, uint64_t t_start, rp_status st, int skip);
/* complete(): the traced replay finished at `now` with status st. */
void rp__trace_done(rp_exec *ex, const rp_slot *s, uint64_t now, rp_status st);
void rp__trace_free(rp_exec *ex);
/* Clock reads taken for traces so far (tests: 0 while tracing is off). */
uint64_t rp__exec_trace_clock_reads(const rp_exec *ex);
/* REPRISE_DUMP=DIR: writes ex's graph file and schedule into DIR (dump.c).
 * Reports a failure on stderr (once per process), never fails. */
void rp__exec_env_dump(rp_exec *ex);
/* Writes s as the body of a JSON string (no quotes around it): quotes,
 * backslashes and control bytes escaped (dump.c; the trace writer too). */
void rp__json_str(FILE *f, const char *s);

/* placement trials (tune.c, rp_exec_tune): frees the trials' buffers. */
void rp__tune_free(rp_exec *ex);
/* Records one timed replay's duration (completion path, in order). */
void rp__tune_record(rp_exec *ex, rp_slot *s, uint64_t end);
/* A cost source for tests (NULL otherwise): when set, rp_exec_tune asks it
 * for each trial placement's replay time instead of using the measured
 * median, given the trial's description (rp_trial.what), the number of
 * workers it uses and the measured median. Tests set it to decide the
 * choice independently of the machine's speed and load; the candidates
 * themselves are still planned from measured unit costs. Read between
 * trial windows only, on the thread inside rp_exec_tune. */
extern uint64_t (*rp__tune_cost_hook)(const char *what, uint32_t workers,
                                      uint64_t measured_ns);

#endif
