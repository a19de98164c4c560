/* tools/dump_view.c — ops grouped by dotted name prefix and the
 * neighbourhood of an op or group (`reprise dump --group/--focus`), in
 * text, DOT and JSON. A group is every op whose name starts with the same
 * first DEPTH dotted components ("h3.attn.qkv" is in "h3.attn" at depth 2
 * and in "h3" at depth 1), shard suffixes not counted ("h3.attn.qkv.s1"
 * and "h3.attn.qkv.s2" are both in "h3.attn.qkv" at any depth past 2, a
 * group of 2 shards); edges between groups are aggregated with their
 * count. Nodes are ordered by their first op, so a step reads in order. */
#include "dump_view.h"

#include "engine/util.h"

#include <stdlib.h>
#include <string.h>

int dv_shard_component(const char *c, size_t n) {
  if (n < 2 || (c[0] != 's' && c[0] != 't'))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (c[i] < '0' || c[i] > '9')
      return 0;
  return 1;
}

/* Walks label's components; the kept ones (not shard suffixes: every
 * component but the first that dv_shard_component calls one) up to depth
 * into key, the others into shard (either may be NULL). */
static void split_name(const char *label, unsigned depth, char *key,
                       size_t kcap, char *shard, size_t scap) {
  size_t kn = 0, sn = 0;
  unsigned kept = 0;
  if (key)
    key[0] = 0;
  if (shard)
    shard[0] = 0;
  for (const char *p = label;; p += strcspn(p, ".") + 1) {
    size_t n = strcspn(p, ".");
    int fold = p != label && dv_shard_component(p, n);
    if (fold && shard && sn + n + 1 < scap) {
      sn += (size_t)snprintf(shard + sn, scap - sn, ".%.*s", (int)n, p);
    } else if (!fold && kept < depth) {
      if (key && kn + n + (kept > 0) < kcap)
        kn += (size_t)snprintf(key + kn, kcap - kn, "%s%.*s", kept ? "." : "",
                               (int)n, p);
      kept++;
    }
    if (!p[n])
      break;
  }
}

void dv_shard_suffix(const char *label, char *buf, size_t cap) {
  split_name(label, 0, NULL, 0, buf, cap);
}

void dv_group_key(const char *label, unsigned depth, char *buf, size_t cap) {
  if (!label[0]) {
    snprintf(buf, cap, "%s", DV_UNNAMED);
    return;
  }
  split_name(label, depth, buf, cap, NULL, 0);
}

int dv_adj(const dm_graph *m, int fwd, uint32_t **off, uint32_t **adj) {
  *off = calloc((size_t)m->nops + 1, sizeof **off);
  *adj = malloc(sizeof **adj * (m->nedges ? m->nedges : 1));
  if (!*off || !*adj) {
    free(*off), free(*adj);
    *off = *adj = NULL;
    return -1;
  }
  for (uint32_t e = 0; e < m->nedges; e++)
    (*off)[(fwd ? m->edges[e].from : m->edges[e].to) + 1]++;
  for (uint32_t i = 0; i < m->nops; i++)
    (*off)[i + 1] += (*off)[i];
  uint32_t *fill = malloc(sizeof *fill * (m->nops ? m->nops : 1));
  if (!fill) {
    free(*off), free(*adj);
    *off = *adj = NULL;
    return -1;
  }
  memcpy(fill, *off, sizeof *fill * m->nops);
  for (uint32_t e = 0; e < m->nedges; e++) {
    const dm_edge *d = &m->edges[e];
    (*adj)[fill[fwd ? d->from : d->to]++] = fwd ? d->to : d->from;
  }
  free(fill);
  return 0;
}

/* Bytes dv_json_str writes as they are: not "</" (it could end the html
 * page's <script>) nor "<!" (a "<!--" followed by "<script" would let the
 * next "</script>" end no script). */
static int plain(unsigned char c, unsigned char next) {
  return c >= 0x20 && c != '"' && c != '\\' &&
         !(c == '<' && (next == '/' || next == '!'));
}

void dv_json_str(FILE *out, const char *s) {
  while (*s) {
    size_t n = 0;
    while (s[n] && plain((unsigned char)s[n], (unsigned char)s[n + 1]))
      n++;
    fwrite(s, 1, n, out); /* runs, not bytes: the page's SVGs are MBs */
    s += n;
    unsigned char c = (unsigned char)*s;
    if (!c)
      break;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c == '<' && s[1] == '/') /* "</script>" ends no script */
      fputs("<\\/", out), s++;
    else
      fprintf(out, "\\u%04x", c);
    s++;
  }
}

/* ---- building ---- */

typedef struct item {
  uint32_t op;
  char key[RP_NAME_MAX + 1];
} item;

static int cmp_item(const void *a, const void *b) {
  const item *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->op > y->op) - (x->op < y->op);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static dv_node op_node(const dm_graph *m, uint32_t op) {
  dv_node n = {.op = op, .first = op, .nops = 1, .shards = 1};
  snprintf(n.name, sizeof n.name, "%s", m->ops[op].label);
  n.ntasks = m->ops[op].kind == RP_OP_TASK;
  n.ncopies = !n.ntasks;
  return n;
}

/* The nodes of the sorted items: per bucket of one key a group, or op
 * nodes (see dv_opts). node.first is the bucket's first item for now. */
static uint32_t make_nodes(const dm_graph *m, const dv_opts *o, item *it,
                           uint32_t n, dv_node *nodes, uint32_t *start) {
  uint32_t nn = 0;
  for (uint32_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && !strcmp(it[j].key, it[i].key); j++)
      ;
    const char *label = m->ops[it[i].op].label;
    char full[RP_NAME_MAX + 1]; /* the op's name, shard suffixes left out */
    dv_group_key(label, DV_MAX_DEPTH, full, sizeof full);
    int single = j - i == 1 &&
                 (o->single_as_op || (label[0] && !strcmp(full, it[i].key)));
    int stuck = o->parent && !strcmp(o->parent, it[i].key);
    if (!o->depth || single || stuck) {
      for (uint32_t k = i; k < j; k++, nn++) {
        nodes[nn] = op_node(m, it[k].op);
        start[nn] = k;
      }
      continue;
    }
    dv_node g = {
        .op = UINT32_MAX, .first = it[i].op, .nops = j - i, .shards = 1};
    snprintf(g.name, sizeof g.name, "%s", it[i].key);
    for (uint32_t k = i; k < j; k++)
      g.ntasks += m->ops[it[k].op].kind == RP_OP_TASK;
    g.ncopies = g.nops - g.ntasks;
    start[nn] = i;
    nodes[nn++] = g;
  }
  return nn;
}

/* Members in node order (nodes sorted by first op) and node_of. */
static void place_members(const dm_graph *m, const dv_opts *o, dv_view *v,
                          const item *it, const uint32_t *start) {
  uint32_t at = 0;
  for (uint32_t k = 0; k < v->nnodes; k++) {
    dv_node *nd = &v->nodes[k];
    uint32_t s = start[k];
    for (uint32_t i = 0; i < nd->nops; i++) {
      uint32_t op = it[s + i].op;
      v->members[at + i] = op;
      v->node_of[op] = k;
      nd->cost_ns += o->cost_ns ? o->cost_ns[op] : (double)m->ops[op].cost_ns;
      nd->crit |= o->crit && o->crit->on[op];
    }
    nd->first = at;
    at += nd->nops;
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each group's shards: the different shard suffixes of its ops' names
 * ("embed.s0" .. "embed.s7": 8; a name without one counts as one). 0 ok,
 * -1 out of memory. */
static int count_shards(const dm_graph *m, dv_view *v) {
  uint32_t n = v->nmembers ? v->nmembers : 1;
  char(*sfx)[RP_NAME_MAX + 1] = malloc(sizeof *sfx * n);
  char **p = malloc(sizeof *p * n);
  if (!sfx || !p) {
    free(sfx), free(p);
    return -1;
  }
  for (uint32_t k = 0; k < v->nnodes; k++) {
    dv_node *nd = &v->nodes[k];
    if (nd->op != UINT32_MAX || nd->nops < 2)
      continue;
    for (uint32_t i = 0; i < nd->nops; i++) {
      p[i] = sfx[i];
      dv_shard_suffix(m->ops[v->members[nd->first + i]].label, sfx[i],
                      sizeof sfx[i]);
    }
    qsort(p, nd->nops, sizeof *p, cmp_str);
    nd->shards = 1;
    for (uint32_t i = 1; i < nd->nops; i++)
      nd->shards += strcmp(p[i - 1], p[i]) != 0;
  }
  free(sfx), free(p);
  return 0;
}

typedef struct pair {
  uint32_t from, to;
  int crit;
} pair;

static int cmp_pair(const void *a, const void *b) {
  const pair *x = a, *y = b;
  if (x->from != y->from)
    return x->from < y->from ? -1 : 1;
  return (x->to > y->to) - (x->to < y->to);
}

static int make_edges(const dm_graph *m, const dv_opts *o, dv_view *v) {
  pair *p = malloc(sizeof *p * (m->nedges ? m->nedges : 1));
  v->edges = malloc(sizeof *v->edges * (m->nedges ? m->nedges : 1));
  if (!p || !v->edges) {
    free(p);
    return -1;
  }
  uint32_t np = 0;
  for (uint32_t e = 0; e < m->nedges; e++) {
    uint32_t a = m->edges[e].from, b = m->edges[e].to;
    uint32_t na = v->node_of[a], nb = v->node_of[b];
    if (na == UINT32_MAX || nb == UINT32_MAX || na == nb)
      continue;
    int crit = o->crit && o->crit->on[a] && o->crit->next[a] == b;
    p[np++] = (pair){na, nb, crit};
  }
  qsort(p, np, sizeof *p, cmp_pair);
  for (uint32_t i = 0; i < np; i++) {
    dv_vedge *last = v->nedges ? &v->edges[v->nedges - 1] : NULL;
    if (last && last->from == p[i].from && last->to == p[i].to) {
      last->count++;
      last->crit |= p[i].crit;
    } else {
      v->edges[v->nedges++] = (dv_vedge){p[i].from, p[i].to, 1, p[i].crit};
    }
  }
  free(p);
  return 0;
}

/* Nodes in the order of their first op (start[] follows them). */
static int order_nodes(dv_view *v, uint32_t *start) {
  uint32_t n = v->nnodes ? v->nnodes : 1;
  uint64_t *ord = malloc(sizeof *ord * n);
  dv_node *sorted = malloc(sizeof *sorted * n);
  uint32_t *st = malloc(sizeof *st * n);
  int rc = ord && sorted && st ? 0 : -1;
  for (uint32_t k = 0; !rc && k < v->nnodes; k++)
    ord[k] = (uint64_t)v->nodes[k].first << 32 | k;
  if (!rc) {
    qsort(ord, v->nnodes, sizeof *ord, cmp_u64);
    for (uint32_t k = 0; k < v->nnodes; k++) {
      sorted[k] = v->nodes[(uint32_t)ord[k]];
      st[k] = start[(uint32_t)ord[k]];
    }
    memcpy(v->nodes, sorted, sizeof *sorted * v->nnodes);
    memcpy(start, st, sizeof *st * v->nnodes);
  }
  free(ord), free(sorted), free(st);
  return rc;
}

int dv_build(const dm_graph *m, const dv_opts *o, dv_view *v, FILE *err) {
  memset(v, 0, sizeof *v);
  uint32_t n = o->ops ? o->nops : m->nops;
  item *it = malloc(sizeof *it * (n ? n : 1));
  uint32_t *start = malloc(sizeof *start * (n ? n : 1));
  v->nodes = calloc(n ? n : 1, sizeof *v->nodes);
  v->members = malloc(sizeof *v->members * (n ? n : 1));
  v->node_of = malloc(sizeof *v->node_of * (m->nops ? m->nops : 1));
  int rc = it && start && v->nodes && v->members && v->node_of ? 0 : -1;
  if (!rc) {
    for (uint32_t i = 0; i < m->nops; i++)
      v->node_of[i] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
      it[i].op = o->ops ? o->ops[i] : i;
      dv_group_key(m->ops[it[i].op].label, o->depth ? o->depth : DV_MAX_DEPTH,
                   it[i].key, sizeof it[i].key);
    }
    qsort(it, n, sizeof *it, cmp_item);
    v->nnodes = make_nodes(m, o, it, n, v->nodes, start);
    v->nmembers = n;
    rc = order_nodes(v, start);
  }
  if (!rc) {
    place_members(m, o, v, it, start);
    rc = count_shards(m, v);
  }
  if (!rc) {
    rc = make_edges(m, o, v);
  }
  free(it), free(start);
  if (rc) {
    fprintf(err, "reprise dump: out of memory building the view\n");
    dv_free(v);
  }
  return rc;
}

void dv_free(dv_view *v) {
  free(v->nodes), free(v->members), free(v->node_of), free(v->edges);
  memset(v, 0, sizeof *v);
}

/* ---- focus ---- */

/* 1 when op i is `name`: its name, inside the group `name`, "op N", or
 * unnamed and name is the unnamed ops' group (DV_UNNAMED). */
static int matches(const dm_graph *m, uint32_t i, const char *name, size_t n) {
  const char *l = m->ops[i].label;
  if (!l[0] && !strcmp(name, DV_UNNAMED))
    return 1;
  if (!strncmp(l, name, n) && (l[n] == 0 || l[n] == '.'))
    return 1;
  char full[RP_NAME_MAX + 1]; /* a group's name: shard suffixes left out */
  dv_group_key(l, DV_MAX_DEPTH, full, sizeof full);
  if (l[0] && !strncmp(full, name, n) && (full[n] == 0 || full[n] == '.'))
    return 1;
  char buf[24];
  snprintf(buf, sizeof buf, "op %u", i);
  return !strcmp(buf, name);
}

/* Breadth-first from the marked ops (dist 0) along adj, up to depth. */
static void spread(const dm_graph *m, const uint32_t *off, const uint32_t *adj,
                   unsigned depth, uint32_t *dist, uint32_t *queue) {
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < m->nops; i++)
    if (dist[i] == 0)
      queue[tail++] = i;
  while (head < tail) {
    uint32_t u = queue[head++];
    if (dist[u] >= depth)
      continue;
    for (uint32_t k = off[u]; k < off[u + 1]; k++)
      if (dist[adj[k]] == UINT32_MAX) {
        dist[adj[k]] = dist[u] + 1;
        queue[tail++] = adj[k];
      }
  }
}

uint32_t dv_focus(const dm_graph *m, const char *name, unsigned depth,
                  uint32_t **ops) {
  size_t len = strlen(name), n = m->nops ? m->nops : 1;
  uint32_t *fwd = malloc(sizeof *fwd * n), *bwd = malloc(sizeof *bwd * n);
  uint32_t *q = malloc(sizeof *q * n);
  uint32_t *so = NULL, *sa = NULL, *po = NULL, *pa = NULL, hits = 0, cnt = 0;
  *ops = NULL;
  if (fwd && bwd && q && !dv_adj(m, 1, &so, &sa) && !dv_adj(m, 0, &po, &pa)) {
    for (uint32_t i = 0; i < m->nops; i++) {
      fwd[i] = bwd[i] = matches(m, i, name, len) ? 0 : UINT32_MAX;
      hits += fwd[i] == 0;
    }
    spread(m, so, sa, depth, fwd, q);
    spread(m, po, pa, depth, bwd, q);
    for (uint32_t i = 0; hits && i < m->nops; i++)
      if (fwd[i] != UINT32_MAX || bwd[i] != UINT32_MAX)
        q[cnt++] = i;
    if (hits)
      *ops = q, q = NULL;
  } else {
    cnt = UINT32_MAX;
  }
  free(fwd), free(bwd), free(q), free(so), free(sa), free(po), free(pa);
  return cnt;
}

/* ---- writing ---- */

static const char *proc_str(const dm_op *op, char *buf, size_t cap) {
  if (op->kind == RP_OP_COPY || op->proc == RP_PROC_ANY)
    snprintf(buf, cap, "any");
  else
    snprintf(buf, cap, "%u", op->proc);
  return buf;
}

static void text_node(const dm_graph *m, const dv_view *v, uint32_t k,
                      FILE *out) {
  const dv_node *n = &v->nodes[k];
  char p[16];
  if (n->op != UINT32_MAX)
    fprintf(out, "op %u%s%s%s: %s proc %s", n->op, n->name[0] ? " '" : "",
            n->name, n->name[0] ? "'" : "", m->ops[n->op].name,
            proc_str(&m->ops[n->op], p, sizeof p));
  else
    fprintf(out, "group '%s': %u ops (%u tasks, %u copies)", n->name, n->nops,
            n->ntasks, n->ncopies);
  if (n->shards > 1)
    fprintf(out, ", %u shards", n->shards);
  if (n->cost_ns > 0)
    fprintf(out, ", cost %.0f ns", n->cost_ns);
  fprintf(out, "%s\n", n->crit ? " [critical path]" : "");
}

static void text_ref(const dv_view *v, uint32_t k, FILE *out) {
  const dv_node *n = &v->nodes[k];
  if (n->op != UINT32_MAX)
    fprintf(out, "op %u%s%s%s", n->op, n->name[0] ? " '" : "", n->name,
            n->name[0] ? "'" : ""); /* unnamed: "op 4", as the dump */
  else
    fprintf(out, "group '%s'", n->name);
}

static void write_text(const dm_graph *m, const dv_view *v, const char *what,
                       FILE *out) {
  uint32_t groups = 0;
  for (uint32_t k = 0; k < v->nnodes; k++)
    groups += v->nodes[k].op == UINT32_MAX;
  fprintf(out, "view: %s: %u nodes (%u groups, %u ops), %u edges\n", what,
          v->nnodes, groups, v->nnodes - groups, v->nedges);
  uint32_t e = 0;
  for (uint32_t k = 0; k < v->nnodes; k++) {
    text_node(m, v, k, out);
    for (; e < v->nedges && v->edges[e].from == k; e++) {
      fprintf(out, "  -> ");
      text_ref(v, v->edges[e].to, out);
      if (v->edges[e].count > 1)
        fprintf(out, " (%u edges)", v->edges[e].count);
      fprintf(out, "%s\n", v->edges[e].crit ? " [critical path]" : "");
    }
  }
}

const char *dv_node_label(const dm_graph *m, const dv_node *n) {
  return n->name[0] ? n->name : n->op != UINT32_MAX ? m->ops[n->op].name : "''";
}

static void write_dot(const dm_graph *m, const dv_view *v, const char *what,
                      FILE *out) {
  fprintf(out, "digraph reprise_view {\n  label=\"");
  dv_json_str(out, what);
  fprintf(out, "\";\n  node [shape=box, style=\"rounded,filled\", "
               "fillcolor=\"#eef3fb\", fontname=\"Helvetica\", "
               "fontsize=10];\n");
  if (rp__dot_large(v->nnodes, v->nedges))
    fprintf(out, "  graph [" RP_DOT_BOUNDED "];\n");
  for (uint32_t k = 0; k < v->nnodes; k++) {
    const dv_node *n = &v->nodes[k];
    fprintf(out, "  n%u [label=\"", k);
    dv_json_str(out, dv_node_label(m, n));
    if (n->op != UINT32_MAX)
      fprintf(out, "\\nop %u %s\"", n->op, m->ops[n->op].name);
    else {
      fprintf(out, "\\n%u ops (%u tasks, %u copies)", n->nops, n->ntasks,
              n->ncopies);
      if (n->shards > 1)
        fprintf(out, ", %u shards", n->shards);
      fprintf(out, "\", shape=box3d, fillcolor=\"#dde8f7\"");
    }
    fprintf(out, "%s];\n", n->crit ? ", color=\"#d62728\", penwidth=2.5" : "");
  }
  for (uint32_t e = 0; e < v->nedges; e++) {
    const dv_vedge *d = &v->edges[e];
    fprintf(out, "  n%u -> n%u", d->from, d->to);
    if (d->count > 1 || d->crit)
      fprintf(out, " [");
    if (d->count > 1)
      fprintf(out, "label=\"%u\"%s", d->count, d->crit ? ", " : "");
    if (d->crit)
      fprintf(out, "color=\"#d62728\", penwidth=2.5");
    fprintf(out, "%s;\n", d->count > 1 || d->crit ? "]" : "");
  }
  fprintf(out, "}\n");
}

static void write_json(const dm_graph *m, const dv_view *v, const char *what,
                       FILE *out) {
  fprintf(out, "{\"view\": \"");
  dv_json_str(out, what);
  fprintf(out, "\",\n \"nodes\": [");
  for (uint32_t k = 0; k < v->nnodes; k++) {
    const dv_node *n = &v->nodes[k];
    fprintf(out, "%s\n  {\"id\": %u, \"name\": \"", k ? "," : "", k);
    dv_json_str(out, n->name);
    if (n->op != UINT32_MAX)
      fprintf(out, "\", \"op\": %u, \"task\": \"%s\"", n->op,
              m->ops[n->op].name);
    else
      fprintf(out, "\", \"group\": true");
    fprintf(out,
            ", \"ops\": %u, \"tasks\": %u, \"copies\": %u, \"shards\": %u, "
            "\"cost_ns\": %.0f, \"critical\": %s}",
            n->nops, n->ntasks, n->ncopies, n->shards, n->cost_ns,
            n->crit ? "true" : "false");
  }
  fprintf(out, "],\n \"edges\": [");
  for (uint32_t e = 0; e < v->nedges; e++)
    fprintf(out,
            "%s\n  {\"from\": %u, \"to\": %u, \"count\": %u, "
            "\"critical\": %s}",
            e ? "," : "", v->edges[e].from, v->edges[e].to, v->edges[e].count,
            v->edges[e].crit ? "true" : "false");
  fprintf(out, "]}\n");
}

int dv_write(const dm_graph *m, const dv_view *v, rp_dump_format fmt,
             const char *what, FILE *out) {
  if (fmt == RP_DUMP_DOT)
    write_dot(m, v, what, out);
  else if (fmt == RP_DUMP_JSON)
    write_json(m, v, what, out);
  else
    write_text(m, v, what, out);
  return ferror(out) ? -1 : 0;
}
