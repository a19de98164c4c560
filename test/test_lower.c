/* The CUDA lowering's segment cut (replay/lower.h), on CPU-only data: no
 * device is needed, so this runs everywhere (label unit). */
#include "helpers.h"

#include "train/mlp.h"
#include "replay/lower.h"

#include <stdlib.h>
#include <string.h>

#define MAXU 256
#define MAXP 32 /* predecessors per unit */

/* A unit graph: units 0..n-1 in index order are topological (edges go
 * from a lower to a higher index). gpu[u] = -1 for host units. */
typedef struct ugraph {
  uint32_t n;
  int32_t gpu[MAXU];
  uint8_t port[MAXU];
  uint32_t npred[MAXU], pred_off[MAXU];
  uint32_t preds[MAXU * MAXP];
  uint32_t order[MAXU];
} ugraph;

static void ug_init(ugraph *g, uint32_t n) {
  memset(g, 0, sizeof *g);
  g->n = n;
  for (uint32_t u = 0; u < n; u++) {
    g->order[u] = u;
    g->pred_off[u] = u * MAXP;
  }
}

static void ug_edge(ugraph *g, uint32_t from, uint32_t to) {
  cr_assert_lt(from, to);
  cr_assert_lt(g->npred[to], (uint32_t)MAXP);
  g->preds[g->pred_off[to] + g->npred[to]++] = from;
}

static void ug_cut(const ugraph *g, rp_cut *c) {
  rp_cut_in in = {g->n,        g->order, g->gpu,  g->port,
                  g->pred_off, g->npred, g->preds};
  RP_CHECK(rp__lower_cut(&in, c));
}

/* Checks every invariant lower.h promises, for any input. */
static void check_cut(const ugraph *g, const rp_cut *c, const char *what) {
  uint32_t seen[MAXU] = {0}, ngpu = 0;
  for (uint32_t u = 0; u < g->n; u++) {
    ngpu += g->gpu[u] >= 0;
    cr_assert_eq(c->seg[u] == UINT32_MAX, g->gpu[u] < 0,
                 "%s: unit %u: segment only for GPU units", what, u);
    if (g->port[u])
      cr_assert(c->key[u] & RP_KEY_PORT, "%s: unit %u has a port", what, u);
  }
  uint32_t total = 0;
  for (uint32_t k = 0; k < c->nseg; k++) {
    const rp_cut_seg *s = &c->segs[k];
    cr_assert_gt(s->n, 0u, "%s: segment %u is empty", what, k);
    cr_assert_eq(s->first, total, "%s: segment %u: members packed", what, k);
    total += s->n;
    if (k > 0) { /* launch order: (key, gpu), each pair once */
      const rp_cut_seg *p = &c->segs[k - 1];
      cr_assert(p->key < s->key || (p->key == s->key && p->gpu < s->gpu),
                "%s: segments %u and %u out of launch order", what, k - 1, k);
    }
    for (uint32_t i = 0; i < s->n; i++) {
      uint32_t u = c->members[s->first + i];
      cr_assert_eq(g->gpu[u], s->gpu, "%s: unit %u on another GPU", what, u);
      cr_assert_eq(c->key[u], s->key, "%s: unit %u key", what, u);
      cr_assert_eq(c->seg[u], k, "%s: unit %u seg", what, u);
      cr_assert(i == 0 || c->members[s->first + i - 1] < u,
                "%s: segment %u not topological", what, k);
      seen[u]++;
    }
  }
  cr_assert_eq(total, ngpu, "%s: every GPU unit in one segment", what);
  for (uint32_t u = 0; u < g->n; u++) {
    if (g->gpu[u] >= 0)
      cr_assert_eq(seen[u], 1u, "%s: unit %u listed %u times", what, u,
                   seen[u]);
    for (uint32_t j = 0; j < g->npred[u]; j++) {
      uint32_t p = g->preds[g->pred_off[u] + j];
      cr_assert_leq(c->key[p], c->key[u], "%s: key drops on edge %u->%u", what,
                    p, u);
      if (g->gpu[u] < 0)
        continue;
      if (g->gpu[p] < 0) /* host work finishes before the launch */
        cr_assert_lt(c->key[p], c->key[u], "%s: host %u -> gpu %u", what, p, u);
      else if (g->gpu[p] != g->gpu[u]) /* producer launched first */
        cr_assert_lt(c->seg[p], c->seg[u], "%s: gpu %u -> gpu %u", what, p, u);
      else
        cr_assert_leq(c->seg[p], c->seg[u], "%s: stream order %u -> %u", what,
                      p, u);
    }
  }
  /* everything that does not wait for a port launches before all that
   * does (it is issued ahead) */
  for (uint32_t k = 1; k < c->nseg; k++)
    cr_assert(!(c->segs[k - 1].key & RP_KEY_PORT) ||
                  (c->segs[k].key & RP_KEY_PORT),
              "%s: port-free segment %u after a port segment", what, k);
}

Test(lower, a_gpu_chain_is_one_segment) {
  ugraph g;
  ug_init(&g, 100);
  for (uint32_t u = 0; u < 100; u++) {
    g.gpu[u] = 3;
    if (u)
      ug_edge(&g, u - 1, u);
  }
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "chain");
  cr_assert_eq(c.nseg, 1u);
  cr_assert_eq(c.segs[0].n, 100u);
  cr_assert_eq(c.segs[0].key, 0u);
  rp__lower_cut_free(&c);
}

Test(lower, a_host_task_between_gpu_ops_cuts_the_segment) {
  ugraph g; /* gpu 0 -> host 1 -> gpu 2 -> gpu 3 */
  ug_init(&g, 4);
  g.gpu[0] = g.gpu[2] = g.gpu[3] = 1;
  g.gpu[1] = -1;
  ug_edge(&g, 0, 1);
  ug_edge(&g, 1, 2);
  ug_edge(&g, 2, 3);
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "host between");
  cr_assert_eq(c.nseg, 2u);
  cr_assert_eq(c.seg[0], 0u);
  cr_assert_eq(c.seg[2], 1u);
  cr_assert_eq(c.seg[3], 1u);
  cr_assert_lt(c.key[1], c.key[2], "the host task precedes the launch");
  rp__lower_cut_free(&c);
}

Test(lower, independent_gpu_work_is_issued_ahead_of_host_dependent_work) {
  ugraph g; /* host 0 -> gpu 1; gpu 2 -> gpu 3 independent */
  ug_init(&g, 4);
  g.gpu[0] = -1;
  g.gpu[1] = g.gpu[2] = g.gpu[3] = 0;
  ug_edge(&g, 0, 1);
  ug_edge(&g, 2, 3);
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "ahead");
  cr_assert_eq(c.nseg, 2u);
  cr_assert_eq(c.seg[2], 0u, "independent work in the first segment");
  cr_assert_eq(c.seg[3], 0u);
  cr_assert_eq(c.seg[1], 1u, "host-dependent work launches later");
  rp__lower_cut_free(&c);
}

Test(lower, port_dependent_gpu_work_launches_after_all_port_free_work) {
  ugraph g; /* gpu 0 waits on a port; gpu 1 -> host 2 -> gpu 3 */
  ug_init(&g, 4);
  g.gpu[0] = g.gpu[1] = g.gpu[3] = 0;
  g.gpu[2] = -1;
  g.port[0] = 1;
  ug_edge(&g, 1, 2);
  ug_edge(&g, 2, 3);
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "port");
  cr_assert_eq(c.nseg, 3u);
  cr_assert_eq(c.seg[1], 0u);
  cr_assert_eq(c.seg[3], 1u, "depth 1 without a port comes before");
  cr_assert_eq(c.seg[0], 2u, "the port's segment comes last");
  cr_assert(c.key[0] & RP_KEY_PORT);
  cr_assert(!(c.key[3] & RP_KEY_PORT));
  rp__lower_cut_free(&c);
}

Test(lower, cross_gpu_edges_launch_producers_first) {
  ugraph g; /* gpu A(0) -> gpu B(1) -> gpu A(0); and B(1) -> A(0) direct */
  ug_init(&g, 5);
  g.gpu[0] = 0;
  g.gpu[1] = 1;
  g.gpu[2] = 0;
  g.gpu[3] = 1;
  g.gpu[4] = 0;
  ug_edge(&g, 0, 1); /* 0 -> 1: GPU 0 before GPU 1 at one depth: no cut */
  ug_edge(&g, 1, 2); /* 1 -> 2: GPU 1 after GPU 0: next depth */
  ug_edge(&g, 3, 4);
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "cross");
  cr_assert_eq(c.key[1], 0u, "consumer on a later GPU stays at depth 0");
  cr_assert_eq(c.key[2], 1u, "consumer on an earlier GPU moves down");
  cr_assert_eq(c.key[4], 1u);
  cr_assert_eq(c.nseg, 3u); /* (0, gpu 0) (0, gpu 1) (1, gpu 0) */
  rp__lower_cut_free(&c);
}

Test(lower, no_gpu_units_no_segments) {
  ugraph g;
  ug_init(&g, 3);
  g.gpu[0] = g.gpu[1] = g.gpu[2] = -1;
  ug_edge(&g, 0, 1);
  ug_edge(&g, 1, 2);
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "cpu only");
  cr_assert_eq(c.nseg, 0u);
  rp__lower_cut_free(&c);
}

Test(lower, random_unit_graphs_keep_every_invariant) {
  srand(4242);
  static ugraph g;
  for (int t = 0; t < 2000; t++) {
    uint32_t n = 1 + (uint32_t)(rand() % 120);
    int ngpu = 1 + rand() % 3;
    ug_init(&g, n);
    for (uint32_t u = 0; u < n; u++) {
      g.gpu[u] = rand() % 3 ? rand() % ngpu : -1;
      g.port[u] = rand() % 20 == 0;
      uint32_t want = u ? (uint32_t)(rand() % 4) : 0;
      for (uint32_t j = 0; j < want; j++) {
        uint32_t p = (uint32_t)rand() % u;
        int dup = 0;
        for (uint32_t q = 0; q < g.npred[u]; q++)
          dup |= g.preds[g.pred_off[u] + q] == p;
        if (!dup)
          ug_edge(&g, p, u);
      }
    }
    rp_cut c;
    ug_cut(&g, &c);
    char what[64];
    snprintf(what, sizeof what, "graph %d (%u units, %d gpus)", t, n, ngpu);
    check_cut(&g, &c, what);
    rp__lower_cut_free(&c);
  }
}

Test(lower, random_single_gpu_dags_are_one_segment) {
  /* No host unit and no port: whatever the DAG, one GPU's work is one
   * segment (one CUDA graph, one launch per replay). */
  srand(777);
  static ugraph g;
  for (int t = 0; t < 1000; t++) {
    uint32_t n = 1 + (uint32_t)(rand() % 200);
    ug_init(&g, n);
    for (uint32_t u = 0; u < n; u++) {
      g.gpu[u] = 2;
      uint32_t want = u ? (uint32_t)(rand() % 5) : 0;
      for (uint32_t j = 0; j < want && g.npred[u] < MAXP; j++) {
        uint32_t p = (uint32_t)rand() % u;
        int dup = 0;
        for (uint32_t q = 0; q < g.npred[u]; q++)
          dup |= g.preds[g.pred_off[u] + q] == p;
        if (!dup)
          ug_edge(&g, p, u);
      }
    }
    rp_cut c;
    ug_cut(&g, &c);
    check_cut(&g, &c, "single gpu");
    cr_assert_eq(c.nseg, 1u, "dag %d (%u units): %u segments", t, n, c.nseg);
    cr_assert_eq(c.segs[0].n, n);
    rp__lower_cut_free(&c);
  }
}

/* The recorded training step (procs 1), as a unit graph with every op on
 * GPU 0: ops in graph order are topological (capture appends in issue
 * order and edges point forward). */
static void step_unit_graph(const rp_graph *gr, ugraph *g) {
  cr_assert_leq(gr->nops, (uint32_t)MAXU);
  ug_init(g, gr->nops);
  for (uint32_t u = 0; u < gr->nops; u++)
    g->gpu[u] = 0;
  for (uint32_t e = 0; e < gr->nedges; e++)
    ug_edge(g, gr->edges[e].from, gr->edges[e].to);
}

Test(lower, the_training_step_is_one_graph_with_no_op_by_op_issue) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_dataset d;
  RP_CHECK(rp_data_generate(RP_DATA_SPIRALS, 1024, 2, 3, 5, &d));
  rp_mlp_config cfg;
  rp_mlp_config_init(&cfg);
  cfg.procs = 1;
  cfg.batch = 128;
  rp_mlp *m;
  RP_CHECK(rp_mlp_create(rt, &k, &cfg, &d, &m));
  rp_graph *gr;
  RP_CHECK(rp_mlp_record(m, &gr));
  /* every op may live in a CUDA graph: per-replay values (batch index,
   * learning rate) are read on the device */
  uint32_t interpolated = 0;
  for (uint32_t i = 0; i < gr->nops; i++) {
    const char *why = rp__lower_task_blocker(rt, &gr->ops[i]);
    cr_assert_null(why, "op %u (%s) would be issued op by op: %s", i,
                   gr->ops[i].kind == RP_OP_TASK
                       ? rp_task_name(rt, gr->ops[i].task)
                       : "copy",
                   why);
    interpolated += gr->ops[i].ninterp > 0;
  }
  cr_assert_geq(interpolated, 2u, "batch index and lr are interpolated");
  static ugraph g;
  step_unit_graph(gr, &g);
  rp_cut c;
  ug_cut(&g, &c);
  check_cut(&g, &c, "training step");
  cr_assert_eq(c.nseg, 1u, "the step on one GPU is one segment, not %u",
               c.nseg);
  rp__lower_cut_free(&c);
  RP_CHECK(rp_graph_destroy(gr));
  RP_CHECK(rp_mlp_destroy(m));
  rp_data_free(&d);
  th_destroy(rt);
}

Test(lower, an_interpolated_arg_without_device_args_is_a_blocker) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_interp value = {0, 0, 4}, shards = {0, RP_INTERP_SHARDS, 4};
  rp_gop op = {
      .kind = RP_OP_TASK, .task = k.fill, .ninterp = 1, .interps = &value};
  cr_assert_not_null(rp__lower_task_blocker(rt, &op),
                     "rp.fill reads its value at issue");
  op.task = k.sgd; /* RP_TASK_DEVICE_ARGS */
  cr_assert_null(rp__lower_task_blocker(rt, &op));
  op.interps = &shards;
  cr_assert_not_null(rp__lower_task_blocker(rt, &op));
  op.ninterp = 0;
  op.task = k.fill;
  cr_assert_null(rp__lower_task_blocker(rt, &op));
  th_destroy(rt);
}

static rp_status nop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* The dump of ex as text, in a buffer the caller frees. */
static char *exec_text(const rp_exec *ex) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert_not_null(f);
  RP_CHECK(rp_exec_dump(ex, f, RP_DUMP_TEXT));
  cr_assert_eq(fclose(f), 0);
  return buf;
}

/* A model of a machine plans the GPU work without building it (no CUDA
 * graph is made there): each segment still says whether the build would
 * make it one CUDA graph or issue it op by op, and why, as on a device. */
Test(lower, a_model_plans_which_segments_are_issued_op_by_op) {
  rp_machine_desc m = {.cpus = 1, .ngpus = 1, .gpu_device = {0}};
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_task_desc d = {.name = "t.gpu", .cpu_fn = nop_task, .gpu_fn = nop_task};
  rp_task_id t;
  RP_CHECK(rp_task_register(rt, &d, &t));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  uint32_t arg = 0;
  rp_launch l = {.task = t, .proc = 1, .args = &arg, .args_size = sizeof arg};
  rp_op_id a, h, b;
  RP_CHECK(rp_graph_add_task(g, &l, &a)); /* segment 0: a graph */
  l.proc = 0;
  RP_CHECK(rp_graph_add_task(g, &l, &h)); /* host: cuts the segment */
  l.proc = 1;
  RP_CHECK(rp_graph_add_task(g, &l, &b)); /* segment 1: by value */
  RP_CHECK(rp_graph_add_edge(g, a, h));
  RP_CHECK(rp_graph_add_edge(g, h, b));
  rp_interp ip = {0, 0, sizeof arg}; /* read at issue: no graph */
  RP_CHECK(rp_graph_add_interp(g, b, &ip));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_exec_stats s;
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.gpu_segments, 2u);
  cr_assert_eq(s.gpu_segments_op_by_op, 1u);
  char *txt = exec_text(ex);
  cr_assert(strstr(txt, "segment 0: gpu lane 1, depth 0, 1 ops, CUDA graph"),
            "%s", txt);
  cr_assert(strstr(txt, "segment 1: gpu lane 1, depth 1, 1 ops, issued op by "
                        "op: an op interpolates args"),
            "%s", txt);
  free(txt);
  RP_CHECK(rp_exec_destroy(ex));
  /* CUDA graphs off: every segment op by op, as the header says */
  cr_assert_eq(setenv("REPRISE_CUDA_GRAPHS", "0", 1), 0);
  rp_status st = rp_instantiate(g, NULL, &ex);
  unsetenv("REPRISE_CUDA_GRAPHS");
  RP_CHECK(st);
  RP_CHECK(rp_exec_stats_get(ex, &s));
  cr_assert_eq(s.gpu_segments_op_by_op, 2u);
  txt = exec_text(ex);
  cr_assert(strstr(txt, "CUDA graphs off"), "%s", txt);
  cr_assert_null(strstr(txt, "ops, CUDA graph"), "%s", txt);
  cr_assert(strstr(txt, "segment 0: gpu lane 1, depth 0, 1 ops, issued op by "
                        "op: REPRISE_CUDA_GRAPHS=0"),
            "%s", txt);
  free(txt);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}
