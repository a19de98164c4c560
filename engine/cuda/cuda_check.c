/* engine/cuda/cuda_check.c — CUDA error checking (see cuda_impl.h). */
#include "../engine_impl.h"
#include "../cuda_check.h"

int rp__cuda_error_sticky(cudaError_t e) {
  /* The codes cuda's driver_types.h documents as "leaves the process in an
   * inconsistent state" or "the device cannot be used again". The dynamic
   * check in rp__cuda_check covers codes a newer toolkit adds. */
  switch (e) {
  case cudaErrorECCUncorrectable:
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
  case cudaErrorExternalDevice:
#if CUDART_VERSION >= 13000
  case cudaErrorContained:
  case cudaErrorTensorMemoryLeak:
#endif
    return 1;
  default:
    return 0;
  }
}

rp_status rp__cuda_check(rp_runtime *rt, cudaError_t e, const char *stmt,
                         const char *file, int line) {
  if (RP_LIKELY(e == cudaSuccess))
    return RP_OK;
  /* Clear this thread's last error so that a later, unrelated check does not
   * see it again. A sticky error survives the clear: peek still reports it. */
  (void)cudaGetLastError();
  int sticky = rp__cuda_error_sticky(e) || cudaPeekAtLastError() != cudaSuccess;
  rp_status st = e == cudaErrorMemoryAllocation ? RP_ENOMEM : RP_EBACKEND;
  rp__err(st, "%s failed at %s:%d: %s: %s%s", stmt, file, line,
          cudaGetErrorName(e), cudaGetErrorString(e),
          sticky ? " (sticky: the CUDA context is lost for this process)" : "");
  /* The process's context is lost: every runtime whose CUDA backend is up
   * finds out at its next check, this one at once (a helper called on a
   * CPU runtime fails on its own, without marking it). */
  if (sticky) {
    rp__device_set_lost(rp_error_detail());
    if (rt && rp__cuda_state(rt))
      rp__runtime_set_unusable(rt, rp_error_detail());
  }
  return st;
}
