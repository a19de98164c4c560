/* test/test_misuse_api.c — the promises the public header makes for every
 * call, checked over the whole header by tables:
 *  - every call taking a runtime, graph or exec, given a destroyed one,
 *    refuses it (RP_ESTALE, or the call's neutral value with a detail
 *    saying "destroyed") without touching freed memory (ASan builds);
 *    include/reprise.h is parsed here, so a call missing from the table
 *    fails the test;
 *  - out-parameters stay untouched on error paths, and a NULL required
 *    out-parameter is RP_EINVAL; the header is parsed for those too;
 *  - model runtimes refuse calls that touch instance data;
 *  - names of instances, ops and ports follow one rule everywhere, and
 *    every dump of an accepted graph parses (dot, cJSON);
 *  - a task's own error detail reaches rp_exec_error_detail;
 *  - malformed REPRISE_* variables fail rp_runtime_create naming them. */
#include "helpers.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>
#endif

static rp_status nop_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* The task "nop" (cost hint 1 ns) registered on rt. */
static rp_task_id nop_registered(rp_runtime *rt) {
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task, .cost_ns = 1},
      &t));
  return t;
}

static rp_status failing_task(rp_task_ctx *ctx) {
  (void)ctx;
  return rp_error_set(RP_EINVAL, "batch index 99 is past the 4 batches");
}

/* ---- reading the header ---- */

typedef struct api_fn {
  char ret[64]; /* the return type */
  char name[64];
  char params[512]; /* whitespace collapsed */
} api_fn;

/* Every RP_API function of include/reprise.h (comments stripped). */
static size_t header_functions(api_fn *out, size_t cap) {
  size_t len = 0;
  char *s = th_read_all(REPRISE_HEADER_PATH, &len);
  cr_assert_not_null(s, "cannot read %s", REPRISE_HEADER_PATH);
  /* strip comments and preprocessor lines (the RP_API definitions) */
  for (char *p = s; *p; p++) {
    if (p[0] == '/' && p[1] == '*') {
      char *e = strstr(p + 2, "*/");
      cr_assert_not_null(e);
      memset(p, ' ', (size_t)(e + 2 - p));
    } else if (*p == '#' && (p == s || p[-1] == '\n')) {
      while (*p && !(*p == '\n' && p[-1] != '\\'))
        *p++ = ' ';
    }
  }
  size_t n = 0;
  for (char *p = strstr(s, "RP_API"); p; p = strstr(p + 6, "RP_API")) {
    char *paren = strchr(p, '('), *semi = strchr(p, ';');
    cr_assert(paren && semi && paren < semi);
    char *e = paren;
    while (e > p && isspace((unsigned char)e[-1]))
      e--;
    char *b = e;
    while (b > p && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
      b--;
    cr_assert_lt(n, cap);
    api_fn *f = &out[n++];
    snprintf(f->name, sizeof f->name, "%.*s", (int)(e - b), b);
    char *r = p + 6, *re = b;
    while (isspace((unsigned char)*r))
      r++;
    while (re > r && isspace((unsigned char)re[-1]))
      re--;
    snprintf(f->ret, sizeof f->ret, "%.*s", (int)(re - r), r);
    /* the parameter list, to its matching parenthesis */
    int depth = 0;
    size_t k = 0;
    for (char *q = paren; q < semi; q++) {
      depth += *q == '(';
      depth -= *q == ')';
      char c = isspace((unsigned char)*q) ? ' ' : *q;
      if (k + 1 < sizeof f->params &&
          !(c == ' ' && k && f->params[k - 1] == ' '))
        f->params[k++] = c;
      if (!depth)
        break;
    }
    f->params[k] = 0;
  }
  free(s);
  return n;
}

/* 1 when the parameter list takes a runtime, graph or exec handle (not
 * only a `**` out-parameter). */
static int takes_handle(const char *params) {
  static const char *const types[] = {"rp_runtime *", "rp_graph *",
                                      "rp_exec *"};
  for (size_t i = 0; i < 3; i++)
    for (const char *p = strstr(params, types[i]); p;
         p = strstr(p + 1, types[i]))
      if (p[strlen(types[i])] != '*')
        return 1;
  return 0;
}

/* ---- destroyed handles ---- */

typedef struct dead {
  rp_runtime *rt;
  rp_graph *g;
  rp_exec *ex;
} dead;

/* One call on destroyed handles: returns 1 when the call gave what the
 * header promises for a destroyed handle (RP_ESTALE, or a value call's
 * neutral value). */
typedef int (*dead_fn)(const dead *d);

#define S_(call) return (call) == RP_ESTALE
static int d_runtime_destroy(const dead *d) {
  S_(rp_runtime_destroy(d->rt));
}
static int d_runtime_backend(const dead *d) {
  return rp_runtime_backend(d->rt) == RP_BACKEND_CPU;
}
static int d_runtime_backend_reason(const dead *d) {
  return strcmp(rp_runtime_backend_reason(d->rt), "") == 0;
}
static int d_runtime_drain(const dead *d) {
  S_(rp_runtime_drain(d->rt));
}
static int d_proc_count(const dead *d) {
  return rp_proc_count(d->rt) == 0;
}
static int d_mem_count(const dead *d) {
  return rp_mem_count(d->rt) == 0;
}
static int d_proc_query(const dead *d) {
  rp_proc_info pi;
  S_(rp_proc_query(d->rt, 0, &pi));
}
static int d_mem_query(const dead *d) {
  rp_mem_info mi;
  S_(rp_mem_query(d->rt, 0, &mi));
}
static int d_proc_can_access(const dead *d) {
  return rp_proc_can_access(d->rt, 0, 0) == 0;
}
static int d_mem_find(const dead *d) {
  rp_mem m;
  S_(rp_mem_find(d->rt, RP_MEM_SYSTEM, -1, &m));
}
static const rp_rect R4 = {1, {0}, {3}};
static int d_instance_create(const dead *d) {
  rp_inst i;
  S_(rp_instance_create(d->rt, 0, RP_F32, &R4, NULL, &i));
}
static int d_instance_create_external(const dead *d) {
  float buf[4];
  rp_inst i;
  S_(rp_instance_create_external(d->rt, 0, RP_F32, &R4, NULL, buf, sizeof buf,
                                 &i));
}
static const rp_inst I1 = {((uint64_t)1 << 32) | 1};
static int d_instance_free(const dead *d) {
  S_(rp_instance_free(d->rt, I1));
}
static int d_instance_realloc(const dead *d) {
  rp_inst i = I1;
  S_(rp_instance_realloc(d->rt, &i));
}
static int d_instance_query(const dead *d) {
  rp_instance_info ii;
  S_(rp_instance_query(d->rt, I1, &ii));
}
static int d_instance_set_name(const dead *d) {
  S_(rp_instance_set_name(d->rt, I1, "x"));
}
static int d_instance_name(const dead *d) {
  return rp_instance_name(d->rt, I1) == NULL;
}
static int d_instance_ptr(const dead *d) {
  return rp_instance_ptr(d->rt, I1) == NULL;
}
static int d_instance_read(const dead *d) {
  float b[4];
  S_(rp_instance_read(d->rt, I1, b, sizeof b));
}
static int d_instance_write(const dead *d) {
  float b[4] = {0};
  S_(rp_instance_write(d->rt, I1, b, sizeof b));
}
static int d_event_create(const dead *d) {
  rp_event e;
  S_(rp_event_create(d->rt, &e));
}
static int d_event_trigger(const dead *d) {
  S_(rp_event_trigger(d->rt, (rp_event){1}));
}
static int d_event_poison(const dead *d) {
  S_(rp_event_poison(d->rt, (rp_event){1}, RP_ETASK));
}
static int d_event_query(const dead *d) {
  S_(rp_event_query(d->rt, (rp_event){1}));
}
static int d_event_wait(const dead *d) {
  S_(rp_event_wait(d->rt, (rp_event){1}, 0));
}
static void cb_nop(void *arg, rp_status st) {
  (void)arg, (void)st;
}
static int d_event_on_complete(const dead *d) {
  S_(rp_event_on_complete(d->rt, (rp_event){1}, cb_nop, NULL));
}
static int d_event_merge(const dead *d) {
  rp_event e;
  S_(rp_event_merge(d->rt, NULL, 0, &e));
}
static int d_event_release(const dead *d) {
  S_(rp_event_release(d->rt, (rp_event){1}));
}
static int d_task_register(const dead *d) {
  rp_task_id t;
  S_(rp_task_register(d->rt, &(rp_task_desc){.name = "t2", .cpu_fn = nop_task},
                      &t));
}
static int d_task_find(const dead *d) {
  rp_task_id t;
  S_(rp_task_find(d->rt, "nop", &t));
}
static int d_task_name(const dead *d) {
  return rp_task_name(d->rt, 0) == NULL;
}
static int d_task_query(const dead *d) {
  rp_task_info ti;
  S_(rp_task_query(d->rt, 0, &ti));
}
static int d_launch_task(const dead *d) {
  S_(rp_launch_task(d->rt, &(rp_launch){.proc = 0}, NULL));
}
static int d_launch_copy(const dead *d) {
  S_(rp_launch_copy(d->rt, &(rp_copy){.src = I1, .dst = I1}, NULL));
}
static int d_launch_parallel(const dead *d) {
  S_(rp_launch_parallel(d->rt, &(rp_parallel_op){.whole = I1}, NULL));
}
static int d_capture_begin(const dead *d) {
  S_(rp_capture_begin(d->rt, NULL));
}
static int d_capture_end(const dead *d) {
  rp_graph *g;
  S_(rp_capture_end(d->rt, &g));
}
static int d_capture_abort(const dead *d) {
  S_(rp_capture_abort(d->rt));
}
static int d_capture_open(const dead *d) { /* 0: not recording; says why */
  return rp_capture_open(d->rt) == 0 && strstr(rp_error_detail(), "destroyed");
}
static int d_capture_name_next(const dead *d) {
  S_(rp_capture_name_next(d->rt, "x"));
}
static int d_capture_precondition(const dead *d) {
  rp_event e;
  uint32_t p;
  S_(rp_capture_precondition(d->rt, "p", &e, &p));
}
static int d_capture_postcondition(const dead *d) {
  uint32_t p;
  S_(rp_capture_postcondition(d->rt, "p", NULL, 0, &p));
}
static int d_graph_create(const dead *d) {
  rp_graph *g;
  S_(rp_graph_create(d->rt, &g));
}
static int d_graph_destroy(const dead *d) {
  S_(rp_graph_destroy(d->g));
}
static int d_graph_add_task(const dead *d) {
  rp_op_id o;
  S_(rp_graph_add_task(d->g, &(rp_launch){.proc = 0}, &o));
}
static int d_graph_add_copy(const dead *d) {
  rp_op_id o;
  S_(rp_graph_add_copy(d->g, &(rp_copy){.src = I1, .dst = I1}, &o));
}
static int d_graph_add_parallel(const dead *d) {
  rp_op_id o;
  uint32_t n;
  S_(rp_graph_add_parallel(d->g, &(rp_parallel_op){.whole = I1}, &o, &n));
}
static int d_graph_add_edge(const dead *d) {
  S_(rp_graph_add_edge(d->g, 0, 1));
}
static int d_graph_add_precondition(const dead *d) {
  rp_port_id p;
  S_(rp_graph_add_precondition(d->g, "p", &p));
}
static int d_graph_add_postcondition(const dead *d) {
  rp_port_id p;
  S_(rp_graph_add_postcondition(d->g, "p", &p));
}
static int d_graph_bind_precondition(const dead *d) {
  S_(rp_graph_bind_precondition(d->g, 0, 0));
}
static int d_graph_bind_postcondition(const dead *d) {
  S_(rp_graph_bind_postcondition(d->g, 0, 0));
}
static int d_graph_add_interp(const dead *d) {
  S_(rp_graph_add_interp(d->g, 0, &(rp_interp){0, 0, 4}));
}
static int d_graph_set_op_name(const dead *d) {
  S_(rp_graph_set_op_name(d->g, 0, "x"));
}
static int d_graph_op_name(const dead *d) {
  return rp_graph_op_name(d->g, 0) == NULL;
}
static int d_graph_remove_edge(const dead *d) {
  S_(rp_graph_remove_edge(d->g, 0, 1));
}
static int d_graph_op_count(const dead *d) {
  return rp_graph_op_count(d->g) == 0;
}
static int d_graph_edge_count(const dead *d) {
  return rp_graph_edge_count(d->g) == 0;
}
static int d_graph_precondition_count(const dead *d) {
  return rp_graph_precondition_count(d->g) == 0;
}
static int d_graph_postcondition_count(const dead *d) {
  return rp_graph_postcondition_count(d->g) == 0;
}
static int d_graph_mirror_count(const dead *d) {
  return rp_graph_mirror_count(d->g) == 0;
}
static int d_graph_mirror_query(const dead *d) {
  rp_inst r;
  S_(rp_graph_mirror_query(d->g, 0, &r, NULL, NULL));
}
static int d_graph_depends(const dead *d) {
  return rp_graph_depends(d->g, 0, 1) == 0;
}
static int d_graph_runtime(const dead *d) {
  return rp_graph_runtime(d->g) == NULL;
}
static int d_graph_op_query(const dead *d) {
  rp_op_info oi;
  S_(rp_graph_op_query(d->g, 0, &oi));
}
static int d_graph_op_accesses(const dead *d) {
  uint32_t n;
  S_(rp_graph_op_accesses(d->g, 0, NULL, 0, &n));
}
static int d_graph_edge_query(const dead *d) {
  rp_op_id a, b;
  int inf;
  S_(rp_graph_edge_query(d->g, 0, &a, &b, &inf));
}
static int d_graph_postcondition_ops(const dead *d) {
  uint32_t n;
  S_(rp_graph_postcondition_ops(d->g, 0, NULL, 0, &n));
}
static int d_graph_validate(const dead *d) {
  S_(rp_graph_validate(d->g));
}
static int d_graph_save(const dead *d) {
  S_(rp_graph_save(d->g, "/nonexistent-dir/g.json"));
}
static int d_graph_load(const dead *d) {
  rp_graph *g;
  S_(rp_graph_load(d->rt, "/nonexistent-dir/g.json", NULL, 0, &g));
}
static int d_graph_instances(const dead *d) {
  uint32_t n;
  S_(rp_graph_instances(d->g, NULL, 0, &n));
}
static int d_graph_load_mem(const dead *d) {
  rp_graph *g;
  S_(rp_graph_load_mem(d->rt, "{}", 2, NULL, 0, 0, &g));
}
static int d_instantiate(const dead *d) {
  rp_exec *ex;
  S_(rp_instantiate(d->g, NULL, &ex));
}
static int d_exec_destroy(const dead *d) {
  S_(rp_exec_destroy(d->ex));
}
static int d_replay(const dead *d) {
  rp_event e;
  S_(rp_replay(d->ex, &(rp_replay_args){0}, &e));
}
static int d_exec_tune(const dead *d) {
  S_(rp_exec_tune(d->ex, &(rp_replay_args){0}, NULL));
}
static int d_exec_stats_get(const dead *d) {
  rp_exec_stats es;
  S_(rp_exec_stats_get(d->ex, &es));
}
static int d_exec_error_detail(const dead *d) {
  return strcmp(rp_exec_error_detail(d->ex), "") == 0;
}
static int d_exec_op_proc(const dead *d) {
  rp_proc p;
  S_(rp_exec_op_proc(d->ex, 0, &p));
}
static int d_exec_update_args(const dead *d) {
  char a[4] = {0};
  S_(rp_exec_update_args(d->ex, 0, a, sizeof a, NULL));
}
static int d_exec_trace_start(const dead *d) {
  S_(rp_exec_trace_start(d->ex, 1));
}
static int d_exec_trace_write(const dead *d) {
  S_(rp_exec_trace_write(d->ex, "/nonexistent-dir/t.json"));
}
static int d_graph_dump(const dead *d) {
  S_(rp_graph_dump(d->g, stderr, RP_DUMP_TEXT));
}
static int d_exec_dump(const dead *d) {
  S_(rp_exec_dump(d->ex, stderr, RP_DUMP_TEXT));
}
static int d_runtime_rank(const dead *d) {
  return rp_runtime_rank(d->rt) == 0;
}
static int d_runtime_ranks(const dead *d) {
  return rp_runtime_ranks(d->rt) == 1;
}
static int d_launch_allreduce(const dead *d) {
  S_(rp_launch_allreduce(d->rt, &(rp_allreduce){.inst = I1}, NULL));
}
static int d_launch_dist_copy(const dead *d) {
  S_(rp_launch_dist_copy(d->rt, &(rp_dist_copy){.src = I1, .dst = I1}, NULL));
}
static int d_launch_dist_parallel(const dead *d) {
  S_(rp_launch_dist_parallel(d->rt, &(rp_dist_parallel){.whole = I1}, NULL));
}
static int d_graph_add_allreduce(const dead *d) {
  rp_op_id o;
  S_(rp_graph_add_allreduce(d->g, &(rp_allreduce){.inst = I1}, &o));
}
static int d_graph_add_dist_copy(const dead *d) {
  rp_op_id o;
  S_(rp_graph_add_dist_copy(d->g, &(rp_dist_copy){.src = I1, .dst = I1}, &o));
}
static int d_runtime_dist_detail(const dead *d) {
  return strcmp(rp_runtime_dist_detail(d->rt), "") == 0;
}
static int d_runtime_worker_allocated_bytes(const dead *d) {
  return rp_runtime_worker_allocated_bytes(d->rt) == UINT64_MAX;
}
#undef S_

typedef struct dead_entry {
  const char *name;
  dead_fn fn;
} dead_entry;

#define D_(n)                                                                  \
  { "rp_" #n, d_##n }
static const dead_entry DEAD[] = {
    D_(runtime_destroy),
    D_(runtime_backend),
    D_(runtime_backend_reason),
    D_(runtime_drain),
    D_(proc_count),
    D_(mem_count),
    D_(proc_query),
    D_(mem_query),
    D_(proc_can_access),
    D_(mem_find),
    D_(instance_create),
    D_(instance_create_external),
    D_(instance_free),
    D_(instance_realloc),
    D_(instance_query),
    D_(instance_set_name),
    D_(instance_name),
    D_(instance_ptr),
    D_(instance_read),
    D_(instance_write),
    D_(event_create),
    D_(event_trigger),
    D_(event_poison),
    D_(event_query),
    D_(event_wait),
    D_(event_on_complete),
    D_(event_merge),
    D_(event_release),
    D_(task_register),
    D_(task_find),
    D_(task_name),
    D_(task_query),
    D_(launch_task),
    D_(launch_copy),
    D_(launch_parallel),
    D_(capture_begin),
    D_(capture_end),
    D_(capture_abort),
    D_(capture_open),
    D_(capture_name_next),
    D_(capture_precondition),
    D_(capture_postcondition),
    D_(graph_create),
    D_(graph_destroy),
    D_(graph_add_task),
    D_(graph_add_copy),
    D_(graph_add_parallel),
    D_(graph_add_edge),
    D_(graph_add_precondition),
    D_(graph_add_postcondition),
    D_(graph_bind_precondition),
    D_(graph_bind_postcondition),
    D_(graph_add_interp),
    D_(graph_set_op_name),
    D_(graph_op_name),
    D_(graph_remove_edge),
    D_(graph_op_count),
    D_(graph_edge_count),
    D_(graph_precondition_count),
    D_(graph_postcondition_count),
    D_(graph_mirror_count),
    D_(graph_mirror_query),
    D_(graph_depends),
    D_(graph_runtime),
    D_(graph_op_query),
    D_(graph_op_accesses),
    D_(graph_edge_query),
    D_(graph_postcondition_ops),
    D_(graph_validate),
    D_(graph_save),
    D_(graph_load),
    D_(graph_instances),
    D_(graph_load_mem),
    D_(instantiate),
    D_(exec_destroy),
    D_(replay),
    D_(exec_tune),
    D_(exec_stats_get),
    D_(exec_error_detail),
    D_(exec_op_proc),
    D_(exec_update_args),
    D_(exec_trace_start),
    D_(exec_trace_write),
    D_(graph_dump),
    D_(exec_dump),
    D_(runtime_rank),
    D_(runtime_ranks),
    D_(launch_allreduce),
    D_(launch_dist_copy),
    D_(launch_dist_parallel),
    D_(graph_add_allreduce),
    D_(graph_add_dist_copy),
    D_(runtime_dist_detail),
    D_(runtime_worker_allocated_bytes),
};
#undef D_
#define NDEAD (sizeof DEAD / sizeof DEAD[0])

Test(misuse_api, destroyed_handle_table_covers_every_call_of_the_header) {
  static api_fn fns[512];
  size_t n = header_functions(fns, 512);
  cr_assert_gt(n, 100, "only %zu RP_API functions parsed", n);
  size_t handles = 0;
  for (size_t i = 0; i < n; i++) {
    if (!takes_handle(fns[i].params))
      continue;
    handles++;
    size_t k = 0;
    while (k < NDEAD && strcmp(DEAD[k].name, fns[i].name) != 0)
      k++;
    cr_assert_lt(k, NDEAD,
                 "%s%s takes a runtime, graph or exec: add it to the "
                 "destroyed-handle table",
                 fns[i].name, fns[i].params);
  }
  cr_assert_eq(handles, NDEAD, "the table has %zu entries, the header %zu",
               NDEAD, handles);
}

/* Every call on a destroyed runtime, graph and exec. The quarantine keeps
 * the last 32 destroyed objects: only 3 are destroyed here. */
Test(misuse_api, every_call_refuses_destroyed_handles) {
  dead d;
  d.rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      d.rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task, .cost_ns = 100},
      &t));
  RP_CHECK(rp_graph_create(d.rt, &d.g));
  rp_op_id a, b;
  RP_CHECK(rp_graph_add_task(d.g, &(rp_launch){.task = t, .proc = 0}, &a));
  RP_CHECK(rp_graph_add_task(d.g, &(rp_launch){.task = t, .proc = 0}, &b));
  RP_CHECK(rp_graph_add_edge(d.g, a, b));
  rp_port_id p;
  RP_CHECK(rp_graph_add_postcondition(d.g, "out", &p));
  RP_CHECK(rp_graph_bind_postcondition(d.g, p, b));
  RP_CHECK(rp_instantiate(d.g, NULL, &d.ex));
  RP_CHECK(rp_exec_destroy(d.ex));
  RP_CHECK(rp_graph_destroy(d.g));
  th_destroy(d.rt);
  for (size_t i = 0; i < NDEAD; i++) {
    rp_error_set(RP_OK, NULL);
    int ok = DEAD[i].fn(&d);
    cr_assert(ok, "%s on a destroyed handle: not refused (%s)", DEAD[i].name,
              rp_error_detail());
    cr_assert(strstr(rp_error_detail(), "destroyed") &&
                  strstr(rp_error_detail(), DEAD[i].name),
              "%s: the detail '%s' does not say the handle was destroyed",
              DEAD[i].name, rp_error_detail());
  }
}

/* ---- out-parameters ---- */

/* What the out-parameter calls run on: a runtime with a task, instances, a
 * graph (a task with 4 argument bytes, an edge, a postcondition port), an
 * exec of it, and a graph with a cycle. */
typedef struct fx {
  rp_runtime *rt;
  rp_task_id task;
  rp_inst whole, part[2];
  rp_graph *g, *cyc;
  rp_exec *ex;
  unsigned names;
} fx;

static void fx_init(fx *f) {
  memset(f, 0, sizeof *f);
  f->rt = th_cpu_runtime(2);
  RP_CHECK(rp_task_register(
      f->rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task, .cost_ns = 100},
      &f->task));
  rp_rect r = rp_rect_1d(0, 7);
  RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->whole));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->part[i]));
  RP_CHECK(rp_graph_create(f->rt, &f->g));
  uint32_t arg = 7;
  rp_op_id a, b;
  RP_CHECK(rp_graph_add_task(
      f->g,
      &(rp_launch){
          .task = f->task, .proc = 0, .args = &arg, .args_size = sizeof arg},
      &a));
  RP_CHECK(
      rp_graph_add_task(f->g, &(rp_launch){.task = f->task, .proc = 0}, &b));
  RP_CHECK(rp_graph_add_edge(f->g, a, b));
  rp_port_id p;
  RP_CHECK(rp_graph_add_postcondition(f->g, "out", &p));
  RP_CHECK(rp_graph_bind_postcondition(f->g, p, b));
  RP_CHECK(rp_instantiate(f->g, NULL, &f->ex));
  RP_CHECK(rp_graph_create(f->rt, &f->cyc));
  RP_CHECK(
      rp_graph_add_task(f->cyc, &(rp_launch){.task = f->task, .proc = 0}, &a));
  RP_CHECK(
      rp_graph_add_task(f->cyc, &(rp_launch){.task = f->task, .proc = 0}, &b));
  RP_CHECK(rp_graph_add_edge(f->cyc, a, b));
  RP_CHECK(rp_graph_add_edge(f->cyc, b, a));
  RP_CHECK(rp_graph_add_postcondition(f->cyc, "out", NULL));
}

static void fx_fini(fx *f) {
  RP_CHECK(rp_exec_destroy(f->ex));
  RP_CHECK(rp_graph_destroy(f->g));
  RP_CHECK(rp_graph_destroy(f->cyc));
  RP_CHECK(rp_instance_free(f->rt, f->whole));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_free(f->rt, f->part[i]));
  th_destroy(f->rt);
}

/* A graph file of f->g in memory (JSON dump), malloc'd. */
static char *fx_graph_file(fx *f, size_t *len) {
  char *buf = NULL;
  FILE *m = open_memstream(&buf, len);
  cr_assert_not_null(m);
  RP_CHECK(rp_graph_dump(f->g, m, RP_DUMP_JSON));
  fclose(m);
  return buf;
}

enum { BAD = 0, GOOD = 1 };

/* One call with out-parameters o[0..]: mode BAD makes it fail on an input
 * error (o as given), GOOD makes it succeed (and frees what it made when
 * every o is non-NULL and it succeeded). */
typedef rp_status (*out_fn)(fx *f, int mode, void **o);

#define O_(n) static rp_status o_##n(fx *f, int mode, void **o)
#define GOOD_OK_(st) ((st) == RP_OK && mode == GOOD)

O_(file_open_regular) {
  (void)f;
  rp_status st = rp_file_open_regular(
      mode ? REPRISE_HEADER_PATH : "/nonexistent-dir/x", o[0], o[1]);
  if (GOOD_OK_(st) && o[0] && o[1])
    close(*(int *)o[0]);
  return st;
}
O_(file_read_regular) {
  (void)f;
  rp_status st = rp_file_read_regular(
      mode ? REPRISE_HEADER_PATH : "/nonexistent-dir/x", 1 << 20, o[0], o[1]);
  if (GOOD_OK_(st) && o[0] && o[1])
    free(*(char **)o[0]);
  return st;
}
O_(output_open) {
  (void)f;
  /* GOOD: a file in the build directory (the target is never created:
   * the temporary file is dropped) */
  rp_status st =
      rp_output_open(mode ? "misuse_api_output" : "/nonexistent-dir/x", o[0]);
  if (GOOD_OK_(st) && o[0])
    rp_output_abort(*(rp_output **)o[0]);
  return st;
}
O_(runtime_create) {
  (void)f;
  rp_runtime_config c;
  rp_runtime_config_init(&c);
  c.cpus = mode ? 1 : 100000;
  c.quiet = c.ignore_env = 1;
  c.backend = RP_BACKEND_CPU;
  rp_status st = rp_runtime_create(&c, o[0]);
  if (GOOD_OK_(st) && o[0])
    th_destroy(*(rp_runtime **)o[0]);
  return st;
}
O_(proc_query) {
  return rp_proc_query(f->rt, mode ? 0 : 9999, o[0]);
}
O_(mem_query) {
  return rp_mem_query(f->rt, mode ? 0 : 9999, o[0]);
}
O_(mem_find) {
  return rp_mem_find(f->rt, mode ? RP_MEM_SYSTEM : RP_MEM_GPU, mode ? -1 : 7,
                     o[0]);
}
O_(rect_init) {
  (void)f;
  int64_t ext[1] = {4};
  return rp_rect_init(o[0], mode ? 1 : 0, NULL, ext);
}
O_(chunk_rect) {
  (void)f;
  rp_rect w = rp_rect_1d(0, 7);
  return rp_chunk_rect(&w, 0, mode ? 2 : 0, 0, o[0]);
}
O_(instance_create) {
  rp_rect r = rp_rect_1d(0, 3);
  rp_status st = rp_instance_create(f->rt, 0, mode ? RP_F32 : (rp_dtype)99, &r,
                                    NULL, o[0]);
  if (GOOD_OK_(st) && o[0])
    RP_CHECK(rp_instance_free(f->rt, *(rp_inst *)o[0]));
  return st;
}
O_(instance_create_external) {
  static float buf[4];
  rp_rect r = rp_rect_1d(0, 3);
  rp_status st = rp_instance_create_external(
      f->rt, 0, mode ? RP_F32 : (rp_dtype)99, &r, NULL, buf, sizeof buf, o[0]);
  if (GOOD_OK_(st) && o[0])
    RP_CHECK(rp_instance_free(f->rt, *(rp_inst *)o[0]));
  return st;
}
O_(instance_realloc) {
  /* inout: BAD passes the sentinel bytes as the handle (stale) */
  if (mode && o[0])
    *(rp_inst *)o[0] = f->whole;
  rp_status st = rp_instance_realloc(f->rt, o[0]);
  if (GOOD_OK_(st) && o[0])
    f->whole = *(rp_inst *)o[0];
  return st;
}
O_(instance_query) {
  return rp_instance_query(f->rt, mode ? f->whole : (rp_inst){0x5a5a5a5a5a},
                           o[0]);
}
O_(event_create) {
  rp_status st = rp_event_create(mode ? f->rt : NULL, o[0]);
  if (GOOD_OK_(st) && o[0]) {
    rp_event e = *(rp_event *)o[0];
    RP_CHECK(rp_event_trigger(f->rt, e));
    RP_CHECK(rp_event_release(f->rt, e));
  }
  return st;
}
O_(event_merge) {
  rp_event evs[1] = {{mode ? 0 : 0x5a5a5a5a5a}};
  rp_status st = rp_event_merge(f->rt, evs, 1, o[0]);
  if (GOOD_OK_(st) && o[0])
    RP_CHECK(rp_event_release(f->rt, *(rp_event *)o[0]));
  return st;
}
O_(task_register) {
  char name[32];
  snprintf(name, sizeof name, "t%u", f->names++);
  return rp_task_register(
      f->rt, &(rp_task_desc){.name = mode ? name : "nop", .cpu_fn = nop_task},
      o[0]);
}
O_(task_find) {
  return rp_task_find(f->rt, mode ? "nop" : "none", o[0]);
}
O_(task_query) {
  return rp_task_query(f->rt, mode ? f->task : 999, o[0]);
}
static rp_status done_release(fx *f, rp_status st, int mode, void *done) {
  if (GOOD_OK_(st) && done) {
    rp_event e = *(rp_event *)done;
    RP_CHECK(rp_event_wait(f->rt, e, -1));
    RP_CHECK(rp_event_release(f->rt, e));
  }
  return st;
}
O_(launch_task) {
  rp_status st = rp_launch_task(
      f->rt, &(rp_launch){.task = mode ? f->task : 999, .proc = 0}, o[0]);
  return done_release(f, st, mode, o[0]);
}
static rp_inst stale_or(fx *f, int mode, rp_inst i) {
  (void)f;
  return mode ? i : (rp_inst){0x5a5a5a5a5a};
}
O_(launch_copy) {
  rp_status st = rp_launch_copy(
      f->rt, &(rp_copy){.src = stale_or(f, mode, f->whole), .dst = f->part[0]},
      o[0]);
  return done_release(f, st, mode, o[0]);
}
static rp_parallel_op pop(fx *f, int mode) {
  return (rp_parallel_op){.kind = RP_POP_REPLICATE,
                          .whole = stale_or(f, mode, f->whole),
                          .parts = f->part,
                          .nparts = 2};
}
O_(launch_parallel) {
  rp_parallel_op p = pop(f, mode);
  rp_status st = rp_launch_parallel(f->rt, &p, o[0]);
  return done_release(f, st, mode, o[0]);
}
O_(capture_end) {
  if (mode)
    RP_CHECK(rp_capture_begin(f->rt, NULL));
  rp_status st = rp_capture_end(f->rt, o[0]);
  if (mode && st)
    RP_CHECK(rp_capture_abort(f->rt));
  if (GOOD_OK_(st) && o[0])
    RP_CHECK(rp_graph_destroy(*(rp_graph **)o[0]));
  return st;
}
O_(capture_precondition) {
  if (mode)
    RP_CHECK(rp_capture_begin(f->rt, NULL));
  rp_status st = rp_capture_precondition(f->rt, "pre", o[0], o[1]);
  if (mode)
    RP_CHECK(rp_capture_abort(f->rt));
  return st;
}
O_(capture_postcondition) {
  if (mode)
    RP_CHECK(rp_capture_begin(f->rt, NULL));
  rp_status st = rp_capture_postcondition(f->rt, "post", NULL, 0, o[0]);
  if (mode)
    RP_CHECK(rp_capture_abort(f->rt));
  return st;
}
O_(graph_create) {
  rp_status st = rp_graph_create(mode ? f->rt : NULL, o[0]);
  if (GOOD_OK_(st) && o[0])
    RP_CHECK(rp_graph_destroy(*(rp_graph **)o[0]));
  return st;
}
O_(graph_add_task) {
  return rp_graph_add_task(
      f->g, &(rp_launch){.task = mode ? f->task : 999, .proc = 0}, o[0]);
}
O_(graph_add_copy) {
  return rp_graph_add_copy(
      f->g, &(rp_copy){.src = stale_or(f, mode, f->whole), .dst = f->part[0]},
      o[0]);
}
O_(graph_add_parallel) {
  rp_parallel_op p = pop(f, mode);
  return rp_graph_add_parallel(f->g, &p, o[0], o[1]);
}
O_(graph_add_precondition) {
  char name[32];
  snprintf(name, sizeof name, "pre%u", f->names++);
  return rp_graph_add_precondition(f->cyc, mode ? name : "", o[0]);
}
O_(graph_add_postcondition) {
  char name[32];
  snprintf(name, sizeof name, "post%u", f->names++);
  return rp_graph_add_postcondition(f->cyc, mode ? name : "out", o[0]);
}
O_(graph_op_query) {
  return rp_graph_op_query(f->g, mode ? 0 : 999, o[0]);
}
O_(graph_op_accesses) {
  return rp_graph_op_accesses(f->g, mode ? 0 : 999, o[0], o[0] ? 8 : 0, o[1]);
}
O_(graph_edge_query) {
  return rp_graph_edge_query(f->g, mode ? 0 : 999, o[0], o[1], o[2]);
}
O_(graph_postcondition_ops) {
  return rp_graph_postcondition_ops(f->g, mode ? 0 : 999, o[0], o[0] ? 8 : 0,
                                    o[1]);
}
/* A graph file with a mirror (a fill and a write-back copy): the good case
 * loads it, reads mirror 0 and frees what the loader made. */
static const char MIRROR_FILE[] =
    "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
    "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1, "
    "\"dtype\": \"f32\", \"lo\": [0], \"hi\": [7], \"strides\": [1]}],"
    "\"mirrors\": [{\"id\": 0, \"source\": 0, \"mem\": \"system\", "
    "\"device\": -1}], \"ops\": ["
    "{\"id\": 0, \"kind\": \"copy\", \"src\": 0, \"dst\": {\"mirror\": 0}, "
    "\"domain\": \"intersect\", \"rect\": null, \"redop\": \"none\", "
    "\"group\": 0, \"pop_kind\": null, \"backward\": false, "
    "\"inserted\": true},"
    "{\"id\": 1, \"kind\": \"copy\", \"src\": {\"mirror\": 0}, \"dst\": 0, "
    "\"domain\": \"intersect\", \"rect\": null, \"redop\": \"none\", "
    "\"group\": 0, \"pop_kind\": null, \"backward\": false, "
    "\"inserted\": true}],"
    "\"edges\": [[0, 1]], \"preconditions\": [], \"postconditions\": []}}";
O_(graph_mirror_query) {
  if (!mode)
    return rp_graph_mirror_query(f->g, 999, o[0], o[1], o[2]);
  rp_graph *g;
  rp_status st = rp_graph_load_mem(f->rt, MIRROR_FILE, strlen(MIRROR_FILE),
                                   NULL, 0, 0, &g);
  if (st)
    return st;
  st = rp_graph_mirror_query(g, 0, o[0], o[1], o[2]);
  rp_inst made;
  uint32_t n = 0;
  RP_CHECK(rp_graph_instances(g, &made, 1, &n));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(f->rt, made));
  return st;
}
O_(graph_instances) {
  return rp_graph_instances(mode ? f->g : NULL, o[0], o[0] ? 8 : 0, o[1]);
}
O_(graph_load) {
  const char *path = "/nonexistent-dir/g.json";
  if (mode) {
    path = th_tmp_path("g.json");
    RP_CHECK(rp_graph_save(f->g, path));
  }
  rp_status st = rp_graph_load(f->rt, path, NULL, 0, o[0]);
  if (GOOD_OK_(st) && o[0]) {
    rp_graph *g = *(rp_graph **)o[0];
    rp_inst insts[8];
    uint32_t n = 0;
    RP_CHECK(rp_graph_instances(g, insts, 8, &n));
    RP_CHECK(rp_graph_destroy(g));
    for (uint32_t i = 0; i < n; i++)
      RP_CHECK(rp_instance_free(f->rt, insts[i]));
  }
  return st;
}
O_(graph_load_mem) {
  size_t len = 4;
  char *buf = mode ? fx_graph_file(f, &len) : strdup("nope");
  rp_status st = rp_graph_load_mem(f->rt, buf, len, NULL, 0, 0, o[0]);
  free(buf);
  if (GOOD_OK_(st) && o[0]) {
    rp_graph *g = *(rp_graph **)o[0];
    RP_CHECK(rp_graph_destroy(g));
  }
  return st;
}
O_(graph_file_machine) {
  size_t len = 4;
  char *buf = mode ? fx_graph_file(f, &len) : strdup("nope");
  rp_status st = rp_graph_file_machine(buf, len, o[0], o[1]);
  free(buf);
  return st;
}
O_(runtime_create_model) {
  (void)f;
  rp_machine_desc m = {.cpus = mode ? 1 : 0};
  rp_status st = rp_runtime_create_model(&m, o[0]);
  if (GOOD_OK_(st) && o[0])
    th_destroy(*(rp_runtime **)o[0]);
  return st;
}
O_(instantiate) {
  rp_status st = rp_instantiate(mode ? f->g : f->cyc, NULL, o[0]);
  if (GOOD_OK_(st) && o[0])
    RP_CHECK(rp_exec_destroy(*(rp_exec **)o[0]));
  return st;
}
O_(replay) {
  rp_event post[1];
  rp_replay_args a = {.post = post, .npost = mode ? 1 : 2};
  rp_status st = rp_replay(f->ex, &a, o[0]);
  if (st == RP_OK)
    RP_CHECK(rp_event_release(f->rt, post[0]));
  return done_release(f, st, mode, o[0]);
}
O_(exec_tune) {
  rp_replay_args a = {.npre = mode ? 0 : 1};
  return rp_exec_tune(f->ex, &a, o[0]);
}
O_(exec_stats_get) {
  return rp_exec_stats_get(mode ? f->ex : NULL, o[0]);
}
O_(exec_op_proc) {
  return rp_exec_op_proc(f->ex, mode ? 0 : 999, o[0]);
}
O_(exec_update_args) {
  uint32_t arg = 9;
  return rp_exec_update_args(f->ex, mode ? 0 : 999, &arg, sizeof arg, o[0]);
}
O_(launch_allreduce) {
  rp_status st =
      rp_launch_allreduce(f->rt,
                          &(rp_allreduce){.inst = stale_or(f, mode, f->whole),
                                          .redop = RP_REDOP_SUM},
                          o[0]);
  return done_release(f, st, mode, o[0]);
}
static rp_dist_copy dcopy(fx *f, int mode) {
  return (rp_dist_copy){.src = stale_or(f, mode, f->whole), .dst = f->part[0]};
}
O_(launch_dist_copy) {
  rp_dist_copy c = dcopy(f, mode);
  rp_status st = rp_launch_dist_copy(f->rt, &c, o[0]);
  return done_release(f, st, mode, o[0]);
}
O_(launch_dist_parallel) {
  rp_dist_parallel p = {.kind = RP_POP_REPLICATE,
                        .whole = stale_or(f, mode, f->whole),
                        .part = f->part[0]};
  rp_status st = rp_launch_dist_parallel(f->rt, &p, o[0]);
  return done_release(f, st, mode, o[0]);
}
O_(graph_add_allreduce) {
  return rp_graph_add_allreduce(
      f->g,
      &(rp_allreduce){.inst = stale_or(f, mode, f->whole),
                      .redop = RP_REDOP_SUM},
      o[0]);
}
O_(graph_add_dist_copy) {
  rp_dist_copy c = dcopy(f, mode);
  return rp_graph_add_dist_copy(f->g, &c, o[0]);
}
#undef O_

enum { OPT0 = 1, OPT1 = 2, OPT2 = 4 }; /* out-parameter i may be NULL */
/* NEED_JSON: graph files (builds with cJSON); SETS_NULL: the header's
 * exception (*out set to NULL on error) */
enum { NEED_JSON = 1, SETS_NULL = 2 };

typedef struct out_entry {
  const char *name;
  out_fn fn;
  uint32_t n;        /* out-parameters */
  size_t size[3];    /* their sizes */
  unsigned optional; /* OPTi: NULL allowed (the header says "may be NULL" or
                        "out == NULL with cap == 0 only counts") */
  unsigned flags;
} out_entry;

#define E1_(n, t, opt, fl)                                                     \
  { "rp_" #n, o_##n, 1, {sizeof(t)}, opt, fl }
#define E2_(n, t0, t1, opt, fl)                                                \
  { "rp_" #n, o_##n, 2, {sizeof(t0), sizeof(t1)}, opt, fl }
static const out_entry OUTS[] = {
    E2_(file_open_regular, int, uint64_t, 0, 0),
    E2_(file_read_regular, char *, size_t, 0, 0),
    /* documented exception: *out is set to NULL on error */
    E1_(runtime_create, rp_runtime *, 0, SETS_NULL),
    /* likewise: *out is NULL on error */
    E1_(output_open, rp_output *, 0, SETS_NULL),
    E1_(proc_query, rp_proc_info, 0, 0),
    E1_(mem_query, rp_mem_info, 0, 0),
    E1_(mem_find, rp_mem, 0, 0),
    E1_(rect_init, rp_rect, 0, 0),
    E1_(chunk_rect, rp_rect, 0, 0),
    E1_(instance_create, rp_inst, 0, 0),
    E1_(instance_create_external, rp_inst, 0, 0),
    E1_(instance_realloc, rp_inst, 0, 0),
    E1_(instance_query, rp_instance_info, 0, 0),
    E1_(event_create, rp_event, 0, 0),
    E1_(event_merge, rp_event, 0, 0),
    E1_(task_register, rp_task_id, 0, 0),
    E1_(task_find, rp_task_id, 0, 0),
    E1_(task_query, rp_task_info, 0, 0),
    E1_(launch_task, rp_event, OPT0, 0),
    E1_(launch_copy, rp_event, OPT0, 0),
    E1_(launch_parallel, rp_event, OPT0, 0),
    E1_(capture_end, rp_graph *, 0, 0),
    E2_(capture_precondition, rp_event, uint32_t, OPT1, 0),
    E1_(capture_postcondition, uint32_t, OPT0, 0),
    E1_(graph_create, rp_graph *, 0, 0),
    E1_(graph_add_task, rp_op_id, OPT0, 0),
    E1_(graph_add_copy, rp_op_id, OPT0, 0),
    E2_(graph_add_parallel, rp_op_id, uint32_t, OPT0 | OPT1, 0),
    E1_(graph_add_precondition, rp_port_id, OPT0, 0),
    E1_(graph_add_postcondition, rp_port_id, OPT0, 0),
    E1_(graph_op_query, rp_op_info, 0, 0),
    E2_(graph_op_accesses, rp_access, uint32_t, OPT0, 0),
    {"rp_graph_edge_query",
     o_graph_edge_query,
     3,
     {sizeof(rp_op_id), sizeof(rp_op_id), sizeof(int)},
     0,
     0},
    E2_(graph_postcondition_ops, rp_op_id, uint32_t, OPT0, 0),
    {"rp_graph_mirror_query",
     o_graph_mirror_query,
     3,
     {sizeof(rp_inst), sizeof(rp_inst), sizeof(rp_mem)},
     OPT0 | OPT1 | OPT2,
     NEED_JSON},
    E1_(graph_load, rp_graph *, 0, NEED_JSON),
    E2_(graph_instances, rp_inst, uint32_t, OPT0, 0),
    E1_(graph_load_mem, rp_graph *, 0, NEED_JSON),
    E2_(graph_file_machine, rp_machine_desc, int, 0, NEED_JSON),
    E1_(runtime_create_model, rp_runtime *, 0, 0),
    E1_(instantiate, rp_exec *, 0, 0),
    E1_(replay, rp_event, OPT0, 0),
    E1_(exec_tune, uint32_t, OPT0, 0),
    E1_(exec_stats_get, rp_exec_stats, 0, 0),
    E1_(exec_op_proc, rp_proc, 0, 0),
    E1_(exec_update_args, int, OPT0, 0),
    E1_(launch_allreduce, rp_event, OPT0, 0),
    E1_(launch_dist_copy, rp_event, OPT0, 0),
    E1_(launch_dist_parallel, rp_event, OPT0, 0),
    E1_(graph_add_allreduce, rp_op_id, OPT0, 0),
    E1_(graph_add_dist_copy, rp_op_id, OPT0, 0),
};
#undef E1_
#undef E2_
#define NOUTS (sizeof OUTS / sizeof OUTS[0])

/* The out-parameters of a declaration: non-const pointers that are not a
 * runtime, graph, exec or output handle, a caller's data buffer (void *), a
 * FILE or a callback. */
static uint32_t out_params(const char *params) {
  uint32_t n = 0;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", params + 1); /* past '(' */
  for (char *save = NULL, *p = strtok_r(buf, ",", &save); p;
       p = strtok_r(NULL, ",", &save)) {
    while (*p == ' ')
      p++;
    if (!strchr(p, '*') || strstr(p, "const") || strchr(p, '(') ||
        strchr(p, ')') != strrchr(p, ')') || !strncmp(p, "void *", 6) ||
        !strncmp(p, "FILE", 4))
      continue;
    if ((!strncmp(p, "rp_runtime *", 12) || !strncmp(p, "rp_graph *", 10) ||
         !strncmp(p, "rp_exec *", 9) || !strncmp(p, "rp_output *", 11)) &&
        !strstr(p, "**"))
      continue;
    n++;
  }
  return n;
}

Test(misuse_api, out_parameter_table_covers_every_call_of_the_header) {
  static api_fn fns[512];
  size_t n = header_functions(fns, 512);
  size_t with_outs = 0;
  for (size_t i = 0; i < n; i++) {
    /* only calls returning a status promise untouched out-parameters */
    if (strcmp(fns[i].ret, "rp_status") != 0)
      continue;
    uint32_t k = out_params(fns[i].params);
    if (!k)
      continue;
    with_outs++;
    size_t e = 0;
    while (e < NOUTS && strcmp(OUTS[e].name, fns[i].name) != 0)
      e++;
    cr_assert_lt(e, NOUTS, "%s%s has %u out-parameter(s): add it to the table",
                 fns[i].name, fns[i].params, k);
    cr_assert_eq(OUTS[e].n, k,
                 "%s: %u out-parameters in the header, %u in "
                 "the table",
                 fns[i].name, k, OUTS[e].n);
  }
  cr_assert_eq(with_outs, NOUTS, "the table has %zu entries, the header %zu",
               NOUTS, with_outs);
}

#define SENTINEL 0xa5

static int all_sentinel(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != SENTINEL)
      return 0;
  return 1;
}

Test(misuse_api, out_parameters_untouched_on_error_and_null_is_einval) {
  th_tmpdir_make("/tmp/rp_outs_XXXXXX");
  fx f;
  fx_init(&f);
  for (size_t e = 0; e < NOUTS; e++) {
    const out_entry *t = &OUTS[e];
#ifndef REPRISE_HAVE_CJSON
    if (t->flags & NEED_JSON)
      continue;
#endif
    _Alignas(16) unsigned char bufs[3][1024];
    void *o[3] = {NULL, NULL, NULL};
    /* an error path: every out-parameter keeps its bytes */
    for (uint32_t i = 0; i < t->n; i++) {
      cr_assert_leq(t->size[i], sizeof bufs[i]);
      memset(bufs[i], SENTINEL, sizeof bufs[i]);
      o[i] = bufs[i];
    }
    rp_status st = t->fn(&f, BAD, o);
    cr_assert_neq(st, RP_OK, "%s: the error case succeeded", t->name);
    if (!(t->flags & SETS_NULL))
      for (uint32_t i = 0; i < t->n; i++)
        cr_assert(all_sentinel(bufs[i], t->size[i]),
                  "%s (%s): out-parameter %u written on error", t->name,
                  rp_status_name(st), i);
    /* the good case succeeds with every out-parameter */
    st = t->fn(&f, GOOD, o);
    cr_assert_eq(st, RP_OK, "%s: the good case failed: %s (%s)", t->name,
                 rp_status_name(st), rp_error_detail());
    /* a NULL required out-parameter is RP_EINVAL, nothing done */
    for (uint32_t i = 0; i < t->n; i++) {
      void *q[3] = {o[0], o[1], o[2]};
      q[i] = NULL;
      st = t->fn(&f, GOOD, q);
      if (t->optional & (1u << i))
        cr_assert_eq(st, RP_OK, "%s: optional out-parameter %u NULL: %s (%s)",
                     t->name, i, rp_status_name(st), rp_error_detail());
      else
        cr_assert_eq(st, RP_EINVAL, "%s: out-parameter %u NULL: %s (%s)",
                     t->name, i, rp_status_name(st), rp_error_detail());
    }
  }
  fx_fini(&f);
  th_tmpdir_remove();
}

/* ---- model runtimes: no instance data ---- */

Test(misuse_api, model_runtime_refuses_every_call_touching_instance_data) {
  rp_machine_desc m = {.cpus = 2};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &b));
  float buf[4] = {1, 2, 3, 4};
  RP_EXPECT(rp_instance_write(rt, a, buf, sizeof buf), RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_instance_write"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_instance_read(rt, a, buf, sizeof buf), RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_instance_read"), "%s",
            rp_error_detail());
  cr_assert_float_eq(buf[0], 1.0f, 0.0f, "the buffer was written");
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task}, &t));
  rp_access acc = {a, RP_WRITE, RP_REDOP_NONE};
  rp_event done = {0x5a5a};
  RP_EXPECT(
      rp_launch_task(
          rt,
          &(rp_launch){.task = t, .proc = 0, .accesses = &acc, .naccess = 1},
          &done),
      RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_launch_task"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, &done),
            RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_launch_copy"), "%s",
            rp_error_detail());
  rp_inst parts[1] = {b};
  RP_EXPECT(rp_launch_parallel(rt,
                               &(rp_parallel_op){.kind = RP_POP_REPLICATE,
                                                 .whole = a,
                                                 .parts = parts,
                                                 .nparts = 1},
                               &done),
            RP_EUNSUPPORTED);
  RP_EXPECT(rp_launch_allreduce(
                rt, &(rp_allreduce){.inst = a, .redop = RP_REDOP_SUM}, &done),
            RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_launch_allreduce"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_launch_dist_copy(rt, &(rp_dist_copy){.src = a, .dst = b}, &done),
            RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_launch_dist_copy"), "%s",
            rp_error_detail());
  cr_assert_eq(done.id, 0x5a5a, "*done written on error");
  /* recording on a model still works: nothing runs */
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* An exec of a model with a GPU op instantiates and dumps; tracing it and
 * updating its arguments are RP_EUNSUPPORTED as replaying it is (they
 * reached for the device that a model has not: a NULL dereference). */
Test(misuse_api, a_model_exec_with_a_gpu_op_refuses_trace_and_update_args) {
  rp_machine_desc m = {.cpus = 2, .ngpus = 1, .gpu_device = {0}};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "nop", .cpu_fn = nop_task, .gpu_fn = nop_task},
      &t));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id cpu_op, gpu_op;
  int v = 1;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &cpu_op));
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 2, .args = &v, .args_size = sizeof v},
      &gpu_op));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_EXPECT(rp_exec_trace_start(ex, 2), RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_exec_trace_start") &&
                strstr(rp_error_detail(), "model of a machine"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_exec_update_args(ex, gpu_op, &v, sizeof v, NULL),
            RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_exec_update_args"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_replay(ex, NULL, NULL), RP_EUNSUPPORTED);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* An SPMD launch without shard_procs runs its shards on CPU workers: one
 * naming a GPU as proc was accepted and placed on CPU workers at
 * instantiate, calling a GPU-only task's missing CPU body. RP_EPROC,
 * naming shard_procs; a CPU worker or RP_PROC_ANY as proc, or the GPU
 * named per shard, is accepted. */
Test(misuse_api, an_spmd_launch_on_a_gpu_without_shard_procs_is_refused) {
  rp_machine_desc m = {.cpus = 2, .ngpus = 1, .gpu_device = {0}};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_task_id gpu_only, both;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "g", .gpu_fn = nop_task}, &gpu_only));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "b", .cpu_fn = nop_task, .gpu_fn = nop_task},
      &both));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_task_id tasks[2] = {gpu_only, both};
  for (int i = 0; i < 2; i++) {
    rp_op_id op = 77;
    RP_EXPECT(
        rp_graph_add_task(
            g, &(rp_launch){.task = tasks[i], .proc = 2, .shards = 2}, &op),
        RP_EPROC);
    cr_assert(strstr(rp_error_detail(), "shard_procs") &&
                  strstr(rp_error_detail(), "processor 2 is a GPU"),
              "%s", rp_error_detail());
    cr_assert_eq(op, 77, "an op id was written");
  }
  cr_assert_eq(rp_graph_op_count(g), 0);
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = both, .proc = 1, .shards = 2}, NULL));
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = both, .proc = RP_PROC_ANY, .shards = 2}, NULL));
  rp_proc on_gpu[2] = {2, 2};
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = gpu_only, .shards = 2, .shard_procs = on_gpu},
      NULL));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A model as large as its limits allow saves graph files that load back
 * (the file lists system memory too: 33 entries were refused); a device
 * index no graph file can name is refused when the model is made. */
Test(misuse_api, a_model_at_its_limits_saves_files_that_load) {
  th_tmpdir_make("/tmp/rp_model_XXXXXX");
  rp_machine_desc m = {.cpus = 1, .nmems = RP_MODEL_MAX_MEMS};
  for (unsigned i = 0; i < RP_MODEL_MAX_MEMS; i++)
    m.mems[i] = (rp_mem_info){RP_MEM_GPU, (int)i};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task}, &t));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, NULL));
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(g, path));
  rp_graph *back;
  RP_CHECK(rp_graph_load(rt, path, NULL, 0, &back));
  cr_assert_eq(rp_graph_op_count(back), 1);
  size_t len;
  char *buf = th_read_all(path, &len);
  rp_machine_desc got;
  int present = 0;
  RP_CHECK(rp_graph_file_machine(buf, len, &got, &present));
  cr_assert(present && got.nmems == RP_MODEL_MAX_MEMS, "%u memories",
            got.nmems);
  free(buf);
  RP_CHECK(rp_graph_destroy(back));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
  rp_machine_desc far = {
      .cpus = 1, .ngpus = 1, .gpu_device = {RP_MODEL_MAX_DEVICE + 1}};
  rp_runtime *none = NULL;
  RP_EXPECT(rp_runtime_create_model(&far, &none), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "device 1024 (at most 1023)"), "%s",
            rp_error_detail());
  cr_assert_null(none);
  th_tmpdir_remove();
}

/* ---- a task's own error detail ---- */

Test(misuse_api, task_error_detail_reaches_exec_error_detail) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t, ok;
  RP_CHECK(rp_task_register(
      rt,
      &(rp_task_desc){.name = "loader", .cpu_fn = failing_task, .cost_ns = 10},
      &t));
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task, .cost_ns = 10},
      &ok));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id a, b;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = ok, .proc = 0}, &a));
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &b));
  RP_CHECK(rp_graph_add_edge(g, a, b));
  RP_CHECK(rp_graph_set_op_name(g, b, "data.next"));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int r = 0; r < 2; r++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, &(rp_replay_args){0}, &done));
    RP_EXPECT(rp_event_wait(rt, done, -1), RP_EINVAL);
    RP_CHECK(rp_event_release(rt, done));
    const char *d = rp_exec_error_detail(ex);
    cr_assert(strstr(d, "op 1") && strstr(d, "data.next") &&
                  strstr(d, "loader") &&
                  strstr(d, "batch index 99 is past the 4 batches"),
              "replay %d: detail '%s' lacks the op, task or message", r, d);
  }
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* ---- REPRISE_* variables ---- */

static rp_status create_with_env(const char *var, const char *value) {
  cr_assert_eq(setenv(var, value, 1), 0);
  rp_runtime_config c;
  rp_runtime_config_init(&c);
  c.backend = RP_BACKEND_CPU;
  c.cpus = 1;
  c.quiet = 1;
  rp_runtime *rt = (rp_runtime *)0x1;
  rp_status st = rp_runtime_create(&c, &rt);
  if (st == RP_OK)
    th_destroy(rt);
  else
    cr_assert_null(rt, "%s=%s: *out not NULL on error", var, value);
  unsetenv(var);
  return st;
}

Test(misuse_api, malformed_environment_is_einval_naming_the_variable) {
  static const char *const vars[] = {
      "REPRISE_WORKERS",       "REPRISE_CPUS",
      "REPRISE_GPUS",          "REPRISE_DIST_TIMEOUT_MS",
      "REPRISE_SPIN_NS",       "REPRISE_YIELD_NS",
      "REPRISE_HOST_YIELD_NS", "REPRISE_IDLE_SPIN_NS",
      "REPRISE_HOST_SPIN_NS",  "REPRISE_PIN",
      "REPRISE_NVTX",          "REPRISE_CUDA_GRAPHS",
      "REPRISE_GPU_GROUPS",    "REPRISE_GPU_POLL",
      "REPRISE_BACKEND",       "REPRISE_CUBLAS_WS_MIB",
      "REPRISE_GPT_ATTN",      "REPRISE_GPT_ATTN_GEMM",
      "REPRISE_GPT_COLSUM"};
  static const char *const bad[] = {"abc", "5s", "-1", " 1",
                                    "99999999999999999999999"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      rp_status st = create_with_env(vars[i], bad[k]);
      cr_assert_eq(st, RP_EINVAL, "%s=%s: %s (%s)", vars[i], bad[k],
                   rp_status_name(st), rp_error_detail());
      cr_assert(strstr(rp_error_detail(), vars[i]) &&
                    strstr(rp_error_detail(), bad[k]),
                "%s=%s: the detail '%s' does not name it", vars[i], bad[k],
                rp_error_detail());
    }
  /* past the range */
  RP_EXPECT(create_with_env("REPRISE_DIST_TIMEOUT_MS", "0"), RP_EINVAL);
  RP_EXPECT(create_with_env("REPRISE_DIST_TIMEOUT_MS", "86400001"), RP_EINVAL);
  RP_EXPECT(create_with_env("REPRISE_PIN", "2"), RP_EINVAL);
  RP_EXPECT(create_with_env("REPRISE_GPU_POLL", "2"), RP_EINVAL);
  RP_EXPECT(create_with_env("REPRISE_CUBLAS_WS_MIB", "0"), RP_EINVAL);
  RP_EXPECT(create_with_env("REPRISE_CUBLAS_WS_MIB", "1025"), RP_EINVAL);
  RP_EXPECT(create_with_env("REPRISE_GPT_ATTN", "Fused"), RP_EINVAL);
  /* well-formed values and empty (unset) ones are taken */
  RP_CHECK(create_with_env("REPRISE_DIST_TIMEOUT_MS", "5000"));
  RP_CHECK(create_with_env("REPRISE_SPIN_NS", "0"));
  RP_CHECK(create_with_env("REPRISE_GPU_POLL", "events"));
  RP_CHECK(create_with_env("REPRISE_CUDA_GRAPHS", "0"));
  RP_CHECK(create_with_env("REPRISE_CUBLAS_WS_MIB", "4"));
  RP_CHECK(create_with_env("REPRISE_GPT_ATTN", "gemm"));
  RP_CHECK(create_with_env("REPRISE_GPT_ATTN_GEMM", "direct"));
  RP_EXPECT(create_with_env("REPRISE_GPT_ATTN_GEMM", "Direct"), RP_EINVAL);
  RP_CHECK(create_with_env("REPRISE_GPT_COLSUM", "serial"));
  RP_CHECK(create_with_env("REPRISE_PIN", ""));
  RP_EXPECT(create_with_env("REPRISE_GPUS", "17"), RP_EINVAL);
  /* the config's counts have the variables' ranges, on any backend */
  rp_runtime_config c;
  rp_runtime_config_init(&c);
  c.backend = RP_BACKEND_CPU;
  c.ignore_env = 1;
  c.gpus = RP_MAX_GPUS + 1;
  rp_runtime *none = NULL;
  RP_EXPECT(rp_runtime_create(&c, &none), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "gpus = 17: at most 16"), "%s",
            rp_error_detail());
  cr_assert_null(none);
  /* ignore_env: not read, so not checked */
  setenv("REPRISE_SPIN_NS", "abc", 1);
  rp_runtime *rt = th_cpu_runtime(1);
  unsetenv("REPRISE_SPIN_NS");
  th_destroy(rt);
}

static void never_cb(void *arg, rp_status st) {
  (void)arg, (void)st;
  cr_assert_fail("a callback on a stale event ran");
}

/* A refused call's detail starts with the call's name. */
Test(misuse_api, stale_handles_and_bad_layouts_name_the_call) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_event e;
  RP_CHECK(rp_event_create(rt, &e));
  RP_CHECK(rp_event_trigger(rt, e));
  RP_CHECK(rp_event_release(rt, e)); /* e is stale from here */
  RP_EXPECT(rp_event_query(rt, e), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_event_query: event"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_wait(rt, e, 0), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_event_wait: event"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_event_on_complete(rt, e, never_cb, NULL), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_event_on_complete: event"), "%s",
            rp_error_detail());
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst in;
  RP_EXPECT(rp_instance_create(rt, 0, (rp_dtype)99, &r, NULL, &in), RP_ETYPE);
  cr_assert(
      strstr(rp_error_detail(), "rp_instance_create: unknown element type 99"),
      "%s", rp_error_detail());
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  RP_CHECK(rp_instance_free(rt, in)); /* in is stale from here */
  float buf[4];
  rp_instance_info info;
  RP_EXPECT(rp_instance_read(rt, in, buf, sizeof buf), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_instance_read: instance"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_instance_query(rt, in, &info), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "rp_instance_query: instance"), "%s",
            rp_error_detail());
  rp_launch bad = {.task = 999, .proc = 0};
  RP_EXPECT(rp_launch_task(rt, &bad, NULL), RP_ENOTASK);
  cr_assert(strstr(rp_error_detail(),
                   "rp_launch_task: task id 999 is not registered"),
            "%s", rp_error_detail());
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  RP_EXPECT(rp_graph_add_task(g, &bad, NULL), RP_ENOTASK);
  cr_assert(strstr(rp_error_detail(),
                   "rp_graph_add_task: task id 999 is not registered"),
            "%s", rp_error_detail());
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* The processor and memory queries and rp_runtime_create_model name
 * themselves and the argument at fault, and leave *out as it was. */
Test(misuse_api, processor_memory_and_model_errors_name_the_call) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_proc_info pi = {.device = 77};
  RP_EXPECT(rp_proc_query(rt, 5, &pi), RP_EPROC);
  cr_assert(strstr(rp_error_detail(), "rp_proc_query: processor 5 out of "
                                      "range (runtime has 2)"),
            "%s", rp_error_detail());
  cr_assert_eq(pi.device, 77);
  rp_mem_info mi = {.device = 77};
  RP_EXPECT(rp_mem_query(rt, 9, &mi), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(),
                   "rp_mem_query: memory 9 out of range (runtime has 1)"),
            "%s", rp_error_detail());
  cr_assert_eq(mi.device, 77);
  rp_mem m = 77;
  RP_EXPECT(rp_mem_find(rt, RP_MEM_GPU, 3, &m), RP_ENOENT);
  cr_assert(strstr(rp_error_detail(), "rp_mem_find: no memory of kind 2 "
                                      "(device 3)"),
            "%s", rp_error_detail());
  cr_assert_eq(m, 77);
  th_destroy(rt);
  struct {
    rp_machine_desc m;
    rp_status want;
    const char *detail;
  } cases[] = {
      {{.cpus = 0}, RP_ERANGE, "machine: 0 CPU workers (1..128)"},
      {{.cpus = 1, .ngpus = RP_MODEL_MAX_GPUS + 1},
       RP_ERANGE,
       "machine: 65 GPU processors (at most 64)"},
      {{.cpus = 1, .nmems = RP_MODEL_MAX_MEMS + 1},
       RP_ERANGE,
       "machine: 33 memories (at most 32)"},
      {{.cpus = 1, .ngpus = 1, .gpu_device = {-2}},
       RP_EINVAL,
       "machine: GPU processor 0 on device -2"},
      {{.cpus = 1, .nmems = 1, .mems = {{(rp_mem_kind)7, -1}}},
       RP_EINVAL,
       "machine: memory 0 has kind 7"},
      {{.cpus = 1, .nmems = 1, .mems = {{RP_MEM_GPU, -1}}},
       RP_EINVAL,
       "machine: memory 0 is GPU memory of device -1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rp_runtime *none = (rp_runtime *)&cases[i];
    RP_EXPECT(rp_runtime_create_model(&cases[i].m, &none), cases[i].want);
    cr_assert(strstr(rp_error_detail(), "rp_runtime_create_model: ") ==
                  rp_error_detail(),
              "case %zu: '%s' does not name the call", i, rp_error_detail());
    cr_assert(strstr(rp_error_detail(), cases[i].detail), "case %zu: %s", i,
              rp_error_detail());
    cr_assert_eq(none, (rp_runtime *)&cases[i], "case %zu: *out written", i);
  }
  /* a device is read for GPU memory only (header): a pinned memory's is
   * ignored, whatever it holds; a GPU memory's is bounded */
  rp_machine_desc pinned = {
      .cpus = 1, .nmems = 1, .mems = {{RP_MEM_PINNED, 5000}}};
  rp_runtime *mr = NULL;
  RP_CHECK(rp_runtime_create_model(&pinned, &mr));
  rp_mem pm;
  RP_CHECK(rp_mem_find(mr, RP_MEM_PINNED, -1, &pm));
  RP_CHECK(rp_mem_query(mr, pm, &mi));
  cr_assert_eq(mi.device, -1);
  th_destroy(mr);
  pinned.mems[0] = (rp_mem_info){RP_MEM_GPU, RP_MODEL_MAX_DEVICE + 1};
  mr = NULL;
  RP_EXPECT(rp_runtime_create_model(&pinned, &mr), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "memory 0 on device 1024 (at most 1023)"),
            "%s", rp_error_detail());
  cr_assert_null(mr);
}

/* Instance handle 0 is none: a missing argument (RP_EINVAL naming the
 * field), not a freed instance (RP_ESTALE), in every call taking one. */
Test(misuse_api, instance_handle_zero_is_a_missing_argument) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "nop", .cpu_fn = nop_task, .cost_ns = 100},
      &t));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a, none = {0};
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  float buf[4];
  rp_instance_info info;
#define NONE(call, text)                                                       \
  do {                                                                         \
    RP_EXPECT(call, RP_EINVAL);                                                \
    cr_assert(strstr(rp_error_detail(), text), "%s", rp_error_detail());       \
  } while (0)
  NONE(rp_instance_read(rt, none, buf, sizeof buf), "0 is none");
  NONE(rp_instance_query(rt, none, &info), "0 is none");
  RP_CHECK(rp_instance_free(rt, none)); /* as free(NULL) */
  NONE(rp_instance_set_name(rt, none, "x"), "0 is none");
  NONE(rp_instance_realloc(rt, &none), "rp_instance_realloc: instance handle");
  rp_access acc = {.inst = none, .priv = RP_WRITE};
  rp_launch l = {.task = t, .proc = 0, .accesses = &acc, .naccess = 1};
  NONE(rp_launch_task(rt, &l, NULL), "0 is none");
  NONE(rp_launch_copy(rt, &(rp_copy){.src = none, .dst = a}, NULL),
       "src instance 0 is none");
  NONE(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = none}, NULL),
       "dst instance 0 is none");
  rp_inst b;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &b));
  rp_inst parts[2] = {a, b};
  rp_parallel_op op = {
      .kind = RP_POP_REPARTITION, .whole = none, .parts = parts, .nparts = 2};
  NONE(rp_launch_parallel(rt, &op, NULL), "whole instance 0 is none");
  op.whole = a;
  parts[0] = none; /* {none, b} */
  NONE(rp_launch_parallel(rt, &op, NULL), "part 0 instance 0 is none");
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  NONE(rp_graph_add_task(g, &l, NULL), "is none");
  NONE(rp_graph_add_copy(g, &(rp_copy){.src = none, .dst = a}, NULL),
       "is none");
  NONE(rp_graph_add_parallel(g, &op, NULL, NULL), "is none");
  RP_CHECK(rp_graph_destroy(g));
#undef NONE
  /* nothing ran: a is still live and unwritten to by any of them */
  RP_CHECK(rp_instance_query(rt, a, &info));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* ---- names ---- */

/* Names refused by the rule: too long, a quote, a backslash, a newline, a
 * byte past ASCII, a tab. */
static char long_name[1 << 20];
static const char *bad_names[7];

static void bad_names_init(void) {
  memset(long_name, 'a', sizeof long_name - 1);
  bad_names[0] = long_name;
  bad_names[1] = "a\"b";
  bad_names[2] = "a\\b";
  bad_names[3] = "a\nb";
  bad_names[4] = "a\xff"
                 "b";
  bad_names[5] = "a\tb";
  static char n64[65];
  memset(n64, 'x', 64);
  bad_names[6] = n64;
}

Test(misuse_api, every_name_entry_refuses_a_bad_name_and_changes_nothing) {
  bad_names_init();
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = nop_registered(rt);
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  RP_CHECK(rp_instance_set_name(rt, in, "W"));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &op));
  RP_CHECK(rp_graph_set_op_name(g, op, "fc1"));
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    const char *n = bad_names[i];
    rp_port_id p = 77;
    RP_EXPECT(rp_instance_set_name(rt, in, n), RP_EINVAL);
    cr_assert_str_eq(rp_instance_name(rt, in), "W");
    RP_EXPECT(rp_graph_set_op_name(g, op, n), RP_EINVAL);
    cr_assert_str_eq(rp_graph_op_name(g, op), "fc1");
    RP_EXPECT(rp_graph_add_precondition(g, n, &p), RP_EINVAL);
    RP_EXPECT(rp_graph_add_postcondition(g, n, &p), RP_EINVAL);
    cr_assert_eq(p, 77);
    cr_assert_eq(rp_graph_precondition_count(g), 0);
    cr_assert_eq(rp_graph_postcondition_count(g), 0);
    rp_task_id t2 = 77;
    RP_EXPECT(rp_task_register(
                  rt, &(rp_task_desc){.name = n, .cpu_fn = nop_task}, &t2),
              RP_EINVAL);
    RP_CHECK(rp_capture_begin(rt, NULL));
    RP_EXPECT(rp_capture_name_next(rt, n), RP_EINVAL);
    rp_event ev = {0x5a};
    RP_EXPECT(rp_capture_precondition(rt, n, &ev, &p), RP_EINVAL);
    cr_assert(!strncmp(rp_error_detail(), "rp_capture_precondition: ", 25),
              "the call the user made: %s", rp_error_detail());
    RP_EXPECT(rp_capture_postcondition(rt, n, NULL, 0, &p), RP_EINVAL);
    cr_assert(!strncmp(rp_error_detail(), "rp_capture_postcondition: ", 26),
              "the call the user made: %s", rp_error_detail());
    cr_assert_eq(ev.id, 0x5a);
    rp_graph *cg;
    RP_CHECK(rp_capture_end(rt, &cg));
    cr_assert_eq(rp_graph_precondition_count(cg), 0);
    cr_assert_eq(rp_graph_postcondition_count(cg), 0);
    RP_CHECK(rp_graph_destroy(cg));
  }
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

/* The name a getter returned, passed back to its setter (the whole name or
 * a tail of it): the name the caller gave, not what was left once the
 * setter began writing over it. */
Test(misuse_api, a_name_set_from_its_own_getter_keeps_its_bytes) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = nop_registered(rt);
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst in;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in));
  RP_CHECK(rp_instance_set_name(rt, in, "weights.layer1"));
  RP_CHECK(rp_instance_set_name(rt, in, rp_instance_name(rt, in)));
  cr_assert_str_eq(rp_instance_name(rt, in), "weights.layer1");
  RP_CHECK(rp_instance_set_name(rt, in, rp_instance_name(rt, in) + 8));
  cr_assert_str_eq(rp_instance_name(rt, in), "layer1");
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &op));
  RP_CHECK(rp_graph_set_op_name(g, op, "block0.fc1"));
  RP_CHECK(rp_graph_set_op_name(g, op, rp_graph_op_name(g, op)));
  cr_assert_str_eq(rp_graph_op_name(g, op), "block0.fc1");
  RP_CHECK(rp_graph_set_op_name(g, op, rp_graph_op_name(g, op) + 7));
  cr_assert_str_eq(rp_graph_op_name(g, op), "fc1");
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, in));
  th_destroy(rt);
}

#ifdef REPRISE_HAVE_CJSON
/* A graph file with one op of task "nop" and one precondition port whose
 * name is the JSON text `port` (as written between the quotes). */
static rp_status load_with_port_name(rp_runtime *rt, const char *port) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_task_id t;
  RP_CHECK(rp_task_find(rt, "nop", &t));
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &op));
  rp_port_id p;
  RP_CHECK(rp_graph_add_precondition(g, "PORTNAME", &p));
  RP_CHECK(rp_graph_bind_precondition(g, p, op));
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  RP_CHECK(rp_graph_dump(g, m, RP_DUMP_JSON));
  fclose(m);
  RP_CHECK(rp_graph_destroy(g));
  /* the checksum is optional: drop it, so that only the name is wrong */
  cJSON *doc = cJSON_Parse(buf);
  cr_assert_not_null(doc);
  free(buf);
  cJSON_DeleteItemFromObject(doc, "checksum");
  char *text = cJSON_PrintUnformatted(doc);
  cJSON_Delete(doc);
  char *at = strstr(text, "\"PORTNAME\"");
  cr_assert_not_null(at, "%s", text);
  size_t need = strlen(text) + strlen(port) + 1;
  char *out = malloc(need);
  snprintf(out, need, "%.*s\"%s\"%s", (int)(at - text), text, port,
           at + strlen("\"PORTNAME\""));
  cJSON_free(text);
  rp_graph *lg = (rp_graph *)0x1;
  rp_status st = rp_graph_load_mem(rt, out, strlen(out), NULL, 0, 0, &lg);
  free(out);
  if (st == RP_OK) {
    RP_CHECK(rp_graph_destroy(lg));
  } else {
    cr_assert_eq(lg, (rp_graph *)0x1, "*out written on error");
  }
  return st;
}
#endif

/* rp_capture_postcondition binds ops of this capture only: an eager event
 * or a precondition port is RP_EPORT (the header's code) naming the entry,
 * and no port is added; a port name taken already is RP_EPORT too. */
Test(misuse_api, capture_postcondition_takes_only_this_captures_ops) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = nop_registered(rt);
  rp_event eager;
  RP_CHECK(rp_event_create(rt, &eager));
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event pre, op;
  RP_CHECK(rp_capture_precondition(rt, "in", &pre, NULL));
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, &op));
  rp_event bad[2][2] = {{op, eager}, {pre, op}};
  const char *want[2] = {"ops[1]", "precondition port"};
  for (int i = 0; i < 2; i++) {
    uint32_t port = 77;
    RP_EXPECT(rp_capture_postcondition(rt, "out", bad[i], 2, &port), RP_EPORT);
    cr_assert(strstr(rp_error_detail(), want[i]), "%s", rp_error_detail());
    cr_assert_eq(port, 77);
  }
  /* RP_NO_EVENT is named as such, not as an eager event */
  rp_event none[2] = {op, RP_NO_EVENT};
  RP_EXPECT(rp_capture_postcondition(rt, "out", none, 2, NULL), RP_EPORT);
  cr_assert(strstr(rp_error_detail(), "ops[1] = 0 is RP_NO_EVENT, not an op "
                                      "reference"),
            "%s", rp_error_detail());
  RP_CHECK(rp_capture_postcondition(rt, "out", &op, 1, NULL));
  /* a name taken by a port of the same kind: RP_EPORT, nothing added */
  rp_event again = {0};
  RP_EXPECT(rp_capture_precondition(rt, "in", &again, NULL), RP_EPORT);
  cr_assert(strstr(rp_error_detail(), "port 'in' is already used"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_capture_postcondition(rt, "out", &op, 1, NULL), RP_EPORT);
  cr_assert(strstr(rp_error_detail(), "port 'out' is already used"), "%s",
            rp_error_detail());
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_precondition_count(g), 1);
  cr_assert_eq(rp_graph_postcondition_count(g), 1);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_event_release(rt, eager));
  th_destroy(rt);
}

/* A reference of an earlier capture, or of another runtime's capture
 * (whose serials once matched this one's), is refused as a wait
 * (RP_ECAPTURE) and as a postcondition (RP_EPORT), each naming the
 * reference; nothing is recorded. */
Test(misuse_api, capture_refuses_references_of_other_captures_and_runtimes) {
  rp_runtime *a = th_cpu_runtime(1), *b = th_cpu_runtime(1);
  rp_task_id ta = nop_registered(a), tb = nop_registered(b);
  rp_event old_b, ref_a, ref_b;
  rp_graph *g;
  RP_CHECK(rp_capture_begin(b, NULL)); /* an earlier capture of b */
  RP_CHECK(rp_launch_task(b, &(rp_launch){.task = tb, .proc = 0}, &old_b));
  RP_CHECK(rp_capture_end(b, &g));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_capture_begin(a, NULL));
  RP_CHECK(rp_launch_task(a, &(rp_launch){.task = ta, .proc = 0}, &ref_a));
  RP_CHECK(rp_capture_begin(b, NULL));
  RP_CHECK(rp_launch_task(b, &(rp_launch){.task = tb, .proc = 0}, &ref_b));
  const rp_event foreign[2] = {ref_a, old_b};
  for (int i = 0; i < 2; i++) {
    RP_EXPECT(
        rp_launch_task(
            b, &(rp_launch){.task = tb, .proc = 0, .wait = foreign[i]}, NULL),
        RP_ECAPTURE);
    cr_assert(strstr(rp_error_detail(), "belongs to another capture"), "%s",
              rp_error_detail());
    RP_EXPECT(rp_capture_postcondition(b, "p", &foreign[i], 1, NULL), RP_EPORT);
    cr_assert(strstr(rp_error_detail(), "belongs to another capture"),
              "the detail is '%s'", rp_error_detail());
  }
  RP_CHECK(rp_capture_end(b, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  cr_assert_eq(rp_graph_postcondition_count(g), 0);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_capture_end(a, &g));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(a);
  th_destroy(b);
}

/* A reference of this capture whose op index was never handed out (a
 * handle made up from a real one: its index past the ops recorded, or 0)
 * is refused as a wait (RP_ECAPTURE naming the call and the reference);
 * nothing is recorded and the capture goes on. */
Test(misuse_api, capture_refuses_a_reference_past_its_ops) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = nop_registered(rt);
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_event ref;
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0}, &ref));
  const rp_event bad[2] = {{ref.id + 5}, {ref.id - 1}};
  for (int i = 0; i < 2; i++) {
    rp_event done = {0x5eed};
    RP_EXPECT(rp_launch_task(rt,
                             &(rp_launch){.task = t, .proc = 0, .wait = bad[i]},
                             &done),
              RP_ECAPTURE);
    char want[128];
    snprintf(want, sizeof want,
             "rp_launch_task: reference %#llx is out of range",
             (unsigned long long)bad[i].id);
    cr_assert_str_eq(rp_error_detail(), want);
    cr_assert_eq(done.id, 0x5eed, "*done written on error");
  }
  RP_CHECK(rp_launch_task(rt, &(rp_launch){.task = t, .proc = 0, .wait = ref},
                          NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

Test(misuse_api, loader_refuses_bad_names_nul_escapes_included) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON, which this build lacks");
#else
  rp_runtime *rt = th_cpu_runtime(1);
  (void)nop_registered(rt); /* the task the graph files name */
  /* as JSON text: none, a NUL escape (cJSON would cut the name at it), a
   * quote, a newline, a byte past ASCII (escaped and raw), a backslash */
  static const char *const bad[] = {"",
                                    "a\\u0000b",
                                    "a\\\"b",
                                    "a\\nb",
                                    "a\\u00ffb",
                                    "a\\\\b",
                                    "a\xff"
                                    "b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rp_status st = load_with_port_name(rt, bad[i]);
    /* a file's fault (RP_EFORMAT), as for op names, naming where: the
     * JSON path, or the byte of a NUL escape (refused before parsing) */
    cr_assert_eq(st, RP_EFORMAT, "port name \"%s\": %s (%s)", bad[i],
                 rp_status_name(st), rp_error_detail());
    cr_assert(strstr(rp_error_detail(), "graph.preconditions[0]") ||
                  (i == 1 && strstr(rp_error_detail(), "at byte ")),
              "port name \"%s\": the detail '%s' does not name the path",
              bad[i], rp_error_detail());
  }
  th_destroy(rt);
#endif
}

/* ---- every dump of an accepted graph parses ---- */

/* 1 when the n bytes are valid UTF-8 (no overlong forms, no surrogates). */
static int utf8_valid(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k = c < 0x80             ? 0
               : (c & 0xe0) == 0xc0 ? 1
               : (c & 0xf0) == 0xe0 ? 2
               : (c & 0xf8) == 0xf0 ? 3
                                    : 9;
    if (k == 9 || i + k >= n + (k == 0))
      return 0;
    unsigned cp = k == 0 ? c : c & (0x3f >> k);
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xc0) != 0x80)
        return 0;
      cp = cp << 6 | (s[i + j] & 0x3f);
    }
    if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) ||
        (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    i += k + 1;
  }
  return 1;
}

/* Odd but legal names: every printable ASCII byte the rule allows that
 * means something to DOT, HTML-like labels, records or shells. */
#define ODD_OP "a<b>{c}|d;e'f#g&h%i$j@k=l[m]n`o~p"
#define ODD_PORT "in <0> {x|y} 'q' #1"
#define ODD_INST "W{1}|<x> & 'y'"
#define ODD_TASK "t.x<y>|z'q{r}"

static void dump_to(const char *path, const rp_graph *g, const rp_exec *ex,
                    rp_dump_format fmt) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  RP_CHECK(g ? rp_graph_dump(g, f, fmt) : rp_exec_dump(ex, f, fmt));
  cr_assert_eq(fclose(f), 0);
}

static void check_dot(const char *path) {
  if (system("command -v dot >/dev/null 2>&1") != 0) {
    cr_log_warn("%s", "Graphviz `dot` not found: DOT output not parsed");
    return;
  }
  char cmd[512];
  snprintf(cmd, sizeof cmd, "dot -Tsvg -o /dev/null '%s' 2>'%s.err'", path,
           path);
  int rc = system(cmd);
  size_t len = 0;
  char errp[256];
  snprintf(errp, sizeof errp, "%s.err", path);
  char *err = th_read_all(errp, &len);
  cr_assert_eq(rc, 0, "dot refused %s: %s", path, err ? err : "");
  cr_assert_eq(len, 0, "dot warned on %s: %s", path, err);
  free(err);
}

static void check_json(const char *path, int graph_file) {
  size_t len = 0;
  char *text = th_read_all(path, &len);
  cr_assert_not_null(text);
  cr_assert(utf8_valid((const unsigned char *)text, len),
            "%s is not valid UTF-8", path);
#ifdef REPRISE_HAVE_CJSON
  cJSON *doc = cJSON_ParseWithLength(text, len);
  cr_assert_not_null(doc, "%s does not parse as JSON", path);
  if (graph_file) {
    /* the names come back as they were given */
    char *again = cJSON_PrintUnformatted(doc);
    cr_assert(strstr(again, ODD_OP) && strstr(again, ODD_PORT) &&
                  strstr(again, ODD_INST) && strstr(again, ODD_TASK),
              "%s lost a name", path);
    cJSON_free(again);
  }
  cJSON_Delete(doc);
#else
  (void)graph_file;
#endif
  free(text);
}

Test(misuse_api, dumps_of_graphs_with_odd_legal_names_parse) {
  th_tmpdir_make("/tmp/rp_dumps_XXXXXX");
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = ODD_TASK, .cpu_fn = nop_task, .cost_ns = 1},
      &t));
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst w, parts[2];
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &w));
  RP_CHECK(rp_instance_set_name(rt, w, ODD_INST));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &parts[i]));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_access acc = {w, RP_RW, RP_REDOP_NONE};
  rp_op_id a, first;
  uint32_t n;
  RP_CHECK(rp_graph_add_task(
      g, &(rp_launch){.task = t, .proc = 0, .accesses = &acc, .naccess = 1},
      &a));
  RP_CHECK(rp_graph_set_op_name(g, a, ODD_OP));
  RP_CHECK(rp_graph_add_parallel(
      g,
      &(rp_parallel_op){
          .kind = RP_POP_REPLICATE, .whole = w, .parts = parts, .nparts = 2},
      &first, &n));
  for (uint32_t k = 0; k < n; k++) {
    RP_CHECK(rp_graph_add_edge(g, a, first + k));
    RP_CHECK(rp_graph_set_op_name(g, first + k, ODD_OP));
  }
  rp_port_id pre, post;
  RP_CHECK(rp_graph_add_precondition(g, ODD_PORT, &pre));
  RP_CHECK(rp_graph_bind_precondition(g, pre, a));
  RP_CHECK(rp_graph_add_postcondition(g, ODD_PORT, &post));
  RP_CHECK(rp_graph_bind_postcondition(g, post, first));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));

  dump_to(th_tmp_path("g.dot"), g, NULL, RP_DUMP_DOT);
  check_dot(th_tmp_path("g.dot"));
  dump_to(th_tmp_path("x.dot"), NULL, ex, RP_DUMP_DOT);
  check_dot(th_tmp_path("x.dot"));
  dump_to(th_tmp_path("x.json"), NULL, ex, RP_DUMP_JSON);
  check_json(th_tmp_path("x.json"), 0);
#ifdef REPRISE_HAVE_CJSON
  dump_to(th_tmp_path("g.json"), g, NULL, RP_DUMP_JSON);
  check_json(th_tmp_path("g.json"), 1);
#endif
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, w));
  for (int i = 0; i < 2; i++)
    RP_CHECK(rp_instance_free(rt, parts[i]));
  th_destroy(rt);
  th_tmpdir_remove();
}

/* ---- NULL descriptors, limits, foreign handles ---- */

/* call returns want and its detail contains sub. */
#define EXPECT_DETAIL(call, want, sub)                                         \
  do {                                                                         \
    RP_EXPECT(call, want);                                                     \
    cr_assert(strstr(rp_error_detail(), (sub)), "%s: detail '%s' lacks '%s'",  \
              #call, rp_error_detail(), (sub));                                \
  } while (0)

static rp_status gpu_only_body(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

/* A NULL descriptor (rp_launch, rp_copy, rp_parallel_op, rp_interp, an
 * array whose count is not 0) is RP_EINVAL naming the call, and so is a
 * builder op given a wait event; a count past its limit is RP_ERANGE; the
 * graph, the capture and the runtime stay as they were and usable. */
Test(misuse_api, null_descriptors_and_limits_name_the_call_and_change_nothing) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = nop_registered(rt);
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a, b;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &b));
  rp_event ev;
  RP_CHECK(rp_event_create(rt, &ev));
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id op = 77;
  EXPECT_DETAIL(rp_graph_add_task(g, NULL, &op), RP_EINVAL,
                "rp_graph_add_task: NULL argument");
  rp_launch lw = {.task = t, .proc = RP_PROC_ANY, .wait = ev};
  EXPECT_DETAIL(rp_graph_add_task(g, &lw, &op), RP_EINVAL,
                "rp_graph_add_task: use edges and ports");
  EXPECT_DETAIL(rp_graph_add_copy(g, NULL, &op), RP_EINVAL,
                "rp_graph_add_copy: NULL argument");
  rp_copy cw = {.src = a, .dst = b, .wait = ev};
  EXPECT_DETAIL(rp_graph_add_copy(g, &cw, &op), RP_EINVAL,
                "rp_graph_add_copy: use edges and ports");
  rp_op_id first = 77;
  uint32_t count = 77;
  EXPECT_DETAIL(rp_graph_add_parallel(g, NULL, &first, &count), RP_EINVAL,
                "rp_graph_add_parallel: NULL argument");
  rp_parallel_op pw = {.kind = RP_POP_REPLICATE,
                       .whole = a,
                       .parts = &b,
                       .nparts = 1,
                       .wait = ev};
  EXPECT_DETAIL(rp_graph_add_parallel(g, &pw, &first, &count), RP_EINVAL,
                "rp_graph_add_parallel: use edges and ports");
  cr_assert_eq(op, 77);
  cr_assert_eq(first, 77);
  cr_assert_eq(count, 77);
  cr_assert_eq(rp_graph_op_count(g), 0, "a refused op was added");
  /* interpolations: NULL, on a copy, a NULL array behind a count */
  rp_op_id top, cop;
  RP_CHECK(rp_graph_add_task(g,
                             &(rp_launch){.task = t,
                                          .proc = RP_PROC_ANY,
                                          .args = &(uint64_t){0},
                                          .args_size = 8},
                             &top));
  RP_CHECK(rp_graph_add_copy(g, &(rp_copy){.src = a, .dst = b}, &cop));
  EXPECT_DETAIL(rp_graph_add_interp(g, top, NULL), RP_EINVAL,
                "rp_graph_add_interp: NULL argument");
  rp_interp ip = {.src_offset = 0, .dst_offset = 0, .bytes = 8};
  char want[64];
  snprintf(want, sizeof want, "rp_graph_add_interp: op %u is a copy", cop);
  EXPECT_DETAIL(rp_graph_add_interp(g, cop, &ip), RP_EINVAL, want);
  rp_launch li = {.task = t, .proc = RP_PROC_ANY, .ninterp = 1};
  EXPECT_DETAIL(rp_graph_add_task(g, &li, NULL), RP_EINVAL,
                "1 interpolations, NULL array");
  cr_assert_eq(rp_graph_op_count(g), 2);
  RP_CHECK(rp_graph_add_interp(g, top, &ip)); /* the graph still builds */
  EXPECT_DETAIL(rp_graph_validate(NULL), RP_EINVAL,
                "rp_graph_validate: NULL graph");
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(rp_graph_destroy(g));

  /* eager launches: counts without arrays, limits */
  rp_event done = {77};
  rp_launch ln = {.task = t, .proc = 0, .naccess = 2};
  EXPECT_DETAIL(rp_launch_task(rt, &ln, &done), RP_EINVAL,
                "nop: 2 accesses but NULL array");
  static char big[(1u << 20) + 1];
  rp_launch lbig = {.task = t, .proc = 0, .args = big, .args_size = sizeof big};
  EXPECT_DETAIL(rp_launch_task(rt, &lbig, &done), RP_ERANGE,
                "task 'nop': 1048577 argument bytes (max 1048576)");
  rp_launch lsh = {.task = t, .proc = RP_PROC_ANY, .shards = 4097};
  EXPECT_DETAIL(rp_launch_task(rt, &lsh, &done), RP_ERANGE,
                "task 'nop': 4097 shards (max 4096)");
  cr_assert_eq(done.id, 77, "*done written on error");
  /* a task with a GPU variant only, on a CPU runtime */
  rp_task_id gt;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "gpu_only", .gpu_fn = gpu_only_body}, &gt));
  EXPECT_DETAIL(rp_launch_task(rt, &(rp_launch){.task = gt, .proc = 0}, &done),
                RP_EPROC, "task 'gpu_only' has no CPU variant for processor 0");
  EXPECT_DETAIL(
      rp_launch_task(rt, &(rp_launch){.task = gt, .proc = RP_PROC_ANY}, &done),
      RP_EPROC,
      "task 'gpu_only' has no CPU variant, so it cannot run on "
      "RP_PROC_ANY");
  /* events: a merge of more events than a table holds, caller memory at
   * NULL */
  rp_event m = {77};
  EXPECT_DETAIL(rp_event_merge(rt, &ev, (size_t)UINT32_MAX, &m), RP_ERANGE,
                "rp_event_merge: 4294967295 events");
  cr_assert_eq(m.id, 77);
  rp_inst x = {77};
  EXPECT_DETAIL(
      rp_instance_create_external(rt, 0, RP_F32, &r, NULL, NULL, 16, &x),
      RP_EINVAL, "rp_instance_create_external: NULL pointer");
  cr_assert_eq(x.id, 77);
  /* rectangles: no dimensions, an extent past int64 */
  rp_rect out = {.dim = 9}, none = {.dim = 0};
  EXPECT_DETAIL(rp_chunk_rect(&none, 0, 2, 0, &out), RP_ESHAPE,
                "rp_chunk_rect: whole rect has 0 dims (1..4)");
  rp_rect huge = {.dim = 1, .lo = {INT64_MIN}, .hi = {INT64_MAX}};
  EXPECT_DETAIL(rp_chunk_rect(&huge, 0, 2, 0, &out), RP_ERANGE,
                "rp_chunk_rect: extent of dim 0 overflows");
  cr_assert_eq(out.dim, 9);
  /* a capture: postcondition ops NULL behind a count */
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(
      rt,
      &(rp_launch){.task = t,
                   .proc = RP_PROC_ANY,
                   .accesses = &(rp_access){a, RP_WRITE, RP_REDOP_NONE},
                   .naccess = 1},
      &done));
  uint32_t port = 77;
  EXPECT_DETAIL(rp_capture_postcondition(rt, "out", NULL, 1, &port), RP_EINVAL,
                "rp_capture_postcondition: NULL ops");
  cr_assert_eq(port, 77);
  RP_CHECK(rp_capture_postcondition(rt, "out", &done, 1, &port));
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  cr_assert_eq(rp_graph_postcondition_count(g), 1);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  /* a replay: precondition events NULL, an unknown dump format */
  EXPECT_DETAIL(rp_exec_dump(ex, stderr, (rp_dump_format)99), RP_EINVAL,
                "rp_exec_dump: unknown format 99");
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_event_trigger(rt, ev));
  RP_CHECK(rp_event_release(rt, ev));
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  th_destroy(rt);
}

/* A backend outside the enum names the call and the field. */
Test(misuse_api, an_unknown_backend_names_the_call_and_the_field) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.ignore_env = 1;
  cfg.backend = (rp_backend_kind)99;
  rp_runtime *rt = (rp_runtime *)&cfg;
  EXPECT_DETAIL(rp_runtime_create(&cfg, &rt), RP_EINVAL,
                "rp_runtime_create: cfg.backend 99 is not RP_BACKEND_AUTO, "
                "RP_BACKEND_CPU or RP_BACKEND_CUDA");
  cr_assert_null(rt, "*out is NULL on error");
}

/* A pointer that is no runtime, graph or exec (another object's memory)
 * is RP_EINVAL naming the call, not a crash or a stale handle. */
Test(misuse_api, foreign_pointers_are_refused_naming_the_call) {
  static _Alignas(64) uint64_t junk[256]; /* zeroes: no object's magic */
  rp_runtime *jr = (rp_runtime *)junk;
  rp_graph *jg = (rp_graph *)junk;
  rp_exec *je = (rp_exec *)junk;
  EXPECT_DETAIL(rp_runtime_drain(jr), RP_EINVAL, "rp_runtime_drain: ");
  cr_assert(strstr(rp_error_detail(), "is not a runtime"), "%s",
            rp_error_detail());
  EXPECT_DETAIL(rp_graph_validate(jg), RP_EINVAL, "rp_graph_validate: ");
  cr_assert(strstr(rp_error_detail(), "is not a graph"), "%s",
            rp_error_detail());
  rp_exec_stats s;
  EXPECT_DETAIL(rp_exec_stats_get(je, &s), RP_EINVAL, "rp_exec_stats_get: ");
  cr_assert(strstr(rp_error_detail(), "is not an exec"), "%s",
            rp_error_detail());
  for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
    cr_assert_eq(junk[i], 0, "the call wrote into the foreign memory");
}

/* A shard_procs entry naming a processor the runtime lacks is refused
 * naming the entry (eager, recorded and built), nothing run or added. */
Test(misuse_api, a_shard_procs_entry_out_of_range_is_named) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = th_task(rt, "nop", nop_task);
  const rp_proc sp[3] = {0, 1, 9};
  rp_launch l = {.task = t, .proc = 0, .shards = 3, .shard_procs = sp};
  const char *want = "nop: shard_procs[2]: processor 9 out of range (runtime "
                     "has 2)";
  rp_event done = {0x5a5a};
  EXPECT_DETAIL(rp_launch_task(rt, &l, &done), RP_EPROC, want);
  cr_assert_eq(done.id, 0x5a5a, "*done written on error");
  RP_CHECK(rp_capture_begin(rt, NULL));
  EXPECT_DETAIL(rp_launch_task(rt, &l, &done), RP_EPROC, want);
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0);
  rp_op_id op = 77;
  EXPECT_DETAIL(rp_graph_add_task(g, &l, &op), RP_EPROC, want);
  cr_assert_eq(op, 77, "*out written on error");
  cr_assert_eq(rp_graph_op_count(g), 0);
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}
