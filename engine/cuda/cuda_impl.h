/* engine/cuda/cuda_impl.h — CUDA error checking shared by the CUDA backend's
 * C files and the library's .cu files (C and C++ safe: it needs only the
 * public header and <cuda_runtime.h>). Only engine/cuda/ and *.cu files
 * include it: everything else reaches CUDA through cuda_backend.h, which has
 * no CUDA types. */
#ifndef RP_CUDA_IMPL_H
#define RP_CUDA_IMPL_H

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
 * ...) or cudaPeekAtLastError still reports an error after the clear — also
 * makes rt unusable (rt may be NULL: during init there is no runtime to mark
 * yet; a runtime without a CUDA backend is never marked). Never aborts,
 * never prints. */
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
