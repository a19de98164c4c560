/* Graph files (rp_graph_save / rp_graph_load / rp_graph_instances) and
 * graph dumps (text, DOT, JSON). */
#include "helpers.h"

#include "capture/capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static rp_status noop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static void register_tasks(rp_runtime *rt) {
  const char *names[] = {"scale", "accum", "update"};
  for (size_t i = 0; i < 3; i++) {
    rp_task_id id;
    RP_CHECK(rp_task_register(
        rt, &(rp_task_desc){.name = names[i], .cpu_fn = noop}, &id));
  }
}

static rp_task_id task(rp_runtime *rt, const char *name) {
  rp_task_id id;
  RP_CHECK(rp_task_find(rt, name, &id));
  return id;
}

/* ---- files ---- */

static void make_tmpdir(void) {
  th_tmpdir_make("/tmp/rp_graphio_XXXXXX");
}

/* Some helpers serve only the tests that need cJSON. */
#define CJSON_ONLY __attribute__((unused))

CJSON_ONLY static void write_all(const char *path, const char *text,
                                 size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text, 1, len, f), len);
  fclose(f);
}

/* A copy of s with the first occurrence of from replaced by to. */
CJSON_ONLY static char *subst(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  cr_assert_not_null(at, "'%s' not in the text", from);
  size_t a = (size_t)(at - s), fl = strlen(from), tl = strlen(to);
  char *r = malloc(strlen(s) - fl + tl + 1);
  memcpy(r, s, a);
  memcpy(r + a, to, tl);
  strcpy(r + a + tl, at + fl);
  return r;
}

/* ---- the reference graph ---- */

typedef struct fixture {
  rp_runtime *rt;
  rp_inst a, b, c, d, e, f;
  rp_graph *g;
} fixture;

typedef struct scale_args {
  float alpha;
  uint32_t iter;
} scale_args;

static rp_inst mk(rp_runtime *rt, rp_dtype t, rp_rect r, const int64_t *st) {
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, 0, t, &r, st, &i));
  return i;
}

static rp_op_id add_copy(rp_graph *g, rp_inst src, rp_inst dst,
                         rp_copy_domain dom, rp_rect r, rp_redop redop,
                         uint32_t group) {
  rp_gop op;
  memset(&op, 0, sizeof op);
  op.kind = RP_OP_COPY;
  op.shards = 1;
  op.copy = (rp_copy){
      .src = src, .dst = dst, .domain = dom, .rect = r, .redop = redop};
  op.group = group;
  op.pop_kind = RP_POP_REPLICATE;
  rp_op_id id;
  RP_CHECK(rp__graph_append(g, &op, &id));
  return id;
}

/* Tasks with args, accesses (every privilege), an SPMD op with shard
 * processors, workspace and cost, interpolations, copies (rect domain,
 * reduction), a parallel-operator group, edges and ports. */
static void build(fixture *fx) {
  rp_runtime *rt = fx->rt = th_cpu_runtime(2);
  register_tasks(rt);
  int64_t strides[2] = {8, 1};
  fx->a = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  fx->b = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  fx->c = mk(rt, RP_F64, rp_rect_2d(4, 7, 0, 3), strides);
  fx->d = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  fx->e = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  fx->f = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  RP_CHECK(rp_graph_create(rt, &fx->g));
  rp_graph *g = fx->g;

  scale_args sa = {1.5f, 7};
  rp_access w = {fx->a, RP_WRITE, RP_REDOP_NONE};
  rp_interp ip = {0, offsetof(scale_args, iter), 4};
  rp_launch l0 = {.task = task(rt, "scale"),
                  .proc = 0,
                  .accesses = &w,
                  .naccess = 1,
                  .args = &sa,
                  .args_size = sizeof sa,
                  .interps = &ip,
                  .ninterp = 1};
  RP_CHECK(rp_graph_add_task(g, &l0, NULL));

  rp_access acc[2] = {{fx->a, RP_READ, RP_REDOP_NONE},
                      {fx->b, RP_REDUCE, RP_REDOP_SUM}};
  rp_proc sp[2] = {1, 0};
  uint64_t big = 0x123456789abcdefull; /* beyond 2^53 in the args */
  rp_interp shards = {8, RP_INTERP_SHARDS, 4};
  rp_launch l1 = {.task = task(rt, "accum"),
                  .proc = RP_PROC_ANY,
                  .accesses = acc,
                  .naccess = 2,
                  .args = &big,
                  .args_size = sizeof big,
                  .shards = 2,
                  .shard_procs = sp,
                  .workspace_bytes = 256,
                  .workspace_align = 128,
                  .cost_ns = (1ull << 60) + 1,
                  .interps = &shards,
                  .ninterp = 1};
  RP_CHECK(rp_graph_add_task(g, &l1, NULL));

  add_copy(g, fx->a, fx->d, RP_DOMAIN_RECT, rp_rect_1d(2, 5), RP_REDOP_NONE, 0);
  add_copy(g, fx->b, fx->e, RP_DOMAIN_INTERSECT, rp_rect_1d(0, 0),
           RP_REDOP_NONE, 1);
  add_copy(g, fx->b, fx->f, RP_DOMAIN_INTERSECT, rp_rect_1d(0, 0), RP_REDOP_SUM,
           1);

  rp_access rw = {fx->c, RP_RW, RP_REDOP_NONE};
  rp_launch l5 = {
      .task = task(rt, "update"), .proc = 1, .accesses = &rw, .naccess = 1};
  RP_CHECK(rp_graph_add_task(g, &l5, NULL));

  rp_op_id edges[][2] = {{0, 1}, {1, 2}, {1, 3}, {1, 4}, {2, 5}};
  for (size_t i = 0; i < 5; i++)
    RP_CHECK(rp_graph_add_edge(g, edges[i][0], edges[i][1]));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "batch", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, 0));
  RP_CHECK(rp_graph_bind_precondition(g, p, 5));
  /* legal but meaningful to DOT and SVG (quotes are outside the rule) */
  RP_CHECK(rp_graph_add_precondition(g, "unused <{quoted}>", &p));
  RP_CHECK(rp_graph_add_postcondition(g, "loss", &p));
  RP_CHECK(rp_graph_bind_postcondition(g, p, 5));
  RP_CHECK(rp_graph_bind_postcondition(g, p, 4));
}

static void teardown(fixture *fx) {
  RP_CHECK(rp_graph_destroy(fx->g));
  th_destroy(fx->rt);
}

/* ---- equivalence ---- */

/* Table position of inst in a graph's instance list. */
static uint32_t pos_of(const rp_inst *list, uint32_t n, rp_inst i) {
  for (uint32_t k = 0; k < n; k++)
    if (list[k].id == i.id)
      return k;
  cr_assert_fail("instance %#llx not in the table", (unsigned long long)i.id);
  return UINT32_MAX;
}

typedef struct inst_map {
  rp_inst a[16], b[16];
  uint32_t n;
} inst_map;

static void same_inst(const inst_map *m, rp_inst x, rp_inst y, rp_op_id op) {
  cr_assert_eq(pos_of(m->a, m->n, x), pos_of(m->b, m->n, y),
               "op %u: accesses map to different table entries", op);
}

static void same_task(const rp_graph *x, const rp_graph *y, rp_op_id id,
                      const inst_map *m) {
  const rp_gop *a = &x->ops[id], *b = &y->ops[id];
  cr_assert_str_eq(rp_task_name(x->rt, a->task), rp_task_name(y->rt, b->task),
                   "op %u", id);
  cr_assert_eq(a->proc, b->proc, "op %u", id);
  cr_assert_eq(a->shards, b->shards, "op %u", id);
  cr_assert_eq(!a->shard_procs, !b->shard_procs, "op %u", id);
  for (uint32_t s = 0; a->shard_procs && s < a->shards; s++)
    cr_assert_eq(a->shard_procs[s], b->shard_procs[s], "op %u shard %u", id, s);
  cr_assert_eq(a->ws_bytes, b->ws_bytes, "op %u", id);
  cr_assert_eq(a->ws_align, b->ws_align, "op %u", id);
  cr_assert_eq(a->cost_ns, b->cost_ns, "op %u", id);
  cr_assert_eq(a->args_size, b->args_size, "op %u", id);
  cr_assert(!a->args_size || !memcmp(a->args, b->args, a->args_size),
            "op %u: args differ", id);
  cr_assert_eq(a->nacc, b->nacc, "op %u", id);
  for (uint32_t k = 0; k < a->nacc; k++) {
    same_inst(m, a->acc[k].inst, b->acc[k].inst, id);
    cr_assert_eq(a->acc[k].priv, b->acc[k].priv, "op %u access %u", id, k);
    cr_assert_eq(a->acc[k].redop, b->acc[k].redop, "op %u access %u", id, k);
  }
  cr_assert_eq(a->ninterp, b->ninterp, "op %u", id);
  for (uint32_t k = 0; k < a->ninterp; k++)
    cr_assert(!memcmp(&a->interps[k], &b->interps[k], sizeof(rp_interp)),
              "op %u interp %u", id, k);
}

static void same_copy(const rp_graph *x, const rp_graph *y, rp_op_id id,
                      const inst_map *m) {
  const rp_gop *a = &x->ops[id], *b = &y->ops[id];
  same_inst(m, a->copy.src, b->copy.src, id);
  same_inst(m, a->copy.dst, b->copy.dst, id);
  cr_assert_eq(a->copy.domain, b->copy.domain, "op %u", id);
  cr_assert_eq(a->copy.redop, b->copy.redop, "op %u", id);
  if (a->copy.domain == RP_DOMAIN_RECT) {
    cr_assert_eq(a->copy.rect.dim, b->copy.rect.dim, "op %u", id);
    for (int d = 0; d < a->copy.rect.dim; d++)
      cr_assert(a->copy.rect.lo[d] == b->copy.rect.lo[d] &&
                    a->copy.rect.hi[d] == b->copy.rect.hi[d],
                "op %u rect dim %d", id, d);
  }
  cr_assert_eq(a->group, b->group, "op %u", id);
  if (a->group) {
    cr_assert_eq(a->pop_kind, b->pop_kind, "op %u", id);
    cr_assert_eq(a->pop_backward, b->pop_backward, "op %u", id);
  }
  cr_assert_eq(a->inserted, b->inserted, "op %u", id);
}

static void same_ports(const rp_gport *a, const rp_gport *b, uint32_t n) {
  for (uint32_t p = 0; p < n; p++) {
    cr_assert_str_eq(a[p].name, b[p].name);
    cr_assert_eq(a[p].nops, b[p].nops, "port '%s'", a[p].name);
    for (uint32_t k = 0; k < a[p].nops; k++)
      cr_assert_eq(a[p].ops[k], b[p].ops[k], "port '%s'", a[p].name);
  }
}

CJSON_ONLY static void assert_same(const rp_graph *x, const rp_graph *y) {
  inst_map m;
  uint32_t ny;
  RP_CHECK(rp_graph_instances(x, m.a, 16, &m.n));
  RP_CHECK(rp_graph_instances(y, m.b, 16, &ny));
  cr_assert_eq(m.n, ny, "instance tables differ in size");
  cr_assert_eq(x->nops, y->nops);
  for (rp_op_id id = 0; id < x->nops; id++) {
    cr_assert_eq(x->ops[id].kind, y->ops[id].kind, "op %u", id);
    if (x->ops[id].kind == RP_OP_TASK)
      same_task(x, y, id, &m);
    else
      same_copy(x, y, id, &m);
  }
  cr_assert_eq(x->nedges, y->nedges);
  for (uint32_t e = 0; e < x->nedges; e++)
    cr_assert(rp_graph_depends(y, x->edges[e].from, x->edges[e].to),
              "edge %u -> %u lost", x->edges[e].from, x->edges[e].to);
  cr_assert_eq(x->npre, y->npre);
  cr_assert_eq(x->npost, y->npost);
  same_ports(x->pre, y->pre, x->npre);
  same_ports(x->post, y->post, x->npost);
}

#ifdef REPRISE_HAVE_CJSON

/* ---- round trips ---- */

Test(graphio, round_trip_with_caller_instances) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(fx.g, path));
  rp_inst insts[16];
  uint32_t n;
  RP_CHECK(rp_graph_instances(fx.g, insts, 16, &n));
  cr_assert_eq(n, 6);
  rp_graph *h;
  RP_CHECK(rp_graph_load(fx.rt, path, insts, n, &h));
  assert_same(fx.g, h);
  /* the same graph over the same instances writes the same bytes */
  const char *again = th_tmp_path("again.json");
  RP_CHECK(rp_graph_save(h, again));
  char *t1 = th_read_all(path, NULL), *t2 = th_read_all(again, NULL);
  cr_assert_str_eq(t1, t2);
  free(t1);
  free(t2);
  RP_CHECK(rp_graph_destroy(h));
  teardown(&fx);
  th_tmpdir_remove();
}

Test(graphio, round_trip_with_loader_instances) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(fx.g, path));
  rp_graph *h;
  RP_CHECK(rp_graph_load(fx.rt, path, NULL, 0, &h));
  assert_same(fx.g, h);
  rp_inst orig[16], mine[16];
  uint32_t n, m;
  RP_CHECK(rp_graph_instances(fx.g, orig, 16, &n));
  RP_CHECK(rp_graph_instances(h, mine, 16, &m));
  cr_assert_eq(n, m);
  for (uint32_t i = 0; i < n; i++) {
    rp_instance_info a, b;
    RP_CHECK(rp_instance_query(fx.rt, orig[i], &a));
    RP_CHECK(rp_instance_query(fx.rt, mine[i], &b));
    cr_assert_neq(orig[i].id, mine[i].id, "entry %u was not allocated", i);
    cr_assert_eq(a.dtype, b.dtype, "entry %u", i);
    cr_assert_eq(a.bytes, b.bytes, "entry %u", i);
    cr_assert(!memcmp(&a.rect, &b.rect, sizeof a.rect), "entry %u", i);
    cr_assert(!memcmp(a.strides, b.strides, sizeof a.strides), "entry %u", i);
  }
  const char *again = th_tmp_path("again.json");
  RP_CHECK(rp_graph_save(h, again));
  char *t1 = th_read_all(path, NULL), *t2 = th_read_all(again, NULL);
  cr_assert_str_eq(t1, t2, "a file names no handles: same bytes");
  free(t1);
  free(t2);
  RP_CHECK(rp_graph_destroy(h));
  for (uint32_t i = 0; i < m; i++)
    RP_CHECK(rp_instance_free(fx.rt, mine[i]));
  teardown(&fx);
  th_tmpdir_remove();
}

Test(graphio, loaded_groups_do_not_collide_with_new_ones) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(fx.g, path));
  rp_inst insts[16];
  uint32_t n;
  RP_CHECK(rp_graph_instances(fx.g, insts, 16, &n));
  rp_graph *h;
  RP_CHECK(rp_graph_load(fx.rt, path, insts, n, &h));
  cr_assert_geq(h->ngroups, 1, "group 1 is taken after loading");
  RP_CHECK(rp_graph_destroy(h));
  teardown(&fx);
  th_tmpdir_remove();
}

Test(graphio, parallel_operator_round_trip) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst whole = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  rp_inst parts[2] = {mk(rt, RP_F32, rp_rect_1d(0, 7), NULL),
                      mk(rt, RP_F32, rp_rect_1d(8, 15), NULL)};
  rp_graph *g, *h;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_parallel_op op = {.kind = RP_POP_REPARTITION,
                       .whole = whole,
                       .parts = parts,
                       .nparts = 2,
                       .dim = 0};
  rp_op_id first;
  uint32_t count;
  RP_CHECK(rp_graph_add_parallel(g, &op, &first, &count));
  const char *path = th_tmp_path("pop.json");
  RP_CHECK(rp_graph_save(g, path));
  rp_inst insts[8];
  uint32_t n;
  RP_CHECK(rp_graph_instances(g, insts, 8, &n));
  RP_CHECK(rp_graph_load(rt, path, insts, n, &h));
  assert_same(g, h);
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  th_tmpdir_remove();
}

Test(graphio, instances_lists_in_first_use_order) {
  fixture fx;
  build(&fx);
  uint32_t n;
  RP_CHECK(rp_graph_instances(fx.g, NULL, 0, &n));
  cr_assert_eq(n, 6);
  rp_inst l[6];
  RP_EXPECT(rp_graph_instances(fx.g, l, 2, &n), RP_ERANGE);
  cr_assert_eq(n, 6);
  cr_assert_eq(l[0].id, fx.a.id);
  cr_assert_eq(l[1].id, fx.b.id, "op 0 uses a, op 1 a and b");
  RP_CHECK(rp_graph_instances(fx.g, l, 6, &n));
  rp_inst want[6] = {fx.a, fx.b, fx.d, fx.e, fx.f, fx.c};
  for (int i = 0; i < 6; i++)
    cr_assert_eq(l[i].id, want[i].id, "entry %d", i);
  RP_EXPECT(rp_graph_instances(NULL, l, 6, &n), RP_EINVAL);
  RP_EXPECT(rp_graph_instances(fx.g, NULL, 6, &n), RP_EINVAL);
  teardown(&fx);
}

/* ---- saving ---- */

Test(graphio, save_errors) {
  fixture fx;
  build(&fx);
  RP_EXPECT(rp_graph_save(NULL, "/tmp/x"), RP_EINVAL);
  RP_EXPECT(rp_graph_save(fx.g, NULL), RP_EINVAL);
  RP_EXPECT(rp_graph_save(fx.g, "/nonexistent-dir/g.json"), RP_EIO);
  RP_CHECK(rp_instance_free(fx.rt, fx.e));
  make_tmpdir();
  RP_EXPECT(rp_graph_save(fx.g, th_tmp_path("stale.json")), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "instance table entry 3"), "%s",
            rp_error_detail());
  cr_assert_neq(access(th_tmp_path("stale.json"), F_OK), 0, "no file left");
  th_tmpdir_remove();
  teardown(&fx);
}

/* A cycle longer than the error detail holds: the detail lists it from
 * its first op as far as there is room, says how many ops it leaves out
 * and closes on the first op, so every arrow it shows is an edge (a cut
 * list closed on the first op claimed an edge the graph does not have). */
Test(graphio, a_long_cycle_is_named_without_false_edges) {
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  enum { N = 60 };
  rp_launch l = {.task = task(rt, "scale"), .proc = 0};
  for (uint32_t i = 0; i < N; i++) {
    rp_op_id id;
    char name[RP_NAME_MAX + 1];
    snprintf(name, sizeof name, "block%u.a_long_name_for_an_op_of_the_cycle",
             i);
    RP_CHECK(rp_graph_add_task(g, &l, &id));
    RP_CHECK(rp_graph_set_op_name(g, id, name));
  }
  for (uint32_t i = 0; i < N; i++) /* 0 -> 1 -> ... -> N-1 -> 0 */
    RP_CHECK(rp_graph_add_edge(g, i, (i + 1) % N));
  make_tmpdir();
  RP_EXPECT(rp_graph_save(g, th_tmp_path("cycle.json")), RP_ECYCLE);
  const char *d = rp_error_detail();
  const char *at = strstr(d, "graph has a cycle: ");
  cr_assert_not_null(at, "%s", d);
  /* the ops in order; a "... (K more ops)" between two of them */
  uint32_t ops[N + 1], n = 0, gap_after = UINT32_MAX;
  unsigned more = 0;
  const char *dots = strstr(at, "... (");
  if (dots)
    cr_assert_eq(sscanf(dots, "... (%u more ops) -> ", &more), 1, "%s", d);
  for (const char *p = at; (p = strstr(p, "op ")) != NULL; p += 3) {
    unsigned v;
    if (sscanf(p, "op %u '", &v) != 1)
      continue;
    cr_assert_lt(n, N + 1, "%s", d);
    if (dots && p > dots && gap_after == UINT32_MAX)
      gap_after = n - 1;
    ops[n++] = v;
  }
  cr_assert_gt(more, 0, "a cycle of %d long labels does not fit: %s", N, d);
  cr_assert_geq(n, 3, "%s", d);
  cr_assert_eq(ops[0], ops[n - 1], "the cycle closes on its first op: %s", d);
  cr_assert_eq(n - 1 + more, N, "listed and left out make the cycle: %s", d);
  for (uint32_t i = 0; i + 1 < n; i++)
    if (i != gap_after)
      cr_assert_eq(ops[i + 1], (ops[i] + 1) % N,
                   "op %u -> op %u is no edge of the graph: %s", ops[i],
                   ops[i + 1], d);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* The loader refuses cycles, so save does too: no file that cannot load
 * back, and an existing file at the path is left as it was. */
Test(graphio, save_refuses_a_cycle_and_keeps_the_old_file) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(fx.g, path));
  cr_assert(!rp_graph_depends(fx.g, 0, 0), "no cycle yet");
  RP_CHECK(rp_graph_add_edge(fx.g, 1, 0));
  RP_CHECK(rp_graph_add_edge(fx.g, 0, 1));
  uint32_t edges = rp_graph_edge_count(fx.g);
  RP_CHECK(rp_graph_add_edge(fx.g, 0, 1)); /* present: not added again */
  cr_assert_eq(rp_graph_edge_count(fx.g), edges);
  /* on the cycle an op depends on itself */
  cr_assert(rp_graph_depends(fx.g, 0, 0) && rp_graph_depends(fx.g, 1, 1));
  cr_assert(!rp_graph_depends(fx.g, 0, 999));
  cr_assert(strstr(rp_error_detail(), "rp_graph_depends: op 999 out of range"),
            "%s", rp_error_detail());
  cr_assert_null(rp_graph_op_name(fx.g, 999));
  cr_assert(strstr(rp_error_detail(), "rp_graph_op_name: op 999 out of range"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_graph_save(fx.g, path), RP_ECYCLE);
  cr_assert(strstr(rp_error_detail(), "rp_graph_save: graph has a cycle: "),
            "%s", rp_error_detail());
  RP_EXPECT(rp_graph_save(fx.g, th_tmp_path("new.json")), RP_ECYCLE);
  cr_assert_neq(access(th_tmp_path("new.json"), F_OK), 0, "no file left");
  rp_inst insts[16];
  uint32_t n;
  RP_CHECK(rp_graph_instances(fx.g, insts, 16, &n));
  rp_graph *h;
  RP_CHECK(rp_graph_load(fx.rt, path, insts, n, &h)); /* the first save */
  RP_CHECK(rp_graph_destroy(h));
  teardown(&fx);
  th_tmpdir_remove();
}

/* The loader's limits hold for what save and the JSON dump write: a port
 * of 4097 ops is refused (RP_ERANGE naming the limit, no file) and one of
 * 4096 saves and loads back. */
Test(graphio, save_keeps_to_the_loaders_limits) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_inst x = mk(rt, RP_F32, rp_rect_1d(0, 3), NULL);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_port_id p;
  RP_CHECK(rp_graph_add_postcondition(g, "done", &p));
  rp_access r = {x, RP_READ, RP_REDOP_NONE};
  rp_launch l = {.task = task(rt, "accum"), .accesses = &r, .naccess = 1};
  for (int i = 0; i < 4096; i++) {
    rp_op_id o;
    RP_CHECK(rp_graph_add_task(g, &l, &o));
    RP_CHECK(rp_graph_bind_postcondition(g, p, o));
  }
  const char *path = th_tmp_path("port.json");
  RP_CHECK(rp_graph_save(g, path)); /* at the limit: written, loads */
  rp_graph *h;
  RP_CHECK(rp_graph_load(rt, path, &x, 1, &h));
  RP_CHECK(rp_graph_destroy(h));
  rp_op_id o;
  RP_CHECK(rp_graph_add_task(g, &l, &o));
  RP_CHECK(rp_graph_bind_postcondition(g, p, o));
  const char *over = th_tmp_path("over.json");
  RP_EXPECT(rp_graph_save(g, over), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "the graph has 4097 ops bound to one "
                                      "port, more than a graph file may "
                                      "hold (4096"),
            "%s", rp_error_detail());
  cr_assert_neq(access(over, F_OK), 0, "a file was written");
  FILE *f = fopen(th_tmp_path("dump.json"), "w");
  cr_assert_not_null(f);
  RP_EXPECT(rp_graph_dump(g, f, RP_DUMP_JSON), RP_ERANGE);
  fclose(f);
  f = fopen("/dev/null", "w"); /* the text dump has no such limit */
  cr_assert_not_null(f);
  RP_CHECK(rp_graph_dump(g, f, RP_DUMP_TEXT));
  fclose(f);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* Ports each way: 4096 save and load back; a 4097th is refused by save
 * and the JSON dump (RP_ERANGE naming the limit, no file), and a file of
 * 4097 is refused by the loader naming the key, before any port is added
 * (the builder checks each port's name against every earlier one). */
Test(graphio, ports_keep_to_the_loaders_limit) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_inst x = mk(rt, RP_F32, rp_rect_1d(0, 3), NULL);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access r = {x, RP_READ, RP_REDOP_NONE};
  rp_launch l = {.task = task(rt, "accum"), .accesses = &r, .naccess = 1};
  RP_CHECK(rp_graph_add_task(g, &l, NULL));
  char name[32];
  rp_port_id p;
  for (int i = 0; i < 4096; i++) {
    snprintf(name, sizeof name, "in%d", i);
    RP_CHECK(rp_graph_add_precondition(g, name, &p));
    snprintf(name, sizeof name, "out%d", i);
    RP_CHECK(rp_graph_add_postcondition(g, name, &p));
  }
  const char *path = th_tmp_path("ports.json");
  RP_CHECK(rp_graph_save(g, path)); /* at the limit: written, loads */
  rp_graph *h;
  RP_CHECK(rp_graph_load(rt, path, &x, 1, &h));
  cr_assert_eq(h->npre, 4096u);
  cr_assert_eq(h->npost, 4096u);
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_graph_add_postcondition(g, "one.more", &p));
  const char *over = th_tmp_path("over.json");
  RP_EXPECT(rp_graph_save(g, over), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "the graph has 4097 postconditions, "
                                      "more than a graph file may hold "
                                      "(4096"),
            "%s", rp_error_detail());
  cr_assert_neq(access(over, F_OK), 0, "a file was written");
  /* the file at the limit with a 4097th precondition */
  char *text = th_read_all(path, NULL);
  char *edited = subst(text, "\"preconditions\":\t[{",
                       "\"preconditions\":\t[{\"name\": \"in.extra\", "
                       "\"ops\": []}, {");
  char *sum = strstr(edited, "\"checksum\"");
  cr_assert_not_null(sum);
  memset(sum, ' ', (size_t)(strchr(sum, ',') + 1 - sum)); /* no checksum */
  rp_graph *bad = NULL;
  RP_EXPECT(rp_graph_load_mem(rt, edited, strlen(edited), &x, 1, 0, &bad),
            RP_ERANGE);
  cr_assert(
      strstr(rp_error_detail(), "graph.preconditions: more than 4096 entries"),
      "%s", rp_error_detail());
  cr_assert_null(bad);
  free(edited);
  free(text);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* A graph whose file would pass the loader's value limit by count alone is
 * refused before its document is built: 1024 ops of 1024 reads each need
 * at least 1024 * (13 + 4 * 1024) values, over 2^22. */
Test(graphio, save_refuses_an_oversized_graph_by_its_counts) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_inst x = mk(rt, RP_F32, rp_rect_1d(0, 3), NULL);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  static rp_access r[1024];
  for (int a = 0; a < 1024; a++)
    r[a] = (rp_access){x, RP_READ, RP_REDOP_NONE};
  rp_launch l = {.task = task(rt, "accum"), .accesses = r, .naccess = 1024};
  for (int i = 0; i < 1024; i++) {
    rp_op_id o;
    RP_CHECK(rp_graph_add_task(g, &l, &o));
  }
  const char *over = th_tmp_path("over.json");
  RP_EXPECT(rp_graph_save(g, over), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_graph_save: the graph's file would "
                                      "have at least 4207616 JSON values, "
                                      "more than a graph file may hold "
                                      "(4194304"),
            "%s", rp_error_detail());
  cr_assert_neq(access(over, F_OK), 0, "a file was written");
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* A graph whose document passes the loader's limits by the graph's counts
 * but not once built: 1025 ops of 4096 shards each name every shard's
 * processor, 4198400 values in shard_procs alone (4213797 in all), over 2^22.
 * Saving and the JSON dump refuse it naming the call, and write nothing. */
Test(graphio, save_refuses_a_graph_whose_document_has_too_many_values) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  static rp_proc sp[RP_MAX_SHARDS];
  rp_launch l = {
      .task = task(rt, "scale"), .shards = RP_MAX_SHARDS, .shard_procs = sp};
  for (int i = 0; i < 1025; i++) {
    rp_op_id o;
    RP_CHECK(rp_graph_add_task(g, &l, &o));
  }
  const char *over = th_tmp_path("over.json");
  RP_EXPECT(rp_graph_save(g, over), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(),
                   "rp_graph_save: the graph has 4213797 JSON values, more "
                   "than a graph file may hold (4194304: the loader's limit), "
                   "so nothing is written"),
            "%s", rp_error_detail());
  cr_assert_neq(access(over, F_OK), 0, "a file was written");
  FILE *f = tmpfile();
  cr_assert_not_null(f);
  rp_error_set(RP_EINVAL, "stale");
  RP_EXPECT(rp_graph_dump(g, f, RP_DUMP_JSON), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_graph_dump: the graph has "), "%s",
            rp_error_detail());
  cr_assert_eq(ftell(f), 0L, "the dump wrote %ld bytes", ftell(f));
  fclose(f);
  cr_assert_eq(rp_graph_op_count(g), 1025u);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* A graph whose file would be over RP_GRAPH_FILE_MAX bytes within the
 * value limit: 33 ops of 1 MiB arguments each, written as hex (2 bytes a
 * byte). Refused naming the call and the size, nothing written. */
Test(graphio, save_refuses_a_graph_whose_file_would_be_over_the_size_limit) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  size_t big = 1u << 20;
  unsigned char *args = calloc(big, 1);
  cr_assert_not_null(args);
  rp_launch l = {.task = task(rt, "scale"), .args = args, .args_size = big};
  for (int i = 0; i < 33; i++) {
    rp_op_id o;
    RP_CHECK(rp_graph_add_task(g, &l, &o));
  }
  free(args);
  const char *over = th_tmp_path("over.json");
  rp_error_set(RP_EINVAL, "stale");
  RP_EXPECT(rp_graph_save(g, over), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_graph_save: the graph file would "
                                      "be "),
            "%s", rp_error_detail());
  cr_assert(strstr(rp_error_detail(), " bytes (the limit is 67108864)"), "%s",
            rp_error_detail());
  cr_assert_neq(access(over, F_OK), 0, "a file was written");
  FILE *f = tmpfile();
  cr_assert_not_null(f);
  RP_EXPECT(rp_graph_dump(g, f, RP_DUMP_JSON), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_graph_dump: the graph file would "
                                      "be "),
            "%s", rp_error_detail());
  cr_assert_eq(ftell(f), 0L, "the dump wrote %ld bytes", ftell(f));
  fclose(f);
  cr_assert_eq(rp_graph_op_count(g), 33u);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  th_tmpdir_remove();
}

Test(graphio, file_is_versioned_and_checksummed) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  RP_CHECK(rp_graph_save(fx.g, th_tmp_path("g.json")));
  char *t = th_read_all(th_tmp_path("g.json"), NULL);
  cr_assert(strstr(t, "\"format\":\t\"reprise-graph\""), "%.200s", t);
  cr_assert(strstr(t, "\"version\":\t1"));
  cr_assert(strstr(t, "\"checksum\":\t\"fnv1a64:"));
  cr_assert(strstr(t, "\"cost_ns\":\t\"1152921504606846977\""),
            "integers beyond 2^53 are strings");
  free(t);
  mode_t mask = umask(0);
  umask(mask);
  struct stat sb;
  cr_assert_eq(stat(th_tmp_path("g.json"), &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0666 & ~mask, "mode %o",
               (unsigned)(sb.st_mode & 0777));
  teardown(&fx);
  th_tmpdir_remove();
}

/* ---- corrupt input ---- */

/* Two ops over one instance; no checksum (the loader allows that, so the
 * cases below can edit it). */
static const char *MINI =
    "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {\n"
    " \"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1,"
    " \"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], \"strides\": [1]}],\n"
    " \"ops\": [\n"
    "  {\"id\": 0, \"kind\": \"task\", \"task\": \"scale\", \"proc\": 0,"
    " \"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0,"
    " \"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"0000c03f\","
    " \"accesses\": [{\"inst\": 0, \"priv\": \"W\", \"redop\": \"none\"}],"
    " \"interps\": []},\n"
    "  {\"id\": 1, \"kind\": \"task\", \"task\": \"accum\", \"proc\": \"any\","
    " \"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0,"
    " \"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"\","
    " \"accesses\": [{\"inst\": 0, \"priv\": \"R\", \"redop\": \"none\"}],"
    " \"interps\": []}],\n"
    " \"edges\": [[0, 1]],\n"
    " \"preconditions\": [{\"name\": \"in\", \"ops\": [0]}],\n"
    " \"postconditions\": [{\"name\": \"out\", \"ops\": [1]}]}}\n";

/* The detail of the last load_text* call (later calls in the helper
 * overwrite the thread's rp_error_detail). */
static char detail[1024];
static const char *why(void) {
  return detail;
}

#define LOAD_EXPECT(call, want)                                                \
  do {                                                                         \
    rp_status st_ = (call);                                                    \
    cr_assert_eq(st_, (want), "%s -> %s, expected %s (%s)", #call,             \
                 rp_status_name(st_), rp_status_name(want), why());            \
  } while (0)

typedef struct env {
  rp_runtime *rt;
  rp_inst next; /* the handle the loader's first instance will get */
} env;

/* The engine reuses the last freed slot first: create and free a probe,
 * and the next instance created is the probe's slot, one generation on. */
static void reprobe(env *e) {
  rp_inst probe = mk(e->rt, RP_F32, rp_rect_1d(0, 0), NULL);
  RP_CHECK(rp_instance_free(e->rt, probe));
  e->next.id = probe.id + (1ull << 32);
}

static env env_make(void) {
  env e;
  e.rt = th_cpu_runtime(1);
  register_tasks(e.rt);
  reprobe(&e);
  return e;
}

static rp_status load_text_n(env *e, const char *text, size_t len,
                             const rp_inst *insts, uint32_t n) {
  reprobe(e); /* a failed load before this one moved the slot on */
  make_tmpdir();
  const char *path = th_tmp_path("in.json");
  write_all(path, text, len);
  rp_graph *g = (rp_graph *)(uintptr_t)0x1;
  rp_status st = rp_graph_load(e->rt, path, insts, n, &g);
  snprintf(detail, sizeof detail, "%s", rp_error_detail());
  th_tmpdir_remove();
  if (st == RP_OK) {
    RP_CHECK(rp_graph_destroy(g));
    return st;
  }
  cr_assert_eq((uintptr_t)g, 0x1, "*out untouched on failure");
  /* nothing the loader allocated survives the failure */
  rp_instance_info info;
  cr_assert_eq(rp_instance_query(e->rt, e->next, &info), RP_ESTALE,
               "the loader leaked an instance");
  return st;
}

static rp_status load_text(env *e, const char *text) {
  return load_text_n(e, text, strlen(text), NULL, 0);
}

/* Loads MINI with `from` replaced by `to`; expects `want`. */
static void expect_edit(const char *from, const char *to, rp_status want) {
  env e = env_make();
  char *t = subst(MINI, from, to);
  rp_status st = load_text(&e, t);
  cr_assert_eq(st, want, "'%s' -> '%s': %s, expected %s (%s)", from, to,
               rp_status_name(st), rp_status_name(want), why());
  free(t);
  th_destroy(e.rt);
}

Test(graphio_corrupt, mini_file_loads_and_allocates) {
  env e = env_make();
  make_tmpdir();
  write_all(th_tmp_path("m.json"), MINI, strlen(MINI));
  rp_graph *g;
  RP_CHECK(rp_graph_load(e.rt, th_tmp_path("m.json"), NULL, 0, &g));
  th_tmpdir_remove();
  rp_inst l[2];
  uint32_t n;
  RP_CHECK(rp_graph_instances(g, l, 2, &n));
  cr_assert_eq(n, 1);
  cr_assert_eq(l[0].id, e.next.id, "the probe predicts the loader's handle");
  cr_assert_eq(rp_graph_op_count(g), 2);
  cr_assert_eq(rp_graph_edge_count(g), 1);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(e.rt, l[0]));
  th_destroy(e.rt);
}

Test(graphio_corrupt, not_json) {
  env e = env_make();
  LOAD_EXPECT(load_text(&e, "hello, world"), RP_EFORMAT);
  LOAD_EXPECT(load_text(&e, ""), RP_EFORMAT);
  cr_assert(strstr(why(), "an empty file"), "%s", why());
  LOAD_EXPECT(load_text(&e, "[1, 2, 3]"), RP_EFORMAT);
  char *t = subst(MINI, "}}\n", "}} trailing");
  LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
  cr_assert(strstr(why(), "after the document"), "%s", why());
  free(t);
  LOAD_EXPECT(load_text_n(&e, MINI, 20, NULL, 0), RP_EFORMAT);
  char nul[] = "{\"format\": \0\"x\"}";
  LOAD_EXPECT(load_text_n(&e, nul, sizeof nul - 1, NULL, 0), RP_EFORMAT);
  cr_assert(strstr(why(), "a NUL byte at byte 11"), "%s", why());
  th_destroy(e.rt);
}

Test(graphio_corrupt, truncated_anywhere) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  RP_CHECK(rp_graph_save(fx.g, th_tmp_path("g.json")));
  size_t len;
  char *t = th_read_all(th_tmp_path("g.json"), &len);
  th_tmpdir_remove();
  env e = env_make();
  for (size_t cut = 0; cut + 2 < len; cut += 1 + cut / 8) {
    rp_status st = load_text_n(&e, t, cut, NULL, 0);
    cr_assert_eq(st, RP_EFORMAT, "cut at %zu: %s (%s)", cut, rp_status_name(st),
                 why());
    /* inside a string, literal, number or between tokens: all say so */
    char want[96];
    snprintf(want, sizeof want, "not JSON: the text ends early at byte %zu",
             cut);
    cr_assert(strstr(why(), cut ? want : "an empty file"), "cut at %zu: %s",
              cut, why());
  }
  LOAD_EXPECT(load_text_n(&e, t, len / 2, NULL, 0), RP_EFORMAT);
  cr_assert(strstr(why(), "truncated"), "%s", why());
  free(t);
  th_destroy(e.rt);
  teardown(&fx);
}

/* A cut inside a string, literal or exponent ends the text early; a bad
 * byte before the end stays a syntax error (fuzz findings: a cut inside a
 * string read as a syntax error at the string's quote). */
Test(graphio_corrupt, parse_errors_tell_a_cut_from_a_syntax_error) {
  env e = env_make();
  const char *cut[] = {"{\"format\": \"reprise-gr",
                       "{\"format\": \"a\\",
                       "{\"format\": \"\\",     /* cut at an escape */
                       "{\"format\": \"\\nabc", /* cut after one */
                       "{\"format\": [nul",
                       "{\"format\": [1.5e-",
                       "{\"format\": [-",
                       "{\"format\": [1, \n",
                       "1e",
                       "2.5E-"}; /* a bare number cut: parses short */
  for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
    LOAD_EXPECT(load_text(&e, cut[i]), RP_EFORMAT);
    char want[96];
    snprintf(want, sizeof want,
             "not JSON: the text ends early at byte %zu (truncated file?)",
             strlen(cut[i]));
    cr_assert(strstr(why(), want), "'%s': %s", cut[i], why());
  }
  const char *bad[][2] = {
      {"{\"format\": x, \"a", "syntax error at byte 11"},
      {"{\"format\": [1 tr", "syntax error at byte 14"},
      {"{\"format\": [truex", "syntax error at byte 16"},
      {"{\"format\": [1 -", "syntax error at byte 14"},
      /* white space alone is no document cut short */
      {" \n\t ", "not JSON: only white space (4 bytes)"},
      /* a backslash outside a string is no escape */
      {"[1, \\\"x\\\"]", "syntax error at byte 4"},
      /* an escape cJSON cannot read, named as one */
      {"{\"format\": \"x\\ud800y\"}", "a bad escape at byte 13"},
      {"{\"format\": \"x\\qy\"}", "a bad escape at byte 13"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    LOAD_EXPECT(load_text(&e, bad[i][0]), RP_EFORMAT);
    cr_assert(strstr(why(), bad[i][1]), "'%s': %s", bad[i][0], why());
  }
  th_destroy(e.rt);
}

/* Numbers are JSON's: cJSON also reads a leading zero, a point without
 * digits after it and more, so a flipped byte ("47" -> "047") loaded
 * (fuzz finding). Refused where they stand, the byte named. */
Test(graphio_corrupt, malformed_numbers_are_syntax_errors) {
  const char *bad[] = {"047", "00", "-01",   "47.",   "1.e5", "1e", "1e+",
                       "--1", "-",  "1.5.2", "1e5e5", "+1",   ".5"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    env e = env_make();
    char to[64];
    snprintf(to, sizeof to, "\"cost_ns\": %s", bad[i]);
    char *t = subst(MINI, "\"cost_ns\": 0", to);
    LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
    cr_assert(strstr(why(), "not JSON: "), "'%s': %s", bad[i], why());
    if (bad[i][0] != '+' && bad[i][0] != '.') /* not a number's start */
      cr_assert(strstr(why(), "a malformed number at byte"), "'%s': %s", bad[i],
                why());
    free(t);
    th_destroy(e.rt);
  }
  /* a '-' or digit where no value starts is the parse's syntax error, at
   * its own byte (not "a malformed number" inside a file that is not
   * JSON) */
  env e = env_make();
  LOAD_EXPECT(load_text(&e, "<svg stroke-width=\"1\">"), RP_EFORMAT);
  cr_assert(strstr(why(), "not JSON: syntax error at byte 0"), "%s", why());
  th_destroy(e.rt);
  /* JSON's own forms still load */
  expect_edit("\"cost_ns\": 0", "\"cost_ns\": 0e0", RP_OK);
  expect_edit("\"cost_ns\": 0", "\"cost_ns\": 1.0E+3", RP_OK);
}

/* cJSON parses 1000 levels and calls more a syntax error: the scan before
 * the parse says what it is (brackets inside strings do not count). */
Test(graphio_corrupt, nesting_deeper_than_cjson_parses_is_named) {
  env e = env_make();
  char *t = malloc(2 * 1001 + 1);
  for (int depth = 1000; depth <= 1001; depth++) {
    memset(t, '[', (size_t)depth);
    memset(t + depth, ']', (size_t)depth);
    t[2 * depth] = 0;
    if (depth == 1000) { /* parses: not a graph file */
      LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
      cr_assert(strstr(why(), "not a reprise graph file"), "%s", why());
    } else {
      LOAD_EXPECT(load_text(&e, t), RP_ERANGE);
      cr_assert(strstr(why(), "nested deeper than 1000 levels at byte 1000"),
                "%s", why());
    }
  }
  free(t);
  char *deep = malloc(4000);
  snprintf(deep, 4000, "{\"format\": \"%01500d\"}", 0);
  memset(deep + 12, '[', 1500);
  LOAD_EXPECT(load_text(&e, deep), RP_EFORMAT);
  cr_assert(strstr(why(), "not a reprise graph file"), "%s", why());
  free(deep);
  th_destroy(e.rt);
}

/* cJSON skips every byte up to 0x20 between tokens; JSON allows only
 * space, tab, LF and CR there. */
Test(graphio_corrupt, control_bytes_between_tokens_are_refused) {
  env e = env_make();
  const char ws[] = {0x01, 0x0b, 0x0c, 0x1f};
  for (size_t i = 0; i < sizeof ws; i++) {
    char to[16], want[64];
    snprintf(to, sizeof to, "%c\"version\"", ws[i]);
    char *t = subst(MINI, " \"version\"", to);
    LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
    snprintf(want, sizeof want, "not JSON: control byte 0x%02x at byte 27",
             (unsigned)ws[i]);
    cr_assert(strstr(why(), want), "%s", why());
    free(t);
  }
  char *t = subst(MINI, "\"version\": 1,", "\"version\": 1,\t\r\n");
  LOAD_EXPECT(load_text(&e, t), RP_OK);
  free(t);
  th_destroy(e.rt);
}

Test(graphio_corrupt, wrong_format_and_version) {
  expect_edit("reprise-graph", "other-graph", RP_EFORMAT);
  expect_edit("\"version\": 1", "\"version\": 2", RP_EVERSION);
  expect_edit("\"version\": 1", "\"version\": 0", RP_EVERSION);
  /* a newer version is reported as such even with keys we do not know */
  expect_edit("\"version\": 1,", "\"version\": 9, \"future\": 1,", RP_EVERSION);
  expect_edit("\"version\": 1,", "", RP_EFORMAT);
  expect_edit("\"version\": 1", "\"version\": 1.5", RP_EFORMAT);
}

/* expect_edit, and the detail holds `says`. */
static void expect_said(const char *from, const char *to, rp_status want,
                        const char *says) {
  expect_edit(from, to, want);
  env e = env_make();
  char *t = subst(MINI, from, to);
  (void)load_text(&e, t);
  cr_assert(strstr(why(), says), "'%s' -> '%s': no '%s' in '%s'", from, to,
            says, why());
  free(t);
  th_destroy(e.rt);
}

/* An integer out of a small range names the range (the advice to write
 * integers beyond 2^53 as strings is for fields that can hold them), 0
 * where at least 1 is needed included; a top-level key has no leading
 * dot. */
Test(graphio_corrupt, integers_out_of_range_name_the_range) {
  expect_said("\"version\": 1", "\"version\": 1e300", RP_ERANGE,
              "version: out of range [0, 2147483647]");
  expect_said("\"version\": 1", "\"version\": -1", RP_ERANGE,
              "version: -1 out of range [0, 2147483647]");
  expect_said("\"proc\": 0,", "\"proc\": 1e300,", RP_ERANGE,
              "graph.ops[0].proc: out of range [0, ");
  expect_said("\"proc\": 0, \"shards\": 1,", "\"proc\": 0, \"shards\": 0,",
              RP_ERANGE, "graph.ops[0].shards: 0 out of range [1, 4096]");
}

Test(graphio_corrupt, checksum_catches_any_changed_value) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  RP_CHECK(rp_graph_save(fx.g, th_tmp_path("g.json")));
  char *t = th_read_all(th_tmp_path("g.json"), NULL);
  th_tmpdir_remove(); /* load_text_n makes its own */
  rp_inst insts[16];
  uint32_t n;
  RP_CHECK(rp_graph_instances(fx.g, insts, 16, &n));
  env e = {fx.rt, {0}};
  const char *edits[][2] = {{"\"shards\":\t2", "\"shards\":\t1"},
                            {"\"task\":\t\"update\"", "\"task\":\t\"scale\""},
                            {"\"name\":\t\"loss\"", "\"name\":\t\"lost\""},
                            {"\"priv\":\t\"RW\"", "\"priv\":\t\"W\""}};
  for (size_t i = 0; i < 4; i++) {
    char *c = subst(t, edits[i][0], edits[i][1]);
    rp_status st = load_text_n(&e, c, strlen(c), insts, n);
    cr_assert_eq(st, RP_ECHECKSUM, "edit %zu: %s (%s)", i, rp_status_name(st),
                 why());
    free(c);
  }
  /* whitespace is not content */
  char *c = subst(t, "\"graph\":", "\"graph\":  \n ");
  LOAD_EXPECT(load_text_n(&e, c, strlen(c), insts, n), RP_OK);
  free(c);
  c = subst(t, "fnv1a64:", "fnv1a64:zz");
  LOAD_EXPECT(load_text_n(&e, c, strlen(c), insts, n), RP_EFORMAT);
  free(c);
  free(t);
  teardown(&fx);
}

Test(graphio_corrupt, schema_errors_name_the_path) {
  expect_edit("\"proc\": 0", "\"proc\": true", RP_EFORMAT);
  expect_edit("\"proc\": 0", "\"proc\": 0, \"colour\": 1", RP_EFORMAT);
  expect_edit("\"proc\": 0,", "", RP_EFORMAT);
  expect_edit("\"proc\": 0", "\"proc\": 0, \"proc\": 1", RP_EFORMAT);
  expect_edit("\"kind\": \"task\"", "\"kind\": \"dance\"", RP_EFORMAT);
  expect_edit("\"id\": 1", "\"id\": 2", RP_EFORMAT);
  expect_edit("\"priv\": \"W\"", "\"priv\": \"X\"", RP_EFORMAT);
  expect_edit("\"args\": \"0000c03f\"", "\"args\": \"0000c03\"", RP_EFORMAT);
  expect_edit("\"args\": \"0000c03f\"", "\"args\": \"0000c0zz\"", RP_EFORMAT);
  expect_edit("\"edges\": [[0, 1]]", "\"edges\": [[0, 1, 2]]", RP_EFORMAT);
  expect_edit("\"edges\": [[0, 1]]", "\"edges\": {}", RP_EFORMAT);
  expect_edit("\"dtype\": \"f32\"", "\"dtype\": \"f16\"", RP_ETYPE);
  expect_edit("\"hi\": [15]", "\"hi\": [15, 3]", RP_ESHAPE);
  expect_edit("\"proc\": 0", "\"proc\": 3.5", RP_EFORMAT);
  expect_edit("\"proc\": 0", "\"proc\": 1e300", RP_ERANGE);
  expect_edit("\"proc\": 0", "\"proc\": -1", RP_ERANGE);

  env e = env_make();
  char *t = subst(MINI, "\"proc\": 0", "\"proc\": true");
  LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
  cr_assert(strstr(why(), "graph.ops[0].proc"), "%s", why());
  free(t);
  th_destroy(e.rt);
}

/* Doubles stop being exact at 2^53 (2^53 + 1 parses as 2^53): such
 * integers must be decimal strings, in files the loader reads and in files
 * rp_graph_save writes (a fuzz finding: a number just past 2^53 must not
 * load rounded, whose saved copy would fail its own checksum). */
Test(graphio_corrupt, integers_past_2p53_are_strings) {
  expect_edit("\"cost_ns\": 0", "\"cost_ns\": 9007199254740991", RP_OK);
  expect_edit("\"cost_ns\": 0", "\"cost_ns\": 9007199254740992", RP_ERANGE);
  /* a leading zero is not JSON (malformed_numbers_are_syntax_errors) */
  expect_edit("\"cost_ns\": 0", "\"cost_ns\": 09007199254740993", RP_EFORMAT);
  expect_edit("\"cost_ns\": 0", "\"cost_ns\": \"9007199254740993\"", RP_OK);
}

/* cJSON prints a 16-digit number with 15 digits when that reads back
 * within its relative epsilon: 9007199254739409 came back as
 * 9007199254739410 and the file failed its own checksum (a fuzz finding).
 * From 10^15 on the writer puts integers as strings: every value saves,
 * loads back equal, and saves to the same bytes. */
Test(graphio, sixteen_digit_integers_round_trip) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_inst a = mk(rt, RP_F32, rp_rect_1d(0, 3), NULL);
  uint64_t v[] = {999999999999999ull, 1000000000000000ull, 9007199254739409ull,
                  9007199254740991ull, 9007199254740993ull};
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    rp_access w = {a, RP_RW, RP_REDOP_NONE};
    rp_launch l = {.task = task(rt, "scale"),
                   .proc = 0,
                   .accesses = &w,
                   .naccess = 1,
                   .cost_ns = v[i]};
    RP_CHECK(rp_graph_add_task(g, &l, NULL));
  }
  const char *path = th_tmp_path("big.json");
  RP_CHECK(rp_graph_save(g, path));
  char *t = th_read_all(path, NULL);
  cr_assert(strstr(t, "\"cost_ns\":\t999999999999999,"), "%s", t);
  cr_assert(strstr(t, "\"cost_ns\":\t\"9007199254739409\""), "%s", t);
  rp_graph *h;
  RP_CHECK(rp_graph_load(rt, path, &a, 1, &h));
  for (uint32_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    rp_op_info oi;
    RP_CHECK(rp_graph_op_query(h, i, &oi));
    cr_assert_eq(oi.cost_ns, v[i], "op %u: %llu", i,
                 (unsigned long long)oi.cost_ns);
  }
  const char *again = th_tmp_path("big2.json");
  RP_CHECK(rp_graph_save(h, again));
  char *t2 = th_read_all(again, NULL);
  cr_assert_str_eq(t, t2);
  free(t);
  free(t2);
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  th_tmpdir_remove();
}

Test(graphio_corrupt, out_of_range_ids) {
  expect_edit("[[0, 1]]", "[[0, 7]]", RP_ERANGE);
  expect_edit("[[0, 1]]", "[[4294967296, 1]]", RP_ERANGE);
  expect_edit("\"inst\": 0, \"priv\": \"R\"", "\"inst\": 3, \"priv\": \"R\"",
              RP_ERANGE);
  expect_edit("\"ops\": [1]", "\"ops\": [9]", RP_ERANGE);
  expect_edit("\"proc\": 0", "\"proc\": 99", RP_EPROC);
  expect_edit("\"shards\": 1", "\"shards\": 5000", RP_ERANGE);
  expect_edit("\"shards\": 1", "\"shards\": 0", RP_ERANGE);
}

Test(graphio_corrupt, unknown_task) {
  expect_edit("\"task\": \"accum\"", "\"task\": \"nosuch\"", RP_ENOTASK);
  env e = env_make();
  char *t = subst(MINI, "\"task\": \"accum\"", "\"task\": \"nosuch\"");
  LOAD_EXPECT(load_text(&e, t), RP_ENOTASK);
  cr_assert(strstr(why(), "graph.ops[1].task"), "%s", why());
  cr_assert(strstr(why(), "nosuch"), "%s", why());
  free(t);
  th_destroy(e.rt);
}

/* A name no task can have is a format error naming the op, not "no task
 * named" (a tool that registers the names a file uses fails on it). */
Test(graphio_corrupt, task_names_no_task_can_have_name_the_path) {
  char *t = malloc(RP_NAME_MAX + 32);
  snprintf(t, RP_NAME_MAX + 32, "\"task\": \"%0*d\"", RP_NAME_MAX + 1, 0);
  const char *bad[][2] = {
      {t, "graph.ops[1].task: name '00000000000000000000...' is longer "
          "than 63 bytes"},
      {"\"task\": \"a\\\"b\"",
       "graph.ops[1].task: name byte 1 (0x22) is not printable"},
      {"\"task\": \"a\\u0001\"",
       "graph.ops[1].task: name byte 1 (0x01) is not printable"},
      {"\"task\": \"\"", "graph.ops[1].task: an empty name"}};
  env e = env_make();
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *m = subst(MINI, "\"task\": \"accum\"", bad[i][0]);
    LOAD_EXPECT(load_text(&e, m), RP_EFORMAT);
    cr_assert(strstr(why(), bad[i][1]), "%s", why());
    free(m);
  }
  free(t);
  th_destroy(e.rt);
}

/* A memory's device is a GPU memory's logical device, -1 for the others:
 * a system instance of device 17 is refused, not loaded as -1 (`dump
 * --diff` would see no difference). */
Test(graphio_corrupt, devices_fit_their_memory) {
  expect_edit("\"device\": -1", "\"device\": 17", RP_EFORMAT);
  expect_edit("\"device\": -1", "\"device\": 0", RP_EFORMAT);
  expect_edit("\"mem\": \"system\"", "\"mem\": \"gpu\"", RP_ERANGE);
  const char *bad[][3] = {
      {"\"device\": -1", "\"device\": 17",
       "graph.instances[0].device: 17 (-1 for system memory)"},
      {"\"mem\": \"system\", \"device\": -1",
       "\"mem\": \"pinned\", \"device\": 2",
       "graph.instances[0].device: 2 (-1 for pinned memory)"},
      {"\"ops\": [1]}]}",
       "\"ops\": [1]}], \"machine\": {\"cpus\": 1, \"gpus\": [], \"mems\": "
       "[{\"mem\": \"system\", \"device\": 3}]}}",
       "graph.machine.mems[0].device: 3 (-1 for system memory)"}};
  env e = env_make();
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *t = subst(MINI, bad[i][0], bad[i][1]);
    LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
    cr_assert(strstr(why(), bad[i][2]), "%s", why());
    free(t);
  }
  th_destroy(e.rt);
}

Test(graphio_corrupt, cycles_are_refused_at_load) {
  expect_edit("[[0, 1]]", "[[0, 1], [1, 0]]", RP_ECYCLE);
  expect_edit("[[0, 1]]", "[[1, 1]]", RP_ECYCLE);
  env e = env_make();
  char *t = subst(MINI, "[[0, 1]]", "[[0, 1], [1, 0]]");
  LOAD_EXPECT(load_text(&e, t), RP_ECYCLE);
  cr_assert(strstr(why(), "op 0 (task 'scale')"), "%s", why());
  free(t);
  th_destroy(e.rt);
}

Test(graphio_corrupt, builder_checks_apply) {
  expect_edit("\"name\": \"out\"", "\"name\": \"\"",
              RP_EFORMAT); /* the file's fault */
  expect_edit("{\"name\": \"out\", \"ops\": [1]}",
              "{\"name\": \"out\", \"ops\": [1, 1]}", RP_EPORT);
  expect_edit("\"postconditions\": [{\"name\": \"out\", \"ops\": [1]}]",
              "\"postconditions\": [{\"name\": \"o\", \"ops\": [1]},"
              " {\"name\": \"o\", \"ops\": [0]}]",
              RP_EPORT);
  expect_edit("\"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"0000",
              "\"workspace_align\": 3, \"cost_ns\": 0, \"args\": \"0000",
              RP_EINVAL);
  expect_edit("\"interps\": []}",
              "\"interps\": [{\"src\": 0, \"dst\": 2,"
              " \"bytes\": 4}]}",
              RP_ERANGE);
  expect_edit("\"interps\": []}",
              "\"interps\": [{\"src\": 0, \"dst\":"
              " \"shards\", \"bytes\": 4}]}",
              RP_EINVAL);
}

Test(graphio_corrupt, instance_table_order_and_use) {
  const char *two = "\"instances\": [{\"id\": 0, \"mem\": \"system\","
                    " \"device\": -1, \"dtype\": \"f32\", \"lo\": [0],"
                    " \"hi\": [15], \"strides\": [1]}, {\"id\": 1, \"mem\":"
                    " \"system\", \"device\": -1, \"dtype\": \"f32\","
                    " \"lo\": [0], \"hi\": [15], \"strides\": [1]}]";
  const char *one = "\"instances\": [{\"id\": 0, \"mem\": \"system\","
                    " \"device\": -1, \"dtype\": \"f32\", \"lo\": [0],"
                    " \"hi\": [15], \"strides\": [1]}]";
  env e = env_make();
  char *t = subst(MINI, one, two);
  LOAD_EXPECT(load_text(&e, t), RP_EFORMAT); /* entry 1 never used */
  cr_assert(strstr(why(), "graph.instances[1]"), "%s", why());
  char *u =
      subst(t, "\"inst\": 0, \"priv\": \"W\"", "\"inst\": 1, \"priv\": \"W\"");
  LOAD_EXPECT(load_text(&e, u), RP_EFORMAT); /* 1 used before 0 */
  cr_assert(strstr(why(), "first-use order"), "%s", why());
  free(u);
  free(t);
  th_destroy(e.rt);
}

Test(graphio_corrupt, caller_instances_must_match) {
  env e = env_make();
  rp_inst good = mk(e.rt, RP_F32, rp_rect_1d(0, 15), NULL);
  rp_inst f64 = mk(e.rt, RP_F64, rp_rect_1d(0, 15), NULL);
  rp_inst small = mk(e.rt, RP_F32, rp_rect_1d(0, 7), NULL);
  int64_t st2 = 2;
  rp_inst strided = mk(e.rt, RP_F32, rp_rect_1d(0, 15), &st2);
  rp_inst two[2] = {good, good};
  reprobe(&e); /* those took the probe's slot */
  size_t len = strlen(MINI);
  LOAD_EXPECT(load_text_n(&e, MINI, len, &good, 1), RP_OK);
  LOAD_EXPECT(load_text_n(&e, MINI, len, &f64, 1), RP_ETYPE);
  cr_assert(strstr(why(), "instance table entry 0: the file says f32, the "
                          "caller's insts[0] is f64"),
            "%s", why());
  LOAD_EXPECT(load_text_n(&e, MINI, len, &small, 1), RP_ESHAPE);
  /* the caller's instance by its index, not an opaque handle */
  cr_assert(strstr(why(), "instance table entry 0: the file says rectangle "
                          "[0..15], the caller's insts[0] covers [0..7]"),
            "%s", why());
  cr_assert_null(strstr(why(), "0x"), "%s", why());
  LOAD_EXPECT(load_text_n(&e, MINI, len, &strided, 1), RP_ESHAPE);
  cr_assert(strstr(why(), "stride 1 in dimension 0, the caller's insts[0] "
                          "has 2"),
            "%s", why());
  LOAD_EXPECT(load_text_n(&e, MINI, len, two, 2), RP_EINVAL);
  RP_CHECK(rp_instance_free(e.rt, small));
  LOAD_EXPECT(load_text_n(&e, MINI, len, &small, 1), RP_ESTALE);
  /* handle 0 is none: a missing argument, not a freed instance */
  rp_inst none = {0};
  LOAD_EXPECT(load_text_n(&e, MINI, len, &none, 1), RP_EINVAL);
  cr_assert(strstr(why(), "the caller's insts[0] (instance 0) is none"), "%s",
            why());
  th_destroy(e.rt);
}

/* A 4-D rect of 20-character coordinates is 176 characters: the detail
 * shows the caller's whole, not cut mid-number. */
Test(graphio_corrupt, caller_instance_rect_shown_whole) {
  env e = env_make();
  int64_t lo[4] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
  int64_t ext[4] = {2, 2, 2, 2};
  rp_rect r = rp_rect_make(4, lo, ext);
  rp_inst far = mk(e.rt, RP_F32, r, NULL);
  char have[256];
  rp_rect_str(&r, have, sizeof have);
  cr_assert_eq(strlen(have), 176u, "%s", have);
  LOAD_EXPECT(load_text_n(&e, MINI, strlen(MINI), &far, 1), RP_ESHAPE);
  cr_assert(strstr(why(), have), "%s", why());
  th_destroy(e.rt);
}

/* MINI's instance table, and one of two such instances for it. */
#define ONE_INST                                                               \
  "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1, "          \
  "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], \"strides\": [1]}]"
#define TWO_INSTS                                                              \
  "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1, "          \
  "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], \"strides\": [1]}, "         \
  "{\"id\": 1, \"mem\": \"system\", \"device\": -1, \"dtype\": \"f32\", "      \
  "\"lo\": [0], \"hi\": [15], \"strides\": [1]}]"

Test(graphio_corrupt, duplicate_caller_instances) {
  const char *one = ONE_INST, *two = TWO_INSTS;
  env e = env_make();
  char *t = subst(MINI, one, two);
  char *u =
      subst(t, "\"inst\": 0, \"priv\": \"R\"", "\"inst\": 1, \"priv\": \"R\"");
  rp_inst good = mk(e.rt, RP_F32, rp_rect_1d(0, 15), NULL);
  rp_inst pair[2] = {good, good};
  reprobe(&e);
  LOAD_EXPECT(load_text_n(&e, u, strlen(u), pair, 2), RP_EINVAL);
  cr_assert(strstr(why(), "entries 0 and 1 are bound to one instance: the "
                          "caller's insts[0] and insts[1] are both 0x"),
            "%s", why());
  free(u);
  free(t);
  th_destroy(e.rt);
}

/* ---- limits: files meant to exhaust memory ---- */

Test(graphio_corrupt, huge_counts_and_sizes) {
  env e = env_make();
  /* more JSON values than the parse may build */
  size_t n = 5u << 20;
  char *t = malloc(2 * n + 3);
  t[0] = '[';
  for (size_t i = 0; i < n; i++)
    memcpy(t + 1 + 2 * i, "0,", 2);
  memcpy(t + 2 * n, "0]", 3);
  LOAD_EXPECT(load_text(&e, t), RP_ERANGE);
  cr_assert(strstr(why(), "JSON values"), "%s", why());
  free(t);

  /* more ops than a file may hold */
  size_t nops = (1u << 20) + 1;
  char *ops = malloc(3 * nops + 2);
  for (size_t i = 0; i < nops; i++)
    memcpy(ops + 3 * i, "{},", 3);
  ops[3 * nops - 1] = 0;
  size_t big = strlen(MINI) + 3 * nops + 64;
  char *doc = malloc(big);
  const char *at = strstr(MINI, "\"ops\": [") + 8;
  snprintf(doc, big, "%.*s%s, %s", (int)(at - MINI), MINI, ops, at);
  LOAD_EXPECT(load_text(&e, doc), RP_ERANGE);
  cr_assert(strstr(why(), "graph.ops: more than"), "%s", why());
  free(doc);
  free(ops);

  /* argument bytes beyond the launch limit */
  size_t nargs = (1u << 20) + 1;
  char *hex = malloc(2 * nargs + 16);
  memset(hex, '0', 2 * nargs);
  hex[2 * nargs] = 0;
  char *argstr = malloc(2 * nargs + 32);
  snprintf(argstr, 2 * nargs + 32, "\"args\": \"%s\"", hex);
  char *a = subst(MINI, "\"args\": \"0000c03f\"", argstr);
  LOAD_EXPECT(load_text(&e, a), RP_ERANGE);
  free(a);
  free(argstr);
  free(hex);

  /* an instance bigger than the machine, also from a negative origin */
  char *inst = subst(MINI, "\"hi\": [15]", "\"hi\": [1000000000000000]");
  LOAD_EXPECT(load_text(&e, inst), RP_ERANGE);
  cr_assert(strstr(why(), "instance table entry 0"), "%s", why());
  free(inst);
  inst = subst(MINI, "\"lo\": [0], \"hi\": [15]",
               "\"lo\": [-1000000000000000], \"hi\": [15]");
  LOAD_EXPECT(load_text(&e, inst), RP_ERANGE);
  free(inst);
  inst =
      subst(MINI, "\"strides\": [1]", "\"strides\": [\"9223372036854775807\"]");
  char *inst2 = subst(inst, "\"hi\": [15]", "\"hi\": [2]");
  LOAD_EXPECT(load_text(&e, inst2), RP_ERANGE);
  free(inst2);
  free(inst);
  th_destroy(e.rt);
}

Test(graphio_corrupt, files_beyond_the_size_limit) {
  env e = env_make();
  make_tmpdir();
  const char *path = th_tmp_path("huge.json");
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(ftruncate(fileno(f), (off_t)(65u << 20)), 0);
  fclose(f);
  rp_graph *g;
  RP_EXPECT(rp_graph_load(e.rt, path, NULL, 0, &g), RP_ERANGE);
  RP_EXPECT(rp_graph_load(e.rt, th_tmp_path("missing.json"), NULL, 0, &g),
            RP_ENOENT);
  RP_EXPECT(rp_graph_load(e.rt, "/dev/zero", NULL, 0, &g), RP_EINVAL);
  RP_EXPECT(rp_graph_load(NULL, path, NULL, 0, &g), RP_EINVAL);
  RP_EXPECT(rp_graph_load(e.rt, path, NULL, 3, &g), RP_EINVAL);
  th_tmpdir_remove();
  th_destroy(e.rt);
}

Test(graphio_corrupt, loaded_copies_are_checked) {
  const char *two =
      "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1,"
      " \"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], \"strides\": [1]},"
      " {\"id\": 1, \"mem\": \"system\", \"device\": -1, \"dtype\": \"DT\","
      " \"lo\": [0], \"hi\": [HI], \"strides\": [1]}]";
  const char *one = "\"instances\": [{\"id\": 0, \"mem\": \"system\","
                    " \"device\": -1, \"dtype\": \"f32\", \"lo\": [0],"
                    " \"hi\": [15], \"strides\": [1]}]";
  const char *copy =
      "{\"id\": 2, \"kind\": \"copy\", \"src\": 0, \"dst\": 1,"
      " \"domain\": \"DOM\", \"rect\": RECT, \"redop\": \"none\","
      " \"group\": GROUP, \"inserted\": false}";
  const char *nogroup = "0, \"pop_kind\": null, \"backward\": false";
  struct {
    const char *dt, *hi, *dom, *rect;
    rp_status want;
    const char *group;
  } cases[] = {
      {"f32", "15", "intersect", "null", RP_OK, NULL},
      {"f64", "15", "intersect", "null", RP_ETYPE, NULL},
      {"f32", "7", "src", "null", RP_ESHAPE, NULL},
      {"f32", "7", "dst", "null", RP_OK, NULL},
      {"f32", "15", "rect", "{\"lo\": [2], \"hi\": [5]}", RP_OK, NULL},
      {"f32", "15", "rect", "{\"lo\": [2], \"hi\": [50]}", RP_ESHAPE, NULL},
      {"f32", "15", "rect", "null", RP_EFORMAT, NULL},
      {"f32", "15", "src", "{\"lo\": [2], \"hi\": [5]}", RP_EFORMAT, NULL},
      {"f32", "15", "intersect", "null", RP_OK,
       "1, \"pop_kind\": \"combine\", \"backward\": true"},
      {"f32", "15", "intersect", "null", RP_EFORMAT,
       "1, \"pop_kind\": \"fold\", \"backward\": true"},
      {"f32", "15", "intersect", "null", RP_EFORMAT,
       "0, \"pop_kind\": null, \"backward\": true"},
      {"f32", "15", "intersect", "null", RP_EFORMAT,
       "0, \"pop_kind\": \"combine\", \"backward\": false"},
      {"f32", "15", "intersect", "null", RP_ERANGE,
       "4, \"pop_kind\": \"combine\", \"backward\": false"},
      /* what only the planner checks, as rp_graph_add_copy does (edit) */
      {"f32", "15", "intersect", "null", RP_EINVAL, NULL},
      {"f32", "107", "intersect", "null", RP_ESHAPE, NULL},
  };
  const char *edit[sizeof cases / sizeof cases[0]][2] = {
      [13] = {"\"src\": 0, \"dst\": 1", "\"src\": 0, \"dst\": 0"}, /* one */
      [14] = {"\"lo\": [0], \"hi\": [107]", /* disjoint */
              "\"lo\": [100], \"hi\": [107]"}};
  for (size_t i = 0; i < RP_ARRAY_LEN(cases); i++) {
    char *t1 = subst(MINI, one, two);
    char *t2 = subst(t1, "DT", cases[i].dt);
    char *t3 = subst(t2, "HI", cases[i].hi);
    char *t4 = subst(t3, "\"interps\": []}],", "\"interps\": []}, COPY],");
    char *t5 = subst(t4, "COPY", copy);
    char *t6 = subst(t5, "GROUP", cases[i].group ? cases[i].group : nogroup);
    char *t7 = subst(t6, "DOM", cases[i].dom);
    char *t8 = subst(t7, "RECT", cases[i].rect);
    char *t9 = edit[i][0] ? subst(t8, edit[i][0], edit[i][1]) : strdup(t8);
    cr_assert_not_null(t9);
    env e = env_make();
    rp_graph *g = NULL;
    make_tmpdir();
    write_all(th_tmp_path("c.json"), t9, strlen(t9));
    rp_status st = rp_graph_load(e.rt, th_tmp_path("c.json"), NULL, 0, &g);
    th_tmpdir_remove();
    cr_assert_eq(st, cases[i].want, "case %zu: %s, expected %s (%s)", i,
                 rp_status_name(st), rp_status_name(cases[i].want),
                 rp_error_detail());
    if (!st) {
      rp_inst l[2];
      uint32_t n;
      RP_CHECK(rp_graph_instances(g, l, 2, &n));
      RP_CHECK(rp_graph_destroy(g));
      for (uint32_t k = 0; k < n; k++)
        RP_CHECK(rp_instance_free(e.rt, l[k]));
    }
    th_destroy(e.rt);
    char *all[] = {t1, t2, t3, t4, t5, t6, t7, t8, t9};
    for (int k = 0; k < 9; k++)
      free(all[k]);
  }
}

/* ---- dumps ---- */

Test(dump, json_loads_back) {
  make_tmpdir();
  fixture fx;
  build(&fx);
  const char *path = th_tmp_path("dump.json");
  FILE *f = fopen(path, "w");
  RP_CHECK(rp_graph_dump(fx.g, f, RP_DUMP_JSON));
  fclose(f);
  rp_inst insts[16];
  uint32_t n;
  RP_CHECK(rp_graph_instances(fx.g, insts, 16, &n));
  rp_graph *h;
  RP_CHECK(rp_graph_load(fx.rt, path, insts, n, &h));
  assert_same(fx.g, h);
  RP_CHECK(rp_graph_destroy(h));
  teardown(&fx);
  th_tmpdir_remove();
}

#else /* !REPRISE_HAVE_CJSON */

Test(graphio, unsupported_without_cjson) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_EXPECT(rp_graph_save(g, "/tmp/never.json"), RP_EUNSUPPORTED);
  rp_graph *h;
  RP_EXPECT(rp_graph_load(rt, "/tmp/never.json", NULL, 0, &h), RP_EUNSUPPORTED);
  RP_EXPECT(rp_graph_dump(g, stdout, RP_DUMP_JSON), RP_EUNSUPPORTED);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

#endif

/* The longest description an access can have (a 63-byte name, a 4-D
 * rectangle of 20-digit bounds, RED(sum)) is printed whole, in the text
 * and DOT dumps. */
Test(dump, the_longest_instance_description_is_not_cut) {
  rp_runtime *rt = th_cpu_runtime(1);
  register_tasks(rt);
  rp_rect r = {
      .dim = 4,
      .lo = {INT64_MIN, INT64_MAX - 1, -9007199254740993, 9007199254740993},
      .hi = {INT64_MIN + 1, INT64_MAX, -9007199254740993, 9007199254740993}};
  rp_inst x = mk(rt, RP_F64, r, NULL);
  char name[RP_NAME_MAX + 1];
  memset(name, 'N', RP_NAME_MAX);
  name[RP_NAME_MAX] = '\0';
  RP_CHECK(rp_instance_set_name(rt, x, name));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access a = {x, RP_REDUCE, RP_REDOP_SUM};
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = task(rt, "accum"), .accesses = &a, .naccess = 1},
      NULL));
  const char *rect = "[-9223372036854775808..-9223372036854775807, "
                     "9223372036854775806..9223372036854775807, "
                     "-9007199254740993..-9007199254740993, "
                     "9007199254740993..9007199254740993]";
  for (int fmt = RP_DUMP_TEXT; fmt <= RP_DUMP_DOT; fmt++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    RP_CHECK(rp_graph_dump(g, f, (rp_dump_format)fmt));
    fclose(f);
    cr_assert(strstr(buf, name) && strstr(buf, rect), "format %d:\n%s", fmt,
              buf);
    free(buf);
  }
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  th_destroy(rt);
}

Test(dump, text_names_every_op) {
  fixture fx;
  build(&fx);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_graph_dump(fx.g, f, RP_DUMP_TEXT));
  fclose(f);
  const char *want[] = {
      "op 0: task 'scale' proc 0 shards 1 args 8 B",
      "op 1: task 'accum' proc any shards 2",
      "shard procs: 1 0",
      "workspace 256 B align 128",
      "interp 0: replay args [0, +4) -> args [4]",
      "interp 0: replay args [8, +4) -> shard count",
      "op 2: copy domain rect [2..5] redop none",
      "op 3: copy domain intersect redop none group 1 (replicate fwd)",
      "op 4: copy domain intersect redop sum group 1 (replicate fwd)",
      "op 5: task 'update' proc 1",
      ":RW f64 [4..7, 0..3]",
      ":RED(sum) f32 [0..15]",
      "edge 2 -> 5",
      "precondition 0 'batch' -> ops 0 5",
      "postcondition 0 'loss' <- ops 5 4",
  };
  for (size_t i = 0; i < RP_ARRAY_LEN(want); i++)
    cr_assert(strstr(buf, want[i]), "missing '%s' in:\n%s", want[i], buf);
  char w[64];
  /* the slot: the handle's low bits below the runtime tag */
  snprintf(w, sizeof w, "access 0: inst#%u.%u:W f32 [0..15]",
           (unsigned)fx.a.id & 0x7fffffu, (unsigned)(fx.a.id >> 32));
  cr_assert(strstr(buf, w), "missing '%s' in:\n%s", w, buf);
  free(buf);
  teardown(&fx);
}

Test(dump, dot_labels_carry_accesses_rects_and_interpolations) {
  fixture fx;
  build(&fx);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_graph_dump(fx.g, f, RP_DUMP_DOT));
  fclose(f);
  const char *want[] = {
      "0: scale\\nproc 0",
      "\\ninterp: replay args [0, +4) -> args [4]",
      "\\ninterp: replay args [8, +4) -> shard count",
      "\\nRW inst#",
      " f64 [4..7, 0..3]",
      "\\nRED(sum) inst#",
      "2: copy\\ninst#",
      "\\ndomain rect [2..5]",
      "4: copy (sum)\\n",
      "\\ndomain intersect",
  };
  for (size_t i = 0; i < RP_ARRAY_LEN(want); i++)
    cr_assert(strstr(buf, want[i]), "missing '%s' in:\n%s", want[i], buf);
  free(buf);
  teardown(&fx);
}

Test(dump, dot_renders_and_names_every_op) {
  if (access("/usr/bin/dot", X_OK) != 0 && system("command -v dot >/dev/null"))
    cr_skip_test("graphviz (dot) is not installed");
  make_tmpdir();
  fixture fx;
  build(&fx);
  const char *gv = th_tmp_path("g.dot"), *svg = th_tmp_path("g.svg");
  FILE *f = fopen(gv, "w");
  RP_CHECK(rp_graph_dump(fx.g, f, RP_DUMP_DOT));
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o '%s' 2>&1", gv, svg);
  cr_assert_eq(system(cmd), 0, "dot failed on:\n%s", th_read_all(gv, NULL));
  char *s = th_read_all(svg, NULL);
  for (rp_op_id id = 0; id < fx.g->nops; id++) {
    char label[64];
    const rp_gop *op = &fx.g->ops[id];
    if (op->kind == RP_OP_TASK)
      snprintf(label, sizeof label, "%u: %s", id,
               rp_task_name(fx.rt, op->task));
    else
      snprintf(label, sizeof label, "%u: copy", id);
    cr_assert(strstr(s, label), "op %u ('%s') not in the SVG", id, label);
  }
  cr_assert(strstr(s, "group 1: replicate fwd"));
  cr_assert(strstr(s, "pre 1: unused &lt;{quoted}&gt;"),
            "the port name survives DOT and SVG");
  free(s);
  teardown(&fx);
  th_tmpdir_remove();
}

Test(dump, errors) {
  fixture fx;
  build(&fx);
  RP_EXPECT(rp_graph_dump(NULL, stdout, RP_DUMP_TEXT), RP_EINVAL);
  RP_EXPECT(rp_graph_dump(fx.g, NULL, RP_DUMP_TEXT), RP_EINVAL);
  RP_EXPECT(rp_graph_dump(fx.g, stdout, (rp_dump_format)7), RP_EINVAL);
  FILE *full = fopen("/dev/full", "w");
  if (full) {
    RP_EXPECT(rp_graph_dump(fx.g, full, RP_DUMP_TEXT), RP_EIO);
    RP_EXPECT(rp_graph_dump(fx.g, full, RP_DUMP_DOT), RP_EIO);
#ifdef REPRISE_HAVE_CJSON
    RP_EXPECT(rp_graph_dump(fx.g, full, RP_DUMP_JSON), RP_EIO);
#endif
    fclose(full);
  }
  FILE *ro = fopen("/dev/null", "r");
  RP_EXPECT(rp_graph_dump(fx.g, ro, RP_DUMP_TEXT), RP_EIO);
  fclose(ro);
  teardown(&fx);
}

Test(dump, stale_instances_are_marked_in_text) {
  fixture fx;
  build(&fx);
  RP_CHECK(rp_instance_free(fx.rt, fx.c));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  RP_CHECK(rp_graph_dump(fx.g, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(buf, ":RW (stale)"), "%s", buf);
  free(buf);
  teardown(&fx);
}

/* ---- names and inferred edges (graph files: cJSON) ---- */

#ifdef REPRISE_HAVE_CJSON

/* MINI (no names, as files before names were) loads; named instances and
 * ops, and the inferred mark on edges, load and save back the same. */
Test(graphio_names, names_and_inferred_marks_round_trip) {
  env e = env_make();
  char *a =
      subst(MINI, "\"strides\": [1]}", "\"strides\": [1], \"name\": \"W1\"}");
  char *b =
      subst(a, "\"interps\": []},", "\"interps\": [], \"name\": \"fc1.fwd\"},");
  char *t = subst(b, "[[0, 1]]", "[[0, 1, \"inferred\"]]");
  make_tmpdir();
  const char *path = th_tmp_path("n.json"), *again = th_tmp_path("m.json");
  write_all(path, t, strlen(t));
  rp_graph *g, *h;
  RP_CHECK(rp_graph_load(e.rt, path, NULL, 0, &g));
  rp_inst l[1];
  uint32_t n;
  RP_CHECK(rp_graph_instances(g, l, 1, &n));
  cr_assert_str_eq(rp_instance_name(e.rt, l[0]), "W1");
  cr_assert_str_eq(rp_graph_op_name(g, 0), "fc1.fwd");
  cr_assert_str_eq(rp_graph_op_name(g, 1), "");
  cr_assert_eq(g->edges[0].inferred, 1u);
  RP_CHECK(rp_graph_save(g, again));
  RP_CHECK(rp_graph_load(e.rt, again, l, 1, &h));
  cr_assert_str_eq(rp_graph_op_name(h, 0), "fc1.fwd");
  cr_assert_eq(h->edges[0].inferred, 1u);
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(e.rt, l[0]));
  th_tmpdir_remove();
  free(a), free(b), free(t);
  th_destroy(e.rt);
}

/* An edge listed twice, asked for or inferred either time, is refused
 * naming both entries: a graph holds an edge once and rp_graph_save writes
 * it once, so a repeat is an edited file (merged, it hid the repeat from
 * lint's "given twice", and an inferred edge became an asked-for one). */
Test(graphio_names, an_edge_listed_twice_is_refused_naming_both) {
  const char *lists[] = {
      "[[0, 1, \"inferred\"], [0, 1]]", "[[0, 1], [0, 1, \"inferred\"]]",
      "[[0, 1, \"inferred\"], [0, 1, \"inferred\"]]", "[[0, 1], [0, 1]]"};
  for (int k = 0; k < 4; k++) {
    env e = env_make();
    char *t = subst(MINI, "[[0, 1]]", lists[k]);
    LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
    cr_assert(strstr(why(), "graph.edges[1]: the edge 0 -> 1 repeats "
                            "graph.edges[0]"),
              "%s: %s", lists[k], why());
    free(t);
    th_destroy(e.rt);
  }
  /* the repeat is named wherever it stands */
  env e = env_make();
  char *t = subst(MINI, "\"edges\": [[0, 1]]",
                  "\"edges\": [[0, 1, \"inferred\"], [1, 0], [0, 1]]");
  LOAD_EXPECT(load_text(&e, t), RP_EFORMAT);
  cr_assert(strstr(why(), "graph.edges[2]: the edge 0 -> 1 repeats "
                          "graph.edges[0]"),
            "%s", why());
  free(t);
  th_destroy(e.rt);
}

/* An edge's refused end is named by its JSON path: graph.edges[i][0] for
 * the op it leaves, graph.edges[i][1] for the op it enters. */
Test(graphio_names, an_edges_refused_end_is_named_by_its_path) {
  const char *cases[][2] = {
      {"[[0, 1], [1, 7]]", "graph.edges[1][1]: op 7 out of range"},
      {"[[0, 1], [7, 1]]", "graph.edges[1][0]: op 7 out of range"},
      {"[[-1, 1]]", "graph.edges[0][0]: -1 out of range"},
      {"[[0, true]]", "graph.edges[0][1]: "},
  };
  const rp_status want[] = {RP_ERANGE, RP_ERANGE, RP_ERANGE, RP_EFORMAT};
  for (size_t k = 0; k < RP_ARRAY_LEN(cases); k++) {
    env e = env_make();
    char *t = subst(MINI, "[[0, 1]]", cases[k][0]);
    LOAD_EXPECT(load_text(&e, t), want[k]);
    cr_assert(strstr(why(), cases[k][1]), "%s: %s", cases[k][0], why());
    free(t);
    th_destroy(e.rt);
  }
}

/* Unknown keys and values are quoted with every byte outside printable
 * ASCII (and '\\') as \xNN: a file's escape sequences (a colour, an OSC
 * title) or a flipped byte never reach a terminal raw. Long text is cut at
 * 40 bytes with "...". */
Test(graphio_corrupt, unknown_keys_and_values_are_quoted_escaped) {
  const char *cases[][4] = {
      {"\"proc\": 0,", "\"proc\": 0, \"\\u001b[31mRED\\u001b[0m\": 1,",
       "graph.ops[0]: unknown key '\\x1b[31mRED\\x1b[0m'", "\x1b"},
      {"\"dtype\": \"f32\"", "\"dtype\": \"\\u001b]0;pwned\\u0007\"",
       "graph.instances[0].dtype: unknown value '\\x1b]0;pwned\\x07'", "\x07"},
      {"\"device\": -1", "\"devic\x80\": -1",
       "graph.instances[0]: unknown key 'devic\\x80'", "\x80"},
      {"\"kind\": \"task\"", "\"kind\": \"a\\\\b\\u009b\"",
       "graph.ops[0].kind: unknown op kind 'a\\x5cb\\xc2\\x9b'", "\x9b"},
      {"\"proc\": 0,",
       "\"proc\": 0, \"0123456789012345678901234567890123456789xyz\": 1,",
       "unknown key '0123456789012345678901234567890123456789...'", "xyz"},
      /* file text that reads as a handle is the file's, not named as one */
      {"\"kind\": \"task\"", "\"kind\": \"0xffffffff\"",
       "graph.ops[0].kind: unknown op kind '0xffffffff'", "(graph."}};
  for (size_t i = 0; i < RP_ARRAY_LEN(cases); i++) {
    env e = env_make();
    char *t = subst(MINI, cases[i][0], cases[i][1]);
    rp_status st = load_text(&e, t);
    cr_assert(st == RP_EFORMAT || st == RP_ETYPE, "case %zu: %s (%s)", i,
              rp_status_name(st), why());
    cr_assert(strstr(why(), cases[i][2]), "case %zu: no '%s' in '%s'", i,
              cases[i][2], why());
    cr_assert_null(strstr(why(), cases[i][3]), "case %zu: raw in '%s'", i,
                   why());
    for (const unsigned char *p = (const unsigned char *)why(); *p; p++)
      cr_assert(*p >= 0x20 && *p < 0x7f, "case %zu: byte 0x%02x in '%s'", i, *p,
                why());
    free(t);
    th_destroy(e.rt);
  }
}

/* "?" is what the writer's name tables say for a value without a name
 * (privilege 0): in a file it is an unknown value like any other, said by
 * the loader with its path, not read as that value for the builder to
 * refuse as "unknown privilege 0". */
Test(graphio_corrupt, a_question_mark_is_no_enum_value) {
  expect_said("\"priv\": \"W\"", "\"priv\": \"?\"", RP_EFORMAT,
              "graph.ops[0].accesses[0].priv: unknown value '?'");
  expect_said("\"dtype\": \"f32\"", "\"dtype\": \"?\"", RP_ETYPE,
              "graph.instances[0].dtype: unknown value '?'");
}

/* The builder's and planner's checks name instances by handle, which the
 * file does not hold: the detail adds the handle's place in the file. */
Test(graphio_corrupt, builder_details_name_the_files_instance) {
  const char *one = ONE_INST, *two = TWO_INSTS;
  const char *copy =
      "\"interps\": []}, {\"id\": 2, \"kind\": \"copy\", \"src\": 1,"
      " \"dst\": 1, \"domain\": \"intersect\", \"rect\": null,"
      " \"redop\": \"none\", \"group\": 0, \"pop_kind\": null,"
      " \"backward\": false, \"inserted\": false}],";
  char *t1 = subst(MINI, one, two);
  char *t2 = subst(t1, "\"interps\": []}],", copy);
  env e = env_make();
  LOAD_EXPECT(load_text(&e, t2), RP_EINVAL);
  cr_assert(strstr(why(), "graph.ops[2]: src and dst are the same instance "
                          "0x") &&
                strstr(why(), " (graph.instances[1])"),
            "%s", why());
  free(t1), free(t2);
  th_destroy(e.rt);
}

/* insts == NULL goes with ninsts == 0 (reprise.h): a count without a
 * table is named, not called a NULL argument. */
Test(graphio_corrupt, a_count_without_instances_is_named) {
  env e = env_make();
  make_tmpdir();
  const char *path = th_tmp_path("m.json");
  write_all(path, MINI, strlen(MINI));
  rp_graph *g = NULL;
  RP_EXPECT(rp_graph_load(e.rt, path, NULL, 3, &g), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(),
                   "rp_graph_load: insts is NULL but ninsts is 3");
  cr_assert_null(g);
  RP_EXPECT(rp_graph_load_mem(e.rt, MINI, strlen(MINI), NULL, 2, 0, &g),
            RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(),
                   "rp_graph_load_mem: insts is NULL but ninsts is 2");
  RP_EXPECT(rp_graph_load(e.rt, path, NULL, 0, NULL), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_graph_load: NULL argument");
  /* a table of another length than the file's: both counts named */
  rp_inst two[2] = {mk(e.rt, RP_F32, rp_rect_1d(0, 7), NULL),
                    mk(e.rt, RP_F32, rp_rect_1d(0, 7), NULL)};
  RP_EXPECT(rp_graph_load(e.rt, path, two, 2, &g), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "the caller passed 2 instances, the "
                                      "file's instance table has 1 entries"),
            "%s", rp_error_detail());
  cr_assert_null(g);
  RP_CHECK(rp_instance_free(e.rt, two[0]));
  RP_CHECK(rp_instance_free(e.rt, two[1]));
  th_tmpdir_remove();
  th_destroy(e.rt);
}

/* MINI with a second instance (dtype DT, extent LO..HI) and a copy op 2
 * from instance 0 into it, its fields given; then `from` -> `to` when set. */
static char *mini_copy(const char *inst1, const char *copy_fields,
                       const char *from, const char *to) {
  char *t1 = subst(MINI, ONE_INST, TWO_INSTS);
  char *t2 = subst(t1,
                   "{\"id\": 1, \"mem\": \"system\", \"device\": -1, "
                   "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], "
                   "\"strides\": [1]}",
                   inst1);
  char buf[1024];
  snprintf(buf, sizeof buf,
           "\"interps\": []}, {\"id\": 2, \"kind\": \"copy\", \"src\": 0,"
           " \"dst\": 1, %s}],",
           copy_fields);
  char *t3 = subst(t2, "\"interps\": []}],", buf);
  char *t4 = from ? subst(t3, from, to) : strdup(t3);
  free(t1), free(t2), free(t3);
  return t4;
}

/* Loads text, expects want and a detail holding says. */
static void expect_text(const char *text, rp_status want, const char *says) {
  env e = env_make();
  rp_status st = load_text(&e, text);
  cr_assert_eq(st, want, "%s, expected %s (%s) for\n%s", rp_status_name(st),
               rp_status_name(want), why(), text);
  cr_assert(strstr(why(), says), "no '%s' in '%s'", says, why());
  th_destroy(e.rt);
}

#define F32_1D                                                                 \
  "{\"id\": 1, \"mem\": \"system\", \"device\": -1, \"dtype\": \"f32\", "      \
  "\"lo\": [0], \"hi\": [15], \"strides\": [1]}"
#define COPY_OK                                                                \
  "\"domain\": \"intersect\", \"rect\": null, \"redop\": \"none\", "           \
  "\"group\": 0, \"pop_kind\": null, \"backward\": false, \"inserted\": false"

/* Refusals of the instance table, ops and copies each name the field. */
Test(graphio_corrupt, every_field_refusal_names_the_field) {
  expect_said("\"instances\": [{\"id\": 0", "\"instances\": [{\"id\": 1",
              RP_EFORMAT,
              "graph.instances[0].id: 1 (entries must be in id order)");
  expect_said("\"strides\": [1]", "\"strides\": [1, 1]", RP_ESHAPE,
              "graph.instances[0].strides: 2 strides for 1 dimensions");
  expect_said("\"lo\": [0], \"hi\": [15]", "\"lo\": [], \"hi\": []", RP_ESHAPE,
              "graph.instances[0].lo: 0 dimensions (1..4 allowed)");
  expect_said("\"lo\": [0], \"hi\": [15]",
              "\"lo\": [0, 0, 0, 0, 0], \"hi\": [1, 1, 1, 1, 1]", RP_ESHAPE,
              "graph.instances[0].lo: 5 dimensions (1..4 allowed)");
  expect_said("\"shards\": 1, \"shard_procs\": null",
              "\"shards\": 1, \"shard_procs\": [0, 0]", RP_ESHAPE,
              "graph.ops[0].shard_procs: 2 processors for 1 shards");
  expect_said("{\"id\": 0, \"kind\": \"task\",", "{\"kind\": \"task\",",
              RP_EFORMAT, "graph.ops[0]: missing key 'id'");
  expect_said("{\"id\": 1, \"kind\": \"task\",", "{\"id\": 1,", RP_EFORMAT,
              "graph.ops[1]: missing key 'kind'");
  expect_said("\"ops\": [\n", "\"ops\": [7, ", RP_EFORMAT,
              "graph.ops[0]: expected an object");
  expect_said("\"proc\": 0,", "\"proc\": \"99999999999999999999\",", RP_ERANGE,
              "graph.ops[0].proc: 99999999999999999999 out of range [0, "
              "4294967294]");
  expect_text("{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": []}",
              RP_EFORMAT, "graph: expected an object");

  struct {
    const char *inst1, *fields, *from, *to;
    rp_status want;
    const char *says;
  } cases[] = {
      {F32_1D, COPY_OK, NULL, NULL, RP_OK, ""},
      {F32_1D, COPY_OK, "\"inserted\": false", "\"inserted\": 0", RP_EFORMAT,
       "graph.ops[2].inserted: expected true or false"},
      {F32_1D, COPY_OK, "\"backward\": false", "\"backward\": null", RP_EFORMAT,
       "graph.ops[2].backward: expected true or false"},
      {F32_1D, COPY_OK, "\"domain\": \"intersect\", \"rect\": null",
       "\"domain\": \"rect\", \"rect\": {\"lo\": [5], \"hi\": [2]}", RP_ESHAPE,
       "graph.ops[2].rect: empty or inverted in dimension 0"},
      {"{\"id\": 1, \"mem\": \"system\", \"device\": -1, \"dtype\": \"f32\", "
       "\"lo\": [0, 0], \"hi\": [15, 0], \"strides\": [1, 1]}",
       COPY_OK, NULL, NULL, RP_ESHAPE,
       "graph.ops[2]: source has 1 dimensions, destination 2"},
      {"{\"id\": 1, \"mem\": \"system\", \"device\": -1, \"dtype\": \"u8\", "
       "\"lo\": [0], \"hi\": [15], \"strides\": [1]}",
       COPY_OK, "\"redop\": \"none\", \"group\"",
       "\"redop\": \"sum\", \"group\"", RP_ETYPE,
       "graph.ops[2]: no sum reduction for u8"},
  };
  for (size_t i = 0; i < RP_ARRAY_LEN(cases); i++) {
    char *t =
        mini_copy(cases[i].inst1, cases[i].fields, cases[i].from, cases[i].to);
    if (i == 5) { /* both u8 */
      char *u = subst(t, "\"dtype\": \"f32\"", "\"dtype\": \"u8\"");
      free(t);
      t = u;
    }
    expect_text(t, cases[i].want, cases[i].says);
    free(t);
  }
}

/* Refusals of mirrors, groups, ports and the machine each name the field. */
Test(graphio_corrupt, graph_level_refusals_name_the_field) {
  /* a mirror no op references */
  char *t = subst(MINI, "\"edges\":",
                  "\"mirrors\": [{\"id\": 0, \"source\": 0, \"mem\": "
                  "\"system\", \"device\": -1}], \"edges\":");
  expect_text(t, RP_EFORMAT, "graph.mirrors[0]: not referenced by any op");
  free(t);

  /* two copies of one group that disagree on its kind */
  const char *g1 = "\"domain\": \"intersect\", \"rect\": null, \"redop\": "
                   "\"none\", \"group\": 1, \"pop_kind\": \"replicate\", "
                   "\"backward\": false, \"inserted\": false";
  char *c = mini_copy(F32_1D, g1, NULL, NULL);
  expect_text(c, RP_OK, "");
  char buf[1024];
  snprintf(buf, sizeof buf,
           "\"inserted\": false}, {\"id\": 3, \"kind\": \"copy\", \"src\": "
           "0, \"dst\": 1, %s}],",
           g1);
  char *c2 = subst(c, "\"inserted\": false}],", buf);
  expect_text(c2, RP_OK, "");
  char *c3 = subst(c2,
                   "\"pop_kind\": \"replicate\", \"backward\": false, "
                   "\"inserted\": false}]",
                   "\"pop_kind\": \"combine\", \"backward\": false, "
                   "\"inserted\": false}]");
  expect_text(c3, RP_EFORMAT,
              "graph.ops[3]: group 1 is replicate fwd in an earlier op, "
              "combine fwd here");
  free(c), free(c2), free(c3);

  /* more port bindings than a file may hold: 16 ops, 4096 preconditions
   * bound to each (the most a direction has), then one more binding */
  size_t cap = 4096 * 96 + 16 * 320 + 256;
  char *doc = malloc(cap);
  const char *ops_end = strstr(MINI, "\"interps\": []}],") + 14;
  size_t at = (size_t)snprintf(doc, cap, "%.*s", (int)(ops_end - MINI), MINI);
  for (int k = 2; k < 16; k++)
    at += (size_t)snprintf(
        doc + at, cap - at,
        ", {\"id\": %d, \"kind\": \"task\", \"task\": \"accum\", \"proc\": 0,"
        " \"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0,"
        " \"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"\","
        " \"accesses\": [], \"interps\": []}",
        k);
  at += (size_t)snprintf(doc + at, cap - at,
                         "],\n \"edges\": [],\n \"preconditions\": [");
  for (int p = 0; p < 4096; p++) {
    at +=
        (size_t)snprintf(doc + at, cap - at, "%s{\"name\": \"p%d\", \"ops\": [",
                         p ? ", " : "", p);
    for (int k = 0; k < 16; k++)
      at += (size_t)snprintf(doc + at, cap - at, k ? ", %d" : "%d", k);
    at += (size_t)snprintf(doc + at, cap - at, "]}");
  }
  snprintf(doc + at, cap - at,
           "],\n \"postconditions\": [{\"name\": \"out\", \"ops\": [1]}]}}\n");
  expect_text(doc, RP_ERANGE,
              "graph.postconditions[0].ops: more than 65536 port bindings "
              "in the file");
  /* one fewer loads */
  char *fewer = subst(doc, "\"ops\": [0, 1, 2", "\"ops\": [1, 2");
  expect_text(fewer, RP_OK, "");
  free(fewer), free(doc);

  /* a machine with more memories than a model holds */
  cap = 64 * 40 + 256;
  char *mems = malloc(cap);
  at = (size_t)snprintf(mems, cap,
                        "\"machine\": {\"cpus\": 1, \"gpus\": [], \"mems\": [");
  for (int k = 0; k <= RP_MODEL_MAX_MEMS; k++)
    at += (size_t)snprintf(mems + at, cap - at,
                           "%s{\"mem\": \"gpu\", \"device\": %d}",
                           k ? ", " : "", k);
  snprintf(mems + at, cap - at, "]}, \"edges\":");
  t = subst(MINI, "\"edges\":", mems);
  expect_text(t, RP_ERANGE,
              "graph.machine.mems: more than 32 memories besides system "
              "memory");
  free(t), free(mems);

  /* an instance the engine refuses after the loader's own checks */
  expect_said("\"strides\": [1]", "\"strides\": [0]", RP_ERANGE,
              "instance table entry 0: rp_instance_create: stride of "
              "dimension 0 is 0 (must be > 0)");
}

/* A refusal of one entry of an array names the entry, not the array: a
 * port may list 4096 ops, an SPMD launch 4096 processors. */
Test(graphio_corrupt, array_entry_refusals_name_the_entry) {
  expect_said("\"ops\": [1]}]", "\"ops\": [1, 0, 7]}]", RP_ERANGE,
              "graph.postconditions[0].ops[2]: op 7 out of range (the graph "
              "has 2 ops)");
  expect_said("\"ops\": [1]}]", "\"ops\": [1, -1]}]", RP_ERANGE,
              "graph.postconditions[0].ops[1]: -1 out of range");
  expect_said("\"ops\": [0]}]", "\"ops\": [0, 1, 0]}]", RP_EPORT,
              "graph.preconditions[0].ops[2]: rp_graph_bind_precondition: "
              "port 'in' is already bound to op 0");
  expect_said("\"shards\": 1, \"shard_procs\": null",
              "\"shards\": 3, \"shard_procs\": [0, 0, \"x\"]", RP_EFORMAT,
              "graph.ops[0].shard_procs[2]: expected an integer");
  expect_said("\"lo\": [0], \"hi\": [15], \"strides\": [1]",
              "\"lo\": [0, 0], \"hi\": [3, 3.5], \"strides\": [4, 1]",
              RP_EFORMAT, "graph.instances[0].hi[1]: expected an integer");
  expect_said("\"strides\": [1]", "\"strides\": [\"a\"]", RP_EFORMAT,
              "graph.instances[0].strides[0]: expected an integer");
  expect_said("\"edges\":",
              "\"machine\": {\"cpus\": 1, \"gpus\": [0, -3], \"mems\": []}, "
              "\"edges\":",
              RP_ERANGE, "graph.machine.gpus[1]: -3 out of range [0, 1023]");
}

/* A decimal string past 2^64 is out of range; the advice to write large
 * integers as strings is for numbers, not for a string already. */
Test(graphio_corrupt, a_decimal_string_past_2p64_names_the_range) {
  expect_said("\"cost_ns\": 0,", "\"cost_ns\": \"99999999999999999999\",",
              RP_ERANGE,
              "graph.ops[0].cost_ns: 99999999999999999999 out of range [0, "
              "18446744073709551615]");
  expect_said("\"cost_ns\": 0,", "\"cost_ns\": 1e300,", RP_ERANGE,
              "graph.ops[0].cost_ns: integer out of range (integers beyond "
              "+-2^53 must be decimal strings)");
  expect_said("\"instances\": [{\"id\": 0",
              "\"instances\": [{\"id\": \"-99999999999999999999\"", RP_ERANGE,
              "graph.instances[0].id: -99999999999999999999 out of range [0, "
              "9223372036854775807]");
}

Test(graphio_names, bad_names_and_marks_are_format_errors) {
  expect_edit("\"interps\": []},", "\"interps\": [], \"name\": \"a\\\"b\"},",
              RP_EFORMAT);
  expect_edit("\"interps\": []},", "\"interps\": [], \"name\": 7},",
              RP_EFORMAT);
  expect_edit("\"strides\": [1]}", "\"strides\": [1], \"name\": \"\\n\"}",
              RP_EFORMAT);
  expect_edit("[[0, 1]]", "[[0, 1, \"asked\"]]", RP_EFORMAT);
  expect_edit("[[0, 1]]", "[[0, 1, \"inferred\", 2]]", RP_EFORMAT);
}

/* rp_graph_file_machine's refusals name the call (they said "graph:
 * expected an object" or "the file has N bytes ..." alone) and leave the
 * out-parameters as they were; a file above RP_GRAPH_FILE_MAX is refused
 * before a byte of it is read (its bytes here are not readable at all). */
Test(graphio_machine, file_machine_refusals_name_the_call) {
  rp_machine_desc m;
  memset(&m, 0x5a, sizeof m);
  rp_machine_desc m0 = m;
  int present = 7;
  const char *arr = "{\"format\": \"reprise-graph\", \"version\": 1, "
                    "\"graph\": []}";
  RP_EXPECT(rp_graph_file_machine(arr, strlen(arr), &m, &present), RP_EFORMAT);
  cr_assert_str_eq(rp_error_detail(),
                   "rp_graph_file_machine: graph: expected an object");
  size_t big = (size_t)RP_GRAPH_FILE_MAX + 1;
  void *none = mmap(NULL, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(none, MAP_FAILED);
  RP_EXPECT(rp_graph_file_machine(none, big, &m, &present), RP_ERANGE);
  char want[128];
  snprintf(want, sizeof want,
           "rp_graph_file_machine: the file has %zu bytes (the limit is %u)",
           big, RP_GRAPH_FILE_MAX);
  cr_assert_str_eq(rp_error_detail(), want);
  cr_assert_eq(munmap(none, big), 0);
  RP_EXPECT(rp_graph_file_machine("{", 1, &m, &present), RP_EFORMAT);
  cr_assert(!strncmp(rp_error_detail(), "rp_graph_file_machine: ", 23), "%s",
            rp_error_detail());
  RP_EXPECT(rp_graph_file_machine(NULL, 1, &m, &present), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_graph_file_machine: NULL argument");
  cr_assert(present == 7 && !memcmp(&m, &m0, sizeof m),
            "out-parameters written on error");
  /* MINI has no "machine": read, *m untouched */
  RP_CHECK(rp_graph_file_machine(MINI, strlen(MINI), &m, &present));
  cr_assert(present == 0 && !memcmp(&m, &m0, sizeof m));
}

#endif /* REPRISE_HAVE_CJSON */
