/* tools/dump_extra.c — what the dump's views read from a graph file that
 * the model (dump_model.h) does not hold: each op's argument bytes (hex,
 * for the page's op details) and the ports' names and bound ops (for
 * --diff). */
#include "dump_view.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef REPRISE_HAVE_CJSON
#include <cJSON.h>

#include "capture/json_strict.h"

/* An op index as the loader reads it (capture/graph_load.c): a whole
 * number, or a decimal string. 0 when o is neither (the loader refused
 * the file then). */
static int op_index(const cJSON *o, uint32_t *op) {
  if (cJSON_IsNumber(o) && o->valuedouble >= 0 &&
      o->valuedouble < 4294967296.0) {
    *op = (uint32_t)o->valuedouble;
    return 1;
  }
  const char *s = cJSON_IsString(o) ? o->valuestring : NULL;
  if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 10)
    return 0;
  unsigned long long v = strtoull(s, NULL, 10);
  *op = (uint32_t)v;
  return v <= UINT32_MAX;
}

static int ports(const cJSON *arr, dv_port **out, uint32_t *n) {
  int cnt = cJSON_GetArraySize(arr);
  *out = calloc(cnt ? (size_t)cnt : 1, sizeof **out);
  if (!*out)
    return -1;
  const cJSON *p;
  cJSON_ArrayForEach(p, arr) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(p, "ops"), *o;
    dv_port *d = &(*out)[(*n)++];
    d->name = strdup(cJSON_IsString(name) ? name->valuestring : "");
    int k = cJSON_GetArraySize(ops);
    d->ops = calloc(k ? (size_t)k : 1, sizeof *d->ops);
    if (!d->name || !d->ops)
      return -1;
    cJSON_ArrayForEach(o, ops) {
      if (op_index(o, &d->ops[d->nops]))
        d->nops++;
    }
  }
  return 0;
}

static int op_args(const cJSON *ops, dv_extra *x) {
  int n = cJSON_GetArraySize(ops);
  x->args = calloc(n ? (size_t)n : 1, sizeof *x->args);
  if (!x->args)
    return -1;
  const cJSON *o;
  cJSON_ArrayForEach(o, ops) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "args");
    char *h = strdup(cJSON_IsString(a) ? a->valuestring : "");
    if (!(x->args[x->nops++] = h))
      return -1;
    for (; *h; h++) /* the loader reads "0A" as "0a": one bytes, one text */
      *h = (char)tolower((unsigned char)*h);
  }
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int skipped(const char *key, const char *const *skip) {
  for (; *skip; skip++)
    if (!strcmp(key, *skip))
      return 1;
  return 0;
}

/* v with every decimal string the loader reads as an integer within
 * +-2^53 ("4096", "-2") made a number, as rp_graph_save writes it: the
 * two forms load alike, so they compare alike. Other strings (a domain,
 * "shards") stay. */
static void canon_ints(cJSON *v) {
  for (cJSON *c = v->child; c; c = c->next)
    canon_ints(c);
  const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
  const char *d = s && *s == '-' ? s + 1 : s;
  if (!d || !*d || strspn(d, "0123456789") != strlen(d) || strlen(d) > 16)
    return;
  double x = strtod(s, NULL);
  if (fabs(x) > 9007199254740992.0)
    return;
  cJSON_free(v->valuestring);
  v->valuestring = NULL;
  v->type = cJSON_Number;
  cJSON_SetNumberValue(v, x);
}

/* The object's members but those in skip, as sorted "key\tvalue\n" lines
 * (NULL out of memory); integers written as decimal strings as numbers. */
static char *rest_of(const cJSON *o, const char *const *skip) {
  int n = cJSON_GetArraySize(o), k = 0;
  char **lines = calloc(n ? (size_t)n : 1, sizeof *lines);
  if (!lines)
    return NULL;
  const cJSON *m;
  int bad = 0;
  cJSON_ArrayForEach(m, o) {
    if (!m->string || skipped(m->string, skip))
      continue;
    cJSON *c = cJSON_Duplicate(m, 1);
    char *v = NULL;
    if (c)
      canon_ints(c), v = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    if (!v || asprintf(&lines[k], "%s\t%s\n", m->string, v) < 0)
      bad = 1;
    else
      k++;
    free(v);
  }
  qsort(lines, (size_t)k, sizeof *lines, cmp_str);
  size_t total = 1;
  for (int i = 0; i < k; i++)
    total += strlen(lines[i]);
  char *s = bad ? NULL : malloc(total);
  if (s)
    s[0] = '\0';
  for (int i = 0, at = 0; i < k; i++) {
    size_t l = strlen(lines[i]);
    if (s)
      memcpy(s + at, lines[i], l + 1), at += (int)l;
    free(lines[i]);
  }
  free(lines);
  return s;
}

/* What the model (dump_model.h) already compares, with instances mapped
 * between the two graphs: the rest is compared as it is in the file. A
 * copy's "group" is a per-graph counter (an operator added earlier shifts
 * every later one): its operator shows in "pop_kind" and "backward". */
static const char *const OP_MODELLED[] = {
    "id",   "name",     "kind", "task", "proc",  "shards", "cost_ns",
    "args", "accesses", "src",  "dst",  "group", NULL};
static const char *const INST_MODELLED[] = {"id",    "name", "mem", "device",
                                            "dtype", "lo",   "hi",  NULL};

static int rests(const cJSON *arr, char ***out, uint32_t *n,
                 const char *const *skip) {
  int cnt = cJSON_GetArraySize(arr);
  *out = calloc(cnt ? (size_t)cnt : 1, sizeof **out);
  if (!*out)
    return -1;
  const cJSON *o;
  cJSON_ArrayForEach(o, arr) {
    if (!((*out)[(*n)++] = rest_of(o, skip)))
      return -1;
  }
  return 0;
}

int dv_extra_read(const char *text, size_t len, dv_extra *x, FILE *err) {
  memset(x, 0, sizeof *x);
  cJSON *doc = NULL;
  /* the parse the loader made (an allocation that fails is RP_ENOMEM, not
   * a syntax error) */
  rp_status st = rp__json_parse_strict(text, len, RP_GRAPH_MAX_VALUES, &doc);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(doc, "graph");
  int rc = -1;
  uint32_t nrest = 0;
  if (st)
    fprintf(err, "reprise dump: %s: %s\n", rp_status_name(st),
            rp_error_detail());
  else if (!cJSON_IsObject(g))
    fprintf(err, "reprise dump: not a graph file (no \"graph\" object)\n");
  else if (op_args(cJSON_GetObjectItemCaseSensitive(g, "ops"), x) ||
           rests(cJSON_GetObjectItemCaseSensitive(g, "ops"), &x->op_rest,
                 &nrest, OP_MODELLED) ||
           rests(cJSON_GetObjectItemCaseSensitive(g, "instances"),
                 &x->inst_rest, &x->ninsts, INST_MODELLED) ||
           ports(cJSON_GetObjectItemCaseSensitive(g, "preconditions"), &x->pre,
                 &x->npre) ||
           ports(cJSON_GetObjectItemCaseSensitive(g, "postconditions"),
                 &x->post, &x->npost))
    fprintf(err, "reprise dump: out of memory\n");
  else
    rc = 0;
  cJSON_Delete(doc);
  if (rc)
    dv_extra_free(x);
  return rc;
}
#else
int dv_extra_read(const char *text, size_t len, dv_extra *x, FILE *err) {
  (void)text, (void)len, (void)err;
  memset(x, 0, sizeof *x); /* no arguments, no port names */
  return 0;
}
#endif

static void ports_free(dv_port *p, uint32_t n) {
  for (uint32_t i = 0; p && i < n; i++)
    free(p[i].name), free(p[i].ops);
  free(p);
}

void dv_extra_free(dv_extra *x) {
  for (uint32_t i = 0; i < x->nops; i++) {
    if (x->args)
      free(x->args[i]);
    if (x->op_rest)
      free(x->op_rest[i]);
  }
  for (uint32_t i = 0; x->inst_rest && i < x->ninsts; i++)
    free(x->inst_rest[i]);
  free(x->args), free(x->op_rest), free(x->inst_rest);
  ports_free(x->pre, x->npre);
  ports_free(x->post, x->npost);
  memset(x, 0, sizeof *x);
}
