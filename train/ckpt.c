/* train/ckpt.c — the checkpoint container (format in ckpt.h). */
#include "ckpt.h"

#include "train_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t rp_fnv1a64(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int kind_ok(const char *kind) {
  size_t n = kind ? strlen(kind) : 0;
  if (n < 1 || n > RP_CKPT_KIND_MAX)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (kind[i] <= 0x20 || kind[i] >= 0x7f)
      return 0;
  return 1;
}

int rp_ckpt_is_container(const unsigned char *b, size_t n) {
  return b && n >= 8 && memcmp(b, RP_CKPT_MAGIC, 8) == 0;
}

rp_status rp_ckpt_oom(const char *path, uint64_t bytes, const char *fmt, ...) {
  char what[256], mib[32] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (bytes >= (1u << 20))
    snprintf(mib, sizeof mib, " (%.1f MiB)", (double)bytes / (1u << 20));
  return rp_error_set(RP_ENOMEM, "%s: out of memory for %llu byte%s%s %s", path,
                      (unsigned long long)bytes, bytes == 1 ? "" : "s", mib,
                      what);
}

rp_status rp_ckpt_floats_read(const char *path, const unsigned char *b,
                              size_t n, const char *what, float **out) {
  float *v = calloc(n ? n : 1, sizeof *v);
  if (!v)
    return rp_ckpt_oom(path, (uint64_t)(n ? n : 1) * sizeof *v,
                       "reading %s (%zu values)", what, n);
  for (size_t i = 0; i < n; i++)
    v[i] = rp_le_getf(b + 4 * i);
  rp_status st = rp_ckpt_check_finite(v, n, path, what, 1);
  if (st != RP_OK) {
    free(v);
    return st;
  }
  *out = v;
  return RP_OK;
}

rp_status rp_ckpt_check_finite(const float *v, size_t n, const char *who,
                               const char *what, int reading) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return reading ? rp_error_set(RP_EFORMAT,
                                    "%s: value %zu of %s is %g: a checkpoint "
                                    "holds finite values only (saved from a "
                                    "run that had diverged?)",
                                    who, i, what, (double)v[i])
                     : rp_error_set(RP_EINVAL,
                                    "%s: value %zu of %s is %g (need finite)",
                                    who, i, what, (double)v[i]);
  return RP_OK;
}

rp_status rp_ckpt_size_check(const char *who, uint64_t payload, uint64_t max) {
  if (payload <= max && RP_CKPT_HEAD <= max - payload)
    return RP_OK;
  if (payload > UINT64_MAX - RP_CKPT_HEAD) /* the sum does not fit a u64 */
    return rp_error_set(RP_ERANGE,
                        "%s: its checkpoint would be more than %llu bytes, "
                        "above the %llu bytes a checkpoint may have (the most "
                        "its reader takes)",
                        who, (unsigned long long)UINT64_MAX,
                        (unsigned long long)max);
  return rp_error_set(RP_ERANGE,
                      "%s: its checkpoint would be %llu bytes, above the "
                      "%llu bytes a checkpoint may have (the most its reader "
                      "takes)",
                      who, (unsigned long long)(payload + RP_CKPT_HEAD),
                      (unsigned long long)max);
}

rp_status rp_ckpt_save(const char *path, const char *kind, uint32_t version,
                       const void *payload, size_t len) {
  if (!path || (!payload && len))
    return rp_error_set(RP_EINVAL, "rp_ckpt_save: NULL argument");
  if (!kind_ok(kind))
    return rp_error_set(RP_EINVAL,
                        "rp_ckpt_save: kind '%s': need 1..%u "
                        "printable ASCII bytes",
                        kind ? kind : "(null)", RP_CKPT_KIND_MAX);
  unsigned char h[RP_CKPT_HEAD] = {0};
  memcpy(h, RP_CKPT_MAGIC, 8);
  rp_le_put32(h + 8, RP_CKPT_VERSION);
  rp_le_put32(h + 12, version);
  memcpy(h + 16, kind, strlen(kind));
  rp_le_put64(h + 32, (uint64_t)len);
  rp_le_put64(h + 40,
              rp_fnv1a64(rp_fnv1a64(RP_FNV64_INIT, h, 40), payload, len));
  rp_output *o;
  rp_status st = rp_output_open(path, &o);
  if (st)
    return rp_train_err_prefix(st, "%s: cannot write: ", path);
  FILE *f = rp_output_file(o);
  if (fwrite(h, 1, sizeof h, f) != sizeof h ||
      (len && fwrite(payload, 1, len, f) != len)) {
    int e = errno; /* before the abort's own calls */
    rp_output_abort(o);
    return rp_error_set(RP_EIO, "%s: write failed: %s (the file is unchanged)",
                        path, e ? strerror(e) : "a short write");
  }
  if ((st = rp_output_commit(o)))
    return rp_train_err_prefix(st, "%s: ", path);
  return RP_OK;
}

/* The checks the header alone answers, on the first `n` bytes of a file
 * of `size` bytes (n == size for a whole buffer): magic, version, and
 * the payload length against the size. *want: the header's length. */
static rp_status parse_head(const char *path, const char *kind,
                            const unsigned char *b, size_t n, uint64_t size,
                            uint64_t *want_out) {
  if (n == 0)
    return rp_error_set(RP_EFORMAT, "%s: an empty file, not a checkpoint",
                        path);
  if (!rp_ckpt_is_container(b, n) && n >= 8 && !memcmp(b, "RPRSWGHT", 8))
    return rp_error_set(RP_EFORMAT,
                        "%s: a bare MLP weights record ('RPRSWGHT'), not a "
                        "'%s' checkpoint",
                        path, kind ? kind : "(null)");
  if (n < 8 && !memcmp(b, RP_CKPT_MAGIC, n)) /* the magic's first bytes */
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: %llu byte%s, the checkpoint "
                        "header alone has %u",
                        path, (unsigned long long)size, size == 1 ? "" : "s",
                        RP_CKPT_HEAD);
  if (!rp_ckpt_is_container(b, n))
    return rp_error_set(RP_EFORMAT,
                        "%s: not a reprise checkpoint (no "
                        "'" RP_CKPT_MAGIC "' header)",
                        path);
  if (n < RP_CKPT_HEAD)
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: %llu byte%s, the checkpoint "
                        "header alone has %u",
                        path, (unsigned long long)size, size == 1 ? "" : "s",
                        RP_CKPT_HEAD);
  if (rp_le_get32(b + 8) != RP_CKPT_VERSION)
    return rp_error_set(RP_EVERSION,
                        "%s: checkpoint container version %u (this "
                        "build reads version %u: another build's file, or "
                        "a damaged header)",
                        path, rp_le_get32(b + 8), RP_CKPT_VERSION);
  uint64_t want = rp_le_get64(b + 32);
  /* the length first: a torn file says so rather than "corrupt" */
  if (want != size - RP_CKPT_HEAD) {
    const char *what = want > size - RP_CKPT_HEAD
                           ? "truncated, or a damaged header"
                           : "trailing bytes, or a damaged header";
    if (want > UINT64_MAX - RP_CKPT_HEAD) /* no total to give */
      return rp_error_set(RP_EFORMAT,
                          "%s: %s: the header says %llu payload byte%s, "
                          "the file has %llu",
                          path, what, (unsigned long long)want,
                          want == 1 ? "" : "s", (unsigned long long)size);
    return rp_error_set(
        RP_EFORMAT,
        "%s: %s: the header says %llu payload byte%s "
        "(%llu in all), the file has %llu",
        path, what, (unsigned long long)want, want == 1 ? "" : "s",
        (unsigned long long)(want + RP_CKPT_HEAD), (unsigned long long)size);
  }
  *want_out = want;
  return RP_OK;
}

/* RP_ECHECKSUM unless h (of the header's first 40 bytes and the payload)
 * is the one the header b holds. */
static rp_status check_sum(const char *path, const unsigned char *b,
                           uint64_t h) {
  if (h == rp_le_get64(b + 40))
    return RP_OK;
  return rp_error_set(RP_ECHECKSUM,
                      "%s: checksum mismatch (the file says "
                      "fnv1a64:%016llx, its bytes give %016llx): the file "
                      "is corrupt",
                      path, (unsigned long long)rp_le_get64(b + 40),
                      (unsigned long long)h);
}

/* The header b's kind field: a name, NUL-padded, equal to kind. */
static rp_status check_kind(const char *path, const char *kind,
                            const unsigned char *b) {
  char fk[RP_CKPT_KIND_MAX + 1];
  memcpy(fk, b + 16, RP_CKPT_KIND_MAX);
  fk[RP_CKPT_KIND_MAX] = 0;
  /* the kind: its name, then NUL up to the 16th byte */
  size_t kl = strlen(fk);
  if (kl == 0)
    return rp_error_set(RP_EFORMAT,
                        "%s: a damaged header: the kind field is empty", path);
  for (size_t i = 0; i < kl; i++) /* a name: printable ASCII */
    if (b[16 + i] < 0x21 || b[16 + i] > 0x7e)
      return rp_error_set(RP_EFORMAT,
                          "%s: a damaged header: byte %zu of the kind field "
                          "is 0x%02x (a name is printable ASCII)",
                          path, i, b[16 + i]);
  for (size_t i = kl; i <= RP_CKPT_KIND_MAX; i++)
    if (b[16 + i])
      return rp_error_set(RP_EFORMAT,
                          "%s: a damaged header: byte %zu of the kind field "
                          "is 0x%02x after its name '%s' (NUL padding)",
                          path, i, b[16 + i], fk);
  if (!kind || strcmp(fk, kind) != 0)
    return rp_error_set(RP_EFORMAT,
                        "%s: a '%s' checkpoint, not a '%s' one "
                        "(another model's file)",
                        path, fk, kind ? kind : "(null)");
  return RP_OK;
}

rp_status rp_ckpt_parse(const char *path, const char *kind,
                        const unsigned char *b, size_t n, uint32_t *version,
                        size_t *off, size_t *len) {
  uint64_t want = 0;
  rp_status st = parse_head(path, kind, b, n, n, &want);
  if (st)
    return st;
  uint64_t h = rp_fnv1a64(rp_fnv1a64(RP_FNV64_INIT, b, 40), b + RP_CKPT_HEAD,
                          (size_t)want);
  if ((st = check_sum(path, b, h)) || (st = check_kind(path, kind, b)))
    return st;
  *version = rp_le_get32(b + 12);
  *off = RP_CKPT_HEAD;
  *len = (size_t)want;
  return RP_OK;
}

rp_status rp_ckpt_load(const char *path, const char *kind, size_t max,
                       uint32_t *version, void **payload, size_t *len) {
  if (!path || !kind || !version || !payload || !len)
    return rp_error_set(RP_EINVAL, "rp_ckpt_load: NULL argument");
  /* The header first: a file whose size it contradicts is refused
   * without reading gigabytes of it. */
  int fd = -1;
  uint64_t size = 0, want = 0;
  rp_status st = rp_file_open_regular(path, &fd, &size);
  if (st)
    return rp_train_err_prefix(st, "%s: ", path);
  unsigned char head[RP_CKPT_HEAD];
  size_t got = 0;
  while (got < sizeof head && got < size) {
    ssize_t k = read(fd, head + got, sizeof head - got);
    if (k <= 0)
      break; /* a short read: the whole read below says why */
    got += (size_t)k;
  }
  close(fd);
  if (got == sizeof head || got == size) {
    st = parse_head(path, kind, head, got, size, &want);
    if (st)
      return st;
  }
  char *buf;
  size_t n;
  st = rp_file_read_regular(path, max, &buf, &n);
  if (st)
    return rp_train_err_prefix(st, "%s: ", path);
  size_t off, pl;
  uint32_t v;
  st = rp_ckpt_parse(path, kind, (const unsigned char *)buf, n, &v, &off, &pl);
  if (st) {
    free(buf);
    return st;
  }
  memmove(buf, buf + off, pl); /* the payload to the front: one allocation */
  *version = v;
  *payload = buf;
  *len = pl;
  return RP_OK;
}

/* ---- reading in pieces ---- */

struct rp_ckpt_reader {
  const char *path;
  int fd;
  unsigned char head[RP_CKPT_HEAD];
  uint64_t left; /* payload bytes not read yet */
  uint64_t hash; /* of the header's first 40 bytes and the payload read */
};

/* n bytes at the file's offset `at` (n 0: none); a file that ends
 * before them is refused as truncated (it shrank while read). */
static rp_status read_at(rp_ckpt_reader *r, uint64_t at, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = pread(r->fd, (char *)buf + got, n - got, (off_t)(at + got));
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return rp_error_set(RP_EIO, "%s: read failed: %s", r->path,
                          strerror(errno));
    if (k == 0)
      return rp_error_set(RP_EFORMAT,
                          "%s: truncated while it was read (it ends at "
                          "byte %llu)",
                          r->path, (unsigned long long)(at + got));
    got += (size_t)k;
  }
  return RP_OK;
}

/* The checksum of the whole payload, read in 1 MiB pieces. */
static rp_status sum_payload(rp_ckpt_reader *r, uint64_t len, uint64_t *h) {
  size_t cap = 1u << 20;
  unsigned char *buf = malloc(cap);
  if (!buf)
    return rp_ckpt_oom(r->path, cap,
                       "reading its payload in pieces to check its checksum");
  rp_status st = RP_OK;
  *h = rp_fnv1a64(RP_FNV64_INIT, r->head, 40);
  for (uint64_t at = 0; !st && at < len; at += cap) {
    size_t n = len - at < cap ? (size_t)(len - at) : cap;
    if (!(st = read_at(r, RP_CKPT_HEAD + at, buf, n)))
      *h = rp_fnv1a64(*h, buf, n);
  }
  free(buf);
  return st;
}

rp_status rp_ckpt_reader_open(const char *path, const char *kind, uint64_t max,
                              int verify, uint32_t *version, uint64_t *len,
                              rp_ckpt_reader **out) {
  if (!path || !kind || !version || !len || !out)
    return rp_error_set(RP_EINVAL, "rp_ckpt_reader_open: NULL argument");
  rp_ckpt_reader *r = calloc(1, sizeof *r);
  if (!r)
    return rp_ckpt_oom(path, sizeof *r, "opening it (the checkpoint reader)");
  r->path = path;
  uint64_t size = 0, want = 0, h = 0;
  rp_status st = rp_file_open_regular(path, &r->fd, &size);
  if (st) {
    free(r);
    return rp_train_err_prefix(st, "%s: ", path);
  }
  size_t n = size < RP_CKPT_HEAD ? (size_t)size : RP_CKPT_HEAD;
  st = read_at(r, 0, r->head, n);
  if (!st)
    st = parse_head(path, kind, r->head, n, size, &want);
  if (!st && size > max)
    st = rp_error_set(RP_ERANGE,
                      "%s: the file has %llu bytes, above the limit of %llu",
                      path, (unsigned long long)size, (unsigned long long)max);
  if (!st && verify && !(st = sum_payload(r, want, &h)))
    st = check_sum(path, r->head, h);
  if (!st)
    st = check_kind(path, kind, r->head);
  if (st) {
    rp_ckpt_reader_close(r);
    return st;
  }
  r->left = want;
  r->hash = rp_fnv1a64(RP_FNV64_INIT, r->head, 40);
  *version = rp_le_get32(r->head + 12);
  *len = want;
  *out = r;
  return RP_OK;
}

rp_status rp_ckpt_reader_read(rp_ckpt_reader *r, void *buf, size_t n) {
  if (!r || (!buf && n))
    return rp_error_set(RP_EINVAL, "rp_ckpt_reader_read: NULL argument");
  if (n > r->left)
    return rp_error_set(RP_EFORMAT,
                        "%s: %zu bytes asked for, %llu payload bytes left",
                        r->path, n, (unsigned long long)r->left);
  uint64_t len = rp_le_get64(r->head + 32);
  rp_status st = read_at(r, RP_CKPT_HEAD + (len - r->left), buf, n);
  if (st)
    return st;
  r->hash = rp_fnv1a64(r->hash, buf, n);
  r->left -= n;
  return RP_OK;
}

rp_status rp_ckpt_reader_finish(rp_ckpt_reader *r) {
  if (!r)
    return rp_error_set(RP_EINVAL, "rp_ckpt_reader_finish: NULL argument");
  if (r->left)
    return rp_error_set(RP_EINVAL,
                        "rp_ckpt_reader_finish: %s: %llu payload bytes not "
                        "read",
                        r->path, (unsigned long long)r->left);
  unsigned char one;
  ssize_t k =
      pread(r->fd, &one, 1, (off_t)(RP_CKPT_HEAD + rp_le_get64(r->head + 32)));
  if (k > 0) /* it grew while read */
    return rp_error_set(RP_EFORMAT,
                        "%s: trailing bytes after the payload (the file grew "
                        "while it was read)",
                        r->path);
  return check_sum(r->path, r->head, r->hash);
}

uint64_t rp_ckpt_reader_checksum(const rp_ckpt_reader *r) {
  return r ? rp_le_get64(r->head + 40) : 0;
}

void rp_ckpt_reader_close(rp_ckpt_reader *r) {
  if (!r)
    return;
  if (r->fd >= 0)
    close(r->fd);
  free(r);
}
