/* capture/graph_io.c — graph files: the instance table, the writer
 * (rp_graph_save and the JSON dump) and the checksum. The loader is in
 * graph_load.c; the format in graph_io.h and docs/debugging.md
 * "Graph files". */
#include "graph_io.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

/* ---- names shared by files and dumps ---- */

static const char *name_at(const char *const *names, size_t n, int v) {
  return v >= 0 && (size_t)v < n && names[v] ? names[v] : "?";
}

const char *rp__priv_name(rp_privilege p) {
  static const char *const n[] = {
      [RP_READ] = "R", [RP_WRITE] = "W", [RP_RW] = "RW", [RP_REDUCE] = "RED"};
  return name_at(n, RP_ARRAY_LEN(n), (int)p);
}

const char *rp__redop_name(rp_redop r) {
  static const char *const n[] = {
      [RP_REDOP_NONE] = "none", [RP_REDOP_SUM] = "sum"};
  return name_at(n, RP_ARRAY_LEN(n), (int)r);
}

const char *rp__domain_name(rp_copy_domain d) {
  static const char *const n[] = {[RP_DOMAIN_INTERSECT] = "intersect",
                                  [RP_DOMAIN_SRC] = "src",
                                  [RP_DOMAIN_DST] = "dst",
                                  [RP_DOMAIN_RECT] = "rect"};
  return name_at(n, RP_ARRAY_LEN(n), (int)d);
}

const char *rp__pop_name(rp_pop_kind k) {
  static const char *const n[] = {[RP_POP_REPLICATE] = "replicate",
                                  [RP_POP_REPARTITION] = "repartition",
                                  [RP_POP_COMBINE] = "combine",
                                  [RP_POP_REDUCTION] = "reduction"};
  return name_at(n, RP_ARRAY_LEN(n), (int)k);
}

const char *rp__mem_kind_name(rp_mem_kind k) {
  static const char *const n[] = {[RP_MEM_SYSTEM] = "system",
                                  [RP_MEM_PINNED] = "pinned",
                                  [RP_MEM_GPU] = "gpu"};
  return name_at(n, RP_ARRAY_LEN(n), (int)k);
}

/* ---- the instance table: distinct instances in first-use order ---- */

/* Open-addressing map from instance id to table index. */
typedef struct inst_index {
  rp_inst *list; /* table order */
  uint32_t n;
  uint64_t *keys;
  uint32_t *idx; /* UINT32_MAX = empty */
  size_t mask;
} inst_index;

static void index_free(inst_index *ix) {
  free(ix->list);
  free(ix->keys);
  free(ix->idx);
  memset(ix, 0, sizeof *ix);
}

static size_t slot_of(const inst_index *ix, uint64_t id) {
  /* Fibonacci hashing: slots and generations are small and dense */
  size_t h = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & ix->mask;
  while (ix->idx[h] != UINT32_MAX && ix->keys[h] != id)
    h = (h + 1) & ix->mask;
  return h;
}

static uint64_t ref_count(const rp_graph *g) {
  uint64_t refs = 0;
  for (uint32_t i = 0; i < g->nops; i++)
    refs += g->ops[i].kind == RP_OP_TASK ? g->ops[i].nacc : 2;
  return refs;
}

static rp_status index_build(const rp_graph *g, inst_index *ix) {
  memset(ix, 0, sizeof *ix);
  uint64_t refs = ref_count(g);
  size_t cap = 16;
  while (cap < 2 * refs)
    cap *= 2;
  ix->mask = cap - 1;
  ix->keys = malloc(sizeof *ix->keys * cap);
  ix->idx = malloc(sizeof *ix->idx * cap);
  ix->list = malloc(sizeof *ix->list * (refs ? refs : 1));
  if (!ix->keys || !ix->idx || !ix->list) {
    index_free(ix);
    return rp__err(RP_ENOMEM, "graph instance table: out of memory");
  }
  memset(ix->idx, 0xff, sizeof *ix->idx * cap);
  for (uint32_t o = 0; o < g->nops; o++) {
    rp_access tmp[2];
    const rp_access *acc;
    uint32_t n = rp__op_accesses(&g->ops[o], tmp, &acc);
    for (uint32_t a = 0; a < n; a++) {
      /* a mirror reference (copy insertion) uses its source */
      rp_inst inst = rp__graph_source(g, acc[a].inst);
      size_t h = slot_of(ix, inst.id);
      if (ix->idx[h] != UINT32_MAX)
        continue;
      ix->keys[h] = inst.id;
      ix->idx[h] = ix->n;
      ix->list[ix->n++] = inst;
    }
  }
  return RP_OK;
}

rp_status rp__graph_inst_table(const rp_graph *g, rp_inst **out, uint32_t *n) {
  inst_index ix;
  rp_status st = index_build(g, &ix);
  if (st)
    return st;
  *n = ix.n;
  *out = ix.n ? ix.list : NULL;
  if (!ix.n)
    free(ix.list);
  ix.list = NULL;
  index_free(&ix);
  return RP_OK;
}

rp_status rp_graph_instances(const rp_graph *g, rp_inst *out, uint32_t cap,
                             uint32_t *n) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_instances");
  if (gst_)
    return gst_;
  if (!g || !n || (cap && !out))
    return rp__err(RP_EINVAL, "rp_graph_instances: NULL argument");
  rp_inst *list;
  uint32_t count;
  rp_status st = rp__graph_inst_table(g, &list, &count);
  if (st)
    return st;
  *n = count;
  if (out && count)
    memcpy(out, list, sizeof *list * (count < cap ? count : cap));
  free(list);
  if (out && count > cap)
    return rp__err(RP_ERANGE,
                   "rp_graph_instances: the graph references %u "
                   "instances, room for %u",
                   count, cap);
  return RP_OK;
}

#ifdef REPRISE_HAVE_CJSON

/* ---- checksum: FNV-1a 64 over the canonical text ---- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static void fnv(uint64_t *h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    *h ^= b[i];
    *h *= FNV_PRIME;
  }
}

static void fnv_str(uint64_t *h, const char *s) {
  fnv(h, s, strlen(s));
}

static void hash_string(uint64_t *h, const char *s) {
  fnv_str(h, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*p;
      fnv(h, esc, 2);
    } else if (*p < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", *p);
      fnv_str(h, esc);
    } else {
      fnv(h, p, 1);
    }
  }
  fnv_str(h, "\"");
}

static void hash_number(uint64_t *h, double d) {
  char buf[40];
  if (isfinite(d) && d == floor(d) && fabs(d) < 9223372036854775808.0)
    snprintf(buf, sizeof buf, "%lld", (long long)d);
  else
    snprintf(buf, sizeof buf, "%.17g", d);
  fnv_str(h, buf);
}

static void hash_value(uint64_t *h, const cJSON *v) {
  if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
    int obj = cJSON_IsObject(v);
    fnv_str(h, obj ? "{" : "[");
    for (const cJSON *c = v->child; c; c = c->next) {
      if (c != v->child)
        fnv_str(h, ",");
      if (obj) {
        hash_string(h, c->string ? c->string : "");
        fnv_str(h, ":");
      }
      hash_value(h, c);
    }
    fnv_str(h, obj ? "}" : "]");
  } else if (cJSON_IsString(v)) {
    hash_string(h, v->valuestring ? v->valuestring : "");
  } else if (cJSON_IsNumber(v)) {
    hash_number(h, v->valuedouble);
  } else if (cJSON_IsTrue(v)) {
    fnv_str(h, "true");
  } else if (cJSON_IsFalse(v)) {
    fnv_str(h, "false");
  } else {
    fnv_str(h, "null");
  }
}

uint64_t rp__graph_checksum(const cJSON *v) {
  uint64_t h = FNV_OFFSET;
  hash_value(&h, v);
  return h;
}

/* ---- the writer: graph -> cJSON tree ---- */

/* Table index of an instance the index was built over. */
static uint32_t index_find(const inst_index *ix, rp_inst i) {
  return ix->idx[slot_of(ix, i.id)];
}

/* Building a tree allocates at every step; instead of checking each call,
 * a failed allocation sets `oom` and the tree is dropped at the end. */
typedef struct writer {
  const rp_graph *g;
  inst_index ix;
  int oom;
} writer;

static cJSON *put(writer *w, cJSON *obj, const char *key, cJSON *item) {
  if (!item || !obj ||
      !(cJSON_IsArray(obj) ? cJSON_AddItemToArray(obj, item)
                           : cJSON_AddItemToObject(obj, key, item))) {
    cJSON_Delete(item);
    w->oom = 1;
    return NULL;
  }
  return item;
}

/* Integers: a JSON number when cJSON prints it exactly (at most 15
 * digits: RP_JSON_PRINT_EXACT), else a decimal string (the loader accepts
 * both). */
static cJSON *j_i64(int64_t v) {
  /* integer comparisons: converting v to double first would round 2^53 + 1
   * down into the range */
  if (v <= (int64_t)RP_JSON_PRINT_EXACT && v >= -(int64_t)RP_JSON_PRINT_EXACT)
    return cJSON_CreateNumber((double)v);
  char buf[24];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  return cJSON_CreateString(buf);
}

static cJSON *j_u64(uint64_t v) {
  if (v <= RP_JSON_PRINT_EXACT)
    return cJSON_CreateNumber((double)v);
  char buf[24];
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  return cJSON_CreateString(buf);
}

static cJSON *j_i64_array(writer *w, const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n && a; i++)
    put(w, a, NULL, j_i64(v[i]));
  return a;
}

static void put_rect(writer *w, cJSON *o, const rp_rect *r) {
  int dim = r->dim >= 1 && r->dim <= RP_MAX_DIM ? r->dim : 0;
  put(w, o, "lo", j_i64_array(w, r->lo, dim));
  put(w, o, "hi", j_i64_array(w, r->hi, dim));
}

static rp_status inst_json(writer *w, cJSON *arr, uint32_t i) {
  rp_instance_info info;
  rp_mem_info mi;
  rp_inst inst = w->ix.list[i];
  if (rp_instance_query(w->g->rt, inst, &info) != RP_OK)
    return rp__err(RP_ESTALE,
                   "instance table entry %u: instance %#llx is "
                   "stale or unknown",
                   i, (unsigned long long)inst.id);
  if (rp_mem_query(w->g->rt, info.mem, &mi) != RP_OK)
    return rp__err(RP_EINVAL, "instance table entry %u: memory %u unknown", i,
                   info.mem);
  cJSON *o = put(w, arr, NULL, cJSON_CreateObject());
  put(w, o, "id", cJSON_CreateNumber(i));
  put(w, o, "mem", cJSON_CreateString(rp__mem_kind_name(mi.kind)));
  put(w, o, "device", cJSON_CreateNumber(mi.device));
  put(w, o, "dtype", cJSON_CreateString(rp_dtype_name(info.dtype)));
  put_rect(w, o, &info.rect);
  put(w, o, "strides", j_i64_array(w, info.strides, info.rect.dim));
  const char *name = rp_instance_name(w->g->rt, inst);
  if (name && name[0]) /* optional: unnamed instances' entries as before */
    put(w, o, "name", cJSON_CreateString(name));
  return RP_OK;
}

static cJSON *hex_string(const void *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  char *s = malloc(2 * n + 1);
  if (!s)
    return NULL;
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    s[2 * i] = digits[b[i] >> 4];
    s[2 * i + 1] = digits[b[i] & 15];
  }
  s[2 * n] = 0;
  cJSON *j = cJSON_CreateString(s);
  free(s);
  return j;
}

static cJSON *j_proc(rp_proc p) {
  return p == RP_PROC_ANY ? cJSON_CreateString("any") : cJSON_CreateNumber(p);
}

/* An instance: its table index. A mirror: {"mirror": k}. */
static cJSON *j_inst_ref(writer *w, rp_inst i) {
  if (!rp__is_mirror(i))
    return cJSON_CreateNumber(index_find(&w->ix, i));
  cJSON *o = cJSON_CreateObject();
  put(w, o, "mirror", cJSON_CreateNumber(rp__mirror_index(i)));
  return o;
}

/* The mirror table; only graphs with mirrors have the key, so files of
 * graphs without them are what builds before copy insertion wrote. */
static rp_status mirrors_json(writer *w, cJSON *graph) {
  if (!w->g->nmirrors)
    return RP_OK;
  cJSON *arr = put(w, graph, "mirrors", cJSON_CreateArray());
  for (uint32_t k = 0; k < w->g->nmirrors && arr; k++) {
    const rp_gmirror *m = &w->g->mirrors[k];
    rp_mem_info mi;
    uint32_t src = index_find(&w->ix, m->src);
    if (src == UINT32_MAX)
      return rp__err(RP_EINVAL, "mirror %u: no op references it", k);
    if (rp_mem_query(w->g->rt, m->mem, &mi) != RP_OK)
      return rp__err(RP_EINVAL, "mirror %u: memory %u unknown", k, m->mem);
    cJSON *o = put(w, arr, NULL, cJSON_CreateObject());
    put(w, o, "id", cJSON_CreateNumber(k));
    put(w, o, "source", cJSON_CreateNumber(src));
    put(w, o, "mem", cJSON_CreateString(rp__mem_kind_name(mi.kind)));
    put(w, o, "device", cJSON_CreateNumber(mi.device));
  }
  return RP_OK;
}

static void task_accesses(writer *w, cJSON *o, const rp_gop *op) {
  cJSON *acc = put(w, o, "accesses", cJSON_CreateArray());
  for (uint32_t a = 0; a < op->nacc && acc; a++) {
    cJSON *j = put(w, acc, NULL, cJSON_CreateObject());
    put(w, j, "inst", j_inst_ref(w, op->acc[a].inst));
    put(w, j, "priv", cJSON_CreateString(rp__priv_name(op->acc[a].priv)));
    put(w, j, "redop", cJSON_CreateString(rp__redop_name(op->acc[a].redop)));
  }
}

static void task_interps(writer *w, cJSON *o, const rp_gop *op) {
  cJSON *ips = put(w, o, "interps", cJSON_CreateArray());
  for (uint32_t k = 0; k < op->ninterp && ips; k++) {
    const rp_interp *ip = &op->interps[k];
    cJSON *j = put(w, ips, NULL, cJSON_CreateObject());
    put(w, j, "src", j_u64(ip->src_offset));
    put(w, j, "dst",
        ip->dst_offset == RP_INTERP_SHARDS ? cJSON_CreateString("shards")
                                           : j_u64(ip->dst_offset));
    put(w, j, "bytes", j_u64(ip->bytes));
  }
}

static rp_status task_json(writer *w, cJSON *o, rp_op_id id, const rp_gop *op) {
  const char *name = rp_task_name(w->g->rt, op->task);
  if (!name)
    return rp__err(RP_ENOTASK, "op %u: task id %u is not registered", id,
                   op->task);
  put(w, o, "task", cJSON_CreateString(name));
  put(w, o, "proc", j_proc(op->proc));
  put(w, o, "shards", cJSON_CreateNumber(op->shards));
  cJSON *sp = op->shard_procs ? cJSON_CreateArray() : cJSON_CreateNull();
  for (uint32_t s = 0; op->shard_procs && sp && s < op->shards; s++)
    put(w, sp, NULL, j_proc(op->shard_procs[s]));
  put(w, o, "shard_procs", sp);
  put(w, o, "workspace_bytes", j_u64(op->ws_bytes));
  put(w, o, "workspace_align", j_u64(op->ws_align));
  put(w, o, "cost_ns", j_u64(op->cost_ns));
  put(w, o, "args", hex_string(op->args, op->args_size));
  task_accesses(w, o, op);
  task_interps(w, o, op);
  return RP_OK;
}

static void copy_json(writer *w, cJSON *o, const rp_gop *op) {
  const rp_copy *c = &op->copy;
  put(w, o, "src", j_inst_ref(w, c->src));
  put(w, o, "dst", j_inst_ref(w, c->dst));
  put(w, o, "domain", cJSON_CreateString(rp__domain_name(c->domain)));
  if (c->domain == RP_DOMAIN_RECT)
    put_rect(w, put(w, o, "rect", cJSON_CreateObject()), &c->rect);
  else
    put(w, o, "rect", cJSON_CreateNull());
  put(w, o, "redop", cJSON_CreateString(rp__redop_name(c->redop)));
  put(w, o, "group", cJSON_CreateNumber(op->group));
  put(w, o, "pop_kind",
      op->group ? cJSON_CreateString(rp__pop_name(op->pop_kind))
                : cJSON_CreateNull());
  put(w, o, "backward", cJSON_CreateBool(op->group && op->pop_backward));
  put(w, o, "inserted", cJSON_CreateBool(op->inserted));
}

static rp_status ops_json(writer *w, cJSON *graph) {
  cJSON *ops = put(w, graph, "ops", cJSON_CreateArray());
  for (rp_op_id id = 0; id < w->g->nops && ops; id++) {
    const rp_gop *op = &w->g->ops[id];
    cJSON *o = put(w, ops, NULL, cJSON_CreateObject());
    put(w, o, "id", cJSON_CreateNumber(id));
    put(w, o, "kind",
        cJSON_CreateString(op->kind == RP_OP_TASK ? "task" : "copy"));
    if (op->kind == RP_OP_COPY) {
      copy_json(w, o, op);
    } else {
      rp_status st = task_json(w, o, id, op);
      if (st)
        return st;
    }
    if (op->name[0]) /* optional: unnamed ops as before */
      put(w, o, "name", cJSON_CreateString(op->name));
  }
  return RP_OK;
}

static void edges_json(writer *w, cJSON *graph) {
  cJSON *edges = put(w, graph, "edges", cJSON_CreateArray());
  for (uint32_t i = 0; i < w->g->nedges && edges; i++) {
    cJSON *e = put(w, edges, NULL, cJSON_CreateArray());
    put(w, e, NULL, cJSON_CreateNumber(w->g->edges[i].from));
    put(w, e, NULL, cJSON_CreateNumber(w->g->edges[i].to));
    if (w->g->edges[i].inferred) /* optional third element */
      put(w, e, NULL, cJSON_CreateString("inferred"));
  }
}

static void ports_json(writer *w, cJSON *graph, const char *key,
                       const rp_gport *ports, uint32_t n) {
  cJSON *arr = put(w, graph, key, cJSON_CreateArray());
  for (uint32_t i = 0; i < n && arr; i++) {
    cJSON *p = put(w, arr, NULL, cJSON_CreateObject());
    put(w, p, "name", cJSON_CreateString(ports[i].name));
    cJSON *ops = put(w, p, "ops", cJSON_CreateArray());
    for (uint32_t k = 0; k < ports[i].nops && ops; k++)
      put(w, ops, NULL, cJSON_CreateNumber(ports[i].ops[k]));
  }
}

/* The recording runtime's machine (optional key "machine"): CPU worker
 * count, the logical device of each GPU processor after them, and every
 * memory, so that `reprise dump` models the machine anywhere. */
static void machine_json(writer *w, cJSON *graph) {
  const rp_runtime *rt = w->g->rt;
  unsigned ncpu = rp__cpu_workers(rt), np = rp_proc_count(rt);
  cJSON *m = put(w, graph, "machine", cJSON_CreateObject());
  put(w, m, "cpus", cJSON_CreateNumber(ncpu));
  cJSON *gpus = put(w, m, "gpus", cJSON_CreateArray());
  for (unsigned p = ncpu; p < np && gpus; p++) {
    const rp_proc_info *pi = rp__proc(rt, p);
    put(w, gpus, NULL, cJSON_CreateNumber(pi ? pi->device : 0));
  }
  cJSON *mems = put(w, m, "mems", cJSON_CreateArray());
  for (unsigned k = 0; k < rp_mem_count(rt) && mems; k++) {
    rp_mem_info mi;
    if (rp_mem_query(rt, k, &mi) != RP_OK)
      continue;
    cJSON *o = put(w, mems, NULL, cJSON_CreateObject());
    put(w, o, "mem", cJSON_CreateString(rp__mem_kind_name(mi.kind)));
    put(w, o, "device", cJSON_CreateNumber(mi.device));
  }
}

static rp_status graph_body(writer *w, cJSON *graph) {
  cJSON *insts = put(w, graph, "instances", cJSON_CreateArray());
  for (uint32_t i = 0; i < w->ix.n && insts; i++) {
    rp_status st = inst_json(w, insts, i);
    if (st)
      return st;
  }
  rp_status st = mirrors_json(w, graph);
  if (!st)
    st = ops_json(w, graph);
  if (st)
    return st;
  edges_json(w, graph);
  ports_json(w, graph, "preconditions", w->g->pre, w->g->npre);
  ports_json(w, graph, "postconditions", w->g->post, w->g->npost);
  machine_json(w, graph);
  return RP_OK;
}

/* The whole document: header, checksum over the finished body, body. */
static rp_status graph_doc(const rp_graph *g, cJSON **out) {
  writer w = {.g = g};
  rp_status st = index_build(g, &w.ix);
  if (st)
    return st;
  cJSON *doc = cJSON_CreateObject();
  cJSON *graph = cJSON_CreateObject();
  put(&w, doc, "format", cJSON_CreateString(RP_GRAPH_FORMAT));
  put(&w, doc, "version", cJSON_CreateNumber(RP_GRAPH_VERSION));
  st = graph ? graph_body(&w, graph) : RP_OK;
  index_free(&w.ix);
  if (!st && !w.oom) {
    char sum[40];
    snprintf(sum, sizeof sum, RP_GRAPH_CHECKSUM_PREFIX "%016llx",
             (unsigned long long)rp__graph_checksum(graph));
    put(&w, doc, "checksum", cJSON_CreateString(sum));
  }
  put(&w, doc, "graph", graph);
  if (!st && w.oom)
    st = rp__err(RP_ENOMEM, "graph file: out of memory");
  if (st) {
    cJSON_Delete(doc);
    return st;
  }
  *out = doc;
  return RP_OK;
}

/* The values the loader counts in v's text (json_strict.h: every value
 * but the first follows a '[', '{' or ','), less the first. */
static uint64_t json_values(const cJSON *v) {
  if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
    return 0;
  uint64_t n = 0, k = 0;
  for (const cJSON *c = v->child; c; c = c->next, k++)
    n += json_values(c);
  return n + (k ? k : 1);
}

/* The loader's limits (graph_io.h), checked before anything is written so
 * that every file written can be read back: RP_ERANGE naming the first
 * one exceeded. */
static rp_status file_limits(const rp_graph *g, const cJSON *doc,
                             uint32_t ninsts) {
  /* doc == NULL: only the limits the graph's counts decide, checked before
   * the document is built, so an over-limit graph is refused at once. */
  const char *what = NULL;
  uint64_t have = 0, max = 0;
#define RP_LIMIT(n, m, w)                                                      \
  if (!what && (uint64_t)(n) > (uint64_t)(m))                                  \
  what = (w), have = (uint64_t)(n), max = (uint64_t)(m)
  RP_LIMIT(g->nops, RP_GRAPH_MAX_OPS, "ops");
  RP_LIMIT(g->nedges, RP_GRAPH_MAX_EDGES, "edges");
  if (doc)
    RP_LIMIT(ninsts, RP_GRAPH_MAX_INSTS, "instances");
  RP_LIMIT(g->npre, RP_GRAPH_MAX_PORTS, "preconditions");
  RP_LIMIT(g->npost, RP_GRAPH_MAX_PORTS, "postconditions");
  uint64_t bindings = 0;
  for (uint32_t i = 0; i < g->npre + g->npost; i++) {
    const rp_gport *p = i < g->npre ? &g->pre[i] : &g->post[i - g->npre];
    RP_LIMIT(p->nops, RP_GRAPH_MAX_PORT_OPS, "ops bound to one port");
    bindings += p->nops;
  }
  RP_LIMIT(bindings, RP_GRAPH_MAX_BINDINGS, "port bindings");
  for (uint32_t i = 0; i < g->nops; i++) {
    RP_LIMIT(g->ops[i].nacc, RP_GRAPH_MAX_ACCESSES, "accesses of one op");
    RP_LIMIT(g->ops[i].ninterp, RP_GRAPH_MAX_INTERPS,
             "interpolations of one op");
  }
  if (doc) {
    RP_LIMIT(1 + json_values(doc), RP_GRAPH_MAX_VALUES, "JSON values");
  } else {
    /* The fewest values the document can have: an edge is an array of two
     * numbers; a task op an object of 12 keys, a copy one of 11; an access
     * or an interpolation an object of 3. */
    uint64_t least = 3 * (uint64_t)g->nedges;
    for (uint32_t i = 0; i < g->nops; i++)
      least += g->ops[i].kind == RP_OP_TASK
                   ? 13 + 4 * ((uint64_t)g->ops[i].nacc + g->ops[i].ninterp)
                   : 12;
    if (!what && least > RP_GRAPH_MAX_VALUES)
      return rp__err(RP_ERANGE,
                     "the graph's file would have at least %llu JSON values, "
                     "more than a graph file may hold (%u: the loader's "
                     "limit), so nothing is written",
                     (unsigned long long)least, RP_GRAPH_MAX_VALUES);
  }
#undef RP_LIMIT
  if (!what)
    return RP_OK;
  return rp__err(RP_ERANGE,
                 "the graph has %llu %s, more than a graph file may hold "
                 "(%llu: the loader's limit), so nothing is written",
                 (unsigned long long)have, what, (unsigned long long)max);
}

/* The file's text, checked against the loader's limits so that every file
 * written can be read back. */
static rp_status graph_text(const rp_graph *g, char **out, const char *what) {
  cJSON *doc;
  rp_status st = file_limits(g, NULL, 0);
  if (!st)
    st = graph_doc(g, &doc);
  if (st)
    return rp__err_prefix(st, "%s: ", what);
  const cJSON *insts = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(doc, "graph"), "instances");
  if ((st = file_limits(g, doc, (uint32_t)cJSON_GetArraySize(insts)))) {
    cJSON_Delete(doc);
    return rp__err_prefix(st, "%s: ", what);
  }
  char *text = cJSON_Print(doc);
  cJSON_Delete(doc);
  if (!text)
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  size_t len = strlen(text);
  if (len > RP_GRAPH_FILE_MAX) {
    cJSON_free(text);
    return rp__err(RP_ERANGE,
                   "%s: the graph file would be %zu bytes (the "
                   "limit is %u)",
                   what, len, RP_GRAPH_FILE_MAX);
  }
  *out = text;
  return RP_OK;
}

static rp_status write_all(FILE *f, const char *text, const char *what,
                           const char *name) {
  size_t len = strlen(text);
  errno = 0; /* a failure's cause, not one left from before */
  if (fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF ||
      fflush(f) != 0 || ferror(f))
    return rp__err(RP_EIO, "%s: writing %s failed: %s", what, name,
                   rp__write_cause(errno));
  return RP_OK;
}

rp_status rp__graph_json_write(const rp_graph *g, FILE *f) {
  char *text;
  rp_status st = graph_text(g, &text, "rp_graph_dump");
  if (st)
    return st;
  st = write_all(f, text, "rp_graph_dump", "the JSON dump");
  cJSON_free(text);
  return st;
}

/* Through the one output writer (reprise.h "Output files"): a failed or
 * interrupted save never leaves a truncated graph file behind, and a path
 * that is not a regular file is refused before anything is written. */
static rp_status save_text(const char *text, const char *path) {
  rp_output *o;
  rp_status st = rp_output_open(path, &o);
  if (st)
    return rp__err_prefix(st, "rp_graph_save: '%s': ", path);
  if ((st = write_all(rp_output_file(o), text, "rp_graph_save", path))) {
    rp_output_abort(o);
    return st;
  }
  if ((st = rp_output_commit(o)))
    return rp__err_prefix(st, "rp_graph_save: '%s': ", path);
  return RP_OK;
}

rp_status rp_graph_save(const rp_graph *g, const char *path) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_save");
  if (gst_)
    return gst_;
  if (!g || !path)
    return rp__err(RP_EINVAL, "rp_graph_save: NULL argument");
  /* The loader refuses cycles: a file that could not load back is not
   * written (the JSON dump still shows a cyclic graph). */
  uint32_t *order = malloc(sizeof *order * (g->nops ? g->nops : 1));
  if (!order)
    return rp__err(RP_ENOMEM, "rp_graph_save: out of memory");
  rp_status st = rp__graph_topo(g, order);
  free(order);
  if (st)
    return rp__err_prefix(st, "rp_graph_save: ");
  char *text;
  st = graph_text(g, &text, "rp_graph_save");
  if (st)
    return st;
  st = save_text(text, path);
  cJSON_free(text);
  return st;
}

#else /* !REPRISE_HAVE_CJSON */

rp_status rp__graph_json_write(const rp_graph *g, FILE *f) {
  RP_UNUSED(g);
  RP_UNUSED(f);
  return rp__err(RP_EUNSUPPORTED, "JSON graph files and dumps need cJSON, "
                                  "which this build was configured without");
}

rp_status rp_graph_save(const rp_graph *g, const char *path) {
  rp_status gst_ = rp__graph_check(g, "rp_graph_save");
  if (gst_)
    return gst_;
  if (!g || !path)
    return rp__err(RP_EINVAL, "rp_graph_save: NULL argument");
  return rp__err(RP_EUNSUPPORTED, "rp_graph_save: graph files need cJSON, "
                                  "which this build was configured without");
}

#endif
