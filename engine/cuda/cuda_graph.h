/* engine/cuda/cuda_graph.h — the CUDA Graphs calls (and the few stream and
 * device calls) the replay layer's lowering needs (replay/gpu_build.c,
 * gpu_launch.c), C callable without CUDA types: a graph is a cudaGraph_t, a
 * node a cudaGraphNode_t, an exec a cudaGraphExec_t, passed as void *. Exists
 * only in builds with REPRISE_HAVE_CUDA.
 *
 * Errors: as in cuda_backend.h (RP_EBACKEND with the statement, file:line
 * and CUDA error name in rp_error_detail(); a sticky error makes the
 * runtime unusable). Nothing here aborts. */
#ifndef RP_CUDA_GRAPH_H
#define RP_CUDA_GRAPH_H

#include "reprise.h"

#include <stddef.h>

/* A new stream on p's device that synchronizes with the legacy default
 * stream (cudaStreamDefault), owned by the caller (rp__cuda_stream_destroy).
 * The lowering captures on such streams so that a task using the legacy
 * stream inside capture fails the capture (cudaErrorStreamCaptureImplicit)
 * instead of running outside the graph unnoticed. */
rp_status rp__cuda_stream_create_blocking(rp_runtime *rt, rp_proc p,
                                          void **out);

/* Makes physical device dev current on the calling thread for good (a
 * replay worker about to issue on that device); a no-op when it already
 * is. */
rp_status rp__cuda_device_use(rp_runtime *rt, int dev);
/* Makes dev current and returns the previous device in *prev, restored by
 * rp__cuda_device_leave (host threads that called the API). */
rp_status rp__cuda_device_enter(rp_runtime *rt, int dev, int *prev);
void rp__cuda_device_leave(int dev, int prev);

/* Stream capture in thread-local mode (cudaStreamCaptureModeThreadLocal):
 * only this thread's potentially unsafe calls (allocation,
 * synchronization) fail the capture. */
rp_status rp__cuda_capture_begin(rp_runtime *rt, void *stream);
/* Always ends the capture begun on stream. On success *graph is the
 * captured graph (the caller's: rp__cuda_graph_destroy); on failure (the
 * capture was invalidated) *graph is NULL and the detail has the CUDA
 * error. */
rp_status rp__cuda_capture_end(rp_runtime *rt, void *stream, void **graph);

rp_status rp__cuda_graph_create(rp_runtime *rt, void **graph);
void rp__cuda_graph_destroy(void *graph); /* NULL: no-op */
/* A node running `child` (cloned into the node; the caller keeps child),
 * after deps[0..ndeps). A child without nodes becomes an empty node. */
rp_status rp__cuda_graph_add_child(rp_runtime *rt, void *graph,
                                   void *const *deps, size_t ndeps, void *child,
                                   void **node);
/* A node recording event after deps[0..ndeps) at every launch. */
rp_status rp__cuda_graph_add_event_record(rp_runtime *rt, void *graph,
                                          void *const *deps, size_t ndeps,
                                          void *event, void **node);
/* A node waiting for event's last record (cudaGraphAddEventWaitNode). */
rp_status rp__cuda_graph_add_event_wait(rp_runtime *rt, void *graph,
                                        void *const *deps, size_t ndeps,
                                        void *event, void **node);
/* Instantiates graph (cudaGraphInstantiateWithFlags, no flags) and uploads
 * it on stream (cudaGraphUpload), so that the first launch does not pay
 * for the upload. */
rp_status rp__cuda_graph_instantiate(rp_runtime *rt, void *graph, void *stream,
                                     void **exec);
void rp__cuda_graph_exec_destroy(void *exec); /* NULL: no-op */
/* cudaGraphLaunch: enqueues one run of exec on stream. */
rp_status rp__cuda_graph_launch(rp_runtime *rt, void *exec, void *stream);
/* Sets the child graph of `node` (a node of the graph exec was
 * instantiated from) to `child` in exec (cudaGraphExecChildGraphNodeSet
 * Params). 1 when CUDA accepted it; 0 when it refused (the thread's CUDA
 * error is cleared; *why names the refusal). */
int rp__cuda_graph_exec_set_child(rp_runtime *rt, void *exec, void *node,
                                  void *child, const char **why);
/* Applies graph's node parameters to exec (cudaGraphExecUpdate): 1 when
 * CUDA accepted it, 0 when it refused (error cleared; *why says why). */
int rp__cuda_graph_exec_update(rp_runtime *rt, void *exec, void *graph,
                               const char **why);

/* ---- timing events (traces) ---- */

/* A new event on p's device that records timing (cudaEventDefault, unlike
 * rp__cuda_event_create), owned by the caller: rp__cuda_event_destroy. */
rp_status rp__cuda_event_create_timed(rp_runtime *rt, rp_proc p, void **out);
/* Blocks until the event's last record completed (cudaEventSynchronize). */
rp_status rp__cuda_event_sync(rp_runtime *rt, void *event);
/* *ms = time from start to end (cudaEventElapsedTime: both timed events of
 * one device, both recorded and complete; resolution about 0.5 us). */
rp_status rp__cuda_event_elapsed_ms(rp_runtime *rt, void *start, void *end,
                                    float *ms);

/* cudaMemcpyAsync (direction from the pointers) on stream. */
rp_status rp__cuda_memcpy_async(rp_runtime *rt, void *dst, const void *src,
                                size_t bytes, void *stream);
/* cudaEventQuery without waiting: 1 when the event's last record
 * completed, 0 while it is pending, -1 on an error (which marks a sticky
 * one; rp_error_detail says which). Never blocks, allocates nothing. */
int rp__cuda_event_done(rp_runtime *rt, void *event);
/* The device address of pinned host memory (cudaHostGetDevicePointer). */
rp_status rp__cuda_host_device_ptr(rp_runtime *rt, void *host, void **dev);
/* Writes value to *word once the stream's earlier work completed
 * (cuStreamWriteValue32 of the driver API, found through
 * cudaGetDriverEntryPointByVersion: no link against libcuda), with a
 * system-scope fence first, so the work's own writes are visible before
 * the word is. dev_word: the device address of pinned host memory
 * (rp__cuda_host_device_ptr). RP_EUNSUPPORTED where the driver has no
 * stream memory operations. */
rp_status rp__cuda_stream_write_u32(rp_runtime *rt, void *stream,
                                    void *dev_word, uint32_t value);
/* cudaStreamQuery without waiting: RP_OK when the stream is idle or still
 * busy, the error (which marks a sticky one) otherwise. */
rp_status rp__cuda_stream_poll(rp_runtime *rt, void *stream);

#endif
