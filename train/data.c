/* train/data.c — synthetic data sets and data files (formats and errors
 * in data.h). */
#include "data.h"

#include "train_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BIN_MAGIC "RPRSDATA"
#define BIN_HEADER 24u

/* ---------------------------------------------------------------------- */
/* Random numbers */

void rp_rng_seed(rp_rng *r, uint64_t seed) {
  r->s = seed;
}

uint64_t rp_rng_next(rp_rng *r) { /* splitmix64 (Steele, Lea, Flood) */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float rp_rng_uniform(rp_rng *r) {
  return (float)(rp_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float rp_rng_normal(rp_rng *r) {
  /* 1 - u is in (0, 1]: log never sees 0. */
  double u1 = 1.0 - (double)(rp_rng_next(r) >> 11) * 0x1.0p-53;
  double u2 = (double)(rp_rng_next(r) >> 11) * 0x1.0p-53;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---------------------------------------------------------------------- */
/* Data sets */

void rp_data_free(rp_dataset *d) {
  if (!d)
    return;
  free(d->x);
  free(d->y);
  memset(d, 0, sizeof *d);
}

/* Allocates room for n samples; RP_ERANGE above the size limit. */
static rp_status data_alloc(rp_dataset *d, uint32_t n, uint32_t features,
                            uint32_t classes) {
  uint64_t bytes = (uint64_t)n * features * 4 + (uint64_t)n * 4;
  if (bytes > RP_DATA_MAX_BYTES)
    return rp_error_set(RP_ERANGE,
                        "data set of %u samples x %u features is %llu "
                        "bytes (max %llu)",
                        n, features, (unsigned long long)bytes,
                        (unsigned long long)RP_DATA_MAX_BYTES);
  d->x = calloc((size_t)n * features, sizeof *d->x);
  d->y = calloc(n, sizeof *d->y);
  if (!d->x || !d->y) {
    rp_data_free(d);
    return rp_error_set(RP_ENOMEM, "data set of %u samples: out of memory", n);
  }
  d->n = n;
  d->features = features;
  d->classes = classes;
  return RP_OK;
}

int rp_data_kind_parse(const char *s, rp_data_kind *out) {
  if (strcmp(s, "spirals") == 0)
    *out = RP_DATA_SPIRALS;
  else if (strcmp(s, "blobs") == 0)
    *out = RP_DATA_BLOBS;
  else
    return -1;
  return 0;
}

const char *rp_data_kind_name(rp_data_kind k) {
  return k == RP_DATA_SPIRALS ? "spirals" : k == RP_DATA_BLOBS ? "blobs" : "?";
}

static void gen_spirals(rp_dataset *d, rp_rng *r) {
  for (uint32_t i = 0; i < d->n; i++) {
    uint32_t k = (uint32_t)(rp_rng_next(r) % d->classes);
    float t = rp_rng_uniform(r);
    float a = 6.2831853f * (float)k / (float)d->classes + 4.0f * t +
              0.2f * rp_rng_normal(r);
    d->x[2 * (size_t)i] = t * sinf(a);
    d->x[2 * (size_t)i + 1] = t * cosf(a);
    d->y[i] = (int32_t)k;
  }
}

static rp_status gen_blobs(rp_dataset *d, rp_rng *r) {
  float *centers = calloc((size_t)d->classes * d->features, sizeof(float));
  if (!centers)
    return rp_error_set(RP_ENOMEM, "rp_data_generate: out of memory");
  /* Centre spread 3/sqrt(features) per dimension: two centres are about
   * 4.2 apart (3 sqrt 2) in any dimension, while the noise is N(0, 1) along
   * every direction, so the task is equally hard at 2 or 2000 features. */
  float spread = 3.0f / sqrtf((float)d->features);
  for (size_t j = 0; j < (size_t)d->classes * d->features; j++)
    centers[j] = spread * rp_rng_normal(r);
  for (uint32_t i = 0; i < d->n; i++) {
    uint32_t k = (uint32_t)(rp_rng_next(r) % d->classes);
    const float *c = centers + (size_t)k * d->features;
    float *x = d->x + (size_t)i * d->features;
    for (uint32_t f = 0; f < d->features; f++)
      x[f] = c[f] + rp_rng_normal(r);
    d->y[i] = (int32_t)k;
  }
  free(centers);
  return RP_OK;
}

rp_status rp_data_generate(rp_data_kind kind, uint32_t n, uint32_t features,
                           uint32_t classes, uint64_t seed, rp_dataset *out) {
  if (!out)
    return rp_error_set(RP_EINVAL, "rp_data_generate: NULL out");
  if (n == 0 || features == 0 || classes < 2 || classes > RP_DATA_MAX_CLASSES)
    return rp_error_set(RP_EINVAL,
                        "rp_data_generate: %u samples, %u features, %u "
                        "classes (need >= 1, >= 1, 2..%u)",
                        n, features, classes, RP_DATA_MAX_CLASSES);
  if (kind != RP_DATA_SPIRALS && kind != RP_DATA_BLOBS)
    return rp_error_set(RP_EINVAL, "rp_data_generate: unknown kind %d",
                        (int)kind);
  if (kind == RP_DATA_SPIRALS && features != 2)
    return rp_error_set(RP_EINVAL,
                        "rp_data_generate: spirals have 2 features, "
                        "not %u",
                        features);
  rp_dataset d = {0};
  rp_status st = data_alloc(&d, n, features, classes);
  if (st != RP_OK)
    return st;
  rp_rng r;
  rp_rng_seed(&r, seed);
  if (kind == RP_DATA_SPIRALS)
    gen_spirals(&d, &r);
  else if ((st = gen_blobs(&d, &r)) != RP_OK) {
    rp_data_free(&d);
    return st;
  }
  *out = d;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Little-endian words: the file formats are little-endian whatever the
 * host. */

static uint32_t get_le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}

static void put_le32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

/* Converts count 4-byte words in place between file and host order. */
static void fix_le32(void *buf, size_t count) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  unsigned char *b = buf;
  for (size_t i = 0; i < count; i++, b += 4) {
    unsigned char t0 = b[0], t1 = b[1];
    b[0] = b[3];
    b[1] = b[2];
    b[2] = t1;
    b[3] = t0;
  }
#else
  (void)buf;
  (void)count;
#endif
}

/* ---------------------------------------------------------------------- */
/* Binary files */

static rp_status bin_header(FILE *f, const char *path, uint64_t size,
                            uint64_t max_data, uint32_t h[4]) {
  unsigned char b[BIN_HEADER];
  size_t got = fread(b, 1, sizeof b, f);
  if (got < sizeof b)
    return rp_error_set(RP_EFORMAT, "%s: truncated header: %zu of %u bytes",
                        path, got, BIN_HEADER);
  for (int i = 0; i < 4; i++)
    h[i] = get_le32(b + 8 + 4 * i);
  if (h[0] != 1)
    return rp_error_set(RP_EVERSION,
                        "%s: binary data version %u (this build "
                        "reads version 1)",
                        path, h[0]);
  if (h[1] == 0 || h[2] == 0 || h[3] < 2 || h[3] > RP_DATA_MAX_CLASSES)
    return rp_error_set(RP_EFORMAT,
                        "%s: header: n = %u, features = %u, classes = "
                        "%u (need n >= 1, features >= 1, classes 2..%u)",
                        path, h[1], h[2], h[3], RP_DATA_MAX_CLASSES);
  uint64_t want = BIN_HEADER + ((uint64_t)h[1] * h[2] + h[1]) * 4;
  if (want - BIN_HEADER > max_data)
    return rp_error_set(RP_ERANGE,
                        "%s: %u samples x %u features is above the "
                        "%llu-byte limit",
                        path, h[1], h[2], (unsigned long long)max_data);
  if (size < want)
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: the header (%u sample%s, %u "
                        "feature%s) needs %llu bytes, the file has %llu",
                        path, h[1], h[1] == 1 ? "" : "s", h[2],
                        h[2] == 1 ? "" : "s", (unsigned long long)want,
                        (unsigned long long)size);
  if (size > want)
    return rp_error_set(RP_EFORMAT,
                        "%s: %llu trailing byte%s after the labels "
                        "(the header says %u sample%s, %u feature%s)",
                        path, (unsigned long long)(size - want),
                        size - want == 1 ? "" : "s", h[1], h[1] == 1 ? "" : "s",
                        h[2], h[2] == 1 ? "" : "s");
  return RP_OK;
}

static rp_status bin_check(const rp_dataset *d, const char *path) {
  size_t nx = (size_t)d->n * d->features;
  for (size_t i = 0; i < nx; i++)
    if (!isfinite(d->x[i]))
      return rp_error_set(RP_EFORMAT,
                          "%s: sample %zu feature %zu is not finite "
                          "(byte offset %zu)",
                          path, i / d->features, i % d->features,
                          BIN_HEADER + 4 * i);
  for (uint32_t i = 0; i < d->n; i++)
    if (d->y[i] < 0 || (uint32_t)d->y[i] >= d->classes)
      return rp_error_set(RP_EFORMAT,
                          "%s: sample %u: label %d outside [0, %u) "
                          "(byte offset %zu)",
                          path, i, (int)d->y[i], d->classes,
                          BIN_HEADER + 4 * (nx + i));
  return RP_OK;
}

static rp_status load_bin(FILE *f, const char *path, uint64_t size,
                          uint64_t max_data, rp_dataset *out) {
  uint32_t h[4];
  rp_status st = bin_header(f, path, size, max_data, h);
  if (st != RP_OK)
    return st;
  rp_dataset d = {0};
  if ((st = data_alloc(&d, h[1], h[2], h[3])) != RP_OK)
    return rp_train_err_prefix(st, "%s: ", path);
  size_t nx = (size_t)d.n * d.features;
  if (fread(d.x, 4, nx, f) != nx || fread(d.y, 4, d.n, f) != d.n)
    st = rp_error_set(RP_EIO, "%s: read failed: %s", path, strerror(errno));
  if (st == RP_OK) {
    fix_le32(d.x, nx);
    fix_le32(d.y, d.n);
    st = bin_check(&d, path);
  }
  if (st != RP_OK) {
    rp_data_free(&d);
    return st;
  }
  *out = d;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* CSV files */

typedef struct csv_state {
  const char *path;
  uint64_t max_file; /* bytes the file may have (it may grow while read) */
  uint64_t size;     /* its size when opened (the first reservation) */
  uint64_t bytes;    /* bytes read so far */
  uint64_t max_data; /* the data set's bytes: samples x cols x 4 */
  unsigned line;
  uint32_t cols; /* header columns, label included */
  rp_dataset d;  /* x and y grow; n counts rows */
  uint32_t cap;
  int32_t max_label;
} csv_state;

/* A short printable copy of a field for messages. */
static const char *show(const char *s, char *buf, size_t cap) {
  size_t i = 0;
  for (; s[i] && i + 4 < cap && i < 32; i++)
    buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
  if (s[i] && i < cap - 4)
    memcpy(buf + i, "...", 4);
  else
    buf[i] = '\0';
  return buf;
}

/* Trims blanks in place; returns the start. */
static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
               s[n - 1] == '\n'))
    s[--n] = '\0';
  return s;
}

/* Splits line at commas into at most cap fields; returns the count (which
 * may exceed cap: the fields beyond are not stored). */
static uint32_t split(char *line, char **fields, uint32_t cap) {
  uint32_t n = 0;
  for (char *p = line;; n++) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = '\0';
    if (n < cap)
      fields[n] = trim(p);
    if (!comma)
      return n + 1;
    p = comma + 1;
  }
}

/* A blank line, or a comment: '#' after blanks at most. */
static int blank_or_comment(const char *s) {
  for (; *s; s++)
    if (*s == '#')
      return 1;
    else if (!isspace((unsigned char)*s))
      return 0;
  return 1;
}

/* Refuses lines that are not text (a binary file with a wrong magic). */
static rp_status text_line(const csv_state *c, const char *line, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)line[i];
    if (ch == 0 || (ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n'))
      return rp_error_set(RP_EFORMAT,
                          "%s:%u: not a data file: byte %#x at column "
                          "%zu (a CSV file starts with a 'label,...' header, a "
                          "binary one with the magic %s)",
                          c->path, c->line, ch, i + 1, BIN_MAGIC);
  }
  return RP_OK;
}

static rp_status csv_header(csv_state *c, char *line) {
  char *first[2];
  char sh[48];
  uint32_t n = split(line, first, 2);
  if (strcmp(first[0], "label") != 0)
    return rp_error_set(RP_EFORMAT,
                        "%s:%u: wrong header: first column is '%s', "
                        "expected 'label' followed by the feature columns",
                        c->path, c->line, show(first[0], sh, sizeof sh));
  if (n < 2)
    return rp_error_set(RP_EFORMAT,
                        "%s:%u: wrong header: no feature columns after "
                        "'label'",
                        c->path, c->line);
  c->cols = n;
  c->d.features = n - 1;
  return RP_OK;
}

static rp_status csv_grow(csv_state *c) {
  /* every row stored counts, the one about to be too: the limit holds
   * for the data set kept, not only where the rows' room grows */
  uint64_t most = c->max_data / (4 * (uint64_t)c->cols);
  if ((uint64_t)c->d.n + 1 > most)
    return rp_error_set(RP_ERANGE, "%s:%u: more than %llu bytes of data",
                        c->path, c->line, (unsigned long long)c->max_data);
  if (c->d.n < c->cap)
    return RP_OK;
  /* the first reservation: 1024 rows, or as many as the file could hold
   * (a row takes at least 2 bytes a column), if fewer: a wide file of few
   * rows does not reserve 1024 of them; never room for rows past the
   * limit (cols >= 2 keeps that far below 2^31) */
  uint64_t fit = c->size / (2 * (uint64_t)c->cols) + 1;
  uint64_t want = c->cap ? (uint64_t)c->cap * 2 : fit < 1024 ? fit : 1024;
  uint32_t cap = (uint32_t)(want < most ? want : most);
  float *x = rp_train_realloc_n(c->d.x, (size_t)cap * c->d.features, 4);
  if (x)
    c->d.x = x;
  int32_t *y = x ? rp_train_realloc_n(c->d.y, cap, 4) : NULL;
  if (!y)
    return rp_error_set(RP_ENOMEM, "%s:%u: out of memory", c->path, c->line);
  c->d.y = y;
  c->cap = cap;
  return RP_OK;
}

static rp_status csv_label(csv_state *c, const char *s, int32_t *out) {
  char *end;
  char sh[48];
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!isdigit((unsigned char)s[0]) || *end || errno || v > 65535)
    return rp_error_set(RP_EFORMAT,
                        "%s:%u: bad label '%s': not an integer in "
                        "0..65535",
                        c->path, c->line, show(s, sh, sizeof sh));
  *out = (int32_t)v;
  return RP_OK;
}

static rp_status csv_row(csv_state *c, char *line, char **fields) {
  uint32_t n = split(line, fields, c->cols);
  if (n != c->cols)
    return rp_error_set(RP_EFORMAT,
                        "%s:%u: wrong column count: %u column%s, the "
                        "header has %u",
                        c->path, c->line, n, n == 1 ? "" : "s", c->cols);
  rp_status st = csv_grow(c);
  int32_t label = 0;
  if (st == RP_OK)
    st = csv_label(c, fields[0], &label);
  if (st != RP_OK)
    return st;
  float *x = c->d.x + (size_t)c->d.n * c->d.features;
  for (uint32_t i = 1; i < n; i++) {
    char *end;
    char sh[48];
    errno = 0;
    float v = strtof(fields[i], &end);
    /* decimal only: strtof also reads hexadecimal ("0x10" is 16) */
    const char *d = fields[i] + (fields[i][0] == '-' || fields[i][0] == '+');
    if (end == fields[i] || *end || !isfinite(v) ||
        (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')))
      return rp_error_set(RP_EFORMAT,
                          "%s:%u: column %u: '%s' is not a finite "
                          "number",
                          c->path, c->line, i + 1,
                          show(fields[i], sh, sizeof sh));
    x[i - 1] = v;
  }
  c->d.y[c->d.n++] = label;
  if (label > c->max_label)
    c->max_label = label;
  return RP_OK;
}

/* Reads one line ('\n' included when there is one) of at most max bytes
 * into *buf (grown as needed, NUL-terminated; NUL bytes inside are kept
 * and counted in *len). 1 a line, 0 end of file, -1 a read error, -2 the
 * line is longer than max (no more than max + 1 of its bytes were read).
 * Unlike getline, a file without newlines cannot make it allocate more
 * than max + 2 bytes. */
static int read_line(FILE *f, char **buf, size_t *cap, size_t max,
                     size_t *len) {
  size_t n = 0;
  int ch = EOF;
  while ((ch = getc_unlocked(f)) != EOF) {
    if (n >= max)
      return -2;
    if (n + 2 > *cap) {
      size_t ncap = *cap ? *cap * 2 : 256;
      if (ncap > max + 2)
        ncap = max + 2;
      char *nb = realloc(*buf, ncap);
      if (!nb)
        return -1;
      *buf = nb;
      *cap = ncap;
    }
    (*buf)[n++] = (char)ch;
    if (ch == '\n')
      break;
  }
  if (ch == EOF && ferror(f))
    return -1;
  if (n == 0)
    return 0;
  (*buf)[n] = 0;
  *len = n;
  return 1;
}

static rp_status csv_lines(FILE *f, csv_state *c, char **fields) {
  char *line = NULL;
  size_t cap = 0, len = 0;
  int got;
  rp_status st = RP_OK;
  while (st == RP_OK &&
         (got = read_line(f, &line, &cap, RP_DATA_MAX_LINE, &len)) > 0) {
    c->line++;
    if ((c->bytes += len) > c->max_file) {
      st = rp_error_set(RP_ERANGE,
                        "%s:%u: the file grew past the limit of %llu "
                        "bytes while read",
                        c->path, c->line, (unsigned long long)c->max_file);
      break;
    }
    /* a UTF-8 byte order mark opens the file, whatever its first line */
    char *text =
        c->line == 1 && !strncmp(line, "\xef\xbb\xbf", 3) ? line + 3 : line;
    st = text_line(c, text, len - (size_t)(text - line));
    if (st != RP_OK || blank_or_comment(text))
      continue;
    if (c->cols == 0)
      st = csv_header(c, text);
    else
      st = csv_row(c, line, fields);
    if (st == RP_OK && c->cols && !fields) /* header read: fields now known */
      break;
  }
  free(line);
  if (st == RP_OK && got == -2)
    st = rp_error_set(RP_ERANGE,
                      "%s:%u: line longer than %u bytes (the limit "
                      "for one line of a CSV data file)",
                      c->path, c->line + 1, RP_DATA_MAX_LINE);
  else if (st == RP_OK && got == -1)
    st = rp_error_set(RP_EIO, "%s:%u: read failed%s%s", c->path, c->line + 1,
                      ferror(f) ? ": " : " (out of memory)",
                      ferror(f) ? strerror(errno) : "");
  return st;
}

static rp_status load_csv(FILE *f, const char *path, uint64_t max_file,
                          uint64_t max_data, rp_dataset *out) {
  struct stat sb;
  csv_state c = {.path = path,
                 .max_file = max_file,
                 .max_data = max_data,
                 .size = fstat(fileno(f), &sb) == 0 && sb.st_size > 0
                             ? (uint64_t)sb.st_size
                             : max_file,
                 .max_label = -1};
  rp_status st = csv_lines(f, &c, NULL); /* up to the header */
  char **fields = NULL;
  if (st == RP_OK && c.cols == 0)
    st = rp_error_set(RP_EFORMAT,
                      "%s: wrong header: the file is empty (a CSV data "
                      "file starts with 'label,<feature names>')",
                      path);
  if (st == RP_OK && !(fields = calloc(c.cols, sizeof *fields)))
    st = rp_error_set(RP_ENOMEM, "%s: out of memory", path);
  if (st == RP_OK)
    st = csv_lines(f, &c, fields);
  if (st == RP_OK && c.d.n == 0)
    st = rp_error_set(RP_EFORMAT, "%s: no data rows after the header", path);
  if (st == RP_OK && c.max_label < 1)
    st = rp_error_set(RP_EFORMAT,
                      "%s: every label is 0: a classifier needs at least 2 "
                      "classes (classes = largest label + 1)",
                      path);
  free(fields);
  if (st != RP_OK) {
    rp_data_free(&c.d);
    return st;
  }
  c.d.classes = (uint32_t)c.max_label + 1;
  *out = c.d;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* IDX files (MNIST style; big-endian): two zero bytes, the element type,
 * the dimension count d, d u32 sizes, then the elements row-major. */

#define IDX_U8 0x08
#define IDX_MAX_DIMS 8

typedef struct idx_file {
  char *buf; /* the whole file (owned) */
  size_t len;
  uint32_t ndims, dims[IDX_MAX_DIMS];
  uint64_t count; /* elements: the product of the sizes */
  const unsigned char *data;
} idx_file;

static uint32_t get_be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
         (uint32_t)b[3];
}

/* The IDX element type byte's name, for messages. */
static const char *idx_type_name(unsigned t) {
  switch (t) {
  case 0x08:
    return "unsigned byte";
  case 0x09:
    return "signed byte";
  case 0x0B:
    return "16-bit integer";
  case 0x0C:
    return "32-bit integer";
  case 0x0D:
    return "32-bit float";
  case 0x0E:
    return "64-bit float";
  default:
    return "unknown";
  }
}

/* 1 when the first 4 bytes look like an IDX header (any known type). */
static int idx_magic(const unsigned char *b) {
  return b[0] == 0 && b[1] == 0 && strcmp(idx_type_name(b[2]), "unknown") &&
         b[3] >= 1 && b[3] <= IDX_MAX_DIMS;
}

/* Checks the header of the file in f->buf: unsigned bytes, min..max
 * dimensions, no zero size, and exactly the elements the sizes say. */
static rp_status idx_header(const char *path, const char *what, uint32_t min,
                            uint32_t max, idx_file *f) {
  const unsigned char *b = (const unsigned char *)f->buf;
  if (f->len < 4)
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: %zu byte%s, an IDX header has "
                        "at least 4",
                        path, f->len, f->len == 1 ? "" : "s");
  if (b[0] || b[1])
    return rp_error_set(RP_EFORMAT,
                        "%s: bad magic %02x %02x %02x %02x: not an "
                        "IDX file (it starts 00 00, the type, the dimension "
                        "count)",
                        path, b[0], b[1], b[2], b[3]);
  if (b[2] != IDX_U8)
    return rp_error_set(RP_EFORMAT,
                        "%s: element type 0x%02x (%s): only unsigned "
                        "bytes (0x08) are read",
                        path, b[2], idx_type_name(b[2]));
  f->ndims = b[3];
  if (f->ndims < min || f->ndims > max)
    return rp_error_set(
        RP_EFORMAT, "%s: %u dimensions: %s need %s", path, f->ndims, what,
        min == max ? "exactly 1 (idx1)"
                   : "2 to 8 (samples, then the feature dimensions)");
  size_t head = 4 + 4 * (size_t)f->ndims;
  if (f->len < head)
    return rp_error_set(RP_EFORMAT, "%s: truncated header: %zu of %zu bytes",
                        path, f->len, head);
  f->count = 1;
  for (uint32_t i = 0; i < f->ndims; i++) {
    f->dims[i] = get_be32(b + 4 + 4 * i);
    if (f->dims[i] == 0)
      return rp_error_set(RP_EFORMAT, "%s: dimension %u has size 0", path, i);
    f->count *= f->dims[i];
    if (f->count > RP_DATA_MAX_BYTES)
      return rp_error_set(RP_ERANGE, "%s: more than %llu elements", path,
                          (unsigned long long)RP_DATA_MAX_BYTES);
  }
  uint64_t want = head + f->count;
  if (f->len < want)
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: the header (%u x %llu) needs "
                        "%llu bytes, the file has %zu",
                        path, f->dims[0],
                        (unsigned long long)(f->count / f->dims[0]),
                        (unsigned long long)want, f->len);
  if (f->len > want)
    return rp_error_set(RP_EFORMAT,
                        "%s: %llu trailing bytes after the %llu "
                        "elements the header announces",
                        path, (unsigned long long)(f->len - want),
                        (unsigned long long)f->count);
  f->data = b + head;
  return RP_OK;
}

/* Reads one IDX file of unsigned bytes (a regular file of at most max
 * bytes) with min..max dimensions. */
static rp_status idx_read(const char *path, const char *what, uint64_t max,
                          uint32_t min_dims, uint32_t max_dims, idx_file *f) {
  memset(f, 0, sizeof *f);
  size_t lim = max > SIZE_MAX - 2 ? SIZE_MAX - 2 : (size_t)max;
  rp_status st = rp_file_read_regular(path, lim, &f->buf, &f->len);
  if (st == RP_ERANGE) /* above the limit: the option that sets it */
    return rp_error_set(st, "%s: %s (--max-bytes)", path, rp_error_detail());
  if (st != RP_OK)
    return rp_train_err_prefix(st, "%s: ", path);
  st = idx_header(path, what, min_dims, max_dims, f);
  if (st != RP_OK) {
    free(f->buf);
    f->buf = NULL;
  }
  return st;
}

rp_status rp_data_load_idx(const char *images, const char *labels,
                           uint64_t max_bytes, rp_dataset *out) {
  if (!images || !labels || !out)
    return rp_error_set(RP_EINVAL, "rp_data_load_idx: NULL argument");
  uint64_t max = max_bytes ? max_bytes : RP_DATA_FILE_MAX;
  idx_file fi, fl = {0};
  rp_status st = idx_read(images, "images", max, 2, IDX_MAX_DIMS, &fi);
  if (st == RP_OK)
    st = idx_read(labels, "labels", max, 1, 1, &fl);
  if (st == RP_OK && fi.dims[0] != fl.dims[0])
    st = rp_error_set(RP_EFORMAT,
                      "%s has %u sample%s, %s has %u label%s: the "
                      "counts must match",
                      images, fi.dims[0], fi.dims[0] == 1 ? "" : "s", labels,
                      fl.dims[0], fl.dims[0] == 1 ? "" : "s");
  uint32_t classes = 0;
  for (uint32_t i = 0; st == RP_OK && i < fl.dims[0]; i++)
    classes = fl.data[i] + 1u > classes ? fl.data[i] + 1u : classes;
  if (st == RP_OK && classes < 2)
    st = rp_error_set(RP_EFORMAT,
                      "%s: every label is 0: a classifier needs at least 2 "
                      "classes (classes = largest label + 1)",
                      labels);
  rp_dataset d = {0};
  if (st == RP_OK) {
    uint32_t n = fi.dims[0], feats = (uint32_t)(fi.count / n);
    st = data_alloc(&d, n, feats, classes);
    if (st != RP_OK)
      st = rp_train_err_prefix(st, "%s: ", images);
  }
  for (uint64_t i = 0; st == RP_OK && i < fi.count; i++)
    d.x[i] = (float)fi.data[i] / 255.0f;
  for (uint32_t i = 0; st == RP_OK && i < d.n; i++)
    d.y[i] = fl.data[i];
  free(fi.buf);
  free(fl.buf);
  if (st == RP_OK)
    *out = d;
  return st;
}

/* ---------------------------------------------------------------------- */
/* Permutations and the validation split */

void rp_data_permutation(uint32_t n, uint64_t seed, uint32_t *perm) {
  rp_rng r;
  rp_rng_seed(&r, seed);
  for (uint32_t i = 0; i < n; i++)
    perm[i] = i;
  for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
    uint32_t j = (uint32_t)(((rp_rng_next(&r) >> 32) * i) >> 32);
    uint32_t t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
}

/* Copies the samples with mark[i] == want into *out, in their order. */
static rp_status pick(const rp_dataset *all, const unsigned char *mark,
                      int want, uint32_t n, rp_dataset *out) {
  rp_status st = data_alloc(out, n, all->features, all->classes);
  size_t F = all->features, k = 0;
  for (uint32_t i = 0; st == RP_OK && i < all->n; i++)
    if (mark[i] == want) {
      memcpy(out->x + k * F, all->x + i * F, F * sizeof *out->x);
      out->y[k++] = all->y[i];
    }
  return st;
}

rp_status rp_data_split(rp_dataset *all, uint32_t nval, uint64_t seed,
                        rp_dataset *val) {
  if (!all || !val || !all->x || !all->y)
    return rp_error_set(RP_EINVAL, "rp_data_split: NULL argument");
  if (nval == 0 || nval >= all->n)
    return rp_error_set(RP_ERANGE,
                        "rp_data_split: %u validation samples of %u "
                        "(need 1..%u)",
                        nval, all->n, all->n - 1);
  uint32_t *perm = calloc(all->n, sizeof *perm);
  unsigned char *mark = calloc(all->n, 1);
  rp_dataset tr = {0}, va = {0};
  rp_status st = perm && mark ? RP_OK
                              : rp_error_set(RP_ENOMEM, "rp_data_split: out of "
                                                        "memory");
  if (st == RP_OK) {
    rp_data_permutation(all->n, seed ^ 0x76616c2d73706c74ull, perm);
    for (uint32_t i = 0; i < nval; i++) /* "val-splt" */
      mark[perm[i]] = 1;
    st = pick(all, mark, 1, nval, &va);
  }
  if (st == RP_OK)
    st = pick(all, mark, 0, all->n - nval, &tr);
  free(perm);
  free(mark);
  if (st != RP_OK) {
    rp_data_free(&tr);
    rp_data_free(&va);
    return st;
  }
  rp_data_free(all);
  *all = tr;
  *val = va;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Files */

rp_status rp_data_load(const char *path, rp_dataset *out) {
  return rp_data_load_max(path, 0, out);
}

rp_status rp_data_load_max(const char *path, uint64_t max_bytes,
                           rp_dataset *out) {
  return rp_data_load_limits(path, max_bytes, 0, out);
}

rp_status rp_data_load_limits(const char *path, uint64_t max_bytes,
                              uint64_t max_data, rp_dataset *out) {
  if (!path || !out)
    return rp_error_set(RP_EINVAL, "rp_data_load: NULL argument");
  uint64_t max = max_bytes ? max_bytes : RP_DATA_FILE_MAX;
  uint64_t data_max =
      max_data && max_data < RP_DATA_MAX_BYTES ? max_data : RP_DATA_MAX_BYTES;
  int fd;
  uint64_t size;
  /* a regular file only: a FIFO would block, /dev/zero never end */
  rp_status st = rp_file_open_regular(path, &fd, &size);
  if (st)
    return rp_train_err_prefix(st, "%s: ", path);
  if (size > max) {
    close(fd);
    return rp_error_set(RP_ERANGE,
                        "%s: the file has %llu bytes, above the limit "
                        "of %llu (--max-bytes)",
                        path, (unsigned long long)size,
                        (unsigned long long)max);
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int e = errno;
    close(fd);
    return rp_error_set(RP_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  char magic[8];
  size_t got = fread(magic, 1, sizeof magic, f);
  if (got == sizeof magic && memcmp(magic, BIN_MAGIC, 8) == 0) {
    /* the size fstat said: bin_header refuses any other (a file that
     * grows later is cut at its header's size by fread) */
    if (fseek(f, 0, SEEK_SET) != 0)
      st = rp_error_set(RP_EIO, "%s: cannot seek: %s", path, strerror(errno));
    else
      st = load_bin(f, path, size, data_max, out);
  } else if (got >= 4 && idx_magic((const unsigned char *)magic)) {
    st = rp_error_set(RP_EFORMAT,
                      "%s: an IDX file (MNIST format, %u "
                      "dimensions of %s): give it with its labels, --data "
                      "IMAGES --labels LABELS",
                      path, (unsigned)magic[3],
                      idx_type_name((unsigned char)magic[2]));
  } else if (fseek(f, 0, SEEK_SET) != 0) {
    st = rp_error_set(RP_EIO, "%s: cannot seek: %s", path, strerror(errno));
  } else {
    st = load_csv(f, path, max, data_max, out);
  }
  fclose(f);
  return st;
}

static int save_csv(FILE *f, const rp_dataset *d) {
  fprintf(f, "label");
  for (uint32_t j = 0; j < d->features; j++)
    fprintf(f, ",x%u", j);
  fputc('\n', f);
  for (uint32_t i = 0; i < d->n; i++) {
    fprintf(f, "%d", (int)d->y[i]);
    for (uint32_t j = 0; j < d->features; j++)
      fprintf(f, ",%.9g", (double)d->x[(size_t)i * d->features + j]);
    fputc('\n', f);
  }
  return ferror(f);
}

static int save_bin(FILE *f, const rp_dataset *d) {
  unsigned char h[BIN_HEADER];
  memcpy(h, BIN_MAGIC, 8);
  put_le32(h + 8, 1);
  put_le32(h + 12, d->n);
  put_le32(h + 16, d->features);
  put_le32(h + 20, d->classes);
  fwrite(h, 1, sizeof h, f);
  size_t nx = (size_t)d->n * d->features;
  for (size_t i = 0; i < nx + d->n; i++) {
    unsigned char b[4];
    uint32_t v;
    memcpy(&v, i < nx ? (const void *)&d->x[i] : (const void *)&d->y[i - nx],
           4);
    put_le32(b, v);
    fwrite(b, 1, 4, f);
  }
  return ferror(f);
}

rp_status rp_data_save(const rp_dataset *d, const char *path, int csv) {
  if (!d || !path || !d->x || !d->y)
    return rp_error_set(RP_EINVAL, "rp_data_save: NULL argument");
  rp_output *o; /* the output writer: path is replaced only when whole */
  rp_status st = rp_output_open(path, &o);
  if (st)
    return rp_train_err_prefix(st, "%s: cannot write: ", path);
  FILE *f = rp_output_file(o);
  /* a failed write leaves the stream in error: the commit then fails,
   * naming the system's reason, and removes the temporary file */
  (void)(csv ? save_csv(f, d) : save_bin(f, d));
  if ((st = rp_output_commit(o)))
    return rp_train_err_prefix(st, "%s: ", path);
  return RP_OK;
}
