/* tools/dump_html.c — `reprise dump --format html`: one self-contained
 * page (nothing fetched: d3, the style, the script, the data and every
 * laid-out SVG inlined). Every level of grouping is its own small graph:
 * the step's groups at --group DEPTH (default 1), each group's groups one
 * component deeper, down to the ops; Graphviz's `dot`, run once as a child
 * process over all of them, lays them out, so a 10,000-op step is a few
 * thousand small layouts rather than one unreadable one. d3 (v3, Debian's
 * libjs-d3) is read from its installed file at run time. */
#include "cli.h"
#include "dump_view.h"

#include "engine/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define D3_PATH "/usr/share/javascript/d3/d3.min.js"

/* A level still to lay out: a group's ops, grouped one component deeper;
 * or a part of a level with more than kLevelNodes nodes (a run of its
 * nodes, grouped as that level groups them). */
typedef struct level {
  char key[RP_NAME_MAX + 1];   /* the group ("" the step), or the part */
  char group[RP_NAME_MAX + 1]; /* the group whose part this is */
  int top;                     /* the step or a part of it: no group */
  unsigned depth;
  int parent;
  uint32_t *ops;
  uint32_t n;
} level;

/* dot lays out a level of 100 nodes in well under a second, of 400 nodes
 * and 1,300 edges in 25 to 40 s (Graphviz 2.43): a level with more nodes
 * is drawn as parts of at most this many. */
enum { kLevelNodes = 100 };

typedef struct page {
  const dm_graph *m;
  const dv_html_opts *o;
  FILE *dot, *meta; /* the layouts' input; the views' JSON */
  char *meta_text;
  size_t meta_len;
  level *q;
  uint32_t nq, cap;
  int32_t *op_view; /* per op: the view that shows it as a node (-1) */
} page;

static int on_path(const char *prog) {
  const char *path = getenv("PATH");
  char buf[4096];
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
    if (n && access(buf, X_OK) == 0)
      return 1;
    p += n + (p[n] == ':');
  }
  return 0;
}

static int push(page *pg, const char *key, const char *group, int top,
                unsigned depth, int parent, const uint32_t *ops, uint32_t n) {
  if (pg->nq == pg->cap) {
    uint32_t cap = pg->cap ? 2 * pg->cap : 64;
    level *q = realloc(pg->q, sizeof *q * cap);
    if (!q)
      return -1;
    pg->q = q, pg->cap = cap;
  }
  level *l = &pg->q[pg->nq];
  l->ops = malloc(sizeof *l->ops * (n ? n : 1));
  if (!l->ops)
    return -1;
  memcpy(l->ops, ops, sizeof *ops * n);
  snprintf(l->key, sizeof l->key, "%s", key);
  snprintf(l->group, sizeof l->group, "%s", group);
  l->top = top, l->depth = depth, l->parent = parent, l->n = n;
  pg->nq++;
  return 0;
}

static void node_id(const dv_node *n, uint32_t child, char *buf, size_t cap) {
  if (n->op != UINT32_MAX)
    snprintf(buf, cap, "o%u", n->op);
  else
    snprintf(buf, cap, "v%u", child);
}

/* The level's graph for dot: ids the script finds (o<op>, v<view>,
 * e<view>_<k>), crit classes. */
static void dot_level(page *pg, uint32_t vi, const dv_view *v,
                      const uint32_t *child) {
  FILE *f = pg->dot;
  fprintf(f,
          "digraph v%u {\n graph [id=\"view%u\"%s%s];\n node [shape=box, "
          "style=\"rounded,filled\", fillcolor=\"#eef3fb\", "
          "fontname=\"Helvetica\", fontsize=10];\n",
          vi, vi, rp__dot_large(v->nnodes, v->nedges) ? ", " : "",
          rp__dot_large(v->nnodes, v->nedges) ? RP_DOT_BOUNDED : "");
  for (uint32_t k = 0; k < v->nnodes; k++) {
    const dv_node *n = &v->nodes[k];
    char id[32];
    node_id(n, child[k], id, sizeof id);
    fprintf(f, " %s [id=\"%s\", %s%s%s label=\"", id, id,
            n->op == UINT32_MAX || n->crit ? "class=\"" : "",
            n->op == UINT32_MAX ? (n->crit ? "grp crit" : "grp")
                                : (n->crit ? "crit" : ""),
            n->op == UINT32_MAX || n->crit ? "\"," : "");
    dv_json_str(f, dv_node_label(pg->m, n));
    if (n->op == UINT32_MAX && n->shards > 1)
      fprintf(f,
              "\\n%u ops, %u shards\", shape=box3d, "
              "fillcolor=\"#dde8f7\"];\n",
              n->nops, n->shards);
    else if (n->op == UINT32_MAX)
      fprintf(f, "\\n%u ops\", shape=box3d, fillcolor=\"#dde8f7\"];\n",
              n->nops);
    else
      fprintf(f, "\\n%s\"];\n", pg->m->ops[n->op].name);
  }
  for (uint32_t e = 0; e < v->nedges; e++) {
    char a[32], b[32];
    node_id(&v->nodes[v->edges[e].from], child[v->edges[e].from], a, sizeof a);
    node_id(&v->nodes[v->edges[e].to], child[v->edges[e].to], b, sizeof b);
    fprintf(f, " %s -> %s [id=\"e%u_%u\"%s];\n", a, b, vi, e,
            v->edges[e].crit ? ", class=\"crit\"" : "");
  }
  fprintf(f, "}\n");
}

/* members: the ops of v's nodes (a part's are its view's: v.members) */
static void meta_level(page *pg, uint32_t vi, const dv_view *v,
                       const uint32_t *child, const uint32_t *members) {
  FILE *f = pg->meta;
  fprintf(f, "%s\n{\"key\": \"", vi ? "," : "");
  dv_json_str(f, pg->q[vi].key);
  fprintf(f, "\", \"parent\": %d, \"nodes\": {", pg->q[vi].parent);
  for (uint32_t k = 0; k < v->nnodes; k++) {
    const dv_node *n = &v->nodes[k];
    char id[32];
    node_id(n, child[k], id, sizeof id);
    fprintf(f, "%s\"%s\": [\"%c\", %u, %u, %u, %u, %d, [", k ? ", " : "", id,
            n->op == UINT32_MAX ? 'g' : 'o',
            n->op == UINT32_MAX ? child[k] : n->op, n->nops, n->ntasks,
            n->ncopies, n->crit);
    /* its ops: the page's ancestors and descendants follow the graph's
     * edges through ops outside the view */
    for (uint32_t i = 0; i < n->nops; i++)
      fprintf(f, "%s%u", i ? ", " : "", members[n->first + i]);
    fprintf(f, "], %u]", n->shards);
  }
  fprintf(f, "}, \"edges\": [");
  for (uint32_t e = 0; e < v->nedges; e++) {
    char a[32], b[32];
    node_id(&v->nodes[v->edges[e].from], child[v->edges[e].from], a, sizeof a);
    node_id(&v->nodes[v->edges[e].to], child[v->edges[e].to], b, sizeof b);
    fprintf(f, "%s[\"%s\", \"%s\"]", e ? ", " : "", a, b);
  }
  fprintf(f, "]}");
}

/* v with more than kLevelNodes nodes, as parts: runs of its nodes (in
 * their order, at most kLevelNodes parts, each of at most
 * max(kLevelNodes, nodes / kLevelNodes) nodes: a part too large is cut
 * again), joined where v's edges join their nodes. 0 ok, -1 out of
 * memory. */
static int parts_of(const dv_view *v, const char *what, dv_view *p) {
  uint32_t per = (v->nnodes + kLevelNodes - 1) / kLevelNodes;
  per = per < kLevelNodes ? kLevelNodes : per;
  uint32_t c = (v->nnodes + per - 1) / per;
  memset(p, 0, sizeof *p);
  p->nodes = calloc(c, sizeof *p->nodes);
  p->edges = calloc((size_t)c * c, sizeof *p->edges);
  uint32_t *idx = calloc((size_t)c * c, sizeof *idx); /* edge + 1 */
  if (!p->nodes || !p->edges || !idx) {
    free(p->nodes), free(p->edges), free(idx);
    return -1;
  }
  p->nnodes = c;
  for (uint32_t k = 0; k < v->nnodes; k++) {
    const dv_node *n = &v->nodes[k];
    dv_node *g = &p->nodes[k / per];
    if (k % per == 0) {
      g->op = UINT32_MAX, g->first = n->first;
      snprintf(g->name, sizeof g->name, "%.32s part %u of %u", what,
               k / per + 1, c);
    }
    g->nops += n->nops, g->ntasks += n->ntasks, g->ncopies += n->ncopies;
    g->shards = 1; /* a run of nodes: their shards are not told */
    g->cost_ns += n->cost_ns, g->crit |= n->crit;
  }
  for (uint32_t e = 0; e < v->nedges; e++) {
    const dv_vedge *d = &v->edges[e];
    uint32_t a = d->from / per, b = d->to / per;
    if (a == b)
      continue;
    uint32_t *at = &idx[(size_t)a * c + b];
    if (!*at)
      p->edges[p->nedges] = (dv_vedge){a, b, 0, 0}, *at = ++p->nedges;
    p->edges[*at - 1].count += d->count;
    p->edges[*at - 1].crit |= d->crit;
  }
  free(idx);
  return 0;
}

/* Lays out level vi: its view, its groups (or parts) queued as levels. */
static int one_level(page *pg, uint32_t vi, FILE *err) {
  level l = pg->q[vi]; /* pg->q moves as levels are pushed */
  dv_opts vo = {.depth = l.depth,
                .ops = l.ops,
                .nops = l.n,
                .parent = l.top ? NULL : l.group,
                .single_as_op = 1,
                .crit = pg->o->crit,
                .cost_ns = pg->o->cost_ns};
  dv_view v, parts;
  if (dv_build(pg->m, &vo, &v, err))
    return -1;
  int cut = v.nnodes > kLevelNodes, rc = 0;
  if (cut && parts_of(&v, l.top ? "step" : l.group, &parts))
    rc = -1;
  const dv_view *shown = cut ? &parts : &v;
  uint32_t *child = rc ? NULL : calloc(shown->nnodes + 1, sizeof *child);
  rc = child ? 0 : -1;
  for (uint32_t k = 0; !rc && k < shown->nnodes; k++) {
    const dv_node *n = &shown->nodes[k];
    if (n->op != UINT32_MAX) {
      pg->op_view[n->op] = (int32_t)vi;
      continue;
    }
    child[k] = pg->nq;
    /* a part: the same ops, grouped alike; a group: one component deeper */
    rc = cut ? push(pg, n->name, l.group, l.top, l.depth, (int)vi,
                    v.members + n->first, n->nops)
             : push(pg, n->name, n->name, 0, l.depth + 1, (int)vi,
                    v.members + n->first, n->nops);
  }
  if (!rc) {
    dot_level(pg, vi, shown, child);
    meta_level(pg, vi, shown, child, v.members);
  } else {
    fprintf(err, "reprise dump: --format html: out of memory\n");
  }
  free(child);
  if (cut)
    free(parts.nodes), free(parts.edges);
  dv_free(&v);
  free(pg->q[vi].ops);
  pg->q[vi].ops = NULL;
  return rc;
}

/* ---- dot ---- */

/* Reads all of fd into *buf (malloc'd). 0 ok, -1 out of memory. */
static int slurp(int fd, char **buf, size_t *len) {
  size_t cap = 1 << 16;
  *len = 0;
  *buf = malloc(cap);
  for (ssize_t r = 1; *buf && r > 0;) {
    if (*len + 4096 > cap) {
      char *b = realloc(*buf, cap *= 2);
      if (!b)
        break;
      *buf = b;
    }
    r = read(fd, *buf + *len, cap - *len - 1);
    if (r < 0 && errno == EINTR)
      r = 1;
    else if (r > 0)
      *len += (size_t)r;
  }
  if (*buf && *len + 4096 <= cap) {
    (*buf)[*len] = 0;
    return 0;
  }
  free(*buf);
  *buf = NULL;
  return -1;
}

/* `dot -Tsvg < input` (input: an open file, read from its start): its
 * output in *svg. dot dies with this process (PR_SET_PDEATHSIG): a dump
 * killed while dot lays out a large page leaves no dot running. A dot
 * that cannot be started is said with the call that failed and its errno
 * ("cannot run dot: exec: ...", from the child's errno: a script whose
 * interpreter is missing). 0 ok, -1 failed (said). */
static int run_dot(int input, char **svg, size_t *len, FILE *err) {
  int fds[2], ex[2] = {-1, -1};
  if (lseek(input, 0, SEEK_SET) < 0 || pipe(fds)) {
    fprintf(err, "reprise dump: --format html: %s: %s\n",
            errno == ESPIPE ? "lseek" : "pipe", strerror(errno));
    return -1;
  }
  /* the exec's errno, written by a child whose exec failed; a successful
   * exec closes the pipe (O_CLOEXEC) and the read sees its end */
  const char *call = "fork";
  pid_t parent = getpid(), pid = -1;
  if (pipe2(ex, O_CLOEXEC))
    call = "pipe", ex[0] = ex[1] = -1;
  else
    pid = fork();
  if (pid == 0) { /* async-signal-safe calls only until exec */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
      _exit(126);
    signal(SIGPIPE, SIG_DFL); /* as a shell would start it */
    if (dup2(input, 0) < 0 || dup2(fds[1], 1) < 0)
      _exit(126);
    close(fds[0]), close(fds[1]);
    execlp("dot", "dot", "-Tsvg", (char *)NULL);
    int xe = errno;
    ssize_t w = write(ex[1], &xe, sizeof xe);
    (void)w;
    _exit(127);
  }
  int e = pid < 0 ? errno : 0;
  close(fds[1]);
  if (ex[1] >= 0)
    close(ex[1]);
  if (pid > 0) {
    int xe = 0;
    ssize_t r;
    while ((r = read(ex[0], &xe, sizeof xe)) < 0 && errno == EINTR)
      ;
    if (r == (ssize_t)sizeof xe) /* the exec failed: dot never ran */
      e = xe, call = "exec";
  }
  if (ex[0] >= 0)
    close(ex[0]);
  int rc = e ? -1 : slurp(fds[0], svg, len);
  close(fds[0]); /* a dot still writing ends (SIGPIPE): not its failure */
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (e)
    fprintf(err, "reprise dump: --format html: cannot run dot: %s: %s\n", call,
            strerror(e));
  else if (rc)
    fprintf(err,
            "reprise dump: --format html: out of memory reading dot's "
            "output (%zu bytes read)\n",
            *len);
  else if (!WIFEXITED(status) || WEXITSTATUS(status))
    fprintf(err, "reprise dump: --format html: dot failed (%s %d)\n",
            WIFEXITED(status) ? "status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status)),
        rc = -1;
  if (rc && *svg)
    free(*svg), *svg = NULL;
  return e ? -1 : rc;
}

/* ---- the page ---- */

/* Text in an element: <, > and & as entities; a control byte (C0, DEL,
 * a C1 control's C2 80..C2 9F), or a byte that is not UTF-8, written
 * \xNN as the command line's messages write a file name's. */
static void html_text(FILE *out, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    size_t k = rp_cli_utf8_len(p);
    int ctl =
        k == 1 ? *p < 0x20 || *p == 0x7f : k == 2 && *p == 0xc2 && p[1] <= 0x9f;
    if (!k || ctl) {
      for (size_t i = 0; i < (k ? k : 1); i++)
        fprintf(out, "\\x%02x", p[i]);
      p += k ? k : 1;
    } else if (*p == '<')
      fputs("&lt;", out), p++;
    else if (*p == '>')
      fputs("&gt;", out), p++;
    else if (*p == '&')
      fputs("&amp;", out), p++;
    else
      fwrite(p, 1, k, out), p += k;
  }
}

static void lines(FILE *out, const char *const *l) {
  for (; *l; l++)
    fputs(*l, out);
}

static void rect_json(FILE *out, const rp_rect *r) {
  fputc('[', out);
  for (int d = 0; d < r->dim; d++)
    fprintf(out, "%s%lld..%lld", d ? ", " : "", (long long)r->lo[d],
            (long long)r->hi[d]);
  fputc(']', out);
}

static const char *mem_str(rp_mem_kind k) {
  return k == RP_MEM_GPU ? "gpu" : k == RP_MEM_PINNED ? "pinned" : "system";
}

static const char *priv_str(rp_privilege p) {
  static const char *const s[] = {"none", "R", "W", "RW", "reduce"};
  return (unsigned)p < 5 ? s[p] : "?";
}

static void data_ops(const page *pg, FILE *out) {
  const dm_graph *m = pg->m;
  const dv_extra *x = pg->o->extra;
  fprintf(out, "\"ops\": [");
  for (uint32_t i = 0; i < m->nops; i++) {
    const dm_op *op = &m->ops[i];
    fprintf(out, "%s\n[\"", i ? "," : "");
    dv_json_str(out, op->label);
    fprintf(out, "\", \"");
    dv_json_str(out, op->name);
    fprintf(out, "\", \"%c\", ", op->kind == RP_OP_COPY ? 'c' : 't');
    if (op->kind == RP_OP_COPY || op->proc == RP_PROC_ANY)
      fprintf(out, "\"any\"");
    else
      fprintf(out, "%u", op->proc);
    double cost = pg->o->cost_ns ? pg->o->cost_ns[i] : (double)op->cost_ns;
    fprintf(out, ", %u, %.0f, \"%s\", [", op->shards, cost,
            x && x->args && i < x->nops ? x->args[i] : "");
    for (uint32_t k = 0; k < op->nacc; k++)
      fprintf(out, "%s[%u, \"%s\"]", k ? ", " : "", op->acc[k].inst,
              priv_str(op->acc[k].priv));
    fprintf(out, "], %d]", pg->op_view[i]);
  }
  fprintf(out, "],\n");
}

static void data_insts(const dm_graph *m, FILE *out) {
  fprintf(out, "\"insts\": [");
  for (uint32_t i = 0; i < m->ninsts; i++) {
    const dm_inst *in = &m->insts[i];
    fprintf(out, "%s\n[\"", i ? "," : "");
    dv_json_str(out, in->name);
    fprintf(out, "\", \"%s\", \"", rp_dtype_name(in->dtype));
    rect_json(out, &in->rect);
    fprintf(out, "\", \"%s%s\"]", mem_str(in->mem),
            in->mem == RP_MEM_GPU ? " memory of a gpu" : " memory");
  }
  fprintf(out, "],\n");
}

static void data_edges(const dm_graph *m, FILE *out) {
  fprintf(out, "\"opedges\": [");
  for (uint32_t e = 0; e < m->nedges; e++)
    fprintf(out, "%s[%u, %u]", e ? ", " : "", m->edges[e].from, m->edges[e].to);
  fprintf(out, "],\n");
}

static void data_crit(const page *pg, FILE *out) {
  const dv_crit *c = pg->o->crit;
  fprintf(out, "\"crit\": [");
  for (uint32_t i = 0; c && i < c->n; i++)
    fprintf(out, "%s%u", i ? ", " : "", c->path[i]);
  fprintf(out, "],\n");
}

/* The SVGs of the levels, in order, as JSON strings. -1: dot's output
 * does not hold one per level; -2 out of memory. */
static int svgs(const char *svg, uint32_t n, FILE *out) {
  fprintf(out, "var RP_SVG = [");
  const char *p = svg;
  for (uint32_t i = 0; i < n; i++) {
    const char *a = strstr(p, "<svg"), *b = a ? strstr(a, "</svg>") : NULL;
    if (!b)
      return -1;
    b += strlen("</svg>");
    fprintf(out, "%s\n\"", i ? "," : "");
    if (dv_svg_json(out, a, (size_t)(b - a)))
      return -2;
    fputc('"', out);
    p = b;
  }
  fprintf(out, "];\n");
  return 0;
}

static void head(const page *pg, FILE *out) {
  fprintf(out, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
               "<title>reprise: ");
  html_text(out, pg->o->title ? pg->o->title : "graph");
  fprintf(out, "</title>\n<style>\n");
  lines(out, dv_page_css);
  const dv_crit *c = pg->o->crit;
  fprintf(out,
          "</style></head><body>\n<div id=\"bar\"><b>reprise</b> "
          "<span id=\"crumbs\"></span> <input id=\"q\" size=\"28\" "
          "placeholder=\"search ops by name (Enter)\"> <span "
          "id=\"found\"></span> <label><input type=\"checkbox\" "
          "id=\"crit\"> critical path (%u ops, by %s)</label> <button "
          "id=\"fit\">fit</button> <span id=\"info\"></span></div>\n"
          "<div id=\"stage\"><div id=\"tip\"></div></div>\n<pre "
          "id=\"selftest\"></pre>\n",
          c ? c->n : 0, c ? c->basis : "none");
}

/* d3, inlined as it is installed; -1 missing or unusable (said). */
static int inline_d3(FILE *out, FILE *err) {
  char *text = NULL;
  size_t len = 0;
  rp_status st = rp_file_read_regular(D3_PATH, (size_t)64 << 20, &text, &len);
  if (st) {
    fprintf(err,
            "reprise dump: --format html inlines d3 from %s (Debian "
            "package libjs-d3): %s\n",
            D3_PATH, rp_error_detail());
    return -1;
  }
  int bad = memmem(text, len, "</script", 8) != NULL;
  if (bad)
    fprintf(err, "reprise dump: %s holds \"</script\": cannot inline it\n",
            D3_PATH);
  else
    fprintf(out, "<script>\n%.*s\n</script>\n", (int)len, text);
  free(text);
  return bad ? -1 : 0;
}

static int write_page(page *pg, const char *svg, FILE *out, FILE *err) {
  head(pg, out);
  if (inline_d3(out, err))
    return -1;
  fprintf(out, "<script>\nvar RP_DATA = {");
  data_ops(pg, out);
  data_insts(pg->m, out);
  data_edges(pg->m, out);
  data_crit(pg, out);
  fprintf(out, "\"views\": [%.*s]};\n", (int)pg->meta_len, pg->meta_text);
  int s = svgs(svg, pg->nq, out);
  if (s == -2)
    fprintf(err, "reprise dump: --format html: out of memory\n");
  else if (s)
    fprintf(err,
            "reprise dump: --format html: dot's output does not hold "
            "the %u layouts asked for\n",
            pg->nq);
  if (s)
    return -1;
  fprintf(out, "</script>\n<script>\n");
  lines(out, dv_page_js);
  fprintf(out, "</script>\n</body></html>\n");
  return ferror(out) ? -1 : 0;
}

/* Every level into pg->dot and pg->meta, breadth first. */
static int levels(page *pg, FILE *err) {
  uint32_t n = pg->o->ops ? pg->o->nops : pg->m->nops;
  uint32_t *all = malloc(sizeof *all * (n ? n : 1));
  int rc = all ? 0 : -1;
  for (uint32_t i = 0; !rc && i < n; i++)
    all[i] = pg->o->ops ? pg->o->ops[i] : i;
  if (!rc)
    rc = push(pg, "", "", 1, pg->o->depth, -1, all, n);
  free(all);
  if (rc)
    fprintf(err, "reprise dump: --format html: out of memory\n");
  for (uint32_t vi = 0; !rc && vi < pg->nq; vi++)
    rc = one_level(pg, vi, err);
  return rc;
}

static int prerequisites(FILE *err) {
  if (!on_path("dot")) {
    fprintf(err, "reprise dump: --format html lays the graph out with "
                 "Graphviz's dot (Debian package graphviz), which is not "
                 "on PATH\n");
    return -1;
  }
  if (access(D3_PATH, R_OK)) {
    fprintf(err,
            "reprise dump: --format html inlines d3 from %s (Debian "
            "package libjs-d3), which is missing\n",
            D3_PATH);
    return -1;
  }
  return 0;
}

static void page_free(page *pg) {
  for (uint32_t i = 0; i < pg->nq; i++)
    free(pg->q[i].ops);
  free(pg->q), free(pg->op_view), free(pg->meta_text);
}

int dv_html(const dm_graph *m, const dv_html_opts *o, FILE *out, FILE *err) {
  if (prerequisites(err))
    return -1;
  page pg = {.m = m, .o = o};
  /* dot's input: a file without a name (gone with this process, however
   * it ends) */
  pg.dot = tmpfile();
  pg.meta = open_memstream(&pg.meta_text, &pg.meta_len);
  pg.op_view = malloc(sizeof *pg.op_view * (m->nops ? m->nops : 1));
  int rc = pg.dot && pg.meta && pg.op_view ? 0 : -1;
  if (rc)
    fprintf(err, "reprise dump: --format html: %s\n",
            !pg.dot ? "cannot create a temporary file" : "out of memory");
  for (uint32_t i = 0; !rc && i < m->nops; i++)
    pg.op_view[i] = -1;
  if (!rc)
    rc = levels(&pg, err);
  /* the views' JSON: open_memstream's buffer, which fails to grow for
   * lack of memory only */
  if (pg.meta && fclose(pg.meta) && !rc)
    fprintf(err, "reprise dump: --format html: out of memory for the "
                 "views' data\n"),
        rc = -1;
  if (pg.dot && fflush(pg.dot) && !rc)
    fprintf(err,
            "reprise dump: --format html: writing dot's input failed: "
            "%s\n",
            strerror(errno)),
        rc = -1;
  char *svg = NULL;
  size_t len = 0;
  if (!rc)
    rc = run_dot(fileno(pg.dot), &svg, &len, err);
  if (pg.dot)
    fclose(pg.dot);
  if (!rc)
    rc = write_page(&pg, svg, out, err);
  free(svg);
  page_free(&pg);
  return rc;
}
