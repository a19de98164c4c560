/*
 * reprise — record one training step once, replay it many times.
 *
 * The one public header. C11, prefix rp_, opaque handles, every fallible call
 * returns rp_status (0 ok, negative error) and hands objects out through
 * out-parameters. After an error, rp_error_detail() says (for this thread)
 * which op, instance, port or argument was wrong. Bad input never aborts,
 * never corrupts and never leaks: the call returns an error and leaves state
 * as it was.
 *
 * Ownership is in the verb: *_create / *_destroy, *_alloc / *_free. Events
 * handed out by any call are owned by the caller, who drops them with
 * rp_event_release(). Destroying NULL is a no-op.
 *
 * Misuse of handles, and what is defined:
 *  - A destroyed runtime, graph or exec keeps its memory, with a poisoned
 *    tag, in a quarantine of the last 32 destroyed objects: passing it
 *    again (a second destroy included) returns RP_ESTALE ("... was
 *    destroyed") and does nothing. Once 32 more objects were destroyed its
 *    memory is freed: passing it then, or any pointer that never was such
 *    an object, is undefined behaviour.
 *  - Event and instance handles carry their runtime's identity (an 8-bit
 *    tag) and a generation: another runtime's handle, a released and
 *    recycled event, an event or instance handle never handed out (a
 *    made-up one naming a free slot), a freed or reallocated instance is
 *    refused with RP_ESTALE and never acted on. (Two live runtimes share
 *    a tag only when 255 runtimes were created between them. A generation has
 *    31 bits: an event or instance slot whose 2^31 - 1 generations are
 *    used up retires (it is never reused, one slot lost) rather than
 *    wrap, so a kept handle never names a later event or instance; the
 *    one exception is an instance reallocated in place 2^31 - 1 times,
 *    whose generation wraps to 1. A slot released last is reused first:
 *    a loop that creates and releases one event at a time retires a slot
 *    every 2^31 turns, within minutes.) Releasing an event twice is
 *    RP_ESTALE, also while it is still pending. Other calls on a released
 *    event that is still pending act on the event, which is still live.
 *  - One thread at a time per exec: a thread calling rp_replay,
 *    rp_exec_tune, rp_exec_destroy, rp_exec_update_args,
 *    rp_exec_trace_start or rp_exec_trace_write (the calls that hold
 *    an exec) while another is inside one of them on the same exec gets
 *    RP_EBUSY (nothing happened, the detail naming them). Other calls on
 *    an exec, calls on one graph (building, validating, instantiating,
 *    saving or dumping it: a graph is one thread's at a time), and
 *    destroying an object while another thread still uses it, must be
 *    ordered by the caller. Different graphs and execs of one runtime,
 *    its events, instances and tasks, and eager launches and drains may
 *    be used from several threads at once (a capture is its own
 *    thread's: see the capture contract).
 *
 * Errors every call shares (each call's comment lists only its own):
 *  - a NULL runtime, graph or exec, or a pointer that is not one:
 *    RP_EINVAL; a destroyed one (in quarantine): RP_ESTALE; a NULL
 *    required pointer argument (an out-parameter, a descriptor): RP_EINVAL.
 *    Out-parameters are required unless their call says "may be NULL".
 *    Calls that return a value instead of a status (counts, names, the
 *    backend, rp_graph_depends ...) return their neutral value for such a
 *    handle (0, NULL, "", RP_BACKEND_CPU, UINT64_MAX as documented) and
 *    set rp_error_detail() as a failing call does; none of them reads
 *    the destroyed object beyond its tag.
 *  - a stale event or instance handle (see above): RP_ESTALE.
 *  - RP_ENOMEM when an allocation fails.
 *  - Calls that launch, record, wait or destroy, made from a task inside a
 *    replay: RP_ECONTRACT (and the replay completes with RP_ECONTRACT).
 *    The calls that wait for eager work to end, made from a running eager
 *    task when they would wait for that task (rp_runtime_drain and
 *    rp_runtime_destroy of its runtime, rp_instance_free and
 *    rp_instance_realloc of an instance it accesses): RP_ECONTRACT.
 *    The calls that wait for replays in flight, made from a running eager
 *    task of the exec's runtime (whose worker a replay's lane may need):
 *    RP_EBUSY, nothing done, where they would wait (rp_replay with a full
 *    window or a full submission ring, rp_exec_destroy,
 *    rp_exec_update_args and rp_exec_trace_write with replays in flight,
 *    rp_exec_tune always), as from an event's callback.
 *    Calls that only create (rp_graph_create, rp_instance_create,
 *    rp_instantiate, rp_event_create) work there, but what they make can
 *    be destroyed only from the host, outside replay tasks.
 * What an error leaves behind, unless a call's comment says otherwise:
 * nothing changed, nothing half-created (what the call allocated before
 * failing is freed again), and out-parameters untouched (not written, not
 * set to NULL).
 *
 * Layers (each a folder): engine (runtime, processors, memories, instances,
 * events, tasks, backends) -> xfer (copies, parallel operators) -> capture
 * (launch API, dependence analysis, recording, graphs) -> replay (instantiate,
 * scheduler).
 *
 * ---------------------------------------------------------------------------
 * The capture contract
 *
 * Between rp_capture_begin() and rp_capture_end() on a runtime, the launch
 * calls (rp_launch_task, rp_launch_copy, rp_launch_parallel) made by the
 * capturing thread are recorded instead of run. Dependencies between recorded
 * ops are inferred from their declared accesses exactly as in eager mode
 * (read-after-write, write-after-read, write-after-write; reductions with the
 * same operator commute, tasks' with tasks' and copies' with copies': see
 * RP_REDUCE). The event a recorded launch hands out is an op
 * reference: it may be passed as another recorded launch's `wait` (an explicit
 * edge) or to rp_capture_postcondition(); it cannot be waited on from the host.
 *
 * What may be recorded: tasks on a processor, on "any CPU worker", or over N
 * shards; copies; parallel operators. What may not: host waits, eager events
 * as preconditions (use rp_capture_precondition() for a port instead), and
 * launches from other threads (they return RP_ECAPTURE while a capture is
 * open), as from an event's callback or a task wherever it runs: one the
 * capturing thread runs (its rp_event_trigger calls the callbacks) borrows
 * the thread and gets RP_ECAPTURE as well, and cannot end the capture.
 *
 * What may change per replay without a new instantiate: the bytes of the
 * replay's argument block (reaching ops through declared interpolations,
 * including an SPMD launch's shard count up to its declared maximum), the
 * events supplied to precondition ports. What forces a new instantiate: any
 * change of ops, edges, processors, instances (a freed or reallocated instance
 * makes every later replay fail with RP_ESTALE, running nothing, once its
 * precondition events came), task functions or workspace
 * sizes.
 *
 * Tasks run inside a replay promise not to launch tasks and not to wait on
 * events; a task that does gets RP_ECONTRACT from that call, and the replay
 * completes with RP_ECONTRACT on its done event, its detail naming the call
 * ("task called rp_event_wait, which a task may not call inside a
 * replay ...").
 *
 * GPU ops under CUDA graphs (CUDA backend). rp_instantiate cuts each GPU's
 * ops into segments at the points where they must wait for a host op or a
 * precondition, captures each segment once into a CUDA graph (a task's GPU
 * variant is called once, at instantiate, on a private stream in
 * thread-local capture mode; a copy becomes memcpy or kernel nodes) and
 * uploads it; every replay launches the graphs. Consequences for GPU
 * variants: what they enqueue must be capturable (no allocation, no
 * synchronization, no use of the legacy default stream, no host-side read
 * of instance data): a capture failure fails rp_instantiate with
 * RP_EBACKEND naming the op, its task and the CUDA error. Values a kernel
 * takes by value are those of the recorded args; per-replay values must be
 * read on the device through rp_ctx_device_args() by a task registered
 * with RP_TASK_DEVICE_ARGS. An interpolated GPU op whose task lacks that
 * flag (or whose shard count is interpolated) is instead issued op by op
 * at every replay, so it still sees each replay's values. Environment:
 * REPRISE_CUDA_GRAPHS=0 (read at instantiate) issues every GPU op op by op
 * on the GPU's stream at each replay, with the same ordering, for
 * debugging and comparison.
 */
#ifndef REPRISE_H
#define REPRISE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REPRISE_VERSION_MAJOR 0
#define REPRISE_VERSION_MINOR 1
#define REPRISE_VERSION_PATCH 0
#define REPRISE_VERSION_HEX                                                    \
  ((REPRISE_VERSION_MAJOR << 16) | (REPRISE_VERSION_MINOR << 8) |              \
   REPRISE_VERSION_PATCH)

#if defined(REPRISE_STATIC)
#define RP_API
#elif defined(_WIN32)
#define RP_API __declspec(dllimport)
#else
#define RP_API __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Status codes: one list, the enum and rp_status_str() are generated from it.
 */

#define RP_STATUS_MAP(X)                                                       \
  X(OK, 0, "ok")                                                               \
  X(EINVAL, -1, "invalid argument")                                            \
  X(ENOMEM, -2, "out of memory")                                               \
  X(ERANGE, -3, "size or index out of range")                                  \
  X(ETYPE, -4, "unknown or mismatched element type")                           \
  X(ESTALE, -5, "stale handle: the object was freed or reallocated")           \
  X(EBUSY, -6, "object still in use")                                          \
  X(ETIMEDOUT, -7, "timed out")                                                \
  X(ENODEV, -8, "no device answers")                                           \
  X(EBACKEND, -9, "backend (CUDA, BLAS, MPI) call failed")                     \
  X(ECONTRACT, -10, "task contract violated")                                  \
  X(ECYCLE, -11, "graph has a cycle")                                          \
  X(ENOTASK, -12, "unknown task")                                              \
  X(EPROC, -13, "processor out of range or of the wrong kind")                 \
  X(EACCESS, -14, "instance not accessible from the processor")                \
  X(ESHAPE, -15, "rectangle or shape mismatch")                                \
  X(EPORT, -16, "port misuse")                                                 \
  X(ECAPTURE, -17, "capture misuse")                                           \
  X(EPOISON, -18, "poisoned: an upstream op or precondition failed")           \
  X(ETASK, -19, "task failed")                                                 \
  X(EFORMAT, -20, "malformed input")                                           \
  X(EVERSION, -21, "unsupported format version")                               \
  X(ECHECKSUM, -22, "checksum mismatch")                                       \
  X(EIO, -23, "input/output error")                                            \
  X(EUNSUPPORTED, -24, "not supported by this build or backend")               \
  X(EPEER, -25, "peer rank did not answer")                                    \
  X(EEXIST, -26, "already exists")                                             \
  X(ENOENT, -27, "not found")                                                  \
  X(EAGAIN, -28, "not ready yet")                                              \
  X(EUNUSABLE, -29, "runtime unusable after a sticky backend error")

typedef enum rp_status {
#define RP_STATUS_ENUM_(name, code, text) RP_##name = code,
  RP_STATUS_MAP(RP_STATUS_ENUM_)
#undef RP_STATUS_ENUM_
} rp_status;

/* Static text for a status ("ok", "graph has a cycle", ...). */
RP_API const char *rp_status_str(rp_status st);
/* Short name of a status ("RP_ECYCLE"). */
RP_API const char *rp_status_name(rp_status st);
/* What the last failing call on this thread said about the failure: names the
 * op, instance, port or argument. Valid until the next failing call. */
RP_API const char *rp_error_detail(void);
/* Sets what rp_error_detail() returns on this thread (printf-style, cut to
 * the detail's 1023 characters) and returns st, so code above the library
 * (tasks, training loops, tools) reports through the same channel:
 * `return rp_error_set(RP_EINVAL, "batch %u of %u", b, n);`. The arguments
 * may include rp_error_detail() itself (it is formatted before it is
 * replaced), which prefixes the current detail:
 * `rp_error_set(st, "step %u: %s", t, rp_error_detail())`. Never fails;
 * fmt NULL clears the detail. */
RP_API rp_status rp_error_set(rp_status st, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Bounded input (graph files, data files, checkpoints). Opens path for
 * reading only when it is a regular file: a FIFO, a device, a directory or
 * a socket is refused (RP_EINVAL naming which) before anything could block
 * on it or read endless bytes (the open itself does not block). *fd (the
 * caller closes it) and *size (the file's size) are set on success. The
 * kernel's generated files, regular to stat (procfs, sysfs, debugfs,
 * tracefs: /proc/kmsg waits for messages and never ends), are refused too
 * (RP_EINVAL naming the file system).
 * Errors: RP_EINVAL (NULL argument, not a regular file), RP_ENOENT (no
 * such file), RP_EIO (cannot open or stat); nothing is left open. The
 * detail does not name the path: callers prefix it. */
RP_API rp_status rp_file_open_regular(const char *path, int *fd,
                                      uint64_t *size);
/* Reads a whole regular file of at most max bytes into *buf (malloc'd,
 * NUL-terminated, the caller free()s it; *len excludes the NUL). Errors:
 * those of rp_file_open_regular, RP_ERANGE when the file has (or grows to)
 * more than max bytes (no more than max + 1 are ever read), RP_ENOMEM,
 * RP_EIO (a read failed); on error nothing is allocated and *buf, *len are
 * untouched. */
RP_API rp_status rp_file_read_regular(const char *path, size_t max, char **buf,
                                      size_t *len);

/* Output files. Every file reprise writes (graph files, traces, dumps,
 * checkpoints, the command line's outputs) goes through this one writer;
 * code above the library may use it too. Guarantees:
 *  - the target is replaced only by a complete file: the bytes go to a new
 *    temporary file in the target's directory (".NAME.tmp.PID.N"), which
 *    rp_output_commit flushes, fsyncs, renames over the target and then
 *    fsyncs the directory. A crash, a SIGKILL, a full disk or a failed
 *    write at any moment leaves the target either as it was or as the
 *    whole new file (a killed process may leave its temporary file behind;
 *    the target is never touched by it).
 *  - an existing path that is not a regular file (a character or block
 *    device, a FIFO, a socket, a directory, a dangling symbolic link) is
 *    refused by rp_output_open, before any byte is written, with RP_EINVAL
 *    naming its kind, and checked again right before the rename: a rename
 *    would turn /dev/null into a file. A symbolic link to a regular file
 *    stays a link: its target is replaced. The regular file this
 *    process's standard output or error goes to (`/dev/stdout` with
 *    stdout redirected to a file, or that file by name) is refused too
 *    (RP_EINVAL): replacing it would drop what the process wrote there.
 *  - a replaced file keeps its permission bits, and its owner and group
 *    where the caller may give them (root; a group of the caller's),
 *    else they are the caller's; a new one gets 0666 less the umask (as
 *    fopen would). The new file is a new inode: other hard links to the
 *    old one keep the old contents. An existing file the caller may not
 *    write is refused (RP_EIO), although the rename could replace it, and
 *    so is one the rename may not replace: another user's file in a
 *    directory with the sticky bit, as /tmp (RP_EIO, at the open rather
 *    than at the commit).
 * Errors (every call): RP_EINVAL (NULL or empty path, the kinds above),
 * RP_EIO (cannot create the temporary file, e.g. no such directory or no
 * permission; a write, fsync, close or rename failed: the target is
 * unchanged; or the file is in place but the directory sync failed),
 * RP_ENOMEM (also when creating the temporary file ran out of memory). The
 * detail does not name the path: callers prefix it. Writing to standard output
 * is the caller's choice (the command line's
 * `-o -`): these calls always name a file. */
typedef struct rp_output rp_output;
/* Checks path as above and opens a temporary file next to it; *out (NULL
 * on error) holds the stream rp_output_file returns until
 * rp_output_commit or rp_output_abort releases it. */
RP_API rp_status rp_output_open(const char *path, rp_output **out);
/* The stream to write (binary; do not fclose it). NULL for NULL. It is a
 * stream of its own over the temporary file, without a file descriptor
 * (fileno gives -1), so that a write that fails in its buffer keeps its
 * errno for rp_output_commit's detail ("No space left on device"). */
RP_API FILE *rp_output_file(const rp_output *o);
/* Flushes, fsyncs and closes the stream, renames the file over the target
 * and fsyncs the directory. Releases o in every case; on error the
 * temporary file is removed and the target unchanged (but for the
 * directory sync's RP_EIO, which says the file is in place). A write
 * that failed earlier on the stream (ferror) fails the commit, its detail
 * naming the system's reason for the first failed write. */
RP_API rp_status rp_output_commit(rp_output *o);
/* Closes and removes the temporary file; the target is unchanged. NULL is
 * a no-op. Commit and abort free o, as free() does: o is a plain pointer,
 * not a generation-checked handle, and must not be passed again. */
RP_API void rp_output_abort(rp_output *o);
/* Removes the temporary files of the outputs open now, however many
 * (their targets are untouched; commit or abort them as usual
 * afterwards). Async-signal-safe:
 * for a handler of SIGINT or SIGTERM, so that a process stopped while
 * writing leaves no temporary file beside its targets (the command line
 * installs one; a SIGKILL cannot be handled). */
RP_API void rp_output_discard_all(void);
/* What rp_output_open checks, without keeping anything: for checking every
 * output path before long work starts (a temporary file is created and
 * removed; the target is not touched). */
RP_API rp_status rp_output_check(const char *path);
/* rp_output_open, n bytes of data, rp_output_commit. */
RP_API rp_status rp_file_write_atomic(const char *path, const void *data,
                                      size_t n);

RP_API unsigned rp_version(void);           /* REPRISE_VERSION_HEX */
RP_API const char *rp_version_string(void); /* "0.1.0" */

/* ------------------------------------------------------------------------ */
/* Runtime */

typedef struct rp_runtime rp_runtime;
typedef struct rp_graph rp_graph;
typedef struct rp_exec rp_exec;
typedef struct rp_task_ctx rp_task_ctx;

typedef enum rp_backend_kind {
  RP_BACKEND_AUTO =
      0, /* CUDA when a device answers, else CPU (says why once) */
  RP_BACKEND_CPU = 1,
  RP_BACKEND_CUDA = 2,
} rp_backend_kind;

/* The most logical GPUs a runtime has (rp_runtime_config.gpus). */
#define RP_MAX_GPUS 16
typedef struct rp_runtime_config {
  rp_backend_kind backend; /* env REPRISE_BACKEND=auto|cpu|cuda overrides */
  unsigned cpus;           /* CPU workers, up to 128; 0 = one per core. env
                              REPRISE_WORKERS (REPRISE_CPUS: deprecated) */
  unsigned gpus;           /* logical GPUs, up to RP_MAX_GPUS; 0 = one per
                              device. env REPRISE_GPUS (more logical than
                              physical GPUs map round-robin onto the
                              physical ones) */
  int quiet;               /* 1: do not print the backend fallback line */
  int ignore_env;          /* 1: ignore the REPRISE_* environment overrides */
  /* Distributed (see "Distributed" below). NULL: a single process (rank 0
   * of 1). Else a pointer to an MPI_Comm (MPI_Comm *) whose processes are
   * the ranks; the runtime duplicates it during create, so the pointee
   * need not outlive the call. */
  void *comm;
  uint32_t dist_timeout_ms; /* a replay (or eager op) waiting for a peer
                               fails with RP_EPEER after this long; 0 =
                               30000. env REPRISE_DIST_TIMEOUT_MS */
} rp_runtime_config;

/* Fills defaults (AUTO, all cores). */
RP_API void rp_runtime_config_init(rp_runtime_config *cfg);
/* Creates a runtime. cfg may be NULL (defaults). *out is owned by the caller;
 * destroy with rp_runtime_destroy. Errors: RP_EINVAL unknown backend, cpus
 * past the limit, or a malformed REPRISE_* variable (every one the
 * library reads is checked here unless ignore_env is set; the detail
 * names the variable and its value); RP_ENODEV backend CUDA
 * (asked for, not AUTO) without a device or without CUDA in the build, or
 * whatever status the CUDA backend's start returned (RP_EBACKEND ...);
 * and with a comm: RP_EUNSUPPORTED in a build without MPI, or when MPI
 * runs below MPI_THREAD_MULTIPLE (MPI_Query_thread); RP_EINVAL when MPI
 * is not initialized or already finalized, or when the comm is
 * MPI_COMM_NULL or not an intra-communicator (an inter-communicator);
 * then duplicating it (collective: every rank of it must call
 * rp_runtime_create) fails with RP_EBACKEND for an MPI error, RP_EPEER
 * when not every rank joined within dist_timeout_ms, or RP_ENOMEM. On
 * error *out is set to NULL (when out is not NULL) and everything created
 * so far is destroyed again. */
RP_API rp_status rp_runtime_create(const rp_runtime_config *cfg,
                                   rp_runtime **out);
/* Waits for eager work to drain, then frees everything. Events of
 * rp_event_create still pending are poisoned with RP_EBUSY first: their
 * callbacks run (with that status) before the runtime goes. While it
 * drains and from then on, rp_event_create on rt returns RP_EBUSY (a
 * callback that re-arms would keep the drain waiting, or make an event
 * that outlives the runtime), and so do rp_graph_create and
 * rp_graph_load (a graph made there, or an exec of it, would outlive
 * it).
 * The drain poisons the pending user events as soon as no eager op
 * completed for 100 ms (ops gated on them complete then, with RP_EBUSY,
 * without running), so a user event that a task still running would
 * trigger later is poisoned too (that trigger then fails). When no op
 * completes for 10 s after that (a task that does not return, or ops
 * waiting for one), the drain gives up: RP_EBUSY ("... cannot complete").
 * RP_EBUSY (and
 * nothing freed) while graphs or execs created on it are alive; RP_ECONTRACT
 * from a task inside a replay or an eager task of rt (it would wait for
 * itself). When draining fails (that give-up, or the first failing layer's
 * or op's status, e.g. RP_EUNUSABLE; the detail names rp_runtime_destroy)
 * nothing is freed and the runtime stays usable (user events it poisoned
 * stay poisoned). RP_EBUSY from an event's completion callback. */
RP_API rp_status rp_runtime_destroy(rp_runtime *rt);
/* The backend actually in use (CPU or CUDA, never AUTO). */
RP_API rp_backend_kind rp_runtime_backend(const rp_runtime *rt);
/* Why AUTO chose the CPU backend (static text), or "" when CUDA was chosen. */
RP_API const char *rp_runtime_backend_reason(const rp_runtime *rt);
/* Blocks until every eager op issued so far has completed. Ops launched
 * meanwhile (by other threads, or by callbacks of the ops it waits for)
 * are not waited for, so launches that never pause cannot keep it waiting;
 * on the CUDA backend GPU work is the exception: the drain then also waits
 * until the device queues are empty and a device synchronize finds nothing
 * new queued, which GPU launches that never pause put off.
 * Errors: the
 * status a layer's drain returned (e.g. communication that failed); the
 * ops issued are still complete or in flight, nothing is cancelled;
 * RP_ECONTRACT from a task inside a replay (it could wait for itself) or
 * an eager task of rt (it would),
 * RP_EBUSY from an event's completion callback (it could wait for work
 * queued behind the callback). */
RP_API rp_status rp_runtime_drain(rp_runtime *rt);

/* ------------------------------------------------------------------------ */
/* Processors and memories: small dense indices. CPU workers come first, GPUs
 * after them. */

typedef uint32_t rp_proc;
typedef uint32_t rp_mem;
#define RP_PROC_ANY ((rp_proc)0xffffffffu) /* any CPU worker: engine places */

typedef enum rp_proc_kind { RP_PROC_CPU = 0, RP_PROC_GPU = 1 } rp_proc_kind;
typedef enum rp_mem_kind {
  RP_MEM_SYSTEM = 0, /* host memory, CPU-accessible */
  RP_MEM_PINNED = 1, /* page-locked host memory (CUDA backend) */
  RP_MEM_GPU = 2,    /* one device's memory */
} rp_mem_kind;

typedef struct rp_proc_info {
  rp_proc_kind kind;
  int device;   /* GPU: logical device index; CPU: worker index */
  rp_mem local; /* the memory this processor works in */
  int physical; /* GPU: the physical device it runs on (logical GPUs mapped
                   onto one device share it, and are lowered together);
                   CPU: -1 */
} rp_proc_info;

typedef struct rp_mem_info {
  rp_mem_kind kind;
  int device; /* GPU memory: logical device; else -1 */
} rp_mem_info;

RP_API unsigned rp_proc_count(const rp_runtime *rt);
RP_API unsigned rp_mem_count(const rp_runtime *rt);
/* Describe processor p / memory m. Errors: RP_EPROC p out of range,
 * RP_EINVAL m out of range; *out untouched then. */
RP_API rp_status rp_proc_query(const rp_runtime *rt, rp_proc p,
                               rp_proc_info *out);
RP_API rp_status rp_mem_query(const rp_runtime *rt, rp_mem m, rp_mem_info *out);
/* 1 when tasks on p may read and write instances in m directly. */
RP_API int rp_proc_can_access(const rp_runtime *rt, rp_proc p, rp_mem m);
/* The memory of the given kind (device index for GPU memory), or RP_ENOENT
 * (*out untouched). */
RP_API rp_status rp_mem_find(const rp_runtime *rt, rp_mem_kind kind, int device,
                             rp_mem *out);

/* ------------------------------------------------------------------------ */
/* Instances: a buffer in one memory with an element type, a rectangle and
 * strides. The handle carries the instance's generation: freeing or
 * reallocating bumps it, and every use of an older handle returns RP_ESTALE. */

#define RP_MAX_DIM 4

typedef enum rp_dtype {
  RP_F32 = 0,
  RP_F64 = 1,
  RP_I32 = 2,
  RP_I64 = 3,
  RP_U8 = 4,
  RP_DTYPE_COUNT_
} rp_dtype;

/* A rectangle of `dim` dimensions, lo..hi inclusive per dimension. The origin
 * may be non-zero: a shard keeps its global coordinates. */
typedef struct rp_rect {
  int dim;
  int64_t lo[RP_MAX_DIM];
  int64_t hi[RP_MAX_DIM];
} rp_rect;

typedef struct rp_inst {
  uint64_t id; /* slot (low 32 bits) and generation (high 32); 0 = none */
} rp_inst;

typedef struct rp_instance_info {
  rp_mem mem;
  rp_dtype dtype;
  rp_rect rect;
  int64_t strides[RP_MAX_DIM]; /* in elements */
  size_t bytes;                /* bytes spanned by the layout */
  void *ptr;                   /* element at rect.lo (device pointer on GPU) */
  uint32_t generation;
  int external; /* 1: wraps caller memory */
} rp_instance_info;

RP_API size_t rp_dtype_size(rp_dtype t); /* 0 for an unknown type */
RP_API const char *rp_dtype_name(rp_dtype t);
/* Number of points in r (0 when empty or invalid). */
RP_API int64_t rp_rect_volume(const rp_rect *r);
/* A dim-D rectangle from lo (NULL: all zero) and extents: hi = lo + extent
 * - 1 in each dimension. Errors: RP_EINVAL NULL out or extent, RP_ESHAPE
 * dim outside 1..RP_MAX_DIM or an extent < 1, RP_ERANGE lo + extent - 1
 * overflows int64_t; *out is untouched then. */
RP_API rp_status rp_rect_init(rp_rect *out, int dim, const int64_t *lo,
                              const int64_t *extent);
/* Convenience form of rp_rect_init: on any of its errors (a NULL extent
 * included) the result has dim 0, which every call taking a rectangle
 * refuses (RP_ESHAPE), and rp_error_detail() says why it was made so. */
RP_API rp_rect rp_rect_make(int dim, const int64_t *lo, const int64_t *extent);
RP_API rp_rect rp_rect_1d(int64_t lo, int64_t hi);
RP_API rp_rect rp_rect_2d(int64_t lo0, int64_t hi0, int64_t lo1, int64_t hi1);
/* Writes r as text, "[lo0..hi0, lo1..hi1]" ("[invalid rect]" for NULL or a
 * dimension outside 1..RP_MAX_DIM), cut to size bytes (NUL included),
 * and returns buf. Never fails: with buf NULL or size 0 it writes nothing
 * and returns "" (a static empty string). RP_RECT_STR_MAX bytes hold any
 * rect's text whole. */
#define RP_RECT_STR_MAX 192
RP_API const char *rp_rect_str(const rp_rect *r, char *buf, size_t size);

/* Allocates an instance. strides (elements per step in each dimension) may be
 * NULL for dense row-major (last dimension fastest). Errors: RP_ETYPE unknown
 * type, RP_ESHAPE empty/inverted rectangle or bad dim, RP_ERANGE size overflow,
 * strides that overlap, or a full instance table (4194304 live instances,
 * the most a runtime holds), RP_EINVAL unknown memory, RP_ENOMEM (or the
 * backend's allocation status, e.g. RP_EBACKEND) when the memory has no
 * room or the instance table cannot grow. Free with rp_instance_free.
 * Contents are zero. */
RP_API rp_status rp_instance_create(rp_runtime *rt, rp_mem mem, rp_dtype dtype,
                                    const rp_rect *rect, const int64_t *strides,
                                    rp_inst *out);
/* Wraps caller memory (which stays the caller's: free does not release it).
 * bytes is the size of the caller's buffer; the layout must fit in it.
 * Memory it shares with another instance (another external one, or a view
 * into rp_instance_ptr's memory) is another instance to the graph: order
 * their uses yourself; a copy between overlapping bytes is refused
 * (RP_EINVAL). Errors: as rp_instance_create, and RP_EINVAL a NULL ptr or
 * one not aligned to the element size, RP_ERANGE a layout that does not
 * fit in bytes. */
RP_API rp_status rp_instance_create_external(rp_runtime *rt, rp_mem mem,
                                             rp_dtype dtype,
                                             const rp_rect *rect,
                                             const int64_t *strides, void *ptr,
                                             size_t bytes, rp_inst *out);
/* Frees the instance; its handle (and every copy of it) becomes stale.
 * Instances in use (both calls, free and realloc):
 *  - eager ops (launches outside a capture) that access the instance and
 *    have not completed are waited for first, as before: one gated on an
 *    event the caller itself triggers later (its `wait`, or an eager op
 *    it waits for) holds the call until then, from the one thread that
 *    could trigger it a deadlock (not detected): trigger it first;
 *  - a replay in flight (issued, done event not yet triggered) of an exec
 *    that uses the instance makes the call fail with RP_EBUSY, naming the
 *    exec, and change nothing (handle, generation and storage stay). It
 *    does not wait for them because a replay may wait for preconditions
 *    the caller triggers only later: waiting could deadlock the caller,
 *    failing never does. Wait for the replays' done events, then retry.
 * A free racing an rp_replay of such an exec on another thread either
 * fails with RP_EBUSY or makes that replay fail with RP_ESTALE.
 * From an event's completion callback an eager op still pending is
 * RP_EBUSY instead of a wait (it may be queued behind the callback).
 * From a running eager task of rt, likewise RP_EBUSY while an eager op
 * that uses it is pending (it may wait for the task, or be queued behind
 * it). Errors (free): RP_ESTALE stale handle, RP_EBUSY as above,
 * RP_ECONTRACT from a task inside a replay, or from an eager task that
 * accesses inst (it would wait for itself). */
RP_API rp_status rp_instance_free(rp_runtime *rt, rp_inst inst);
/* Gives the instance fresh storage of the same shape (zeroed) and a new
 * generation; *inout is updated, every older copy of the handle is stale.
 * RP_EBUSY (nothing changed) while a replay in flight uses it (see
 * rp_instance_free), and like free it waits for eager ops first (RP_EBUSY
 * from a completion callback or a running eager task). Errors: RP_ESTALE stale
 * handle, RP_EINVAL an external instance (caller memory cannot be replaced),
 * RP_ENOMEM (or the backend's status) when the new storage cannot be allocated,
 * RP_ECONTRACT from a task inside a replay or an eager task that accesses
 * the instance; on every error the handle, the
 * generation and the old storage stay. */
RP_API rp_status rp_instance_realloc(rp_runtime *rt, rp_inst *inout);
/* The instance's layout. Errors: RP_ESTALE stale handle (*out untouched). */
RP_API rp_status rp_instance_query(const rp_runtime *rt, rp_inst inst,
                                   rp_instance_info *out);
/* Names (instances, ops, ports, tasks) are at most RP_NAME_MAX bytes,
 * printable ASCII (0x20..0x7e) without '"' or '\\'; they are recorded in
 * graphs, saved in graph files and shown by dumps, lint findings, error
 * details, traces and NVTX ranges. Names need not be unique (task names
 * must). Every entry checks the rule: rp_instance_set_name,
 * rp_graph_set_op_name, rp_capture_name_next, the port calls of the
 * builder and of capture, rp_task_register (RP_EINVAL naming the call and
 * the byte) and the graph loader (RP_EFORMAT naming the JSON path, as
 * for a \u0000 escape anywhere in a string). Dumps escape every
 * string they print besides: DOT and JSON dumps parse (Graphviz, any JSON
 * parser) and are valid UTF-8. */
#define RP_NAME_MAX 63
/* Names an instance ("W1"); NULL or "" removes the name. The name stays
 * through rp_instance_realloc and goes with rp_instance_free. Errors:
 * RP_ESTALE stale handle, RP_EINVAL a name too long or with a byte
 * outside the allowed set. */
RP_API rp_status rp_instance_set_name(rp_runtime *rt, rp_inst inst,
                                      const char *name);
/* The instance's name: "" when unnamed, NULL for a stale handle. Valid
 * until the instance is renamed or freed. */
RP_API const char *rp_instance_name(const rp_runtime *rt, rp_inst inst);
/* Host pointer to the element at rect.lo, or NULL (stale handle or memory the
 * host cannot address). */
RP_API void *rp_instance_ptr(const rp_runtime *rt, rp_inst inst);
/* Copies the instance's points (row-major over its rectangle) to/from a dense
 * host buffer of rect volume * dtype size bytes; works for every memory.
 * Synchronous with respect to the host; waits for nothing else. Errors:
 * RP_ESTALE stale handle, RP_ESHAPE bytes differs from the instance's
 * size, the backend's copy status (RP_EBACKEND); nothing written to the
 * instance (write) or to the buffer (read) on the argument errors. */
RP_API rp_status rp_instance_read(rp_runtime *rt, rp_inst inst, void *dst,
                                  size_t bytes);
RP_API rp_status rp_instance_write(rp_runtime *rt, rp_inst inst,
                                   const void *src, size_t bytes);

/* ------------------------------------------------------------------------ */
/* Events: one-shot completion signals with generational handles. An event is
 * pending, triggered, or poisoned with a status. Every call that hands out an
 * event gives the caller one reference; drop it with rp_event_release(). A
 * handle whose event was released and recycled is detected: RP_ESTALE.
 * Inside a capture, a recorded launch's *done and a precondition port's
 * event are references to the graph being recorded, not events: they hold
 * nothing and are not released (rp_event_release refuses them with
 * RP_ESTALE). */

typedef struct rp_event {
  uint64_t id; /* 0 = no event (always triggered) */
} rp_event;
#ifdef __cplusplus
#define RP_NO_EVENT (rp_event{0})
#else
#define RP_NO_EVENT ((rp_event){0})
#endif

/* A user event, triggered by rp_event_trigger / rp_event_poison. Errors:
 * RP_EBUSY inside rp_runtime_destroy of rt (from a callback or task it
 * runs), RP_ENOMEM the runtime's event table is full (4M events; the
 * detail says so): an event keeps its slot until it has completed and its
 * references are released, a pending one even once released. */
RP_API rp_status rp_event_create(rp_runtime *rt, rp_event *out);
/* Errors (trigger and poison): RP_ESTALE a stale handle, RP_EINVAL
 * RP_NO_EVENT or an event that already triggered or was poisoned; the
 * event is unchanged then. */
RP_API rp_status rp_event_trigger(rp_runtime *rt, rp_event e);
/* Poisons e with why (one of the negative rp_status codes but RP_EAGAIN,
 * which rp_event_query reads as pending; RP_EINVAL otherwise). Waiters see
 * why. */
RP_API rp_status rp_event_poison(rp_runtime *rt, rp_event e, rp_status why);
/* RP_OK triggered, RP_EAGAIN pending, the poison status, or RP_ESTALE.
 * With the poison status, rp_error_detail() says what failed: "event ...
 * was poisoned with RP_X: " and the failing op's own detail (a task's
 * rp_error_set, a copy's, a replay's rp_exec_error_detail, "poisoned by
 * rp_event_poison", "poisoned by rp_runtime_destroy" for a user event
 * still pending when its runtime went), or that none was recorded (a task that
 * failed without rp_error_set). An op skipped because a dependency failed, and
 * a merged event, carry the first failure's status and detail. */
RP_API rp_status rp_event_query(const rp_runtime *rt, rp_event e);
/* Waits up to timeout_ns (< 0: forever). Returns RP_OK, the poison status
 * (with its detail, as rp_event_query),
 * RP_ETIMEDOUT, RP_ESTALE, RP_ECONTRACT when called from a task inside a
 * replay, or RP_EBUSY from an event's completion callback for an event
 * still pending (timeout_ns 0 polls there as anywhere). From an eager
 * task it waits like any thread: for an op queued behind that task on its
 * worker it waits until the timeout (forever with -1), as that op cannot
 * start before the task returns. */
RP_API rp_status rp_event_wait(rp_runtime *rt, rp_event e, int64_t timeout_ns);
/* Calls cb(arg, status) once e triggers or is poisoned (at once if it already
 * has), on whichever thread triggers it. cb must not block: the calls that
 * would wait for replays in flight (rp_replay with a full window,
 * rp_exec_destroy, rp_exec_update_args, rp_exec_tune, rp_exec_trace_write)
 * or for eager work (rp_event_wait on a pending event, rp_runtime_drain,
 * rp_runtime_destroy, rp_instance_free and rp_instance_realloc of an
 * instance pending ops use) return RP_EBUSY from it instead (the replay
 * that completes e may be one of them, and the work waited for may be
 * queued behind cb on its worker). cb is a callback wherever it runs, a
 * CPU worker inside a replay included (a postcondition's event): it may
 * launch eager work and poll, and a replay's task rules do not apply to
 * it. Called with a failure status, cb finds in rp_error_detail() what
 * failed, as rp_event_query says it (the thread's own detail comes back
 * after). Each call registers cb once more (no event slot: a small heap
 * record, freed when cb has run): on an event that never completes, the
 * registrations of a loop pile up, unbounded, until it does. Errors:
 * RP_EINVAL NULL cb, RP_ESTALE stale handle, RP_ENOMEM; cb is not
 * registered then. */
RP_API rp_status rp_event_on_complete(rp_runtime *rt, rp_event e,
                                      void (*cb)(void *arg, rp_status st),
                                      void *arg);
/* An event that triggers when all of evs have; poisoned with the first poison
 * status seen (and its detail) if any of them is poisoned. The merged
 * event keeps its slot of the runtime's event table until it has
 * completed, even once released: a merge, each step, of an event that
 * never triggers fills the table (4M events), and then this call and
 * every other that makes an event are RP_ENOMEM. Errors:
 * RP_ESTALE one of evs is stale (detail: which), RP_ERANGE too many
 * events, RP_ENOMEM the event table is full (the detail says so) or out
 * of memory; no event is made. An input that another thread releases while
 * the merge registers (a stale use) poisons the merged event with
 * RP_ESTALE instead. */
RP_API rp_status rp_event_merge(rp_runtime *rt, const rp_event *evs, size_t n,
                                rp_event *out);
/* Drops the caller's reference. Releasing RP_NO_EVENT is a no-op. RP_ESTALE
 * for a stale handle or a second release. */
RP_API rp_status rp_event_release(rp_runtime *rt, rp_event e);

/* ------------------------------------------------------------------------ */
/* Tasks */

typedef uint32_t rp_task_id;

enum rp_task_flags {
  /* Only enqueues asynchronous work on the stream it is given and never
   * touches instance data from the host. May be issued before its upstream
   * work finished (runahead); on CUDA it is captured into a graph node. */
  RP_TASK_STREAM_ORDERED = 1u << 0,
  /* Touches data on the host: needs host- and device-side completion of its
   * inputs. The default when STREAM_ORDERED is not given. */
  RP_TASK_HOST = 1u << 1,
  /* Its GPU variant reads the argument bytes a replay may interpolate
   * through rp_ctx_device_args() on the device, not from rp_ctx_args() at
   * issue: such an op stays inside a CUDA graph when it has
   * interpolations (see "GPU ops under CUDA graphs" above). The task
   * documents which bytes it reads that way. */
  RP_TASK_DEVICE_ARGS = 1u << 2,
};

/* A task returns RP_OK or an error status (its detail set with
 * rp_error_set); any other value (positive, no rp_status code, or
 * RP_EAGAIN, which a query of its event would read as pending) fails it
 * as RP_ETASK. */
typedef rp_status (*rp_task_fn)(rp_task_ctx *ctx);

/* The largest cost (ns) placement counts for a unit or an edge, about 18
 * minutes: larger hints count as this (the schedule sums them in 64
 * bits, saturating). */
#define RP_PLACE_COST_MAX (1ull << 40)

typedef struct rp_task_desc {
  const char *name;  /* unique per runtime, RP_NAME_MAX's rule; copied */
  rp_task_fn cpu_fn; /* variant for CPU workers (may be NULL) */
  rp_task_fn gpu_fn; /* variant for GPUs (may be NULL) */
  unsigned flags;    /* rp_task_flags */
  uint64_t cost_ns;  /* cost hint for placement; 0 = measure; placement
                        counts at most RP_PLACE_COST_MAX */
  /* Optional host-side check of the argument bytes (after per-replay
   * interpolation) against the declared accesses' shapes: it reads
   * rp_ctx_args/rp_ctx_inst only, never instance data, and returns
   * RP_OK or an error (its detail set with rp_error_set). A replay calls it
   * before issuing a GPU op of this task whose args are interpolated and
   * read on the device (RP_TASK_DEVICE_ARGS), so that a bad per-replay
   * value (an out-of-range batch index) fails the op and poisons the
   * replay instead of reaching the kernel. May be NULL. */
  rp_task_fn check_fn;
} rp_task_desc;

/* Registers a task. RP_EEXIST for a duplicate name, RP_EINVAL without any
 * variant or name, a name outside RP_NAME_MAX's rule, with unknown flags
 * or with both STREAM_ORDERED and HOST, RP_ERANGE too many tasks (a
 * runtime holds 4,194,304); nothing is registered then. */
RP_API rp_status rp_task_register(rp_runtime *rt, const rp_task_desc *desc,
                                  rp_task_id *out);
/* The id of a registered task; RP_ENOTASK when none has that name. */
RP_API rp_status rp_task_find(const rp_runtime *rt, const char *name,
                              rp_task_id *out);
RP_API const char *rp_task_name(const rp_runtime *rt, rp_task_id id);
/* What a task was registered with. */
typedef struct rp_task_info {
  const char *name; /* the registry's copy: valid while the runtime lives */
  unsigned flags;   /* rp_task_flags: its contract */
  uint64_t cost_ns; /* its cost hint; 0: none */
  int has_cpu;      /* 1 when it has a CPU function */
  int has_gpu;      /* 1 when it has a GPU function */
} rp_task_info;
/* Fills *out for task id. Errors: RP_EINVAL (NULL argument), RP_ENOTASK
 * (no task has that id on rt). On error *out is untouched. */
RP_API rp_status rp_task_query(const rp_runtime *rt, rp_task_id id,
                               rp_task_info *out);

/* What a running task sees. */
RP_API rp_runtime *rp_ctx_runtime(const rp_task_ctx *ctx);
RP_API rp_proc rp_ctx_proc(const rp_task_ctx *ctx);
RP_API rp_proc_kind rp_ctx_proc_kind(const rp_task_ctx *ctx);
RP_API uint32_t rp_ctx_shard(const rp_task_ctx *ctx);
RP_API uint32_t rp_ctx_shards(const rp_task_ctx *ctx);
/* cudaStream_t for GPU tasks, NULL on CPU workers. */
RP_API void *rp_ctx_stream(const rp_task_ctx *ctx);
/* The task's argument bytes (after per-replay interpolation). */
RP_API const void *rp_ctx_args(const rp_task_ctx *ctx, size_t *size);
RP_API uint32_t rp_ctx_access_count(const rp_task_ctx *ctx);
/* Pointer to element rect.lo of the i-th declared access's instance. */
RP_API void *rp_ctx_ptr(const rp_task_ctx *ctx, uint32_t i);
RP_API const rp_instance_info *rp_ctx_inst(const rp_task_ctx *ctx, uint32_t i);
/* This shard's workspace slice (NULL, 0 when none was declared). */
RP_API void *rp_ctx_workspace(const rp_task_ctx *ctx, size_t *bytes);
/* Replay number (0-based) inside a replay; UINT64_MAX in eager mode. */
RP_API uint64_t rp_ctx_replay(const rp_task_ctx *ctx);
/* GPU tasks in an exec: a device pointer to this op's argument bytes (the
 * size rp_ctx_args reports) in the GPU's parameter buffer. The buffer is
 * refreshed, in stream order, at the start of every replay from a pinned
 * staging slot of that replay (one slot per replay in flight, so a queued
 * replay never reads a later replay's values), after interpolation: a
 * kernel that reads it sees its replay's values although the CUDA graph
 * does not change. Valid for the exec's lifetime; 16-byte aligned. NULL for
 * CPU tasks, for ops without argument bytes and for eager (non-replay)
 * launches. */
RP_API const void *rp_ctx_device_args(const rp_task_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* The launch API: asynchronous, dependencies inferred from accesses. */

typedef enum rp_privilege {
  RP_READ = 1,
  RP_WRITE = 2,
  RP_RW = 3,
  /* fold with redop; commutes with the same-redop reductions of the same
   * kind of op, so tasks that reduce into one instance may run at the same
   * time on different workers: a task's fold must be atomic. SUM copies
   * commute with each other (into host memory they lock each 16 KiB block
   * of the destination, on a GPU they add atomically); a task's fold and a
   * copy's into one instance do not commute: the later waits for the
   * earlier, as after a write. In a task's access the operator only
   * orders the folds (which tasks' reductions commute); the library folds
   * nothing: the task's body does, in whatever element type the instance
   * has, so any type is accepted (a u8 instance too; rp_copy's
   * RP_REDOP_SUM, which the library performs, takes f32/f64/i32/i64
   * only, else RP_ETYPE). Of a task's RP_REDUCE access a launch checks
   * the instance, as for any access, and that redop is RP_REDOP_SUM
   * (RP_EINVAL otherwise; a READ, WRITE or RW access must have
   * RP_REDOP_NONE), never the element type */
  RP_REDUCE = 4,
} rp_privilege;

typedef enum rp_redop {
  RP_REDOP_NONE = 0,
  RP_REDOP_SUM = 1,
} rp_redop;

/* What a launch declares about one instance; the dependence analysis,
 * copy insertion and the replay's order follow it. RP_READ: the task
 * reads it and writes nothing; RP_WRITE: it writes it (all of it or only
 * some elements) and reads nothing of its old contents; RP_RW: anything;
 * RP_REDUCE: atomic folds only. Elements a WRITE task leaves alone keep
 * their contents, replayed as eagerly: where copy insertion gives the task
 * a mirror (its processor cannot reach the instance), the mirror is filled
 * from the instance before the task, as for RP_RW, and written back whole
 * after it; the fill is left out only where the engine knows the task
 * overwrites every element (a library task whose count reaches the
 * instance's volume under the launch's args, no interpolation changing
 * it: rp.fill with n 0). The library's own tasks (rp_kernels_register's rp.*
 * and gpt.*, whose contracts kernels/tasks.h and kernels/gpt_kernels.h
 * state) check every launch, recorded launch, builder call and graph
 * load: each access is declared with the privilege the task's contract
 * gives it under the launch's args, or RP_RW, else RP_EINVAL before
 * anything runs or is recorded, the detail naming the task, the access
 * (index and role) and both privileges. A field of the args that decides
 * a privilege (rp.gemm's beta, gpt.matmul_bwd's accumulate) counts as
 * set when an rp_interp writes it. A task registered with
 * rp_task_register is not checked: its declared privileges are taken as
 * given, and a declaration short of what it does leaves it unordered
 * against the ops around it. */
typedef struct rp_access {
  rp_inst inst;
  rp_privilege priv;
  rp_redop redop; /* RP_REDUCE: RP_REDOP_SUM; else RP_REDOP_NONE */
} rp_access;

/* Per-replay argument interpolation: `bytes` bytes at `src_offset` of the
 * replay's argument block are copied to `dst_offset` of the op's arguments
 * before the op runs. dst_offset RP_INTERP_SHARDS targets an SPMD launch's
 * shard count (a uint32_t, clamped to 1..max shards). The source lies
 * within the first RP_MAX_REPLAY_ARGS bytes (RP_ERANGE at the launch
 * otherwise: no exec could take such a block). An op's interpolations
 * apply in order (the launch's array, then rp_graph_add_interp's in call
 * order; a graph file keeps it): where two write the same bytes, the
 * later one's stand. */
typedef struct rp_interp {
  size_t src_offset;
  size_t dst_offset;
  size_t bytes;
} rp_interp;
#define RP_INTERP_SHARDS ((size_t)-1)

/* The most shards one SPMD launch may have. */
#define RP_MAX_SHARDS 4096u
/* The largest workspace alignment (a huge page): RP_ERANGE above. */
#define RP_MAX_WORKSPACE_ALIGN ((size_t)1 << 21)

typedef struct rp_launch {
  rp_task_id task;
  rp_proc proc;              /* a processor, or RP_PROC_ANY */
  const rp_access *accesses; /* declared accesses (copied) */
  uint32_t naccess;
  const void *args; /* argument bytes (copied) */
  size_t args_size;
  uint32_t shards;            /* 0 or 1: single task; N: SPMD over N shards
                                 (N <= RP_MAX_SHARDS) */
  const rp_proc *shard_procs; /* NULL: engine places shards on CPU
                                 workers (proc a GPU: RP_EPROC); else one
                                 processor per shard (shard_procs[0] for
                                 a single task), and proc is not used */
  size_t workspace_bytes;     /* per shard; 0 = none; the shards' slices,
                                 each rounded up to the alignment, must
                                 fit a size_t together (else RP_ERANGE, at
                                 the launch or builder call); eagerly they
                                 are one block, so every shard's processor
                                 must have the same memory (else
                                 RP_EUNSUPPORTED: record the launch, a
                                 replay gives each GPU shard its own) */
  size_t workspace_align;     /* power of two (else RP_EINVAL) up to
                                 RP_MAX_WORKSPACE_ALIGN (RP_ERANGE above);
                                 0 = 64 */
  rp_event wait;              /* extra precondition (eager event, captured op
                                 ref or precondition port), or RP_NO_EVENT */
  uint64_t cost_ns;           /* placement hint; 0 = task's hint / measure */
  const rp_interp *interps;   /* recorded launches only (copied) */
  uint32_t ninterp;
} rp_launch;

/* Copy domain: which points move. */
typedef enum rp_copy_domain {
  RP_DOMAIN_INTERSECT = 0, /* intersection of both instances' rectangles */
  RP_DOMAIN_SRC = 1,       /* the source's rectangle (must fit the dst) */
  RP_DOMAIN_DST = 2,       /* the destination's rectangle (must fit the src) */
  RP_DOMAIN_RECT = 3,      /* `rect` below (must fit both) */
} rp_copy_domain;

typedef struct rp_copy {
  rp_inst src;
  rp_inst dst;
  rp_copy_domain domain;
  rp_rect rect;   /* for RP_DOMAIN_RECT */
  rp_redop redop; /* RP_REDOP_SUM: dst += src (f32/f64/i32/i64) */
  rp_event wait;
} rp_copy;

/* Parallel operators, each a small set of copies (README.md: the
 * "Beyond this screen" paragraph after "The API in one screen"; a
 * training step built of them: docs/training.md, docs/distributed.md "The
 * parallel operators of a step"). A sum of parts is part 0 copied, then `+=`
 * each other part in part order, each waiting for the one before (eager,
 * recorded and built): ((p0 + p1) + p2) + ..., the same bits whichever part is
 * ready first.
 * The parts, checked at the launch (or builder) call: each has the whole's
 * element type (RP_ETYPE); for replicate and reduction the whole's
 * rectangle, for repartition and combine part i is exactly the chunk
 * rp_chunk_rect(whole, dim, nparts, i) gives, so the parts tile the whole
 * in order (RP_ESHAPE otherwise, an empty trailing chunk included; dim
 * outside the whole's dimensions: RP_EINVAL); no part is the whole or
 * another part (RP_EINVAL). A sum (the backward of replicate, the forward
 * of reduction) takes f32, f64, i32 or i64 only, whatever the part count
 * (RP_ETYPE; one part is then a plain copy). */
typedef enum rp_pop_kind {
  RP_POP_REPLICATE = 0, /* fwd: whole -> every part; bwd: sum(parts) -> whole */
  RP_POP_REPARTITION = 1, /* fwd: whole scattered into parts; bwd: gathered */
  RP_POP_COMBINE = 2,     /* fwd: parts gathered into whole; bwd: scattered */
  RP_POP_REDUCTION = 3, /* fwd: sum(parts) -> whole; bwd: whole -> every part */
} rp_pop_kind;

typedef struct rp_parallel_op {
  rp_pop_kind kind;
  int backward; /* 0 forward, 1 backward */
  rp_inst whole;
  const rp_inst *parts; /* nparts instances */
  uint32_t nparts;      /* 1..4096 (0: RP_EINVAL; more: RP_ERANGE) */
  int dim;              /* partitioned dimension (repartition/combine) */
  rp_event wait;
} rp_parallel_op;

/* Launches a task (or N SPMD shards). *done (may be NULL) is the completion
 * event (eager) or the recorded op's reference (capture; a parallel
 * operator's stands for all its copies, as its eager *done merges them: a
 * wait or a postcondition on it covers every copy). References belong to
 * their capture: one of another capture, of this runtime or another, is
 * refused (RP_ECAPTURE as a wait, RP_EPORT as a postcondition). Errors (the
 * three launch calls), all before anything runs or is recorded (*done
 * untouched): RP_EINVAL a NULL or malformed argument (a field out of its
 * documented values, an instance handle 0: none), or a privilege short of
 * what a library task does with the access (rp_access); for a library
 * task (rp_kernels_register's rp.* and gpt.*), any launch, eager or
 * recorded, SPMD or not, that the task's own check would refuse when it
 * runs (args missing or shorter than its struct, a field out of its
 * range, too many or too few accesses, an instance of the wrong element
 * type, not dense, or smaller than the args' counts, a written access
 * overlapping another), with the status and detail the task gives after
 * "rp_launch_task: " ("rp_launch_task: rp.fill: access 0 (X) has 8
 * elements, needs 9"; rp_graph_add_task and a graph's load likewise); a
 * check that reads a field an rp_interp of the launch writes is left to
 * the task, which runs it on every replay with the replayed value (a
 * failure there fails the replay), as are the task's float-field and
 * cross-instance checks when any interpolation writes its args, and its
 * checks of data values; RP_ECAPTURE another
 * thread's capture is open, or an eager event
 * as a recorded launch's wait; RP_ENOTASK, RP_EPROC, RP_EACCESS, RP_ESHAPE,
 * RP_ETYPE, RP_ERANGE, RP_ESTALE for a bad task, processor, access, copy
 * rectangle, element type, shard count or handle (the detail names it);
 * RP_ECONTRACT from a task inside a replay; RP_ENOMEM, and it alone, can
 * also come partway through an eager parallel operator: the copies issued
 * before it run on (rp_runtime_drain waits for them), *done untouched. A
 * task that fails later
 * poisons *done instead, and the instances it writes: every later eager op
 * that accesses one of them fails with that status too (a write-only op
 * included, also after a host rp_instance_write), until
 * rp_instance_realloc gives the instance fresh storage. The instances it
 * only reads are not poisoned: a later op writing one waits for it, then
 * runs. A fold that joins the failed fold's reduction group (the same
 * operator, no reader between) does not wait for it and runs; the group's
 * readers and writers after it fail. */
RP_API rp_status rp_launch_task(rp_runtime *rt, const rp_launch *l,
                                rp_event *done);
RP_API rp_status rp_launch_copy(rp_runtime *rt, const rp_copy *c,
                                rp_event *done);
RP_API rp_status rp_launch_parallel(rp_runtime *rt, const rp_parallel_op *op,
                                    rp_event *done);

/* Shard i of n of `whole` along dimension `dim`, split as torch.chunk does:
 * chunk = ceil(extent / n); shard i covers [lo + i*chunk, min(hi, lo +
 * (i+1)*chunk - 1)]. Trailing shards can be empty: RP_ESHAPE then (callers
 * should use fewer shards). Other errors: RP_EINVAL n 0 or dim out of
 * range, RP_ERANGE i >= n or an extent or volume that overflows, RP_ESHAPE an
 * empty or invalid whole; *out untouched. */
RP_API rp_status rp_chunk_rect(const rp_rect *whole, int dim, uint32_t n,
                               uint32_t i, rp_rect *out);

/* ------------------------------------------------------------------------ */
/* Recording: capture */

/* Copy insertion: when a recorded task's processor cannot access one of
 * its instances (another device's memory, device memory from a CPU task),
 * capture gives the task a mirror of the instance in the processor's own
 * memory: a copy source -> mirror before a task that reads it (READ, RW,
 * REDUCE; skipped while the mirror is still current), the task accesses
 * the mirror, and a copy mirror -> source after a task that writes it
 * (WRITE, RW, REDUCE), ordered before later users of the source. A WRITE
 * task's mirror is not filled first: WRITE means the task overwrites the
 * whole instance. The inserted copies are ordinary copy ops (dumps mark
 * them "inserted"); the op reference a task launch hands out stands for the
 * task and its write-backs. rp_instantiate allocates the mirrors (owned by
 * the exec). The shards of one SPMD launch share a mirror, so shards on
 * different devices that cannot reach an instance are refused (RP_EACCESS)
 * at launch. */
typedef struct rp_capture_opts {
  int no_copy_insertion; /* 1: do not insert mirror copies for inaccessible
                            instances (instantiate then fails with RP_EACCESS
                            naming the op and the instance) */
} rp_capture_opts;

/* Starts recording on this thread. RP_ECAPTURE when a capture is already open
 * on this runtime (from any thread: nested or concurrent capture). A
 * capture still open when its thread exits is aborted then (as
 * rp_capture_abort), so the runtime takes eager launches and can be
 * destroyed again; a thread holds at most 4 open captures (on 4
 * runtimes): a fifth is RP_ERANGE, nothing started. RP_ECONTRACT from a
 * running task or an event's callback (they borrow their thread: a
 * capture they left open could never be ended), nothing started. */
RP_API rp_status rp_capture_begin(rp_runtime *rt, const rp_capture_opts *opts);
/* Ends recording; *out is a new graph owned by the caller. RP_ECAPTURE when
 * this thread has no open capture. When a recorded launch failed part-way
 * (after recording some of its ops), the capture cannot be trusted: the
 * call returns that launch's status (its detail quoting the launch's),
 * closes the capture and frees what was recorded (*out untouched). */
RP_API rp_status rp_capture_end(rp_runtime *rt, rp_graph **out);
/* Discards an open capture. RP_ECAPTURE when this thread has no open
 * capture on rt. */
RP_API rp_status rp_capture_abort(rp_runtime *rt);
/* Whether launches on rt record: 1 this thread has a capture open on rt
 * (its launches are recorded), -1 another thread has, or the caller is an
 * event's callback or a task running on the capturing thread (its
 * launches are refused), 0 none or rt is not a live runtime. For layers whose
 * calls run eagerly and read results back, to refuse them while recording.
 * Leaves the thread's error detail as it was when it returns 1, -1 or 0
 * for a live rt. */
RP_API int rp_capture_open(rp_runtime *rt);
/* Names the ops of the next launch call on this capture ("fc1.fwd"; see
 * RP_NAME_MAX): its task, or each copy of a copy or parallel operator
 * (copies capture inserts stay unnamed); a call that fails spends the name
 * too. NULL or "" cancels. Errors:
 * RP_ECAPTURE no capture open on this thread, RP_EINVAL a bad name. */
RP_API rp_status rp_capture_name_next(rp_runtime *rt, const char *name);
/* A named precondition port; *ev may be used as a launch's `wait`; *port
 * (may be NULL) its index. A port no launch waits on is unbound:
 * rp_graph_validate and rp_instantiate refuse the graph (RP_EPORT, naming
 * it). Errors: RP_ECAPTURE no capture open on this thread, RP_EINVAL a bad
 * name, RP_EPORT a name another precondition port has. */
RP_API rp_status rp_capture_precondition(rp_runtime *rt, const char *name,
                                         rp_event *ev, uint32_t *port);
/* A named postcondition port signalled once all of ops (captured op refs)
 * completed in a replay; *port (may be NULL) its index. Errors: RP_ECAPTURE no
 * capture open on this thread, RP_EINVAL a bad name, RP_EPORT an entry of ops
 * that is not an op reference of this capture (an eager event, another
 * capture's reference, a precondition port) or a name another
 * postcondition port has. With n 0 the port is bound
 * later (rp_graph_bind_postcondition); instantiate refuses one left
 * unbound. */
RP_API rp_status rp_capture_postcondition(rp_runtime *rt, const char *name,
                                          const rp_event *ops, uint32_t n,
                                          uint32_t *port);

/* ------------------------------------------------------------------------ */
/* Recording: the explicit builder */

typedef uint32_t rp_op_id;
typedef uint32_t rp_port_id;

typedef enum rp_op_kind {
  RP_OP_TASK = 0,
  RP_OP_COPY = 1,
} rp_op_kind;

/* A new empty graph on rt, owned by the caller. RP_EBUSY from a callback
 * or task that rp_runtime_destroy of rt runs. */
RP_API rp_status rp_graph_create(rp_runtime *rt, rp_graph **out);
/* Frees g (execs instantiated from it stay valid). RP_ESTALE when g was
 * already destroyed; RP_ECONTRACT from a task inside a replay (g stays). */
RP_API rp_status rp_graph_destroy(rp_graph *g);
/* Adds ops; *out (may be NULL) is the new op's id. The builder orders ops
 * by the edges given only (capture infers them from accesses; `reprise
 * dump --lint` finds conflicting accesses no path orders). l->wait /
 * c->wait must be RP_NO_EVENT (use edges and ports; RP_EINVAL otherwise).
 * Other errors are
 * the launch calls' checks (RP_ENOTASK, RP_EPROC, RP_EACCESS, RP_ESHAPE,
 * RP_ETYPE, RP_ERANGE, RP_ESTALE); a failed add leaves the graph as it was. */
RP_API rp_status rp_graph_add_task(rp_graph *g, const rp_launch *l,
                                   rp_op_id *out);
RP_API rp_status rp_graph_add_copy(rp_graph *g, const rp_copy *c,
                                   rp_op_id *out);
/* Adds the copies of a parallel operator; *first and *count (each may be
 * NULL) give the op ids (consecutive). */
RP_API rp_status rp_graph_add_parallel(rp_graph *g, const rp_parallel_op *op,
                                       rp_op_id *first, uint32_t *count);
/* RP_EINVAL for an op out of range. An edge already present is not
 * added again (RP_OK; a graph file that repeats one is refused). Cycles
 * (a self-edge included) are found by rp_graph_validate / rp_instantiate
 * (RP_ECYCLE). */
RP_API rp_status rp_graph_add_edge(rp_graph *g, rp_op_id from, rp_op_id to);
/* External ports; *out (may be NULL) is the port's index. A precondition
 * is an event supplied to each replay; a postcondition an event each
 * replay hands back. RP_EINVAL no name or a name outside RP_NAME_MAX's
 * rule, RP_EPORT a name already used by a port of that kind. A port of
 * either kind that no op is bound to is refused by rp_graph_validate and
 * rp_instantiate (RP_EPORT). */
RP_API rp_status rp_graph_add_precondition(rp_graph *g, const char *name,
                                           rp_port_id *out);
RP_API rp_status rp_graph_add_postcondition(rp_graph *g, const char *name,
                                            rp_port_id *out);
/* op waits for precondition port p / postcondition port p waits for op.
 * RP_EPORT p out of range or already bound to op, RP_EINVAL op out of
 * range. */
RP_API rp_status rp_graph_bind_precondition(rp_graph *g, rp_port_id p,
                                            rp_op_id op);
RP_API rp_status rp_graph_bind_postcondition(rp_graph *g, rp_port_id p,
                                             rp_op_id op);
/* Adds an interpolation to task op. RP_EINVAL op out of range, a copy or
 * a communication op (an rp.dist.* task: planned once at instantiate, its
 * arguments are never interpolated; a launch or graph file giving one an
 * interpolation is refused alike);
 * the launch checks of an interpolation (RP_EINVAL, RP_ERANGE: one that
 * does not fit the op's args or shard count, or reads past
 * RP_MAX_REPLAY_ARGS of the replay's argument block, the detail naming
 * it by its index among the op's); for a library task, RP_EINVAL when
 * under the op's interpolations, this one included, an access is
 * declared short of what the task does (rp_access: an interpolation of
 * rp.gemm's beta onto a C declared RP_WRITE); the op is unchanged then. */
RP_API rp_status rp_graph_add_interp(rp_graph *g, rp_op_id op,
                                     const rp_interp *ip);
/* Names op (RP_NAME_MAX); NULL or "" removes the name. RP_EINVAL for an
 * op out of range or a bad name. */
RP_API rp_status rp_graph_set_op_name(rp_graph *g, rp_op_id op,
                                      const char *name);
/* The op's name: "" when unnamed, NULL when op is out of range (the
 * detail says so). */
RP_API const char *rp_graph_op_name(const rp_graph *g, rp_op_id op);
/* Removes an edge (to fix a rejected graph). RP_ENOENT when absent. */
RP_API rp_status rp_graph_remove_edge(rp_graph *g, rp_op_id from, rp_op_id to);
RP_API uint32_t rp_graph_op_count(const rp_graph *g);
RP_API uint32_t rp_graph_edge_count(const rp_graph *g);
RP_API uint32_t rp_graph_precondition_count(const rp_graph *g);
RP_API uint32_t rp_graph_postcondition_count(const rp_graph *g);
/* 1 when `to` transitively depends on `from` (from == to: when the op
 * lies on a cycle); 0 otherwise, and for an op out of range or when its
 * search cannot allocate (rp_error_detail says which: RP_ERANGE,
 * RP_ENOMEM). */
RP_API int rp_graph_depends(const rp_graph *g, rp_op_id from, rp_op_id to);

/* Reading a graph back (the dump tool, analyses, a user's own checks).
 * Everything here reads; pointers handed out stay valid until g changes or
 * is destroyed. */

/* The runtime g belongs to (NULL for NULL or a destroyed graph). */
RP_API rp_runtime *rp_graph_runtime(const rp_graph *g);
/* One op as recorded. */
typedef struct rp_op_info {
  rp_op_kind kind; /* RP_OP_TASK or RP_OP_COPY */
  /* tasks */
  rp_task_id task;
  rp_proc proc;               /* as launched; RP_PROC_ANY: any worker */
  uint32_t shards;            /* SPMD shards; 1 for a plain task or a copy */
  const rp_proc *shard_procs; /* SPMD: one processor per shard, or NULL */
  uint64_t cost_ns;           /* the op's own hint; 0: the task's applies */
  /* tasks: the accesses declared; copies: 2 (source read, destination
   * written or reduced): see rp_graph_op_accesses */
  uint32_t naccess;
  /* copies: as launched (wait is RP_NO_EVENT) */
  rp_copy copy;
  int inserted; /* 1: capture inserted it (a mirror copy) */
} rp_op_info;
/* Fills *out for op. Errors: RP_EINVAL (NULL argument or graph, or a
 * destroyed graph: RP_ESTALE), RP_ERANGE (op >= rp_graph_op_count). On
 * error *out is untouched. */
RP_API rp_status rp_graph_op_query(const rp_graph *g, rp_op_id op,
                                   rp_op_info *out);
/* The accesses op declares (a copy: its source RP_READ, then its
 * destination RP_WRITE, or RP_REDUCE with the copy's redop). *n is set to
 * their number; up to cap are written to out. out == NULL with cap == 0
 * only counts. An access to a mirror capture inserted (and a mirror copy's
 * source or destination in rp_op_info.copy) names the mirror's handle, not
 * an instance: rp_instance_* refuse it; rp_graph_mirror_query says what it
 * mirrors. Errors: those of rp_graph_op_query, and RP_ERANGE when out is
 * too small (cap filled, *n says how many there are). */
RP_API rp_status rp_graph_op_accesses(const rp_graph *g, rp_op_id op,
                                      rp_access *out, uint32_t cap,
                                      uint32_t *n);
/* The mirrors capture inserted into g (copy insertion; 0 for NULL or a
 * destroyed graph). */
RP_API uint32_t rp_graph_mirror_count(const rp_graph *g);
/* Mirror k (0 <= k < rp_graph_mirror_count): *ref the handle its ops name
 * (rp_graph_op_accesses), *source the instance it mirrors (its element
 * type and rectangle are the mirror's), *mem the memory rp_instantiate
 * allocates it in. Any output may be NULL. Errors: RP_EINVAL (NULL
 * graph), RP_ESTALE (destroyed graph), RP_ERANGE (k out of range); the
 * outputs are then untouched. */
RP_API rp_status rp_graph_mirror_query(const rp_graph *g, uint32_t k,
                                       rp_inst *ref, rp_inst *source,
                                       rp_mem *mem);
/* Edge e (0 <= e < rp_graph_edge_count), in the order edges were added
 * (rp_graph_remove_edge moves the last edge into the removed one's
 * place): *from must finish before *to starts; *inferred is 1 when capture
 * inferred it from conflicting accesses, 0 when someone asked for it.
 * Errors: RP_EINVAL (NULL argument), RP_ESTALE (destroyed graph),
 * RP_ERANGE (e out of range); the outputs are then untouched. */
RP_API rp_status rp_graph_edge_query(const rp_graph *g, uint32_t e,
                                     rp_op_id *from, rp_op_id *to,
                                     int *inferred);
/* The ops bound to postcondition port p, in binding order: *n gets their
 * number, up to cap are written to out (out == NULL with cap == 0 only
 * counts). Errors: RP_EINVAL (NULL graph or n), RP_ESTALE, RP_ERANGE (p
 * out of range, or out too small: cap filled). */
RP_API rp_status rp_graph_postcondition_ops(const rp_graph *g, rp_port_id p,
                                            rp_op_id *out, uint32_t cap,
                                            uint32_t *n);
/* Checks the graph as instantiate would, without building anything:
 * rp_instantiate's errors (RP_ECYCLE, RP_ENOTASK, RP_EPROC, RP_EACCESS,
 * RP_ESHAPE, RP_ETYPE, RP_EPORT, RP_ESTALE, RP_EUNUSABLE ...); g is never
 * changed. */
RP_API rp_status rp_graph_validate(const rp_graph *g);

/* ------------------------------------------------------------------------ */
/* Graph files
 *
 * A graph file is versioned JSON (header "format": "reprise-graph",
 * "version": 1, an FNV-1a 64 checksum of the graph body; see docs/debugging.md
 * "Graph files"): human-readable and diffable. Live handles cannot be stored,
 * so a file carries an instance table (index -> memory kind, device, element
 * type, rectangle, strides) and ops name table indices. The table lists the
 * distinct instances the ops reference in first-use order (ops in order, a
 * task's accesses in order, a copy's source before its destination; a
 * mirror made by copy insertion counts as its source): the order
 * rp_graph_instances() reports. Mirrors are stored as a mirror table
 * (source, memory kind, device) and allocated again at instantiate.
 * Tasks are stored by registered name.
 * Both calls return RP_EUNSUPPORTED in a build without cJSON. */

/* Saves g to path through the output writer ("Output files": a temporary
 * file next to it, fsynced and renamed over it, so a failed or interrupted
 * save leaves no partial file). Errors: RP_ECYCLE when g has a cycle
 * (naming its ops; the loader would refuse the file, so none is written),
 * RP_ESTALE when an op references a
 * freed instance, RP_ERANGE when the file would exceed one of the
 * loader's limits (64 MiB, 4096 ops bound to one port, 4096 interpolations
 * of one op, 4M JSON values, ...: the detail names it), RP_EINVAL a path
 * that is not a regular file (its kind named),
 * RP_EIO (no such directory included). */
RP_API rp_status rp_graph_save(const rp_graph *g, const char *path);
/* Loads a graph file into a new graph on rt (*out owned by the caller).
 * Tasks are matched by their registered name (RP_ENOTASK), instances by
 * the caller's table: insts[i] (ninsts entries, the file's table order) must
 * match table entry i's element type (RP_ETYPE), rectangle and strides
 * (RP_ESHAPE); its memory may differ; ninsts other than the table's entry
 * count is RP_EINVAL (the detail gives both), and so is one instance given
 * for two entries (the table lists distinct instances: the detail names
 * both entries). With insts == NULL (ninsts
 * 0; a count without a table is RP_EINVAL) the loader allocates fresh
 * zeroed instances matching the table; they are the
 * caller's: list them with rp_graph_instances() and free them after the
 * graph and its execs are gone. Every op, edge and port goes through the
 * builder calls, so the same checks apply; cycles are refused at load
 * (RP_ECYCLE naming the ops). Corrupt files: RP_EFORMAT (not JSON,
 * truncated, wrong schema; the detail names the byte offset or JSON path),
 * RP_EVERSION, RP_ECHECKSUM, RP_ERANGE (a limit exceeded or an index out of
 * range); RP_ENOENT / RP_EIO when the file cannot be read. On error nothing
 * is left behind: no graph, no instances, *out untouched. */
RP_API rp_status rp_graph_load(rp_runtime *rt, const char *path,
                               const rp_inst *insts, uint32_t ninsts,
                               rp_graph **out);
/* The distinct instances g references, in instance-table order. *n is set
 * to their number; up to cap of them are written to out. out == NULL with
 * cap == 0 only counts; RP_ERANGE when out is too small (cap filled). */
RP_API rp_status rp_graph_instances(const rp_graph *g, rp_inst *out,
                                    uint32_t cap, uint32_t *n);

/* Graph file limits: a graph file may have at most RP_GRAPH_FILE_MAX bytes,
 * and the instances the loader allocates for it (insts == NULL) at most
 * RP_GRAPH_ALLOC_MAX bytes together, in any memory: a small file cannot
 * make it allocate (and zero) gigabytes. */
#define RP_GRAPH_FILE_MAX (64u << 20)
#define RP_GRAPH_ALLOC_MAX ((size_t)256 << 20)
/* rp_graph_load from a buffer of len bytes (it need not end in a NUL):
 * the same checks and errors (no RP_ENOENT / RP_EIO), RP_ERANGE when len
 * is above RP_GRAPH_FILE_MAX. max_alloc caps the bytes of the instances
 * the loader allocates (insts == NULL); 0 means RP_GRAPH_ALLOC_MAX. On
 * error nothing is left behind and *out is untouched. */
RP_API rp_status rp_graph_load_mem(rp_runtime *rt, const void *buf, size_t len,
                                   const rp_inst *insts, uint32_t ninsts,
                                   size_t max_alloc, rp_graph **out);

/* A recorded machine, as a graph file's optional "machine" key describes
 * it: CPU workers first, then GPU processors (their logical devices), and
 * the memories beyond system memory (pinned, GPU per logical device). */
#define RP_MODEL_MAX_GPUS 64
#define RP_MODEL_MAX_MEMS 32
#define RP_MODEL_MAX_DEVICE 1023 /* the largest device index of a model */
typedef struct rp_machine_desc {
  unsigned cpus;  /* CPU workers, 1..128 */
  unsigned ngpus; /* GPU processors after them, 0..RP_MODEL_MAX_GPUS */
  int gpu_device[RP_MODEL_MAX_GPUS]; /* 0..RP_MODEL_MAX_DEVICE (negative:
                                        RP_EINVAL, above: RP_ERANGE) */
  unsigned nmems; /* memories besides system memory, 0..RP_MODEL_MAX_MEMS
                     (system memory listed, or one listed twice, counts
                     once); a GPU memory's device 0..RP_MODEL_MAX_DEVICE
                     (another memory's device is not read: -1) */
  rp_mem_info mems[RP_MODEL_MAX_MEMS];
} rp_machine_desc;
/* The machine a graph file was recorded on (its optional graph.machine
 * key): *present = 1 and *m filled when the file has one, *present = 0
 * (*m untouched) when not. Errors: RP_EINVAL (NULL argument),
 * RP_EUNSUPPORTED (a build without cJSON), RP_EFORMAT when buf is not a
 * graph file or the key is malformed (the detail then names
 * "graph.machine" when the key is at fault), RP_ERANGE when a count or
 * device in the key is beyond the limits above, and the file header's
 * errors, as rp_graph_load gives them (RP_EVERSION, RP_ECHECKSUM,
 * RP_ERANGE above RP_GRAPH_FILE_MAX). */
RP_API rp_status rp_graph_file_machine(const void *buf, size_t len,
                                       rp_machine_desc *m, int *present);
/* A model of a machine, for reading graph files anywhere (reprise dump):
 * the processors and memories m names, every processor reaching every
 * memory, and instances without storage (info.ptr NULL). It has CPU worker
 * threads but no device: graphs load, dump, lint and (CPU-only)
 * instantiate; nothing on it may run: every call that would touch
 * instance data (rp_instance_read, rp_instance_write, eager launches of
 * tasks, copies, parallel and distributed operators) returns
 * RP_EUNSUPPORTED naming the call (capture still records), and so do
 * rp_replay, rp_exec_tune, rp_exec_trace_start and rp_exec_update_args
 * of its execs. The environment is ignored. *out is
 * the caller's (rp_runtime_destroy). Errors: RP_EINVAL (NULL argument, a
 * memory of unknown kind), RP_ERANGE (a count out of its range, named),
 * RP_ENOMEM; nothing is left behind. */
RP_API rp_status rp_runtime_create_model(const rp_machine_desc *m,
                                         rp_runtime **out);

/* ------------------------------------------------------------------------ */
/* Instantiate and replay */

#define RP_MAX_INFLIGHT 64u           /* the most replays in flight */
#define RP_MAX_REPLAY_ARGS (1u << 20) /* the largest replay argument block */

typedef struct rp_exec_opts {
  uint32_t max_inflight; /* replays in flight, 1..RP_MAX_INFLIGHT;
                            0 = 4 */
  size_t max_args;       /* replay argument block bytes, up to
                            RP_MAX_REPLAY_ARGS; 0 = 256 */
  int no_replace;        /* nonzero: rp_exec_tune never re-places (runs
                            nothing) */
  uint64_t edge_cost_ns; /* cross-worker edge cost; 0 = default (200); at
                            most RP_PLACE_COST_MAX counts */
} rp_exec_opts;

/* Validates g and compiles it into an exec owned by the caller. The exec does
 * not depend on g afterwards. Errors: RP_ECYCLE, RP_ENOTASK, RP_EPROC,
 * RP_EACCESS, RP_ESHAPE, RP_ETYPE, RP_EPORT, RP_ESTALE; RP_ERANGE for
 * options past their limits, an interpolation reading past max_args, a
 * workspace whose size overflows, or more than 2^24 units (a task op
 * counts one per shard, a copy one); g is unchanged. */
RP_API rp_status rp_instantiate(rp_graph *g, const rp_exec_opts *opts,
                                rp_exec **out);
/* Waits for every in-flight replay and callback, then frees. Errors:
 * RP_EBUSY another thread is inside rp_replay or another call that holds
 * ex (one thread at a time per exec; nothing freed), or a replay in flight
 * waits for a precondition that has not triggered, or cannot complete
 * behind a replay of another exec that waits at one on a worker they
 * share (waiting could deadlock the caller; the detail names the replay,
 * for another exec's also that exec and the worker, the port and the
 * event, and says whether it is an rp_event_create event, to trigger, or
 * one the runtime completes, such as another exec's postcondition, to
 * wait for: do so, or wait for the done events, and retry), or
 * replays are in flight and this is an event's callback or a running
 * eager task of ex's runtime,
 * RP_ECONTRACT called from a task inside a replay (nothing freed, ex still
 * valid, in every case).
 * RP_EUNUSABLE when the CUDA context was lost while waiting: host callbacks
 * CUDA will never run may still reference the exec, so its memory is
 * leaked on purpose (not freed) — ex is invalid afterwards all the same
 * and no longer counts against rp_runtime_destroy. */
RP_API rp_status rp_exec_destroy(rp_exec *ex);

typedef struct rp_replay_args {
  const void *args; /* argument block (copied), may be NULL */
  size_t args_size;
  const rp_event *pre; /* one event per precondition port, in port order */
  uint32_t npre;
  rp_event *post; /* out: one event per postcondition port (owned by
                     the caller), may be NULL (then npost is 0) */
  uint32_t npost; /* with post: the exec's postcondition port count;
                     post NULL: 0, no postcondition events wanted (the
                     ports' ops run all the same) */
} rp_replay_args;

/* Starts one replay and returns at once (blocks only while max_inflight
 * replays are already in flight). A replay is ordered after the earlier
 * replays of ex (by the accesses of its ops, as recorded) and after its
 * precondition events, nothing else: eager ops (launches outside a
 * capture) and other execs' replays that touch the same instances are not
 * waited for, and do not wait for it. Order them through events: pass an
 * eager op's done event (or another replay's) as a precondition, and make
 * an eager launch wait for this replay's done event (rp_launch.wait), or
 * drain. A CPU worker that waits inside a replay (at a precondition, or
 * for another worker's part of it) runs the eager work queued to it
 * meanwhile, so an eager op that a replay waits for runs whichever worker
 * it was queued to; such an eager task's body then runs inside the
 * replay's wait, and must not wait for that replay (its done event,
 * rp_exec_destroy of its exec, a full window) nor for anything the caller
 * holds while waiting for it: the replay would wait for the task. *done (owned
 * by the caller; done may be NULL: no event) triggers when every op finished,
 * or is poisoned with the first error. a may be NULL (no arguments, no ports).
 * The argument block must cover every byte the exec's interpolations read
 * (RP_ERANGE naming the op and interpolation otherwise) and fit max_args
 * (RP_ERANGE).
 * rp_replay only replays: from the first call on it allocates nothing,
 * takes no lock (on the calling thread or a worker; a SUM copy into host
 * memory locks each 16 KiB block of its destination, as eagerly, and an
 * event with callbacks takes its own lock when it completes) and never
 * changes the placement (rp_exec_tune does that, when the caller asks).
 * It never waits for a replay that needs something from the caller:
 * replays gated on
 * preconditions the caller triggers after issuing more never block it
 * (with max_inflight replays in flight and the oldest of them, whose
 * completion frees a slot, still waiting for a precondition, it returns
 * RP_EBUSY at once instead of waiting for a slot; a later replay waiting
 * for one does not keep the oldest from completing, and is not waited
 * for; so it does when they make no progress while a replay of another
 * exec, whose workers they share, waits at a precondition, when the
 * runtime's submission ring (4096 replays) is full behind a worker that
 * waits at one or when it is full at all in an event's callback, and when
 * called from an event's callback with the window full: a callback must
 * not block).
 * Each of these refusals for a gate names the replay that waits (the
 * oldest one of ex for a full window; for a replay of another exec, that
 * exec's address and the worker it holds), the precondition port it waits
 * at and the event, and says whether that event is the caller's to
 * trigger (rp_event_create) or one the runtime completes (another
 * replay's postcondition or done event, an eager op's done event), to
 * wait for: rp_replay does not wait for the latter either, since what
 * completes it may itself wait for the caller. Execs chained through ports (A's
 * postcondition fed to B's precondition) meet it when B's window fills while
 * its oldest replay still waits for A: replay A before B in each step with B's
 * max_inflight at least A's (A's window then makes A's earlier replays, and
 * their postconditions, complete before B's window fills up to them), or wait
 * for the event named (rp_event_wait) or for B's done event of
 * max_inflight replays back before replaying B again.
 * Errors: RP_EINVAL (NULL or malformed args: args_size or npost without
 * their array), RP_EPORT (npre not the exec's precondition port count,
 * post given and npost not its postcondition port count), RP_ERANGE (argument
 * block), RP_ESTALE (a stale precondition event; a destroyed exec), RP_EBUSY
 * (another thread is inside rp_replay or another call that holds ex: one
 * thread at a time per exec; or the window of max_inflight
 * replays is full and the oldest of them, or a replay of another exec
 * ahead of them, waits for an untriggered precondition; or the submission ring
 * is full behind a worker waiting at one, or full in a callback or an
 * eager task; or the window is full and this is an event's callback or
 * a running eager task of ex's runtime),
 * RP_ECONTRACT (called from a task
 * inside a replay), RP_EUNSUPPORTED (an exec instantiated on a machine
 * model), RP_EUNUSABLE (the runtime is unusable), RP_ENOMEM (the
 * runtime's event table could not grow). On error nothing was replayed
 * and *done is untouched. */
RP_API rp_status rp_replay(rp_exec *ex, const rp_replay_args *a,
                           rp_event *done);
/* Placement by measurement, when the caller chooses. Units placed without
 * a cost hint (task or launch cost_ns 0) were placed on a 1 us default;
 * rp_exec_tune runs trial replays of ex — the first warms caches, the next
 * 8 time every unit, then 8 on each candidate placement the measured costs
 * suggest (list scheduling on them, everything on one worker) and 8 on the
 * placement in effect — keeps the fastest, leaving instantiate's
 * placement only for one at least 10% faster (a smaller gain is within the
 * noise of 8 replays; rp_exec_stats.replacements counts a change;
 * rp_exec_dump says which won and why), and returns when
 * the exec has settled: at most 33 replays. Later rp_replay calls use that
 * placement; calling rp_exec_tune again measures again.
 * Trial replays are real replays: every op runs with a's argument block
 * and its side effects (an optimizer step updates its weights each time),
 * so call it where extra replays are harmless — on warm-up data, on a
 * scratch copy of the state, or counting them as the first steps of a run
 * (*replays says how many ran; may be NULL; an error before any trial
 * replay ran leaves it untouched). They are issued back to back
 * (up to max_inflight in flight, as a training loop keeps them) and every
 * one is waited for. a->pre's events stand for every trial replay and must
 * have triggered already; a->post is ignored (no postcondition events are
 * handed out). Without rp_exec_tune the placement instantiate chose stays.
 * With every unit hinted or pinned (a processor named, shard_procs
 * included: nothing to move), or no_replace 1, it runs nothing and
 * returns RP_OK. Waits first for the replays already in flight.
 * Errors: those of rp_replay for a's checks (nothing run); RP_EAGAIN when
 * a precondition event has not triggered yet and its poison status when it
 * was poisoned (nothing run); RP_EBUSY when a replay already in flight
 * waits for a precondition that has not triggered, or a replay of another
 * exec waits at one on a worker ex runs on (the detail names the worker,
 * the replay and its exec, the port and the event, and says whether to
 * trigger it or wait for it, as rp_replay's refusals do; do so, then tune
 * again; nothing run; such a replay still queued, which its worker has
 * not reached, is not seen: the trial replays then wait behind it), or
 * from an event's
 * callback or a running eager task of ex's runtime (nothing run), or
 * another thread is inside rp_replay or another call that holds ex (one
 * thread at a time per exec; nothing run); RP_EUNSUPPORTED for an exec that
 * communicates across ranks (each rank would measure and try placements of its
 * own, with trial replays its peers would not match; nothing run); RP_ENOMEM; a
 * trial replay's own failure (its status, e.g. RP_ETASK; the detail names the
 * op as rp_exec_error_detail does). On a failure after trial replays ran, those
 * replays ran (their side effects stay, *replays counts them), the exec
 * keeps the placement it had before the call and stays usable (should
 * restoring that placement run out of memory as well, it keeps the last
 * trial's placement, whole, and the detail says so). */
RP_API rp_status rp_exec_tune(rp_exec *ex, const rp_replay_args *a,
                              uint32_t *replays);

typedef struct rp_exec_stats {
  uint64_t replays;      /* replays completed */
  uint64_t ops_run;      /* ops executed (skipped ones not counted) */
  uint64_t ops_skipped;  /* poisoned ops skipped */
  uint64_t handoffs;     /* cross-processor waits that were not yet satisfied */
  uint64_t wakeups;      /* futex wake-ups of sleeping consumers (on a
                            kernel without futex_waitv a 10 ms bounded
                            sleep that ends counts as one) */
  uint64_t replacements; /* times rp_exec_tune changed the placement */
  uint32_t ops;          /* ops per replay after expansion */
  uint32_t procs_used;
  /* GPU lowering (all 0 for an exec without GPU ops). Counts are totals
   * over the replays so far; divide by `replays` for per-replay figures.
   * A replay whose GPU work is one CUDA graph per device shows, per
   * replay, graph_launches == gpu_devices, gpu_ops_op_by_op == 0,
   * host_waits == 0. */
  uint32_t gpus;                  /* GPU processors the exec uses */
  uint32_t gpu_devices;           /* physical devices: logical GPUs that share
                                     one are lowered together (one graph per
                                     segment on that device) */
  uint32_t gpu_segments;          /* segments (one CUDA graph each, or issued
                                     op by op), over all GPUs */
  uint32_t max_gpu_segments;      /* the most segments one GPU has */
  uint32_t gpu_segments_op_by_op; /* segments that cannot be a graph */
  uint64_t graph_launches;        /* CUDA graph launches */
  uint64_t gpu_ops_op_by_op;      /* GPU ops issued one by one (a segment that
                                     is no graph, REPRISE_CUDA_GRAPHS=0, or
                                     skipping poisoned ops) */
  uint64_t host_callbacks;        /* host functions enqueued (on each GPU's
                                     completion side stream, never on the
                                     replay stream) */
  uint64_t host_waits;            /* waits a launcher did on the host before
                                     issuing device work (preconditions, CPU
                                     tasks the GPU work depends on) */
  uint64_t stream_waits;          /* cross-GPU event waits the launcher
                                     enqueued on a stream (a segment issued
                                     op by op; a graph waits for other
                                     devices' producers through event wait
                                     nodes of its own: 0 per replay) */
  uint64_t inline_launches;       /* replays launched from the calling thread
                                     (no hand-off to a worker) */
  uint64_t param_copies;          /* per-replay argument refreshes: one
                                     async copy per physical device whose
                                     ops take interpolated arguments
                                     (logical GPUs on one device share one
                                     parameter buffer) */
} rp_exec_stats;
/* Only the shared errors (a bad exec or NULL out). */
RP_API rp_status rp_exec_stats_get(const rp_exec *ex, rp_exec_stats *out);
/* Detail of the first failure in the last failed replay: which op (its
 * name when it has one), task, shard and why; for a task that failed, why
 * is its own detail (what it set with rp_error_set, "" when it set none),
 * e.g. "replay 7: op 3 'data.next' (loader) shard 0: RP_EINVAL: batch 9
 * of 4". Valid until the next failed replay completes; "" when none
 * failed. */
RP_API const char *rp_exec_error_detail(const rp_exec *ex);
/* The processor an op (by graph op id; shard 0 for SPMD) was placed on.
 * RP_EINVAL op out of range (*out untouched). */
RP_API rp_status rp_exec_op_proc(const rp_exec *ex, rp_op_id op, rp_proc *out);

/* Replaces the recorded argument bytes of task op (size must equal the
 * recorded size) for every later replay; interpolations still apply on
 * top. Waits for the replays in flight first (not callable from a task
 * inside a replay: RP_ECONTRACT; RP_EBUSY, nothing changed, when one of
 * them waits for a precondition that has not triggered, or from an event's
 * callback or a running eager task of ex's runtime while replays are in
 * flight). CPU ops and GPU ops
 * issued op by op just take the new bytes. A GPU op inside a CUDA graph is
 * captured again with the new args and its node's parameters are set in place
 * (cudaGraphExecChildGraphNodeSetParams); when CUDA refuses (the new
 * capture differs in shape), the segment's graph is rebuilt and applied
 * with cudaGraphExecUpdate, and when that is refused too, re-instantiated.
 * *reinstantiated (may be NULL) is set to 1 when a re-instantiation
 * happened, else 0. Errors: RP_EINVAL bad exec or op, or op is a copy;
 * RP_ESHAPE size differs; RP_EUNSUPPORTED an exec of a machine model;
 * RP_EBACKEND a CUDA failure (detail names the op; the op keeps running with
 * its previous graph when the new capture failed, but its args already changed
 * for op-by-op issue); RP_EBUSY another thread is inside rp_replay,
 * rp_exec_tune or another call that holds ex (one thread at a time per
 * exec; nothing changed). */
RP_API rp_status rp_exec_update_args(rp_exec *ex, rp_op_id op, const void *args,
                                     size_t size, int *reinstantiated);

/* ------------------------------------------------------------------------ */
/* Traces: replay timelines as Chrome trace event JSON (Perfetto, chrome://
 * tracing). Off by default, and free when off. */

/* Records the timeline (per worker: each op's start and end, copies, waits)
 * of the next `replays` replays of ex. The buffers are allocated here, never
 * on the replay path. Errors: RP_EINVAL replays 0, RP_ERANGE too many
 * replays for the buffers, RP_EBUSY a trace is already recording or
 * another thread is inside rp_replay or another call that holds ex (one
 * thread at a time per exec), RP_ECONTRACT from a task inside a replay;
 * no trace is started then. */
RP_API rp_status rp_exec_trace_start(rp_exec *ex, uint32_t replays);
/* Waits for the recorded replays to complete, writes their timeline to path
 * (through the output writer, "Output files": the file is replaced only by
 * a whole trace) and stops recording. Errors: RP_EINVAL no trace started
 * or path not a regular file (its kind named), RP_EIO the file cannot be
 * created or written (detail: path and why), RP_EBUSY a replay in flight
 * (traced or not) waits for a precondition that has not triggered, or
 * replays are in flight and this is an event's callback or a running
 * eager task of ex's runtime, or another thread is inside rp_replay or
 * another call that holds ex (one thread at a time per exec); on
 * these the trace stays armed, so the write may be retried; RP_ECONTRACT
 * from a task inside a replay. */
RP_API rp_status rp_exec_trace_write(rp_exec *ex, const char *path);

/* ------------------------------------------------------------------------ */
/* Dump */

typedef enum rp_dump_format {
  RP_DUMP_TEXT = 0,
  RP_DUMP_DOT = 1,
  RP_DUMP_JSON = 2,
} rp_dump_format;

/* Writes g to f: TEXT (one line per op, access, edge and port), DOT
 * (Graphviz digraph: `dot -Tsvg`), or JSON (exactly a graph file, so a dump
 * of an acyclic graph loads back with rp_graph_load, and one of a cyclic
 * graph shows it; RP_EUNSUPPORTED without cJSON). Errors:
 * RP_EINVAL for NULL arguments or an unknown format, RP_EIO when writing
 * fails, RP_ENOMEM (DOT and JSON; nothing written then); JSON also
 * RP_ESTALE (an op references a freed instance) and RP_ERANGE (beyond a
 * graph file's limits), as rp_graph_save. */
RP_API rp_status rp_graph_dump(const rp_graph *g, FILE *f, rp_dump_format fmt);
/* Writes ex's schedule to f: its placement and why, then per lane (worker)
 * the units in order with their waits on other lanes and publishes (and,
 * in TEXT, the ports they wait on or signal): TEXT, DOT (a cluster per
 * lane, cross-lane waits in red), or JSON (one
 * object: "ops", "units", "workers_used", "placement", "lanes": [{"worker",
 * "units": [{"op", "name", "copy_name" (a named copy's), "shard", "waits":
 * [{"lane", "pos", "previous_replay"}], "publish"}]}]; a schedule, not a
 * graph file). Errors
 * as rp_graph_dump's, RP_ESTALE a destroyed exec. */
RP_API rp_status rp_exec_dump(const rp_exec *ex, FILE *f, rp_dump_format fmt);

/* ------------------------------------------------------------------------ */
/* Distributed: one recorded step across processes (MPI) and GPUs (NCCL)
 *
 * The model is SPMD, as control replication in Legion: every rank (one MPI
 * process of rp_runtime_config.comm) runs the same program, records the same
 * step and instantiates the same graphs in the same order. Each rank owns its
 * processors and instances; an rp_inst names an instance of the calling rank
 * only. Communication is launched like any other op, with declared accesses,
 * so dependence analysis orders it against the tasks around it:
 *   rp_launch_allreduce    sum one instance across all ranks, in place;
 *   rp_launch_dist_copy    a copy whose source lives on one rank and whose
 *                          destination lives on another (each rank keeps its
 *                          side: the source rank sends, the destination
 *                          rank receives, other ranks record a placeholder);
 *   rp_launch_dist_parallel the parallel operators across ranks, built from
 *                          those copies (replicate = broadcast, repartition
 *                          = scatter, combine = gather, reduction = reduce).
 * Every rank must make the same sequence of these calls (the same kinds,
 * ranks and shapes), also ranks a copy does not involve; local ops may
 * differ between ranks. Communication ops of one runtime run one after
 * another in launch order on every rank (they all access one hidden token
 * instance), which keeps MPI's matching order the same everywhere and makes
 * a deadlock between two ranks impossible.
 *
 * Eager mode runs each op at once on a CPU worker (non-blocking MPI calls,
 * polled). Instantiate keeps this rank's part of each communication op and
 * plans it: persistent MPI requests (MPI_Send_init / MPI_Recv_init, one per
 * replay slot, with tags derived from the graph and the slot so replays in
 * flight never match each other's messages; MPI 4 MPI_Allreduce_init) on a
 * communicator of the exec's own, duplicated at instantiate (instantiate of
 * a graph with communication is therefore collective: every rank must do
 * it, with the same rp_exec_opts.max_inflight: instantiate compares it and
 * fails with RP_EINVAL on every rank when it differs). A replay starts the
 * requests and the worker running the op polls them; nothing is negotiated
 * per replay.
 *
 * GPU instances: rp_launch_allreduce on a GPU instance runs an NCCL
 * all-reduce on the instance's GPU stream (builds with NCCL; one NCCL
 * communicator per device and runtime for eager launches, one per exec and
 * GPU in replays, created at instantiate). Cross-rank copies need host memory.
 *
 * Failures: a peer that does not answer within rp_runtime_config.
 * dist_timeout_ms makes the waiting op fail with RP_EPEER and a detail that
 * names the rank(s) that did not answer (a roll call of at most min(timeout
 * / 4, 1 s) asks the peers where they wait; rp_exec_error_detail for
 * replays, rp_runtime_dist_detail for eager ops); the replay completes, it
 * never hangs. A rank that timed out tells the others, so a rank waiting on
 * it fails at once with the first cause. After that the exec's (or, eager,
 * the runtime's) communication is broken: later ops on it fail at once with
 * RP_EPEER; destroy it and instantiate again on every rank. A host
 * all-reduce that timed out (a collective: MPI cannot cancel it) may still
 * complete when the late ranks arrive; it works on a buffer of its own,
 * kept allocated, so it never writes the instance after its failure was
 * reported. A communication op a replay skips on one rank (an op before
 * it failed there, or a stale instance: RP_ESTALE) breaks the exec's
 * communication there as a timeout does, and that rank tells the others:
 * a peer waiting on it fails at once with RP_EPEER naming the skipped op
 * (a send whose message MPI buffered may have completed there), and the
 * rank's later replays fail with RP_EPEER instead of taking a message
 * meant for the skipped op. An eager op that fails or is skipped on one
 * rank (an op it depends on failed) tells the others likewise: a peer's
 * eager op that waits on that rank (a copy with it, an all-reduce) fails
 * at once with RP_EPEER, its detail naming the rank and quoting its cause
 * ("rank 0 gave up first: rank 0: recv from rank 1 (eager op 0) failed
 * with RP_ESHAPE: ..."), instead of waiting dist_timeout_ms; a copy
 * between two other ranks is not affected. An eager op skipped or
 * refused on one rank keeps its place in that rank's order, so later ops
 * never pair with its messages; one refused at its launch call (a stale
 * instance there) tells nobody: a peer waiting on it (a receive from it)
 * fails with RP_EPEER after dist_timeout_ms.
 *
 * MPI must be initialized with MPI_THREAD_MULTIPLE (workers call MPI) before
 * rp_runtime_create and finalized after rp_runtime_destroy. In the wrong
 * order a communication op that would call MPI after MPI_Finalize (a
 * replay's or an eager one's, on a communicator of two ranks or more)
 * fails with RP_EINVAL ("MPI is finalized") instead, and so does
 * rp_instantiate of a graph with communication there (with one rank
 * nothing calls MPI, and they work); rp_exec_destroy and
 * rp_runtime_destroy still work. Builds without
 * MPI return RP_EUNSUPPORTED for a non-NULL comm; with comm NULL every call
 * below works for the one rank (an all-reduce leaves the data as it is).
 *
 * The ops are tasks named "rp.dist.*" (dumps and graph files show them);
 * a runtime with a communicator registers them at create, one without at
 * its first call below (so load a graph file with communication there after
 * one). A graph with communication belongs to the rank that recorded it
 * (each rank keeps its side): a graph file of another rank is refused
 * (RP_EINVAL) at instantiate. Instantiate such graphs from one thread, in
 * the same order on every rank. */

/* This rank and the number of ranks (0 and 1 without a communicator). */
RP_API uint32_t rp_runtime_rank(const rp_runtime *rt);
RP_API uint32_t rp_runtime_ranks(const rp_runtime *rt);

typedef struct rp_allreduce {
  rp_inst inst;   /* this rank's instance: dense, f32/f64/i32/i64, the same
                     shape and type on every rank (host instances are
                     compared first: other counts or types are RP_ESHAPE
                     on every rank); summed in place */
  rp_redop redop; /* RP_REDOP_SUM */
  rp_event wait;
} rp_allreduce;

typedef struct rp_dist_copy {
  uint32_t src_rank; /* the rank holding src */
  uint32_t dst_rank; /* the rank holding dst (may equal src_rank: a local
                        copy) */
  rp_inst src;       /* read on src_rank; ignored on other ranks */
  rp_inst dst;       /* written on dst_rank; ignored on other ranks */
  rp_rect rect;      /* points moved, global coordinates (must fit the
                        local instance on each side); dim 0: each side's
                        whole instance, their volumes equal (the receiver
                        fails otherwise: RP_ESHAPE, or RP_EBACKEND for a
                        longer message into a replayed receive); with
                        src_rank ==
                        dst_rank, the source's whole rect, which the
                        destination must hold */
  rp_redop redop;    /* RP_REDOP_SUM: dst += src (f32/f64/i32/i64) */
  rp_event wait;
} rp_dist_copy;

/* A parallel operator across ranks: part r is `part` on rank r; the whole
 * lives on rank `root`. Split operators use rp_chunk_rect(whole, dim,
 * ranks, r) for part r's points, as the local ones do.
 *   REPLICATE   fwd: whole -> every part (broadcast)
 *               bwd: whole = sum of the parts (reduce)
 *   REPARTITION fwd: whole scattered into the parts; bwd: gathered
 *   COMBINE     fwd: parts gathered into the whole; bwd: scattered
 *   REDUCTION   fwd: whole = sum of the parts; bwd: whole -> every part
 * A sum takes rank 0's part and adds the others' in rank order, as the
 * local operators sum in part order, whatever the root.
 * Checks at the call: every rank checks kind, backward, root, its part
 * (live, summable for a sum) and, for a split, that dim is one of the
 * part's dimensions; the root alone checks the whole against its own part
 * (type; its chunk, or the whole's shape) and that no chunk is empty. A
 * part on another rank is checked only by its size, where a copy receives
 * it: RP_ESHAPE on that rank in a broadcast or scatter, on the root in a
 * gather or reduce (a replayed receive of a longer message: RP_EBACKEND),
 * the sender succeeding; a part of the right byte count but another shape
 * or type is taken as it is. A rank that refuses the call takes no part:
 * a peer's copy with it fails with RP_EPEER after dist_timeout_ms (a send
 * small enough for MPI to buffer may complete). */
typedef struct rp_dist_parallel {
  rp_pop_kind kind;
  int backward;  /* 0 forward, 1 backward */
  uint32_t root; /* the rank holding `whole` */
  rp_inst whole; /* on root; ignored on other ranks */
  rp_inst part;  /* this rank's part */
  int dim;       /* partitioned dimension (repartition, combine) */
  rp_event wait;
} rp_dist_parallel;

/* Launch calls (eager or recorded, as rp_launch_task). *done (may be NULL)
 * is the completion event / the recorded op's reference (for a parallel
 * operator: its last op, which follows all its others on this rank).
 * Errors (nothing launched): RP_EINVAL NULL or unknown redop / kind, a
 * copy within a rank from an instance into itself or between overlapping
 * bytes (external instances over one buffer); RP_ERANGE a rank >=
 * rp_runtime_ranks(); RP_ESTALE a stale local instance; RP_ETYPE a type that
 * cannot be summed; RP_ESHAPE a rect that does not fit the local instance, a
 * non-dense all-reduce instance, the root's part that is not its chunk of
 * the whole (or not its shape); RP_EINVAL a split dim outside the part's
 * dimensions (parallel operators: which rank checks what, above);
 * RP_EACCESS a cross-rank copy of GPU memory; RP_EUNSUPPORTED a GPU all-reduce
 * in a build without NCCL. */
RP_API rp_status rp_launch_allreduce(rp_runtime *rt, const rp_allreduce *a,
                                     rp_event *done);
RP_API rp_status rp_launch_dist_copy(rp_runtime *rt, const rp_dist_copy *c,
                                     rp_event *done);
RP_API rp_status rp_launch_dist_parallel(rp_runtime *rt,
                                         const rp_dist_parallel *p,
                                         rp_event *done);
/* Builder forms (wait must be RP_NO_EVENT). Each new communication op gets
 * an edge from the graph's previous one, so they keep launch order. */
RP_API rp_status rp_graph_add_allreduce(rp_graph *g, const rp_allreduce *a,
                                        rp_op_id *out);
RP_API rp_status rp_graph_add_dist_copy(rp_graph *g, const rp_dist_copy *c,
                                        rp_op_id *out);
/* The detail of the last failed eager communication op of rt ("" if
 * none): which op, which peer. Once one failed, every later eager
 * communication op of rt fails with its status without running, and its
 * detail says so, quoting the first failure ("... did not run: the
 * runtime's eager communication failed earlier (...)"), and the other
 * ranks are told (see Failures above). Valid until the next one fails. */
RP_API const char *rp_runtime_dist_detail(const rp_runtime *rt);

/* ------------------------------------------------------------------------ */
/* Test and benchmark support */

/* Bytes allocated so far by the calling thread (jemalloc's per-thread
 * counter); UINT64_MAX when the build has no jemalloc, or when jemalloc
 * is not the process's allocator (a program linked with the shared
 * library alone gets libc's malloc: link jemalloc into the program, or
 * preload it, to count). */
RP_API uint64_t rp_thread_allocated_bytes(void);
/* Sum of allocated-bytes counters of the runtime's worker threads (sampled
 * by each worker; docs/architecture.md "Replay"), UINT64_MAX where
 * rp_thread_allocated_bytes returns it. */
RP_API uint64_t rp_runtime_worker_allocated_bytes(rp_runtime *rt);

#ifdef __cplusplus
}
#endif

#endif /* REPRISE_H */
