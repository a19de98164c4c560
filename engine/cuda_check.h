/* engine/cuda_check.h — the one CUDA error wrapper of the project: the CUDA
 * backend (engine/cuda/), the kernels, the copy channels and the NCCL
 * communicator check every CUDA runtime call with RP_CUDA / RP_CUDA_TRY (C
 * and C++ safe: it needs only the public header and <cuda_runtime.h>). Only
 * files built with the toolkit include it; the layers above the engine
 * reach the device itself only through the backend interface's device
 * slots (device_ops.h). */
#ifndef RP_CUDA_CHECK_H
#define RP_CUDA_CHECK_H

#include "reprise.h"

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turns the result of one CUDA runtime call into a status. On failure it
 * records "<statement> failed at <file>:<line>: <cudaErrorName>: <text>" as
 * the thread's error detail, clears the thread's CUDA error, and returns
 * RP_EBACKEND (cudaErrorMemoryAllocation gives RP_ENOMEM). A sticky error —
 * the CUDA context is lost (illegal address, launch failure, device assert,
 * ...) or cudaPeekAtLastError still reports an error after the clear — is
 * lost for the whole process: it makes rt unusable at once, and every
 * runtime with a CUDA backend up at its next public call (rt may be NULL: a
 * kernel launcher or a copy channel that has no runtime at hand, init
 * before there is one to mark). Never aborts, never prints. */
rp_status rp__cuda_check(rp_runtime *rt, cudaError_t e, const char *stmt,
                         const char *file, int line);

/* 1 when e leaves the CUDA context unusable for the rest of the process. */
int rp__cuda_error_sticky(cudaError_t e);

/* Status of one CUDA call: RP_CUDA(rt, cudaMalloc(&p, n)). */
#define RP_CUDA(rt, call)                                                      \
  rp__cuda_check((rt), (call), #call, __FILE__, __LINE__)

/* Returns the failing status from the enclosing function. */
#define RP_CUDA_TRY(rt, call)                                                  \
  do {                                                                         \
    rp_status rp_cuda_st_ = RP_CUDA(rt, call);                                 \
    if (rp_cuda_st_ != RP_OK)                                                  \
      return rp_cuda_st_;                                                      \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
