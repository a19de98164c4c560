/* A consumer of the installed library: the header, the version, a runtime
 * with an instance round trip. Exits 0 when everything answered. */
#include <reprise.h>

#include <stdio.h>

static int check(rp_status st, const char *what) {
  if (st == RP_OK)
    return 0;
  fprintf(stderr, "consumer: %s: %s (%s)\n", what, rp_status_name(st),
          rp_error_detail());
  return 1;
}

int main(void) {
  if (rp_version() != REPRISE_VERSION_HEX) {
    fprintf(stderr, "consumer: header says %#x, library %#x\n",
            (unsigned)REPRISE_VERSION_HEX, rp_version());
    return 1;
  }
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = 1;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  if (check(rp_runtime_create(&cfg, &rt), "rp_runtime_create"))
    return 1;
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst in;
  int fail = check(rp_instance_create(rt, 0, RP_I32, &r, NULL, &in),
                   "rp_instance_create");
  int32_t v[4] = {1, 2, 3, 4}, back[4] = {0};
  fail = fail || check(rp_instance_write(rt, in, v, sizeof v), "write") ||
         check(rp_instance_read(rt, in, back, sizeof back), "read") ||
         check(rp_instance_free(rt, in), "rp_instance_free");
  for (int i = 0; !fail && i < 4; i++)
    fail = back[i] != v[i];
  unsigned procs = rp_proc_count(rt);
  if (check(rp_runtime_destroy(rt), "rp_runtime_destroy") || fail)
    return 1;
  printf("consumer: reprise %s, %u processor(s): ok\n", rp_version_string(),
         procs);
  return 0;
}
