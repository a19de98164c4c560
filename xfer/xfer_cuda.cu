/* xfer/xfer_cuda.cu — the CUDA channels: pitched copies enqueued with
 * cudaMemcpy3DAsync (cudaMemcpy3DPeerAsync across devices) and the sum
 * fold kernel with atomicAdd. Compiled only when the toolkit is on; the C
 * side sees only the launchers declared in xfer_impl.h. None of them
 * synchronizes: everything is stream-ordered on the caller's stream, so a
 * copy can be captured into a CUDA graph node like any other. */
#include "reprise.h" /* plain C with extern "C": safe in C++ */
#include "xfer/xfer_impl.h"

#include <cuda_runtime.h>

#define TRY(name, call)                                                        \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      *what = name;                                                            \
      return (int)e_;                                                          \
    }                                                                          \
  } while (0)

extern "C" const char *rp_xfer_cuda_error_name(int code) {
  return cudaGetErrorName((cudaError_t)code);
}

extern "C" int rp_xfer_cuda_device_of(const void *p, int *dev,
                                      const char **what) {
  cudaPointerAttributes a;
  /* Since CUDA 11 a plain host pointer answers cudaMemoryTypeUnregistered
   * instead of failing. */
  TRY("cudaPointerGetAttributes", cudaPointerGetAttributes(&a, p));
  *dev = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
             ? a.device
             : -1;
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Copies: the nest as a loop of 3-D pitched copies. */

/* The nest's axes with the innermost contiguous run folded into `width`
 * bytes: a contiguous row becomes the width, an element-strided row an axis
 * of its own with width esz. ax[0..nax) outermost first. */
typedef struct pitched {
  size_t width;
  int nax;
  int64_t ext[RP_XFER_NEST_DIMS], ss[RP_XFER_NEST_DIMS], ds[RP_XFER_NEST_DIMS];
} pitched;

static pitched to_pitched(const rp_xfer_nest *n) {
  pitched p;
  int contiguous =
      n->sstride[3] == (int64_t)n->esz && n->dstride[3] == (int64_t)n->esz;
  int last = contiguous ? 3 : 4;
  p.width = contiguous ? (size_t)(n->ext[3] * n->esz) : n->esz;
  p.nax = 0;
  for (int i = 0; i < last; i++) {
    if (n->ext[i] == 1)
      continue;
    p.ext[p.nax] = n->ext[i];
    p.ss[p.nax] = n->sstride[i];
    p.ds[p.nax] = n->dstride[i];
    p.nax++;
  }
  return p;
}

/* One 3-D copy: width bytes x h rows (pitches sp, dp) x d slices (slice
 * pitches sz, dz, which must be whole numbers of rows). */
static int copy3d(const rp_xfer_nest *n, const char *src, char *dst,
                  size_t width, int64_t h, int64_t sp, int64_t dp, int64_t d,
                  int64_t sz, int64_t dz, cudaStream_t s, const char **what) {
  size_t spitch = h > 1 ? (size_t)sp : width,
         dpitch = h > 1 ? (size_t)dp : width;
  size_t sys = d > 1 ? (size_t)sz / spitch : (size_t)h;
  size_t dys = d > 1 ? (size_t)dz / dpitch : (size_t)h;
  cudaExtent ext = make_cudaExtent(width, (size_t)h, (size_t)d);
  cudaPitchedPtr sptr = make_cudaPitchedPtr((void *)src, spitch, width, sys);
  cudaPitchedPtr dptr = make_cudaPitchedPtr(dst, dpitch, width, dys);
  if (n->src_dev >= 0 && n->dst_dev >= 0 && n->src_dev != n->dst_dev) {
    cudaMemcpy3DPeerParms pp = {};
    pp.srcPtr = sptr;
    pp.srcDevice = n->src_dev;
    pp.dstPtr = dptr;
    pp.dstDevice = n->dst_dev;
    pp.extent = ext;
    TRY("cudaMemcpy3DPeerAsync", cudaMemcpy3DPeerAsync(&pp, s));
    return 0;
  }
  cudaMemcpy3DParms p = {};
  p.srcPtr = sptr;
  p.dstPtr = dptr;
  p.extent = ext;
  p.kind = cudaMemcpyDefault; /* UVA: direction from the pointers */
  TRY("cudaMemcpy3DAsync", cudaMemcpy3DAsync(&p, s));
  return 0;
}

/* A slice axis can be the copy's depth when its strides are whole numbers
 * of rows on both sides. */
static int depth_ok(const pitched *p, int y, int z) {
  return p->ss[z] % p->ss[y] == 0 && p->ds[z] % p->ds[y] == 0 &&
         p->ss[z] / p->ss[y] >= p->ext[y] && p->ds[z] / p->ds[y] >= p->ext[y];
}

extern "C" int rp_xfer_cuda_copy(const rp_xfer_nest *n, void *stream,
                                 const char **what) {
  cudaStream_t s = (cudaStream_t)stream;
  pitched p = to_pitched(n);
  int y = p.nax - 1, z = p.nax - 2;
  int64_t h = y >= 0 ? p.ext[y] : 1, sp = y >= 0 ? p.ss[y] : 0,
          dp = y >= 0 ? p.ds[y] : 0;
  int64_t d = 1, sz = 0, dz = 0;
  if (z >= 0 && depth_ok(&p, y, z)) {
    d = p.ext[z];
    sz = p.ss[z];
    dz = p.ds[z];
    z--;
  }
  /* Loop over the axes left outside the 3-D copy: z, z-1, .., 0. */
  int64_t idx[RP_XFER_NEST_DIMS] = {0, 0, 0, 0};
  for (;;) {
    const char *src = n->src;
    char *dst = n->dst;
    for (int i = 0; i <= z; i++) {
      src += idx[i] * p.ss[i];
      dst += idx[i] * p.ds[i];
    }
    int rc = copy3d(n, src, dst, p.width, h, sp, dp, d, sz, dz, s, what);
    if (rc)
      return rc;
    int i = z;
    for (; i >= 0; i--) {
      if (++idx[i] < p.ext[i])
        break;
      idx[i] = 0;
    }
    if (i < 0)
      return 0;
  }
}

/* ---------------------------------------------------------------------- */
/* Sum fold: one thread per point, atomicAdd on the destination so folds
 * from several streams (or several copies in one graph) into one
 * destination commute. */

__device__ inline void atomic_add(float *p, float v) {
  atomicAdd(p, v);
}
__device__ inline void atomic_add(double *p, double v) {
  atomicAdd(p, v);
}
__device__ inline void atomic_add(int32_t *p, int32_t v) {
  atomicAdd((int *)p, (int)v);
}
__device__ inline void atomic_add(int64_t *p, int64_t v) {
  /* two's complement: the unsigned add is the signed add, wrapping */
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

template <typename T>
__global__ void reduce_sum_kernel(rp_xfer_nest n, int64_t total) {
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t r = i, so = 0, dof = 0;
    for (int k = RP_XFER_NEST_DIMS - 1; k >= 0; k--) {
      int64_t c = r % n.ext[k];
      r /= n.ext[k];
      so += c * n.sstride[k];
      dof += c * n.dstride[k];
    }
    atomic_add((T *)(n.dst + dof), *(const T *)(n.src + so));
  }
}

/* Tunables: 256 threads per block (a multiple of the warp, full occupancy
 * on sm_90 for this register-light kernel); at most 8192 blocks, enough to
 * fill 132 SMs many times over, the grid-stride loop covering the rest. */
#define REDUCE_THREADS 256
#define REDUCE_MAX_BLOCKS 8192

template <typename T>
static int launch_reduce(const rp_xfer_nest *n, int64_t total, cudaStream_t s,
                         const char **what) {
  int64_t blocks = (total + REDUCE_THREADS - 1) / REDUCE_THREADS;
  if (blocks > REDUCE_MAX_BLOCKS)
    blocks = REDUCE_MAX_BLOCKS;
  reduce_sum_kernel<T><<<(unsigned)blocks, REDUCE_THREADS, 0, s>>>(*n, total);
  TRY("reduce_sum_kernel launch", cudaGetLastError());
  return 0;
}

static int dispatch_reduce(const rp_xfer_nest *n, cudaStream_t s,
                           const char **what) {
  int64_t total = n->ext[0] * n->ext[1] * n->ext[2] * n->ext[3];
  switch (n->dtype) {
  case RP_F32:
    return launch_reduce<float>(n, total, s, what);
  case RP_F64:
    return launch_reduce<double>(n, total, s, what);
  case RP_I32:
    return launch_reduce<int32_t>(n, total, s, what);
  case RP_I64:
    return launch_reduce<int64_t>(n, total, s, what);
  }
  *what = "reduce_sum_kernel dtype";
  return (int)cudaErrorInvalidValue;
}

extern "C" int rp_xfer_cuda_reduce_sum(const rp_xfer_nest *n, void *stream,
                                       const char **what) {
  /* A kernel runs on the current device, which must own the stream: switch
   * to the destination's device for the launch and back. */
  int old = 0;
  TRY("cudaGetDevice", cudaGetDevice(&old));
  if (old != n->dst_dev)
    TRY("cudaSetDevice", cudaSetDevice(n->dst_dev));
  int rc = dispatch_reduce(n, (cudaStream_t)stream, what);
  if (old != n->dst_dev) {
    cudaError_t e = cudaSetDevice(old);
    if (!rc && e != cudaSuccess) {
      *what = "cudaSetDevice (restore)";
      rc = (int)e;
    }
  }
  return rc;
}
