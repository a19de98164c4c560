/* capture/graph_load.c — loading graph files (format: graph_io.h,
 * docs/debugging.md "Graph files").
 *
 * The loader trusts nothing in the file. In order: size and value-count
 * limits before parsing (so a file cannot make cJSON exhaust memory), the
 * header (format, then version, so a newer file says RP_EVERSION rather
 * than failing on a key it does not know), the checksum, then a strict
 * schema walk (unknown, missing or repeated keys are errors) that feeds
 * every op, edge and port through the builder, so a loaded graph passed the
 * same checks as a built one. Cycles are refused at load: a graph that can
 * never be instantiated is better reported where the file is named. Any
 * failure destroys the partial graph and frees the instances the loader
 * allocated. Error details name the JSON path ("graph.ops[3].args") or the
 * byte offset. */
#include "graph_io.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_CJSON

#define PATH_LEN 128

/* dst = "parent.key[i]" (or "parent.key" when i is UINT32_MAX). */
static void subpath(char *dst, const char *parent, const char *key,
                    uint32_t i) {
  int n = i == UINT32_MAX
              ? snprintf(dst, PATH_LEN, "%s.%s", parent, key)
              : snprintf(dst, PATH_LEN, "%s.%s[%u]", parent, key, i);
  if (n < 0 || n >= PATH_LEN) /* cannot happen for our keys: mark it */
    memcpy(dst + PATH_LEN - 4, "...", 4);
}

/* An array entry's key, "key[i]": errors about one entry of an array
 * name that entry (graph.ops[3].shard_procs[2]), not the array. */
#define ELEM_LEN 48
static const char *elem(char buf[ELEM_LEN], const char *key, uint32_t i) {
  snprintf(buf, ELEM_LEN, "%s[%u]", key, i);
  return buf;
}

typedef struct group_tag {
  int kind; /* rp_pop_kind, -1 while no op of the group was seen */
  int backward;
} group_tag;

typedef struct loader {
  rp_runtime *rt;
  rp_graph *g;
  const rp_inst *caller; /* the caller's table, or NULL: allocate */
  rp_inst *table;        /* ninst handles (caller's copy or allocated) */
  uint32_t ninst;
  uint32_t nalloc;  /* leading table entries the loader allocated */
  uint32_t used;    /* table entries referenced so far (first-use order) */
  size_t max_alloc; /* budget for allocated instances, every memory */
  size_t alloc_bytes;
  uint32_t nops; /* ops in the file */
  group_tag *groups;
  uint32_t bindings;
  uint32_t *msrc; /* per mirror: its source's table index */
  uint8_t *mused; /* per mirror: referenced by an op */
} loader;

/* ---- JSON accessors: each names the path in its error ---- */

/* Bytes of file text an error detail quotes at most. */
#define QUOTE_MAX 40

typedef struct quoted {
  char s[4 * QUOTE_MAX + 4]; /* every byte as \xNN, then "..." */
} quoted;

/* File text (a key, a value) as an error detail quotes it: its first
 * QUOTE_MAX bytes, '\\' and every byte outside printable ASCII as the text
 * \xNN (control bytes, bytes that are no UTF-8: the DOT dump shows names
 * so), "..." when cut, so no byte of a file reaches a terminal raw. */
static const char *quote(const char *s, quoted *q) {
  size_t k = 0, i = 0;
  for (; s[i] && i < QUOTE_MAX; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\')
      q->s[k++] = (char)c;
    else
      k += (size_t)snprintf(q->s + k, sizeof q->s - k, "\\x%02x", c);
  }
  if (s[i])
    k += (size_t)snprintf(q->s + k, sizeof q->s - k, "...");
  q->s[k] = 0;
  return q->s;
}

typedef const char *(*name_fn)(int v);

static rp_status check_object(const cJSON *o, const char *path,
                              const char *const *keys, int nrequired) {
  if (!cJSON_IsObject(o))
    return rp__err(RP_EFORMAT, "%s: expected an object", path);
  for (const cJSON *c = o->child; c; c = c->next) {
    if (!c->string)
      return rp__err(RP_EFORMAT, "%s: member without a key", path);
    int k = 0;
    while (keys[k] && strcmp(keys[k], c->string))
      k++;
    quoted q;
    if (!keys[k])
      return rp__err(RP_EFORMAT, "%s: unknown key '%s'", path,
                     quote(c->string, &q));
    for (const cJSON *d = o->child; d != c; d = d->next)
      if (!strcmp(d->string, c->string))
        return rp__err(RP_EFORMAT, "%s: key '%s' appears twice", path,
                       c->string);
  }
  for (int k = 0; k < nrequired; k++)
    if (!cJSON_GetObjectItemCaseSensitive(o, keys[k]))
      return rp__err(RP_EFORMAT, "%s: missing key '%s'", path, keys[k]);
  return RP_OK;
}

static const cJSON *field(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* An integer as sign and magnitude: a JSON number (integral, within
 * +-2^53, where doubles are exact) or a decimal string. 0 ok, 1 not an
 * integer, 2 out of range. */
static int parse_integer(const cJSON *v, int *neg, uint64_t *mag) {
  if (cJSON_IsNumber(v)) {
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
      return 1;
    if (fabs(d) > RP_JSON_EXACT_INT)
      return 2;
    *neg = d < 0;
    *mag = (uint64_t)fabs(d);
    return 0;
  }
  if (!cJSON_IsString(v) || !v->valuestring)
    return 1;
  const char *s = v->valuestring;
  *neg = *s == '-';
  s += *neg;
  if (!*s)
    return 1;
  *mag = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return 1;
    if (__builtin_mul_overflow(*mag, 10, mag) ||
        __builtin_add_overflow(*mag, (uint64_t)(*s - '0'), mag))
      return 2;
  }
  return 0;
}

/* path.key, or key alone at the top level (path ""). */
#define AT(path) (path), *(path) ? "." : ""

/* parse_integer's refusal. A decimal string out of range is quoted with
 * the range (it is a string already); a number out of range that the
 * field could hold as a decimal string (its range reaches past 2^53) says
 * so; a field of small range names it. */
static rp_status integer_err(int why, const cJSON *v, const char *path,
                             const char *key, long long lo,
                             unsigned long long hi) {
  if (why == 1)
    return rp__err(RP_EFORMAT, "%s%s%s: expected an integer", AT(path), key);
  if (cJSON_IsString(v)) { /* sign and digits only: parse_integer saw them */
    size_t n = strlen(v->valuestring);
    return rp__err(RP_ERANGE, "%s%s%s: %.32s%s out of range [%lld, %llu]",
                   AT(path), key, v->valuestring, n > 32 ? "..." : "", lo, hi);
  }
  if (hi <= (1ull << 53) && lo >= -(1ll << 53))
    return rp__err(RP_ERANGE, "%s%s%s: out of range [%lld, %llu]", AT(path),
                   key, lo, hi);
  return rp__err(RP_ERANGE,
                 "%s%s%s: integer out of range (integers beyond "
                 "+-2^53 must be decimal strings)",
                 AT(path), key);
}

static rp_status get_i64(const cJSON *v, const char *path, const char *key,
                         int64_t lo, int64_t hi, int64_t *out) {
  int neg;
  uint64_t mag;
  int why = parse_integer(v, &neg, &mag);
  unsigned long long uhi = hi < 0 ? 0 : (unsigned long long)hi;
  if (why)
    return integer_err(why, v, path, key, lo, uhi);
  if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
    return integer_err(2, v, path, key, lo, uhi);
  int64_t x = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  if (x < lo || x > hi)
    return rp__err(RP_ERANGE, "%s%s%s: %lld out of range [%lld, %lld]",
                   AT(path), key, (long long)x, (long long)lo, (long long)hi);
  *out = x;
  return RP_OK;
}

/* An integer in [min, max] (min >= 0). */
static rp_status get_u64_in(const cJSON *v, const char *path, const char *key,
                            uint64_t min, uint64_t max, uint64_t *out) {
  int neg;
  uint64_t mag;
  int why = parse_integer(v, &neg, &mag);
  if (why)
    return integer_err(why, v, path, key, (long long)min, max);
  if ((neg && mag) || mag < min || mag > max)
    return rp__err(RP_ERANGE, "%s%s%s: %s%llu out of range [%llu, %llu]",
                   AT(path), key, neg ? "-" : "", (unsigned long long)mag,
                   (unsigned long long)min, (unsigned long long)max);
  *out = mag;
  return RP_OK;
}

static rp_status get_u64(const cJSON *v, const char *path, const char *key,
                         uint64_t max, uint64_t *out) {
  return get_u64_in(v, path, key, 0, max, out);
}

static rp_status get_u32_in(const cJSON *v, const char *path, const char *key,
                            uint32_t min, uint32_t max, uint32_t *out) {
  uint64_t x;
  rp_status st = get_u64_in(v, path, key, min, max, &x);
  if (!st)
    *out = (uint32_t)x;
  return st;
}

static rp_status get_u32(const cJSON *v, const char *path, const char *key,
                         uint32_t max, uint32_t *out) {
  return get_u32_in(v, path, key, 0, max, out);
}

static rp_status get_str(const cJSON *v, const char *path, const char *key,
                         const char **out) {
  if (!cJSON_IsString(v) || !v->valuestring)
    return rp__err(RP_EFORMAT, "%s.%s: expected a string", path, key);
  *out = v->valuestring;
  return RP_OK;
}

static rp_status get_bool(const cJSON *v, const char *path, const char *key,
                          int *out) {
  if (!cJSON_IsBool(v))
    return rp__err(RP_EFORMAT, "%s.%s: expected true or false", path, key);
  *out = cJSON_IsTrue(v);
  return RP_OK;
}

static rp_status get_enum(const cJSON *v, const char *path, const char *key,
                          name_fn name, int n, int *out) {
  const char *s = NULL;
  rp_status st = get_str(v, path, key, &s);
  if (st)
    return st;
  for (int i = 0; i < n; i++) /* "?" names a value that has no name */
    if (strcmp(name(i), "?") && !strcmp(name(i), s)) {
      *out = i;
      return RP_OK;
    }
  quoted q;
  return rp__err(RP_EFORMAT, "%s.%s: unknown value '%s'", path, key,
                 quote(s, &q));
}

/* An array of at most max entries. */
static rp_status get_array(const cJSON *v, const char *path, const char *key,
                           uint32_t max, uint32_t *n) {
  if (!cJSON_IsArray(v))
    return rp__err(RP_EFORMAT, "%s.%s: expected an array", path, key);
  uint32_t count = 0;
  for (const cJSON *c = v->child; c; c = c->next)
    if (++count > max)
      return rp__err(RP_ERANGE, "%s.%s: more than %u entries", path, key, max);
  *n = count;
  return RP_OK;
}

/* 1..RP_MAX_DIM integers (a rectangle corner or strides). */
static rp_status get_dims(const cJSON *v, const char *path, const char *key,
                          int64_t out[RP_MAX_DIM], int *dim) {
  uint32_t n = 0;
  rp_status st = get_array(v, path, key, UINT32_MAX, &n);
  if (st)
    return st;
  if (n < 1 || n > RP_MAX_DIM)
    return rp__err(RP_ESHAPE, "%s.%s: %u dimensions (1..%d allowed)", path, key,
                   n, RP_MAX_DIM);
  int d = 0;
  char k[ELEM_LEN];
  for (const cJSON *c = v->child; c; c = c->next, d++)
    if ((st = get_i64(c, path, elem(k, key, (uint32_t)d), INT64_MIN, INT64_MAX,
                      &out[d])) != RP_OK)
      return st;
  *dim = (int)n;
  return RP_OK;
}

/* "lo" and "hi" members of o. */
static rp_status get_rect(const cJSON *o, const char *path, rp_rect *r) {
  memset(r, 0, sizeof *r);
  int dlo, dhi;
  rp_status st = get_dims(field(o, "lo"), path, "lo", r->lo, &dlo);
  if (!st)
    st = get_dims(field(o, "hi"), path, "hi", r->hi, &dhi);
  if (st)
    return st;
  if (dlo != dhi)
    return rp__err(RP_ESHAPE, "%s: lo has %d dimensions, hi %d", path, dlo,
                   dhi);
  r->dim = dlo;
  return RP_OK;
}

static const char *priv_n(int v) {
  return rp__priv_name((rp_privilege)v);
}
static const char *redop_n(int v) {
  return rp__redop_name((rp_redop)v);
}
static const char *domain_n(int v) {
  return rp__domain_name((rp_copy_domain)v);
}
static const char *pop_n(int v) {
  return rp__pop_name((rp_pop_kind)v);
}
static const char *mem_n(int v) {
  return rp__mem_kind_name((rp_mem_kind)v);
}
static const char *dtype_n(int v) {
  return rp_dtype_name((rp_dtype)v);
}

/* ---- the instance table ---- */

typedef struct inst_desc {
  rp_mem_kind mem;
  int device;
  rp_dtype dtype;
  rp_rect rect;
  int64_t strides[RP_MAX_DIM];
  const char *name; /* optional; NULL none (points into the JSON tree) */
} inst_desc;

static const char *const INST_KEYS[] = {
    "id", "mem", "device", "dtype", "lo", "hi", "strides", "name", NULL};

/* An optional "name" (instances, ops): NULL when absent, else checked
 * against the name rules (RP_NAME_MAX). */
static rp_status get_name(const cJSON *o, const char *path, const char **name) {
  const cJSON *v = field(o, "name");
  *name = NULL;
  if (!v)
    return RP_OK;
  rp_status st = get_str(v, path, "name", name);
  if (!st && (st = rp__name_check(*name, "name")) != RP_OK)
    st = rp__err_prefix(RP_EFORMAT, "%s.", path);
  return st;
}

/* A memory's "device": a GPU memory's logical device (0 or more), -1 for
 * system and pinned memory. */
static rp_status get_device(const cJSON *o, const char *path, int mem,
                            int64_t max, int64_t *dev) {
  rp_status st = get_i64(field(o, "device"), path, "device",
                         mem == RP_MEM_GPU ? 0 : -1, max, dev);
  if (!st && mem != RP_MEM_GPU && *dev != -1)
    return rp__err(RP_EFORMAT, "%s.device: %lld (-1 for %s memory)", path,
                   (long long)*dev, rp__mem_kind_name((rp_mem_kind)mem));
  return st;
}

static rp_status parse_inst(const cJSON *o, uint32_t i, inst_desc *d) {
  char path[PATH_LEN];
  snprintf(path, sizeof path, "graph.instances[%u]", i);
  rp_status st = check_object(o, path, INST_KEYS, 7);
  if (st)
    return st;
  int64_t id, dev;
  int mem, dtype = 0, sdim;
  if ((st = get_i64(field(o, "id"), path, "id", 0, INT64_MAX, &id)) != RP_OK)
    return st;
  if ((uint64_t)id != i)
    return rp__err(RP_EFORMAT, "%s.id: %lld (entries must be in id order)",
                   path, (long long)id);
  if ((st = get_enum(field(o, "mem"), path, "mem", mem_n, 3, &mem)) ||
      (st = get_device(o, path, mem, 65535, &dev)))
    return st;
  if (get_enum(field(o, "dtype"), path, "dtype", dtype_n, RP_DTYPE_COUNT_,
               &dtype))
    return rp__err_prefix(RP_ETYPE, "element type: ");
  if ((st = get_rect(o, path, &d->rect)) ||
      (st = get_dims(field(o, "strides"), path, "strides", d->strides, &sdim)))
    return st;
  if (sdim != d->rect.dim)
    return rp__err(RP_ESHAPE, "%s.strides: %d strides for %d dimensions", path,
                   sdim, d->rect.dim);
  if ((st = get_name(o, path, &d->name)) != RP_OK)
    return st;
  d->mem = (rp_mem_kind)mem;
  d->device = (int)dev;
  d->dtype = (rp_dtype)dtype;
  return RP_OK;
}

/* The caller's instance for entry i must have the entry's type and shape. */
static rp_status check_caller_inst(loader *L, uint32_t i, const inst_desc *d) {
  rp_instance_info info;
  rp_inst inst = L->caller[i];
  rp_status qs = rp_instance_query(L->rt, inst, &info);
  if (qs != RP_OK)
    return rp__err(qs,
                   "instance table entry %u: the caller's insts[%u] "
                   "(instance %#llx) %s",
                   i, i, (unsigned long long)inst.id, rp__inst_missing(inst));
  if (info.dtype != d->dtype)
    return rp__err(RP_ETYPE,
                   "instance table entry %u: the file says %s, "
                   "the caller's insts[%u] is %s",
                   i, rp_dtype_name(d->dtype), i, rp_dtype_name(info.dtype));
  int same = info.rect.dim == d->rect.dim;
  for (int k = 0; same && k < d->rect.dim; k++)
    same = info.rect.lo[k] == d->rect.lo[k] && info.rect.hi[k] == d->rect.hi[k];
  char want[RP_XFER_RECT_STR], have[RP_XFER_RECT_STR];
  rp_xfer_rect_str(&d->rect, want, sizeof want);
  rp_xfer_rect_str(&info.rect, have, sizeof have);
  if (!same)
    return rp__err(RP_ESHAPE,
                   "instance table entry %u: the file says "
                   "rectangle %s, the caller's insts[%u] covers %s",
                   i, want, i, have);
  for (int k = 0; k < d->rect.dim; k++)
    if (info.strides[k] != d->strides[k])
      return rp__err(RP_ESHAPE,
                     "instance table entry %u: the file says "
                     "stride %lld in dimension %d, the caller's insts[%u] "
                     "has %lld",
                     i, (long long)d->strides[k], k, i,
                     (long long)info.strides[k]);
  L->table[i] = inst;
  return RP_OK;
}

/* Bytes the layout spans, as the engine computes them: 0 when the layout
 * is invalid (the engine refuses it before allocating), SIZE_MAX when the
 * size overflows. */
static size_t layout_bytes(const inst_desc *d) {
  uint64_t span = 1, last;
  for (int k = 0; k < d->rect.dim; k++) {
    int64_t ext;
    if (d->strides[k] <= 0 || d->rect.hi[k] < d->rect.lo[k])
      return 0;
    if (__builtin_sub_overflow(d->rect.hi[k], d->rect.lo[k], &ext) ||
        __builtin_mul_overflow((uint64_t)d->strides[k], (uint64_t)ext, &last) ||
        __builtin_add_overflow(span, last, &span))
      return SIZE_MAX;
  }
  size_t bytes;
  return rp__mul_ok((size_t)span, rp_dtype_size(d->dtype), &bytes) ? bytes
                                                                   : SIZE_MAX;
}

/* Keeps the instances the loader allocates within its budget (every
 * memory: a device would otherwise zero what a tiny file asks for), so a
 * file cannot make it allocate more than RP_GRAPH_ALLOC_MAX (or the
 * caller's cap). */
static rp_status charge(loader *L, uint32_t i, const inst_desc *d) {
  size_t limit = L->max_alloc ? L->max_alloc : RP_GRAPH_ALLOC_MAX;
  size_t bytes = layout_bytes(d), total;
  if (rp__runtime_is_model(L->rt)) /* a model's instances have no storage */
    return RP_OK;
  if (bytes && (!rp__add_ok(L->alloc_bytes, bytes, &total) || total > limit))
    return rp__err(RP_ERANGE,
                   "instance table entry %u: %s%zu bytes would take the "
                   "instances the loader allocates past its limit of %zu "
                   "bytes (pass instances, or raise the limit)",
                   i, bytes == SIZE_MAX ? "more than " : "", bytes, limit);
  L->alloc_bytes += bytes;
  return RP_OK;
}

static rp_status alloc_inst(loader *L, uint32_t i, const inst_desc *d) {
  rp_mem mem;
  rp_status st = charge(L, i, d);
  if (st)
    return st;
  if ((st = rp_mem_find(L->rt, d->mem, d->device, &mem)) != RP_OK)
    return rp__err(st,
                   "instance table entry %u: the runtime has no %s "
                   "memory%s",
                   i, rp__mem_kind_name(d->mem),
                   d->mem == RP_MEM_GPU ? " for that device" : "");
  st = rp_instance_create(L->rt, mem, d->dtype, &d->rect, d->strides,
                          &L->table[i]);
  if (st)
    return rp__err_prefix(st, "instance table entry %u: ", i);
  L->nalloc++;
  if (d->name) /* checked by parse_inst: cannot fail */
    rp_instance_set_name(L->rt, L->table[i], d->name);
  return RP_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Two table entries bound to one instance would merge them: refused. */
static rp_status check_distinct(const loader *L) {
  uint64_t *ids = malloc(sizeof *ids * (L->ninst ? L->ninst : 1));
  if (!ids)
    return rp__err(RP_ENOMEM, "out of memory");
  for (uint32_t i = 0; i < L->ninst; i++)
    ids[i] = L->table[i].id;
  qsort(ids, L->ninst, sizeof *ids, cmp_u64);
  uint64_t dup = 0;
  for (uint32_t i = 1; i < L->ninst && !dup; i++)
    if (ids[i] == ids[i - 1])
      dup = ids[i];
  free(ids);
  if (!dup)
    return RP_OK;
  uint32_t first = UINT32_MAX, second = 0;
  for (uint32_t i = 0; i < L->ninst; i++)
    if (L->table[i].id == dup) {
      if (first != UINT32_MAX) {
        second = i;
        break;
      }
      first = i;
    }
  return rp__err(RP_EINVAL,
                 "instance table entries %u and %u are bound to one "
                 "instance: the caller's insts[%u] and insts[%u] are both "
                 "%#llx",
                 first, second, first, second, (unsigned long long)dup);
}

static rp_status load_insts(loader *L, const cJSON *arr) {
  uint32_t n = 0;
  rp_status st = get_array(arr, "graph", "instances", RP_GRAPH_MAX_INSTS, &n);
  if (st)
    return st;
  if (L->caller && L->ninst != n)
    return rp__err(RP_EINVAL,
                   "the caller passed %u instances, the file's "
                   "instance table has %u entries",
                   L->ninst, n);
  L->ninst = n;
  if (n && !(L->table = rp__calloc(n, sizeof *L->table)))
    return rp__err(RP_ENOMEM, "out of memory");
  uint32_t i = 0;
  for (const cJSON *c = arr->child; c; c = c->next, i++) {
    inst_desc d;
    if ((st = parse_inst(c, i, &d)) != RP_OK)
      return st;
    st = L->caller ? check_caller_inst(L, i, &d) : alloc_inst(L, i, &d);
    if (st)
      return st;
  }
  return L->caller ? check_distinct(L) : RP_OK;
}

static rp_status mirror_ref(loader *L, const cJSON *v, const char *path,
                            const char *key, rp_inst *out, uint32_t *src);

/* A reference to table entry v: in range, and in first-use order. A
 * mirror reference ({"mirror": k}) uses mirror k's source. */
static rp_status inst_ref(loader *L, const cJSON *v, const char *path,
                          const char *key, rp_inst *out) {
  uint32_t i = 0;
  rp_status st = cJSON_IsObject(v) ? mirror_ref(L, v, path, key, out, &i)
                                   : get_u32(v, path, key, UINT32_MAX, &i);
  if (st)
    return st;
  if (i >= L->ninst)
    return rp__err(RP_ERANGE,
                   "%s.%s: instance %u out of range (the table "
                   "has %u entries)",
                   path, key, i, L->ninst);
  if (i > L->used)
    return rp__err(RP_EFORMAT,
                   "%s.%s: first use of instance %u before "
                   "instance %u (the table must be in first-use order)",
                   path, key, i, L->used);
  if (i == L->used)
    L->used++;
  if (!cJSON_IsObject(v))
    *out = L->table[i];
  return RP_OK;
}

/* The builder's and the planner's details name instances by handle
 * ("src and dst are the same instance 0x100800000"), which the file does
 * not hold: each handle of the table or a mirror gets its place in the
 * file after it ("instance 0x100800000 (graph.instances[0])"). st. */
static rp_status name_handles(const loader *L, rp_status st) {
  char out[512];
  size_t k = 0;
  int in_quote = 0; /* inside '...': the file's own text, left as it is */
  for (const char *d = rp_error_detail(); *d && k + 1 < sizeof out;) {
    char *end = NULL;
    unsigned long long v = 0;
    in_quote ^= *d == '\'';
    if (!in_quote && d[0] == '0' && d[1] == 'x' &&
        isxdigit((unsigned char)d[2]))
      v = strtoull(d + 2, &end, 16);
    if (!end || end == d + 2) {
      out[k++] = *d++;
      continue;
    }
    char where[48] = "";
    rp_inst h = {(uint64_t)v};
    for (uint32_t i = 0; i < L->ninst && !where[0]; i++)
      if (L->table[i].id == h.id)
        snprintf(where, sizeof where, " (graph.instances[%u])", i);
    if (!where[0] && rp__is_mirror(h))
      snprintf(where, sizeof where, " (graph.mirrors[%u])",
               (unsigned)(h.id >> 32));
    if (!strncmp(end, " (graph.", 8)) /* named already */
      where[0] = 0;
    int n =
        snprintf(out + k, sizeof out - k, "%.*s%s", (int)(end - d), d, where);
    k = n < 0 || (size_t)n >= sizeof out - k ? sizeof out - 1 : k + (size_t)n;
    d = end;
  }
  out[k] = 0;
  return rp__err(st, "%s", out);
}

/* ---- mirrors (copy insertion; the key is optional) ---- */

static const char *const MIRROR_KEYS[] = {"id", "source", "mem", "device",
                                          NULL};

static rp_status load_mirror(loader *L, const cJSON *o, uint32_t k) {
  char path[PATH_LEN];
  snprintf(path, sizeof path, "graph.mirrors[%u]", k);
  int64_t id, dev;
  int mem;
  uint32_t src;
  rp_mem m;
  rp_status st = check_object(o, path, MIRROR_KEYS, 4);
  if (st || (st = get_i64(field(o, "id"), path, "id", 0, INT64_MAX, &id)))
    return st;
  if ((uint64_t)id != k)
    return rp__err(RP_EFORMAT, "%s.id: %lld (entries must be in id order)",
                   path, (long long)id);
  if ((st = get_u32(field(o, "source"), path, "source", UINT32_MAX, &src)) ||
      (st = get_enum(field(o, "mem"), path, "mem", mem_n, 3, &mem)) ||
      (st = get_device(o, path, mem, 65535, &dev)))
    return st;
  if (src >= L->ninst)
    return rp__err(RP_ERANGE,
                   "%s.source: instance %u out of range (the "
                   "table has %u entries)",
                   path, src, L->ninst);
  if ((st = rp_mem_find(L->rt, (rp_mem_kind)mem, (int)dev, &m)) != RP_OK)
    return rp__err(st, "%s: the runtime has no %s memory%s", path,
                   rp__mem_kind_name((rp_mem_kind)mem),
                   mem == RP_MEM_GPU ? " for that device" : "");
  uint32_t idx;
  if ((st = rp__graph_add_mirror(L->g, L->table[src], m, &idx)) != RP_OK)
    return name_handles(L, rp__err_prefix(st, "%s: ", path));
  L->msrc[k] = src;
  return RP_OK;
}

static rp_status load_mirrors(loader *L, const cJSON *arr) {
  if (!arr)
    return RP_OK;
  uint32_t n = 0;
  rp_status st = get_array(arr, "graph", "mirrors", RP_GRAPH_MAX_INSTS, &n);
  if (st)
    return st;
  L->msrc = rp__calloc(n ? n : 1, sizeof *L->msrc);
  L->mused = rp__calloc(n ? n : 1, 1);
  if (!L->msrc || !L->mused)
    return rp__err(RP_ENOMEM, "graph.mirrors: out of memory");
  uint32_t k = 0;
  for (const cJSON *c = arr->child; c && !st; c = c->next, k++)
    st = load_mirror(L, c, k);
  return st;
}

static const char *const MREF_KEYS[] = {"mirror", NULL};

/* {"mirror": k}: *out gets the mirror's reference, *src its source's table
 * index (for the first-use order). */
static rp_status mirror_ref(loader *L, const cJSON *v, const char *path,
                            const char *key, rp_inst *out, uint32_t *src) {
  char mpath[PATH_LEN];
  subpath(mpath, path, key, UINT32_MAX);
  uint32_t k;
  rp_status st = check_object(v, mpath, MREF_KEYS, 1);
  if (st || (st = get_u32(field(v, "mirror"), mpath, "mirror", UINT32_MAX, &k)))
    return st;
  if (k >= L->g->nmirrors)
    return rp__err(RP_ERANGE,
                   "%s.mirror: mirror %u out of range (the file "
                   "has %u)",
                   mpath, k, L->g->nmirrors);
  L->mused[k] = 1;
  *out = rp__mirror_ref(k);
  *src = L->msrc[k];
  return RP_OK;
}

/* ---- task ops ---- */

typedef struct task_parts {
  rp_proc *shard_procs;
  unsigned char *args;
  rp_access *acc;
  rp_interp *ips;
} task_parts;

static void parts_free(task_parts *t) {
  free(t->shard_procs);
  free(t->args);
  free(t->acc);
  free(t->ips);
}

static rp_status get_proc(const cJSON *v, const char *path, const char *key,
                          rp_proc *out) {
  if (cJSON_IsString(v) && v->valuestring && !strcmp(v->valuestring, "any")) {
    *out = RP_PROC_ANY;
    return RP_OK;
  }
  return get_u32(v, path, key, RP_PROC_ANY - 1, out);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static rp_status get_args(const cJSON *v, const char *path, rp_launch *l,
                          task_parts *t) {
  const char *s = NULL;
  rp_status st = get_str(v, path, "args", &s);
  if (st)
    return st;
  size_t len = strlen(s);
  if (len % 2)
    return rp__err(RP_EFORMAT, "%s.args: odd number of hex digits (%zu)", path,
                   len);
  if (len / 2 > RP_MAX_ARGS)
    return rp__err(RP_ERANGE, "%s.args: %zu bytes (max %u)", path, len / 2,
                   RP_MAX_ARGS);
  if (len && !(t->args = malloc(len / 2)))
    return rp__err(RP_ENOMEM, "%s.args: out of memory", path);
  for (size_t i = 0; i < len; i += 2) {
    int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);
    if (hi < 0 || lo < 0)
      return rp__err(RP_EFORMAT,
                     "%s.args: character %zu is not a hex "
                     "digit",
                     path, hi < 0 ? i : i + 1);
    t->args[i / 2] = (unsigned char)(hi << 4 | lo);
  }
  l->args = t->args;
  l->args_size = len / 2;
  return RP_OK;
}

static rp_status get_shard_procs(const cJSON *v, const char *path, rp_launch *l,
                                 task_parts *t) {
  if (cJSON_IsNull(v))
    return RP_OK;
  uint32_t n = 0;
  rp_status st = get_array(v, path, "shard_procs", RP_GRAPH_MAX_SHARDS, &n);
  if (st)
    return st;
  if (n != l->shards)
    return rp__err(RP_ESHAPE, "%s.shard_procs: %u processors for %u shards",
                   path, n, l->shards);
  if (!(t->shard_procs = malloc(sizeof *t->shard_procs * n)))
    return rp__err(RP_ENOMEM, "%s.shard_procs: out of memory", path);
  uint32_t i = 0;
  char k[ELEM_LEN];
  for (const cJSON *c = v->child; c; c = c->next, i++)
    if ((st = get_proc(c, path, elem(k, "shard_procs", i),
                       &t->shard_procs[i])) != RP_OK)
      return st;
  l->shard_procs = t->shard_procs;
  return RP_OK;
}

static const char *const ACC_KEYS[] = {"inst", "priv", "redop", NULL};

static rp_status get_accesses(loader *L, const cJSON *v, const char *opath,
                              rp_launch *l, task_parts *t) {
  uint32_t n = 0;
  rp_status st = get_array(v, opath, "accesses", RP_GRAPH_MAX_ACCESSES, &n);
  if (st)
    return st;
  if (n && !(t->acc = rp__calloc(n, sizeof *t->acc)))
    return rp__err(RP_ENOMEM, "%s.accesses: out of memory", opath);
  uint32_t i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    char path[PATH_LEN];
    int priv = 0, redop = 0;
    subpath(path, opath, "accesses", i);
    if ((st = check_object(c, path, ACC_KEYS, 3)) ||
        (st = inst_ref(L, field(c, "inst"), path, "inst", &t->acc[i].inst)) ||
        (st = get_enum(field(c, "priv"), path, "priv", priv_n, 5, &priv)) ||
        (st = get_enum(field(c, "redop"), path, "redop", redop_n, 2, &redop)))
      return st;
    t->acc[i].priv = (rp_privilege)priv;
    t->acc[i].redop = (rp_redop)redop;
  }
  l->accesses = t->acc;
  l->naccess = n;
  return RP_OK;
}

static const char *const INTERP_KEYS[] = {"src", "dst", "bytes", NULL};

static rp_status get_interp(const cJSON *c, const char *path, rp_interp *ip) {
  uint64_t src, dst = RP_INTERP_SHARDS, bytes;
  rp_status st = check_object(c, path, INTERP_KEYS, 3);
  if (!st)
    st = get_u64(field(c, "src"), path, "src", SIZE_MAX, &src);
  const cJSON *d = field(c, "dst");
  if (!st && !(cJSON_IsString(d) && !strcmp(d->valuestring, "shards")))
    st = get_u64(d, path, "dst", SIZE_MAX - 1, &dst);
  if (!st)
    st = get_u64(field(c, "bytes"), path, "bytes", SIZE_MAX, &bytes);
  if (st)
    return st;
  *ip = (rp_interp){(size_t)src, (size_t)dst, (size_t)bytes};
  return RP_OK;
}

static rp_status get_interps(const cJSON *v, const char *opath, rp_launch *l,
                             task_parts *t) {
  uint32_t n = 0;
  rp_status st = get_array(v, opath, "interps", RP_GRAPH_MAX_INTERPS, &n);
  if (st)
    return st;
  if (n && !(t->ips = rp__calloc(n, sizeof *t->ips)))
    return rp__err(RP_ENOMEM, "%s.interps: out of memory", opath);
  uint32_t i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    char path[PATH_LEN];
    subpath(path, opath, "interps", i);
    if ((st = get_interp(c, path, &t->ips[i])) != RP_OK)
      return st;
  }
  l->interps = t->ips;
  l->ninterp = n;
  return RP_OK;
}

static const char *const TASK_KEYS[] = {"id",
                                        "kind",
                                        "task",
                                        "proc",
                                        "shards",
                                        "shard_procs",
                                        "workspace_bytes",
                                        "workspace_align",
                                        "cost_ns",
                                        "args",
                                        "accesses",
                                        "interps",
                                        "name",
                                        NULL};

static rp_status parse_task(loader *L, const cJSON *o, const char *path,
                            rp_launch *l, task_parts *t) {
  const char *name = NULL;
  uint64_t wsb = 0, wsa = 0;
  rp_status st = check_object(o, path, TASK_KEYS, 12);
  if (!st)
    st = get_str(field(o, "task"), path, "task", &name);
  if (!st && !*name)
    return rp__err(RP_EFORMAT, "%s.task: an empty name", path);
  if (!st && (st = rp__name_check(name, "task")) != RP_OK)
    return rp__err_prefix(RP_EFORMAT, "%s.", path);
  if (!st && rp_task_find(L->rt, name, &l->task) != RP_OK)
    return rp__err(RP_ENOTASK,
                   "%s.task: no task named '%.64s' is "
                   "registered on this runtime",
                   path, name);
  if (st || (st = get_proc(field(o, "proc"), path, "proc", &l->proc)) ||
      (st = get_u32_in(field(o, "shards"), path, "shards", 1,
                       RP_GRAPH_MAX_SHARDS, &l->shards)))
    return st;
  if ((st = get_shard_procs(field(o, "shard_procs"), path, l, t)) ||
      (st = get_u64(field(o, "workspace_bytes"), path, "workspace_bytes",
                    SIZE_MAX, &wsb)) ||
      (st = get_u64(field(o, "workspace_align"), path, "workspace_align",
                    SIZE_MAX, &wsa)) ||
      (st = get_u64(field(o, "cost_ns"), path, "cost_ns", UINT64_MAX,
                    &l->cost_ns)) ||
      (st = get_args(field(o, "args"), path, l, t)) ||
      (st = get_accesses(L, field(o, "accesses"), path, l, t)) ||
      (st = get_interps(field(o, "interps"), path, l, t)))
    return st;
  l->workspace_bytes = (size_t)wsb;
  l->workspace_align = (size_t)wsa;
  return RP_OK;
}

static rp_status load_task(loader *L, const cJSON *o, const char *path) {
  rp_launch l;
  task_parts t;
  memset(&l, 0, sizeof l);
  memset(&t, 0, sizeof t);
  rp_status st = parse_task(L, o, path, &l, &t);
  if (!st && (st = rp__graph_add_task_mirrored(L->g, &l, NULL)) != RP_OK)
    rp__err_as(st, "%s: ", path); /* the path, not the builder call */
  parts_free(&t);
  return st;
}

/* ---- copy ops ---- */

static int rect_within(const rp_rect *in, const rp_rect *out) {
  if (in->dim != out->dim)
    return 0;
  for (int d = 0; d < in->dim; d++)
    if (in->lo[d] < out->lo[d] || in->hi[d] > out->hi[d])
      return 0;
  return 1;
}

static rp_status check_rect(const rp_rect *r, const char *path) {
  for (int d = 0; d < r->dim; d++)
    if (r->lo[d] > r->hi[d])
      return rp__err(RP_ESHAPE, "%s.rect: empty or inverted in dimension %d",
                     path, d);
  return RP_OK;
}

/* What rp_graph_add_copy checks, for the copy ops of a file (this branch
 * builds them with rp__graph_append). */
static rp_status check_copy(loader *L, const rp_copy *c, const char *path) {
  if (rp__is_mirror(c->src) || rp__is_mirror(c->dst))
    return rp__check_mirror_copy(L->g, c, path);
  rp_access acc[2] = {{c->src, RP_READ, RP_REDOP_NONE},
                      {c->dst, RP_WRITE, RP_REDOP_NONE}};
  rp_status st = rp__check_accesses(L->rt, acc, 2, path);
  if (st)
    return st;
  rp_instance_info s, d;
  rp_instance_query(L->rt, c->src, &s);
  rp_instance_query(L->rt, c->dst, &d);
  if (s.dtype != d.dtype)
    return rp__err(RP_ETYPE, "%s: copies %s into %s", path,
                   rp_dtype_name(s.dtype), rp_dtype_name(d.dtype));
  if (c->redop == RP_REDOP_SUM && s.dtype == RP_U8)
    return rp__err(RP_ETYPE, "%s: no sum reduction for %s", path,
                   rp_dtype_name(s.dtype));
  if (s.rect.dim != d.rect.dim)
    return rp__err(RP_ESHAPE, "%s: source has %d dimensions, destination %d",
                   path, s.rect.dim, d.rect.dim);
  int fits = 1;
  if (c->domain == RP_DOMAIN_SRC)
    fits = rect_within(&s.rect, &d.rect);
  else if (c->domain == RP_DOMAIN_DST)
    fits = rect_within(&d.rect, &s.rect);
  else if (c->domain == RP_DOMAIN_RECT) {
    if ((st = check_rect(&c->rect, path)) != RP_OK)
      return st;
    fits = rect_within(&c->rect, &s.rect) && rect_within(&c->rect, &d.rect);
  }
  if (!fits)
    return rp__err(RP_ESHAPE,
                   "%s: the %s domain does not fit both "
                   "instances",
                   path, rp__domain_name(c->domain));
  /* the rest of what rp_graph_add_copy checks: the planner's (one source
   * and destination, a domain that is not empty, overlap, channels) */
  if ((st = rp__check_copy(L->rt, c, UINT32_MAX)) != RP_OK)
    return rp__err_as(st, "%s: ", path); /* the path, not the planner */
  return RP_OK;
}

/* A parallel operator's copies share their group's kind and direction. */
static rp_status check_group(loader *L, const rp_gop *op, const char *path) {
  if (!op->group)
    return RP_OK;
  group_tag *t = &L->groups[op->group];
  if (t->kind < 0) {
    t->kind = (int)op->pop_kind;
    t->backward = op->pop_backward;
    return RP_OK;
  }
  if (t->kind != (int)op->pop_kind || t->backward != op->pop_backward)
    return rp__err(RP_EFORMAT,
                   "%s: group %u is %s %s in an earlier op, "
                   "%s %s here",
                   path, op->group, rp__pop_name(t->kind),
                   t->backward ? "bwd" : "fwd", rp__pop_name(op->pop_kind),
                   op->pop_backward ? "bwd" : "fwd");
  return RP_OK;
}

static rp_status parse_group(loader *L, const cJSON *o, const char *path,
                             rp_gop *op) {
  int kind = 0;
  rp_status st = get_u32(field(o, "group"), path, "group", L->nops, &op->group);
  if (!st && op->group)
    st = get_enum(field(o, "pop_kind"), path, "pop_kind", pop_n, 4, &kind);
  else if (!st && !cJSON_IsNull(field(o, "pop_kind")))
    return rp__err(RP_EFORMAT, "%s.pop_kind: must be null outside a group",
                   path);
  if (!st)
    st = get_bool(field(o, "backward"), path, "backward", &op->pop_backward);
  if (!st && !op->group && op->pop_backward)
    return rp__err(RP_EFORMAT, "%s.backward: must be false outside a group",
                   path);
  if (!st)
    st = get_bool(field(o, "inserted"), path, "inserted", &op->inserted);
  op->pop_kind = (rp_pop_kind)kind;
  return st ? st : check_group(L, op, path);
}

static const char *const COPY_KEYS[] = {
    "id",    "kind",     "src",      "dst",      "domain", "rect", "redop",
    "group", "pop_kind", "backward", "inserted", "name",   NULL};

static rp_status parse_copy(loader *L, const cJSON *o, const char *path,
                            rp_gop *op) {
  rp_copy *c = &op->copy;
  int domain = 0, redop = 0;
  rp_status st = check_object(o, path, COPY_KEYS, 11);
  if (st || (st = inst_ref(L, field(o, "src"), path, "src", &c->src)) ||
      (st = inst_ref(L, field(o, "dst"), path, "dst", &c->dst)) ||
      (st = get_enum(field(o, "domain"), path, "domain", domain_n, 4,
                     &domain)) ||
      (st = get_enum(field(o, "redop"), path, "redop", redop_n, 2, &redop)))
    return st;
  c->domain = (rp_copy_domain)domain;
  c->redop = (rp_redop)redop;
  const cJSON *r = field(o, "rect");
  if (c->domain == RP_DOMAIN_RECT) {
    char rpath[PATH_LEN];
    subpath(rpath, path, "rect", UINT32_MAX);
    static const char *const RECT_KEYS[] = {"lo", "hi", NULL};
    if ((st = check_object(r, rpath, RECT_KEYS, 2)) ||
        (st = get_rect(r, rpath, &c->rect)))
      return st;
  } else if (!cJSON_IsNull(r)) {
    return rp__err(RP_EFORMAT, "%s.rect: must be null for the %s domain", path,
                   rp__domain_name(c->domain));
  }
  return parse_group(L, o, path, op);
}

static rp_status load_copy(loader *L, const cJSON *o, const char *path) {
  rp_gop op;
  memset(&op, 0, sizeof op);
  op.kind = RP_OP_COPY;
  op.shards = 1;
  rp_status st = parse_copy(L, o, path, &op);
  if (!st)
    st = check_copy(L, &op.copy, path);
  if (!st && (st = rp__graph_append(L->g, &op, NULL)) != RP_OK)
    rp__err_prefix(st, "%s: ", path);
  return st;
}

/* ---- ops, edges, ports ---- */

static rp_status load_op(loader *L, const cJSON *o, uint32_t i) {
  char path[PATH_LEN];
  snprintf(path, sizeof path, "graph.ops[%u]", i);
  if (!cJSON_IsObject(o))
    return rp__err(RP_EFORMAT, "%s: expected an object", path);
  const cJSON *id = field(o, "id"), *kind = field(o, "kind");
  int64_t v;
  rp_status st;
  if (!id || !kind)
    return rp__err(RP_EFORMAT, "%s: missing key '%s'", path,
                   id ? "kind" : "id");
  if ((st = get_i64(id, path, "id", 0, INT64_MAX, &v)) != RP_OK)
    return st;
  if ((uint64_t)v != i)
    return rp__err(RP_EFORMAT, "%s.id: %lld (ops must be in id order)", path,
                   (long long)v);
  const char *k = NULL, *name = NULL;
  quoted q;
  if ((st = get_str(kind, path, "kind", &k)) != RP_OK ||
      (st = get_name(o, path, &name)) != RP_OK)
    return st;
  if (!strcmp(k, "task"))
    st = load_task(L, o, path);
  else if (!strcmp(k, "copy"))
    st = load_copy(L, o, path);
  else
    return rp__err(RP_EFORMAT, "%s.kind: unknown op kind '%s'", path,
                   quote(k, &q));
  if (st) /* the builder's and planner's checks name handles */
    return name_handles(L, st);
  if (name) /* the op just appended */
    snprintf(L->g->ops[L->g->nops - 1].name, RP_NAME_MAX + 1, "%s", name);
  return st;
}

static rp_status load_ops(loader *L, const cJSON *arr) {
  rp_status st = get_array(arr, "graph", "ops", RP_GRAPH_MAX_OPS, &L->nops);
  if (st)
    return st;
  if (!(L->groups = malloc(sizeof *L->groups * ((size_t)L->nops + 1))))
    return rp__err(RP_ENOMEM, "out of memory");
  for (uint32_t i = 0; i <= L->nops; i++)
    L->groups[i].kind = -1;
  uint32_t i = 0;
  for (const cJSON *c = arr->child; c; c = c->next, i++)
    if ((st = load_op(L, c, i)) != RP_OK)
      return st;
  if (L->used < L->ninst)
    return rp__err(RP_EFORMAT,
                   "graph.instances[%u]: not referenced by any "
                   "op",
                   L->used);
  for (uint32_t k = 0; k < L->g->nmirrors; k++)
    if (!L->mused[k])
      return rp__err(RP_EFORMAT,
                     "graph.mirrors[%u]: not referenced by any "
                     "op",
                     k);
  return RP_OK;
}

static rp_status op_ref(loader *L, const cJSON *v, const char *path,
                        const char *key, rp_op_id *out) {
  rp_status st = get_u32(v, path, key, UINT32_MAX, out);
  if (!st && *out >= L->g->nops)
    return rp__err(RP_ERANGE,
                   "%s.%s: op %u out of range (the graph has %u "
                   "ops)",
                   path, key, *out, L->g->nops);
  return st;
}

/* Edges go in through rp__graph_edge behind this table of those already
 * added: the builder's own duplicate scan is linear per edge. */
typedef struct edge_set {
  uint64_t *keys; /* from << 32 | to; UINT64_MAX = empty */
  uint32_t *at;   /* per key: the index in graph.edges that added it */
  size_t mask;
} edge_set;

/* The index in graph.edges of an earlier from -> to, or UINT32_MAX (and
 * then i is recorded as its index). */
static uint32_t edge_seen(edge_set *s, rp_op_id from, rp_op_id to, uint32_t i) {
  uint64_t k = (uint64_t)from << 32 | to;
  size_t h = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & s->mask;
  while (s->keys[h] != UINT64_MAX && s->keys[h] != k)
    h = (h + 1) & s->mask;
  if (s->keys[h] == k)
    return s->at[h];
  s->keys[h] = k;
  s->at[h] = i;
  return UINT32_MAX;
}

static rp_status load_edge(loader *L, edge_set *s, const cJSON *e, uint32_t i) {
  char path[PATH_LEN];
  snprintf(path, sizeof path, "graph.edges[%u]", i);
  uint32_t n = 0;
  rp_op_id from, to;
  rp_status st = get_array(e, path, "", 3, &n);
  if (st || n < 2)
    return rp__err(RP_EFORMAT,
                   "%s: expected [from, to] or [from, to, "
                   "\"inferred\"]",
                   path);
  const cJSON *mark = e->child->next->next;
  if (mark && !(cJSON_IsString(mark) && mark->valuestring &&
                !strcmp(mark->valuestring, "inferred")))
    return rp__err(RP_EFORMAT,
                   "%s[2]: expected \"inferred\" (an edge "
                   "capture inferred) or nothing",
                   path);
  /* named as JSON paths: graph.edges[i][0] (from), graph.edges[i][1] */
  char k0[ELEM_LEN], k1[ELEM_LEN];
  snprintf(k0, sizeof k0, "edges[%u][0]", i);
  snprintf(k1, sizeof k1, "edges[%u][1]", i);
  if ((st = op_ref(L, e->child, "graph", k0, &from)) ||
      (st = op_ref(L, e->child->next, "graph", k1, &to)))
    return st;
  /* a graph holds an edge once (rp_graph_add_edge merges a repeat) and
   * rp_graph_save writes it once: a repeat is an edited file, refused
   * rather than merged (merging hid it, and made an inferred edge an
   * asked-for one) */
  uint32_t first = edge_seen(s, from, to, i);
  if (first != UINT32_MAX)
    return rp__err(RP_EFORMAT, "%s: the edge %u -> %u repeats graph.edges[%u]",
                   path, from, to, first);
  return mark ? rp__graph_edge_inferred(L->g, from, to)
              : rp__graph_edge(L->g, from, to);
}

static rp_status load_edges(loader *L, const cJSON *arr) {
  uint32_t n = 0;
  rp_status st = get_array(arr, "graph", "edges", RP_GRAPH_MAX_EDGES, &n);
  if (st)
    return st;
  size_t cap = 16;
  while (cap < 2 * (size_t)n)
    cap *= 2;
  edge_set s = {malloc(sizeof *s.keys * cap), malloc(sizeof *s.at * cap),
                cap - 1};
  if (!s.keys || !s.at) {
    free(s.keys), free(s.at);
    return rp__err(RP_ENOMEM, "graph.edges: out of memory");
  }
  memset(s.keys, 0xff, sizeof *s.keys * cap);
  uint32_t i = 0;
  for (const cJSON *c = arr->child; c && !st; c = c->next, i++)
    st = load_edge(L, &s, c, i);
  free(s.keys), free(s.at);
  return st;
}

static const char *const PORT_KEYS[] = {"name", "ops", NULL};

static rp_status load_port(loader *L, const cJSON *o, const char *path,
                           int pre) {
  const char *name = NULL;
  uint32_t n = 0;
  rp_port_id p = 0;
  rp_status st = check_object(o, path, PORT_KEYS, 2);
  if (st || (st = get_str(field(o, "name"), path, "name", &name)) ||
      (st = get_array(field(o, "ops"), path, "ops", RP_GRAPH_MAX_PORT_OPS, &n)))
    return st;
  if (!*name) /* a port needs a name: a file's fault, as a bad one is */
    return rp__err(RP_EFORMAT, "%s.name: an empty name (a port needs one)",
                   path);
  if (rp__name_check(name, "name") != RP_OK)
    return rp__err_prefix(RP_EFORMAT, "%s.", path);
  if ((L->bindings += n) > RP_GRAPH_MAX_BINDINGS)
    return rp__err(RP_ERANGE,
                   "%s.ops: more than %u port bindings in the "
                   "file",
                   path, RP_GRAPH_MAX_BINDINGS);
  st = pre ? rp_graph_add_precondition(L->g, name, &p)
           : rp_graph_add_postcondition(L->g, name, &p);
  if (st)
    return rp__err_prefix(st, "%s: ", path);
  uint32_t j = 0;
  char k[ELEM_LEN];
  for (const cJSON *c = field(o, "ops")->child; c; c = c->next, j++) {
    rp_op_id op;
    if ((st = op_ref(L, c, path, elem(k, "ops", j), &op)) != RP_OK)
      return st;
    st = pre ? rp_graph_bind_precondition(L->g, p, op)
             : rp_graph_bind_postcondition(L->g, p, op);
    if (st)
      return rp__err_prefix(st, "%s.%s: ", path, k);
  }
  return RP_OK;
}

static rp_status load_ports(loader *L, const cJSON *arr, const char *key,
                            int pre) {
  uint32_t n = 0;
  rp_status st = get_array(arr, "graph", key, RP_GRAPH_MAX_PORTS, &n);
  uint32_t i = 0;
  for (const cJSON *c = st ? NULL : arr->child; c && !st; c = c->next, i++) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "graph.%s[%u]", key, i);
    st = load_port(L, c, path, pre);
  }
  return st;
}

static rp_status check_acyclic(const rp_graph *g) {
  uint32_t *order = malloc(sizeof *order * (g->nops ? g->nops : 1));
  if (!order)
    return rp__err(RP_ENOMEM, "out of memory");
  rp_status st = rp__graph_topo(g, order);
  free(order);
  return st;
}

/* the first five are required; "mirrors" only in graphs with mirrors,
 * "machine" (the recording runtime's processors and memories) optional */
static const char *const GRAPH_KEYS[] = {
    "instances",      "ops",     "edges",   "preconditions",
    "postconditions", "mirrors", "machine", NULL};

static const char *const MACHINE_KEYS[] = {"cpus", "gpus", "mems", NULL};
static const char *const MMEM_KEYS[] = {"mem", "device", NULL};

/* One entry of graph.machine.mems. */
static rp_status parse_machine_mem(const cJSON *o, uint32_t i,
                                   rp_mem_info *mi) {
  char path[PATH_LEN];
  snprintf(path, sizeof path, "graph.machine.mems[%u]", i);
  int mem;
  int64_t dev;
  rp_status st = check_object(o, path, MMEM_KEYS, 2);
  if (st || (st = get_enum(field(o, "mem"), path, "mem", mem_n, 3, &mem)) ||
      (st = get_device(o, path, mem, RP_MODEL_MAX_DEVICE, &dev)))
    return st;
  *mi = (rp_mem_info){(rp_mem_kind)mem, (int)dev};
  return RP_OK;
}

/* graph.machine: {"cpus": N, "gpus": [device...], "mems": [{"mem",
 * "device"}...]} into *m (the system memory entry is left out). */
static rp_status parse_machine(const cJSON *o, rp_machine_desc *m) {
  const char *path = "graph.machine";
  uint32_t ng = 0, nm = 0, i = 0;
  memset(m, 0, sizeof *m);
  rp_status st = check_object(o, path, MACHINE_KEYS, 3);
  if (st ||
      (st = get_u32_in(field(o, "cpus"), path, "cpus", 1, 128, &m->cpus)) ||
      (st =
           get_array(field(o, "gpus"), path, "gpus", RP_MODEL_MAX_GPUS, &ng)) ||
      (st = get_array(field(o, "mems"), path, "mems", RP_MODEL_MAX_MEMS + 1,
                      &nm))) /* + system memory, which the file lists */
    return st;
  char k[ELEM_LEN];
  for (const cJSON *c = field(o, "gpus")->child; c; c = c->next, i++) {
    int64_t d;
    if ((st = get_i64(c, path, elem(k, "gpus", i), 0, RP_MODEL_MAX_DEVICE,
                      &d)) != RP_OK)
      return st;
    m->gpu_device[m->ngpus++] = (int)d;
  }
  i = 0;
  for (const cJSON *c = field(o, "mems")->child; c; c = c->next, i++) {
    rp_mem_info mi;
    if ((st = parse_machine_mem(c, i, &mi)) != RP_OK)
      return st;
    if (mi.kind != RP_MEM_SYSTEM && m->nmems == RP_MODEL_MAX_MEMS)
      return rp__err(RP_ERANGE,
                     "%s.mems: more than %d memories besides system memory",
                     path, RP_MODEL_MAX_MEMS);
    if (mi.kind != RP_MEM_SYSTEM)
      m->mems[m->nmems++] = mi;
  }
  return RP_OK;
}

static rp_status load_graph(loader *L, const cJSON *graph) {
  rp_machine_desc m;
  rp_status st = check_object(graph, "graph", GRAPH_KEYS, 5);
  if (!st && field(graph, "machine")) /* checked; the runtime is given */
    st = parse_machine(field(graph, "machine"), &m);
  if (st || (st = load_insts(L, field(graph, "instances"))) ||
      (st = load_mirrors(L, field(graph, "mirrors"))) ||
      (st = load_ops(L, field(graph, "ops"))) ||
      (st = load_edges(L, field(graph, "edges"))) ||
      (st = load_ports(L, field(graph, "preconditions"), "preconditions", 1)) ||
      (st = load_ports(L, field(graph, "postconditions"), "postconditions", 0)))
    return st;
  return check_acyclic(L->g);
}

/* ---- the document: limits, parse, header, checksum ---- */

/* Refuses a file over RP_GRAPH_FILE_MAX bytes before anything reads it. */
static rp_status prescan(const char *buf, size_t len) {
  (void)buf;
  if (len > RP_GRAPH_FILE_MAX)
    return rp__err(RP_ERANGE, "the file has %zu bytes (the limit is %u)", len,
                   RP_GRAPH_FILE_MAX);
  return RP_OK;
}

/* 1 when s[0, n) is a JSON number: -? (0 | [1-9][0-9]*) (.[0-9]+)?
 * ([eE][+-]?[0-9]+)?; with cut, also when it is the start of one cut
 * short ("-", "1.", "2.5E-"). cJSON reads more ("047", "47.", "1.e5"). */
static int json_number_or_cut(const char *s, size_t n, int cut) {
  size_t k = 0, d;
#define DIGITS() for (d = k; k < n && s[k] >= '0' && s[k] <= '9'; k++)
  if (k < n && s[k] == '-')
    k++;
  if (k < n && s[k] == '0')
    k++;
  else if (k < n && s[k] >= '1' && s[k] <= '9')
    DIGITS();
  else
    return cut && k == n && n;
  if (k < n && s[k] == '.') {
    k++;
    DIGITS();
    if (k == d)
      return cut && k == n;
  }
  if (k < n && (s[k] == 'e' || s[k] == 'E')) {
    k++;
    if (k < n && (s[k] == '+' || s[k] == '-'))
      k++;
    DIGITS();
    if (k == d)
      return cut && k == n;
  }
#undef DIGITS
  return k == n;
}

static int json_number(const char *s, size_t n) {
  return json_number_or_cut(s, n, 0);
}

/* The code unit of the 4 hex digits at b[i], or -1. */
static long hex4(const char *b, size_t i, size_t len) {
  if (i > len || len - i < 4)
    return -1;
  long u = 0;
  for (size_t k = 0; k < 4; k++) {
    int d = hex_digit(b[i + k]);
    if (d < 0)
      return -1;
    u = u << 4 | d;
  }
  return u;
}

/* Past the run of number bytes at b[i] (digits, sign, '.', exponent):
 * where a number starting there ends, whether or not it is one. */
static size_t number_end(const char *b, size_t i, size_t len) {
  while (i < len && b[i] && strchr("0123456789+-.eE", b[i]))
    i++;
  return i;
}

/* A UTF-8 byte order mark opens b[0, len): cJSON skips it. */
static size_t bom_len(const char *b, size_t len) {
  return len >= 3 && !memcmp(b, "\xef\xbb\xbf", 3) ? 3 : 0;
}

/* 1 when a JSON value may start at buf[i] (outside strings): after '[',
 * ',' or ':' or at the start (a byte order mark aside), white space
 * aside. Elsewhere ("graph-seg" in a file that is not JSON) the parse
 * says what is wrong. */
static int value_starts(const char *buf, size_t i) {
  while (i && strchr(" \t\n\r", buf[i - 1]))
    i--;
  return i == bom_len(buf, i) || buf[i - 1] == '[' || buf[i - 1] == ',' ||
         buf[i - 1] == ':';
}

/* Refuses what would cut a string short or make the parse itself
 * expensive: a NUL byte, a \u0000 escape inside a string or one of other
 * than 4 hex digits (cJSON reads "\uZZZZ" as a NUL), more than
 * max_values values (every value but the first follows a '[', '{' or ','
 * outside strings; cJSON spends ~64 bytes on each), nesting deeper than
 * cJSON parses (it would call that a syntax error); and control bytes
 * between tokens, which cJSON skips as white space; and a number that is
 * not JSON's (a number the text ends in is a cut, said by the parse).
 * *open_str: where the string the text ends in opens, SIZE_MAX when it
 * ends outside one; *end_num: where the number the text ends in starts
 * when it is not JSON's (cJSON reads a bare "1." or "01" as a document),
 * else SIZE_MAX. */
static rp_status scan(const char *buf, size_t len, uint64_t max_values,
                      size_t *open_str, size_t *end_num) {
  uint64_t values = 1;
  size_t depth = 0, str_at = 0;
  int in_str = 0;
  *end_num = SIZE_MAX;
  for (size_t i = 0; i < len; i++) {
    char c = buf[i];
    if (!c)
      return rp__err(RP_EFORMAT, "a NUL byte at byte %zu", i);
    if (in_str) {
      /* cJSON decodes \u0000 into a NUL that ends the C string: "a\u0000b"
       * would read as "a". */
      if (c == '\\' && i + 5 < len && buf[i + 1] == 'u' &&
          !memcmp(buf + i + 2, "0000", 4))
        return rp__err(RP_EFORMAT,
                       "a \\u0000 escape (NUL) inside a string at byte %zu", i);
      if (c == '\\' && i + 5 < len && buf[i + 1] == 'u' &&
          hex4(buf, i + 2, len) < 0)
        return rp__err(RP_EFORMAT,
                       "not JSON: a bad escape at byte %zu (\\u and "
                       "not 4 hex digits)",
                       i);
      if (c == '\\')
        i++;
      else if (c == '"')
        in_str = 0;
      continue;
    }
    if ((c == '-' || (c >= '0' && c <= '9')) && value_starts(buf, i)) {
      size_t e = number_end(buf, i, len);
      if (e < len && !json_number(buf + i, e - i))
        return rp__err(RP_EFORMAT, "not JSON: a malformed number at byte %zu",
                       i);
      if (e == len && !json_number(buf + i, e - i))
        *end_num = i;
      i = e - 1;
      continue;
    }
    if (c == '"') {
      in_str = 1;
      str_at = i;
    } else if ((unsigned char)c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      return rp__err(RP_EFORMAT, "not JSON: control byte 0x%02x at byte %zu",
                     (unsigned)c, i);
    } else if ((c == '[' || c == '{') && ++depth > CJSON_NESTING_LIMIT) {
      return rp__err(RP_ERANGE, "nested deeper than %d levels at byte %zu",
                     CJSON_NESTING_LIMIT, i);
    } else if ((c == ']' || c == '}') && depth) {
      depth--;
    }
    if ((c == '[' || c == '{' || c == ',') && ++values > max_values)
      return rp__err(RP_ERANGE, "more than %llu JSON values (at byte %zu)",
                     (unsigned long long)max_values, i);
  }
  *open_str = in_str ? str_at : SIZE_MAX;
  return RP_OK;
}

/* What a cut inside a literal or number leaves where cJSON stops: the
 * start of a value ("tr", "nul", a lone '-'), or an exponent without
 * digits ("1e", "2.5E-"). */
static int cut_token(const char *buf, size_t at, size_t len) {
  static const char *const lits[] = {"true", "false", "null"};
  const char *rest = buf + at; /* at < len */
  size_t n = len - at, p = at;
  while (p && strchr(" \t\n\r", buf[p - 1]))
    p--;
  if (p == bom_len(buf, p) || strchr("[,:", buf[p - 1])) { /* a value starts */
    if (n == 1 && rest[0] == '-')
      return 1;
    for (int k = 0; k < 3; k++)
      if (n < strlen(lits[k]) && !memcmp(rest, lits[k], n))
        return 1;
  }
  return at &&
         ((buf[at - 1] >= '0' && buf[at - 1] <= '9') || buf[at - 1] == '.') &&
         (rest[0] == 'e' || rest[0] == 'E') &&
         (n == 1 || (n == 2 && (rest[1] == '+' || rest[1] == '-')));
}

/* cJSON stops where the value it could not read begins: at an unclosed
 * string's quote, a cut literal or number's first byte, or past the end
 * (at == len). */
/* Byte at of buf lies inside a string (a scan of the quotes before it,
 * escapes skipped). */
static int in_string(const char *buf, size_t at) {
  int in = 0;
  for (size_t i = 0; i < at; i++)
    if (buf[i] == '"')
      in = !in;
    else if (in && buf[i] == '\\')
      i++;
  return in;
}

static rp_status parse_error(const char *buf, size_t at, size_t len,
                             size_t open_str) {
  if (len == 0)
    return rp__err(RP_EFORMAT, "not JSON: an empty file");
  if (strspn(buf, " \t\n\r") >= len) /* the copy ends in a space too */
    return rp__err(RP_EFORMAT, "not JSON: only white space (%zu bytes)", len);
  if (at >= len || (open_str != SIZE_MAX && at >= open_str) ||
      cut_token(buf, at, len))
    return rp__err(RP_EFORMAT,
                   "not JSON: the text ends early at byte %zu "
                   "(truncated file?)",
                   len);
  if (buf[at] == '\\' && in_string(buf, at))
    return rp__err(RP_EFORMAT,
                   "not JSON: a bad escape at byte %zu (an unknown letter, "
                   "or a \\u escape that is no character: half of a "
                   "surrogate pair such as \\ud800)",
                   at);
  return rp__err(RP_EFORMAT, "not JSON: syntax error at byte %zu", at);
}

static rp_status trailing(const char *buf, size_t at, size_t len) {
  for (size_t i = at; i < len; i++)
    if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r')
      return rp__err(RP_EFORMAT,
                     "not JSON: text after the document at "
                     "byte %zu",
                     i);
  return RP_OK;
}

/* ---- telling a failed allocation from a syntax error ----
 *
 * cJSON's parse returns NULL both when the text is not JSON and when an
 * allocation fails, and reports where it stopped either way. When it
 * fails on text that json_valid reads as one document, an allocation
 * failed: RP_ENOMEM, not a syntax error. json_valid allocates nothing and
 * is at least as strict as cJSON (RFC 8259, and the \u escapes cJSON
 * refuses). */

static size_t skip_ws(const char *b, size_t i, size_t len) {
  while (i < len && strchr(" \t\n\r", b[i]) && b[i])
    i++;
  return i;
}

/* Past the string whose quote is at b[i]; 0 when it is not one cJSON
 * reads (an unknown escape, half of a surrogate pair, no closing quote). */
static size_t string_end(const char *b, size_t i, size_t len) {
  for (i++; i < len; i++) {
    if (b[i] == '"')
      return i + 1;
    if (b[i] != '\\')
      continue;
    if (++i >= len)
      return 0;
    if (b[i] != 'u') {
      if (!b[i] || !strchr("\"\\/bfnrt", b[i]))
        return 0;
      continue;
    }
    long u = hex4(b, i + 1, len);
    i += 4;
    if (u < 0 || (u >= 0xdc00 && u <= 0xdfff))
      return 0;
    if (u >= 0xd800 && u <= 0xdbff) {
      long v = i + 2 < len && b[i + 1] == '\\' && b[i + 2] == 'u'
                   ? hex4(b, i + 3, len)
                   : -1;
      if (v < 0xdc00 || v > 0xdfff)
        return 0;
      i += 6;
    }
  }
  return 0;
}

/* Past the number or literal at b[i]; 0 when there is none. */
static size_t scalar_end(const char *b, size_t i, size_t len) {
  static const char *const lits[] = {"true", "false", "null"};
  for (int k = 0; k < 3; k++) {
    size_t n = strlen(lits[k]);
    if (len - i >= n && !memcmp(b + i, lits[k], n))
      return i + n;
  }
  size_t e = number_end(b, i, len);
  return e > i && json_number(b + i, e - i) ? e : 0;
}

/* Past an object's key and its ':' at b[i] (white space after it too);
 * 0 when there is none. */
static size_t key_end(const char *b, size_t i, size_t len) {
  if (i >= len || b[i] != '"' || !(i = string_end(b, i, len)))
    return 0;
  i = skip_ws(b, i, len);
  return i < len && b[i] == ':' ? skip_ws(b, i + 1, len) : 0;
}

/* 1 when b[0, len) is exactly one JSON document (a byte order mark
 * before it, as cJSON skips), nested at most CJSON_NESTING_LIMIT
 * levels. */
static int json_valid(const char *b, size_t len) {
  char open[CJSON_NESTING_LIMIT];
  size_t depth = 0, i = skip_ws(b, bom_len(b, len), len);
  for (;;) {
    /* a value starts at b[i] */
    if (i >= len)
      return 0;
    if (b[i] == '[' || b[i] == '{') {
      if (depth == CJSON_NESTING_LIMIT)
        return 0;
      open[depth++] = b[i];
      i = skip_ws(b, i + 1, len);
      if (i < len && b[i] == (open[depth - 1] == '[' ? ']' : '}')) {
        depth--;
        i++;
      } else {
        if (open[depth - 1] == '{' && !(i = key_end(b, i, len)))
          return 0;
        continue;
      }
    } else if (!(i = b[i] == '"' ? string_end(b, i, len)
                                 : scalar_end(b, i, len))) {
      return 0;
    }
    /* after a value: a ',' and the next, or the ends of containers */
    for (;;) {
      i = skip_ws(b, i, len);
      if (!depth)
        return i == len;
      if (i >= len)
        return 0;
      if (b[i] == ',')
        break;
      if (b[i] != (open[depth - 1] == '[' ? ']' : '}'))
        return 0;
      depth--;
      i++;
    }
    i = skip_ws(b, i + 1, len);
    if (open[depth - 1] == '{' && !(i = key_end(b, i, len)))
      return 0;
  }
}

/* Parses a NUL-terminated copy: the input need not be terminated, and a
 * terminator stops any scan past the end. A space before the terminator
 * tells the end from the last byte: cJSON reports where it stopped, but
 * no further than the last byte it was given. */
rp_status rp__json_parse_strict(const char *in, size_t len, uint64_t max_values,
                                cJSON **out) {
  if ((len && !in) || !out)
    return rp__err(RP_EINVAL, "NULL argument");
  size_t open_str = SIZE_MAX, end_num;
  rp_status st = scan(in, len, max_values, &open_str, &end_num);
  if (st)
    return st;
  char *buf = malloc(len + 2);
  if (!buf)
    return rp__err(RP_ENOMEM, "out of memory");
  if (len)
    memcpy(buf, in, len);
  buf[len] = ' ';
  buf[len + 1] = 0;
  const char *end = NULL;
  /* cJSON keeps the last parse error in a global that every parse writes:
   * parses are serialized so concurrent loads do not race on it. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  cJSON *doc = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 0);
  pthread_mutex_unlock(&lock);
  size_t at = end && end >= buf ? (size_t)(end - buf) : 0;
  /* a bare number cut in its exponent ("1e") parses as "1": a cut too */
  if (doc && at < len && cut_token(buf, at, len))
    st = parse_error(buf, at, len, open_str);
  /* a bare number that is not JSON's ("1.", "01") parses whole */
  else if (doc && end_num != SIZE_MAX)
    st = json_number_or_cut(buf + end_num, len - end_num, 1)
             ? parse_error(buf, len, len, open_str)
             : rp__err(RP_EFORMAT, "not JSON: a malformed number at byte %zu",
                       end_num);
  else
    st = doc                   ? trailing(buf, at, len)
         : json_valid(in, len) ? rp__err(RP_ENOMEM,
                                         "out of memory parsing "
                                         "%zu bytes of JSON",
                                         len)
                               : parse_error(buf, at, len, open_str);
  free(buf);
  if (st) {
    cJSON_Delete(doc);
    return st;
  }
  *out = doc;
  return RP_OK;
}

static rp_status check_checksum(const cJSON *sum, const cJSON *graph) {
  if (!sum)
    return RP_OK; /* optional: hand-written files may leave it out */
  const char *s = NULL;
  rp_status st = get_str(sum, "", "checksum", &s);
  if (st)
    return st;
  size_t plen = strlen(RP_GRAPH_CHECKSUM_PREFIX);
  uint64_t want = 0;
  int ok =
      strlen(s) == plen + 16 && !strncmp(s, RP_GRAPH_CHECKSUM_PREFIX, plen);
  for (size_t i = plen; ok && s[i]; i++) {
    int d = hex_digit(s[i]);
    ok = d >= 0;
    want = want << 4 | (uint64_t)(d < 0 ? 0 : d);
  }
  if (!ok)
    return rp__err(RP_EFORMAT,
                   ".checksum: expected \"%s\" and 16 hex "
                   "digits",
                   RP_GRAPH_CHECKSUM_PREFIX);
  uint64_t have = rp__graph_checksum(graph);
  if (have != want)
    return rp__err(RP_ECHECKSUM,
                   ".checksum: the file says %016llx, its "
                   "graph hashes to %016llx: the file is corrupt or was "
                   "edited (a file edited on purpose loads without its "
                   "\"checksum\" key)",
                   (unsigned long long)want, (unsigned long long)have);
  return RP_OK;
}

static const char *const DOC_KEYS[] = {"format", "version", "graph", "checksum",
                                       NULL};

/* format first, then version: a newer file may have keys this build does
 * not know, and should say so as RP_EVERSION. */
static rp_status header(const cJSON *doc, const cJSON **graph) {
  const cJSON *fmt = cJSON_IsObject(doc) ? field(doc, "format") : NULL;
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, RP_GRAPH_FORMAT))
    return rp__err(RP_EFORMAT, "not a reprise graph file (no \"format\": "
                               "\"" RP_GRAPH_FORMAT "\")");
  int64_t v;
  rp_status st =
      get_i64(field(doc, "version"), "", "version", 0, INT32_MAX, &v);
  if (st == RP_EFORMAT && !field(doc, "version"))
    return rp__err(RP_EFORMAT, "version: missing");
  if (st)
    return st;
  if (v != RP_GRAPH_VERSION)
    return rp__err(RP_EVERSION,
                   "graph file version %lld (this build reads "
                   "version %d)",
                   (long long)v, RP_GRAPH_VERSION);
  if ((st = check_object(doc, "(top level)", DOC_KEYS, 3)) != RP_OK)
    return st;
  *graph = field(doc, "graph");
  return check_checksum(field(doc, "checksum"), *graph);
}

static void loader_fail(loader *L) {
  rp__graph_discard(L->g);
  L->g = NULL;
  for (uint32_t i = 0; i < L->nalloc; i++)
    rp_instance_free(L->rt, L->table[i]);
}

rp_status rp__graph_load_mem(rp_runtime *rt, const void *buf, size_t len,
                             const rp_inst *insts, uint32_t ninsts,
                             size_t max_alloc, rp_graph **out) {
  if (!rt || !out || (len && !buf))
    return rp__err(RP_EINVAL, "rp_graph_load_mem: NULL argument");
  if (ninsts && !insts) /* insts == NULL goes with ninsts 0 (reprise.h) */
    return rp__err(RP_EINVAL,
                   "rp_graph_load_mem: insts is NULL but ninsts is %u", ninsts);
  cJSON *doc = NULL;
  const cJSON *graph = NULL;
  rp_status st = prescan(buf, len);
  if (!st)
    st = rp__json_parse_strict(buf, len, RP_GRAPH_MAX_VALUES, &doc);
  if (!st)
    st = header(doc, &graph);
  loader L = {
      .rt = rt, .caller = insts, .ninst = ninsts, .max_alloc = max_alloc};
  if (!st)
    st = rp_graph_create(rt, &L.g);
  if (!st && (st = load_graph(&L, graph)) != RP_OK)
    loader_fail(&L);
  if (!st)
    *out = L.g;
  free(L.table);
  free(L.groups);
  free(L.msrc);
  free(L.mused);
  cJSON_Delete(doc);
  return st;
}

rp_status rp__graph_machine(const void *buf, size_t len, rp_machine_desc *m,
                            int *present) {
  if ((len && !buf) || !m || !present)
    return rp__err(RP_EINVAL, "rp_graph_file_machine: NULL argument");
  cJSON *doc = NULL;
  const cJSON *graph = NULL;
  /* parsed into a copy: the out-parameters change only on success */
  rp_machine_desc md;
  int has = 0;
  rp_status st = prescan(buf, len);
  if (!st)
    st = rp__json_parse_strict(buf, len, RP_GRAPH_MAX_VALUES, &doc);
  if (!st)
    st = header(doc, &graph);
  if (!st && !cJSON_IsObject(graph))
    st = rp__err(RP_EFORMAT, "graph: expected an object");
  if (!st && field(graph, "machine")) {
    st = parse_machine(field(graph, "machine"), &md);
    has = !st;
  }
  cJSON_Delete(doc);
  if (st)
    return st;
  if (has)
    *m = md;
  *present = has;
  return RP_OK;
}

rp_status rp__graph_load_file(rp_runtime *rt, const char *path,
                              const rp_inst *insts, uint32_t ninsts,
                              size_t max_file, size_t max_alloc,
                              rp_graph **out) {
  rp_status cst = rp__rt_check(rt, "rp_graph_load");
  if (cst)
    return cst;
  if (!path || !out)
    return rp__err(RP_EINVAL, "rp_graph_load: NULL argument");
  if (ninsts && !insts) /* insts == NULL goes with ninsts 0 (reprise.h) */
    return rp__err(RP_EINVAL, "rp_graph_load: insts is NULL but ninsts is %u",
                   ninsts);
  char *buf = NULL;
  size_t len = 0;
  /* a regular file only (a FIFO or /dev/zero is refused, never read), of
   * at most max_file bytes: no more than max_file + 1 are ever read */
  rp_status st = rp_file_read_regular(
      path, max_file ? max_file : RP_GRAPH_FILE_MAX, &buf, &len);
  if (!st) {
    st = rp__graph_load_mem(rt, buf, len, insts, ninsts, max_alloc, out);
    free(buf);
  }
  return st ? rp__err_prefix(st, "rp_graph_load '%s': ", path) : RP_OK;
}

rp_status rp_graph_load(rp_runtime *rt, const char *path, const rp_inst *insts,
                        uint32_t ninsts, rp_graph **out) {
  return rp__graph_load_file(rt, path, insts, ninsts, 0, 0, out);
}

#else /* !REPRISE_HAVE_CJSON */

rp_status rp__graph_load_mem(rp_runtime *rt, const void *buf, size_t len,
                             const rp_inst *insts, uint32_t ninsts,
                             size_t max_alloc, rp_graph **out) {
  RP_UNUSED(rt);
  RP_UNUSED(buf);
  RP_UNUSED(len);
  RP_UNUSED(insts);
  RP_UNUSED(ninsts);
  RP_UNUSED(max_alloc);
  RP_UNUSED(out);
  return rp__err(RP_EUNSUPPORTED, "rp_graph_load: graph files need cJSON, "
                                  "which this build was configured without");
}

rp_status rp__graph_machine(const void *buf, size_t len, rp_machine_desc *m,
                            int *present) {
  RP_UNUSED(buf);
  RP_UNUSED(len);
  RP_UNUSED(m);
  RP_UNUSED(present);
  return rp__err(RP_EUNSUPPORTED, "graph files need cJSON, which this "
                                  "build was configured without");
}

rp_status rp__graph_load_file(rp_runtime *rt, const char *path,
                              const rp_inst *insts, uint32_t ninsts,
                              size_t max_file, size_t max_alloc,
                              rp_graph **out) {
  RP_UNUSED(max_file);
  rp_status cst = rp__rt_check(rt, "rp_graph_load");
  if (cst)
    return cst;
  if (!path || !out)
    return rp__err(RP_EINVAL, "rp_graph_load: NULL argument");
  if (ninsts && !insts) /* insts == NULL goes with ninsts 0 (reprise.h) */
    return rp__err(RP_EINVAL, "rp_graph_load: insts is NULL but ninsts is %u",
                   ninsts);
  return rp__graph_load_mem(rt, NULL, 0, insts, ninsts, max_alloc, out);
}

rp_status rp_graph_load(rp_runtime *rt, const char *path, const rp_inst *insts,
                        uint32_t ninsts, rp_graph **out) {
  return rp__graph_load_file(rt, path, insts, ninsts, 0, 0, out);
}

#endif
