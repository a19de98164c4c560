/* capture/capture_impl.h — the capture layer's per-runtime state. Only
 * the capture sources include this. */
#ifndef RP_CAPTURE_IMPL_H
#define RP_CAPTURE_IMPL_H

#include "capture.h"
#include "xfer/xfer.h"

/* Handles handed out while recording are not engine events: the top bit
 * marks them, bit 62 marks a precondition port, bits 32..61 carry the
 * capture's serial (so a reference from another capture is rejected) and the
 * low 32 bits the op or port index + 1. */
#define RP_REF_BIT (1ull << 63)
#define RP_REF_PORT (1ull << 62)
#define RP_REF_SERIAL(id) ((uint32_t)(((id) >> 32) & 0x3fffffffu))

/* Bytes of task arguments per launch (launches, the builder, graph files). */
#define RP_MAX_ARGS (1u << 20)

typedef struct rp_capture_state {
  rp_runtime *rt;
  /* Eager mode: program-order dependence analysis, serialized by `lock`.
   * Completion paths never take it. */
  pthread_mutex_t lock;
  rp_analysis eager;
  uint32_t rr;        /* round-robin cursor for RP_PROC_ANY */
  rp_dep_set scratch; /* per-launch dependency list, reused under lock */
  rp_event *evs;      /* the same as events, reused under lock */
  uint32_t evs_cap;
  uint8_t *ord; /* per evs entry: order-only (token.order), under lock */
  uint32_t ord_cap;
  /* Eager ops launched and not completed, counted by the drain epoch they
   * were issued in (epoch & 1, read under lock): a drain starts a new
   * epoch and waits for the old one's count only, so launches from other
   * threads meanwhile cannot keep it waiting for ever. drain_lock lets one
   * drain at a time flip and wait. drain_failed (under drain_lock): the
   * last drain gave up, leaving ops in the epoch it closed, so the next
   * drain waits for both epochs. */
  _Atomic uint64_t outstanding[2];
  uint32_t epoch;
  int drain_failed;
  pthread_mutex_t drain_lock;

  /* Recording: one capture per runtime at a time, owned by one thread. */
  _Atomic int recording;
  /* the recording thread's rp__thread_token(); atomic: launches of
   * other threads read it while the next capture's begin writes it */
  _Atomic(const void *) owner;
  uint32_t serial;
  rp_graph *graph;
  rp_analysis rec;
  int failed;              /* a recorded launch failed: end returns the error */
  char failed_detail[256]; /* that launch's detail, for end's */
  /* rp_capture_name_next: the name of the next launch's ops ("" none);
   * keep_name holds it over the copies of one parallel operator */
  char next_name[RP_NAME_MAX + 1];
  const char *call; /* the launch call recording now ("rp_launch_task") */
  int keep_name;

  /* Copy insertion (insert.c), for the open capture's mirrors: mvalid[k]
   * is 1 while mirror k holds its source's current contents (as of the
   * last recorded op); mnext chains the mirrors of one source, mhead[slot]
   * is the first mirror (+ 1) of the source in that engine slot. */
  uint8_t *mvalid;
  uint32_t *mnext;
  uint32_t mcap;
  uint32_t *mhead;
  uint32_t hcap;
  /* test hook (rp__capture_set_reach); NULL: the access matrix */
  rp_reach_fn reach;
  void *reach_arg;
} rp_capture_state;

/* The runtime's capture state, created on first use (NULL on ENOMEM). */
rp_capture_state *rp__capture_state(rp_runtime *rt);
/* Tests: the room of inst's eager dependence sets (rp__analysis_room). */
uint32_t rp__eager_room(rp_runtime *rt, rp_inst inst);
/* A word unique to the calling thread among live threads. */
const void *rp__thread_token(void);
/* 0 no capture open on the runtime, 1 this thread's, -1 another's (no
 * detail written). A task body or an event's callback borrows its thread:
 * on the capturing thread it gets -1 too (the capture is not its own). */
int rp__capture_owner(const rp_capture_state *cs);
/* What the calling code borrows its thread as ("an event's callback", "a
 * running task"), or NULL for the thread's own code. */
const char *rp__capture_borrower(void);
/* 1 when the calling thread is recording on rt; RP_ECAPTURE (with detail)
 * when another thread is, or when the caller is a task or a callback on
 * the capturing thread. */
rp_status rp__capture_mode(rp_capture_state *cs, int *recording);

/* The eager issue protocol (eager.c), shared by tasks and copies: begin
 * locks the analysis and computes the op's dependencies (npre events) and a
 * CPU worker to follow; the caller allocates its op with npre gate waiters;
 * end creates the done event into *done_slot, arms the gate (the op may run
 * and be freed from then on), records the op and unlocks. When end fails
 * the gate was not armed and the op is still the caller's. abort unlocks
 * after a failure between begin and end. end writes the op's drain epoch
 * into *epoch_slot (the op's own field) before arming; the op calls
 * rp__eager_op_done with it once it completed. *armed says whether end
 * armed the gate. */
rp_status rp__eager_begin(rp_capture_state *cs, const rp_access *acc,
                          uint32_t nacc, int copy, rp_event wait,
                          uint32_t *npre, rp_proc *hint);
rp_status rp__eager_end(rp_capture_state *cs, rp_gate *gate, rp_proc proc,
                        rp_gate_waiter *waiters, const rp_access *acc,
                        uint32_t nacc, int copy, rp_event *done_slot,
                        uint8_t *epoch_slot, rp_event *done, int *armed);
void rp__eager_abort(rp_capture_state *cs);
void rp__eager_op_done(rp_capture_state *cs, uint8_t epoch);
/* Eager execution (eager.c). Validated input. */
rp_status rp__eager_task(rp_capture_state *cs, const rp_launch *l,
                         rp_event *done);
rp_status rp__eager_copy(rp_capture_state *cs, const rp_copy *c,
                         rp_event *done);
/* Recording (record.c). */
rp_status rp__record_op(rp_capture_state *cs, const rp_gop *op, rp_event wait,
                        rp_event *ref);
/* Entry checks every launch call makes: arguments, contract (not from a task
 * inside a replay), runtime usable; returns the capture state and whether
 * this thread records. */
rp_status rp__launch_enter(rp_runtime *rt, const void *arg, const char *what,
                           rp_capture_state **cs, int *recording);
/* A launch call's end while recording: a failed call spends the name
 * rp_capture_name_next gave it too (it is for that call only). Returns
 * st. */
static inline rp_status rp__launch_leave(rp_capture_state *cs, int recording,
                                         rp_status st) {
  if (st && recording && cs) {
    cs->next_name[0] = '\0';
    cs->keep_name = 0;
  }
  return st;
}
/* A launch that recorded part of itself failed with st (its detail set):
 * the capture fails, rp_capture_end quoting the first such detail. */
static inline void rp__capture_fail(rp_capture_state *cs, rp_status st) {
  if (cs->failed)
    return;
  cs->failed = (int)st;
  snprintf(cs->failed_detail, sizeof cs->failed_detail, "%s",
           rp_error_detail());
}
/* RP_OK when e is RP_NO_EVENT or a valid reference of the open capture. */
rp_status rp__record_check_ref(const rp_capture_state *cs, rp_event e,
                               const char *what);
/* Copy insertion (insert.c): records a task op, with mirrors and inserted
 * copies for the accesses its processor cannot reach (unless the capture
 * turned insertion off). On an error after part of it was recorded the
 * capture is marked failed (rp_capture_end returns the error). */
rp_status rp__record_task(rp_capture_state *cs, const rp_gop *op, rp_event wait,
                          rp_event *ref);
/* After any op was recorded: the mirrors of the instances it writes no
 * longer hold their sources' contents. */
void rp__insert_note_writes(rp_capture_state *cs, const rp_gop *op);
/* Frees the open capture's insertion state. */
void rp__insert_reset(rp_capture_state *cs);
/* Validation shared by eager and recorded launches. */
rp_status rp__check_launch(rp_runtime *rt, const rp_launch *l, int recorded);
/* l's interpolations, numbered from `first` in the details (an op's
 * numbering when they join it). */
rp_status rp__check_interps(const rp_launch *l, const char *name,
                            uint32_t first);
/* The refusal of an interpolation of a task planned once at instantiate
 * (rp_task_ext: the communication ops), whose replays never read
 * interpolated args; %s: the task's name. */
#define INTERP_EXT_REFUSED                                                     \
  "task '%s' is a communication op: its arguments are the library's, "         \
  "planned once at instantiate, so no interpolation applies"
/* Plans (and releases) c to validate it; op names it in errors
 * (UINT32_MAX: not a graph op). */
rp_status rp__check_copy(rp_runtime *rt, const rp_copy *c, rp_op_id op);

/* ---- graph files and dumps (graph_io.c, graph_load.c, dump.c) ---- */

/* The distinct instances g's ops reference, in first-use order: ops in
 * order, a task's accesses in order, a copy's source before its
 * destination (the instance table of a graph file). *out is the caller's
 * to free (NULL when *n is 0). */
rp_status rp__graph_inst_table(const rp_graph *g, rp_inst **out, uint32_t *n);
/* Writes g as a graph file to f (the JSON dump is the file format).
 * RP_EUNSUPPORTED without cJSON. */
rp_status rp__graph_json_write(const rp_graph *g, FILE *f);

/* Names shared by graph files and dumps ("?" when out of range). */
const char *rp__priv_name(rp_privilege p);     /* R W RW RED */
const char *rp__redop_name(rp_redop r);        /* none sum */
const char *rp__domain_name(rp_copy_domain d); /* intersect src dst rect */
const char *rp__pop_name(rp_pop_kind k);       /* replicate ... */
const char *rp__mem_kind_name(rp_mem_kind k);  /* system pinned gpu */

#endif
