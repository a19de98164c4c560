/* xfer/stream.c — rp_xfer_run_stream: the CUDA channels' C side. The work
 * itself is enqueued by the launchers in xfer_cuda.cu; this file checks the
 * descriptor and turns CUDA errors into statuses. */
#include "xfer/xfer.h"

#ifdef REPRISE_HAVE_CUDA
static rp_status launch_err(const rp_xfer_desc *d, int rc, const char *what) {
  return rp__err(RP_EBACKEND,
                 "rp_xfer_run_stream: %s failed (%s) for copy %#llx -> %#llx",
                 what, rp_xfer_cuda_error_name(rc),
                 (unsigned long long)d->src.id, (unsigned long long)d->dst.id);
}

/* Enqueues the planned work. Stream order makes the staging copy (src ->
 * ib) finish before the fold reads ib; the next use's staging copy cannot
 * overwrite ib early either, because the layer above orders uses of one
 * descriptor (they write the same destination). */
static rp_status launch(rp_xfer_desc *d, void *stream) {
  const char *what = "";
  int rc = 0;
  if (d->channel == RP_XFER_CUDA_COPY) {
    rc = rp_xfer_cuda_copy(&d->nest, stream, &what);
  } else {
    if (d->ib) {
      rc = rp_xfer_cuda_copy(&d->stage, stream, &what);
      d->ib_offset = d->ib_bytes;
    }
    if (!rc)
      rc = rp_xfer_cuda_reduce_sum(&d->nest, stream, &what);
  }
  return rc ? launch_err(d, rc, what) : RP_OK;
}
#endif

rp_status rp_xfer_run_stream(rp_xfer_desc *d, void *stream) {
#ifndef REPRISE_HAVE_CUDA
  RP_UNUSED(stream);
  return rp__err(RP_EUNSUPPORTED,
                 "rp_xfer_run_stream: copy %#llx -> %#llx: "
                 "this build of reprise has no CUDA",
                 d ? (unsigned long long)d->src.id : 0ull,
                 d ? (unsigned long long)d->dst.id : 0ull);
#else
  if (!d || d->channel == RP_XFER_NONE)
    return rp__err(RP_EINVAL, "rp_xfer_run_stream: descriptor is not planned");
  if (!rp_xfer_is_device(d))
    return rp__err(RP_EINVAL,
                   "rp_xfer_run_stream: copy %#llx -> %#llx has a "
                   "CPU channel; use rp_xfer_run_cpu",
                   (unsigned long long)d->src.id,
                   (unsigned long long)d->dst.id);
  if (d->ran)
    return rp__err(RP_EINVAL,
                   "rp_xfer_run_stream: copy %#llx -> %#llx "
                   "already ran since its last reset",
                   (unsigned long long)d->src.id,
                   (unsigned long long)d->dst.id);
  rp_status st = rp_xfer_check(d);
  if (!st)
    st = launch(d, stream);
  if (st)
    return st;
  d->ran = 1;
  d->progress = d->bytes;
  return RP_OK;
#endif
}
