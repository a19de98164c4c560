/* test/synth_step_main.c — `synth_step OPS FILE [variant]`: saves the
 * synthetic transformer-shaped step of about OPS ops (test/synth_step.h)
 * to FILE, for bench/dump_scale.sh. Exit 0 saved, 1 failed, 2 usage. */
#include "synth_step.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  char *end = NULL;
  unsigned long ops = argc >= 3 ? strtoul(argv[1], &end, 10) : 0;
  if (argc < 3 || argc > 4 || !end || *end || ops < 1 || ops > 1000000) {
    fprintf(stderr, "usage: synth_step OPS FILE [variant]  (OPS 1..1000000)\n");
    return 2;
  }
  int variant = argc == 4 ? atoi(argv[3]) : 0;
  rp_status st = synth_step_save((uint32_t)ops, variant, argv[2]);
  if (st) {
    fprintf(stderr, "synth_step: %s: %s\n", rp_status_name(st),
            rp_error_detail());
    return 1;
  }
  return 0;
}
