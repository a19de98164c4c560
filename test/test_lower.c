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

/* ---- the plan, run: a simulation of replays on a model's plan ----
 *
 * CPU lanes run their units in order, each after its waits (a launcher
 * also after its segment's members' CPU-lane waits) and a launcher issues
 * its segment on its group's stream; a stream runs its segments in issue
 * order, each after the latest issued instance of every producer segment
 * of another group its members depend on (the event waits gpu_build.c
 * makes from the predecessors and wrap-around sources); a segment whose
 * completion the host needs (needs_cb) publishes its lanes up to its
 * ends. Whatever the interleaving, every unit must start after its
 * predecessors in its replay and its wrap-around sources in the replay
 * before, and every replay must complete. */

#define SIM_REPLAYS 3
#define SIM_LANES 16

typedef struct sim {
  const rp_exec *ex;
  const rp_lower *lw;
  uint32_t lane_r[SIM_LANES], lane_i[SIM_LANES]; /* CPU lane: next (r, i) */
  uint64_t prog[SIM_LANES]; /* r x len + pos: done (CPU), published (GPU) */
  uint8_t *host_done;       /* [r x nunits + u] */
  uint8_t *issued, *done;   /* [r x nseg + k] */
  uint32_t *q[SIM_LANES], qh[SIM_LANES], qn[SIM_LANES]; /* streams */
  uint32_t *need, *need_off; /* per issued instance: instances it waits on */
  uint32_t nneed;
  const char *what;
} sim;

static int sim_gpu(const sim *s, uint32_t u) {
  return u < s->lw->nop_units && s->lw->seg_of[u] != UINT32_MAX;
}

static int sim_unit_done(const sim *s, uint32_t p, uint32_t r) {
  if (sim_gpu(s, p))
    return s->done[r * s->lw->nseg + s->lw->seg_of[p]];
  return s->host_done[(size_t)r * s->ex->nunits + p];
}

static int sim_wait_ok(const sim *s, const rp_wait *w, uint32_t r) {
  if (w->prev && r == 0)
    return 1;
  return s->prog[w->lane] >=
         (uint64_t)(r - w->prev) * s->ex->lanes[w->lane].len + w->pos;
}

/* Unit u (of segment k, or host: k UINT32_MAX) starts in replay r. */
static void sim_check(const sim *s, uint32_t u, uint32_t k, uint32_t r) {
  const rp_exec *ex = s->ex;
  const rp_unit *x = &ex->units[u];
  for (uint32_t j = 0; j < x->npred; j++) {
    uint32_t p = ex->preds[x->pred_off + j];
    if (k != UINT32_MAX && (p >= s->lw->nop_units || s->lw->seg_of[p] == k))
      continue; /* its launcher; a graph edge */
    cr_assert(sim_unit_done(s, p, r),
              "%s: unit %u (replay %u) started before its predecessor %u",
              s->what, u, r, p);
  }
  for (uint32_t j = ex->wrap_off[u]; r && j < ex->wrap_off[u + 1]; j++) {
    uint32_t p = ex->wrap_src[j];
    if (k != UINT32_MAX && sim_gpu(s, p) && s->lw->seg_of[p] == k)
      continue; /* stream order */
    cr_assert(sim_unit_done(s, p, r - 1),
              "%s: unit %u (replay %u) started before wrap-around source %u",
              s->what, u, r, p);
  }
}

static void sim_issue(sim *s, uint32_t k, uint32_t r) {
  const rp_exec *ex = s->ex;
  const rp_lower *lw = s->lw;
  const rp_seg *sg = &lw->segs[k];
  uint32_t inst = r * lw->nseg + k;
  s->issued[inst] = 1;
  s->need_off[inst] = s->nneed;
  for (uint32_t i = 0; i < sg->n; i++) {
    uint32_t u = lw->members[sg->first + i];
    const rp_unit *x = &ex->units[u];
    for (uint32_t j = 0; j < x->npred + ex->wrap_off[u + 1] - ex->wrap_off[u];
         j++) {
      uint32_t p = j < x->npred ? ex->preds[x->pred_off + j]
                                : ex->wrap_src[ex->wrap_off[u] + j - x->npred];
      if (!sim_gpu(s, p) || lw->segs[lw->seg_of[p]].lane == sg->lane)
        continue;
      int rr = (int)r;
      while (rr >= 0 && !s->issued[(uint32_t)rr * lw->nseg + lw->seg_of[p]])
        rr--;
      if (rr >= 0)
        s->need[s->nneed++] = (uint32_t)rr * lw->nseg + lw->seg_of[p];
    }
  }
  s->need_off[inst + 1] = s->nneed;
  s->q[sg->lane][s->qn[sg->lane]++] = inst;
}

static int sim_step_cpu(sim *s, uint32_t w) {
  const rp_exec *ex = s->ex;
  const rp_lane *l = &ex->lanes[w];
  if (!l->len || s->lane_r[w] == SIM_REPLAYS)
    return 0;
  uint32_t r = s->lane_r[w], u = l->units[s->lane_i[w]];
  const rp_unit *x = &ex->units[u];
  for (uint32_t j = 0; j < x->nwait; j++)
    if (!sim_wait_ok(s, &ex->waits[x->wait_off + j], r))
      return 0;
  if (x->kind == RP_UNIT_LAUNCH) {
    const rp_seg *sg = &s->lw->segs[s->lw->seg_of[u]];
    for (uint32_t j = 0; j < sg->nwait; j++)
      if (!sim_wait_ok(s, &s->lw->waits[sg->wait_off + j], r))
        return 0;
  }
  sim_check(s, u, UINT32_MAX, r);
  if (x->kind == RP_UNIT_LAUNCH)
    sim_issue(s, s->lw->seg_of[u], r);
  s->host_done[(size_t)r * ex->nunits + u] = 1;
  s->prog[w] = (uint64_t)r * l->len + s->lane_i[w] + 1;
  if (++s->lane_i[w] == l->len) {
    s->lane_i[w] = 0;
    s->lane_r[w]++;
  }
  return 1;
}

static int sim_step_gpu(sim *s, uint32_t g) {
  const rp_lower *lw = s->lw;
  if (s->qh[g] == s->qn[g])
    return 0;
  uint32_t inst = s->q[g][s->qh[g]];
  for (uint32_t j = s->need_off[inst]; j < s->need_off[inst + 1]; j++)
    if (!s->done[s->need[j]])
      return 0;
  uint32_t r = inst / lw->nseg, k = inst % lw->nseg;
  const rp_seg *sg = &lw->segs[k];
  for (uint32_t i = 0; i < sg->n; i++)
    sim_check(s, lw->members[sg->first + i], k, r);
  s->done[inst] = 1;
  s->qh[g]++;
  for (uint32_t i = 0; sg->needs_cb && i < sg->npub; i++) {
    const rp_seg_pub *p = &lw->pubs[sg->pub_off + i];
    uint64_t v = (uint64_t)r * s->ex->lanes[p->lane].len + p->end;
    if (v > s->prog[p->lane])
      s->prog[p->lane] = v;
  }
  return 1;
}

static void simulate(const rp_exec *ex, unsigned seed, const char *what) {
  static sim s;
  memset(&s, 0, sizeof s);
  s.ex = ex;
  s.lw = ex->lw;
  s.what = what;
  uint32_t L = ex->nlanes, nseg = ex->lw->nseg, ni = SIM_REPLAYS * nseg;
  cr_assert_leq(L, (uint32_t)SIM_LANES);
  size_t edges = ex->nunits; /* bound the instances' event waits */
  for (uint32_t u = 0; u < ex->nunits; u++)
    edges += ex->units[u].npred + ex->wrap_off[u + 1] - ex->wrap_off[u];
  s.host_done = calloc((size_t)SIM_REPLAYS * ex->nunits, 1);
  s.issued = calloc(ni, 1);
  s.done = calloc(ni, 1);
  s.need_off = calloc(ni + 1, sizeof *s.need_off);
  s.need = calloc(SIM_REPLAYS * edges, sizeof *s.need);
  cr_assert(s.host_done && s.issued && s.done && s.need_off && s.need);
  for (uint32_t w = 0; w < L; w++)
    cr_assert_not_null(s.q[w] = calloc(ni + 1, sizeof *s.q[w]));
  srand(seed);
  for (int moved = 1; moved;) {
    uint32_t start = (uint32_t)rand() % (2 * L);
    moved = 0;
    for (uint32_t t = 0; t < 2 * L && !moved; t++) {
      uint32_t a = (start + t) % (2 * L);
      moved = a >= L         ? sim_step_gpu(&s, a - L)
              : a < ex->ncpu ? sim_step_cpu(&s, a)
                             : 0;
    }
  }
  for (uint32_t w = 0; w < ex->ncpu; w++)
    cr_assert(!ex->lanes[w].len || s.lane_r[w] == SIM_REPLAYS,
              "%s: deadlock: lane %u stuck in replay %u at unit %u", what, w,
              s.lane_r[w], ex->lanes[w].units[s.lane_i[w]]);
  for (uint32_t i = 0; i < ni; i++)
    cr_assert(s.done[i], "%s: deadlock: segment %u of replay %u never ran",
              what, i % nseg, i / nseg);
  free(s.host_done);
  free(s.issued);
  free(s.done);
  free(s.need_off);
  free(s.need);
  for (uint32_t w = 0; w < L; w++)
    free(s.q[w]);
}

/* Random graphs of host and GPU ops (GPUs 3 and 4 on one device, 5 on
 * another), with accesses (wrap-around sources), a precondition and a
 * postcondition, placed three ways: every simulated interleaving of three
 * replays keeps every dependence and completes. */
Test(lower, random_plans_run_keep_every_dependence_and_complete) {
  rp_machine_desc m = {.cpus = 3, .ngpus = 3, .gpu_device = {0, 0, 1}};
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_task_desc d = {.name = "t.any", .cpu_fn = nop_task, .gpu_fn = nop_task};
  rp_task_id t;
  RP_CHECK(rp_task_register(rt, &d, &t));
  rp_inst in[6];
  rp_rect rect = {.dim = 1, .lo = {0}, .hi = {3}};
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_create(rt, 0, RP_F32, &rect, NULL, &in[i]));
  srand(99);
  uint32_t segs = 0;
  for (int trial = 0; trial < 300; trial++) {
    rp_graph *g;
    RP_CHECK(rp_graph_create(rt, &g));
    uint32_t n = 2 + (uint32_t)(rand() % 40);
    rp_port_id pre = 0, post = 0;
    int use_pre = rand() % 3 == 0, use_post = rand() % 2, bpre = 0, bpost = 0;
    if (use_pre)
      RP_CHECK(rp_graph_add_precondition(g, "in", &pre));
    if (use_post)
      RP_CHECK(rp_graph_add_postcondition(g, "out", &post));
    for (uint32_t i = 0; i < n; i++) {
      rp_access acc[2];
      uint32_t na = (uint32_t)(rand() % 3);
      for (uint32_t a = 0; a < na; a++)
        acc[a] = (rp_access){in[rand() % 6], rand() % 2 ? RP_READ : RP_WRITE,
                             RP_REDOP_NONE};
      if (na == 2 && acc[0].inst.id == acc[1].inst.id)
        na = 1;
      int pr = rand() % 10;
      rp_launch l = {.task = t,
                     .proc = pr < 3   ? (rp_proc)(rand() % 3)
                             : pr < 4 ? RP_PROC_ANY
                                      : (rp_proc)(3 + rand() % 3),
                     .accesses = acc,
                     .naccess = na,
                     .cost_ns = (uint64_t)(rand() % 4) * 3000};
      rp_op_id o;
      RP_CHECK(rp_graph_add_task(g, &l, &o));
      for (uint32_t j = 0, np = i ? (uint32_t)(rand() % 4) : 0; j < np; j++)
        RP_CHECK(rp_graph_add_edge(g, (uint32_t)rand() % i, o));
      if (use_pre && (rand() % 8 == 0 || (!bpre && i == n - 1))) {
        RP_CHECK(rp_graph_bind_precondition(g, pre, o));
        bpre = 1;
      }
      if (use_post && (rand() % 8 == 0 || (!bpost && i == n - 1))) {
        RP_CHECK(rp_graph_bind_postcondition(g, post, o));
        bpost = 1;
      }
    }
    rp_exec *ex;
    RP_CHECK(rp_instantiate(g, NULL, &ex));
    char what[64];
    if (ex->lw) {
      segs += ex->lw->nseg;
      uint32_t *seq = malloc(sizeof *seq * ex->nunits);
      cr_assert_not_null(seq);
      for (uint32_t lanes = 0; lanes < 3; lanes++) {
        if (lanes) { /* one worker, then list scheduling again */
          RP_CHECK(rp__place_plan(ex, 0, lanes == 1 ? 1 : ex->nlanes, seq));
          RP_CHECK(rp__place_finalize(ex, seq));
        }
        for (unsigned seed = 0; seed < 3; seed++) {
          snprintf(what, sizeof what, "graph %d, placement %u, seed %u", trial,
                   lanes, seed);
          simulate(ex, seed * 7919u + (unsigned)trial, what);
        }
      }
      free(seq);
    }
    RP_CHECK(rp_exec_destroy(ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  cr_assert_gt(segs, 500u, "the graphs made only %u segments", segs);
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_free(rt, in[i]));
  th_destroy(rt);
}
