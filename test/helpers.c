#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>

rp_backend_kind th_backends[2] = {RP_BACKEND_CPU, RP_BACKEND_CUDA};

rp_runtime *th_cpu_runtime(unsigned workers) {
  return th_runtime(RP_BACKEND_CPU, workers);
}

int th_cuda_available(const char **why) {
  static int probed = -1;
  static char reason[512];
  if (probed < 0) {
    rp_runtime_config cfg;
    rp_runtime_config_init(&cfg);
    cfg.backend = RP_BACKEND_CUDA;
    cfg.cpus = 1;
    cfg.quiet = 1;
    cfg.ignore_env = 1;
    rp_runtime *rt = NULL;
    rp_status st = rp_runtime_create(&cfg, &rt);
    if (st == RP_OK) {
      probed = 1;
      rp_runtime_destroy(rt);
    } else {
      probed = 0;
      snprintf(reason, sizeof reason, "no CUDA device: %s",
               rp_error_detail());
    }
  }
  if (why)
    *why = reason;
  return probed;
}

rp_runtime *th_runtime(rp_backend_kind kind, unsigned workers) {
  if (kind == RP_BACKEND_CUDA) {
    const char *why;
    if (!th_cuda_available(&why))
      cr_skip_test("%s", why);
  }
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = kind;
  cfg.cpus = workers;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  rp_status st = rp_runtime_create(&cfg, &rt);
  cr_assert_eq(st, RP_OK, "runtime create: %s (%s)", rp_status_name(st),
               rp_error_detail());
  return rt;
}

void th_destroy(rp_runtime *rt) {
  rp_status st = rp_runtime_destroy(rt);
  cr_assert_eq(st, RP_OK, "runtime destroy: %s (%s)", rp_status_name(st),
               rp_error_detail());
}
