/* tools/dump_html_svg.c — the SVG that `dot -Tsvg` writes for a level of
 * `reprise dump --format html`, compacted for the page: what the page's
 * script and style (dump_html_page.c) do not read goes (dot's SVGs as
 * written would be 12 of the 16 MB of a 10,387-op step's page). Gone:
 * comments, <title> elements (the page has its own tooltips), the <svg>
 * element's attributes (the script sets its size), the white background
 * polygon, the default text and shape attributes (the page's style says
 * them: dv_page_css), whitespace between elements, a polygon's closing
 * point and coordinate digits past the first decimal; an op's rounded box
 * becomes a <rect rx>, an edge's straight cubic a line. Attribute values
 * are quoted with ' (no \" in the page's JSON strings). Ids and classes
 * (o<op>, v<view>, e<view>_<k>, node, edge, grp, crit, graph) and the
 * graph's transform stay: the script finds nodes and edges by them. */
#include "dump_view.h"

#include <stdlib.h>
#include <string.h>

typedef struct buf {
  char *p;
  size_t n, cap;
  int oom;
} buf;

static void put(buf *b, const char *s, size_t n) {
  if (b->oom)
    return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (b->n + n + 1 > cap)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void puts_(buf *b, const char *s) {
  put(b, s, strlen(s));
}

/* x with at most one decimal, without trailing zeros (-63.98: "-64",
 * 46.11: "46.1") into s; *n its length. */
static void put_coords_into(char *s, size_t cap, double x, size_t *n) {
  double t10 = x * 10;
  if (!(t10 > -1e15 && t10 < 1e15)) { /* not a layout's: as it is */
    int len = snprintf(s, cap, "%g", x);
    *n = len < 0 ? 0 : (size_t)len;
    return;
  }
  long t = (long)(t10 < 0 ? t10 - 0.5 : t10 + 0.5);
  int len = t % 10 ? snprintf(s, cap, "%s%ld.%ld", t < 0 ? "-" : "",
                              labs(t) / 10, labs(t) % 10)
                   : snprintf(s, cap, "%ld", t / 10);
  *n = len < 0 ? 0 : (size_t)len;
}

/* The coordinates v (d, points, x, y) with put_coords_into's numbers,
 * without a trailing space; points: without the closing point that
 * repeats the first (a polygon closes itself). */
static void put_coords(buf *b, const char *v, size_t n, int points) {
  while (n && v[n - 1] == ' ')
    n--;
  if (points) {
    const char *last = v + n;
    while (last > v && last[-1] != ' ')
      last--;
    size_t first = 0;
    while (first < n && v[first] != ' ')
      first++;
    if (last > v && first < n && (size_t)(v + n - last) == first &&
        !memcmp(v, last, first))
      n = (size_t)(last - v - 1);
  }
  for (size_t i = 0; i < n;) {
    size_t j = i + (v[i] == '-');
    if (j < n && (v[j] >= '0' && v[j] <= '9')) {
      char num[48];
      size_t k = j;
      while (k < n && ((v[k] >= '0' && v[k] <= '9') || v[k] == '.'))
        k++;
      if (k - i < sizeof num) {
        memcpy(num, v + i, k - i);
        num[k - i] = 0;
        char out[48];
        size_t len = 0;
        put_coords_into(out, sizeof out, strtod(num, NULL), &len);
        put(b, out, len);
      } else {
        put(b, v + i, k - i);
      }
      i = k;
    } else {
      put(b, v + i, 1);
      i++;
    }
  }
}

/* The style's defaults (dv_page_css): attributes equal to them go. */
static int is_default(const char *tag, int ctx, const char *name, size_t nl,
                      const char *v, size_t vl) {
#define IS(s) (strlen(s) == nl && !memcmp(name, s, nl))
#define VAL(s) (strlen(s) == vl && !memcmp(v, s, vl))
  if (!strcmp(tag, "text"))
    return (IS("text-anchor") && VAL("middle")) ||
           (IS("font-family") && VAL("Helvetica,sans-Serif")) ||
           (IS("font-size") && VAL("10.00"));
  int shape = !strcmp(tag, "path") || !strcmp(tag, "polygon") ||
              !strcmp(tag, "polyline");
  if (!shape || !ctx)
    return 0;
  if (IS("stroke"))
    return VAL("black");
  if (!IS("fill"))
    return 0;
  if (ctx == 'n') /* a node: its box (op or group), a box3d's lines */
    return !strcmp(tag, "polyline") ? VAL("none")
                                    : VAL("#eef3fb") || VAL("#dde8f7");
  /* an edge: its line and its arrowhead */
  return !strcmp(tag, "path") ? VAL("none") : VAL("black");
#undef IS
#undef VAL
}

typedef struct attr {
  const char *name, *v;
  size_t nl, vl;
} attr;

enum { kAttrs = 16 };

static int named(const attr *a, const char *s) {
  return strlen(s) == a->nl && !memcmp(a->name, s, a->nl);
}

/* The numbers of v (at most max) into x; their count. */
static size_t numbers(const char *v, size_t n, double *x, size_t max) {
  size_t c = 0;
  for (size_t i = 0; i < n && c < max;) {
    if ((v[i] >= '0' && v[i] <= '9') || v[i] == '-' || v[i] == '.') {
      char num[48];
      size_t k = i + 1;
      while (k < n && ((v[k] >= '0' && v[k] <= '9') || v[k] == '.'))
        k++;
      if (k - i >= sizeof num)
        return 0;
      memcpy(num, v + i, k - i);
      num[k - i] = 0;
      x[c++] = strtod(num, NULL);
      i = k;
    } else {
      i++;
    }
  }
  return c;
}

static void put_num(buf *b, double x) {
  char s[48];
  size_t n = 0;
  put_coords_into(s, sizeof s, x, &n);
  put(b, s, n);
}

/* dot's rounded box (style=rounded: "M x,y C ..." of 25 points, the
 * corners cubic curves) as <rect rx>: a fifth of the bytes. 1 done. */
static int rounded_box(buf *b, const attr *d) {
  double x[64];
  size_t n = numbers(d->v, d->vl, x, 64);
  if (n != 50 || d->v[0] != 'M' || !memchr(d->v, 'C', d->vl))
    return 0;
  double lo[2] = {x[0], x[1]}, hi[2] = {x[0], x[1]};
  for (size_t i = 0; i < n; i++) {
    lo[i % 2] = x[i] < lo[i % 2] ? x[i] : lo[i % 2];
    hi[i % 2] = x[i] > hi[i % 2] ? x[i] : hi[i % 2];
  }
  /* the path starts on the top edge, a corner's radius from the right */
  double r = hi[0] - x[0];
  if (x[1] != lo[1] || r <= 0 || 2 * r > hi[0] - lo[0] || 2 * r > hi[1] - lo[1])
    return 0;
  puts_(b, "<rect x='"), put_num(b, lo[0]);
  puts_(b, "' y='"), put_num(b, lo[1]);
  puts_(b, "' width='"), put_num(b, hi[0] - lo[0]);
  puts_(b, "' height='"), put_num(b, hi[1] - lo[1]);
  puts_(b, "' rx='"), put_num(b, r);
  puts_(b, "'/>");
  return 1;
}

/* An edge's path of one cubic segment whose control points lie on the
 * line between its ends (dot's splines=line, and many short edges) as a
 * line: "M a L b". 1 done. */
static int straight(buf *b, const attr *d) {
  double x[10];
  size_t n = numbers(d->v, d->vl, x, 10);
  if (n != 8 || d->v[0] != 'M')
    return 0;
  double dx = x[6] - x[0], dy = x[7] - x[1], len2 = dx * dx + dy * dy;
  for (int k = 2; k <= 4; k += 2) {
    double cx = x[k] - x[0], cy = x[k + 1] - x[1];
    double cross = cx * dy - cy * dx; /* distance * length */
    if (cross * cross > 0.25 * 0.25 * len2)
      return 0;
  }
  puts_(b, "<path d='M"), put_num(b, x[0]), put(b, ",", 1), put_num(b, x[1]);
  put(b, "L", 1), put_num(b, x[6]), put(b, ",", 1), put_num(b, x[7]);
  puts_(b, "'/>");
  return 1;
}

/* One start tag <...> (s points after '<', e at '>'): written compact;
 * *ctx follows the <g> we are in ('n' node, 'e' edge, 0 other). */
static void tag(buf *b, const char *s, const char *e, int *ctx) {
  char name[16];
  size_t nl = strcspn(s, " \t\n/>");
  if (nl >= sizeof name || s + nl > e) {
    put(b, "<", 1), put(b, s, (size_t)(e - s) + 1);
    return;
  }
  memcpy(name, s, nl);
  name[nl] = 0;
  int self = e > s && e[-1] == '/';
  const char *end = self ? e - 1 : e;
  if (!strcmp(name, "svg")) { /* the script removes its size and viewBox */
    puts_(b, "<svg>");
    return;
  }
  attr a[kAttrs];
  size_t na = 0;
  for (const char *p = s + nl; p < end;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n'))
      p++;
    const char *an = p;
    while (p < end && *p != '=' && *p != ' ' && *p != '\n')
      p++;
    if (p == an)
      break;
    const char *v = p + 2, *ve = NULL;
    if (p + 1 < end && *p == '=' && (p[1] == '"' || p[1] == '\''))
      ve = memchr(v, p[1], (size_t)(end - v));
    if (!ve || na == kAttrs) { /* not name="value": the tag as it is */
      put(b, "<", 1), put(b, s, (size_t)(e - s) + 1);
      return;
    }
    a[na++] = (attr){an, v, (size_t)(p - an), (size_t)(ve - v)};
    p = ve + 1;
  }
  const attr *cls = NULL, *d = NULL;
  int dflt = 1; /* every style attribute is the default */
  for (size_t i = 0; i < na; i++) {
    cls = named(&a[i], "class") ? &a[i] : cls;
    d = named(&a[i], "d") ? &a[i] : d;
    if ((named(&a[i], "fill") || named(&a[i], "stroke")) &&
        !is_default(name, *ctx, a[i].name, a[i].nl, a[i].v, a[i].vl))
      dflt = 0;
  }
  if (self && d && dflt && na == 3 && !strcmp(name, "path") &&
      ((*ctx == 'n' && rounded_box(b, d)) || (*ctx == 'e' && straight(b, d))))
    return;
  put(b, "<", 1), put(b, name, nl);
  for (size_t i = 0; i < na; i++) {
    if (is_default(name, *ctx, a[i].name, a[i].nl, a[i].v, a[i].vl))
      continue;
    char oq = memchr(a[i].v, '\'', a[i].vl) ? '"' : '\'';
    put(b, " ", 1), put(b, a[i].name, a[i].nl), put(b, "=", 1), put(b, &oq, 1);
    int pts = named(&a[i], "points");
    if (pts || named(&a[i], "d") || named(&a[i], "x") || named(&a[i], "y"))
      put_coords(b, a[i].v, a[i].vl, pts && !strcmp(name, "polygon"));
    else
      put(b, a[i].v, a[i].vl);
    put(b, &oq, 1);
  }
  put(b, self ? "/>" : ">", self ? 2 : 1);
  if (!strcmp(name, "g"))
    *ctx = cls && cls->vl >= 4 && !memcmp(cls->v, "node", 4)   ? 'n'
           : cls && cls->vl >= 4 && !memcmp(cls->v, "edge", 4) ? 'e'
                                                               : 0;
}

/* 1: the start tag at s (after '<') is the graph's background polygon
 * (fill="white" stroke="transparent"). */
static int background(const char *s, const char *e) {
  size_t n = (size_t)(e - s);
  return n > 8 && !memcmp(s, "polygon ", 8) &&
         memmem(s, n, "fill=\"white\" stroke=\"transparent\"", 33);
}

/* 1: [s, end) starts with lit. */
static int starts(const char *s, const char *end, const char *lit) {
  size_t n = strlen(lit);
  return (size_t)(end - s) >= n && !memcmp(s, lit, n);
}

/* After the first lit in [s, end), or end when there is none. */
static const char *past(const char *s, const char *end, const char *lit) {
  size_t n = strlen(lit);
  const char *c = memmem(s, (size_t)(end - s), lit, n);
  return c ? c + n : end;
}

int dv_svg_json(FILE *out, const char *svg, size_t len) {
  buf b = {0};
  const char *s = svg, *end = svg + len;
  int ctx = 0;
  while (s < end && !b.oom) {
    if (*s != '<') { /* text: kept, but not whitespace between elements */
      const char *t = memchr(s, '<', (size_t)(end - s));
      t = t ? t : end;
      const char *w = s;
      while (w < t && (*w == ' ' || *w == '\t' || *w == '\r' || *w == '\n'))
        w++;
      if (w < t)
        put(&b, s, (size_t)(t - s));
      s = t;
      continue;
    }
    const char *gt;
    if (starts(s, end, "<!--")) {
      s = past(s + 4, end, "-->");
      continue;
    }
    if (starts(s, end, "<title>")) {
      s = past(s + 7, end, "</title>");
      continue;
    }
    if (!(gt = memchr(s, '>', (size_t)(end - s)))) {
      put(&b, s, (size_t)(end - s));
      break;
    }
    if (gt == s + 1) {
      put(&b, "<>", 2);
    } else if (s[1] == '?' || s[1] == '!') {
      /* <?xml ...?>, <!DOCTYPE ...> */
    } else if (s[1] == '/') {
      put(&b, s, (size_t)(gt - s) + 1);
      if (starts(s, gt + 1, "</g>"))
        ctx = 0;
    } else if (!background(s + 1, gt)) {
      tag(&b, s + 1, gt, &ctx);
    }
    s = gt + 1;
  }
  if (b.oom) {
    free(b.p);
    return -1;
  }
  if (b.p)
    dv_json_str(out, b.p);
  free(b.p);
  return 0;
}
