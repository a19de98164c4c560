/* xfer/xfer_cuda.cu — the CUDA channels: pitched copies enqueued with
 * cudaMemcpy3DAsync (cudaMemcpy3DPeerAsync across devices) and the sum
 * fold kernel with atomicAdd. Compiled only when the toolkit is on; the C
 * side sees only the launchers declared in xfer_impl.h. None of them
 * synchronizes: everything is stream-ordered on the caller's stream, so a
 * copy can be captured into a CUDA graph node like any other. */
#include "reprise.h" /* plain C with extern "C": safe in C++ */
#include "engine/cuda_check.h"
#include "xfer/xfer_impl.h"

#include <cuda_runtime.h>

/* Every CUDA call goes through the project's one wrapper (the statement,
 * file:line and error name in the detail; a sticky error marks the
 * process's device lost). */
#define TRY(call) RP_CUDA_TRY(rt, call)

extern "C" rp_status rp_xfer_cuda_device_of(rp_runtime *rt, const void *p,
                                            int *dev) {
  cudaPointerAttributes a;
  /* Since CUDA 11 a plain host pointer answers cudaMemoryTypeUnregistered
   * instead of failing. */
  TRY(cudaPointerGetAttributes(&a, p));
  *dev = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
             ? a.device
             : -1;
  return RP_OK;
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
static rp_status copy3d(rp_runtime *rt, const rp_xfer_nest *n, const char *src,
                        char *dst, size_t width, int64_t h, int64_t sp,
                        int64_t dp, int64_t d, int64_t sz, int64_t dz,
                        cudaStream_t s) {
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
    return RP_CUDA(rt, cudaMemcpy3DPeerAsync(&pp, s));
  }
  cudaMemcpy3DParms p = {};
  p.srcPtr = sptr;
  p.dstPtr = dptr;
  p.extent = ext;
  p.kind = cudaMemcpyDefault; /* UVA: direction from the pointers */
  return RP_CUDA(rt, cudaMemcpy3DAsync(&p, s));
}

/* A slice axis can be the copy's depth when its strides are whole numbers
 * of rows on both sides. */
static int depth_ok(const pitched *p, int y, int z) {
  return p->ss[z] % p->ss[y] == 0 && p->ds[z] % p->ds[y] == 0 &&
         p->ss[z] / p->ss[y] >= p->ext[y] && p->ds[z] / p->ds[y] >= p->ext[y];
}

extern "C" rp_status rp_xfer_cuda_copy(rp_runtime *rt, const rp_xfer_nest *n,
                                       void *stream) {
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
    rp_status st = copy3d(rt, n, src, dst, p.width, h, sp, dp, d, sz, dz, s);
    if (st)
      return st;
    int i = z;
    for (; i >= 0; i--) {
      if (++idx[i] < p.ext[i])
        break;
      idx[i] = 0;
    }
    if (i < 0)
      return RP_OK;
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
static rp_status launch_reduce(rp_runtime *rt, const rp_xfer_nest *n,
                               int64_t total, cudaStream_t s) {
  int64_t blocks = (total + REDUCE_THREADS - 1) / REDUCE_THREADS;
  if (blocks > REDUCE_MAX_BLOCKS)
    blocks = REDUCE_MAX_BLOCKS;
  reduce_sum_kernel<T><<<(unsigned)blocks, REDUCE_THREADS, 0, s>>>(*n, total);
  return rp__cuda_check(rt, cudaGetLastError(), "reduce_sum_kernel launch",
                        __FILE__, __LINE__);
}

static rp_status dispatch_reduce(rp_runtime *rt, const rp_xfer_nest *n,
                                 cudaStream_t s) {
  int64_t total = n->ext[0] * n->ext[1] * n->ext[2] * n->ext[3];
  switch (n->dtype) {
  case RP_F32:
    return launch_reduce<float>(rt, n, total, s);
  case RP_F64:
    return launch_reduce<double>(rt, n, total, s);
  case RP_I32:
    return launch_reduce<int32_t>(rt, n, total, s);
  case RP_I64:
    return launch_reduce<int64_t>(rt, n, total, s);
  }
  return rp__cuda_check(rt, cudaErrorInvalidValue, "reduce_sum_kernel dtype",
                        __FILE__, __LINE__);
}

extern "C" rp_status
rp_xfer_cuda_reduce_sum(rp_runtime *rt, const rp_xfer_nest *n, void *stream) {
  /* A kernel runs on the current device, which must own the stream: switch
   * to the destination's device for the launch and back. */
  int old = 0;
  TRY(cudaGetDevice(&old));
  if (old != n->dst_dev)
    TRY(cudaSetDevice(n->dst_dev));
  rp_status st = dispatch_reduce(rt, n, (cudaStream_t)stream);
  if (old != n->dst_dev) {
    rp_status rs = RP_CUDA(rt, cudaSetDevice(old));
    if (!st)
      st = rs;
  }
  return st;
}
