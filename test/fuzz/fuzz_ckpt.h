/* test/fuzz/fuzz_ckpt.h — what the checkpoint fuzz targets share: the
 * input's mode byte, resealing, and the container's two entries checked
 * against each other.
 *
 * An input is a mode byte and then the file. With bit 0 of the mode set,
 * the target reseals the file before it is read: an MLP weights record
 * (the container's payload, or a bare record) gets the FNV-1a 64 of its
 * bytes in its last 8, and a container the checksum of its header and
 * payload, so mutations of the payload reach the model's own parser rather
 * than stopping at a checksum mismatch. Mode 0 reads the bytes as they
 * are (the checksums themselves, torn files). */
#ifndef RP_FUZZ_CKPT_H
#define RP_FUZZ_CKPT_H

#include "fuzz_file.h"
#include "train/ckpt.h"

#include <string.h>

#define FZ_RESEAL 1u

/* Reseals b (n bytes) in place: the record (when mlp), then the
 * container. */
static inline void fz_ckpt_reseal(unsigned char *b, size_t n, int mlp) {
  int container = rp_ckpt_is_container(b, n) && n >= RP_CKPT_HEAD;
  if (mlp) {
    unsigned char *r = container ? b + RP_CKPT_HEAD : b;
    size_t rn = container ? n - RP_CKPT_HEAD : n;
    if (rn >= 16)
      rp_le_put64(r + rn - 8, rp_fnv1a64(RP_FNV64_INIT, r, rn - 8));
  }
  if (container)
    rp_le_put64(b + 40, rp_fnv1a64(rp_fnv1a64(RP_FNV64_INIT, b, 40),
                                   b + RP_CKPT_HEAD, n - RP_CKPT_HEAD));
}

/* The input's file (a copy, resealed as its mode says): the caller frees
 * it. NULL for an empty input. */
static inline unsigned char *fz_ckpt_input(const uint8_t *data, size_t size,
                                           int mlp, size_t *n) {
  if (size == 0)
    return NULL;
  *n = size - 1;
  unsigned char *b = malloc(*n ? *n : 1);
  if (!b)
    abort();
  memcpy(b, data + 1, *n);
  if (data[0] & FZ_RESEAL)
    fz_ckpt_reseal(b, *n, mlp);
  return b;
}

/* The container's in-memory entry (rp_ckpt_parse) and its file entry
 * (rp_ckpt_load: the header first, then the whole file) must agree: the
 * same status, and on success the same version and payload. */
static inline void fz_ckpt_container(const fz_file *f, const char *kind,
                                     const unsigned char *b, size_t n) {
  uint32_t v1 = 0, v2 = 0;
  size_t off = 0, len = 0, len2 = 0;
  void *payload = NULL;
  rp_status s1 = rp_ckpt_parse(f->path, kind, b, n, &v1, &off, &len);
  rp_status s2 = rp_ckpt_load(f->path, kind, n + 1, &v2, &payload, &len2);
  if (s1 != s2)
    fz_fail("rp_ckpt_parse and rp_ckpt_load disagree");
  if (s2 != RP_OK && !strstr(rp_error_detail(), f->path))
    fz_fail("a container error does not name the file");
  if (s1 == RP_OK && (v1 != v2 || len != len2 || off + len != n ||
                      (len && memcmp(b + off, payload, len))))
    fz_fail("rp_ckpt_parse and rp_ckpt_load give other payloads");
  free(payload);
}

#endif
