/* test/fuzz/fuzz_graph_load.c — libFuzzer target for graph files.
 *
 * Each input is loaded from memory (rp__graph_load_mem) against a runtime
 * with a few registered tasks, letting the loader allocate the instances.
 * Any input must fail cleanly or load; ASan and UBSan catch the rest, and
 * LeakSanitizer anything left behind. An input that loads is also a test
 * of the writer: it is dumped in every format, saved, and loaded again over
 * the same instances, and the second save must be byte for byte the first
 * (a failure there traps, so libFuzzer keeps the input); and it goes
 * through `reprise dump`'s model, --stats, every --lint check and the
 * views (--critical-path, --group, --focus). */
#include "fuzz_common.h"
#include "tools/dump_model.h"
#include "tools/dump_view.h"

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

/* --critical-path, --group 0..2 with the path marked (text, DOT, JSON),
 * and --focus on op 0 and on the first op's name. */
static void views(const dm_graph *m) {
  dv_crit c = {0};
  if (dv_crit_find(m, NULL, &c, sink) || dv_crit_print(m, &c, NULL, 2, sink))
    fail("--critical-path of a loaded graph");
  for (unsigned depth = 0; depth < 3; depth++) {
    dv_opts o = {.depth = depth, .single_as_op = 1, .crit = &c};
    dv_view v;
    if (dv_build(m, &o, &v, sink))
      fail("a view of a loaded graph");
    const rp_dump_format fmts[] = {RP_DUMP_TEXT, RP_DUMP_DOT, RP_DUMP_JSON};
    for (int k = 0; k < 3; k++)
      if (dv_write(m, &v, fmts[k], "fuzz", sink))
        fail("writing a view");
    dv_free(&v);
  }
  dv_crit_free(&c);
  const char *names[] = {"op 0", m->nops ? m->ops[0].label : ""};
  for (int k = 0; k < 2; k++) {
    uint32_t *ops = NULL;
    uint32_t n = dv_focus(m, names[k], 1, &ops);
    if (n == UINT32_MAX)
      fail("--focus of a loaded graph");
    dv_opts o = {.depth = 0, .ops = ops, .nops = n};
    dv_view v;
    if (n && dv_build(m, &o, &v, sink) == 0) {
      if (dv_write(m, &v, RP_DUMP_TEXT, "focus", sink))
        fail("writing a focus view");
      dv_free(&v);
    }
    free(ops);
  }
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
  views(&m);
  dm_free(&m);
  rp_graph_destroy(g);
  for (uint32_t i = 0; i < n; i++)
    rp_instance_free(rt, insts[i]);
  free(insts);
  return 0;
}
