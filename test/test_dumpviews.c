/* `reprise dump`'s views for large steps: --group, --focus,
 * --critical-path (cost hints and --trace durations), --diff, --trace
 * --summary and --format html, the page checked in headless Chromium
 * (its self-test writes what it saw into the DOM). Steps: a synthetic
 * transformer-shaped step (test/synth_step.h), a hand-built diamond with
 * cost hints, the MLP step `reprise train --save-graph --trace` records
 * and small GPT steps `reprise train --model gpt` records (their expected
 * groups computed from the graph file's op names). Asserts behaviour (nodes,
 * counts, paths, exit statuses, messages), never timings. */
#include "cli_run.h"
#include "helpers.h"
#include "synth_step.h"

#include "kernels/tasks.h"
#include "tools/dump_view.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>
#endif

static void setup(void) {
  th_tmpdir_make("/tmp/rp_dumpviews_XXXXXX");
}

static void teardown(void) {
  th_tmpdir_remove();
}

static const char *synth(uint32_t ops, int variant, const char *name) {
  const char *path = th_tmp_path(name);
  rp_status st = synth_step_save(ops, variant, path);
  cr_assert_eq(st, RP_OK, "synth_step_save: %s: %s", rp_status_name(st),
               rp_error_detail());
  return path;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

#define HAS(text, s)                                                           \
  cr_assert(strstr((text), (s)), "no '%s' in:\n%s", (s), (text))

/* 1000 ops ask for 45 layers: 45 * 22 + 4 ops. */
#define SYNTH_LAYERS 45u
#define SYNTH_OPS (SYNTH_LAYERS * SYNTH_OPS_PER_LAYER + SYNTH_OPS_FIXED)

/* The diamond: a (100 ns) -> b (500 ns) -> d (100 ns), a -> c (50) -> d. */
static const char *diamond_named(const char *name, const char *const *names);

static const char *diamond(const char *name) {
  static const char *const names[4] = {"a", "b", "c", "d"};
  return diamond_named(name, names);
}

/* The diamond a -> b, c -> d, its ops named names[0..3]. */
static const char *diamond_named(const char *name, const char *const *names) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect r = rp_rect_1d(0, 15);
  rp_inst in[2];
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_create(rt, sys, RP_F32, &r, NULL, &in[i]));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  static const rp_scalar_args a = {.value = 1.0f, .n = 0};
  const uint64_t cost[4] = {100, 500, 50, 100};
  rp_op_id id[4];
  for (int i = 0; i < 4; i++) {
    rp_access acc = {in[i == 2], i ? RP_RW : RP_WRITE, RP_REDOP_NONE};
    rp_launch l = {.task = i ? k.scale : k.fill,
                   .proc = (rp_proc)(i == 2),
                   .accesses = &acc,
                   .naccess = 1,
                   .args = &a,
                   .args_size = sizeof a,
                   .cost_ns = cost[i]};
    RP_CHECK(rp_graph_add_task(g, &l, &id[i]));
    RP_CHECK(rp_graph_set_op_name(g, id[i], names[i]));
  }
  RP_CHECK(rp_graph_add_edge(g, id[0], id[1]));
  RP_CHECK(rp_graph_add_edge(g, id[0], id[2]));
  RP_CHECK(rp_graph_add_edge(g, id[1], id[3]));
  RP_CHECK(rp_graph_add_edge(g, id[2], id[3]));
  const char *path = th_tmp_path(name);
  RP_CHECK(rp_graph_save(g, path));
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_free(rt, in[i]));
  th_destroy(rt);
  return path;
}

/* The MLP step and its trace, recorded by the CLI. */
static void mlp(const char **graph, const char **trace) {
  *graph = th_tmp_path("mlp.json");
  *trace = th_tmp_path("mlp_trace.json");
  char g[512], t[512];
  snprintf(g, sizeof g, "%s", *graph);
  snprintf(t, sizeof t, "%s", *trace);
  cli_run r;
  RUN(&r, "train", "--backend", "cpu", "--procs", "2", "--iters", "4",
      "--save-graph", g, "--trace", t);
  cr_assert_eq(r.status, 0, "train: %s", r.err);
  *graph = th_tmp_path("mlp.json");
  *trace = th_tmp_path("mlp_trace.json");
}

/* ---- grouping ---- */

Test(views, group_key_takes_the_first_components) {
  char k[RP_NAME_MAX + 1];
  dv_group_key("h3.attn.qkv", 1, k, sizeof k);
  cr_assert_str_eq(k, "h3");
  dv_group_key("h3.attn.qkv", 2, k, sizeof k);
  cr_assert_str_eq(k, "h3.attn");
  dv_group_key("h3.attn.qkv", 5, k, sizeof k);
  cr_assert_str_eq(k, "h3.attn.qkv");
  dv_group_key("", 1, k, sizeof k);
  cr_assert_str_eq(k, DV_UNNAMED);
}

/* Shard suffixes (a component "s" or "t" and a number, never the first)
 * are not group components: an op's shards are one group at any depth. */
Test(views, group_key_leaves_shard_suffixes_out) {
  char k[RP_NAME_MAX + 1];
  dv_group_key("h3.attn.qkv.s1", 4, k, sizeof k);
  cr_assert_str_eq(k, "h3.attn.qkv");
  dv_group_key("h3.attn.qkv.s1.t0", 2, k, sizeof k);
  cr_assert_str_eq(k, "h3.attn");
  dv_group_key("h1.mlp.fc.w.t0.replicate", 5, k, sizeof k);
  cr_assert_str_eq(k, "h1.mlp.fc.w.replicate");
  dv_group_key("embed.s12", 1, k, sizeof k);
  cr_assert_str_eq(k, "embed");
  dv_group_key("s0.x.t1", 9, k, sizeof k); /* the first component stays */
  cr_assert_str_eq(k, "s0.x");
  dv_group_key("a.s.t.s1x.x1.st1", 9, k, sizeof k); /* no number: kept */
  cr_assert_str_eq(k, "a.s.t.s1x.x1.st1");
  dv_group_key("a.", 2, k, sizeof k);
  cr_assert_str_eq(k, "a.");
  dv_group_key(".", 1, k, sizeof k);
  cr_assert_str_eq(k, "");
  dv_shard_suffix("h3.attn.qkv.s1.t0", k, sizeof k);
  cr_assert_str_eq(k, ".s1.t0");
  dv_shard_suffix("h1.mlp.fc.w.t3.replicate", k, sizeof k);
  cr_assert_str_eq(k, ".t3");
  dv_shard_suffix("s0.embed", k, sizeof k);
  cr_assert_str_eq(k, "");
}

/* A chain of n rp.scale tasks named names[0..n-1], saved as name. */
static const char *chain_named(const char *name, const char *const *names,
                               uint32_t n) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect r = rp_rect_1d(0, 15);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &r, NULL, &in));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  static const rp_scalar_args a = {.value = 1.0f, .n = 0};
  rp_op_id prev = 0;
  for (uint32_t i = 0; i < n; i++) {
    rp_access acc = {in, RP_RW, RP_REDOP_NONE};
    rp_launch l = {.task = k.scale,
                   .proc = 0,
                   .accesses = &acc,
                   .naccess = 1,
                   .args = &a,
                   .args_size = sizeof a};
    rp_op_id id;
    RP_CHECK(rp_graph_add_task(g, &l, &id));
    RP_CHECK(rp_graph_set_op_name(g, id, names[i]));
    if (i)
      RP_CHECK(rp_graph_add_edge(g, prev, id));
    prev = id;
  }
  const char *path = th_tmp_path(name);
  RP_CHECK(rp_graph_save(g, path));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
  return path;
}

/* The node count of `reprise dump FILE --group DEPTH`'s view. */
static unsigned group_nodes(const char *file, unsigned depth, char **out) {
  char d[16], f[512];
  snprintf(d, sizeof d, "%u", depth);
  snprintf(f, sizeof f, "%s", file);
  cli_run r;
  RUN(&r, "dump", f, "--group", d);
  cr_assert_eq(r.status, 0, "%s", r.err);
  const char *v = strstr(r.out, "): ");
  unsigned n = 0;
  cr_assert(v && sscanf(v, "): %u nodes", &n) == 1, "%s", r.out);
  if (out)
    *out = strdup(r.out);
  return n;
}

/* A step's ops with shard suffixes at several levels (embed.s0..s3,
 * h0.attn.s0..s3, h0.attn.qkv.s0.t0..s1.t1, h0.attn.qkv.w.t0..t3.replicate,
 * adamw.t0..t3) group into as many nodes as the same step's ops without
 * them, at every depth; each such group says its shards (the suffixes
 * counted as components, embed's shards were 4 nodes from depth 2 on). */
Test(views, group_folds_shards_into_their_ops_group, .init = setup,
     .fini = teardown) {
  static const char *const base[] = {"embed",
                                     "h0.ln1",
                                     "h0.attn",
                                     "h0.attn.qkv",
                                     "h0.attn.qkv.w.replicate",
                                     "h0.mlp.fc",
                                     "adamw"};
  enum { kBase = sizeof base / sizeof *base, kShards = 4 };
  static const char *const sharded[kBase * kShards] = {
      "embed.s0",
      "embed.s1",
      "embed.s2",
      "embed.s3",
      "h0.ln1",
      "h0.ln1",
      "h0.ln1",
      "h0.ln1",
      "h0.attn.s0",
      "h0.attn.s1",
      "h0.attn.s2",
      "h0.attn.s3",
      "h0.attn.qkv.s0.t0",
      "h0.attn.qkv.s0.t1",
      "h0.attn.qkv.s1.t0",
      "h0.attn.qkv.s1.t1",
      "h0.attn.qkv.w.t0.replicate",
      "h0.attn.qkv.w.t1.replicate",
      "h0.attn.qkv.w.t2.replicate",
      "h0.attn.qkv.w.t3.replicate",
      "h0.mlp.fc.s0",
      "h0.mlp.fc.s1",
      "h0.mlp.fc.s2",
      "h0.mlp.fc.s3",
      "adamw.t0",
      "adamw.t1",
      "adamw.t2",
      "adamw.t3",
  };
  char one[512], many[512];
  snprintf(one, sizeof one, "%s", chain_named("one.json", base, kBase));
  snprintf(many, sizeof many, "%s",
           chain_named("many.json", sharded, kBase * kShards));
  for (unsigned d = 1; d <= 6; d++) {
    char *text = NULL;
    unsigned a = group_nodes(one, d, NULL), b = group_nodes(many, d, &text);
    cr_assert_eq(b, a, "--group %u: %u nodes with shards, %u without:\n%s", d,
                 b, a, text);
    if (d == 1)
      HAS(text, "group 'h0': 20 ops (20 tasks, 0 copies), 13 shards\n");
    if (d == 3) {
      HAS(text, "group 'h0.attn.qkv': 8 ops (8 tasks, 0 copies), 8 shards\n");
      HAS(text, "group 'h0.attn': 4 ops (4 tasks, 0 copies), 4 shards\n");
    }
    if (d == 5)
      HAS(text, "group 'h0.attn.qkv.w.replicate': 4 ops (4 tasks, 0 copies), "
                "4 shards\n");
    HAS(text, "group 'embed': 4 ops (4 tasks, 0 copies), 4 shards\n");
    HAS(text, "group 'adamw': 4 ops (4 tasks, 0 copies), 4 shards\n");
    /* the ops of one name without a suffix: one group, no shards told */
    if (d >= 2)
      HAS(text, "group 'h0.ln1': 4 ops (4 tasks, 0 copies)\n");
    free(text);
  }
  cli_run r;
  RUN(&r, "dump", many, "--group", "4", "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "label=\"embed\\n4 ops (4 tasks, 0 copies), 4 shards\"");
  RUN(&r, "dump", many, "--group", "4", "--format", "json");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "\"name\": \"embed\", \"group\": true, \"ops\": 4, \"tasks\": "
             "4, \"copies\": 0, \"shards\": 4,");
  /* a group's name is a --focus name: the ops of its shards */
  RUN(&r, "dump", many, "--focus", "h0.attn.qkv.w.replicate", "--depth", "0");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "(4 of 28 ops)");
}

Test(views, group_one_node_per_layer_with_counts_and_edges, .init = setup,
     .fini = teardown) {
  const char *g = synth(1000, 0, "s.json");
  cli_run r;
  RUN(&r, "dump", g, "--group");
  cr_assert_eq(r.status, 0, "%s", r.err);
  char head[160];
  snprintf(head, sizeof head, "(%u ops): %u nodes (%u groups, 4 ops)",
           SYNTH_OPS, SYNTH_LAYERS + 4, SYNTH_LAYERS);
  HAS(r.out, head);
  HAS(r.out, "group 'h0': 22 ops (18 tasks, 4 copies), cost 82500 ns\n"
             "  -> group 'h1' (2 edges)\n");
  HAS(r.out, "op 0 'embed': rp.axpy proc 0, cost 500 ns\n  -> group 'h0'");
  RUN(&r, "dump", g, "--group", "2");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "group 'h0.attn': 10 ops (8 tasks, 2 copies)");
  HAS(r.out, "group 'h44.mlp': 8 ops (6 tasks, 2 copies)");
  RUN(&r, "dump", g, "--group=1", "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "digraph reprise_view {");
  cr_assert_eq(count(r.out, "shape=box3d"), (int)SYNTH_LAYERS);
}

#ifdef REPRISE_HAVE_CJSON
Test(views, group_json_accounts_for_every_op, .init = setup, .fini = teardown) {
  const char *g = synth(1000, 0, "s.json");
  const char *out = th_tmp_path("v.json");
  char o[512];
  snprintf(o, sizeof o, "%s", out);
  cli_run r;
  RUN(&r, "dump", g, "--group", "--format", "json", "-o", o);
  cr_assert_eq(r.status, 0, "%s", r.err);
  char *text = th_read_all(o, NULL);
  cJSON *doc = cJSON_Parse(text);
  cr_assert_not_null(doc);
  const cJSON *n, *nodes = cJSON_GetObjectItem(doc, "nodes");
  cr_assert_eq(cJSON_GetArraySize(nodes), (int)SYNTH_LAYERS + 4);
  int ops = 0, groups = 0;
  cJSON_ArrayForEach(n, nodes) {
    ops += cJSON_GetObjectItem(n, "ops")->valueint;
    groups += cJSON_IsTrue(cJSON_GetObjectItem(n, "group"));
  }
  cr_assert_eq(ops, (int)SYNTH_OPS);
  cr_assert_eq(groups, (int)SYNTH_LAYERS);
  /* layer l's forward feeds layer l + 1; the backward runs l + 1 -> l */
  cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "edges")),
               2 * ((int)SYNTH_LAYERS - 1) + 5);
  cJSON_Delete(doc);
  free(text);
}
#endif

Test(views, focus_is_the_neighbourhood, .init = setup, .fini = teardown) {
  const char *g = synth(200, 0, "s.json");
  cli_run r;
  RUN(&r, "dump", g, "--focus", "h3.attn.qkv", "--depth", "1");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "within 1 edge of 'h3.attn.qkv' (4 of 180 ops): 4 nodes");
  HAS(r.out, "'h3.ln1'");
  HAS(r.out, "'h3.attn.in.copy'");
  HAS(r.out, "'h3.attn.score'");
  cr_assert_null(strstr(r.out, "'h3.attn.softmax'"));
  RUN(&r, "dump", g, "--focus", "h3.attn.qkv", "--depth", "2");
  HAS(r.out, "'h3.attn.softmax'");
  /* a group and its neighbours, grouped */
  RUN(&r, "dump", g, "--group", "2", "--focus", "h3.attn", "--depth", "0");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "1 nodes (1 groups, 0 ops)");
  HAS(r.out, "group 'h3.attn': 10 ops");
}

Test(views, bad_options_are_usage_errors, .init = setup, .fini = teardown) {
  const char *g = synth(100, 0, "s.json");
  cli_run r;
  RUN(&r, "dump", g, "--focus", "nope");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--focus: no op or group is named 'nope'");
  /* a bad option value: the line that points to the help follows, last */
  const char *tail = "'op N' or '(unnamed)')\nTry 'reprise dump --help'.\n";
  cr_assert(strlen(r.err) >= strlen(tail) &&
                !strcmp(r.err + strlen(r.err) - strlen(tail), tail),
            "%s", r.err);
  RUN(&r, "dump", g, "--group=0");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--group: '0' is not a group depth in 1..32");
  RUN(&r, "dump", g, "--group", "-1");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--group: '-1' is not a group depth in 1..32");
  RUN(&r, "dump", g, "--group=deep");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--group: 'deep' is not a group depth");
  RUN(&r, "dump", g, "--depth", "2");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--depth needs --focus NAME");
  RUN(&r, "dump", g, "--focus", "h0", "--depth", "x");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--depth: 'x' is not a number of edges");
  RUN(&r, "dump", g, "--summary");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--summary needs --trace FILE");
  /* without a graph FILE too (optional with --trace): the --trace is what
   * is missing */
  RUN(&r, "dump", "--summary");
  cr_assert_eq(r.status, 2);
  cr_assert_str_eq(r.err, "reprise dump: --summary needs --trace FILE\n"
                          "Try 'reprise dump --help'.\n");
  RUN(&r, "dump", g, "--diff", g, "--group");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--diff compares two graphs");
  RUN(&r, "dump", g, "--format", "svg");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "is not text, dot, json or html");
  /* options that would be ignored */
  RUN(&r, "dump", g, "--contract", "x=host");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--contract declares a task's contract for --lint or "
             "--schedule");
  RUN(&r, "dump", g, "--diff", g, "--trace", g);
  cr_assert_eq(r.status, 2);
  HAS(r.err, "--diff compares two graphs: no other view, format or --trace");
  RUN(&r, "dump", "--trace", g, "--summary", "--workers", "3");
  cr_assert_eq(r.status, 2);
  HAS(r.err, "reads no machine: no --workers or --gpus");
  /* a --contract for a task the file does not have: said, then linted */
  RUN(&r, "dump", g, "--lint", "--contract", "no.such.task=host");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.err, "--contract no.such.task: the file has no task of that name");
}

/* --max-bytes caps the trace as it does the graph file. */
Test(views, max_bytes_caps_the_trace, .init = setup, .fini = teardown) {
  const char *g, *t;
  mlp(&g, &t);
  char gp[512], tp[512];
  snprintf(gp, sizeof gp, "%s", g);
  snprintf(tp, sizeof tp, "%s", t);
  cli_run r;
  RUN(&r, "dump", gp, "--critical-path", "--trace", tp, "--max-bytes", "1K");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "above the limit of 1024 (--max-bytes)");
  RUN(&r, "dump", "--trace", tp, "--summary", "--max-bytes", "1K");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "above the limit of 1024 (--max-bytes)");
  /* the graph file above --max-bytes: the option named too */
  RUN(&r, "dump", gp, "--max-bytes", "1K");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "above the limit of 1024 (--max-bytes)");
  RUN(&r, "dump", "--trace", tp, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
  /* above a graph's 64 MiB, up to a trace's 1 GiB: a trace may use it,
   * the graph is still read up to its own limit */
  RUN(&r, "dump", gp, "--critical-path", "--trace", tp, "--max-bytes", "200M");
  cr_assert_eq(r.status, 0, "%s", r.err);
  RUN(&r, "dump", "--trace", tp, "--summary", "--max-bytes", "2G");
  cr_assert_eq(r.status, 2, "%s", r.err);
  HAS(r.err, "1..1073741824");
}

/* ---- critical path ---- */

Test(views, critical_path_by_cost_hints_with_shares, .init = setup,
     .fini = teardown) {
  const char *g = diamond("d.json");
  cli_run r;
  RUN(&r, "dump", g, "--critical-path");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert_str_eq(r.out, "critical path by cost hints: 700 ns over 3 ops\n"
                          "  op 0 'a' rp.fill  100 ns  14.3%\n"
                          "  op 1 'b' rp.scale  500 ns  71.4%\n"
                          "  op 3 'd' rp.scale  100 ns  14.3%\n");
  RUN(&r, "dump", g, "--critical-path", "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "n0 -> n1 [color=\"#d62728\", penwidth=2.5];");
  HAS(r.out, "n1 -> n3 [color=\"#d62728\", penwidth=2.5];");
  HAS(r.out, "n0 -> n2;");
  HAS(r.out, "n2 -> n3;");
}

/* A long path first says where its time goes per group of names (the 16
 * largest, then the rest in one line), then lists its ops. */
Test(views, long_critical_path_starts_with_its_groups, .init = setup,
     .fini = teardown) {
  const char *g = synth(1000, 0, "s.json");
  cli_run r;
  RUN(&r, "dump", g, "--critical-path");
  cr_assert_eq(r.status, 0, "%s", r.err);
  /* every layer is 18 ops of the path, 82500 ns of cost hints */
  HAS(r.out, " ns over ");
  HAS(r.out, " ops\n  by group (1 name component; 49 groups, the largest "
             "first):\n    group 'h0': 18 ops, 82500 ns, 2.2%\n"
             "    group 'h1': 18 ops, 82500 ns, 2.2%\n");
  cr_assert_eq(count(r.out, "\n    group '"), 16, "%s", r.out);
  unsigned n = 0, more = 0, rest = 0, sum = 0;
  cr_assert_eq(sscanf(r.out, "critical path by cost hints: %*u ns over %u", &n),
               1, "%s", r.out);
  for (const char *p = strstr(r.out, "\n    group '"); p;
       p = strstr(p + 1, "\n    group '")) {
    unsigned k;
    cr_assert_eq(sscanf(p, "\n    group '%*[^']': %u ops", &k), 1);
    sum += k;
  }
  const char *m = strstr(r.out, "\n    ... (");
  cr_assert_not_null(m, "%s", r.out);
  cr_assert_eq(sscanf(m, "\n    ... (%u more groups: %u ops", &more, &rest), 2,
               "%s", m);
  cr_assert_eq(more, 49 - 16);
  cr_assert_eq(sum + rest, n, "%s", r.out);
  HAS(r.out, "  its ops in order:\n  op 0 'embed' rp.axpy  500 ns  0.0%\n");
  cr_assert_eq(count(r.out, "\n  op "), (int)n, "%s", r.out);
  /* with --group 2 (after the view): groups of two name components */
  RUN(&r, "dump", g, "--critical-path", "--group", "2");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "  by group (2 name components; ");
  HAS(r.out, "\n    group 'h0.mlp': 6 ops, 33000 ns, 0.9%\n");
}

Test(views, critical_path_by_measured_durations, .init = setup,
     .fini = teardown) {
  const char *g, *t;
  mlp(&g, &t);
  char gp[512];
  snprintf(gp, sizeof gp, "%s", g);
  cli_run r;
  RUN(&r, "dump", gp, "--critical-path", "--trace", t);
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "critical path by measured durations: ");
  /* Which source starts the path depends on the measured times (under
   * load a weight's replicate can outlast the batch gather): it is one of
   * the step's sources, the batch gathers and the weights' replicates. */
  const char *first = strstr(r.out, "\n  op ");
  cr_assert_not_null(first, "%s", r.out);
  const char *name = strchr(first, '\'');
  cr_assert_not_null(name, "%s", r.out);
  const char *name_end = strchr(name + 1, '\'');
  cr_assert_not_null(name_end, "%s", r.out);
  int src = !strncmp(name + 1, "batch.", 6) ||
            (name_end - name > 10 && !strncmp(name_end - 10, ".replicate", 10));
  cr_assert(src, "the path starts at a source of the step:\n%s", r.out);
  HAS(r.out, "'sgd' rp.sgd_multi");
  /* the shares of the path's ops add up to the whole */
  double sum = 0;
  for (const char *p = r.out; (p = strstr(p, " ns  ")) != NULL; p += 5)
    sum += strtod(p + 5, NULL);
  cr_assert(sum > 99.0 && sum < 101.0, "shares add up to %.1f%%", sum);
  cr_assert_null(strstr(r.err, "warning"), "%s", r.err);
  /* the trace without the events of 'sgd' (its last op): costed 0 ns,
   * said on stderr (the path went on as if it cost nothing) */
  char *tt = th_read_all(t, NULL);
  cJSON *doc = cJSON_Parse(tt);
  free(tt);
  cr_assert_not_null(doc);
  cJSON *evs = cJSON_GetObjectItem(doc, "traceEvents");
  cr_assert_not_null(evs);
  for (int i = cJSON_GetArraySize(evs) - 1; i >= 0; i--) {
    cJSON *e = cJSON_GetArrayItem(evs, i);
    cJSON *nm = cJSON_GetObjectItem(e, "name");
    if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "sgd"))
      cJSON_DeleteItemFromArray(evs, i);
  }
  char *cut = cJSON_PrintUnformatted(doc);
  cJSON_Delete(doc);
  const char *t2 = th_tmp_path("t_cut.json");
  write_text(t2, cut);
  free(cut);
  RUN(&r, "dump", gp, "--critical-path", "--trace", t2);
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.err, "ops have no event in the trace (the first: op ");
  HAS(r.err, "'sgd'): they count 0 ns");
}

#ifdef REPRISE_HAVE_CJSON
static rp_status spin_task(rp_task_ctx *ctx) {
  (void)ctx;
  volatile uint32_t x = 0;
  for (uint32_t i = 0; i < 20000; i++)
    x = x + i;
  return RP_OK;
}

/* An SPMD op of 8 shards whose replays run 3 (an interpolated shard
 * count): the trace holds an event for each of the 5 shards not run
 * ("not run (fewer shards)", about 0 us). The op's measured cost is the
 * mean of its runs, the events whose status is "ok", as the trace file
 * itself gives them (the 5 not run per replay halved it and more). */
Test(views, measured_cost_is_the_mean_of_the_shards_that_ran, .init = setup,
     .fini = teardown) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "spin", spin_task);
  rp_inst in;
  rp_rect r = rp_rect_1d(0, 7);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  rp_access acc = {in, RP_READ, RP_REDOP_NONE};
  rp_interp ip = {0, RP_INTERP_SHARDS, sizeof(uint32_t)};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(rt,
                          &(rp_launch){.task = t,
                                       .proc = RP_PROC_ANY,
                                       .accesses = &acc,
                                       .naccess = 1,
                                       .shards = 8,
                                       .interps = &ip,
                                       .ninterp = 1},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_trace_start(ex, 2));
  const uint32_t three = 3;
  for (int i = 0; i < 2; i++) {
    rp_event done;
    RP_CHECK(rp_replay(
        ex, &(rp_replay_args){.args = &three, .args_size = sizeof three},
        &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
  }
  char path[512];
  snprintf(path, sizeof path, "%s", th_tmp_path("spmd_trace.json"));
  RP_CHECK(rp_exec_trace_write(ex, path));
  /* what the file says: the runs' mean, and that shards were not run */
  char *text = th_read_all(path, NULL);
  cJSON *doc = cJSON_Parse(text);
  free(text);
  cr_assert_not_null(doc);
  double sum = 0;
  int runs = 0, not_run = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents")) {
    const cJSON *cat = cJSON_GetObjectItem(e, "cat");
    if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "task"))
      continue;
    const char *st =
        cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "status")
            ->valuestring;
    if (!strcmp(st, "ok"))
      sum += cJSON_GetObjectItem(e, "dur")->valuedouble * 1e3, runs++;
    else if (!strcmp(st, "not run (fewer shards)"))
      not_run++;
  }
  cJSON_Delete(doc);
  cr_assert_eq(runs, 2 * 3, "the shards run");
  cr_assert_eq(not_run, 2 * 5, "the shards not run have events");
  char gp[512];
  snprintf(gp, sizeof gp, "%s", th_tmp_path("spmd.json"));
  RP_CHECK(rp_graph_save(g, gp));
  cli_run cr;
  RUN(&cr, "dump", gp, "--critical-path", "--trace", path);
  cr_assert_eq(cr.status, 0, "%s", cr.err);
  const char *at = strstr(cr.out, "\n  op 0 spin  ");
  cr_assert_not_null(at, "%s", cr.out);
  double got = strtod(at + strlen("\n  op 0 spin  "), NULL);
  double want = sum / runs;
  cr_assert(got >= want - 1 && got <= want + 1,
            "op 0 costs %.0f ns, the mean of its %d runs is %.3f ns:\n%s", got,
            runs, want, cr.out);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

/* A trace armed and written before any replay was issued holds no replay
 * (rp_exec_trace_write writes it: only the tracks' names): reading it
 * fails saying so, not that it is no reprise trace. */
Test(views, a_trace_of_no_replay_says_so, .init = setup, .fini = teardown) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = th_task(rt, "spin", spin_task);
  rp_inst in;
  rp_rect r = rp_rect_1d(0, 7);
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  rp_access acc = {in, RP_READ, RP_REDOP_NONE};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .accesses = &acc, .naccess = 1}, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_trace_start(ex, 3));
  char path[512];
  snprintf(path, sizeof path, "%s", th_tmp_path("none.json"));
  RP_CHECK(rp_exec_trace_write(ex, path));
  cli_run cr;
  RUN(&cr, "dump", "--trace", path, "--summary");
  cr_assert_eq(cr.status, 1, "%s", cr.err);
  HAS(cr.err, "none.json' holds no replay: no \"X\" events "
              "(rp_exec_trace_write wrote it before any armed replay was "
              "issued)");
  cr_assert_null(strstr(cr.err, "not a reprise trace"), "%s", cr.err);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}
#endif

/* A trace that cannot be read or used is a failure (exit 1), as a graph
 * file's is; options that do not apply to a summary are usage errors. */
/* Writes head, then n copies of "0,", then "0" and tail. */
static void write_zeros(const char *path, const char *head, size_t n,
                        const char *tail) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(head, f);
  for (size_t i = 0; i < n; i++)
    fputs("0,", f);
  fprintf(f, "0%s", tail);
  cr_assert_eq(fclose(f), 0);
}

/* The largest resident set of the children waited for so far, in MiB. */
static long children_maxrss_mib(void) {
  struct rusage ru;
  cr_assert_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
  return ru.ru_maxrss / 1024;
}

/* A 12 MiB file of "0,0,0,..." (6M values) would take ~400 MiB of parse
 * tree: a graph file (over the loader's 4M values) and a trace (over one
 * value per 6 bytes) are refused by a scan before any parse. */
Test(views, files_of_too_many_values_are_refused_before_the_parse,
     .init = setup, .fini = teardown) {
  const size_t n = (size_t)6 << 20;
  char graph[512], trace[512];
  snprintf(graph, sizeof graph, "%s", th_tmp_path("zeros_graph.json"));
  snprintf(trace, sizeof trace, "%s", th_tmp_path("zeros_trace.json"));
  write_zeros(graph, "[", n, "]");
  write_zeros(trace, "{\"traceEvents\": [", n, "]}");
  cli_run r;
  RUN(&r, "dump", graph);
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "RP_ERANGE");
  HAS(r.err, "more than 4194304 JSON values (at byte 8388606)");
  RUN(&r, "dump", "--trace", trace, "--summary");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "JSON values (at byte");
  long mib = children_maxrss_mib();
  cr_assert_lt(mib, 200, "a child's resident set reached %ld MiB", mib);
  unlink(graph), unlink(trace);
}

Test(views, bad_traces_fail_with_exit_1, .init = setup, .fini = teardown) {
  const char *g = diamond("d.json");
  char gp[512];
  snprintf(gp, sizeof gp, "%s", g);
  const char *bad = th_tmp_path("bad.json");
  write_text(bad, "{\"traceEvents\": [ {\"ph\": \"X\", ");
  cli_run r;
  RUN(&r, "dump", gp, "--critical-path", "--trace", bad);
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "': not JSON: the text ends early");
  write_text(bad, "{\"traceEvents\": 5}");
  RUN(&r, "dump", "--trace", bad, "--summary");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "not a reprise trace: no \"traceEvents\" array");
  write_text(bad, "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\"}]}");
  RUN(&r, "dump", "--trace", bad, "--summary");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "an \"X\" event without name, tid, ts or dur");
  /* exactly one JSON document, no NUL; each event's numbers in range,
   * the event named by its index */
#define EV(op, dur)                                                            \
  "{\"ph\": \"X\", \"name\": \"a\", \"cat\": \"task\", \"tid\": 0, "           \
  "\"ts\": 0, \"dur\": " dur ", \"args\": {\"op\": " op "}}"
  static const char *const malformed[][2] = {
      {"{\"traceEvents\": [" EV("0", "1") "]} junk",
       "': not JSON: text after the document at byte 107"},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\\u0000b\"}]}",
       "': a \\u0000 escape (NUL) inside a string at byte 39"},
      {"{\"traceEvents\": [" EV("0", "1") ", " EV("1e300", "1") "]}",
       "traceEvents[1] is an \"X\" event whose args.op or args.replay is "
       "not a whole number"},
      {"{\"traceEvents\": [" EV("0.5", "1") "]}", "traceEvents[0] is an"},
      {"{\"traceEvents\": [" EV("-1", "1") "]}", "traceEvents[0] is an"},
      {"{\"traceEvents\": [" EV("0", "-5") "]}",
       "traceEvents[0] is an \"X\" event whose dur is negative"},
      /* an index of another type, or a task's op missing */
      {"{\"traceEvents\": [" EV("\"copy\"", "1") "]}",
       "traceEvents[0] is an \"X\" event whose args.op or args.replay is "
       "not a whole number"},
      {"{\"traceEvents\": [" EV("null", "1") "]}", "traceEvents[0] is an"},
      {"{\"traceEvents\": [" EV("0, \"replay\": \"B\"", "1") "]}",
       "whose args.op or args.replay is not a whole number"},
      {"{\"traceEvents\": [" EV(
           "0",
           "1") ", {\"ph\": \"X\", \"name\": "
                "\"a\", \"cat\": \"task\", \"tid\": 0, \"ts\": 0, \"dur\": 1, "
                "\"ares\": {\"op\": 1}}]}",
       "traceEvents[1] is a task or copy event without args.op"},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"cat\": "
       "\"copy\", \"tid\": 0, \"ts\": 0, \"dur\": 1}]}",
       "traceEvents[0] is a task or copy event without args.op"},
      {"", "': not JSON: an empty file"}};
#undef EV
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
    write_text(bad, malformed[i][0]);
    RUN(&r, "dump", gp, "--critical-path", "--trace", bad);
    cr_assert_eq(r.status, 1, "case %zu: %s", i, r.err);
    cr_assert(strstr(r.err, malformed[i][1]), "case %zu: no '%s' in %s", i,
              malformed[i][1], r.err);
  }
  static const char raw_nul[] = /* a raw NUL byte inside a string */
      "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\0b\"}]}";
  FILE *nul = fopen(bad, "wb");
  cr_assert_not_null(nul);
  fwrite(raw_nul, 1, sizeof raw_nul - 1, nul);
  fclose(nul);
  RUN(&r, "dump", "--trace", bad, "--summary");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "': a NUL byte at byte 39");
  RUN(&r, "dump", "--trace", th_tmp_path("missing.json"), "--summary");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "cannot read the trace");
  /* a trace of another graph */
  write_text(bad, "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"x\", "
                  "\"cat\": \"task\", \"tid\": 0, \"ts\": 0, \"dur\": 1, "
                  "\"args\": {\"op\": 9}}]}");
  RUN(&r, "dump", gp, "--critical-path", "--trace", bad);
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "the trace names op 9 ('x'), the graph has 4 ops");
  /* an op in range under another name: another graph's trace, for the
   * critical path and for a summary given the graph */
  write_text(bad, "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"nope\", "
                  "\"cat\": \"task\", \"tid\": 0, \"ts\": 0, \"dur\": 1, "
                  "\"args\": {\"op\": 0}}]}");
  RUN(&r, "dump", gp, "--critical-path", "--trace", bad);
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "the trace's op 0 is 'nope', the graph's is");
  RUN(&r, "dump", gp, "--trace", bad, "--summary");
  cr_assert_eq(r.status, 1, "%s", r.err);
  HAS(r.err, "not a trace of this graph");
  const char *extra[][2] = {{"--format", "json"},
                            {"--stats", NULL},
                            {"--lint", NULL},
                            {"--critical-path", NULL},
                            {"--schedule", NULL}};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
    const char *args[8] = {"dump",      "--trace",   bad,
                           "--summary", extra[i][0], extra[i][1]};
    run_cli(&r, args);
    cr_assert_eq(r.status, 2, "%s: %s", extra[i][0], r.err);
    HAS(r.err, "summary");
    /* with a graph: the same options are refused, not dropped */
    const char *gargs[8] = {"dump",      gp,          "--trace",  bad,
                            "--summary", extra[i][0], extra[i][1]};
    int crit = !strcmp(extra[i][0], "--critical-path");
    run_cli(&r, gargs);
    cr_assert_eq(r.status, crit ? 1 : 2, "%s with a graph: %s", extra[i][0],
                 r.err);
  }
}

/* Times and thread ids the summary would misread are refused, the event
 * named: a negative ts or dur, a tid that is not a whole number in
 * 0..2^32-1 (in "X" events and in the "thread_name" metadata naming a
 * track); the largest tid passes. */
Test(views, bad_times_and_tids_are_named, .init = setup, .fini = teardown) {
  const char *bad = th_tmp_path("bad.json");
#define META(tid)                                                              \
  "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": " tid       \
  ", \"args\": {\"name\": \"worker 1\"}}"
#define EVT(tid, ts, dur)                                                      \
  "{\"ph\": \"X\", \"name\": \"a\", \"cat\": \"task\", \"tid\": " tid          \
  ", \"ts\": " ts ", \"dur\": " dur ", \"args\": {\"op\": 0}}"
  static const char *const cases[][2] = {
      {EVT("0", "-5", "1"), "traceEvents[0] is an \"X\" event whose ts is "
                            "negative or not below 1e15 us"},
      {EVT("0", "1e999", "1"), "traceEvents[0] is an \"X\" event whose ts"},
      {EVT("0", "1e20", "1"), "traceEvents[0] is an \"X\" event whose ts"},
      {EVT("0", "0", "-0.5"), "traceEvents[0] is an \"X\" event whose dur is "
                              "negative"},
      {EVT("1.7", "0", "1"), "traceEvents[0] is an \"X\" event whose tid is "
                             "not a whole number in 0..4294967295"},
      {EVT("4294967296", "0", "1"), "traceEvents[0] is an \"X\" event whose "
                                    "tid"},
      {EVT("-1", "0", "1"), "traceEvents[0] is an \"X\" event whose tid"},
      {META("-1.0") ", " EVT("0", "0", "1"),
       "traceEvents[0] is a \"thread_name\" event whose tid is not a whole "
       "number in 0..4294967295"},
      {META("1e20") ", " EVT("0", "0", "1"),
       "traceEvents[0] is a \"thread_name\" event whose tid"},
      {EVT("0", "0", "1") ", " META("4294967296"),
       "traceEvents[1] is a \"thread_name\" event whose tid"},
      {META("0.5") ", " EVT("0", "0", "1"),
       "traceEvents[0] is a \"thread_name\" event whose tid"},
      {META("\"1\"") ", " EVT("0", "0", "1"),
       "traceEvents[0] is a \"thread_name\" event whose tid"}};
  cli_run r;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[1024];
    snprintf(text, sizeof text, "{\"traceEvents\": [%s]}", cases[i][0]);
    write_text(bad, text);
    RUN(&r, "dump", "--trace", bad, "--summary");
    cr_assert_eq(r.status, 1, "case %zu: %s", i, r.err);
    cr_assert(strstr(r.err, cases[i][1]), "case %zu: no '%s' in %s", i,
              cases[i][1], r.err);
    HAS(r.err, "is not a reprise trace");
  }
  write_text(bad, "{\"traceEvents\": [" META("4294967295") ", " EVT(
                      "4294967295", "0", "1") "]}");
  RUN(&r, "dump", "--trace", bad, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
#undef META
#undef EVT
}

/* ---- summary ---- */

/* Two workers, replay 0 over [0, 30) us: worker 0 busy [0, 10) and
 * [20, 30) (one 10 us gap), worker 1 [0, 30); replay 1 over [100, 110):
 * worker 1 [100, 110) (the 70 us between the replays is no idle gap).
 * Ops a.x, a.y (10 us each), b (30 us, then 10 us). */
static const char TRACE[] =
    "{\"traceEvents\": [\n"
    "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, "
    "\"args\": {\"name\": \"worker 0\"}},\n"
    "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, "
    "\"args\": {\"name\": \"worker 1\"}},\n"
    "{\"name\": \"replay 0\", \"cat\": \"replay\", \"ph\": \"X\", \"pid\": "
    "1, \"tid\": 1000, \"ts\": 0, \"dur\": 30, \"args\": {\"replay\": 0}},\n"
    "{\"name\": \"a.x\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 1, "
    "\"tid\": 0, \"ts\": 0, \"dur\": 10, \"args\": {\"op\": 0, \"task\": "
    "\"rp.gemm\", \"replay\": 0}},\n"
    "{\"name\": \"a.y\", \"cat\": \"copy\", \"ph\": \"X\", \"pid\": 1, "
    "\"tid\": 0, \"ts\": 20, \"dur\": 10, \"args\": {\"op\": 1, \"replay\": "
    "0}},\n"
    "{\"name\": \"b\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 1, \"tid\": "
    "1, \"ts\": 0, \"dur\": 30, \"args\": {\"op\": 2, \"task\": \"rp.fill\", "
    "\"replay\": 0}},\n"
    "{\"name\": \"replay 1\", \"cat\": \"replay\", \"ph\": \"X\", \"pid\": "
    "1, \"tid\": 1001, \"ts\": 100, \"dur\": 10, \"args\": {\"replay\": "
    "1}},\n"
    "{\"name\": \"b\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 1, \"tid\": "
    "1, \"ts\": 100, \"dur\": 10, \"args\": {\"op\": 2, \"task\": "
    "\"rp.fill\", \"replay\": 1}}\n"
    "]}\n";

Test(views, summary_of_a_known_trace, .init = setup, .fini = teardown) {
  const char *t = th_tmp_path("t.json");
  write_text(t, TRACE);
  cli_run r;
  RUN(&r, "dump", "--trace", t, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "trace: 2 replays traced, 6 events, 40.0 us in replays (110.0 "
             "us from the first to the last)\n");
  /* per replay: b (30 + 10) / 2, a (10 + 10) / 2 */
  HAS(r.out, "time per group (depth 1) (2; per replay, share of op time):\n"
             "  b                                      20.0 us   66.7%  (2 "
             "events)\n"
             "  a                                      10.0 us   33.3%  (2 "
             "events)\n");
  HAS(r.out, "  rp.fill                                20.0 us   66.7%");
  HAS(r.out, "  rp.gemm                                 5.0 us   16.7%");
  HAS(r.out, "  copy                                    5.0 us   16.7%");
  /* worker 0: between a.x and a.y in replay 0, and all of replay 1 */
  HAS(r.out, "worker 0                 busy       20.0 us of 40.0 us ( 50.0%); "
             "2 idle gaps over 5 us, 20.0 us in all");
  HAS(r.out, "worker 1                 busy       40.0 us of 40.0 us (100.0%); "
             "0 idle gaps");
  HAS(r.out, "largest idle gap: 10.0 us on worker 0 at 10.0 us, before 'a.y'");
  HAS(r.out, "slowest replays:\n  replay 0           30.0 us\n"
             "  replay 1           10.0 us\n");
  RUN(&r, "dump", "--trace", t, "--summary", "--group", "2");
  HAS(r.out, "  a.x                                     5.0 us");
}

/* A worker done early waits for the replay's end, one that starts late
 * waits from its start: both idle. */
Test(views, summary_counts_idle_at_a_replays_start_and_end, .init = setup,
     .fini = teardown) {
  const char *t = th_tmp_path("t.json");
  write_text(t,
             "{\"traceEvents\": [\n"
             "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": "
             "0, \"args\": {\"name\": \"worker 0\"}},\n"
             "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": "
             "1, \"args\": {\"name\": \"worker 1\"}},\n"
             "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": "
             "2, \"args\": {\"name\": \"worker 2\"}},\n"
             "{\"name\": \"replay 0\", \"cat\": \"replay\", \"ph\": \"X\", "
             "\"pid\": 1, \"tid\": 1000, \"ts\": 0, \"dur\": 100, \"args\": "
             "{\"replay\": 0}},\n"
             "{\"name\": \"long\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": "
             "1, \"tid\": 0, \"ts\": 0, \"dur\": 100, \"args\": {\"op\": 0, "
             "\"task\": \"rp.gemm\", \"replay\": 0}},\n"
             "{\"name\": \"early\", \"cat\": \"task\", \"ph\": \"X\", "
             "\"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 10, \"args\": "
             "{\"op\": 1, \"task\": \"rp.gemm\", \"replay\": 0}},\n"
             "{\"name\": \"late\", \"cat\": \"task\", \"ph\": \"X\", \"pid\": "
             "1, \"tid\": 2, \"ts\": 70, \"dur\": 30, \"args\": {\"op\": 2, "
             "\"task\": \"rp.gemm\", \"replay\": 0}}\n"
             "]}\n");
  cli_run r;
  RUN(&r, "dump", "--trace", t, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "worker 0                 busy      100.0 us of 100.0 us "
             "(100.0%); 0 idle gaps");
  HAS(r.out, "worker 1                 busy       10.0 us of 100.0 us ( "
             "10.0%); 1 idle gaps over 5 us, 90.0 us in all");
  HAS(r.out, "worker 2                 busy       30.0 us of 100.0 us ( "
             "30.0%); 1 idle gaps over 5 us, 70.0 us in all");
  HAS(r.out, "largest idle gap: 90.0 us on worker 1 at 10.0 us, to the end "
             "of the replay");
}

/* A GPU trace as the writer shapes it (replay/dump.c): a launcher's launch
 * call on the worker's track, the segment's device span on the GPU's;
 * the second segment has no device times (its host launch time stands in,
 * 0 us long). */
static const char GPU_TRACE[] =
    "{\"traceEvents\": [\n"
    "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, "
    "\"args\": {\"name\": \"worker 0\"}},\n"
    "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, "
    "\"args\": {\"name\": \"gpu 0 (processor 1)\"}},\n"
    "{\"name\": \"replay 0\", \"cat\": \"replay\", \"ph\": \"X\", \"pid\": "
    "1, \"tid\": 1000, \"ts\": 0, \"dur\": 100, \"args\": {\"replay\": 0}},\n"
    "{\"name\": \"launch segment 0\", \"cat\": \"launch\", \"ph\": \"X\", "
    "\"pid\": 1, \"tid\": 0, \"ts\": 0, \"dur\": 4, \"args\": {\"segment\": "
    "0, \"replay\": 0, \"ops\": 3, \"status\": \"ok\"}},\n"
    "{\"name\": \"segment 0\", \"cat\": \"gpu\", \"ph\": \"X\", \"pid\": 1, "
    "\"tid\": 1, \"ts\": 5, \"dur\": 60, \"args\": {\"segment\": 0, "
    "\"replay\": 0, \"ops\": 3, \"device_times\": true}},\n"
    "{\"name\": \"launch segment 1\", \"cat\": \"launch\", \"ph\": \"X\", "
    "\"pid\": 1, \"tid\": 0, \"ts\": 70, \"dur\": 6, \"args\": {\"segment\": "
    "1, \"replay\": 0, \"ops\": 2, \"status\": \"ok\"}},\n"
    "{\"name\": \"segment 1\", \"cat\": \"gpu\", \"ph\": \"X\", \"pid\": 1, "
    "\"tid\": 1, \"ts\": 70, \"dur\": 0, \"args\": {\"segment\": 1, "
    "\"replay\": 0, \"ops\": 2, \"device_times\": false}}\n"
    "]}\n";

Test(views, summary_of_a_gpu_trace, .init = setup, .fini = teardown) {
  const char *t = th_tmp_path("t.json");
  write_text(t, GPU_TRACE);
  cli_run r;
  RUN(&r, "dump", "--trace", t, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "GPU segments: 2 traced (1 with device times): 60.0 us per "
             "replay on the devices, 10.0 us per replay launching them\n");
  HAS(r.out, "gpu 0 (processor 1)      busy       60.0 us of 100.0 us");
  HAS(r.out, "worker 0                 busy       10.0 us of 100.0 us");
}

Test(views, summary_of_a_recorded_step, .init = setup, .fini = teardown) {
  const char *g, *t;
  mlp(&g, &t);
  cli_run r;
  RUN(&r, "dump", "--trace", t, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "trace: 4 replays traced");
  HAS(r.out, "time per group (depth 1)");
  HAS(r.out, "  fc1 ");
  HAS(r.out, "time per task");
  HAS(r.out, "  rp.gemm ");
  HAS(r.out, "  worker 0 ");
  HAS(r.out, "  worker 1 ");
  HAS(r.out, "slowest replays:\n  replay ");
}

/* ---- diff ---- */

Test(views, diff_same_differs_and_errors, .init = setup, .fini = teardown) {
  const char *a = synth(200, 0, "a.json");
  char ap[512];
  snprintf(ap, sizeof ap, "%s", a);
  const char *b = synth(200, 1, "b.json");
  cli_run r;
  RUN(&r, "dump", ap, "--diff", ap);
  cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
  HAS(r.out, "no differences (180 ops, ");
  /* a report that cannot be written is 2, not 1 ("they differ") */
  RUN(&r, "dump", ap, "--diff", ap, "-o", "/tmp");
  cr_assert_eq(r.status, 2, "%s%s", r.out, r.err);
  HAS(r.err, "a directory");
  RUN(&r, "dump", ap, "--diff", b);
  cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
  HAS(r.out, "~ op 1 'h0.attn.in.copy' (copy) -> op 1 'h0.attn.in.copy2' "
             "(copy): renamed\n");
  HAS(r.out, "+ edge op 0 'embed' (rp.axpy) -> op 5 'h0.attn.softmax' "
             "(rp.axpy)\n");
  HAS(r.out, "diff: 2 differences: ops +0 -0 ~1, edges +1 -0 ~0, instances "
             "+0 -0 ~0, ports +0 -0 ~0\n");
  /* 16 lines of each kind, then how many more; the summary counts all */
  const char *d = diamond("d.json");
  RUN(&r, "dump", ap, "--diff", d);
  cr_assert_eq(r.status, 1);
  HAS(r.out, "- op 0 'embed' (rp.axpy)");
  /* and their count per group of names, 16 groups a screen */
  HAS(r.out, "- op 15 'h1.attn.score' (rp.axpy)\n"
             "... (168 more op differences)\n"
             "op differences by group (1 name component; 16 groups):\n"
             "  group 'embed': +0 -1 ~0\n  group 'h0': +0 -22 ~0\n");
  HAS(r.out, "  group 'd': +1 -0 ~0\n- edge ");
  cr_assert_eq(count(r.out, "\n- op ") + count(r.out, "\n+ op "), 15, "%s",
               r.out); /* and the first line */
  cr_assert_eq(count(r.out, "- edge ") + count(r.out, "+ edge "), 16, "%s",
               r.out);
  HAS(r.out, "... (199 more edge differences)\n");
  HAS(r.out, "... (58 more instance differences)\n");
  HAS(r.out, "diff: 473 differences: ops +4 -180 ~0, edges +4 -211 ~0, "
             "instances +0 -72 ~2, ports +0 -0 ~0\n");
  cr_assert_leq(count(r.out, "\n"), 16 * 3 + 4 + 17, "%s", r.out);
  RUN(&r, "dump", d, "--diff", ap); /* the other way: additions shown */
  cr_assert_eq(r.status, 1);
  HAS(r.out, "+ op 0 'embed' (rp.axpy)");
  RUN(&r, "dump", ap, "--diff", th_tmp_path("missing.json"));
  cr_assert_eq(r.status, 2);
  HAS(r.err, "cannot load");
  HAS(r.err, "missing.json");
  const char *junk = th_tmp_path("junk.json");
  write_text(junk, "{\"graph\": ");
  RUN(&r, "dump", ap, "--diff", junk);
  cr_assert_eq(r.status, 2);
  HAS(r.err, "junk.json");
}

#ifdef REPRISE_HAVE_CJSON
/* dst: the graph file src with edit applied to its "graph" object and the
 * (optional) checksum left out, as a hand edit would leave it. */
static void edited(const char *src, const char *dst, void (*edit)(cJSON *)) {
  char *text = th_read_all(src, NULL);
  cJSON *doc = cJSON_Parse(text);
  free(text);
  cr_assert_not_null(doc);
  cJSON_DeleteItemFromObjectCaseSensitive(doc, "checksum");
  edit(cJSON_GetObjectItemCaseSensitive(doc, "graph"));
  char *out = cJSON_Print(doc);
  cJSON_Delete(doc);
  cr_assert_not_null(out);
  write_text(dst, out);
  free(out);
}

static cJSON *nth(cJSON *g, const char *arr, int i) {
  cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(g, arr), i);
  cr_assert_not_null(o, "%s[%d]", arr, i);
  return o;
}

static void set(cJSON *o, const char *key, cJSON *v) {
  cr_assert(cJSON_ReplaceItemInObjectCaseSensitive(o, key, v), "%s", key);
}

static void no_edit(cJSON *g) {
  (void)g;
}
static void copy_rect(cJSON *g) { /* op 2: a copy, its domain a rectangle */
  cJSON *o = nth(g, "ops", 2), *r = cJSON_CreateObject();
  const double lo[2] = {0, 0}, hi[2] = {63, 1};
  cJSON_AddItemToObject(r, "lo", cJSON_CreateDoubleArray(lo, 2));
  cJSON_AddItemToObject(r, "hi", cJSON_CreateDoubleArray(hi, 2));
  set(o, "domain", cJSON_CreateString("rect"));
  set(o, "rect", r);
}
static void no_interps(cJSON *g) {
  set(nth(g, "ops", 0), "interps", cJSON_CreateArray());
}
static void workspace(cJSON *g) {
  set(nth(g, "ops", 20), "workspace_bytes", cJSON_CreateNumber(4096));
}
static void strides(cJSON *g) { /* s0.loss's one element: still dense */
  const double st[1] = {2};
  cJSON *in;
  cJSON_ArrayForEach(in, cJSON_GetObjectItemCaseSensitive(g, "instances")) {
    const char *name =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(in, "name"));
    if (name && !strcmp(name, "s0.loss"))
      set(in, "strides", cJSON_CreateDoubleArray(st, 1));
  }
}
static void asked_for(cJSON *g) { /* every edge without "inferred" */
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(g, "edges")) {
    while (cJSON_GetArraySize(e) > 2)
      cJSON_DeleteItemFromArray(e, 2);
  }
}
static void shift_groups(cJSON *g) { /* operators numbered from 2 */
  cJSON *o;
  cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(g, "ops")) {
    cJSON *grp = cJSON_GetObjectItemCaseSensitive(o, "group");
    if (cJSON_IsNumber(grp) && grp->valuedouble > 0)
      set(o, "group", cJSON_CreateNumber(grp->valuedouble + 1));
  }
}
static void reverse_array(cJSON *o, const char *key) {
  cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *r = cJSON_CreateArray();
  for (int n = cJSON_GetArraySize(a); n > 0; n--)
    cJSON_AddItemToArray(r, cJSON_DetachItemFromArray(a, n - 1));
  set(o, key, r);
}
static void port_order(cJSON *g) { /* the ops 'loss' binds, reversed */
  reverse_array(nth(g, "postconditions", 0), "ops");
}
static void edge_order(cJSON *g) {
  reverse_array(g, "edges");
}
/* Every number of array a written as a decimal string (58 -> "58"). */
static void items_as_strings(cJSON *a) {
  for (int i = 0; i < cJSON_GetArraySize(a); i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.0f", cJSON_GetArrayItem(a, i)->valuedouble);
    cJSON_ReplaceItemInArray(a, i, cJSON_CreateString(buf));
  }
}
static void port_op_strings(cJSON *g) { /* "58", as the loader reads it */
  items_as_strings(
      cJSON_GetObjectItemCaseSensitive(nth(g, "postconditions", 0), "ops"));
}
static void args_upper(cJSON *g) { /* hex digits "0A", as the loader reads */
  cJSON *o;
  cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(g, "ops")) {
    cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "args");
    if (!cJSON_IsString(a)) /* a copy */
      continue;
    char *u = strdup(a->valuestring);
    for (char *c = u; *c; c++)
      *c = (char)toupper((unsigned char)*c);
    set(o, "args", cJSON_CreateString(u));
    free(u);
  }
}
static void as_string(cJSON *o, const char *key) { /* 4096 -> "4096" */
  char buf[32];
  snprintf(buf, sizeof buf, "%.0f",
           cJSON_GetObjectItemCaseSensitive(o, key)->valuedouble);
  set(o, key, cJSON_CreateString(buf));
}
static void ints_as_strings(cJSON *g) { /* as the loader reads them */
  as_string(nth(g, "ops", 20), "workspace_bytes");
  as_string(nth(g, "ops", 20), "workspace_align");
  as_string(
      cJSON_GetArrayItem(
          cJSON_GetObjectItemCaseSensitive(nth(g, "ops", 0), "interps"), 0),
      "bytes");
  items_as_strings(
      cJSON_GetObjectItemCaseSensitive(nth(g, "instances", 0), "strides"));
}
static void port_ops(cJSON *g) { /* 'loss' binds op 57 for its last op */
  cJSON *ops =
      cJSON_GetObjectItemCaseSensitive(nth(g, "postconditions", 0), "ops");
  cJSON_ReplaceItemInArray(ops, cJSON_GetArraySize(ops) - 1,
                           cJSON_CreateNumber(57));
}
static void key_order(cJSON *g) { /* op 3's keys in reverse: no change */
  cJSON *o = nth(g, "ops", 3), *r = cJSON_CreateObject();
  while (o->child) {
    cJSON *last = o->child;
    while (last->next)
      last = last->next;
    cJSON_AddItemToObject(r, last->string, cJSON_DetachItemViaPointer(o, last));
  }
  cJSON_ReplaceItemInArray(cJSON_GetObjectItemCaseSensitive(g, "ops"), 3, r);
}
#endif

/* --diff sees every field that changes what a replay does, not only the
 * ones the dump's model holds: a copy's domain, an op's interpolations
 * or workspace, an instance's strides, an edge asked for against one
 * capture inferred, a port binding another op; the order of an object's
 * keys, operators numbered otherwise, the order the file lists edges or a
 * port's ops in, integers written as decimal strings or arguments in
 * upper-case hex (all of which the loader reads) is no change. */
Test(views, diff_sees_every_field_of_the_file, .init = setup,
     .fini = teardown) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON");
#else
  const char *g0, *t0;
  mlp(&g0, &t0);
  char g[512], b[512];
  snprintf(g, sizeof g, "%s", g0);
  snprintf(b, sizeof b, "%s", th_tmp_path("b.json"));
  static const struct {
    void (*edit)(cJSON *);
    const char *want;
  } cases[] = {
      {no_edit, "no differences (61 ops"},
      {key_order, "no differences (61 ops"},
      {shift_groups, "no differences (61 ops"},
      {edge_order, "no differences (61 ops"},
      {port_order, "no differences (61 ops"},
      {port_op_strings, "no differences (61 ops"},
      {args_upper, "no differences (61 ops"},
      {ints_as_strings, "no differences (61 ops"},
      {port_ops, "~ postcondition 'loss': its bound ops differ\n"},
      {copy_rect, "~ op 2 'batch.x.split' (copy) -> op 2 'batch.x.split' "
                  "(copy): domain rect\n"},
      {no_interps, "(rp.gather_rows): interps\n"},
      {workspace, "~ op 20 'fc2.fwd.s0' (rp.gemm) -> op 20 'fc2.fwd.s0' "
                  "(rp.gemm): workspace_bytes\n"},
      {strides, "~ instance 32 's0.loss' (f32 [0..0]) -> instance 32 "
                "'s0.loss' (f32 [0..0]): strides\n"},
      {asked_for, ": inferred in A, asked for in B\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    edited(g, b, cases[i].edit);
    cli_run r;
    RUN(&r, "dump", g, "--diff", b);
    cr_assert_eq(r.status, i < 8 ? 0 : 1, "case %zu: %s%s", i, r.out, r.err);
    cr_assert(strstr(r.out, cases[i].want), "case %zu: no '%s' in:\n%s", i,
              cases[i].want, r.out);
  }
#endif
}

#ifdef REPRISE_HAVE_CJSON
static void unname_op_2(cJSON *g) {
  cJSON_DeleteItemFromObjectCaseSensitive(nth(g, "ops", 2), "name");
}
#endif

/* The group --group calls (unnamed) is a --focus name too. */
Test(views, focus_on_the_unnamed_ops, .init = setup, .fini = teardown) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON");
#else
  char d[512], u[512];
  snprintf(d, sizeof d, "%s", diamond("d.json"));
  snprintf(u, sizeof u, "%s", th_tmp_path("u.json"));
  edited(d, u, unname_op_2);
  cli_run r;
  RUN(&r, "dump", u, "--group");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "group '" DV_UNNAMED "': 1 ops");
  RUN(&r, "dump", u, "--focus", DV_UNNAMED, "--depth", "0");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "op 2");
  cr_assert(!strstr(r.out, "op 1 'b'"), "%s", r.out);
#endif
}

/* ---- the page ---- */

static int have(const char *prog) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
  return system(cmd) == 0;
}

/* How many entries of dir start with prefix. */
static int count_dir_prefix(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* Whether process pid runs (a zombie nobody reaps counts as gone). */
static int alive(int pid) {
  char p[64], st[512];
  snprintf(p, sizeof p, "/proc/%d/stat", pid);
  FILE *f = fopen(p, "r");
  if (!f)
    return 0;
  size_t n = fread(st, 1, sizeof st - 1, f);
  fclose(f);
  st[n] = 0;
  const char *c = strrchr(st, ')');
  return c && c[1] == ' ' && c[2] != 'Z' && c[2] != 'X';
}

static int html_ready(void) {
  if (!have("dot") || access("/usr/share/javascript/d3/d3.min.js", R_OK)) {
    cr_skip_test("--format html needs Graphviz's dot and libjs-d3 (the "
                 "Makefile's DEB_PKGS install them)");
    return 0;
  }
  return 1;
}

static const char *page(const char *graph, const char *name) {
  const char *out = th_tmp_path(name);
  char g[512], o[512];
  snprintf(g, sizeof g, "%s", graph);
  snprintf(o, sizeof o, "%s", out);
  cli_run r;
  RUN(&r, "dump", g, "--format", "html", "-o", o);
  cr_assert_eq(r.status, 0, "%s", r.err);
  return th_tmp_path(name);
}

/* A large graph's DOT bounds dot's layout (a few hundred nodes and edges
 * took dot minutes, the html page's forever); a small one keeps dot's
 * defaults. */
Test(views, large_graphs_bound_the_layout, .init = setup, .fini = teardown) {
  char g[512];
  snprintf(g, sizeof g, "%s", synth(200, 0, "big.json"));
  cli_run r;
  RUN(&r, "dump", g, "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "graph [nslimit=2, nslimit1=2, mclimit=0.3, splines=line];");
  RUN(&r, "dump", g, "--group", "9", "--format", "dot"); /* a view */
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "nslimit=2");
  RUN(&r, "dump", diamond("small.json"), "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert_null(strstr(r.out, "nslimit"), "%s", r.out);
}

/* A dump stopped by SIGTERM while dot lays out its page (a dot that
 * sleeps, first on PATH): dot is stopped with it, and neither dot's input
 * nor the page's temporary file is left (both used to stay, dot running
 * on). */
Test(views, html_stopped_leaves_no_dot_and_no_file, .init = setup,
     .fini = teardown, .timeout = 60) {
  if (!html_ready())
    return;
  char dir[512], bin[600], dot[700], pidf[700], g[512], out[600];
  snprintf(dir, sizeof dir, "%s", th_tmp_path("stop"));
  cr_assert_eq(mkdir(dir, 0700), 0);
  snprintf(bin, sizeof bin, "%s/bin", dir);
  cr_assert_eq(mkdir(bin, 0700), 0);
  snprintf(dot, sizeof dot, "%s/dot", bin);
  snprintf(pidf, sizeof pidf, "%s/dot.pid", dir);
  char script[2400];
  snprintf(script, sizeof script,
           "#!/bin/sh\necho $$ > %s.new\nmv %s.new %s\nexec sleep 60\n", pidf,
           pidf, pidf);
  write_text(dot, script);
  cr_assert_eq(chmod(dot, 0755), 0);
  snprintf(g, sizeof g, "%s", diamond("stop.json"));
  snprintf(out, sizeof out, "%s/page.html", dir);
  char path[4096];
  snprintf(path, sizeof path, "%s:%s", bin,
           getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    setenv("PATH", path, 1);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1), dup2(null, 2);
    execl(REPRISE_CLI_PATH, "reprise", "dump", g, "--format", "html", "-o", out,
          (char *)NULL);
    _exit(127);
  }
  FILE *pf = NULL;
  for (int i = 0; i < 3000 && !(pf = fopen(pidf, "r")); i++)
    usleep(10000);
  cr_assert_not_null(pf, "the sleeping dot never started");
  int dpid = 0;
  cr_assert_eq(fscanf(pf, "%d", &dpid), 1);
  fclose(pf);
  cr_assert_eq(count_dir_prefix(dir, ".page.html.tmp."), 1,
               "the page's temporary file exists while dot runs");
  cr_assert_eq(kill(pid, SIGTERM), 0);
  int ws = 0;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM, "status %#x", ws);
  cr_assert_eq(count_dir_prefix(dir, ".page.html.tmp."), 0,
               "the page's temporary file is left");
  cr_assert_neq(access(out, F_OK), 0, "a page was written");
  int gone = 0;
  for (int i = 0; i < 500 && !(gone = !alive(dpid)); i++)
    usleep(10000);
  cr_assert(gone, "dot %d runs on after the dump stopped", dpid);
}

/* Names starting with '.' group under the empty name '': every view
 * shows that group (the DOT and HTML views read the op of a group). */
Test(views, a_group_of_the_empty_name_is_drawn, .init = setup,
     .fini = teardown) {
  static const char *const names[4] = {".x", ".", "c.y", ""};
  char g[512];
  snprintf(g, sizeof g, "%s", diamond_named("dots.json", names));
  cli_run r;
  RUN(&r, "dump", g, "--group", "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "label=\"''\\n2 ops"), "%s", r.out);
  RUN(&r, "dump", g, "--group");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "group '': 2 ops"), "%s", r.out);
  RUN(&r, "dump", g, "--focus", "c.y", "--depth", "1");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "op 3: rp.scale"), "unnamed as 'op 3': %s", r.out);
  if (!html_ready())
    return;
  RUN(&r, "dump", g, "--format", "html", "-o", th_tmp_path("dots.html"));
  cr_assert_eq(r.status, 0, "%s", r.err);
}

Test(views, html_is_self_contained, .init = setup, .fini = teardown) {
  if (!html_ready())
    return;
  const char *p = page(synth(200, 0, "s.json"), "s.html");
  char *html = th_read_all(p, NULL);
  cr_assert_eq(strncmp(html, "<!DOCTYPE html>", 15), 0);
  HAS(html, "var d3={version:\"3.");
  HAS(html, "var RP_DATA = {");
  HAS(html, "var RP_SVG = [");
  /* nothing fetched: no external script, style, image or font */
  cr_assert_null(strstr(html, "<script src"));
  cr_assert_null(strstr(html, "<link"));
  cr_assert_null(strstr(html, "@import"));
  cr_assert_null(strstr(html, "xlink:href=\"http"));
  /* one layout per level: the step, 8 layers, their groups */
  cr_assert(count(html, "<svg>") >= 9);
  free(html);
}

/* dot's SVG of a level (an op node on the critical path, a group node, an
 * edge), as the page holds it: no comments, titles, background, svg
 * attributes or attributes the page's style sets; the rounded box a
 * <rect>, the straight edge a line, coordinates to one decimal, the
 * polygon without its closing point, attributes in ' quotes (no \" in
 * the page's JSON); the ids, classes and the graph's transform the
 * script reads kept. */
Test(views, page_svg_keeps_what_the_script_reads) {
  static const char svg[] =
      "<svg width=\"94pt\" height=\"116pt\"\n viewBox=\"0.00 0.00 94.00 "
      "116.00\" xmlns=\"http://www.w3.org/2000/svg\" "
      "xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n"
      "<g id=\"view0\" class=\"graph\" transform=\"scale(1 1) rotate(0) "
      "translate(4 112)\">\n<title>v0</title>\n"
      "<polygon fill=\"white\" stroke=\"transparent\" points=\"-4,4 "
      "-4,-112 90,-112 90,4 -4,4\"/>\n"
      "<!-- o1 -->\n<g id=\"o1\" class=\"node crit\">\n<title>o1</title>\n"
      "<path fill=\"#eef3fb\" stroke=\"black\" d=\"M74,-108C74,-108 12,-108 "
      "12,-108 6,-108 0,-102 0,-96 0,-96 0,-84 0,-84 0,-78 6,-72 12,-72 "
      "12,-72 74,-72 74,-72 80,-72 86,-78 86,-84 86,-84 86,-96 86,-96 "
      "86,-102 80,-108 74,-108\"/>\n"
      "<text text-anchor=\"middle\" x=\"43\" y=\"-93\" "
      "font-family=\"Helvetica,sans-Serif\" font-size=\"10.00\">h3.a&amp;"
      "b's</text>\n</g>\n"
      "<!-- v2 -->\n<g id=\"v2\" class=\"node grp\">\n<title>v2</title>\n"
      "<polygon fill=\"#dde8f7\" stroke=\"black\" points=\"70,-36 20,-36 "
      "16,-32 16,0 66,0 70,-4 70,-36\"/>\n"
      "<polyline fill=\"none\" stroke=\"black\" points=\"66,-32 16,-32 "
      "\"/>\n</g>\n"
      "<!-- o1&#45;&gt;v2 -->\n<g id=\"e0_0\" class=\"edge crit\">\n"
      "<title>o1&#45;&gt;v2</title>\n"
      "<path fill=\"none\" stroke=\"black\" d=\"M43,-71.7C43,-63.98 "
      "43,-54.71 43,-46.11\"/>\n"
      "<polygon fill=\"black\" stroke=\"black\" points=\"46.5,-46.1 "
      "43,-36.1 39.5,-46.1 46.5,-46.1\"/>\n</g>\n"
      "<g id=\"e0_1\" class=\"edge\">\n"
      "<path fill=\"none\" stroke=\"#d62728\" d=\"M1,2C30,2 30,40 "
      "1,40\"/>\n</g>\n</g>\n</svg>\n";
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  cr_assert_eq(dv_svg_json(f, svg, sizeof svg - 1), 0);
  fclose(f);
  cr_assert_str_eq(
      text, "<svg><g id='view0' class='graph' transform='scale(1 1) rotate(0) "
            "translate(4 112)'>"
            "<g id='o1' class='node crit'>"
            "<rect x='0' y='-108' width='86' height='36' rx='12'/>"
            "<text x='43' y='-93'>h3.a&amp;b's<\\/text><\\/g>"
            "<g id='v2' class='node grp'>"
            "<polygon points='70,-36 20,-36 16,-32 16,0 66,0 70,-4'/>"
            "<polyline points='66,-32 16,-32'/><\\/g>"
            "<g id='e0_0' class='edge crit'><path d='M43,-71.7L43,-46.1'/>"
            "<polygon points='46.5,-46.1 43,-36.1 39.5,-46.1'/><\\/g>"
            "<g id='e0_1' class='edge'>"
            "<path stroke='#d62728' d='M1,2C30,2 30,40 1,40'/><\\/g><\\/g>"
            "<\\/svg>");
  free(text);
  /* len bytes are read, not up to a NUL: a comment or title that the
   * slice cuts runs to its end, and nothing past it is written */
  static const char *const cut[] = {"<!-- a --><g>", "<title>a</title><g>",
                                    "<text x=\"1\">a</text> <g>"};
  static const char *const want[] = {"", "", "<text x='1'>a<\\/text>"};
  for (int i = 0; i < 3; i++) {
    f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(dv_svg_json(f, cut[i], strlen(cut[i]) - (i < 2 ? 6 : 4)), 0);
    fclose(f);
    cr_assert_str_eq(text, want[i], "%s", cut[i]);
    free(text);
  }
}

/* The page's SVGs hold what a reader sees and the script reads, not
 * dot's comments, titles and per-element style: their bytes per op of a
 * 994-op step are under 450 (1,105 when the SVGs were dot's as written). */
Test(views, page_svgs_are_compact, .init = setup, .fini = teardown) {
  if (!html_ready())
    return;
  const char *p = page(synth(1000, 0, "s.json"), "s.html");
  char *html = th_read_all(p, NULL);
  char *a = strstr(html, "var RP_SVG = [");
  cr_assert_not_null(a);
  char *b = strstr(a, "];\n");
  cr_assert_not_null(b);
  *b = 0;
  cr_assert_null(strstr(a, "<title>"));
  cr_assert_null(strstr(a, "<!--"));
  cr_assert_null(strstr(a, "font-family"));
  cr_assert_null(strstr(a, "stroke=\\\"black"));
  cr_assert_null(strstr(a, "stroke='black"));
  cr_assert_eq(count(a, "<svg>"), count(a, "class='graph'"));
  size_t bytes = (size_t)(b - a);
  cr_assert_lt(bytes, 450u * SYNTH_OPS, "%zu bytes of SVG for %u ops", bytes,
               SYNTH_OPS);
  free(html);
}

Test(views, html_without_dot_is_an_error, .init = setup, .fini = teardown) {
  const char *g = diamond("d.json");
  char gp[512];
  snprintf(gp, sizeof gp, "%s", g);
  char *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  setenv("PATH", "/nonexistent", 1);
  cli_run r;
  RUN(&r, "dump", gp, "--format", "html", "-o", th_tmp_path("d.html"));
  setenv("PATH", path, 1); /* the teardown runs rm */
  free(path);
  cr_assert_eq(r.status, 1);
  HAS(r.err, "Graphviz's dot (Debian package graphviz), which is not on PATH");
}

/* A dot on PATH that cannot be executed (a script whose interpreter is
 * missing) is said with the failing exec and its errno, from the child
 * (it was "dot failed (status 127)"), and no page is written. */
Test(views, html_with_a_dot_that_cannot_run_says_why, .init = setup,
     .fini = teardown) {
  if (access("/usr/share/javascript/d3/d3.min.js", R_OK))
    cr_skip_test("--format html needs libjs-d3");
  const char *g = diamond("d.json");
  char gp[512], dir[512], dot[600], out[512];
  snprintf(gp, sizeof gp, "%s", g);
  snprintf(out, sizeof out, "%s", th_tmp_path("d.html"));
  snprintf(dir, sizeof dir, "%s", th_tmp_path("bin"));
  cr_assert_eq(mkdir(dir, 0700), 0);
  snprintf(dot, sizeof dot, "%s/dot", dir);
  FILE *f = fopen(dot, "w");
  cr_assert_not_null(f);
  fputs("#!/nonexistent/sh\n", f);
  fclose(f);
  cr_assert_eq(chmod(dot, 0755), 0);
  char *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  setenv("PATH", dir, 1); /* that dot alone: execlp tries no other */
  cli_run r;
  RUN(&r, "dump", gp, "--format", "html", "-o", out);
  setenv("PATH", path, 1); /* the teardown runs rm */
  free(path);
  cr_assert_eq(r.status, 1, "%s", r.err);
  char want[256];
  snprintf(want, sizeof want,
           "reprise dump: --format html: cannot run dot: exec: %s\n",
           strerror(ENOENT));
  cr_assert_str_eq(r.err, want);
  cr_assert_eq(access(out, F_OK), -1, "a page was written");
}

static const char *chromium(void) {
  static const char *const names[] = {"chromium-headless-shell", "chromium",
                                      "chromium-browser", NULL};
  for (int i = 0; names[i]; i++)
    if (have(names[i]))
      return names[i];
  return NULL;
}

/* The page in headless Chromium with a self-test; its <pre id=selftest>. */
static char *browse(const char *html, const char *selftest) {
  const char *exe = chromium();
  if (!exe) {
    cr_skip_test("no chromium binary (the Makefile's DEB_PKGS install "
                 "chromium-headless-shell)");
    return NULL;
  }
  char dom[512], profile[512], log[512], cmd[4096];
  snprintf(dom, sizeof dom, "%s", th_tmp_path("dom.html"));
  snprintf(profile, sizeof profile, "%s", th_tmp_path("profile"));
  snprintf(log, sizeof log, "%s", th_tmp_path("chromium.log"));
  /* a loaded machine can take minutes to start a browser: a generous
   * limit, and the browser's own output shown when it fails */
  snprintf(cmd, sizeof cmd,
           "timeout 600 %s --headless --no-sandbox --disable-gpu "
           "--disable-dev-shm-usage "
           "--user-data-dir='%s' --dump-dom 'file://%s#selftest=%s' >'%s' "
           "2>'%s'",
           exe, profile, html, selftest, dom, log);
  int rc = system(cmd);
  if (rc != 0) {
    char *err = th_read_all(log, NULL);
    size_t n = strlen(err);
    cr_assert_fail("%s failed (status %d); its output ends:\n%s", cmd, rc,
                   err + (n > 2000 ? n - 2000 : 0));
  }
  char *text = th_read_all(dom, NULL);
  char *pre = strstr(text, "<pre id=\"selftest\">");
  cr_assert_not_null(pre, "no self-test block in the page's DOM");
  char *end = strstr(pre, "</pre>");
  cr_assert_not_null(end);
  *end = 0;
  char *out = strdup(pre + strlen("<pre id=\"selftest\">"));
  free(text);
  return out;
}

Test(views, page_in_a_browser_searches_expands_highlights, .init = setup,
     .fini = teardown) {
  if (!html_ready())
    return;
  char html[512];
  snprintf(html, sizeof html, "%s", page(synth(1000, 0, "s.json"), "s.html"));
  char *st = browse(html, "search:h1.attn.qkv;expand:h1.attn;"
                          "select:h1.attn.score;crit");
  if (!st)
    return;
  char line[128];
  snprintf(line, sizeof line, "nodes %u\nops %u\n", SYNTH_LAYERS + 4,
           SYNTH_OPS);
  HAS(st, line);
  HAS(st, "' in view 'h1.attn'");
  HAS(st, "search h1.attn.qkv: found op ");
  HAS(st, "expand h1.attn: 10 nodes, 10 ops shown");
  /* in the view of h1.attn: h1.attn.score runs after qkv and the copy
   * (h1.ln1 is a node of h1's view), before softmax and proj, and, along
   * paths through ops outside the view (the layers above, the loss),
   * before the block's backward ops of the view: 7 (they counted edges
   * inside the view only: 2) */
  HAS(st, "select h1.attn.score: 2 ancestors, 7 descendants");
  HAS(st, "crit: ");
  HAS(st, "selftest done");
  free(st);
}

/* A level of more than 100 nodes (the step at --group 2: 274 nodes) is
 * drawn as parts of at most 100 (dot took 25 to 40 s for 400 nodes, and
 * minutes past that); every op is still found. */
Test(views, page_draws_a_wide_level_in_parts, .init = setup, .fini = teardown) {
  if (!html_ready())
    return;
  char g[512], html[512];
  snprintf(g, sizeof g, "%s", synth(1000, 0, "s.json"));
  snprintf(html, sizeof html, "%s", th_tmp_path("w.html"));
  cli_run r;
  RUN(&r, "dump", g, "--group", "2");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "view: ops grouped by 2 name components (994 ops): 274 nodes");
  RUN(&r, "dump", g, "--format", "html", "--group", "2", "-o", html);
  cr_assert_eq(r.status, 0, "%s", r.err);
  char *st = browse(html, "search:h40.attn.qkv;expand:step part 2 of 3");
  if (!st)
    return;
  HAS(st, "nodes 3\n");
  HAS(st, "search h40.attn.qkv: found op ");
  HAS(st, "expand step part 2 of 3: ");
  HAS(st, "selftest done");
  free(st);
}

Test(views, page_of_a_focus_holds_only_its_ops, .init = setup,
     .fini = teardown) {
  if (!html_ready())
    return;
  char g[512], html[512];
  snprintf(g, sizeof g, "%s", synth(200, 0, "s.json"));
  snprintf(html, sizeof html, "%s", th_tmp_path("f.html"));
  cli_run r;
  RUN(&r, "dump", g, "--format", "html", "--group", "2", "--focus", "h3.attn",
      "--depth", "0", "-o", html);
  cr_assert_eq(r.status, 0, "%s", r.err);
  char *st = browse(html, "search:h5.attn.qkv;search:h3.attn.qkv");
  if (!st)
    return;
  HAS(st, "nodes 1\n"); /* the group h3.attn, nothing around it */
  HAS(st, "search h5.attn.qkv: not found");
  HAS(st, "search h3.attn.qkv: found op ");
  free(st);
}

Test(views, page_of_the_recorded_mlp_step, .init = setup, .fini = teardown) {
  if (!html_ready())
    return;
  const char *g, *t;
  mlp(&g, &t);
  char html[512];
  snprintf(html, sizeof html, "%s", page(g, "mlp.html"));
  char *st = browse(html, "search:fc1.fwd.s0;expand:fc2");
  if (!st)
    return;
  HAS(st, "nodes 18\nops 61\n");
  HAS(st, "search fc1.fwd.s0: found op ");
  HAS(st, "expand fc2: ");
  free(st);
}

/* ---- a recorded GPT step ---- */

#ifdef REPRISE_HAVE_CJSON
/* A small GPT step (2 heads, width 16, context 16, batch 2; one iteration)
 * recorded by `reprise train --model gpt` on a generated text, with its
 * trace when trace is not NULL; its path, in a static buffer per call. */
static const char *gpt_step(const char *name, const char *layers,
                            const char *procs, const char *trace) {
  const char *txt = th_tmp_path("corpus.txt");
  if (access(txt, R_OK)) {
    static const char *const words[] = {"the",   "quick", "brown", "fox",
                                        "jumps", "over",  "a",     "lazy",
                                        "dog",   "and",   "runs",  "away"};
    FILE *f = fopen(txt, "w");
    cr_assert_not_null(f);
    uint32_t x = 1;
    for (int i = 0; i < 600; i++) {
      x = x * 1103515245u + 12345u;
      fprintf(f, "%s%c", words[(x >> 16) % 12], i % 12 == 11 ? '\n' : ' ');
    }
    fclose(f);
  }
  static char paths[4][512];
  static int next;
  char *g = paths[next++ % 4];
  char t[512], tx[512];
  snprintf(g, 512, "%s", th_tmp_path(name));
  snprintf(tx, sizeof tx, "%s", txt);
  if (trace)
    snprintf(t, sizeof t, "%s", th_tmp_path(trace));
  const char *args[] = {"train", "--model",
                        "gpt",   "--layers",
                        layers,  "--heads",
                        "2",     "--width",
                        "16",    "--context",
                        "16",    "--batch",
                        "2",     "--iters",
                        "1",     "--sample",
                        "0",     "--procs",
                        procs,   "--text",
                        tx,      "--save-graph",
                        g,       trace ? "--trace" : NULL,
                        t,       NULL};
  cli_run r;
  run_cli(&r, args);
  cr_assert_eq(r.status, 0, "train --model gpt: %s", r.err);
  return g;
}

/* The op names and edges of a graph file, read with cJSON (not through
 * the dump's model). */
typedef struct step_ops {
  uint32_t nops, nedges;
  char (*name)[RP_NAME_MAX + 1];
  uint32_t (*edge)[2];
} step_ops;

static step_ops load_ops(const char *path) {
  char *text = th_read_all(path, NULL);
  cJSON *doc = cJSON_Parse(text);
  cr_assert_not_null(doc, "%s is not JSON", path);
  const cJSON *g = cJSON_GetObjectItem(doc, "graph"), *x;
  const cJSON *ops = cJSON_GetObjectItem(g, "ops");
  const cJSON *edges = cJSON_GetObjectItem(g, "edges");
  step_ops s = {(uint32_t)cJSON_GetArraySize(ops),
                (uint32_t)cJSON_GetArraySize(edges), NULL, NULL};
  s.name = calloc(s.nops, sizeof *s.name);
  s.edge = calloc(s.nedges ? s.nedges : 1, sizeof *s.edge);
  cr_assert(s.name && s.edge);
  uint32_t i = 0;
  cJSON_ArrayForEach(x, ops) {
    const cJSON *n = cJSON_GetObjectItem(x, "name");
    snprintf(s.name[i++], RP_NAME_MAX + 1, "%s",
             cJSON_IsString(n) ? n->valuestring : "");
  }
  i = 0;
  cJSON_ArrayForEach(x, edges) {
    s.edge[i][0] = (uint32_t)cJSON_GetArrayItem(x, 0)->valueint;
    s.edge[i++][1] = (uint32_t)cJSON_GetArrayItem(x, 1)->valueint;
  }
  cJSON_Delete(doc);
  free(text);
  return s;
}

static void free_ops(step_ops *s) {
  free(s->name);
  free(s->edge);
}

/* The first depth dotted components of name (the whole name if it has
 * fewer), written here rather than taken from dv_group_key (the steps
 * these tests record run on one processor: no shard suffixes). */
static void key_of(const char *name, int depth, char *out, size_t cap) {
  size_t n = 0;
  int parts = 1;
  while (name[n] && !(name[n] == '.' && parts++ == depth))
    n++;
  snprintf(out, cap, "%.*s", (int)n, name);
}

/* Among the ops under prefix (all when ""), grouped at depth: the number
 * of groups (*nodes) and of those that are one op named as the group
 * (*single: shown as the op). */
static void groups_of(const step_ops *s, const char *prefix, int depth,
                      uint32_t *nodes, uint32_t *single) {
  size_t pl = strlen(prefix);
  *nodes = *single = 0;
  char k[RP_NAME_MAX + 1], k2[RP_NAME_MAX + 1];
  for (uint32_t i = 0; i < s->nops; i++) {
    if (pl && (strncmp(s->name[i], prefix, pl) ||
               (s->name[i][pl] && s->name[i][pl] != '.')))
      continue;
    key_of(s->name[i], depth, k, sizeof k);
    uint32_t first = i, members = 0;
    for (uint32_t j = 0; j < s->nops; j++) {
      key_of(s->name[j], depth, k2, sizeof k2);
      if (strcmp(k, k2) == 0) {
        first = j < first ? j : first;
        members++;
      }
    }
    if (first != i)
      continue; /* counted at its first op */
    (*nodes)++;
    *single += members == 1 && strcmp(s->name[i], k) == 0;
  }
}

static int has_edge(const step_ops *s, uint32_t a, uint32_t b) {
  for (uint32_t i = 0; i < s->nedges; i++)
    if (s->edge[i][0] == a && s->edge[i][1] == b)
      return 1;
  return 0;
}

Test(views, group_of_a_recorded_gpt_step, .init = setup, .fini = teardown) {
  const char *g = gpt_step("gpt.json", "2", "1", NULL);
  step_ops s = load_ops(g);
  uint32_t nodes, single;
  groups_of(&s, "", 1, &nodes, &single);
  cli_run r;
  RUN(&r, "dump", g, "--group", "1");
  cr_assert_eq(r.status, 0, "%s", r.err);
  char head[160];
  snprintf(head, sizeof head, "(%u ops): %u nodes (%u groups, %u ops)", s.nops,
           nodes, nodes - single, single);
  HAS(r.out, head);
  /* one line per node, in the order of their first op: the layers, then
   * the final layernorm; their op counts add up to the step's */
  uint32_t sum = 0, lines = 0;
  const char *h0 = NULL, *h1 = NULL, *lnf = NULL;
  for (const char *p = r.out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    unsigned n;
    if (sscanf(p, "group '%*[^']': %u ops", &n) == 1) {
      sum += n;
      lines++;
    } else if (strncmp(p, "op ", 3) == 0) {
      sum++;
      lines++;
    }
    if (strncmp(p, "group 'h0': ", 12) == 0)
      h0 = p;
    else if (strncmp(p, "group 'h1': ", 12) == 0)
      h1 = p;
    else if (strncmp(p, "group 'lnf': ", 13) == 0)
      lnf = p;
  }
  cr_assert_eq(lines, nodes, "%s", r.out);
  cr_assert_eq(sum, s.nops, "%s", r.out);
  cr_assert(h0 && h1 && lnf && h0 < h1 && h1 < lnf, "%s", r.out);
  /* the layer's ops: those named h1.* */
  uint32_t in_h1 = 0;
  for (uint32_t i = 0; i < s.nops; i++)
    in_h1 += strncmp(s.name[i], "h1.", 3) == 0;
  char line[64];
  snprintf(line, sizeof line, "group 'h1': %u ops", in_h1);
  HAS(r.out, line);
  free_ops(&s);
}

Test(views, critical_path_of_a_recorded_gpt_step, .init = setup,
     .fini = teardown) {
  const char *g = gpt_step("gpt.json", "2", "1", "trace.json");
  step_ops s = load_ops(g);
  char t[512];
  snprintf(t, sizeof t, "%s", th_tmp_path("trace.json"));
  cli_run r;
  RUN(&r, "dump", g, "--critical-path", "--trace", t);
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "critical path by measured durations: ");
  /* a path of the graph: each op depends on the one before it */
  uint32_t prev = UINT32_MAX, n = 0;
  int saw_h0 = 0, saw_h1 = 0;
  for (const char *p = strstr(r.out, "\n  op "); p;
       p = strstr(p + 1, "\n  op ")) {
    unsigned op;
    cr_assert_eq(sscanf(p, "\n  op %u", &op), 1);
    cr_assert_lt(op, s.nops);
    if (prev != UINT32_MAX)
      cr_assert(has_edge(&s, prev, op), "no edge op %u -> op %u:\n%s", prev, op,
                r.out);
    saw_h0 |= strncmp(s.name[op], "h0.", 3) == 0;
    saw_h1 |= strncmp(s.name[op], "h1.", 3) == 0;
    prev = op;
    n++;
  }
  char head[96];
  snprintf(head, sizeof head, " ns over %u ops\n", n);
  HAS(r.out, head);
  /* the forward and backward run through both layers */
  cr_assert(n > 2 && saw_h0 && saw_h1, "%s", r.out);
  /* the summary of the same trace, per layer */
  RUN(&r, "dump", "--trace", t, "--summary");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "trace: 1 replays traced");
  HAS(r.out, "time per group (depth 1)");
  HAS(r.out, "\n  h0 ");
  HAS(r.out, "\n  h1 ");
  HAS(r.out, "\n  lnf ");
  free_ops(&s);
}

Test(views, diff_of_recorded_gpt_steps, .init = setup, .fini = teardown) {
  char a[512];
  snprintf(a, sizeof a, "%s", gpt_step("a.json", "2", "1", NULL));
  const char *b = gpt_step("b.json", "2", "1", NULL);
  cli_run r;
  RUN(&r, "dump", a, "--diff", b);
  cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
  HAS(r.out, "no differences (");
  const char *c = gpt_step("c.json", "3", "1", NULL);
  step_ops s = load_ops(c);
  uint32_t in_h2 = 0;
  for (uint32_t i = 0; i < s.nops; i++)
    in_h2 += strncmp(s.name[i], "h2.", 3) == 0;
  cr_assert_gt(in_h2, 0);
  RUN(&r, "dump", a, "--diff", c);
  cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
  /* every op of layer h2 is added: after the changed ops (lnf, adamw),
   * the first named up to 16 op lines, the rest counted */
  int chg = count(r.out, "~ op "); /* the first line has no newline */
  cr_assert(chg > 0 && chg < 16, "%s", r.out);
  cr_assert_eq(count(r.out, "\n+ op "), 16 - chg, "%s", r.out);
  HAS(r.out, "'h2.ln1' (gpt.");
  HAS(r.out, "'h2.attn.qkv' (gpt.");
  char line[64];
  snprintf(line, sizeof line, "... (%u more op differences)\n",
           in_h2 + (uint32_t)chg - 16);
  HAS(r.out, line);
  snprintf(line, sizeof line, "ops +%u -0 ~%d", in_h2, chg);
  HAS(r.out, line);
  free_ops(&s);
}

/* A diff of thousands of op differences counts them per group of names:
 * a step with 45 more layers says which, each with its 22 ops. */
Test(views, diff_counts_op_differences_per_group, .init = setup,
     .fini = teardown) {
  char a[512], b[512];
  snprintf(a, sizeof a, "%s", synth(1000, 0, "a.json"));
  snprintf(b, sizeof b, "%s", synth(1000 + 22, 0, "b.json"));
  cli_run r;
  RUN(&r, "dump", a, "--diff", b);
  cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
  /* one layer more: exactly its 22 ops, in one group */
  HAS(r.out, "... (6 more op differences)\n"
             "op differences by group (1 name component; 1 group):\n"
             "  group 'h45': +22 -0 ~0\n");
  HAS(r.out, "ops +22 -0 ~0,");
  snprintf(b, sizeof b, "%s", synth(2000, 0, "b.json"));
  RUN(&r, "dump", a, "--diff", b);
  cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
  /* 45 layers more: 16 groups named, the rest counted */
  HAS(r.out, "op differences by group (1 name component; 45 groups):\n"
             "  group 'h45': +22 -0 ~0\n  group 'h46': +22 -0 ~0\n");
  HAS(r.out, "  group 'h60': +22 -0 ~0\n"
             "  ... (29 more groups: +638 -0 ~0)\n");
  HAS(r.out, "ops +990 -0 ~0,");
  /* 16 or fewer op differences: every one is shown, no groups */
  RUN(&r, "dump", a, "--diff", a);
  cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
  cr_assert_null(strstr(r.out, "by group"), "%s", r.out);
}

/* The synthetic step of `layers` layers with every op's name removed. */
static const char *synth_unnamed(uint32_t layers, const char *name) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_graph *g;
  RP_CHECK(synth_step_build(rt, layers, &g));
  for (uint32_t i = 0; i < rp_graph_op_count(g); i++)
    RP_CHECK(rp_graph_set_op_name(g, i, NULL));
  const char *path = th_tmp_path(name);
  RP_CHECK(rp_graph_save(g, path));
  synth_free(rt, g);
  th_destroy(rt);
  return path;
}

Test(views, diff_counts_unnamed_ops_in_one_group, .init = setup,
     .fini = teardown) {
  char a[512], b[512];
  snprintf(a, sizeof a, "%s", synth_unnamed(2, "a.json"));
  snprintf(b, sizeof b, "%s", synth_unnamed(4, "b.json"));
  cli_run r;
  RUN(&r, "dump", a, "--diff", b);
  cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
  /* every op difference is an unnamed op's: one group, its counts those
   * of the summary line */
  HAS(r.out, "op differences by group (1 name component; 1 group):\n"
             "  group '(unnamed)': +");
  const char *g = strstr(r.out, "  group '(unnamed)': ");
  const char *s = strstr(r.out, "ops +");
  cr_assert(g && s, "%s", r.out);
  unsigned ga, gd, gc, sa, sd, sc;
  cr_assert_eq(sscanf(g, "  group '(unnamed)': +%u -%u ~%u", &ga, &gd, &gc), 3);
  cr_assert_eq(sscanf(s, "ops +%u -%u ~%u", &sa, &sd, &sc), 3);
  cr_assert(ga == sa && gd == sd && gc == sc && ga + gd + gc > 16,
            "group +%u -%u ~%u, summary +%u -%u ~%u", ga, gd, gc, sa, sd, sc);
  cr_assert_gt(ga, gd); /* two layers more */
}

Test(views, lint_of_recorded_gpt_steps_is_clean, .init = setup,
     .fini = teardown) {
  static const char *const procs[] = {"1", "2"};
  for (int i = 0; i < 2; i++) {
    const char *g = gpt_step("gpt.json", "2", procs[i], NULL);
    step_ops s = load_ops(g);
    char head[96];
    snprintf(head, sizeof head, "lint: no findings (%u ops, ", s.nops);
    cli_run r;
    RUN(&r, "dump", g, "--lint", "--strict");
    cr_assert_eq(r.status, 0, "--procs %s: %s%s", procs[i], r.out, r.err);
    HAS(r.out, head);
    free_ops(&s);
  }
}

Test(views, page_of_a_recorded_gpt_step, .init = setup, .fini = teardown) {
  if (!html_ready())
    return;
  const char *g = gpt_step("gpt.json", "2", "1", NULL);
  step_ops s = load_ops(g);
  char html[512];
  snprintf(html, sizeof html, "%s", page(g, "gpt.html"));
  char *st = browse(html, "search:h1.attn;expand:h1;expand:h1.attn;"
                          "expand:h1.attn.qkv");
  if (!st) {
    free_ops(&s);
    return;
  }
  /* the first view: one node per top-level group */
  uint32_t nodes, single;
  groups_of(&s, "", 1, &nodes, &single);
  char line[128];
  snprintf(line, sizeof line, "nodes %u\nops %u\n", nodes, s.nops);
  HAS(st, line);
  HAS(st, "search h1.attn: found op ");
  HAS(st, " 'h1.attn' in view 'h1.attn'");
  /* h1 opens on its sub-groups, h1.attn on its ops and groups, down to
   * h1.attn.qkv's ops (forward and backward) */
  static const char *const open[] = {"h1", "h1.attn", "h1.attn.qkv"};
  for (int d = 0; d < 3; d++) {
    groups_of(&s, open[d], d + 2, &nodes, &single);
    snprintf(line, sizeof line, "expand %s: %u nodes, %u ops shown\n", open[d],
             nodes, single);
    HAS(st, line);
  }
  cr_assert_eq(single, 2); /* h1.attn.qkv and h1.attn.qkv.bwd */
  free(st);
  free_ops(&s);
}
#endif

/* A --diff report that cannot be written to standard output (a full disk)
 * is said once, and the exit is 2, as for -o: 1 says the graphs differ. */
Test(views, diff_to_a_full_stdout_is_said_once_and_exit_2, .init = setup,
     .fini = teardown) {
  if (access("/dev/full", W_OK) != 0)
    cr_skip_test("no writable /dev/full on this machine");
  const char *a = synth(200, 0, "a.json");
  char ap[512];
  snprintf(ap, sizeof ap, "%s", a);
  const char *d = diamond("d.json");
  const char *said = "reprise dump: writing the report to standard output "
                     "failed: No space left on device";
  cli_run r;
  /* the report of a large difference fails while it is written, that of
   * none at the flush */
  RUN_TO(&r, "/dev/full", "dump", ap, "--diff", d);
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert_eq(count(r.err, said), 1, "%s", r.err);
  RUN_TO(&r, "/dev/full", "dump", ap, "--diff", ap);
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert_eq(count(r.err, said), 1, "%s", r.err);
  RUN_TO(&r, "/dev/full", "dump", ap);
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert_eq(count(r.err, "No space left on device"), 1, "%s", r.err);
}

/* The help says which formats --stats and --lint print beside: html is a
 * view of its own, which they do not go with. */
Test(views, help_says_html_is_a_view_without_stats_or_lint, .init = setup,
     .fini = teardown) {
  cli_run r;
  RUN(&r, "dump", "--help");
  cr_assert_eq(r.status, 0, "%s", r.err);
  HAS(r.out, "--stats and --lint print instead of the dump unless --format\n"
             "text, dot or json is given too");
  HAS(r.out, "--format html, --group, --focus and --critical-path are views "
             "of\ntheir own: not with --stats, --lint or --schedule.\n");
  const char *d = diamond("d.json");
  char dp[512];
  snprintf(dp, sizeof dp, "%s", d);
  RUN(&r, "dump", dp, "--format", "html", "--stats", "-o",
      th_tmp_path("s.html"));
  cr_assert_eq(r.status, 2, "%s", r.err);
  HAS(r.err, "are views of their own: not with --schedule, --stats or "
             "--lint");
}

/* A trace's names reach an error quoted: escape sequences and bytes that
 * are no UTF-8 as \xNN, never raw on the terminal. */
Test(views, trace_names_in_errors_are_escaped, .init = setup,
     .fini = teardown) {
  const char *g = diamond("d.json");
  char gp[512];
  snprintf(gp, sizeof gp, "%s", g);
  const char *t = th_tmp_path("t.json");
  static const char *const cases[][2] = {
      {"0", "--trace: the trace's op 0 is '\\x1b]0;pwned\\x07\\x80', the "
            "graph's is 'a'"},
      {"9", "--trace: the trace names op 9 ('\\x1b]0;pwned\\x07\\x80'), the "
            "graph has 4 ops"}};
  for (size_t i = 0; i < 2; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"traceEvents\": [{\"ph\": \"X\", \"name\": "
             "\"\\u001b]0;pwned\\u0007\x80\", \"cat\": \"task\", \"tid\": 0, "
             "\"ts\": 0, \"dur\": 1, \"args\": {\"op\": %s}}]}",
             cases[i][0]);
    write_text(t, text);
    cli_run r;
    RUN(&r, "dump", gp, "--critical-path", "--trace", t);
    cr_assert_eq(r.status, 1, "%s", r.err);
    HAS(r.err, cases[i][1]);
    for (const unsigned char *p = (const unsigned char *)r.err; *p; p++)
      cr_assert(*p == '\n' || (*p >= 0x20 && *p < 0x7f), "byte 0x%02x in %s",
                *p, r.err);
  }
}

/* Op names are data on the html page, never markup: a name holding
 * "</script>" cannot end the page's script, nor "<!--<script>" keep the
 * next "</script>" from ending it (the page's code would then be read as
 * part of its data). */
Test(views, html_names_do_not_end_or_nest_the_script, .init = setup,
     .fini = teardown) {
  if (!html_ready())
    return;
  static const char *const names[4] = {"a</script>b", "<!--<script>", "c", "d"};
  const char *p = page(diamond_named("tags.json", names), "tags.html");
  char *html = th_read_all(p, NULL);
  cr_assert_null(strstr(html, "a</script>"));
  cr_assert_null(strstr(html, "<!--<script"));
  HAS(html, "a<\\/script>b");
  HAS(html, "\\u003c!--<script>");
  /* the page's scripts: d3, the data, the code, each closed once */
  cr_assert_eq(count(html, "<script>\n"), 3);
  cr_assert_eq(count(html, "</script>"), 3);
  free(html);
}

/* The page's <title> names the graph file as the command line's messages
 * name files: its control bytes (C0, DEL, a C1 control) and bytes that
 * are not UTF-8 written \xNN, markup characters as entities (an escape
 * sequence in the name used to reach the page raw). */
Test(views, html_title_escapes_the_file_names_control_bytes, .init = setup,
     .fini = teardown) {
  if (!html_ready())
    return;
  const char *g = diamond("g\x1b[31m\x01\x7f<&\xc2\x9b\xff\xc3\xa9.json");
  const char *p = page(g, "title.html");
  char *html = th_read_all(p, NULL);
  const char *at = strstr(html, "<title>reprise: ");
  cr_assert_not_null(at);
  at += strlen("<title>reprise: ");
  const char *end = strstr(at, "</title>");
  cr_assert_not_null(end);
  char want[1024];
  snprintf(want, sizeof want, "%s",
           th_tmp_path("g\\x1b[31m\\x01\\x7f&lt;&amp;\\xc2\\x9b\\xff\xc3\xa9"
                       ".json"));
  cr_assert_eq((size_t)(end - at), strlen(want), "%.*s", (int)(end - at), at);
  cr_assert_eq(memcmp(at, want, strlen(want)), 0, "%.*s", (int)(end - at), at);
  free(html);
}

/* --format html: dot's input that cannot be written (the file size limit
 * reached) and dot's pipe that cannot be made (no descriptor left) each
 * fail with exit 1, naming the step and its cause; no page and no
 * temporary file is left. */
Test(views, html_whose_dot_cannot_be_fed_fails_naming_the_cause, .init = setup,
     .fini = teardown, .timeout = 120) {
  if (!html_ready())
    return;
  char dir[512], g[512], out[600];
  snprintf(dir, sizeof dir, "%s", th_tmp_path("feed"));
  cr_assert_eq(mkdir(dir, 0700), 0);
  snprintf(g, sizeof g, "%s", synth(200, 0, "feed.json"));
  snprintf(out, sizeof out, "%s/page.html", dir);
  struct rlimit old, lim;
  signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG */
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 4096;
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  cli_run r;
  RUN(&r, "dump", g, "--format", "html", "-o", out);
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_DFL);
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert_str_eq(r.err, "reprise dump: --format html: writing dot's input "
                          "failed: File too large\n");
  cr_assert_neq(access(out, F_OK), 0, "a page was written");
  cr_assert_eq(count_dir_prefix(dir, ".page.html.tmp."), 0,
               "the page's temporary file is left");
  /* descriptors 0, 1, 2, the page's temporary file and dot's input: none
   * left for the pipe */
  RUN_NOFILE(&r, 5, "dump", g, "--format", "html", "-o", out);
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert_str_eq(r.err, "reprise dump: --format html: pipe: Too many open "
                          "files\n");
  cr_assert_neq(access(out, F_OK), 0, "a page was written");
  cr_assert_eq(count_dir_prefix(dir, ".page.html.tmp."), 0,
               "the page's temporary file is left");
}
