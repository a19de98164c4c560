/* test/fuzz/fuzz_common.h — the runtime the graph-file fuzz target loads
 * against, shared with the seed-corpus generator so seeds name the tasks
 * the target registers. */
#ifndef RP_FUZZ_COMMON_H
#define RP_FUZZ_COMMON_H

#include "capture/capture_impl.h"

#include <stdio.h>
#include <stdlib.h>

/* Loader-allocated instances per input: enough for every seed, small
 * enough that an input cannot make each run zero megabytes. */
#define FZ_MAX_ALLOC ((size_t)1 << 20)

static rp_status fz_noop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* A CPU runtime with two workers and four tasks: three with a CPU variant,
 * one with only a GPU variant (loading it onto a CPU must fail cleanly). */
static rp_runtime *fz_runtime(void) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = 2;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  if (rp_runtime_create(&cfg, &rt) != RP_OK) {
    fprintf(stderr, "fuzz: runtime: %s\n", rp_error_detail());
    abort();
  }
  const char *names[] = {"scale", "accum", "update"};
  rp_task_id id;
  for (int i = 0; i < 3; i++) {
    rp_task_desc d = {.name = names[i], .cpu_fn = fz_noop};
    if (rp_task_register(rt, &d, &id) != RP_OK)
      abort();
  }
  rp_task_desc gpu = {.name = "gpu_only", .gpu_fn = fz_noop};
  if (rp_task_register(rt, &gpu, &id) != RP_OK)
    abort();
  return rt;
}

#endif
