/* test/fuzz/fuzz_graph_load.c — libFuzzer target for graph files.
 *
 * Each input is loaded from memory (rp__graph_load_mem) against a runtime
 * with a few registered tasks, letting the loader allocate the instances.
 * Any input must fail cleanly or load; ASan and UBSan catch the rest, and
 * LeakSanitizer anything left behind. An input that loads is also a test
 * of the writer: it is dumped in every format, saved, and loaded again over
 * the same instances, and the second save must be byte for byte the first
 * (a failure there traps, so libFuzzer keeps the input); and it goes
 * through `reprise dump`'s model, --stats and every --lint check. */
#include "fuzz_common.h"
#include "tools/dump_model.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rp_runtime *rt;
static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  rt = fz_runtime();
  sink = fopen("/dev/null", "w");
  if (!sink)
    abort();
  return 0;
}

/* The graph as a graph file, in memory (NULL when writing fails). */
static char *save_mem(const rp_graph *g, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f)
    return NULL;
  rp_status st = rp__graph_json_write(g, f);
  fclose(f);
  if (st) {
    free(buf);
    return NULL;
  }
  return buf;
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz: %s: %s\n", what, rp_error_detail());
  __builtin_trap();
}

/* save(g), load it over g's instances, save again: the same bytes. */
static void round_trip(const rp_graph *g, const rp_inst *insts, uint32_t n) {
  size_t len1 = 0, len2 = 0;
  char *t1 = save_mem(g, &len1);
  if (!t1)
    fail("a loaded graph does not save");
  rp_graph *h = NULL;
  if (rp__graph_load_mem(rt, t1, len1, insts, n, 0, &h) != RP_OK)
    fail("a saved graph does not load");
  char *t2 = save_mem(h, &len2);
  if (!t2 || len1 != len2 || memcmp(t1, t2, len1))
    fail("save(load(save(g))) differs from save(g)");
  rp_graph_destroy(h);
  free(t1);
  free(t2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rp_graph *g = NULL;
  if (rp__graph_load_mem(rt, data, size, NULL, 0, FZ_MAX_ALLOC, &g) != RP_OK)
    return 0;
  uint32_t n = 0;
  if (rp_graph_instances(g, NULL, 0, &n) != RP_OK)
    fail("rp_graph_instances");
  rp_inst *insts = malloc(sizeof *insts * (n ? n : 1));
  if (!insts || rp_graph_instances(g, insts, n, &n) != RP_OK)
    fail("rp_graph_instances");
  if (rp_graph_dump(g, sink, RP_DUMP_TEXT) != RP_OK ||
      rp_graph_dump(g, sink, RP_DUMP_DOT) != RP_OK)
    fail("rp_graph_dump");
  round_trip(g, insts, n);
  dm_graph m;
  if (dm_build(g, NULL, NULL, &m) != RP_OK)
    fail("the dump's model of a loaded graph");
  dm_lint_result lr;
  if (dm_stats(&m, sink, sink) || dm_lint(&m, DM_LINT_ALL, sink, sink, &lr))
    fail("--stats or --lint of a loaded graph");
  dm_free(&m);
  rp_graph_destroy(g);
  for (uint32_t i = 0; i < n; i++)
    rp_instance_free(rt, insts[i]);
  free(insts);
  return 0;
}
