/* train/ckpt.h — the checkpoint container every model of train/ saves its
 * state in (the MLP now, the GPT beside it): a kind, a payload version, the
 * payload's length and a checksum around the model's own bytes, written
 * through the library's output writer (reprise.h "Output files"), so a
 * checkpoint file is replaced only by a complete one, and a file cut short
 * or damaged by anything else is refused on load with a precise error.
 * Uses only reprise.h and libc.
 *
 * Format (little-endian):
 *   0..7    "RPRSCKPT"
 *   8..11   u32 container version (1)
 *   12..15  u32 payload version (the model's own format version)
 *   16..31  kind: ASCII, NUL-padded ("mlp", "gpt"; at most 15 bytes)
 *   32..39  u64 payload length L
 *   40..47  u64 FNV-1a 64 of bytes 0..39 and then the payload
 *   48..    the payload (L bytes); the file ends there (48 + L bytes). */
#ifndef RP_TRAIN_CKPT_H
#define RP_TRAIN_CKPT_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RP_CKPT_MAGIC "RPRSCKPT"
#define RP_CKPT_VERSION 1u
#define RP_CKPT_HEAD 48u
#define RP_CKPT_KIND_MAX 15u

/* FNV-1a 64 of n bytes, continuing from h (start: RP_FNV64_INIT). */
#define RP_FNV64_INIT 14695981039346656037ull
uint64_t rp_fnv1a64(uint64_t h, const void *b, size_t n);

/* Little-endian fields of checkpoint files. */
static inline void rp_le_put32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t rp_le_get32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}
static inline void rp_le_put64(unsigned char *b, uint64_t v) {
  rp_le_put32(b, (uint32_t)v);
  rp_le_put32(b + 4, (uint32_t)(v >> 32));
}
static inline uint64_t rp_le_get64(const unsigned char *b) {
  return rp_le_get32(b) | (uint64_t)rp_le_get32(b + 4) << 32;
}
static inline void rp_le_putf(unsigned char *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  rp_le_put32(b, u);
}
static inline float rp_le_getf(const unsigned char *b) {
  uint32_t u = rp_le_get32(b);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* RP_ENOMEM for a read of path that could not allocate `bytes` bytes for
 * what the formatted text names (after "for"): "<path>: out of memory for
 * <bytes> bytes (<MiB>) <text>", e.g. "w.ckpt: out of memory for 5242880
 * bytes (5.0 MiB) reading the tensor 'h0.mlp.fc.W'" (the MiB figure from
 * 1 MiB on). */
rp_status rp_ckpt_oom(const char *path, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The n floats stored from b on, into a new array (*out, the caller frees
 * it): RP_ENOMEM (rp_ckpt_oom, naming `what`), or RP_EFORMAT as
 * rp_ckpt_check_finite reading (path, what) when one is not finite; *out
 * untouched on failure. */
rp_status rp_ckpt_floats_read(const char *path, const unsigned char *b,
                              size_t n, const char *what, float **out);

/* RP_OK when the n values are finite. Else, naming the first other one
 * and `what` the values are ("the weights and momenta"): RP_EFORMAT from
 * a read (who: the file's path), RP_EINVAL from a save (who: the call). A
 * checkpoint holds finite values only. */
rp_status rp_ckpt_check_finite(const float *v, size_t n, const char *who,
                               const char *what, int reading);

/* Writes a checkpoint of `kind` (1..RP_CKPT_KIND_MAX bytes of ASCII)
 * holding len bytes of payload in the model's format `version`. Errors:
 * RP_EINVAL (NULL argument, bad kind, a path that is not a regular file),
 * and the output writer's (RP_EIO: the file at path is then unchanged);
 * the detail names path. */
rp_status rp_ckpt_save(const char *path, const char *kind, uint32_t version,
                       const void *payload, size_t len);

/* Checks n bytes b of a whole file (path only names it in errors) as a
 * checkpoint of `kind`: on success *off and *len locate the payload in b
 * and *version is its version. Errors name the file: RP_EFORMAT (no
 * container header, another kind, truncated or trailing bytes against the
 * length), RP_EVERSION (a container version other than 1), RP_ECHECKSUM
 * (the bytes do not give the checksum: the file is corrupt). */
rp_status rp_ckpt_parse(const char *path, const char *kind,
                        const unsigned char *b, size_t n, uint32_t *version,
                        size_t *off, size_t *len);

/* RP_OK when a checkpoint container of `payload` bytes is at most max
 * bytes (the reader's limit); else RP_ERANGE, the detail (prefixed "who:")
 * giving both sizes ("more than" UINT64_MAX when the container's size
 * does not fit a u64): a saver checks before writing
 * what its reader would refuse. */
rp_status rp_ckpt_size_check(const char *who, uint64_t payload, uint64_t max);

/* Reads path (a regular file of at most max bytes) and checks it as
 * rp_ckpt_parse does; *payload (malloc'd, the caller frees it) holds the
 * *len payload bytes. Errors: those of rp_ckpt_parse and of
 * rp_file_read_regular (prefixed with the path), RP_EINVAL a NULL
 * argument; nothing is allocated on error. */
rp_status rp_ckpt_load(const char *path, const char *kind, size_t max,
                       uint32_t *version, void **payload, size_t *len);

/* A checkpoint read in pieces, in constant memory (a payload need not be
 * held whole). rp_ckpt_reader_open opens path (a regular file of at most
 * max bytes) and checks its header as rp_ckpt_parse does; with verify it
 * first reads the whole payload once for its checksum (RP_ECHECKSUM
 * before any other check of the payload, as rp_ckpt_load), else the
 * checksum is checked by rp_ckpt_reader_finish alone: a caller that uses
 * bytes before that discards what it made of them when finish fails.
 * *version and *len: the payload's version and length. Errors: those of
 * rp_ckpt_parse and rp_file_open_regular (prefixed with the path),
 * RP_ERANGE above max, RP_EIO a failed read. */
typedef struct rp_ckpt_reader rp_ckpt_reader;
rp_status rp_ckpt_reader_open(const char *path, const char *kind, uint64_t max,
                              int verify, uint32_t *version, uint64_t *len,
                              rp_ckpt_reader **out);
/* The next n payload bytes (RP_EFORMAT past its end; a file that shrank
 * since the open: RP_EFORMAT "truncated while it was read"). */
rp_status rp_ckpt_reader_read(rp_ckpt_reader *r, void *buf, size_t n);
/* After the whole payload was read: RP_ECHECKSUM when the bytes read do
 * not give the header's checksum (a corrupt file, or one rewritten since
 * the open verified it), RP_EFORMAT when the file grew. */
rp_status rp_ckpt_reader_finish(rp_ckpt_reader *r);
/* The checksum the header holds (the one the payload must give): equal
 * for equal files, so a caller that read the file once tells whether the
 * file it opens again still holds those bytes. 0 for r NULL. */
uint64_t rp_ckpt_reader_checksum(const rp_ckpt_reader *r);
/* NULL: no-op. */
void rp_ckpt_reader_close(rp_ckpt_reader *r);

/* Whether n bytes b start with the container's magic. */
int rp_ckpt_is_container(const unsigned char *b, size_t n);

#endif
