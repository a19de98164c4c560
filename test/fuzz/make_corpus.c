/* test/fuzz/make_corpus.c — writes the seed corpus of the graph-file fuzz
 * target (test/fuzz/corpus/): valid files saved with rp_graph_save, the
 * same without their checksum (so mutations reach past it), and corrupt
 * variants (truncated, bad checksum, other version, not JSON, cycles,
 * unknown tasks). Usage: fuzz_make_corpus DIR */
#include "fuzz_common.h"

#include <string.h>

static const char *dir;

static void die(const char *what) {
  fprintf(stderr, "make_corpus: %s: %s\n", what, rp_error_detail());
  exit(1);
}

static void check(rp_status st, const char *what) {
  if (st)
    die(what);
}

static char *path_of(const char *name) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

static char *slurp(const char *name, size_t *len) {
  FILE *f = fopen(path_of(name), "rb");
  if (!f)
    die(name);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(*len + 1);
  if (fread(b, 1, *len, f) != *len)
    die(name);
  b[*len] = 0;
  fclose(f);
  return b;
}

static void spit(const char *name, const char *text, size_t len) {
  FILE *f = fopen(path_of(name), "wb");
  if (!f || fwrite(text, 1, len, f) != len)
    die(name);
  fclose(f);
}

/* name with the first `from` replaced by `to`, written as `out`. */
static void variant(const char *name, const char *out, const char *from,
                    const char *to) {
  size_t len;
  char *t = slurp(name, &len);
  char *at = strstr(t, from);
  if (!at)
    die(from);
  size_t a = (size_t)(at - t), fl = strlen(from), tl = strlen(to);
  char *r = malloc(len - fl + tl + 1);
  memcpy(r, t, a);
  memcpy(r + a, to, tl);
  memcpy(r + a + tl, at + fl, len - a - fl);
  spit(out, r, len - fl + tl);
  free(r);
  free(t);
}

/* The file without its checksum member (the loader accepts that). */
static void strip_checksum(const char *name, const char *out) {
  size_t len;
  char *t = slurp(name, &len);
  char *at = strstr(t, "\t\"checksum\":");
  char *end = at ? strchr(at, '\n') : NULL;
  if (!end)
    die("checksum line");
  memmove(at, end + 1, strlen(end + 1) + 1);
  spit(out, t, strlen(t));
  free(t);
}

static rp_inst mk(rp_runtime *rt, rp_dtype t, rp_rect r, const int64_t *st) {
  rp_inst i;
  check(rp_instance_create(rt, 0, t, &r, st, &i), "instance");
  return i;
}

static rp_task_id task(rp_runtime *rt, const char *name) {
  rp_task_id id;
  check(rp_task_find(rt, name, &id), name);
  return id;
}

static void copy(rp_graph *g, rp_inst s, rp_inst d, rp_copy_domain dom,
                 rp_rect r, rp_redop redop, uint32_t group, rp_pop_kind k) {
  rp_gop op;
  memset(&op, 0, sizeof op);
  op.kind = RP_OP_COPY;
  op.shards = 1;
  op.copy =
      (rp_copy){.src = s, .dst = d, .domain = dom, .rect = r, .redop = redop};
  op.group = group;
  op.pop_kind = k;
  op.pop_backward = group == 2;
  check(rp__graph_append(g, &op, NULL), "copy");
}

/* Every feature: tasks with args, all privileges, SPMD with shard
 * processors, workspace, cost, interpolations, copies of every domain,
 * two parallel-operator groups, edges, ports. */
static void full(rp_runtime *rt) {
  int64_t strides[2] = {8, 1};
  rp_inst a = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  rp_inst b = mk(rt, RP_F32, rp_rect_1d(0, 15), NULL);
  rp_inst c = mk(rt, RP_F64, rp_rect_2d(4, 7, 0, 3), strides);
  rp_inst d = mk(rt, RP_F32, rp_rect_1d(0, 7), NULL);
  rp_inst e = mk(rt, RP_F32, rp_rect_1d(8, 15), NULL);
  rp_graph *g;
  check(rp_graph_create(rt, &g), "graph");
  float alpha[2] = {1.5f, 0};
  rp_access w = {a, RP_WRITE, RP_REDOP_NONE};
  rp_interp ip = {0, 4, 4};
  rp_launch l0 = {.task = task(rt, "scale"),
                  .proc = 0,
                  .accesses = &w,
                  .naccess = 1,
                  .args = alpha,
                  .args_size = sizeof alpha,
                  .interps = &ip,
                  .ninterp = 1};
  check(rp_graph_add_task(g, &l0, NULL), "op 0");
  rp_access acc[2] = {{a, RP_READ, RP_REDOP_NONE},
                      {b, RP_REDUCE, RP_REDOP_SUM}};
  rp_proc sp[2] = {1, 0};
  uint32_t n = 2;
  rp_interp sh = {0, RP_INTERP_SHARDS, 4};
  rp_launch l1 = {.task = task(rt, "accum"),
                  .proc = RP_PROC_ANY,
                  .accesses = acc,
                  .naccess = 2,
                  .args = &n,
                  .args_size = sizeof n,
                  .shards = 2,
                  .shard_procs = sp,
                  .workspace_bytes = 4096,
                  .workspace_align = 64,
                  .cost_ns = 12345,
                  .interps = &sh,
                  .ninterp = 1};
  check(rp_graph_add_task(g, &l1, NULL), "op 1");
  copy(g, b, d, RP_DOMAIN_DST, rp_rect_1d(0, 0), RP_REDOP_NONE, 1,
       RP_POP_REPARTITION);
  copy(g, b, e, RP_DOMAIN_DST, rp_rect_1d(0, 0), RP_REDOP_NONE, 1,
       RP_POP_REPARTITION);
  copy(g, d, b, RP_DOMAIN_SRC, rp_rect_1d(0, 0), RP_REDOP_SUM, 2,
       RP_POP_REPLICATE);
  copy(g, a, b, RP_DOMAIN_RECT, rp_rect_1d(2, 5), RP_REDOP_NONE, 0, 0);
  rp_access rw = {c, RP_RW, RP_REDOP_NONE};
  rp_launch l6 = {
      .task = task(rt, "update"), .proc = 1, .accesses = &rw, .naccess = 1};
  check(rp_graph_add_task(g, &l6, NULL), "op 6");
  rp_op_id edges[][2] = {{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {5, 6}};
  for (int i = 0; i < 6; i++)
    check(rp_graph_add_edge(g, edges[i][0], edges[i][1]), "edge");
  rp_port_id p;
  check(rp_graph_add_precondition(g, "batch", &p), "port");
  check(rp_graph_bind_precondition(g, p, 0), "bind");
  check(rp_graph_bind_precondition(g, p, 6), "bind");
  check(rp_graph_add_postcondition(g, "loss", &p), "port");
  check(rp_graph_bind_postcondition(g, p, 6), "bind");
  check(rp_graph_save(g, path_of("full.json")), "save full");
  check(rp_graph_destroy(g), "destroy");
}

static void mini(rp_runtime *rt) {
  rp_inst a = mk(rt, RP_I32, rp_rect_1d(0, 3), NULL);
  rp_graph *g;
  check(rp_graph_create(rt, &g), "graph");
  rp_access w = {a, RP_WRITE, RP_REDOP_NONE};
  rp_access r = {a, RP_READ, RP_REDOP_NONE};
  rp_launch l = {
      .task = task(rt, "scale"), .proc = 0, .accesses = &w, .naccess = 1};
  check(rp_graph_add_task(g, &l, NULL), "mini 0");
  l.accesses = &r;
  l.proc = RP_PROC_ANY;
  check(rp_graph_add_task(g, &l, NULL), "mini 1");
  check(rp_graph_add_edge(g, 0, 1), "edge");
  check(rp_graph_save(g, path_of("mini.json")), "save mini");
  check(rp_graph_destroy(g), "destroy");
  check(rp_graph_create(rt, &g), "graph");
  check(rp_graph_save(g, path_of("empty.json")), "save empty");
  check(rp_graph_destroy(g), "destroy");
}

static void corrupt(void) {
  size_t len;
  char *t = slurp("full.json", &len);
  spit("bad_truncated_half.json", t, len / 2);
  spit("bad_truncated_end.json", t, len - 3);
  free(t);
  strip_checksum("full.json", "full_nosum.json");
  strip_checksum("mini.json", "mini_nosum.json");
  variant("full.json", "bad_checksum.json", "\"shards\":\t2", "\"shards\":\t1");
  variant("full.json", "bad_version.json", "\"version\":\t1",
          "\"version\":\t2");
  variant("mini_nosum.json", "bad_cycle.json", "[0, 1]", "[1, 1]");
  variant("mini_nosum.json", "bad_task.json", "\"scale\"", "\"gpu_only\"");
  variant("mini_nosum.json", "bad_op_ref.json", "[0, 1]", "[0, 9]");
  variant("mini_nosum.json", "bad_inst_ref.json", "\"inst\":\t0",
          "\"inst\":\t4");
  spit("bad_not_json.json", "reprise-graph 1\n", 16);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  rp_runtime *rt = fz_runtime();
  full(rt);
  mini(rt);
  corrupt();
  check(rp_runtime_destroy(rt), "runtime destroy");
  return 0;
}
