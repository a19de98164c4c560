/* test/fuzz/fuzz_dump.c — libFuzzer target for `reprise dump FILE` as the
 * command runs it (rp_cmd_dump): the file's own machine (or one inferred
 * from it), placeholders for the tasks this build does not register, and
 * the model of that machine (no storage, no devices) the graph loads
 * into. Each input is a graph file, dumped with --schedule --stats --lint
 * (the graph instantiated on the model: lowering and schedule; the views
 * and --format html, which runs Graphviz, are fuzz_graph_load.c's). The
 * report and messages go to /dev/null; the exit status must be 0, 1 or 2. Any
 * input must be refused with a message or go through; ASan and UBSan catch the
 * rest. */
#include "fuzz_file.h"
#include "tools/cli.h"

#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_file file;
static int null_fd, err_fd; /* /dev/null; the standard error as it was */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  err_fd = dup(2);
  /* the command's report goes nowhere; its messages too (below), but not
   * the sanitizers' reports */
  if (null_fd < 0 || err_fd < 0 || dup2(null_fd, 1) < 0)
    abort();
  __sanitizer_set_report_fd((void *)(intptr_t)err_fd);
  fz_file_open(&file, "graph");
  return 0;
}

static void dump(char **argv, int argc) {
  fflush(stderr);
  if (dup2(null_fd, 2) < 0)
    abort();
  int rc = rp_cmd_dump(argc, argv);
  fflush(stderr);
  if (dup2(err_fd, 2) < 0)
    abort();
  if (rc < 0 || rc > 2)
    fz_fail("reprise dump: an exit status but 0, 1 or 2");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char cmd[] = "dump", schedule[] = "--schedule", stats[] = "--stats",
              lint[] = "--lint";
  fz_file_set(&file, data, size);
  char *argv[] = {cmd, file.path, schedule, stats, lint, NULL};
  dump(argv, 5);
  return 0;
}
