/* test/fuzz/fuzz_trace.c — libFuzzer target for replay traces, read as
 * `reprise dump --trace FILE` reads them (tools/dump_trace.c): each input
 * is a file; one that loads is summarised (--summary at three depths, with
 * and without an idle-gap threshold), checked against the graph it claims
 * to trace (fuzz_trace_graph.h), and, when it matches, its measured
 * durations drive the critical path. Any input must be refused with a
 * message or go through; ASan and UBSan catch the rest. */
#include "fuzz_file.h"
#include "fuzz_trace_graph.h"
#include "tools/dump_model.h"
#include "tools/dump_view.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_file file;
static FILE *sink;
static rp_runtime *rt; /* live while the model's names point into them */
static rp_graph *graph;
static rp_inst inst[2];
static dm_graph model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  rt = fz_runtime();
  graph = fz_trace_graph(rt, inst);
  if (dm_build(graph, NULL, NULL, &model) != RP_OK)
    abort();
  fz_file_open(&file, "trace");
  sink = fopen("/dev/null", "w");
  if (!sink)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_file_set(&file, data, size);
  dv_trace t;
  if (dv_trace_load(file.path, (uint64_t)1 << 20, &t, sink))
    return 0;
  for (unsigned depth = 0; depth < 3; depth++)
    if (dv_summary(&t, depth, depth ? 10.0 : 0.0, sink, sink))
      fz_fail("--summary of a loaded trace");
  if (dv_trace_matches(&t, &model, sink) == 0) {
    double *cost = NULL;
    if (dv_trace_op_costs(&t, &model, &cost, sink))
      fz_fail("the op costs of a matching trace");
    dv_crit c = {0};
    if (dv_crit_find(&model, cost, &c, sink) ||
        dv_crit_print(&model, &c, cost, 1, sink))
      fz_fail("--critical-path by a trace's durations");
    dv_crit_free(&c);
    free(cost);
  }
  dv_trace_free(&t);
  return 0;
}
