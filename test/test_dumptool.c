/* Debugging tools: `reprise dump` (formats, --schedule, --stats,
 * --lint), REPRISE_DUMP, replay traces (rp_exec_trace_start/write) and
 * `reprise plot` / `reprise bench --plot`. The CLI is the built binary
 * (REPRISE_CLI_PATH); the lint's GPU checks also run on hand-built models
 * (tools/dump_lint.c), so they are tested without a GPU. Asserts
 * behaviour, never timings. */
#include "cli_run.h"
#include "helpers.h"

#include "kernels/tasks.h"
#include "tools/dump_model.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>
#endif

/* Internal (replay/trace.c): clock reads taken for traces. */
uint64_t rp__exec_trace_clock_reads(const rp_exec *ex);

/* ---- running the CLI ---- */

static int have_tool(const char *name) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
  return system(cmd) == 0;
}

/* ---- files ---- */

static void make_tmpdir(void) {
  th_tmpdir_make("/tmp/rp_dumptool_XXXXXX");
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

/* ---- graphs built in this process, saved for the CLI ---- */

typedef struct fixture {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_graph *g;
  rp_inst in[6]; /* f32 [0..15] each */
} fixture;

static void fx_init(fixture *fx) {
  fx->rt = th_cpu_runtime(2);
  RP_CHECK(rp_kernels_register(fx->rt, &fx->k));
  rp_mem sys;
  RP_CHECK(rp_mem_find(fx->rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect r = rp_rect_1d(0, 15);
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_create(fx->rt, sys, RP_F32, &r, NULL, &fx->in[i]));
  RP_CHECK(rp_graph_create(fx->rt, &fx->g));
}

static void fx_fini(fixture *fx) {
  RP_CHECK(rp_graph_destroy(fx->g));
  for (int i = 0; i < 6; i++)
    RP_CHECK(rp_instance_free(fx->rt, fx->in[i]));
  th_destroy(fx->rt);
}

static const rp_scalar_args SCALAR = {.value = 0.5f, .n = 0};

/* A built-in task on proc with accesses (inst index, privilege) pairs. */
static rp_op_id task_op(fixture *fx, rp_task_id t, rp_proc proc, uint64_t cost,
                        uint32_t n, const int *pairs) {
  rp_access acc[4];
  for (uint32_t i = 0; i < n; i++)
    acc[i] = (rp_access){fx->in[pairs[2 * i]], (rp_privilege)pairs[2 * i + 1],
                         RP_REDOP_NONE};
  rp_launch l = {.task = t,
                 .proc = proc,
                 .accesses = acc,
                 .naccess = n,
                 .args = &SCALAR,
                 .args_size = sizeof SCALAR,
                 .cost_ns = cost};
  rp_op_id id;
  RP_CHECK(rp_graph_add_task(fx->g, &l, &id));
  return id;
}

#define FILL(fx, proc, cost, x)                                                \
  task_op((fx), (fx)->k.fill, (proc), (cost), 1, (const int[]){(x), RP_WRITE})
#define SCALE(fx, proc, cost, x)                                               \
  task_op((fx), (fx)->k.scale, (proc), (cost), 1, (const int[]){(x), RP_RW})
#define AXPY(fx, proc, cost, x, y)                                             \
  task_op((fx), (fx)->k.axpy, (proc), (cost), 2,                               \
          (const int[]){(x), RP_READ, (y), RP_RW})

static rp_op_id copy_op(fixture *fx, int src, int dst, int64_t lo, int64_t hi) {
  rp_copy c = {.src = fx->in[src],
               .dst = fx->in[dst],
               .domain = RP_DOMAIN_RECT,
               .rect = rp_rect_1d(lo, hi)};
  rp_op_id id;
  RP_CHECK(rp_graph_add_copy(fx->g, &c, &id));
  return id;
}

static void edge(fixture *fx, rp_op_id a, rp_op_id b) {
  RP_CHECK(rp_graph_add_edge(fx->g, a, b));
}

/* The clean graph: every write is read by another op, no edge implied by
 * others, no copies to merge.
 *   0 fill x -> 1 scale x -> 2 axpy(x -> y) -> 3 axpy(y -> x), plus a
 *   copy x -> z (4) after 1 that op 5 (axpy z -> y) reads. */
static void build_clean(fixture *fx) {
  rp_op_id a = FILL(fx, 0, 100, 0), b = SCALE(fx, 0, 200, 0);
  rp_op_id c = AXPY(fx, 1, 300, 0, 1), d = AXPY(fx, RP_PROC_ANY, 50, 1, 0);
  rp_op_id e = copy_op(fx, 0, 2, 0, 15), f = AXPY(fx, 1, 0, 2, 1);
  edge(fx, a, b);
  edge(fx, b, c);
  edge(fx, c, f); /* c and f both update instance 1 */
  edge(fx, b, e);
  edge(fx, e, f);
  edge(fx, f, d);
  rp_port_id pre, post;
  RP_CHECK(rp_graph_add_precondition(fx->g, "batch", &pre));
  RP_CHECK(rp_graph_bind_precondition(fx->g, pre, a));
  RP_CHECK(rp_graph_add_postcondition(fx->g, "step", &post));
  RP_CHECK(rp_graph_bind_postcondition(fx->g, post, d));
  RP_CHECK(rp_graph_add_interp(fx->g, b, &(rp_interp){0, 0, 4}));
}

static const char *save(fixture *fx, const char *name) {
  const char *path = th_tmp_path(name);
  rp_status st = rp_graph_save(fx->g, path);
  if (st == RP_EUNSUPPORTED)
    cr_skip_test("graph files need cJSON, which this build lacks");
  RP_CHECK(st);
  return path;
}

/* ---- dump: formats ---- */

Test(dump, text_names_ops_accesses_edges_ports) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  const char *want[] = {"graph: 6 ops, 6 edges, 1 preconditions",
                        "op 0: task 'rp.fill' proc 0",
                        "op 2: task 'rp.axpy' proc 1",
                        "op 3: task 'rp.axpy' proc any",
                        "cost 300 ns",
                        "op 4: copy domain rect [0..15] redop none",
                        "interp 0: replay args [0, +4) -> args [0]",
                        "edge 2 -> 5",
                        "precondition 0 'batch' -> ops 0",
                        "postcondition 0 'step' <- ops 3"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    cr_assert(strstr(r.out, want[i]), "missing '%s' in:\n%s", want[i], r.out);
  cr_assert_null(strstr(r.err, "placeholder"), "built-in tasks: %s", r.err);
  fx_fini(&fx);
  th_tmpdir_remove();
}

Test(dump, schedule_appends_the_per_worker_lists) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  RP_CHECK(rp_graph_set_op_name(fx.g, 4, "w.replicate")); /* the copy */
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--schedule", "--cpus", "2");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "\nschedule:\nexec: 6 ops, 6 units"), "%s", r.out);
  cr_assert(strstr(r.out, "op 4 copy 'w.replicate'"), "%s", r.out);
  cr_assert(strstr(r.out, "lane 0 (worker 0)"), "%s", r.out);
  cr_assert(strstr(r.out, "lane 1 (worker 1)"), "%s", r.out);
  cr_assert(strstr(r.out, "pre('batch')"), "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* A graph file does not say the max_args its program instantiated with:
 * an interpolation reading past the default 256 bytes of replay arguments
 * (the program instantiated with more) still gets its schedule. */
Test(dump, schedule_of_a_graph_whose_interpolations_read_past_256_bytes) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  RP_CHECK(rp_graph_add_interp(fx.g, 1, &(rp_interp){4000, 0, 4}));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(fx.g, &(rp_exec_opts){.max_args = 4096}, &ex));
  RP_CHECK(rp_exec_destroy(ex));
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--schedule", "--cpus", "2");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "\nschedule:\nexec: 6 ops, 6 units"), "%s", r.out);
  cr_assert_null(strstr(r.out, "not available"), "%s", r.out);
  cr_assert_null(strstr(r.err, "instantiate failed"), "%s", r.err);
  fx_fini(&fx);
  th_tmpdir_remove();
}

#ifdef REPRISE_HAVE_CJSON
Test(dump, json_is_a_graph_file_and_schedule_wraps_it) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--format", "json");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cJSON *doc = cJSON_Parse(r.out);
  cr_assert_not_null(doc, "not JSON:\n%s", r.out);
  cr_assert_str_eq(cJSON_GetObjectItem(doc, "format")->valuestring,
                   "reprise-graph");
  cJSON_Delete(doc);
  /* --stats and --lint beside a JSON dump: their text on stderr, the
   * output still one JSON document */
  RUN(&r, "dump", g, "--format", "json", "--stats", "--lint");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  doc = cJSON_Parse(r.out);
  cr_assert_not_null(doc, "not JSON:\n%s", r.out);
  cJSON_Delete(doc);
  cr_assert(strstr(r.err, "ops: 6 (5 tasks, 1 copies)"), "%s", r.err);
  cr_assert(strstr(r.err, "lint: "), "%s", r.err);
  RUN(&r, "dump", g, "--format", "json", "--schedule");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  doc = cJSON_Parse(r.out);
  cr_assert_not_null(doc, "not JSON:\n%s", r.out);
  cJSON *graph = cJSON_GetObjectItem(doc, "graph");
  cJSON *sched = cJSON_GetObjectItem(doc, "schedule");
  cr_assert_not_null(graph);
  cr_assert_not_null(sched);
  cr_assert_eq(cJSON_GetObjectItem(sched, "units")->valueint, 6);
  cr_assert(cJSON_IsArray(cJSON_GetObjectItem(sched, "lanes")));
  cJSON_Delete(doc);
  /* a named copy shows its name in every schedule format, as in the text
   * (JSON and DOT left it out) */
  RP_CHECK(rp_graph_set_op_name(fx.g, 4, "x.to.z"));
  g = save(&fx, "named.json");
  RUN(&r, "dump", g, "--schedule");
  cr_assert(strstr(r.out, "copy 'x.to.z'"), "%s", r.out);
  RUN(&r, "dump", g, "--format", "json", "--schedule");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "\"name\": \"copy\", \"copy_name\": \"x.to.z\""),
            "%s", r.out);
  RUN(&r, "dump", g, "--format", "dot", "--schedule");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "copy#0\\nx.to.z\""), "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}
#endif

/* Renders path.dot with Graphviz and returns the SVG text. */
static char *render(const char *dot) {
  char svg[200], cmd[512];
  snprintf(svg, sizeof svg, "%s.svg", dot);
  snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o '%s' 2>&1", dot, svg);
  cr_assert_eq(system(cmd), 0, "dot failed on:\n%s", th_read_all(dot, NULL));
  return th_read_all(svg, NULL);
}

Test(dump, dot_renders_with_graphviz_and_names_every_op) {
  if (!have_tool("dot"))
    cr_skip_test("Graphviz (dot) is not installed");
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  const char *g = save(&fx, "g.json");
  const char *gv = th_tmp_path("g.dot"), *both = th_tmp_path("both.dot");
  cli_run r;
  RUN(&r, "dump", g, "--format", "dot", "-o", gv);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  char *svg = render(gv);
  const char *names[] = {"rp.fill", "rp.scale", "rp.axpy",
                         "rp.axpy", "copy",     "rp.axpy"};
  for (int i = 0; i < 6; i++) {
    char label[64];
    snprintf(label, sizeof label, "%d: %s", i, names[i]);
    cr_assert(strstr(svg, label), "op %d ('%s') not in the SVG", i, label);
  }
  free(svg);
  /* with the schedule: still one digraph, one SVG */
  RUN(&r, "dump", g, "--format", "dot", "--schedule", "-o", both);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  svg = render(both);
  cr_assert(strstr(svg, "0: rp.fill"), "graph part missing");
  cr_assert(strstr(svg, "op 0 rp.fill#0"), "schedule part missing");
  cr_assert_null(strstr(strstr(svg, "<svg") + 4, "<svg"), "two SVGs");
  free(svg);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* An op's DOT label lists its first 16 accesses and counts the rest (one
 * AdamW of a GPT step has hundreds: a box dot lays out slowly and nobody
 * reads); the text dump lists them all. */
static rp_status noop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

Test(dump, dot_labels_list_16_accesses_and_count_the_rest) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "many", .cpu_fn = noop_task}, &t));
  enum { NA = 20 };
  rp_inst in[NA];
  rp_access acc[NA];
  rp_rect r = rp_rect_1d(0, 3);
  for (int i = 0; i < NA; i++) {
    RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in[i]));
    acc[i] = (rp_access){in[i], RP_READ, RP_REDOP_NONE};
  }
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 0, .accesses = acc, .naccess = NA},
      &op));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  RP_CHECK(rp_graph_dump(g, f, RP_DUMP_DOT));
  fclose(f);
  int lines = 0;
  for (const char *p = text; (p = strstr(p, "\\nR ")); p++)
    lines++;
  cr_assert_eq(lines, 16, "%s", text);
  cr_assert(strstr(text, "\\n... 4 more accesses (the text dump lists them)"),
            "%s", text);
  free(text);
  f = open_memstream(&text, &len);
  RP_CHECK(rp_graph_dump(g, f, RP_DUMP_TEXT));
  fclose(f);
  cr_assert(strstr(text, "access 19:"), "%s", text);
  free(text);
  RP_CHECK(rp_graph_destroy(g));
  for (int i = 0; i < NA; i++)
    RP_CHECK(rp_instance_free(rt, in[i]));
  th_destroy(rt);
}

/* ---- dump: stats ---- */

Test(dump, stats_on_a_known_graph) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--stats");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  /* edges 0-1 1-2 2-5 1-4 4-5 5-3; costs 100 200 300 50 0 0 */
  const char *want[] = {
      "ops: 6 (5 tasks, 1 copies), 6 units",
      "edges: 6, instances: 3, preconditions: 1, postconditions: 1",
      "task  proc 0 (cpu)       2 ops",
      "task  proc 1 (cpu)       2 ops",
      "task  any CPU worker     1 ops",
      "copy  (no processor)     1 ops",
      "rp.axpy                  3",
      "critical path: 5 ops: 0 -> 1 -> 2 -> 5 -> 3",
      "critical path by cost hints: 650 ns over 5 ops: 0 -> 1 -> 2 -> 5 -> 3",
      "(2 of 6 ops have no cost hint: counted as 0 ns)",
      "width: 2 at depth 2: ops 2, 4 (the widest topological level"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    cr_assert(strstr(r.out, want[i]), "missing '%s' in:\n%s", want[i], r.out);
  cr_assert_null(strstr(r.out, "op 0: task"), "--stats alone: no dump");
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* Cost hints that add up past 2^64 ns: the longest path is still the
 * longest (a length saturating at UINT64_MAX ended the path at the first
 * op to reach it: 2 of the chain's 3 ops), and --stats names the path
 * --critical-path lists. */
Test(dump, stats_cost_path_past_2_64_ns_is_the_longest) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  uint64_t half = 1ull << 63;
  rp_op_id a = FILL(&fx, 0, half, 0), b = SCALE(&fx, 0, half, 0);
  rp_op_id c = SCALE(&fx, 0, half, 0);
  edge(&fx, a, b);
  edge(&fx, b, c);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--stats");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  const char *want = "critical path by cost hints: 27670116110564327424 ns "
                     "over 3 ops: 0 -> 1 -> 2\n";
  cr_assert(strstr(r.out, want), "missing '%s' in:\n%s", want, r.out);
  RUN(&r, "dump", g, "--critical-path");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "critical path by cost hints: 27670116110564327424 "
                          "ns over 3 ops"),
            "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* ---- dump: lint on crafted graphs ---- */

Test(lint, clean_graph_has_no_findings) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint", "--strict");
  cr_assert_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
  cr_assert(strstr(r.out, "lint: no findings (6 ops, 6 edges checked)"), "%s",
            r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

Test(lint, redundant_edge_is_named_and_strict_exits_1) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  edge(&fx, 0, 2); /* implied by 0 -> 1 -> 2 */
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "findings alone exit 0: %s", r.err);
  cr_assert(strstr(r.out, "redundant-edge: op 0 (rp.fill) -> op 2 (rp.axpy): "
                          "implied by the path through op 1 (rp.scale)\n"),
            "%s", r.out);
  cr_assert(strstr(r.out, "lint: 1 finding (runahead 0, contract 0, "
                          "redundant-edge 1, unread-result 0, "
                          "mergeable-copies 0, race 0, instantiate 0)"),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint", "--strict");
  cr_assert_eq(r.status, 1);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* Rects of 4 dimensions at the int64 extremes (coordinates of 20
 * characters) and a name of RP_NAME_MAX bytes: findings show them whole. */
Test(lint, findings_show_extreme_rects_and_long_names_whole) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  const int64_t lo[4] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
  const int64_t ext[4] = {1, 1, 1, 2};
  rp_rect whole = rp_rect_make(4, lo, ext);
  rp_inst x, y;
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &whole, NULL, &x));
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &whole, NULL, &y));
  char name[RP_NAME_MAX + 1];
  memset(name, 'n', RP_NAME_MAX);
  name[RP_NAME_MAX] = 0;
  RP_CHECK(rp_instance_set_name(rt, y, name));
  rp_graph *gr;
  RP_CHECK(rp_graph_create(rt, &gr));
  for (int k = 0; k < 2; k++) { /* two adjacent points: mergeable */
    const int64_t pl[4] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN + k};
    const int64_t pe[4] = {1, 1, 1, 1};
    rp_copy c = {.src = x,
                 .dst = y,
                 .domain = RP_DOMAIN_RECT,
                 .rect = rp_rect_make(4, pl, pe)};
    rp_op_id id;
    RP_CHECK(rp_graph_add_copy(gr, &c, &id));
  }
  const char *g = th_tmp_path("g.json");
  rp_status st = rp_graph_save(gr, g);
  RP_CHECK(rp_graph_destroy(gr));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
  if (st == RP_EUNSUPPORTED)
    cr_skip_test("graph files need cJSON, which this build lacks");
  RP_CHECK(st);
  cli_run r;
  RUN(&r, "dump", g, "--lint=mergeable-copies,unread-result");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
#define M "-9223372036854775808"
  cr_assert(strstr(r.out, "one copy over [" M ".." M ", " M ".." M ", " M ".." M
                          ", " M "..-9223372036854775807]"),
            "%s", r.out);
  char want[512];
  snprintf(want, sizeof want,
           "writes instance 1 '%s' (f32 [" M ".." M ", " M ".." M ", " M ".." M
           ", " M "..-9223372036854775807], system memory)",
           name);
#undef M
  cr_assert(strstr(r.out, want), "%s", r.out);
  th_tmpdir_remove();
}

Test(lint, unread_results_are_named_through_unread_readers) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  /* 6 fills w (inst 3); 7 reads w into v (inst 4); nobody reads v: both
   * are unread, 6 only through 7 */
  rp_op_id a = FILL(&fx, 0, 0, 3), b = AXPY(&fx, 0, 0, 3, 4);
  edge(&fx, a, b);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "unread-result: op 6 (rp.fill) writes instance 3 "
                          "(f32 [0..15], system memory), read only by unread "
                          "ops 7;"),
            "%s", r.out);
  cr_assert(strstr(r.out, "unread-result: op 7 (rp.axpy) writes instance 4 "
                          "(f32 [0..15], system memory), which no other op "
                          "reads;"),
            "%s", r.out);
  cr_assert(strstr(r.out, "unread-result 2"), "%s", r.out);
  /* a postcondition on 7 makes both live */
  fx_fini(&fx);
  fixture fy;
  fx_init(&fy);
  build_clean(&fy);
  a = FILL(&fy, 0, 0, 3), b = AXPY(&fy, 0, 0, 3, 4);
  edge(&fy, a, b);
  rp_port_id p;
  RP_CHECK(rp_graph_add_postcondition(fy.g, "out", &p));
  RP_CHECK(rp_graph_bind_postcondition(fy.g, p, b));
  g = save(&fy, "g2.json");
  RUN(&r, "dump", g, "--lint");
  cr_assert(strstr(r.out, "lint: no findings"), "%s", r.out);
  fx_fini(&fy);
  th_tmpdir_remove();
}

Test(lint, mergeable_copies_are_named_unless_an_op_is_between) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  /* 6, 7: x -> v (inst 4) over [0..7] and [8..15], unordered; 8 reads v */
  rp_op_id c1 = copy_op(&fx, 0, 4, 0, 7), c2 = copy_op(&fx, 0, 4, 8, 15);
  rp_op_id rd = AXPY(&fx, 0, 0, 4, 1);
  edge(&fx, 1, c1);
  edge(&fx, 1, c2);
  edge(&fx, c1, rd);
  edge(&fx, c2, rd);
  edge(&fx, 5, rd); /* after the other updates of instance 1 */
  edge(&fx, rd, 3);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "mergeable-copies: ops 6 and 7 (copy instance 0 -> "
                          "instance 3) move [0..7] and [8..15], adjacent "
                          "rectangles: one copy over [0..15] would do"),
            "%s", r.out);
  cr_assert(strstr(r.out, "mergeable-copies 1, race 0, instantiate 0)"), "%s",
            r.out);
  fx_fini(&fx);
  /* an op ordered between the two copies keeps them apart */
  fixture fy;
  fx_init(&fy);
  build_clean(&fy);
  c1 = copy_op(&fy, 0, 4, 0, 7);
  rd = AXPY(&fy, 0, 0, 4, 1);
  c2 = copy_op(&fy, 0, 4, 8, 15);
  edge(&fy, 1, c1);
  edge(&fy, c1, rd);
  edge(&fy, rd, c2);
  edge(&fy, c2, 3);
  edge(&fy, 5, rd);
  edge(&fy, rd, 3);
  g = save(&fy, "g2.json");
  RUN(&r, "dump", g, "--lint");
  cr_assert_null(strstr(r.out, "mergeable-copies:"), "%s", r.out);
  fx_fini(&fy);
  th_tmpdir_remove();
}

/* A task of that name (registered here, with no contract flags) reading
 * the fixture's first input, added to its graph. */
static void add_named_task(fixture *fx, const char *name) {
  rp_task_id t;
  RP_CHECK(rp_task_register(
      fx->rt, &(rp_task_desc){.name = name, .cpu_fn = rp_task_fill_cpu}, &t));
  rp_access acc = {fx->in[0], RP_READ, RP_REDOP_NONE};
  rp_launch l = {.task = t, .proc = 0, .accesses = &acc, .naccess = 1};
  RP_CHECK(rp_graph_add_task(fx->g, &l, NULL));
}

Test(lint, unknown_tasks_run_as_placeholders_with_unknown_contracts) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  add_named_task(&fx, "my.log");
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "no-op placeholders (contract unknown): my.log"),
            "%s", r.err);
  cr_assert(strstr(r.out, "note: 1 ops run tasks whose contract is unknown"),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint", "--contract", "my.log=host");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert_null(strstr(r.out, "note:"), "%s", r.out);
  cr_assert_null(strstr(r.err, "placeholders"), "%s", r.err);
  /* --strict: an op the checks skipped is an op not checked */
  RUN(&r, "dump", g, "--lint", "--strict");
  cr_assert_eq(r.status, 1, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "reprise dump: --strict: 1 ops run tasks whose "
                          "contract is unknown, which runahead and contract "
                          "skip: the graph is not fully checked"),
            "%s", r.err);
  cr_assert(strstr(r.out, "lint: no findings"), "%s", r.out);
  RUN(&r, "dump", g, "--lint", "--strict", "--contract", "my.log=host");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  RUN(&r, "dump", g, "--lint-ignore", "runahead,contract", "--strict");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* A file naming many tasks this build lacks: the placeholder note names
 * the first 16 and counts the rest (it listed every one: thousands of
 * names on one line). */
Test(lint, many_placeholders_are_named_16_and_counted) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  for (int i = 0; i < 40; i++) {
    char name[32];
    snprintf(name, sizeof name, "my.task%02d", i);
    add_named_task(&fx, name);
  }
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--stats");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "no-op placeholders (contract unknown): my.task00, "
                          "my.task01,"),
            "%s", r.err);
  cr_assert(strstr(r.err, "my.task15, ... (24 more; 40 in all)\n"), "%s",
            r.err);
  cr_assert_null(strstr(r.err, "my.task16"), "%s", r.err);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* Repeated unknown names: each is registered once and named once, in the
 * order the file first names it (the names are sorted to find repeats, the
 * note keeps file order), and every op of each is known as a placeholder
 * (looked up in the sorted list). */
Test(lint, repeated_placeholder_names_are_named_once_in_file_order) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  const char *names[] = {"my.z", "my.a", "my.m"};
  rp_task_id t[3];
  for (int i = 0; i < 3; i++)
    RP_CHECK(rp_task_register(
        fx.rt, &(rp_task_desc){.name = names[i], .cpu_fn = rp_task_fill_cpu},
        &t[i]));
  const int order[] = {0, 1, 0, 2, 1};
  for (int i = 0; i < 5; i++) {
    rp_access acc = {fx.in[0], RP_READ, RP_REDOP_NONE};
    rp_launch l = {
        .task = t[order[i]], .proc = 0, .accesses = &acc, .naccess = 1};
    RP_CHECK(rp_graph_add_task(fx.g, &l, NULL));
  }
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "no-op placeholders (contract unknown): my.z, "
                          "my.a, my.m\n"),
            "%s", r.err);
  cr_assert(strstr(r.out, "note: 5 ops run tasks whose contract is unknown"),
            "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* One task's contract given twice is a usage error (exit 2), whether the
 * two agree or not: neither is kept quietly, and the file's task is not
 * said to be missing. */
Test(lint, a_contract_given_twice_is_a_usage_error) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  add_named_task(&fx, "my.log");
  const char *g = save(&fx, "g.json");
  cli_run r;
  const char *second[] = {"my.log=stream", "my.log=host"};
  for (int i = 0; i < 2; i++) {
    RUN(&r, "dump", g, "--lint", "--contract", "my.log=host", "--contract",
        second[i]);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_str_eq(r.err, "reprise dump: --contract my.log given twice\n"
                            "Try 'reprise dump --help'.\n");
    cr_assert_str_eq(r.out, "");
  }
  /* two tasks, one contract each, are fine */
  RUN(&r, "dump", g, "--lint", "--contract", "my.log=host", "--contract",
      "my.other=stream");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.err, "--contract my.other: the file has no task of "
                          "that name"),
            "%s", r.err);
  cr_assert_null(strstr(r.err, "--contract my.log:"), "%s", r.err);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* The placeholders' note is for the checks that skip them: not said
 * when neither runahead nor contract runs. */
Test(lint, placeholder_note_only_where_runahead_or_contract_runs) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  add_named_task(&fx, "my.log");
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint=race");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert_null(strstr(r.out, "note:"), "%s", r.out);
  RUN(&r, "dump", g, "--lint-ignore", "runahead,contract");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert_null(strstr(r.out, "note:"), "%s", r.out);
  RUN(&r, "dump", g, "--lint=runahead");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "note: 1 ops run tasks whose contract is unknown "
                          "(placeholders for names this build does not "
                          "register): the runahead check skips them"),
            "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* The communication tasks of a --dist or --tp step's file (rp.dist.*)
 * are the build's own: read with the contracts comm/ registers them with
 * (host copies, a stream-ordered all-reduce), not as unknown placeholders,
 * though the dump's model runtime has no communicator. The file here is
 * made by a runtime without one either, with tasks of those names. */
Test(lint, communication_tasks_have_their_builtin_contracts) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  add_named_task(&fx, "rp.dist.send");
  add_named_task(&fx, "rp.dist.allreduce");
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert_null(strstr(r.err, "placeholders"), "%s", r.err);
  cr_assert_null(strstr(r.out, "contract is unknown"), "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* The GPU checks through the CLI need a GPU to load the file into. */
Test(lint, gpu_runahead_and_contract_through_the_cli) {
  const char *why;
  if (!th_cuda_available(&why))
    th_gpu_skip("%s (the same checks run on models in lint_model)", why);
  make_tmpdir();
  rp_runtime *rt = th_runtime(RP_BACKEND_CUDA, 1);
  rp_task_id dev, host;
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "t.dev",
                                            .gpu_fn = rp_task_fill_cpu,
                                            .flags = RP_TASK_STREAM_ORDERED},
                            &dev));
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "t.host",
                                            .cpu_fn = rp_task_fill_cpu,
                                            .gpu_fn = rp_task_fill_cpu,
                                            .flags = RP_TASK_HOST},
                            &host));
  rp_mem gm;
  RP_CHECK(rp_mem_find(rt, RP_MEM_GPU, 0, &gm));
  rp_rect r16 = rp_rect_1d(0, 15);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, gm, RP_F32, &r16, NULL, &a));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access acc = {a, RP_RW, RP_REDOP_NONE};
  rp_op_id o[3];
  for (int i = 0; i < 3; i++) {
    rp_launch l = {
        .task = i == 1 ? host : dev, .proc = 1, .accesses = &acc, .naccess = 1};
    RP_CHECK(rp_graph_add_task(g, &l, &o[i]));
  }
  RP_CHECK(rp_graph_add_edge(g, o[0], o[1]));
  RP_CHECK(rp_graph_add_edge(g, o[1], o[2]));
  const char *path = th_tmp_path("gpu.json");
  if (rp_graph_save(g, path) == RP_EUNSUPPORTED)
    cr_skip_test("graph files need cJSON, which this build lacks");
  cli_run r;
  RUN(&r, "dump", path, "--lint", "--cpus", "1", "--contract", "t.dev=stream",
      "--contract", "t.host=host");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "runahead: op 1 (t.host), a HOST task on proc 1 "
                          "(gpu), sits between the device ops op 0"),
            "%s", r.out);
  cr_assert(strstr(r.out, "contract: op 1 (t.host) is a HOST task on proc 1 "
                          "(gpu), but every instance it accesses is in "
                          "device memory"),
            "%s", r.out);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* A line of n copies, each ordered after the one before (x -> y, y -> x,
 * ...), then two unordered copies z -> w over one rectangle: a race. */
static void build_line_and_race(fixture *fx, uint32_t n) {
  rp_op_id prev = 0;
  for (uint32_t i = 0; i < n; i++) {
    rp_op_id o = copy_op(fx, (int)(i % 2), (int)(1 - i % 2), 0, 15);
    if (i)
      edge(fx, prev, o);
    prev = o;
  }
  copy_op(fx, 2, 3, 0, 15);
  copy_op(fx, 2, 3, 0, 15);
}

/* A graph of more ops than 16384 is still checked for races; one of more
 * than reachability is built for (DM_REACH_MAX_OPS) says which checks did
 * not run, and --strict fails it: CI passes no graph it did not check. */
Test(lint, large_graphs_are_checked_or_fail_strict) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_line_and_race(&fx, 16400);
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint=race", "--strict");
  cr_assert_eq(r.status, 1, "%s\n%s", r.out, r.err);
  cr_assert(strstr(r.out, "race: op 16400 (copy) copies into and op 16401 "
                          "(copy) copies into instance 3"),
            "%s", r.out);
  cr_assert_null(strstr(r.err, "could not run"), "%s", r.err);
  fx_fini(&fx);
  fixture fy;
  fx_init(&fy);
  build_line_and_race(&fy, DM_REACH_MAX_OPS);
  g = save(&fy, "g2.json");
  RUN(&r, "dump", g, "--lint=race,contract");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  cr_assert(strstr(r.out, "lint: no findings (32770 ops, 32767 edges checked; "
                          "not checked: runahead, redundant-edge, "
                          "unread-result, mergeable-copies, instantiate; not "
                          "checked (32770 ops: reachability is built for at "
                          "most 32768): race)\n"),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint=race,contract", "--strict");
  cr_assert_eq(r.status, 1, "%s\n%s", r.out, r.err);
  cr_assert(strstr(r.err, "reprise dump: --strict: race could not run (32770 "
                          "ops: reachability is built for at most 32768): "
                          "the graph is not fully checked\n"),
            "%s", r.err);
  /* the checks that need no reachability still pass --strict alone */
  RUN(&r, "dump", g, "--lint=contract", "--strict");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  fx_fini(&fy);
  th_tmpdir_remove();
}

/* ---- lint on models: GPU processors without a GPU ---- */

typedef struct model {
  dm_graph m;
  dm_op ops[4];
  dm_inst insts[3];
  dm_access acc[4][2];
  dm_edge edges[4];
  rp_proc_kind kinds[3]; /* procs 0, 1 CPU; 2 GPU */
} model;

/* Three tasks in a line, 0 -> 1 -> 2: the outer two STREAM_ORDERED on the
 * GPU (proc 2) over device memory, the middle one as given. */
static void model_line(model *md, unsigned mid_flags, rp_proc mid_proc,
                       rp_mem_kind mid_mem) {
  memset(md, 0, sizeof *md);
  md->kinds[0] = md->kinds[1] = RP_PROC_CPU;
  md->kinds[2] = RP_PROC_GPU;
  md->insts[0] = (dm_inst){RP_MEM_GPU, 0, RP_F32, rp_rect_1d(0, 15), ""};
  md->insts[1] = (dm_inst){mid_mem, mid_mem == RP_MEM_GPU ? 0 : -1, RP_F32,
                           rp_rect_1d(0, 15), ""};
  for (uint32_t i = 0; i < 3; i++) {
    int mid = i == 1;
    /* the middle op only reads: none of its results goes unread */
    md->acc[i][0] =
        (dm_access){mid ? 1 : 0, mid ? RP_READ : RP_RW, RP_REDOP_NONE};
    md->acc[i][1] = (dm_access){0, RP_READ, RP_REDOP_NONE};
    md->ops[i] = (dm_op){.kind = RP_OP_TASK,
                         .name = mid ? "host.step" : "dev.kernel",
                         .proc = mid ? mid_proc : 2,
                         .pkind = md->kinds[mid ? mid_proc : 2],
                         .shards = 1,
                         .flags = mid ? mid_flags : RP_TASK_STREAM_ORDERED,
                         .contract_known = 1,
                         .acc = md->acc[i],
                         .nacc = mid ? 2 : 1};
  }
  md->edges[0] = (dm_edge){0, 1, 0};
  md->edges[1] = (dm_edge){1, 2, 0};
  md->m = (dm_graph){.ops = md->ops,
                     .nops = 3,
                     .insts = md->insts,
                     .ninsts = 2,
                     .edges = md->edges,
                     .nedges = 2,
                     .proc_kinds = md->kinds,
                     .nprocs = 3};
}

/* Runs the lint on a model; returns its text (caller frees). */
static char *lint_model(const dm_graph *m, uint32_t *n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  dm_lint_result res;
  cr_assert_eq(dm_lint(m, DM_LINT_ALL, f, stderr, &res), 0);
  *n = res.findings;
  fclose(f);
  return text;
}

/* lint_model with the checks given. */
static char *lint_model_checks(const dm_graph *m, unsigned checks,
                               uint32_t *n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  dm_lint_result res;
  cr_assert_eq(dm_lint(m, checks, f, stderr, &res), 0);
  *n = res.findings;
  fclose(f);
  return text;
}

/* A note speaks of the checks that ran: the placeholders' note of
 * runahead and contract (naming those selected). */
Test(lint_model, notes_speak_only_of_the_checks_that_ran) {
  model md;
  model_line(&md, RP_TASK_HOST, 0, RP_MEM_PINNED);
  md.ops[1].contract_known = 0;
  uint32_t n;
  const char *note = "note: 1 ops run tasks whose contract is unknown";
  char *out = lint_model_checks(&md.m, DM_LINT_RACE, &n);
  cr_assert_null(strstr(out, "note:"), "%s", out);
  free(out);
  out = lint_model_checks(&md.m, DM_LINT_CONTRACT | DM_LINT_RACE, &n);
  cr_assert(strstr(out, note) && strstr(out, "): the contract check skips "
                                             "them; declare contracts"),
            "%s", out);
  free(out);
  out = lint_model_checks(&md.m, DM_LINT_ALL, &n);
  cr_assert(strstr(out, "): the runahead and contract checks skip them; "),
            "%s", out);
  free(out);
}

/* More ops than reachability is built for: redundant-edge,
 * mergeable-copies and race cannot run, and the summary says so (with
 * why) among the checks not checked; never "no findings" alone. */
Test(lint_model, checks_that_cannot_run_are_said_not_checked) {
  model md;
  model_line(&md, RP_TASK_HOST, 0, RP_MEM_PINNED);
  uint32_t big = DM_REACH_MAX_OPS + 1;
  dm_op *ops = calloc(big, sizeof *ops);
  cr_assert_not_null(ops);
  for (uint32_t i = 0; i < big; i++)
    ops[i] = (dm_op){.kind = RP_OP_TASK,
                     .name = "t",
                     .proc = 0,
                     .pkind = RP_PROC_CPU,
                     .shards = 1,
                     .contract_known = 1};
  dm_graph g = {.ops = ops,
                .nops = big,
                .insts = md.insts,
                .proc_kinds = md.kinds,
                .nprocs = 3};
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  dm_lint_result res;
  cr_assert_eq(dm_lint(&g, DM_LINT_UNREAD, f, stderr, &res), 0);
  fclose(f);
  cr_assert_eq(res.unchecked, 0);
  cr_assert(strstr(out, "lint: no findings (32769 ops, 0 edges checked; not "
                        "checked: runahead, contract, redundant-edge, "
                        "mergeable-copies, race, instantiate)\n"),
            "%s", out);
  free(out);
  f = open_memstream(&out, &len);
  cr_assert_eq(dm_lint(&g, DM_LINT_RACE | DM_LINT_UNREAD, f, stderr, &res), 0);
  fclose(f);
  cr_assert_eq(res.unchecked, DM_LINT_RACE);
  cr_assert_str_eq(res.why, "race could not run (32769 ops: reachability is "
                            "built for at most 32768)");
  cr_assert(strstr(out, "lint: no findings (32769 ops, 0 edges checked; not "
                        "checked: runahead, contract, redundant-edge, "
                        "mergeable-copies, instantiate; not checked (32769 "
                        "ops: reachability is built for at most 32768): "
                        "race)\n"),
            "%s", out);
  free(out);
  f = open_memstream(&out, &len);
  cr_assert_eq(dm_lint(&g, DM_LINT_ALL, f, stderr, &res), 0);
  fclose(f);
  cr_assert_eq(res.unchecked, DM_LINT_REDUNDANT | DM_LINT_MERGE | DM_LINT_RACE);
  cr_assert_str_eq(res.why, "redundant-edge, mergeable-copies and race could "
                            "not run (32769 ops: reachability is built for "
                            "at most 32768)");
  cr_assert(strstr(out, "lint: no findings (32769 ops, 0 edges checked; "
                        "not checked (32769 ops: reachability is built for "
                        "at most 32768): redundant-edge, mergeable-copies, "
                        "race)\n"),
            "%s", out);
  free(out);
  free(ops);
}

/* ---- names ---- */

Test(names, instances_and_ops_show_in_every_format_and_finding) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  RP_CHECK(rp_instance_set_name(fx.rt, fx.in[0], "W1"));
  RP_CHECK(rp_graph_set_op_name(fx.g, 0, "fc1.init"));
  cr_assert_str_eq(rp_instance_name(fx.rt, fx.in[0]), "W1");
  cr_assert_str_eq(rp_graph_op_name(fx.g, 0), "fc1.init");
  cr_assert_str_eq(rp_graph_op_name(fx.g, 1), "");
  cr_assert_null(rp_graph_op_name(fx.g, 99));
  /* bad names are refused and change nothing */
  RP_EXPECT(rp_instance_set_name(fx.rt, fx.in[0], "a\"b"), RP_EINVAL);
  RP_EXPECT(rp_graph_set_op_name(fx.g, 0, "x\ny"), RP_EINVAL);
  char big[RP_NAME_MAX + 2];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  RP_EXPECT(rp_graph_set_op_name(fx.g, 0, big), RP_EINVAL);
  RP_EXPECT(rp_graph_set_op_name(fx.g, 99, "x"), RP_EINVAL);
  cr_assert_str_eq(rp_graph_op_name(fx.g, 0), "fc1.init");
  /* an unread op, so the lint names both */
  rp_op_id u = FILL(&fx, 0, 0, 5);
  RP_CHECK(rp_instance_set_name(fx.rt, fx.in[5], "scratch"));
  RP_CHECK(rp_graph_set_op_name(fx.g, u, "scratch.fill"));
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "op 0 'fc1.init': task 'rp.fill'"), "%s", r.out);
  cr_assert(strstr(r.out, "'W1':W f32 [0..15]"), "%s", r.out);
  RUN(&r, "dump", g, "--format", "dot");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "label=\"0: fc1.init\\nrp.fill"), "%s", r.out);
  cr_assert(strstr(r.out, "'W1'"), "%s", r.out);
  RUN(&r, "dump", g, "--format", "json");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "\"name\":\t\"fc1.init\"") ||
                strstr(r.out, "\"name\": \"fc1.init\"") ||
                strstr(r.out, "\"name\":\"fc1.init\""),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint");
  cr_assert(strstr(r.out, "unread-result: op 6 'scratch.fill' (rp.fill) "
                          "writes instance 3 'scratch' (f32"),
            "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

Test(names, capture_names_the_next_launch_and_traces_use_it) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect rr = rp_rect_1d(0, 15);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &rr, NULL, &a));
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &rr, NULL, &b));
  RP_EXPECT(rp_capture_name_next(rt, "x"), RP_ECAPTURE); /* no capture */
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_capture_name_next(rt, "a.fill"));
  rp_access wa = {a, RP_WRITE, RP_REDOP_NONE};
  rp_launch l = {.task = k.fill,
                 .proc = 0,
                 .accesses = &wa,
                 .naccess = 1,
                 .args = &SCALAR,
                 .args_size = sizeof SCALAR};
  RP_CHECK(rp_launch_task(rt, &l, NULL));
  RP_CHECK(rp_capture_name_next(rt, "a.to.b"));
  rp_copy c = {.src = a, .dst = b, .domain = RP_DOMAIN_SRC};
  RP_CHECK(rp_launch_copy(rt, &c, NULL));
  RP_CHECK(rp_launch_copy(rt, &c, NULL)); /* the name was for one launch */
  /* a launch that fails spends its name too: the op after it is not
   * named so (a task, a copy, a parallel operator, an all-reduce that is
   * no sum and a NULL argument failing, each followed by a copy that
   * succeeds) */
  rp_launch bad = l;
  bad.proc = 12345; /* no such processor */
  rp_copy same = {.src = a, .dst = a};
  rp_parallel_op none = {.kind = RP_POP_REPLICATE, .nparts = 0};
  rp_allreduce ar = {.inst = a, .redop = RP_REDOP_NONE}; /* not a sum */
  for (int kase = 0; kase < 5; kase++) {
    RP_CHECK(rp_capture_name_next(rt, "failed"));
    rp_status st = kase == 0   ? rp_launch_task(rt, &bad, NULL)
                   : kase == 1 ? rp_launch_copy(rt, &same, NULL)
                   : kase == 2 ? rp_launch_parallel(rt, &none, NULL)
                   : kase == 3 ? rp_launch_allreduce(rt, &ar, NULL)
                               : rp_launch_task(rt, NULL, NULL);
    cr_assert_neq(st, RP_OK, "case %d", kase);
    RP_CHECK(rp_launch_copy(rt, &c, NULL));
  }
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_str_eq(rp_graph_op_name(g, 0), "a.fill");
  cr_assert_str_eq(rp_graph_op_name(g, 1), "a.to.b");
  cr_assert_str_eq(rp_graph_op_name(g, 2), "");
  cr_assert_eq(rp_graph_op_count(g), 8);
  for (rp_op_id op = 3; op < 8; op++)
    cr_assert_str_eq(rp_graph_op_name(g, op), "", "op %u", op);
  /* error details name the op */
  RP_EXPECT(rp_graph_remove_edge(g, 2, 0), RP_ENOENT);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_trace_start(ex, 1));
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  rp_event_release(rt, done);
  const char *path = th_tmp_path("t.json");
  RP_CHECK(rp_exec_trace_write(ex, path));
  static char buf[65536];
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  cr_assert(strstr(buf, "\"name\": \"a.fill\""), "%s", buf);
  cr_assert(strstr(buf, "\"task\": \"rp.fill\""), "%s", buf);
  cr_assert(strstr(buf, "\"name\": \"a.to.b\""), "%s", buf);
  cr_assert(strstr(buf, "\"name\": \"reprise.copy\""), "%s", buf);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* ---- lint: capture's edges, check selection ---- */

Test(lint, inferred_edges_a_path_implies_are_stats_not_findings) {
  make_tmpdir();
  rp_runtime *rt = th_cpu_runtime(2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_mem sys;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &sys));
  rp_rect rr = rp_rect_1d(0, 15);
  rp_inst x, y;
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &rr, NULL, &x));
  RP_CHECK(rp_instance_create(rt, sys, RP_F32, &rr, NULL, &y));
  /* fill x; y = x (reads x); x = scale (WAR on the copy, WAW on the fill:
   * the fill -> scale edge is implied by fill -> copy -> scale) */
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_access wx = {x, RP_WRITE, RP_REDOP_NONE}, rwx = {x, RP_RW, RP_REDOP_NONE};
  rp_launch l = {.task = k.fill,
                 .proc = 0,
                 .accesses = &wx,
                 .naccess = 1,
                 .args = &SCALAR,
                 .args_size = sizeof SCALAR};
  rp_event e0, e2;
  RP_CHECK(rp_launch_task(rt, &l, &e0));
  rp_copy c = {.src = x, .dst = y, .domain = RP_DOMAIN_SRC};
  rp_event e1;
  RP_CHECK(rp_launch_copy(rt, &c, &e1));
  l.task = k.scale;
  l.accesses = &rwx;
  RP_CHECK(rp_launch_task(rt, &l, &e2));
  rp_event ends[2] = {e1, e2};
  RP_CHECK(rp_capture_postcondition(rt, "out", ends, 2, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert(rp_graph_depends(g, 0, 2));
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(g, path));
  cli_run r;
  RUN(&r, "dump", path, "--lint", "--strict");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  cr_assert(strstr(r.out, "lint: no findings"), "%s", r.out);
  RUN(&r, "dump", path, "--stats");
  cr_assert(strstr(r.out, "inferred edges: 3 (capture's, from conflicting "
                          "accesses), 1 of them implied by a path"),
            "%s", r.out);
  /* the same edge asked for is a finding */
  RP_CHECK(rp_graph_add_edge(g, 0, 2));
  RP_CHECK(rp_graph_save(g, path));
  RUN(&r, "dump", path, "--lint", "--strict");
  cr_assert_eq(r.status, 1, "%s", r.out);
  cr_assert(strstr(r.out, "redundant-edge: op 0 (rp.fill) -> op 2 "
                          "(rp.scale): implied by the path through op 1 "
                          "(copy)"),
            "%s", r.out);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_instance_free(rt, y));
  th_destroy(rt);
  th_tmpdir_remove();
}

Test(lint, checks_are_selected_and_ignored_by_name) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  edge(&fx, 0, 2); /* a redundant edge someone asked for */
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint=unread-result,contract", "--strict");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  cr_assert(strstr(r.out, "lint: no findings (6 ops, 7 edges checked; not "
                          "checked: runahead, redundant-edge, "
                          "mergeable-copies, race, instantiate)"),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint-ignore", "redundant-edge", "--strict");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  RUN(&r, "dump", g, "--lint=redundant-edge", "--strict");
  cr_assert_eq(r.status, 1, "%s", r.out);
  cr_assert(strstr(r.out, "lint: 1 finding (redundant-edge 1; not checked: "
                          "runahead, contract, unread-result, "
                          "mergeable-copies, race, instantiate)"),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint=redundant-edges");
  cr_assert_eq(r.status, 2);
  cr_assert(strstr(r.err, "'redundant-edges' is not a lint check"), "%s",
            r.err);
  RUN(&r, "dump", g, "--lint-ignore", "contract,bogus");
  cr_assert_eq(r.status, 2);
  /* every check left out: nothing would be checked, --strict or not */
  RUN(&r, "dump", g, "--lint=unread-result", "--lint-ignore", "unread-result",
      "--strict");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strstr(r.err, "leaves no lint check to run"), "%s", r.err);
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* A port bound to no op loads and saves, but instantiate refuses it: the
 * instantiate check says so (its first refusal), and --strict exits 1. */
Test(lint, a_graph_instantiate_refuses_is_a_finding) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  RP_CHECK(rp_graph_add_precondition(fx.g, "loose", NULL));
  const char *g = save(&fx, "g.json");
  cli_run r;
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "findings alone exit 0: %s", r.err);
  cr_assert(strstr(r.out, "instantiate: the graph cannot be instantiated: "
                          "RP_EPORT: rp_graph_validate: precondition port 1 "
                          "'loose' is never bound to an op\n"),
            "%s", r.out);
  cr_assert(strstr(r.out, "lint: 1 finding (runahead 0, contract 0, "
                          "redundant-edge 0, unread-result 0, "
                          "mergeable-copies 0, race 0, instantiate 1)"),
            "%s", r.out);
  RUN(&r, "dump", g, "--lint-ignore", "instantiate", "--strict");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  RUN(&r, "dump", g, "--lint=instantiate", "--strict");
  cr_assert_eq(r.status, 1, "%s", r.out);
  fx_fini(&fx);
  th_tmpdir_remove();
}

Test(lint_model, host_task_between_device_ops_stops_runahead) {
  model md;
  model_line(&md, RP_TASK_HOST, 0, RP_MEM_PINNED);
  md.ops[1].nacc = 1; /* pinned memory only: no contract finding */
  uint32_t n;
  char *out = lint_model(&md.m, &n);
  cr_assert(strstr(out, "runahead: op 1 (host.step), a HOST task on proc 0 "
                        "(cpu), sits between the device ops op 0 (dev.kernel) "
                        "on proc 2 (gpu) and op 2 (dev.kernel) on proc 2 "
                        "(gpu): the host waits for op 0 to finish"),
            "%s", out);
  cr_assert_eq(n, 1, "%s", out);
  free(out);
  /* made STREAM_ORDERED (on the GPU, over pinned memory) it is fine */
  model_line(&md, RP_TASK_STREAM_ORDERED, 2, RP_MEM_PINNED);
  out = lint_model(&md.m, &n);
  cr_assert_eq(n, 0, "%s", out);
  free(out);
  /* unknown contracts are not judged */
  model_line(&md, RP_TASK_HOST, 0, RP_MEM_PINNED);
  md.ops[1].contract_known = 0;
  out = lint_model(&md.m, &n);
  cr_assert_eq(n, 0, "%s", out);
  cr_assert(strstr(out, "note: 1 ops run tasks whose contract is unknown"));
  free(out);
}

Test(lint_model, contracts_that_contradict_the_memory) {
  model md;
  uint32_t n;
  /* HOST on the GPU over device memory only: should be STREAM_ORDERED */
  model_line(&md, RP_TASK_HOST, 2, RP_MEM_GPU);
  char *out = lint_model(&md.m, &n);
  cr_assert(strstr(out, "contract: op 1 (host.step) is a HOST task on proc 2 "
                        "(gpu), but every instance it accesses is in device "
                        "memory"),
            "%s", out);
  free(out);
  /* HOST on a CPU worker touching device memory: the host cannot */
  model_line(&md, RP_TASK_HOST, 1, RP_MEM_SYSTEM);
  out = lint_model(&md.m, &n);
  cr_assert(strstr(out, "contract: op 1 (host.step) is a HOST task on proc 1 "
                        "(cpu), but it accesses instance 0 (f32 [0..15], gpu "
                        "memory of device 0), which the host cannot address"),
            "%s", out);
  free(out);
  /* STREAM_ORDERED on the GPU over pageable memory */
  model_line(&md, RP_TASK_STREAM_ORDERED, 2, RP_MEM_SYSTEM);
  out = lint_model(&md.m, &n);
  cr_assert(strstr(out, "contract: op 1 (host.step) is STREAM_ORDERED on proc "
                        "2 (gpu), but it accesses instance 1 (f32 [0..15], "
                        "system memory) (pageable host memory)"),
            "%s", out);
  cr_assert_eq(n, 1, "%s", out);
  free(out);
  /* STREAM_ORDERED on a CPU worker over host memory: the CPU backend's
   * own convention (kernels/tasks.h), not a finding */
  model_line(&md, RP_TASK_STREAM_ORDERED, 0, RP_MEM_SYSTEM);
  md.ops[1].acc = &md.acc[1][0];
  md.ops[1].nacc = 1;
  out = lint_model(&md.m, &n);
  cr_assert_null(strstr(out, "contract:"), "%s", out);
  free(out);
}

/* Two ops on one instance with no path between them (race): a write
 * against a read, a task's fold against a copy's; not two same-operator
 * folds of one kind, not two readers, not copies whose points do not
 * meet, and nothing once an edge orders the pair. */
static void model_pair(model *md, rp_op_kind ka, rp_privilege pa, rp_op_kind kb,
                       rp_privilege pb) {
  memset(md, 0, sizeof *md);
  md->kinds[0] = md->kinds[1] = RP_PROC_CPU;
  md->insts[0] = (dm_inst){RP_MEM_SYSTEM, -1, RP_F32, rp_rect_1d(0, 15), ""};
  md->insts[1] = (dm_inst){RP_MEM_SYSTEM, -1, RP_F32, rp_rect_1d(0, 15), ""};
  rp_op_kind k[2] = {ka, kb};
  rp_privilege p[2] = {pa, pb};
  for (uint32_t i = 0; i < 2; i++) {
    rp_redop red = p[i] == RP_REDUCE ? RP_REDOP_SUM : RP_REDOP_NONE;
    if (k[i] == RP_OP_COPY) { /* from instance 1 into instance 0 */
      md->acc[i][0] = (dm_access){1, RP_READ, RP_REDOP_NONE};
      md->acc[i][1] = (dm_access){0, p[i], red};
    } else {
      md->acc[i][0] = (dm_access){0, p[i], red};
    }
    md->ops[i] =
        (dm_op){.kind = k[i],
                .name = k[i] == RP_OP_COPY ? "copy" : "t",
                .proc = (rp_proc)i,
                .pkind = RP_PROC_CPU,
                .shards = 1,
                .contract_known = 1,
                .acc = md->acc[i],
                .nacc = k[i] == RP_OP_COPY ? 2 : 1,
                .domain = k[i] == RP_OP_COPY ? rp_rect_1d(0, 15) : (rp_rect){0},
                .npost = 1};
  }
  md->m = (dm_graph){.ops = md->ops,
                     .nops = 2,
                     .insts = md->insts,
                     .ninsts = 2,
                     .edges = md->edges,
                     .nedges = 0,
                     .proc_kinds = md->kinds,
                     .nprocs = 2};
}

static uint32_t races(const model *md, char **text) {
  uint32_t n;
  *text = lint_model(&md->m, &n);
  uint32_t r = 0;
  for (const char *p = *text; (p = strstr(p, "race: ")); p++)
    r++;
  return r;
}

Test(lint_model, unordered_conflicting_accesses_are_races) {
  const struct {
    rp_op_kind ka;
    rp_privilege pa;
    rp_op_kind kb;
    rp_privilege pb;
    uint32_t want;
  } c[] = {
      {RP_OP_TASK, RP_WRITE, RP_OP_TASK, RP_READ, 1},
      {RP_OP_TASK, RP_RW, RP_OP_TASK, RP_RW, 1},
      {RP_OP_TASK, RP_READ, RP_OP_TASK, RP_READ, 0},
      {RP_OP_TASK, RP_REDUCE, RP_OP_TASK, RP_REDUCE, 0},
      {RP_OP_COPY, RP_REDUCE, RP_OP_COPY, RP_REDUCE, 0},
      {RP_OP_TASK, RP_REDUCE, RP_OP_COPY, RP_REDUCE, 1},
      {RP_OP_TASK, RP_REDUCE, RP_OP_TASK, RP_READ, 1},
      {RP_OP_COPY, RP_WRITE, RP_OP_TASK, RP_READ, 1},
      {RP_OP_COPY, RP_WRITE, RP_OP_COPY, RP_WRITE, 1},
  };
  model md;
  char *out;
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    model_pair(&md, c[i].ka, c[i].pa, c[i].kb, c[i].pb);
    cr_assert_eq(races(&md, &out), c[i].want, "case %zu: %s", i, out);
    free(out);
  }
  /* the finding names both ops, what each does and the instance */
  model_pair(&md, RP_OP_TASK, RP_REDUCE, RP_OP_COPY, RP_REDUCE);
  races(&md, &out);
  cr_assert(strstr(out, "race: op 0 (t) reduces into and op 1 (copy) sums "
                        "into instance 0 (f32 [0..15], system memory) with "
                        "no path between them"),
            "%s", out);
  free(out);
  /* an edge orders them */
  md.edges[0] = (dm_edge){0, 1, 0};
  md.m.nedges = 1;
  cr_assert_eq(races(&md, &out), 0, "%s", out);
  free(out);
  /* copies into disjoint points do not meet; overlapping ones race */
  model_pair(&md, RP_OP_COPY, RP_WRITE, RP_OP_COPY, RP_WRITE);
  md.ops[0].domain = rp_rect_1d(0, 7);
  md.ops[1].domain = rp_rect_1d(8, 15);
  cr_assert_eq(races(&md, &out), 0, "%s", out);
  free(out);
  md.ops[1].domain = rp_rect_1d(7, 15);
  cr_assert_eq(races(&md, &out), 1, "%s", out);
  free(out);
}

/* A heap model of n copies instance 0 -> instance 1 over [0..15], then
 * ntwice tasks that read and write instance 1 (two accesses each): no
 * edges, so every pair on instance 1 races. Free md->ops and md->acc_pool
 * (the caller's). */
static void model_copies(dm_graph *g, dm_inst insts[2], rp_proc_kind *kinds,
                         uint32_t n, uint32_t ntwice) {
  for (int i = 0; i < 2; i++)
    insts[i] = (dm_inst){RP_MEM_SYSTEM, -1, RP_F32, rp_rect_1d(0, 15), ""};
  kinds[0] = RP_PROC_CPU;
  dm_op *ops = calloc(n + ntwice, sizeof *ops);
  dm_access *acc = calloc(2 * (size_t)(n + ntwice), sizeof *acc);
  cr_assert(ops && acc);
  for (uint32_t i = 0; i < n + ntwice; i++) {
    int copy = i < n;
    acc[2 * i] =
        (dm_access){copy ? 0 : 1, copy ? RP_READ : RP_RW, RP_REDOP_NONE};
    acc[2 * i + 1] = (dm_access){1, copy ? RP_WRITE : RP_READ, RP_REDOP_NONE};
    ops[i] = (dm_op){.kind = copy ? RP_OP_COPY : RP_OP_TASK,
                     .name = copy ? "copy" : "t",
                     .proc = copy ? RP_PROC_ANY : 0,
                     .pkind = RP_PROC_CPU,
                     .shards = 1,
                     .contract_known = 1,
                     .acc = &acc[2 * i],
                     .nacc = 2,
                     .domain = copy ? rp_rect_1d(0, 15) : (rp_rect){0}};
  }
  *g = (dm_graph){.ops = ops,
                  .nops = n + ntwice,
                  .insts = insts,
                  .ninsts = 2,
                  .proc_kinds = kinds,
                  .nprocs = 1,
                  .acc_pool = acc};
}

/* Many unordered ops on one instance: every pair counted once (an op that
 * accesses the instance twice too), 8 shown, the rest said in one line. */
Test(lint_model, every_racing_pair_is_counted_once) {
  dm_graph g;
  dm_inst insts[2];
  rp_proc_kind kinds[1];
  model_copies(&g, insts, kinds, 300, 2);
  uint32_t n;
  char *out = lint_model_checks(&g, DM_LINT_RACE, &n);
  uint32_t pairs = 302 * 301 / 2, shown = 0;
  for (const char *p = out; (p = strstr(p, "race: op ")); p++)
    shown++;
  cr_assert_eq(shown, 8, "%s", out);
  cr_assert_eq(n, pairs, "%s", out);
  char want[128];
  snprintf(want, sizeof want,
           "race: %u more pairs on instance 1 not shown\nlint: %u findings "
           "(race %u;",
           pairs - 8, pairs, pairs);
  cr_assert(strstr(out, want), "%s", out);
  /* the tasks' two accesses of instance 1 make one pair with each other */
  cr_assert(strstr(out, "race: op 0 (copy) copies into and op 1 (copy) "
                        "copies into instance 1"),
            "%s", out);
  free(out);
  free(g.ops), free(g.acc_pool);
}

/* Unordered copies of one source and destination: every pair is counted
 * (past 64 of them too), 8 shown, the rest said in one line. */
Test(lint_model, every_mergeable_pair_is_counted) {
  const uint32_t sizes[] = {65, 300};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    dm_graph g;
    dm_inst insts[2];
    rp_proc_kind kinds[1];
    model_copies(&g, insts, kinds, sizes[k], 0);
    uint32_t n, pairs = sizes[k] * (sizes[k] - 1) / 2, shown = 0;
    char *out = lint_model_checks(&g, DM_LINT_MERGE, &n);
    for (const char *p = out; (p = strstr(p, "mergeable-copies: ops ")); p++)
      shown++;
    cr_assert_eq(shown, 8, "%s", out);
    cr_assert_eq(n, pairs, "%u copies: %u findings", sizes[k], n);
    char want[160];
    snprintf(want, sizeof want,
             "mergeable-copies: %u more pairs of copies instance 0 -> "
             "instance 1 not shown\nlint: %u findings (mergeable-copies %u;",
             pairs - 8, pairs, pairs);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
    free(g.ops), free(g.acc_pool);
  }
}

/* Lines per check are capped at 16: three sources and destinations of 10
 * unordered copies each (45 mergeable pairs a group: 8 shown and one "N
 * more pairs" line) print 16 lines, then one that counts every finding
 * no printed line speaks for; the summary counts them all. Every pair of
 * copies on a destination races too: 3 x 45 unordered copies of one
 * rectangle. */
Test(lint_model, findings_past_16_lines_a_check_are_counted_in_one_line) {
  dm_inst insts[6];
  rp_proc_kind kinds[1] = {RP_PROC_CPU};
  dm_op ops[30];
  dm_access acc[60];
  for (int i = 0; i < 6; i++)
    insts[i] = (dm_inst){RP_MEM_SYSTEM, -1, RP_F32, rp_rect_1d(0, 15), ""};
  for (uint32_t i = 0; i < 30; i++) {
    uint32_t src = 2 * (i / 10);
    acc[2 * i] = (dm_access){src, RP_READ, RP_REDOP_NONE};
    acc[2 * i + 1] = (dm_access){src + 1, RP_WRITE, RP_REDOP_NONE};
    ops[i] = (dm_op){.kind = RP_OP_COPY,
                     .name = "copy",
                     .proc = RP_PROC_ANY,
                     .pkind = RP_PROC_CPU,
                     .shards = 1,
                     .contract_known = 1,
                     .acc = &acc[2 * i],
                     .nacc = 2,
                     .domain = rp_rect_1d(0, 15)};
  }
  dm_graph g = {.ops = ops,
                .nops = 30,
                .insts = insts,
                .ninsts = 6,
                .proc_kinds = kinds,
                .nprocs = 1};
  const struct {
    unsigned check;
    const char *name;
  } c[] = {{DM_LINT_MERGE, "mergeable-copies"}, {DM_LINT_RACE, "race"}};
  for (size_t k = 0; k < sizeof c / sizeof *c; k++) {
    uint32_t n;
    char *out = lint_model_checks(&g, c[k].check, &n);
    char head[32], want[160];
    snprintf(head, sizeof head, "%s: ", c[k].name);
    uint32_t lines = 0;
    for (const char *p = out; (p = strstr(p, head)); p++)
      lines += p == out || p[-1] == '\n';
    cr_assert_eq(n, 3 * 45, "%s", out);
    cr_assert_eq(lines, 17, "%s: %u lines: %s", c[k].name, lines, out);
    /* group 1: 8 + its line of 37; group 2: 7, then 1 + 37 unsaid;
     * group 3: all 45 unsaid */
    snprintf(want, sizeof want,
             "%s: ... (83 more)\nlint: 135 findings (%s 135; not "
             "checked:",
             c[k].name, c[k].name);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
  }
}

/* ---- dump: bad input ---- */

Test(dump, bad_input_says_why_and_exits_1_or_2) {
  make_tmpdir();
  cli_run r;
  /* usage: found before the file is read */
  const char *any = th_tmp_path("any.json");
  const char *usage[][3] = {{"--format", "svg", NULL},
                            {"--strict", NULL, NULL},
                            {"--cpus", "0", NULL},
                            {"--contract", "x=gpu", NULL},
                            {"--bogus", NULL, NULL}};
  for (size_t i = 0; i < sizeof usage / sizeof *usage; i++) {
    if (usage[i][1])
      RUN(&r, "dump", any, usage[i][0], usage[i][1]);
    else
      RUN(&r, "dump", any, usage[i][0]);
    cr_assert_eq(r.status, 2, "%s -> %d", usage[i][0], r.status);
    cr_assert(strstr(r.err, "reprise dump"), "%s", r.err);
  }
  RUN(&r, "dump");
  cr_assert_eq(r.status, 2);
  cr_assert(strstr(r.err, "missing the graph FILE"), "%s", r.err);
#ifdef REPRISE_HAVE_CJSON
  RUN(&r, "dump", th_tmp_path("missing.json"));
  cr_assert_eq(r.status, 1);
  cr_assert(strstr(r.err, "cannot load") && strstr(r.err, "RP_ENOENT"), "%s",
            r.err);
  const char *bad = th_tmp_path("bad.json");
  write_text(bad, "{\"format\": \"reprise-graph\", \"version\": 1, ");
  RUN(&r, "dump", bad);
  cr_assert_eq(r.status, 1);
  cr_assert(strstr(r.err, "RP_EFORMAT"), "%s", r.err);
  /* a changed value: the checksum no longer matches */
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  const char *g = save(&fx, "g.json");
  char *text = th_read_all(g, NULL);
  char *cost = strstr(text, "\"cost_ns\":\t300");
  cr_assert_not_null(cost, "%s", text);
  cost[strlen("\"cost_ns\":\t")] = '4';
  write_text(g, text);
  free(text);
  RUN(&r, "dump", g);
  cr_assert_eq(r.status, 1);
  cr_assert(strstr(r.err, "RP_ECHECKSUM"), "%s", r.err);
  cr_assert_str_empty(r.out);
  /* -o naming an input (the graph, by another spelling too, --trace,
   * --diff): a usage error before anything is written; the input stays */
  const char *good = save(&fx, "good.json"), *tr = th_tmp_path("t.json");
  write_text(tr, "{\"traceEvents\": []}");
  const char *alias = th_tmp_path("./good.json"); /* 7 paths: all valid */
  char *before = th_read_all(good, NULL);
  const char *over[][7] = {
      {good, "-o", good, NULL},
      {good, "-o", alias, NULL},
      {good, "--trace", tr, "--critical-path", "-o", tr, NULL},
      {good, "--diff", g, "-o", g, NULL}};
  const char *want[] = {"is the graph file", "is the graph file",
                        "is the --trace file", "is the --diff file"};
  for (size_t i = 0; i < sizeof over / sizeof *over; i++) {
    const char *args[9] = {"dump"};
    for (size_t j = 0; over[i][j]; j++)
      args[j + 1] = over[i][j];
    run_cli(&r, args);
    cr_assert_eq(r.status, 2, "case %zu: %d %s", i, r.status, r.err);
    cr_assert(strstr(r.err, want[i]), "case %zu: %s", i, r.err);
  }
  char *after = th_read_all(good, NULL);
  cr_assert_str_eq(after, before, "the graph file was written over");
  free(after);
  free(before);
  /* a trace's name reaches the message with its control bytes as \xNN */
  RUN(&r, "dump", good, "--critical-path", "--trace",
      th_tmp_path("no\x1b[31m.json"));
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "cannot read the trace '"), "%s", r.err);
  cr_assert(strstr(r.err, "no\\x1b[31m.json"), "%s", r.err);
  cr_assert_null(strchr(r.err, '\x1b'), "a raw escape: %s", r.err);
  fx_fini(&fx);
#else
  RUN(&r, "dump", any);
  cr_assert_eq(r.status, 1);
  cr_assert(strstr(r.err, "RP_EUNSUPPORTED"), "%s", r.err);
#endif
  th_tmpdir_remove();
}

/* A graph file with a mirror (copy insertion's: a fill, a task on the
 * mirror, a write-back): every analysis models the mirror as an instance
 * of its own, named after its source. */
Test(dump, mirrors_are_instances_of_their_own) {
  make_tmpdir();
  const char *g = th_tmp_path("m.json");
  write_text(
      g,
      "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
      "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1, "
      "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [7], \"strides\": [1], "
      "\"name\": \"x\"}],"
      "\"mirrors\": [{\"id\": 0, \"source\": 0, \"mem\": \"system\", "
      "\"device\": -1}],"
      "\"ops\": ["
      "{\"id\": 0, \"kind\": \"copy\", \"src\": 0, \"dst\": {\"mirror\": 0}, "
      "\"domain\": \"intersect\", \"rect\": null, \"redop\": \"none\", "
      "\"group\": 0, \"pop_kind\": null, \"backward\": false, "
      "\"inserted\": true},"
      "{\"id\": 1, \"kind\": \"task\", \"task\": \"inc\", \"proc\": \"any\", "
      "\"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0, "
      "\"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"\", "
      "\"accesses\": [{\"inst\": {\"mirror\": 0}, \"priv\": \"RW\", "
      "\"redop\": \"none\"}], \"interps\": []},"
      "{\"id\": 2, \"kind\": \"copy\", \"src\": {\"mirror\": 0}, \"dst\": 0, "
      "\"domain\": \"intersect\", \"rect\": null, \"redop\": \"none\", "
      "\"group\": 0, \"pop_kind\": null, \"backward\": false, "
      "\"inserted\": true}],"
      "\"edges\": [[0, 1], [1, 2]], \"preconditions\": [], "
      "\"postconditions\": [{\"name\": \"done\", \"ops\": [2]}]}}\n");
  cli_run r;
  RUN(&r, "dump", g, "--lint", "--strict", "--contract", "inc=host");
  cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
  cr_assert(strstr(r.out, "lint: no findings (3 ops, 2 edges checked)"), "%s",
            r.out);
  RUN(&r, "dump", g, "--stats");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "critical path: 3 ops: 0 -> 1 -> 2"), "%s", r.out);
  RUN(&r, "dump", g, "--critical-path");
  cr_assert_eq(r.status, 0, "%s", r.err);
  RUN(&r, "dump", g, "--group");
  cr_assert_eq(r.status, 0, "%s", r.err);
  RUN(&r, "dump", g, "--focus", "op 1");
  cr_assert_eq(r.status, 0, "%s", r.err);
  /* the write-back no longer after the task: a race on the mirror */
  char *text = th_read_all(g, NULL);
  char *e = strstr(text, "[1, 2]");
  cr_assert_not_null(e);
  e[1] = '0';
  write_text(g, text);
  free(text);
  RUN(&r, "dump", g, "--lint");
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(strstr(r.out, "race: op 1 (inc) reads and writes and op 2 (copy) "
                          "copies from instance 1 'x.mirror0' (f32 [0..7], "
                          "system memory)"),
            "%s", r.out);
  th_tmpdir_remove();
}

/* The members of a task op of TASK (JSON-escaped) on processor 0 that
 * reads and writes instance 0, into buf. */
static const char *task_op_json(char *buf, size_t n, const char *task) {
  snprintf(buf, n,
           "\"kind\": \"task\", \"task\": \"%s\", \"proc\": 0, "
           "\"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0, "
           "\"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"\", "
           "\"accesses\": [{\"inst\": 0, \"priv\": \"RW\", \"redop\": "
           "\"none\"}], \"interps\": []",
           task);
  return buf;
}

/* A file of one task op, TASK (JSON-escaped), over a system instance of
 * device DEV; no checksum. */
static const char *write_one_task(const char *name, const char *task, int dev) {
  const char *path = th_tmp_path(name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  char op[1024];
  fprintf(f,
          "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
          "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": %d, "
          "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], \"strides\": [1]}], "
          "\"ops\": [{\"id\": 0, %s}], \"edges\": [], "
          "\"preconditions\": [], \"postconditions\": []}}\n",
          dev, task_op_json(op, sizeof op, task));
  cr_assert_eq(fclose(f), 0);
  return path;
}

/* A task name no task can have fails the load naming the file and the op
 * (not at registering placeholders, naming neither: with --diff one could
 * not tell which file); a system instance of device 17 is refused, not
 * read as -1 (which --diff would call "no differences"). */
Test(dump, bad_task_names_and_devices_name_the_file_and_path) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON, which this build lacks");
#endif
  make_tmpdir();
  cli_run r;
  char good[512], want[640];
  snprintf(good, sizeof good, "%s", write_one_task("good.json", "my.t", -1));
  RUN(&r, "dump", good);
  cr_assert_eq(r.status, 0, "%s", r.err);
  char long_name[RP_NAME_MAX + 2];
  memset(long_name, 'x', RP_NAME_MAX + 1);
  long_name[RP_NAME_MAX + 1] = 0;
  const char *bad[][3] = {
      {"long.json", long_name,
       "graph.ops[0].task: name 'xxxxxxxxxxxxxxxxxxxx...' is longer than 63 "
       "bytes"},
      {"quote.json", "a\\\"b",
       "graph.ops[0].task: name byte 1 (0x22) is not printable"},
      {"empty.json", "", "graph.ops[0].task: an empty name"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *f = write_one_task(bad[i][0], bad[i][1], -1);
    snprintf(want, sizeof want, "reprise dump: cannot load '%s': RP_EFORMAT",
             f);
    RUN(&r, "dump", f);
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, want) && strstr(r.err, bad[i][2]), "%s", r.err);
    cr_assert_null(strstr(r.err, "registering tasks"), "%s", r.err);
    RUN(&r, "dump", good, "--diff", f);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, want) && strstr(r.err, bad[i][2]), "%s", r.err);
  }
  const char *sys = write_one_task("sys.json", "my.t", 17);
  snprintf(want, sizeof want,
           "cannot load '%s': RP_EFORMAT (malformed input): "
           "graph.instances[0].device: 17 (-1 for system memory)",
           sys);
  RUN(&r, "dump", good, "--diff", sys);
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strstr(r.err, want), "%s", r.err);
  cr_assert_null(strstr(r.out, "no differences"), "%s", r.out);
  th_tmpdir_remove();
}

/* The strict parse under every JSON input: a cut inside a string ends the
 * text early, a control byte between tokens is refused. */
Test(dump, cut_strings_and_control_bytes_are_named) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON, which this build lacks");
#endif
  make_tmpdir();
  const char *f = write_one_task("g.json", "my.t", -1);
  char *text = th_read_all(f, NULL);
  char *at = strstr(text, "my.t");
  cr_assert_not_null(at);
  size_t cut = (size_t)(at - text) + 2;
  text[cut] = 0; /* "...\"task\": \"my" */
  write_text(f, text);
  cli_run r;
  RUN(&r, "dump", f);
  cr_assert_eq(r.status, 1, "%s", r.err);
  char want[128];
  snprintf(want, sizeof want,
           "not JSON: the text ends early at byte %zu (truncated file?)", cut);
  cr_assert(strstr(r.err, want), "%s", r.err);
  free(text);
  f = write_one_task("g.json", "my.t", -1);
  text = th_read_all(f, NULL);
  at = strstr(text, " \"version\"");
  cr_assert_not_null(at);
  *at = 0x01;
  write_text(f, text);
  RUN(&r, "dump", f);
  cr_assert_eq(r.status, 1, "%s", r.err);
  snprintf(want, sizeof want, "not JSON: control byte 0x01 at byte %zu",
           (size_t)(at - text));
  cr_assert(strstr(r.err, want), "%s", r.err);
  free(text);
  th_tmpdir_remove();
}

/* A file of two placeholder ops over one instance with the given
 * "edges" (JSON) and extra keys in op 0 (JSON members, or ""); no
 * checksum. */
static const char *write_two_tasks(const char *name, const char *edges,
                                   const char *extra) {
  const char *path = th_tmp_path(name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  char buf[1024];
  const char *op = task_op_json(buf, sizeof buf, "my.t");
  fprintf(f,
          "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
          "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1, "
          "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [15], \"strides\": "
          "[1]}], \"ops\": [{\"id\": 0, %s%s}, {\"id\": 1, %s}], "
          "\"edges\": %s, \"preconditions\": [], \"postconditions\": "
          "[]}}\n",
          op, extra, op, edges);
  cr_assert_eq(fclose(f), 0);
  return path;
}

/* An edge the file lists twice is refused naming both entries (a graph
 * holds an edge once), not merged: merged, lint's "given twice" could
 * never fire and an inferred edge became one asked for. */
Test(dump, a_repeated_edge_is_refused_naming_both) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON, which this build lacks");
#endif
  make_tmpdir();
  cli_run r;
  const char *once = write_two_tasks("once.json", "[[0, 1]]", "");
  RUN(&r, "dump", once, "--lint", "--contract", "my.t=host");
  cr_assert_eq(r.status, 0, "%s", r.err);
  const char *lists[] = {"[[0, 1], [0, 1]]", "[[0, 1, \"inferred\"], [0, 1]]"};
  for (size_t i = 0; i < 2; i++) {
    const char *f = write_two_tasks("twice.json", lists[i], "");
    RUN(&r, "dump", f, "--lint", "--contract", "my.t=host");
    cr_assert_eq(r.status, 1, "%s: %s", lists[i], r.err);
    cr_assert(strstr(r.err, "RP_EFORMAT (malformed input): graph.edges[1]: "
                            "the edge 0 -> 1 repeats graph.edges[0]"),
              "%s: %s", lists[i], r.err);
    cr_assert_str_empty(r.out);
  }
  th_tmpdir_remove();
}

/* File text in a load error is escaped: an unknown key or value with
 * escape sequences (a colour, an OSC title) or a byte that is no UTF-8
 * shows as \xNN, never raw on the terminal. */
Test(dump, file_text_in_load_errors_is_escaped) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON, which this build lacks");
#endif
  make_tmpdir();
  cli_run r;
  const char *cases[][2] = {
      {", \"\\u001b[31mRED\\u001b[0m\": 1",
       "graph.ops[0]: unknown key '\\x1b[31mRED\\x1b[0m'"},
      {", \"devic\x80\": 1", "graph.ops[0]: unknown key 'devic\\x80'"}};
  for (size_t i = 0; i < 2; i++) {
    const char *f = write_two_tasks("esc.json", "[]", cases[i][0]);
    RUN(&r, "dump", f);
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, cases[i][1]), "no '%s' in %s", cases[i][1], r.err);
    for (const unsigned char *p = (const unsigned char *)r.err; *p; p++)
      cr_assert(*p == '\n' || (*p >= 0x20 && *p < 0x7f), "byte 0x%02x in %s",
                *p, r.err);
  }
  th_tmpdir_remove();
}

/* ---- REPRISE_DUMP ---- */

__attribute__((unused)) static int
count_files(const char *dir, const char *suffix, char *first, size_t cap) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null", dir);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char line[128];
  int n = 0;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = 0;
    size_t l = strlen(line), s = strlen(suffix);
    if (l > s && !strcmp(line + l - s, suffix) && !strncmp(line, "exec-", 5)) {
      if (!n++ && first)
        snprintf(first, cap, "%s/%s", dir, line);
    }
  }
  pclose(p);
  return n;
}

#ifdef REPRISE_HAVE_CJSON /* the graph file needs it */
Test(env, reprise_dump_writes_the_graph_and_the_schedule_per_exec) {
  make_tmpdir();
  const char *dir = th_tmp_path("dumps/a/b"); /* made, with its parents */
  setenv("REPRISE_DUMP", dir, 1);
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  rp_exec *e1, *e2;
  RP_CHECK(rp_instantiate(fx.g, NULL, &e1));
  RP_CHECK(rp_instantiate(fx.g, NULL, &e2));
  unsetenv("REPRISE_DUMP");
  char graph[512], sched[512];
  cr_assert_eq(count_files(dir, ".graph.json", graph, sizeof graph), 2);
  cr_assert_eq(count_files(dir, ".schedule.txt", sched, sizeof sched), 2);
  char want[64];
  snprintf(want, sizeof want, "/exec-%ld-", (long)getpid());
  cr_assert(strstr(graph, want), "%s", graph);
  /* the graph file loads back; the schedule is the exec dump */
  rp_graph *back;
  rp_inst insts[3] = {fx.in[0], fx.in[1], fx.in[2]};
  RP_CHECK(rp_graph_load(fx.rt, graph, insts, 3, &back));
  cr_assert_eq(rp_graph_op_count(back), 6);
  RP_CHECK(rp_graph_destroy(back));
  char *s = th_read_all(sched, NULL);
  cr_assert(strstr(s, "exec: 6 ops, 6 units"), "%s", s);
  free(s);
  RP_CHECK(rp_exec_destroy(e1));
  RP_CHECK(rp_exec_destroy(e2));
  fx_fini(&fx);
  th_tmpdir_remove();
}
#endif

Test(env, reprise_dump_failures_are_said_once_and_never_fail) {
  make_tmpdir();
  const char *file = th_tmp_path("not-a-dir");
  write_text(file, "x");
  char dir[200];
  snprintf(dir, sizeof dir, "%s/sub", file); /* under a regular file */
  setenv("REPRISE_DUMP", dir, 1);
  fixture fx;
  fx_init(&fx);
  build_clean(&fx);
  fflush(stderr);
  char errp[] = "/tmp/rp_dt_stderr_XXXXXX";
  int fe = mkstemp(errp), saved = dup(2);
  cr_assert(fe >= 0 && saved >= 0);
  unlink(errp);
  dup2(fe, 2);
  rp_exec *e1 = NULL, *e2 = NULL;
  rp_status s1 = rp_instantiate(fx.g, NULL, &e1);
  rp_status s2 = rp_instantiate(fx.g, NULL, &e2);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  unsetenv("REPRISE_DUMP");
  char err[4096];
  cli_slurp(fe, err, sizeof err);
  cr_assert_eq(s1, RP_OK);
  cr_assert_eq(s2, RP_OK);
  char want[300];
  snprintf(want, sizeof want, "cannot create the folder %s: Not a directory",
           file);
  cr_assert(strstr(err, "REPRISE_DUMP=") && strstr(err, want), "%s", err);
  char *second = strstr(strstr(err, "REPRISE_DUMP=") + 1, "REPRISE_DUMP=");
  cr_assert_null(second, "said twice:\n%s", err);
  RP_CHECK(rp_exec_destroy(e1));
  RP_CHECK(rp_exec_destroy(e2));
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* ---- traces ---- */

/* A graph over two workers with cross-worker waits and a copy. */
static rp_exec *trace_exec(fixture *fx) {
  build_clean(fx);
  rp_exec_opts o = {.no_replace = 1};
  rp_exec *ex;
  RP_CHECK(rp_instantiate(fx->g, &o, &ex));
  return ex;
}

static void replays(fixture *fx, rp_exec *ex, int n) {
  for (int i = 0; i < n; i++) {
    rp_event pre, done;
    RP_CHECK(rp_event_create(fx->rt, &pre));
    RP_CHECK(rp_event_trigger(fx->rt, pre));
    float lr = 0.5f;
    rp_replay_args a = {
        .args = &lr, .args_size = sizeof lr, .pre = &pre, .npre = 1};
    RP_CHECK(rp_replay(ex, &a, &done));
    RP_CHECK(rp_event_wait(fx->rt, done, -1));
    RP_CHECK(rp_event_release(fx->rt, done));
    RP_CHECK(rp_event_release(fx->rt, pre));
  }
}

Test(trace, off_takes_no_clock_reads) {
  fixture fx;
  fx_init(&fx);
  rp_exec *ex = trace_exec(&fx);
  replays(&fx, ex, 20);
  cr_assert_eq(rp__exec_trace_clock_reads(ex), 0);
  RP_CHECK(rp_exec_destroy(ex));
  fx_fini(&fx);
}

#ifdef REPRISE_HAVE_CJSON
static const char *const OP_NAMES[6] = {"rp.fill", "rp.scale",     "rp.axpy",
                                        "rp.axpy", "reprise.copy", "rp.axpy"};

/* Per replay r: the X events of its ops (cat task or copy), checked
 * against the replay's own span. */
static void check_trace(const cJSON *doc, uint64_t first, int nrep) {
  const cJSON *evs = cJSON_GetObjectItem(doc, "traceEvents"), *e;
  cr_assert(cJSON_IsArray(evs));
  int ops[8][6] = {{0}}, spans[8] = {0}, threads = 0;
  double span0[8], span1[8];
  int named[64], nnamed = 0;
  cJSON_ArrayForEach(e, evs) {
    const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
    const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
    if (!strcmp(ph, "M")) {
      threads += !strcmp(name, "thread_name");
      if (!strcmp(name, "thread_name") && nnamed < 64)
        named[nnamed++] = cJSON_GetObjectItem(e, "tid")->valueint;
      continue;
    }
    cr_assert_str_eq(ph, "X");
    const char *cat = cJSON_GetObjectItem(e, "cat")->valuestring;
    const cJSON *args = cJSON_GetObjectItem(e, "args");
    int r = (int)(cJSON_GetObjectItem(args, "replay")->valuedouble - first);
    cr_assert(r >= 0 && r < nrep, "replay %d", r);
    double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
    double dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
    cr_assert(ts >= 0 && dur >= 0 && dur < 1e7, "ts %g dur %g", ts, dur);
    if (!strcmp(cat, "replay")) {
      span0[r] = ts, span1[r] = ts + dur;
      spans[r]++;
    } else if (!strcmp(cat, "task") || !strcmp(cat, "copy")) {
      int op = cJSON_GetObjectItem(args, "op")->valueint;
      cr_assert(op >= 0 && op < 6);
      cr_assert_str_eq(name, OP_NAMES[op], "op %d", op);
      cr_assert_str_eq(cJSON_GetObjectItem(args, "status")->valuestring, "ok");
      ops[r][op]++;
    } else {
      cr_assert_str_eq(cat, "wait");
    }
  }
  for (int r = 0; r < nrep; r++) {
    cr_assert_eq(spans[r], 1, "replay %d: %d replay spans", r, spans[r]);
    for (int op = 0; op < 6; op++)
      cr_assert_eq(ops[r][op], 1, "replay %d op %d: %d events", r, op,
                   ops[r][op]);
  }
  cr_assert_geq(threads, 3, "worker and replay tracks are named");
  cJSON_ArrayForEach(e, evs) { /* every track an event is on has a name */
    if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X"))
      continue;
    int tid = cJSON_GetObjectItem(e, "tid")->valueint, k = 0;
    while (k < nnamed && named[k] != tid)
      k++;
    cr_assert(k < nnamed, "'%s' on track %d, which has no name",
              cJSON_GetObjectItem(e, "name")->valuestring, tid);
  }
  cJSON_ArrayForEach(e, evs) { /* ops lie inside their replay's span */
    const cJSON *args = cJSON_GetObjectItem(e, "args");
    const cJSON *op = args ? cJSON_GetObjectItem(args, "op") : NULL;
    if (!op || strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X"))
      continue;
    int r = (int)(cJSON_GetObjectItem(args, "replay")->valuedouble - first);
    double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
    double dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
    cr_assert(ts >= span0[r] - 0.001 && ts + dur <= span1[r] + 0.001,
              "op %d of replay %d at [%g, %g] outside [%g, %g]", op->valueint,
              r, ts, ts + dur, span0[r], span1[r]);
  }
}

Test(trace, one_complete_event_per_op_per_replay) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  rp_exec *ex = trace_exec(&fx);
  replays(&fx, ex, 2); /* untraced */
  cr_assert_eq(rp__exec_trace_clock_reads(ex), 0);
  RP_CHECK(rp_exec_trace_start(ex, 3));
  replays(&fx, ex, 5); /* 3 traced, then 2 more untraced */
  const char *path = th_tmp_path("trace.json");
  RP_CHECK(rp_exec_trace_write(ex, path));
  /* per traced replay: its submission, then 2 reads per unit (start, end)
   * and a third for a unit that waits */
  uint64_t reads = rp__exec_trace_clock_reads(ex);
  cr_assert(reads >= 3 * (1 + 2 * 6) && reads <= 3 * (1 + 3 * 6),
            "%llu clock reads", (unsigned long long)reads);
  char *text = th_read_all(path, NULL);
  cJSON *doc = cJSON_Parse(text);
  cr_assert_not_null(doc, "not JSON:\n%s", text);
  cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "otherData"),
                                   "replays_traced")
                   ->valueint,
               3);
  check_trace(doc, 2, 3);
  cJSON_Delete(doc);
  free(text);
  replays(&fx, ex, 3); /* recording stopped */
  cr_assert_eq(rp__exec_trace_clock_reads(ex), reads);
  RP_CHECK(rp_exec_destroy(ex));
  fx_fini(&fx);
  th_tmpdir_remove();
}

Test(trace, write_keeps_only_the_replays_issued) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  rp_exec *ex = trace_exec(&fx);
  RP_CHECK(rp_exec_trace_start(ex, 10));
  replays(&fx, ex, 2);
  const char *path = th_tmp_path("t.json");
  RP_CHECK(rp_exec_trace_write(ex, path));
  char *text = th_read_all(path, NULL);
  cJSON *doc = cJSON_Parse(text);
  cr_assert_not_null(doc);
  const cJSON *od = cJSON_GetObjectItem(doc, "otherData");
  cr_assert_eq(cJSON_GetObjectItem(od, "replays_traced")->valueint, 2);
  cr_assert_eq(cJSON_GetObjectItem(od, "replays_armed")->valueint, 10);
  check_trace(doc, 0, 2);
  cJSON_Delete(doc);
  free(text);
  RP_CHECK(rp_exec_destroy(ex));
  fx_fini(&fx);
  th_tmpdir_remove();
}
#endif

Test(trace, errors_leave_the_exec_usable) {
  make_tmpdir();
  fixture fx;
  fx_init(&fx);
  rp_exec *ex = trace_exec(&fx);
  RP_EXPECT(rp_exec_trace_start(NULL, 1), RP_EINVAL);
  RP_EXPECT(rp_exec_trace_start(ex, 0), RP_EINVAL);
  RP_EXPECT(rp_exec_trace_start(ex, 1u << 30), RP_ERANGE);
  RP_EXPECT(rp_exec_trace_write(ex, th_tmp_path("t.json")), RP_EINVAL);
  RP_CHECK(rp_exec_trace_start(ex, 2));
  RP_EXPECT(rp_exec_trace_start(ex, 2), RP_EBUSY);
  cr_assert(strstr(rp_error_detail(), "armed"), "%s", rp_error_detail());
  replays(&fx, ex, 2);
  RP_EXPECT(rp_exec_trace_write(ex, NULL), RP_EINVAL);
  RP_EXPECT(rp_exec_trace_write(ex, "/nonexistent-dir/t.json"), RP_EIO);
  cr_assert(strstr(rp_error_detail(), "/nonexistent-dir/t.json"));
  RP_CHECK(rp_exec_trace_write(ex, th_tmp_path("t.json"))); /* still armed */
  RP_EXPECT(rp_exec_trace_write(ex, th_tmp_path("t.json")), RP_EINVAL);
  replays(&fx, ex, 1);
  RP_CHECK(rp_exec_destroy(ex));
  fx_fini(&fx);
  /* an exec destroyed with a trace armed frees it */
  fx_init(&fx);
  ex = trace_exec(&fx);
  RP_CHECK(rp_exec_trace_start(ex, 4));
  replays(&fx, ex, 1);
  RP_CHECK(rp_exec_destroy(ex));
  fx_fini(&fx);
  th_tmpdir_remove();
}

/* ---- plots ---- */

static const char ROWS[] =
    "[{\"workload\": \"chain\", \"mode\": \"replay\", \"nodes\": 1000, "
    "\"ns_per_task_median\": 70.5},\n"
    " {\"workload\": \"chain\", \"mode\": \"replay\", \"nodes\": 100, "
    "\"ns_per_task_median\": 90.1},\n"
    " {\"workload\": \"chain\", \"mode\": \"eager\", \"nodes\": 100, "
    "\"ns_per_task_median\": 480},\n"
    " {\"case\": \"hop_spin\", \"mode\": \"replay\", \"ns_median\": 300}]\n";

__attribute__((unused)) static const char TIMINGS[] =
    "{\"format\": \"reprise-timings\", \"version\": 1, \"iterations\": ["
    "{\"iteration\": 0, \"mode\": \"eager\", \"ns\": 1800000},"
    "{\"iteration\": 1, \"mode\": \"record\", \"ns\": 2500000},"
    "{\"iteration\": 2, \"mode\": \"replay\", \"ns\": 400000},"
    "{\"iteration\": 3, \"mode\": \"replay\", \"ns\": 390000}]}\n";

#ifdef REPRISE_HAVE_CJSON
Test(plot, bench_rows_and_train_timings_draw_svg) {
  if (!have_tool("gnuplot"))
    cr_skip_test("gnuplot is not installed");
  make_tmpdir();
  const char *rows = th_tmp_path("rows.json"), *tim = th_tmp_path("t.json");
  const char *svg = th_tmp_path("b.svg"), *svg2 = th_tmp_path("t.svg");
  write_text(rows, ROWS);
  write_text(tim, TIMINGS);
  cli_run r;
  RUN(&r, "plot", "--bench", rows, "-o", svg);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  char *s = th_read_all(svg, NULL);
  cr_assert(strstr(s, "<svg"), "not an SVG");
  cr_assert(strstr(s, "chain replay") && strstr(s, "chain eager"), "%s", s);
  free(s);
  RUN(&r, "plot", "--train", tim, "-o", svg2);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  s = th_read_all(svg2, NULL);
  cr_assert(strstr(s, "replay") && strstr(s, "record"), "%s", s);
  free(s);
  th_tmpdir_remove();
}

Test(plot, png_uses_pngcairo_when_gnuplot_has_it) {
  if (!have_tool("gnuplot"))
    cr_skip_test("gnuplot is not installed");
  if (system("echo 'set terminal pngcairo' | gnuplot >/dev/null 2>&1") &&
      system("echo 'set terminal png' | gnuplot >/dev/null 2>&1"))
    cr_skip_test("this gnuplot has no PNG terminal");
  make_tmpdir();
  const char *tim = th_tmp_path("t.json"), *png = th_tmp_path("t.png");
  write_text(tim, TIMINGS);
  cli_run r;
  RUN(&r, "plot", "--train", tim, "-o", png);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  size_t len;
  char *s = th_read_all(png, &len);
  cr_assert(len > 8 && !memcmp(s, "\x89PNG", 4), "not a PNG");
  free(s);
  th_tmpdir_remove();
}
#endif

Test(plot, without_gnuplot_or_with_bad_input_says_why) {
  make_tmpdir();
  char rows[512], bad[512]; /* th_tmp_path keeps only its last 8 paths */
  snprintf(rows, sizeof rows, "%s", th_tmp_path("rows.json"));
  snprintf(bad, sizeof bad, "%s", th_tmp_path("bad.json"));
  write_text(rows, ROWS);
  write_text(bad, "{\"format\": \"other\"}");
  cli_run r;
  setenv("REPRISE_GNUPLOT", "/nonexistent/gnuplot", 1);
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("x.svg"));
  unsetenv("REPRISE_GNUPLOT");
#ifdef REPRISE_HAVE_CJSON
  /* a variable naming no program is a bad value: exit 2 (a directory
   * too, which access(X_OK) would pass) */
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strstr(r.err, "REPRISE_GNUPLOT=/nonexistent/gnuplot is not an "
                          "executable program"),
            "%s", r.err);
  setenv("REPRISE_GNUPLOT", "/tmp", 1);
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("x.svg"));
  unsetenv("REPRISE_GNUPLOT");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strstr(r.err, "REPRISE_GNUPLOT=/tmp is not an executable"), "%s",
            r.err);
  RUN(&r, "plot", "--train", bad, "-o", th_tmp_path("x.svg"));
  cr_assert_eq(r.status, 1);
  cr_assert(strstr(r.err, "not a timings file"), "%s", r.err);
  RUN(&r, "plot", "--train", th_tmp_path("missing.json"), "-o",
      th_tmp_path("x.svg"));
  cr_assert_eq(r.status, 1);
  cr_assert(strstr(r.err, "cannot read"), "%s", r.err);
#endif
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("x.jpg"));
  cr_assert_eq(r.status, 2);
  cr_assert(strstr(r.err, ".svg or .png"), "%s", r.err);
  RUN(&r, "plot", "--bench", rows);
  cr_assert_eq(r.status, 2);
  RUN(&r, "plot", "--bench", rows, "--train", bad, "-o", th_tmp_path("x.svg"));
  cr_assert_eq(r.status, 2);
#ifdef REPRISE_HAVE_CJSON
  /* rows of another benchmark: nothing to draw, and why */
  write_text(rows, "[{\"case\": \"contiguous\", \"bytes\": 65536, "
                   "\"planned_gbps\": 20.1}]");
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("x.svg"));
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "nothing to plot: no DAG workload rows"), "%s",
            r.err);
#endif
  /* the picture over its own input: refused, the input kept */
  const char *svg = th_tmp_path("rows.svg");
  write_text(svg, ROWS);
  RUN(&r, "plot", "--bench", svg, "-o", svg);
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strstr(r.err, "--output") && strstr(r.err, "is the --bench file"),
            "%s", r.err);
  char *kept = th_read_all(svg, NULL);
  cr_assert_str_eq(kept, ROWS);
  free(kept);
  th_tmpdir_remove();
}

#ifdef REPRISE_HAVE_CJSON
/* A gnuplot that keeps the script it is given in dir/script.gp and draws
 * a stub SVG: what plot asks for, without a real gnuplot. Sets
 * REPRISE_GNUPLOT; returns the script's path. */
static const char *fake_gnuplot(void) {
  static char gp[512], script[512];
  snprintf(gp, sizeof gp, "%s", th_tmp_path("gnuplot"));
  snprintf(script, sizeof script, "%s", th_tmp_path("script.gp"));
  FILE *f = fopen(gp, "w");
  cr_assert_not_null(f);
  fprintf(f, "#!/bin/sh\ncat >'%s'\necho '<svg></svg>'\n", script);
  fclose(f);
  cr_assert_eq(chmod(gp, 0755), 0);
  setenv("REPRISE_GNUPLOT", gp, 1);
  return script;
}

/* The script's data block of series i ("$sI << EOD" ... "EOD"), NUL
 * terminated in place; NULL when there is none. */
static char *data_block(char *script, unsigned i) {
  char head[32];
  snprintf(head, sizeof head, "$s%u << EOD\n", i);
  char *p = strstr(script, head);
  if (!p)
    return NULL;
  p += strlen(head);
  char *end = strstr(p, "EOD\n");
  cr_assert_not_null(end, "series %u's block does not end", i);
  *end = 0;
  return p;
}

static unsigned count_lines(const char *s) {
  unsigned n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

/* 3000 rows of one series, sizes descending, each size twice (the
 * second row's ns lower): the points come out by size, equal sizes in the
 * rows' order (a stable sort, not one by ns). */
Test(plot, bench_points_sort_by_size_ties_in_row_order) {
  make_tmpdir();
  char rows[512];
  snprintf(rows, sizeof rows, "%s", th_tmp_path("rows.json"));
  const char *script = fake_gnuplot();
  const unsigned sizes = 1500;
  FILE *f = fopen(rows, "w");
  cr_assert_not_null(f);
  fputc('[', f);
  for (unsigned k = sizes; k >= 1; k--)
    for (unsigned t = 0; t < 2; t++)
      fprintf(f,
              "%s{\"workload\": \"chain\", \"mode\": \"replay\", "
              "\"nodes\": %u, \"ns_per_task_median\": %u}\n",
              k == sizes && !t ? "" : ",", k, 2 * k + 1 - t);
  fputs("]\n", f);
  fclose(f);
  cli_run r;
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("b.svg"));
  unsetenv("REPRISE_GNUPLOT");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  char *s = th_read_all(script, NULL);
  char *data = data_block(s, 0);
  cr_assert_not_null(data, "no data in:\n%.2000s", s);
  cr_assert_null(data_block(data + strlen(data) + 4, 1), "a second series");
  cr_assert_eq(count_lines(data), 2 * sizes);
  char *line = data;
  for (unsigned k = 1; k <= sizes; k++)
    for (unsigned t = 0; t < 2; t++) {
      unsigned x, y;
      cr_assert_eq(sscanf(line, "%u %u", &x, &y), 2, "%.80s", line);
      cr_assert(x == k && y == 2 * k + 1 - t, "point %u: '%u %u', want '%u %u'",
                2 * (k - 1) + t, x, y, k, 2 * k + 1 - t);
      line = strchr(line, '\n') + 1;
    }
  free(s);
  th_tmpdir_remove();
}

/* 1e999 parses as infinity: refused, naming the file and the entry. */
Test(plot, train_refuses_non_finite_numbers) {
  make_tmpdir();
  char tim[512];
  snprintf(tim, sizeof tim, "%s", th_tmp_path("t.json"));
  fake_gnuplot();
  static const char *const bad[][2] = {
      {"{\"iteration\": 0, \"mode\": \"replay\", \"ns\": 5}, "
       "{\"iteration\": 1, \"mode\": \"replay\", \"ns\": 1e999}",
       ": iterations[1]: \"ns\": expected a finite number > 0"},
      {"{\"iteration\": 1e999, \"mode\": \"replay\", \"ns\": 5}",
       ": iterations[0]: \"iteration\": expected a whole number in "
       "0..4294967295"},
      /* finite but no iteration: gnuplot found no x range, or drew 0.5 */
      {"{\"iteration\": 1e300, \"mode\": \"replay\", \"ns\": 5}",
       ": iterations[0]: \"iteration\": expected a whole number in "
       "0..4294967295"},
      {"{\"iteration\": 0, \"mode\": \"replay\", \"ns\": 5}, "
       "{\"iteration\": 0.5, \"mode\": \"replay\", \"ns\": 5}",
       ": iterations[1]: \"iteration\": expected a whole number in "
       "0..4294967295"},
      {"{\"iteration\": 0, \"mode\": \"replay\", \"ns\": -1e999}",
       ": iterations[0]: \"ns\": expected a finite number > 0"},
      {"", ": no iterations to plot"},
      {"{\"iteration\": 0, \"mode\": \"replay\", \"ns\": 5, \"ns\": 6}",
       ": iterations[0]: key 'ns' appears twice"},
      /* a key's bytes are quoted, never written raw to a terminal */
      {"{\"iteration\": 0, \"mode\": \"replay\", \"ns\": 5, \"\\u001bX\": 1, "
       "\"\\u001bX\": 2}",
       ": iterations[0]: key '\\x1bX' appears twice"},
      {"{\"iteration\": 0, \"mode\": \"\", \"ns\": 5}",
       ": iterations[0]: \"mode\": expected a non-empty string"},
      {"{\"iteration\": 0, \"mode\": \"replay\", \"ns\": 5}, 7",
       ": iterations[1]: not an object"}};
  cli_run r;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[512], want[600];
    snprintf(text, sizeof text,
             "{\"format\": \"reprise-timings\", \"version\": 1, "
             "\"iterations\": [%s]}",
             bad[i][0]);
    write_text(tim, text);
    snprintf(want, sizeof want, "reprise plot: '%s'%s", tim, bad[i][1]);
    RUN(&r, "plot", "--train", tim, "-o", th_tmp_path("t.svg"));
    cr_assert_eq(r.status, 1, "case %zu: %s", i, r.err);
    cr_assert(strstr(r.err, want), "case %zu: no '%s' in %s", i, want, r.err);
  }
  /* bench rows are named as such, as --bench names timings */
  write_text(tim, "[{\"workload\": \"chain\", \"mode\": \"replay\", "
                  "\"nodes\": 10, \"ns_per_task_median\": 5}]");
  RUN(&r, "plot", "--train", tim, "-o", th_tmp_path("t.svg"));
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "bench rows, not a train timings file: plot them "
                          "with --bench"),
            "%s", r.err);
  /* another version is named as such */
  write_text(tim, "{\"format\": \"reprise-timings\", \"version\": 2, "
                  "\"iterations\": []}");
  RUN(&r, "plot", "--train", tim, "-o", th_tmp_path("t.svg"));
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "timings version 2 (this build reads version 1)"),
            "%s", r.err);
  unsetenv("REPRISE_GNUPLOT");
  th_tmpdir_remove();
}

/* A long run's timings draw each of 2000 runs of points as its lowest and
 * highest one (a million points made a 106 MB SVG), spikes kept; names
 * are drawn as written (no gnuplot markup); a single point draws without
 * gnuplot's empty-range warning. */
Test(plot, long_series_are_thinned_names_literal_one_point_quiet,
     .timeout = 120) {
  if (!have_tool("gnuplot"))
    cr_skip_test("gnuplot is not installed");
  make_tmpdir();
  char tim[512], svg[512];
  snprintf(tim, sizeof tim, "%s", th_tmp_path("t.json"));
  snprintf(svg, sizeof svg, "%s", th_tmp_path("t.svg"));
  FILE *f = fopen(tim, "w");
  cr_assert_not_null(f);
  fprintf(f, "{\"format\": \"reprise-timings\", \"version\": 1, "
             "\"iterations\": [");
  enum { NPT = 100000 };
  for (int i = 0; i < NPT; i++)
    fprintf(f, "%s{\"iteration\": %d, \"mode\": \"re_play^x\", \"ns\": %d}",
            i ? ", " : "", i, i == 54321 ? 987654321 : 1000 + i % 7);
  fprintf(f, "]}");
  fclose(f);
  cli_run r;
  RUN(&r, "plot", "--train", tim, "-o", svg);
  cr_assert_eq(r.status, 0, "%s", r.err);
  size_t len = 0;
  char *s = th_read_all(svg, &len);
  cr_assert_lt(len, 2000000u, "an SVG of %zu bytes", len);
  cr_assert(strstr(s, "re_play^x"), "the name as written");
  cr_assert_null(strstr(s, "<tspan"), "gnuplot markup in the names");
  free(s);
  /* the one spike (987654 us) stays: the y axis reaches 1e+06 (without
   * it the largest tick is 1000) */
  s = th_read_all(svg, NULL);
  cr_assert(strstr(s, ">1e+06<"), "the spike was dropped");
  free(s);
  write_text(tim, "{\"format\": \"reprise-timings\", \"version\": 1, "
                  "\"iterations\": [{\"iteration\": 0, \"mode\": \"replay\", "
                  "\"ns\": 5000}]}");
  RUN(&r, "plot", "--train", tim, "-o", svg);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert_eq(r.err[0], '\0', "stderr: %s", r.err);
  th_tmpdir_remove();
}

/* Names that share their first 100+ bytes are different series (the
 * whole name compared), their legends cut in the middle for display. */
Test(plot, long_names_sharing_a_prefix_are_different_series) {
  make_tmpdir();
  char tim[512], rows[512], pre[201];
  snprintf(tim, sizeof tim, "%s", th_tmp_path("t.json"));
  snprintf(rows, sizeof rows, "%s", th_tmp_path("rows.json"));
  const char *script = fake_gnuplot();
  memset(pre, 'm', 200);
  pre[200] = 0;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  fputs("{\"format\": \"reprise-timings\", \"version\": 1, \"iterations\": [",
        f);
  for (unsigned i = 0; i < 6; i++)
    fprintf(f, "%s{\"iteration\": %u, \"mode\": \"%s%u\", \"ns\": 1000}",
            i ? ", " : "", i, pre, i % 3);
  fputs("]}\n", f);
  fclose(f);
  write_text(tim, text);
  free(text);
  cli_run r;
  RUN(&r, "plot", "--train", tim, "-o", th_tmp_path("t.svg"));
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  char *s = th_read_all(script, NULL);
  for (unsigned i = 0; i < 3; i++) {
    char *data = data_block(s, i);
    cr_assert_not_null(data, "no series %u", i);
    cr_assert_eq(count_lines(data), 2, "series %u: %s", i, data);
    data[strlen(data)] = 'E'; /* the block's end back for the next */
  }
  cr_assert_null(data_block(s, 3), "a fourth series:\n%s", s);
  for (unsigned i = 0; i < 3; i++) {
    char legend[128];
    snprintf(legend, sizeof legend, "title '%.60s...%.31s%u'", pre, pre, i);
    cr_assert(strstr(s, legend), "no legend %u in:\n%s", i, s);
  }
  free(s);
  /* bench rows: two workloads with one long prefix, two series */
  f = fopen(rows, "w");
  cr_assert_not_null(f);
  fprintf(f,
          "[{\"workload\": \"%sa\", \"mode\": \"replay\", \"nodes\": 10, "
          "\"ns_per_task_median\": 5},\n"
          " {\"workload\": \"%sb\", \"mode\": \"replay\", \"nodes\": 10, "
          "\"ns_per_task_median\": 7}]\n",
          pre, pre);
  fclose(f);
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("b.svg"));
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  s = th_read_all(script, NULL);
  cr_assert(strstr(s, "a replay'") && strstr(s, "b replay'"), "%s", s);
  /* names past 40 bytes: the key below the plot, which keeps its width */
  cr_assert(strstr(s, "set key below"), "%s", s);
  cr_assert(strstr(s, "$s0 << EOD\n10 5\nEOD\n$s1 << EOD\n10 7\nEOD\n"), "%s",
            s);
  free(s);
  unsetenv("REPRISE_GNUPLOT");
  th_tmpdir_remove();
}

/* What XML may not hold (bytes that are no UTF-8, U+FFFF) reaches the
 * picture's titles as U+FFFD (the SVG did not parse); rows of several
 * worker counts are told apart, and --quick rows say so. */
Test(plot, names_stay_xml_and_series_carry_workers_and_quick) {
  make_tmpdir();
  char rows[512];
  snprintf(rows, sizeof rows, "%s", th_tmp_path("rows.json"));
  const char *script = fake_gnuplot();
  write_text(rows, "[{\"workload\": \"a\xff\", \"mode\": \"replay\", "
                   "\"nodes\": 10, \"ns_per_task_median\": 5},"
                   "{\"workload\": \"b\\uffffc\", \"mode\": \"replay\", "
                   "\"nodes\": 10, \"ns_per_task_median\": 5}]");
  cli_run r;
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("b.svg"));
  cr_assert_eq(r.status, 0, "%s", r.err);
  char *sc = th_read_all(script, NULL);
  cr_assert(strstr(sc, "title 'a\xef\xbf\xbd replay'") &&
                strstr(sc, "title 'b\xef\xbf\xbd"
                           "c replay'"),
            "%s", sc);
  cr_assert(!strchr(sc, '\xff') && !strstr(sc, "\xef\xbf\xbf"), "%s", sc);
  free(sc);
  write_text(rows, "[{\"workload\": \"chain\", \"mode\": \"replay\", "
                   "\"workers\": 1, \"nodes\": 10, \"ns_per_task_median\": 5},"
                   "{\"workload\": \"chain\", \"mode\": \"replay\", "
                   "\"workers\": 2, \"nodes\": 10, \"ns_per_task_median\": 3, "
                   "\"quick\": true}]");
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("b.svg"));
  unsetenv("REPRISE_GNUPLOT");
  cr_assert_eq(r.status, 0, "%s", r.err);
  sc = th_read_all(script, NULL);
  cr_assert(strstr(sc, "title 'chain replay, 1 worker'") &&
                strstr(sc, "title 'chain replay, 2 workers (--quick)'"),
            "%s", sc);
  /* two colours: the worker counts are two groups */
  cr_assert(strstr(sc, "lc rgb '#1f77b4'") && strstr(sc, "lc rgb '#d62728'"),
            "%s", sc);
  free(sc);
  th_tmpdir_remove();
}

/* replay, eager and static rows of one workload: one colour, three line
 * and point styles (static drew as eager did). */
Test(plot, bench_modes_draw_in_their_own_styles) {
  make_tmpdir();
  char rows[512];
  snprintf(rows, sizeof rows, "%s", th_tmp_path("rows.json"));
  const char *script = fake_gnuplot();
  write_text(rows, "[{\"workload\": \"chain\", \"mode\": \"replay\", "
                   "\"nodes\": 10, \"ns_per_task_median\": 5},"
                   "{\"workload\": \"chain\", \"mode\": \"eager\", "
                   "\"nodes\": 10, \"ns_per_task_median\": 9},"
                   "{\"workload\": \"chain\", \"mode\": \"static\", "
                   "\"nodes\": 10, \"ns_per_task_median\": 4}]");
  cli_run r;
  RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("b.svg"));
  unsetenv("REPRISE_GNUPLOT");
  cr_assert_eq(r.status, 0, "%s", r.err);
  char *sc = th_read_all(script, NULL);
  cr_assert(strstr(sc, "$s0 using 1:2 with linespoints lw 2 pt 7 dt 1"), "%s",
            sc);
  cr_assert(strstr(sc, "$s1 using 1:2 with linespoints lw 2 pt 8 dt 2"), "%s",
            sc);
  cr_assert(strstr(sc, "$s2 using 1:2 with linespoints lw 2 pt 9 dt 3"), "%s",
            sc);
  cr_assert(strstr(sc, "set key outside right top"), "%s", sc);
  free(sc);
  th_tmpdir_remove();
}

Test(plot, bench_errors_name_the_file) {
  make_tmpdir();
  char rows[512], want[600];
  snprintf(rows, sizeof rows, "%s", th_tmp_path("rows.json"));
  fake_gnuplot();
  static const char *const bad[][2] = {
      {"{\"rows\": []}", "not bench rows (want the JSON array"},
      {"[{\"case\": \"hop_spin\"}]", "nothing to plot: no DAG workload rows"},
      {"{\"format\": \"reprise-timings\"}",
       "a train timings file, not bench rows"},
      /* a workload row that cannot be drawn is refused, not dropped */
      {"[{\"workload\": \"a\"}]", "row 0: \"mode\" is not a non-empty string"},
      {"[{\"workload\": \"a\", \"mode\": \"replay\", \"nodes\": 10, "
       "\"ns_per_task_median\": 5}, {\"workload\": \"a\", \"mode\": "
       "\"replay\", \"nodes\": 20, \"ns_per_task_median\": 1e999}]",
       "row 1: \"ns_per_task_median\" is not a finite number above 0"},
      {"[{\"workload\": \"a\", \"mode\": \"eager\", \"nodes\": 0, "
       "\"ns_per_task_median\": 5}]",
       "row 0: \"nodes\" is not a whole number in 1..4294967295"},
      {"[{\"workload\": \"a\", \"mode\": \"eager\", \"nodes\": 1.5, "
       "\"ns_per_task_median\": 5}]",
       "row 0: \"nodes\" is not a whole number in 1..4294967295"},
      {"[{\"workload\": \"\", \"mode\": \"eager\", \"nodes\": 5, "
       "\"ns_per_task_median\": 5}]",
       "row 0: \"workload\" is not a non-empty string"},
      {"[{\"workload\": \"a\", \"mode\": \"eager\", \"nodes\": 5, "
       "\"ns_per_task_median\": \"5\"}]",
       "row 0: \"ns_per_task_median\" is not a finite number above 0"},
      {"[{\"workload\": \"chain\", \"workload\": \"x\", \"mode\": "
       "\"eager\", \"nodes\": 5, \"ns_per_task_median\": 5}]",
       "row 0: key 'workload' appears twice"},
      {"[{\"case\": \"hop_spin\"}, null]", "row 1: not an object"}};
  cli_run r;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_text(rows, bad[i][0]);
    RUN(&r, "plot", "--bench", rows, "-o", th_tmp_path("b.svg"));
    cr_assert_eq(r.status, 1, "case %zu: %s", i, r.err);
    snprintf(want, sizeof want, "reprise plot: '%s': %s", rows, bad[i][1]);
    cr_assert(strstr(r.err, want), "case %zu: no '%s' in %s", i, want, r.err);
  }
  unsetenv("REPRISE_GNUPLOT");
  th_tmpdir_remove();
}
#endif

Test(plot, bench_sweeps_sizes_and_plots_them, .timeout = 300) {
#ifndef REPRISE_HAVE_BENCH
  cr_skip_test("built with -DREPRISE_BENCH=OFF: the CLI has no benchmarks");
#endif
  make_tmpdir();
  const char *rows = th_tmp_path("rows.json"), *svg = th_tmp_path("b.svg");
#ifdef REPRISE_HAVE_CJSON
  int gp = have_tool("gnuplot");
#else
  int gp = 0; /* --plot reads the rows back as JSON */
#endif
  cli_run r;
  if (gp)
    RUN(&r, "bench", "--quick", "--mode", "replay", "--workload", "chain",
        "--sizes", "10,50", "--json", rows, "--plot", svg);
  else
    RUN(&r, "bench", "--quick", "--mode", "replay", "--workload", "chain",
        "--sizes", "10,50", "--json", rows);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  char *s = th_read_all(rows, NULL);
  cr_assert(strstr(s, "\"nodes\": 10,") && strstr(s, "\"nodes\": 50,"), "%s",
            s);
  free(s);
  if (gp) {
    s = th_read_all(svg, NULL);
    cr_assert(strstr(s, "chain replay"), "no series in the SVG");
    free(s);
  }
#ifdef REPRISE_HAVE_CJSON
  /* a gnuplot without a PNG terminal: said before any benchmark runs */
  const char *nopng = th_tmp_path("gnuplot");
  write_text(nopng, "#!/bin/sh\nexit 1\n");
  cr_assert_eq(chmod(nopng, 0755), 0);
  setenv("REPRISE_GNUPLOT", nopng, 1);
  RUN(&r, "bench", "--quick", "--mode", "replay", "--workload", "chain",
      "--sizes", "10,50", "--plot", th_tmp_path("b.png"));
  unsetenv("REPRISE_GNUPLOT");
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "has no PNG terminal"), "%s", r.err);
  cr_assert_str_empty(r.out, "a benchmark ran: %s", r.out);
#endif
  RUN(&r, "bench", "--sizes", "2");
  cr_assert_eq(r.status, 2);
  RUN(&r, "bench", "--xfer", "--plot", svg);
  cr_assert_eq(r.status, 2);
  th_tmpdir_remove();
}

/* ---- a graph file opens anywhere: the model of the recorded machine ---- */

/* A file as `reprise train --backend cuda --procs 2` writes one on a GPU
 * machine: one CPU worker, two logical GPUs (procs 1, 2) on devices 0 and
 * 1, an instance in each GPU memory and one pinned, a task per GPU and a
 * copy between the GPU memories (written by hand: no GPU is needed). */
static const char GPU_FILE[] =
    "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
    "\"instances\": ["
    "{\"id\": 0, \"mem\": \"gpu\", \"device\": 0, \"dtype\": \"f32\", "
    "\"lo\": [0], \"hi\": [15], \"strides\": [1], \"name\": \"W.gpu0\"},"
    "{\"id\": 1, \"mem\": \"gpu\", \"device\": 1, \"dtype\": \"f32\", "
    "\"lo\": [0], \"hi\": [15], \"strides\": [1], \"name\": \"W.gpu1\"},"
    "{\"id\": 2, \"mem\": \"pinned\", \"device\": -1, \"dtype\": \"f32\", "
    "\"lo\": [0], \"hi\": [15], \"strides\": [1], \"name\": \"staging\"}],"
    "\"ops\": ["
    "{\"id\": 0, \"kind\": \"task\", \"task\": \"t.dev\", \"proc\": 1, "
    "\"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0, "
    "\"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"\", \"accesses\": "
    "[{\"inst\": 0, \"priv\": \"RW\", \"redop\": \"none\"}], \"interps\": [], "
    "\"name\": \"fwd.gpu0\"},"
    "{\"id\": 1, \"kind\": \"task\", \"task\": \"t.dev\", \"proc\": 2, "
    "\"shards\": 1, \"shard_procs\": null, \"workspace_bytes\": 0, "
    "\"workspace_align\": 0, \"cost_ns\": 0, \"args\": \"\", \"accesses\": "
    "[{\"inst\": 1, \"priv\": \"RW\", \"redop\": \"none\"}], \"interps\": [], "
    "\"name\": \"fwd.gpu1\"},"
    "{\"id\": 2, \"kind\": \"copy\", \"src\": 0, \"dst\": 1, \"domain\": "
    "\"dst\", \"rect\": null, \"redop\": \"sum\", \"group\": 0, "
    "\"pop_kind\": null, \"backward\": false, \"inserted\": false, "
    "\"name\": \"allreduce\"},"
    "{\"id\": 3, \"kind\": \"copy\", \"src\": 1, \"dst\": 2, \"domain\": "
    "\"dst\", \"rect\": null, \"redop\": \"none\", \"group\": 0, "
    "\"pop_kind\": null, \"backward\": false, \"inserted\": false, "
    "\"name\": \"to.host\"}],"
    "\"edges\": [[0, 2], [1, 2], [2, 3]],"
    "\"preconditions\": [], \"postconditions\": [{\"name\": \"step\", "
    "\"ops\": [3]}],"
    "\"machine\": {\"cpus\": 1, \"gpus\": [0, 1], \"mems\": ["
    "{\"mem\": \"system\", \"device\": -1}, {\"mem\": \"pinned\", "
    "\"device\": -1}, {\"mem\": \"gpu\", \"device\": 0}, {\"mem\": \"gpu\", "
    "\"device\": 1}]}}}\n";

static const char *write_gpu_file(void) {
  const char *path = th_tmp_path("gpu.json");
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  cr_assert_eq(fputs(GPU_FILE, f) >= 0, 1);
  cr_assert_eq(fclose(f), 0);
  return path;
}

Test(anywhere, gpu_file_dumps_in_every_format_without_a_gpu) {
  make_tmpdir();
  const char *g = write_gpu_file();
  cli_run r;
  RUN(&r, "dump", g);
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "machine: 1 CPU worker (procs 0..0); proc 1 gpu "
                          "device 0, proc 2 gpu device 1; memories: "
                          "system, pinned, gpu 0, gpu 1"),
            "%s", r.out);
  cr_assert(strstr(r.out, "op 1 'fwd.gpu1': task 't.dev' proc 2"), "%s", r.out);
  RUN(&r, "dump", g, "--format", "dot");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "digraph"), "%s", r.out);
  cr_assert(strstr(r.out, "fwd.gpu0"), "%s", r.out);
  RUN(&r, "dump", g, "--format", "json");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "\"gpus\":"), "%s", r.out);
  cr_assert(strstr(r.out, "\"mem\":\t\"gpu\""), "%s", r.out);
  RUN(&r, "dump", g, "--stats");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "proc 1 (gpu)"), "%s", r.out);
  cr_assert(strstr(r.out, "proc 2 (gpu)"), "%s", r.out);
  RUN(&r, "dump", g, "--lint", "--contract", "t.dev=stream");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  /* planned for the recorded machine: lanes, launchers and the GPU
   * segments (one per device), without CUDA */
  RUN(&r, "dump", g, "--schedule");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "lane 1 (GPU processor 1, run by segment launches)"),
            "%s", r.out);
  cr_assert(strstr(r.out, "op 0 fwd.gpu0"), "%s", r.out);
  cr_assert(strstr(r.out, "gpu segments: 2"), "%s", r.out);
  cr_assert(strstr(r.out, "segment 1: gpu lane 2, depth 0, 3 ops, CUDA graph"),
            "%s", r.out);
  RUN(&r, "dump", g, "--schedule", "--format", "json");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  /* two logical GPUs of one device (the machine's GPU list names device
   * 0 twice, and W.gpu1 moves to gpu 0 memory) plan as one group: one
   * segment for both */
  char *one = strdup(GPU_FILE);
  char *at = strstr(one, "\"gpus\": [0, 1]");
  cr_assert_not_null(at);
  at[strlen("\"gpus\": [0, ")] = '0';
  at = strstr(one, "\"id\": 1, \"mem\": \"gpu\", \"device\": 1");
  cr_assert_not_null(at);
  at[strlen("\"id\": 1, \"mem\": \"gpu\", \"device\": ")] = '0';
  const char *g1 = th_tmp_path("one_device.json");
  FILE *f = fopen(g1, "w");
  cr_assert_not_null(f);
  cr_assert(fputs(one, f) >= 0 && fclose(f) == 0);
  free(one);
  RUN(&r, "dump", g1, "--schedule");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "gpu segments: 1 "), "%s", r.out);
  cr_assert(strstr(r.out, "segment 0: gpu lane 1, depth 0, 4 ops"), "%s",
            r.out);
  th_tmpdir_remove();
}

Test(anywhere, workers_and_gpus_replace_the_recorded_machine) {
  make_tmpdir();
  const char *g = write_gpu_file();
  cli_run r;
  /* 2 workers shift the GPUs to procs 2, 3: op 1's proc 2 is a GPU still,
   * and the dump says which machine it read the file as */
  RUN(&r, "dump", g, "--workers", "2", "--gpus", "2");
  cr_assert_eq(r.status, 0, "stderr: %s", r.err);
  cr_assert(strstr(r.out, "machine: 2 CPU workers (procs 0..1); proc 2 gpu "
                          "device 0, proc 3 gpu device 1"),
            "%s", r.out);
  RUN(&r, "dump", g, "--gpus", "0");
  cr_assert_eq(r.status, 2, "%s", r.err);
  th_tmpdir_remove();
}

/* rp_graph_load into a live runtime keeps its contract: a CPU runtime has
 * no GPU memory, and says so. */
Test(anywhere, live_load_still_refuses_gpu_memory_on_a_cpu_runtime) {
  make_tmpdir();
  const char *g = write_gpu_file();
  rp_runtime *rt = th_runtime(RP_BACKEND_CPU, 1);
  rp_graph *gr = NULL;
  rp_status st = rp_graph_load(rt, g, NULL, 0, &gr);
  cr_assert_eq(st, RP_ENOENT, "%s: %s", rp_status_name(st), rp_error_detail());
  cr_assert(strstr(rp_error_detail(), "instance table entry 0: the runtime "
                                      "has no gpu memory for that device"),
            "%s", rp_error_detail());
  cr_assert_null(gr);
  th_destroy(rt);
  th_tmpdir_remove();
}

/* A malformed "machine" key is an error that names it, for both readers. */
Test(anywhere, malformed_machine_is_named) {
  make_tmpdir();
  const char *path = th_tmp_path("bad.json");
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
        "\"instances\": [], \"ops\": [], \"edges\": [], \"preconditions\": "
        "[], \"postconditions\": [], \"machine\": {\"cpus\": 0, \"gpus\": "
        "[], \"mems\": []}}}\n",
        f);
  cr_assert_eq(fclose(f), 0);
  cli_run r;
  RUN(&r, "dump", path);
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(strstr(r.err, "graph.machine.cpus: 0 out of range [1, 128]"), "%s",
            r.err);
  /* the file is named, not the library's call that read it */
  cr_assert_null(strstr(r.err, "rp_graph_file_machine"), "%s", r.err);
  rp_runtime *rt = th_runtime(RP_BACKEND_CPU, 1);
  rp_graph *gr = NULL;
  cr_assert_eq(rp_graph_load(rt, path, NULL, 0, &gr), RP_ERANGE);
  th_destroy(rt);
  th_tmpdir_remove();
}
