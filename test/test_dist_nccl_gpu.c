/* test/test_dist_nccl_gpu.c — the all-reduce on GPU instances (NCCL) with
 * one rank and one GPU: an eager launch through the runtime, and an NCCL
 * all-reduce captured into a CUDA graph and launched repeatedly, as a
 * replay's GPU segment runs it. Label "gpu": every case skips with the
 * reason without a device or without NCCL. Several GPUs (one rank each)
 * stay untested until a machine with several GPUs is available. */
#include "helpers.h"

#include "dist/dist.h"

#include <stdlib.h>

static void need_nccl(void) {
  if (!rp__nccl_built())
    cr_skip_test("this build has no NCCL");
}

static rp_proc first_gpu(const rp_runtime *rt) {
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_GPU)
      return p;
  }
  cr_assert_fail("the CUDA runtime has no GPU processor");
  return 0;
}

Test(dist_nccl_gpu, eager_allreduce_on_a_gpu_instance) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  need_nccl();
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, first_gpu(rt), &pi));
  rp_rect r = rp_rect_1d(0, 4095);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &r, NULL, &x));
  float *v = malloc(4096 * sizeof *v);
  for (int i = 0; i < 4096; i++)
    v[i] = (float)i * 0.5f;
  RP_CHECK(rp_instance_write(rt, x, v, 4096 * sizeof *v));
  for (int k = 0; k < 3; k++) { /* the runtime's communicator, reused */
    rp_event e;
    RP_CHECK(
        rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, &e));
    RP_CHECK(rp_event_wait(rt, e, -1));
    RP_CHECK(rp_event_release(rt, e));
  }
  RP_CHECK(rp_instance_read(rt, x, v, 4096 * sizeof *v));
  for (int i = 0; i < 4096; i++) /* one rank: the sum is the data */
    cr_assert_eq(v[i], (float)i * 0.5f, "element %d", i);
  free(v);
  th_destroy(rt);
}

Test(dist_nccl_gpu, allreduce_captured_into_a_cuda_graph) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  need_nccl();
  th_destroy(rt);
  RP_CHECK(rp__nccl_graph_selftest(0, 1 << 20, 5));
}
