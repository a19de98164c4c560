/* test/fuzz/fuzz_trace_graph.h — the graph the trace fuzz target reads
 * traces against, shared with the generator of its seed traces
 * (make_trace_corpus.c) so that the seeds are traces of this graph: a named
 * task, an unnamed copy and a second named task, on the runtime of
 * fuzz_common.h. */
#ifndef RP_FUZZ_TRACE_GRAPH_H
#define RP_FUZZ_TRACE_GRAPH_H

#include "fuzz_common.h"

static rp_graph *fz_trace_graph(rp_runtime *rt, rp_inst inst[2]) {
  rp_rect r = rp_rect_1d(0, 15);
  rp_graph *g = NULL;
  rp_task_id scale, accum;
  if (rp_instance_create(rt, 0, RP_F32, &r, NULL, &inst[0]) ||
      rp_instance_create(rt, 0, RP_F32, &r, NULL, &inst[1]) ||
      rp_task_find(rt, "scale", &scale) || rp_task_find(rt, "accum", &accum) ||
      rp_graph_create(rt, &g))
    abort();
  rp_access rw = {inst[0], RP_RW, RP_REDOP_NONE};
  rp_access rd = {inst[1], RP_READ, RP_REDOP_NONE};
  rp_launch a = {.task = scale, .proc = 0, .accesses = &rw, .naccess = 1};
  rp_launch b = {.task = accum, .proc = 1, .accesses = &rd, .naccess = 1};
  rp_copy c = {.src = inst[0], .dst = inst[1], .domain = RP_DOMAIN_SRC};
  rp_op_id o[3];
  if (rp_graph_add_task(g, &a, &o[0]) || rp_graph_add_copy(g, &c, &o[1]) ||
      rp_graph_add_task(g, &b, &o[2]) || rp_graph_add_edge(g, o[0], o[1]) ||
      rp_graph_add_edge(g, o[1], o[2]) ||
      rp_graph_set_op_name(g, o[0], "layer.a.fwd") ||
      rp_graph_set_op_name(g, o[2], "layer.b.bwd"))
    abort();
  return g;
}

#endif
