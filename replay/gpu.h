/* replay/gpu.h — private to the device half of the lowering (lower.h
 * describes the whole): gpu_build.c builds an exec's device side at
 * instantiate (streams, parameter buffers, cross-GPU events, segment
 * graphs) and frees it; gpu_launch.c launches segments at every replay and
 * completes them (the poller, host callbacks, quiesce); trace.c keeps the
 * device times of traced replays. All of them reach the device only through
 * the backend interface's device slots (engine/device_ops.h); a runtime
 * without a device backend has no GPU unit to lower (a model runtime has GPU
 * units but skips the build). */
#ifndef RP_REPLAY_GPU_H
#define RP_REPLAY_GPU_H

#include "lower.h"

#include <time.h>

/* The exec's device slots (set first thing by rp__lower_build). */
#define DV(ex) ((ex)->lw->dev)

static inline void rp__nap(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* Capture streams per GPU. cuBLAS gives every stream its own workspace
 * slice (kernels/cuda_kernels.cuh), and a captured GEMM keeps the slice of
 * the stream it was captured on: two nodes that may run concurrently must
 * therefore come from different capture streams. Each segment member gets
 * one of these streams ("color"); a member on the same color as an earlier
 * one, not already ordered after it, gets an extra edge, as stream order
 * would. 4: a 4-wide fork-join runs fully parallel. cuBLAS makes 8
 * slices per device up front and one more for each further stream, up to
 * 256 (kernels/cuda_kernels.cuh): only a stream that gets none (past the
 * limit, or an allocation that failed) runs its GEMMs without a workspace
 * (correct, maybe slower). */
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
  void *cap[CAPTURE_STREAMS]; /* blocking: see stream_create_
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

/* Device times of traced replays (trace.c arms and reads them; the
 * launcher records the events). */
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

/* ---- between the files ---- */

/* A unit's name for NVTX ranges. */
static inline const char *rp__unit_label(const rp_unit *u) {
  return u->kind == RP_UNIT_COPY ? "copy" : u->name;
}

/* gpu_launch.c: the runtime's poller thread. register adds ex (lr->lock
 * held), unregister removes a quiesced ex and waits out a pass that may
 * still look at it, stop ends the thread (every exec gone). */
rp_status rp__gpu_poller_register(lower_rt *lr, rp_exec *ex);
void rp__gpu_poller_unregister(lower_rt *lr, rp_exec *ex);
void rp__gpu_poller_stop(lower_rt *lr);

#endif
