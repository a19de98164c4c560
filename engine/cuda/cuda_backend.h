/* engine/cuda/cuda_backend.h — the CUDA backend's primitives for the layers
 * above the engine (xfer channels, the replay scheduler, kernels' launchers).
 * C callable, no CUDA types: a stream is a cudaStream_t and an event a
 * cudaEvent_t, passed as void *. Exists only in builds with
 * REPRISE_HAVE_CUDA; every call needs a runtime whose CUDA backend is up
 * (rp_runtime_backend(rt) == RP_BACKEND_CUDA).
 *
 * Processors: each logical GPU is one rp_proc with its own driver thread and
 * in-order queue (rp__proc_enqueue); items run on that thread with the
 * processor's physical device current, and enqueue their device work on the
 * processor's stream. Several logical GPUs may share one physical device.
 *
 * Errors: a failing CUDA call returns RP_EBACKEND (RP_ENOMEM for an
 * allocation) with the statement, file:line and CUDA error name in
 * rp_error_detail(); a sticky error also makes the runtime unusable (every
 * later public call returns RP_EUNUSABLE). Nothing here aborts.
 *
 * Current device: calls that must create or allocate on a device make it
 * current for their duration and then restore the calling thread's previous
 * device, so a host thread's own CUDA state is left as found. */
#ifndef RP_CUDA_BACKEND_H
#define RP_CUDA_BACKEND_H

#include "reprise.h"

#include <stddef.h>

/* ---- processors ---- */

/* The processor's eager stream (non-blocking: it does not synchronize with
 * the legacy default stream), owned by the backend; NULL when p is not a GPU
 * processor of rt. Valid until the runtime is destroyed. */
void *rp__cuda_proc_stream(rp_runtime *rt, rp_proc p);
/* The physical CUDA device behind GPU processor p, or -1 when p is not one. */
int rp__cuda_proc_device(rp_runtime *rt, rp_proc p);
/* The calling thread's current CUDA device, or -1 on a CUDA error. On a GPU
 * driver thread this is the processor's physical device. */
int rp__cuda_current_device(void);

/* ---- streams ---- */

/* A new non-blocking stream on p's device, owned by the caller: destroy it
 * with rp__cuda_stream_destroy. RP_EPROC when p is not a GPU processor. */
rp_status rp__cuda_stream_create(rp_runtime *rt, rp_proc p, void **out);
/* Destroys a stream from rp__cuda_stream_create (NULL: no-op). Work already
 * enqueued on it still completes. */
rp_status rp__cuda_stream_destroy(rp_runtime *rt, void *stream);
/* Blocks the calling thread until all work enqueued on stream so far has
 * completed (host functions included). */
rp_status rp__cuda_stream_sync(rp_runtime *rt, void *stream);

/* ---- events (device-side ordering between streams) ---- */

/* A new event on p's device, without timing (the cheapest kind to record and
 * wait on), owned by the caller: destroy with rp__cuda_event_destroy. */
rp_status rp__cuda_event_create(rp_runtime *rt, rp_proc p, void **out);
rp_status rp__cuda_event_destroy(rp_runtime *rt, void *event);
/* Captures the work enqueued on stream so far into event. The stream must
 * belong to the event's device. */
rp_status rp__cuda_event_record(rp_runtime *rt, void *event, void *stream);
/* Work enqueued on stream after this call waits (on the device, the host
 * does not block) for the event's last record. The stream may be on another
 * device. */
rp_status rp__cuda_stream_wait_event(rp_runtime *rt, void *stream, void *event);

/* ---- host work and memory ---- */

/* Calls fn(arg) on a CUDA-owned host thread once the work enqueued on
 * stream before it has completed; later work on the stream waits for fn to
 * return. fn must not call CUDA and must not block (it may trigger engine
 * events, which run their waiters on that thread). */
rp_status rp__cuda_launch_host_func(rp_runtime *rt, void *stream,
                                    void (*fn)(void *arg), void *arg);
/* Sets bytes bytes at dst (device or pinned memory) to value, in stream
 * order. */
rp_status rp__cuda_memset_async(rp_runtime *rt, void *stream, void *dst,
                                int value, size_t bytes);

#endif
