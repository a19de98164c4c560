/* xfer/nocuda/xfer_absent.c — built instead of xfer/xfer_cuda.cu when the
 * CUDA toolkit is not found: no copy can touch device memory. */
#include "xfer/xfer.h"
#include "xfer/xfer_impl.h"

static rp_status absent(const char *what) {
  return rp__err(RP_EUNSUPPORTED,
                 "%s: the copy touches device memory, and this build of "
                 "reprise has no CUDA",
                 what);
}

rp_status rp_xfer_cuda_device_of(rp_runtime *rt, const void *p, int *dev) {
  RP_UNUSED(rt), RP_UNUSED(p), RP_UNUSED(dev);
  return absent("rp_xfer_cuda_device_of");
}

rp_status rp_xfer_cuda_copy(rp_runtime *rt, const rp_xfer_nest *n,
                            void *stream) {
  RP_UNUSED(rt), RP_UNUSED(n), RP_UNUSED(stream);
  return absent("rp_xfer_cuda_copy");
}

rp_status rp_xfer_cuda_reduce_sum(rp_runtime *rt, const rp_xfer_nest *n,
                                  void *stream) {
  RP_UNUSED(rt), RP_UNUSED(n), RP_UNUSED(stream);
  return absent("rp_xfer_cuda_reduce_sum");
}
