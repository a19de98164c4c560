/* train/text.c — byte-level text corpora for the GPT (gpt.h): encoding, the
 * train/validation split, seeded random windows and the count-based
 * bigram baseline. Host memory only. */
#include "gpt.h"

#include "ckpt.h"
#include "train_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_FILE_MAX ((uint64_t)1 << 30)

/* Encodes len bytes of src into dst (len bytes; may be src itself): the
 * vocabulary of the bytes present, in byte order, and the split. */
static rp_status encode(const char *what, const uint8_t *src, uint8_t *dst,
                        size_t len, uint32_t context, rp_text *out) {
  int present[256] = {0};
  for (size_t i = 0; i < len; i++)
    present[src[i]] = 1;
  rp_text t;
  memset(&t, 0, sizeof t);
  uint8_t id[256];
  for (int c = 0; c < 256; c++)
    if (present[c]) {
      id[c] = (uint8_t)t.vocab;
      t.bytes[t.vocab++] = (uint8_t)c;
    }
  if (t.vocab < 2)
    return rp_error_set(RP_EFORMAT,
                        "%s: %zu byte%s with %u distinct value%s: a text "
                        "needs at least 2",
                        what, len, len == 1 ? "" : "s", t.vocab,
                        t.vocab == 1 ? "" : "s");
  t.n = len;
  t.ntrain = len - len / 10; /* the last 10% validate */
  size_t need = (size_t)context + 1;
  if (t.ntrain < need || t.n - t.ntrain < need)
    return rp_error_set(RP_EFORMAT,
                        "%s: %zu bytes: the 90%%/10%% split needs at least "
                        "%zu bytes in each part for one window of context "
                        "%u + 1 (at least %zu bytes in all)",
                        what, len, need, context, 10 * need);
  for (size_t i = 0; i < len; i++)
    dst[i] = id[src[i]];
  t.tokens = dst;
  *out = t;
  return RP_OK;
}

rp_status rp_text_from_bytes(const char *what, const uint8_t *b, size_t len,
                             uint32_t context, rp_text *out) {
  if (!what || (!b && len) || !out || context == 0)
    return rp_error_set(RP_EINVAL, "rp_text_from_bytes: bad argument");
  uint8_t *tokens = malloc(len ? len : 1);
  if (!tokens)
    return rp_error_set(RP_ENOMEM, "%s: out of memory", what);
  rp_status st = encode(what, b, tokens, len, context, out);
  if (st)
    free(tokens);
  return st;
}

/* The file's bytes become its tokens in place: one copy of the text. */
rp_status rp_text_load(const char *path, uint64_t max_bytes, uint32_t context,
                       rp_text *out) {
  if (!path || !out || context == 0)
    return rp_error_set(RP_EINVAL, "rp_text_load: bad argument");
  char *buf;
  size_t n;
  rp_status st = rp_file_read_regular(
      path, (size_t)(max_bytes ? max_bytes : TEXT_FILE_MAX), &buf, &n);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "%s: ", path);
  st = encode(path, (const uint8_t *)buf, (uint8_t *)buf, n, context, out);
  if (st)
    free(buf);
  return st;
}

void rp_text_free(rp_text *t) {
  if (!t)
    return;
  free(t->tokens);
  memset(t, 0, sizeof *t);
}

rp_status rp_text_windows(const rp_text *t, size_t lo, size_t hi, uint32_t B,
                          uint32_t T, uint64_t seed, uint64_t first, uint32_t n,
                          int32_t *x, int32_t *y) {
  if (!t || (n && B && (!x || !y)) || T == 0)
    return rp_error_set(RP_EINVAL, "rp_text_windows: bad argument");
  if (lo >= hi || hi > t->n || hi - lo < (size_t)T + 1)
    return rp_error_set(RP_ERANGE,
                        "rp_text_windows: tokens [%zu, %zu) of %zu hold no "
                        "window of %u + 1 tokens (a text loaded for a "
                        "shorter context?)",
                        lo, hi, t->n, T);
  size_t starts = hi - lo - T; /* windows [s, s + T] inside [lo, hi) */
  for (uint32_t j = 0; j < n; j++) {
    /* batch first + j's windows from the seed and its index alone: the
     * stream starts at a mixed value (splitmix64 streams seeded a multiple
     * of its increment apart would be shifted copies of each other, so
     * neighbouring batches would share windows) */
    rp_rng g, r;
    rp_rng_seed(&g, seed ^ 0x77696e646f777321ull ^
                        0xd1b54a32d192ed03ull * (first + j + 1));
    rp_rng_seed(&r, rp_rng_next(&g));
    for (uint32_t b = 0; b < B; b++) {
      size_t s = lo + (size_t)(rp_rng_next(&r) % starts);
      size_t o = ((size_t)j * B + b) * T;
      for (uint32_t k = 0; k < T; k++) {
        x[o + k] = t->tokens[s + k];
        y[o + k] = t->tokens[s + k + 1];
      }
    }
  }
  return RP_OK;
}

double rp_text_bigram_loss(const rp_text *t, const int32_t *x, const int32_t *y,
                           size_t n) {
  uint32_t V = t->vocab;
  double *count = calloc((size_t)V * V, sizeof *count);
  double *row = calloc(V, sizeof *row);
  double sum = NAN;
  if (count && row) {
    for (size_t i = 0; i + 1 < t->ntrain; i++) {
      count[(size_t)t->tokens[i] * V + (size_t)t->tokens[i + 1]] += 1;
      row[t->tokens[i]] += 1;
    }
    sum = 0;
    for (size_t i = 0; i < n; i++) {
      double c = count[(size_t)x[i] * V + (size_t)y[i]];
      sum -= log((c + 1) / (row[x[i]] + V)); /* add-one smoothing */
    }
    sum /= (double)n;
  }
  free(count);
  free(row);
  return sum;
}

uint64_t rp_text_digest(const rp_text *t) {
  uint64_t h = RP_FNV64_INIT;
  unsigned char buf[4096];
  for (size_t i = 0; t && i < t->n;) {
    size_t k = 0;
    for (; k < sizeof buf && i < t->n; k++, i++)
      buf[k] = t->bytes[t->tokens[i]];
    h = rp_fnv1a64(h, buf, k);
  }
  return h;
}
