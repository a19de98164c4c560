/* tools/dump_diff.c — `reprise dump A.json --diff B.json`: what B adds,
 * removes or changes against A. Ops are matched by name (the k-th op of a
 * name in A with the k-th in B), then the rest by structure (kind, task,
 * processor and accesses, in order); instances by name, then by memory,
 * type and rectangle; edges through the op matching; ports by name. One
 * line per difference ("+", "-", "~"), DIFF_SHOWN of each kind (ops,
 * edges, instances, ports) and then "... (N more)" (ops: and their count
 * per group of names), then a summary line that counts them all. */
#include "dump_view.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct key {
  char *s;
  uint32_t idx;
} key;

static int cmp_key(const void *a, const void *b) {
  const key *x = a, *y = b;
  int c = strcmp(x->s, y->s);
  return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Matches the keys of unmatched items (s != NULL) by equal strings, in
 * order: ma[i] = j, mb[j] = i. */
static void match(key *ka, uint32_t na, key *kb, uint32_t nb, uint32_t *ma,
                  uint32_t *mb) {
  qsort(ka, na, sizeof *ka, cmp_key);
  qsort(kb, nb, sizeof *kb, cmp_key);
  for (uint32_t i = 0, j = 0; i < na && j < nb;) {
    int c = strcmp(ka[i].s, kb[j].s);
    if (c < 0) {
      i++;
    } else if (c > 0) {
      j++;
    } else {
      ma[ka[i].idx] = kb[j].idx;
      mb[kb[j].idx] = ka[i].idx;
      i++, j++;
    }
  }
}

static void keys_free(key *k, uint32_t n) {
  for (uint32_t i = 0; k && i < n; i++)
    free(k[i].s);
  free(k);
}

static void rect_str(const rp_rect *r, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int d = 0; d < r->dim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld..%lld", d ? ", " : "",
                          (long long)r->lo[d], (long long)r->hi[d]);
  if (n < cap)
    snprintf(buf + n, cap - n, "]");
}

static int rect_eq(const rp_rect *a, const rp_rect *b) {
  int same = a->dim == b->dim;
  for (int k = 0; same && k < a->dim && k < RP_MAX_DIM; k++)
    same = a->lo[k] == b->lo[k] && a->hi[k] == b->hi[k];
  return same;
}

static const char *priv_str(rp_privilege p) {
  static const char *const s[] = {"none", "R", "W", "RW", "reduce"};
  return (unsigned)p < 5 ? s[p] : "?";
}

/* ---- instances ---- */

static char *inst_sig(const dm_inst *in, int with_name) {
  char r[256], *s = NULL;
  rect_str(&in->rect, r, sizeof r);
  if (asprintf(&s, "%s|%d|%d|%s|%s", with_name ? in->name : "", (int)in->mem,
               in->device, rp_dtype_name(in->dtype), r) < 0)
    return NULL;
  return s;
}

/* Two passes: named by "name#k", then the rest by their signature. */
static int match_pass(uint32_t na, uint32_t nb, uint32_t *ma, uint32_t *mb,
                      char *(*sig)(const void *, uint32_t, int), const void *a,
                      const void *b, int pass) {
  key *ka = calloc(na ? na : 1, sizeof *ka),
      *kb = calloc(nb ? nb : 1, sizeof *kb);
  uint32_t ia = 0, ib = 0;
  int rc = ka && kb ? 0 : -1;
  for (uint32_t i = 0; !rc && i < na; i++)
    if (ma[i] == UINT32_MAX && (ka[ia].s = sig(a, i, pass)) != NULL)
      ka[ia++].idx = i;
  for (uint32_t j = 0; !rc && j < nb; j++)
    if (mb[j] == UINT32_MAX && (kb[ib].s = sig(b, j, pass)) != NULL)
      kb[ib++].idx = j;
  if (!rc)
    match(ka, ia, kb, ib, ma, mb);
  keys_free(ka, ia), keys_free(kb, ib);
  return rc;
}

/* The k-th of a name: "name#k" (NULL for unnamed: the structure pass). */
static char *nth_name(const char *name, uint32_t k) {
  char *s = NULL;
  if (!name[0] || asprintf(&s, "%s#%u", name, k) < 0)
    return NULL;
  return s;
}

typedef struct name_ctx {
  const char *(*name_of)(const void *, uint32_t);
  const void *g;
} name_ctx;

static int cmp_named(const void *a, const void *b, void *arg) {
  const name_ctx *c = arg;
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  int r = strcmp(c->name_of(c->g, x), c->name_of(c->g, y));
  return r ? r : (x > y) - (x < y);
}

/* occ[i]: how many items before i have i's name. NULL out of memory. */
static uint32_t *occurrences(const char *(*name_of)(const void *, uint32_t),
                             const void *g, uint32_t n) {
  uint32_t *idx = malloc(sizeof *idx * (n ? n : 1));
  uint32_t *occ = malloc(sizeof *occ * (n ? n : 1));
  if (!idx || !occ) {
    free(idx), free(occ);
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++)
    idx[i] = i;
  name_ctx c = {name_of, g};
  qsort_r(idx, n, sizeof *idx, cmp_named, &c);
  for (uint32_t i = 0; i < n; i++)
    occ[idx[i]] = i && !strcmp(name_of(g, idx[i]), name_of(g, idx[i - 1]))
                      ? occ[idx[i - 1]] + 1
                      : 0;
  free(idx);
  return occ;
}

static const char *inst_name(const void *g, uint32_t i) {
  return ((const dm_graph *)g)->insts[i].name;
}

static const char *op_label(const void *g, uint32_t i) {
  return ((const dm_graph *)g)->ops[i].label;
}

typedef struct side {
  const dm_graph *m;
  uint32_t *occ; /* per op or instance: its name's occurrence index */
} side;

static char *inst_key(const void *sd, uint32_t i, int pass) {
  const side *s = sd;
  if (pass == 0)
    return nth_name(s->m->insts[i].name, s->occ[i]);
  return inst_sig(&s->m->insts[i], 0);
}

/* ---- ops ---- */

/* The op's accesses, instances as the other side knows them (imap). */
static char *op_acc(const dm_graph *m, uint32_t i, const uint32_t *imap) {
  const dm_op *op = &m->ops[i];
  char *s = strdup(""), *t = NULL;
  for (uint32_t k = 0; s && k < op->nacc; k++, s = t) {
    uint32_t in = op->acc[k].inst;
    long id = !imap                                      ? (long)in
              : in < m->ninsts && imap[in] != UINT32_MAX ? (long)imap[in]
                                                         : -1L;
    if (asprintf(&t, "%s|%ld:%s", s, id, priv_str(op->acc[k].priv)) < 0)
      t = NULL;
    free(s);
  }
  return s;
}

static char *op_sig(const dm_graph *m, uint32_t i, const uint32_t *imap,
                    int names) {
  const dm_op *op = &m->ops[i];
  char *acc = op_acc(m, i, imap), *s = NULL;
  if (acc &&
      asprintf(&s, "%d|%s|%d|%u|%llu|%s%s", (int)op->kind, op->name,
               (int)op->proc, op->shards, (unsigned long long)op->cost_ns,
               names ? op->label : "", acc) < 0)
    s = NULL;
  free(acc);
  return s;
}

typedef struct op_side {
  const dm_graph *m;
  uint32_t *occ;
  const uint32_t *imap; /* A: instance -> B's instance; B: NULL */
} op_side;

static char *op_key(const void *sd, uint32_t i, int pass) {
  const op_side *s = sd;
  if (pass == 0)
    return nth_name(s->m->ops[i].label, s->occ[i]);
  return op_sig(s->m, i, s->imap, 0);
}

/* ---- reporting ---- */

/* Difference lines shown per kind (ops, edges, instances, ports): two
 * graphs that differ everywhere print a screen, not a line per op. */
#define DIFF_SHOWN 16u

typedef struct counts {
  uint32_t add, del, chg;
  uint32_t shown, hidden; /* lines printed, differences not printed */
} counts;

typedef struct differ {
  const dm_graph *a, *b;
  const dv_extra *xa, *xb;
  uint32_t *ia, *ib; /* instance matching (UINT32_MAX: none) */
  uint32_t *oa, *ob; /* op matching */
  FILE *out;
  counts ops, edges, insts, ports;
} differ;

/* The value of key name (kn bytes) in rest lines ("key\tvalue\n"...), its
 * length in *n; NULL when absent. */
static const char *rest_value(const char *rest, const char *name, size_t kn,
                              size_t *n) {
  for (const char *l = rest; *l;) {
    const char *tab = strchr(l, '\t'), *nl = strchr(l, '\n');
    if (!tab || !nl)
      return NULL;
    if ((size_t)(tab - l) == kn && !strncmp(l, name, kn)) {
      *n = (size_t)(nl - tab - 1);
      return tab + 1;
    }
    l = nl + 1;
  }
  return NULL;
}

/* One "key\tvalue\n" line at l: the key's and value's lengths, the next
 * line (NULL when l is not such a line). */
static const char *rest_line(const char *l, size_t *kn, const char **v,
                             size_t *vn) {
  const char *tab = strchr(l, '\t'), *nl = strchr(l, '\n');
  if (!tab || !nl || tab > nl)
    return NULL;
  *kn = (size_t)(tab - l), *v = tab + 1, *vn = (size_t)(nl - tab - 1);
  return nl + 1;
}

/* The keys whose value differs between the rest lines ra and rb, or that
 * only one has: printed as " key" on out (when not NULL); their number. */
static uint32_t rest_changes(FILE *out, const char *ra, const char *rb) {
  uint32_t n = 0;
  size_t kn, vn, wn;
  const char *v, *w, *next;
  for (const char *l = ra; *l && (next = rest_line(l, &kn, &v, &vn)); l = next)
    if (!(w = rest_value(rb, l, kn, &wn)) || wn != vn || memcmp(w, v, vn)) {
      if (out)
        fprintf(out, " %.*s", (int)kn, l);
      n++;
    }
  for (const char *l = rb; *l && (next = rest_line(l, &kn, &v, &vn)); l = next)
    if (!rest_value(ra, l, kn, &wn)) {
      if (out)
        fprintf(out, " %.*s", (int)kn, l);
      n++;
    }
  return n;
}

static const char *op_rest(const dv_extra *x, uint32_t i) {
  return x && x->op_rest && i < x->nops && x->op_rest[i] ? x->op_rest[i] : "";
}

static const char *inst_rest(const dv_extra *x, uint32_t i) {
  return x && x->inst_rest && i < x->ninsts && x->inst_rest[i] ? x->inst_rest[i]
                                                               : "";
}

/* The stream for one more difference of kind c: out while fewer than
 * DIFF_SHOWN were printed, else NULL (counted in c->hidden). */
static FILE *line_for(FILE *out, counts *c) {
  if (c->shown >= DIFF_SHOWN) {
    c->hidden++;
    return NULL;
  }
  c->shown++;
  return out;
}

/* fprintf on out, nothing when out is NULL (a difference not shown). */
__attribute__((format(printf, 2, 3))) static void put(FILE *out,
                                                      const char *fmt, ...) {
  if (!out)
    return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
}

/* "... (N more KIND differences)" after the lines of a kind, when some
 * were not shown. */
static void say_more(FILE *out, const counts *c, const char *kind) {
  if (c->hidden)
    fprintf(out, "... (%u more %s difference%s)\n", c->hidden, kind,
            c->hidden == 1 ? "" : "s");
}

static void say_op(FILE *out, const dm_graph *m, uint32_t i) {
  if (!out)
    return;
  const dm_op *op = &m->ops[i];
  fprintf(out, "op %u%s%s%s (%s)", i, op->label[0] ? " '" : "", op->label,
          op->label[0] ? "'" : "", op->name);
}

static void say_inst(FILE *out, const dm_graph *m, uint32_t i) {
  if (!out)
    return;
  char r[256];
  rect_str(&m->insts[i].rect, r, sizeof r);
  fprintf(out, "instance %u%s%s%s (%s %s)", i, m->insts[i].name[0] ? " '" : "",
          m->insts[i].name, m->insts[i].name[0] ? "'" : "",
          rp_dtype_name(m->insts[i].dtype), r);
}

static void inst_changes(differ *d, uint32_t i, uint32_t j) {
  const dm_inst *x = &d->a->insts[i], *y = &d->b->insts[j];
  char *sx = inst_sig(x, 1), *sy = inst_sig(y, 1);
  const char *rx = inst_rest(d->xa, i), *ry = inst_rest(d->xb, j);
  if (sx && sy && (strcmp(sx, sy) || rest_changes(NULL, rx, ry))) {
    FILE *o = line_for(d->out, &d->insts);
    put(o, "~ ");
    say_inst(o, d->a, i);
    put(o, " -> ");
    say_inst(o, d->b, j);
    put(o, ":");
    if (strcmp(x->name, y->name))
      put(o, " renamed");
    if (x->mem != y->mem || x->device != y->device)
      put(o, " memory");
    if (x->dtype != y->dtype)
      put(o, " type");
    if (!rect_eq(&x->rect, &y->rect))
      put(o, " rectangle");
    rest_changes(o, rx, ry);
    put(o, "\n");
    d->insts.chg++;
  }
  free(sx), free(sy);
}

static void diff_insts(differ *d) {
  for (uint32_t i = 0; i < d->a->ninsts; i++)
    if (d->ia[i] == UINT32_MAX) {
      FILE *o = line_for(d->out, &d->insts);
      put(o, "- ");
      say_inst(o, d->a, i);
      put(o, "\n"), d->insts.del++;
    } else {
      inst_changes(d, i, d->ia[i]);
    }
  for (uint32_t j = 0; j < d->b->ninsts; j++)
    if (d->ib[j] == UINT32_MAX) {
      FILE *o = line_for(d->out, &d->insts);
      put(o, "+ ");
      say_inst(o, d->b, j);
      put(o, "\n"), d->insts.add++;
    }
  say_more(d->out, &d->insts, "instance");
}

/* What differs between matched ops i (A) and j (B), "" when nothing. */
static void op_changes(differ *d, uint32_t i, uint32_t j) {
  const dm_op *x = &d->a->ops[i], *y = &d->b->ops[j];
  char *sx = op_sig(d->a, i, d->ia, 1), *sy = op_sig(d->b, j, NULL, 1);
  int args = d->xa && d->xb && i < d->xa->nops && j < d->xb->nops &&
             strcmp(d->xa->args[i], d->xb->args[j]);
  const char *rx = op_rest(d->xa, i), *ry = op_rest(d->xb, j);
  if (sx && sy && (strcmp(sx, sy) || args || rest_changes(NULL, rx, ry))) {
    FILE *o = line_for(d->out, &d->ops);
    put(o, "~ ");
    say_op(o, d->a, i);
    put(o, " -> ");
    say_op(o, d->b, j);
    put(o, ":");
    if (strcmp(x->label, y->label))
      put(o, " renamed");
    if (strcmp(x->name, y->name))
      put(o, " task");
    if (x->proc != y->proc || x->shards != y->shards)
      put(o, " placement");
    if (x->cost_ns != y->cost_ns)
      put(o, " cost");
    if (x->kind != y->kind)
      put(o, " kind");
    if (args)
      put(o, " arguments");
    if (o) {
      char *ax = op_acc(d->a, i, d->ia), *ay = op_acc(d->b, j, NULL);
      put(o, "%s", ax && ay && strcmp(ax, ay) ? " accesses" : "");
      free(ax), free(ay);
    }
    rest_changes(o, rx, ry);
    put(o, "\n");
    d->ops.chg++;
  }
  free(sx), free(sy);
}

/* One op difference for the count per group: its op's name (the group is
 * its first component), its place among the differences and its sign,
 * counted (16 bytes: a diff of two graphs of 1M ops takes 32 MiB). */
typedef struct op_diff {
  const char *label;
  uint32_t at;
  uint16_t len; /* the first component's length */
  char sign;    /* '+', '-', '~' */
} op_diff;

static int cmp_diff_key(const void *a, const void *b) {
  const op_diff *x = a, *y = b;
  int c = memcmp(x->label, y->label, x->len < y->len ? x->len : y->len);
  if (!c)
    c = (x->len > y->len) - (x->len < y->len);
  return c ? c : (x->at > y->at) - (x->at < y->at);
}

static int cmp_diff_at(const void *a, const void *b) {
  const op_diff *x = a, *y = b;
  return (x->at > y->at) - (x->at < y->at);
}

/* When some op differences were not shown: their count per group of the
 * ops' first name component (each group once, in the order of its first
 * difference; DIFF_SHOWN groups, then how many more), so that a diff of
 * thousands of ops says which layers were added, removed or changed. */
static void say_op_groups(differ *d, op_diff *g, uint32_t n) {
  if (!d->ops.hidden)
    return;
  if (!g) {
    fprintf(d->out, "op differences by group: not shown (out of memory)\n");
    return;
  }
  qsort(g, n, sizeof *g, cmp_diff_key);
  /* the groups, in place: g[k] its first difference, cnt[k] its counts */
  uint32_t k = 0, (*cnt)[3] = calloc(n ? n : 1, sizeof *cnt);
  if (!cnt) {
    fprintf(d->out, "op differences by group: not shown (out of memory)\n");
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (!k || g[k - 1].len != g[i].len ||
        memcmp(g[k - 1].label, g[i].label, g[i].len))
      g[k++] = g[i];
    cnt[g[k - 1].at][g[i].sign == '+' ? 0 : g[i].sign == '-' ? 1 : 2]++;
  }
  qsort(g, k, sizeof *g, cmp_diff_at);
  fprintf(d->out, "op differences by group (1 name component; %u group%s):\n",
          k, k == 1 ? "" : "s");
  uint32_t rest[3] = {0, 0, 0};
  for (uint32_t i = 0; i < k; i++) {
    const uint32_t *c = cnt[g[i].at];
    if (i < DIFF_SHOWN) {
      fprintf(d->out, "  group '%.*s': +%u -%u ~%u\n", (int)g[i].len,
              g[i].label, c[0], c[1], c[2]);
      continue;
    }
    rest[0] += c[0], rest[1] += c[1], rest[2] += c[2];
  }
  if (k > DIFF_SHOWN)
    fprintf(d->out, "  ... (%u more groups: +%u -%u ~%u)\n", k - DIFF_SHOWN,
            rest[0], rest[1], rest[2]);
  free(cnt);
}

/* Records an op difference of op i of m in g (NULL: none recorded). */
static void note_op(op_diff *g, uint32_t *n, const dm_graph *m, uint32_t i,
                    char sign) {
  if (!g)
    return;
  op_diff *e = &g[*n];
  e->label = m->ops[i].label[0] ? m->ops[i].label : DV_UNNAMED;
  e->len = (uint16_t)strcspn(e->label, "."); /* dv_group_key's, depth 1 */
  e->at = (*n)++;
  e->sign = sign;
}

static void diff_ops(differ *d) {
  /* at most every op of A and of B differs */
  size_t cap = (size_t)d->a->nops + d->b->nops;
  op_diff *g = malloc(sizeof *g * (cap ? cap : 1));
  uint32_t n = 0;
  for (uint32_t i = 0; i < d->a->nops; i++)
    if (d->oa[i] == UINT32_MAX) {
      FILE *o = line_for(d->out, &d->ops);
      put(o, "- ");
      say_op(o, d->a, i);
      put(o, "\n"), d->ops.del++;
      note_op(g, &n, d->a, i, '-');
    } else {
      uint32_t chg = d->ops.chg;
      op_changes(d, i, d->oa[i]);
      if (d->ops.chg != chg)
        note_op(g, &n, d->a, i, '~');
    }
  for (uint32_t j = 0; j < d->b->nops; j++)
    if (d->ob[j] == UINT32_MAX) {
      FILE *o = line_for(d->out, &d->ops);
      put(o, "+ ");
      say_op(o, d->b, j);
      put(o, "\n"), d->ops.add++;
      note_op(g, &n, d->b, j, '+');
    }
  say_more(d->out, &d->ops, "op");
  say_op_groups(d, g, n);
  free(g);
}

/* An edge as one number (from << 32 | to; UINT64_MAX: an end without a
 * match in the other graph, never found) and whether capture inferred it. */
typedef struct edge_key {
  uint64_t k;
  int inferred;
} edge_key;

static int cmp_edge(const void *a, const void *b) {
  uint64_t x = ((const edge_key *)a)->k, y = ((const edge_key *)b)->k;
  return (x > y) - (x < y);
}

/* m's edges, ends through the op matching map (NULL: as they are),
 * sorted. */
static edge_key *edge_set(const dm_graph *m, const uint32_t *map) {
  edge_key *e = malloc(sizeof *e * (m->nedges ? m->nedges : 1));
  for (uint32_t k = 0; e && k < m->nedges; k++) {
    uint32_t f = m->edges[k].from, t = m->edges[k].to;
    if (map)
      f = map[f], t = map[t];
    e[k].k =
        f == UINT32_MAX || t == UINT32_MAX ? UINT64_MAX : (uint64_t)f << 32 | t;
    e[k].inferred = m->edges[k].inferred;
  }
  if (e)
    qsort(e, m->nedges, sizeof *e, cmp_edge);
  return e;
}

static const edge_key *find_edge(const edge_key *set, uint32_t n, uint64_t k) {
  edge_key x = {k, 0};
  return k == UINT64_MAX ? NULL : bsearch(&x, set, n, sizeof x, cmp_edge);
}

/* Starts the line of one edge difference (NULL when it is not shown). */
static FILE *say_edge(differ *d, const dm_graph *m, char sign, uint32_t f,
                      uint32_t t) {
  FILE *o = line_for(d->out, &d->edges);
  put(o, "%c edge ", sign);
  say_op(o, m, f);
  put(o, " -> ");
  say_op(o, m, t);
  return o;
}

/* Edges added and removed, and those in both that one graph asked for and
 * the other's capture inferred (lint treats the two differently). */
static int diff_edges(differ *d) {
  edge_key *ea = edge_set(d->a, d->oa), *eb = edge_set(d->b, NULL);
  if (!ea || !eb) {
    free(ea), free(eb);
    return -1;
  }
  for (uint32_t k = 0; k < d->a->nedges; k++) {
    const dm_edge *e = &d->a->edges[k];
    uint32_t f = d->oa[e->from], t = d->oa[e->to];
    uint64_t x =
        f == UINT32_MAX || t == UINT32_MAX ? UINT64_MAX : (uint64_t)f << 32 | t;
    const edge_key *in_b = find_edge(eb, d->b->nedges, x);
    if (!in_b) {
      put(say_edge(d, d->a, '-', e->from, e->to), "\n"), d->edges.del++;
    } else if (!in_b->inferred != !e->inferred) {
      put(say_edge(d, d->a, '~', e->from, e->to), ": %s in A, %s in B\n",
          e->inferred ? "inferred" : "asked for",
          in_b->inferred ? "inferred" : "asked for");
      d->edges.chg++;
    }
  }
  for (uint32_t k = 0; k < d->b->nedges; k++) {
    const dm_edge *e = &d->b->edges[k];
    if (!find_edge(ea, d->a->nedges, (uint64_t)e->from << 32 | e->to))
      put(say_edge(d, d->b, '+', e->from, e->to), "\n"), d->edges.add++;
  }
  say_more(d->out, &d->edges, "edge");
  free(ea), free(eb);
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* 1 when A's port p and B's port q bind the same ops (through the op
 * matching; a set: the order the file lists them in is no difference, as
 * the edges' is not), 0 when not, -1 out of memory. */
static int same_bound(const differ *d, const dv_port *p, const dv_port *q) {
  if (p->nops != q->nops)
    return 0;
  uint32_t n = p->nops ? p->nops : 1;
  uint32_t *x = malloc(sizeof *x * n), *y = malloc(sizeof *y * n);
  int same = x && y ? 1 : -1;
  for (uint32_t k = 0; same > 0 && k < p->nops; k++) {
    x[k] = p->ops[k] < d->a->nops ? d->oa[p->ops[k]] : UINT32_MAX;
    y[k] = q->ops[k];
  }
  if (same > 0) {
    qsort(x, p->nops, sizeof *x, cmp_u32);
    qsort(y, q->nops, sizeof *y, cmp_u32);
    same = !memcmp(x, y, sizeof *x * p->nops);
  }
  free(x), free(y);
  return same;
}

/* Ports of one kind, matched by name; changed when the ops they bind
 * differ. 0 ok, -1 out of memory. */
static int diff_ports(differ *d, const char *kind, const dv_port *pa,
                      uint32_t na, const dv_port *pb, uint32_t nb) {
  for (uint32_t i = 0; i < na; i++) {
    const dv_port *q = NULL;
    for (uint32_t j = 0; j < nb && !q; j++)
      q = !strcmp(pa[i].name, pb[j].name) ? &pb[j] : NULL;
    if (!q) {
      put(line_for(d->out, &d->ports), "- %s '%s'\n", kind, pa[i].name);
      d->ports.del++;
      continue;
    }
    int same = same_bound(d, &pa[i], q);
    if (same < 0)
      return -1;
    if (!same)
      put(line_for(d->out, &d->ports), "~ %s '%s': its bound ops differ\n",
          kind, pa[i].name),
          d->ports.chg++;
  }
  for (uint32_t j = 0; j < nb; j++) {
    int found = 0;
    for (uint32_t i = 0; i < na && !found; i++)
      found = !strcmp(pa[i].name, pb[j].name);
    if (!found)
      put(line_for(d->out, &d->ports), "+ %s '%s'\n", kind, pb[j].name),
          d->ports.add++;
  }
  return 0;
}

static void summary(const differ *d, uint32_t n) {
  if (!n) {
    fprintf(d->out,
            "no differences (%u ops, %u edges, %u instances, %u ports)\n",
            d->a->nops, d->a->nedges, d->a->ninsts, d->a->npre + d->a->npost);
    return;
  }
  fprintf(d->out,
          "diff: %u differences: ops +%u -%u ~%u, edges +%u -%u ~%u, "
          "instances +%u -%u ~%u, ports +%u -%u ~%u\n",
          n, d->ops.add, d->ops.del, d->ops.chg, d->edges.add, d->edges.del,
          d->edges.chg, d->insts.add, d->insts.del, d->insts.chg, d->ports.add,
          d->ports.del, d->ports.chg);
}

static uint32_t *unmatched(uint32_t n) {
  uint32_t *m = malloc(sizeof *m * (n ? n : 1));
  for (uint32_t i = 0; m && i < n; i++)
    m[i] = UINT32_MAX;
  return m;
}

/* Instances, then ops (their structure keys use the instance matching). */
static int matching(differ *d) {
  uint32_t *occa = occurrences(inst_name, d->a, d->a->ninsts);
  uint32_t *occb = occurrences(inst_name, d->b, d->b->ninsts);
  side sa = {d->a, occa}, sb = {d->b, occb};
  int rc = occa && occb ? 0 : -1;
  for (int pass = 0; !rc && pass < 2; pass++)
    rc = match_pass(d->a->ninsts, d->b->ninsts, d->ia, d->ib, inst_key, &sa,
                    &sb, pass);
  free(occa), free(occb);
  occa = rc ? NULL : occurrences(op_label, d->a, d->a->nops);
  occb = rc ? NULL : occurrences(op_label, d->b, d->b->nops);
  op_side oa = {d->a, occa, d->ia}, ob = {d->b, occb, NULL};
  rc = occa && occb ? 0 : -1;
  for (int pass = 0; !rc && pass < 2; pass++)
    rc = match_pass(d->a->nops, d->b->nops, d->oa, d->ob, op_key, &oa, &ob,
                    pass);
  free(occa), free(occb);
  return rc;
}

int dv_diff(const dm_graph *a, const dv_extra *xa, const dm_graph *b,
            const dv_extra *xb, FILE *out, FILE *err, uint32_t *ndiff) {
  differ d = {.a = a, .b = b, .xa = xa, .xb = xb, .out = out};
  d.ia = unmatched(a->ninsts), d.ib = unmatched(b->ninsts);
  d.oa = unmatched(a->nops), d.ob = unmatched(b->nops);
  int rc = d.ia && d.ib && d.oa && d.ob ? matching(&d) : -1;
  if (!rc) {
    diff_ops(&d);
    rc = diff_edges(&d);
  }
  if (!rc) {
    diff_insts(&d);
    if (xa && xb)
      rc = diff_ports(&d, "precondition", xa->pre, xa->npre, xb->pre,
                      xb->npre) ||
           diff_ports(&d, "postcondition", xa->post, xa->npost, xb->post,
                      xb->npost);
    if (!rc)
      say_more(out, &d.ports, "port");
  }
  if (!rc) {
    *ndiff = d.ops.add + d.ops.del + d.ops.chg + d.edges.add + d.edges.del +
             d.edges.chg + d.insts.add + d.insts.del + d.insts.chg +
             d.ports.add + d.ports.del + d.ports.chg;
    summary(&d, *ndiff);
  }
  free(d.ia), free(d.ib), free(d.oa), free(d.ob);
  if (rc)
    fprintf(err, "reprise dump: --diff: out of memory\n");
  return rc ? -1 : ferror(out) ? -1 : 0;
}
