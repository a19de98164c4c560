/* engine/engine.h — what the engine offers the layers above it (xfer,
 * capture, replay). The engine owns the runtime, processors, memories,
 * instances, events, the task registry and the backends. It knows nothing of
 * accesses, dependence analysis or graphs. Private to libreprise. */
#ifndef RP_ENGINE_H
#define RP_ENGINE_H

#include "device_ops.h"
#include "util.h"

#include <pthread.h>
#include <sched.h>

/* ---------------------------------------------------------------------- */
/* Work items: the unit a processor's queue runs. Intrusive, so queueing
 * allocates nothing. */

typedef struct rp_work rp_work;
struct rp_work {
  _Atomic(rp_work *) next; /* queue link, owned by the queue */
  /* Runs on the processor's thread. */
  void (*run)(rp_work *w);
};

/* Event waiter node, provided by the caller (no allocation). fn runs once,
 * on the triggering thread, with the event's final status. */
typedef struct rp_ev_waiter rp_ev_waiter;
struct rp_ev_waiter {
  rp_ev_waiter *next;
  void (*fn)(rp_ev_waiter *w, rp_status st);
};

/* A work item gated on several events: counts them down, then enqueues the
 * work on its processor. Embed it in the op. `poison` holds the first poison
 * status among the preconditions (0 when all triggered) by the time
 * work.run is called, and `why` its detail (malloc'd, or NULL): the op
 * takes it (rp__gate_take_why) and passes it on to its own event. */
typedef struct rp_gate rp_gate;
typedef struct rp_gate_waiter {
  rp_ev_waiter w;
  rp_gate *g;
  int order; /* 1: waits for the event, but does not inherit its poison */
} rp_gate_waiter;
struct rp_gate {
  rp_work work; /* set work.run before submitting */
  rp_runtime *rt;
  rp_proc proc;
  _Atomic uint32_t remaining;
  _Atomic int32_t poison;
  char *why;
};

/* The gate's poison detail, now the caller's to free (NULL: none). */
static inline char *rp__gate_take_why(rp_gate *g) {
  char *w = g->why;
  g->why = NULL;
  return w;
}

/* Arms g and enqueues g->work on proc once every pre event has completed (at
 * once when all have). `waiters` must have room for npre nodes and live until
 * the work runs. order (NULL: none) marks the pre events the work is only
 * ordered after (order[i] 1): their poison is not inherited. RP_ESTALE
 * (nothing enqueued) when a handle is recycled. */
rp_status rp__gate_submit(rp_runtime *rt, rp_gate *g, rp_proc proc,
                          const rp_event *pre, const uint8_t *order,
                          uint32_t npre, rp_gate_waiter *waiters);
/* Enqueues w on processor p now (FIFO per processor). */
void rp__proc_enqueue(rp_runtime *rt, rp_proc p, rp_work *w);

/* ---------------------------------------------------------------------- */
/* Low-level operations (engine/ops.c), as Realm's: each runs once its one
 * precondition event has completed and hands back a completion event. No
 * dependence analysis: the events are the only ordering (two spawns on one
 * processor with unrelated preconditions run in either order).
 *
 * Common contract: pre is RP_NO_EVENT or a live event (several: merge them
 * with rp_event_merge) the caller holds a reference to during the call (it
 * may release it right after). A poisoned pre skips the work and poisons the
 * completion with pre's status. *done receives a new event (one reference,
 * the caller's: rp_event_release); done may be NULL (nobody waits; drain
 * still does). On error nothing was created, nothing runs, *done is left
 * as it was. rp_runtime_drain and rp_runtime_destroy wait for these ops;
 * while the runtime is being destroyed, ops gated on user events nobody
 * triggers are cancelled (RP_EBUSY) after a quiet period, as eager ops are.
 * Callable from any thread, CUDA host functions included: a spawn makes no
 * CUDA call, the op's work starts on its processor's thread. */

/* A task spawn: the task runs once, as shard 0 of 1, without workspace. */
typedef struct rp_task_spawn {
  rp_proc proc;     /* a processor of the runtime (not RP_PROC_ANY) */
  rp_task_id task;  /* needs a variant for proc's kind */
  const void *args; /* copied at spawn (args_size bytes) */
  size_t args_size;
  const rp_inst *insts; /* resolved at spawn: rp_ctx_inst(i) / rp_ctx_ptr(i) */
  uint32_t ninsts;      /* each must be accessible from proc */
} rp_task_spawn;

/* Runs s->task on s->proc once pre completed; done completes with the
 * task's status (a positive one becomes RP_ETASK; a GPU task completes when
 * its stream reaches the end of the work it enqueued). Errors: RP_EINVAL
 * (NULL rt or s, NULL args/insts with a non-zero count), RP_ERANGE (args
 * over 1 MiB), RP_EPROC (processor out of range, no variant for its kind),
 * RP_ENOTASK, RP_ESTALE (an instance or pre), RP_EACCESS, RP_EUNUSABLE,
 * RP_EUNSUPPORTED (a model of a machine: it runs nothing), RP_ENOMEM.
 * The instances' storage is resolved here and not tracked: unlike an
 * eager launch, a pending spawn is not waited for by rp_instance_free or
 * rp_instance_realloc, so the caller keeps its instances until done
 * completed (the task would write freed storage). */
rp_status rp__spawn_task(rp_runtime *rt, const rp_task_spawn *s, rp_event pre,
                         rp_event *done);

/* A 2-D byte copy: rows rows of row_bytes bytes; row i goes from
 * src + i * src_pitch to dst + i * dst_pitch. A pitch of 0 means row_bytes
 * (rows back to back): rows = 1 (or pitches 0) is a contiguous copy. */
typedef struct rp_copy_bytes {
  void *dst;
  rp_mem dst_mem; /* the memory dst lies in */
  const void *src;
  rp_mem src_mem;
  size_t rows, row_bytes;
  size_t src_pitch, dst_pitch; /* bytes between row starts; >= row_bytes */
} rp_copy_bytes;

/* Copies c's bytes once pre completed, on processor `where` (its backend's
 * copy_async: a CPU worker memcpys in its queue, between host-addressable
 * memories; a GPU copies on its stream, between any memories of the
 * runtime); done completes once the bytes landed. The two byte ranges must
 * not overlap. Errors: RP_EINVAL (NULL rt, c, dst or src; zero rows or
 * row_bytes; a non-zero pitch below row_bytes; a memory out of range;
 * overlapping ranges), RP_ERANGE (the extent overflows), RP_EPROC (`where`
 * out of range), RP_EACCESS (a CPU worker and device memory),
 * RP_EUNSUPPORTED (the backend cannot copy, or a model of a machine),
 * RP_ESTALE (pre), RP_EUNUSABLE, RP_ENOMEM. A backend failure once the copy
 * is due (a CUDA call refused it) poisons done with that status
 * (RP_EBACKEND). */
rp_status rp__spawn_copy(rp_runtime *rt, const rp_copy_bytes *c, rp_proc where,
                         rp_event pre, rp_event *done);

/* ---------------------------------------------------------------------- */
/* Events (internal side). */

/* A new pending event; the caller holds two references: one it drops with
 * rp_event_release, one dropped by the trigger (rp__event_complete). */
rp_status rp__event_new(rp_runtime *rt, rp_event *out);
/* Adds n to the runtime's reserved events and makes sure that many event
 * slots (every live reservation, n included, up to 2^20) sit on the free
 * list now, growing the table if needed: execs replaying side by side
 * each find their own window's events there, unless others take slots
 * meanwhile. Instantiate reserves an exec's replay events with it (and
 * gives them back with rp__event_unreserve when the exec goes); nothing
 * is handed out. RP_ENOMEM (nothing reserved). */
rp_status rp__event_reserve(rp_runtime *rt, uint32_t n);
void rp__event_unreserve(rp_runtime *rt, uint32_t n);
/* How long a host thread waiting for e yields before it sleeps (us; the
 * event's creator knows when it will come: a GPU replay's done event is
 * worth a longer yield than a wake-up's 5-50 us). Call before handing e
 * out. */
void rp__event_set_yield(rp_runtime *rt, rp_event e, uint32_t us);
/* Triggers (st == RP_OK) or poisons (st < 0) e and drops the trigger's
 * reference. Runs waiters and wakes host sleepers. */
void rp__event_complete(rp_runtime *rt, rp_event e, rp_status st);
/* As rp__event_complete; a poisoning keeps a copy of `why` (what failed;
 * NULL or "": none), which rp_event_wait and rp_event_query put in
 * rp_error_detail() when they return the poison status. Failure path
 * only: the copy is an allocation (none kept when it fails). */
void rp__event_complete_why(rp_runtime *rt, rp_event e, rp_status st,
                            const char *why);
/* The detail a poisoned e carries (NULL: none, or not poisoned); valid
 * while the caller holds a reference to e. */
const char *rp__event_why(const rp_runtime *rt, rp_event e);
/* Inside a waiter's fn: the detail of the poisoned event it runs for
 * (NULL: none, or the event triggered), valid until fn returns. */
const char *rp__event_waiter_why(void);
/* Asks for e's slot in this core's cache, for writing: a completer that
 * calls this when its work starts finds the line local when it triggers. */
void rp__event_prefetch(rp_runtime *rt, rp_event e);
rp_status rp__event_retain(rp_runtime *rt, rp_event e);
/* Drops a reference the engine took itself (rp__event_retain, _retain_n),
 * never the handle's own one: unlike rp_event_release, it does not mark the
 * handle released. */
void rp__event_unref(rp_runtime *rt, rp_event e);
/* Adds n references to a live event at once. */
void rp__event_retain_n(rp_runtime *rt, rp_event e, uint32_t n);
/* Adds a waiter; if e already completed, runs w->fn at once. */
rp_status rp__event_add_waiter(rp_runtime *rt, rp_event e, rp_ev_waiter *w);
/* Final status (RP_OK / poison) if completed, else RP_EAGAIN. Assumes a live
 * handle (no stale check). */
rp_status rp__event_peek(const rp_runtime *rt, rp_event e);
/* rp__event_peek for a handle that may have gone stale meanwhile (its last
 * reference dropped by another thread): RP_ESTALE then, never the state of
 * the event that reuses the slot (its generation is read before and after
 * the state). */
rp_status rp__event_peek_live(const rp_runtime *rt, rp_event e);
/* Waits (spin, then futex) until a live event the caller holds a reference
 * to completes; returns its final status. No contract check, no timeout
 * (replay workers use rp__event_block_serving). */
rp_status rp__event_block(rp_runtime *rt, rp_event e);
/* rp__event_block for a replay's worker: while e is pending it runs the
 * eager work queued on its own worker (rp__worker_serve). */
rp_status rp__event_block_serving(rp_runtime *rt, rp_event e);
/* Poisons (with st) every pending user event (rp_event_create) that is
 * still referenced: used when a runtime goes down so that eager work gated
 * on events nobody will trigger completes; their detail names
 * rp_runtime_destroy. Returns how many. */
uint32_t rp__events_cancel_user(rp_runtime *rt, rp_status st);
/* 1 when e is a live handle of this runtime. */
int rp__event_live(const rp_runtime *rt, rp_event e);
/* 1 when live e was made by rp_event_create (the caller completes it), 0
 * when the runtime completes it (an op's or replay's done event, a
 * postcondition), -1 when e is no live event (RP_NO_EVENT, stale). */
int rp__event_is_user(const rp_runtime *rt, rp_event e);
/* What a handle that is no event of rt is, as a note for its error
 * (" (a captured op reference, not an event)", ...), or "". */
const char *rp__event_handle_note(const rp_runtime *rt, rp_event e);

/* ---------------------------------------------------------------------- */
/* Handle identity. The low 32 bits of an event or instance handle are
 * (tag << RP_HANDLE_TAG_SHIFT) | index: the index (an event's slot + 1, an
 * instance's slot) fits in 23 bits (the tables hold at most 4M entries) and
 * the tag (1..255) names the runtime that handed the handle out, so a
 * handle of another runtime is refused instead of acted on (two live
 * runtimes share a tag only when 255 were created in between). Bit 31 stays
 * clear: slot UINT32_MAX is the capture layer's mirror marker. */
#define RP_HANDLE_TAG_SHIFT 23
#define RP_HANDLE_SLOT_MASK ((1u << RP_HANDLE_TAG_SHIFT) - 1u)
static inline uint32_t rp__handle_tag(uint64_t id) {
  return ((uint32_t)id >> RP_HANDLE_TAG_SHIFT) & 0xffu;
}
/* This runtime's tag. */
uint32_t rp__runtime_tag(const rp_runtime *rt);
/* The tag the last runtime created took (0 before the first): the next
 * takes the one after it, 255 followed by 1. A test seam may store any
 * value (what a count of runtimes would hold after 2^32 creations). */
extern _Atomic uint32_t rp__runtime_tag_last;
/* Checks that rt is a live runtime: RP_EINVAL for NULL or an object that is
 * no runtime, RP_ESTALE for a destroyed one still in quarantine (util.h).
 * The detail names `what` (the public call). */
rp_status rp__rt_check(const rp_runtime *rt, const char *what);

/* ---------------------------------------------------------------------- */
/* Instances (internal side). A stable view of a live instance. */

typedef struct rp_inst_view {
  rp_instance_info info;
  uint32_t slot;
  const _Atomic uint32_t *gen_word; /* current generation, for stale checks */
} rp_inst_view;

/* RP_EINVAL for handle 0 (none), RP_ESTALE for a freed or unknown one. */
rp_status rp__inst_view(const rp_runtime *rt, rp_inst inst, rp_inst_view *out);
/* How a handle rp__inst_view refused is missing, for details:
 * "is none (handle 0)" or "is stale or unknown". */
static inline const char *rp__inst_missing(rp_inst inst) {
  return inst.id ? "is stale or unknown" : "is none (handle 0)";
}

/* While rp_instance_free/realloc asks whether the instance is busy, its
 * generation word holds gen ^ RP_INST_GEN_CHANGING (so that a replay
 * starting meanwhile is seen by one side or the other). A check that finds
 * that value waits for the verdict instead of calling the handle stale:
 * the generation comes back (refused, RP_EBUSY: nothing changed) or moves
 * on (freed). Returns the settled generation. */
#define RP_INST_GEN_CHANGING 0x80000000u
static inline uint32_t rp__inst_gen_settled(const _Atomic uint32_t *w,
                                            uint32_t want) {
  uint32_t g = atomic_load(w); /* seq_cst: see rp_replay, inst_busy */
  for (unsigned n = 0; g == (want ^ RP_INST_GEN_CHANGING); n++) {
    if (n < 64)
      rp__cpu_relax();
    else
      sched_yield();
    g = atomic_load(w);
  }
  return g;
}
/* RP_OK when name is a valid name (reprise.h RP_NAME_MAX): at most
 * RP_NAME_MAX printable ASCII bytes, no '"' or '\\'. `what`: the call. */
rp_status rp__name_check(const char *name, const char *what);
/* Sets a name buffer of RP_NAME_MAX + 1 bytes to name (NULL: none), which
 * rp__name_check accepted: name may be that buffer or a tail of it (a
 * getter's result passed back), which a copy through snprintf would read
 * while writing over it. */
void rp__name_set(char *dst, const char *name);
/* Liveness and memory only (no copy of the view): RP_OK, RP_EINVAL for
 * handle 0 (none) or RP_ESTALE; no detail set. */
rp_status rp__inst_mem(const rp_runtime *rt, rp_inst inst, rp_mem *mem);
/* Slot UINT32_MAX is never handed out (the capture layer marks mirror
 * references with it). */
static inline uint32_t rp__inst_slot(rp_inst i) {
  uint32_t lo = (uint32_t)i.id;
  return lo == UINT32_MAX ? lo : lo & RP_HANDLE_SLOT_MASK;
}
static inline uint32_t rp__inst_gen(rp_inst i) {
  return (uint32_t)(i.id >> 32);
}
/* Hook the replay layer installs: RP_EBUSY (with detail) when an exec with
 * replays in flight uses the instance, else RP_OK. Called by free and
 * realloc while the instance's generation word is held at a transient
 * value (so a replay armed meanwhile sees it stale), before anything
 * changes. */
typedef rp_status (*rp_inst_busy_hook)(rp_runtime *rt, void *arg, rp_inst inst,
                                       const char *what);
void rp__set_inst_busy_hook(rp_runtime *rt, rp_inst_busy_hook fn, void *arg);
/* Hook the capture layer installs to wait for eager ops touching an instance
 * before it is freed or reallocated: RP_OK once none is left, or an error
 * (with detail; the instance then stays as it was), e.g. RP_EBUSY from a
 * completion callback where one is still pending. */
typedef rp_status (*rp_inst_release_hook)(rp_runtime *rt, void *arg,
                                          rp_inst inst, const char *what);
void rp__set_inst_release_hook(rp_runtime *rt, rp_inst_release_hook fn,
                               void *arg);

/* ---------------------------------------------------------------------- */
/* Memory: allocation in any memory, synchronous copies (instance
 * read/write, staging). */

rp_status rp__mem_alloc(rp_runtime *rt, rp_mem m, size_t bytes, size_t align,
                        void **ptr);
void rp__mem_free(rp_runtime *rt, rp_mem m, void *ptr);
/* Stands for "the caller's host memory" in rp__mem_copy. */
#define RP_MEM_CALLER ((rp_mem)0xffffffffu)
/* Synchronous copy of bytes between any two memories. */
rp_status rp__mem_copy(rp_runtime *rt, rp_mem dst_mem, void *dst,
                       rp_mem src_mem, const void *src, size_t bytes);
int rp__mem_host_addressable(const rp_runtime *rt, rp_mem m);
/* rp_mem_find for the library's own probes: 1 and *out when the runtime
 * has such a memory, else 0, leaving the error detail alone (a successful
 * call must not replace the caller's last failure). */
int rp__mem_lookup(const rp_runtime *rt, rp_mem_kind kind, int device,
                   rp_mem *out);
/* rp_task_find for the library's own probes, likewise: 1 and *out when a
 * task of that name is registered, else 0, the error detail untouched. */
int rp__task_lookup(const rp_runtime *rt, const char *name, rp_task_id *out);

/* ---------------------------------------------------------------------- */
/* Tasks (internal side). */

typedef struct rp_task_ext rp_task_ext;

/* A check of a launch's declared privileges against what the task does
 * with each access (the kernels' op descriptors: kernels/op_table.h): arg
 * is rp_task_hooks.arg; args, the launch's argument
 * bytes; interps, its interpolations (a field they write may take any
 * value at a replay). RP_OK, or an error with its detail set (naming the
 * task, the access and both privileges). It reads nothing but its
 * arguments and allocates nothing. */
typedef rp_status (*rp_task_priv_fn)(const void *arg, const void *args,
                                     size_t args_size, const rp_access *acc,
                                     uint32_t nacc, const rp_interp *interps,
                                     uint32_t ninterp);

/* The task's own checks of a launch's args and of its accesses' layouts
 * (element type, shape), run after every other launch check passed (eager,
 * recorded, built, loaded, and instantiate's validation), so that a launch
 * the task would refuse when it runs is refused at the call instead: arg
 * is rp_task_hooks.arg; l, the launch (its accesses live). A check whose
 * outcome an interpolation of l could change is left to the run. RP_OK, or
 * the task's status with its detail set. */
typedef rp_status (*rp_task_launch_fn)(const void *arg, rp_runtime *rt,
                                       const rp_launch *l);

/* Whether a launch of the task writes every element of access i, whose
 * instance has vol[i] elements (vol: one entry per access, -1 where
 * unknown), in every run of the launch: 1 only when it is sure (its write
 * rule under args reaches the whole instance, and no interpolation can
 * change that rule); 0 when it may leave elements as they were, or cannot
 * tell. arg is the one the task was registered with (rp_task_hooks);
 * reads nothing but its arguments, allocates nothing. Copy insertion asks
 * it for an RP_WRITE access whose mirror it would otherwise fill. */
typedef int (*rp_task_cover_fn)(const void *arg, const void *args,
                                size_t args_size, const int64_t *vol,
                                uint32_t nacc, uint32_t i,
                                const rp_interp *interps, uint32_t ninterp);

typedef struct rp_task_rec {
  char *name;
  rp_task_fn cpu_fn;
  rp_task_fn gpu_fn;
  rp_task_fn check_fn; /* see rp_task_desc.check_fn; may be NULL */
  unsigned flags;
  uint64_t cost_ns;
  const rp_task_ext *ext;      /* NULL: a plain task (see rp_task_ext) */
  rp_task_priv_fn priv_fn;     /* NULL: privileges are the caller's word */
  rp_task_launch_fn launch_fn; /* NULL: args are checked when it runs */
  /* NULL: no RP_WRITE access is known to cover its instance (copy
   * insertion fills every mirror the task accesses) */
  rp_task_cover_fn cover_fn;
  const void *priv_arg; /* priv_fn's, launch_fn's and cover_fn's arg */
} rp_task_rec;

/* A task whose replayed form is planned at instantiate instead of calling
 * its function (comm/: communication ops). Its cpu_fn / gpu_fn stay its
 * eager form. The replay layer calls, for an exec that has such units:
 * exec_begin once, before the first plan; plan once per unit, in graph op
 * order (so every rank of an SPMD job plans the same units in the same
 * order); run on the lane's worker for every replay, in place of the task
 * function; release for every planned unit and then exec_end when the exec
 * is freed (also after a failed instantiate). All ops of one exec must use
 * the same rp_task_ext table. */
struct rp_task_ext {
  /* *xs: the exec's shared state for this table. */
  rp_status (*exec_begin)(rp_runtime *rt, uint32_t max_inflight, void **xs);
  void (*exec_end)(void *xs);
  /* ctx: the unit's prebuilt context (args are the unit's own copy, which
   * plan may rewrite; insts are the instances' views). *state: the unit's.
   * *as_task = 1 keeps the unit an ordinary task (its function runs with
   * the planned args: a GPU unit captured into a device graph). */
  rp_status (*plan)(void *xs, uint32_t op, rp_task_ctx *ctx, void **state,
                    int *as_task);
  /* Runs replay r; on failure *why says why (valid until the next run). */
  rp_status (*run)(void *state, uint64_t r, const char **why);
  /* Replay r passed over the unit without running it (an op it depends on
   * failed, a port failed, the replay is stale; st says which), on the
   * lane's worker in the unit's place. May be NULL. */
  void (*skipped)(void *state, uint64_t r, rp_status st);
  void (*release)(void *state);
  /* Eager: a launch of the task does not run because an op it depends on
   * failed (st; why: that failure's detail, or NULL), on the worker that
   * would have run it; args: the launch's argument bytes. It may write the
   * launch's failure detail into out (n bytes); left "", why passes on.
   * Allocates nothing (comm/'s may post an MPI send). May be NULL. */
  void (*eager_skipped)(rp_runtime *rt, const void *args, size_t args_size,
                        rp_status st, const char *why, char *out, size_t n);
};

/* What the library's own tasks carry besides an rp_task_desc; any member
 * may be NULL. ext: the replayed form (comm/); priv_fn: the privilege
 * check every launch check (eager, recorded, built, and instantiate's
 * validation) runs on the launch's accesses; launch_fn: the args and
 * layout check those launch checks run next (rp_task_launch_fn);
 * cover_fn: see rp_task_cover_fn; arg: the three's. */
typedef struct rp_task_hooks {
  const rp_task_ext *ext;
  rp_task_priv_fn priv_fn;
  rp_task_launch_fn launch_fn;
  rp_task_cover_fn cover_fn;
  const void *arg;
} rp_task_hooks;

/* rp_task_register with hooks (NULL: none): the task's record holds them
 * before its id or name can be found, so no launch ever sees the task
 * without them. Errors as rp_task_register. */
rp_status rp__task_register_with(rp_runtime *rt, const rp_task_desc *d,
                                 const rp_task_hooks *h, rp_task_id *out);

/* Runs t with ctx on the calling thread, which must be ctx->proc's own (a
 * queue item running on it), inside an NVTX range named after the task.
 * Picks the variant for ctx->kind; for a GPU it sets ctx->stream to the
 * processor's stream. A CPU variant ran to completion: its status is
 * returned (a positive one becomes RP_ETASK), *queued = 0. A GPU variant
 * only enqueues device work: once it did, gpu_done(arg) is queued behind
 * that work on the stream (it runs once, on a CUDA host thread), *queued =
 * 1 and RP_OK is returned; on failure *queued = 0 and gpu_done never runs.
 * RP_EPROC when t has no variant for the kind. */
rp_status rp__task_invoke(rp_runtime *rt, const rp_task_rec *t,
                          rp_task_ctx *ctx, void (*gpu_done)(void *arg),
                          void *arg, int *queued);

/* Stable pointer to a registered task, NULL when id is unknown. */
const rp_task_rec *rp__task_get(const rp_runtime *rt, rp_task_id id);
uint32_t rp__task_count(const rp_runtime *rt);

/* The task context. Built by the layer that runs a task; read by tasks
 * through the rp_ctx_* accessors. */
struct rp_task_ctx {
  rp_runtime *rt;
  rp_proc proc;
  rp_proc_kind kind;
  uint32_t shard, shards;
  void *stream;
  const void *args;
  size_t args_size;
  uint32_t naccess;
  const rp_instance_info *insts; /* naccess entries */
  void *workspace;
  size_t workspace_bytes;
  uint64_t replay; /* UINT64_MAX when eager (and replay_at is NULL) */
  /* GPU tasks in an exec: this op's argument bytes in the GPU's device
   * parameter buffer (replay/lower.h), else NULL. */
  const void *dev_args;
  /* Inside a replay: where the running lane keeps the current replay
   * number, so the prebuilt context need not be rewritten per replay. */
  const uint64_t *replay_at;
};

/* ---------------------------------------------------------------------- */
/* Processors, replay mode, hooks into the worker loop. */

unsigned rp__cpu_workers(const rp_runtime *rt);
/* How long a host thread waiting on this runtime's replays or events
 * busy-spins before it yields (rp_backoff.spin_ns): see
 * rp_tunables.host_spin_ns. */
uint64_t rp__host_spin_ns(const rp_runtime *rt);

/* The engine's part of rp_runtime_create_model (reprise.h; the public call
 * attaches the layers, comm/runtime.c). A model of a machine:
 * the processors and memories `m` names, every processor reaching every
 * memory, and instances without storage (info.ptr NULL). It has CPU
 * worker threads but no device: graphs load, dump, lint and (CPU-only)
 * instantiate; nothing on it may run. Destroy with rp_runtime_destroy. */
rp_status rp__runtime_create_model(const rp_machine_desc *m, rp_runtime **out);
/* 1 when rt was made by rp__runtime_create_model. */
int rp__runtime_is_model(const rp_runtime *rt);
const rp_proc_info *rp__proc(const rp_runtime *rt, rp_proc p); /* NULL: bad */

/* A poller the layer above installs into every CPU worker's loop: called
 * whenever the worker's queue is empty; returns nonzero if it did work.
 * `worker` is the CPU worker index. */
typedef int (*rp_poll_fn)(void *arg, unsigned worker);
void rp__set_poller(rp_runtime *rt, rp_poll_fn fn, void *arg);
/* Wakes CPU worker w if it sleeps (after new poller work was published). */
void rp__worker_wake(rp_runtime *rt, unsigned w);
void rp__worker_wake_all(rp_runtime *rt);

/* A worker that waits inside a replay (at a precondition, or for another
 * lane) keeps running its own queue's eager work: that work may be what
 * the wait is for (an eager op's done event as a precondition), and it
 * would otherwise wait behind the replay. On the calling thread's worker
 * (nothing on other threads):
 * - rp__worker_serve runs one queued item (1), or finds none (0);
 * - rp__worker_block_wait sleeps while futex word `word` holds v and
 *   nothing is queued to the worker (0 without sleeping when an item is
 *   queued already: serve it; else 1 after the sleep, which may be
 *   spurious: the caller re-checks). It waits on both words at once
 *   (futex_waitv: the queue's wake_seq, announced by the queue's own
 *   sleep protocol, so no enqueue is missed); on kernels without
 *   futex_waitv it announces `word` for an enqueue to wake, which can miss
 *   an enqueue racing with the announcement, so it sleeps at most
 *   RP_SERVE_SLEEP_NS there. On other threads: a plain wait on `word`. */
int rp__worker_serve(void);
int rp__worker_block_wait(_Atomic uint32_t *word, uint32_t v);
#define RP_SERVE_SLEEP_NS 10000000ll

/* 1 when an NVTX tool is attached (or REPRISE_NVTX=1): per-op ranges are
 * emitted only then, so they cost nothing otherwise. */
extern int rp__nvtx_on;

/* Thread-local: set while a task runs inside a replay, so that launches and
 * waits from it report RP_ECONTRACT. The word is owned by the replay: a
 * refused call stores its name there (a string literal). */
extern _Thread_local const char **rp__tl_replay_violation;

/* The words of a replay task's contract violation, naming the call it
 * made (the name its refusal stored), in a thread-local buffer. */
const char *rp__contract_why(const char *call);

/* Thread-local: non-zero while this thread runs an event's completion
 * callbacks (rp_event_on_complete: "cb must not block"). The replay's
 * calls that would have to wait for replays in flight (rp_replay with a
 * full window, rp_exec_destroy, ...) return RP_EBUSY there instead: the
 * replay whose completion runs the callback cannot finish before it. */
extern _Thread_local int rp__tl_in_callback;

/* Thread-local: the context of the eager task this thread runs
 * (rp__task_invoke), NULL otherwise; replayed tasks are refused by
 * rp__refuse_in_replay instead. The calls that wait for eager work to end
 * refuse what would wait for that task itself (rp__refuse_in_task, and
 * instance free and realloc of an instance it accesses). */
extern _Thread_local const struct rp_task_ctx *rp__tl_task;

/* 1 when this thread runs an eager task of rt. Such a task holds its
 * worker: a replay in flight whose lane runs there cannot progress before
 * the task returns, so the calls that wait for replays in flight refuse
 * there (RP_EBUSY), as in an event's callback. */
static inline int rp__in_task_of(const rp_runtime *rt) {
  return rp__tl_task && rp__tl_task->rt == rt;
}

/* RP_OK unless this thread runs an eager task of rt: RP_ECONTRACT naming
 * `call` (drain and destroy wait for every eager op of rt, that task's
 * included). */
static inline rp_status rp__refuse_in_task(const rp_runtime *rt,
                                           const char *call) {
  if (!rp__tl_task || rp__tl_task->rt != rt)
    return RP_OK;
  return rp__err(RP_ECONTRACT,
                 "%s called from a running task of this runtime: it waits "
                 "for every eager op to end, the calling task's included",
                 call);
}

/* RP_OK outside a replay's task; inside one, marks the replay (it
 * completes with RP_ECONTRACT) and returns RP_ECONTRACT naming `call`: the
 * rule for calls that launch, record, wait or destroy (reprise.h). */
static inline rp_status rp__refuse_in_replay(const char *call) {
  if (!rp__tl_replay_violation)
    return RP_OK;
  *rp__tl_replay_violation = call;
  return rp__err(RP_ECONTRACT, "%s called from a task inside a replay", call);
}

/* RP_OK outside an event's completion callback; inside one, RP_EBUSY
 * naming `call`: a call that would block there ("cb must not block") may
 * wait for work queued behind the callback on its own worker. */
static inline rp_status rp__refuse_in_callback(const char *call) {
  if (!rp__tl_in_callback)
    return RP_OK;
  return rp__err(RP_EBUSY,
                 "%s would block in an event's completion callback (a "
                 "callback must not block: it may wait for work queued "
                 "behind the callback on its worker)",
                 call);
}

/* Exec/graph accounting, so runtime destroy can return RP_EBUSY. */
void rp__runtime_ref(rp_runtime *rt, int delta);

/* Sticky backend error: once set, every later call fails RP_EUNUSABLE. */
rp_status rp__runtime_check(const rp_runtime *rt);
void rp__runtime_set_unusable(rp_runtime *rt, const char *why);
/* A sticky device error (engine/cuda_check.h): the device context is lost
 * for the whole process, so every runtime with a device backend up becomes
 * unusable at its next rp__runtime_check (the first why is kept). */
void rp__device_set_lost(const char *why);
/* The runtime's instance epoch (engine_impl.h inst_epoch): it moves before
 * any instance's generation changes. Valid for the runtime's life. */
const _Atomic uint64_t *rp__inst_epoch_word(rp_runtime *rt);

/* Per-layer state slots on the runtime (capture, xfer, replay, comm): owned by
 * those layers, created lazily, destroyed through the registered destructor
 * before the engine goes down. */
enum {
  RP_LAYER_CAPTURE = 0,
  RP_LAYER_XFER = 1,
  RP_LAYER_REPLAY = 2,
  RP_LAYER_COMM = 3,
  RP_LAYER_COUNT
};
void *rp__layer_get(rp_runtime *rt, int layer);
/* Installs state once (returns the existing one if another thread won).
 * drain (optional) blocks until the layer's outstanding work completed; it
 * runs in rp_runtime_drain and before the dtors at destroy. It returns
 * RP_EBUSY when work cannot complete (destroy then fails, nothing freed).
 * install (optional) runs when state wins, before any thread can get it
 * (e.g. to set the runtime's hooks that the state's work relies on). */
void *rp__layer_set(rp_runtime *rt, int layer, void *state,
                    void (*dtor)(rp_runtime *rt, void *state),
                    rp_status (*drain)(rp_runtime *rt, void *state),
                    void (*install)(rp_runtime *rt, void *state));

/* 1 while rp_runtime_destroy drains the layers (they may then cancel work
 * that can never run instead of waiting for it). */
int rp__runtime_destroying(const rp_runtime *rt);
/* RP_EBUSY naming `call` once rp_runtime_destroy has begun to drain and
 * poison (it runs callbacks and tasks that may call back in): a graph or
 * exec made then would outlive the runtime, which no longer checks for
 * them. RP_OK otherwise. */
rp_status rp__runtime_refuse_closing(const rp_runtime *rt, const char *call);
/* Waits until *outstanding (ops of some layer not yet completed) is 0.
 * While the runtime is being destroyed and the count stays put for 100 ms,
 * user events nobody triggered are poisoned (RP_EBUSY) so the ops gated on
 * them complete; RP_EBUSY ("N <what> cannot complete") when even that does
 * not help within 10 s. */
rp_status rp__drain_count(rp_runtime *rt, _Atomic uint64_t *outstanding,
                          const char *what);

/* The engine's part of rp_runtime_create: the configuration (environment
 * applied unless cfg->ignore_env), processors, memories, backends, the
 * event table and the registries. The public rp_runtime_create
 * (comm/runtime.c) composes it with the layers that attach themselves at
 * creation (the communication layer); the engine calls none of them. On
 * failure nothing is left. */
rp_status rp__runtime_create_engine(const rp_runtime_config *cfg,
                                    rp_runtime **out);
/* Tears down a runtime that was never handed out (a composition's failure
 * path after rp__runtime_create_engine): no checks, no quarantine. */
void rp__runtime_discard(rp_runtime *rt);
/* The configuration the runtime was created with, environment applied. */
const rp_runtime_config *rp__runtime_config(const rp_runtime *rt);

/* The CUDA backend's opaque state (NULL when the runtime has none). */
void *rp__cuda_state(rp_runtime *rt);

/* Worker allocation counters (jemalloc). */
void rp__alloc_counter_register(rp_runtime *rt, unsigned worker);

#endif
