/* tools/dump_lint.c — `reprise dump --stats` and `--lint` over a dm_graph.
 *
 * The checks (docs/debugging.md "reprise dump"; each finding names the op):
 *
 * runahead          a task with the HOST contract whose direct predecessor
 *                   and direct successor are STREAM_ORDERED tasks on GPU
 *                   processors: the host waits for the predecessor to finish
 *                   on the device before it runs, so the successor cannot
 *                   be issued ahead of it.
 * contract          a task whose contract contradicts where its data is:
 *                   HOST with an instance in GPU memory (the host cannot
 *                   address it; on a GPU processor with only device memory
 *                   the task can only be enqueuing work: STREAM_ORDERED), or
 *                   STREAM_ORDERED on a GPU with an instance in pageable
 *                   system memory (the device cannot reach it). A
 *                   STREAM_ORDERED task on a CPU worker touching host memory
 *                   is NOT flagged: on the CPU backend a worker is its own
 *                   stream (kernels/tasks.h), so that is the contract kept.
 * redundant-edge    an edge u -> v that another path u -> w -> ... -> v
 *                   already implies (not in the transitive reduction).
 *                   (No graph holds an edge twice: rp_graph_add_edge
 *                   merges a repeat, the loader refuses one.) Only edges
 *                   someone asked for
 *                   (rp_graph_add_edge, a launch's wait): capture infers
 *                   one edge per conflicting access, and those a path
 *                   implies are counted by --stats, not reported.
 * unread-result     an op that writes (WRITE, RW, REDUCE; a copy's
 *                   destination), is bound to no postcondition, and whose
 *                   written instances no other op reads (READ, RW, a copy's
 *                   source: anywhere in the graph, so state read by the next
 *                   replay counts; a REDUCE ordered after the op folds its
 *                   result in, so it counts too) except ops that are
 *                   themselves unread
 *                   (least fixpoint, so a closed loop is never flagged).
 *                   Ops that write nothing are kept: their effect is
 *                   outside the graph.
 * mergeable-copies  two copies with the same source and destination
 *                   instances and reduction, whose point sets are adjacent
 *                   or overlap and together form one rectangle (disjoint for
 *                   sum copies), with no other op ordered between them.
 *                   Every pair of copies with one source and destination
 *                   is checked; 8 findings per such group are shown, all
 *                   counted.
 * race              two ops with no path between them that access one
 *                   instance in ways that conflict: a write, a read-write
 *                   or a reduction against any other access, except two
 *                   reductions that commute (the same operator, both
 *                   tasks' or both copies': capture's rule); two copies
 *                   conflict only where their point sets meet. Capture
 *                   orders every such pair; a built graph or an edited
 *                   file may not, and the two then run at the same time.
 * instantiate       rp_graph_validate refuses the graph (m->refused): what
 *                   rp_instantiate would refuse that loading let through,
 *                   such as a port bound to no op.
 *
 * Each check prints at most LINT_SHOWN_PER_CHECK lines, then one that
 * counts the findings left unsaid; the summary line counts all.
 *
 * Processor kinds and contracts come from the model, so placeholder tasks
 * (contract unknown) are skipped by runahead and contract. */
#include "dump_model.h"

#include "engine/util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- derived graph: adjacency, order, reachability ---- */

typedef struct dg {
  const dm_graph *m;
  uint32_t *succ_off, *succ; /* CSR, nops + 1 offsets */
  uint8_t *succ_inf;         /* per succ entry: the edge was inferred */
  uint32_t *pred_off, *pred;
  uint32_t *order; /* topological */
  uint64_t *reach; /* nops x words bits: strict descendants, or
                      NULL when the graph is too large or memory ran out */
  size_t words;
  int reach_oom; /* reach is NULL because memory ran out */
} dg;

static void dg_free(dg *d) {
  free(d->succ_off);
  free(d->succ);
  free(d->succ_inf);
  free(d->pred_off);
  free(d->pred);
  free(d->order);
  free(d->reach);
  memset(d, 0, sizeof *d);
}

/* Adjacency in CSR form; inf (may be NULL) gets each entry's inferred
 * mark. */
static int csr(const dm_graph *m, int fwd, uint32_t **off, uint32_t **adj,
               uint8_t **inf) {
  *off = calloc((size_t)m->nops + 1, sizeof **off);
  *adj = malloc(sizeof **adj * (m->nedges ? m->nedges : 1));
  if (inf && !(*inf = malloc(m->nedges ? m->nedges : 1)))
    return -1;
  if (!*off || !*adj)
    return -1;
  for (uint32_t e = 0; e < m->nedges; e++)
    (*off)[(fwd ? m->edges[e].from : m->edges[e].to) + 1]++;
  for (uint32_t i = 0; i < m->nops; i++)
    (*off)[i + 1] += (*off)[i];
  uint32_t *fill = calloc(m->nops ? m->nops : 1, sizeof *fill);
  if (!fill)
    return -1;
  for (uint32_t e = 0; e < m->nedges; e++) {
    uint32_t a = fwd ? m->edges[e].from : m->edges[e].to;
    uint32_t b = fwd ? m->edges[e].to : m->edges[e].from;
    if (inf)
      (*inf)[(*off)[a] + fill[a]] = (uint8_t)(m->edges[e].inferred != 0);
    (*adj)[(*off)[a] + fill[a]++] = b;
  }
  free(fill);
  return 0;
}

/* Kahn's algorithm: -1 on a cycle (a loaded graph never has one), -2 out
 * of memory. */
static int topo(dg *d) {
  const dm_graph *m = d->m;
  uint32_t *indeg = calloc(m->nops ? m->nops : 1, sizeof *indeg);
  d->order = malloc(sizeof *d->order * (m->nops ? m->nops : 1));
  if (!indeg || !d->order) {
    free(indeg);
    return -2;
  }
  uint32_t n = rp__topo_order(m->nops, d->succ_off, d->succ, indeg, d->order);
  free(indeg);
  return n == m->nops ? 0 : -1;
}

static int reach_has(const dg *d, uint32_t u, uint32_t v) {
  return (int)(d->reach[(size_t)u * d->words + v / 64] >> (v % 64) & 1);
}

/* reach[u] = union over successors w of {w} and reach[w], in reverse
 * topological order. Skipped (reach NULL) above DM_REACH_MAX_OPS or when
 * memory runs out (reach_oom): dm_lint says which checks could not run. */
static void reach_build(dg *d) {
  const dm_graph *m = d->m;
  if (m->nops > DM_REACH_MAX_OPS || !m->nops)
    return;
  d->words = (m->nops + 63) / 64;
  d->reach = calloc((size_t)m->nops * d->words, sizeof *d->reach);
  if (!d->reach) {
    d->reach_oom = 1;
    return;
  }
  for (uint32_t i = m->nops; i-- > 0;) {
    uint32_t u = d->order[i];
    uint64_t *ru = &d->reach[(size_t)u * d->words];
    for (uint32_t k = d->succ_off[u]; k < d->succ_off[u + 1]; k++) {
      uint32_t w = d->succ[k];
      const uint64_t *rw = &d->reach[(size_t)w * d->words];
      for (size_t j = 0; j < d->words; j++)
        ru[j] |= rw[j];
      ru[w / 64] |= 1ull << (w % 64);
    }
  }
}

static int dg_build(dg *d, const dm_graph *m, FILE *err) {
  memset(d, 0, sizeof *d);
  d->m = m;
  for (uint32_t e = 0; e < m->nedges; e++)
    if (m->edges[e].from >= m->nops || m->edges[e].to >= m->nops) {
      fprintf(err, "edge %u names an op out of range\n", e);
      return -1;
    }
  if (csr(m, 1, &d->succ_off, &d->succ, &d->succ_inf) ||
      csr(m, 0, &d->pred_off, &d->pred, NULL)) {
    fprintf(err, "out of memory\n");
    dg_free(d);
    return -1;
  }
  int rc = topo(d);
  if (rc) {
    fprintf(err, rc == -2 ? "out of memory\n" : "the graph has a cycle\n");
    dg_free(d);
    return -1;
  }
  reach_build(d);
  return 0;
}

/* ---- names ---- */

typedef char label[384]; /* an instance's name and rect fit whole */

/* "op 3 (rp.gemm)", or with a name "op 3 'fc1.fwd' (rp.gemm)". */
static const char *op_name(const dm_graph *m, uint32_t i, char *buf) {
  if (m->ops[i].label[0])
    snprintf(buf, sizeof(label), "op %u '%s' (%s)", i, m->ops[i].label,
             m->ops[i].name);
  else
    snprintf(buf, sizeof(label), "op %u (%s)", i, m->ops[i].name);
  return buf;
}

static const char *mem_name(rp_mem_kind k) {
  return k == RP_MEM_GPU ? "gpu" : k == RP_MEM_PINNED ? "pinned" : "system";
}

static const char *inst_name(const dm_graph *m, uint32_t i, char *buf) {
  if (i >= m->ninsts) {
    snprintf(buf, sizeof(label), "instance ?");
    return buf;
  }
  char rect[RP_RECT_STR_MAX], named[RP_NAME_MAX + 4] = "";
  const dm_inst *in = &m->insts[i];
  rp_rect_str(&in->rect, rect, sizeof rect);
  if (in->name[0])
    snprintf(named, sizeof named, " '%s'", in->name);
  if (in->mem == RP_MEM_GPU)
    snprintf(buf, sizeof(label),
             "instance %u%s (%s %s, gpu memory of device "
             "%d)",
             i, named, rp_dtype_name(in->dtype), rect, in->device);
  else
    snprintf(buf, sizeof(label), "instance %u%s (%s %s, %s memory)", i, named,
             rp_dtype_name(in->dtype), rect, mem_name(in->mem));
  return buf;
}

static const char *proc_name(const dm_op *op, char *buf) {
  if (op->proc == RP_PROC_ANY)
    snprintf(buf, sizeof(label), "any CPU worker");
  else
    snprintf(buf, sizeof(label), "proc %u (%s)", op->proc,
             op->pkind == RP_PROC_GPU ? "gpu" : "cpu");
  return buf;
}

/* ---- stats ---- */

typedef struct proc_row {
  rp_proc proc;
  uint32_t ops, shards; /* task ops, and SPMD shards, placed there */
} proc_row;

static int cmp_row(const void *a, const void *b) {
  rp_proc x = ((const proc_row *)a)->proc, y = ((const proc_row *)b)->proc;
  return x < y ? -1 : x > y;
}

static void row_add(proc_row *rows, uint32_t *n, rp_proc p, int spmd,
                    uint32_t count) {
  uint32_t i = 0;
  while (i < *n && rows[i].proc != p)
    i++;
  if (i == *n)
    rows[(*n)++] = (proc_row){p, 0, 0};
  if (spmd)
    rows[i].shards += count;
  else
    rows[i].ops += count;
}

static const char *proc_of(const dm_graph *m, rp_proc p, char *buf) {
  dm_op tmp = {.proc = p,
               .pkind = p < m->nprocs && m->proc_kinds ? m->proc_kinds[p]
                                                       : RP_PROC_CPU};
  return proc_name(&tmp, buf);
}

/* Task ops (SPMD shards apart) per processor; copies have none. */
static int stats_procs(const dm_graph *m, FILE *out) {
  uint64_t cap = m->nops;
  for (uint32_t i = 0; i < m->nops; i++)
    cap += m->ops[i].shard_procs ? m->ops[i].shards : 0;
  proc_row *rows = calloc((size_t)cap + 1, sizeof *rows);
  if (!rows)
    return -1;
  uint32_t n = 0, copies = 0;
  for (uint32_t i = 0; i < m->nops; i++) {
    const dm_op *op = &m->ops[i];
    if (op->kind == RP_OP_COPY)
      copies++;
    else if (op->shards == 1)
      row_add(rows, &n, op->proc, 0, 1);
    else if (!op->shard_procs)
      row_add(rows, &n, RP_PROC_ANY, 1, op->shards);
    else
      for (uint32_t s = 0; s < op->shards; s++)
        row_add(rows, &n, op->shard_procs[s], 1, 1);
  }
  qsort(rows, n, sizeof *rows, cmp_row);
  fprintf(out, "by kind and processor:\n");
  for (uint32_t i = 0; i < n; i++) {
    label pn;
    fprintf(out, "  task  %-18s %u ops", proc_of(m, rows[i].proc, pn),
            rows[i].ops);
    if (rows[i].shards)
      fprintf(out, ", %u SPMD shards", rows[i].shards);
    fputc('\n', out);
  }
  if (copies)
    fprintf(out, "  copy  %-18s %u ops\n", "(no processor)", copies);
  free(rows);
  return 0;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int stats_tasks(const dm_graph *m, FILE *out) {
  const char **names = malloc(sizeof *names * (m->nops ? m->nops : 1));
  if (!names)
    return -1;
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->nops; i++)
    if (m->ops[i].kind == RP_OP_TASK)
      names[n++] = m->ops[i].name;
  qsort(names, n, sizeof *names, cmp_name);
  int wide = 24; /* the column: 24, or the longest name */
  for (uint32_t i = 0; i < n; i++)
    if ((int)strlen(names[i]) > wide)
      wide = (int)strlen(names[i]);
  fprintf(out, "by task:\n");
  for (uint32_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && !strcmp(names[j], names[i]); j++)
      ;
    fprintf(out, "  %-*s %u\n", wide, names[i], j - i);
  }
  free(names);
  return 0;
}

/* Writes the ops of the path ending at `end` (via best[]) in order. */
/* path: room for len ops. */
static void print_path(const dm_graph *m, const uint32_t *best, uint32_t end,
                       uint32_t len, uint32_t *path, FILE *out) {
  uint32_t k = len;
  for (uint32_t v = end; v != UINT32_MAX && k > 0; v = best[v])
    path[--k] = v;
  for (uint32_t i = k; i < len; i++) {
    if (i - k == 24 && len - k > 26) { /* keep the line readable */
      fprintf(out, " -> ... (%u more)", len - i - 1);
      i = len - 1;
    }
    fprintf(out, "%s%u", i > k ? " -> " : " ", path[i]);
  }
  (void)m;
  fputc('\n', out);
}

/* Longest path by op count (weight 1) or by cost hint (weight cost_ns).
 * Lengths are doubles, as --critical-path's (dump_crit.c): exact up to
 * 2^53 ns, and a path whose hints add up past 2^64 ns is still the
 * longest (a sum saturating at UINT64_MAX tied every path past it, and
 * the first op to reach it ended a path that stopped there). */
static int longest(const dg *d, int by_cost, FILE *out) {
  const dm_graph *m = d->m;
  double *dist = calloc(m->nops ? m->nops : 1, sizeof *dist);
  uint32_t *best = malloc(sizeof *best * (m->nops ? m->nops : 1));
  uint32_t *cnt = calloc(m->nops ? m->nops : 1, sizeof *cnt);
  uint32_t *path = malloc(sizeof *path * (m->nops ? m->nops : 1));
  if (!dist || !best || !cnt || !path) {
    free(dist), free(best), free(cnt), free(path);
    return -1;
  }
  uint32_t end = 0;
  for (uint32_t i = 0; i < m->nops; i++) {
    uint32_t v = d->order[i];
    best[v] = UINT32_MAX;
    double from = 0;
    for (uint32_t k = d->pred_off[v]; k < d->pred_off[v + 1]; k++)
      if (best[v] == UINT32_MAX || dist[d->pred[k]] > from)
        from = dist[d->pred[k]], best[v] = d->pred[k];
    dist[v] = from + (by_cost ? (double)m->ops[v].cost_ns : 1.0);
    cnt[v] = best[v] == UINT32_MAX ? 1 : cnt[best[v]] + 1;
    if (dist[v] > dist[end])
      end = v;
  }
  if (by_cost)
    fprintf(out, "critical path by cost hints: %.0f ns over %u ops:",
            m->nops ? dist[end] : 0.0, m->nops ? cnt[end] : 0);
  else
    fprintf(out, "critical path: %u ops:", m->nops ? cnt[end] : 0);
  if (m->nops)
    print_path(m, best, end, cnt[end], path, out);
  else
    fputc('\n', out);
  free(dist), free(best), free(cnt), free(path);
  return 0;
}

/* The widest ASAP level: ops at the same longest-path depth from a source
 * are pairwise unordered, so this is a lower bound on the largest
 * antichain (the exact width needs a bipartite matching). */
static int width(const dg *d, FILE *out) {
  const dm_graph *m = d->m;
  uint32_t *level = calloc(m->nops ? m->nops : 1, sizeof *level);
  uint32_t *count = calloc((size_t)m->nops + 1, sizeof *count);
  if (!level || !count) {
    free(level), free(count);
    return -1;
  }
  for (uint32_t i = 0; i < m->nops; i++) {
    uint32_t v = d->order[i];
    for (uint32_t k = d->pred_off[v]; k < d->pred_off[v + 1]; k++)
      if (level[d->pred[k]] + 1 > level[v])
        level[v] = level[d->pred[k]] + 1;
    count[level[v]]++;
  }
  uint32_t wide = 0;
  for (uint32_t l = 1; l < m->nops; l++)
    if (count[l] > count[wide])
      wide = l;
  fprintf(out, "width: %u at depth %u", m->nops ? count[wide] : 0, wide);
  uint32_t shown = 0;
  for (uint32_t v = 0; v < m->nops && shown < 16; v++)
    if (level[v] == wide)
      fprintf(out, "%s%u", shown++ ? ", " : ": ops ", v);
  fprintf(out,
          "%s (the widest topological level: ops at the same "
          "longest-path depth from a source are unordered, so this is a "
          "lower bound on the largest antichain)\n",
          m->nops && count[wide] > 16 ? ", ..." : "");
  free(level), free(count);
  return 0;
}

/* The successor of u other than v through which v is reachable, or
 * UINT32_MAX (also without reachability). */
static uint32_t implied_via(const dg *d, uint32_t u, uint32_t v) {
  for (uint32_t j = d->succ_off[u]; d->reach && j < d->succ_off[u + 1]; j++)
    if (d->succ[j] != v && reach_has(d, d->succ[j], v))
      return d->succ[j];
  return UINT32_MAX;
}

/* Edges capture inferred that a path already implies (for --stats). */
static uint32_t implied_inferred(const dg *d) {
  uint32_t n = 0;
  for (uint32_t u = 0; u < d->m->nops; u++)
    for (uint32_t k = d->succ_off[u]; k < d->succ_off[u + 1]; k++)
      n += d->succ_inf[k] && implied_via(d, u, d->succ[k]) != UINT32_MAX;
  return n;
}

int dm_stats(const dm_graph *m, FILE *out, FILE *err) {
  dg d;
  if (dg_build(&d, m, err))
    return -1;
  uint32_t tasks = 0, units = 0, hinted = 0;
  for (uint32_t i = 0; i < m->nops; i++) {
    tasks += m->ops[i].kind == RP_OP_TASK;
    units += m->ops[i].shards;
    hinted += m->ops[i].cost_ns != 0;
  }
  fprintf(out,
          "ops: %u (%u tasks, %u copies), %u units (SPMD shards "
          "counted one by one)\n",
          m->nops, tasks, m->nops - tasks, units);
  fprintf(out,
          "edges: %u, instances: %u, preconditions: %u, "
          "postconditions: %u\n",
          m->nedges, m->ninsts, m->npre, m->npost);
  uint32_t inferred = 0;
  for (uint32_t e = 0; e < m->nedges; e++)
    inferred += m->edges[e].inferred != 0;
  if (d.reach)
    fprintf(out,
            "inferred edges: %u (capture's, from conflicting accesses), %u "
            "of them implied by a path (harmless: instantiate keeps only "
            "the waits it needs; not lint findings)\n",
            inferred, implied_inferred(&d));
  else if (d.reach_oom) /* said, as dm_lint says its checks that could not
                           run */
    fprintf(out,
            "inferred edges: %u (capture's, from conflicting accesses); "
            "those a path implies not counted: out of memory for the "
            "reachability of %u ops\n",
            inferred, m->nops);
  else
    fprintf(out,
            "inferred edges: %u (capture's, from conflicting "
            "accesses)\n",
            inferred);
  int rc = stats_procs(m, out) || stats_tasks(m, out) || longest(&d, 0, out);
  if (!rc && hinted) {
    rc = longest(&d, 1, out);
    if (hinted < m->nops)
      fprintf(out, "  (%u of %u ops have no cost hint: counted as 0 ns)\n",
              m->nops - hinted, m->nops);
  } else if (!rc) {
    fprintf(out, "critical path by cost hints: none (no op has a cost "
                 "hint)\n");
  }
  rc = rc || width(&d, out);
  dg_free(&d);
  if (rc)
    fprintf(err, "out of memory\n");
  return rc ? -1 : 0;
}

/* ---- lint ---- */

enum {
  L_RUNAHEAD,
  L_CONTRACT,
  L_REDUNDANT,
  L_UNREAD,
  L_MERGE,
  L_RACE,
  L_INSTANTIATE,
  L_COUNT
};
static const char *const LINT_NAME[L_COUNT] = {
    "runahead",         "contract", "redundant-edge", "unread-result",
    "mergeable-copies", "race",     "instantiate"};

/* Lines shown per check (findings and "N more pairs" lines): a graph
 * with thousands of findings prints a screen, then "CHECK: ... (N more)";
 * the summary line counts them all. */
#define LINT_SHOWN_PER_CHECK 16u

typedef struct lint {
  const dg *d;
  const dm_graph *m;
  FILE *out;
  unsigned checks; /* DM_LINT_* bits that run (bit k: check k of LINT_NAME) */
  uint32_t count[L_COUNT];
  uint32_t lines[L_COUNT];  /* lines printed */
  uint32_t hidden[L_COUNT]; /* findings in no printed line */
} lint;

unsigned dm_lint_check(const char *name, size_t len) {
  for (int k = 0; k < L_COUNT; k++)
    if (strlen(LINT_NAME[k]) == len && !strncmp(LINT_NAME[k], name, len))
      return 1u << k;
  return 0;
}

const char *dm_lint_checks(void) {
  return "runahead, contract, redundant-edge, unread-result, "
         "mergeable-copies, race, instantiate";
}

/* A line of check kind that speaks for n findings: printed while the
 * check has printed fewer than LINT_SHOWN_PER_CHECK, else counted in
 * hidden (said by said_more). */
__attribute__((format(printf, 4, 0))) static void
say_line(lint *L, int kind, uint32_t n, const char *fmt, va_list ap) {
  if (L->lines[kind] >= LINT_SHOWN_PER_CHECK) {
    L->hidden[kind] += n;
    return;
  }
  L->lines[kind]++;
  fprintf(L->out, "%s: ", LINT_NAME[kind]);
  vfprintf(L->out, fmt, ap);
  fputc('\n', L->out);
}

__attribute__((format(printf, 3, 4))) static void
finding(lint *L, int kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_line(L, kind, 1, fmt, ap);
  va_end(ap);
  L->count[kind]++;
}

/* "N more pairs ... not shown" of one group (counted already). */
__attribute__((format(printf, 4, 5))) static void
more_pairs(lint *L, int kind, uint32_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_line(L, kind, n, fmt, ap);
  va_end(ap);
}

/* After a check: the findings no printed line speaks for. */
static void said_more(const lint *L, int kind) {
  if (L->hidden[kind])
    fprintf(L->out, "%s: ... (%u more)\n", LINT_NAME[kind], L->hidden[kind]);
}

/* ---- runahead and contract ---- */

static int device_stream_op(const dm_op *op) {
  return op->kind == RP_OP_TASK && op->contract_known &&
         (op->flags & RP_TASK_STREAM_ORDERED) && op->pkind == RP_PROC_GPU;
}

static int host_task(const dm_op *op) {
  return op->kind == RP_OP_TASK && op->contract_known &&
         !(op->flags & RP_TASK_STREAM_ORDERED);
}

static void lint_runahead(lint *L) {
  const dg *d = L->d;
  for (uint32_t h = 0; h < L->m->nops; h++) {
    if (!host_task(&L->m->ops[h]))
      continue;
    uint32_t p = UINT32_MAX, s = UINT32_MAX;
    for (uint32_t k = d->pred_off[h]; k < d->pred_off[h + 1] && p == UINT32_MAX;
         k++)
      if (device_stream_op(&L->m->ops[d->pred[k]]))
        p = d->pred[k];
    for (uint32_t k = d->succ_off[h]; k < d->succ_off[h + 1] && s == UINT32_MAX;
         k++)
      if (device_stream_op(&L->m->ops[d->succ[k]]))
        s = d->succ[k];
    if (p == UINT32_MAX || s == UINT32_MAX)
      continue;
    label a, b, c, pa, pb, pc;
    finding(L, L_RUNAHEAD,
            "%s, a HOST task on %s, sits between the device ops %s on %s "
            "and %s on %s: the host waits for op %u to finish on the device "
            "before it runs, so op %u cannot be issued ahead; make op %u "
            "STREAM_ORDERED (enqueue its work on the stream) or move it off "
            "this path",
            op_name(L->m, h, a), proc_name(&L->m->ops[h], pa),
            op_name(L->m, p, b), proc_name(&L->m->ops[p], pb),
            op_name(L->m, s, c), proc_name(&L->m->ops[s], pc), p, s, h);
  }
}

static void contract_op(lint *L, uint32_t i) {
  const dm_op *op = &L->m->ops[i];
  uint32_t gpu = UINT32_MAX, sys = UINT32_MAX, ndev = 0;
  for (uint32_t k = 0; k < op->nacc; k++) {
    uint32_t in = op->acc[k].inst;
    rp_mem_kind mk = in < L->m->ninsts ? L->m->insts[in].mem : RP_MEM_SYSTEM;
    if (mk == RP_MEM_GPU && ndev++ == 0)
      gpu = in;
    if (mk == RP_MEM_SYSTEM && sys == UINT32_MAX)
      sys = in;
  }
  label a, b, pn;
  if (!(op->flags & RP_TASK_STREAM_ORDERED) && gpu != UINT32_MAX) {
    if (op->pkind == RP_PROC_GPU && ndev == op->nacc)
      finding(L, L_CONTRACT,
              "%s is a HOST task on %s, but every instance it accesses is "
              "in device memory, which the host cannot address: it can only "
              "be enqueuing work on its stream; declare "
              "RP_TASK_STREAM_ORDERED so replays run ahead past it",
              op_name(L->m, i, a), proc_name(op, pn));
    else
      finding(L, L_CONTRACT,
              "%s is a HOST task on %s, but it accesses %s, which the host "
              "cannot address: copy it into pinned memory first, or do the "
              "work on that GPU as a STREAM_ORDERED task",
              op_name(L->m, i, a), proc_name(op, pn), inst_name(L->m, gpu, b));
  } else if ((op->flags & RP_TASK_STREAM_ORDERED) && op->pkind == RP_PROC_GPU &&
             sys != UINT32_MAX) {
    finding(L, L_CONTRACT,
            "%s is STREAM_ORDERED on %s, but it accesses %s (pageable host "
            "memory), which the device cannot reach from its stream: use "
            "pinned or device memory",
            op_name(L->m, i, a), proc_name(op, pn), inst_name(L->m, sys, b));
  }
}

static void lint_contract(lint *L) {
  for (uint32_t i = 0; i < L->m->nops; i++)
    if (L->m->ops[i].kind == RP_OP_TASK && L->m->ops[i].contract_known)
      contract_op(L, i);
}

/* ---- redundant edges ---- */

static void lint_redundant(lint *L) {
  const dg *d = L->d;
  for (uint32_t u = 0; u < L->m->nops; u++) {
    for (uint32_t k = d->succ_off[u]; k < d->succ_off[u + 1]; k++) {
      if (d->succ_inf[k]) /* capture's own: --stats counts those */
        continue;
      /* a graph holds an edge once (the builder merges a repeat, the
       * loader refuses one): no edge is given twice */
      uint32_t v = d->succ[k], via = implied_via(d, u, v);
      label a, b, c;
      if (via != UINT32_MAX)
        finding(L, L_REDUNDANT, "%s -> %s: implied by the path through %s",
                op_name(L->m, u, a), op_name(L->m, v, b),
                op_name(L->m, via, c));
    }
  }
}

/* ---- unread results ---- */

static int acc_reads(const dm_access *a) {
  return a->priv == RP_READ || a->priv == RP_RW;
}

static int acc_writes(const dm_access *a) {
  return a->priv == RP_WRITE || a->priv == RP_RW || a->priv == RP_REDUCE;
}

/* Reads, or folds into (REDUCE): what may observe an earlier write. */
static int acc_observes(const dm_access *a) {
  return acc_reads(a) || a->priv == RP_REDUCE;
}

/* 1 when op j observes what op o wrote into instance x: j reads x, or
 * only reduces into it but is ordered after o (its sum includes o's
 * result; reductions that commute with o do not). Without reachability
 * (huge graphs) a reduction counts. */
static int observes(const dg *d, uint32_t o, uint32_t j, uint32_t x) {
  const dm_op *op = &d->m->ops[j];
  for (uint32_t k = 0; k < op->nacc; k++)
    if (op->acc[k].inst == x && acc_reads(&op->acc[k]))
      return 1;
  return !d->reach || reach_has(d, o, j);
}

/* Per instance, the ops that read it (or write it): CSR. */
typedef struct inst_ops {
  uint32_t *off, *ops;
} inst_ops;

static int inst_ops_build(const dm_graph *m, int (*want)(const dm_access *),
                          inst_ops *io) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < m->nops; i++)
    n += m->ops[i].nacc;
  io->off = calloc((size_t)m->ninsts + 2, sizeof *io->off);
  io->ops = malloc(sizeof *io->ops * (n ? n : 1));
  if (!io->off || !io->ops)
    return -1;
  for (uint32_t i = 0; i < m->nops; i++)
    for (uint32_t k = 0; k < m->ops[i].nacc; k++)
      if (want(&m->ops[i].acc[k]) && m->ops[i].acc[k].inst < m->ninsts)
        io->off[m->ops[i].acc[k].inst + 2]++;
  for (uint32_t x = 0; x < m->ninsts; x++)
    io->off[x + 2] += io->off[x + 1];
  /* off[x + 1] is the fill cursor of instance x; it ends as x's end */
  for (uint32_t i = 0; i < m->nops; i++)
    for (uint32_t k = 0; k < m->ops[i].nacc; k++)
      if (want(&m->ops[i].acc[k]) && m->ops[i].acc[k].inst < m->ninsts)
        io->ops[io->off[m->ops[i].acc[k].inst + 1]++] = i;
  return 0;
}

static void inst_ops_free(inst_ops *io) {
  free(io->off);
  free(io->ops);
}

static int unread_eligible(const dm_op *op) {
  if (op->npost)
    return 0;
  for (uint32_t k = 0; k < op->nacc; k++)
    if (acc_writes(&op->acc[k]))
      return 1;
  return 0; /* writes nothing: its effect is outside the graph */
}

/* 1 when every other reader of every instance op o writes is unread. */
static int unread_now(const dg *d, const inst_ops *rd, const uint8_t *dead,
                      uint32_t o) {
  const dm_graph *m = d->m;
  const dm_op *op = &m->ops[o];
  for (uint32_t k = 0; k < op->nacc; k++) {
    uint32_t x = op->acc[k].inst;
    if (!acc_writes(&op->acc[k]) || x >= m->ninsts)
      continue;
    for (uint32_t j = rd->off[x]; j < rd->off[x + 1]; j++)
      if (rd->ops[j] != o && !dead[rd->ops[j]] && observes(d, o, rd->ops[j], x))
        return 0;
  }
  return 1;
}

/* The least fixpoint: an op dies once all other readers of what it
 * writes are dead; its death re-queues the writers of what it reads. */
static int unread_fixpoint(const dg *d, const inst_ops *rd, const inst_ops *wr,
                           uint8_t *dead) {
  const dm_graph *m = d->m;
  uint32_t *queue = malloc(sizeof *queue * (m->nops ? m->nops : 1));
  uint8_t *queued = calloc(m->nops ? m->nops : 1, 1);
  if (!queue || !queued) {
    free(queue), free(queued);
    return -1;
  }
  uint32_t head = 0, n = 0; /* a ring of at most nops entries */
  for (uint32_t i = 0; i < m->nops; i++)
    if (unread_eligible(&m->ops[i]))
      queue[n++ % m->nops] = i, queued[i] = 1;
  while (head < n) {
    uint32_t o = queue[head++ % m->nops];
    queued[o] = 0;
    if (dead[o] || !unread_now(d, rd, dead, o))
      continue;
    dead[o] = 1;
    for (uint32_t k = 0; k < m->ops[o].nacc; k++) {
      uint32_t x = m->ops[o].acc[k].inst;
      if (!acc_observes(&m->ops[o].acc[k]) || x >= m->ninsts)
        continue;
      for (uint32_t j = wr->off[x]; j < wr->off[x + 1]; j++) {
        uint32_t w = wr->ops[j];
        if (w != o && !dead[w] && !queued[w] && unread_eligible(&m->ops[w]))
          queue[n++ % m->nops] = w, queued[w] = 1;
      }
    }
  }
  free(queue), free(queued);
  return 0;
}

/* A bounded string that appends, truncating quietly. */
typedef struct sbuf {
  char b[768];
  size_t n;
} sbuf;

__attribute__((format(printf, 2, 3))) static void sb_add(sbuf *s,
                                                         const char *fmt, ...) {
  if (s->n + 1 >= sizeof s->b)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(s->b + s->n, sizeof s->b - s->n, fmt, ap);
  va_end(ap);
  if (w > 0)
    s->n = s->n + (size_t)w < sizeof s->b ? s->n + (size_t)w : sizeof s->b - 1;
}

/* For every instance dead op o writes: "no other op reads it" or "read
 * only by unread ops 5, 7". */
static void unread_report(lint *L, const inst_ops *rd, uint32_t o) {
  const dm_op *op = &L->m->ops[o];
  sbuf why = {.n = 0};
  why.b[0] = 0;
  for (uint32_t k = 0; k < op->nacc; k++) {
    uint32_t x = op->acc[k].inst;
    if (!acc_writes(&op->acc[k]) || x >= L->m->ninsts)
      continue;
    label in;
    sb_add(&why, "%s%s", why.n ? "; " : "", inst_name(L->m, x, in));
    uint32_t others = 0;
    for (uint32_t j = rd->off[x]; j < rd->off[x + 1]; j++)
      if (rd->ops[j] != o &&
          (j == rd->off[x] || rd->ops[j - 1] != rd->ops[j]) &&
          observes(L->d, o, rd->ops[j], x))
        sb_add(&why, "%s%u", others++ ? ", " : ", read only by unread ops ",
               rd->ops[j]);
    if (!others)
      sb_add(&why, ", which no other op reads");
  }
  label a;
  finding(L, L_UNREAD,
          "%s writes %s; no postcondition waits for it: its "
          "result is never observed inside the graph (remove the op, or "
          "bind it to a postcondition if the host reads the result after "
          "the replay)",
          op_name(L->m, o, a), why.b);
}

static int lint_unread(lint *L) {
  const dm_graph *m = L->m;
  inst_ops rd = {0}, wr = {0};
  uint8_t *dead = calloc(m->nops ? m->nops : 1, 1);
  int rc = !dead || inst_ops_build(m, acc_observes, &rd) ||
           inst_ops_build(m, acc_writes, &wr) ||
           unread_fixpoint(L->d, &rd, &wr, dead);
  for (uint32_t o = 0; !rc && o < m->nops; o++)
    if (dead[o])
      unread_report(L, &rd, o);
  inst_ops_free(&rd);
  inst_ops_free(&wr);
  free(dead);
  return rc ? -1 : 0;
}

/* ---- mergeable copies ---- */

typedef struct copy_key {
  uint32_t src, dst, op;
} copy_key;

static int cmp_copy(const void *a, const void *b) {
  const copy_key *x = a, *y = b;
  if (x->src != y->src)
    return x->src < y->src ? -1 : 1;
  if (x->dst != y->dst)
    return x->dst < y->dst ? -1 : 1;
  return x->op < y->op ? -1 : x->op > y->op;
}

static rp_rect rect_meet(const rp_rect *a, const rp_rect *b, int hull) {
  rp_rect r = {.dim = a->dim};
  for (int d = 0; d < a->dim; d++) {
    int lo_a = a->lo[d]<b->lo[d], hi_a = a->hi[d]> b->hi[d];
    r.lo[d] = hull == lo_a ? a->lo[d] : b->lo[d];
    r.hi[d] = hull == hi_a ? a->hi[d] : b->hi[d];
  }
  return r;
}

/* 1 when some op other than a and b is ordered between them. */
static int between(const dg *d, uint32_t a, uint32_t b) {
  if (reach_has(d, b, a)) {
    uint32_t t = a;
    a = b, b = t;
  }
  if (!reach_has(d, a, b))
    return 0;
  for (uint32_t k = d->succ_off[a]; k < d->succ_off[a + 1]; k++)
    if (d->succ[k] != b && reach_has(d, d->succ[k], b))
      return 1;
  return 0;
}

/* Findings shown per source and destination (all are counted). */
#define MERGES_SHOWN_PER_PAIR 8u

/* Says (show) or counts a mergeable pair a, b; 1 when they are one. */
static int merge_pair(lint *L, uint32_t a, uint32_t b, int show) {
  const dm_op *x = &L->m->ops[a], *y = &L->m->ops[b];
  if (x->acc[1].priv != y->acc[1].priv || x->acc[1].redop != y->acc[1].redop ||
      x->domain.dim != y->domain.dim || x->domain.dim < 1)
    return 0;
  rp_rect meet = rect_meet(&x->domain, &y->domain, 0);
  rp_rect hull = rect_meet(&x->domain, &y->domain, 1);
  /* rp_rect_volume: 0 when empty or too many points to count (the meet
   * lies inside x's domain, so it cannot overflow where va does not). */
  int64_t va = rp_rect_volume(&x->domain), vb = rp_rect_volume(&y->domain);
  int64_t vi = rp_rect_volume(&meet), vh = rp_rect_volume(&hull);
  int reduce = x->acc[1].priv == RP_REDUCE;
  if (va <= 0 || vb <= 0 || vh <= 0 || vh != va + vb - vi || (reduce && vi > 0))
    return 0; /* not one rectangle, or a sum would count points twice */
  if (!L->d->reach || between(L->d, a, b))
    return 0;
  if (!show) {
    L->count[L_MERGE]++;
    return 1;
  }
  char ra[RP_RECT_STR_MAX], rb[RP_RECT_STR_MAX], rh[RP_RECT_STR_MAX];
  rp_rect_str(&x->domain, ra, sizeof ra);
  rp_rect_str(&y->domain, rb, sizeof rb);
  rp_rect_str(&hull, rh, sizeof rh);
  const char *how = vi == va && vi == vb ? "the same points"
                    : vi                 ? "overlapping rectangles"
                                         : "adjacent rectangles";
  finding(L, L_MERGE,
          "ops %u and %u (copy instance %u -> instance %u%s) move %s and %s, "
          "%s: one copy over %s would do (one transfer and one hand-off "
          "fewer)",
          a, b, x->acc[0].inst, x->acc[1].inst, reduce ? ", sum" : "", ra, rb,
          how, rh);
  return 1;
}

static int lint_merge(lint *L) {
  const dm_graph *m = L->m;
  copy_key *keys = malloc(sizeof *keys * (m->nops ? m->nops : 1));
  if (!keys)
    return -1;
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->nops; i++)
    if (m->ops[i].kind == RP_OP_COPY && m->ops[i].nacc == 2)
      keys[n++] = (copy_key){m->ops[i].acc[0].inst, m->ops[i].acc[1].inst, i};
  qsort(keys, n, sizeof *keys, cmp_copy);
  for (uint32_t i = 0, j; i < n; i = j) {
    for (j = i;
         j < n && keys[j].src == keys[i].src && keys[j].dst == keys[i].dst; j++)
      ;
    /* every pair within a group (quadratic in its copies, as the race
     * check over their destination is) */
    uint32_t found = 0;
    for (uint32_t a = i; a < j; a++)
      for (uint32_t b = a + 1; b < j; b++)
        found += (uint32_t)merge_pair(L, keys[a].op, keys[b].op,
                                      found < MERGES_SHOWN_PER_PAIR);
    if (found > MERGES_SHOWN_PER_PAIR)
      more_pairs(L, L_MERGE, found - MERGES_SHOWN_PER_PAIR,
                 "%u more pairs of copies instance %u -> instance %u not "
                 "shown",
                 found - MERGES_SHOWN_PER_PAIR, keys[i].src, keys[i].dst);
  }
  free(keys);
  return 0;
}

/* ---- races ---- */

static int acc_any(const dm_access *a) {
  (void)a;
  return 1;
}

/* 1 when access p of op a and access q of op b (on one instance) may not
 * run at the same time. */
static int conflicts(const dm_graph *m, uint32_t a, const dm_access *p,
                     uint32_t b, const dm_access *q) {
  if (p->priv == RP_READ && q->priv == RP_READ)
    return 0;
  const dm_op *x = &m->ops[a], *y = &m->ops[b];
  if (p->priv == RP_REDUCE && q->priv == RP_REDUCE && p->redop == q->redop &&
      (x->kind == RP_OP_TASK) == (y->kind == RP_OP_TASK))
    return 0; /* they commute */
  if (x->kind == RP_OP_COPY && y->kind == RP_OP_COPY && x->domain.dim >= 1 &&
      x->domain.dim == y->domain.dim) {
    rp_rect meet = rect_meet(&x->domain, &y->domain, 0);
    for (int d = 0; d < meet.dim; d++)
      if (meet.lo[d] > meet.hi[d])
        return 0; /* their points do not meet */
  }
  return 1;
}

static const char *acc_word(const dm_op *op, const dm_access *a) {
  if (op->kind == RP_OP_COPY)
    return a->priv == RP_READ     ? "copies from"
           : a->priv == RP_REDUCE ? "sums into"
                                  : "copies into";
  return a->priv == RP_READ     ? "reads"
         : a->priv == RP_WRITE  ? "writes"
         : a->priv == RP_RW     ? "reads and writes"
         : a->priv == RP_REDUCE ? "reduces into"
                                : "accesses";
}

/* Findings shown per instance (all are counted). */
#define RACES_SHOWN_PER_INST 8u

static int lint_race(lint *L) {
  const dm_graph *m = L->m;
  if (!L->d->reach)
    return 0; /* not called so: dm_lint says the check could not run */
  inst_ops io = {0};
  if (inst_ops_build(m, acc_any, &io)) {
    inst_ops_free(&io);
    return -1;
  }
  /* io lists an instance's ops in increasing op order, an op once per
   * access: an op that accesses x twice sits in adjacent entries, so each
   * pair is taken once at the first entry of either op (no search) */
  for (uint32_t x = 0; x < m->ninsts; x++) {
    uint32_t shown = 0, lo = io.off[x], hi = io.off[x + 1];
    for (uint32_t i = lo; i < hi; i++) {
      if (i > lo && io.ops[i - 1] == io.ops[i])
        continue;
      for (uint32_t j = i + 1; j < hi; j++) {
        uint32_t a = io.ops[i], b = io.ops[j];
        if (a == b || io.ops[j - 1] == b || reach_has(L->d, a, b) ||
            reach_has(L->d, b, a))
          continue;
        const dm_op *oa = &m->ops[a], *ob = &m->ops[b];
        const dm_access *p = NULL, *q = NULL;
        for (uint32_t k = 0; k < oa->nacc && !q; k++)
          for (uint32_t l = 0; l < ob->nacc && !q; l++)
            if (oa->acc[k].inst == x && ob->acc[l].inst == x &&
                conflicts(m, a, &oa->acc[k], b, &ob->acc[l]))
              p = &oa->acc[k], q = &ob->acc[l];
        if (!q)
          continue;
        if (shown++ >= RACES_SHOWN_PER_INST) {
          L->count[L_RACE]++;
          continue;
        }
        label na, nb, ni;
        finding(L, L_RACE,
                "%s %s and %s %s %s with no path between them: they may run "
                "at the same time (order them with an edge)",
                op_name(m, a, na), acc_word(oa, p), op_name(m, b, nb),
                acc_word(ob, q), inst_name(m, x, ni));
      }
    }
    if (shown > RACES_SHOWN_PER_INST)
      more_pairs(L, L_RACE, shown - RACES_SHOWN_PER_INST,
                 "%u more pairs on instance %u not shown",
                 shown - RACES_SHOWN_PER_INST, x);
  }
  inst_ops_free(&io);
  return 0;
}

/* ---- the report ---- */

/* "a", "a and b", "a, b and c": the checks of bits that ran. */
static void say_checks(FILE *out, unsigned bits) {
  int n = 0, total = 0;
  for (int k = 0; k < L_COUNT; k++)
    total += !!(bits & 1u << k);
  for (int k = 0; k < L_COUNT; k++) {
    if (!(bits & 1u << k))
      continue;
    if (n++)
      fputs(n == total ? " and " : ", ", out);
    fputs(LINT_NAME[k], out);
  }
}

/* Notes about the checks that ran only. */
static void lint_notes(const lint *L) {
  uint32_t unknown = 0;
  for (uint32_t i = 0; i < L->m->nops; i++)
    unknown += L->m->ops[i].kind == RP_OP_TASK && !L->m->ops[i].contract_known;
  unsigned by_contract = L->checks & (DM_LINT_RUNAHEAD | DM_LINT_CONTRACT);
  if (unknown && by_contract) {
    fprintf(L->out,
            "note: %u ops run tasks whose contract is unknown "
            "(placeholders for names this build does not register): the ",
            unknown);
    say_checks(L->out, by_contract);
    int one = !(by_contract & (by_contract - 1));
    fprintf(L->out,
            " check%s skip%s them; declare contracts with "
            "--contract NAME=host|stream\n",
            one ? "" : "s", one ? "s" : "");
  }
  if (L->count[L_REDUNDANT])
    fprintf(L->out,
            "note: a redundant edge costs nothing at replay "
            "(instantiate keeps only the waits it needs); these were asked "
            "for (rp_graph_add_edge or a launch's wait): remove them. The "
            "edges capture infers, one per conflicting access, are not "
            "findings (--stats counts those a path implies)\n");
}

/* "a", "a and b", "a, b and c" into buf. */
static void checks_str(unsigned bits, char *buf, size_t cap) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f) {
    say_checks(f, bits);
    fclose(f);
  }
  snprintf(buf, cap, "%s", text ? text : "some checks");
  free(text);
}

/* Why reachability is missing: "40000 ops: reachability is built for at
 * most 32768". */
static void reach_why(const dg *d, char *buf, size_t cap) {
  if (d->reach_oom)
    snprintf(buf, cap, "out of memory for the reachability of %u ops",
             d->m->nops);
  else
    snprintf(buf, cap, "%u ops: reachability is built for at most %u",
             d->m->nops, DM_REACH_MAX_OPS);
}

int dm_lint(const dm_graph *m, unsigned checks, FILE *out, FILE *err,
            dm_lint_result *res) {
  memset(res, 0, sizeof *res);
  dg d;
  if (dg_build(&d, m, err))
    return -1;
  /* without reachability these cannot run: said, never passed as clean */
  unsigned unchecked =
      d.reach || !m->nops
          ? 0
          : checks & (DM_LINT_REDUNDANT | DM_LINT_MERGE | DM_LINT_RACE);
  char why[128] = "";
  if (unchecked) {
    char names[96];
    reach_why(&d, why, sizeof why);
    checks_str(unchecked, names, sizeof names);
    snprintf(res->why, sizeof res->why, "%s could not run (%s)", names, why);
  }
  res->unchecked = unchecked;
  checks &= ~unchecked;
  lint L = {.d = &d, .m = m, .out = out, .checks = checks};
  if ((checks & DM_LINT_INSTANTIATE) && m->refused)
    finding(&L, L_INSTANTIATE, "the graph cannot be instantiated: %s",
            m->refused);
  if (checks & DM_LINT_RUNAHEAD)
    lint_runahead(&L), said_more(&L, L_RUNAHEAD);
  if (checks & DM_LINT_CONTRACT)
    lint_contract(&L), said_more(&L, L_CONTRACT);
  if (checks & DM_LINT_REDUNDANT)
    lint_redundant(&L), said_more(&L, L_REDUNDANT);
  int rc = (checks & DM_LINT_UNREAD) && lint_unread(&L);
  if (!rc)
    said_more(&L, L_UNREAD);
  if (!rc && (checks & DM_LINT_MERGE) && !(rc = lint_merge(&L)))
    said_more(&L, L_MERGE);
  if (!rc && (checks & DM_LINT_RACE) && !(rc = lint_race(&L)))
    said_more(&L, L_RACE);
  if (!rc)
    lint_notes(&L);
  dg_free(&d);
  if (rc) {
    fprintf(err, "out of memory\n");
    return -1;
  }
  uint32_t total = 0;
  for (int k = 0; k < L_COUNT; k++)
    total += L.count[k];
  if (!total) {
    fprintf(out, "lint: no findings (%u ops, %u edges checked", m->nops,
            m->nedges);
  } else {
    fprintf(out, "lint: %u finding%s (", total, total == 1 ? "" : "s");
    for (int k = 0, n = 0; k < L_COUNT; k++)
      if (checks & 1u << k)
        fprintf(out, "%s%s %u", n++ ? ", " : "", LINT_NAME[k], L.count[k]);
  }
  unsigned left_out = DM_LINT_ALL & ~checks & ~unchecked;
  if (left_out) { /* say what was left out */
    fprintf(out, "; not checked:");
    for (int k = 0, n = 0; k < L_COUNT; k++)
      if (left_out & 1u << k)
        fprintf(out, "%s %s", n++ ? "," : "", LINT_NAME[k]);
  }
  if (unchecked) { /* and what could not run */
    fprintf(out, "; not checked (%s):", why);
    for (int k = 0, n = 0; k < L_COUNT; k++)
      if (unchecked & 1u << k)
        fprintf(out, "%s %s", n++ ? "," : "", LINT_NAME[k]);
  }
  fprintf(out, ")\n");
  res->findings = total;
  return 0;
}
