/* test/fuzz/fuzz_diff.c — libFuzzer target for `reprise dump A.json --diff
 * B.json` (tools/dump_diff.c): each input is two graph files, A and B, one
 * after the other with a line "--8<--" between them (an input without it
 * is A alone, diffed with itself). The command itself (rp_cmd_dump, its
 * report and messages to /dev/null) diffs A with itself, which must not
 * say they differ, and A with B. Then each file that loads as
 * fuzz_graph_load.c loads it (against the runtime of fuzz_common.h) gets
 * the dump's model and the fields it does not hold (dump_extra.c), and A
 * is diffed with B, B with A and A with itself into /dev/null: A with
 * itself must have no difference, B with A as many as A with B (else the
 * target traps, so libFuzzer keeps the input). Any input must be refused
 * with a message or go through; ASan and UBSan catch the rest. */
#include "fuzz_common.h"
#include "fuzz_file.h"
#include "tools/cli.h"
#include "tools/dump_model.h"
#include "tools/dump_view.h"

#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MARK "\n--8<--\n"

static rp_runtime *rt;
static FILE *sink;
static fz_file file_a, file_b;
static int null_fd, err_fd; /* /dev/null; the standard error as it was */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  rt = fz_runtime();
  sink = fopen("/dev/null", "w");
  null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  err_fd = dup(2);
  /* the command's report goes nowhere; its messages too (below), but not
   * the sanitizers' reports */
  if (!sink || null_fd < 0 || err_fd < 0 || dup2(null_fd, 1) < 0)
    abort();
  __sanitizer_set_report_fd((void *)(intptr_t)err_fd);
  fz_file_open(&file_a, "a");
  fz_file_open(&file_b, "b");
  return 0;
}

/* `reprise dump A --diff B` as the command line runs it (its own runtime
 * per file, placeholders for the tasks the file names): 0 the same, 1
 * they differ, 2 either cannot be read; its messages to /dev/null. */
static int cli_diff(const char *a, const char *b) {
  static char dump[] = "dump", diff[] = "--diff";
  char *argv[] = {dump, (char *)a, diff, (char *)b, NULL};
  fflush(stderr);
  if (dup2(null_fd, 2) < 0)
    abort();
  int rc = rp_cmd_dump(4, argv);
  fflush(stderr);
  if (dup2(err_fd, 2) < 0)
    abort();
  if (rc < 0 || rc > 2)
    fz_fail("reprise dump --diff: an exit status but 0, 1 or 2");
  return rc;
}

/* One side: the loaded graph, its instances, the model and the extras. */
typedef struct side {
  rp_graph *g;
  rp_inst *insts;
  uint32_t ninsts;
  dm_graph m;
  dv_extra x;
  int built, extra;
} side;

static void side_free(side *s) {
  if (s->extra)
    dv_extra_free(&s->x);
  if (s->built)
    dm_free(&s->m);
  if (s->g)
    rp_graph_destroy(s->g);
  for (uint32_t i = 0; i < s->ninsts; i++)
    rp_instance_free(rt, s->insts[i]);
  free(s->insts);
}

/* 0 loaded (and modelled), -1 refused. */
static int side_load(const uint8_t *data, size_t size, side *s) {
  memset(s, 0, sizeof *s);
  if (rp__graph_load_mem(rt, data, size, NULL, 0, FZ_MAX_ALLOC, &s->g) != RP_OK)
    return -1;
  uint32_t n = 0;
  if (rp_graph_instances(s->g, NULL, 0, &n) != RP_OK)
    fz_fail("rp_graph_instances");
  s->insts = malloc(sizeof *s->insts * (n ? n : 1));
  if (!s->insts || rp_graph_instances(s->g, s->insts, n, &n) != RP_OK)
    fz_fail("rp_graph_instances");
  s->ninsts = n;
  if (dm_build(s->g, NULL, NULL, &s->m) != RP_OK)
    fz_fail("the dump's model of a loaded graph");
  s->built = 1;
  /* the text loaded: its extras are read, as run_diff reads them */
  if (dv_extra_read((const char *)data, size, &s->x, sink))
    fz_fail("the extras of a loaded graph file");
  s->extra = 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *mark = memmem(data, size, FZ_MARK, sizeof FZ_MARK - 1);
  size_t na = mark ? (size_t)(mark - data) : size;
  const uint8_t *b = mark ? mark + sizeof FZ_MARK - 1 : data;
  size_t nb = mark ? size - na - (sizeof FZ_MARK - 1) : size;
  fz_file_set(&file_a, data, na);
  fz_file_set(&file_b, b, nb);
  if (cli_diff(file_a.path, file_a.path) == 1)
    fz_fail("reprise dump A --diff A: they differ");
  cli_diff(file_a.path, file_b.path);
  side sa, sb;
  if (side_load(data, na, &sa)) {
    side_free(&sa);
    return 0;
  }
  uint32_t nd = 0;
  if (dv_diff(&sa.m, &sa.x, &sa.m, &sa.x, sink, sink, &nd))
    fz_fail("--diff of a graph with itself");
  if (nd)
    fz_fail("a graph differs from itself");
  if (mark && !side_load(b, nb, &sb)) {
    uint32_t back = 0;
    if (dv_diff(&sa.m, &sa.x, &sb.m, &sb.x, sink, sink, &nd) ||
        dv_diff(&sb.m, &sb.x, &sa.m, &sa.x, sink, sink, &back))
      fz_fail("--diff of two loaded graphs");
    if (nd != back)
      fz_fail("A --diff B and B --diff A count different differences");
    side_free(&sb);
  } else if (mark)
    side_free(&sb);
  side_free(&sa);
  return 0;
}
