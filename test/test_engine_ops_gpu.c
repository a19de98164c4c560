/* test/test_engine_ops_gpu.c — the engine's low-level operations where
 * only the CUDA backend has the case: device memory a CPU worker cannot
 * address. Strided copies through a GPU's memory, copies after their
 * precondition and a GPU task spawn completing through its stream are
 * test_engine_ops.c's engine_ops_backends suite (test_engine_ops_cuda runs
 * it on CUDA). Every case skips with the reason when no CUDA device
 * answers (label "gpu"). */
#include "helpers.h"

#include "engine/engine.h"

#include <string.h>

/* The first GPU processor of rt (asserts there is one). */
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

static rp_mem mem_of(rp_runtime *rt, rp_mem_kind kind, int device) {
  rp_mem m;
  RP_CHECK(rp_mem_find(rt, kind, device, &m));
  return m;
}

Test(engine_ops_gpu, cpu_worker_cannot_copy_device_memory) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_proc_info gi;
  RP_CHECK(rp_proc_query(rt, first_gpu(rt), &gi));
  void *dev;
  RP_CHECK(rp__mem_alloc(rt, gi.local, 64, 256, &dev));
  unsigned char host[64] = {0};
  rp_copy_bytes c = {.dst = dev,
                     .dst_mem = gi.local,
                     .src = host,
                     .src_mem = mem_of(rt, RP_MEM_SYSTEM, -1),
                     .rows = 1,
                     .row_bytes = 64};
  rp_event done = {0x5a5a};
  RP_EXPECT(rp__spawn_copy(rt, &c, 0, RP_NO_EVENT, &done), RP_EACCESS);
  cr_assert(strstr(rp_error_detail(), "not addressable from CPU worker 0"),
            "%s", rp_error_detail());
  cr_assert_eq(done.id, 0x5a5a);
  rp__mem_free(rt, gi.local, dev);
  th_destroy(rt);
}

static rp_status nop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* An eager SPMD launch keeps its shards' workspace slices in one block in
 * shard 0's memory: shards on a GPU and a CPU worker could not both
 * address it (the CPU shard was handed a device pointer). RP_EUNSUPPORTED
 * naming the shard, nothing run; the same launch without a workspace
 * runs. */
Test(engine_ops_gpu, an_eager_spmd_workspace_across_memories_is_refused) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "nop2", .cpu_fn = nop_task, .gpu_fn = nop_task},
      &t));
  rp_proc sp[2] = {first_gpu(rt), 0};
  rp_launch l = {
      .task = t, .shards = 2, .shard_procs = sp, .workspace_bytes = 64};
  rp_event done = {0x5a5a};
  RP_EXPECT(rp_launch_task(rt, &l, &done), RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "shard 1's processor 0"), "%s",
            rp_error_detail());
  cr_assert_eq(done.id, 0x5a5a);
  l.workspace_bytes = 0;
  RP_CHECK(rp_launch_task(rt, &l, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  th_destroy(rt);
}
