/* xfer/stream.c — rp_xfer_run_stream: the CUDA channels' C side. The work
 * itself is enqueued by the launchers in xfer_cuda.cu; this file checks the
 * descriptor and turns CUDA errors into statuses. */
#include "xfer/xfer.h"

/* Enqueues the planned work. Stream order makes the staging copy (src ->
 * ib) finish before the fold reads ib; the next use's staging copy cannot
 * overwrite ib early either, because the layer above orders uses of one
 * descriptor (they write the same destination). */
static rp_status launch(rp_xfer_desc *d, void *stream) {
  rp_status st = RP_OK;
  if (d->channel == RP_XFER_CUDA_COPY) {
    st = rp_xfer_cuda_copy(d->rt, &d->nest, stream);
  } else {
    if (d->ib) {
      st = rp_xfer_cuda_copy(d->rt, &d->stage, stream);
      d->ib_offset = d->ib_bytes;
    }
    if (!st)
      st = rp_xfer_cuda_reduce_sum(d->rt, &d->nest, stream);
  }
  return st ? rp__err_prefix(st, "rp_xfer_run_stream: copy %#llx -> %#llx: ",
                             (unsigned long long)d->src.id,
                             (unsigned long long)d->dst.id)
            : RP_OK;
}

rp_status rp_xfer_run_stream(rp_xfer_desc *d, void *stream) {
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
}
