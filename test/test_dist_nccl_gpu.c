/* test/test_dist_nccl_gpu.c — the all-reduce on GPU instances (NCCL) with
 * one rank and one GPU: an eager launch through the runtime, an NCCL
 * all-reduce captured into a CUDA graph and launched repeatedly (the
 * self-test, raw CUDA), and reprise's own path: a step recorded with
 * rp_launch_allreduce, instantiated (one communicator per exec and GPU,
 * captured into the GPU's CUDA graph) and replayed. A plain Criterion test
 * (one process, no mpiexec). Label "gpu": every case skips with the reason
 * without a device or without NCCL. Several GPUs (one rank each) stay
 * untested until a machine with several GPUs is available. */
#include "helpers.h"

#include "comm/comm.h"
#include "kernels/tasks.h"

#include <stdlib.h>
#include <string.h>

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

/* One scale op and two all-reduces on one GPU, recorded, instantiated and
 * replayed three times. With one rank an all-reduce leaves the data as it
 * is, so x doubles at every replay (the scale runs before its all-reduce,
 * in the same CUDA graph) and y stays: values show that each replay ran
 * the whole segment and that the all-reduce wrote nothing else. */
Test(dist_nccl_gpu, recorded_allreduce_replays_in_the_gpu_graph) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  need_nccl();
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_proc gpu = first_gpu(rt);
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, gpu, &pi));
  enum { N = 4096 };
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst x, y;
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &r, NULL, &x));
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &r, NULL, &y));
  float *v = malloc(N * sizeof *v), *w = malloc(N * sizeof *w);
  cr_assert(v && w);
  for (int i = 0; i < N; i++)
    v[i] = (float)i * 0.5f, w[i] = 1.0f + (float)i;
  RP_CHECK(rp_instance_write(rt, x, v, N * sizeof *v));
  RP_CHECK(rp_instance_write(rt, y, w, N * sizeof *w));

  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_scalar_args two = {2.0f, 0};
  rp_access ax = {x, RP_RW, RP_REDOP_NONE};
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = k.scale,
                                       .proc = gpu,
                                       .accesses = &ax,
                                       .naccess = 1,
                                       .args = &two,
                                       .args_size = sizeof two},
                          NULL));
  RP_CHECK(
      rp_launch_allreduce(rt, &(rp_allreduce){x, RP_REDOP_SUM, {0}}, NULL));
  RP_CHECK(
      rp_launch_allreduce(rt, &(rp_allreduce){y, RP_REDOP_SUM, {0}}, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));

  rp_dist_state *ds = rp__dist_state(rt);
  cr_assert_not_null(ds);
  uint64_t comms0 = atomic_load(&ds->nccl_exec_comms);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  cr_assert_eq(atomic_load(&ds->nccl_exec_comms) - comms0, 1,
               "two all-reduces on one GPU: one communicator per exec");
  char buf[8192] = "";
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  cr_assert_not_null(f);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(buf, "CUDA graph"), "not a CUDA graph:\n%s", buf);
  cr_assert_null(strstr(buf, "issued op by op"), "%s", buf);

  float scale = 1.0f;
  for (int rep = 0; rep < 3; rep++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    RP_CHECK(rp_event_release(rt, done));
    scale *= 2.0f;
    RP_CHECK(rp_instance_read(rt, x, v, N * sizeof *v));
    RP_CHECK(rp_instance_read(rt, y, w, N * sizeof *w));
    for (int i = 0; i < N; i++) { /* powers of two: exact */
      cr_assert_eq(v[i], (float)i * 0.5f * scale, "replay %d: x[%d] = %g", rep,
                   i, (double)v[i]);
      cr_assert_eq(w[i], 1.0f + (float)i, "replay %d: y[%d] = %g", rep, i,
                   (double)w[i]);
    }
  }
  rp_exec_stats es;
  RP_CHECK(rp_exec_stats_get(ex, &es));
  cr_assert_eq(es.replays, 3u);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  free(v);
  free(w);
  th_destroy(rt);
}
