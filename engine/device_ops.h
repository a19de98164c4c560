/* engine/device_ops.h — the device slots of the backend interface: streams,
 * events, host callbacks and graph segments, for the layers above the engine
 * (the replay lowering, eager copies and tasks, the communicator). A backend
 * whose processors run asynchronous device work (the CUDA backend) fills one
 * rp_device_ops and hangs it on its rp_backend_ops (engine_impl.h, `dev`);
 * a backend without such things (the CPU backend) leaves it NULL, and
 * rp__device_ops() returns NULL for a runtime that has no device backend up.
 * Nothing above the engine includes engine/cuda/: it calls these slots.
 *
 * Types: every handle is a void * owned by the backend's API (for CUDA: a
 * stream is a cudaStream_t, an event a cudaEvent_t, a graph a cudaGraph_t, a
 * node a cudaGraphNode_t, an exec a cudaGraphExec_t). Every slot is present
 * in a table that exists; the table itself is optional.
 *
 * Processors: each logical GPU is one rp_proc with its own driver thread and
 * in-order queue; items run on that thread with the processor's physical
 * device current and enqueue their device work on the processor's stream.
 * Several logical GPUs may share one physical device.
 *
 * Errors: a failing device call returns RP_EBACKEND (RP_ENOMEM for an
 * allocation) with the statement, file:line and the device error's name in
 * rp_error_detail(); a sticky error (the device context is lost) also makes
 * the runtime unusable (every later public call returns RP_EUNUSABLE).
 * Nothing here aborts.
 *
 * Current device: calls that must create or allocate on a device make it
 * current for their duration and then restore the calling thread's previous
 * device, so a host thread's own device state is left as found. */
#ifndef RP_DEVICE_OPS_H
#define RP_DEVICE_OPS_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rp_device_ops {
  /* ---- processors ---- */

  /* The processor's eager stream (does not synchronize with a legacy
   * default stream), owned by the backend; NULL when p is not a device
   * processor of rt. Valid until the runtime is destroyed. */
  void *(*proc_stream)(rp_runtime *rt, rp_proc p);
  /* The physical device behind processor p, or -1 when p is not one. */
  int (*proc_device)(rp_runtime *rt, rp_proc p);
  /* The calling thread's current device, or -1 on an error. On a device
   * driver thread this is the processor's physical device. */
  int (*current_device)(void);

  /* ---- streams ---- */

  /* A new non-blocking stream on p's device, owned by the caller (destroy
   * with stream_destroy). RP_EPROC when p is not a device processor. */
  rp_status (*stream_create)(rp_runtime *rt, rp_proc p, void **out);
  /* A new stream on p's device that synchronizes with the legacy default
   * stream, owned by the caller. The lowering captures on such streams so
   * that a task using the legacy stream inside capture fails the capture
   * instead of running outside the graph unnoticed. */
  rp_status (*stream_create_blocking)(rp_runtime *rt, rp_proc p, void **out);
  /* Destroys a stream from stream_create* (NULL: no-op). Work already
   * enqueued on it still completes. */
  rp_status (*stream_destroy)(rp_runtime *rt, void *stream);
  /* Blocks the calling thread until all work enqueued on stream so far has
   * completed (host functions included). */
  rp_status (*stream_sync)(rp_runtime *rt, void *stream);
  /* Queries the stream without waiting: RP_OK when it is idle or still
   * busy, the error (which marks a sticky one) otherwise. */
  rp_status (*stream_poll)(rp_runtime *rt, void *stream);
  /* Work enqueued on stream after this call waits (on the device; the host
   * does not block) for the event's last record. The stream may be on
   * another device. */
  rp_status (*stream_wait_event)(rp_runtime *rt, void *stream, void *event);

  /* ---- events ---- */

  /* A new event on p's device without timing (the cheapest kind to record
   * and wait on), owned by the caller (event_destroy). */
  rp_status (*event_create)(rp_runtime *rt, rp_proc p, void **out);
  /* A new event on p's device that records timing, owned by the caller. */
  rp_status (*event_create_timed)(rp_runtime *rt, rp_proc p, void **out);
  rp_status (*event_destroy)(rp_runtime *rt, void *event); /* NULL: no-op */
  /* Captures the work enqueued on stream so far into event. The stream must
   * belong to the event's device. */
  rp_status (*event_record)(rp_runtime *rt, void *event, void *stream);
  /* Without waiting: 1 when the event's last record completed, 0 while it
   * is pending, -1 on an error (which marks a sticky one). Never blocks,
   * allocates nothing. */
  int (*event_done)(rp_runtime *rt, void *event);
  /* Blocks until the event's last record completed. */
  rp_status (*event_sync)(rp_runtime *rt, void *event);
  /* *ms = time from start to end (both timed events of one device, both
   * recorded and complete; resolution about 0.5 us). */
  rp_status (*event_elapsed_ms)(rp_runtime *rt, void *start, void *end,
                                float *ms);

  /* ---- host work and memory, in stream order ---- */

  /* Calls fn(arg) on a backend-owned host thread once the work enqueued on
   * stream before it has completed; later work on the stream waits for fn
   * to return. fn must not call the device API and must not block (it may
   * trigger engine events, which run their waiters on that thread). */
  rp_status (*launch_host_func)(rp_runtime *rt, void *stream,
                                void (*fn)(void *arg), void *arg);
  /* Sets bytes bytes at dst (device or pinned memory) to value. */
  rp_status (*memset_async)(rp_runtime *rt, void *stream, void *dst, int value,
                            size_t bytes);
  /* Copies bytes bytes (direction from the pointers). */
  rp_status (*memcpy_async)(rp_runtime *rt, void *dst, const void *src,
                            size_t bytes, void *stream);
  /* The device address of pinned host memory. */
  rp_status (*host_device_ptr)(rp_runtime *rt, void *host, void **dev);
  /* Writes value to a word of pinned host memory (dev_word: its device
   * address, host_device_ptr) once the stream's earlier work completed, with
   * a system-scope fence first, so the work's own writes are visible before
   * the word is. RP_EUNSUPPORTED where the driver has no stream memory
   * operations. */
  rp_status (*stream_write_u32)(rp_runtime *rt, void *stream, void *dev_word,
                                uint32_t value);

  /* ---- the calling thread's current device ---- */

  /* Makes physical device dev current on the calling thread for good (a
   * replay worker about to issue on that device); a no-op when it is. */
  rp_status (*device_use)(rp_runtime *rt, int dev);
  /* Makes dev current and returns the previous device in *prev, restored by
   * device_leave (host threads that called the API). */
  rp_status (*device_enter)(rp_runtime *rt, int dev, int *prev);
  void (*device_leave)(int dev, int prev);

  /* ---- graph segments ---- */

  /* Begins recording the work the calling thread enqueues on stream (only
   * this thread's unsafe calls, allocation or synchronization, fail it). */
  rp_status (*capture_begin)(rp_runtime *rt, void *stream);
  /* Always ends the recording begun on stream. On success *graph is the
   * recorded graph (the caller's: graph_destroy); on failure (the recording
   * was invalidated) *graph is NULL and the detail has the device error. */
  rp_status (*capture_end)(rp_runtime *rt, void *stream, void **graph);
  /* An empty graph, the caller's. */
  rp_status (*graph_create)(rp_runtime *rt, void **graph);
  void (*graph_destroy)(void *graph); /* NULL: no-op */
  /* Adds one op: a node running `child` (cloned into the node; the caller
   * keeps child) after deps[0..ndeps). A child without nodes becomes an
   * empty node. */
  rp_status (*graph_add_child)(rp_runtime *rt, void *graph, void *const *deps,
                               size_t ndeps, void *child, void **node);
  /* A node recording event after deps[0..ndeps) at every launch. */
  rp_status (*graph_add_event_record)(rp_runtime *rt, void *graph,
                                      void *const *deps, size_t ndeps,
                                      void *event, void **node);
  /* A node that waits, on the device, for event's last record (made by
   * another launch, possibly on another device) before its dependents run,
   * after deps[0..ndeps). */
  rp_status (*graph_add_event_wait)(rp_runtime *rt, void *graph,
                                    void *const *deps, size_t ndeps,
                                    void *event, void **node);
  /* Instantiates graph into an exec and uploads it on stream, so that the
   * first launch does not pay for the upload. */
  rp_status (*graph_instantiate)(rp_runtime *rt, void *graph, void *stream,
                                 void **exec);
  void (*graph_exec_destroy)(void *exec); /* NULL: no-op */
  /* Enqueues one run of exec on stream. */
  rp_status (*graph_launch)(rp_runtime *rt, void *exec, void *stream);
  /* Update in place: sets the child graph of `node` (a node of the graph
   * exec was instantiated from) to `child` in exec. 1 when the backend
   * accepted it; 0 when it refused (the thread's device error is cleared;
   * *why names the refusal). */
  int (*graph_exec_set_child)(rp_runtime *rt, void *exec, void *node,
                              void *child, const char **why);
  /* Update in place: applies graph's node parameters to exec. 1 when
   * accepted, 0 when refused (error cleared; *why says why). */
  int (*graph_exec_update)(rp_runtime *rt, void *exec, void *graph,
                           const char **why);
} rp_device_ops;

/* The device slots of rt's device backend, or NULL when rt has none up (a
 * CPU runtime, a build without the CUDA toolkit, a model runtime). The
 * table is a constant: callers may keep the pointer for rt's lifetime. */
const rp_device_ops *rp__device_ops(rp_runtime *rt);

/* A process-wide observer of the device streams a backend creates and
 * destroys (the kernels layer keeps a cuBLAS workspace per stream, and a
 * stream captured into a graph must have its workspace before the capture
 * begins). Called with created = 1 right after a stream is created (outside
 * any capture, with the stream's device current) and with created = 0 right
 * before it is destroyed. One hook per process; NULL removes it. The hook
 * must not fail nor call back into the engine. */
typedef void (*rp_stream_hook)(void *stream, int created);
void rp__set_stream_hook(rp_stream_hook hook);
/* Calls the hook, if one is set (the backends' stream create and destroy). */
void rp__stream_hook_call(void *stream, int created);

#endif
