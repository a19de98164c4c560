/* capture/dump.c — rp_graph_dump: text (for people), Graphviz DOT (for a
 * picture) and JSON (the graph file format, written by graph_io.c). */
#include "capture_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

/* A FILE with sticky error tracking: every write is checked, the first
 * failure's errno is kept (-1: the failure set none) and later writes are
 * skipped. */
typedef struct out {
  FILE *f;
  int err;
} out;

__attribute__((format(printf, 2, 3))) static void say(out *o, const char *fmt,
                                                      ...) {
  if (o->err)
    return;
  va_list ap;
  va_start(ap, fmt);
  errno = 0; /* a failure's cause, not one left from before */
  if (vfprintf(o->f, fmt, ap) < 0)
    o->err = errno > 0 ? errno : -1;
  va_end(ap);
}

static rp_status finish(out *o) {
  if (!o->err) {
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
      o->err = errno > 0 ? errno : -1;
  }
  if (o->err)
    return rp__err(RP_EIO, "rp_graph_dump: write failed: %s",
                   rp__write_cause(o->err));
  return RP_OK;
}

/* Room for the longest of each, so nothing is cut: a 4-D rectangle of
 * 20-digit bounds ("[lo..hi, ...]": 176 characters), and an instance (a
 * mirror's two handles, a 63-byte name, an access's privilege, the type
 * and that rectangle). */
#define RECT_STR 192
#define INST_STR (128 + RP_NAME_MAX + RECT_STR)

static void rect_str(const rp_rect *r, char *buf, size_t n) {
  size_t used = 0;
  int dim = r->dim >= 1 && r->dim <= RP_MAX_DIM ? r->dim : 0;
  snprintf(buf, n, "[]");
  for (int d = 0; d < dim && used < n; d++) {
    int w = snprintf(buf + used, n - used, "%s%lld..%lld%s", d ? ", " : "[",
                     (long long)r->lo[d], (long long)r->hi[d],
                     d + 1 == dim ? "]" : "");
    if (w < 0)
      break;
    used += (size_t)w;
  }
}

/* "inst#slot.gen", its name when it has one (" 'W1'"), then, when live,
 * " f32 [0..15]". A mirror (copy
 * insertion): "mirror#k(inst#slot.gen)" then its source's type and rect. */
static void inst_str(const rp_graph *g, rp_inst i, const char *priv, char *buf,
                     size_t n) {
  rp_instance_info info;
  char rect[RECT_STR];
  if (rp__is_mirror(i)) {
    rp_inst src = rp__graph_source(g, i);
    int live = rp_instance_query(g->rt, src, &info) == RP_OK;
    if (live)
      rect_str(&info.rect, rect, sizeof rect);
    snprintf(buf, n, "mirror#%u(inst#%u.%u)%s%s %s %s", rp__mirror_index(i),
             rp__inst_slot(src), rp__inst_gen(src), priv ? ":" : "",
             priv ? priv : "", live ? rp_dtype_name(info.dtype) : "(stale)",
             live ? rect : "");
    return;
  }
  if (rp_instance_query(g->rt, i, &info) != RP_OK) {
    snprintf(buf, n, "inst#%u.%u%s%s (stale)", rp__inst_slot(i),
             rp__inst_gen(i), priv ? ":" : "", priv ? priv : "");
    return;
  }
  rect_str(&info.rect, rect, sizeof rect);
  const char *name = rp_instance_name(g->rt, i);
  char named[RP_NAME_MAX + 4] = "";
  if (name && name[0])
    snprintf(named, sizeof named, " '%s'", name);
  snprintf(buf, n, "inst#%u.%u%s%s%s %s %s", rp__inst_slot(i), rp__inst_gen(i),
           named, priv ? ":" : "", priv ? priv : "", rp_dtype_name(info.dtype),
           rect);
}

static void proc_str(rp_proc p, char *buf, size_t n) {
  if (p == RP_PROC_ANY)
    snprintf(buf, n, "any");
  else
    snprintf(buf, n, "%u", p);
}

static const char *task_name(const rp_graph *g, const rp_gop *op) {
  const char *name = rp_task_name(g->rt, op->task);
  return name ? name : "?";
}

/* ---- text ---- */

static void text_access(out *o, const rp_graph *g, uint32_t k,
                        const rp_access *a) {
  char priv[16], inst[INST_STR];
  if (a->priv == RP_REDUCE)
    snprintf(priv, sizeof priv, "RED(%s)", rp__redop_name(a->redop));
  else
    snprintf(priv, sizeof priv, "%s", rp__priv_name(a->priv));
  inst_str(g, a->inst, priv, inst, sizeof inst);
  say(o, "    access %u: %s\n", k, inst);
}

static void text_task(out *o, const rp_graph *g, const rp_gop *op) {
  char proc[16];
  proc_str(op->proc, proc, sizeof proc);
  say(o, " task '%s' proc %s shards %u args %zu B", task_name(g, op), proc,
      op->shards, op->args_size);
  if (op->ws_bytes)
    say(o, " workspace %zu B align %zu", op->ws_bytes, op->ws_align);
  if (op->cost_ns)
    say(o, " cost %llu ns", (unsigned long long)op->cost_ns);
  say(o, "\n");
  if (op->shard_procs) {
    say(o, "    shard procs:");
    for (uint32_t s = 0; s < op->shards; s++) {
      proc_str(op->shard_procs[s], proc, sizeof proc);
      say(o, " %s", proc);
    }
    say(o, "\n");
  }
  for (uint32_t k = 0; k < op->nacc; k++)
    text_access(o, g, k, &op->acc[k]);
  for (uint32_t k = 0; k < op->ninterp; k++) {
    const rp_interp *ip = &op->interps[k];
    if (ip->dst_offset == RP_INTERP_SHARDS)
      say(o, "    interp %u: replay args [%zu, +%zu) -> shard count\n", k,
          ip->src_offset, ip->bytes);
    else
      say(o, "    interp %u: replay args [%zu, +%zu) -> args [%zu]\n", k,
          ip->src_offset, ip->bytes, ip->dst_offset);
  }
}

static void text_copy(out *o, const rp_graph *g, const rp_gop *op) {
  char src[INST_STR], dst[INST_STR], rect[RECT_STR] = "";
  const rp_copy *c = &op->copy;
  inst_str(g, c->src, NULL, src, sizeof src);
  inst_str(g, c->dst, NULL, dst, sizeof dst);
  if (c->domain == RP_DOMAIN_RECT)
    rect_str(&c->rect, rect, sizeof rect);
  say(o, " copy domain %s%s%s redop %s", rp__domain_name(c->domain),
      *rect ? " " : "", rect, rp__redop_name(c->redop));
  if (op->group)
    say(o, " group %u (%s %s)", op->group, rp__pop_name(op->pop_kind),
        op->pop_backward ? "bwd" : "fwd");
  if (op->inserted)
    say(o, " (inserted)");
  say(o, "\n    src %s\n    dst %s\n", src, dst);
}

static void text_ports(out *o, const char *what, const char *arrow,
                       const rp_gport *ports, uint32_t n) {
  for (uint32_t p = 0; p < n; p++) {
    say(o, "%s %u '%s' %s ops", what, p, ports[p].name, arrow);
    for (uint32_t k = 0; k < ports[p].nops; k++)
      say(o, " %u", ports[p].ops[k]);
    say(o, "\n");
  }
}

static void text_mirrors(out *o, const rp_graph *g) {
  for (uint32_t k = 0; k < g->nmirrors; k++) {
    rp_mem_info mi = {0};
    rp_mem_query(g->rt, g->mirrors[k].mem, &mi);
    say(o, "mirror %u: inst#%u.%u in memory %u (%s", k,
        rp__inst_slot(g->mirrors[k].src), rp__inst_gen(g->mirrors[k].src),
        g->mirrors[k].mem, rp__mem_kind_name(mi.kind));
    if (mi.kind == RP_MEM_GPU)
      say(o, " %d", mi.device);
    say(o, ")\n");
  }
}

static rp_status dump_text(const rp_graph *g, FILE *f) {
  out o = {f, 0};
  say(&o, "graph: %u ops, %u edges, %u preconditions, %u postconditions\n",
      g->nops, g->nedges, g->npre, g->npost);
  text_mirrors(&o, g);
  for (rp_op_id id = 0; id < g->nops; id++) {
    const rp_gop *op = &g->ops[id];
    if (op->name[0])
      say(&o, "op %u '%s':", id, op->name);
    else
      say(&o, "op %u:", id);
    if (op->kind == RP_OP_TASK)
      text_task(&o, g, op);
    else
      text_copy(&o, g, op);
  }
  for (uint32_t e = 0; e < g->nedges; e++)
    say(&o, "edge %u -> %u\n", g->edges[e].from, g->edges[e].to);
  text_ports(&o, "precondition", "->", g->pre, g->npre);
  text_ports(&o, "postcondition", "<-", g->post, g->npost);
  return finish(&o);
}

/* ---- DOT ---- */

/* A DOT string body: quotes and backslashes escaped, every byte outside
 * printable ASCII (control bytes, bytes that are no UTF-8) shown as the
 * text \xNN, so no string can break the file or its encoding. (Names
 * follow RP_NAME_MAX's rule; this holds for any string.) */
static void dot_str(out *o, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      say(o, "\\%c", *p);
    else if (*p >= 0x20 && *p < 0x7f)
      say(o, "%c", *p);
    else
      say(o, "\\\\x%02x", *p);
  }
}

/* Access lines a DOT label shows at most: one op of a GPT step (AdamW
 * over every tensor) has hundreds, a box dot lays out slowly and nobody
 * reads; the text and JSON dumps list them all. */
#define DOT_ACCESS_LINES 16u

/* One label line per access ("W inst#3.1 f32 [0..15]", the first
 * DOT_ACCESS_LINES) and per interpolation, as the text dump gives them. */
static void dot_task_lines(out *o, const rp_graph *g, const rp_gop *op) {
  char priv[16], inst[INST_STR];
  uint32_t shown = op->nacc <= DOT_ACCESS_LINES ? op->nacc : DOT_ACCESS_LINES;
  for (uint32_t k = 0; k < shown; k++) {
    const rp_access *a = &op->acc[k];
    if (a->priv == RP_REDUCE)
      snprintf(priv, sizeof priv, "RED(%s)", rp__redop_name(a->redop));
    else
      snprintf(priv, sizeof priv, "%s", rp__priv_name(a->priv));
    inst_str(g, a->inst, NULL, inst, sizeof inst);
    say(o, "\\n%s ", priv);
    dot_str(o, inst);
  }
  if (shown < op->nacc)
    say(o, "\\n... %u more accesses (the text dump lists them)",
        op->nacc - shown);
  for (uint32_t k = 0; k < op->ninterp; k++) {
    const rp_interp *ip = &op->interps[k];
    say(o, "\\ninterp: replay args [%zu, +%zu) -> ", ip->src_offset, ip->bytes);
    if (ip->dst_offset == RP_INTERP_SHARDS)
      say(o, "shard count");
    else
      say(o, "args [%zu]", ip->dst_offset);
  }
}

static void dot_op(out *o, const rp_graph *g, rp_op_id id) {
  const rp_gop *op = &g->ops[id];
  char proc[16];
  if (op->kind == RP_OP_TASK) {
    proc_str(op->proc, proc, sizeof proc);
    say(o, "  op%u [shape=box, label=\"%u: ", id, id);
    if (op->name[0]) {
      dot_str(o, op->name);
      say(o, "\\n");
    }
    dot_str(o, task_name(g, op));
    say(o, "\\nproc %s", proc);
    if (op->shards > 1)
      say(o, " x%u shards", op->shards);
    dot_task_lines(o, g, op);
    say(o, "\"];\n");
    return;
  }
  const rp_copy *c = &op->copy;
  char ends[2][INST_STR], rect[RECT_STR] = "";
  inst_str(g, c->src, NULL, ends[0], sizeof ends[0]);
  inst_str(g, c->dst, NULL, ends[1], sizeof ends[1]);
  if (c->domain == RP_DOMAIN_RECT)
    rect_str(&c->rect, rect, sizeof rect);
  say(o, "  op%u [shape=box, style=%s, label=\"%u: ", id,
      op->inserted ? "\"rounded,dashed\"" : "rounded", id);
  if (op->name[0]) {
    dot_str(o, op->name);
    say(o, "\\n");
  }
  say(o, "%scopy%s\\n", op->inserted ? "inserted " : "",
      c->redop ? " (sum)" : "");
  dot_str(o, ends[0]);
  say(o, "\\n-> ");
  dot_str(o, ends[1]);
  say(o, "\\ndomain %s%s%s\"];\n", rp__domain_name(c->domain), *rect ? " " : "",
      rect);
}

/* A parallel operator's copies are boxed together, labelled with its kind.
 * Ops are bucketed by group first (a counting sort), so this stays linear:
 * the buckets, allocated before anything is written (RP_ENOMEM), are
 * *off (ng + 2 entries: 0 when no copy is in a group) and *list. */
static rp_status dot_groups_alloc(const rp_graph *g, uint32_t *ng,
                                  uint32_t **off, uint32_t **list) {
  *ng = 0;
  *off = *list = NULL;
  for (rp_op_id id = 0; id < g->nops; id++)
    if (g->ops[id].kind == RP_OP_COPY && g->ops[id].group > *ng)
      *ng = g->ops[id].group;
  if (!*ng)
    return RP_OK;
  *off = rp__calloc((size_t)*ng + 2, sizeof **off);
  *list = malloc(sizeof **list * g->nops);
  if (*off && *list)
    return RP_OK;
  free(*off);
  free(*list);
  *off = *list = NULL;
  return rp__err(RP_ENOMEM,
                 "rp_graph_dump: out of memory (the DOT boxes of "
                 "%u parallel operators)",
                 *ng);
}

static void dot_groups(out *o, const rp_graph *g, uint32_t ng, uint32_t *off,
                       uint32_t *list) {
  if (!ng)
    return;
  for (rp_op_id id = 0; id < g->nops; id++)
    if (g->ops[id].kind == RP_OP_COPY)
      off[g->ops[id].group + 1]++;
  for (uint32_t k = 1; k <= ng + 1; k++)
    off[k] += off[k - 1];
  for (rp_op_id id = 0; id < g->nops; id++)
    if (g->ops[id].kind == RP_OP_COPY)
      list[off[g->ops[id].group]++] = id;
  /* off[k] now ends bucket k, so bucket k is [off[k - 1], off[k]) */
  for (uint32_t grp = 1; grp <= ng; grp++) {
    if (off[grp - 1] == off[grp])
      continue;
    const rp_gop *first = &g->ops[list[off[grp - 1]]];
    say(o,
        "  subgraph cluster_group%u {\n    label=\"group %u: %s %s\";\n"
        "    style=dashed;\n",
        grp, grp, rp__pop_name(first->pop_kind),
        first->pop_backward ? "bwd" : "fwd");
    for (uint32_t k = off[grp - 1]; k < off[grp]; k++)
      say(o, "    op%u;\n", list[k]);
    say(o, "  }\n");
  }
}

static void dot_ports(out *o, const char *prefix, const char *shape,
                      const rp_gport *ports, uint32_t n, int into_op) {
  for (uint32_t p = 0; p < n; p++) {
    say(o, "  %s%u [shape=%s, label=\"%s %u: ", prefix, p, shape, prefix, p);
    dot_str(o, ports[p].name);
    say(o, "\"];\n");
    for (uint32_t k = 0; k < ports[p].nops; k++) {
      if (into_op)
        say(o, "  %s%u -> op%u [style=dashed];\n", prefix, p, ports[p].ops[k]);
      else
        say(o, "  op%u -> %s%u [style=dashed];\n", ports[p].ops[k], prefix, p);
    }
  }
}

static rp_status dump_dot(const rp_graph *g, FILE *f) {
  uint32_t ng, *off, *list;
  rp_status st = dot_groups_alloc(g, &ng, &off, &list);
  if (st)
    return st;
  out o = {f, 0};
  say(&o, "digraph reprise {\n  rankdir=TB;\n  node [fontname=\"monospace\","
          " fontsize=10];\n");
  if (rp__dot_large(g->nops, g->nedges))
    say(&o, "  graph [" RP_DOT_BOUNDED "];\n");
  for (rp_op_id id = 0; id < g->nops; id++)
    dot_op(&o, g, id);
  dot_groups(&o, g, ng, off, list);
  free(off);
  free(list);
  for (uint32_t e = 0; e < g->nedges; e++)
    say(&o, "  op%u -> op%u;\n", g->edges[e].from, g->edges[e].to);
  dot_ports(&o, "pre", "invhouse", g->pre, g->npre, 1);
  dot_ports(&o, "post", "house", g->post, g->npost, 0);
  say(&o, "}\n");
  return finish(&o);
}

rp_status rp_graph_dump(const rp_graph *g, FILE *f, rp_dump_format fmt) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_dump");
  if (gst_)
    return gst_;
  if (!g || !f)
    return rp__err(RP_EINVAL, "rp_graph_dump: NULL argument");
  switch (fmt) {
  case RP_DUMP_TEXT:
    return dump_text(g, f);
  case RP_DUMP_DOT:
    return dump_dot(g, f);
  case RP_DUMP_JSON:
    return rp__graph_json_write(g, f);
  }
  return rp__err(RP_EINVAL, "rp_graph_dump: unknown format %d", (int)fmt);
}
