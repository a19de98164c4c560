/* replay/lower.h — lowering an exec's GPU work onto CUDA graphs.
 *
 * GPU units (tasks on a GPU processor, device copies) are not run by CPU
 * lanes. Each GPU is a "virtual lane" (lane index = its processor id) whose
 * units are placed like any others, so the scheduler's waits, vector
 * clocks and wrap-around analysis cover them unchanged; nobody runs that
 * lane. Instead its units are cut into segments and each segment is issued
 * by one launcher unit (RP_UNIT_LAUNCH) in a CPU lane:
 *
 * Logical GPUs that share a physical device are one "GPU" for the cut: the
 * cut sees each GPU unit on its device's leader lane (the lowest GPU
 * processor of that device), so their work lands in the same segments and
 * the same CUDA graphs, launched on the leader's stream; dependencies
 * between them are graph edges, not events.
 *
 * Cut (rp__lower_cut, pure): a unit's key is (port bit, depth). The port
 * bit is set when the unit depends (transitively) on a precondition port;
 * depth grows by one across every host -> GPU edge and across a GPU -> GPU
 * edge whose producer GPU sorts after the consumer's. Keys never decrease
 * along an edge. A segment is the GPU units of one GPU with one key;
 * segments launch in (key, GPU) order, so every producer segment of
 * another GPU was launched before its consumers (device-side event waits
 * then only refer to records already issued), and every host unit a
 * segment depends on has a smaller key. Device work that depends on a port
 * or a host unit therefore sits in a segment launched only after that
 * dependency completed, while work that does not runs ahead.
 *
 * Launch (rp__lower_launch, on the launch lane): waits for the segment's
 * host dependencies (the launcher's own waits, plus its members' waits on
 * CPU lanes), blocks on its precondition ports, decides the members'
 * status (poison, stale), refreshes the GPU's device parameter buffer
 * (first segment of that GPU in a replay), waits on the events of other
 * GPUs' producers, then launches the CUDA graph (or, when something must
 * be skipped, CUDA graphs are off, or the segment cannot be a graph,
 * issues the members one by one on the same stream). A host function
 * enqueued after it publishes the GPU lane's progress (for host units
 * that wait on device work), delivers postconditions, and at the GPU's
 * last segment of the replay decrements the replay's completion counter:
 * each GPU is one completion source, as each CPU lane is.
 *
 * Private to replay/. */
#ifndef RP_REPLAY_LOWER_H
#define RP_REPLAY_LOWER_H

#include "replay_impl.h"

/* ---- cutting (pure: no device, tested on CPU-only data) ---- */

#define RP_KEY_PORT (1u << 31) /* key bit: depends on a precondition port */

typedef struct rp_cut_in {
  uint32_t n;               /* units */
  const uint32_t *order;    /* a topological order of the n units */
  const int32_t *gpu;       /* per unit: GPU (>= 0, its lane) or -1: host */
  const uint8_t *port;      /* per unit: 1 when bound to a precondition port
                               (NULL: none is) */
  const uint32_t *pred_off; /* unit u's predecessors are */
  const uint32_t *npred;    /* preds[pred_off[u] .. + npred[u]) */
  const uint32_t *preds;
} rp_cut_in;

typedef struct rp_cut_seg {
  int32_t gpu;
  uint32_t key;
  uint32_t first, n; /* members[first .. first + n) */
} rp_cut_seg;

typedef struct rp_cut {
  uint32_t *key;    /* per unit (host units too) */
  uint32_t *seg;    /* per unit: its segment, UINT32_MAX for host units */
  rp_cut_seg *segs; /* in launch order: by (key, gpu) */
  uint32_t nseg;
  uint32_t *members; /* GPU units grouped by segment, each group in the
                        input's topological order */
} rp_cut;

/* Cuts the GPU units of a unit graph into segments (see the top of this
 * file). On success *out owns its arrays (rp__lower_cut_free); on
 * RP_ENOMEM it holds nothing. */
rp_status rp__lower_cut(const rp_cut_in *in, rp_cut *out);
void rp__lower_cut_free(rp_cut *c);

/* ---- the lowered exec ---- */

typedef struct rp_seg {
  uint32_t lane; /* the GPU's lane (= its processor id) */
  uint32_t gpu;  /* index into rp_lower.gpus */
  uint32_t key;
  uint32_t launch;          /* its launcher unit */
  uint32_t first, n;        /* members: rp_lower.members[first .. first + n) */
  uint32_t pub_off, npub;   /* rp_lower.pubs: each lane it has members on,
                               with the lane position after its last one
                               (placement) */
  uint32_t wait_off, nwait; /* members' CPU-lane waits: rp_lower.waits */
  uint32_t ev_off, nev;     /* other GPUs' events to wait for first */
  uint8_t first_of_gpu;     /* refreshes the GPU's parameters */
  uint8_t last_of_gpu;      /* its callback is the GPU's completion */
  uint8_t needs_cb;         /* host units wait for it, or postconditions,
                               or last_of_gpu */
  uint8_t any_post;
  const char *eager; /* NULL: a CUDA graph; else why it is issued
                        op by op */
  void *graph;       /* cudaGraph_t it was instantiated from */
  void *exec;        /* cudaGraphExec_t (NULL when eager) */
} rp_seg;

struct rp_lower_streams; /* gpu.h */
struct rp_lower_rt;

typedef struct rp_gpu_lane {
  uint32_t lane;  /* processor id */
  uint32_t group; /* index (in rp_lower.gpus) of the group's leader:
                     logical GPUs on one physical device form a group,
                     whose segments are cut, captured and launched
                     together on the leader's streams */
  uint32_t nsrc;  /* leaders: the group's lanes with units (completion
                     sources of a replay; placement) */
  int device;     /* physical CUDA device */
  struct rp_lower_streams *streams; /* this exec's own streams on this GPU
                                       (leased from the runtime at
                                       instantiate, handed back at
                                       destroy) */
  void *stream;       /* streams->replay: the exec's replay stream */
  size_t param_bytes; /* the GPU task units' argument bytes, 16-aligned:
                         a group's leader holds those of the whole group
                         (one buffer, one copy per replay); 0 elsewhere */
  char *dev_params;   /* device parameter buffer (owned) */
  char *staging;      /* pinned: one param_bytes slot per replay slot */
  rp_mem dev_mem, pin_mem;
  uint32_t *interp_units;    /* GPU task units with argument interpolations */
  rp_task_fn *interp_checks; /* per interp unit: its task's check_fn */
  uint32_t ninterp_units;
} rp_gpu_lane;

/* One host-function record per replay slot and segment: the callback's
 * argument, so that enqueuing it allocates nothing. */
typedef struct rp_seg_cb {
  rp_exec *ex;
  uint32_t seg, slot;
  _Atomic uint64_t rel; /* replay (relative to the epoch); release-stored by
                           the launcher, acquire-loaded by the callback */
} rp_seg_cb;

/* A lane a segment has members on, and its position after them. */
typedef struct rp_seg_pub {
  uint32_t lane, end;
} rp_seg_pub;

typedef struct rp_lower {
  const rp_device_ops *dev; /* the runtime's device slots (gpu_build.c) */
  uint32_t nseg;
  rp_seg *segs;         /* in launch order */
  uint32_t *members;    /* units grouped by segment */
  uint32_t *seg_of;     /* per unit (launchers too): segment or
                           UINT32_MAX */
  uint32_t nop_units;   /* units before the launchers */
  uint32_t launch_lane; /* the CPU lane every launcher is pinned to */
  uint32_t ngpu;
  rp_gpu_lane *gpus;
  uint32_t *gpu_of_lane;  /* per lane: index into gpus or UINT32_MAX */
  int graphs;             /* 0: REPRISE_CUDA_GRAPHS=0, every segment eager */
  struct rp_lower_rt *lr; /* the runtime's stream sets (gpu_build.c) */
  struct rp_lower_trace *trace; /* device times of traced replays, or NULL:
                                   set and cleared by the host thread while
                                   no traced replay is in flight (as
                                   ex->trace) */
  /* built after placement */
  rp_seg_pub *pubs; /* per segment: pub_off, npub */
  rp_wait *waits;   /* per segment: its members' CPU-lane waits */
  uint32_t nwaits;
  uint32_t waits_cap;  /* room in waits (rp__lower_reserve) */
  void **events;       /* per unit: cudaEvent_t recorded after it for
                          consumers on other GPUs, or NULL */
  void **seg_events;   /* per segment: events to wait for (ev_off) */
  void **nodes;        /* per member slot: its node in the template */
  uint8_t *colors;     /* per member slot: its capture stream */
  uint32_t *midx;      /* per unit: its index among its segment's
                          members */
  uint32_t *param_off; /* per unit: offset in its GPU's parameters */
  rp_seg_cb *cbs;      /* max_inflight x nseg */
  void **done_events;  /* per segment: recorded on the replay stream
                          after its work, waited for on the side
                          stream before its host function */
  int inline_ok;       /* the launch lane holds only launchers with
                          nothing to wait for, and no other CPU lane
                          has units: rp_replay may run the launch lane
                          itself (no thread hop), see scheduler.c */
  /* counters for rp_exec_stats, written by whoever runs the launch lane
   * (one thread at a time, replays in order), read relaxed */
  _Atomic uint64_t n_graph_launches; /* CUDA graph launches */
  _Atomic uint64_t n_param_copies;   /* parameter refresh copies */
  _Atomic uint64_t n_op_by_op;       /* GPU ops issued one by one */
  _Atomic uint64_t n_callbacks;      /* host functions enqueued */
  _Atomic uint64_t n_host_waits;     /* waits a launcher did on the host
                                        (preconditions, CPU lanes) */
  _Atomic uint64_t n_stream_waits;   /* cross-GPU event waits enqueued */
  _Atomic uint64_t *owed; /* max_inflight x ngpu: r + 1 while the GPU's
                             last segment of replay r still owes the slot
                             its completion (claimed by exchange or CAS
                             to 0: exactly once), else 0 */
  /* Completion by polling (lw->polled): the GPU's last segment of each
   * replay ends with a record of slot_events[slot x ngpu + g] on the
   * replay stream, and the runtime's GPU poller thread (gpu_build.c)
   * completes replays in stream order as their events complete: no host
   * function at all. Used when no segment but the GPUs' last ones needs a
   * callback (placement), unless REPRISE_GPU_POLL=0. */
  int poll_ok; /* REPRISE_GPU_POLL allows it (instantiate):
                  unset or 1: poll completion words (or
                  events where the driver cannot write
                  them), "events": poll events, 0: host
                  functions on the side stream */
  int poll_events;
  int polled;                 /* this placement completes by polling */
  uint32_t *words;            /* max_inflight x ngpu, pinned: the device
                                 writes r + 1 there after replay r's work
                                 (a stream memory write); NULL where the
                                 driver has none: then slot_events */
  char *words_dev;            /* the device address of words */
  void **slot_events;         /* max_inflight x ngpu */
  uint8_t *by_word;           /* max_inflight x ngpu: 1 when that replay
                                 ends with a word write (it was alone in
                                 flight: latency matters, and reading the
                                 word is immediate), 0 with an event record
                                 (others in flight: a stream memory write's
                                 fence would cost each replay ~1.8 us of
                                 device time on an H100) */
  _Atomic uint64_t *launched; /* max_inflight x ngpu: r + 1 once replay r's
                                 event record was issued (release) */
  uint64_t *rel_of;           /* max_inflight x ngpu: replay r's rel */
  uint64_t *next_r;           /* per GPU: the next replay the poller
                                 completes (poller thread only) */
  uint32_t *last_seg;         /* per GPU: its last segment */
  RP_ALIGNED_LINE _Atomic uint32_t cb_pending; /* callbacks enqueued and
                                                  not yet finished */
} rp_lower;

/* lower.c: after setup_units and the initial unit order, before slots and
 * lanes: cuts the GPU units, appends one launcher unit per segment (preds:
 * the segment's host predecessors and the previous launcher), re-orders
 * ex->order by key. Leaves ex->lw NULL when the exec has no GPU unit. */
rp_status rp__lower_plan(rp_exec *ex);
/* lower.c: before a placement changes anything (rp__place_finalize): the
 * room rp__lower_placed fills, for a placement of at most most_waits
 * waits. RP_ENOMEM leaves the placement in effect as it was. */
rp_status rp__lower_reserve(rp_exec *ex, uint32_t most_waits);
/* lower.c: end of every placement: segment lane positions, callbacks
 * needed, the members' CPU-lane waits. Cannot fail: rp__lower_reserve
 * made the room. */
void rp__lower_placed(rp_exec *ex);
/* lower.c: why task op `op` (on a GPU) cannot be captured into a CUDA
 * graph, or NULL: its shard count is interpolated, or it interpolates
 * argument bytes its task reads on the host at issue (no
 * RP_TASK_DEVICE_ARGS), which a graph would freeze. Pure: tested on CPU. */
const char *rp__lower_task_blocker(const rp_runtime *rt, const rp_gop *op);
/* lower.c: why segment k cannot be one CUDA graph (its members are then
 * issued op by op), or NULL: CUDA graphs are off (REPRISE_CUDA_GRAPHS=0),
 * a copy touches pageable host memory, or a member is a task op with a
 * blocker (rp__lower_task_blocker). Pure: decided at plan time, so that a
 * model of a machine (no build) shows the decision the build makes. */
const char *rp__lower_eager_reason(const rp_exec *ex, uint32_t k);
/* lower.c: the lowering's figures for rp_exec_stats_get. */
void rp__lower_stats(const rp_exec *ex, rp_exec_stats *out);
/* lower.c: segments section of rp_exec_dump's text. */
void rp__lower_dump(const rp_exec *ex, FILE *f);

/* gpu_build.c and gpu_launch.c */
/* After placement: parameter buffers, events, CUDA graphs. */
rp_status rp__lower_build(rp_exec *ex);
/* The launcher unit ui of replay slot s (run by its lane). In a traced
 * replay (s->traced) *t_issue (may be NULL) gets the host clock after the
 * segment's waits, and the result is the first failure among its members
 * (RP_ESTALE for a stale replay); untraced replays get RP_OK and read no
 * clock. */
rp_status rp__lower_launch(rp_exec *ex, uint32_t ui, rp_slot *s, uint64_t rel,
                           uint64_t *t_issue);
/* The calling thread's current CUDA device, and its restoration after
 * rp_replay launched from that thread (launches make their GPU's device
 * current; a caller's own choice of device must survive). -1: none. */
int rp__lower_device_save(rp_exec *ex);
void rp__lower_device_restore(rp_exec *ex, int dev);
/* Waits until every replay completed and every host callback returned.
 * Returns 1 when the runtime became unusable meanwhile (a lost CUDA
 * context): callbacks may never run, so the exec must be leaked. */
int rp__lower_quiesce(rp_exec *ex);
/* Frees what rp__lower_plan and rp__lower_build made (exec quiesced). */
void rp__lower_free(rp_exec *ex);
/* rp_exec_update_args for the GPU units of op (exec quiesced, new args
 * already in the units): re-captures, updates in place or re-instantiates;
 * *reinst set to 1 when a CUDA graph had to be re-instantiated. */
rp_status rp__lower_update(rp_exec *ex, rp_op_id op, int *reinst);
/* Traces (trace.c): device times of segments. For the traced replays
 * [from, from + n), every segment launch records two timing events on its
 * GPU's replay stream, around the segment's work; a reference event per
 * GPU, recorded and waited for here, ties them to the host clock. Creates
 * every event now (none on the replay path). RP_ERANGE when n x segments
 * exceeds RP_LOWER_TRACE_MAX_SEGS. */
#define RP_LOWER_TRACE_MAX_SEGS (1u << 15)
rp_status rp__lower_trace_start(rp_exec *ex, uint64_t from, uint32_t n);
/* Segment k of traced replay r ran on its device over [*t0, *t1] (host
 * clock, rp__now_ns): 1 when both events were recorded and completed
 * (exec quiesced), else 0. *how: "graph" or "op by op". */
int rp__lower_trace_span(rp_exec *ex, uint64_t r, uint32_t k, uint64_t *t0,
                         uint64_t *t1, const char **how);
/* Frees the events (also done by rp__lower_free). */
void rp__lower_trace_free(rp_exec *ex);

/* The replay layer's per-runtime CUDA state (the stream sets execs
 * lease), from its dtor. */
void rp__lower_rt_free(rp_runtime *rt, void *state);

#endif
