/* engine/engine_impl.h — the engine's own structs: runtime, tables, backend
 * interface. Only engine/ (and engine/cpu, engine/cuda) include this. */
#ifndef RP_ENGINE_IMPL_H
#define RP_ENGINE_IMPL_H

#include "engine.h"

/* ---------------------------------------------------------------------- */
/* Chunked tables: entries never move once allocated, so readers on any
 * thread index them without a lock; growth (rare) is serialized by the
 * runtime's table lock. */

#define RP_CHUNK_SHIFT 10
#define RP_CHUNK_SIZE (1u << RP_CHUNK_SHIFT)
#define RP_MAX_CHUNKS 4096 /* 4M entries per table */

typedef struct rp_ctable {
  void *_Atomic chunks[RP_MAX_CHUNKS];
  _Atomic uint32_t size; /* entries allocated (multiple of RP_CHUNK_SIZE) */
  size_t elem;
} rp_ctable;

/* The chunks a table may grow to: RP_MAX_CHUNKS; a test seam may lower
 * it (before the tables it limits grow past it) to reach a table's end
 * without filling 4M entries. */
extern uint32_t rp__ctable_max_chunks;
/* The most entries a table holds. */
static inline uint32_t rp__ctable_capacity(void) {
  return rp__ctable_max_chunks * RP_CHUNK_SIZE;
}

static inline void *rp__ctable_at(const rp_ctable *t, uint32_t i) {
  char *c = atomic_load_explicit(&((rp_ctable *)t)->chunks[i >> RP_CHUNK_SHIFT],
                                 memory_order_acquire);
  return c + (size_t)(i & (RP_CHUNK_SIZE - 1)) * t->elem;
}

/* ---------------------------------------------------------------------- */
/* Events */

enum {
  RP_EV_PENDING = 0u,
  RP_EV_TRIGGERED = 1u,
  RP_EV_POISONED = 2u,
  RP_EV_STATE_MASK = 3u,
  RP_EV_HAS_WAITERS = 4u, /* waiter list non-empty: trigger takes the lock */
  RP_EV_SLEEPERS = 8u,    /* a host thread sleeps on the word */
};

typedef struct rp_event_slot {
  _Atomic uint32_t state; /* futex word: RP_EV_* */
  _Atomic uint32_t gen;   /* generation of the current (or next) event */
  _Atomic uint32_t refs;
  _Atomic int32_t poison;
  _Atomic uint32_t next_free; /* free list link (slot index + 1) */
  _Atomic uint32_t user;      /* created by rp_event_create */
  _Atomic uint32_t yield_us;  /* a host waiter's yield budget before it
                                 sleeps (0: REPRISE_HOST_YIELD_NS) */
  _Atomic uint32_t released;  /* the handle's own reference was dropped
                                 (rp_event_release): a second release is
                                 refused, not taken from the trigger */
  pthread_mutex_t lock;       /* guards waiters only */
  rp_ev_waiter *waiters;
  char *why; /* a poisoned event's detail (malloc'd, or NULL): written
                before the poisoning state store, freed on recycling */
} rp_event_slot;

typedef struct rp_event_table {
  rp_ctable t;
  /* Treiber stack of free slots: low 32 bits slot+1, high 32 bits an ABA
   * tag bumped on every pop. */
  _Atomic uint64_t free_head;
  pthread_mutex_t grow_lock;
  /* events reserved by the live execs (rp__event_reserve), summed */
  _Atomic uint64_t reserved;
} rp_event_table;

rp_status rp__events_init(rp_event_table *et);
void rp__events_fini(rp_event_table *et);
/* A test seam: when set, rp_event_trigger, rp_event_poison and
 * rp_event_release call it between resolving a handle to its slot and
 * taking their reference to it, rp__event_add_waiter (rp_event_on_complete,
 * rp_event_merge, gates) between resolving it and joining the slot's list
 * (the window in which another thread may complete, recycle and reuse the
 * slot). NULL outside tests. */
extern void (*rp__event_resolved_hook)(rp_runtime *rt, rp_event e);

/* ---------------------------------------------------------------------- */
/* Instances */

typedef struct rp_inst_slot {
  _Atomic uint32_t gen; /* bumped on free and on realloc */
  int live;
  rp_instance_info info;
  void *base; /* what to hand back to the allocator */
  uint32_t next_free;
  /* rp_instance_set_name; "" none. Kept by realloc, cleared by free. */
  char name[RP_NAME_MAX + 1];
} rp_inst_slot;

/* ---------------------------------------------------------------------- */
/* Backends: one interface between the engine and the hardware. The CPU
 * backend is always present (it runs host tasks); the CUDA backend adds GPU
 * processors and memories when a device answers. */

typedef struct rp_mem_rec {
  rp_mem_info info;
  const struct rp_backend_ops *be;
  int host_addressable;
} rp_mem_rec;

typedef struct rp_proc_rec {
  rp_proc_info info;
  const struct rp_backend_ops *be;
  unsigned local; /* index inside its backend (worker, logical GPU) */
} rp_proc_rec;

/* An asynchronous 2-D byte copy handed to a backend's copy_async: rows rows
 * of row_bytes bytes, row i from src + i * spitch to dst + i * dpitch
 * (pitches >= row_bytes, ranges not overlapping). The caller owns it (and
 * the storage `work`) until done runs. */
typedef struct rp_copy_async {
  rp_work work; /* the backend's (the CPU backend queues it) */
  void *dst;
  const void *src;
  size_t rows, row_bytes, dpitch, spitch;
  rp_work *done; /* done->run(done) once every byte landed */
} rp_copy_async;

typedef struct rp_backend_ops {
  const char *name;
  /* Brings the backend up and registers its processors and memories with
   * rp__add_proc / rp__add_mem. RP_ENODEV when no device answers (the detail
   * says why). */
  rp_status (*init)(rp_runtime *rt, const rp_runtime_config *cfg, void **state);
  /* Stops threads and frees the backend's state; all work has drained. */
  void (*fini)(rp_runtime *rt, void *state);
  /* Allocates zeroed, aligned bytes in one of this backend's memories. */
  rp_status (*mem_alloc)(void *state, const rp_mem_rec *m, size_t bytes,
                         size_t align, void **ptr);
  void (*mem_free)(void *state, const rp_mem_rec *m, void *ptr);
  /* Synchronous copy where at least one side is this backend's memory.
   * (optional: NULL means host memcpy) */
  rp_status (*mem_copy)(void *state, void *dst, const void *src, size_t bytes);
  /* Runs w->run(w) on processor p's thread, FIFO per processor. */
  void (*proc_enqueue)(void *state, const rp_proc_rec *p, rp_work *w);
  /* Blocks until every processor queue of this backend is empty and idle.
   * (optional) */
  void (*drain)(void *state);
  /* Copies op's bytes in processor p's order and then runs op->done: the
   * CPU backend queues op->work on the worker (memcpy per row, then done, on
   * the worker); the CUDA backend enqueues a 2-D copy on p's stream and
   * done as a host function (on a CUDA host thread). Both memories must be
   * addressable by p (the caller checks). Called from any thread but a CUDA
   * host function. An error (nothing will run, done included) when the copy
   * cannot be enqueued. (optional: NULL means the backend cannot copy, the
   * caller reports RP_EUNSUPPORTED) */
  rp_status (*copy_async)(void *state, const rp_proc_rec *p, rp_copy_async *op);
  /* Streams, events, host callbacks and graph segments (device_ops.h): the
   * only door the layers above have to a device. (optional: NULL for a
   * backend without asynchronous device work) */
  const rp_device_ops *dev;
} rp_backend_ops;

extern const rp_backend_ops rp__cpu_backend;
/* The device backend this build has (engine/cuda/), or NULL (a build without
 * the CUDA toolkit: engine/nocuda/). */
extern const rp_backend_ops *const rp__gpu_backend;
/* engine/cuda/'s tables (defined only in builds with the toolkit). */
extern const rp_backend_ops rp__cuda_backend;
extern const rp_device_ops rp__cuda_device_ops;

rp_status rp__add_proc(rp_runtime *rt, const rp_proc_info *info,
                       const rp_backend_ops *be, unsigned local, rp_proc *out);
rp_status rp__add_mem(rp_runtime *rt, const rp_mem_info *info,
                      const rp_backend_ops *be, int host_addressable,
                      rp_mem *out);

/* ---------------------------------------------------------------------- */
/* The runtime */

#define RP_MAX_PROCS 256
#define RP_MAX_MEMS 64

#define RP_RUNTIME_MAGIC 0x52505254u /* "RPRT"; RP_DEAD_MAGIC destroyed */

struct rp_runtime {
  uint32_t magic;
  uint32_t tag; /* handle tag (engine.h "Handle identity") */
  rp_runtime_config cfg;
  rp_backend_kind kind;
  const char *backend_reason;

  rp_proc_rec procs[RP_MAX_PROCS];
  unsigned nprocs;
  unsigned ncpu;         /* CPU workers: procs [0, ncpu) */
  uint64_t host_spin_ns; /* see rp__host_spin_ns */
  rp_mem_rec mems[RP_MAX_MEMS];
  unsigned nmems;
  /* access[p][m]: proc p can address memory m directly */
  unsigned char access[RP_MAX_PROCS][RP_MAX_MEMS];

  void *cpu_state;
  void *gpu_state;              /* the device backend's (NULL: none up) */
  const rp_backend_ops *gpu_be; /* that backend, once its init succeeded */
  int model; /* rp__runtime_create_model: no storage, no devices */

  rp_event_table events;

  pthread_mutex_t inst_lock; /* create/free/realloc of instances */
  rp_ctable insts;
  uint32_t inst_free;  /* free list: slot + 1, 0 = empty */
  uint32_t inst_count; /* slots handed out */
  /* set once (a layer's install, under layer_lock), read by every free
   * and realloc: the arg is stored before the hook (release) */
  _Atomic(rp_inst_release_hook) inst_hook;
  void *_Atomic inst_hook_arg;
  rp_inst_busy_hook inst_busy;
  void *inst_busy_arg;
  /* Bumped (seq_cst) whenever an instance's generation is about to change
   * (free, realloc): a replay compares it with the epoch it last checked
   * its instances at and walks them only when it moved. */
  _Atomic uint64_t inst_epoch;

  pthread_mutex_t task_lock; /* registration */
  rp_ctable tasks;
  _Atomic uint32_t ntasks;
  /* Task names: open-addressing hash of ids + 1 (0 = empty), load <= 1/2,
   * so registration and rp_task_find are O(1). Under task_lock. */
  uint32_t *task_hash;
  uint32_t task_hash_cap;

  rp_poll_fn poll_fn;
  void *_Atomic poll_arg;

  pthread_mutex_t layer_lock;
  void *layers[RP_LAYER_COUNT];
  void (*layer_dtor[RP_LAYER_COUNT])(rp_runtime *, void *);
  rp_status (*layer_drain[RP_LAYER_COUNT])(rp_runtime *, void *);

  _Atomic int32_t live_objects;     /* graphs + execs */
  _Atomic uint64_t ops_outstanding; /* engine ops (ops.c) not completed */
  _Atomic int destroying;
  /* 1 while rp_runtime_destroy drains and poisons the pending user events
   * (and for good once it frees): rp_event_create refuses, since an event
   * made by a callback or task it runs would outlive it */
  _Atomic int closing;
  _Atomic int unusable;
  char unusable_why[256];

  /* jemalloc per-worker allocated-bytes counters (NULL without jemalloc) */
  uint64_t *_Atomic *worker_alloc;
};

/* The backend state of processor p (CPU or CUDA). */
static inline void *rp__proc_backend_state(const rp_runtime *rt, rp_proc p) {
  return rt->procs[p].be == &rp__cpu_backend ? rt->cpu_state : rt->gpu_state;
}

/* Waits until every engine op (rp__spawn_task, rp__spawn_copy) completed;
 * while the runtime is being destroyed, cancels user events nobody
 * triggers after a quiet period, and gives up with RP_EBUSY when ops still
 * cannot complete. */
rp_status rp__ops_drain(rp_runtime *rt);

rp_status rp__ctable_init(rp_ctable *t, size_t elem);
void rp__ctable_fini(rp_ctable *t);
/* Ensures index i exists (caller holds the table's growth lock). */
rp_status rp__ctable_reserve(rp_ctable *t, uint32_t i);

#endif
