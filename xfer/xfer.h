/* xfer/xfer.h — transfer descriptors, channels and parallel operators: how
 * the capture layer (eager copies) and the replay layer (planned copies)
 * move bytes between instances. C, no CUDA types. Private to libreprise.
 *
 * Owns: planning a copy into a descriptor (validation, copy domain, loop
 * nest, channel), the generation check that keeps a planned descriptor from
 * moving bytes to freed memory, the CPU channels (one memcpy span, strided
 * rows, sum folds), the CUDA channels (xfer_cuda.cu), the expansion of
 * parallel operators into copies, and rp_chunk_rect (reprise.h). It knows
 * nothing of accesses, events, dependence analysis or graphs: ordering is the
 * caller's (see "Ordering" below).
 *
 * Life of a descriptor (from the Realm subgraph review): planned once
 * (rp_xfer_plan, may allocate), then per use: rp_xfer_reset (O(1)), then
 * rp_xfer_run_cpu or rp_xfer_run_stream, which first re-checks that both
 * instances still have the generation they were planned with and fails with
 * RP_ESTALE, moving nothing, when either was freed or reallocated. A
 * descriptor never re-plans itself: a stale one stays stale until the caller
 * plans a new one. Finally rp_xfer_release.
 *
 * Coordinates: instance rectangles and copy domains are global. A shard
 * with rect lo=[4,0] hi=[7,9] holds global rows 4..7; point p of the domain
 * lives at inst.ptr + ((p - inst.rect.lo) . inst.strides) * esz.
 *
 * Threads: a descriptor is used by one thread at a time (plan, reset, run,
 * release are not synchronized with each other). Different descriptors may
 * run concurrently, also into one destination with RP_REDOP_SUM (see the
 * reduction note below). The generation check excludes frees that completed
 * before the run started; a free that races with a running transfer is the
 * caller's bug (the capture layer's instance release hook waits for eager
 * ops; an exec holds its instances).
 *
 * Reductions (RP_REDOP_SUM, dst += src for f32/f64/i32/i64; integer sums
 * wrap modulo 2^bits): the CPU fold takes, for every 16 KiB-aligned block of
 * destination addresses it touches, one of a fixed set of process-wide
 * striped mutexes keyed by the block's address, and holds it only while
 * folding the elements that start in that block. Every element therefore
 * belongs to exactly one lock, whichever copy, layout or domain reaches it,
 * so concurrent SUM copies into one destination never lose an update; one
 * lock is held at a time, so there is no lock order to get wrong. The CUDA
 * fold uses atomicAdd per element. A CPU fold and a CUDA fold into the same
 * bytes at the same time are not supported.
 *
 * Ordering: a descriptor orders nothing. Where a plain copy and SUM copies
 * write one destination (replicate bwd, reduction fwd: part 0 -> whole plain,
 * parts 1.. -> whole SUM), the SUM copies must run after the plain one; the
 * layer above gets that from declared accesses (the plain copy declares dst
 * WRITE, the SUM copies dst REDUCE, and REDUCE after WRITE is a dependence
 * while REDUCE with REDUCE commutes).
 */
#ifndef RP_XFER_H
#define RP_XFER_H

#include "engine/engine.h"
#include "xfer/xfer_impl.h"

/* How a planned descriptor moves its bytes. */
typedef enum rp_xfer_channel {
  RP_XFER_NONE = 0,    /* never planned, failed to plan, or released */
  RP_XFER_CPU_SPAN,    /* one memcpy: the domain is contiguous on both sides */
  RP_XFER_CPU_STRIDED, /* memcpy per contiguous row, else per element */
  RP_XFER_CPU_REDUCE,  /* dst += src folds under striped block locks */
  RP_XFER_CUDA_COPY,   /* cudaMemcpy3D(Peer)Async on a stream */
  RP_XFER_CUDA_REDUCE, /* atomicAdd kernel (src staged into ib if needed) */
} rp_xfer_channel;

/* A planned copy. Embeddable: the caller owns the storage; the fields are
 * the descriptor's own (read them for inspection, never write them). */
typedef struct rp_xfer_desc {
  /* Planned by rp_xfer_plan; constant until rp_xfer_release. */
  rp_runtime *rt;
  rp_inst src, dst;
  rp_redop redop;
  rp_xfer_channel channel;
  rp_rect domain; /* the points moved, global coordinates */
  uint64_t bytes; /* payload: volume(domain) * element size */
  rp_xfer_nest nest;
  rp_mem src_mem, dst_mem;
  uint32_t src_gen, dst_gen; /* generations at planning */
  const _Atomic uint32_t *src_gen_word, *dst_gen_word; /* live generations */
  /* CUDA reductions whose source the kernel cannot read (another device,
   * pageable host memory): src is first copied, densely, into ib (ib_bytes
   * in dst_mem, owned by the descriptor) through `stage`, then folded from
   * there. NULL otherwise. */
  void *ib;
  size_t ib_bytes;
  rp_xfer_nest stage;
  /* Per use: cleared by rp_xfer_reset. */
  int ran;           /* 1 once run since the last reset (or plan) */
  uint64_t progress; /* bytes moved (CPU) or enqueued (stream) in this use */
  size_t ib_offset;  /* next free byte of ib in this use */
} rp_xfer_desc;

/* Validates and plans c into *d (c->wait is ignored: ordering is the
 * caller's). Errors, with a detail naming the side, instance and
 * rectangles; *d is left released (channel RP_XFER_NONE) and nothing is
 * allocated:
 *   RP_EINVAL  NULL argument, a handle 0 (none), unknown redop or domain
 *              mode, src and dst the same instance, src and dst bytes of
 *              the domain that overlap (an external instance over another's
 *              memory), a SUM side not aligned to its element;
 *   RP_ESTALE  src or dst freed, reallocated or unknown;
 *   RP_ETYPE   dtypes differ, or SUM on a type other than f32/f64/i32/i64;
 *   RP_ESHAPE  dims differ, or the domain (INTERSECT: the intersection of
 *              the two rects; SRC / DST: that side's rect; RECT: c->rect) is
 *              empty or does not fit inside both instances;
 *   RP_EUNSUPPORTED  a SUM from GPU memory into host memory (stage it);
 *   RP_ENOMEM, RP_EBACKEND  allocating or querying device memory.
 * Channel: CPU when both memories are host-addressable (system, pinned),
 * else CUDA. Records both generations. May allocate (the CUDA staging
 * buffer); on success release with rp_xfer_release. *d is overwritten
 * without being released: release a planned descriptor before re-planning
 * into it. */
rp_status rp_xfer_plan(rp_runtime *rt, const rp_copy *c, rp_xfer_desc *d);

/* RP_OK when both instances still have their planned generations, else
 * RP_ESTALE with a detail naming the stale side(s) (also for a released
 * descriptor). Two loads of the generation words, each waiting out a free
 * or realloc that is deciding whether the instance is busy (engine.h,
 * rp__inst_gen_settled): no allocation, no lock. */
rp_status rp_xfer_check(const rp_xfer_desc *d);

/* Clears the per-use state (ran, progress, ib_offset) for the next use. Does
 * not re-plan and does not check generations. O(1), no allocation; NULL is
 * a no-op. */
void rp_xfer_reset(rp_xfer_desc *d);

/* Checks (rp_xfer_check), then moves the bytes synchronously on the calling
 * thread with the planned CPU channel. Moves no byte when it fails:
 * RP_ESTALE; RP_EINVAL when d is released, has a CUDA channel, or already
 * ran since its last reset (a second run would fold a SUM twice). No
 * allocation. */
rp_status rp_xfer_run_cpu(rp_xfer_desc *d);
/* 1 when m is one of the striped block locks a CPU SUM fold takes (one per
 * 16 KiB block of destination addresses a row touches): the only locks a
 * replay takes in the common case (test/test_nolock.c tells them apart). */
int rp__xfer_is_fold_lock(const void *m);

/* Checks, then enqueues the copy on stream (a cudaStream_t of the device
 * that should run it) and returns without waiting: the generation check
 * covers frees before the enqueue; keeping the instances alive until the
 * stream has run the copy is the caller's (as for any stream work).
 * RP_EINVAL for a CPU channel, a released descriptor or a second run before
 * reset; RP_ESTALE; RP_EBACKEND when a CUDA call fails. (A build without CUDA
 * plans no device channel: rp_xfer_plan already refused the copy with
 * RP_EUNSUPPORTED.) No allocation. */
rp_status rp_xfer_run_stream(rp_xfer_desc *d, void *stream);

/* Frees what plan allocated and leaves *d released. NULL, a released or a
 * never-planned zeroed descriptor is a no-op; releasing twice is safe. */
void rp_xfer_release(rp_xfer_desc *d);

/* The GPU processor whose stream runs a device copy: the destination's,
 * else the source's; RP_PROC_ANY for a CPU channel. */
rp_proc rp_xfer_device_proc(const rp_xfer_desc *d);
/* 1 when d has a CUDA channel (run it with rp_xfer_run_stream). */
int rp_xfer_is_device(const rp_xfer_desc *d);

/* Expands a parallel operator into copies, in the order they must be
 * issued, into out[0..*count) (wait fields RP_NO_EVENT: the operator's wait
 * is the caller's). Every operator yields nparts copies:
 *   REPLICATE   fwd: whole -> part i (domain DST)
 *               bwd: part 0 -> whole, then part i -> whole SUM for i >= 1
 *   REPARTITION fwd: whole -> part i, domain DST (scatter)
 *               bwd: part i -> whole, domain SRC (gather)
 *   COMBINE     fwd: gather (as repartition bwd); bwd: scatter
 *   REDUCTION   fwd: as replicate bwd (sum of parts); bwd: as replicate fwd
 * The first copy of a bwd replicate / fwd reduction is plain and the rest
 * SUM: they must run in that order (see "Ordering"). Validation, with a
 * detail naming the part: RP_EINVAL NULL, unknown kind, no parts, dim out of
 * range, a handle 0 (none; the whole, then the parts in order, before the
 * next two), a part that is the whole or repeats another part; RP_ESTALE a
 * stale instance; RP_ETYPE a part's dtype differs from the whole's; RP_ESHAPE a
 * part's rect is not rp_chunk_rect(whole, dim, nparts, i) (repartition,
 * combine) or not the whole's rect (replicate, reduction). Sizes: with out
 * NULL, *count gets the number of copies and RP_OK; with cap too small,
 * RP_ERANGE, *count gets the number needed and out is untouched. */
rp_status rp_xfer_expand_parallel(rp_runtime *rt, const rp_parallel_op *op,
                                  rp_copy *out, uint32_t cap, uint32_t *count);

/* Formats r as "[lo0..hi0, lo1..hi1]" into buf (always terminated). */
const char *rp_xfer_rect_str(const rp_rect *r, char *buf, size_t size);
/* Room for any rect's text: 4 dimensions of two 20-character coordinates
 * ("-9223372036854775808"), "..", ", ", brackets and the NUL are 177. */
#define RP_XFER_RECT_STR RP_RECT_STR_MAX

#endif
