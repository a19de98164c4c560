/* test/test_insert_gpu.c (label gpu) — copy insertion where only the
 * CUDA backend's access matrix has the case: a logical GPU does not reach
 * another's memory, SPMD shards on two devices. A GPU task on system
 * memory, a CPU task on device memory and insertion turned off are
 * test_insert.c's insert_backends suite (test_insert_cuda runs it on
 * CUDA). Every case skips with the reason when no CUDA device answers.
 *
 * Instantiating a graph with GPU ops or device copies goes through the CUDA
 * replay lowering (replay/gpu_build.c, gpu_launch.c): any refusal,
 * RP_EUNSUPPORTED included, fails the test. */
#include "helpers.h"

#ifdef REPRISE_HAVE_CUDA

#include "capture/capture.h"
#include "kernels/tasks.h"

#include <string.h>

#define N 64

static rp_proc nth_gpu(const rp_runtime *rt, unsigned n) {
  for (rp_proc p = 0; p < rp_proc_count(rt); p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(rt, p, &pi));
    if (pi.kind == RP_PROC_GPU && n-- == 0)
      return p;
  }
  cr_assert_fail("the CUDA runtime has too few GPU processors");
  return 0;
}

static rp_runtime *cuda_rt(unsigned gpus, rp_kernel_tasks *k) {
  th_need_gpu();
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CUDA;
  cfg.cpus = 2;
  cfg.gpus = gpus;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create(&cfg, &rt));
  RP_CHECK(rp_kernels_register(rt, k));
  return rt;
}

static rp_inst make(rp_runtime *rt, rp_mem m, float base) {
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, m, RP_F32, &r, NULL, &i));
  float v[N];
  for (int k = 0; k < N; k++)
    v[k] = base + (float)k;
  RP_CHECK(rp_instance_write(rt, i, v, sizeof v));
  return i;
}

static rp_mem local_of(const rp_runtime *rt, rp_proc p) {
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, p, &pi));
  return pi.local;
}

static void axpy(rp_runtime *rt, const rp_kernel_tasks *k, rp_proc p, rp_inst x,
                 rp_inst y, float v) {
  rp_scalar_args a = {v, 0};
  rp_access acc[2] = {{x, RP_READ, RP_REDOP_NONE}, {y, RP_RW, RP_REDOP_NONE}};
  rp_launch l = {.task = k->axpy,
                 .proc = p,
                 .accesses = acc,
                 .naccess = 2,
                 .args = &a,
                 .args_size = sizeof a};
  RP_CHECK(rp_launch_task(rt, &l, NULL));
}

/* Instantiates and replays once; returns 1 (the callers check the data). */
static int replay_once(rp_graph *g) {
  rp_exec *ex = NULL;
  rp_status st = rp_instantiate(g, NULL, &ex);
  cr_assert_eq(st, RP_OK, "instantiate: %s (%s)", rp_status_name(st),
               rp_error_detail());
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(g->rt, done, -1));
  RP_CHECK(rp_event_release(g->rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  return 1;
}

Test(insert_gpu, gpu_reads_another_gpus_memory_through_a_mirror) {
  rp_kernel_tasks k;
  rp_runtime *rt = cuda_rt(2, &k); /* two logical GPUs, two memories */
  rp_proc g0 = nth_gpu(rt, 0), g1 = nth_gpu(rt, 1);
  rp_inst x = make(rt, local_of(rt, g0), 1.0f);
  rp_inst y = make(rt, local_of(rt, g1), 5.0f);
  RP_CHECK(rp_capture_begin(rt, NULL));
  axpy(rt, &k, g1, x, y, 2.0f); /* y += 2 x on GPU 1 */
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2);
  cr_assert_eq(g->mirrors[0].mem, local_of(rt, g1));
  RP_CHECK(rp_graph_validate(g));
  if (replay_once(g)) {
    float v[N];
    RP_CHECK(rp_instance_read(rt, y, v, sizeof v));
    for (int i = 0; i < N; i++)
      cr_assert_eq(v[i], 5.0f + (float)i + 2.0f * (1.0f + (float)i),
                   "element %d", i);
  }
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
}

Test(insert_gpu, spmd_shards_on_two_devices_are_refused) {
  rp_kernel_tasks k;
  rp_runtime *rt = cuda_rt(2, &k);
  rp_proc sp[2] = {nth_gpu(rt, 0), nth_gpu(rt, 1)};
  rp_inst a = make(rt, 0, 1.0f);
  rp_scalar_args args = {2.0f, 0};
  rp_access acc[1] = {{a, RP_RW, RP_REDOP_NONE}};
  rp_launch l = {.task = k.scale,
                 .accesses = acc,
                 .naccess = 1,
                 .args = &args,
                 .args_size = sizeof args,
                 .shards = 2,
                 .shard_procs = sp};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_EXPECT(rp_launch_task(rt, &l, NULL), RP_EACCESS);
  cr_assert(strstr(rp_error_detail(), "different memories"), "%s",
            rp_error_detail());
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0, "nothing recorded");
  cr_assert_eq(g->nmirrors, 0u);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  th_destroy(rt);
}

#else

Test(insert_gpu, skipped_without_cuda) {
  th_gpu_skip("built without the CUDA toolkit: no device memories");
}

#endif
