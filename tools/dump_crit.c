/* tools/dump_crit.c — the critical path (`reprise dump --critical-path`):
 * the longest path through the graph by cost, where an op's cost is its
 * measured mean duration (--trace FILE), else its cost hint, else 1 (the
 * path with the most ops). Listed op by op with each one's share of the
 * path's total, a long path first per group of names (where its time
 * goes, by layer); dump_view.c and dump_html.c highlight it. */
#include "dump_view.h"

#include "engine/util.h"

#include <stdlib.h>
#include <string.h>

/* Kahn's order of the ops into order[]; -1 on a cycle, -2 out of memory. */
static int topo(const dm_graph *m, const uint32_t *off, const uint32_t *adj,
                uint32_t *order) {
  uint32_t *indeg = calloc(m->nops ? m->nops : 1, sizeof *indeg);
  if (!indeg)
    return -2;
  uint32_t n = rp__topo_order(m->nops, off, adj, indeg, order);
  free(indeg);
  return n == m->nops ? 0 : -1;
}

static const char *basis_of(const dm_graph *m, const double *cost) {
  if (cost)
    return "measured durations";
  for (uint32_t i = 0; i < m->nops; i++)
    if (m->ops[i].cost_ns)
      return "cost hints";
  return "op count";
}

static double op_cost(const dm_graph *m, const double *cost, const char *basis,
                      uint32_t i) {
  if (cost)
    return cost[i];
  return basis[0] == 'c' ? (double)m->ops[i].cost_ns : 1.0;
}

/* dist/best over the order; the path ending at the farthest op. */
static int longest(const dm_graph *m, const double *cost, const uint32_t *poff,
                   const uint32_t *padj, const uint32_t *order, dv_crit *c) {
  size_t n = m->nops ? m->nops : 1;
  double *dist = malloc(sizeof *dist * n);
  uint32_t *best = malloc(sizeof *best * n);
  c->path = malloc(sizeof *c->path * n);
  if (!dist || !best || !c->path) {
    free(dist), free(best);
    return -1;
  }
  uint32_t end = UINT32_MAX;
  for (uint32_t k = 0; k < m->nops; k++) {
    uint32_t v = order[k];
    double from = 0;
    best[v] = UINT32_MAX;
    for (uint32_t j = poff[v]; j < poff[v + 1]; j++)
      if (best[v] == UINT32_MAX || dist[padj[j]] > from)
        from = dist[padj[j]], best[v] = padj[j];
    dist[v] = from + op_cost(m, cost, c->basis, v);
    if (end == UINT32_MAX || dist[v] > dist[end])
      end = v;
  }
  c->total_ns = end == UINT32_MAX ? 0 : dist[end];
  for (uint32_t v = end; v != UINT32_MAX; v = best[v])
    c->path[c->n++] = v;
  for (uint32_t i = 0; i < c->n / 2; i++) { /* first to last */
    uint32_t t = c->path[i];
    c->path[i] = c->path[c->n - 1 - i];
    c->path[c->n - 1 - i] = t;
  }
  free(dist), free(best);
  return 0;
}

int dv_crit_find(const dm_graph *m, const double *cost_ns, dv_crit *c,
                 FILE *err) {
  memset(c, 0, sizeof *c);
  c->basis = basis_of(m, cost_ns);
  size_t n = m->nops ? m->nops : 1;
  uint32_t *so = NULL, *sa = NULL, *po = NULL, *pa = NULL;
  uint32_t *order = malloc(sizeof *order * n);
  c->on = calloc(n, 1);
  c->next = malloc(sizeof *c->next * n);
  int rc = order && c->on && c->next && !dv_adj(m, 1, &so, &sa) &&
                   !dv_adj(m, 0, &po, &pa)
               ? 0
               : -1;
  if (rc)
    fprintf(err, "reprise dump: --critical-path: out of memory\n");
  else if ((rc = topo(m, so, sa, order)) != 0)
    fprintf(err, "reprise dump: --critical-path: %s\n",
            rc == -2 ? "out of memory" : "the graph has a cycle");
  else if ((rc = longest(m, cost_ns, po, pa, order, c)) != 0)
    fprintf(err, "reprise dump: --critical-path: out of memory\n");
  for (uint32_t i = 0; !rc && i < m->nops; i++)
    c->next[i] = UINT32_MAX;
  for (uint32_t i = 0; !rc && i < c->n; i++) {
    c->on[c->path[i]] = 1;
    if (i + 1 < c->n)
      c->next[c->path[i]] = c->path[i + 1];
  }
  free(order), free(so), free(sa), free(po), free(pa);
  if (rc)
    dv_crit_free(c);
  return rc ? -1 : 0;
}

void dv_crit_free(dv_crit *c) {
  free(c->path), free(c->on), free(c->next);
  memset(c, 0, sizeof *c);
}

/* A group of the path's ops (--critical-path's time per group). */
typedef struct crit_group {
  char key[RP_NAME_MAX + 1];
  double cost;
  uint32_t nops, first; /* first: its first op's place on the path */
} crit_group;

static int cmp_group_key(const void *a, const void *b) {
  const crit_group *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->first > y->first) - (x->first < y->first);
}

/* Largest cost first; ties in path order. */
static int cmp_group_cost(const void *a, const void *b) {
  const crit_group *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? 1 : -1;
  return (x->first > y->first) - (x->first < y->first);
}

/* The path's cost per group of `depth` name components, the largest
 * DV_CRIT_GROUPS first, then the rest in one line. */
static void print_groups(const dm_graph *m, const dv_crit *c,
                         const double *cost_ns, unsigned depth, FILE *out) {
  crit_group *g = malloc(sizeof *g * (c->n ? c->n : 1));
  if (!g) {
    fputs("  by group: not shown (out of memory)\n", out);
    return;
  }
  for (uint32_t i = 0; i < c->n; i++) {
    dv_group_key(m->ops[c->path[i]].label, depth, g[i].key, sizeof g[i].key);
    g[i].cost = op_cost(m, cost_ns, c->basis, c->path[i]);
    g[i].nops = 1, g[i].first = i;
  }
  qsort(g, c->n, sizeof *g, cmp_group_key);
  uint32_t n = 0;
  for (uint32_t i = 0; i < c->n; i++)
    if (n && !strcmp(g[n - 1].key, g[i].key))
      g[n - 1].cost += g[i].cost, g[n - 1].nops++;
    else
      g[n++] = g[i];
  qsort(g, n, sizeof *g, cmp_group_cost);
  int count = c->basis[0] == 'o';
  uint32_t shown = n < DV_CRIT_GROUPS ? n : DV_CRIT_GROUPS;
  fprintf(out, "  by group (%u name component%s; %u group%s%s):\n", depth,
          depth == 1 ? "" : "s", n, n == 1 ? "" : "s",
          shown < n ? ", the largest first" : "");
  double share = c->total_ns > 0 ? 100.0 / c->total_ns : 0.0, rest = 0;
  uint32_t rest_ops = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i >= shown) {
      rest += g[i].cost, rest_ops += g[i].nops;
      continue;
    }
    fprintf(out, "    group '%s': %u op%s", g[i].key, g[i].nops,
            g[i].nops == 1 ? "" : "s");
    if (!count)
      fprintf(out, ", %.0f ns, %.1f%%", g[i].cost, g[i].cost * share);
    fputc('\n', out);
  }
  if (shown < n) {
    fprintf(out, "    ... (%u more groups: %u ops", n - shown, rest_ops);
    if (!count)
      fprintf(out, ", %.0f ns, %.1f%%", rest, rest * share);
    fputs(")\n", out);
  }
  free(g);
}

int dv_crit_print(const dm_graph *m, const dv_crit *c, const double *cost_ns,
                  unsigned depth, FILE *out) {
  int count = c->basis[0] == 'o';
  if (count)
    fprintf(out,
            "critical path by op count (no cost hints; --trace FILE "
            "measures): %u ops\n",
            c->n);
  else
    fprintf(out, "critical path by %s: %.0f ns over %u ops\n", c->basis,
            c->total_ns, c->n);
  if (c->n > DV_CRIT_LISTED) {
    print_groups(m, c, cost_ns, depth ? depth : 1, out);
    fputs("  its ops in order:\n", out);
  }
  for (uint32_t i = 0; i < c->n; i++) {
    uint32_t v = c->path[i];
    const dm_op *op = &m->ops[v];
    double cost = op_cost(m, cost_ns, c->basis, v);
    fprintf(out, "  op %u%s%s%s %s", v, op->label[0] ? " '" : "", op->label,
            op->label[0] ? "'" : "", op->name);
    if (!count)
      fprintf(out, "  %.0f ns  %.1f%%", cost,
              c->total_ns > 0 ? 100.0 * cost / c->total_ns : 0.0);
    fputc('\n', out);
  }
  return ferror(out) ? -1 : 0;
}
