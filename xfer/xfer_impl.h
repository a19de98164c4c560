/* xfer/xfer_impl.h — private to xfer/: the normalized loop nest that every
 * channel walks, and the C launchers of the CUDA channels (xfer_cuda.cu).
 * Plain C with only <stdint.h>: no engine types (engine/util.h pulls in
 * <stdatomic.h>, which C++ cannot include) and no CUDA types, so both the C
 * files and the .cu file include it. */
#ifndef RP_XFER_IMPL_H
#define RP_XFER_IMPL_H

#include "reprise.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A copy as a loop nest of exactly RP_XFER_NEST_DIMS dimensions, outermost
 * first. Planning drops extent-1 dimensions, orders the rest by destination
 * stride (the fastest-moving destination dimension last, so writes are
 * sequential) and merges neighbours whose strides chain on both sides;
 * unused leading dimensions have extent 1 and stride 0. Strides are in
 * bytes. The last dimension is the row; a row is contiguous when both of its
 * strides equal esz. */
#define RP_XFER_NEST_DIMS 4
typedef struct rp_xfer_nest {
  int64_t ext[RP_XFER_NEST_DIMS];
  int64_t sstride[RP_XFER_NEST_DIMS];
  int64_t dstride[RP_XFER_NEST_DIMS];
  char *src;     /* first point of the domain in the source (host or device) */
  char *dst;     /* first point of the domain in the destination */
  uint32_t esz;  /* element size in bytes */
  int32_t dtype; /* rp_dtype */
  int src_dev;   /* physical CUDA device of each side; -1: host memory */
  int dst_dev;
} rp_xfer_nest;

/* CUDA launchers, defined in xfer_cuda.cu (in a build without the toolkit,
 * xfer/nocuda/ stands in: each fails with RP_EUNSUPPORTED). Each checks its
 * CUDA calls with the project's one wrapper (engine/cuda_check.h: the
 * statement, file:line and error name in the detail, RP_EBACKEND; a sticky
 * error marks the device lost). None of them synchronizes. */

/* Physical device holding p, or -1 when p is host memory (pinned or not). */
rp_status rp_xfer_cuda_device_of(rp_runtime *rt, const void *p, int *dev);
/* Enqueues the nest as cudaMemcpy3DAsync calls (cudaMemcpy3DPeerAsync when
 * the sides are on different devices) on stream (a cudaStream_t). */
rp_status rp_xfer_cuda_copy(rp_runtime *rt, const rp_xfer_nest *n,
                            void *stream);
/* Enqueues dst += src over the nest: one thread per point, atomicAdd on the
 * destination, so reductions from several streams into one destination
 * commute. dtype f32, f64, i32 or i64; src must be readable from dst_dev. */
rp_status rp_xfer_cuda_reduce_sum(rp_runtime *rt, const rp_xfer_nest *n,
                                  void *stream);

#ifdef __cplusplus
}
#endif

#endif
