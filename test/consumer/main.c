/* A consumer of the installed library: the header, the version, a runtime
 * with an instance round trip. Exits 0 when everything answered. */
#include <reprise.h>

#include <stdio.h>
#include <stdlib.h>

static int check(rp_status st, const char *what) {
  if (st == RP_OK)
    return 0;
  fprintf(stderr, "consumer: %s: %s (%s)\n", what, rp_status_name(st),
          rp_error_detail());
  return 1;
}

/* rp_thread_allocated_bytes either counts (an allocation moves it) or
 * says it cannot (UINT64_MAX): a program linked without jemalloc gets
 * libc's malloc, and a counter stuck at a number would call every loop
 * allocation-free. */
static int alloc_counter_honest(void) {
  uint64_t a = rp_thread_allocated_bytes();
  void *volatile p = malloc(1 << 16);
  uint64_t b = rp_thread_allocated_bytes();
  free(p);
  if (a == UINT64_MAX && b == UINT64_MAX)
    return 1;
  if (a != UINT64_MAX && b != UINT64_MAX && b >= a + (1 << 16))
    return 1;
  fprintf(stderr,
          "consumer: rp_thread_allocated_bytes went from %llu to %llu "
          "over a malloc of 65536 bytes\n",
          (unsigned long long)a, (unsigned long long)b);
  return 0;
}

int main(void) {
  if (!alloc_counter_honest())
    return 1;
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
