/* Training on the CUDA backend: the same step as test_train.c on P logical
 * GPUs, compared with the CPU backend (the reference). Convergence,
 * determinism and P = 2 against P = 1 are test_train.c's train_backends
 * suite (test_train_cuda runs it on CUDA). Every test skips
 * with the reason when no device answers, and only then: replays of GPU
 * ops are lowered onto CUDA graphs (replay/gpu_build.c, gpu_launch.c), so an
 * instantiate that fails (RP_EUNSUPPORTED included) fails the test.
 *
 * Tolerances: the CUDA kernels agree with the CPU ones to a relative 1e-4
 * per op (cuda_kernels.cuh: GEMM in FP32, expf and sums in another order);
 * over 50 SGD steps with momentum the weights then agree to 1e-3 of the
 * largest weight. Replay and eager on CUDA run the same kernels on the same
 * streams: 1e-5 (bitwise where cuBLAS picks the same algorithms). */
#include "train_common.h"

#include <string.h>

#define CUDA_VS_CPU_TOL 1e-3
#define REPLAY_VS_EAGER_TOL 1e-5

static float *train_on(rp_backend_kind kind, uint32_t procs, int eager,
                       uint32_t iters, size_t *n, double *loss, double *acc) {
  return tw_train(kind, procs, 7, eager, iters, n, loss, acc);
}

static void cuda_against_cpu(uint32_t procs, int eager) {
  size_t n;
  double lg, ag, lc, ac;
  float *gpu = train_on(RP_BACKEND_CUDA, procs, eager, 50, &n, &lg, &ag);
  float *cpu = train_on(RP_BACKEND_CPU, procs, eager, 50, &n, &lc, &ac);
  double d = tw_rel_diff(cpu, gpu, n);
  cr_assert_leq(d, CUDA_VS_CPU_TOL,
                "P=%u eager=%d: CUDA vs CPU max rel "
                "diff %g",
                procs, eager, d);
  cr_assert_leq(fabs(lg - lc), CUDA_VS_CPU_TOL * (1 + lc), "loss %g vs %g", lg,
                lc);
  free(gpu);
  free(cpu);
}

Test(train_gpu, cuda_eager_weights_match_cpu_within_tolerance) {
  cuda_against_cpu(2, 1);
}

Test(train_gpu, cuda_replay_weights_match_cpu_within_tolerance) {
  cuda_against_cpu(2, 0);
}

Test(train_gpu, cuda_replay_matches_cuda_eager_within_tolerance) {
  size_t n;
  double l, a;
  float *eager = train_on(RP_BACKEND_CUDA, 2, 1, 50, &n, &l, &a);
  float *replayed = train_on(RP_BACKEND_CUDA, 2, 0, 50, &n, &l, &a);
  double d = tw_rel_diff(eager, replayed, n);
  cr_assert_leq(d, REPLAY_VS_EAGER_TOL, "max rel diff %g", d);
  free(eager);
  free(replayed);
}

Test(train_gpu, gather_rows_on_a_gpu_selects_the_batch) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_proc gpu = RP_PROC_ANY;
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_GPU && gpu == RP_PROC_ANY)
      gpu = p;
  }
  cr_assert_neq(gpu, RP_PROC_ANY, "a CUDA runtime without GPU processors");
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, gpu, &pi));
  rp_inst src, dst;
  rp_rect rs = rp_rect_2d(0, 5, 0, 1), rd = rp_rect_2d(0, 1, 0, 1);
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &rs, NULL, &src));
  RP_CHECK(rp_instance_create(rt, pi.local, RP_F32, &rd, NULL, &dst));
  float v[12];
  for (int i = 0; i < 12; i++)
    v[i] = (float)(i + 1);
  RP_CHECK(rp_instance_write(rt, src, v, sizeof v));
  for (int32_t index = 2; index <= 3; index++) {
    rp_gather_args a = {index, 2, 2};
    rp_access acc[2] = {{src, RP_READ, 0}, {dst, RP_WRITE, 0}};
    rp_event e = {0};
    /* index 3 is past src: refused by the launch, nothing runs */
    RP_EXPECT(rp_launch_task(rt,
                             &(rp_launch){.task = k.gather_rows,
                                          .proc = gpu,
                                          .accesses = acc,
                                          .naccess = 2,
                                          .args = &a,
                                          .args_size = sizeof a},
                             &e),
              index == 2 ? RP_OK : RP_ERANGE);
    if (index != 2) {
      cr_assert_eq(e.id, 0, "*done set by a refused launch");
      continue;
    }
    RP_CHECK(rp_event_wait(rt, e, -1));
    RP_CHECK(rp_event_release(rt, e));
  }
  float got[4];
  RP_CHECK(rp_instance_read(rt, dst, got, sizeof got));
  for (int j = 0; j < 4; j++)
    cr_assert_eq(got[j], (float)(9 + j), "elem %d", j);
  RP_CHECK(rp_instance_free(rt, src));
  RP_CHECK(rp_instance_free(rt, dst));
  th_destroy(rt);
}
